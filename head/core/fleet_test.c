/*
 * fleet_test: the fleet policy (fleet.h), one table of cluster situations -> each job's target,
 * reason and cause, plus cases on the nodes (gangs, GPUs, moves), the namespaces' shares and the
 * input checks. `fleet_test <case>` runs one case.
 */
#include "fleet.h"
#include "hv_check.h"

#include <stdint.h>
#include <string.h>

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define NOW 10000000u /* ms: the decisions' wall clock */

/* ---- a cluster of identical CPU nodes, jobs placed on them in order ---------------------------- */

enum { MODEL_DEFAULT = 0, MODEL_LINEAR = 1, MODEL_POOR = 2 };
static const hv_tput_model_t models[] = {
    {.kind = HV_TPUT_DEFAULT, .a = 0.95, .b = 0.05},
    {.kind = HV_TPUT_TWO, .a = 1.0, .b = 0.0},
    {.kind = HV_TPUT_TWO, .a = 1.0, .b = 0.5},
};

typedef struct jrow_s {
    uint64_t id;
    uint32_t ns;
    int32_t prio;
    int elastic, preempt;
    uint32_t np, min, max;
    hv_fl_jstate_t st;
    uint32_t size;
    uint64_t ago; /* WAITING: waiting for so long; RUNNING: resized so long ago (0: long) */
    int model;    /* MODEL_* */
} jrow_t;

#define RUN_E(id, prio, min, max, size)                                                            \
    { id, 0, prio, 1, 0, min, min, max, HV_FL_RUNNING, size, 0, 0 }
#define RUN_F(id, prio, pre, np)                                                                   \
    { id, 0, prio, 0, pre, np, np, np, HV_FL_RUNNING, np, 0, 0 }
#define WAIT_E(id, prio, min, max, ago)                                                            \
    { id, 0, prio, 1, 0, min, min, max, HV_FL_WAITING, 0, ago, 0 }
#define WAIT_F(id, prio, np, ago)                                                                  \
    { id, 0, prio, 0, 0, np, np, np, HV_FL_WAITING, 0, ago, 0 }

typedef struct nsrow_s {
    uint32_t weight;
    uint64_t quota, borrow, actors; /* slots */
} nsrow_t;

typedef struct want_s {
    uint64_t id;
    uint32_t target;
    hv_fl_reason_t reason;
    uint64_t cause;
} want_t;

typedef struct fx_s {
    hv_fl_settings_t set;
    hv_fl_ns_t ns[4];
    size_t nns;
    hv_fl_job_t jobs[8];
    size_t nj;
    hv_fl_node_t nodes[8];
    size_t nn;
    hv_fl_use_t use[64];
    size_t nuse;
    hv_fl_out_t out;
} fx_t;

static void fx_nodes(fx_t *f, size_t n, uint64_t slots) {
    for (size_t i = 0; i < n; i++) {
        uint64_t id = 100 + f->nn;
        f->nodes[f->nn++] = (hv_fl_node_t){.id = id, .cap = {{slots, 0, 0}}, .schedulable = 1};
    }
}

static void fx_ns(fx_t *f, const nsrow_t *ns, size_t n) {
    if (n == 0) { /* none configured: one, no quota, unlimited borrowing */
        f->ns[f->nns++] = (hv_fl_ns_t){
            .weight = 1, .borrow = {{HV_FL_UNLIMITED, HV_FL_UNLIMITED, HV_FL_UNLIMITED}}};
        return;
    }
    for (size_t k = 0; k < n; k++) {
        f->ns[f->nns++] = (hv_fl_ns_t){.weight = ns[k].weight,
                                       .quota = {{ns[k].quota, 0, 0}},
                                       .borrow = {{ns[k].borrow, HV_FL_UNLIMITED, HV_FL_UNLIMITED}},
                                       .actors = {{ns[k].actors, 0, 0}}};
    }
}

/* Adds the jobs; running ones take the first free slots, node by node, in order. */
static void fx_jobs(fx_t *f, const jrow_t *rows, size_t n) {
    uint64_t used[8] = {0};
    for (size_t i = 0; i < n; i++) {
        const jrow_t *r = &rows[i];
        hv_fl_job_t *j = &f->jobs[f->nj];
        *j = (hv_fl_job_t){.id = r->id,
                           .ns = r->ns,
                           .priority = r->prio,
                           .elastic = r->elastic,
                           .preemptible = r->preempt,
                           .np = r->np,
                           .min_np = r->min,
                           .max_np = r->max,
                           .state = r->st,
                           .size = r->size,
                           .tput = &models[r->model]};
        if (r->st == HV_FL_WAITING) {
            j->waiting_since_ms = NOW - r->ago;
        } else {
            j->resized_ms = r->ago ? NOW - r->ago : 0;
        }
        uint32_t left = r->size;
        for (size_t k = 0; k < f->nn && left > 0; k++) {
            uint64_t room = f->nodes[k].cap.r[HV_FL_SLOTS] - used[k];
            uint32_t take = room < left ? (uint32_t)room : left;
            if (take > 0) {
                f->use[f->nuse++] = (hv_fl_use_t){.job = f->nj, .node = k, .workers = take};
                used[k] += take;
                left -= take;
            }
        }
        f->nj++;
    }
}

static hv_err fx_decide(fx_t *f) {
    hv_fl_in_t in = {.now_ms = NOW,
                     .set = &f->set,
                     .ns = f->ns,
                     .nns = f->nns,
                     .jobs = f->jobs,
                     .njobs = f->nj,
                     .nodes = f->nodes,
                     .nnodes = f->nn,
                     .use = f->use,
                     .nuse = f->nuse};
    char err[256] = "";
    hv_err rc = hv_fl_decide(&in, &f->out, err, sizeof(err));
    if (rc != HV_OK) {
        fprintf(stderr, "hv_fl_decide: %s: %s\n", hv_errname(rc), err);
    }
    return rc;
}

static const hv_fl_dec_t *dec(const fx_t *f, uint64_t id) {
    for (size_t i = 0; i < f->out.ndec; i++) {
        if (f->out.dec[i].job_id == id) {
            return &f->out.dec[i];
        }
    }
    return NULL;
}

static int32_t move(const fx_t *f, uint64_t job, uint64_t node) {
    for (size_t i = 0; i < f->out.nmoves; i++) {
        if (f->out.moves[i].job_id == job && f->out.moves[i].node_id == node) {
            return f->out.moves[i].delta;
        }
    }
    return 0;
}

/* Checks the decision against want; prints the row's name on a mismatch. */
static void expect(const fx_t *f, const char *name, const want_t *w, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const hv_fl_dec_t *d = dec(f, w[i].id);
        if (d == NULL) {
            fprintf(stderr, "%s: job %llu: no decision\n", name, (unsigned long long)w[i].id);
            hv_check_failures++;
        } else if (d->target != w[i].target || d->reason != w[i].reason || d->cause != w[i].cause) {
            fprintf(stderr, "%s: job %llu: got %u %s cause %llu, want %u %s cause %llu\n", name,
                    (unsigned long long)w[i].id, d->target, hv_fl_reason_name(d->reason),
                    (unsigned long long)d->cause, w[i].target, hv_fl_reason_name(w[i].reason),
                    (unsigned long long)w[i].cause);
            hv_check_failures++;
        }
    }
}

/* ---- the table ------------------------------------------------------------------------------- */

typedef struct row_s {
    const char *name;
    size_t nodes;
    uint32_t slots;
    nsrow_t ns[3];
    size_t nns; /* 0: one namespace, no quota */
    jrow_t jobs[6];
    size_t nj;
    want_t want[6];
    size_t nw;
    uint32_t reset_ms; /* 0: the default */
} row_t;

static const row_t rows[] = {
    /* 1. Elastic jobs give way, in place. */
    {"a waiting job is admitted by shrinking an elastic one (the issue's scenario)",
     2,
     2,
     {},
     0,
     {RUN_E(1, 0, 1, 4, 4), WAIT_F(2, 0, 2, 100)},
     2,
     {{1, 2, HV_FL_SHRUNK_ADMIT, 2}, {2, 2, HV_FL_ADMITTED, 0}},
     2,
     0},
    {"it grows back when the slots are free",
     2,
     2,
     {},
     0,
     {RUN_E(1, 0, 1, 4, 2)},
     1,
     {{1, 4, HV_FL_GROWN, 0}},
     1,
     0},
    {"a fixed-size job is never shrunk",
     2,
     2,
     {},
     0,
     {RUN_F(1, 0, 0, 4), WAIT_F(2, 0, 2, 100)},
     2,
     {{1, 4, HV_FL_KEPT, 0}, {2, 0, HV_FL_WAIT_CAPACITY, 0}},
     2,
     0},
    {"an elastic job never goes below its --min-np",
     2,
     2,
     {},
     0,
     {RUN_E(1, 0, 3, 4, 4), WAIT_F(2, 0, 2, 100)},
     2,
     {{1, 4, HV_FL_KEPT, 0}, {2, 0, HV_FL_WAIT_CAPACITY, 0}},
     2,
     0},
    {"two waiting elastic jobs share: floors first, then growth",
     2,
     2,
     {},
     0,
     {WAIT_E(1, 0, 1, 4, 200), WAIT_E(2, 0, 1, 4, 100)},
     2,
     {{1, 2, HV_FL_ADMITTED, 0}, {2, 2, HV_FL_ADMITTED, 0}},
     2,
     0},
    /* 2. Priorities. */
    {"a higher priority takes workers down to the lower one's minimum",
     2,
     2,
     {},
     0,
     {RUN_E(1, 0, 1, 4, 4), WAIT_E(2, 5, 2, 4, 100)},
     2,
     {{1, 1, HV_FL_SHRUNK_PRIORITY, 2}, {2, 3, HV_FL_ADMITTED, 0}},
     2,
     0},
    {"a preemptible lower-priority job that cannot shrink is stopped",
     2,
     2,
     {},
     0,
     {RUN_F(1, 0, 1, 4), WAIT_F(2, 5, 2, 100)},
     2,
     {{1, 0, HV_FL_PREEMPTED, 2}, {2, 2, HV_FL_ADMITTED, 0}},
     2,
     0},
    {"one that is not preemptible runs on: the higher one waits",
     2,
     2,
     {},
     0,
     {RUN_F(1, 0, 0, 4), WAIT_F(2, 5, 2, 100)},
     2,
     {{1, 4, HV_FL_KEPT, 0}, {2, 0, HV_FL_WAIT_CAPACITY, 0}},
     2,
     0},
    {"the same priority never preempts",
     2,
     2,
     {},
     0,
     {RUN_F(1, 0, 1, 4), WAIT_F(2, 0, 2, 100)},
     2,
     {{1, 4, HV_FL_KEPT, 0}, {2, 0, HV_FL_WAIT_CAPACITY, 0}},
     2,
     0},
    {"no preemption that does not admit: the higher job would not fit anyway",
     2,
     2,
     {},
     0,
     {RUN_F(1, 0, 0, 2), RUN_F(2, 0, 1, 2), WAIT_F(3, 5, 3, 100)},
     3,
     {{1, 2, HV_FL_KEPT, 0}, {2, 2, HV_FL_KEPT, 0}, {3, 0, HV_FL_WAIT_CAPACITY, 0}},
     3,
     0},
    {"a lower priority does not pass a higher one waiting for capacity",
     2,
     2,
     {},
     0,
     {RUN_F(1, 0, 0, 2), WAIT_F(2, 1, 4, 100), WAIT_F(3, 0, 1, 50)},
     3,
     {{1, 2, HV_FL_KEPT, 0}, {2, 0, HV_FL_WAIT_CAPACITY, 0}, {3, 0, HV_FL_WAIT_BEHIND, 2}},
     3,
     0},
    {"a preemptible one may (a stop gives the slots back); growth uses them meanwhile",
     2,
     2,
     {},
     0,
     {RUN_E(1, 0, 2, 3, 2),
      WAIT_F(2, 1, 4, 100),
      {3, 0, 0, 0, 1, 1, 1, 1, HV_FL_WAITING, 0, 50, 0}},
     3,
     {{1, 3, HV_FL_GROWN, 0}, {2, 0, HV_FL_WAIT_CAPACITY, 0}, {3, 1, HV_FL_ADMITTED, 0}},
     3,
     0},
    {"a higher priority starts first",
     2,
     2,
     {},
     0,
     {WAIT_F(1, 0, 3, 9000), WAIT_F(2, 1, 3, 100)},
     2,
     {{1, 0, HV_FL_WAIT_CAPACITY, 0}, {2, 3, HV_FL_ADMITTED, 0}},
     2,
     0},
    {"first come, first served within a priority",
     2,
     2,
     {},
     0,
     {WAIT_F(1, 0, 3, 100), WAIT_F(2, 0, 3, 9000)},
     2,
     {{1, 0, HV_FL_WAIT_CAPACITY, 0}, {2, 3, HV_FL_ADMITTED, 0}},
     2,
     0},
    {"a job waiting 2 x age_ms counts two priorities higher",
     2,
     2,
     {},
     0,
     {WAIT_F(1, 0, 3, 1250000), WAIT_F(2, 1, 3, 100)},
     2,
     {{1, 3, HV_FL_ADMITTED, 0}, {2, 0, HV_FL_WAIT_CAPACITY, 0}},
     2,
     0},
    /* No job starves. */
    {"a smaller job starts beside a waiting big one",
     2,
     2,
     {},
     0,
     {RUN_F(1, 0, 0, 2), WAIT_F(2, 0, 4, 9000), WAIT_F(3, 0, 2, 100)},
     3,
     {{2, 0, HV_FL_WAIT_CAPACITY, 0}, {3, 2, HV_FL_ADMITTED, 0}},
     2,
     0},
    {"... not once the big one waited starve_ms: it goes first",
     2,
     2,
     {},
     0,
     {RUN_F(1, 0, 0, 2), WAIT_F(2, 0, 4, 70000), WAIT_F(3, 0, 2, 100)},
     3,
     {{2, 0, HV_FL_WAIT_CAPACITY, 0}, {3, 0, HV_FL_WAIT_BEHIND, 2}},
     2,
     0},
    {"a starving job blocks admissions, not growth",
     3,
     2,
     {},
     0,
     {RUN_F(1, 0, 0, 2), RUN_E(2, 0, 1, 4, 1), WAIT_F(3, 0, 4, 70000), WAIT_F(4, 0, 1, 100)},
     4,
     {{2, 4, HV_FL_GROWN, 0}, {3, 0, HV_FL_WAIT_CAPACITY, 0}, {4, 0, HV_FL_WAIT_BEHIND, 3}},
     3,
     0},
    /* Anti-thrash. */
    {"held by the interval: no growth",
     2,
     2,
     {},
     0,
     {{1, 0, 0, 1, 0, 1, 1, 4, HV_FL_RUNNING, 2, 1000, 0}},
     1,
     {{1, 2, HV_FL_HELD_INTERVAL, 0}},
     1,
     0},
    {"held, but an admission still shrinks it",
     2,
     2,
     {},
     0,
     {{1, 0, 0, 1, 0, 1, 1, 4, HV_FL_RUNNING, 4, 1000, 0}, WAIT_F(2, 0, 2, 100)},
     2,
     {{1, 2, HV_FL_SHRUNK_ADMIT, 2}, {2, 2, HV_FL_ADMITTED, 0}},
     2,
     0},
    {"held: another job's growth does not take its workers",
     2,
     2,
     {},
     0,
     {{1, 0, 0, 1, 0, 1, 1, 4, HV_FL_RUNNING, 3, 1000, MODEL_POOR},
      {2, 0, 0, 1, 0, 1, 1, 4, HV_FL_RUNNING, 1, 0, MODEL_LINEAR}},
     2,
     {{1, 3, HV_FL_HELD_INTERVAL, 0}, {2, 1, HV_FL_KEPT, 0}},
     2,
     0},
    {"not held: the workers go where the goodput rises most",
     2,
     2,
     {},
     0,
     {{1, 0, 0, 1, 0, 1, 1, 4, HV_FL_RUNNING, 3, 0, MODEL_POOR},
      {2, 0, 0, 1, 0, 1, 1, 4, HV_FL_RUNNING, 1, 0, MODEL_LINEAR}},
     2,
     {{1, 1, HV_FL_SHRUNK_SHARE, 2}, {2, 3, HV_FL_GROWN, 0}},
     2,
     0},
    {"a growth that would not pay for its reset is not made",
     2,
     2,
     {},
     0,
     {RUN_E(1, 0, 1, 4, 2)},
     1,
     {{1, 2, HV_FL_HELD_COST, 0}},
     1,
     20000},
    /* 3. Goodput. */
    {"a free slot goes to the job whose goodput rises most",
     3,
     2,
     {},
     0,
     {{1, 0, 0, 1, 0, 1, 1, 6, HV_FL_WAITING, 0, 100, MODEL_POOR},
      {2, 0, 0, 1, 0, 1, 1, 6, HV_FL_WAITING, 0, 100, MODEL_LINEAR}},
     2,
     {{1, 1, HV_FL_ADMITTED, 0}, {2, 5, HV_FL_ADMITTED, 0}},
     2,
     0},
    /* Quotas, borrowing, fair share. */
    {"borrowed capacity goes back to its owner",
     2,
     2,
     {{1, 2, HV_FL_UNLIMITED, 0}, {1, 2, HV_FL_UNLIMITED, 0}},
     2,
     {RUN_E(1, 0, 1, 4, 4), {2, 1, 0, 1, 0, 2, 2, 4, HV_FL_WAITING, 0, 100, 0}},
     2,
     {{1, 2, HV_FL_SHRUNK_RECLAIM, 2}, {2, 2, HV_FL_ADMITTED, 0}},
     2,
     0},
    {"a job fitting the quota does not pass a running one of its namespace that borrows",
     2,
     2,
     {{1, 2, HV_FL_UNLIMITED, 0}, {1, 2, HV_FL_UNLIMITED, 0}},
     2,
     {RUN_F(1, 0, 1, 4), WAIT_E(2, 0, 1, 1, 100)},
     2,
     {{1, 4, HV_FL_KEPT, 0}, {2, 0, HV_FL_WAIT_CAPACITY, 0}},
     2,
     0},
    {"a waiting job that fits the quota passes a waiting one that does not (backfill)",
     2,
     2,
     {{1, 2, 0, 0}, {1, 2, 0, 0}},
     2,
     {RUN_E(1, 0, 1, 4, 1), WAIT_F(2, 0, 3, 900), WAIT_F(3, 0, 1, 100)},
     3,
     {{1, 1, HV_FL_KEPT, 0}, {2, 0, HV_FL_WAIT_QUOTA, 0}, {3, 1, HV_FL_ADMITTED, 0}},
     3,
     0},
    {"idle quota is borrowed",
     2,
     2,
     {{1, 2, HV_FL_UNLIMITED, 0}, {1, 2, HV_FL_UNLIMITED, 0}},
     2,
     {WAIT_E(1, 0, 1, 4, 100)},
     1,
     {{1, 4, HV_FL_ADMITTED, 0}},
     1,
     0},
    {"no borrowing beyond the limit",
     2,
     2,
     {{1, 2, 0, 0}, {1, 2, 0, 0}},
     2,
     {WAIT_E(1, 0, 1, 4, 200), WAIT_F(2, 0, 2, 100)},
     2,
     {{1, 2, HV_FL_ADMITTED, 0}, {2, 0, HV_FL_WAIT_QUOTA, 0}},
     2,
     0},
    {"actors count against their namespace's quota",
     2,
     2,
     {{1, 4, 0, 2}},
     1,
     {WAIT_E(1, 0, 1, 4, 100)},
     1,
     {{1, 2, HV_FL_ADMITTED, 0}},
     1,
     0},
    {"two namespaces of equal weight that want the cluster get half each",
     2,
     4,
     {{1, 0, HV_FL_UNLIMITED, 0}, {1, 0, HV_FL_UNLIMITED, 0}},
     2,
     {RUN_E(1, 0, 1, 8, 8), {2, 1, 0, 1, 0, 1, 1, 8, HV_FL_WAITING, 0, 100, 0}},
     2,
     {{1, 4, HV_FL_SHRUNK_ADMIT, 2}, {2, 4, HV_FL_ADMITTED, 0}},
     2,
     0},
    {"weights 3:1 share 6:2",
     2,
     4,
     {{3, 0, HV_FL_UNLIMITED, 0}, {1, 0, HV_FL_UNLIMITED, 0}},
     2,
     {RUN_E(1, 0, 1, 8, 8), {2, 1, 0, 1, 0, 1, 1, 8, HV_FL_WAITING, 0, 100, 0}},
     2,
     {{1, 6, HV_FL_SHRUNK_ADMIT, 2}, {2, 2, HV_FL_ADMITTED, 0}},
     2,
     0},
    {"fair share holds within a priority only",
     2,
     4,
     {{1, 0, HV_FL_UNLIMITED, 0}, {1, 0, HV_FL_UNLIMITED, 0}},
     2,
     {RUN_E(1, 1, 1, 8, 8), {2, 1, 0, 1, 0, 1, 1, 8, HV_FL_WAITING, 0, 100, 0}},
     2,
     {{1, 7, HV_FL_SHRUNK_ADMIT, 2}, {2, 1, HV_FL_ADMITTED, 0}},
     2,
     0},
};

/* 8. The reserve for high priority: the same rows with reserve_pct (reserve_prio 1, the default). */
typedef struct rrow_s {
    uint32_t pct;
    row_t r;
} rrow_t;

static const rrow_t reserve_rows[] = {
    {25,
     {"the reserve keeps a low-priority floor that cannot be taken back out of it",
      2,
      2,
      {},
      0,
      {RUN_F(1, 0, 0, 2), WAIT_F(2, 0, 2, 100)},
      2,
      {{1, 2, HV_FL_KEPT, 0}, {2, 0, HV_FL_WAIT_CAPACITY, 0}},
      2,
      0}},
    {25,
     {"a preemptible low-priority job may use the reserve (a stop gives it back)",
      2,
      2,
      {},
      0,
      {RUN_F(1, 0, 0, 2), {2, 0, 0, 0, 1, 2, 2, 2, HV_FL_WAITING, 0, 100, 0}},
      2,
      {{1, 2, HV_FL_KEPT, 0}, {2, 2, HV_FL_ADMITTED, 0}},
      2,
      0}},
    {50,
     {"growth uses the reserve while the low-priority floor waits",
      2,
      2,
      {},
      0,
      {RUN_E(1, 0, 1, 4, 2), WAIT_F(2, 0, 2, 100)},
      2,
      {{1, 4, HV_FL_GROWN, 0}, {2, 0, HV_FL_WAIT_CAPACITY, 0}},
      2,
      0}},
    {50,
     {"a high priority gets the reserve at once from the growth in it",
      2,
      2,
      {},
      0,
      {RUN_E(1, 0, 1, 4, 4), WAIT_F(2, 0, 2, 200), WAIT_F(3, 1, 2, 100)},
      3,
      {{1, 2, HV_FL_SHRUNK_PRIORITY, 3}, {2, 0, HV_FL_WAIT_CAPACITY, 0}, {3, 2, HV_FL_ADMITTED, 0}},
      3,
      0}},
    {0,
     {"without the reserve the low-priority floor takes it and the high priority waits",
      2,
      2,
      {},
      0,
      {RUN_F(1, 0, 0, 2), WAIT_F(2, 0, 2, 200)},
      2,
      {{1, 2, HV_FL_KEPT, 0}, {2, 2, HV_FL_ADMITTED, 0}},
      2,
      0}},
    {50,
     {"a job aged to the reserve's priority may use it",
      2,
      2,
      {},
      0,
      {RUN_F(1, 0, 0, 2), WAIT_F(2, 0, 2, 700000)},
      2,
      {{1, 2, HV_FL_KEPT, 0}, {2, 2, HV_FL_ADMITTED, 0}},
      2,
      0}},
};

static void run_row(const row_t *r, uint32_t reserve_pct) {
    fx_t f = {0};
    hv_fl_settings_default(&f.set);
    if (r->reset_ms) {
        f.set.reset_ms = r->reset_ms;
    }
    f.set.reserve_pct = reserve_pct;
    fx_nodes(&f, r->nodes, r->slots);
    fx_ns(&f, r->ns, r->nns);
    fx_jobs(&f, r->jobs, r->nj);
    if (fx_decide(&f) != HV_OK) {
        fprintf(stderr, "%s: no decision\n", r->name);
        hv_check_failures++;
        return;
    }
    expect(&f, r->name, r->want, r->nw);
    hv_fl_out_fini(&f.out);
}

static void case_table(void) {
    for (size_t i = 0; i < N(rows); i++) {
        run_row(&rows[i], 0);
    }
}

static void case_reserve(void) {
    for (size_t i = 0; i < N(reserve_rows); i++) {
        run_row(&reserve_rows[i].r, reserve_rows[i].pct);
    }
}

/* The scenario on the nodes: the shrink frees whole node 100, where the new job goes. */
static void case_moves(void) {
    fx_t f = {0};
    hv_fl_settings_default(&f.set);
    fx_nodes(&f, 2, 2);
    fx_ns(&f, NULL, 0);
    jrow_t j[] = {RUN_E(1, 0, 1, 4, 4), WAIT_F(2, 0, 2, 100)};
    fx_jobs(&f, j, N(j));
    CHECK_RC(fx_decide(&f), HV_OK);
    CHECK_EQ(f.out.nmoves, 2);
    CHECK_EQ(move(&f, 1, 100), -2);
    CHECK_EQ(move(&f, 2, 100), 2);
    CHECK_EQ(f.out.recheck_ms, 0);
    hv_fl_out_fini(&f.out);
}

/* A gang needs room on one node: an elastic job's worker moves so that it fits. */
static void case_gang_moves_worker(void) {
    fx_t f = {0};
    hv_fl_settings_default(&f.set);
    fx_nodes(&f, 2, 2);
    fx_ns(&f, NULL, 0);
    jrow_t j[] = {RUN_E(1, 0, 1, 4, 2), WAIT_F(2, 0, 1, 100)};
    fx_jobs(&f, j, N(j));
    f.use[0].workers = 1; /* job 1: one worker on each node */
    f.use[f.nuse++] = (hv_fl_use_t){.job = 0, .node = 1, .workers = 1};
    f.jobs[1].per_worker.r[HV_FL_SLOTS] = 2; /* job 2: one worker of 2 slots */
    CHECK_RC(fx_decide(&f), HV_OK);
    want_t w[] = {{1, 2, HV_FL_MOVED, 2}, {2, 1, HV_FL_ADMITTED, 0}};
    expect(&f, "gang moves a worker", w, N(w));
    CHECK_EQ(move(&f, 1, 100), -1);
    CHECK_EQ(move(&f, 1, 101), 1);
    CHECK_EQ(move(&f, 2, 100), 1);
    hv_fl_out_fini(&f.out);
}

/* Enough in total, but no node holds the gang: it waits, and the capacity goes to another job. */
static void case_gang_no_fit(void) {
    fx_t f = {0};
    hv_fl_settings_default(&f.set);
    fx_nodes(&f, 2, 2);
    fx_ns(&f, NULL, 0);
    jrow_t j[] = {RUN_F(1, 0, 0, 2), WAIT_F(2, 0, 1, 200), WAIT_E(3, 0, 1, 2, 100)};
    fx_jobs(&f, j, N(j));
    f.use[0].workers = 1;
    f.use[f.nuse++] = (hv_fl_use_t){.job = 0, .node = 1, .workers = 1};
    f.jobs[1].per_worker.r[HV_FL_SLOTS] = 2;
    CHECK_RC(fx_decide(&f), HV_OK);
    want_t w[] = {{1, 2, HV_FL_KEPT, 0}, {2, 0, HV_FL_WAIT_FIT, 0}, {3, 2, HV_FL_ADMITTED, 0}};
    expect(&f, "gang no fit", w, N(w));
    hv_fl_out_fini(&f.out);
    /* --slots-per-host 1: 3 workers on 2 nodes never fit, though 4 slots are free */
    fx_t g = {0};
    hv_fl_settings_default(&g.set);
    fx_nodes(&g, 2, 2);
    fx_ns(&g, NULL, 0);
    jrow_t k[] = {WAIT_F(1, 0, 3, 100)};
    fx_jobs(&g, k, N(k));
    g.jobs[0].slots_per_host = 1;
    CHECK_RC(fx_decide(&g), HV_OK);
    want_t v[] = {{1, 0, HV_FL_WAIT_FIT, 0}};
    expect(&g, "slots per host", v, N(v));
    hv_fl_out_fini(&g.out);
}

/* GPUs are counted per node: workers that need one go where they are free. */
static void case_gpus(void) {
    fx_t f = {0};
    hv_fl_settings_default(&f.set);
    f.nodes[f.nn++] = (hv_fl_node_t){.id = 100, .cap = {{4, 0, 0}}, .schedulable = 1};
    f.nodes[f.nn++] = (hv_fl_node_t){.id = 101, .cap = {{4, 4, 0}}, .schedulable = 1};
    fx_ns(&f, NULL, 0);
    jrow_t j[] = {WAIT_F(1, 0, 2, 200), WAIT_F(2, 0, 3, 100)};
    fx_jobs(&f, j, N(j));
    f.jobs[0].per_worker.r[HV_FL_GPUS] = 1;
    f.jobs[1].per_worker.r[HV_FL_GPUS] = 1;
    CHECK_RC(fx_decide(&f), HV_OK);
    want_t w[] = {{1, 2, HV_FL_ADMITTED, 0}, {2, 0, HV_FL_WAIT_CAPACITY, 0}};
    expect(&f, "gpus", w, N(w));
    CHECK_EQ(move(&f, 1, 101), 2);
    hv_fl_out_fini(&f.out);
}

/* Dominant resource fairness over slots and memory (the DRF paper's example: 9 slots, 18 GiB;
 * one namespace's workers take <1 slot, 4 GiB>, the other's <3 slots, 1 GiB>): 3 and 2. */
static void case_drf_two_resources(void) {
    fx_t f = {0};
    hv_fl_settings_default(&f.set);
    f.nodes[f.nn++] = (hv_fl_node_t){.id = 100, .cap = {{9, 0, 18432}}, .schedulable = 1};
    nsrow_t ns[] = {{1, 0, HV_FL_UNLIMITED, 0}, {1, 0, HV_FL_UNLIMITED, 0}};
    fx_ns(&f, ns, 2);
    jrow_t j[] = {{1, 0, 0, 1, 0, 1, 1, 50, HV_FL_WAITING, 0, 100, MODEL_LINEAR},
                  {2, 1, 0, 1, 0, 1, 1, 50, HV_FL_WAITING, 0, 100, MODEL_LINEAR}};
    fx_jobs(&f, j, N(j));
    f.jobs[0].per_worker = (hv_fl_res_t){{1, 0, 4096}};
    f.jobs[1].per_worker = (hv_fl_res_t){{3, 0, 1024}};
    CHECK_RC(fx_decide(&f), HV_OK);
    want_t w[] = {{1, 3, HV_FL_ADMITTED, 0}, {2, 2, HV_FL_ADMITTED, 0}};
    expect(&f, "drf", w, N(w));
    CHECK_EQ(f.out.share[0].share_pm, 667); /* 12 of 18 GiB */
    CHECK_EQ(f.out.share[1].share_pm, 667); /* 6 of 9 slots */
    hv_fl_out_fini(&f.out);
}

/* What a namespace's share says: used, borrowed beyond its quota, jobs waiting. */
static void case_shares(void) {
    fx_t f = {0};
    hv_fl_settings_default(&f.set);
    fx_nodes(&f, 2, 4);
    nsrow_t ns[] = {{1, 2, HV_FL_UNLIMITED, 1}, {1, 6, 0, 0}};
    fx_ns(&f, ns, 2);
    jrow_t j[] = {WAIT_E(1, 0, 1, 6, 300), {2, 1, 0, 0, 0, 8, 8, 8, HV_FL_WAITING, 0, 100, 0}};
    fx_jobs(&f, j, N(j));
    CHECK_RC(fx_decide(&f), HV_OK);
    want_t w[] = {{1, 6, HV_FL_ADMITTED, 0}, {2, 0, HV_FL_WAIT_QUOTA, 0}};
    expect(&f, "shares", w, N(w));
    CHECK_EQ(dec(&f, 1)->borrowed, 5); /* its quota holds 1 beside its actor */
    CHECK_EQ(f.out.share[0].used.r[HV_FL_SLOTS], 7);
    CHECK_EQ(f.out.share[0].borrowed.r[HV_FL_SLOTS], 5);
    CHECK_EQ(f.out.share[0].share_pm, 875);
    CHECK_EQ(f.out.share[1].waiting, 1);
    hv_fl_out_fini(&f.out);
}

/* When to decide again: a hold's end, a wait's turn to starve. */
static void case_recheck(void) {
    fx_t f = {0};
    hv_fl_settings_default(&f.set);
    fx_nodes(&f, 2, 2);
    fx_ns(&f, NULL, 0);
    jrow_t j[] = {{1, 0, 0, 1, 0, 1, 1, 4, HV_FL_RUNNING, 4, 1000, 0}, WAIT_F(2, 0, 1, 100)};
    fx_jobs(&f, j, N(j));
    f.jobs[0].state = HV_FL_FROZEN; /* re-forming: the waiting one waits for it */
    CHECK_RC(fx_decide(&f), HV_OK);
    want_t w[] = {{1, 4, HV_FL_BUSY, 0}, {2, 0, HV_FL_WAIT_CAPACITY, 0}};
    expect(&f, "recheck", w, N(w));
    CHECK_EQ(f.out.recheck_ms, NOW - 100 + HV_FL_STARVE_MS);
    hv_fl_out_fini(&f.out);
    f = (fx_t){0};
    hv_fl_settings_default(&f.set);
    fx_nodes(&f, 2, 2);
    fx_ns(&f, NULL, 0);
    fx_jobs(&f, j, 1);
    CHECK_RC(fx_decide(&f), HV_OK);
    CHECK_EQ(f.out.recheck_ms, NOW - 1000 + HV_FL_INTERVAL_MS);
    hv_fl_out_fini(&f.out);
}

/* Workers leaving with a change in progress count as free: a job waiting for them is admitted
 * (placed once they are gone), and nobody else is preempted for it meanwhile. */
static void case_leaving(void) {
    fx_t f = {0};
    hv_fl_settings_default(&f.set);
    fx_nodes(&f, 3, 2);
    fx_ns(&f, NULL, 0);
    jrow_t j[] = {RUN_E(1, 0, 1, 4, 4), RUN_F(3, 0, 1, 2), WAIT_F(2, 5, 2, 100)};
    fx_jobs(&f, j, N(j));
    f.jobs[0].state = HV_FL_FROZEN; /* shrinking from 4 to 2: one leaves each of its nodes */
    f.use[0].leaving = 1;
    f.use[1].leaving = 1;
    CHECK_RC(fx_decide(&f), HV_OK);
    want_t w[] = {{1, 2, HV_FL_BUSY, 0}, {3, 2, HV_FL_KEPT, 0}, {2, 2, HV_FL_ADMITTED, 0}};
    expect(&f, "leaving", w, N(w));
    CHECK_EQ(f.out.nmoves, 2);
    CHECK_EQ(move(&f, 2, 100), 1);
    CHECK_EQ(move(&f, 2, 101), 1);
    hv_fl_out_fini(&f.out);
}

/* Bad input names the job and the field; every reason has a distinct word. */
static void case_input(void) {
    fx_t f = {0};
    fx_nodes(&f, 1, 2);
    fx_ns(&f, NULL, 0);
    jrow_t j[] = {WAIT_E(7, 0, 1, 4, 100)};
    fx_jobs(&f, j, 1);
    f.jobs[0].ns = 3;
    hv_fl_in_t in = {.now_ms = NOW,
                     .ns = f.ns,
                     .nns = 1,
                     .jobs = f.jobs,
                     .njobs = 1,
                     .nodes = f.nodes,
                     .nnodes = 1};
    char err[200] = "";
    CHECK_RC(hv_fl_decide(&in, &f.out, err, sizeof(err)), HV_EINVAL);
    CHECK_HAS(err, "job 7: namespace index 3");
    f.jobs[0].ns = 0;
    f.jobs[0].min_np = 5;
    CHECK_RC(hv_fl_decide(&in, &f.out, err, sizeof(err)), HV_EINVAL);
    CHECK_HAS(err, "min-np <= np <= max-np");
    f.jobs[0].min_np = 1;
    hv_fl_use_t u = {.job = 0, .node = 4, .workers = 1};
    in.use = &u;
    in.nuse = 1;
    CHECK_RC(hv_fl_decide(&in, &f.out, err, sizeof(err)), HV_EINVAL);
    CHECK_HAS(err, "node 4 of 1");
    in.nns = 0;
    CHECK_RC(hv_fl_decide(&in, &f.out, err, sizeof(err)), HV_EINVAL);
    for (int a = 0; a < HV_FL__COUNT; a++) {
        CHECK(strcmp(hv_fl_reason_name((hv_fl_reason_t)a), "unknown") != 0);
        for (int b = 0; b < a; b++) {
            CHECK(strcmp(hv_fl_reason_name((hv_fl_reason_t)a),
                         hv_fl_reason_name((hv_fl_reason_t)b)) != 0);
        }
    }
    CHECK_STR(hv_fl_reason_name(HV_FL__COUNT), "unknown");
}

HV_CHECK_MAIN(NULL, NULL, {"table", case_table}, {"reserve", case_reserve}, {"moves", case_moves},
              {"gang_moves_worker", case_gang_moves_worker}, {"gang_no_fit", case_gang_no_fit},
              {"gpus", case_gpus}, {"drf_two_resources", case_drf_two_resources},
              {"shares", case_shares}, {"recheck", case_recheck}, {"leaving", case_leaving},
              {"input", case_input})
