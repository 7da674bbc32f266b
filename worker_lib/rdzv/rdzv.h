/*
 * rdzv: the rendezvous seam of libhv. A rendezvous tells a worker who it is in the job (rank,
 * size, local and cross ranks, a generation number) and where its peers' data planes listen;
 * it also offers Done (the training function returned) and a small key-value store (e.g. for an
 * NCCL unique id). Implementations: rdzv_head.c (the head's Rendezvous gRPC service, the real
 * one), rdzv_local.c (an in-process store for tests that run ranks as threads) and rdzv_file.c
 * (a shared directory, for benchmarks and tests that fork ranks without a head). world.c and
 * member.c are the callers; they never know which implementation they drive.
 *
 * Elastic jobs: an assignment also says how often to check the membership (check_every), why the
 * round opened, whether it follows a failure (rollback) and whether this worker was removed from
 * the job (drained). The optional watch op starts a background watcher that reports membership
 * pushes (a new round opened: its generation, whether a member failed); only rdzv_head and
 * rdzv_local (elastic stores) have one.
 *
 * Threading: join, done, kv_put and kv_get are used by one thread at a time; a watcher runs on
 * its own thread next to them, and watch_stop may be called from any thread.
 */
#ifndef HV_WORKER_LIB_RDZV_H
#define HV_WORKER_LIB_RDZV_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define HV_RDZV_ADDR_MAX 64
#define HV_RDZV_HOST_MAX 256

typedef struct hv__rdzv_peer_s {
    int rank;
    uint64_t worker_id;
    char addr[HV_RDZV_ADDR_MAX]; /* data-plane "ip:port" */
    char host[HV_RDZV_HOST_MAX]; /* node name: equal names share a host (shared memory) */
} hv__rdzv_peer_t;

#define HV_RDZV_REASON_MAX 256
/* Ring neighbours a join reports broken at most: two per ring, three rings (hierarchical). */
#define HV_RDZV_BROKEN_MAX 6
/* Ring neighbours a join reports dead (death watch: the flat ring's two). */
#define HV_RDZV_DEAD_MAX 2
/* How a ring neighbour fell silent (note_silent; the wire's RdzvSilentPeer.how). */
#define HV_RDZV_SILENT_HEAR 1u /* no heartbeat from it (this worker is its left neighbour) */
#define HV_RDZV_SILENT_ACK 2u  /* its host does not acknowledge (its right neighbour) */

typedef struct hv__rdzv_assignment_s {
    uint64_t world_id;   /* identifies the job / test world (data-plane hellos check it) */
    uint32_t generation; /* the round */
    int rank, size;
    int local_rank, local_size; /* among workers with the same host */
    int cross_rank, cross_size; /* index of this host among hosts; number of hosts */
    hv__rdzv_peer_t *peers;     /* size entries, by rank; owned (hv__rdzv_assignment_fini) */
    uint32_t check_every;       /* commits between membership checks; 0 = not given (1) */
    int removed;  /* 1: this worker is no member of the job any more (its node was drained): it
                     must leave without reporting Done; rank, size and peers are then unset */
    int rollback; /* 1: the round follows a failure (the survivors restored a commit) */
    char reason[HV_RDZV_REASON_MAX]; /* why the round opened ("" when not given) */
    /* The round resumes the job from the head's copy of its state (every member was lost):
     * rank 0 fetches that copy (fetch_state) and loads it before the first sync. */
    int resume;
    uint32_t resume_generation; /* the round the copy was committed in */
    uint64_t resume_commit;     /* its commit number (what fetch_state asks for) */
    uint64_t resume_size;       /* bytes */
    uint64_t resume_age_ms;     /* how old it was when the round closed (the head's clock) */
} hv__rdzv_assignment_t;

/* A membership push: the head opened round `generation`. */
typedef struct hv__rdzv_push_s {
    uint32_t generation;
    int failure;             /* 1: a member failed, the survivors must roll back */
    int stop;                /* 1: the round stops the job at the commit its members re-join at
                                (the fleet's preemption: MembershipPush.reason_code PREEMPT);
                                rank 0 sends a copy of that commit's state first */
    const char *reason;      /* borrowed for the callback (for people: never parsed) */
    const uint64_t *removed; /* worker ids that are not members of the new round (borrowed) */
    size_t n_removed;
} hv__rdzv_push_t;

/* Called on the watcher's thread for each push newer than any before. Must not block for long
 * and must not call back into the rendezvous client. */
typedef void (*hv__rdzv_push_cb)(void *ud, const hv__rdzv_push_t *push);

void hv__rdzv_assignment_fini(hv__rdzv_assignment_t *a);

typedef struct hv__rdzv_ops_s {
    const char *name;
    /* Joins the next round with this worker's data-plane address and host name (borrowed) and
     * blocks until the round closes or timeout_ms passes (HV_ETIMEDOUT). last_generation is the
     * round this worker was in before (0 on the first join). On HV_OK *out is filled (owned by
     * the caller). */
    hv_err (*join)(void *ctx, const char *my_addr, const char *my_host, uint32_t last_generation,
                   uint32_t timeout_ms, hv__rdzv_assignment_t *out);
    /* Reports that the training function returned successfully in round generation. Bounded
     * (implementations retry an unreachable head for a while). */
    hv_err (*done)(void *ctx, uint32_t generation);
    /* Optional (NULL: HV_ENOTSUP). Asks for a new job size (growth over epochs); *accepted
     * gets what the head aims for. Bounded like done. */
    hv_err (*resize)(void *ctx, uint32_t size, const char *reason, uint32_t *accepted);
    /* Stores value (len bytes, borrowed) under key for the job. */
    hv_err (*kv_put)(void *ctx, const char *key, const void *value, size_t len);
    /* Reads key, waiting up to wait_ms for it to appear (HV_ENOTFOUND after that). On HV_OK
     * *value is an owned buffer (hv_free) of *len bytes. */
    hv_err (*kv_get)(void *ctx, const char *key, uint32_t wait_ms, void **value, size_t *len);
    /* Optional (NULL: this rendezvous never pushes, membership is fixed). Starts a watcher that
     * calls cb(ud, push) from a background thread for every round newer than generation (and
     * at once when the job is already past it), reconnecting by itself when its stream breaks.
     * *out is owned by the caller: stop it with watch_stop before destroying the client.
     * Errors: HV_ENOTSUP when this client has no pushes after all, HV_ENOMEM. */
    hv_err (*watch)(void *ctx, uint32_t generation, hv__rdzv_push_cb cb, void *ud, void **out);
    /* Stops and frees a watcher; returns promptly (bounded waits inside) and never calls cb
     * after it returned. Any thread. NULL is a no-op. */
    void (*watch_stop)(void *watcher);
    /* Optional (NULL: not reported). The next join reports that a rollback sent back samples
     * (handed out since the last commit, over all ranks) to be done again; cleared once a join
     * has carried it. */
    void (*note_redone)(void *ctx, uint64_t samples);
    /* Optional (NULL: not reported). The next join reports the worker ids (n of them, borrowed)
     * of this worker's ring neighbours whose link broke in the round it leaves: the head's
     * evidence that their node is gone. Replaces what an earlier call noted; cleared once a
     * join has carried it. At most HV_RDZV_BROKEN_MAX are kept. */
    void (*note_broken)(void *ctx, const uint64_t *worker_ids, size_t n);
    /* Optional (NULL: not reported). As note_broken, for the flat-ring neighbours on this
     * machine whose death-watch mark said they died (world.h hv__world_dead_peers): a fact the
     * head acts on at once (it ends them without waiting for their agent). At most
     * HV_RDZV_DEAD_MAX are kept. */
    void (*note_dead)(void *ctx, const uint64_t *worker_ids, size_t n);
    /* Optional (NULL: nobody to tell). The data plane's liveness monitor (liveness.h) found ring
     * neighbour worker_id of round generation silent for silent_ms (how: HV_RDZV_SILENT_HEAR, no
     * heartbeat came from it; HV_RDZV_SILENT_ACK, its host does not acknowledge ours): the
     * head's evidence that its node is gone. The client tells the head at once from a thread of
     * its own; this never blocks (it is called on the monitor's thread). */
    void (*note_silent)(void *ctx, uint32_t generation, uint64_t worker_id, unsigned how,
                        uint32_t silent_ms);
    /* Optional (NULL: nothing to report to). Sends the figures of this process that grew since
     * the last report now (one try, bounded), on the calling thread. libhv calls it after the
     * process' first commit, before training goes on: the head's evidence that the job
     * committed a step (a job that never did starts again from the beginning when every member
     * is lost; one that did is never restarted). */
    void (*report)(void *ctx);
    /* Optional (NULL: no copies outside the workers). Sends a copy of the committed state (len
     * bytes, borrowed; hv_state_save's format) committed in round generation at commit number
     * commit to the head, in chunks; returns once it is stored there. Called from libhv's copier
     * thread while the training thread uses the other ops: it shares only thread-safe parts. */
    hv_err (*put_state)(void *ctx, uint32_t generation, uint64_t commit, const void *data,
                        size_t len);
    /* Optional. Fetches the job's stored copy of commit (0: the newest) into an owned buffer
     * (hv_free) of *len bytes, its digest checked. HV_ENOTFOUND when there is none (or it was
     * replaced). */
    hv_err (*fetch_state)(void *ctx, uint64_t commit, void **data, size_t *len);
    /* Optional: the detail of the last failed call ("resets exceeded --max-resets 2"), "" when
     * none. The string is owned by the client and valid until its next call. */
    const char *(*last_error)(void *ctx);
    /* Frees the client. destroy(NULL) is not called. */
    void (*destroy)(void *ctx);
} hv__rdzv_ops_t;

/* A rendezvous client: an implementation and its state. */
typedef struct hv__rdzv_s {
    const hv__rdzv_ops_t *ops;
    void *ctx; /* owned by whoever owns the hv__rdzv_t; freed with ops->destroy */
} hv__rdzv_t;

/* Fills local/cross ranks and sizes of a from the peers' host names (hosts ordered by their
 * lowest rank). Used by implementations whose source gives only ranks and hosts. */
void hv__rdzv_fill_topology(hv__rdzv_assignment_t *a);

/* ---- rdzv_local: in-process store (tests) ---------------------------------------------------- */

typedef struct hv__rdzv_local_store_s hv__rdzv_local_store_t;

/* A store whose rounds close when size workers joined. Thread-safe. */
hv_err hv__rdzv_local_store_create(int size, hv__rdzv_local_store_t **out);
/* Changes the expected size for rounds that have not closed yet. */
void hv__rdzv_local_store_set_size(hv__rdzv_local_store_t *s, int size);
/* How many workers called done since creation. */
int hv__rdzv_local_store_done_count(hv__rdzv_local_store_t *s);
/* Frees the store; every client must have been destroyed. NULL is a no-op. */
void hv__rdzv_local_store_destroy(hv__rdzv_local_store_t *s);
/* A client of the store (borrowed; must outlive the client). want_rank >= 0 asks for that rank
 * (ranks are ordered by want_rank, then by arrival). */
hv_err hv__rdzv_local_client(hv__rdzv_local_store_t *s, int want_rank, hv__rdzv_t *out);

/* Elastic stores simulate the head's rounds for tests: workers are named by id; a round closes
 * when every expected worker (added, not failed or removed) joined; ranks go oldest worker first
 * (the round it first joined, then its id); every new round is pushed to the watchers. The
 * first round (generation 1) is open from creation. Rounds after it open when a test adds,
 * fails or removes a worker, or when a member re-joins from the current round (it left its
 * world: the head would see that as a failure). check_every goes into every assignment. */
hv_err hv__rdzv_local_store_create_elastic(uint32_t check_every, hv__rdzv_local_store_t **out);
/* A client acting as worker worker_id of an elastic store (joins fail with HV_ENOTFOUND until
 * the worker was added). */
hv_err hv__rdzv_local_client_worker(hv__rdzv_local_store_t *s, uint64_t worker_id, hv__rdzv_t *out);
/* Adds an expected worker: it joins the open round, or opens the next one (a push, no failure). */
void hv__rdzv_local_store_add_worker(hv__rdzv_local_store_t *s, uint64_t worker_id);
/* Declares a worker failed (as the head does when its process exits): it is no member any more
 * (its joins fail with HV_ENOTFOUND); the next round opens with failure = 1 unless one is open. */
void hv__rdzv_local_store_fail_worker(hv__rdzv_local_store_t *s, uint64_t worker_id,
                                      const char *reason);
/* Removes a worker (its node drained): the next round opens (no failure) with the worker in the
 * push's removed list; its next join answers removed. */
void hv__rdzv_local_store_remove_worker(hv__rdzv_local_store_t *s, uint64_t worker_id);
/* Ends the job: joins fail with HV_ESTATE (last_error: reason), watchers stop receiving. */
void hv__rdzv_local_store_end(hv__rdzv_local_store_t *s, const char *reason);
/* The generation of the last closed round (0 before the first). */
uint32_t hv__rdzv_local_store_generation(hv__rdzv_local_store_t *s);
/* Waits up to timeout_ms until round generation has closed. HV_OK or HV_ETIMEDOUT. */
hv_err hv__rdzv_local_store_wait_generation(hv__rdzv_local_store_t *s, uint32_t generation,
                                            uint32_t timeout_ms);
/* The generation of the last Done (0 if none). */
uint32_t hv__rdzv_local_store_done_generation(hv__rdzv_local_store_t *s);
/* The most samples a client reported sent back by a rollback (note_redone; 0 if none). */
uint64_t hv__rdzv_local_store_redone(hv__rdzv_local_store_t *s);

/* ---- rdzv_file: shared directory (multi-process runs without a head) ------------------------- */

/* A client for rank of size whose peers meet in directory dir (which must exist; borrowed
 * string, copied). Every process of the world uses the same dir, size and distinct ranks;
 * generation g's files are named g<g>.r<rank>. */
hv_err hv__rdzv_file_client(const char *dir, int rank, int size, hv__rdzv_t *out);

/* ---- rdzv_head: the head's Rendezvous service ------------------------------------------------ */

/* A client of the head at head_addr ("host:port") for job_id / worker_id. Errors: HV_EUNAVAIL
 * when the gRPC channel cannot be created. */
hv_err hv__rdzv_head_client(const char *head_addr, uint64_t job_id, uint64_t worker_id,
                            hv__rdzv_t *out);

#endif
