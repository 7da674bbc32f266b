/*
 * hv: the public entry points of libhv (include/hv/hv.h) and the process-wide state behind them.
 * It reads the HV_* environment once, picks the rendezvous (the head when HV_HEAD, HV_JOB_ID and
 * HV_WORKER_ID are set; a shared directory when HV_RDZV_DIR is; else a single-process world),
 * and owns the one membership (member.c: the rendezvous client, the current world, the push
 * watcher) the public API talks to. It is not where collectives or transports live (engine.c,
 * ring.c, transport_*.c) nor the elastic retry loop (elastic.c, which re-joins through the
 * member and is told about new worlds here, via proc_on_world); it only validates arguments and
 * forwards.
 */
#include "err.h"

#include "hv/elastic.h"
#include "hv/hv.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_tie.h"
#include "engine.h"
#include "log.h"
#include "mem.h"
#include "member.h"
#include "process.h"
#include "rdzv.h"
#include "transport_nccl.h"
#include "util.h"
#include "world.h"

#define HV_VERSION_STR_(a, b, c) #a "." #b "." #c
#define HV_VERSION_STR(a, b, c) HV_VERSION_STR_(a, b, c)

/* HV_* settings, read from the environment once per process (first hv_init). */
typedef struct params_s {
    int loaded;
    hv_err rc; // a malformed variable makes every hv_init fail the same way
    int env_rank, env_size, env_local_rank, env_local_size; // -1 when unset
    char head[256];                                         // HV_HEAD
    uint64_t job_id, worker_id;
    int have_job, have_worker;
    char rdzv_dir[1024]; // HV_RDZV_DIR
    char node[256];      // HV_NODE (or HV_NODE_NAME), else the host name
    char data_addr[128]; // HV_DATA_ADDR
    uint32_t peer_timeout_ms, rdzv_timeout_ms, cycle_time_us, spin_us;
    uint64_t fusion_threshold;
    uint64_t stage_bytes, small_bytes, spec_bytes;
    int sock_buf;
    uint64_t shm_bytes;      // 0: same-host neighbours use TCP too
    uint64_t chunk_bytes;    // allreduce pipeline chunk (HV_CHUNK_BYTES), 0 = default
    int use_nccl;            // HV_NCCL (default 1): NCCL for device tensors when a GPU is seen
    int hierarchical;        // HV_HIERARCHICAL (default 1): 2D allreduce over several hosts
    uint64_t hier_min_bytes; // HV_HIER_MIN_BYTES
    uint32_t liveness_ms;    // HV_LIVENESS_MS: a ring neighbour silent this long is reported
    int death_watch;         // HV_DEATH_WATCH (default 1): same-machine neighbours watch marks
} params_t;

/* Process-wide state. g.mu serialises init, shutdown, abort and last_error; the public
 * collectives read g.engine without the lock (hv_shutdown, and an elastic re-join, must not
 * race with them). */
static struct {
    pthread_mutex_t mu;
    params_t p;
    hv__member_t *member;           // owned, NULL when not initialised or no data plane
    _Atomic(hv__engine_t *) engine; // the current world's engine, for lock-free calls
    atomic_uint generation;         // the current world's round (hv_generation)
    hv__rdzv_local_store_t *solo;   // single-process rendezvous store, owned
    atomic_int inited;
    atomic_int rank, size, local_rank, local_size, cross_rank, cross_size;
    pid_t exit_pid;           // the process whose exit handler is registered (hv_shutdown_at_exit)
    uint32_t last_generation; // of the previous world (re-init after shutdown)
    char host[256];
    char init_error[512];
    atomic_int user_failed; // a collective returned a data-plane error to the user
    hv_log_fn user_log;
    void *user_log_ud;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER,
       .rank = -1,
       .size = -1,
       .local_rank = -1,
       .local_size = -1,
       .cross_rank = -1,
       .cross_size = -1};

const char *hv_version(void) {
    return HV_VERSION_STR(HV_VERSION_MAJOR, HV_VERSION_MINOR, HV_VERSION_PATCH);
}

/* ---- environment ----------------------------------------------------------------------------- */

static hv_err env_u64(const char *name, uint64_t min, uint64_t max, uint64_t *out, int *seen) {
    const char *s = getenv(name);
    if (s == NULL || s[0] == '\0') {
        return HV_OK;
    }
    if (hv_parse_u64(s, min, max, out) != HV_OK) {
        HV_LOG(HV_LOG_ERROR, "init", "HV-INIT-ENV", "%s=%s: expected an integer in [%llu, %llu]",
               name, s, (unsigned long long)min, (unsigned long long)max);
        return HV_EINVAL;
    }
    if (seen != NULL) {
        *seen = 1;
    }
    return HV_OK;
}

static hv_err env_int(const char *name, int min, int max, int *out) {
    uint64_t v = 0;
    int seen = 0;
    hv_err rc = env_u64(name, (uint64_t)min, (uint64_t)max, &v, &seen);
    if (rc == HV_OK && seen) {
        *out = (int)v;
    }
    return rc;
}

static hv_err env_u32(const char *name, uint32_t min, uint32_t max, uint32_t *out) {
    uint64_t v = 0;
    int seen = 0;
    hv_err rc = env_u64(name, min, max, &v, &seen);
    if (rc == HV_OK && seen) {
        *out = (uint32_t)v;
    }
    return rc;
}

static hv_err env_size(const char *name, uint64_t *out) {
    const char *s = getenv(name);
    if (s == NULL || s[0] == '\0') {
        return HV_OK;
    }
    if (hv_parse_size(s, out) != HV_OK) {
        HV_LOG(HV_LOG_ERROR, "init", "HV-INIT-ENV", "%s=%s: expected a size (bytes, 64KiB, 1GiB)",
               name, s);
        return HV_EINVAL;
    }
    return HV_OK;
}

static hv_err env_str(const char *name, char *buf, size_t len) {
    const char *s = getenv(name);
    if (s == NULL) {
        return HV_OK;
    }
    if (strlen(s) >= len) {
        HV_LOG(HV_LOG_ERROR, "init", "HV-INIT-ENV", "%s is longer than %zu bytes", name, len - 1);
        return HV_EINVAL;
    }
    snprintf(buf, len, "%s", s);
    return HV_OK;
}

static hv_err params_load(params_t *p) {
    memset(p, 0, sizeof(*p));
    p->env_rank = p->env_size = p->env_local_rank = p->env_local_size = -1;
    p->peer_timeout_ms = 5000;
    p->rdzv_timeout_ms = 90000;
    p->cycle_time_us = 1000;
    p->spin_us = UINT32_MAX;
    p->fusion_threshold = 128u << 20;
    p->small_bytes = SIZE_MAX;
    p->spec_bytes = SIZE_MAX;
    p->liveness_ms = 500;
    hv_err rc;
    HV_TRY_GOTO(env_int("HV_SIZE", 1, 1 << 20, &p->env_size), rc, out);
    HV_TRY_GOTO(env_int("HV_RANK", 0, (1 << 20) - 1, &p->env_rank), rc, out);
    HV_TRY_GOTO(env_int("HV_LOCAL_SIZE", 1, 1 << 20, &p->env_local_size), rc, out);
    HV_TRY_GOTO(env_int("HV_LOCAL_RANK", 0, (1 << 20) - 1, &p->env_local_rank), rc, out);
    HV_TRY_GOTO(env_str("HV_HEAD", p->head, sizeof(p->head)), rc, out);
    HV_TRY_GOTO(env_u64("HV_JOB_ID", 0, UINT64_MAX, &p->job_id, &p->have_job), rc, out);
    HV_TRY_GOTO(env_u64("HV_WORKER_ID", 0, UINT64_MAX, &p->worker_id, &p->have_worker), rc, out);
    HV_TRY_GOTO(env_str("HV_RDZV_DIR", p->rdzv_dir, sizeof(p->rdzv_dir)), rc, out);
    // The agent sets HV_NODE (and HV_NODE_NAME, the older spelling).
    HV_TRY_GOTO(env_str("HV_NODE_NAME", p->node, sizeof(p->node)), rc, out);
    HV_TRY_GOTO(env_str("HV_NODE", p->node, sizeof(p->node)), rc, out);
    HV_TRY_GOTO(env_str("HV_DATA_ADDR", p->data_addr, sizeof(p->data_addr)), rc, out);
    HV_TRY_GOTO(env_u32("HV_PEER_TIMEOUT_MS", 10, 3600000, &p->peer_timeout_ms), rc, out);
    HV_TRY_GOTO(env_u32("HV_RDZV_TIMEOUT_MS", 10, 86400000, &p->rdzv_timeout_ms), rc, out);
    HV_TRY_GOTO(env_u32("HV_SPIN_US", 0, 1000000, &p->spin_us), rc, out);
    HV_TRY_GOTO(env_u32("HV_LIVENESS_MS", 0, 600000, &p->liveness_ms), rc, out);
    if (p->liveness_ms > 0 && p->liveness_ms < 50) {
        // Under TCP's own delays (acknowledgements, retransmissions): every link would be silent.
        HV_LOG(HV_LOG_ERROR, "init", "HV-INIT-ENV",
               "HV_LIVENESS_MS=%u: expected 0 (off) or at least 50 (ms)", p->liveness_ms);
        rc = HV_EINVAL;
        goto out;
    }
    HV_TRY_GOTO(env_size("HV_FUSION_THRESHOLD", &p->fusion_threshold), rc, out);
    HV_TRY_GOTO(env_size("HV_STAGE_BYTES", &p->stage_bytes), rc, out);
    HV_TRY_GOTO(env_size("HV_SMALL_BYTES", &p->small_bytes), rc, out);
    HV_TRY_GOTO(env_size("HV_SPEC_BYTES", &p->spec_bytes), rc, out);
    HV_TRY_GOTO(env_size("HV_CHUNK_BYTES", &p->chunk_bytes), rc, out);
    const char *hier = getenv("HV_HIERARCHICAL");
    p->hierarchical = hier == NULL || strcmp(hier, "0") != 0;
    HV_TRY_GOTO(env_size("HV_HIER_MIN_BYTES", &p->hier_min_bytes), rc, out);
    const char *dw = getenv("HV_DEATH_WATCH");
    p->death_watch = dw == NULL || strcmp(dw, "0") != 0;
    const char *nccl = getenv("HV_NCCL");
    p->use_nccl = nccl == NULL || strcmp(nccl, "0") != 0;
    p->shm_bytes = 4u << 20;
    const char *shm = getenv("HV_SHM");
    if (shm != NULL && strcmp(shm, "0") == 0) {
        p->shm_bytes = 0;
    } else {
        HV_TRY_GOTO(env_size("HV_SHM_BYTES", &p->shm_bytes), rc, out);
    }
    uint64_t sb = 0;
    HV_TRY_GOTO(env_size("HV_SOCKET_BUF", &sb), rc, out);
    p->sock_buf = sb > INT_MAX ? INT_MAX : (int)sb;
    const char *ct = getenv("HV_CYCLE_TIME_MS");
    if (ct != NULL && ct[0] != '\0') {
        char *end = NULL;
        errno = 0;
        double ms = strtod(ct, &end);
        if (errno != 0 || end == ct || *end != '\0' || !(ms >= 0.001 && ms <= 10000)) {
            HV_LOG(HV_LOG_ERROR, "init", "HV-INIT-ENV",
                   "HV_CYCLE_TIME_MS=%s: expected milliseconds in [0.001, 10000]", ct);
            rc = HV_EINVAL;
            goto out;
        }
        p->cycle_time_us = (uint32_t)lround(ms * 1000.0);
    }
    if (p->env_rank >= 0 && p->env_size > 0 && p->env_rank >= p->env_size) {
        HV_LOG(HV_LOG_ERROR, "init", "HV-INIT-ENV", "HV_RANK=%d is not below HV_SIZE=%d",
               p->env_rank, p->env_size);
        rc = HV_EINVAL;
        goto out;
    }
    if (p->env_local_rank >= 0 && p->env_local_size > 0 && p->env_local_rank >= p->env_local_size) {
        HV_LOG(HV_LOG_ERROR, "init", "HV-INIT-ENV",
               "HV_LOCAL_RANK=%d is not below HV_LOCAL_SIZE=%d", p->env_local_rank,
               p->env_local_size);
        rc = HV_EINVAL;
        goto out;
    }
    if (p->node[0] == '\0' && gethostname(p->node, sizeof(p->node) - 1) != 0) {
        snprintf(p->node, sizeof(p->node), "localhost");
    }
    rc = HV_OK;
out:
    p->loaded = 1;
    p->rc = rc;
    return rc;
}

static int is_loopback_target(const char *hostport) {
    char host[256];
    int port;
    if (hv_parse_hostport(hostport, host, sizeof(host), &port) != HV_OK) {
        return 0;
    }
    return strncmp(host, "127.", 4) == 0 || strcmp(host, "localhost") == 0 ||
           strcmp(host, "::1") == 0;
}

/* 1 when the head is reached at an IPv6 literal ("[::1]:7000"): the data plane follows it. */
static int is_ipv6_target(const char *hostport) {
    char host[256];
    int port;
    return hv_parse_hostport(hostport, host, sizeof(host), &port) == HV_OK &&
           strchr(host, ':') != NULL;
}

/* ---- logging --------------------------------------------------------------------------------- */

static void user_log_adapter(hv_log_level level, const char *subsys, const char *msgid,
                             const char *text, void *ud) {
    (void)ud;
    hv_log_fn fn = g.user_log;
    if (fn != NULL) {
        fn((int)level, subsys, msgid, text, g.user_log_ud);
    }
}

void hv_set_logger(hv_log_fn fn, void *ud) {
    g.user_log = fn;
    g.user_log_ud = ud;
    hv_log_set_sink(fn != NULL ? user_log_adapter : NULL, NULL);
}

/* ---- lifetime -------------------------------------------------------------------------------- */

static void set_identity(int rank, int size, int local_rank, int local_size, int cross_rank,
                         int cross_size) {
    atomic_store(&g.rank, rank);
    atomic_store(&g.size, size);
    atomic_store(&g.local_rank, local_rank);
    atomic_store(&g.local_size, local_size);
    atomic_store(&g.cross_rank, cross_rank);
    atomic_store(&g.cross_size, cross_size);
}

/* The member's world changed (first join, elastic re-join, leaving): the public identity and
 * engine follow it. Runs on the thread that joins, possibly under g.mu (hv_init): it takes no
 * lock. Between rounds the identity stays that of the last world and collectives fail with
 * HV_ESTATE (engine NULL). */
static void proc_on_world(void *ud, hv__world_t *w) {
    (void)ud;
    if (w == NULL) {
        atomic_store(&g.engine, NULL);
        return;
    }
    const hv__rdzv_assignment_t *a = hv__world_assignment(w);
    set_identity(a->rank, a->size, a->local_rank, a->local_size, a->cross_rank, a->cross_size);
    g.last_generation = a->generation;
    atomic_store(&g.generation, a->generation);
    // A collective that failed in the previous world says nothing about this one: Done after a
    // successful (re-joined) run must still be reported.
    atomic_store(&g.user_failed, 0);
    atomic_store(&g.engine, hv__world_engine(w));
}

/* A worker whose agent died has lost the read end of its stdout: with SIGPIPE's default action
 * the next printf kills it, before it writes what matters more (a checkpoint, a log file, Done).
 * The writes fail with EPIPE instead. A handler the program installed itself is left alone. */
static void ignore_sigpipe(void) {
    struct sigaction old;
    if (sigaction(SIGPIPE, NULL, &old) == 0 && old.sa_handler == SIG_DFL &&
        (old.sa_flags & SA_SIGINFO) == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = SIG_IGN;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGPIPE, &sa, NULL);
    }
}

static hv_err init_locked(const hv_config_t *cfg) {
    if (atomic_load(&g.inited)) {
        return HV_ESTATE;
    }
    hv__agent_tie(); // done at load for libhv.so; here for programs linked with libhv.a
    ignore_sigpipe();
    if (cfg != NULL && cfg->size < sizeof(size_t)) {
        return HV_EINVAL;
    }
    if (!g.p.loaded) {
        hv_log_init("libhv");
        if (getenv("HV_LOG_LEVEL") == NULL) {
            hv_log_set_level(HV_LOG_WARN); // a library stays quiet unless asked
        }
        params_load(&g.p);
    }
    if (g.p.rc != HV_OK) {
        return g.p.rc;
    }
    const params_t *p = &g.p;
    g.init_error[0] = '\0';
    hv__world_opts_t wo = {
        .bind_addr = p->data_addr[0] ? p->data_addr : NULL,
        .host_name = p->node,
        .last_generation = g.last_generation,
        .rdzv_timeout_ms = p->rdzv_timeout_ms,
        .peer_timeout_ms = p->peer_timeout_ms,
        .spin_us = p->spin_us,
        .cycle_time_us = p->cycle_time_us,
        .fusion_threshold = p->fusion_threshold,
        .stage_bytes = (size_t)p->stage_bytes,
        .small_bytes = (size_t)p->small_bytes,
        .spec_bytes = (size_t)p->spec_bytes,
        .sock_buf = p->sock_buf,
        .shm_bytes = (size_t)p->shm_bytes,
        .chunk_bytes = (size_t)p->chunk_bytes,
        .use_nccl = p->use_nccl,
        .hierarchical = p->hierarchical,
        .hier_min_bytes = (size_t)p->hier_min_bytes,
        .liveness_ms = p->liveness_ms,
        .death_watch = p->death_watch,
    };
    // Explicit configuration wins over the environment (size says which fields exist).
#define CFG_HAS(f) (cfg != NULL && cfg->size >= offsetof(hv_config_t, f) + sizeof(cfg->f))
    if (CFG_HAS(peer_timeout_ms) && cfg->peer_timeout_ms) {
        wo.peer_timeout_ms = cfg->peer_timeout_ms;
    }
    if (CFG_HAS(fusion_threshold) && cfg->fusion_threshold) {
        wo.fusion_threshold = cfg->fusion_threshold;
    }
    if (CFG_HAS(cycle_time_us) && cfg->cycle_time_us) {
        wo.cycle_time_us = cfg->cycle_time_us;
    }
    if (CFG_HAS(rdzv_timeout_ms) && cfg->rdzv_timeout_ms) {
        wo.rdzv_timeout_ms = cfg->rdzv_timeout_ms;
    }
    if (CFG_HAS(spin_us) && cfg->spin_us) {
        wo.spin_us = cfg->spin_us;
    }
    if (CFG_HAS(data_addr) && cfg->data_addr != NULL) {
        wo.bind_addr = cfg->data_addr;
    }
#undef CFG_HAS
    hv_err rc = HV_OK;
    int fallback_env = 0;
    hv__member_opts_t mo = {.on_world = proc_on_world};
    g.member = NULL;
    if (p->head[0] != '\0' && p->have_job && p->have_worker) {
        int v6 = is_ipv6_target(p->head);
        if (is_loopback_target(p->head)) {
            wo.advertise_ip = v6 ? "::1" : "127.0.0.1";
        }
        if (v6 && wo.bind_addr == NULL) {
            /* Dual-stack where the system allows it; peers are given an IPv6 address. */
            wo.bind_addr = "[::]:0";
        }
        rc = hv__rdzv_head_client(p->head, p->job_id, p->worker_id, &wo.rdzv);
        if (rc == HV_OK) {
            mo.world = wo;
            rc = hv__member_create(&mo, &g.member);
        }
        if (rc == HV_ENOTSUP && p->env_size > 0) {
            // A head without the Rendezvous service: keep the identity the agent gave us.
            HV_LOG(HV_LOG_WARN, "init", "HV-INIT-NORDZV",
                   "the head at %s has no Rendezvous service; running without a data plane as "
                   "rank %d of %d",
                   p->head, p->env_rank, p->env_size);
            fallback_env = 1;
            rc = HV_OK;
        }
    } else if (p->rdzv_dir[0] != '\0') {
        if (p->env_rank < 0 || p->env_size < 1) {
            HV_LOG(HV_LOG_ERROR, "init", "HV-INIT-ENV", "HV_RDZV_DIR needs HV_RANK and HV_SIZE");
            return HV_EINVAL;
        }
        wo.advertise_ip = "127.0.0.1";
        if (wo.bind_addr == NULL) {
            wo.bind_addr = "127.0.0.1:0";
        }
        rc = hv__rdzv_file_client(p->rdzv_dir, p->env_rank, p->env_size, &wo.rdzv);
        if (rc == HV_OK) {
            mo.world = wo;
            rc = hv__member_create(&mo, &g.member);
        }
    } else if (p->env_size > 1) {
        // Identity without a way to find peers (e.g. an agent without a head rendezvous).
        fallback_env = 1;
    } else {
        if (g.solo == NULL) {
            rc = hv__rdzv_local_store_create(1, &g.solo);
        }
        if (rc == HV_OK) {
            rc = hv__rdzv_local_client(g.solo, 0, &wo.rdzv);
        }
        if (rc == HV_OK) {
            wo.bind_addr = "127.0.0.1:0";
            mo.world = wo;
            rc = hv__member_create(&mo, &g.member);
        }
    }
    if (rc != HV_OK) {
        g.member = NULL;
        snprintf(g.init_error, sizeof(g.init_error), "hv_init: %s", hv_strerror(rc));
        return rc;
    }
    if (fallback_env) {
        int size = p->env_size > 0 ? p->env_size : 1;
        int rank = p->env_rank >= 0 ? p->env_rank : 0;
        int ls = p->env_local_size > 0 ? p->env_local_size : 1;
        int lr = p->env_local_rank >= 0 ? p->env_local_rank : 0;
        // Without a rendezvous the hosts are not known: as many as the local sizes make.
        set_identity(rank, size, lr, ls, rank / ls, (size + ls - 1) / ls);
        snprintf(g.host, sizeof(g.host), "%s", p->node);
        atomic_store(&g.engine, NULL);
    } else {
        // proc_on_world has set the identity, the generation and the engine.
        const hv__rdzv_assignment_t *a = hv__member_assignment(g.member);
        const char *h = a->peers[a->rank].host;
        snprintf(g.host, sizeof(g.host), "%s", p->head[0] && h[0] ? h : p->node);
    }
    atomic_store(&g.user_failed, 0);
    atomic_store(&g.inited, 1);
    return HV_OK;
}

hv_err hv_init_config(const hv_config_t *cfg) {
    pthread_mutex_lock(&g.mu);
    hv_err rc = init_locked(cfg);
    pthread_mutex_unlock(&g.mu);
    return rc;
}

hv_err hv_init(void) { return hv_init_config(NULL); }

hv_err hv_shutdown(void) {
    pthread_mutex_lock(&g.mu);
    hv_err rc = HV_OK;
    if (atomic_load(&g.inited)) {
        atomic_store(&g.engine, NULL);
        // Done means "the training function returned": report it unless the program saw a
        // collective fail. (A peer that shut down first may have failed the engine after the
        // last collective; that is a normal end, not a failure.)
        // (After hv_elastic_run, Done was reported already and is not sent twice; a removed
        // worker never reports it.)
        int healthy = !atomic_load(&g.user_failed);
        if (g.member != NULL) {
            rc = hv__member_destroy(g.member, healthy);
            g.member = NULL;
        }
        atomic_store(&g.generation, 0);
        set_identity(-1, -1, -1, -1, -1, -1);
        g.host[0] = '\0';
        atomic_store(&g.inited, 0);
    }
    pthread_mutex_unlock(&g.mu);
    return rc;
}

/* The exit handler of hv_shutdown_at_exit (on_exit: it gets the exit status). */
static void exit_handler(int status, void *arg) {
    (void)arg;
    if (getpid() != g.exit_pid || !atomic_load(&g.inited)) {
        return;
    }
    if (status != 0) {
        HV_LOG(HV_LOG_INFO, "init", "HV-EXIT-STATUS",
               "exiting with status %d: leaving the job without reporting Done", status);
        return;
    }
    hv_shutdown();
}

hv_err hv_shutdown_at_exit(void) {
    pthread_mutex_lock(&g.mu);
    hv_err rc = HV_OK;
    if (g.exit_pid != getpid()) {
#ifdef __GLIBC__
        rc = on_exit(exit_handler, NULL) == 0 ? HV_OK : HV_ENOMEM;
#else
        rc = HV_ENOTSUP;
#endif
        if (rc == HV_OK) {
            g.exit_pid = getpid();
        }
    }
    pthread_mutex_unlock(&g.mu);
    return rc;
}

hv_err hv_abort(void) {
    pthread_mutex_lock(&g.mu);
    hv_err rc = HV_ESTATE;
    if (atomic_load(&g.inited)) {
        if (g.member != NULL) {
            hv__member_abort(g.member, HV_ECANCELED, "hv_abort called");
        }
        rc = HV_OK;
    }
    pthread_mutex_unlock(&g.mu);
    return rc;
}

const char *hv_last_error(char *buf, size_t len) {
    if (buf == NULL || len == 0) {
        return buf;
    }
    pthread_mutex_lock(&g.mu);
    hv__engine_t *e = atomic_load(&g.engine);
    buf[0] = '\0';
    if (e != NULL) {
        hv__engine_last_error(e, buf, len);
    } else if (g.member != NULL) {
        hv__member_last_error(g.member, buf, len); // why a re-join failed
    }
    if (buf[0] == '\0' && e == NULL) {
        snprintf(buf, len, "%s", g.init_error);
    }
    pthread_mutex_unlock(&g.mu);
    return buf;
}

uint32_t hv_generation(void) { return atomic_load(&g.generation); }

hv__member_t *hv__process_member(void) { return atomic_load(&g.inited) ? g.member : NULL; }

int hv__process_inited(void) { return atomic_load(&g.inited); }

int hv_rank(void) { return atomic_load(&g.rank); }
int hv_size(void) { return atomic_load(&g.size); }
int hv_local_rank(void) { return atomic_load(&g.local_rank); }
int hv_local_size(void) { return atomic_load(&g.local_size); }
int hv_cross_rank(void) { return atomic_load(&g.cross_rank); }
int hv_cross_size(void) { return atomic_load(&g.cross_size); }
const char *hv_host_name(void) { return g.host; }

/* ---- collectives ----------------------------------------------------------------------------- */

/* Notes data-plane failures seen by the program (argument and usage errors do not count). */
static hv_err seen(hv_err rc) {
    if (rc != HV_OK && rc != HV_EINVAL && rc != HV_EEXIST && rc != HV_ENOTFOUND &&
        rc != HV_ETOOBIG && rc != HV_ESTATE && rc != HV_ENOTSUP) {
        atomic_store(&g.user_failed, 1);
    }
    return rc;
}

/* The engine, or why there is none. */
static hv_err engine_get(hv__engine_t **out) {
    hv__engine_t *e = atomic_load(&g.engine);
    if (e != NULL) {
        *out = e;
        return HV_OK;
    }
    if (!atomic_load(&g.inited)) {
        return HV_ESTATE;
    }
    if (g.member != NULL) {
        return HV_ESTATE; // between two rounds of an elastic job, or removed from it
    }
    HV_LOG(HV_LOG_ERROR, "api", "HV-API-NODATA",
           "no data plane: libhv was started without a rendezvous (set HV_HEAD/HV_JOB_ID/"
           "HV_WORKER_ID, or HV_RDZV_DIR with HV_RANK and HV_SIZE)");
    return HV_ENOTSUP;
}

/* One allreduce or broadcast on the engine: run now (without handle; name NULL: named by the
 * call sequence) or submitted under name with handle; the plain, named and *_on calls (after
 * their memory checks) share them. */
static hv_err allreduce_with(hv__engine_t *e, const char *name, const void *in, void *out,
                             size_t count, hv_dtype dt, hv_op op, hv_handle_t *handle) {
    hv__op_desc_t d = {.kind = HV__OP_ALLREDUCE,
                       .name = name,
                       .in = in,
                       .out = out,
                       .count = count,
                       .dtype = dt,
                       .op = op};
    return seen(handle != NULL ? hv__engine_submit(e, &d, 1, handle) : hv__engine_run(e, &d));
}

static hv_err broadcast_with(hv__engine_t *e, const char *name, void *buf, size_t count,
                             hv_dtype dt, int root, hv_handle_t *handle) {
    hv__op_desc_t d = {.kind = HV__OP_BROADCAST,
                       .name = name,
                       .in = buf,
                       .out = buf,
                       .count = count,
                       .dtype = dt,
                       .root = root};
    return seen(handle != NULL ? hv__engine_submit(e, &d, 1, handle) : hv__engine_run(e, &d));
}

hv_err hv_allreduce(const void *in, void *out, size_t count, hv_dtype dt, hv_op op) {
    hv__engine_t *e;
    HV_TRY(engine_get(&e));
    return allreduce_with(e, NULL, in, out, count, dt, op, NULL);
}

hv_err hv_allreduce_async(const char *name, const void *in, void *out, size_t count, hv_dtype dt,
                          hv_op op, hv_handle_t *handle) {
    hv__engine_t *e;
    HV_TRY(engine_get(&e));
    if (name == NULL || handle == NULL) {
        return HV_EINVAL;
    }
    return allreduce_with(e, name, in, out, count, dt, op, handle);
}

hv_err hv_allreduce_group_async(const hv_tensor_t *tensors, size_t n, hv_op op,
                                hv_handle_t *handle) {
    hv__engine_t *e;
    HV_TRY(engine_get(&e));
    if (tensors == NULL || n == 0 || handle == NULL || n > (1u << 20)) {
        return HV_EINVAL;
    }
    hv__op_desc_t *ds = hv_calloc(n, sizeof(*ds));
    if (ds == NULL) {
        return HV_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        ds[i] = (hv__op_desc_t){.kind = HV__OP_ALLREDUCE,
                                .name = tensors[i].name,
                                .in = tensors[i].in,
                                .out = tensors[i].out,
                                .count = tensors[i].count,
                                .dtype = tensors[i].dtype,
                                .op = op};
        if (tensors[i].name == NULL) {
            hv_free(ds);
            return HV_EINVAL;
        }
    }
    hv_err rc = seen(hv__engine_submit(e, ds, n, handle));
    hv_free(ds);
    return rc;
}

hv_err hv_allreduce_named(const char *name, const void *in, void *out, size_t count, hv_dtype dt,
                          hv_op op) {
    hv__engine_t *e;
    HV_TRY(engine_get(&e));
    if (name == NULL) {
        return HV_EINVAL;
    }
    return allreduce_with(e, name, in, out, count, dt, op, NULL);
}

hv_err hv_broadcast_named(const char *name, void *buf, size_t count, hv_dtype dt, int root) {
    hv__engine_t *e;
    HV_TRY(engine_get(&e));
    if (name == NULL) {
        return HV_EINVAL;
    }
    return broadcast_with(e, name, buf, count, dt, root, NULL);
}

hv_err hv_broadcast(void *buf, size_t count, hv_dtype dt, int root) {
    hv__engine_t *e;
    HV_TRY(engine_get(&e));
    return broadcast_with(e, NULL, buf, count, dt, root, NULL);
}

hv_err hv_broadcast_async(const char *name, void *buf, size_t count, hv_dtype dt, int root,
                          hv_handle_t *handle) {
    hv__engine_t *e;
    HV_TRY(engine_get(&e));
    if (name == NULL || handle == NULL) {
        return HV_EINVAL;
    }
    return broadcast_with(e, name, buf, count, dt, root, handle);
}

/* ---- collectives on declared memory (the *_on calls) ------------------------------------------ */

int hv_cuda_built(void) { return hv__gpu_built(); }

/* Checks that p (NULL: nothing to check) is the kind of memory the caller declared. */
static hv_err mem_matches(const char *call, const char *which, const void *p, int device) {
    if (p == NULL) {
        return HV_OK;
    }
    int at = hv__gpu_device_of(p);
    if (at == device) {
        return HV_OK;
    }
    if (device < 0) {
        HV_LOG(HV_LOG_ERROR, "api", "HV-API-MEMKIND",
               "%s: the %s buffer was declared host memory (device -1) but is on CUDA device %d",
               call, which, at);
    } else if (at < 0) {
        HV_LOG(HV_LOG_ERROR, "api", "HV-API-MEMKIND",
               "%s: the %s buffer was declared CUDA device %d memory but is host memory (or "
               "memory CUDA does not know)",
               call, which, device);
    } else {
        HV_LOG(HV_LOG_ERROR, "api", "HV-API-MEMKIND",
               "%s: the %s buffer was declared CUDA device %d memory but is on device %d", call,
               which, device, at);
    }
    return HV_EINVAL;
}

/* The common part of the *_on calls: checks the declaration against the build and the buffers,
 * then waits for the caller's stream, so that the engine reads what the stream's work wrote. */
static hv_err mem_prepare(const char *call, const void *in, const void *out, int device,
                          void *stream) {
    if (device < -1) {
        HV_LOG(HV_LOG_ERROR, "api", "HV-API-MEMKIND",
               "%s: device %d: give -1 for host memory or a CUDA device ordinal", call, device);
        return HV_EINVAL;
    }
    if (device >= 0 && !hv__gpu_built()) {
        HV_LOG(HV_LOG_ERROR, "api", "HV-API-NOCUDA",
               "%s: CUDA device memory was passed to a libhv built without CUDA and NCCL; "
               "rebuild libhv where CMake finds the CUDA toolkit and NCCL (-DHV_WITH_NCCL=ON), "
               "or copy the data to host memory first",
               call);
        return HV_ENOTSUP;
    }
    if (device >= 0 && hv__gpu_count() == 0) {
        HV_LOG(HV_LOG_ERROR, "api", "HV-API-NOCUDA",
               "%s: CUDA device memory was passed but this process sees no CUDA device", call);
        return HV_ENOTSUP;
    }
    if (device < 0 && stream != NULL) {
        HV_LOG(HV_LOG_ERROR, "api", "HV-API-MEMKIND",
               "%s: a stream was given for host memory (device -1): pass NULL", call);
        return HV_EINVAL;
    }
    HV_TRY(mem_matches(call, "input", in, device));
    HV_TRY(mem_matches(call, "output", out, device));
    return device >= 0 ? hv__gpu_stream_sync(device, stream) : HV_OK;
}

hv_err hv_allreduce_on(const void *in, void *out, size_t count, hv_dtype dt, hv_op op, int device,
                       void *stream) {
    hv__engine_t *e;
    HV_TRY(engine_get(&e));
    HV_TRY(mem_prepare("hv_allreduce_on", in, out, device, stream));
    return allreduce_with(e, NULL, in, out, count, dt, op, NULL);
}

hv_err hv_allreduce_async_on(const char *name, const void *in, void *out, size_t count, hv_dtype dt,
                             hv_op op, int device, void *stream, hv_handle_t *handle) {
    hv__engine_t *e;
    HV_TRY(engine_get(&e));
    if (name == NULL || handle == NULL) {
        return HV_EINVAL;
    }
    HV_TRY(mem_prepare("hv_allreduce_async_on", in, out, device, stream));
    return allreduce_with(e, name, in, out, count, dt, op, handle);
}

hv_err hv_broadcast_on(void *buf, size_t count, hv_dtype dt, int root, int device, void *stream) {
    hv__engine_t *e;
    HV_TRY(engine_get(&e));
    HV_TRY(mem_prepare("hv_broadcast_on", buf, buf, device, stream));
    return broadcast_with(e, NULL, buf, count, dt, root, NULL);
}

hv_err hv_broadcast_async_on(const char *name, void *buf, size_t count, hv_dtype dt, int root,
                             int device, void *stream, hv_handle_t *handle) {
    hv__engine_t *e;
    HV_TRY(engine_get(&e));
    if (name == NULL || handle == NULL) {
        return HV_EINVAL;
    }
    HV_TRY(mem_prepare("hv_broadcast_async_on", buf, buf, device, stream));
    return broadcast_with(e, name, buf, count, dt, root, handle);
}

/* One allgather on the engine: run now (name NULL) or submitted under name with handle. */
static hv_err allgather_with(const char *name, const void *in, size_t count, hv_dtype dt, void *out,
                             size_t out_cap, size_t *counts, hv_handle_t *handle) {
    hv__engine_t *e;
    HV_TRY(engine_get(&e));
    hv__op_desc_t d = {.kind = HV__OP_ALLGATHER,
                       .name = name,
                       .in = in,
                       .out = out,
                       .count = count,
                       .dtype = dt,
                       .out_cap = out_cap,
                       .counts = counts};
    return seen(handle != NULL ? hv__engine_submit(e, &d, 1, handle) : hv__engine_run(e, &d));
}

hv_err hv_allgather(const void *in, size_t count, hv_dtype dt, void *out, size_t out_cap,
                    size_t *counts) {
    return allgather_with(NULL, in, count, dt, out, out_cap, counts, NULL);
}

hv_err hv_allgather_async(const char *name, const void *in, size_t count, hv_dtype dt, void *out,
                          size_t out_cap, size_t *counts, hv_handle_t *handle) {
    if (name == NULL || handle == NULL) {
        return HV_EINVAL;
    }
    return allgather_with(name, in, count, dt, out, out_cap, counts, handle);
}

hv_err hv_join(int *last_rank) {
    hv__engine_t *e;
    HV_TRY(engine_get(&e));
    int last = -1;
    hv__op_desc_t d = {.kind = HV__OP_JOIN, .name = "hv.join", .out = &last};
    hv_err rc = seen(hv__engine_run(e, &d));
    if (rc == HV_OK) {
        // Unnamed blocking calls are named by a per-rank sequence, which the ranks that did not
        // join moved on while this one waited: every rank takes the highest.
        int64_t seq = (int64_t)hv__engine_anon_seq(e);
        hv__op_desc_t m = {.kind = HV__OP_ALLREDUCE,
                           .name = "hv.join.seq",
                           .in = &seq,
                           .out = &seq,
                           .count = 1,
                           .dtype = HV_INT64,
                           .op = HV_MAX};
        rc = seen(hv__engine_run(e, &m));
        if (rc == HV_OK) {
            hv__engine_set_anon_seq(e, (uint64_t)seq);
        }
    }
    if (rc == HV_OK && last_rank != NULL) {
        *last_rank = last;
    }
    return rc;
}

hv_err hv_barrier(void) {
    hv__engine_t *e;
    HV_TRY(engine_get(&e));
    hv__op_desc_t d = {.kind = HV__OP_BARRIER};
    return seen(hv__engine_run(e, &d));
}

hv_err hv_wait(hv_handle_t handle) {
    hv__engine_t *e;
    HV_TRY(engine_get(&e));
    return seen(hv__engine_wait(e, handle));
}

hv_err hv_test(hv_handle_t handle, int *done) {
    hv__engine_t *e;
    HV_TRY(engine_get(&e));
    return seen(hv__engine_test(e, handle, done));
}
