/*
 * cli_fakehead_test: runs the real hvsubmit and hvctl binaries against a scripted fake of the
 * head's Jobs service (the real rpc layer on a libuv loop, in this process), so that the tools'
 * whole behaviour is checked without hvhead: upload by digest with skip, resume and the size
 * limit; the spec that reaches the head; the watch output format; exit statuses of failed jobs;
 * a Watch stream that breaks (resume without repeats); Ctrl-C once (cancel) and twice (exit at
 * once); a refused submit; --detach; hvctl's tables, --json and NOT_FOUND; the elastic options
 * in the spec and the end-of-job summary; hvctl's elastic job view, blacklist column, event
 * data embedded in --json, and drain/undrain (unknown node, old head, unreachable head); and a
 * head whose words are all changed (words_changed: other messages and state words, the same
 * codes and event fields), which the tools must follow as before. The
 * tests with a real head live in tests/integration. Cases run alone by name:
 * cli_fakehead_test [case].
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hv.pb-c.h"
#include "hv_check.h"
#include "mem.h"
#include "rpc.h"
#include "sha256.h"
#include "util.h"

/* ---- the fake head -------------------------------------------------------------------------- */

static uv_loop_t loop;
static hv_rpc_engine_t *eng;
static hv_rpc_server_t *srv;
static char target[64];

/* One artifact as the fake holds it. */
typedef struct fake_art_s {
    char digest[65];
    unsigned char *data; /* owned: bytes received so far */
    uint64_t len;
    int present;
} fake_art_t;

static fake_art_t arts[8];
static size_t narts;
static uint64_t max_size = 1ull << 30;
static int n_stat, n_upload, n_submit, n_watch, n_cancel;

/* What Submit received (copied). */
static struct {
    char name[64], user[64], binary_name[64], binary_digest[65], args[256], env[256], files[256];
    uint32_t np, min_np, max_np, binary_mode;
    uint64_t binary_size;
    int elastic, max_resets_set, cooldown_set;
    uint32_t max_resets, elastic_timeout_s, check_every, cooldown_min_s, cooldown_max_s;
} got_spec;

/* What DrainNode received. */
static struct {
    int n;
    char node[160], reason[300];
    int drain;
} got_drain;

/* The scenario the fake plays. */
enum item_kind { IT_LOG, IT_EVENT, IT_BREAK, IT_HOLD, IT_DONE, IT_END };
typedef struct script_item_s {
    enum item_kind kind;
    uint32_t rank, stream; /* IT_LOG */
    const char *text;      /* IT_LOG text, IT_EVENT message */
    uint64_t seq;          /* IT_EVENT */
    const char *ekind;     /* IT_EVENT kind */
    int jstate;            /* IT_EVENT job.state: the job's state (Hvpb__V1__JobState) */
    uint64_t worker;       /* IT_EVENT worker.*: the worker (0: none) */
    uint32_t wrank;        /* and its rank */
} script_item_t;

static const script_item_t *script;
static int garbled; /* the views' state words and the events' messages are not English: only
                       the codes and fields say what happened */
static Hvpb__V1__JobView *final_view;     /* sent with IT_DONE */
static Hvpb__V1__JobView *cancelled_view; /* sent when Cancel arrives during IT_HOLD */
static int submit_refuse;                 /* Submit answers RESOURCE_EXHAUSTED */
static int watch_refuse;                  /* Watch answers RESOURCE_EXHAUSTED, "try again later" */
static unsigned upload_delay_ms;          /* each Upload answers this late (a slow link) */
static int cancel_ends_job = 1;           /* Cancel makes a held Watch send the cancelled view */
static hv_rpc_call_t *held_watch;         /* a Watch call kept open by IT_HOLD */
static uint64_t watch_started_ms;         /* when the last Watch call arrived */
static uint64_t cancel_ms;                /* when Cancel arrived */
static uint64_t last_log_offset, last_event_after;

static fake_art_t *art_find(const char *digest, int create) {
    for (size_t i = 0; i < narts; i++) {
        if (strcmp(arts[i].digest, digest) == 0) {
            return &arts[i];
        }
    }
    if (!create || narts >= sizeof(arts) / sizeof(arts[0])) {
        return NULL;
    }
    fake_art_t *a = &arts[narts++];
    memset(a, 0, sizeof(*a));
    snprintf(a->digest, sizeof(a->digest), "%s", digest);
    return a;
}

static void arts_reset(void) {
    for (size_t i = 0; i < narts; i++) {
        hv_free(arts[i].data);
    }
    narts = 0;
}

static void on_stat(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    (void)ud;
    const Hvpb__V1__StatArtifactRequest *r = (const Hvpb__V1__StatArtifactRequest *)m;
    n_stat++;
    fake_art_t *a = art_find(r->digest, 0);
    Hvpb__V1__StatArtifactReply rep = HVPB__V1__STAT_ARTIFACT_REPLY__INIT;
    rep.present = a && a->present;
    rep.received = a ? a->len : 0;
    rep.max_size = max_size;
    hv_rpc_reply(c, &rep.base);
}

static void on_upload(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    (void)ud;
    const Hvpb__V1__UploadChunk *u = (const Hvpb__V1__UploadChunk *)m;
    n_upload++;
    if (upload_delay_ms != 0) {
        usleep(upload_delay_ms * 1000u);
    }
    fake_art_t *a = art_find(u->digest, 1);
    if (a == NULL || a->present || u->offset != a->len || u->data.len > (1u << 20)) {
        hv_rpc_finish(c, HV_ESTATE, "upload of %s: offset %llu, expected %llu", u->digest,
                      (unsigned long long)u->offset, (unsigned long long)(a ? a->len : 0));
        return;
    }
    unsigned char *grown = hv_realloc(a->data, a->len + u->data.len + 1);
    memcpy(grown + a->len, u->data.data, u->data.len);
    a->data = grown;
    a->len += u->data.len;
    if (u->last) {
        char hex[65];
        hv_sha256_hex_of(a->data, a->len, hex);
        if (strcmp(hex, a->digest) != 0 || a->len != u->total_size) {
            hv_rpc_finish(c, HV_ECORRUPT, "upload of %s: digest mismatch", a->digest);
            return;
        }
        a->present = 1;
    }
    Hvpb__V1__UploadReply rep = HVPB__V1__UPLOAD_REPLY__INIT;
    rep.received = a->len;
    rep.complete = a->present;
    hv_rpc_reply(c, &rep.base);
}

static void on_submit(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    (void)ud;
    const Hvpb__V1__JobSpec *s = ((const Hvpb__V1__SubmitRequest *)m)->spec;
    n_submit++;
    if (submit_refuse == 1) {
        hv_rpc_finish(c, HV_ETOOBIG, "job needs 64 slots, the cluster has at most 8");
        return;
    }
    if (submit_refuse == 2) {
        hv_rpc_finish(c, HV_EUNAVAIL, "no node has joined the cluster: start one with hvagent");
        return;
    }
    if (submit_refuse == 3) {
        hv_rpc_finish(c, HV_EPERM, "this client token may not submit jobs");
        return;
    }
    if (submit_refuse == 4) { /* words gRPC's transport errors also use, in a path */
        hv_rpc_finish(c, HV_EUNAVAIL,
                      "the head cannot store its state in /srv/tls-dns/handshake/state.db (disk "
                      "full); the job was not submitted");
        return;
    }
    memset(&got_spec, 0, sizeof(got_spec));
    snprintf(got_spec.name, sizeof(got_spec.name), "%s", s->name);
    snprintf(got_spec.user, sizeof(got_spec.user), "%s", s->user);
    if (s->binary != NULL) {
        snprintf(got_spec.binary_name, sizeof(got_spec.binary_name), "%s", s->binary->name);
        snprintf(got_spec.binary_digest, sizeof(got_spec.binary_digest), "%s", s->binary->digest);
        got_spec.binary_mode = s->binary->mode;
        got_spec.binary_size = s->binary->size;
    }
    for (size_t i = 0; i < s->n_args; i++) {
        size_t l = strlen(got_spec.args);
        snprintf(got_spec.args + l, sizeof(got_spec.args) - l, "%s|", s->args[i]);
    }
    for (size_t i = 0; i < s->n_env; i++) {
        size_t l = strlen(got_spec.env);
        snprintf(got_spec.env + l, sizeof(got_spec.env) - l, "%s=%s|", s->env[i]->key,
                 s->env[i]->value);
    }
    for (size_t i = 0; i < s->n_files; i++) {
        size_t l = strlen(got_spec.files);
        fake_art_t *a = art_find(s->files[i]->digest, 0);
        snprintf(got_spec.files + l, sizeof(got_spec.files) - l, "%s:%s|", s->files[i]->name,
                 a && a->present ? "present" : "missing");
    }
    got_spec.np = s->np;
    got_spec.min_np = s->min_np;
    got_spec.max_np = s->max_np;
    got_spec.elastic = s->elastic;
    got_spec.max_resets = s->max_resets;
    got_spec.max_resets_set = s->max_resets_set;
    got_spec.elastic_timeout_s = s->elastic_timeout_s;
    got_spec.check_every = s->check_every;
    got_spec.cooldown_min_s = s->cooldown_min_s;
    got_spec.cooldown_max_s = s->cooldown_max_s;
    got_spec.cooldown_set = s->cooldown_set;
    Hvpb__V1__SubmitReply rep = HVPB__V1__SUBMIT_REPLY__INIT;
    rep.job_id = 7;
    rep.np = s->np ? s->np : 4;
    hv_rpc_reply(c, &rep.base);
}

static void send_done(hv_rpc_call_t *c, Hvpb__V1__JobView *v) {
    Hvpb__V1__WatchItem it = HVPB__V1__WATCH_ITEM__INIT;
    it.body_case = HVPB__V1__WATCH_ITEM__BODY_DONE;
    it.done = v;
    hv_rpc_send(c, &it.base);
    hv_rpc_finish(c, HV_OK, NULL);
}

/* Plays the script from the client's resume point: log lines before log_offset and events up
 * to event_after are skipped, as the head does. IT_BREAK fails only the first Watch call. */
static void on_watch(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    (void)ud;
    const Hvpb__V1__WatchRequest *r = (const Hvpb__V1__WatchRequest *)m;
    n_watch++;
    watch_started_ms = hv_now_ms();
    if (watch_refuse) {
        hv_rpc_finish_later(c, HV_ETOOBIG,
                            "too many watch streams: 2 open, limit 2 (limits.max_watch_streams); "
                            "job %llu is not affected: follow it later (hvctl logs -f %llu)",
                            (unsigned long long)r->job_id, (unsigned long long)r->job_id);
        return;
    }
    last_log_offset = r->log_offset;
    last_event_after = r->event_after;
    uint64_t nlog = 0;
    for (const script_item_t *s = script; s != NULL && s->kind != IT_END; s++) {
        Hvpb__V1__WatchItem it = HVPB__V1__WATCH_ITEM__INIT;
        if (s->kind == IT_LOG) {
            if (!r->logs || nlog++ < r->log_offset) {
                continue;
            }
            Hvpb__V1__LogLine l = HVPB__V1__LOG_LINE__INIT;
            l.rank = s->rank;
            l.stream = s->stream;
            l.text = (char *)s->text;
            it.body_case = HVPB__V1__WATCH_ITEM__BODY_LOG;
            it.log = &l;
            hv_rpc_send(c, &it.base);
        } else if (s->kind == IT_EVENT) {
            if (!r->events || s->seq <= r->event_after) {
                continue;
            }
            Hvpb__V1__Event e = HVPB__V1__EVENT__INIT;
            e.seq = s->seq;
            e.job_id = 7;
            e.kind = (char *)s->ekind;
            e.message = (char *)s->text;
            e.job_state = (Hvpb__V1__JobState)s->jstate;
            e.worker_id = s->worker;
            e.rank = s->wrank;
            it.body_case = HVPB__V1__WATCH_ITEM__BODY_EVENT;
            it.event = &e;
            hv_rpc_send(c, &it.base);
        } else if (s->kind == IT_BREAK) {
            if (n_watch == 1) {
                hv_rpc_finish(c, HV_EUNAVAIL, "head shutting down");
                return;
            }
        } else if (s->kind == IT_HOLD) {
            held_watch = c;
            return;
        } else if (s->kind == IT_DONE) {
            if (r->follow) {
                send_done(c, final_view);
            } else {
                hv_rpc_finish(c, HV_OK, NULL);
            }
            return;
        }
    }
    hv_rpc_finish(c, HV_OK, NULL);
}

static void on_watch_done(hv_rpc_call_t *c, const hv_rpc_status_t *st, void *ud) {
    (void)st;
    (void)ud;
    if (held_watch == c) {
        held_watch = NULL;
    }
}

static void on_cancel(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    (void)ud;
    const Hvpb__V1__JobRef *r = (const Hvpb__V1__JobRef *)m;
    n_cancel++;
    cancel_ms = hv_now_ms();
    if (r->job_id != 7) {
        hv_rpc_finish(c, HV_ENOTFOUND, "no job %llu", (unsigned long long)r->job_id);
        return;
    }
    Hvpb__V1__CancelReply rep = HVPB__V1__CANCEL_REPLY__INIT;
    rep.state = "cancelled";
    hv_rpc_reply(c, &rep.base);
    if (held_watch != NULL && cancel_ends_job) {
        hv_rpc_call_t *w = held_watch;
        held_watch = NULL;
        send_done(w, cancelled_view);
    }
}

static void on_get_job(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    (void)ud;
    const Hvpb__V1__JobRef *r = (const Hvpb__V1__JobRef *)m;
    if (r->job_id != 7 || final_view == NULL) {
        hv_rpc_finish(c, HV_ENOTFOUND, "no job %llu", (unsigned long long)r->job_id);
        return;
    }
    hv_rpc_reply(c, &final_view->base);
}

/* Actors/Get: one actor whose class and last event hold what a hostile class name could
 * (escape sequences, a newline); the head refuses such classes now, an older head stored them. */
static void on_get_actor(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    (void)m;
    (void)ud;
    Hvpb__V1__ActorView v = HVPB__V1__ACTOR_VIEW__INIT;
    v.id = 3;
    v.name = "ctr";
    v.namespace_ = "default";
    v.class_name = "ctr\x1b]0;pwned\x07\nstate      alive";
    v.state = "pending";
    v.reason = "created: class \x1b[2J";
    v.labels = "zone=a";
    v.last_status = -1;
    hv_rpc_reply(c, &v.base);
}

static void on_list_jobs(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    (void)m;
    (void)ud;
    Hvpb__V1__ListJobsReply rep = HVPB__V1__LIST_JOBS_REPLY__INIT;
    rep.n_jobs = 1;
    rep.jobs = &final_view;
    hv_rpc_reply(c, &rep.base);
}

static void on_list_nodes(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    (void)m;
    (void)ud;
    static char *addrs[] = {"10.0.0.1", "10.0.1.1"};
    Hvpb__V1__KeyValue zone = HVPB__V1__KEY_VALUE__INIT;
    zone.key = "zone";
    zone.value = "us-east-1a";
    Hvpb__V1__KeyValue *labels[] = {&zone};
    Hvpb__V1__NodeInfo info1 = HVPB__V1__NODE_INFO__INIT, info2 = HVPB__V1__NODE_INFO__INIT;
    info1.name = "gpu-node-1";
    info1.addrs = addrs;
    info1.n_addrs = 2;
    info1.slots = 8;
    info1.gpus = 8;
    info1.labels = labels;
    info1.n_labels = 1;
    info2.name = "n2";
    info2.slots = 4;
    Hvpb__V1__BlacklistEntry b1 = HVPB__V1__BLACKLIST_ENTRY__INIT;
    Hvpb__V1__BlacklistEntry b2 = HVPB__V1__BLACKLIST_ENTRY__INIT;
    b1.job_id = 3;
    b1.strikes = 1;
    b1.until_ms = hv_wall_ms() + 41200; /* shown as 42s left */
    b1.reason = "rank 1 on gpu-node-1 exited with status 3";
    b2.job_id = 5;
    b2.strikes = 5;
    b2.permanent = 1;
    b2.reason = "rank 0 on gpu-node-1 was killed by signal SIGSEGV";
    Hvpb__V1__BlacklistEntry *bl[] = {&b1, &b2};
    Hvpb__V1__NodeView n1 = HVPB__V1__NODE_VIEW__INIT, n2 = HVPB__V1__NODE_VIEW__INIT;
    n1.node_id = 1;
    n1.info = &info1;
    n1.state = garbled ? "entleerend" : "draining";
    n1.state_code = garbled ? HVPB__V1__NODE_STATE__NODE_STATE_DRAINING : 0;
    n1.slots_used = 2;
    n1.last_seen_ms = hv_wall_ms() - 3000;
    n1.blacklist = bl;
    n1.n_blacklist = 2;
    n2.node_id = 12;
    n2.info = &info2;
    n2.state = garbled ? "tot" : "dead";
    n2.state_code = garbled ? HVPB__V1__NODE_STATE__NODE_STATE_DEAD : 0;
    n2.addr = "10.0.0.2";
    Hvpb__V1__NodeInfo info3 = HVPB__V1__NODE_INFO__INIT;
    info3.name = "n3";
    info3.slots = 2;
    Hvpb__V1__NodeView n3 = HVPB__V1__NODE_VIEW__INIT;
    n3.node_id = 13;
    n3.info = &info3;
    n3.state = "alive";
    n3.last_seen_ms = hv_wall_ms() - 2000;
    n3.suspected_ms = hv_wall_ms() - 2000; /* evidence of a loss while its lease runs */
    Hvpb__V1__NodeView *nodes[] = {&n1, &n2, &n3};
    Hvpb__V1__ListNodesReply rep = HVPB__V1__LIST_NODES_REPLY__INIT;
    rep.n_nodes = 3;
    rep.nodes = nodes;
    hv_rpc_reply(c, &rep.base);
}

static void on_list_events(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    (void)ud;
    const Hvpb__V1__ListEventsRequest *r = (const Hvpb__V1__ListEventsRequest *)m;
    Hvpb__V1__Event e1 = HVPB__V1__EVENT__INIT, e2 = HVPB__V1__EVENT__INIT;
    e1.seq = 41;
    e1.node_id = 3;
    e1.kind = "node.join";
    e1.message = "node n3 joined";
    e2.seq = 42;
    e2.job_id = 7;
    e2.kind = "job.state";
    e2.message = "job 7 is running\twith \"4\" workers";
    e2.job_state = HVPB__V1__JOB_STATE__JOB_STATE_RUNNING;
    Hvpb__V1__Event e3 = HVPB__V1__EVENT__INIT, e4 = HVPB__V1__EVENT__INIT;
    e3.seq = 43;
    e3.job_id = 7;
    e3.kind = "round.close";
    e3.message = "job 7: generation 3 with 2 workers\n(after a failure)";
    e3.generation = 3;
    e3.reason = HVPB__V1__EVENT_REASON__EVENT_REASON_FAILURE;
    e3.rollback = 1;
    e3.duration_ms = 1500;
    e3.data = "{\"generation\":3,\"size\":2,\"rollback\":true,\"removed\":[101],"
              "\"reason\":\"failure: rank 1 \\\"x\\\"\"}";
    e4.seq = 44;
    e4.job_id = 7;
    e4.kind = "round.open";
    e4.message = "job 7: round 4 opens";
    e4.data = "{\"generation\": 4, oops";
    Hvpb__V1__Event *evs[] = {&e1, &e2, &e3, &e4};
    Hvpb__V1__ListEventsReply rep = HVPB__V1__LIST_EVENTS_REPLY__INIT;
    rep.n_events = r->job_id == 7 ? 3 : 4;
    rep.events = r->job_id == 7 ? &evs[1] : evs;
    hv_rpc_reply(c, &rep.base);
}

/* DrainNode: gpu-node-1 (or "1") is known; "old" plays a head without DrainNode; "ghost" is
 * refused with the head's own message; any other node is NOT_FOUND without one. */
static void on_drain_node(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    (void)ud;
    const Hvpb__V1__NodeDrainRequest *r = (const Hvpb__V1__NodeDrainRequest *)m;
    got_drain.n++;
    snprintf(got_drain.node, sizeof(got_drain.node), "%s", r->node);
    snprintf(got_drain.reason, sizeof(got_drain.reason), "%s", r->reason);
    got_drain.drain = r->drain;
    if (strcmp(r->node, "old") == 0) {
        hv_rpc_finish(c, HV_ENOTSUP, NULL);
        return;
    }
    if (strcmp(r->node, "ghost") == 0) {
        hv_rpc_finish(c, HV_ENOTFOUND, "no node named 'ghost' or with id ghost");
        return;
    }
    if (strcmp(r->node, "gpu-node-1") != 0 && strcmp(r->node, "1") != 0) {
        hv_rpc_finish(c, HV_ENOTFOUND, NULL);
        return;
    }
    Hvpb__V1__NodeInfo info = HVPB__V1__NODE_INFO__INIT;
    info.name = "gpu-node-1";
    info.slots = 8;
    Hvpb__V1__NodeView n = HVPB__V1__NODE_VIEW__INIT;
    n.node_id = 1;
    n.info = &info;
    n.state = r->drain ? "draining" : "alive";
    n.slots_used = 2;
    hv_rpc_reply(c, &n.base);
}

static void server_up(void) {
    if (uv_loop_init(&loop) != 0 || hv_rpc_engine_create(&loop, &eng) != HV_OK) {
        fprintf(stderr, "cannot start the engine\n");
        exit(1);
    }
    int port = 0;
    if (hv_rpc_server_create(eng, "127.0.0.1:0", &srv, &port) != HV_OK) {
        fprintf(stderr, "cannot bind 127.0.0.1:0\n");
        exit(1);
    }
    snprintf(target, sizeof(target), "127.0.0.1:%d", port);
    const hv_rpc_method_t ms[] = {
        {"/hvpb.v1.Jobs/StatArtifact", HV_RPC_UNARY, &hvpb__v1__stat_artifact_request__descriptor,
         on_stat, NULL, NULL},
        {"/hvpb.v1.Jobs/Upload", HV_RPC_UNARY, &hvpb__v1__upload_chunk__descriptor, on_upload, NULL,
         NULL},
        {"/hvpb.v1.Jobs/Submit", HV_RPC_UNARY, &hvpb__v1__submit_request__descriptor, on_submit,
         NULL, NULL},
        {"/hvpb.v1.Jobs/Watch", HV_RPC_SERVER_STREAM, &hvpb__v1__watch_request__descriptor,
         on_watch, on_watch_done, NULL},
        {"/hvpb.v1.Jobs/Cancel", HV_RPC_UNARY, &hvpb__v1__job_ref__descriptor, on_cancel, NULL,
         NULL},
        {"/hvpb.v1.Jobs/GetJob", HV_RPC_UNARY, &hvpb__v1__job_ref__descriptor, on_get_job, NULL,
         NULL},
        {"/hvpb.v1.Jobs/ListJobs", HV_RPC_UNARY, &hvpb__v1__list_jobs_request__descriptor,
         on_list_jobs, NULL, NULL},
        {"/hvpb.v1.Jobs/ListNodes", HV_RPC_UNARY, &hvpb__v1__list_nodes_request__descriptor,
         on_list_nodes, NULL, NULL},
        {"/hvpb.v1.Jobs/ListEvents", HV_RPC_UNARY, &hvpb__v1__list_events_request__descriptor,
         on_list_events, NULL, NULL},
        {"/hvpb.v1.Jobs/DrainNode", HV_RPC_UNARY, &hvpb__v1__node_drain_request__descriptor,
         on_drain_node, NULL, NULL},
        {"/hvpb.v1.Actors/Get", HV_RPC_UNARY, &hvpb__v1__get_actor_request__descriptor,
         on_get_actor, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
        hv_rpc_server_add(srv, &ms[i]);
    }
    if (hv_rpc_server_start(srv) != HV_OK) {
        fprintf(stderr, "cannot start the server\n");
        exit(1);
    }
}

static void server_down(void) {
    hv_rpc_server_shutdown(srv);
    hv_rpc_engine_destroy(eng);
    uv_loop_close(&loop);
    arts_reset();
}

/* ---- running the tools ---------------------------------------------------------------------- */

static char tmpdir[256];
static char bindir[512];

/* What one run of a tool produced. */
typedef struct run_s {
    int status;  /* exit status, or 128+signal */
    char *out;   /* owned: stdout */
    char *err;   /* owned: stderr */
    uint64_t ms; /* how long it ran */
} run_t;

static char *slurp(const char *path) {
    char *buf = NULL;
    size_t len = 0;
    if (hv_read_file(path, 16u << 20, &buf, &len) != HV_OK) {
        return hv_strdup("");
    }
    return buf;
}

/* SIGINT plan for a run: send sigint_count SIGINTs, the first sigint_after_ms after the Watch
 * call arrived, the second sigint_after_ms after the Cancel arrived. */
static int sigint_count;
static uint64_t sigint_after_ms = 300;

/* Runs bindir/tool with args (NULL-terminated), serving the fake head meanwhile. The tool gets
 * HV_HEAD=target. Bounded: killed after 30 s. */
static void run_tool(run_t *r, const char *tool, const char *const *args) {
    char path[700], outp[300], errp[300];
    snprintf(path, sizeof(path), "%s/%s", bindir, tool);
    snprintf(outp, sizeof(outp), "%s/out", tmpdir);
    snprintf(errp, sizeof(errp), "%s/err", tmpdir);
    const char *argv[32];
    int argc = 0;
    argv[argc++] = tool;
    for (int i = 0; args[i] != NULL && argc < 31; i++) {
        argv[argc++] = args[i];
    }
    argv[argc] = NULL;
    /* The environment is built before fork: after it, the child only makes system calls (gRPC
     * threads may hold locks at the moment of the fork). */
    extern char **environ;
    static char head_env[96], token_env[400];
    snprintf(head_env, sizeof(head_env), "HV_HEAD=%s", target);
    /* The CLIs refuse to run without a client token; the fake head does not check it. */
    snprintf(token_env, sizeof(token_env), "HV_TOKEN_FILE=%s/client.token", tmpdir);
    FILE *tf = fopen(token_env + strlen("HV_TOKEN_FILE="), "w");
    if (tf != NULL) {
        fputs("hvc_fakeheadfakeheadfakehead\n", tf);
        fclose(tf);
        chmod(token_env + strlen("HV_TOKEN_FILE="), 0600);
    }
    size_t nenv = 0;
    while (environ[nenv] != NULL) {
        nenv++;
    }
    char **envp = hv_calloc(nenv + 3, sizeof(char *));
    size_t k = 0;
    for (size_t i = 0; i < nenv; i++) {
        if (strncmp(environ[i], "HV_HEAD=", 8) != 0 &&
            strncmp(environ[i], "HV_TOKEN_FILE=", 14) != 0) {
            envp[k++] = environ[i];
        }
    }
    envp[k++] = head_env;
    envp[k++] = token_env;
    envp[k] = NULL;
    int o = open(outp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int e = open(errp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    watch_started_ms = 0;
    cancel_ms = 0;
    uint64_t t0 = hv_now_ms();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(o, 1);
        dup2(e, 2);
        execve(path, (char *const *)argv, envp);
        _exit(127);
    }
    close(o);
    close(e);
    hv_free(envp);
    int status = -1, sent = 0;
    for (;;) {
        uv_run(&loop, UV_RUN_NOWAIT);
        int ws = 0;
        pid_t w = waitpid(pid, &ws, WNOHANG);
        if (w == pid) {
            status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
            break;
        }
        uint64_t now = hv_now_ms();
        if (now - t0 > 30000) {
            fprintf(stderr, "%s did not finish within 30 s: killed\n", tool);
            kill(pid, SIGKILL);
            hv_check_failures++;
        }
        if (sent < sigint_count && sent == 0 && watch_started_ms != 0 &&
            now - watch_started_ms >= sigint_after_ms) {
            kill(pid, SIGINT);
            sent++;
        } else if (sent < sigint_count && sent == 1 && cancel_ms != 0 &&
                   now - cancel_ms >= sigint_after_ms) {
            kill(pid, SIGINT);
            sent++;
        }
        usleep(500);
    }
    for (int i = 0; i < 20; i++) { /* let the server see the last closes */
        uv_run(&loop, UV_RUN_NOWAIT);
        usleep(500);
    }
    r->status = status;
    r->ms = hv_now_ms() - t0;
    r->out = slurp(outp);
    r->err = slurp(errp);
}

/* Checks a tool's exit status; on a mismatch also shows what it wrote to stderr. */
#define CHECK_STATUS(run, want)                                                                    \
    do {                                                                                           \
        const run_t *r__ = (run);                                                                  \
        if (r__->status != (want)) {                                                               \
            fprintf(stderr, "%s:%d: exit status %d, want %d; stderr:\n%s", __FILE__, __LINE__,     \
                    r__->status, (want), r__->err);                                                \
            hv_check_failures++;                                                                   \
        }                                                                                          \
    } while (0)

static void run_free(run_t *r) {
    hv_free(r->out);
    hv_free(r->err);
}

/* Writes an "ELF" (a real header + pattern) of size bytes, mode 0755, under tmpdir. */
static void put_elf(const char *name, size_t size, unsigned seed, char *path, size_t len) {
    snprintf(path, len, "%s/%s", tmpdir, name);
    unsigned char *buf = hv_malloc(size);
    for (size_t i = 0; i < size; i++) {
        buf[i] = (unsigned char)((i * 2654435761u + seed) >> 13);
    }
    /* A sound ELF64 header (x86-64, ET_DYN, one program header right after it): hvsubmit
     * checks the header before it uploads anything. */
    static const unsigned char hdr[64] = {
        0x7f, 'E', 'L', 'F', 2,  1, 1,  0, 0, 0, 0, 0, 0, 0, 0, 0, /* e_ident */
        3,    0,   62,  0,   1,  0, 0,  0,                         /* type, machine, version */
        0,    0,   0,   0,   0,  0, 0,  0,                         /* e_entry */
        64,   0,   0,   0,   0,  0, 0,  0,                         /* e_phoff */
        0,    0,   0,   0,   0,  0, 0,  0,                         /* e_shoff */
        0,    0,   0,   0,   64, 0, 56, 0, 1, 0, 0, 0, 0, 0, 0, 0, /* flags, sizes, counts */
    };
    memcpy(buf, hdr, sizeof(hdr));
    FILE *f = fopen(path, "wb");
    fwrite(buf, 1, size, f);
    fclose(f);
    chmod(path, 0755);
    hv_free(buf);
}

static void put_text(const char *name, const char *text, char *path, size_t len) {
    snprintf(path, len, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    fputs(text, f);
    fclose(f);
    chmod(path, 0640);
}

/* 1 when text is one valid JSON document (python3's parser), 0 when not; 1 as well when there
 * is no python3 to ask (the C tests of the emitter still hold). /usr/bin/python3, the project's
 * interpreter: a `python3` on PATH may be a version manager's shim (pyenv's: 0.7 s a run). */
static int json_valid(const char *text) {
    char path[300], cmd[700];
    snprintf(path, sizeof(path), "%s/doc.json", tmpdir);
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        return 0;
    }
    fputs(text, f);
    fclose(f);
    snprintf(cmd, sizeof(cmd),
             "[ -x /usr/bin/python3 ] || exit 0; "
             "/usr/bin/python3 -c 'import json,sys; json.load(open(sys.argv[1]))' '%s'",
             path);
    return system(cmd) == 0;
}

static void reset_counts(void) {
    n_stat = n_upload = n_submit = n_watch = n_cancel = 0;
    memset(&got_drain, 0, sizeof(got_drain));
    submit_refuse = 0;
    watch_refuse = 0;
    upload_delay_ms = 0;
    cancel_ends_job = 1;
    sigint_count = 0;
    held_watch = NULL;
}

/* ---- job views ------------------------------------------------------------------------------ */

static Hvpb__V1__WorkerView wv[3];
static Hvpb__V1__WorkerView *wvp[3] = {&wv[0], &wv[1], &wv[2]};
static Hvpb__V1__JobView view_ok, view_failed, view_cancelled, view_elastic, view_elastic_failed;

static void views_init(void) {
    for (int i = 0; i < 3; i++) {
        hvpb__v1__worker_view__init(&wv[i]);
        wv[i].rank = (uint32_t)i;
        wv[i].node = i < 2 ? "n1" : "n2";
        wv[i].state = "exited";
        wv[i].pid = 1000 + i;
        wv[i].worker_id = 100 + (uint64_t)i;
    }
    hvpb__v1__job_view__init(&view_ok);
    view_ok.job_id = 7;
    view_ok.name = "train.bin";
    view_ok.state = "succeeded";
    view_ok.np = 3;
    view_ok.submitted_ms = 1700000000000ull;
    view_ok.started_ms = 1700000001000ull;
    view_ok.ended_ms = 1700000186000ull;
    view_ok.workers = wvp;
    view_ok.n_workers = 3;
    view_ok.binary_digest = "ab12";
    view_failed = view_ok;
    view_failed.state = "failed";
    view_failed.reason = "rank 1 exited with status 3";
    view_cancelled = view_ok;
    view_cancelled.state = "cancelled";
    view_cancelled.reason = "cancelled by user";
    view_elastic = view_ok;
    view_elastic.elastic = 1;
    view_elastic.np = 4;
    view_elastic.min_np = 2;
    view_elastic.max_np = 8;
    view_elastic.generation = 3;
    view_elastic.size = 2;
    view_elastic.resets = 1;
    view_elastic.max_resets = 3;
    view_elastic.check_every = 10;
    view_elastic.round_state = "closed";
    view_elastic.round_reason = "failure: rank 1 on n1 exited with status 3";
    view_elastic_failed = view_elastic;
    view_elastic_failed.state = "failed";
    view_elastic_failed.reason = "3 resets, at most 3 allowed: rank 0 on n2 exited with status 4";
    view_elastic_failed.generation = 4;
    view_elastic_failed.size = 1;
    view_elastic_failed.resets = 3;
}

/* ---- cases ---------------------------------------------------------------------------------- */

static const script_item_t script_ok[] = {
    {IT_EVENT, 0, 0, "generation 1 opened: start", 9, "round.open", 0, 0, 0},
    {IT_EVENT, 0, 0, "job 7 is running on 2 nodes", 10, "job.state", 3, 0, 0},
    {IT_EVENT, 0, 0, "worker 100 started", 11, "worker.start", 0, 0, 0},
    {IT_LOG, 0, 1, "hello from 0", 0, NULL, 0, 0, 0},
    {IT_LOG, 1, 2, "warning from 1", 0, NULL, 0, 0, 0},
    {IT_LOG, 2, 1, "epoch 1 loss=0.5", 0, NULL, 0, 0, 0},
    {IT_EVENT, 0, 0, "job 7 succeeded", 12, "job.state", 4, 0, 0},
    {IT_DONE, 0, 0, NULL, 0, NULL, 0, 0, 0},
    {IT_END, 0, 0, NULL, 0, NULL, 0, 0, 0},
};

static void test_submit_ok(void) {
    char bin[512], data[512];
    put_elf("train.bin", (5u << 19) + 17, 1, bin, sizeof(bin)); /* 2.5 MiB: three chunks */
    put_text("data.txt", "1 2 3\n", data, sizeof(data));
    reset_counts();
    script = script_ok;
    final_view = &view_ok;
    for (int i = 0; i < 3; i++) {
        wv[i].exit_code = 0;
        wv[i].term_signal = 0;
    }
    run_t r;
    const char *args[] = {"-np", "3", "--env",    "LR=0.1", "--env", "EMPTY=", "--file",
                          data,  bin, "--epochs", "2",      "-np",   "9",      NULL};
    run_tool(&r, "hvsubmit", args);
    CHECK_STATUS(&r, 0);
    CHECK_STR(r.out, "[0]<stdout>:hello from 0\n[2]<stdout>:epoch 1 loss=0.5\n");
    CHECK_HAS(r.err, "hvsubmit: job 7 submitted (3 workers)\n");
    CHECK_HAS(r.err, "hvsubmit: job 7 is running on 2 nodes\n");
    CHECK_HAS(r.err, "[1]<stderr>:warning from 1\n");
    CHECK_HAS(r.err, "hvsubmit: job 7 succeeded\n");
    CHECK_LACKS(r.err, "worker 100 started");
    CHECK_LACKS(r.err, "generation 1 opened"); /* a fixed-size job's one round */
    CHECK_LACKS(r.err, "uploading");
    /* The head got both files, whole and verified, in 1 MiB pieces. */
    CHECK_EQ(n_upload, 3 + 1);
    CHECK_EQ(narts, 2);
    CHECK(arts[0].present && arts[1].present);
    CHECK_EQ(got_spec.binary_size, (5u << 19) + 17);
    char want_digest[65];
    uint64_t size = 0;
    hv_sha256_file(bin, want_digest, &size);
    CHECK_STR(got_spec.binary_digest, want_digest);
    CHECK_STR(got_spec.binary_name, "train.bin");
    CHECK_STR(got_spec.name, "train.bin");
    CHECK_EQ(got_spec.binary_mode, 0755);
    CHECK_EQ(got_spec.np, 3);
    CHECK_STR(got_spec.args, "--epochs|2|-np|9|");
    CHECK_STR(got_spec.env, "LR=0.1|EMPTY=|");
    CHECK_STR(got_spec.files, "data.txt:present|");
    CHECK(got_spec.user[0] != '\0');
    /* A fixed-size job: nothing elastic in the spec, no summary at the end. */
    CHECK_EQ(got_spec.elastic, 0);
    CHECK_EQ(got_spec.max_resets_set, 0);
    CHECK_EQ(got_spec.cooldown_set, 0);
    CHECK_EQ(got_spec.check_every, 0);
    CHECK_LACKS(r.err, "generation");
    run_free(&r);

    /* Again, with no -np and a name: nothing is uploaded (the head has it). */
    reset_counts();
    const char *args2[] = {"--name", "resnet", "--quiet", bin, NULL};
    run_tool(&r, "hvsubmit", args2);
    CHECK_STATUS(&r, 0);
    CHECK_EQ(n_upload, 0);
    CHECK_EQ(n_stat, 1);
    CHECK_EQ(got_spec.np, 0);
    CHECK_STR(got_spec.name, "resnet");
    CHECK_HAS(r.err, "hvsubmit: job 7 takes every free slot: 4 workers\n");
    CHECK_LACKS(r.err, "is running"); /* --quiet */
    run_free(&r);
}

/* A slow upload, not on a terminal: a progress line every 5 s, and how long it took at the end. */
static void test_upload_progress(void) {
    char bin[512];
    put_elf("slow.bin", (7u << 19) + 9, 5, bin, sizeof(bin)); /* 3.5 MiB: four chunks */
    reset_counts();
    upload_delay_ms = 1800;
    script = script_ok;
    final_view = &view_ok;
    run_t r;
    const char *args[] = {"-np", "2", bin, NULL};
    run_tool(&r, "hvsubmit", args);
    upload_delay_ms = 0;
    CHECK_STATUS(&r, 0);
    CHECK_EQ(n_upload, 4);
    CHECK_HAS(r.err, "hvsubmit: uploading slow.bin: ");
    CHECK_HAS(r.err, "% (");
    CHECK_HAS(r.err, " of 3.5 MiB)\n");
    CHECK_HAS(r.err, "hvsubmit: uploaded slow.bin (3.5 MiB) in ");
    CHECK_LACKS(r.err, "slow.bin ["); /* no bar: stderr is not a terminal */
    run_free(&r);
}

static void test_upload_resume_and_limit(void) {
    char bin[512];
    put_elf("big.bin", (3u << 20) + 5, 2, bin, sizeof(bin));
    char digest[65];
    uint64_t size = 0;
    hv_sha256_file(bin, digest, &size);
    /* The head holds the first 2 MiB of an earlier, interrupted upload. */
    fake_art_t *a = art_find(digest, 1);
    a->data = hv_malloc(2u << 20);
    FILE *f = fopen(bin, "rb");
    CHECK(fread(a->data, 1, 2u << 20, f) == 2u << 20);
    fclose(f);
    a->len = 2u << 20;
    reset_counts();
    script = script_ok;
    final_view = &view_ok;
    run_t r;
    const char *args[] = {"-v", "-np", "2", bin, NULL};
    run_tool(&r, "hvsubmit", args);
    CHECK_STATUS(&r, 0);
    CHECK_EQ(n_upload, 2); /* 2 MiB..3 MiB, then the last 5 bytes */
    CHECK(a->present);
    CHECK_HAS(r.err, "from byte 2097152");
    run_free(&r);

    /* Over the head's limit: refused before any byte is sent. */
    char bin2[512];
    put_elf("huge.bin", (5u << 19), 3, bin2, sizeof(bin2));
    max_size = 1u << 20;
    reset_counts();
    const char *args2[] = {bin2, NULL};
    run_tool(&r, "hvsubmit", args2);
    max_size = 1ull << 30;
    CHECK_STATUS(&r, 65);
    CHECK_EQ(n_upload, 0);
    CHECK_EQ(n_submit, 0);
    CHECK_HAS(r.err, "huge.bin is 2.5 MiB, over the head's upload limit of 1.0 MiB (max_upload in "
                     "the head's config)");
    run_free(&r);
}

static const script_item_t script_fail[] = {
    {IT_LOG, 1, 2, "Traceback: boom", 0, NULL, 0, 0, 0},
    {IT_EVENT, 0, 0, "rank 1 on n1 exited with status 3", 20, "worker.exit", 0, 101, 1},
    {IT_EVENT, 0, 0, "job 7 failed: rank 1 exited with status 3", 21, "job.state", 5, 0, 0},
    {IT_DONE, 0, 0, NULL, 0, NULL, 0, 0, 0},
    {IT_END, 0, 0, NULL, 0, NULL, 0, 0, 0},
};

static const script_item_t script_fail_noevent[] = {
    {IT_EVENT, 0, 0, "job 7 failed: rank 1 was killed", 21, "job.state", 5, 0, 0},
    {IT_DONE, 0, 0, NULL, 0, NULL, 0, 0, 0},
    {IT_END, 0, 0, NULL, 0, NULL, 0, 0, 0},
};

static void test_submit_failed(void) {
    char bin[512];
    put_elf("train.bin", 4096, 1, bin, sizeof(bin));
    reset_counts();
    script = script_fail;
    final_view = &view_failed;
    wv[0].state = "killed";
    wv[0].exit_code = -1;
    wv[0].term_signal = 15;
    wv[1].state = "exited";
    wv[1].exit_code = 3;
    wv[1].term_signal = 0;
    wv[2].state = "exited";
    wv[2].exit_code = 0;
    wv[2].term_signal = 0;
    run_t r;
    const char *args[] = {"-np", "3", bin, NULL};
    run_tool(&r, "hvsubmit", args);
    CHECK_STATUS(&r, 3);
    CHECK_HAS(r.err, "[1]<stderr>:Traceback: boom\n");
    CHECK_HAS(r.err, "hvsubmit: rank 1 on n1 exited with status 3\n"); /* the event */
    CHECK_HAS(r.err, "hvsubmit: job 7 failed: rank 1 exited with status 3\n");
    const char *once = strstr(r.err, "job 7 failed:");
    CHECK(once != NULL && strstr(once + 1, "job 7 failed:") == NULL);
    /* Each failure is told once: rank 1's by its event, rank 0's (no event) at the end. */
    CHECK_LACKS(r.err, "hvsubmit: rank 1 on node n1 exited with status 3\n");
    CHECK_HAS(r.err, "hvsubmit: rank 0 on node n1 was killed by signal SIGTERM\n");
    CHECK_LACKS(r.err, "rank 2 on node");
    run_free(&r);

    /* Killed by SIGKILL (e.g. the OOM killer): 128 + 9, told at the end when no event did. */
    reset_counts();
    script = script_fail_noevent;
    wv[0].state = "exited";
    wv[0].term_signal = 0;
    wv[0].exit_code = 0;
    wv[1].exit_code = -1;
    wv[1].term_signal = 9;
    run_tool(&r, "hvsubmit", args);
    CHECK_STATUS(&r, 137);
    CHECK_HAS(r.err, "hvsubmit: rank 1 on node n1 was killed by signal SIGKILL\n");
    run_free(&r);
    wv[1].exit_code = 0;
    wv[1].term_signal = 0;
}

static const script_item_t script_break[] = {
    {IT_EVENT, 0, 0, "job 7 is running", 30, "job.state", 3, 0, 0},
    {IT_LOG, 0, 1, "line a", 0, NULL, 0, 0, 0},
    {IT_LOG, 0, 1, "line b", 0, NULL, 0, 0, 0},
    {IT_BREAK, 0, 0, NULL, 0, NULL, 0, 0, 0},
    {IT_LOG, 0, 1, "line c", 0, NULL, 0, 0, 0},
    {IT_EVENT, 0, 0, "job 7 succeeded", 31, "job.state", 4, 0, 0},
    {IT_DONE, 0, 0, NULL, 0, NULL, 0, 0, 0},
    {IT_END, 0, 0, NULL, 0, NULL, 0, 0, 0},
};

static void test_watch_resume(void) {
    char bin[512];
    put_elf("train.bin", 4096, 1, bin, sizeof(bin));
    reset_counts();
    script = script_break;
    final_view = &view_ok;
    run_t r;
    const char *args[] = {"-np", "3", bin, NULL};
    run_tool(&r, "hvsubmit", args);
    CHECK_STATUS(&r, 0);
    CHECK_EQ(n_watch, 2);
    CHECK_EQ(last_log_offset, 2);
    CHECK_EQ(last_event_after, 30);
    CHECK_STR(r.out, "[0]<stdout>:line a\n[0]<stdout>:line b\n[0]<stdout>:line c\n");
    CHECK_HAS(r.err, "hvsubmit: lost the head, reconnecting...\n");
    CHECK_HAS(r.err, "hvsubmit: reconnected to the head\n");
    const char *first = strstr(r.err, "job 7 is running");
    CHECK(first != NULL && strstr(first + 1, "job 7 is running") == NULL);
    run_free(&r);
}

static const script_item_t script_hold[] = {
    {IT_LOG, 0, 1, "step 1", 0, NULL, 0, 0, 0},
    {IT_HOLD, 0, 0, NULL, 0, NULL, 0, 0, 0},
    {IT_END, 0, 0, NULL, 0, NULL, 0, 0, 0},
};

static void test_sigint(void) {
    char bin[512];
    put_elf("train.bin", 4096, 1, bin, sizeof(bin));
    reset_counts();
    script = script_hold;
    final_view = &view_ok;
    cancelled_view = &view_cancelled;
    sigint_count = 1;
    run_t r;
    const char *args[] = {"-np", "3", bin, NULL};
    run_tool(&r, "hvsubmit", args);
    CHECK_STATUS(&r, 130);
    CHECK_EQ(n_cancel, 1);
    CHECK_STR(r.out, "[0]<stdout>:step 1\n");
    CHECK_HAS(r.err, "hvsubmit: cancelling job 7...\n");
    CHECK_HAS(r.err, "hvsubmit: job 7 cancelled: cancelled by user\n");
    run_free(&r);

    /* The job does not end after the cancel: a second Ctrl-C exits at once. */
    reset_counts();
    cancel_ends_job = 0;
    sigint_count = 2;
    run_tool(&r, "hvsubmit", args);
    CHECK_STATUS(&r, 130);
    CHECK_EQ(n_cancel, 1);
    CHECK(r.ms < 5000);
    CHECK_HAS(r.err, "interrupted again");
    run_free(&r);
    cancel_ends_job = 1;
}

static void test_refused_detach_unreachable(void) {
    char bin[512];
    put_elf("train.bin", 4096, 1, bin, sizeof(bin));
    reset_counts();
    script = script_ok;
    final_view = &view_ok;
    submit_refuse = 1;
    run_t r;
    const char *args[] = {"-np", "64", bin, NULL};
    run_tool(&r, "hvsubmit", args);
    CHECK_STATUS(&r, 65);
    CHECK_STR(r.err, "hvsubmit: job needs 64 slots, the cluster has at most 8\n");
    CHECK_EQ(n_watch, 0);
    run_free(&r);

    /* The head's own UNAVAILABLE is its message, not "cannot reach the head". */
    reset_counts();
    submit_refuse = 2;
    run_tool(&r, "hvsubmit", args);
    CHECK_STATUS(&r, 75);
    CHECK_STR(r.err, "hvsubmit: no node has joined the cluster: start one with hvagent\n");
    run_free(&r);

    /* A refusal of our credentials: 77, with the head's reason. */
    reset_counts();
    submit_refuse = 3;
    run_tool(&r, "hvsubmit", args);
    CHECK_STATUS(&r, 77);
    CHECK_STR(r.err, "hvsubmit: the head refused Submit: this client token may not submit jobs\n");
    run_free(&r);

    reset_counts();
    const char *args2[] = {"--detach", "-np", "2", bin, NULL};
    run_tool(&r, "hvsubmit", args2);
    CHECK_STATUS(&r, 0);
    CHECK_STR(r.out, "7\n");
    CHECK_EQ(n_watch, 0);
    run_free(&r);

    /* A head that is not there: a clear message within seconds. */
    reset_counts();
    const char *args3[] = {"--head", "127.0.0.1:1", bin, NULL};
    run_tool(&r, "hvsubmit", args3);
    CHECK_STATUS(&r, 69);
    CHECK_HAS(r.err, "hvsubmit: cannot reach the head at 127.0.0.1:1: ");
    CHECK(r.ms < 10000);
    run_free(&r);

    /* Local problems: exit 65 (not a program that can be shipped) before any call. */
    char script_path[512];
    put_text("train.sh", "#!/bin/sh\necho hi\n", script_path, sizeof(script_path));
    chmod(script_path, 0755);
    reset_counts();
    const char *args4[] = {script_path, NULL};
    run_tool(&r, "hvsubmit", args4);
    CHECK_STATUS(&r, 65);
    CHECK_HAS(r.err, "train.sh is a script, not an ELF executable");
    CHECK_EQ(n_stat, 0);
    run_free(&r);
}

/* What the head says itself is told apart from a lost connection by the mark the rpc layer puts
 * on the head's statuses, not by words: a message naming a path with "tls", "dns" and
 * "handshake" in it is still the head's (exit 75, shown as it is). A refusal the head marks
 * "try again later" (too many Watch streams now) is 75, not 65 like a request over a limit. */
static void test_head_words(void) {
    char bin[512];
    put_elf("train.bin", 4096, 1, bin, sizeof(bin));
    reset_counts();
    script = script_ok;
    final_view = &view_ok;
    submit_refuse = 4;
    run_t r;
    const char *args[] = {"-np", "2", bin, NULL};
    run_tool(&r, "hvsubmit", args);
    CHECK_STATUS(&r, 75);
    CHECK_STR(r.err, "hvsubmit: the head cannot store its state in /srv/tls-dns/handshake/state.db "
                     "(disk full); the job was not submitted\n");
    run_free(&r);

    reset_counts();
    final_view = &view_ok;
    watch_refuse = 1;
    const char *a1[] = {"logs", "7", "--follow", NULL};
    run_tool(&r, "hvctl", a1);
    CHECK_STATUS(&r, 75);
    CHECK_STR(r.err, "hvctl: too many watch streams: 2 open, limit 2 (limits.max_watch_streams); "
                     "job 7 is not affected: follow it later (hvctl logs -f 7)\n");
    CHECK_EQ(n_watch, 1);
    run_free(&r);

    reset_counts();
    script = script_ok;
    final_view = &view_ok;
    watch_refuse = 1;
    run_tool(&r, "hvsubmit", args);
    CHECK_STATUS(&r, 75);
    CHECK_HAS(r.err, "too many watch streams: 2 open, limit 2");
    CHECK_EQ(n_submit, 1);
    run_free(&r);
}

static void test_hvctl(void) {
    reset_counts();
    final_view = &view_failed;
    wv[0].state = "killed";
    wv[0].exit_code = -1;
    wv[0].term_signal = 15;
    wv[1].exit_code = 3;
    wv[2].state = "running";
    wv[2].exit_code = 0;
    run_t r;

    const char *a1[] = {"job", "7", NULL};
    run_tool(&r, "hvctl", a1);
    CHECK_STATUS(&r, 0);
    CHECK_HAS(r.out, "STATE:      failed\n");
    CHECK_HAS(r.out, "REASON:     rank 1 exited with status 3\n");
    CHECK_HAS(r.out, "DURATION:   3m05s\n");
    CHECK_HAS(r.out, "RANK  NODE  STATE    PID   EXIT     ATTEMPT  GEN  JOINED  DONE  REASON\n"
                     "0     n1    killed   1000  SIGTERM  0        -    -       no    -\n"
                     "1     n1    exited   1001  3        0        -    -       no    -\n"
                     "2     n2    running  1002  -        0        -    -       no    -\n");
    CHECK_LACKS(r.out, "ELASTIC:");
    run_free(&r);

    const char *a2[] = {"job", "42", NULL};
    run_tool(&r, "hvctl", a2);
    CHECK_STATUS(&r, 66);
    CHECK_STR(r.err, "hvctl: no job 42\n");
    run_free(&r);

    const char *a3[] = {"--json", "job", "7", NULL};
    run_tool(&r, "hvctl", a3);
    CHECK_STATUS(&r, 0);
    CHECK_HAS(r.out, "\"job_id\": 7,\n");
    CHECK_HAS(r.out, "\"term_signal\": 15,\n");
    CHECK_HAS(r.out, "\"elastic\": false,\n");
    CHECK(r.out[0] == '{' && strcmp(r.out + strlen(r.out) - 2, "}\n") == 0);
    CHECK(json_valid(r.out));
    run_free(&r);

    const char *a4[] = {"jobs", NULL};
    run_tool(&r, "hvctl", a4);
    CHECK_STATUS(&r, 0);
    CHECK_HAS(r.out, "ID  NAME       STATE   NP  SUBMITTED");
    CHECK_HAS(r.out, "3m05s     rank 1 exited with status 3\n");
    run_free(&r);

    const char *a5[] = {"nodes", NULL};
    run_tool(&r, "hvctl", a5);
    CHECK_STATUS(&r, 0);
    /* A suspected node says so in STATE, and since when. */
    CHECK_HAS(r.out,
              "NAME        ID  STATE                     SLOTS  GPUS  MEMORY  ADDRS              "
              "LAST-SEEN  LABELS           BLACKLIST\n"
              "gpu-node-1  1   draining                  2/8    8     -       10.0.0.1,10.0.1.1  "
              "3s ago     zone=us-east-1a  job 3: 1 strike, 42s left; job 5: permanent (5 "
              "strikes)\n"
              "n2          12  dead                      0/4    0     -       10.0.0.2           "
              "-          -                -\n"
              "n3          13  alive (suspected 2s ago)  0/2    0     -       -                  "
              "2s ago     -                -\n");
    run_free(&r);

    const char *a5j[] = {"--json", "nodes", NULL};
    run_tool(&r, "hvctl", a5j);
    CHECK_STATUS(&r, 0);
    CHECK_HAS(r.out, "\"name\": \"gpu-node-1\",\n      \"state\": \"draining\",\n");
    CHECK_HAS(r.out, "\"draining\": true,\n      \"blacklist\": [\n        {\n"
                     "          \"job_id\": 3,\n          \"strikes\": 1,\n"
                     "          \"permanent\": false,\n");
    CHECK_HAS(r.out, "\"job_id\": 5,\n          \"strikes\": 5,\n          \"permanent\": true,\n");
    CHECK_HAS(r.out, "\"reason\": \"rank 0 on gpu-node-1 was killed by signal SIGSEGV\"\n");
    CHECK_HAS(r.out, "\"draining\": false,\n      \"blacklist\": []\n");
    CHECK_HAS(r.out, "\"suspected\": false,\n      \"suspected_ms\": 0,\n");
    CHECK_HAS(r.out, "\"name\": \"n3\",\n      \"state\": \"alive\",\n");
    CHECK_HAS(r.out, "\"suspected\": true,\n      \"suspected_ms\": ");
    CHECK(json_valid(r.out));
    run_free(&r);

    const char *a6[] = {"events", "--job", "7", "--json", NULL};
    run_tool(&r, "hvctl", a6);
    CHECK_STATUS(&r, 0);
    CHECK_HAS(r.out, "\"message\": \"job 7 is running\\twith \\\"4\\\" workers\",\n"
                     "      \"job_state\": \"running\"\n");
    CHECK_LACKS(r.out, "node.join");
    /* The head's JSON data is an object in the document, re-indented. */
    CHECK_HAS(r.out, "\"message\": \"job 7: generation 3 with 2 workers\\n(after a failure)\",\n"
                     "      \"generation\": 3,\n"
                     "      \"reason\": \"failure\",\n"
                     "      \"duration_ms\": 1500,\n"
                     "      \"rollback\": true,\n"
                     "      \"data\": {\n"
                     "        \"generation\": 3,\n"
                     "        \"size\": 2,\n"
                     "        \"rollback\": true,\n"
                     "        \"removed\": [\n"
                     "          101\n"
                     "        ],\n"
                     "        \"reason\": \"failure: rank 1 \\\"x\\\"\"\n"
                     "      }\n");
    /* Data that is not a JSON object stays out of "data" and is kept as text. */
    CHECK_HAS(r.out, "\"data\": null,\n      \"data_text\": \"{\\\"generation\\\": 4, oops\"\n");
    CHECK(json_valid(r.out));
    run_free(&r);

    const char *a7[] = {"events", NULL};
    run_tool(&r, "hvctl", a7);
    CHECK_STATUS(&r, 0);
    CHECK_HAS(r.out, "SEQ  TIME");
    CHECK_HAS(r.out, "node.join    node n3 joined\n");
    CHECK_HAS(r.out, "job 7 is running\\twith \"4\" workers\n");
    /* One line per event, data or not (the header, then four events). */
    CHECK_HAS(r.out, "round.close  job 7: generation 3 with 2 workers\\n(after a failure)\n");
    int lines = 0;
    for (const char *p = r.out; *p; p++) {
        lines += *p == '\n';
    }
    CHECK_EQ(lines, 5);
    run_free(&r);

    const char *a8[] = {"cancel", "7", NULL};
    run_tool(&r, "hvctl", a8);
    CHECK_STATUS(&r, 0);
    CHECK_STR(r.out, "job 7: cancelled\n");
    run_free(&r);

    script = script_ok;
    const char *a9[] = {"logs", "7", NULL};
    run_tool(&r, "hvctl", a9);
    CHECK_STATUS(&r, 0);
    CHECK_STR(r.out, "[0]<stdout>:hello from 0\n[1]<stderr>:warning from 1\n"
                     "[2]<stdout>:epoch 1 loss=0.5\n");
    run_free(&r);

    const char *a10[] = {"logs", "7", "--follow", "--json", NULL};
    run_tool(&r, "hvctl", a10);
    CHECK_STATUS(&r, 0);
    CHECK_HAS(r.out, "\"text\": \"warning from 1\"\n");
    run_free(&r);

    const char *a11[] = {"job", NULL};
    run_tool(&r, "hvctl", a11);
    CHECK_STATUS(&r, 64);
    CHECK_HAS(r.err, "'job' needs a job id");
    run_free(&r);
}

static const script_item_t script_elastic[] = {
    {IT_EVENT, 0, 0, "job 7 is running on 2 nodes", 10, "job.state", 3, 0, 0},
    {IT_LOG, 0, 1, "epoch 1", 0, NULL, 0, 0, 0},
    {IT_EVENT, 0, 0, "generation 3 opened (roll back): failure: rank 1 on n1 exited with status 3",
     11, "round.open", 0, 0, 0},
    {IT_EVENT, 0, 0, "job 7 succeeded", 12, "job.state", 4, 0, 0},
    {IT_DONE, 0, 0, NULL, 0, NULL, 0, 0, 0},
    {IT_END, 0, 0, NULL, 0, NULL, 0, 0, 0},
};

static const script_item_t script_elastic_fail[] = {
    {IT_EVENT, 0, 0, "job 7 is running on 2 nodes", 20, "job.state", 3, 0, 0},
    /* The head's event of the end carries its reason (hvsubmit does not say it again). */
    {IT_EVENT, 0, 0, "job 7 failed: 3 resets, at most 3 allowed: rank 0 on n1 exited with status 4",
     21, "job.state", 5, 0, 0},
    {IT_DONE, 0, 0, NULL, 0, NULL, 0, 0, 0},
    {IT_END, 0, 0, NULL, 0, NULL, 0, 0, 0},
};

static void test_submit_elastic(void) {
    char bin[512];
    put_elf("train.bin", 4096, 1, bin, sizeof(bin));
    for (int i = 0; i < 3; i++) {
        wv[i].state = "exited";
        wv[i].exit_code = 0;
        wv[i].term_signal = 0;
    }
    reset_counts();
    script = script_elastic;
    final_view = &view_elastic;
    run_t r;
    const char *args[] = {"-np",
                          "4",
                          "--min-np",
                          "2",
                          "--max-np",
                          "8",
                          "--max-resets",
                          "3",
                          "--elastic-timeout",
                          "300",
                          "--check-every",
                          "10",
                          "--blacklist-cooldown",
                          "30:600",
                          bin,
                          NULL};
    run_tool(&r, "hvsubmit", args);
    CHECK_STATUS(&r, 0);
    CHECK_EQ(got_spec.np, 4);
    CHECK_EQ(got_spec.min_np, 2);
    CHECK_EQ(got_spec.max_np, 8);
    CHECK_EQ(got_spec.elastic, 1);
    CHECK_EQ(got_spec.max_resets, 3);
    CHECK_EQ(got_spec.max_resets_set, 1);
    CHECK_EQ(got_spec.elastic_timeout_s, 300);
    CHECK_EQ(got_spec.check_every, 10);
    CHECK_EQ(got_spec.cooldown_min_s, 30);
    CHECK_EQ(got_spec.cooldown_max_s, 600);
    CHECK_EQ(got_spec.cooldown_set, 1);
    CHECK_HAS(r.err, "hvsubmit: job 7 submitted (4 workers, elastic: 2 to 8)\n");
    CHECK_HAS(r.err, "hvsubmit: generation 3 opened (roll back): failure: rank 1 on n1 exited "
                     "with status 3\n");
    /* The end is said once, with the elastic summary: not the head's plain event before it. */
    CHECK(strstr(r.err, "hvsubmit: job 7 succeeded\n") == NULL);
    CHECK_HAS(r.err, "hvsubmit: job 7 succeeded: generation 3, 2 workers, 1 reset\n");
    CHECK_STR(r.out, "[0]<stdout>:epoch 1\n");
    run_free(&r);

    /* Zeros given on purpose reach the head as such (max_resets_set, cooldown_set). */
    reset_counts();
    const char *args2[] = {"--max-np", "8", "--max-resets", "0", "--blacklist-cooldown", "0:0",
                           bin,        NULL};
    run_tool(&r, "hvsubmit", args2);
    CHECK_STATUS(&r, 0);
    CHECK_EQ(got_spec.np, 0);
    CHECK_EQ(got_spec.min_np, 0);
    CHECK_EQ(got_spec.max_np, 8);
    CHECK_EQ(got_spec.elastic, 1);
    CHECK_EQ(got_spec.max_resets, 0);
    CHECK_EQ(got_spec.max_resets_set, 1);
    CHECK_EQ(got_spec.cooldown_min_s, 0);
    CHECK_EQ(got_spec.cooldown_max_s, 0);
    CHECK_EQ(got_spec.cooldown_set, 1);
    CHECK_EQ(got_spec.check_every, 0);       /* the head's default */
    CHECK_EQ(got_spec.elastic_timeout_s, 0); /* the head's default */
    CHECK_HAS(r.err, "hvsubmit: job 7 submitted (4 workers, elastic: at most 8)\n");
    run_free(&r);

    /* --quiet: no summary after a success. */
    reset_counts();
    const char *args3[] = {"--quiet", "--min-np", "2", bin, NULL};
    run_tool(&r, "hvsubmit", args3);
    CHECK_STATUS(&r, 0);
    CHECK_EQ(got_spec.elastic, 1);
    CHECK_EQ(got_spec.max_resets_set, 0);
    CHECK_EQ(got_spec.cooldown_set, 0);
    CHECK_HAS(r.err, "elastic: at least 2)");
    CHECK_LACKS(r.err, "generation");
    run_free(&r);

    /* A failed elastic job: the stored reason, the culprit, then where the job ended. */
    reset_counts();
    script = script_elastic_fail;
    final_view = &view_elastic_failed;
    view_elastic_failed.reason = "3 resets, at most 3 allowed: rank 0 on n1 exited with status 4";
    wv[0].exit_code = 4;
    wv[0].generation = 4; /* a member of the last round: its failure is the job's status */
    const char *args4[] = {"--min-np", "1", "--max-np", "3", bin, NULL};
    run_tool(&r, "hvsubmit", args4);
    CHECK_STATUS(&r, 4);
    const char *reason = strstr(r.err, "hvsubmit: job 7 failed: 3 resets, at most 3 allowed: rank "
                                       "0 on n1 exited with status 4\n");
    const char *summary = strstr(r.err, "hvsubmit: job 7 at its end: generation 4, 1 worker, "
                                        "3 resets\n");
    CHECK(reason != NULL && summary != NULL && reason < summary);
    CHECK_HAS(r.err, "hvsubmit: rank 0 on node n1 exited with status 4\n");
    if (reason == NULL || summary == NULL) {
        fprintf(stderr, "stderr was:\n%s", r.err);
    }
    run_free(&r);
    wv[0].exit_code = 0;
    wv[0].generation = 0;

    /* Bad elastic options: exit 64 before anything reaches the head. */
    static const struct {
        const char *a, *b, *c, *d;
        const char *msg;
    } bad[] = {
        {"--min-np", "2", "--check-every", "0",
         "hvsubmit: --check-every '0': expected a number of commits from 1 to 1000000 (see "
         "hvsubmit --help)\n"},
        {"--min-np", "1", "--blacklist-cooldown", "60:30",
         "hvsubmit: --blacklist-cooldown '60:30': MIN 60 is more than MAX 30 (see hvsubmit "
         "--help)\n"},
        {"-np", "2", "--max-resets", "2",
         "hvsubmit: --max-resets is for elastic jobs: give --min-np and/or --max-np too"},
        {"-np", "9", "--max-np", "8",
         "hvsubmit: -np 9 is more than --max-np 8 (see hvsubmit --help)\n"},
        {"--max-np", "4", "--elastic-timeout", "0",
         "hvsubmit: --elastic-timeout '0': expected seconds from 1 to 604800 (see hvsubmit "
         "--help)\n"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        reset_counts();
        const char *a5[] = {bad[i].a, bad[i].b, bad[i].c, bad[i].d, bin, NULL};
        run_tool(&r, "hvsubmit", a5);
        CHECK_STATUS(&r, 64);
        CHECK_HAS(r.err, bad[i].msg);
        CHECK_EQ(n_stat, 0);
        CHECK_EQ(n_submit, 0);
        run_free(&r);
    }

    const char *help[] = {"--help", NULL};
    run_tool(&r, "hvsubmit", help);
    CHECK_STATUS(&r, 0);
    CHECK_HAS(r.out, "--blacklist-cooldown MIN:MAX");
    CHECK_HAS(r.out, "--check-every N");
    CHECK_HAS(r.out, "--elastic-timeout S");
    CHECK_HAS(r.out, "the head's defaults (the elastic: section of its config)");
    run_free(&r);
}

static void test_hvctl_elastic(void) {
    reset_counts();
    final_view = &view_elastic;
    wv[0].state = "exited";
    wv[0].exit_code = 0;
    wv[0].term_signal = 0;
    wv[0].generation = 3;
    wv[0].joined_generation = 1;
    wv[0].done = 1;
    wv[1].state = "exited";
    wv[1].exit_code = 3;
    wv[1].term_signal = 0;
    wv[1].generation = 2;
    wv[1].joined_generation = 1;
    wv[1].reason = "";
    wv[2].state = "running";
    wv[2].exit_code = 0;
    wv[2].generation = 3;
    wv[2].joined_generation = 3;
    run_t r;
    const char *a1[] = {"job", "7", NULL};
    run_tool(&r, "hvctl", a1);
    CHECK_STATUS(&r, 0);
    CHECK_HAS(r.out, "NP:         4 (2-8)\n"
                     "ELASTIC:    2 to 8 workers, membership checked every 10 commits\n"
                     "GENERATION: 3 (2 workers)\n"
                     "ROUND:      closed (opened for: failure: rank 1 on n1 exited with status 3)\n"
                     "RESETS:     1 of at most 3\n");
    CHECK_HAS(r.out, "RANK  NODE  STATE    PID   EXIT  ATTEMPT  GEN  JOINED  DONE  REASON\n"
                     "0     n1    exited   1000  0     0        3    1       yes   -\n"
                     "1     n1    exited   1001  3     0        2    1       no    -\n"
                     "2     n2    running  1002  -     0        3    3       no    -\n");
    run_free(&r);

    const char *a2[] = {"--json", "job", "7", NULL};
    run_tool(&r, "hvctl", a2);
    CHECK_STATUS(&r, 0);
    CHECK_HAS(r.out, "\"elastic\": true,\n");
    CHECK_HAS(r.out, "\"generation\": 3,\n  \"size\": 2,\n");
    CHECK_HAS(r.out, "\"round_state\": \"closed\",\n");
    CHECK_HAS(r.out, "\"round_reason\": \"failure: rank 1 on n1 exited with status 3\",\n");
    CHECK_HAS(r.out, "\"max_resets\": 3,\n  \"check_every\": 10,\n");
    CHECK_HAS(r.out, "\"min_np\": 2,\n  \"max_np\": 8,\n  \"resets\": 1,\n");
    CHECK_HAS(r.out, "\"generation\": 3,\n      \"joined_generation\": 1,\n"
                     "      \"done\": true\n");
    CHECK(json_valid(r.out));
    run_free(&r);

    /* A fixed-size job shows none of it. */
    final_view = &view_ok;
    run_tool(&r, "hvctl", a1);
    CHECK_STATUS(&r, 0);
    CHECK_LACKS(r.out, "ELASTIC:");
    CHECK_LACKS(r.out, "GENERATION:");
    CHECK_HAS(r.out, "RESETS:     0\n");
    run_free(&r);
    for (int i = 0; i < 3; i++) {
        wv[i].generation = 0;
        wv[i].joined_generation = 0;
        wv[i].done = 0;
    }
}

/* The copy of a running elastic job's state: hvctl job shows it, hvctl status warns when there
 * is none or it is old (issue 15: the state must outlive the workers). */
static void test_hvctl_state_copy(void) {
    reset_counts();
    Hvpb__V1__JobView v = view_elastic;
    v.state = "running";
    v.workers = NULL;
    v.n_workers = 0;
    final_view = &v;
    run_t r;
    const char *st[] = {"status", NULL};
    run_tool(&r, "hvctl", st);
    CHECK_STATUS(&r, 0);
    CHECK_HAS(r.out, "warning: job 7 has no copy of its training state outside its workers yet");
    run_free(&r);
    const char *job[] = {"job", "7", NULL};
    run_tool(&r, "hvctl", job);
    CHECK_HAS(r.out, "STATE COPY: none outside its workers yet\n");
    run_free(&r);

    Hvpb__V1__StateCopyRef copy = HVPB__V1__STATE_COPY_REF__INIT;
    copy.generation = 3;
    copy.commit = 120;
    copy.stored_ms = hv_wall_ms() - 2000;
    v.copy = &copy;
    v.resumes = 1;
    v.resume_generation = 3;
    v.resumed_from = "head";
    run_tool(&r, "hvctl", st);
    CHECK_STATUS(&r, 0);
    CHECK_LACKS(r.out, "warning: job 7");
    run_free(&r);
    run_tool(&r, "hvctl", job);
    // The age is 2 s and more: hvctl runs seconds later on a loaded machine.
    CHECK_HAS(r.out, "STATE COPY: kept by the head: generation 3, commit 120, ");
    CHECK_HAS(r.out, "s old\n");
    CHECK_HAS(r.out, "RESUMED:    1 time from the head's copy (last in generation 3)\n");
    run_free(&r);
    const char *js[] = {"--json", "job", "7", NULL};
    run_tool(&r, "hvctl", js);
    CHECK_HAS(r.out, "\"resumes\": 1,\n");
    CHECK_HAS(r.out, "\"copy\": {\n");
    CHECK_HAS(r.out, "\"commit\": 120,\n");
    CHECK(json_valid(r.out));
    run_free(&r);

    copy.stored_ms = hv_wall_ms() - 10u * 60u * 1000u;
    run_tool(&r, "hvctl", st);
    CHECK_HAS(r.out, "warning: job 7's newest copy of its training state is 10");
    run_free(&r);

    /* The durable tier: its copy and the tier of the last resume; a job whose only copy is on
     * its own (the head's) machine is warned about. */
    copy.stored_ms = hv_wall_ms() - 2000;
    Hvpb__V1__StateCopyRef dcopy = HVPB__V1__STATE_COPY_REF__INIT;
    dcopy.generation = 3;
    dcopy.commit = 100;
    dcopy.stored_ms = hv_wall_ms() - 5000;
    v.durable_copy = &dcopy;
    v.resumed_from = "durable";
    run_tool(&r, "hvctl", job);
    CHECK_HAS(r.out, "DURABLE:    generation 3, commit 100, 5");
    CHECK_HAS(r.out, "RESUMED:    1 time from the durable copy (last in generation 3)\n");
    run_free(&r);
    run_tool(&r, "hvctl", js);
    CHECK_HAS(r.out, "\"durable_copy\": {\n");
    CHECK_HAS(r.out, "\"resumed_from\": \"durable\"");
    CHECK(json_valid(r.out));
    run_free(&r);
    v.durable_copy = NULL;
    v.copy_on_own_node = 1;
    run_tool(&r, "hvctl", st);
    CHECK_HAS(r.out, "warning: job 7's only copy of its training state is on the machine all its "
                     "workers run on");
    run_free(&r);
    v.copy_on_own_node = 0;
    v.resumed_from = NULL;
    final_view = &view_ok;
}

/* The head's words changed (another language, reworded messages, other state words): hvsubmit
 * and hvctl decide on the state codes and the events' kinds and fields, never on the words, so
 * every decision stays right. The words are still shown as they came, for people. */
static const script_item_t script_words[] = {
    {IT_EVENT, 0, 0, "Auftrag 7 eingereicht", 5, "job.state", 1, 0, 0},
    {IT_EVENT, 0, 0, "Auftrag 7 laeuft", 10, "job.state", 3, 0, 0},
    {IT_EVENT, 0, 0, "Rang 1 ist verloren", 20, "worker.lost", 0, 101, 1},
    {IT_EVENT, 0, 0, "Rang 1 ist weg", 21, "worker.fail", 0, 101, 1},
    {IT_EVENT, 0, 0, "Auftrag 7 ist gescheitert", 22, "job.state", 5, 0, 0},
    {IT_EVENT, 0, 0, "Auftrag 7 ist wirklich gescheitert", 23, "job.state", 5, 0, 0},
    {IT_DONE, 0, 0, NULL, 0, NULL, 0, 0, 0},
    {IT_END, 0, 0, NULL, 0, NULL, 0, 0, 0},
};

static void test_words_changed(void) {
    char bin[512];
    put_elf("train.bin", 4096, 1, bin, sizeof(bin));
    reset_counts();
    garbled = 1;
    Hvpb__V1__JobView v = view_failed;
    v.state = "gescheitert";
    v.state_code = HVPB__V1__JOB_STATE__JOB_STATE_FAILED;
    v.reason = "Rang 1: Status 3";
    wv[0].state = "beendet"; /* killed by the head (a consequence), says only its code */
    wv[0].state_code = HVPB__V1__WORKER_STATE__WORKER_STATE_KILLED;
    wv[0].exit_code = -1;
    wv[0].term_signal = 15;
    wv[1].state = "getoetet"; /* failed on its own: the job's status */
    wv[1].state_code = HVPB__V1__WORKER_STATE__WORKER_STATE_EXITED;
    wv[1].exit_code = 3;
    wv[1].term_signal = 0;
    wv[2].state = "weg";
    wv[2].state_code = HVPB__V1__WORKER_STATE__WORKER_STATE_EXITED;
    wv[2].exit_code = 0;
    wv[2].term_signal = 0;
    script = script_words;
    final_view = &v;
    run_t r;
    const char *args[] = {"-np", "3", bin, NULL};
    run_tool(&r, "hvsubmit", args);
    CHECK_STATUS(&r, 3); /* rank 1's status: rank 0 was killed by the head */
    CHECK_HAS(r.err, "hvsubmit: Auftrag 7 laeuft\n");
    CHECK_HAS(r.err, "hvsubmit: Rang 1 ist verloren\n");
    CHECK_HAS(r.err, "hvsubmit: Auftrag 7 ist gescheitert\n");
    CHECK_LACKS(r.err, "eingereicht");    /* hvsubmit said the submission itself */
    CHECK_LACKS(r.err, "Rang 1 ist weg"); /* the same worker's loss, told once */
    CHECK_LACKS(r.err, "wirklich");       /* the same state, told once */
    CHECK_LACKS(r.err, "job 7 failed");   /* the head's event told the failure */
    CHECK_LACKS(r.err, "ended in state");
    CHECK_LACKS(r.err, "rank 1 on node n1"); /* its event told rank 1's failure */
    CHECK_HAS(r.err, "hvsubmit: rank 0 on node n1 was killed by signal SIGTERM\n");
    run_free(&r);

    const char *a1[] = {"job", "7", NULL};
    run_tool(&r, "hvctl", a1);
    CHECK_STATUS(&r, 0);
    CHECK_HAS(r.out, "STATE:      failed\n");
    CHECK_HAS(r.out, "0     n1    killed  1000  SIGTERM");
    CHECK_HAS(r.out, "1     n1    exited  1001  3 ");
    run_free(&r);
    const char *a2[] = {"--json", "job", "7", NULL};
    run_tool(&r, "hvctl", a2);
    CHECK_STATUS(&r, 0);
    CHECK_HAS(r.out, "\"state\": \"failed\",\n");
    CHECK_HAS(r.out, "\"state\": \"killed\",\n");
    CHECK_LACKS(r.out, "gescheitert");
    run_free(&r);
    const char *a3[] = {"--json", "nodes", NULL};
    run_tool(&r, "hvctl", a3);
    CHECK_STATUS(&r, 0);
    CHECK_HAS(r.out, "\"state\": \"draining\",\n");
    CHECK_HAS(r.out, "\"draining\": true,\n");
    CHECK_HAS(r.out, "\"state\": \"dead\",\n");
    run_free(&r);
    const char *a4[] = {"status", NULL};
    run_tool(&r, "hvctl", a4);
    CHECK_STATUS(&r, 0);
    CHECK_HAS(r.out, "1 draining");
    CHECK_HAS(r.out, "1 failed");
    run_free(&r);
    const char *a5[] = {"--json", "events", NULL};
    run_tool(&r, "hvctl", a5);
    CHECK_STATUS(&r, 0);
    CHECK_HAS(r.out, "\"job_state\": \"running\"");
    CHECK_HAS(r.out, "\"generation\": 3,\n");
    CHECK_HAS(r.out, "\"reason\": \"failure\",\n");
    CHECK_HAS(r.out, "\"duration_ms\": 1500,\n");
    CHECK_HAS(r.out, "\"rollback\": true");
    CHECK(json_valid(r.out));
    run_free(&r);
    garbled = 0;
    for (int i = 0; i < 3; i++) {
        wv[i].state = "exited";
        wv[i].state_code = HVPB__V1__WORKER_STATE__WORKER_STATE_UNSPECIFIED;
        wv[i].exit_code = 0;
        wv[i].term_signal = 0;
    }
    final_view = &view_ok;
}

static void test_hvctl_drain(void) {
    reset_counts();
    run_t r;
    const char *a1[] = {"drain", "gpu-node-1", "--reason", "spot notice", NULL};
    run_tool(&r, "hvctl", a1);
    CHECK_STATUS(&r, 0);
    CHECK_STR(r.out, "node gpu-node-1 (id 1): draining, 2/8 slots used\n");
    CHECK_EQ(got_drain.n, 1);
    CHECK_EQ(got_drain.drain, 1);
    CHECK_STR(got_drain.node, "gpu-node-1");
    CHECK_STR(got_drain.reason, "spot notice");
    run_free(&r);

    const char *a2[] = {"undrain", "1", NULL};
    run_tool(&r, "hvctl", a2);
    CHECK_STATUS(&r, 0);
    CHECK_STR(r.out, "node gpu-node-1 (id 1): alive, 2/8 slots used\n");
    CHECK_EQ(got_drain.drain, 0);
    CHECK_STR(got_drain.node, "1");
    CHECK(strncmp(got_drain.reason, "hvctl undrain", 13) == 0);
    run_free(&r);

    const char *a3[] = {"--json", "drain", "1", NULL};
    run_tool(&r, "hvctl", a3);
    CHECK_STATUS(&r, 0);
    CHECK_HAS(r.out, "\"state\": \"draining\",\n");
    CHECK_HAS(r.out, "\"draining\": true,\n");
    CHECK(json_valid(r.out));
    run_free(&r);

    /* An unknown node: the head's NOT_FOUND without a message, and with one. */
    const char *a4[] = {"drain", "nosuch", NULL};
    run_tool(&r, "hvctl", a4);
    CHECK_STATUS(&r, 66);
    CHECK_STR(r.err, "hvctl: no node 'nosuch' (see 'hvctl nodes')\n");
    CHECK_STR(r.out, "");
    run_free(&r);
    const char *a5[] = {"undrain", "ghost", NULL};
    run_tool(&r, "hvctl", a5);
    CHECK_STATUS(&r, 66);
    CHECK_STR(r.err, "hvctl: no node named 'ghost' or with id ghost\n");
    run_free(&r);

    /* A head without DrainNode. */
    const char *a6[] = {"drain", "old", NULL};
    run_tool(&r, "hvctl", a6);
    CHECK_STATUS(&r, 69);
    CHECK_HAS(r.err, "hvctl: the head at 127.0.0.1:");
    CHECK_HAS(r.err, " does not know DrainNode (it is older than this hvctl)\n");
    run_free(&r);

    /* No head there. */
    const char *a7[] = {"--head", "127.0.0.1:1", "drain", "n1", NULL};
    run_tool(&r, "hvctl", a7);
    CHECK_STATUS(&r, 69);
    CHECK_HAS(r.err, "hvctl: cannot reach the head at 127.0.0.1:1: ");
    CHECK(r.ms < 10000);
    run_free(&r);

    /* Usage errors: exit 64, no call. */
    int before = got_drain.n;
    static const struct {
        const char *a, *b, *c;
        const char *msg;
    } bad[] = {
        {"drain", NULL, NULL, "hvctl: 'drain' needs a node name or id (see hvctl --help)\n"},
        {"undrain", "a/b", NULL, "hvctl: bad node 'a/b': expected a node name"},
        {"drain", "n1", "n1", "hvctl: node 'n1' is named twice (see hvctl --help)\n"},
        {"jobs", "--reason", "x",
         "hvctl: --reason goes with 'drain' or 'undrain', not 'jobs' (see hvctl --help)\n"},
        {"drain", "n1", "--reason", "hvctl: option '--reason' needs a value (see hvctl --help)\n"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *a8[] = {bad[i].a, bad[i].b, bad[i].c, NULL};
        run_tool(&r, "hvctl", a8);
        CHECK_STATUS(&r, 64);
        CHECK_HAS(r.err, bad[i].msg);
        run_free(&r);
    }
    CHECK_EQ(got_drain.n, before);
}

/* hvctl actor NAME shows the head's text with what could act on a terminal made visible: a
 * class with an escape sequence and a newline (it printed them raw, so a class could retitle
 * the terminal and forge a line). */
static void test_hvctl_actor_escaped(void) {
    run_t r;
    const char *a[] = {"actor", "ctr", NULL};
    run_tool(&r, "hvctl", a);
    CHECK_STATUS(&r, 0);
    CHECK_HAS(r.out, "  class      ctr\\x1b]0;pwned\\x07\\nstate      alive\n");
    CHECK_HAS(r.out, "  last event created: class \\x1b[2J\n");
    CHECK_LACKS(r.out, "\x1b");
    CHECK_LACKS(r.out, "\x07");
    run_free(&r);
}

/* ---- runner --------------------------------------------------------------------------------- */

static const hv_check_case_t tests[] = {
    {"submit_ok", test_submit_ok},
    {"upload_resume_and_limit", test_upload_resume_and_limit},
    {"upload_progress", test_upload_progress},
    {"submit_failed", test_submit_failed},
    {"watch_resume", test_watch_resume},
    {"sigint", test_sigint},
    {"refused_detach_unreachable", test_refused_detach_unreachable},
    {"head_words", test_head_words},
    {"hvctl", test_hvctl},
    {"submit_elastic", test_submit_elastic},
    {"hvctl_elastic", test_hvctl_elastic},
    {"hvctl_state_copy", test_hvctl_state_copy},
    {"hvctl_drain", test_hvctl_drain},
    {"words_changed", test_words_changed},
    {"hvctl_actor_escaped", test_hvctl_actor_escaped},
};

int main(int argc, char **argv) {
    const char *env = getenv("HV_BIN_DIR");
    if (env != NULL && env[0] != '\0') {
        snprintf(bindir, sizeof(bindir), "%s", env);
    } else {
        snprintf(bindir, sizeof(bindir), "%s", argv[0]);
        char *slash = strrchr(bindir, '/');
        if (slash != NULL) {
            *slash = '\0';
        } else {
            snprintf(bindir, sizeof(bindir), ".");
        }
    }
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof(tmpdir), "%s/hv-fakehead-XXXXXX", base && base[0] ? base : "/tmp");
    if (mkdtemp(tmpdir) == NULL) {
        fprintf(stderr, "mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0); // each case's line out before the tools it runs write
    views_init();
    server_up();
    int rc = hv_check_main(tests, sizeof(tests) / sizeof(tests[0]), argc, argv, NULL, NULL);
    server_down();
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) {
        fprintf(stderr, "warning: could not remove %s\n", tmpdir);
    }
    return rc;
}
