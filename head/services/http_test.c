/*
 * http_test: the request parser table by table (what is accepted, what is refused with which
 * status, incomplete heads), the bearer check, and the server on a real loopback socket: a
 * route answers, an unknown path is 404, a missing token 401, an oversized head 431, and
 * keep-alive serves two requests on one connection; the connection gate, table by table.
 */
#include "http.h"
#include "hv_check.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "mem.h"

static void case_parse_table(void) {
    static const struct {
        const char *name, *in;
        int want_status; /* 0: accepted; -1: incomplete */
        const char *path, *query;
        int keep_alive, head;
    } rows[] = {
        {"simple", "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 0, "/metrics", "", 1, 0},
        {"query", "GET /a?b=c HTTP/1.1\r\nHost: x\r\n\r\n", 0, "/a", "b=c", 1, 0},
        {"bare LF", "GET / HTTP/1.1\nHost: x\n\n", 0, "/", "", 1, 0},
        {"1.0 closes", "GET / HTTP/1.0\r\n\r\n", 0, "/", "", 0, 0},
        {"1.0 keep-alive", "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", 0, "/", "", 1, 0},
        {"close", "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 0, "/", "", 0, 0},
        {"head", "HEAD / HTTP/1.1\r\nHost: x\r\n\r\n", 0, "/", "", 1, 1},
        {"leading CRLF", "\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", 0, "/", "", 1, 0},
        {"length 0", "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 0, "/", "", 1, 0},
        {"incomplete", "GET /metrics HTTP/1.1\r\nHost: x\r\n", -1, NULL, NULL, 0, 0},
        {"empty", "", -1, NULL, NULL, 0, 0},
        {"post no length", "POST / HTTP/1.1\r\nHost: x\r\n\r\n", 0, "/", "", 1, 0},
        {"post", "POST /login HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\na=b", 0, "/login", "",
         1, 0},
        {"post body coming", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\na=b", -1, NULL,
         NULL, 0, 0},
        {"post too big", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1025\r\n\r\n", 413, NULL,
         NULL, 0, 0},
        {"post huge", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n",
         413, NULL, NULL, 0, 0},
        {"two lengths",
         "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\na", 400, NULL,
         NULL, 0, 0},
        {"signed length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +1\r\n\r\na", 400, NULL,
         NULL, 0, 0},
        {"post chunked", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
         NULL, NULL, 0, 0},
        {"two cookies", "GET / HTTP/1.1\r\nHost: x\r\nCookie: a=1\r\nCookie: b=2\r\n\r\n", 400,
         NULL, NULL, 0, 0},
        {"put", "PUT / HTTP/1.1\r\nHost: x\r\n\r\n", 405, NULL, NULL, 0, 0},
        {"lower get", "get / HTTP/1.1\r\nHost: x\r\n\r\n", 405, NULL, NULL, 0, 0},
        {"no host", "GET / HTTP/1.1\r\n\r\n", 400, NULL, NULL, 0, 0},
        {"two hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, NULL, NULL, 0, 0},
        {"http2", "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505, NULL, NULL, 0, 0},
        {"garbage", "hello\r\n\r\n", 400, NULL, NULL, 0, 0},
        {"no slash", "GET metrics HTTP/1.1\r\nHost: x\r\n\r\n", 400, NULL, NULL, 0, 0},
        {"absolute", "GET http://a/ HTTP/1.1\r\nHost: x\r\n\r\n", 400, NULL, NULL, 0, 0},
        {"two spaces", "GET  / HTTP/1.1\r\nHost: x\r\n\r\n", 400, NULL, NULL, 0, 0},
        {"body", "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n", 400, NULL, NULL, 0, 0},
        {"chunked", "GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", 400, NULL,
         NULL, 0, 0},
        {"fold", "GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400, NULL, NULL, 0, 0},
        {"bad name", "GET / HTTP/1.1\r\nHo st: x\r\n\r\n", 400, NULL, NULL, 0, 0},
        {"lone CR", "GET / HTTP/1.1\r\nHost: x\ry\r\n\r\n", 400, NULL, NULL, 0, 0},
        {"ctl in value", "GET / HTTP/1.1\r\nHost: x\x01\r\n\r\n", 400, NULL, NULL, 0, 0},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_http_request_t req;
        size_t used = 99;
        int status = -7;
        size_t len = strlen(rows[i].in);
        hv_err rc = hv_http_parse(rows[i].in, len, &req, &used, &status);
        fprintf(stderr, "  row %s\n", rows[i].name);
        if (rows[i].want_status == -1) {
            CHECK_RC(rc, HV_OK);
            CHECK_EQ(used, 0);
        } else if (rows[i].want_status > 0) {
            CHECK_RC(rc, HV_EPROTO);
            CHECK_EQ(status, rows[i].want_status);
        } else {
            CHECK_RC(rc, HV_OK);
            CHECK_EQ(used, len);
            CHECK_STR(req.path, rows[i].path);
            CHECK_STR(req.query, rows[i].query);
            CHECK_EQ(req.keep_alive, rows[i].keep_alive);
            CHECK_EQ(req.head, rows[i].head);
        }
    }
}

static void case_parse_limits(void) {
    static char buf[HV_HTTP_MAX_HEAD + 4096];
    hv_http_request_t req;
    size_t used;
    int status;
    /* A head that does not end within the bound: 431, complete or not. */
    memset(buf, 0, sizeof(buf));
    int n = snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: x\r\nX-Pad: ");
    memset(buf + n, 'a', HV_HTTP_MAX_HEAD);
    CHECK_RC(hv_http_parse(buf, HV_HTTP_MAX_HEAD, &req, &used, &status), HV_EPROTO);
    CHECK_EQ(status, 431);
    /* A target over HV_HTTP_MAX_TARGET: 414. */
    n = snprintf(buf, sizeof(buf), "GET /");
    memset(buf + n, 'a', HV_HTTP_MAX_TARGET);
    n += HV_HTTP_MAX_TARGET;
    n += snprintf(buf + n, sizeof(buf) - (size_t)n, " HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK_RC(hv_http_parse(buf, (size_t)n, &req, &used, &status), HV_EPROTO);
    CHECK_EQ(status, 414);
    /* Too many header lines: 431. */
    n = snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: x\r\n");
    for (int i = 0; i < HV_HTTP_MAX_HEADERS; i++) {
        n += snprintf(buf + n, sizeof(buf) - (size_t)n, "X-%d: y\r\n", i);
    }
    n += snprintf(buf + n, sizeof(buf) - (size_t)n, "\r\n");
    CHECK_RC(hv_http_parse(buf, (size_t)n, &req, &used, &status), HV_EPROTO);
    CHECK_EQ(status, 431);
    /* Two pipelined requests: the first is parsed, *used says where the second begins. */
    const char *two = "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n";
    CHECK_RC(hv_http_parse(two, strlen(two), &req, &used, &status), HV_OK);
    CHECK_EQ(used, strlen(two) / 2);
    CHECK_STR(req.path, "/a");
    /* The authorization value is kept; an oversized one is 431. */
    const char *auth = "GET / HTTP/1.1\r\nHost: x\r\nAuthorization:  Bearer abc \r\n\r\n";
    CHECK_RC(hv_http_parse(auth, strlen(auth), &req, &used, &status), HV_OK);
    CHECK_STR(req.authorization, "Bearer abc");
    /* A POST's body and the Cookie header are kept; the next request starts after the body. */
    const char *post = "POST /login HTTP/1.1\r\nHost: x\r\nCookie: hv_session=ab; x=y\r\n"
                       "Content-Length: 11\r\n\r\ntoken=hvc_1GET / HTTP/1.1\r\n";
    CHECK_RC(hv_http_parse(post, strlen(post), &req, &used, &status), HV_OK);
    CHECK_EQ(req.post, 1);
    CHECK_EQ(req.body_len, 11);
    CHECK_STR(req.body, "token=hvc_1");
    CHECK_STR(req.cookie, "hv_session=ab; x=y");
    CHECK_EQ(used, strlen(post) - strlen("GET / HTTP/1.1\r\n"));
    /* The largest body fits the connection's buffer with the largest head. */
    n = snprintf(buf, sizeof(buf), "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n",
                 HV_HTTP_MAX_BODY);
    memset(buf + n, 'b', HV_HTTP_MAX_BODY);
    CHECK_RC(hv_http_parse(buf, (size_t)n + HV_HTTP_MAX_BODY - 1, &req, &used, &status), HV_OK);
    CHECK_EQ(used, 0);
    CHECK_RC(hv_http_parse(buf, (size_t)n + HV_HTTP_MAX_BODY, &req, &used, &status), HV_OK);
    CHECK_EQ(used, (size_t)n + HV_HTTP_MAX_BODY);
    CHECK_EQ(req.body_len, HV_HTTP_MAX_BODY);
}

static void case_cookie_form(void) {
    char v[16];
    CHECK(hv_http_cookie_get("hv_session=abc", "hv_session", v, sizeof(v)));
    CHECK_STR(v, "abc");
    CHECK(hv_http_cookie_get("a=1; hv_session=def ;b=2", "hv_session", v, sizeof(v)));
    CHECK_STR(v, "def");
    CHECK(!hv_http_cookie_get("xhv_session=abc", "hv_session", v, sizeof(v)));
    CHECK(!hv_http_cookie_get("hv_sessionx=abc", "hv_session", v, sizeof(v)));
    CHECK(!hv_http_cookie_get("", "hv_session", v, sizeof(v)));
    CHECK(!hv_http_cookie_get("hv_session=0123456789abcdef", "hv_session", v, sizeof(v)));
    CHECK(hv_http_cookie_get("hv_session=", "hv_session", v, sizeof(v)));
    CHECK_STR(v, "");
    const char *f = "a=1&token=hvc_a%2Bb+c&x=";
    CHECK(hv_http_form_get(f, strlen(f), "token", v, sizeof(v)));
    CHECK_STR(v, "hvc_a+b c");
    CHECK(hv_http_form_get(f, strlen(f), "x", v, sizeof(v)));
    CHECK_STR(v, "");
    CHECK(!hv_http_form_get(f, strlen(f), "tok", v, sizeof(v)));
    CHECK(!hv_http_form_get("token=%0a", 9, "token", v, sizeof(v))); /* a control byte */
    CHECK(!hv_http_form_get("token=%00", 9, "token", v, sizeof(v))); /* NUL */
    CHECK(!hv_http_form_get("token=%4", 8, "token", v, sizeof(v)));  /* cut escape */
    CHECK(!hv_http_form_get("token=%zz", 9, "token", v, sizeof(v))); /* not hex */
    CHECK(!hv_http_form_get("token=0123456789abcdef", 22, "token", v, sizeof(v))); /* too long */
    /* A response header cannot carry a line break (no header injection). */
    hv_http_reply_t r = {.status = 200};
    CHECK_RC(hv_http_reply_header(&r, "Location", "/"), HV_OK);
    CHECK_RC(hv_http_reply_header(&r, "Set-Cookie", "a=b\r\nX-Evil: 1"), HV_EINVAL);
    CHECK_RC(hv_http_reply_header(&r, "Bad Name", "v"), HV_EINVAL);
    CHECK_STR(r.headers, "Location: /\r\n");
}

static void case_bearer(void) {
    CHECK(hv_http_bearer_ok("", NULL));
    CHECK(hv_http_bearer_ok("", ""));
    CHECK(hv_http_bearer_ok("Bearer s3cret", "s3cret"));
    CHECK(hv_http_bearer_ok("bearer s3cret", "s3cret"));
    CHECK(!hv_http_bearer_ok("", "s3cret"));
    CHECK(!hv_http_bearer_ok("Bearer s3cre", "s3cret"));
    CHECK(!hv_http_bearer_ok("Bearer s3cretx", "s3cret"));
    CHECK(!hv_http_bearer_ok("Basic s3cret", "s3cret"));
    CHECK(!hv_http_bearer_ok("Bearer ", "s3cret"));
}

/* ---- the connection gate ------------------------------------------------------------------ */

/* Slots: a (addr_open), q (seq), m (same address as the newcomer), b (busy), i (idle). */
#define SLOT(a, q, m, b, i)                                                                        \
    { a, q, m, b, i }

static void case_gate(void) {
    /* Four open, max 4 in all, 2 per address. */
    static const struct {
        const char *name;
        hv_http_slot_t slots[4];
        size_t n;
        uint32_t mine;
        hv_http_gate_verdict want;
        size_t victim;
    } t[] = {
        {"room", {SLOT(1, 1, 0, 0, 0)}, 1, 0, HV_HTTP_GATE_ADMIT, 0},
        {"room, one of its own", {SLOT(1, 1, 1, 0, 0)}, 1, 1, HV_HTTP_GATE_ADMIT, 0},
        {"its address at the bound, reading",
         {SLOT(2, 1, 1, 0, 0), SLOT(2, 2, 1, 0, 0)},
         2,
         2,
         HV_HTTP_GATE_REFUSE_ADDR,
         0},
        {"its address at the bound, answering",
         {SLOT(2, 1, 1, 1, 0), SLOT(2, 2, 1, 1, 0)},
         2,
         2,
         HV_HTTP_GATE_REFUSE_ADDR,
         0},
        {"its address at the bound: its oldest idle one goes",
         {SLOT(2, 5, 1, 0, 1), SLOT(2, 3, 1, 0, 1), SLOT(1, 1, 0, 0, 1)},
         3,
         2,
         HV_HTTP_GATE_EVICT,
         1},
        {"full: the address with the most goes first",
         {SLOT(1, 1, 0, 0, 0), SLOT(2, 3, 0, 0, 0), SLOT(2, 2, 0, 0, 0), SLOT(1, 4, 1, 0, 0)},
         4,
         1,
         HV_HTTP_GATE_EVICT,
         2},
        {"full: then the oldest",
         {SLOT(1, 9, 0, 0, 0), SLOT(1, 3, 0, 0, 1), SLOT(1, 7, 0, 0, 0), SLOT(1, 8, 0, 0, 0)},
         4,
         0,
         HV_HTTP_GATE_EVICT,
         1},
        {"full: a request being answered stays",
         {SLOT(2, 1, 0, 1, 0), SLOT(2, 2, 0, 1, 0), SLOT(1, 3, 0, 0, 0), SLOT(1, 4, 0, 1, 0)},
         4,
         0,
         HV_HTTP_GATE_EVICT,
         2},
        {"full: every one being answered",
         {SLOT(2, 1, 0, 1, 0), SLOT(2, 2, 0, 1, 0), SLOT(1, 3, 0, 1, 0), SLOT(1, 4, 0, 1, 0)},
         4,
         0,
         HV_HTTP_GATE_REFUSE_FULL,
         0},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        size_t victim = 99;
        hv_http_gate_verdict got = hv_http_gate(t[i].slots, t[i].n, t[i].mine, 4, 2, &victim);
        if (got != t[i].want || (got == HV_HTTP_GATE_EVICT && victim != t[i].victim)) {
            fprintf(stderr, "case '%s': got %d (victim %zu), want %d (victim %zu)\n", t[i].name,
                    got, victim, t[i].want, t[i].victim);
        }
        CHECK_EQ(got, t[i].want);
        if (got == HV_HTTP_GATE_EVICT) {
            CHECK_EQ(victim, t[i].victim);
        }
    }
}

/* ---- the server on a real socket ------------------------------------------------------------ */

static void hello(const hv_http_request_t *req, hv_http_reply_t *rep, void *ud) {
    (void)ud;
    hv_http_reply_printf(rep, "hello %s\n", req->query);
}

typedef struct client_s {
    int port;
    const char *send;
    size_t send_len;
    char got[8192];
    int shut; /* half-close after sending */
} client_t;

/* A blocking client thread: sends, then reads until the server closes (bounded by SO_RCVTIMEO). */
static void *client_main(void *arg) {
    client_t *c = arg;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)c->port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
        size_t off = 0;
        while (off < c->send_len) {
            ssize_t w = send(fd, c->send + off, c->send_len - off, MSG_NOSIGNAL);
            if (w <= 0) {
                break;
            }
            off += (size_t)w;
        }
        size_t n = 0;
        for (;;) {
            ssize_t r = recv(fd, c->got + n, sizeof(c->got) - 1 - n, 0);
            if (r <= 0) {
                break;
            }
            n += (size_t)r;
        }
        c->got[n] = '\0';
    }
    close(fd);
    return NULL;
}

/* Runs the loop until the client thread ends (bounded: the client's receive timeout). */
static void exchange(uv_loop_t *loop, client_t *c) {
    pthread_t th;
    pthread_create(&th, NULL, client_main, c);
    for (int i = 0; i < 5000; i++) {
        uv_run(loop, UV_RUN_NOWAIT);
        if (pthread_tryjoin_np(th, NULL) == 0) {
            uv_run(loop, UV_RUN_NOWAIT);
            return;
        }
        struct timespec ts = {.tv_nsec = 2000000};
        nanosleep(&ts, NULL);
    }
    pthread_join(th, NULL);
}

static void case_server(void) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    hv_http_route_t routes[] = {{"/hello", hello, NULL, HV_HTTP_TOKEN, 0}};
    hv_http_opts_t o = {.listen = "127.0.0.1:0", .token = "tok", .routes = routes, .nroutes = 1};
    hv_http_server_t *s = NULL;
    int port = 0;
    char err[256] = "";
    CHECK_RC_MSG(hv_http_server_create(&loop, &o, &s, &port, err, sizeof(err)), HV_OK, err);
    CHECK(port > 0);

    client_t c = {.port = port};
    c.send = "GET /hello?x HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer tok\r\n"
             "\r\nGET /hello?y HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer tok\r\n"
             "Connection: close\r\n\r\n";
    c.send_len = strlen(c.send);
    exchange(&loop, &c);
    CHECK(strstr(c.got, "HTTP/1.1 200 OK") != NULL);
    CHECK(strstr(c.got, "hello x\n") != NULL);
    CHECK(strstr(c.got, "hello y\n") != NULL); /* keep-alive: the second on the same connection */

    client_t d = {.port = port};
    d.send = "GET /hello HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
    d.send_len = strlen(d.send);
    exchange(&loop, &d);
    CHECK(strncmp(d.got, "HTTP/1.1 401 Unauthorized", 25) == 0);
    CHECK(strstr(d.got, "WWW-Authenticate: Bearer") != NULL);

    client_t e = {.port = port};
    e.send =
        "GET /nope HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer tok\r\nConnection: close\r\n\r\n";
    e.send_len = strlen(e.send);
    exchange(&loop, &e);
    CHECK(strncmp(e.got, "HTTP/1.1 404 Not Found", 22) == 0);

    static char big[HV_HTTP_MAX_HEAD + 100];
    memset(big, 'a', sizeof(big));
    memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
    client_t f = {.port = port, .send = big, .send_len = sizeof(big)};
    exchange(&loop, &f);
    CHECK(strncmp(f.got, "HTTP/1.1 431", 12) == 0);

    hv_http_stats_t st;
    hv_http_server_stats(s, &st);
    CHECK_EQ(st.requests, 5);
    CHECK_EQ(st.unauthorized, 1);
    CHECK_EQ(st.refused, 1);
    hv_http_server_close(s);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&loop), 0);
}

/* A bind that cannot work says why; a name is refused as not numeric. */
static void case_server_errors(void) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    hv_http_opts_t o = {.listen = "metrics.example:80"};
    hv_http_server_t *s = NULL;
    char err[256] = "";
    CHECK_RC(hv_http_server_create(&loop, &o, &s, NULL, err, sizeof(err)), HV_EINVAL);
    CHECK(strstr(err, "not a numeric address") != NULL);
    o.listen = "192.0.2.1:1"; /* TEST-NET: not an address of this machine */
    CHECK_RC(hv_http_server_create(&loop, &o, &s, NULL, err, sizeof(err)), HV_EUNAVAIL);
    CHECK(strstr(err, "cannot listen on 192.0.2.1:1") != NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&loop), 0);
}

HV_CHECK_MAIN(NULL, NULL, {"parse_table", case_parse_table}, {"parse_limits", case_parse_limits},
              {"bearer", case_bearer}, {"cookie_form", case_cookie_form}, {"server", case_server},
              {"server_errors", case_server_errors}, {"gate", case_gate})
