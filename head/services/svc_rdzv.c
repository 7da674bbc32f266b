/* svc_rdzv: see svc_rdzv.h. */
#include "svc_rdzv.h"

#include <stdio.h>
#include <string.h>

#include "hv.pb-c.h"
#include "log.h"
#include "mem.h"
#include "util.h"
#include "validate.h"
#include "views.h"

#define KV_MAX_KEYS 1024
#define KV_MAX_WAIT_MS 120000

/* A call of one worker: a waiting JoinRound or a WatchMembers stream (the call's data). */
typedef struct rcall_s {
    hv_svc_rdzv_t *svc;
    hv_rpc_call_t *call;
    uint64_t job_id, worker_id;
    int watch; /* 1: WatchMembers, 0: JoinRound */
    struct rcall_s *next;
} rcall_t;

typedef struct kv_s {
    uint64_t job_id;
    char *key;
    uint8_t *value;
    size_t len;
    struct kv_s *next;
} kv_t;

typedef struct kvwait_s {
    hv_svc_rdzv_t *svc;
    hv_rpc_call_t *call;
    uint64_t job_id;
    char *key;
    uint64_t deadline;
    struct kvwait_s *next;
} kvwait_t;

struct hv_svc_rdzv_s {
    hv_driver_t *d;
    rcall_t *calls;
    kv_t *kv;
    kvwait_t *waits;
};

static void rcall_unlink(hv_svc_rdzv_t *s, rcall_t *x) {
    for (rcall_t **p = &s->calls; *p != NULL; p = &(*p)->next) {
        if (*p == x) {
            *p = x->next;
            return;
        }
    }
}

static rcall_t *join_of(hv_svc_rdzv_t *s, uint64_t worker_id) {
    for (rcall_t *x = s->calls; x != NULL; x = x->next) {
        if (!x->watch && x->worker_id == worker_id) {
            return x;
        }
    }
    return NULL;
}

/* Takes a waiting join out of the table; the caller answers it. */
static hv_rpc_call_t *join_take(hv_svc_rdzv_t *s, uint64_t worker_id) {
    rcall_t *x = join_of(s, worker_id);
    if (x == NULL) {
        return NULL;
    }
    hv_rpc_call_t *c = x->call;
    rcall_unlink(s, x);
    hv_rpc_call_set_data(c, NULL);
    hv_free(x);
    return c;
}

static rcall_t *rcall_add(hv_svc_rdzv_t *s, hv_rpc_call_t *c, uint64_t job, uint64_t worker,
                          int watch) {
    rcall_t *x = hv_calloc(1, sizeof(*x));
    if (x == NULL) {
        return NULL;
    }
    x->svc = s;
    x->call = c;
    x->job_id = job;
    x->worker_id = worker;
    x->watch = watch;
    x->next = s->calls;
    s->calls = x;
    hv_rpc_call_set_data(c, x);
    return x;
}

/* ---- JoinRound ------------------------------------------------------------------------------ */

void hv_svc_rdzv_round(hv_svc_rdzv_t *s, const hv_round_info_t *r, const uint64_t *to, size_t nto) {
    Hvpb__V1__PeerInfo *peers = hv_calloc(r->size, sizeof(*peers));
    Hvpb__V1__PeerInfo **pp = hv_calloc(r->size, sizeof(*pp));
    if (peers == NULL || pp == NULL) {
        hv_free(peers);
        hv_free(pp);
        return; /* the workers' calls time out and they join again */
    }
    for (uint32_t k = 0; k < r->size; k++) {
        hvpb__v1__peer_info__init(&peers[k]);
        peers[k].rank = k;
        peers[k].worker_id = r->peers[k].worker_id;
        peers[k].addr = (char *)r->peers[k].addr;
        peers[k].host = (char *)r->peers[k].host;
        pp[k] = &peers[k];
    }
    for (size_t i = 0; i < nto; i++) {
        const hv_round_peer_t *me = NULL;
        for (uint32_t k = 0; k < r->size; k++) {
            if (r->peers[k].worker_id == to[i]) {
                me = &r->peers[k];
            }
        }
        hv_rpc_call_t *c = me != NULL ? join_take(s, to[i]) : NULL;
        if (c == NULL) {
            continue; /* not waiting now: it gets the round when it asks again */
        }
        Hvpb__V1__RdzvJoinReply rep = HVPB__V1__RDZV_JOIN_REPLY__INIT;
        rep.generation = r->generation;
        rep.rank = me->rank;
        rep.size = r->size;
        rep.local_rank = me->local_rank;
        rep.local_size = me->local_size;
        rep.cross_rank = me->cross_rank;
        rep.cross_size = r->cross_size;
        rep.peers = pp;
        rep.n_peers = r->size;
        rep.check_every = r->check_every;
        rep.reason = (char *)(r->reason ? r->reason : "");
        rep.rollback = r->rollback;
        Hvpb__V1__StateCopyRef copy = HVPB__V1__STATE_COPY_REF__INIT;
        if (r->resume) {
            copy.generation = r->copy_generation;
            copy.commit = r->copy_commit;
            copy.size = r->copy_size;
            copy.sha256 = (char *)r->copy_sha256;
            copy.stored_ms = r->copy_stored_ms;
            rep.resume = &copy;
        }
        Hvpb__V1__CopyKeeper keeper = HVPB__V1__COPY_KEEPER__INIT;
        if (r->resume && r->keeper_node != 0) { /* a peer keeps it (issue 28 §3) */
            keeper.node_id = r->keeper_node;
            keeper.addr = (char *)r->keeper_addr;
            keeper.grant = (char *)r->keeper_grant;
            keeper.expires_ms = r->keeper_expires_ms;
            keeper.node_name = (char *)r->keeper_name;
            rep.resume_keeper = &keeper;
        }
        hv_rpc_reply(c, &rep.base);
    }
    hv_free(peers);
    hv_free(pp);
}

void hv_svc_rdzv_answer(hv_svc_rdzv_t *s, uint64_t worker_id, hv_err rc, const char *why) {
    hv_rpc_call_t *c = join_take(s, worker_id);
    if (c == NULL) {
        return;
    }
    if (rc != HV_OK) {
        hv_rpc_finish(c, rc, "%s", why ? why : "");
        return;
    }
    Hvpb__V1__RdzvJoinReply rep = HVPB__V1__RDZV_JOIN_REPLY__INIT;
    rep.removed = 1;
    rep.reason = (char *)(why ? why : "");
    hv_rpc_reply(c, &rep.base);
}

static void rdzv_join(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_rdzv_t *s = ud;
    const Hvpb__V1__RdzvJoinRequest *req = (const Hvpb__V1__RdzvJoinRequest *)m;
    char verr[300];
    if (hv_validate_rdzv_join(req, verr, sizeof(verr)) != HV_OK) {
        hv_rpc_finish(c, HV_EINVAL, "%s", verr);
        return;
    }
    /* A newer join of the same worker supersedes an older one still waiting. */
    hv_rpc_call_t *old = join_take(s, req->worker_id);
    if (old != NULL) {
        hv_rpc_finish(old, HV_ECANCELED, "superseded by a newer join");
    }
    /* Registered first: the driver may answer before it returns. */
    rcall_t *x = rcall_add(s, c, req->job_id, req->worker_id, 0);
    if (x == NULL) {
        hv_rpc_finish(c, HV_ENOMEM, "out of memory");
        return;
    }
    char err[600];
    hv_err rc =
        hv_driver_rdzv_join(s->d, req->job_id, req->worker_id, req->addr, req->last_generation,
                            req->redone_samples, req->broken_peers, req->n_broken_peers,
                            req->dead_peers, req->n_dead_peers, err, sizeof(err));
    if (rc != HV_OK) {
        hv_rpc_call_t *mine = join_take(s, req->worker_id);
        if (mine != NULL) {
            hv_rpc_finish(mine, rc, "%s", err);
        }
    }
}

static void rdzv_call_done(hv_rpc_call_t *c, const hv_rpc_status_t *st, void *ud) {
    (void)st;
    hv_svc_rdzv_t *s = ud;
    rcall_t *x = hv_rpc_call_data(c);
    if (x == NULL) {
        return;
    }
    rcall_unlink(s, x);
    if (!x->watch) {
        hv_driver_rdzv_join_gone(s->d, x->worker_id); /* it gave up or died while waiting */
    }
    hv_free(x);
}

/* ---- Done ----------------------------------------------------------------------------------- */

static void rdzv_done(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_rdzv_t *s = ud;
    const Hvpb__V1__RdzvDoneRequest *req = (const Hvpb__V1__RdzvDoneRequest *)m;
    char err[600];
    hv_err rc =
        hv_driver_rdzv_done(s->d, req->job_id, req->worker_id, req->generation, err, sizeof(err));
    if (rc != HV_OK) {
        hv_rpc_finish(c, rc, "%s", err);
        return;
    }
    Hvpb__V1__RdzvDoneReply rep = HVPB__V1__RDZV_DONE_REPLY__INIT;
    hv_rpc_reply(c, &rep.base);
}

/* ---- Report: a worker's own figures ----------------------------------------------------------- */

static void rdzv_report(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_rdzv_t *s = ud;
    const Hvpb__V1__RdzvReportRequest *req = (const Hvpb__V1__RdzvReportRequest *)m;
    char verr[300];
    if (hv_validate_rdzv_report(req, verr, sizeof(verr)) != HV_OK) {
        hv_rpc_finish(c, HV_EINVAL, "%s", verr);
        return;
    }
    hv_jobfig_t d = {.allreduce_bytes = req->allreduce_bytes,
                     .allreduce_us = req->allreduce_us,
                     .allreduces = req->allreduces,
                     .commits = req->commits,
                     .commit_us = req->commit_us,
                     .steps = req->steps,
                     .step_us = req->step_us,
                     .step_size = req->step_size};
    char err[600];
    /* A report of silent neighbours alone carries no figures (an empty report of figures is
     * refused otherwise). */
    int figs = (req->allreduce_bytes | req->allreduce_us | req->allreduces | req->commits |
                req->commit_us | req->steps | req->step_us | req->step_size) != 0;
    hv_err rc = HV_OK;
    if (figs || req->n_silent == 0) {
        rc = hv_driver_rdzv_report(s->d, req->job_id, req->worker_id, req->generation, &d, err,
                                   sizeof(err));
    }
    if (rc == HV_OK && req->n_silent > 0) {
        hv_driver_silent_t sil[HV_RDZV_SILENT_MAX];
        size_t n = req->n_silent; /* at most HV_RDZV_SILENT_MAX: checked above */
        for (size_t i = 0; i < n; i++) {
            sil[i] = (hv_driver_silent_t){.worker_id = req->silent[i]->worker_id,
                                          .how = req->silent[i]->how,
                                          .silent_ms = req->silent[i]->silent_ms};
        }
        rc = hv_driver_rdzv_silent(s->d, req->job_id, req->worker_id, req->generation, sil, n, err,
                                   sizeof(err));
    }
    if (rc != HV_OK) {
        hv_rpc_finish(c, rc, "%s", err);
        return;
    }
    Hvpb__V1__RdzvReportReply rep = HVPB__V1__RDZV_REPORT_REPLY__INIT;
    hv_rpc_reply(c, &rep.base);
}

static void rdzv_resize(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_rdzv_t *s = ud;
    const Hvpb__V1__RdzvResizeRequest *req = (const Hvpb__V1__RdzvResizeRequest *)m;
    char err[600];
    uint32_t size = 0;
    hv_err rc = hv_driver_rdzv_resize(s->d, req->job_id, req->worker_id, req->size, req->reason,
                                      &size, err, sizeof(err));
    if (rc != HV_OK) {
        hv_rpc_finish(c, rc, "%s", err);
        return;
    }
    Hvpb__V1__RdzvResizeReply rep = HVPB__V1__RDZV_RESIZE_REPLY__INIT;
    rep.size = size;
    hv_rpc_reply(c, &rep.base);
}

/* ---- WatchMembers --------------------------------------------------------------------------- */

static void send_push(hv_rpc_call_t *c, uint32_t generation, int failure, uint32_t code,
                      const char *reason, const uint64_t *removed, size_t nremoved) {
    Hvpb__V1__MembershipPush p = HVPB__V1__MEMBERSHIP_PUSH__INIT;
    p.generation = generation;
    p.failure = failure;
    p.reason_code = (Hvpb__V1__EventReason)code; /* the same numbering (svc_jobs.c checks) */
    p.reason = (char *)(reason ? reason : "");
    p.removed = (uint64_t *)removed;
    p.n_removed = nremoved;
    hv_rpc_send(c, &p.base);
}

static void rdzv_watch(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_rdzv_t *s = ud;
    const Hvpb__V1__RdzvWatchRequest *req = (const Hvpb__V1__RdzvWatchRequest *)m;
    uint32_t gen = 0, code = 0;
    int failure = 0;
    const char *reason = "";
    char err[600];
    hv_err rc = hv_driver_rdzv_check(s->d, req->job_id, req->worker_id, &gen, &failure, &code,
                                     &reason, err, sizeof(err));
    if (rc != HV_OK) {
        hv_rpc_finish(c, rc, "%s", err);
        return;
    }
    if (rcall_add(s, c, req->job_id, req->worker_id, 1) == NULL) {
        hv_rpc_finish(c, HV_ENOMEM, "out of memory");
        return;
    }
    /* A worker that missed pushes (its stream broke, the head restarted) hears of the newest
     * round at once. */
    if (req->generation != 0 && gen > req->generation) {
        send_push(c, gen, failure, code, reason, NULL, 0);
    }
}

void hv_svc_rdzv_push(hv_svc_rdzv_t *s, uint64_t job_id, uint32_t generation, int failure,
                      uint32_t code, const char *reason, const uint64_t *removed, size_t nremoved) {
    size_t n = 0;
    for (rcall_t *x = s->calls; x != NULL; x = x->next) {
        if (x->watch && x->job_id == job_id) {
            send_push(x->call, generation, failure, code, reason, removed, nremoved);
            n++;
        }
    }
    HV_LOG(HV_LOG_INFO, "rdzv", "HV-RDZV-PUSH",
           "job %llu: generation %u pushed to %zu workers (%s%s)", (unsigned long long)job_id,
           generation, n, failure ? "failure: roll back; " : "", reason ? reason : "");
}

/* ---- key-value ------------------------------------------------------------------------------ */

static kv_t *kv_find(hv_svc_rdzv_t *s, uint64_t job_id, const char *key) {
    for (kv_t *kv = s->kv; kv != NULL; kv = kv->next) {
        if (kv->job_id == job_id && strcmp(kv->key, key) == 0) {
            return kv;
        }
    }
    return NULL;
}

static void kv_reply(hv_rpc_call_t *c, const kv_t *kv) {
    Hvpb__V1__KvGetReply rep = HVPB__V1__KV_GET_REPLY__INIT;
    if (kv != NULL) {
        rep.found = 1;
        rep.value.data = kv->value;
        rep.value.len = kv->len;
    }
    hv_rpc_reply(c, &rep.base);
}

static void kvwait_free(kvwait_t *w) {
    hv_free(w->key);
    hv_free(w);
}

static void rdzv_kv_put(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_rdzv_t *s = ud;
    const Hvpb__V1__KvPutRequest *req = (const Hvpb__V1__KvPutRequest *)m;
    char verr[200];
    if (hv_validate_kv_put(req, verr, sizeof(verr)) != HV_OK) {
        hv_rpc_finish(c, HV_EINVAL, "%s", verr);
        return;
    }
    if (!hv_driver_job_active(s->d, req->job_id)) {
        hv_rpc_finish(c, HV_ENOTFOUND, "no active job %llu", (unsigned long long)req->job_id);
        return;
    }
    kv_t *kv = kv_find(s, req->job_id, req->key);
    if (kv == NULL) {
        size_t count = 0;
        for (kv_t *k = s->kv; k != NULL; k = k->next) {
            count += k->job_id == req->job_id;
        }
        if (count >= KV_MAX_KEYS) {
            hv_rpc_finish(c, HV_ETOOBIG, "job %llu has too many keys (limit %d)",
                          (unsigned long long)req->job_id, KV_MAX_KEYS);
            return;
        }
        if ((kv = hv_calloc(1, sizeof(*kv))) == NULL || (kv->key = hv_strdup(req->key)) == NULL) {
            hv_free(kv);
            hv_rpc_finish(c, HV_ENOMEM, "out of memory");
            return;
        }
        kv->job_id = req->job_id;
        kv->next = s->kv;
        s->kv = kv;
    }
    uint8_t *v = hv_malloc(req->value.len ? req->value.len : 1);
    if (v == NULL) {
        hv_rpc_finish(c, HV_ENOMEM, "out of memory");
        return;
    }
    if (req->value.len > 0) {
        memcpy(v, req->value.data, req->value.len);
    }
    hv_free(kv->value);
    kv->value = v;
    kv->len = req->value.len;
    HV_LOG(HV_LOG_INFO, "rdzv", "HV-RDZV-KV", "job %llu: '%s' set (%zu bytes)",
           (unsigned long long)req->job_id, kv->key, kv->len);
    for (kvwait_t **p = &s->waits; *p != NULL;) {
        kvwait_t *w = *p;
        if (w->job_id == kv->job_id && strcmp(w->key, kv->key) == 0) {
            *p = w->next;
            hv_rpc_call_set_data(w->call, NULL);
            kv_reply(w->call, kv);
            kvwait_free(w);
        } else {
            p = &w->next;
        }
    }
    Hvpb__V1__KvPutReply rep = HVPB__V1__KV_PUT_REPLY__INIT;
    hv_rpc_reply(c, &rep.base);
}

static void rdzv_kv_get(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_rdzv_t *s = ud;
    const Hvpb__V1__KvGetRequest *req = (const Hvpb__V1__KvGetRequest *)m;
    char verr[200];
    if (hv_validate_kv_get(req, verr, sizeof(verr)) != HV_OK) {
        hv_rpc_finish(c, HV_EINVAL, "%s", verr);
        return;
    }
    if (!hv_driver_job_active(s->d, req->job_id)) {
        hv_rpc_finish(c, HV_ENOTFOUND, "no active job %llu", (unsigned long long)req->job_id);
        return;
    }
    kv_t *kv = req->key ? kv_find(s, req->job_id, req->key) : NULL;
    if (kv != NULL || req->wait_ms == 0 || req->key == NULL) {
        kv_reply(c, kv);
        return;
    }
    kvwait_t *w = hv_calloc(1, sizeof(*w));
    if (w == NULL || (w->key = hv_strdup(req->key)) == NULL) {
        hv_free(w);
        hv_rpc_finish(c, HV_ENOMEM, "out of memory");
        return;
    }
    w->svc = s;
    w->call = c;
    w->job_id = req->job_id;
    w->deadline = hv_now_ms() + (req->wait_ms < KV_MAX_WAIT_MS ? req->wait_ms : KV_MAX_WAIT_MS);
    w->next = s->waits;
    s->waits = w;
    hv_rpc_call_set_data(c, w);
}

/* A KvGet caller that went away: forget its wait. */
static void rdzv_kv_get_done(hv_rpc_call_t *c, const hv_rpc_status_t *st, void *ud) {
    (void)st;
    hv_svc_rdzv_t *s = ud;
    kvwait_t *gone = hv_rpc_call_data(c);
    for (kvwait_t **p = &s->waits; gone != NULL && *p != NULL; p = &(*p)->next) {
        if (*p == gone) {
            *p = gone->next;
            kvwait_free(gone);
            return;
        }
    }
}

void hv_svc_rdzv_tick(hv_svc_rdzv_t *s, uint64_t now) {
    for (kvwait_t **p = &s->waits; *p != NULL;) {
        kvwait_t *w = *p;
        if (now > w->deadline) {
            *p = w->next;
            hv_rpc_call_set_data(w->call, NULL);
            kv_reply(w->call, NULL);
            kvwait_free(w);
        } else {
            p = &w->next;
        }
    }
}

void hv_svc_rdzv_finished(hv_svc_rdzv_t *s, uint64_t job_id) {
    char why[96];
    snprintf(why, sizeof(why), "job %llu has ended", (unsigned long long)job_id);
    for (rcall_t **p = &s->calls; *p != NULL;) {
        rcall_t *x = *p;
        if (x->job_id != job_id) {
            p = &x->next;
            continue;
        }
        *p = x->next;
        hv_rpc_call_set_data(x->call, NULL);
        if (x->watch) {
            hv_rpc_finish(x->call, HV_OK, NULL);
        } else {
            hv_rpc_finish(x->call, HV_ESTATE, "%s", why);
        }
        hv_free(x);
    }
    for (kvwait_t **p = &s->waits; *p != NULL;) {
        kvwait_t *w = *p;
        if (w->job_id == job_id) {
            *p = w->next;
            hv_rpc_call_set_data(w->call, NULL);
            kv_reply(w->call, NULL);
            kvwait_free(w);
        } else {
            p = &w->next;
        }
    }
    for (kv_t **p = &s->kv; *p != NULL;) {
        kv_t *kv = *p;
        if (kv->job_id == job_id) {
            *p = kv->next;
            hv_free(kv->key);
            hv_free(kv->value);
            hv_free(kv);
        } else {
            p = &kv->next;
        }
    }
}

/* ---- copies of the training state ---------------------------------------------------------- */

/* A chunk of a copy from rank 0 of the job's round: the driver checks and writes it, and at
 * the last one has the file synced and published off the loop thread, stores its row, and only
 * then is it the job's newest copy and the call answered (put_state_end). */
static void put_state_reply(hv_rpc_call_t *c, int stored) {
    Hvpb__V1__PutStateReply rep = HVPB__V1__PUT_STATE_REPLY__INIT;
    rep.stored = stored;
    hv_rpc_reply(c, &rep.base);
}

/* The driver stored the copy of the call c waited for (or could not: rc, why). */
static void put_state_end(void *ud, hv_err rc, const char *why) {
    hv_rpc_call_t *c = ud;
    hv_rpc_call_set_data(c, NULL);
    if (rc == HV_OK) {
        put_state_reply(c, 1);
    } else {
        hv_rpc_finish(c, rc, "%s", why);
    }
}

static void rdzv_put_state(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_rdzv_t *s = ud;
    const Hvpb__V1__PutStateRequest *req = (const Hvpb__V1__PutStateRequest *)m;
    char err[700] = "";
    if (hv_validate_put_state(req, err, sizeof(err)) != HV_OK) {
        hv_rpc_finish(c, HV_EINVAL, "%s", err);
        return;
    }
    hv_copy_chunk_t ch = {.job_id = req->job_id,
                          .worker_id = req->worker_id,
                          .generation = req->generation,
                          .commit = req->commit,
                          .total = req->total,
                          .offset = req->offset,
                          .data = req->data.data,
                          .len = req->data.len,
                          .sha256 = req->sha256};
    hv_copy_put_t put;
    hv_err rc = hv_driver_copy_put(s->d, &ch, put_state_end, c, &put, err, sizeof(err));
    if (rc != HV_OK) {
        hv_rpc_finish(c, rc, "%s", err);
    } else if (put == HV_COPY_PUT_PENDING) {
        hv_rpc_call_set_data(c, s); /* waits for put_state_end */
    } else {
        put_state_reply(c, put == HV_COPY_PUT_STORED);
    }
}

/* A PutState caller that went away while its copy was being synced: the copy is still stored
 * (it is whole and checked), but no one is answered. */
static void rdzv_put_state_done(hv_rpc_call_t *c, const hv_rpc_status_t *st, void *ud) {
    (void)st;
    hv_svc_rdzv_t *s = ud;
    if (hv_rpc_call_data(c) != NULL) {
        hv_driver_copy_forget(s->d, c);
    }
}

/* A chunk of the job's newest copy, for the first sync of a resumed job. */
static void rdzv_fetch_state(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_rdzv_t *s = ud;
    const Hvpb__V1__FetchStateRequest *req = (const Hvpb__V1__FetchStateRequest *)m;
    char err[600] = "";
    if (hv_validate_fetch_state(req, err, sizeof(err)) != HV_OK) {
        hv_rpc_finish(c, HV_EINVAL, "%s", err);
        return;
    }
    hv_copy_row_t row;
    hv_err rc = hv_driver_copy_get(s->d, req->job_id, req->worker_id, &row, err, sizeof(err));
    if (rc != HV_OK) {
        hv_rpc_finish(c, rc, "%s", err);
        return;
    }
    if (req->commit != 0 && req->commit != row.commit) {
        hv_rpc_finish(c, HV_ENOTFOUND,
                      "the copy of commit %llu was replaced by commit %llu: start again",
                      (unsigned long long)req->commit, (unsigned long long)row.commit);
        return;
    }
    if (req->offset > row.size) {
        hv_rpc_finish(c, HV_EINVAL, "offset %llu is past the copy's %llu bytes",
                      (unsigned long long)req->offset, (unsigned long long)row.size);
        return;
    }
    size_t cap = req->max_bytes != 0 && req->max_bytes < HV_VIEW_COPY_CHUNK_MAX
                     ? req->max_bytes
                     : HV_VIEW_COPY_CHUNK_MAX;
    if (row.size - req->offset < cap) {
        cap = (size_t)(row.size - req->offset);
    }
    uint8_t *buf = hv_malloc(cap ? cap : 1);
    size_t n = 0;
    if (buf == NULL) {
        hv_rpc_finish(c, HV_ENOMEM, "out of memory");
        return;
    }
    rc = hv_view_copy_read(s->d, &row, req->offset, buf, cap, &n);
    if (rc != HV_OK || n != cap) {
        hv_free(buf);
        HV_LOG(HV_LOG_ERROR, "rdzv", "HV-COPY-READ", "job %llu: cannot read %s: %s",
               (unsigned long long)req->job_id, row.path, hv_strerror(rc));
        hv_rpc_finish(c, HV_EIO, "the head cannot read the copy of job %llu",
                      (unsigned long long)req->job_id);
        return;
    }
    Hvpb__V1__FetchStateReply rep = HVPB__V1__FETCH_STATE_REPLY__INIT;
    Hvpb__V1__StateCopyRef ref = HVPB__V1__STATE_COPY_REF__INIT;
    ref.generation = row.generation;
    ref.commit = row.commit;
    ref.size = row.size;
    ref.sha256 = row.sha256;
    ref.stored_ms = row.stored_ms;
    rep.copy = &ref;
    rep.data.data = buf;
    rep.data.len = n;
    hv_rpc_reply(c, &rep.base);
    hv_free(buf);
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

hv_err hv_svc_rdzv_create(hv_rpc_server_t *srv, hv_driver_t *d, hv_svc_rdzv_t **out) {
    hv_svc_rdzv_t *s = hv_calloc(1, sizeof(*s));
    if (s == NULL) {
        return HV_ENOMEM;
    }
    s->d = d;
    hv_rpc_method_t ms[] = {
        {"/hvpb.v1.Rendezvous/JoinRound", HV_RPC_UNARY, &hvpb__v1__rdzv_join_request__descriptor,
         rdzv_join, rdzv_call_done, s},
        {"/hvpb.v1.Rendezvous/Done", HV_RPC_UNARY, &hvpb__v1__rdzv_done_request__descriptor,
         rdzv_done, NULL, s},
        {"/hvpb.v1.Rendezvous/Resize", HV_RPC_UNARY, &hvpb__v1__rdzv_resize_request__descriptor,
         rdzv_resize, NULL, s},
        {"/hvpb.v1.Rendezvous/WatchMembers", HV_RPC_SERVER_STREAM,
         &hvpb__v1__rdzv_watch_request__descriptor, rdzv_watch, rdzv_call_done, s},
        {"/hvpb.v1.Rendezvous/KvPut", HV_RPC_UNARY, &hvpb__v1__kv_put_request__descriptor,
         rdzv_kv_put, NULL, s},
        {"/hvpb.v1.Rendezvous/KvGet", HV_RPC_UNARY, &hvpb__v1__kv_get_request__descriptor,
         rdzv_kv_get, rdzv_kv_get_done, s},
        {"/hvpb.v1.Rendezvous/PutState", HV_RPC_UNARY, &hvpb__v1__put_state_request__descriptor,
         rdzv_put_state, rdzv_put_state_done, s},
        {"/hvpb.v1.Rendezvous/FetchState", HV_RPC_UNARY, &hvpb__v1__fetch_state_request__descriptor,
         rdzv_fetch_state, NULL, s},
        {"/hvpb.v1.Rendezvous/Report", HV_RPC_UNARY, &hvpb__v1__rdzv_report_request__descriptor,
         rdzv_report, NULL, s},
    };
    hv_err rc = hv_rpc_server_add_n(srv, ms, sizeof(ms) / sizeof(ms[0]));
    if (rc != HV_OK) {
        hv_free(s);
        return rc;
    }
    *out = s;
    return HV_OK;
}

void hv_svc_rdzv_destroy(hv_svc_rdzv_t *s) {
    if (s == NULL) {
        return;
    }
    while (s->calls != NULL) {
        rcall_t *x = s->calls;
        s->calls = x->next;
        hv_free(x);
    }
    while (s->waits != NULL) {
        kvwait_t *w = s->waits;
        s->waits = w->next;
        kvwait_free(w);
    }
    while (s->kv != NULL) {
        kv_t *kv = s->kv;
        s->kv = kv->next;
        hv_free(kv->key);
        hv_free(kv->value);
        hv_free(kv);
    }
    hv_free(s);
}
