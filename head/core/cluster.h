/*
 * cluster: the head's pure decisions across jobs and nodes, beside the job machine (jobm.h, one
 * job) and the placement function (sched.h, where ranks go): the queue (which pending job
 * starts, how many workers an elastic job grows by), what the autoscaler is asked for, whether a
 * submitted job can ever run here and with which settings, and how long a preemption notice
 * lets a node's members stay. No I/O, no clock (the time comes in), no allocation. The head's driver
 * (head/driver/driver.c) builds the inputs from its tables, asks, then stores and carries out
 * what comes back. Reentrant.
 */
#ifndef HV_HEAD_CLUSTER_H
#define HV_HEAD_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* ---- preemption notices ---------------------------------------------------------------------- */

#define HV_CL_DRAIN_MARGIN_MIN_MS 2000u /* the least margin members leave before the node goes */
#define HV_CL_DRAIN_HOLD_MIN_MS 1000u   /* the least stay worth holding members for */

/* A node drains with a notice of notice_ms (0: unknown) at wall time now_ms: until when an
 * elastic job's members there may stay while replacements take their state over (hv_jm_drain's
 * hold_until), or 0: they leave at once. They stay only when replacements can come (can_buy:
 * an autoscaler can add nodes) and the notice leaves more than the margin (a tenth of the
 * notice, at least HV_CL_DRAIN_MARGIN_MIN_MS) plus HV_CL_DRAIN_HOLD_MIN_MS; they leave the
 * margin before the node goes. */
uint64_t hv_cl_drain_hold_until(uint32_t notice_ms, int can_buy, uint64_t now_ms);

/* ---- the queue ------------------------------------------------------------------------------- */

/* One scheduling pass over the jobs in submission order: first the pending jobs, first come,
 * first served (a job that does not fit blocks the ones behind it, so a large job is not
 * starved by a stream of small ones), then the growth of running elastic jobs, only when no
 * pending job is blocked (pending jobs come before growth). Zeroed at the start of a pass. */
typedef struct hv_cl_pass_s {
    int blocked; /* a pending job did not fit (or could not be placed) in this pass */
} hv_cl_pass_t;

/* A pending job of np workers that may start with min_np (an elastic job's --min-np; a fixed
 * job's min_np is np, and 0 or more than np reads as np), with `free` slots usable by it now:
 * how many to place now, or 0 when it must wait (fewer than min_np are free, or one before it
 * was blocked; a job that waits blocks the ones behind it). A fixed job starts with all np; an
 * elastic one, as Elastic Horovod does, with as many as are free up to np once min_np are, and
 * grows later (hv_cl_grow, after the pending jobs of a pass) toward its target. */
uint32_t hv_cl_start(hv_cl_pass_t *p, uint32_t np, uint32_t min_np, uint32_t free);
/* The job hv_cl_start chose could not be placed (the store failed): those behind it wait. */
void hv_cl_start_failed(hv_cl_pass_t *p);
/* A job that wants `wants` more workers (hv_jm_wants), with `free` slots usable by it now: how
 * many to place now (0 while a pending job is blocked). */
uint32_t hv_cl_grow(const hv_cl_pass_t *p, uint32_t wants, uint32_t free);

/* A job with a host limit (slots_per_host > 0) that has `mine` live workers on a node with
 * `total` slots of which `used` are taken: the node's used slots as the job must see them (the
 * free slots are what the limit leaves, when that is fewer). */
uint32_t hv_cl_used_for_job(uint32_t total, uint32_t used, uint32_t per_host, uint32_t mine);

/* A job submitted at wall submitted_ms that may wait timeout_s for slots: its deadline on the
 * monotonic clock, from now (monotonic) and wall (the wall clock now; after a head restart the
 * time already waited counts). */
uint64_t hv_cl_wait_deadline(uint64_t now, uint64_t wall, uint64_t submitted_ms,
                             uint32_t timeout_s);

/* ---- the tick's timers ---------------------------------------------------------------------- */

#define HV_CL_ENDED_KEEP_MS 600000u /* an ended job stays in memory this long for watchers */

/* 1 when a pending job's wait for slots is over at monotonic now (its deadline passed): it
 * fails, saying how many slots it waited for. */
int hv_cl_wait_over(int pending, uint64_t now, uint64_t wait_deadline);
/* 1 when an ended job may leave memory (the store keeps it): no worker of it is alive (not
 * ending), nothing of it waits for the store (settled), and it ended (wall ended_ms) more than
 * HV_CL_ENDED_KEEP_MS before wall time now. */
int hv_cl_forget(int ended, int ending, int settled, uint64_t now, uint64_t ended_ms);

/* ---- demand (the autoscaler) ---------------------------------------------------------------- */

/* An active job as the demand sees it, in scheduling order. */
typedef struct hv_cl_job_s {
    uint64_t id;
    int pending;     /* not started yet */
    int elastic;     /* its size may change */
    uint32_t np;     /* the workers it starts with */
    uint32_t target; /* elastic: the size it aims for (hv_jm_target) */
    uint32_t wants;  /* started: the workers it could use more now (hv_jm_wants) */
    /* The fleet policy's plan for it (its last decision), when planned: */
    int planned;      /* the policy decided about it (the fields below are read) */
    uint32_t plan;    /* the workers the plan gives it now (0: it waits) */
    int quota_bound;  /* it waits for its namespace's quota (WAIT_QUOTA): a node bought would
                          not start it, so it asks for none */
    int32_t priority; /* the demand goes by priority (higher first) */
    uint32_t size;    /* started: its live workers now */
} hv_cl_job_t;

/* Workers one job wants that the free slots cannot give it now. */
typedef struct hv_cl_demand_s {
    uint64_t job_id;
    uint32_t workers;
    int pending; /* the job has not started: it waits for these to start */
} hv_cl_demand_t;

/* The demand the autoscaler buys for: the plan's (docs/scheduling.md, "Autoscaling").
 * What each job wants beyond what it has or the plan gives it:
 *   - a waiting job (planned: with plan 0; else pending): its floor (np) to start and, when elastic,
 *     the growth up to its target; none while it waits for its namespace's quota;
 *   - a started job the policy planned: elastic, target - plan (what the policy would give it
 *     with more capacity: the growth it was not given, the workers it gives another job), none
 *     when it wants nothing (finishing) and keeps its size; fixed-size: none;
 *   - a started job not planned (the policy could not decide): what it wants (hv_jm_wants).
 * The free slots the plan leaves (pool) go first, floors of every job before anyone's growth,
 * each by priority (higher first, then the input's order). One entry per job (floor and growth
 * added up; pending: it waits to start), in that order; fills out (up to cap), returns the
 * count. */
size_t hv_cl_demand(const hv_cl_job_t *jobs, size_t n, uint32_t pool, hv_cl_demand_t *out,
                    size_t cap);

/* ---- submission ------------------------------------------------------------------------------ */

/* What a user asked for (0: not given, as hvsubmit sends it). */
typedef struct hv_cl_ask_s {
    uint32_t np; /* 0: every free slot (at least 1) */
    int elastic;
    uint32_t min_np, max_np, target_np;
    uint32_t max_resets;
    int max_resets_set;
    uint32_t timeout_s, slots_per_host, check_every, elastic_timeout_s;
    int cooldown_set;
    uint32_t cooldown_min_s, cooldown_max_s;
} hv_cl_ask_t;

/* The cluster a submission meets, for the job's slots_per_host. */
typedef struct hv_cl_room_s {
    uint32_t capacity; /* slots of the nodes there now, empty */
    uint32_t free;     /* slots free now */
    int autoscaler;    /* an autoscaler can add nodes */
    uint32_t more;     /* slots it can still add */
} hv_cl_room_t;

/* The head's defaults (cluster.yaml). */
typedef struct hv_cl_defaults_s {
    uint32_t max_resets, wait_timeout_s, check_every, elastic_timeout_s;
    uint32_t cooldown_min_s, cooldown_max_s, max_strikes;
} hv_cl_defaults_t;

/* The settings a job is stored with. */
typedef struct hv_cl_settings_s {
    int elastic;                    /* given -elastic, --min-np or --max-np */
    uint32_t np, min_np, max_np;    /* a fixed-size job: all np */
    uint32_t target_np, max_resets; /* a fixed-size job: 0 */
    uint32_t timeout_s;             /* how long it may wait for slots */
    uint32_t check_every, elastic_timeout_s;
    uint32_t cooldown_min_s, cooldown_max_s, max_strikes;
} hv_cl_settings_t;

/* Whether a job asked for as `a` can ever run on the cluster `r` (the slots an autoscaler can
 * add count: the job waits for them), and its settings. HV_ESTATE when no node has joined and
 * none can be added, HV_EINVAL when the size can never fit (-np; an elastic job's --min-np,
 * since it starts with that many and grows) or the bounds are wrong; err (the
 * user's words) says why; *out is written only on HV_OK. */
hv_err hv_cl_submit(const hv_cl_ask_t *a, const hv_cl_room_t *r, const hv_cl_defaults_t *def,
                    hv_cl_settings_t *out, char *err, size_t errlen);

#endif
