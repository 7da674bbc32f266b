/*
 * transport_nccl: see transport_nccl.h. NCCL's and CUDA's codes are converted to hv_err here
 * and logged with their raw text once. The communicator is created non-blocking (config.blocking
 * = 0): every NCCL call may return ncclInProgress, and this module polls ncclCommGetAsyncError
 * and the stream with a deadline, so that no call can hang the user's process; on timeout or
 * abort it calls ncclCommAbort, the documented way to unblock a communicator after a peer loss.
 */
#include "transport_nccl.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "mem.h"
#include "util.h"

#ifdef HV_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

static atomic_int gpu_devices = -1; // -1: not asked yet

#ifdef HV_HAVE_NCCL

int hv__gpu_built(void) { return 1; }

int hv__gpu_count(void) {
    int c = atomic_load(&gpu_devices);
    if (c < 0) {
        int n = 0;
        cudaError_t e = cudaGetDeviceCount(&n);
        if (e != cudaSuccess) {
            HV_LOG(HV_LOG_INFO, "gpu", "HV-GPU-NONE", "no CUDA device: %s", cudaGetErrorString(e));
            cudaGetLastError(); // clear the sticky error
            n = 0;
        }
        atomic_store(&gpu_devices, n);
        c = n;
    }
    return c;
}

int hv__gpu_device_of(const void *p) {
    if (p == NULL || hv__gpu_count() == 0) {
        return -1;
    }
    struct cudaPointerAttributes a;
    memset(&a, 0, sizeof(a));
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    return a.type == cudaMemoryTypeDevice ? a.device : -1;
}

hv_err hv__gpu_identity(int dev, char *buf, size_t len) {
    cudaError_t e = cudaDeviceGetPCIBusId(buf, (int)len, dev);
    if (e != cudaSuccess) {
        HV_LOG(HV_LOG_WARN, "gpu", "HV-GPU-BUSID", "device %d: no PCI bus id: %s", dev,
               cudaGetErrorString(e));
        cudaGetLastError();
        return HV_EIO;
    }
    return HV_OK;
}

hv_err hv__gpu_memcpy(void *dst, const void *src, size_t n) {
    if (n == 0) {
        return HV_OK;
    }
    cudaError_t e = cudaMemcpy(dst, src, n, cudaMemcpyDefault);
    if (e != cudaSuccess) {
        HV_LOG(HV_LOG_ERROR, "gpu", "HV-GPU-COPY", "cudaMemcpy of %zu bytes: %s", n,
               cudaGetErrorString(e));
        cudaGetLastError();
        return HV_EIO;
    }
    return HV_OK;
}

hv_err hv__gpu_host_alloc(size_t n, void **out) {
    void *p = NULL;
    if (cudaMallocHost(&p, n ? n : 1) != cudaSuccess) {
        cudaGetLastError();
        return HV_ENOMEM;
    }
    *out = p;
    return HV_OK;
}

void hv__gpu_host_free(void *p) {
    if (p != NULL) {
        cudaFreeHost(p);
    }
}

/* Makes dev the calling thread's current device; *saved is the one gpu_leave gives back (-1 if
 * CUDA could not say). HV_EIO when CUDA refuses dev. */
static hv_err gpu_enter(int dev, int *saved) {
    if (cudaGetDevice(saved) != cudaSuccess) {
        cudaGetLastError();
        *saved = -1;
    }
    if (*saved != dev && cudaSetDevice(dev) != cudaSuccess) {
        cudaGetLastError();
        return HV_EIO;
    }
    return HV_OK;
}

static void gpu_leave(int dev, int saved) {
    if (saved >= 0 && saved != dev) {
        cudaSetDevice(saved);
    }
}

hv_err hv__gpu_device_alloc(int dev, size_t n, void **out) {
    if (hv__gpu_count() == 0) {
        return HV_ENOTSUP;
    }
    int saved = -1;
    if (dev >= 0 && gpu_enter(dev, &saved) != HV_OK) {
        return HV_EINVAL;
    }
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, n ? n : 1);
    if (dev >= 0) {
        gpu_leave(dev, saved);
    }
    if (e != cudaSuccess) {
        cudaGetLastError();
        return HV_ENOMEM;
    }
    *out = p;
    return HV_OK;
}

void hv__gpu_device_free(void *p) {
    if (p != NULL) {
        cudaFree(p);
    }
}

hv_err hv__gpu_stream_sync(int dev, void *stream) {
    if (hv__gpu_count() == 0) {
        return HV_ENOTSUP;
    }
    int saved = -1;
    if (gpu_enter(dev, &saved) != HV_OK) {
        HV_LOG(HV_LOG_ERROR, "gpu", "HV-GPU-DEVICE", "CUDA device %d cannot be selected", dev);
        return HV_EINVAL;
    }
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)stream);
    gpu_leave(dev, saved);
    if (e != cudaSuccess) {
        HV_LOG(HV_LOG_ERROR, "gpu", "HV-GPU-STREAM", "cudaStreamSynchronize of stream %p: %s",
               stream, cudaGetErrorString(e));
        cudaGetLastError();
        return HV_EIO;
    }
    return HV_OK;
}

struct hv__nccl_s {
    ncclComm_t comm;
    cudaStream_t stream;
    void *fusion; // device fusion buffer (packed batches), grown on demand
    size_t fusion_cap;
    int device;
    uint32_t timeout_ms;
    atomic_int aborted; // set by hv__nccl_abort (any thread)
    int failed;         // the communicator was aborted or reported an error
};

static hv_err err_from_nccl(ncclResult_t r, const char *what) {
    if (r == ncclSuccess) {
        return HV_OK;
    }
    HV_LOG(HV_LOG_ERROR, "nccl", "HV-NCCL-ERROR", "%s: %s", what, ncclGetErrorString(r));
    switch (r) {
    case ncclRemoteError:
    case ncclSystemError:
        return HV_EPEER;
    case ncclInvalidArgument:
    case ncclInvalidUsage:
        return HV_EINVAL;
    case ncclUnhandledCudaError:
        return HV_EIO;
    default:
        return HV_EINTERNAL;
    }
}

/* Marks the communicator failed and aborts it (the only way to unblock NCCL after a peer loss). */
static void nccl_fail(hv__nccl_t *c) {
    if (!c->failed) {
        c->failed = 1;
        ncclCommAbort(c->comm);
    }
}

/* Waits until the communicator left ncclInProgress and, if stream, the stream is idle. */
static hv_err nccl_wait(hv__nccl_t *c, int stream, uint64_t deadline, const char *what) {
    for (;;) {
        if (atomic_load(&c->aborted)) {
            nccl_fail(c);
            return HV_ECANCELED;
        }
        ncclResult_t async = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError(c->comm, &async);
        if (r != ncclSuccess || (async != ncclSuccess && async != ncclInProgress)) {
            hv_err rc = err_from_nccl(r != ncclSuccess ? r : async, what);
            nccl_fail(c);
            return rc;
        }
        if (async == ncclSuccess) {
            if (!stream) {
                return HV_OK;
            }
            cudaError_t q = cudaStreamQuery(c->stream);
            if (q == cudaSuccess) {
                return HV_OK;
            }
            if (q != cudaErrorNotReady) {
                HV_LOG(HV_LOG_ERROR, "nccl", "HV-NCCL-CUDA", "%s: %s", what, cudaGetErrorString(q));
                cudaGetLastError();
                nccl_fail(c);
                return HV_EIO;
            }
        }
        if (hv_now_ms() >= deadline) {
            HV_LOG(HV_LOG_WARN, "nccl", "HV-NCCL-TIMEOUT", "%s did not finish in %u ms: aborting",
                   what, c->timeout_ms);
            nccl_fail(c);
            return HV_ETIMEDOUT;
        }
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 20 * 1000};
        nanosleep(&ts, NULL);
    }
}

hv_err hv__nccl_create(hv__rdzv_t *rdzv, int rank, int size, int device, uint32_t generation,
                       uint32_t timeout_ms, hv__nccl_t **out) {
    int ndev = hv__gpu_count();
    if (ndev == 0) {
        return HV_ENOTSUP;
    }
    if (device < 0 || device >= ndev) {
        return HV_EINVAL;
    }
    hv__nccl_t *c = hv_calloc(1, sizeof(*c));
    if (c == NULL) {
        return HV_ENOMEM;
    }
    c->timeout_ms = timeout_ms;
    c->device = device;
    hv_err rc = HV_OK;
    // The communicator takes the current device; it stays current for the caller (hv.h).
    cudaError_t ce = cudaSetDevice(c->device);
    if (ce == cudaSuccess) {
        ce = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
    }
    if (ce != cudaSuccess) {
        HV_LOG(HV_LOG_ERROR, "nccl", "HV-NCCL-DEVICE", "device %d: %s", c->device,
               cudaGetErrorString(ce));
        cudaGetLastError();
        hv_free(c);
        return HV_EIO;
    }
    char key[64];
    snprintf(key, sizeof(key), "hv.nccl.%u", generation);
    ncclUniqueId id;
    if (rank == 0) {
        if ((rc = err_from_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId")) == HV_OK) {
            rc = rdzv->ops->kv_put(rdzv->ctx, key, &id, sizeof(id));
        }
    } else {
        void *val = NULL;
        size_t len = 0;
        rc = rdzv->ops->kv_get(rdzv->ctx, key, timeout_ms, &val, &len);
        if (rc == HV_OK && len != sizeof(id)) {
            rc = HV_EPROTO;
        }
        if (rc == HV_OK) {
            memcpy(&id, val, sizeof(id));
        }
        hv_free(val);
    }
    if (rc != HV_OK) {
        HV_LOG(HV_LOG_ERROR, "nccl", "HV-NCCL-ID", "rank %d: %s the NCCL id (key %s): %s", rank,
               rank == 0 ? "publishing" : "fetching", key, hv_strerror(rc));
        cudaStreamDestroy(c->stream);
        hv_free(c);
        return rc;
    }
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&c->comm, size, id, rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) {
        rc = err_from_nccl(r, "ncclCommInitRankConfig");
        cudaStreamDestroy(c->stream);
        hv_free(c);
        return rc;
    }
    rc = nccl_wait(c, 0, hv_now_ms() + timeout_ms, "ncclCommInitRankConfig");
    if (rc != HV_OK) {
        cudaStreamDestroy(c->stream);
        hv_free(c);
        return rc;
    }
    HV_LOG(HV_LOG_INFO, "nccl", "HV-NCCL-UP",
           "rank %d of %d: NCCL communicator on device %d (id %s)", rank, size, c->device, key);
    *out = c;
    return HV_OK;
}

int hv__nccl_device(const hv__nccl_t *c) { return c->device; }

static int nccl_type(hv_dtype dt, ncclDataType_t *t) {
    switch (dt) {
    case HV_FLOAT32:
        *t = ncclFloat32;
        return 1;
    case HV_FLOAT64:
        *t = ncclFloat64;
        return 1;
    case HV_FLOAT16:
        *t = ncclFloat16;
        return 1;
    case HV_BFLOAT16:
        *t = ncclBfloat16;
        return 1;
    case HV_INT32:
        *t = ncclInt32;
        return 1;
    case HV_INT64:
        *t = ncclInt64;
        return 1;
    case HV_UINT8:
        *t = ncclUint8;
        return 1;
    default:
        return 0;
    }
}

static int nccl_op(hv_op op, ncclRedOp_t *o) {
    switch (op) {
    case HV_SUM:
        *o = ncclSum;
        return 1;
    case HV_AVG:
        *o = ncclAvg;
        return 1;
    case HV_MIN:
        *o = ncclMin;
        return 1;
    case HV_MAX:
        *o = ncclMax;
        return 1;
    case HV_PRODUCT:
        *o = ncclProd;
        return 1;
    default:
        return 0;
    }
}

/* A collective's bracket: switch to the communicator's device (restored by nccl_leave), open a
 * group. Between them the caller issues NCCL calls, keeping the first failure in *r. */
typedef struct nccl_call_s {
    int saved_device;
    ncclResult_t r;
} nccl_call_t;

static hv_err nccl_begin(hv__nccl_t *c, nccl_call_t *k) {
    if (c->failed) {
        return HV_ESTATE;
    }
    hv_err rc = gpu_enter(c->device, &k->saved_device);
    if (rc != HV_OK) {
        return rc;
    }
    k->r = ncclGroupStart();
    return HV_OK;
}

static int nccl_ok(ncclResult_t r) { return r == ncclSuccess || r == ncclInProgress; }

/* Closes the group and waits for the work: bytes bound the deadline (the peer timeout plus the
 * bytes at a pessimistic 1 GB/s). The communicator's device stays current (nccl_leave). */
static hv_err nccl_end(hv__nccl_t *c, nccl_call_t *k, size_t bytes, const char *what) {
    ncclResult_t g = ncclGroupEnd();
    if (!nccl_ok(k->r) || !nccl_ok(g)) {
        hv_err rc = err_from_nccl(!nccl_ok(k->r) ? k->r : g, what);
        nccl_fail(c);
        return rc;
    }
    return nccl_wait(c, 1, hv_now_ms() + c->timeout_ms + bytes / 1000000u, what);
}

/* Restores the caller's current device; returns rc. */
static hv_err nccl_leave(const hv__nccl_t *c, const nccl_call_t *k, hv_err rc) {
    gpu_leave(c->device, k->saved_device);
    return rc;
}

/* Device fusion buffer of at least n bytes (on the communicator's device, which is current). */
static hv_err nccl_fusion(hv__nccl_t *c, size_t n) {
    if (n <= c->fusion_cap) {
        return HV_OK;
    }
    if (c->fusion != NULL) {
        // Earlier work on the stream may still read the old buffer.
        cudaStreamSynchronize(c->stream);
        cudaFree(c->fusion);
        c->fusion = NULL;
        c->fusion_cap = 0;
    }
    if (cudaMalloc(&c->fusion, n) != cudaSuccess) {
        cudaGetLastError();
        c->fusion = NULL;
        HV_LOG(HV_LOG_ERROR, "nccl", "HV-NCCL-FUSION", "no %zu-byte fusion buffer on device %d", n,
               c->device);
        return HV_ENOMEM;
    }
    c->fusion_cap = n;
    return HV_OK;
}

/* Queues device-to-device copies of the batch into (pack) or out of the fusion buffer. */
static hv_err nccl_copy_batch(hv__nccl_t *c, void *const *bufs, const size_t *counts, size_t n,
                              size_t esize, int pack) {
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        size_t b = counts[i] * esize;
        char *f = (char *)c->fusion + off;
        if (b > 0 && cudaMemcpyAsync(pack ? f : bufs[i], pack ? bufs[i] : f, b,
                                     cudaMemcpyDeviceToDevice, c->stream) != cudaSuccess) {
            cudaGetLastError();
            return HV_EIO;
        }
        off += b;
    }
    return HV_OK;
}

hv_err hv__nccl_allreduce(hv__nccl_t *c, void *const *bufs, const size_t *counts, size_t n,
                          hv_dtype dt, hv_op op) {
    ncclDataType_t t;
    ncclRedOp_t o;
    if (!nccl_type(dt, &t) || !nccl_op(op, &o)) {
        return HV_EINVAL;
    }
    nccl_call_t k;
    hv_err rc = nccl_begin(c, &k);
    if (rc != HV_OK) {
        return rc;
    }
    size_t esize = hv_dtype_size(dt), total = 0;
    for (size_t i = 0; i < n; i++) {
        total += counts[i];
    }
    if (n == 1) {
        k.r = nccl_ok(k.r) ? ncclAllReduce(bufs[0], bufs[0], counts[0], t, o, c->comm, c->stream)
                           : k.r;
    } else if (nccl_ok(k.r)) {
        // A fused batch: pack into one device buffer, one collective, unpack (all ordered on
        // the stream), as the host path runs one ring allreduce over the batch.
        if ((rc = nccl_fusion(c, total * esize)) == HV_OK &&
            (rc = nccl_copy_batch(c, bufs, counts, n, esize, 1)) == HV_OK) {
            k.r = ncclAllReduce(c->fusion, c->fusion, total, t, o, c->comm, c->stream);
        }
    }
    hv_err end = nccl_end(c, &k, total * esize, "NCCL allreduce");
    if (rc == HV_OK && end == HV_OK && n > 1 &&
        (rc = nccl_copy_batch(c, bufs, counts, n, esize, 0)) == HV_OK) {
        rc = nccl_wait(c, 1, hv_now_ms() + c->timeout_ms, "unpacking the fusion buffer");
    }
    return nccl_leave(c, &k, rc != HV_OK ? rc : end);
}

hv_err hv__nccl_broadcast(hv__nccl_t *c, void *buf, size_t bytes, int root) {
    nccl_call_t k;
    hv_err rc = nccl_begin(c, &k);
    if (rc != HV_OK) {
        return rc;
    }
    if (nccl_ok(k.r)) {
        k.r = ncclBroadcast(buf, buf, bytes, ncclUint8, root, c->comm, c->stream);
    }
    return nccl_leave(c, &k, nccl_end(c, &k, bytes, "NCCL broadcast"));
}

hv_err hv__nccl_allgatherv(hv__nccl_t *c, const void *in, void *out, const size_t *lens,
                           const size_t *offs) {
    int size = 0, rank = 0;
    if (ncclCommCount(c->comm, &size) != ncclSuccess ||
        ncclCommUserRank(c->comm, &rank) != ncclSuccess) {
        return HV_EINTERNAL;
    }
    int equal = 1;
    size_t total = 0;
    for (int i = 0; i < size; i++) {
        equal &= lens[i] == lens[0] && offs[i] == (size_t)i * lens[0];
        total += lens[i];
    }
    nccl_call_t k;
    hv_err rc = nccl_begin(c, &k);
    if (rc != HV_OK) {
        return rc;
    }
    char *o = out;
    if (equal) {
        if (lens[0] > 0 && nccl_ok(k.r)) {
            k.r = ncclAllGather(in, out, lens[0], ncclUint8, c->comm, c->stream);
        }
    } else {
        // Unequal pieces: rank i broadcasts its piece into place on every rank.
        for (int i = 0; i < size && nccl_ok(k.r); i++) {
            if (lens[i] > 0) {
                const void *src = i == rank ? in : o + offs[i];
                k.r = ncclBroadcast(src, o + offs[i], lens[i], ncclUint8, i, c->comm, c->stream);
            }
        }
    }
    return nccl_leave(c, &k, nccl_end(c, &k, total, "NCCL allgather"));
}

void hv__nccl_abort(hv__nccl_t *c) {
    if (c != NULL) {
        atomic_store(&c->aborted, 1);
    }
}

void hv__nccl_destroy(hv__nccl_t *c) {
    if (c == NULL) {
        return;
    }
    if (c->failed || atomic_load(&c->aborted)) {
        nccl_fail(c);
    } else {
        ncclCommDestroy(c->comm);
    }
    int saved = -1;
    gpu_enter(c->device, &saved); // best effort: the frees below work from any device too
    if (c->fusion != NULL) {
        cudaFree(c->fusion);
    }
    cudaStreamDestroy(c->stream);
    gpu_leave(c->device, saved);
    cudaGetLastError();
    hv_free(c);
}

#else // !HV_HAVE_NCCL: no GPU support in this build

int hv__gpu_built(void) { return 0; }

int hv__gpu_count(void) {
    atomic_store(&gpu_devices, 0);
    return 0;
}

int hv__gpu_device_of(const void *p) {
    (void)p;
    return -1;
}

hv_err hv__gpu_identity(int dev, char *buf, size_t len) {
    (void)dev;
    (void)buf;
    (void)len;
    return HV_ENOTSUP;
}

hv_err hv__gpu_memcpy(void *dst, const void *src, size_t n) {
    memmove(dst, src, n);
    return HV_OK;
}

hv_err hv__gpu_host_alloc(size_t n, void **out) {
    void *p = hv_malloc(n ? n : 1);
    if (p == NULL) {
        return HV_ENOMEM;
    }
    *out = p;
    return HV_OK;
}

void hv__gpu_host_free(void *p) { hv_free(p); }

hv_err hv__gpu_device_alloc(int dev, size_t n, void **out) {
    (void)dev;
    (void)n;
    (void)out;
    return HV_ENOTSUP;
}

void hv__gpu_device_free(void *p) { (void)p; }

hv_err hv__gpu_stream_sync(int dev, void *stream) {
    (void)dev;
    (void)stream;
    return HV_ENOTSUP;
}

hv_err hv__nccl_create(hv__rdzv_t *rdzv, int rank, int size, int device, uint32_t generation,
                       uint32_t timeout_ms, hv__nccl_t **out) {
    (void)rdzv;
    (void)rank;
    (void)size;
    (void)device;
    (void)generation;
    (void)timeout_ms;
    (void)out;
    return HV_ENOTSUP;
}

hv_err hv__nccl_allreduce(hv__nccl_t *c, void *const *bufs, const size_t *counts, size_t n,
                          hv_dtype dt, hv_op op) {
    (void)c;
    (void)bufs;
    (void)counts;
    (void)n;
    (void)dt;
    (void)op;
    return HV_ENOTSUP;
}

int hv__nccl_device(const hv__nccl_t *c) {
    (void)c;
    return -1;
}

hv_err hv__nccl_broadcast(hv__nccl_t *c, void *buf, size_t bytes, int root) {
    (void)c;
    (void)buf;
    (void)bytes;
    (void)root;
    return HV_ENOTSUP;
}

hv_err hv__nccl_allgatherv(hv__nccl_t *c, const void *in, void *out, const size_t *lens,
                           const size_t *offs) {
    (void)c;
    (void)in;
    (void)out;
    (void)lens;
    (void)offs;
    return HV_ENOTSUP;
}

void hv__nccl_abort(hv__nccl_t *c) { (void)c; }
void hv__nccl_destroy(hv__nccl_t *c) { (void)c; }

#endif
