/*
 * engine_int: the engine's private state, shared by engine.c (threads, driving, submission,
 * handles, lifetime), engine_round.c (one negotiation round: frames, the response cache,
 * fusion and execution) and engine_end.c (completion and failure, which both use). Not an
 * interface: nothing outside those three files includes it. The
 * ownership rules of each field are on the struct (mu-guarded vs driver-owned).
 */
#ifndef HV_WORKER_LIB_ENGINE_INT_H
#define HV_WORKER_LIB_ENGINE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/uio.h>

#include "engine.h"
#include "strmap.h"

#define ENG_NO_BIT (-1)
#define ENG_ANON_NAMES 64 // distinct names of unnamed blocking calls (see hv__engine_run)

/* ---- types ----------------------------------------------------------------------------------- */

typedef struct eng_group_s {
    atomic_int done;    // 1 once every member completed (release: status is final)
    hv_err status;      // first error among members; under mu until done
    uint32_t remaining; // members not yet completed; under mu
    int heap;           // 1: async (freed when its handle is released); 0: a caller's stack
} eng_group_t;

typedef struct eng_req_s {
    struct eng_req_s *next; // incoming or pending list
    struct eng_req_s *prev; // pending list only
    eng_group_t *grp;       // completion (borrowed from the group's owner)
    hv__op_desc_t d;        // copy; d.name points at name
    char name[HV__NAME_MAX + 1];
    size_t bytes;  // count * element size
    int32_t bit;   // cache bit announced in the current round, or ENG_NO_BIT
    int heap;      // allocated by the engine (async)
    int device;    // in or out is CUDA device memory (NCCL or staging); agreed by every rank
    int synthetic; // a joined rank's zeros for another rank's allreduce (engine_round.c owns it)
} eng_req_t;

typedef struct eng_entry_s { // response cache entry; identical on every rank
    char *name;              // owned
    uint8_t kind, dtype, op, device;
    int32_t root;
    uint64_t count;
} eng_entry_t;

typedef struct eng_resolve_s { // an uncached name seen in this round's frames
    const char *name;          // borrowed from a frame (valid for the round)
    uint8_t kind, dtype, op, device;
    int32_t root;
    uint64_t count;
    int ranks;     // ranks that have it pending
    int ranks_nj;  // of those, ranks that have not joined (hv_join)
    int conflict;  // ranks disagree on its meta
    char why[320]; // first disagreement, for the error message
} eng_resolve_t;

typedef struct eng_slot_s {
    uint32_t gen;     // bumped on release so stale handles are refused
    eng_group_t *grp; // NULL when free
} eng_slot_t;

struct hv__engine_s {
    hv__ring_t *ring; // borrowed
    int rank, size;
    hv__engine_opts_t o;
    uint64_t join_delay_ns; // how long an idle rank may delay joining another rank's round
    int ev_fd;              // eventfd: wakes the background thread (submission, abort, stop)
    pthread_t thread;
    int thread_started;

    pthread_mutex_t mu;
    pthread_cond_t cv;   // completions, drive released
    eng_req_t *inq_head; // under mu: submitted, not yet taken
    eng_req_t *inq_tail;
    int inq_urgent;        // under mu: a blocking caller waits on something in inq
    uint64_t inq_first_ns; // under mu: arrival of the oldest request in inq
    hv__strmap_t live;     // under mu: name -> req, every not yet completed request
    int driving;           // under mu: a thread holds the drive
    int bg_watching;       // under mu: the background thread sleeps watching the link
    int stop;              // under mu
    int waiters;           // under mu: threads inside wait/run (destroy waits for them)
    hv_err failed;         // under mu (read without it as a hint): sticky failure
    char last_error[512];  // under mu
    uint64_t anon_seq;     // under mu
    eng_slot_t *slots;     // under mu: handle table
    uint32_t nslots;
    uint32_t *free_slots;
    uint32_t nfree;
    hv__engine_stats_t stats; // under mu

    // ---- driver-owned ----
    eng_req_t *pend_head; // pending: taken from inq, not yet completed
    eng_req_t *pend_tail;
    atomic_size_t npend; // pending count (written by the driver, read by anyone)
    hv__strmap_t pend_by_name;
    eng_entry_t *cache; // cache[bit]
    uint32_t ncache, cache_cap;
    hv__strmap_t cache_by_name; // name -> (void *)(bit + 1)
    eng_req_t **bit_req;        // cache_cap entries: this rank's request announced with that bit
    unsigned char *frame;       // own frame being built
    size_t frame_cap;
    unsigned char *and_bits;
    size_t and_cap;
    eng_resolve_t *res; // uncached names of this round
    size_t nres, res_cap;
    hv__strmap_t res_by_name;
    eng_req_t **exec; // to execute this round
    size_t nexec, exec_cap;
    struct iovec *iov;
    size_t iov_cap;
    size_t *ag_buf;                 // allgather: 2 * size entries (count, cap), then lens, offs
    const unsigned char **spec_ptr; // size entries: each frame's speculative data this round
    unsigned char *pinned;          // pinned host staging for device tensors without NCCL, owned
    size_t pinned_cap;
    void **nccl_bufs; // device batch: buffers and counts for hv__nccl_allreduce
    size_t *nccl_counts;
    size_t nccl_cap;
    // hv_join (engine_round.c): which ranks' frames said "joined" this round and the last one,
    // how many, the rank that joined last (-1: none yet), and this round's zero requests.
    unsigned char *joined; // 2 * size entries: this round's flags, then the last round's
    int njoined;
    int join_last;
    eng_req_t **syn;
    size_t nsyn, syn_cap;
};

/* ---- shared by engine.c and engine_round.c (engine_end.c, but for hv__engine_round) ---------------------------------------------- */

uint64_t hv__engine_now_ns(void);
const char *hv__engine_kind_name(int kind);
/* Grows *p (elem-sized entries, capacity *cap) to hold need entries. */
hv_err hv__engine_grow(void **p, size_t *cap, size_t need, size_t elem);
/* Wakes the background thread (the eventfd). */
void hv__engine_poke(hv__engine_t *e);
/* mu held: completes one request; the group's status keeps the first error. The request must
 * not be touched afterwards (a blocking caller's request lives on its stack). */
void hv__engine_req_done_locked(hv__engine_t *e, eng_req_t *r, hv_err rc);
/* Driver: completes reqs[0..n) with rcs[i] (or rc when rcs is NULL), unlinking them. */
void hv__engine_complete(hv__engine_t *e, eng_req_t **reqs, size_t n, const hv_err *rcs, hv_err rc);
/* Fails the engine (first failure wins, logged once), aborts every link. */
void hv__engine_fail(hv__engine_t *e, hv_err rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Frees the names of the round's uncached-name records (driver; also at destroy). */
void hv__engine_res_clear(hv__engine_t *e);
/* Frees a joined rank's zero requests of the last round (engine_round.c; also at destroy). */
void hv__engine_syn_clear(hv__engine_t *e);
/* Driver: one negotiation round and the execution of what it found ready (engine_round.c). */
hv_err hv__engine_round(hv__engine_t *e);

#endif
