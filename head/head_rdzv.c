/*
 * head_rdzv: the Rendezvous service libhv talks to from inside train.bin. JoinRound holds each
 * worker's call until every worker of the job's current generation has joined (or the round's
 * deadline passes, which fails the waiting calls with a message saying how many joined); then it
 * answers all of them at once with rank, size, local and cross ranks and every peer's data-plane
 * address. Done records that a worker's training function returned. WatchMembers streams carry
 * membership pushes (filled in by the elastic driver). KvPut/KvGet are a small per-job store,
 * e.g. for an NCCL unique id; KvGet may wait for a key. Loop thread only.
 */
#include <stdio.h>
#include <string.h>

#include "head.h"
#include "log.h"
#include "mem.h"
#include "util.h"

#define KV_MAX_KEYS 1024
#define KV_MAX_KEY 256
#define KV_MAX_VALUE 65536
#define KV_MAX_WAIT_MS 120000

struct head_kv_s {
    char *key;
    uint8_t *value;
    size_t len;
    head_kv_t *next;
};

struct head_kvwait_s {
    hv_rpc_call_t *call;
    char *key;
    uint64_t deadline;
    head_kvwait_t *next;
};

static head_worker_t *rdzv_worker(head_t *h, uint64_t job_id, uint64_t worker_id,
                                  hv_rpc_call_t *c) {
    head_job_t *j = head_job_by_id(h, job_id);
    if (j == NULL || head_job_terminal(j)) {
        hv_rpc_finish(c, j ? HV_ESTATE : HV_ENOTFOUND, "job %llu is %s", (unsigned long long)job_id,
                      j ? j->row.state : "unknown");
        return NULL;
    }
    for (uint32_t r = 0; r < j->n_workers; r++) {
        if (j->workers[r] != NULL && j->workers[r]->row.id == worker_id) {
            return j->workers[r];
        }
    }
    hv_rpc_finish(c, HV_ENOTFOUND, "worker %llu is not part of job %llu",
                  (unsigned long long)worker_id, (unsigned long long)job_id);
    return NULL;
}

/* Answers every waiting JoinRound of a complete round. */
static void round_close(head_job_t *j) {
    uint32_t np = j->n_workers;
    Hvpb__V1__PeerInfo *peers = hv_calloc(np, sizeof(*peers));
    Hvpb__V1__PeerInfo **pp = hv_calloc(np, sizeof(*pp));
    uint32_t *cross = hv_calloc(np, sizeof(*cross));
    if (peers == NULL || pp == NULL || cross == NULL) {
        hv_free(peers);
        hv_free(pp);
        hv_free(cross);
        return; /* the round's deadline reports the failure */
    }
    /* Hosts are numbered in rank order: ranks on one host are contiguous (placement). */
    uint32_t hosts = 0;
    for (uint32_t r = 0; r < np; r++) {
        head_worker_t *w = j->workers[r];
        if (r == 0 || w->row.node_id != j->workers[r - 1]->row.node_id) {
            hosts++;
        }
        cross[r] = hosts - 1;
        hvpb__v1__peer_info__init(&peers[r]);
        peers[r].rank = r;
        peers[r].worker_id = w->row.id;
        peers[r].addr = w->rdzv_addr;
        peers[r].host = w->node ? w->node->row.name : "";
        pp[r] = &peers[r];
    }
    uint32_t gen = j->row.generation ? j->row.generation : 1;
    for (uint32_t r = 0; r < np; r++) {
        head_worker_t *w = j->workers[r];
        Hvpb__V1__RdzvJoinReply rep = HVPB__V1__RDZV_JOIN_REPLY__INIT;
        rep.generation = gen;
        rep.rank = r;
        rep.size = np;
        rep.local_rank = w->row.local_rank;
        rep.local_size = w->row.local_size;
        rep.cross_rank = cross[r];
        rep.cross_size = hosts;
        rep.peers = pp;
        rep.n_peers = np;
        hv_rpc_call_t *c = w->rdzv_call;
        w->rdzv_call = NULL;
        hv_rpc_call_set_data(c, NULL);
        hv_rpc_reply(c, &rep.base);
    }
    j->rdzv_deadline = 0;
    HV_LOG(HV_LOG_INFO, "rdzv", "HV-RDZV-ROUND",
           "job %llu: round %u closed with %u workers on %u "
           "hosts",
           (unsigned long long)j->row.id, gen, np, hosts);
    hv_free(peers);
    hv_free(pp);
    hv_free(cross);
}

static void rdzv_join(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    head_t *h = ud;
    const Hvpb__V1__RdzvJoinRequest *req = (const Hvpb__V1__RdzvJoinRequest *)m;
    head_worker_t *w = rdzv_worker(h, req->job_id, req->worker_id, c);
    if (w == NULL) {
        return;
    }
    if (req->addr == NULL || req->addr[0] == '\0' || strlen(req->addr) > 255) {
        hv_rpc_finish(c, HV_EINVAL, "a data-plane address is required");
        return;
    }
    head_job_t *j = w->job;
    if (w->rdzv_call != NULL) {
        hv_rpc_call_set_data(w->rdzv_call, NULL);
        hv_rpc_finish(w->rdzv_call, HV_ECANCELED, "superseded by a newer join");
    }
    head_set_str(&w->rdzv_addr, req->addr);
    w->rdzv_call = c;
    hv_rpc_call_set_data(c, w);
    if (j->rdzv_deadline == 0) {
        j->rdzv_deadline = hv_now_ms() + (uint64_t)h->cfg.elastic.rendezvous_timeout_s * 1000u;
    }
    for (uint32_t r = 0; r < j->n_workers; r++) {
        if (j->workers[r] == NULL || j->workers[r]->rdzv_call == NULL) {
            return; /* wait for the others */
        }
    }
    round_close(j);
}

static void rdzv_join_done(hv_rpc_call_t *c, const hv_rpc_status_t *st, void *ud) {
    (void)st;
    (void)ud;
    head_worker_t *w = hv_rpc_call_data(c);
    if (w != NULL && w->rdzv_call == c) {
        w->rdzv_call = NULL; /* the worker gave up or died while waiting */
    }
}

static void rdzv_done(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    head_t *h = ud;
    const Hvpb__V1__RdzvDoneRequest *req = (const Hvpb__V1__RdzvDoneRequest *)m;
    head_worker_t *w = rdzv_worker(h, req->job_id, req->worker_id, c);
    if (w == NULL) {
        return;
    }
    w->done = 1;
    Hvpb__V1__RdzvDoneReply rep = HVPB__V1__RDZV_DONE_REPLY__INIT;
    hv_rpc_reply(c, &rep.base);
}

static void rdzv_watch(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    head_t *h = ud;
    const Hvpb__V1__RdzvWatchRequest *req = (const Hvpb__V1__RdzvWatchRequest *)m;
    head_worker_t *w = rdzv_worker(h, req->job_id, req->worker_id, c);
    if (w == NULL) {
        return;
    }
    head_job_t *j = w->job;
    hv_rpc_call_t **nw = hv_realloc(j->member_watch, (j->n_member_watch + 1) * sizeof(*nw));
    if (nw == NULL) {
        hv_rpc_finish(c, HV_ENOMEM, "out of memory");
        return;
    }
    j->member_watch = nw;
    j->member_watch[j->n_member_watch++] = c;
    hv_rpc_call_set_data(c, j);
}

static void rdzv_watch_done(hv_rpc_call_t *c, const hv_rpc_status_t *st, void *ud) {
    (void)st;
    (void)ud;
    head_job_t *j = hv_rpc_call_data(c);
    if (j == NULL) {
        return;
    }
    for (size_t i = 0; i < j->n_member_watch; i++) {
        if (j->member_watch[i] == c) {
            j->member_watch[i] = j->member_watch[--j->n_member_watch];
            break;
        }
    }
}

static head_kv_t *kv_find(head_job_t *j, const char *key) {
    for (head_kv_t *kv = j->kv; kv != NULL; kv = kv->next) {
        if (strcmp(kv->key, key) == 0) {
            return kv;
        }
    }
    return NULL;
}

static void kv_reply(hv_rpc_call_t *c, const head_kv_t *kv) {
    Hvpb__V1__KvGetReply rep = HVPB__V1__KV_GET_REPLY__INIT;
    if (kv != NULL) {
        rep.found = 1;
        rep.value.data = kv->value;
        rep.value.len = kv->len;
    }
    hv_rpc_reply(c, &rep.base);
}

static void rdzv_kv_put(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    head_t *h = ud;
    const Hvpb__V1__KvPutRequest *req = (const Hvpb__V1__KvPutRequest *)m;
    head_job_t *j = head_job_by_id(h, req->job_id);
    if (j == NULL || head_job_terminal(j)) {
        hv_rpc_finish(c, HV_ENOTFOUND, "no active job %llu", (unsigned long long)req->job_id);
        return;
    }
    if (req->key == NULL || req->key[0] == '\0' || strlen(req->key) > KV_MAX_KEY ||
        req->value.len > KV_MAX_VALUE) {
        hv_rpc_finish(c, HV_EINVAL, "key must be 1..%d bytes and value at most %d bytes",
                      KV_MAX_KEY, KV_MAX_VALUE);
        return;
    }
    head_kv_t *kv = kv_find(j, req->key);
    if (kv == NULL) {
        size_t count = 0;
        for (head_kv_t *k = j->kv; k != NULL; k = k->next) {
            count++;
        }
        if (count >= KV_MAX_KEYS || (kv = hv_calloc(1, sizeof(*kv))) == NULL) {
            hv_rpc_finish(c, HV_ETOOBIG, "job %llu has too many keys (limit %d)",
                          (unsigned long long)req->job_id, KV_MAX_KEYS);
            return;
        }
        kv->key = hv_strdup(req->key);
        kv->next = j->kv;
        j->kv = kv;
    }
    uint8_t *v = hv_malloc(req->value.len ? req->value.len : 1);
    if (v == NULL || kv->key == NULL) {
        hv_free(v);
        hv_rpc_finish(c, HV_ENOMEM, "out of memory");
        return;
    }
    memcpy(v, req->value.data, req->value.len);
    hv_free(kv->value);
    kv->value = v;
    kv->len = req->value.len;
    HV_LOG(HV_LOG_INFO, "rdzv", "HV-RDZV-KV", "job %llu: '%s' set (%zu bytes)",
           (unsigned long long)req->job_id, kv->key, kv->len);
    for (head_kvwait_t **p = &j->kvwaits; *p != NULL;) {
        head_kvwait_t *wt = *p;
        if (strcmp(wt->key, kv->key) == 0) {
            *p = wt->next;
            hv_rpc_call_set_data(wt->call, NULL);
            kv_reply(wt->call, kv);
            hv_free(wt->key);
            hv_free(wt);
        } else {
            p = &wt->next;
        }
    }
    Hvpb__V1__KvPutReply rep = HVPB__V1__KV_PUT_REPLY__INIT;
    hv_rpc_reply(c, &rep.base);
}

static void rdzv_kv_get(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    head_t *h = ud;
    const Hvpb__V1__KvGetRequest *req = (const Hvpb__V1__KvGetRequest *)m;
    head_job_t *j = head_job_by_id(h, req->job_id);
    if (j == NULL || head_job_terminal(j)) {
        hv_rpc_finish(c, HV_ENOTFOUND, "no active job %llu", (unsigned long long)req->job_id);
        return;
    }
    head_kv_t *kv = req->key ? kv_find(j, req->key) : NULL;
    if (kv != NULL || req->wait_ms == 0) {
        kv_reply(c, kv);
        return;
    }
    head_kvwait_t *wt = hv_calloc(1, sizeof(*wt));
    if (wt == NULL || (wt->key = hv_strdup(req->key)) == NULL) {
        hv_free(wt);
        hv_rpc_finish(c, HV_ENOMEM, "out of memory");
        return;
    }
    wt->call = c;
    wt->deadline = hv_now_ms() + (req->wait_ms < KV_MAX_WAIT_MS ? req->wait_ms : KV_MAX_WAIT_MS);
    wt->next = j->kvwaits;
    j->kvwaits = wt;
    hv_rpc_call_set_data(c, wt);
}

/* A KvGet caller that went away: forget its wait. */
static void rdzv_kv_get_done(hv_rpc_call_t *c, const hv_rpc_status_t *st, void *ud) {
    (void)st;
    head_t *h = ud;
    head_kvwait_t *gone = hv_rpc_call_data(c);
    if (gone == NULL) {
        return;
    }
    for (head_job_t *j = h->jobs; j != NULL; j = j->next) {
        for (head_kvwait_t **p = &j->kvwaits; *p != NULL; p = &(*p)->next) {
            if (*p == gone) {
                *p = gone->next;
                hv_free(gone->key);
                hv_free(gone);
                return;
            }
        }
    }
}

hv_err head_rdzv_register(head_t *h) {
    hv_rpc_method_t ms[] = {
        {"/hvpb.v1.Rendezvous/JoinRound", HV_RPC_UNARY, &hvpb__v1__rdzv_join_request__descriptor,
         rdzv_join, rdzv_join_done, h},
        {"/hvpb.v1.Rendezvous/Done", HV_RPC_UNARY, &hvpb__v1__rdzv_done_request__descriptor,
         rdzv_done, NULL, h},
        {"/hvpb.v1.Rendezvous/WatchMembers", HV_RPC_SERVER_STREAM,
         &hvpb__v1__rdzv_watch_request__descriptor, rdzv_watch, rdzv_watch_done, h},
        {"/hvpb.v1.Rendezvous/KvPut", HV_RPC_UNARY, &hvpb__v1__kv_put_request__descriptor,
         rdzv_kv_put, NULL, h},
        {"/hvpb.v1.Rendezvous/KvGet", HV_RPC_UNARY, &hvpb__v1__kv_get_request__descriptor,
         rdzv_kv_get, rdzv_kv_get_done, h},
    };
    for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
        HV_TRY(hv_rpc_server_add(h->srv, &ms[i]));
    }
    return HV_OK;
}

static void fail_round(head_job_t *j, hv_err rc, const char *why) {
    for (uint32_t r = 0; r < j->n_workers; r++) {
        head_worker_t *w = j->workers[r];
        if (w != NULL && w->rdzv_call != NULL) {
            hv_rpc_call_set_data(w->rdzv_call, NULL);
            hv_rpc_finish(w->rdzv_call, rc, "%s", why);
            w->rdzv_call = NULL;
        }
    }
    j->rdzv_deadline = 0;
}

void head_rdzv_tick(head_t *h, uint64_t now) {
    for (head_job_t *j = h->jobs; j != NULL; j = j->next) {
        if (j->rdzv_deadline != 0 && now > j->rdzv_deadline) {
            uint32_t joined = 0;
            for (uint32_t r = 0; r < j->n_workers; r++) {
                joined += j->workers[r] != NULL && j->workers[r]->rdzv_call != NULL;
            }
            char why[160];
            snprintf(why, sizeof(why), "rendezvous timed out after %u s: %u of %u workers joined",
                     h->cfg.elastic.rendezvous_timeout_s, joined, j->n_workers);
            HV_LOG(HV_LOG_WARN, "rdzv", "HV-RDZV-TIMEOUT", "job %llu: %s",
                   (unsigned long long)j->row.id, why);
            fail_round(j, HV_ETIMEDOUT, why);
        }
        for (head_kvwait_t **p = &j->kvwaits; *p != NULL;) {
            head_kvwait_t *wt = *p;
            if (now > wt->deadline) {
                *p = wt->next;
                hv_rpc_call_set_data(wt->call, NULL);
                kv_reply(wt->call, NULL);
                hv_free(wt->key);
                hv_free(wt);
            } else {
                p = &wt->next;
            }
        }
    }
}

void head_rdzv_job_ended(head_t *h, head_job_t *j) {
    (void)h;
    char why[96];
    snprintf(why, sizeof(why), "job %llu has ended (%s)", (unsigned long long)j->row.id,
             j->row.state);
    fail_round(j, HV_ESTATE, why);
    while (j->kvwaits != NULL) {
        head_kvwait_t *wt = j->kvwaits;
        j->kvwaits = wt->next;
        hv_rpc_call_set_data(wt->call, NULL);
        kv_reply(wt->call, NULL);
        hv_free(wt->key);
        hv_free(wt);
    }
    for (size_t i = 0; i < j->n_member_watch; i++) {
        hv_rpc_call_set_data(j->member_watch[i], NULL);
        hv_rpc_finish(j->member_watch[i], HV_OK, NULL);
    }
    j->n_member_watch = 0;
}

void head_rdzv_free_job(head_job_t *j) {
    head_rdzv_job_ended(NULL, j);
    hv_free(j->member_watch);
    j->member_watch = NULL;
    while (j->kv != NULL) {
        head_kv_t *kv = j->kv;
        j->kv = kv->next;
        hv_free(kv->key);
        hv_free(kv->value);
        hv_free(kv);
    }
}
