/*
 * workers: spawn orders to running processes and back to exit reports (see workers.h). A worker
 * record holds a deep copy of its SpawnWorker order, the artifacts it is waiting for, and once
 * started its hv_proc_t. Records live in one list; a node runs a handful of workers, so linear
 * search is fine.
 */
#include "workers.h"

#include <limits.h>
#include <stdio.h>
#include <errno.h>
#include <string.h>
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
    worker_t *wk; /* back pointer for the callback */
    char *path;   /* owned: the cached file, once fetched */
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
    worker_t *next;
};

struct hv_workers_s {
    uv_loop_t *loop;            /* borrowed */
    hv_artifact_cache_t *cache; /* borrowed */
    hv_workers_cbs_t cbs;
    char *work_dir;  /* owned */
    char *node_name; /* owned */
    char *ca_file;   /* owned; "" = plain text */
    struct {
        int run_as;
        unsigned run_uid, run_gid;
        char run_user[64], run_home[256];
    } cfg;
    worker_t *list; /* owned records */
    size_t count;
    int refuse_new;
};

static worker_t *workers_find(const hv_workers_t *w, uint64_t id) {
    for (worker_t *wk = w->list; wk != NULL; wk = wk->next) {
        if (wk->id == id) {
            return wk;
        }
    }
    return NULL;
}

static void worker_free(worker_t *wk) {
    for (size_t i = 0; i < wk->n_arts; i++) {
        hv_free(wk->arts[i].path);
    }
    hv_free(wk->arts);
    hv_free(wk->kill_reason);
    if (wk->spec != NULL) {
        hvpb__v1__spawn_worker__free_unpacked(wk->spec, NULL);
    }
    hv_free(wk);
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
    w->cbs.on_exited(wk->id, exit_code, term_signal, reason, w->cbs.ud);
}

/* Reports the end of a worker and frees it. */
static void worker_finish(worker_t *wk, int exit_code, int term_signal, const char *reason) {
    worker_report(wk, exit_code, term_signal, reason);
    worker_free(wk);
}

/* ---- environment ---------------------------------------------------------------------------- */

typedef struct envv_s {
    char **v; /* owned "K=V" strings, NULL-terminated when done */
    size_t n;
    size_t cap;
    int oom;
} envv_t;

static void env_set(envv_t *e, const char *key, size_t keylen, const char *value) {
    size_t vlen = strlen(value);
    char *kv = hv_malloc(keylen + vlen + 2);
    if (kv == NULL) {
        e->oom = 1;
        return;
    }
    memcpy(kv, key, keylen);
    kv[keylen] = '=';
    memcpy(kv + keylen + 1, value, vlen + 1);
    for (size_t i = 0; i < e->n; i++) {
        if (strncmp(e->v[i], key, keylen) == 0 && e->v[i][keylen] == '=') {
            hv_free(e->v[i]);
            e->v[i] = kv;
            return;
        }
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
}

/* The worker's environment: the agent's (minus anything of the agent's credentials), the
 * order's, then HV_*, and the worker's own Rendezvous secret (HV_WORKER_SECRET): the only
 * credential a worker sees. */
static hv_err env_build(const hv_workers_t *w, const Hvpb__V1__SpawnWorker *sp, envv_t *e) {
    memset(e, 0, sizeof(*e));
    for (char **p = environ; p != NULL && *p != NULL; p++) {
        const char *eq = strchr(*p, '=');
        if (eq == NULL || strncmp(*p, "HV_TOKEN=", 9) == 0 ||
            strncmp(*p, "HV_TOKEN_FILE=", 14) == 0 || strncmp(*p, "HV_WORKER_SECRET=", 17) == 0) {
            continue;
        }
        env_set(e, *p, (size_t)(eq - *p), eq + 1);
    }
    for (size_t i = 0; i < sp->n_env; i++) {
        const char *k = sp->env[i]->key;
        if (k[0] == '\0' || strchr(k, '=') != NULL) {
            HV_LOG(HV_LOG_INFO, "agent", "HV-AGENT-BAD-ENV",
                   "worker %llu: ignoring environment variable with bad name \"%.64s\"",
                   (unsigned long long)sp->worker_id, k);
            continue;
        }
        env_set(e, k, strlen(k), sp->env[i]->value);
    }
    env_set(e, "HV_HEAD", 7, sp->head_addr);
    env_setu(e, "HV_JOB_ID", sp->job_id);
    env_setu(e, "HV_WORKER_ID", sp->worker_id);
    env_setu(e, "HV_RANK", sp->rank);
    env_setu(e, "HV_SIZE", sp->size);
    env_setu(e, "HV_LOCAL_RANK", sp->local_rank);
    env_setu(e, "HV_LOCAL_SIZE", sp->local_size);
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
    char dir[PATH_MAX], path[PATH_MAX], bin[PATH_MAX], err[400];
    int n = snprintf(dir, sizeof(dir), "%s/jobs/%llu/w%llu", w->work_dir,
                     (unsigned long long)sp->job_id, (unsigned long long)sp->worker_id);
    hv_err rc = n > 0 && (size_t)n + 258 < sizeof(dir) ? hv_mkdirs(dir, 0755) : HV_ETOOBIG;
    if (rc != HV_OK) {
        snprintf(reason, sizeof(reason), "spawn failed: cannot create %.400s: %s", dir,
                 hv_strerror(rc));
        worker_finish(wk, -1, 0, reason);
        return;
    }
    if (w->cfg.run_as && chown(dir, (uid_t)w->cfg.run_uid, (gid_t)w->cfg.run_gid) != 0) {
        snprintf(reason, sizeof(reason), "spawn failed: cannot give %.400s to user %s: %s", dir,
                 w->cfg.run_user, strerror(errno));
        worker_finish(wk, -1, 0, reason);
        return;
    }
    // name_ok bounds names to 255 bytes and dir left room for them.
    if (snprintf(bin, sizeof(bin), "%s/%s", dir, sp->binary->name) >= (int)sizeof(bin)) {
        worker_finish(wk, -1, 0, "spawn failed: path too long");
        return;
    }
    if (hv_artifact_place(wk->arts[0].path, bin, 0755, err, sizeof(err)) != HV_OK) {
        snprintf(reason, sizeof(reason), "spawn failed: %s", err);
        worker_finish(wk, -1, 0, reason);
        return;
    }
    for (size_t i = 0; i < sp->n_files; i++) {
        unsigned mode = sp->files[i]->mode != 0 ? (sp->files[i]->mode & 07777) : 0644;
        if (snprintf(path, sizeof(path), "%s/%s", dir, sp->files[i]->name) >= (int)sizeof(path)) {
            worker_finish(wk, -1, 0, "spawn failed: path too long");
            return;
        }
        if (hv_artifact_place(wk->arts[i + 1].path, path, mode, err, sizeof(err)) != HV_OK) {
            snprintf(reason, sizeof(reason), "spawn failed: %s", err);
            worker_finish(wk, -1, 0, reason);
            return;
        }
    }
    envv_t env;
    char **argv = hv_calloc(sp->n_args + 2, sizeof(*argv));
    if (argv == NULL || env_build(w, sp, &env) != HV_OK) {
        hv_free(argv);
        worker_finish(wk, -1, 0, "spawn failed: out of memory");
        return;
    }
    argv[0] = bin; // the full path, so ps and pgrep -f show where the worker runs
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
}

static void worker_art_done(hv_err rc, const char *path, const char *detail, void *ud) {
    art_t *a = ud;
    worker_t *wk = a->wk;
    if (rc == HV_OK) {
        a->path = hv_strdup(path);
        if (a->path == NULL && wk->fail[0] == '\0') {
            snprintf(wk->fail, sizeof(wk->fail), "out of memory");
        }
    } else if (wk->fail[0] == '\0') {
        snprintf(wk->fail, sizeof(wk->fail), "%.290s", detail);
    }
    if (--wk->pending == 0) {
        if (wk->reported) {
            worker_free(wk); // killed while fetching: already reported
        } else {
            worker_launch(wk);
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
    if (w->work_dir == NULL || w->node_name == NULL || w->ca_file == NULL) {
        hv_free(w->work_dir);
        hv_free(w->node_name);
        hv_free(w->ca_file);
        hv_free(w);
        return HV_ENOMEM;
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
    } else if (sp->binary == NULL || !name_ok(sp->binary->name)) {
        snprintf(reason, sizeof(reason), "spawn failed: bad binary name \"%.200s\"",
                 sp->binary != NULL ? sp->binary->name : "");
    } else {
        for (size_t i = 0; i < sp->n_files; i++) {
            if (!name_ok(sp->files[i]->name) || strcmp(sp->files[i]->name, sp->binary->name) == 0) {
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
           sp->binary->name, sp->n_files);
    // Count every request first so that no callback can see pending reach 0 early.
    wk->pending = wk->n_arts + 1;
    for (size_t i = 0; i < wk->n_arts; i++) {
        const Hvpb__V1__FileRef *f = i == 0 ? wk->spec->binary : wk->spec->files[i - 1];
        wk->arts[i].wk = wk;
        hv_err rc = hv_artifact_get(w->cache, f->digest, f->size, worker_art_done, &wk->arts[i]);
        if (rc != HV_OK) {
            if (wk->fail[0] == '\0') {
                snprintf(wk->fail, sizeof(wk->fail), "%s: %s", f->name, hv_strerror(rc));
            }
            wk->pending--;
        }
    }
    if (--wk->pending == 0) {
        worker_launch(wk);
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
        // Nothing runs yet: report now; the record lives on until its fetches call back.
        char why[300];
        snprintf(why, sizeof(why), "killed before start: %.250s",
                 wk->kill_reason != NULL ? wk->kill_reason : "kill order");
        worker_report(wk, -1, 0, why);
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
        worker_free(wk);
    }
    hv_free(w->work_dir);
    hv_free(w->node_name);
    hv_free(w->ca_file);
    hv_free(w);
}
