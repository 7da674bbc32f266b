/*
 * cli_rpc: the RPC side hvsubmit and hvctl share: turning a failed call into one clear line on
 * stderr ("cannot reach the head at ...", the head's own message otherwise) and picking the exit
 * status that goes with it; and hv_cli_rpc_unary, the blocking unary call both tools make
 * (common/rpc.h's, plus a bounded retry while no connection could be made). Stateless and
 * reentrant.
 */
#ifndef HV_CLI_CLI_RPC_H
#define HV_CLI_CLI_RPC_H

#include "rpc.h"

/* gRPC status codes the tools tell apart (grpc_status_code values, which are part of the gRPC
 * protocol; grpc headers stay inside common/rpc.c). */
enum {
    HV_CLI_GRPC_CANCELLED = 1,
    HV_CLI_GRPC_INVALID_ARGUMENT = 3,
    HV_CLI_GRPC_DEADLINE_EXCEEDED = 4,
    HV_CLI_GRPC_NOT_FOUND = 5,
    HV_CLI_GRPC_RESOURCE_EXHAUSTED = 8,
    HV_CLI_GRPC_FAILED_PRECONDITION = 9,
    HV_CLI_GRPC_OUT_OF_RANGE = 11,
    HV_CLI_GRPC_UNIMPLEMENTED = 12,
    HV_CLI_GRPC_UNAVAILABLE = 14,
};

/* hv_rpc_unary, riding over a connection that could not be made on the first tries (a head
 * under load, a listener that is just starting): when the call failed with UNAVAILABLE before a
 * connection existed ("failed to connect"), the request never left this process, so it is
 * retried, even for calls that are not idempotent, for up to HV_CLI_CONNECT_RETRY_MS after a
 * refused connection (nobody listens there, most likely) and up to HV_CLI_CONNECT_SLOW_MS after
 * any other connect failure (a handshake that did not finish in time: gRPC gives the first
 * attempts only a fraction of a second, too little for a loaded machine). Any other outcome is
 * returned as is. Same arguments and ownership as hv_rpc_unary. */
#define HV_CLI_CONNECT_RETRY_MS 1500u
#define HV_CLI_CONNECT_SLOW_MS 8000u
hv_err hv_cli_rpc_unary(hv_rpc_channel_t *ch, const char *path, const ProtobufCMessage *req,
                        const ProtobufCMessageDescriptor *resp_desc, uint32_t timeout_ms,
                        ProtobufCMessage **resp_out, hv_rpc_status_t *st);

/* The retry rule of hv_cli_rpc_unary for any call: returns 1, after a pause, when the call that
 * ended with st never reached the head and there is time left in the window that started at
 * start_ms (hv_now_ms()); else 0. *pause_ms (start it at 100) grows with each retry. */
int hv_cli_rpc_connect_retry(const hv_rpc_status_t *st, uint64_t start_ms, uint32_t *pause_ms);

/* True when the call failed with UNAVAILABLE: the head could not be reached, went away, or
 * said it cannot serve right now. The caller may retry. */
int hv_cli_rpc_unreachable(const hv_rpc_status_t *st);

/* True when st's detail comes from gRPC's transport ("failed to connect to all addresses",
 * "Socket closed", ...) or is empty, rather than being a message the head wrote. The head also
 * answers UNAVAILABLE itself (e.g. "no node has joined the cluster"); that text is shown as is. */
int hv_cli_rpc_transport_detail(const hv_rpc_status_t *st);

/* True when st carries a message the head wrote: not empty, and not the error text gRPC core
 * puts there when the head answered with a status code and no message ("... Error received
 * from peer ... {grpc_message:"", grpc_status:5, ...}"). */
int hv_cli_rpc_head_message(const hv_rpc_status_t *st);

/* Prints why a call failed to stderr as "prog: ..." and returns the exit status to use (1).
 *   unreachable:  "prog: cannot reach the head at HEAD: <detail>" (UNAVAILABLE from the
 *                 transport; the head's own UNAVAILABLE messages are shown as they are)
 *   deadline:     "prog: the head at HEAD did not answer WHAT within N s"
 *   otherwise:    "prog: <the head's message>" (or "prog: WHAT failed: <error>" when it gave none,
 *                 see hv_cli_rpc_head_message)
 * prog, head, what and st are borrowed. */
int hv_cli_rpc_report(const char *prog, const char *head, const char *what,
                      const hv_rpc_status_t *st, uint32_t timeout_ms);

#endif
