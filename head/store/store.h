/*
 * store: hvhead's persistent state, one sqlite database at <data_dir>/state.db in WAL mode.
 * The head writes every state change here before acting on it, so a head restarted after
 * SIGKILL resumes where it stopped. The store holds rows (nodes, jobs, worker attempts, the
 * append-only event log, artifacts, the node blacklist, the autoscaler's instances) and nothing
 * else: it does not decide anything, does not parse job specs (they are opaque bytes) and does
 * not cache. The schema is versioned (PRAGMA user_version) and migrated on open by an ordered
 * list of steps, each in its own transaction. Called by hvhead's loop thread only.
 *
 * Threads: a store handle is NOT thread-safe; use it from one thread (the head's loop thread).
 * Blocking: every call does synchronous file I/O (sqlite); a write may wait up to 5 s for a lock
 * held by another process (busy_timeout) and then fails with HV_ETIMEDOUT.
 *
 * Ownership: row structs own their char* / uint8_t* fields. Rows filled by the store are freed
 * with the matching *_fini; arrays returned by *_list are owned by the caller and freed with the
 * matching *_free_list. Rows passed in (insert/update/put) are borrowed; any string in them may
 * be NULL and is stored as "" (state NULL means the table's initial state). Text read back is
 * never NULL ("" for empty). Out-params are assigned only on success.
 *
 * Errors: sqlite failures are mapped to hv_err (constraint: HV_EEXIST or HV_EINVAL; busy:
 * HV_ETIMEDOUT; damaged file: HV_ECORRUPT; disk: HV_EIO; read-only: HV_EPERM) and the detail,
 * with sqlite's own words, is kept for hv_store_last_error().
 */
#ifndef HV_HEAD_STORE_H
#define HV_HEAD_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "callfig.h"
#include "err.h"
#include "events.h"
#include "records.h"

typedef struct hv_store_s hv_store_t;

/* The schema version this binary writes. v1: nodes, jobs, workers, events, artifacts.
 * v2: + blacklist, instances, jobs.generation, workers.generation.
 * v3: elastic jobs (settings and round state), worker membership and the state "left", the
 *     blacklist by (job, node id), event data.
 * v4: instances: type, handle, joined_ms, reason, preempted; jobs.target_np.
 * v5: meta (the database's epoch, hv_store_epoch).
 * v6: audit (the audit trail), join_tokens.
 * v7: state_copies (the newest copy of each job's training state), jobs.resume_gen, resumes.
 * v8: revoked_nodes.
 * v9: job_artifacts (which artifacts each job's spec uses: hv_store_job_artifacts_fill).
 * v10: actors (issue 17).
 * v11: events' structured fields (generation, reason, node, worker_id, rank, duration_ms,
 *      job_state, rollback), jobs.round_code.
 * v12: durable_copies (the newest copy of each job's state in the durable tier).
 * v13: actors' moves (next_node, next_gpu_mask, has_state, state_digest, state_size).
 * v14: actors' placement demand (labels, memory_mb).
 * v15: nodes.memory_mb (placement by memory right after a head restart).
 * v16: actor_figures (actors' call figures, summed over their processes).
 * v17: events.actor_id (an actor's events, indexed: hv_store_event_list_actor).
 * v18: jobs' priority, preemptible and fleet decision (issue 26).
 * v19: jobs.namespace (hvsubmit --namespace: the fleet quota it counts in).
 * v20: peer_copies (which peer agent keeps which copy of a job's state, issue 28 §3). */
#define HV_STORE_SCHEMA_VERSION 21

/* ---- lifecycle ------------------------------------------------------------------------------ */

/* Opens (creating if needed, with the data dir) <data_dir>/state.db, checks it (quick_check),
 * and migrates it to HV_STORE_SCHEMA_VERSION. On failure returns the error and writes a message
 * for an operator into err (may be NULL): HV_ECORRUPT for a file that is not a sqlite database,
 * is damaged or is empty (0 bytes: a lost database, not a new one; the file is never modified,
 * moved or deleted), HV_ENOTSUP for a database
 * written by a newer hvhead, HV_EPERM/HV_EIO/HV_ENOTFOUND for a data dir that cannot be created
 * or written. On success *out is an owned handle, closed with hv_store_close. */
hv_err hv_store_open(const char *data_dir, hv_store_t **out, char *err, size_t errlen);
/* Closes the handle (rolling back an open transaction) and frees it. NULL is a no-op. */
void hv_store_close(hv_store_t *s);
/* The schema version of the open database (HV_STORE_SCHEMA_VERSION after a successful open). */
int hv_store_schema_version(hv_store_t *s);
/* The database's epoch: 16 random hex digits chosen when the file was created, "" for one
 * created before schema v5 (the legacy epoch). Ids are unique only within one epoch: what
 * outlives the database (the head's key, job logs) is keyed by it. Borrowed; valid until
 * close. */
const char *hv_store_epoch(hv_store_t *s);
/* The database file's path. Borrowed; valid until close. */
const char *hv_store_path(hv_store_t *s);
/* Detail of the last failure on this handle ("" if none). Borrowed; valid until the next call. */
const char *hv_store_last_error(hv_store_t *s);

/* ---- transactions --------------------------------------------------------------------------- */

/* Without an explicit transaction every write is its own transaction. begin starts a write
 * transaction (HV_ESTATE if one is open); commit ends it (HV_ESTATE if none); rollback discards
 * it and is a no-op when none is open (sqlite may already have rolled back after an I/O error). */
hv_err hv_store_begin(hv_store_t *s);
hv_err hv_store_commit(hv_store_t *s);
hv_err hv_store_rollback(hv_store_t *s);

/* ---- nodes ---------------------------------------------------------------------------------- */

/* Inserts, or updates every field of the node with the same name; sets row->id (the id of an
 * existing node is kept). HV_EINVAL without a name or with an unknown state. */
hv_err hv_store_node_upsert(hv_store_t *s, hv_node_row_t *row);
/* HV_ENOTFOUND if no node has this id. */
hv_err hv_store_node_set_state(hv_store_t *s, uint64_t id, const char *state,
                               uint64_t last_seen_ms);
/* Fills *out (owned; hv_store_node_fini). HV_ENOTFOUND. */
hv_err hv_store_node_get(hv_store_t *s, uint64_t id, hv_node_row_t *out);
/* All nodes ordered by id. */
hv_err hv_store_node_list(hv_store_t *s, hv_node_row_t **out, size_t *n);
void hv_store_node_fini(hv_node_row_t *row);
void hv_store_node_free_list(hv_node_row_t *rows, size_t n);

/* ---- jobs ----------------------------------------------------------------------------------- */

/* Sets row->id; the row and its artifacts' references go in one transaction (the caller's, if
 * one is open). HV_EINVAL for an unknown state. */
hv_err hv_store_job_insert(hv_store_t *s, hv_job_row_t *row);
/* Updates everything but spec, by row->id. HV_ENOTFOUND. */
hv_err hv_store_job_update(hv_store_t *s, const hv_job_row_t *row);
/* Fills *out (owned; hv_store_job_fini). HV_ENOTFOUND. */
hv_err hv_store_job_get(hv_store_t *s, uint64_t id, hv_job_row_t *out);
/* Jobs newest first (by id). active_only: pending, placing, running. limit 0 = no limit. */
hv_err hv_store_job_list(hv_store_t *s, int active_only, uint32_t limit, hv_job_row_t **out,
                         size_t *n);
/* The number of jobs in each state: fn(state, count, ud) once per state that has jobs (the
 * store's words, "pending" ... "cancelled"); the strings are borrowed for the call. */
hv_err hv_store_job_states(hv_store_t *s, void (*fn)(const char *state, uint64_t n, void *ud),
                           void *ud);
/* A page of jobs newest first: those with an id below before_id (0 = from the newest), at most
 * limit of them (0 = no limit). */
hv_err hv_store_job_page(hv_store_t *s, uint64_t before_id, uint32_t limit, hv_job_row_t **out,
                         size_t *n);
void hv_store_job_fini(hv_job_row_t *row);
void hv_store_job_free_list(hv_job_row_t *rows, size_t n);

/* ---- workers (one row per attempt) ----------------------------------------------------------- */

/* Sets row->id. */
hv_err hv_store_worker_insert(hv_store_t *s, hv_worker_row_t *row);
/* Updates every field by row->id. HV_ENOTFOUND. */
hv_err hv_store_worker_update(hv_store_t *s, const hv_worker_row_t *row);
/* Fills *out (owned; hv_store_worker_fini). HV_ENOTFOUND. */
hv_err hv_store_worker_get(hv_store_t *s, uint64_t id, hv_worker_row_t *out);
/* Workers of job_id (0 = all jobs), ordered by job_id, rank, attempt. active_only: pending,
 * starting, running. */
hv_err hv_store_worker_list(hv_store_t *s, uint64_t job_id, int active_only, hv_worker_row_t **out,
                            size_t *n);
void hv_store_worker_fini(hv_worker_row_t *row);
void hv_store_worker_free_list(hv_worker_row_t *rows, size_t n);

/* ---- events (append-only) -------------------------------------------------------------------- */

/* Appends an event stamped with the wall clock now; data (may be NULL) is a JSON object text.
 * *seq_out (may be NULL) gets its seq. No structured fields (hv_store_event_append_f). */
hv_err hv_store_event_append(hv_store_t *s, uint64_t job_id, uint64_t node_id, const char *kind,
                             const char *message, const char *data, uint64_t *seq_out);
/* The same with the event's fields (f may be NULL: none; f->node_id is not stored, node_id is)
 * and the node's name (node may be NULL: ""); both borrowed. */
hv_err hv_store_event_append_f(hv_store_t *s, uint64_t job_id, uint64_t node_id, const char *kind,
                               const char *message, const char *data, const hv_ev_fields_t *f,
                               const char *node, uint64_t *seq_out);
/* Events with seq > after_seq of job_id (0 = all), in ascending seq order. limit 0 = no limit;
 * otherwise the NEWEST `limit` matching events, still in ascending order. */
hv_err hv_store_event_list(hv_store_t *s, uint64_t job_id, uint64_t after_seq, uint32_t limit,
                           hv_event_row_t **out, size_t *n);
/* The events of actor actor_id (f.actor_id; events stored before v17 have none), the NEWEST
 * `limit` of them (0 = no limit) in ascending seq order; *total (may be NULL) gets how many it
 * has in all. */
hv_err hv_store_event_list_actor(hv_store_t *s, uint64_t actor_id, uint32_t limit,
                                 hv_event_row_t **out, size_t *n, uint64_t *total);
void hv_store_event_free_list(hv_event_row_t *rows, size_t n);
/* How many events of `kind` (of job_id; 0 = all jobs) have data containing data_has ("" = any). */
hv_err hv_store_event_count(hv_store_t *s, uint64_t job_id, const char *kind, const char *data_has,
                            uint64_t *n);
/* Counts the events of `kind` with a generation of at least min_gen by (reason code, rollback):
 * fn once per pair present (unknown codes read as HV_EV_NONE). */
hv_err hv_store_event_reasons(hv_store_t *s, const char *kind, uint32_t min_gen,
                              void (*fn)(hv_ev_reason_t reason, int rollback, uint64_t n, void *ud),
                              void *ud);
/* The sum of the integer field `field` (a top-level key of the JSON data) over the events of
 * `kind` (of job_id; 0 = all jobs); events without it count 0. */
hv_err hv_store_event_sum(hv_store_t *s, uint64_t job_id, const char *kind, const char *field,
                          uint64_t *sum);

/* ---- artifacts (uploaded binaries, by sha256) ------------------------------------------------ */

typedef struct hv_artifact_row_s {
    char *digest;  // sha256, lowercase hex (required)
    char *path;    // where the head keeps the bytes
    uint64_t size; // bytes
    uint64_t created_ms, last_used_ms;
} hv_artifact_row_t;

/* Inserts or replaces (every field) the artifact with row->digest. */
hv_err hv_store_artifact_put(hv_store_t *s, const hv_artifact_row_t *row);
/* Fills *out (owned; hv_store_artifact_fini). HV_ENOTFOUND. */
hv_err hv_store_artifact_get(hv_store_t *s, const char *digest, hv_artifact_row_t *out);
/* Sets last_used_ms. HV_ENOTFOUND. */
hv_err hv_store_artifact_touch(hv_store_t *s, const char *digest, uint64_t now_ms);
void hv_store_artifact_fini(hv_artifact_row_t *row);
void hv_store_artifact_free_list(hv_artifact_row_t *rows, size_t n);

/* The digests a packed JobSpec uses (its binary's, its files'), into out[0..cap); returns how
 * many (at most cap). Given by the head (the store never reads a spec). */
typedef size_t (*hv_store_spec_digests_fn)(void *ud, const uint8_t *spec, size_t len,
                                           char (*out)[65], size_t cap);

/* Once after the v9 migration of a database that had jobs: reads every job's spec through fn
 * and records which artifacts it uses, in one transaction, then marks the references complete.
 * A no-op when they are complete already. *filled (optional): jobs read. */
hv_err hv_store_job_artifacts_fill(hv_store_t *s, hv_store_spec_digests_fn fn, void *ud,
                                   size_t *filled);
/* 1 when every stored job's artifact references are recorded (after the fill). */
int hv_store_job_artifacts_complete(hv_store_t *s);
/* The artifacts no stored job and no actor that is not dead uses (an actor's packed spec holds
 * its programs' digests as text: a byte search, whose only possible error keeps an artifact) that
 * were neither stored nor used (last_used_ms) since before_ms: at most cap of them are deleted in one transaction and returned in *out (owned;
 * hv_store_artifact_free_list) so that the caller removes their files. Refused (HV_ESTATE) while
 * the references are not complete. */
hv_err hv_store_artifacts_unused_delete(hv_store_t *s, uint64_t before_ms, size_t cap,
                                        hv_artifact_row_t **out, size_t *n);

/* ---- blacklist (schema v2) ------------------------------------------------------------------- */

/* A node barred from one job's work (v3: by node id, the head's identity for the node, so a new
 * machine that reuses a host name starts clean). */
typedef struct hv_blacklist_row_s {
    uint64_t job_id;      // required
    uint64_t node_id;     // required
    char *reason;         // the last failure
    uint32_t strikes;     // failures counted against the node for this job
    uint64_t until_ms;    // wall-clock ms until which the node gets no work of the job
    int permanent;        // 1: barred for good
    uint64_t incarnation; // the agent process the failures happened under: a new agent on the
                          // node (a new machine reusing the name, too) starts clean
} hv_blacklist_row_t;

/* Inserts or replaces the entry for (job_id, node_id). HV_EINVAL without both ids. */
hv_err hv_store_blacklist_put(hv_store_t *s, const hv_blacklist_row_t *row);
/* Entries of job_id (0 = all jobs) ordered by job, node. */
hv_err hv_store_blacklist_list(hv_store_t *s, uint64_t job_id, hv_blacklist_row_t **out, size_t *n);
/* HV_ENOTFOUND if there is no entry. */
hv_err hv_store_blacklist_remove(hv_store_t *s, uint64_t job_id, uint64_t node_id);
void hv_store_blacklist_free_list(hv_blacklist_row_t *rows, size_t n);

/* ---- instances: the autoscaler's cloud instances (schema v2, v4) ---------------------------- */

/* Inserts or replaces the instance with row->id. */
hv_err hv_store_instance_put(hv_store_t *s, const hv_instance_row_t *row);
/* Fills *out (owned; hv_store_instance_fini). HV_ENOTFOUND. */
hv_err hv_store_instance_get(hv_store_t *s, const char *id, hv_instance_row_t *out);
/* Instances ordered by created_ms, id. active_only: ended_ms == 0. */
hv_err hv_store_instance_list(hv_store_t *s, int active_only, hv_instance_row_t **out, size_t *n);
void hv_store_instance_fini(hv_instance_row_t *row);
void hv_store_instance_free_list(hv_instance_row_t *rows, size_t n);

/* ---- audit trail (schema v6) ----------------------------------------------------------------- */

/* Audit rows the head keeps: older ones are deleted as new ones come (about 30 MB at most). */
#define HV_STORE_AUDIT_KEEP 100000

/* Appends row (seq ignored), then deletes all but the newest `keep` rows (0 = keep all). */
hv_err hv_store_audit_append(hv_store_t *s, const hv_audit_row_t *row, uint64_t keep);

/* Rows matching f, newest first. *out owned (hv_free). */
hv_err hv_store_audit_list(hv_store_t *s, const hv_audit_filter_t *f, hv_audit_row_t **out,
                           size_t *n);

/* ---- join tokens (schema v6) ----------------------------------------------------------------- */

/* HV_EEXIST: a token with this id already exists. */
hv_err hv_store_jtoken_insert(hv_store_t *s, const hv_jtoken_row_t *row);
/* HV_ENOTFOUND. */
hv_err hv_store_jtoken_get(hv_store_t *s, const char *id, hv_jtoken_row_t *out);
/* All tokens (revoked and expired included) by creation. *out owned (hv_free). */
hv_err hv_store_jtoken_list(hv_store_t *s, hv_jtoken_row_t **out, size_t *n);
/* Marks it revoked at now_ms. HV_ENOTFOUND: no such token, or already revoked. */
hv_err hv_store_jtoken_revoke(hv_store_t *s, const char *id, uint64_t now_ms);
/* Counts one use, only if the token is still usable at now_ms (not revoked, not expired, uses
 * left): the check and the count are one statement. HV_ENOTFOUND when it is not usable. */
hv_err hv_store_jtoken_use(hv_store_t *s, const char *id, uint64_t now_ms);

/* ---- history retention (head/store/history.h, docs/operations.md "History") ----------------------- */

/* The finished jobs (succeeded, failed, cancelled) beyond a retention, oldest end first, at most
 * cap of them: those that ended before cutoff_ms (0 = no limit by age; a job with no end time
 * counts from its submission) and those beyond the newest keep_jobs finished ones (by end time;
 * 0 = no limit by count). Active jobs are never listed. *out owned (hv_free), NULL when n is 0. */
hv_err hv_store_history_expired(hv_store_t *s, uint64_t cutoff_ms, uint64_t keep_jobs, size_t cap,
                                uint64_t **out, size_t *n);
/* Deletes the jobs ids[0..n) with their workers, events and blacklist entries, in one
 * transaction (all or nothing). A job that is not finished (or not there) is left alone: its
 * rows are kept. *deleted (optional): the jobs deleted. HV_ESTATE when a transaction is open. */
hv_err hv_store_history_delete(hv_store_t *s, const uint64_t *ids, size_t n, size_t *deleted);

/* ---- backup (docs/operations.md "Backup and restore") ---------------------------------------- */

/* Copies the database src_path (a head's state.db, which may be open and written by a running
 * head: sqlite's online backup API reads a consistent snapshot, WAL included) into dst_path, a
 * file that must not exist, created with mode 0600, then checks the copy (quick_check). Opens
 * src read-only and never changes it. Blocks: the copy runs in steps of 256 pages; when the head
 * holds a lock, a step is retried for up to 30 s in all (then HV_ETIMEDOUT). *pages_out
 * (optional): the pages copied. Errors with a message in err: HV_EEXIST (dst exists),
 * HV_ENOTFOUND (no src), HV_ECORRUPT, HV_EIO, HV_ETIMEDOUT; dst is removed on failure. */
hv_err hv_store_backup(const char *src_path, const char *dst_path, uint64_t *pages_out, char *err,
                       size_t errlen);

/* ---- copies of the training state (schema v7) ------------------------------------------------ */

/* Records row as the job's newest copy (replacing the previous row). HV_EINVAL for job 0. */
hv_err hv_store_copy_put(hv_store_t *s, const hv_copy_row_t *row);
/* The job's newest copy. HV_ENOTFOUND: none. */
hv_err hv_store_copy_get(hv_store_t *s, uint64_t job_id, hv_copy_row_t *out);
/* Forgets the job's copy (no-op without one). */
hv_err hv_store_copy_remove(hv_store_t *s, uint64_t job_id);

/* The same for the durable tier's copy (schema v9, durable_copies; row->path is the object's key
 * in the tier, not a local file). */
hv_err hv_store_durable_put(hv_store_t *s, const hv_copy_row_t *row);
hv_err hv_store_durable_get(hv_store_t *s, uint64_t job_id, hv_copy_row_t *out);
hv_err hv_store_durable_remove(hv_store_t *s, uint64_t job_id);

/* The index of the copy a peer agent keeps (schema v20, peer_copies; issue 28 §3): stored before
 * the keeper's previous copy may be dropped. Put replaces the job's row; get: HV_ENOTFOUND when
 * none; remove: no-op without one. */
hv_err hv_store_peer_copy_put(hv_store_t *s, const hv_peer_copy_row_t *row);
hv_err hv_store_peer_copy_get(hv_store_t *s, uint64_t job_id, hv_peer_copy_row_t *out);
hv_err hv_store_peer_copy_remove(hv_store_t *s, uint64_t job_id);
/* Forgets every row kept by node (its agent was replaced or the node died: its memory is gone);
 * *n (may be NULL) gets the count. */
hv_err hv_store_peer_copy_forget_node(hv_store_t *s, uint64_t node_id, size_t *n);

/* ---- the fleet's throughput table (schema v21, job_tput; issue 26 §3) ------------------------ */

/* Replaces job_id's rows with rows[0..n) (their job_id is ignored; n 0 forgets them), in one
 * transaction (inside the caller's when one is open). HV_EINVAL for job 0. */
hv_err hv_store_tput_put(hv_store_t *s, uint64_t job_id, const hv_tput_row_t *rows, size_t n);
/* job_id's rows by size (owned array, hv_free; none: *out NULL, *n 0). */
hv_err hv_store_tput_get(hv_store_t *s, uint64_t job_id, hv_tput_row_t **out, size_t *n);

/* ---- revoked node credentials (schema v8) ----------------------------------------------------- */

/* Stores a revocation (one already stored is left as it was). */
hv_err hv_store_revoked_put(hv_store_t *s, const hv_revoked_row_t *r);
/* Every revocation, oldest first (*out: hv_free it; NULL when n is 0). */
hv_err hv_store_revoked_list(hv_store_t *s, hv_revoked_row_t **out, size_t *n);
/* Imports the revocations file of an older head (path: <data_dir>/revoked_nodes, one
 * "<node id> <incarnation in hex>" a line) in one transaction, then renames it to
 * path.imported. No file: HV_OK, *imported 0. A line that is not a revocation: HV_ECORRUPT and
 * nothing is imported (err names the file and line); a store that fails: its error, the file
 * stays for the next start. */
hv_err hv_store_revoked_import(hv_store_t *s, const char *path, size_t *imported, char *err,
                               size_t errlen);

/* ---- testing only ---------------------------------------------------------------------------- */

/* Creates <dir>/state.db (dir must exist; the file must not) at schema `version`
 * (1..HV_STORE_SCHEMA_VERSION) by running only the first `version` migration steps, then runs
 * `sql` (may be NULL; several statements allowed) and closes it. Lets tests build a real old
 * database and migrate it, or fake a newer one with "PRAGMA user_version = 9". */
hv_err hv__store_create_at_version(const char *dir, int version, const char *sql, char *err,
                                   size_t errlen);

/* on != 0: every later write of s fails as sqlite fails it on a read-only file ("attempt to write
 * a readonly database", HV_EIO), reads still work; on == 0: writes work again. Lets tests show
 * that nothing is acted on that was not stored. */
hv_err hv__store_fail_writes(hv_store_t *s, int on);
/* Runs sql (several statements allowed) on s's connection, e.g. a TEMP trigger that fails the
 * writes of one table: "CREATE TEMP TRIGGER f BEFORE INSERT ON blacklist BEGIN SELECT
 * RAISE(FAIL, 'disk I/O error (injected)'); END". */
hv_err hv__store_exec(hv_store_t *s, const char *sql);

/* ---- actors (schema v9) ---------------------------------------------------------------------- */

/* One actor as stored (head/driver/actors_drv.c; the state machine is head/core/actors.h). */
typedef struct hv_actor_row_s {
    uint64_t id;
    char *name, *ns, *class_name; /* owned; name "" = unnamed, ns the namespace */
    uint8_t *spec;                /* the packed ActorSpec of its creation (owned) */
    size_t spec_len;
    char state[16]; /* hv_am_state_name */
    char cause[24]; /* hv_am_cause_name */
    char *reason;   /* the last event's words (owned) */
    uint32_t max_restarts, max_call_retries, restarts, moves, incarnation, slots, gpus;
    uint64_t gpu_mask;           /* GPUs its live process holds on node_id */
    uint64_t node_id, owner_job; /* owner_job 0: detached */
    int proc_live, kill_sent, last_status, last_signal;
    char *address; /* host:port of its live process, "" when none (owned) */
    uint64_t created_ms, started_ms, ended_ms; /* wall clock */
    /* v13, a move: the node reserved for the replacement and its GPUs there; a saved state
     * (an artifact: sha256 hex, bytes) waiting to be loaded. */
    uint64_t next_node, next_gpu_mask;
    int has_state;
    char state_digest[65];
    uint64_t state_size;
    char *labels;       /* node labels it needs, "k=v,k=v" ("" none; owned; v14) */
    uint64_t memory_mb; /* MiB of a node's memory it needs (0: none; v14) */
} hv_actor_row_t;

/* Inserts or replaces the row of r->id (borrowed). */
hv_err hv_store_actor_put(hv_store_t *s, const hv_actor_row_t *r);
/* Every actor by id. *out owned: hv_actor_row_fini each row, then hv_free. */
hv_err hv_store_actor_list(hv_store_t *s, hv_actor_row_t **out, size_t *n);
void hv_actor_row_fini(hv_actor_row_t *r);

/* An actor's call figures (v15; head/core/actorfig.h): the sum of its ended processes, the last
 * report of its current process proc (ended: its final one was added to base), and the wall
 * time of the last report. */
typedef struct hv_actor_fig_row_s {
    uint64_t actor_id;
    uint64_t proc;
    int ended;
    hv_callfig_t base, cur;
    uint64_t report_ms;
} hv_actor_fig_row_t;

/* Inserts or replaces the figures of r->actor_id (borrowed). */
hv_err hv_store_actor_fig_put(hv_store_t *s, const hv_actor_fig_row_t *r);
/* Every actor's figures by actor id. *out owned: hv_free. HV_ECORRUPT: a row that is not
 * figures. */
hv_err hv_store_actor_fig_list(hv_store_t *s, hv_actor_fig_row_t **out, size_t *n);

#endif
