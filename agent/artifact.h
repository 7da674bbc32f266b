/*
 * artifact: hvagent's content-addressed cache of job files. Artifacts (a job's binary and the
 * files shipped with it) are named by their sha256; the cache keeps each one as
 * <dir>/<digest>, fetches a missing one from the head over the server-streaming
 * "/hvpb.v1.Cluster/Fetch" call into a temporary file (resuming at the received offset after a
 * broken stream), verifies size and digest, and renames it into place. Concurrent requests for
 * one digest share one download. An artifact already on disk is hashed once per agent process
 * and trusted afterwards while its size, inode and mtime stay the same (the cache itself moves
 * the mtime on each use and records that).
 *
 * Bound (hvagent --cache-max-mb): when the complete files' total exceeds the bound, the least
 * recently used are deleted until it fits (agent/cachepol.c decides; each deletion is logged at
 * INFO as HV-AGENT-CACHE-EVICT). A delivery (a hit or a finished download) is a use and sets
 * the file's mtime to now, so the order survives an agent restart: a new cache takes every
 * file's mtime as its last use. Never deleted: a file delivered and not released yet (a pin per
 * successful callback, until hv_artifact_release), a file whose request is being served, and a
 * download in progress (a temporary file, not counted). When all that is left over the bound is
 * pinned, the cache stays over it (one WARN, HV-AGENT-CACHE-OVER) and shrinks at the releases.
 * The bound is checked when a download is published, at each last release and at
 * hv_artifact_cache_set_max. Files put there by hand count from the next start or their first
 * use.
 *
 * It is not a general file store: it does not place files for workers beyond hv_artifact_place.
 * Caller: agent/workers.c.
 *
 * Privacy: the cache holds every job's files, so the directory is 0700 and each file 0400,
 * owned by the agent's user, and no set-id bit is ever kept. Workers never see a cached file:
 * hv_artifact_place gives each a private copy, so a worker (even one running as root) cannot
 * change what later jobs run. Downloads a killed agent left behind (.<digest>.tmp.<pid>) are
 * removed when a cache is created.
 *
 * Threads: every function runs on the loop thread; callbacks run there. Hashing a file already
 * on disk and writing chunks are blocking file I/O on the loop thread (local disk).
 */
#ifndef HV_AGENT_ARTIFACT_H
#define HV_AGENT_ARTIFACT_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "err.h"
#include "rpc.h"

#define HV_ARTIFACT_FETCH_ATTEMPTS 3 /* streams tried per artifact before giving up */

typedef struct hv_artifact_cache_s hv_artifact_cache_t;

/* The outcome of one request. On HV_OK path is the cached file (borrowed for the callback);
 * otherwise detail says why in words ("digest mismatch: ...", "head: no such artifact").
 * Possible errors: HV_EINVAL (bad digest), HV_ENOTFOUND, HV_EPERM, HV_ECORRUPT (digest or size
 * mismatch), HV_EPROTO, HV_EIO, HV_EUNAVAIL, HV_ETIMEDOUT, HV_ECANCELED (cache stopped). */
typedef void (*hv_artifact_done_cb)(hv_err rc, const char *path, const char *detail, void *ud);

/* Creates a cache in dir (created if missing, made 0700; refused with HV_EPERM when it belongs
 * to another user or is not a directory), removes partial downloads of processes that are gone
 * and takes group and other bits off cached files. loop, e and ch are borrowed and must outlive
 * the cache; e and ch may be NULL, and then only artifacts already on disk are served. token is
 * copied (sent with each Fetch). Blocking (one pass over the directory). */
hv_err hv_artifact_cache_create(uv_loop_t *loop, hv_rpc_engine_t *e, hv_rpc_channel_t *ch,
                                const char *dir, const char *token, hv_artifact_cache_t **out);

/* Sets the bound: the cache's complete files may take at most max_bytes (0 = unbounded, the
 * default of a new cache), and deletes what is over it now (blocking unlinks, local disk). */
void hv_artifact_cache_set_max(hv_artifact_cache_t *c, uint64_t max_bytes);

/* Asks for the artifact digest (64 lowercase hex) of size bytes (0 = size unknown). cb runs
 * exactly once, later on the loop, never inside this call. Returns HV_ENOMEM or HV_ECLOSED
 * (the cache is stopped) without calling cb. A callback with HV_OK pins the file: it stays
 * (whatever the bound) until the caller calls hv_artifact_release once for that callback, as
 * soon as it has its own copy (hv_artifact_place) or will not make one. */
hv_err hv_artifact_get(hv_artifact_cache_t *c, const char *digest, uint64_t size,
                       hv_artifact_done_cb cb, void *ud);

/* Ends one pin of digest (one HV_OK callback of hv_artifact_get); the last one lets the bound
 * delete the file again, and deletes what is over the bound now. A digest without a pin is
 * ignored (logged: a caller's bug). Works on a stopped cache too. */
void hv_artifact_release(hv_artifact_cache_t *c, const char *digest);

/* What the cache holds, for logs and tests. */
typedef struct hv_artifact_usage_s {
    uint64_t bytes;     /* the complete files' total size */
    uint64_t max_bytes; /* the bound; 0 = unbounded */
    size_t files;       /* how many complete files */
    size_t pinned;      /* HV_OK callbacks not released yet */
    uint64_t evicted;   /* files deleted for the bound since create */
} hv_artifact_usage_t;

void hv_artifact_cache_usage(const hv_artifact_cache_t *c, hv_artifact_usage_t *out);

/* The outcome of an upload (hv_artifact_put): on HV_OK digest is the file's sha256 (64 hex,
 * borrowed for the callback), the head holds it whole; otherwise detail says why in words. */
typedef void (*hv_artifact_put_cb)(hv_err rc, const char *digest, const char *detail, void *ud);

/* Uploads the file at path to the head's artifact store ("/hvpb.v1.Cluster/UploadState": an
 * actor's saved state over 1 MiB), named by its sha256, in 1 MiB chunks, one in flight. The
 * file is hashed first (blocking file I/O on the loop: local disk) and must stay unchanged until
 * cb, which runs exactly once, later on the loop, never inside this call (HV_ECANCELED when the
 * cache stops meanwhile). On failure to start (HV_ECLOSED, HV_ENOMEM, HV_EIO, a file that
 * cannot be opened) err says why and cb is not called. */
hv_err hv_artifact_put(hv_artifact_cache_t *c, const char *path, hv_artifact_put_cb cb, void *ud,
                       char *err, size_t errlen);

/* Cancels every download and fails every pending request with HV_ECANCELED (callbacks run
 * before this returns or, for downloads in flight, when their rpc call ends). Later gets fail
 * with HV_ECLOSED. Call before hv_rpc_engine_destroy. Idempotent. */
void hv_artifact_cache_stop(hv_artifact_cache_t *c);

/* Closes the timer and frees the cache once every download has ended (call after
 * hv_rpc_engine_destroy, or after every callback ran). destroy(NULL) is a no-op. */
void hv_artifact_cache_destroy(hv_artifact_cache_t *c);

/* Puts a private copy of the cached file src at dst (never a link: a worker must not be able to
 * change the cache), owned by uid:gid (-1 each: the agent's own), with the owner's bits of mode
 * only: set-id, sticky, group and other bits are dropped (HV_ARTIFACT_PLACE_MODE_MASK). dst
 * must be in a directory only the agent can write; an existing dst is replaced, a symlink there
 * is not followed. The copy is made in the kernel (copy_file_range: a reflink where the file
 * system can). On failure err (may be NULL) gets "<op> <path>: <strerror>". Blocking. */
hv_err hv_artifact_place(const char *src, const char *dst, unsigned mode, long uid, long gid,
                         char *err, size_t errlen);

/* Mode of files in the cache: readable by the agent's user only. */
#define HV_ARTIFACT_CACHE_MODE 0400u
/* The permission bits a placed file may keep from its order. */
#define HV_ARTIFACT_PLACE_MODE_MASK 0700u

#endif
