/*
 * spawn: one child process on a libuv loop, as hvagent runs workers. It starts the program in
 * its own session and process group (UV_PROCESS_DETACHED) with stdin on /dev/null and
 * stdout/stderr on pipes, splits both pipes into lines (a line longer than HV_PROC_LINE_MAX is
 * cut into pieces, a last line without newline is delivered at EOF), and kills the whole process
 * group: SIGTERM, then SIGKILL after a grace period. It is not a job manager: it knows nothing of
 * workers, artifacts or the head (agent/workers.c is its caller; spawn_test.c tests it).
 *
 * Exit is reported once, after the leader was reaped AND both pipes reached EOF, so no trailing
 * output is lost. When the leader is gone the rest of its process group is killed (SIGKILL), so
 * grandchildren do not outlive a worker; if a straggler that escaped the group still holds a
 * pipe open, the pipes are closed HV_PROC_EOF_WAIT_MS after the leader's exit.
 *
 * Threads: every function must be called on the loop's thread; callbacks run there.
 */
#ifndef HV_AGENT_SPAWN_H
#define HV_AGENT_SPAWN_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "err.h"

#define HV_PROC_LINE_MAX (16u * 1024u) /* longest line piece delivered, in bytes */
#define HV_PROC_EOF_WAIT_MS 2000       /* after the leader exits, wait this long for pipe EOF */

typedef struct hv_proc_s hv_proc_t;

/* The line splitter every output pipe uses, pure (no I/O; fuzzed in tests/fuzz): bytes in, lines
 * out. A line is delivered without its newline; one longer than HV_PROC_LINE_MAX comes in pieces
 * of at most that size, cut before an incomplete UTF-8 sequence where the next byte continues
 * it. Zero-initialize one per stream. */
typedef struct hv_linesplit_s {
    size_t len;                  /* bytes pending in line */
    char line[HV_PROC_LINE_MAX]; /* the current, unterminated line */
} hv_linesplit_t;
typedef void (*hv_linesplit_cb)(void *ud, const char *line, size_t len);
/* Feeds n bytes; cb gets each complete line or piece. Stops early once *stop is nonzero (stop
 * may be NULL); the rest of data is then dropped. */
void hv_linesplit_feed(hv_linesplit_t *ls, const char *data, size_t n, hv_linesplit_cb cb, void *ud,
                       const int *stop);
/* Delivers the unterminated last line, if any, and empties ls. */
void hv_linesplit_flush(hv_linesplit_t *ls, hv_linesplit_cb cb, void *ud);

/* One line (or piece of a long line) of output, without the newline. stream: 1 = stdout,
 * 2 = stderr. line is borrowed for the duration of the callback; it is not NUL-terminated. */
typedef void (*hv_proc_line_cb)(hv_proc_t *p, int stream, const char *line, size_t len, void *ud);

/* The process is over. exit_code: the exit status, or -1 if a signal ended it; term_signal: the
 * signal, or 0. Called exactly once, unless hv_proc_close ran first. p is freed after the
 * callback returns: drop every reference to it here. */
typedef void (*hv_proc_exit_cb)(hv_proc_t *p, int exit_code, int term_signal, void *ud);

typedef struct hv_proc_opts_s {
    const char *file;        /* program to exec (a path; PATH is searched if it has no '/') */
    char *const *argv;       /* NULL-terminated argv including argv[0]; borrowed */
    char *const *env;        /* NULL-terminated "K=V" list; NULL inherits the agent's; borrowed */
    const char *cwd;         /* working directory; NULL = the agent's; borrowed */
    hv_proc_line_cb on_line; /* required */
    hv_proc_exit_cb on_exit; /* required */
    void *ud;                /* passed to the callbacks */
    int set_user;            /* 1: the child runs as uid/gid (setgid, setgroups(0), setuid) */
    unsigned uid, gid;
} hv_proc_opts_t;

/* Starts the process. On success *out is the running process (owned by the loop; it frees itself
 * after on_exit or hv_proc_close). On failure returns HV_ENOTFOUND (no such program),
 * HV_EPERM (not executable), HV_ENOMEM or HV_EIO, and writes "<strerror of the cause>" (e.g.
 * "Permission denied") into errbuf (may be NULL). The options are copied as needed. */
hv_err hv_proc_spawn(uv_loop_t *loop, const hv_proc_opts_t *o, hv_proc_t **out, char *errbuf,
                     size_t errlen);

/* The leader's pid (also its process group id). */
int hv_proc_pid(const hv_proc_t *p);

/* True once the leader has exited (output may still be arriving). */
int hv_proc_exited(const hv_proc_t *p);

/* Sends SIGTERM to the process group, and SIGKILL to the group grace_ms later unless the process
 * is over by then; grace_ms = 0 sends SIGKILL at once. A second call can only bring the SIGKILL
 * earlier. No effect after exit was reported. */
void hv_proc_kill(hv_proc_t *p, uint32_t grace_ms);

/* Stops watching without waiting: sends SIGKILL to the group (unless kill_group is 0), closes
 * the handles and frees p once they are closed. on_exit is not called. For shutdown. */
void hv_proc_close(hv_proc_t *p, int kill_group);

#endif
