/*
 * agent_test: the case runner, loop helpers and process probe shared by the agent's unit tests
 * (spawn_test, artifact_test, ...); the check macros come from common/hv_check.h. Test-only; no
 * production file includes it. A test executable runs every case, or the cases named on the
 * command line, and exits non-zero if any check failed.
 */
#ifndef HV_AGENT_AGENT_TEST_H
#define HV_AGENT_AGENT_TEST_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "err.h"
#include "hv_check.h"
#include "util.h"

typedef struct test_case_s {
    const char *name;
    void (*fn)(void);
} test_case_t;

/* Runs the cases named in argv (all when none) and returns the exit status. */
static inline int test_run(const test_case_t *cases, int argc, char **argv) {
    int ran = 0;
    for (const test_case_t *c = cases; c->name != NULL; c++) {
        int wanted = argc < 2;
        for (int i = 1; i < argc; i++) {
            if (strcmp(argv[i], c->name) == 0) {
                wanted = 1;
            }
        }
        if (!wanted) {
            continue;
        }
        int before = hv_check_failures;
        c->fn();
        ran++;
        fprintf(stderr, "%-28s %s\n", c->name, hv_check_failures == before ? "ok" : "FAILED");
    }
    if (ran == 0) {
        fprintf(stderr, "no such case\n");
        return 2;
    }
    return hv_check_failures == 0 ? 0 : 1;
}

static void test_wake_cb(uv_timer_t *t) { (void)t; }

/* Runs loop until *flag >= want (flag NULL: never) or ms pass, waking at least every 10 ms so the
 * deadline is checked. Returns 1 if the flag got there, else 0 (and says how long it waited). */
static inline int test_run_until(uv_loop_t *loop, const int *flag, int want, uint64_t ms) {
    uv_timer_t wake;
    uv_timer_init(loop, &wake);
    uv_timer_start(&wake, test_wake_cb, 10, 10);
    uint64_t deadline = hv_now_ms() + ms;
    while ((flag == NULL || *flag < want) && hv_now_ms() < deadline) {
        uv_run(loop, UV_RUN_ONCE);
    }
    uv_close((uv_handle_t *)&wake, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    if (flag != NULL && *flag < want) {
        fprintf(stderr, "  (waited %llu ms for %d, have %d)\n", (unsigned long long)ms, want,
                *flag);
        return 0;
    }
    return 1;
}

/* 1 while pid names a process that is not a zombie (read from /proc/PID/stat). */
static inline int test_pid_alive(int pid) { return hv_pid_state(pid) == 1; }

/* Runs loop for ms. */
static inline void test_run_for(uv_loop_t *loop, uint64_t ms) { test_run_until(loop, NULL, 1, ms); }

#endif
