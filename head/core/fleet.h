/*
 * fleet: the head's policy for sharing one cluster among many jobs (issue 26). Given the jobs
 * (size, bounds, priority, namespace, age, throughput per size), the namespaces (weight,
 * guaranteed quota, borrowing limit, their actors' use) and the nodes (capacity, what else runs
 * there, which workers of which job run where), it decides each job's target size with a typed
 * reason, which jobs start, which stop to resume later, and which workers move on which node.
 * Pure: no I/O, no clock (now comes in), allocation only for its answer and its scratch. The
 * driver builds the inputs from its tables, asks, stores the decision, then acts (phase 2).
 * Table-tested in fleet_test.c; compared with first-come-first-served in tests/perf/fleetsim.c.
 *
 * The rules, in the order they are applied:
 *  1. What cannot change now keeps its size: a job starting, re-forming or finishing (FROZEN),
 *     and the floor of a running job that is not preemptible (--min-np of an elastic job, all
 *     of a fixed one: a fixed-size job is never shrunk, and a job is never stopped unless it
 *     was submitted --preemptible).
 *  2. Tier 1, each namespace within its guaranteed quota: first floors (admissions: a waiting
 *     job starts with its floor, as a gang), then growth. Tier 2, what is left of the cluster
 *     (capacity no quota covers and the quota its owners leave idle), each namespace up to its
 *     quota plus its borrowing limit: floors, then growth. A namespace's own quota comes before
 *     anyone's borrowing, so borrowed capacity goes back to its owner, by shrinking the
 *     borrower, as soon as the owner's jobs want it (Kueue's cohorts with reclaim).
 *  3. Floors go by effective priority (higher first), then running before waiting (a running
 *     preemptible job is stopped only for a higher priority or its quota's owner), then a job
 *     waiting longer than starve_ms, then (tier 2) the namespace with the smallest weighted
 *     dominant share (DRF), then the oldest. In tier 1 a namespace's jobs go in that order until
 *     a running or starving one does not fit its quota: the rest follow it to tier 2 instead of
 *     passing it (other waiting jobs that fit may pass one that does not: backfill). Since
 *     floors come before growth, a waiting job is admitted by shrinking running elastic jobs
 *     toward their --min-np, and a higher-priority job takes workers from lower-priority jobs
 *     down to their minimum; a lower-priority preemptible job whose floor no longer fits is
 *     stopped (PREEMPTED) and waits to resume from its state copy.
 *  4. Growth goes one worker at a time: first what a job held by the resize interval keeps,
 *     then by effective priority, then (tier 2) the namespace with the smallest weighted
 *     dominant share, then the job whose goodput rises most with one more worker (tput.h's
 *     marginal gain per unit of its dominant resource).
 *  5. Anti-thrash: a running job resized less than resize_interval_ms ago neither grows nor
 *     gives workers to another job's growth, fair share or goodput (every move the policy makes
 *     on its own); only a floor shrinks it sooner: an admission, a higher priority, a reclaim,
 *     so that a waiting job never waits for a hold. A growth is made only when the throughput it
 *     adds over the interval (at least HV_FL_PAYBACK_MIN_MS) pays for the reset it costs
 *     (reset_ms at the old size); a worker adding less than min_gain_pm per mille of one
 *     worker's throughput is not given. A running job's workers count keep_pct more than ones
 *     it would get, so that workers move between jobs only for a clear gain.
 *  6. No job starves: a job waiting longer than starve_ms blocks the admission of jobs of its
 *     priority or lower behind it (of its namespace when it waits for quota, of all otherwise),
 *     so capacity drains toward it while growth, which can be reclaimed at any commit, still
 *     uses the slots meanwhile; its wait is bounded by starve_ms plus the time the floors
 *     running before it take to end. A job waiting age_ms counts as one priority higher (two
 *     at 2 x age_ms, ...), so a stream of higher-priority jobs cannot starve it either.
 *  7. Fit: the targets are then placed on the nodes (capacity per node, GPUs and memory per
 *     worker, --slots-per-host): a shrinking job gives up workers on the nodes where that frees
 *     the most room (draining nodes first), an admitted gang goes to the nodes with the most
 *     room first as sched.c places it, and a gang that no set of nodes holds waits (WAIT_FIT)
 *     while the allocation is done again without it.
 * Every worker a shrink frees is traced to the job that takes it: that is the reason's cause.
 */
#ifndef HV_HEAD_FLEET_H
#define HV_HEAD_FLEET_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "tput.h"

/* The resources a worker, a node, a quota count. */
enum { HV_FL_SLOTS = 0, HV_FL_GPUS = 1, HV_FL_MEMORY = 2, HV_FL_NRES = 3 };
#define HV_FL_UNLIMITED UINT64_MAX

typedef struct hv_fl_res_s {
    uint64_t r[HV_FL_NRES]; /* slots, GPUs, memory in MiB */
} hv_fl_res_t;

/* A namespace (a team): every job and actor belongs to one. With none configured the driver
 * passes one with no quota and an unlimited borrowing limit: priorities, then goodput. */
typedef struct hv_fl_ns_s {
    uint32_t weight;    /* its share against the others' (0 reads as 1) */
    hv_fl_res_t quota;  /* guaranteed to it */
    hv_fl_res_t borrow; /* the most it may use beyond its quota (HV_FL_UNLIMITED: no limit) */
    hv_fl_res_t actors; /* what its actors use now: counts against its quota and share */
} hv_fl_ns_t;

typedef enum hv_fl_jstate {
    HV_FL_WAITING = 0, /* pending, or stopped by a preemption and waiting to resume */
    HV_FL_RUNNING = 1, /* running, and may be resized at its next commit */
    HV_FL_FROZEN = 2,  /* running, but not to be resized now: placing, re-forming, finishing */
} hv_fl_jstate_t;

typedef struct hv_fl_job_s {
    uint64_t id;
    uint32_t ns; /* index into hv_fl_in_t.ns */
    int32_t priority;
    int elastic, preemptible;
    uint32_t np, min_np, max_np; /* a fixed-size job: np (min_np and max_np are not read) */
    hv_fl_jstate_t state;
    uint32_t size;               /* live workers now (0 while waiting) */
    uint64_t waiting_since_ms;   /* WAITING: since its submission or its preemption (wall ms) */
    uint64_t resized_ms;         /* RUNNING: its start or last resize (wall ms; 0: long ago) */
    hv_fl_res_t per_worker;      /* what each worker takes (slots 0 reads as 1) */
    uint32_t slots_per_host;     /* at most this many workers on one node (0: no limit) */
    const hv_tput_model_t *tput; /* its throughput per size (NULL: tput.h's default shape) */
    double remaining;            /* work left, in the model's unit (0: unknown) */
} hv_fl_job_t;

typedef struct hv_fl_node_s {
    uint64_t id;
    hv_fl_res_t cap;   /* what it offers */
    hv_fl_res_t other; /* taken by what the policy does not move (actors) */
    int schedulable;   /* alive, not draining: takes new workers */
} hv_fl_node_t;

/* `workers` live workers of jobs[job] run on nodes[node]; `leaving` of them leave with the
 * job's change in progress (a shrink or a stop that has not reached its commit yet): the decision
 * counts their slots as free, and the driver places nothing there before they are gone. */
typedef struct hv_fl_use_s {
    size_t job, node;
    uint32_t workers, leaving;
} hv_fl_use_t;

#define HV_FL_INTERVAL_MS 3000u /* resize_interval_ms's default */
#define HV_FL_RESET_MS 50u      /* reset_ms's default: docs/PERFORMANCE.md's 40-60 ms */
#define HV_FL_STARVE_MS 60000u
#define HV_FL_AGE_MS 600000u
#define HV_FL_PAYBACK_MIN_MS 1000u /* a growth pays for its reset within at least this long */

typedef struct hv_fl_settings_s {
    uint32_t resize_interval_ms; /* a running job is resized at most this often */
    uint32_t reset_ms;           /* what a resize costs the job (its measured reset) */
    uint32_t starve_ms;          /* a job waiting longer blocks admissions behind it */
    uint32_t age_ms;             /* waiting this long raises a job's priority by one (0: never) */
    uint32_t keep_pct;           /* hysteresis: a worker held counts this much more (percent) */
    uint32_t min_gain_pm;        /* the least gain worth a worker (per mille of one worker) */
} hv_fl_settings_t;

void hv_fl_settings_default(hv_fl_settings_t *s);

typedef struct hv_fl_in_s {
    uint64_t now_ms; /* wall */
    const hv_fl_settings_t *set;
    const hv_fl_ns_t *ns;
    size_t nns; /* >= 1 */
    const hv_fl_job_t *jobs;
    size_t njobs;
    const hv_fl_node_t *nodes;
    size_t nnodes;
    const hv_fl_use_t *use;
    size_t nuse;
} hv_fl_in_t;

typedef enum hv_fl_reason {
    HV_FL_KEPT = 0,            /* running at the size it has: nothing to change */
    HV_FL_ADMITTED = 1,        /* starts (or resumes) with target workers */
    HV_FL_GROWN = 2,           /* free capacity: its goodput rises most with more */
    HV_FL_SHRUNK_ADMIT = 3,    /* gives workers so that job `cause` can start */
    HV_FL_SHRUNK_PRIORITY = 4, /* gives workers to job `cause`, of a higher priority */
    HV_FL_SHRUNK_RECLAIM = 5,  /* returns borrowed capacity to job `cause`'s namespace */
    HV_FL_SHRUNK_SHARE = 6,    /* its workers serve job `cause` better (fair share, goodput) */
    HV_FL_PREEMPTED = 7,       /* stopped for job `cause`: resumes later from its state copy */
    HV_FL_WAIT_QUOTA = 8,      /* its namespace's quota and borrowing limit are used up */
    HV_FL_WAIT_CAPACITY = 9,   /* the capacity it needs is held by jobs before it */
    HV_FL_WAIT_FIT = 10,       /* enough in total, but no set of nodes holds its gang */
    HV_FL_WAIT_BEHIND = 11,    /* job `cause` has waited too long: it goes first */
    HV_FL_HELD_INTERVAL = 12,  /* resized less than the resize interval ago */
    HV_FL_HELD_COST = 13,      /* growing would not pay for its reset */
    HV_FL_BUSY = 14,           /* cannot be resized now (starting, re-forming, finishing) */
    HV_FL_MOVED = 15,          /* keeps its size, but workers change nodes so job `cause` fits */
    HV_FL__COUNT
} hv_fl_reason_t;

/* Stable words for the store, the wire and hvctl ("admitted", "shrunk_admit", ...). */
const char *hv_fl_reason_name(hv_fl_reason_t r);

typedef struct hv_fl_dec_s {
    uint64_t job_id;
    uint32_t target; /* workers it should have now; 0: waits (or stops, PREEMPTED) */
    hv_fl_reason_t reason;
    uint64_t cause;    /* the job the reason names (0: none) */
    uint32_t borrowed; /* of target, workers granted beyond its namespace's quota */
} hv_fl_dec_t;

/* Add (delta > 0) or remove (delta < 0) workers of a job on a node. */
typedef struct hv_fl_move_s {
    uint64_t job_id, node_id;
    int32_t delta;
} hv_fl_move_t;

/* A namespace as the decision leaves it. */
typedef struct hv_fl_share_s {
    hv_fl_res_t used;     /* its targets' workers and its actors */
    hv_fl_res_t borrowed; /* of used, beyond its quota */
    uint32_t share_pm;    /* its dominant share of the cluster, per mille, divided by weight */
    uint32_t waiting;     /* its jobs that wait */
} hv_fl_share_t;

typedef struct hv_fl_out_s {
    hv_fl_dec_t *dec; /* one per job, in the input's order */
    size_t ndec;
    hv_fl_share_t *share; /* one per namespace */
    size_t nshare;
    hv_fl_move_t *moves;
    size_t nmoves;
    uint64_t recheck_ms; /* decide again by then at the latest (a hold ends, a wait starves); 0 */
} hv_fl_out_t;

/* Decides. *out is filled (owned: hv_fl_out_fini) on HV_OK. HV_EINVAL with err (the field and
 * value) for an input out of range (a namespace or node index, bounds with min > np or np >
 * max), HV_ENOMEM. */
hv_err hv_fl_decide(const hv_fl_in_t *in, hv_fl_out_t *out, char *err, size_t errlen);
void hv_fl_out_fini(hv_fl_out_t *out);

#endif
