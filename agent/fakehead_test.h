/*
 * fakehead_test: what the agent's session_test and e2e_test share of their fake head: an rpc
 * server on the test's loop at 127.0.0.1 (any free port) that answers Cluster/Join itself (the
 * token "tok" joins as node 5 with a 100 ms heartbeat; another token is refused, and so is every
 * join while the test says the head is unavailable) and hands Cluster/Session, and any further
 * method, to the test's own callbacks. Test-only; the check macros come from agent_test.h.
 */
#ifndef HV_AGENT_FAKEHEAD_TEST_H
#define HV_AGENT_FAKEHEAD_TEST_H

#include <stdio.h>
#include <string.h>

#include "agent_test.h"
#include "hv.pb-c.h"
#include "rpc.h"

/* How the fake head answers Join, and what it saw. Owned by the test (static storage). */
typedef struct fake_join_s {
    const char *cluster; // the cluster's name, in the reply and in a refusal (borrowed)
    uint32_t lease_ms;   // the lease the reply grants
    int unavailable;     // while set, every Join gets UNAVAILABLE
    int joins;           // Join calls received
} fake_join_t;

static inline void fake_join_cb(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    const Hvpb__V1__JoinRequest *r = (const Hvpb__V1__JoinRequest *)m;
    fake_join_t *fj = ud;
    fj->joins++;
    if (fj->unavailable) {
        hv_rpc_finish(c, HV_EUNAVAIL, "the head is restarting");
        return;
    }
    if (strcmp(r->token, "tok") != 0) {
        hv_rpc_finish(c, HV_EPERM, "wrong join token for cluster '%s'", fj->cluster);
        return;
    }
    Hvpb__V1__JoinReply rep = HVPB__V1__JOIN_REPLY__INIT;
    rep.node_id = 5;
    rep.heartbeat_ms = 100;
    rep.lease_ms = fj->lease_ms;
    rep.cluster_name = (char *)fj->cluster;
    hv_rpc_reply(c, &rep.base);
}

/* Starts the fake head on loop: *eng and *srv serve Join from fj, Session through on_msg and
 * on_done, and the n methods of more (may be NULL); target (len bytes) gets "127.0.0.1:PORT". */
static inline void fake_head_start(uv_loop_t *loop, fake_join_t *fj, hv_rpc_msg_cb on_msg,
                                   hv_rpc_done_cb on_done, const hv_rpc_method_t *more, size_t n,
                                   hv_rpc_engine_t **eng, hv_rpc_server_t **srv, char *target,
                                   size_t len) {
    int port = 0;
    CHECK_RC(hv_rpc_engine_create(loop, eng), HV_OK);
    CHECK_RC(hv_rpc_server_create(*eng, "127.0.0.1:0", srv, &port), HV_OK);
    hv_rpc_method_t mj = {.path = "/hvpb.v1.Cluster/Join",
                          .kind = HV_RPC_UNARY,
                          .req = &hvpb__v1__join_request__descriptor,
                          .on_msg = fake_join_cb,
                          .ud = fj};
    hv_rpc_method_t ms = {.path = "/hvpb.v1.Cluster/Session",
                          .kind = HV_RPC_BIDI,
                          .req = &hvpb__v1__agent_msg__descriptor,
                          .on_msg = on_msg,
                          .on_done = on_done};
    CHECK_RC(hv_rpc_server_add(*srv, &mj), HV_OK);
    CHECK_RC(hv_rpc_server_add(*srv, &ms), HV_OK);
    for (size_t i = 0; i < n; i++) {
        CHECK_RC(hv_rpc_server_add(*srv, &more[i]), HV_OK);
    }
    CHECK_RC(hv_rpc_server_start(*srv), HV_OK);
    snprintf(target, len, "127.0.0.1:%d", port);
}

#endif
