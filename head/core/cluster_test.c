/*
 * cluster_test: the head's decisions across jobs and nodes, one table per decision (inputs ->
 * outputs, one row per case). `cluster_test <case>` runs one case.
 */
#include "cluster.h"
#include "jobsize.h"
#include "hv_check.h"

#include <stdint.h>
#include <string.h>

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

/* One pass, job after job in submission order: (pending np and min_np | running wants, free) ->
 * placed. A fixed job's min_np is its np (0 reads as np). */
static void case_queue(void) {
    static const struct {
        const char *name;
        struct {
            int pending;
            uint32_t n, min_np, free; /* np when pending, else wants; min_np when pending */
            int store_fails;          /* the start's placement fails */
            uint32_t want;
        } jobs[4];
        size_t njobs;
    } rows[] = {
        {"fits: starts at np", {{1, 2, 2, 4, 0, 2}}, 1},
        {"does not fit: waits", {{1, 4, 4, 3, 0, 0}}, 1},
        {"min_np 0 reads as np", {{1, 4, 0, 3, 0, 0}}, 1},
        {"min_np above np reads as np", {{1, 2, 5, 1, 0, 0}}, 1},
        {"first come, first served: a small job waits behind a big one",
         {{1, 4, 4, 3, 0, 0}, {1, 1, 1, 3, 0, 0}},
         2},
        {"pending before growth", {{1, 4, 4, 3, 0, 0}, {0, 2, 0, 3, 0, 0}}, 2},
        {"growth after pending jobs that started",
         {{1, 1, 1, 4, 0, 1}, {0, 2, 0, 3, 0, 2}, {0, 5, 0, 1, 0, 1}},
         3},
        {"growth takes what is free", {{0, 8, 0, 3, 0, 3}, {0, 0, 0, 3, 0, 0}}, 2},
        {"a start the store refused blocks the rest",
         {{1, 1, 1, 4, 1, 1}, {1, 1, 1, 3, 0, 0}, {0, 2, 0, 3, 0, 0}},
         3},
        /* Elastic jobs (min_np < np) start once min_np slots are free, with what fits up to np. */
        {"elastic, all free: starts at np", {{1, 4, 1, 6, 0, 4}}, 1},
        {"elastic, min_np free: starts with what is free", {{1, 4, 1, 2, 0, 2}}, 1},
        {"elastic, exactly min_np free: starts at min_np", {{1, 4, 3, 3, 0, 3}}, 1},
        {"elastic, fewer than min_np free: waits", {{1, 4, 3, 2, 0, 0}}, 1},
        {"elastic, nothing free: waits", {{1, 4, 1, 0, 0, 0}}, 1},
        {"a small elastic job waits behind an older fixed job that does not fit",
         {{1, 4, 4, 3, 0, 0}, {1, 4, 1, 3, 0, 0}},
         2},
        {"a small elastic job waits behind an older elastic job below its min_np",
         {{1, 4, 4, 2, 0, 0}, {1, 2, 1, 2, 0, 0}},
         2},
        {"an elastic job that started small lets the next pending job try",
         {{1, 4, 1, 2, 0, 2}, {1, 1, 1, 0, 0, 0}},
         2},
        {"an elastic start below np, then growth of running jobs",
         {{1, 4, 2, 3, 0, 3}, {0, 2, 0, 1, 0, 1}},
         2},
        {"an elastic start the store refused blocks the rest",
         {{1, 4, 1, 2, 1, 2}, {1, 1, 1, 2, 0, 0}, {0, 1, 0, 2, 0, 0}},
         3},
    };
    for (size_t i = 0; i < N(rows); i++) {
        hv_cl_pass_t p = {0};
        for (size_t k = 0; k < rows[i].njobs; k++) {
            uint32_t got = rows[i].jobs[k].pending
                               ? hv_cl_start(&p, rows[i].jobs[k].n, rows[i].jobs[k].min_np,
                                             rows[i].jobs[k].free)
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
        {"nothing wanted", 4, {{1, 0, 1, 2, 4, 0, 0, 0, 0, 0, 0}}, 1, {{0}}, 0},
        {"pending fixed job: np beyond the pool",
         1,
         {{1, 1, 0, 3, 0, 0, 0, 0, 0, 0, 0}},
         1,
         {{1, 2, 1}},
         1},
        {"pending elastic job: up to its target",
         0,
         {{1, 1, 1, 2, 4, 0, 0, 0, 0, 0, 0}},
         1,
         {{1, 4, 1}},
         1},
        {"pending elastic job, target below np: np",
         0,
         {{1, 1, 1, 2, 1, 0, 0, 0, 0, 0, 0}},
         1,
         {{1, 2, 1}},
         1},
        {"running job: what it wants", 1, {{1, 0, 1, 2, 4, 3, 0, 0, 0, 0, 0}}, 1, {{1, 2, 0}}, 1},
        {"the pool goes in order",
         2,
         {{1, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0}, {2, 0, 1, 1, 3, 2, 0, 0, 0, 0, 0}},
         2,
         {{2, 2, 0}},
         1},
        {"a pool that covers all",
         9,
         {{1, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0}, {2, 0, 1, 1, 3, 2, 0, 0, 0, 0, 0}},
         2,
         {{0}},
         0},
        /* The plan (fields: id, pending, elastic, np, target, wants, planned, plan, quota_bound,
         * priority, size). */
        {"planned waiting job (WAIT_CAPACITY): floor and growth",
         0,
         {{1, 1, 1, 2, 6, 0, 1, 0, 0, 0, 0}},
         1,
         {{1, 6, 1}},
         1},
        {"waiting for quota: buys nothing", 0, {{1, 1, 1, 2, 6, 0, 1, 0, 1, 0, 0}}, 1, {{0}}, 0},
        {"running job shrunk by the plan: what it gives away",
         0,
         {{1, 0, 1, 1, 4, 0, 1, 2, 0, 0, 4}, {2, 1, 0, 2, 0, 0, 1, 2, 0, 0, 0}},
         2,
         {{1, 2, 0}},
         1},
        {"running job at its plan, wanting more: target - plan",
         0,
         {{1, 0, 1, 1, 8, 5, 1, 3, 0, 0, 3}},
         1,
         {{1, 5, 0}},
         1},
        {"finishing job (wants nothing, keeps its size): none",
         0,
         {{1, 0, 1, 1, 8, 0, 1, 3, 0, 0, 3}},
         1,
         {{0}},
         0},
        {"fixed running job: none", 0, {{1, 0, 0, 3, 0, 0, 1, 3, 0, 0, 3}}, 1, {{0}}, 0},
        {"floors before growth, whatever the order",
         1,
         {{1, 0, 1, 1, 4, 3, 1, 1, 0, 0, 1}, {2, 0, 0, 3, 0, 0, 1, 0, 0, 0, 0}},
         2,
         {{2, 2, 1}, {1, 3, 0}},
         2},
        {"higher priority first: the pool goes to it",
         2,
         {{1, 1, 0, 2, 0, 0, 1, 0, 0, 0, 0}, {2, 1, 0, 2, 0, 0, 1, 0, 0, 5, 0}},
         2,
         {{1, 2, 1}},
         1},
        {"priority orders the entries",
         0,
         {{1, 1, 0, 1, 0, 0, 1, 0, 0, -1, 0},
          {2, 1, 0, 2, 0, 0, 1, 0, 0, 3, 0},
          {3, 1, 0, 3, 0, 0, 1, 0, 0, 0, 0}},
         3,
         {{2, 2, 1}, {3, 3, 1}, {1, 1, 1}},
         3},
        {"a waiting elastic job's growth comes after another's floor",
         0,
         {{1, 1, 1, 1, 3, 0, 1, 0, 0, 0, 0}, {2, 1, 0, 2, 0, 0, 1, 0, 0, 0, 0}},
         2,
         {{1, 3, 1}, {2, 2, 1}},
         2},
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

/* Submission: whether a job can ever run here, and the settings it is stored with. */
static void case_submit(void) {
    static const hv_cl_defaults_t def = {.max_resets = 3,
                                         .wait_timeout_s = 600,
                                         .check_every = 1,
                                         .elastic_timeout_s = 60,
                                         .cooldown_min_s = 10,
                                         .cooldown_max_s = 300,
                                         .max_strikes = 5};
    static const struct {
        const char *name;
        hv_cl_ask_t a;
        hv_cl_room_t r;
        hv_err rc;
        const char *err; /* a part of the message */
        hv_cl_settings_t want;
    } rows[] = {
        {"no node, no autoscaler", {.np = 1}, {0}, HV_ESTATE, "no node has joined", {0}},
        {"no node, an autoscaler that can add",
         {.np = 2},
         {0, 0, 1, 4},
         HV_OK,
         "",
         {0, 2, 2, 2, 0, 0, 600, 1, 60, 10, 300, 5}},
        {"too big",
         {.np = 5},
         {4, 4, 0, 0},
         HV_EINVAL,
         "-np 5 can never run here: the cluster "
         "has 4 slots",
         {0}},
        {"too big with a host limit",
         {.np = 5, .slots_per_host = 1},
         {4, 4, 0, 0},
         HV_EINVAL,
         "has 4 slots with that --slots-per-host",
         {0}},
        {"too big even with the autoscaler",
         {.np = 9},
         {4, 4, 1, 4},
         HV_EINVAL,
         "the cluster has 4 slots and the autoscaler can add 4 more",
         {0}},
        {"elastic: -np beyond the cluster, --min-np within: it starts small and grows",
         {.np = 3, .min_np = 1, .max_np = 3},
         {1, 1, 0, 0},
         HV_OK,
         "",
         {1, 3, 1, 3, 0, 3, 600, 1, 60, 10, 300, 5}},
        {"elastic: --min-np beyond the cluster",
         {.np = 4, .min_np = 3, .max_np = 4},
         {2, 2, 0, 0},
         HV_EINVAL,
         "--min-np 3 can never run here: the cluster has 2 slots",
         {0}},
        {"elastic: --min-np beyond the cluster and what the autoscaler adds",
         {.np = 9, .min_np = 9, .max_np = 9, .elastic = 1},
         {4, 4, 1, 4},
         HV_EINVAL,
         "-np 9 can never run here: the cluster has 4 slots and the autoscaler can add 4 more",
         {0}},
        {"np 0: every free slot",
         {0},
         {4, 3, 0, 0},
         HV_OK,
         "",
         {0, 3, 3, 3, 0, 0, 600, 1, 60, 10, 300, 5}},
        {"np 0 and none free: one",
         {0},
         {4, 0, 0, 0},
         HV_OK,
         "",
         {0, 1, 1, 1, 0, 0, 600, 1, 60, 10, 300, 5}},
        {"min above np",
         {.np = 2, .min_np = 3, .max_np = 4},
         {4, 4, 0, 0},
         HV_EINVAL,
         "need 1 <= min-np <= np <= max-np, got 3 <= 2 <= 4",
         {0}},
        {"max below np", {.np = 3, .max_np = 2}, {4, 4, 0, 0}, HV_EINVAL, "got 3 <= 3 <= 2", {0}},
        {"elastic from bounds, defaults",
         {.np = 2, .min_np = 1, .max_np = 4, .target_np = 3},
         {4, 4, 0, 0},
         HV_OK,
         "",
         {1, 2, 1, 4, 3, 3, 600, 1, 60, 10, 300, 5}},
        {"elastic, all given",
         {.np = 2,
          .elastic = 1,
          .max_resets = 0,
          .max_resets_set = 1,
          .timeout_s = 9,
          .check_every = 4,
          .elastic_timeout_s = 7,
          .cooldown_set = 1,
          .cooldown_min_s = 0,
          .cooldown_max_s = 0},
         {4, 4, 0, 0},
         HV_OK,
         "",
         {1, 2, 2, 2, 0, 0, 9, 4, 7, 0, 0, 5}},
        {"a cooldown cap below its start is raised",
         {.np = 1, .elastic = 1, .cooldown_set = 1, .cooldown_min_s = 30, .cooldown_max_s = 5},
         {4, 4, 0, 0},
         HV_OK,
         "",
         {1, 1, 1, 1, 0, 3, 600, 1, 60, 30, 30, 5}},
        {"fixed size: no target, no resets",
         {.np = 2, .target_np = 4, .max_resets = 9, .max_resets_set = 1},
         {4, 4, 0, 0},
         HV_OK,
         "",
         {0, 2, 2, 2, 0, 0, 600, 1, 60, 10, 300, 5}},
    };
    for (size_t i = 0; i < N(rows); i++) {
        hv_cl_settings_t got;
        memset(&got, 0xab, sizeof(got));
        char err[300] = "";
        hv_err rc = hv_cl_submit(&rows[i].a, &rows[i].r, &def, &got, err, sizeof(err));
        if (rc != rows[i].rc || strstr(err, rows[i].err) == NULL ||
            (rc == HV_OK && memcmp(&got, &rows[i].want, sizeof(got)) != 0)) {
            fprintf(stderr,
                    "%s: rc %s (want %s), err '%s' (want '%s'); elastic %d np %u min %u max %u "
                    "target %u resets %u timeout %u check %u etimeout %u cooldown %u..%u "
                    "strikes %u\n",
                    rows[i].name, hv_strerror(rc), hv_strerror(rows[i].rc), err, rows[i].err,
                    got.elastic, got.np, got.min_np, got.max_np, got.target_np, got.max_resets,
                    got.timeout_s, got.check_every, got.elastic_timeout_s, got.cooldown_min_s,
                    got.cooldown_max_s, got.max_strikes);
            hv_check_failures++;
        }
    }
}

/* A host limit: the room it leaves beside the job's workers on a node. */
static void case_used_for_job(void) {
    static const struct {
        uint32_t total, used, per_host, mine, want;
    } rows[] = {
        {4, 1, 0, 1, 1}, /* no limit */
        {4, 1, 2, 1, 3}, /* the limit leaves 1 of 3 free */
        {4, 1, 2, 0, 2}, /* 2 of 3 */
        {4, 1, 8, 0, 1}, /* a limit above the free slots */
        {4, 4, 2, 0, 4}, /* nothing free anyway */
        {4, 2, 2, 2, 4}, /* the limit is full */
        {4, 2, 1, 3, 4}, /* more than the limit (placed before it shrank) */
    };
    for (size_t i = 0; i < N(rows); i++) {
        CHECK_EQ(hv_cl_used_for_job(rows[i].total, rows[i].used, rows[i].per_host, rows[i].mine),
                 rows[i].want);
    }
}

/* How long a pending job may still wait: from submission, also across a head restart. */
static void case_wait_deadline(void) {
    static const struct {
        uint64_t now, wall, submitted;
        uint32_t timeout_s;
        uint64_t want;
    } rows[] = {
        {500, 10000, 10000, 60, 60500}, /* just submitted */
        {500, 40000, 10000, 60, 30500}, /* restarted after 30 s */
        {500, 90000, 10000, 60, 500},   /* waited longer than allowed: now */
        {500, 5000, 10000, 60, 60500},  /* the wall clock stepped back */
    };
    for (size_t i = 0; i < N(rows); i++) {
        CHECK_EQ(
            hv_cl_wait_deadline(rows[i].now, rows[i].wall, rows[i].submitted, rows[i].timeout_s),
            rows[i].want);
    }
}

/* The tick's timers on jobs, row by row. */
static void case_timers(void) {
    static const struct {
        int pending;
        uint64_t now, deadline;
        int want;
    } wait[] = {
        {1, 1000, 999, 1},
        {1, 1000, 1000, 0},
        {1, 1000, 5000, 0},
        {0, 9000, 1000, 0},
    };
    for (size_t i = 0; i < N(wait); i++) {
        CHECK_EQ(hv_cl_wait_over(wait[i].pending, wait[i].now, wait[i].deadline), wait[i].want);
    }
    static const struct {
        int ended, ending, settled;
        uint64_t now, ended_ms;
        int want;
    } forget[] = {
        {1, 0, 1, 700001, 100000, 1}, /* ended 600.001 s ago */
        {1, 0, 1, 700000, 100000, 0}, /* exactly the keep: not yet */
        {1, 1, 1, 900000, 100000, 0}, /* workers still alive */
        {1, 0, 0, 900000, 100000, 0}, /* its end or an event waits for the store */
        {0, 0, 1, 900000, 0, 0},      /* active */
    };
    for (size_t i = 0; i < N(forget); i++) {
        CHECK_EQ(hv_cl_forget(forget[i].ended, forget[i].ending, forget[i].settled, forget[i].now,
                              forget[i].ended_ms),
                 forget[i].want);
    }
}

/* The fewest workers a job starts with (common/jobsize.h), the one rule every caller uses. */
static void case_np_least(void) {
    static const struct {
        int elastic;
        uint32_t np, min_np, want;
    } rows[] = {
        {0, 4, 2, 4},               /* fixed size: -np, whatever --min-np says */
        {1, 4, 2, 2},               /* elastic: --min-np */
        {1, 4, 0, 4},               /* elastic without --min-np: -np */
        {1, 4, 4, 4}, {1, 2, 5, 2}, /* --min-np above -np reads as -np */
        {0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        CHECK_EQ(hv_np_least(rows[i].elastic, rows[i].np, rows[i].min_np), rows[i].want);
    }
}

HV_CHECK_MAIN(NULL, NULL, {"np_least", case_np_least}, {"drain_hold", case_drain_hold},
              {"queue", case_queue}, {"demand", case_demand}, {"submit", case_submit},
              {"used_for_job", case_used_for_job}, {"wait_deadline", case_wait_deadline},
              {"timers", case_timers})
