/*
 * rdzv_head_test: the head's rendezvous client (rdzv_head.c) against a fake Rendezvous service
 * (common/rpc.h server on a libuv loop in its own thread) on loopback: JoinRound retried while
 * the head is down (it comes up later, as after a restart), the elastic fields of the reply
 * (check_every, reason, rollback, removed), a refused join carrying the head's reason
 * (FAILED_PRECONDITION -> HV_ESTATE), Done with its generation, the ring neighbours a re-join
 * reports broken (sent once, capped), and the WatchMembers watcher:
 * pushes delivered, the stream re-opened from the newest generation after the head drops it,
 * and watch_stop returning promptly while a stream is open; Report: the worker's figures that
 * grew (figures.h) go before Done and when the watcher stops, only what grew since the last
 * report, and nothing when nothing grew; a silent ring neighbour (note_silent) told at once from
 * the client's own thread, with the round. This pins libhv's side of the wire contract
 * independently of the head's implementation.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "figures.h"
#include "hv.pb-c.h"
#include "hvtest.h"
#include "log.h"
#include "mem.h"
#include "rdzv.h"
#include "rpc.h"
#include "util.h"

/* ---- the fake head (its own loop thread) ---------------------------------------------------- */

enum { JOIN_OK = 0, JOIN_REMOVED = 1, JOIN_ENDED = 2 };

static struct {
    pthread_t thread;
    atomic_int stop, up, port;
    int want_port; // 0: ephemeral
    atomic_int join_mode;
    atomic_int joins, dones, watches;
    atomic_uint done_gen, watch_gen[8];
    atomic_int drop_first_watch; // finish the first WatchMembers with UNAVAILABLE after a push
    atomic_int n_broken;         // broken_peers of the last JoinRound
    atomic_ullong broken[8];
    atomic_int reports, report_before_done; // Report calls; 1 when one came before a Done
    _Atomic uint64_t rep_bytes, rep_us, rep_n, rep_commits, rep_commit_us; // the last report
    atomic_uint rep_gen;                                                   // its generation
    atomic_int rep_n_silent;     // its silent neighbours, and the first:
    _Atomic uint64_t sil_worker; // worker id,
    atomic_uint sil_how, sil_ms; // how, and how long
} head;

static void head_join(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    (void)ud;
    const Hvpb__V1__RdzvJoinRequest *r = (const Hvpb__V1__RdzvJoinRequest *)m;
    atomic_fetch_add(&head.joins, 1);
    atomic_store(&head.n_broken, (int)r->n_broken_peers);
    for (size_t i = 0; i < r->n_broken_peers && i < 8; i++) {
        atomic_store(&head.broken[i], r->broken_peers[i]);
    }
    if (atomic_load(&head.join_mode) == JOIN_ENDED) {
        hv_rpc_finish(c, HV_ESTATE, "job 5 failed: resets exceeded --max-resets 2");
        return;
    }
    Hvpb__V1__RdzvJoinReply rep = HVPB__V1__RDZV_JOIN_REPLY__INIT;
    rep.generation = r->last_generation + 1;
    rep.reason = "hosts added";
    rep.check_every = 5;
    if (atomic_load(&head.join_mode) == JOIN_REMOVED) {
        rep.removed = 1;
        hv_rpc_reply(c, &rep.base);
        return;
    }
    Hvpb__V1__PeerInfo p0 = HVPB__V1__PEER_INFO__INIT, p1 = HVPB__V1__PEER_INFO__INIT;
    p0.rank = 0;
    p0.worker_id = 11;
    p0.addr = "127.0.0.1:1000";
    p0.host = "a";
    p1.rank = 1;
    p1.worker_id = r->worker_id;
    p1.addr = r->addr;
    p1.host = "b";
    Hvpb__V1__PeerInfo *peers[2] = {&p0, &p1};
    rep.rank = 1;
    rep.size = 2;
    rep.n_peers = 2;
    rep.peers = peers;
    rep.rollback = 1;
    hv_rpc_reply(c, &rep.base);
}

static void head_done(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    (void)ud;
    const Hvpb__V1__RdzvDoneRequest *r = (const Hvpb__V1__RdzvDoneRequest *)m;
    atomic_store(&head.done_gen, r->generation);
    atomic_fetch_add(&head.dones, 1);
    Hvpb__V1__RdzvDoneReply rep = HVPB__V1__RDZV_DONE_REPLY__INIT;
    hv_rpc_reply(c, &rep.base);
}

/* What a Report carried, kept for the case to check. */
static void head_note_report(const Hvpb__V1__RdzvReportRequest *r) {
    atomic_store(&head.rep_bytes, r->allreduce_bytes);
    atomic_store(&head.rep_us, r->allreduce_us);
    atomic_store(&head.rep_n, r->allreduces);
    atomic_store(&head.rep_commits, r->commits);
    atomic_store(&head.rep_commit_us, r->commit_us);
    atomic_store(&head.rep_gen, r->generation);
    if (r->n_silent > 0) {
        atomic_store(&head.sil_worker, r->silent[0]->worker_id);
        atomic_store(&head.sil_how, r->silent[0]->how);
        atomic_store(&head.sil_ms, r->silent[0]->silent_ms);
    }
    atomic_store(&head.rep_n_silent, (int)r->n_silent);
    atomic_fetch_add(&head.reports, 1);
    if (atomic_load(&head.dones) == 0) {
        atomic_store(&head.report_before_done, 1);
    }
}

static void head_report(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    (void)ud;
    head_note_report((const Hvpb__V1__RdzvReportRequest *)m);
    Hvpb__V1__RdzvReportReply rep = HVPB__V1__RDZV_REPORT_REPLY__INIT;
    hv_rpc_reply(c, &rep.base);
}

/* Pushes the round after the one asked for at once (the job is newer), as the head does. */
static void head_watch(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    (void)ud;
    const Hvpb__V1__RdzvWatchRequest *r = (const Hvpb__V1__RdzvWatchRequest *)m;
    int k = atomic_fetch_add(&head.watches, 1);
    if (k < 8) {
        atomic_store(&head.watch_gen[k], r->generation);
    }
    uint64_t removed[1] = {42};
    Hvpb__V1__MembershipPush p = HVPB__V1__MEMBERSHIP_PUSH__INIT;
    p.generation = r->generation + 1;
    p.reason = k == 0 ? "worker 9 failed" : "hosts added";
    p.failure = k == 0;
    p.n_removed = k == 0 ? 1 : 0;
    p.removed = removed;
    hv_rpc_send(c, &p.base);
    if (k == 0 && atomic_load(&head.drop_first_watch)) {
        hv_rpc_finish(c, HV_EUNAVAIL, "head restarting");
    }
}

static void *head_main(void *arg) {
    (void)arg;
    uv_loop_t loop;
    uv_loop_init(&loop);
    hv_rpc_engine_t *eng = NULL;
    hv_rpc_server_t *srv = NULL;
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", head.want_port);
    int port = 0;
    if (hv_rpc_engine_create(&loop, &eng) != HV_OK ||
        hv_rpc_server_create(eng, addr, &srv, &port) != HV_OK) {
        atomic_store(&head.up, -1);
        return NULL;
    }
    hv_rpc_method_t ms[4] = {
        {"/hvpb.v1.Rendezvous/JoinRound", HV_RPC_UNARY, &hvpb__v1__rdzv_join_request__descriptor,
         head_join, NULL, NULL},
        {"/hvpb.v1.Rendezvous/Done", HV_RPC_UNARY, &hvpb__v1__rdzv_done_request__descriptor,
         head_done, NULL, NULL},
        {"/hvpb.v1.Rendezvous/WatchMembers", HV_RPC_SERVER_STREAM,
         &hvpb__v1__rdzv_watch_request__descriptor, head_watch, NULL, NULL},
        {"/hvpb.v1.Rendezvous/Report", HV_RPC_UNARY, &hvpb__v1__rdzv_report_request__descriptor,
         head_report, NULL, NULL},
    };
    for (int i = 0; i < 4; i++) {
        hv_rpc_server_add(srv, &ms[i]);
    }
    hv_rpc_server_start(srv);
    atomic_store(&head.port, port);
    atomic_store(&head.up, 1);
    while (!atomic_load(&head.stop)) {
        uv_run(&loop, UV_RUN_NOWAIT);
        usleep(200); // the loop's poll interval, not a synchronisation
    }
    hv_rpc_server_shutdown(srv);
    hv_rpc_engine_destroy(eng);
    uv_loop_close(&loop);
    return NULL;
}

/* Starts the fake head on port (0: any); returns its port, or -1. */
static int head_start(int port) {
    atomic_store(&head.stop, 0);
    atomic_store(&head.up, 0);
    head.want_port = port;
    pthread_create(&head.thread, NULL, head_main, NULL);
    for (double t0 = hvtest_now(); atomic_load(&head.up) == 0 && hvtest_now() - t0 < 20;) {
        usleep(1000);
    }
    return atomic_load(&head.up) == 1 ? atomic_load(&head.port) : -1;
}

static void head_stop(void) {
    atomic_store(&head.stop, 1);
    pthread_join(head.thread, NULL);
}

/* ---- log sink: lets a test wait for "the client is retrying" --------------------------------- */

static atomic_int retries_logged;

static void sink(hv_log_level level, const char *subsys, const char *msgid, const char *text,
                 void *ud) {
    (void)level;
    (void)subsys;
    (void)text;
    (void)ud;
    if (strcmp(msgid, "HV-RDZV-RETRY") == 0) {
        atomic_fetch_add(&retries_logged, 1);
    }
}

/* ---- cases ----------------------------------------------------------------------------------- */

typedef struct join_arg_s {
    char target[64];
    hv_err rc;
    hv__rdzv_assignment_t a;
    char err[256];
} join_arg_t;

static void *join_main(void *arg) {
    join_arg_t *j = arg;
    hv__rdzv_t rz;
    j->rc = hv__rdzv_head_client(j->target, 5, 7, &rz);
    if (j->rc == HV_OK) {
        j->rc =
            rz.ops->join(rz.ctx, "127.0.0.1:2000", "b", 3, (uint32_t)hvtest_scale(30000), &j->a);
        snprintf(j->err, sizeof(j->err), "%s", rz.ops->last_error(rz.ctx));
        if (j->rc == HV_OK && !j->a.removed) {
            j->rc = rz.ops->done(rz.ctx, j->a.generation);
        }
        rz.ops->destroy(rz.ctx);
    }
    return NULL;
}

/* The head is down when the worker joins, and comes up later on the same port. */
static void test_join_retry(void) {
    hv_log_init("rdzv_head_test");
    int port = head_start(0); // find a free port, then free it again
    ASSERT_TRUE(port > 0);
    head_stop();
    hv_log_set_level(HV_LOG_INFO);
    hv_log_set_sink(sink, NULL);
    atomic_store(&retries_logged, 0);
    atomic_store(&head.join_mode, JOIN_OK);
    join_arg_t j = {0};
    snprintf(j.target, sizeof(j.target), "127.0.0.1:%d", port);
    pthread_t t;
    pthread_create(&t, NULL, join_main, &j);
    for (double t0 = hvtest_now(); !atomic_load(&retries_logged) && hvtest_now() - t0 < 20;) {
        usleep(1000);
    }
    ASSERT_TRUE(atomic_load(&retries_logged) > 0); // it found the head down and retries
    ASSERT_EQ_INT(head_start(port), port);
    pthread_join(t, NULL);
    head_stop();
    hv_log_set_sink(NULL, NULL);
    hv_log_set_level(HV_LOG_WARN);
    ASSERT_RC(j.rc, HV_OK);
    ASSERT_EQ_INT(j.a.generation, 4);
    ASSERT_EQ_INT(j.a.rank, 1);
    ASSERT_EQ_INT(j.a.size, 2);
    ASSERT_EQ_INT(j.a.check_every, 5);
    ASSERT_EQ_INT(j.a.rollback, 1);
    ASSERT_EQ_INT(j.a.removed, 0);
    ASSERT_TRUE(strcmp(j.a.reason, "hosts added") == 0);
    ASSERT_TRUE(strcmp(j.a.peers[0].addr, "127.0.0.1:1000") == 0);
    ASSERT_EQ_INT(atomic_load(&head.done_gen), 4); // Done names the round
    hv__rdzv_assignment_fini(&j.a);
}

static void test_join_removed_and_ended(void) {
    int port = head_start(0);
    ASSERT_TRUE(port > 0);
    join_arg_t j = {0};
    snprintf(j.target, sizeof(j.target), "127.0.0.1:%d", port);
    atomic_store(&head.join_mode, JOIN_REMOVED);
    join_main(&j);
    ASSERT_RC(j.rc, HV_OK);
    ASSERT_EQ_INT(j.a.removed, 1);
    ASSERT_TRUE(j.a.peers == NULL);
    memset(&j.a, 0, sizeof(j.a));
    atomic_store(&head.join_mode, JOIN_ENDED);
    join_main(&j);
    head_stop();
    atomic_store(&head.join_mode, JOIN_OK);
    ASSERT_RC(j.rc, HV_ESTATE);
    ASSERT_TRUE(strstr(j.err, "max-resets") != NULL);
}

/* Starts the fake head on any port and a client of job 5, worker 7 to it. */
static hv_err head_and_client(hv__rdzv_t *rz) {
    int port = head_start(0);
    if (port <= 0) {
        return HV_EUNAVAIL;
    }
    char target[64];
    snprintf(target, sizeof(target), "127.0.0.1:%d", port);
    return hv__rdzv_head_client(target, 5, 7, rz);
}

/* One JoinRound of worker b at 127.0.0.1:2000 after round last_gen. */
static hv_err join_once(hv__rdzv_t *rz, uint32_t last_gen) {
    hv__rdzv_assignment_t a = {0};
    hv_err rc =
        rz->ops->join(rz->ctx, "127.0.0.1:2000", "b", last_gen, (uint32_t)hvtest_scale(30000), &a);
    hv__rdzv_assignment_fini(&a);
    return rc;
}

/* The ring neighbours a rejoin notes as broken go with the next JoinRound, once (capped). */
static void test_join_broken_peers(void) {
    hv__rdzv_t rz;
    ASSERT_OK(head_and_client(&rz));
    ASSERT_TRUE(rz.ops->note_broken != NULL);
    uint64_t ids[HV_RDZV_BROKEN_MAX + 2] = {11, 12, 13, 14, 15, 16, 17, 18};
    rz.ops->note_broken(rz.ctx, ids, HV_RDZV_BROKEN_MAX + 2);
    ASSERT_OK(join_once(&rz, 3));
    ASSERT_EQ_INT(atomic_load(&head.n_broken), HV_RDZV_BROKEN_MAX); // capped
    ASSERT_TRUE(atomic_load(&head.broken[0]) == 11 && atomic_load(&head.broken[5]) == 16);
    ASSERT_OK(join_once(&rz, 4));
    ASSERT_EQ_INT(atomic_load(&head.n_broken), 0); // carried once: the head has it
    rz.ops->note_broken(rz.ctx, ids + 1, 1);
    ASSERT_OK(join_once(&rz, 5));
    ASSERT_EQ_INT(atomic_load(&head.n_broken), 1);
    ASSERT_TRUE(atomic_load(&head.broken[0]) == 12);
    rz.ops->destroy(rz.ctx);
    head_stop();
}

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint32_t gens[8];
    int failure[8];
    int n;
    uint64_t removed0;
} pushes = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, {0}, 0, 0};

static void on_push(void *ud, const hv__rdzv_push_t *p) {
    (void)ud;
    pthread_mutex_lock(&pushes.mu);
    if (pushes.n < 8) {
        pushes.gens[pushes.n] = p->generation;
        pushes.failure[pushes.n] = p->failure;
        if (pushes.n == 0 && p->n_removed == 1) {
            pushes.removed0 = p->removed[0];
        }
        pushes.n++;
    }
    pthread_cond_broadcast(&pushes.cv);
    pthread_mutex_unlock(&pushes.mu);
}

static int wait_pushes(int n, double timeout_s) {
    pthread_mutex_lock(&pushes.mu);
    double t0 = hvtest_now();
    while (pushes.n < n && hvtest_now() - t0 < timeout_s) {
        struct timespec ts = hv_realtime_in_ms(50);
        pthread_cond_timedwait(&pushes.cv, &pushes.mu, &ts);
    }
    int got = pushes.n;
    pthread_mutex_unlock(&pushes.mu);
    return got;
}

/* Pushes arrive; the head drops the stream (a restart); the watcher re-opens it from the
 * newest generation it has seen and gets the next push; stop returns promptly. */
static void test_watch(void) {
    atomic_store(&head.drop_first_watch, 1);
    atomic_store(&head.watches, 0);
    hv__rdzv_t rz;
    ASSERT_OK(head_and_client(&rz));
    void *w = NULL;
    ASSERT_OK(rz.ops->watch(rz.ctx, 3, on_push, NULL, &w));
    int got = wait_pushes(2, hvtest_scale(20));
    double t0 = hvtest_now();
    rz.ops->watch_stop(w); // with the second stream open
    double stop_s = hvtest_now() - t0;
    rz.ops->destroy(rz.ctx);
    head_stop();
    ASSERT_EQ_INT(got, 2);
    ASSERT_EQ_INT(pushes.gens[0], 4);
    ASSERT_EQ_INT(pushes.failure[0], 1);
    ASSERT_EQ_INT(pushes.removed0, 42);
    ASSERT_EQ_INT(pushes.gens[1], 5);
    ASSERT_EQ_INT(pushes.failure[1], 0);
    ASSERT_EQ_INT(atomic_load(&head.watch_gen[0]), 3);
    ASSERT_EQ_INT(atomic_load(&head.watch_gen[1]), 4); // resumed after what it had seen
    ASSERT_TRUE(stop_s < hvtest_scale(2.0));           // bounded waits inside: ~0.2 s at worst
}

/* The figures that grew since the client opened go before Done; a second Done with nothing new
 * sends none; what grows later goes when the watcher stops, only the difference. */
static void test_report(void) {
    atomic_store(&head.reports, 0);
    atomic_store(&head.dones, 0);
    atomic_store(&head.report_before_done, 0);
    atomic_store(&head.drop_first_watch, 0);
    hv__figures_add_allreduce(1, 999, 1000); // before the client: not its to report
    hv__rdzv_t rz;
    ASSERT_OK(head_and_client(&rz));
    hv__figures_add_allreduce(3, 1000, 2000000); // 3 tensors, 1000 bytes, 2 ms
    hv__figures_add_commit(500000);              // 0.5 ms
    ASSERT_OK(rz.ops->done(rz.ctx, 4));
    ASSERT_EQ_INT(atomic_load(&head.reports), 1);
    ASSERT_EQ_INT(atomic_load(&head.report_before_done), 1);
    ASSERT_EQ_INT(atomic_load(&head.rep_bytes), 1000);
    ASSERT_EQ_INT(atomic_load(&head.rep_us), 2000);
    ASSERT_EQ_INT(atomic_load(&head.rep_n), 3);
    ASSERT_EQ_INT(atomic_load(&head.rep_commits), 1);
    ASSERT_EQ_INT(atomic_load(&head.rep_commit_us), 500);
    ASSERT_OK(rz.ops->done(rz.ctx, 4));
    ASSERT_EQ_INT(atomic_load(&head.reports), 1); // nothing grew: no report
    void *w = NULL;
    ASSERT_OK(rz.ops->watch(rz.ctx, 3, on_push, NULL, &w));
    hv__figures_add_allreduce(2, 64, 1000);
    rz.ops->watch_stop(w);
    rz.ops->destroy(rz.ctx);
    head_stop();
    ASSERT_EQ_INT(atomic_load(&head.reports), 2);
    ASSERT_EQ_INT(atomic_load(&head.rep_bytes), 64);
    ASSERT_EQ_INT(atomic_load(&head.rep_n), 2);
    ASSERT_EQ_INT(atomic_load(&head.rep_commits), 0);
}

/* A silent ring neighbour (note_silent, called on the liveness monitor's thread) reaches the head
 * at once, from the client's own thread, in a Report with no figures: the worker id, how, how
 * long and the round. */
static void test_silent(void) {
    atomic_store(&head.reports, 0);
    atomic_store(&head.rep_n_silent, 0);
    hv__rdzv_t rz;
    ASSERT_OK(head_and_client(&rz));
    double t0 = hvtest_now();
    rz.ops->note_silent(rz.ctx, 3, 42, HV_RDZV_SILENT_ACK, 560);
    ASSERT_TRUE(hvtest_now() - t0 < 0.5); // queued, not sent on the caller's thread
    while (atomic_load(&head.reports) == 0 && hvtest_now() - t0 < hvtest_scale(5.0)) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    rz.ops->destroy(rz.ctx);
    head_stop();
    ASSERT_EQ_INT(atomic_load(&head.reports), 1);
    ASSERT_EQ_INT(atomic_load(&head.rep_n_silent), 1);
    ASSERT_EQ_INT(atomic_load(&head.sil_worker), 42);
    ASSERT_EQ_INT(atomic_load(&head.sil_how), HV_RDZV_SILENT_ACK);
    ASSERT_EQ_INT(atomic_load(&head.sil_ms), 560);
    ASSERT_EQ_INT(atomic_load(&head.rep_gen), 3);
    ASSERT_EQ_INT(atomic_load(&head.rep_n), 0); // no figures ride along
}

static const hvtest_case_t cases[] = {
    {"join_retry", test_join_retry},
    {"join_removed_and_ended", test_join_removed_and_ended},
    {"join_broken_peers", test_join_broken_peers},
    {"watch", test_watch},
    {"report", test_report},
    {"silent", test_silent},
};

HVTEST_MAIN(cases)
