/*
 * artifact: the agent's artifact cache and its Fetch client (see artifact.h for the contract).
 * One entry per digest being served: its waiters, and while downloading the rpc call, the
 * temporary file and the running sha256. A single timer delivers results that are ready at
 * once (cache hits, early failures) and starts retries, so callbacks never run inside
 * hv_artifact_get. Beside the entries, an index of the complete files on disk (size, last use)
 * and the pins of delivered requests keep the cache within its bound: agent/cachepol.c decides
 * what goes, this file deletes it.
 */
#include "artifact.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cachepol.h"
#include "hv.pb-c.h"
#include "log.h"
#include "mem.h"
#include "sha256.h"
#include "util.h"

#define ARTIFACT_RETRY_MS 500           /* pause before resuming a broken download */
#define ARTIFACT_BASE_TIMEOUT_MS 60000u /* deadline of a Fetch call: this plus ... */
#define ARTIFACT_MIN_RATE_BPMS 1024u    /* ... the size at 1 MiB/s (bytes per ms) */

typedef struct waiter_s {
    hv_artifact_done_cb cb;
    void *ud;
    struct waiter_s *next;
} waiter_t;

typedef enum entry_state {
    ENTRY_READY = 0,    /* result known (rc, detail); deliver on the next tick */
    ENTRY_FETCHING = 1, /* a Fetch call is in flight */
    ENTRY_RETRY = 2,    /* waiting for retry_at to resume the download */
} entry_state;

typedef struct entry_s {
    char digest[65];
    uint64_t size; /* expected size from the order; 0 = unknown */
    entry_state state;
    waiter_t *waiters;   /* owned list, in arrival order (reversed on delivery) */
    hv_err rc;           /* ENTRY_READY: outcome */
    char detail[256];    /* ENTRY_READY: why it failed */
    hv_rpc_call_t *call; /* ENTRY_FETCHING: the call (valid until on_done) */
    int fd;              /* temporary file while downloading; -1 otherwise */
    char tmp[PATH_MAX];  /* its path */
    hv_sha256_t sha;     /* digest of the bytes written so far */
    uint64_t written;    /* bytes written to fd */
    uint64_t total;      /* total size the head announced; 0 until the first chunk */
    int attempts;        /* Fetch calls started */
    uint64_t retry_at;   /* ENTRY_RETRY: loop time to resume */
    struct hv_artifact_cache_s *cache;
    struct entry_s *next;
} entry_t;

/* A complete artifact in the cache directory: what the bound is kept by. The scan at create,
 * each published download and each request that finds a file on disk add one. */
typedef struct file_s {
    char digest[65];
    uint64_t size;    /* bytes on disk */
    uint64_t ino;     /* with size and mtime_ns: the file as last seen */
    int64_t mtime_ns; /* its mtime as last seen (ns since the epoch) */
    int64_t last_use; /* ns since the epoch: the mtime, set at each delivery to a time later
                         than every earlier use in this process (cache_touch) */
    int verified;     /* hashed and found valid by this process (while ino, size, mtime hold) */
    struct file_s *next;
} file_t;

/* Deliveries of one digest not released yet (hv_artifact_release): its file must stay. */
typedef struct pin_s {
    char digest[65];
    uint32_t count; /* > 0 while listed */
    struct pin_s *next;
} pin_t;

struct hv_artifact_cache_s {
    uv_loop_t *loop;      /* borrowed */
    hv_rpc_engine_t *eng; /* borrowed; NULL = no fetching */
    hv_rpc_channel_t *ch; /* borrowed; NULL = no fetching */
    char *dir;            /* owned */
    char *token;          /* owned */
    uv_timer_t timer;     /* delivery and retry tick */
    entry_t *entries;     /* owned list */
    file_t *files;        /* owned list: the complete artifacts on disk */
    size_t n_files;       /* its length */
    uint64_t bytes;       /* their total size */
    uint64_t max_bytes;   /* the bound (hv_artifact_cache_set_max); 0 = unbounded */
    uint64_t evicted;     /* files deleted to keep the bound */
    int64_t last_use_max; /* the latest last use given out (file_t.last_use) */
    pin_t *pins;          /* owned list */
    int over_warned;      /* over the bound with the rest pinned, and a WARN said so */
    struct put_s *puts;   /* uploads in flight (owned list) */
    int stopped;          /* hv_artifact_cache_stop ran */
};

static void cache_tick(uv_timer_t *t);

static void cache_schedule(hv_artifact_cache_t *c, uint64_t delay_ms) {
    uint64_t due = uv_timer_get_due_in(&c->timer);
    if (!uv_is_active((uv_handle_t *)&c->timer) || due > delay_ms) {
        uv_timer_start(&c->timer, cache_tick, delay_ms, 0);
    }
}

static void entry_path(const hv_artifact_cache_t *c, const char *digest, char *buf, size_t len) {
    snprintf(buf, len, "%s/%s", c->dir, digest);
}

/* ---- the index and the bound ---------------------------------------------------------------- */

static file_t *file_find(hv_artifact_cache_t *c, const char *digest) {
    for (file_t *f = c->files; f != NULL; f = f->next) {
        if (strcmp(f->digest, digest) == 0) {
            return f;
        }
    }
    return NULL;
}

static int64_t stat_mtime_ns(const struct stat *st) {
    return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

/* Records (or updates) the file of digest as st shows it. Returns its record, NULL when out of
 * memory. */
static file_t *file_note(hv_artifact_cache_t *c, const char *digest, const struct stat *st,
                         int verified) {
    file_t *f = file_find(c, digest);
    if (f == NULL) {
        f = hv_calloc(1, sizeof(*f));
        if (f == NULL) {
            return NULL; // the file is not counted until its next use: the bound is kept loosely
        }
        snprintf(f->digest, sizeof(f->digest), "%s", digest);
        f->next = c->files;
        c->files = f;
        c->n_files++;
    }
    c->bytes -= f->size;
    f->size = (uint64_t)st->st_size;
    c->bytes += f->size;
    f->ino = (uint64_t)st->st_ino;
    f->mtime_ns = stat_mtime_ns(st);
    f->verified = verified;
    if (f->mtime_ns > f->last_use) {
        f->last_use = f->mtime_ns;
    }
    if (f->last_use > c->last_use_max) {
        c->last_use_max = f->last_use;
    }
    return f;
}

/* The file of digest is gone from disk (or was never there): drop its record. */
static void file_forget(hv_artifact_cache_t *c, const char *digest) {
    for (file_t **pp = &c->files; *pp != NULL; pp = &(*pp)->next) {
        file_t *f = *pp;
        if (strcmp(f->digest, digest) == 0) {
            *pp = f->next;
            c->bytes -= f->size;
            c->n_files--;
            hv_free(f);
            return;
        }
    }
}

/* 1 when st is the file f describes (same inode, size and mtime). */
static int file_same(const file_t *f, const struct stat *st) {
    return f->size == (uint64_t)st->st_size && f->ino == (uint64_t)st->st_ino &&
           f->mtime_ns == stat_mtime_ns(st);
}

static pin_t *pin_find(hv_artifact_cache_t *c, const char *digest) {
    for (pin_t *p = c->pins; p != NULL; p = p->next) {
        if (strcmp(p->digest, digest) == 0) {
            return p;
        }
    }
    return NULL;
}

/* Adds n pins to digest. HV_ENOMEM when it cannot be recorded. */
static hv_err pin_add(hv_artifact_cache_t *c, const char *digest, uint32_t n) {
    pin_t *p = pin_find(c, digest);
    if (p == NULL) {
        p = hv_calloc(1, sizeof(*p));
        if (p == NULL) {
            return HV_ENOMEM;
        }
        snprintf(p->digest, sizeof(p->digest), "%s", digest);
        p->next = c->pins;
        c->pins = p;
    }
    p->count += n;
    return HV_OK;
}

/* 1 when the file of digest must stay: delivered and not released, or a request for it is
 * being served (a download, a hit waiting for the next tick). */
static int cache_pinned(hv_artifact_cache_t *c, const char *digest) {
    if (pin_find(c, digest) != NULL) {
        return 1;
    }
    for (entry_t *en = c->entries; en != NULL; en = en->next) {
        if (strcmp(en->digest, digest) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Deletes the least recently used files that are not pinned until the cache fits its bound
 * (cachepol decides which). Blocking: one unlink per file (local disk). */
static void cache_enforce(hv_artifact_cache_t *c) {
    if (c->max_bytes == 0 || c->bytes <= c->max_bytes) {
        c->over_warned = 0;
        return;
    }
    hv_cachepol_entry_t *e = hv_calloc(c->n_files, sizeof(*e));
    if (e == NULL) {
        HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-CACHE-OVER",
               "out of memory: the cache holds %llu bytes, over its bound of %llu, for now",
               (unsigned long long)c->bytes, (unsigned long long)c->max_bytes);
        return;
    }
    size_t n = 0;
    for (file_t *f = c->files; f != NULL && n < c->n_files; f = f->next) {
        e[n++] = (hv_cachepol_entry_t){.key = f->digest,
                                       .size = f->size,
                                       .last_use = f->last_use,
                                       .pinned = cache_pinned(c, f->digest),
                                       .ud = f};
    }
    hv_cachepol_plan_t plan = hv_cachepol_plan(e, n, c->max_bytes);
    for (size_t i = 0; i < plan.n_evict; i++) {
        const file_t *f = e[i].ud;
        char digest[65], path[PATH_MAX];
        snprintf(digest, sizeof(digest), "%s", f->digest);
        uint64_t size = f->size;
        entry_path(c, digest, path, sizeof(path));
        if (unlink(path) != 0 && errno != ENOENT) {
            // Not counted any more either way: a file that cannot be removed is the operator's.
            HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-CACHE-EVICT",
                   "cannot remove %s to keep the cache within %llu bytes: %s", path,
                   (unsigned long long)c->max_bytes, strerror(errno));
            file_forget(c, digest);
            continue;
        }
        file_forget(c, digest); // frees f
        c->evicted++;
        HV_LOG(HV_LOG_INFO, "agent", "HV-AGENT-CACHE-EVICT",
               "evicted %.12s (%llu bytes, least recently used): the cache holds %llu of %llu "
               "bytes",
               digest, (unsigned long long)size, (unsigned long long)c->bytes,
               (unsigned long long)c->max_bytes);
    }
    hv_free(e);
    if (plan.over && !c->over_warned) {
        HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-CACHE-OVER",
               "the cache holds %llu bytes, over its bound of %llu (--cache-max-mb): the rest is "
               "in use by workers being started; it shrinks once they have their copies",
               (unsigned long long)c->bytes, (unsigned long long)c->max_bytes);
    }
    c->over_warned = plan.over;
}

/* A delivery is a use: its time is now, or just after the latest use given out when the clock
 * has not moved past it (two uses in one clock tick keep their order). It becomes the file's
 * mtime, so the order survives a restart, and the file's record. A file that changed since it
 * was hashed loses its verified mark. */
static void cache_touch(hv_artifact_cache_t *c, const char *digest, const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        return;
    }
    struct stat st;
    struct timespec now;
    if (fstat(fd, &st) == 0 && clock_gettime(CLOCK_REALTIME, &now) == 0) {
        const file_t *f = file_find(c, digest);
        int verified = f != NULL && f->verified && file_same(f, &st);
        int64_t use = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
        if (use <= c->last_use_max) {
            use = c->last_use_max + 1;
        }
        struct timespec times[2] = {{.tv_sec = 0, .tv_nsec = UTIME_OMIT},
                                    {.tv_sec = use / 1000000000, .tv_nsec = use % 1000000000}};
        if (futimens(fd, times) != 0) {
            HV_LOG(HV_LOG_DEBUG, "agent", "HV-AGENT-CACHE-TOUCH", "cannot set the mtime of %s: %s",
                   path, strerror(errno));
        }
        file_t *g = fstat(fd, &st) == 0 ? file_note(c, digest, &st, verified) : NULL;
        if (g != NULL && g->last_use < use) {
            g->last_use = use; // a file system with coarser times: the order is kept here
            c->last_use_max = use;
        }
    }
    close(fd);
}

/* ---- requests ------------------------------------------------------------------------------ */

static void entry_discard_tmp(entry_t *en) {
    if (en->fd >= 0) {
        close(en->fd);
        en->fd = -1;
    }
    if (en->tmp[0] != '\0') {
        unlink(en->tmp);
        en->tmp[0] = '\0';
    }
}

/* Unlinks en from the cache, calls every waiter and frees en. */
static void entry_deliver(hv_artifact_cache_t *c, entry_t *en) {
    for (entry_t **pp = &c->entries; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == en) {
            *pp = en->next;
            break;
        }
    }
    entry_discard_tmp(en);
    char path[PATH_MAX];
    entry_path(c, en->digest, path, sizeof(path));
    if (en->rc == HV_OK) {
        // Each waiter gets a pin before any callback runs: one may release at once.
        uint32_t n = 0;
        for (waiter_t *w = en->waiters; w != NULL; w = w->next) {
            n++;
        }
        cache_touch(c, en->digest, path);
        if (pin_add(c, en->digest, n) != HV_OK) {
            en->rc = HV_ENOMEM;
            snprintf(en->detail, sizeof(en->detail), "out of memory");
        }
    }
    // Waiters were pushed at the front: reverse to serve them in arrival order.
    waiter_t *rev = NULL;
    while (en->waiters != NULL) {
        waiter_t *w = en->waiters;
        en->waiters = w->next;
        w->next = rev;
        rev = w;
    }
    while (rev != NULL) {
        waiter_t *w = rev;
        rev = w->next;
        w->cb(en->rc, en->rc == HV_OK ? path : NULL, en->rc == HV_OK ? "" : en->detail, w->ud);
        hv_free(w);
    }
    hv_free(en);
}

static void entry_fail(entry_t *en, hv_err rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void entry_fail(entry_t *en, hv_err rc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(en->detail, sizeof(en->detail), fmt, ap);
    va_end(ap);
    en->rc = rc;
    en->state = ENTRY_READY;
}

/* 1 when the cached copy of digest exists and is valid (hashing it if not known yet). A copy
 * that turns out damaged is removed. */
static int cache_has_valid(hv_artifact_cache_t *c, const char *digest, uint64_t size) {
    char path[PATH_MAX];
    entry_path(c, digest, path, sizeof(path));
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
        file_forget(c, digest);
        return 0;
    }
    if (size != 0 && (uint64_t)st.st_size != size) {
        HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-CACHE-BAD",
               "cached %s has %lld bytes, expected %llu: fetching it again", path,
               (long long)st.st_size, (unsigned long long)size);
        unlink(path);
        file_forget(c, digest);
        return 0;
    }
    const file_t *f = file_find(c, digest);
    if (f != NULL && f->verified && file_same(f, &st)) {
        return 1;
    }
    char hex[65];
    if (hv_sha256_file(path, hex, NULL) != HV_OK || strcmp(hex, digest) != 0) {
        HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-CACHE-BAD",
               "cached %s does not match its digest: fetching it again", path);
        unlink(path);
        file_forget(c, digest);
        return 0;
    }
    file_note(c, digest, &st, 1);
    if ((st.st_mode & 07777) != HV_ARTIFACT_CACHE_MODE) {
        chmod(path, HV_ARTIFACT_CACHE_MODE); // put there by hand or by an older agent
    }
    return 1;
}

/* ---- download ------------------------------------------------------------------------------- */

static hv_err fetch_start(hv_artifact_cache_t *c, entry_t *en);

static hv_err write_all(int fd, const uint8_t *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            return hv_err_from_errno(errno);
        }
        p += w;
        n -= (size_t)w;
    }
    return HV_OK;
}

static void fetch_on_msg(hv_rpc_call_t *call, const ProtobufCMessage *msg, void *ud) {
    entry_t *en = ud;
    const Hvpb__V1__ArtifactChunk *ch = (const Hvpb__V1__ArtifactChunk *)msg;
    if (en->state != ENTRY_FETCHING || en->fd < 0) {
        return;
    }
    if (en->total == 0) {
        en->total = ch->total_size;
    }
    if (en->size != 0 && ch->total_size != en->size) {
        entry_fail(en, HV_ECORRUPT, "the head has %llu bytes of %s, the order says %llu",
                   (unsigned long long)ch->total_size, en->digest, (unsigned long long)en->size);
    } else if (ch->total_size != en->total) {
        entry_fail(en, HV_EPROTO, "total_size changed from %llu to %llu mid-stream",
                   (unsigned long long)en->total, (unsigned long long)ch->total_size);
    } else if (ch->offset != en->written) {
        entry_fail(en, HV_EPROTO, "chunk at offset %llu, expected %llu",
                   (unsigned long long)ch->offset, (unsigned long long)en->written);
    } else if (ch->data.len > en->total - en->written) {
        entry_fail(en, HV_EPROTO, "chunk of %zu bytes at %llu runs past the size %llu",
                   ch->data.len, (unsigned long long)ch->offset, (unsigned long long)en->total);
    } else {
        hv_err rc = write_all(en->fd, ch->data.data, ch->data.len);
        if (rc != HV_OK) {
            entry_fail(en, rc, "write %s: %s", en->tmp, strerror(errno));
        } else {
            hv_sha256_update(&en->sha, ch->data.data, ch->data.len);
            en->written += ch->data.len;
            return;
        }
    }
    // A failed entry stays ENTRY_READY; on_done delivers it.
    hv_rpc_call_cancel(call);
}

/* The download is complete: check and publish it. */
static void fetch_finish(hv_artifact_cache_t *c, entry_t *en) {
    uint8_t d[32];
    char hex[65];
    hv_sha256_final(&en->sha, d);
    hv_sha256_hex(d, hex);
    if (strcmp(hex, en->digest) != 0) {
        entry_fail(en, HV_ECORRUPT, "digest mismatch: fetched %llu bytes with sha256 %s",
                   (unsigned long long)en->written, hex);
        return;
    }
    // No fsync: it ran on the agent's loop and, on a busy disk, held the session's heartbeats
    // for seconds (the head then declared the node dead while its workers were being placed).
    // Durability buys nothing here: a file this process did not fetch itself is checked
    // against its digest before it is used (cache_has_valid), so one torn by a crash is fetched again.
    if (fchmod(en->fd, HV_ARTIFACT_CACHE_MODE) != 0) {
        entry_fail(en, HV_EIO, "finish %s: %s", en->tmp, strerror(errno));
        return;
    }
    close(en->fd);
    en->fd = -1;
    char path[PATH_MAX];
    entry_path(c, en->digest, path, sizeof(path));
    if (rename(en->tmp, path) != 0) {
        entry_fail(en, HV_EIO, "rename %s to %s: %s", en->tmp, path, strerror(errno));
        return;
    }
    en->tmp[0] = '\0';
    struct stat st;
    if (stat(path, &st) == 0) {
        file_note(c, en->digest, &st, 1);
    }
    HV_LOG(HV_LOG_INFO, "agent", "HV-AGENT-FETCHED", "fetched %s (%llu bytes)", en->digest,
           (unsigned long long)en->written);
    en->rc = HV_OK;
    en->state = ENTRY_READY;
    cache_enforce(c); // en is still listed: its own file stays
}

static int fetch_retryable(hv_err rc) {
    return rc == HV_EUNAVAIL || rc == HV_ETIMEDOUT || rc == HV_EPEER || rc == HV_ECLOSED ||
           rc == HV_EIO;
}

static void fetch_on_done(hv_rpc_call_t *call, const hv_rpc_status_t *st, void *ud) {
    entry_t *en = ud;
    hv_artifact_cache_t *c = en->cache;
    (void)call;
    en->call = NULL;
    if (en->state == ENTRY_FETCHING) {
        if (c->stopped) {
            entry_fail(en, HV_ECANCELED, "the agent is stopping");
        } else if (st->rc == HV_OK && en->written == en->total) {
            fetch_finish(c, en);
        } else {
            hv_err rc = st->rc;
            char why[300];
            if (rc == HV_OK) {
                rc = HV_EPEER;
                snprintf(why, sizeof(why), "the stream ended at %llu of %llu bytes",
                         (unsigned long long)en->written, (unsigned long long)en->total);
            } else {
                snprintf(why, sizeof(why), "%s%s%.200s", hv_strerror(rc), st->msg[0] ? ": " : "",
                         st->msg);
            }
            if (fetch_retryable(rc) && en->attempts < HV_ARTIFACT_FETCH_ATTEMPTS) {
                HV_LOG(HV_LOG_INFO, "agent", "HV-AGENT-FETCH-RETRY",
                       "fetch %s broke at %llu bytes (%s): resuming", en->digest,
                       (unsigned long long)en->written, why);
                en->state = ENTRY_RETRY;
                en->retry_at = uv_now(c->loop) + ARTIFACT_RETRY_MS;
                cache_schedule(c, ARTIFACT_RETRY_MS);
                return;
            }
            entry_fail(en, rc, "%s", why);
        }
    }
    if (en->rc != HV_OK) {
        HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-FETCH-FAIL", "fetch %s failed: %s", en->digest,
               en->detail);
    }
    entry_deliver(c, en);
}

static hv_err fetch_start(hv_artifact_cache_t *c, entry_t *en) {
    if (en->fd < 0) {
        snprintf(en->tmp, sizeof(en->tmp), "%s/.%s.tmp.%d", c->dir, en->digest, (int)getpid());
        en->fd = open(en->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (en->fd < 0) {
            hv_err rc = hv_err_from_errno(errno);
            entry_fail(en, rc, "create %s: %s", en->tmp, strerror(errno));
            en->tmp[0] = '\0';
            return rc;
        }
        hv_sha256_init(&en->sha);
        en->written = 0;
        en->total = 0;
    }
    Hvpb__V1__FetchRequest req = HVPB__V1__FETCH_REQUEST__INIT;
    req.digest = en->digest;
    req.offset = en->written;
    req.token = c->token;
    uint64_t want = en->size != 0 ? en->size : en->total;
    uint64_t timeout = ARTIFACT_BASE_TIMEOUT_MS + want / ARTIFACT_MIN_RATE_BPMS;
    if (timeout > UINT32_MAX) {
        timeout = UINT32_MAX;
    }
    hv_rpc_client_cbs_t cbs = {.resp = &hvpb__v1__artifact_chunk__descriptor,
                               .on_msg = fetch_on_msg,
                               .on_done = fetch_on_done,
                               .ud = en};
    en->attempts++;
    hv_err rc = hv_rpc_call_start(c->eng, c->ch, "/hvpb.v1.Cluster/Fetch", HV_RPC_SERVER_STREAM,
                                  &req.base, (uint32_t)timeout, &cbs, &en->call);
    if (rc != HV_OK) {
        entry_fail(en, rc, "cannot start Fetch: %s", hv_strerror(rc));
        return rc;
    }
    en->state = ENTRY_FETCHING;
    return HV_OK;
}

static void cache_tick(uv_timer_t *t) {
    hv_artifact_cache_t *c = t->data;
    uint64_t now = uv_now(c->loop);
    uint64_t next = UINT64_MAX;
    // Delivery can run callbacks that add entries: restart the scan after each one.
    for (;;) {
        entry_t *ready = NULL;
        for (entry_t *en = c->entries; en != NULL; en = en->next) {
            if (en->state == ENTRY_RETRY && en->retry_at <= now) {
                if (c->stopped) {
                    entry_fail(en, HV_ECANCELED, "the agent is stopping");
                } else {
                    fetch_start(c, en);
                }
            }
            if (en->state == ENTRY_READY) {
                ready = en;
                break;
            }
        }
        if (ready == NULL) {
            break;
        }
        entry_deliver(c, ready);
    }
    for (entry_t *en = c->entries; en != NULL; en = en->next) {
        if (en->state == ENTRY_RETRY && en->retry_at < next) {
            next = en->retry_at;
        }
    }
    if (next != UINT64_MAX) {
        uv_timer_start(&c->timer, cache_tick, next > now ? next - now : 0, 0);
    }
}

/* ---- API ------------------------------------------------------------------------------------ */

/* 1 when name is a partial download ".<digest>.tmp.<pid>" whose process is gone (or this one,
 * which has no download yet while the cache is being created). */
static int cache_stale_tmp(const char *name) {
    if (name[0] != '.' || strlen(name) < 70 || strncmp(name + 65, ".tmp.", 5) != 0) {
        return 0;
    }
    char *end = NULL;
    long pid = strtol(name + 70, &end, 10);
    if (end == name + 70 || *end != '\0' || pid <= 0 || pid > INT_MAX) {
        return 1; // not a name this module writes: nothing can be using it
    }
    if (pid == (long)getpid()) {
        return 1;
    }
    // Another agent sharing the directory (a pid file elsewhere) may be downloading: keep its file.
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* Removes partial downloads left by killed agents, takes group and other bits off cached files
 * (a cache written by an older agent had them) and records every cached file in the index, its
 * mtime as its last use. Best effort: logs what it cannot do. */
static void cache_sweep(hv_artifact_cache_t *c) {
    const char *dir = c->dir;
    DIR *d = opendir(dir);
    if (d == NULL) {
        return;
    }
    int dfd = dirfd(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        if (cache_stale_tmp(name)) {
            if (unlinkat(dfd, name, 0) == 0) {
                HV_LOG(HV_LOG_INFO, "agent", "HV-AGENT-CACHE-SWEEP",
                       "removed the partial download %s/%s of an agent that is gone", dir, name);
            }
            continue;
        }
        struct stat st;
        if (!hv_sha256_valid_hex(name) || fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISREG(st.st_mode)) {
            continue;
        }
        file_note(c, name, &st, 0);
        if ((st.st_mode & 07777) == HV_ARTIFACT_CACHE_MODE) {
            continue;
        }
        if (fchmodat(dfd, name, HV_ARTIFACT_CACHE_MODE, 0) != 0) {
            HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-CACHE-MODE", "cannot chmod %s/%s: %s", dir, name,
                   strerror(errno));
        }
    }
    closedir(d);
}

/* Makes dir (and missing parents) and checks that it is the agent's own directory, 0700. */
static hv_err cache_open_dir(const char *dir) {
    hv_err rc = hv_mkdirs(dir, 0700);
    if (rc != HV_OK) {
        HV_LOG(HV_LOG_ERROR, "agent", "HV-AGENT-CACHE-DIR", "cannot create cache dir %s: %s", dir,
               hv_strerror(rc));
        return rc;
    }
    struct stat st;
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
        HV_LOG(HV_LOG_ERROR, "agent", "HV-AGENT-CACHE-DIR",
               "cache dir %s is not a directory of the agent's user (uid %d): refusing it", dir,
               (int)geteuid());
        return HV_EPERM;
    }
    if ((st.st_mode & 07777) != 0700 && chmod(dir, 0700) != 0) {
        rc = hv_err_from_errno(errno);
        HV_LOG(HV_LOG_ERROR, "agent", "HV-AGENT-CACHE-DIR", "cannot chmod 0700 %s: %s", dir,
               strerror(errno));
        return rc;
    }
    return HV_OK;
}

hv_err hv_artifact_cache_create(uv_loop_t *loop, hv_rpc_engine_t *e, hv_rpc_channel_t *ch,
                                const char *dir, const char *token, hv_artifact_cache_t **out) {
    hv_err rc = cache_open_dir(dir);
    if (rc != HV_OK) {
        return rc;
    }
    hv_artifact_cache_t *c = hv_calloc(1, sizeof(*c));
    if (c == NULL) {
        return HV_ENOMEM;
    }
    c->dir = hv_strdup(dir);
    c->token = hv_strdup(token != NULL ? token : "");
    if (c->dir == NULL || c->token == NULL) {
        hv_free(c->dir);
        hv_free(c->token);
        hv_free(c);
        return HV_ENOMEM;
    }
    c->loop = loop;
    c->eng = e;
    c->ch = ch;
    cache_sweep(c);
    uv_timer_init(loop, &c->timer);
    c->timer.data = c;
    *out = c;
    return HV_OK;
}

void hv_artifact_cache_set_max(hv_artifact_cache_t *c, uint64_t max_bytes) {
    c->max_bytes = max_bytes;
    c->over_warned = 0;
    cache_enforce(c);
}

void hv_artifact_release(hv_artifact_cache_t *c, const char *digest) {
    pin_t *p = NULL;
    pin_t **pp;
    for (pp = &c->pins; *pp != NULL; pp = &(*pp)->next) {
        if (strcmp((*pp)->digest, digest) == 0) {
            p = *pp;
            break;
        }
    }
    if (p == NULL) {
        HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-CACHE-PIN",
               "release of %.64s, which no delivery pinned: ignored (a bug in the agent)", digest);
        return;
    }
    if (--p->count > 0) {
        return;
    }
    *pp = p->next;
    hv_free(p);
    cache_enforce(c);
}

void hv_artifact_cache_usage(const hv_artifact_cache_t *c, hv_artifact_usage_t *out) {
    memset(out, 0, sizeof(*out));
    out->bytes = c->bytes;
    out->max_bytes = c->max_bytes;
    out->files = c->n_files;
    out->evicted = c->evicted;
    for (const pin_t *p = c->pins; p != NULL; p = p->next) {
        out->pinned += p->count;
    }
}

hv_err hv_artifact_get(hv_artifact_cache_t *c, const char *digest, uint64_t size,
                       hv_artifact_done_cb cb, void *ud) {
    if (c->stopped) {
        return HV_ECLOSED;
    }
    waiter_t *w = hv_calloc(1, sizeof(*w));
    if (w == NULL) {
        return HV_ENOMEM;
    }
    w->cb = cb;
    w->ud = ud;
    int valid = digest != NULL && hv_sha256_valid_hex(digest);
    if (valid) {
        for (entry_t *en = c->entries; en != NULL; en = en->next) {
            if (strcmp(en->digest, digest) == 0 && en->state != ENTRY_READY) {
                w->next = en->waiters;
                en->waiters = w;
                return HV_OK;
            }
        }
    }
    entry_t *en = hv_calloc(1, sizeof(*en));
    if (en == NULL) {
        hv_free(w);
        return HV_ENOMEM;
    }
    en->cache = c;
    en->fd = -1;
    en->size = size;
    en->waiters = w;
    snprintf(en->digest, sizeof(en->digest), "%s", valid ? digest : "");
    en->next = c->entries;
    c->entries = en;
    if (!valid) {
        entry_fail(en, HV_EINVAL, "bad digest \"%.70s\": want 64 lowercase hex characters",
                   digest != NULL ? digest : "");
    } else if (cache_has_valid(c, digest, size)) {
        en->rc = HV_OK;
        en->state = ENTRY_READY;
    } else if (c->eng == NULL || c->ch == NULL) {
        entry_fail(en, HV_ENOTFOUND, "%s is not cached and there is no head to fetch it from",
                   digest);
    } else if (fetch_start(c, en) == HV_OK) {
        return HV_OK;
    }
    cache_schedule(c, 0);
    return HV_OK;
}

static void put_cancel_all(hv_artifact_cache_t *c);

void hv_artifact_cache_stop(hv_artifact_cache_t *c) {
    if (c == NULL || c->stopped) {
        return;
    }
    c->stopped = 1;
    put_cancel_all(c);
    for (entry_t *en = c->entries; en != NULL; en = en->next) {
        if (en->state == ENTRY_FETCHING && en->call != NULL) {
            hv_rpc_call_cancel(en->call);
        } else if (en->state != ENTRY_FETCHING) {
            entry_fail(en, HV_ECANCELED, "the agent is stopping");
        }
    }
    for (;;) {
        entry_t *ready = NULL;
        for (entry_t *en = c->entries; en != NULL && ready == NULL; en = en->next) {
            if (en->state == ENTRY_READY) {
                ready = en;
            }
        }
        if (ready == NULL) {
            break;
        }
        entry_deliver(c, ready);
    }
    uv_timer_stop(&c->timer);
}

static void cache_closed_cb(uv_handle_t *h) {
    hv_artifact_cache_t *c = h->data;
    while (c->files != NULL) {
        file_t *f = c->files;
        c->files = f->next;
        hv_free(f);
    }
    while (c->pins != NULL) {
        pin_t *p = c->pins;
        c->pins = p->next;
        hv_free(p);
    }
    hv_free(c->dir);
    hv_free(c->token);
    hv_free(c);
}

void hv_artifact_cache_destroy(hv_artifact_cache_t *c) {
    if (c == NULL) {
        return;
    }
    hv_artifact_cache_stop(c);
    if (c->entries != NULL || c->puts != NULL) {
        // Only downloads whose rpc call never ended are left; their on_done would touch c.
        HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-CACHE-LEAK",
               "artifact cache destroyed with downloads still in flight: leaking it");
        return;
    }
    uv_close((uv_handle_t *)&c->timer, cache_closed_cb);
}

/* ---- uploads (an actor's saved state) -------------------------------------------------------- */

#define PUT_CHUNK (1u << 20) /* bytes per UploadState call (the head's chunk limit) */

typedef struct put_s {
    hv_artifact_cache_t *cache;
    int fd;          /* the file, open for reading */
    uint64_t size;   /* its size */
    uint64_t offset; /* bytes the head holds */
    int complete;    /* the head said the artifact is whole */
    char digest[65];
    uint8_t *buf;        /* one chunk (owned) */
    hv_rpc_call_t *call; /* the chunk in flight; NULL between chunks */
    hv_artifact_put_cb cb;
    void *ud;
    struct put_s *next;
} put_t;

static void put_end(put_t *p, hv_err rc, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static void put_end(put_t *p, hv_err rc, const char *fmt, ...) {
    hv_artifact_cache_t *c = p->cache;
    char detail[300] = "";
    if (fmt != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(detail, sizeof(detail), fmt, ap);
        va_end(ap);
    }
    for (put_t **pp = &c->puts; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    close(p->fd);
    hv_free(p->buf);
    p->cb(rc, rc == HV_OK ? p->digest : NULL, detail, p->ud);
    hv_free(p);
}

static hv_err put_next(put_t *p);

static void put_on_msg(hv_rpc_call_t *call, const ProtobufCMessage *m, void *ud) {
    put_t *p = ud;
    const Hvpb__V1__UploadReply *r = (const Hvpb__V1__UploadReply *)m;
    (void)call;
    p->offset = r->received;
    p->complete = r->complete;
}

static void put_on_done(hv_rpc_call_t *call, const hv_rpc_status_t *st, void *ud) {
    put_t *p = ud;
    (void)call;
    p->call = NULL;
    if (p->cache->stopped) {
        put_end(p, HV_ECANCELED, "the agent is stopping");
    } else if (st->rc != HV_OK) {
        put_end(p, st->rc, "%s%s%.200s", hv_strerror(st->rc), st->msg[0] ? ": " : "", st->msg);
    } else if (p->complete) {
        put_end(p, HV_OK, NULL);
    } else if (p->offset > p->size) {
        put_end(p, HV_EPROTO, "the head holds %llu bytes of %llu", (unsigned long long)p->offset,
                (unsigned long long)p->size);
    } else {
        hv_err rc = put_next(p);
        if (rc != HV_OK) {
            put_end(p, rc, "cannot send the next chunk: %s", hv_strerror(rc));
        }
    }
}

/* Sends the chunk at p->offset (the last one says so). */
static hv_err put_next(put_t *p) {
    uint64_t want = p->size - p->offset < PUT_CHUNK ? p->size - p->offset : PUT_CHUNK;
    size_t got = 0;
    while (got < want) {
        ssize_t r = pread(p->fd, p->buf + got, (size_t)want - got, (off_t)(p->offset + got));
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            return r < 0 ? hv_err_from_errno(errno) : HV_EIO;
        }
        got += (size_t)r;
    }
    Hvpb__V1__UploadChunk req = HVPB__V1__UPLOAD_CHUNK__INIT;
    req.digest = p->digest;
    req.total_size = p->size;
    req.offset = p->offset;
    req.data.data = p->buf;
    req.data.len = got;
    req.last = p->offset + got == p->size;
    hv_rpc_client_cbs_t cbs = {.resp = &hvpb__v1__upload_reply__descriptor,
                               .on_msg = put_on_msg,
                               .on_done = put_on_done,
                               .ud = p};
    return hv_rpc_call_start(p->cache->eng, p->cache->ch, "/hvpb.v1.Cluster/UploadState",
                             HV_RPC_UNARY, &req.base, ARTIFACT_BASE_TIMEOUT_MS, &cbs, &p->call);
}

hv_err hv_artifact_put(hv_artifact_cache_t *c, const char *path, hv_artifact_put_cb cb, void *ud,
                       char *err, size_t errlen) {
    if (c->stopped || c->eng == NULL || c->ch == NULL) {
        snprintf(err, errlen, "the agent is stopping");
        return HV_ECLOSED;
    }
    put_t *p = hv_calloc(1, sizeof(*p));
    uint8_t *buf = hv_malloc(PUT_CHUNK);
    if (p == NULL || buf == NULL) {
        hv_free(p);
        hv_free(buf);
        snprintf(err, errlen, "out of memory");
        return HV_ENOMEM;
    }
    p->cache = c;
    p->buf = buf;
    p->cb = cb;
    p->ud = ud;
    p->fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat sb;
    hv_err rc = HV_OK;
    if (p->fd < 0 || fstat(p->fd, &sb) != 0) {
        rc = hv_err_from_errno(errno);
        snprintf(err, errlen, "cannot open %.300s: %s", path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(sb.st_mode)) {
        rc = HV_EINVAL;
        snprintf(err, errlen, "%.300s is not a regular file", path);
        goto fail;
    }
    p->size = (uint64_t)sb.st_size;
    /* The digest first (blocking file I/O on the loop: local disk, as cache_verify does). */
    hv_sha256_t h;
    hv_sha256_init(&h);
    for (uint64_t off = 0; off < p->size;) {
        ssize_t r = pread(p->fd, buf, PUT_CHUNK, (off_t)off);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            rc = HV_EIO;
            snprintf(err, errlen, "cannot read %.300s: %s", path,
                     r < 0 ? strerror(errno) : "it shrank");
            goto fail;
        }
        hv_sha256_update(&h, buf, (size_t)r);
        off += (uint64_t)r;
    }
    uint8_t raw[32];
    hv_sha256_final(&h, raw);
    hv_sha256_hex(raw, p->digest);
    if ((rc = put_next(p)) != HV_OK) {
        snprintf(err, errlen, "cannot start the upload: %s", hv_strerror(rc));
        goto fail;
    }
    p->next = c->puts;
    c->puts = p;
    return HV_OK;
fail:
    if (p->fd >= 0) {
        close(p->fd);
    }
    hv_free(buf);
    hv_free(p);
    return rc;
}

static void put_cancel_all(hv_artifact_cache_t *c) {
    for (put_t *p = c->puts; p != NULL; p = p->next) {
        if (p->call != NULL) {
            hv_rpc_call_cancel(p->call);
        }
    }
}

/* ---- placing files for workers -------------------------------------------------------------- */

/* Copies the rest of in to out in the kernel (a reflink where the file system shares blocks);
 * falls back to read and write where copy_file_range cannot (another file system on an old
 * kernel, a file system without it). */
static hv_err place_copy_data(int in, int out, const char *src, const char *dst, char *err,
                              size_t errlen) {
    for (;;) {
        ssize_t n = copy_file_range(in, NULL, out, NULL, 1u << 30, 0);
        if (n > 0) {
            continue;
        }
        if (n == 0) {
            return HV_OK;
        }
        if (errno == EINTR) {
            continue;
        }
        if (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP) {
            break; // nothing was copied by this call: go on with plain reads from here
        }
        snprintf(err, errlen, "copy %s to %s: %s", src, dst, strerror(errno));
        return hv_err_from_errno(errno);
    }
    char buf[64 * 1024];
    for (;;) {
        ssize_t n = read(in, buf, sizeof(buf));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            snprintf(err, errlen, "read %s: %s", src, strerror(errno));
            return hv_err_from_errno(errno);
        }
        if (n == 0) {
            return HV_OK;
        }
        hv_err rc = write_all(out, (const uint8_t *)buf, (size_t)n);
        if (rc != HV_OK) {
            snprintf(err, errlen, "write %s: %s", dst, strerror(errno));
            return rc;
        }
    }
}

hv_err hv_artifact_place(const char *src, const char *dst, unsigned mode, long uid, long gid,
                         char *err, size_t errlen) {
    char dummy[8];
    if (err == NULL || errlen == 0) {
        err = dummy;
        errlen = sizeof(dummy);
    }
    err[0] = '\0';
    hv_err rc = HV_OK;
    int in = -1, out = -1;
    if (unlink(dst) != 0 && errno != ENOENT) {
        snprintf(err, errlen, "remove %s: %s", dst, strerror(errno));
        return hv_err_from_errno(errno);
    }
    in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        rc = hv_err_from_errno(errno);
        snprintf(err, errlen, "open %s: %s", src, strerror(errno));
        goto out;
    }
    // O_EXCL with O_NOFOLLOW: a name that reappeared since the unlink is an error, not a target.
    out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0) {
        rc = hv_err_from_errno(errno);
        snprintf(err, errlen, "create %s: %s", dst, strerror(errno));
        goto out;
    }
    if ((rc = place_copy_data(in, out, src, dst, err, errlen)) != HV_OK) {
        goto out;
    }
    // Owner first, then the mode: the mode must not be widened while root still owns the file.
    if ((uid >= 0 || gid >= 0) && fchown(out, (uid_t)uid, (gid_t)gid) != 0) {
        rc = hv_err_from_errno(errno);
        snprintf(err, errlen, "give %s to uid %ld: %s", dst, uid, strerror(errno));
        goto out;
    }
    if (fchmod(out, mode & HV_ARTIFACT_PLACE_MODE_MASK) != 0) {
        rc = hv_err_from_errno(errno);
        snprintf(err, errlen, "chmod %s: %s", dst, strerror(errno));
        goto out;
    }
out:
    if (in >= 0) {
        close(in);
    }
    if (out >= 0) {
        close(out);
        if (rc != HV_OK) {
            unlink(dst);
        }
    }
    return rc;
}
