/*
 * hv.h: the public API of libhv, the worker library linked into a training program (train.bin).
 * It joins the job's rendezvous, opens the data plane to its ring neighbours and runs collective
 * operations (allreduce, broadcast, allgather, barrier) among the job's workers. It is not the
 * cluster service: hvhead/hvagent start the processes and tell libhv where the head is through
 * HV_* environment variables. This header is the authoritative description of the API.
 *
 * Errors: every function that can fail returns an hv_err (HV_OK == 0). libhv never aborts or
 * exits the calling process. hv_err is the same enum as hv's internal common/err.h (the values
 * cross the ABI and only ever get appended); this header carries a copy so that users need only
 * <hv/hv.h>. hv_strerror()/hv_errname() describe a code.
 *
 * Link with -lhv (shared, libhv.so) or libhv.a (static; then also link -lpthread).
 */
#ifndef HV_HV_H
#define HV_HV_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(HV_BUILDING_LIB)
#define HV_API __attribute__((visibility("default")))
#else
#define HV_API
#endif

/* ---- version --------------------------------------------------------------------------------- */
#define HV_VERSION_MAJOR 0
#define HV_VERSION_MINOR 1
#define HV_VERSION_PATCH 0
#define HV_VERSION_NUM (HV_VERSION_MAJOR * 10000 + HV_VERSION_MINOR * 100 + HV_VERSION_PATCH)

/* The library's version string ("0.1.0"), static. Compare with the macros to detect a header /
 * library mismatch. Never fails; thread-safe. */
HV_API const char *hv_version(void);

/* ---- errors ---------------------------------------------------------------------------------- */
/* Internal code includes common/err.h first; users get this copy. Keep both identical (values are
 * checked by worker_lib/abi_test.c). */
#ifndef HV_COMMON_ERR_H
typedef enum hv_err {
    HV_OK = 0,
    HV_EINVAL = 1,     /* bad argument */
    HV_ENOMEM = 2,     /* allocation failed */
    HV_ETIMEDOUT = 3,  /* a bounded wait ran out (e.g. a stalled peer: HV_PEER_TIMEOUT_MS) */
    HV_ECLOSED = 4,    /* the object or connection is closed */
    HV_ECANCELED = 5,  /* cancelled (hv_abort, hv_shutdown with operations pending) */
    HV_EPROTO = 6,     /* a peer sent something that breaks the protocol (or ranks disagree) */
    HV_ESTATE = 7,     /* not valid now (e.g. hv_init not called, or called twice) */
    HV_EPEER = 8,      /* a peer failed (connection reset, peer gone): re-initialise */
    HV_EIO = 9,        /* I/O or socket error */
    HV_EINTERNAL = 10, /* a bug in hv */
    HV_ENOTFOUND = 11, /* no such key or handle */
    HV_EEXIST = 12,    /* already exists (e.g. a tensor name already pending) */
    HV_EPERM = 13,     /* refused */
    HV_EUNAVAIL = 14,  /* the head / rendezvous service is unreachable */
    HV_ETOOBIG = 15,   /* over a size limit */
    HV_ENOTSUP = 16,   /* not supported in this build or configuration */
    HV_ECORRUPT = 17,  /* damaged data */
    HV_ERESET = 18,    /* membership changed: re-join (elastic) */
    HV_EAUTH = 19,     /* not authenticated (no or unknown credential, e.g. HV_WORKER_SECRET) */
    HV_EINDOUBT = 20,  /* an actor call was sent, then the actor failed before answering: it may
                          or may not have run (hv/actor.h) */
    HV_EREMOTE = 21,   /* the actor's method ran and returned an error (hv/actor.h) */
    HV__ERR_COUNT
} hv_err;

/* A short static description of rc ("peer failed"). Never NULL; thread-safe. */
HV_API const char *hv_strerror(hv_err rc);
/* A stable name ("HV_EPEER"). Never NULL; thread-safe. */
HV_API const char *hv_errname(hv_err rc);
#endif

/* ---- lifetime -------------------------------------------------------------------------------- */

/* Joins the job and sets up the data plane. Configuration comes from the environment:
 *   HV_HEAD, HV_JOB_ID, HV_WORKER_ID  set by hvagent: join the head's rendezvous (rank, size and
 *                                     peers come from the head; blocks until the round closes).
 *   HV_WORKER_SECRET                  set by hvagent: the credential sent to the rendezvous.
 *   HV_RANK, HV_SIZE, HV_LOCAL_RANK, HV_LOCAL_SIZE  without a head: taken as given.
 *   nothing                           a single-process world: rank 0 of 1.
 * Blocking (up to the rendezvous deadline). Not thread-safe with respect to hv_shutdown or a
 * concurrent hv_init. Errors: HV_ESTATE (already initialised), HV_EINVAL (malformed HV_* value;
 * the log names the variable), HV_EUNAVAIL/HV_ETIMEDOUT (rendezvous), HV_EPEER (peers
 * unreachable), HV_ENOMEM. hv_init may be called again after hv_shutdown. SIGPIPE is ignored
 * from then on unless the program installed its own handler: a worker whose agent died (its
 * stdout's reader gone) sees EPIPE from its writes instead of dying at its next printf. */
HV_API hv_err hv_init(void);

/* Leaves the job: completes nothing further, fails operations still pending with HV_ECANCELED,
 * closes the data plane, and (after a successful run under a head) reports Done to the head.
 * Safe to call when not initialised (returns HV_OK). Blocking (bounded). Not thread-safe with
 * respect to hv_init. */
HV_API hv_err hv_shutdown(void);

/* Makes the end of the process end this worker's part of the job as its exit status says, as
 * Horovod does at interpreter exit: when the process exits (exit() or a return from main) while
 * libhv is initialised, status 0 shuts libhv down as hv_shutdown does (reporting Done: the rank
 * finished), any other status leaves without reporting Done (the job sees that status). _exit()
 * and signals skip it, as they skip every exit handler. Registered once per process (a forked
 * child that calls it registers its own; one that does not is left alone); the Python package
 * calls it when it is imported. Errors: HV_ENOMEM, HV_ENOTSUP (a C library without on_exit). */
HV_API hv_err hv_shutdown_at_exit(void);

/* This worker's rank in [0, size), the world size, the rank among workers on this host and the
 * number of workers on this host. -1 when not initialised. Thread-safe, never block. */
HV_API int hv_rank(void);
HV_API int hv_size(void);
HV_API int hv_local_rank(void);
HV_API int hv_local_size(void);
/* The index of this worker's host among the job's hosts (hosts ordered by their lowest rank) and
 * the number of hosts: Horovod's cross_rank and cross_size. -1 when not initialised.
 * Thread-safe, never block. */
HV_API int hv_cross_rank(void);
HV_API int hv_cross_size(void);

/* The name of the host (node) this worker runs on, as the cluster knows it (HV_NODE when
 * set, else the system host name). Static storage valid until hv_shutdown; "" when not
 * initialised. Thread-safe. */
HV_API const char *hv_host_name(void);

/* Starts hv with explicit settings. cfg is borrowed (read during the call). cfg->size must be set
 * (HV_CONFIG_INIT does it); a zero field means "the HV_* environment variable, else the default".
 * Otherwise as hv_init (which is hv_init_config(NULL)). */
typedef struct hv_config_s {
    size_t size;               /* sizeof(hv_config_t): lets the library accept older structs */
    uint32_t peer_timeout_ms;  /* a peer silent this long inside a collective fails it with
                                  HV_ETIMEDOUT; env HV_PEER_TIMEOUT_MS, default 5000 */
    uint64_t fusion_threshold; /* max bytes fused into one collective; env HV_FUSION_THRESHOLD
                                  (bytes or "64MiB"), default 128 MiB */
    uint32_t cycle_time_us;    /* how long the background engine gathers submissions before it
                                  negotiates; env HV_CYCLE_TIME_MS (float ms), default 1 ms */
    uint32_t rdzv_timeout_ms;  /* bound on joining the rendezvous; env HV_RDZV_TIMEOUT_MS,
                                  default 90000 */
    uint32_t spin_us;          /* busy-poll (yielding the CPU) this long before blocking; env
                                  HV_SPIN_US, default 50 (100 when local ranks outnumber cores) */
    const char *data_addr;     /* data-plane listen address "ip:port"; env HV_DATA_ADDR, default
                                  0.0.0.0:0 (borrowed, copied) */
} hv_config_t;

#define HV_CONFIG_INIT                                                                             \
    { sizeof(hv_config_t), 0, 0, 0, 0, 0, NULL }

HV_API hv_err hv_init_config(const hv_config_t *cfg);

/* Aborts the data plane at once: every operation pending or in progress on any thread fails
 * with HV_ECANCELED, peers see the connections close (their operations fail with HV_EPEER), and
 * later operations fail until hv_shutdown + hv_init. Safe from any thread, never blocks (it is
 * the path to take when the process learns that the membership changed or a peer is lost).
 * Returns HV_ESTATE when not initialised. */
HV_API hv_err hv_abort(void);

/* A human-readable account of the last failure of the data plane ("rank 1 at 10.0.0.2:41234:
 * connection reset during allreduce of 'grad.fc'"), or "" if none. Thread-safe; the string is
 * copied into buf (len bytes, always NUL-terminated). Returns buf. */
HV_API const char *hv_last_error(char *buf, size_t len);

/* Log sink for libhv's own records (default: stderr, WARN and above; HV_LOG_LEVEL changes the
 * level). fn receives the level (3 error .. 7 debug), a subsystem, a stable message id and the
 * text; all borrowed for the duration of the call. fn may be called from libhv's threads at any
 * time, so it must be thread-safe. NULL restores stderr. */
typedef void (*hv_log_fn)(int level, const char *subsys, const char *msgid, const char *text,
                          void *ud);
HV_API void hv_set_logger(hv_log_fn fn, void *ud);

/* ---- data types and reduction operations ----------------------------------------------------- */

typedef enum hv_dtype {
    HV_FLOAT32 = 0,
    HV_FLOAT64 = 1,
    HV_FLOAT16 = 2,  /* IEEE binary16, stored as uint16_t; reduced in float, rounded to nearest
                        even at every step */
    HV_BFLOAT16 = 3, /* bfloat16 (upper half of a float32), stored as uint16_t; same rounding */
    HV_INT32 = 4,
    HV_INT64 = 5,
    HV_UINT8 = 6,
    HV__DTYPE_COUNT
} hv_dtype;

typedef enum hv_op {
    HV_SUM = 0,
    HV_AVG = 1, /* sum, then divided by the world size once (integers: truncated) */
    HV_MIN = 2,
    HV_MAX = 3,
    HV_PRODUCT = 4,
    HV__OP_COUNT
} hv_op;

/* Bytes per element of dt; 0 for an unknown type. */
HV_API size_t hv_dtype_size(hv_dtype dt);

/* ---- collectives -----------------------------------------------------------------------------
 * All collectives are run by libhv's engine: operations are matched across ranks by name (the
 * unnamed blocking calls get names from a per-process sequence number, so every rank must issue
 * its unnamed blocking calls in the same order, as with MPI). Named asynchronous operations may
 * be submitted in different orders on different ranks; each executes once every rank submitted
 * it, fused with others that are ready (HV_FUSION_THRESHOLD). Every rank gets bit-identical
 * results. Thread-safety: all calls below may be made from any thread concurrently.
 * Buffers are borrowed: they must stay valid and untouched until the operation completes
 * (blocking calls: until they return; async: until hv_wait/hv_test reports completion).
 * Device (CUDA) pointers are accepted when libhv was built with CUDA and NCCL (see README.md;
 * the *_on calls below declare the memory and the stream, and are refused by a build without
 * CUDA instead of reading a device pointer as host memory):
 * when every rank has its own GPU, allreduce, broadcast and allgather of device tensors run on
 * NCCL (hv_init makes GPU local_rank % visible devices the calling thread's current device;
 * device tensors must live on it, else HV_EINVAL); otherwise device tensors are staged through
 * pinned host memory over the TCP/shared-memory ring. Every rank must pass the same kind of
 * memory (device or host) for one operation, else HV_EPROTO.
 * Failure of a peer makes the pending operations fail with HV_EPEER at once (connection reset) or
 * HV_ETIMEDOUT (a peer silent for HV_PEER_TIMEOUT_MS); after that every call fails until
 * hv_shutdown() and hv_init() rebuild the data plane. Operations fail with HV_ESTATE before
 * hv_init, HV_EINVAL for a bad argument (NULL buffer with count > 0, unknown dtype/op, root out
 * of range), HV_EPROTO when ranks disagree about an operation (same name, different count, type,
 * op, root, or device vs host memory). */

/* A handle to an asynchronous operation. 0 is never a valid handle. A handle is released by the
 * hv_wait() or successful hv_test() that reports its completion; using it afterwards returns
 * HV_ENOTFOUND (never undefined behaviour). */
typedef uint64_t hv_handle_t;

/* Allreduce of count elements: out = op over all ranks of in. in == out is in place. Blocking. */
HV_API hv_err hv_allreduce(const void *in, void *out, size_t count, hv_dtype dt, hv_op op);

/* Submits a named allreduce and returns at once with *handle set. name is copied (at most 255
 * bytes); it identifies the tensor across ranks and must not be pending already on this rank
 * (HV_EEXIST). */
HV_API hv_err hv_allreduce_async(const char *name, const void *in, void *out, size_t count,
                                 hv_dtype dt, hv_op op, hv_handle_t *handle);

/* One tensor of a grouped submission. All pointers borrowed. */
typedef struct hv_tensor_s {
    const char *name; /* unique among pending operations of this rank */
    const void *in;   /* input; == out for in place */
    void *out;        /* result */
    size_t count;     /* elements */
    hv_dtype dtype;
} hv_tensor_t;

/* Submits n tensors as one group: they are negotiated together, fused together as far as the
 * fusion threshold allows, and the one handle completes when all are done. tensors[] is borrowed
 * for the call only (the names are copied). */
HV_API hv_err hv_allreduce_group_async(const hv_tensor_t *tensors, size_t n, hv_op op,
                                       hv_handle_t *handle);

/* Named blocking calls: the same as hv_allreduce / hv_broadcast, matched across ranks by name
 * (copied, at most 255 bytes, not pending already on this rank: HV_EEXIST) like the async calls,
 * so that ranks may issue them in different orders around their asynchronous operations. They
 * do not wait for the fusion cycle (HV_CYCLE_TIME_MS): a round starts at once and completes as
 * soon as every rank has submitted the name, with whatever else is ready then. */
HV_API hv_err hv_allreduce_named(const char *name, const void *in, void *out, size_t count,
                                 hv_dtype dt, hv_op op);
HV_API hv_err hv_broadcast_named(const char *name, void *buf, size_t count, hv_dtype dt, int root);

/* Broadcast of count elements from rank root to every rank, in place. Blocking. */
HV_API hv_err hv_broadcast(void *buf, size_t count, hv_dtype dt, int root);
HV_API hv_err hv_broadcast_async(const char *name, void *buf, size_t count, hv_dtype dt, int root,
                                 hv_handle_t *handle);

/* Allgather with per-rank counts: each rank contributes count elements (counts may differ); out
 * receives every rank's elements in rank order. out_cap is out's capacity in elements. counts
 * (optional, hv_size() entries) receives every rank's count. If any rank's out_cap is below the
 * total, every rank gets HV_ETOOBIG (counts is still filled, so callers can retry with a larger
 * buffer). Blocking. */
HV_API hv_err hv_allgather(const void *in, size_t count, hv_dtype dt, void *out, size_t out_cap,
                           size_t *counts);

/* Returns when every rank has entered the barrier. Blocking. */
HV_API hv_err hv_barrier(void);

/* hv_allgather submitted under name (copied; unique among this rank's pending operations):
 * returns at once with *handle. in, out and counts are borrowed until the operation completes;
 * the operation's status (hv_wait, hv_test) is HV_ETOOBIG when some rank's out_cap is below the
 * total (counts is filled then too). */
HV_API hv_err hv_allgather_async(const char *name, const void *in, size_t count, hv_dtype dt,
                                 void *out, size_t out_cap, size_t *counts, hv_handle_t *handle);

/* Horovod's join: this rank has no more data. Blocks until every rank called hv_join; meanwhile
 * the allreduces the other ranks run go on with this rank contributing zeros (HV_AVG still
 * divides by the world size), and this rank's own pending operations go on as before. A
 * broadcast, allgather or barrier that the other ranks run while a rank is joined fails on them
 * with HV_ENOTSUP (hv_last_error names it), as do allreduces of device memory. *last_rank (may
 * be NULL) gets the rank that joined last (of several joining at once, the highest). Afterwards
 * the ranks agree again on the sequence that names unnamed blocking calls. One hv_join at a
 * time per rank (HV_EEXIST). */
HV_API hv_err hv_join(int *last_rank);

/* Blocks until the operation completes and returns its status; releases the handle. A wait
 * ends the fusion cycle: what this rank has queued goes to the next round at once. */
HV_API hv_err hv_wait(hv_handle_t handle);

/* Never blocks. *done = 0: still running (returns HV_OK, handle kept). *done = 1: completed; the
 * return value is the operation's status and the handle is released. */
HV_API hv_err hv_test(hv_handle_t handle, int *done);

/* ---- collectives on declared memory: host or CUDA device, with the caller's stream -------------
 * The same operations as hv_allreduce, hv_allreduce_async, hv_broadcast and hv_broadcast_async,
 * for callers that know where their buffers live (a framework's tensors) and must not depend on
 * libhv guessing it. device -1 declares host memory (stream must be NULL); device >= 0 declares
 * memory of that CUDA device ordinal, and stream is the cudaStream_t (as void *; NULL is the
 * legacy default stream) on which the caller enqueued the work that writes the buffers and will
 * enqueue the work that reads the result (PyTorch: torch.cuda.current_stream().cuda_stream).
 * Ordering: before the buffers are read libhv waits for the work already on stream
 * (cudaStreamSynchronize); the collective then runs on libhv's own NCCL stream when every rank
 * has its own GPU, else staged through pinned host memory, and the result is in place when the
 * blocking call returns, or when hv_wait / hv_test report the asynchronous one complete, so work
 * enqueued on stream after that sees it. libhv does not enqueue the collective on the caller's
 * stream: the calling thread (or hv_wait) waits instead of the stream.
 * Errors, besides those of the plain calls: HV_ENOTSUP for device >= 0 when libhv was built
 * without CUDA and NCCL (hv_cuda_built() == 0) or the process sees no CUDA device (the log says
 * which); HV_EINVAL when a buffer is not the declared kind of memory (a host pointer declared as
 * device memory, one on another device, a device pointer declared as host memory), for
 * device < -1, or a stream with device -1; HV_EIO when CUDA fails to synchronise the stream. */

/* 1 when this libhv was built with CUDA and NCCL (device memory is understood), else 0. It does
 * not say whether a GPU is visible. Never fails; thread-safe. */
HV_API int hv_cuda_built(void);

HV_API hv_err hv_allreduce_on(const void *in, void *out, size_t count, hv_dtype dt, hv_op op,
                              int device, void *stream);
HV_API hv_err hv_allreduce_async_on(const char *name, const void *in, void *out, size_t count,
                                    hv_dtype dt, hv_op op, int device, void *stream,
                                    hv_handle_t *handle);
HV_API hv_err hv_broadcast_on(void *buf, size_t count, hv_dtype dt, int root, int device,
                              void *stream);
HV_API hv_err hv_broadcast_async_on(const char *name, void *buf, size_t count, hv_dtype dt,
                                    int root, int device, void *stream, hv_handle_t *handle);

#ifdef __cplusplus
}
#endif

#endif
