/* svc_keepers: see svc_keepers.h. */
#include "svc_keepers.h"

#include <stdio.h>
#include <string.h>

#include "hv.pb-c.h"
#include "log.h"
#include "mem.h"

#define KEEPERS_COPY_MAX ((uint64_t)1 << 36) /* 64 GiB, as PutState */

struct hv_svc_keepers_s {
    hv_driver_t *d;
};

/* 64 lower-case hex digits. */
static int is_sha256(const char *s) {
    if (s == NULL || strlen(s) != 64) {
        return 0;
    }
    for (const char *p = s; *p; p++) {
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) {
            return 0;
        }
    }
    return 1;
}

static void plan_copy(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_keepers_t *s = ud;
    const Hvpb__V1__PlanCopyRequest *req = (const Hvpb__V1__PlanCopyRequest *)m;
    if (req->size == 0 || req->size > KEEPERS_COPY_MAX) {
        hv_rpc_finish(c, HV_EINVAL, "size: %llu bytes, want 1 to %llu",
                      (unsigned long long)req->size, (unsigned long long)KEEPERS_COPY_MAX);
        return;
    }
    hv_copy_keeper_t k;
    char err[300] = "";
    hv_err rc = hv_driver_copy_plan(s->d, req->job_id, req->worker_id, req->generation, req->commit,
                                    req->size, &k, err, sizeof(err));
    Hvpb__V1__PlanCopyReply rep = HVPB__V1__PLAN_COPY_REPLY__INIT;
    Hvpb__V1__CopyKeeper ck = HVPB__V1__COPY_KEEPER__INIT;
    if (rc == HV_OK) {
        ck.node_id = k.node_id;
        ck.addr = k.addr;
        ck.grant = k.grant;
        ck.expires_ms = k.expires_ms;
        ck.node_name = k.name;
        rep.keeper = &ck;
    } else if (rc == HV_ENOTFOUND) {
        rep.why = err; /* no keeper: the member sends to the head */
    } else {
        hv_rpc_finish(c, rc, "%s", err);
        return;
    }
    hv_rpc_reply(c, &rep.base);
}

static void copy_kept(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_keepers_t *s = ud;
    const Hvpb__V1__CopyKeptRequest *req = (const Hvpb__V1__CopyKeptRequest *)m;
    if (req->size == 0 || req->size > KEEPERS_COPY_MAX || !is_sha256(req->sha256) ||
        req->keeper_node == 0) {
        hv_rpc_finish(c, HV_EINVAL,
                      "CopyKept: want a size of 1 to %llu bytes, a sha256 of 64 lower-case hex "
                      "digits and a keeper node (got %llu bytes, keeper %llu)",
                      (unsigned long long)KEEPERS_COPY_MAX, (unsigned long long)req->size,
                      (unsigned long long)req->keeper_node);
        return;
    }
    char err[300] = "";
    hv_err rc = hv_driver_copy_kept(s->d, req->job_id, req->worker_id, req->generation, req->commit,
                                    req->size, req->sha256, req->keeper_node, err, sizeof(err));
    if (rc != HV_OK) {
        hv_rpc_finish(c, rc, "%s", err);
        return;
    }
    Hvpb__V1__CopyKeptReply rep = HVPB__V1__COPY_KEPT_REPLY__INIT;
    hv_rpc_reply(c, &rep.base);
}

hv_err hv_svc_keepers_create(hv_rpc_server_t *srv, hv_driver_t *d, hv_svc_keepers_t **out) {
    hv_svc_keepers_t *s = hv_calloc(1, sizeof(*s));
    if (s == NULL) {
        return HV_ENOMEM;
    }
    s->d = d;
    const hv_rpc_method_t ms[] = {
        {"/hvpb.v1.Rendezvous/PlanCopy", HV_RPC_UNARY, &hvpb__v1__plan_copy_request__descriptor,
         plan_copy, NULL, s},
        {"/hvpb.v1.Rendezvous/CopyKept", HV_RPC_UNARY, &hvpb__v1__copy_kept_request__descriptor,
         copy_kept, NULL, s},
    };
    hv_err rc = hv_rpc_server_add_n(srv, ms, sizeof(ms) / sizeof(ms[0]));
    if (rc != HV_OK) {
        hv_free(s);
        return rc;
    }
    *out = s;
    return HV_OK;
}

void hv_svc_keepers_destroy(hv_svc_keepers_t *s) { hv_free(s); }
