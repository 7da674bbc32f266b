/*
 * rpc: the gRPC-core layer (see rpc.h for the contract). This is the only file that includes grpc
 * headers.
 *
 * Event-driven half. The engine's thread sits in grpc_completion_queue_next and does nothing but
 * move completed tags (rpc_op_t, embedded in calls and servers) onto a mutex-protected inbox and
 * wake the loop with uv_async_send. The loop thread drains the whole inbox (wakeups coalesce) and
 * owns every call's state, so call fields need no locks. gRPC allows one batch of each kind in
 * flight per call: a call has one op for receiving, one for sending (fed from a queue), one for
 * the close/status batch and one for the client's initial batch. A call is freed when its
 * on_done has run and none of its ops is in flight.
 *
 * Blocking half. Each hv_rpc_unary uses a private pluck queue; each hv_rpc_bstream a private
 * next queue. The waiting thread therefore polls gRPC itself, which keeps keepalive working.
 */
#include "rpc.h"

#include <assert.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/log.h>
#include <grpc/support/time.h>

#include "log.h"
#include "mem.h"
#include "util.h"

#define RPC_BEARER "Bearer "
#define RPC_AUTH_KEY "authorization"
#define RPC_PREPOSTED_CALLS 16   /* server request_call slots kept posted */
#define RPC_WATCHDOG_MS 500      /* how often an engine looks for a dead listener */
#define RPC_RELISTEN_RETRY_MS 50 /* how often it tries to bind again while the port is busy */

typedef enum op_kind {
    OP_NEW_CALL, /* server: request_call completed */
    OP_RECV,     /* RECV_MESSAGE */
    OP_SEND,     /* SEND_MESSAGE (and maybe status / close) */
    OP_CLOSE,    /* server RECV_CLOSE_ON_SERVER, client RECV_STATUS_ON_CLIENT */
    OP_START,    /* client initial batch */
    OP_SHUTDOWN, /* server shutdown notification */
} op_kind;

typedef struct rpc_op_s {
    struct rpc_op_s *next; /* inbox link (guarded by engine mu) */
    op_kind kind;
    int success;
    hv_rpc_call_t *call;
    hv_rpc_server_t *server;
    struct rpc_retired_s *retired; /* OP_SHUTDOWN of a replaced grpc_server */
} rpc_op_t;

/* A grpc_server replaced by hv_rpc_server_relisten: its listener is closed and it finishes the
 * calls it still carries; destroyed when its shutdown completes. */
typedef struct rpc_retired_s {
    grpc_server *server;
    rpc_op_t op_shutdown;
    int shutdown_done;
    struct rpc_retired_s *next;
} rpc_retired_t;

struct hv_rpc_call_s {
    hv_rpc_engine_t *eng;
    hv_rpc_server_t *srv; /* server calls: owning server; NULL for clients */
    grpc_call *call;
    int is_client;
    hv_rpc_kind kind;
    const hv_rpc_method_t *method; /* server: bound method (NULL = unimplemented) */
    const ProtobufCMessageDescriptor *recv_desc;
    hv_rpc_msg_cb on_msg;
    hv_rpc_done_cb on_done;
    hv_rpc_drain_cb on_drain;
    void *ud;
    void *data; /* user data (hv_rpc_call_set_data) */
    /* server: request_call outputs */
    grpc_call_details details;
    grpc_metadata_array request_md;
    int cancelled; /* RECV_CLOSE_ON_SERVER result */
    /* client: status outputs */
    grpc_metadata_array initial_md;
    grpc_metadata_array trailing_md;
    grpc_status_code status;
    grpc_slice status_details;
    const char *error_string;
    /* receiving */
    grpc_byte_buffer *recv_buf;
    int recv_pending;
    int recv_eof;
    int msgs_received;
    /* sending */
    grpc_byte_buffer **q; /* ring of packed messages */
    size_t q_head, q_len, q_cap;
    grpc_byte_buffer *sending; /* in flight */
    int send_pending;
    int send_included_final; /* the in-flight batch carries status / close */
    int initial_md_sent;
    int finish_requested;
    int final_sent;
    hv_err finish_rc;
    grpc_slice finish_details;
    int finish_details_set;
    int finish_later;        /* server: the status is marked "later" (hv_rpc_finish_later) */
    grpc_metadata finish_md; /* server: the status's mark, "hv-status" (static slices) */
    /* lifecycle */
    int open;       /* user may still send */
    int close_done; /* OP_CLOSE completed */
    int done_called;
    int ops_outstanding;
    hv_rpc_status_t st;
    char peer[280];
    int chan_tls; /* client: the channel uses TLS (for hv_rpc_explain_transport) */
    char bearer[HV_RPC_MAX_TOKEN + 1]; /* server: the caller's bearer token, "" if none */
    rpc_op_t op_recv, op_send, op_close, op_start, op_new;
    struct hv_rpc_call_s *prev, *next; /* engine's live-call list */
};

struct hv_rpc_server_s {
    hv_rpc_engine_t *eng;
    grpc_server *server;
    hv_rpc_method_t *methods;
    size_t n_methods;
    hv_rpc_gate_cb gate; /* optional: decides on each call's first message */
    void *gate_ud;
    hv_rpc_observe_cb observe; /* optional: told of each call's end */
    void *observe_ud;
    hv_rpc_end_cb end_hook; /* optional: told of each call's end, with the call */
    void *end_ud;
    int started;
    int shutting_down;
    int shutdown_done;
    rpc_op_t op_shutdown;
    char *client_cert_prefix; /* TLS: methods under it need a verified client certificate */
    /* What it takes to listen again on the same address (hv_rpc_server_relisten); owned. */
    char *bound_addr;                  /* listen address with the bound port ("127.0.0.1:43211") */
    char *tls_ca, *tls_cert, *tls_key; /* TLS material paths; cert NULL = plain text */
    uint32_t handshake_timeout_ms;
    rpc_retired_t *retired; /* replaced grpc_servers still finishing their calls */
    unsigned relistens;     /* listeners re-created so far */
    unsigned listen_fails;  /* failed attempts since the listener was retired */
    struct hv_rpc_server_s *next;
};

struct hv_rpc_engine_s {
    uv_loop_t *loop;
    uv_async_t async;
    grpc_completion_queue *cq;
    pthread_t thread;
    pthread_mutex_t mu;
    rpc_op_t *inbox_head, *inbox_tail; /* guarded by mu */
    hv_rpc_server_t *servers;
    hv_rpc_call_t *calls; /* every live call (server and client) */
    size_t n_calls;
    int destroying;
    uint32_t handshake_timeout_ms; /* for servers created from now on */
    uv_timer_t watchdog;           /* looks for a listener gRPC gave up on */
    int watchdog_on;
    int reserve_fd; /* /dev/null held open, closed to make room when descriptors run out */
};

struct hv_rpc_channel_s {
    grpc_channel *ch;
    char target[256];
    int tls;       /* made by hv_rpc_channel_create_tls with TLS */
    char *ca_file; /* TLS: the CA file, for messages; owned */
    char auth[HV_RPC_MAX_TOKEN + sizeof(RPC_BEARER)]; /* "Bearer <token>", "" = none */
};

static void rpc_quiet_grpc(void);

/* ---- status mapping ------------------------------------------------------------------------- */

hv_err hv__rpc_err_from_grpc(int code) {
    switch (code) {
    case GRPC_STATUS_OK:
        return HV_OK;
    case GRPC_STATUS_CANCELLED:
        return HV_ECANCELED;
    case GRPC_STATUS_INVALID_ARGUMENT:
    case GRPC_STATUS_OUT_OF_RANGE:
        return HV_EINVAL;
    case GRPC_STATUS_DEADLINE_EXCEEDED:
        return HV_ETIMEDOUT;
    case GRPC_STATUS_NOT_FOUND:
        return HV_ENOTFOUND;
    case GRPC_STATUS_ALREADY_EXISTS:
        return HV_EEXIST;
    case GRPC_STATUS_PERMISSION_DENIED:
        return HV_EPERM;
    case GRPC_STATUS_UNAUTHENTICATED:
        return HV_EAUTH;
    case GRPC_STATUS_RESOURCE_EXHAUSTED:
        return HV_ETOOBIG;
    case GRPC_STATUS_FAILED_PRECONDITION:
        return HV_ESTATE;
    case GRPC_STATUS_ABORTED:
        return HV_ERESET;
    case GRPC_STATUS_UNIMPLEMENTED:
        return HV_ENOTSUP;
    case GRPC_STATUS_INTERNAL:
        return HV_EINTERNAL;
    case GRPC_STATUS_UNAVAILABLE:
        return HV_EUNAVAIL;
    case GRPC_STATUS_DATA_LOSS:
        return HV_ECORRUPT;
    default:
        return HV_EPEER;
    }
}

int hv__rpc_grpc_from_err(hv_err rc) {
    switch (rc) {
    case HV_OK:
        return GRPC_STATUS_OK;
    case HV_EINVAL:
    case HV_EPROTO: /* the peer (a client, on the server side) broke the protocol */
        return GRPC_STATUS_INVALID_ARGUMENT;
    case HV_ENOMEM:
    case HV_ETOOBIG:
        return GRPC_STATUS_RESOURCE_EXHAUSTED;
    case HV_ETIMEDOUT:
        return GRPC_STATUS_DEADLINE_EXCEEDED;
    case HV_ECANCELED:
        return GRPC_STATUS_CANCELLED;
    case HV_ENOTFOUND:
        return GRPC_STATUS_NOT_FOUND;
    case HV_EEXIST:
        return GRPC_STATUS_ALREADY_EXISTS;
    case HV_EPERM:
        return GRPC_STATUS_PERMISSION_DENIED;
    case HV_EAUTH:
        return GRPC_STATUS_UNAUTHENTICATED;
    case HV_ESTATE:
        return GRPC_STATUS_FAILED_PRECONDITION;
    case HV_ERESET:
        return GRPC_STATUS_ABORTED;
    case HV_ENOTSUP:
        return GRPC_STATUS_UNIMPLEMENTED;
    case HV_EUNAVAIL:
    case HV_ECLOSED:
        return GRPC_STATUS_UNAVAILABLE;
    case HV_ECORRUPT:
        return GRPC_STATUS_DATA_LOSS;
    case HV_EINTERNAL:
    case HV_EIO: /* the server's disk or file system failed: not the client's doing */
        return GRPC_STATUS_INTERNAL;
    default:
        return GRPC_STATUS_UNKNOWN;
    }
}

/* The trailing metadata key with which an hv server marks the statuses it writes itself, and
 * its two values: gRPC core and transports never send it (see hv_rpc_status_t). */
#define RPC_MARK_KEY "hv-status"
#define RPC_MARK_FINAL "final"
#define RPC_MARK_LATER "later"

static void status_set(hv_rpc_status_t *st, int code, const char *msg, size_t msglen) {
    st->grpc_code = code;
    st->rc = hv__rpc_err_from_grpc(code);
    st->from_server = 0;
    st->later = 0;
    st->explained = 0;
    st->never_connected = 0;
    st->refused = 0;
    if (msglen >= sizeof(st->msg)) {
        msglen = sizeof(st->msg) - 1;
    }
    memcpy(st->msg, msg ? msg : "", msg ? msglen : 0);
    st->msg[msg ? msglen : 0] = '\0';
}

static int slice_is(grpc_slice s, const char *text) {
    size_t n = strlen(text);
    return GRPC_SLICE_LENGTH(s) == n && memcmp(GRPC_SLICE_START_PTR(s), text, n) == 0;
}

/* A client call's status, with the server's mark read from its trailing metadata. */
static void status_from_client(hv_rpc_status_t *st, grpc_status_code code, grpc_slice details,
                               const char *error_string, const grpc_metadata_array *trailing) {
    int from_server = 0, later = 0;
    for (size_t i = 0; i < trailing->count; i++) {
        if (slice_is(trailing->metadata[i].key, RPC_MARK_KEY)) {
            from_server = 1;
            later = slice_is(trailing->metadata[i].value, RPC_MARK_LATER);
        }
    }
    size_t len = GRPC_SLICE_LENGTH(details);
    if (len == 0 && code != GRPC_STATUS_OK && error_string != NULL && !from_server) {
        status_set(st, code, error_string, strlen(error_string));
    } else {
        /* The server's own status keeps its own words, "" for none (gRPC core's error string
         * would describe the status, not say anything the server wrote). */
        status_set(st, code, (const char *)GRPC_SLICE_START_PTR(details), len);
    }
    st->from_server = from_server;
    st->later = later;
    /* gRPC core's own words are the only account of why its transport failed: read here, once,
     * into fields, so that what this layer then writes in msg (hv_rpc_explain_transport) is for
     * people only. */
    if (!from_server && code == GRPC_STATUS_UNAVAILABLE) {
        st->never_connected = strstr(st->msg, "failed to connect") != NULL;
        st->refused = strcasestr(st->msg, "connection refused") != NULL;
    }
}

/* ---- packing -------------------------------------------------------------------------------- */

static hv_err msg_pack(const ProtobufCMessage *msg, grpc_byte_buffer **out) {
    size_t len = protobuf_c_message_get_packed_size(msg);
    if (len > HV_RPC_MAX_MSG) {
        return HV_ETOOBIG;
    }
    grpc_slice s = grpc_slice_malloc(len);
    protobuf_c_message_pack(msg, GRPC_SLICE_START_PTR(s));
    *out = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    return *out ? HV_OK : HV_ENOMEM;
}

/* 1 when m and every message inside it hold no unknown field numbered 0. */
static int msg_tags_valid(const ProtobufCMessage *m, int depth) {
    if (depth > 64) {
        return 0;
    }
    for (unsigned i = 0; i < m->n_unknown_fields; i++) {
        if (m->unknown_fields[i].tag == 0) {
            return 0;
        }
    }
    const ProtobufCMessageDescriptor *d = m->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->type != PROTOBUF_C_TYPE_MESSAGE) {
            continue;
        }
        const char *base = (const char *)m;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)(base + f->quantifier_offset);
            ProtobufCMessage *const *arr = *(ProtobufCMessage *const *const *)(base + f->offset);
            for (size_t k = 0; k < n; k++) {
                if (arr[k] != NULL && !msg_tags_valid(arr[k], depth + 1)) {
                    return 0;
                }
            }
            continue;
        }
        if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
            *(const uint32_t *)(base + f->quantifier_offset) != f->id) {
            continue; /* another member of the oneof is set */
        }
        const ProtobufCMessage *sub = *(const ProtobufCMessage *const *)(base + f->offset);
        if (sub != NULL && !msg_tags_valid(sub, depth + 1)) {
            return 0;
        }
    }
    return 1;
}

ProtobufCMessage *hv_rpc_unpack(const ProtobufCMessageDescriptor *desc, const uint8_t *data,
                                size_t len) {
    ProtobufCMessage *m = protobuf_c_message_unpack(desc, NULL, len, data);
    if (m != NULL && !msg_tags_valid(m, 0)) {
        protobuf_c_message_free_unpacked(m, NULL);
        return NULL;
    }
    return m;
}

/* Unpacks and destroys bb. NULL on a malformed message. */
static ProtobufCMessage *msg_unpack(const ProtobufCMessageDescriptor *desc, grpc_byte_buffer *bb) {
    grpc_byte_buffer_reader r;
    ProtobufCMessage *m = NULL;
    if (grpc_byte_buffer_reader_init(&r, bb)) {
        grpc_slice s = grpc_byte_buffer_reader_readall(&r);
        m = hv_rpc_unpack(desc, GRPC_SLICE_START_PTR(s), GRPC_SLICE_LENGTH(s));
        grpc_slice_unref(s);
        grpc_byte_buffer_reader_destroy(&r);
    }
    grpc_byte_buffer_destroy(bb);
    return m;
}

void hv_rpc_msg_free(ProtobufCMessage *m) {
    if (m != NULL) {
        protobuf_c_message_free_unpacked(m, NULL);
    }
}

/* ---- channel arguments shared by both ends -------------------------------------------------- */

/* server: 0 for a channel, else the server's handshake timeout in ms. */
static void args_fill(grpc_arg *a, size_t *n, uint32_t server) {
    size_t i = 0;
#define HV__ARG(k, v)                                                                              \
    do {                                                                                           \
        a[i].type = GRPC_ARG_INTEGER;                                                              \
        a[i].key = (char *)(k);                                                                    \
        a[i].value.integer = (v);                                                                  \
        i++;                                                                                       \
    } while (0)
    HV__ARG(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, (int)HV_RPC_MAX_MSG + 1024);
    HV__ARG(GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, (int)HV_RPC_MAX_MSG + 1024);
    HV__ARG(GRPC_ARG_KEEPALIVE_TIME_MS, HV_RPC_KEEPALIVE_MS);
    HV__ARG(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, HV_RPC_KEEPALIVE_TIMEOUT_MS);
    HV__ARG(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    HV__ARG(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    if (server) {
        HV__ARG(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, HV_RPC_MIN_PING_INTERVAL_MS);
        HV__ARG(GRPC_ARG_ALLOW_REUSEPORT, 0);
        /* A connection must finish its handshake (TLS, then the client's HTTP/2 SETTINGS) in
         * this time or it is closed: one that sends nothing no longer holds a descriptor for
         * gRPC's default of 120 s. */
        HV__ARG(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, (int)server);
    } else {
        HV__ARG(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
        /* gRPC core also takes this as the minimum time a connection attempt gets (its "min
         * connect timeout"): at 100 ms, handshakes on a loaded machine timed out. A refused
         * connection still fails at once, and retries start after the 100 ms above. */
        HV__ARG(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5000);
        HV__ARG(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
        HV__ARG(GRPC_ARG_ENABLE_RETRIES, 0);
    }
#undef HV__ARG
    *n = i;
}

static gpr_timespec deadline_after(uint32_t ms) {
    if (ms == 0) {
        return gpr_inf_future(GPR_CLOCK_MONOTONIC);
    }
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                        gpr_time_from_millis((int64_t)ms, GPR_TIMESPAN));
}

/* ---- engine --------------------------------------------------------------------------------- */

static void *engine_thread(void *arg) {
    hv_rpc_engine_t *e = arg;
    for (;;) {
        grpc_event ev =
            grpc_completion_queue_next(e->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN) {
            break;
        }
        if (ev.type != GRPC_OP_COMPLETE) {
            continue;
        }
        rpc_op_t *op = ev.tag;
        op->success = ev.success;
        op->next = NULL;
        pthread_mutex_lock(&e->mu);
        if (e->inbox_tail != NULL) {
            e->inbox_tail->next = op;
        } else {
            e->inbox_head = op;
        }
        e->inbox_tail = op;
        pthread_mutex_unlock(&e->mu);
        uv_async_send(&e->async);
    }
    return NULL;
}

static void engine_dispatch(hv_rpc_engine_t *e, rpc_op_t *op);

static void engine_drain(hv_rpc_engine_t *e) {
    for (;;) {
        pthread_mutex_lock(&e->mu);
        rpc_op_t *op = e->inbox_head;
        e->inbox_head = e->inbox_tail = NULL;
        pthread_mutex_unlock(&e->mu);
        if (op == NULL) {
            return;
        }
        while (op != NULL) {
            rpc_op_t *next = op->next;
            engine_dispatch(e, op);
            op = next;
        }
    }
}

static void engine_async_cb(uv_async_t *h) { engine_drain(h->data); }

hv_err hv_rpc_engine_create(uv_loop_t *loop, hv_rpc_engine_t **out) {
    rpc_quiet_grpc();
    hv_rpc_engine_t *e = hv_calloc(1, sizeof(*e));
    if (e == NULL) {
        return HV_ENOMEM;
    }
    grpc_init();
    e->loop = loop;
    e->handshake_timeout_ms = HV_RPC_HANDSHAKE_TIMEOUT_MS;
    e->reserve_fd = -1;
    pthread_mutex_init(&e->mu, NULL);
    e->cq = grpc_completion_queue_create_for_next(NULL);
    if (uv_async_init(loop, &e->async, engine_async_cb) != 0) {
        grpc_completion_queue_destroy(e->cq);
        grpc_shutdown();
        hv_free(e);
        return HV_EINTERNAL;
    }
    e->async.data = e;
    if (pthread_create(&e->thread, NULL, engine_thread, e) != 0) {
        uv_close((uv_handle_t *)&e->async, NULL);
        uv_run(loop, UV_RUN_NOWAIT);
        grpc_completion_queue_destroy(e->cq);
        grpc_shutdown();
        hv_free(e);
        return HV_EINTERNAL;
    }
    *out = e;
    return HV_OK;
}

/* ---- calls: common machinery ---------------------------------------------------------------- */

static hv_rpc_call_t *call_new(hv_rpc_engine_t *e) {
    hv_rpc_call_t *c = hv_calloc(1, sizeof(*c));
    if (c == NULL) {
        return NULL;
    }
    c->eng = e;
    rpc_op_t *ops[] = {&c->op_recv, &c->op_send, &c->op_close, &c->op_start, &c->op_new};
    op_kind kinds[] = {OP_RECV, OP_SEND, OP_CLOSE, OP_START, OP_NEW_CALL};
    for (size_t i = 0; i < 5; i++) {
        ops[i]->kind = kinds[i];
        ops[i]->call = c;
    }
    grpc_call_details_init(&c->details);
    grpc_metadata_array_init(&c->request_md);
    grpc_metadata_array_init(&c->initial_md);
    grpc_metadata_array_init(&c->trailing_md);
    c->status_details = grpc_empty_slice();
    c->next = e->calls;
    if (e->calls != NULL) {
        e->calls->prev = c;
    }
    e->calls = c;
    e->n_calls++;
    return c;
}

static void call_free(hv_rpc_call_t *c) {
    hv_rpc_engine_t *e = c->eng;
    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        e->calls = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    e->n_calls--;
    while (c->q_len > 0) {
        grpc_byte_buffer_destroy(c->q[c->q_head]);
        c->q_head = (c->q_head + 1) % c->q_cap;
        c->q_len--;
    }
    hv_free(c->q);
    if (c->sending != NULL) {
        grpc_byte_buffer_destroy(c->sending);
    }
    if (c->finish_details_set) {
        grpc_slice_unref(c->finish_details);
    }
    grpc_slice_unref(c->status_details);
    if (c->error_string != NULL) {
        gpr_free((void *)c->error_string);
    }
    grpc_call_details_destroy(&c->details);
    grpc_metadata_array_destroy(&c->request_md);
    grpc_metadata_array_destroy(&c->initial_md);
    grpc_metadata_array_destroy(&c->trailing_md);
    if (c->call != NULL) {
        grpc_call_unref(c->call);
    }
    hv_free(c);
}

/* Frees the call once on_done ran and nothing is in flight. */
static void call_maybe_free(hv_rpc_call_t *c) {
    if (c->done_called && c->ops_outstanding == 0) {
        call_free(c);
    }
}

static int call_start_batch(hv_rpc_call_t *c, const grpc_op *ops, size_t n, rpc_op_t *tag) {
    grpc_call_error err = grpc_call_start_batch(c->call, ops, n, tag, NULL);
    if (err != GRPC_CALL_OK) {
        HV_LOG(HV_LOG_ERROR, "rpc", "HV-RPC-BATCH", "grpc_call_start_batch failed: %d", (int)err);
        return -1;
    }
    c->ops_outstanding++;
    return 0;
}

static void call_fire_done(hv_rpc_call_t *c) {
    if (c->done_called) {
        return;
    }
    c->open = 0;
    c->done_called = 1;
    if (c->on_done != NULL) {
        c->on_done(c, &c->st, c->ud);
    }
}

/* Client calls end when the status arrived and the receive loop stopped; server calls end when
 * RECV_CLOSE_ON_SERVER completed. */
static void call_check_done(hv_rpc_call_t *c) {
    if (c->done_called || !c->close_done) {
        return;
    }
    if (c->is_client && c->recv_pending) {
        return;
    }
    call_fire_done(c);
}

static void call_start_recv(hv_rpc_call_t *c) {
    if (c->recv_pending || c->recv_eof || c->close_done) {
        return;
    }
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &c->recv_buf;
    if (call_start_batch(c, &op, 1, &c->op_recv) == 0) {
        c->recv_pending = 1;
    }
}

static void call_pump_send(hv_rpc_call_t *c) {
    if (c->send_pending || c->final_sent) {
        return;
    }
    if (c->q_len == 0 && !c->finish_requested) {
        return;
    }
    grpc_op ops[3];
    size_t n = 0;
    memset(ops, 0, sizeof(ops));
    if (!c->is_client && !c->initial_md_sent) {
        ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
        n++;
        c->initial_md_sent = 1;
    }
    if (c->q_len > 0) {
        c->sending = c->q[c->q_head];
        c->q_head = (c->q_head + 1) % c->q_cap;
        c->q_len--;
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n].data.send_message.send_message = c->sending;
        n++;
    }
    c->send_included_final = 0;
    if (c->finish_requested && c->q_len == 0) {
        if (c->is_client) {
            ops[n].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
        } else {
            ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
            ops[n].data.send_status_from_server.status =
                (grpc_status_code)hv__rpc_grpc_from_err(c->finish_rc);
            ops[n].data.send_status_from_server.status_details =
                c->finish_details_set ? &c->finish_details : NULL;
            /* Marked as the server's own (hv_rpc_status_t.from_server); the slices are
             * static, and the call outlives the batch. */
            c->finish_md.key = grpc_slice_from_static_string(RPC_MARK_KEY);
            c->finish_md.value =
                grpc_slice_from_static_string(c->finish_later ? RPC_MARK_LATER : RPC_MARK_FINAL);
            ops[n].data.send_status_from_server.trailing_metadata_count = 1;
            ops[n].data.send_status_from_server.trailing_metadata = &c->finish_md;
        }
        n++;
        c->send_included_final = 1;
        c->final_sent = 1;
    }
    if (call_start_batch(c, ops, n, &c->op_send) == 0) {
        c->send_pending = 1;
    } else if (c->sending != NULL) {
        grpc_byte_buffer_destroy(c->sending);
        c->sending = NULL;
    }
}

static void on_recv_done(hv_rpc_call_t *c, int success) {
    c->recv_pending = 0;
    grpc_byte_buffer *bb = c->recv_buf;
    c->recv_buf = NULL;
    if (!success || bb == NULL) {
        if (bb != NULL) {
            grpc_byte_buffer_destroy(bb);
        }
        c->recv_eof = 1;
        /* A server unary/stream call whose client half-closed without a request. */
        if (!c->is_client && c->msgs_received == 0 && success && !c->finish_requested &&
            c->method != NULL) {
            hv_rpc_finish(c, HV_EINVAL, "no request message");
        }
        call_check_done(c);
        return;
    }
    c->msgs_received++;
    ProtobufCMessage *m = msg_unpack(c->recv_desc, bb);
    if (m == NULL) {
        HV_LOG(HV_LOG_WARN, "rpc", "HV-RPC-MALFORMED", "malformed %s message from %s",
               c->recv_desc->name, c->peer);
        if (c->is_client) {
            hv_rpc_call_cancel(c);
        } else {
            /* The client sent bytes that are not the method's request: its fault, not ours. */
            hv_rpc_finish(c, HV_EINVAL, "malformed request: not a valid %s message",
                          c->recv_desc->name);
        }
        call_check_done(c);
        return;
    }
    if (!c->is_client && c->msgs_received == 1 && c->srv != NULL && c->srv->gate != NULL) {
        char why[512] = "";
        hv_err grc = c->srv->gate(c, c->method->path, m, why, sizeof(why), c->srv->gate_ud);
        if (grc != HV_OK) {
            /* Refused before any handler saw the message; nothing more is read. */
            protobuf_c_message_free_unpacked(m, NULL);
            hv_rpc_finish(c, grc, "%s", why[0] != '\0' ? why : hv_strerror(grc));
            call_check_done(c);
            return;
        }
    }
    if (!c->done_called && c->on_msg != NULL) {
        c->on_msg(c, m, c->ud);
    }
    protobuf_c_message_free_unpacked(m, NULL);
    /* Streams keep receiving; unary and server-stream requests are one message. */
    int more = c->is_client ? (c->kind != HV_RPC_UNARY) : (c->kind == HV_RPC_BIDI);
    if (more && !c->done_called) {
        call_start_recv(c);
    }
    call_check_done(c);
}

static void on_send_done(hv_rpc_call_t *c, int success) {
    c->send_pending = 0;
    if (c->sending != NULL) {
        grpc_byte_buffer_destroy(c->sending);
        c->sending = NULL;
    }
    if (!success) {
        /* The call is broken; the close op reports why. Drop what is queued. */
        c->open = 0;
        c->final_sent = 1;
        return;
    }
    call_pump_send(c);
    if (c->q_len < HV_RPC_SEND_QUEUE_LOW && c->open && !c->done_called) {
        if (c->on_drain != NULL) {
            c->on_drain(c, c->ud);
        }
    }
}

static void on_close_done(hv_rpc_call_t *c, int success) {
    c->close_done = 1;
    if (c->is_client) {
        if (!success) {
            status_set(&c->st, GRPC_STATUS_UNKNOWN, "status batch failed", 19);
        } else {
            status_from_client(&c->st, c->status, c->status_details, c->error_string,
                               &c->trailing_md);
            hv_rpc_explain_transport(c->chan_tls, NULL, &c->st);
        }
    } else {
        if (c->cancelled || !c->final_sent) {
            const char *m = "cancelled by the peer";
            status_set(&c->st, GRPC_STATUS_CANCELLED, m, strlen(m));
        } else {
            c->st.rc = c->finish_rc;
            c->st.grpc_code = hv__rpc_grpc_from_err(c->finish_rc);
        }
        if (c->srv != NULL && c->srv->observe != NULL) {
            c->srv->observe(c->method != NULL ? c->method->path : NULL, c->st.grpc_code,
                            c->srv->observe_ud);
        }
        if (c->srv != NULL && c->srv->end_hook != NULL) {
            c->srv->end_hook(c, c->method != NULL ? c->method->path : NULL, c->st.grpc_code,
                             c->st.msg, c->srv->end_ud);
        }
    }
    c->open = 0;
    call_check_done(c);
}

/* ---- gRPC core's own log lines ----------------------------------------------------------- */

/* gRPC core writes its errors to stderr in its own format ("E1124 ... ssl_transport_security.cc
 * Handshake failed ..."): a CLI user would see library internals next to hv's own message. They
 * go to hv's log at debug level instead (with GRPC_VERBOSITY or GRPC_TRACE in the environment,
 * for debugging gRPC itself, every line gRPC emits goes to stderr); an assertion, which aborts
 * next, stays an error. The hook is installed either way: it is also how the engine learns that
 * a listener died (rpc_accept_failed). */
static int rpc_grpc_verbose; /* GRPC_VERBOSITY or GRPC_TRACE set: gRPC's lines go to stderr */

/* Set (from any gRPC thread) when gRPC core's listener stopped accepting: gRPC 1.51 logs "Failed
 * accept4: ..." and never re-arms a listener whose accept failed with anything but EAGAIN or
 * ECONNABORTED (EMFILE above all), while the port stays bound; new connections then wait in the
 * kernel's backlog forever. The engine's watchdog sees the flag and listens again. */
static int rpc_accept_failed;

static void rpc_grpc_log(gpr_log_func_args *a) {
    const char *file = a->file != NULL ? strrchr(a->file, '/') : NULL;
    file = file != NULL ? file + 1 : (a->file != NULL ? a->file : "?");
    const char *msg = a->message != NULL ? a->message : "";
    if (strncmp(msg, "Failed accept", 13) == 0) {
        __atomic_store_n(&rpc_accept_failed, 1, __ATOMIC_RELEASE);
    }
    if (rpc_grpc_verbose) {
        fprintf(stderr, "grpc %s %s:%d: %s\n", gpr_log_severity_string(a->severity), file, a->line,
                msg);
        return;
    }
    int fatal = strncmp(msg, "assertion failed", 16) == 0;
    HV_LOG(fatal ? HV_LOG_ERROR : HV_LOG_DEBUG, "grpc", "HV-RPC-GRPC-LOG", "%s:%d: %s", file,
           a->line, msg);
}

/* Debian builds Abseil without NDEBUG, so every absl::Mutex gRPC core takes also runs Abseil's
 * lock-order (deadlock) detection: a graph of every lock held while taking another, with stack
 * traces. In hvhead with 10,000 agents that was 5 to 7 % of all its CPU (perf: GraphCycles::GetId,
 * InsertEdge, UpdateStackTrace), for a check that only ever aborts on a bug inside gRPC. It is
 * switched off here (Abseil's release default) through the library's own setter, looked up by
 * name: where the symbol is not there (another Abseil build, a static gRPC) nothing changes.
 * HV_ABSL_DEADLOCK_CHECK=1 keeps it on. */
#define RPC_ABSL_SET_DEADLOCK_MODE                                                                 \
    "_ZN4absl7debian329SetMutexDeadlockDetectionModeENS0_15OnDeadlockCycleE"

static void rpc_absl_deadlock_off(void) {
    const char *keep = getenv("HV_ABSL_DEADLOCK_CHECK");
    if (keep != NULL && strcmp(keep, "1") == 0) {
        return;
    }
    void *sym = dlsym(RTLD_DEFAULT, RPC_ABSL_SET_DEADLOCK_MODE);
    if (sym != NULL) {
        void (*set_mode)(int) = NULL;
        memcpy(&set_mode, &sym, sizeof(set_mode));
        set_mode(0); /* absl::OnDeadlockCycle::kIgnore */
    }
}

static void rpc_grpc_log_install(void) {
    rpc_grpc_verbose = getenv("GRPC_VERBOSITY") != NULL || getenv("GRPC_TRACE") != NULL;
    gpr_set_log_function(rpc_grpc_log);
    rpc_absl_deadlock_off();
}

static void rpc_quiet_grpc(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, rpc_grpc_log_install);
}

/* ---- TLS ------------------------------------------------------------------------------------ */

#define RPC_PEM_MAX (1u << 20) /* a PEM file larger than this is a mistake */

/* Reads a PEM file whole (NUL-terminated, owned) and checks that it holds a block of the kind
 * (a "CERTIFICATE" or a "PRIVATE KEY", any of its variants). what names the file in messages. */
static hv_err tls_read_pem(const char *path, const char *what, int key, char **out, char *err,
                           size_t errlen) {
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        int e = errno;
        hv_errf(err, errlen, "%s '%s': cannot open: %s", what, path, strerror(e));
        return e == ENOENT ? HV_ENOTFOUND : HV_EIO;
    }
    char *buf = hv_malloc(RPC_PEM_MAX + 1);
    size_t len = buf != NULL ? fread(buf, 1, RPC_PEM_MAX + 1, f) : 0;
    int rerr = ferror(f);
    fclose(f);
    if (buf == NULL) {
        hv_errf(err, errlen, "%s '%s': out of memory", what, path);
        return HV_ENOMEM;
    }
    hv_err rc = HV_OK;
    if (rerr) {
        hv_errf(err, errlen, "%s '%s': cannot read: %s", what, path, "read error");
        rc = HV_EIO;
    } else if (len > RPC_PEM_MAX) {
        hv_errf(err, errlen, "%s '%s': larger than %u bytes; not a PEM file", what, path,
                RPC_PEM_MAX);
        rc = HV_EINVAL;
    } else {
        buf[len] = '\0';
        const char *begin = strstr(buf, "-----BEGIN ");
        const char *kind = begin != NULL ? begin + 11 : NULL;
        int ok = kind != NULL && (key ? strstr(kind, "PRIVATE KEY-----") != NULL
                                      : strncmp(kind, "CERTIFICATE-----", 16) == 0);
        if (!ok) {
            hv_errf(err, errlen, "%s '%s': not a PEM %s (no '-----BEGIN %s-----' line)", what, path,
                    key ? "private key" : "certificate", key ? "PRIVATE KEY" : "CERTIFICATE");
            rc = HV_EINVAL;
        } else if (key && (strstr(buf, "ENCRYPTED") != NULL)) {
            hv_errf(err, errlen,
                    "%s '%s': the key is encrypted with a passphrase, which hv cannot ask "
                    "for; store it unencrypted, mode 0600 (openssl pkey -in KEY -out NEW)",
                    what, path);
            rc = HV_EINVAL;
        }
    }
    if (rc != HV_OK) {
        memset(buf, 0, len < RPC_PEM_MAX ? len : RPC_PEM_MAX);
        hv_free(buf);
        return rc;
    }
    *out = buf;
    return HV_OK;
}

static void tls_free_pem(char *pem) {
    if (pem != NULL) {
        memset(pem, 0, strlen(pem)); /* keys are secrets: no copies left in freed memory */
        hv_free(pem);
    }
}

/* Loads the files a server needs. which (optional) receives the file to blame on failure. */
static hv_err tls_load(const hv_rpc_tls_t *tls, int server, char **ca, char **cert, char **key,
                       const char **which, char *err, size_t errlen) {
    hv_err rc = HV_OK;
    const char *w = NULL;
    *ca = *cert = *key = NULL;
    if (server && (tls->cert_file == NULL || tls->key_file == NULL)) {
        hv_errf(err, errlen, "TLS needs a certificate and its private key");
        w = tls->cert_file == NULL ? "cert" : "key";
        rc = HV_EINVAL;
    } else if (!server && tls->ca_file == NULL) {
        hv_errf(err, errlen, "TLS needs the CA file that signed the head's certificate");
        w = "ca";
        rc = HV_EINVAL;
    } else if (!server && (tls->cert_file == NULL) != (tls->key_file == NULL)) {
        hv_errf(err, errlen, "a client certificate needs both the certificate and its key");
        w = tls->cert_file == NULL ? "cert" : "key";
        rc = HV_EINVAL;
    } else if (tls->ca_file != NULL &&
               (rc = tls_read_pem(tls->ca_file, "CA file", 0, ca, err, errlen)) != HV_OK) {
        w = "ca";
    } else if (tls->cert_file != NULL &&
               (rc = tls_read_pem(tls->cert_file, "certificate", 0, cert, err, errlen)) != HV_OK) {
        w = "cert";
    } else if (tls->key_file != NULL &&
               (rc = tls_read_pem(tls->key_file, "private key", 1, key, err, errlen)) != HV_OK) {
        w = "key";
    }
    if (rc != HV_OK) {
        tls_free_pem(*ca);
        tls_free_pem(*cert);
        tls_free_pem(*key);
        *ca = *cert = *key = NULL;
    }
    if (which != NULL) {
        *which = w;
    }
    return rc;
}

static hv_err tls_server_creds(const hv_rpc_tls_t *tls, grpc_server_credentials **out, char *err,
                               size_t errlen) {
    char *ca, *cert, *key;
    HV_TRY(tls_load(tls, 1, &ca, &cert, &key, NULL, err, errlen));
    grpc_ssl_pem_key_cert_pair pair = {.private_key = key, .cert_chain = cert};
    /* With a CA, every client is asked for a certificate and one that is presented must verify;
     * which methods insist on one is decided per call (server_peer_cert_ok). */
    *out = grpc_ssl_server_credentials_create_ex(
        ca, &pair, 1,
        ca != NULL ? GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY
                   : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE,
        NULL);
    tls_free_pem(ca);
    tls_free_pem(cert);
    tls_free_pem(key);
    if (*out == NULL) {
        hv_errf(err, errlen, "gRPC refused the TLS material");
        return HV_EINVAL;
    }
    return HV_OK;
}

static hv_err tls_channel_creds(const hv_rpc_tls_t *tls, grpc_channel_credentials **out, char *err,
                                size_t errlen) {
    char *ca, *cert, *key;
    HV_TRY(tls_load(tls, 0, &ca, &cert, &key, NULL, err, errlen));
    grpc_ssl_pem_key_cert_pair pair = {.private_key = key, .cert_chain = cert};
    *out = grpc_ssl_credentials_create_ex(ca, cert != NULL ? &pair : NULL, NULL, NULL);
    tls_free_pem(ca);
    tls_free_pem(cert);
    tls_free_pem(key);
    if (*out == NULL) {
        hv_errf(err, errlen, "gRPC refused the TLS material");
        return HV_EINVAL;
    }
    return HV_OK;
}

hv_err hv_rpc_tls_check(const hv_rpc_tls_t *tls, const char **which_out, char *err, size_t errlen) {
    char *ca, *cert, *key;
    const char *which = NULL;
    hv_err rc = tls_load(tls, 1, &ca, &cert, &key, &which, err, errlen);
    if (rc == HV_OK) {
        rpc_quiet_grpc();
        grpc_init();
        grpc_ssl_pem_key_cert_pair pair = {.private_key = key, .cert_chain = cert};
        grpc_server_credentials *creds = grpc_ssl_server_credentials_create_ex(
            ca, &pair, 1,
            ca != NULL ? GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY
                       : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE,
            NULL);
        grpc_server *srv = grpc_server_create(NULL, NULL);
        grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
        grpc_server_register_completion_queue(srv, cq, NULL);
        /* gRPC core loads the key pair and the CA when the port is added: a key that does not
         * match the certificate, or a file with no usable PEM block, fails here. */
        int port = creds != NULL ? grpc_server_add_http2_port(srv, "127.0.0.1:0", creds) : 0;
        if (creds != NULL) {
            grpc_server_credentials_release(creds);
        }
        static int tag;
        grpc_server_shutdown_and_notify(srv, cq, &tag); /* never started: returns at once */
        grpc_completion_queue_pluck(cq, &tag, deadline_after(5000), NULL);
        grpc_server_destroy(srv);
        grpc_completion_queue_shutdown(cq);
        while (
            grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
            GRPC_QUEUE_SHUTDOWN) {
        }
        grpc_completion_queue_destroy(cq);
        grpc_shutdown();
        if (port == 0) {
            hv_errf(err, errlen,
                    "the private key '%s' does not match the certificate '%s'%s%s%s, or one of "
                    "them is damaged",
                    tls->key_file, tls->cert_file, ca != NULL ? " (or the CA file '" : "",
                    ca != NULL ? tls->ca_file : "", ca != NULL ? "' is not a certificate)" : "");
            which = "key";
            rc = HV_EINVAL;
        }
        tls_free_pem(ca);
        tls_free_pem(cert);
        tls_free_pem(key);
    }
    if (which_out != NULL) {
        *which_out = which;
    }
    return rc;
}

int hv_rpc_target_is_loopback(const char *target) {
    char host[256];
    const char *h = target;
    if (strncmp(h, "unix:", 5) == 0 || strncmp(h, "unix-abstract:", 14) == 0) {
        return 1;
    }
    if (strncmp(h, "dns:///", 7) == 0) {
        h += 7;
    } else if (strncmp(h, "ipv4:", 5) == 0 || strncmp(h, "ipv6:", 5) == 0) {
        h += 5;
    }
    size_t len;
    if (h[0] == '[') {
        const char *end = strchr(h, ']');
        if (end == NULL) {
            return 0;
        }
        h++;
        len = (size_t)(end - h);
    } else {
        const char *colon = strrchr(h, ':');
        len = colon != NULL ? (size_t)(colon - h) : strlen(h);
    }
    if (len == 0 || len >= sizeof(host)) {
        return 0;
    }
    memcpy(host, h, len);
    host[len] = '\0';
    if (strcasecmp(host, "localhost") == 0 || strcmp(host, "::1") == 0) {
        return 1;
    }
    unsigned a, b, c, d;
    char extra;
    return sscanf(host, "%u.%u.%u.%u%c", &a, &b, &c, &d, &extra) == 4 && a == 127 && b < 256 &&
           c < 256 && d < 256;
}

void hv_rpc_explain_transport(int tls, const char *ca_file, hv_rpc_status_t *st) {
    if (st->grpc_code != GRPC_STATUS_UNAVAILABLE || st->from_server) {
        return;
    }
    const char *m = st->msg;
    char ca[300];
    snprintf(ca, sizeof(ca), "%s%s%s", ca_file ? "'" : "", ca_file ? ca_file : "the CA file",
             ca_file ? "'" : "");
    char out[sizeof(st->msg)];
    out[0] = '\0';
    if (tls) {
        if (strstr(m, "CERTIFICATE_VERIFY_FAILED") != NULL ||
            strcasestr(m, "certificate verify failed") != NULL) {
            snprintf(out, sizeof(out),
                     "TLS: the head's certificate is not signed by the CA in %s (--ca); the "
                     "head may use another CA",
                     ca);
        } else if (strstr(m, "not in peer certificate") != NULL) {
            snprintf(out, sizeof(out),
                     "TLS: the head's certificate does not name the address dialled (its "
                     "subjectAltName must list that DNS name or IP)");
        } else if (strstr(m, "WRONG_VERSION_NUMBER") != NULL ||
                   strcasestr(m, "handshake") != NULL || strcasestr(m, "socket closed") != NULL ||
                   strcasestr(m, "connection reset") != NULL ||
                   strcasestr(m, "end of file") != NULL) {
            snprintf(out, sizeof(out),
                     "TLS handshake with the head failed (the head may serve plain text, "
                     "require a client certificate: hvagent --cert/--key, or be at its "
                     "connection limit: see its log)");
        }
    } else if (strstr(m, "failed to connect") != NULL &&
               (strcasestr(m, "socket closed") != NULL ||
                /* gRPC runs its handshaker on plain-text channels too ("Handshake read
                 * failed" when the head closes the connection before answering): without TLS
                 * that is a closed connection, not a secure handshake */
                strcasestr(m, "handshake") != NULL ||
                strcasestr(m, "before receiving SETTINGS frame") != NULL ||
                strcasestr(m, "connection reset") != NULL ||
                strcasestr(m, "end of file") != NULL)) {
        /* Callers retry such failures (a loaded or restarting head can also close a
         * connection early): they decide on st->never_connected, not on these words. */
        snprintf(out, sizeof(out),
                 "failed to connect: the head closed the connection during setup (it may be at "
                 "its connection limit: see its log; if it uses TLS, give --ca FILE (or "
                 "HV_CA_FILE) with the CA that signed its certificate)");
    }
    if (out[0] != '\0') {
        snprintf(st->msg, sizeof(st->msg), "%s", out);
        st->explained = 1;
        if (tls) {
            /* A handshake that failed (a certificate this client refuses, a head that wants
             * one, or plain text) fails the same way when tried again: callers do not retry. */
            st->never_connected = 0;
        }
    }
}

/* Server: a call to a method under client_cert_prefix needs a client certificate that the TLS
 * handshake verified against the CA. Refuses the call (and returns 0) otherwise. */
static int server_peer_cert_ok(hv_rpc_server_t *s, hv_rpc_call_t *c) {
    size_t plen = strlen(s->client_cert_prefix);
    if (GRPC_SLICE_LENGTH(c->details.method) < plen ||
        memcmp(GRPC_SLICE_START_PTR(c->details.method), s->client_cert_prefix, plen) != 0) {
        return 1;
    }
    int ok = 0;
    grpc_auth_context *ctx = grpc_call_auth_context(c->call);
    if (ctx != NULL) {
        /* The server asks with REQUEST_..._AND_VERIFY: a presented certificate that did not
         * verify fails the handshake, so one that is here was verified. */
        grpc_auth_property_iterator it =
            grpc_auth_context_find_properties_by_name(ctx, GRPC_X509_PEM_CERT_PROPERTY_NAME);
        ok = grpc_auth_property_iterator_next(&it) != NULL;
        grpc_auth_context_release(ctx);
    }
    if (ok) {
        return 1;
    }
    HV_LOG(HV_LOG_WARN, "rpc", "HV-RPC-NO-CLIENT-CERT",
           "refused a call from %s: no client certificate (tls.require_client_cert)", c->peer);
    grpc_op close_op;
    memset(&close_op, 0, sizeof(close_op));
    close_op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    close_op.data.recv_close_on_server.cancelled = &c->cancelled;
    call_start_batch(c, &close_op, 1, &c->op_close);
    c->method = NULL;
    c->open = 1;
    hv_rpc_finish(c, HV_EPERM,
                  "the head requires a client certificate for this service (tls.require_client_"
                  "cert): give hvagent --cert FILE --key FILE signed by the head's CA");
    return 0;
}

/* ---- server --------------------------------------------------------------------------------- */

static void server_post_request(hv_rpc_server_t *s) {
    hv_rpc_call_t *c = call_new(s->eng);
    if (c == NULL) {
        HV_LOG(HV_LOG_ERROR, "rpc", "HV-RPC-OOM", "cannot post a call slot: out of memory");
        return;
    }
    c->srv = s;
    if (s->server == NULL) { /* between listeners (hv_rpc_server_relisten) */
        c->done_called = 1;
        call_free(c);
        return;
    }
    grpc_call_error err = grpc_server_request_call(s->server, &c->call, &c->details, &c->request_md,
                                                   s->eng->cq, s->eng->cq, &c->op_new);
    if (err != GRPC_CALL_OK) {
        c->done_called = 1;
        call_free(c);
        return;
    }
    c->ops_outstanding++;
}

static void server_unimplemented(hv_rpc_call_t *c) {
    char path[256];
    size_t len = GRPC_SLICE_LENGTH(c->details.method);
    if (len >= sizeof(path)) {
        len = sizeof(path) - 1;
    }
    memcpy(path, GRPC_SLICE_START_PTR(c->details.method), len);
    path[len] = '\0';
    HV_LOG(HV_LOG_INFO, "rpc", "HV-RPC-UNIMPL", "unknown method %s", path);
    grpc_op close_op;
    memset(&close_op, 0, sizeof(close_op));
    close_op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    close_op.data.recv_close_on_server.cancelled = &c->cancelled;
    call_start_batch(c, &close_op, 1, &c->op_close);
    c->open = 1;
    hv_rpc_finish(c, HV_ENOTSUP, "unknown method %s", path);
}

/* Keeps the value of the caller's "authorization: Bearer <token>" metadata. A missing, malformed
 * or oversized header leaves "" (the services then answer UNAUTHENTICATED). */
static void call_read_bearer(hv_rpc_call_t *c) {
    c->bearer[0] = '\0';
    for (size_t i = 0; i < c->request_md.count; i++) {
        const grpc_metadata *m = &c->request_md.metadata[i];
        if (grpc_slice_str_cmp(m->key, RPC_AUTH_KEY) != 0) {
            continue;
        }
        size_t len = GRPC_SLICE_LENGTH(m->value), pl = sizeof(RPC_BEARER) - 1;
        const char *v = (const char *)GRPC_SLICE_START_PTR(m->value);
        if (len <= pl || len - pl > HV_RPC_MAX_TOKEN || strncasecmp(v, RPC_BEARER, pl) != 0) {
            return;
        }
        memcpy(c->bearer, v + pl, len - pl);
        c->bearer[len - pl] = '\0';
        if (strlen(c->bearer) != len - pl) {
            c->bearer[0] = '\0'; /* an embedded NUL: not a token */
        }
        return;
    }
}

/* Fills md with the channel's authorization header; returns how many entries (0 or 1). The
 * value is a copy (grpc_call_start_batch takes its own reference to it): release it with
 * md_release once the batch is started, so a later hv_rpc_channel_set_token cannot change the
 * bytes of a call in flight. */
static size_t channel_md(const hv_rpc_channel_t *ch, grpc_metadata *md) {
    memset(md, 0, sizeof(*md));
    if (ch == NULL || ch->auth[0] == '\0') {
        return 0;
    }
    md->key = grpc_slice_from_static_string(RPC_AUTH_KEY);
    md->value = grpc_slice_from_copied_string(ch->auth);
    return 1;
}

static void md_release(grpc_metadata *md) {
    grpc_slice_unref(md->value); /* the empty slice of an unused md: a no-op */
}

static void on_new_call(hv_rpc_call_t *c, int success) {
    hv_rpc_server_t *s = c->srv;
    if (!success) {
        /* Server shutting down: the posted slot comes back unused. */
        c->done_called = 1;
        return;
    }
    if (!s->shutting_down) {
        server_post_request(s);
    }
    char *peer = grpc_call_get_peer(c->call);
    if (peer != NULL) {
        snprintf(c->peer, sizeof(c->peer), "%s", peer);
        gpr_free(peer);
    }
    call_read_bearer(c);
    for (size_t i = 0; i < s->n_methods; i++) {
        if (grpc_slice_str_cmp(c->details.method, s->methods[i].path) == 0) {
            c->method = &s->methods[i];
            break;
        }
    }
    if (c->method == NULL) {
        server_unimplemented(c);
        return;
    }
    if (s->client_cert_prefix != NULL && !server_peer_cert_ok(s, c)) {
        return;
    }
    c->kind = c->method->kind;
    c->recv_desc = c->method->req;
    c->on_msg = c->method->on_msg;
    c->on_done = c->method->on_done;
    c->ud = c->method->ud;
    c->open = 1;
    grpc_op close_op;
    memset(&close_op, 0, sizeof(close_op));
    close_op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    close_op.data.recv_close_on_server.cancelled = &c->cancelled;
    if (call_start_batch(c, &close_op, 1, &c->op_close) != 0) {
        c->done_called = 1;
        return;
    }
    call_start_recv(c);
}

hv_err hv_rpc_server_create(hv_rpc_engine_t *e, const char *listen_addr, hv_rpc_server_t **out,
                            int *port_out) {
    return hv_rpc_server_create_tls(e, listen_addr, NULL, out, port_out, NULL, 0);
}

/* Makes a grpc_server for s listening on addr: s's channel arguments, the engine's queue, plain
 * text or TLS from the paths s keeps. *gs_out and *port_out on success. */
static hv_err server_listen(hv_rpc_server_t *s, const char *addr, grpc_server **gs_out,
                            int *port_out, char *err, size_t errlen) {
    grpc_server_credentials *creds = NULL;
    if (s->tls_cert != NULL) {
        hv_rpc_tls_t tls = {.ca_file = s->tls_ca, .cert_file = s->tls_cert, .key_file = s->tls_key};
        HV_TRY(tls_server_creds(&tls, &creds, err, errlen));
    } else {
        creds = grpc_insecure_server_credentials_create();
    }
    grpc_arg a[16];
    size_t n;
    args_fill(a, &n, s->handshake_timeout_ms);
    grpc_channel_args args = {.num_args = n, .args = a};
    grpc_server *gs = grpc_server_create(&args, NULL);
    grpc_server_register_completion_queue(gs, s->eng->cq, NULL);
    int port = grpc_server_add_http2_port(gs, addr, creds);
    grpc_server_credentials_release(creds);
    if (port == 0) {
        grpc_server_destroy(gs);
        hv_errf(err, errlen, "cannot listen on %s: address in use or not available", addr);
        return HV_EUNAVAIL;
    }
    *gs_out = gs;
    *port_out = port;
    return HV_OK;
}

static void server_free(hv_rpc_server_t *s) {
    hv_free(s->methods);
    hv_free(s->client_cert_prefix);
    hv_free(s->bound_addr);
    hv_free(s->tls_ca);
    hv_free(s->tls_cert);
    hv_free(s->tls_key);
    hv_free(s);
}

/* Copies the TLS material's paths, for a later relisten. */
static hv_err server_keep_tls(hv_rpc_server_t *s, const hv_rpc_tls_t *tls) {
    if ((tls->client_cert_prefix != NULL &&
         (s->client_cert_prefix = hv_strdup(tls->client_cert_prefix)) == NULL) ||
        (tls->ca_file != NULL && (s->tls_ca = hv_strdup(tls->ca_file)) == NULL) ||
        (s->tls_cert = hv_strdup(tls->cert_file)) == NULL ||
        (s->tls_key = hv_strdup(tls->key_file)) == NULL) {
        return HV_ENOMEM;
    }
    return HV_OK;
}

/* Keeps listen_addr with the port bound ("127.0.0.1:0" becomes "127.0.0.1:43211"), so that a
 * relisten takes the same port. */
static hv_err server_keep_addr(hv_rpc_server_t *s, const char *listen_addr, int port) {
    const char *colon = strrchr(listen_addr, ':');
    size_t hlen = colon != NULL ? (size_t)(colon - listen_addr) : strlen(listen_addr);
    size_t cap = hlen + 16;
    if ((s->bound_addr = hv_malloc(cap)) == NULL) {
        return HV_ENOMEM;
    }
    snprintf(s->bound_addr, cap, "%.*s:%d", (int)hlen, listen_addr, port);
    return HV_OK;
}

hv_err hv_rpc_server_create_tls(hv_rpc_engine_t *e, const char *listen_addr,
                                const hv_rpc_tls_t *tls, hv_rpc_server_t **out, int *port_out,
                                char *err, size_t errlen) {
    hv_err rc;
    if (tls != NULL) {
        /* A bad key pair and a busy address both make add_http2_port return 0: tell them apart
         * by loading the material on a throwaway loopback port first. */
        HV_TRY(hv_rpc_tls_check(tls, NULL, err, errlen));
    }
    hv_rpc_server_t *s = hv_calloc(1, sizeof(*s));
    if (s == NULL) {
        return HV_ENOMEM;
    }
    s->eng = e;
    s->handshake_timeout_ms = e->handshake_timeout_ms;
    int port = 0;
    if ((tls != NULL && (rc = server_keep_tls(s, tls)) != HV_OK) ||
        (rc = server_listen(s, listen_addr, &s->server, &port, err, errlen)) != HV_OK) {
        server_free(s);
        return rc;
    }
    if ((rc = server_keep_addr(s, listen_addr, port)) != HV_OK) {
        grpc_server_destroy(s->server);
        server_free(s);
        return rc;
    }
    s->op_shutdown.kind = OP_SHUTDOWN;
    s->op_shutdown.server = s;
    s->next = e->servers;
    e->servers = s;
    if (port_out != NULL) {
        *port_out = port;
    }
    *out = s;
    return HV_OK;
}

hv_err hv_rpc_server_add(hv_rpc_server_t *s, const hv_rpc_method_t *m) {
    if (s->started || m->path == NULL || m->req == NULL || m->on_msg == NULL) {
        return HV_EINVAL;
    }
    hv_rpc_method_t *nm = hv_realloc(s->methods, (s->n_methods + 1) * sizeof(*nm));
    if (nm == NULL) {
        return HV_ENOMEM;
    }
    nm[s->n_methods] = *m;
    s->methods = nm;
    s->n_methods++;
    return HV_OK;
}

hv_err hv_rpc_server_add_n(hv_rpc_server_t *s, const hv_rpc_method_t *ms, size_t n) {
    for (size_t i = 0; i < n; i++) {
        HV_TRY(hv_rpc_server_add(s, &ms[i]));
    }
    return HV_OK;
}

void hv_rpc_server_set_observer(hv_rpc_server_t *s, hv_rpc_observe_cb cb, void *ud) {
    s->observe = cb;
    s->observe_ud = ud;
}

const char *hv_rpc_code_name(int grpc_code) {
    static const char *const names[] = {"OK",
                                        "CANCELLED",
                                        "UNKNOWN",
                                        "INVALID_ARGUMENT",
                                        "DEADLINE_EXCEEDED",
                                        "NOT_FOUND",
                                        "ALREADY_EXISTS",
                                        "PERMISSION_DENIED",
                                        "RESOURCE_EXHAUSTED",
                                        "FAILED_PRECONDITION",
                                        "ABORTED",
                                        "OUT_OF_RANGE",
                                        "UNIMPLEMENTED",
                                        "INTERNAL",
                                        "UNAVAILABLE",
                                        "DATA_LOSS",
                                        "UNAUTHENTICATED"};
    static_assert(GRPC_STATUS_UNAUTHENTICATED == 16, "gRPC status codes are fixed by the protocol");
    return grpc_code >= 0 && grpc_code <= 16 ? names[grpc_code] : "UNKNOWN";
}

void hv_rpc_server_set_end_hook(hv_rpc_server_t *s, hv_rpc_end_cb cb, void *ud) {
    s->end_hook = cb;
    s->end_ud = ud;
}

void hv_rpc_server_set_gate(hv_rpc_server_t *s, hv_rpc_gate_cb gate, void *ud) {
    s->gate = gate;
    s->gate_ud = ud;
}

static void engine_watchdog_start(hv_rpc_engine_t *e);

hv_err hv_rpc_server_start(hv_rpc_server_t *s) {
    if (s->started) {
        return HV_ESTATE;
    }
    grpc_server_start(s->server);
    s->started = 1;
    for (int i = 0; i < RPC_PREPOSTED_CALLS; i++) {
        server_post_request(s);
    }
    engine_watchdog_start(s->eng);
    return HV_OK;
}

void hv_rpc_server_shutdown(hv_rpc_server_t *s) {
    if (s == NULL || s->shutting_down) {
        return;
    }
    s->shutting_down = 1;
    if (s->server != NULL) {
        grpc_server_shutdown_and_notify(s->server, s->eng->cq, &s->op_shutdown);
        grpc_server_cancel_all_calls(s->server);
    } else {
        s->shutdown_done = 1;
    }
    for (rpc_retired_t *r = s->retired; r != NULL; r = r->next) {
        grpc_server_cancel_all_calls(r->server);
    }
}

/* Gives up the spare descriptor so that a new listener can open even when none is left. */
static void engine_release_reserve(hv_rpc_engine_t *e) {
    if (e->reserve_fd >= 0) {
        close(e->reserve_fd);
        e->reserve_fd = -1;
    }
}

static void engine_take_reserve(hv_rpc_engine_t *e) {
    if (e->reserve_fd < 0) {
        e->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
}

/* Closes s's listener: the grpc_server goes on the retired list, where it finishes the calls it
 * carries (its clients get a GOAWAY and open their next calls on the new listener). */
static void server_retire(hv_rpc_server_t *s) {
    if (s->server == NULL) {
        return;
    }
    rpc_retired_t *r = hv_calloc(1, sizeof(*r));
    if (r == NULL) {
        return; /* tried again at the next watchdog tick */
    }
    r->server = s->server;
    r->op_shutdown.kind = OP_SHUTDOWN;
    r->op_shutdown.server = s;
    r->op_shutdown.retired = r;
    r->next = s->retired;
    s->retired = r;
    s->server = NULL;
    grpc_server_shutdown_and_notify(r->server, s->eng->cq, &r->op_shutdown);
}

/* A retired grpc_server finished its last call. */
static void server_retired_done(hv_rpc_server_t *s, rpc_retired_t *r) {
    for (rpc_retired_t **p = &s->retired; *p != NULL; p = &(*p)->next) {
        if (*p == r) {
            *p = r->next;
            break;
        }
    }
    grpc_server_destroy(r->server);
    hv_free(r);
}

/* Listens on s's address with a new grpc_server when s has none. */
static hv_err server_try_listen(hv_rpc_server_t *s) {
    if (s->server != NULL) {
        return HV_OK;
    }
    char err[600];
    grpc_server *gs = NULL;
    int port = 0;
    engine_release_reserve(s->eng);
    hv_err rc = server_listen(s, s->bound_addr, &gs, &port, err, sizeof(err));
    engine_take_reserve(s->eng);
    if (rc != HV_OK) {
        /* The old listener's socket closes once the connections it was setting up are done
         * (within the handshake timeout): until then the port is busy. */
        if (s->listen_fails++ % 100 == 0) {
            HV_LOG(HV_LOG_WARN, "rpc", "HV-RPC-RELISTEN-FAIL", "%s (%s); trying again every %d ms",
                   err, strerror(errno), RPC_RELISTEN_RETRY_MS);
        }
        return rc;
    }
    s->listen_fails = 0;
    s->server = gs;
    grpc_server_start(gs);
    for (int i = 0; i < RPC_PREPOSTED_CALLS; i++) {
        server_post_request(s);
    }
    s->relistens++;
    HV_LOG(HV_LOG_NOTICE, "rpc", "HV-RPC-RELISTEN", "listening again on %s (%u time(s))",
           s->bound_addr, s->relistens);
    return HV_OK;
}

hv_err hv_rpc_server_relisten(hv_rpc_server_t *s) {
    if (!s->started || s->shutting_down) {
        return HV_ESTATE;
    }
    server_retire(s);
    return server_try_listen(s);
}

unsigned hv_rpc_server_relistens(const hv_rpc_server_t *s) { return s->relistens; }

/* Every RPC_WATCHDOG_MS: a listener gRPC gave up on (rpc_accept_failed) is replaced, and one that
 * could not be opened yet is tried again. */
static void engine_watchdog_cb(uv_timer_t *t) {
    hv_rpc_engine_t *e = t->data;
    int failed = __atomic_exchange_n(&rpc_accept_failed, 0, __ATOMIC_ACQ_REL);
    int waiting = 0; /* a server has no listener yet */
    for (hv_rpc_server_t *s = e->servers; s != NULL; s = s->next) {
        if (!s->started || s->shutting_down) {
            continue;
        }
        if (failed && s->server != NULL) {
            HV_LOG(HV_LOG_WARN, "rpc", "HV-RPC-ACCEPT-FAILED",
                   "gRPC stopped accepting connections on %s (out of file descriptors?); "
                   "opening a new listener on the same address",
                   s->bound_addr);
            server_retire(s);
        }
        waiting |= server_try_listen(s) != HV_OK;
    }
    engine_take_reserve(e);
    uv_timer_set_repeat(t, waiting ? RPC_RELISTEN_RETRY_MS : RPC_WATCHDOG_MS);
}

static void engine_watchdog_start(hv_rpc_engine_t *e) {
    if (e->watchdog_on) {
        return;
    }
    uv_timer_init(e->loop, &e->watchdog);
    e->watchdog.data = e;
    uv_timer_start(&e->watchdog, engine_watchdog_cb, RPC_WATCHDOG_MS, RPC_WATCHDOG_MS);
    uv_unref((uv_handle_t *)&e->watchdog); /* never what keeps a loop running */
    e->watchdog_on = 1;
    engine_take_reserve(e);
}

void hv_rpc_engine_set_handshake_timeout(hv_rpc_engine_t *e, uint32_t ms) {
    e->handshake_timeout_ms = ms != 0 ? ms : HV_RPC_HANDSHAKE_TIMEOUT_MS;
}

/* ---- call API ------------------------------------------------------------------------------- */

hv_err hv_rpc_send(hv_rpc_call_t *c, const ProtobufCMessage *msg) {
    if (!c->open || c->finish_requested) {
        return HV_ECLOSED;
    }
    if (c->q_len >= HV_RPC_SEND_QUEUE_MAX) {
        return HV_ETOOBIG;
    }
    grpc_byte_buffer *bb;
    HV_TRY(msg_pack(msg, &bb));
    if (c->q_len == c->q_cap) {
        size_t ncap = c->q_cap ? c->q_cap * 2 : 16;
        grpc_byte_buffer **nq = hv_malloc(ncap * sizeof(*nq));
        if (nq == NULL) {
            grpc_byte_buffer_destroy(bb);
            return HV_ENOMEM;
        }
        for (size_t i = 0; i < c->q_len; i++) {
            nq[i] = c->q[(c->q_head + i) % c->q_cap];
        }
        hv_free(c->q);
        c->q = nq;
        c->q_head = 0;
        c->q_cap = ncap;
    }
    c->q[(c->q_head + c->q_len) % c->q_cap] = bb;
    c->q_len++;
    if (c->q_len >= HV_RPC_SEND_QUEUE_LOW) {
    }
    call_pump_send(c);
    return HV_OK;
}

static hv_err call_finish(hv_rpc_call_t *c, hv_err rc, int later, const char *fmt, va_list ap) {
    if (c->finish_requested || c->done_called) {
        return HV_OK;
    }
    c->finish_requested = 1;
    if (!c->is_client) {
        c->finish_rc = rc;
        c->finish_later = later;
        if (fmt != NULL) {
            char buf[512];
            vsnprintf(buf, sizeof(buf), fmt, ap);
            c->finish_details = grpc_slice_from_copied_string(buf);
            c->finish_details_set = 1;
            snprintf(c->st.msg, sizeof(c->st.msg), "%s", buf);
        }
        c->open = 0;
    }
    call_pump_send(c);
    return HV_OK;
}

hv_err hv_rpc_finish(hv_rpc_call_t *c, hv_err rc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    hv_err r = call_finish(c, rc, 0, fmt, ap);
    va_end(ap);
    return r;
}

hv_err hv_rpc_finish_later(hv_rpc_call_t *c, hv_err rc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    hv_err r = call_finish(c, rc, 1, fmt, ap);
    va_end(ap);
    return r;
}

hv_err hv_rpc_reply(hv_rpc_call_t *c, const ProtobufCMessage *msg) {
    hv_err rc = hv_rpc_send(c, msg);
    if (rc != HV_OK) {
        if (rc != HV_ECLOSED) {
            hv_rpc_finish(c, rc, "cannot send reply: %s", hv_strerror(rc));
        }
        return rc;
    }
    return hv_rpc_finish(c, HV_OK, NULL);
}

void hv_rpc_call_cancel(hv_rpc_call_t *c) {
    if (c->call != NULL && !c->close_done) {
        grpc_call_cancel(c->call, NULL);
    }
}

void hv_rpc_call_set_data(hv_rpc_call_t *c, void *data) { c->data = data; }
void *hv_rpc_call_data(const hv_rpc_call_t *c) { return c->data; }
void hv_rpc_call_set_drain_cb(hv_rpc_call_t *c, hv_rpc_drain_cb cb) { c->on_drain = cb; }
const char *hv_rpc_call_peer(const hv_rpc_call_t *c) { return c->peer; }
const char *hv_rpc_call_bearer(const hv_rpc_call_t *c) { return c->bearer; }
size_t hv_rpc_call_queued(const hv_rpc_call_t *c) { return c->q_len; }
int hv_rpc_call_open(const hv_rpc_call_t *c) { return c->open && !c->finish_requested; }

/* ---- channels ------------------------------------------------------------------------------- */

hv_err hv_rpc_channel_create(const char *target, hv_rpc_channel_t **out) {
    return hv_rpc_channel_create_tls(target, NULL, out, NULL, 0);
}

hv_err hv_rpc_channel_create_tls(const char *target, const hv_rpc_tls_t *tls,
                                 hv_rpc_channel_t **out, char *err, size_t errlen) {
    grpc_channel_credentials *creds = NULL;
    hv_rpc_channel_t *ch = hv_calloc(1, sizeof(*ch));
    if (ch == NULL) {
        return HV_ENOMEM;
    }
    rpc_quiet_grpc();
    grpc_init();
    if (tls != NULL) {
        hv_err rc = tls_channel_creds(tls, &creds, err, errlen);
        if (rc == HV_OK && (ch->ca_file = hv_strdup(tls->ca_file)) == NULL) {
            rc = HV_ENOMEM;
        }
        if (rc != HV_OK) {
            if (creds != NULL) {
                grpc_channel_credentials_release(creds);
            }
            hv_free(ch);
            grpc_shutdown();
            return rc;
        }
        ch->tls = 1;
    } else {
        creds = grpc_insecure_credentials_create();
    }
    grpc_arg a[16];
    size_t n;
    args_fill(a, &n, 0);
    grpc_channel_args args = {.num_args = n, .args = a};
    ch->ch = grpc_channel_create(target, creds, &args);
    grpc_channel_credentials_release(creds);
    snprintf(ch->target, sizeof(ch->target), "%s", target);
    if (ch->ch == NULL) {
        hv_free(ch->ca_file);
        hv_free(ch);
        grpc_shutdown();
        hv_errf(err, errlen, "cannot make a channel to %s", target);
        return HV_EINVAL;
    }
    *out = ch;
    return HV_OK;
}

hv_err hv_rpc_channel_set_token(hv_rpc_channel_t *ch, const char *token) {
    size_t len = token != NULL ? strlen(token) : 0;
    if (len > HV_RPC_MAX_TOKEN) {
        return HV_EINVAL;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char b = (unsigned char)token[i];
        if (b <= ' ' || b >= 0x7f) {
            return HV_EINVAL; /* a header value: printable ASCII, no spaces */
        }
    }
    volatile char *a = ch->auth; /* the old value is a secret: wipe it */
    for (size_t i = 0; i < sizeof(ch->auth); i++) {
        a[i] = 0;
    }
    if (len > 0) {
        snprintf(ch->auth, sizeof(ch->auth), "%s%s", RPC_BEARER, token);
    }
    return HV_OK;
}

void hv_rpc_channel_destroy(hv_rpc_channel_t *ch) {
    if (ch == NULL) {
        return;
    }
    hv_rpc_channel_set_token(ch, NULL);
    grpc_channel_destroy(ch->ch);
    hv_free(ch->ca_file);
    hv_free(ch);
    grpc_shutdown();
}

/* ---- event-driven client calls -------------------------------------------------------------- */

hv_err hv_rpc_call_start(hv_rpc_engine_t *e, hv_rpc_channel_t *ch, const char *path,
                         hv_rpc_kind kind, const ProtobufCMessage *req, uint32_t timeout_ms,
                         const hv_rpc_client_cbs_t *cbs, hv_rpc_call_t **out) {
    if (cbs == NULL || cbs->on_done == NULL || cbs->resp == NULL ||
        (kind != HV_RPC_BIDI && req == NULL) || (kind == HV_RPC_UNARY && timeout_ms == 0)) {
        return HV_EINVAL;
    }
    if (e->destroying) {
        return HV_ECLOSED;
    }
    grpc_byte_buffer *first = NULL;
    if (req != NULL) {
        HV_TRY(msg_pack(req, &first));
    }
    hv_rpc_call_t *c = call_new(e);
    if (c == NULL) {
        if (first != NULL) {
            grpc_byte_buffer_destroy(first);
        }
        return HV_ENOMEM;
    }
    c->is_client = 1;
    c->kind = kind;
    c->recv_desc = cbs->resp;
    c->on_msg = cbs->on_msg;
    c->on_done = cbs->on_done;
    c->ud = cbs->ud;
    c->open = 1;
    snprintf(c->peer, sizeof(c->peer), "%s", ch->target);
    c->chan_tls = ch->tls;
    grpc_slice method = grpc_slice_from_copied_string(path);
    c->call = grpc_channel_create_call(ch->ch, NULL, GRPC_PROPAGATE_DEFAULTS, e->cq, method, NULL,
                                       deadline_after(timeout_ms), NULL);
    grpc_slice_unref(method);

    grpc_op ops[4];
    size_t n = 0;
    memset(ops, 0, sizeof(ops));
    grpc_metadata md;
    ops[n].data.send_initial_metadata.count = channel_md(ch, &md);
    ops[n].data.send_initial_metadata.metadata = &md;
    ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[n++].data.recv_initial_metadata.recv_initial_metadata = &c->initial_md;
    if (kind != HV_RPC_BIDI) {
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = first;
        ops[n++].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
        c->sending = NULL;
        c->finish_requested = 1;
        c->final_sent = 1;
    }
    int bad = call_start_batch(c, ops, n, &c->op_start);
    md_release(&md);
    if (kind != HV_RPC_BIDI) {
        /* grpc took its own reference to the payload; ours goes once the batch is started. */
        c->sending = first;
        first = NULL;
    }
    grpc_op st;
    memset(&st, 0, sizeof(st));
    st.op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    st.data.recv_status_on_client.trailing_metadata = &c->trailing_md;
    st.data.recv_status_on_client.status = &c->status;
    st.data.recv_status_on_client.status_details = &c->status_details;
    st.data.recv_status_on_client.error_string = &c->error_string;
    bad |= call_start_batch(c, &st, 1, &c->op_close);
    if (bad) {
        if (first != NULL) {
            grpc_byte_buffer_destroy(first);
        }
        hv_rpc_call_cancel(c);
        c->done_called = 1; /* no callbacks for a call that never started */
        call_maybe_free(c);
        return HV_EINTERNAL;
    }
    call_start_recv(c);
    if (first != NULL) {
        /* bidi first message goes through the queue */
        c->q_cap = 16;
        c->q = hv_malloc(c->q_cap * sizeof(*c->q));
        if (c->q == NULL) {
            grpc_byte_buffer_destroy(first);
        } else {
            c->q[0] = first;
            c->q_len = 1;
            call_pump_send(c);
        }
    }
    if (out != NULL) {
        *out = c;
    }
    return HV_OK;
}

/* ---- dispatch ------------------------------------------------------------------------------- */

static void engine_dispatch(hv_rpc_engine_t *e, rpc_op_t *op) {
    (void)e;
    if (op->kind == OP_SHUTDOWN) {
        if (op->retired != NULL) {
            server_retired_done(op->server, op->retired);
        } else {
            op->server->shutdown_done = 1;
        }
        return;
    }
    hv_rpc_call_t *c = op->call;
    c->ops_outstanding--;
    switch (op->kind) {
    case OP_NEW_CALL:
        on_new_call(c, op->success);
        break;
    case OP_RECV:
        on_recv_done(c, op->success);
        break;
    case OP_SEND:
        on_send_done(c, op->success);
        break;
    case OP_CLOSE:
        on_close_done(c, op->success);
        break;
    case OP_START:
        if (c->sending != NULL) {
            grpc_byte_buffer_destroy(c->sending);
            c->sending = NULL;
        }
        break;
    default:
        break;
    }
    call_maybe_free(c);
}

void hv_rpc_engine_destroy(hv_rpc_engine_t *e) {
    if (e == NULL) {
        return;
    }
    e->destroying = 1;
    for (hv_rpc_server_t *s = e->servers; s != NULL; s = s->next) {
        if (s->started) {
            hv_rpc_server_shutdown(s);
        } else {
            s->shutdown_done = 1;
        }
    }
    for (hv_rpc_call_t *c = e->calls; c != NULL; c = c->next) {
        hv_rpc_call_cancel(c);
    }
    /* Let every call finish and every server confirm its shutdown (bounded). */
    uint64_t deadline = hv_now_ms() + 5000;
    for (;;) {
        int servers_done = 1;
        for (hv_rpc_server_t *s = e->servers; s != NULL; s = s->next) {
            servers_done &= s->shutdown_done && s->retired == NULL;
        }
        if ((servers_done && e->n_calls == 0) || hv_now_ms() > deadline) {
            break;
        }
        uv_run(e->loop, UV_RUN_ONCE);
    }
    if (e->n_calls != 0) {
        HV_LOG(HV_LOG_WARN, "rpc", "HV-RPC-LEAK", "%zu calls still open at engine shutdown",
               e->n_calls);
    }
    grpc_completion_queue_shutdown(e->cq);
    pthread_join(e->thread, NULL);
    engine_drain(e);
    while (e->servers != NULL) {
        hv_rpc_server_t *s = e->servers;
        e->servers = s->next;
        while (s->retired != NULL) {
            server_retired_done(s, s->retired);
        }
        if (s->server != NULL) {
            grpc_server_destroy(s->server);
        }
        server_free(s);
    }
    if (e->watchdog_on) {
        uv_close((uv_handle_t *)&e->watchdog, NULL);
    }
    engine_release_reserve(e);
    grpc_completion_queue_destroy(e->cq);
    uv_close((uv_handle_t *)&e->async, NULL);
    uv_run(e->loop, UV_RUN_NOWAIT);
    pthread_mutex_destroy(&e->mu);
    hv_free(e);
    grpc_shutdown();
}

/* ---- blocking client calls ------------------------------------------------------------------ */

hv_err hv_rpc_unary(hv_rpc_channel_t *ch, const char *path, const ProtobufCMessage *req,
                    const ProtobufCMessageDescriptor *resp_desc, uint32_t timeout_ms,
                    ProtobufCMessage **resp_out, hv_rpc_status_t *st) {
    hv_rpc_status_t local;
    if (st == NULL) {
        st = &local;
    }
    memset(st, 0, sizeof(*st));
    if (timeout_ms == 0) {
        status_set(st, GRPC_STATUS_INVALID_ARGUMENT, "unary call without a deadline", 29);
        return HV_EINVAL;
    }
    grpc_byte_buffer *send_bb;
    hv_err rc = msg_pack(req, &send_bb);
    if (rc != HV_OK) {
        status_set(st, GRPC_STATUS_RESOURCE_EXHAUSTED, "request too large", 17);
        st->rc = rc;
        return rc;
    }
    grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
    grpc_slice method = grpc_slice_from_copied_string(path);
    gpr_timespec deadline = deadline_after(timeout_ms);
    grpc_call *call = grpc_channel_create_call(ch->ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, method,
                                               NULL, deadline, NULL);
    grpc_slice_unref(method);

    grpc_metadata_array init_md, trail_md;
    grpc_metadata_array_init(&init_md);
    grpc_metadata_array_init(&trail_md);
    grpc_byte_buffer *recv_bb = NULL;
    grpc_status_code code = GRPC_STATUS_UNKNOWN;
    grpc_slice details = grpc_empty_slice();
    const char *error_string = NULL;
    grpc_op ops[6];
    memset(ops, 0, sizeof(ops));
    grpc_metadata md;
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].data.send_initial_metadata.count = channel_md(ch, &md);
    ops[0].data.send_initial_metadata.metadata = &md;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = send_bb;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &init_md;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &recv_bb;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &trail_md;
    ops[5].data.recv_status_on_client.status = &code;
    ops[5].data.recv_status_on_client.status_details = &details;
    ops[5].data.recv_status_on_client.error_string = &error_string;
    static int tag;
    grpc_call_error err = grpc_call_start_batch(call, ops, 6, &tag, NULL);
    md_release(&md);
    if (err == GRPC_CALL_OK) {
        /* The deadline is enforced by gRPC; the extra second only guards against a lost tag. */
        grpc_event ev = grpc_completion_queue_pluck(
            cq, &tag, gpr_time_add(deadline, gpr_time_from_millis(1000, GPR_TIMESPAN)), NULL);
        if (ev.type != GRPC_OP_COMPLETE) {
            grpc_call_cancel(call, NULL);
            grpc_completion_queue_pluck(cq, &tag, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        }
        status_from_client(st, code, details, error_string, &trail_md);
        hv_rpc_explain_transport(ch->tls, ch->ca_file, st);
    } else {
        status_set(st, GRPC_STATUS_INTERNAL, "cannot start call", 17);
    }
    rc = st->rc;
    if (rc == HV_OK) {
        if (recv_bb == NULL) {
            status_set(st, GRPC_STATUS_INTERNAL, "empty reply", 11);
            rc = st->rc = HV_EPROTO;
        } else {
            ProtobufCMessage *m = msg_unpack(resp_desc, recv_bb);
            recv_bb = NULL;
            if (m == NULL) {
                status_set(st, GRPC_STATUS_INTERNAL, "malformed reply", 15);
                rc = st->rc = HV_EPROTO;
            } else {
                *resp_out = m;
            }
        }
    }
    if (recv_bb != NULL) {
        grpc_byte_buffer_destroy(recv_bb);
    }
    grpc_byte_buffer_destroy(send_bb);
    grpc_slice_unref(details);
    if (error_string != NULL) {
        gpr_free((void *)error_string);
    }
    grpc_metadata_array_destroy(&init_md);
    grpc_metadata_array_destroy(&trail_md);
    grpc_call_unref(call);
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
           GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(cq);
    return rc;
}

struct hv_rpc_bstream_s {
    grpc_completion_queue *cq;
    grpc_call *call;
    const ProtobufCMessageDescriptor *desc;
    grpc_byte_buffer *send_bb;
    grpc_metadata_array init_md, trail_md;
    grpc_byte_buffer *recv_bb;
    grpc_status_code code;
    grpc_slice details;
    const char *error_string;
    int tag_start, tag_status, tag_recv; /* addresses used as tags */
    int start_pending, status_pending, recv_pending;
    int eof;
    int chan_tls; /* the channel uses TLS (for hv_rpc_explain_transport) */
    hv_rpc_status_t st;
};

static void bstream_handle(hv_rpc_bstream_t *s, grpc_event ev) {
    if (ev.tag == &s->tag_start) {
        s->start_pending = 0;
    } else if (ev.tag == &s->tag_status) {
        s->status_pending = 0;
        status_from_client(&s->st, s->code, s->details, s->error_string, &s->trail_md);
        hv_rpc_explain_transport(s->chan_tls, NULL, &s->st);
    } else if (ev.tag == &s->tag_recv) {
        s->recv_pending = 0;
        if (!ev.success || s->recv_bb == NULL) {
            s->eof = 1;
        }
    }
}

hv_err hv_rpc_bstream_open(hv_rpc_channel_t *ch, const char *path, const ProtobufCMessage *req,
                           const ProtobufCMessageDescriptor *resp_desc, uint32_t timeout_ms,
                           hv_rpc_bstream_t **out) {
    hv_rpc_bstream_t *s = hv_calloc(1, sizeof(*s));
    if (s == NULL) {
        return HV_ENOMEM;
    }
    hv_err rc = msg_pack(req, &s->send_bb);
    if (rc != HV_OK) {
        hv_free(s);
        return rc;
    }
    s->desc = resp_desc;
    s->chan_tls = ch->tls;
    s->cq = grpc_completion_queue_create_for_next(NULL);
    grpc_slice method = grpc_slice_from_copied_string(path);
    s->call = grpc_channel_create_call(ch->ch, NULL, GRPC_PROPAGATE_DEFAULTS, s->cq, method, NULL,
                                       deadline_after(timeout_ms), NULL);
    grpc_slice_unref(method);
    grpc_metadata_array_init(&s->init_md);
    grpc_metadata_array_init(&s->trail_md);
    s->details = grpc_empty_slice();
    grpc_op ops[4];
    memset(ops, 0, sizeof(ops));
    grpc_metadata md;
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].data.send_initial_metadata.count = channel_md(ch, &md);
    ops[0].data.send_initial_metadata.metadata = &md;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = s->send_bb;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &s->init_md;
    if (grpc_call_start_batch(s->call, ops, 4, &s->tag_start, NULL) == GRPC_CALL_OK) {
        s->start_pending = 1;
    }
    md_release(&md);
    grpc_op st;
    memset(&st, 0, sizeof(st));
    st.op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    st.data.recv_status_on_client.trailing_metadata = &s->trail_md;
    st.data.recv_status_on_client.status = &s->code;
    st.data.recv_status_on_client.status_details = &s->details;
    st.data.recv_status_on_client.error_string = &s->error_string;
    if (grpc_call_start_batch(s->call, &st, 1, &s->tag_status, NULL) == GRPC_CALL_OK) {
        s->status_pending = 1;
    }
    if (!s->start_pending || !s->status_pending) {
        hv_rpc_bstream_destroy(s);
        return HV_EINTERNAL;
    }
    *out = s;
    return HV_OK;
}

hv_err hv_rpc_bstream_next(hv_rpc_bstream_t *s, uint32_t wait_ms, ProtobufCMessage **out,
                           hv_rpc_status_t *st) {
    if (!s->eof && !s->recv_pending) {
        grpc_op op;
        memset(&op, 0, sizeof(op));
        op.op = GRPC_OP_RECV_MESSAGE;
        op.data.recv_message.recv_message = &s->recv_bb;
        if (grpc_call_start_batch(s->call, &op, 1, &s->tag_recv, NULL) == GRPC_CALL_OK) {
            s->recv_pending = 1;
        } else {
            s->eof = 1;
        }
    }
    gpr_timespec deadline = deadline_after(wait_ms ? wait_ms : 1);
    /* Wait for a message; at end of stream, also for the status (bounded by the call's end). */
    while (s->recv_pending || (s->eof && s->status_pending)) {
        grpc_event ev = grpc_completion_queue_next(s->cq, deadline, NULL);
        if (ev.type == GRPC_QUEUE_TIMEOUT) {
            return HV_ETIMEDOUT;
        }
        if (ev.type != GRPC_OP_COMPLETE) {
            break;
        }
        bstream_handle(s, ev);
        if (ev.tag == &s->tag_recv && !s->eof) {
            ProtobufCMessage *m = msg_unpack(s->desc, s->recv_bb);
            s->recv_bb = NULL;
            if (m == NULL) {
                grpc_call_cancel(s->call, NULL);
                s->eof = 1;
                status_set(&s->st, GRPC_STATUS_INTERNAL, "malformed message", 17);
                s->st.rc = HV_EPROTO;
                continue;
            }
            *out = m;
            return HV_OK;
        }
    }
    if (st != NULL) {
        *st = s->st;
    }
    return HV_ECLOSED;
}

void hv_rpc_bstream_cancel(hv_rpc_bstream_t *s) { grpc_call_cancel(s->call, NULL); }

void hv_rpc_bstream_destroy(hv_rpc_bstream_t *s) {
    if (s == NULL) {
        return;
    }
    if (s->start_pending || s->status_pending || s->recv_pending) {
        grpc_call_cancel(s->call, NULL);
    }
    while (s->start_pending || s->status_pending || s->recv_pending) {
        grpc_event ev =
            grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        if (ev.type != GRPC_OP_COMPLETE) {
            break;
        }
        bstream_handle(s, ev);
    }
    if (s->recv_bb != NULL) {
        grpc_byte_buffer_destroy(s->recv_bb);
    }
    grpc_byte_buffer_destroy(s->send_bb);
    grpc_slice_unref(s->details);
    if (s->error_string != NULL) {
        gpr_free((void *)s->error_string);
    }
    grpc_metadata_array_destroy(&s->init_md);
    grpc_metadata_array_destroy(&s->trail_md);
    grpc_call_unref(s->call);
    grpc_completion_queue_shutdown(s->cq);
    while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
           GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(s->cq);
    hv_free(s);
}

/* ---- transport failures in plain words ---------------------------------------------------- */

/* The host part of "HOST:PORT" / "[V6]:PORT" into buf. */
static const char *rpc_host_of(const char *target, char *buf, size_t len) {
    const char *h = target != NULL ? target : "";
    const char *colon = strrchr(h, ':');
    size_t n = colon != NULL ? (size_t)(colon - h) : strlen(h);
    if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
        h++;
        n -= 2;
    }
    snprintf(buf, len, "%.*s", (int)n, h);
    return buf;
}

/* Texts gRPC core writes (lower case, matched case-insensitively) and what they mean. The
 * first match wins: name resolution before "failed to connect", which wraps everything. */
static const struct {
    const char *word;
    const char *plain; /* NULL: "cannot resolve host" */
} rpc_transport_words[] = {
    {"connection refused", "connection refused"},
    {"dns resolution", NULL},
    {"ares", NULL},
    {"name resolution", NULL},
    {"domain name not found", NULL},
    {"empty address list", NULL},
    {"resolve", NULL},
    {"no route to host", "no route to host"},
    {"network is unreachable", "network is unreachable"},
    {"handshake", "the secure (TLS) handshake failed"},
    {"ssl", "the secure (TLS) handshake failed"},
    {"certificate", "the secure (TLS) handshake failed"},
    {"timed out", "timed out connecting"},
    {"deadline", "timed out connecting"},
    {"connection reset", "the connection was closed"},
    {"socket closed", "the connection was closed"},
    {"broken pipe", "the connection was closed"},
    {"goaway", "the connection was closed"},
    {"stream removed", "the connection was closed"},
    {"transport closed", "the connection was closed"},
    {"cancelling all calls", "the connection was closed"},
    {"keepalive", "the connection was closed"},
    {"connect failed", "no connection could be made"},
    {"failed to connect", "no connection could be made"},
    {"endpoint", "no connection could be made"},
};

const char *hv_rpc_plain_transport_error(const char *detail, const char *target, char *buf,
                                         size_t len) {
    if (detail == NULL || buf == NULL || len == 0) {
        return NULL;
    }
    for (size_t i = 0; i < sizeof(rpc_transport_words) / sizeof(rpc_transport_words[0]); i++) {
        if (strcasestr(detail, rpc_transport_words[i].word) == NULL) {
            continue;
        }
        if (rpc_transport_words[i].plain != NULL) {
            snprintf(buf, len, "%s", rpc_transport_words[i].plain);
        } else {
            char host[256];
            snprintf(buf, len, "cannot resolve host '%s'", rpc_host_of(target, host, sizeof(host)));
        }
        return buf;
    }
    return NULL;
}

const char *hv_rpc_transport_words(const hv_rpc_status_t *st, const char *target, char *buf,
                                   size_t len) {
    if (st == NULL || buf == NULL || len == 0) {
        return NULL;
    }
    if (st->explained) { /* this layer's own words already: never read again */
        snprintf(buf, len, "%s", st->msg);
        return buf;
    }
    return hv_rpc_plain_transport_error(st->msg, target, buf, len);
}
