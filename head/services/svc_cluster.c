/* svc_cluster: see svc_cluster.h. */
#include "svc_cluster.h"

#include "views.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hv.pb-c.h"
#include "actors.h"
#include "hmap.h"
#include "log.h"
#include "mem.h"
#include "sha256.h"
#include "util.h"
#include "validate.h"

#define FETCH_CHUNK (1u << 20)
#define FETCH_WINDOW 4

/* One agent's Session stream; the call's data. */
typedef struct sess_s {
    hv_svc_cluster_t *svc;
    hv_rpc_call_t *call;
    uint64_t node_id;         /* 0 until the hello */
    uint64_t max_seq_applied; /* highest AgentMsg.seq applied on this stream */
    uint64_t refused_window;  /* monotonic ms: start of the current refusal-log window */
    uint32_t refused_logged;  /* HV-SESSION-SCOPE records in that window */
    uint32_t refused_quiet;   /* refusals not logged since the last record (the rate limit) */
    uint64_t utf8_fixed;      /* bytes of its reports that were not UTF-8 (repaired to '?') */
    struct sess_s *next, *prev;
} sess_t;

struct hv_svc_cluster_s {
    const hv_head_config_t *cfg;
    hv_driver_t *d;
    char advertise[300];
    sess_t *sessions;  /* streams with a hello (node attached; one per node) */
    hv_hmap_t by_node; /* the sessions by node id (while by_node_ok; else walk the list) */
    int by_node_ok;
    const hv_auth_t *auth; /* node credentials and worker secrets */
    hv_svc_admit_fn admit; /* autoscaler instances' enrollment (NULL: none) */
    void *admit_ud;
};

/* The largest saved state the head keeps: actor_state_max, and never over max_upload. */
static uint64_t state_max(const hv_svc_cluster_t *s) {
    uint64_t m = s->cfg->actor_state_max;
    return s->cfg->max_upload_bytes < m ? s->cfg->max_upload_bytes : m;
}

/* Constant-time comparison, so the token cannot be guessed byte by byte from timings. */
static sess_t *sess_of(hv_svc_cluster_t *s, uint64_t node_id) {
    if (s->by_node_ok) {
        return hv_hmap_get_u64(&s->by_node, node_id);
    }
    for (sess_t *x = s->sessions; x != NULL; x = x->next) {
        if (x->node_id == node_id) {
            return x;
        }
    }
    return NULL;
}

static void sess_unlink(hv_svc_cluster_t *s, sess_t *x) {
    if (x->prev != NULL) {
        x->prev->next = x->next;
    } else if (s->sessions == x) {
        s->sessions = x->next;
    }
    if (x->next != NULL) {
        x->next->prev = x->prev;
    }
    x->next = x->prev = NULL;
    if (hv_hmap_get_u64(&s->by_node, x->node_id) == x) {
        hv_hmap_del_u64(&s->by_node, x->node_id);
    }
}

static void sess_link(hv_svc_cluster_t *s, sess_t *x) {
    x->prev = NULL;
    x->next = s->sessions;
    if (s->sessions != NULL) {
        s->sessions->prev = x;
    }
    s->sessions = x;
    if (s->by_node_ok && hv_hmap_put_u64(&s->by_node, x->node_id, x) != HV_OK) {
        s->by_node_ok = 0; /* out of memory: sess_of walks the list from now on */
    }
}

static hv_err send_msg(sess_t *x, const Hvpb__V1__HeadMsg *m) {
    return hv_rpc_send(x->call, &m->base);
}

hv_err hv_svc_cluster_order(hv_svc_cluster_t *s, uint64_t node_id, const hv_order_t *o) {
    sess_t *x = sess_of(s, node_id);
    if (x == NULL) {
        return HV_ECLOSED;
    }
    Hvpb__V1__HeadMsg msg = HVPB__V1__HEAD_MSG__INIT;
    switch (o->kind) {
    case HV_ORDER_SPAWN: {
        Hvpb__V1__JobSpec *spec = hvpb__v1__job_spec__unpack(NULL, o->spec_len, o->spec);
        if (spec == NULL) {
            HV_LOG(HV_LOG_ERROR, "cluster", "HV-JOB-SPEC", "job %llu: stored spec is unreadable",
                   (unsigned long long)o->job_id);
            return HV_ECORRUPT;
        }
        Hvpb__V1__SpawnWorker sp = HVPB__V1__SPAWN_WORKER__INIT;
        sp.worker_id = o->worker_id;
        sp.job_id = o->job_id;
        sp.rank = o->rank;
        sp.size = o->size;
        sp.local_rank = o->local_rank;
        sp.local_size = o->local_size;
        sp.binary = spec->binary;
        sp.command = spec->command;
        sp.n_args = spec->n_args;
        sp.args = spec->args;
        sp.n_env = spec->n_env;
        sp.env = spec->env;
        sp.n_files = spec->n_files;
        sp.files = spec->files;
        /* A saved state to load: shipped as one more file, fetched and digest-checked by the
         * agent like the others, given to the process as HV_ACTOR_STATE_IN. */
        Hvpb__V1__FileRef state_ref = HVPB__V1__FILE_REF__INIT;
        Hvpb__V1__FileRef **files = NULL;
        if (o->state_digest != NULL && o->state_digest[0] != '\0') {
            files = hv_calloc(spec->n_files + 1, sizeof(*files));
            if (files == NULL) {
                hvpb__v1__job_spec__free_unpacked(spec, NULL);
                return HV_ENOMEM;
            }
            for (size_t i = 0; i < spec->n_files; i++) {
                files[i] = spec->files[i];
            }
            state_ref.name = (char *)HV_AM_STATE_FILE;
            state_ref.digest = (char *)o->state_digest;
            state_ref.size = o->state_size;
            state_ref.mode = 0600;
            files[spec->n_files] = &state_ref;
            sp.n_files = spec->n_files + 1;
            sp.files = files;
        }
        uint32_t gpu = (uint32_t)o->gpu;
        if (o->gpu >= 0) {
            sp.n_gpus = 1;
            sp.gpus = &gpu;
        }
        sp.head_addr = s->advertise;
        sp.generation = o->generation;
        char secret[HV_CREDS_MAX] = "";
        if (s->auth != NULL && o->actor_id != 0) {
            /* An actor's process: its own secret (HV_ACTOR_SECRET), and no Rendezvous one. */
            hv_creds_actor(&s->auth->creds, o->actor_id, secret);
            sp.actor_secret = secret;
            sp.actor_state_max = state_max(s);
        } else if (s->auth != NULL) {
            hv_creds_worker(&s->auth->creds, o->job_id, o->worker_id, secret);
            sp.worker_secret = secret;
        }
        msg.body_case = HVPB__V1__HEAD_MSG__BODY_SPAWN;
        msg.spawn = &sp;
        hv_err rc = send_msg(x, &msg);
        hv_free(files);
        hvpb__v1__job_spec__free_unpacked(spec, NULL);
        memset(secret, 0, sizeof(secret));
        return rc;
    }
    case HV_ORDER_KILL: {
        Hvpb__V1__KillWorker k = HVPB__V1__KILL_WORKER__INIT;
        k.worker_id = o->worker_id;
        k.grace_ms = o->grace_ms;
        k.reason = (char *)(o->reason ? o->reason : "");
        msg.body_case = HVPB__V1__HEAD_MSG__BODY_KILL;
        msg.kill = &k;
        return send_msg(x, &msg);
    }
    case HV_ORDER_COPY_RELEASE: {
        Hvpb__V1__CopyRelease r = HVPB__V1__COPY_RELEASE__INIT;
        r.job_id = o->job_id;
        r.generation = o->generation;
        r.commit = o->commit;
        r.drop_all = o->drop_all;
        msg.body_case = HVPB__V1__HEAD_MSG__BODY_COPY_RELEASE;
        msg.copy_release = &r;
        return send_msg(x, &msg);
    }
    case HV_ORDER_DRAIN:
    case HV_ORDER_UNDRAIN: {
        Hvpb__V1__DrainOrder dr = HVPB__V1__DRAIN_ORDER__INIT;
        dr.reason = (char *)(o->reason ? o->reason : "");
        dr.undrain = o->kind == HV_ORDER_UNDRAIN;
        msg.body_case = HVPB__V1__HEAD_MSG__BODY_DRAIN;
        msg.drain = &dr;
        return send_msg(x, &msg);
    }
    }
    return HV_EINVAL;
}

void hv_svc_cluster_drop(hv_svc_cluster_t *s, uint64_t node_id) {
    sess_t *x = sess_of(s, node_id);
    if (x == NULL) {
        return;
    }
    sess_unlink(s, x);
    hv_rpc_call_set_data(x->call, NULL);
    hv_rpc_call_cancel(x->call);
    hv_free(x);
}

/* ---- an actor's saved state -------------------------------------------------------------------- */

#define CLUSTER_ACTOR_STATE_INLINE (1u << 20) /* a state sent with the exit: at most this */

/* A saved state not kept: logged, and the driver hears why (the actor's events say it). */
static void actor_state_lost(hv_svc_cluster_t *s, uint64_t node_id, uint64_t worker, uint64_t size,
                             const char *why) {
    HV_LOG(HV_LOG_WARN, "cluster", "HV-ACTOR-STATE",
           "actor process %llu: its saved state (%llu bytes) is not kept: %s",
           (unsigned long long)worker, (unsigned long long)size, why);
    hv_driver_actor_state_saved(s->d, node_id, worker, NULL, size, why);
}

/* A large state the agent uploaded (Cluster/UploadState) before the exit that names it: kept
 * when the artifact is there, complete, of that size and within the limit. */
static void actor_state_ref(hv_svc_cluster_t *s, uint64_t node_id,
                            const Hvpb__V1__WorkerExited *ex) {
    char why[200];
    uint64_t size = ex->actor_state_size;
    uint64_t have = 0;
    if (size > state_max(s)) {
        snprintf(why, sizeof(why),
                 "its saved state of %llu bytes is over the head's actor_state_max of %llu bytes",
                 (unsigned long long)size, (unsigned long long)state_max(s));
    } else if (hv_view_artifact_size(s->d, ex->actor_state_digest, &have) != HV_OK ||
               have != size) {
        snprintf(why, sizeof(why),
                 "its saved state of %llu bytes did not reach the head whole (artifact %.12s)",
                 (unsigned long long)size, ex->actor_state_digest);
    } else {
        hv_driver_actor_state_saved(s->d, node_id, ex->worker_id, ex->actor_state_digest, size,
                                    NULL);
        return;
    }
    actor_state_lost(s, node_id, ex->worker_id, size, why);
}

/* An actor's process saved its state on its way out: it is stored as an artifact (by its
 * sha256, checked again when the agent of the replacement fetches it) before the driver hears of
 * the exit. Up to 1 MiB it comes with the exit; a larger one was uploaded first and is named by
 * its digest; one the agent could not send comes with why. A state that cannot be kept is said
 * in the actor's events (the replacement then starts from its constructor), never dropped
 * silently. */
static void actor_state_store(hv_svc_cluster_t *s, uint64_t node_id,
                              const Hvpb__V1__WorkerExited *ex) {
    if (!hv_am_proc_is(ex->worker_id) || !hv_view_artifacts_kept(s->d)) {
        return;
    }
    if (ex->actor_state_error != NULL && ex->actor_state_error[0] != '\0') {
        actor_state_lost(s, node_id, ex->worker_id, ex->actor_state_size, ex->actor_state_error);
        return;
    }
    if (ex->actor_state_digest != NULL && ex->actor_state_digest[0] != '\0') {
        actor_state_ref(s, node_id, ex);
        return;
    }
    size_t len = ex->actor_state.len;
    if (len > CLUSTER_ACTOR_STATE_INLINE || len > state_max(s)) {
        char why[200];
        snprintf(why, sizeof(why),
                 "its saved state of %zu bytes came with its exit, over the %llu-byte limit", len,
                 (unsigned long long)(state_max(s) < CLUSTER_ACTOR_STATE_INLINE
                                          ? state_max(s)
                                          : CLUSTER_ACTOR_STATE_INLINE));
        actor_state_lost(s, node_id, ex->worker_id, len, why);
        return;
    }
    char digest[65], err[256] = "";
    hv_sha256_hex_of(ex->actor_state.data, len, digest);
    hv_err rc = HV_OK;
    if (!hv_view_artifact_present(s->d, digest)) {
        uint64_t got = 0;
        int complete = 0;
        rc = hv_driver_artifact_write(s->d, digest, len, 0, ex->actor_state.data, len, 1, &got,
                                      &complete, err, sizeof(err));
        if (rc == HV_OK && !complete) {
            rc = HV_EIO;
            snprintf(err, sizeof(err), "the artifact is not complete after its only chunk");
        }
    }
    if (rc != HV_OK) {
        char why[200];
        snprintf(why, sizeof(why), "the head could not store its saved state: %.150s", err);
        actor_state_lost(s, node_id, ex->worker_id, len, why);
        return;
    }
    hv_driver_actor_state_saved(s->d, node_id, ex->worker_id, digest, len, NULL);
}

static int any_spec(const uint8_t *spec, size_t len, void *ud) {
    (void)spec;
    (void)len;
    (void)ud;
    return 1;
}

/* Cluster/UploadState: a chunk of an actor's saved state over 1 MiB, from the agent of the node
 * its process runs on (node scope: a node with no actor gets nothing), into the artifact store,
 * bounded by actor_state_max. */
static void cluster_upload_state(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_cluster_t *s = ud;
    const Hvpb__V1__UploadChunk *req = (const Hvpb__V1__UploadChunk *)m;
    char err[512];
    if (hv_validate_upload(req, err, sizeof(err)) != HV_OK) {
        hv_rpc_finish(c, HV_EINVAL, "%s", err);
        return;
    }
    hv_cred_t cred = {.kind = HV_CRED_NONE};
    if (s->auth != NULL && (hv_auth_identify(s->auth, hv_rpc_call_bearer(c), &cred) != HV_OK ||
                            cred.kind != HV_CRED_NODE ||
                            !hv_driver_node_actor_specs_any(s->d, cred.node_id, any_spec, NULL))) {
        hv_rpc_finish(c, HV_EPERM, "permission denied: no actor runs on this node");
        return;
    }
    if (req->total_size > state_max(s)) {
        hv_rpc_finish(c, HV_ETOOBIG,
                      "a saved state of %llu bytes is over the head's actor_state_max of %llu "
                      "bytes",
                      (unsigned long long)req->total_size, (unsigned long long)state_max(s));
        return;
    }
    Hvpb__V1__UploadReply rep = HVPB__V1__UPLOAD_REPLY__INIT;
    int complete = 0;
    hv_err rc = hv_driver_artifact_write(s->d, req->digest, req->total_size, req->offset,
                                         req->data.data, req->data.len, req->last, &rep.received,
                                         &complete, err, sizeof(err));
    if (rc != HV_OK) {
        hv_rpc_finish(c, rc, "%s", err);
        return;
    }
    rep.complete = complete;
    hv_rpc_reply(c, &rep.base);
}

/* ---- Join ----------------------------------------------------------------------------------- */

static char *join_strings(char **v, size_t n) {
    size_t len = 1;
    for (size_t i = 0; i < n; i++) {
        len += strlen(v[i]) + 1;
    }
    char *out = hv_malloc(len);
    if (out == NULL) {
        return NULL;
    }
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (i > 0) {
            strcat(out, ",");
        }
        strcat(out, v[i]);
    }
    return out;
}

/* Says why a Join is refused (its admission, hv_admit_t), in the log and to the caller. */
static void join_refused(hv_rpc_call_t *c, const hv_svc_cluster_t *s, const hv_admit_t *a,
                         const char *name, uint64_t instance) {
    const char *peer = hv_rpc_call_peer(c);
    switch (a->refusal) {
    case HV_ADMIT_NOT_INSTANCE:
        HV_LOG(HV_LOG_WARN, "cluster", "HV-JOIN-TOKEN",
               "refused a join of %s from %s: instance %llu's credential does not admit it "
               "(the instance ended, or it is not this node's)",
               name, peer, (unsigned long long)instance);
        hv_rpc_finish(c, HV_EPERM,
                      "permission denied: this instance credential does not admit node %s", name);
        return;
    case HV_ADMIT_NOT_THIS_NODE:
        HV_LOG(HV_LOG_WARN, "cluster", "HV-JOIN-TOKEN",
               "refused a join of %s from %s: the node credential is not this node's", name, peer);
        hv_rpc_finish(c, HV_EPERM, "permission denied: the node credential is not %s's", name);
        return;
    case HV_ADMIT_JTOKEN_BAD: {
        /* Whether it is revoked, expired or used up is said only to a caller that has its
         * secret (core/admit.h). */
        const char *why = a->verdict == HV_JTOKEN_WRONG ? "not valid on this head"
                                                        : hv_creds_jtoken_verdict_name(a->verdict);
        HV_LOG(HV_LOG_WARN, "cluster", "HV-JOIN-TOKEN",
               "refused a join from %s: join token %s is %s", peer, a->jtoken, why);
        hv_rpc_finish(c, HV_EAUTH, "not authenticated: join token %s is %s (hvctl token list)",
                      a->jtoken, why);
        return;
    }
    default:
        HV_LOG(HV_LOG_WARN, "cluster", "HV-JOIN-TOKEN",
               "refused a join from %s: wrong join token and no valid node credential", peer);
        hv_rpc_finish(c, HV_EAUTH,
                      "not authenticated: wrong join token for cluster '%s' (and no valid node "
                      "credential)",
                      s->cfg->cluster_name);
        return;
    }
}

static void cluster_join(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_cluster_t *s = ud;
    const Hvpb__V1__JoinRequest *req = (const Hvpb__V1__JoinRequest *)m;
    const char *name = req->node != NULL ? req->node->name : NULL;
    /* What only the services know goes to the admission (core/admit.h): whether the bearer is
     * a node credential of this incarnation (an agent re-joining; the access table holds the
     * revocations), and whether an instance's enrollment credential names a live instance of
     * this node's name. */
    hv_cred_t cred = {.kind = HV_CRED_NONE};
    int renewal = s->auth != NULL &&
                  hv_auth_identify(s->auth, hv_rpc_call_bearer(c), &cred) == HV_OK &&
                  cred.kind == HV_CRED_NODE && cred.incarnation == req->incarnation;
    uint64_t instance = 0;
    int inst = s->auth != NULL && s->admit != NULL && name != NULL &&
               hv_creds_instance_id(&s->auth->creds, req->token, &instance);
    hv_admit_ask_t ask = {.token = req->token,
                          .static_token = s->cfg->token,
                          .now_ms = hv_wall_ms(),
                          .renewal = renewal,
                          .cred_node = cred.node_id,
                          .instance = inst,
                          .instance_admits = inst && s->admit(s->admit_ud, instance, name)};
    hv_admit_t adm;
    hv_driver_admit(s->d, &ask, &adm);
    if (adm.by == HV_ADMIT_REFUSED) {
        join_refused(c, s, &adm, name, instance);
        return;
    }
    const Hvpb__V1__NodeInfo *info = req->node;
    char verr[400];
    if (hv_validate_join(req, verr, sizeof(verr)) != HV_OK) {
        hv_rpc_finish(c, HV_EINVAL, "%s", verr);
        return;
    }
    char *addrs = join_strings(info->addrs, info->n_addrs);
    char *labels = hv_validate_join_labels(info->labels, info->n_labels);
    hv_node_info_t ni = {.name = info->name,
                         .addrs = addrs,
                         .labels = labels,
                         .instance_id = info->instance_id,
                         .peer = hv_rpc_call_peer(c),
                         .slots = info->slots,
                         .gpus = info->gpus,
                         .cpus = info->cpus,
                         .memory_mb = info->memory_mb,
                         .preemptible = info->preemptible,
                         .incarnation = req->incarnation,
                         .copy_addr = info->copy_addr,
                         .copy_memory = info->copy_memory};
    uint64_t node_id = 0;
    char err[256];
    hv_err rc = addrs != NULL && labels != NULL
                    ? hv_driver_node_join(s->d, &ni, &adm, &node_id, err, sizeof(err))
                    : HV_ENOMEM;
    hv_free(addrs);
    hv_free(labels);
    if (adm.by == HV_ADMIT_REFUSED) {
        join_refused(c, s, &adm, info->name, instance);
        return;
    }
    if (rc != HV_OK) {
        if (adm.by == HV_ADMIT_BY_JTOKEN && (rc == HV_EAUTH || rc == HV_EUNAVAIL)) {
            HV_LOG(HV_LOG_WARN, "cluster", "HV-JOIN-TOKEN",
                   "refused the join of %s: a use of join token %s could not be counted: %s",
                   info->name, adm.jtoken, err);
        }
        hv_rpc_finish(c, rc, "%s", rc == HV_ENOMEM ? "out of memory" : err);
        return;
    }
    char cred_text[HV_CREDS_MAX] = "";
    if (s->auth != NULL) {
        hv_creds_node(&s->auth->creds, node_id, req->incarnation, cred_text);
    }
    Hvpb__V1__JoinReply rep = HVPB__V1__JOIN_REPLY__INIT;
    rep.node_id = node_id;
    rep.node_credential = cred_text;
    rep.heartbeat_ms = s->cfg->heartbeat_ms;
    rep.lease_ms = s->cfg->lease_ms;
    rep.cluster_name = s->cfg->cluster_name;
    hv_rpc_reply(c, &rep.base);
    memset(cred_text, 0, sizeof(cred_text));
}

/* ---- Session -------------------------------------------------------------------------------- */

static void send_ack(sess_t *x) {
    Hvpb__V1__HeadMsg ack = HVPB__V1__HEAD_MSG__INIT;
    ack.ack_seq = x->max_seq_applied;
    send_msg(x, &ack);
}

static void session_hello(hv_svc_cluster_t *s, hv_rpc_call_t *c,
                          const Hvpb__V1__AgentHello *hello) {
    /* Authorized by the gate (svc_auth): the node credential of hello->node_id and this
     * incarnation. */
    uint64_t *running = NULL;
    if (hello->n_running > 0 && (running = hv_calloc(hello->n_running, sizeof(*running))) == NULL) {
        hv_rpc_finish(c, HV_ENOMEM, "out of memory");
        return;
    }
    for (size_t i = 0; i < hello->n_running; i++) {
        running[i] = hello->running[i]->worker_id;
    }
    char err[256];
    hv_err rc = hv_driver_node_attach(s->d, hello->node_id, hello->incarnation, running,
                                      hello->n_running, err, sizeof(err));
    hv_free(running);
    if (rc == HV_EUNAVAIL) {
        hv_rpc_finish_later(c, rc, "%s", err);
        return;
    }
    if (rc != HV_OK) {
        hv_rpc_finish(c, rc, "%s", err);
        return;
    }
    sess_t *x = hv_calloc(1, sizeof(*x));
    if (x == NULL) {
        hv_driver_node_detach(s->d, hello->node_id);
        hv_rpc_finish(c, HV_ENOMEM, "out of memory");
        return;
    }
    hv_svc_cluster_drop(s, hello->node_id); /* a superseded stream of the same node */
    x->svc = s;
    x->call = c;
    x->node_id = hello->node_id;
    sess_link(s, x);
    hv_rpc_call_set_data(c, x);
}

#define SCOPE_LOG_BURST 5         /* refusal records per window and session, at most */
#define SCOPE_LOG_WINDOW_MS 10000 /* the window */

/* A report the driver refused: the worker it names is not placed on the sending node (node
 * scope). Logged at WARN, at most SCOPE_LOG_BURST records per window and session so that a flood
 * cannot fill the log; a record says how many refusals went unlogged before it. The session stays
 * open: the bad report is dropped, the node's own reports still count (see docs/security.md). */
static void session_refused(sess_t *x, const char *what, uint64_t worker_id) {
    uint64_t now = hv_now_ms();
    if (now - x->refused_window >= SCOPE_LOG_WINDOW_MS) {
        x->refused_window = now;
        x->refused_logged = 0;
    }
    if (x->refused_logged >= SCOPE_LOG_BURST) {
        x->refused_quiet++;
        return;
    }
    x->refused_logged++;
    HV_LOG(HV_LOG_WARN, "cluster", "HV-SESSION-SCOPE",
           "node %llu (from %s): refused '%s' for worker %llu, which is not placed on this node "
           "(a node reports only on its own workers); %u earlier refusals not logged",
           (unsigned long long)x->node_id, hv_rpc_call_peer(x->call), what,
           (unsigned long long)worker_id, x->refused_quiet);
    x->refused_quiet = 0;
}

static void session_msg(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_cluster_t *s = ud;
    const Hvpb__V1__AgentMsg *am = (const Hvpb__V1__AgentMsg *)m;
    sess_t *x = hv_rpc_call_data(c);
    if (x == NULL) {
        if (am->body_case != HVPB__V1__AGENT_MSG__BODY_HELLO) {
            hv_rpc_finish(c, HV_EPROTO, "the first Session message must be a hello");
            return;
        }
        session_hello(s, c, am->hello);
        return;
    }
    hv_driver_node_heard(s->d, x->node_id);
    /* Program output and exit reasons are kept whatever their bytes: what is not UTF-8 text is
     * repaired, not refused (the hello passed the gate's refusal). The message is ours to change
     * until this call returns. */
    char where[200];
    size_t fixed = hv_validate_utf8_repair((ProtobufCMessage *)m, where, sizeof(where));
    if (fixed > 0 && x->utf8_fixed == 0) {
        HV_LOG(HV_LOG_WARN, "cluster", "HV-UTF8-REPAIRED",
               "node %llu reported text that is not UTF-8 (%s): each such byte is kept as '?' "
               "(said once per session)",
               (unsigned long long)x->node_id, where);
    }
    x->utf8_fixed += fixed;
    if (am->seq != 0 && am->seq <= x->max_seq_applied) {
        send_ack(x); /* a re-sent event we already applied */
        return;
    }
    hv_err rc = HV_OK;
    uint64_t worker = 0;
    switch (am->body_case) {
    case HVPB__V1__AGENT_MSG__BODY_HEARTBEAT: {
        hv_driver_node_heartbeat(s->d, x->node_id);
        if (hv_rpc_call_data(c) != x) {
            return; /* the reconcile dropped this session */
        }
        Hvpb__V1__HeadMsg rep = HVPB__V1__HEAD_MSG__INIT;
        Hvpb__V1__Heartbeat hb = HVPB__V1__HEARTBEAT__INIT;
        hb.time_ms = hv_wall_ms();
        rep.ack_seq = x->max_seq_applied;
        rep.body_case = HVPB__V1__HEAD_MSG__BODY_HEARTBEAT;
        rep.heartbeat = &hb;
        send_msg(x, &rep);
        break;
    }
    case HVPB__V1__AGENT_MSG__BODY_STARTED:
        worker = am->started->worker_id;
        if (am->started->actor_address != NULL && am->started->actor_address[0] != '\0') {
            rc = hv_driver_actor_address(s->d, x->node_id, worker, am->started->pid,
                                         am->started->actor_address);
        } else {
            rc = hv_driver_worker_started(s->d, x->node_id, worker, am->started->pid);
        }
        break;
    case HVPB__V1__AGENT_MSG__BODY_EXITED:
        worker = am->exited->worker_id;
        if (am->exited->actor_state_saved) {
            actor_state_store(s, x->node_id, am->exited);
        }
        rc = hv_driver_worker_exited(s->d, x->node_id, worker, am->exited->exit_code,
                                     am->exited->term_signal, am->exited->reason);
        break;
    case HVPB__V1__AGENT_MSG__BODY_ACTOR_FIGURES: {
        const Hvpb__V1__ActorFigures *af = am->actor_figures;
        hv_callfig_t f = {.ok = af->calls_ok,
                          .error = af->calls_error,
                          .bytes_in = af->bytes_in,
                          .bytes_out = af->bytes_out,
                          .service_ns = af->service_ns};
        if (af->n_buckets == HV_CALLFIG_BUCKETS) {
            memcpy(f.buckets, af->buckets, sizeof(f.buckets));
            hv_driver_actor_figures(s->d, x->node_id, af->worker_id, &f, af->final);
        } else {
            HV_LOG(HV_LOG_WARN, "cluster", "HV-ACTOR-FIGURES",
                   "node %llu: call figures of process %llu with %zu buckets (not %d): ignored",
                   (unsigned long long)x->node_id, (unsigned long long)af->worker_id, af->n_buckets,
                   HV_CALLFIG_BUCKETS);
        }
        break;
    }
    case HVPB__V1__AGENT_MSG__BODY_LOG:
        worker = am->log->worker_id;
        rc = hv_driver_worker_log(s->d, x->node_id, worker, am->log->stream, am->log->lines,
                                  am->log->n_lines);
        break;
    case HVPB__V1__AGENT_MSG__BODY_DRAIN: {
        const char *r = am->drain->reason != NULL && am->drain->reason[0] != '\0'
                            ? am->drain->reason
                            : "drain notice";
        char why[300];
        if (am->drain->deadline_ms > 0) {
            snprintf(why, sizeof(why), "%s; the node goes within %.0f s", r,
                     (double)am->drain->deadline_ms / 1000.0);
        } else {
            snprintf(why, sizeof(why), "%s", r);
        }
        char derr[300];
        if (hv_driver_node_drain(s->d, x->node_id, 1, why, 1, am->drain->deadline_ms, derr,
                                 sizeof(derr)) == HV_EUNAVAIL) {
            /* Not stored, so not acted on and not confirmed: the agent opens a new session and
             * sends its notice again. */
            hv_rpc_finish_later(c, HV_EUNAVAIL, "%s; send the notice again", derr);
            return;
        }
        break;
    }
    case HVPB__V1__AGENT_MSG__BODY_HELLO:
        hv_rpc_finish(c, HV_EPROTO, "hello sent twice");
        return;
    default:
        break;
    }
    if (rc == HV_EPERM) {
        /* Not applied, so not acknowledged: the seq does not advance on a refused report. */
        session_refused(x,
                        am->body_case == HVPB__V1__AGENT_MSG__BODY_STARTED  ? "started"
                        : am->body_case == HVPB__V1__AGENT_MSG__BODY_EXITED ? "exited"
                                                                            : "log",
                        worker);
        return;
    }
    if (am->seq != 0 && hv_rpc_call_data(c) == x) {
        x->max_seq_applied = am->seq;
        send_ack(x);
    }
}

static void session_done(hv_rpc_call_t *c, const hv_rpc_status_t *st, void *ud) {
    hv_svc_cluster_t *s = ud;
    sess_t *x = hv_rpc_call_data(c);
    if (x == NULL) {
        return;
    }
    const char *why = st->msg[0] ? st->msg : hv_strerror(st->rc);
    HV_LOG(HV_LOG_NOTICE, "cluster", "HV-SESSION-LOST",
           "node %llu: session ended (%s); the node is suspected lost, its lease runs until it "
           "reconnects",
           (unsigned long long)x->node_id, why);
    sess_unlink(s, x);
    hv_driver_node_session_lost(s->d, x->node_id, why);
    hv_free(x);
}

/* ---- Fetch ---------------------------------------------------------------------------------- */

typedef struct fetch_s {
    int fd;
    uint64_t offset, size;
    uint8_t *buf;
} fetch_t;

static void fetch_pump(hv_rpc_call_t *c, void *ud) {
    (void)ud;
    fetch_t *f = hv_rpc_call_data(c);
    if (f == NULL || !hv_rpc_call_open(c)) {
        return;
    }
    while (f->offset < f->size && hv_rpc_call_queued(c) < FETCH_WINDOW) {
        size_t want =
            f->size - f->offset < FETCH_CHUNK ? (size_t)(f->size - f->offset) : FETCH_CHUNK;
        ssize_t r = pread(f->fd, f->buf, want, (off_t)f->offset);
        if (r <= 0) {
            hv_rpc_finish(c, HV_EIO, "cannot read artifact: %s", r < 0 ? strerror(errno) : "EOF");
            return;
        }
        Hvpb__V1__ArtifactChunk ch = HVPB__V1__ARTIFACT_CHUNK__INIT;
        ch.offset = f->offset;
        ch.total_size = f->size;
        ch.data.data = f->buf;
        ch.data.len = (size_t)r;
        if (hv_rpc_send(c, &ch.base) != HV_OK) {
            return;
        }
        f->offset += (uint64_t)r;
    }
    if (f->offset >= f->size) {
        hv_rpc_finish(c, HV_OK, NULL);
    }
}

/* True when the packed JobSpec (of a job or an actor) names the artifact digest (ud) as its
 * binary or a file. */
static int spec_bytes_use(const uint8_t *packed, size_t len, void *ud) {
    const char *digest = ud;
    Hvpb__V1__JobSpec *spec = hvpb__v1__job_spec__unpack(NULL, len, packed);
    if (spec == NULL) {
        return 0;
    }
    int uses = spec->binary != NULL && spec->binary->digest != NULL &&
               strcmp(spec->binary->digest, digest) == 0;
    for (size_t i = 0; !uses && i < spec->n_files; i++) {
        uses = spec->files[i]->digest != NULL && strcmp(spec->files[i]->digest, digest) == 0;
    }
    hvpb__v1__job_spec__free_unpacked(spec, NULL);
    return uses;
}

static int spec_uses(const hv_djob_t *j, void *ud) {
    return spec_bytes_use(j->spec, j->spec_len, ud);
}

static void cluster_fetch(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_cluster_t *s = ud;
    const Hvpb__V1__FetchRequest *req = (const Hvpb__V1__FetchRequest *)m;
    /* Authorized by the gate (svc_auth): a node credential. */
    char path[4096];
    if (hv_validate_fetch(req, path, sizeof(path)) != HV_OK) {
        hv_rpc_finish(c, HV_EINVAL, "%s", path);
        return;
    }
    /* Node scope: a node fetches only what the workers placed on it run (the binary or a file
     * of one of their jobs). Refused before the store is looked at, so the answer does not say
     * whether another job's artifact exists. */
    hv_cred_t cred = {.kind = HV_CRED_NONE};
    if (s->auth != NULL &&
        (hv_auth_identify(s->auth, hv_rpc_call_bearer(c), &cred) != HV_OK ||
         cred.kind != HV_CRED_NODE ||
         (!hv_driver_node_jobs_any(s->d, cred.node_id, spec_uses, (void *)req->digest) &&
          !hv_driver_node_actor_specs_any(s->d, cred.node_id, spec_bytes_use,
                                          (void *)req->digest) &&
          !hv_driver_node_actor_state_is(s->d, cred.node_id, req->digest)))) {
        HV_LOG(HV_LOG_WARN, "cluster", "HV-FETCH-SCOPE",
               "node %llu (from %s): refused a fetch of artifact %.12s, which no worker placed on "
               "this node uses",
               (unsigned long long)cred.node_id, hv_rpc_call_peer(c), req->digest);
        hv_rpc_finish(c, HV_EPERM, "permission denied: no worker on this node uses artifact %s",
                      req->digest);
        return;
    }
    if (!hv_view_artifact_present(s->d, req->digest)) {
        hv_rpc_finish(c, HV_ENOTFOUND, "no artifact %s", req->digest);
        return;
    }
    /* Stored first: an artifact served while its use is not recorded could be collected as
     * unused under a job that needs it. The agent tries again later. */
    char terr[1024];
    if (hv_driver_artifact_touch(s->d, req->digest, terr, sizeof(terr)) != HV_OK) {
        hv_rpc_finish_later(c, HV_EUNAVAIL, "%s; try again later", terr);
        return;
    }
    fetch_t *f = hv_calloc(1, sizeof(*f));
    if (f == NULL || (f->buf = hv_malloc(FETCH_CHUNK)) == NULL) {
        hv_free(f);
        hv_rpc_finish(c, HV_ENOMEM, "out of memory");
        return;
    }
    hv_err orc = hv_view_artifact_open(s->d, req->digest, &f->fd, &f->size, terr, sizeof(terr));
    if (orc != HV_OK) {
        hv_rpc_finish(c, orc, "%s", terr);
        hv_free(f->buf);
        hv_free(f);
        return;
    }
    f->offset = req->offset <= f->size ? req->offset : f->size;
    hv_rpc_call_set_data(c, f);
    hv_rpc_call_set_drain_cb(c, fetch_pump);
    if (f->size == 0) {
        Hvpb__V1__ArtifactChunk ch = HVPB__V1__ARTIFACT_CHUNK__INIT;
        hv_rpc_send(c, &ch.base);
    }
    fetch_pump(c, ud);
}

static void fetch_done(hv_rpc_call_t *c, const hv_rpc_status_t *st, void *ud) {
    (void)st;
    (void)ud;
    fetch_t *f = hv_rpc_call_data(c);
    if (f != NULL) {
        close(f->fd);
        hv_free(f->buf);
        hv_free(f);
    }
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

hv_err hv_svc_cluster_create(hv_rpc_server_t *srv, const hv_head_config_t *cfg, hv_driver_t *d,
                             const char *advertise, hv_svc_cluster_t **out) {
    hv_svc_cluster_t *s = hv_calloc(1, sizeof(*s));
    if (s == NULL) {
        return HV_ENOMEM;
    }
    s->cfg = cfg;
    s->d = d;
    s->by_node_ok = 1; /* by_node is an empty map (zeroed) */
    snprintf(s->advertise, sizeof(s->advertise), "%s", advertise);
    hv_rpc_method_t ms[] = {
        {"/hvpb.v1.Cluster/Join", HV_RPC_UNARY, &hvpb__v1__join_request__descriptor, cluster_join,
         NULL, s},
        {"/hvpb.v1.Cluster/Session", HV_RPC_BIDI, &hvpb__v1__agent_msg__descriptor, session_msg,
         session_done, s},
        {"/hvpb.v1.Cluster/Fetch", HV_RPC_SERVER_STREAM, &hvpb__v1__fetch_request__descriptor,
         cluster_fetch, fetch_done, s},
        {"/hvpb.v1.Cluster/UploadState", HV_RPC_UNARY, &hvpb__v1__upload_chunk__descriptor,
         cluster_upload_state, NULL, s},
    };
    hv_err rc = hv_rpc_server_add_n(srv, ms, sizeof(ms) / sizeof(ms[0]));
    if (rc != HV_OK) {
        hv_free(s);
        return rc;
    }
    *out = s;
    return HV_OK;
}

void hv_svc_cluster_set_auth(hv_svc_cluster_t *s, const hv_auth_t *a) { s->auth = a; }

void hv_svc_cluster_set_admit(hv_svc_cluster_t *s, hv_svc_admit_fn fn, void *ud) {
    s->admit = fn;
    s->admit_ud = ud;
}

void hv_svc_cluster_destroy(hv_svc_cluster_t *s) {
    if (s == NULL) {
        return;
    }
    while (s->sessions != NULL) {
        sess_t *x = s->sessions;
        s->sessions = x->next;
        hv_free(x);
    }
    hv_hmap_fini(&s->by_node);
    hv_free(s);
}
