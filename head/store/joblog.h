/*
 * joblog: the job output files <data>/logs/<epoch>-<job>.log (<job>.log for the legacy epoch "",
 * see store.h hv_store_epoch) and the caps that keep them from filling
 * the data directory, which holds the head's sqlite state too. Every line a worker prints is
 * stored as "[rank]<stdout|stderr>:text\n" (svc_jobs.c streams the file to watchers). Before a
 * batch of lines is appended, three limits are checked (hv_joblog_decide, pure):
 *   - a job's own cap (logs.max_job_bytes): past it, one marker line
 *     "[hv] log truncated: job N wrote more than X bytes; further output dropped" and nothing
 *     more for that job;
 *   - the cap on all logs together (logs.max_total_bytes, at most half the file system);
 *   - the free space kept for state (logs.reserve_free_bytes, at most a quarter of the file
 *     system): while either of these two is hit, lines are dropped with one marker
 *     "[hv] log paused: ..." per job, and one "[hv] log resumed: N bytes dropped" when room
 *     is back.
 * Dropped bytes are counted per job (hv_joblog_t.dropped). The file system's free space is
 * asked (statvfs) at most once per HV_JOBLOG_STATFS_MS, never per line. A batch is appended with
 * one write(2); a short write (ENOSPC) is cut back so the file always ends with a whole line.
 * It is not the event log (sqlite, driver_events.c). Watchers of a job read its file themselves
 * (svc_jobs.c); an actor's log is read back a page at a time (hv_joblog_read_page).
 * Caller: the head's driver, on its loop thread only; not thread-safe.
 */
#ifndef HV_HEAD_JOBLOG_H
#define HV_HEAD_JOBLOG_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "records.h"

#define HV_JOBLOG_STATFS_MS 1000u /* how long a free-space reading is trusted */

/* The configured limits (config.h: logs.*), in bytes. */
typedef struct hv_joblog_limits_s {
    uint64_t max_job_bytes;      /* one job's log */
    uint64_t max_total_bytes;    /* every log together, before scaling to the file system */
    uint64_t reserve_free_bytes; /* free space kept for state, before scaling */
} hv_joblog_limits_t;

/* What may happen to the next bytes of a job's log. */
typedef enum hv_joblog_verdict {
    HV_JOBLOG_WRITE,   /* append */
    HV_JOBLOG_CAPPED,  /* the job's own cap: drop, for good */
    HV_JOBLOG_NOSPACE, /* the total cap or the free-space floor: drop while it lasts */
} hv_joblog_verdict_t;

/* The limits that apply on a file system of fs_size bytes (0 = unknown: lim as is): the total
 * cap is at most fs_size / 2, the reserve at most fs_size / 4. Pure. */
hv_joblog_limits_t hv_joblog_effective(const hv_joblog_limits_t *lim, uint64_t fs_size);

/* The verdict on len more bytes for a job that wrote job_bytes, when every log together holds
 * total bytes and fs_free bytes are free (UINT64_MAX = unknown). eff comes from
 * hv_joblog_effective. Pure. */
hv_joblog_verdict_t hv_joblog_decide(const hv_joblog_limits_t *eff, uint64_t job_bytes,
                                     uint64_t total, uint64_t fs_free, uint64_t len);

/* The logs directory and its accounting. */
typedef struct hv_joblogs_s hv_joblogs_t;

/* Free space of a file system: *size and *avail in bytes; -1 when it cannot be read. */
typedef int (*hv_joblog_statfs_fn)(const char *dir, uint64_t *size, uint64_t *avail);

/* One job's log: caller storage, set by hv_joblog_open (fd -1 before, so that closing an unopened
 * log is harmless). Fields are read-only outside joblog.c. */
typedef struct hv_joblog_s {
    uint64_t job_id;
    int fd;            /* append descriptor; -1 when the file could not be opened */
    uint64_t bytes;    /* the file's length: every byte written (whole lines) */
    uint64_t dropped;  /* bytes of output not written (caps, no space) since the head started */
    int capped;        /* the job's own cap was hit: nothing more is written */
    int paused;        /* dropping for want of room; a "resumed" marker follows once room is back */
    uint64_t paused_b; /* dropped bytes when the pause began (the resumed marker says how many) */
    int actor;         /* an actor's log (job_id is the actor's id): its messages say "actor" */
} hv_joblog_t;

/* dir is the logs directory (created if missing; borrowed copy taken); epoch names the state
 * database's epoch that prefixes every file name ("" = none; copied). Sums the sizes of the
 * *.log files already there. statfs NULL = statvfs(3) (tests pass a fake). */
hv_err hv_joblogs_create(const char *dir, const char *epoch, const hv_joblog_limits_t *lim,
                         hv_joblog_statfs_fn statfs, hv_joblogs_t **out);
/* NULL is a no-op. Every hv_joblog_t must be closed before. */
void hv_joblogs_destroy(hv_joblogs_t *ls);

/* The path of job_id's log file, into buf (cut to len). */
void hv_joblog_path(const hv_joblogs_t *ls, uint64_t job_id, char *buf, size_t len);

/* Opens (appends to) the log of job_id into l. On failure l->fd is -1, the cause is logged
 * once, and appends are dropped (counted). */
void hv_joblog_open(hv_joblogs_t *ls, hv_joblog_t *l, uint64_t job_id);
/* An actor's output (head/driver/actors_drv.c), kept like a job's, under the same caps:
 * <dir>/<epoch>-actor-<id>.log ("actor-<id>.log" for the legacy epoch); its lines' rank is the
 * actor's process (incarnation). */
void hv_joblog_actor_path(const hv_joblogs_t *ls, uint64_t actor_id, char *buf, size_t len);
void hv_joblog_open_actor(hv_joblogs_t *ls, hv_joblog_t *l, uint64_t actor_id);

/* Closes l (one whose fd is -1, never opened or already closed, is fine). */
void hv_joblog_close(hv_joblog_t *l);

/* Appends n lines (borrowed; '\n' and '\r' inside a line become spaces, a line is cut at
 * 16384 bytes) of rank's stream (1 stdout, 2 stderr), subject to the caps. now_ms is the
 * monotonic clock. Returns 1 when the file grew (watchers have news), else 0. */
int hv_joblog_append(hv_joblogs_t *ls, hv_joblog_t *l, uint32_t rank, uint32_t stream,
                     char *const *lines, size_t n, uint64_t now_ms);

/* Appends one "[hv] ..." line of the head's own (as rank's stderr), regardless of the caps but
 * only when the file system has the bytes. Returns 1 when written. */
int hv_joblog_note(hv_joblogs_t *ls, hv_joblog_t *l, uint32_t rank, const char *text);

/* ---- reading a log back --------------------------------------------------------------------- */

/* Parses a stored line "[rank]<stdout|stderr>:text" in place: 0 and its parts (text points into
 * line), or -1 when it is not one. Pure. */
int hv_joblog_parse_line(char *line, uint32_t *rank, uint32_t *stream, char **text);

/* hv_joblog_line_t, hv_joblog_page_t: a page of a log read back (core/records.h). */

/* Reads the whole lines of the log at path from byte offset: at most max_lines lines and
 * about max_bytes bytes of them (a line being written is left for the next page). A missing
 * file is an empty page. HV_OK, HV_EIO (unreadable) or HV_ENOMEM; free with
 * hv_joblog_page_free (also after a failure). Blocking file I/O. */
hv_err hv_joblog_read_page(const char *path, uint64_t offset, size_t max_lines, size_t max_bytes,
                           hv_joblog_page_t *out);
void hv_joblog_page_free(hv_joblog_page_t *p);

/* The data file system's free bytes as last read (read again when fresh, or when the reading
 * is older than HV_JOBLOG_STATFS_MS at now_ms); UINT64_MAX when unknown. */
uint64_t hv_joblogs_free_bytes(hv_joblogs_t *ls, uint64_t now_ms, int fresh);
/* Bytes held by every log together (as counted). */
uint64_t hv_joblogs_total(const hv_joblogs_t *ls);

#endif
