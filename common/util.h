/*
 * util: small OS helpers every binary shares: clocks, paths and files, daemonizing with a pid
 * file, parsing "host:port" and sizes. No third-party dependency. Not thread-hostile: every
 * function is reentrant.
 */
#ifndef HV_COMMON_UTIL_H
#define HV_COMMON_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "err.h"

/* Monotonic milliseconds (for deadlines and leases). */
uint64_t hv_now_ms(void);
/* Wall-clock milliseconds since the epoch (for display and stored timestamps). */
uint64_t hv_wall_ms(void);
/* The wall-clock time ms from now: the deadline pthread_cond_timedwait takes. */
struct timespec hv_realtime_in_ms(uint32_t ms);
/* Formats a wall-clock ms value as "2026-11-21 10:04:05" (local time) into buf. */
const char *hv_fmt_time(uint64_t wall_ms, char *buf, size_t len);

/* mkdir -p with the given mode. HV_EEXIST: path exists and is not a directory. */
hv_err hv_mkdirs(const char *path, unsigned mode);
/* hv_mkdirs, and on failure the reason in err, for "cannot create PATH: <err>": "it exists and is
 * not a directory", "PARENT exists and is not a directory" (the first of its parents that is not
 * one), or the system's reason ("Permission denied"). */
hv_err hv_mkdirs_msg(const char *path, unsigned mode, char *err, size_t errlen);
/* Reads a whole file (at most max bytes) into an owned NUL-terminated buffer. */
hv_err hv_read_file(const char *path, size_t max, char **out, size_t *len_out);
/* Writes data to path atomically (temp file + fsync + rename). */
hv_err hv_write_file_atomic(const char *path, const void *data, size_t len, unsigned mode);

/* A daemon is known by the lock it holds, never by a pid alone: a pid file left by a daemon that
 * was killed can name any later process once the pid is reused. So the pid file is itself a lock
 * file: the daemon holds an fcntl write lock on it while it lives (the kernel drops it with the
 * process), and `stop` signals the lock's holder (hv_lock_holder), never the number the file
 * holds. An unlocked pid file is stale whatever process its number names. */

/* Detaches from the terminal (double fork, setsid, stdio to log_path or /dev/null) and claims
 * pid_path for the daemon (hv_pidfile_claim; HV_EEXIST, before forking, if a live process holds
 * its lock). Returns in the daemon only; the parent exits 0 once the pid file is written. */
hv_err hv_daemonize(const char *pid_path, const char *log_path);
/* Like hv_daemonize, but the parent stays until the daemon calls hv_daemon_ready (it prints the
 * daemon's line on stdout and exits 0) or hv_daemon_failed (it prints the reason on stderr and
 * exits 1), the daemon exits first, or wait_ms pass (exit 1, saying so): so a start that fails
 * after the fork (port in use, locked data directory) is reported by the command that started it.
 * Returns in the daemon only. */
hv_err hv_daemonize_wait(const char *pid_path, const char *log_path, uint32_t wait_ms);
/* In a daemon from hv_daemonize_wait: answer the waiting parent (once; later calls and calls in
 * a process that is no such daemon do nothing). */
void hv_daemon_ready(const char *line);
void hv_daemon_failed(const char *why);

/* Takes an exclusive fcntl lock on path (created 0600 if missing; our pid is written into it for
 * people), held while the process lives (or until *fd_out is closed). HV_EEXIST if another live
 * process holds it, with its pid in *holder_out (0 if unknown). */
hv_err hv_lock_take(const char *path, int *fd_out, int *holder_out);
/* The pid of the process holding path's lock: 0 if none (a missing file included), -1 if it is
 * held by a process whose pid we cannot see (another pid namespace). Does not take it. */
int hv_lock_holder(const char *path);

/* Makes pid_path this process's pid file: locks it (as hv_lock_take) and writes our pid into it;
 * the lock is kept until hv_pidfile_remove or the process ends. Nothing else in this process may
 * open that file (closing any descriptor of it would drop the lock). HV_EEXIST if another live
 * process holds it, its pid in *holder_out (may be NULL). */
hv_err hv_pidfile_claim(const char *pid_path, int *holder_out);
/* Removes pid_path and lets its lock go, if this process claimed it; else does nothing. */
void hv_pidfile_remove(const char *pid_path);
/* Removes pid_path if no process holds its lock (a stale file). Returns the pid the stale file
 * named (-1 if it named none), 0 if nothing was removed (no file, or a live holder). */
int hv_pidfile_remove_stale(const char *pid_path);
/* What /proc says of pid: 0 it is gone; 1 it runs (or cannot be read: taken as running); 2 it
 * has exited and its parent has not reaped it (a zombie). */
int hv_pid_state(int pid);
/* Stops the daemon that holds lock_path's lock: sends it sig, waits up to timeout_ms for it to
 * let go of the lock and exit, then (kill_after) SIGKILLs it if it still holds the lock. The
 * holder's pid goes to *pid_out (may be NULL). HV_ENOTFOUND: nobody holds the lock (nothing is
 * signalled); HV_EPERM: it is held from another pid namespace; HV_ETIMEDOUT: it did not stop. */
hv_err hv_stop_locked(const char *lock_path, int sig, uint32_t timeout_ms, int kill_after,
                      int *pid_out);

/* Splits "host:port" ("[::1]:7000" too). host gets at most hostlen-1 chars. */
hv_err hv_parse_hostport(const char *s, char *host, size_t hostlen, int *port);
/* Parses "123", "64KiB", "512MiB", "1GiB", "10MB", "1G" into bytes. */
hv_err hv_parse_size(const char *s, uint64_t *out);
/* Parses a decimal unsigned integer with range check; the whole string must be consumed. */
hv_err hv_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* "1.5 GiB", "12 KiB", "17 B" */
const char *hv_fmt_size(uint64_t bytes, char *buf, size_t len);

#endif
