/*
 * svc_keepers: the Rendezvous methods of the copies kept by peers (issue 28 §3, docs/
 * RELIABILITY.md "Copies kept by peers"). PlanCopy tells rank 0 of a job's round which peer agent
 * keeps its committed copy, with the grant that opens that agent's Keeper service for that one
 * copy; CopyKept records the keeper's ack (the driver stores the index first, then counts on the
 * copy and tells the keeper that older copies may go). The bytes go from the member to the keeper
 * directly, never through the head. Every decision is the driver's. Loop thread only.
 */
#ifndef HV_HEAD_SVC_KEEPERS_H
#define HV_HEAD_SVC_KEEPERS_H

#include "driver.h"
#include "err.h"
#include "rpc.h"

typedef struct hv_svc_keepers_s hv_svc_keepers_t;

/* Registers PlanCopy and CopyKept on srv; d is borrowed. */
hv_err hv_svc_keepers_create(hv_rpc_server_t *srv, hv_driver_t *d, hv_svc_keepers_t **out);
/* NULL is a no-op. */
void hv_svc_keepers_destroy(hv_svc_keepers_t *s);

#endif
