/*
 * rpc: hv's one layer over gRPC core's C API. Every binary (hvhead, hvagent, hvsubmit, hvctl)
 * and libhv talk gRPC only through this module; it is the only file that includes grpc headers.
 * Messages are protobuf-c messages (hv.pb-c.h); this layer packs and unpacks them.
 *
 * Two ways to use it:
 *
 *  1. Event-driven (servers and long-lived clients such as hvagent). An hv_rpc_engine owns one
 *     completion queue and one thread that always sits in grpc_completion_queue_next (so
 *     keepalive pings are answered). Completions are handed to a libuv loop through uv_async:
 *     EVERY callback (on_msg, on_done, on_drain) runs on that loop's thread, and every function
 *     taking an hv_rpc_call_t must be called from that thread. The loop thread owns all state.
 *
 *  2. Blocking (CLIs, libhv). hv_rpc_unary() and hv_rpc_bstream_*() use a private completion
 *     queue per call and need no loop. They are thread-safe with respect to each other.
 *
 * Every call has a deadline or, for long-lived streams, keepalive. Message size limits and
 * keepalive settings are the constants below, applied to both ends so they always match.
 * gRPC status codes are mapped to hv_err at this boundary (hv_rpc_status_t keeps the raw code).
 */
#ifndef HV_COMMON_RPC_H
#define HV_COMMON_RPC_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>
#include <uv.h>

#include "err.h"

#define HV_RPC_MAX_MSG (8u << 20)        /* max serialized message, both directions */
#define HV_RPC_KEEPALIVE_MS 10000        /* client and server ping interval */
#define HV_RPC_KEEPALIVE_TIMEOUT_MS 5000 /* a ping unanswered this long closes the transport */
#define HV_RPC_MIN_PING_INTERVAL_MS 5000 /* server accepts pings this often (<= KEEPALIVE_MS) */
#define HV_RPC_SEND_QUEUE_MAX 4096       /* per-call queued messages before hv_rpc_send fails */
#define HV_RPC_SEND_QUEUE_LOW 256        /* on_drain fires when the queue falls below this */
#define HV_RPC_MAX_TOKEN 256 /* longest bearer token a channel sends or a server reads */
#define HV_RPC_HANDSHAKE_TIMEOUT_MS 10000 /* server: a connection not set up by then is closed */

/* The outcome of a call. msg is a human-readable detail ("" on success).
 * Client side, from_server tells who wrote the status: an hv server ended the call itself
 * (hv_rpc_finish; its words are in msg, whatever they say), or not (gRPC core or the transport:
 * a lost connection, a deadline, a failed handshake, or this layer on the client). The server
 * marks its statuses with the trailing metadata "hv-status: final" (or "later"), which neither
 * gRPC nor a transport ever writes. */
typedef struct hv_rpc_status_s {
    hv_err rc;           /* mapped code */
    int grpc_code;       /* raw grpc_status_code */
    char msg[512];       /* detail from the peer or the transport */
    int from_server;     /* client: the hv server sent this status itself */
    int later;           /* client: ...and marked it "try again later" (hv_rpc_finish_later) */
    int explained;       /* client: msg is this layer's account of a transport failure in the
                        user's terms (hv_rpc_explain_transport): shown as it is */
    int never_connected; /* client: the transport could not connect (no server saw the call;
                            read once from gRPC core's status, whatever msg says later;
                            cleared for a failed TLS handshake, which a retry cannot mend) */
    int refused;         /* client: ...and the connection was refused (nothing listens) */
} hv_rpc_status_t;

typedef struct hv_rpc_engine_s hv_rpc_engine_t;
typedef struct hv_rpc_server_s hv_rpc_server_t;
typedef struct hv_rpc_channel_s hv_rpc_channel_t;
typedef struct hv_rpc_call_s hv_rpc_call_t;

typedef enum hv_rpc_kind {
    HV_RPC_UNARY = 0,         /* one request, one reply */
    HV_RPC_SERVER_STREAM = 1, /* one request, many replies */
    HV_RPC_BIDI = 2,          /* many requests, many replies */
} hv_rpc_kind;

/* A message arrived on a call. msg is borrowed: it is freed after the callback returns. */
typedef void (*hv_rpc_msg_cb)(hv_rpc_call_t *call, const ProtobufCMessage *msg, void *ud);
/* The call ended: finished, cancelled by the peer or by us, or failed. Called exactly once.
 * After it returns the call pointer is invalid: drop every reference to it here. */
typedef void (*hv_rpc_done_cb)(hv_rpc_call_t *call, const hv_rpc_status_t *st, void *ud);
/* A send completed and the call's queue holds fewer than HV_RPC_SEND_QUEUE_LOW messages: a
 * producer may send more. Producers that keep a small window check hv_rpc_call_queued(). */
typedef void (*hv_rpc_drain_cb)(hv_rpc_call_t *call, void *ud);

/* ---- engine --------------------------------------------------------------------------------- */

/* Creates the engine (calls grpc_init) and starts its completion-queue thread. loop is borrowed
 * and must outlive the engine. The engine's uv_async handle keeps the loop alive until
 * hv_rpc_engine_destroy. Call from the loop thread. */
hv_err hv_rpc_engine_create(uv_loop_t *loop, hv_rpc_engine_t **out);

/* Cancels every call, stops the completion-queue thread and frees the engine. Servers created on
 * it must have been passed to hv_rpc_server_shutdown first. Runs the loop internally until every
 * call's on_done has run (bounded: 5 s). destroy(NULL) is a no-op. Call from the loop thread,
 * not from inside a callback. */
void hv_rpc_engine_destroy(hv_rpc_engine_t *e);

/* Servers created on e from now on close a connection that has not finished its handshake (TLS,
 * then the client's HTTP/2 SETTINGS) within ms milliseconds: a connection that sends nothing
 * holds a descriptor that long at most. 0 = HV_RPC_HANDSHAKE_TIMEOUT_MS (the default). */
void hv_rpc_engine_set_handshake_timeout(hv_rpc_engine_t *e, uint32_t ms);

/* ---- server --------------------------------------------------------------------------------- */

typedef struct hv_rpc_method_s {
    const char *path; /* "/hvpb.v1.Jobs/Submit" (borrowed, static) */
    hv_rpc_kind kind;
    const ProtobufCMessageDescriptor *req; /* request message type */
    hv_rpc_msg_cb on_msg;                  /* each request (once for unary and server-stream) */
    hv_rpc_done_cb on_done;                /* optional: the call ended */
    void *ud;
} hv_rpc_method_t;

/* Creates a server bound to listen_addr ("0.0.0.0:7000", "127.0.0.1:0" for an ephemeral port).
 * *port_out (optional) receives the bound port. Fails with HV_EUNAVAIL if the address cannot be
 * bound. */
hv_err hv_rpc_server_create(hv_rpc_engine_t *e, const char *listen_addr, hv_rpc_server_t **out,
                            int *port_out);

/* Registers a method; m is copied. Only before hv_rpc_server_start. Unknown paths are answered
 * with UNIMPLEMENTED. */
hv_err hv_rpc_server_add(hv_rpc_server_t *s, const hv_rpc_method_t *m);
/* Registers the n methods of a service (a table); stops at the first error and returns it. */
hv_err hv_rpc_server_add_n(hv_rpc_server_t *s, const hv_rpc_method_t *ms, size_t n);

/* Decides whether a call may go on, from its method path, its first request message (decoded)
 * and its caller (hv_rpc_call_bearer, hv_rpc_call_peer). Anything but HV_OK ends the call with
 * that code and the detail written to msg (msglen bytes) before any handler sees the message;
 * nothing more is read from the call. Runs on the loop thread, once per call. */
typedef hv_err (*hv_rpc_gate_cb)(hv_rpc_call_t *c, const char *path, const ProtobufCMessage *first,
                                 char *msg, size_t msglen, void *ud);
/* Installs the gate for every method of the server (before hv_rpc_server_start). */
void hv_rpc_server_set_gate(hv_rpc_server_t *s, hv_rpc_gate_cb gate, void *ud);

/* Told once per server call when it ends, on the loop thread: the method's path (static; NULL
 * for a path the server does not serve) and the gRPC status code it ended with (cancelled by
 * the peer included). For counting (head/services/metrics.c); it must not touch the call. */
typedef void (*hv_rpc_observe_cb)(const char *path, int grpc_code, void *ud);
void hv_rpc_server_set_observer(hv_rpc_server_t *s, hv_rpc_observe_cb cb, void *ud);
/* Told once per server call when it ends, right after the observer: the call (a key that
 * matches the one the gate saw, and hv_rpc_call_peer; nothing else may be done with it), the
 * method's path (NULL as above), the gRPC status code and its detail ("" for none). For the
 * audit trail (head/services/svc_auth.c). */
typedef void (*hv_rpc_end_cb)(const hv_rpc_call_t *c, const char *path, int grpc_code,
                              const char *detail, void *ud);
void hv_rpc_server_set_end_hook(hv_rpc_server_t *s, hv_rpc_end_cb cb, void *ud);
/* The upper-case name of a gRPC status code ("OK", "UNAUTHENTICATED"); "UNKNOWN" for others. */
const char *hv_rpc_code_name(int grpc_code);

hv_err hv_rpc_server_start(hv_rpc_server_t *s);

/* Stops accepting calls and cancels the calls in progress (their on_done runs on the loop).
 * The server is freed by hv_rpc_engine_destroy. Idempotent. */
void hv_rpc_server_shutdown(hv_rpc_server_t *s);

/* Listener recovery. gRPC core (1.51, Debian 12) stops accepting for good once accept() fails
 * with EMFILE or ENFILE, though the port stays bound. A started server is watched (every 500 ms,
 * on the loop): when gRPC reports such a failure, the server closes its listener and listens
 * again on the same address with a new one (one spare descriptor is kept for that moment). The
 * old listener's connections finish the calls they carry, after a GOAWAY; methods, gate and TLS
 * material are those of s. If the address cannot be bound yet, the watchdog tries again.
 * hv_rpc_server_relisten does it now (tests). Errors: HV_ESTATE (not started, or shutting
 * down), HV_EUNAVAIL (cannot listen yet; retried). */
hv_err hv_rpc_server_relisten(hv_rpc_server_t *s);
/* How many times s listened again. */
unsigned hv_rpc_server_relistens(const hv_rpc_server_t *s);

/* ---- calls (server side, and event-driven client side) -------------------------------------- */

/* Queues one message for sending. msg is borrowed (packed before return). Errors: HV_ECLOSED if
 * the call has ended or was finished, HV_ETOOBIG if the message is over HV_RPC_MAX_MSG or the
 * queue holds HV_RPC_SEND_QUEUE_MAX messages (the producer should wait for on_drain). */
hv_err hv_rpc_send(hv_rpc_call_t *c, const ProtobufCMessage *msg);

/* Server: ends the call with status rc and a formatted detail, after the queued messages.
 * Client: half-closes the sending side (rc and fmt are ignored). Idempotent. */
hv_err hv_rpc_finish(hv_rpc_call_t *c, hv_err rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Server: as hv_rpc_finish, and the status is marked "try again later" (a bound on what the
 * server holds now, not on the request: the same request may succeed later). The client sees
 * hv_rpc_status_t.later. Client: as hv_rpc_finish. */
hv_err hv_rpc_finish_later(hv_rpc_call_t *c, hv_err rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Server unary shortcut: send msg, then finish with HV_OK. */
hv_err hv_rpc_reply(hv_rpc_call_t *c, const ProtobufCMessage *msg);

/* Cancels the call; on_done follows with HV_ECANCELED. Idempotent. */
void hv_rpc_call_cancel(hv_rpc_call_t *c);

void hv_rpc_call_set_data(hv_rpc_call_t *c, void *data);
void *hv_rpc_call_data(const hv_rpc_call_t *c);
void hv_rpc_call_set_drain_cb(hv_rpc_call_t *c, hv_rpc_drain_cb cb);
/* Peer address as gRPC reports it ("ipv4:127.0.0.1:43512"); "" if unknown. Borrowed. */
const char *hv_rpc_call_peer(const hv_rpc_call_t *c);
/* Server: the caller's credential, the value of its "authorization: Bearer <token>" metadata;
 * "" when the call carried none (or a malformed one). Borrowed, valid until on_done. The rpc
 * layer only carries it; the services decide what it allows. */
const char *hv_rpc_call_bearer(const hv_rpc_call_t *c);
/* Messages queued and not yet handed to gRPC. */
size_t hv_rpc_call_queued(const hv_rpc_call_t *c);
/* True until the call ended or was finished by us. */
int hv_rpc_call_open(const hv_rpc_call_t *c);

/* ---- channels (client side) ----------------------------------------------------------------- */

/* Creates a channel to target ("host:port"). Reconnect backoff is shortened (100 ms to 2 s) so
 * agents re-attach quickly after a head restart. Thread-safe. */
hv_err hv_rpc_channel_create(const char *target, hv_rpc_channel_t **out);
void hv_rpc_channel_destroy(hv_rpc_channel_t *ch);
/* Attaches a credential: every call started on ch afterwards carries the metadata
 * "authorization: Bearer <token>". NULL or "" removes it. The token must be printable ASCII
 * without spaces, at most HV_RPC_MAX_TOKEN bytes (else HV_EINVAL). Not thread-safe with calls
 * being started on ch at the same moment: set it before sharing the channel. */
hv_err hv_rpc_channel_set_token(hv_rpc_channel_t *ch, const char *token);

/* ---- TLS ------------------------------------------------------------------------------------ */

/* TLS material, as PEM file paths (borrowed; read when a server or channel is created, so a
 * renewed certificate is picked up at the next start). gRPC core's SSL credentials do the rest.
 *  - server: cert_file and key_file are required. With ca_file, the server asks every client for
 *    a certificate and verifies one that is presented against ca_file; calls to methods whose
 *    path starts with client_cert_prefix are refused with UNAUTHENTICATED unless the peer
 *    presented a verified certificate (mTLS for one service, e.g. "/hvpb.v1.Cluster/": agents).
 *  - client: ca_file is required and the server's certificate must chain to it and name the
 *    target's host (subjectAltName DNS or IP). cert_file + key_file (both or neither) are the
 *    client certificate for mTLS. */
typedef struct hv_rpc_tls_s {
    const char *ca_file;
    const char *cert_file;
    const char *key_file;
    const char *client_cert_prefix; /* server only; NULL = no method needs a client cert */
} hv_rpc_tls_t;

/* hv_rpc_server_create with TLS (tls NULL = plain text, as hv_rpc_server_create). Errors:
 * HV_ENOTFOUND / HV_EIO (a file cannot be read), HV_EINVAL (not PEM, or the key does not match
 * the certificate), HV_EUNAVAIL (the address cannot be bound); err (may be NULL) says which in
 * the user's terms. */
hv_err hv_rpc_server_create_tls(hv_rpc_engine_t *e, const char *listen_addr,
                                const hv_rpc_tls_t *tls, hv_rpc_server_t **out, int *port_out,
                                char *err, size_t errlen);

/* hv_rpc_channel_create with TLS (tls NULL = plain text). Transport failures on the channel's
 * calls are reported in the user's terms (an untrusted or misnamed server certificate, a plain
 * text head) instead of gRPC's detail. Errors as hv_rpc_server_create_tls, with err. */
hv_err hv_rpc_channel_create_tls(const char *target, const hv_rpc_tls_t *tls,
                                 hv_rpc_channel_t **out, char *err, size_t errlen);

/* Checks server material without serving: the files are readable PEM and the private key
 * matches the certificate (gRPC core loads them on a throwaway loopback port). For config
 * validation at start. Errors as hv_rpc_server_create_tls; which_out (optional) receives
 * "cert", "key" or "ca": the file to blame. */
hv_err hv_rpc_tls_check(const hv_rpc_tls_t *tls, const char **which_out, char *err, size_t errlen);

/* 1 when target's host ("HOST:PORT", "[V6]:PORT", "unix:...") is this machine's loopback:
 * localhost, 127.0.0.0/8, ::1, a unix socket. Plain text is hv's default only there. */
int hv_rpc_target_is_loopback(const char *target);

/* Rewrites a transport failure's gRPC detail in st->msg into the user's terms (TLS handshake
 * failed and why, or a plain-text client that met a TLS head), given how the channel was made,
 * and sets st->explained. Done by the blocking calls and client calls of this layer already;
 * exposed for tests. */
void hv_rpc_explain_transport(int tls, const char *ca_file, hv_rpc_status_t *st);

/* ---- event-driven client calls -------------------------------------------------------------- */

typedef struct hv_rpc_client_cbs_s {
    const ProtobufCMessageDescriptor *resp; /* reply message type */
    hv_rpc_msg_cb on_msg;                   /* each reply */
    hv_rpc_done_cb on_done;                 /* required: the final status */
    void *ud;
} hv_rpc_client_cbs_t;

/* Starts a call on the engine's loop. req is the request for unary and server-stream calls, and
 * an optional first message for bidi calls (borrowed). timeout_ms bounds the whole call; 0 means
 * no deadline, allowed only for streams (keepalive then detects a dead peer). *out (optional)
 * receives the call for hv_rpc_send / hv_rpc_finish / hv_rpc_call_cancel, valid until on_done. */
hv_err hv_rpc_call_start(hv_rpc_engine_t *e, hv_rpc_channel_t *ch, const char *path,
                         hv_rpc_kind kind, const ProtobufCMessage *req, uint32_t timeout_ms,
                         const hv_rpc_client_cbs_t *cbs, hv_rpc_call_t **out);

/* ---- blocking client calls ------------------------------------------------------------------ */

/* One unary call, blocking up to timeout_ms (required, > 0). On HV_OK *resp_out is an owned
 * message (free with hv_rpc_msg_free). On failure st (optional) says why; st is also filled on
 * success (cleared first: the caller need not). Fail-fast: an unreachable server gives HV_EUNAVAIL at once. */
hv_err hv_rpc_unary(hv_rpc_channel_t *ch, const char *path, const ProtobufCMessage *req,
                    const ProtobufCMessageDescriptor *resp_desc, uint32_t timeout_ms,
                    ProtobufCMessage **resp_out, hv_rpc_status_t *st);

typedef struct hv_rpc_bstream_s hv_rpc_bstream_t;

/* Opens a server-streaming call. timeout_ms bounds the whole stream; 0 = no deadline. */
hv_err hv_rpc_bstream_open(hv_rpc_channel_t *ch, const char *path, const ProtobufCMessage *req,
                           const ProtobufCMessageDescriptor *resp_desc, uint32_t timeout_ms,
                           hv_rpc_bstream_t **out);

/* Waits up to wait_ms for the next message. HV_OK: *out is an owned message. HV_ECLOSED: the
 * stream ended; st holds the final status (st->rc may be an error). HV_ETIMEDOUT: nothing arrived
 * in time; the stream goes on and the next call keeps waiting for the same message. */
hv_err hv_rpc_bstream_next(hv_rpc_bstream_t *s, uint32_t wait_ms, ProtobufCMessage **out,
                           hv_rpc_status_t *st);

/* Cancels the stream (safe from another thread while one thread waits in next). */
void hv_rpc_bstream_cancel(hv_rpc_bstream_t *s);
/* Cancels if needed, drains and frees. destroy(NULL) is a no-op. */
void hv_rpc_bstream_destroy(hv_rpc_bstream_t *s);

void hv_rpc_msg_free(ProtobufCMessage *m);

/* Unpacks len bytes as a desc message the way every received message is: NULL when the bytes are
 * not a valid message. Stricter than protobuf-c alone: a field number 0 (which protobuf-c keeps
 * as an unknown field when its tag is encoded in more than one byte) is refused, at any depth,
 * since such a message packs into bytes that do not parse again (found by tests/fuzz). Free the
 * result with hv_rpc_msg_free. */
ProtobufCMessage *hv_rpc_unpack(const ProtobufCMessageDescriptor *desc, const uint8_t *data,
                                size_t len);

/* ---- transport failures in plain words ---------------------------------------------------- */

/* gRPC core's own texts for a failed connection ("failed to connect to all addresses; last
 * error: UNKNOWN: ipv4:127.0.0.1:1: Connection refused", "DNS resolution failed for h:7000:
 * C-ares status is not ARES_SUCCESS ...") mean nothing to a user. Writes what happened in plain
 * words into buf and returns it: "connection refused", "cannot resolve host 'NAME'" (NAME from
 * target, "HOST:PORT" or "[V6]:PORT"), "no route to host", "network is unreachable", "timed out
 * connecting", "the connection was closed", "the secure (TLS) handshake failed". Returns NULL,
 * with buf untouched, when detail is not one of gRPC's transport texts (a message the peer wrote
 * itself, shown as it is). */
const char *hv_rpc_plain_transport_error(const char *detail, const char *target, char *buf,
                                         size_t len);

/* A failed call's transport failure in the user's terms, into buf: st->msg as it is when this
 * layer explained it already (st->explained), else hv_rpc_plain_transport_error's words.
 * NULL when neither applies (a message the peer wrote itself). */
const char *hv_rpc_transport_words(const hv_rpc_status_t *st, const char *target, char *buf,
                                   size_t len);

/* ---- status mapping (exposed for tests and messages) ---------------------------------------- */
hv_err hv__rpc_err_from_grpc(int grpc_code);
int hv__rpc_grpc_from_err(hv_err rc);

#endif
