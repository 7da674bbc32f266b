/*
 * http: a small HTTP/1.1 server on the head's libuv loop, for the read-only pages hvhead serves
 * beside its gRPC port: /metrics (head/services/metrics.c) and the status page (head/services/page_serve.c). It is not a
 * general web server: GET and HEAD, and POST with a small body (HV_HTTP_MAX_BODY bytes, with a
 * Content-Length: the status page's login form) on the routes that take it; a bounded request
 * head (HV_HTTP_MAX_HEAD bytes), and one response per request, written whole from a buffer the
 * route's handler filled. Connections are bounded in all and per peer address, and the gate
 * (hv_http_gate, pure) keeps room for a newcomer: when every place is taken, the connection
 * that holds a place without being answered (a request still arriving, or an idle keep-alive),
 * from the address holding the most, oldest first, is closed for it. A request must arrive whole
 * within HV_HTTP_HEAD_MS of its first byte (of the accept, for the first one); an idle
 * keep-alive connection is closed after opts.timeout_ms. So one client that opens connections
 * and sends half a request on each cannot keep a scrape out (issue 24). Routes are a table of exact paths and
 * prefixes (a route ending in '/', such as "/job/"), each with its access rule: the bearer token
 * (opts.token; /metrics), the token or a session the caller's check accepts (the status page: a
 * request without either is sent to opts.login_path), or open (the login form itself).
 * No TLS: a listener beyond loopback must be protected by a bearer token (opts.token), which the
 * config enforces (docs/metrics.md).
 *
 * The request parser (hv_http_parse) is pure and separate from the sockets so that it can be
 * unit-tested and fuzzed (tests/fuzz/fuzz_http.c). Threads: the loop thread only.
 */
#ifndef HV_HEAD_HTTP_H
#define HV_HEAD_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "err.h"

#define HV_HTTP_MAX_HEAD 8192         /* bytes of a request line and headers, CRLFs included */
#define HV_HTTP_MAX_TARGET 1024       /* bytes of the request target */
#define HV_HTTP_MAX_AUTH 512          /* bytes of an Authorization value */
#define HV_HTTP_MAX_HEADERS 64        /* header lines of one request */
#define HV_HTTP_MAX_COOKIE 512        /* bytes of a Cookie value */
#define HV_HTTP_MAX_BODY 1024         /* bytes of a POST body (Content-Length; no chunked bodies) */
#define HV_HTTP_MAX_REPLY_HEADERS 512 /* bytes of the extra headers of one response */
#define HV_HTTP_MAX_CONNS 64          /* connections at once (hv_http_gate) */
#define HV_HTTP_MAX_PER_ADDR 8        /* connections at once from one peer address */
#define HV_HTTP_HEAD_MS 2000          /* from a request's first byte (or the accept) to all of it */
#define HV_HTTP_TIMEOUT_MS 10000      /* an idle keep-alive connection, between requests */
#define HV_HTTP_LINGER_MS 2000 /* after a refusal: how long the rest of a request is drained */

/* One parsed request head. Strings are NUL-terminated copies. */
typedef struct hv_http_request_s {
    int head;                             /* HEAD (no body in the response) */
    int post;                             /* POST, with body_len bytes of body; else GET */
    int minor;                            /* HTTP/1.<minor>: 0 or 1 */
    int keep_alive;                       /* the connection may serve another request */
    char path[HV_HTTP_MAX_TARGET];        /* the target before '?' */
    char query[HV_HTTP_MAX_TARGET];       /* after '?', "" when none */
    char authorization[HV_HTTP_MAX_AUTH]; /* the Authorization header's value, "" when none */
    char cookie[HV_HTTP_MAX_COOKIE];      /* the Cookie header's value, "" when none */
    char peer[64];                        /* the client's address ("ipv4:10.0.0.5:41234"), set by
                                           * the server, not the parser ("" when unknown) */
    char addr[48];                        /* its IP address alone ("10.0.0.5"), set by the server
                                           * ("" when unknown) */
    size_t body_len;                      /* bytes of body (POST only) */
    char body[HV_HTTP_MAX_BODY + 1];      /* the body, NUL-terminated (it may hold NULs) */
} hv_http_request_t;

/* Parses the request at buf (len bytes): its head and, for POST, its body. Pure.
 *   HV_OK with *used > 0: a complete request of *used bytes (at most HV_HTTP_MAX_HEAD +
 *   HV_HTTP_MAX_BODY) was parsed into *req.
 *   HV_OK with *used == 0: incomplete; call again with more bytes.
 *   HV_EPROTO: the request is refused; *status holds the HTTP status to answer (400 malformed,
 *   a body on GET/HEAD, a Transfer-Encoding; 405 a method other than GET/HEAD/POST (a POST without
 *   Content-Length has an empty body), 413 a body over HV_HTTP_MAX_BODY, 414 target too long, 431 head or a
 *   header too large, 505 not HTTP/1.x) and the connection closes after it. */
hv_err hv_http_parse(const char *buf, size_t len, hv_http_request_t *req, size_t *used,
                     int *status);

/* 1 when authorization (a header value) is "Bearer <token>" with exactly this token (compared
 * in constant time); token NULL or "" means no token is needed (always 1). Pure. */
int hv_http_bearer_ok(const char *authorization, const char *token);

/* 1 when the Cookie header value cookie ("a=1; b=2") has a cookie called name, its value copied
 * into out (cap bytes, NUL-terminated); 0 when it has none or the value does not fit. Pure. */
int hv_http_cookie_get(const char *cookie, const char *name, char *out, size_t cap);

/* 1 when the form body (application/x-www-form-urlencoded, len bytes) has the field name, its
 * value decoded ('+' and %XX) into out (cap bytes, NUL-terminated); 0 when it has none, the value
 * does not fit, a %-escape is malformed or the value decodes to a control byte. Pure. */
int hv_http_form_get(const char *body, size_t len, const char *name, char *out, size_t cap);

/* 1 when path is served by route: the same path, or, for a route ending in '/' (other than "/"),
 * a longer path that starts with it ("/job/" serves "/job/7", not "/job/"). Pure. */
int hv_http_route_match(const char *route, const char *path);

/* A connection open now, as the gate sees it. */
typedef struct hv_http_slot_s {
    uint32_t addr_open; /* connections open from its address, itself included */
    uint64_t seq;       /* when it was accepted or last answered, in the server's order: smaller
                           is older */
    int same_addr;      /* from the address of the connection being decided on */
    int busy;           /* a request of it is being answered: never closed for a newcomer */
    int idle;           /* kept alive between requests: nothing of the next one arrived yet */
} hv_http_slot_t;

typedef enum hv_http_gate_verdict {
    HV_HTTP_GATE_ADMIT = 0,       /* a place is free */
    HV_HTTP_GATE_EVICT = 1,       /* admitted in the place of *victim, which is closed */
    HV_HTTP_GATE_REFUSE_ADDR = 2, /* its address holds max_per_addr, none of them idle */
    HV_HTTP_GATE_REFUSE_FULL = 3, /* every place holds a request being answered */
} hv_http_gate_verdict;

/* The gate's decision on a new connection from an address that holds addr_open of the n open
 * connections slots[] (the new one not counted). At its address's bound it may only take the
 * place of its own address's oldest idle keep-alive connection. Below it, it is admitted while
 * fewer than max_conns are open; when all are, it takes the place of a connection that is not
 * being answered: the one whose address holds the most, then the oldest. Pure. */
hv_http_gate_verdict hv_http_gate(const hv_http_slot_t *slots, size_t n, uint32_t addr_open,
                                  uint32_t max_conns, uint32_t max_per_addr, size_t *victim);

/* The reason phrase of a status ("Not Found"); "Unknown" for others. */
const char *hv_http_reason(int status);

/* A response under construction: the handler sets status and content type and appends the body.
 * The body grows as needed (out of memory: oom is set and the server answers 500). */
typedef struct hv_http_reply_s {
    int status;               /* 200 unless set */
    const char *content_type; /* static string; "text/plain; charset=utf-8" unless set */
    char *body;               /* owned by the server */
    size_t len, cap;
    int oom;
    char headers[HV_HTTP_MAX_REPLY_HEADERS]; /* extra header lines ("Name: value\r\n"...) */
} hv_http_reply_t;

/* Adds a header line to the response (Location, Set-Cookie). HV_EINVAL when name or value holds
 * a CR, LF or other control byte (no header injection), HV_ETOOBIG when the extra headers would
 * pass HV_HTTP_MAX_REPLY_HEADERS; the response is then unchanged. */
hv_err hv_http_reply_header(hv_http_reply_t *r, const char *name, const char *value);
void hv_http_reply_add(hv_http_reply_t *r, const char *data, size_t len);
void hv_http_reply_printf(hv_http_reply_t *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Fills rep for req; runs on the loop thread and must not block for long. */
typedef void (*hv_http_handler_fn)(const hv_http_request_t *req, hv_http_reply_t *rep, void *ud);

/* Who may use a route. */
typedef enum hv_http_access {
    HV_HTTP_TOKEN = 0,   /* the bearer token, when the server has one (else anyone): /metrics */
    HV_HTTP_SESSION = 1, /* the bearer token or a session opts.session_ok accepts, when the server
                          * has a token; without either: 303 to opts.login_path (the page) */
    HV_HTTP_OPEN = 2,    /* anyone (the login form) */
} hv_http_access;

typedef struct hv_http_route_s {
    const char *path; /* exact path ("/metrics") or a prefix ("/job/"); borrowed, static */
    hv_http_handler_fn fn;
    void *ud;
    hv_http_access access;
    int post; /* POST is served too (else 405) */
} hv_http_route_t;

/* 1 when req carries a valid session (the status page's cookie); ud: opts.session_ud. */
typedef int (*hv_http_session_fn)(const hv_http_request_t *req, void *ud);

typedef struct hv_http_opts_s {
    const char *listen;            /* numeric HOST:PORT ("127.0.0.1:7001", "[::1]:0"); borrowed */
    const char *token;             /* bearer token every request needs; NULL/"" = none; copied */
    const hv_http_route_t *routes; /* copied */
    size_t nroutes;
    uint32_t timeout_ms;           /* an idle keep-alive connection; 0 = HV_HTTP_TIMEOUT_MS */
    hv_http_session_fn session_ok; /* for HV_HTTP_SESSION routes; NULL = no sessions */
    void *session_ud;
    const char *login_path; /* where HV_HTTP_SESSION sends a request without access ("/login");
                               NULL = answer 401 instead; borrowed, static */
} hv_http_opts_t;

typedef struct hv_http_server_s hv_http_server_t;

/* Counters of the server, for the metrics. */
typedef struct hv_http_stats_s {
    uint64_t requests;     /* requests answered (any status) */
    uint64_t unauthorized; /* answered 401: no or a wrong bearer token */
    uint64_t refused;      /* malformed, oversized, timed out or over the connection bound */
    uint64_t evicted;      /* connections closed to make room for a newcomer (hv_http_gate) */
} hv_http_stats_t;

/* Binds and listens on opts->listen. *port_out (optional) gets the bound port. Errors: HV_EINVAL
 * (not a numeric HOST:PORT; err says so), HV_EUNAVAIL (cannot bind: err says why), HV_ENOMEM. */
hv_err hv_http_server_create(uv_loop_t *loop, const hv_http_opts_t *opts, hv_http_server_t **out,
                             int *port_out, char *err, size_t errlen);
/* Stops listening and closes every connection; the memory is freed once libuv has closed the
 * handles (the loop must run once more). NULL is a no-op. */
void hv_http_server_close(hv_http_server_t *s);
void hv_http_server_stats(const hv_http_server_t *s, hv_http_stats_t *out);

#endif
