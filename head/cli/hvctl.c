/*
 * hvctl: looks at and steers an hv cluster through the head's Jobs service: nodes (with their
 * blacklist entries), jobs, one job with its workers (and, for elastic jobs, its rounds and
 * resets), a job's logs, cancel, the event log, and draining a node or taking it back. Output
 * is an aligned table for people or, with --json, one JSON document for scripts (an event's
 * data, a JSON object from the head, is embedded as an object). It holds no state and makes one
 * call per command (a stream for logs; one call per page for the node and job lists, which it
 * follows to the end); every unary call has a 10 s deadline. Single-threaded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_common.h"
#include "cli_rpc.h"
#include "hvctl_actors.h"
#include "hv.pb-c.h"
#include "log.h"
#include "mem.h"
#include "opt.h"
#include "rpc.h"
#include "util.h"
#include "jobsize.h"

#define CTL_PROG "hvctl"
#define CTL_MAX_NODES 64 /* drain/undrain: nodes in one call */
#define CTL_MAX_NODES_STR "64"
#define CTL_MAX_POS (CTL_MAX_NODES + 2) /* the command, a subcommand, the nodes */
#define CTL_JOBS_PAGE 100u              /* jobs asked for per ListJobs call */
#define CTL_PAGES_MAX 100000u /* calls one list makes at most (a guard against a head that loops) */

/* The commands, in the order of hvctl --help; a bit each in the option table's cmds. */
typedef enum ctl_cmd {
    CMD_STATUS,
    CMD_NODES,
    CMD_JOBS,
    CMD_QUEUE,
    CMD_JOB,
    CMD_LOGS,
    CMD_CANCEL,
    CMD_EVENTS,
    CMD_COST,
    CMD_DRAIN,
    CMD_UNDRAIN,
    CMD_REVOKE,
    CMD_AUDIT,
    CMD_TOKEN_CREATE,
    CMD_TOKEN_LIST,
    CMD_TOKEN_REVOKE,
    CMD_ACTOR_CREATE,
    CMD_ACTORS,
    CMD_ACTOR,
    CMD_KILL_ACTOR,
    CMD_ACTOR_LOGS,
    CTL_NCMDS
} ctl_cmd;

#define B(c) (1u << (c))
#define B_ACTORS                                                                                   \
    (B(CMD_ACTOR_CREATE) | B(CMD_ACTORS) | B(CMD_ACTOR) | B(CMD_KILL_ACTOR) | B(CMD_ACTOR_LOGS))

/* The parsed command line. Strings borrowed from argv. */
typedef struct ctl_opts_s {
    const char *head;          /* --head or NULL */
    const char *ca;            /* --ca or NULL */
    const char *token_file;    /* --token-file or NULL */
    int insecure;              /* --insecure */
    int json;                  /* --json */
    int follow;                /* logs --follow */
    int raw;                   /* logs --raw: worker output as it came, even on a terminal */
    uint32_t head_timeout_s;   /* logs --follow --head-timeout: wait this long for the head */
    int head_timeout_set;      /* --head-timeout was given (else the lease + a margin) */
    uint64_t job_id;           /* the ID argument, or events --job */
    int job_set;               /* events --job was given */
    uint32_t limit;            /* --limit, 0 = the head's default */
    ctl_cmd cmd_id;            /* the command */
    const char *cmd;           /* its word in messages: nodes|jobs|...|revoke|token-create|... */
    const char *const *nodes;  /* drain/undrain/revoke: the NODE arguments (names or ids) */
    int nnodes;                /* how many (revoke: 1) */
    const char *reason;        /* drain/undrain --reason, or NULL */
    uint64_t since_ms;         /* audit --since: this long ago (ms), 0 = all */
    const char *who;           /* audit --who, or NULL */
    const char *method;        /* audit --method, or NULL */
    int refused;               /* audit --refused */
    uint64_t ttl_ms;           /* token create --ttl, 0 = never expires */
    uint32_t uses;             /* token create --uses, 0 = no limit */
    const char *token_id;      /* token revoke ID */
    hv_ctl_actor_opts_t actor; /* the actor commands' options (hvctl_actors.h) */
} ctl_opts_t;

/* What the command functions share. */
typedef struct ctl_s {
    const ctl_opts_t *o;
    const char *head;     /* resolved address, borrowed */
    hv_rpc_channel_t *ch; /* owned by main */
} ctl_t;

/* The commands: name, arguments, what it does (for the usage and each command's --help). */
static const struct {
    const char *name;
    const char *args;
    const char *what;
} ctl_cmds[] = {
    {"status", "[--since D]",
     "a cluster summary: nodes by state, slots used and\n"
     "free, jobs and actors by state, the pending demand\n"
     "(jobs waiting for slots, actors waiting for a place,\n"
     "elastic jobs below --max-np), and the fleet: jobs\n"
     "running, waiting and preempted, each namespace's share\n"
     "of the slots, the resizes of the last D (default 10m)\n"
     "by cause"},
    {"nodes", "", "nodes of the cluster, their slots and blacklist entries"},
    {"jobs", "[--limit N]", "recent jobs (the newest N, default 100)"},
    {"queue", "[--limit N]",
     "the namespaces (quota, borrowing limit, use, borrowed,\n"
     "share of the cluster), then the jobs waiting or running\n"
     "among the newest N (default 1000), highest priority\n"
     "first: each one's namespace, priority, size, the size the\n"
     "head's fleet policy gives it and why (admitted, shrunk\n"
     "for job N, waiting for capacity, ...)"},
    {"job", "ID", "one job and its workers"},
    {"logs", "ID [--follow|-f] [--head-timeout S] [--raw]",
     "a job's output ([rank]<stdout>:text); --follow waits for more\n"
     "until the job ends, across a restart of the head (waiting\n"
     "for it the nodes' lease + 30 s, or --head-timeout S); on a\n"
     "terminal, control characters in the output (escape\n"
     "sequences) are shown as \\xNN unless --raw"},
    {"cancel", "ID", "cancel a job"},
    {"events", "[--job ID] [--limit N]", "the event log, newest last"},
    {"cost", "[--job ID]",
     "what the cluster (or one job) cost: instance-seconds by node\n"
     "type, cost at the configured prices, the same time on\n"
     "demand, preemptions (survived, for a job), rollbacks and\n"
     "the samples they sent back to be done again"},
    {"drain", "NODE... [--reason TEXT]",
     "drain nodes (names or ids): they take no new work and\n"
     "elastic jobs move off them at their next commit (the\n"
     "nodes of one call in one round; all or none of them)"},
    {"undrain", "NODE... [--reason TEXT]", "let drained nodes take work again"},
    {"node revoke", "NODE",
     "revoke a node's credential (NODE: a name or id) and end\n"
     "its session: its agent stops (and its workers); it needs\n"
     "the join token to come back"},
    {"audit", "[--since D] [--who ID] [--method M] [--refused] [--limit N]",
     "the audit trail, newest first (default 100 entries): every\n"
     "change (submit, cancel, drain, revoke, join, tokens) and\n"
     "every refused call, with who, from where and the result;\n"
     "D: 30s, 10m, 2h, 7d"},
    {"token create", "[--ttl D] [--uses N]",
     "make a join token for agents (hvagent --token); its secret\n"
     "is printed this once. Default: no expiry, no use limit"},
    {"token list", "", "join tokens: id, state, expiry, uses (never the secret)"},
    {"token revoke", "ID", "revoke a join token: agents can no longer join with it"},
    {"actor create", "--class C -- PROG",
     "create an actor (hvctl actor --help, docs/actors.md);\n"
     "PROG: a local file (uploaded) or a program on the\n"
     "node; detached unless --owner-job ID"},
    {"actors", "[--namespace NS]", "actors: state, node, restarts, address"},
    {"actor", "NAME|ID [--namespace NS]", "one actor: state and cause, node, restarts"},
    {"kill-actor", "NAME|ID [--restart]", "kill an actor; --restart starts a new process"},
    {"actor-logs", "NAME|ID [--namespace NS]",
     "what an actor's processes printed (stdout,\n"
     "stderr), as the head keeps it"},
};
_Static_assert(sizeof(ctl_cmds) / sizeof(ctl_cmds[0]) == CTL_NCMDS, "a row per ctl_cmd");

/* ---- the command line --------------------------------------------------------------------- */

enum ctl_opt_id {
    O_HEAD, /* the global options: every command takes them */
    O_CA,
    O_INSECURE,
    O_TOKEN_FILE,
    O_JSON,
    O_HELP,
    O_VERSION,
    O_TTL, /* a command's own, in the order a misplaced one is reported (ctl_check_placed) */
    O_USES,
    O_SINCE,
    O_WHO,
    O_METHOD,
    O_REFUSED,
    O_FOLLOW,
    O_RAW,
    O_HEAD_TIMEOUT,
    O_JOB,
    O_LIMIT,
    O_REASON,
    O_NAME, /* the actor commands' */
    O_NAMESPACE,
    O_CLASS,
    O_ARG,
    O_SLOTS,
    O_GPUS,
    O_MEMORY_MB,
    O_LABEL,
    O_MAX_RESTARTS,
    O_MAX_CALL_RETRIES,
    O_OWNER_JOB,
    O_ENV,
    O_RESTART,
    CTL_NOPT_IDS
};

#define DAYS_3650 (3650ull * 86400000ull)

/* hvctl's options: the global ones first (their lines are the "options:" of every --help), then
 * each command's own (described with the command, in ctl_cmds). */
static const hv_opt_t ctl_opts[] = {
    {"head", 0, HV_OPT_TEXT, 0, 0, 0, O_HEAD, NULL,
     "  --head HOST:PORT   the head (default: $HV_HEAD, else " HV_CLI_DEFAULT_HEAD ")\n"},
    {"ca", 0, HV_OPT_TEXT, 0, 0, 0, O_CA, NULL,
     "  --ca FILE          verify the head's TLS certificate against this CA\n"
     "                     (default: $HV_CA_FILE; docs/tls.md)\n"},
    {"insecure", 0, HV_OPT_FLAG, 0, 0, 0, O_INSECURE, NULL,
     "  --insecure         plain text to a head not on this machine (or HV_INSECURE=1)\n"},
    {"token-file", 0, HV_OPT_TEXT, 0, 0, 0, O_TOKEN_FILE, NULL,
     "  --token-file F     the client token (default: $HV_TOKEN_FILE, else\n"
     "                     " HV_CLI_DEFAULT_TOKEN_FILE ")\n"},
    {"json", 0, HV_OPT_FLAG, 0, 0, 0, O_JSON, NULL,
     "  --json             print one JSON document instead of a table\n"},
    {"help", 'h', HV_OPT_FLAG, 0, 0, 0, O_HELP, NULL,
     "  --help, -h         this help (after a command: that command's help)\n"},
    {"version", 'V', HV_OPT_FLAG, 0, 0, 0, O_VERSION, NULL,
     "  --version, -V      print the version\n"},
    {"ttl", 0, HV_OPT_DURATION, 1, DAYS_3650, B(CMD_TOKEN_CREATE), O_TTL,
     "'%s': expected a duration like 30s, 10m, 2h or 7d (at most 3650d)", NULL},
    {"uses", 0, HV_OPT_UINT, 1, UINT32_MAX, B(CMD_TOKEN_CREATE), O_USES,
     "--uses '%s': expected a number from 1 to 4294967295", NULL},
    {"since", 0, HV_OPT_DURATION, 1, DAYS_3650, B(CMD_AUDIT) | B(CMD_STATUS), O_SINCE,
     "'%s': expected a duration like 30s, 10m, 2h or 7d (at most 3650d)", NULL},
    {"who", 0, HV_OPT_TEXT, 1, 64, B(CMD_AUDIT), O_WHO, "'%s': expected 1 to 64 characters", NULL},
    {"method", 0, HV_OPT_TEXT, 1, 64, B(CMD_AUDIT), O_METHOD, "'%s': expected 1 to 64 characters",
     NULL},
    {"refused", 0, HV_OPT_FLAG, 0, 0, B(CMD_AUDIT), O_REFUSED, NULL, NULL},
    {"follow", 'f', HV_OPT_FLAG, 0, 0, B(CMD_LOGS), O_FOLLOW, NULL, NULL},
    {"raw", 0, HV_OPT_FLAG, 0, 0, B(CMD_LOGS), O_RAW, NULL, NULL},
    {"head-timeout", 0, HV_OPT_UINT, 1, HV_CLI_HEAD_TIMEOUT_MAX, B(CMD_LOGS), O_HEAD_TIMEOUT,
     "--head-timeout '%s': expected seconds from 1 to 86400", NULL},
    {"job", 0, HV_OPT_UINT, 1, UINT64_MAX, B(CMD_EVENTS) | B(CMD_COST), O_JOB, "bad job id '%s'",
     NULL},
    {"limit", 0, HV_OPT_UINT, 1, 100000, B(CMD_JOBS) | B(CMD_QUEUE) | B(CMD_EVENTS) | B(CMD_AUDIT),
     O_LIMIT, "--limit '%s': expected a number from 1 to 100000", NULL},
    {"reason", 0, HV_OPT_TEXT, 0, 256, B(CMD_DRAIN) | B(CMD_UNDRAIN), O_REASON,
     "--reason: expected at most 256 characters", NULL},
    {"name", 0, HV_OPT_TEXT, 0, 0, B_ACTORS, O_NAME, NULL, NULL},
    {"namespace", 0, HV_OPT_TEXT, 0, 0, B_ACTORS, O_NAMESPACE, NULL, NULL},
    {"class", 0, HV_OPT_TEXT, 0, 0, B_ACTORS, O_CLASS, NULL, NULL},
    {"arg", 0, HV_OPT_TEXT, 0, 0, B_ACTORS, O_ARG, NULL, NULL},
    {"slots", 0, HV_OPT_UINT, 0, 64, B_ACTORS, O_SLOTS, "--slots needs a number from 0 to 64",
     NULL},
    {"gpus", 0, HV_OPT_UINT, 0, 64, B_ACTORS, O_GPUS, "--gpus needs a number from 0 to 64", NULL},
    {"memory-mb", 0, HV_OPT_UINT, 1, UINT64_C(1) << 40, B_ACTORS, O_MEMORY_MB,
     "--memory-mb needs a number of MiB from 1 to 2^40", NULL},
    {"label", 0, HV_OPT_TEXT, 0, 0, B_ACTORS, O_LABEL, NULL, NULL},
    {"max-restarts", 0, HV_OPT_UINT, 0, 1000000, B_ACTORS, O_MAX_RESTARTS,
     "--max-restarts needs a number from 0 to 1000000", NULL},
    {"max-call-retries", 0, HV_OPT_UINT, 0, 1000, B_ACTORS, O_MAX_CALL_RETRIES,
     "--max-call-retries needs a number from 0 to 1000", NULL},
    {"owner-job", 0, HV_OPT_UINT, 1, UINT64_MAX, B_ACTORS, O_OWNER_JOB,
     "--owner-job needs a job id", NULL},
    {"env", 0, HV_OPT_TEXT, 0, 0, B_ACTORS, O_ENV, NULL, NULL},
    {"restart", 0, HV_OPT_FLAG, 0, 0, B_ACTORS, O_RESTART, NULL, NULL},
};
#define CTL_NOPTS (sizeof(ctl_opts) / sizeof(ctl_opts[0]))

/* The "options:" part of every --help: the global options' lines. */
static void ctl_options_help(FILE *f) {
    fprintf(f, "options:\n");
    hv_opt_help(f, ctl_opts, CTL_NOPTS, 0);
}

static const char ctl_exit_text[] =
    "exit status: 0 done; 64 bad usage; 65 the head refused the request as invalid;\n"
    "66 no such job, node, actor or join token, or the client token file cannot be read;\n"
    "69 the head cannot be reached; 70 internal error; 75 the head is busy or did not\n"
    "answer in time; 77 the head refused our credentials or the operation.\n";

static void ctl_usage(FILE *f) {
    fprintf(f, "usage: hvctl [--head HOST:PORT] [--ca FILE | --insecure] [--json] COMMAND "
               "[ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < CTL_NCMDS; i++) {
        char head[128];
        snprintf(head, sizeof(head), "%s %s", ctl_cmds[i].name, ctl_cmds[i].args);
        fprintf(f, "  %-31s", head);
        if (strlen(head) >= 31) { /* a long synopsis: its words start on the next line */
            fprintf(f, "\n  %-31s", "");
        }
        for (const char *p = ctl_cmds[i].what; *p; p++) {
            fputc(*p, f);
            if (*p == '\n') {
                fprintf(f, "  %-31s", "");
            }
        }
        fputc('\n', f);
    }
    fprintf(f, "\n");
    ctl_options_help(f);
    fprintf(f, "\n%s", ctl_exit_text);
}

static void ctl_cmd_usage(FILE *f, const char *cmd) {
    for (size_t i = 0; i < CTL_NCMDS; i++) {
        if (strcmp(ctl_cmds[i].name, cmd) == 0) {
            fprintf(f, "usage: hvctl [--head HOST:PORT] [--json] %s%s%s\n\n%s\n\n",
                    ctl_cmds[i].name, ctl_cmds[i].args[0] ? " " : "", ctl_cmds[i].args,
                    ctl_cmds[i].what);
            ctl_options_help(f);
            fprintf(f, "\n%s", ctl_exit_text);
            return;
        }
    }
    ctl_usage(f);
}

/* What the parse keeps beside ctl_opts_t while it reads argv. */
typedef struct ctl_parse_s {
    const char *pos[CTL_MAX_POS + 1]; /* the arguments that are no options */
    int npos;
    int actors;                       /* the command is one of the actor commands */
    int help;                         /* --help was given */
    unsigned char seen[CTL_NOPT_IDS]; /* each option given */
} ctl_parse_t;

/* A usage error, "hvctl: MSG (see hvctl --help)", or the actor commands' help for theirs. */
static int ctl_bad(const ctl_parse_t *p, const char *fmt, const char *arg) {
    char msg[HV_CLI_ERR_LEN];
    snprintf(msg, sizeof(msg), fmt, arg);
    if (p != NULL && p->actors) {
        fprintf(stderr, CTL_PROG ": %s (see hvctl actor --help)\n", msg);
        return HV_CLI_EXIT_USAGE;
    }
    return hv_cli_usage_error(CTL_PROG, msg);
}

/* An option the parser refused (the actor commands keep their words for two of them). */
static int ctl_fault(const ctl_parse_t *p, const hv_opt_got_t *g) {
    char msg[HV_CLI_ERR_LEN];
    if (p->actors && g->fault == HV_OPT_NEEDS_VALUE) {
        return ctl_bad(p, "%.100s needs a value", g->arg);
    }
    if (p->actors && g->fault == HV_OPT_UNKNOWN) {
        return ctl_bad(p, "unknown option '%.100s'", g->arg);
    }
    return ctl_bad(p, "%s", hv_opt_fault_msg(g, NULL, msg, sizeof(msg)));
}

/* The actor commands' options into a; -1, or an exit status. */
static int ctl_apply_actor(hv_ctl_actor_opts_t *a, const ctl_parse_t *p, const hv_opt_got_t *g) {
    const char *v = g->value;
    switch ((enum ctl_opt_id)g->opt->id) {
    case O_NAME:
        a->name = v;
        break;
    case O_NAMESPACE:
        a->ns = v;
        break;
    case O_CLASS:
        a->class_name = v;
        break;
    case O_ARG:
        a->arg = v;
        break;
    case O_SLOTS:
        a->slots = (uint32_t)g->num;
        break;
    case O_GPUS:
        a->gpus = (uint32_t)g->num;
        break;
    case O_MEMORY_MB:
        a->memory_mb = g->num;
        break;
    case O_MAX_RESTARTS:
        a->max_restarts = (uint32_t)g->num;
        break;
    case O_MAX_CALL_RETRIES:
        a->max_call_retries = (uint32_t)g->num;
        break;
    case O_OWNER_JOB:
        a->owner_job = g->num;
        break;
    case O_RESTART:
        a->restart = 1;
        break;
    case O_LABEL: {
        const char *eq = strchr(v, '=');
        if (a->nlabels == HV_CTL_ACTORS_MAX_LABELS || eq == NULL || eq == v || eq - v > 63 ||
            strchr(v, ',') != NULL || strchr(eq + 1, '=') != NULL) {
            return ctl_bad(p, "%s",
                           "--label takes KEY=VALUE, the node label the actor needs (at most 64; "
                           "no ',' and one '=')");
        }
        a->labels[a->nlabels++] = v;
        break;
    }
    case O_ENV:
        if (a->nenv == HV_CTL_ACTORS_MAX_ENV || strchr(v, '=') == NULL) {
            return ctl_bad(p, "%s", "--env takes KEY=VALUE (at most 256 of them)");
        }
        a->env[a->nenv++] = v;
        break;
    default:
        return ctl_bad(p, "option '%s' is not handled", g->arg); /* a row without a case */
    }
    return -1;
}

/* One option with its checked value into o; -1, or an exit status. */
static int ctl_apply(ctl_opts_t *o, ctl_parse_t *p, const hv_opt_got_t *g) {
    const char *v = g->value;
    hv_ctl_actor_opts_t *a = &o->actor;
    switch ((enum ctl_opt_id)g->opt->id) {
    case O_VERSION:
        printf(CTL_PROG " %s\n", HV_VERSION_STRING);
        return HV_CLI_EXIT_OK;
    case O_HELP:
        p->help = 1; /* after the loop: the command's own help if one was named */
        break;
    case O_HEAD:
        o->head = v;
        break;
    case O_CA:
        o->ca = v;
        break;
    case O_INSECURE:
        o->insecure = 1;
        break;
    case O_TOKEN_FILE:
        o->token_file = v;
        break;
    case O_JSON:
        o->json = a->json = 1;
        break;
    case O_FOLLOW:
        o->follow = 1;
        break;
    case O_RAW:
        o->raw = 1;
        break;
    case O_HEAD_TIMEOUT:
        o->head_timeout_s = (uint32_t)g->num;
        o->head_timeout_set = 1;
        break;
    case O_JOB:
        o->job_id = g->num;
        o->job_set = 1;
        break;
    case O_LIMIT:
        o->limit = (uint32_t)g->num;
        break;
    case O_REASON:
        o->reason = v;
        break;
    case O_SINCE:
        o->since_ms = g->num;
        break;
    case O_WHO:
        o->who = v;
        break;
    case O_METHOD:
        o->method = v;
        break;
    case O_REFUSED:
        o->refused = 1;
        break;
    case O_TTL:
        o->ttl_ms = g->num;
        break;
    case O_USES:
        o->uses = (uint32_t)g->num;
        break;
    default:
        return ctl_apply_actor(a, p, g);
    }
    return -1;
}

/* "--NAME goes with 'a', 'b' or 'c', not 'CMD'": the commands of row's cmds, by name. */
static int ctl_goes_with(const ctl_parse_t *p, const hv_opt_t *row, const char *cmd) {
    char list[256] = "";
    size_t used = 0, n = 0, total = 0;
    for (size_t k = 0; k < CTL_NCMDS; k++) {
        total += (row->cmds & B(k)) != 0;
    }
    for (size_t k = 0; k < CTL_NCMDS && used < sizeof(list); k++) {
        if (row->cmds & B(k)) {
            n++;
            used += (size_t)snprintf(list + used, sizeof(list) - used, "%s'%s'",
                                     n == 1       ? ""
                                     : n == total ? " or "
                                                  : ", ",
                                     ctl_cmds[k].name);
        }
    }
    char fmt[HV_CLI_ERR_LEN];
    snprintf(fmt, sizeof(fmt), "--%s goes with %s, not '%%s'", row->name, list);
    return ctl_bad(p, fmt, cmd);
}

/* Options given to a command that does not take them, in table order: with early, only
 * token create's and audit's (checked before the command's arguments, as their messages name
 * the whole group); then the others. -1 when none. */
static int ctl_check_placed(const ctl_opts_t *o, const ctl_parse_t *p, int early) {
    int token = o->cmd_id >= CMD_TOKEN_CREATE && o->cmd_id <= CMD_TOKEN_REVOKE;
    for (size_t i = 0; i < CTL_NOPTS; i++) {
        const hv_opt_t *row = &ctl_opts[i];
        int given = p->seen[row->id];
        int wrong = given && row->cmds != 0 && !(row->cmds & B(o->cmd_id));
        if (row->id == O_HEAD_TIMEOUT) {
            wrong = given && (o->cmd_id != CMD_LOGS || !o->follow);
        }
        if (!wrong || (early && row->id > O_REFUSED)) {
            continue;
        }
        if (row->id == O_TTL || row->id == O_USES) {
            return ctl_bad(p, "%s", "--ttl and --uses go with 'token create'");
        }
        if (token) {
            return ctl_bad(p, "%s", "'token' takes only --ttl and --uses (with create)");
        }
        if (row->id == O_SINCE) {
            return ctl_bad(p, "--since goes with 'audit' and 'status', not '%s'", o->cmd);
        }
        if (row->id <= O_REFUSED) {
            return ctl_bad(p, "--who, --method and --refused go with 'audit', not '%s'", o->cmd);
        }
        if (row->id == O_HEAD_TIMEOUT) {
            return ctl_bad(p, "%s", "--head-timeout goes with 'logs --follow'");
        }
        return ctl_goes_with(p, row, o->cmd);
    }
    return -1;
}

/* The command, from its one or two words: o->cmd_id, o->cmd; *first gets the index in p->pos
 * of its first own argument. -1, or an exit status. */
static int ctl_resolve(ctl_opts_t *o, const ctl_parse_t *p, int *first) {
    const char *w0 = p->pos[0], *w1 = p->npos >= 2 ? p->pos[1] : "";
    static const struct {
        const char *w0, *w1; /* the words ("" : any second word, which is an argument) */
        ctl_cmd cmd;
        const char *word;  /* the command in messages */
        const char *actor; /* hv_ctl_actor_opts_t.cmd, for an actor command */
    } words[] = {
        {"node", "revoke", CMD_REVOKE, "revoke", NULL},
        {"token", "create", CMD_TOKEN_CREATE, "token-create", NULL},
        {"token", "list", CMD_TOKEN_LIST, "token-list", NULL},
        {"token", "revoke", CMD_TOKEN_REVOKE, "token-revoke", NULL},
        {"actor", "create", CMD_ACTOR_CREATE, "actor create", "create"},
        {"actor", "", CMD_ACTOR, "actor", "get"},
        {"actors", "", CMD_ACTORS, "actors", "list"},
        {"kill-actor", "", CMD_KILL_ACTOR, "kill-actor", "kill"},
        {"actor-logs", "", CMD_ACTOR_LOGS, "actor-logs", "logs"},
    };
    for (size_t k = 0; k < sizeof(words) / sizeof(words[0]); k++) {
        if (strcmp(w0, words[k].w0) == 0 &&
            (words[k].w1[0] == '\0' || strcmp(w1, words[k].w1) == 0)) {
            o->cmd_id = words[k].cmd;
            o->cmd = words[k].word;
            o->actor.cmd = words[k].actor;
            *first = words[k].w1[0] != '\0' ? 2 : 1;
            return -1;
        }
    }
    if (strcmp(w0, "node") == 0) {
        return ctl_bad(p, "%s", "'node' needs a subcommand: node revoke NODE");
    }
    if (strcmp(w0, "token") == 0) {
        return ctl_bad(p, "%s", "'token' needs a subcommand: token create|list|revoke");
    }
    for (int k = 0; k < CTL_NCMDS; k++) { /* the commands of one word */
        if (strchr(ctl_cmds[k].name, ' ') == NULL && strcmp(ctl_cmds[k].name, w0) == 0) {
            o->cmd_id = (ctl_cmd)k;
            o->cmd = ctl_cmds[k].name;
            *first = 1;
            return -1;
        }
    }
    return ctl_bad(p, "unknown command '%s'", w0);
}

/* drain/undrain/node revoke's NODE arguments. */
static int ctl_check_nodes(ctl_opts_t *o, const ctl_parse_t *p, int first) {
    const char *c = o->cmd;
    int n = p->npos - first;
    char err[HV_CLI_ERR_LEN];
    if (n < 1) {
        return ctl_bad(p, "'%s' needs a node name or id", c);
    }
    if (n > 1 && o->cmd_id == CMD_REVOKE) {
        return ctl_bad(p, "unexpected argument '%s' (one node per revoke)", p->pos[first + 1]);
    }
    for (int k = first; k < p->npos; k++) {
        if (hv_cli_check_node(p->pos[k], err, sizeof(err)) != HV_OK) {
            return ctl_bad(p, "%s", err);
        }
        for (int m = first; m < k; m++) {
            if (strcmp(p->pos[m], p->pos[k]) == 0) {
                return ctl_bad(p, "node '%s' is named twice", p->pos[k]);
            }
        }
    }
    o->nodes = &p->pos[first];
    o->nnodes = n;
    return -1;
}

/* The command's own arguments (p->pos[first..]) and the program after "--". */
static int ctl_check_args(ctl_opts_t *o, const ctl_parse_t *p, int first) {
    const char *extra = first < p->npos ? p->pos[first] : NULL; /* the first argument */
    int n = p->npos - first;
    hv_ctl_actor_opts_t *a = &o->actor;
    switch (o->cmd_id) {
    case CMD_DRAIN:
    case CMD_UNDRAIN:
    case CMD_REVOKE:
        return ctl_check_nodes(o, p, first);
    case CMD_JOB:
    case CMD_LOGS:
    case CMD_CANCEL:
        if (n < 1) {
            return ctl_bad(p, "'%s' needs a job id", o->cmd);
        }
        if (hv_parse_u64(extra, 1, UINT64_MAX, &o->job_id) != HV_OK) {
            return ctl_bad(p, "bad job id '%s'", extra);
        }
        return n > 1 ? ctl_bad(p, "unexpected argument '%s'", p->pos[first + 1]) : -1;
    case CMD_TOKEN_REVOKE:
        if (n < 1) {
            return ctl_bad(p, "%s", "'token revoke' needs a token id (hvctl token list)");
        }
        o->token_id = extra;
        return n > 1 ? ctl_bad(p, "unexpected argument '%s'", p->pos[first + 1]) : -1;
    case CMD_ACTORS:
        return n > 0 ? ctl_bad(p, "%s", "'actors' takes no argument (hvctl actor NAME|ID for one)")
                     : -1;
    case CMD_ACTOR_CREATE:
        return n > 0 || a->class_name == NULL || a->nprog < 1
                   ? ctl_bad(p, "%s", "'actor create' needs --class and -- PROGRAM [ARGS]")
                   : -1;
    case CMD_ACTOR:
    case CMD_KILL_ACTOR:
    case CMD_ACTOR_LOGS:
        if (n != 1) {
            return ctl_bad(p, "%s", "name one actor: NAME or ID");
        }
        a->target = extra;
        return a->prog != NULL ? ctl_bad(p, "%s", "'--' and a program go with 'actor create'") : -1;
    default:
        if (extra != NULL) {
            return ctl_bad(p, "unexpected argument '%s'", extra);
        }
        return a->prog != NULL ? ctl_bad(p, "%s", "'--' and a program go with 'actor create'") : -1;
    }
}

/* --help: the actor commands' help, a command's own (one or two words), or the whole usage. */
static int ctl_help(const ctl_parse_t *p) {
    if (p->actors) {
        hv_ctl_actors_usage(stdout);
        return HV_CLI_EXIT_OK;
    }
    const char *name = p->npos > 0 ? p->pos[0] : NULL;
    char two[64]; /* "token create", "node revoke": the help of a command of two words */
    if (p->npos >= 2 &&
        (size_t)snprintf(two, sizeof(two), "%s %s", p->pos[0], p->pos[1]) < sizeof(two)) {
        for (size_t i = 0; i < CTL_NCMDS; i++) {
            name = strcmp(ctl_cmds[i].name, two) == 0 ? two : name;
        }
    }
    if (name == NULL) {
        ctl_usage(stdout);
    } else {
        ctl_cmd_usage(stdout, name);
    }
    return HV_CLI_EXIT_OK;
}

/* The command word, looked for before the options are read: the actor commands word their
 * usage errors with their own help. */
static void ctl_prescan(int argc, char **argv, ctl_parse_t *p) {
    hv_opt_iter_t it;
    hv_opt_got_t g;
    hv_opt_init(&it, ctl_opts, CTL_NOPTS, HV_OPT_ONE_DASH | HV_OPT_DASHDASH, 0, argc, argv, 1);
    for (hv_opt_res r; (r = hv_opt_next(&it, &g)) != HV_OPT_END && r != HV_OPT_REST;) {
        if (r == HV_OPT_ARG) {
            p->actors = strcmp(g.arg, "actor") == 0 || strcmp(g.arg, "actors") == 0 ||
                        strcmp(g.arg, "kill-actor") == 0;
            return;
        }
    }
}

/* Parses the command line; returns -1 on success, else the exit status (usage printed). */
static int ctl_parse(int argc, char **argv, ctl_opts_t *o) {
    memset(o, 0, sizeof(*o));
    /* static: o->nodes points into it after the parse (the positionals are not contiguous in
     * argv, options may stand between them) */
    static ctl_parse_t p;
    memset(&p, 0, sizeof(p));
    ctl_prescan(argc, argv, &p);
    hv_opt_iter_t it;
    hv_opt_got_t g;
    hv_opt_init(&it, ctl_opts, CTL_NOPTS, HV_OPT_ONE_DASH | HV_OPT_DASHDASH, 0, argc, argv, 1);
    for (hv_opt_res r; (r = hv_opt_next(&it, &g)) != HV_OPT_END;) {
        int status = -1;
        if (r == HV_OPT_FAULT) {
            return ctl_fault(&p, &g);
        }
        if (r == HV_OPT_REST) {
            o->actor.prog = &argv[g.index];
            o->actor.nprog = argc - g.index;
        } else if (r == HV_OPT_ARG) {
            if (p.npos >= CTL_MAX_POS) {
                return ctl_bad(&p, "too many arguments (at most %s nodes at once)",
                               CTL_MAX_NODES_STR);
            }
            p.pos[p.npos++] = g.arg;
        } else if ((p.seen[g.opt->id] = 1, status = ctl_apply(o, &p, &g)) >= 0) {
            return status;
        }
    }
    if (p.help) {
        return ctl_help(&p);
    }
    if (p.npos == 0) {
        return ctl_bad(&p, "%s", "no command given");
    }
    int first = 1, status;
    if ((status = ctl_resolve(o, &p, &first)) >= 0) {
        return status;
    }
    int token = o->cmd_id >= CMD_TOKEN_CREATE && o->cmd_id <= CMD_TOKEN_REVOKE;
    if (!token && (status = ctl_check_placed(o, &p, 1)) >= 0) {
        return status;
    }
    if ((status = ctl_check_args(o, &p, first)) >= 0) {
        return status;
    }
    return ctl_check_placed(o, &p, 0);
}

/* One unary call; prints the error and returns the exit status on failure, else 0 and an owned
 * reply in *out. missing: what to say when the head answers NOT_FOUND without a message ("no
 * job 7"). */
static int ctl_call(const ctl_t *c, const char *method, const ProtobufCMessage *req,
                    const ProtobufCMessageDescriptor *resp_desc, const char *missing,
                    ProtobufCMessage **out) {
    char path[128];
    snprintf(path, sizeof(path), "/hvpb.v1.Jobs/%s", method);
    hv_rpc_status_t st;
    if (hv_cli_rpc_unary(c->ch, path, req, resp_desc, HV_CLI_UNARY_MS, out, &st) != HV_OK) {
        if ((st.grpc_code == HV_CLI_GRPC_NOT_FOUND || st.rc == HV_ENOTFOUND) &&
            !hv_cli_rpc_head_message(&st)) {
            fprintf(stderr, CTL_PROG ": %s\n", missing);
            return HV_CLI_EXIT_NOINPUT;
        }
        if (st.grpc_code == HV_CLI_GRPC_UNIMPLEMENTED) {
            fprintf(stderr,
                    CTL_PROG ": the head at %s does not know %s (it is older than this "
                             "hvctl)\n",
                    c->head, method);
            return HV_CLI_EXIT_UNAVAILABLE;
        }
        return hv_cli_rpc_report(CTL_PROG, c->head, method, &st, HV_CLI_UNARY_MS);
    }
    return HV_CLI_EXIT_OK;
}

static int ctl_oom(void) {
    fprintf(stderr, CTL_PROG ": out of memory\n");
    return HV_CLI_EXIT_SOFTWARE;
}

/* The replies of a list fetched page by page, and the views of all of them in order. */
typedef struct ctl_pages_s {
    ProtobufCMessage **resp; /* owned replies */
    size_t nresp;
    void **items; /* views borrowed from resp */
    size_t nitems;
} ctl_pages_t;

static void ctl_pages_free(ctl_pages_t *pg) {
    for (size_t i = 0; i < pg->nresp; i++) {
        hv_rpc_msg_free(pg->resp[i]);
    }
    hv_free(pg->resp);
    hv_free(pg->items);
    memset(pg, 0, sizeof(*pg));
}

/* Keeps resp (owned from now on) and appends its n views. HV_ENOMEM frees resp. */
static hv_err ctl_pages_add(ctl_pages_t *pg, ProtobufCMessage *resp, void *const *items, size_t n) {
    ProtobufCMessage **r = hv_realloc(pg->resp, (pg->nresp + 1) * sizeof(*r));
    if (r == NULL) {
        hv_rpc_msg_free(resp);
        return HV_ENOMEM;
    }
    pg->resp = r;
    pg->resp[pg->nresp++] = resp;
    void **it = hv_realloc(pg->items, (pg->nitems + n + 1) * sizeof(*it));
    if (it == NULL) {
        return HV_ENOMEM;
    }
    pg->items = it;
    if (n > 0) { // an empty page (no nodes yet) has no array: memcpy from NULL is undefined
        memcpy(pg->items + pg->nitems, items, n * sizeof(*it));
    }
    pg->nitems += n;
    return HV_OK;
}

/* Whether to ask for another page: the head gave a token that moves on (an older head gives
 * none, and its one reply is the whole list). Copies the token into next. */
static int ctl_pages_more(const char *token, size_t got, char *next, size_t len) {
    if (token == NULL || token[0] == '\0' || got == 0 || strlen(token) >= len ||
        strcmp(token, next) == 0) {
        return 0;
    }
    snprintf(next, len, "%s", token);
    return 1;
}

/* The newest `want` jobs (0: the head's default of 100), page by page, into *pg; on success
 * *out holds them all (borrowed from pg). */
static int ctl_list_jobs(const ctl_t *c, uint32_t want, ctl_pages_t *pg,
                         Hvpb__V1__ListJobsReply *out) {
    char token[32] = "";
    want = want ? want : CTL_JOBS_PAGE;
    memset(pg, 0, sizeof(*pg));
    Hvpb__V1__NamespaceShare **ns = NULL;
    size_t nns = 0;
    for (uint32_t call = 0; call < CTL_PAGES_MAX && pg->nitems < want; call++) {
        Hvpb__V1__ListJobsRequest req = HVPB__V1__LIST_JOBS_REQUEST__INIT;
        req.limit = want - (uint32_t)pg->nitems < CTL_JOBS_PAGE ? want - (uint32_t)pg->nitems
                                                                : CTL_JOBS_PAGE;
        req.page_token = token;
        ProtobufCMessage *resp = NULL;
        int status = ctl_call(c, "ListJobs", &req.base, &hvpb__v1__list_jobs_reply__descriptor,
                              "no jobs", &resp);
        if (status != HV_CLI_EXIT_OK) {
            ctl_pages_free(pg);
            return status;
        }
        const Hvpb__V1__ListJobsReply *r = (const Hvpb__V1__ListJobsReply *)resp;
        size_t got = r->n_jobs;
        int more = ctl_pages_more(r->next_page_token, got, token, sizeof(token));
        if (pg->nresp == 0) {
            ns = r->namespaces; /* the first page carries the namespaces */
            nns = r->n_namespaces;
        }
        if (ctl_pages_add(pg, resp, (void *const *)r->jobs, got) != HV_OK) {
            ctl_pages_free(pg);
            return ctl_oom();
        }
        if (!more) {
            break;
        }
    }
    hvpb__v1__list_jobs_reply__init(out);
    out->jobs = (Hvpb__V1__JobView **)pg->items;
    out->n_jobs = pg->nitems < want ? pg->nitems : want;
    out->namespaces = ns;
    out->n_namespaces = nns;
    return HV_CLI_EXIT_OK;
}

/* Every node, page by page, into *pg; on success *out holds them all and the cluster's name
 * (borrowed from pg). */
static int ctl_list_nodes(const ctl_t *c, ctl_pages_t *pg, Hvpb__V1__ListNodesReply *out) {
    char token[32] = "";
    memset(pg, 0, sizeof(*pg));
    hvpb__v1__list_nodes_reply__init(out);
    for (uint32_t call = 0; call < CTL_PAGES_MAX; call++) {
        Hvpb__V1__ListNodesRequest req = HVPB__V1__LIST_NODES_REQUEST__INIT;
        req.page_token = token;
        ProtobufCMessage *resp = NULL;
        int status = ctl_call(c, "ListNodes", &req.base, &hvpb__v1__list_nodes_reply__descriptor,
                              "no nodes", &resp);
        if (status != HV_CLI_EXIT_OK) {
            ctl_pages_free(pg);
            return status;
        }
        const Hvpb__V1__ListNodesReply *r = (const Hvpb__V1__ListNodesReply *)resp;
        size_t got = r->n_nodes;
        int more = ctl_pages_more(r->next_page_token, got, token, sizeof(token));
        if (pg->nresp == 0) {
            out->cluster_name = r->cluster_name;
        }
        if (ctl_pages_add(pg, resp, (void *const *)r->nodes, got) != HV_OK) {
            ctl_pages_free(pg);
            return ctl_oom();
        }
        if (!more) {
            break;
        }
    }
    out->nodes = (Hvpb__V1__NodeView **)pg->items;
    out->n_nodes = pg->nitems;
    return HV_CLI_EXIT_OK;
}

/* "no job 7", for ctl_call. */
static const char *ctl_no_job(const ctl_t *c, char *buf, size_t len) {
    snprintf(buf, len, "no job %llu", (unsigned long long)c->o->job_id);
    return buf;
}

/* Calls a Jobs method on the job of the command line (a JobRef); "no job 7" when there is none. */
static int ctl_call_job(const ctl_t *c, const char *method,
                        const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **out) {
    Hvpb__V1__JobRef req = HVPB__V1__JOB_REF__INIT;
    req.job_id = c->o->job_id;
    char missing[48];
    return ctl_call(c, method, &req.base, resp_desc, ctl_no_job(c, missing, sizeof(missing)), out);
}

/* Prints a finished table (or "no ..." when it is empty) and frees it. */
static void ctl_table_done(hv_cli_table_t *t, const char *empty) {
    if (hv_cli_table_rows(t) == 0 && empty != NULL) {
        printf("%s\n", empty);
    } else {
        hv_cli_table_print(t, stdout);
    }
    hv_cli_table_destroy(t);
}

static const char *ctl_time(uint64_t wall_ms, char *buf, size_t len) {
    if (wall_ms == 0) {
        snprintf(buf, len, "-");
        return buf;
    }
    return hv_fmt_time(wall_ms, buf, len);
}

static const char *ctl_job_duration(const Hvpb__V1__JobView *v, char *buf, size_t len) {
    if (v->started_ms == 0) {
        snprintf(buf, len, "-");
        return buf;
    }
    uint64_t end = v->ended_ms ? v->ended_ms : hv_wall_ms();
    return hv_cli_fmt_duration(end > v->started_ms ? end - v->started_ms : 0, buf, len);
}

/* Prints "LABEL text" with the head's text cleaned (hv_cli_clean): a job's name or reason must
 * not act on the terminal. */
static void ctl_field(const char *label, const char *text) {
    fputs(label, stdout);
    hv_cli_clean_write(stdout, text, 0);
    fputc('\n', stdout);
}

/* ---- nodes ---------------------------------------------------------------------------------- */

/* Joins strings into buf as "a,b,c" (truncated to fit). */
static const char *ctl_join(char *const *items, size_t n, char *buf, size_t len) {
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && used + 1 < len; i++) {
        int w = snprintf(buf + used, len - used, "%s%s", i ? "," : "", items[i]);
        if (w < 0) {
            break;
        }
        used += (size_t)w;
    }
    return buf;
}

static const char *ctl_labels(const Hvpb__V1__NodeInfo *info, char *buf, size_t len) {
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; info != NULL && i < info->n_labels && used + 1 < len; i++) {
        int w = snprintf(buf + used, len - used, "%s%s=%s", i ? "," : "", info->labels[i]->key,
                         info->labels[i]->value);
        if (w < 0) {
            break;
        }
        used += (size_t)w;
    }
    return buf;
}

static void ctl_json_node(hv_cli_json_t *j, const Hvpb__V1__NodeView *n) {
    const Hvpb__V1__NodeInfo *info = n->info;
    hv_cli_json_obj_begin(j);
    hv_cli_json_fields(j, &n->base, "node_id name=info.name");
    hv_cli_json_kv_str(j, "state", hv_cli_node_state_name(hv_cli_node_state(n)));
    hv_cli_json_fields(j, &n->base,
                       "slots=info.slots slots_used gpus=info.gpus cpus=info.cpus "
                       "memory_mb=info.memory_mb addrs=info.addrs addr last_seen_ms");
    hv_cli_json_key(j, "labels");
    hv_cli_json_obj_begin(j);
    for (size_t i = 0; info != NULL && i < info->n_labels; i++) {
        hv_cli_json_key(j, info->labels[i]->key);
        hv_cli_json_str(j, info->labels[i]->value);
    }
    hv_cli_json_obj_end(j);
    hv_cli_json_fields(j, &n->base,
                       "preemptible=info.preemptible instance_id=info.instance_id "
                       "version=info.version");
    hv_cli_json_key(j, "suspected");
    hv_cli_json_bool(j, n->suspected_ms != 0);
    hv_cli_json_fields(j, &n->base, "suspected_ms");
    hv_cli_json_key(j, "draining");
    hv_cli_json_bool(j, hv_cli_node_state(n) == HVPB__V1__NODE_STATE__NODE_STATE_DRAINING);
    hv_cli_json_key(j, "blacklist");
    hv_cli_json_arr_begin(j);
    for (size_t i = 0; i < n->n_blacklist; i++) {
        hv_cli_json_obj_begin(j);
        hv_cli_json_fields(j, &n->blacklist[i]->base, "job_id strikes permanent until_ms reason");
        hv_cli_json_obj_end(j);
    }
    hv_cli_json_arr_end(j);
    hv_cli_json_obj_end(j);
}

static int ctl_nodes(const ctl_t *c) {
    ctl_pages_t pg;
    Hvpb__V1__ListNodesReply all;
    int status = ctl_list_nodes(c, &pg, &all);
    if (status != HV_CLI_EXIT_OK) {
        return status;
    }
    const Hvpb__V1__ListNodesReply *r = &all;
    if (c->o->json) {
        hv_cli_json_t j;
        hv_cli_json_init(&j, stdout);
        hv_cli_json_obj_begin(&j);
        hv_cli_json_key(&j, "nodes");
        hv_cli_json_arr_begin(&j);
        for (size_t i = 0; i < r->n_nodes; i++) {
            ctl_json_node(&j, r->nodes[i]);
        }
        hv_cli_json_arr_end(&j);
        hv_cli_json_obj_end(&j);
        hv_cli_json_finish(&j);
        ctl_pages_free(&pg);
        return HV_CLI_EXIT_OK;
    }
    static const char *const hdr[] = {"NAME",   "ID",    "STATE",     "SLOTS",  "GPUS",
                                      "MEMORY", "ADDRS", "LAST-SEEN", "LABELS", "BLACKLIST"};
    hv_cli_table_t *t = NULL;
    if (hv_cli_table_create(10, hdr, &t) != HV_OK) {
        ctl_pages_free(&pg);
        return ctl_oom();
    }
    uint64_t now = hv_wall_ms();
    for (size_t i = 0; i < r->n_nodes; i++) {
        const Hvpb__V1__NodeView *n = r->nodes[i];
        const Hvpb__V1__NodeInfo *info = n->info;
        char id[24], slots[32], gpus[16], addrs[512], seen[32], labels[512], bl[1024];
        char state[64], ago[32], mem[32];
        snprintf(id, sizeof(id), "%llu", (unsigned long long)n->node_id);
        // A suspected node (evidence of a loss while its lease runs) says so, and since when.
        if (n->suspected_ms != 0) {
            snprintf(state, sizeof(state), "%.16s (suspected %s)",
                     hv_cli_node_state_name(hv_cli_node_state(n)),
                     hv_cli_fmt_ago(n->suspected_ms, now, ago, sizeof(ago)));
        } else {
            snprintf(state, sizeof(state), "%.16s", hv_cli_node_state_name(hv_cli_node_state(n)));
        }
        snprintf(slots, sizeof(slots), "%u/%u", (unsigned)n->slots_used,
                 (unsigned)(info ? info->slots : 0));
        snprintf(gpus, sizeof(gpus), "%u", (unsigned)(info ? info->gpus : 0));
        if (info != NULL && info->memory_mb > 0) {
            snprintf(mem, sizeof(mem), "%lluMiB", (unsigned long long)info->memory_mb);
        } else {
            snprintf(mem, sizeof(mem), "-");
        }
        if (info != NULL && info->n_addrs > 0) {
            ctl_join(info->addrs, info->n_addrs, addrs, sizeof(addrs));
        } else {
            snprintf(addrs, sizeof(addrs), "%s", n->addr);
        }
        const char *row[] = {
            info ? info->name : "",
            id,
            state,
            slots,
            gpus,
            mem,
            addrs,
            hv_cli_fmt_ago(n->last_seen_ms, now, seen, sizeof(seen)),
            ctl_labels(info, labels, sizeof(labels)),
            hv_cli_fmt_blacklist(n->blacklist, n->n_blacklist, now, bl, sizeof(bl))};
        if (hv_cli_table_add(t, row) != HV_OK) {
            hv_cli_table_destroy(t);
            ctl_pages_free(&pg);
            return ctl_oom();
        }
    }
    ctl_table_done(t, "no nodes");
    ctl_pages_free(&pg);
    return HV_CLI_EXIT_OK;
}

/* ---- jobs ----------------------------------------------------------------------------------- */

/* A job state's word from a reply's code, or, from a head older than the codes, its own word
 * when it is one of the known ones ("unknown" otherwise). */
static const char *ctl_job_state_word(Hvpb__V1__JobState code, const char *word) {
    Hvpb__V1__JobView v = HVPB__V1__JOB_VIEW__INIT;
    v.state_code = code;
    v.state = (char *)(word != NULL ? word : "");
    return hv_cli_job_state_name(hv_cli_job_state(&v));
}

/* An event's structured fields (proto/hv.proto Event), the ones it has. */
static void ctl_json_event_fields(hv_cli_json_t *j, const Hvpb__V1__Event *e) {
    if (e->generation != 0) {
        hv_cli_json_kv_u64(j, "generation", e->generation);
    }
    if (e->reason != HVPB__V1__EVENT_REASON__EVENT_REASON_UNSPECIFIED) {
        hv_cli_json_kv_str(j, "reason", hv_cli_reason_name(e->reason));
    }
    if (e->node != NULL && e->node[0] != '\0') {
        hv_cli_json_kv_str(j, "node", e->node);
    }
    if (e->worker_id != 0) {
        hv_cli_json_fields(j, &e->base, "worker_id rank");
    }
    if (e->duration_ms != 0) {
        hv_cli_json_kv_u64(j, "duration_ms", e->duration_ms);
    }
    if (e->job_state != HVPB__V1__JOB_STATE__JOB_STATE_UNSPECIFIED) {
        hv_cli_json_kv_str(j, "job_state", hv_cli_job_state_name(e->job_state));
    }
    if (e->rollback) {
        hv_cli_json_key(j, "rollback");
        hv_cli_json_bool(j, 1);
    }
}

static void ctl_json_worker(hv_cli_json_t *j, const Hvpb__V1__WorkerView *w) {
    hv_cli_json_obj_begin(j);
    hv_cli_json_fields(j, &w->base, "worker_id rank node");
    hv_cli_json_kv_str(j, "state", hv_cli_worker_state_name(hv_cli_worker_state(w)));
    hv_cli_json_fields(
        j, &w->base, "pid exit_code term_signal attempt reason generation joined_generation done");
    hv_cli_json_obj_end(j);
}

static void ctl_json_job(hv_cli_json_t *j, const Hvpb__V1__JobView *v, int with_workers) {
    hv_cli_json_obj_begin(j);
    hv_cli_json_fields(j, &v->base, "job_id name");
    hv_cli_json_kv_str(j, "state", hv_cli_job_state_name(hv_cli_job_state(v)));
    hv_cli_json_fields(j, &v->base,
                       "np min_np max_np resets reason submitted_ms started_ms ended_ms "
                       "binary_digest elastic generation size");
    hv_cli_json_kv_str(j, "round_state", hv_cli_round_state_name(hv_cli_round_state(v)));
    hv_cli_json_fields(j, &v->base, "round_reason");
    hv_cli_json_kv_str(j, "round_reason_code", hv_cli_reason_name(v->round_reason_code));
    hv_cli_json_fields(j, &v->base, "max_resets check_every resumes resume_generation");
    const Hvpb__V1__StateCopyRef *copies[] = {v->copy, v->durable_copy};
    static const char *const copy_keys[] = {"copy", "durable_copy"};
    for (size_t i = 0; i < 2; i++) {
        if (copies[i] != NULL) {
            hv_cli_json_key(j, copy_keys[i]);
            hv_cli_json_obj_begin(j);
            hv_cli_json_fields(j, &copies[i]->base, "generation commit stored_ms");
            hv_cli_json_obj_end(j);
        }
    }
    hv_cli_json_fields(j, &v->base, "resumed_from copy_on_own_node copy_keeper");
    if (with_workers) {
        hv_cli_json_key(j, "workers");
        hv_cli_json_arr_begin(j);
        for (size_t i = 0; i < v->n_workers; i++) {
            ctl_json_worker(j, v->workers[i]);
        }
        hv_cli_json_arr_end(j);
    }
    hv_cli_json_obj_end(j);
}

static const char *ctl_np(const Hvpb__V1__JobView *v, char *buf, size_t len) {
    if ((v->min_np != 0 && v->min_np != v->np) || (v->max_np != 0 && v->max_np != v->np)) {
        snprintf(buf, len, "%u (%u-%u)", (unsigned)v->np,
                 (unsigned)hv_np_least(1, v->np, v->min_np),
                 (unsigned)(v->max_np ? v->max_np : v->np));
    } else {
        snprintf(buf, len, "%u", (unsigned)v->np);
    }
    return buf;
}

static int ctl_jobs(const ctl_t *c) {
    ctl_pages_t pg;
    Hvpb__V1__ListJobsReply all;
    int status = ctl_list_jobs(c, c->o->limit, &pg, &all);
    if (status != HV_CLI_EXIT_OK) {
        return status;
    }
    const Hvpb__V1__ListJobsReply *r = &all;
    if (c->o->json) {
        hv_cli_json_t j;
        hv_cli_json_init(&j, stdout);
        hv_cli_json_obj_begin(&j);
        hv_cli_json_key(&j, "jobs");
        hv_cli_json_arr_begin(&j);
        for (size_t i = 0; i < r->n_jobs; i++) {
            ctl_json_job(&j, r->jobs[i], 0);
        }
        hv_cli_json_arr_end(&j);
        hv_cli_json_obj_end(&j);
        hv_cli_json_finish(&j);
        ctl_pages_free(&pg);
        return HV_CLI_EXIT_OK;
    }
    static const char *const hdr[] = {"ID",        "NAME",     "STATE", "NP",
                                      "SUBMITTED", "DURATION", "REASON"};
    hv_cli_table_t *t = NULL;
    if (hv_cli_table_create(7, hdr, &t) != HV_OK) {
        ctl_pages_free(&pg);
        return ctl_oom();
    }
    for (size_t i = 0; i < r->n_jobs; i++) {
        const Hvpb__V1__JobView *v = r->jobs[i];
        char id[24], np[48], sub[48], dur[32];
        snprintf(id, sizeof(id), "%llu", (unsigned long long)v->job_id);
        const char *row[] = {id,
                             v->name,
                             hv_cli_job_state_name(hv_cli_job_state(v)),
                             ctl_np(v, np, sizeof(np)),
                             ctl_time(v->submitted_ms, sub, sizeof(sub)),
                             ctl_job_duration(v, dur, sizeof(dur)),
                             v->reason};
        if (hv_cli_table_add(t, row) != HV_OK) {
            hv_cli_table_destroy(t);
            ctl_pages_free(&pg);
            return ctl_oom();
        }
    }
    ctl_table_done(t, "no jobs");
    ctl_pages_free(&pg);
    return HV_CLI_EXIT_OK;
}

/* Why the fleet policy gave a job its size, in words (reason: its stable word; cause: the job
 * it names). */
static void ctl_fleet_why(const Hvpb__V1__JobView *v, char *buf, size_t len) {
    const char *r = v->fleet_reason != NULL ? v->fleet_reason : "";
    unsigned long long c = (unsigned long long)v->fleet_cause;
    static const struct {
        const char *word, *fmt; /* fmt: with %llu for the cause when it names one */
    } w[] = {
        {"kept", "running at its size"},
        {"admitted", "admitted"},
        {"grown", "grows onto free capacity"},
        {"shrunk_admit", "shrunk so that job %llu can start"},
        {"shrunk_priority", "shrunk for job %llu, of a higher priority"},
        {"shrunk_reclaim", "shrunk: job %llu's namespace takes back its quota"},
        {"shrunk_share", "shrunk: its workers serve job %llu better"},
        {"preempted", "preempted for job %llu, waits to resume from its state copy"},
        {"wait_quota", "waiting for its namespace's quota"},
        {"wait_capacity", "waiting for capacity"},
        {"wait_fit", "waiting for nodes that hold its gang"},
        {"wait_behind", "waiting behind job %llu, which has waited longer"},
        {"held_interval", "held: resized less than the resize interval ago"},
        {"held_cost", "held: growing would not pay for its reset"},
        {"busy", "busy (starting, re-forming or finishing)"},
        {"moved", "workers move so that job %llu fits"},
    };
    if (r[0] == '\0') {
        snprintf(buf, len, "not decided yet");
        return;
    }
    for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++) {
        if (strcmp(w[i].word, r) == 0) {
            if (strstr(w[i].fmt, "%llu") != NULL) {
                snprintf(buf, len, w[i].fmt, c);
            } else {
                snprintf(buf, len, "%s", w[i].fmt);
            }
            return;
        }
    }
    snprintf(buf, len, "%s", r);
}

/* One resource of a namespace's quota or borrowing limit: "4", "-" (none) or "unlimited". */
static const char *ctl_ns_res(const uint64_t *v, size_t n, size_t r, char *buf, size_t len) {
    uint64_t x = r < n ? v[r] : 0;
    if (x == UINT64_MAX) {
        snprintf(buf, len, "unlimited");
    } else {
        snprintf(buf, len, "%llu", (unsigned long long)x);
    }
    return buf;
}

static void ctl_ns_json_res(hv_cli_json_t *j, const char *key, const uint64_t *v, size_t n) {
    static const char *const names[] = {"slots", "gpus", "memory_mib"};
    hv_cli_json_key(j, key);
    hv_cli_json_obj_begin(j);
    for (size_t r = 0; r < 3; r++) {
        hv_cli_json_key(j, names[r]);
        if (r < n && v[r] == UINT64_MAX) {
            hv_cli_json_null(j); /* no limit */
        } else {
            hv_cli_json_u64(j, r < n ? v[r] : 0);
        }
    }
    hv_cli_json_obj_end(j);
}

/* The namespaces' part of hvctl queue: quota, borrowing limit, use, borrowed, share. */
static int ctl_queue_ns(const ctl_t *c, const Hvpb__V1__ListJobsReply *all, hv_cli_json_t *j) {
    if (c->o->json) {
        hv_cli_json_key(j, "namespaces");
        hv_cli_json_arr_begin(j);
        for (size_t i = 0; i < all->n_namespaces; i++) {
            const Hvpb__V1__NamespaceShare *s = all->namespaces[i];
            hv_cli_json_obj_begin(j);
            hv_cli_json_kv_str(j, "name", s->name);
            hv_cli_json_kv_u64(j, "weight", s->weight);
            hv_cli_json_key(j, "priority");
            hv_cli_json_i64(j, s->priority);
            ctl_ns_json_res(j, "quota", s->quota, s->n_quota);
            ctl_ns_json_res(j, "borrow", s->borrow, s->n_borrow);
            ctl_ns_json_res(j, "used", s->used, s->n_used);
            ctl_ns_json_res(j, "borrowed", s->borrowed, s->n_borrowed);
            hv_cli_json_kv_u64(j, "share_pm", s->share_pm);
            hv_cli_json_kv_u64(j, "waiting", s->waiting);
            hv_cli_json_obj_end(j);
        }
        hv_cli_json_arr_end(j);
        return HV_CLI_EXIT_OK;
    }
    if (all->n_namespaces == 0) {
        return HV_CLI_EXIT_OK;
    }
    static const char *const hdr[] = {"NAMESPACE", "WEIGHT",   "QUOTA", "BORROW",
                                      "USED",      "BORROWED", "SHARE", "WAITING"};
    hv_cli_table_t *t = NULL;
    if (hv_cli_table_create(8, hdr, &t) != HV_OK) {
        return ctl_oom();
    }
    for (size_t i = 0; i < all->n_namespaces; i++) {
        const Hvpb__V1__NamespaceShare *s = all->namespaces[i];
        char w[16], q[48], b[48], u[48], bd[48], sh[24], wt[16], x[3][24];
        snprintf(w, sizeof(w), "%u", (unsigned)s->weight);
        /* Slots, then GPUs when any is set: "4 slots, 2 GPUs". */
        snprintf(q, sizeof(q), "%s", ctl_ns_res(s->quota, s->n_quota, 0, x[0], sizeof(x[0])));
        snprintf(b, sizeof(b), "%s", ctl_ns_res(s->borrow, s->n_borrow, 0, x[1], sizeof(x[1])));
        snprintf(u, sizeof(u), "%s", ctl_ns_res(s->used, s->n_used, 0, x[2], sizeof(x[2])));
        if (s->n_quota > 1 && s->quota[1] > 0) {
            size_t l = strlen(q);
            snprintf(q + l, sizeof(q) - l, " (%s GPUs)",
                     ctl_ns_res(s->quota, s->n_quota, 1, x[0], sizeof(x[0])));
        }
        snprintf(bd, sizeof(bd), "%llu",
                 (unsigned long long)(s->n_borrowed > 0 ? s->borrowed[0] : 0));
        snprintf(sh, sizeof(sh), "%u.%u%%", (unsigned)s->share_pm / 10, (unsigned)s->share_pm % 10);
        snprintf(wt, sizeof(wt), "%u", (unsigned)s->waiting);
        const char *row[] = {s->name, w, q, b, u, bd, sh, wt};
        if (hv_cli_table_add(t, row) != HV_OK) {
            hv_cli_table_destroy(t);
            return ctl_oom();
        }
    }
    ctl_table_done(t, NULL);
    printf("\n");
    return HV_CLI_EXIT_OK;
}

static int ctl_queue_cmp(const void *a, const void *b) {
    const Hvpb__V1__JobView *x = *(const Hvpb__V1__JobView *const *)a;
    const Hvpb__V1__JobView *y = *(const Hvpb__V1__JobView *const *)b;
    if (x->priority != y->priority) {
        return x->priority > y->priority ? -1 : 1;
    }
    return (x->job_id > y->job_id) - (x->job_id < y->job_id);
}

static int ctl_queue(const ctl_t *c) {
    ctl_pages_t pg;
    Hvpb__V1__ListJobsReply all;
    int status = ctl_list_jobs(c, c->o->limit ? c->o->limit : 1000, &pg, &all);
    if (status != HV_CLI_EXIT_OK) {
        return status;
    }
    const Hvpb__V1__JobView **q = hv_calloc(all.n_jobs + 1, sizeof(*q));
    if (q == NULL) {
        ctl_pages_free(&pg);
        return ctl_oom();
    }
    size_t n = 0;
    for (size_t i = 0; i < all.n_jobs; i++) {
        if (!hv_cli_job_state_final(hv_cli_job_state(all.jobs[i]))) {
            q[n++] = all.jobs[i];
        }
    }
    qsort(q, n, sizeof(*q), ctl_queue_cmp);
    hv_cli_table_t *t = NULL;
    hv_cli_json_t j;
    static const char *const hdr[] = {"ID", "NAME", "NAMESPACE", "STATE", "PRIORITY",
                                      "NP", "SIZE", "TARGET",    "WHY"};
    if (c->o->json) {
        hv_cli_json_init(&j, stdout);
        hv_cli_json_obj_begin(&j);
    }
    if (ctl_queue_ns(c, &all, &j) != HV_CLI_EXIT_OK) {
        hv_free(q);
        ctl_pages_free(&pg);
        return ctl_oom();
    }
    if (c->o->json) {
        hv_cli_json_key(&j, "jobs");
        hv_cli_json_arr_begin(&j);
    } else if (hv_cli_table_create(9, hdr, &t) != HV_OK) {
        hv_free(q);
        ctl_pages_free(&pg);
        return ctl_oom();
    }
    for (size_t i = 0; i < n; i++) {
        const Hvpb__V1__JobView *v = q[i];
        char why[160], id[24], prio[24], np[48], size[24], target[24];
        ctl_fleet_why(v, why, sizeof(why));
        uint32_t sz = hv_cli_job_state(v) == HVPB__V1__JOB_STATE__JOB_STATE_PENDING ? 0 : v->size;
        if (c->o->json) {
            hv_cli_json_obj_begin(&j);
            hv_cli_json_key(&j, "job_id");
            hv_cli_json_u64(&j, v->job_id);
            hv_cli_json_key(&j, "name");
            hv_cli_json_str(&j, v->name);
            hv_cli_json_key(&j, "namespace");
            hv_cli_json_str(&j,
                            v->namespace_ != NULL && v->namespace_[0] ? v->namespace_ : "default");
            hv_cli_json_key(&j, "state");
            hv_cli_json_str(&j, hv_cli_job_state_name(hv_cli_job_state(v)));
            hv_cli_json_key(&j, "priority");
            hv_cli_json_i64(&j, v->priority);
            hv_cli_json_key(&j, "preemptible");
            hv_cli_json_bool(&j, v->preemptible);
            hv_cli_json_key(&j, "elastic");
            hv_cli_json_bool(&j, v->elastic);
            hv_cli_json_key(&j, "np");
            hv_cli_json_u64(&j, v->np);
            hv_cli_json_key(&j, "min_np");
            hv_cli_json_u64(&j, v->min_np);
            hv_cli_json_key(&j, "max_np");
            hv_cli_json_u64(&j, v->max_np);
            hv_cli_json_key(&j, "size");
            hv_cli_json_u64(&j, sz);
            hv_cli_json_key(&j, "target");
            hv_cli_json_u64(&j, v->fleet_target);
            hv_cli_json_key(&j, "reason");
            hv_cli_json_str(&j, v->fleet_reason != NULL ? v->fleet_reason : "");
            hv_cli_json_key(&j, "cause");
            hv_cli_json_u64(&j, v->fleet_cause);
            hv_cli_json_key(&j, "why");
            hv_cli_json_str(&j, why);
            /* What it measured per size (stored at the head): the policy's goodput input. */
            hv_cli_json_key(&j, "throughput");
            hv_cli_json_arr_begin(&j);
            for (size_t k = 0; k < v->n_throughput; k++) {
                hv_cli_json_obj_begin(&j);
                hv_cli_json_kv_u64(&j, "size", v->throughput[k]->size);
                hv_cli_json_key(&j, "steps_per_s");
                hv_cli_json_f64(&j, v->throughput[k]->steps_per_s);
                hv_cli_json_key(&j, "seconds");
                hv_cli_json_f64(&j, v->throughput[k]->seconds);
                hv_cli_json_obj_end(&j);
            }
            hv_cli_json_arr_end(&j);
            hv_cli_json_obj_end(&j);
            continue;
        }
        snprintf(id, sizeof(id), "%llu", (unsigned long long)v->job_id);
        snprintf(prio, sizeof(prio), "%d", (int)v->priority);
        snprintf(size, sizeof(size), "%u", (unsigned)sz);
        snprintf(target, sizeof(target), "%u", (unsigned)v->fleet_target);
        const char *row[] = {id,
                             v->name,
                             v->namespace_ != NULL && v->namespace_[0] ? v->namespace_ : "default",
                             hv_cli_job_state_name(hv_cli_job_state(v)),
                             prio,
                             ctl_np(v, np, sizeof(np)),
                             size,
                             target,
                             why};
        if (hv_cli_table_add(t, row) != HV_OK) {
            hv_cli_table_destroy(t);
            hv_free(q);
            ctl_pages_free(&pg);
            return ctl_oom();
        }
    }
    if (c->o->json) {
        hv_cli_json_arr_end(&j);
        hv_cli_json_obj_end(&j);
        hv_cli_json_finish(&j);
    } else {
        ctl_table_done(t, "no job waits or runs");
    }
    hv_free(q);
    ctl_pages_free(&pg);
    return HV_CLI_EXIT_OK;
}

/* The newest copy of the job's state the head keeps: "generation 3, commit 120, 1.2 s old". */
static const char *ctl_fmt_copy(const Hvpb__V1__JobView *v, uint64_t now, char *buf, size_t len) {
    if (v->copy == NULL || v->copy->commit == 0) {
        snprintf(buf, len, "none outside its workers yet");
        return buf;
    }
    char age[32];
    hv_cli_fmt_duration(now > v->copy->stored_ms ? now - v->copy->stored_ms : 0, age, sizeof(age));
    char by[160] = "the head";
    if (v->copy_keeper != NULL && v->copy_keeper[0] != '\0') {
        snprintf(by, sizeof(by), "node %s's agent", v->copy_keeper);
    }
    snprintf(buf, len, "kept by %s: generation %u, commit %llu, %s old", by,
             (unsigned)v->copy->generation, (unsigned long long)v->copy->commit, age);
    return buf;
}

static int ctl_job(const ctl_t *c) {
    ProtobufCMessage *resp = NULL;
    int status = ctl_call_job(c, "GetJob", &hvpb__v1__job_view__descriptor, &resp);
    if (status != HV_CLI_EXIT_OK) {
        return status;
    }
    const Hvpb__V1__JobView *v = (const Hvpb__V1__JobView *)resp;
    if (c->o->json) {
        hv_cli_json_t j;
        hv_cli_json_init(&j, stdout);
        ctl_json_job(&j, v, 1);
        hv_cli_json_finish(&j);
        hv_rpc_msg_free(resp);
        return HV_CLI_EXIT_OK;
    }
    char buf[64];
    printf("ID:         %llu\n", (unsigned long long)v->job_id);
    ctl_field("NAME:       ", v->name);
    ctl_field("STATE:      ", hv_cli_job_state_name(hv_cli_job_state(v)));
    if (v->fleet_reason != NULL && v->fleet_reason[0] != '\0' && v->ended_ms == 0) {
        char why[160];
        ctl_fleet_why(v, why, sizeof(why));
        printf("FLEET:      %s\n", why); /* e.g. "preempted for job 2, waits to resume ..." */
    }
    printf("NP:         %s\n", ctl_np(v, buf, sizeof(buf)));
    if (v->elastic) {
        char round[600];
        char checks[64] = "";
        if (v->check_every != 0) {
            snprintf(checks, sizeof(checks), ", membership checked every %u commit%s",
                     (unsigned)v->check_every, v->check_every == 1 ? "" : "s");
        }
        printf("ELASTIC:    %u to %u workers%s\n", (unsigned)hv_np_least(1, v->np, v->min_np),
               (unsigned)(v->max_np ? v->max_np : v->np), checks);
        printf("GENERATION: %u (%u worker%s)\n", (unsigned)v->generation, (unsigned)v->size,
               v->size == 1 ? "" : "s");
        ctl_field("ROUND:      ", hv_cli_fmt_round(v, round, sizeof(round)));
        printf("RESETS:     %u of at most %u\n", (unsigned)v->resets, (unsigned)v->max_resets);
        char copy[320]; /* "kept by node NAME's agent: generation ..." fits whole */
        printf("STATE COPY: %s\n", ctl_fmt_copy(v, hv_wall_ms(), copy, sizeof(copy)));
        if (v->durable_copy != NULL && v->durable_copy->commit != 0) {
            char age[32];
            uint64_t now = hv_wall_ms(), at = v->durable_copy->stored_ms;
            printf("DURABLE:    generation %u, commit %llu, %s old\n",
                   (unsigned)v->durable_copy->generation,
                   (unsigned long long)v->durable_copy->commit,
                   hv_cli_fmt_duration(now > at ? now - at : 0, age, sizeof(age)));
        }
        if (v->resumes > 0) {
            const char *from = v->resumed_from == NULL || v->resumed_from[0] == '\0' ? "a copy"
                               : strcmp(v->resumed_from, "durable") == 0 ? "the durable copy"
                               : strcmp(v->resumed_from, "peer") == 0    ? "a peer agent's copy"
                                                                         : "the head's copy";
            printf("RESUMED:    %u time%s from %s (last in generation %u)\n", (unsigned)v->resumes,
                   v->resumes == 1 ? "" : "s", from, (unsigned)v->resume_generation);
        }
    } else {
        printf("RESETS:     %u\n", (unsigned)v->resets);
    }
    printf("SUBMITTED:  %s\n", ctl_time(v->submitted_ms, buf, sizeof(buf)));
    printf("STARTED:    %s\n", ctl_time(v->started_ms, buf, sizeof(buf)));
    printf("ENDED:      %s\n", ctl_time(v->ended_ms, buf, sizeof(buf)));
    printf("DURATION:   %s\n", ctl_job_duration(v, buf, sizeof(buf)));
    ctl_field("BINARY:     sha256:", v->binary_digest[0] ? v->binary_digest : "-");
    ctl_field("REASON:     ", v->reason[0] ? v->reason : "-");
    if (v->n_workers > 0) {
        static const char *const hdr[] = {"RANK",    "NODE", "STATE",  "PID",  "EXIT",
                                          "ATTEMPT", "GEN",  "JOINED", "DONE", "REASON"};
        hv_cli_table_t *t = NULL;
        if (hv_cli_table_create(10, hdr, &t) != HV_OK) {
            hv_rpc_msg_free(resp);
            return ctl_oom();
        }
        for (size_t i = 0; i < v->n_workers; i++) {
            const Hvpb__V1__WorkerView *w = v->workers[i];
            char rank[16], pid[16], ex[32], att[16], gen[16], joined[16];
            snprintf(rank, sizeof(rank), "%u", (unsigned)w->rank);
            snprintf(pid, sizeof(pid), "%d", (int)w->pid);
            Hvpb__V1__WorkerState ws = hv_cli_worker_state(w);
            int ended = ws == HVPB__V1__WORKER_STATE__WORKER_STATE_EXITED ||
                        ws == HVPB__V1__WORKER_STATE__WORKER_STATE_LOST ||
                        ws == HVPB__V1__WORKER_STATE__WORKER_STATE_KILLED ||
                        ws == HVPB__V1__WORKER_STATE__WORKER_STATE_LEFT;
            if (w->term_signal != 0) {
                char sig[24];
                snprintf(ex, sizeof(ex), "%s", hv_cli_signame(w->term_signal, sig, sizeof(sig)));
            } else if (ended && w->exit_code >= 0) {
                snprintf(ex, sizeof(ex), "%d", (int)w->exit_code);
            } else {
                snprintf(ex, sizeof(ex), "-");
            }
            snprintf(att, sizeof(att), "%u", (unsigned)w->attempt);
            snprintf(gen, sizeof(gen), "%u", (unsigned)w->generation);
            snprintf(joined, sizeof(joined), "%u", (unsigned)w->joined_generation);
            const char *row[] = {rank,
                                 w->node,
                                 hv_cli_worker_state_name(ws),
                                 w->pid > 0 ? pid : "-",
                                 ex,
                                 att,
                                 w->generation ? gen : "-",
                                 w->joined_generation ? joined : "-",
                                 w->done ? "yes" : "no",
                                 w->reason};
            if (hv_cli_table_add(t, row) != HV_OK) {
                hv_cli_table_destroy(t);
                hv_rpc_msg_free(resp);
                return ctl_oom();
            }
        }
        printf("\n");
        ctl_table_done(t, NULL);
    }
    hv_rpc_msg_free(resp);
    return HV_CLI_EXIT_OK;
}

/* ---- logs ----------------------------------------------------------------------------------- */

#define CTL_BACKOFF_MIN_MS 200u  /* logs --follow: first pause before asking a lost head again */
#define CTL_BACKOFF_MAX_MS 2000u /* ... doubling up to this */

/* One line of a job's output. On a terminal (clean set) control characters are made visible,
 * tabs aside: an escape sequence in a worker's output must not act on the terminal unless the
 * user asked for it (--raw). Into a file or a pipe the bytes go as they came. */
static void ctl_log_line(const Hvpb__V1__LogLine *l, int clean) {
    const char *stream = l->stream == 2 ? "stderr" : "stdout";
    printf("[%u]<%s>:", (unsigned)l->rank, stream);
    if (clean) {
        hv_cli_clean_write(stdout, l->text, HV_CLI_CLEAN_TAB);
    } else {
        fputs(l->text, stdout);
    }
    fputc('\n', stdout);
}

static hv_err ctl_logs_open(const ctl_t *c, uint64_t offset, hv_rpc_bstream_t **out) {
    Hvpb__V1__WatchRequest req = HVPB__V1__WATCH_REQUEST__INIT;
    req.job_id = c->o->job_id;
    req.logs = 1;
    req.events = 0;
    req.follow = c->o->follow ? 1 : 0;
    req.log_offset = offset;
    return hv_rpc_bstream_open(c->ch, "/hvpb.v1.Jobs/Watch", &req.base,
                               &hvpb__v1__watch_item__descriptor, 0, out);
}

/* logs --follow lost the head (why): asks GetJob until it answers, for up to the lease + 30 s
 * (--head-timeout), as hvsubmit does. Returns -1 when the head is back, else the exit status
 * with its error printed. */
static int ctl_logs_reconnect(const ctl_t *c, const hv_rpc_status_t *why) {
    uint64_t wait_ms = hv_cli_head_wait_ms(c->o->head_timeout_set, c->o->head_timeout_s, 0);
    fprintf(stderr, CTL_PROG ": lost the head, reconnecting...\n");
    fflush(stderr);
    uint64_t start = hv_now_ms();
    uint32_t backoff = CTL_BACKOFF_MIN_MS;
    hv_rpc_status_t st = *why;
    for (;;) {
        uint64_t spent = hv_now_ms() - start;
        if (spent >= wait_ms) {
            char words[300];
            fprintf(stderr,
                    CTL_PROG ": gave up after %llu s: the head at %s did not come back (%s) "
                             "(--head-timeout S sets this wait)\n",
                    (unsigned long long)((wait_ms + 999) / 1000), c->head,
                    hv_cli_rpc_transport_words(&st, c->head, words, sizeof(words)));
            return HV_CLI_EXIT_UNAVAILABLE;
        }
        uint64_t pause = wait_ms - spent < backoff ? wait_ms - spent : backoff;
        usleep((useconds_t)(pause * 1000u));
        backoff = backoff * 2 > CTL_BACKOFF_MAX_MS ? CTL_BACKOFF_MAX_MS : backoff * 2;
        Hvpb__V1__JobRef ref = HVPB__V1__JOB_REF__INIT;
        ref.job_id = c->o->job_id;
        ProtobufCMessage *resp = NULL;
        hv_err rc = hv_rpc_unary(c->ch, "/hvpb.v1.Jobs/GetJob", &ref.base,
                                 &hvpb__v1__job_view__descriptor, HV_CLI_UNARY_MS, &resp, &st);
        if (rc == HV_OK) {
            hv_rpc_msg_free(resp);
            fprintf(stderr, CTL_PROG ": reconnected to the head\n");
            return -1;
        }
        if (st.grpc_code == HV_CLI_GRPC_NOT_FOUND || rc == HV_ENOTFOUND) {
            fprintf(stderr, CTL_PROG ": the head no longer knows job %llu\n",
                    (unsigned long long)c->o->job_id);
            return HV_CLI_EXIT_NOINPUT;
        }
        if (!hv_cli_rpc_unreachable(&st)) {
            return hv_cli_rpc_report(CTL_PROG, c->head, "GetJob", &st, HV_CLI_UNARY_MS);
        }
    }
}

/* Streams a job's output (Watch with logs only). With --json the lines become one array, begun
 * with the first answer so that a job the head does not know prints nothing on stdout. With
 * --follow a stream that loses the head is opened again once it is back, from the line after
 * the last one printed (log_offset), so no line shows twice. */
static int ctl_logs(const ctl_t *c) {
    int clean = !c->o->json && !c->o->raw && isatty(STDOUT_FILENO);
    uint64_t nlines = 0; /* lines printed: log_offset of a reopened stream */
    hv_rpc_bstream_t *s = NULL;
    if (ctl_logs_open(c, 0, &s) != HV_OK) {
        fprintf(stderr, CTL_PROG ": cannot reach the head at %s\n", c->head);
        return HV_CLI_EXIT_UNAVAILABLE;
    }
    hv_cli_json_t j;
    int json_open = 0;
    int status = HV_CLI_EXIT_OK;
    int got_any = 0; /* an item arrived: the stream reached the head */
    uint64_t start_ms = hv_now_ms();
    uint32_t pause_ms = 100;
    for (;;) {
        ProtobufCMessage *msg = NULL;
        hv_rpc_status_t st;
        memset(&st, 0, sizeof(st));
        hv_err rc = hv_rpc_bstream_next(s, 1000, &msg, &st);
        if (rc == HV_ETIMEDOUT) {
            continue;
        }
        int retry = rc != HV_OK && !got_any && hv_cli_rpc_connect_retry(&st, start_ms, &pause_ms);
        if (!retry && rc != HV_OK && c->o->follow && got_any && hv_cli_rpc_stream_lost(&st)) {
            /* The head went away while we followed: wait for it, then go on where we were. */
            int back = ctl_logs_reconnect(c, &st);
            if (back >= 0) {
                status = back;
                break;
            }
            retry = 1;
        }
        if (retry) {
            /* Nothing of this stream was shown, or all of it was: ask again from nlines. */
            hv_rpc_bstream_destroy(s);
            s = NULL;
            if (ctl_logs_open(c, nlines, &s) != HV_OK) {
                fprintf(stderr, CTL_PROG ": cannot reach the head at %s\n", c->head);
                status = HV_CLI_EXIT_UNAVAILABLE;
                break;
            }
            continue;
        }
        got_any = 1;
        if (rc != HV_OK) {
            if (st.rc != HV_OK) {
                if ((st.grpc_code == HV_CLI_GRPC_NOT_FOUND || st.rc == HV_ENOTFOUND) &&
                    !hv_cli_rpc_head_message(&st)) {
                    fprintf(stderr, CTL_PROG ": no job %llu\n", (unsigned long long)c->o->job_id);
                    status = HV_CLI_EXIT_NOINPUT;
                } else {
                    status = hv_cli_rpc_report(CTL_PROG, c->head, "Watch", &st, 0);
                }
            }
            break;
        }
        if (c->o->json && !json_open) {
            hv_cli_json_init(&j, stdout);
            hv_cli_json_arr_begin(&j);
            json_open = 1;
        }
        const Hvpb__V1__WatchItem *it = (const Hvpb__V1__WatchItem *)msg;
        int done = it->body_case == HVPB__V1__WATCH_ITEM__BODY_DONE;
        Hvpb__V1__LogLine *one = it->log;
        Hvpb__V1__LogLine **lines = NULL;
        size_t nl = 0;
        if (it->body_case == HVPB__V1__WATCH_ITEM__BODY_LOG) {
            lines = &one;
            nl = 1;
        } else if (it->body_case == HVPB__V1__WATCH_ITEM__BODY_LOGS) {
            lines = it->logs->lines;
            nl = it->logs->n_lines;
        }
        for (size_t i = 0; i < nl; i++) {
            const Hvpb__V1__LogLine *l = lines[i];
            if (c->o->json) {
                hv_cli_json_obj_begin(&j);
                hv_cli_json_key(&j, "rank");
                hv_cli_json_u64(&j, l->rank);
                hv_cli_json_key(&j, "stream");
                hv_cli_json_str(&j, l->stream == 2 ? "stderr" : "stdout");
                hv_cli_json_key(&j, "text");
                hv_cli_json_str(&j, l->text);
                hv_cli_json_obj_end(&j);
            } else {
                ctl_log_line(l, clean);
            }
        }
        nlines += nl;
        if (nl > 0 && !c->o->json) {
            fflush(stdout);
        }
        hv_rpc_msg_free(msg);
        if (done) {
            break;
        }
    }
    hv_rpc_bstream_destroy(s);
    if (c->o->json && (json_open || status == HV_CLI_EXIT_OK)) {
        if (!json_open) {
            hv_cli_json_init(&j, stdout); /* a job with no output: [] */
            hv_cli_json_arr_begin(&j);
        }
        hv_cli_json_arr_end(&j);
        hv_cli_json_finish(&j);
    }
    return status;
}

/* ---- cancel, events ------------------------------------------------------------------------- */

static int ctl_cancel(const ctl_t *c) {
    ProtobufCMessage *resp = NULL;
    int status = ctl_call_job(c, "Cancel", &hvpb__v1__cancel_reply__descriptor, &resp);
    if (status != HV_CLI_EXIT_OK) {
        return status;
    }
    const Hvpb__V1__CancelReply *r = (const Hvpb__V1__CancelReply *)resp;
    if (c->o->json) {
        hv_cli_json_t j;
        hv_cli_json_init(&j, stdout);
        hv_cli_json_obj_begin(&j);
        hv_cli_json_key(&j, "job_id");
        hv_cli_json_u64(&j, c->o->job_id);
        hv_cli_json_key(&j, "state");
        hv_cli_json_str(&j, ctl_job_state_word(r->state_code, r->state));
        hv_cli_json_obj_end(&j);
        hv_cli_json_finish(&j);
    } else {
        printf("job %llu: ", (unsigned long long)c->o->job_id);
        ctl_field("", ctl_job_state_word(r->state_code, r->state));
    }
    hv_rpc_msg_free(resp);
    return HV_CLI_EXIT_OK;
}

static void ctl_cost_json(const Hvpb__V1__CostReply *r) {
    hv_cli_json_t j;
    hv_cli_json_init(&j, stdout);
    hv_cli_json_obj_begin(&j);
    if (r->job_id != 0) {
        hv_cli_json_key(&j, "job_id");
        hv_cli_json_u64(&j, r->job_id);
        hv_cli_json_key(&j, "state");
        hv_cli_json_str(&j, ctl_job_state_word(r->state_code, r->state));
        hv_cli_json_key(&j, "wall_seconds");
        hv_cli_json_f64(&j, r->wall_seconds);
    }
    hv_cli_json_key(&j, "types");
    hv_cli_json_arr_begin(&j);
    for (size_t i = 0; i < r->n_types; i++) {
        const Hvpb__V1__CostLine *l = r->types[i];
        hv_cli_json_obj_begin(&j);
        hv_cli_json_fields(&j, &l->base, "type instances instance_seconds price_per_hour cost");
        hv_cli_json_key(&j, "ondemand_cost");
        if (l->ondemand_known) {
            hv_cli_json_f64(&j, l->ondemand_cost);
        } else {
            hv_cli_json_null(&j);
        }
        hv_cli_json_key(&j, "preemptions");
        hv_cli_json_u64(&j, l->preemptions);
        hv_cli_json_obj_end(&j);
    }
    hv_cli_json_arr_end(&j);
    hv_cli_json_fields(&j, &r->base, "instance_seconds cost");
    hv_cli_json_key(&j, "ondemand_cost");
    if (r->ondemand_known) {
        hv_cli_json_f64(&j, r->ondemand_cost);
    } else {
        hv_cli_json_null(&j);
    }
    hv_cli_json_fields(&j, &r->base, "preemptions rollbacks redone_samples");
    hv_cli_json_obj_end(&j);
    hv_cli_json_finish(&j);
}

static int ctl_cost(const ctl_t *c) {
    Hvpb__V1__CostRequest req = HVPB__V1__COST_REQUEST__INIT;
    req.job_id = c->o->job_set ? c->o->job_id : 0;
    ProtobufCMessage *resp = NULL;
    char missing[48];
    int status = ctl_call(c, "Cost", &req.base, &hvpb__v1__cost_reply__descriptor,
                          ctl_no_job(c, missing, sizeof(missing)), &resp);
    if (status != HV_CLI_EXIT_OK) {
        return status;
    }
    const Hvpb__V1__CostReply *r = (const Hvpb__V1__CostReply *)resp;
    if (c->o->json) {
        ctl_cost_json(r);
        hv_rpc_msg_free(resp);
        return HV_CLI_EXIT_OK;
    }
    if (r->job_id != 0) {
        char state[200];
        printf("job %llu (%s, %.1f s since submission)\n", (unsigned long long)r->job_id,
               hv_cli_clean(ctl_job_state_word(r->state_code, r->state), 0, state, sizeof(state)),
               r->wall_seconds);
    } else {
        printf("cluster, every instance the autoscaler launched\n");
    }
    static const char *const hdr[] = {"TYPE", "INSTANCES", "INSTANCE-S", "PRICE/H",
                                      "COST", "ON-DEMAND", "PREEMPTIONS"};
    hv_cli_table_t *t = NULL;
    if (hv_cli_table_create(7, hdr, &t) != HV_OK) {
        hv_rpc_msg_free(resp);
        return ctl_oom();
    }
    for (size_t i = 0; i < r->n_types; i++) {
        const Hvpb__V1__CostLine *l = r->types[i];
        char n[16], secs[32], price[32], cost[32], od[32], pre[16];
        snprintf(n, sizeof(n), "%u", (unsigned)l->instances);
        snprintf(secs, sizeof(secs), "%.1f", l->instance_seconds);
        snprintf(price, sizeof(price), "%.4f", l->price_per_hour);
        snprintf(cost, sizeof(cost), "%.6f", l->cost);
        if (l->ondemand_known) {
            snprintf(od, sizeof(od), "%.6f", l->ondemand_cost);
        } else {
            snprintf(od, sizeof(od), "unknown");
        }
        snprintf(pre, sizeof(pre), "%u", (unsigned)l->preemptions);
        const char *row[] = {l->type, n, secs, price, cost, od, pre};
        if (hv_cli_table_add(t, row) != HV_OK) {
            hv_cli_table_destroy(t);
            hv_rpc_msg_free(resp);
            return ctl_oom();
        }
    }
    ctl_table_done(t, r->job_id != 0 ? "no instance time: the job ran on no node yet"
                                     : "no instances: the autoscaler launched none");
    char line[1024];
    hv_cli_cost_summary(r, line, sizeof(line));
    printf("total: %s\n", line);
    hv_rpc_msg_free(resp);
    return HV_CLI_EXIT_OK;
}

static int ctl_events(const ctl_t *c) {
    Hvpb__V1__ListEventsRequest req = HVPB__V1__LIST_EVENTS_REQUEST__INIT;
    req.job_id = c->o->job_set ? c->o->job_id : 0;
    req.limit = c->o->limit;
    ProtobufCMessage *resp = NULL;
    char missing[48];
    int status = ctl_call(c, "ListEvents", &req.base, &hvpb__v1__list_events_reply__descriptor,
                          ctl_no_job(c, missing, sizeof(missing)), &resp);
    if (status != HV_CLI_EXIT_OK) {
        return status;
    }
    const Hvpb__V1__ListEventsReply *r = (const Hvpb__V1__ListEventsReply *)resp;
    if (c->o->json) {
        hv_cli_json_t j;
        hv_cli_json_init(&j, stdout);
        hv_cli_json_obj_begin(&j);
        hv_cli_json_key(&j, "events");
        hv_cli_json_arr_begin(&j);
        for (size_t i = 0; i < r->n_events; i++) {
            const Hvpb__V1__Event *e = r->events[i];
            hv_cli_json_obj_begin(&j);
            hv_cli_json_fields(&j, &e->base, "seq time_ms job_id node_id kind message");
            ctl_json_event_fields(&j, e);
            if (e->data != NULL && e->data[0] != '\0') {
                /* The head's JSON object goes in as an object; text that is not one (a head
                 * bug) is kept, as a string, under another key so "data" is always an object. */
                hv_cli_json_key(&j, "data");
                if (hv_cli_json_embed(&j, e->data, 1) != HV_OK) {
                    hv_cli_json_null(&j);
                    hv_cli_json_key(&j, "data_text");
                    hv_cli_json_str(&j, e->data);
                }
            }
            hv_cli_json_obj_end(&j);
        }
        hv_cli_json_arr_end(&j);
        hv_cli_json_obj_end(&j);
        hv_cli_json_finish(&j);
        hv_rpc_msg_free(resp);
        return HV_CLI_EXIT_OK;
    }
    static const char *const hdr[] = {"SEQ", "TIME", "JOB", "NODE", "KIND", "MESSAGE"};
    hv_cli_table_t *t = NULL;
    if (hv_cli_table_create(6, hdr, &t) != HV_OK) {
        hv_rpc_msg_free(resp);
        return ctl_oom();
    }
    for (size_t i = 0; i < r->n_events; i++) {
        const Hvpb__V1__Event *e = r->events[i];
        char seq[24], tm[48], job[24], node[24];
        snprintf(seq, sizeof(seq), "%llu", (unsigned long long)e->seq);
        snprintf(job, sizeof(job), "%llu", (unsigned long long)e->job_id);
        snprintf(node, sizeof(node), "%llu", (unsigned long long)e->node_id);
        const char *row[] = {seq,
                             ctl_time(e->time_ms, tm, sizeof(tm)),
                             e->job_id ? job : "-",
                             e->node_id ? node : "-",
                             e->kind,
                             e->message};
        if (hv_cli_table_add(t, row) != HV_OK) {
            hv_cli_table_destroy(t);
            hv_rpc_msg_free(resp);
            return ctl_oom();
        }
    }
    ctl_table_done(t, "no events");
    hv_rpc_msg_free(resp);
    return HV_CLI_EXIT_OK;
}

/* ---- node revoke ------------------------------------------------------------------------- */

static int ctl_revoke(const ctl_t *c) {
    Hvpb__V1__NodeDrainRequest req = HVPB__V1__NODE_DRAIN_REQUEST__INIT;
    req.node = (char *)c->o->nodes[0];
    req.reason = (char *)"hvctl node revoke";
    ProtobufCMessage *resp = NULL;
    char missing[200];
    snprintf(missing, sizeof(missing), "no node '%s' (see 'hvctl nodes')", c->o->nodes[0]);
    int status =
        ctl_call(c, "RevokeNode", &req.base, &hvpb__v1__node_view__descriptor, missing, &resp);
    if (status != HV_CLI_EXIT_OK) {
        return status;
    }
    const Hvpb__V1__NodeView *n = (const Hvpb__V1__NodeView *)resp;
    char name[600];
    /* The head names the node (a head older than that answers with its id only). */
    printf("node %s (id %llu): credential revoked, session ended\n",
           hv_cli_clean(n->info != NULL && n->info->name[0] ? n->info->name : c->o->nodes[0], 0,
                        name, sizeof(name)),
           (unsigned long long)n->node_id);
    hv_rpc_msg_free(resp);
    return HV_CLI_EXIT_OK;
}

/* ---- audit ---------------------------------------------------------------------------------- */

static void ctl_json_audit(hv_cli_json_t *j, const Hvpb__V1__AuditEntry *e) {
    hv_cli_json_obj_begin(j);
    hv_cli_json_fields(j, &e->base,
                       "seq time_ms who_kind who=who_id peer method target code result");
    hv_cli_json_obj_end(j);
}

/* hvctl audit: pages of ListAudit (newest first) until --limit (default 100) entries, all
 * fetched before anything is printed (a failure prints no half document). */
static int ctl_audit(const ctl_t *c) {
    uint32_t want = c->o->limit != 0 ? c->o->limit : 100;
    uint64_t since = 0, now = hv_wall_ms();
    if (c->o->since_ms != 0) {
        since = now > c->o->since_ms ? now - c->o->since_ms : 1;
    }
    ctl_pages_t pg = {0};
    uint64_t before = 0;
    for (unsigned page = 0; page < CTL_PAGES_MAX && pg.nitems < want; page++) {
        Hvpb__V1__ListAuditRequest req = HVPB__V1__LIST_AUDIT_REQUEST__INIT;
        req.since_ms = since;
        req.who = (char *)(c->o->who != NULL ? c->o->who : "");
        req.method = (char *)(c->o->method != NULL ? c->o->method : "");
        req.refused_only = c->o->refused;
        req.limit = want - (uint32_t)pg.nitems;
        req.before_seq = before;
        ProtobufCMessage *resp = NULL;
        int status = ctl_call(c, "ListAudit", &req.base, &hvpb__v1__list_audit_reply__descriptor,
                              "no audit trail", &resp);
        if (status != HV_CLI_EXIT_OK) {
            ctl_pages_free(&pg);
            return status;
        }
        const Hvpb__V1__ListAuditReply *r = (const Hvpb__V1__ListAuditReply *)resp;
        size_t n = r->n_entries;
        int more = n > 0 && r->next_before_seq != 0 && r->next_before_seq != before;
        before = r->next_before_seq;
        if (n > want - pg.nitems) {
            n = want - pg.nitems;
        }
        if (ctl_pages_add(&pg, resp, (void *const *)r->entries, n) != HV_OK) {
            ctl_pages_free(&pg);
            return ctl_oom();
        }
        if (!more) {
            break;
        }
    }
    if (c->o->json) {
        hv_cli_json_t j;
        hv_cli_json_init(&j, stdout);
        hv_cli_json_obj_begin(&j);
        hv_cli_json_key(&j, "entries");
        hv_cli_json_arr_begin(&j);
        for (size_t i = 0; i < pg.nitems; i++) {
            ctl_json_audit(&j, pg.items[i]);
        }
        hv_cli_json_arr_end(&j);
        hv_cli_json_obj_end(&j);
        hv_cli_json_finish(&j);
        ctl_pages_free(&pg);
        return HV_CLI_EXIT_OK;
    }
    static const char *const hdr[] = {"TIME", "WHO", "FROM", "METHOD", "TARGET", "RESULT"};
    hv_cli_table_t *t = NULL;
    if (hv_cli_table_create(6, hdr, &t) != HV_OK) {
        ctl_pages_free(&pg);
        return ctl_oom();
    }
    for (size_t i = 0; i < pg.nitems; i++) {
        const Hvpb__V1__AuditEntry *e = pg.items[i];
        char tm[48], who[160], peer[80], method[80], target[80], result[300], wk[40], wi[80];
        hv_cli_clean(e->who_kind, 0, wk, sizeof(wk));
        hv_cli_clean(e->who_id, 0, wi, sizeof(wi));
        snprintf(who, sizeof(who), "%s%s%s", wk, wi[0] ? " " : "", wi);
        const char *row[] = {
            ctl_time(e->time_ms, tm, sizeof(tm)),
            who,
            hv_cli_clean(e->peer, 0, peer, sizeof(peer)),
            hv_cli_clean(e->method, 0, method, sizeof(method)),
            hv_cli_clean(e->target[0] ? e->target : "-", 0, target, sizeof(target)),
            hv_cli_clean(e->result, 0, result, sizeof(result))};
        if (hv_cli_table_add(t, row) != HV_OK) {
            hv_cli_table_destroy(t);
            ctl_pages_free(&pg);
            return ctl_oom();
        }
    }
    ctl_table_done(t, "no audit entries");
    ctl_pages_free(&pg);
    return HV_CLI_EXIT_OK;
}

/* ---- token create, list, revoke ------------------------------------------------------------ */

static const char *ctl_when(uint64_t ms, const char *never, char *buf, size_t len) {
    return ms == 0 ? never : ctl_time(ms, buf, len);
}

static void ctl_json_jtoken(hv_cli_json_t *j, const Hvpb__V1__JoinTokenView *v) {
    hv_cli_json_obj_begin(j);
    hv_cli_json_fields(j, &v->base, "id");
    hv_cli_json_kv_str(j, "state", v->state);
    hv_cli_json_fields(j, &v->base, "created_ms expires_ms max_uses uses revoked_ms created_by");
    hv_cli_json_obj_end(j);
}

static int ctl_token(const ctl_t *c) {
    const char *cmd = c->o->cmd;
    ProtobufCMessage *resp = NULL;
    int status;
    if (strcmp(cmd, "token-create") == 0) {
        Hvpb__V1__CreateJoinTokenRequest req = HVPB__V1__CREATE_JOIN_TOKEN_REQUEST__INIT;
        req.ttl_ms = c->o->ttl_ms;
        req.uses = c->o->uses;
        status = ctl_call(c, "CreateJoinToken", &req.base,
                          &hvpb__v1__create_join_token_reply__descriptor, "no join tokens", &resp);
        if (status != HV_CLI_EXIT_OK) {
            return status;
        }
        const Hvpb__V1__CreateJoinTokenReply *r = (const Hvpb__V1__CreateJoinTokenReply *)resp;
        if (c->o->json) {
            hv_cli_json_t j;
            hv_cli_json_init(&j, stdout);
            hv_cli_json_obj_begin(&j);
            hv_cli_json_key(&j, "join_token");
            hv_cli_json_str(&j, r->join_token);
            hv_cli_json_key(&j, "token");
            if (r->token != NULL) {
                ctl_json_jtoken(&j, r->token);
            } else {
                hv_cli_json_null(&j);
            }
            hv_cli_json_obj_end(&j);
            hv_cli_json_finish(&j);
        } else {
            char tm[48];
            /* The token alone on stdout (for scripts); what it is on stderr. */
            printf("%s\n", r->join_token);
            if (r->token != NULL) {
                fprintf(stderr,
                        "join token %s: expires %s, uses %u%s; its secret is not shown again\n",
                        r->token->id, ctl_when(r->token->expires_ms, "never", tm, sizeof(tm)),
                        r->token->max_uses, r->token->max_uses == 0 ? " (no limit)" : "");
            }
        }
        hv_rpc_msg_free(resp);
        return HV_CLI_EXIT_OK;
    }
    if (strcmp(cmd, "token-revoke") == 0) {
        Hvpb__V1__JoinTokenRef req = HVPB__V1__JOIN_TOKEN_REF__INIT;
        req.id = (char *)c->o->token_id;
        char missing[120];
        snprintf(missing, sizeof(missing), "no join token '%.40s' (see 'hvctl token list')",
                 c->o->token_id);
        status = ctl_call(c, "RevokeJoinToken", &req.base, &hvpb__v1__join_token_view__descriptor,
                          missing, &resp);
        if (status != HV_CLI_EXIT_OK) {
            return status;
        }
        printf("join token %s revoked\n", ((const Hvpb__V1__JoinTokenView *)resp)->id);
        hv_rpc_msg_free(resp);
        return HV_CLI_EXIT_OK;
    }
    Hvpb__V1__ListJoinTokensRequest req = HVPB__V1__LIST_JOIN_TOKENS_REQUEST__INIT;
    status = ctl_call(c, "ListJoinTokens", &req.base, &hvpb__v1__list_join_tokens_reply__descriptor,
                      "no join tokens", &resp);
    if (status != HV_CLI_EXIT_OK) {
        return status;
    }
    const Hvpb__V1__ListJoinTokensReply *r = (const Hvpb__V1__ListJoinTokensReply *)resp;
    if (c->o->json) {
        hv_cli_json_t j;
        hv_cli_json_init(&j, stdout);
        hv_cli_json_obj_begin(&j);
        hv_cli_json_key(&j, "tokens");
        hv_cli_json_arr_begin(&j);
        for (size_t i = 0; i < r->n_tokens; i++) {
            ctl_json_jtoken(&j, r->tokens[i]);
        }
        hv_cli_json_arr_end(&j);
        hv_cli_json_obj_end(&j);
        hv_cli_json_finish(&j);
        hv_rpc_msg_free(resp);
        return HV_CLI_EXIT_OK;
    }
    static const char *const hdr[] = {"ID", "STATE", "CREATED", "EXPIRES", "USES", "BY"};
    hv_cli_table_t *t = NULL;
    if (hv_cli_table_create(6, hdr, &t) != HV_OK) {
        hv_rpc_msg_free(resp);
        return ctl_oom();
    }
    for (size_t i = 0; i < r->n_tokens; i++) {
        const Hvpb__V1__JoinTokenView *v = r->tokens[i];
        char created[48], expires[48], uses[48], id[32], by[80];
        if (v->max_uses != 0) {
            snprintf(uses, sizeof(uses), "%u/%u", v->uses, v->max_uses);
        } else {
            snprintf(uses, sizeof(uses), "%u", v->uses);
        }
        const char *row[] = {hv_cli_clean(v->id, 0, id, sizeof(id)),
                             v->state,
                             ctl_time(v->created_ms, created, sizeof(created)),
                             ctl_when(v->expires_ms, "never", expires, sizeof(expires)),
                             uses,
                             hv_cli_clean(v->created_by, 0, by, sizeof(by))};
        if (hv_cli_table_add(t, row) != HV_OK) {
            hv_cli_table_destroy(t);
            hv_rpc_msg_free(resp);
            return ctl_oom();
        }
    }
    ctl_table_done(t, "no join tokens");
    hv_rpc_msg_free(resp);
    return HV_CLI_EXIT_OK;
}

/* ---- drain, undrain ------------------------------------------------------------------------- */

static void ctl_print_drained(const ctl_t *c, const Hvpb__V1__NodeView *n, const char *asked) {
    if (c->o->json) {
        hv_cli_json_t j;
        hv_cli_json_init(&j, stdout);
        ctl_json_node(&j, n);
        hv_cli_json_finish(&j);
    } else {
        char name[600], state[200];
        printf("node %s (id %llu): %s, %u/%u slots used\n",
               hv_cli_clean(n->info != NULL && n->info->name[0] ? n->info->name : asked, 0, name,
                            sizeof(name)),
               (unsigned long long)n->node_id,
               hv_cli_clean(hv_cli_node_state_name(hv_cli_node_state(n)), 0, state, sizeof(state)),
               (unsigned)n->slots_used, (unsigned)(n->info != NULL ? n->info->slots : 0));
    }
}

/* One node: DrainNode (which heads older than DrainNodes know too); several: DrainNodes, one
 * step on the head, so that an elastic job on them re-forms once, and nothing changes when one
 * of them is unknown. Prints each node's new state (--json: one object per line). */
static int ctl_drain(const ctl_t *c, int drain) {
    char reason[300];
    if (c->o->reason != NULL) {
        snprintf(reason, sizeof(reason), "%s", c->o->reason);
    } else {
        const char *user = getenv("USER");
        snprintf(reason, sizeof(reason), "hvctl %s%s%s", drain ? "drain" : "undrain",
                 user != NULL && user[0] != '\0' ? " by " : "", user != NULL ? user : "");
    }
    ProtobufCMessage *resp = NULL;
    char missing[200];
    if (c->o->nnodes == 1) {
        Hvpb__V1__NodeDrainRequest req = HVPB__V1__NODE_DRAIN_REQUEST__INIT;
        req.node = (char *)c->o->nodes[0];
        req.drain = drain ? 1 : 0;
        req.reason = reason;
        snprintf(missing, sizeof(missing), "no node '%s' (see 'hvctl nodes')", c->o->nodes[0]);
        int status =
            ctl_call(c, "DrainNode", &req.base, &hvpb__v1__node_view__descriptor, missing, &resp);
        if (status != HV_CLI_EXIT_OK) {
            return status;
        }
        ctl_print_drained(c, (const Hvpb__V1__NodeView *)resp, c->o->nodes[0]);
        hv_rpc_msg_free(resp);
        return HV_CLI_EXIT_OK;
    }
    Hvpb__V1__NodesDrainRequest req = HVPB__V1__NODES_DRAIN_REQUEST__INIT;
    req.nodes = (char **)c->o->nodes;
    req.n_nodes = (size_t)c->o->nnodes;
    req.drain = drain ? 1 : 0;
    req.reason = reason;
    snprintf(missing, sizeof(missing), "a node named is unknown (see 'hvctl nodes')");
    int status = ctl_call(c, "DrainNodes", &req.base, &hvpb__v1__list_nodes_reply__descriptor,
                          missing, &resp);
    if (status != HV_CLI_EXIT_OK) {
        return status;
    }
    const Hvpb__V1__ListNodesReply *r = (const Hvpb__V1__ListNodesReply *)resp;
    for (size_t i = 0; i < r->n_nodes; i++) {
        ctl_print_drained(c, r->nodes[i], i < (size_t)c->o->nnodes ? c->o->nodes[i] : "?");
    }
    hv_rpc_msg_free(resp);
    return HV_CLI_EXIT_OK;
}

/* ---- status --------------------------------------------------------------------------------- */

/* A running elastic job whose state lives only in its workers (no copy yet, or an old one) is
 * lost with its last node: say so under the status (text only). */
#define CTL_COPY_STALE_MS (5u * 60u * 1000u)

static void ctl_copy_warnings(const ctl_t *c, Hvpb__V1__JobView *const *jobs, size_t n,
                              uint64_t now) {
    for (size_t i = 0; i < n; i++) {
        const Hvpb__V1__JobView *lv = jobs[i];
        if (!lv->elastic || hv_cli_job_state(lv) != HVPB__V1__JOB_STATE__JOB_STATE_RUNNING ||
            lv->generation == 0) {
            continue;
        }
        Hvpb__V1__JobRef req = HVPB__V1__JOB_REF__INIT;
        req.job_id = lv->job_id;
        ProtobufCMessage *resp = NULL;
        hv_rpc_status_t st;
        if (hv_cli_rpc_unary(c->ch, "/hvpb.v1.Jobs/GetJob", &req.base,
                             &hvpb__v1__job_view__descriptor, HV_CLI_UNARY_MS, &resp,
                             &st) != HV_OK) {
            continue;
        }
        const Hvpb__V1__JobView *v = (const Hvpb__V1__JobView *)resp;
        char age[32];
        if (v->copy == NULL || v->copy->commit == 0) {
            printf("warning: job %llu has no copy of its training state outside its workers yet: "
                   "if every node it runs on is lost, the job is lost\n",
                   (unsigned long long)v->job_id);
        } else if (v->copy_on_own_node) {
            printf("warning: job %llu's only copy of its training state is on the machine all its "
                   "workers run on (the head's): if that machine is lost, the job is lost; set "
                   "state_copies.durable in the head's config (docs/RELIABILITY.md)\n",
                   (unsigned long long)v->job_id);
        } else if (now > v->copy->stored_ms && now - v->copy->stored_ms > CTL_COPY_STALE_MS) {
            printf("warning: job %llu's newest copy of its training state is %s old (generation "
                   "%u, commit %llu): losing its nodes now would lose that much training\n",
                   (unsigned long long)v->job_id,
                   hv_cli_fmt_duration(now - v->copy->stored_ms, age, sizeof(age)),
                   (unsigned)v->copy->generation, (unsigned long long)v->copy->commit);
        }
        hv_rpc_msg_free(resp);
    }
}

static int ctl_status(const ctl_t *c) {
    ctl_pages_t npg, jpg;
    Hvpb__V1__ListNodesReply nall;
    Hvpb__V1__ListJobsReply jall;
    int status = ctl_list_nodes(c, &npg, &nall);
    if (status != HV_CLI_EXIT_OK) {
        return status;
    }
    status = ctl_list_jobs(c, HV_CLI_STATUS_JOBS, &jpg, &jall);
    if (status != HV_CLI_EXIT_OK) {
        ctl_pages_free(&npg);
        return status;
    }
    const Hvpb__V1__ListNodesReply *nr = &nall;
    const Hvpb__V1__ListJobsReply *jr = &jall;
    hv_cli_status_t sum;
    hv_cli_status_count(nr->nodes, nr->n_nodes, jr->jobs, jr->n_jobs, &sum);
    uint64_t now = hv_wall_ms();
    /* The fleet: its jobs from the list above, its resizes from the newest events. */
    Hvpb__V1__ListEventsRequest ereq = HVPB__V1__LIST_EVENTS_REQUEST__INIT;
    ereq.limit = HV_CLI_STATUS_EVENTS;
    ProtobufCMessage *eresp = NULL;
    hv_cli_fleet_t fleet;
    if (ctl_call(c, "ListEvents", &ereq.base, &hvpb__v1__list_events_reply__descriptor, "no events",
                 &eresp) == HV_CLI_EXIT_OK) {
        const Hvpb__V1__ListEventsReply *er = (const Hvpb__V1__ListEventsReply *)eresp;
        hv_cli_fleet_count(jr->jobs, jr->n_jobs, jr->namespaces, jr->n_namespaces, er->events,
                           er->n_events, HV_CLI_STATUS_EVENTS, now,
                           c->o->since_ms ? c->o->since_ms : HV_CLI_STATUS_WINDOW_MS, &fleet);
        sum.fleet = &fleet;
        hv_rpc_msg_free(eresp);
    }
    Hvpb__V1__ListActorsReply *actors = hv_ctl_actors_fetch(c->ch); /* NULL: none to show */
    if (c->o->json) {
        hv_cli_json_t j;
        hv_cli_json_init(&j, stdout);
        hv_cli_status_json(&j, nr->cluster_name, c->head, &sum, jr->jobs, jr->n_jobs, actors, now);
        hv_cli_json_finish(&j);
    } else {
        hv_cli_status_print(stdout, nr->cluster_name, c->head, &sum, jr->jobs, jr->n_jobs, now);
        hv_cli_fleet_print(stdout, &sum);
        hv_ctl_actors_status(actors); /* actors by state; waiting ones with why */
        ctl_copy_warnings(c, jr->jobs, jr->n_jobs, now);
    }
    if (actors != NULL) {
        hv_rpc_msg_free(&actors->base);
    }
    ctl_pages_free(&jpg);
    ctl_pages_free(&npg);
    return HV_CLI_EXIT_OK;
}

static int ctl_drain_on(const ctl_t *c) { return ctl_drain(c, 1); }
static int ctl_undrain(const ctl_t *c) { return ctl_drain(c, 0); }

/* What each command runs; the actor commands (NULL here) are hvctl_actors.c's. */
typedef int (*ctl_run_fn)(const ctl_t *c);
static const ctl_run_fn ctl_runs[CTL_NCMDS] = {
    [CMD_STATUS] = ctl_status,    [CMD_NODES] = ctl_nodes,
    [CMD_JOBS] = ctl_jobs,        [CMD_QUEUE] = ctl_queue,
    [CMD_JOB] = ctl_job,          [CMD_LOGS] = ctl_logs,
    [CMD_CANCEL] = ctl_cancel,    [CMD_EVENTS] = ctl_events,
    [CMD_COST] = ctl_cost,        [CMD_DRAIN] = ctl_drain_on,
    [CMD_UNDRAIN] = ctl_undrain,  [CMD_REVOKE] = ctl_revoke,
    [CMD_AUDIT] = ctl_audit,      [CMD_TOKEN_CREATE] = ctl_token,
    [CMD_TOKEN_LIST] = ctl_token, [CMD_TOKEN_REVOKE] = ctl_token,
};

int main(int argc, char **argv) {
    hv_log_init(CTL_PROG);
    ctl_opts_t o;
    int status = ctl_parse(argc, argv, &o);
    if (status >= 0) {
        return status;
    }
    char err[HV_CLI_ERR_LEN];
    const char *head = hv_cli_head_addr(o.head);
    if (hv_cli_check_head_addr(head, err, sizeof(err)) != HV_OK) {
        return hv_cli_usage_error(CTL_PROG, err);
    }
    ctl_t c = {.o = &o, .head = head, .ch = NULL};
    if ((status = hv_cli_rpc_open(CTL_PROG, head, o.ca, o.insecure, &c.ch)) != HV_CLI_EXIT_OK) {
        return status;
    }
    if (hv_cli_token_attach(c.ch, o.token_file, CTL_PROG, err, sizeof(err)) != HV_OK) {
        fprintf(stderr, CTL_PROG ": %s\n", err);
        hv_rpc_channel_destroy(c.ch);
        return HV_CLI_EXIT_NOINPUT;
    }
    ctl_run_fn run = o.cmd_id < CTL_NCMDS ? ctl_runs[o.cmd_id] : NULL;
    status = run != NULL ? run(&c) : hv_ctl_actors_run(c.ch, head, &o.actor);
    fflush(stdout);
    hv_rpc_channel_destroy(c.ch);
    return status;
}
