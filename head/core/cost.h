/*
 * cost: what the cluster and each job cost (hvctl cost, hvsubmit's last line). Pure: the caller
 * hands in the configured node types with their prices, the autoscaler's instances (when each
 * ran, whether a preemption ended it) and, for a job, when each of its workers ran on which
 * node; times are wall-clock ms and `now` is passed in.
 *
 *   cluster: an instance costs from its launch until it ended (or now), at its type's price;
 *   job:     a worker occupies 1/slots of its node's instance while it runs, so a job pays for
 *            the slots it used; workers on nodes that joined by hand (no instance) are counted
 *            under the type "manual" at no price.
 * On-demand equivalent: the same seconds at each type's on-demand price; unknown (and said so)
 * when a preemptible type has none configured. Preemptions: preempted instances (cluster), or
 * preempted instances that ran a worker of the job and ended while the job went on (survived).
 */
#ifndef HV_HEAD_COST_H
#define HV_HEAD_COST_H

#include <stddef.h>
#include <stdint.h>

#define HV_COST_MAX_TYPES 64
#define HV_COST_MANUAL "manual" /* nodes that joined by hand */

typedef struct hv_cost_type_s {
    const char *name;
    uint32_t slots;
    double price_per_hour;    /* what a node costs */
    double ondemand_per_hour; /* the same node on demand; 0 = unknown */
} hv_cost_type_t;

typedef struct hv_cost_instance_s {
    const char *type;  /* a name among the types (unknown names cost nothing) */
    const char *node;  /* the node name its agent joined with */
    uint64_t start_ms; /* launched */
    uint64_t end_ms;   /* ended; 0 = still running */
    int preempted;     /* a preemption ended it */
} hv_cost_instance_t;

typedef struct hv_cost_worker_s {
    const char *node;          /* where it ran */
    uint32_t node_slots;       /* that node's slots (for nodes joined by hand) */
    uint64_t start_ms, end_ms; /* end 0 = still running; start 0 = never started */
} hv_cost_worker_t;

typedef struct hv_cost_line_s {
    char type[48];
    double instance_s;     /* instance-seconds */
    double cost, ondemand; /* at the type's price; at its on-demand price */
    int ondemand_known;
    uint32_t instances; /* instances of the type counted */
    uint32_t preemptions;
} hv_cost_line_t;

typedef struct hv_cost_report_s {
    hv_cost_line_t lines[HV_COST_MAX_TYPES + 1]; /* by type, in the types' order, manual last */
    size_t n;
    double instance_s, cost, ondemand;
    int ondemand_known; /* every line's on-demand price is known */
    uint32_t preemptions;
} hv_cost_report_t;

/* The cluster's cost over all instances. */
void hv_cost_cluster(const hv_cost_type_t *types, size_t ntypes, const hv_cost_instance_t *insts,
                     size_t ninsts, uint64_t now_ms, hv_cost_report_t *out);

/* A job's cost: its workers' slot time on the instances their nodes ran on. job_end_ms 0 = the
 * job still runs (preemptions up to now count as survived). */
void hv_cost_job(const hv_cost_type_t *types, size_t ntypes, const hv_cost_instance_t *insts,
                 size_t ninsts, const hv_cost_worker_t *workers, size_t nworkers,
                 uint64_t job_end_ms, uint64_t now_ms, hv_cost_report_t *out);

#endif
