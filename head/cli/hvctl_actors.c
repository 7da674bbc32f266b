/*
 * hvctl_actors: hvctl's actor commands (the Actors service): actor create, actors, actor
 * NAME|ID, kill-actor, actor-logs: their calls and their output. hvctl parses their options (one table with
 * its others) and hands the result here with an open channel.
 *
 *   hvctl actor create --class C [--name N] [--namespace NS] [--arg TEXT] [--slots N] [--gpus N]
 *         [--memory-mb N] [--label K=V]... [--max-restarts N] [--max-call-retries N]
 *         [--owner-job ID] [--env K=V]... -- PROGRAM [ARGS]
 *   hvctl actors [--namespace NS] [--json]
 *   hvctl actor NAME|ID [--namespace NS] [--json]
 *   hvctl kill-actor NAME|ID [--restart] [--namespace NS]
 *   hvctl actor-logs NAME|ID [--namespace NS]
 *
 * PROGRAM: a local file (a path with '/') is uploaded like hvsubmit's binary (Jobs.Upload, by
 * sha256); a bare name is a program on the node (python3, ...). Without --owner-job the actor is
 * detached (it lives until killed).
 */
#include "hvctl_actors.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_common.h"
#include "cli_rpc.h"
#include "hv.pb-c.h"
#include "mem.h"
#include "sha256.h"
#include "util.h"

#define PROG "hvctl"
#define ACTORS_LOG_PAGES_MAX 100000 /* a bound on the pages of one actor-logs */
void hv_ctl_actors_usage(FILE *f) {
    fprintf(f, "usage: hvctl actor create --class C [--name N] [--namespace NS] [--arg TEXT]\n"
               "             [--slots N] [--gpus N] [--memory-mb N] [--label K=V]...\n"
               "             [--max-restarts N] [--max-call-retries N]\n"
               "             [--owner-job ID] [--env K=V]... -- PROGRAM [ARGS]\n"
               "       hvctl actors [--namespace NS] [--json]\n"
               "       hvctl actor NAME|ID [--namespace NS] [--json]\n"
               "       hvctl kill-actor NAME|ID [--restart] [--namespace NS]\n"
               "       hvctl actor-logs NAME|ID [--namespace NS]\n\n"
               "PROGRAM: a local file (uploaded) or a program on the node. Without\n"
               "--owner-job the actor is detached. hvctl actor NAME shows its state, node,\n"
               "restarts and moves, and its calls served and failed with the median and\n"
               "p99 of their service time (summed over its processes, reported about\n"
               "once a second), and its history: each restart, move and its death with\n"
               "time, state, cause, node and the head's words, newest last (the last 20;\n"
               "--json: \"history\", an array). hvctl actor-logs prints what its\n"
               "processes wrote on stdout and stderr, as \"[PROCESS]<stream>:text\"\n"
               "(the head keeps it like a job's log). Options of hvctl (--head, --ca,\n"
               "--insecure, --token-file, --json) apply. docs/actors.md\n");
}

/* ---- upload (as hvsubmit's, in short: one chunk after the other, no resume) ------------------ */

static int upload(hv_rpc_channel_t *ch, const char *head, const char *path, char *digest,
                  uint64_t *size, uint32_t *mode) {
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fprintf(stderr, PROG ": %s: %s\n", path, errno ? strerror(errno) : "not a regular file");
        return HV_CLI_EXIT_NOINPUT;
    }
    *mode = (uint32_t)(sb.st_mode & 07777);
    if (hv_sha256_file(path, digest, size) != HV_OK) {
        fprintf(stderr, PROG ": cannot read %s\n", path);
        return HV_CLI_EXIT_IOERR;
    }
    Hvpb__V1__StatArtifactRequest sreq = HVPB__V1__STAT_ARTIFACT_REQUEST__INIT;
    sreq.digest = digest;
    ProtobufCMessage *resp = NULL;
    hv_rpc_status_t st;
    if (hv_cli_rpc_unary(ch, "/hvpb.v1.Jobs/StatArtifact", &sreq.base,
                         &hvpb__v1__stat_artifact_reply__descriptor, HV_CLI_UNARY_MS, &resp,
                         &st) != HV_OK) {
        return hv_cli_rpc_report(PROG, head, "StatArtifact", &st, HV_CLI_UNARY_MS);
    }
    int present = ((Hvpb__V1__StatArtifactReply *)resp)->present;
    hv_rpc_msg_free(resp);
    if (present) {
        return HV_CLI_EXIT_OK;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    unsigned char *buf = hv_malloc(HV_CLI_UPLOAD_CHUNK);
    int status = HV_CLI_EXIT_OK;
    if (fd < 0 || buf == NULL) {
        fprintf(stderr, PROG ": cannot read %s: %s\n", path, strerror(errno));
        status = HV_CLI_EXIT_IOERR;
    }
    for (uint64_t off = 0; status == HV_CLI_EXIT_OK;) {
        size_t n = *size - off < HV_CLI_UPLOAD_CHUNK ? (size_t)(*size - off) : HV_CLI_UPLOAD_CHUNK;
        if (pread(fd, buf, n, (off_t)off) != (ssize_t)n) {
            fprintf(stderr, PROG ": cannot read %s\n", path);
            status = HV_CLI_EXIT_IOERR;
            break;
        }
        Hvpb__V1__UploadChunk c = HVPB__V1__UPLOAD_CHUNK__INIT;
        c.digest = digest;
        c.total_size = *size;
        c.offset = off;
        c.data.data = buf;
        c.data.len = n;
        c.last = off + n == *size;
        if (hv_cli_rpc_unary(ch, "/hvpb.v1.Jobs/Upload", &c.base,
                             &hvpb__v1__upload_reply__descriptor, 60000, &resp, &st) != HV_OK) {
            status = hv_cli_rpc_report(PROG, head, "Upload", &st, 60000);
            break;
        }
        int complete = ((Hvpb__V1__UploadReply *)resp)->complete;
        hv_rpc_msg_free(resp);
        if (complete) {
            break;
        }
        if (c.last) {
            fprintf(stderr, PROG ": the head did not accept the upload of %s\n", path);
            status = HV_CLI_EXIT_SOFTWARE;
            break;
        }
        off += n;
    }
    if (fd >= 0) {
        close(fd);
    }
    hv_free(buf);
    return status;
}

/* ---- output ------------------------------------------------------------------------------------ */

typedef struct history_s history_t;
static void history_json(hv_cli_json_t *j, const history_t *h);

/* v as a JSON object; with h (hvctl actor NAME) its history too. */
static void print_json(hv_cli_json_t *j, const Hvpb__V1__ActorView *v, const history_t *h) {
    hv_cli_json_obj_begin(j);
    hv_cli_json_fields(j, &v->base, "id name namespace class=class_name");
    hv_cli_json_kv_str(j, "state", v->state);
    hv_cli_json_fields(j, &v->base,
                       "cause node address restarts max_restarts moves processes=incarnation "
                       "detached owner_job slots gpus memory_mb labels max_call_retries "
                       "last_status last_signal created_ms started_ms ended_ms reason");
    /* Call figures over all its processes; the latencies are null before its first call. */
    hv_cli_json_fields(j, &v->base, "calls_ok calls_error bytes_in bytes_out");
    hv_cli_json_key(j, "service_p50_ms");
    if (v->service_p50_ms >= 0) {
        hv_cli_json_f64(j, v->service_p50_ms);
    } else {
        hv_cli_json_null(j);
    }
    hv_cli_json_key(j, "service_p99_ms");
    if (v->service_p99_ms >= 0) {
        hv_cli_json_f64(j, v->service_p99_ms);
    } else {
        hv_cli_json_null(j);
    }
    hv_cli_json_kv_u64(j, "figures_ms", v->figures_ms);
    if (h != NULL) {
        history_json(j, h);
    }
    hv_cli_json_obj_end(j);
}

/* "12.3 ms", "0.004 ms": three significant digits. */
static void print_ms(double ms) { printf("%.3g ms", ms); }

/* s with what could act on a terminal made visible (hv_cli_clean): the head's text is what a
 * job or a node chose (a class, a reason quoting it). One of eight rotating buffers, so that a
 * printf may take up to eight. */
static const char *vis(const char *s) {
    static char bufs[8][2048];
    static unsigned next;
    char *b = bufs[next++ % 8];
    return hv_cli_clean(s != NULL ? s : "", 0, b, sizeof(bufs[0]));
}

static void print_one(const Hvpb__V1__ActorView *v) {
    printf("actor %" PRIu64 "%s%s%s%s\n", v->id, v->name[0] ? " " : "", vis(v->namespace_),
           v->name[0] ? "/" : "", vis(v->name));
    printf("  class      %s\n", vis(v->class_name));
    printf("  state      %s%s%s%s\n", vis(v->state), v->cause[0] ? " (" : "", vis(v->cause),
           v->cause[0] ? ")" : "");
    printf("  node       %s\n", v->node[0] ? vis(v->node) : "-");
    printf("  address    %s\n", v->address[0] ? vis(v->address) : "-");
    printf("  restarts   %u of %u%s", v->restarts, v->max_restarts, v->moves ? "" : "\n");
    if (v->moves) {
        printf(", %u moves after a drain\n", v->moves);
    }
    printf("  processes  %u\n", v->incarnation);
    if (v->detached) {
        printf("  lifetime   detached\n");
    } else {
        printf("  lifetime   owned by job %" PRIu64 "\n", v->owner_job);
    }
    printf("  demand     %u slots, %u GPUs", v->slots, v->gpus);
    if (v->memory_mb > 0) {
        printf(", %" PRIu64 " MiB", v->memory_mb);
    }
    printf("%s%s\n", v->labels[0] ? ", labels " : "", vis(v->labels));
    if (v->last_signal != 0) {
        printf("  last exit  signal %d\n", v->last_signal);
    } else if (v->last_status >= 0) {
        printf("  last exit  status %d\n", v->last_status);
    }
    printf("  calls      %" PRIu64 " served, %" PRIu64 " failed", v->calls_ok, v->calls_error);
    if (v->figures_ms > 0) {
        uint64_t now = hv_wall_ms();
        printf(" (reported %.0f s ago)",
               now > v->figures_ms ? (double)(now - v->figures_ms) / 1000.0 : 0.0);
    }
    printf("\n");
    if (v->calls_ok + v->calls_error > 0 && v->service_p50_ms >= 0) {
        printf("  latency    ");
        print_ms(v->service_p50_ms);
        printf(" median, ");
        print_ms(v->service_p99_ms);
        printf(" p99 (service time in the actor)\n");
        printf("  bytes      %" PRIu64 " in, %" PRIu64 " out\n", v->bytes_in, v->bytes_out);
    }
    printf("  last event %s\n", vis(v->reason));
}

/* ---- history ----------------------------------------------------------------------------------- */

/* How many of an actor's newest events hvctl actor asks for, and how many steps it shows. */
#define HISTORY_FETCH 1000
#define HISTORY_SHOW 20

/* The actor's history as fetched: its events (owned reply, NULL when it could not be had) and
 * the steps picked from them. */
typedef struct history_s {
    Hvpb__V1__ListEventsReply *r;
    char err[256]; /* r == NULL: why */
    size_t pick[HISTORY_SHOW], n, earlier;
} history_t;

static void history_fetch(hv_rpc_channel_t *ch, uint64_t id, history_t *h) {
    memset(h, 0, sizeof(*h));
    Hvpb__V1__ListEventsRequest req = HVPB__V1__LIST_EVENTS_REQUEST__INIT;
    req.actor_id = id;
    req.limit = HISTORY_FETCH;
    ProtobufCMessage *resp = NULL;
    hv_rpc_status_t st;
    if (hv_cli_rpc_unary(ch, "/hvpb.v1.Jobs/ListEvents", &req.base,
                         &hvpb__v1__list_events_reply__descriptor, HV_CLI_UNARY_MS, &resp,
                         &st) != HV_OK) {
        snprintf(h->err, sizeof(h->err), "%.200s", st.msg[0] ? st.msg : "the head did not answer");
        return;
    }
    h->r = (Hvpb__V1__ListEventsReply *)resp;
    h->n =
        hv_cli_actor_history(h->r->events, h->r->n_events, id, HISTORY_SHOW, h->pick, &h->earlier);
}

/* One step's fields from its event's data ("" or 0 when missing). */
typedef struct step_s {
    char step[16], state[16], cause[32], reason[256];
    uint64_t restarts, moves;
} step_t;

static void step_read(const Hvpb__V1__Event *e, step_t *o) {
    memset(o, 0, sizeof(*o));
    hv_cli_json_field_str(e->data, "step", o->step, sizeof(o->step));
    hv_cli_json_field_str(e->data, "state", o->state, sizeof(o->state));
    hv_cli_json_field_str(e->data, "cause", o->cause, sizeof(o->cause));
    hv_cli_json_field_str(e->data, "reason", o->reason, sizeof(o->reason));
    hv_cli_json_field_u64(e->data, "restarts", &o->restarts);
    hv_cli_json_field_u64(e->data, "moves", &o->moves);
}

/* 1 when the actor has more events than were fetched: older steps may exist beyond those
 * counted in h->earlier. */
static int history_unfetched(const history_t *h) {
    return h->r != NULL && h->r->total > h->r->n_events;
}

static void history_json(hv_cli_json_t *j, const history_t *h) {
    hv_cli_json_key(j, "history");
    if (h->r == NULL) {
        hv_cli_json_null(j);
        hv_cli_json_kv_str(j, "history_error", h->err);
        return;
    }
    hv_cli_json_arr_begin(j);
    for (size_t i = 0; i < h->n; i++) {
        const Hvpb__V1__Event *e = h->r->events[h->pick[i]];
        step_t s;
        step_read(e, &s);
        hv_cli_json_obj_begin(j);
        hv_cli_json_fields(j, &e->base, "seq time_ms");
        hv_cli_json_kv_str(j, "step", s.step);
        hv_cli_json_kv_str(j, "state", s.state);
        hv_cli_json_kv_str(j, "cause", s.cause);
        hv_cli_json_kv_u64(j, "restarts", s.restarts);
        hv_cli_json_kv_u64(j, "moves", s.moves);
        hv_cli_json_kv_str(j, "node", e->node);
        hv_cli_json_kv_str(j, "reason", s.reason);
        hv_cli_json_obj_end(j);
    }
    hv_cli_json_arr_end(j);
    hv_cli_json_kv_u64(j, "history_earlier", h->earlier);
    hv_cli_json_key(j, "history_complete");
    hv_cli_json_bool(j, !history_unfetched(h));
}

static void history_print(const history_t *h) {
    if (h->r == NULL) {
        printf("  history    not available: %s\n", h->err);
        return;
    }
    if (h->n == 0) {
        printf("  history    no restart, move or death%s\n",
               history_unfetched(h) ? " among its newest events" : "");
        return;
    }
    printf("  history    restarts, moves and death, newest last");
    if (h->earlier > 0) {
        printf(" (%zu earlier not shown%s)", h->earlier, history_unfetched(h) ? ", and more" : "");
    } else if (history_unfetched(h)) {
        printf(" (earlier ones may not be shown)");
    }
    printf("\n");
    for (size_t i = 0; i < h->n; i++) {
        const Hvpb__V1__Event *e = h->r->events[h->pick[i]];
        step_t s;
        char tm[48];
        step_read(e, &s);
        printf("    %s  %-7s  %-10s  %-15s  %-10s  %s\n", hv_fmt_time(e->time_ms, tm, sizeof(tm)),
               vis(s.step), vis(s.state), s.cause[0] ? vis(s.cause) : "-",
               e->node[0] ? vis(e->node) : "-", vis(s.reason));
    }
}

/* ---- commands ---------------------------------------------------------------------------------- */

static void fill_ref(Hvpb__V1__ActorRef *r, const hv_ctl_actor_opts_t *o) {
    uint64_t id;
    hvpb__v1__actor_ref__init(r);
    if (hv_parse_u64(o->target, 1, UINT64_MAX, &id) == HV_OK) {
        r->id = id;
    } else {
        r->name = (char *)o->target;
        r->namespace_ = (char *)(o->ns != NULL ? o->ns : "");
    }
}

static int call(hv_rpc_channel_t *ch, const char *head, const char *method,
                const ProtobufCMessage *req, const ProtobufCMessageDescriptor *desc,
                ProtobufCMessage **resp) {
    hv_rpc_status_t st;
    char path[64];
    snprintf(path, sizeof(path), "/hvpb.v1.Actors/%s", method);
    if (hv_cli_rpc_unary(ch, path, req, desc, HV_CLI_UNARY_MS, resp, &st) != HV_OK) {
        if (hv_cli_rpc_head_message(&st)) {
            fprintf(stderr, PROG ": %s\n", st.msg);
            return hv_cli_rpc_exit_code(&st);
        }
        return hv_cli_rpc_report(PROG, head, method, &st, HV_CLI_UNARY_MS);
    }
    return HV_CLI_EXIT_OK;
}

static int cmd_create(hv_rpc_channel_t *ch, const char *head, const hv_ctl_actor_opts_t *o) {
    Hvpb__V1__ActorSpec sp = HVPB__V1__ACTOR_SPEC__INIT;
    Hvpb__V1__FileRef bin = HVPB__V1__FILE_REF__INIT;
    char digest[65];
    sp.name = (char *)(o->name != NULL ? o->name : "");
    sp.namespace_ = (char *)(o->ns != NULL ? o->ns : "");
    sp.class_name = (char *)o->class_name;
    sp.arg = (char *)(o->arg != NULL ? o->arg : "");
    sp.slots = o->slots;
    sp.gpus = o->gpus;
    sp.max_restarts = o->max_restarts;
    sp.max_call_retries = o->max_call_retries;
    sp.owner_job = o->owner_job;
    sp.detached = o->owner_job == 0;
    if (strchr(o->prog[0], '/') != NULL) {
        uint64_t size = 0;
        uint32_t mode = 0;
        int status = upload(ch, head, o->prog[0], digest, &size, &mode);
        if (status != HV_CLI_EXIT_OK) {
            return status;
        }
        const char *base = strrchr(o->prog[0], '/') + 1;
        bin.name = (char *)base;
        bin.digest = digest;
        bin.size = size;
        bin.mode = mode;
        sp.binary = &bin;
    } else {
        sp.command = o->prog[0];
    }
    sp.n_args = (size_t)(o->nprog - 1);
    sp.args = &o->prog[1];
    Hvpb__V1__KeyValue kv[HV_CTL_ACTORS_MAX_ENV], *kvp[HV_CTL_ACTORS_MAX_ENV];
    char keys[HV_CTL_ACTORS_MAX_ENV][256];
    for (size_t i = 0; i < o->nenv; i++) {
        const char *eq = strchr(o->env[i], '=');
        size_t kl = (size_t)(eq - o->env[i]) < sizeof(keys[i]) ? (size_t)(eq - o->env[i]) : 255;
        memcpy(keys[i], o->env[i], kl);
        keys[i][kl] = '\0';
        hvpb__v1__key_value__init(&kv[i]);
        kv[i].key = keys[i];
        kv[i].value = (char *)eq + 1;
        kvp[i] = &kv[i];
    }
    sp.n_env = o->nenv;
    sp.env = kvp;
    Hvpb__V1__KeyValue lkv[HV_CTL_ACTORS_MAX_LABELS], *lkvp[HV_CTL_ACTORS_MAX_LABELS];
    char lkeys[HV_CTL_ACTORS_MAX_LABELS][64];
    for (size_t i = 0; i < o->nlabels; i++) {
        const char *eq = strchr(o->labels[i], '='); /* checked: 1 to 63 bytes before it */
        size_t kl = (size_t)(eq - o->labels[i]);
        memcpy(lkeys[i], o->labels[i], kl);
        lkeys[i][kl] = '\0';
        hvpb__v1__key_value__init(&lkv[i]);
        lkv[i].key = lkeys[i];
        lkv[i].value = (char *)eq + 1;
        lkvp[i] = &lkv[i];
    }
    sp.n_labels = o->nlabels;
    sp.labels = lkvp;
    sp.memory_mb = o->memory_mb;
    Hvpb__V1__CreateActorRequest req = HVPB__V1__CREATE_ACTOR_REQUEST__INIT;
    req.spec = &sp;
    ProtobufCMessage *resp = NULL;
    int status = call(ch, head, "Create", &req.base, &hvpb__v1__actor_view__descriptor, &resp);
    if (status != HV_CLI_EXIT_OK) {
        return status;
    }
    const Hvpb__V1__ActorView *v = (const Hvpb__V1__ActorView *)resp;
    if (o->json) {
        hv_cli_json_t j;
        hv_cli_json_init(&j, stdout);
        print_json(&j, v, NULL);
        hv_cli_json_finish(&j);
    } else {
        printf("actor %" PRIu64 " created%s%s (%s)\n", v->id, v->name[0] ? ": " : "", v->name,
               v->state);
        const char *why = hv_cli_actor_wait_reason(v);
        if (why != NULL) {
            printf("  %s\n", why); /* why it waits: for room, or for a node that fits */
        }
    }
    hv_rpc_msg_free(resp);
    return HV_CLI_EXIT_OK;
}

static int cmd_list(hv_rpc_channel_t *ch, const char *head, const hv_ctl_actor_opts_t *o) {
    Hvpb__V1__ListActorsRequest req = HVPB__V1__LIST_ACTORS_REQUEST__INIT;
    req.namespace_ = (char *)(o->ns != NULL ? o->ns : "");
    ProtobufCMessage *resp = NULL;
    int status = call(ch, head, "List", &req.base, &hvpb__v1__list_actors_reply__descriptor, &resp);
    if (status != HV_CLI_EXIT_OK) {
        return status;
    }
    const Hvpb__V1__ListActorsReply *r = (const Hvpb__V1__ListActorsReply *)resp;
    if (o->json) {
        hv_cli_json_t j;
        hv_cli_json_init(&j, stdout);
        hv_cli_json_arr_begin(&j);
        for (size_t i = 0; i < r->n_actors; i++) {
            print_json(&j, r->actors[i], NULL);
        }
        hv_cli_json_arr_end(&j);
        hv_cli_json_finish(&j);
    } else {
        static const char *const hdr[] = {"ID",    "NAMESPACE", "NAME",     "CLASS", "STATE",
                                          "CAUSE", "NODE",      "RESTARTS", "CALLS", "ADDRESS"};
        hv_cli_table_t *t = NULL;
        if (hv_cli_table_create(10, hdr, &t) == HV_OK) {
            for (size_t i = 0; i < r->n_actors; i++) {
                const Hvpb__V1__ActorView *v = r->actors[i];
                char id[24], rs[32], calls[24];
                snprintf(id, sizeof(id), "%" PRIu64, v->id);
                snprintf(rs, sizeof(rs), "%u/%u", v->restarts, v->max_restarts);
                snprintf(calls, sizeof(calls), "%" PRIu64, v->calls_ok + v->calls_error);
                const char *cells[] = {id,
                                       v->namespace_,
                                       v->name[0] ? v->name : "-",
                                       v->class_name,
                                       v->state,
                                       v->cause[0] ? v->cause : "-",
                                       v->node[0] ? v->node : "-",
                                       rs,
                                       calls,
                                       v->address[0] ? v->address : "-"};
                hv_cli_table_add(t, cells);
            }
            hv_cli_table_print(t, stdout);
            hv_cli_table_destroy(t);
        }
    }
    hv_rpc_msg_free(resp);
    return HV_CLI_EXIT_OK;
}

static int cmd_get_kill(hv_rpc_channel_t *ch, const char *head, const hv_ctl_actor_opts_t *o) {
    Hvpb__V1__ActorRef ref;
    fill_ref(&ref, o);
    ProtobufCMessage *resp = NULL;
    int status;
    if (strcmp(o->cmd, "kill") == 0) {
        Hvpb__V1__KillActorRequest req = HVPB__V1__KILL_ACTOR_REQUEST__INIT;
        req.ref = &ref;
        req.restart = o->restart;
        status = call(ch, head, "Kill", &req.base, &hvpb__v1__actor_view__descriptor, &resp);
    } else {
        Hvpb__V1__GetActorRequest req = HVPB__V1__GET_ACTOR_REQUEST__INIT;
        req.ref = &ref;
        status = call(ch, head, "Get", &req.base, &hvpb__v1__actor_view__descriptor, &resp);
    }
    if (status != HV_CLI_EXIT_OK) {
        return status;
    }
    const Hvpb__V1__ActorView *v = (const Hvpb__V1__ActorView *)resp;
    int get = strcmp(o->cmd, "get") == 0;
    history_t h;
    memset(&h, 0, sizeof(h));
    if (get) {
        history_fetch(ch, v->id, &h);
    }
    if (o->json) {
        hv_cli_json_t j;
        hv_cli_json_init(&j, stdout);
        print_json(&j, v, get ? &h : NULL);
        hv_cli_json_finish(&j);
    } else if (!get) {
        printf("actor %" PRIu64 ": %s\n", v->id, v->reason);
    } else {
        print_one(v);
        history_print(&h);
    }
    if (h.r != NULL) {
        hv_rpc_msg_free(&h.r->base);
    }
    hv_rpc_msg_free(resp);
    return HV_CLI_EXIT_OK;
}

/* hvctl actor-logs: the actor's output log, page after page, as "[PROCESS]<stream>:text" (the
 * text made safe for a terminal when stdout is one, as hvctl logs does). */
static int cmd_logs(hv_rpc_channel_t *ch, const char *head, const hv_ctl_actor_opts_t *o) {
    Hvpb__V1__ActorRef ref;
    fill_ref(&ref, o);
    Hvpb__V1__ActorLogsRequest req = HVPB__V1__ACTOR_LOGS_REQUEST__INIT;
    req.ref = &ref;
    int clean = isatty(STDOUT_FILENO);
    for (int page = 0; page < ACTORS_LOG_PAGES_MAX; page++) {
        ProtobufCMessage *resp = NULL;
        int status =
            call(ch, head, "Logs", &req.base, &hvpb__v1__actor_logs_reply__descriptor, &resp);
        if (status != HV_CLI_EXIT_OK) {
            return status;
        }
        const Hvpb__V1__ActorLogsReply *r = (const Hvpb__V1__ActorLogsReply *)resp;
        for (size_t i = 0; i < r->n_lines; i++) {
            const Hvpb__V1__LogLine *l = r->lines[i];
            printf("[%u]<%s>:", l->rank, l->stream == 2 ? "stderr" : "stdout");
            if (clean) {
                hv_cli_clean_write(stdout, l->text, HV_CLI_CLEAN_TAB);
            } else {
                fputs(l->text, stdout);
            }
            fputc('\n', stdout);
        }
        int more = r->more && r->next_offset > req.offset;
        req.offset = r->next_offset;
        hv_rpc_msg_free(resp);
        if (!more) {
            break;
        }
    }
    return HV_CLI_EXIT_OK;
}

int hv_ctl_actors_run(hv_rpc_channel_t *ch, const char *head, const hv_ctl_actor_opts_t *o) {
    if (strcmp(o->cmd, "create") == 0) {
        return cmd_create(ch, head, o);
    }
    if (strcmp(o->cmd, "list") == 0) {
        return cmd_list(ch, head, o);
    }
    if (strcmp(o->cmd, "logs") == 0) {
        return cmd_logs(ch, head, o);
    }
    return cmd_get_kill(ch, head, o);
}

Hvpb__V1__ListActorsReply *hv_ctl_actors_fetch(hv_rpc_channel_t *ch) {
    Hvpb__V1__ListActorsRequest req = HVPB__V1__LIST_ACTORS_REQUEST__INIT;
    ProtobufCMessage *resp = NULL;
    hv_rpc_status_t st;
    if (hv_cli_rpc_unary(ch, "/hvpb.v1.Actors/List", &req.base,
                         &hvpb__v1__list_actors_reply__descriptor, HV_CLI_UNARY_MS, &resp,
                         &st) != HV_OK) {
        return NULL;
    }
    return (Hvpb__V1__ListActorsReply *)resp;
}

void hv_ctl_actors_status(const Hvpb__V1__ListActorsReply *r) {
    if (r == NULL || r->n_actors == 0) {
        return;
    }
    size_t count[HV_CLI_ACTOR_STATES];
    hv_cli_actor_count(r, count);
    printf("actors: ");
    int first = 1;
    for (size_t k = 0; k < HV_CLI_ACTOR_STATES; k++) {
        if (count[k] > 0) {
            printf("%s%zu %s", first ? "" : ", ", count[k], hv_cli_actor_state_names[k]);
            first = 0;
        }
    }
    printf("\n");
    for (size_t i = 0; i < r->n_actors; i++) {
        const Hvpb__V1__ActorView *v = r->actors[i];
        if (hv_cli_actor_waiting(v)) {
            printf("  actor %" PRIu64 " %s%s%s (%s): %s\n", v->id, v->namespace_,
                   v->name[0] ? "/" : "", v->name, v->state, v->reason);
        }
    }
}
