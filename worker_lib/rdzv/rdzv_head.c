/*
 * rdzv_head: the rendezvous client for the head's Rendezvous service (proto/hv.proto: JoinRound,
 * Done, WatchMembers, KvPut, KvGet), over the blocking calls of common/rpc.h. It is the only
 * worker_lib file that sees protobuf types; it converts them to hv__rdzv_assignment_t and
 * hv__rdzv_push_t and checks what the head sent (ranks in range, addresses present) before
 * anything else uses it. It is not the elastic logic (member.c, elastic.c): it only carries
 * calls and pushes.
 *
 * The head may be restarted (even SIGKILLed) while a job trains, so every call here retries
 * UNAVAILABLE with a bounded backoff within its own deadline: JoinRound within the rendezvous
 * timeout, Done within HEAD_DONE_BUDGET_MS, the KV within its wait. The push watcher is a thread
 * that keeps one WatchMembers stream open, reconnecting with backoff for as long as it runs;
 * every wait in it is bounded so that watch_stop returns promptly (a report in flight: within
 * HEAD_REPORT_CALL_MS).
 *
 * The worker's own figures (figures.h: allreduce bytes and time, commits and their time) go to
 * the head with Report: the watcher thread sends what grew every HEAD_REPORT_MS, and the last of
 * it is sent when the watcher stops and before Done, so a job's totals are complete when it
 * ends; the process' first commit is reported at once, from the training thread (rdzv.h report). A report is one try with a short deadline: a figure that cannot be sent now goes with
 * the next one (what was sent is advanced only on success; a report the head applied but whose
 * reply was lost is counted twice, which a short deadline makes rare).
 *
 * Threading: join/done/kv are called by one thread at a time; the watcher thread shares only
 * the gRPC channel (thread-safe), the read-only ids and the report state (under rep_mu) with
 * them.
 */
#include "rdzv.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "figures.h"
#include "hv.pb-c.h"
#include "log.h"
#include "mem.h"
#include "rpc.h"
#include "sha256.h"
#include "util.h"

#define HEAD_CALL_MS 10000        // Done, KvPut: plain unary calls
#define HEAD_JOIN_SLACK_MS 10000  // JoinRound blocks until the round closes; give it room
#define HEAD_DONE_BUDGET_MS 30000 // Done retries an unreachable head this long
#define HEAD_BACKOFF_MIN_MS 100
#define HEAD_BACKOFF_MAX_MS 2000
#define HEAD_WATCH_POLL_MS 200 // the watcher checks its stop flag at least this often
#define HEAD_KV_VALUE_MAX (64u << 10)
// The watcher reports the worker's figures this often (HV_FIGURES_REPORT_MS sets another period).
#define HEAD_REPORT_MS 10000
#define HEAD_REPORT_CALL_MS 3000
#define HEAD_SILENT_CALL_MS 2000   // one try of a report of silent neighbours
#define HEAD_SILENT_BUDGET_MS 3000 // retried while the head is unreachable, this long at most
#define HEAD_SILENT_MAX 6          // silences waiting to be reported (two per ring, at most)

typedef struct head_client_s {
    hv_rpc_channel_t *ch; // owned; thread-safe (shared with the watcher thread)
    uint64_t job_id;
    uint64_t worker_id;
    char target[256];
    char last_error[512]; // detail of the last failed call (the calling thread's)
    uint64_t redone;      // samples a rollback sent back, for the next join (training thread)
    uint64_t broken[HV_RDZV_BROKEN_MAX]; // ring neighbours whose link broke, for the next join
    size_t n_broken;                     // (training thread)
    uint64_t dead[HV_RDZV_DEAD_MAX];     // of those, the ones the death watch saw die
    size_t n_dead;                       // (training thread)
    pthread_mutex_t rep_mu; // guards the report state below (watcher and training threads)
    hv__figures_t sent;     // the figures the head has (what Report carried so far)
    uint64_t sent_ms;       // monotonic ms of the last report sent (or tried)
    uint64_t report_ms;     // the period of the reports (HEAD_REPORT_MS, HV_FIGURES_REPORT_MS)
    int no_report;          // 1: the head does not serve Report (an older head): never again
    uint32_t generation;    // the round of the last join (rep_mu: the report threads read it)
    // Silent ring neighbours (note_silent) waiting for the silence thread, under sil_mu.
    pthread_mutex_t sil_mu;
    pthread_cond_t sil_cv;
    Hvpb__V1__RdzvSilentPeer sil[HEAD_SILENT_MAX];
    uint32_t sil_gen[HEAD_SILENT_MAX];
    size_t n_sil;
    int sil_started, sil_stop;
    pthread_t sil_thread;
    // Copies kept by peers (issue 28 §3). The copier thread's channel to its last keeper:
    hv_rpc_channel_t *kch; // owned (copier thread)
    char kch_addr[256];
    int no_plan; // the head does not serve PlanCopy (an older head): copies go to it
    // The keeper of the copy the last join's round resumes from (training thread; node 0: none).
    Hvpb__V1__CopyKeeper rk;
    char rk_addr[256], rk_grant[65], rk_name[130];
    uint32_t rk_gen;
    uint64_t rk_commit, rk_size;
} head_client_t;

static void sleep_ms(uint64_t ms) {
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* One unary call, retried while the head is unreachable (HV_EUNAVAIL) until budget_ms has
 * passed since the first try; each try gets call_ms (plus what is left of the budget when
 * stretch is set: JoinRound blocks for the round). */
static hv_err head_unary(head_client_t *c, const char *path, const ProtobufCMessage *req,
                         const ProtobufCMessageDescriptor *desc, uint32_t budget_ms,
                         uint32_t call_ms, int stretch, ProtobufCMessage **resp,
                         hv_rpc_status_t *st) {
    uint64_t deadline = hv_now_ms() + budget_ms;
    uint64_t backoff = HEAD_BACKOFF_MIN_MS;
    int tries = 0;
    for (;;) {
        uint64_t now = hv_now_ms();
        uint64_t left = deadline > now ? deadline - now : 0;
        uint32_t ms = call_ms + (stretch ? (uint32_t)left : 0);
        hv_err rc = hv_rpc_unary(c->ch, path, req, desc, ms, resp, st);
        tries++;
        if (rc != HV_EUNAVAIL) {
            return rc;
        }
        now = hv_now_ms();
        if (now >= deadline) {
            HV_LOG(HV_LOG_WARN, "rdzv", "HV-RDZV-UNAVAIL",
                   "job %llu worker %llu: the head at %s stayed unreachable for %u ms (%d tries "
                   "of %s)",
                   (unsigned long long)c->job_id, (unsigned long long)c->worker_id, c->target,
                   budget_ms, tries, path);
            return rc;
        }
        if (tries == 1) {
            HV_LOG(HV_LOG_INFO, "rdzv", "HV-RDZV-RETRY",
                   "job %llu worker %llu: the head at %s is unreachable (%s): retrying %s",
                   (unsigned long long)c->job_id, (unsigned long long)c->worker_id, c->target,
                   st != NULL ? st->msg : "", path);
        }
        sleep_ms(backoff < deadline - now ? backoff : deadline - now);
        backoff = backoff * 2 > HEAD_BACKOFF_MAX_MS ? HEAD_BACKOFF_MAX_MS : backoff * 2;
    }
}

static hv_err head_join(void *ctx, const char *my_addr, const char *my_host, uint32_t last_gen,
                        uint32_t timeout_ms, hv__rdzv_assignment_t *out) {
    (void)my_host; // the head knows the node from the agent that spawned us
    head_client_t *c = ctx;
    Hvpb__V1__RdzvJoinRequest req = HVPB__V1__RDZV_JOIN_REQUEST__INIT;
    req.job_id = c->job_id;
    req.worker_id = c->worker_id;
    req.addr = (char *)my_addr;
    req.last_generation = last_gen;
    req.redone_samples = c->redone;
    req.broken_peers = c->broken;
    req.n_broken_peers = c->n_broken;
    req.dead_peers = c->dead;
    req.n_dead_peers = c->n_dead;
    ProtobufCMessage *resp = NULL;
    hv_rpc_status_t st = {0};
    c->last_error[0] = '\0';
    hv_err rc = head_unary(c, "/hvpb.v1.Rendezvous/JoinRound", &req.base,
                           &hvpb__v1__rdzv_join_reply__descriptor, timeout_ms, HEAD_JOIN_SLACK_MS,
                           1, &resp, &st);
    if (rc != HV_OK) {
        snprintf(c->last_error, sizeof(c->last_error), "%s", st.msg);
        HV_LOG(rc == HV_ENOTSUP ? HV_LOG_INFO : HV_LOG_ERROR, "rdzv", "HV-RDZV-JOIN",
               "job %llu worker %llu: JoinRound at %s failed: %s (%s)",
               (unsigned long long)c->job_id, (unsigned long long)c->worker_id, c->target,
               hv_strerror(rc), st.msg);
        return rc;
    }
    c->redone = 0; /* the head has it */
    c->n_broken = 0;
    c->n_dead = 0;
    Hvpb__V1__RdzvJoinReply *r = (Hvpb__V1__RdzvJoinReply *)resp;
    pthread_mutex_lock(&c->rep_mu);
    c->generation = r->generation;
    pthread_mutex_unlock(&c->rep_mu);
    hv__rdzv_assignment_t a = {0};
    a.world_id = c->job_id;
    a.generation = r->generation;
    a.check_every = r->check_every;
    a.rollback = r->rollback;
    c->rk.node_id = 0;
    if (r->resume != NULL && r->resume->commit > 0 && r->resume_keeper != NULL &&
        r->resume_keeper->node_id != 0 && r->resume_keeper->addr != NULL &&
        r->resume_keeper->grant != NULL) {
        hvpb__v1__copy_keeper__init(&c->rk);
        c->rk.node_id = r->resume_keeper->node_id;
        c->rk.expires_ms = r->resume_keeper->expires_ms;
        snprintf(c->rk_addr, sizeof(c->rk_addr), "%s", r->resume_keeper->addr);
        snprintf(c->rk_grant, sizeof(c->rk_grant), "%s", r->resume_keeper->grant);
        snprintf(c->rk_name, sizeof(c->rk_name), "%s",
                 r->resume_keeper->node_name ? r->resume_keeper->node_name : "?");
        c->rk_gen = r->resume->generation;
        c->rk_commit = r->resume->commit;
        c->rk_size = r->resume->size;
    }
    if (r->resume != NULL && r->resume->commit > 0) {
        a.resume = 1;
        a.resume_generation = r->resume->generation;
        a.resume_commit = r->resume->commit;
        a.resume_size = r->resume->size;
        uint64_t now = hv_wall_ms();
        a.resume_age_ms = now > r->resume->stored_ms ? now - r->resume->stored_ms : 0;
    }
    snprintf(a.reason, sizeof(a.reason), "%s", r->reason ? r->reason : "");
    if (r->removed) {
        // Drained: no rank, no peers. The caller leaves the job without Done.
        a.removed = 1;
        HV_LOG(HV_LOG_INFO, "rdzv", "HV-RDZV-REMOVED",
               "job %llu worker %llu: removed from the job at generation %u (%s)",
               (unsigned long long)c->job_id, (unsigned long long)c->worker_id, r->generation,
               a.reason);
        *out = a;
        hv_rpc_msg_free(resp);
        return HV_OK;
    }
    rc = HV_EPROTO;
    if (r->size == 0 || r->rank >= r->size || r->n_peers != r->size || r->size > (1u << 20)) {
        HV_LOG(HV_LOG_ERROR, "rdzv", "HV-RDZV-REPLY",
               "JoinRound reply is inconsistent: rank %u size %u with %zu peers", r->rank, r->size,
               r->n_peers);
        goto out;
    }
    a.peers = hv_calloc(r->size, sizeof(hv__rdzv_peer_t));
    if (a.peers == NULL) {
        rc = HV_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < r->n_peers; i++) {
        const Hvpb__V1__PeerInfo *p = r->peers[i];
        if (p->rank >= r->size || a.peers[p->rank].addr[0] != '\0' || p->addr == NULL ||
            p->addr[0] == '\0' || strlen(p->addr) >= HV_RDZV_ADDR_MAX) {
            HV_LOG(HV_LOG_ERROR, "rdzv", "HV-RDZV-REPLY",
                   "JoinRound reply: peer %zu (rank %u, addr '%s') is invalid or duplicated", i,
                   p->rank, p->addr ? p->addr : "");
            goto out;
        }
        hv__rdzv_peer_t *q = &a.peers[p->rank];
        q->rank = (int)p->rank;
        q->worker_id = p->worker_id;
        snprintf(q->addr, sizeof(q->addr), "%s", p->addr);
        snprintf(q->host, sizeof(q->host), "%s", p->host ? p->host : "");
    }
    a.rank = (int)r->rank;
    a.size = (int)r->size;
    a.local_rank = (int)r->local_rank;
    a.local_size = (int)r->local_size;
    a.cross_rank = (int)r->cross_rank;
    a.cross_size = (int)r->cross_size;
    if (a.local_size == 0 || a.local_rank >= a.local_size || a.cross_size == 0) {
        hv__rdzv_fill_topology(&a); // an older head: derive from the peers' hosts
    }
    *out = a;
    a.peers = NULL;
    rc = HV_OK;
out:
    hv_free(a.peers);
    hv_rpc_msg_free(resp);
    return rc;
}

/* Reports the figures that grew since the last report (nothing when none did). One try of
 * HEAD_REPORT_CALL_MS; errors are logged at DEBUG only (the next report carries the figures). */
static void head_report(head_client_t *c) {
    pthread_mutex_lock(&c->rep_mu);
    hv__figures_t now, d;
    hv__figures_read(&now);
    d = hv__figures_sub(&now, &c->sent);
    c->sent_ms = hv_now_ms();
    if (c->no_report || hv__figures_zero(&d)) {
        pthread_mutex_unlock(&c->rep_mu);
        return;
    }
    Hvpb__V1__RdzvReportRequest req = HVPB__V1__RDZV_REPORT_REQUEST__INIT;
    req.job_id = c->job_id;
    req.worker_id = c->worker_id;
    req.allreduce_bytes = d.allreduce_bytes;
    req.allreduce_us = d.allreduce_us;
    req.allreduces = d.allreduces;
    req.commits = d.commits;
    req.commit_us = d.commit_us;
    /* Steps at one size (a failed call loses them: the next ones measure the same). */
    if (hv__figures_take_steps(&req.steps, &req.step_us, &req.step_size) && req.step_us == 0) {
        req.steps = 0; /* not measurable: under a microsecond in all */
        req.step_size = 0;
    }
    req.generation = c->generation;
    ProtobufCMessage *resp = NULL;
    hv_rpc_status_t st = {0};
    hv_err rc =
        hv_rpc_unary(c->ch, "/hvpb.v1.Rendezvous/Report", &req.base,
                     &hvpb__v1__rdzv_report_reply__descriptor, HEAD_REPORT_CALL_MS, &resp, &st);
    if (rc == HV_OK || rc == HV_EINVAL) {
        c->sent = now; /* EINVAL: figures the head will never take are dropped, not resent */
    } else if (rc == HV_ENOTSUP || rc == HV_ESTATE || rc == HV_ENOTFOUND || rc == HV_EPERM ||
               rc == HV_EAUTH) {
        c->no_report = 1; /* an older head, an ended job, a worker it does not know: stop */
    }
    if (rc != HV_OK) {
        HV_LOG(HV_LOG_DEBUG, "rdzv", "HV-RDZV-REPORT",
               "job %llu worker %llu: Report failed: %s (%s)", (unsigned long long)c->job_id,
               (unsigned long long)c->worker_id, hv_strerror(rc), st.msg);
    }
    pthread_mutex_unlock(&c->rep_mu);
    hv_rpc_msg_free(resp);
}

/* ---- silent ring neighbours: told to the head from a thread of their own ---------------- */

/* Sends one report of silent neighbours (no figures: those keep their own accounting), retried
 * while the head is unreachable for HEAD_SILENT_BUDGET_MS. A refusal is logged: the lease and
 * the ring's own evidence still bound the loss. */
static void silent_send(head_client_t *c, uint32_t gen, Hvpb__V1__RdzvSilentPeer *sp, size_t n) {
    Hvpb__V1__RdzvSilentPeer *ptrs[HEAD_SILENT_MAX];
    for (size_t i = 0; i < n; i++) {
        ptrs[i] = &sp[i];
    }
    Hvpb__V1__RdzvReportRequest req = HVPB__V1__RDZV_REPORT_REQUEST__INIT;
    req.job_id = c->job_id;
    req.worker_id = c->worker_id;
    req.generation = gen;
    req.silent = ptrs;
    req.n_silent = n;
    ProtobufCMessage *resp = NULL;
    hv_rpc_status_t st = {0};
    hv_err rc = head_unary(c, "/hvpb.v1.Rendezvous/Report", &req.base,
                           &hvpb__v1__rdzv_report_reply__descriptor, HEAD_SILENT_BUDGET_MS,
                           HEAD_SILENT_CALL_MS, 0, &resp, &st);
    HV_LOG(rc == HV_OK ? HV_LOG_INFO : HV_LOG_WARN, "rdzv", "HV-RDZV-SILENT",
           "job %llu worker %llu: told the head that %zu ring neighbour(s) of generation %u fell "
           "silent (worker %llu first): %s%s%s",
           (unsigned long long)c->job_id, (unsigned long long)c->worker_id, n, gen,
           (unsigned long long)sp[0].worker_id, hv_strerror(rc), st.msg[0] ? ": " : "", st.msg);
    hv_rpc_msg_free(resp);
}

static void *silent_main(void *arg) {
    head_client_t *c = arg;
    pthread_mutex_lock(&c->sil_mu);
    for (;;) {
        while (!c->sil_stop && c->n_sil == 0) {
            pthread_cond_wait(&c->sil_cv, &c->sil_mu);
        }
        if (c->sil_stop) {
            break;
        }
        // One report per round: the silences of the oldest round waiting, together.
        Hvpb__V1__RdzvSilentPeer sp[HEAD_SILENT_MAX];
        uint32_t gen = c->sil_gen[0];
        size_t n = 0, k = 0;
        for (size_t i = 0; i < c->n_sil; i++) {
            if (c->sil_gen[i] == gen) {
                sp[n++] = c->sil[i];
            } else {
                c->sil[k] = c->sil[i];
                c->sil_gen[k++] = c->sil_gen[i];
            }
        }
        c->n_sil = k;
        pthread_mutex_unlock(&c->sil_mu);
        silent_send(c, gen, sp, n);
        pthread_mutex_lock(&c->sil_mu);
    }
    pthread_mutex_unlock(&c->sil_mu);
    return NULL;
}

/* Called on the data plane's liveness thread: queues and wakes the silence thread (started at
 * the first silence). Never blocks for long: the lock is held only around the queue. */
static void head_note_silent(void *ctx, uint32_t generation, uint64_t worker_id, unsigned how,
                             uint32_t silent_ms) {
    head_client_t *c = ctx;
    pthread_mutex_lock(&c->sil_mu);
    if (!c->sil_started && !c->sil_stop) {
        c->sil_started = pthread_create(&c->sil_thread, NULL, silent_main, c) == 0;
    }
    if (c->sil_started && c->n_sil < HEAD_SILENT_MAX) {
        Hvpb__V1__RdzvSilentPeer p = HVPB__V1__RDZV_SILENT_PEER__INIT;
        p.worker_id = worker_id;
        p.how = how;
        p.silent_ms = silent_ms;
        c->sil[c->n_sil] = p;
        c->sil_gen[c->n_sil++] = generation;
        pthread_cond_signal(&c->sil_cv);
    }
    pthread_mutex_unlock(&c->sil_mu);
}

/* Whether a periodic report is due (the watcher asks after each poll). */
static int head_report_due(head_client_t *c) {
    pthread_mutex_lock(&c->rep_mu);
    int due = !c->no_report && hv_now_ms() - c->sent_ms >= c->report_ms;
    pthread_mutex_unlock(&c->rep_mu);
    return due;
}

static hv_err head_done(void *ctx, uint32_t generation) {
    head_client_t *c = ctx;
    head_report(c); /* the last figures reach the job's totals before it can end */
    Hvpb__V1__RdzvDoneRequest req = HVPB__V1__RDZV_DONE_REQUEST__INIT;
    req.job_id = c->job_id;
    req.worker_id = c->worker_id;
    req.generation = generation;
    ProtobufCMessage *resp = NULL;
    hv_rpc_status_t st = {0};
    hv_err rc =
        head_unary(c, "/hvpb.v1.Rendezvous/Done", &req.base, &hvpb__v1__rdzv_done_reply__descriptor,
                   HEAD_DONE_BUDGET_MS, HEAD_CALL_MS, 0, &resp, &st);
    if (rc != HV_OK) {
        snprintf(c->last_error, sizeof(c->last_error), "%s", st.msg);
        HV_LOG(HV_LOG_WARN, "rdzv", "HV-RDZV-DONE",
               "job %llu worker %llu: Done (generation %u) failed: %s (%s)",
               (unsigned long long)c->job_id, (unsigned long long)c->worker_id, generation,
               hv_strerror(rc), st.msg);
    }
    hv_rpc_msg_free(resp);
    return rc;
}

static hv_err head_resize(void *ctx, uint32_t size, const char *reason, uint32_t *accepted) {
    head_client_t *c = ctx;
    Hvpb__V1__RdzvResizeRequest req = HVPB__V1__RDZV_RESIZE_REQUEST__INIT;
    req.job_id = c->job_id;
    req.worker_id = c->worker_id;
    req.size = size;
    req.reason = (char *)(reason ? reason : "");
    ProtobufCMessage *resp = NULL;
    hv_rpc_status_t st = {0};
    hv_err rc = head_unary(c, "/hvpb.v1.Rendezvous/Resize", &req.base,
                           &hvpb__v1__rdzv_resize_reply__descriptor, HEAD_DONE_BUDGET_MS,
                           HEAD_CALL_MS, 0, &resp, &st);
    if (rc != HV_OK) {
        snprintf(c->last_error, sizeof(c->last_error), "%s", st.msg);
    } else if (accepted != NULL) {
        *accepted = ((Hvpb__V1__RdzvResizeReply *)resp)->size;
    }
    hv_rpc_msg_free(resp);
    return rc;
}

static hv_err head_kv_put(void *ctx, const char *key, const void *value, size_t len) {
    head_client_t *c = ctx;
    if (strlen(key) > 256 || len > HEAD_KV_VALUE_MAX) {
        return HV_ETOOBIG;
    }
    Hvpb__V1__KvPutRequest req = HVPB__V1__KV_PUT_REQUEST__INIT;
    req.job_id = c->job_id;
    req.key = (char *)key;
    req.value.data = (uint8_t *)value;
    req.value.len = len;
    ProtobufCMessage *resp = NULL;
    hv_err rc =
        head_unary(c, "/hvpb.v1.Rendezvous/KvPut", &req.base, &hvpb__v1__kv_put_reply__descriptor,
                   HEAD_CALL_MS, HEAD_CALL_MS, 0, &resp, NULL);
    hv_rpc_msg_free(resp);
    return rc;
}

/* ---- copies of the state (PutState, FetchState) ---- */

#define HEAD_STATE_CHUNK ((size_t)1 << 20)
#define HEAD_STATE_MAX ((uint64_t)1 << 36)

/* A channel to a keeper agent's Keeper service (TLS with HV_CA_FILE, as the head's). */
static hv_err keeper_channel(const char *addr, hv_rpc_channel_t **out) {
    const char *ca = getenv("HV_CA_FILE");
    hv_rpc_tls_t tls = {.ca_file = ca};
    char err[512] = "";
    hv_err rc = hv_rpc_channel_create_tls(addr, ca != NULL && ca[0] != '\0' ? &tls : NULL, out, err,
                                          sizeof(err));
    if (rc != HV_OK) {
        HV_LOG(HV_LOG_WARN, "rdzv", "HV-RDZV-KEEPER",
               "cannot open a channel to the keeper at %s: %s", addr,
               err[0] ? err : hv_strerror(rc));
    }
    return rc;
}

/* The copy to a peer agent (issue 28 §3): PlanCopy names the keeper and its grant, the chunks go
 * to it directly, and CopyKept has the head store the index. HV_ENOTFOUND: no keeper (or an
 * older head), the caller sends to the head; HV_EPERM/HV_ESTATE: the head refused the copy
 * itself (fenced, or an older one); other errors: the keeper failed, the head is the fallback. */
static hv_err peer_put_state(head_client_t *c, uint32_t generation, uint64_t commit,
                             const void *data, size_t len, const char *hex) {
    if (c->no_plan) {
        return HV_ENOTFOUND;
    }
    Hvpb__V1__PlanCopyRequest preq = HVPB__V1__PLAN_COPY_REQUEST__INIT;
    preq.job_id = c->job_id;
    preq.worker_id = c->worker_id;
    preq.generation = generation;
    preq.commit = commit;
    preq.size = len;
    ProtobufCMessage *resp = NULL;
    hv_rpc_status_t st = {0};
    hv_err rc = hv_rpc_unary(c->ch, "/hvpb.v1.Rendezvous/PlanCopy", &preq.base,
                             &hvpb__v1__plan_copy_reply__descriptor, HEAD_CALL_MS, &resp, &st);
    if (rc == HV_ENOTSUP) {
        c->no_plan = 1;
        return HV_ENOTFOUND;
    }
    if (rc != HV_OK) {
        return rc == HV_EPERM || rc == HV_ESTATE ? rc : HV_ENOTFOUND;
    }
    const Hvpb__V1__PlanCopyReply *plan = (const Hvpb__V1__PlanCopyReply *)resp;
    if (plan->keeper == NULL || plan->keeper->addr == NULL || plan->keeper->grant == NULL) {
        HV_LOG(HV_LOG_DEBUG, "rdzv", "HV-RDZV-KEEPER", "job %llu: no keeper for this copy (%s)",
               (unsigned long long)c->job_id, plan->why ? plan->why : "");
        hv_rpc_msg_free(resp);
        return HV_ENOTFOUND;
    }
    uint64_t node = plan->keeper->node_id, expires = plan->keeper->expires_ms;
    char grant[65], name[130];
    snprintf(grant, sizeof(grant), "%s", plan->keeper->grant);
    snprintf(name, sizeof(name), "%s", plan->keeper->node_name ? plan->keeper->node_name : "?");
    if (c->kch == NULL || strcmp(c->kch_addr, plan->keeper->addr) != 0) {
        hv_rpc_channel_destroy(c->kch);
        c->kch = NULL;
        snprintf(c->kch_addr, sizeof(c->kch_addr), "%s", plan->keeper->addr);
        rc = keeper_channel(c->kch_addr, &c->kch);
    }
    hv_rpc_msg_free(resp);
    for (size_t off = 0; rc == HV_OK && off < len;) {
        size_t n = len - off < HEAD_STATE_CHUNK ? len - off : HEAD_STATE_CHUNK;
        Hvpb__V1__KeepChunk req = HVPB__V1__KEEP_CHUNK__INIT;
        req.job_id = c->job_id;
        req.generation = generation;
        req.commit = commit;
        req.size = len;
        req.offset = off;
        req.data.data = (uint8_t *)data + off;
        req.data.len = n;
        req.sha256 = off + n == len ? (char *)hex : "";
        req.keeper_node = node;
        req.expires_ms = expires;
        req.grant = grant;
        resp = NULL;
        rc = hv_rpc_unary(c->kch, "/hvpb.v1.Keeper/Put", &req.base,
                          &hvpb__v1__keep_reply__descriptor, HEAD_CALL_MS, &resp, &st);
        if (rc == HV_OK && off + n == len && !((Hvpb__V1__KeepReply *)resp)->complete) {
            rc = HV_EPROTO;
        }
        hv_rpc_msg_free(resp);
        off += n;
    }
    if (rc != HV_OK) {
        HV_LOG(HV_LOG_WARN, "rdzv", "HV-RDZV-KEEPER",
               "job %llu: node %s's agent (%s) did not keep the copy of generation %u, commit "
               "%llu: %s (%s); sending it to the head",
               (unsigned long long)c->job_id, name, c->kch_addr, generation,
               (unsigned long long)commit, hv_strerror(rc), st.msg);
        return HV_EPEER;
    }
    Hvpb__V1__CopyKeptRequest kreq = HVPB__V1__COPY_KEPT_REQUEST__INIT;
    kreq.job_id = c->job_id;
    kreq.worker_id = c->worker_id;
    kreq.generation = generation;
    kreq.commit = commit;
    kreq.size = len;
    kreq.sha256 = (char *)hex;
    kreq.keeper_node = node;
    resp = NULL;
    rc = hv_rpc_unary(c->ch, "/hvpb.v1.Rendezvous/CopyKept", &kreq.base,
                      &hvpb__v1__copy_kept_reply__descriptor, HEAD_CALL_MS, &resp, &st);
    hv_rpc_msg_free(resp);
    if (rc != HV_OK) {
        HV_LOG(rc == HV_ESTATE || rc == HV_EPERM ? HV_LOG_INFO : HV_LOG_WARN, "rdzv",
               "HV-RDZV-KEEPER",
               "job %llu: the head did not record node %s's copy of generation %u, commit %llu: "
               "%s (%s)",
               (unsigned long long)c->job_id, name, generation, (unsigned long long)commit,
               hv_strerror(rc), st.msg);
        return rc == HV_ESTATE || rc == HV_EPERM ? rc : HV_EPEER;
    }
    HV_LOG(HV_LOG_DEBUG, "rdzv", "HV-RDZV-KEEPER",
           "job %llu: node %s keeps the copy of generation %u, commit %llu (%zu bytes)",
           (unsigned long long)c->job_id, name, generation, (unsigned long long)commit, len);
    return HV_OK;
}

/* Runs on the copier thread: only the channels (thread-safe; the keeper's is this thread's) and
 * the ids are shared. The copy goes to a peer agent when the head names one, else (or when that
 * fails) to the head. A failed chunk ends this copy (the next one starts again at 0). */
static hv_err head_put_state(void *ctx, uint32_t generation, uint64_t commit, const void *data,
                             size_t len) {
    head_client_t *c = ctx;
    if (len == 0 || (uint64_t)len > HEAD_STATE_MAX) {
        return HV_ETOOBIG;
    }
    char hex[65];
    hv_sha256_hex_of(data, len, hex);
    hv_err prc = peer_put_state(c, generation, commit, data, len, hex);
    if (prc == HV_OK || prc == HV_EPERM || prc == HV_ESTATE) {
        return prc;
    }
    for (size_t off = 0; off < len;) {
        size_t n = len - off < HEAD_STATE_CHUNK ? len - off : HEAD_STATE_CHUNK;
        Hvpb__V1__PutStateRequest req = HVPB__V1__PUT_STATE_REQUEST__INIT;
        req.job_id = c->job_id;
        req.worker_id = c->worker_id;
        req.generation = generation;
        req.commit = commit;
        req.total = len;
        req.offset = off;
        req.data.data = (uint8_t *)data + off;
        req.data.len = n;
        req.last = off + n == len;
        req.sha256 = req.last ? hex : "";
        ProtobufCMessage *resp = NULL;
        hv_rpc_status_t st = {0};
        hv_err rc = hv_rpc_unary(c->ch, "/hvpb.v1.Rendezvous/PutState", &req.base,
                                 &hvpb__v1__put_state_reply__descriptor, HEAD_CALL_MS, &resp, &st);
        hv_rpc_msg_free(resp);
        if (rc != HV_OK) {
            HV_LOG(rc == HV_ESTATE || rc == HV_EPERM ? HV_LOG_INFO : HV_LOG_WARN, "rdzv",
                   "HV-RDZV-PUTSTATE",
                   "job %llu worker %llu: the copy of generation %u, commit %llu was not stored: "
                   "%s (%s)",
                   (unsigned long long)c->job_id, (unsigned long long)c->worker_id, generation,
                   (unsigned long long)commit, hv_strerror(rc), st.msg);
            return rc;
        }
        off += n;
    }
    return HV_OK;
}

/* Reads the resume's copy from the keeper the round named (its digest checked against the
 * keeper's and the round's size). */
static hv_err keeper_fetch_state(head_client_t *c, void **data, size_t *len) {
    hv_rpc_channel_t *ch = NULL;
    HV_TRY(keeper_channel(c->rk_addr, &ch));
    uint8_t *buf = c->rk_size > 0 && c->rk_size <= HEAD_STATE_MAX ? hv_malloc(c->rk_size) : NULL;
    hv_err rc = buf != NULL ? HV_OK : HV_ENOMEM;
    char want[65] = "";
    hv_rpc_status_t st = {0};
    for (uint64_t off = 0; rc == HV_OK && off < c->rk_size;) {
        Hvpb__V1__ReadKeptRequest req = HVPB__V1__READ_KEPT_REQUEST__INIT;
        req.job_id = c->job_id;
        req.generation = c->rk_gen;
        req.commit = c->rk_commit;
        req.size = c->rk_size;
        req.offset = off;
        req.keeper_node = c->rk.node_id;
        req.expires_ms = c->rk.expires_ms;
        req.grant = c->rk_grant;
        ProtobufCMessage *resp = NULL;
        rc = hv_rpc_unary(ch, "/hvpb.v1.Keeper/Read", &req.base,
                          &hvpb__v1__read_kept_reply__descriptor, HEAD_CALL_MS, &resp, &st);
        if (rc == HV_OK) {
            const Hvpb__V1__ReadKeptReply *r = (const Hvpb__V1__ReadKeptReply *)resp;
            if (r->data.len == 0 || r->data.len > c->rk_size - off) {
                rc = HV_EPROTO;
            } else {
                memcpy(buf + off, r->data.data, r->data.len);
                off += r->data.len;
                snprintf(want, sizeof(want), "%s", r->sha256 ? r->sha256 : "");
            }
        }
        hv_rpc_msg_free(resp);
    }
    hv_rpc_channel_destroy(ch);
    char hex[65];
    if (rc == HV_OK) {
        hv_sha256_hex_of(buf, (size_t)c->rk_size, hex);
        rc = strcmp(hex, want) == 0 ? HV_OK : HV_EPROTO;
    }
    if (rc != HV_OK) {
        HV_LOG(HV_LOG_WARN, "rdzv", "HV-RDZV-KEEPER",
               "job %llu: cannot read the copy of generation %u, commit %llu from node %s's agent "
               "(%s): %s (%s); reading the head's newest copy instead",
               (unsigned long long)c->job_id, c->rk_gen, (unsigned long long)c->rk_commit,
               c->rk_name, c->rk_addr, hv_strerror(rc), st.msg);
        hv_free(buf);
        return rc;
    }
    HV_LOG(HV_LOG_NOTICE, "rdzv", "HV-RDZV-KEEPER",
           "job %llu: read the copy of generation %u, commit %llu (%llu bytes) from the peer "
           "keeper, node %s's agent at %s",
           (unsigned long long)c->job_id, c->rk_gen, (unsigned long long)c->rk_commit,
           (unsigned long long)c->rk_size, c->rk_name, c->rk_addr);
    *data = buf;
    *len = (size_t)c->rk_size;
    return HV_OK;
}

static hv_err head_fetch_state(void *ctx, uint64_t commit, void **data, size_t *len) {
    head_client_t *c = ctx;
    if (c->rk.node_id != 0 && (commit == 0 || commit == c->rk_commit)) {
        if (keeper_fetch_state(c, data, len) == HV_OK) {
            return HV_OK;
        }
        commit = 0; /* the head's newest copy, older than the keeper's */
    }
    uint8_t *buf = NULL;
    uint64_t size = 0, off = 0;
    char want[65] = "";
    hv_err rc = HV_OK;
    do {
        Hvpb__V1__FetchStateRequest req = HVPB__V1__FETCH_STATE_REQUEST__INIT;
        req.job_id = c->job_id;
        req.worker_id = c->worker_id;
        req.offset = off;
        req.commit = commit;
        ProtobufCMessage *resp = NULL;
        hv_rpc_status_t st = {0};
        rc = head_unary(c, "/hvpb.v1.Rendezvous/FetchState", &req.base,
                        &hvpb__v1__fetch_state_reply__descriptor, HEAD_DONE_BUDGET_MS, HEAD_CALL_MS,
                        0, &resp, &st);
        if (rc != HV_OK) {
            snprintf(c->last_error, sizeof(c->last_error), "%s", st.msg);
            HV_LOG(HV_LOG_ERROR, "rdzv", "HV-RDZV-FETCHSTATE",
                   "job %llu worker %llu: fetching the state copy failed at byte %llu: %s (%s)",
                   (unsigned long long)c->job_id, (unsigned long long)c->worker_id,
                   (unsigned long long)off, hv_strerror(rc), st.msg);
            break;
        }
        Hvpb__V1__FetchStateReply *r = (Hvpb__V1__FetchStateReply *)resp;
        if (r->copy == NULL || r->copy->size == 0 || r->copy->size > HEAD_STATE_MAX ||
            (off > 0 && r->copy->size != size) || r->data.len > r->copy->size - off ||
            (r->data.len == 0 && off < r->copy->size)) {
            rc = HV_EPROTO;
        } else if (off == 0) {
            size = r->copy->size;
            commit = r->copy->commit; /* every later chunk from the same copy */
            snprintf(want, sizeof(want), "%s", r->copy->sha256 ? r->copy->sha256 : "");
            if ((buf = hv_malloc((size_t)size)) == NULL) {
                rc = HV_ENOMEM;
            }
        }
        if (rc == HV_OK) {
            memcpy(buf + off, r->data.data, r->data.len);
            off += r->data.len;
        }
        hv_rpc_msg_free(resp);
    } while (rc == HV_OK && off < size);
    if (rc == HV_OK) {
        char hex[65];
        hv_sha256_hex_of(buf, (size_t)size, hex);
        if (strcmp(hex, want) != 0) {
            HV_LOG(HV_LOG_ERROR, "rdzv", "HV-RDZV-FETCHSTATE",
                   "job %llu: the state copy's digest is %s, the head said %s",
                   (unsigned long long)c->job_id, hex, want);
            rc = HV_EPROTO;
        }
    }
    if (rc != HV_OK) {
        hv_free(buf);
        return rc;
    }
    *data = buf;
    *len = (size_t)size;
    return HV_OK;
}

static hv_err head_kv_get(void *ctx, const char *key, uint32_t wait_ms, void **value, size_t *len) {
    head_client_t *c = ctx;
    Hvpb__V1__KvGetRequest req = HVPB__V1__KV_GET_REQUEST__INIT;
    req.job_id = c->job_id;
    req.key = (char *)key;
    req.wait_ms = wait_ms;
    ProtobufCMessage *resp = NULL;
    hv_err rc =
        head_unary(c, "/hvpb.v1.Rendezvous/KvGet", &req.base, &hvpb__v1__kv_get_reply__descriptor,
                   wait_ms, wait_ms + HEAD_CALL_MS, 0, &resp, NULL);
    if (rc != HV_OK) {
        return rc;
    }
    Hvpb__V1__KvGetReply *r = (Hvpb__V1__KvGetReply *)resp;
    if (!r->found) {
        rc = HV_ENOTFOUND;
    } else if (r->value.len > HEAD_KV_VALUE_MAX) {
        rc = HV_ETOOBIG;
    } else {
        void *copy = hv_malloc(r->value.len);
        if (copy == NULL) {
            rc = HV_ENOMEM;
        } else {
            if (r->value.len > 0) {
                memcpy(copy, r->value.data, r->value.len);
            }
            *value = copy;
            *len = r->value.len;
        }
    }
    hv_rpc_msg_free(resp);
    return rc;
}

/* ---- WatchMembers: the push watcher --------------------------------------------------------- */

typedef struct head_watch_s {
    head_client_t *c; // borrowed: the client outlives its watchers (rdzv.h)
    hv__rdzv_push_cb cb;
    void *ud;
    pthread_t thread;
    pthread_mutex_t mu;    // guards stop and cur
    pthread_cond_t cv;     // signalled by stop (wakes the backoff wait)
    int stop;              // set by watch_stop
    hv_rpc_bstream_t *cur; // the open stream, for cancel from watch_stop (owned by the thread)
    uint32_t generation;   // newest generation delivered (watcher thread only)
} head_watch_t;

/* Waits ms or until stopped; returns 1 when stopped. */
static int watch_pause(head_watch_t *w, uint64_t ms) {
    struct timespec dl = hv_realtime_in_ms((uint32_t)ms); /* at most HEAD_BACKOFF_MAX_MS */
    pthread_mutex_lock(&w->mu);
    while (!w->stop && pthread_cond_timedwait(&w->cv, &w->mu, &dl) != ETIMEDOUT) {
    }
    int stop = w->stop;
    pthread_mutex_unlock(&w->mu);
    return stop;
}

/* Delivers one push if it is newer than what was delivered before. */
static void watch_deliver(head_watch_t *w, const Hvpb__V1__MembershipPush *m) {
    if (m->generation <= w->generation) {
        return; // a replay after a reconnect
    }
    w->generation = m->generation;
    hv__rdzv_push_t p = {.generation = m->generation,
                         .failure = m->failure,
                         .stop = m->reason_code == HVPB__V1__EVENT_REASON__EVENT_REASON_PREEMPT,
                         .reason = m->reason ? m->reason : "",
                         .removed = m->removed,
                         .n_removed = m->n_removed};
    HV_LOG(HV_LOG_INFO, "rdzv", "HV-RDZV-PUSH",
           "job %llu worker %llu: round %u opened (%s%s), %zu worker(s) removed",
           (unsigned long long)w->c->job_id, (unsigned long long)w->c->worker_id, p.generation,
           p.failure ? "failure: " : "", p.reason, p.n_removed);
    w->cb(w->ud, &p);
}

static void *watch_main(void *arg) {
    head_watch_t *w = arg;
    head_client_t *c = w->c;
    uint64_t backoff = HEAD_BACKOFF_MIN_MS;
    int logged_down = 0;
    for (;;) {
        Hvpb__V1__RdzvWatchRequest req = HVPB__V1__RDZV_WATCH_REQUEST__INIT;
        req.job_id = c->job_id;
        req.worker_id = c->worker_id;
        req.generation = w->generation;
        hv_rpc_bstream_t *s = NULL;
        // No deadline on the stream: keepalive notices a dead head; we reconnect then.
        hv_err rc = hv_rpc_bstream_open(c->ch, "/hvpb.v1.Rendezvous/WatchMembers", &req.base,
                                        &hvpb__v1__membership_push__descriptor, 0, &s);
        int terminal = 0, got = 0;
        hv_rpc_status_t st = {0};
        if (rc == HV_OK) {
            pthread_mutex_lock(&w->mu);
            w->cur = s;
            int stop = w->stop;
            pthread_mutex_unlock(&w->mu);
            while (!stop) {
                ProtobufCMessage *m = NULL;
                rc = hv_rpc_bstream_next(s, HEAD_WATCH_POLL_MS, &m, &st);
                if (rc == HV_OK) {
                    watch_deliver(w, (const Hvpb__V1__MembershipPush *)m);
                    hv_rpc_msg_free(m);
                    got = 1;
                } else if (rc != HV_ETIMEDOUT) {
                    break; // HV_ECLOSED: st says why
                }
                pthread_mutex_lock(&w->mu);
                stop = w->stop;
                pthread_mutex_unlock(&w->mu);
                if (!stop && head_report_due(c)) {
                    head_report(c);
                }
            }
            pthread_mutex_lock(&w->mu);
            w->cur = NULL;
            pthread_mutex_unlock(&w->mu);
            hv_rpc_bstream_destroy(s);
            // The job ended or this worker is not part of it (any more), its credential died
            // with the job, or the head has no such service: nothing will ever come; stop
            // instead of polling the head forever.
            terminal = rc == HV_ECLOSED && (st.rc == HV_ESTATE || st.rc == HV_ENOTFOUND ||
                                            st.rc == HV_ENOTSUP || st.rc == HV_EAUTH);
        } else {
            snprintf(st.msg, sizeof(st.msg), "%s", hv_strerror(rc));
        }
        if (watch_pause(w, 0)) {
            break;
        }
        if (terminal) {
            HV_LOG(HV_LOG_INFO, "rdzv", "HV-RDZV-WATCH-END",
                   "job %llu worker %llu: WatchMembers ended: %s (%s); no more pushes",
                   (unsigned long long)c->job_id, (unsigned long long)c->worker_id,
                   hv_strerror(st.rc), st.msg);
            break;
        }
        if (got) {
            backoff = HEAD_BACKOFF_MIN_MS;
            logged_down = 0;
        }
        if (!logged_down) {
            // Once per outage: a head restart is routine for an elastic job.
            HV_LOG(HV_LOG_INFO, "rdzv", "HV-RDZV-WATCH-RETRY",
                   "job %llu worker %llu: WatchMembers stream ended (%s: %s); reconnecting",
                   (unsigned long long)c->job_id, (unsigned long long)c->worker_id,
                   hv_strerror(st.rc), st.msg);
            logged_down = 1;
        }
        // A stream the head ended cleanly is re-opened too, but never in a tight loop.
        uint64_t pause = st.rc == HV_OK && backoff < 1000 ? 1000 : backoff;
        if (watch_pause(w, pause)) {
            break;
        }
        backoff = backoff * 2 > HEAD_BACKOFF_MAX_MS ? HEAD_BACKOFF_MAX_MS : backoff * 2;
    }
    return NULL;
}

static hv_err head_watch(void *ctx, uint32_t generation, hv__rdzv_push_cb cb, void *ud,
                         void **out) {
    head_watch_t *w = hv_calloc(1, sizeof(*w));
    if (w == NULL) {
        return HV_ENOMEM;
    }
    w->c = ctx;
    w->cb = cb;
    w->ud = ud;
    w->generation = generation;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (pthread_create(&w->thread, NULL, watch_main, w) != 0) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        hv_free(w);
        return HV_ENOMEM;
    }
    *out = w;
    return HV_OK;
}

static void head_watch_stop(void *watcher) {
    head_watch_t *w = watcher;
    if (w == NULL) {
        return;
    }
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    if (w->cur != NULL) {
        hv_rpc_bstream_cancel(w->cur); // the thread's next() returns at once
    }
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    head_report(w->c); /* leaving the job (Done, drained, failed): what grew since the last one */
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    hv_free(w);
}

static const char *head_last_error(void *ctx) { return ((head_client_t *)ctx)->last_error; }

static void head_destroy(void *ctx) {
    head_client_t *c = ctx;
    pthread_mutex_lock(&c->sil_mu);
    c->sil_stop = 1; // a report in flight ends within its budget
    pthread_cond_broadcast(&c->sil_cv);
    int started = c->sil_started;
    pthread_mutex_unlock(&c->sil_mu);
    if (started) {
        pthread_join(c->sil_thread, NULL);
    }
    pthread_cond_destroy(&c->sil_cv);
    pthread_mutex_destroy(&c->sil_mu);
    hv_rpc_channel_destroy(c->ch);
    hv_rpc_channel_destroy(c->kch);
    pthread_mutex_destroy(&c->rep_mu);
    hv_free(c);
}

static void head_note_redone(void *ctx, uint64_t samples) {
    head_client_t *c = ctx;
    c->redone += samples;
}

static void head_report_now(void *ctx) { head_report(ctx); }

static void head_note_broken(void *ctx, const uint64_t *worker_ids, size_t n) {
    head_client_t *c = ctx;
    c->n_broken = n < HV_RDZV_BROKEN_MAX ? n : HV_RDZV_BROKEN_MAX;
    memcpy(c->broken, worker_ids, c->n_broken * sizeof(uint64_t));
}

static void head_note_dead(void *ctx, const uint64_t *worker_ids, size_t n) {
    head_client_t *c = ctx;
    c->n_dead = n < HV_RDZV_DEAD_MAX ? n : HV_RDZV_DEAD_MAX;
    memcpy(c->dead, worker_ids, c->n_dead * sizeof(uint64_t));
}

static const hv__rdzv_ops_t head_ops = {
    .name = "head",
    .join = head_join,
    .done = head_done,
    .resize = head_resize,
    .kv_put = head_kv_put,
    .kv_get = head_kv_get,
    .watch = head_watch,
    .watch_stop = head_watch_stop,
    .note_redone = head_note_redone,
    .note_broken = head_note_broken,
    .note_dead = head_note_dead,
    .note_silent = head_note_silent,
    .report = head_report_now,
    .put_state = head_put_state,
    .fetch_state = head_fetch_state,
    .last_error = head_last_error,
    .destroy = head_destroy,
};

hv_err hv__rdzv_head_client(const char *head_addr, uint64_t job_id, uint64_t worker_id,
                            hv__rdzv_t *out) {
    head_client_t *c = hv_calloc(1, sizeof(*c));
    if (c == NULL) {
        return HV_ENOMEM;
    }
    snprintf(c->target, sizeof(c->target), "%s", head_addr);
    /* HV_CA_FILE (set by the agent when it verifies the head over TLS): the rendezvous channel
     * verifies the head against the same CA. Unset or empty: plain text, as the agent's. */
    const char *ca = getenv("HV_CA_FILE");
    hv_rpc_tls_t tls = {.ca_file = ca};
    char err[512] = "";
    hv_err rc = hv_rpc_channel_create_tls(head_addr, ca != NULL && ca[0] != '\0' ? &tls : NULL,
                                          &c->ch, err, sizeof(err));
    if (rc != HV_OK) {
        HV_LOG(HV_LOG_ERROR, "rdzv", "HV-RDZV-HEAD", "cannot open a channel to the head at %s: %s",
               head_addr, err[0] ? err : hv_strerror(rc));
        hv_free(c);
        return rc;
    }
    /* The worker's Rendezvous credential, scoped to this job and worker; the agent puts it in
     * the environment of the workers it spawns (hvhead refuses Rendezvous calls without it). */
    const char *secret = getenv("HV_WORKER_SECRET");
    if (secret != NULL && secret[0] != '\0' && hv_rpc_channel_set_token(c->ch, secret) != HV_OK) {
        HV_LOG(HV_LOG_ERROR, "rdzv", "HV-RDZV-SECRET",
               "HV_WORKER_SECRET is not a usable credential (printable, at most %d characters)",
               HV_RPC_MAX_TOKEN);
    }
    c->job_id = job_id;
    c->worker_id = worker_id;
    /* Only what grows from now on is this client's to report (a process may open a client
     * after it allreduced on its own). */
    pthread_mutex_init(&c->rep_mu, NULL);
    pthread_mutex_init(&c->sil_mu, NULL);
    pthread_cond_init(&c->sil_cv, NULL);
    hv__figures_read(&c->sent);
    c->sent_ms = hv_now_ms();
    c->report_ms = HEAD_REPORT_MS;
    const char *rms = getenv("HV_FIGURES_REPORT_MS");
    if (rms != NULL && rms[0] != '\0') {
        char *end = NULL;
        unsigned long v = strtoul(rms, &end, 10);
        if (*end != '\0' || v < 200 || v > 600000) {
            HV_LOG(HV_LOG_WARN, "rdzv", "HV-RDZV-REPORT-MS",
                   "HV_FIGURES_REPORT_MS='%.32s' is not 200..600000 ms: reporting every %d ms", rms,
                   HEAD_REPORT_MS);
        } else {
            c->report_ms = v;
        }
    }
    out->ops = &head_ops;
    out->ctx = c;
    return HV_OK;
}
