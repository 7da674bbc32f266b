/*
 * svc_artifacts: the upload half of the Jobs service (Jobs.StatArtifact, Jobs.Upload): decodes
 * the chunks of an upload and hands them to artifacts.c, which stores and verifies them.
 * Loop thread only.
 */
#ifndef HV_HEAD_SVC_ARTIFACTS_H
#define HV_HEAD_SVC_ARTIFACTS_H

#include "artifacts.h"
#include "err.h"
#include "rpc.h"

/* Registers StatArtifact and Upload on srv; arts is borrowed and must outlive the server. */
hv_err hv_svc_artifacts_register(hv_rpc_server_t *srv, hv_artifacts_t *arts);

#endif
