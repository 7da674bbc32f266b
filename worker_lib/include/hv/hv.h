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
 *   HV_RANK, HV_SIZE, HV_LOCAL_RANK, HV_LOCAL_SIZE  without a head: taken as given.
 *   nothing                           a single-process world: rank 0 of 1.
 * Blocking (up to the rendezvous deadline). Not thread-safe with respect to hv_shutdown or a
 * concurrent hv_init. Errors: HV_ESTATE (already initialised), HV_EINVAL (malformed HV_* value;
 * the log names the variable), HV_EUNAVAIL/HV_ETIMEDOUT (rendezvous), HV_EPEER (peers
 * unreachable), HV_ENOMEM. hv_init may be called again after hv_shutdown. */
HV_API hv_err hv_init(void);

/* Leaves the job: completes nothing further, fails operations still pending with HV_ECANCELED,
 * closes the data plane, and (after a successful run under a head) reports Done to the head.
 * Safe to call when not initialised (returns HV_OK). Blocking (bounded). Not thread-safe with
 * respect to hv_init. */
HV_API hv_err hv_shutdown(void);

/* This worker's rank in [0, size), the world size, the rank among workers on this host and the
 * number of workers on this host. -1 when not initialised. Thread-safe, never block. */
HV_API int hv_rank(void);
HV_API int hv_size(void);
HV_API int hv_local_rank(void);
HV_API int hv_local_size(void);

/* The name of the host (node) this worker runs on, as the cluster knows it (HV_NODE_NAME when
 * set, else the system host name). Static storage valid until hv_shutdown; "" when not
 * initialised. Thread-safe. */
HV_API const char *hv_host_name(void);

#ifdef __cplusplus
}
#endif

#endif
