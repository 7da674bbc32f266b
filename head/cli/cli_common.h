/*
 * cli_common: what hvsubmit and hvctl share and what can be tested without a head: resolving
 * the head address, parsing hvsubmit's command line, checking the files a job ships (ELF
 * executable, readable --file, no name clashes), parsing --env, turning a finished job into an
 * exit status, human formats (durations, "5s ago", signal names, elastic rounds, blacklist
 * entries), an aligned text table and a small JSON emitter (protobuf-c has no JSON) that can also
 * embed a JSON text from the head after checking it. It is not an RPC client: the calls themselves live
 * in hvsubmit.c and hvctl.c. Everything here is single-threaded: a table or JSON writer belongs
 * to its caller; functions with no object are reentrant.
 */
#ifndef HV_CLI_CLI_COMMON_H
#define HV_CLI_CLI_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "err.h"
#include "hv.pb-c.h"

#define HV_CLI_DEFAULT_HEAD "127.0.0.1:7000"
#define HV_CLI_ERR_LEN 512             /* size of the err buffers below */
#define HV_CLI_UNARY_MS 10000u         /* deadline of one unary call */
#define HV_CLI_UPLOAD_CHUNK (1u << 20) /* bytes per Upload call (the proto's bound) */

/* Process exit statuses shared by both tools. */
enum {
    HV_CLI_EXIT_OK = 0,
    HV_CLI_EXIT_FAIL = 1,     /* the job failed, or the head refused or could not be reached */
    HV_CLI_EXIT_USAGE = 2,    /* bad command line or a local file that cannot be shipped */
    HV_CLI_EXIT_SIGINT = 130, /* interrupted by Ctrl-C */
};

/* Returns the head address to use: opt if given, else $HV_HEAD if set and non-empty, else
 * HV_CLI_DEFAULT_HEAD. The result is borrowed (opt, the environment, or a static string). */
const char *hv_cli_head_addr(const char *opt);

/* Checks that addr looks like HOST:PORT. HV_EINVAL with a message in err otherwise. */
hv_err hv_cli_check_head_addr(const char *addr, char *err, size_t errlen);

/* The part of path after the last '/' (borrowed from path; path itself if it has none). */
const char *hv_cli_basename(const char *path);

/* A KEY=VALUE pair from --env. Both strings owned by the pair. */
typedef struct hv_cli_kv_s {
    char *key;
    char *value;
} hv_cli_kv_t;

/* Splits "KEY=VALUE" (the value may be empty and may contain '='). HV_EINVAL with a message in
 * err when there is no '=' or the key is empty or holds a character that cannot be in an
 * environment name ('\0' aside, only '=' is impossible; whitespace is refused as a likely typo).
 * On HV_OK out->key and out->value are owned by the caller (free with hv_cli_kv_fini). */
hv_err hv_cli_parse_env(const char *s, hv_cli_kv_t *out, char *err, size_t errlen);
void hv_cli_kv_fini(hv_cli_kv_t *kv);

/* Bounds of hvsubmit's elastic options (the same as the head's elastic: config keys). */
#define HV_CLI_MAX_RESETS_MAX 1000000u     /* --max-resets */
#define HV_CLI_ELASTIC_TIMEOUT_MAX 604800u /* --elastic-timeout, seconds (7 days) */
#define HV_CLI_CHECK_EVERY_MAX 1000000u    /* --check-every, commits */
#define HV_CLI_COOLDOWN_MAX 604800u        /* --blacklist-cooldown, seconds (7 days) */

/* hvsubmit's command line. Strings are borrowed from argv unless said otherwise. Elastic values
 * left at 0 (and their *_set flags at 0) mean the head's default (its elastic: config). */
typedef struct hv_cli_submit_opts_s {
    const char *head;           /* --head, or NULL */
    uint32_t np;                /* -np; 0 when not given */
    int np_set;                 /* -np was given */
    uint32_t min_np;            /* --min-np, 0 = unset */
    uint32_t max_np;            /* --max-np, 0 = unset */
    int elastic;                /* --min-np or --max-np was given: an elastic job */
    uint32_t max_resets;        /* --max-resets */
    int max_resets_set;         /* --max-resets was given (0 = fail at the first reset) */
    uint32_t elastic_timeout_s; /* --elastic-timeout, 0 = the head's default */
    uint32_t check_every;       /* --check-every, 0 = the head's default */
    uint32_t cooldown_min_s;    /* --blacklist-cooldown MIN:MAX */
    uint32_t cooldown_max_s;
    int cooldown_set;        /* --blacklist-cooldown was given (0:0 = no blacklisting) */
    uint32_t slots_per_host; /* --slots-per-host, 0 = no limit */
    uint32_t timeout_s;      /* --timeout, 0 = the head's default */
    const char *name;        /* --name, or NULL (the binary's base name) */
    int detach;              /* --detach */
    int quiet;               /* --quiet */
    int verbose;             /* --verbose */
    int help;                /* -h / --help: print usage, exit 0 */
    const char *binary;      /* the program; NULL only when help is set */
    char **args;             /* the program's arguments (argv tail, borrowed) */
    int nargs;
    hv_cli_kv_t *env; /* --env, owned array of owned pairs */
    size_t nenv;
    const char **files; /* --file paths (owned array of borrowed strings) */
    size_t nfiles;
} hv_cli_submit_opts_t;

/* Parses argv[1..argc-1]. Options stop at the first argument that is not an option (or after
 * "--"): that is the binary, and everything after it goes to the workers untouched. Both "-np 4"
 * and "--np=4" spellings are accepted. Checks numbers, their ranges and their consistency (-np 0,
 * min > np, np > max, min > max, --check-every 0, a cooldown MIN above MAX, elastic options
 * without --min-np or --max-np) but touches no file. HV_EINVAL with a message in err on bad usage;
 * on HV_OK *out is filled and must be released with hv_cli_submit_opts_fini (also safe after a
 * failure, on a zeroed struct). */
hv_err hv_cli_submit_parse(int argc, char **argv, hv_cli_submit_opts_t *out, char *err,
                           size_t errlen);
void hv_cli_submit_opts_fini(hv_cli_submit_opts_t *o);

/* Checks that path can be shipped as a job's program: it exists, is a regular file, is
 * executable by us, is readable and starts with the ELF magic ("#!" scripts are refused with a
 * hint). HV_ENOTFOUND / HV_EINVAL / HV_EPERM with a message naming path in err. Blocking (reads
 * four bytes). */
hv_err hv_cli_check_binary(const char *path, char *err, size_t errlen);

/* Checks a --file: exists, is a regular file, is readable. Messages as above. */
hv_err hv_cli_check_file(const char *path, char *err, size_t errlen);

/* Runs every local check of a parsed command line: the binary, each --file, and that no two
 * shipped files share a base name (they land in one directory on the node). */
hv_err hv_cli_submit_check_files(const hv_cli_submit_opts_t *o, char *err, size_t errlen);

/* Returns the exit status hvsubmit uses for a finished job (see hvsubmit's usage): 0 when it
 * succeeded; when it failed, the first failing rank's exit code if it is 1..125, 128+signal if
 * that rank was killed by a signal, else 1; when cancelled, 130 if we_cancelled, else 1. The first
 * failing rank is the lowest rank (then the lowest attempt) with a non-zero exit or a signal,
 * preferring workers that failed on their own over those the head killed (state "killed"), which
 * are usually the consequence of the first failure.
 * *first_out (optional) receives that worker or NULL (borrowed from v). */
int hv_cli_job_exit_status(const Hvpb__V1__JobView *v, int we_cancelled,
                           const Hvpb__V1__WorkerView **first_out);

/* True when a worker ended badly: non-zero exit (including -1, "did not exit") or a signal. */
int hv_cli_worker_failed(const Hvpb__V1__WorkerView *w);

/* Writes "rank R on node N exited with status S" / "... was killed by signal SIGKILL" /
 * "... was lost" for a failed worker into buf, with " (reason)" when the head gave one. */
const char *hv_cli_worker_outcome(const Hvpb__V1__WorkerView *w, char *buf, size_t len);

/* For an elastic job's end: "generation 3, 2 workers, 1 reset" (the round, its size and the
 * resets of v) into buf. */
const char *hv_cli_elastic_summary(const Hvpb__V1__JobView *v, char *buf, size_t len);

/* The round line of `hvctl job`: "closed (opened for: failure: rank 1 ...)", "open (...)", or
 * "-" before the first round; into buf. */
const char *hv_cli_fmt_round(const Hvpb__V1__JobView *v, char *buf, size_t len);

/* A node's blacklist entries for `hvctl nodes`, seen at now_ms (wall ms): "job 3: 1 strike, 42s
 * left", "job 5: permanent (5 strikes)", "job 4: 2 strikes, cooldown over", joined by "; ";
 * "-" when there are none. Into buf (cut to fit). */
const char *hv_cli_fmt_blacklist(Hvpb__V1__BlacklistEntry *const *e, size_t n, uint64_t now_ms,
                                 char *buf, size_t len);

/* Checks hvctl drain/undrain's NODE: a node name (1 to 128 of A-Z a-z 0-9 . _ -) or a numeric
 * id. HV_EINVAL with a message in err otherwise. */
hv_err hv_cli_check_node(const char *node, char *err, size_t errlen);

/* True for the events hvsubmit shows while a job runs: job state changes and notes
 * (job.state, job.note), elastic resets and worker failures; for an elastic job also its rounds
 * (round.open, round.close, round.update) and workers that left it (worker.left). Others
 * (placement chatter, a fixed-size job's one round) are left for `hvctl events`. */
int hv_cli_event_shown(const char *kind, int elastic);

/* "SIGKILL" for 9 etc.; "signal 42" for numbers without a name (written into buf). */
const char *hv_cli_signame(int sig, char *buf, size_t len);

/* "45s", "3m05s", "2h07m", "3d04h" */
const char *hv_cli_fmt_duration(uint64_t ms, char *buf, size_t len);

/* How long ago then_ms was, seen from now_ms (both wall ms): "now", "5s ago", "3m ago"...; "-"
 * when then_ms is 0. */
const char *hv_cli_fmt_ago(uint64_t then_ms, uint64_t now_ms, char *buf, size_t len);

/* ---- aligned tables ------------------------------------------------------------------------ */

typedef struct hv_cli_table_s hv_cli_table_t;

/* Creates a table with ncols columns named by headers (copied). Owned by the caller. */
hv_err hv_cli_table_create(size_t ncols, const char *const *headers, hv_cli_table_t **out);
void hv_cli_table_destroy(hv_cli_table_t *t);
/* Appends a row of ncols cells (copied; NULL or "" is shown as "-"). Control characters in a
 * cell (newlines, tabs) are shown as spaces so that a row stays on one line. */
hv_err hv_cli_table_add(hv_cli_table_t *t, const char *const *cells);
/* Writes the header and the rows, each column as wide as its widest cell (counted in UTF-8
 * characters), two spaces apart, without trailing blanks. */
void hv_cli_table_print(const hv_cli_table_t *t, FILE *f);
size_t hv_cli_table_rows(const hv_cli_table_t *t);

/* ---- JSON emitter -------------------------------------------------------------------------- */

#define HV_CLI_JSON_MAX_DEPTH 16

/* Writes one JSON document to f, indented by two spaces per level. Caller storage. The writer
 * inserts commas and indentation itself; the caller only has to nest begin/end correctly and give
 * a key before each value inside an object. Misuse (too deep, a value where a key is due) sets
 * err and makes later calls no-ops, so the output is never silently invalid. */
typedef struct hv_cli_json_s {
    FILE *f;                                     /* borrowed */
    int depth;                                   /* open containers */
    unsigned char is_obj[HV_CLI_JSON_MAX_DEPTH]; /* per level: 1 object, 0 array */
    unsigned char count[HV_CLI_JSON_MAX_DEPTH];  /* per level: values written (saturates at 1) */
    int want_value;                              /* a key was written, its value is due */
    int err;                                     /* misuse detected */
} hv_cli_json_t;

void hv_cli_json_init(hv_cli_json_t *j, FILE *f);
void hv_cli_json_obj_begin(hv_cli_json_t *j);
void hv_cli_json_obj_end(hv_cli_json_t *j);
void hv_cli_json_arr_begin(hv_cli_json_t *j);
void hv_cli_json_arr_end(hv_cli_json_t *j);
void hv_cli_json_key(hv_cli_json_t *j, const char *key);
void hv_cli_json_str(hv_cli_json_t *j, const char *s);
void hv_cli_json_u64(hv_cli_json_t *j, uint64_t v);
void hv_cli_json_i64(hv_cli_json_t *j, int64_t v);
void hv_cli_json_bool(hv_cli_json_t *j, int v);
void hv_cli_json_null(hv_cli_json_t *j);
/* Ends the document with a newline. HV_EINVAL if containers are still open or misuse occurred. */
hv_err hv_cli_json_finish(hv_cli_json_t *j);

/* Writes text, one JSON value that came from elsewhere (an event's data from the head), as the
 * next value: it is checked first (RFC 8259 grammar, valid UTF-8, nesting within what the writer
 * has left) and then written again through the writer, so it is indented like the rest and the
 * document stays valid. Strings and numbers keep their exact spelling. HV_EINVAL, with nothing
 * written, when text is not exactly one valid JSON value (surrounding whitespace aside) or
 * nests too deep; want_object set also refuses a value that is not an object. */
hv_err hv_cli_json_embed(hv_cli_json_t *j, const char *text, int want_object);

/* Writes s as a quoted JSON string: escapes '"', '\\' and control characters, and replaces bytes
 * that are not valid UTF-8 with U+FFFD so that the output is always valid JSON. */
void hv_cli_json_write_string(FILE *f, const char *s);

#endif
