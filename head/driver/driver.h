/*
 * driver: the one owner of hvhead's nodes, jobs and workers. The services (svc_cluster,
 * svc_jobs, svc_rdzv, svc_artifacts) decode requests and call the driver; the driver decides
 * with the pure core (jobm.h for jobs, rounds.h, blacklist.h, nodes.h, sched.h), stores every
 * decision in sqlite (store.h) and only then acts, through the hv_driver_io_t it was given at
 * creation: orders to agents, answers to rendezvous joins, membership pushes, watcher updates.
 * When a store write fails, the actions wait: the next tick writes again, then acts (a decision
 * is never announced before it is durable, and never dropped).
 *
 * What the driver does not do: protobuf, gRPC calls or streams (the services own them; the
 * driver names workers, nodes and jobs by id), or the bytes of files: the store layer
 * (head/store/: sqlite, artifacts, job logs, state copies) does, under the driver, which alone
 * links it; the services reach it through the driver's views (views.h) and commands.
 *
 * The model structs below are read by the services to build views; only the driver writes them
 * (driver.c and its driver_*.c files).
 * Threads: the head's loop thread only. Times: `now` arguments are hv_now_ms() (monotonic);
 * what is persisted uses the wall clock.
 */
#ifndef HV_HEAD_DRIVER_H
#define HV_HEAD_DRIVER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "admit.h"
#include "blacklist.h"
#include "callfig.h"
#include "cluster.h"
#include "config.h"
#include "err.h"
#include "fleet.h"
#include "jobfig.h"
#include "jobm.h"
#include "nodes.h"
#include "records.h"
#include "ringev.h"
#include "tput.h"

#define HV_DRV_TPUT_SIZES 8 /* world sizes a job's throughput is kept for */

typedef struct hv_driver_s hv_driver_t;
/* The store layer's handles, opaque here (head/store/; the driver's own files see them). */
typedef struct hv_store_s hv_store_t;
typedef struct hv_statecopies_s hv_statecopies_t;
typedef struct hv_artifacts_s hv_artifacts_t;

/* ---- what the driver asks of the services --------------------------------------------------- */

typedef enum hv_order_kind {
    HV_ORDER_SPAWN = 0,
    HV_ORDER_KILL = 1,
    HV_ORDER_DRAIN = 2,
    HV_ORDER_UNDRAIN = 3,
    HV_ORDER_COPY_RELEASE = 4, /* a keeper agent may drop job_id's copies older than (generation,
                                  commit), or all of them (drop_all) */
} hv_order_kind_t;

/* An order for a node's agent. Everything borrowed for the duration of the call. */
typedef struct hv_order_s {
    hv_order_kind_t kind;
    uint64_t worker_id, job_id;                  /* SPAWN, KILL */
    uint32_t rank, size, local_rank, local_size; /* SPAWN: placement */
    uint32_t generation;                         /* SPAWN: the job's round at placement */
    int gpu;                                     /* SPAWN: -1 = none */
    const uint8_t *spec;                         /* SPAWN: the packed JobSpec */
    size_t spec_len;
    uint32_t grace_ms;  /* KILL */
    const char *reason; /* KILL, DRAIN */
    uint64_t actor_id;  /* SPAWN of an actor's process (head/driver/actors_drv.c): the actor, whose
                         * secret the order carries in place of a worker's; 0 for job workers */
    const char *state_digest; /* SPAWN of an actor's process that loads a saved state: the
                               * artifact (sha256 hex) it is shipped as; NULL: none */
    uint64_t state_size;
    uint64_t commit; /* COPY_RELEASE (with job_id, generation) */
    int drop_all;    /* COPY_RELEASE: every copy of the job */
} hv_order_t;

/* One member of a closed round, by rank. */
typedef struct hv_round_peer_s {
    uint64_t worker_id;
    uint32_t rank, local_rank, local_size, cross_rank;
    const char *addr; /* data-plane address it joined with */
    const char *host; /* its node's name */
} hv_round_peer_t;

typedef struct hv_round_info_s {
    uint64_t job_id;
    uint32_t generation, size, cross_size, check_every;
    int rollback;
    const char *reason;
    const hv_round_peer_t *peers; /* size entries, by rank */
    /* The round resumes the job from the head's copy (every member was lost): that copy. */
    int resume;
    uint32_t copy_generation;
    uint64_t copy_commit, copy_size, copy_stored_ms;
    char copy_sha256[65];
    /* ...kept by a peer agent (issue 28 §3; 0: the head's): rank 0 reads it there with this
     * fetch grant, the head's newest copy being the fallback. */
    uint64_t keeper_node;
    char keeper_addr[256], keeper_name[130], keeper_grant[65];
    uint64_t keeper_expires_ms;
} hv_round_info_t;

typedef struct hv_driver_io_s {
    /* Sends an order down a node's Session. HV_ECLOSED when the node has no session now. */
    hv_err (*order)(void *ud, uint64_t node_id, const hv_order_t *o);
    /* Ends a node's Session (the node is dead, or a new agent replaced it). */
    void (*drop_session)(void *ud, uint64_t node_id);
    /* Answers the waiting JoinRound calls of the workers in to[] with the round. */
    void (*round)(void *ud, const hv_round_info_t *r, const uint64_t *to, size_t nto);
    /* Answers one waiting JoinRound: rc HV_OK = "removed from the job"; else refused with why. */
    void (*join_answer)(void *ud, uint64_t worker_id, hv_err rc, const char *why);
    /* Pushes a membership change to the job's WatchMembers streams (code: why the round opened,
     * an hv_ev_reason_t). */
    void (*push)(void *ud, uint64_t job_id, uint32_t generation, int failure, uint32_t code,
                 const char *reason, const uint64_t *removed, size_t nremoved);
    /* The job's state, events or log changed: its watchers may want news. */
    void (*job_changed)(void *ud, uint64_t job_id);
    /* The job ended and every worker is gone: end its rendezvous state (waits, streams, KV). */
    void (*job_finished)(void *ud, uint64_t job_id);
    /* Optional: call hv_driver_wake in delay_ms (a suspected node's grace ends then: its rounds
     * and its jobs' last holders need not wait for the next tick). */
    void (*wake)(void *ud, uint64_t delay_ms);
    /* A node credential (node_id, incarnation) was revoked and stored: the access table refuses
     * it from now on (its Session is dropped next). An error leaves it unrevoked in memory. */
    hv_err (*revoked)(void *ud, uint64_t node_id, uint64_t incarnation);
    /* Optional: runs work(arg) off the loop thread (a thread pool), then after(arg, cancelled)
     * on the loop thread; HV_OK, or an error when it cannot be queued (after is then not
     * called). The blocking file I/O of the driver's commands (a state copy's sync and rename)
     * goes here. NULL: the driver runs work in line (the unit tests). */
    hv_err (*queue_work)(void *ud, void (*work)(void *arg), void (*after)(void *arg, int cancelled),
                         void *arg);
    void *ud;
} hv_driver_io_t;

/* ---- the model (read-only outside driver.c) ------------------------------------------------- */

typedef struct hv_dnode_s {
    uint64_t id;
    char *name, *addrs, *labels, *instance_id, *peer; /* owned */
    uint32_t cpus;
    uint64_t memory_mb; /* MiB the agent offers, from its last join (stored with the node; 0:
                         * unknown) */
    int preemptible;
    uint64_t incarnation;
    hv_node_state_t state;
    uint64_t registered_ms, last_seen_ms; /* wall clock */
    hv_node_acct_t acct;                  /* slots, GPUs, what is taken */
    hv_lease_t lease;                     /* monotonic */
    int has_session;                      /* an agent Session is attached */
    int reconcile_pending;                /* hello seen; reconcile at the next heartbeat */
    uint64_t *hello_running;              /* worker ids listed in the hello (owned) */
    size_t n_hello_running;
    uint64_t persisted_seen_ms;
    int retired;     /* its autoscaler instance ended: once not alive, neither counted nor listed */
    char *copy_addr; /* its agent's Keeper service ("" or NULL: keeps no copies; memory only,
                           * from its last join) */
    uint64_t copy_memory; /* bytes of peers' copies its agent may keep */
    struct hv_dnode_s *next;
} hv_dnode_t;

typedef struct hv_djob_s hv_djob_t;

typedef struct hv_dworker_s {
    hv_jm_worker_t jm; /* first: the job machine's view */
    hv_djob_t *job;
    uint32_t attempt, place_gen; /* attempt number; the round the worker was placed in */
    int gpu, pid;
    char *reason;                  /* why it ended (owned) */
    char *addr;                    /* data-plane address of its last JoinRound (owned) */
    uint64_t started_ms, ended_ms; /* wall clock */
    uint64_t kill_deadline;        /* monotonic; lost when passed (0 = none) */
    int dead_seen; /* ended on a ring neighbour's death watch (ring_dead): its agent's exit
                    * report, when it comes, only records its real status and tells it (a
                    * job.note) */
} hv_dworker_t;

/* One node barred from one job's work. */
typedef struct hv_dbl_s {
    uint64_t node_id;
    uint64_t incarnation; /* the node's agent when it was struck; another one starts clean */
    hv_bl_entry_t e;
    char reason[HV_JM_REASON_MAX]; /* the last failure */
    struct hv_dbl_s *next;
} hv_dbl_t;

struct hv_djob_s {
    hv_jm_job_t jm; /* first: the job machine (state, rounds, workers) */
    char *name;     /* owned */
    uint8_t *spec;  /* packed JobSpec (owned) */
    size_t spec_len;
    uint32_t np, timeout_s, slots_per_host;
    hv_bl_policy_t bl;                           /* blacklist policy of the job */
    hv_dbl_t *blacklist;                         /* entries (owned list) */
    uint64_t submitted_ms, started_ms, ended_ms; /* wall clock */
    uint64_t wait_deadline;                      /* monotonic: fail if not placed by then */
    struct hv_joblog_s *log;                     /* its output file (store/joblog.h; owned) */
    int log_end_said;                            /* the dropped output was told at the end */
    uint64_t last_event_seq;                     /* newest event of the job */
    int dirty_row;                               /* row fields changed outside jobm */
    hv_ringev_t ringev; /* broken ring links its workers reported (in memory; core/ringev.h) */
    hv_jobfig_t figs;   /* its workers' own figures, summed from their reports (memory only) */
    /* Its step throughput per world size, from the same reports (stored before the policy uses
     * it: job_tput, schema v21; loaded again after a head restart). */
    hv_tput_sample_t tput[HV_DRV_TPUT_SIZES];
    size_t ntput;
    /* Its state copies' places (driver.c, loop thread; the rows are in the store). */
    char copy_path[512];     /* the head's copy's file ("" none) */
    char durable_key[512];   /* the durable copy's key in the tier ("" none) */
    uint64_t durable_began;  /* monotonic ms the last durable write began (0: never) */
    uint64_t restore_after;  /* monotonic ms before which a failed restore is not tried again */
    int durable_busy;        /* a durable write or restore of this job is in flight */
    hv_peer_copy_row_t peer; /* the index row of the copy a peer agent keeps (peer_copies;
                              * node_id 0: none), stored before it is counted on */
    /* Sharing the cluster (issue 26; core/fleet.h, head/driver/driver_fleet.c): fixed at
     * submission, then the fleet policy's newest decision about the job (stored with its row). */
    int32_t priority;            /* hvsubmit --priority: higher goes first */
    int preemptible;             /* hvsubmit --preemptible */
    char ns[64];                 /* hvsubmit --namespace: its quota and share ("": default) */
    int fleet_decided;           /* the policy decided about it (the fields below are set) */
    uint32_t fleet_target;       /* workers it should have (0: waits) */
    hv_fl_reason_t fleet_reason; /* why */
    uint64_t fleet_cause;        /* the job the reason names (0: none) */
    uint64_t fleet_ms;           /* wall ms of the decision */
    uint64_t resized_ms;         /* wall ms of its start or last resize (the anti-thrash hold) */
    uint32_t fleet_grant;        /* an elastic job admitted with more than -np: it starts at -np and
                           * grows to this after its first round, not held by the resize interval
                           * (memory only; 0: none) */
    uint64_t preempt_cause;      /* stopping at its next commit for this job (hv_jm_preempt_begin;
                               memory only; 0: none) */
    uint32_t preempt_from;       /* its workers when the stop began */
    struct hv_djob_s *next;
};

/* ---- lifecycle ------------------------------------------------------------------------------ */

/* cfg, store and io are borrowed and must outlive the driver. */
hv_err hv_driver_create(const hv_head_config_t *cfg, hv_store_t *store, const hv_driver_io_t *io,
                        hv_driver_t **out);
/* Loads nodes, active jobs with their workers and blacklists from the store. Every node gets one
 * lease from now to re-attach; open rounds get time for their workers to join again. */
hv_err hv_driver_load(hv_driver_t *d);
/* From now on nothing new is placed (shutdown). */
void hv_driver_stop(hv_driver_t *d);
void hv_driver_destroy(hv_driver_t *d);
/* Leases, deadlines, retries of failed store writes, cooldowns; places what can be placed. */
void hv_driver_tick(hv_driver_t *d, uint64_t now);
/* Places pending jobs and grows elastic jobs onto free slots. */
void hv_driver_schedule(hv_driver_t *d);
/* Told of every event once it is stored (an event whose append failed waits and is told when a
 * later write works; one dropped at the bound is never told): for counting
 * (head/services/metrics.c); it must not call the driver. f: the event's fields (never NULL;
 * node_id set as stored); data: the event's JSON object or NULL; all borrowed for the call. One
 * observer; NULL removes it. */
typedef void (*hv_driver_observe_fn)(void *ud, uint64_t job_id, uint64_t node_id, const char *kind,
                                     const hv_ev_fields_t *f, const char *data);
void hv_driver_set_observer(hv_driver_t *d, hv_driver_observe_fn fn, void *ud);

/* The actors' part of the head (head/driver/actors_drv.c) hooks in here, so the driver does not
 * call it by name: processes whose id is an actor's (hv_am_proc_is) go to it, and so do the
 * node and job events it cares about. Every hook is optional; main.c installs them. */
typedef struct hv_driver_actor_hooks_s {
    void (*started)(void *ud, uint64_t node_id, uint64_t proc, int pid, const char *address);
    void (*exited)(void *ud, uint64_t node_id, uint64_t proc, int code, int sig,
                   const char *reason);
    /* After an agent (re)attached: the actor processes it runs (the others are gone). */
    void (*reconcile)(void *ud, uint64_t node_id, const uint64_t *procs, size_t n);
    void (*node_lost)(void *ud, uint64_t node_id);
    /* A drain of node_id: notice_ms the time it has (its agent's notice; 0: unknown or none). */
    void (*node_drain)(void *ud, uint64_t node_id, uint32_t notice_ms);
    /* An actor's process saved its state, stored as the artifact digest (before its exit);
     * digest "" with why: it saved one that is not kept (why says so: over the limit, ...). */
    void (*state_saved)(void *ud, uint64_t node_id, uint64_t proc, const char *digest,
                        uint64_t size, const char *why);
    void (*job_ended)(void *ud, uint64_t job_id);
    void (*schedule)(void *ud); /* after the jobs were placed */
    /* Output lines of an actor's process (stream 1 stdout, 2 stderr; borrowed for the call),
     * from node_id's agent: what a worker's lines are to its job's log. */
    void (*log)(void *ud, uint64_t node_id, uint64_t proc, uint32_t stream, char **lines, size_t n);
    /* An actor's process's call figures (its running totals; final: its last ones). */
    void (*figures)(void *ud, uint64_t node_id, uint64_t proc, const hv_callfig_t *f, int final);
    /* 1 when fn is true of the packed JobSpec of an actor with a live process on node_id. */
    int (*node_specs_any)(void *ud, uint64_t node_id,
                          int (*fn)(const uint8_t *spec, size_t len, void *fud), void *fud);
    /* 1 when an actor process ordered on node_id loads the saved state stored as digest. */
    int (*node_state_is)(void *ud, uint64_t node_id, const char *digest);
    /* Calls fn once per actor that holds node slots now (a live process, a move's reserved
     * slot), with its namespace and what it holds: the fleet policy counts it in its quota. */
    void (*use)(void *ud,
                void (*fn)(void *fud, const char *ns, uint32_t slots, uint32_t gpus,
                           uint64_t memory_mb),
                void *fud);
    void *ud;
} hv_driver_actor_hooks_t;
void hv_driver_set_actor_hooks(hv_driver_t *d, const hv_driver_actor_hooks_t *h);

/* A namespace of the fleet policy as its newest decision left it (hvctl queue). Resources are
 * slots, GPUs, memory MiB; HV_FL_UNLIMITED (UINT64_MAX) in borrow: no limit. */
typedef struct hv_driver_ns_view_s {
    const char *name; /* borrowed from the config ("default" when none is configured) */
    uint32_t weight;
    int32_t priority; /* its jobs' default priority */
    uint64_t quota[3], borrow[3];
    uint64_t used[3];     /* its jobs' targets and its actors */
    uint64_t borrowed[3]; /* of used, beyond its quota */
    uint32_t share_pm;    /* its dominant share of the cluster, per mille, divided by weight */
    uint32_t waiting;     /* its jobs that wait */
} hv_driver_ns_view_t;
/* Fills out[0..max) with the namespaces, the configured ones in the config's order, then
 * "default" when the config does not list it (jobs of unlisted namespaces count there).
 * Returns how many there are (all zero used before the first decision). Loop thread. */
size_t hv_driver_fleet_namespaces(const hv_driver_t *d, hv_driver_ns_view_t *out, size_t max);
/* For actors_drv: an order down a node's Session (HV_ECLOSED without one); a slot (and GPU gpu
 * when >= 0) of a node taken or given back; the configured kill grace. */
hv_err hv_driver_order(hv_driver_t *d, uint64_t node_id, const hv_order_t *o);
void hv_driver_node_take(hv_driver_t *d, uint64_t node_id, int gpu, int give_back);
uint32_t hv_driver_kill_grace_ms(const hv_driver_t *d);
/* The actors' node_specs_any hook (0 without one): a node's fetch scope covers its actors. */
/* 1 when an actor's process on node_id is to load the saved state stored as artifact digest
 * (the agent may fetch it). */
int hv_driver_node_actor_state_is(hv_driver_t *d, uint64_t node_id, const char *digest);
int hv_driver_node_actor_specs_any(hv_driver_t *d, uint64_t node_id,
                                   int (*fn)(const uint8_t *spec, size_t len, void *fud),
                                   void *fud);
/* The output files' directory and caps (joblog.h), for the actors' logs (actors_drv.c). */
struct hv_joblogs_s *hv_driver_joblogs(hv_driver_t *d);
/* An actor's process's call figures from its agent (f borrowed; final: its last ones, before
 * its exit). Ignored for anything that is not an actor's process. */
void hv_driver_actor_figures(hv_driver_t *d, uint64_t node_id, uint64_t proc, const hv_callfig_t *f,
                             int final);
/* An actor's address on the wire: the same process reported again with its address. */
hv_err hv_driver_actor_address(hv_driver_t *d, uint64_t node_id, uint64_t proc, int pid,
                               const char *address);
/* Appends an event (data: a JSON object or NULL), then tells the observer and the job's
 * watchers. While the store fails the event waits, in order behind the others waiting, and the
 * tick writes it again (every second) before telling anyone; at most 4096 wait: beyond, new
 * events are dropped and counted (HV-EVENT-DROPPED in the log, then one `head.events_dropped`
 * event with the count once the store works). A job with an event waiting is not settled. */
void hv_driver_event(hv_driver_t *d, uint64_t job_id, uint64_t node_id, const char *kind,
                     const char *data, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* The same with the event's fields (f borrowed; NULL: none). The node's name is added from
 * node_id (or, when it is 0, from f->node_id). */
void hv_driver_event_f(hv_driver_t *d, uint64_t job_id, uint64_t node_id, const char *kind,
                       const hv_ev_fields_t *f, const char *data, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
/* Tests: the most events that wait for the store (0: the default, 4096). */
void hv__driver_set_event_bound(hv_driver_t *d, size_t max);

/* ---- nodes (Cluster service) ---------------------------------------------------------------- */

typedef struct hv_node_info_s {
    const char *name, *addrs, *labels, *instance_id, *peer;
    uint32_t slots, gpus, cpus;
    uint64_t memory_mb; /* 0: unknown */
    int preemptible;
    uint64_t incarnation;
    const char *copy_addr; /* its Keeper service (NULL or "": none) */
    uint64_t copy_memory;  /* bytes */
} hv_node_info_t;

/* Whether a Join is admitted (core/admit.h decides on ask, with the join token it names read
 * from the store here; ask is borrowed, its jtoken filled in). Stores nothing. */
void hv_driver_admit(hv_driver_t *d, hv_admit_ask_t *ask, hv_admit_t *out);
/* Registers a node (by name) or re-registers it, admitted by a (hv_driver_admit): a node
 * credential re-joins its own node only (HV_EPERM, a refused: NOT_THIS_NODE); a join token made
 * by hvctl has its use counted once the node is stored, before this returns (HV_EUNAVAIL when it
 * cannot be counted, HV_EAUTH when the token admits nobody any more: err says why, and the
 * agent's reply is that refusal). A new incarnation means the agent restarted and its old
 * workers are gone. HV_EIO when the node cannot be stored (err says why). Then places what can
 * be placed. */
hv_err hv_driver_node_join(hv_driver_t *d, const hv_node_info_t *info, hv_admit_t *a,
                           uint64_t *node_id, char *err, size_t errlen);
/* A Session opened with its hello (running: worker ids alive on the node). HV_ENOTFOUND for an
 * unknown node, HV_ESTATE when a newer agent holds the node, HV_EUNAVAIL when a dead node's
 * return cannot be stored (nothing changed; err says why; the agent tries again). */
hv_err hv_driver_node_attach(hv_driver_t *d, uint64_t node_id, uint64_t incarnation,
                             const uint64_t *running, size_t nrunning, char *err, size_t errlen);
/* The Session ended; the lease keeps running. */
void hv_driver_node_detach(hv_driver_t *d, uint64_t node_id);
/* The agent's Session ended from its side (the process died, its host went, or the connection
 * broke; why: gRPC's words): detached as above, and the node is suspected lost (nodes.h):
 * rounds of its jobs wait suspect_grace_ms for its workers, not the lease. The lease still
 * decides when the node is dead; an agent that re-attaches before ends the suspicion, and its
 * workers that a round left out meanwhile are told to stop again. */
void hv_driver_node_session_lost(hv_driver_t *d, uint64_t node_id, const char *why);
/* Any message from the node's agent: renews the lease. */
void hv_driver_node_heard(hv_driver_t *d, uint64_t node_id);
/* A heartbeat: after a hello, reconciles the node's workers (see driver.c). */
void hv_driver_node_heartbeat(hv_driver_t *d, uint64_t node_id);
/* Drain (drain = 1) or undrain a node. from_agent: the notice came from the agent itself (no
 * order is sent back). notice_ms: a preemption notice's time until the node goes (0: unknown),
 * which lets elastic jobs keep their workers there until replacements hold their state
 * (hv_jm_drain). HV_ESTATE to undrain a node that is not draining. The new state is stored
 * first: HV_EUNAVAIL when it cannot be (the node stays as it was, nothing is ordered; err, which
 * may be NULL, says why). */
hv_err hv_driver_node_drain(hv_driver_t *d, uint64_t node_id, int drain, const char *reason,
                            int from_agent, uint32_t notice_ms, char *err, size_t errlen);
/* Drains (drain = 1) or undrains n nodes as one input (hvctl drain A B C; at most
 * HV_DRIVER_DRAIN_MAX): every node is checked before any changes (HV_ENOTFOUND for an unknown
 * id, HV_EINVAL for one given twice, HV_ESTATE to undrain one that is not draining: *bad gets
 * its index, err says why), then every new state is stored in one transaction (HV_EUNAVAIL when
 * it cannot be: none changes, err says why), then each is acted on as hv_driver_node_drain does
 * within this one call, so that a job on several of them re-forms once. */
#define HV_DRIVER_DRAIN_MAX 64
hv_err hv_driver_nodes_drain(hv_driver_t *d, const uint64_t *ids, size_t n, int drain,
                             const char *reason, size_t *bad, char *err, size_t errlen);
/* The autoscaler gave the node's instance back: once the node is dead it no longer counts as
 * capacity (it will not come back) and is not listed. A new agent joining under the name
 * undoes it. */
void hv_driver_node_retire(hv_driver_t *d, uint64_t node_id);
/* A retired node that is no longer alive (draining or dead): views and capacity leave it out. */
static inline int hv_driver_node_hidden(const hv_dnode_t *nd) {
    return hv_node_hidden(nd->state, nd->retired); /* the rule is core/nodes' */
}
const hv_dnode_t *hv_driver_node(const hv_driver_t *d, uint64_t id);
const hv_dnode_t *hv_driver_node_by_name(const hv_driver_t *d, const char *name);
/* A node as a user names it (hvctl drain, undrain, node revoke): by name, else by id (a
 * decimal string); NULL when neither. */
const hv_dnode_t *hv_driver_node_find(const hv_driver_t *d, const char *name_or_id);
/* The first node (nodes are linked by next). */
const hv_dnode_t *hv_driver_nodes(const hv_driver_t *d);
/* Node scope of Cluster.Fetch: calls fn on each active job with a live worker placed on node_id
 * until fn returns nonzero, and returns that value (0: fn matched none, or there is no such job).
 * The job is borrowed for the call. */
int hv_driver_node_jobs_any(hv_driver_t *d, uint64_t node_id,
                            int (*fn)(const hv_djob_t *j, void *ud), void *ud);
/* Active blacklist entries of a node (each with the job it bars), for views: fills up to cap,
 * returns the count. */
size_t hv_driver_node_blacklist(hv_driver_t *d, uint64_t node_id, const hv_djob_t **jobs,
                                const hv_dbl_t **entries, size_t cap);

/* ---- workers (Cluster service) -------------------------------------------------------------- */

/* Reports of node node_id's agent about one worker. Node scope: a node reports only on the
 * workers placed on it, so each returns HV_EPERM, and applies nothing, when worker_id is placed on
 * another node (or not placed yet); the caller logs the refusal. HV_OK otherwise, also when the
 * head no longer knows the worker or the report repeats one already applied (nothing to do). */
hv_err hv_driver_worker_started(hv_driver_t *d, uint64_t node_id, uint64_t worker_id, int pid);
/* An actor's process (worker_id) saved its state on its way out, stored as artifact digest
 * (size bytes): the exit that follows moves it. digest "" (or NULL) with why (borrowed): it saved
 * a state that is not kept, and why, for the actor's events. Ignored for anything else. */
void hv_driver_actor_state_saved(hv_driver_t *d, uint64_t node_id, uint64_t worker_id,
                                 const char *digest, uint64_t size, const char *why);
hv_err hv_driver_worker_exited(hv_driver_t *d, uint64_t node_id, uint64_t worker_id, int exit_code,
                               int term_signal, const char *reason);
/* Output lines of a worker (stream 1 stdout, 2 stderr); appended to its job's log within the
 * caps of cfg->logs (joblog.h); an actor's process's go to the actors' log hook. */
hv_err hv_driver_worker_log(hv_driver_t *d, uint64_t node_id, uint64_t worker_id, uint32_t stream,
                            char **lines, size_t n);

/* ---- jobs (Jobs service) -------------------------------------------------------------------- */

typedef struct hv_job_submit_s {
    const char *name;
    const uint8_t *spec; /* packed JobSpec, borrowed */
    size_t spec_len;
    uint32_t np; /* 0 = every free slot */
    int elastic;
    uint32_t min_np, max_np, max_resets, timeout_s, slots_per_host;
    int max_resets_set;
    uint32_t elastic_timeout_s, check_every; /* 0 = the config's */
    int cooldown_set;
    uint32_t cooldown_min_s, cooldown_max_s;
    uint32_t target_np;           /* elastic: the size wanted at first (0 = max_np), e.g. a growth
                           schedule's first step */
    const char *const *artifacts; /* digests of the artifacts the spec uses (borrowed): stored
                                     with the job, so that they are kept while it is */
    size_t nartifacts;
    int32_t priority; /* higher goes first (0: the default) */
    int priority_set; /* priority was given (or is not 0); else its namespace's default
                         (fleet.namespaces[].priority) */
    int preemptible;  /* may be stopped for a higher priority, to resume from its state copy */
    const char *ns;   /* its namespace (NULL or "": default), for quotas and fair share */
} hv_job_submit_t;

/* Validates against the cluster (np against capacity, bounds) and stores a pending job, then
 * places what can be placed.
 * HV_EINVAL/HV_ESTATE with a message for the user in err; HV_EUNAVAIL when it cannot be stored
 * (err: hv_driver_store_trouble's words).
 * *np_out: the workers the job will start with (np = 0 resolved). */
hv_err hv_driver_submit(hv_driver_t *d, const hv_job_submit_t *s, uint64_t *job_id,
                        uint32_t *np_out, char *err, size_t errlen);
/* HV_ENOTFOUND for an unknown job; a job that already ended is left alone. */
hv_err hv_driver_cancel(hv_driver_t *d, uint64_t job_id);
/* A job in memory, or loaded back from the store (ended jobs leave memory after a while).
 * NULL when unknown. */
const hv_djob_t *hv_driver_job(hv_driver_t *d, uint64_t job_id);
/* The path of job job_id's output log: <data_dir>/logs/<epoch>-<job>.log, or <job>.log under
 * the legacy epoch "" (hv_store_epoch): a new state.db's job 1 never shows an old job 1's log. */
void hv_driver_log_path(const hv_driver_t *d, uint64_t job_id, char *buf, size_t len);
/* The first job in memory (jobs are linked by next, in submission order): the active ones and
 * those that ended a short while ago. */
const hv_djob_t *hv_driver_jobs(const hv_driver_t *d);
/* Node name of a worker ("?" if unknown). */
const char *hv_driver_worker_node(hv_driver_t *d, const hv_dworker_t *w);
uint32_t hv_driver_free_slots(hv_driver_t *d, uint32_t slots_per_host);
uint32_t hv_driver_capacity(hv_driver_t *d, uint32_t slots_per_host);
/* While the head's state writes fail (the last write failed; the next one that works ends it):
 * one line for clients, "the head cannot store its state in PATH (<why>; <data_dir> has N bytes
 * free)", borrowed until the next driver call. NULL while writes work. Each change (failing,
 * working again) calls io.job_changed for every job in memory, so watchers hear it. */
const char *hv_driver_store_trouble(hv_driver_t *d);
/* 1 when what the job machine decided for j is stored (no actions of j wait for the store): an
 * end is told to watchers only then. */
int hv_driver_job_settled(hv_driver_t *d, const hv_djob_t *j);

/* ---- access: join tokens, revoked node credentials, the audit trail (driver_access.c) ------ */

/* Stores a new join token (row borrowed: its id, its secret's hash, expiry, uses and maker).
 * HV_EEXIST when the id is taken (the caller draws another). */
hv_err hv_driver_jtoken_create(hv_driver_t *d, const hv_jtoken_row_t *row);
/* Revokes join token id at now_ms (wall clock), stored; *out: the token as it is now (one
 * revoked already is left as it was). HV_ENOTFOUND: no such token. */
hv_err hv_driver_jtoken_revoke(hv_driver_t *d, const char *id, uint64_t now_ms,
                               hv_jtoken_row_t *out);
/* Revokes the current credential of node node_id: stored first (HV_EUNAVAIL when it cannot be:
 * nothing is revoked, err says why), then the access table forgets it (io.revoked) and the
 * node's Session ends (io.drop_session): its agent's re-join is refused. HV_ENOTFOUND: no such
 * node. */
hv_err hv_driver_node_revoke(hv_driver_t *d, uint64_t node_id, char *err, size_t errlen);
/* Appends one row to the audit trail (row borrowed; its seq is the store's); the newest 100000
 * rows are kept. A failure is the caller's to tell (hv_view_error says why). */
hv_err hv_driver_audit(hv_driver_t *d, const hv_audit_row_t *row);

/* ---- the autoscaler (head/driver/autoscale.c) ------------------------------------------------------ */

/* Workers one job wants that the free slots cannot give it now (cluster.h). */
typedef hv_cl_demand_t hv_driver_demand_t;

/* The demand of the active jobs, in scheduling order (fills up to cap, returns the count):
 * hv_cl_demand over the jobs in memory and the free slots. */
size_t hv_driver_demand(hv_driver_t *d, hv_driver_demand_t *out, size_t cap);
/* Slots an autoscaler can still add to the nodes alive now: a submit that fits the cluster with
 * them is accepted and waits (bounded by its --timeout) instead of being refused. The driver
 * asks fn at each submit (NULL: no autoscaler). */
typedef uint32_t (*hv_driver_room_fn)(void *ud);
void hv_driver_set_room(hv_driver_t *d, hv_driver_room_fn fn, void *ud);

/* ---- copies of the training state (Rendezvous.PutState/FetchState) -------------------------- */

/* May worker send a copy committed in (generation, commit)? Only rank 0 of that round, alive,
 * and only a copy newer than the stored one. HV_ENOTFOUND/HV_ESTATE (job, or an older copy),
 * HV_EPERM (not that member); err says why. */
hv_err hv_driver_copy_check(hv_driver_t *d, uint64_t job_id, uint64_t worker_id,
                            uint32_t generation, uint64_t commit, char *err, size_t errlen);

/* One chunk of a copy of a job's training state from rank 0 of its round (PutState), borrowed
 * for the call. */
typedef struct hv_copy_chunk_s {
    uint64_t job_id, worker_id;
    uint32_t generation;
    uint64_t commit, total, offset;
    const uint8_t *data;
    size_t len;
    const char *sha256; /* the whole copy's, checked at its last chunk */
} hv_copy_chunk_t;
/* The end of a copy whose last chunk arrived: rc HV_OK once it is stored and the job's newest;
 * else why it is not (a message for the sender). Called on the loop thread. */
typedef void (*hv_driver_copy_fn)(void *ud, hv_err rc, const char *why);
/* What became of a chunk hv_driver_copy_put took. */
typedef enum hv_copy_put {
    HV_COPY_PUT_PART = 0,    /* written; more chunks are to come */
    HV_COPY_PUT_STORED = 1,  /* the last: the copy is stored now (no io.queue_work: in line) */
    HV_COPY_PUT_PENDING = 2, /* the last: fn will be told */
} hv_copy_put_t;
/* A chunk of a copy (hv_driver_copy_check first; then its file written, store/statecopy.c: at
 * most one chunk's bytes, on the loop thread). At the last chunk (every byte arrived and matches
 * the SHA-256) the copy's file is synced and renamed off the loop thread (io.queue_work); back on
 * the loop the copy is checked again and stored (before anything counts on it), made the job's
 * newest, the previous copy's file removed, and fn(ud, ...) told once, unless
 * hv_driver_copy_forget(ud) came first. *out says which. Errors (fn not called; err says why):
 * those of hv_driver_copy_check, HV_ESTATE/HV_EPROTO (out of order, or a wrong SHA-256: the
 * sender starts again), HV_ETOOBIG (no room), HV_EIO (the disk or the store failed),
 * HV_EINTERNAL (the sync could not be queued), HV_ENOMEM. */
hv_err hv_driver_copy_put(hv_driver_t *d, const hv_copy_chunk_t *c, hv_driver_copy_fn fn, void *ud,
                          hv_copy_put_t *out, char *err, size_t errlen);
/* The sender of the copies in flight with ud went away: they are still stored, but fn is not
 * called for them. */
void hv_driver_copy_forget(hv_driver_t *d, void *ud);
/* A running elastic job whose only copy of its state is on the machine all its live workers run
 * on (their agents reach the head over loopback: the head's machine), with no durable copy. */
int hv_driver_copy_on_own_node(hv_driver_t *d, const hv_djob_t *j);
/* The job's newest copy, for a live worker of the job. HV_ENOTFOUND when there is none. Its
 * bytes are read with hv_view_copy_read (views.h). */
hv_err hv_driver_copy_get(hv_driver_t *d, uint64_t job_id, uint64_t worker_id, hv_copy_row_t *out,
                          char *err, size_t errlen);

/* ---- copies kept by peers (issue 28 §3, docs/RELIABILITY.md "Copies kept by peers") ---------- */

/* A keeper for a member's copy, with the grant that opens it (common/copygrant.h). */
typedef struct hv_copy_keeper_s {
    uint64_t node_id;
    char addr[256], name[130];
    char grant[65];
    uint64_t expires_ms; /* wall clock */
} hv_copy_keeper_t;

/* The head's credential maths (borrowed; NULL: no grants, so no keepers): the grants are keyed
 * with the keeper agent's node credential. main.c sets it. */
void hv_driver_set_creds(hv_driver_t *d, const struct hv_creds_s *creds);
/* Where rank 0 of round generation sends its copy of size bytes: a keeper chosen by
 * hv_copy_keeper_choose among the other nodes, with a put grant. HV_ENOTFOUND when no node can
 * keep it (err says why: the member sends to the head); the errors of hv_driver_copy_check. */
hv_err hv_driver_copy_plan(hv_driver_t *d, uint64_t job_id, uint64_t worker_id, uint32_t generation,
                           uint64_t commit, uint64_t size, hv_copy_keeper_t *out, char *err,
                           size_t errlen);
/* The keeper acked the member's whole copy: checked again, the index row stored (HV_EIO when it
 * cannot be), and only then counted on as the job's newest copy; then the keeper is told that
 * the job's older copies may go (and a previous keeper on another node, that all may). */
hv_err hv_driver_copy_kept(hv_driver_t *d, uint64_t job_id, uint64_t worker_id, uint32_t generation,
                           uint64_t commit, uint64_t size, const char *sha256, uint64_t keeper_node,
                           char *err, size_t errlen);
/* Bytes of the copies stored at the head (its PutState) and kept by peers since the head started
 * (/metrics hv_state_copy_bytes_total). */
void hv_driver_copy_bytes(const hv_driver_t *d, uint64_t *head, uint64_t *peer);
/* The name of the node whose agent keeps j's newest copy; "" when the head keeps it (or none). */
const char *hv_driver_copy_keeper(const hv_driver_t *d, const hv_djob_t *j);
/* ---- artifacts (the blob store, head/store/artifacts.h) --------------------------------------- */

/* The head's artifact store (borrowed; main.c sets it once before the services start; NULL:
 * none, and every artifact command says so). The services read it through views.h. */
void hv_driver_set_artifacts(hv_driver_t *d, hv_artifacts_t *a);
/* Records a use of a present artifact (an agent is about to fetch it, or hvsubmit found it and
 * will submit a job that names it), stored before it is served: the pruning of unused
 * artifacts reads it. HV_OK, or the store's error with the words for clients in err (the
 * store's trouble, hv_driver_store_trouble, when it has some). */
hv_err hv_driver_artifact_touch(hv_driver_t *d, const char *digest, char *err, size_t errlen);
/* One chunk of an upload (artifacts.h hv_artifacts_write: offset equal to the bytes held so
 * far; with last the digest is checked, the file published and recorded before *complete is
 * 1). *received: the bytes held after it. Errors as hv_artifacts_write's, with err for the
 * user; HV_EUNAVAIL when the head keeps no artifacts. */
hv_err hv_driver_artifact_write(hv_driver_t *d, const char *digest, uint64_t total, uint64_t offset,
                                const uint8_t *data, size_t len, int last, uint64_t *received,
                                int *complete, char *err, size_t errlen);

/* ---- rendezvous (Rendezvous service) -------------------------------------------------------- */

/* A JoinRound of worker_id of job_id with its data-plane address. HV_OK: the answer comes later
 * through io->round or io->join_answer. Otherwise refused now (err says why): HV_ENOTFOUND for
 * an unknown job or worker, HV_ESTATE for a job that ended. */
/* dead (n_dead): ring neighbours on the worker's machine its death watch saw die in last_gen;
 * one the rule accepts (core/ringev.h hv_ringev_dead) is ended at once, as if its exit had been
 * reported (its agent's report, later, changes nothing). */
hv_err hv_driver_rdzv_join(hv_driver_t *d, uint64_t job_id, uint64_t worker_id, const char *addr,
                           uint32_t last_gen, uint64_t redone_samples, const uint64_t *broken,
                           size_t n_broken, const uint64_t *dead, size_t n_dead, char *err,
                           size_t errlen);
/* A worker of an elastic job asks for a new size (a growth schedule, the program, a callback):
 * stored, an event, then the job grows (or the autoscaler buys nodes) at the next check. The
 * size is kept within [min-np, max-np] (*accepted says what it became). A smaller size only
 * stops further growth: workers are not taken away. HV_ESTATE for a fixed-size job. */
/* The early wake-up io->wake asked for: the time-driven decisions of the jobs (rounds that stop
 * waiting for suspects, last holders given up: hv_jm_tick, hv_jm_give_up), then placement. The
 * tick does the same, and more, every 200 ms. */
void hv_driver_wake(hv_driver_t *d, uint64_t now);
/* A worker's report of its own figures (what grew since its last one), as a worker of round gen
 * (0: not said): added to its job's totals (j->figs, read by /metrics) once checked.
 * HV_ENOTFOUND / HV_ESTATE as for a join (an unknown or ended job or worker), HV_EPERM for a
 * fenced worker (hv_jm_fence: given up, or of a round before the job's resume), HV_EINVAL for a
 * report out of bounds; err says why. */
hv_err hv_driver_rdzv_report(hv_driver_t *d, uint64_t job_id, uint64_t worker_id, uint32_t gen,
                             const hv_jobfig_t *delta, char *err, size_t errlen);
/* A ring neighbour that worker_id's liveness monitor found silent (RdzvSilentPeer). */
typedef struct hv_driver_silent_s {
    uint64_t worker_id;
    unsigned how;       /* HV_RINGEV_HEAR or HV_RINGEV_ACK (ringev.h) */
    uint32_t silent_ms; /* how long, when reported */
} hv_driver_silent_t;
/* worker_id, a member of round gen, reports n ring neighbours silent (s, borrowed): kept with the
 * job's ring evidence (core/ringev.c); a node the silence rule condemns is suspected at once,
 * counting from when it fell silent, and its jobs roll back without waiting for the peer timeout
 * (hv_jm_silent). Errors as hv_driver_rdzv_report. */
hv_err hv_driver_rdzv_silent(hv_driver_t *d, uint64_t job_id, uint64_t worker_id, uint32_t gen,
                             const hv_driver_silent_t *s, size_t n, char *err, size_t errlen);
hv_err hv_driver_rdzv_resize(hv_driver_t *d, uint64_t job_id, uint64_t worker_id, uint32_t size,
                             const char *reason, uint32_t *accepted, char *err, size_t errlen);
/* The JoinRound call went away before it was answered. */
void hv_driver_rdzv_join_gone(hv_driver_t *d, uint64_t worker_id);
/* Done from a worker for generation gen. HV_OK once stored; HV_ESTATE (stale, ended), HV_EIO. */
hv_err hv_driver_rdzv_done(hv_driver_t *d, uint64_t job_id, uint64_t worker_id, uint32_t gen,
                           char *err, size_t errlen);
/* Checks that worker_id belongs to job_id and the job is active; *generation gets the job's
 * newest round, *failure, *code (hv_ev_reason_t) and *reason its state (for an immediate
 * push). */
hv_err hv_driver_rdzv_check(hv_driver_t *d, uint64_t job_id, uint64_t worker_id,
                            uint32_t *generation, int *failure, uint32_t *code, const char **reason,
                            char *err, size_t errlen);
/* The job is active (for the key-value store). */
int hv_driver_job_active(hv_driver_t *d, uint64_t job_id);
/* The jobs in memory by state (every active job; ended ones for a while): for status lines. */
void hv_driver_job_counts(hv_driver_t *d, size_t counts[HV_JOB__COUNT]);

#endif
