/*
 * err: hv's one error type. Every function that can fail returns hv_err; results go through
 * out-params assigned only on success. Values cross the ABI and the wire: only append.
 * Foreign codes (errno, uv, sqlite, grpc, nccl) are converted in the one module that wraps
 * the dependency; this module knows none of them except errno.
 */
#ifndef HV_COMMON_ERR_H
#define HV_COMMON_ERR_H

typedef enum hv_err {
    HV_OK = 0,
    HV_EINVAL = 1,     /* bad argument or bad input */
    HV_ENOMEM = 2,     /* allocation failed */
    HV_ETIMEDOUT = 3,  /* a bounded wait ran out */
    HV_ECLOSED = 4,    /* the object or connection is closed / end of stream */
    HV_ECANCELED = 5,  /* cancelled by request */
    HV_EPROTO = 6,     /* peer sent something that breaks the protocol */
    HV_ESTATE = 7,     /* operation not valid in the current state */
    HV_EPEER = 8,      /* a peer failed (connection reset, remote error) */
    HV_EIO = 9,        /* I/O error (file system, socket) */
    HV_EINTERNAL = 10, /* a bug in hv */
    HV_ENOTFOUND = 11, /* no such job, node, key, file */
    HV_EEXIST = 12,    /* already exists */
    HV_EPERM = 13,     /* refused: a known credential without the right (PERMISSION_DENIED) */
    HV_EUNAVAIL = 14,  /* service unreachable */
    HV_ETOOBIG = 15,   /* over a size limit */
    HV_ENOTSUP = 16,   /* not supported in this build or configuration */
    HV_ECORRUPT = 17,  /* stored data is damaged */
    HV_ERESET = 18,    /* membership changed: re-join (elastic) */
    HV_EAUTH = 19,     /* no credential, or one the head does not know (UNAUTHENTICATED) */
    HV_EINDOUBT = 20,  /* a call reached a peer that failed before answering: it may have run */
    HV_EREMOTE = 21,   /* the remote method ran and returned an error (an actor call) */
    HV__ERR_COUNT
} hv_err;

/* A short static description of rc ("connection closed"). Never NULL. */
const char *hv_strerror(hv_err rc);

/* A stable name ("HV_ETIMEDOUT"). Never NULL. */
const char *hv_errname(hv_err rc);

/* Maps an errno value to hv_err. */
hv_err hv_err_from_errno(int e);

#include <stddef.h>

/* Writes a message into a caller's buffer (err may be NULL or errlen 0: nothing is written). The
 * one helper for the "char *err, size_t errlen" convention of hv's APIs. */
void hv_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define HV_TRY(x)                                                                                  \
    do {                                                                                           \
        hv_err hv__rc = (x);                                                                       \
        if (hv__rc != HV_OK) {                                                                     \
            return hv__rc;                                                                         \
        }                                                                                          \
    } while (0)

#define HV_TRY_GOTO(x, rc, label)                                                                  \
    do {                                                                                           \
        if (((rc) = (x)) != HV_OK) {                                                               \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

#endif
