/*
 * transport_nccl: libhv's GPU support, the only module that includes CUDA and NCCL headers.
 * It answers whether a pointer is device memory, copies between host and device, allocates
 * pinned host memory for staging, and runs NCCL collectives on device buffers with a bounded
 * wait (a non-blocking communicator, aborted with ncclCommAbort when a peer stalls). Built
 * without CUDA/NCCL (HV_HAVE_NCCL undefined) every function reports "no GPU". It is not a ring
 * transport: NCCL runs whole collectives, so the engine calls it instead of ring.c for device
 * tensors. Callers: world.c (create), engine.c (collectives, staging).
 *
 * Threading: hv__gpu_* are thread-safe. A communicator is used by one thread at a time (the
 * engine's driver, which may be any thread that drives a round), except hv__nccl_abort, which
 * any thread may call. Collectives switch to the communicator's device for their duration and
 * restore the caller's current device afterwards.
 */
#ifndef HV_WORKER_LIB_TRANSPORT_NCCL_H
#define HV_WORKER_LIB_TRANSPORT_NCCL_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "rdzv.h"

#include "hv/hv.h"

/* 1 when this libhv was built with CUDA and NCCL (HV_HAVE_NCCL), else 0. */
int hv__gpu_built(void);

/* CUDA devices visible to this process; 0 without CUDA support, without a GPU or driver
 * (cudaGetDeviceCount failing counts as none). Cached after the first call. */
int hv__gpu_count(void);

/* The CUDA device ordinal p points into, or -1 for host memory (plain, pinned or managed). */
int hv__gpu_device_of(const void *p);

/* A host-wide identity of device dev (its PCI bus id, "0000:1a:00.0"), so that ranks can tell
 * whether two of them would share one GPU (NCCL refuses that). HV_EIO when CUDA cannot say. */
hv_err hv__gpu_identity(int dev, char *buf, size_t len);

/* Copies n bytes between any two of host and device memory (blocking). */
hv_err hv__gpu_memcpy(void *dst, const void *src, size_t n);

/* Pinned host memory for staging (*out owned: hv__gpu_host_free). */
hv_err hv__gpu_host_alloc(size_t n, void **out);
void hv__gpu_host_free(void *p);

/* Device memory on device dev, or on the calling thread's current device when dev < 0 (tests;
 * *out owned: hv__gpu_device_free). HV_ENOTSUP without a GPU. */
hv_err hv__gpu_device_alloc(int dev, size_t n, void **out);
void hv__gpu_device_free(void *p);

/* Waits for the work enqueued on stream (a cudaStream_t; NULL: the legacy default stream) of
 * device dev. HV_ENOTSUP without a GPU, HV_EINVAL when dev cannot be selected, HV_EIO when CUDA
 * reports an error (logged). */
hv_err hv__gpu_stream_sync(int dev, void *stream);

typedef struct hv__nccl_s hv__nccl_t;

/* Creates the job's NCCL communicator on CUDA device `device` (which becomes the calling
 * thread's current device). Rank 0 makes the unique id and publishes it through the rendezvous
 * KV (key "hv.nccl.<generation>"); the others wait for it. Collective: every rank must call it.
 * Bounded by timeout_ms. Errors: HV_ENOTSUP (no GPU or not built with NCCL), HV_ETIMEDOUT,
 * HV_EPEER (NCCL reported a remote error), HV_EINVAL (NCCL refused the setup). */
hv_err hv__nccl_create(hv__rdzv_t *rdzv, int rank, int size, int device, uint32_t generation,
                       uint32_t timeout_ms, hv__nccl_t **out);

/* The CUDA device of the communicator: device tensors must live there. */
int hv__nccl_device(const hv__nccl_t *c);

/* In-place allreduce of n device buffers (bufs[i], counts[i] elements), as one NCCL group.
 * Blocks until done; a call that does not finish within the communicator's timeout (plus time
 * for the bytes) aborts the communicator: HV_ETIMEDOUT. After any error the communicator is
 * unusable (destroy it). */
hv_err hv__nccl_allreduce(hv__nccl_t *c, void *const *bufs, const size_t *counts, size_t n,
                          hv_dtype dt, hv_op op);

/* In-place broadcast of bytes bytes at buf (device memory) from rank root. Blocks; bounded and
 * failing as hv__nccl_allreduce. */
hv_err hv__nccl_broadcast(hv__nccl_t *c, void *buf, size_t bytes, int root);

/* Gathers every rank's piece into out: rank k's lens[k] bytes land at out + offs[k] (the same
 * lens/offs on every rank); this rank's piece is read from in (which may be out + offs[rank]).
 * Equal pieces run as one ncclAllGather, unequal ones as a group of broadcasts. Blocks; bounded
 * and failing as hv__nccl_allreduce. */
hv_err hv__nccl_allgatherv(hv__nccl_t *c, const void *in, void *out, const size_t *lens,
                           const size_t *offs);

/* Any thread: makes the current and later calls fail with HV_ECANCELED. */
void hv__nccl_abort(hv__nccl_t *c);

/* Frees the communicator (ncclCommAbort if it failed, else ncclCommDestroy). NULL: no-op. */
void hv__nccl_destroy(hv__nccl_t *c);

#endif
