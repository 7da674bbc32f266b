/*
 * hvhead: the head process. `hvhead start --config FILE` validates the config (exit 2 on a
 * mistake, before anything starts), opens the sqlite store, reloads the cluster's state, serves
 * the Cluster, Jobs and Rendezvous services on one gRPC port and prints one ready line naming the
 * address. SIGINT/SIGTERM stop it cleanly; `hvhead stop` signals a daemonized head through its
 * pid file. Everything after start-up runs on one libuv loop thread (see head.h).
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "head.h"
#include "log.h"
#include "mem.h"
#include "util.h"

static void usage(FILE *f) {
    fprintf(f, "usage: hvhead start [--config FILE] [--data-dir DIR] [--listen HOST:PORT]\n"
               "                    [--daemon] [--pid-file FILE] [--log-file FILE]\n"
               "       hvhead stop [--config FILE] [--data-dir DIR] [--pid-file FILE]\n"
               "       hvhead --version\n"
               "\n"
               "  start   run the head (foreground unless --daemon); prints a ready line\n"
               "  stop    stop a head started with --daemon, through its pid file\n"
               "          (default pid file: DATA_DIR/hvhead.pid)\n");
}

void head_event(head_t *h, uint64_t job_id, uint64_t node_id, const char *kind, const char *fmt,
                ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    uint64_t seq = 0;
    hv_err rc = hv_store_event_append(h->store, job_id, node_id, kind, msg, NULL, &seq);
    if (rc != HV_OK) {
        head_store_failed(h, rc, "append event");
    }
    HV_LOG(HV_LOG_INFO, "head", "HV-HEAD-EVENT", "%s job=%llu node=%llu: %s", kind,
           (unsigned long long)job_id, (unsigned long long)node_id, msg);
    if (job_id != 0) {
        head_job_t *j = head_job_by_id(h, job_id);
        if (j != NULL) {
            j->last_event_seq = seq;
            head_jobs_notify(h, j);
        }
    }
}

void head_set_str(char **dst, const char *src) {
    char *copy = hv_strdup(src ? src : "");
    if (copy != NULL) {
        hv_free(*dst);
        *dst = copy;
    }
}

hv_err head_store_failed(head_t *h, hv_err rc, const char *what) {
    HV_LOG(HV_LOG_ERROR, "store", "HV-STORE-WRITE", "cannot %s in %s: %s (%s)", what,
           hv_store_path(h->store), hv_store_last_error(h->store), hv_strerror(rc));
    return rc;
}

static void head_tick_cb(uv_timer_t *t) {
    head_t *h = t->data;
    uint64_t now = hv_now_ms();
    head_cluster_tick(h, now);
    head_driver_tick(h, now);
    head_rdzv_tick(h, now);
}

static void head_begin_stop(head_t *h, const char *why) {
    if (h->stopping) {
        return;
    }
    h->stopping = 1;
    HV_LOG(HV_LOG_NOTICE, "head", "HV-HEAD-STOP", "stopping (%s)", why);
    uv_timer_stop(&h->tick);
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
    snprintf(h->advertise, sizeof(h->advertise), "%s:%d", host, h->port);
}

typedef struct head_opts_s {
    const char *cmd;
    const char *config;
    const char *data_dir;
    const char *listen;
    const char *pid_file;
    const char *log_file;
    int daemon;
} head_opts_t;

static int parse_args(int argc, char **argv, head_opts_t *o) {
    memset(o, 0, sizeof(*o));
    if (argc < 2) {
        usage(stderr);
        return 2;
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
    if (strcmp(o->cmd, "start") != 0 && strcmp(o->cmd, "stop") != 0) {
        fprintf(stderr, "hvhead: unknown command '%s'\n", o->cmd);
        usage(stderr);
        return 2;
    }
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char **slot = NULL;
        if (strcmp(a, "--daemon") == 0) {
            o->daemon = 1;
            continue;
        } else if (strcmp(a, "--config") == 0 || strcmp(a, "-c") == 0) {
            slot = &o->config;
        } else if (strcmp(a, "--data-dir") == 0) {
            slot = &o->data_dir;
        } else if (strcmp(a, "--listen") == 0) {
            slot = &o->listen;
        } else if (strcmp(a, "--pid-file") == 0) {
            slot = &o->pid_file;
        } else if (strcmp(a, "--log-file") == 0) {
            slot = &o->log_file;
        } else {
            fprintf(stderr, "hvhead: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "hvhead: option '%s' needs a value\n", a);
            return 2;
        }
        *slot = argv[++i];
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
            fprintf(stderr, "hvhead: --listen: value '%s' is not HOST:PORT\n", o->listen);
            return 2;
        }
        hv_free(cfg->listen);
        cfg->listen = hv_strdup(o->listen);
    }
    return 0;
}

static int cmd_stop(const head_opts_t *o) {
    hv_head_config_t cfg;
    int ec = load_config(o, &cfg);
    if (ec != 0) {
        return ec;
    }
    char pid_path[4096];
    if (o->pid_file != NULL) {
        snprintf(pid_path, sizeof(pid_path), "%s", o->pid_file);
    } else {
        snprintf(pid_path, sizeof(pid_path), "%s/hvhead.pid", cfg.data_dir);
    }
    hv_head_config_fini(&cfg);
    hv_err rc = hv_stop_pidfile(pid_path, 15000, 0);
    if (rc == HV_ENOTFOUND) {
        fprintf(stderr, "hvhead: no running head found through %s\n", pid_path);
        return 1;
    }
    if (rc != HV_OK) {
        fprintf(stderr, "hvhead: the head did not stop within 15 s (%s)\n", pid_path);
        return 1;
    }
    printf("hvhead: stopped\n");
    return 0;
}

static int cmd_start(const head_opts_t *o) {
    head_t *h = hv_calloc(1, sizeof(*h));
    if (h == NULL) {
        fprintf(stderr, "hvhead: out of memory\n");
        return 1;
    }
    int ec = load_config(o, &h->cfg);
    if (ec != 0) {
        hv_free(h);
        return ec;
    }
    hv_log_set_level((hv_log_level)h->cfg.log_level);
    hv_log_init("hvhead"); /* HV_LOG_LEVEL in the environment wins over the config */
    char err[1024];
    hv_err rc = hv_mkdirs(h->cfg.data_dir, 0755);
    if (rc != HV_OK) {
        fprintf(stderr, "hvhead: cannot create data directory %s: %s\n", h->cfg.data_dir,
                hv_strerror(rc));
        hv_head_config_fini(&h->cfg);
        hv_free(h);
        return 1;
    }
    rc = hv_head_config_resolve_token(&h->cfg, err, sizeof(err));
    if (rc != HV_OK) {
        fprintf(stderr, "hvhead: %s\n", err);
        hv_head_config_fini(&h->cfg);
        hv_free(h);
        return 2;
    }
    if (o->pid_file != NULL) {
        snprintf(h->pid_path, sizeof(h->pid_path), "%s", o->pid_file);
    } else {
        snprintf(h->pid_path, sizeof(h->pid_path), "%s/hvhead.pid", h->cfg.data_dir);
    }
    if (o->daemon) {
        /* Fork before sqlite, gRPC or libuv hold any state. */
        rc = hv_daemonize(h->pid_path, o->log_file);
        if (rc != HV_OK) {
            fprintf(stderr, "hvhead: cannot daemonize (%s): %s\n", h->pid_path,
                    rc == HV_EEXIST ? "a head is already running" : hv_strerror(rc));
            return 1;
        }
    }

    rc = hv_store_open(h->cfg.data_dir, &h->store, err, sizeof(err));
    if (rc != HV_OK) {
        fprintf(stderr, "hvhead: %s\n", err);
        hv_head_config_fini(&h->cfg);
        hv_free(h);
        return 1;
    }
    h->loop = uv_default_loop();
    h->started_ms = hv_now_ms();
    int exit_code = 1;
    if ((rc = head_artifacts_init(h)) != HV_OK) {
        fprintf(stderr, "hvhead: cannot prepare %s/artifacts: %s\n", h->cfg.data_dir,
                hv_strerror(rc));
        goto out_store;
    }
    if ((rc = head_driver_load(h)) != HV_OK) {
        fprintf(stderr, "hvhead: cannot load state from %s: %s\n", hv_store_path(h->store),
                hv_strerror(rc));
        goto out_store;
    }
    if ((rc = hv_rpc_engine_create(h->loop, &h->eng)) != HV_OK) {
        fprintf(stderr, "hvhead: cannot start the rpc engine: %s\n", hv_strerror(rc));
        goto out_state;
    }
    rc = hv_rpc_server_create(h->eng, h->cfg.listen, &h->srv, &h->port);
    if (rc != HV_OK) {
        fprintf(stderr, "hvhead: cannot listen on %s: address in use or not available\n",
                h->cfg.listen);
        goto out_engine;
    }
    if ((rc = head_cluster_register(h)) != HV_OK || (rc = head_jobs_register(h)) != HV_OK ||
        (rc = head_artifacts_register(h)) != HV_OK || (rc = head_rdzv_register(h)) != HV_OK ||
        (rc = hv_rpc_server_start(h->srv)) != HV_OK) {
        fprintf(stderr, "hvhead: cannot start the server: %s\n", hv_strerror(rc));
        goto out_engine;
    }
    char host[256];
    int cfg_port;
    hv_parse_hostport(h->cfg.listen, host, sizeof(host), &cfg_port);
    head_derive_advertise(h, host);

    uv_timer_init(h->loop, &h->tick);
    h->tick.data = h;
    uv_timer_start(&h->tick, head_tick_cb, HEAD_TICK_MS, HEAD_TICK_MS);
    uv_signal_init(h->loop, &h->sigint);
    uv_signal_init(h->loop, &h->sigterm);
    h->sigint.data = h->sigterm.data = h;
    uv_signal_start(&h->sigint, head_signal_cb, SIGINT);
    uv_signal_start(&h->sigterm, head_signal_cb, SIGTERM);
    signal(SIGPIPE, SIG_IGN);

    head_event(h, 0, 0, "head.start", "head started on %s:%d (advertised as %s)", host, h->port,
               h->advertise);
    printf("hvhead: listening on %s:%d (cluster %s, advertised %s, data %s)\n", host, h->port,
           h->cfg.cluster_name, h->advertise, h->cfg.data_dir);
    fflush(stdout);
    head_driver_schedule(h);

    uv_run(h->loop, UV_RUN_DEFAULT);

    head_event(h, 0, 0, "head.stop", "head stopped");
    head_cluster_shutdown(h);
    hv_rpc_server_shutdown(h->srv);
    uv_close((uv_handle_t *)&h->tick, NULL);
    uv_close((uv_handle_t *)&h->sigint, NULL);
    uv_close((uv_handle_t *)&h->sigterm, NULL);
    exit_code = 0;
out_engine:
    hv_rpc_engine_destroy(h->eng);
out_state:
    head_driver_free(h);
    uv_run(h->loop, UV_RUN_NOWAIT);
    uv_loop_close(h->loop);
out_store:
    hv_store_close(h->store);
    if (o->daemon) {
        hv_pidfile_remove(h->pid_path);
    }
    hv_head_config_fini(&h->cfg);
    hv_free(h);
    if (exit_code == 0) {
        printf("hvhead: stopped\n");
    }
    return exit_code;
}

int main(int argc, char **argv) {
    head_opts_t o;
    hv_log_init("hvhead");
    int ec = parse_args(argc, argv, &o);
    if (ec != 0) {
        return ec;
    }
    if (strcmp(o.cmd, "stop") == 0) {
        return cmd_stop(&o);
    }
    return cmd_start(&o);
}
