/* svc_auth: see svc_auth.h. */
#include "svc_auth.h"

#include "views.h"

#include "validate.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "hv.pb-c.h"
#include "log.h"
#include "mem.h"
#include "utf8.h"
#include "util.h"
#include "workcap.h"

#define AUDIT_PAGE_DEFAULT 200
#define AUDIT_PAGE_MAX 1000
#define AUDIT_FILTER_MAX 64                       /* bytes of the who and method filters */
#define JTOKEN_TTL_MAX_MS (3650ull * 86400000ull) /* ten years */
#define AUDIT_GRPC_PERMISSION_DENIED 7            /* gRPC's status codes (grpc/status.h) */
#define AUDIT_GRPC_UNAUTHENTICATED 16

/* A call on its way into the audit trail: the gate saw who and what, the end hook adds the
 * result. Keyed by the call (valid until its end). */
typedef struct audit_pend_s {
    const hv_rpc_call_t *c;
    int refusal_only; /* written only if the handler refuses it (PERMISSION_DENIED or
                       * UNAUTHENTICATED): an Actors call the gate let through */
    hv_audit_row_t row;
    struct audit_pend_s *next;
} audit_pend_t;

struct hv_svc_auth_s {
    hv_auth_t *auth;
    hv_driver_t *d;
    const char *static_token; /* the configured join token (borrowed; may be NULL) */
    void (*on_node)(const char *peer, void *ud); /* a call with a node credential got in */
    void *on_node_ud;
    audit_pend_t *pending;
    int audit_failing; /* the last append failed (said once until one succeeds) */
};

/* The job and worker a Rendezvous request names (worker 0: the method names none). */
static void rdzv_ids(const char *path, const ProtobufCMessage *m, uint64_t *job, uint64_t *worker) {
    const ProtobufCMessageDescriptor *d = m->descriptor;
    *job = *worker = 0;
    if (d == &hvpb__v1__rdzv_join_request__descriptor) {
        const Hvpb__V1__RdzvJoinRequest *r = (const Hvpb__V1__RdzvJoinRequest *)m;
        *job = r->job_id;
        *worker = r->worker_id;
    } else if (d == &hvpb__v1__rdzv_done_request__descriptor) {
        const Hvpb__V1__RdzvDoneRequest *r = (const Hvpb__V1__RdzvDoneRequest *)m;
        *job = r->job_id;
        *worker = r->worker_id;
    } else if (d == &hvpb__v1__rdzv_resize_request__descriptor) {
        const Hvpb__V1__RdzvResizeRequest *r = (const Hvpb__V1__RdzvResizeRequest *)m;
        *job = r->job_id;
        *worker = r->worker_id;
    } else if (d == &hvpb__v1__rdzv_watch_request__descriptor) {
        const Hvpb__V1__RdzvWatchRequest *r = (const Hvpb__V1__RdzvWatchRequest *)m;
        *job = r->job_id;
        *worker = r->worker_id;
    } else if (d == &hvpb__v1__kv_put_request__descriptor) {
        *job = ((const Hvpb__V1__KvPutRequest *)m)->job_id;
    } else if (d == &hvpb__v1__put_state_request__descriptor) {
        const Hvpb__V1__PutStateRequest *r = (const Hvpb__V1__PutStateRequest *)m;
        *job = r->job_id;
        *worker = r->worker_id;
    } else if (d == &hvpb__v1__fetch_state_request__descriptor) {
        const Hvpb__V1__FetchStateRequest *r = (const Hvpb__V1__FetchStateRequest *)m;
        *job = r->job_id;
        *worker = r->worker_id;
    } else if (d == &hvpb__v1__plan_copy_request__descriptor) {
        const Hvpb__V1__PlanCopyRequest *r = (const Hvpb__V1__PlanCopyRequest *)m;
        *job = r->job_id;
        *worker = r->worker_id;
    } else if (d == &hvpb__v1__copy_kept_request__descriptor) {
        const Hvpb__V1__CopyKeptRequest *r = (const Hvpb__V1__CopyKeptRequest *)m;
        *job = r->job_id;
        *worker = r->worker_id;
    } else if (d == &hvpb__v1__kv_get_request__descriptor) {
        *job = ((const Hvpb__V1__KvGetRequest *)m)->job_id;
    } else if (d == &hvpb__v1__rdzv_report_request__descriptor) {
        const Hvpb__V1__RdzvReportRequest *r = (const Hvpb__V1__RdzvReportRequest *)m;
        *job = r->job_id;
        *worker = r->worker_id;
    } else {
        HV_LOG(HV_LOG_ERROR, "auth", "HV-AUTH-RULE", "no id reader for %s", path);
    }
}

/* ---- audit trail ---------------------------------------------------------------------------- */

static audit_pend_t *pend_find(hv_svc_auth_t *s, const hv_rpc_call_t *c, audit_pend_t ***link) {
    for (audit_pend_t **p = &s->pending; *p != NULL; p = &(*p)->next) {
        if ((*p)->c == c) {
            if (link != NULL) {
                *link = p;
            }
            return *p;
        }
    }
    return NULL;
}

/* Who calls: kind and id, never a secret. A Join names itself by the token in its body. */
static void audit_who(const hv_svc_auth_t *s, hv_rpc_call_t *c, hv_auth_scope scope,
                      const ProtobufCMessage *first, hv_audit_row_t *r) {
    hv_cred_t cred;
    if (hv_auth_identify(s->auth, hv_rpc_call_bearer(c), &cred) != HV_OK) {
        cred.kind = HV_CRED_NONE;
    }
    const char *jt = NULL;
    if (scope == HV_AUTH_JOIN && first->descriptor == &hvpb__v1__join_request__descriptor) {
        jt = ((const Hvpb__V1__JoinRequest *)first)->token;
    }
    char id[HV_JTOKEN_ID_LEN + 1], sha[65];
    uint64_t inst;
    if (jt != NULL && jt[0] != '\0' && hv_creds_jtoken_parse(jt, id, sha)) {
        snprintf(r->who_kind, sizeof(r->who_kind), "join-token");
        snprintf(r->who_id, sizeof(r->who_id), "%s", id);
    } else if (jt != NULL && s->static_token != NULL && s->static_token[0] != '\0' &&
               hv_creds_equal(s->static_token, jt)) {
        snprintf(r->who_kind, sizeof(r->who_kind), "join-token");
        snprintf(r->who_id, sizeof(r->who_id), "static");
    } else if (jt != NULL && hv_creds_instance_id(&s->auth->creds, jt, &inst)) {
        snprintf(r->who_kind, sizeof(r->who_kind), "instance");
        snprintf(r->who_id, sizeof(r->who_id), "%" PRIu64, inst);
    } else if (cred.kind == HV_CRED_CLIENT) {
        snprintf(r->who_kind, sizeof(r->who_kind), "client");
        snprintf(r->who_id, sizeof(r->who_id), "%s", cred.client);
    } else if (cred.kind == HV_CRED_NODE) {
        snprintf(r->who_kind, sizeof(r->who_kind), "node");
        snprintf(r->who_id, sizeof(r->who_id), "%" PRIu64, cred.node_id);
    } else if (cred.kind == HV_CRED_WORKER) {
        snprintf(r->who_kind, sizeof(r->who_kind), "worker");
        snprintf(r->who_id, sizeof(r->who_id), "job %" PRIu64 " worker %" PRIu64, cred.job_id,
                 cred.worker_id);
    } else {
        snprintf(r->who_kind, sizeof(r->who_kind),
                 jt != NULL && jt[0] != '\0' ? "join-token" : "none");
        snprintf(r->who_id, sizeof(r->who_id), "%s", jt != NULL && jt[0] != '\0' ? "unknown" : "");
    }
}

/* An actor as a request names it: "actor 7", "actor team/ctr", "actor ctr" (its caller's
 * namespace); buf: 64 bytes. */
static const char *audit_actor(const Hvpb__V1__ActorRef *r, char buf[64]) {
    if (r == NULL) {
        snprintf(buf, 64, "actor ?");
    } else if (r->id != 0) {
        snprintf(buf, 64, "actor %" PRIu64, r->id);
    } else {
        snprintf(buf, 64, "actor %.20s%s%.32s", r->namespace_ != NULL ? r->namespace_ : "",
                 r->namespace_ != NULL && r->namespace_[0] != '\0' ? "/" : "",
                 r->name != NULL ? r->name : "");
    }
    return buf;
}

/* The target of an Actors call (an actor, or the actors of a namespace); 0 for another. */
static int audit_target_actors(const ProtobufCMessage *m, char *out, size_t cap) {
    const ProtobufCMessageDescriptor *d = m->descriptor;
    char a[64];
    if (d == &hvpb__v1__create_actor_request__descriptor) {
        const Hvpb__V1__ActorSpec *sp = ((const Hvpb__V1__CreateActorRequest *)m)->spec;
        Hvpb__V1__ActorRef r = HVPB__V1__ACTOR_REF__INIT;
        r.name = sp != NULL && sp->name[0] != '\0' ? sp->name : "(unnamed)";
        r.namespace_ = sp != NULL ? sp->namespace_ : "";
        snprintf(out, cap, "%.44s (class %.10s)", audit_actor(&r, a),
                 sp != NULL ? sp->class_name : "");
    } else if (d == &hvpb__v1__kill_actor_request__descriptor) {
        const Hvpb__V1__KillActorRequest *r = (const Hvpb__V1__KillActorRequest *)m;
        snprintf(out, cap, "%.52s%s", audit_actor(r->ref, a), r->restart ? " (restart)" : "");
    } else if (d == &hvpb__v1__get_actor_request__descriptor) {
        const Hvpb__V1__GetActorRequest *r = (const Hvpb__V1__GetActorRequest *)m;
        snprintf(out, cap, "%.54s%s", audit_actor(r->ref, a), r->with_secret ? " (secret)" : "");
    } else if (d == &hvpb__v1__actor_logs_request__descriptor) {
        const Hvpb__V1__ActorLogsRequest *r = (const Hvpb__V1__ActorLogsRequest *)m;
        snprintf(out, cap, "%.56s (logs)", audit_actor(r->ref, a));
    } else if (d == &hvpb__v1__list_actors_request__descriptor) {
        const char *ns = ((const Hvpb__V1__ListActorsRequest *)m)->namespace_;
        snprintf(out, cap, "actors%s%.40s", ns != NULL && ns[0] != '\0' ? " of namespace " : "",
                 ns != NULL ? ns : "");
    } else {
        return 0;
    }
    return 1;
}

/* What the call acts on, from its request (path: the method, for the requests that several
 * methods take). */
static void audit_target(const char *path, const ProtobufCMessage *m, char *out, size_t cap) {
    const ProtobufCMessageDescriptor *d = m->descriptor;
    out[0] = '\0';
    if (audit_target_actors(m, out, cap)) {
        return;
    }
    if (d == &hvpb__v1__job_ref__descriptor) {
        snprintf(out, cap, "job %" PRIu64, ((const Hvpb__V1__JobRef *)m)->job_id);
    } else if (d == &hvpb__v1__submit_request__descriptor) {
        const Hvpb__V1__SubmitRequest *r = (const Hvpb__V1__SubmitRequest *)m;
        snprintf(out, cap, "job named %.50s",
                 r->spec != NULL && r->spec->name != NULL ? r->spec->name : "");
    } else if (d == &hvpb__v1__node_drain_request__descriptor) {
        const Hvpb__V1__NodeDrainRequest *r = (const Hvpb__V1__NodeDrainRequest *)m;
        const char *what = strstr(path, "/RevokeNode") != NULL ? " (revoke)"
                           : r->drain                          ? ""
                                                               : " (undrain)";
        snprintf(out, cap, "node %.50s%s", r->node != NULL ? r->node : "", what);
    } else if (d == &hvpb__v1__nodes_drain_request__descriptor) {
        const Hvpb__V1__NodesDrainRequest *r = (const Hvpb__V1__NodesDrainRequest *)m;
        size_t len = (size_t)snprintf(out, cap, "%s", r->drain ? "nodes" : "undrain nodes");
        for (size_t i = 0; i < r->n_nodes && len < cap; i++) {
            len += (size_t)snprintf(out + len, cap - len, "%s%.30s", i == 0 ? " " : ",",
                                    r->nodes[i] != NULL ? r->nodes[i] : "");
        }
    } else if (d == &hvpb__v1__join_request__descriptor) {
        const Hvpb__V1__JoinRequest *r = (const Hvpb__V1__JoinRequest *)m;
        snprintf(out, cap, "node %.50s",
                 r->node != NULL && r->node->name != NULL ? r->node->name : "");
    } else if (d == &hvpb__v1__join_token_ref__descriptor) {
        const Hvpb__V1__JoinTokenRef *r = (const Hvpb__V1__JoinTokenRef *)m;
        snprintf(out, cap, "token %.16s", r->id != NULL ? r->id : "");
    }
}

/* Notes a call for the audit trail (its result comes at its end: audit_end). */
static void audit_begin(hv_svc_auth_t *s, hv_rpc_call_t *c, const char *path, hv_auth_scope scope,
                        const ProtobufCMessage *first, int refusal_only) {
    if (pend_find(s, c, NULL) != NULL) {
        return;
    }
    audit_pend_t *p = hv_calloc(1, sizeof(*p));
    if (p == NULL) {
        HV_LOG(HV_LOG_WARN, "auth", "HV-AUDIT", "out of memory: a call to %s is not audited", path);
        return;
    }
    p->c = c;
    p->refusal_only = refusal_only;
    const char *slash = strrchr(path, '/');
    snprintf(p->row.method, sizeof(p->row.method), "%s", slash != NULL ? slash + 1 : path);
    snprintf(p->row.peer, sizeof(p->row.peer), "%s", hv_rpc_call_peer(c));
    audit_who(s, c, scope, first, &p->row);
    audit_target(path, first, p->row.target, sizeof(p->row.target));
    hv_utf8_repair(p->row.target); /* a refused request's bytes: the trail stays UTF-8 text */
    p->next = s->pending;
    s->pending = p;
}

static void audit_end(const hv_rpc_call_t *c, const char *path, int code, const char *detail,
                      void *ud) {
    hv_svc_auth_t *s = ud;
    audit_pend_t **link = NULL;
    audit_pend_t *p = pend_find(s, c, &link);
    (void)path;
    if (p == NULL) {
        return;
    }
    *link = p->next;
    if (p->refusal_only && code != AUDIT_GRPC_PERMISSION_DENIED &&
        code != AUDIT_GRPC_UNAUTHENTICATED) {
        hv_free(p); /* answered, or an error that refuses nobody (not found, bad request) */
        return;
    }
    p->row.time_ms = hv_wall_ms();
    p->row.code = code;
    if (code == 0) {
        snprintf(p->row.result, sizeof(p->row.result), "OK");
    } else {
        snprintf(p->row.result, sizeof(p->row.result), "%s: %s", hv_rpc_code_name(code),
                 detail != NULL ? detail : "");
        hv_utf8_repair(p->row.result); /* a character cut in two by the bound */
    }
    hv_err rc = hv_driver_audit(s->d, &p->row);
    if (rc != HV_OK && !s->audit_failing) {
        HV_LOG(HV_LOG_WARN, "auth", "HV-AUDIT", "cannot write the audit trail: %s",
               hv_view_error(s->d));
    }
    s->audit_failing = rc != HV_OK;
    hv_free(p);
}

/* A worker credential is good only while its job has not ended (workcap.h): its job as the
 * driver knows it, in memory or from the store. */
static hv_err worker_live(hv_svc_auth_t *s, const hv_cred_t *cred, char *msg, size_t msglen) {
    const hv_djob_t *j = hv_driver_job(s->d, cred->job_id);
    hv_wcap_job_t wj = {.known = j != NULL, .state = j != NULL ? j->jm.state : HV_JOB_PENDING};
    return hv_wcap_live(cred->job_id, &wj, msg, msglen);
}

static hv_err gate(hv_rpc_call_t *c, const char *path, const ProtobufCMessage *first, char *msg,
                   size_t msglen, void *ud) {
    const hv_auth_t *a = ((hv_svc_auth_t *)ud)->auth;
    hv_auth_scope scope;
    hv_svc_auth_t *s = ud;
    if (!hv_auth_rule(path, &scope)) {
        snprintf(msg, msglen, "permission denied: no credential may call %s", path);
        HV_LOG(HV_LOG_WARN, "auth", "HV-AUTH-REFUSED", "refused %s from %s: no rule for it", path,
               hv_rpc_call_peer(c));
        audit_begin(s, c, path, HV_AUTH_CLIENT, first, 0);
        return HV_EPERM;
    }
    uint64_t id = 0, worker = 0, incarnation = 0;
    int check_inc = 0;
    if (scope == HV_AUTH_JOB) {
        rdzv_ids(path, first, &id, &worker);
    } else if (scope == HV_AUTH_NODE && first->descriptor == &hvpb__v1__agent_msg__descriptor) {
        const Hvpb__V1__AgentMsg *am = (const Hvpb__V1__AgentMsg *)first;
        if (am->body_case == HVPB__V1__AGENT_MSG__BODY_HELLO && am->hello != NULL) {
            id = am->hello->node_id;
            incarnation = am->hello->incarnation;
            check_inc = 1;
        }
    }
    hv_cred_t cred;
    hv_err rc = hv_auth_call(a, hv_rpc_call_bearer(c), scope, id, &cred, msg, msglen);
    if (rc == HV_OK && ((scope == HV_AUTH_JOB && worker != 0 && cred.worker_id != worker) ||
                        (check_inc && cred.incarnation != incarnation))) {
        rc = HV_EPERM; /* another worker of the same job, or another agent process of the node */
        snprintf(msg, msglen, "permission denied: the credential belongs to another %s",
                 scope == HV_AUTH_JOB ? "worker" : "agent process");
    }
    int dead = 0;
    if (rc == HV_OK && cred.kind == HV_CRED_WORKER) {
        dead = (rc = worker_live(s, &cred, msg, msglen)) != HV_OK;
    }
    if (rc != HV_OK) {
        HV_LOG(HV_LOG_WARN, "auth", rc == HV_EAUTH ? "HV-AUTH-NONE" : "HV-AUTH-DENIED",
               "refused %s from %s: %s", path, hv_rpc_call_peer(c),
               dead             ? "a worker credential of a job that has ended"
               : rc == HV_EAUTH ? "no valid credential"
                                : "credential of another scope");
    }
    if (rc == HV_OK && cred.kind == HV_CRED_NODE && s->on_node != NULL) {
        s->on_node(hv_rpc_call_peer(c), s->on_node_ud);
    }
    if (rc == HV_OK && hv_validate_utf8(first, msg, msglen) != HV_OK) {
        rc = HV_EINVAL; /* every proto3 string must be UTF-8 text: refused before any handler */
        HV_LOG(HV_LOG_WARN, "auth", "HV-UTF8-REFUSED", "refused %s from %s: %s", path,
               hv_rpc_call_peer(c), msg);
    }
    if (rc != HV_OK || hv_auth_audited(path)) {
        audit_begin(s, c, path, scope, first, 0);
    } else if (scope == HV_AUTH_ACTORS) {
        /* The Actors service refuses a worker another namespace itself: audited too. */
        audit_begin(s, c, path, scope, first, 1);
    }
    return rc;
}

static void jobs_revoke_node(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_auth_t *s = ud;
    const Hvpb__V1__NodeDrainRequest *req = (const Hvpb__V1__NodeDrainRequest *)m;
    char verr[300];
    if (hv_validate_node_drain(req, verr, sizeof(verr)) != HV_OK) {
        hv_rpc_finish(c, HV_EINVAL, "%s", verr);
        return;
    }
    const hv_dnode_t *n = hv_driver_node_find(s->d, req->node); /* a name or an id */
    if (n == NULL) {
        hv_rpc_finish(c, HV_ENOTFOUND, "no node named '%s'", req->node != NULL ? req->node : "");
        return;
    }
    uint64_t id = n->id;
    /* Room in memory first, then stored, then in effect (the driver): a revocation is never in
     * effect that a restart would forget, nor stored and not in effect. */
    if (s->auth->n_revoked == HV_AUTH_MAX_REVOKED) {
        hv_rpc_finish(c, HV_ETOOBIG,
                      "cannot revoke node %s: too many revoked node credentials "
                      "(at most %d)",
                      req->node, HV_AUTH_MAX_REVOKED);
        return;
    }
    /* The reply names the node, so that a revoke by id says which node it was. Copied first:
     * dropping the session may change the node. */
    char name[256], err[400];
    snprintf(name, sizeof(name), "%s", n->name);
    hv_err rc = hv_driver_node_revoke(s->d, id, err, sizeof(err));
    if (rc == HV_EUNAVAIL) {
        hv_rpc_finish_later(c, HV_EUNAVAIL, "%s; node %s was not revoked", err, name);
        return;
    }
    if (rc != HV_OK) {
        hv_rpc_finish(c, rc, "cannot revoke node %s: %s", req->node, err);
        return;
    }
    HV_LOG(HV_LOG_NOTICE, "auth", "HV-AUTH-REVOKE",
           "node %s (id %llu): credential revoked by a client from %s; its session ends", name,
           (unsigned long long)id, hv_rpc_call_peer(c));
    Hvpb__V1__NodeInfo info = HVPB__V1__NODE_INFO__INIT;
    info.name = name;
    Hvpb__V1__NodeView v = HVPB__V1__NODE_VIEW__INIT;
    v.node_id = id;
    v.state = (char *)"revoked";
    v.info = &info;
    hv_rpc_reply(c, &v.base);
}

/* ---- Jobs.ListAudit -------------------------------------------------------------------------- */

static void jobs_list_audit(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_auth_t *s = ud;
    const Hvpb__V1__ListAuditRequest *req = (const Hvpb__V1__ListAuditRequest *)m;
    if ((req->who != NULL && strlen(req->who) > AUDIT_FILTER_MAX) ||
        (req->method != NULL && strlen(req->method) > AUDIT_FILTER_MAX)) {
        hv_rpc_finish(c, HV_EINVAL, "who and method are at most %d bytes", AUDIT_FILTER_MAX);
        return;
    }
    uint32_t limit = req->limit == 0 ? AUDIT_PAGE_DEFAULT : req->limit;
    if (limit > AUDIT_PAGE_MAX) {
        limit = AUDIT_PAGE_MAX; /* the rest: the next page (next_before_seq) */
    }
    hv_audit_filter_t f = {.before_seq = req->before_seq,
                           .since_ms = req->since_ms,
                           .who = req->who,
                           .method = req->method,
                           .refused_only = req->refused_only,
                           .limit = limit + 1};
    hv_audit_row_t *rows = NULL;
    size_t n = 0;
    hv_err rc = hv_view_audit(s->d, &f, &rows, &n);
    if (rc != HV_OK) {
        hv_rpc_finish(c, rc, "cannot read the audit trail: %s", hv_view_error(s->d));
        return;
    }
    size_t shown = n > limit ? limit : n;
    Hvpb__V1__AuditEntry *es = hv_calloc(shown + 1, sizeof(*es));
    Hvpb__V1__AuditEntry **ps = hv_calloc(shown + 1, sizeof(*ps));
    if (es == NULL || ps == NULL) {
        hv_free(es);
        hv_free(ps);
        hv_free(rows);
        hv_rpc_finish(c, HV_ENOMEM, "out of memory");
        return;
    }
    for (size_t i = 0; i < shown; i++) {
        hvpb__v1__audit_entry__init(&es[i]);
        es[i].seq = rows[i].seq;
        es[i].time_ms = rows[i].time_ms;
        es[i].who_kind = rows[i].who_kind;
        es[i].who_id = rows[i].who_id;
        es[i].peer = rows[i].peer;
        es[i].method = rows[i].method;
        es[i].target = rows[i].target;
        es[i].code = (uint32_t)rows[i].code;
        es[i].result = rows[i].result;
        ps[i] = &es[i];
    }
    Hvpb__V1__ListAuditReply rep = HVPB__V1__LIST_AUDIT_REPLY__INIT;
    rep.entries = ps;
    rep.n_entries = shown;
    rep.next_before_seq = n > limit ? rows[shown - 1].seq : 0;
    hv_rpc_reply(c, &rep.base);
    hv_free(ps);
    hv_free(es);
    hv_free(rows);
}

/* ---- Jobs.*JoinToken(s) ---------------------------------------------------------------------- */

static void jtoken_view(const hv_jtoken_row_t *r, uint64_t now_ms, Hvpb__V1__JoinTokenView *v) {
    hvpb__v1__join_token_view__init(v);
    v->id = (char *)r->id;
    v->created_ms = r->created_ms;
    v->expires_ms = r->expires_ms;
    v->max_uses = r->max_uses;
    v->uses = r->uses;
    v->revoked_ms = r->revoked_ms;
    v->created_by = (char *)r->created_by;
    /* The state of a token whose secret one has: its hash against itself. */
    hv_jtoken_verdict verdict =
        hv_creds_jtoken_check(r->secret_sha256, r->secret_sha256, r->expires_ms, r->max_uses,
                              r->uses, r->revoked_ms, now_ms);
    v->state = (char *)hv_creds_jtoken_verdict_name(verdict);
    v->state_code =
        verdict == HV_JTOKEN_OK        ? HVPB__V1__JOIN_TOKEN_STATE__JOIN_TOKEN_STATE_VALID
        : verdict == HV_JTOKEN_REVOKED ? HVPB__V1__JOIN_TOKEN_STATE__JOIN_TOKEN_STATE_REVOKED
        : verdict == HV_JTOKEN_EXPIRED ? HVPB__V1__JOIN_TOKEN_STATE__JOIN_TOKEN_STATE_EXPIRED
        : verdict == HV_JTOKEN_USED_UP ? HVPB__V1__JOIN_TOKEN_STATE__JOIN_TOKEN_STATE_USED_UP
                                       : HVPB__V1__JOIN_TOKEN_STATE__JOIN_TOKEN_STATE_UNSPECIFIED;
}

static void jobs_create_join_token(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_auth_t *s = ud;
    const Hvpb__V1__CreateJoinTokenRequest *req = (const Hvpb__V1__CreateJoinTokenRequest *)m;
    if (req->ttl_ms > JTOKEN_TTL_MAX_MS) {
        hv_rpc_finish(c, HV_EINVAL, "ttl is at most 3650 days (0: the token never expires)");
        return;
    }
    hv_cred_t cred;
    if (hv_auth_identify(s->auth, hv_rpc_call_bearer(c), &cred) != HV_OK) {
        cred.client[0] = '\0';
    }
    char token[HV_JTOKEN_MAX];
    hv_jtoken_row_t row = {0};
    uint64_t now = hv_wall_ms();
    row.created_ms = now;
    row.expires_ms = req->ttl_ms != 0 ? now + req->ttl_ms : 0;
    row.max_uses = req->uses;
    snprintf(row.created_by, sizeof(row.created_by), "%s", cred.client);
    hv_err rc = HV_EEXIST;
    for (int tries = 0; tries < 4 && rc == HV_EEXIST; tries++) { /* ids are 24 random bits */
        if ((rc = hv_auth_jtoken_new(token, row.id, row.secret_sha256)) == HV_OK) {
            rc = hv_driver_jtoken_create(s->d, &row);
        }
    }
    if (rc != HV_OK) {
        memset(token, 0, sizeof(token));
        hv_rpc_finish(c, rc, "cannot make a join token: %s",
                      rc == HV_EIO ? "no random bytes" : hv_view_error(s->d));
        return;
    }
    audit_pend_t *p = pend_find(s, c, NULL);
    if (p != NULL) {
        snprintf(p->row.target, sizeof(p->row.target), "token %s", row.id);
    }
    HV_LOG(HV_LOG_NOTICE, "auth", "HV-JOIN-TOKEN-NEW",
           "join token %s made by client %s from %s (ttl %" PRIu64 " ms, uses %u; 0 = no limit)",
           row.id, row.created_by, hv_rpc_call_peer(c), req->ttl_ms, row.max_uses);
    Hvpb__V1__JoinTokenView v;
    jtoken_view(&row, now, &v);
    Hvpb__V1__CreateJoinTokenReply rep = HVPB__V1__CREATE_JOIN_TOKEN_REPLY__INIT;
    rep.token = &v;
    rep.join_token = token;
    hv_rpc_reply(c, &rep.base);
    memset(token, 0, sizeof(token));
}

static void jobs_list_join_tokens(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_auth_t *s = ud;
    (void)m;
    hv_jtoken_row_t *rows = NULL;
    size_t n = 0;
    hv_err rc = hv_view_jtokens(s->d, &rows, &n);
    if (rc != HV_OK) {
        hv_rpc_finish(c, rc, "cannot read the join tokens: %s", hv_view_error(s->d));
        return;
    }
    Hvpb__V1__JoinTokenView *vs = hv_calloc(n + 1, sizeof(*vs));
    Hvpb__V1__JoinTokenView **ps = hv_calloc(n + 1, sizeof(*ps));
    if (vs == NULL || ps == NULL) {
        hv_free(vs);
        hv_free(ps);
        hv_free(rows);
        hv_rpc_finish(c, HV_ENOMEM, "out of memory");
        return;
    }
    uint64_t now = hv_wall_ms();
    for (size_t i = 0; i < n; i++) {
        jtoken_view(&rows[i], now, &vs[i]);
        ps[i] = &vs[i];
    }
    Hvpb__V1__ListJoinTokensReply rep = HVPB__V1__LIST_JOIN_TOKENS_REPLY__INIT;
    rep.tokens = ps;
    rep.n_tokens = n;
    hv_rpc_reply(c, &rep.base);
    hv_free(ps);
    hv_free(vs);
    hv_free(rows);
}

static void jobs_revoke_join_token(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_auth_t *s = ud;
    const Hvpb__V1__JoinTokenRef *req = (const Hvpb__V1__JoinTokenRef *)m;
    if (!hv_creds_jtoken_id_valid(req->id)) {
        hv_rpc_finish(c, HV_EINVAL,
                      "a join token id is %d lower-case letters or digits (hvctl token list)",
                      HV_JTOKEN_ID_LEN);
        return;
    }
    hv_jtoken_row_t row;
    uint64_t now = hv_wall_ms();
    hv_err rc = hv_driver_jtoken_revoke(s->d, req->id, now, &row);
    if (rc == HV_ENOTFOUND) {
        hv_rpc_finish(c, rc, "no join token %s", req->id);
        return;
    }
    if (rc != HV_OK) {
        hv_rpc_finish(c, rc, "cannot revoke join token %s: %s", req->id, hv_view_error(s->d));
        return;
    }
    HV_LOG(HV_LOG_NOTICE, "auth", "HV-JOIN-TOKEN-REVOKE",
           "join token %s revoked by a client from %s", row.id, hv_rpc_call_peer(c));
    Hvpb__V1__JoinTokenView v;
    jtoken_view(&row, now, &v);
    hv_rpc_reply(c, &v.base);
}

void hv_svc_auth_set_node_hook(hv_svc_auth_t *s, void (*fn)(const char *peer, void *ud), void *ud) {
    s->on_node = fn;
    s->on_node_ud = ud;
}

void hv_svc_auth_set_static_token(hv_svc_auth_t *s, const char *static_token) {
    s->static_token = static_token;
}

hv_err hv_svc_auth_create(hv_rpc_server_t *srv, hv_auth_t *a, hv_driver_t *d, hv_svc_auth_t **out) {
    hv_svc_auth_t *s = hv_calloc(1, sizeof(*s));
    if (s == NULL) {
        return HV_ENOMEM;
    }
    s->auth = a;
    s->d = d;
    const hv_rpc_method_t ms[] = {
        {"/hvpb.v1.Jobs/RevokeNode", HV_RPC_UNARY, &hvpb__v1__node_drain_request__descriptor,
         jobs_revoke_node, NULL, s},
        {"/hvpb.v1.Jobs/ListAudit", HV_RPC_UNARY, &hvpb__v1__list_audit_request__descriptor,
         jobs_list_audit, NULL, s},
        {"/hvpb.v1.Jobs/CreateJoinToken", HV_RPC_UNARY,
         &hvpb__v1__create_join_token_request__descriptor, jobs_create_join_token, NULL, s},
        {"/hvpb.v1.Jobs/ListJoinTokens", HV_RPC_UNARY,
         &hvpb__v1__list_join_tokens_request__descriptor, jobs_list_join_tokens, NULL, s},
        {"/hvpb.v1.Jobs/RevokeJoinToken", HV_RPC_UNARY, &hvpb__v1__join_token_ref__descriptor,
         jobs_revoke_join_token, NULL, s},
    };
    hv_err rc = hv_rpc_server_add_n(srv, ms, sizeof(ms) / sizeof(ms[0]));
    if (rc != HV_OK) {
        hv_free(s);
        return rc;
    }
    hv_rpc_server_set_gate(srv, gate, s);
    hv_rpc_server_set_end_hook(srv, audit_end, s);
    *out = s;
    return HV_OK;
}

void hv_svc_auth_destroy(hv_svc_auth_t *s) {
    if (s == NULL) {
        return;
    }
    while (s->pending != NULL) {
        audit_pend_t *p = s->pending;
        s->pending = p->next;
        hv_free(p);
    }
    hv_free(s);
}
