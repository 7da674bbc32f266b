/*
 * jobfig: a job's totals of its workers' own figures (allreduce bytes and time, commits and
 * their time), summed from the reports libhv sends on the rendezvous connection
 * (Rendezvous/Report: what grew since the worker's last report). The driver keeps one per job
 * in memory; /metrics exports them per job (hv_job_*_total, docs/metrics.md). Never per worker
 * or per rank: a worker's report only adds to its job's totals.
 *
 * Pure: no I/O, no clock. It decides whether a report is believable (each field within what a
 * worker can do between two reports) and adds it without wrapping. Unit-tested in
 * jobfig_test.c.
 */
#ifndef HV_HEAD_JOBFIG_H
#define HV_HEAD_JOBFIG_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef struct hv_jobfig_s {
    uint64_t allreduce_bytes; /* bytes of the tensors the workers allreduced (each its own) */
    uint64_t allreduce_us;    /* microseconds they spent running them, summed over workers */
    uint64_t allreduces;      /* tensors allreduced, summed over workers */
    uint64_t commits;         /* elastic state commits, summed over workers */
    uint64_t commit_us;       /* microseconds those commits took, summed over workers */
    uint64_t steps;           /* steps (intervals between two commits of one round), summed */
    uint64_t step_us;         /* microseconds those steps took, summed over workers */
    uint32_t step_size;       /* a report's: the world size its steps ran at (0 with no steps);
                                 a total's: the last reported */
    uint64_t reports;         /* reports added (0: the job never reported; nothing exported) */
} hv_jobfig_t;

/* Bounds of one report (a worker reports every 10 s; after a head outage it sends what grew
 * meanwhile, so the bounds are far above a report's usual size and only stop garbage). */
#define HV_JOBFIG_MAX_BYTES ((uint64_t)1 << 50) /* 1 PiB */
#define HV_JOBFIG_MAX_US ((uint64_t)1 << 40)    /* 12.7 days of time */
#define HV_JOBFIG_MAX_COUNT ((uint64_t)1 << 40)
#define HV_JOBFIG_MAX_SIZE 65536u /* a world size (tput.h's HV_TPUT_MAX_SIZE) */

/* HV_OK when every field of a report (d->reports is ignored) is within the bounds above, steps
 * come with a step_size of 1..HV_JOBFIG_MAX_SIZE (and a step_size only with steps), and the
 * report is not empty; HV_EINVAL otherwise, with the first field out of bounds named in err. */
hv_err hv_jobfig_check(const hv_jobfig_t *d, char *err, size_t errlen);

/* Adds a checked report to total (each field saturates at UINT64_MAX) and counts it. */
void hv_jobfig_add(hv_jobfig_t *total, const hv_jobfig_t *d);

#endif
