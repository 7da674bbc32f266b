/*
 * svc_artifacts: the upload half of the Jobs service (Jobs.StatArtifact, Jobs.Upload): decodes
 * the chunks of an upload and hands them to the driver (hv_driver_artifact_write: the store
 * layer's artifacts.c stores and verifies them). Loop thread only.
 */
#ifndef HV_HEAD_SVC_ARTIFACTS_H
#define HV_HEAD_SVC_ARTIFACTS_H

#include "driver.h"
#include "err.h"
#include "rpc.h"

typedef struct hv_svc_artifacts_s hv_svc_artifacts_t;

/* Registers StatArtifact and Upload on srv; d is borrowed and must outlive the server. *out
 * (owned: hv_svc_artifacts_destroy, after the server is shut down) holds what the methods use. */
hv_err hv_svc_artifacts_create(hv_rpc_server_t *srv, hv_driver_t *d, hv_svc_artifacts_t **out);
void hv_svc_artifacts_destroy(hv_svc_artifacts_t *s);

#endif
