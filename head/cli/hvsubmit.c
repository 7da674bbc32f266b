/*
 * hvsubmit: submits one job to hvhead and, unless --detach, follows it to the end the way
 * horovodrun does: worker output on stdout/stderr as "[rank]<stdout>:text", state changes and
 * failures as "hvsubmit: ..." lines, and an exit status that says how the job ended. A program
 * the nodes have (python3 train.py: hv_cli_submit_prepare) is named in the spec, not shipped,
 * and its script and --workdir files travel as --files do. It uploads
 * the program and --file artifacts by digest first (skipping what the head already holds,
 * resuming what it holds in part, with a progress bar on a terminal or a line every few seconds
 * otherwise), says what a job waiting for slots waits for, survives a head restart while
 * watching (reconnects for up to the nodes' lease plus a margin, or --head-timeout, and resumes
 * without repeating output), says when the head cannot store its state (a full disk: the job
 * cannot move meanwhile) and waits for that no longer than the same bound, turns Ctrl-C into a cancel request and SIGTERM/SIGHUP into a
 * detach that says how to follow the job again. Its own errors exit with sysexits(3) codes
 * (cli_common.h), a job's failure with the failing rank's own status. An
 * elastic job (--min-np/--max-np) carries its options in the spec (zeros the user gave on
 * purpose are flagged, the rest take the head's defaults) and ends with a line giving its last
 * generation, size and resets. It is a client only: every check of what the cluster can run is
 * the head's. Single-threaded; blocking calls from common/rpc.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli_common.h"
#include "cli_rpc.h"
#include "hv.pb-c.h"
#include "log.h"
#include "mem.h"
#include "rpc.h"
#include "sha256.h"
#include "utf8.h"
#include "util.h"

#define SUBMIT_PROG "hvsubmit"
#define SUBMIT_UPLOAD_MS 30000u /* deadline of one Upload call */
#define SUBMIT_BACKOFF_MIN_MS 200u
#define SUBMIT_BACKOFF_MAX_MS 2000u
#define SUBMIT_CANCEL_WAIT_MS 30000u  /* after Ctrl-C, wait this long for the job to end */
#define SUBMIT_POLL_MS 200u           /* how often the watch loop looks at the Ctrl-C flag */
#define SUBMIT_BIG_UPLOAD (64u << 20) /* say "uploading ..." for files at least this big */
#define SUBMIT_PROGRESS_MS 5000u      /* not on a terminal: a progress line this often */
#define SUBMIT_BAR_MS 100u            /* on a terminal: redraw the bar at most this often */
#define SUBMIT_PENDING_MS 2000u       /* a job still pending after this: say what it waits for */
#define SUBMIT_PENDING_EVERY_MS 5000u /* then look again this often, print when it changed */
#define SUBMIT_EXIT_DETACHED HV_CLI_EXIT_TEMPFAIL /* SIGTERM/SIGHUP: the outcome is not known */

/* Ctrl-C presses seen; written only by the handler. */
static volatile sig_atomic_t submit_sigint;
/* SIGTERM or SIGHUP received (its number): detach. Written only by the handler. */
static volatile sig_atomic_t submit_detach_sig;

/* One file shipped with the job, once uploaded. */
typedef struct submit_artifact_s {
    const char *path; /* borrowed from argv */
    const char *name; /* its name in the worker's directory (borrowed) */
    char digest[65];
    uint64_t size;
    uint32_t mode; /* permission bits */
} submit_artifact_t;

/* Everything the watch loop keeps between reconnects. */
typedef struct submit_watch_s {
    hv_rpc_channel_t *ch; /* borrowed */
    const char *head;     /* borrowed, for messages */
    uint64_t job_id;
    int quiet;
    int clean_out;                  /* worker stdout lines: control characters made visible */
    int clean_err;                  /* worker stderr lines: the same (each stream a terminal) */
    int elastic;                    /* the job is elastic: its end gets a summary line */
    Hvpb__V1__JobState final_state; /* the state of the final JobView (UNSPECIFIED before) */
    uint64_t nlogs;                 /* log lines printed so far = log_offset on resume */
    uint64_t last_seq;              /* seq of the last event seen = event_after on resume */
    int cancel_sent;                /* Cancel reached the head */
    uint64_t cancel_deadline;       /* hv_now_ms() after which we stop waiting; 0 = no Ctrl-C yet */
    Hvpb__V1__JobState last_state;  /* the state of the last job.state event printed (a state is
                                      not told twice; the end does not repeat it) */
    uint64_t last_lost;             /* the worker of the last worker.lost event printed: its loss
                                    comes again as worker.fail */
    uint64_t head_wait_ms;          /* how long to wait for a head that went away */
    uint64_t submitted_at;          /* hv_now_ms() when Submit returned */
    int started;                 /* the job left "pending" (a placing/running event, any output) */
    uint64_t next_pending_check; /* hv_now_ms() of the next look at a pending job's wait */
    char pending_said[256];      /* the last "waiting for slots" line printed */
    uint64_t store_down_at;      /* hv_now_ms() when the head said it cannot store its state;
                                  * 0 = it can (the wait for it is bounded by head_wait_ms) */
    uint32_t said_ranks[64];     /* ranks whose failure an event already told (the end does not */
    size_t nsaid_ranks;          /* repeat them); past 64, the end repeats rather than forget */
} submit_watch_t;

static void submit_usage(FILE *f) {
    fprintf(f,
            "usage: hvsubmit [OPTIONS] train.bin [ARGS...]\n"
            "       hvsubmit [OPTIONS] -- python3 train.py [ARGS...]\n"
            "\n"
            "Submits train.bin (an ELF executable linked with libhv) to the hv head and follows\n"
            "the job: worker output appears as [rank]<stdout>:text and [rank]<stderr>:text.\n"
            "Options stop at the program; everything after it goes to the workers.\n"
            "A Python interpreter (python, python3, python3.11, or a path ending so), or a bare\n"
            "name that is no file here but on this PATH (bash), is not shipped: every node runs\n"
            "its own (looked up on its PATH, or the absolute path given), with the hv package\n"
            "importable. Its first argument that is a file here (the script) is shipped and\n"
            "run from the worker's directory. A node without the program fails its worker\n"
            "with a message naming the node and the program (docs/python.md).\n"
            "\n"
            "options:\n");
    hv_cli_submit_options_help(f);
    fprintf(f,
            "Left out, these take the head's defaults (the elastic: section of its config).\n"
            "When an elastic job ends, hvsubmit prints its last generation, size and resets,\n"
            "and, when it ran on nodes the autoscaler bought, what it cost (hvctl cost).\n"
            "\n"
            "exit status:\n"
            "  0    the job succeeded\n"
            "  N    the first failing rank's own exit status (1..255), or 128+signal when it\n"
            "       was killed by a signal\n"
            "  1    the job failed without a failing rank (waited too long for slots, cancelled\n"
            "       by someone else, workers lost)\n"
            "  64   bad usage\n"
            "  65   the input was refused: not an ELF executable that can run, or the head\n"
            "       refused the request (-np the cluster can never hold, over max_upload)\n"
            "  66   a file is missing or unreadable, or the head no longer knows the job\n"
            "  69   the head cannot be reached, or went away and did not come back in time\n"
            "  70   internal error\n"
            "  74   reading a local file failed\n"
            "  75   the head is busy (too many streams open, no room for an upload: try again\n"
            "       later) or did not answer in time, or cannot store its state (a full disk:\n"
            "       the job is refused, or a job followed is stuck for longer than\n"
            "       --head-timeout); or hvsubmit detached on SIGTERM/SIGHUP (the job goes on)\n"
            "  77   the head refused our credentials or the operation\n"
            "  130  cancelled with Ctrl-C\n"
            "Ctrl-C cancels the job and waits for it to end; a second Ctrl-C exits at once.\n"
            "SIGTERM or SIGHUP detach: the job goes on, and hvsubmit says how to follow it\n"
            "(hvctl logs -f ID).\n");
}

static void submit_on_sigint(int sig) {
    (void)sig;
    if (submit_sigint >= 1) {
        static const char msg[] = "\nhvsubmit: interrupted again, exiting (the job may still be "
                                  "cancelling)\n";
        ssize_t n = write(STDERR_FILENO, msg, sizeof(msg) - 1);
        (void)n;
        _exit(HV_CLI_EXIT_SIGINT);
    }
    submit_sigint = 1;
}

static void submit_on_detach(int sig) { submit_detach_sig = sig; }

static void submit_install_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = submit_on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: a blocking read should see EINTR */
    sigaction(SIGINT, &sa, NULL);
    sa.sa_handler = submit_on_detach;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* Sleeps ms, waking early on Ctrl-C, SIGTERM or SIGHUP. */
static void submit_sleep(uint32_t ms) {
    uint64_t end = hv_now_ms() + ms;
    while (!submit_sigint && !submit_detach_sig) {
        uint64_t now = hv_now_ms();
        if (now >= end) {
            break;
        }
        uint64_t left = end - now;
        struct timespec ts = {0, (long)((left < 50 ? left : 50) * 1000000L)};
        nanosleep(&ts, NULL);
    }
}

/* ---- upload --------------------------------------------------------------------------------- */

/* An upload's progress display: a bar redrawn in place on a terminal, else a line every
 * SUBMIT_PROGRESS_MS. */
typedef struct submit_progress_s {
    int on;         /* show anything at all (not --quiet) */
    int tty;        /* stderr is a terminal */
    uint64_t start; /* hv_now_ms() at the start */
    uint64_t last;  /* hv_now_ms() of the last draw */
    int shown;      /* something was drawn: the end gets a closing line */
} submit_progress_t;

static void submit_progress(submit_progress_t *p, const submit_artifact_t *a, uint64_t done) {
    if (!p->on) {
        return;
    }
    uint64_t now = hv_now_ms();
    char line[512];
    const char *name = a->name;
    if (p->tty) {
        if (a->size < HV_CLI_UPLOAD_CHUNK || (now - p->last < SUBMIT_BAR_MS && done < a->size)) {
            return;
        }
        fprintf(stderr, "\r" SUBMIT_PROG ": %s\033[K",
                hv_cli_fmt_progress(name, done, a->size, 30, line, sizeof(line)));
        if (done >= a->size) {
            fputc('\n', stderr);
        }
        fflush(stderr);
        p->last = now;
        p->shown = 1;
        return;
    }
    if (done >= a->size) {
        if (p->shown) {
            char sz[32];
            fprintf(stderr, SUBMIT_PROG ": uploaded %s (%s) in %.1f s\n", name,
                    hv_fmt_size(a->size, sz, sizeof(sz)), (double)(now - p->start) / 1000.0);
        }
        return;
    }
    if (now - p->last >= SUBMIT_PROGRESS_MS) {
        fprintf(stderr, SUBMIT_PROG ": %s\n",
                hv_cli_fmt_progress(name, done, a->size, 0, line, sizeof(line)));
        p->last = now;
        p->shown = 1;
    }
}

/* Reads exactly len bytes at off. HV_EIO with a message if the file shrank or failed. */
static hv_err submit_pread(int fd, const char *path, void *buf, size_t len, uint64_t off) {
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, (char *)buf + got, len - got, (off_t)(off + got));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            fprintf(stderr, SUBMIT_PROG ": cannot read %s: %s\n", path, strerror(errno));
            return HV_EIO;
        }
        if (n == 0) {
            fprintf(stderr, SUBMIT_PROG ": %s changed while it was being uploaded\n", path);
            return HV_EIO;
        }
        got += (size_t)n;
    }
    return HV_OK;
}

/* Asks the head what it holds of digest. On 0 the reply is owned by the caller. Prints the
 * error itself otherwise and returns the exit status. */
static int submit_stat(hv_rpc_channel_t *ch, const char *head, const char *digest,
                       Hvpb__V1__StatArtifactReply **out) {
    Hvpb__V1__StatArtifactRequest req = HVPB__V1__STAT_ARTIFACT_REQUEST__INIT;
    req.digest = (char *)digest;
    ProtobufCMessage *resp = NULL;
    hv_rpc_status_t st;
    hv_err rc =
        hv_cli_rpc_unary(ch, "/hvpb.v1.Jobs/StatArtifact", &req.base,
                         &hvpb__v1__stat_artifact_reply__descriptor, HV_CLI_UNARY_MS, &resp, &st);
    if (rc != HV_OK) {
        return hv_cli_rpc_report(SUBMIT_PROG, head, "StatArtifact", &st, HV_CLI_UNARY_MS);
    }
    *out = (Hvpb__V1__StatArtifactReply *)resp;
    return HV_CLI_EXIT_OK;
}

/* Sends the bytes of path from offset on, one Upload call per chunk. The head may answer an
 * offset mismatch (someone else is uploading the same file, or it lost a partial upload across
 * a restart): then we ask it again where to resume, a few times. Prints its own errors. */
static int submit_send(hv_rpc_channel_t *ch, const char *head, const submit_artifact_t *a,
                       uint64_t offset, int verbose, int quiet) {
    int status = HV_CLI_EXIT_IOERR;
    submit_progress_t prog = {.on = !quiet, .tty = isatty(STDERR_FILENO), .start = hv_now_ms()};
    prog.last = prog.start;
    int retries = 0;
    unsigned char *buf = hv_malloc(HV_CLI_UPLOAD_CHUNK);
    int fd = open(a->path, O_RDONLY | O_CLOEXEC);
    if (buf == NULL || fd < 0) {
        fprintf(stderr, SUBMIT_PROG ": cannot read %s: %s\n", a->path,
                buf == NULL ? "out of memory" : strerror(errno));
        goto out;
    }
    if (verbose) {
        fprintf(stderr, SUBMIT_PROG ": uploading %s from byte %llu\n", a->path,
                (unsigned long long)offset);
    }
    for (;;) {
        uint64_t left = a->size - offset;
        size_t n = left < HV_CLI_UPLOAD_CHUNK ? (size_t)left : HV_CLI_UPLOAD_CHUNK;
        if (submit_pread(fd, a->path, buf, n, offset) != HV_OK) {
            goto out;
        }
        Hvpb__V1__UploadChunk chunk = HVPB__V1__UPLOAD_CHUNK__INIT;
        chunk.digest = (char *)a->digest;
        chunk.total_size = a->size;
        chunk.offset = offset;
        chunk.data.data = buf;
        chunk.data.len = n;
        chunk.last = offset + n == a->size;
        ProtobufCMessage *resp = NULL;
        hv_rpc_status_t st;
        hv_err rc =
            hv_cli_rpc_unary(ch, "/hvpb.v1.Jobs/Upload", &chunk.base,
                             &hvpb__v1__upload_reply__descriptor, SUBMIT_UPLOAD_MS, &resp, &st);
        if (rc != HV_OK) {
            /* The head answers UNAVAILABLE itself, with its words, when its upload_quota is
             * full: that is reported (exit 75, try again later), not retried here. */
            int lost = hv_cli_rpc_unreachable(&st) && hv_cli_rpc_transport_detail(&st);
            int resumable = st.grpc_code == HV_CLI_GRPC_FAILED_PRECONDITION ||
                            st.grpc_code == HV_CLI_GRPC_OUT_OF_RANGE || lost;
            if (prog.shown && prog.tty) {
                fputc('\n', stderr);
            }
            if (!resumable || ++retries > 5) {
                if (hv_cli_rpc_head_message(&st) && !lost) {
                    char line[HV_CLI_ERR_LEN + 600];
                    snprintf(line, sizeof(line), "upload of %s failed: %s", a->path, st.msg);
                    hv_cli_say(stderr, SUBMIT_PROG, line);
                    status = hv_cli_rpc_exit_code(&st);
                } else {
                    status =
                        hv_cli_rpc_report(SUBMIT_PROG, head, "an upload", &st, SUBMIT_UPLOAD_MS);
                }
                goto out;
            }
            if (lost) {
                submit_sleep(1000);
            }
            Hvpb__V1__StatArtifactReply *sr = NULL;
            if ((status = submit_stat(ch, head, a->digest, &sr)) != HV_CLI_EXIT_OK) {
                goto out;
            }
            status = HV_CLI_EXIT_IOERR;
            int present = sr->present;
            offset = sr->received <= a->size ? sr->received : 0;
            hv_rpc_msg_free(&sr->base);
            if (present) {
                break;
            }
            continue;
        }
        Hvpb__V1__UploadReply *ur = (Hvpb__V1__UploadReply *)resp;
        int complete = ur->complete;
        uint64_t received = ur->received;
        hv_rpc_msg_free(resp);
        submit_progress(&prog, a, complete ? a->size : received);
        if (complete) {
            break;
        }
        if (chunk.last || received <= offset || received > a->size) {
            status = HV_CLI_EXIT_SOFTWARE;
            fprintf(stderr,
                    SUBMIT_PROG ": upload of %s: the head holds %llu of %llu bytes after the "
                                "last piece and did not accept the file\n",
                    a->path, (unsigned long long)received, (unsigned long long)a->size);
            goto out;
        }
        offset = received;
    }
    status = HV_CLI_EXIT_OK;
out:
    if (fd >= 0) {
        close(fd);
    }
    hv_free(buf);
    return status;
}

/* Hashes path and makes sure the head holds it. Returns an exit status (0 = done). */
static int submit_upload(hv_rpc_channel_t *ch, const char *head, const char *path, const char *name,
                         const submit_artifact_t *done, size_t ndone, int quiet, int verbose,
                         submit_artifact_t *a) {
    struct stat sb;
    if (stat(path, &sb) != 0) {
        fprintf(stderr, SUBMIT_PROG ": %s: %s\n", path, strerror(errno));
        return HV_CLI_EXIT_NOINPUT;
    }
    memset(a, 0, sizeof(*a));
    a->path = path;
    a->name = name;
    a->mode = (uint32_t)(sb.st_mode & 07777);
    hv_err rc = hv_sha256_file(path, a->digest, &a->size);
    if (rc != HV_OK) {
        fprintf(stderr, SUBMIT_PROG ": cannot read %s: %s\n", path, hv_strerror(rc));
        return HV_CLI_EXIT_IOERR;
    }
    for (size_t i = 0; i < ndone; i++) {
        if (strcmp(done[i].digest, a->digest) == 0) {
            return HV_CLI_EXIT_OK; /* the same bytes were just uploaded under another name */
        }
    }
    Hvpb__V1__StatArtifactReply *sr = NULL;
    int st = submit_stat(ch, head, a->digest, &sr);
    if (st != HV_CLI_EXIT_OK) {
        return st;
    }
    int present = sr->present;
    uint64_t received = sr->received;
    uint64_t max_size = sr->max_size;
    hv_rpc_msg_free(&sr->base);
    if (max_size != 0 && a->size > max_size) {
        char have[32], limit[32];
        fprintf(stderr,
                SUBMIT_PROG ": %s is %s, over the head's upload limit of %s (max_upload in the "
                            "head's config)\n",
                path, hv_fmt_size(a->size, have, sizeof(have)),
                hv_fmt_size(max_size, limit, sizeof(limit)));
        return HV_CLI_EXIT_DATAERR;
    }
    if (present) {
        if (verbose) {
            fprintf(stderr,
                    SUBMIT_PROG ": %s is already on the head (sha256 %.12s), not "
                                "uploading it\n",
                    path, a->digest);
        }
        return HV_CLI_EXIT_OK;
    }
    if (received > a->size) {
        received = 0;
    }
    if (!quiet && a->size >= SUBMIT_BIG_UPLOAD && !isatty(STDERR_FILENO)) {
        char sz[32];
        fprintf(stderr, SUBMIT_PROG ": uploading %s (%s)...\n", path,
                hv_fmt_size(a->size, sz, sizeof(sz)));
    }
    return submit_send(ch, head, a, received, verbose, quiet);
}

/* ---- submit --------------------------------------------------------------------------------- */

/* Who submits, for display ($USER, else the uid's name); bytes that are not UTF-8 text become
 * '?' (the head takes UTF-8 only, and an odd $USER must not stop a job). */
static const char *submit_user(void) {
    static char user[257]; /* the head takes 256 bytes of JobSpec.user */
    const char *u = getenv("USER");
    if (u == NULL || u[0] == '\0') {
        struct passwd *pw = getpwuid(getuid());
        u = pw != NULL && pw->pw_name != NULL ? pw->pw_name : "";
    }
    snprintf(user, sizeof(user), "%s", u);
    hv_utf8_repair(user);
    return user;
}

static void submit_fileref(Hvpb__V1__FileRef *ref, const submit_artifact_t *a) {
    hvpb__v1__file_ref__init(ref);
    ref->name = (char *)a->name;
    ref->digest = (char *)a->digest;
    ref->size = a->size;
    ref->mode = a->mode;
}

/* A Python interpreter run from the nodes (hvsubmit -- python3.12 train.py) that no node has:
 * refused here, before any upload (hv_cli_interp_missing), with exit 65. When the nodes cannot
 * be listed, or not all on one page, the check is left to the nodes (a worker of a node without
 * the program fails, naming the node). */
static int submit_check_interp(hv_rpc_channel_t *ch, const hv_cli_submit_opts_t *o) {
    Hvpb__V1__ListNodesRequest req = HVPB__V1__LIST_NODES_REQUEST__INIT;
    ProtobufCMessage *resp = NULL;
    hv_rpc_status_t st;
    if (hv_rpc_unary(ch, "/hvpb.v1.Jobs/ListNodes", &req.base,
                     &hvpb__v1__list_nodes_reply__descriptor, HV_CLI_UNARY_MS, &resp,
                     &st) != HV_OK) {
        return HV_CLI_EXIT_OK; /* Submit reports what is wrong with the head */
    }
    const Hvpb__V1__ListNodesReply *r = (const Hvpb__V1__ListNodesReply *)resp;
    char msg[1024];
    int missing = (r->next_page_token == NULL || r->next_page_token[0] == '\0') &&
                  hv_cli_interp_missing(o->binary, r->nodes, r->n_nodes, msg, sizeof(msg));
    hv_rpc_msg_free(resp);
    if (missing) {
        fprintf(stderr, SUBMIT_PROG ": %s\n", msg);
        return HV_CLI_EXIT_DATAERR;
    }
    return HV_CLI_EXIT_OK;
}

/* Sends the spec. On success *job_id and *np are set; otherwise the error is printed and an
 * exit status returned. */
static int submit_job(hv_rpc_channel_t *ch, const char *head, const hv_cli_submit_opts_t *o,
                      const submit_artifact_t *arts, uint64_t *job_id, uint32_t *np,
                      uint32_t *lease_ms) {
    int status = HV_CLI_EXIT_FAIL;
    Hvpb__V1__KeyValue *kvs = hv_calloc(o->nenv + 1, sizeof(*kvs));
    Hvpb__V1__KeyValue **kvp = hv_calloc(o->nenv + 1, sizeof(*kvp));
    Hvpb__V1__FileRef *refs = hv_calloc(o->nfiles + 1, sizeof(*refs));
    Hvpb__V1__FileRef **refp = hv_calloc(o->nfiles + 1, sizeof(*refp));
    if (kvs == NULL || kvp == NULL || refs == NULL || refp == NULL) {
        fprintf(stderr, SUBMIT_PROG ": out of memory\n");
        goto out;
    }
    for (size_t i = 0; i < o->nenv; i++) {
        hvpb__v1__key_value__init(&kvs[i]);
        kvs[i].key = o->env[i].key;
        kvs[i].value = o->env[i].value;
        kvp[i] = &kvs[i];
    }
    for (size_t i = 0; i < o->nfiles; i++) {
        submit_fileref(&refs[i + 1], &arts[i + 1]);
        refp[i] = &refs[i + 1];
    }
    if (!o->command) {
        submit_fileref(&refs[0], &arts[0]);
    }

    Hvpb__V1__JobSpec spec = HVPB__V1__JOB_SPEC__INIT;
    spec.name = (char *)(o->name ? o->name : o->script ? o->script : hv_cli_basename(o->binary));
    if (o->command) {
        spec.command = (char *)o->binary; /* run from the node's PATH, not shipped */
    } else {
        spec.binary = &refs[0];
    }
    spec.n_args = (size_t)o->nargs;
    spec.args = o->args;
    spec.n_env = o->nenv;
    spec.env = kvp;
    spec.n_files = o->nfiles;
    spec.files = refp;
    spec.np = o->np_set ? o->np : 0;
    spec.min_np = o->min_np;
    spec.max_np = o->max_np;
    spec.target_np = o->grow != NULL ? o->np : 0; /* the schedule moves it from there */
    spec.max_resets = o->max_resets;
    spec.max_resets_set = o->max_resets_set;
    spec.elastic = o->elastic;
    spec.elastic_timeout_s = o->elastic_timeout_s;
    spec.check_every = o->check_every;
    spec.cooldown_min_s = o->cooldown_min_s;
    spec.cooldown_max_s = o->cooldown_max_s;
    spec.cooldown_set = o->cooldown_set;
    spec.slots_per_host = o->slots_per_host;
    spec.namespace_ = (char *)(o->ns != NULL ? o->ns : "");
    spec.priority = o->priority;
    spec.priority_set = o->priority_set;
    spec.preemptible = o->preemptible;
    spec.timeout_s = o->timeout_s;
    spec.user = (char *)submit_user();
    Hvpb__V1__SubmitRequest req = HVPB__V1__SUBMIT_REQUEST__INIT;
    req.spec = &spec;

    ProtobufCMessage *resp = NULL;
    hv_rpc_status_t st;
    if (hv_cli_rpc_unary(ch, "/hvpb.v1.Jobs/Submit", &req.base, &hvpb__v1__submit_reply__descriptor,
                         HV_CLI_UNARY_MS, &resp, &st) != HV_OK) {
        status = hv_cli_rpc_report(SUBMIT_PROG, head, "Submit", &st, HV_CLI_UNARY_MS);
        goto out;
    }
    Hvpb__V1__SubmitReply *sr = (Hvpb__V1__SubmitReply *)resp;
    *job_id = sr->job_id;
    *np = sr->np;
    *lease_ms = sr->lease_ms;
    hv_rpc_msg_free(resp);
    status = HV_CLI_EXIT_OK;
out:
    hv_free(refp);
    hv_free(refs);
    hv_free(kvp);
    hv_free(kvs);
    return status;
}

/* Sends Cancel. Returns 1 when there is no point in sending it again (the head took it, or
 * refused it for good: the error is printed), 0 when the head could not be reached. */
static int submit_cancel(submit_watch_t *w) {
    Hvpb__V1__JobRef ref = HVPB__V1__JOB_REF__INIT;
    ref.job_id = w->job_id;
    ProtobufCMessage *resp = NULL;
    hv_rpc_status_t st;
    hv_err rc = hv_cli_rpc_unary(w->ch, "/hvpb.v1.Jobs/Cancel", &ref.base,
                                 &hvpb__v1__cancel_reply__descriptor, HV_CLI_UNARY_MS, &resp, &st);
    if (rc != HV_OK) {
        if (hv_cli_rpc_unreachable(&st)) {
            return 0;
        }
        hv_cli_rpc_report(SUBMIT_PROG, w->head, "Cancel", &st, HV_CLI_UNARY_MS);
        return 1;
    }
    hv_rpc_msg_free(resp);
    return 1;
}

/* ---- watch ---------------------------------------------------------------------------------- */

/* True when a worker event already told rank's failure. */
static int submit_rank_said(const submit_watch_t *w, uint32_t rank) {
    for (size_t i = 0; i < w->nsaid_ranks; i++) {
        if (w->said_ranks[i] == rank) {
            return 1;
        }
    }
    return 0;
}

/* The job's cost line, when it ran on nodes the autoscaler bought (a head without the Cost call,
 * or one that does not answer in time, prints nothing). */
static void submit_cost(const submit_watch_t *w) {
    Hvpb__V1__CostRequest req = HVPB__V1__COST_REQUEST__INIT;
    req.job_id = w->job_id;
    ProtobufCMessage *resp = NULL;
    hv_rpc_status_t st;
    if (hv_rpc_unary(w->ch, "/hvpb.v1.Jobs/Cost", &req.base, &hvpb__v1__cost_reply__descriptor,
                     HV_CLI_UNARY_MS, &resp, &st) != HV_OK) {
        return;
    }
    const Hvpb__V1__CostReply *r = (const Hvpb__V1__CostReply *)resp;
    int bought = 0;
    for (size_t i = 0; i < r->n_types; i++) {
        bought |= strcmp(r->types[i]->type, "manual") != 0;
    }
    if (bought) {
        char line[1024];
        hv_cli_cost_summary(r, line, sizeof(line));
        fprintf(stderr, SUBMIT_PROG ": job %llu %s\n", (unsigned long long)w->job_id, line);
    }
    hv_rpc_msg_free(resp);
}

/* Prints the end of the job and returns the exit status. */
static int submit_finish(const submit_watch_t *w, const Hvpb__V1__JobView *v) {
    const Hvpb__V1__WorkerView *first = NULL;
    int status = hv_cli_job_exit_status(v, w->cancel_sent || w->cancel_deadline != 0, &first);
    char line[1024];
    Hvpb__V1__JobState st = hv_cli_job_state(v);
    if (st == HVPB__V1__JOB_STATE__JOB_STATE_FAILED) {
        /* The head's last state event usually says exactly this already. */
        if (v->reason[0] != '\0') {
            snprintf(line, sizeof(line), "job %llu failed: %s", (unsigned long long)w->job_id,
                     v->reason);
        } else {
            snprintf(line, sizeof(line), "job %llu failed", (unsigned long long)w->job_id);
        }
        if (w->last_state != st) {
            hv_cli_say(stderr, SUBMIT_PROG, line);
        }
        for (size_t i = 0; i < v->n_workers; i++) {
            const Hvpb__V1__WorkerView *wv = v->workers[i];
            if (wv != NULL && hv_cli_worker_failed(wv) && !submit_rank_said(w, wv->rank)) {
                hv_cli_say(stderr, SUBMIT_PROG, hv_cli_worker_outcome(wv, line, sizeof(line)));
            }
        }
    } else if (st == HVPB__V1__JOB_STATE__JOB_STATE_CANCELLED) {
        snprintf(line, sizeof(line), "job %llu cancelled%s%s", (unsigned long long)w->job_id,
                 v->reason[0] ? ": " : "", v->reason);
        if (w->last_state != st) {
            hv_cli_say(stderr, SUBMIT_PROG, line);
        }
    } else if (st != HVPB__V1__JOB_STATE__JOB_STATE_SUCCEEDED) {
        snprintf(line, sizeof(line), "job %llu ended in state '%s'%s%s",
                 (unsigned long long)w->job_id, hv_cli_job_state_name(st), v->reason[0] ? ": " : "",
                 v->reason);
        hv_cli_say(stderr, SUBMIT_PROG, line);
    }
    /* An elastic job's size changed along the way: say where it ended ("succeeded: generation
     * 3, 2 workers, 1 reset"), after the reason when it did not succeed. --quiet keeps it for
     * the jobs that did not succeed. */
    int ok = st == HVPB__V1__JOB_STATE__JOB_STATE_SUCCEEDED;
    if ((w->elastic || v->elastic) && !(ok && w->quiet)) {
        char sum[900];
        snprintf(line, sizeof(line), "job %llu %s: %s", (unsigned long long)w->job_id,
                 ok ? "succeeded" : "at its end", hv_cli_elastic_summary(v, sum, sizeof(sum)));
        hv_cli_say(stderr, SUBMIT_PROG, line);
    }
    if (!(ok && w->quiet)) {
        submit_cost(w);
    }
    return status;
}

/* Handles one item; returns -1 to go on, else the exit status. */
static int submit_item(submit_watch_t *w, const Hvpb__V1__WatchItem *it) {
    switch (it->body_case) {
    case HVPB__V1__WATCH_ITEM__BODY_LOG:
    case HVPB__V1__WATCH_ITEM__BODY_LOGS: {
        Hvpb__V1__LogLine *one = it->log;
        Hvpb__V1__LogLine **lines = &one;
        size_t n = 1;
        if (it->body_case == HVPB__V1__WATCH_ITEM__BODY_LOGS) {
            lines = it->logs->lines;
            n = it->logs->n_lines;
        }
        for (size_t i = 0; i < n; i++) {
            const Hvpb__V1__LogLine *l = lines[i];
            FILE *f = l->stream == 2 ? stderr : stdout;
            fprintf(f, "[%u]<%s>:", (unsigned)l->rank, l->stream == 2 ? "stderr" : "stdout");
            if (l->stream == 2 ? w->clean_err : w->clean_out) {
                hv_cli_clean_write(f, l->text, HV_CLI_CLEAN_TAB);
            } else {
                fputs(l->text, f);
            }
            fputc('\n', f);
        }
        fflush(stdout); /* whole batches at a time: lines stay live, writes stay few */
        fflush(stderr);
        w->nlogs += n;
        w->started = 1;
        return -1;
    }
    case HVPB__V1__WATCH_ITEM__BODY_EVENT: {
        const Hvpb__V1__Event *e = it->event;
        if (e->seq != 0 && e->seq <= w->last_seq) {
            return -1; /* already shown before a reconnect */
        }
        if (e->seq > w->last_seq) {
            w->last_seq = e->seq;
        }
        /* The head's state writes fail (a full disk), or work again: said even with --quiet,
         * since the job cannot move meanwhile; the wait is bounded in submit_watch. */
        if (strcmp(e->kind, "head.store.down") == 0 || strcmp(e->kind, "head.store.up") == 0) {
            int down = strcmp(e->kind, "head.store.down") == 0;
            if (down && w->store_down_at == 0) {
                w->store_down_at = hv_now_ms();
            } else if (!down) {
                w->store_down_at = 0;
            }
            fprintf(stderr, SUBMIT_PROG ": %s\n", e->message);
            return -1;
        }
        /* Decided on the event's kind and fields, never on its message (words for people). */
        int is_state = strcmp(e->kind, "job.state") == 0;
        int is_worker = strncmp(e->kind, "worker.", 7) == 0;
        if (is_state && e->job_state != HVPB__V1__JOB_STATE__JOB_STATE_UNSPECIFIED &&
            e->job_state != HVPB__V1__JOB_STATE__JOB_STATE_PENDING) {
            w->started = 1;
        }
        /* hvsubmit said "job N submitted (...)" itself: the head's event (the job's pending
         * state) says it again. An elastic job's end says "job N succeeded: generation G, ..."
         * (submit_finish): the head's plain "job N succeeded" would come just before it. A
         * state already told is not told again. */
        int said = is_state && e->job_state == HVPB__V1__JOB_STATE__JOB_STATE_PENDING;
        said |= w->elastic && is_state && e->job_state == HVPB__V1__JOB_STATE__JOB_STATE_SUCCEEDED;
        said |= is_state && e->job_state != HVPB__V1__JOB_STATE__JOB_STATE_UNSPECIFIED &&
                e->job_state == w->last_state;
        /* A lost worker is told twice in a row, by worker.lost and worker.fail. */
        said |= strcmp(e->kind, "worker.fail") == 0 && e->worker_id != 0 &&
                e->worker_id == w->last_lost;
        if (!w->quiet && !said && hv_cli_event_shown(e->kind, w->elastic)) {
            if (is_worker && e->worker_id != 0 &&
                w->nsaid_ranks < sizeof(w->said_ranks) / sizeof(w->said_ranks[0])) {
                w->said_ranks[w->nsaid_ranks++] = e->rank;
            }
            hv_cli_say(stderr, SUBMIT_PROG, e->message);
            if (strcmp(e->kind, "worker.lost") == 0) {
                w->last_lost = e->worker_id;
            }
            if (is_state) {
                w->last_state = e->job_state;
            }
        }
        return -1;
    }
    case HVPB__V1__WATCH_ITEM__BODY_DONE:
        w->final_state = hv_cli_job_state(it->done);
        return submit_finish(w, it->done);
    default:
        return -1; /* a newer head's item: ignore */
    }
}

/* SIGTERM/SIGHUP: leave the job running and say how to follow it. Returns the exit status. */
static int submit_detach(const submit_watch_t *w) {
    const char *sig = submit_detach_sig == SIGHUP ? "SIGHUP" : "SIGTERM";
    fprintf(stderr,
            SUBMIT_PROG ": %s: detached; job %llu goes on: follow it with 'hvctl logs -f %llu', "
                        "see its state with 'hvctl job %llu', stop it with 'hvctl cancel %llu'\n",
            sig, (unsigned long long)w->job_id, (unsigned long long)w->job_id,
            (unsigned long long)w->job_id, (unsigned long long)w->job_id);
    return SUBMIT_EXIT_DETACHED;
}

/* Tries to get the head back after the watch stream broke: asks GetJob until it answers, for
 * up to w->head_wait_ms. Returns -1 when the head is back, else the exit status. */
static int submit_reconnect(submit_watch_t *w, const hv_rpc_status_t *why) {
    fprintf(stderr, SUBMIT_PROG ": lost the head, reconnecting...\n");
    uint64_t start = hv_now_ms();
    uint32_t backoff = SUBMIT_BACKOFF_MIN_MS;
    hv_rpc_status_t st = *why;
    for (;;) {
        if (submit_detach_sig) {
            return submit_detach(w);
        }
        if (hv_now_ms() - start >= w->head_wait_ms) {
            char words[300];
            fprintf(stderr,
                    SUBMIT_PROG ": gave up after %llu s: the head at %s did not come back (%s); "
                                "job %llu may still be running: see 'hvctl job %llu' once the "
                                "head is back (--head-timeout S sets this wait)\n",
                    (unsigned long long)((w->head_wait_ms + 999) / 1000), w->head,
                    hv_cli_rpc_transport_words(&st, w->head, words, sizeof(words)),
                    (unsigned long long)w->job_id, (unsigned long long)w->job_id);
            return HV_CLI_EXIT_UNAVAILABLE;
        }
        if (w->cancel_deadline != 0 && hv_now_ms() >= w->cancel_deadline) {
            fprintf(stderr, SUBMIT_PROG ": the head did not come back to cancel job %llu\n",
                    (unsigned long long)w->job_id);
            return HV_CLI_EXIT_SIGINT;
        }
        submit_sleep(backoff);
        backoff = backoff * 2 > SUBMIT_BACKOFF_MAX_MS ? SUBMIT_BACKOFF_MAX_MS : backoff * 2;
        if (submit_sigint && w->cancel_deadline == 0) {
            fprintf(stderr, SUBMIT_PROG ": cancelling job %llu once the head is back...\n",
                    (unsigned long long)w->job_id);
            w->cancel_deadline = hv_now_ms() + SUBMIT_CANCEL_WAIT_MS;
        }
        Hvpb__V1__JobRef ref = HVPB__V1__JOB_REF__INIT;
        ref.job_id = w->job_id;
        ProtobufCMessage *resp = NULL;
        hv_err rc = hv_cli_rpc_unary(w->ch, "/hvpb.v1.Jobs/GetJob", &ref.base,
                                     &hvpb__v1__job_view__descriptor, HV_CLI_UNARY_MS, &resp, &st);
        if (rc == HV_OK) {
            hv_rpc_msg_free(resp);
            if (!w->quiet) {
                fprintf(stderr, SUBMIT_PROG ": reconnected to the head\n");
            }
            return -1;
        }
        if (st.grpc_code == HV_CLI_GRPC_NOT_FOUND || rc == HV_ENOTFOUND) {
            int said = hv_cli_rpc_head_message(&st);
            char line[HV_CLI_ERR_LEN + 64];
            snprintf(line, sizeof(line), "the head no longer knows job %llu%s%s",
                     (unsigned long long)w->job_id, said ? ": " : "", said ? st.msg : "");
            hv_cli_say(stderr, SUBMIT_PROG, line);
            return HV_CLI_EXIT_NOINPUT;
        }
    }
}

/* A job still pending a while after Submit: says what it waits for (how many slots, how many
 * are free), again whenever that changes. Looks at most every SUBMIT_PENDING_EVERY_MS. */
static void submit_pending(submit_watch_t *w) {
    uint64_t now = hv_now_ms();
    if (w->started || w->quiet || submit_sigint || now < w->next_pending_check) {
        return;
    }
    w->next_pending_check = now + SUBMIT_PENDING_EVERY_MS;
    Hvpb__V1__JobRef ref = HVPB__V1__JOB_REF__INIT;
    ref.job_id = w->job_id;
    ProtobufCMessage *resp = NULL;
    hv_rpc_status_t st;
    if (hv_rpc_unary(w->ch, "/hvpb.v1.Jobs/GetJob", &ref.base, &hvpb__v1__job_view__descriptor,
                     HV_CLI_UNARY_MS, &resp, &st) != HV_OK) {
        return; /* the watch stream notices a lost head */
    }
    const Hvpb__V1__JobView *v = (const Hvpb__V1__JobView *)resp;
    int pending = hv_cli_job_state(v) == HVPB__V1__JOB_STATE__JOB_STATE_PENDING;
    /* An elastic job starts once min-np slots are free (core/cluster.h, hv_cl_start). */
    uint32_t np = v->elastic && v->min_np > 0 && v->min_np < v->np ? v->min_np : v->np;
    hv_rpc_msg_free(resp);
    if (!pending) {
        w->started = 1;
        return;
    }
    Hvpb__V1__ListNodesRequest lreq = HVPB__V1__LIST_NODES_REQUEST__INIT;
    resp = NULL;
    if (hv_rpc_unary(w->ch, "/hvpb.v1.Jobs/ListNodes", &lreq.base,
                     &hvpb__v1__list_nodes_reply__descriptor, HV_CLI_UNARY_MS, &resp,
                     &st) != HV_OK) {
        return;
    }
    const Hvpb__V1__ListNodesReply *r = (const Hvpb__V1__ListNodesReply *)resp;
    char line[256];
    hv_cli_fmt_pending(np, r->nodes, r->n_nodes, line, sizeof(line));
    hv_rpc_msg_free(resp);
    if (strcmp(line, w->pending_said) != 0) {
        fprintf(stderr, SUBMIT_PROG ": job %llu is %s\n", (unsigned long long)w->job_id, line);
        snprintf(w->pending_said, sizeof(w->pending_said), "%s", line);
    }
}

/* Follows the job to its end. Returns the exit status. */
static int submit_watch(submit_watch_t *w) {
    hv_rpc_bstream_t *s = NULL;
    int status = -1;
    while (status < 0) {
        if (submit_detach_sig && !submit_sigint) {
            status = submit_detach(w);
            break;
        }
        submit_pending(w);
        /* Ctrl-C: ask the head to cancel (once it answers), then keep watching, bounded. */
        if (submit_sigint && !w->cancel_sent) {
            if (w->cancel_deadline == 0) {
                fprintf(stderr, SUBMIT_PROG ": cancelling job %llu...\n",
                        (unsigned long long)w->job_id);
                w->cancel_deadline = hv_now_ms() + SUBMIT_CANCEL_WAIT_MS;
            }
            w->cancel_sent = submit_cancel(w);
        }
        if (w->cancel_deadline != 0 && hv_now_ms() >= w->cancel_deadline) {
            fprintf(stderr,
                    SUBMIT_PROG ": job %llu did not end within %u s of the cancel "
                                "request; see 'hvctl job %llu'\n",
                    (unsigned long long)w->job_id, SUBMIT_CANCEL_WAIT_MS / 1000,
                    (unsigned long long)w->job_id);
            status = HV_CLI_EXIT_SIGINT;
            break;
        }
        if (w->store_down_at != 0 && hv_now_ms() - w->store_down_at >= w->head_wait_ms) {
            fprintf(stderr,
                    SUBMIT_PROG ": gave up after %llu s: the head still cannot store its state; "
                                "job %llu may still be running: see 'hvctl job %llu' once it "
                                "can (--head-timeout S sets this wait)\n",
                    (unsigned long long)((w->head_wait_ms + 999) / 1000),
                    (unsigned long long)w->job_id, (unsigned long long)w->job_id);
            status = HV_CLI_EXIT_TEMPFAIL;
            break;
        }
        if (s == NULL) {
            w->store_down_at = 0; /* a new stream says it again if it still holds */
            Hvpb__V1__WatchRequest req = HVPB__V1__WATCH_REQUEST__INIT;
            req.job_id = w->job_id;
            req.logs = 1;
            req.events = 1;
            req.follow = 1;
            req.log_offset = w->nlogs;
            req.event_after = w->last_seq;
            hv_err rc = hv_rpc_bstream_open(w->ch, "/hvpb.v1.Jobs/Watch", &req.base,
                                            &hvpb__v1__watch_item__descriptor, 0, &s);
            if (rc != HV_OK) {
                hv_rpc_status_t st;
                memset(&st, 0, sizeof(st));
                st.rc = rc;
                st.grpc_code = HV_CLI_GRPC_UNAVAILABLE;
                snprintf(st.msg, sizeof(st.msg), "%s", hv_strerror(rc));
                s = NULL;
                status = submit_reconnect(w, &st);
                continue;
            }
        }
        ProtobufCMessage *msg = NULL;
        hv_rpc_status_t st;
        memset(&st, 0, sizeof(st));
        hv_err rc = hv_rpc_bstream_next(s, SUBMIT_POLL_MS, &msg, &st);
        if (rc == HV_ETIMEDOUT) {
            continue;
        }
        if (rc == HV_OK) {
            status = submit_item(w, (const Hvpb__V1__WatchItem *)msg);
            hv_rpc_msg_free(msg);
            continue;
        }
        /* The stream ended without the job's end: the head went away, or refused. */
        hv_rpc_bstream_destroy(s);
        s = NULL;
        if (st.grpc_code == HV_CLI_GRPC_NOT_FOUND || st.rc == HV_ENOTFOUND) {
            hv_cli_say(stderr, SUBMIT_PROG,
                       hv_cli_rpc_head_message(&st) ? st.msg : "the head does not know this job");
            status = HV_CLI_EXIT_NOINPUT;
        } else if (hv_cli_rpc_stream_lost(&st)) {
            status = submit_reconnect(w, &st);
        } else {
            status = hv_cli_rpc_report(SUBMIT_PROG, w->head, "Watch", &st, 0);
        }
    }
    hv_rpc_bstream_destroy(s);
    return status;
}

/* One submission, followed to its end (or detached). Returns the exit status; w->final_state
 * says how the job ended ("" when it was not followed to its end). */
static int submit_attempt(hv_rpc_channel_t *ch, const char *head, const hv_cli_submit_opts_t *oo,
                          const submit_artifact_t *arts, submit_watch_t *wp) {
    const hv_cli_submit_opts_t o = *oo;
    int status;
    submit_watch_t w;
    memset(&w, 0, sizeof(w));
    w.ch = ch;
    w.head = head;
    w.quiet = o.quiet;
    w.clean_out = !o.raw && isatty(STDOUT_FILENO);
    w.clean_err = !o.raw && isatty(STDERR_FILENO);
    w.elastic = o.elastic;
    uint32_t np = 0, lease_ms = 0;
    status = submit_job(ch, head, &o, arts, &w.job_id, &np, &lease_ms);
    if (status != HV_CLI_EXIT_OK) {
        goto out;
    }
    w.head_wait_ms = hv_cli_head_wait_ms(o.head_timeout_set, o.head_timeout_s, lease_ms);
    w.submitted_at = hv_now_ms();
    w.next_pending_check = w.submitted_at + SUBMIT_PENDING_MS;
    if (o.elastic) {
        char range[64];
        if (o.min_np != 0 && o.max_np != 0) {
            snprintf(range, sizeof(range), "%u to %u", (unsigned)o.min_np, (unsigned)o.max_np);
        } else if (o.min_np != 0) {
            snprintf(range, sizeof(range), "at least %u", (unsigned)o.min_np);
        } else {
            snprintf(range, sizeof(range), "at most %u", (unsigned)o.max_np);
        }
        fprintf(stderr, SUBMIT_PROG ": job %llu submitted (%u worker%s, elastic: %s)\n",
                (unsigned long long)w.job_id, (unsigned)np, np == 1 ? "" : "s", range);
    } else if (o.np_set) {
        fprintf(stderr, SUBMIT_PROG ": job %llu submitted (%u worker%s)\n",
                (unsigned long long)w.job_id, (unsigned)np, np == 1 ? "" : "s");
    } else {
        fprintf(stderr, SUBMIT_PROG ": job %llu takes every free slot: %u worker%s\n",
                (unsigned long long)w.job_id, (unsigned)np, np == 1 ? "" : "s");
    }
    if (o.detach) {
        if (submit_sigint) {
            fprintf(stderr, SUBMIT_PROG ": cancelling job %llu...\n", (unsigned long long)w.job_id);
            submit_cancel(&w);
            status = HV_CLI_EXIT_SIGINT;
            goto out;
        }
        printf("%llu\n", (unsigned long long)w.job_id);
        fflush(stdout);
        status = HV_CLI_EXIT_OK;
        goto out;
    }
    status = submit_watch(&w);
out:
    *wp = w;
    return status;
}

int main(int argc, char **argv) {
    hv_log_init(SUBMIT_PROG);
    hv_cli_submit_opts_t o;
    memset(&o, 0, sizeof(o));
    char err[HV_CLI_ERR_LEN];
    submit_artifact_t *arts = NULL;
    hv_rpc_channel_t *ch = NULL;
    int status = HV_CLI_EXIT_FAIL;

    if (hv_cli_submit_parse(argc, argv, &o, err, sizeof(err)) != HV_OK) {
        return hv_cli_usage_error(SUBMIT_PROG, err);
    }
    if (o.version) {
        printf(SUBMIT_PROG " %s\n", HV_VERSION_STRING);
        hv_cli_submit_opts_fini(&o);
        return HV_CLI_EXIT_OK;
    }
    if (o.help) {
        submit_usage(stdout);
        hv_cli_submit_opts_fini(&o);
        return HV_CLI_EXIT_OK;
    }
    const char *head = hv_cli_head_addr(o.head);
    if (hv_cli_check_head_addr(head, err, sizeof(err)) != HV_OK) {
        status = hv_cli_usage_error(SUBMIT_PROG, err);
        goto out;
    }
    hv_err crc = hv_cli_submit_prepare(&o, err, sizeof(err));
    if (crc != HV_OK) {
        fprintf(stderr, SUBMIT_PROG ": %s\n", err);
        status = hv_cli_exit_for_local(crc);
        goto out;
    }
    if (o.workdir_skipped > 0 && !o.quiet) {
        fprintf(stderr,
                SUBMIT_PROG ": --workdir %s: %zu link%s to a directory not followed (%s%s): "
                            "ship that directory's files with a directory of their own\n",
                o.workdir, o.workdir_skipped, o.workdir_skipped == 1 ? "" : "s",
                o.workdir_first_skipped, o.workdir_skipped > 1 ? ", ..." : "");
    }
    if ((status = hv_cli_rpc_open(SUBMIT_PROG, head, o.ca, o.insecure, &ch)) != HV_CLI_EXIT_OK) {
        goto out;
    }
    if (hv_cli_token_attach(ch, o.token_file, SUBMIT_PROG, err, sizeof(err)) != HV_OK) {
        fprintf(stderr, SUBMIT_PROG ": %s\n", err);
        status = HV_CLI_EXIT_NOINPUT;
        goto out;
    }
    if (o.command && (status = submit_check_interp(ch, &o)) != HV_CLI_EXIT_OK) {
        goto out;
    }
    status = HV_CLI_EXIT_FAIL;

    /* Ship the program and each --file (arts[0] is the program; unused for a node command). */
    arts = hv_calloc(o.nfiles + 1, sizeof(*arts));
    if (arts == NULL) {
        fprintf(stderr, SUBMIT_PROG ": out of memory\n");
        status = HV_CLI_EXIT_SOFTWARE;
        goto out;
    }
    for (size_t i = o.command ? 1 : 0; i <= o.nfiles; i++) {
        const char *path = i == 0 ? o.binary : o.files[i - 1];
        const char *name = i == 0 ? hv_cli_basename(o.binary) : hv_cli_ship_name(&o, i - 1);
        status = submit_upload(ch, head, path, name, arts, i, o.quiet, o.verbose, &arts[i]);
        if (status != HV_CLI_EXIT_OK) {
            goto out;
        }
    }

    /* From here on Ctrl-C means "cancel the job", even while Submit is in flight. */
    submit_install_signals();
    submit_watch_t w;
    for (uint32_t attempt = 0;; attempt++) {
        status = submit_attempt(ch, head, &o, arts, &w);
        /* --retries: a job that failed (not one cancelled, nor a head that went away) is
         * submitted again, as the restart-the-job policy of TorchElastic, Ray Train and
         * SkyPilot does: every worker starts over (from the program's own checkpoint). */
        if (status == HV_CLI_EXIT_OK || attempt >= o.retries || submit_sigint ||
            w.final_state != HVPB__V1__JOB_STATE__JOB_STATE_FAILED) {
            break;
        }
        fprintf(stderr, SUBMIT_PROG ": job %llu failed; submitting it again (retry %u of %u)\n",
                (unsigned long long)w.job_id, attempt + 1, (unsigned)o.retries);
    }
out:
    if (ch != NULL) {
        hv_rpc_channel_destroy(ch);
    }
    hv_free(arts);
    hv_cli_submit_opts_fini(&o);
    return status;
}
