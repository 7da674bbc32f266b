/*
 * actorfig_test: an actor's call figures summed over its processes, table by table: a process
 * counting on, a restart (kill -9: no final report) and a move (a final report, then the
 * replacement), counters that went back to 0, late and repeated reports, and a report whose
 * histogram does not hold its calls. `actorfig_test <case>` runs one case.
 */
#include "actorfig.h"
#include "hv_check.h"

#include <string.h>

/* A report of ok/error calls, each 10 µs. */
static hv_callfig_t fig(uint64_t ok, uint64_t error) {
    hv_callfig_t f = {0};
    for (uint64_t i = 0; i < ok + error; i++) {
        hv_callfig_count(&f, i < ok, 10000, 8, 8);
    }
    return f;
}

/* One step: process proc reports ok/error (final or not); want the result, what it did, and the
 * actor's totals after it. */
typedef struct step_s {
    uint64_t proc, ok, error;
    int final;
    hv_err rc;
    hv_actorfig_how_t how;
    uint64_t total_ok, total_error;
} step_t;

static void run(const char *name, const step_t *steps, size_t n) {
    hv_actorfig_t a;
    memset(&a, 0, sizeof(a));
    for (size_t i = 0; i < n; i++) {
        const step_t *s = &steps[i];
        hv_callfig_t r = fig(s->ok, s->error), t;
        hv_actorfig_how_t how = (hv_actorfig_how_t)-1;
        hv_err rc = hv_actorfig_report(&a, s->proc, &r, s->final, &how);
        hv_actorfig_total(&a, &t);
        if (rc != s->rc || (rc == HV_OK && how != s->how) || t.ok != s->total_ok ||
            t.error != s->total_error || hv_callfig_check(&t) != HV_OK) {
            fprintf(stderr,
                    "%s step %zu: rc %s how %d total %llu/%llu; want %s how %d total %llu/%llu\n",
                    name, i, hv_errname(rc), (int)how, (unsigned long long)t.ok,
                    (unsigned long long)t.error, hv_errname(s->rc), (int)s->how,
                    (unsigned long long)s->total_ok, (unsigned long long)s->total_error);
            CHECK(0);
        }
    }
}

#define RUN(steps) run(__func__, steps, sizeof(steps) / sizeof(steps[0]))

/* One process reports its running totals; the same figures again change nothing. */
static void case_counting_on(void) {
    static const step_t steps[] = {
        {1, 3, 0, 0, HV_OK, HV_ACTORFIG_NEXT, 3, 0},
        {1, 10, 2, 0, HV_OK, HV_ACTORFIG_ON, 10, 2},
        {1, 10, 2, 0, HV_OK, HV_ACTORFIG_SAME, 10, 2},
        {1, 25, 2, 0, HV_OK, HV_ACTORFIG_ON, 25, 2},
    };
    RUN(steps);
}

/* kill -9: the process never sends a final report; the next process starts from 0 and the
 * actor's totals keep counting from what the dead one reported last. */
static void case_restart_without_final(void) {
    static const step_t steps[] = {
        {1, 7, 1, 0, HV_OK, HV_ACTORFIG_NEXT, 7, 1},
        {2, 0, 0, 0, HV_OK, HV_ACTORFIG_NEXT, 7, 1},
        {2, 5, 0, 0, HV_OK, HV_ACTORFIG_ON, 12, 1},
        {3, 1, 1, 0, HV_OK, HV_ACTORFIG_NEXT, 13, 2},
    };
    RUN(steps);
}

/* A move or a clean stop: the final report (more than the last periodic one) goes into the
 * totals; a repeat of it (an agent re-sending after a reconnect) and a late periodic report of
 * the ended process are refused, and the replacement counts on top. */
static void case_final_then_next(void) {
    static const step_t steps[] = {
        {1, 4, 0, 0, HV_OK, HV_ACTORFIG_NEXT, 4, 0},
        {1, 6, 1, 1, HV_OK, HV_ACTORFIG_ON, 6, 1},
        {1, 6, 1, 1, HV_ESTATE, 0, 6, 1},
        {1, 6, 1, 0, HV_ESTATE, 0, 6, 1},
        {2, 2, 0, 0, HV_OK, HV_ACTORFIG_NEXT, 8, 1},
        {2, 2, 0, 1, HV_OK, HV_ACTORFIG_ON, 8, 1},
        {2, 2, 0, 0, HV_ESTATE, 0, 8, 1},
    };
    RUN(steps);
}

/* A final report that is the first word of a process (it served calls for less than a second). */
static void case_final_only(void) {
    static const step_t steps[] = {
        {5, 3, 3, 1, HV_OK, HV_ACTORFIG_NEXT, 3, 3},
        {6, 1, 0, 1, HV_OK, HV_ACTORFIG_NEXT, 4, 3},
    };
    RUN(steps);
}

/* The same process's counters went back: it counts from 0 again; nothing it had is lost. */
static void case_counters_back(void) {
    static const step_t steps[] = {
        {1, 9, 0, 0, HV_OK, HV_ACTORFIG_NEXT, 9, 0},
        {1, 2, 0, 0, HV_OK, HV_ACTORFIG_RESTARTED, 11, 0},
        {1, 4, 1, 0, HV_OK, HV_ACTORFIG_ON, 13, 1},
    };
    RUN(steps);
}

/* A report of an older process than the one counted now is stale. */
static void case_older(void) {
    static const step_t steps[] = {
        {4, 2, 0, 0, HV_OK, HV_ACTORFIG_NEXT, 2, 0},
        {3, 50, 0, 0, HV_ESTATE, 0, 2, 0},
        {3, 50, 0, 1, HV_ESTATE, 0, 2, 0},
    };
    RUN(steps);
}

/* A report whose histogram does not hold its calls is refused and changes nothing. */
static void case_inconsistent(void) {
    hv_actorfig_t a;
    memset(&a, 0, sizeof(a));
    hv_callfig_t r = fig(2, 0), t;
    CHECK_RC(hv_actorfig_report(&a, 1, &r, 0, NULL), HV_OK);
    hv_callfig_t bad = fig(5, 0);
    bad.ok = 6;
    CHECK_RC(hv_actorfig_report(&a, 1, &bad, 0, NULL), HV_EINVAL);
    CHECK_RC(hv_actorfig_report(&a, 2, &bad, 1, NULL), HV_EINVAL);
    hv_actorfig_total(&a, &t);
    CHECK_EQ(t.ok, 2);
    CHECK_EQ(a.proc, 1);
    CHECK_EQ(t.bytes_in, 16);
    CHECK_EQ(t.service_ns, 20000);
}

HV_CHECK_MAIN(NULL, NULL, {"counting_on", case_counting_on},
              {"restart_without_final", case_restart_without_final},
              {"final_then_next", case_final_then_next}, {"final_only", case_final_only},
              {"counters_back", case_counters_back}, {"older", case_older},
              {"inconsistent", case_inconsistent})
