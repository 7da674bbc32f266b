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
 *     passing it (other waiting jobs that fit may pass one that does not: backfill, but not a
 *     job of a lower priority that could not be taken back at once, not preemptible: it waits
 *     behind a higher-priority job that does not fit the capacity, WAIT_BEHIND naming it, so
 *     that what frees goes to the higher priority instead of to floors it cannot reclaim). Since
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
 *  8. A reserve for high priority (reserve_pct, 0 by default: none): the floors of jobs below
 *     reserve_prio that could not be taken back at once (not preemptible: a fixed job's -np, an
 *     elastic one's --min-np) take at most 100 - reserve_pct percent of each resource; the rest
 *     is left to growth, preemptible jobs and jobs of reserve_prio or higher (a job aged to it
 *     included), so that a high-priority job finds room by a shrink at the next commit or a stop.
 *     A floor kept out by it waits (WAIT_CAPACITY). It trades the low-priority jobs' wait for the
 *     high-priority ones' (docs/PERFORMANCE.md, "Fleet").
 * Every worker a shrink frees is traced to the job that takes it: that is the reason's cause.
 */
#ifndef HV_HEAD_FLEET_H
#define HV_HEAD_FLEET_H

#include "err.h"
#include "fleet_types.h"

void hv_fl_settings_default(hv_fl_settings_t *s);

/* Stable words for the store, the wire and hvctl ("admitted", "shrunk_admit", ...). */
const char *hv_fl_reason_name(hv_fl_reason_t r);

/* Decides. *out is filled (owned: hv_fl_out_fini) on HV_OK. HV_EINVAL with err (the field and
 * value) for an input out of range (a namespace or node index, bounds with min > np or np >
 * max), HV_ENOMEM. */
hv_err hv_fl_decide(const hv_fl_in_t *in, hv_fl_out_t *out, char *err, size_t errlen);
void hv_fl_out_fini(hv_fl_out_t *out);

#endif
