/*
 * fleet_int: the fleet policy's scratch, shared by fleet.c (the allocation over totals) and
 * fleet_nodes.c (placing it on the nodes), which sees only this and fleet_types.h: the arrows
 * run fleet.c -> fleet_nodes.c. Not for other modules.
 */
#ifndef HV_HEAD_FLEET_INT_H
#define HV_HEAD_FLEET_INT_H

#include "err.h"
#include "fleet_types.h"

/* One job during a decision. */
typedef struct hv__fl_job_s {
    const hv_fl_job_t *j;
    hv_fl_res_t d;   /* each worker's need (slots >= 1) */
    uint32_t floor;  /* what it needs to run at all: its admission, as a gang */
    uint32_t keep;   /* what it keeps before anyone grows (a hold: its size) */
    uint32_t cap;    /* the most it may have in this decision */
    int hard;        /* its floor is not up for decision (FROZEN, not preemptible) */
    int held;        /* by the resize interval */
    int starving;    /* waiting longer than starve_ms */
    int64_t prio;    /* effective priority (aging) */
    uint32_t fitcap; /* the most the nodes could take of it (UINT32_MAX: no bound) */
    int nofit;       /* its gang found no nodes: it waits */
    /* one allocation */
    uint32_t alloc;     /* its target */
    uint32_t borrowed;  /* of alloc, granted in tier 2 */
    int granted;        /* its floor was granted */
    uint32_t seq;       /* the order floors were granted in */
    int tried;          /* looked at in this floor pass */
    int cost_held;      /* a growth was refused: it would not pay for its reset */
    hv_fl_reason_t why; /* a waiting job's reason, a running one's preemption */
    size_t cause;       /* the job the reason names, as its index + 1 (0: none) */
} hv__fl_job_t;

/* Workers of a job a shrink freed on a node, not yet taken by another job. */
typedef struct hv__fl_rel_s {
    size_t node, job;
    uint32_t n;
} hv__fl_rel_t;

typedef struct hv__fl_ws_s {
    const hv_fl_in_t *in;
    hv_fl_settings_t set;
    hv__fl_job_t *jobs;
    hv_fl_res_t total; /* every schedulable node's capacity: the shares' denominator */
    hv_fl_res_t avail; /* what is left to grant in this allocation */
    hv_fl_res_t low;   /* of it, granted to floors that stay out of the reserve (rule 8) */
    hv_fl_res_t *used; /* per namespace */
    uint32_t seq;
    size_t last_admit; /* the newest admission granted, index + 1 (a preemption's cause) */
    int64_t *blk_prio; /* per namespace: admissions at this priority or lower wait ... */
    size_t *blk_by;    /* ... behind this starving job (index + 1; 0: none) */
    int64_t pri_prio;  /* admissions of a lower priority that cannot be taken back wait ... */
    size_t pri_by;     /* ... behind this waiting job (index + 1; 0: none) */
    uint32_t *leaving; /* per job: workers leaving with its change in progress */
    int *closed;       /* per namespace: tier 1 is over for it in this floor pass */
    int *over;         /* per namespace: it used more than its quota before this decision */
    /* the nodes (fleet_nodes.c) */
    uint32_t *mine;    /* [job * nnodes + node]: the job's workers there now */
    uint32_t *cur;     /* the same after this decision's moves */
    hv_fl_res_t *free; /* each node's room as the moves go */
    uint32_t *spare;   /* each node's free slots before any release, not yet taken */
    size_t *order;     /* scratch: jobs in placing order */
    hv__fl_rel_t *rel; /* the releases, to trace who took them */
    size_t nrel, caprel;
    uint32_t *took; /* scratch: one placement's workers per node */
} hv__fl_ws_t;

static inline uint64_t hv__fl_sat_add(uint64_t a, uint64_t b) {
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}
static inline uint64_t hv__fl_sat_sub(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

/* Each worker's need times n, saturating. */
static inline hv_fl_res_t hv__fl_times(const hv_fl_res_t *d, uint32_t n) {
    hv_fl_res_t o;
    for (int r = 0; r < HV_FL_NRES; r++) {
        o.r[r] = n != 0 && d->r[r] > UINT64_MAX / n ? UINT64_MAX : d->r[r] * n;
    }
    return o;
}
/* The nodes' scratch (from in->use), and its end. HV_EINVAL (err) or HV_ENOMEM. */
hv_err hv__fl_nodes_init(hv__fl_ws_t *ws, char *err, size_t errlen);
void hv__fl_nodes_fini(hv__fl_ws_t *ws);
/* Places the allocation on the nodes: 1 when every admitted gang and every growth found room;
 * else 0, with the jobs that did not marked (nofit, fitcap) for the next allocation. With last,
 * what did not fit is cut from the targets instead (a gang that found no room waits). */
int hv__fl_place(hv__fl_ws_t *ws, int last);
/* The moves that the last placement makes (out->moves, owned). */
hv_err hv__fl_moves(const hv__fl_ws_t *ws, hv_fl_out_t *out);

#endif
