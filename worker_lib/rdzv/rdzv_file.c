/*
 * rdzv_file: a rendezvous through a shared directory, for multi-process runs without a head
 * (the standalone benchmark launcher, process-based fault tests, static clusters with a shared
 * file system). Ranks and size are given; each worker publishes "addr\nhost\n" as
 * <dir>/g<generation>.r<rank> (written to a temporary name, then renamed, so readers never see
 * half a file) and waits until all size files of that generation exist. The KV store is files
 * named kv.<hex of key>. Not for elastic jobs: membership is fixed, so it has no push watcher
 * (watch is NULL) and hv_elastic_run returns failures as they are.
 */
#include "rdzv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "mem.h"
#include "util.h"

#define FILE_POLL_MS 2

typedef struct file_client_s {
    char *dir; // owned
    int rank;
    int size;
} file_client_t;

static void sleep_ms(int ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static hv_err file_write(const char *dir, const char *name, const void *data, size_t len) {
    char tmp[4096], fin[4096];
    snprintf(tmp, sizeof(tmp), "%s/.%s.%d.tmp", dir, name, (int)getpid());
    snprintf(fin, sizeof(fin), "%s/%s", dir, name);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        HV_LOG(HV_LOG_ERROR, "rdzv", "HV-RDZV-FILE", "cannot create %s: %s", tmp, strerror(errno));
        return HV_EIO;
    }
    ssize_t w = write(fd, data, len);
    close(fd);
    if (w != (ssize_t)len || rename(tmp, fin) != 0) {
        HV_LOG(HV_LOG_ERROR, "rdzv", "HV-RDZV-FILE", "cannot write %s: %s", fin, strerror(errno));
        unlink(tmp);
        return HV_EIO;
    }
    return HV_OK;
}

/* Reads dir/name; HV_ENOTFOUND when it does not exist (yet). */
static hv_err file_read(const char *dir, const char *name, char **data, size_t *len) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (access(path, F_OK) != 0) {
        return HV_ENOTFOUND;
    }
    return hv_read_file(path, 1u << 20, data, len);
}

static hv_err file_join(void *ctx, const char *my_addr, const char *my_host, uint32_t last_gen,
                        uint32_t timeout_ms, hv__rdzv_assignment_t *out) {
    file_client_t *c = ctx;
    uint32_t gen = last_gen + 1;
    char name[64], body[HV_RDZV_ADDR_MAX + HV_RDZV_HOST_MAX + 4];
    snprintf(name, sizeof(name), "g%u.r%d", gen, c->rank);
    int blen = snprintf(body, sizeof(body), "%s\n%s\n", my_addr, my_host);
    hv_err rc = file_write(c->dir, name, body, (size_t)blen);
    if (rc != HV_OK) {
        return rc;
    }
    hv__rdzv_assignment_t a = {.generation = gen, .rank = c->rank, .size = c->size};
    a.peers = hv_calloc((size_t)c->size, sizeof(hv__rdzv_peer_t));
    if (a.peers == NULL) {
        return HV_ENOMEM;
    }
    uint64_t deadline = hv_now_ms() + timeout_ms;
    for (int r = 0; r < c->size;) {
        snprintf(name, sizeof(name), "g%u.r%d", gen, r);
        char *data = NULL;
        size_t len = 0;
        rc = file_read(c->dir, name, &data, &len);
        if (rc == HV_ENOTFOUND) {
            if (hv_now_ms() >= deadline) {
                HV_LOG(HV_LOG_ERROR, "rdzv", "HV-RDZV-TIMEOUT",
                       "rank %d: rank %d did not join generation %u in %s within %u ms", c->rank, r,
                       gen, c->dir, timeout_ms);
                rc = HV_ETIMEDOUT;
                goto fail;
            }
            sleep_ms(FILE_POLL_MS);
            continue;
        }
        if (rc != HV_OK) {
            goto fail;
        }
        char *nl = strchr(data, '\n');
        char *nl2 = nl ? strchr(nl + 1, '\n') : NULL;
        if (nl == NULL || nl2 == NULL) {
            HV_LOG(HV_LOG_ERROR, "rdzv", "HV-RDZV-FILE", "%s/%s: malformed (want addr and host)",
                   c->dir, name);
            hv_free(data);
            rc = HV_EPROTO;
            goto fail;
        }
        *nl = *nl2 = '\0';
        a.peers[r].rank = r;
        a.peers[r].worker_id = (uint64_t)r;
        snprintf(a.peers[r].addr, sizeof(a.peers[r].addr), "%s", data);
        snprintf(a.peers[r].host, sizeof(a.peers[r].host), "%s", nl + 1);
        hv_free(data);
        r++;
    }
    // The world id only has to differ between unrelated worlds sharing hosts: hash the dir.
    a.world_id = 1469598103934665603ull;
    for (const char *p = c->dir; *p; p++) {
        a.world_id = (a.world_id ^ (unsigned char)*p) * 1099511628211ull;
    }
    hv__rdzv_fill_topology(&a);
    *out = a;
    return HV_OK;
fail:
    hv_free(a.peers);
    return rc;
}

static hv_err file_done(void *ctx, uint32_t generation) {
    (void)generation; // membership is fixed: there is only one round per hv_init
    file_client_t *c = ctx;
    char name[64];
    snprintf(name, sizeof(name), "done.r%d", c->rank);
    return file_write(c->dir, name, "done\n", 5);
}

static void key_name(const char *key, char *out, size_t cap) {
    size_t k = (size_t)snprintf(out, cap, "kv.");
    for (const unsigned char *p = (const unsigned char *)key; *p && k + 3 < cap; p++) {
        k += (size_t)snprintf(out + k, cap - k, "%02x", *p);
    }
}

static hv_err file_kv_put(void *ctx, const char *key, const void *value, size_t len) {
    file_client_t *c = ctx;
    char name[600];
    key_name(key, name, sizeof(name));
    return file_write(c->dir, name, value, len);
}

static hv_err file_kv_get(void *ctx, const char *key, uint32_t wait_ms, void **value, size_t *len) {
    file_client_t *c = ctx;
    char name[600];
    key_name(key, name, sizeof(name));
    uint64_t deadline = hv_now_ms() + wait_ms;
    for (;;) {
        char *data = NULL;
        hv_err rc = file_read(c->dir, name, &data, len);
        if (rc == HV_OK) {
            *value = data;
            return HV_OK;
        }
        if (rc != HV_ENOTFOUND || hv_now_ms() >= deadline) {
            return rc;
        }
        sleep_ms(FILE_POLL_MS);
    }
}

static void file_destroy(void *ctx) {
    file_client_t *c = ctx;
    hv_free(c->dir);
    hv_free(c);
}

static const hv__rdzv_ops_t file_ops = {
    .name = "file",
    .join = file_join,
    .done = file_done,
    .kv_put = file_kv_put,
    .kv_get = file_kv_get,
    .destroy = file_destroy,
};

hv_err hv__rdzv_file_client(const char *dir, int rank, int size, hv__rdzv_t *out) {
    if (dir == NULL || size < 1 || rank < 0 || rank >= size) {
        return HV_EINVAL;
    }
    file_client_t *c = hv_calloc(1, sizeof(*c));
    if (c == NULL) {
        return HV_ENOMEM;
    }
    c->dir = hv_strdup(dir);
    if (c->dir == NULL) {
        hv_free(c);
        return HV_ENOMEM;
    }
    c->rank = rank;
    c->size = size;
    out->ops = &file_ops;
    out->ctx = c;
    return HV_OK;
}
