/*
 * workers: spawn orders to running processes and back to exit reports (see workers.h). A worker
 * record holds a deep copy of its SpawnWorker order, the artifacts it is waiting for, and once
 * started its hv_proc_t. Records live in one list; a node runs a handful of workers, so linear
 * search is fine.
 */
#include "workers.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "mem.h"
#include "spawn.h"
#include "util.h"

extern char **environ;

typedef enum worker_state {
    WS_FETCHING = 0, /* waiting for artifacts */
    WS_RUNNING = 1,  /* the process runs (or its output is draining) */
} worker_state;

typedef struct worker_s worker_t;

/* One artifact a worker waits for. */
typedef struct art_s {
    worker_t *wk;       /* back pointer for the callback */
    const char *digest; /* its digest (borrowed from wk->spec) */
    char *path;         /* owned: the cached file, once fetched; set = the cache pins it */
} art_t;

struct worker_s {
    struct hv_workers_s *tab;
    Hvpb__V1__SpawnWorker *spec; /* owned deep copy of the order */
    uint64_t id;
    worker_state state;
    art_t *arts; /* owned: [0] = binary, [1..] = files */
    size_t n_arts;
    size_t pending;  /* artifact callbacks still to come */
    char fail[300];  /* first fetch error ("" = none) */
    hv_proc_t *proc; /* WS_RUNNING */
    int pid;
    char *kill_reason; /* owned; set once a kill was asked for */
    int reported;      /* the exit was reported; the record only waits for fetches */
    int dir_made;      /* jobs/<job>/w<id> was created: remove it when the worker ends */
    char *addr_file;   /* an actor's process: its HV_ACTOR_ADDR_FILE until reported (owned) */
    char *state_out;   /* an actor's process: its HV_ACTOR_STATE_OUT (owned) */
    char *figures_out; /* an actor's process: its HV_ACTOR_FIGURES_OUT (owned) */
    hv_callfig_t fig;  /* the figures last read from figures_out */
    int fig_any;       /* 1: fig holds a report; -1: the file held none (warned); 0: not yet */
    int fig_unsent;    /* fig was not taken (or is to be sent again): offer it at the next read */
    worker_t *next;
};

struct hv_workers_s {
    uv_loop_t *loop;            /* borrowed */
    hv_artifact_cache_t *cache; /* borrowed */
    hv_workers_cbs_t cbs;
    char *work_dir;        /* owned */
    char *node_name;       /* owned */
    char *ca_file;         /* owned; "" = plain text */
    char py_dir[PATH_MAX]; /* the hv Python package's parent directory ("" = none found) */
    struct {
        int run_as;
        unsigned run_uid, run_gid;
        char run_user[64], run_home[256];
    } cfg;
    worker_t *list; /* owned records */
    size_t count;
    int refuse_new;
    char actor_host[256];   /* HV_ACTOR_LISTEN's host for actors' processes */
    uv_timer_t *addr_timer; /* polls actors' address files (owned; closed by destroy) */
    uv_timer_t *fig_timer;  /* reads actors' figures files (owned; closed by destroy) */
};

static worker_t *workers_find(const hv_workers_t *w, uint64_t id) {
    for (worker_t *wk = w->list; wk != NULL; wk = wk->next) {
        if (wk->id == id) {
            return wk;
        }
    }
    return NULL;
}

/* The worker has its copies of its artifacts, or will never make them: their pins in the cache
 * end, so the cache's bound may delete them again. */
static void worker_unpin(worker_t *wk) {
    for (size_t i = 0; i < wk->n_arts; i++) {
        if (wk->arts[i].path != NULL) {
            hv_artifact_release(wk->tab->cache, wk->arts[i].digest);
            hv_free(wk->arts[i].path);
            wk->arts[i].path = NULL;
        }
    }
}

static void worker_free(worker_t *wk) {
    if (wk->arts != NULL && wk->tab != NULL) {
        worker_unpin(wk);
    }
    hv_free(wk->arts);
    hv_free(wk->kill_reason);
    hv_free(wk->addr_file);
    hv_free(wk->state_out);
    hv_free(wk->figures_out);
    if (wk->spec != NULL) {
        hvpb__v1__spawn_worker__free_unpacked(wk->spec, NULL);
    }
    hv_free(wk);
}

/* A saved state over HV_WORKERS_STATE_MAX: within the head's limit (the order's
 * actor_state_max) it is moved out of the process's directory (removed next) to
 * <work_dir>/states/<id>.state and handed over by path for an upload; over it, or when it
 * cannot be kept, handed over with why. Never dropped silently: the head says so. */
static void state_report_large(worker_t *wk, int fd, uint64_t size) {
    hv_workers_t *w = wk->tab;
    uint64_t limit = wk->spec != NULL ? wk->spec->actor_state_max : 0;
    char why[200] = "", path[4096];
    close(fd);
    if (limit != 0 && size > limit) {
        snprintf(why, sizeof(why),
                 "its saved state of %llu bytes is over the head's actor_state_max of %llu bytes",
                 (unsigned long long)size, (unsigned long long)limit);
    } else if (snprintf(path, sizeof(path), "%s/states", w->work_dir) >= (int)sizeof(path) ||
               (mkdir(path, 0700) != 0 && errno != EEXIST) ||
               snprintf(path, sizeof(path), "%s/states/%llu.state", w->work_dir,
                        (unsigned long long)wk->id) >= (int)sizeof(path) ||
               rename(wk->state_out, path) != 0) {
        snprintf(why, sizeof(why), "the agent could not keep its saved state of %llu bytes: %s",
                 (unsigned long long)size, strerror(errno));
    }
    HV_LOG(why[0] ? HV_LOG_WARN : HV_LOG_NOTICE, "agent", "HV-AGENT-ACTOR-STATE",
           "actor process %llu saved its state (%llu bytes): %s", (unsigned long long)wk->id,
           (unsigned long long)size, why[0] ? why : "uploaded to the head before its exit");
    w->cbs.on_state_file(wk->id, why[0] ? NULL : path, size, why[0] ? why : NULL, w->cbs.ud);
}

/* An actor's process that left a saved state (HV_ACTOR_STATE_OUT): read it (bounded) and hand it
 * over before the exit is reported, so the head gets both in one event; a larger one goes by
 * path (state_report_large). */
static void state_report(worker_t *wk) {
    struct stat sb;
    int fd = open(wk->state_out, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        return; /* nothing saved: its class has no save, or it did not stop cleanly */
    }
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > HV_WORKERS_STATE_MAX &&
        wk->tab->cbs.on_state_file != NULL) {
        state_report_large(wk, fd, (uint64_t)sb.st_size);
        return;
    }
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size > HV_WORKERS_STATE_MAX) {
        HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-ACTOR-STATE",
               "actor process %llu: its saved state %s is not a file of at most %u bytes; it is "
               "not sent to the head",
               (unsigned long long)wk->id, wk->state_out, HV_WORKERS_STATE_MAX);
        close(fd);
        return;
    }
    size_t len = (size_t)sb.st_size, got = 0;
    uint8_t *buf = hv_malloc(len > 0 ? len : 1);
    while (buf != NULL && got < len) {
        ssize_t r = read(fd, buf + got, len - got);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            break;
        }
        got += (size_t)r;
    }
    close(fd);
    if (buf != NULL && got == len) {
        HV_LOG(HV_LOG_INFO, "agent", "HV-AGENT-ACTOR-STATE",
               "actor process %llu saved its state (%zu bytes): sent with its exit",
               (unsigned long long)wk->id, len);
        wk->tab->cbs.on_state(wk->id, buf, len, wk->tab->cbs.ud);
    } else {
        HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-ACTOR-STATE",
               "actor process %llu: its saved state %s could not be read; it is not sent",
               (unsigned long long)wk->id, wk->state_out);
    }
    hv_free(buf);
}

/* Reads an actor's process's figures file (HV_ACTOR_FIGURES_OUT, one callfig line) and reports
 * them when they changed since the last read, or when the last report was not taken (or is to
 * be sent again: hv_workers_figures_again); final: the process ended, its last figures are
 * reported in any case (the last ones read when the file is gone or unreadable). A file that
 * does not hold a callfig line is skipped (logged once). */
static void figures_read(worker_t *wk, int final) {
    hv_workers_t *w = wk->tab;
    char line[HV_CALLFIG_LINE_MAX + 1];
    hv_callfig_t f;
    int fd = open(wk->figures_out, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    ssize_t n = fd >= 0 ? read(fd, line, sizeof(line) - 1) : -1;
    if (fd >= 0) {
        close(fd);
    }
    int got = 0;
    if (n > 0) {
        line[n] = '\0';
        got = hv_callfig_parse(line, &f) == HV_OK;
        if (!got && !wk->fig_any) {
            HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-ACTOR-FIGURES",
                   "actor process %llu: %s does not hold call figures; not reported",
                   (unsigned long long)wk->id, wk->figures_out);
            wk->fig_any = -1; // warned; still nothing read
        }
    }
    if (got &&
        (final || wk->fig_any <= 0 || wk->fig_unsent || memcmp(&f, &wk->fig, sizeof(f)) != 0)) {
        wk->fig = f;
        wk->fig_any = 1;
        wk->fig_unsent = w->cbs.on_figures(wk->id, &f, final, w->cbs.ud) != HV_OK;
    } else if (final && wk->fig_any > 0) {
        (void)w->cbs.on_figures(wk->id, &wk->fig, final, w->cbs.ud);
    }
}

/* Reports the end of a worker (once) and takes it out of the table; the record itself stays
 * for the caller to free. */
static void worker_report(worker_t *wk, int exit_code, int term_signal, const char *reason) {
    hv_workers_t *w = wk->tab;
    if (wk->reported) {
        return;
    }
    wk->reported = 1;
    for (worker_t **pp = &w->list; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == wk) {
            *pp = wk->next;
            w->count--;
            break;
        }
    }
    if (wk->figures_out != NULL && w->cbs.on_figures != NULL) {
        figures_read(wk, 1);
    }
    if (wk->state_out != NULL && w->cbs.on_state != NULL) {
        state_report(wk);
    }
    w->cbs.on_exited(wk->id, exit_code, term_signal, reason, w->cbs.ud);
}

/* ---- job directories ------------------------------------------------------------------------ */

#define WORKERS_RM_MAX_DEPTH 128 /* deeper trees in a worker's directory are left (and logged) */

/* Removes name (a file or a whole tree) below the directory pfd without following symlinks:
 * every step is relative to a directory already open, so a worker's process that swaps a
 * directory for a link cannot send the removal elsewhere. 0, or -1 with errno. */
static int rm_tree_at(int pfd, const char *name, int depth) {
    if (unlinkat(pfd, name, 0) == 0 || errno == ENOENT) {
        return 0;
    }
    if (errno != EISDIR && errno != EPERM) {
        return -1;
    }
    if (depth >= WORKERS_RM_MAX_DEPTH) {
        errno = ELOOP;
        return -1;
    }
    int fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return -1;
    }
    int rc = 0;
    // Removing while reading may hide entries from this pass: read again until nothing is left.
    for (int pass = 0; pass < 3; pass++) {
        int seen = 0;
        struct dirent *de;
        rewinddir(d);
        while ((de = readdir(d)) != NULL) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) {
                continue;
            }
            seen++;
            rc = rm_tree_at(fd, de->d_name, depth + 1) != 0 ? -1 : rc;
        }
        if (seen == 0 || rc != 0) {
            break;
        }
    }
    closedir(d);
    if (unlinkat(pfd, name, AT_REMOVEDIR) != 0 && errno != ENOENT) {
        rc = -1;
    }
    return rc;
}

/* One worker directory being removed on libuv's thread pool. Self-contained: it may outlive
 * the table (shutdown), and the loop runs it to its end before closing. */
typedef struct rm_req_s {
    uv_work_t req;
    char job_dir[PATH_MAX]; /* <work>/jobs/<job> */
    char name[32];          /* w<worker id> */
    int rc;                 /* 0 or an errno */
} rm_req_t;

static void rm_work_cb(uv_work_t *req) {
    rm_req_t *r = req->data;
    int pfd = open(r->job_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    r->rc = 0;
    if (pfd < 0 || rm_tree_at(pfd, r->name, 0) != 0) {
        r->rc = errno;
    }
    if (pfd >= 0) {
        close(pfd);
    }
}

static void rm_after_cb(uv_work_t *req, int status) {
    rm_req_t *r = req->data;
    if (status == 0 && r->rc != 0) {
        HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-JOBDIR-RM", "cannot remove %s/%s: %s", r->job_dir,
               r->name, strerror(r->rc));
    }
    // On the loop thread, so no launch of the job's next worker runs between its mkdirs.
    rmdir(r->job_dir); // the job's last worker here: ENOTEMPTY otherwise, which is fine
    hv_free(r);
}

/* Removes the worker's directory, off the loop thread: a worker may leave a large tree. */
static void worker_remove_dir(worker_t *wk) {
    hv_workers_t *w = wk->tab;
    rm_req_t *r = hv_calloc(1, sizeof(*r));
    if (r == NULL) {
        HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-JOBDIR-RM",
               "out of memory: the directory of worker %llu stays", (unsigned long long)wk->id);
        return;
    }
    snprintf(r->job_dir, sizeof(r->job_dir), "%s/jobs/%llu", w->work_dir,
             (unsigned long long)wk->spec->job_id);
    snprintf(r->name, sizeof(r->name), "w%llu", (unsigned long long)wk->id);
    r->req.data = r;
    if (uv_queue_work(w->loop, &r->req, rm_work_cb, rm_after_cb) != 0) {
        rm_work_cb(&r->req);
        rm_after_cb(&r->req, 0);
    }
}

/* Makes dir with exactly mode (an existing one is chmod'ed, a link or file there refused). */
static hv_err mkdir_mode(const char *dir, unsigned mode) {
    struct stat st;
    if (mkdir(dir, mode) != 0 && errno != EEXIST) {
        return hv_err_from_errno(errno);
    }
    if (lstat(dir, &st) != 0) {
        return hv_err_from_errno(errno);
    }
    if (!S_ISDIR(st.st_mode)) {
        return HV_EEXIST;
    }
    if ((st.st_mode & 07777) != mode && chmod(dir, mode) != 0) {
        return hv_err_from_errno(errno);
    }
    return HV_OK;
}

/* Makes the worker's directory <work>/jobs/<job>/w<id>, empty, 0700 and (for now) the agent's:
 * the files go in before the run-as user gets it. jobs/ and jobs/<job> are 0711, so a user can
 * reach a directory of its own there but list nobody's. A leftover of the same name (an agent
 * killed without notice) is removed first. */
static hv_err worker_make_dir(worker_t *wk, char *dir, size_t len, char *err, size_t errlen) {
    const hv_workers_t *w = wk->tab;
    unsigned long long job = (unsigned long long)wk->spec->job_id;
    unsigned long long id = (unsigned long long)wk->id;
    hv_err rc = HV_OK;
    snprintf(dir, len, "%s/jobs", w->work_dir);
    if ((rc = mkdir_mode(dir, 0711)) != HV_OK) {
        goto out;
    }
    snprintf(dir, len, "%s/jobs/%llu", w->work_dir, job);
    if ((rc = mkdir_mode(dir, 0711)) != HV_OK) {
        goto out;
    }
    char name[32];
    snprintf(name, sizeof(name), "w%llu", id);
    int pfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (pfd < 0 || rm_tree_at(pfd, name, 0) != 0) {
        rc = hv_err_from_errno(errno);
    }
    if (pfd >= 0) {
        close(pfd);
    }
    snprintf(dir, len, "%s/jobs/%llu/w%llu", w->work_dir, job, id);
    if (rc == HV_OK && mkdir(dir, 0700) != 0) {
        rc = hv_err_from_errno(errno);
    }
    if (rc == HV_OK && chmod(dir, 0700) != 0) { // the umask may have taken more
        rc = hv_err_from_errno(errno);
    }
out:
    if (rc != HV_OK) {
        snprintf(err, errlen, "cannot create %.400s: %s", dir, hv_strerror(rc));
    }
    return rc;
}

/* Reports the end of a worker, removes its directory and frees it. */
static void worker_finish(worker_t *wk, int exit_code, int term_signal, const char *reason) {
    worker_report(wk, exit_code, term_signal, reason);
    if (wk->dir_made) {
        worker_remove_dir(wk);
    }
    worker_free(wk);
}

/* ---- environment ---------------------------------------------------------------------------- */

/* The environment being built: "K=V" strings in order, and an open-addressing table from key
 * to position so that a later setting replaces an earlier one in constant time (a scan per
 * setting made 50,000 --env entries take seconds of the agent's loop). */
typedef struct envv_s {
    char **v; /* owned "K=V" strings, NULL-terminated when done */
    size_t n;
    size_t cap;
    size_t *slot; /* owned: v index + 1 per slot, 0 = empty; nslot is a power of two */
    size_t nslot; /* kept at least twice n, so probes stay short and always end */
    int oom;
} envv_t;

static size_t env_hash(const char *key, size_t keylen) {
    uint64_t h = 1469598103934665603ull; // FNV-1a
    for (size_t i = 0; i < keylen; i++) {
        h = (h ^ (unsigned char)key[i]) * 1099511628211ull;
    }
    return (size_t)(h ^ (h >> 32));
}

static uint64_t env_probes; /* slots visited by env_slot (hv__workers_env_probes) */

uint64_t hv__workers_env_probes(void) { return env_probes; }

/* The slot of key: the one that holds it, or the empty one where it belongs. */
static size_t *env_slot(const envv_t *e, const char *key, size_t keylen) {
    size_t mask = e->nslot - 1;
    for (size_t i = env_hash(key, keylen) & mask;; i = (i + 1) & mask) {
        env_probes++;
        size_t *sl = &e->slot[i];
        if (*sl == 0) {
            return sl;
        }
        const char *kv = e->v[*sl - 1];
        if (strncmp(kv, key, keylen) == 0 && kv[keylen] == '=') {
            return sl;
        }
    }
}

/* Doubles the table and puts every entry back. */
static int env_grow_table(envv_t *e) {
    size_t nslot = e->nslot ? e->nslot * 2 : 128;
    size_t *slot = hv_calloc(nslot, sizeof(*slot));
    if (slot == NULL) {
        return -1;
    }
    hv_free(e->slot);
    e->slot = slot;
    e->nslot = nslot;
    for (size_t i = 0; i < e->n; i++) {
        const char *kv = e->v[i];
        *env_slot(e, kv, (size_t)(strchr(kv, '=') - kv)) = i + 1;
    }
    return 0;
}

static void env_set(envv_t *e, const char *key, size_t keylen, const char *value) {
    if (e->oom) {
        return;
    }
    if ((e->n + 1) * 2 > e->nslot && env_grow_table(e) != 0) {
        e->oom = 1;
        return;
    }
    size_t vlen = strlen(value);
    char *kv = hv_malloc(keylen + vlen + 2);
    if (kv == NULL) {
        e->oom = 1;
        return;
    }
    memcpy(kv, key, keylen);
    kv[keylen] = '=';
    memcpy(kv + keylen + 1, value, vlen + 1);
    size_t *sl = env_slot(e, key, keylen);
    if (*sl != 0) {
        hv_free(e->v[*sl - 1]);
        e->v[*sl - 1] = kv;
        return;
    }
    if (e->n + 2 > e->cap) {
        size_t ncap = e->cap ? e->cap * 2 : 64;
        char **nv = hv_realloc(e->v, ncap * sizeof(*nv));
        if (nv == NULL) {
            hv_free(kv);
            e->oom = 1;
            return;
        }
        e->v = nv;
        e->cap = ncap;
    }
    e->v[e->n++] = kv;
    e->v[e->n] = NULL;
    *sl = e->n;
}

static void env_setu(envv_t *e, const char *key, unsigned long long v) {
    char buf[32];
    snprintf(buf, sizeof(buf), "%llu", v);
    env_set(e, key, strlen(key), buf);
}

static void env_free(envv_t *e) {
    for (size_t i = 0; i < e->n; i++) {
        hv_free(e->v[i]);
    }
    hv_free(e->v);
    hv_free(e->slot);
}

/* The worker's environment: the agent's (minus anything of the agent's credentials), the
 * order's, then HV_*, and the worker's own Rendezvous secret (HV_WORKER_SECRET): the only
 * credential a worker sees. */
static hv_err env_build(const hv_workers_t *w, const Hvpb__V1__SpawnWorker *sp, envv_t *e) {
    memset(e, 0, sizeof(*e));
    for (char **p = environ; p != NULL && *p != NULL; p++) {
        const char *eq = strchr(*p, '=');
        if (eq == NULL || strncmp(*p, "HV_TOKEN=", 9) == 0 ||
            strncmp(*p, "HV_TOKEN_FILE=", 14) == 0 || strncmp(*p, "HV_WORKER_SECRET=", 17) == 0 ||
            strncmp(*p, "HV_ACTOR_SECRET=", 16) == 0) {
            continue;
        }
        env_set(e, *p, (size_t)(eq - *p), eq + 1);
    }
    size_t bad = 0;
    const char *first_bad = NULL;
    for (size_t i = 0; i < sp->n_env; i++) {
        const char *k = sp->env[i]->key;
        if (k[0] == '\0' || strchr(k, '=') != NULL) {
            first_bad = bad++ == 0 ? k : first_bad;
            continue;
        }
        env_set(e, k, strlen(k), sp->env[i]->value);
    }
    if (bad > 0) { // one line per order, not one per entry: an order may carry thousands
        HV_LOG(
            HV_LOG_INFO, "agent", "HV-AGENT-BAD-ENV",
            "worker %llu: ignoring %zu environment variables with bad names, the first \"%.64s\"",
            (unsigned long long)sp->worker_id, bad, first_bad);
    }
    if (sp->command != NULL && sp->command[0] != '\0' && w->py_dir[0] != '\0') {
        /* A node program (python3 train.py): the hv package goes first on PYTHONPATH. */
        const char *old = NULL;
        for (size_t i = 0; i < e->n; i++) {
            if (strncmp(e->v[i], "PYTHONPATH=", 11) == 0) {
                old = e->v[i] + 11;
            }
        }
        size_t n = strlen(w->py_dir) + (old != NULL ? strlen(old) : 0) + 2;
        char *pp = hv_malloc(n);
        if (pp == NULL) {
            e->oom = 1;
        } else {
            snprintf(pp, n, "%s%s%s", w->py_dir, old != NULL && old[0] ? ":" : "",
                     old != NULL ? old : "");
            env_set(e, "PYTHONPATH", 10, pp);
            hv_free(pp);
        }
    }
    env_set(e, "HV_HEAD", 7, sp->head_addr);
    env_setu(e, "HV_JOB_ID", sp->job_id);
    env_setu(e, "HV_WORKER_ID", sp->worker_id);
    // libhv in the process asks to die with this agent (worker_lib/agent_tie.c).
    env_setu(e, "HV_AGENT_PID", (unsigned long long)getpid());
    env_setu(e, "HV_RANK", sp->rank);
    env_setu(e, "HV_SIZE", sp->size);
    env_setu(e, "HV_LOCAL_RANK", sp->local_rank);
    env_setu(e, "HV_LOCAL_SIZE", sp->local_size);
    /* The variables torchrun sets, for scripts that read them (docs/python.md, "From
     * DistributedDataParallel"): the values at the worker's start. An elastic job's ranks change
     * at resets; hv.torch.rank() and size() are the live ones. No MASTER_ADDR/MASTER_PORT:
     * nothing of hv listens there (a script joins with hv.torch.init()). */
    env_setu(e, "RANK", sp->rank);
    env_setu(e, "WORLD_SIZE", sp->size);
    env_setu(e, "LOCAL_RANK", sp->local_rank);
    env_setu(e, "LOCAL_WORLD_SIZE", sp->local_size);
    env_setu(e, "HV_GENERATION", sp->generation);
    env_set(e, "HV_NODE", 7, w->node_name);
    env_set(e, "HV_NODE_NAME", 12, w->node_name); // the name libhv's world module reads
    /* The CA the agent verifies the head with, so libhv's rendezvous channel verifies it too;
     * "" (plain text) overrides one inherited or passed with --env. A path, not a secret. */
    env_set(e, "HV_CA_FILE", 10, w->ca_file);
    if (w->cfg.run_as) {
        env_set(e, "USER", 4, w->cfg.run_user);
        env_set(e, "LOGNAME", 7, w->cfg.run_user);
        env_set(e, "HOME", 4, w->cfg.run_home);
    }
    if (sp->worker_secret != NULL && sp->worker_secret[0] != '\0') {
        env_set(e, "HV_WORKER_SECRET", 16, sp->worker_secret);
    }
    if (sp->n_gpus > 0) {
        char list[1024];
        size_t off = 0;
        list[0] = '\0';
        for (size_t i = 0; i < sp->n_gpus && off + 12 < sizeof(list); i++) {
            off +=
                (size_t)snprintf(list + off, sizeof(list) - off, "%s%u", i ? "," : "", sp->gpus[i]);
        }
        env_set(e, "CUDA_VISIBLE_DEVICES", 20, list);
    }
    if (e->oom) {
        env_free(e);
        return HV_ENOMEM;
    }
    return HV_OK;
}

/* ---- actors' processes ------------------------------------------------------------------------ */

#define WORKERS_ADDR_POLL_MS 50
#define WORKERS_FIG_POLL_MS 1000 /* actors' figures files are read this often */

/* An actor's process (the order carries its secret): HV_ACTOR_SECRET (never logged), the address
 * file in its directory and, unless the order sets it, HV_ACTOR_LISTEN on the node's address. */
static hv_err actor_env(hv_workers_t *w, worker_t *wk, const Hvpb__V1__SpawnWorker *sp,
                        const char *dir, envv_t *e) {
    char path[PATH_MAX], listen[300];
    if (snprintf(path, sizeof(path), "%s/actor.addr", dir) >= (int)sizeof(path) ||
        (wk->addr_file = hv_strdup(path)) == NULL) {
        return HV_ENOMEM;
    }
    env_set(e, "HV_ACTOR_SECRET", 15, sp->actor_secret);
    env_set(e, "HV_ACTOR_ADDR_FILE", 18, path);
    /* Where it saves its state when stopped (sent to the head with its exit, for a move), and
     * the state it loads when the order ships one (the head's file "hv-actor-state.in"). */
    if (snprintf(path, sizeof(path), "%s/hv-actor-state.out", dir) >= (int)sizeof(path) ||
        (wk->state_out = hv_strdup(path)) == NULL) {
        return HV_ENOMEM;
    }
    env_set(e, "HV_ACTOR_STATE_OUT", 18, path);
    /* Where it writes its call figures (read every second, reported to the head). */
    if (snprintf(path, sizeof(path), "%s/hv-actor-figures", dir) >= (int)sizeof(path) ||
        (wk->figures_out = hv_strdup(path)) == NULL) {
        return HV_ENOMEM;
    }
    env_set(e, "HV_ACTOR_FIGURES_OUT", 20, path);
    for (size_t i = 0; i < sp->n_files; i++) {
        if (sp->files[i]->name != NULL && strcmp(sp->files[i]->name, "hv-actor-state.in") == 0 &&
            snprintf(path, sizeof(path), "%s/hv-actor-state.in", dir) < (int)sizeof(path)) {
            env_set(e, "HV_ACTOR_STATE_IN", 17, path);
        }
    }
    int listen_given = 0;
    for (size_t i = 0; i < sp->n_env; i++) {
        listen_given |= strcmp(sp->env[i]->key, "HV_ACTOR_LISTEN") == 0;
    }
    if (!listen_given) {
        const char *h = w->actor_host[0] != '\0' ? w->actor_host : "127.0.0.1";
        snprintf(listen, sizeof(listen), strchr(h, ':') != NULL ? "[%s]:0" : "%s:0", h);
        env_set(e, "HV_ACTOR_LISTEN", 15, listen);
    }
    return e->oom ? HV_ENOMEM : HV_OK;
}

/* Reads an actor's address file: 1 and the address once it is there. */
static int addr_read(const char *path, char *buf, size_t len) {
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        return 0;
    }
    size_t n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
    return buf[0] != '\0' && strchr(buf, ':') != NULL;
}

static void addr_poll_cb(uv_timer_t *t) {
    hv_workers_t *w = t->data;
    int waiting = 0;
    for (worker_t *wk = w->list; wk != NULL; wk = wk->next) {
        if (wk->addr_file == NULL || wk->state != WS_RUNNING) {
            continue;
        }
        char addr[256];
        if (!addr_read(wk->addr_file, addr, sizeof(addr))) {
            waiting = 1;
            continue;
        }
        hv_free(wk->addr_file);
        wk->addr_file = NULL;
        HV_LOG(HV_LOG_INFO, "agent", "HV-AGENT-ACTOR-ADDR",
               "actor process %llu (pid %d) listens at %s", (unsigned long long)wk->id, wk->pid,
               addr);
        if (w->cbs.on_address != NULL) {
            w->cbs.on_address(wk->id, wk->pid, addr, w->cbs.ud);
        }
    }
    if (!waiting) {
        uv_timer_stop(t);
    }
}

static void addr_poll_start(hv_workers_t *w) {
    if (w->addr_timer == NULL) {
        if ((w->addr_timer = hv_calloc(1, sizeof(*w->addr_timer))) == NULL) {
            return;
        }
        uv_timer_init(w->loop, w->addr_timer);
        w->addr_timer->data = w;
    }
    if (!uv_is_active((uv_handle_t *)w->addr_timer)) {
        uv_timer_start(w->addr_timer, addr_poll_cb, WORKERS_ADDR_POLL_MS, WORKERS_ADDR_POLL_MS);
    }
}

static void addr_timer_free(uv_handle_t *h) { hv_free(h); }

static void fig_poll_cb(uv_timer_t *t) {
    hv_workers_t *w = t->data;
    int any = 0;
    for (worker_t *wk = w->list; wk != NULL; wk = wk->next) {
        if (wk->figures_out != NULL && wk->state == WS_RUNNING && !wk->reported) {
            any = 1;
            figures_read(wk, 0);
        }
    }
    if (!any) {
        uv_timer_stop(t);
    }
}

static void fig_poll_start(hv_workers_t *w) {
    if (w->cbs.on_figures == NULL) {
        return;
    }
    if (w->fig_timer == NULL) {
        if ((w->fig_timer = hv_calloc(1, sizeof(*w->fig_timer))) == NULL) {
            return;
        }
        uv_timer_init(w->loop, w->fig_timer);
        w->fig_timer->data = w;
    }
    if (!uv_is_active((uv_handle_t *)w->fig_timer)) {
        uv_timer_start(w->fig_timer, fig_poll_cb, WORKERS_FIG_POLL_MS, WORKERS_FIG_POLL_MS);
    }
}

/* ---- starting ------------------------------------------------------------------------------- */

static void worker_on_line(hv_proc_t *p, int stream, const char *line, size_t len, void *ud) {
    worker_t *wk = ud;
    (void)p;
    wk->tab->cbs.on_line(wk->id, stream, line, len, wk->tab->cbs.ud);
}

static void worker_on_exit(hv_proc_t *p, int exit_code, int term_signal, void *ud) {
    worker_t *wk = ud;
    (void)p;
    wk->proc = NULL;
    char reason[300] = "";
    if (wk->kill_reason != NULL) {
        snprintf(reason, sizeof(reason), "killed by the agent: %.250s", wk->kill_reason);
    }
    HV_LOG(HV_LOG_INFO, "agent", "HV-AGENT-WORKER-EXIT",
           "worker %llu (pid %d) exited: code %d, signal %d%s%s", (unsigned long long)wk->id,
           wk->pid, exit_code, term_signal, reason[0] ? "; " : "", reason);
    worker_finish(wk, exit_code, term_signal, reason);
}

/* 1 when name is usable as a file name in the worker's directory. */
static int name_ok(const char *name) {
    return name != NULL && name[0] != '\0' && strchr(name, '/') == NULL &&
           strstr(name, "..") == NULL && strcmp(name, ".") != 0 && strlen(name) < 256;
}

/* 1 when path is usable as a shipped file's place below the worker's directory: names that
 * name_ok accepts, joined by single '/' (hvsubmit --workdir's subdirectories), at most
 * WORKERS_PATH_MAX_DEPTH of them and WORKERS_PATH_MAX bytes (the head checks the same). */
#define WORKERS_PATH_MAX 1024u
#define WORKERS_PATH_MAX_DEPTH 16u
static int path_ok(const char *path) {
    if (path == NULL || strlen(path) > WORKERS_PATH_MAX) {
        return 0;
    }
    unsigned depth = 0;
    for (const char *p = path;; p++) {
        size_t n = strcspn(p, "/");
        char part[256];
        if (n == 0 || n >= sizeof(part) || ++depth > WORKERS_PATH_MAX_DEPTH) {
            return 0;
        }
        memcpy(part, p, n);
        part[n] = '\0';
        if (!name_ok(part)) {
            return 0;
        }
        p += n;
        if (*p == '\0') {
            return 1;
        }
    }
}

/* Makes the directories above the shipped file rel (a path_ok path) inside the worker's
 * directory dir, 0755 and the run-as user's (uid/gid, or -1: the agent's). The worker's
 * directory is the agent's own and still 0700, so nobody else can have put a link there; a
 * directory that an earlier file of the job made is reused. */
static hv_err make_parents(const char *dir, const char *rel, long uid, long gid, char *err,
                           size_t errlen) {
    char path[PATH_MAX];
    for (const char *slash = strchr(rel, '/'); slash != NULL; slash = strchr(slash + 1, '/')) {
        int n = snprintf(path, sizeof(path), "%s/%.*s", dir, (int)(slash - rel), rel);
        if (n < 0 || (size_t)n >= sizeof(path)) {
            snprintf(err, errlen, "path too long");
            return HV_EINVAL;
        }
        struct stat st;
        if (mkdir(path, 0755) != 0) {
            if (errno != EEXIST || lstat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
                snprintf(err, errlen, "cannot create %.400s: %s", path, strerror(errno));
                return hv_err_from_errno(errno != 0 ? errno : EEXIST);
            }
            continue;
        }
        if ((uid >= 0 || gid >= 0) && chown(path, (uid_t)uid, (gid_t)gid) != 0) {
            snprintf(err, errlen, "cannot give %.400s to uid %ld: %s", path, uid, strerror(errno));
            return hv_err_from_errno(errno);
        }
        if (chmod(path, 0755) != 0) { // the umask may have taken more
            snprintf(err, errlen, "chmod %.400s: %s", path, strerror(errno));
            return hv_err_from_errno(errno);
        }
    }
    return HV_OK;
}

/* 1 when cmd can be a worker's node program: a name looked up on PATH or an absolute path,
 * bounded, without control characters (the head checks the same). */
static int command_ok(const char *cmd) {
    size_t n = cmd != NULL ? strlen(cmd) : 0;
    if (n == 0 || n >= PATH_MAX || (strchr(cmd, '/') != NULL && cmd[0] != '/')) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)cmd[i] < ' ' || cmd[i] == 0x7f) {
            return 0;
        }
    }
    return 1;
}

/* Every artifact is there: lay out the directory and start the process. */
static void worker_launch(worker_t *wk) {
    hv_workers_t *w = wk->tab;
    const Hvpb__V1__SpawnWorker *sp = wk->spec;
    char reason[600];
    if (wk->kill_reason != NULL) {
        snprintf(reason, sizeof(reason), "killed before start: %.250s", wk->kill_reason);
        worker_finish(wk, -1, 0, reason);
        return;
    }
    if (wk->fail[0] != '\0') {
        snprintf(reason, sizeof(reason), "fetch failed: %s", wk->fail);
        worker_finish(wk, -1, 0, reason);
        return;
    }
    if (w->refuse_new) {
        worker_finish(wk, -1, 0, "spawn failed: the agent is shutting down");
        return;
    }
    char dir[PATH_MAX], path[PATH_MAX], bin[PATH_MAX], err[460];
    long uid = w->cfg.run_as ? (long)w->cfg.run_uid : -1;
    long gid = w->cfg.run_as ? (long)w->cfg.run_gid : -1;
    if (strlen(w->work_dir) + 64 + 258 >= sizeof(dir)) {
        worker_finish(wk, -1, 0, "spawn failed: the work dir's path is too long");
        return;
    }
    hv_err rc = worker_make_dir(wk, dir, sizeof(dir), err, sizeof(err));
    if (rc != HV_OK) {
        snprintf(reason, sizeof(reason), "spawn failed: %s", err);
        worker_finish(wk, -1, 0, reason);
        return;
    }
    wk->dir_made = 1;
    int is_cmd = sp->binary == NULL;
    if (is_cmd) {
        snprintf(bin, sizeof(bin), "%s", sp->command); // command_ok bounded it
    } else {
        // name_ok bounds names to 255 bytes and dir left room for them.
        if (snprintf(bin, sizeof(bin), "%s/%s", dir, sp->binary->name) >= (int)sizeof(bin)) {
            worker_finish(wk, -1, 0, "spawn failed: path too long");
            return;
        }
        if (hv_artifact_place(wk->arts[0].path, bin, 0700, uid, gid, err, sizeof(err)) != HV_OK) {
            snprintf(reason, sizeof(reason), "spawn failed: %s", err);
            worker_finish(wk, -1, 0, reason);
            return;
        }
    }
    for (size_t i = 0; i < sp->n_files; i++) {
        unsigned mode = sp->files[i]->mode != 0 ? (sp->files[i]->mode & 07777) : 0644;
        if (snprintf(path, sizeof(path), "%s/%s", dir, sp->files[i]->name) >= (int)sizeof(path)) {
            worker_finish(wk, -1, 0, "spawn failed: path too long");
            return;
        }
        if (strchr(sp->files[i]->name, '/') != NULL &&
            make_parents(dir, sp->files[i]->name, uid, gid, err, sizeof(err)) != HV_OK) {
            snprintf(reason, sizeof(reason), "spawn failed: %s", err);
            worker_finish(wk, -1, 0, reason);
            return;
        }
        if (hv_artifact_place(wk->arts[i + 1].path, path, mode, uid, gid, err, sizeof(err)) !=
            HV_OK) {
            snprintf(reason, sizeof(reason), "spawn failed: %s", err);
            worker_finish(wk, -1, 0, reason);
            return;
        }
    }
    worker_unpin(wk); // every file has its private copy: the cache may let them go
    // The directory goes to the run-as user last, once nothing more is put there as root.
    if (w->cfg.run_as && chown(dir, (uid_t)w->cfg.run_uid, (gid_t)w->cfg.run_gid) != 0) {
        snprintf(reason, sizeof(reason), "spawn failed: cannot give %.400s to user %s: %s", dir,
                 w->cfg.run_user, strerror(errno));
        worker_finish(wk, -1, 0, reason);
        return;
    }
    envv_t env;
    char **argv = hv_calloc(sp->n_args + 2, sizeof(*argv));
    if (argv == NULL || env_build(w, sp, &env) != HV_OK) {
        hv_free(argv);
        worker_finish(wk, -1, 0, "spawn failed: out of memory");
        return;
    }
    int actor = sp->actor_secret != NULL && sp->actor_secret[0] != '\0';
    if (actor && actor_env(w, wk, sp, dir, &env) != HV_OK) {
        hv_free(argv);
        env_free(&env);
        worker_finish(wk, -1, 0, "spawn failed: out of memory");
        return;
    }
    argv[0] = bin; // the full path (or the command), so ps and pgrep -f show the worker
    for (size_t i = 0; i < sp->n_args; i++) {
        argv[i + 1] = sp->args[i];
    }
    hv_proc_opts_t o = {.file = bin,
                        .argv = argv,
                        .env = env.v,
                        .cwd = dir,
                        .on_line = worker_on_line,
                        .on_exit = worker_on_exit,
                        .ud = wk,
                        .set_user = w->cfg.run_as,
                        .uid = w->cfg.run_uid,
                        .gid = w->cfg.run_gid};
    rc = hv_proc_spawn(w->loop, &o, &wk->proc, err, sizeof(err));
    hv_free(argv);
    env_free(&env);
    if (rc != HV_OK && is_cmd && (rc == HV_ENOTFOUND || rc == HV_EPERM)) {
        /* The node lacks the program the job names: say which node and which program. */
        if (rc == HV_ENOTFOUND) {
            snprintf(reason, sizeof(reason), "spawn failed: node %.128s has no %s'%.200s'%s",
                     w->node_name, bin[0] == '/' ? "program " : "", bin,
                     bin[0] == '/' ? "" : " on PATH");
        } else {
            snprintf(reason, sizeof(reason),
                     "spawn failed: node %.128s cannot run '%.200s': %.100s", w->node_name, bin,
                     err);
        }
        HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-SPAWN-FAIL", "worker %llu (%s): %s",
               (unsigned long long)wk->id, bin, reason);
        worker_finish(wk, -1, 0, reason);
        return;
    }
    if (rc != HV_OK) {
        snprintf(reason, sizeof(reason), "spawn failed: %s", err);
        HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-SPAWN-FAIL", "worker %llu (%s): %s",
               (unsigned long long)wk->id, bin, reason);
        worker_finish(wk, -1, 0, reason);
        return;
    }
    wk->state = WS_RUNNING;
    wk->pid = hv_proc_pid(wk->proc);
    HV_LOG(HV_LOG_INFO, "agent", "HV-AGENT-WORKER-START",
           "worker %llu of job %llu (rank %u/%u) started as pid %d in %s",
           (unsigned long long)wk->id, (unsigned long long)sp->job_id, sp->rank, sp->size, wk->pid,
           dir);
    w->cbs.on_started(wk->id, wk->pid, w->cbs.ud);
    if (wk->addr_file != NULL) {
        addr_poll_start(w);
        fig_poll_start(w);
    }
}

static void worker_art_done(hv_err rc, const char *path, const char *detail, void *ud) {
    art_t *a = ud;
    worker_t *wk = a->wk;
    if (rc == HV_OK) {
        a->path = wk->reported || wk->fail[0] != '\0' ? NULL : hv_strdup(path);
        if (a->path == NULL) {
            // Given up on (killed, or another file failed), or out of memory: no copy is made.
            hv_artifact_release(wk->tab->cache, a->digest);
            if (!wk->reported && wk->fail[0] == '\0') {
                snprintf(wk->fail, sizeof(wk->fail), "out of memory");
                worker_unpin(wk);
            }
        }
    } else if (wk->fail[0] == '\0') {
        snprintf(wk->fail, sizeof(wk->fail), "%.290s", detail);
        worker_unpin(wk); // the worker will not start: what it has is not needed
    }
    if (--wk->pending == 0) {
        if (wk->reported) {
            worker_free(wk); // killed while fetching: already reported
        } else {
            worker_launch(wk);
        }
    }
}

/* The directory holding the hv Python package that command workers get on PYTHONPATH: the
 * first of <dir of hvagent>/../python (the build tree: build/bin/hvagent, build/python/hv) and
 * <dir of hvagent>/../share/hv/python (an install under a prefix) that has hv/__init__.py. */
static void find_py_dir(char *out, size_t len) {
    char exe[PATH_MAX];
    out[0] = '\0';
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) {
        return;
    }
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash == NULL) {
        return;
    }
    *slash = '\0';
    static const char *const rel[] = {"/../python", "/../share/hv/python"};
    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
        char dir[PATH_MAX], init[PATH_MAX + 32], real[PATH_MAX];
        int m = snprintf(dir, sizeof(dir), "%s%s", exe, rel[i]);
        if (m < 0 || (size_t)m >= sizeof(dir)) {
            continue; // a path too long to hold is not where the package is
        }
        snprintf(init, sizeof(init), "%s/hv/__init__.py", dir);
        if (access(init, R_OK) == 0 && realpath(dir, real) != NULL) {
            snprintf(out, len, "%s", real);
            return;
        }
    }
}

/* ---- API ------------------------------------------------------------------------------------ */

hv_err hv_workers_create(uv_loop_t *loop, const hv_workers_config_t *cfg,
                         hv_artifact_cache_t *cache, const hv_workers_cbs_t *cbs,
                         hv_workers_t **out) {
    if (cfg == NULL || cfg->work_dir == NULL || cbs == NULL || cbs->on_started == NULL ||
        cbs->on_exited == NULL || cbs->on_line == NULL) {
        return HV_EINVAL;
    }
    hv_workers_t *w = hv_calloc(1, sizeof(*w));
    if (w == NULL) {
        return HV_ENOMEM;
    }
    w->work_dir = hv_strdup(cfg->work_dir);
    w->node_name = hv_strdup(cfg->node_name != NULL ? cfg->node_name : "");
    w->ca_file = hv_strdup(cfg->ca_file != NULL ? cfg->ca_file : "");
    w->cfg.run_as = cfg->run_as;
    w->cfg.run_uid = cfg->run_uid;
    w->cfg.run_gid = cfg->run_gid;
    snprintf(w->cfg.run_user, sizeof(w->cfg.run_user), "%s",
             cfg->run_user != NULL ? cfg->run_user : "");
    snprintf(w->cfg.run_home, sizeof(w->cfg.run_home), "%s",
             cfg->run_home != NULL ? cfg->run_home : "/");
    snprintf(w->actor_host, sizeof(w->actor_host), "%s",
             cfg->actor_host != NULL ? cfg->actor_host : "");
    if (w->work_dir == NULL || w->node_name == NULL || w->ca_file == NULL) {
        hv_free(w->work_dir);
        hv_free(w->node_name);
        hv_free(w->ca_file);
        hv_free(w);
        return HV_ENOMEM;
    }
    find_py_dir(w->py_dir, sizeof(w->py_dir));
    if (w->py_dir[0] != '\0') {
        HV_LOG(HV_LOG_INFO, "agent", "HV-AGENT-PYTHON",
               "node programs (hvsubmit -- python3 train.py) get %s first on PYTHONPATH",
               w->py_dir);
    } else {
        HV_LOG(HV_LOG_INFO, "agent", "HV-AGENT-PYTHON",
               "no hv Python package beside hvagent (../python, ../share/hv/python): node "
               "programs get PYTHONPATH unchanged and need hv installed");
    }
    /* Saved states an earlier agent process moved out for an upload it never finished: their
     * exits were never reported, and the head treats those processes as lost. */
    int wfd = open(w->work_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (wfd >= 0) {
        if (rm_tree_at(wfd, "states", 0) != 0) {
            HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-ACTOR-STATE",
                   "cannot remove the saved states left in %s/states: %s", w->work_dir,
                   strerror(errno));
        }
        close(wfd);
    }
    w->loop = loop;
    w->cache = cache;
    w->cbs = *cbs;
    *out = w;
    return HV_OK;
}

/* A deep copy of the order through its wire form. */
static Hvpb__V1__SpawnWorker *spec_copy(const Hvpb__V1__SpawnWorker *sp) {
    size_t len = protobuf_c_message_get_packed_size(&sp->base);
    uint8_t *buf = hv_malloc(len);
    if (buf == NULL) {
        return NULL;
    }
    protobuf_c_message_pack(&sp->base, buf);
    Hvpb__V1__SpawnWorker *copy = hvpb__v1__spawn_worker__unpack(NULL, len, buf);
    hv_free(buf);
    return copy;
}

/* 1 (with reason) when the order is beyond what one worker may bring: the head bounds orders
 * already, this keeps an agent's loop safe from one that did not. Linear in the order. */
static int spec_too_big(const Hvpb__V1__SpawnWorker *sp, char *reason, size_t len) {
    if (sp->n_env > HV_WORKERS_MAX_ENV) {
        snprintf(reason, len, "spawn failed: %zu environment variables, at most %u", sp->n_env,
                 HV_WORKERS_MAX_ENV);
        return 1;
    }
    if (sp->n_args > HV_WORKERS_MAX_ARGS) {
        snprintf(reason, len, "spawn failed: %zu arguments, at most %u", sp->n_args,
                 HV_WORKERS_MAX_ARGS);
        return 1;
    }
    if (sp->n_files > HV_WORKERS_MAX_FILES) {
        snprintf(reason, len, "spawn failed: %zu files, at most %u", sp->n_files,
                 HV_WORKERS_MAX_FILES);
        return 1;
    }
    size_t bytes = 0;
    for (size_t i = 0; i < sp->n_env; i++) {
        bytes += strlen(sp->env[i]->key) + strlen(sp->env[i]->value) + 2;
    }
    for (size_t i = 0; i < sp->n_args; i++) {
        bytes += strlen(sp->args[i]) + 1;
    }
    if (bytes > HV_WORKERS_MAX_ARG_BYTES) {
        snprintf(reason, len, "spawn failed: arguments and environment take %zu bytes, at most %u",
                 bytes, HV_WORKERS_MAX_ARG_BYTES);
        return 1;
    }
    return 0;
}

void hv_workers_spawn(hv_workers_t *w, const Hvpb__V1__SpawnWorker *sp) {
    char reason[400];
    if (workers_find(w, sp->worker_id) != NULL) {
        HV_LOG(HV_LOG_INFO, "agent", "HV-AGENT-DUP-SPAWN",
               "worker %llu is already here: ignoring the repeated spawn order",
               (unsigned long long)sp->worker_id);
        return;
    }
    reason[0] = '\0';
    if (w->refuse_new) {
        snprintf(reason, sizeof(reason), "spawn failed: the agent is shutting down");
    } else if (sp->binary == NULL && !command_ok(sp->command)) {
        snprintf(reason, sizeof(reason), "spawn failed: bad command \"%.200s\"",
                 sp->command != NULL ? sp->command : "");
    } else if (sp->binary != NULL && sp->command != NULL && sp->command[0] != '\0') {
        snprintf(reason, sizeof(reason), "spawn failed: an order with both a binary and a command");
    } else if (sp->binary != NULL && !name_ok(sp->binary->name)) {
        snprintf(reason, sizeof(reason), "spawn failed: bad binary name \"%.200s\"",
                 sp->binary->name);
    } else if (spec_too_big(sp, reason, sizeof(reason))) {
        // reason says which bound
    } else {
        for (size_t i = 0; i < sp->n_files; i++) {
            if (!path_ok(sp->files[i]->name) ||
                (sp->binary != NULL && strcmp(sp->files[i]->name, sp->binary->name) == 0)) {
                snprintf(reason, sizeof(reason), "spawn failed: bad file name \"%.200s\"",
                         sp->files[i]->name);
                break;
            }
        }
    }
    worker_t *wk = NULL;
    if (reason[0] == '\0') {
        wk = hv_calloc(1, sizeof(*wk));
        if (wk != NULL) {
            wk->spec = spec_copy(sp);
            wk->n_arts = 1 + sp->n_files;
            wk->arts = hv_calloc(wk->n_arts, sizeof(*wk->arts));
        }
        if (wk == NULL || wk->spec == NULL || wk->arts == NULL) {
            snprintf(reason, sizeof(reason), "spawn failed: out of memory");
            if (wk != NULL) {
                worker_free(wk);
            }
        }
    }
    if (reason[0] != '\0') {
        HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-SPAWN-FAIL", "worker %llu: %s",
               (unsigned long long)sp->worker_id, reason);
        w->cbs.on_exited(sp->worker_id, -1, 0, reason, w->cbs.ud);
        return;
    }
    wk->tab = w;
    wk->id = sp->worker_id;
    wk->state = WS_FETCHING;
    wk->next = w->list;
    w->list = wk;
    w->count++;
    HV_LOG(HV_LOG_INFO, "agent", "HV-AGENT-SPAWN",
           "spawn order: worker %llu of job %llu (rank %u/%u), %s with %zu files",
           (unsigned long long)wk->id, (unsigned long long)sp->job_id, sp->rank, sp->size,
           sp->binary != NULL ? sp->binary->name : sp->command, sp->n_files);
    // Count every request first so that no callback can see pending reach 0 early.
    wk->pending = wk->n_arts + 1;
    for (size_t i = 0; i < wk->n_arts; i++) {
        const Hvpb__V1__FileRef *f = i == 0 ? wk->spec->binary : wk->spec->files[i - 1];
        wk->arts[i].wk = wk;
        if (f == NULL) { // a command job: nothing to fetch in the binary's place
            wk->pending--;
            continue;
        }
        wk->arts[i].digest = f->digest;
        hv_err rc = hv_artifact_get(w->cache, f->digest, f->size, worker_art_done, &wk->arts[i]);
        if (rc != HV_OK) {
            if (wk->fail[0] == '\0') {
                snprintf(wk->fail, sizeof(wk->fail), "%s: %s", f->name, hv_strerror(rc));
            }
            wk->pending--; // no callbacks came yet (never inside get): nothing is pinned
        }
    }
    if (--wk->pending == 0) {
        worker_launch(wk);
    }
}

void hv_workers_figures_again(hv_workers_t *w) {
    for (worker_t *wk = w->list; wk != NULL; wk = wk->next) {
        if (wk->fig_any > 0) {
            wk->fig_unsent = 1;
        }
    }
}

void hv_workers_kill(hv_workers_t *w, uint64_t worker_id, uint32_t grace_ms, const char *reason) {
    worker_t *wk = workers_find(w, worker_id);
    if (wk == NULL) {
        HV_LOG(HV_LOG_INFO, "agent", "HV-AGENT-KILL-UNKNOWN",
               "kill order for worker %llu, which is not here: ignored",
               (unsigned long long)worker_id);
        return;
    }
    if (wk->kill_reason == NULL) {
        wk->kill_reason = hv_strdup(reason != NULL && reason[0] ? reason : "kill order");
    }
    HV_LOG(HV_LOG_INFO, "agent", "HV-AGENT-KILL", "killing worker %llu (pid %d, grace %u ms): %s",
           (unsigned long long)worker_id, wk->pid, grace_ms, reason != NULL ? reason : "");
    if (wk->state == WS_RUNNING && wk->proc != NULL) {
        hv_proc_kill(wk->proc, grace_ms);
    } else if (wk->state == WS_FETCHING) {
        // Nothing runs yet: report now; the record lives on until its fetches call back, and
        // what was delivered already is not needed any more.
        char why[300];
        snprintf(why, sizeof(why), "killed before start: %.250s",
                 wk->kill_reason != NULL ? wk->kill_reason : "kill order");
        worker_report(wk, -1, 0, why);
        worker_unpin(wk);
    }
}

void hv_workers_kill_all(hv_workers_t *w, uint32_t grace_ms, const char *reason, int refuse_new) {
    if (refuse_new) {
        w->refuse_new = 1;
    }
    worker_t *wk = w->list;
    while (wk != NULL) {
        worker_t *next = wk->next; // a fetching worker leaves the list when killed
        hv_workers_kill(w, wk->id, grace_ms, reason);
        wk = next;
    }
}

size_t hv_workers_count(const hv_workers_t *w) { return w->count; }

size_t hv_workers_running(const hv_workers_t *w, hv_worker_pid_t **out) {
    size_t n = w->count;
    *out = NULL;
    if (n == 0) {
        return 0;
    }
    hv_worker_pid_t *v = hv_calloc(n, sizeof(*v));
    if (v == NULL) {
        return 0;
    }
    size_t i = 0;
    for (worker_t *wk = w->list; wk != NULL && i < n; wk = wk->next) {
        v[i].worker_id = wk->id;
        v[i].pid = wk->state == WS_RUNNING ? wk->pid : 0;
        i++;
    }
    *out = v;
    return i;
}

void hv_workers_destroy(hv_workers_t *w) {
    if (w == NULL) {
        return;
    }
    while (w->list != NULL) {
        worker_t *wk = w->list;
        w->list = wk->next;
        if (wk->state == WS_FETCHING && wk->pending > 0) {
            // A fetch callback would still reach this record: keep it rather than crash.
            HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-WORKER-LEAK",
                   "worker %llu still waits for artifacts at shutdown", (unsigned long long)wk->id);
            continue;
        }
        if (wk->proc != NULL) {
            HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-WORKER-ABANDON",
                   "worker %llu (pid %d) did not exit in time: SIGKILL to its group",
                   (unsigned long long)wk->id, wk->pid);
            hv_proc_close(wk->proc, 1);
        }
        if (wk->dir_made) {
            worker_remove_dir(wk); // finished by the loop run that follows the destroy
        }
        worker_free(wk);
    }
    if (w->addr_timer != NULL) {
        uv_close((uv_handle_t *)w->addr_timer, addr_timer_free);
    }
    if (w->fig_timer != NULL) {
        uv_close((uv_handle_t *)w->fig_timer, addr_timer_free);
    }
    hv_free(w->work_dir);
    hv_free(w->node_name);
    hv_free(w->ca_file);
    hv_free(w);
}
