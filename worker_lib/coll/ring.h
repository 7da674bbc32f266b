/*
 * ring: libhv's collective algorithms over one ring link (transport.h): allreduce (ring
 * reduce-scatter + allgather, pipelined in cache-sized pieces, with a small-message variant),
 * broadcast from any root (pipelined along the ring), allgather with per-rank sizes, and an
 * allgather of variable-length frames that the engine uses to negotiate. Buffers are scatter
 * lists (hv__vec_t) so that fused tensors are reduced where they lie, without packing copies.
 * Every rank gets bit-identical results: each element is reduced in one place and then copied.
 *
 * Not thread-safe: a ring is driven by one thread at a time (the engine's driver). It does not
 * create or own the link; world.c does. All waits are bounded by timeout_ms without progress.
 * Errors: those of the transport (HV_EPEER, HV_ECANCELED, HV_EIO), HV_ETIMEDOUT (a peer made no
 * progress for timeout_ms), HV_ENOMEM (scratch growth), HV_EPROTO (a malformed frame).
 */
#ifndef HV_WORKER_LIB_RING_H
#define HV_WORKER_LIB_RING_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "err.h"
#include "transport.h"

#include "hv/hv.h"

/* A logical buffer made of regions (byte lengths, each a multiple of the element size). */
typedef struct hv__vec_s {
    const struct iovec *iov; /* borrowed */
    int n;
    size_t total; /* sum of iov_len */
} hv__vec_t;

typedef struct hv__ring_opts_s {
    uint32_t timeout_ms; /* a transfer making no progress this long fails: HV_ETIMEDOUT */
    uint32_t spin_us;    /* busy-poll this long before blocking in the transport's wait */
    size_t stage_bytes;  /* receive staging piece for reductions (cache-sized) */
    size_t small_bytes;  /* allreduces up to this size use the allgather-then-reduce variant */
    size_t chunk_bytes;  /* large allreduces run as a pipeline of chunks this big; 0 = whole */
} hv__ring_opts_t;

typedef struct hv__ring_s hv__ring_t;

/* Creates a ring for rank of size over link (borrowed; NULL only when size == 1). */
hv_err hv__ring_create(int rank, int size, hv__link_t *link, const hv__ring_opts_t *opts,
                       hv__ring_t **out);
void hv__ring_destroy(hv__ring_t *r);

int hv__ring_rank(const hv__ring_t *r);
int hv__ring_size(const hv__ring_t *r);
/* Sides of the ring, for hv__ring_broken: left is the neighbour this rank receives from
 * (rank - 1), right the one it sends to (rank + 1). */
#define HV__RING_LEFT 1u
#define HV__RING_RIGHT 2u
/* The sides whose neighbour failed in an operation of this ring so far (a mask of
 * HV__RING_LEFT/RIGHT; 0: none): a send or receive that returned HV_EPEER or HV_EIO, or a wait
 * that made no progress for timeout_ms (HV_ETIMEDOUT: the sides it waited on). An abort
 * (HV_ECANCELED) marks nothing. Any thread (an atomic read). The world reports these
 * neighbours to the rendezvous when it re-joins (the head's evidence of a lost node). */
unsigned hv__ring_broken(const hv__ring_t *r);
/* The link (borrowed), for abort. */
hv__link_t *hv__ring_link(hv__ring_t *r);

/* Allreduce in place over buf (count = buf->total / dtype size elements). */
hv_err hv__ring_allreduce(hv__ring_t *r, const hv__vec_t *buf, hv_dtype dt, hv_op op);

/* Hierarchical (2D) allreduce in place: reduce-scatter over intra (the ranks of this host),
 * allreduce of this rank's share over cross (the ranks with the same local rank on every host),
 * allgather over intra. Every host must have intra->size ranks. world_size divides AVG. Same
 * results on every rank (each element is final in one place, then copied). */
hv_err hv__ring_allreduce_2d(hv__ring_t *intra, hv__ring_t *cross, const hv__vec_t *buf,
                             hv_dtype dt, hv_op op, int world_size);

/* Broadcast of len bytes at buf from rank root. */
hv_err hv__ring_broadcast(hv__ring_t *r, void *buf, size_t len, int root);

/* Allgather: rank k's block is lens[k] bytes at out + offs[k]; this rank's block must already be
 * in place. lens/offs have size entries (borrowed). */
hv_err hv__ring_allgatherv(hv__ring_t *r, void *out, const size_t *lens, const size_t *offs);

/* Allgather of frames: every rank contributes len bytes at data; afterwards frame k (rank k's)
 * is hv__ring_frame(r, k). Frames are owned by the ring and valid until the next call. */
hv_err hv__ring_allgather_frames(hv__ring_t *r, const void *data, size_t len);
const void *hv__ring_frame(const hv__ring_t *r, int k, size_t *len);

#endif
