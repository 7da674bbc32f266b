/*
 * head: hvhead's in-memory model and the functions its modules share. Internal to head/.
 *
 * One libuv loop thread owns everything here: the rpc engine delivers every callback on it, and
 * the 200 ms tick runs on it. sqlite (store.c) is the source of truth: every state change is
 * written there before it is acted on (orders sent, replies given), so a head restarted after a
 * SIGKILL reloads nodes, jobs and workers and carries on (head_load).
 *
 * Modules:
 *   main.c           CLI, config, start-up and shutdown, the tick
 *   head_cluster.c   Cluster service: Join, Session (leases, orders, agent events), Fetch
 *   head_jobs.c      Jobs service: upload, submit, get/list, cancel, watch (logs and events)
 *   head_driver.c    job lifecycle: placement, spawning, failure, completion, timeouts
 *   head_artifacts.c uploaded binaries and files, by sha256
 *   head_rdzv.c      Rendezvous service: rounds, done, membership pushes, key-value
 */
#ifndef HV_HEAD_HEAD_H
#define HV_HEAD_HEAD_H

#include <stdint.h>
#include <stdio.h>

#include <uv.h>

#include "config.h"
#include "err.h"
#include "hv.pb-c.h"
#include "rpc.h"
#include "store.h"

#define HEAD_TICK_MS 200
#define HEAD_LOG_MAX_LINE 16384

typedef struct head_s head_t;
typedef struct head_job_s head_job_t;
typedef struct head_node_s head_node_t;
typedef struct head_worker_s head_worker_t;

struct head_node_s {
    hv_node_row_t row;          /* persisted fields (owned strings) */
    hv_rpc_call_t *session;     /* live Session stream, or NULL */
    uint64_t lease_deadline;    /* monotonic ms; dead when passed */
    uint64_t persisted_seen_ms; /* last last_seen_ms written to the store */
    uint32_t slots_used;
    uint64_t gpus_used_mask;
    int reconcile_pending;   /* hello seen; reconcile at the next heartbeat */
    uint64_t *hello_running; /* worker ids the agent listed in hello (owned) */
    size_t n_hello_running;
    uint64_t max_seq_applied; /* highest AgentMsg.seq applied (this head process) */
    head_node_t *next;
};

struct head_worker_s {
    hv_worker_row_t row;      /* persisted fields */
    head_job_t *job;          /* owner */
    head_node_t *node;        /* where it runs (NULL if the node is unknown) */
    uint64_t kill_deadline;   /* monotonic ms: lost if not exited by then (0 = no kill) */
    char *rdzv_addr;          /* data-plane address from JoinRound (owned) */
    hv_rpc_call_t *rdzv_call; /* JoinRound waiting for the round to close */
    int done;                 /* reported Done through the rendezvous */
};

typedef struct head_watch_s head_watch_t;
typedef struct head_kvwait_s head_kvwait_t;
typedef struct head_kv_s head_kv_t;

struct head_job_s {
    hv_job_row_t row;        /* persisted fields */
    Hvpb__V1__JobSpec *spec; /* unpacked spec (owned) */
    head_worker_t **workers; /* workers of the current attempt, by rank (np entries) */
    uint32_t n_workers;
    uint64_t wait_deadline; /* monotonic ms: fail if not placed by then */
    int ending;             /* a terminal state is decided; waiting for workers to end */
    char *end_state;        /* the terminal state to write once workers ended (owned) */
    FILE *log;              /* append handle of <data>/logs/<id>.log */
    uint64_t log_lines;     /* lines written so far */
    uint64_t log_bytes;     /* bytes written so far */
    head_watch_t *watchers;
    uint64_t last_event_seq;      /* newest event of this job (0 = unknown: ask the store) */
    head_kv_t *kv;                /* rendezvous key-value pairs */
    head_kvwait_t *kvwaits;       /* KvGet calls waiting for a key */
    uint64_t rdzv_deadline;       /* monotonic ms: the open round fails after this */
    hv_rpc_call_t **member_watch; /* WatchMembers streams */
    size_t n_member_watch;
    head_job_t *next;
};

struct head_s {
    uv_loop_t *loop;
    hv_head_config_t cfg;
    hv_store_t *store;
    hv_rpc_engine_t *eng;
    hv_rpc_server_t *srv;
    uv_timer_t tick;
    uv_signal_t sigint, sigterm;
    int port;            /* bound port */
    char advertise[300]; /* host:port agents and workers use to reach the head */
    char pid_path[4096];
    int stopping;
    head_node_t *nodes;
    head_job_t *jobs;    /* active and recently ended jobs */
    uint64_t started_ms; /* monotonic start time */
};

/* ---- shared helpers (main.c) ---- */
void head_event(head_t *h, uint64_t job_id, uint64_t node_id, const char *kind, const char *fmt,
                ...) __attribute__((format(printf, 5, 6)));
/* Replaces an owned string with a copy of src ("" for NULL). */
void head_set_str(char **dst, const char *src);
/* Logs a store failure and returns rc (a write the head could not make is never silent). */
hv_err head_store_failed(head_t *h, hv_err rc, const char *what);

/* ---- cluster (head_cluster.c) ---- */
hv_err head_cluster_register(head_t *h);
head_node_t *head_node_by_id(head_t *h, uint64_t id);
/* Sends an order to a node's agent; HV_ECLOSED if the node has no session. */
hv_err head_node_send(head_node_t *n, const Hvpb__V1__HeadMsg *msg);
void head_cluster_tick(head_t *h, uint64_t now);
void head_cluster_shutdown(head_t *h);

/* ---- artifacts (head_artifacts.c) ---- */
hv_err head_artifacts_init(head_t *h);
/* True if the artifact is stored and complete. */
int head_artifact_present(head_t *h, const char *digest);
/* Path of a stored artifact (into buf). */
hv_err head_artifact_path(head_t *h, const char *digest, char *buf, size_t len);
hv_err head_artifacts_register(head_t *h);

/* ---- jobs service (head_jobs.c) ---- */
hv_err head_jobs_register(head_t *h);
void head_jobs_fill_view(head_t *h, head_job_t *j, Hvpb__V1__JobView *v, void **scratch);
void head_jobs_free_view(Hvpb__V1__JobView *v, void *scratch);
/* A log batch arrived for worker w. */
void head_jobs_log(head_t *h, head_worker_t *w, uint32_t stream, char **lines, size_t n);
/* Something the job's watchers may want changed (event appended, state changed). */
void head_jobs_notify(head_t *h, head_job_t *j);
void head_jobs_close_watchers(head_job_t *j);

/* ---- driver (head_driver.c) ---- */
hv_err head_driver_load(head_t *h);
head_job_t *head_job_by_id(head_t *h, uint64_t id);
head_worker_t *head_worker_by_id(head_t *h, uint64_t id);
/* Loads an ended job evicted from memory back from the store. HV_ENOTFOUND if unknown. */
hv_err head_driver_restore_job(head_t *h, uint64_t id, head_job_t **out);
/* Creates a job from a validated spec; *out receives it. */
hv_err head_driver_submit(head_t *h, Hvpb__V1__JobSpec *spec, uint32_t np, head_job_t **out);
/* Places pending jobs on free slots and sends spawn orders. */
void head_driver_schedule(head_t *h);
void head_driver_worker_started(head_t *h, head_worker_t *w, int pid);
void head_driver_worker_exited(head_t *h, head_worker_t *w, int exit_code, int term_signal,
                               const char *reason);
/* The worker is gone without an exit report (node dead, agent restarted). */
void head_driver_worker_lost(head_t *h, head_worker_t *w, const char *reason);
void head_driver_node_dead(head_t *h, head_node_t *n, const char *reason);
/* Ends a job: kills its live workers, then writes state (failed/cancelled) with reason. */
void head_driver_end_job(head_t *h, head_job_t *j, const char *state, const char *reason);
void head_driver_tick(head_t *h, uint64_t now);
int head_job_terminal(const head_job_t *j);
uint32_t head_free_slots(head_t *h, uint32_t slots_per_host);
uint32_t head_capacity(head_t *h, uint32_t slots_per_host);
void head_driver_free(head_t *h);

/* ---- rendezvous (head_rdzv.c) ---- */
hv_err head_rdzv_register(head_t *h);
void head_rdzv_tick(head_t *h, uint64_t now);
/* The job's membership changed or it ended: fail waiting joins, push to watchers. */
void head_rdzv_job_ended(head_t *h, head_job_t *j);
void head_rdzv_free_job(head_job_t *j);

#endif
