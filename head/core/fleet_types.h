/*
 * fleet_types: the fleet policy's inputs and answer as plain data (resources, namespaces, jobs,
 * nodes, settings; decisions, moves, shares), shared by the policy's two parts (fleet.c,
 * fleet_nodes.c) and its callers. The rules that read them are in fleet.h. No functions.
 */
#ifndef HV_HEAD_FLEET_TYPES_H
#define HV_HEAD_FLEET_TYPES_H

#include <stddef.h>
#include <stdint.h>

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
    uint32_t reserve_pct; /* of each resource, kept from the floors of jobs that cannot be taken
                             back at once (not preemptible, below reserve_prio): 0: none */
    int32_t reserve_prio; /* the reserve is for jobs of this priority or higher */
} hv_fl_settings_t;

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

#endif
