/*
 * gpusim: a CPU stand-in for the CUDA runtime and NCCL, for tests only (libhv_gpusim.so). It
 * defines the CUDA runtime and NCCL functions libhv calls, with "devices" made of host memory,
 * so that libhv's real GPU code path (transport_nccl.c, the engine's device-pointer staging) runs
 * on a machine without a GPU: LD_PRELOAD it in front of a program linked with libcudart and
 * libnccl, or link it instead of them. It is not a GPU emulator: there are no kernels, no
 * streams that overlap work, no peer access; it is not shipped and libhv never depends on it.
 * A device allocation is an address range reserved PROT_NONE (host access faults, as on a real
 * device) whose bytes live in a separate host backing buffer; cudaMemcpy and the collectives
 * translate. Ranks of a communicator meet in a POSIX shared-memory segment named from the
 * unique id, so ranks may be threads or processes; each communicator has a worker thread that
 * runs its collectives in order (chunk through a per-rank slot, barrier, reduce with libhv's own
 * kernels from worker_lib/coll/reduce.c, barrier). Barriers poll, check the abort flag and whether
 * every peer process is alive; a dead peer makes the communicator's async error
 * ncclRemoteError, a stalled one keeps the operation pending (the caller must ncclCommAbort).
 * Config: HV_GPUSIM_DEVICES (devices, default 1; 0: none), HV_GPUSIM_DEBUG=1 (log to stderr),
 * HV_NODE (the host name used for NCCL's duplicate-GPU check). Thread-safe: all state sits in
 * tables guarded by one mutex; the current device and the last error are thread-local.
 * Built with -fvisibility=hidden: only the CUDA/NCCL functions below (GS_API) are exported.
 */
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "reduce.h"

#define GS_API __attribute__((visibility("default")))

#define GS_MAX_DEVICES 64
#define GS_MAX_RANKS 1024
#define GS_SLOT_BYTES ((size_t)1 << 20) // one rank's share of the segment per chunk
#define GS_HOST_LEN 64
#define GS_POLL_NS 30000            // barrier poll period once spinning stopped
#define GS_LIVENESS_NS 5000000ull   // how often a waiting rank checks its peers' processes
#define GS_CONFIG_MAGIC 0xcafebeefu // NCCL_CONFIG_INITIALIZER's magic

/* ---- global state ---------------------------------------------------------------------------- */

/* One cudaMalloc or cudaMallocHost allocation. */
typedef struct gs_alloc_s {
    struct gs_alloc_s *next; // g_allocs list (g_mu)
    char *addr;              // the address handed out (device: the PROT_NONE reservation)
    size_t len;              // bytes asked for
    size_t map_len;          // bytes reserved (device: len rounded up to pages)
    char *backing;           // the bytes (device: separate heap buffer; pinned: == addr)
    int device;              // current device at allocation
    int pinned;              // cudaMallocHost / cudaHostAlloc
    int refs;                // 1 while allocated + 1 per queued collective using it (g_mu)
} gs_alloc_t;

/* A stream: only counts the collectives enqueued on it and not finished. */
struct CUstream_st {
    struct CUstream_st *next; // g_streams list of live streams (g_mu)
    int device;               // device current at creation
    unsigned flags;           // cudaStreamNonBlocking or 0
    int pending;              // collectives enqueued, not finished (g_mu)
    int destroyed;            // cudaStreamDestroy came while pending: the last op frees it
};

enum { GS_ALLREDUCE = 1, GS_BROADCAST, GS_ALLGATHER, GS_REDUCESCATTER };

/* One enqueued collective. Holds a reference on its allocations and counts on its stream. */
typedef struct gs_op_s {
    struct gs_op_s *next;
    ncclComm_t comm;
    struct CUstream_st *stream;
    int kind; // GS_ALLREDUCE ...
    ncclDataType_t nccl_dtype;
    ncclRedOp_t nccl_op;
    hv_dtype dt;
    hv_op op;
    int root;
    size_t count; // elements (allgather: per rank sent; reducescatter: per rank received)
    size_t esize; // bytes per element
    gs_alloc_t *send_a, *recv_a; // referenced allocations (send_a NULL when unused)
    const char *send;            // backing address of the send buffer (NULL when unused)
    char *recv;                  // backing address of the receive buffer
} gs_op_t;

/* Per-rank record in the shared segment. */
typedef struct gs_rank_s {
    _Atomic int32_t state; // 0 free, 1 being filled, 2 registered
    int32_t pid;
    int32_t device;
    int32_t left; // the rank destroyed or aborted its communicator
    char host[GS_HOST_LEN];
    _Atomic uint64_t phase; // barriers this rank has reached
    // The collective this rank runs now, written before its first barrier (mismatch check).
    int32_t kind, dtype, redop, root;
    uint64_t count;
    uint64_t seq;
} gs_rank_t;

/* The shared segment: header, one gs_rank_t per rank, then one slot per rank (page aligned). */
typedef struct gs_seg_s {
    _Atomic int32_t nranks;   // set by the first rank to map it
    _Atomic int32_t arrived;  // ranks registered
    _Atomic int32_t left;     // ranks that destroyed / aborted
    _Atomic int32_t unlinked; // the name was removed
    gs_rank_t ranks[];
} gs_seg_t;

struct ncclComm {
    struct ncclComm *next; // g_comms list of live communicators (g_mu)
    int rank, nranks, device, blocking;
    char shm_name[48];
    gs_seg_t *seg;
    size_t seg_len, slots_off;
    pthread_t worker;
    pthread_cond_t cv;    // wakes the worker (with g_mu)
    gs_op_t *head, *tail; // queued collectives (g_mu)
    int stop;             // ncclCommDestroy: finish the queue, then exit (g_mu)
    atomic_int abort;     // ncclCommAbort: drop everything now
    atomic_int state;     // ncclInProgress until init is done, then ncclSuccess or an error
    uint64_t phase;       // barriers passed (worker only)
    uint64_t seq;         // collectives run (worker only)
    char msg[256];        // why state is an error (g_mu)
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER; // a stream went idle, a comm left init
static gs_alloc_t *g_allocs;
static struct CUstream_st *g_streams;
static struct CUstream_st g_default_streams[GS_MAX_DEVICES];
static ncclComm_t g_comms;
static int g_ndev = 1;
static int g_debug;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static _Thread_local int tl_device;
static _Thread_local cudaError_t tl_error = cudaSuccess;
static _Thread_local int tl_group_depth;
static _Thread_local gs_op_t *tl_group_head, *tl_group_tail;
static _Thread_local ncclResult_t tl_group_err = ncclSuccess;
static _Thread_local char tl_msg[256];

static void gs_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void gs_log(const char *fmt, ...) {
    if (!g_debug) {
        return;
    }
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "gpusim[%d]: %s\n", (int)getpid(), line);
}

static void atfork_prepare(void) { pthread_mutex_lock(&g_mu); }
static void atfork_release(void) { pthread_mutex_unlock(&g_mu); }

static void gs_init_once(void) {
    const char *d = getenv("HV_GPUSIM_DEBUG");
    g_debug = d != NULL && strcmp(d, "1") == 0;
    const char *n = getenv("HV_GPUSIM_DEVICES");
    if (n != NULL && *n != '\0') {
        char *end = NULL;
        long v = strtol(n, &end, 10);
        if (*end != '\0' || v < 0 || v > GS_MAX_DEVICES) {
            gs_log("HV_GPUSIM_DEVICES=%s is not 0..%d: using 1", n, GS_MAX_DEVICES);
            v = 1;
        }
        g_ndev = (int)v;
    }
    for (int i = 0; i < GS_MAX_DEVICES; i++) {
        g_default_streams[i].device = i;
    }
    pthread_atfork(atfork_prepare, atfork_release, atfork_release);
    gs_log("%d device(s)", g_ndev);
}

static void gs_init(void) { pthread_once(&g_once, gs_init_once); }

static uint64_t gs_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- CUDA runtime: errors and devices ---------------------------------------------------------- */

static cudaError_t cuda_fail(cudaError_t e, const char *what) {
    tl_error = e;
    gs_log("%s: %s", what, cudaGetErrorName(e));
    return e;
}

GS_API const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
    case cudaSuccess:
        return "cudaSuccess";
    case cudaErrorInvalidValue:
        return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
        return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidMemcpyDirection:
        return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorNoDevice:
        return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice:
        return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle:
        return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady:
        return "cudaErrorNotReady";
    case cudaErrorInitializationError:
        return "cudaErrorInitializationError";
    case cudaErrorInsufficientDriver:
        return "cudaErrorInsufficientDriver";
    case cudaErrorNotSupported:
        return "cudaErrorNotSupported";
    case cudaErrorUnknown:
        return "cudaErrorUnknown";
    default:
        return "unrecognized error code";
    }
}

GS_API const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess:
        return "no error";
    case cudaErrorInvalidValue:
        return "invalid argument";
    case cudaErrorMemoryAllocation:
        return "out of memory";
    case cudaErrorInvalidMemcpyDirection:
        return "invalid copy direction for memcpy";
    case cudaErrorNoDevice:
        return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice:
        return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
        return "invalid resource handle";
    case cudaErrorNotReady:
        return "device not ready";
    case cudaErrorInitializationError:
        return "initialization error";
    case cudaErrorInsufficientDriver:
        return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNotSupported:
        return "operation not supported";
    case cudaErrorUnknown:
        return "unknown error";
    default:
        return "unrecognized error code";
    }
}

GS_API cudaError_t cudaGetLastError(void) {
    cudaError_t e = tl_error;
    tl_error = cudaSuccess;
    return e;
}

GS_API cudaError_t cudaPeekAtLastError(void) { return tl_error; }

GS_API cudaError_t cudaGetDeviceCount(int *count) {
    gs_init();
    if (count == NULL) {
        return cuda_fail(cudaErrorInvalidValue, "cudaGetDeviceCount");
    }
    *count = g_ndev;
    if (g_ndev == 0) {
        return cuda_fail(cudaErrorNoDevice, "cudaGetDeviceCount");
    }
    return cudaSuccess;
}

GS_API cudaError_t cudaSetDevice(int device) {
    gs_init();
    if (g_ndev == 0) {
        return cuda_fail(cudaErrorNoDevice, "cudaSetDevice");
    }
    if (device < 0 || device >= g_ndev) {
        return cuda_fail(cudaErrorInvalidDevice, "cudaSetDevice");
    }
    tl_device = device;
    return cudaSuccess;
}

GS_API cudaError_t cudaGetDevice(int *device) {
    gs_init();
    if (g_ndev == 0) {
        return cuda_fail(cudaErrorNoDevice, "cudaGetDevice");
    }
    if (device == NULL) {
        return cuda_fail(cudaErrorInvalidValue, "cudaGetDevice");
    }
    *device = tl_device;
    return cudaSuccess;
}

/* PCI bus ids "0000:XX:00.0", one per simulated device (XX = 0x10 + device); the same on every
 * simulated host, as identical machines would report. */
GS_API cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device) {
    gs_init();
    if (g_ndev == 0) {
        return cuda_fail(cudaErrorNoDevice, "cudaDeviceGetPCIBusId");
    }
    if (device < 0 || device >= g_ndev) {
        return cuda_fail(cudaErrorInvalidDevice, "cudaDeviceGetPCIBusId");
    }
    char id[16];
    int n = snprintf(id, sizeof(id), "0000:%02X:00.0", 0x10 + device);
    if (pciBusId == NULL || len <= n) {
        return cuda_fail(cudaErrorInvalidValue, "cudaDeviceGetPCIBusId: buffer too small");
    }
    memcpy(pciBusId, id, (size_t)n + 1);
    return cudaSuccess;
}

GS_API cudaError_t cudaDeviceGetByPCIBusId(int *device, const char *pciBusId) {
    gs_init();
    unsigned dom = 0, bus = 0, dev = 0, fn = 0;
    if (device == NULL || pciBusId == NULL ||
        sscanf(pciBusId, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4 || dom != 0 || dev != 0 ||
        fn != 0 || bus < 0x10 || bus >= 0x10u + (unsigned)g_ndev) {
        return cuda_fail(cudaErrorInvalidDevice, "cudaDeviceGetByPCIBusId");
    }
    *device = (int)bus - 0x10;
    return cudaSuccess;
}

/* ---- CUDA runtime: memory ---------------------------------------------------------------------- */

/* The allocation whose reserved range holds p (device: [addr, addr + map_len), pinned:
 * [addr, addr + len)), or NULL. g_mu held. */
static gs_alloc_t *alloc_find(const void *p) {
    const char *c = p;
    for (gs_alloc_t *a = g_allocs; a != NULL; a = a->next) {
        if (c >= a->addr && c < a->addr + (a->pinned ? a->len : a->map_len)) {
            return a;
        }
    }
    return NULL;
}

/* Drops one reference; frees the backing with the last. g_mu held. */
static void alloc_unref(gs_alloc_t *a) {
    if (a != NULL && --a->refs == 0) {
        if (a->pinned) {
            free(a->addr);
        } else {
            free(a->backing);
        }
        free(a);
    }
}

/* The device allocation that holds all of [p, p + n) on device dev (-1: any), or NULL. g_mu
 * held. */
static gs_alloc_t *alloc_device_range(const void *p, size_t n, int dev) {
    gs_alloc_t *a = alloc_find(p);
    if (a == NULL || a->pinned || (dev >= 0 && a->device != dev)) {
        return NULL;
    }
    size_t off = (size_t)((const char *)p - a->addr);
    if (off > a->len || n > a->len - off) {
        return NULL;
    }
    return a;
}

GS_API cudaError_t cudaMalloc(void **devPtr, size_t size) {
    gs_init();
    if (devPtr == NULL) {
        return cuda_fail(cudaErrorInvalidValue, "cudaMalloc");
    }
    if (g_ndev == 0) {
        return cuda_fail(cudaErrorNoDevice, "cudaMalloc");
    }
    if (size == 0) {
        *devPtr = NULL;
        return cudaSuccess;
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (size > SIZE_MAX - page) {
        return cuda_fail(cudaErrorMemoryAllocation, "cudaMalloc");
    }
    size_t map_len = (size + page - 1) / page * page;
    gs_alloc_t *a = calloc(1, sizeof(*a));
    char *backing = malloc(size);
    void *addr = mmap(NULL, map_len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (a == NULL || backing == NULL || addr == MAP_FAILED) {
        free(a);
        free(backing);
        if (addr != MAP_FAILED) {
            munmap(addr, map_len);
        }
        return cuda_fail(cudaErrorMemoryAllocation, "cudaMalloc");
    }
    memset(backing, 0xa5, size); // device memory is not zeroed: make reads of it visible
    *a = (gs_alloc_t){.addr = addr,
                      .len = size,
                      .map_len = map_len,
                      .backing = backing,
                      .device = tl_device,
                      .refs = 1};
    pthread_mutex_lock(&g_mu);
    a->next = g_allocs;
    g_allocs = a;
    pthread_mutex_unlock(&g_mu);
    *devPtr = addr;
    gs_log("cudaMalloc(%zu) = %p on device %d", size, addr, a->device);
    return cudaSuccess;
}

/* Removes the allocation that starts at p (pinned or device as asked). g_mu held. */
static gs_alloc_t *alloc_remove(void *p, int pinned) {
    for (gs_alloc_t **pp = &g_allocs; *pp != NULL; pp = &(*pp)->next) {
        gs_alloc_t *a = *pp;
        if (a->addr == p && a->pinned == pinned) {
            *pp = a->next;
            return a;
        }
    }
    return NULL;
}

GS_API cudaError_t cudaFree(void *devPtr) {
    gs_init();
    if (devPtr == NULL) {
        return cudaSuccess;
    }
    pthread_mutex_lock(&g_mu);
    gs_alloc_t *a = alloc_remove(devPtr, 0);
    if (a != NULL) {
        if (a->refs > 1) {
            gs_log("cudaFree(%p) while %d collective(s) still use it", devPtr, a->refs - 1);
        }
        munmap(a->addr, a->map_len);
        a->addr = NULL;
        alloc_unref(a);
    }
    pthread_mutex_unlock(&g_mu);
    if (a == NULL) {
        return cuda_fail(cudaErrorInvalidValue, "cudaFree of a pointer cudaMalloc did not return");
    }
    return cudaSuccess;
}

GS_API cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags) {
    (void)flags;
    gs_init();
    if (pHost == NULL) {
        return cuda_fail(cudaErrorInvalidValue, "cudaHostAlloc");
    }
    if (g_ndev == 0) {
        return cuda_fail(cudaErrorNoDevice, "cudaHostAlloc");
    }
    gs_alloc_t *a = calloc(1, sizeof(*a));
    void *p = NULL;
    if (a == NULL || posix_memalign(&p, 4096, size ? size : 1) != 0) {
        free(a);
        return cuda_fail(cudaErrorMemoryAllocation, "cudaHostAlloc");
    }
    *a = (gs_alloc_t){.addr = p,
                      .len = size ? size : 1,
                      .map_len = size ? size : 1,
                      .backing = p,
                      .device = tl_device,
                      .pinned = 1,
                      .refs = 1};
    pthread_mutex_lock(&g_mu);
    a->next = g_allocs;
    g_allocs = a;
    pthread_mutex_unlock(&g_mu);
    *pHost = p;
    return cudaSuccess;
}

GS_API cudaError_t cudaMallocHost(void **ptr, size_t size) {
    return cudaHostAlloc(ptr, size, cudaHostAllocDefault);
}

GS_API cudaError_t cudaFreeHost(void *ptr) {
    gs_init();
    if (ptr == NULL) {
        return cudaSuccess;
    }
    pthread_mutex_lock(&g_mu);
    gs_alloc_t *a = alloc_remove(ptr, 1);
    alloc_unref(a);
    pthread_mutex_unlock(&g_mu);
    if (a == NULL) {
        return cuda_fail(cudaErrorInvalidValue, "cudaFreeHost of a pointer it did not allocate");
    }
    return cudaSuccess;
}

GS_API cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes,
                                            const void *ptr) {
    gs_init();
    if (attributes == NULL) {
        return cuda_fail(cudaErrorInvalidValue, "cudaPointerGetAttributes");
    }
    memset(attributes, 0, sizeof(*attributes));
    attributes->type = cudaMemoryTypeUnregistered;
    pthread_mutex_lock(&g_mu);
    gs_alloc_t *a = alloc_find(ptr);
    if (a != NULL && (a->pinned || (const char *)ptr < a->addr + a->len)) {
        attributes->device = a->device;
        if (a->pinned) {
            attributes->type = cudaMemoryTypeHost;
            attributes->hostPointer = (void *)ptr;
            attributes->devicePointer = (void *)ptr; // UVA: pinned memory has one address
        } else {
            attributes->type = cudaMemoryTypeDevice;
            attributes->devicePointer = (void *)ptr;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return cudaSuccess;
}

/* One side of a copy: the bytes behind p for n bytes. want: 1 device, 0 host, -1 either.
 * Returns 0 when p is not a valid side of that kind. g_mu held. */
static int copy_side(const void *p, size_t n, int want, char **out) {
    gs_alloc_t *a = alloc_find(p);
    if (a != NULL && !a->pinned) {
        size_t off = (size_t)((const char *)p - a->addr);
        if (want == 0 || off >= a->len || n > a->len - off) {
            return 0;
        }
        *out = a->backing + off;
        return 1;
    }
    if (want == 1) {
        return 0;
    }
    *out = (char *)p;
    return 1;
}

/* Waits until stream s has no collective pending. g_mu held. */
static void stream_wait_idle(struct CUstream_st *s) {
    while (s->pending > 0) {
        pthread_cond_wait(&g_cv, &g_mu);
    }
}

/* The stream object for a handle on device dev (NULL and the special handles: the device's
 * default stream), or NULL when s is not a live stream. g_mu held. */
static struct CUstream_st *stream_resolve(cudaStream_t s, int dev) {
    if (s == NULL || s == cudaStreamLegacy || s == cudaStreamPerThread) {
        return &g_default_streams[dev];
    }
    for (struct CUstream_st *p = g_streams; p != NULL; p = p->next) {
        if (p == s) {
            return p;
        }
    }
    return NULL;
}

/* cudaMemcpy and cudaMemcpyAsync: the copy runs after the stream's earlier work (stream order),
 * synchronously. */
static cudaError_t memcpy_on(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                             cudaStream_t stream, const char *what) {
    gs_init();
    int wd, ws;
    switch (kind) {
    case cudaMemcpyHostToHost:
        wd = 0, ws = 0;
        break;
    case cudaMemcpyHostToDevice:
        wd = 1, ws = 0;
        break;
    case cudaMemcpyDeviceToHost:
        wd = 0, ws = 1;
        break;
    case cudaMemcpyDeviceToDevice:
        wd = 1, ws = 1;
        break;
    case cudaMemcpyDefault:
        wd = -1, ws = -1;
        break;
    default:
        return cuda_fail(cudaErrorInvalidMemcpyDirection, what);
    }
    if (count == 0) {
        return cudaSuccess;
    }
    if (dst == NULL || src == NULL) {
        return cuda_fail(cudaErrorInvalidValue, what);
    }
    pthread_mutex_lock(&g_mu);
    struct CUstream_st *s = stream_resolve(stream, tl_device);
    if (s == NULL) {
        pthread_mutex_unlock(&g_mu);
        return cuda_fail(cudaErrorInvalidResourceHandle, what);
    }
    stream_wait_idle(s);
    char *d = NULL, *sp = NULL;
    int ok = copy_side(dst, count, wd, &d) && copy_side(src, count, ws, &sp);
    if (ok) {
        memmove(d, sp, count);
    }
    pthread_mutex_unlock(&g_mu);
    if (!ok) {
        return cuda_fail(cudaErrorInvalidValue, what);
    }
    return cudaSuccess;
}

GS_API cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind) {
    return memcpy_on(dst, src, count, kind, NULL, "cudaMemcpy");
}

GS_API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
                                   enum cudaMemcpyKind kind, cudaStream_t stream) {
    return memcpy_on(dst, src, count, kind, stream, "cudaMemcpyAsync");
}

static cudaError_t memset_on(void *devPtr, int value, size_t count, cudaStream_t stream,
                             const char *what) {
    gs_init();
    if (count == 0) {
        return cudaSuccess;
    }
    pthread_mutex_lock(&g_mu);
    struct CUstream_st *s = stream_resolve(stream, tl_device);
    if (s == NULL) {
        pthread_mutex_unlock(&g_mu);
        return cuda_fail(cudaErrorInvalidResourceHandle, what);
    }
    stream_wait_idle(s);
    char *d = NULL;
    int ok = copy_side(devPtr, count, 1, &d);
    if (ok) {
        memset(d, value, count);
    }
    pthread_mutex_unlock(&g_mu);
    if (!ok) {
        return cuda_fail(cudaErrorInvalidValue, what);
    }
    return cudaSuccess;
}

GS_API cudaError_t cudaMemset(void *devPtr, int value, size_t count) {
    return memset_on(devPtr, value, count, NULL, "cudaMemset");
}

GS_API cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream) {
    return memset_on(devPtr, value, count, stream, "cudaMemsetAsync");
}

/* ---- CUDA runtime: streams --------------------------------------------------------------------- */

GS_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags) {
    gs_init();
    if (pStream == NULL || (flags & ~(unsigned)cudaStreamNonBlocking) != 0) {
        return cuda_fail(cudaErrorInvalidValue, "cudaStreamCreateWithFlags");
    }
    if (g_ndev == 0) {
        return cuda_fail(cudaErrorNoDevice, "cudaStreamCreateWithFlags");
    }
    struct CUstream_st *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return cuda_fail(cudaErrorMemoryAllocation, "cudaStreamCreateWithFlags");
    }
    s->device = tl_device;
    s->flags = flags;
    pthread_mutex_lock(&g_mu);
    s->next = g_streams;
    g_streams = s;
    pthread_mutex_unlock(&g_mu);
    *pStream = s;
    return cudaSuccess;
}

GS_API cudaError_t cudaStreamCreate(cudaStream_t *pStream) {
    return cudaStreamCreateWithFlags(pStream, 0);
}

GS_API cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    gs_init();
    pthread_mutex_lock(&g_mu);
    struct CUstream_st *found = NULL;
    for (struct CUstream_st **pp = &g_streams; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == stream) {
            found = *pp;
            *pp = found->next;
            break;
        }
    }
    if (found != NULL) {
        // As in CUDA, destroying a busy stream returns at once; its work still completes.
        if (found->pending > 0) {
            found->destroyed = 1;
        } else {
            free(found);
        }
    }
    pthread_mutex_unlock(&g_mu);
    if (found == NULL) {
        return cuda_fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy");
    }
    return cudaSuccess;
}

GS_API cudaError_t cudaStreamQuery(cudaStream_t stream) {
    gs_init();
    pthread_mutex_lock(&g_mu);
    struct CUstream_st *s = stream_resolve(stream, tl_device);
    int pending = s != NULL ? s->pending : 0;
    pthread_mutex_unlock(&g_mu);
    if (s == NULL) {
        return cuda_fail(cudaErrorInvalidResourceHandle, "cudaStreamQuery");
    }
    // cudaErrorNotReady is a status, not an error: it does not become the last error.
    return pending > 0 ? cudaErrorNotReady : cudaSuccess;
}

GS_API cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    gs_init();
    pthread_mutex_lock(&g_mu);
    struct CUstream_st *s = stream_resolve(stream, tl_device);
    if (s != NULL) {
        stream_wait_idle(s);
    }
    pthread_mutex_unlock(&g_mu);
    if (s == NULL) {
        return cuda_fail(cudaErrorInvalidResourceHandle, "cudaStreamSynchronize");
    }
    return cudaSuccess;
}

GS_API cudaError_t cudaDeviceSynchronize(void) {
    gs_init();
    if (g_ndev == 0) {
        return cuda_fail(cudaErrorNoDevice, "cudaDeviceSynchronize");
    }
    pthread_mutex_lock(&g_mu);
    for (;;) {
        int busy = g_default_streams[tl_device].pending > 0;
        for (struct CUstream_st *s = g_streams; s != NULL && !busy; s = s->next) {
            busy = s->device == tl_device && s->pending > 0;
        }
        if (!busy) {
            break;
        }
        pthread_cond_wait(&g_cv, &g_mu);
    }
    pthread_mutex_unlock(&g_mu);
    return cudaSuccess;
}

/* ---- NCCL: errors, ids ------------------------------------------------------------------------- */

static ncclResult_t nccl_fail(ncclResult_t r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static ncclResult_t nccl_fail(ncclResult_t r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tl_msg, sizeof(tl_msg), fmt, ap);
    va_end(ap);
    gs_log("NCCL: %s", tl_msg);
    return r;
}

GS_API const char *ncclGetErrorString(ncclResult_t result) {
    switch (result) {
    case ncclSuccess:
        return "no error";
    case ncclUnhandledCudaError:
        return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
        return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
        return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
        return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
        return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
        return "remote process exited or there was a network error";
    case ncclInProgress:
        return "NCCL operation in progress";
    default:
        return "unknown result code";
    }
}

GS_API ncclResult_t ncclGetVersion(int *version) {
    if (version == NULL) {
        return nccl_fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
    }
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

GS_API ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId) {
    gs_init();
    if (uniqueId == NULL) {
        return nccl_fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
    }
    size_t got = 0;
    while (got < sizeof(uniqueId->internal)) {
        ssize_t n = getrandom(uniqueId->internal + got, sizeof(uniqueId->internal) - got, 0);
        if (n < 0 && errno != EINTR) {
            return nccl_fail(ncclSystemError, "getrandom: %s", strerror(errno));
        }
        got += n > 0 ? (size_t)n : 0;
    }
    return ncclSuccess;
}

/* The live communicator c, or NULL. g_mu held. */
static ncclComm_t comm_find(const ncclComm_t c) {
    for (ncclComm_t p = g_comms; p != NULL; p = p->next) {
        if (p == c) {
            return p;
        }
    }
    return NULL;
}

/* Looks c up; returns ncclInvalidArgument for a handle that is not a live communicator. */
static ncclResult_t comm_check(const ncclComm_t c, const char *what) {
    pthread_mutex_lock(&g_mu);
    ncclComm_t p = c != NULL ? comm_find(c) : NULL;
    pthread_mutex_unlock(&g_mu);
    if (p == NULL) {
        return nccl_fail(ncclInvalidArgument, "%s: %p is not a live communicator", what, (void *)c);
    }
    return ncclSuccess;
}

GS_API const char *ncclGetLastError(ncclComm_t comm) {
    pthread_mutex_lock(&g_mu);
    ncclComm_t c = comm != NULL ? comm_find(comm) : NULL;
    if (c != NULL && c->msg[0] != '\0') {
        snprintf(tl_msg, sizeof(tl_msg), "%s", c->msg);
    }
    pthread_mutex_unlock(&g_mu);
    return tl_msg;
}

/* ---- NCCL: the shared segment ------------------------------------------------------------------ */

static size_t seg_slots_off(int n) {
    size_t h = sizeof(gs_seg_t) + (size_t)n * sizeof(gs_rank_t);
    return (h + 4095) / 4096 * 4096;
}

static char *seg_slot(ncclComm_t c, int r) {
    return (char *)c->seg + c->slots_off + (size_t)r * GS_SLOT_BYTES;
}

/* Sets the communicator's async error (first error wins) with its message. */
static void comm_set_error(ncclComm_t c, ncclResult_t r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void comm_set_error(ncclComm_t c, ncclResult_t r, const char *fmt, ...) {
    pthread_mutex_lock(&g_mu);
    int s = atomic_load(&c->state);
    if (s == ncclSuccess || s == ncclInProgress) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->msg, sizeof(c->msg), fmt, ap);
        va_end(ap);
        atomic_store(&c->state, r);
        gs_log("comm %p rank %d: %s (%s)", (void *)c, c->rank, c->msg, ncclGetErrorString(r));
    }
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
}

/* True when process pid has exited (gone, or a zombie not yet reaped). */
static int pid_dead(pid_t pid) {
    if (kill(pid, 0) == -1 && errno == ESRCH) {
        return 1;
    }
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return errno == ENOENT;
    }
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) {
        return 0;
    }
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')');
    return rp != NULL && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

/* The first registered peer whose process is gone, or -1. */
static int peer_dead(ncclComm_t c) {
    pid_t me = getpid();
    for (int r = 0; r < c->nranks; r++) {
        gs_rank_t *k = &c->seg->ranks[r];
        if (r != c->rank && atomic_load(&k->state) == 2 && k->pid != me && pid_dead(k->pid)) {
            return r;
        }
    }
    return -1;
}

typedef int (*gs_ready_fn)(ncclComm_t c, uint64_t arg);

static int ready_all_arrived(ncclComm_t c, uint64_t arg) {
    (void)arg;
    return atomic_load(&c->seg->arrived) >= c->nranks;
}

static int ready_barrier(ncclComm_t c, uint64_t phase) {
    for (int r = 0; r < c->nranks; r++) {
        if (atomic_load_explicit(&c->seg->ranks[r].phase, memory_order_acquire) < phase) {
            return 0;
        }
    }
    return 1;
}

/* Polls until ready: ncclSuccess; the abort flag: ncclInternalError (the caller drops the
 * work silently); a dead peer: ncclRemoteError (set as the async error). No timeout: a stalled
 * peer keeps us here until the owner aborts. Worker thread only. */
static ncclResult_t comm_poll(ncclComm_t c, gs_ready_fn ready, uint64_t arg, const char *what) {
    unsigned spins = 0;
    uint64_t next_check = 0;
    for (;;) {
        if (atomic_load(&c->abort)) {
            return ncclInternalError;
        }
        if (ready(c, arg)) {
            return ncclSuccess;
        }
        uint64_t now = gs_now_ns();
        if (now >= next_check) {
            int r = peer_dead(c);
            if (r >= 0) {
                comm_set_error(c, ncclRemoteError, "%s: rank %d (pid %d) exited", what, r,
                               (int)c->seg->ranks[r].pid);
                return ncclRemoteError;
            }
            next_check = now + GS_LIVENESS_NS;
        }
        if (spins < 64) {
            spins++;
            sched_yield();
        } else {
            struct timespec ts = {.tv_sec = 0, .tv_nsec = GS_POLL_NS};
            nanosleep(&ts, NULL);
        }
    }
}

static ncclResult_t comm_barrier(ncclComm_t c, const char *what) {
    c->phase++;
    atomic_store_explicit(&c->seg->ranks[c->rank].phase, c->phase, memory_order_release);
    return comm_poll(c, ready_barrier, c->phase, what);
}

/* Maps (creating if needed) the segment named from id and claims rank. Caller thread. */
static ncclResult_t seg_join(ncclComm_t c, const ncclUniqueId *id) {
    int n = snprintf(c->shm_name, sizeof(c->shm_name), "/hvgpusim-");
    for (int i = 0; i < 16; i++) {
        n += snprintf(c->shm_name + n, sizeof(c->shm_name) - (size_t)n, "%02x",
                      (unsigned char)id->internal[i]);
    }
    c->slots_off = seg_slots_off(c->nranks);
    c->seg_len = c->slots_off + (size_t)c->nranks * GS_SLOT_BYTES;
    int fd = shm_open(c->shm_name, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
        return nccl_fail(ncclSystemError, "shm_open %s: %s", c->shm_name, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return nccl_fail(ncclSystemError, "fstat %s: %s", c->shm_name, strerror(errno));
    }
    if (st.st_size == 0 && ftruncate(fd, (off_t)c->seg_len) != 0) {
        close(fd);
        return nccl_fail(ncclSystemError, "ftruncate %s to %zu: %s", c->shm_name, c->seg_len,
                         strerror(errno));
    }
    if (st.st_size != 0 && (size_t)st.st_size != c->seg_len) {
        close(fd);
        return nccl_fail(ncclInvalidUsage, "ranks disagree on nranks (%d here)", c->nranks);
    }
    void *p = mmap(NULL, c->seg_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        return nccl_fail(ncclSystemError, "mmap %s: %s", c->shm_name, strerror(errno));
    }
    c->seg = p;
    int32_t zero = 0;
    if (!atomic_compare_exchange_strong(&c->seg->nranks, &zero, c->nranks) && zero != c->nranks) {
        munmap(p, c->seg_len);
        c->seg = NULL;
        return nccl_fail(ncclInvalidUsage, "ranks disagree on nranks: %d here, %d at a peer",
                         c->nranks, (int)zero);
    }
    gs_rank_t *me = &c->seg->ranks[c->rank];
    int32_t free_state = 0;
    if (!atomic_compare_exchange_strong(&me->state, &free_state, 1)) {
        munmap(p, c->seg_len);
        c->seg = NULL;
        return nccl_fail(ncclInvalidUsage, "rank %d joined twice", c->rank);
    }
    me->pid = (int32_t)getpid();
    me->device = c->device;
    const char *node = getenv("HV_NODE");
    if (node != NULL && *node != '\0') {
        snprintf(me->host, sizeof(me->host), "%s", node);
    } else if (gethostname(me->host, sizeof(me->host) - 1) != 0) {
        snprintf(me->host, sizeof(me->host), "localhost");
    }
    atomic_store_explicit(&me->state, 2, memory_order_release);
    atomic_fetch_add(&c->seg->arrived, 1);
    return ncclSuccess;
}

/* Leaves the segment; whoever leaves last among those that came removes its name. */
static void seg_leave(ncclComm_t c) {
    if (c->seg == NULL) {
        return;
    }
    c->seg->ranks[c->rank].left = 1;
    int left = atomic_fetch_add(&c->seg->left, 1) + 1;
    if (left >= atomic_load(&c->seg->arrived) && atomic_exchange(&c->seg->unlinked, 1) == 0) {
        shm_unlink(c->shm_name);
    }
    munmap(c->seg, c->seg_len);
    c->seg = NULL;
}

/* ---- NCCL: collectives (worker thread) --------------------------------------------------------- */

static const char *kind_name(int kind) {
    switch (kind) {
    case GS_ALLREDUCE:
        return "AllReduce";
    case GS_BROADCAST:
        return "Broadcast";
    case GS_ALLGATHER:
        return "AllGather";
    default:
        return "ReduceScatter";
    }
}

/* After the first barrier of a collective: every rank must be running the same one. */
static ncclResult_t op_check_peers(ncclComm_t c) {
    gs_rank_t *me = &c->seg->ranks[c->rank];
    for (int r = 0; r < c->nranks; r++) {
        gs_rank_t *k = &c->seg->ranks[r];
        if (k->kind != me->kind || k->dtype != me->dtype || k->redop != me->redop ||
            k->root != me->root || k->count != me->count || k->seq != me->seq) {
            comm_set_error(c, ncclInvalidUsage,
                           "collective #%llu differs: rank %d runs %s(count %llu, type %d, op %d, "
                           "root %d), rank %d runs %s(count %llu, type %d, op %d, root %d)",
                           (unsigned long long)me->seq, c->rank, kind_name(me->kind),
                           (unsigned long long)me->count, me->dtype, me->redop, me->root, r,
                           kind_name(k->kind), (unsigned long long)k->count, k->dtype, k->redop,
                           k->root);
            return ncclInvalidUsage;
        }
    }
    return ncclSuccess;
}

/* out = slot[0] op slot[1] op ... in rank order, so every rank gets the same bits. */
static void op_reduce_slots(ncclComm_t c, gs_op_t *op, char *out, size_t k) {
    memcpy(out, seg_slot(c, 0), k * op->esize);
    for (int r = 1; r < c->nranks; r++) {
        hv__reduce(op->op, op->dt, out, seg_slot(c, r), k);
    }
    if (op->op == HV_AVG) {
        hv__reduce_scale(op->dt, out, k, c->nranks);
    }
}

/* One chunk: stage (rank's bytes into its slot), barrier, check, finish, barrier. */
static ncclResult_t op_run(ncclComm_t c, gs_op_t *op) {
    gs_rank_t *me = &c->seg->ranks[c->rank];
    me->kind = op->kind;
    me->dtype = (int32_t)op->nccl_dtype;
    me->redop =
        op->kind == GS_ALLREDUCE || op->kind == GS_REDUCESCATTER ? (int32_t)op->nccl_op : -1;
    me->root = op->kind == GS_BROADCAST ? op->root : -1;
    me->count = op->count;
    me->seq = ++c->seq;
    const char *what = kind_name(op->kind);
    size_t es = op->esize, per = GS_SLOT_BYTES / es;
    int n = c->nranks, first = 1;
    int dests = op->kind == GS_REDUCESCATTER ? n : 1;
    ncclResult_t rc = ncclSuccess;
    for (int d = 0; d < dests; d++) {
        for (size_t off = 0; off < op->count; off += per) {
            size_t k = op->count - off < per ? op->count - off : per;
            char *mine = seg_slot(c, c->rank);
            switch (op->kind) {
            case GS_ALLREDUCE:
            case GS_ALLGATHER:
                memcpy(mine, op->send + off * es, k * es);
                break;
            case GS_BROADCAST:
                if (c->rank == op->root) {
                    memcpy(mine, op->send + off * es, k * es);
                }
                break;
            default:
                memcpy(mine, op->send + ((size_t)d * op->count + off) * es, k * es);
                break;
            }
            if ((rc = comm_barrier(c, what)) != ncclSuccess) {
                return rc;
            }
            if (first && (rc = op_check_peers(c)) != ncclSuccess) {
                return rc;
            }
            first = 0;
            switch (op->kind) {
            case GS_ALLREDUCE:
                op_reduce_slots(c, op, op->recv + off * es, k);
                break;
            case GS_BROADCAST:
                memcpy(op->recv + off * es, seg_slot(c, op->root), k * es);
                break;
            case GS_ALLGATHER:
                for (int r = 0; r < n; r++) {
                    memcpy(op->recv + ((size_t)r * op->count + off) * es, seg_slot(c, r), k * es);
                }
                break;
            default:
                if (c->rank == d) {
                    op_reduce_slots(c, op, op->recv + off * es, k);
                }
                break;
            }
            if ((rc = comm_barrier(c, what)) != ncclSuccess) {
                return rc;
            }
        }
    }
    return ncclSuccess;
}

/* Releases what op holds: its stream count, its allocation references. g_mu held. */
static void op_finish(gs_op_t *op) {
    struct CUstream_st *s = op->stream;
    if (--s->pending == 0 && s->destroyed) {
        free(s);
    }
    alloc_unref(op->send_a);
    alloc_unref(op->recv_a);
    free(op);
    pthread_cond_broadcast(&g_cv);
}

/* Drops a list of ops that never ran. g_mu held. */
static void op_drop_list(gs_op_t *op) {
    while (op != NULL) {
        gs_op_t *next = op->next;
        op_finish(op);
        op = next;
    }
}

/* The communicator's worker: completes init (every rank arrived, no duplicate GPU), then runs
 * the queued collectives in order until destroy (queue drained) or abort. */
static void *comm_worker(void *arg) {
    ncclComm_t c = arg;
    ncclResult_t rc = comm_poll(c, ready_all_arrived, 0, "init");
    if (rc == ncclSuccess) {
        gs_rank_t *me = &c->seg->ranks[c->rank];
        for (int r = 0; r < c->nranks; r++) {
            gs_rank_t *k = &c->seg->ranks[r];
            if (r != c->rank && k->device == me->device && strcmp(k->host, me->host) == 0) {
                comm_set_error(c, ncclInvalidUsage,
                               "Duplicate GPU detected: rank %d and rank %d both on CUDA device "
                               "%d of host %s",
                               c->rank, r, me->device, me->host);
                rc = ncclInvalidUsage;
                break;
            }
        }
    }
    if (rc == ncclSuccess) {
        if (atomic_exchange(&c->seg->unlinked, 1) == 0) {
            shm_unlink(c->shm_name); // everyone has it mapped: the name is no longer needed
        }
        pthread_mutex_lock(&g_mu);
        atomic_store(&c->state, ncclSuccess);
        pthread_cond_broadcast(&g_cv);
        pthread_mutex_unlock(&g_mu);
    }
    pthread_mutex_lock(&g_mu);
    for (;;) {
        while (c->head == NULL && !c->stop && !atomic_load(&c->abort)) {
            pthread_cond_wait(&c->cv, &g_mu);
        }
        if (atomic_load(&c->abort) || c->head == NULL) {
            break;
        }
        gs_op_t *op = c->head;
        c->head = op->next;
        if (c->head == NULL) {
            c->tail = NULL;
        }
        pthread_mutex_unlock(&g_mu);
        if (atomic_load(&c->state) == ncclSuccess) {
            op_run(c, op); // errors became the async error; an abort drops the op
        }
        pthread_mutex_lock(&g_mu);
        op_finish(op);
    }
    pthread_mutex_unlock(&g_mu);
    return NULL;
}

/* Stops the worker (abort: now; else after the queue), leaves, unregisters and frees c. */
static void comm_free(ncclComm_t c, int abort) {
    pthread_mutex_lock(&g_mu);
    for (ncclComm_t *pp = &g_comms; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    c->stop = 1;
    if (abort) {
        atomic_store(&c->abort, 1);
    }
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&g_mu);
    pthread_join(c->worker, NULL);
    pthread_mutex_lock(&g_mu);
    op_drop_list(c->head);
    c->head = c->tail = NULL;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
    seg_leave(c);
    pthread_cond_destroy(&c->cv);
    free(c);
}

/* ---- NCCL: communicators ----------------------------------------------------------------------- */

GS_API ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId,
                                           int rank, ncclConfig_t *config) {
    gs_init();
    if (comm == NULL) {
        return nccl_fail(ncclInvalidArgument, "ncclCommInitRankConfig: comm is NULL");
    }
    *comm = NULL;
    if (nranks < 1 || nranks > GS_MAX_RANKS || rank < 0 || rank >= nranks) {
        return nccl_fail(ncclInvalidArgument, "ncclCommInitRankConfig: rank %d of nranks %d", rank,
                         nranks);
    }
    int blocking = 1;
    if (config != NULL) {
        if (config->magic != GS_CONFIG_MAGIC || config->size < sizeof(size_t) + 12) {
            return nccl_fail(ncclInvalidArgument,
                             "config is not initialized with NCCL_CONFIG_INITIALIZER");
        }
        if (config->blocking != NCCL_CONFIG_UNDEF_INT && config->blocking != 0 &&
            config->blocking != 1) {
            return nccl_fail(ncclInvalidArgument, "config->blocking is %d, not 0 or 1",
                             config->blocking);
        }
        blocking = config->blocking != 0;
    }
    if (g_ndev == 0) {
        return nccl_fail(ncclUnhandledCudaError, "no CUDA device");
    }
    ncclComm_t c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return nccl_fail(ncclSystemError, "out of memory");
    }
    c->rank = rank;
    c->nranks = nranks;
    c->device = tl_device;
    c->blocking = blocking;
    atomic_init(&c->state, ncclInProgress);
    atomic_init(&c->abort, 0);
    pthread_cond_init(&c->cv, NULL);
    ncclResult_t rc = seg_join(c, &commId);
    if (rc != ncclSuccess) {
        pthread_cond_destroy(&c->cv);
        free(c);
        return rc;
    }
    if (pthread_create(&c->worker, NULL, comm_worker, c) != 0) {
        seg_leave(c);
        pthread_cond_destroy(&c->cv);
        free(c);
        return nccl_fail(ncclSystemError, "pthread_create failed");
    }
    pthread_mutex_lock(&g_mu);
    c->next = g_comms;
    g_comms = c;
    pthread_mutex_unlock(&g_mu);
    gs_log("comm %p: rank %d of %d on device %d (%s), segment %s", (void *)c, rank, nranks,
           c->device, blocking ? "blocking" : "non-blocking", c->shm_name);
    if (!blocking) {
        *comm = c;
        return ncclInProgress;
    }
    pthread_mutex_lock(&g_mu);
    while (atomic_load(&c->state) == ncclInProgress) {
        pthread_cond_wait(&g_cv, &g_mu);
    }
    rc = (ncclResult_t)atomic_load(&c->state);
    if (rc != ncclSuccess) {
        snprintf(tl_msg, sizeof(tl_msg), "%s", c->msg);
    }
    pthread_mutex_unlock(&g_mu);
    if (rc != ncclSuccess) {
        comm_free(c, 1);
        return rc;
    }
    *comm = c;
    return ncclSuccess;
}

GS_API ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank) {
    return ncclCommInitRankConfig(comm, nranks, commId, rank, NULL);
}

GS_API ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
    ncclResult_t rc = comm_check(comm, "ncclCommGetAsyncError");
    if (rc != ncclSuccess) {
        return rc;
    }
    if (asyncError == NULL) {
        return nccl_fail(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
    }
    *asyncError = (ncclResult_t)atomic_load(&comm->state);
    return ncclSuccess;
}

/* The integer getters (ncclCommCount, ncclCommCuDevice, ncclCommUserRank): checks the
 * communicator and the out pointer, then *out = the field `which` names. */
typedef enum gs_comm_field { GS_FIELD_NRANKS, GS_FIELD_DEVICE, GS_FIELD_RANK } gs_comm_field;

static ncclResult_t comm_get_int(const ncclComm_t comm, gs_comm_field which, int *out,
                                 const char *what) {
    ncclResult_t rc = comm_check(comm, what);
    if (rc == ncclSuccess && out == NULL) {
        rc = nccl_fail(ncclInvalidArgument, "%s: the out pointer is NULL", what);
    }
    if (rc == ncclSuccess) {
        *out = which == GS_FIELD_NRANKS   ? comm->nranks
               : which == GS_FIELD_DEVICE ? comm->device
                                          : comm->rank;
    }
    return rc;
}

GS_API ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
    return comm_get_int(comm, GS_FIELD_NRANKS, count, "ncclCommCount");
}

GS_API ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device) {
    return comm_get_int(comm, GS_FIELD_DEVICE, device, "ncclCommCuDevice");
}

GS_API ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
    return comm_get_int(comm, GS_FIELD_RANK, rank, "ncclCommUserRank");
}

GS_API ncclResult_t ncclCommFinalize(ncclComm_t comm) {
    return comm_check(comm, "ncclCommFinalize");
}

GS_API ncclResult_t ncclCommAbort(ncclComm_t comm) {
    if (comm == NULL) {
        return ncclSuccess; // NCCL accepts NULL here
    }
    ncclResult_t rc = comm_check(comm, "ncclCommAbort");
    if (rc != ncclSuccess) {
        return rc;
    }
    comm_free(comm, 1);
    return ncclSuccess;
}

GS_API ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (comm == NULL) {
        return ncclSuccess;
    }
    ncclResult_t rc = comm_check(comm, "ncclCommDestroy");
    if (rc != ncclSuccess) {
        return rc;
    }
    comm_free(comm, 0);
    return ncclSuccess;
}

/* ---- NCCL: groups and collective launch -------------------------------------------------------- */

static void op_enqueue(gs_op_t *op) {
    ncclComm_t c = op->comm;
    op->next = NULL;
    if (c->tail != NULL) {
        c->tail->next = op;
    } else {
        c->head = op;
    }
    c->tail = op;
    pthread_cond_signal(&c->cv);
}

GS_API ncclResult_t ncclGroupStart(void) {
    tl_group_depth++;
    return ncclSuccess;
}

GS_API ncclResult_t ncclGroupEnd(void) {
    if (tl_group_depth == 0) {
        return nccl_fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
    }
    if (--tl_group_depth > 0) {
        return ncclSuccess;
    }
    gs_op_t *ops = tl_group_head;
    ncclResult_t rc = tl_group_err;
    tl_group_head = tl_group_tail = NULL;
    tl_group_err = ncclSuccess;
    pthread_mutex_lock(&g_mu);
    if (rc != ncclSuccess) {
        op_drop_list(ops); // an op of the group failed its checks: none is launched
    } else {
        while (ops != NULL) {
            gs_op_t *next = ops->next;
            if (comm_find(ops->comm) != NULL) {
                op_enqueue(ops);
            } else {
                op_finish(ops);
                rc = nccl_fail(ncclInvalidArgument, "communicator destroyed inside a group");
            }
            ops = next;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

static int dtype_map(ncclDataType_t t, hv_dtype *dt, size_t *es) {
    switch (t) {
    case ncclFloat32:
        *dt = HV_FLOAT32, *es = 4;
        return 1;
    case ncclFloat64:
        *dt = HV_FLOAT64, *es = 8;
        return 1;
    case ncclFloat16:
        *dt = HV_FLOAT16, *es = 2;
        return 1;
    case ncclBfloat16:
        *dt = HV_BFLOAT16, *es = 2;
        return 1;
    case ncclInt32:
        *dt = HV_INT32, *es = 4;
        return 1;
    case ncclInt64:
        *dt = HV_INT64, *es = 8;
        return 1;
    case ncclUint8:
        *dt = HV_UINT8, *es = 1;
        return 1;
    default:
        return 0;
    }
}

static int op_map(ncclRedOp_t o, hv_op *op) {
    switch (o) {
    case ncclSum:
        *op = HV_SUM;
        return 1;
    case ncclProd:
        *op = HV_PRODUCT;
        return 1;
    case ncclMax:
        *op = HV_MAX;
        return 1;
    case ncclMin:
        *op = HV_MIN;
        return 1;
    case ncclAvg:
        *op = HV_AVG;
        return 1;
    default:
        return 0;
    }
}

/* Validates and launches (or, inside a group, records) one collective. send_n / recv_n are the
 * buffer sizes in elements; send is not used when use_send is 0. */
static ncclResult_t coll_submit(int kind, const void *send, void *recv, size_t count,
                                ncclDataType_t datatype, ncclRedOp_t redop, int root,
                                ncclComm_t comm, cudaStream_t stream) {
    const char *what = kind_name(kind);
    ncclResult_t rc = ncclSuccess;
    gs_op_t *op = calloc(1, sizeof(*op));
    if (op == NULL) {
        rc = nccl_fail(ncclSystemError, "%s: out of memory", what);
        goto out;
    }
    op->kind = kind;
    op->count = count;
    op->root = root;
    op->nccl_dtype = datatype;
    op->nccl_op = redop;
    int reduces = kind == GS_ALLREDUCE || kind == GS_REDUCESCATTER;
    pthread_mutex_lock(&g_mu);
    if (comm == NULL || comm_find(comm) == NULL) {
        rc =
            nccl_fail(ncclInvalidArgument, "%s: %p is not a live communicator", what, (void *)comm);
        goto unlock;
    }
    op->comm = comm;
    int state = atomic_load(&comm->state);
    if (state == ncclInProgress) {
        rc = nccl_fail(ncclInvalidArgument,
                       "%s: attempt to use communicator before the previous operation returned "
                       "ncclSuccess",
                       what);
        goto unlock;
    }
    if (state != ncclSuccess) {
        rc = nccl_fail((ncclResult_t)state, "%s: communicator has failed: %s", what, comm->msg);
        goto unlock;
    }
    if (!dtype_map(datatype, &op->dt, &op->esize)) {
        rc =
            nccl_fail(ncclInvalidArgument, "%s: datatype %d is not supported", what, (int)datatype);
        goto unlock;
    }
    if (reduces ? !op_map(redop, &op->op) : 0) {
        rc = nccl_fail(ncclInvalidArgument, "%s: reduction op %d is not supported", what,
                       (int)redop);
        goto unlock;
    }
    if (kind == GS_BROADCAST && (root < 0 || root >= comm->nranks)) {
        rc = nccl_fail(ncclInvalidArgument, "%s: root %d is not a rank of %d", what, root,
                       comm->nranks);
        goto unlock;
    }
    size_t n = (size_t)comm->nranks;
    if (count > SIZE_MAX / op->esize / n) {
        rc = nccl_fail(ncclInvalidArgument, "%s: count %zu is too large", what, count);
        goto unlock;
    }
    op->stream = stream_resolve(stream, comm->device);
    if (op->stream == NULL || op->stream->device != comm->device) {
        rc = nccl_fail(ncclInvalidArgument, "%s: stream %p is not a live stream of device %d", what,
                       (void *)stream, comm->device);
        op->stream = NULL;
        goto unlock;
    }
    if (count == 0) {
        goto unlock; // nothing to do; NCCL accepts it
    }
    size_t bytes = count * op->esize;
    size_t send_bytes = kind == GS_REDUCESCATTER ? bytes * n : bytes;
    size_t recv_bytes = kind == GS_ALLGATHER ? bytes * n : bytes;
    int use_send = kind != GS_BROADCAST || comm->rank == root;
    if (use_send) {
        op->send_a = alloc_device_range(send, send_bytes, comm->device);
        if (op->send_a == NULL) {
            rc = nccl_fail(ncclInvalidArgument,
                           "%s: sendbuff %p (%zu bytes) is not device memory of device %d", what,
                           send, send_bytes, comm->device);
            goto unlock;
        }
        op->send = op->send_a->backing + ((const char *)send - op->send_a->addr);
    }
    op->recv_a = alloc_device_range(recv, recv_bytes, comm->device);
    if (op->recv_a == NULL) {
        op->send_a = NULL;
        rc = nccl_fail(ncclInvalidArgument,
                       "%s: recvbuff %p (%zu bytes) is not device memory of device %d", what, recv,
                       recv_bytes, comm->device);
        goto unlock;
    }
    op->recv = op->recv_a->backing + ((char *)recv - op->recv_a->addr);
    if (op->send_a != NULL) {
        op->send_a->refs++;
    }
    op->recv_a->refs++;
    op->stream->pending++;
    gs_log("%s(count %zu, type %d, op %d, root %d) on comm %p rank %d%s", what, count,
           (int)datatype, (int)redop, root, (void *)comm, comm->rank,
           tl_group_depth > 0 ? " (grouped)" : "");
    if (tl_group_depth > 0) {
        op->next = NULL;
        if (tl_group_tail != NULL) {
            tl_group_tail->next = op;
        } else {
            tl_group_head = op;
        }
        tl_group_tail = op;
    } else {
        op_enqueue(op);
    }
    op = NULL;
unlock:
    pthread_mutex_unlock(&g_mu);
out:
    free(op);
    if (rc != ncclSuccess && tl_group_depth > 0 && tl_group_err == ncclSuccess) {
        tl_group_err = rc;
    }
    return rc;
}

GS_API ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                                  ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                  cudaStream_t stream) {
    return coll_submit(GS_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, -1, comm, stream);
}

GS_API ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                                  ncclDataType_t datatype, int root, ncclComm_t comm,
                                  cudaStream_t stream) {
    return coll_submit(GS_BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root, comm,
                       stream);
}

GS_API ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                              ncclComm_t comm, cudaStream_t stream) {
    return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

GS_API ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                                  ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
    return coll_submit(GS_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, -1, comm,
                       stream);
}

GS_API ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                      ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                      cudaStream_t stream) {
    return coll_submit(GS_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, op, -1, comm,
                       stream);
}
