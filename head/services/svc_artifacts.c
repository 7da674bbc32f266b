/* svc_artifacts: see svc_artifacts.h. */
#include "svc_artifacts.h"

#include "hv.pb-c.h"
#include "mem.h"
#include "validate.h"
#include "views.h"

struct hv_svc_artifacts_s {
    hv_driver_t *d; /* borrowed */
};

static void jobs_stat_artifact(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_driver_t *d = ((hv_svc_artifacts_t *)ud)->d;
    const Hvpb__V1__StatArtifactRequest *req = (const Hvpb__V1__StatArtifactRequest *)m;
    char err[1024];
    if (hv_validate_stat_artifact(req, err, sizeof(err)) != HV_OK) {
        hv_rpc_finish(c, HV_EINVAL, "%s", err);
        return;
    }
    Hvpb__V1__StatArtifactReply rep = HVPB__V1__STAT_ARTIFACT_REPLY__INIT;
    rep.present = hv_view_artifact_present(d, req->digest);
    rep.max_size = hv_view_artifact_max(d);
    /* hvsubmit skips the upload of an artifact found here and submits next: the use is stored
     * first, so that the history's pruning leaves it alone for its grace until the job that
     * will use it is stored (head/store/history.h). */
    if (rep.present && hv_driver_artifact_touch(d, req->digest, err, sizeof(err)) != HV_OK) {
        hv_rpc_finish_later(c, HV_EUNAVAIL,
                            "%s; nothing was submitted: try again once there is room", err);
        return;
    }
    if (!rep.present) {
        rep.received = hv_view_artifact_partial(d, req->digest);
    }
    hv_rpc_reply(c, &rep.base);
}

static void jobs_upload(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_driver_t *d = ((hv_svc_artifacts_t *)ud)->d;
    const Hvpb__V1__UploadChunk *req = (const Hvpb__V1__UploadChunk *)m;
    Hvpb__V1__UploadReply rep = HVPB__V1__UPLOAD_REPLY__INIT;
    char err[512];
    int complete = 0;
    if (hv_validate_upload(req, err, sizeof(err)) != HV_OK) {
        hv_rpc_finish(c, HV_EINVAL, "%s", err);
        return;
    }
    hv_err rc = hv_driver_artifact_write(d, req->digest, req->total_size, req->offset,
                                         req->data.data, req->data.len, req->last, &rep.received,
                                         &complete, err, sizeof(err));
    if (rc != HV_OK) {
        hv_rpc_finish(c, rc, "%s", err);
        return;
    }
    rep.complete = complete;
    hv_rpc_reply(c, &rep.base);
}

hv_err hv_svc_artifacts_create(hv_rpc_server_t *srv, hv_driver_t *d, hv_svc_artifacts_t **out) {
    hv_svc_artifacts_t *sa = hv_calloc(1, sizeof(*sa));
    if (sa == NULL) {
        return HV_ENOMEM;
    }
    sa->d = d;
    hv_rpc_method_t ms[] = {
        {"/hvpb.v1.Jobs/StatArtifact", HV_RPC_UNARY, &hvpb__v1__stat_artifact_request__descriptor,
         jobs_stat_artifact, NULL, sa},
        {"/hvpb.v1.Jobs/Upload", HV_RPC_UNARY, &hvpb__v1__upload_chunk__descriptor, jobs_upload,
         NULL, sa},
    };
    hv_err rc = hv_rpc_server_add_n(srv, ms, sizeof(ms) / sizeof(ms[0]));
    if (rc != HV_OK) {
        hv_free(sa);
        return rc;
    }
    *out = sa;
    return HV_OK;
}

void hv_svc_artifacts_destroy(hv_svc_artifacts_t *s) { hv_free(s); }
