/*
 * provider_command_test: the command provider with real shell commands on a real libuv loop. A
 * small "cloud" script keeps one file per instance in a directory: launch creates it and prints a
 * handle, terminate removes it, list prints what exists. Checked: template expansion and quoting
 * (a hostile name runs nothing), a launch that succeeds, fails (with the command's own reason) or
 * times out (killed, then given back), terminate (and its retry after a failure), an instance
 * that disappears from list (gone after the grace), and adoption after a "restart".
 * `provider_command_test <case>` runs one case.
 */
#include "hv_check.h"
#include "provider_test.h"
#include "provider_command.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[32];
static char g_cloud[64];

/* cloud.sh ACTION NAME: the instances are files in $DIR/vm/; FAIL_<action> files make it fail. */
static const char CLOUD[] =
    "#!/bin/sh\n"
    "d=$(dirname \"$0\")\n"
    "mkdir -p \"$d/vm\"\n"
    "case $1 in\n"
    "launch) if [ -e \"$d/fail-launch\" ]; then echo 'no capacity in zone' >&2; exit 3; fi\n"
    "        if [ -e \"$d/slow-launch\" ]; then sleep 30; fi\n"
    "        echo \"$3\" > \"$d/vm/$2\"; echo \"i-$2\" ;;\n"
    "terminate) if [ -e \"$d/fail-terminate\" ]; then rm -f \"$d/fail-terminate\"; echo busy >&2;"
    " exit 1; fi\n"
    "        rm -f \"$d/vm/$2\" ;;\n"
    "list) ls \"$d/vm\" ;;\n"
    "esac\n";

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void setup(void) {
    snprintf(g_dir, sizeof(g_dir), "/tmp/hv-pct-XXXXXX");
    if (mkdtemp(g_dir) == NULL) {
        die("mkdtemp");
    }
    snprintf(g_cloud, sizeof(g_cloud), "%s/cloud.sh", g_dir);
    FILE *f = fopen(g_cloud, "w");
    if (f == NULL) {
        die(g_cloud);
    }
    fputs(CLOUD, f);
    fclose(f);
    chmod(g_cloud, 0755);
}

static void teardown(void) {
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "cannot remove %s\n", g_dir);
    }
}

static int exists(const char *rel) {
    char p[256];
    snprintf(p, sizeof(p), "%s/%s", g_dir, rel);
    return access(p, F_OK) == 0;
}

static void touch(const char *rel) {
    char p[256];
    snprintf(p, sizeof(p), "%s/%s", g_dir, rel);
    FILE *f = fopen(p, "w");
    if (f != NULL) {
        fclose(f);
    }
}

/* Runs the loop until event ev of instance arrives or ms pass; returns its index or -1. */
static int wait_ev(uv_loop_t *loop, rec_t *r, hv_prov_event ev, uint64_t instance, uint64_t ms) {
    uint64_t end = uv_now(loop) + ms;
    int i;
    while ((i = rec_find(r, ev, instance)) < 0 && uv_now(loop) <= end) {
        uv_run(loop, UV_RUN_ONCE);
    }
    return i;
}

static void spin(uv_loop_t *loop, uint64_t ms) {
    uint64_t end = uv_now(loop) + ms;
    while (uv_now(loop) <= end) {
        uv_run(loop, UV_RUN_ONCE);
    }
}

static hv_provider_t *make(uv_loop_t *loop, rec_t *r, uint32_t timeout_ms) {
    char launch[256], term[256], list[256];
    snprintf(launch, sizeof(launch), "%s launch {name} {token_file}", g_cloud);
    snprintf(term, sizeof(term), "%s terminate {name}", g_cloud);
    snprintf(list, sizeof(list), "%s list", g_cloud);
    hv_prov_command_opts_t o = {.launch = launch,
                                .terminate = term,
                                .list = list,
                                .timeout_ms = timeout_ms,
                                .list_every_ms = 50,
                                .list_grace_ms = 200};
    hv_provider_t *p = NULL;
    CHECK_RC(hv_provider_command_create(loop, &o, rec_event, r, &p), HV_OK);
    return p;
}

static hv_prov_launch_t req(uint64_t id, const char *name) {
    return (hv_prov_launch_t){.instance = id,
                              .name = name,
                              .type_name = "spot-a",
                              .slots = 4,
                              .preemptible = 1,
                              .head = "10.0.0.1:7000",
                              .token_file = "/etc/hv/enroll-7"};
}

static void finish(uv_loop_t *loop, hv_provider_t *p) {
    hv_provider_destroy(p);
    spin(loop, 100);
    CHECK_EQ(uv_loop_close(loop), 0);
}

static void case_expand(void) {
    const char *keys[] = {"name", "head"};
    const char *vals[] = {"n1", "it's:7000"};
    char out[64], err[200];
    CHECK_RC(hv_prov_command_expand("run {name} at {head} {{x}", keys, vals, 2, out, sizeof(out),
                                    err, sizeof(err)),
             HV_OK);
    CHECK_STR(out, "run 'n1' at 'it'\\''s:7000' {x}");
    CHECK_RC(
        hv_prov_command_expand("run {zone}", keys, vals, 2, out, sizeof(out), err, sizeof(err)),
        HV_ENOTFOUND);
    CHECK(strstr(err, "unknown placeholder '{zone}'") != NULL);
    CHECK_RC(hv_prov_command_expand("run {name", keys, vals, 2, out, sizeof(out), err, sizeof(err)),
             HV_ENOTFOUND);
    CHECK_RC(hv_prov_command_expand("{name}{name}{name}", keys, vals, 2, out, 10, err, sizeof(err)),
             HV_ETOOBIG);
}

static void case_launch_terminate(void) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    rec_t r = {0};
    hv_provider_t *p = make(&loop, &r, 5000);
    char err[300] = "";
    hv_prov_launch_t l = req(1, "n1");
    CHECK_RC(hv_provider_launch(p, &l, err, sizeof(err)), HV_OK);
    uint64_t end = uv_now(&loop) + 5000;
    while (!exists("vm/n1") && uv_now(&loop) < end) {
        uv_run(&loop, UV_RUN_ONCE);
    }
    spin(&loop, 300); /* the launch command completes; list sees it */
    CHECK(exists("vm/n1"));
    CHECK_STR(hv_provider_handle(p, 1), "i-n1");
    CHECK_EQ(r.n, 0); /* nothing to report: it is listed */
    /* terminate fails once, then the retry succeeds */
    touch("fail-terminate");
    CHECK_RC(hv_provider_terminate(p, 1), HV_OK);
    int i = wait_ev(&loop, &r, HV_PROV_NOTE, 1, 3000);
    CHECK(i >= 0);
    CHECK_STR(r.why[i], "the terminate command for n1 exited with status 1: busy; it is tried "
                        "again");
    i = wait_ev(&loop, &r, HV_PROV_GONE, 1, 3000);
    CHECK(i >= 0 && strcmp(r.why[i], "terminated") == 0);
    CHECK_EQ(r.cause[i], HV_PROV_CAUSE_TERMINATED);
    CHECK(!exists("vm/n1"));
    CHECK_RC(hv_provider_terminate(p, 1), HV_ENOTFOUND);
    finish(&loop, p);
}

static void case_launch_fails(void) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    rec_t r = {0};
    hv_provider_t *p = make(&loop, &r, 5000);
    touch("fail-launch");
    char err[300] = "";
    hv_prov_launch_t l = req(2, "n2");
    CHECK_RC(hv_provider_launch(p, &l, err, sizeof(err)), HV_OK);
    int i = wait_ev(&loop, &r, HV_PROV_LAUNCH_FAILED, 2, 3000);
    CHECK(i >= 0);
    CHECK_STR(r.why[i], "the launch command exited with status 3: no capacity in zone");
    CHECK(hv_provider_handle(p, 2) == NULL);
    finish(&loop, p);
}

static void case_launch_timeout(void) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    rec_t r = {0};
    hv_provider_t *p = make(&loop, &r, 300);
    touch("slow-launch");
    char err[300] = "";
    hv_prov_launch_t l = req(3, "n3");
    uint64_t t0 = uv_now(&loop);
    CHECK_RC(hv_provider_launch(p, &l, err, sizeof(err)), HV_OK);
    int i = wait_ev(&loop, &r, HV_PROV_LAUNCH_FAILED, 3, 3000);
    CHECK(i >= 0);
    CHECK_STR(r.why[i], "the launch command timed out after 0.3 s");
    CHECK(uv_now(&loop) - t0 < 2000); /* killed, not waited for */
    /* then it is given back (the terminate command runs) */
    i = wait_ev(&loop, &r, HV_PROV_GONE, 3, 3000);
    CHECK(i >= 0 && strcmp(r.why[i], "terminated") == 0);
    CHECK_EQ(r.cause[i], HV_PROV_CAUSE_TERMINATED);
    finish(&loop, p);
}

/* Names and values are quoted: nothing in them runs. */
static void case_hostile_name(void) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    rec_t r = {0};
    hv_provider_t *p = make(&loop, &r, 5000);
    char err[300] = "", name[128];
    snprintf(name, sizeof(name), "x';touch %s/pwned;'$(touch %s/pwned2)", g_dir, g_dir);
    hv_prov_launch_t l = req(4, name);
    CHECK_RC(hv_provider_launch(p, &l, err, sizeof(err)), HV_OK);
    spin(&loop, 500);
    CHECK(!exists("pwned"));
    CHECK(!exists("pwned2"));
    finish(&loop, p);
}

/* An instance the cloud no longer lists is gone after the grace; adoption after a restart. */
static void case_list_and_adopt(void) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    rec_t r = {0};
    hv_provider_t *p = make(&loop, &r, 5000);
    char err[300] = "";
    hv_prov_launch_t l5 = req(5, "n5"), l6 = req(6, "n6");
    CHECK_RC(hv_provider_launch(p, &l5, err, sizeof(err)), HV_OK);
    CHECK_RC(hv_provider_launch(p, &l6, err, sizeof(err)), HV_OK);
    spin(&loop, 400);
    CHECK(exists("vm/n5") && exists("vm/n6"));
    /* the "head" restarts: a new provider adopts both */
    hv_provider_destroy(p);
    spin(&loop, 100);
    rec_t r2 = {0};
    hv_provider_t *p2 = make(&loop, &r2, 5000);
    CHECK_RC(hv_provider_adopt(p2, &l5, "i-n5"), HV_OK);
    CHECK_RC(hv_provider_adopt(p2, &l6, "i-n6"), HV_OK);
    CHECK_STR(hv_provider_handle(p2, 6), "i-n6");
    /* n6 is deleted behind our back (a preemption the cloud did not announce) */
    char vm[200];
    snprintf(vm, sizeof(vm), "%s/vm/n6", g_dir);
    CHECK_EQ(unlink(vm), 0);
    int i = wait_ev(&loop, &r2, HV_PROV_GONE, 6, 3000);
    CHECK(i >= 0);
    CHECK_STR(r2.why[i], "no longer listed by the provider");
    CHECK_EQ(r2.cause[i], HV_PROV_CAUSE_LOST);
    spin(&loop, 300);
    CHECK_EQ(rec_find(&r2, HV_PROV_GONE, 5), -1); /* still listed */
    finish(&loop, p2);
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    static const hv_check_case_t cases[] = {
        {"expand", case_expand},
        {"launch_terminate", case_launch_terminate},
        {"launch_fails", case_launch_fails},
        {"launch_timeout", case_launch_timeout},
        {"hostile_name", case_hostile_name},
        {"list_and_adopt", case_list_and_adopt},
    };
    return hv_check_main(cases, sizeof(cases) / sizeof(cases[0]), argc, argv, setup, teardown);
}
