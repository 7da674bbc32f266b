/*
 * svc_actors: the Actors service (hvctl actor ..., libhv's hv_actor_lookup). Create checks the
 * spec (the program part as a job's, with hv_validate_submit on a one-worker job, then that its
 * artifacts were uploaded), builds the JobSpec its processes are spawned with (the class and
 * argument as HV_ACTOR_CLASS / HV_ACTOR_ARG) and hands it to actors_drv, which stores it before
 * placing it. Get resolves an id or a name (within a namespace) into a view, with the per-actor
 * secret when asked. Every call passed the gate (svc_auth: a client token or a worker secret);
 * here a worker is held to its job's namespace (hvsubmit --namespace, stored in the job's spec;
 * "default" when none), which is also what an empty namespace means in its calls, and owns what
 * it creates unless it asks for a detached actor; what it creates runs as its job's workers run
 * (head/core/workcap.h: the actor's label demand gets its node's hv.run_as). Loop thread only.
 */
#include "svc_actors.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "actors.h"
#include "hv.pb-c.h"
#include "log.h"
#include "mem.h"
#include "validate.h"
#include "views.h"
#include "workcap.h"

#define ACTORS_NS_DEFAULT "default"
#define ACTORS_MAX_ARG (64u << 10)
#define ACTORS_MAX_MEMORY_MB (UINT64_C(1) << 40)
#define ACTORS_LOG_LINES_DEFAULT 1000u
#define ACTORS_LOG_LINES_MAX 10000u
#define ACTORS_LOG_BYTES (1u << 20)                 /* of lines' text in one Logs reply */
#define ACTORS_LABELS_MAX (64 * (63 + 1 + 256 + 1)) /* "k=v,..." of 64 labels at their bounds */

struct hv_svc_actors_s {
    hv_auth_t *auth;     /* borrowed */
    hv_actors_t *actors; /* borrowed */
    hv_driver_t *d;      /* borrowed */
    /* The namespace of the call being answered when it names none: the worker's job's, or
     * "default" (set by caller(); loop thread only, one call at a time). */
    char home[64];
};

/* The namespace a call names, or the caller's home when it names none. */
static const char *ns_in(const hv_svc_actors_t *s, const char *ns) {
    return ns != NULL && ns[0] != '\0' ? ns : s->home;
}

/* The namespace of job_id's workers (its spec's, "default" when it names none) into out: 1, or
 * 0 when the head does not know the job or cannot read its spec (nothing is assumed then). */
static int job_ns(hv_svc_actors_t *s, uint64_t job_id, char *out, size_t len) {
    out[0] = '\0';
    const hv_djob_t *j = hv_driver_job(s->d, job_id);
    if (j == NULL || j->spec == NULL) {
        return 0;
    }
    Hvpb__V1__JobSpec *js = hvpb__v1__job_spec__unpack(NULL, j->spec_len, j->spec);
    if (js == NULL) {
        return 0;
    }
    snprintf(out, len, "%s",
             js->namespace_ != NULL && js->namespace_[0] != '\0' ? js->namespace_
                                                                 : ACTORS_NS_DEFAULT);
    hvpb__v1__job_spec__free_unpacked(js, NULL);
    return 1;
}

/* Who calls: HV_OK and cred, or an answer was sent. A worker may only use its job's
 * namespace. */
static int caller(hv_svc_actors_t *s, hv_rpc_call_t *c, const char *ns, hv_cred_t *cred) {
    snprintf(s->home, sizeof(s->home), "%s", ACTORS_NS_DEFAULT);
    if (hv_auth_identify(s->auth, hv_rpc_call_bearer(c), cred) != HV_OK) {
        hv_rpc_finish(c, HV_EAUTH, "not authenticated");
        return 0;
    }
    if (cred->kind == HV_CRED_WORKER && !job_ns(s, cred->job_id, s->home, sizeof(s->home))) {
        hv_rpc_finish(c, HV_EAUTH,
                      "the credential of job %" PRIu64 "'s workers is no longer valid: the head "
                      "no longer knows job %" PRIu64,
                      cred->job_id, cred->job_id);
        return 0;
    }
    if (cred->kind == HV_CRED_WORKER && ns != NULL && strcmp(ns_in(s, ns), s->home) != 0) {
        hv_rpc_finish(c, HV_EPERM,
                      "permission denied: the workers of job %" PRIu64
                      " may only use the actors of its namespace '%s', not '%.80s'",
                      cred->job_id, s->home, ns);
        return 0;
    }
    return 1;
}

static Hvpb__V1__ActorState state_code(hv_am_state_t st) {
    switch (st) {
    case HV_AM_PENDING:
        return HVPB__V1__ACTOR_STATE__ACTOR_STATE_PENDING;
    case HV_AM_STARTING:
        return HVPB__V1__ACTOR_STATE__ACTOR_STATE_STARTING;
    case HV_AM_ALIVE:
        return HVPB__V1__ACTOR_STATE__ACTOR_STATE_ALIVE;
    case HV_AM_RESTARTING:
        return HVPB__V1__ACTOR_STATE__ACTOR_STATE_RESTARTING;
    case HV_AM_MOVING:
        return HVPB__V1__ACTOR_STATE__ACTOR_STATE_MOVING;
    case HV_AM_DEAD:
        return HVPB__V1__ACTOR_STATE__ACTOR_STATE_DEAD;
    default:
        return HVPB__V1__ACTOR_STATE__ACTOR_STATE_UNSPECIFIED;
    }
}

static void view(hv_svc_actors_t *s, const hv_dactor_t *x, Hvpb__V1__ActorView *v) {
    hvpb__v1__actor_view__init(v);
    v->id = x->am.id;
    v->name = x->name;
    v->namespace_ = x->ns;
    v->class_name = x->class_name;
    v->state = (char *)hv_am_state_name(x->am.state);
    v->state_code = state_code(x->am.state);
    v->cause = (char *)hv_am_cause_name(x->am.cause);
    v->node = (char *)hv_actors_node_name(s->actors, x);
    v->address = x->am.state == HV_AM_ALIVE ? x->address : "";
    v->restarts = x->am.restarts;
    v->max_restarts = x->am.max_restarts;
    v->moves = x->am.moves;
    v->incarnation = x->am.incarnation;
    v->detached = x->am.owner_job == 0;
    v->owner_job = x->am.owner_job;
    v->created_ms = x->created_ms;
    v->started_ms = x->started_ms;
    v->ended_ms = x->ended_ms;
    v->slots = x->slots;
    v->gpus = x->gpus;
    v->max_call_retries = x->max_call_retries;
    v->last_status = x->am.last_status;
    v->last_signal = x->am.last_signal;
    v->reason = x->reason;
    v->labels = x->labels;
    v->memory_mb = x->memory_mb;
    v->waiting = hv_am_wants_place(&x->am);
    hv_callfig_t f;
    hv_actorfig_total(&x->fig, &f);
    v->calls_ok = f.ok;
    v->calls_error = f.error;
    v->bytes_in = f.bytes_in;
    v->bytes_out = f.bytes_out;
    v->service_p50_ms = hv_callfig_quantile_ms(&f, 0.5);
    v->service_p99_ms = hv_callfig_quantile_ms(&f, 0.99);
    v->figures_ms = x->fig_ms;
}

/* The actor a ref names, or an answer was sent (NULL). */
static const hv_dactor_t *resolve(hv_svc_actors_t *s, hv_rpc_call_t *c, const Hvpb__V1__ActorRef *r,
                                  const hv_cred_t *cred) {
    const hv_dactor_t *x = NULL;
    if (r == NULL || (r->id == 0 && (r->name == NULL || r->name[0] == '\0'))) {
        hv_rpc_finish(c, HV_EINVAL, "name an actor: its id, or its name (and namespace)");
        return NULL;
    }
    if (r->id != 0) {
        x = hv_actors_get(s->actors, r->id);
    } else if (!hv_am_name_ok(r->name) || !hv_am_name_ok(ns_in(s, r->namespace_))) {
        hv_rpc_finish(c, HV_EINVAL,
                      "'%.80s' in namespace '%.80s' is not an actor name: 1 to 63 letters, "
                      "digits, '.', '_' or '-'",
                      r->name, ns_in(s, r->namespace_));
        return NULL;
    } else {
        x = hv_actors_by_name(s->actors, ns_in(s, r->namespace_), r->name);
    }
    if (x != NULL && cred->kind == HV_CRED_WORKER && strcmp(x->ns, s->home) != 0) {
        x = NULL; /* not the worker's to see: said as not found */
    }
    if (x == NULL) {
        if (r->id != 0) {
            hv_rpc_finish(c, HV_ENOTFOUND, "no actor %" PRIu64, r->id);
        } else {
            hv_rpc_finish(c, HV_ENOTFOUND, "no actor named '%s' in namespace '%s'", r->name,
                          ns_in(s, r->namespace_));
        }
    }
    return x;
}

/* The actor a call names by ref, its caller checked (caller, then resolve); NULL: answered. */
static const hv_dactor_t *named(hv_svc_actors_t *s, hv_rpc_call_t *c, const Hvpb__V1__ActorRef *ref,
                                hv_cred_t *cred) {
    if (!caller(s, c, ref != NULL && ref->id == 0 ? ref->namespace_ : NULL, cred)) {
        return NULL;
    }
    return resolve(s, c, ref, cred);
}

/* ---- Create ------------------------------------------------------------------------------------ */

/* The label demand of an actor that a job's worker creates (workcap.h): want with its job's
 * run-as user added, so that it runs only where and as that job's workers run; or NULL and a
 * refusal answered (out of memory included). */
static char *worker_labels(hv_svc_actors_t *s, hv_rpc_call_t *c, const hv_cred_t *cred,
                           const char *want) {
    const hv_dnode_t *from = NULL;
    const hv_djob_t *j = hv_driver_job(s->d, cred->job_id);
    for (size_t i = 0; j != NULL && i < j->jm.nw; i++) {
        if (j->jm.w[i]->id == cred->worker_id) {
            from = hv_driver_node(s->d, j->jm.w[i]->node_id);
        }
    }
    size_t n = 0, cap = 0;
    for (const hv_dnode_t *nd = hv_driver_nodes(s->d); nd != NULL; nd = nd->next) {
        cap++;
    }
    const char **live = hv_calloc(cap > 0 ? cap : 1, sizeof(*live));
    char *out = hv_malloc(ACTORS_LABELS_MAX);
    if (live == NULL || out == NULL) {
        hv_free(live);
        hv_free(out);
        hv_rpc_finish(c, HV_ENOMEM, "out of memory");
        return NULL;
    }
    for (const hv_dnode_t *nd = hv_driver_nodes(s->d); nd != NULL; nd = nd->next) {
        if (nd->state != HV_NODE_DEAD && !hv_driver_node_hidden(nd)) {
            live[n++] = nd->labels;
        }
    }
    char why[700];
    hv_err rc = hv_wcap_actor_labels(cred->job_id, from != NULL ? from->labels : "", want, live, n,
                                     out, ACTORS_LABELS_MAX, why, sizeof(why));
    hv_free(live);
    if (rc != HV_OK) {
        hv_free(out);
        hv_rpc_finish(c, rc, "%s", why);
        return NULL;
    }
    return out;
}

/* 1 when a class name (UTF-8 text: the gate checked) has no control character: C0, DEL or C1
 * (U+0080..U+009F, the bytes C2 80..C2 9F), which would act on a terminal that shows it. */
static int class_text(const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        if (*p < 0x20 || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)) {
            return 0;
        }
    }
    return 1;
}

/* Checks the spec; HV_OK or the error with its words. */
static hv_err create_check(hv_svc_actors_t *s, const Hvpb__V1__ActorSpec *sp, char *err,
                           size_t len) {
    if (sp == NULL) {
        snprintf(err, len, "spec: missing");
        return HV_EINVAL;
    }
    if (sp->name[0] != '\0' && !hv_am_name_ok(sp->name)) {
        snprintf(err, len,
                 "name '%.80s': not an actor name (1 to 63 letters, digits, '.', '_' or '-')",
                 sp->name);
        return HV_EINVAL;
    }
    if (!hv_am_name_ok(ns_in(s, sp->namespace_))) {
        snprintf(err, len, "namespace '%.80s': not a namespace name", sp->namespace_);
        return HV_EINVAL;
    }
    if (sp->class_name[0] == '\0') {
        snprintf(err, len, "class: missing (the actor class the program registered)");
        return HV_EINVAL;
    }
    if (strlen(sp->class_name) > 255 || strchr(sp->class_name, '=') != NULL ||
        !class_text(sp->class_name)) {
        snprintf(err, len, "class: at most 255 bytes, no '=' and no control character");
        return HV_EINVAL;
    }
    if (strlen(sp->arg) > ACTORS_MAX_ARG) {
        snprintf(err, len, "arg: %zu bytes, at most %u", strlen(sp->arg), ACTORS_MAX_ARG);
        return HV_EINVAL;
    }
    if (sp->slots > 64 || sp->gpus > 64 ||
        (sp->gpus > 0 && sp->gpus > (sp->slots ? sp->slots : 1))) {
        snprintf(err, len, "slots %u, gpus %u: at most 64 slots, and at most one GPU per slot",
                 sp->slots, sp->gpus);
        return HV_EINVAL;
    }
    if (sp->n_labels > 64 || sp->memory_mb > ACTORS_MAX_MEMORY_MB) {
        snprintf(err, len, "labels: at most 64; memory: at most %llu MiB",
                 (unsigned long long)ACTORS_MAX_MEMORY_MB);
        return HV_EINVAL;
    }
    for (size_t i = 0; i < sp->n_labels; i++) {
        const char *k = sp->labels[i]->key, *v = sp->labels[i]->value;
        if (k[0] == '\0' || strlen(k) > 63 || strpbrk(k, ",=") != NULL || strlen(v) > 256 ||
            strpbrk(v, ",=") != NULL) {
            snprintf(err, len,
                     "label '%.80s=%.80s': keys 1 to 63 bytes, values at most 256, neither with "
                     "',' or '='",
                     k, v);
            return HV_EINVAL;
        }
    }
    if (sp->max_restarts > 1000000 || sp->max_call_retries > 1000) {
        snprintf(err, len, "max_restarts at most 1000000, max_call_retries at most 1000");
        return HV_EINVAL;
    }
    if (sp->binary != NULL && !hv_view_artifact_present(s->d, sp->binary->digest)) {
        snprintf(err, len, "binary %s (%s) has not been uploaded", sp->binary->name,
                 sp->binary->digest);
        return HV_ESTATE;
    }
    for (size_t i = 0; i < sp->n_files; i++) {
        if (!hv_view_artifact_present(s->d, sp->files[i]->digest)) {
            snprintf(err, len, "file %s (%s) has not been uploaded", sp->files[i]->name,
                     sp->files[i]->digest);
            return HV_ESTATE;
        }
    }
    return HV_OK;
}

static void actors_create(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_actors_t *s = ud;
    const Hvpb__V1__CreateActorRequest *req = (const Hvpb__V1__CreateActorRequest *)m;
    const Hvpb__V1__ActorSpec *sp = req->spec;
    hv_cred_t cred;
    if (!caller(s, c, sp != NULL ? sp->namespace_ : NULL, &cred)) {
        return;
    }
    char err[600];
    hv_err rc = create_check(s, sp, err, sizeof(err));
    if (rc != HV_OK) {
        hv_rpc_finish(c, rc, "%s", err);
        return;
    }
    uint64_t owner = 0;
    if (!sp->detached) {
        owner = cred.kind == HV_CRED_WORKER ? cred.job_id : sp->owner_job;
        if (owner == 0 || !hv_driver_job_active(s->d, owner)) {
            hv_rpc_finish(c, HV_EINVAL,
                          owner == 0 ? "an actor is detached or owned by a job: ask for a detached "
                                       "one, or name its owner job"
                                     : "owner job %" PRIu64 " is not running",
                          owner);
            return;
        }
    }
    /* The JobSpec of its processes: the program, its files, the environment with the class. */
    Hvpb__V1__KeyValue kv_class = HVPB__V1__KEY_VALUE__INIT, kv_arg = HVPB__V1__KEY_VALUE__INIT;
    kv_class.key = "HV_ACTOR_CLASS";
    kv_class.value = sp->class_name;
    kv_arg.key = "HV_ACTOR_ARG";
    kv_arg.value = sp->arg;
    size_t nenv = sp->n_env + 2;
    Hvpb__V1__KeyValue **env = hv_calloc(nenv, sizeof(*env));
    if (env == NULL) {
        hv_rpc_finish(c, HV_ENOMEM, "out of memory");
        return;
    }
    if (sp->n_env > 0) {
        memcpy(env, sp->env, sp->n_env * sizeof(*env));
    }
    env[sp->n_env] = &kv_class;
    env[sp->n_env + 1] = &kv_arg;
    Hvpb__V1__JobSpec js = HVPB__V1__JOB_SPEC__INIT;
    js.name = sp->name[0] != '\0' ? sp->name : "actor";
    js.binary = sp->binary;
    js.command = sp->command;
    js.n_args = sp->n_args;
    js.args = sp->args;
    js.n_env = nenv;
    js.env = env;
    js.n_files = sp->n_files;
    js.files = sp->files;
    js.np = 1;
    Hvpb__V1__SubmitRequest sub = HVPB__V1__SUBMIT_REQUEST__INIT;
    sub.spec = &js;
    if ((rc = hv_validate_submit(&sub, err, sizeof(err))) != HV_OK) {
        hv_free(env);
        hv_rpc_finish(c, rc, "%s", err);
        return;
    }
    size_t len = hvpb__v1__job_spec__get_packed_size(&js);
    uint8_t *packed = hv_malloc(len > 0 ? len : 1);
    if (packed == NULL) {
        hv_free(env);
        hv_rpc_finish(c, HV_ENOMEM, "out of memory");
        return;
    }
    hvpb__v1__job_spec__pack(&js, packed);
    hv_free(env);
    char *labels = hv_validate_join_labels(sp->labels, sp->n_labels);
    if (labels == NULL) {
        hv_free(packed);
        hv_rpc_finish(c, HV_ENOMEM, "out of memory");
        return;
    }
    if (cred.kind == HV_CRED_WORKER) {
        char *held = worker_labels(s, c, &cred, labels); /* its job's user only */
        hv_free(labels);
        if ((labels = held) == NULL) {
            hv_free(packed);
            return;
        }
    }
    hv_actor_new_t nw = {.name = sp->name,
                         .ns = ns_in(s, sp->namespace_),
                         .class_name = sp->class_name,
                         .spec = packed,
                         .spec_len = len,
                         .slots = sp->slots,
                         .gpus = sp->gpus,
                         .max_restarts = sp->max_restarts,
                         .max_call_retries = sp->max_call_retries,
                         .labels = labels,
                         .memory_mb = sp->memory_mb,
                         .owner_job = owner};
    const hv_dactor_t *x = NULL;
    rc = hv_actors_new(s->actors, &nw, &x, err, sizeof(err));
    hv_free(packed);
    hv_free(labels);
    if (rc == HV_EUNAVAIL) {
        hv_rpc_finish_later(c, rc, "%s", err);
        return;
    }
    if (rc != HV_OK) {
        hv_rpc_finish(c, rc, "%s", err);
        return;
    }
    Hvpb__V1__ActorView v;
    view(s, x, &v);
    hv_rpc_reply(c, &v.base);
}

/* ---- Get, List, Kill ---------------------------------------------------------------------------- */

static void actors_get(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_actors_t *s = ud;
    const Hvpb__V1__GetActorRequest *req = (const Hvpb__V1__GetActorRequest *)m;
    hv_cred_t cred;
    const hv_dactor_t *x = named(s, c, req->ref, &cred);
    if (x == NULL) {
        return;
    }
    Hvpb__V1__ActorView v;
    view(s, x, &v);
    char secret[HV_CREDS_MAX] = "";
    if (req->with_secret) {
        hv_creds_actor(&s->auth->creds, x->am.id, secret);
        v.secret = secret;
    }
    hv_rpc_reply(c, &v.base);
    memset(secret, 0, sizeof(secret));
}

static void actors_list(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_actors_t *s = ud;
    const Hvpb__V1__ListActorsRequest *req = (const Hvpb__V1__ListActorsRequest *)m;
    hv_cred_t cred;
    const char *want =
        req->namespace_ != NULL && req->namespace_[0] != '\0' ? req->namespace_ : NULL;
    if (!caller(s, c, want, &cred)) {
        return;
    }
    if (cred.kind == HV_CRED_WORKER) {
        want = s->home;
    }
    size_t n = 0;
    for (const hv_dactor_t *x = hv_actors_all(s->actors); x != NULL; x = x->next) {
        n++;
    }
    Hvpb__V1__ActorView *vs = hv_calloc(n > 0 ? n : 1, sizeof(*vs));
    Hvpb__V1__ActorView **ps = hv_calloc(n > 0 ? n : 1, sizeof(*ps));
    if (vs == NULL || ps == NULL) {
        hv_free(vs);
        hv_free(ps);
        hv_rpc_finish(c, HV_ENOMEM, "out of memory");
        return;
    }
    size_t k = 0;
    for (const hv_dactor_t *x = hv_actors_all(s->actors); x != NULL; x = x->next) {
        if (want == NULL || strcmp(x->ns, want) == 0) {
            view(s, x, &vs[k]);
            ps[k] = &vs[k];
            k++;
        }
    }
    Hvpb__V1__ListActorsReply rep = HVPB__V1__LIST_ACTORS_REPLY__INIT;
    rep.n_actors = k;
    rep.actors = ps;
    hv_rpc_reply(c, &rep.base);
    hv_free(vs);
    hv_free(ps);
}

static void actors_kill(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_actors_t *s = ud;
    const Hvpb__V1__KillActorRequest *req = (const Hvpb__V1__KillActorRequest *)m;
    hv_cred_t cred;
    const hv_dactor_t *x = named(s, c, req->ref, &cred);
    if (x == NULL) {
        return;
    }
    char err[300];
    hv_err rc = hv_actors_kill(s->actors, x->am.id, req->restart, err, sizeof(err));
    if (rc == HV_EUNAVAIL) {
        hv_rpc_finish_later(c, rc, "%s", err);
        return;
    }
    if (rc != HV_OK) {
        hv_rpc_finish(c, rc, "%s", err);
        return;
    }
    Hvpb__V1__ActorView v;
    view(s, x, &v);
    hv_rpc_reply(c, &v.base);
}

/* ---- Logs -------------------------------------------------------------------------------------- */

/* A page of an actor's output log (its processes' stdout and stderr, as the head keeps them). */
static void actors_logs(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_actors_t *s = ud;
    const Hvpb__V1__ActorLogsRequest *req = (const Hvpb__V1__ActorLogsRequest *)m;
    hv_cred_t cred;
    const hv_dactor_t *x = named(s, c, req->ref, &cred);
    if (x == NULL) {
        return;
    }
    if (req->limit > ACTORS_LOG_LINES_MAX) {
        hv_rpc_finish(c, HV_EINVAL, "limit: %u lines, at most %u", req->limit,
                      ACTORS_LOG_LINES_MAX);
        return;
    }
    hv_joblog_page_t pg;
    hv_err rc = hv_actors_log_read(s->actors, x, req->offset,
                                   req->limit > 0 ? req->limit : ACTORS_LOG_LINES_DEFAULT,
                                   ACTORS_LOG_BYTES, &pg);
    Hvpb__V1__LogLine *ls = hv_calloc(pg.n + 1, sizeof(*ls));
    Hvpb__V1__LogLine **lp = hv_calloc(pg.n + 1, sizeof(*lp));
    if (rc != HV_OK || ls == NULL || lp == NULL) {
        hv_rpc_finish(c, rc != HV_OK ? rc : HV_ENOMEM,
                      "cannot read the log of actor %" PRIu64 ": %s", x->am.id,
                      hv_strerror(rc != HV_OK ? rc : HV_ENOMEM));
    } else {
        for (size_t i = 0; i < pg.n; i++) {
            hvpb__v1__log_line__init(&ls[i]);
            ls[i].rank = pg.lines[i].rank;
            ls[i].stream = pg.lines[i].stream;
            ls[i].text = pg.lines[i].text;
            lp[i] = &ls[i];
        }
        Hvpb__V1__ActorLogsReply rep = HVPB__V1__ACTOR_LOGS_REPLY__INIT;
        rep.lines = lp;
        rep.n_lines = pg.n;
        rep.next_offset = pg.next_offset;
        rep.more = pg.more;
        hv_rpc_reply(c, &rep.base);
    }
    hv_free(lp);
    hv_free(ls);
    hv_actors_log_page_free(&pg);
}

hv_err hv_svc_actors_create(hv_rpc_server_t *srv, hv_auth_t *auth, hv_driver_t *d,
                            hv_actors_t *actors, hv_svc_actors_t **out) {
    hv_svc_actors_t *s = hv_calloc(1, sizeof(*s));
    if (s == NULL) {
        return HV_ENOMEM;
    }
    s->auth = auth;
    s->actors = actors;
    s->d = d;
    hv_rpc_method_t ms[] = {
        {"/hvpb.v1.Actors/Create", HV_RPC_UNARY, &hvpb__v1__create_actor_request__descriptor,
         actors_create, NULL, s},
        {"/hvpb.v1.Actors/Get", HV_RPC_UNARY, &hvpb__v1__get_actor_request__descriptor, actors_get,
         NULL, s},
        {"/hvpb.v1.Actors/List", HV_RPC_UNARY, &hvpb__v1__list_actors_request__descriptor,
         actors_list, NULL, s},
        {"/hvpb.v1.Actors/Kill", HV_RPC_UNARY, &hvpb__v1__kill_actor_request__descriptor,
         actors_kill, NULL, s},
        {"/hvpb.v1.Actors/Logs", HV_RPC_UNARY, &hvpb__v1__actor_logs_request__descriptor,
         actors_logs, NULL, s},
    };
    hv_err rc = hv_rpc_server_add_n(srv, ms, sizeof(ms) / sizeof(ms[0]));
    if (rc != HV_OK) {
        hv_free(s);
        return rc;
    }
    *out = s;
    return HV_OK;
}

void hv_svc_actors_destroy(hv_svc_actors_t *s) { hv_free(s); }
