/*
 * agent_test: check macros and a case runner shared by the agent's unit tests (spawn_test,
 * artifact_test, ...). Test-only; no production file includes it. Checks print both operands;
 * a test executable runs every case, or one case named on the command line, and exits non-zero
 * if any check failed.
 */
#ifndef HV_AGENT_AGENT_TEST_H
#define HV_AGENT_AGENT_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "err.h"
#include "util.h"

static int test_failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            test_failures++;                                                                       \
        }                                                                                          \
    } while (0)

#define CHECK_EQ(got, want)                                                                        \
    do {                                                                                           \
        long long g_ = (long long)(got), w_ = (long long)(want);                                   \
        if (g_ != w_) {                                                                            \
            fprintf(stderr, "%s:%d: %s == %s\n  got:  %lld\n  want: %lld\n", __FILE__, __LINE__,   \
                    #got, #want, g_, w_);                                                          \
            test_failures++;                                                                       \
        }                                                                                          \
    } while (0)

#define CHECK_STR(got, want)                                                                       \
    do {                                                                                           \
        const char *g_ = (got), *w_ = (want);                                                      \
        if (g_ == NULL || strcmp(g_, w_) != 0) {                                                   \
            fprintf(stderr, "%s:%d: %s == %s\n  got:  \"%s\"\n  want: \"%s\"\n", __FILE__,         \
                    __LINE__, #got, #want, g_ ? g_ : "(null)", w_);                                \
            test_failures++;                                                                       \
        }                                                                                          \
    } while (0)

#define CHECK_RC(got, want)                                                                        \
    do {                                                                                           \
        hv_err g_ = (got), w_ = (want);                                                            \
        if (g_ != w_) {                                                                            \
            fprintf(stderr, "%s:%d: %s\n  got:  %s (%s)\n  want: %s\n", __FILE__, __LINE__, #got,  \
                    hv_errname(g_), hv_strerror(g_), hv_errname(w_));                              \
            test_failures++;                                                                       \
        }                                                                                          \
    } while (0)

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
        int before = test_failures;
        c->fn();
        ran++;
        fprintf(stderr, "%-28s %s\n", c->name, test_failures == before ? "ok" : "FAILED");
    }
    if (ran == 0) {
        fprintf(stderr, "no such case\n");
        return 2;
    }
    return test_failures == 0 ? 0 : 1;
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

/* Runs loop for ms. */
static inline void test_run_for(uv_loop_t *loop, uint64_t ms) { test_run_until(loop, NULL, 1, ms); }

#endif
