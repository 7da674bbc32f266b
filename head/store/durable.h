/*
 * durable: the I/O of the durable tier of the jobs' state copies (docs/RELIABILITY.md "The
 * durable tier"): writing one of the head's copies (a file under <data>/states/) to a directory
 * on a shared file system or through an upload command, reading one back into <data>/states/
 * (through a download command), and dropping one a newer copy replaced. Every operation runs on
 * this module's own thread, never on the head's loop thread: a copy of gigabytes, an fsync on a
 * network file system or a slow object store holds up nothing but the next durable copy.
 *
 * A write is published under its final name only once every byte is there and synced (a
 * directory: <key>.part, fsync, rename; an object store: the upload command's own atomicity), and
 * a read is checked against the stored size and SHA-256 before it is renamed into place, so no
 * half copy is ever named. Each command runs as `/bin/sh -c EXPANDED` in its own process group,
 * killed with it at the timeout; its placeholders are single-quoted (head/core/copies.c).
 *
 * It is not the decision of what to copy when (head/core/copies.c, applied by the driver) nor
 * the bookkeeping (store.c's durable_copies, stored by the driver after an operation finished).
 * Threading: create, submit, poll and destroy on one thread (the loop thread); the operations run
 * on the module's thread and come back through poll.
 */
#ifndef HV_HEAD_DURABLE_H
#define HV_HEAD_DURABLE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef struct hv_durable_s hv_durable_t;

/* Where the tier is: dir, or upload + download (+ remove). Strings are copied. */
typedef struct hv_durable_opts_s {
    const char *dir;               /* a directory (created 0700 if missing), or NULL */
    const char *upload, *download; /* command templates (copies.h placeholders), or NULL */
    const char *remove;            /* optional */
    uint32_t timeout_ms;           /* one operation at most */
} hv_durable_opts_t;

typedef enum hv_durable_kind {
    HV_DURABLE_WRITE = 1, /* file (a published head copy) -> the tier, as key */
    HV_DURABLE_READ = 2,  /* key -> file (written as file.part, checked, renamed) */
    HV_DURABLE_DROP = 3,  /* key is removed from the tier (best effort) */
} hv_durable_kind_t;

/* One operation and, once polled, its result. */
typedef struct hv_durable_op_s {
    hv_durable_kind_t kind;
    uint64_t job_id;
    uint32_t generation; /* the copy's round and commit, size and digest (hex) */
    uint64_t commit, size;
    char sha256[65];
    char key[512];  /* the object's name in the tier */
    char file[512]; /* the local file: the source of a write, the target of a read */
    /* result (poll) */
    hv_err rc;
    char err[2048];   /* why it failed, in the operator's terms */
    uint64_t took_ms; /* how long it ran */
} hv_durable_op_t;

/* Starts the thread. HV_ENOMEM, HV_EIO (dir cannot be created: err says why), HV_EINTERNAL. */
hv_err hv_durable_create(const hv_durable_opts_t *o, hv_durable_t **out, char *err, size_t errlen);

/* "a directory (PATH)" or "an object store (commands)": for messages. */
const char *hv_durable_describe(const hv_durable_t *d);

/* Queues op (copied). Never blocks. */
hv_err hv_durable_submit(hv_durable_t *d, const hv_durable_op_t *op);

/* Takes up to cap finished operations into out; returns how many. */
size_t hv_durable_poll(hv_durable_t *d, hv_durable_op_t *out, size_t cap);

/* Waits until every queued operation finished (at most timeout_ms). HV_OK or HV_ETIMEDOUT.
 * For tests and shutdown. */
hv_err hv_durable_flush(hv_durable_t *d, uint32_t timeout_ms);

/* Drops the queued operations, kills a running command (a copy to or from the directory runs to
 * its end), stops the thread, frees. NULL: no-op. */
void hv_durable_destroy(hv_durable_t *d);

#endif
