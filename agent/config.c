/*
 * config: hvagent's command line (see config.h). Flags take "--flag value" or "--flag=value";
 * every error names the flag and the value. Defaults come from the host only when the flag was
 * not given.
 */
#include "config.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "mem.h"
#include "opt.h"
#include "util.h"

static const char agent_synopsis[] =
    "usage: hvagent join HOST:PORT [options]     register this node with the head and run its\n"
    "                                            workers (foreground unless --daemon)\n"
    "       hvagent stop  [--pid-file F | --work-dir DIR | --name NAME] [--timeout S]\n"
    "                                            stop the agent now (its workers are killed):\n"
    "                                            SIGINT, then SIGKILL after --timeout S (20)\n"
    "       hvagent drain [--pid-file F | --work-dir DIR | --name NAME]\n"
    "                                            drain the node without stopping the agent:\n"
    "                                            it takes no new work until the head undrains it\n"
    "join options:\n";

/* ---- host facts ----------------------------------------------------------------------------- */

uint32_t hv_agent_gpu_count(void) {
    const char *env = getenv("HV_AGENT_GPUS");
    uint64_t v;
    if (env != NULL && hv_parse_u64(env, 0, 1024, &v) == HV_OK) {
        return (uint32_t)v;
    }
    DIR *d = opendir("/dev");
    if (d == NULL) {
        return 0;
    }
    uint32_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *p = e->d_name;
        if (strncmp(p, "nvidia", 6) != 0 || p[6] == '\0') {
            continue;
        }
        p += 6;
        while (*p >= '0' && *p <= '9') {
            p++;
        }
        n += *p == '\0';
    }
    closedir(d);
    return n;
}

uint32_t hv_agent_cpu_count(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) {
            return (uint32_t)n;
        }
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (uint32_t)n : 1;
}

uint64_t hv_agent_copy_mb_default(uint64_t memory_mb) {
    if (memory_mb == 0) {
        return HV_AGENT_COPY_MB_UNKNOWN;
    }
    uint64_t q = memory_mb / 4;
    return q > HV_AGENT_COPY_MB_CAP ? HV_AGENT_COPY_MB_CAP : q == 0 ? 1 : q;
}

uint64_t hv_agent_memory_mb(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) {
        return 0;
    }
    return (uint64_t)pages * (uint64_t)page / (1024 * 1024);
}

int hv_agent_host_is_loopback(const char *host) {
    if (strcmp(host, "localhost") == 0 || strcmp(host, "::1") == 0) {
        return 1;
    }
    struct in_addr a;
    if (inet_pton(AF_INET, host, &a) == 1) {
        return (ntohl(a.s_addr) >> 24) == 127;
    }
    return 0;
}

static hv_err cfg_add_addr(hv_agent_config_t *cfg, const char *ip) {
    for (size_t i = 0; i < cfg->naddrs; i++) {
        if (strcmp(cfg->addrs[i], ip) == 0) {
            return HV_OK;
        }
    }
    if (cfg->naddrs >= HV_AGENT_MAX_ADDRS) {
        return HV_ETOOBIG;
    }
    char *c = hv_strdup(ip);
    if (c == NULL) {
        return HV_ENOMEM;
    }
    cfg->addrs[cfg->naddrs++] = c;
    return HV_OK;
}

static hv_err cfg_default_addrs(hv_agent_config_t *cfg) {
    if (!hv_agent_host_is_loopback(cfg->head_host)) {
        struct ifaddrs *ifs = NULL;
        if (getifaddrs(&ifs) == 0) {
            for (struct ifaddrs *i = ifs; i != NULL; i = i->ifa_next) {
                if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET ||
                    (i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP)) {
                    continue;
                }
                char buf[INET_ADDRSTRLEN];
                const struct sockaddr_in *sin = (const struct sockaddr_in *)(void *)i->ifa_addr;
                if (inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf)) != NULL &&
                    cfg_add_addr(cfg, buf) == HV_ENOMEM) {
                    freeifaddrs(ifs);
                    return HV_ENOMEM;
                }
            }
            freeifaddrs(ifs);
        }
    }
    if (cfg->naddrs == 0) {
        return cfg_add_addr(cfg, "127.0.0.1");
    }
    return HV_OK;
}

/* ---- flag values ---------------------------------------------------------------------------- */

static int name_valid(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > HV_AGENT_NAME_MAX || s[0] == '.' || s[0] == '-') {
        return 0;
    }
    for (const char *p = s; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-')) {
            return 0;
        }
    }
    return 1;
}

static hv_err cfg_add_labels(hv_agent_config_t *cfg, const char *list, char *err, size_t errlen) {
    char *copy = hv_strdup(list);
    if (copy == NULL) {
        return HV_ENOMEM;
    }
    hv_err rc = HV_OK;
    char *save = NULL;
    for (char *kv = strtok_r(copy, ",", &save); kv != NULL; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (eq == NULL || eq == kv || strlen(kv) > 256 + 1 + 1024) {
            hv_errf(err, errlen, "--labels: \"%.100s\" is not key=value", kv);
            rc = HV_EINVAL;
            goto out;
        }
        if (cfg->nlabels >= HV_AGENT_MAX_LABELS) {
            hv_errf(err, errlen, "--labels: more than %d labels (the agent adds %s)",
                    HV_AGENT_MAX_LABELS, HV_AGENT_RUN_AS_LABEL);
            rc = HV_EINVAL;
            goto out;
        }
        *eq = '\0';
        if (strcmp(kv, HV_AGENT_RUN_AS_LABEL) == 0) {
            hv_errf(err, errlen,
                    "--labels: %s is the agent's own label (the user its workers run as: "
                    "--run-as, else the agent's)",
                    HV_AGENT_RUN_AS_LABEL);
            rc = HV_EINVAL;
            goto out;
        }
        size_t i;
        for (i = 0; i < cfg->nlabels; i++) {
            if (strcmp(cfg->label_keys[i], kv) == 0) {
                break;
            }
        }
        char *v = hv_strdup(eq + 1);
        char *k = i == cfg->nlabels ? hv_strdup(kv) : NULL;
        if (v == NULL || (i == cfg->nlabels && k == NULL)) {
            hv_free(v);
            hv_free(k);
            rc = HV_ENOMEM;
            goto out;
        }
        if (i == cfg->nlabels) {
            cfg->label_keys[i] = k;
            cfg->label_values[i] = v;
            cfg->nlabels++;
        } else {
            hv_free(cfg->label_values[i]); // the last value of a key wins
            cfg->label_values[i] = v;
        }
    }
    if (list[0] == '\0') {
        hv_errf(err, errlen, "--labels: empty list");
        rc = HV_EINVAL;
    }
out:
    hv_free(copy);
    return rc;
}

static hv_err cfg_read_token(hv_agent_config_t *cfg, const char *path, char *err, size_t errlen) {
    char *data = NULL;
    size_t len = 0;
    hv_err rc = hv_read_file(path, 64 * 1024, &data, &len);
    if (rc != HV_OK) {
        hv_errf(err, errlen, "--token-file %s: %s", path, hv_strerror(rc));
        return HV_EINVAL;
    }
    while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == '\r' || data[len - 1] == ' ' ||
                       data[len - 1] == '\t')) {
        data[--len] = '\0';
    }
    hv_free(cfg->token);
    cfg->token = data;
    return HV_OK;
}

static hv_err cfg_absolute(const char *in, char *out, size_t outlen) {
    if (in[0] == '/') {
        if ((size_t)snprintf(out, outlen, "%s", in) >= outlen) {
            return HV_EINVAL;
        }
        return HV_OK;
    }
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof(cwd)) == NULL) {
        return hv_err_from_errno(errno);
    }
    const char *rel = in;
    while (rel[0] == '.' && rel[1] == '/') {
        rel += 2;
    }
    if ((size_t)snprintf(out, outlen, "%s/%s", cwd, rel) >= outlen) {
        return HV_EINVAL;
    }
    size_t n = strlen(out);
    while (n > 1 && out[n - 1] == '/') {
        out[--n] = '\0';
    }
    return HV_OK;
}

/* ---- parsing -------------------------------------------------------------------------------- */

typedef enum flag_id {
    F_TOKEN,
    F_TOKEN_FILE,
    F_SLOTS,
    F_MEMORY,
    F_NAME,
    F_LABELS,
    F_WORK_DIR,
    F_CACHE_MAX,
    F_COPY_MEMORY,
    F_ADDR,
    F_PREEMPTIBLE,
    F_INSTANCE_ID,
    F_RUN_AS,
    F_ORPHAN,
    F_CONNECT_TIMEOUT,
    F_DRAIN_DEADLINE,
    F_DAEMON,
    F_PID_FILE,
    F_LOG_FILE,
    F_LOG_LEVEL,
    F_TIMEOUT,
    F_HELP,
    F_VERSION,
    F_CA,
    F_CERT,
    F_KEY,
    F_INSECURE,
} flag_id;

#define C_JOIN (1u << HV_AGENT_CMD_JOIN)
#define C_STOP (1u << HV_AGENT_CMD_STOP)
#define C_DRAIN (1u << HV_AGENT_CMD_DRAIN)
#define C_ALL (C_JOIN | C_STOP | C_DRAIN)

/* hvagent's options, in the order of its --help (join's options are the ones listed). */
static const hv_opt_t agent_opts[] = {
    {"token", 0, HV_OPT_TEXT, 0, 0, C_JOIN, F_TOKEN, NULL,
     "  --token T              join token (or --token-file F, or HV_TOKEN in the environment)\n"},
    {"token-file", 0, HV_OPT_TEXT, 0, 0, C_JOIN, F_TOKEN_FILE, NULL,
     "  --token-file F         read the join token from file F\n"},
    {"slots", 0, HV_OPT_UINT, 1, 65535, C_JOIN, F_SLOTS,
     "--slots \"%.50s\": want a number from 1 to 65535",
     "  --slots N              worker slots offered (default: GPUs, else CPUs)\n"},
    {"memory-mb", 0, HV_OPT_UINT, 1, UINT64_C(1) << 40, C_JOIN, F_MEMORY,
     "--memory-mb \"%.50s\": want a number of MiB from 1 to 2^40",
     "  --memory-mb N          memory offered to actors' demands, in MiB (default: the\n"
     "                         machine's physical memory)\n"},
    {"name", 0, HV_OPT_TEXT, 0, 0, C_ALL, F_NAME, NULL,
     "  --name NAME            node name (default: the hostname)\n"},
    {"labels", 0, HV_OPT_TEXT, 0, 0, C_JOIN, F_LABELS, NULL,
     "  --labels k=v,...       node labels (repeatable)\n"},
    {"work-dir", 0, HV_OPT_TEXT, 0, 0, C_ALL, F_WORK_DIR, NULL,
     "  --work-dir DIR         cache, job dirs and pid file (default ./hv-agent-NAME)\n"},
    {"cache-max-mb", 0, HV_OPT_UINT, 0, HV_AGENT_CACHE_MAX_MB_MAX, C_JOIN, F_CACHE_MAX,
     "--cache-max-mb \"%.50s\": want a number of MiB from 0 to 1073741824 (0: unbounded)",
     "  --cache-max-mb N       bound of the artifact cache (WORK_DIR/cache), in MiB: the least\n"
     "                         recently used artifacts go when it is over; files a starting\n"
     "                         worker still needs stay (default 4096; 0: unbounded)\n"},
    {"copy-memory", 0, HV_OPT_UINT, 0, UINT64_C(1) << 30, C_JOIN, F_COPY_MEMORY,
     "--copy-memory \"%.50s\": want a number of MiB from 0 to 1073741824 (0: keeps none)",
     "  --copy-memory N        memory for other nodes' jobs' state copies kept here, in MiB\n"
     "                         (default: a quarter of --memory-mb, at most 4096; 0: keeps\n"
     "                         none). Members of jobs on other nodes send their committed\n"
     "                         copies here, on the first --addr at a port of its own, and\n"
     "                         the head keeps only the index; with 0, or no other node\n"
     "                         keeping any, copies go to the head\n"},
    {"addr", 0, HV_OPT_TEXT, 0, 0, C_JOIN, F_ADDR, NULL,
     "  --addr IP              address peers reach this node at (repeatable; default: every\n"
     "                         non-loopback IPv4, or 127.0.0.1 for a loopback head)\n"},
    {"preemptible", 0, HV_OPT_FLAG, 0, 0, C_JOIN, F_PREEMPTIBLE, NULL,
     "  --preemptible          this node is spot/preemptible capacity\n"},
    {"instance-id", 0, HV_OPT_TEXT, 0, 0, C_JOIN, F_INSTANCE_ID, NULL,
     "  --instance-id ID       cloud instance id (autoscaler bookkeeping)\n"},
    {"run-as", 0, HV_OPT_TEXT, 0, 0, C_JOIN, F_RUN_AS, NULL,
     "  --run-as USER          run workers as USER (its uid and primary group, no other\n"
     "                         groups); the agent itself needs root for it\n"},
    {"orphan-policy", 0, HV_OPT_TEXT, 0, 0, C_JOIN, F_ORPHAN, NULL,
     "  --orphan-policy P      kill|keep workers when the head is gone past the lease (kill)\n"},
    {"connect-timeout", 0, HV_OPT_UINT, 1, 86400, C_JOIN, F_CONNECT_TIMEOUT,
     "--connect-timeout \"%.50s\": want seconds from 1 to 86400",
     "  --connect-timeout S    keep trying to reach the head this long at start (30)\n"},
    {"drain-deadline", 0, HV_OPT_UINT, 0, 86400, C_JOIN, F_DRAIN_DEADLINE,
     "--drain-deadline \"%.50s\": want seconds from 0 to 86400 (0: SIGTERM stops the workers "
     "at once)",
     "  --drain-deadline S     SIGTERM (a preemption notice) drains the node: the workers keep\n"
     "                         running, the head moves elastic jobs away, and the agent exits\n"
     "                         once no worker is left, or stops them after S s (120; 0: SIGTERM\n"
     "                         stops at once). SIGINT, or a second SIGTERM, stops at once\n"},
    {"daemon", 0, HV_OPT_FLAG, 0, 0, C_JOIN, F_DAEMON, NULL,
     "  --daemon               detach; with --pid-file and --log-file\n"},
    {"pid-file", 0, HV_OPT_TEXT, 0, 0, C_ALL, F_PID_FILE, NULL,
     "  --pid-file F           pid file (default WORK_DIR/hvagent.pid)\n"},
    {"log-file", 0, HV_OPT_TEXT, 0, 0, C_JOIN, F_LOG_FILE, NULL,
     "  --log-file F           append logs to F\n"},
    {"log-level", 0, HV_OPT_TEXT, 0, 0, C_JOIN, F_LOG_LEVEL, NULL,
     "  --log-level L          error|warn|notice|info|debug\n"},
    {"timeout", 0, HV_OPT_UINT, 1, 3600, C_STOP, F_TIMEOUT,
     "--timeout \"%.50s\": want seconds from 1 to 3600", NULL},
    {"help", 'h', HV_OPT_FLAG, 0, 0, C_ALL, F_HELP, NULL, NULL},
    {"version", 0, HV_OPT_FLAG, 0, 0, C_ALL, F_VERSION, NULL, NULL},
    {"ca", 0, HV_OPT_TEXT, 0, 0, C_JOIN, F_CA, NULL,
     "  --ca FILE              verify the head's TLS certificate against this CA (or HV_CA_FILE);\n"
     "                         the workers get the path as HV_CA_FILE\n"},
    {"cert", 0, HV_OPT_TEXT, 0, 0, C_JOIN, F_CERT, NULL,
     "  --cert F --key F       client certificate and key (heads with tls.require_client_cert)\n"},
    {"key", 0, HV_OPT_TEXT, 0, 0, C_JOIN, F_KEY, NULL, NULL},
    {"insecure", 0, HV_OPT_FLAG, 0, 0, C_JOIN, F_INSECURE, NULL,
     "  --insecure             plain text to a head that is not on this machine (or\n"
     "                         HV_INSECURE=1); without it such a head needs --ca\n"},
};
#define AGENT_NOPTS (sizeof(agent_opts) / sizeof(agent_opts[0]))

void hv_agent_usage(FILE *f) {
    fputs(agent_synopsis, f);
    hv_opt_help(f, agent_opts, AGENT_NOPTS, C_JOIN);
}

/* TLS and the plain-text rule: --ca (else HV_CA_FILE) switches to TLS; a client certificate
 * needs both --cert and --key and TLS; plain text to a head beyond loopback needs --insecure
 * (or HV_INSECURE=1). */
static hv_err cfg_transport(hv_agent_config_t *cfg, char *err, size_t errlen) {
    const char *env = getenv("HV_CA_FILE");
    if (cfg->ca_file[0] == '\0' && env != NULL && env[0] != '\0' &&
        cfg_absolute(env, cfg->ca_file, sizeof(cfg->ca_file)) != HV_OK) {
        hv_errf(err, errlen, "HV_CA_FILE: bad path \"%.100s\"", env);
        return HV_EINVAL;
    }
    const char *ins = getenv("HV_INSECURE");
    if (ins != NULL && strcmp(ins, "1") == 0) {
        cfg->insecure = 1;
    }
    if ((cfg->cert_file[0] == '\0') != (cfg->key_file[0] == '\0')) {
        hv_errf(err, errlen, "--cert and --key go together (the client certificate and its key)");
        return HV_EINVAL;
    }
    if (cfg->cert_file[0] != '\0' && cfg->ca_file[0] == '\0') {
        hv_errf(err, errlen, "--cert/--key need --ca (the CA that signed the head's certificate)");
        return HV_EINVAL;
    }
    if (cfg->ca_file[0] == '\0' && !cfg->insecure && !hv_agent_host_is_loopback(cfg->head_host)) {
        hv_errf(err, errlen,
                "refusing plain text to the head at %s (not on this machine): give --ca FILE "
                "(or HV_CA_FILE) with the CA of the head's certificate, or --insecure on a "
                "trusted network",
                cfg->head);
        return HV_EINVAL;
    }
    return HV_OK;
}

static const char *cmd_name(hv_agent_cmd c) {
    return c == HV_AGENT_CMD_JOIN ? "join" : c == HV_AGENT_CMD_STOP ? "stop" : "drain";
}

/* What the steps of hv_agent_config_parse share while they read the command line. */
typedef struct parse_state_s {
    int positional;                /* the head address was given (join's one argument) */
    int slots_set;                 /* --slots given: no default from the GPUs or CPUs */
    int memory_set;                /* --memory-mb given: no default from the machine */
    int copy_set;                  /* --copy-memory given */
    int token_set, token_file_set; /* --token, --token-file: at most one of them */
    int work_dir_set;              /* --work-dir given: no default from the name */
    char work_dir_arg[PATH_MAX];   /* --work-dir as given, made absolute at the end */
} parse_state_t;

/* The defaults that are not 0. */
static void cfg_defaults(hv_agent_config_t *cfg) {
    memset(cfg, 0, sizeof(*cfg));
    cfg->orphan_kill = 1;
    cfg->connect_timeout_ms = 30000;
    cfg->drain_deadline_ms = 120000;
    cfg->stop_timeout_ms = 20000;
    cfg->cache_max_mb = HV_AGENT_CACHE_MAX_MB_DEFAULT;
}

/* The command, argv[1]: join, stop, drain, or help/version (which end the parse). */
static hv_err cfg_command(hv_agent_config_t *cfg, const char *cmd, char *err, size_t errlen) {
    if (strcmp(cmd, "join") == 0) {
        cfg->cmd = HV_AGENT_CMD_JOIN;
    } else if (strcmp(cmd, "stop") == 0) {
        cfg->cmd = HV_AGENT_CMD_STOP;
    } else if (strcmp(cmd, "drain") == 0) {
        cfg->cmd = HV_AGENT_CMD_DRAIN;
    } else if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        cfg->cmd = HV_AGENT_CMD_HELP;
    } else if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        cfg->cmd = HV_AGENT_CMD_VERSION;
    } else {
        hv_errf(err, errlen, "unknown command \"%.100s\" (want join, stop or drain)", cmd);
        return HV_EINVAL;
    }
    return HV_OK;
}

static int cfg_done(const hv_agent_config_t *cfg) {
    return cfg->cmd == HV_AGENT_CMD_HELP || cfg->cmd == HV_AGENT_CMD_VERSION;
}

/* join's one argument, the head's HOST:PORT. */
static hv_err cfg_positional(hv_agent_config_t *cfg, parse_state_t *ps, const char *a, char *err,
                             size_t errlen) {
    if (cfg->cmd != HV_AGENT_CMD_JOIN || ps->positional > 0) {
        hv_errf(err, errlen, "unexpected argument \"%.100s\"", a);
        return HV_EINVAL;
    }
    ps->positional++;
    if (hv_parse_hostport(a, cfg->head_host, sizeof(cfg->head_host), &cfg->head_port) != HV_OK ||
        cfg->head_port == 0 || strlen(a) >= sizeof(cfg->head)) {
        hv_errf(err, errlen, "bad head address \"%.100s\": want HOST:PORT", a);
        return HV_EINVAL;
    }
    snprintf(cfg->head, sizeof(cfg->head), "%s", a);
    return HV_OK;
}

/* An option the parser refused, in hvagent's words. */
static hv_err cfg_fault(const hv_agent_config_t *cfg, const hv_opt_got_t *g, char *err,
                        size_t errlen) {
    const char *nm = g->arg[1] == '-' ? g->arg + 2 : g->arg + 1;
    int dashes = g->arg[1] == '-' ? 2 : 1;
    char msg[256];
    switch (g->fault) {
    case HV_OPT_UNKNOWN:
    case HV_OPT_WRONG_CMD: /* an option of another command is unknown to this one */
        hv_errf(err, errlen, "unknown option '%.*s%.*s' for 'hvagent %s'", dashes, "--",
                (int)strcspn(nm, "="), nm, cmd_name(cfg->cmd));
        break;
    case HV_OPT_NEEDS_VALUE:
        hv_errf(err, errlen, "--%s needs a value", g->opt->name);
        break;
    case HV_OPT_NO_VALUE:
        hv_errf(err, errlen, "--%s takes no value", g->opt->name);
        break;
    default:
        hv_errf(err, errlen, "%s", hv_opt_fault_msg(g, NULL, msg, sizeof(msg)));
        break;
    }
    return HV_EINVAL;
}

/* The node's identity and what it offers: --token, --token-file, --slots, --name, --labels,
 * --addr, --preemptible, --instance-id. */
static hv_err cfg_flag_node(hv_agent_config_t *cfg, parse_state_t *ps, const hv_opt_got_t *g,
                            char *err, size_t errlen) {
    const char *val = g->value;
    hv_err rc;
    switch ((flag_id)g->opt->id) {
    case F_TOKEN:
        hv_free(cfg->token);
        cfg->token = hv_strdup(val);
        if (cfg->token == NULL) {
            return HV_ENOMEM;
        }
        ps->token_set = 1;
        return HV_OK;
    case F_TOKEN_FILE:
        if ((rc = cfg_read_token(cfg, val, err, errlen)) != HV_OK) {
            return rc;
        }
        ps->token_file_set = 1;
        return HV_OK;
    case F_SLOTS:
        cfg->slots = (uint32_t)g->num;
        ps->slots_set = 1;
        return HV_OK;
    case F_MEMORY:
        cfg->memory_mb = g->num;
        ps->memory_set = 1;
        return HV_OK;
    case F_NAME:
        if (!name_valid(val)) {
            hv_errf(err, errlen,
                    "--name \"%.100s\": want 1-%d characters of A-Z a-z 0-9 . _ - (not "
                    "starting with . or -)",
                    val, HV_AGENT_NAME_MAX);
            return HV_EINVAL;
        }
        snprintf(cfg->name, sizeof(cfg->name), "%s", val);
        return HV_OK;
    case F_LABELS:
        return cfg_add_labels(cfg, val, err, errlen);
    case F_ADDR: {
        struct in_addr a4;
        struct in6_addr a6;
        if (inet_pton(AF_INET, val, &a4) != 1 && inet_pton(AF_INET6, val, &a6) != 1) {
            hv_errf(err, errlen, "--addr \"%.100s\": not an IP address", val);
            return HV_EINVAL;
        }
        rc = cfg_add_addr(cfg, val);
        if (rc == HV_ETOOBIG) {
            hv_errf(err, errlen, "--addr: more than %d addresses", HV_AGENT_MAX_ADDRS);
            return HV_EINVAL;
        }
        return rc;
    }
    case F_PREEMPTIBLE:
        cfg->preemptible = 1;
        return HV_OK;
    case F_INSTANCE_ID:
        if (strlen(val) >= sizeof(cfg->instance_id)) {
            hv_errf(err, errlen, "--instance-id: longer than %zu characters",
                    sizeof(cfg->instance_id) - 1);
            return HV_EINVAL;
        }
        snprintf(cfg->instance_id, sizeof(cfg->instance_id), "%s", val);
        return HV_OK;
    default:
        return HV_EINTERNAL; // cfg_flag hands each group only its own flags
    }
}

/* How the agent runs its workers and times its waits: --work-dir, --cache-max-mb, --run-as,
 * --orphan-policy, --connect-timeout, --drain-deadline, --timeout. */
static hv_err cfg_flag_run(hv_agent_config_t *cfg, parse_state_t *ps, const hv_opt_got_t *g,
                           char *err, size_t errlen) {
    const char *val = g->value;
    switch ((flag_id)g->opt->id) {
    case F_WORK_DIR:
        if (val[0] == '\0' || strlen(val) >= sizeof(ps->work_dir_arg) - 64) {
            hv_errf(err, errlen, "--work-dir: bad directory \"%.100s\"", val);
            return HV_EINVAL;
        }
        snprintf(ps->work_dir_arg, sizeof(ps->work_dir_arg), "%s", val);
        ps->work_dir_set = 1;
        return HV_OK;
    case F_CACHE_MAX:
        cfg->cache_max_mb = g->num;
        return HV_OK;
    case F_COPY_MEMORY:
        cfg->copy_mb = g->num;
        ps->copy_set = 1;
        return HV_OK;
    case F_RUN_AS:
        if (val[0] == '\0' || strlen(val) >= sizeof(cfg->run_as)) {
            hv_errf(err, errlen, "--run-as: expected a user name of 1 to %zu characters",
                    sizeof(cfg->run_as) - 1);
            return HV_EINVAL;
        }
        snprintf(cfg->run_as, sizeof(cfg->run_as), "%s", val);
        return HV_OK;
    case F_ORPHAN:
        if (strcmp(val, "kill") == 0) {
            cfg->orphan_kill = 1;
        } else if (strcmp(val, "keep") == 0) {
            cfg->orphan_kill = 0;
        } else {
            hv_errf(err, errlen, "--orphan-policy \"%.50s\": want kill or keep", val);
            return HV_EINVAL;
        }
        return HV_OK;
    case F_CONNECT_TIMEOUT:
        cfg->connect_timeout_ms = (uint32_t)g->num * 1000u;
        return HV_OK;
    case F_DRAIN_DEADLINE:
        cfg->drain_deadline_ms = (uint32_t)g->num * 1000u;
        return HV_OK;
    case F_TIMEOUT:
        cfg->stop_timeout_ms = (uint32_t)g->num * 1000u;
        return HV_OK;
    default:
        return HV_EINTERNAL; // cfg_flag hands each group only its own flags
    }
}

/* The process and its files: --daemon, --pid-file, --log-file, --log-level, --help, --version,
 * and TLS: --ca, --cert, --key, --insecure. */
static hv_err cfg_flag_process(hv_agent_config_t *cfg, const hv_opt_got_t *g, char *err,
                               size_t errlen) {
    const char *val = g->value;
    char *dst = NULL;
    switch ((flag_id)g->opt->id) {
    case F_DAEMON:
        cfg->daemon = 1;
        return HV_OK;
    case F_LOG_LEVEL:
        if (hv_log_parse_level(val, &cfg->log_level) != 0) {
            hv_errf(err, errlen, "--log-level \"%.50s\": want error, warn, notice, info or debug",
                    val);
            return HV_EINVAL;
        }
        cfg->log_level_set = 1;
        return HV_OK;
    case F_HELP:
        cfg->cmd = HV_AGENT_CMD_HELP;
        return HV_OK;
    case F_VERSION:
        cfg->cmd = HV_AGENT_CMD_VERSION;
        return HV_OK;
    case F_INSECURE:
        cfg->insecure = 1;
        return HV_OK;
    case F_PID_FILE:
        dst = cfg->pid_file;
        break;
    case F_LOG_FILE:
        dst = cfg->log_file;
        break;
    case F_CA:
        dst = cfg->ca_file;
        break;
    case F_CERT:
        dst = cfg->cert_file;
        break;
    case F_KEY:
        dst = cfg->key_file;
        break;
    default:
        return HV_EINTERNAL; // cfg_flag hands each group only its own flags
    }
    /* A path flag: made absolute now, since a daemon changes its directory. */
    if (val[0] == '\0' || cfg_absolute(val, dst, PATH_MAX) != HV_OK) {
        hv_errf(err, errlen, "--%s: bad path \"%.100s\"", g->opt->name, val);
        return HV_EINVAL;
    }
    return HV_OK;
}

/* One flag with its value, handed to the group that owns it. */
static hv_err cfg_flag(hv_agent_config_t *cfg, parse_state_t *ps, const hv_opt_got_t *g, char *err,
                       size_t errlen) {
    switch ((flag_id)g->opt->id) {
    case F_TOKEN:
    case F_TOKEN_FILE:
    case F_SLOTS:
    case F_MEMORY:
    case F_NAME:
    case F_LABELS:
    case F_ADDR:
    case F_PREEMPTIBLE:
    case F_INSTANCE_ID:
        return cfg_flag_node(cfg, ps, g, err, errlen);
    case F_WORK_DIR:
    case F_CACHE_MAX:
    case F_COPY_MEMORY:
    case F_RUN_AS:
    case F_ORPHAN:
    case F_CONNECT_TIMEOUT:
    case F_DRAIN_DEADLINE:
    case F_TIMEOUT:
        return cfg_flag_run(cfg, ps, g, err, errlen);
    default:
        return cfg_flag_process(cfg, g, err, errlen);
    }
}

/* join's checks and the environment: the head address, one token source (HV_TOKEN when no flag
 * gives one), and the transport (cfg_transport: HV_CA_FILE, HV_INSECURE). */
static hv_err cfg_check_join(hv_agent_config_t *cfg, const parse_state_t *ps, char *err,
                             size_t errlen) {
    if (ps->positional == 0) {
        hv_errf(err, errlen, "hvagent join needs the head address HOST:PORT");
        return HV_EINVAL;
    }
    if (ps->token_set && ps->token_file_set) {
        hv_errf(err, errlen, "give --token or --token-file, not both");
        return HV_EINVAL;
    }
    if (!ps->token_set && !ps->token_file_set) {
        const char *env = getenv("HV_TOKEN");
        cfg->token = hv_strdup(env != NULL ? env : "");
        if (cfg->token == NULL) {
            return HV_ENOMEM;
        }
    }
    return cfg_transport(cfg, err, errlen);
}

/* Without --name: the hostname, kept to the characters a node name allows ("node" if none). */
static void cfg_default_name(hv_agent_config_t *cfg) {
    char host[256];
    if (gethostname(host, sizeof(host)) != 0) {
        snprintf(host, sizeof(host), "node");
    }
    host[sizeof(host) - 1] = '\0';
    size_t o = 0;
    for (size_t k = 0; host[k] != '\0' && o < HV_AGENT_NAME_MAX; k++) {
        char c = host[k];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '.' || c == '_' || c == '-') {
            cfg->name[o++] = c;
        }
    }
    cfg->name[o] = '\0';
    if (!name_valid(cfg->name)) {
        snprintf(cfg->name, sizeof(cfg->name), "node");
    }
}

/* The work directory (default hv-agent-NAME), absolute, and the pid file in it by default. */
static hv_err cfg_paths(hv_agent_config_t *cfg, parse_state_t *ps, char *err, size_t errlen) {
    if (!ps->work_dir_set) {
        snprintf(ps->work_dir_arg, sizeof(ps->work_dir_arg), "hv-agent-%s", cfg->name);
    }
    if (cfg_absolute(ps->work_dir_arg, cfg->work_dir, sizeof(cfg->work_dir)) != HV_OK) {
        hv_errf(err, errlen, "--work-dir: cannot make \"%.100s\" absolute", ps->work_dir_arg);
        return HV_EINVAL;
    }
    if (cfg->pid_file[0] == '\0') {
        if ((size_t)snprintf(cfg->pid_file, sizeof(cfg->pid_file), "%s/hvagent.pid",
                             cfg->work_dir) >= sizeof(cfg->pid_file)) {
            hv_errf(err, errlen, "--work-dir: path too long");
            return HV_EINVAL;
        }
    }
    return HV_OK;
}

/* join's view of this machine: its GPUs and CPUs, the slots they give by default, and the
 * addresses the node is reached at by default. */
static hv_err cfg_machine(hv_agent_config_t *cfg, const parse_state_t *ps) {
    cfg->gpus = hv_agent_gpu_count();
    cfg->cpus = hv_agent_cpu_count();
    if (!ps->slots_set) {
        cfg->slots = cfg->gpus > 0 ? cfg->gpus : cfg->cpus;
    }
    if (!ps->memory_set) {
        cfg->memory_mb = hv_agent_memory_mb();
    }
    if (!ps->copy_set) {
        cfg->copy_mb = hv_agent_copy_mb_default(cfg->memory_mb);
    }
    return cfg->naddrs == 0 ? cfg_default_addrs(cfg) : HV_OK;
}

/* Steps: the command; each argument (join's head address, or a flag handed to its group); join's
 * checks and the environment; the defaults that depend on what was given (name, work dir, pid
 * file); join's view of the machine. */
hv_err hv_agent_config_parse(int argc, char **argv, hv_agent_config_t *cfg, char *err,
                             size_t errlen) {
    cfg_defaults(cfg);
    err[0] = '\0';
    if (argc < 2) {
        hv_errf(err, errlen, "missing command (join, stop or drain)");
        return HV_EINVAL;
    }
    hv_err rc = cfg_command(cfg, argv[1], err, errlen);
    if (rc != HV_OK || cfg_done(cfg)) {
        return rc;
    }
    parse_state_t ps = {0};
    hv_opt_iter_t it;
    hv_opt_got_t g;
    hv_opt_init(&it, agent_opts, AGENT_NOPTS, 0, 1u << cfg->cmd, argc, argv, 2);
    for (hv_opt_res r; (r = hv_opt_next(&it, &g)) != HV_OPT_END;) {
        if (r == HV_OPT_ARG) {
            rc = cfg_positional(cfg, &ps, g.arg, err, errlen);
        } else if (r == HV_OPT_OPTION) {
            rc = cfg_flag(cfg, &ps, &g, err, errlen);
        } else {
            rc = cfg_fault(cfg, &g, err, errlen);
        }
        if (rc != HV_OK || cfg_done(cfg)) {
            return rc;
        }
    }
    if (cfg->cmd == HV_AGENT_CMD_JOIN && (rc = cfg_check_join(cfg, &ps, err, errlen)) != HV_OK) {
        return rc;
    }
    if (cfg->name[0] == '\0') {
        cfg_default_name(cfg);
    }
    if ((rc = cfg_paths(cfg, &ps, err, errlen)) != HV_OK) {
        return rc;
    }
    return cfg->cmd == HV_AGENT_CMD_JOIN ? cfg_machine(cfg, &ps) : HV_OK;
}

void hv_agent_config_fini(hv_agent_config_t *cfg) {
    hv_free(cfg->token);
    cfg->token = NULL;
    for (size_t i = 0; i < cfg->nlabels; i++) {
        hv_free(cfg->label_keys[i]);
        hv_free(cfg->label_values[i]);
    }
    cfg->nlabels = 0;
    for (size_t i = 0; i < cfg->naddrs; i++) {
        hv_free(cfg->addrs[i]);
    }
    cfg->naddrs = 0;
}
