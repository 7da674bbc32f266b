/* svc_auth: see svc_auth.h. */
#include "svc_auth.h"

#include "validate.h"

#include <inttypes.h>
#include <stdio.h>

#include "hv.pb-c.h"
#include "log.h"
#include "mem.h"

struct hv_svc_auth_s {
    hv_auth_t *auth;
    hv_driver_t *d;
    hv_svc_auth_drop_cb drop;
    void *ud;
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
    } else if (d == &hvpb__v1__kv_get_request__descriptor) {
        *job = ((const Hvpb__V1__KvGetRequest *)m)->job_id;
    } else {
        HV_LOG(HV_LOG_ERROR, "auth", "HV-AUTH-RULE", "no id reader for %s", path);
    }
}

static hv_err gate(hv_rpc_call_t *c, const char *path, const ProtobufCMessage *first, char *msg,
                   size_t msglen, void *ud) {
    const hv_auth_t *a = ((hv_svc_auth_t *)ud)->auth;
    hv_auth_scope scope;
    if (!hv_auth_rule(path, &scope)) {
        snprintf(msg, msglen, "permission denied: no credential may call %s", path);
        HV_LOG(HV_LOG_WARN, "auth", "HV-AUTH-REFUSED", "refused %s from %s: no rule for it", path,
               hv_rpc_call_peer(c));
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
    if (rc != HV_OK) {
        HV_LOG(HV_LOG_WARN, "auth", rc == HV_EAUTH ? "HV-AUTH-NONE" : "HV-AUTH-DENIED",
               "refused %s from %s: %s", path, hv_rpc_call_peer(c),
               rc == HV_EAUTH ? "no valid credential" : "credential of another scope");
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
    char err[512];
    uint64_t id = n->id;
    hv_err rc = hv_auth_revoke_node_stored(s->auth, id, n->incarnation, err, sizeof(err));
    if (rc != HV_OK) {
        hv_rpc_finish(c, rc, "cannot revoke node %s: %s", req->node, err);
        return;
    }
    HV_LOG(HV_LOG_NOTICE, "auth", "HV-AUTH-REVOKE",
           "node %s (id %llu): credential revoked by a client from %s; its session ends", n->name,
           (unsigned long long)id, hv_rpc_call_peer(c));
    /* The reply names the node, so that a revoke by id says which node it was. Copied first:
     * dropping the session may change the node. */
    char name[256];
    snprintf(name, sizeof(name), "%s", n->name);
    s->drop(s->ud, id);
    Hvpb__V1__NodeInfo info = HVPB__V1__NODE_INFO__INIT;
    info.name = name;
    Hvpb__V1__NodeView v = HVPB__V1__NODE_VIEW__INIT;
    v.node_id = id;
    v.state = (char *)"revoked";
    v.info = &info;
    hv_rpc_reply(c, &v.base);
}

hv_err hv_svc_auth_create(hv_rpc_server_t *srv, hv_auth_t *a, hv_driver_t *d,
                          hv_svc_auth_drop_cb drop, void *ud, hv_svc_auth_t **out) {
    hv_svc_auth_t *s = hv_calloc(1, sizeof(*s));
    if (s == NULL) {
        return HV_ENOMEM;
    }
    s->auth = a;
    s->d = d;
    s->drop = drop;
    s->ud = ud;
    hv_rpc_method_t m = {
        "/hvpb.v1.Jobs/RevokeNode", HV_RPC_UNARY, &hvpb__v1__node_drain_request__descriptor,
        jobs_revoke_node,           NULL,         s};
    hv_err rc = hv_rpc_server_add(srv, &m);
    if (rc != HV_OK) {
        hv_free(s);
        return rc;
    }
    hv_rpc_server_set_gate(srv, gate, s);
    *out = s;
    return HV_OK;
}

void hv_svc_auth_destroy(hv_svc_auth_t *s) { hv_free(s); }
