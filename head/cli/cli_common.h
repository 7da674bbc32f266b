/*
 * cli_common: what hvsubmit and hvctl share and what can be tested without a head: resolving
 * the head address, parsing hvsubmit's command line, checking the files a job ships (ELF
 * executable, readable --file, no name clashes), parsing --env, turning a finished job into an
 * exit status, human formats (durations, "5s ago", signal names, elastic rounds, blacklist
 * entries), text from the head or a worker made safe for a terminal, an aligned text table, and
 * hvctl status's summary (written through cli_json.h, the CLIs' one JSON writer). It is not an
 * RPC client: the calls themselves live in hvsubmit.c and hvctl.c. Everything here is
 * single-threaded: a table belongs to its caller; functions with no object are reentrant.
 */
#ifndef HV_CLI_CLI_COMMON_H
#define HV_CLI_CLI_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "err.h"
#include "growsched.h"
#include "cli_json.h"
#include "hv.pb-c.h"

#define HV_CLI_DEFAULT_HEAD "127.0.0.1:7000"
/* Where the CLIs find their client token when neither --token-file nor HV_TOKEN_FILE is given:
 * the client.token the head writes into its default data directory (./hv-data), so a head and
 * CLIs started from the same directory need no option. */
#define HV_CLI_DEFAULT_TOKEN_FILE "./hv-data/client.token"
#define HV_CLI_ERR_LEN 512             /* size of the err buffers below */
#define HV_CLI_UNARY_MS 10000u         /* deadline of one unary call */
#define HV_CLI_UPLOAD_CHUNK (1u << 20) /* bytes per Upload call (the proto's bound) */

/* Process exit statuses shared by both tools (documented in README.md, "Exit status"). A job's
 * own outcome: 0, or the failing rank's exit status (1..255), or 128+signal. hvsubmit's and
 * hvctl's own errors use the sysexits(3) numbers, so that a program's exit 2 is never mistaken
 * for a usage error; each comes with a "hvsubmit: ..." / "hvctl: ..." line on stderr. */
enum {
    HV_CLI_EXIT_OK = 0,
    HV_CLI_EXIT_FAIL = 1,         /* the job failed without a failing rank of its own (timed out
                                     waiting for slots, cancelled by someone else, lost) */
    HV_CLI_EXIT_USAGE = 64,       /* bad command line */
    HV_CLI_EXIT_DATAERR = 65,     /* refused as invalid: not an ELF executable, not executable,
                                     the head refused the request (-np it can never hold, over
                                     its upload limit) */
    HV_CLI_EXIT_NOINPUT = 66,     /* a local file is missing or unreadable; no such job or node */
    HV_CLI_EXIT_UNAVAILABLE = 69, /* the head cannot be reached, or went away and did not come
                                     back within --head-timeout */
    HV_CLI_EXIT_SOFTWARE = 70,    /* internal error (a bug, an answer that makes no sense) */
    HV_CLI_EXIT_IOERR = 74,       /* reading a local file failed */
    HV_CLI_EXIT_TEMPFAIL = 75,    /* the head is busy or did not answer in time: try again */
    HV_CLI_EXIT_NOPERM = 77,      /* the head refused our credentials or the operation */
    HV_CLI_EXIT_SIGINT = 130,     /* interrupted by Ctrl-C (the job was cancelled) */
};

/* The exit status for a local check that failed with rc (hv_cli_check_binary, hv_cli_check_file,
 * hv_cli_submit_check_files, hv_cli_check_head_addr): HV_ENOTFOUND/HV_EPERM (missing,
 * unreadable) -> 66, HV_EIO -> 74, HV_ENOMEM/HV_EINTERNAL -> 70, others -> 65. */
int hv_cli_exit_for_local(hv_err rc);

/* Prints a usage error the way all four hv tools do, "PROG: MSG (see PROG --help)", and returns
 * HV_CLI_EXIT_USAGE (64). */
int hv_cli_usage_error(const char *prog, const char *msg);

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

/* Keeps one pair per key in env[0..*n): the first pair's place with the last pair's value (a
 * later --env for the same name wins, as in a shell); the pairs dropped are freed. n log n (a
 * sort of the keys). HV_ENOMEM leaves env as it was. */
hv_err hv_cli_env_dedupe(hv_cli_kv_t *env, size_t *n);

/* Bounds of hvsubmit's elastic options (the same as the head's elastic: config keys). */
#define HV_CLI_MAX_RESETS_MAX 1000000u     /* --max-resets */
#define HV_CLI_ELASTIC_TIMEOUT_MAX 604800u /* --elastic-timeout, seconds (7 days) */
#define HV_CLI_CHECK_EVERY_MAX 1000000u    /* --check-every, commits */
#define HV_CLI_COOLDOWN_MAX 604800u        /* --blacklist-cooldown, seconds (7 days) */
#define HV_CLI_HEAD_TIMEOUT_MAX 86400u     /* --head-timeout, seconds (1 day) */
#define HV_CLI_RETRIES_MAX 1000u           /* --retries */
/* Without --head-timeout hvsubmit waits for a head that went away for the lease the head gave
 * its nodes (SubmitReply.lease_ms; HV_CLI_DEFAULT_LEASE_MS from a head that does not say) plus
 * HV_CLI_HEAD_MARGIN_MS: by then the nodes have killed the job's workers (orphan policy kill),
 * so a head that comes back later has nothing left to show. */
#define HV_CLI_DEFAULT_LEASE_MS 10000u
#define HV_CLI_HEAD_MARGIN_MS 30000u

/* hvsubmit's command line. Strings are borrowed from argv unless said otherwise. Elastic values
 * left at 0 (and their *_set flags at 0) mean the head's default (its elastic: config). */
typedef struct hv_cli_submit_opts_s {
    const char *head;           /* --head, or NULL */
    const char *ca;             /* --ca (the head's CA; TLS), or NULL */
    int insecure;               /* --insecure: plain text to a head beyond loopback */
    const char *token_file;     /* --token-file, or NULL (then $HV_TOKEN_FILE, the default) */
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
    int cooldown_set; /* --blacklist-cooldown was given (0:0 = no blacklisting) */
    const char *grow; /* --grow EPOCH:SIZE,... (elastic; sets -np, --max-np, the env) */
    hv_grow_step_t grow_steps[HV_GROW_MAX_STEPS];
    size_t ngrow;
    uint32_t slots_per_host; /* --slots-per-host, 0 = no limit */
    uint32_t timeout_s;      /* --timeout, 0 = the head's default */
    const char *name;        /* --name, or NULL (the binary's base name) */
    const char *ns;          /* --namespace: the actor namespace its workers use, or NULL
                              * ("default") */
    int32_t priority;        /* --priority: higher goes first (0: the default) */
    int priority_set;        /* --priority was given (else: its namespace's default, head side) */
    int preemptible;         /* --preemptible */
    int detach;              /* --detach */
    int quiet;               /* --quiet */
    int raw;                 /* --raw: worker output as it came, even on a terminal */
    int verbose;             /* --verbose */
    int help;                /* -h / --help: print usage, exit 0 */
    int version;             /* -V / --version: print the version, exit 0 */
    uint32_t head_timeout_s; /* --head-timeout: give up on a head that went away after this */
    int head_timeout_set;    /* --head-timeout was given (else the head's lease + a margin) */
    uint32_t retries;        /* --retries: submit a failed job again, up to this many times */
    const char *binary;      /* the program; NULL only when help is set */
    char **args;             /* the program's arguments (argv tail, borrowed) */
    int nargs;
    hv_cli_kv_t *env; /* --env, owned array of owned pairs; one per name, the last value given
                         for it, in the order the names first appeared */
    size_t nenv;
    size_t env_cap;     /* pairs allocated in env */
    const char **files; /* --file paths (owned array of borrowed strings), then the script and
                           the --workdir files that hv_cli_submit_prepare added */
    size_t nfiles;
    const char **names; /* the name each of files[0..nnames) gets in the worker's directory
                           (owned array of borrowed strings; NULL: its base name): --workdir's
                           files keep their path below DIR; see hv_cli_ship_name */
    size_t nnames;
    const char *workdir;    /* --workdir DIR, or NULL */
    int command;            /* set by hv_cli_submit_prepare: the program is run from the nodes
                            (hv_cli_is_node_command), not shipped */
    const char *script;     /* the shipped script's base name (python3 train.py), or NULL */
    size_t workdir_nfiles;  /* files --workdir added */
    size_t workdir_skipped; /* links to directories in --workdir, not followed */
    char workdir_first_skipped[256]; /* the first of them (its path below DIR), for a note */
    char **owned; /* paths made by hv_cli_submit_prepare (files points into them) */
    size_t nowned;
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

/* Writes the options part of hvsubmit's --help: each option's lines, from its table. */
void hv_cli_submit_options_help(FILE *f);

/* How long hvsubmit (and hvctl logs --follow) waits for a head that went away, in ms:
 * head_timeout_s when head_timeout_set (--head-timeout), else lease_ms (0:
 * HV_CLI_DEFAULT_LEASE_MS, what hvctl uses, as no reply of its calls carries the lease) +
 * HV_CLI_HEAD_MARGIN_MS. */
uint64_t hv_cli_head_wait_ms(int head_timeout_set, uint32_t head_timeout_s, uint32_t lease_ms);

/* Checks that path can be shipped as a job's program: it exists, is a regular file, is
 * readable, has a sound ELF header (hv_cli_elf_check_header) and is executable by us. A "#!"
 * script or any other file that is no ELF is refused with the hint to give its interpreter
 * (hvsubmit -np N -- python3 PATH), whatever its mode. HV_ENOTFOUND (missing) / HV_EPERM (unreadable) / HV_EINVAL
 * (not a program that can run) / HV_EIO with a message naming path in err. Blocking (reads the
 * first 64 bytes). */
hv_err hv_cli_check_binary(const char *path, char *err, size_t errlen);

/* The bytes of an ELF header (Elf64_Ehdr; Elf32_Ehdr is 52). */
#define HV_CLI_ELF_HDR_MAX 64u

/* Checks that buf, the first len bytes of a file that is exactly len bytes long, starts with an
 * ELF header of a program that can be run: the magic, EI_CLASS 32 or 64 bit, EI_DATA little or
 * big endian, EI_VERSION 1, e_type ET_EXEC or ET_DYN (an object file, a core dump are refused),
 * e_machine a known architecture (x86-64, AArch64, ...), e_version 1, e_ehsize and e_phentsize
 * right for the class, and at least one program header lying inside the file. HV_EINVAL with
 * what is wrong in err ("... is a relocatable object file (.o), not a linked program") otherwise,
 * without the file's name (the caller adds it). Pure: no I/O, any bytes are safe. */
hv_err hv_cli_elf_check_header(const unsigned char *buf, size_t len, char *err, size_t errlen);

/* The same for a file of file_size bytes whose first len bytes (len <= file_size) are in buf. */
hv_err hv_cli_elf_check_prefix(const unsigned char *buf, size_t len, uint64_t file_size, char *err,
                               size_t errlen);

/* The name of an ELF e_machine ("x86-64", "AArch64"), or NULL when it is not one hv knows. */
const char *hv_cli_elf_machine_name(unsigned machine);

/* Checks a --file: exists, is a regular file, is readable. Messages as above. */
hv_err hv_cli_check_file(const char *path, char *err, size_t errlen);

/* 1 when hvsubmit runs prog from the nodes instead of shipping it: its base name is a Python
 * interpreter (python, python3, python3.11), or it is a bare name (no '/') that is no file here
 * but a program on this machine's PATH (bash, torchrun). Anything else is a file that is shipped
 * and must be an ELF executable (a bare name found nowhere is a missing file). */
int hv_cli_is_node_command(const char *prog);

/* Bounds of --workdir: its files, and their bytes together; a file's path below DIR, and its
 * components (the head's HV_FILE_PATH_MAX and HV_FILE_PATH_DEPTH_MAX). */
#define HV_CLI_WORKDIR_MAX_FILES 200u
#define HV_CLI_WORKDIR_MAX_BYTES (256ull << 20)
#define HV_CLI_WORKDIR_MAX_PATH 1024u
#define HV_CLI_WORKDIR_MAX_DEPTH 16u

/* Resolves what a parsed command line ships: sets o->command (hv_cli_is_node_command); for a
 * command, ships its first argument that does not start with '-' when that is a file here (the
 * script: the argument becomes its base name, the name it has in the worker's directory); adds
 * the regular files of --workdir and of its subdirectories, each shipped under its path below
 * DIR (names starting with '.', __pycache__ and *.pyc are left out, and so is every entry whose
 * name or path below DIR matches a glob pattern of a line of DIR/.hvignore; links to
 * directories are not followed), bounded by HV_CLI_WORKDIR_MAX_FILES, _BYTES, _PATH and _DEPTH.
 * Then runs hv_cli_submit_check_files. Messages and codes as hv_cli_check_binary. */
hv_err hv_cli_submit_prepare(hv_cli_submit_opts_t *o, char *err, size_t errlen);

/* The name the i-th shipped file gets in the worker's directory: its path below --workdir for
 * the files --workdir added, else its base name. */
const char *hv_cli_ship_name(const hv_cli_submit_opts_t *o, size_t i);

/* Runs every local check of a parsed command line: the binary, each --file, and that no two
 * shipped files share a base name (they land in one directory on the node). */
hv_err hv_cli_submit_check_files(const hv_cli_submit_opts_t *o, char *err, size_t errlen);

/* ---- states as codes ------------------------------------------------------------------------
 * The CLIs decide on these, never on the views' state words or on events' messages. Each reads
 * the view's *_code field; from a head older than the codes (UNSPECIFIED) it falls back to the
 * code of the view's state name (one of the fixed words listed in proto/hv.proto), and gives
 * UNSPECIFIED for anything else. */
Hvpb__V1__JobState hv_cli_job_state(const Hvpb__V1__JobView *v);
Hvpb__V1__WorkerState hv_cli_worker_state(const Hvpb__V1__WorkerView *w);
Hvpb__V1__NodeState hv_cli_node_state(const Hvpb__V1__NodeView *n);
Hvpb__V1__RoundState hv_cli_round_state(const Hvpb__V1__JobView *v);
/* The word of a code for people and for --json: "running", "draining", "not formed", ...;
 * "unknown" for UNSPECIFIED or a value newer than this client. */
const char *hv_cli_job_state_name(Hvpb__V1__JobState s);
const char *hv_cli_worker_state_name(Hvpb__V1__WorkerState s);
const char *hv_cli_node_state_name(Hvpb__V1__NodeState s);
const char *hv_cli_round_state_name(Hvpb__V1__RoundState s);
/* An event reason's word: "failure", "drain", "grow", ...; "" for UNSPECIFIED or unknown. */
const char *hv_cli_reason_name(Hvpb__V1__EventReason r);
/* True for a job state that is final (succeeded, failed, cancelled). */
int hv_cli_job_state_final(Hvpb__V1__JobState s);

/* Returns the exit status hvsubmit uses for a finished job (see hvsubmit's usage): 0 when it
 * succeeded; when it failed, the first failing rank's exit code if it is 1..255, 128+signal if
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

/* 1 when hvsubmit refuses prog before anything is uploaded or placed because no node has it:
 * prog is a bare Python interpreter name (python, python3, python3.N; a path is not checked), at
 * least one of the nodes (ListNodes) is alive, every alive node reports the label hv.python
 * (agent/interp.h: the interpreters on its PATH; an agent that does not report it leaves the
 * answer unknown, and 0 is returned) and none lists prog. msg then gets the reason, naming each
 * alive node and what it has: "no node has 'python3.12' on its PATH (node-a: python3
 * python3.11; node-b: none): install it there, or run an interpreter the nodes have". */
int hv_cli_interp_missing(const char *prog, Hvpb__V1__NodeView *const *nodes, size_t n, char *msg,
                          size_t len);

/* What a pending job waits for, from the nodes (ListNodes) and the job's np, into buf:
 * "waiting for 4 free slots: 1 of 3 free now (2 nodes alive, 1 draining, 0 dead)". Counts only
 * alive nodes' free slots (a draining or dead node takes no work). */
const char *hv_cli_fmt_pending(uint32_t np, Hvpb__V1__NodeView *const *nodes, size_t n, char *buf,
                               size_t len);

/* Checks hvctl drain/undrain's NODE: a node name (1 to 128 of A-Z a-z 0-9 . _ -) or a numeric
 * id. HV_EINVAL with a message in err otherwise. */
hv_err hv_cli_check_node(const char *node, char *err, size_t errlen);

/* True for the events hvsubmit shows while a job runs: job state changes and notes
 * (job.state, job.note), elastic resets and worker failures; for an elastic job also its rounds
 * (round.open, round.close, round.update) and workers that left it (worker.left). Others
 * (placement chatter, a fixed-size job's one round) are left for `hvctl events`. */
int hv_cli_event_shown(const char *kind, int elastic);

/* One upload's progress into buf. bar_width > 0 (a terminal): "NAME [#####.....]  45%  12.0 MiB
 * of 26.0 MiB" with a bar of bar_width cells; 0: "uploading NAME: 45% (12.0 MiB of 26.0 MiB)".
 * done is capped at total; a total of 0 reads as done. */
const char *hv_cli_fmt_progress(const char *name, uint64_t done, uint64_t total, int bar_width,
                                char *buf, size_t len);

/* "SIGKILL" for 9 etc.; "signal 42" for numbers without a name (written into buf). */
const char *hv_cli_signame(int sig, char *buf, size_t len);

/* "45s", "3m05s", "2h07m", "3d04h" */
const char *hv_cli_fmt_duration(uint64_t ms, char *buf, size_t len);

/* How long ago then_ms was, seen from now_ms (both wall ms): "now", "5s ago", "3m ago"...; "-"
 * when then_ms is 0. */
const char *hv_cli_fmt_ago(uint64_t then_ms, uint64_t now_ms, char *buf, size_t len);

/* ---- text from elsewhere on a terminal ---------------------------------------------------- */

/* What hv_cli_clean leaves alone besides printable text. */
#define HV_CLI_CLEAN_TAB 1u /* keep tabs (worker output); otherwise a tab shows as \t */

/* Text that came from the head or a worker (a job's name, a reason, an event's message, a line of
 * output) shown to a person: control characters would act on the terminal (clear it, set its
 * title, move the cursor to fake a line). Copies s into buf with each of them made visible:
 * newline, carriage return and tab as \n, \r, \t, other C0 controls and DEL as \xNN (ESC is
 * \x1b), C1 controls (U+0080..U+009F, 8-bit CSI among them) and bytes that are not valid UTF-8
 * as \xNN per byte. Valid UTF-8 text, backslashes included, is kept as it is. Cut to fit buf at
 * a character or escape boundary; NULL reads as "". Returns buf. Pure. */
const char *hv_cli_clean(const char *s, unsigned flags, char *buf, size_t len);

/* The same, written to f, with no length limit. */
void hv_cli_clean_write(FILE *f, const char *s, unsigned flags);

/* Writes "PROG: TEXT\n" to f, TEXT cleaned (hv_cli_clean_write, tabs shown too): a line of
 * hvsubmit's or hvctl's that carries text from the head. */
void hv_cli_say(FILE *f, const char *prog, const char *text);

/* True when s holds something hv_cli_clean would change (flags alike). */
int hv_cli_clean_needed(const char *s, unsigned flags);

/* ---- aligned tables ------------------------------------------------------------------------ */

typedef struct hv_cli_table_s hv_cli_table_t;

/* Creates a table with ncols columns named by headers (copied). Owned by the caller. */
hv_err hv_cli_table_create(size_t ncols, const char *const *headers, hv_cli_table_t **out);
void hv_cli_table_destroy(hv_cli_table_t *t);
/* Appends a row of ncols cells (copied; NULL or "" is shown as "-"). Control characters in a
 * cell are made visible as hv_cli_clean does (a newline as \n), so that a row stays on one line
 * and a cell cannot act on the terminal. */
hv_err hv_cli_table_add(hv_cli_table_t *t, const char *const *cells);
/* Writes the header and the rows, each column as wide as its widest cell (counted in UTF-8
 * characters), two spaces apart, without trailing blanks. */
void hv_cli_table_print(const hv_cli_table_t *t, FILE *f);
size_t hv_cli_table_rows(const hv_cli_table_t *t);

/* ---- hvctl status ------------------------------------------------------------------------- */

#define HV_CLI_STATUS_JOBS 1000u /* hvctl status counts the newest this many jobs */

#define HV_CLI_STATUS_EVENTS 5000u      /* hvctl status reads the newest this many events */
#define HV_CLI_STATUS_WINDOW_MS 600000u /* resizes counted over the last 10 minutes by default */

/* What the fleet's resizes count under (the event's kind and its data's reason word): start
 * (fleet.admit), grow (fleet.grow), and a shrink's cause (admit, priority, reclaim, share,
 * preempt), else other; the words /metrics' hv_fleet_resizes_total{cause} uses. */
#define HV_CLI_RESIZE_CAUSES 8
extern const char *const hv_cli_resize_cause_names[HV_CLI_RESIZE_CAUSES];
/* The index in hv_cli_resize_cause_names of a fleet event; -1 when kind is no fleet.* kind. */
int hv_cli_resize_cause(const char *kind, const char *data);

/* One namespace of the fleet summary. name is borrowed from the ListJobs reply. With the head's
 * policy namespaces (ListJobsReply.namespaces) policy is 1 and used/borrowed/quota/share_pm are
 * the policy's own (slots; quota 0 = none), as `hvctl queue` shows them; without, only the jobs'
 * counts are known. */
typedef struct hv_cli_fleet_ns_s {
    const char *name;
    int policy;
    uint32_t jobs;     /* its jobs placing or running */
    uint64_t workers;  /* their workers */
    uint32_t waiting;  /* its jobs pending (preempted ones too) */
    uint64_t used;     /* slots its jobs' targets and its actors hold, by the policy */
    uint64_t borrowed; /* of used, beyond its quota */
    uint64_t quota;    /* its guaranteed slots (0: none) */
    uint32_t share_pm; /* its dominant share over its weight, per mille */
} hv_cli_fleet_ns_t;

#define HV_CLI_FLEET_NS 64u /* namespaces hvctl status lists at most (hvctl queue lists all) */

/* How the cluster is shared now (issue 26), from ListJobs' fleet fields and ListEvents. */
typedef struct hv_cli_fleet_s {
    uint32_t running;   /* jobs placing or running */
    uint32_t waiting;   /* pending, not preempted */
    uint32_t preempted; /* stopped by the fleet policy for another job, to resume */
    uint64_t workers;   /* the running jobs' workers */
    uint64_t window_ms; /* resizes are counted over this long before now */
    uint64_t resizes[HV_CLI_RESIZE_CAUSES];
    int complete; /* the events read reach back over the whole window */
    hv_cli_fleet_ns_t ns[HV_CLI_FLEET_NS];
    size_t nns;     /* of ns */
    size_t ns_more; /* the policy's namespaces left out (beyond HV_CLI_FLEET_NS); without them,
                     * jobs of namespaces beyond it count in no row */
} hv_cli_fleet_t;

/* Counts the jobs (as above), per namespace, and the fleet events of ev[0..nev) (ascending, the
 * newest nev) at or after now_ms - window_ms into *out. The namespaces are the policy's ns[0..nns)
 * (ListJobsReply.namespaces, in its order), a job counting in the one its JobView.namespace_
 * names, else in "default" (as the policy counts an unlisted one); with nns 0 (a head that sends
 * none) the jobs' own namespaces ("" = "default") in the order first seen. complete: fewer than
 * limit events came back, or the oldest is older than the window. Borrows names from jobs and
 * ns. */
void hv_cli_fleet_count(Hvpb__V1__JobView *const *jobs, size_t njobs,
                        Hvpb__V1__NamespaceShare *const *ns, size_t nns, Hvpb__V1__Event *const *ev,
                        size_t nev, size_t limit, uint64_t now_ms, uint64_t window_ms,
                        hv_cli_fleet_t *out);

/* A cluster summary, counted from ListNodes and ListJobs. */
typedef struct hv_cli_status_s {
    uint32_t nodes_alive, nodes_draining, nodes_dead;
    uint64_t slots_alive;    /* slots on alive nodes */
    uint64_t slots_draining; /* slots on draining nodes (take no new work) */
    uint64_t slots_used;     /* used on alive and draining nodes */
    uint64_t slots_free;     /* free on alive nodes: what a new job can get */
    uint64_t gpus;           /* on alive and draining nodes */
    uint32_t jobs_pending, jobs_placing, jobs_running, jobs_succeeded, jobs_failed, jobs_cancelled,
        jobs_other;
    size_t jobs_counted;         /* jobs in the list (HV_CLI_STATUS_JOBS at most) */
    uint64_t demand_slots;       /* workers the pending jobs wait for (the sum of their np) */
    uint64_t grow_workers;       /* workers running elastic jobs could still add (max_np - size) */
    uint32_t grow_jobs;          /* running elastic jobs below their max_np */
    const hv_cli_fleet_t *fleet; /* the fleet's summary (borrowed), or NULL (not shown) */
} hv_cli_status_t;

/* Counts nodes (by state; slots of dead nodes count nowhere) and jobs (by state; pending jobs'
 * np into demand_slots; running elastic jobs below max_np into grow_*) into *out. */
void hv_cli_status_count(Hvpb__V1__NodeView *const *nodes, size_t nnodes,
                         Hvpb__V1__JobView *const *jobs, size_t njobs, hv_cli_status_t *out);

/* `hvctl status` for people: "cluster: NAME at HEAD", a few "label: counts" lines, then the
 * pending jobs (id, name, np, waiting since) oldest first. cluster is the head's cluster_name
 * ("" or NULL: not shown); now_ms is wall time. */
void hv_cli_status_print(FILE *f, const char *cluster, const char *head, const hv_cli_status_t *s,
                         Hvpb__V1__JobView *const *jobs, size_t njobs, uint64_t now_ms);

/* `hvctl status`'s fleet lines: "fleet:   2 running (6 workers), 1 waiting, 0 preempted", a
 * line per namespace ("  namespace x: 1 job, 2 workers, 0 waiting; 2 slots used (quota 2, 0
 * borrowed), share 50.0%" with the policy's figures; without them "..., share 50% of 4 slots",
 * its workers over the slots on alive nodes), and "resizes: ..." by cause over the window. */
void hv_cli_fleet_print(FILE *f, const hv_cli_status_t *s);

/* The actor states of ActorView.state, in the order hvctl status lists them. */
#define HV_CLI_ACTOR_STATES 6
extern const char *const hv_cli_actor_state_names[HV_CLI_ACTOR_STATES];

/* Counts r's actors by state into count (in hv_cli_actor_state_names' order; an unknown word
 * counts nowhere). */
void hv_cli_actor_count(const Hvpb__V1__ListActorsReply *r, size_t count[HV_CLI_ACTOR_STATES]);

/* 1 when the actor waits for a place, as the head says (ActorView.waiting: pending, restarting
 * with its process gone, or moving with no slot for its replacement yet): the actors hvctl
 * status lists with their reason. */
int hv_cli_actor_waiting(const Hvpb__V1__ActorView *v);

/* What `hvctl actor create` shows under an actor the head could not place yet: its reason (why
 * it waits: for room, or for a node that fits) when it is pending and the head says it waits for
 * a place (hv_cli_actor_waiting); NULL otherwise. Decided on the state and the flag, never on
 * the reason's words. */
const char *hv_cli_actor_wait_reason(const Hvpb__V1__ActorView *v);

/* An actor's history (`hvctl actor`): of its events ev[0..n) (ascending, from ListEvents with
 * actor_id), those that are a step of its life (data "step": restart, move, death) and name
 * actor_id in their data, the newest `max` of them: their indexes go to pick (room for max), in
 * ascending order. Returns how many were picked; *earlier gets how many older steps were left
 * out. */
size_t hv_cli_actor_history(Hvpb__V1__Event *const *ev, size_t n, uint64_t actor_id, size_t max,
                            size_t *pick, size_t *earlier);

/* `hvctl status --json`: {"cluster_name", "head", "nodes": {...}, "slots": {...}, "jobs": {...},
 * "actors": {"alive", "starting", "restarting", "moving", "pending", "dead"}, "pending_demand": {"jobs",
 * "slots", "waiting": [...], "actors": [{"id", "namespace", "name", "class", "state", "slots",
 * "gpus", "reason"}, ...]}, "elastic_growth": {...}, "jobs_counted", "jobs_limit", and with
 * s->fleet "fleet": {"running", "waiting", "preempted", "workers", "namespaces": [{"name",
 * "jobs", "workers", "waiting", "share" (the policy's share_pm / 1000 when known, else workers
 * over the slots on alive nodes), and with the policy's figures "share_pm" and "slots": {"used",
 * "borrowed", "quota"}}], "namespaces_left_out", "resizes": {"window_s", "complete", "by_cause":
 * {...}}}}. actors is the head's List of actors, borrowed; NULL (a head without the Actors service) leaves out both
 * actor keys. */
void hv_cli_status_json(hv_cli_json_t *j, const char *cluster, const char *head,
                        const hv_cli_status_t *s, Hvpb__V1__JobView *const *jobs, size_t njobs,
                        const Hvpb__V1__ListActorsReply *actors, uint64_t now_ms);

/* One line for a CostReply (hvsubmit's last line, hvctl cost's footer): "cost 0.0123 for
 * 412.0 instance-s (spot 380.0 s, ondemand 32.0 s); on demand 0.0456 (73% less); 2 preemptions
 * survived; 1 rollback". */
void hv_cli_cost_summary(const Hvpb__V1__CostReply *r, char *buf, size_t len);

#endif
