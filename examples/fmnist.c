/*
 * fmnist: the Fashion-MNIST idx.gz loader (see fmnist.h). An idx file is a big-endian header
 * (magic: two zero bytes, the data type 0x08 = unsigned byte, the number of dimensions; then one
 * 32-bit size per dimension) followed by the items, row-major. zlib's gz* functions read the
 * gzip stream (and plain files transparently).
 */
#include "fmnist.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

/* Largest dimension accepted after the count: far above 28, far below an overflow. */
#define IDX_MAX_DIM 65535u

static void set_err(char *err, size_t errlen, const char *fmt, ...) {
    if (err == NULL || errlen == 0) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Reads up to len bytes into buf; *got receives how many were read (fewer only at the end of the
 * data). Returns 0, or -1 on a zlib error (gzerror says which). */
static int read_full(gzFile f, void *buf, size_t len, size_t *got) {
    unsigned char *p = buf;
    size_t done = 0;
    while (done < len) {
        size_t want = len - done;
        if (want > (size_t)1 << 30) {
            want = (size_t)1 << 30; // gzread takes an unsigned and returns an int
        }
        int n = gzread(f, p + done, (unsigned)want);
        if (n < 0) {
            *got = done;
            return -1;
        }
        if (n == 0) {
            break;
        }
        done += (size_t)n;
    }
    *got = done;
    // zlib decompresses ahead into its own buffer, so it may already have met the end of a gzip
    // stream cut short (Z_BUF_ERROR) while our bytes were complete: that counts only for a short
    // read.
    int zerr = Z_OK;
    gzerror(f, &zerr);
    return zerr == Z_OK || zerr == Z_STREAM_END || (zerr == Z_BUF_ERROR && done == len) ? 0 : -1;
}

/* zlib's message for f's error without the "path: " zlib puts in front of it. */
static const char *zmsg(gzFile f, const char *path, int *zerr) {
    const char *m = gzerror(f, zerr);
    size_t n = strlen(path);
    if (strncmp(m, path, n) == 0 && m[n] == ':' && m[n + 1] == ' ') {
        m += n + 2;
    }
    return m;
}

hv_err fmnist_read_idx(const char *path, uint32_t magic, size_t limit, uint32_t dims[3],
                       uint8_t **out, size_t *nitems, char *err, size_t errlen) {
    unsigned ndims = magic & 0xffu;
    if (path == NULL || dims == NULL || out == NULL || nitems == NULL || ndims < 1 || ndims > 3 ||
        (magic & 0xffffff00u) != 0x00000800u) {
        set_err(err, errlen, "%s: bad arguments to fmnist_read_idx", path ? path : "(null)");
        return HV_EINVAL;
    }
    errno = 0;
    gzFile f = gzopen(path, "rb");
    if (f == NULL) {
        int e = errno;
        set_err(err, errlen, "%s: cannot open: %s", path, e ? strerror(e) : "out of memory");
        return e == ENOENT ? HV_ENOTFOUND : e == 0 || e == ENOMEM ? HV_ENOMEM : HV_EIO;
    }
    gzbuffer(f, 1u << 17);
    hv_err rc = HV_OK;
    uint8_t *data = NULL;
    unsigned char hdr[16];
    size_t hlen = 4 + 4 * (size_t)ndims, got = 0;
    int zerr = Z_OK;
    if (read_full(f, hdr, hlen, &got) != 0) {
        const char *msg = zmsg(f, path, &zerr);
        set_err(err, errlen, "%s: cannot read the idx header: %s", path, msg);
        rc = zerr == Z_BUF_ERROR ? HV_ECORRUPT : HV_EIO;
        goto out;
    }
    if (got < 4) {
        set_err(err, errlen, "%s: %zu bytes, too short for an idx file", path, got);
        rc = HV_ECORRUPT;
        goto out;
    }
    if (be32(hdr) != magic) {
        set_err(err, errlen,
                "%s: magic number 0x%08x, expected 0x%08x (idx, unsigned bytes, %u-dimensional)",
                path, be32(hdr), magic, ndims);
        rc = HV_ECORRUPT;
        goto out;
    }
    if (got < hlen) {
        set_err(err, errlen, "%s: truncated idx header (%zu of %zu bytes)", path, got, hlen);
        rc = HV_ECORRUPT;
        goto out;
    }
    size_t item = 1;
    for (unsigned i = 0; i < 3; i++) {
        dims[i] = i < ndims ? be32(hdr + 4 + 4 * i) : 1;
        if (i > 0 && (dims[i] == 0 || dims[i] > IDX_MAX_DIM)) {
            set_err(err, errlen, "%s: implausible dimension %u = %u", path, i, dims[i]);
            rc = HV_ECORRUPT;
            goto out;
        }
        item *= i > 0 ? dims[i] : 1;
    }
    size_t count = dims[0];
    size_t n = limit > 0 && limit < count ? limit : count;
    if (n > SIZE_MAX / item) {
        set_err(err, errlen, "%s: %zu items of %zu bytes do not fit in memory", path, n, item);
        rc = HV_ECORRUPT;
        goto out;
    }
    size_t bytes = n * item;
    data = malloc(bytes > 0 ? bytes : 1);
    if (data == NULL) {
        set_err(err, errlen, "%s: out of memory for %zu bytes", path, bytes);
        rc = HV_ENOMEM;
        goto out;
    }
    if (read_full(f, data, bytes, &got) != 0 || got < bytes) {
        const char *msg = zmsg(f, path, &zerr);
        if (zerr != Z_OK && zerr != Z_BUF_ERROR && zerr != Z_STREAM_END) {
            set_err(err, errlen, "%s: read error: %s", path, msg);
            rc = HV_EIO;
        } else {
            set_err(err, errlen,
                    "%s: truncated: the header announces %zu items of %zu bytes, the file holds "
                    "%zu complete items",
                    path, count, item, got / item);
            rc = HV_ECORRUPT;
        }
        goto out;
    }
    if (n == count) {
        unsigned char extra;
        if (read_full(f, &extra, 1, &got) != 0) {
            set_err(err, errlen, "%s: damaged gzip stream after the items: %s", path,
                    zmsg(f, path, &zerr));
            rc = HV_ECORRUPT;
            goto out;
        }
        if (got != 0) {
            set_err(err, errlen, "%s: unexpected data after the %zu items the header announces",
                    path, count);
            rc = HV_ECORRUPT;
            goto out;
        }
    }
out:
    if (gzclose_r(f) != Z_OK && rc == HV_OK) {
        set_err(err, errlen, "%s: error at close (damaged gzip stream)", path);
        rc = HV_ECORRUPT;
    }
    if (rc != HV_OK) {
        free(data);
        return rc;
    }
    *out = data;
    *nitems = n;
    return HV_OK;
}

const char *fmnist_default_dir(void) {
    const char *d = getenv("HV_FMNIST_DIR");
    return d != NULL && d[0] != '\0' ? d : FMNIST_DEFAULT_DIR;
}

hv_err fmnist_load(const char *dir, const char *split, size_t limit, fmnist_t *out, char *err,
                   size_t errlen) {
    if (dir == NULL || split == NULL || split[0] == '\0' || out == NULL) {
        set_err(err, errlen, "fmnist_load: bad arguments");
        return HV_EINVAL;
    }
    char ipath[4096], lpath[4096];
    int a = snprintf(ipath, sizeof(ipath), "%s/%s-images-idx3-ubyte.gz", dir, split);
    int b = snprintf(lpath, sizeof(lpath), "%s/%s-labels-idx1-ubyte.gz", dir, split);
    if (a < 0 || b < 0 || (size_t)a >= sizeof(ipath) || (size_t)b >= sizeof(lpath)) {
        set_err(err, errlen, "%s: path too long", dir);
        return HV_EINVAL;
    }
    uint32_t idims[3], ldims[3];
    uint8_t *images = NULL, *labels = NULL;
    size_t nimages = 0, nlabels = 0;
    hv_err rc =
        fmnist_read_idx(ipath, FMNIST_MAGIC_IMAGES, limit, idims, &images, &nimages, err, errlen);
    if (rc != HV_OK) {
        return rc;
    }
    if (idims[1] != FMNIST_ROWS || idims[2] != FMNIST_COLS) {
        set_err(err, errlen, "%s: images are %ux%u, expected %ux%u", ipath, idims[1], idims[2],
                FMNIST_ROWS, FMNIST_COLS);
        rc = HV_ECORRUPT;
        goto fail;
    }
    rc = fmnist_read_idx(lpath, FMNIST_MAGIC_LABELS, limit, ldims, &labels, &nlabels, err, errlen);
    if (rc != HV_OK) {
        goto fail;
    }
    if (idims[0] != ldims[0]) {
        set_err(err, errlen, "%s holds %u images but %s holds %u labels", ipath, idims[0], lpath,
                ldims[0]);
        rc = HV_ECORRUPT;
        goto fail;
    }
    for (size_t i = 0; i < nlabels; i++) {
        if (labels[i] >= FMNIST_CLASSES) {
            set_err(err, errlen, "%s: label %u of sample %zu is out of range (0..%d)", lpath,
                    labels[i], i, FMNIST_CLASSES - 1);
            rc = HV_ECORRUPT;
            goto fail;
        }
    }
    out->count = nimages;
    out->available = idims[0];
    out->images = images;
    out->labels = labels;
    return HV_OK;
fail:
    free(images);
    free(labels);
    return rc;
}

void fmnist_fini(fmnist_t *d) {
    if (d == NULL) {
        return;
    }
    free(d->images);
    free(d->labels);
    memset(d, 0, sizeof(*d));
}
