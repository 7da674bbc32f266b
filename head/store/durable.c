/* durable: see durable.h. */
#include "durable.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "copies.h"
#include "log.h"
#include "mem.h"
#include "sha256.h"
#include "util.h"

extern char **environ;

#define DURABLE_CMD_MAX 8192
#define DURABLE_BUF ((size_t)1 << 20)
#define DURABLE_OUT_TAIL 300 /* bytes of a failed command's output quoted */

typedef struct dop_s {
    hv_durable_op_t op;
    struct dop_s *next;
} dop_t;

struct hv_durable_s {
    char *dir, *upload, *download, *remove;
    uint32_t timeout_ms;
    char what[600]; /* hv_durable_describe */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_int stop; /* destroy was called: a running command is killed */
    /* under mu */
    int running;  /* an operation is on the thread */
    dop_t *queue; /* to run, oldest first */
    dop_t *done;  /* finished, oldest first */
};

static char *dup_opt(const char *s) { return s != NULL ? hv_strdup(s) : NULL; }

static void list_append(dop_t **head, dop_t *o) {
    o->next = NULL;
    while (*head != NULL) {
        head = &(*head)->next;
    }
    *head = o;
}

/* ---- files ---------------------------------------------------------------------------------- */

static void sync_dir_of(const char *path) {
    char d[600];
    snprintf(d, sizeof(d), "%s", path);
    char *slash = strrchr(d, '/');
    if (slash == NULL) {
        return;
    }
    *slash = '\0';
    int fd = open(d[0] ? d : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

/* Reads in (src) to its end, hashing it, and writes each block to out (dst) unless out < 0: the
 * digest in hex into hex, the bytes into *bytes. */
static hv_err hash_stream(int in, const char *src, int out, const char *dst, char hex[65],
                          uint64_t *bytes, char *err, size_t errlen) {
    uint8_t *buf = hv_malloc(DURABLE_BUF);
    if (buf == NULL) {
        snprintf(err, errlen, "cannot %s %s: out of memory", out >= 0 ? "write" : "read",
                 out >= 0 ? dst : src);
        return HV_ENOMEM;
    }
    hv_err rc = HV_OK;
    hv_sha256_t sha;
    hv_sha256_init(&sha);
    *bytes = 0;
    for (;;) {
        ssize_t r = read(in, buf, DURABLE_BUF);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            snprintf(err, errlen, "cannot read %s: %s", src, strerror(errno));
            rc = HV_EIO;
            break;
        }
        if (r == 0) {
            break;
        }
        hv_sha256_update(&sha, buf, (size_t)r);
        for (ssize_t o = 0; out >= 0 && o < r;) {
            ssize_t w = write(out, buf + o, (size_t)(r - o));
            if (w < 0 && errno == EINTR) {
                continue;
            }
            if (w <= 0) {
                snprintf(err, errlen, "cannot write %s: %s", dst, strerror(errno));
                rc = HV_EIO;
                break;
            }
            o += w;
        }
        if (rc != HV_OK) {
            break;
        }
        *bytes += (uint64_t)r;
    }
    if (rc == HV_OK) {
        uint8_t dg[32];
        hv_sha256_final(&sha, dg);
        hv_sha256_hex(dg, hex);
    }
    hv_free(buf);
    return rc;
}

/* Copies src into dst_part (hashing), syncs it; the digest in hex into hex. */
static hv_err copy_file(const char *src, const char *dst_part, char hex[65], uint64_t *bytes,
                        char *err, size_t errlen) {
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        snprintf(err, errlen, "cannot read %s: %s", src, strerror(errno));
        return errno == ENOENT ? HV_ENOTFOUND : HV_EIO;
    }
    int outfd = open(dst_part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (outfd < 0) {
        snprintf(err, errlen, "cannot write %s: %s", dst_part, strerror(errno));
        close(in);
        return HV_EIO;
    }
    hv_err rc = hash_stream(in, src, outfd, dst_part, hex, bytes, err, errlen);
    if (rc == HV_OK && fsync(outfd) != 0) {
        snprintf(err, errlen, "cannot sync %s: %s", dst_part, strerror(errno));
        rc = HV_EIO;
    }
    close(outfd);
    close(in);
    return rc;
}

/* The digest and size of a file. */
static hv_err digest_file(const char *path, char hex[65], uint64_t *bytes, char *err,
                          size_t errlen) {
    int in = open(path, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return HV_EIO;
    }
    hv_err rc = hash_stream(in, path, -1, NULL, hex, bytes, err, errlen);
    close(in);
    return rc;
}

/* ---- commands ------------------------------------------------------------------------------- */

/* Runs cmd under /bin/sh in its own process group, for at most timeout_ms (then the group is
 * killed). HV_OK when it exits 0; else err says how it ended, with the tail of its output. */
static hv_err run_cmd(const char *cmd, uint32_t timeout_ms, atomic_int *stop, char *err,
                      size_t errlen) {
    int out = memfd_create("hv-durable", MFD_CLOEXEC);
    if (out < 0) {
        snprintf(err, errlen, "cannot run the command: %s", strerror(errno));
        return HV_EIO;
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out, 1);
    posix_spawn_file_actions_adddup2(&fa, out, 2);
    posix_spawnattr_init(&at);
    posix_spawnattr_setpgroup(&at, 0);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
    char *argv[] = {"/bin/sh", "-c", (char *)cmd, NULL};
    pid_t pid;
    int src = posix_spawn(&pid, "/bin/sh", &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (src != 0) {
        close(out);
        snprintf(err, errlen, "cannot run /bin/sh: %s", strerror(src));
        return HV_EIO;
    }
    uint64_t deadline = hv_now_ms() + timeout_ms;
    int status = 0, timed_out = 0, stopped = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid || (w < 0 && errno != EINTR)) {
            break;
        }
        stopped = atomic_load(stop);
        if (stopped || hv_now_ms() >= deadline) {
            timed_out = 1;
            kill(-pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
            }
            break;
        }
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    /* The tail of what it printed, on one line. */
    char tail[DURABLE_OUT_TAIL + 1] = "";
    off_t end = lseek(out, 0, SEEK_END);
    off_t from = end > DURABLE_OUT_TAIL ? end - DURABLE_OUT_TAIL : 0;
    ssize_t n = pread(out, tail, DURABLE_OUT_TAIL, from);
    tail[n > 0 ? n : 0] = '\0';
    for (char *c = tail; *c != '\0'; c++) {
        if (*c == '\n' || *c == '\r') {
            *c = ' ';
        }
    }
    close(out);
    if (stopped) {
        snprintf(err, errlen, "the head stopped: the command was killed");
        return HV_ECANCELED;
    }
    if (timed_out) {
        snprintf(err, errlen, "the command did not finish within %u s and was killed%s%s",
                 timeout_ms / 1000, tail[0] ? ": " : "", tail);
        return HV_ETIMEDOUT;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        return HV_OK;
    }
    if (WIFSIGNALED(status)) {
        snprintf(err, errlen, "the command was killed by signal %d%s%s", WTERMSIG(status),
                 tail[0] ? ": " : "", tail);
    } else {
        snprintf(err, errlen, "the command exited with status %d%s%s", WEXITSTATUS(status),
                 tail[0] ? ": " : "", tail);
    }
    return HV_EIO;
}

static hv_err expand_run(hv_durable_t *d, const char *tmpl, const hv_durable_op_t *op,
                         const char *file, char *err, size_t errlen) {
    char job[24];
    snprintf(job, sizeof(job), "%llu", (unsigned long long)op->job_id);
    hv_durable_vars_t v = {.file = file, .key = op->key, .job = job, .sha256 = op->sha256};
    char *cmd = hv_malloc(DURABLE_CMD_MAX);
    if (cmd == NULL) {
        return HV_ENOMEM;
    }
    hv_err rc = hv_durable_expand(tmpl, &v, cmd, DURABLE_CMD_MAX, err, errlen);
    if (rc == HV_OK) {
        rc = run_cmd(cmd, d->timeout_ms, &d->stop, err, errlen);
    }
    hv_free(cmd);
    return rc;
}

/* ---- operations ----------------------------------------------------------------------------- */

static hv_err op_write(hv_durable_t *d, hv_durable_op_t *op) {
    char part[900], hex[65];
    uint64_t bytes = 0;
    hv_err rc;
    if (d->dir != NULL) {
        char final[900];
        snprintf(part, sizeof(part), "%s/%s.part", d->dir, op->key);
        snprintf(final, sizeof(final), "%s/%s", d->dir, op->key);
        rc = copy_file(op->file, part, hex, &bytes, op->err, sizeof(op->err));
        if (rc == HV_OK && (bytes != op->size || strcmp(hex, op->sha256) != 0)) {
            snprintf(op->err, sizeof(op->err),
                     "the head's copy %s changed: %llu bytes with digest %s, %llu and %s stored",
                     op->file, (unsigned long long)bytes, hex, (unsigned long long)op->size,
                     op->sha256);
            rc = HV_ECORRUPT;
        }
        if (rc == HV_OK && rename(part, final) != 0) {
            snprintf(op->err, sizeof(op->err), "cannot publish %s: %s", final, strerror(errno));
            rc = HV_EIO;
        }
        if (rc != HV_OK) {
            unlink(part);
            return rc;
        }
        sync_dir_of(final);
        return HV_OK;
    }
    /* The command reads a name of its own (a hard link), so that the head replacing its copy
     * meanwhile (the old file is removed) does not pull the file from under it. A .part name:
     * a head that stops in the middle removes it at its next start (statecopy.c). */
    snprintf(part, sizeof(part), "%s.up.part", op->file);
    unlink(part);
    if (link(op->file, part) != 0) {
        snprintf(op->err, sizeof(op->err), "cannot read %s: %s", op->file, strerror(errno));
        return errno == ENOENT ? HV_ENOTFOUND : HV_EIO;
    }
    rc = expand_run(d, d->upload, op, part, op->err, sizeof(op->err));
    unlink(part);
    return rc;
}

static hv_err op_read(hv_durable_t *d, hv_durable_op_t *op) {
    char part[900], hex[65] = "";
    uint64_t bytes = 0;
    hv_err rc;
    snprintf(part, sizeof(part), "%s.part", op->file);
    unlink(part);
    /* The head's states directory itself may be what was lost. */
    char parent[sizeof(op->file)];
    snprintf(parent, sizeof(parent), "%s", op->file);
    char *slash = strrchr(parent, '/');
    if (slash != NULL && slash != parent) {
        *slash = '\0';
        if (hv_mkdirs(parent, 0700) != HV_OK) {
            snprintf(op->err, sizeof(op->err), "cannot create %s: %s", parent, strerror(errno));
            return HV_EIO;
        }
    }
    if (d->dir != NULL) {
        char src[900];
        snprintf(src, sizeof(src), "%s/%s", d->dir, op->key);
        rc = copy_file(src, part, hex, &bytes, op->err, sizeof(op->err));
    } else {
        rc = expand_run(d, d->download, op, part, op->err, sizeof(op->err));
        if (rc == HV_OK) {
            rc = digest_file(part, hex, &bytes, op->err, sizeof(op->err));
        }
        if (rc == HV_OK) {
            int fd = open(part, O_RDONLY | O_CLOEXEC);
            if (fd < 0 || fsync(fd) != 0) {
                snprintf(op->err, sizeof(op->err), "cannot sync %s: %s", part, strerror(errno));
                rc = HV_EIO;
            }
            if (fd >= 0) {
                close(fd);
            }
        }
    }
    if (rc == HV_OK && (bytes != op->size || strcmp(hex, op->sha256) != 0)) {
        snprintf(op->err, sizeof(op->err),
                 "the durable copy %s is %llu bytes with digest %s; %llu bytes and %s were stored",
                 op->key, (unsigned long long)bytes, hex, (unsigned long long)op->size, op->sha256);
        rc = HV_ECORRUPT;
    }
    if (rc == HV_OK && rename(part, op->file) != 0) {
        snprintf(op->err, sizeof(op->err), "cannot publish %s: %s", op->file, strerror(errno));
        rc = HV_EIO;
    }
    if (rc != HV_OK) {
        unlink(part);
        return rc;
    }
    sync_dir_of(op->file);
    return HV_OK;
}

static hv_err op_drop(hv_durable_t *d, hv_durable_op_t *op) {
    if (d->dir != NULL) {
        char path[900];
        snprintf(path, sizeof(path), "%s/%s", d->dir, op->key);
        if (unlink(path) != 0 && errno != ENOENT) {
            snprintf(op->err, sizeof(op->err), "cannot remove %s: %s", path, strerror(errno));
            return HV_EIO;
        }
        return HV_OK;
    }
    if (d->remove == NULL) {
        return HV_OK; /* left to the store's own expiry (documented) */
    }
    return expand_run(d, d->remove, op, "", op->err, sizeof(op->err));
}

static void *durable_main(void *arg) {
    hv_durable_t *d = arg;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (!atomic_load(&d->stop) && d->queue == NULL) {
            pthread_cond_wait(&d->cv, &d->mu);
        }
        if (atomic_load(&d->stop)) {
            break;
        }
        dop_t *o = d->queue;
        d->queue = o->next;
        d->running = 1;
        pthread_mutex_unlock(&d->mu);
        uint64_t t0 = hv_now_ms();
        o->op.err[0] = '\0';
        switch (o->op.kind) {
        case HV_DURABLE_WRITE:
            o->op.rc = op_write(d, &o->op);
            break;
        case HV_DURABLE_READ:
            o->op.rc = op_read(d, &o->op);
            break;
        case HV_DURABLE_DROP:
            o->op.rc = op_drop(d, &o->op);
            break;
        default:
            o->op.rc = HV_EINVAL;
            break;
        }
        o->op.took_ms = hv_now_ms() - t0;
        pthread_mutex_lock(&d->mu);
        d->running = 0;
        list_append(&d->done, o);
        pthread_cond_broadcast(&d->cv);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

static void free_list(dop_t *o) {
    while (o != NULL) {
        dop_t *n = o->next;
        hv_free(o);
        o = n;
    }
}

static void durable_free(hv_durable_t *d) {
    hv_free(d->dir);
    hv_free(d->upload);
    hv_free(d->download);
    hv_free(d->remove);
    hv_free(d);
}

hv_err hv_durable_create(const hv_durable_opts_t *o, hv_durable_t **out, char *err, size_t errlen) {
    hv_durable_t *d = hv_calloc(1, sizeof(*d));
    if (d == NULL) {
        return HV_ENOMEM;
    }
    d->dir = dup_opt(o->dir);
    d->upload = dup_opt(o->upload);
    d->download = dup_opt(o->download);
    d->remove = dup_opt(o->remove);
    d->timeout_ms = o->timeout_ms ? o->timeout_ms : 600000;
    if ((o->dir != NULL && d->dir == NULL) || (o->upload != NULL && d->upload == NULL) ||
        (o->download != NULL && d->download == NULL) || (o->remove != NULL && d->remove == NULL)) {
        durable_free(d);
        return HV_ENOMEM;
    }
    if (d->dir != NULL) {
        snprintf(d->what, sizeof(d->what), "the directory %s", d->dir);
        hv_err rc = hv_mkdirs(d->dir, 0700);
        if (rc != HV_OK) {
            snprintf(err, errlen, "cannot create the durable copies' directory %s: %s", d->dir,
                     hv_strerror(rc));
            durable_free(d);
            return HV_EIO;
        }
    } else {
        snprintf(d->what, sizeof(d->what), "the object store (upload and download commands)");
    }
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    if (pthread_create(&d->thread, NULL, durable_main, d) != 0) {
        pthread_cond_destroy(&d->cv);
        pthread_mutex_destroy(&d->mu);
        durable_free(d);
        return HV_EINTERNAL;
    }
    *out = d;
    return HV_OK;
}

const char *hv_durable_describe(const hv_durable_t *d) { return d->what; }

hv_err hv_durable_submit(hv_durable_t *d, const hv_durable_op_t *op) {
    dop_t *o = hv_calloc(1, sizeof(*o));
    if (o == NULL) {
        return HV_ENOMEM;
    }
    o->op = *op;
    pthread_mutex_lock(&d->mu);
    list_append(&d->queue, o);
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    return HV_OK;
}

size_t hv_durable_poll(hv_durable_t *d, hv_durable_op_t *out, size_t cap) {
    size_t n = 0;
    pthread_mutex_lock(&d->mu);
    while (n < cap && d->done != NULL) {
        dop_t *o = d->done;
        d->done = o->next;
        out[n++] = o->op;
        hv_free(o);
    }
    pthread_mutex_unlock(&d->mu);
    return n;
}

hv_err hv_durable_flush(hv_durable_t *d, uint32_t timeout_ms) {
    uint64_t deadline = hv_now_ms() + timeout_ms;
    hv_err rc = HV_OK;
    pthread_mutex_lock(&d->mu);
    while (d->queue != NULL || d->running) {
        if (hv_now_ms() >= deadline) {
            rc = HV_ETIMEDOUT;
            break;
        }
        struct timespec ts = hv_realtime_in_ms(20);
        pthread_cond_timedwait(&d->cv, &d->mu, &ts);
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

void hv_durable_destroy(hv_durable_t *d) {
    if (d == NULL) {
        return;
    }
    pthread_mutex_lock(&d->mu);
    atomic_store(&d->stop, 1);
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    pthread_join(d->thread, NULL);
    free_list(d->queue);
    free_list(d->done);
    pthread_cond_destroy(&d->cv);
    pthread_mutex_destroy(&d->mu);
    durable_free(d);
}
