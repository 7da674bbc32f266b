/*
 * session_test: the agent's session against an in-process fake head (Cluster/Join and
 * Cluster/Session served by hv_rpc on loopback, recording what it receives). Checks what the head
 * and an operator rely on: join and ready, a refused token and an unreachable head end the
 * session with a clear reason, heartbeats keep coming, events are re-sent after a reconnect
 * (right after the hello, before the first heartbeat) until acknowledged, lines arrive in order
 * and before the exit that follows them, a full buffer drops the oldest lines and says so, the
 * lease expiry fires only after the lease, and a drain notice is followed by a heartbeat whose
 * answer confirms it, repeated on every new stream with the time left, and forgotten after an
 * undrain; an event that cannot be allocated is refused with HV_ENOMEM and leaves nothing queued.
 * `session_test <case>` runs one case.
 */
#include "session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_test.h"
#include "fakehead_test.h"
#include "mem.h"
#include "util.h"

#define REC_MAX 20000

/* One message the fake head received. */
typedef struct rec_s {
    int body; /* HVPB__V1__AGENT_MSG__BODY_* */
    uint64_t seq;
    uint64_t worker_id;
    int value; /* pid, exit code, stream, heartbeat's draining flag, drain deadline_ms */
    size_t n_lines;
    char *first_line; /* owned copy of the first line of a log message */
    char *last_line;  /* owned copy of the last line */
} rec_t;

static uv_loop_t loop;
static hv_rpc_engine_t *eng;
static hv_rpc_server_t *srv;
static hv_rpc_channel_t *chan;
static char target[64];

/* fake head state */
static fake_join_t fj = {.cluster = "test", .lease_ms = 600};
static int auto_ack;      /* ack each seq event at once */
static uint64_t head_ack; /* ack_seq sent with heartbeat answers */
static int answer_heartbeats = 1;
static uint64_t hello_incarnation;
static size_t hello_running;
static hv_rpc_call_t *head_call; /* the open Session, server side */
static rec_t recs[REC_MAX];
static int nrec;

/* agent side */
static int joined, connected, fatal, lease_expired, orders;
static hv_err fatal_rc;
static char fatal_msg[512];
static uint64_t lease_at, last_contact_at;

static void head_send_ack(hv_rpc_call_t *c, uint64_t ack, int heartbeat) {
    Hvpb__V1__HeadMsg rep = HVPB__V1__HEAD_MSG__INIT;
    Hvpb__V1__Heartbeat hb = HVPB__V1__HEARTBEAT__INIT;
    rep.ack_seq = ack;
    if (heartbeat) {
        rep.body_case = HVPB__V1__HEAD_MSG__BODY_HEARTBEAT;
        rep.heartbeat = &hb;
    }
    hv_rpc_send(c, &rep.base);
}

static void head_session_msg(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    const Hvpb__V1__AgentMsg *am = (const Hvpb__V1__AgentMsg *)m;
    (void)ud;
    if (nrec < REC_MAX) {
        rec_t *r = &recs[nrec++];
        memset(r, 0, sizeof(*r));
        r->body = am->body_case;
        r->seq = am->seq;
        switch (am->body_case) {
        case HVPB__V1__AGENT_MSG__BODY_HELLO:
            hello_incarnation = am->hello->incarnation;
            hello_running = am->hello->n_running;
            head_call = c;
            break;
        case HVPB__V1__AGENT_MSG__BODY_HEARTBEAT:
            r->value = am->heartbeat->draining;
            break;
        case HVPB__V1__AGENT_MSG__BODY_DRAIN:
            r->value = (int)am->drain->deadline_ms;
            break;
        case HVPB__V1__AGENT_MSG__BODY_STARTED:
            r->worker_id = am->started->worker_id;
            r->value = am->started->pid;
            break;
        case HVPB__V1__AGENT_MSG__BODY_EXITED:
            r->worker_id = am->exited->worker_id;
            r->value = am->exited->exit_code;
            break;
        case HVPB__V1__AGENT_MSG__BODY_ACTOR_FIGURES:
            r->worker_id = am->actor_figures->worker_id;
            r->value = (int)am->actor_figures->calls_ok;
            r->n_lines = am->actor_figures->final ? 1 : 0; // the final flag
            break;
        case HVPB__V1__AGENT_MSG__BODY_LOG:
            r->worker_id = am->log->worker_id;
            r->value = (int)am->log->stream;
            r->n_lines = am->log->n_lines;
            if (am->log->n_lines > 0) {
                r->first_line = hv_strdup(am->log->lines[0]);
                r->last_line = hv_strdup(am->log->lines[am->log->n_lines - 1]);
            }
            break;
        default:
            break;
        }
    }
    if (am->body_case == HVPB__V1__AGENT_MSG__BODY_HEARTBEAT && answer_heartbeats) {
        head_send_ack(c, head_ack, 1);
    }
    if (am->seq != 0 && auto_ack) {
        head_ack = am->seq;
        head_send_ack(c, head_ack, 0);
    }
}

static void head_session_done(hv_rpc_call_t *c, const hv_rpc_status_t *st, void *ud) {
    (void)st;
    (void)ud;
    if (head_call == c) {
        head_call = NULL;
    }
}

/* The head ends the current stream (as a restart or a network cut would). */
static void head_drop(void) {
    if (head_call != NULL) {
        hv_rpc_finish(head_call, HV_EUNAVAIL, "dropped by the test");
        head_call = NULL;
    }
}

static void on_joined(hv_session_t *s, int first, uint64_t node_id, const char *cluster, void *ud) {
    (void)s;
    (void)first;
    (void)ud;
    CHECK_EQ(node_id, 5);
    CHECK_STR(cluster, "test");
    joined++;
}

static void on_connected(hv_session_t *s, int first, void *ud) {
    (void)s;
    (void)ud;
    CHECK_EQ(first, connected == 0);
    connected++;
    last_contact_at = hv_now_ms();
}

static void on_order(hv_session_t *s, const Hvpb__V1__HeadMsg *m, void *ud) {
    (void)s;
    (void)ud;
    if (m->body_case == HVPB__V1__HEAD_MSG__BODY_KILL) {
        CHECK_EQ(m->kill->worker_id, 77);
        orders++;
    }
}

static void on_fatal(hv_session_t *s, hv_err rc, const char *msg, void *ud) {
    (void)s;
    (void)ud;
    fatal++;
    fatal_rc = rc;
    snprintf(fatal_msg, sizeof(fatal_msg), "%s", msg);
}

static void on_lease(hv_session_t *s, void *ud) {
    (void)s;
    (void)ud;
    lease_expired++;
    lease_at = hv_now_ms();
}

static size_t running_cb(hv_session_running_t **out, void *ud) {
    (void)ud;
    hv_session_running_t *r = hv_calloc(2, sizeof(*r));
    if (r == NULL) {
        *out = NULL;
        return 0;
    }
    r[0].worker_id = 1;
    r[0].pid = 100;
    r[1].worker_id = 2;
    r[1].pid = 0;
    *out = r;
    return 2;
}

static void setup(void) {
    uv_loop_init(&loop);
    fake_head_start(&loop, &fj, head_session_msg, head_session_done, NULL, 0, &eng, &srv, target,
                    sizeof(target));
    CHECK_RC(hv_rpc_channel_create(target, &chan), HV_OK);
    fj.joins = fj.unavailable = auto_ack = 0;
    answer_heartbeats = 1;
    head_ack = 0;
    head_call = NULL;
    nrec = 0;
    joined = connected = fatal = lease_expired = orders = 0;
    fatal_msg[0] = '\0';
}

static hv_session_t *start(const char *token, hv_rpc_channel_t *ch, uint32_t connect_ms,
                           size_t log_buffer) {
    char *addrs[] = {"10.0.0.1"};
    Hvpb__V1__NodeInfo ni = HVPB__V1__NODE_INFO__INIT;
    ni.name = "n1";
    ni.addrs = addrs;
    ni.n_addrs = 1;
    ni.slots = 2;
    hv_session_config_t cfg = {.head = target,
                               .token = token,
                               .incarnation = 0x1234,
                               .node = &ni,
                               .connect_timeout_ms = connect_ms,
                               .log_buffer = log_buffer};
    hv_session_cbs_t cbs = {.on_joined = on_joined,
                            .on_connected = on_connected,
                            .on_order = on_order,
                            .on_fatal = on_fatal,
                            .on_lease_expired = on_lease,
                            .running = running_cb};
    hv_session_t *s = NULL;
    CHECK_RC(hv_session_create(&loop, eng, ch, &cfg, &cbs, &s), HV_OK);
    return s;
}

static void teardown(hv_session_t *s) {
    hv_session_stop(s);
    hv_rpc_server_shutdown(srv);
    hv_rpc_engine_destroy(eng);
    hv_session_destroy(s);
    hv_rpc_channel_destroy(chan);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&loop), 0);
    for (int i = 0; i < nrec; i++) {
        hv_free(recs[i].first_line);
        hv_free(recs[i].last_line);
    }
}

static int count_body(int body) {
    int n = 0;
    for (int i = 0; i < nrec; i++) {
        n += recs[i].body == body;
    }
    return n;
}

static void case_join_heartbeat(void) {
    setup();
    hv_session_t *s = start("tok", chan, 0, 0);
    CHECK(test_run_until(&loop, &connected, 1, 5000));
    CHECK_EQ(joined, 1);
    CHECK(hv_session_connected(s));
    CHECK_EQ(hv_session_node_id(s), 5);
    CHECK_EQ(hello_incarnation, 0x1234);
    CHECK_EQ(hello_running, 2);
    CHECK(nrec >= 2 && recs[0].body == HVPB__V1__AGENT_MSG__BODY_HELLO);
    int before = count_body(HVPB__V1__AGENT_MSG__BODY_HEARTBEAT);
    test_run_for(&loop, 550);
    int beats = count_body(HVPB__V1__AGENT_MSG__BODY_HEARTBEAT) - before;
    if (beats < 4 || beats > 7) {
        fprintf(stderr, "  %d heartbeats in 550 ms at 100 ms; want about 5\n", beats);
        hv_check_failures++;
    }
    // An order reaches the owner.
    Hvpb__V1__HeadMsg m = HVPB__V1__HEAD_MSG__INIT;
    Hvpb__V1__KillWorker k = HVPB__V1__KILL_WORKER__INIT;
    k.worker_id = 77;
    m.body_case = HVPB__V1__HEAD_MSG__BODY_KILL;
    m.kill = &k;
    CHECK(head_call != NULL);
    if (head_call != NULL) {
        hv_rpc_send(head_call, &m.base);
    }
    CHECK(test_run_until(&loop, &orders, 1, 3000));
    CHECK_EQ(fatal, 0);
    teardown(s);
}

static void case_wrong_token(void) {
    setup();
    hv_session_t *s = start("nope", chan, 0, 0);
    CHECK(test_run_until(&loop, &fatal, 1, 5000));
    CHECK_RC(fatal_rc, HV_EPERM);
    CHECK(strstr(fatal_msg, "wrong join token") != NULL);
    CHECK_EQ(fj.joins, 1); // not retried
    CHECK_EQ(connected, 0);
    teardown(s);
}

static void case_unreachable(void) {
    setup();
    hv_rpc_channel_t *dead = NULL;
    CHECK_RC(hv_rpc_channel_create("127.0.0.1:1", &dead), HV_OK);
    uint64_t t0 = hv_now_ms();
    hv_session_t *s = start("tok", dead, 1500, 0);
    CHECK(test_run_until(&loop, &fatal, 1, 6000));
    uint64_t took = hv_now_ms() - t0;
    CHECK_RC(fatal_rc, HV_EUNAVAIL);
    CHECK(strstr(fatal_msg, "cannot reach the head") != NULL);
    if (took < 1400 || took > 3000) {
        fprintf(stderr, "  gave up after %llu ms; want about 1500\n", (unsigned long long)took);
        hv_check_failures++;
    }
    fprintf(stderr, "  message: %s\n", fatal_msg);
    teardown(s);
    hv_rpc_channel_destroy(dead);
}

/* Index of the n-th (0-based) received message with body b, or -1. */
static int find_nth(int b, int n, int from) {
    for (int i = from; i < nrec; i++) {
        if (recs[i].body == b && n-- == 0) {
            return i;
        }
    }
    return -1;
}

/* Cuts the stream and waits for connection number n; the index of the first hello received after
 * the cut (-1: none). */
static int cut_until_hello(int n) {
    int cut = nrec;
    head_drop();
    CHECK(test_run_until(&loop, &connected, n, 5000));
    int h = find_nth(HVPB__V1__AGENT_MSG__BODY_HELLO, 0, cut);
    CHECK(h >= 0);
    return h;
}

/* Received message i has this body and seq. */
static void check_rec(int i, int body, uint64_t seq) {
    CHECK_EQ(recs[i].body, body);
    CHECK_EQ(recs[i].seq, seq);
}

static void case_resend_until_acked(void) {
    setup();
    hv_session_t *s = start("tok", chan, 0, 0);
    CHECK(test_run_until(&loop, &connected, 1, 5000));
    hv_session_worker_started(s, 1, 4242);
    hv_session_worker_exited(s, 1, 3, 0, "");
    int want = nrec + 2;
    CHECK(test_run_until(&loop, &nrec, want, 3000));
    CHECK_EQ(hv_session_unacked(s), 2);
    // Cut the stream before any ack: the events come again after the next hello, before its
    // first heartbeat, in order.
    int h = cut_until_hello(2);
    if (h >= 0 && h + 3 < nrec) {
        check_rec(h + 1, HVPB__V1__AGENT_MSG__BODY_STARTED, 1);
        CHECK_EQ(recs[h + 1].value, 4242);
        check_rec(h + 2, HVPB__V1__AGENT_MSG__BODY_EXITED, 2);
        CHECK_EQ(recs[h + 2].value, 3);
        CHECK_EQ(recs[h + 3].body, HVPB__V1__AGENT_MSG__BODY_HEARTBEAT);
    }
    CHECK_EQ(fj.joins, 2); // re-joined before the new session
    // Acknowledge: the queue empties and the next reconnect re-sends nothing.
    head_ack = 2;
    int acked = 0;
    for (int i = 0; i < 100 && hv_session_unacked(s) != 0; i++) {
        test_run_for(&loop, 20);
    }
    acked = hv_session_unacked(s) == 0;
    CHECK(acked);
    int cut = nrec;
    head_drop();
    CHECK(test_run_until(&loop, &connected, 3, 5000));
    test_run_for(&loop, 200);
    CHECK_EQ(find_nth(HVPB__V1__AGENT_MSG__BODY_STARTED, 0, cut), -1);
    CHECK_EQ(find_nth(HVPB__V1__AGENT_MSG__BODY_EXITED, 0, cut), -1);
    teardown(s);
}

/* An actor's figures: running totals go at once without a seq; the final ones are an event numbered before the exit, re-sent with it after a cut
 * until acknowledged. */
static void case_actor_figures(void) {
    setup();
    hv_session_t *s = start("tok", chan, 0, 0);
    CHECK(test_run_until(&loop, &connected, 1, 5000));
    hv_callfig_t f = {0};
    hv_callfig_count(&f, 1, 1000, 1, 1);
    hv_callfig_count(&f, 1, 1000, 1, 1);
    int before = nrec;
    CHECK_RC(hv_session_actor_figures(s, 9, &f, 0), HV_OK);
    CHECK(test_run_until(&loop, &nrec, before + 1, 3000));
    int r = find_nth(HVPB__V1__AGENT_MSG__BODY_ACTOR_FIGURES, 0, before);
    CHECK(r >= 0);
    if (r >= 0) {
        CHECK_EQ(recs[r].seq, 0);
        CHECK_EQ(recs[r].worker_id, 9);
        CHECK_EQ(recs[r].value, 2);
        CHECK_EQ(recs[r].n_lines, 0);
    }
    CHECK_EQ(hv_session_unacked(s), 0);
    hv_callfig_count(&f, 0, 1000, 1, 1);
    CHECK_RC(hv_session_actor_figures(s, 9, &f, 1), HV_OK);
    hv_session_worker_exited(s, 9, -1, 9, "");
    CHECK(test_run_until(&loop, &nrec, before + 3, 3000));
    CHECK_EQ(hv_session_unacked(s), 2);
    int h = cut_until_hello(2);
    if (h >= 0 && h + 2 < nrec) {
        check_rec(h + 1, HVPB__V1__AGENT_MSG__BODY_ACTOR_FIGURES, 1);
        CHECK_EQ(recs[h + 1].value, 2);
        CHECK_EQ(recs[h + 1].n_lines, 1);
        check_rec(h + 2, HVPB__V1__AGENT_MSG__BODY_EXITED, 2);
    }
    teardown(s);
}

/* An event the agent cannot allocate is refused with HV_ENOMEM and leaves nothing queued, whichever
 * of its two allocations fails (the event, or the copy of what it carries). */
static void case_events_out_of_memory(void) {
    setup();
    hv_session_t *s = start("tok", chan, 0, 0);
    hv_callfig_t f = {0};
    for (long n = 1; n <= 2; n++) {
        hv_mem_fail_after(n);
        CHECK_RC(hv_session_worker_address(s, 7, 70, "10.0.0.1:9000"), HV_ENOMEM);
        hv_mem_fail_after(n);
        CHECK_RC(hv_session_worker_exited(s, 7, 1, 0, "boom"), HV_ENOMEM);
        hv_mem_fail_after(n);
        CHECK_RC(hv_session_actor_figures(s, 7, &f, 1), HV_ENOMEM);
    }
    hv_mem_fail_after(0);
    CHECK_EQ(hv_session_unacked(s), 0);
    CHECK_RC(hv_session_worker_exited(s, 7, 1, 0, "boom"), HV_OK);
    CHECK_EQ(hv_session_unacked(s), 1);
    teardown(s);
}

static void case_lines_before_exit(void) {
    setup();
    auto_ack = 1;
    hv_session_t *s = start("tok", chan, 0, 0);
    CHECK(test_run_until(&loop, &connected, 1, 5000));
    char line[64];
    for (int i = 0; i < 3000; i++) {
        int n = snprintf(line, sizeof(line), "line %d", i);
        hv_session_log(s, 7, 1, line, (size_t)n);
    }
    hv_session_worker_exited(s, 7, 0, 0, "");
    int exits = 0;
    for (int i = 0; i < 300 && exits == 0; i++) {
        test_run_for(&loop, 10);
        exits = count_body(HVPB__V1__AGENT_MSG__BODY_EXITED);
    }
    CHECK_EQ(exits, 1);
    // Every line arrived, in order, all before the exit.
    size_t total = 0;
    int exit_at = find_nth(HVPB__V1__AGENT_MSG__BODY_EXITED, 0, 0);
    int next = 0, in_order = 1;
    for (int i = 0; i < nrec; i++) {
        if (recs[i].body != HVPB__V1__AGENT_MSG__BODY_LOG) {
            continue;
        }
        CHECK(i < exit_at);
        CHECK_EQ(recs[i].worker_id, 7);
        char want[64];
        snprintf(want, sizeof(want), "line %d", next);
        in_order &= strcmp(recs[i].first_line, want) == 0;
        next += (int)recs[i].n_lines;
        total += recs[i].n_lines;
    }
    CHECK(in_order);
    CHECK_EQ(total, 3000);
    // The head's ack of the exit comes back a turn of the loop later (longer on a busy machine).
    for (int i = 0; i < 300 && hv_session_unacked(s) != 0; i++) {
        test_run_for(&loop, 10);
    }
    CHECK_EQ(hv_session_unacked(s), 0);
    teardown(s);
}

static void case_buffer_drops_oldest(void) {
    setup();
    hv_session_t *s = start("tok", chan, 0, 64 * 1024);
    CHECK(test_run_until(&loop, &connected, 1, 5000));
    // The head goes away: the stream ends and joins fail.
    fj.unavailable = 1;
    head_drop();
    test_run_for(&loop, 300);
    CHECK(!hv_session_connected(s));
    char line[128];
    int total = 5000;
    for (int i = 0; i < total; i++) {
        int n = snprintf(line, sizeof(line), "line %05d xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", i);
        hv_session_log(s, 9, 2, line, (size_t)n);
    }
    uint64_t dropped = hv_session_dropped_lines(s);
    CHECK(dropped > 0 && dropped < (uint64_t)total);
    int cut = nrec;
    fj.unavailable = 0;
    CHECK(test_run_until(&loop, &connected, 2, 8000));
    test_run_for(&loop, 300);
    // First a notice with the count, then the newest lines up to the last one.
    int first_log = find_nth(HVPB__V1__AGENT_MSG__BODY_LOG, 0, cut);
    CHECK(first_log >= 0);
    if (first_log >= 0) {
        char want[128];
        snprintf(want, sizeof(want),
                 "[hvagent: %llu log lines dropped while the head was unreachable]",
                 (unsigned long long)dropped);
        CHECK_STR(recs[first_log].first_line, want);
        CHECK_EQ(recs[first_log].value, 2);
        CHECK_EQ(recs[first_log].worker_id, 9);
    }
    size_t got = 0;
    const char *last = NULL;
    for (int i = first_log + 1; first_log >= 0 && i < nrec; i++) {
        if (recs[i].body == HVPB__V1__AGENT_MSG__BODY_LOG) {
            got += recs[i].n_lines;
            last = recs[i].last_line;
        }
    }
    CHECK_EQ(got + dropped, (uint64_t)total);
    CHECK(last != NULL && strncmp(last, "line 04999", 10) == 0);
    fprintf(stderr, "  %llu of %d lines dropped with a 64 KiB buffer\n",
            (unsigned long long)dropped, total);
    teardown(s);
}

static void case_lease_expiry(void) {
    setup();
    hv_session_t *s = start("tok", chan, 0, 0);
    CHECK(test_run_until(&loop, &connected, 1, 5000));
    test_run_for(&loop, 200);
    // The head stops answering and refuses joins.
    fj.unavailable = 1;
    answer_heartbeats = 0;
    uint64_t t0 = hv_now_ms();
    head_drop();
    CHECK(test_run_until(&loop, &lease_expired, 1, 5000));
    uint64_t after = lease_at - t0;
    // The last answer came up to one heartbeat before the drop; the lease is 600 ms.
    if (after < 400 || after > 1500) {
        fprintf(stderr, "  lease expiry %llu ms after the head went quiet; want about 600\n",
                (unsigned long long)after);
        hv_check_failures++;
    }
    test_run_for(&loop, 500);
    CHECK_EQ(lease_expired, 1); // once per disconnection
    teardown(s);
}

/* Runs the loop until the session says the head has the drain notice, for at most ms. */
static int wait_confirmed(hv_session_t *s, uint64_t ms) {
    uint64_t end = hv_now_ms() + ms;
    while (!hv_session_drain_confirmed(s) && hv_now_ms() < end) {
        test_run_for(&loop, 20);
    }
    return hv_session_drain_confirmed(s);
}

/* The index of the last record with this body, or -1. */
static int last_body(int body) {
    for (int i = nrec - 1; i >= 0; i--) {
        if (recs[i].body == body) {
            return i;
        }
    }
    return -1;
}

static void case_drain_notice(void) {
    setup();
    hv_session_t *s = start("tok", chan, 0, 0);
    CHECK(test_run_until(&loop, &connected, 1, 5000));
    CHECK(!hv_session_draining(s));
    // The head reads but does not answer: the notice goes out, unconfirmed.
    answer_heartbeats = 0;
    hv_session_drain_notice(s, "preemption", 5000);
    CHECK(hv_session_draining(s));
    test_run_for(&loop, 250);
    CHECK_EQ(count_body(HVPB__V1__AGENT_MSG__BODY_DRAIN), 1);
    int d = last_body(HVPB__V1__AGENT_MSG__BODY_DRAIN);
    CHECK(d >= 0 && recs[d].value > 4500 && recs[d].value <= 5000);
    // A heartbeat saying draining follows the notice at once.
    CHECK(d >= 0 && d + 1 < nrec && recs[d + 1].body == HVPB__V1__AGENT_MSG__BODY_HEARTBEAT &&
          recs[d + 1].value == 1);
    CHECK(!hv_session_drain_confirmed(s));
    answer_heartbeats = 1;
    CHECK(wait_confirmed(s, 2000));
    // A new stream: the notice again, with the time left, and confirmed again.
    test_run_for(&loop, 300);
    head_drop();
    CHECK(test_run_until(&loop, &connected, 2, 5000));
    test_run_for(&loop, 250);
    CHECK_EQ(count_body(HVPB__V1__AGENT_MSG__BODY_DRAIN), 2);
    d = last_body(HVPB__V1__AGENT_MSG__BODY_DRAIN);
    CHECK(d >= 0 && recs[d].value > 3000 && recs[d].value < 4800);
    CHECK(wait_confirmed(s, 2000));
    // Undrained: heartbeats say so, and the next stream carries no notice.
    hv_session_set_draining(s, 0);
    CHECK(!hv_session_draining(s));
    CHECK(!hv_session_drain_confirmed(s));
    head_drop();
    CHECK(test_run_until(&loop, &connected, 3, 5000));
    test_run_for(&loop, 300);
    CHECK_EQ(count_body(HVPB__V1__AGENT_MSG__BODY_DRAIN), 2);
    int h = last_body(HVPB__V1__AGENT_MSG__BODY_HEARTBEAT);
    CHECK(h >= 0 && recs[h].value == 0);
    // A drain order from the head (set_draining 1) marks heartbeats without a notice.
    hv_session_set_draining(s, 1);
    test_run_for(&loop, 250);
    h = last_body(HVPB__V1__AGENT_MSG__BODY_HEARTBEAT);
    CHECK(h >= 0 && recs[h].value == 1);
    CHECK_EQ(count_body(HVPB__V1__AGENT_MSG__BODY_DRAIN), 2);
    teardown(s);
}

static const test_case_t cases[] = {
    {"join_heartbeat", case_join_heartbeat},
    {"wrong_token", case_wrong_token},
    {"unreachable", case_unreachable},
    {"resend_until_acked", case_resend_until_acked},
    {"lines_before_exit", case_lines_before_exit},
    {"actor_figures", case_actor_figures},
    {"events_out_of_memory", case_events_out_of_memory},
    {"buffer_drops_oldest", case_buffer_drops_oldest},
    {"lease_expiry", case_lease_expiry},
    {"drain_notice", case_drain_notice},
    {NULL, NULL},
};

int main(int argc, char **argv) { return test_run(cases, argc, argv); }
