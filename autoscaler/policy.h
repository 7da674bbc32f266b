/*
 * policy: the autoscaler's decisions, as pure code. Given the node types in their fallback order,
 * the instances the autoscaler owns, the demand the head cannot place, each type's launch record
 * and the time, hv_as_decide says what to launch and what to terminate, each with a reason that
 * the head stores as an event. No I/O, no clock, no allocation: the caller (the head) passes the
 * time, owns every array, stores the type records and carries the actions out through a provider.
 *
 * The rules, in the order they are applied on each call:
 *  1. A type set aside after launch failures comes back when its set-aside ends (TYPE_BACK).
 *  2. An instance still launching after the launch timeout is terminated and counts as a launch
 *     failure of its type; max_launch_failures failures in a row set the type aside for
 *     set_aside_s (TYPE_ASIDE). A failure the provider reports at once goes through
 *     hv_as_launch_failed with the same rule; a joined instance clears the count (hv_as_joined).
 *     A running instance whose node the head has lost (its lease ran out) for launch_timeout_s
 *     is terminated too: the machine may still exist and cost money, but its agent is gone.
 *  3. Each type is kept at its min_nodes (when it is not set aside), then the cluster at its
 *     min_nodes with the first usable type in fallback order.
 *  4. Demand: workers that no node can take now (pending workers of jobs, up to each elastic
 *     job's max-np, and explicit resize requests) are first given to the capacity already on its
 *     way (instances launching); for the rest, nodes are launched of the first type in fallback
 *     order that is not set aside, is below its max_nodes and fits the workers (slots, GPUs,
 *     and for an actor's demand its memory and node labels).
 *     When none can, an UNMET action says why (the caller logs it once per change).
 *  5. Launches stop at max_nodes (all types) and at max(5, ceil(upscaling_speed x running))
 *     instances launching at once (Ray's rule, so its users' settings mean the same here).
 *  6. A running instance with no worker, idle for idle_timeout_s, is terminated when its type
 *     keeps min_nodes and the cluster keeps min_nodes without it, and no workers wait (demand
 *     is what the free slots cannot take: with workers waiting an idle node is about to be
 *     used, or the demand is unmet and giving the node back would only buy it again).
 *     An instance that runs workers is never terminated (it is drained first by the caller);
 *     draining and terminating instances are left to the provider.
 *  7. Hand-back (handback on): an on-demand (not preemptible) instance that runs workers, above
 *     its type's min_nodes, is given back for a node of a cheaper preemptible type earlier in
 *     the fallback order that offers at least as much (slots, GPUs, memory, labels), once that
 *     type is usable again (not set aside: its capacity may have returned) and no workers wait.
 *     Make before break: a node of the cheaper type is launched first (beyond max_nodes by the
 *     instances being handed back: the surplus lasts until the drain); when it has joined and
 *     is idle, the on-demand instance is drained (DRAIN: its jobs move their workers off it, as
 *     on a notice), and once its workers are gone (the caller marks it handback) it is
 *     terminated. A launch refused for want of capacity counts as a launch failure (rule 2),
 *     so a type without capacity is set aside and probed again after set_aside_s.
 *  8. Spare (spare_per_hour > 0): while a preemptible type's measured preemption rate
 *     (hv_as_preempted: an exponentially decayed count over spare_window_s) is at least
 *     spare_per_hour, spare_nodes idle nodes of it are kept (launched within max_nodes, and
 *     not given back by rule 6), so that a preempted worker's replacement has a node at once
 *     instead of a boot. The spare costs what any instance costs (the cost report counts it).
 *  9. Delayed fallback (fallback_delay_s > 0): a job that runs (a demand with running set: its
 *     growth, or replacements for its lost or noticed workers) is not given nodes of a type
 *     dearer than an earlier preemptible type in fallback order while that type has been short
 *     of capacity (its launches refused: hv_as_type_state_t.short_since_ms, cleared when one of
 *     its nodes joins) for less than fallback_delay_s: the job goes on smaller on the cheap nodes
 *     it has, and a short dip costs no dear node bought for the rest of its boot and hand-back.
 *     A job that does not run (waiting to start, or with no worker left) falls back at once.
 */
#ifndef HV_AUTOSCALER_POLICY_H
#define HV_AUTOSCALER_POLICY_H

#include <stddef.h>
#include <stdint.h>

#define HV_AS_REASON 200 /* bytes of an action's reason, NUL included */

/* A node type, as configured. */
typedef struct hv_as_type_s {
    const char *name;      /* borrowed */
    uint32_t slots;        /* worker slots per node, >= 1 */
    uint32_t gpus;         /* GPUs per node */
    int preemptible;       /* a spot / preemptible type */
    double price_per_hour; /* what one node costs per hour */
    uint32_t min_nodes;    /* kept even when idle */
    uint32_t max_nodes;    /* at most this many of the type (>= min_nodes) */
    const char *labels;    /* "k=v,k=v": the labels its nodes join with (NULL or "": none) */
    uint64_t memory_mb;    /* memory its nodes offer, MiB (0: unknown, meets no memory demand) */
} hv_as_type_t;

typedef struct hv_as_config_s {
    const hv_as_type_t *types; /* in fallback order (borrowed) */
    size_t ntypes;
    uint32_t min_nodes;           /* all types together */
    uint32_t max_nodes;           /* all types together */
    double upscaling_speed;       /* see rule 5; > 0 */
    uint32_t idle_timeout_s;      /* rule 6 */
    uint32_t launch_timeout_s;    /* rule 2 */
    uint32_t max_launch_failures; /* failures in a row that set a type aside; >= 1 */
    uint32_t set_aside_s;         /* for how long */
    int handback;                 /* rule 7: on-demand handed back when spot is usable again */
    double spare_per_hour;        /* rule 8: preemptions per hour that call for a spare; 0: off */
    uint32_t spare_nodes;         /* rule 8: idle spare nodes kept (0 is taken as 1) */
    uint32_t spare_window_s;      /* rule 8: the rate's time constant (0 is taken as 3600) */
    uint32_t fallback_delay_s;    /* rule 9: a running job's dearer fallback waits this long */
} hv_as_config_t;

/* A type's launch record (the caller stores it; zeroed = clean). */
typedef struct hv_as_type_state_s {
    uint32_t failures;       /* launch failures in a row */
    uint64_t aside_until_ms; /* 0: usable; else set aside until then */
    double preempt_score;    /* rule 8: preemptions, decayed to preempt_at_ms */
    uint64_t preempt_at_ms;  /* when preempt_score was last updated */
    uint64_t short_since_ms; /* rule 9: its first refused launch since one of its nodes last
                              * joined (0: not short) */
} hv_as_type_state_t;

typedef enum hv_as_inst_state_e {
    HV_AS_LAUNCHING = 0, /* asked of the provider, not joined yet */
    HV_AS_RUNNING,       /* joined the head */
    HV_AS_DRAINING,      /* a preemption notice or a drain: leaving */
    HV_AS_TERMINATING,   /* terminate asked of the provider */
} hv_as_inst_state;

/* An instance the autoscaler owns. */
typedef struct hv_as_instance_s {
    uint64_t id;
    size_t type; /* index into config types */
    hv_as_inst_state state;
    uint64_t launched_ms;   /* when the launch was asked */
    uint64_t idle_since_ms; /* RUNNING with no worker: since when; else ignored */
    uint64_t lost_since_ms; /* RUNNING whose node the head lost (dead lease): since when;
                             * 0 = its node is there */
    uint32_t workers;       /* workers running on it now */
    int handback;           /* DRAINING for a hand-back (rule 7): terminated once empty */
} hv_as_instance_t;

/* Workers that no node can take now, of one shape. */
typedef struct hv_as_demand_s {
    uint32_t workers;          /* how many */
    uint32_t slots_per_worker; /* >= 1 */
    uint32_t gpus_per_worker;
    const char *what;   /* for reasons: "job 3 (grow to 8)"; borrowed, may be NULL */
    uint64_t memory_mb; /* per worker (an actor's demand); 0: none */
    const char *labels; /* "k=v,k=v" a node must carry (an actor's); NULL or "": none */
    int running;        /* rule 9: the job runs (at least one live worker) */
} hv_as_demand_t;

typedef enum hv_as_action_kind_e {
    HV_AS_LAUNCH = 0, /* launch one node of type */
    HV_AS_TERMINATE,  /* terminate instance (launch_failure: it never joined) */
    HV_AS_TYPE_ASIDE, /* type set aside until until_ms */
    HV_AS_TYPE_BACK,  /* type usable again */
    HV_AS_UNMET,      /* demand no type can serve now (reason says why) */
    HV_AS_DRAIN,      /* drain instance (its workers move off it), then give it back (rule 7) */
} hv_as_action_kind;

typedef struct hv_as_action_s {
    hv_as_action_kind kind;
    size_t type;
    uint64_t instance;  /* TERMINATE, DRAIN */
    int launch_failure; /* TERMINATE: the instance did not join in time */
    uint64_t until_ms;  /* TYPE_ASIDE */
    size_t demand;      /* UNMET: the index in d[] of the demand left unmet (the reason's words
                         * are for people only) */
    char reason[HV_AS_REASON];
} hv_as_action_t;

/* Checks a configuration; on failure writes what is wrong to err and returns 0. */
int hv_as_config_valid(const hv_as_config_t *c, char *err, size_t errlen);

/* Decides at now_ms. ts has c->ntypes records and is updated (rules 1 and 2). Writes at most cap
 * actions to out and returns how many it wrote; when cap is too small the rest is decided on the
 * next call (launches are counted, so nothing is launched twice). */
size_t hv_as_decide(const hv_as_config_t *c, hv_as_type_state_t *ts, const hv_as_instance_t *inst,
                    size_t ninst, const hv_as_demand_t *d, size_t nd, uint64_t now_ms,
                    hv_as_action_t *out, size_t cap);

/* A launch of type failed at once (the provider said no). Returns 1 and fills *aside (optional)
 * with a TYPE_ASIDE action when this failure set the type aside, else 0. */
int hv_as_launch_failed(const hv_as_config_t *c, hv_as_type_state_t *ts, size_t type,
                        uint64_t now_ms, const char *why, hv_as_action_t *aside);

/* An instance of type joined: its type's failure count starts over. */
void hv_as_joined(hv_as_type_state_t *ts, size_t type);

/* A node of (preemptible) type was preempted, or noticed, at now_ms: counted in its rate. */
void hv_as_preempted(const hv_as_config_t *c, hv_as_type_state_t *ts, size_t type, uint64_t now_ms);

/* The type's measured preemption rate at now_ms, per hour (rule 8). */
double hv_as_preempt_rate(const hv_as_config_t *c, const hv_as_type_state_t *ts, size_t type,
                          uint64_t now_ms);

/* Workers of one shape that a node of type t holds (0 when they do not fit). */
uint32_t hv_as_fit(const hv_as_type_t *t, uint32_t slots_per_worker, uint32_t gpus_per_worker);

/* Workers of demand d that a node of type t holds: hv_as_fit, further bounded by the type's
 * memory, and 0 when the type's labels lack one of d's. */
uint32_t hv_as_fit_demand(const hv_as_type_t *t, const hv_as_demand_t *d);

/* "launch", "terminate", "type-aside", "type-back", "unmet", "drain". */
const char *hv_as_action_name(hv_as_action_kind k);

#endif
