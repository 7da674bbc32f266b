/*
 * views: the head's state as the services read it, and nothing else. The services (svc_*,
 * metrics, the status page) see the driver's model through its const getters (driver.h:
 * hv_driver_node, hv_driver_job, ...) and the stored history through the pages below: copies
 * of the store's records (core/records.h) that the caller owns and frees with the matching
 * *_free. A view never changes anything; every change is a driver command (driver.h), stored
 * before it acts.
 *
 * Errors: the store's (store.h), with its detail in hv_view_error. Threads: the head's loop
 * thread only. Blocking: each call reads sqlite synchronously.
 */
#ifndef HV_HEAD_DRIVER_VIEWS_H
#define HV_HEAD_DRIVER_VIEWS_H

#include <stddef.h>
#include <stdint.h>

#include "driver.h"
#include "err.h"
#include "events.h"
#include "records.h"

/* The detail of the last view that failed ("" if none; borrowed until the next call). */
const char *hv_view_error(hv_driver_t *d);

/* ---- events (the event log) ------------------------------------------------------------------ */

/* Events with seq > after_seq of job_id (0 = all), ascending; limit 0 = no limit, else the
 * newest `limit` of them (still ascending). */
hv_err hv_view_events(hv_driver_t *d, uint64_t job_id, uint64_t after_seq, uint32_t limit,
                      hv_event_row_t **out, size_t *n);
/* The newest `limit` events of an actor (0 = no limit), ascending; *total (may be NULL): how
 * many it has in all. */
hv_err hv_view_actor_events(hv_driver_t *d, uint64_t actor_id, uint32_t limit, hv_event_row_t **out,
                            size_t *n, uint64_t *total);
void hv_view_events_free(hv_event_row_t *rows, size_t n);
/* How many events of `kind` (of job_id; 0 = all jobs) have data containing data_has ("" = any). */
hv_err hv_view_event_count(hv_driver_t *d, uint64_t job_id, const char *kind, const char *data_has,
                           uint64_t *n);
/* The sum of the integer field `field` of the events of `kind` (of job_id; 0 = all jobs). */
hv_err hv_view_event_sum(hv_driver_t *d, uint64_t job_id, const char *kind, const char *field,
                         uint64_t *sum);
/* The events of `kind` with a generation of at least min_gen counted by (reason code,
 * rollback): fn once per pair present. */
hv_err hv_view_event_reasons(hv_driver_t *d, const char *kind, uint32_t min_gen,
                             void (*fn)(hv_ev_reason_t reason, int rollback, uint64_t n, void *ud),
                             void *ud);

/* ---- jobs, workers and nodes as stored (those that left the driver's memory included) ------- */

/* A page of jobs newest first: ids below before_id (0 = from the newest), at most limit (0 = no
 * limit). */
hv_err hv_view_job_page(hv_driver_t *d, uint64_t before_id, uint32_t limit, hv_job_row_t **out,
                        size_t *n);
/* Jobs newest first; active_only: pending, placing, running; limit 0 = no limit. */
hv_err hv_view_jobs(hv_driver_t *d, int active_only, uint32_t limit, hv_job_row_t **out, size_t *n);
void hv_view_jobs_free(hv_job_row_t *rows, size_t n);
/* One job's record. HV_ENOTFOUND. Freed with hv_view_job_fini. */
hv_err hv_view_job(hv_driver_t *d, uint64_t job_id, hv_job_row_t *out);
void hv_view_job_fini(hv_job_row_t *row);
/* The number of stored jobs in each state: fn(state word, count, ud) once per state present. */
hv_err hv_view_job_states(hv_driver_t *d, void (*fn)(const char *state, uint64_t n, void *ud),
                          void *ud);
/* Worker attempts of job_id (0 = all jobs), by job, rank, attempt; active_only: not ended. */
hv_err hv_view_workers(hv_driver_t *d, uint64_t job_id, int active_only, hv_worker_row_t **out,
                       size_t *n);
void hv_view_workers_free(hv_worker_row_t *rows, size_t n);
/* Every stored node (dead ones too), by id. */
hv_err hv_view_nodes(hv_driver_t *d, hv_node_row_t **out, size_t *n);
void hv_view_nodes_free(hv_node_row_t *rows, size_t n);

/* A job's output log (hv_driver_log_path names its file): 1 while the head writes it, with the
 * bytes written so far in *bytes; 0 when it is closed or could not be opened. */
int hv_view_job_log(const hv_djob_t *j, uint64_t *bytes);

/* ---- the autoscaler's instances -------------------------------------------------------------- */

/* Instances by creation; active_only: not ended. */
hv_err hv_view_instances(hv_driver_t *d, int active_only, hv_instance_row_t **out, size_t *n);
void hv_view_instances_free(hv_instance_row_t *rows, size_t n);

/* ---- access: the audit trail, join tokens, revoked node credentials ------------------------- */

/* Audit rows matching f, newest first (*out: hv_free it). */
hv_err hv_view_audit(hv_driver_t *d, const hv_audit_filter_t *f, hv_audit_row_t **out, size_t *n);
/* Every join token (revoked and expired ones too), by creation (*out: hv_free it). */
hv_err hv_view_jtokens(hv_driver_t *d, hv_jtoken_row_t **out, size_t *n);
/* One join token. HV_ENOTFOUND. */
hv_err hv_view_jtoken(hv_driver_t *d, const char *id, hv_jtoken_row_t *out);
/* Every revoked node credential, oldest first (*out: hv_free it; NULL when n is 0). */
hv_err hv_view_revoked(hv_driver_t *d, hv_revoked_row_t **out, size_t *n);

/* ---- artifacts (the blob store; its writes are driver commands, driver.h) --------------------- */

/* 1 when the head keeps artifacts (hv_driver_set_artifacts). */
int hv_view_artifacts_kept(hv_driver_t *d);
/* The largest artifact the head accepts (0: none kept). */
uint64_t hv_view_artifact_max(hv_driver_t *d);
/* 1 if the artifact (sha256 hex) is stored, recorded and complete. */
int hv_view_artifact_present(hv_driver_t *d, const char *digest);
/* Bytes of an unfinished upload held for digest (the point it resumes from). */
uint64_t hv_view_artifact_partial(hv_driver_t *d, const char *digest);
/* The size of a present artifact's file. HV_ENOTFOUND: not present (or its file is gone). */
hv_err hv_view_artifact_size(hv_driver_t *d, const char *digest, uint64_t *size);
/* Opens a present artifact's file for reading: *fd (the caller's to close) and *size.
 * HV_ENOTFOUND ("no artifact ..."), HV_EIO (it cannot be opened); err says why. Record its use
 * first (hv_driver_artifact_touch). */
hv_err hv_view_artifact_open(hv_driver_t *d, const char *digest, int *fd, uint64_t *size, char *err,
                             size_t errlen);

/* ---- copies of the jobs' training state (their rows: hv_driver_copy_get) ---------------------- */

#define HV_VIEW_COPY_CHUNK_MAX                                                                     \
    ((size_t)1 << 20) /* the most one read returns (a PutState chunk's) */
/* Reads up to cap bytes of the copy row names (the head's copy: hv_driver_copy_get) from offset
 * into buf; *n gets the count. HV_EIO when its file cannot be read. Blocking: at most cap bytes. */
hv_err hv_view_copy_read(hv_driver_t *d, const hv_copy_row_t *row, uint64_t offset, uint8_t *buf,
                         size_t cap, size_t *n);

/* ---- the fleet (issue 26: who shares the cluster how) ----------------------------------------- */

/* The fleet policy's newest answer per namespace (core/fleet_types.h): up to cap of them into
 * out, returns how many (0 before its first decision). out[i] is namespace i, named by
 * hv_view_fleet_ns_name. */
size_t hv_view_fleet_shares(hv_driver_t *d, hv_fl_share_t *out, size_t cap);
/* The name of the fleet's namespace i: the configured ones in the config's order, then
 * "default" (implicit when the config does not list it). */
const char *hv_view_fleet_ns_name(hv_driver_t *d, size_t i);
/* The fleet namespace a job counts in (its name, borrowed; an unlisted one counts in
 * "default"). */
const char *hv_view_job_ns(hv_driver_t *d, const hv_djob_t *j);
/* The fleet's throughput table of job_id (per world size; stored, loaded again at start) when the
 * head holds the job in memory (an active or recently ended one; never read from the store
 * here): up to cap samples into out, returns how many (0 otherwise). */
size_t hv_view_job_tput(hv_driver_t *d, uint64_t job_id, hv_tput_sample_t *out, size_t cap);

#endif
