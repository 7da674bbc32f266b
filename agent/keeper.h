/*
 * keeper: this agent's Keeper service (issue 28 §3, docs/RELIABILITY.md "Copies kept by peers"):
 * the gRPC endpoint where the members of other nodes' jobs put their committed state copies
 * (Keeper.Put, in chunks) and where a resume reads one back (Keeper.Read). The bytes are kept in
 * agent/copykeep.c's bounded memory; every call must show a grant the head made for that one copy
 * (common/copygrant.c, keyed with this agent's node credential), checked here without asking the
 * head. The head's CopyRelease orders (on the Session) drop the copies the index no longer names.
 *
 * It listens on the node's first --addr (the address peers reach it at) on an ephemeral port and
 * the agent announces "host:port" in its Join; TLS with the agent's --cert/--key when it has
 * them. Loop thread only (the rpc engine's callbacks).
 */
#ifndef HV_AGENT_KEEPER_H
#define HV_AGENT_KEEPER_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "hv.pb-c.h"
#include "rpc.h"

typedef struct hv_keeper_s hv_keeper_t;

/* Starts the service on host (port 0: ephemeral) for at most cap bytes of copies. tls NULL: plain
 * text. addr (addrlen bytes) gets "host:port" to announce. Errors: HV_EUNAVAIL (cannot listen;
 * err says why), HV_ENOMEM. */
hv_err hv_keeper_create(hv_rpc_engine_t *e, const char *host, uint64_t cap, const hv_rpc_tls_t *tls,
                        hv_keeper_t **out, char *addr, size_t addrlen, char *err, size_t errlen);
/* The head accepted this agent as node_id with credential cred (copied; the grants' key). Until
 * then every call is refused. */
void hv_keeper_set_identity(hv_keeper_t *k, uint64_t node_id, const char *cred);
/* A CopyRelease order from the head. */
void hv_keeper_release(hv_keeper_t *k, const Hvpb__V1__CopyRelease *r);
/* Stops taking calls (before hv_rpc_engine_destroy). NULL: no-op. */
void hv_keeper_shutdown(hv_keeper_t *k);
/* After the engine is destroyed. NULL: no-op. */
void hv_keeper_destroy(hv_keeper_t *k);

#endif
