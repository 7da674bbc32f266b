/*
 * workers: the worker processes of one node, as the head orders them. A spawn order becomes:
 * fetch the binary and files through the artifact cache, lay them out in
 * <work-dir>/jobs/<job_id>/w<worker_id>/, and start the program there (agent/spawn.c) with the
 * agent's environment plus the order's env and the HV_* variables. Kill orders, the lease expiry
 * and shutdown kill process groups with a grace period. What happens is reported through three
 * callbacks (started, exited, output line); the owner (main.c) forwards them to the head.
 *
 * Every worker that was ordered gets exactly one exited callback (also when the fetch or the
 * spawn failed: exit_code -1 and a reason), unless hv_workers_destroy ran first. Each file the
 * cache hands over stays pinned there (safe from the cache's bound) until the worker has its
 * copy, or is given up on (killed while fetching, another file failed, the spawn failed); then
 * it is released (hv_artifact_release), never later than the record is freed. Not here: talking
 * to the head (agent/session.c), the cache itself (agent/artifact.c).
 *
 * Privacy: a worker's directory is 0700 and, with run_as, belongs to that user, as do the files
 * placed there (private copies, never links into the cache, with no set-id, group or other
 * bits); jobs/ and jobs/<job> are 0711. The directory is removed (on libuv's thread pool) once
 * the worker's exit was reported; nothing in it is kept.
 *
 * Threads: the loop thread only; callbacks run there.
 */
#ifndef HV_AGENT_WORKERS_H
#define HV_AGENT_WORKERS_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "artifact.h"
#include "callfig.h"
#include "err.h"
#include "hv.pb-c.h"

/* Bounds on one spawn order, checked before anything else is done with it (the head has its
 * own, lower ones): beyond them the worker ends at once with "spawn failed: ...". Building a
 * worker's environment is linear, so an order within them costs the loop milliseconds. */
#define HV_WORKERS_MAX_ENV 65536u           /* --env entries */
#define HV_WORKERS_MAX_ARGS 65536u          /* arguments */
#define HV_WORKERS_MAX_FILES 4096u          /* --file entries */
#define HV_WORKERS_MAX_ARG_BYTES (8u << 20) /* env plus args, bytes (exec takes far less) */

#define HV_WORKERS_STATE_MAX (1u << 20) /* an actor's saved state sent to the head, bytes */

typedef struct hv_workers_s hv_workers_t;

typedef struct hv_workers_cbs_s {
    void (*on_started)(uint64_t worker_id, int pid, void *ud);
    /* reason: "" for an exit on its own, else why (borrowed). */
    void (*on_exited)(uint64_t worker_id, int exit_code, int term_signal, const char *reason,
                      void *ud);
    /* One output line (stream 1 = stdout, 2 = stderr); line borrowed, not NUL-terminated. */
    void (*on_line)(uint64_t worker_id, int stream, const char *line, size_t len, void *ud);
    /* Optional: an actor's process (an order with actor_secret) wrote its address file
     * (HV_ACTOR_ADDR_FILE, <its dir>/actor.addr, polled every 50 ms): "host:port", borrowed. */
    void (*on_address)(uint64_t worker_id, int pid, const char *address, void *ud);
    /* Optional: an actor's process left a saved state (HV_ACTOR_STATE_OUT, <its dir>/
     * hv-actor-state.out, at most HV_WORKERS_STATE_MAX bytes): called just before on_exited
     * with it (borrowed). */
    void (*on_state)(uint64_t worker_id, const void *data, size_t len, void *ud);
    /* Optional: the same for a larger state (over HV_WORKERS_STATE_MAX), called just before
     * on_exited: path (borrowed) is the file, moved out of the process's directory to
     * <work_dir>/states/ (the callee uploads and removes it); or path NULL and why (borrowed):
     * it is over the order's actor_state_max, or could not be kept. */
    void (*on_state_file)(uint64_t worker_id, const char *path, uint64_t size, const char *why,
                          void *ud);
    /* Optional: an actor's process's call figures (HV_ACTOR_FIGURES_OUT, <its dir>/
     * hv-actor-figures, read every second): its running totals when they changed; final (just
     * before on_exited, before on_state): its last ones. f borrowed. Returns HV_OK when the
     * report was taken; otherwise the same figures are offered again at the next read. */
    hv_err (*on_figures)(uint64_t worker_id, const hv_callfig_t *f, int final, void *ud);
    void *ud;
} hv_workers_cbs_t;

typedef struct hv_workers_config_s {
    const char *work_dir;  /* absolute path; jobs/ goes below it */
    const char *node_name; /* HV_NODE */
    const char *ca_file;   /* HV_CA_FILE: the CA that verifies the head (TLS), or NULL / "" */
    int run_as;            /* 1: workers run as uid/gid, their job dirs are theirs */
    unsigned run_uid, run_gid;
    const char *run_user;   /* its name (USER, LOGNAME), when run_as */
    const char *run_home;   /* its home (HOME), when run_as */
    const char *actor_host; /* actors listen on it (HV_ACTOR_LISTEN=<host>:0); NULL: 127.0.0.1 */
} hv_workers_config_t;

/* A running worker. */
typedef struct hv_worker_pid_s {
    uint64_t worker_id;
    int pid;
} hv_worker_pid_t;

/* Creates the table. loop and cache are borrowed and must outlive it; cfg and cbs are copied. */
hv_err hv_workers_create(uv_loop_t *loop, const hv_workers_config_t *cfg,
                         hv_artifact_cache_t *cache, const hv_workers_cbs_t *cbs,
                         hv_workers_t **out);

/* Starts a worker (asynchronously: fetch, lay out, spawn). spec is borrowed. An order for a
 * worker id that is already here is ignored. A bad order (file names with '/' or "..") or a
 * table that is closing produces an exited callback with exit_code -1 and the reason. */
void hv_workers_spawn(hv_workers_t *w, const Hvpb__V1__SpawnWorker *spec);

/* Every actor's process's figures are reported again at the next read (every second), changed
 * or not: after a new session with the head, which may not have got the last ones. */
void hv_workers_figures_again(hv_workers_t *w);

/* Kills one worker: SIGTERM to its group, SIGKILL after grace_ms. A worker still fetching never
 * starts. Unknown ids are ignored (logged at info). reason is copied into the exit reason. */
void hv_workers_kill(hv_workers_t *w, uint64_t worker_id, uint32_t grace_ms, const char *reason);

/* Kills every worker as hv_workers_kill does. With refuse_new set, later spawn orders are
 * answered with an exit ("the agent is shutting down"). */
void hv_workers_kill_all(hv_workers_t *w, uint32_t grace_ms, const char *reason, int refuse_new);

/* Workers ordered and not yet reported exited (fetching or running). */
size_t hv_workers_count(const hv_workers_t *w);

/* The live workers, i.e. every worker not yet reported exited: running ones with their pid,
 * ones still fetching with pid 0 (they will start, and the head must not count them lost).
 * Returns the count; *out is an owned array (hv_free), NULL when the count is 0 or memory ran
 * out. */
size_t hv_workers_running(const hv_workers_t *w, hv_worker_pid_t **out);

/* Forgets every worker without waiting: running ones get SIGKILL to their group; no more
 * callbacks. Call after the artifact cache was stopped and the rpc engine destroyed (so no fetch
 * callback is pending). destroy(NULL) is a no-op. */
void hv_workers_destroy(hv_workers_t *w);

/* Test hook: key comparisons made in the tables that build workers' environments, since the
 * process started (loop thread only). workers_test checks that an order with 50,000 --env
 * entries costs a number of them proportional to its size, whatever the machine's speed. */
uint64_t hv__workers_env_probes(void);

#endif
