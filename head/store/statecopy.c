/* statecopy: see statecopy.h. */
#include "statecopy.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "copies.h"
#include "log.h"
#include "mem.h"
#include "sha256.h"
#include "util.h"

/* A copy being received. */
typedef struct part_s {
    uint64_t job_id;
    uint32_t generation;
    uint64_t commit, total, have; /* bytes expected and written */
    int fd;
    char path[600]; /* its own name: <epoch>-<job>-<seq>.part */
    hv_sha256_t sha;
    struct part_s *next;
} part_t;

struct hv_statecopies_s {
    char dir[400];
    char epoch[40];
    uint64_t reserve; /* bytes kept free on the file system */
    uint64_t seq;     /* parts made so far: each has a name of its own */
    part_t *parts;
};

static void part_path(const hv_statecopies_t *c, uint64_t job_id, uint64_t seq, char *buf,
                      size_t len) {
    snprintf(buf, len, "%s/%s%s%llu-%llu.part", c->dir, c->epoch, c->epoch[0] ? "-" : "",
             (unsigned long long)job_id, (unsigned long long)seq);
}

hv_err hv_statecopies_create(const char *dir, const char *epoch, uint64_t reserve,
                             hv_statecopies_t **out) {
    hv_statecopies_t *c = hv_calloc(1, sizeof(*c));
    if (c == NULL) {
        return HV_ENOMEM;
    }
    snprintf(c->dir, sizeof(c->dir), "%s", dir);
    snprintf(c->epoch, sizeof(c->epoch), "%s", epoch ? epoch : "");
    c->reserve = reserve;
    hv_err rc = hv_mkdirs(dir, 0700);
    if (rc != HV_OK) {
        HV_LOG(HV_LOG_ERROR, "copies", "HV-COPY-DIR", "cannot create %s: %s", dir, hv_strerror(rc));
        hv_free(c);
        return rc;
    }
    /* A .part is never named by a stored row: what a previous head left half-written goes. */
    DIR *dh = opendir(dir);
    struct dirent *e;
    while (dh != NULL && (e = readdir(dh)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l > 5 && strcmp(e->d_name + l - 5, ".part") == 0) {
            char p[800];
            snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
            unlink(p);
        }
    }
    if (dh != NULL) {
        closedir(dh);
    }
    *out = c;
    return HV_OK;
}

static void part_drop(hv_statecopies_t *c, part_t *p, int unlink_file) {
    for (part_t **q = &c->parts; *q != NULL; q = &(*q)->next) {
        if (*q == p) {
            *q = p->next;
            break;
        }
    }
    if (p->fd >= 0) {
        close(p->fd);
    }
    if (unlink_file) {
        unlink(p->path);
    }
    hv_free(p);
}

void hv_statecopies_destroy(hv_statecopies_t *c) {
    if (c == NULL) {
        return;
    }
    while (c->parts != NULL) {
        part_drop(c, c->parts, 1);
    }
    hv_free(c);
}

void hv_statecopy_abort(hv_statecopies_t *c, uint64_t job_id) {
    for (part_t *p = c->parts; p != NULL; p = p->next) {
        if (p->job_id == job_id) {
            part_drop(c, p, 1);
            return;
        }
    }
}

static hv_err write_all(int fd, const uint8_t *b, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return HV_EIO;
        }
        b += w;
        n -= (size_t)w;
    }
    return HV_OK;
}

/* May a new copy of total bytes start, replacing own (the job's copy in progress, or NULL)? Counts
 * it whole, with what the other copies in progress have still to write (hv_copy_room); err says
 * why not. A file system that cannot be read is no reason to refuse. */
static int copy_room(const hv_statecopies_t *c, const part_t *own, uint64_t total, char *err,
                     size_t errlen) {
    struct statvfs fs;
    if (statvfs(c->dir, &fs) != 0) {
        return 1;
    }
    hv_copy_disk_t disk = {.fs_bytes = (uint64_t)fs.f_blocks * fs.f_frsize,
                           .free_bytes = (uint64_t)fs.f_bavail * fs.f_frsize,
                           .reserve = c->reserve};
    for (const part_t *q = c->parts; q != NULL; q = q->next) {
        if (q == own) {
            disk.replaced = q->have;
        } else {
            disk.arriving += q->total - q->have;
        }
    }
    if (hv_copy_room(&disk, total)) {
        return 1;
    }
    char fr[32], ar[32], sz[32], keep[32];
    snprintf(err, errlen,
             "the head's disk (%s) has %s free and %s of other jobs' copies still arriving: this "
             "copy of %s would leave less than the %s it keeps free (twice "
             "logs.reserve_free_bytes, at most half of a small disk: room for the head's state "
             "and the jobs' output); the job trains on and sends its next copy later",
             c->dir, hv_fmt_size(disk.free_bytes, fr, sizeof(fr)),
             hv_fmt_size(disk.arriving, ar, sizeof(ar)), hv_fmt_size(total, sz, sizeof(sz)),
             hv_fmt_size(hv_copy_keep_free(c->reserve, disk.fs_bytes), keep, sizeof(keep)));
    return 0;
}

hv_err hv_statecopy_put(hv_statecopies_t *c, uint64_t job_id, uint32_t generation, uint64_t commit,
                        uint64_t total, uint64_t offset, const uint8_t *data, size_t len,
                        const char *sha256, int *complete, hv_statecopy_done_t *done, char *err,
                        size_t errlen) {
    *complete = 0;
    part_t *p = c->parts;
    while (p != NULL && p->job_id != job_id) {
        p = p->next;
    }
    if (total == 0 || total > HV_STATECOPY_SIZE_MAX || len > HV_STATECOPY_CHUNK_MAX ||
        offset > total || total - offset < len) {
        snprintf(err, errlen, "a chunk of %zu bytes at %llu does not fit a copy of %llu bytes", len,
                 (unsigned long long)offset, (unsigned long long)total);
        return HV_EINVAL;
    }
    char path[600];
    if (p != NULL) {
        snprintf(path, sizeof(path), "%s", p->path);
    } else {
        part_path(c, job_id, c->seq + 1, path, sizeof(path));
    }
    if (offset == 0 && !copy_room(c, p, total, err, errlen)) {
        if (p != NULL) {
            part_drop(c, p, 1); /* the sender started again: the old part is abandoned */
        }
        HV_LOG(HV_LOG_WARN, "copies", "HV-COPY-FULL", "job %llu: %s", (unsigned long long)job_id,
               err);
        return HV_ETOOBIG;
    }
    if (offset == 0) {
        if (p != NULL) {
            part_drop(c, p, 1); /* the new copy replaces it */
        }
        if ((p = hv_calloc(1, sizeof(*p))) == NULL) {
            snprintf(err, errlen, "out of memory");
            return HV_ENOMEM;
        }
        part_path(c, job_id, ++c->seq, path, sizeof(path));
        snprintf(p->path, sizeof(p->path), "%s", path);
        p->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (p->fd < 0) {
            snprintf(err, errlen, "the head cannot write %s: %s", path, strerror(errno));
            hv_free(p);
            return HV_EIO;
        }
        p->job_id = job_id;
        p->generation = generation;
        p->commit = commit;
        p->total = total;
        hv_sha256_init(&p->sha);
        p->next = c->parts;
        c->parts = p;
    } else if (p == NULL || p->generation != generation || p->commit != commit ||
               p->total != total || p->have != offset) {
        snprintf(err, errlen,
                 "no copy of generation %u, commit %llu is in progress at byte %llu: start "
                 "again at 0",
                 generation, (unsigned long long)commit, (unsigned long long)offset);
        return HV_ESTATE;
    }
    if (len > 0 && write_all(p->fd, data, len) != HV_OK) {
        snprintf(err, errlen, "the head cannot write %s: %s", path, strerror(errno));
        part_drop(c, p, 1);
        return HV_EIO;
    }
    hv_sha256_update(&p->sha, data, len);
    p->have += len;
    if (p->have < p->total) {
        return HV_OK;
    }
    uint8_t dg[32];
    char hex[65];
    hv_sha256_final(&p->sha, dg);
    hv_sha256_hex(dg, hex);
    if (sha256 == NULL || strcmp(hex, sha256) != 0) {
        snprintf(err, errlen, "the copy's digest is %s, the sender said %s", hex,
                 sha256 ? sha256 : "nothing");
        part_drop(c, p, 1);
        return HV_EPROTO;
    }
    hv_statecopy_path(c, job_id, generation, commit, done->path, sizeof(done->path));
    snprintf(done->part, sizeof(done->part), "%s", p->path);
    done->fd = p->fd;
    p->fd = -1; /* handed over: publish syncs and closes it */
    done->generation = generation;
    done->commit = commit;
    done->size = total;
    snprintf(done->sha256, sizeof(done->sha256), "%s", hex);
    *complete = 1;
    part_drop(c, p, 0);
    return HV_OK;
}

hv_err hv_statecopy_publish(hv_statecopy_done_t *done, char *err, size_t errlen) {
    int rc = fsync(done->fd);
    int e = errno;
    close(done->fd);
    done->fd = -1;
    if (rc != 0) {
        snprintf(err, errlen, "the head cannot sync %s: %s", done->part, strerror(e));
        unlink(done->part);
        return HV_EIO;
    }
    if (rename(done->part, done->path) != 0) {
        snprintf(err, errlen, "the head cannot publish %s: %s", done->path, strerror(errno));
        unlink(done->part);
        return HV_EIO;
    }
    /* The directory entry too, so that a crash right after the row is stored keeps the file. */
    char dir[sizeof(done->path)];
    snprintf(dir, sizeof(dir), "%s", done->path);
    char *slash = strrchr(dir, '/');
    if (slash != NULL) {
        *slash = '\0';
        int dfd = open(dir[0] ? dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            (void)fsync(dfd);
            close(dfd);
        }
    }
    return HV_OK;
}

void hv_statecopy_discard(hv_statecopy_done_t *done) {
    if (done->fd >= 0) {
        close(done->fd);
        done->fd = -1;
        unlink(done->part);
    }
}

void hv_statecopy_path(const hv_statecopies_t *c, uint64_t job_id, uint32_t generation,
                       uint64_t commit, char *buf, size_t len) {
    snprintf(buf, len, "%s/%s%s%llu-g%u-c%llu.bin", c->dir, c->epoch, c->epoch[0] ? "-" : "",
             (unsigned long long)job_id, generation, (unsigned long long)commit);
}

hv_err hv_statecopy_read(const char *path, uint64_t offset, uint8_t *buf, size_t cap, size_t *n) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return errno == ENOENT ? HV_ENOTFOUND : HV_EIO;
    }
    size_t got = 0;
    while (got < cap) {
        ssize_t r = pread(fd, buf + got, cap - got, (off_t)(offset + got));
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            close(fd);
            return HV_EIO;
        }
        if (r == 0) {
            break;
        }
        got += (size_t)r;
    }
    close(fd);
    *n = got;
    return HV_OK;
}

void hv_statecopy_remove(const char *path) {
    if (path != NULL && path[0] != '\0' && unlink(path) != 0 && errno != ENOENT) {
        HV_LOG(HV_LOG_WARN, "copies", "HV-COPY-RM", "cannot remove %s: %s", path, strerror(errno));
    }
}
