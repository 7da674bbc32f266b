/*
 * svc_auth: the one place where every call to the head is authenticated. It installs a gate on
 * the gRPC server (hv_rpc_server_set_gate): before any service sees a call's first message, the
 * gate finds the method's rule (auth.c's table; an unknown method is refused), reads the ids the
 * rule needs from the message (the job and worker of a Rendezvous request, the node and
 * incarnation of a Session hello) and lets auth.c decide. A refusal is UNAUTHENTICATED or
 * PERMISSION_DENIED with auth.c's message and a WARN log line naming the peer and the method
 * (never the credential). Cluster.Join is left to svc_cluster (the join token is in its body).
 */
#ifndef HV_HEAD_SVC_AUTH_H
#define HV_HEAD_SVC_AUTH_H

#include "auth.h"
#include "driver.h"
#include "rpc.h"

typedef struct hv_svc_auth_s hv_svc_auth_t;

/* Ends a node's Session (main.c routes it to svc_cluster). */
typedef void (*hv_svc_auth_drop_cb)(void *ud, uint64_t node_id);

/* Installs the gate on srv and registers Jobs/RevokeNode (hvctl node revoke NODE: revokes the
 * node's current credential, stored in the data dir first, then ends its Session; the agent's
 * re-join is refused and it exits, its workers with it). a and d are borrowed and must outlive
 * the server. */
hv_err hv_svc_auth_create(hv_rpc_server_t *srv, hv_auth_t *a, hv_driver_t *d,
                          hv_svc_auth_drop_cb drop, void *ud, hv_svc_auth_t **out);
void hv_svc_auth_destroy(hv_svc_auth_t *s);

#endif
