/*
 * config: hvhead's configuration file (YAML), read once at start. The module fills a plain
 * struct with defaults, lays the file on top, and validates every key, range and cross-field
 * rule before anything starts, so that a mistake is reported as `FILE:LINE:COL: problem` naming
 * the key and the value instead of surfacing later as odd behaviour. It also resolves the join
 * token (inline, from token_file, or generated once into the data dir). It is not a runtime
 * settings store: nothing here is reloaded, watched or written back, and it reads no
 * environment variables (common/param.c does). Callers: head/main.c at start, and tests. Not
 * thread-safe; a loaded config is read-only afterwards and may then be shared.
 * docs/configuration.md documents every key.
 */
#ifndef HV_HEAD_CONFIG_H
#define HV_HEAD_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* One node type the autoscaler may launch (autoscaler.node_types.NAME). */
typedef struct hv_head_node_type_s {
    char *name;                     /* the key under node_types; letters, digits, '.', '_', '-' */
    uint32_t slots;                 /* worker slots per node; required, 1..4096 */
    uint32_t gpus;                  /* GPUs per node; 0 */
    int preemptible;                /* spot / preemptible; false */
    double price_per_hour;          /* what a node costs per hour; 0 */
    double ondemand_price_per_hour; /* the same node on demand, for the cost report; default
                                     * price_per_hour when not preemptible, else 0 (unknown) */
    uint32_t min_nodes;             /* kept even when idle; 0 */
    uint32_t max_nodes;             /* at most; default autoscaler.max_nodes */
    uint32_t capacity;              /* spot-sim only: instances the simulated cloud has at once;
                                     * 0 = no limit */
    char *labels;                   /* "k=v,k=v" (the labels mapping), or NULL */
    uint64_t memory_mb;             /* memory its nodes offer, MiB (their agents' --memory-mb);
                                     * 0: not set (the machine's; meets no actor's memory
                                     * demand in the autoscaler's choice) */
} hv_head_node_type_t;

/* One namespace of the fleet policy (fleet.namespaces[i]; head/core/fleet.h, docs/scheduling.md).
 * Resources are slots, GPUs and memory in MiB, as hv_fl_res_t counts them. */
typedef struct hv_head_ns_s {
    char *name;         /* the jobs' --namespace (and actors'); 1..63 of [A-Za-z0-9._-] */
    uint32_t weight;    /* its share against the others'; 1; 1..1000 */
    uint64_t quota[3];  /* guaranteed: slots, GPUs, memory MiB; 0 (none) */
    uint64_t borrow[3]; /* the most it may use beyond its quota; UINT64_MAX (no limit) */
    int32_t priority;   /* its jobs' priority when hvsubmit --priority is not given; 0 */
} hv_head_ns_t;

/* hvhead's settings. Every char * is owned by the struct (freed by hv_head_config_fini) and is
 * NULL only where noted. Times are in the unit the name says. */
typedef struct hv_head_config_s {
    char *path;                /* file loaded, or NULL for pure defaults */
    char *cluster_name;        /* shown by hvctl and in logs; default "hv" */
    char *listen;              /* HOST:PORT of the gRPC server; default "127.0.0.1:7000" */
    char *advertise;           /* HOST:PORT agents/workers use to reach the head; NULL = derive */
    char *data_dir;            /* sqlite state, artifacts, job logs; default "./hv-data" */
    char *token;               /* join token given inline, or NULL */
    char *token_file;          /* file holding the join token, or NULL */
    uint32_t heartbeat_ms;     /* agent heartbeat period; 1000; 50..60000 */
    uint32_t lease_ms;         /* node lease; 10000; >= 3 * heartbeat_ms, <= 3600000 */
    uint32_t suspect_grace_ms; /* a round waits this long for a node suspected lost (its
                                * agent's session closed) before it forms without it; 500;
                                * 0..3600000 (the lease bounds it) */
    int log_level;             /* an hv_log_level (common/log.h); default HV_LOG_NOTICE */
    uint64_t max_upload_bytes; /* key max_upload; 1 GiB; 1 KiB..64 GiB */
    uint64_t actor_state_max;  /* the largest saved state of an actor the head keeps for a move
                                * (bounded by max_upload too); 256 MiB; 1 KiB..64 GiB */
    uint64_t
        upload_quota_bytes;    /* key upload_quota: unfinished uploads held; 4 GiB; 1 KiB..1 TiB */
    uint32_t upload_timeout_s; /* an unfinished upload untouched this long is removed; 3600 */
    uint32_t kill_grace_ms;    /* SIGTERM to SIGKILL delay for workers; 5000; 0..600000 */
    uint32_t job_wait_timeout_s; /* default bound for a job waiting for slots; 600; 1..604800 */
    /* Job output files (<data_dir>/logs; head/store/joblog.h): past a cap, output is dropped with a
     * marker line so the state database always has room. */
    struct {
        uint64_t max_job_bytes;      /* one job's log; 256 MiB; 1 KiB..1 TiB */
        uint64_t max_total_bytes;    /* every log together; 4 GiB, and at most half the data
                                      * file system (applied at run time); 1 KiB..64 TiB */
        uint64_t reserve_free_bytes; /* free space kept for state; 256 MiB, and at most a
                                      * quarter of the data file system; 0..1 TiB */
    } logs;
    /* How long finished jobs stay in the state database with their workers, events (rounds) and
     * logs (head/store/history.h, docs/operations.md "History"). 0 = no limit of that kind. */
    struct {
        uint32_t max_age_days;     /* finished jobs that ended longer ago go; 0 (keep); 0..36500 */
        uint32_t max_jobs;         /* finished jobs beyond the newest N go; 0 (keep) */
        uint32_t prune_interval_s; /* how often the head prunes (and once at start); 600 */
        uint32_t artifact_grace_s; /* an artifact no kept job uses goes once it was neither
                                      uploaded nor used this long; 3600; 1..31536000 */
    } history;
    struct {
        uint32_t elastic_timeout_s;        /* wait for min-np nodes after a loss; 600 */
        uint32_t max_resets;               /* resets before the job fails; 3 */
        uint32_t blacklist_cooldown_s;     /* first cooldown of a failed node; 60; 0 = none */
        uint32_t blacklist_max_cooldown_s; /* cap of the doubling cooldown; 3600 */
        uint32_t rendezvous_timeout_s;     /* deadline for a rendezvous round; 60 */
        uint32_t check_every;              /* commits between membership checks; 1 */
        uint32_t blacklist_max_strikes;    /* failures before a permanent bar; 5; 0 = never */
    } elastic;
    /* How the head shares the cluster among jobs (issue 26; head/core/fleet.h, docs/scheduling.md):
     * key fleet.*. */
    struct {
        uint32_t resize_interval_ms; /* a running job is resized at most this often, but to admit
                                        a waiting job or for a higher priority; 3000 */
        uint32_t reset_ms;           /* what a resize costs a job, for the payback rule; 50 */
        uint32_t starve_ms;          /* a job waiting longer goes before the jobs behind it;
                                        60000 */
        uint32_t age_ms;      /* waiting this long counts one priority higher; 600000; 0: never */
        uint32_t reserve_pct; /* rule 8: percent of each resource kept from the floors of
                                      jobs below reserve_priority that are not preemptible; 0 */
        uint32_t reserve_priority; /* the priority the reserve is kept for (and higher); 1 */
        hv_head_ns_t *ns; /* fleet.namespaces, in the file's order (NULL, 0: none configured:
                             every job in one namespace without a quota) */
        size_t nns;
        int fcfs; /* fleet.policy: fleet (0, default) | fcfs (1): first come, first served,
                     the queue before issue 26, for comparisons (bench_fleet.sh --real) */
    } fleet;
    /* The durable tier of the jobs' state copies (docs/RELIABILITY.md "The durable tier"): the
     * head writes its newest copy of each running elastic job there every interval_s seconds,
     * off its loop thread (head/store/durable.c). Off unless dir or upload is set; at most one
     * of the two; upload needs download. */
    struct {
        char *dir;           /* key state_copies.durable.dir: an absolute path (a shared file
                             * system), or NULL */
        char *upload;        /* key ...upload: command template ({file} {key} {job} {sha256}) */
        char *download;      /* key ...download: the reverse ({key} into {file}) */
        char *remove;        /* key ...remove: drops an object a newer copy replaced, or NULL
                             * (older objects are then left to the store's own expiry) */
        uint32_t interval_s; /* a job's copy is written at most this often; 60; 1..86400 */
        uint32_t timeout_s;  /* one copy or command at most; 600; 1..86400 */
    } durable;
    struct {
        char *provider;               /* "none" (default) | "local" | "command" | "spot-sim" */
        uint32_t min_nodes;           /* nodes kept even when idle; 0 */
        uint32_t max_nodes;           /* nodes the autoscaler may own; 0; >= min_nodes, and >= 1
                                   * when provider is not "none" */
        uint32_t idle_timeout_s;      /* idle time before a node is given back; 300 */
        uint32_t local_slots;         /* key autoscaler.local.slots: slots per local agent; 2 */
        char *command_launch;         /* key autoscaler.command.launch, or NULL */
        char *command_terminate;      /* key autoscaler.command.terminate, or NULL */
        char *command_list;           /* key autoscaler.command.list, or NULL */
        double upscaling_speed;       /* launching at once: max(5, ceil(speed x running)); 1.0 */
        uint32_t launch_timeout_s;    /* an instance not joined by then is a failure; 300 */
        uint32_t max_launch_failures; /* failures in a row that set a type aside; 3 */
        uint32_t set_aside_s;         /* for how long; 300 */
        int handback;                 /* on-demand handed back when spot is usable; true */
        double spare_per_hour;        /* key spare_preemptions_per_hour: 0 (off) */
        uint32_t spare_nodes;         /* spares kept while the rate is high; 1 */
        uint32_t spare_window_s;      /* the measured rate's time constant; 3600 */
        uint32_t fallback_delay_s;    /* a running job waits this long for short spot; 0 */
        hv_head_node_type_t *types;   /* in fallback order; never empty once loaded (without
                                       * node_types: one type "local", or "spot" for spot-sim,
                                       * of local.slots slots) */
        size_t ntypes;
        struct {
            uint32_t seed;             /* 1 */
            uint32_t boot_min_ms;      /* boot delay, uniform in [min, max]; 1000 */
            uint32_t boot_max_ms;      /* 3000 */
            uint32_t preempt_every_s;  /* mean gap between random preemptions; 0 = none */
            uint32_t notice_s;         /* lead time of a notice; 30 */
            double no_notice_fraction; /* preemptions that come without notice; 0 */
            char *trace;               /* a preemption trace file, or NULL */
        } spot_sim;
    } autoscaler;
    /* TLS (docs/tls.md). The files are checked at load: readable PEM, the key matches the
     * certificate. Without cert, the head serves plain text. */
    struct {
        char *cert;              /* PEM certificate (chain) of the head, or NULL */
        char *key;               /* its PEM private key; set together with cert */
        char *ca;                /* PEM CA that signs the agents' client certificates, or NULL */
        int require_client_cert; /* agents (the Cluster service) must present a certificate
                                    signed by ca; needs ca */
    } tls;
    /* Prometheus metrics over HTTP (head/services/metrics.c, docs/metrics.md). No TLS: beyond loopback
     * a token is required. */
    struct {
        char *listen;     /* numeric HOST:PORT of /metrics; NULL = no metrics listener */
        char *token_file; /* file with the bearer token a scraper must send; NULL = none (then
                             listen must be a loopback address) */
    } metrics;
    int allow_insecure; /* plain text on a non-loopback listen address is allowed (with a WARN);
                           without it, a file listening beyond loopback without tls is refused */
    /* Resource bounds (docs/security.md "Resource bounds"). 0 = derived at start from the
     * open-file limit (hvhead sets its soft limit to the hard one). */
    struct {
        uint32_t handshake_timeout_ms; /* a connection not set up by then is closed; 10000 */
        uint32_t max_watch_streams;    /* Jobs/Watch streams open at once, in all; 0 = derive */
        uint32_t max_watch_streams_per_client; /* per client credential; 0 = derive */
        uint32_t max_connections;            /* gRPC connections open at once, in all; 0 = derive */
        uint32_t max_connections_per_client; /* from one peer IP address; 0 = derive */
    } limits;
} hv_head_config_t;

/* Fills cfg (caller storage, previous content ignored) with the defaults. Allocates the
 * default strings; if memory runs out, string fields may be NULL: hv_head_config_load checks
 * and reports HV_ENOMEM, so callers that need a guarantee use hv_head_config_load(NULL, ...).
 * Release with hv_head_config_fini. */
void hv_head_config_defaults(hv_head_config_t *cfg);

/* Loads defaults, then the YAML file at path (borrowed; NULL = defaults only) on top, and
 * validates the result. Blocking (reads the file). On HV_OK, *cfg (caller storage, previous
 * content ignored) holds the owned result; release it with hv_head_config_fini. On failure
 * *cfg is not touched and err (errlen bytes, may be NULL when errlen is 0) holds one line:
 *   "FILE:LINE:COL: key 'heartbeat_ms': value 'fast' is not an integer"
 * (line and column are 1-based; a file-level problem is "FILE: cannot open: <reason>").
 * Returns HV_EINVAL for bad content, HV_ENOTFOUND when the file does not exist, HV_EIO when it
 * cannot be read, HV_ENOMEM. */
hv_err hv_head_config_load(const char *path, hv_head_config_t *cfg, char *err, size_t errlen);
/* The same for YAML text held in memory (len bytes, need not be NUL-terminated); name stands
 * for the file in messages and cfg->path. No file is read. For tests and the fuzzer. */
hv_err hv_head_config_parse(const char *name, const char *text, size_t len, hv_head_config_t *cfg,
                            char *err, size_t errlen);

/* Makes cfg->token hold the join token. Blocking (file I/O).
 *  - token set inline: nothing to do.
 *  - token_file set: reads it, trims surrounding whitespace; an unreadable or empty file, or a
 *    token with inner whitespace, is an error. A file readable by group or others is accepted
 *    with a WARN (HV-CFG-TOKEN-PERMS).
 *  - neither: reuses <data_dir>/token if it exists, else creates data_dir (0700) and writes a
 *    new random 32-hex-digit token there (mode 0600). cfg->token_file is then set to that path
 *    so the caller can tell the operator where the token is.
 * Returns HV_OK, HV_EINVAL (empty or malformed token), HV_ENOTFOUND, HV_EIO, HV_ENOMEM, with a
 * one-line message in err on failure. cfg is changed only on HV_OK. */
hv_err hv_head_config_resolve_token(hv_head_config_t *cfg, char *err, size_t errlen);

/* Reads metrics.token_file (one word, surrounding whitespace trimmed; a file readable by group
 * or others is accepted with a WARN) into *out (owned; NULL when no token file is set).
 * Blocking. Errors as hv_head_config_resolve_token, with a one-line message in err. */
hv_err hv_head_config_metrics_token(const hv_head_config_t *cfg, char **out, char *err,
                                    size_t errlen);

/* 1 when the head would serve plain text beyond loopback: no tls and a non-loopback listen
 * address (the caller refuses that unless allow_insecure, and warns when it is allowed). */
int hv_head_config_plain_text_exposed(const hv_head_config_t *cfg);

/* The configured namespace called name (NULL or "": "default"), or NULL when none is. */
const hv_head_ns_t *hv_head_config_ns(const hv_head_config_t *cfg, const char *name);
/* The one lookup of the fleet namespace a job or actor of namespace name counts in, as the
 * fleet policy's index: the configured one called name, else "default"'s (an unlisted name
 * counts there), else fleet.nns (the implicit "default" after the configured ones). */
size_t hv_head_config_ns_index(const hv_head_config_t *cfg, const char *name);
/* The name of the fleet's namespace i as hv_head_config_ns_index counts them: the configured
 * one, else "default" (borrowed from cfg, or static). */
const char *hv_head_config_ns_name(const hv_head_config_t *cfg, size_t i);

/* Frees everything cfg owns and zeroes it. cfg may be NULL; calling it twice is harmless. */
void hv_head_config_fini(hv_head_config_t *cfg);

#endif
