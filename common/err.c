/* err: hv_err names and descriptions. See err.h. */
#include "err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

static const struct {
    const char *name;
    const char *text;
} err_table[HV__ERR_COUNT] = {
    [HV_OK] = {"HV_OK", "success"},
    [HV_EINVAL] = {"HV_EINVAL", "invalid argument"},
    [HV_ENOMEM] = {"HV_ENOMEM", "out of memory"},
    [HV_ETIMEDOUT] = {"HV_ETIMEDOUT", "timed out"},
    [HV_ECLOSED] = {"HV_ECLOSED", "closed"},
    [HV_ECANCELED] = {"HV_ECANCELED", "cancelled"},
    [HV_EPROTO] = {"HV_EPROTO", "protocol error"},
    [HV_ESTATE] = {"HV_ESTATE", "invalid state"},
    [HV_EPEER] = {"HV_EPEER", "peer failed"},
    [HV_EIO] = {"HV_EIO", "I/O error"},
    [HV_EINTERNAL] = {"HV_EINTERNAL", "internal error"},
    [HV_ENOTFOUND] = {"HV_ENOTFOUND", "not found"},
    [HV_EEXIST] = {"HV_EEXIST", "already exists"},
    [HV_EPERM] = {"HV_EPERM", "permission denied"},
    [HV_EUNAVAIL] = {"HV_EUNAVAIL", "unavailable"},
    [HV_ETOOBIG] = {"HV_ETOOBIG", "too large"},
    [HV_ENOTSUP] = {"HV_ENOTSUP", "not supported"},
    [HV_ECORRUPT] = {"HV_ECORRUPT", "data corrupted"},
    [HV_ERESET] = {"HV_ERESET", "membership changed"},
    [HV_EAUTH] = {"HV_EAUTH", "not authenticated"},
    [HV_EINDOUBT] = {"HV_EINDOUBT", "outcome unknown: the peer failed with the call in flight"},
    [HV_EREMOTE] = {"HV_EREMOTE", "the remote method returned an error"},
};

const char *hv_strerror(hv_err rc) {
    if ((unsigned)rc >= HV__ERR_COUNT) {
        return "unknown error";
    }
    return err_table[rc].text;
}

const char *hv_errname(hv_err rc) {
    if ((unsigned)rc >= HV__ERR_COUNT) {
        return "HV_E?";
    }
    return err_table[rc].name;
}

hv_err hv_err_from_errno(int e) {
    switch (e) {
    case 0:
        return HV_OK;
    case EINVAL:
        return HV_EINVAL;
    case ENOMEM:
        return HV_ENOMEM;
    case ETIMEDOUT:
    case EAGAIN:
        return HV_ETIMEDOUT;
    case ECONNRESET:
    case EPIPE:
    case ECONNABORTED:
        return HV_EPEER;
    case ECONNREFUSED:
    case EHOSTUNREACH:
    case ENETUNREACH:
        return HV_EUNAVAIL;
    case ENOENT:
        return HV_ENOTFOUND;
    case EEXIST:
        return HV_EEXIST;
    case EACCES:
    case EPERM:
        return HV_EPERM;
    case EFBIG:
    case E2BIG:
        return HV_ETOOBIG;
    case ECANCELED:
        return HV_ECANCELED;
    default:
        return HV_EIO;
    }
}

void hv_errf(char *err, size_t errlen, const char *fmt, ...) {
    if (err == NULL || errlen == 0) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}
