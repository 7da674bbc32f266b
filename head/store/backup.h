/*
 * backup: `hvhead backup`, a consistent copy of a head's data directory that a new head can
 * start from (docs/operations.md "Backup and restore"). The state database is copied with
 * sqlite's online backup API (hv_store_backup), so the head may keep running and writing; then
 * every other file the head keeps there is copied as it is: the key (auth.key), the client tokens
 * (client.token, clients/), the job logs (logs/), the artifacts (artifacts/) and the
 * autoscaler's instance files (instances/). The revoked node credentials are in the database. Left out: the
 * database's own side files (state.db-wal, -shm, -journal: the copy holds their content), the
 * lock (hvhead.lock) and unfinished uploads (uploads/). Regular files and directories only; a
 * symbolic link or other special file is left out and counted. Modes are kept (the key and
 * tokens stay 0600) and the copy's top directory is 0700.
 * The database goes first: a log line or artifact written later may be in the copy too (an
 * artifact no job row names is swept by the restored head), but nothing the copied database
 * names is missing unless the head deleted it during the copy (a finished job's artifact swept
 * at that moment). Called by hvhead's main only; blocking file I/O.
 */
#ifndef HV_HEAD_BACKUP_H
#define HV_HEAD_BACKUP_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef struct hv_backup_stats_s {
    uint64_t db_pages; /* pages of the state database copied */
    uint64_t files;    /* other files copied */
    uint64_t bytes;    /* their bytes */
    uint64_t skipped;  /* special files (links, sockets...) left out */
} hv_backup_stats_t;

/* 1 when the entry rel (a path relative to the data directory, "state.db-wal", "uploads/x") is
 * not copied as a file: the database and its side files (the database is copied by sqlite),
 * the lock, unfinished uploads. Pure. */
int hv_backup_skip(const char *rel);

/* Copies data_dir into to, which must not exist (its parent must): see the header comment.
 * Errors with a one-line message in err: HV_ENOTFOUND (no data_dir or no state.db in it),
 * HV_EEXIST (to exists), HV_EIO, HV_ECORRUPT, HV_ETIMEDOUT (hv_store_backup). On failure the
 * partial copy is left for inspection and err names it. */
hv_err hv_backup_data_dir(const char *data_dir, const char *to, hv_backup_stats_t *out, char *err,
                          size_t errlen);

#endif
