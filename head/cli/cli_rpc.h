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
    HV_CLI_GRPC_UNKNOWN = 2,
    HV_CLI_GRPC_INVALID_ARGUMENT = 3,
    HV_CLI_GRPC_DEADLINE_EXCEEDED = 4,
    HV_CLI_GRPC_NOT_FOUND = 5,
    HV_CLI_GRPC_ALREADY_EXISTS = 6,
    HV_CLI_GRPC_PERMISSION_DENIED = 7,
    HV_CLI_GRPC_RESOURCE_EXHAUSTED = 8,
    HV_CLI_GRPC_FAILED_PRECONDITION = 9,
    HV_CLI_GRPC_OUT_OF_RANGE = 11,
    HV_CLI_GRPC_UNIMPLEMENTED = 12,
    HV_CLI_GRPC_INTERNAL = 13,
    HV_CLI_GRPC_UNAVAILABLE = 14,
    HV_CLI_GRPC_UNAUTHENTICATED = 16,
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

/* True when a Watch stream that ended with st before its job's end lost the head rather than
 * being refused: it closed without a status, the head went away or is shutting down, the
 * connection broke, was cancelled or timed out. hvsubmit and hvctl logs --follow reconnect then
 * (NOT_FOUND and other refusals are reported instead). */
int hv_cli_rpc_stream_lost(const hv_rpc_status_t *st);

/* True when st's detail comes from gRPC's transport ("failed to connect to all addresses",
 * "Socket closed", ...) or is empty, rather than being a message the head wrote. The head also
 * answers UNAVAILABLE itself (e.g. "no node has joined the cluster"); that text is shown as is.
 * A status the head marked as its own (hv_rpc_status_t.from_server) is never the transport's,
 * whatever its words ("tls" in a data directory's path); an unmarked one (gRPC core's, or from
 * a head older than the mark) is told by gRPC core's words. */
int hv_cli_rpc_transport_detail(const hv_rpc_status_t *st);

/* True when st carries a message the head wrote: not empty, and marked as the head's own (or,
 * unmarked, not the error text gRPC core puts there when the head answered with a status code
 * and no message: "... Error received from peer ... {grpc_message:"", grpc_status:5, ...}"). */
int hv_cli_rpc_head_message(const hv_rpc_status_t *st);

/* Reads the client token (opt = --token-file, else $HV_TOKEN_FILE, else
 * HV_CLI_DEFAULT_TOKEN_FILE of cli_common.h; one word, surrounding whitespace trimmed) and attaches it to ch, so
 * every call carries it. On failure err says which file and why (never the value): HV_ENOTFOUND
 * (the default file is missing: the message says how to give one), HV_EIO, HV_EINVAL (empty or
 * not one word). A file readable by others is used, with a warning on stderr. */
hv_err hv_cli_token_attach(hv_rpc_channel_t *ch, const char *opt, const char *prog, char *err,
                           size_t errlen);

/* The exit status (cli_common.h) for a call that failed with st: transport failures
 * (UNAVAILABLE from the transport) 69; UNAUTHENTICATED / PERMISSION_DENIED 77; NOT_FOUND 66;
 * INVALID_ARGUMENT / FAILED_PRECONDITION / OUT_OF_RANGE / ALREADY_EXISTS / RESOURCE_EXHAUSTED
 * (over a limit: more slots than the cluster has, an upload over max_upload) 65;
 * DEADLINE_EXCEEDED, the head's own UNAVAILABLE answers ("no node has joined", a full disk)
 * and any status the head marked "try again later" (too many Watch streams open now) 75;
 * anything else 70. */
int hv_cli_rpc_exit_code(const hv_rpc_status_t *st);

/* Writes why the transport failed in the user's terms into buf, for "cannot reach the head at
 * HEAD: ...": "connection refused", "cannot resolve host 'NAME'",
 * "no route to host", "the connection was closed", "timed out"; "no connection could be made"
 * when gRPC's text says nothing more precise. gRPC's own wording never reaches the user. */
const char *hv_cli_rpc_transport_words(const hv_rpc_status_t *st, const char *head, char *buf,
                                       size_t len);

/* Prints why a call failed to stderr as "prog: ..." and returns the exit status to use
 * (hv_cli_rpc_exit_code).
 *   unreachable:  "prog: cannot reach the head at HEAD: <hv_cli_rpc_transport_words>", with
 *                 " (is hvhead running there?)" after "connection refused" (UNAVAILABLE from the transport; the head's own UNAVAILABLE messages are shown
 *                 as they are)
 *   deadline:     "prog: the head at HEAD did not answer WHAT within N s"
 *   refused:      "prog: the head refused WHAT: <its message>" (UNAUTHENTICATED,
 *                 PERMISSION_DENIED)
 *   otherwise:    "prog: <the head's message>" (or "prog: WHAT failed: <error>" when it gave none,
 *                 see hv_cli_rpc_head_message)
 * prog, head, what and st are borrowed. */
int hv_cli_rpc_report(const char *prog, const char *head, const char *what,
                      const hv_rpc_status_t *st, uint32_t timeout_ms);

/* Opens the channel to head as the command line and environment say: TLS verified against
 * ca_opt (else $HV_CA_FILE) when one is given; else plain text, which beyond loopback needs
 * insecure_opt (else HV_INSECURE=1) and then warns on stderr. On failure prints one line
 * ("PROG: ...") and returns the exit status (HV_CLI_EXIT_USAGE for a bad CA file or a refused
 * plain text); HV_CLI_EXIT_OK with *out set otherwise. */
int hv_cli_rpc_open(const char *prog, const char *head, const char *ca_opt, int insecure_opt,
                    hv_rpc_channel_t **out);

#endif
