/*
 * artifacts: uploaded binaries and files, stored once by sha256 under <data>/artifacts/<digest>.
 * Uploads arrive as ordered chunks into <data>/uploads/<digest>.part; the digest is computed as
 * the chunks arrive, checked on the last one, and only then is the file renamed into place and
 * recorded in the store. A partial upload survives a head restart and resumes from its size,
 * unless nothing was written to it for upload_timeout: such a stale part is removed at open and
 * by hv_artifacts_sweep. The part files together hold at most upload_quota bytes (a chunk past
 * it is refused, RESOURCE_EXHAUSTED); a full disk discards the upload that hit it and says "no
 * space left on device" with the path, and everything else keeps working.
 * Nothing over max_upload is accepted. Reached only through the driver (driver_artifacts.c: its views
 * and commands), which the Jobs, Actors and Cluster services call. No RPC here. Loop thread
 * only.
 */
#ifndef HV_HEAD_ARTIFACTS_H
#define HV_HEAD_ARTIFACTS_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "store.h"

typedef struct hv_artifacts_s hv_artifacts_t;

/* Limits of the upload area. */
typedef struct hv_artifacts_limits_s {
    uint64_t max_upload;        /* largest artifact */
    uint64_t quota;             /* bytes all unfinished uploads may hold together */
    uint32_t upload_timeout_ms; /* an unfinished upload untouched this long is removed */
} hv_artifacts_limits_t;

/* Creates <data_dir>/artifacts, uploads and logs, and removes stale part files. store is
 * borrowed. On failure err names the directory that could not be made and why. */
hv_err hv_artifacts_open(const char *data_dir, hv_store_t *store, const hv_artifacts_limits_t *lim,
                         hv_artifacts_t **out, char *err, size_t errlen);
/* Removes unfinished uploads untouched for upload_timeout (wall clock now_ms); cheap to call
 * often (it scans at most every few seconds). Returns how many it removed. */
size_t hv_artifacts_sweep(hv_artifacts_t *a, uint64_t now_ms);
/* Bytes the unfinished uploads hold now. */
uint64_t hv_artifacts_parts_bytes(hv_artifacts_t *a);
void hv_artifacts_close(hv_artifacts_t *a);

uint64_t hv_artifacts_max(const hv_artifacts_t *a);
/* 1 if the artifact is stored, recorded and complete. */
int hv_artifacts_present(hv_artifacts_t *a, const char *digest);
/* Path of an artifact (into buf). HV_EINVAL for a malformed digest. */
hv_err hv_artifacts_path(hv_artifacts_t *a, const char *digest, char *buf, size_t len);
/* Bytes of an unfinished upload held for digest (the resume point). */
uint64_t hv_artifacts_partial(hv_artifacts_t *a, const char *digest);
/* Records a use (an agent is about to fetch it), before the artifact is served: the
 * collection of unused artifacts reads it. HV_OK, or the store's error (err: its words; the
 * driver's hv_driver_artifact_touch tells clients its store trouble instead). */
hv_err hv_artifacts_touch(hv_artifacts_t *a, const char *digest, char *err, size_t errlen);

/* Writes one chunk of an upload: offset must equal the bytes held so far. With last set the
 * digest is verified and the artifact published. *received gets the bytes held after the chunk,
 * *complete whether the artifact is now present. Errors, with a message for the user in err:
 * HV_EINVAL (bad digest, chunk past the size), HV_ETOOBIG (over max_upload), HV_EUNAVAIL (the
 * unfinished uploads fill upload_quota now: the client may try again once they finish; or no
 * space left on the device: the part file is discarded), HV_ESTATE (wrong offset),
 * HV_ECORRUPT (digest mismatch: the part file is discarded), HV_EIO, HV_ENOMEM. */
hv_err hv_artifacts_write(hv_artifacts_t *a, const char *digest, uint64_t total, uint64_t offset,
                          const uint8_t *data, size_t len, int last, uint64_t *received,
                          int *complete, char *err, size_t errlen);

#endif
