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
 * engine's driver), except hv__nccl_abort, which any thread may call.
 */
#ifndef HV_WORKER_LIB_TRANSPORT_NCCL_H
#define HV_WORKER_LIB_TRANSPORT_NCCL_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "rdzv.h"

#include "hv/hv.h"

/* CUDA devices visible to this process; 0 without CUDA support, without a GPU or driver
 * (cudaGetDeviceCount failing counts as none). Cached after the first call. */
int hv__gpu_count(void);

/* 1 when p points to device memory (not host, pinned host or managed memory). */
int hv__gpu_is_device(const void *p);

/* Copies n bytes between any two of host and device memory (blocking). */
hv_err hv__gpu_memcpy(void *dst, const void *src, size_t n);

/* Pinned host memory for staging (*out owned: hv__gpu_host_free). */
hv_err hv__gpu_host_alloc(size_t n, void **out);
void hv__gpu_host_free(void *p);

/* Device memory on the current device (tests and examples; *out owned: hv__gpu_device_free).
 * HV_ENOTSUP without a GPU. */
hv_err hv__gpu_device_alloc(size_t n, void **out);
void hv__gpu_device_free(void *p);

typedef struct hv__nccl_s hv__nccl_t;

/* Creates the job's NCCL communicator on device local_rank % hv__gpu_count(). Rank 0 makes the
 * unique id and publishes it through the rendezvous KV (key "hv.nccl.<generation>"); the others
 * wait for it. Collective: every rank must call it. Bounded by timeout_ms. Errors: HV_ENOTSUP
 * (no GPU or not built with NCCL), HV_ETIMEDOUT, HV_EPEER (NCCL reported a remote error). */
hv_err hv__nccl_create(hv__rdzv_t *rdzv, int rank, int size, int local_rank, uint32_t generation,
                       uint32_t timeout_ms, hv__nccl_t **out);

/* In-place allreduce of n device buffers (bufs[i], counts[i] elements), as one NCCL group.
 * Blocks until done; a call that does not finish within the communicator's timeout (plus time
 * for the bytes) aborts the communicator: HV_ETIMEDOUT. After any error the communicator is
 * unusable (destroy it). */
hv_err hv__nccl_allreduce(hv__nccl_t *c, void *const *bufs, const size_t *counts, size_t n,
                          hv_dtype dt, hv_op op);

/* Any thread: makes the current and later calls fail with HV_ECANCELED. */
void hv__nccl_abort(hv__nccl_t *c);

/* Frees the communicator (ncclCommAbort if it failed, else ncclCommDestroy). NULL: no-op. */
void hv__nccl_destroy(hv__nccl_t *c);

#endif
