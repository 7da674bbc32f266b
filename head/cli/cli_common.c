/*
 * cli_common: see cli_common.h. Pure helpers of hvsubmit and hvctl: command-line parsing, local
 * file checks, exit statuses, human formats (elastic summaries, blacklist entries), the table
 * printer, and the hvctl status and actor summaries written through cli_json. No RPC.
 */
#include "cli_common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "mem.h"
#include "opt.h"
#include "utf8.h"
#include "util.h"

const char *hv_cli_head_addr(const char *opt) {
    if (opt != NULL && opt[0] != '\0') {
        return opt;
    }
    const char *env = getenv("HV_HEAD");
    if (env != NULL && env[0] != '\0') {
        return env;
    }
    return HV_CLI_DEFAULT_HEAD;
}

hv_err hv_cli_check_head_addr(const char *addr, char *err, size_t errlen) {
    char host[256];
    int port = 0;
    if (addr == NULL || hv_parse_hostport(addr, host, sizeof(host), &port) != HV_OK ||
        host[0] == '\0' || port <= 0 || port > 65535) {
        hv_errf(err, errlen, "bad head address '%s': expected HOST:PORT, e.g. 127.0.0.1:7000",
                addr ? addr : "");
        return HV_EINVAL;
    }
    return HV_OK;
}

const char *hv_cli_basename(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* ---- --env ---------------------------------------------------------------------------------- */

hv_err hv_cli_parse_env(const char *s, hv_cli_kv_t *out, char *err, size_t errlen) {
    const char *eq = strchr(s, '=');
    if (eq == NULL) {
        hv_errf(err, errlen, "--env '%s': expected KEY=VALUE", s);
        return HV_EINVAL;
    }
    if (eq == s) {
        hv_errf(err, errlen, "--env '%s': the name before '=' is empty", s);
        return HV_EINVAL;
    }
    for (const char *p = s; p < eq; p++) {
        if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') {
            hv_errf(err, errlen, "--env '%s': the name holds whitespace", s);
            return HV_EINVAL;
        }
    }
    if ((size_t)(eq - s) > 256) {
        hv_errf(err, errlen, "--env: the name '%.40s...' is longer than 256 bytes", s);
        return HV_EINVAL;
    }
    if (strlen(eq + 1) > 65536) {
        hv_errf(err, errlen, "--env %.*s: the value is longer than 64 KiB", (int)(eq - s), s);
        return HV_EINVAL;
    }
    char *key = hv_strndup(s, (size_t)(eq - s));
    char *value = hv_strdup(eq + 1);
    if (key == NULL || value == NULL) {
        hv_free(key);
        hv_free(value);
        hv_errf(err, errlen, "out of memory");
        return HV_ENOMEM;
    }
    out->key = key;
    out->value = value;
    return HV_OK;
}

void hv_cli_kv_fini(hv_cli_kv_t *kv) {
    if (kv == NULL) {
        return;
    }
    hv_free(kv->key);
    hv_free(kv->value);
    kv->key = NULL;
    kv->value = NULL;
}

/* ---- hvsubmit's command line ---------------------------------------------------------------- */

enum submit_opt {
    OPT_HEAD,
    OPT_NP,
    OPT_MIN_NP,
    OPT_MAX_NP,
    OPT_MAX_RESETS,
    OPT_ELASTIC_TIMEOUT,
    OPT_CHECK_EVERY,
    OPT_COOLDOWN,
    OPT_GROW,
    OPT_SLOTS_PER_HOST,
    OPT_NAMESPACE,
    OPT_PRIORITY,
    OPT_PREEMPTIBLE,
    OPT_ENV,
    OPT_FILE,
    OPT_TIMEOUT,
    OPT_NAME,
    OPT_DETACH,
    OPT_QUIET,
    OPT_VERBOSE,
    OPT_HELP,
    OPT_CA,
    OPT_INSECURE,
    OPT_VERSION,
    OPT_HEAD_TIMEOUT,
    OPT_RETRIES,
    OPT_TOKEN_FILE,
    OPT_RAW,
    OPT_WORKDIR,
};

#define U32 UINT32_MAX

/* hvsubmit's options, in the order of its --help. */
static const hv_opt_t submit_opts[] = {
    {"head", 0, HV_OPT_TEXT, 0, 0, 0, OPT_HEAD, NULL,
     "  --head HOST:PORT      the head (default: $HV_HEAD, else " HV_CLI_DEFAULT_HEAD ")\n"},
    {"ca", 0, HV_OPT_TEXT, 0, 0, 0, OPT_CA, NULL,
     "  --ca FILE             verify the head's TLS certificate against this CA\n"
     "                        (default: $HV_CA_FILE; docs/tls.md)\n"},
    {"insecure", 0, HV_OPT_FLAG, 0, 0, 0, OPT_INSECURE, NULL,
     "  --insecure            plain text to a head not on this machine (or HV_INSECURE=1)\n"},
    {"token-file", 0, HV_OPT_TEXT, 0, 0, 0, OPT_TOKEN_FILE, NULL,
     "  --token-file F        the client token (default: $HV_TOKEN_FILE, else\n"
     "                        " HV_CLI_DEFAULT_TOKEN_FILE ")\n"},
    {"np", 0, HV_OPT_UINT, 0, U32, 0, OPT_NP, "--np '%s': expected a whole number",
     "  -np N                 workers to run (default: every free slot)\n"},
    {"slots-per-host", 0, HV_OPT_UINT, 1, U32, 0, OPT_SLOTS_PER_HOST,
     "--slots-per-host '%s': expected a whole number of at least 1",
     "  --slots-per-host K    at most K ranks on one node\n"},
    {"namespace", 0, HV_OPT_TEXT, 0, 0, 0, OPT_NAMESPACE, NULL,
     "  --namespace NS        the actor namespace its workers look up and call actors\n"
     "                        in (default: \"default\"; docs/actors.md), and whose quota\n"
     "                        and share the job counts in (docs/scheduling.md)\n"},
    {"priority", 0, HV_OPT_TEXT, 0, 0, 0, OPT_PRIORITY, NULL,
     "  --priority N          a higher priority is admitted first and takes workers from\n"
     "                        lower-priority elastic jobs down to their --min-np\n"
     "                        (-1000 to 1000; default: its namespace's, 0 unless the\n"
     "                        head's fleet.namespaces sets one; docs/scheduling.md)\n"},
    {"preemptible", 0, HV_OPT_FLAG, 0, 0, 0, OPT_PREEMPTIBLE, NULL,
     "  --preemptible         the job may be stopped for a higher priority and resumed\n"
     "                        later from its state copy (elastic jobs only;\n"
     "                        docs/scheduling.md)\n"},
    {"env", 'e', HV_OPT_TEXT, 0, 0, 0, OPT_ENV, NULL,
     "  --env K=V, -e K=V     environment for the workers (repeatable)\n"},
    {"file", 'f', HV_OPT_TEXT, 0, 0, 0, OPT_FILE, NULL,
     "  --file PATH, -f PATH  ship PATH beside the program (repeatable)\n"},
    {"workdir", 0, HV_OPT_TEXT, 0, 0, 0, OPT_WORKDIR, NULL,
     "  --workdir DIR         ship DIR's files and subdirectories beside the program, at\n"
     "                        the same paths: at most 200 files, 256 MiB, 15 levels;\n"
     "                        names starting with '.', __pycache__ and *.pyc are left\n"
     "                        out, and so is every name or path below DIR matching a\n"
     "                        glob line of DIR/.hvignore (links to directories: not\n"
     "                        followed)\n"},
    {"timeout", 0, HV_OPT_UINT, 1, U32, 0, OPT_TIMEOUT,
     "--timeout '%s': expected a whole number of at least 1",
     "  --timeout S           fail the job if it waits more than S s for free slots\n"
     "                        (default: the head's job_wait_timeout_s, 600)\n"},
    {"name", 0, HV_OPT_TEXT, 1, 256, 0, OPT_NAME, "--name: expected 1 to 256 characters",
     "  --name NAME           display name (default: the program's file name)\n"},
    {"detach", 'd', HV_OPT_FLAG, 0, 0, 0, OPT_DETACH, NULL,
     "  --detach, -d          print the job id and exit without following the job\n"},
    {"retries", 0, HV_OPT_UINT, 0, HV_CLI_RETRIES_MAX, 0, OPT_RETRIES,
     "--retries '%s': expected a whole number from 0 to 1000",
     "  --retries N           when the job fails, submit it again, up to N times (every\n"
     "                        worker starts over; the program resumes from its own\n"
     "                        checkpoint): the restart-the-job policy\n"},
    {"head-timeout", 0, HV_OPT_UINT, 1, HV_CLI_HEAD_TIMEOUT_MAX, 0, OPT_HEAD_TIMEOUT,
     "--head-timeout '%s': expected seconds from 1 to 86400",
     "  --head-timeout S      when the head goes away while the job runs, wait S s for\n"
     "                        it to come back (default: the nodes' lease + 30 s); the\n"
     "                        same bound when the head says it cannot store its state\n"},
    {"quiet", 'q', HV_OPT_FLAG, 0, 0, 0, OPT_QUIET, NULL,
     "  --quiet, -q           do not print state changes (only output and errors)\n"},
    {"raw", 0, HV_OPT_FLAG, 0, 0, 0, OPT_RAW, NULL,
     "  --raw                 pass control characters in worker output through to a\n"
     "                        terminal (by default escape sequences there show as\n"
     "                        \\x1b...; into a file or a pipe output is never changed)\n"},
    {"verbose", 'v', HV_OPT_FLAG, 0, 0, 0, OPT_VERBOSE, NULL,
     "  --verbose, -v         say more about uploads\n"},
    {"help", 'h', HV_OPT_FLAG, 0, 0, 0, OPT_HELP, NULL, "  --help, -h            this help\n"},
    {"version", 'V', HV_OPT_FLAG, 0, 0, 0, OPT_VERSION, NULL,
     "  --version, -V         print the version\n"},
    {NULL, 0, HV_OPT_HEADING, 0, 0, 0, 0, NULL,
     "\n"
     "elastic jobs (--min-np or --max-np makes a job elastic: it keeps running when workers\n"
     "fail or nodes leave, and grows when nodes join; -np is the size it starts at when\n"
     "that many slots are free):\n"},
    {"min-np", 0, HV_OPT_UINT, 1, U32, 0, OPT_MIN_NP,
     "--min-np '%s': expected a whole number of at least 1",
     "  --min-np N            start once N slots are free (with up to -np workers) and keep\n"
     "                        running with at least N workers\n"},
    {"max-np", 0, HV_OPT_UINT, 1, U32, 0, OPT_MAX_NP,
     "--max-np '%s': expected a whole number of at least 1",
     "  --max-np N            grow up to N workers\n"},
    {"max-resets", 0, HV_OPT_UINT, 0, HV_CLI_MAX_RESETS_MAX, 0, OPT_MAX_RESETS,
     "--max-resets '%s': expected a whole number from 0 to 1000000",
     "  --max-resets N        membership changes (failures, drains, growth) allowed\n"
     "                        before the job fails (0: keep the first membership;\n"
     "                        default: the head's elastic.max_resets, 100)\n"},
    {"elastic-timeout", 0, HV_OPT_UINT, 1, HV_CLI_ELASTIC_TIMEOUT_MAX, 0, OPT_ELASTIC_TIMEOUT,
     "--elastic-timeout '%s': expected seconds from 1 to 604800",
     "  --elastic-timeout S   how long the job may wait to get back to --min-np workers\n"},
    {"check-every", 0, HV_OPT_UINT, 1, HV_CLI_CHECK_EVERY_MAX, 0, OPT_CHECK_EVERY,
     "--check-every '%s': expected a number of commits from 1 to 1000000",
     "  --check-every N       commits between the workers' membership checks (at least 1)\n"},
    {"blacklist-cooldown", 0, HV_OPT_TEXT, 0, 0, 0, OPT_COOLDOWN, NULL,
     "  --blacklist-cooldown MIN:MAX\n"
     "                        seconds a node whose worker failed gets no more of this\n"
     "                        job's work, doubling from MIN up to MAX per failure there\n"
     "                        (0:0: no blacklisting)\n"},
    {"grow", 0, HV_OPT_TEXT, 0, 0, 0, OPT_GROW, NULL,
     "  --grow E:N[,E:N...]   grow over epochs: N workers from epoch E on (0:2,30:4,60:8);\n"
     "                        the job starts at the epoch-0 size, --max-np defaults to\n"
     "                        the largest, and the autoscaler buys the nodes it needs\n"},
};
#define SUBMIT_NOPTS (sizeof(submit_opts) / sizeof(submit_opts[0]))

void hv_cli_submit_options_help(FILE *f) { hv_opt_help(f, submit_opts, SUBMIT_NOPTS, 0); }

/* --blacklist-cooldown MIN:MAX, in seconds; 0:0 turns blacklisting off. */
static hv_err submit_parse_cooldown(hv_cli_submit_opts_t *o, const char *v, char *err,
                                    size_t errlen) {
    const char *colon = strchr(v, ':');
    char lo[32], hi[32];
    uint64_t a = 0, b = 0;
    if (colon == NULL || (size_t)(colon - v) >= sizeof(lo) || strlen(colon + 1) >= sizeof(hi)) {
        hv_errf(err, errlen,
                "--blacklist-cooldown '%s': expected MIN:MAX in seconds, e.g. 60:3600 (0:0 turns "
                "blacklisting off)",
                v);
        return HV_EINVAL;
    }
    memcpy(lo, v, (size_t)(colon - v));
    lo[colon - v] = '\0';
    snprintf(hi, sizeof(hi), "%s", colon + 1);
    if (hv_parse_u64(lo, 0, HV_CLI_COOLDOWN_MAX, &a) != HV_OK ||
        hv_parse_u64(hi, 0, HV_CLI_COOLDOWN_MAX, &b) != HV_OK) {
        hv_errf(err, errlen,
                "--blacklist-cooldown '%s': MIN and MAX are whole seconds from 0 to %u, e.g. "
                "60:3600",
                v, (unsigned)HV_CLI_COOLDOWN_MAX);
        return HV_EINVAL;
    }
    if (a > b) {
        hv_errf(err, errlen, "--blacklist-cooldown '%s': MIN %llu is more than MAX %llu", v,
                (unsigned long long)a, (unsigned long long)b);
        return HV_EINVAL;
    }
    if (a == 0 && b != 0) {
        hv_errf(err, errlen,
                "--blacklist-cooldown '%s': a MIN of 0 turns blacklisting off; give 0:0 for that, "
                "or a MIN of at least 1",
                v);
        return HV_EINVAL;
    }
    o->cooldown_min_s = (uint32_t)a;
    o->cooldown_max_s = (uint32_t)b;
    o->cooldown_set = 1;
    return HV_OK;
}

static hv_err submit_push_env(hv_cli_submit_opts_t *o, const char *v, char *err, size_t errlen) {
    hv_cli_kv_t kv;
    hv_err rc = hv_cli_parse_env(v, &kv, err, errlen);
    if (rc != HV_OK) {
        return rc;
    }
    if (o->nenv == o->env_cap) {
        size_t cap = o->env_cap != 0 ? o->env_cap * 2 : 16;
        hv_cli_kv_t *env = hv_realloc(o->env, cap * sizeof(*env));
        if (env == NULL) {
            hv_cli_kv_fini(&kv);
            hv_errf(err, errlen, "out of memory");
            return HV_ENOMEM;
        }
        o->env = env;
        o->env_cap = cap;
    }
    /* Names given twice are merged once every option is read (hv_cli_env_dedupe). */
    o->env[o->nenv++] = kv;
    return HV_OK;
}

/* A pair's key and its place, sorted by key, then place. */
typedef struct env_ref_s {
    const char *key;
    size_t pos;
} env_ref_t;

static int env_ref_cmp(const void *a, const void *b) {
    const env_ref_t *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c != 0 ? c : (x->pos > y->pos) - (x->pos < y->pos);
}

hv_err hv_cli_env_dedupe(hv_cli_kv_t *env, size_t *n) {
    if (*n < 2) {
        return HV_OK;
    }
    env_ref_t *refs = hv_malloc(*n * sizeof(*refs));
    if (refs == NULL) {
        return HV_ENOMEM;
    }
    for (size_t i = 0; i < *n; i++) {
        refs[i] = (env_ref_t){.key = env[i].key, .pos = i};
    }
    qsort(refs, *n, sizeof(*refs), env_ref_cmp);
    /* In each run of one key: the first place takes the last value, the others are freed. */
    for (size_t i = 0; i < *n;) {
        size_t j = i + 1;
        while (j < *n && strcmp(refs[j].key, refs[i].key) == 0) {
            j++;
        }
        if (j - i > 1) {
            hv_cli_kv_t *first = &env[refs[i].pos], *last = &env[refs[j - 1].pos];
            char *v = first->value;
            first->value = last->value;
            last->value = v;
            for (size_t k = i + 1; k < j; k++) {
                hv_cli_kv_fini(&env[refs[k].pos]); /* key NULL: dropped below */
            }
        }
        i = j;
    }
    hv_free(refs);
    size_t kept = 0;
    for (size_t i = 0; i < *n; i++) {
        if (env[i].key != NULL) {
            env[kept++] = env[i];
        }
    }
    *n = kept;
    return HV_OK;
}

static hv_err submit_push_file(hv_cli_submit_opts_t *o, const char *v, char *err, size_t errlen) {
    if (v[0] == '\0') {
        hv_errf(err, errlen, "--file: empty path");
        return HV_EINVAL;
    }
    const char **files = hv_realloc(o->files, (o->nfiles + 1) * sizeof(*files));
    if (files == NULL) {
        hv_errf(err, errlen, "out of memory");
        return HV_ENOMEM;
    }
    o->files = files;
    o->files[o->nfiles++] = v;
    return HV_OK;
}

/* One option with its value, checked against its row's bounds (g->num for a number). */
static hv_err submit_apply(hv_cli_submit_opts_t *o, const hv_opt_got_t *g, char *err,
                           size_t errlen) {
    const char *v = g->value;
    switch ((enum submit_opt)g->opt->id) {
    case OPT_HEAD:
        o->head = v;
        return hv_cli_check_head_addr(v, err, errlen);
    case OPT_CA:
        if (v[0] == '\0') {
            hv_errf(err, errlen, "--ca needs a file");
            return HV_EINVAL;
        }
        o->ca = v;
        return HV_OK;
    case OPT_INSECURE:
        o->insecure = 1;
        return HV_OK;
    case OPT_TOKEN_FILE:
        o->token_file = v;
        return HV_OK;
    case OPT_NP:
        if (g->num == 0) {
            hv_errf(err, errlen,
                    "-np 0: a job needs at least one worker (leave -np out to use every free "
                    "slot)");
            return HV_EINVAL;
        }
        o->np = (uint32_t)g->num;
        o->np_set = 1;
        return HV_OK;
    case OPT_MIN_NP:
        o->elastic = 1;
        o->min_np = (uint32_t)g->num;
        return HV_OK;
    case OPT_MAX_NP:
        o->elastic = 1;
        o->max_np = (uint32_t)g->num;
        return HV_OK;
    case OPT_MAX_RESETS:
        o->max_resets_set = 1;
        o->max_resets = (uint32_t)g->num;
        return HV_OK;
    case OPT_ELASTIC_TIMEOUT:
        o->elastic_timeout_s = (uint32_t)g->num;
        return HV_OK;
    case OPT_CHECK_EVERY:
        o->check_every = (uint32_t)g->num;
        return HV_OK;
    case OPT_COOLDOWN:
        return submit_parse_cooldown(o, v, err, errlen);
    case OPT_GROW: {
        char why[200];
        o->elastic = 1;
        o->grow = v;
        if (hv_grow_parse(v, o->grow_steps, HV_GROW_MAX_STEPS, &o->ngrow, why, sizeof(why)) !=
            HV_OK) {
            hv_errf(err, errlen, "--grow '%.60s': %s", v, why);
            return HV_EINVAL;
        }
        return HV_OK;
    }
    case OPT_SLOTS_PER_HOST:
        o->slots_per_host = (uint32_t)g->num;
        return HV_OK;
    case OPT_TIMEOUT:
        o->timeout_s = (uint32_t)g->num;
        return HV_OK;
    case OPT_ENV:
        return submit_push_env(o, v, err, errlen);
    case OPT_WORKDIR:
        if (v[0] == '\0') {
            hv_errf(err, errlen, "--workdir needs a directory");
            return HV_EINVAL;
        }
        o->workdir = v;
        return HV_OK;
    case OPT_FILE:
        return submit_push_file(o, v, err, errlen);
    case OPT_NAMESPACE: {
        size_t n = strlen(v);
        int ok =
            n >= 1 && n <= 63 && v[0] != '.' && v[0] != '-' &&
            strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
        if (!ok) {
            hv_errf(err, errlen,
                    "--namespace '%.80s': 1 to 63 letters, digits, '.', '_' or '-' (not first "
                    "'.' or '-')",
                    v);
            return HV_EINVAL;
        }
        o->ns = v;
        return HV_OK;
    }
    case OPT_PRIORITY: {
        char *end = NULL;
        errno = 0;
        long p = strtol(v, &end, 10);
        if (v[0] == '\0' || end == NULL || *end != '\0' || errno != 0 || p < -1000 || p > 1000) {
            hv_errf(err, errlen, "--priority '%.40s': expected a whole number from -1000 to 1000",
                    v);
            return HV_EINVAL;
        }
        o->priority = (int32_t)p;
        o->priority_set = 1;
        return HV_OK;
    }
    case OPT_PREEMPTIBLE:
        o->preemptible = 1;
        return HV_OK;
    case OPT_NAME:
        o->name = v;
        return HV_OK;
    case OPT_DETACH:
        o->detach = 1;
        return HV_OK;
    case OPT_QUIET:
        o->quiet = 1;
        return HV_OK;
    case OPT_RAW:
        o->raw = 1;
        return HV_OK;
    case OPT_VERBOSE:
        o->verbose = 1;
        return HV_OK;
    case OPT_HELP:
        o->help = 1;
        return HV_OK;
    case OPT_VERSION:
        o->version = 1;
        return HV_OK;
    case OPT_RETRIES:
        o->retries = (uint32_t)g->num;
        return HV_OK;
    case OPT_HEAD_TIMEOUT:
        o->head_timeout_set = 1;
        o->head_timeout_s = (uint32_t)g->num;
        return HV_OK;
    }
    return HV_EINTERNAL;
}

/* --grow against -np, --min-np and --max-np: the size at epoch 0 is where the job starts (or -np
 * when the schedule starts later), every size lies within min..max, and max defaults to the
 * largest size. The workers get the schedule as HV_GROW_SCHEDULE. */
static hv_err submit_check_grow(hv_cli_submit_opts_t *o, char *err, size_t errlen) {
    uint32_t first = hv_grow_size_at(o->grow_steps, o->ngrow, 0), top = 0;
    if (first == 0 && !o->np_set) {
        hv_errf(err, errlen,
                "--grow '%.60s' starts at epoch %llu: give -np for the epochs before it, or "
                "start the schedule at epoch 0",
                o->grow, (unsigned long long)o->grow_steps[0].epoch);
        return HV_EINVAL;
    }
    if (first != 0 && o->np_set && o->np != first) {
        hv_errf(err, errlen, "-np %u and --grow '%.60s' disagree: the schedule starts at %u",
                (unsigned)o->np, o->grow, (unsigned)first);
        return HV_EINVAL;
    }
    for (size_t i = 0; i < o->ngrow; i++) {
        uint32_t sz = o->grow_steps[i].size;
        top = sz > top ? sz : top;
        if ((o->max_np != 0 && sz > o->max_np) || (o->min_np != 0 && sz < o->min_np)) {
            hv_errf(err, errlen,
                    "--grow: %u workers at epoch %llu is outside --min-np %u .. "
                    "--max-np %u",
                    (unsigned)sz, (unsigned long long)o->grow_steps[i].epoch, (unsigned)o->min_np,
                    (unsigned)o->max_np);
            return HV_EINVAL;
        }
    }
    if (first != 0) {
        o->np = first;
        o->np_set = 1;
    }
    top = top > o->np ? top : o->np;
    if (o->max_np == 0) {
        o->max_np = top;
    }
    char kv[HV_GROW_MAX_STEPS * 64 + 32];
    snprintf(kv, sizeof(kv), "HV_GROW_SCHEDULE=%s", o->grow);
    return submit_push_env(o, kv, err, errlen);
}

/* Checks the numbers against each other once all options are known. */
static hv_err submit_check_counts(hv_cli_submit_opts_t *o, char *err, size_t errlen) {
    if (o->min_np != 0 && o->max_np != 0 && o->min_np > o->max_np) {
        hv_errf(err, errlen, "--min-np %u is more than --max-np %u", (unsigned)o->min_np,
                (unsigned)o->max_np);
        return HV_EINVAL;
    }
    if (o->np_set && o->min_np != 0 && o->min_np > o->np) {
        hv_errf(err, errlen, "--min-np %u is more than -np %u", (unsigned)o->min_np,
                (unsigned)o->np);
        return HV_EINVAL;
    }
    if (o->np_set && o->max_np != 0 && o->np > o->max_np) {
        hv_errf(err, errlen, "-np %u is more than --max-np %u", (unsigned)o->np,
                (unsigned)o->max_np);
        return HV_EINVAL;
    }
    if (o->grow != NULL) {
        HV_TRY(submit_check_grow(o, err, errlen));
    }
    if (o->retries != 0 && o->detach) {
        hv_errf(err, errlen, "--retries needs hvsubmit to follow the job: not with --detach");
        return HV_EINVAL;
    }
    /* The other elastic options mean nothing for a fixed-size job: say so rather than drop them. */
    const char *lone = o->max_resets_set      ? "--max-resets"
                       : o->elastic_timeout_s ? "--elastic-timeout"
                       : o->check_every       ? "--check-every"
                       : o->cooldown_set      ? "--blacklist-cooldown"
                                              : NULL;
    if (!o->elastic && lone != NULL) {
        hv_errf(err, errlen,
                "%s is for elastic jobs: give --min-np and/or --max-np too (a job without them "
                "has a fixed size and fails at its first worker failure)",
                lone);
        return HV_EINVAL;
    }
    return HV_OK;
}

hv_err hv_cli_submit_parse(int argc, char **argv, hv_cli_submit_opts_t *out, char *err,
                           size_t errlen) {
    hv_cli_submit_opts_t o;
    memset(&o, 0, sizeof(o));
    hv_err rc = HV_OK;
    hv_opt_iter_t it;
    hv_opt_got_t g;
    hv_opt_init(&it, submit_opts, SUBMIT_NOPTS,
                HV_OPT_ONE_DASH | HV_OPT_FIRST_ARG | HV_OPT_DASHDASH, 0, argc, argv, 1);
    hv_opt_res r;
    while ((r = hv_opt_next(&it, &g)) == HV_OPT_OPTION) {
        if ((rc = submit_apply(&o, &g, err, errlen)) != HV_OK) {
            goto fail;
        }
        if (o.help || o.version) {
            *out = o;
            return HV_OK;
        }
    }
    if (r == HV_OPT_FAULT) {
        char msg[HV_CLI_ERR_LEN];
        hv_errf(err, errlen, "%s", hv_opt_fault_msg(&g, NULL, msg, sizeof(msg)));
        rc = HV_EINVAL;
        goto fail;
    }
    /* The options end at the program (or after "--"): REST, or END when there is none. */
    if (r != HV_OPT_REST || g.index >= argc) {
        hv_errf(err, errlen, "no program given: hvsubmit [OPTIONS] train.bin [ARGS...]");
        rc = HV_EINVAL;
        goto fail;
    }
    o.binary = argv[g.index];
    o.args = argv + g.index + 1;
    o.nargs = argc - g.index - 1;
    if ((rc = submit_check_counts(&o, err, errlen)) != HV_OK) {
        goto fail;
    }
    if ((rc = hv_cli_env_dedupe(o.env, &o.nenv)) != HV_OK) {
        hv_errf(err, errlen, "out of memory");
        goto fail;
    }
    *out = o;
    return HV_OK;
fail:
    hv_cli_submit_opts_fini(&o);
    return rc;
}

uint64_t hv_cli_head_wait_ms(int head_timeout_set, uint32_t head_timeout_s, uint32_t lease_ms) {
    if (head_timeout_set) {
        return (uint64_t)head_timeout_s * 1000u;
    }
    return (uint64_t)(lease_ms != 0 ? lease_ms : HV_CLI_DEFAULT_LEASE_MS) + HV_CLI_HEAD_MARGIN_MS;
}

int hv_cli_usage_error(const char *prog, const char *msg) {
    fprintf(stderr, "%s: %s (see %s --help)\n", prog, msg, prog);
    return HV_CLI_EXIT_USAGE;
}

void hv_cli_submit_opts_fini(hv_cli_submit_opts_t *o) {
    if (o == NULL) {
        return;
    }
    for (size_t i = 0; i < o->nenv; i++) {
        hv_cli_kv_fini(&o->env[i]);
    }
    hv_free(o->env);
    hv_free((void *)o->files);
    hv_free((void *)o->names);
    for (size_t i = 0; i < o->nowned; i++) {
        hv_free(o->owned[i]);
    }
    hv_free(o->owned);
    memset(o, 0, sizeof(*o));
}

/* ---- local file checks ---------------------------------------------------------------------- */

/* stat() with messages: HV_ENOTFOUND if missing, HV_EINVAL if not a regular file. */
static hv_err cli_stat_regular(const char *what, const char *path, struct stat *st, char *err,
                               size_t errlen) {
    if (stat(path, st) != 0) {
        int e = errno;
        if (e == ENOENT || e == ENOTDIR) {
            hv_errf(err, errlen, "%s%s: no such file", what, path);
            return HV_ENOTFOUND;
        }
        hv_errf(err, errlen, "%s%s: %s", what, path, strerror(e));
        return hv_err_from_errno(e);
    }
    if (S_ISDIR(st->st_mode)) {
        hv_errf(err, errlen, "%s%s is a directory, not a file", what, path);
        return HV_EINVAL;
    }
    if (!S_ISREG(st->st_mode)) {
        hv_errf(err, errlen, "%s%s is not a regular file", what, path);
        return HV_EINVAL;
    }
    return HV_OK;
}

/* ---- ELF header ---------------------------------------------------------------------------- */

static const struct {
    unsigned machine;
    const char *name;
} cli_elf_machines[] = {
    {3, "x86 (i386)"}, {8, "MIPS"},    {20, "PowerPC"},  {21, "PowerPC64"}, {22, "S/390"},
    {40, "ARM"},       {62, "x86-64"}, {183, "AArch64"}, {243, "RISC-V"},   {258, "LoongArch"},
};

const char *hv_cli_elf_machine_name(unsigned machine) {
    for (size_t i = 0; i < sizeof(cli_elf_machines) / sizeof(cli_elf_machines[0]); i++) {
        if (cli_elf_machines[i].machine == machine) {
            return cli_elf_machines[i].name;
        }
    }
    return NULL;
}

/* Reads an n-byte unsigned field at off in the file's byte order (big when msb). */
static uint64_t cli_elf_get(const unsigned char *b, size_t off, size_t n, int msb) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = msb ? off + i : off + n - 1 - i;
        v = (v << 8) | b[k];
    }
    return v;
}

hv_err hv_cli_elf_check_prefix(const unsigned char *buf, size_t len, uint64_t file_size, char *err,
                               size_t errlen) {
    if (buf == NULL || len < 4 || buf[0] != 0x7f || buf[1] != 'E' || buf[2] != 'L' ||
        buf[3] != 'F') {
        hv_errf(err, errlen, "not an ELF executable (it does not start with \\x7fELF)");
        return HV_EINVAL;
    }
    if (len < 6 || (buf[4] != 1 && buf[4] != 2)) {
        hv_errf(err, errlen,
                "not a valid ELF file: unknown class %u (EI_CLASS, want 1 for 32-bit "
                "or 2 for 64-bit)",
                len < 6 ? 0u : (unsigned)buf[4]);
        return HV_EINVAL;
    }
    int is64 = buf[4] == 2;
    size_t hdr = is64 ? 64 : 52;
    if (buf[5] != 1 && buf[5] != 2) {
        hv_errf(err, errlen, "not a valid ELF file: unknown byte order %u (EI_DATA)",
                (unsigned)buf[5]);
        return HV_EINVAL;
    }
    int msb = buf[5] == 2;
    if (len < hdr || file_size < hdr) {
        hv_errf(err, errlen, "a truncated ELF file: %llu bytes, shorter than its %zu-byte header",
                (unsigned long long)(file_size < len ? file_size : len), hdr);
        return HV_EINVAL;
    }
    if (buf[6] != 1) {
        hv_errf(err, errlen, "not a valid ELF file: unknown ELF version %u", (unsigned)buf[6]);
        return HV_EINVAL;
    }
    unsigned type = (unsigned)cli_elf_get(buf, 16, 2, msb);
    unsigned machine = (unsigned)cli_elf_get(buf, 18, 2, msb);
    uint64_t version = cli_elf_get(buf, 20, 4, msb);
    uint64_t phoff = is64 ? cli_elf_get(buf, 32, 8, msb) : cli_elf_get(buf, 28, 4, msb);
    size_t rest = is64 ? 52 : 40; /* e_ehsize, then e_phentsize, e_phnum */
    uint64_t ehsize = cli_elf_get(buf, rest, 2, msb);
    uint64_t phentsize = cli_elf_get(buf, rest + 2, 2, msb);
    uint64_t phnum = cli_elf_get(buf, rest + 4, 2, msb);
    switch (type) {
    case 2: /* ET_EXEC */
    case 3: /* ET_DYN: a position-independent executable (or a shared library) */
        break;
    case 1:
        hv_errf(err, errlen,
                "a relocatable object file (.o), not a linked program: link it "
                "into an executable");
        return HV_EINVAL;
    case 4:
        hv_errf(err, errlen, "a core dump, not a program");
        return HV_EINVAL;
    default:
        hv_errf(err, errlen, "not an ELF executable: unknown file type %u (e_type)", type);
        return HV_EINVAL;
    }
    const char *mname = hv_cli_elf_machine_name(machine);
    if (mname == NULL) {
        hv_errf(err, errlen, "an ELF file for an unknown machine %u (e_machine)", machine);
        return HV_EINVAL;
    }
    if (version != 1 || ehsize != hdr) {
        hv_errf(err, errlen, "not a valid ELF file: %s %llu in its header (want %llu)",
                version != 1 ? "e_version" : "e_ehsize",
                (unsigned long long)(version != 1 ? version : ehsize),
                (unsigned long long)(version != 1 ? 1 : hdr));
        return HV_EINVAL;
    }
    if (phnum == 0) {
        hv_errf(err, errlen,
                "an ELF file without program headers: nothing to load, not a "
                "program");
        return HV_EINVAL;
    }
    uint64_t want_phent = is64 ? 56 : 32;
    if (phentsize != want_phent) {
        hv_errf(err, errlen,
                "not a valid ELF file: program header entries of %llu bytes (want "
                "%llu)",
                (unsigned long long)phentsize, (unsigned long long)want_phent);
        return HV_EINVAL;
    }
    /* phnum <= 65535 and phentsize <= 56: the product cannot overflow; phoff can be anything. */
    uint64_t table = phnum * phentsize;
    if (phoff < hdr || phoff > file_size || file_size - phoff < table) {
        hv_errf(err, errlen,
                "a truncated or damaged ELF file: its program headers (%llu bytes at "
                "offset %llu) lie outside the file's %llu bytes",
                (unsigned long long)table, (unsigned long long)phoff,
                (unsigned long long)file_size);
        return HV_EINVAL;
    }
    return HV_OK;
}

hv_err hv_cli_elf_check_header(const unsigned char *buf, size_t len, char *err, size_t errlen) {
    return hv_cli_elf_check_prefix(buf, len, len, err, errlen);
}

int hv_cli_exit_for_local(hv_err rc) {
    switch (rc) {
    case HV_OK:
        return HV_CLI_EXIT_OK;
    case HV_ENOTFOUND:
    case HV_EPERM:
        return HV_CLI_EXIT_NOINPUT;
    case HV_EIO:
        return HV_CLI_EXIT_IOERR;
    case HV_ENOMEM:
    case HV_EINTERNAL:
        return HV_CLI_EXIT_SOFTWARE;
    default:
        return HV_CLI_EXIT_DATAERR;
    }
}

/* The interpreter a "#!" line names, for a hint: "python3" for "#!/usr/bin/env python3",
 * "/bin/sh" for "#!/bin/sh"; "python3" when the line cannot be read. */
static void cli_shebang_interpreter(const unsigned char *hdr, size_t len, char *out, size_t n) {
    char line[HV_CLI_ELF_HDR_MAX + 1];
    size_t k = 0;
    for (size_t i = 2; i < len && hdr[i] != '\n' && k + 1 < sizeof(line); i++) {
        line[k++] = (char)hdr[i];
    }
    line[k] = '\0';
    char *save = NULL;
    char *tok = strtok_r(line, " \t", &save);
    if (tok != NULL && strcmp(hv_cli_basename(tok), "env") == 0) {
        tok = strtok_r(NULL, " \t", &save);
    }
    int ok = tok != NULL && tok[0] != '\0';
    for (const char *p = tok; ok && *p; p++) {
        ok = (unsigned char)*p > ' ' && (unsigned char)*p < 0x7f;
    }
    snprintf(out, n, "%s", ok ? tok : "python3");
}

hv_err hv_cli_check_binary(const char *path, char *err, size_t errlen) {
    struct stat st;
    hv_err rc = cli_stat_regular("", path, &st, err, errlen);
    if (rc != HV_OK) {
        return rc;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        hv_errf(err, errlen, "%s: cannot read it: %s", path, strerror(errno));
        return HV_EPERM;
    }
    unsigned char hdr[HV_CLI_ELF_HDR_MAX];
    size_t got = 0;
    int e = 0;
    while (got < sizeof(hdr)) {
        ssize_t n = read(fd, hdr + got, sizeof(hdr) - got);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            e = errno;
            break;
        }
        if (n == 0) {
            break;
        }
        got += (size_t)n;
    }
    close(fd);
    if (e != 0) {
        hv_errf(err, errlen, "%s: cannot read it: %s", path, strerror(e));
        return HV_EIO;
    }
    if (got >= 2 && hdr[0] == '#' && hdr[1] == '!') {
        char interp[64];
        cli_shebang_interpreter(hdr, got, interp, sizeof(interp));
        hv_errf(err, errlen,
                "%s is a script, not an ELF executable: to run a script, give its interpreter: "
                "hvsubmit -np N -- %s %s (the nodes must have %s)",
                path, interp, path, interp);
        return HV_EINVAL;
    }
    /* A script (or any file that is no ELF) gets the hint whatever its mode: what is wrong is
     * that it lacks its interpreter, not the x bit. */
    int not_elf = got < 4 || memcmp(hdr,
                                    "\x7f"
                                    "ELF",
                                    4) != 0;
    if (!not_elf && ((st.st_mode & 0111) == 0 || access(path, X_OK) != 0)) {
        hv_errf(err, errlen, "%s is not executable (chmod +x %s)", path, path);
        return HV_EINVAL;
    }
    char why[HV_CLI_ERR_LEN];
    if (hv_cli_elf_check_prefix(hdr, got, (uint64_t)st.st_size, why, sizeof(why)) != HV_OK) {
        hv_errf(err, errlen, "%s is %s%s%s", path, why,
                not_elf ? "; to run a script, give its interpreter: hvsubmit -np N -- python3 "
                        : "",
                not_elf ? path : "");
        return HV_EINVAL;
    }
    return HV_OK;
}

hv_err hv_cli_check_file(const char *path, char *err, size_t errlen) {
    struct stat st;
    hv_err rc = cli_stat_regular("--file ", path, &st, err, errlen);
    if (rc != HV_OK) {
        return rc;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        hv_errf(err, errlen, "--file %s: cannot read it: %s", path, strerror(errno));
        return HV_EPERM;
    }
    close(fd);
    return HV_OK;
}

/* 0 when s is UTF-8 text; else 1 and a message: what (the flag or file, in the user's terms),
 * the value shown with its bad bytes escaped, and where the first one is. */
static int cli_not_text(const char *what, const char *s, char *err, size_t errlen) {
    long at = hv_utf8_bad_at(s);
    if (at < 0) {
        return 0;
    }
    char shown[200];
    hv_errf(err, errlen,
            "%s '%s' is not UTF-8 text (byte 0x%02x at offset %ld): the head takes text only in "
            "UTF-8 (give the bytes another way: a --file)",
            what, hv_cli_clean(s, 0, shown, sizeof(shown)), (unsigned)(unsigned char)s[at], at);
    return 1;
}

/* Every string hvsubmit sends is UTF-8 text (the head refuses any other: common/utf8.h). */
static hv_err cli_submit_check_text(const hv_cli_submit_opts_t *o, char *err, size_t errlen) {
    char what[300];
    if (cli_not_text("--name", o->name, err, errlen) ||
        cli_not_text("--namespace", o->ns, err, errlen) ||
        cli_not_text(o->command ? "the program" : "the program's file name",
                     o->command ? o->binary : hv_cli_basename(o->binary), err, errlen)) {
        return HV_EINVAL;
    }
    for (size_t i = 0; i < o->nenv; i++) {
        if (cli_not_text("--env: the name", o->env[i].key, err, errlen)) {
            return HV_EINVAL;
        }
        snprintf(what, sizeof(what), "--env %.100s: the value", o->env[i].key);
        if (cli_not_text(what, o->env[i].value, err, errlen)) {
            return HV_EINVAL;
        }
    }
    for (int i = 0; i < o->nargs; i++) {
        snprintf(what, sizeof(what), "argument %d of the program", i + 1);
        if (cli_not_text(what, o->args[i], err, errlen)) {
            return HV_EINVAL;
        }
    }
    for (size_t i = 0; i < o->nfiles; i++) {
        if (i >= o->nfiles - o->workdir_nfiles) {
            snprintf(what, sizeof(what), "--workdir %.200s: the file", o->workdir);
        } else {
            snprintf(what, sizeof(what), "the shipped file (--file or script)");
        }
        if (cli_not_text(what, hv_cli_ship_name(o, i), err, errlen)) {
            return HV_EINVAL;
        }
    }
    return HV_OK;
}

hv_err hv_cli_submit_check_files(const hv_cli_submit_opts_t *o, char *err, size_t errlen) {
    if (!o->command) {
        HV_TRY(hv_cli_check_binary(o->binary, err, errlen));
    }
    /* A command is not shipped: no file of the job clashes with its name. */
    const char *bin_base = o->command ? "" : hv_cli_basename(o->binary);
    for (size_t i = 0; i < o->nfiles; i++) {
        HV_TRY(hv_cli_check_file(o->files[i], err, errlen));
        const char *base = hv_cli_ship_name(o, i);
        if (strcmp(base, bin_base) == 0) {
            hv_errf(err, errlen,
                    "--file %s has the same name as the program %s ('%s'): both would land in "
                    "the worker's directory",
                    o->files[i], o->binary, base);
            return HV_EINVAL;
        }
        for (size_t k = 0; k < i; k++) {
            if (strcmp(base, hv_cli_ship_name(o, k)) == 0) {
                hv_errf(err, errlen,
                        "--file %s and --file %s have the same name '%s': both would land in "
                        "the worker's directory",
                        o->files[k], o->files[i], base);
                return HV_EINVAL;
            }
        }
    }
    return cli_submit_check_text(o, err, errlen);
}

/* The value of node label key in info, or NULL. */
static const char *cli_label(const Hvpb__V1__NodeInfo *info, const char *key) {
    for (size_t i = 0; info != NULL && i < info->n_labels; i++) {
        if (info->labels[i]->key != NULL && strcmp(info->labels[i]->key, key) == 0) {
            return info->labels[i]->value != NULL ? info->labels[i]->value : "";
        }
    }
    return NULL;
}

/* Whether the space-separated list holds word. */
static int cli_has_word(const char *list, const char *word) {
    size_t wl = strlen(word);
    while (*list != '\0') {
        size_t n = strcspn(list, " ");
        if (n == wl && strncmp(list, word, n) == 0) {
            return 1;
        }
        list += n;
        list += strspn(list, " ");
    }
    return 0;
}

int hv_cli_interp_missing(const char *prog, Hvpb__V1__NodeView *const *nodes, size_t n, char *msg,
                          size_t len) {
    if (strchr(prog, '/') != NULL || strncmp(prog, "python", 6) != 0 ||
        strspn(prog + 6, "0123456789.") != strlen(prog + 6)) {
        return 0;
    }
    size_t alive = 0;
    for (size_t i = 0; i < n; i++) {
        if (hv_cli_node_state(nodes[i]) != HVPB__V1__NODE_STATE__NODE_STATE_ALIVE) {
            continue;
        }
        const char *have = cli_label(nodes[i]->info, "hv.python");
        if (have == NULL || cli_has_word(have, prog)) {
            return 0; /* not known, or it has it */
        }
        alive++;
    }
    if (alive == 0) {
        return 0;
    }
    size_t used = (size_t)snprintf(msg, len, "no node has '%s' on its PATH (", prog);
    size_t listed = 0;
    for (size_t i = 0; i < n && used < len; i++) {
        if (hv_cli_node_state(nodes[i]) != HVPB__V1__NODE_STATE__NODE_STATE_ALIVE) {
            continue;
        }
        if (listed == 8) {
            used += (size_t)snprintf(msg + used, len - used, "; %zu more", alive - listed);
            break;
        }
        const char *name =
            nodes[i]->info != NULL && nodes[i]->info->name != NULL ? nodes[i]->info->name : "?";
        used += (size_t)snprintf(msg + used, len - used, "%s%s: %s", listed ? "; " : "", name,
                                 cli_label(nodes[i]->info, "hv.python"));
        listed++;
    }
    if (used < len) {
        snprintf(msg + used, len - used,
                 "): install it there, or run an interpreter the nodes have");
    }
    return 1;
}

int hv_cli_is_node_command(const char *prog) {
    const char *base = hv_cli_basename(prog);
    if (strncmp(base, "python", 6) == 0 && strspn(base + 6, "0123456789.") == strlen(base + 6)) {
        return 1;
    }
    struct stat st;
    if (strchr(prog, '/') != NULL || prog[0] == '\0' || stat(prog, &st) == 0) {
        return 0;
    }
    /* A bare name that is no file here: a command when this machine has it on its PATH (the
     * nodes are expected to have it too); else a typo, reported as a missing file. */
    const char *path = getenv("PATH");
    while (path != NULL && *path != '\0') {
        size_t n = strcspn(path, ":");
        char full[4096];
        if (n > 0 &&
            snprintf(full, sizeof(full), "%.*s/%s", (int)n, path, prog) < (int)sizeof(full)) {
            if (stat(full, &st) == 0 && S_ISREG(st.st_mode) && access(full, X_OK) == 0) {
                return 1;
            }
        }
        path += n;
        path += *path == ':';
    }
    return 0;
}

/* Takes ownership of p (a path made here): it lives as long as o. */
static char *cli_own(hv_cli_submit_opts_t *o, char *p) {
    char **v = p != NULL ? hv_realloc(o->owned, (o->nowned + 1) * sizeof(*v)) : NULL;
    if (v == NULL) {
        hv_free(p);
        return NULL;
    }
    o->owned = v;
    o->owned[o->nowned++] = p;
    return p;
}

/* Adds path to the files shipped, under name (NULL: its base name). */
static hv_err cli_push_file(hv_cli_submit_opts_t *o, const char *path, const char *name, char *err,
                            size_t errlen) {
    const char **files = hv_realloc(o->files, (o->nfiles + 1) * sizeof(*files));
    if (files != NULL) {
        o->files = files;
    }
    const char **names =
        files != NULL ? hv_realloc(o->names, (o->nfiles + 1) * sizeof(*names)) : NULL;
    if (names == NULL) {
        hv_errf(err, errlen, "out of memory");
        return HV_ENOMEM;
    }
    o->names = names;
    while (o->nnames < o->nfiles) {
        o->names[o->nnames++] = NULL; /* --file entries: their base names */
    }
    o->names[o->nnames++] = name;
    o->files[o->nfiles++] = path;
    return HV_OK;
}

const char *hv_cli_ship_name(const hv_cli_submit_opts_t *o, size_t i) {
    return i < o->nnames && o->names[i] != NULL ? o->names[i] : hv_cli_basename(o->files[i]);
}

/* The glob patterns of DIR/.hvignore, one a line ('#' starts a comment line, blanks around a
 * pattern are dropped); at most 64 of at most 255 bytes. */
typedef struct cli_ignore_s {
    char pat[64][256];
    size_t n;
} cli_ignore_t;

static void cli_ignore_load(const char *dir, cli_ignore_t *ig) {
    ig->n = 0;
    char path[4096];
    snprintf(path, sizeof(path), "%s/.hvignore", dir);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return;
    }
    char line[512];
    while (ig->n < 64 && fgets(line, sizeof(line), f) != NULL) {
        char *p = line;
        while (*p == ' ' || *p == '\t') {
            p++;
        }
        size_t n = strcspn(p, "\r\n");
        while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '/')) {
            n--;
        }
        if (n == 0 || p[0] == '#' || n >= sizeof(ig->pat[0])) {
            continue;
        }
        memcpy(ig->pat[ig->n], p, n);
        ig->pat[ig->n++][n] = '\0';
    }
    fclose(f);
}

/* 1 when a --workdir entry is left out: hidden, Python's caches, or a .hvignore pattern that
 * matches its name or its path below DIR (rel: "sub/data.bin"; '*' does not cross a '/'). */
static int cli_ignored(const char *name, const char *rel, const cli_ignore_t *ig) {
    if (name[0] == '.' || strcmp(name, "__pycache__") == 0 || fnmatch("*.pyc", name, 0) == 0) {
        return 1;
    }
    for (size_t i = 0; i < ig->n; i++) {
        if (fnmatch(ig->pat[i], name, 0) == 0 || fnmatch(ig->pat[i], rel, FNM_PATHNAME) == 0) {
            return 1;
        }
    }
    return 0;
}

/* 1 when path is the same file as one the job already ships (--workdir . with the script in it). */
static int cli_already_shipped(const hv_cli_submit_opts_t *o, const struct stat *st) {
    for (size_t i = 0; i < o->nfiles; i++) {
        struct stat s2;
        if (stat(o->files[i], &s2) == 0 && s2.st_dev == st->st_dev && s2.st_ino == st->st_ino) {
            return 1;
        }
    }
    return 0;
}

/* What one --workdir scan carries down its subdirectories. */
typedef struct cli_scan_s {
    const char *root; /* --workdir DIR */
    cli_ignore_t ig;
    uint64_t bytes;
} cli_scan_t;

static hv_err cli_scan_entry(hv_cli_submit_opts_t *o, cli_scan_t *sc, const char *rel,
                             unsigned depth, char *err, size_t errlen);

/* Adds the files of the directory rel below --workdir ("" for DIR itself), depth levels down. */
static hv_err cli_scan_dir(hv_cli_submit_opts_t *o, cli_scan_t *sc, const char *rel, unsigned depth,
                           char *err, size_t errlen) {
    char path[HV_CLI_WORKDIR_MAX_PATH + 4096];
    int pn = snprintf(path, sizeof(path), "%s%s%s", sc->root, rel[0] ? "/" : "", rel);
    if (pn < 0 || (size_t)pn >= sizeof(path)) {
        hv_errf(err, errlen, "--workdir %s: the path of %s is too long", sc->root, rel);
        return HV_EINVAL;
    }
    DIR *d = opendir(path);
    if (d == NULL) {
        int e = errno;
        hv_errf(err, errlen, "--workdir %s: %s", path,
                e == ENOENT ? "no such directory" : strerror(e));
        return e == ENOENT || e == ENOTDIR ? HV_ENOTFOUND : HV_EPERM;
    }
    hv_err rc = HV_OK;
    struct dirent *de;
    while (rc == HV_OK && (de = readdir(d)) != NULL) {
        char sub[HV_CLI_WORKDIR_MAX_PATH + 2];
        int n = snprintf(sub, sizeof(sub), "%s%s%s", rel, rel[0] ? "/" : "", de->d_name);
        if (cli_ignored(de->d_name, n >= 0 && (size_t)n < sizeof(sub) ? sub : de->d_name,
                        &sc->ig)) {
            continue;
        }
        if (n < 0 || (size_t)n > HV_CLI_WORKDIR_MAX_PATH) {
            hv_errf(err, errlen,
                    "--workdir %s: %s/%s: a path longer than %u bytes; leave it out with a glob "
                    "pattern in %s/.hvignore",
                    sc->root, rel, de->d_name, HV_CLI_WORKDIR_MAX_PATH, sc->root);
            rc = HV_EINVAL;
            break;
        }
        rc = cli_scan_entry(o, sc, sub, depth, err, errlen);
    }
    closedir(d);
    return rc;
}

/* Adds the entry rel below --workdir: a regular file (a link to one too), or a directory's
 * files; a link to a directory is not followed (noted in workdir_skipped). */
static hv_err cli_scan_entry(hv_cli_submit_opts_t *o, cli_scan_t *sc, const char *rel,
                             unsigned depth, char *err, size_t errlen) {
    size_t n = strlen(sc->root) + strlen(rel) + 2;
    char *path = hv_malloc(n);
    if (path == NULL) {
        hv_errf(err, errlen, "out of memory");
        return HV_ENOMEM;
    }
    snprintf(path, n, "%s/%s", sc->root, rel);
    struct stat lst, st;
    int found = lstat(path, &lst) == 0 && stat(path, &st) == 0;
    if (found && S_ISDIR(st.st_mode)) {
        hv_err rc = HV_OK;
        if (S_ISLNK(lst.st_mode)) {
            if (o->workdir_skipped++ == 0) {
                /* a note: cut to the field (255 bytes) when longer */
                snprintf(o->workdir_first_skipped, sizeof(o->workdir_first_skipped), "%.255s", rel);
            }
        } else if (depth + 1 >= HV_CLI_WORKDIR_MAX_DEPTH) {
            hv_errf(err, errlen,
                    "--workdir %s: %s is more than %u directories deep; leave it out with a "
                    "glob pattern in %s/.hvignore",
                    sc->root, rel, HV_CLI_WORKDIR_MAX_DEPTH - 1, sc->root);
            rc = HV_EINVAL;
        } else {
            rc = cli_scan_dir(o, sc, rel, depth + 1, err, errlen);
        }
        hv_free(path);
        return rc;
    }
    if (!found || !S_ISREG(st.st_mode) || cli_already_shipped(o, &st)) {
        hv_free(path);
        return HV_OK;
    }
    sc->bytes += (uint64_t)st.st_size;
    if (++o->workdir_nfiles > HV_CLI_WORKDIR_MAX_FILES) {
        hv_errf(err, errlen,
                "--workdir %s: more than %u files; leave some out with glob patterns in "
                "%s/.hvignore",
                sc->root, HV_CLI_WORKDIR_MAX_FILES, sc->root);
        hv_free(path);
        return HV_EINVAL;
    }
    if (sc->bytes > HV_CLI_WORKDIR_MAX_BYTES) {
        hv_errf(err, errlen,
                "--workdir %s: more than %llu MiB of files; leave some out with glob "
                "patterns in %s/.hvignore, or ship big data another way",
                sc->root, (unsigned long long)(HV_CLI_WORKDIR_MAX_BYTES >> 20), sc->root);
        hv_free(path);
        return HV_EINVAL;
    }
    if (cli_own(o, path) == NULL) {
        hv_errf(err, errlen, "out of memory");
        return HV_ENOMEM;
    }
    /* The shipped name is the path below DIR: it lands at the same place in the worker's
     * directory. It points into path (owned above), past "DIR/". */
    return cli_push_file(o, path, path + strlen(sc->root) + 1, err, errlen);
}

/* Adds the files of --workdir and of its subdirectories (see hv_cli_submit_prepare). */
static hv_err cli_scan_workdir(hv_cli_submit_opts_t *o, char *err, size_t errlen) {
    cli_scan_t *sc = hv_malloc(sizeof(*sc));
    if (sc == NULL) {
        hv_errf(err, errlen, "out of memory");
        return HV_ENOMEM;
    }
    sc->root = o->workdir;
    sc->bytes = 0;
    cli_ignore_load(o->workdir, &sc->ig);
    hv_err rc = cli_scan_dir(o, sc, "", 0, err, errlen);
    hv_free(sc);
    return rc;
}

hv_err hv_cli_submit_prepare(hv_cli_submit_opts_t *o, char *err, size_t errlen) {
    o->command = hv_cli_is_node_command(o->binary);
    if (o->command) {
        for (int i = 0; i < o->nargs; i++) {
            if (o->args[i][0] == '-') {
                continue;
            }
            struct stat st;
            if (stat(o->args[i], &st) == 0 && S_ISREG(st.st_mode)) {
                HV_TRY(cli_push_file(o, o->args[i], NULL, err, errlen));
                o->args[i] = (char *)hv_cli_basename(o->args[i]);
                o->script = o->args[i];
            }
            break;
        }
    }
    if (o->workdir != NULL) {
        HV_TRY(cli_scan_workdir(o, err, errlen));
    }
    return hv_cli_submit_check_files(o, err, errlen);
}

/* ---- states as codes ------------------------------------------------------------------------ */

/* Words of the codes, indexed by value (0: UNSPECIFIED). */
static const char *const cli_job_words[] = {"",          "pending", "placing",  "running",
                                            "succeeded", "failed",  "cancelled"};
static const char *const cli_worker_words[] = {"",       "starting", "running", "exited",
                                               "killed", "lost",     "left"};
static const char *const cli_node_words[] = {"", "alive", "draining", "dead"};
static const char *const cli_round_words[] = {"", "", "open", "closed", "not formed"};
static const char *const cli_reason_words[] = {
    "",           "start",         "failure",         "data_plane", "drain",         "grow",
    "shrink",     "resume",        "succeeded",       "cancelled",  "worker_failed", "no_survivor",
    "max_resets", "round_timeout", "pending_timeout", "preempt"};

#define CLI_NWORDS(a) (sizeof(a) / sizeof((a)[0]))

/* The index of word in words[1..n-1], or 0. */
static int cli_word_code(const char *const *words, size_t n, const char *word) {
    for (size_t i = 1; word != NULL && i < n; i++) {
        if (words[i][0] != '\0' && strcmp(words[i], word) == 0) {
            return (int)i;
        }
    }
    return 0;
}

Hvpb__V1__JobState hv_cli_job_state(const Hvpb__V1__JobView *v) {
    if (v->state_code != HVPB__V1__JOB_STATE__JOB_STATE_UNSPECIFIED) {
        return v->state_code;
    }
    return (Hvpb__V1__JobState)cli_word_code(cli_job_words, CLI_NWORDS(cli_job_words), v->state);
}

Hvpb__V1__WorkerState hv_cli_worker_state(const Hvpb__V1__WorkerView *w) {
    if (w->state_code != HVPB__V1__WORKER_STATE__WORKER_STATE_UNSPECIFIED) {
        return w->state_code;
    }
    if (w->state != NULL && strcmp(w->state, "pending") == 0) {
        return HVPB__V1__WORKER_STATE__WORKER_STATE_STARTING;
    }
    return (Hvpb__V1__WorkerState)cli_word_code(cli_worker_words, CLI_NWORDS(cli_worker_words),
                                                w->state);
}

Hvpb__V1__NodeState hv_cli_node_state(const Hvpb__V1__NodeView *n) {
    if (n->state_code != HVPB__V1__NODE_STATE__NODE_STATE_UNSPECIFIED) {
        return n->state_code;
    }
    return (Hvpb__V1__NodeState)cli_word_code(cli_node_words, CLI_NWORDS(cli_node_words), n->state);
}

Hvpb__V1__RoundState hv_cli_round_state(const Hvpb__V1__JobView *v) {
    if (v->round_state_code != HVPB__V1__ROUND_STATE__ROUND_STATE_UNSPECIFIED) {
        return v->round_state_code;
    }
    if (v->generation == 0) {
        return HVPB__V1__ROUND_STATE__ROUND_STATE_NONE;
    }
    return (Hvpb__V1__RoundState)cli_word_code(cli_round_words, CLI_NWORDS(cli_round_words),
                                               v->round_state);
}

/* words[v], "unknown" for 0 or past the end. */
static const char *cli_code_word(const char *const *words, size_t n, int v) {
    return v > 0 && (size_t)v < n ? words[v] : "unknown";
}

const char *hv_cli_job_state_name(Hvpb__V1__JobState s) {
    return cli_code_word(cli_job_words, CLI_NWORDS(cli_job_words), (int)s);
}

const char *hv_cli_worker_state_name(Hvpb__V1__WorkerState s) {
    return cli_code_word(cli_worker_words, CLI_NWORDS(cli_worker_words), (int)s);
}

const char *hv_cli_node_state_name(Hvpb__V1__NodeState s) {
    return cli_code_word(cli_node_words, CLI_NWORDS(cli_node_words), (int)s);
}

const char *hv_cli_round_state_name(Hvpb__V1__RoundState s) {
    return s == HVPB__V1__ROUND_STATE__ROUND_STATE_NONE
               ? ""
               : cli_code_word(cli_round_words, CLI_NWORDS(cli_round_words), (int)s);
}

const char *hv_cli_reason_name(Hvpb__V1__EventReason r) {
    return (int)r > 0 && (size_t)r < CLI_NWORDS(cli_reason_words) ? cli_reason_words[r] : "";
}

int hv_cli_job_state_final(Hvpb__V1__JobState s) {
    return s == HVPB__V1__JOB_STATE__JOB_STATE_SUCCEEDED ||
           s == HVPB__V1__JOB_STATE__JOB_STATE_FAILED ||
           s == HVPB__V1__JOB_STATE__JOB_STATE_CANCELLED;
}

/* ---- job outcome ---------------------------------------------------------------------------- */

int hv_cli_worker_failed(const Hvpb__V1__WorkerView *w) {
    return w->exit_code != 0 || w->term_signal != 0;
}

/* Orders candidate culprits: a worker that failed on its own comes before one the head killed
 * (those are usually the consequence of the first failure), then lower rank, then lower attempt.
 * Returns non-zero when a should be preferred over b. */
static int cli_worker_before(const Hvpb__V1__WorkerView *a, const Hvpb__V1__WorkerView *b) {
    int a_killed = hv_cli_worker_state(a) == HVPB__V1__WORKER_STATE__WORKER_STATE_KILLED;
    int b_killed = hv_cli_worker_state(b) == HVPB__V1__WORKER_STATE__WORKER_STATE_KILLED;
    if (a_killed != b_killed) {
        return !a_killed;
    }
    if (a->rank != b->rank) {
        return a->rank < b->rank;
    }
    return a->attempt < b->attempt;
}

int hv_cli_job_exit_status(const Hvpb__V1__JobView *v, int we_cancelled,
                           const Hvpb__V1__WorkerView **first_out) {
    const Hvpb__V1__WorkerView *first = NULL;
    /* An elastic job survives failures: only a failure among the members of its last formed
     * round can be why it ended (earlier failures were survived; workers the head stopped or
     * drained are consequences). */
    uint32_t last = v->generation;
    Hvpb__V1__RoundState rs = hv_cli_round_state(v);
    if (v->elastic && last > 0 &&
        (rs == HVPB__V1__ROUND_STATE__ROUND_STATE_OPEN ||
         rs == HVPB__V1__ROUND_STATE__ROUND_STATE_NOT_FORMED)) {
        last--;
    }
    for (size_t i = 0; i < v->n_workers; i++) {
        const Hvpb__V1__WorkerView *w = v->workers[i];
        if (w == NULL || !hv_cli_worker_failed(w)) {
            continue;
        }
        Hvpb__V1__WorkerState ws = hv_cli_worker_state(w);
        if (v->elastic &&
            (w->generation != last || ws == HVPB__V1__WORKER_STATE__WORKER_STATE_KILLED ||
             ws == HVPB__V1__WORKER_STATE__WORKER_STATE_LEFT)) {
            continue;
        }
        if (first == NULL || cli_worker_before(w, first)) {
            first = w;
        }
    }
    if (first_out != NULL) {
        *first_out = first;
    }
    Hvpb__V1__JobState st = hv_cli_job_state(v);
    if (st == HVPB__V1__JOB_STATE__JOB_STATE_SUCCEEDED) {
        return HV_CLI_EXIT_OK;
    }
    if (st == HVPB__V1__JOB_STATE__JOB_STATE_CANCELLED) {
        return we_cancelled ? HV_CLI_EXIT_SIGINT : HV_CLI_EXIT_FAIL;
    }
    if (st != HVPB__V1__JOB_STATE__JOB_STATE_FAILED || first == NULL) {
        return HV_CLI_EXIT_FAIL;
    }
    if (first->term_signal > 0 && first->term_signal < 128) {
        return 128 + first->term_signal;
    }
    if (first->exit_code >= 1 && first->exit_code <= 255) {
        return first->exit_code;
    }
    return HV_CLI_EXIT_FAIL;
}

const char *hv_cli_worker_outcome(const Hvpb__V1__WorkerView *w, char *buf, size_t len) {
    char where[300];
    if (w->node[0] != '\0') {
        snprintf(where, sizeof(where), "rank %u on node %s", (unsigned)w->rank, w->node);
    } else {
        snprintf(where, sizeof(where), "rank %u", (unsigned)w->rank);
    }
    char sig[32];
    int n;
    if (w->term_signal != 0) {
        n = snprintf(buf, len, "%s was killed by signal %s", where,
                     hv_cli_signame(w->term_signal, sig, sizeof(sig)));
    } else if (w->exit_code > 0) {
        n = snprintf(buf, len, "%s exited with status %d", where, (int)w->exit_code);
    } else if (hv_cli_worker_state(w) == HVPB__V1__WORKER_STATE__WORKER_STATE_LOST) {
        n = snprintf(buf, len, "%s was lost", where);
    } else {
        n = snprintf(buf, len, "%s did not exit normally (%s)", where,
                     hv_cli_worker_state_name(hv_cli_worker_state(w)));
    }
    if (w->reason[0] != '\0' && n >= 0 && (size_t)n < len) {
        snprintf(buf + n, len - (size_t)n, " (%s)", w->reason);
    }
    return buf;
}

const char *hv_cli_elastic_summary(const Hvpb__V1__JobView *v, char *buf, size_t len) {
    if (hv_cli_round_state(v) == HVPB__V1__ROUND_STATE__ROUND_STATE_NOT_FORMED &&
        v->generation > 1) {
        snprintf(buf, len, "generation %u did not form; generation %u had %u worker%s; %u reset%s",
                 (unsigned)v->generation, (unsigned)v->generation - 1, (unsigned)v->size,
                 v->size == 1 ? "" : "s", (unsigned)v->resets, v->resets == 1 ? "" : "s");
        return buf;
    }
    snprintf(buf, len, "generation %u, %u worker%s, %u reset%s", (unsigned)v->generation,
             (unsigned)v->size, v->size == 1 ? "" : "s", (unsigned)v->resets,
             v->resets == 1 ? "" : "s");
    return buf;
}

const char *hv_cli_fmt_round(const Hvpb__V1__JobView *v, char *buf, size_t len) {
    Hvpb__V1__RoundState rs = hv_cli_round_state(v);
    /* UNSPECIFIED: a round state this client does not know, or none from an older head. */
    const char *st =
        rs == HVPB__V1__ROUND_STATE__ROUND_STATE_UNSPECIFIED ? "" : hv_cli_round_state_name(rs);
    const char *why = v->round_reason != NULL ? v->round_reason : "";
    if (st[0] == '\0' && why[0] == '\0') {
        snprintf(buf, len, "-");
    } else if (why[0] == '\0') {
        snprintf(buf, len, "%s", st);
    } else {
        snprintf(buf, len, "%s (opened for: %s)", st[0] ? st : "-", why);
    }
    return buf;
}

const char *hv_cli_fmt_blacklist(Hvpb__V1__BlacklistEntry *const *e, size_t n, uint64_t now_ms,
                                 char *buf, size_t len) {
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && used + 1 < len; i++) {
        const Hvpb__V1__BlacklistEntry *b = e[i];
        if (b == NULL) {
            continue;
        }
        const char *sep = used > 0 ? "; " : "";
        unsigned strikes = (unsigned)b->strikes;
        int w;
        if (b->permanent) {
            w = snprintf(buf + used, len - used, "%sjob %llu: permanent (%u strike%s)", sep,
                         (unsigned long long)b->job_id, strikes, strikes == 1 ? "" : "s");
        } else if (b->until_ms > now_ms) {
            char left[32];
            w = snprintf(buf + used, len - used, "%sjob %llu: %u strike%s, %s left", sep,
                         (unsigned long long)b->job_id, strikes, strikes == 1 ? "" : "s",
                         hv_cli_fmt_duration(b->until_ms - now_ms + 999, left, sizeof(left)));
        } else {
            w = snprintf(buf + used, len - used, "%sjob %llu: %u strike%s, cooldown over", sep,
                         (unsigned long long)b->job_id, strikes, strikes == 1 ? "" : "s");
        }
        if (w < 0) {
            break;
        }
        used += (size_t)w < len - used ? (size_t)w : len - used - 1;
    }
    if (buf[0] == '\0') {
        snprintf(buf, len, "-");
    }
    return buf;
}

const char *hv_cli_fmt_progress(const char *name, uint64_t done, uint64_t total, int bar_width,
                                char *buf, size_t len) {
    if (done > total) {
        done = total;
    }
    unsigned pct = total == 0 ? 100u : (unsigned)((done * 100u) / total);
    char d[32], t[32];
    hv_fmt_size(done, d, sizeof(d));
    hv_fmt_size(total, t, sizeof(t));
    if (bar_width <= 0) {
        snprintf(buf, len, "uploading %s: %u%% (%s of %s)", name, pct, d, t);
        return buf;
    }
    char bar[128];
    int w = bar_width < (int)sizeof(bar) - 1 ? bar_width : (int)sizeof(bar) - 1;
    int fill = total == 0 ? w : (int)((done * (uint64_t)w) / total);
    for (int i = 0; i < w; i++) {
        bar[i] = i < fill ? '#' : '.';
    }
    bar[w] = '\0';
    snprintf(buf, len, "%s [%s] %3u%%  %s of %s", name, bar, pct, d, t);
    return buf;
}

const char *hv_cli_fmt_pending(uint32_t np, Hvpb__V1__NodeView *const *nodes, size_t n, char *buf,
                               size_t len) {
    uint64_t free = 0, slots = 0;
    unsigned alive = 0, draining = 0, dead = 0;
    for (size_t i = 0; i < n; i++) {
        const Hvpb__V1__NodeView *v = nodes[i];
        if (v == NULL) {
            continue;
        }
        uint32_t s = v->info != NULL ? v->info->slots : 0;
        Hvpb__V1__NodeState ns = hv_cli_node_state(v);
        if (ns == HVPB__V1__NODE_STATE__NODE_STATE_ALIVE) {
            alive++;
            slots += s;
            free += s > v->slots_used ? s - v->slots_used : 0;
        } else if (ns == HVPB__V1__NODE_STATE__NODE_STATE_DRAINING) {
            draining++;
        } else {
            dead++;
        }
    }
    snprintf(buf, len,
             "waiting for %u free slot%s: %llu of %llu free now (%u node%s alive, %u draining, "
             "%u dead)",
             (unsigned)np, np == 1 ? "" : "s", (unsigned long long)free, (unsigned long long)slots,
             alive, alive == 1 ? "" : "s", draining, dead);
    return buf;
}

hv_err hv_cli_check_node(const char *node, char *err, size_t errlen) {
    size_t n = strlen(node);
    int ok = n > 0 && n <= 128;
    for (const char *p = node; ok && *p; p++) {
        char c = *p;
        ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '.' || c == '_' || c == '-';
    }
    if (!ok) {
        hv_errf(err, errlen,
                "bad node '%.140s': expected a node name (as 'hvctl nodes' lists it) or its "
                "numeric id",
                node);
        return HV_EINVAL;
    }
    return HV_OK;
}

/* Events named with any of these words report a worker failure. */
static const char *const cli_failure_words[] = {"fail", "exit", "lost", "kill", "dead", "signal"};

int hv_cli_event_shown(const char *kind, int elastic) {
    if (strcmp(kind, "job.state") == 0 || strcmp(kind, "job.note") == 0 ||
        strncmp(kind, "job.reset", 9) == 0 || strncmp(kind, "job.resize", 10) == 0 ||
        strcmp(kind, "fleet.preempt") == 0 || strcmp(kind, "fleet.resume") == 0) {
        return 1;
    }
    if (elastic && (strncmp(kind, "round.", 6) == 0 || strcmp(kind, "worker.left") == 0)) {
        return 1;
    }
    if (strncmp(kind, "worker.", 7) == 0) {
        for (size_t i = 0; i < sizeof(cli_failure_words) / sizeof(cli_failure_words[0]); i++) {
            if (strstr(kind + 7, cli_failure_words[i]) != NULL) {
                return 1;
            }
        }
    }
    return 0;
}

/* ---- human formats -------------------------------------------------------------------------- */

static const char *const cli_signames[] = {
    NULL,        "SIGHUP",  "SIGINT",    "SIGQUIT", "SIGILL",   "SIGTRAP", "SIGABRT", "SIGBUS",
    "SIGFPE",    "SIGKILL", "SIGUSR1",   "SIGSEGV", "SIGUSR2",  "SIGPIPE", "SIGALRM", "SIGTERM",
    "SIGSTKFLT", "SIGCHLD", "SIGCONT",   "SIGSTOP", "SIGTSTP",  "SIGTTIN", "SIGTTOU", "SIGURG",
    "SIGXCPU",   "SIGXFSZ", "SIGVTALRM", "SIGPROF", "SIGWINCH", "SIGIO",   "SIGPWR",  "SIGSYS",
};

const char *hv_cli_signame(int sig, char *buf, size_t len) {
    if (sig > 0 && (size_t)sig < sizeof(cli_signames) / sizeof(cli_signames[0])) {
        return cli_signames[sig];
    }
    snprintf(buf, len, "signal %d", sig);
    return buf;
}

const char *hv_cli_fmt_duration(uint64_t ms, char *buf, size_t len) {
    uint64_t s = ms / 1000;
    if (s < 60) {
        snprintf(buf, len, "%llus", (unsigned long long)s);
    } else if (s < 3600) {
        snprintf(buf, len, "%llum%02llus", (unsigned long long)(s / 60),
                 (unsigned long long)(s % 60));
    } else if (s < 86400) {
        snprintf(buf, len, "%lluh%02llum", (unsigned long long)(s / 3600),
                 (unsigned long long)(s % 3600 / 60));
    } else {
        snprintf(buf, len, "%llud%02lluh", (unsigned long long)(s / 86400),
                 (unsigned long long)(s % 86400 / 3600));
    }
    return buf;
}

const char *hv_cli_fmt_ago(uint64_t then_ms, uint64_t now_ms, char *buf, size_t len) {
    if (then_ms == 0) {
        snprintf(buf, len, "-");
        return buf;
    }
    if (then_ms > now_ms || now_ms - then_ms < 1000) {
        snprintf(buf, len, "now");
        return buf;
    }
    uint64_t s = (now_ms - then_ms) / 1000;
    if (s < 60) {
        snprintf(buf, len, "%llus ago", (unsigned long long)s);
    } else if (s < 3600) {
        snprintf(buf, len, "%llum ago", (unsigned long long)(s / 60));
    } else if (s < 86400) {
        snprintf(buf, len, "%lluh ago", (unsigned long long)(s / 3600));
    } else {
        snprintf(buf, len, "%llud ago", (unsigned long long)(s / 86400));
    }
    return buf;
}

/* ---- text from elsewhere on a terminal ----------------------------------------------------- */

/* One step of hv_cli_clean at p (not at the end): the piece to write into out (at most 8 bytes
 * with its '\0'), its length in *nout; returns how many bytes of p it stands for. */
static size_t clean_step(const unsigned char *p, unsigned flags, char out[9], size_t *nout) {
    static const char hex[] = "0123456789abcdef";
    unsigned c = p[0];
    if (c >= 0x20 && c < 0x7f) {
        out[0] = (char)c;
        *nout = 1;
        return 1;
    }
    if (c == '\t' && (flags & HV_CLI_CLEAN_TAB)) {
        out[0] = '\t';
        *nout = 1;
        return 1;
    }
    if (c == '\n' || c == '\r' || c == '\t') {
        out[0] = '\\';
        out[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
        *nout = 2;
        return 1;
    }
    size_t n = c >= 0x80 ? hv_utf8_len((const char *)p) : 0;
    /* U+0080..U+009F, the C1 controls, are C2 80..C2 9F: shown byte by byte like bad bytes. */
    if (n > 0 && !(c == 0xc2 && p[1] < 0xa0)) {
        memcpy(out, p, n);
        *nout = n;
        return n;
    }
    size_t k = c == 0xc2 && n == 2 ? 2 : 1;
    for (size_t i = 0; i < k; i++) {
        out[4 * i] = '\\';
        out[4 * i + 1] = 'x';
        out[4 * i + 2] = hex[p[i] >> 4];
        out[4 * i + 3] = hex[p[i] & 0xf];
    }
    *nout = 4 * k;
    return k;
}

const char *hv_cli_clean(const char *s, unsigned flags, char *buf, size_t len) {
    if (len == 0) {
        return buf;
    }
    size_t used = 0;
    const unsigned char *p = (const unsigned char *)(s != NULL ? s : "");
    while (*p != '\0') {
        char piece[9];
        size_t n = 0;
        size_t eaten = clean_step(p, flags, piece, &n);
        if (used + n >= len) {
            break; /* cut before a piece that does not fit whole */
        }
        memcpy(buf + used, piece, n);
        used += n;
        p += eaten;
    }
    buf[used] = '\0';
    return buf;
}

void hv_cli_clean_write(FILE *f, const char *s, unsigned flags) {
    const unsigned char *p = (const unsigned char *)(s != NULL ? s : "");
    while (*p != '\0') {
        /* Runs of plain text go out in one write. */
        size_t run = 0;
        while (p[run] >= 0x20 && p[run] < 0x7f) {
            run++;
        }
        if (run > 0) {
            fwrite(p, 1, run, f);
            p += run;
            continue;
        }
        char piece[9];
        size_t n = 0;
        p += clean_step(p, flags, piece, &n);
        fwrite(piece, 1, n, f);
    }
}

void hv_cli_say(FILE *f, const char *prog, const char *text) {
    fprintf(f, "%s: ", prog);
    hv_cli_clean_write(f, text, 0);
    fputc('\n', f);
}

int hv_cli_clean_needed(const char *s, unsigned flags) {
    const unsigned char *p = (const unsigned char *)(s != NULL ? s : "");
    while (*p != '\0') {
        char piece[9];
        size_t n = 0;
        size_t eaten = clean_step(p, flags, piece, &n);
        if (n != eaten || memcmp(piece, p, n) != 0) {
            return 1;
        }
        p += eaten;
    }
    return 0;
}

/* ---- tables --------------------------------------------------------------------------------- */

struct hv_cli_table_s {
    size_t ncols;
    char **cells;    /* owned: (rows + 1) * ncols strings, the header first */
    size_t rows;     /* data rows */
    size_t cap_rows; /* rows the cells array has room for, header included */
};

/* Copies a cell, with control characters made visible (hv_cli_clean) and an empty cell as "-". */
static char *table_copy_cell(const char *s) {
    if (s == NULL || s[0] == '\0') {
        return hv_strdup("-");
    }
    size_t len = strlen(s) * 4 + 1; /* the most an escape takes per byte: \xNN */
    char *c = hv_malloc(len);
    if (c == NULL) {
        return NULL;
    }
    return (char *)hv_cli_clean(s, 0, c, len);
}

/* Characters in a UTF-8 string: every byte that does not continue a sequence. */
static size_t table_width(const char *s) {
    size_t w = 0;
    for (; *s; s++) {
        if (((unsigned char)*s & 0xc0) != 0x80) {
            w++;
        }
    }
    return w;
}

static hv_err table_append(hv_cli_table_t *t, const char *const *cells, size_t row) {
    if (row >= t->cap_rows) {
        size_t cap = t->cap_rows ? t->cap_rows * 2 : 8;
        char **grown = hv_realloc(t->cells, cap * t->ncols * sizeof(char *));
        if (grown == NULL) {
            return HV_ENOMEM;
        }
        t->cells = grown;
        t->cap_rows = cap;
    }
    char **dst = t->cells + row * t->ncols;
    for (size_t c = 0; c < t->ncols; c++) {
        dst[c] = table_copy_cell(cells[c]);
        if (dst[c] == NULL) {
            for (size_t k = 0; k < c; k++) {
                hv_free(dst[k]);
            }
            return HV_ENOMEM;
        }
    }
    return HV_OK;
}

hv_err hv_cli_table_create(size_t ncols, const char *const *headers, hv_cli_table_t **out) {
    if (ncols == 0) {
        return HV_EINVAL;
    }
    hv_cli_table_t *t = hv_calloc(1, sizeof(*t));
    if (t == NULL) {
        return HV_ENOMEM;
    }
    t->ncols = ncols;
    hv_err rc = table_append(t, headers, 0);
    if (rc != HV_OK) {
        hv_free(t->cells);
        hv_free(t);
        return rc;
    }
    *out = t;
    return HV_OK;
}

void hv_cli_table_destroy(hv_cli_table_t *t) {
    if (t == NULL) {
        return;
    }
    for (size_t i = 0; i < (t->rows + 1) * t->ncols; i++) {
        hv_free(t->cells[i]);
    }
    hv_free(t->cells);
    hv_free(t);
}

hv_err hv_cli_table_add(hv_cli_table_t *t, const char *const *cells) {
    HV_TRY(table_append(t, cells, t->rows + 1));
    t->rows++;
    return HV_OK;
}

size_t hv_cli_table_rows(const hv_cli_table_t *t) { return t->rows; }

void hv_cli_table_print(const hv_cli_table_t *t, FILE *f) {
    size_t widths[64];
    size_t ncols = t->ncols < 64 ? t->ncols : 64;
    for (size_t c = 0; c < ncols; c++) {
        widths[c] = 0;
        for (size_t r = 0; r <= t->rows; r++) {
            size_t w = table_width(t->cells[r * t->ncols + c]);
            if (w > widths[c]) {
                widths[c] = w;
            }
        }
    }
    for (size_t r = 0; r <= t->rows; r++) {
        for (size_t c = 0; c < ncols; c++) {
            const char *cell = t->cells[r * t->ncols + c];
            fputs(cell, f);
            if (c + 1 < ncols) {
                for (size_t pad = table_width(cell); pad < widths[c] + 2; pad++) {
                    fputc(' ', f);
                }
            }
        }
        fputc('\n', f);
    }
}

/* ---- hvctl status ------------------------------------------------------------------------- */

void hv_cli_status_count(Hvpb__V1__NodeView *const *nodes, size_t nnodes,
                         Hvpb__V1__JobView *const *jobs, size_t njobs, hv_cli_status_t *out) {
    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < nnodes; i++) {
        const Hvpb__V1__NodeView *n = nodes[i];
        if (n == NULL) {
            continue;
        }
        uint32_t slots = n->info != NULL ? n->info->slots : 0;
        uint32_t used = n->slots_used < slots ? n->slots_used : slots;
        Hvpb__V1__NodeState ns = hv_cli_node_state(n);
        if (ns == HVPB__V1__NODE_STATE__NODE_STATE_ALIVE) {
            out->nodes_alive++;
            out->slots_alive += slots;
            out->slots_used += used;
            out->slots_free += slots - used;
            out->gpus += n->info != NULL ? n->info->gpus : 0;
        } else if (ns == HVPB__V1__NODE_STATE__NODE_STATE_DRAINING) {
            out->nodes_draining++;
            out->slots_draining += slots;
            out->slots_used += used;
            out->gpus += n->info != NULL ? n->info->gpus : 0;
        } else {
            out->nodes_dead++;
        }
    }
    out->jobs_counted = njobs;
    for (size_t i = 0; i < njobs; i++) {
        const Hvpb__V1__JobView *v = jobs[i];
        if (v == NULL) {
            continue;
        }
        Hvpb__V1__JobState js = hv_cli_job_state(v);
        if (js == HVPB__V1__JOB_STATE__JOB_STATE_PENDING) {
            out->jobs_pending++;
            out->demand_slots += v->np;
        } else if (js == HVPB__V1__JOB_STATE__JOB_STATE_PLACING) {
            out->jobs_placing++;
        } else if (js == HVPB__V1__JOB_STATE__JOB_STATE_RUNNING) {
            out->jobs_running++;
            if (v->elastic && v->max_np > v->size && v->size > 0) {
                out->grow_jobs++;
                out->grow_workers += v->max_np - v->size;
            }
        } else if (js == HVPB__V1__JOB_STATE__JOB_STATE_SUCCEEDED) {
            out->jobs_succeeded++;
        } else if (js == HVPB__V1__JOB_STATE__JOB_STATE_FAILED) {
            out->jobs_failed++;
        } else if (js == HVPB__V1__JOB_STATE__JOB_STATE_CANCELLED) {
            out->jobs_cancelled++;
        } else {
            out->jobs_other++;
        }
    }
}

void hv_cli_status_print(FILE *f, const char *cluster, const char *head, const hv_cli_status_t *s,
                         Hvpb__V1__JobView *const *jobs, size_t njobs, uint64_t now_ms) {
    if (cluster != NULL && cluster[0] != '\0') {
        char clean[600];
        fprintf(f, "cluster: %s at %s\n", hv_cli_clean(cluster, 0, clean, sizeof(clean)), head);
    } else {
        fprintf(f, "cluster: at %s\n", head);
    }
    fprintf(f, "nodes:   %u alive, %u draining, %u dead\n", s->nodes_alive, s->nodes_draining,
            s->nodes_dead);
    fprintf(f, "slots:   %llu used, %llu free (%llu on alive nodes",
            (unsigned long long)s->slots_used, (unsigned long long)s->slots_free,
            (unsigned long long)s->slots_alive);
    if (s->slots_draining > 0) {
        fprintf(f, ", %llu on draining nodes", (unsigned long long)s->slots_draining);
    }
    fprintf(f, ")");
    if (s->gpus > 0) {
        fprintf(f, ", %llu GPUs", (unsigned long long)s->gpus);
    }
    fprintf(f, "\n");
    fprintf(f, "jobs:    %u pending, %u placing, %u running, %u succeeded, %u failed, %u cancelled",
            s->jobs_pending, s->jobs_placing, s->jobs_running, s->jobs_succeeded, s->jobs_failed,
            s->jobs_cancelled);
    if (s->jobs_other > 0) {
        fprintf(f, ", %u other", s->jobs_other);
    }
    if (s->jobs_counted >= HV_CLI_STATUS_JOBS) {
        fprintf(f, " (of the newest %u jobs)", HV_CLI_STATUS_JOBS);
    }
    fprintf(f, "\n");
    if (s->jobs_pending == 0) {
        fprintf(f, "demand:  none pending");
    } else {
        fprintf(f, "demand:  %u job%s waiting for %llu slot%s (%llu free now)", s->jobs_pending,
                s->jobs_pending == 1 ? "" : "s", (unsigned long long)s->demand_slots,
                s->demand_slots == 1 ? "" : "s", (unsigned long long)s->slots_free);
    }
    if (s->grow_jobs > 0) {
        fprintf(f, "; %u elastic job%s could grow by %llu worker%s", s->grow_jobs,
                s->grow_jobs == 1 ? "" : "s", (unsigned long long)s->grow_workers,
                s->grow_workers == 1 ? "" : "s");
    }
    fprintf(f, "\n");
    /* The pending jobs, oldest first (the list comes newest first): the head serves them in
     * that order. */
    for (size_t k = njobs; k > 0; k--) {
        const Hvpb__V1__JobView *v = jobs[k - 1];
        if (v == NULL || hv_cli_job_state(v) != HVPB__V1__JOB_STATE__JOB_STATE_PENDING) {
            continue;
        }
        char ago[32], name[1100];
        fprintf(f, "  job %llu (%s) waits for %u slot%s, submitted %s\n",
                (unsigned long long)v->job_id, hv_cli_clean(v->name, 0, name, sizeof(name)),
                (unsigned)v->np, v->np == 1 ? "" : "s",
                hv_cli_fmt_ago(v->submitted_ms, now_ms, ago, sizeof(ago)));
    }
}

const char *const hv_cli_resize_cause_names[HV_CLI_RESIZE_CAUSES] = {
    "start", "grow", "admit", "priority", "reclaim", "share", "preempt", "other"};

int hv_cli_resize_cause(const char *kind, const char *data) {
    static const char *const shrunk[] = {"shrunk_admit", "shrunk_priority", "shrunk_reclaim",
                                         "shrunk_share", "preempted"};
    if (kind == NULL || strncmp(kind, "fleet.", 6) != 0) {
        return -1;
    }
    if (strcmp(kind, "fleet.admit") == 0) {
        return 0;
    }
    if (strcmp(kind, "fleet.grow") == 0) {
        return 1;
    }
    char reason[32] = "";
    if (data != NULL) {
        hv_cli_json_field_str(data, "reason", reason, sizeof(reason));
    }
    for (size_t i = 0; i < sizeof(shrunk) / sizeof(shrunk[0]); i++) {
        if (strcmp(reason, shrunk[i]) == 0) {
            return (int)i + 2;
        }
    }
    return HV_CLI_RESIZE_CAUSES - 1;
}

/* The row of out->ns that namespace name counts in (policy: the rows are the policy's, an unlisted
 * name counts in "default"); a new row, or NULL when the table is full (a policy row left out is
 * counted in ns_more by the caller). */
static hv_cli_fleet_ns_t *fleet_ns_of(hv_cli_fleet_t *out, const char *name, int policy) {
    const char *n = name != NULL && name[0] != '\0' ? name : "default";
    hv_cli_fleet_ns_t *def = NULL;
    for (size_t i = 0; i < out->nns; i++) {
        if (strcmp(out->ns[i].name, n) == 0) {
            return &out->ns[i];
        }
        def = strcmp(out->ns[i].name, "default") == 0 ? &out->ns[i] : def;
    }
    if (policy && def != NULL) {
        return def; /* not listed: the policy counts it in "default" */
    }
    if (out->nns >= HV_CLI_FLEET_NS) {
        return NULL;
    }
    hv_cli_fleet_ns_t *r = &out->ns[out->nns++];
    memset(r, 0, sizeof(*r));
    r->name = n;
    return r;
}

/* Element i of a NamespaceShare resource list (slots first), 0 when absent. */
static uint64_t fleet_res(const uint64_t *v, size_t n, size_t i) { return i < n ? v[i] : 0; }

void hv_cli_fleet_count(Hvpb__V1__JobView *const *jobs, size_t njobs,
                        Hvpb__V1__NamespaceShare *const *ns, size_t nns, Hvpb__V1__Event *const *ev,
                        size_t nev, size_t limit, uint64_t now_ms, uint64_t window_ms,
                        hv_cli_fleet_t *out) {
    memset(out, 0, sizeof(*out));
    out->window_ms = window_ms;
    for (size_t i = 0; i < nns; i++) {
        const Hvpb__V1__NamespaceShare *p = ns[i];
        hv_cli_fleet_ns_t *r = p != NULL ? fleet_ns_of(out, p->name, 0) : NULL;
        if (r == NULL) {
            out->ns_more += p != NULL;
            continue;
        }
        r->policy = 1;
        r->used = fleet_res(p->used, p->n_used, 0);
        r->borrowed = fleet_res(p->borrowed, p->n_borrowed, 0);
        r->quota = fleet_res(p->quota, p->n_quota, 0);
        r->share_pm = p->share_pm;
    }
    for (size_t i = 0; i < njobs; i++) {
        const Hvpb__V1__JobView *v = jobs[i];
        if (v == NULL) {
            continue;
        }
        Hvpb__V1__JobState js = hv_cli_job_state(v);
        int preempted = v->fleet_reason != NULL && strcmp(v->fleet_reason, "preempted") == 0;
        int run = js == HVPB__V1__JOB_STATE__JOB_STATE_RUNNING ||
                  js == HVPB__V1__JOB_STATE__JOB_STATE_PLACING;
        int wait = js == HVPB__V1__JOB_STATE__JOB_STATE_PENDING;
        uint64_t workers = v->elastic ? v->size : v->np;
        if (run) {
            out->running++;
            out->workers += workers;
        } else if (wait) {
            out->preempted += (uint32_t)preempted;
            out->waiting += (uint32_t)!preempted;
        }
        hv_cli_fleet_ns_t *r = run || wait ? fleet_ns_of(out, v->namespace_, nns > 0) : NULL;
        if (r != NULL) {
            r->jobs += (uint32_t)run;
            r->workers += run ? workers : 0;
            r->waiting += (uint32_t)wait;
        }
    }
    uint64_t since = now_ms > window_ms ? now_ms - window_ms : 0;
    out->complete = nev < limit || (nev > 0 && ev[0] != NULL && ev[0]->time_ms < since);
    for (size_t i = 0; i < nev; i++) {
        const Hvpb__V1__Event *e = ev[i];
        int c = e != NULL && e->time_ms >= since ? hv_cli_resize_cause(e->kind, e->data) : -1;
        if (c >= 0) {
            out->resizes[c]++;
        }
    }
}

/* A namespace's share as a fraction: the policy's, else its workers over the alive slots. */
static double fleet_ns_share(const hv_cli_fleet_ns_t *r, uint64_t slots_alive) {
    if (r->policy) {
        return (double)r->share_pm / 1000.0;
    }
    return slots_alive > 0 ? (double)r->workers / (double)slots_alive : 0.0;
}

void hv_cli_fleet_print(FILE *f, const hv_cli_status_t *s) {
    const hv_cli_fleet_t *fl = s->fleet;
    if (fl == NULL) {
        return;
    }
    fprintf(f, "fleet:   %u running (%llu worker%s), %u waiting, %u preempted\n", fl->running,
            (unsigned long long)fl->workers, fl->workers == 1 ? "" : "s", fl->waiting,
            fl->preempted);
    for (size_t i = 0; i < fl->nns; i++) {
        const hv_cli_fleet_ns_t *r = &fl->ns[i];
        char name[200];
        fprintf(f, "  namespace %s: %u job%s, %llu worker%s, %u waiting",
                hv_cli_clean(r->name, 0, name, sizeof(name)), r->jobs, r->jobs == 1 ? "" : "s",
                (unsigned long long)r->workers, r->workers == 1 ? "" : "s", r->waiting);
        if (!r->policy) {
            fprintf(f, ", share %.0f%% of %llu slots\n", 100.0 * fleet_ns_share(r, s->slots_alive),
                    (unsigned long long)s->slots_alive);
            continue;
        }
        /* Beyond no quota all use is borrowed (the policy's word): only a quota's is shown. */
        char quota[64] = "no quota";
        if (r->quota > 0) {
            snprintf(quota, sizeof(quota), "quota %llu, %llu borrowed",
                     (unsigned long long)r->quota, (unsigned long long)r->borrowed);
        }
        fprintf(f, "; %llu slot%s used (%s), share %u.%u%%\n", (unsigned long long)r->used,
                r->used == 1 ? "" : "s", quota, r->share_pm / 10, r->share_pm % 10);
    }
    if (fl->ns_more > 0) {
        fprintf(f, "  and %zu more namespace%s (hvctl queue lists them all)\n", fl->ns_more,
                fl->ns_more == 1 ? "" : "s");
    }
    char win[32];
    fprintf(f, "resizes: last %s:", hv_cli_fmt_duration(fl->window_ms, win, sizeof(win)));
    int any = 0;
    for (int c = 0; c < HV_CLI_RESIZE_CAUSES; c++) {
        if (fl->resizes[c] > 0) {
            fprintf(f, "%s %s %llu", any ? "," : "", hv_cli_resize_cause_names[c],
                    (unsigned long long)fl->resizes[c]);
            any = 1;
        }
    }
    fprintf(f, "%s%s\n", any ? "" : " none", fl->complete ? "" : " (of the newest events only)");
}

static void status_json_fleet(hv_cli_json_t *j, const hv_cli_status_t *s) {
    const hv_cli_fleet_t *fl = s->fleet;
    hv_cli_json_key(j, "fleet");
    hv_cli_json_obj_begin(j);
    hv_cli_json_kv_u64(j, "running", fl->running);
    hv_cli_json_kv_u64(j, "waiting", fl->waiting);
    hv_cli_json_kv_u64(j, "preempted", fl->preempted);
    hv_cli_json_kv_u64(j, "workers", fl->workers);
    hv_cli_json_key(j, "namespaces");
    hv_cli_json_arr_begin(j);
    for (size_t i = 0; i < fl->nns; i++) {
        const hv_cli_fleet_ns_t *r = &fl->ns[i];
        hv_cli_json_obj_begin(j);
        hv_cli_json_kv_str(j, "name", r->name);
        hv_cli_json_kv_u64(j, "jobs", r->jobs);
        hv_cli_json_kv_u64(j, "workers", r->workers);
        hv_cli_json_kv_u64(j, "waiting", r->waiting);
        hv_cli_json_key(j, "share");
        hv_cli_json_f64(j, fleet_ns_share(r, s->slots_alive));
        if (r->policy) {
            hv_cli_json_kv_u64(j, "share_pm", r->share_pm);
            hv_cli_json_key(j, "slots");
            hv_cli_json_obj_begin(j);
            hv_cli_json_kv_u64(j, "used", r->used);
            hv_cli_json_kv_u64(j, "borrowed", r->borrowed);
            hv_cli_json_kv_u64(j, "quota", r->quota);
            hv_cli_json_obj_end(j);
        }
        hv_cli_json_obj_end(j);
    }
    hv_cli_json_arr_end(j);
    hv_cli_json_kv_u64(j, "namespaces_left_out", fl->ns_more);
    hv_cli_json_key(j, "resizes");
    hv_cli_json_obj_begin(j);
    hv_cli_json_kv_u64(j, "window_s", fl->window_ms / 1000);
    hv_cli_json_key(j, "complete");
    hv_cli_json_bool(j, fl->complete);
    hv_cli_json_key(j, "by_cause");
    hv_cli_json_obj_begin(j);
    for (int c = 0; c < HV_CLI_RESIZE_CAUSES; c++) {
        hv_cli_json_key(j, hv_cli_resize_cause_names[c]);
        hv_cli_json_u64(j, fl->resizes[c]);
    }
    hv_cli_json_obj_end(j);
    hv_cli_json_obj_end(j);
    hv_cli_json_obj_end(j);
}

const char *const hv_cli_actor_state_names[HV_CLI_ACTOR_STATES] = {
    "alive", "starting", "restarting", "moving", "pending", "dead"};

void hv_cli_actor_count(const Hvpb__V1__ListActorsReply *r, size_t count[HV_CLI_ACTOR_STATES]) {
    for (size_t k = 0; k < HV_CLI_ACTOR_STATES; k++) {
        count[k] = 0;
    }
    for (size_t i = 0; r != NULL && i < r->n_actors; i++) {
        for (size_t k = 0; k < HV_CLI_ACTOR_STATES; k++) {
            count[k] += strcmp(r->actors[i]->state, hv_cli_actor_state_names[k]) == 0;
        }
    }
}

int hv_cli_actor_waiting(const Hvpb__V1__ActorView *v) { return v->waiting; }

const char *hv_cli_actor_wait_reason(const Hvpb__V1__ActorView *v) {
    /* The head's flag decides, not its words: its reason is the creation's announcement until
     * the placement says why the actor waits. */
    /* The state's code decides (its word only from an older head that sends no code). */
    int pending = v->state_code != HVPB__V1__ACTOR_STATE__ACTOR_STATE_UNSPECIFIED
                      ? v->state_code == HVPB__V1__ACTOR_STATE__ACTOR_STATE_PENDING
                      : v->state != NULL && strcmp(v->state, "pending") == 0;
    return pending && hv_cli_actor_waiting(v) && v->reason != NULL && v->reason[0] != '\0'
               ? v->reason
               : NULL;
}

/* The actors waiting for a place, with the head's reason, as pending_demand's "actors". */
static void status_json_actors(hv_cli_json_t *j, const Hvpb__V1__ListActorsReply *r) {
    hv_cli_json_key(j, "actors");
    hv_cli_json_arr_begin(j);
    for (size_t i = 0; i < r->n_actors; i++) {
        const Hvpb__V1__ActorView *v = r->actors[i];
        if (!hv_cli_actor_waiting(v)) {
            continue;
        }
        hv_cli_json_obj_begin(j);
        hv_cli_json_fields(j, &v->base, "id namespace name class=class_name");
        hv_cli_json_kv_str(j, "state", v->state);
        hv_cli_json_fields(j, &v->base, "slots gpus reason");
        hv_cli_json_obj_end(j);
    }
    hv_cli_json_arr_end(j);
}

/* 1 when e is a step of actor_id's life. */
static int actor_step(const Hvpb__V1__Event *e, uint64_t actor_id) {
    char step[16];
    uint64_t id = 0;
    return e != NULL && hv_cli_json_field_u64(e->data, "actor_id", &id) && id == actor_id &&
           hv_cli_json_field_str(e->data, "step", step, sizeof(step)) && step[0] != '\0';
}

size_t hv_cli_actor_history(Hvpb__V1__Event *const *ev, size_t n, uint64_t actor_id, size_t max,
                            size_t *pick, size_t *earlier) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        total += (size_t)actor_step(ev[i], actor_id);
    }
    size_t skip = total > max ? total - max : 0, k = 0, seen = 0;
    for (size_t i = 0; i < n && k < max; i++) {
        if (actor_step(ev[i], actor_id) && seen++ >= skip) {
            pick[k++] = i;
        }
    }
    *earlier = skip;
    return k;
}

void hv_cli_status_json(hv_cli_json_t *j, const char *cluster, const char *head,
                        const hv_cli_status_t *s, Hvpb__V1__JobView *const *jobs, size_t njobs,
                        const Hvpb__V1__ListActorsReply *actors, uint64_t now_ms) {
    hv_cli_json_obj_begin(j);
    hv_cli_json_kv_str(j, "cluster_name", cluster != NULL ? cluster : "");
    hv_cli_json_kv_str(j, "head", head);
    hv_cli_json_key(j, "nodes");
    hv_cli_json_obj_begin(j);
    hv_cli_json_kv_u64(j, "alive", s->nodes_alive);
    hv_cli_json_kv_u64(j, "draining", s->nodes_draining);
    hv_cli_json_kv_u64(j, "dead", s->nodes_dead);
    hv_cli_json_obj_end(j);
    hv_cli_json_key(j, "slots");
    hv_cli_json_obj_begin(j);
    hv_cli_json_kv_u64(j, "used", s->slots_used);
    hv_cli_json_kv_u64(j, "free", s->slots_free);
    hv_cli_json_kv_u64(j, "alive", s->slots_alive);
    hv_cli_json_kv_u64(j, "draining", s->slots_draining);
    hv_cli_json_kv_u64(j, "gpus", s->gpus);
    hv_cli_json_obj_end(j);
    hv_cli_json_key(j, "jobs");
    hv_cli_json_obj_begin(j);
    static const char *const names[] = {"pending", "placing",   "running", "succeeded",
                                        "failed",  "cancelled", "other"};
    const uint32_t counts[] = {s->jobs_pending,   s->jobs_placing, s->jobs_running,
                               s->jobs_succeeded, s->jobs_failed,  s->jobs_cancelled,
                               s->jobs_other};
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
        hv_cli_json_key(j, names[i]);
        hv_cli_json_u64(j, counts[i]);
    }
    hv_cli_json_obj_end(j);
    if (actors != NULL) {
        size_t count[HV_CLI_ACTOR_STATES];
        hv_cli_actor_count(actors, count);
        hv_cli_json_key(j, "actors");
        hv_cli_json_obj_begin(j);
        for (size_t k = 0; k < HV_CLI_ACTOR_STATES; k++) {
            hv_cli_json_key(j, hv_cli_actor_state_names[k]);
            hv_cli_json_u64(j, count[k]);
        }
        hv_cli_json_obj_end(j);
    }
    hv_cli_json_key(j, "pending_demand");
    hv_cli_json_obj_begin(j);
    hv_cli_json_kv_u64(j, "jobs", s->jobs_pending);
    hv_cli_json_kv_u64(j, "slots", s->demand_slots);
    hv_cli_json_key(j, "waiting");
    hv_cli_json_arr_begin(j);
    for (size_t k = njobs; k > 0; k--) {
        const Hvpb__V1__JobView *v = jobs[k - 1];
        if (v == NULL || hv_cli_job_state(v) != HVPB__V1__JOB_STATE__JOB_STATE_PENDING) {
            continue;
        }
        hv_cli_json_obj_begin(j);
        hv_cli_json_fields(j, &v->base, "job_id name np");
        hv_cli_json_key(j, "waiting_ms");
        hv_cli_json_u64(
            j, v->submitted_ms != 0 && now_ms > v->submitted_ms ? now_ms - v->submitted_ms : 0);
        hv_cli_json_obj_end(j);
    }
    hv_cli_json_arr_end(j);
    if (actors != NULL) {
        status_json_actors(j, actors);
    }
    hv_cli_json_obj_end(j);
    hv_cli_json_key(j, "elastic_growth");
    hv_cli_json_obj_begin(j);
    hv_cli_json_kv_u64(j, "jobs", s->grow_jobs);
    hv_cli_json_kv_u64(j, "workers", s->grow_workers);
    hv_cli_json_obj_end(j);
    hv_cli_json_kv_u64(j, "jobs_counted", s->jobs_counted);
    hv_cli_json_kv_u64(j, "jobs_limit", HV_CLI_STATUS_JOBS);
    if (s->fleet != NULL) {
        status_json_fleet(j, s);
    }
    hv_cli_json_obj_end(j);
}

/* "0.0123" with enough digits for small sums (4 decimals, 6 below 0.01). */
static void cost_money(double v, char *buf, size_t len) {
    snprintf(buf, len, v != 0 && v < 0.01 ? "%.6f" : "%.4f", v);
}

void hv_cli_cost_summary(const Hvpb__V1__CostReply *r, char *buf, size_t len) {
    char money[32], od[32], part[160];
    size_t off = 0;
    cost_money(r->cost, money, sizeof(money));
    off += (size_t)snprintf(buf + off, len - off, "cost %s for %.1f instance-s", money,
                            r->instance_seconds);
    for (size_t i = 0; i < r->n_types && off < len; i++) {
        snprintf(part, sizeof(part), "%s%s %.1f s", i == 0 ? " (" : ", ", r->types[i]->type,
                 r->types[i]->instance_seconds);
        off += (size_t)snprintf(buf + off, len - off, "%s%s", part, i + 1 == r->n_types ? ")" : "");
    }
    if (off < len) {
        if (!r->ondemand_known) {
            off += (size_t)snprintf(buf + off, len - off, "; on demand: unknown (no price)");
        } else if (r->ondemand_cost > 0) {
            cost_money(r->ondemand_cost, od, sizeof(od));
            double saved = 100.0 * (1.0 - r->cost / r->ondemand_cost);
            off += (size_t)snprintf(buf + off, len - off, "; on demand %s (%.0f%% %s)", od,
                                    saved >= 0 ? saved : -saved, saved >= 0 ? "less" : "more");
        }
    }
    if (off < len) {
        off += (size_t)snprintf(buf + off, len - off, "; %u preemption%s%s; %u rollback%s",
                                (unsigned)r->preemptions, r->preemptions == 1 ? "" : "s",
                                r->job_id != 0 ? " survived" : "", (unsigned)r->rollbacks,
                                r->rollbacks == 1 ? "" : "s");
    }
    if (off < len && r->redone_samples > 0) {
        snprintf(buf + off, len - off, " (%llu sample%s redone)",
                 (unsigned long long)r->redone_samples, r->redone_samples == 1 ? "" : "s");
    }
}
