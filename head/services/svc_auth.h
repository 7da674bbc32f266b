/*
 * svc_auth: the one place where every call to the head is authenticated. It installs a gate on
 * the gRPC server (hv_rpc_server_set_gate): before any service sees a call's first message, the
 * gate finds the method's rule (auth.c's table; an unknown method is refused), reads the ids the
 * rule needs from the message (the job and worker of a Rendezvous request, the node and
 * incarnation of a Session hello) and lets auth.c decide. A refusal is UNAUTHENTICATED or
 * PERMISSION_DENIED with auth.c's message and a WARN log line naming the peer and the method
 * (never the credential). Cluster.Join is left to svc_cluster (the join token is in its body).
 *
 * The audit trail: every call that changes something (auth.h: hv_auth_audited) and every
 * refused call becomes one row of the trail (hv_driver_audit; core/records.h: hv_audit_row_t):
 * the gate notes who
 * (kind and id, never a secret), from where, the method and its target; the server's end hook
 * (rpc.h: hv_rpc_server_set_end_hook) adds the result. Reads and the rendezvous are not written
 * unless refused, so the hot path costs nothing. Jobs.ListAudit reads it (hvctl audit).
 *
 * Join tokens: Jobs.CreateJoinToken, ListJoinTokens, RevokeJoinToken (hvctl token ...), for any
 * client token; the secret is in the create reply only (svc_cluster checks a Join's token).
 */
#ifndef HV_HEAD_SVC_AUTH_H
#define HV_HEAD_SVC_AUTH_H

#include "auth.h"
#include "driver.h"
#include "rpc.h"

typedef struct hv_svc_auth_s hv_svc_auth_t;

/* Installs the gate on srv and registers Jobs/RevokeNode (hvctl node revoke NODE: revokes the
 * node's current credential through the driver, stored in the state database first (a store
 * that fails answers UNAVAILABLE, "try again later", and nothing is revoked), then ends its
 * Session; the agent's re-join is refused and it exits, its workers with it). a and d are
 * borrowed and must outlive the server. */
hv_err hv_svc_auth_create(hv_rpc_server_t *srv, hv_auth_t *a, hv_driver_t *d, hv_svc_auth_t **out);
/* The configured join token, to name it "static" in the trail (borrowed; may be NULL). Before
 * the server starts. */
void hv_svc_auth_set_static_token(hv_svc_auth_t *s, const char *static_token);
/* fn(peer, ud) is called with gRPC's form of the caller's address for each call let in with a
 * node credential (main.c notes it as a node's address for the connection gate, conngate.h).
 * Before the server starts. */
void hv_svc_auth_set_node_hook(hv_svc_auth_t *s, void (*fn)(const char *peer, void *ud), void *ud);
void hv_svc_auth_destroy(hv_svc_auth_t *s);

#endif
