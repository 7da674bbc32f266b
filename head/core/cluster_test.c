/*
 * cluster_test: the head's decisions across jobs and nodes, one table per decision (inputs ->
 * outputs, one row per case). `cluster_test <case>` runs one case.
 */
#include "cluster.h"
#include "hv_check.h"

#include <stdint.h>

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* The drain hold: members stay until the margin before the node goes, only when replacements
 * can come and the notice leaves time. */
static void case_drain_hold(void) {
    static const struct {
        const char *name;
        uint32_t notice_ms;
        int can_buy;
        uint64_t now, want;
    } rows[] = {
        {"no notice", 0, 1, 1000, 0},
        {"no autoscaler", 30000, 0, 1000, 0},
        {"30 s notice: a 3 s margin", 30000, 1, 1000, 1000 + 27000},
        {"120 s notice: a 12 s margin", 120000, 1, 0, 108000},
        {"5 s notice: the 2 s least margin", 5000, 1, 100, 100 + 3000},
        {"3.001 s: just above margin + hold", 3001, 1, 0, 1001},
        {"3 s: margin + hold, no more: at once", 3000, 1, 0, 0},
        {"2 s: shorter than the margin", 2000, 1, 0, 0},
    };
    for (size_t i = 0; i < N(rows); i++) {
        uint64_t got = hv_cl_drain_hold_until(rows[i].notice_ms, rows[i].can_buy, rows[i].now);
        if (got != rows[i].want) {
            fprintf(stderr, "%s: got %llu want %llu\n", rows[i].name, (unsigned long long)got,
                    (unsigned long long)rows[i].want);
            hv_check_failures++;
        }
    }
}

/* One pass, job after job in submission order: (pending np | running wants, free) -> placed. */
static void case_queue(void) {
    static const struct {
        const char *name;
        struct {
            int pending;
            uint32_t n, free; /* np when pending, else wants */
            int store_fails;  /* the start's placement fails */
            uint32_t want;
        } jobs[4];
        size_t njobs;
    } rows[] = {
        {"fits: starts at np", {{1, 2, 4, 0, 2}}, 1},
        {"does not fit: waits", {{1, 4, 3, 0, 0}}, 1},
        {"first come, first served: a small job waits behind a big one",
         {{1, 4, 3, 0, 0}, {1, 1, 3, 0, 0}},
         2},
        {"pending before growth", {{1, 4, 3, 0, 0}, {0, 2, 3, 0, 0}}, 2},
        {"growth after pending jobs that started",
         {{1, 1, 4, 0, 1}, {0, 2, 3, 0, 2}, {0, 5, 1, 0, 1}},
         3},
        {"growth takes what is free", {{0, 8, 3, 0, 3}, {0, 0, 3, 0, 0}}, 2},
        {"a start the store refused blocks the rest",
         {{1, 1, 4, 1, 1}, {1, 1, 3, 0, 0}, {0, 2, 3, 0, 0}},
         3},
    };
    for (size_t i = 0; i < N(rows); i++) {
        hv_cl_pass_t p = {0};
        for (size_t k = 0; k < rows[i].njobs; k++) {
            uint32_t got = rows[i].jobs[k].pending
                               ? hv_cl_start(&p, rows[i].jobs[k].n, rows[i].jobs[k].free)
                               : hv_cl_grow(&p, rows[i].jobs[k].n, rows[i].jobs[k].free);
            if (got > 0 && rows[i].jobs[k].pending && rows[i].jobs[k].store_fails) {
                hv_cl_start_failed(&p);
            }
            if (got != rows[i].jobs[k].want) {
                fprintf(stderr, "%s: job %zu: got %u want %u\n", rows[i].name, k, got,
                        rows[i].jobs[k].want);
                hv_check_failures++;
            }
        }
    }
}

/* The autoscaler's demand: the free pool goes to the jobs in order; the rest is asked for. */
static void case_demand(void) {
    static const struct {
        const char *name;
        uint32_t pool;
        hv_cl_job_t jobs[3];
        size_t njobs;
        hv_cl_demand_t want[3];
        size_t nwant;
    } rows[] = {
        {"nothing wanted", 4, {{1, 0, 1, 2, 4, 0}}, 1, {{0}}, 0},
        {"pending fixed job: np beyond the pool", 1, {{1, 1, 0, 3, 0, 0}}, 1, {{1, 2, 1}}, 1},
        {"pending elastic job: up to its target", 0, {{1, 1, 1, 2, 4, 0}}, 1, {{1, 4, 1}}, 1},
        {"pending elastic job, target below np: np", 0, {{1, 1, 1, 2, 1, 0}}, 1, {{1, 2, 1}}, 1},
        {"running job: what it wants", 1, {{1, 0, 1, 2, 4, 3}}, 1, {{1, 2, 0}}, 1},
        {"the pool goes in order", 2, {{1, 1, 0, 2, 0, 0}, {2, 0, 1, 1, 3, 2}}, 2, {{2, 2, 0}}, 1},
        {"a pool that covers all", 9, {{1, 1, 0, 2, 0, 0}, {2, 0, 1, 1, 3, 2}}, 2, {{0}}, 0},
    };
    for (size_t i = 0; i < N(rows); i++) {
        hv_cl_demand_t got[3];
        size_t n = hv_cl_demand(rows[i].jobs, rows[i].njobs, rows[i].pool, got, 3);
        int ok = n == rows[i].nwant;
        for (size_t k = 0; ok && k < n; k++) {
            ok = got[k].job_id == rows[i].want[k].job_id &&
                 got[k].workers == rows[i].want[k].workers &&
                 got[k].pending == rows[i].want[k].pending;
        }
        if (!ok) {
            fprintf(stderr, "%s: %zu entries (want %zu)", rows[i].name, n, rows[i].nwant);
            for (size_t k = 0; k < n; k++) {
                fprintf(stderr, " {job %llu, %u, pending %d}", (unsigned long long)got[k].job_id,
                        got[k].workers, got[k].pending);
            }
            fprintf(stderr, "\n");
            hv_check_failures++;
        }
    }
}

int main(int argc, char **argv) {
    static const hv_check_case_t cases[] = {
        {"drain_hold", case_drain_hold},
        {"queue", case_queue},
        {"demand", case_demand},
    };
    return hv_check_main(cases, N(cases), argc, argv, NULL, NULL);
}
