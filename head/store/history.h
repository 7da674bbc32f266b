/*
 * history: the retention of finished jobs (docs/operations.md "History"). A finished job stays
 * queryable (hvctl jobs/job/events/logs, the status page, hvctl cost --job) with its workers,
 * its events (rounds, node losses seen by it) and its log file, whether or not its nodes still
 * exist, until it falls out of the retention: it ended more than history.max_age_days ago, or it
 * is not among the newest history.max_jobs finished jobs (0 = no limit of that kind; both 0, the
 * default, keep everything). The head prunes at start and every history.prune_interval_s: the
 * rows of a batch of jobs in one transaction (hv_store_history_delete), then their log files,
 * then one event "history.prune" (job 0) that says how many went and why. Active jobs and jobs
 * the driver still holds are never pruned. Not pruned here: node events (job 0), the autoscaler's
 * instances (the cost report) and the audit trail (its own bound).
 *
 * Artifacts (uploaded programs and files, <data>/artifacts/<digest>) go once no stored job uses
 * them (the store's job_artifacts, written with each job) and they were neither uploaded nor
 * used for artifact_grace_s: the grace covers hvsubmit's StatArtifact/Upload before its Submit
 * (an upload just finished, or an artifact StatArtifact found, is not referenced by any job
 * until the Submit is stored; StatArtifact marks it used). The rows go in one transaction, then
 * the files. This runs at every prune, whatever the jobs' retention (an artifact no job uses is
 * not history), and never while the references of an older database are not filled in.
 * Called by hvhead's main on the loop thread; blocking sqlite and unlink(2).
 */
#ifndef HV_HEAD_HISTORY_H
#define HV_HEAD_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "store.h"

#define HV_HISTORY_BATCH 500        /* jobs deleted per transaction */
#define HV_HISTORY_START_BATCHES 20 /* per prune at start; the periodic one does 1 (the loop) */

#define HV_HISTORY_ARTIFACT_GRACE_S 3600 /* artifact_grace_s when 0 */

/* The retention: 0 = no limit of that kind. */
typedef struct hv_history_policy_s {
    uint32_t max_age_days;
    uint32_t max_jobs;
    uint32_t artifact_grace_s; /* an unused artifact is kept this long after its upload or last
                                  use (0: HV_HISTORY_ARTIFACT_GRACE_S) */
} hv_history_policy_t;

/* 1 when the driver still holds job_id (it is not pruned then, whatever its stored state). */
typedef int (*hv_history_held_fn)(void *ud, uint64_t job_id);

/* The end time before which a finished job is too old at now_ms; 0 when there is no age limit
 * (or the limit reaches before the epoch). Pure. */
uint64_t hv_history_cutoff_ms(const hv_history_policy_t *p, uint64_t now_ms);

/* The log file of job_id under data_dir for the store's epoch (as head/store/joblog.h names it:
 * <data_dir>/logs/<epoch>-<job>.log, <job>.log for the legacy epoch ""). Pure. */
void hv_history_log_path(const char *data_dir, const char *epoch, uint64_t job_id, char *buf,
                         size_t len);

/* Prunes the finished jobs beyond p at now_ms (wall clock): at most batches batches of
 * HV_HISTORY_BATCH jobs, each one transaction (the rest waits for the next prune: the head's loop
 * is not held long); then at most batches batches of HV_HISTORY_BATCH unused artifacts (rows,
 * then files). *pruned (optional): jobs deleted. held may be NULL. Errors: the store's
 * (its hv_store_last_error says why); what was committed before stays pruned. */
hv_err hv_history_prune(hv_store_t *s, const char *data_dir, const hv_history_policy_t *p,
                        uint64_t now_ms, int batches, hv_history_held_fn held, void *ud,
                        size_t *pruned);

#endif
