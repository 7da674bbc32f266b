/*
 * config: hvagent's command line and the defaults it takes from the host (hostname, CPU and GPU
 * counts, IPv4 addresses). Parsing is pure apart from reading --token-file, HV_TOKEN and
 * HV_AGENT_GPUS and looking at the host; it starts nothing. Caller: agent/main.c (and
 * config_test.c). Not thread-safe (uses the environment); call once at startup.
 *
 *   hvagent join HOST:PORT [--token T | --token-file F] [--slots N] [--memory-mb N] [--name NAME]
 *                [--labels k=v,...] [--work-dir DIR] [--cache-max-mb N] [--copy-memory N]
 *                [--addr IP]...
 *                [--preemptible]
 *                [--instance-id ID] [--orphan-policy kill|keep] [--connect-timeout S]
 *                [--drain-deadline S] [--daemon] [--pid-file F] [--log-file F] [--log-level L]
 *                [--ca F [--cert F --key F] | --insecure]
 *   hvagent stop  [--pid-file F | --work-dir DIR | --name NAME] [--timeout S]
 *   hvagent drain [--pid-file F | --work-dir DIR | --name NAME]
 */
#ifndef HV_AGENT_CONFIG_H
#define HV_AGENT_CONFIG_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "err.h"
#include "log.h"

#define HV_AGENT_NAME_MAX 128  /* node name length bound */
#define HV_AGENT_MAX_LABELS 63 /* the operator's (--labels); the agent adds hv.run_as: 64 */
/* The node label the agent declares its workers' user with (--run-as, else its own): the head
 * holds the actors a job's worker creates to it (head/core/workcap.h). Not an operator label. */
#define HV_AGENT_RUN_AS_LABEL "hv.run_as"
#define HV_AGENT_MAX_ADDRS 32
#define HV_AGENT_CACHE_MAX_MB_DEFAULT 4096u           /* --cache-max-mb when not given */
#define HV_AGENT_CACHE_MAX_MB_MAX (UINT64_C(1) << 30) /* 1 PiB: far from overflowing bytes */
/* --copy-memory when not given: a quarter of the node's memory, at most this many MiB (issue 28
 * §3: the memory this agent lends to other nodes' jobs' state copies); HV_AGENT_COPY_MB_UNKNOWN
 * when the memory is not known. */
#define HV_AGENT_COPY_MB_CAP 4096u
#define HV_AGENT_COPY_MB_UNKNOWN 1024u

typedef enum hv_agent_cmd {
    HV_AGENT_CMD_JOIN = 0,
    HV_AGENT_CMD_STOP = 1,
    HV_AGENT_CMD_DRAIN = 2,
    HV_AGENT_CMD_HELP = 3,
    HV_AGENT_CMD_VERSION = 4,
} hv_agent_cmd;

/* Everything the command line says, defaults filled in. Caller storage; strings inline or owned
 * as noted; release with hv_agent_config_fini. */
typedef struct hv_agent_config_s {
    hv_agent_cmd cmd;
    char head[300];      /* "HOST:PORT" as given */
    char head_host[256]; /* its host part */
    int head_port;
    char *token;                      /* owned; "" when none */
    char name[HV_AGENT_NAME_MAX + 1]; /* node name (default: hostname) */
    uint32_t slots;                   /* default: gpus, else cpus */
    uint32_t gpus;                    /* /dev/nvidia[0-9]* count or HV_AGENT_GPUS */
    uint32_t cpus;                    /* CPUs this process may run on */
    uint64_t memory_mb; /* --memory-mb, default the physical memory (MiB; 0: unknown) */
    char *label_keys[HV_AGENT_MAX_LABELS];   /* owned */
    char *label_values[HV_AGENT_MAX_LABELS]; /* owned */
    size_t nlabels;
    char *addrs[HV_AGENT_MAX_ADDRS]; /* owned; IPs peers use to reach this node */
    size_t naddrs;
    char work_dir[PATH_MAX]; /* absolute (default ./hv-agent-<name>) */
    uint64_t cache_max_mb;   /* bound of <work_dir>/cache in MiB (default 4096; 0 = unbounded) */
    uint64_t copy_mb;        /* --copy-memory: bound of the peers' state copies kept in memory,
                                MiB (default hv_agent_copy_mb_default; 0 = keeps none) */
    int preemptible;
    char instance_id[256];
    char run_as[64]; /* --run-as USER: workers run as this user; "" = the agent's own user */
    int orphan_kill; /* 1: kill workers when the lease runs out; 0: keep */
    uint32_t connect_timeout_ms; /* first-join retry window (default 30 s) */
    uint32_t drain_deadline_ms;  /* SIGTERM: drain for at most this long (default 120 s; 0 =
                                    SIGTERM stops at once) */
    int daemon;
    char pid_file[PATH_MAX]; /* default <work_dir>/hvagent.pid */
    char log_file[PATH_MAX]; /* "" = stderr */
    int log_level_set;
    hv_log_level log_level;
    uint32_t stop_timeout_ms; /* stop: how long to wait for the agent (default 20 s) */
    char ca_file[PATH_MAX];   /* --ca or HV_CA_FILE, absolute; "" = plain text */
    char cert_file[PATH_MAX]; /* --cert (client certificate for mTLS), absolute, or "" */
    char key_file[PATH_MAX];  /* --key, absolute, or "" */
    int insecure;             /* --insecure / HV_INSECURE=1: plain text beyond loopback */
} hv_agent_config_t;

/* Parses argv (argv[0] is the program). On HV_OK cfg is complete. On HV_EINVAL err holds a
 * one-line message for the user (the caller prints it with the usage and exits 2). Other
 * errors: HV_ENOMEM. cfg must be released with hv_agent_config_fini in every case. */
hv_err hv_agent_config_parse(int argc, char **argv, hv_agent_config_t *cfg, char *err,
                             size_t errlen);

void hv_agent_config_fini(hv_agent_config_t *cfg);

/* Writes the usage text (the synopsis, then join's options from the option table) to f. */
void hv_agent_usage(FILE *f);

/* Host facts used as defaults, exposed for tests. */
uint32_t hv_agent_gpu_count(void);
uint32_t hv_agent_cpu_count(void);
/* The machine's physical memory in MiB (0 when it cannot be read). */
uint64_t hv_agent_memory_mb(void);
/* 1 when host names this machine's loopback ("localhost", 127.x.y.z, ::1). */
int hv_agent_host_is_loopback(const char *host);

/* Pure: --copy-memory's default for a node of memory_mb MiB (0: unknown): a quarter of it, at most
 * HV_AGENT_COPY_MB_CAP, at least 1 MiB; HV_AGENT_COPY_MB_UNKNOWN when unknown. */
uint64_t hv_agent_copy_mb_default(uint64_t memory_mb);

#endif
