/*
 * rpc_test: the gRPC layer end to end over loopback: a real server on an engine + libuv loop
 * (main thread) and real clients, blocking ones on a second thread and an event-driven one on
 * the same loop. Cases run alone by name: rpc_test [case].
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#define HV_CHECK_FATAL // a case cannot go on past a failed step
#include "hv_check.h"
#include "hv.pb-c.h"
#include "mem.h"
#include "rpc.h"
#include "serve_test.h"
#include "util.h"

static uv_loop_t loop;
static hv_rpc_engine_t *eng;
static hv_rpc_server_t *srv;
static char target[64];
static int n_cancelled; /* server calls that ended cancelled */
static int n_done;

/* GetJob: job 7 exists; job 99 never answers (deadline test); others NOT_FOUND. */
static void get_job(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    (void)ud;
    const Hvpb__V1__JobRef *r = (const Hvpb__V1__JobRef *)m;
    if (r->job_id == 7) {
        Hvpb__V1__JobView v = HVPB__V1__JOB_VIEW__INIT;
        v.job_id = 7;
        v.name = "seven";
        v.state = "running";
        hv_rpc_reply(c, &v.base);
    } else if (r->job_id != 99) {
        hv_rpc_finish(c, HV_ENOTFOUND, "no job %llu", (unsigned long long)r->job_id);
    }
}

static void count_done(hv_rpc_call_t *c, const hv_rpc_status_t *st, void *ud) {
    (void)c;
    (void)ud;
    n_done++;
    if (st->rc == HV_ECANCELED) {
        n_cancelled++;
    }
}

/* Watch: stream job_id log lines, then finish. Uses on_drain for backpressure. */
typedef struct {
    uint64_t next, total;
} watch_state_t;

static void watch_pump(hv_rpc_call_t *c, void *ud) {
    (void)ud;
    watch_state_t *ws = hv_rpc_call_data(c);
    char text[32];
    while (ws->next < ws->total) {
        Hvpb__V1__LogLine line = HVPB__V1__LOG_LINE__INIT;
        Hvpb__V1__WatchItem item = HVPB__V1__WATCH_ITEM__INIT;
        snprintf(text, sizeof(text), "line %llu", (unsigned long long)ws->next);
        line.text = text;
        line.rank = (uint32_t)ws->next;
        item.body_case = HVPB__V1__WATCH_ITEM__BODY_LOG;
        item.log = &line;
        hv_err rc = hv_rpc_send(c, &item.base);
        if (rc == HV_ETOOBIG) {
            return; /* wait for on_drain */
        }
        CHECK_RC(rc, HV_OK);
        ws->next++;
    }
    hv_rpc_finish(c, HV_OK, NULL);
}

static void watch(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    const Hvpb__V1__WatchRequest *r = (const Hvpb__V1__WatchRequest *)m;
    watch_state_t *ws = hv_calloc(1, sizeof(*ws));
    ws->total = r->job_id;
    hv_rpc_call_set_data(c, ws);
    hv_rpc_call_set_drain_cb(c, watch_pump);
    watch_pump(c, ud);
}

static void watch_done(hv_rpc_call_t *c, const hv_rpc_status_t *st, void *ud) {
    hv_free(hv_rpc_call_data(c));
    count_done(c, st, ud);
}

/* Session: bidi echo, acks every seq. */
static void session(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    (void)ud;
    const Hvpb__V1__AgentMsg *a = (const Hvpb__V1__AgentMsg *)m;
    Hvpb__V1__HeadMsg h = HVPB__V1__HEAD_MSG__INIT;
    h.ack_seq = a->seq;
    CHECK_RC(hv_rpc_send(c, &h.base), HV_OK);
}

/* The gate: job ids from 10^9 on need the bearer "hvc_good"; none -> HV_EAUTH, another ->
 * HV_EPERM. Watch streams from 10^9 on too. Other calls pass untouched. */
static char gate_seen[HV_RPC_MAX_TOKEN + 1];
/* The end hook: each call's end, with whether the gate saw the same call (by pointer). */
static const hv_rpc_call_t *gate_last_call;
static int end_not_found_matched; /* the GetJob of job 42 ended NOT_FOUND "no job 42" */
static void test_end_hook(const hv_rpc_call_t *c, const char *path, int code, const char *detail,
                          void *ud) {
    (void)ud;
    if (path != NULL && strcmp(path, "/hvpb.v1.Jobs/GetJob") == 0 && code == 5 &&
        strcmp(detail, "no job 42") == 0 && c == gate_last_call) {
        end_not_found_matched++;
    }
}

static hv_err test_gate(hv_rpc_call_t *c, const char *path, const ProtobufCMessage *first,
                        char *msg, size_t msglen, void *ud) {
    (void)ud;
    gate_last_call = c;
    uint64_t id = 0;
    if (strcmp(path, "/hvpb.v1.Jobs/GetJob") == 0) {
        id = ((const Hvpb__V1__JobRef *)first)->job_id;
    } else if (strcmp(path, "/hvpb.v1.Jobs/Watch") == 0) {
        id = ((const Hvpb__V1__WatchRequest *)first)->job_id;
    }
    if (id < 1000000000) {
        return HV_OK;
    }
    const char *b = hv_rpc_call_bearer(c);
    snprintf(gate_seen, sizeof(gate_seen), "%s", b);
    if (b[0] == '\0') {
        snprintf(msg, msglen, "no credential");
        return HV_EAUTH;
    }
    if (strcmp(b, "hvc_good") != 0) {
        snprintf(msg, msglen, "wrong credential");
        return HV_EPERM;
    }
    return HV_OK;
}

static void server_up(void) {
    CHECK(uv_loop_init(&loop) == 0);
    CHECK_RC(hv_rpc_engine_create(&loop, &eng), HV_OK);
    int port = 0;
    CHECK_RC(hv_rpc_server_create(eng, "127.0.0.1:0", &srv, &port), HV_OK);
    CHECK(port > 0);
    snprintf(target, sizeof(target), "127.0.0.1:%d", port);
    hv_rpc_method_t m1 = {"/hvpb.v1.Jobs/GetJob",
                          HV_RPC_UNARY,
                          &hvpb__v1__job_ref__descriptor,
                          get_job,
                          count_done,
                          NULL};
    hv_rpc_method_t m2 = {"/hvpb.v1.Jobs/Watch",
                          HV_RPC_SERVER_STREAM,
                          &hvpb__v1__watch_request__descriptor,
                          watch,
                          watch_done,
                          NULL};
    hv_rpc_method_t m3 = {"/hvpb.v1.Cluster/Session",
                          HV_RPC_BIDI,
                          &hvpb__v1__agent_msg__descriptor,
                          session,
                          count_done,
                          NULL};
    CHECK_RC(hv_rpc_server_add(srv, &m1), HV_OK);
    CHECK_RC(hv_rpc_server_add(srv, &m2), HV_OK);
    CHECK_RC(hv_rpc_server_add(srv, &m3), HV_OK);
    hv_rpc_server_set_gate(srv, test_gate, NULL);
    hv_rpc_server_set_end_hook(srv, test_end_hook, NULL);
    CHECK_RC(hv_rpc_server_start(srv), HV_OK);
}

static void server_down(void) {
    hv_rpc_server_shutdown(srv);
    hv_rpc_engine_destroy(eng);
    CHECK(uv_loop_close(&loop) == 0);
}

/* Runs fn on a client thread while the main thread serves; serve_hook (optional) runs on the
 * loop thread between turns. */
static void (*serve_hook)(void);
static void serve_while(void *(*fn)(void *)) { serve_test_while(&loop, fn, serve_hook, 30000); }

/* A channel to where (a failed check when it cannot be made). */
static hv_rpc_channel_t *channel_to(const char *where) {
    hv_rpc_channel_t *ch = NULL;
    CHECK_RC(hv_rpc_channel_create(where, &ch), HV_OK);
    return ch;
}

/* A reference to job id. */
static Hvpb__V1__JobRef job_ref(uint64_t id) {
    Hvpb__V1__JobRef r = HVPB__V1__JOB_REF__INIT;
    r.job_id = id;
    return r;
}

/* A case: fn on a client thread against a server started for it. */
static int served(void *(*fn)(void *)) {
    server_up();
    serve_while(fn);
    server_down();
    return 0;
}

/* Jobs/GetJob with r on ch, timeout_ms at most. */
static hv_err call_get_job(hv_rpc_channel_t *ch, Hvpb__V1__JobRef *r, int timeout_ms,
                           ProtobufCMessage **resp, hv_rpc_status_t *st) {
    return hv_rpc_unary(ch, "/hvpb.v1.Jobs/GetJob", &r->base, &hvpb__v1__job_view__descriptor,
                        timeout_ms, resp, st);
}

static void *unary_client(void *arg) {
    (void)arg;
    hv_rpc_channel_t *ch = channel_to(target);
    Hvpb__V1__JobRef r = job_ref(7);
    ProtobufCMessage *resp = NULL;
    hv_rpc_status_t st;
    CHECK_RC(call_get_job(ch, &r, 2000, &resp, &st), HV_OK);
    Hvpb__V1__JobView *v = (Hvpb__V1__JobView *)resp;
    CHECK(v->job_id == 7 && strcmp(v->name, "seven") == 0);
    hv_rpc_msg_free(resp);
    r.job_id = 42;
    CHECK_RC(call_get_job(ch, &r, 2000, &resp, &st), HV_ENOTFOUND);
    CHECK(strcmp(st.msg, "no job 42") == 0);
    /* unknown method */
    CHECK_RC(hv_rpc_unary(ch, "/hvpb.v1.Jobs/Nope", &r.base, &hvpb__v1__job_view__descriptor, 2000,
                          &resp, &st),
             HV_ENOTSUP);
    /* deadline: the server never answers job 99 */
    uint64_t t0 = hv_now_ms();
    r.job_id = 99;
    CHECK_RC(call_get_job(ch, &r, 300, &resp, &st), HV_ETIMEDOUT);
    CHECK(hv_now_ms() - t0 < 2000);
    /* oversized request is refused before sending */
    Hvpb__V1__UploadChunk big = HVPB__V1__UPLOAD_CHUNK__INIT;
    big.data.len = HV_RPC_MAX_MSG + 10;
    big.data.data = hv_calloc(1, big.data.len);
    CHECK_RC(hv_rpc_unary(ch, "/hvpb.v1.Jobs/Upload", &big.base,
                          &hvpb__v1__upload_reply__descriptor, 2000, &resp, &st),
             HV_ETOOBIG);
    hv_free(big.data.data);
    hv_rpc_channel_destroy(ch);
    return NULL;
}

static int case_unary(void) {
    server_up();
    serve_while(unary_client);
    CHECK(n_cancelled >= 1);           /* the deadline call ended cancelled on the server */
    CHECK(end_not_found_matched == 1); /* the end hook: same call as the gate's, code, detail */
    server_down();
    return 0;
}

#define N_STREAM 20000
static void *stream_client(void *arg) {
    (void)arg;
    hv_rpc_channel_t *ch = channel_to(target);
    Hvpb__V1__WatchRequest r = HVPB__V1__WATCH_REQUEST__INIT;
    r.job_id = N_STREAM;
    hv_rpc_bstream_t *s;
    CHECK_RC(hv_rpc_bstream_open(ch, "/hvpb.v1.Jobs/Watch", &r.base,
                                 &hvpb__v1__watch_item__descriptor, 30000, &s),
             HV_OK);
    uint32_t expect = 0;
    for (;;) {
        ProtobufCMessage *m = NULL;
        hv_rpc_status_t st;
        hv_err rc = hv_rpc_bstream_next(s, 5000, &m, &st);
        if (rc == HV_ECLOSED) {
            CHECK_RC(st.rc, HV_OK);
            break;
        }
        CHECK_RC(rc, HV_OK);
        Hvpb__V1__WatchItem *it = (Hvpb__V1__WatchItem *)m;
        CHECK(it->body_case == HVPB__V1__WATCH_ITEM__BODY_LOG && it->log->rank == expect);
        expect++;
        hv_rpc_msg_free(m);
    }
    CHECK(expect == N_STREAM);
    hv_rpc_bstream_destroy(s);
    /* cancel mid-stream from the client */
    r.job_id = 1000000;
    CHECK_RC(hv_rpc_bstream_open(ch, "/hvpb.v1.Jobs/Watch", &r.base,
                                 &hvpb__v1__watch_item__descriptor, 30000, &s),
             HV_OK);
    ProtobufCMessage *m = NULL;
    CHECK_RC(hv_rpc_bstream_next(s, 5000, &m, NULL), HV_OK);
    hv_rpc_msg_free(m);
    hv_rpc_bstream_destroy(s);
    hv_rpc_channel_destroy(ch);
    return NULL;
}

static int case_stream(void) { return served(stream_client); }

/* Event-driven bidi client on the same loop as the server. */
static int bidi_acked, bidi_status_done;
static hv_rpc_status_t bidi_st;
static void bidi_msg(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    (void)ud;
    const Hvpb__V1__HeadMsg *h = (const Hvpb__V1__HeadMsg *)m;
    CHECK(h->ack_seq == (uint64_t)bidi_acked + 1);
    bidi_acked++;
    if (bidi_acked == 100) {
        hv_rpc_call_cancel(c);
    }
}
static void bidi_done(hv_rpc_call_t *c, const hv_rpc_status_t *st, void *ud) {
    (void)c;
    (void)ud;
    bidi_st = *st;
    bidi_status_done = 1;
}

static int case_bidi(void) {
    server_up();
    hv_rpc_channel_t *ch = channel_to(target);
    hv_rpc_client_cbs_t cbs = {&hvpb__v1__head_msg__descriptor, bidi_msg, bidi_done, NULL};
    hv_rpc_call_t *c;
    CHECK_RC(hv_rpc_call_start(eng, ch, "/hvpb.v1.Cluster/Session", HV_RPC_BIDI, NULL, 0, &cbs, &c),
             HV_OK);
    for (int i = 1; i <= 100; i++) {
        Hvpb__V1__AgentMsg a = HVPB__V1__AGENT_MSG__INIT;
        a.seq = (uint64_t)i;
        CHECK_RC(hv_rpc_send(c, &a.base), HV_OK);
    }
    uint64_t deadline = hv_now_ms() + 10000;
    while (!bidi_status_done && hv_now_ms() < deadline) {
        uv_run(&loop, UV_RUN_ONCE);
    }
    CHECK(bidi_status_done && bidi_acked == 100);
    CHECK_RC(bidi_st.rc, HV_ECANCELED);
    /* A second session left open must be torn down by engine destroy without leaks. */
    CHECK_RC(hv_rpc_call_start(eng, ch, "/hvpb.v1.Cluster/Session", HV_RPC_BIDI, NULL, 0, &cbs, &c),
             HV_OK);
    bidi_status_done = 0;
    for (int i = 0; i < 20; i++) {
        uv_run(&loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
    server_down();
    CHECK(bidi_status_done);
    hv_rpc_channel_destroy(ch);
    return 0;
}

static void *down_client(void *arg) {
    (void)arg;
    hv_rpc_channel_t *ch = channel_to("127.0.0.1:1");
    Hvpb__V1__JobRef r = HVPB__V1__JOB_REF__INIT;
    ProtobufCMessage *resp = NULL;
    hv_rpc_status_t st;
    uint64_t t0 = hv_now_ms();
    CHECK_RC(call_get_job(ch, &r, 5000, &resp, &st), HV_EUNAVAIL);
    CHECK(hv_now_ms() - t0 < 2000);
    CHECK(strlen(st.msg) > 0);
    hv_rpc_channel_destroy(ch);
    return NULL;
}

static int case_unavailable(void) {
    down_client(NULL);
    return 0;
}

/* What gRPC core says for a dead port and an unknown host, and the plain words users get. */
static int case_plain_errors(void) {
    char buf[300];
    CHECK(hv_rpc_plain_transport_error("failed to connect to all addresses; last error: UNKNOWN: "
                                       "ipv4:127.0.0.1:1: Connection refused",
                                       "127.0.0.1:1", buf, sizeof(buf)) == buf);
    CHECK(strcmp(buf, "connection refused") == 0);
    CHECK(hv_rpc_plain_transport_error("DNS resolution failed for nohost.invalid:7000: C-ares "
                                       "status is not ARES_SUCCESS qtype=A name=nohost.invalid "
                                       "is_balancer=0: Domain name not found",
                                       "nohost.invalid:7000", buf, sizeof(buf)) == buf);
    CHECK(strcmp(buf, "cannot resolve host 'nohost.invalid'") == 0);
    CHECK(hv_rpc_plain_transport_error("empty address list", "[::1]:7000", buf, sizeof(buf)) ==
          buf);
    CHECK(strcmp(buf, "cannot resolve host '::1'") == 0);
    CHECK(hv_rpc_plain_transport_error("Socket closed", "h:1", buf, sizeof(buf)) == buf);
    CHECK(strcmp(buf, "the connection was closed") == 0);
    /* A message the peer wrote itself is not a transport text. */
    CHECK(hv_rpc_plain_transport_error("no node has joined the cluster", "h:1", buf, sizeof(buf)) ==
          NULL);
    /* And what a real failed call carries is recognised. */
    hv_rpc_channel_t *ch = channel_to("127.0.0.1:1");
    Hvpb__V1__JobRef r = HVPB__V1__JOB_REF__INIT;
    ProtobufCMessage *resp = NULL;
    hv_rpc_status_t st;
    CHECK_RC(call_get_job(ch, &r, 5000, &resp, &st), HV_EUNAVAIL);
    CHECK(hv_rpc_plain_transport_error(st.msg, "127.0.0.1:1", buf, sizeof(buf)) != NULL);
    CHECK(strcmp(buf, "connection refused") == 0);
    hv_rpc_channel_destroy(ch);
    return 0;
}

/* A call to a port where nothing listens: the status says so in fields (never_connected,
 * refused), read once from gRPC core, which stay whatever this layer writes in msg. */
static int case_never_connected(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
          getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
    close(fd); /* the port is free again: nothing listens there */
    char where[64];
    snprintf(where, sizeof(where), "127.0.0.1:%u", (unsigned)ntohs(sa.sin_port));
    hv_rpc_channel_t *ch = channel_to(where);
    Hvpb__V1__JobRef r = HVPB__V1__JOB_REF__INIT;
    ProtobufCMessage *resp = NULL;
    hv_rpc_status_t st;
    CHECK_RC(call_get_job(ch, &r, 2000, &resp, &st), HV_EUNAVAIL);
    CHECK(st.never_connected == 1);
    CHECK(st.refused == 1);
    CHECK(st.from_server == 0);
    hv_rpc_channel_destroy(ch);
    /* Explaining the failure in other words keeps the fields. */
    hv_rpc_explain_transport(1, "/ca.pem", &st);
    snprintf(st.msg, sizeof(st.msg), "%s", "keine Verbindung");
    CHECK(st.never_connected == 1 && st.refused == 1);
    return 0;
}

/* Whether a transport failure is already in the user's terms is a mark on the status
 * (hv_rpc_status_t.explained), not the words: an explanation in other words is shown as it is,
 * and gRPC's own text that happens to start with "TLS" is still put in plain words. */
static int case_explained_mark(void) {
    char buf[600];
    hv_rpc_status_t st;
    memset(&st, 0, sizeof(st));
    st.grpc_code = 14; /* UNAVAILABLE, from the transport */
    snprintf(st.msg, sizeof(st.msg), "%s", "ssl_transport_security.cc: CERTIFICATE_VERIFY_FAILED");
    hv_rpc_explain_transport(1, "/ca.pem", &st);
    CHECK(st.explained == 1);
    CHECK(strstr(st.msg, "'/ca.pem'") != NULL);
    CHECK(hv_rpc_transport_words(&st, "h:1", buf, sizeof(buf)) == buf);
    CHECK(strcmp(buf, st.msg) == 0);
    /* The same mark on other words: they are shown as they are, transport words and all. */
    snprintf(st.msg, sizeof(st.msg), "%s",
             "Zertifikat abgelehnt (connection reset, failed to connect)");
    CHECK(hv_rpc_transport_words(&st, "h:1", buf, sizeof(buf)) == buf);
    CHECK(strcmp(buf, "Zertifikat abgelehnt (connection reset, failed to connect)") == 0);
    /* No mark: gRPC's text, whatever it starts with, in plain words. */
    st.explained = 0;
    snprintf(st.msg, sizeof(st.msg), "%s", "TLS session: connection reset by peer");
    CHECK(hv_rpc_transport_words(&st, "h:1", buf, sizeof(buf)) == buf);
    CHECK(strcmp(buf, "the connection was closed") == 0);
    /* A message the peer wrote itself: neither. */
    snprintf(st.msg, sizeof(st.msg), "%s", "no node has joined the cluster");
    CHECK(hv_rpc_transport_words(&st, "h:1", buf, sizeof(buf)) == NULL);
    /* The head's own status is never explained again. */
    st.from_server = 1;
    st.grpc_code = 14;
    snprintf(st.msg, sizeof(st.msg), "%s", "handshake: busy");
    hv_rpc_explain_transport(1, NULL, &st);
    CHECK(st.explained == 0 && strcmp(st.msg, "handshake: busy") == 0);
    /* Without TLS, gRPC's "Handshake read failed" (its handshaker runs on plain-text channels
     * too) is a head that closed the connection during setup, not a secure handshake. */
    memset(&st, 0, sizeof(st));
    st.grpc_code = 14;
    snprintf(st.msg, sizeof(st.msg), "%s",
             "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: "
             "Handshake read failed");
    hv_rpc_explain_transport(0, NULL, &st);
    CHECK(st.explained == 1);
    CHECK(strstr(st.msg, "closed the connection during setup") != NULL);
    CHECK(hv_rpc_transport_words(&st, "h:1", buf, sizeof(buf)) == buf);
    CHECK(strstr(buf, "TLS) handshake failed") == NULL);
    return 0;
}

/* Bearer credentials: carried by every call on a channel after hv_rpc_channel_set_token, read
 * by the server, refused by the gate before the handler runs, with UNAUTHENTICATED (16) and
 * PERMISSION_DENIED (7) kept apart; malformed tokens are refused locally. */
static void *bearer_client(void *arg) {
    (void)arg;
    hv_rpc_channel_t *ch = channel_to(target);
    Hvpb__V1__JobRef r = job_ref(1000000000);
    ProtobufCMessage *resp = NULL;
    hv_rpc_status_t st;
    CHECK_RC(call_get_job(ch, &r, 2000, &resp, &st), HV_EAUTH);
    CHECK(st.grpc_code == 16);
    CHECK(strcmp(st.msg, "no credential") == 0);
    CHECK_RC(hv_rpc_channel_set_token(ch, "hvc_bad"), HV_OK);
    CHECK_RC(call_get_job(ch, &r, 2000, &resp, &st), HV_EPERM);
    CHECK(st.grpc_code == 7);
    CHECK(strcmp(gate_seen, "hvc_bad") == 0);
    CHECK_RC(hv_rpc_channel_set_token(ch, "hvc_good"), HV_OK);
    /* passes the gate, then the handler answers NOT_FOUND */
    CHECK_RC(call_get_job(ch, &r, 2000, &resp, &st), HV_ENOTFOUND);
    CHECK(strcmp(gate_seen, "hvc_good") == 0);
    /* a server stream carries it too */
    Hvpb__V1__WatchRequest w = HVPB__V1__WATCH_REQUEST__INIT;
    w.job_id = 1000000001;
    hv_rpc_bstream_t *bs;
    CHECK_RC(hv_rpc_bstream_open(ch, "/hvpb.v1.Jobs/Watch", &w.base,
                                 &hvpb__v1__watch_item__descriptor, 5000, &bs),
             HV_OK);
    CHECK_RC(hv_rpc_bstream_next(bs, 5000, &resp, &st), HV_OK);
    hv_rpc_msg_free(resp);
    hv_rpc_bstream_destroy(bs);
    /* malformed tokens never reach the wire; removing it sends none */
    CHECK_RC(hv_rpc_channel_set_token(ch, "has space"), HV_EINVAL);
    CHECK_RC(hv_rpc_channel_set_token(ch, "line\nbreak"), HV_EINVAL);
    char big[HV_RPC_MAX_TOKEN + 2];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    CHECK_RC(hv_rpc_channel_set_token(ch, big), HV_EINVAL);
    CHECK_RC(hv_rpc_channel_set_token(ch, NULL), HV_OK);
    CHECK_RC(call_get_job(ch, &r, 2000, &resp, &st), HV_EAUTH);
    CHECK(strcmp(gate_seen, "") == 0);
    /* below the gate's threshold: no credential needed, as before */
    r.job_id = 7;
    CHECK_RC(call_get_job(ch, &r, 2000, &resp, &st), HV_OK);
    hv_rpc_msg_free(resp);
    hv_rpc_channel_destroy(ch);
    return NULL;
}

static int case_bearer(void) { return served(bearer_client); }

static int case_bind_conflict(void) {
    server_up();
    hv_rpc_server_t *s2;
    CHECK_RC(hv_rpc_server_create(eng, target, &s2, NULL), HV_EUNAVAIL);
    server_down();
    return 0;
}

/* relisten: the server replaces its listener while a stream is in flight; the stream ends
 * normally on the old one and new calls (same channel, and a new one) reach the new listener on
 * the same port. */
static volatile int relisten_wanted, relisten_done;

static void relisten_hook(void) {
    if (relisten_wanted && !relisten_done) {
        hv_err rc = hv_rpc_server_relisten(srv);
        CHECK(rc == HV_OK || rc == HV_EUNAVAIL || rc == HV_ESTATE); /* busy port: watchdog */
        relisten_wanted = 0;
    }
    if (!relisten_done && hv_rpc_server_relistens(srv) >= 1) {
        relisten_done = 1;
    }
}

static hv_err relisten_get7(hv_rpc_channel_t *ch) {
    Hvpb__V1__JobRef r = job_ref(7);
    ProtobufCMessage *resp = NULL;
    hv_err rc = HV_EUNAVAIL;
    /* A refused connect in the moment between listeners is retried (bounded: 3 s). */
    for (int i = 0; i < 30 && rc == HV_EUNAVAIL; i++) {
        rc = hv_rpc_unary(ch, "/hvpb.v1.Jobs/GetJob", &r.base, &hvpb__v1__job_view__descriptor,
                          2000, &resp, NULL);
        if (rc == HV_EUNAVAIL) {
            usleep(100 * 1000);
        }
    }
    hv_rpc_msg_free(resp);
    return rc;
}

#define N_RELISTEN 3000 /* lines of the stream in flight across the relisten */
static void *relisten_client(void *arg) {
    (void)arg;
    hv_rpc_channel_t *ch = channel_to(target);
    CHECK_RC(relisten_get7(ch), HV_OK);
    Hvpb__V1__WatchRequest r = HVPB__V1__WATCH_REQUEST__INIT;
    r.job_id = N_RELISTEN;
    hv_rpc_bstream_t *s;
    CHECK_RC(hv_rpc_bstream_open(ch, "/hvpb.v1.Jobs/Watch", &r.base,
                                 &hvpb__v1__watch_item__descriptor, 30000, &s),
             HV_OK);
    ProtobufCMessage *m = NULL;
    CHECK_RC(hv_rpc_bstream_next(s, 5000, &m, NULL), HV_OK);
    hv_rpc_msg_free(m);
    uint32_t got = 1;
    relisten_wanted = 1;
    for (int i = 0; i < 500 && !relisten_done; i++) {
        usleep(10 * 1000);
    }
    CHECK(relisten_done);
    for (;;) {
        hv_rpc_status_t st;
        hv_err rc = hv_rpc_bstream_next(s, 5000, &m, &st);
        if (rc == HV_ECLOSED) {
            CHECK_RC(st.rc, HV_OK);
            break;
        }
        CHECK_RC(rc, HV_OK);
        hv_rpc_msg_free(m);
        got++;
    }
    CHECK(got == N_RELISTEN);
    hv_rpc_bstream_destroy(s);
    CHECK_RC(relisten_get7(ch), HV_OK);
    hv_rpc_channel_destroy(ch);
    CHECK_RC(hv_rpc_channel_create(target, &ch), HV_OK);
    CHECK_RC(relisten_get7(ch), HV_OK);
    hv_rpc_channel_destroy(ch);
    return NULL;
}

static int case_relisten(void) {
    server_up();
    serve_hook = relisten_hook;
    serve_while(relisten_client);
    serve_hook = NULL;
    CHECK(hv_rpc_server_relistens(srv) == 1);
    server_down();
    return 0;
}

/* Bytes that no protobuf message parses: field 1 as a varint whose continuation bit never ends.
 * protobuf-c packs unknown fields verbatim, which lets a test send them through hv_rpc_unary. */
static const uint8_t garbage_varint[] = {0xff, 0xff};
static ProtobufCMessageUnknownField garbage_field = {.tag = 1,
                                                     .wire_type = PROTOBUF_C_WIRE_TYPE_VARINT,
                                                     .len = 2,
                                                     .data = (uint8_t *)garbage_varint};

static void *garbage_client(void *arg) {
    (void)arg;
    hv_rpc_channel_t *ch = channel_to(target);
    const char *paths[] = {"/hvpb.v1.Jobs/GetJob", "/hvpb.v1.Jobs/Watch",
                           "/hvpb.v1.Cluster/Session"};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        Hvpb__V1__ListJobsRequest r = HVPB__V1__LIST_JOBS_REQUEST__INIT;
        r.base.n_unknown_fields = 1;
        r.base.unknown_fields = &garbage_field;
        ProtobufCMessage *resp = NULL;
        hv_rpc_status_t st;
        CHECK_RC(
            hv_rpc_unary(ch, paths[i], &r.base, &hvpb__v1__job_view__descriptor, 2000, &resp, &st),
            HV_EINVAL);
        CHECK(st.grpc_code == 3); /* INVALID_ARGUMENT, not UNKNOWN (2) */
        CHECK(strstr(st.msg, "malformed request") != NULL);
    }
    /* The server still serves well-formed calls. */
    Hvpb__V1__JobRef ok = HVPB__V1__JOB_REF__INIT;
    ok.job_id = 7;
    ProtobufCMessage *resp = NULL;
    hv_rpc_status_t st;
    CHECK_RC(call_get_job(ch, &ok, 2000, &resp, &st), HV_OK);
    hv_rpc_msg_free(resp);
    hv_rpc_channel_destroy(ch);
    return NULL;
}

/* A field numbered 0 with a two-byte tag: protobuf-c alone keeps it, and the message then packs
 * into bytes it cannot read back (a stored job spec would be lost). hv_rpc_unpack refuses it, at
 * any depth. (Found by tests/fuzz/fuzz_rpc; seeds regress_tag0_*.) */
static int case_unpack_tag0(void) {
    const uint8_t top[] = {0x0a, 0x01, 'x', 0x80, 0x00, 0x00};                /* JobSpec */
    const uint8_t nested[] = {0x0a, 0x06, 0x0a, 0x01, 'x', 0x80, 0x00, 0x00}; /* SubmitRequest */
    const uint8_t good[] = {0x0a, 0x03, 0x0a, 0x01, 'x'};
    CHECK(hv_rpc_unpack(&hvpb__v1__job_spec__descriptor, top, sizeof(top)) == NULL);
    CHECK(hv_rpc_unpack(&hvpb__v1__submit_request__descriptor, nested, sizeof(nested)) == NULL);
    ProtobufCMessage *m = hv_rpc_unpack(&hvpb__v1__submit_request__descriptor, good, sizeof(good));
    CHECK(m != NULL);
    CHECK(strcmp(((Hvpb__V1__SubmitRequest *)m)->spec->name, "x") == 0);
    hv_rpc_msg_free(m);
    return 0;
}

static int case_garbage(void) { return served(garbage_client); }

static const struct {
    const char *name;
    int (*fn)(void);
} cases[] = {{"garbage", case_garbage},
             {"unpack_tag0", case_unpack_tag0},
             {"unary", case_unary},
             {"stream", case_stream},
             {"bidi", case_bidi},
             {"unavailable", case_unavailable},
             {"bind_conflict", case_bind_conflict},
             {"plain_errors", case_plain_errors},
             {"explained_mark", case_explained_mark},
             {"never_connected", case_never_connected},
             {"bearer", case_bearer},
             {"relisten", case_relisten}};

int main(int argc, char **argv) {
    int ran = 0;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (argc > 1 && strcmp(argv[1], cases[i].name) != 0) {
            continue;
        }
        n_cancelled = n_done = 0;
        printf("case %s\n", cases[i].name);
        fflush(stdout);
        if (cases[i].fn() != 0) {
            return 1;
        }
        ran++;
    }
    printf("%d passed, 0 failed\n", ran);
    return ran > 0 ? 0 : 1;
}
