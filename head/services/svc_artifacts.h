/*
 * svc_artifacts: the upload half of the Jobs service (Jobs.StatArtifact, Jobs.Upload): decodes
 * the chunks of an upload and hands them to artifacts.c, which stores and verifies them.
 * Loop thread only.
 */
#ifndef HV_HEAD_SVC_ARTIFACTS_H
#define HV_HEAD_SVC_ARTIFACTS_H

#include "artifacts.h"
#include "driver.h"
#include "err.h"
#include "rpc.h"

/* Registers StatArtifact and Upload on srv; arts and d are borrowed and must outlive the server
 * (d hears whether StatArtifact's record of a use was stored: hv_driver_store_result). */
hv_err hv_svc_artifacts_register(hv_rpc_server_t *srv, hv_artifacts_t *arts, hv_driver_t *d);

#endif
