/*
 * statecopy: the files of the copies of jobs' training state that the head keeps in
 * <data>/states/ (issue 15 §1: the state outlives its workers). A copy arrives in chunks
 * (Rendezvous.PutState, through the driver: driver_copies.c): each job has at most one copy in progress, written to
 * <epoch>-<job>-<n>.part (a name per part) and hashed as it comes; at the last chunk the size and
 * the SHA-256 are checked, and the part is handed to the caller, who has it synced and renamed
 * (hv_statecopy_publish) to <epoch>-<job>-g<generation>-c<commit>.bin, a name
 * no other copy has, so that the stored row (the driver records it in sqlite before anyone is
 * told) never names a half-written or replaced file. The previous copy's file is removed once
 * the new row is stored. Chunks of a stored copy are read back for a resumed job
 * (Rendezvous.FetchState).
 *
 * It is not the bookkeeping (store.c's state_copies table, through the driver) nor the decision
 * to resume (jobm.c). Loop thread only, but for hv_statecopy_publish (the fsync and rename at the
 * end of a copy, which the driver runs off the loop through its io.queue_work); every other file operation is
 * synchronous and bounded by the chunk size (1 MiB).
 */
#ifndef HV_HEAD_STATECOPY_H
#define HV_HEAD_STATECOPY_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define HV_STATECOPY_CHUNK_MAX ((size_t)1 << 20)
#define HV_STATECOPY_SIZE_MAX ((uint64_t)1 << 36) /* 64 GiB, as hv_state_load reads */

typedef struct hv_statecopies_s hv_statecopies_t;

/* A copy whose every byte arrived and was checked. Until hv_statecopy_publish (or _discard) it is
 * a written, unsynced file part (open as fd); then the published file path. */
typedef struct hv_statecopy_done_s {
    uint32_t generation;
    uint64_t commit, size;
    char sha256[65];
    char path[512]; /* the name it is published under */
    char part[600]; /* the file as written (owned until publish or discard) */
    int fd;         /* part, open (owned; -1 once published or discarded) */
} hv_statecopy_done_t;

/* Creates <dir> (mode 0700) and removes the .part files a previous head left. epoch: the
 * database's (borrowed; copied). reserve: logs.reserve_free_bytes. A new copy is refused
 * (HV_ETOOBIG) at its first chunk unless dir's file system has room for all of it, after what
 * the copies in progress have still to write, and still keeps twice the reserve free
 * (hv_copy_room, head/core/copies.h: the room of the state database and of the jobs' output). */
hv_err hv_statecopies_create(const char *dir, const char *epoch, uint64_t reserve,
                             hv_statecopies_t **out);
void hv_statecopies_destroy(hv_statecopies_t *c);

/* One chunk of job's copy. offset 0 starts a new copy (dropping one in progress); any other
 * offset must continue the one in progress with the same generation, commit and total
 * (HV_ESTATE otherwise: the sender starts again at 0). When offset + len == total, sha256 must
 * match (HV_EPROTO otherwise; the part is dropped): *done is filled and *complete set to 1, and
 * the written part is handed over to the caller (no longer the job's copy in progress: a new
 * copy may start meanwhile), who publishes it with hv_statecopy_publish, off the loop thread,
 * or discards it. HV_EIO when the disk fails (detail in err). Each part has a name of its own. */
hv_err hv_statecopy_put(hv_statecopies_t *c, uint64_t job_id, uint32_t generation, uint64_t commit,
                        uint64_t total, uint64_t offset, const uint8_t *data, size_t len,
                        const char *sha256, int *complete, hv_statecopy_done_t *done, char *err,
                        size_t errlen);

/* Syncs the part, renames it to done->path and syncs the directory: the blocking end of a copy.
 * Touches only done: may run on any thread. On failure the part is removed (err says why). */
hv_err hv_statecopy_publish(hv_statecopy_done_t *done, char *err, size_t errlen);

/* Drops a part that will not be published (closes and removes it). Idempotent. */
void hv_statecopy_discard(hv_statecopy_done_t *done);

/* Drops job's copy in progress (the job ended). */
void hv_statecopy_abort(hv_statecopies_t *c, uint64_t job_id);

/* Reads up to cap bytes of the file path from offset into buf; *n gets the count. */
hv_err hv_statecopy_read(const char *path, uint64_t offset, uint8_t *buf, size_t cap, size_t *n);

/* The name a published copy of job's (generation, commit) has: <dir>/<epoch>-<job>-g<gen>-c<commit>.bin
 * (a copy restored from the durable tier is published under the same name). */
void hv_statecopy_path(const hv_statecopies_t *c, uint64_t job_id, uint32_t generation,
                       uint64_t commit, char *buf, size_t len);

/* Removes a published copy's file (a newer one is stored, or the job finished). */
void hv_statecopy_remove(const char *path);

#endif
