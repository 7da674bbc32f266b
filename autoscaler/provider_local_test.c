/*
 * provider_local_test: the local and spot-sim providers with real processes on a real libuv
 * loop. The agent is a small shell script that records its command line in its work directory
 * and, on SIGTERM, writes "term" there and exits (like an idle hvagent). Checked: the command line
 * and the modes of the instance's files, terminate (SIGTERM; SIGKILL after the grace period when
 * the agent ignores it), an agent that dies, a start that fails, adopting a running agent after
 * a "restart" (and refusing a pid that is not the instance), and spot-sim's capacity refusal,
 * boot delay, notice (SIGTERM) and preemption (SIGKILL) (provider_spotsim.c), each end with its
 * cause; and the factory (provider.c) that makes them by name.
 * `provider_local_test <case>` runs one case.
 */
#include "hv_check.h"
#include "provider_test.h"
#include "provider_local.h"
#include "provider_spotsim.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[64];    /* per-run scratch directory */
static char g_agent[128]; /* the fake agent script */
static char g_token[128];

static const char FAKE_AGENT[] =
    "#!/bin/sh\n"
    "wd=''; prev=''\n"
    "for a in \"$@\"; do [ \"$prev\" = --work-dir ] && wd=$a; prev=$a; done\n"
    "echo \"$@\" > \"$wd/args\"\n"
    "if [ -e \"$wd/../ignore-term\" ]; then trap 'echo term >> \"$wd/term\"' TERM\n"
    "else trap 'echo term >> \"$wd/term\"; exit 0' TERM; fi\n"
    "while :; do sleep 0.05; done\n";

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void setup(void) {
    snprintf(g_dir, sizeof(g_dir), "/tmp/hv-plt-XXXXXX");
    if (mkdtemp(g_dir) == NULL) {
        die("mkdtemp");
    }
    snprintf(g_agent, sizeof(g_agent), "%s/fake-agent", g_dir);
    FILE *f = fopen(g_agent, "w");
    if (f == NULL) {
        die(g_agent);
    }
    fputs(FAKE_AGENT, f);
    fclose(f);
    chmod(g_agent, 0755);
    snprintf(g_token, sizeof(g_token), "%s/token", g_dir);
    f = fopen(g_token, "w");
    if (f == NULL) {
        die(g_token);
    }
    fputs("secret\n", f);
    fclose(f);
    chmod(g_token, 0600);
}

static void teardown(void) {
    char cmd[400];
    /* "fake-agen[t]": the shell running this line must not match its own pattern, or pkill
     * kills it before the rm (which left a directory in /tmp per case) */
    snprintf(cmd, sizeof(cmd), "pkill -KILL -f '%s/fake-agen[t]' 2>/dev/null; rm -rf '%s'", g_dir,
             g_dir);
    if (system(cmd) != 0) {
        /* nothing left to kill is fine */
    }
}

/* ---- events --------------------------------------------------------------------------------- */

/* Runs the loop until pred() or ms pass. Returns 1 when pred() became true. */
static int run_until(uv_loop_t *loop, int (*pred)(void *), void *arg, uint64_t ms) {
    uint64_t end = uv_now(loop) + ms;
    while (!pred(arg)) {
        if (uv_now(loop) > end) {
            return 0;
        }
        uv_run(loop, UV_RUN_ONCE);
    }
    return 1;
}

static int file_exists(void *path) { return access((const char *)path, F_OK) == 0; }

typedef struct want_s {
    rec_t *r;
    hv_prov_event ev;
    uint64_t inst;
} want_t;

static int has_event(void *arg) {
    want_t *w = arg;
    return rec_find(w->r, w->ev, w->inst) >= 0;
}

static hv_provider_t *make(uv_loop_t *loop, rec_t *r, const hv_ss_config_t *sim,
                           uint32_t grace_ms) {
    char work[300];
    snprintf(work, sizeof(work), "%s/instances", g_dir);
    hv_prov_local_opts_t o = {
        .agent = g_agent, .work_dir = work, .stop_grace_ms = grace_ms, .tick_ms = 20};
    hv_provider_t *p = NULL;
    if (sim == NULL) {
        CHECK_RC(hv_provider_local_create(loop, &o, rec_event, r, &p), HV_OK);
    } else {
        hv_prov_spotsim_opts_t so = {.local = o, .sim = *sim};
        char err[300] = "";
        CHECK_RC(hv_provider_spotsim_create(loop, &so, rec_event, r, &p, err, sizeof(err)), HV_OK);
    }
    return p;
}

static hv_prov_launch_t req(uint64_t id, const char *name, int preemptible) {
    return (hv_prov_launch_t){.instance = id,
                              .name = name,
                              .type = 0,
                              .type_name = "cpu",
                              .slots = 2,
                              .preemptible = preemptible,
                              .head = "127.0.0.1:7000",
                              .token_file = g_token};
}

static void path_of(char *buf, size_t len, const char *name, const char *file) {
    snprintf(buf, len, "%s/instances/%s/%s", g_dir, name, file);
}

static void destroy_and_drain(uv_loop_t *loop, hv_provider_t *p) {
    hv_provider_destroy(p);
    uv_run(loop, UV_RUN_NOWAIT);
    uv_run(loop, UV_RUN_NOWAIT);
}

/* ---- cases ---------------------------------------------------------------------------------- */

static void case_launch_and_terminate(void) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    rec_t r = {0};
    hv_provider_t *p = make(&loop, &r, NULL, 5000);
    CHECK_STR(p->v->name, "local");
    char err[300] = "";
    hv_prov_launch_t l = req(5, "as-cpu-5", 1);
    CHECK_RC(hv_provider_launch(p, &l, err, sizeof(err)), HV_OK);
    CHECK_RC(hv_provider_launch(p, &l, err, sizeof(err)), HV_EINVAL); /* the same id twice */
    CHECK_STR(err, "instance 5 exists already");
    char args[400], term[400], logp[400], dir[400];
    path_of(args, sizeof(args), "as-cpu-5", "args");
    path_of(term, sizeof(term), "as-cpu-5", "term");
    path_of(logp, sizeof(logp), "as-cpu-5", "agent.log");
    path_of(dir, sizeof(dir), "as-cpu-5", "");
    CHECK(run_until(&loop, file_exists, args, 5000));
    usleep(50000); /* the script writes the line right after creating the file */
    FILE *f = fopen(args, "r");
    char line[600] = "";
    CHECK(f != NULL && fgets(line, sizeof(line), f) != NULL);
    fclose(f);
    char want[800];
    snprintf(want, sizeof(want),
             "join 127.0.0.1:7000 --name as-cpu-5 --slots 2 --token-file %s --work-dir "
             "%s/instances/as-cpu-5 --instance-id 5 --preemptible\n",
             g_token, g_dir);
    CHECK_STR(line, want);
    struct stat st;
    CHECK_EQ(stat(dir, &st), 0);
    CHECK_EQ(st.st_mode & 0777, 0700);
    CHECK_EQ(stat(logp, &st), 0);
    CHECK_EQ(st.st_mode & 0777, 0600);
    const char *h = hv_provider_handle(p, 5);
    CHECK(h != NULL);
    int pid = atoi(h);
    CHECK(pid > 0 && kill(pid, 0) == 0);
    /* terminate: SIGTERM, the agent exits, GONE */
    CHECK_RC(hv_provider_terminate(p, 5), HV_OK);
    want_t w = {&r, HV_PROV_GONE, 5};
    CHECK(run_until(&loop, has_event, &w, 5000));
    CHECK_STR(r.why[rec_find(&r, HV_PROV_GONE, 5)], "terminated");
    CHECK_EQ(r.cause[rec_find(&r, HV_PROV_GONE, 5)], HV_PROV_CAUSE_TERMINATED);
    CHECK(file_exists(term));
    CHECK(kill(pid, 0) != 0);
    CHECK_RC(hv_provider_terminate(p, 5), HV_ENOTFOUND);
    CHECK(hv_provider_handle(p, 5) == NULL);
    destroy_and_drain(&loop, p);
    CHECK_EQ(uv_loop_close(&loop), 0);
}

static void case_terminate_grace(void) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    rec_t r = {0};
    hv_provider_t *p = make(&loop, &r, NULL, 300);
    char ign[300];
    snprintf(ign, sizeof(ign), "%s/instances/ignore-term", g_dir);
    FILE *f = fopen(ign, "w");
    CHECK(f != NULL);
    fclose(f);
    char err[300] = "", args[400], term[400];
    hv_prov_launch_t l = req(6, "stubborn", 0);
    CHECK_RC(hv_provider_launch(p, &l, err, sizeof(err)), HV_OK);
    path_of(args, sizeof(args), "stubborn", "args");
    path_of(term, sizeof(term), "stubborn", "term");
    CHECK(run_until(&loop, file_exists, args, 5000));
    usleep(100000); /* let the shell set its trap */
    uint64_t t0 = uv_now(&loop);
    CHECK_RC(hv_provider_terminate(p, 6), HV_OK);
    want_t w = {&r, HV_PROV_GONE, 6};
    CHECK(run_until(&loop, has_event, &w, 5000));
    CHECK(uv_now(&loop) - t0 >= 300); /* it ignored SIGTERM: SIGKILL after the grace */
    CHECK(file_exists(term));
    CHECK_STR(r.why[0], "terminated");
    unlink(ign);
    destroy_and_drain(&loop, p);
    CHECK_EQ(uv_loop_close(&loop), 0);
}

static void case_agent_dies(void) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    rec_t r = {0};
    hv_provider_t *p = make(&loop, &r, NULL, 1000);
    char err[300] = "", args[400];
    hv_prov_launch_t l = req(7, "fragile", 0);
    CHECK_RC(hv_provider_launch(p, &l, err, sizeof(err)), HV_OK);
    path_of(args, sizeof(args), "fragile", "args");
    CHECK(run_until(&loop, file_exists, args, 5000));
    CHECK_EQ(kill(atoi(hv_provider_handle(p, 7)), SIGKILL), 0);
    want_t w = {&r, HV_PROV_GONE, 7};
    CHECK(run_until(&loop, has_event, &w, 5000));
    CHECK_STR(r.why[0], "its agent was killed by signal 9");
    CHECK_EQ(r.cause[0], HV_PROV_CAUSE_LOST);
    destroy_and_drain(&loop, p);
    CHECK_EQ(uv_loop_close(&loop), 0);
}

static void case_start_fails(void) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    rec_t r = {0};
    char work[300];
    snprintf(work, sizeof(work), "%s/instances", g_dir);
    hv_prov_local_opts_t o = {.agent = "/nonexistent/hvagent", .work_dir = work, .tick_ms = 20};
    hv_provider_t *p = NULL;
    CHECK_RC(hv_provider_local_create(&loop, &o, rec_event, &r, &p), HV_OK);
    char err[300] = "";
    hv_prov_launch_t l = req(8, "never", 0);
    CHECK_RC(hv_provider_launch(p, &l, err, sizeof(err)), HV_EIO);
    CHECK(strstr(err, "cannot start /nonexistent/hvagent") != NULL);
    CHECK(hv_provider_handle(p, 8) == NULL);
    l.name = "a/b"; /* a name that would escape the work directory */
    CHECK_RC(hv_provider_launch(p, &l, err, sizeof(err)), HV_EINVAL);
    destroy_and_drain(&loop, p);
    CHECK_EQ(uv_loop_close(&loop), 0);
}

/* The head restarts: the agent keeps running and the new provider adopts it by pid. */
static void case_adopt(void) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    rec_t r = {0};
    hv_provider_t *p = make(&loop, &r, NULL, 1000);
    char err[300] = "", args[400], handle[24];
    hv_prov_launch_t l = req(9, "survivor", 0);
    CHECK_RC(hv_provider_launch(p, &l, err, sizeof(err)), HV_OK);
    path_of(args, sizeof(args), "survivor", "args");
    CHECK(run_until(&loop, file_exists, args, 5000));
    snprintf(handle, sizeof(handle), "%s", hv_provider_handle(p, 9));
    destroy_and_drain(&loop, p); /* the "head" goes; the agent stays */
    int pid = atoi(handle);
    CHECK(kill(pid, 0) == 0);
    rec_t r2 = {0};
    hv_provider_t *p2 = make(&loop, &r2, NULL, 1000);
    CHECK_RC(hv_provider_adopt(p2, &l, handle), HV_OK);
    CHECK_STR(hv_provider_handle(p2, 9), handle);
    /* a pid that is not this instance (our own), and one that does not exist */
    char mine[24];
    snprintf(mine, sizeof(mine), "%d", (int)getpid());
    hv_prov_launch_t l2 = req(10, "impostor", 0), l3 = req(11, "vanished", 0);
    CHECK_RC(hv_provider_adopt(p2, &l2, mine), HV_OK);
    CHECK_RC(hv_provider_adopt(p2, &l3, "999999999"), HV_OK);
    want_t w10 = {&r2, HV_PROV_GONE, 10}, w11 = {&r2, HV_PROV_GONE, 11};
    CHECK(run_until(&loop, has_event, &w10, 2000));
    CHECK(run_until(&loop, has_event, &w11, 2000));
    CHECK_STR(r2.why[rec_find(&r2, HV_PROV_GONE, 10)],
              "its agent was gone when the head restarted");
    CHECK_EQ(rec_find(&r2, HV_PROV_GONE, 9), -1);
    /* the adopted agent dies: found by polling */
    CHECK_EQ(kill(-pid, SIGKILL), 0);
    want_t w9 = {&r2, HV_PROV_GONE, 9};
    CHECK(run_until(&loop, has_event, &w9, 5000));
    CHECK_STR(r2.why[rec_find(&r2, HV_PROV_GONE, 9)], "its agent is gone");
    CHECK_EQ(r2.cause[rec_find(&r2, HV_PROV_GONE, 9)], HV_PROV_CAUSE_LOST);
    destroy_and_drain(&loop, p2);
    CHECK_EQ(uv_loop_close(&loop), 0);
}

/* spot-sim: capacity, boot delay, a trace's notice (SIGTERM) then preemption (SIGKILL). */
static void case_spot_sim(void) {
    static const hv_ss_type_t types[] = {{.name = "spot", .preemptible = 1, .capacity = 1}};
    static const hv_ss_trace_event_t trace[] = {
        {.at_ms = 800, .type = 0, .kind = HV_SS_TRACE_PREEMPT},
    };
    hv_ss_config_t sc = {.types = types,
                         .ntypes = 1,
                         .seed = 1,
                         .boot_min_ms = 300,
                         .boot_max_ms = 300,
                         .notice_s = 1,
                         .trace = trace,
                         .ntrace = 1};
    uv_loop_t loop;
    uv_loop_init(&loop);
    uv_update_time(&loop);
    rec_t r = {0};
    hv_provider_t *p = make(&loop, &r, &sc, 1000);
    CHECK_STR(p->v->name, "spot-sim");
    char err[300] = "", args[400], term[400];
    hv_prov_launch_t l = req(12, "spot-12", 1), l2 = req(13, "spot-13", 1);
    uint64_t t0 = uv_now(&loop);
    CHECK_RC(hv_provider_launch(p, &l, err, sizeof(err)), HV_OK);
    CHECK_RC(hv_provider_launch(p, &l2, err, sizeof(err)), HV_EUNAVAIL);
    CHECK_STR(err, "spot-sim: no capacity for type spot (1 of 1 in use)");
    CHECK(hv_provider_handle(p, 12) == NULL); /* still booting */
    path_of(args, sizeof(args), "spot-12", "args");
    path_of(term, sizeof(term), "spot-12", "term");
    CHECK(run_until(&loop, file_exists, args, 5000));
    CHECK(uv_now(&loop) - t0 >= 300);
    want_t wn = {&r, HV_PROV_NOTICE, 12};
    CHECK(run_until(&loop, has_event, &wn, 5000));
    CHECK(strstr(r.why[rec_find(&r, HV_PROV_NOTICE, 12)], "a preemption notice for instance 12") !=
          NULL);
    CHECK(run_until(&loop, file_exists, term, 2000)); /* the agent got SIGTERM */
    /* the fake agent exits on SIGTERM; a real one drains; either way it is gone by the kill */
    want_t wg = {&r, HV_PROV_GONE, 12};
    CHECK(run_until(&loop, has_event, &wg, 5000));
    /* the fake agent exited on the notice's SIGTERM before the kill: its own end (the head
     * counts an instance that had a notice as preempted) */
    CHECK_EQ(r.cause[rec_find(&r, HV_PROV_GONE, 12)], HV_PROV_CAUSE_LOST);
    /* capacity is free again */
    CHECK_RC(hv_provider_launch(p, &l2, err, sizeof(err)), HV_OK);
    CHECK_RC(hv_provider_terminate(p, 13), HV_OK); /* before it booted */
    want_t w13 = {&r, HV_PROV_GONE, 13};
    CHECK(run_until(&loop, has_event, &w13, 2000));
    CHECK_STR(r.why[rec_find(&r, HV_PROV_GONE, 13)], "terminated before it booted");
    CHECK_EQ(r.cause[rec_find(&r, HV_PROV_GONE, 13)], HV_PROV_CAUSE_TERMINATED);
    destroy_and_drain(&loop, p);
    CHECK_EQ(uv_loop_close(&loop), 0);
}

/* spot-sim preemption without notice: SIGKILL of an agent that would ignore SIGTERM. */
static void case_spot_sim_kill(void) {
    static const hv_ss_type_t types[] = {{.name = "spot", .preemptible = 1}};
    static const hv_ss_trace_event_t trace[] = {
        {.at_ms = 500, .type = 0, .kind = HV_SS_TRACE_KILL},
    };
    hv_ss_config_t sc = {.types = types, .ntypes = 1, .seed = 1, .trace = trace, .ntrace = 1};
    uv_loop_t loop;
    uv_loop_init(&loop);
    uv_update_time(&loop);
    rec_t r = {0};
    hv_provider_t *p = make(&loop, &r, &sc, 1000);
    char err[300] = "", term[400];
    hv_prov_launch_t l = req(14, "spot-14", 1);
    CHECK_RC(hv_provider_launch(p, &l, err, sizeof(err)), HV_OK);
    want_t wg = {&r, HV_PROV_GONE, 14};
    CHECK(run_until(&loop, has_event, &wg, 5000));
    CHECK_STR(r.why[rec_find(&r, HV_PROV_GONE, 14)], "preempted without notice");
    CHECK_EQ(r.cause[rec_find(&r, HV_PROV_GONE, 14)], HV_PROV_CAUSE_PREEMPTED);
    CHECK_EQ(rec_find(&r, HV_PROV_NOTICE, 14), -1);
    path_of(term, sizeof(term), "spot-14", "term");
    CHECK(!file_exists(term)); /* SIGKILL: no chance to drain */
    destroy_and_drain(&loop, p);
    CHECK_EQ(uv_loop_close(&loop), 0);
}

/* The factory: each provider by its name; another name, or a trace that does not parse, is
 * refused with words that say so. */
static void case_factory(void) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    rec_t r = {0};
    char work[300], trace[300], err[300] = "";
    snprintf(work, sizeof(work), "%s/instances", g_dir);
    static const hv_ss_type_t types[] = {{.name = "spot", .preemptible = 1}};
    hv_provider_cfg_t c = {.agent = g_agent,
                           .work_dir = work,
                           .tick_ms = 20,
                           .sim = {.types = types, .ntypes = 1, .seed = 1},
                           .launch = "true",
                           .terminate = "true"};
    static const char *const names[] = {"local", "spot-sim", "command"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        hv_provider_t *p = NULL;
        CHECK_RC(hv_provider_create(&loop, names[i], &c, rec_event, &r, &p, err, sizeof(err)),
                 HV_OK);
        CHECK_STR(p->v->name, names[i]);
        destroy_and_drain(&loop, p);
    }
    hv_provider_t *p = NULL;
    CHECK_RC(hv_provider_create(&loop, "cloud9", &c, rec_event, &r, &p, err, sizeof(err)),
             HV_EINVAL);
    CHECK(p == NULL);
    CHECK_STR(err, "unknown provider 'cloud9' (local, spot-sim or command)");
    snprintf(trace, sizeof(trace), "%s/trace.txt", g_dir);
    FILE *f = fopen(trace, "w");
    CHECK(f != NULL);
    fputs("# a trace\n10 spot preempt\n20 gpu kill\n", f);
    fclose(f);
    c.sim_trace = trace;
    CHECK_RC(hv_provider_create(&loop, "spot-sim", &c, rec_event, &r, &p, err, sizeof(err)),
             HV_EINVAL);
    CHECK(p == NULL);
    CHECK(strncmp(err, trace, strlen(trace)) == 0 && strstr(err, ":3:") != NULL);
    uv_run(&loop, UV_RUN_NOWAIT);
    CHECK_EQ(uv_loop_close(&loop), 0);
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    static const hv_check_case_t cases[] = {
        {"launch_and_terminate", case_launch_and_terminate},
        {"terminate_grace", case_terminate_grace},
        {"agent_dies", case_agent_dies},
        {"start_fails", case_start_fails},
        {"adopt", case_adopt},
        {"spot_sim", case_spot_sim},
        {"spot_sim_kill", case_spot_sim_kill},
        {"factory", case_factory},
    };
    return hv_check_main(cases, sizeof(cases) / sizeof(cases[0]), argc, argv, setup, teardown);
}
