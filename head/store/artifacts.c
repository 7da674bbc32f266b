/* artifacts: see artifacts.h. */
#include "artifacts.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "mem.h"
#include "sha256.h"
#include "util.h"

/* An upload in progress: the running hash of its first `hashed` bytes. */
typedef struct upload_s {
    char digest[65];
    hv_sha256_t sha;
    uint64_t hashed;
    struct upload_s *next;
} upload_t;

struct hv_artifacts_s {
    char *dir;         /* data dir (owned) */
    hv_store_t *store; /* borrowed */
    hv_artifacts_limits_t lim;
    uint64_t next_sweep_ms; /* wall clock */
    upload_t *uploads;
};

static void upload_forget(hv_artifacts_t *a, const char *digest);

/* Sweep period: often enough for the timeout, at most every 30 s. */
static uint64_t sweep_every_ms(const hv_artifacts_t *a) {
    uint64_t half = a->lim.upload_timeout_ms / 2;
    return half < 30000 ? (half > 0 ? half : 1) : 30000;
}

/* Walks uploads/: adds the sizes of the part files, and with now_ms != 0 removes those not
 * modified for upload_timeout. */
static uint64_t parts_walk(hv_artifacts_t *a, uint64_t now_ms, size_t *removed) {
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/uploads", a->dir);
    DIR *d = opendir(dir);
    uint64_t total = 0;
    if (d == NULL) {
        return 0;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".part") != 0) {
            continue;
        }
        struct stat sb;
        if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode)) {
            continue;
        }
        uint64_t mtime_ms =
            (uint64_t)sb.st_mtim.tv_sec * 1000 + (uint64_t)sb.st_mtim.tv_nsec / 1000000;
        if (now_ms != 0 && now_ms > mtime_ms + a->lim.upload_timeout_ms) {
            if (unlinkat(dirfd(d), e->d_name, 0) == 0) {
                char digest[65];
                snprintf(digest, sizeof(digest), "%.*s", (int)(n - 5), e->d_name);
                upload_forget(a, digest);
                HV_LOG(HV_LOG_NOTICE, "artifacts", "HV-UPLOAD-STALE",
                       "removed unfinished upload %s/%s (%llu bytes, untouched for %llu s)", dir,
                       e->d_name, (unsigned long long)sb.st_size,
                       (unsigned long long)((now_ms - mtime_ms) / 1000));
                if (removed != NULL) {
                    (*removed)++;
                }
                continue;
            }
        }
        total += (uint64_t)sb.st_size;
    }
    closedir(d);
    return total;
}

uint64_t hv_artifacts_parts_bytes(hv_artifacts_t *a) { return parts_walk(a, 0, NULL); }

size_t hv_artifacts_sweep(hv_artifacts_t *a, uint64_t now_ms) {
    if (now_ms < a->next_sweep_ms) {
        return 0;
    }
    a->next_sweep_ms = now_ms + sweep_every_ms(a);
    size_t removed = 0;
    parts_walk(a, now_ms, &removed);
    return removed;
}

hv_err hv_artifacts_open(const char *data_dir, hv_store_t *store, const hv_artifacts_limits_t *lim,
                         hv_artifacts_t **out, char *err, size_t errlen) {
    /* The driver's logs/ and states/ too, so that a file in the way is named before it starts
     * (a file called logs is no problem of artifacts/). */
    const char *subs[] = {"artifacts", "uploads", "logs", "states"};
    for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
        char path[4096], why[4200];
        snprintf(path, sizeof(path), "%s/%s", data_dir, subs[i]);
        hv_err rc = hv_mkdirs_msg(path, 0700, why, sizeof(why));
        if (rc != HV_OK) {
            snprintf(err, errlen, "cannot prepare %s: %s", path, why);
            return rc;
        }
    }
    hv_artifacts_t *a = hv_calloc(1, sizeof(*a));
    if (a == NULL || (a->dir = hv_strdup(data_dir)) == NULL) {
        hv_free(a);
        snprintf(err, errlen, "out of memory");
        return HV_ENOMEM;
    }
    a->store = store;
    a->lim = *lim;
    hv_artifacts_sweep(a, hv_wall_ms());
    *out = a;
    return HV_OK;
}

void hv_artifacts_close(hv_artifacts_t *a) {
    if (a == NULL) {
        return;
    }
    while (a->uploads != NULL) {
        upload_t *u = a->uploads;
        a->uploads = u->next;
        hv_free(u);
    }
    hv_free(a->dir);
    hv_free(a);
}

uint64_t hv_artifacts_max(const hv_artifacts_t *a) { return a->lim.max_upload; }

hv_err hv_artifacts_path(hv_artifacts_t *a, const char *digest, char *buf, size_t len) {
    if (digest == NULL || !hv_sha256_valid_hex(digest)) {
        return HV_EINVAL;
    }
    snprintf(buf, len, "%s/artifacts/%s", a->dir, digest);
    return HV_OK;
}

int hv_artifacts_present(hv_artifacts_t *a, const char *digest) {
    char path[4096];
    struct stat sb;
    hv_artifact_row_t row;
    memset(&row, 0, sizeof(row));
    if (hv_artifacts_path(a, digest, path, sizeof(path)) != HV_OK ||
        hv_store_artifact_get(a->store, digest, &row) != HV_OK) {
        return 0;
    }
    int ok = stat(path, &sb) == 0 && (uint64_t)sb.st_size == row.size;
    hv_store_artifact_fini(&row);
    return ok;
}

static void part_path(hv_artifacts_t *a, const char *digest, char *buf, size_t len) {
    snprintf(buf, len, "%s/uploads/%s.part", a->dir, digest);
}

static uint64_t file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

uint64_t hv_artifacts_partial(hv_artifacts_t *a, const char *digest) {
    char part[4096];
    if (!hv_sha256_valid_hex(digest)) {
        return 0;
    }
    part_path(a, digest, part, sizeof(part));
    return file_size(part);
}

hv_err hv_artifacts_touch(hv_artifacts_t *a, const char *digest, char *err, size_t errlen) {
    hv_err rc = hv_store_artifact_touch(a->store, digest, hv_wall_ms());
    if (rc != HV_OK) {
        snprintf(err, errlen, "the head could not record the use of artifact %s: %s", digest,
                 hv_store_last_error(a->store));
        HV_LOG(HV_LOG_ERROR, "artifacts", "HV-ARTIFACT-TOUCH", "%s (%s)", err, hv_strerror(rc));
    }
    return rc;
}

static void upload_forget(hv_artifacts_t *a, const char *digest) {
    for (upload_t **p = &a->uploads; *p != NULL; p = &(*p)->next) {
        if (strcmp((*p)->digest, digest) == 0) {
            upload_t *u = *p;
            *p = u->next;
            hv_free(u);
            return;
        }
    }
}

/* Brings the running hash of an upload up to `offset` bytes (after a head restart it rehashes
 * the part file once). */
static hv_err upload_hash_to(upload_t *u, const char *part, uint64_t offset) {
    if (u->hashed == offset) {
        return HV_OK;
    }
    hv_sha256_init(&u->sha);
    u->hashed = 0;
    int fd = open(part, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return offset == 0 ? HV_OK : hv_err_from_errno(errno);
    }
    uint8_t buf[65536];
    while (u->hashed < offset) {
        size_t want = offset - u->hashed < sizeof(buf) ? (size_t)(offset - u->hashed) : sizeof(buf);
        ssize_t r = read(fd, buf, want);
        if (r <= 0) {
            close(fd);
            return HV_EIO;
        }
        hv_sha256_update(&u->sha, buf, (size_t)r);
        u->hashed += (uint64_t)r;
    }
    close(fd);
    return HV_OK;
}

/* The checks before a chunk is written (digest, max_upload, the offset against what the head
 * holds, upload_quota) and the upload's running hash, found or started: *u_out. */
static hv_err upload_begin(hv_artifacts_t *a, const char *digest, uint64_t total, uint64_t offset,
                           size_t len, const char *part, upload_t **u_out, char *err,
                           size_t errlen) {
    char sz1[32], sz2[32];
    uint64_t have = file_size(part);
    if (offset != have) {
        snprintf(err, errlen, "upload offset %llu, but the head holds %llu bytes",
                 (unsigned long long)offset, (unsigned long long)have);
        return HV_ESTATE;
    }
    if (offset + len > total) {
        snprintf(err, errlen, "chunk runs past the declared size %llu", (unsigned long long)total);
        return HV_EINVAL;
    }
    if (len > 0) {
        uint64_t held = parts_walk(a, 0, NULL);
        if (held + len > a->lim.quota) {
            char sz3[32];
            snprintf(err, errlen,
                     "the head holds %s of unfinished uploads and its upload_quota is %s: this "
                     "chunk of %s does not fit; try again later",
                     hv_fmt_size(held, sz1, sizeof(sz1)),
                     hv_fmt_size(a->lim.quota, sz2, sizeof(sz2)),
                     hv_fmt_size(len, sz3, sizeof(sz3)));
            HV_LOG(HV_LOG_WARN, "artifacts", "HV-UPLOAD-QUOTA", "%s", err);
            /* Not the file's fault (it may be well under max_upload): the space frees up as
             * other uploads finish or time out, so the client is told to try again. */
            return HV_EUNAVAIL;
        }
    }
    upload_t *u = a->uploads;
    while (u != NULL && strcmp(u->digest, digest) != 0) {
        u = u->next;
    }
    if (u == NULL) {
        if ((u = hv_calloc(1, sizeof(*u))) == NULL) {
            snprintf(err, errlen, "out of memory");
            return HV_ENOMEM;
        }
        snprintf(u->digest, sizeof(u->digest), "%s", digest);
        hv_sha256_init(&u->sha);
        u->next = a->uploads;
        a->uploads = u;
    }
    *u_out = u;
    return HV_OK;
}

/* Appends the chunk at offset `have` of the part file, hashing it; *fd_out stays open for
 * upload_publish. A full disk discards the upload (its space goes back at once); another write
 * error cuts the part file back to what was acknowledged, for a resume. */
static hv_err upload_append(hv_artifacts_t *a, upload_t *u, const char *part, uint64_t have,
                            const uint8_t *data, size_t len, int *fd_out, char *err,
                            size_t errlen) {
    hv_err rc = upload_hash_to(u, part, have);
    int fd = -1, werr = 0;
    if (rc == HV_OK && (fd = open(part, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) < 0) {
        werr = errno;
        rc = hv_err_from_errno(errno);
    }
    for (size_t done = 0; rc == HV_OK && done < len;) {
        ssize_t w = pwrite(fd, data + done, len - done, (off_t)(have + done));
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            werr = w < 0 ? errno : ENOSPC;
            rc = HV_EIO;
            break;
        }
        done += (size_t)w;
    }
    if (rc == HV_OK) {
        hv_sha256_update(&u->sha, data, len);
        u->hashed += len;
        *fd_out = fd;
        return HV_OK;
    }
    if (fd >= 0) {
        close(fd);
    }
    char digest[sizeof(u->digest)];
    snprintf(digest, sizeof(digest), "%s", u->digest); // u goes with upload_forget
    if (werr == ENOSPC || werr == EDQUOT) {
        /* Give the space back at once: this upload cannot finish now, others may. */
        unlink(part);
        upload_forget(a, digest);
        HV_LOG(HV_LOG_ERROR, "artifacts", "HV-UPLOAD-NOSPACE",
               "no space left on device writing %s: the upload of %.12s was discarded", part,
               digest);
        snprintf(err, errlen,
                 "the head cannot store the upload: no space left on device (%s); the "
                 "partial upload was discarded: try again once the head has room",
                 part);
        /* Not the file's fault, as with upload_quota: UNAVAILABLE, "try again later". */
        return HV_EUNAVAIL;
    }
    HV_LOG(HV_LOG_ERROR, "artifacts", "HV-UPLOAD-IO", "cannot write %s: %s", part, strerror(werr));
    /* Keep the part file consistent with what was acknowledged, for a resume. */
    if (truncate(part, (off_t)have) != 0) {
        unlink(part);
        upload_forget(a, digest);
    }
    snprintf(err, errlen, "the head cannot store the upload in %s: %s", part,
             werr ? strerror(werr) : hv_strerror(rc));
    return HV_EIO;
}

/* The last chunk is in (fd, closed here): checks size and digest, fsyncs, renames the part file
 * to the artifact and records it. */
static hv_err upload_publish(hv_artifacts_t *a, upload_t *u, int fd, const char *part,
                             const char *final, uint64_t total, uint64_t received, char *err,
                             size_t errlen) {
    char digest[sizeof(u->digest)], sz[32];
    snprintf(digest, sizeof(digest), "%s", u->digest);
    uint8_t dg[32];
    char hex[65];
    hv_sha256_final(&u->sha, dg);
    hv_sha256_hex(dg, hex);
    int sync_ok = fsync(fd) == 0;
    close(fd);
    upload_forget(a, digest);
    if (received != total || strcmp(hex, digest) != 0) {
        unlink(part);
        snprintf(err, errlen, "upload does not match its digest: got %llu bytes with sha256 %s",
                 (unsigned long long)received, hex);
        return HV_ECORRUPT;
    }
    if (!sync_ok || rename(part, final) != 0) {
        snprintf(err, errlen, "the head cannot publish the artifact: %s", strerror(errno));
        return HV_EIO;
    }
    chmod(final, 0600); /* data for the agents, which set their own modes; not for others */
    hv_artifact_row_t row = {.digest = digest,
                             .path = (char *) final,
                             .size = total,
                             .created_ms = hv_wall_ms(),
                             .last_used_ms = hv_wall_ms()};
    if (hv_store_artifact_put(a->store, &row) != HV_OK) {
        HV_LOG(HV_LOG_ERROR, "store", "HV-STORE-WRITE", "cannot record artifact %s: %s", digest,
               hv_store_last_error(a->store));
        snprintf(err, errlen, "the head cannot record the artifact");
        return HV_EIO;
    }
    HV_LOG(HV_LOG_INFO, "artifacts", "HV-ARTIFACT-NEW", "artifact %.12s stored (%s)", digest,
           hv_fmt_size(total, sz, sizeof(sz)));
    return HV_OK;
}

hv_err hv_artifacts_write(hv_artifacts_t *a, const char *digest, uint64_t total, uint64_t offset,
                          const uint8_t *data, size_t len, int last, uint64_t *received,
                          int *complete, char *err, size_t errlen) {
    char sz1[32], sz2[32];
    *complete = 0;
    if (!hv_sha256_valid_hex(digest)) {
        snprintf(err, errlen, "digest '%s' is not 64 lowercase hex characters", digest);
        return HV_EINVAL;
    }
    if (total > a->lim.max_upload) {
        snprintf(err, errlen, "upload of %s exceeds the head's limit of %s (max_upload)",
                 hv_fmt_size(total, sz1, sizeof(sz1)),
                 hv_fmt_size(a->lim.max_upload, sz2, sizeof(sz2)));
        return HV_ETOOBIG;
    }
    if (hv_artifacts_present(a, digest)) {
        *received = total;
        *complete = 1;
        return HV_OK;
    }
    char part[4096], final[4096];
    part_path(a, digest, part, sizeof(part));
    hv_artifacts_path(a, digest, final, sizeof(final));
    upload_t *u = NULL;
    int fd = -1;
    hv_err rc = upload_begin(a, digest, total, offset, len, part, &u, err, errlen);
    if (rc == HV_OK) {
        rc = upload_append(a, u, part, offset, data, len, &fd, err, errlen);
    }
    if (rc != HV_OK) {
        return rc;
    }
    *received = offset + len;
    if (!last) {
        close(fd);
        return HV_OK;
    }
    rc = upload_publish(a, u, fd, part, final, total, *received, err, errlen);
    *complete = rc == HV_OK;
    return rc;
}
