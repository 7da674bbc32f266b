/*
 * e2e_test: the hvagent binary end to end against an in-process fake head (Join, Session and
 * Fetch served by hv_rpc on loopback; no hvhead needed). The agent runs as a child process
 * (through agent/spawn.c); the fake head orders workers (a shell script it serves by digest) and
 * records what the agent reports. Checks what an operator and the head rely on: the ready line,
 * exit statuses and messages for usage errors, a refused token and an unreachable head; SIGTERM
 * (the preemption notice) drains: the notice with the deadline, workers left running, exit 0
 * once they exited on their own, or a stop at the deadline, at a second SIGTERM or at SIGINT; an
 * idle agent leaves at once after SIGTERM (bounded when the head is away); SIGTERM with
 * --drain-deadline 0 and a shutdown order kill the workers and report their exits before the
 * agent leaves with 0; `hvagent drain` and the head's drain/undrain orders set and clear the
 * heartbeat's draining flag; workers survive a head restart shorter than the lease and are
 * listed in the new hello; past the lease they are killed and their exits reported after the
 * reconnect; --daemon and `hvagent stop`. `agent_e2e_test <case>` runs one case.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_test.h"
#include "fakehead_test.h"
#include "hv.pb-c.h"
#include "mem.h"
#include "rpc.h"
#include "sha256.h"
#include "spawn.h"
#include "util.h"

#define MAX_LINES 512

static uv_loop_t loop;
static hv_rpc_engine_t *eng;
static hv_rpc_server_t *srv;
static char head_addr[64];
static char tmp[256];
static char agent_bin[4096];

/* ---- the fake head -------------------------------------------------------------------------- */

static const char *script; /* the worker program the head serves */
static char script_digest[65];
static fake_join_t fj = {.cluster = "e2e", .lease_ms = 600};
static int hellos, started_ev, exited_ev, log_lines;
static hv_rpc_call_t *head_call;
static uint64_t hello_running_id;
static int hello_running_pid;
static int worker_pid;
static int exit_code, exit_signal;
static char exit_reason[512];
static int exit_after_hello; /* the exited event came after the latest hello */
static int got_term_line_before_exit;
static uint64_t ack;
static int drains;                  /* DrainNotice messages received */
static int hb_draining;             /* the last heartbeat said draining */
static int hb_clear;                /* heartbeats that said not draining */
static uint32_t drain_deadline_got; /* deadline_ms of the last DrainNotice */
static char drain_reason_got[256];  /* reason of the last DrainNotice */

static void head_send(hv_rpc_call_t *c, Hvpb__V1__HeadMsg *m) {
    m->ack_seq = ack;
    hv_rpc_send(c, &m->base);
}

static void head_session_msg(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    const Hvpb__V1__AgentMsg *am = (const Hvpb__V1__AgentMsg *)m;
    (void)ud;
    Hvpb__V1__HeadMsg rep = HVPB__V1__HEAD_MSG__INIT;
    Hvpb__V1__Heartbeat hb = HVPB__V1__HEARTBEAT__INIT;
    switch (am->body_case) {
    case HVPB__V1__AGENT_MSG__BODY_HELLO:
        hellos++;
        head_call = c;
        hello_running_id = am->hello->n_running > 0 ? am->hello->running[0]->worker_id : 0;
        hello_running_pid = am->hello->n_running > 0 ? am->hello->running[0]->pid : 0;
        exit_after_hello = 0;
        break;
    case HVPB__V1__AGENT_MSG__BODY_DRAIN:
        drains++;
        drain_deadline_got = am->drain->deadline_ms;
        snprintf(drain_reason_got, sizeof(drain_reason_got), "%s", am->drain->reason);
        break;
    case HVPB__V1__AGENT_MSG__BODY_HEARTBEAT:
        hb_draining = am->heartbeat->draining;
        hb_clear += !am->heartbeat->draining;
        rep.body_case = HVPB__V1__HEAD_MSG__BODY_HEARTBEAT;
        rep.heartbeat = &hb;
        head_send(c, &rep);
        break;
    case HVPB__V1__AGENT_MSG__BODY_STARTED:
        started_ev++;
        worker_pid = am->started->pid;
        break;
    case HVPB__V1__AGENT_MSG__BODY_EXITED:
        exited_ev++;
        exit_code = am->exited->exit_code;
        exit_signal = am->exited->term_signal;
        snprintf(exit_reason, sizeof(exit_reason), "%s", am->exited->reason);
        exit_after_hello = 1;
        break;
    case HVPB__V1__AGENT_MSG__BODY_LOG:
        for (size_t i = 0; i < am->log->n_lines; i++) {
            log_lines++;
            if (strcmp(am->log->lines[i], "got TERM") == 0 && exited_ev == 0) {
                got_term_line_before_exit = 1;
            }
        }
        break;
    default:
        break;
    }
    if (am->seq != 0) {
        ack = am->seq;
        Hvpb__V1__HeadMsg a = HVPB__V1__HEAD_MSG__INIT;
        head_send(c, &a);
    }
}

static void head_session_done(hv_rpc_call_t *c, const hv_rpc_status_t *st, void *ud) {
    (void)st;
    (void)ud;
    if (head_call == c) {
        head_call = NULL;
    }
}

static void head_fetch(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    const Hvpb__V1__FetchRequest *r = (const Hvpb__V1__FetchRequest *)m;
    (void)ud;
    if (strcmp(r->digest, script_digest) != 0) {
        hv_rpc_finish(c, HV_ENOTFOUND, "no artifact %s", r->digest);
        return;
    }
    Hvpb__V1__ArtifactChunk ch = HVPB__V1__ARTIFACT_CHUNK__INIT;
    ch.offset = 0;
    ch.total_size = strlen(script);
    ch.data.data = (uint8_t *)script;
    ch.data.len = strlen(script);
    hv_rpc_send(c, &ch.base);
    hv_rpc_finish(c, HV_OK, NULL);
}

static void head_spawn(uint64_t worker_id) {
    Hvpb__V1__HeadMsg m = HVPB__V1__HEAD_MSG__INIT;
    Hvpb__V1__SpawnWorker sp = HVPB__V1__SPAWN_WORKER__INIT;
    Hvpb__V1__FileRef bin = HVPB__V1__FILE_REF__INIT;
    bin.name = "worker.sh";
    bin.digest = script_digest;
    bin.size = strlen(script);
    sp.worker_id = worker_id;
    sp.job_id = 1;
    sp.size = 1;
    sp.local_size = 1;
    sp.binary = &bin;
    sp.head_addr = head_addr;
    m.body_case = HVPB__V1__HEAD_MSG__BODY_SPAWN;
    m.spawn = &sp;
    CHECK(head_call != NULL);
    if (head_call != NULL) {
        head_send(head_call, &m);
    }
}

/* Sends a DrainOrder (undrain = 1: take the node back). */
static void head_drain_order(int undrain) {
    Hvpb__V1__HeadMsg m = HVPB__V1__HEAD_MSG__INIT;
    Hvpb__V1__DrainOrder d = HVPB__V1__DRAIN_ORDER__INIT;
    d.reason = undrain ? "hvctl undrain" : "hvctl drain";
    d.undrain = undrain ? 1 : 0;
    m.body_case = HVPB__V1__HEAD_MSG__BODY_DRAIN;
    m.drain = &d;
    CHECK(head_call != NULL);
    if (head_call != NULL) {
        head_send(head_call, &m);
    }
}

/* ---- the agent process ---------------------------------------------------------------------- */

typedef struct agent_s {
    hv_proc_t *proc;
    int done;
    int code;
    int sig;
    int ready; /* the ready line arrived */
    char ready_line[256];
    char err[8192]; /* stderr, concatenated */
    size_t errlen;
} agent_t;

static void agent_line(hv_proc_t *p, int stream, const char *line, size_t len, void *ud) {
    agent_t *a = ud;
    (void)p;
    if (stream == 1 && len > 16 && strncmp(line, "hvagent: joined ", 16) == 0) {
        a->ready = 1;
        snprintf(a->ready_line, sizeof(a->ready_line), "%.*s", (int)len, line);
    }
    if (stream == 2 && a->errlen + len + 2 < sizeof(a->err)) {
        memcpy(a->err + a->errlen, line, len);
        a->errlen += len;
        a->err[a->errlen++] = '\n';
        a->err[a->errlen] = '\0';
    }
}

static void agent_exit(hv_proc_t *p, int code, int sig, void *ud) {
    agent_t *a = ud;
    (void)p;
    a->done = 1;
    a->code = code;
    a->sig = sig;
    a->proc = NULL;
}

/* Starts hvagent with the given extra arguments (NULL-terminated). */
static void agent_start(agent_t *a, const char *target, char **extra) {
    memset(a, 0, sizeof(*a));
    char *argv[32];
    int n = 0;
    argv[n++] = agent_bin;
    argv[n++] = "join";
    argv[n++] = (char *)target;
    while (extra != NULL && *extra != NULL && n < 30) {
        argv[n++] = *extra++;
    }
    argv[n] = NULL;
    hv_proc_opts_t o = {.file = agent_bin,
                        .argv = argv,
                        .cwd = tmp,
                        .on_line = agent_line,
                        .on_exit = agent_exit,
                        .ud = a};
    char err[256];
    CHECK_RC(hv_proc_spawn(&loop, &o, &a->proc, err, sizeof(err)), HV_OK);
}

static void setup(const char *worker_script) {
    snprintf(tmp, sizeof(tmp), "/tmp/hv-agent-e2e-%d", (int)getpid());
    CHECK_RC(hv_mkdirs(tmp, 0755), HV_OK);
    uv_loop_init(&loop);
    hv_rpc_method_t mf = {.path = "/hvpb.v1.Cluster/Fetch",
                          .kind = HV_RPC_SERVER_STREAM,
                          .req = &hvpb__v1__fetch_request__descriptor,
                          .on_msg = head_fetch};
    fake_head_start(&loop, &fj, head_session_msg, head_session_done, &mf, 1, &eng, &srv, head_addr,
                    sizeof(head_addr));
    script = worker_script;
    hv_sha256_hex_of(script, strlen(script), script_digest);
    fj.lease_ms = 600;
    fj.unavailable = fj.joins = hellos = started_ev = exited_ev = log_lines = 0;
    head_call = NULL;
    worker_pid = 0;
    exit_reason[0] = '\0';
    got_term_line_before_exit = 0;
    ack = 0;
    drains = hb_draining = hb_clear = 0;
    drain_deadline_got = 0;
    drain_reason_got[0] = '\0';
}

static void teardown(agent_t *a) {
    if (a != NULL && a->proc != NULL) {
        hv_proc_close(a->proc, 1);
    }
    if (worker_pid > 0 && test_pid_alive(worker_pid)) {
        kill(-worker_pid, SIGKILL);
    }
    hv_rpc_server_shutdown(srv);
    hv_rpc_engine_destroy(eng);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&loop), 0);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
    CHECK_EQ(system(cmd), 0);
}

/* Loops until SIGTERM (the agent's kill) or SIGUSR1 (the test's stand-in for a worker that
 * leaves on its own, as an elastic worker moved off a draining node does). */
static const char *looping_worker = "#!/bin/sh\n"
                                    "trap 'echo got TERM; exit 0' TERM\n"
                                    "trap 'echo leaving; exit 0' USR1\n"
                                    "echo started\n"
                                    "while :; do sleep 0.05; done\n";

/* Starts an agent that joins the fake head and runs one looping worker (id 1). */
static void start_with_worker(agent_t *a, char **extra) {
    agent_start(a, head_addr, extra);
    CHECK(test_run_until(&loop, &a->ready, 1, 10000));
    CHECK(test_run_until(&loop, &hellos, 1, 5000));
    head_spawn(1);
    CHECK(test_run_until(&loop, &started_ev, 1, 10000));
    CHECK(test_run_until(&loop, &log_lines, 1, 5000)); // "started": the trap is set
    CHECK(worker_pid > 0 && test_pid_alive(worker_pid));
}

/* Ends the agent's stream from the head's side with why; head_away: joins fail from now on. */
static void cut_stream(const char *why, int head_away) {
    if (head_away) {
        fj.unavailable = 1;
    }
    hv_rpc_finish(head_call, HV_EUNAVAIL, why);
    head_call = NULL;
}

/* An agent (token tok) running one looping worker under a lease of lease_ms. */
static void with_lease(agent_t *a, uint32_t lease_ms) {
    setup(looping_worker);
    fj.lease_ms = lease_ms;
    char *extra[] = {"--token", "tok", NULL};
    start_with_worker(a, extra);
}

/* An agent (token tok, --drain-deadline deadline unless NULL) running one looping worker, sent
 * SIGTERM: waits for its drain notice. The time of the SIGTERM. */
static uint64_t draining(agent_t *a, const char *deadline) {
    setup(looping_worker);
    char *extra[] = {"--token", "tok", "--drain-deadline", (char *)deadline, NULL};
    if (deadline == NULL) {
        extra[2] = NULL;
    }
    start_with_worker(a, extra);
    uint64_t t0 = hv_now_ms();
    kill(hv_proc_pid(a->proc), SIGTERM);
    CHECK(test_run_until(&loop, &drains, 1, 5000));
    return t0;
}

/* The agent ends within wait_ms, with exit status code. */
static void agent_exits(agent_t *a, uint64_t wait_ms, int code) {
    CHECK(test_run_until(&loop, &a->done, 1, wait_ms));
    CHECK_EQ(a->code, code);
}

/* An agent with this join token and no worker yet (the head's workers loop if started). */
static void idle_agent(agent_t *a, const char *token) {
    setup(looping_worker);
    char *extra[] = {"--token", (char *)token, NULL};
    agent_start(a, head_addr, extra);
}

/* The one worker ended (an exit event, with this in its reason) and its process is gone. */
static void worker_ended(const char *why) {
    CHECK_EQ(exited_ev, 1);
    CHECK(strstr(exit_reason, why) != NULL);
    CHECK(!test_pid_alive(worker_pid));
}

/* Sends sig to the agent and waits (wait_ms at most) until it ended; the ms that took. */
static uint64_t stop_agent(agent_t *a, int sig, uint64_t wait_ms) {
    uint64_t t0 = hv_now_ms();
    kill(hv_proc_pid(a->proc), sig);
    CHECK(test_run_until(&loop, &a->done, 1, wait_ms));
    return hv_now_ms() - t0;
}

static int agent_cmd(const char *cmd);
static int agent_run(char *const *args);

/* --drain-deadline 0: SIGTERM stops at once, as before drains existed. */
static void case_ready_and_sigterm(void) {
    setup(looping_worker);
    agent_t a;
    char *extra[] = {"--token",          "tok", "--name", "e2e", "--slots", "3",
                     "--drain-deadline", "0",   NULL};
    start_with_worker(&a, extra);
    char want[128];
    snprintf(want, sizeof(want), "hvagent: joined %s as node e2e (id 5), 3 slots", head_addr);
    CHECK_STR(a.ready_line, want);
    uint64_t took = stop_agent(&a, SIGTERM, 8000);
    CHECK_EQ(a.code, 0);
    CHECK_EQ(exited_ev, 1); // reported before the agent left
    CHECK_EQ(exit_code, 0); // the worker's trap exited 0
    CHECK(got_term_line_before_exit);
    CHECK(!test_pid_alive(worker_pid));
    CHECK(took < 4000);
    CHECK_EQ(drains, 0);
    fprintf(stderr, "  SIGTERM to exit: %llu ms\n", (unsigned long long)took);
    teardown(&a);
}

/* SIGTERM drains: the notice carries the deadline, the worker keeps running, an undrain order
 * does not hold back an agent that is leaving, and the agent exits 0 once the worker left on
 * its own and its exit was reported. */
static void case_sigterm_drains(void) {
    agent_t a;
    draining(&a, "30");
    CHECK(drain_deadline_got > 29000 && drain_deadline_got <= 30000);
    CHECK(strstr(drain_reason_got, "SIGTERM") != NULL);
    CHECK(test_run_until(&loop, &hb_draining, 1, 2000));
    test_run_for(&loop, 700);
    CHECK(!a.done);
    CHECK(test_pid_alive(worker_pid));
    CHECK_EQ(exited_ev, 0);
    // The head cannot take back a node whose agent got SIGTERM: the notice comes again.
    head_drain_order(1);
    CHECK(test_run_until(&loop, &drains, 2, 5000));
    CHECK(drain_deadline_got > 25000 && drain_deadline_got < 30000);
    test_run_for(&loop, 300);
    CHECK_EQ(hb_draining, 1);
    CHECK(!a.done);
    // The worker leaves on its own (an elastic worker moved off the node at its commit).
    uint64_t t0 = hv_now_ms();
    kill(worker_pid, SIGUSR1);
    CHECK(test_run_until(&loop, &a.done, 1, 5000));
    fprintf(stderr, "  worker exit to agent exit: %llu ms\n",
            (unsigned long long)(hv_now_ms() - t0));
    CHECK_EQ(a.code, 0);
    CHECK_EQ(exited_ev, 1); // reported (and acknowledged) before the agent left
    CHECK_EQ(exit_code, 0);
    CHECK_EQ(exit_signal, 0);
    CHECK_STR(exit_reason, "");
    CHECK(!got_term_line_before_exit);
    CHECK(strstr(a.err, "HV-AGENT-DRAIN-START") != NULL);
    CHECK(strstr(a.err, "HV-AGENT-DRAIN-DONE") != NULL);
    teardown(&a);
}

/* The drain deadline passes with the worker still running: it is stopped as at SIGINT. */
static void case_drain_deadline(void) {
    agent_t a;
    uint64_t t0 = draining(&a, "1");
    CHECK(drain_deadline_got > 900 && drain_deadline_got <= 1000);
    CHECK(test_run_until(&loop, &a.done, 1, 8000));
    uint64_t took = hv_now_ms() - t0;
    fprintf(stderr, "  SIGTERM to exit with a 1 s deadline: %llu ms\n", (unsigned long long)took);
    CHECK(took >= 900 && took < 5000);
    CHECK_EQ(a.code, 0);
    CHECK(got_term_line_before_exit); // SIGTERM to the worker, as at a stop
    worker_ended("drain deadline (1 s) passed");
    CHECK(strstr(a.err, "HV-AGENT-DRAIN-DEADLINE") != NULL);
    teardown(&a);
}

/* A second SIGTERM during the drain, or SIGINT at any time, stops at once. */
static void case_second_sigterm_and_sigint(void) {
    agent_t a;
    draining(&a, NULL); // the default deadline: 120 s
    CHECK_EQ(drain_deadline_got, 120000);
    test_run_for(&loop, 300);
    CHECK(test_pid_alive(worker_pid));
    CHECK(stop_agent(&a, SIGTERM, 8000) < 4000);
    CHECK_EQ(a.code, 0);
    CHECK(got_term_line_before_exit);
    worker_ended("SIGTERM again");
    teardown(&a);

    setup(looping_worker);
    char *extra[] = {"--token", "tok", NULL};
    start_with_worker(&a, extra);
    CHECK(stop_agent(&a, SIGINT, 8000) < 4000);
    CHECK_EQ(a.code, 0);
    CHECK_EQ(drains, 0); // no drain: a plain stop
    CHECK(got_term_line_before_exit);
    worker_ended("SIGINT");
    teardown(&a);
}

/* An agent without workers leaves as soon as the head has the notice; with the head away, after
 * a bounded wait. */
static void case_sigterm_idle(void) {
    agent_t a;
    idle_agent(&a, "tok");
    CHECK(test_run_until(&loop, &a.ready, 1, 10000));
    CHECK(test_run_until(&loop, &hellos, 1, 5000));
    uint64_t took = stop_agent(&a, SIGTERM, 5000);
    fprintf(stderr, "  idle agent, SIGTERM to exit: %llu ms\n", (unsigned long long)took);
    CHECK(took < 2000);
    CHECK_EQ(a.code, 0);
    CHECK_EQ(drains, 1);
    CHECK(strstr(a.err, "HV-AGENT-DRAIN-UNCONFIRMED") == NULL);

    // The head is gone: the agent cannot confirm the notice and leaves after the bounded wait.
    char *extra[] = {"--token", "tok", NULL};
    agent_start(&a, head_addr, extra);
    CHECK(test_run_until(&loop, &hellos, 2, 8000));
    cut_stream("network cut", 1);
    test_run_for(&loop, 100);
    took = stop_agent(&a, SIGTERM, 8000);
    fprintf(stderr, "  idle agent, head away, SIGTERM to exit: %llu ms\n",
            (unsigned long long)took);
    CHECK(took >= 2500 && took < 6000);
    CHECK_EQ(a.code, 0);
    CHECK(strstr(a.err, "HV-AGENT-DRAIN-UNCONFIRMED") != NULL);
    teardown(&a);
}

/* An agent (token tok, work dir wd) drained by `hvagent drain` (SIGUSR1 through the default pid
 * file): waits for the head to have the notice. */
static void drained_by_cmd(agent_t *a) {
    setup(looping_worker);
    char *extra[] = {"--token", "tok", "--work-dir", "wd", NULL};
    agent_start(a, head_addr, extra);
    CHECK(test_run_until(&loop, &hellos, 1, 8000));
    CHECK_EQ(agent_cmd("drain"), 0);
    CHECK(test_run_until(&loop, &drains, 1, 5000));
}

/* `hvagent drain` marks the node draining; the head's undrain order clears it (and the notice is
 * not repeated on the next stream); its drain order sets it again. The agent stays throughout. */
static void case_undrain(void) {
    agent_t a;
    drained_by_cmd(&a);
    CHECK_EQ(drain_deadline_got, 0); // unknown: the node is not going away
    CHECK(test_run_until(&loop, &hb_draining, 1, 2000));
    hb_clear = 0;
    head_drain_order(1);
    CHECK(test_run_until(&loop, &hb_clear, 1, 2000));
    CHECK_EQ(hb_draining, 0);
    // A new stream: no notice again, heartbeats still clear.
    cut_stream("cut", 0);
    CHECK(test_run_until(&loop, &hellos, 2, 8000));
    hb_clear = 0;
    CHECK(test_run_until(&loop, &hb_clear, 2, 3000));
    CHECK_EQ(drains, 1);
    CHECK_EQ(hb_draining, 0);
    // The head drains the node on its own: heartbeats say so, and the agent stays.
    head_drain_order(0);
    CHECK(test_run_until(&loop, &hb_draining, 1, 2000));
    CHECK(!a.done);
    CHECK(strstr(a.err, "HV-AGENT-UNDRAIN") != NULL);
    CHECK_EQ(agent_cmd("stop"), 0);
    agent_exits(&a, 8000, 0);
    teardown(&a);
}

static void case_shutdown_order(void) {
    setup("#!/bin/sh\ntrap '' TERM\necho started\nwhile :; do sleep 0.05; done\n");
    agent_t a;
    char *extra[] = {"--token", "tok", "--name", "e2e", NULL};
    start_with_worker(&a, extra);
    Hvpb__V1__HeadMsg m = HVPB__V1__HEAD_MSG__INIT;
    Hvpb__V1__ShutdownOrder so = HVPB__V1__SHUTDOWN_ORDER__INIT;
    so.reason = "test";
    m.body_case = HVPB__V1__HEAD_MSG__BODY_SHUTDOWN;
    m.shutdown = &so;
    head_send(head_call, &m);
    agent_exits(&a, 10000, 0);
    CHECK_EQ(exit_signal, SIGKILL); // it ignored SIGTERM: killed after the grace
    worker_ended("shutdown ordered by the head: test");
    teardown(&a);
}

static void case_refused_and_usage(void) {
    agent_t a;
    idle_agent(&a, "wrong");
    agent_exits(&a, 10000, 1);
    CHECK_EQ(fj.joins, 1);
    CHECK(strstr(a.err, "hvagent: the head refused to join: wrong join token for cluster "
                        "'e2e'") != NULL);
    CHECK(!a.ready);

    char *bad[] = {"--slots", "many", NULL};
    agent_start(&a, head_addr, bad);
    agent_exits(&a, 5000, 64); /* a usage error: the same shape and status in all hv tools */
    CHECK(strstr(a.err, "--slots \"many\"") != NULL);
    CHECK(strstr(a.err, "(see hvagent --help)") != NULL);

    uint64_t t0 = hv_now_ms();
    char *dead[] = {"--token", "tok", "--connect-timeout", "1", NULL};
    agent_start(&a, "127.0.0.1:1", dead);
    agent_exits(&a, 8000, 1);
    CHECK(strstr(a.err, "hvagent: cannot reach the head at 127.0.0.1:1 after 1 s") != NULL);
    CHECK(hv_now_ms() - t0 < 4000);
    teardown(&a);
}

static void case_survives_short_restart(void) {
    agent_t a;
    with_lease(&a, 3000);
    // The head "restarts": the stream ends and joins fail for a while (shorter than the lease).
    cut_stream("head restarting", 1);
    test_run_for(&loop, 800);
    CHECK(test_pid_alive(worker_pid));
    fj.unavailable = 0;
    CHECK(test_run_until(&loop, &hellos, 2, 8000));
    CHECK_EQ(hello_running_id, 1);
    CHECK_EQ(hello_running_pid, worker_pid);
    CHECK(test_pid_alive(worker_pid));
    CHECK_EQ(exited_ev, 0);
    stop_agent(&a, SIGINT, 8000);
    CHECK_EQ(a.code, 0);
    teardown(&a);
}

static void case_lease_kills_orphans(void) {
    agent_t a;
    with_lease(&a, 600);
    cut_stream("network cut", 1);
    uint64_t t0 = hv_now_ms();
    int pid = worker_pid;
    while (test_pid_alive(pid) && hv_now_ms() - t0 < 6000) {
        test_run_for(&loop, 50);
    }
    uint64_t took = hv_now_ms() - t0;
    CHECK(!test_pid_alive(pid));
    CHECK(took >= 500 && took < 4000); // not before the lease
    fprintf(stderr, "  worker killed %llu ms after the head went away (lease 600 ms)\n",
            (unsigned long long)took);
    CHECK_EQ(exited_ev, 0); // nobody to report to yet
    fj.unavailable = 0;
    CHECK(test_run_until(&loop, &exited_ev, 1, 8000));
    CHECK(exit_after_hello);
    CHECK(strstr(exit_reason, "lease") != NULL);
    CHECK_EQ(hello_running_id, 0); // the new hello lists no worker
    stop_agent(&a, SIGTERM, 8000); // no worker left: the drain ends at once
    CHECK_EQ(a.code, 0);
    teardown(&a);
}

static void case_daemon_stop(void) {
    setup(looping_worker);
    char pidf[400], logf[400];
    snprintf(pidf, sizeof(pidf), "%s/a.pid", tmp);
    snprintf(logf, sizeof(logf), "%s/a.log", tmp);
    agent_t a;
    char *extra[] = {"--token",    "tok", "--daemon",   "--pid-file", pidf,
                     "--log-file", logf,  "--work-dir", "wd",         NULL};
    agent_start(&a, head_addr, extra);
    CHECK(
        test_run_until(&loop, &a.done, 1, 5000)); // the parent leaves once the pid file is written
    CHECK_EQ(a.code, 0);
    CHECK(test_run_until(&loop, &hellos, 1, 8000)); // the daemon joined
    char *txt = NULL;
    CHECK_RC(hv_read_file(pidf, 64, &txt, NULL), HV_OK);
    int dpid = txt != NULL ? atoi(txt) : 0;
    hv_free(txt);
    CHECK(dpid > 0 && test_pid_alive(dpid));
    // A second agent on the same pid file is refused.
    agent_t b;
    agent_start(&b, head_addr, extra);
    CHECK(test_run_until(&loop, &b.done, 1, 5000));
    CHECK_EQ(b.code, 1);
    CHECK(strstr(b.err, "another agent") != NULL);
    // hvagent stop
    char *stop[] = {"stop", "--pid-file", pidf, NULL};
    CHECK_EQ(agent_run(stop), 0);
    CHECK(dpid > 0 && !test_pid_alive(dpid));
    CHECK(access(pidf, F_OK) != 0); // removed on the way out
    char *log = NULL;
    CHECK_RC(hv_read_file(logf, 1 << 20, &log, NULL), HV_OK);
    CHECK(log != NULL && strstr(log, "hvagent: joined") != NULL);
    hv_free(log);
    char wd[400];
    snprintf(wd, sizeof(wd), "%s/wd/cache", tmp);
    CHECK(access(wd, F_OK) == 0); // relative work dir resolved against the cwd
    teardown(NULL);
}

/* Runs `hvagent ARGS...` (args NULL-terminated, at most 8) to its end; its exit status. */
static int agent_run(char *const *args) {
    agent_t b;
    memset(&b, 0, sizeof(b));
    char *argv[10] = {agent_bin};
    for (int i = 0; i < 8 && args[i] != NULL; i++) {
        argv[i + 1] = args[i];
    }
    hv_proc_opts_t o = {.file = agent_bin,
                        .argv = argv,
                        .cwd = tmp,
                        .on_line = agent_line,
                        .on_exit = agent_exit,
                        .ud = &b};
    char err[128];
    CHECK_RC(hv_proc_spawn(&loop, &o, &b.proc, err, sizeof(err)), HV_OK);
    CHECK(test_run_until(&loop, &b.done, 1, 15000));
    return b.code;
}

/* Runs `hvagent <cmd> --work-dir wd` and returns its exit status. */
static int agent_cmd(const char *cmd) {
    char *args[] = {(char *)cmd, "--work-dir", "wd", NULL};
    return agent_run(args);
}

static void case_drain(void) {
    agent_t a;
    drained_by_cmd(&a); // SIGUSR1 through the default pid file
    CHECK(test_run_until(&loop, &hb_draining, 1, 2000));
    // The notice is repeated on the next stream.
    cut_stream("cut", 0);
    CHECK(test_run_until(&loop, &hellos, 2, 8000));
    CHECK(test_run_until(&loop, &drains, 2, 5000));
    CHECK_EQ(agent_cmd("stop"), 0);
    agent_exits(&a, 8000, 0);
    CHECK_EQ(agent_cmd("stop"), 1); // nobody left to stop
    teardown(&a);
}

static const test_case_t cases[] = {
    {"drain", case_drain},
    {"ready_and_sigterm", case_ready_and_sigterm},
    {"sigterm_drains", case_sigterm_drains},
    {"drain_deadline", case_drain_deadline},
    {"second_sigterm_and_sigint", case_second_sigterm_and_sigint},
    {"sigterm_idle", case_sigterm_idle},
    {"undrain", case_undrain},
    {"shutdown_order", case_shutdown_order},
    {"refused_and_usage", case_refused_and_usage},
    {"survives_short_restart", case_survives_short_restart},
    {"lease_kills_orphans", case_lease_kills_orphans},
    {"daemon_stop", case_daemon_stop},
    {NULL, NULL},
};

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    const char *dir = getenv("HV_BIN_DIR");
    if (dir != NULL) {
        snprintf(agent_bin, sizeof(agent_bin), "%s/hvagent", dir);
    } else {
        // Next to this test binary.
        char self[2048];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        self[n > 0 ? n : 0] = '\0';
        char *slash = strrchr(self, '/');
        if (slash != NULL) {
            *slash = '\0';
        }
        snprintf(agent_bin, sizeof(agent_bin), "%s/hvagent", self);
    }
    if (access(agent_bin, X_OK) != 0) {
        fprintf(stderr, "cannot run %s: %s\n", agent_bin, strerror(errno));
        return 1;
    }
    return test_run(cases, argc, argv);
}
