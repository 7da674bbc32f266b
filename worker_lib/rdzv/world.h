/*
 * world: one membership of libhv: the rendezvous assignment, the data-plane link to the ring
 * neighbours, the ring and the engine on top of it. Creating a world joins the rendezvous and
 * connects; destroying it closes everything (and may report Done). hv.c keeps one world per
 * process; tests create several (one per thread) with rdzv_local. Not the public API.
 *
 * Elastic jobs keep one rendezvous client across worlds (member.c): they pass it borrowed
 * (rdzv_borrowed), leave a world with hv__world_leave (no Done, NCCL aborted rather than
 * finalised) and join the next round with the generation they left.
 *
 * Threading: create/destroy from one thread; the engine (hv__world_engine) is thread-safe;
 * hv__world_abort may be called from any thread at any time.
 */
#ifndef HV_WORKER_LIB_WORLD_H
#define HV_WORKER_LIB_WORLD_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "err.h"
#include "rdzv.h"

typedef struct hv__world_opts_s {
    hv__rdzv_t rdzv;             /* owned by the world from the call on, even on failure, unless
                                    rdzv_borrowed */
    int rdzv_borrowed;           /* 1: rdzv stays the caller's (must outlive the world) */
    uint32_t joined_generation;  /* out: the generation the join returned, set even when the
                                    world could not be built afterwards (0: the join failed) */
    const char *bind_addr;       /* data-plane listen address, NULL = "0.0.0.0:0" (borrowed) */
    const char *advertise_ip;    /* IP peers should dial; NULL = the bind IP if specific, else
                                   the first non-loopback IPv4 (borrowed) */
    const char *host_name;       /* node name given to the rendezvous (borrowed) */
    uint32_t last_generation;    /* the generation of the previous world (0 at first) */
    uint32_t rdzv_timeout_ms;    /* 0 = 90000 */
    uint32_t connect_timeout_ms; /* bound on building the link; 0 = 30000 */
    uint32_t peer_timeout_ms;    /* 0 = 5000 */
    uint32_t spin_us;            /* UINT32_MAX = automatic */
    uint32_t cycle_time_us;      /* 0 = 1000 */
    uint64_t fusion_threshold;   /* 0 = 128 MiB */
    size_t stage_bytes;          /* 0 = 256 KiB */
    size_t small_bytes;          /* ring allgather-then-reduce bound; SIZE_MAX = automatic */
    size_t spec_bytes;           /* engine frame data bound; SIZE_MAX = automatic */
    int sock_buf;                /* 0 = kernel autotuning */
    size_t shm_bytes;            /* shared-memory ring per same-host direction; 0 = TCP only */
    size_t chunk_bytes;    /* allreduce pipeline chunk; 0 = size x 256 KiB, SIZE_MAX = whole */
    int use_nccl;          /* 1: create an NCCL communicator when a GPU is visible */
    int hierarchical;      /* 1: with several hosts of equal rank counts > 1, large
                                   allreduces run 2D (intra-host, cross-host, intra-host) */
    size_t hier_min_bytes; /* smaller allreduces use the flat ring; 0 = 256 KiB */
    uint32_t liveness_ms;  /* > 0: a liveness monitor (liveness.h) watches the flat ring's links
                              to neighbours on other hosts and tells the rendezvous (note_silent)
                              of one silent this long; 0: none */
    int death_watch;       /* 1: ring neighbours on this machine watch each other's robust
                              mutex (alive.h): a killed one is noticed in about a millisecond,
                              before its sockets close */
    /* Optional: polled while the ring links are being built, with the round's generation;
     * non-zero stops the build with HV_ECANCELED (a failure pushed after the join doomed the
     * round: waiting for the connect timeout would only delay the next one). */
    int (*cancel)(void *ud, uint32_t generation);
    void *cancel_ud;
} hv__world_opts_t;

typedef struct hv__world_s hv__world_t;

/* Joins the next round and builds the data plane. When the rendezvous answers that this worker
 * was removed from the job, the world is created without a data plane (engine NULL,
 * assignment->removed set): the caller leaves. */
hv_err hv__world_create(hv__world_opts_t *o, hv__world_t **out);

/* Closes the world. report_done: tell the rendezvous that this worker finished successfully. */
hv_err hv__world_destroy(hv__world_t *w, int report_done);

/* Leaves the world for the next round: like destroy without Done, but an NCCL communicator is
 * aborted (ncclCommAbort) rather than finalised, since peers may be gone. NULL is a no-op. */
void hv__world_leave(hv__world_t *w);

hv__engine_t *hv__world_engine(hv__world_t *w);
const hv__rdzv_assignment_t *hv__world_assignment(const hv__world_t *w);
/* The rendezvous client (for the KV, e.g. an NCCL unique id). Borrowed. */
hv__rdzv_t *hv__world_rdzv(hv__world_t *w);

/* 1 when device tensors run on NCCL in this world (0: staged through host memory). */
int hv__world_uses_nccl(const hv__world_t *w);

/* Fails every operation and closes the data plane at once (any thread). */
void hv__world_abort(hv__world_t *w, hv_err why, const char *reason);
/* The worker ids of the neighbours whose link broke in this world's rings (hv__ring_broken: the
 * ring over all ranks, and the host and cross rings of a hierarchical world), each once, at
 * most cap of them into out (borrowed); returns how many. 0 for NULL or a world without rings.
 * Any thread; call it before the world is left (the rendezvous reports them at the re-join). */
size_t hv__world_broken_peers(const hv__world_t *w, uint64_t *out, size_t cap);
/* The worker ids of the flat-ring neighbours whose death-watch mark said they died by a signal
 * (a kill, a crash; not through exit(), whose status their agent reports: alive.h
 * HV__ALIVE_EXITED), a subset of hv__world_broken_peers: a fact, not a suspicion, each once, at most cap into out; returns how
 * many. 0 for NULL or without a death watch. Any thread, before the world is left. */
size_t hv__world_dead_peers(const hv__world_t *w, uint64_t *out, size_t cap);

#endif
