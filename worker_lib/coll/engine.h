/*
 * engine: libhv's collective engine. Operations (named or not) are queued by any thread; a
 * driver (the engine's background thread, or a blocking caller that drives progress itself to
 * avoid a thread hand-off) runs rounds: every rank sends one negotiation frame around the ring
 * (a bit per cached tensor name that is ready here, the names not yet cached, and, for small
 * steady-state steps, the data itself), every rank computes the same set of operations ready on
 * all ranks, and executes them: allreduces fused by (type, op) up to the fusion threshold and run
 * as one ring allreduce over the tensors where they lie; broadcasts and allgathers one by one;
 * barriers complete with the round. A response cache (name -> bit, identical on all ranks) keeps
 * steady-state frames small, as in Horovod. It is not the transport or the algorithm (ring.c).
 *
 * Threading: every function is thread-safe except create/destroy. destroy must not race with
 * other calls on the same engine (hv_shutdown's contract); it fails what is still pending.
 * Failure: any error of the data plane makes the engine fail permanently: pending and later
 * operations complete with that error, and the link is aborted so that peers notice at once.
 */
#ifndef HV_WORKER_LIB_ENGINE_H
#define HV_WORKER_LIB_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "ring.h"

#include "hv/hv.h"

#define HV__NAME_MAX 255

typedef enum hv__op_kind {
    HV__OP_ALLREDUCE = 1,
    HV__OP_BROADCAST = 2,
    HV__OP_ALLGATHER = 3,
    HV__OP_BARRIER = 4,
    HV__OP_JOIN = 5, /* hv_join: out is an int that receives the rank that joined last */
} hv__op_kind;

/* One operation as submitted. Pointers are borrowed until the operation completes. */
typedef struct hv__op_desc_s {
    hv__op_kind kind;
    const char *name; /* NULL: a blocking unnamed call, named from a per-process sequence */
    const void *in;   /* allreduce, allgather input (allreduce: == out for in place) */
    void *out;        /* allreduce result, broadcast buffer, allgather output */
    size_t count;     /* elements (allgather: this rank's contribution) */
    hv_dtype dtype;
    hv_op op;       /* allreduce */
    int root;       /* broadcast */
    size_t out_cap; /* allgather: out's capacity in elements */
    size_t *counts; /* allgather: optional, size entries: every rank's count */
} hv__op_desc_t;

typedef struct hv__engine_opts_s {
    uint64_t fusion_threshold; /* max bytes per fused allreduce */
    uint32_t cycle_time_us;    /* gather async submissions this long before a round */
    uint32_t spin_us;          /* a blocking caller busy-polls this long before sleeping */
    uint32_t peer_timeout_ms;  /* bounds how long an idle rank may delay joining a round */
    size_t spec_bytes;         /* per-rank data sent inside the negotiation frame (small steps) */
    uint32_t cache_capacity;   /* response cache entries */
    struct hv__nccl_s *nccl;   /* NCCL communicator for device tensors, or NULL (borrowed; then
                                  device tensors are staged through pinned host memory) */
    hv__ring_t *intra;         /* hierarchical mode: this host's ring, or NULL (borrowed) */
    hv__ring_t *cross;         /* hierarchical mode: the cross-host ring (borrowed) */
    size_t hier_min_bytes;     /* smaller fused allreduces use the flat ring */
} hv__engine_opts_t;

typedef struct hv__engine_s hv__engine_t;

/* Starts the engine's background thread. ring is borrowed and must outlive the engine. */
hv_err hv__engine_create(hv__ring_t *ring, const hv__engine_opts_t *o, hv__engine_t **out);

/* Stops the thread, fails pending operations with HV_ECANCELED, releases handles, frees. */
void hv__engine_destroy(hv__engine_t *e);

/* Any thread, never blocks: fails the engine with why (reason is copied into last_error) and
 * aborts the link. Idempotent: the first failure wins. */
void hv__engine_abort(hv__engine_t *e, hv_err why, const char *reason);

/* HV_OK or the engine's sticky failure. */
hv_err hv__engine_status(hv__engine_t *e);

/* Submits n operations as one group; *out receives a handle completing when all are done.
 * Argument errors return at once and submit nothing. */
hv_err hv__engine_submit(hv__engine_t *e, const hv__op_desc_t *ops, size_t n, hv_handle_t *out);

/* Runs one operation and blocks until it completes. */
hv_err hv__engine_run(hv__engine_t *e, const hv__op_desc_t *op);

hv_err hv__engine_wait(hv__engine_t *e, hv_handle_t h);
hv_err hv__engine_test(hv__engine_t *e, hv_handle_t h, int *done);

/* The sequence that names unnamed blocking calls (hv_join aligns it across ranks: the ranks that
 * did not join moved theirs on). Thread-safe. */
uint64_t hv__engine_anon_seq(hv__engine_t *e);
void hv__engine_set_anon_seq(hv__engine_t *e, uint64_t seq);

/* Copies the last failure's description ("" if none) into buf. */
void hv__engine_last_error(hv__engine_t *e, char *buf, size_t len);

/* Counters for tests and benchmarks. */
typedef struct hv__engine_stats_s {
    uint64_t rounds;        /* negotiation rounds run */
    uint64_t fast_rounds;   /* rounds completed from the data in the frames */
    uint64_t fused_calls;   /* ring allreduces run for fused batches */
    uint64_t tensors;       /* operations completed */
    uint32_t cache_entries; /* response cache size */
} hv__engine_stats_t;
void hv__engine_stats(hv__engine_t *e, hv__engine_stats_t *out);

#endif
