/*
 * hvhead: the head process. `hvhead start --config FILE` validates the config (exit 2 on a
 * mistake, before anything starts), opens the sqlite store, reloads the cluster's state, serves
 * the Cluster, Jobs and Rendezvous services on one gRPC port and prints one ready line naming the
 * address. SIGINT/SIGTERM stop it cleanly; `hvhead stop` signals the head that holds the lock
 * on its pid file (a daemon) or on its data directory, never a pid read from a file alone.
 *
 * This file only wires the modules together, on one libuv loop thread:
 *   store (sqlite) <- driver (decisions, the tables) <- services (gRPC methods)
 * The driver reaches the services only through the hv_driver_io_t below (orders, answers,
 * pushes, watcher news), so no two modules call each other in a circle. A 200 ms tick drives the
 * driver's clocks (leases, deadlines, cooldowns) and the rendezvous' key-value waits.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <uv.h>

#include "artifacts.h"
#include "auth.h"
#include "backup.h"
#include "history.h"
#include "validate.h"
#include "autoscale.h"
#include "config.h"
#include "conngate.h"
#include "driver.h"
#include "log.h"
#include "mem.h"
#include "opt.h"
#include "notify.h"
#include "metrics.h"
#include "page_serve.h"
#include "rpc.h"
#include "svc_auth.h"
#include "store.h"
#include "svc_artifacts.h"
#include "svc_cluster.h"
#include "svc_cost.h"
#include "svc_jobs.h"
#include "svc_actors.h"
#include "svc_keepers.h"
#include "svc_rdzv.h"
#include "util.h"

#define HEAD_TICK_MS 200
#define HEAD_CLIENT_RELOAD_TICKS 10 /* client tokens re-read every 2 s */
/* Descriptors kept out of the derived bounds: the store, job logs being written, uploads, agents'
 * and clients' connections, and a new listener if gRPC loses its own. */
#define HEAD_FD_RESERVE 64
#define HEAD_FDS_PER_WATCH 4      /* a Watch stream's log file, and room for connections */
#define HEAD_WATCH_MAX_AUTO 16384 /* derived bound at most, however high the limit */
#define HEAD_STATUS_TICKS 25      /* the service manager's STATUS= line every 5 s */

typedef struct head_s {
    uv_loop_t *loop;
    hv_head_config_t cfg;
    hv_store_t *store;
    hv_artifacts_t *arts;
    hv_driver_t *driver;
    hv_rpc_engine_t *eng;
    hv_rpc_server_t *srv;
    hv_svc_cluster_t *cluster;
    hv_svc_jobs_t *jobs;
    hv_actors_t *actors;       /* the head's actors (driver/actors_drv.c) */
    hv_svc_actors_t *actorsvc; /* the Actors service */
    hv_svc_cost_t *cost;
    hv_svc_artifacts_t *artsvc;
    hv_svc_rdzv_t *rdzv;
    hv_svc_keepers_t *keepers;
    hv_svc_auth_t *authsvc;
    hv_autoscale_t *as;     /* NULL without an autoscaler */
    hv_metrics_t *metrics;  /* counters (the /metrics route) */
    hv_http_server_t *http; /* the listener of /metrics and the status page, or NULL */
    hv_page_src_t page;     /* what the status page's routes read (services/page_serve.h) */
    hv_auth_t auth;         /* the head's key, client tokens, revoked node credentials */
    uint32_t ticks;
    uv_timer_t tick;
    uv_timer_t wake;  /* the driver's early wake-up (a suspicion's grace ends: hv_driver_wake) */
    uint64_t wake_at; /* monotonic ms it is due (0: not armed) */
    uv_signal_t sigint, sigterm;
    int port;            /* bound port */
    char advertise[300]; /* host:port agents and workers use to reach the head */
    char pid_path[4096];
    int lock_fd; /* DATA_DIR/hvhead.lock, locked while this head lives */
    int stopping;
    /* What cmd_start's steps share (set by the step named), and what head_close must undo. */
    int cfg_loaded;        /* cfg holds a loaded config (head_open_config) */
    int daemon;            /* this process is the daemon and holds pid_path (head_daemonize) */
    int handles_open;      /* tick, sigint and sigterm are initialized (head_announce) */
    char client_path[700]; /* where the client token is (head_open_config); never its value */
    char host[256];        /* the listen address's host (head_start_services) */
    int metrics_port;      /* the bound /metrics port, 0 without one (head_start_services) */
    hv_notify_t notify;    /* the service manager (systemd Type=notify), when one listens */
} head_t;

#define HEAD_DAEMON_READY_MS 60000

/* A start failure: on stderr, and (with --daemon) to the parent still waiting in the shell. */
static void head_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void head_fail(const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", msg);
    hv_daemon_failed(msg);
}

/* Raises the open-file soft limit to the hard limit (a head serves many connections and streams;
 * the soft default of 1024 is for interactive shells) and derives the bounds that the config
 * leaves at 0: Watch streams, (limit - HEAD_FD_RESERVE) / HEAD_FDS_PER_WATCH in all, half of that
 * per client credential; connections as hv_conngate_derive says (480 in all and 240 per client
 * address at a limit of 1024). */
static void head_fd_limits(head_t *h) {
    struct rlimit rl;
    uint64_t limit = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        if (rl.rlim_cur < rl.rlim_max) {
            struct rlimit want = {.rlim_cur = rl.rlim_max, .rlim_max = rl.rlim_max};
            if (setrlimit(RLIMIT_NOFILE, &want) != 0) {
                HV_LOG(HV_LOG_WARN, "head", "HV-HEAD-NOFILE",
                       "cannot raise the open-file limit from %llu to %llu: %s",
                       (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max,
                       strerror(errno));
            } else {
                rl = want;
            }
        }
        limit = rl.rlim_cur == RLIM_INFINITY ? UINT32_MAX : (uint64_t)rl.rlim_cur;
    }
    uint64_t avail = limit > HEAD_FD_RESERVE ? limit - HEAD_FD_RESERVE : 0;
    uint64_t total = avail / HEAD_FDS_PER_WATCH;
    total = total < 1 ? 1 : total > HEAD_WATCH_MAX_AUTO ? HEAD_WATCH_MAX_AUTO : total;
    if (h->cfg.limits.max_watch_streams == 0) {
        h->cfg.limits.max_watch_streams = (uint32_t)total;
    }
    if (h->cfg.limits.max_watch_streams_per_client == 0) {
        uint32_t half = h->cfg.limits.max_watch_streams / 2;
        h->cfg.limits.max_watch_streams_per_client = half > 0 ? half : 1;
    }
    hv_conngate_limits_t conns = {.max_total = h->cfg.limits.max_connections,
                                  .max_per_client = h->cfg.limits.max_connections_per_client};
    hv_conngate_derive(limit, HEAD_FD_RESERVE, &conns);
    h->cfg.limits.max_connections = conns.max_total;
    h->cfg.limits.max_connections_per_client = conns.max_per_client;
    HV_LOG(HV_LOG_INFO, "head", "HV-HEAD-LIMITS",
           "open-file limit %llu; connections at most %u in all and %u per client address, the "
           "last %u kept for nodes' addresses; Watch streams at most %u in all and %u per "
           "client; connections not set up within %u ms are closed",
           (unsigned long long)limit, h->cfg.limits.max_connections,
           h->cfg.limits.max_connections_per_client, conns.node_share,
           h->cfg.limits.max_watch_streams, h->cfg.limits.max_watch_streams_per_client,
           h->cfg.limits.handshake_timeout_ms);
}

/* Two heads on one data directory would corrupt each other's state: the first holds a lock on
 * DATA_DIR/hvhead.lock for its whole life (a kernel lock, so a crash releases it; no stale pid
 * file can block a restart). */
static int head_lock_data_dir(head_t *h) {
    char path[4200];
    snprintf(path, sizeof(path), "%s/hvhead.lock", h->cfg.data_dir);
    int holder = 0;
    hv_err rc = hv_lock_take(path, &h->lock_fd, &holder);
    if (rc == HV_EEXIST) {
        head_fail("hvhead: data directory %s is in use by another head (pid %d); stop it first or "
                  "give this one another data_dir",
                  h->cfg.data_dir, holder);
        return 1;
    }
    if (rc != HV_OK) {
        head_fail("hvhead: cannot lock %s: %s", path, hv_strerror(rc));
        return 1;
    }
    return 0;
}

/* hvhead's commands (a bit each) and options; the lines are those of 'hvhead start --help'. */
enum { HEAD_START = 1u, HEAD_STOP = 2u, HEAD_BACKUP = 4u };
enum {
    HO_CONFIG,
    HO_DATA_DIR,
    HO_LISTEN,
    HO_DAEMON,
    HO_PID_FILE,
    HO_LOG_FILE,
    HO_TO,
    HO_HELP,
    HO_VERSION
};
static const hv_opt_t head_opts[] = {
    {"config", 'c', HV_OPT_TEXT, 0, 0, 0, HO_CONFIG, NULL,
     "  --config FILE, -c FILE  cluster.yaml (see docs/configuration.md); without it,\n"
     "                          the defaults\n"},
    {"data-dir", 0, HV_OPT_TEXT, 0, 0, 0, HO_DATA_DIR, NULL,
     "  --data-dir DIR          overrides data_dir from the config\n"},
    {"listen", 0, HV_OPT_TEXT, 0, 0, HEAD_START, HO_LISTEN, NULL,
     "  --listen HOST:PORT      overrides listen from the config\n"},
    {"daemon", 0, HV_OPT_FLAG, 0, 0, HEAD_START, HO_DAEMON, NULL,
     "  --daemon                run in the background once it serves\n"},
    {"pid-file", 0, HV_OPT_TEXT, 0, 0, HEAD_START | HEAD_STOP, HO_PID_FILE, NULL,
     "  --pid-file FILE         where --daemon writes its pid (default:\n"
     "                          DATA_DIR/hvhead.pid)\n"},
    {"log-file", 0, HV_OPT_TEXT, 0, 0, HEAD_START, HO_LOG_FILE, NULL,
     "  --log-file FILE         append the log there instead of stderr\n"},
    {"to", 0, HV_OPT_TEXT, 0, 0, HEAD_BACKUP, HO_TO, NULL, NULL},
    {"help", 'h', HV_OPT_FLAG, 0, 0, 0, HO_HELP, NULL, "  --help, -h              this help\n"},
    {"version", 0, HV_OPT_FLAG, 0, 0, 0, HO_VERSION, NULL, NULL},
};
#define HEAD_NOPTS (sizeof(head_opts) / sizeof(head_opts[0]))

static void usage(FILE *f) {
    fprintf(f, "usage: hvhead start [--config FILE] [--data-dir DIR] [--listen HOST:PORT]\n"
               "                    [--daemon] [--pid-file FILE] [--log-file FILE]\n"
               "       hvhead stop [--config FILE] [--data-dir DIR] [--pid-file FILE]\n"
               "       hvhead token create [--ttl D] [--uses N] | list | revoke ID\n"
               "       hvhead backup [--config FILE] [--data-dir DIR] --to NEW_DIR\n"
               "       hvhead --version\n"
               "\n"
               "  start   run the head (foreground unless --daemon); prints a ready line\n"
               "  stop    stop the head that holds the pid file (default: DATA_DIR/hvhead.pid)\n"
               "          or, else, DATA_DIR's lock (a head in the foreground)\n"
               "  token   join tokens of the running head: the same as 'hvctl token ...'\n"
               "          (runs the hvctl beside hvhead; --head, --token-file as hvctl's)\n"
               "  backup  copy DATA_DIR into NEW_DIR, consistently, while the head runs or not;\n"
               "          a head started on NEW_DIR (or a copy of it) restores it\n"
               "          (docs/operations.md \"Backup and restore\")\n"
               "\n"
               "'hvhead start --help' and 'hvhead stop --help' describe each option.\n"
               "exit status: 0 done; 64 bad usage; 2 a bad config file; 1 the head could not\n"
               "start or stopped on an error.\n");
}

static void usage_start(FILE *f) {
    fprintf(f, "usage: hvhead start [--config FILE] [--data-dir DIR] [--listen HOST:PORT]\n"
               "                    [--daemon] [--pid-file FILE] [--log-file FILE]\n"
               "\n"
               "Runs the head: the gRPC services on its listen address, state in DATA_DIR.\n"
               "Prints 'hvhead: listening on HOST:PORT ...' once it serves.\n"
               "\n");
    hv_opt_help(f, head_opts, HEAD_NOPTS, HEAD_START);
}

static void usage_stop(FILE *f) {
    fprintf(f, "usage: hvhead stop [--config FILE] [--data-dir DIR] [--pid-file FILE]\n"
               "\n"
               "Stops the head that holds the pid file's lock (default: DATA_DIR/hvhead.pid,\n"
               "DATA_DIR from --data-dir or the config) or, without one, DATA_DIR/hvhead.lock\n"
               "(a head started in the foreground): SIGTERM, then waits up to 15 s. A pid file\n"
               "that no head holds is stale: it is removed, nobody is signalled, exit 1.\n");
}

static void usage_backup(FILE *f) {
    fprintf(f, "usage: hvhead backup [--config FILE] [--data-dir DIR] --to NEW_DIR\n"
               "\n"
               "Copies DATA_DIR (from --data-dir or the config) into NEW_DIR, which must not\n"
               "exist: the state database consistently (while a head runs on it or not), the\n"
               "tokens, the saved states and copies. A head started on NEW_DIR, or a copy of it,\n"
               "restores it (docs/operations.md \"Backup and restore\").\n");
}

/* A usage error, the same shape in all hv tools: "hvhead: MSG (see hvhead --help)", exit 64. */
static int usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "hvhead: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see hvhead --help)\n");
    return 64;
}

/* ---- the driver's io: each action goes to the service that owns the call ------------------ */

static hv_err io_order(void *ud, uint64_t node_id, const hv_order_t *o) {
    head_t *h = ud;
    return h->cluster != NULL ? hv_svc_cluster_order(h->cluster, node_id, o) : HV_ECLOSED;
}

static hv_err io_revoked(void *ud, uint64_t node_id, uint64_t incarnation) {
    head_t *h = ud;
    return hv_auth_revoke_node(&h->auth, node_id, incarnation);
}

/* The driver's blocking file work (a state copy's sync and rename) on libuv's thread pool. */
typedef struct head_work_s {
    uv_work_t req;
    void (*work)(void *arg);
    void (*after)(void *arg, int cancelled);
    void *arg;
} head_work_t;

static void head_work_run(uv_work_t *req) {
    head_work_t *w = req->data;
    w->work(w->arg);
}

static void head_work_after(uv_work_t *req, int status) {
    head_work_t *w = req->data;
    w->after(w->arg, status != 0);
    hv_free(w);
}

static hv_err io_queue_work(void *ud, void (*work)(void *arg),
                            void (*after)(void *arg, int cancelled), void *arg) {
    head_t *h = ud;
    head_work_t *w = hv_calloc(1, sizeof(*w));
    if (w == NULL) {
        return HV_ENOMEM;
    }
    *w = (head_work_t){.work = work, .after = after, .arg = arg};
    w->req.data = w;
    if (uv_queue_work(h->loop, &w->req, head_work_run, head_work_after) != 0) {
        hv_free(w);
        return HV_EINTERNAL;
    }
    return HV_OK;
}

static void io_drop_session(void *ud, uint64_t node_id) {
    head_t *h = ud;
    if (h->cluster != NULL) {
        hv_svc_cluster_drop(h->cluster, node_id);
    }
}

static void io_round(void *ud, const hv_round_info_t *r, const uint64_t *to, size_t nto) {
    head_t *h = ud;
    if (h->rdzv != NULL) {
        hv_svc_rdzv_round(h->rdzv, r, to, nto);
    }
}

static void io_join_answer(void *ud, uint64_t worker_id, hv_err rc, const char *why) {
    head_t *h = ud;
    if (h->rdzv != NULL) {
        hv_svc_rdzv_answer(h->rdzv, worker_id, rc, why);
    }
}

static void io_push(void *ud, uint64_t job_id, uint32_t generation, int failure, uint32_t code,
                    const char *reason, const uint64_t *removed, size_t nremoved) {
    head_t *h = ud;
    if (h->rdzv != NULL) {
        hv_svc_rdzv_push(h->rdzv, job_id, generation, failure, code, reason, removed, nremoved);
    }
}

static void io_job_changed(void *ud, uint64_t job_id) {
    head_t *h = ud;
    if (h->jobs != NULL) {
        hv_svc_jobs_changed(h->jobs, job_id);
    }
}

static void io_job_finished(void *ud, uint64_t job_id) {
    head_t *h = ud;
    if (h->rdzv != NULL) {
        hv_svc_rdzv_finished(h->rdzv, job_id);
    }
}

static void head_wake_cb(uv_timer_t *t) {
    head_t *h = t->data;
    h->wake_at = 0;
    hv_driver_wake(h->driver, hv_now_ms());
}

/* The driver asks to be woken in delay_ms rather than at the next 200 ms tick (the earliest such
 * wish wins). */
static void io_wake(void *ud, uint64_t delay_ms) {
    head_t *h = ud;
    uint64_t at = hv_now_ms() + delay_ms;
    if (!h->handles_open || h->stopping || (h->wake_at != 0 && h->wake_at <= at)) {
        return;
    }
    h->wake_at = at;
    /* From now, not from the loop's cached time (which may be older): never before it is due;
     * plus 1 ms, the driver's wall clock and this one's rounding. */
    uv_update_time(h->loop);
    uv_timer_start(&h->wake, head_wake_cb, delay_ms + 1, 0);
}

/* ---- loop ----------------------------------------------------------------------------------- */

/* The service manager's status line (`systemctl status hvhead`), prefixed by extra (e.g.
 * "READY=1\n"): nodes by state and jobs by state, as the driver holds them. */
static void head_notify_status(head_t *h, const char *extra) {
    if (!hv_notify_active(&h->notify)) {
        return;
    }
    size_t alive = 0, draining = 0, dead = 0, jobs[HV_JOB__COUNT];
    for (const hv_dnode_t *n = hv_driver_nodes(h->driver); n != NULL; n = n->next) {
        if (hv_driver_node_hidden(n)) {
            continue;
        }
        alive += n->state == HV_NODE_ALIVE;
        draining += n->state == HV_NODE_DRAINING;
        dead += n->state == HV_NODE_DEAD;
    }
    hv_driver_job_counts(h->driver, jobs);
    hv_notify_sendf(&h->notify,
                    "%sSTATUS=%s:%d: nodes %zu alive, %zu draining, %zu dead; jobs %zu running, "
                    "%zu pending",
                    extra, h->cfg.cluster_name, h->port, alive, draining, dead,
                    jobs[HV_JOB_RUNNING] + jobs[HV_JOB_PLACING], jobs[HV_JOB_PENDING]);
}

/* Whether the driver holds the job in memory now (hv_driver_job would load it). */
static int head_job_held(void *ud, uint64_t job_id) {
    head_t *h = ud;
    for (const hv_djob_t *j = hv_driver_jobs(h->driver); j != NULL; j = j->next) {
        if (j->jm.id == job_id) {
            return 1;
        }
    }
    return 0;
}

/* The history's retention (head/store/history.h): at start (batches: HV_HISTORY_START_BATCHES) and
 * every history.prune_interval_s (one batch, on the loop). */
static void head_prune_history(head_t *h, int batches) {
    hv_history_policy_t p = {h->cfg.history.max_age_days, h->cfg.history.max_jobs,
                             h->cfg.history.artifact_grace_s};
    if (hv_history_prune(h->store, h->cfg.data_dir, &p, hv_wall_ms(), batches, head_job_held, h,
                         NULL) != HV_OK) {
        HV_LOG(HV_LOG_WARN, "history", "HV-HISTORY-FAIL", "finished jobs not pruned: %s",
               hv_store_last_error(h->store));
    }
}

static void head_tick_cb(uv_timer_t *t) {
    head_t *h = t->data;
    uint64_t now = hv_now_ms();
    hv_driver_tick(h->driver, now);
    hv_svc_rdzv_tick(h->rdzv, now);
    hv_autoscale_tick(h->as, now);
    hv_artifacts_sweep(h->arts, hv_wall_ms());
    hv_notify_watchdog(&h->notify, now);
    if (h->ticks % HEAD_STATUS_TICKS == 0) {
        head_notify_status(h, "");
    }
    uint64_t prune_ticks = (uint64_t)h->cfg.history.prune_interval_s * 1000 / HEAD_TICK_MS;
    if (prune_ticks > 0 && (h->ticks + 1) % prune_ticks == 0) {
        head_prune_history(h, 1);
    }
    if (h->http != NULL && h->ticks % (1000 / HEAD_TICK_MS) == 0) {
        hv_page_sample(&h->page, hv_wall_ms()); /* the job pages' throughput over time */
    }
    if (++h->ticks % HEAD_CLIENT_RELOAD_TICKS == 0) {
        /* A client token file added or deleted takes effect within seconds, without a restart. */
        char err[700];
        if (hv_auth_reload_clients(&h->auth, err, sizeof(err)) != HV_OK) {
            HV_LOG(HV_LOG_WARN, "auth", "HV-AUTH-RELOAD", "client tokens not reloaded: %s", err);
        }
    }
}

static void head_begin_stop(head_t *h, const char *why) {
    if (h->stopping) {
        return;
    }
    h->stopping = 1;
    HV_LOG(HV_LOG_NOTICE, "head", "HV-HEAD-STOP", "stopping (%s)", why);
    hv_notify_sendf(&h->notify, "STOPPING=1\nSTATUS=stopping (%s)", why);
    hv_driver_stop(h->driver);
    uv_timer_stop(&h->tick);
    uv_timer_stop(&h->wake);
    uv_signal_stop(&h->sigint);
    uv_signal_stop(&h->sigterm);
    uv_stop(h->loop);
}

static void head_signal_cb(uv_signal_t *s, int signum) {
    head_begin_stop(s->data, signum == SIGINT ? "SIGINT" : "SIGTERM");
}

/* The address workers and agents are told to use: the configured one, else the listen address,
 * else (wildcard listen) the first non-loopback IPv4 of this host. */
static void head_derive_advertise(head_t *h, const char *listen_host) {
    if (h->cfg.advertise != NULL && h->cfg.advertise[0] != '\0') {
        snprintf(h->advertise, sizeof(h->advertise), "%s", h->cfg.advertise);
        return;
    }
    char host[256] = "127.0.0.1";
    if (strcmp(listen_host, "0.0.0.0") != 0 && strcmp(listen_host, "::") != 0 &&
        strcmp(listen_host, "[::]") != 0) {
        snprintf(host, sizeof(host), "%s", listen_host);
    } else {
        struct ifaddrs *ifs = NULL;
        if (getifaddrs(&ifs) == 0) {
            for (struct ifaddrs *i = ifs; i != NULL; i = i->ifa_next) {
                if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET) {
                    continue;
                }
                struct sockaddr_in *sin = (struct sockaddr_in *)i->ifa_addr;
                if ((ntohl(sin->sin_addr.s_addr) >> 24) == 127) {
                    continue;
                }
                inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host));
                break;
            }
            freeifaddrs(ifs);
        }
    }
    /* An IPv6 literal goes in brackets, or its colons would run into the port's. */
    snprintf(h->advertise, sizeof(h->advertise), strchr(host, ':') ? "[%s]:%d" : "%s:%d", host,
             h->port);
}

typedef struct head_opts_s {
    const char *cmd;
    const char *config;
    const char *data_dir;
    const char *listen;
    const char *pid_file;
    const char *log_file;
    const char *to; /* backup: the new directory */
    int daemon;
} head_opts_t;

static int parse_args(int argc, char **argv, head_opts_t *o) {
    memset(o, 0, sizeof(*o));
    if (argc < 2) {
        return usage_error("%s", "no command given (start, stop, token or backup)");
    }
    o->cmd = argv[1];
    if (strcmp(o->cmd, "--version") == 0 || strcmp(o->cmd, "version") == 0) {
        printf("hvhead %s\n", HV_VERSION_STRING);
        exit(0);
    }
    if (strcmp(o->cmd, "--help") == 0 || strcmp(o->cmd, "-h") == 0) {
        usage(stdout);
        exit(0);
    }
    static const char *const cmds[] = {"start", "stop", "backup"};
    uint32_t cmd = 0;
    for (size_t k = 0; k < 3; k++) {
        cmd = strcmp(o->cmd, cmds[k]) == 0 ? 1u << k : cmd;
    }
    if (cmd == 0) {
        return usage_error("unknown command '%s' (start, stop, token or backup)", o->cmd);
    }
    /* Each command takes only the options it uses: a stop or a backup given --daemon, --listen
     * or --log-file would otherwise ignore them silently (HV_OPT_WRONG_CMD). */
    const char **slots[] = {
        [HO_CONFIG] = &o->config,     [HO_DATA_DIR] = &o->data_dir, [HO_LISTEN] = &o->listen,
        [HO_PID_FILE] = &o->pid_file, [HO_LOG_FILE] = &o->log_file, [HO_TO] = &o->to};
    hv_opt_iter_t it;
    hv_opt_got_t g;
    hv_opt_init(&it, head_opts, HEAD_NOPTS, 0, cmd, argc, argv, 2);
    for (hv_opt_res r; (r = hv_opt_next(&it, &g)) != HV_OPT_END;) {
        char msg[160];
        if (r == HV_OPT_ARG) {
            return usage_error("unknown option '%s'", g.arg);
        }
        if (r == HV_OPT_FAULT) {
            return usage_error("%s", hv_opt_fault_msg(&g, o->cmd, msg, sizeof(msg)));
        }
        switch (g.opt->id) {
        case HO_HELP:
            cmd == HEAD_START  ? usage_start(stdout)
            : cmd == HEAD_STOP ? usage_stop(stdout)
                               : usage_backup(stdout);
            exit(0);
        case HO_VERSION:
            printf("hvhead %s\n", HV_VERSION_STRING);
            exit(0);
        case HO_DAEMON:
            o->daemon = 1;
            break;
        default:
            *slots[g.opt->id] = g.value;
            break;
        }
    }
    return 0;
}

static int load_config(const head_opts_t *o, hv_head_config_t *cfg) {
    char err[1024];
    hv_err rc;
    if (o->config != NULL) {
        rc = hv_head_config_load(o->config, cfg, err, sizeof(err));
        if (rc != HV_OK) {
            fprintf(stderr, "hvhead: %s\n", err);
            return 2;
        }
    } else {
        hv_head_config_defaults(cfg);
    }
    if (o->data_dir != NULL) {
        hv_free(cfg->data_dir);
        cfg->data_dir = hv_strdup(o->data_dir);
    }
    if (o->listen != NULL) {
        char host[256];
        int port;
        if (hv_parse_hostport(o->listen, host, sizeof(host), &port) != HV_OK) {
            hv_head_config_fini(cfg);
            return usage_error("--listen: value '%s' is not HOST:PORT", o->listen);
        }
        hv_free(cfg->listen);
        cfg->listen = hv_strdup(o->listen);
        if (cfg->listen != NULL && hv_head_config_plain_text_exposed(cfg) && !cfg->allow_insecure) {
            fprintf(stderr,
                    "hvhead: --listen %s: not a loopback address and the config has no 'tls:' "
                    "section: tokens and jobs would cross the network in plain text; configure "
                    "tls (docs/tls.md) or set 'allow_insecure: true' in the config\n",
                    o->listen);
            hv_head_config_fini(cfg);
            return 2;
        }
    }
    return 0;
}

/* `hvhead stop`: signals the head that holds the pid file's lock or, failing that, the data
 * directory's (a head started in the foreground). The number in a pid file is never trusted on
 * its own: a head killed with SIGKILL leaves a file whose pid may by now be anyone's. */
static int cmd_stop(const head_opts_t *o) {
    hv_head_config_t cfg;
    int ec = load_config(o, &cfg);
    if (ec != 0) {
        return ec;
    }
    char pid_path[4096], lock_path[4200];
    if (o->pid_file != NULL) {
        snprintf(pid_path, sizeof(pid_path), "%s", o->pid_file);
    } else {
        snprintf(pid_path, sizeof(pid_path), "%s/hvhead.pid", cfg.data_dir);
    }
    snprintf(lock_path, sizeof(lock_path), "%s/hvhead.lock", cfg.data_dir);
    hv_head_config_fini(&cfg);
    const char *held = hv_lock_holder(pid_path) != 0 ? pid_path : lock_path;
    int pid = 0;
    hv_err rc = hv_stop_locked(held, SIGTERM, 15000, 0, &pid);
    if (rc == HV_ENOTFOUND) {
        int stale = hv_pidfile_remove_stale(pid_path);
        if (stale != 0) {
            fprintf(stderr,
                    "hvhead: no running head found (no head holds %s or %s); the pid file was "
                    "stale (it named pid %d, which is not a head): removed it, signalled nobody\n",
                    pid_path, lock_path, stale);
        } else {
            fprintf(stderr, "hvhead: no running head found (no head holds %s or %s)\n", pid_path,
                    lock_path);
        }
        return 1;
    }
    if (rc == HV_EPERM) {
        fprintf(stderr,
                "hvhead: %s is locked by a process this one cannot see (another pid namespace); "
                "stop that head where it runs\n",
                held);
        return 1;
    }
    if (rc != HV_OK) {
        fprintf(stderr, "hvhead: the head (pid %d) did not stop within 15 s: %s\n", pid,
                hv_strerror(rc));
        return 1;
    }
    printf("hvhead: stopped (pid %d)\n", pid);
    return 0;
}

/* ---- start: cmd_start's steps, in order ----------------------------------------------------- *
 * Each step fills in its part of h and returns an exit status (0: go on). Whatever a step leaves
 * behind when it fails, or the run leaves when it ends, head_close undoes: it tolerates a head
 * opened only in part, so no step repeats the cleanup of the steps before it. */

/* Config and limits: the config file with the command line's overrides, the log, the data
 * directory (the head's user only), the head's key and client tokens, the pid file's path. Before
 * the fork, so a mistake is told to the shell and nothing has started. */
static int head_open_config(head_t *h, const head_opts_t *o) {
    int ec = load_config(o, &h->cfg);
    if (ec != 0) {
        return ec;
    }
    h->cfg_loaded = 1;
    hv_log_set_level((hv_log_level)h->cfg.log_level);
    hv_log_init("hvhead");          /* HV_LOG_LEVEL in the environment wins over the config */
    hv_notify_init_env(&h->notify); /* before any child (autoscaler commands) inherits it */
    char err[1024];
    /* Everything the head creates (state.db and its -wal/-shm, logs, artifacts, tokens) is
     * for the head's user only: secrets and job environments live there. */
    umask(077);
    hv_err rc = hv_mkdirs_msg(h->cfg.data_dir, 0700, err, sizeof(err));
    if (rc != HV_OK) {
        fprintf(stderr, "hvhead: cannot create data directory %s: %s\n", h->cfg.data_dir, err);
        return 1;
    }
    if (chmod(h->cfg.data_dir, 0700) != 0) {
        fprintf(stderr, "hvhead: cannot make data directory %s private (mode 0700): %s\n",
                h->cfg.data_dir, strerror(errno));
        return 1;
    }
    rc = hv_auth_load(&h->auth, h->cfg.data_dir, h->client_path, sizeof(h->client_path), err,
                      sizeof(err));
    if (rc != HV_OK) {
        fprintf(stderr, "hvhead: %s\n", err);
        return 1;
    }
    rc = hv_head_config_resolve_token(&h->cfg, err, sizeof(err));
    if (rc != HV_OK) {
        fprintf(stderr, "hvhead: %s\n", err);
        return 2;
    }
    if (o->pid_file != NULL) {
        snprintf(h->pid_path, sizeof(h->pid_path), "%s", o->pid_file);
    } else {
        snprintf(h->pid_path, sizeof(h->pid_path), "%s/hvhead.pid", h->cfg.data_dir);
    }
    return 0;
}

/* Daemonize (with --daemon): returns in the daemon only; the shell's hvhead waits until the
 * daemon is listening or says why it cannot. */
static int head_daemonize(head_t *h, const char *log_file) {
    /* The lock is per process: say now if another head holds it; the daemon takes it. */
    char lock_path[4200];
    snprintf(lock_path, sizeof(lock_path), "%s/hvhead.lock", h->cfg.data_dir);
    int holder = hv_lock_holder(lock_path);
    if (holder > 0) {
        fprintf(stderr,
                "hvhead: data directory %s is in use by another head (pid %d); stop it "
                "first or give this one another data_dir\n",
                h->cfg.data_dir, holder);
        return 1;
    }
    /* Fork before sqlite, gRPC or libuv hold any state. */
    hv_err rc = hv_daemonize_wait(h->pid_path, log_file, HEAD_DAEMON_READY_MS);
    if (rc == HV_EEXIST) {
        fprintf(stderr,
                "hvhead: the pid file %s is held by another head (pid %d); stop it "
                "first or give this one another --pid-file\n",
                h->pid_path, hv_lock_holder(h->pid_path));
        return 1;
    }
    if (rc != HV_OK) {
        fprintf(stderr, "hvhead: cannot daemonize (%s): %s\n", h->pid_path, hv_strerror(rc));
        return 1;
    }
    h->daemon = 1;
    return 0;
}

/* At start, once the store is open: imports the revocations file of an older head
 * (<data_dir>/revoked_nodes, then renamed revoked_nodes.imported; hv_store_revoked_import), then
 * gives every stored revocation to the access table. On failure err says why (the head does not
 * start: a revocation it could not read would let a revoked agent back in). */
static hv_err head_load_revocations(hv_auth_t *a, hv_store_t *store, const char *data_dir,
                                    char *err, size_t errlen) {
    char path[600];
    snprintf(path, sizeof(path), "%s/revoked_nodes", data_dir);
    size_t imported = 0;
    hv_err rc = hv_store_revoked_import(store, path, &imported, err, errlen);
    if (rc != HV_OK) {
        return rc;
    }
    hv_revoked_row_t *rows = NULL;
    size_t n = 0;
    if ((rc = hv_store_revoked_list(store, &rows, &n)) != HV_OK) {
        snprintf(err, errlen, "%s: cannot read the revoked node credentials: %s",
                 hv_store_path(store), hv_store_last_error(store));
        return rc;
    }
    for (size_t i = 0; i < n && rc == HV_OK; i++) {
        rc = hv_auth_revoke_node(a, rows[i].node_id, rows[i].incarnation);
    }
    hv_free(rows);
    if (rc != HV_OK) {
        snprintf(err, errlen, "%s: %zu revoked node credentials, more than the %d this head holds",
                 hv_store_path(store), n, HV_AUTH_MAX_REVOKED);
    }
    return rc;
}

/* The data directory's lock, the store with its state replayed into the driver (the loop, the
 * artifacts, the history's retention at start), and the bounds derived from the fd limit. */
static int head_open_state(head_t *h) {
    if (head_lock_data_dir(h) != 0) {
        return 1;
    }
    char err[1024];
    hv_err rc = hv_store_open(h->cfg.data_dir, &h->store, err, sizeof(err));
    if (rc != HV_OK) {
        head_fail("hvhead: %s", err);
        return 1;
    }
    /* Credentials are only good within one state database (head/services/auth.h). */
    if ((rc = hv_creds_set_epoch(&h->auth.creds, hv_store_epoch(h->store))) != HV_OK) {
        head_fail("hvhead: %s: its epoch is not valid", hv_store_path(h->store));
        return 1;
    }
    if ((rc = head_load_revocations(&h->auth, h->store, h->cfg.data_dir, err, sizeof(err))) !=
        HV_OK) {
        head_fail("hvhead: %s", err);
        return 1;
    }
    /* Which artifacts the jobs of an older database use, read once from their specs (v9), so
     * that the history's pruning can tell those no kept job needs (head/store/history.h). */
    size_t filled = 0;
    if ((rc = hv_store_job_artifacts_fill(h->store, hv_validate_spec_digests, NULL, &filled)) !=
        HV_OK) {
        head_fail("hvhead: %s: cannot record which artifacts the stored jobs use: %s",
                  hv_store_path(h->store), hv_store_last_error(h->store));
        return 1;
    }
    if (filled > 0) {
        HV_LOG(HV_LOG_NOTICE, "history", "HV-ARTIFACT-REFS",
               "recorded which artifacts the %zu stored job(s) use", filled);
    }
    h->loop = uv_default_loop();
    hv_artifacts_limits_t lim = {.max_upload = h->cfg.max_upload_bytes,
                                 .quota = h->cfg.upload_quota_bytes,
                                 .upload_timeout_ms = h->cfg.upload_timeout_s * 1000u};
    char aerr[4600];
    if ((rc = hv_artifacts_open(h->cfg.data_dir, h->store, &lim, &h->arts, aerr, sizeof(aerr))) !=
        HV_OK) {
        head_fail("hvhead: %s", aerr);
        return 1;
    }
    hv_driver_io_t io = {.order = io_order,
                         .drop_session = io_drop_session,
                         .round = io_round,
                         .join_answer = io_join_answer,
                         .push = io_push,
                         .job_changed = io_job_changed,
                         .job_finished = io_job_finished,
                         .wake = io_wake,
                         .revoked = io_revoked,
                         .queue_work = io_queue_work,
                         .ud = h};
    char aerr2[600] = "";
    if ((rc = hv_driver_create(&h->cfg, h->store, &io, &h->driver)) == HV_OK) {
        hv_driver_set_artifacts(h->driver, h->arts); /* the services reach them through it */
    }
    if (rc != HV_OK || (rc = hv_actors_create(h->driver, h->store, &h->actors)) != HV_OK ||
        (rc = hv_driver_load(h->driver)) != HV_OK ||
        (rc = hv_actors_load(h->actors, aerr2, sizeof(aerr2))) != HV_OK) {
        head_fail("hvhead: cannot load state from %s: %s%s%s", hv_store_path(h->store),
                  hv_strerror(rc), aerr2[0] ? ": " : "", aerr2);
        return 1;
    }
    head_prune_history(h, HV_HISTORY_START_BATCHES);
    head_fd_limits(h);
    return 0;
}

/* The listener: the rpc engine, the server on the listen address (TLS or plain text), and the
 * bound on its connections. */
static int head_listen(head_t *h) {
    hv_err rc = hv_rpc_engine_create(h->loop, &h->eng);
    if (rc != HV_OK) {
        head_fail("hvhead: cannot start the rpc engine: %s", hv_strerror(rc));
        return 1;
    }
    hv_rpc_engine_set_handshake_timeout(h->eng, h->cfg.limits.handshake_timeout_ms);
    if (h->cfg.tls.cert != NULL) {
        /* With require_client_cert, agents (the Cluster service) must present a certificate
         * signed by tls.ca; hvsubmit, hvctl and workers are checked by their tokens. */
        hv_rpc_tls_t tls = {.ca_file = h->cfg.tls.ca,
                            .cert_file = h->cfg.tls.cert,
                            .key_file = h->cfg.tls.key,
                            .client_cert_prefix =
                                h->cfg.tls.require_client_cert ? "/hvpb.v1.Cluster/" : NULL};
        char err[1024];
        rc = hv_rpc_server_create_tls(h->eng, h->cfg.listen, &tls, &h->srv, &h->port, err,
                                      sizeof(err));
        if (rc != HV_OK) {
            head_fail("hvhead: %s%s", rc == HV_EUNAVAIL ? "" : "tls: ", err);
            return 1;
        }
        HV_LOG(HV_LOG_NOTICE, "head", "HV-HEAD-TLS", "TLS on %s with certificate %s%s%s",
               h->cfg.listen, h->cfg.tls.cert,
               h->cfg.tls.require_client_cert ? "; agents must present a client certificate "
                                                "signed by "
                                              : "",
               h->cfg.tls.require_client_cert ? h->cfg.tls.ca : "");
    } else {
        rc = hv_rpc_server_create(h->eng, h->cfg.listen, &h->srv, &h->port);
        if (rc != HV_OK) {
            head_fail("hvhead: cannot listen on %s: address in use or not available",
                      h->cfg.listen);
            return 1;
        }
        if (hv_head_config_plain_text_exposed(&h->cfg)) {
            HV_LOG(HV_LOG_WARN, "head", "HV-HEAD-INSECURE",
                   "serving plain text on %s (allow_insecure): anyone on the network can read "
                   "tokens and jobs and impersonate the head; configure tls (docs/tls.md)",
                   h->cfg.listen);
        }
    }
    /* Connections to the gRPC port are bounded from here on (head/services/conngate.h). */
    hv_conngate_limits_t glim = {.max_total = h->cfg.limits.max_connections,
                                 .max_per_client = h->cfg.limits.max_connections_per_client};
    hv_conngate_derive(0, 0, &glim); /* the bounds set above stay; the nodes' share follows */
    if ((rc = hv_conngate_start(&glim)) != HV_OK ||
        (rc = hv_conngate_watch_port(h->port)) != HV_OK) {
        head_fail("hvhead: cannot bound connections: %s", hv_strerror(rc));
        return 1;
    }
    return 0;
}

/* svc_auth's hook: a call with a node credential came from peer. */
static void head_note_node(const char *peer, void *ud) {
    (void)ud;
    hv_conngate_note_node_peer(peer);
}

/* The HTTP listener on cfg.metrics.listen, with the token of metrics.token_file: /metrics keeps
 * the bearer token (Prometheus sends it); the status page also takes a session of its login
 * (docs/status-page.md). Errors with a one-line message in err: HV_EINVAL (token file or
 * address), HV_EUNAVAIL (cannot bind), HV_ENOMEM. */
static hv_err head_listen_http(head_t *h, char *err, size_t errlen) {
    char *token = NULL;
    hv_err rc = hv_head_config_metrics_token(&h->cfg, &token, err, errlen);
    if (rc != HV_OK) {
        return rc;
    }
    h->page.cfg = &h->cfg;
    h->page.d = h->driver;
    h->page.actors = h->actors;
    h->page.auth = &h->auth;
    h->page.login = token != NULL && token[0] != '\0';
    hv_http_route_t routes[] = {
        {"/metrics", hv_metrics_serve, h->metrics, HV_HTTP_TOKEN, 0},
        {"/", hv_page_serve_cluster, &h->page, HV_HTTP_SESSION, 0},
        {"/job/", hv_page_serve_job, &h->page, HV_HTTP_SESSION, 0},
        {"/login", hv_page_serve_login, &h->page, HV_HTTP_OPEN, 1},
        {"/logout", hv_page_serve_logout, &h->page, HV_HTTP_OPEN, 1},
    };
    hv_http_opts_t o = {.listen = h->cfg.metrics.listen,
                        .token = token,
                        .routes = routes,
                        .nroutes = sizeof(routes) / sizeof(routes[0]),
                        .session_ok = hv_page_session_ok,
                        .session_ud = &h->page,
                        .login_path = "/login"};
    char why[400] = "";
    rc = hv_http_server_create(h->loop, &o, &h->http, &h->metrics_port, why, sizeof(why));
    if (token != NULL) {
        memset(token, 0, strlen(token));
        hv_free(token);
    }
    if (rc != HV_OK) {
        snprintf(err, errlen, "key 'metrics.listen': %s", why[0] ? why : hv_strerror(rc));
        return rc;
    }
    hv_metrics_set_listener(h->metrics, h->http, &h->page.login_refused);
    return HV_OK;
}

/* The services: metrics, the six gRPC services (then the server starts), the autoscaler, and
 * the /metrics listener. */
static int head_start_services(head_t *h) {
    /* Metrics count the driver's events and every call the server ends (head/services/metrics.h). */
    hv_err rc = hv_metrics_create(&h->cfg, h->driver, &h->metrics);
    if (rc != HV_OK) {
        head_fail("hvhead: cannot start the metrics: %s", hv_strerror(rc));
        return 1;
    }
    hv_metrics_set_actors(h->metrics, h->actors);
    hv_driver_set_observer(h->driver, hv_metrics_on_event, h->metrics);
    hv_rpc_server_set_observer(h->srv, hv_metrics_on_rpc, h->metrics);
    int cfg_port;
    hv_parse_hostport(h->cfg.listen, h->host, sizeof(h->host), &cfg_port);
    head_derive_advertise(h, h->host);
    if ((rc = hv_svc_cluster_create(h->srv, &h->cfg, h->driver, h->advertise, &h->cluster)) !=
            HV_OK ||
        (rc = hv_svc_jobs_create(h->srv, &h->cfg, h->driver, &h->jobs)) != HV_OK ||
        (rc = hv_svc_actors_create(h->srv, &h->auth, h->driver, h->actors, &h->actorsvc)) !=
            HV_OK ||
        (rc = hv_svc_cost_create(h->srv, &h->cfg, h->driver, &h->cost)) != HV_OK ||
        (rc = hv_svc_artifacts_create(h->srv, h->driver, &h->artsvc)) != HV_OK ||
        (rc = hv_svc_rdzv_create(h->srv, h->driver, &h->rdzv)) != HV_OK ||
        (rc = hv_svc_keepers_create(h->srv, h->driver, &h->keepers)) != HV_OK ||
        (rc = hv_svc_auth_create(h->srv, &h->auth, h->driver, &h->authsvc)) != HV_OK ||
        (rc = hv_rpc_server_start(h->srv)) != HV_OK) {
        head_fail("hvhead: cannot start the server: %s", hv_strerror(rc));
        return 1;
    }
    hv_svc_cluster_set_auth(h->cluster, &h->auth);
    hv_driver_set_creds(h->driver, &h->auth.creds); /* the keepers' grants */
    hv_svc_auth_set_static_token(h->authsvc, h->cfg.token);
    /* The addresses of nodes (those stored: agents re-connecting after a restart; then each
     * that calls with its node credential) may take the connections kept for nodes. */
    hv_svc_auth_set_node_hook(h->authsvc, head_note_node, NULL);
    for (const hv_dnode_t *n = hv_driver_nodes(h->driver); n != NULL; n = n->next) {
        hv_conngate_note_node_peer(n->peer);
    }
    /* The autoscaler starts its agents from the directory hvhead runs from. */
    char agent[4096] = "hvagent";
    ssize_t self_len = readlink("/proc/self/exe", agent, sizeof(agent) - 16);
    if (self_len > 0) {
        agent[self_len] = '\0';
        char *slash = strrchr(agent, '/');
        snprintf(slash != NULL ? slash + 1 : agent, 16, "hvagent");
    }
    hv_autoscale_opts_t aso = {.cfg = &h->cfg,
                               .driver = h->driver,
                               .store = h->store,
                               .creds = &h->auth.creds,
                               .head_addr = h->advertise,
                               .agent = agent,
                               .actors = h->actors};
    char err[1024] = "";
    if ((rc = hv_autoscale_create(h->loop, &aso, &h->as, err, sizeof(err))) != HV_OK ||
        (rc = hv_autoscale_load(h->as)) != HV_OK) {
        head_fail("hvhead: cannot start the autoscaler: %s", err[0] ? err : hv_strerror(rc));
        return 1;
    }
    if (h->as != NULL) {
        hv_svc_cluster_set_admit(h->cluster, hv_autoscale_admit, h->as);
    }
    if (h->cfg.metrics.listen != NULL && (rc = head_listen_http(h, err, sizeof(err))) != HV_OK) {
        head_fail("hvhead: %s", err);
        return 1;
    }
    return 0;
}

/* Ready: the tick and the signals, the ready lines (to the shell that waits for a daemon too),
 * the service manager told, and the first placement of the jobs replayed. */
static void head_announce(head_t *h) {
    uv_timer_init(h->loop, &h->tick);
    h->tick.data = h;
    uv_timer_start(&h->tick, head_tick_cb, HEAD_TICK_MS, HEAD_TICK_MS);
    uv_timer_init(h->loop, &h->wake);
    h->wake.data = h;
    uv_signal_init(h->loop, &h->sigint);
    uv_signal_init(h->loop, &h->sigterm);
    h->sigint.data = h->sigterm.data = h;
    uv_signal_start(&h->sigint, head_signal_cb, SIGINT);
    uv_signal_start(&h->sigterm, head_signal_cb, SIGTERM);
    h->handles_open = 1;
    signal(SIGPIPE, SIG_IGN);

    const char *host = h->host;
    hv_driver_event(h->driver, 0, 0, "head.start", NULL, "head started on %s:%d (advertised as %s)",
                    host, h->port, h->advertise);
    char ready[1200];
    snprintf(ready, sizeof(ready),
             "hvhead: listening on %s%s%s:%d (cluster %s, advertised %s, data %s)",
             strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "", h->port,
             h->cfg.cluster_name, h->advertise, h->cfg.data_dir);
    printf("%s\n", ready);
    /* Where the client token is, never its value. */
    printf("hvhead: client token in %s (hvsubmit/hvctl --token-file, or HV_TOKEN_FILE)\n",
           h->client_path);
    if (h->cfg.metrics.listen != NULL) {
        char mhost[256];
        int mport;
        hv_parse_hostport(h->cfg.metrics.listen, mhost, sizeof(mhost), &mport);
        printf("hvhead: metrics on http://%s%s%s:%d/metrics%s\n", strchr(mhost, ':') ? "[" : "",
               mhost, strchr(mhost, ':') ? "]" : "", h->metrics_port,
               h->cfg.metrics.token_file != NULL ? " (bearer token of metrics.token_file)" : "");
    }
    HV_LOG(HV_LOG_NOTICE, "auth", "HV-AUTH-CLIENT",
           "every call needs a credential; client token in %s, %zu client token(s) in all",
           h->client_path, h->auth.n_clients);
    fflush(stdout);
    hv_daemon_ready(ready);
    /* Ready for the service manager: listening, and the state replayed (hv_driver_load). */
    head_notify_status(h, "READY=1\n");
    hv_notify_watchdog(&h->notify, hv_now_ms());
    hv_driver_schedule(h->driver);
}

/* The loop, until SIGINT/SIGTERM (head_begin_stop); then the first part of the shutdown, which
 * needs the services alive: the autoscaler's machines given back, the Watch streams ended, the
 * server shut down. */
static void head_serve(head_t *h) {
    uv_run(h->loop, UV_RUN_DEFAULT);

    hv_autoscale_stop(h->as); /* gives back what it started on this machine */
    hv_driver_event(h->driver, 0, 0, "head.stop", NULL, "head stopped");
    hv_svc_jobs_close(h->jobs);
    hv_rpc_server_shutdown(h->srv);
}

/* Shutdown: undoes whatever the steps above set up, in reverse order, and frees h. Tolerates a
 * head opened only in part (each part is NULL, -1 or unset until its step made it). */
static void head_close(head_t *h) {
    if (h->handles_open) {
        uv_close((uv_handle_t *)&h->tick, NULL);
        uv_close((uv_handle_t *)&h->wake, NULL);
        uv_close((uv_handle_t *)&h->sigint, NULL);
        uv_close((uv_handle_t *)&h->sigterm, NULL);
    }
    if (h->eng != NULL) {
        /* Ends every call (their callbacks run); then nothing refers to the services. */
        hv_rpc_engine_destroy(h->eng);
        hv_conngate_stop();
    }
    hv_svc_cluster_destroy(h->cluster);
    hv_svc_jobs_destroy(h->jobs);
    hv_svc_actors_destroy(h->actorsvc);
    h->actorsvc = NULL;
    hv_svc_cost_destroy(h->cost);
    hv_svc_artifacts_destroy(h->artsvc);
    hv_svc_rdzv_destroy(h->rdzv);
    hv_svc_keepers_destroy(h->keepers);
    hv_svc_auth_destroy(h->authsvc);
    hv_autoscale_destroy(h->as);
    h->as = NULL;
    if (h->driver != NULL) {
        hv_driver_set_observer(h->driver, NULL, NULL);
    }
    hv_http_server_close(h->http); /* its memory goes once the loop runs again */
    h->http = NULL;
    hv_metrics_destroy(h->metrics); /* after the engine: ending calls are still counted */
    h->metrics = NULL;
    h->authsvc = NULL;
    h->cluster = NULL;
    h->jobs = NULL;
    h->rdzv = NULL;
    hv_actors_destroy(h->actors);
    h->actors = NULL;
    hv_driver_destroy(h->driver);
    hv_artifacts_close(h->arts);
    if (h->loop != NULL) {
        uv_run(h->loop, UV_RUN_NOWAIT);
        uv_loop_close(h->loop);
    }
    hv_store_close(h->store);
    if (h->daemon) {
        hv_pidfile_remove(h->pid_path);
    }
    if (h->lock_fd >= 0) {
        close(h->lock_fd);
    }
    if (h->cfg_loaded) {
        hv_head_config_fini(&h->cfg);
    }
    memset(&h->auth, 0, sizeof(h->auth)); /* the key and tokens: no copies in freed memory */
    hv_free(h);
}

/* `hvhead start`: the steps above, in order; the first that fails gives the exit status. */
static int cmd_start(const head_opts_t *o) {
    head_t *h = hv_calloc(1, sizeof(*h));
    if (h == NULL) {
        fprintf(stderr, "hvhead: out of memory\n");
        return 1;
    }
    h->lock_fd = -1;
    int ec = head_open_config(h, o);
    if (ec == 0 && o->daemon) {
        ec = head_daemonize(h, o->log_file);
    }
    if (ec == 0) {
        ec = head_open_state(h);
    }
    if (ec == 0) {
        ec = head_listen(h);
    }
    if (ec == 0) {
        ec = head_start_services(h);
    }
    if (ec == 0) {
        head_announce(h);
        head_serve(h);
    }
    head_close(h);
    if (ec == 0) {
        printf("hvhead: stopped\n");
    }
    return ec;
}

/* hvhead token ...: join tokens are the running head's (in its store, which it holds locked),
 * so this is a client of it: the hvctl installed beside hvhead, with "token" and the rest. */
static int cmd_token(int argc, char **argv) {
    char path[4096];
    ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 8);
    if (n <= 0) {
        snprintf(path, sizeof(path), "hvctl");
    } else {
        path[n] = '\0';
        char *slash = strrchr(path, '/');
        snprintf(slash != NULL ? slash + 1 : path, 8, "hvctl");
    }
    char **args = calloc((size_t)argc + 1, sizeof(*args));
    if (args == NULL) {
        fprintf(stderr, "hvhead: out of memory\n");
        return 70;
    }
    args[0] = (char *)"hvctl";
    for (int i = 1; i < argc; i++) {
        args[i] = argv[i]; /* "token", then its subcommand and options */
    }
    execv(path, args);
    fprintf(stderr, "hvhead: cannot run %s for 'hvhead token': %s (it is 'hvctl token')\n", path,
            strerror(errno));
    free(args);
    return 69;
}

/* `hvhead backup`: a consistent copy of the data directory (head/store/backup.h), while the head
 * runs or not. */
static int cmd_backup(const head_opts_t *o) {
    if (o->to == NULL) {
        return usage_error("%s", "backup needs --to NEW_DIR");
    }
    hv_head_config_t cfg;
    int ec = load_config(o, &cfg);
    if (ec != 0) {
        return ec;
    }
    hv_backup_stats_t st;
    char err[1200];
    hv_err rc = hv_backup_data_dir(cfg.data_dir, o->to, &st, err, sizeof(err));
    if (rc != HV_OK) {
        fprintf(stderr, "hvhead: backup of %s failed: %s\n", cfg.data_dir, err);
        hv_head_config_fini(&cfg);
        return 1;
    }
    printf("hvhead: backed up %s to %s: state.db (%llu pages) and %llu files (%llu bytes)%s\n",
           cfg.data_dir, o->to, (unsigned long long)st.db_pages, (unsigned long long)st.files,
           (unsigned long long)st.bytes,
           st.skipped > 0 ? "; links and special files left out" : "");
    hv_head_config_fini(&cfg);
    return 0;
}

int main(int argc, char **argv) {
    head_opts_t o;
    /* The head receives state copies and programs in messages of 1 MiB, each read into a fresh
     * buffer twice (gRPC's whole message, then protobuf's bytes field): kept in the heap, they
     * are not faulted in again at every chunk (a quarter of the head's CPU while it took a copy:
     * perf, bench_copy.sh). */
    hv_malloc_keep_heap();
    hv_log_init("hvhead");
    if (argc >= 2 && strcmp(argv[1], "token") == 0) {
        for (int i = 2; i < argc && strcmp(argv[i], "--") != 0; i++) {
            if (strcmp(argv[i], "--version") == 0 || strcmp(argv[i], "-V") == 0) {
                printf("hvhead %s\n", HV_VERSION_STRING); // not the hvctl it runs
                return 0;
            }
        }
        return cmd_token(argc, argv);
    }
    int ec = parse_args(argc, argv, &o);
    if (ec != 0) {
        return ec;
    }
    if (strcmp(o.cmd, "stop") == 0) {
        return cmd_stop(&o);
    }
    if (strcmp(o.cmd, "backup") == 0) {
        return cmd_backup(&o);
    }
    return cmd_start(&o);
}
