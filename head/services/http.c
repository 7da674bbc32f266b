/* http: see http.h. */
#include "http.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "conngate.h"
#include "log.h"
#include "mem.h"
#include "util.h"

/* ---- the request parser (pure) ------------------------------------------------------------- */

static int http_tchar(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* The next line of buf[*pos, end): [*s, *s + *n) without its LF or CRLF. 0 when a CR stands
 * alone inside the line (request smuggling uses such ambiguities: refused). */
static int http_line(const char *buf, size_t end, size_t *pos, const char **s, size_t *n) {
    size_t i = *pos;
    while (i < end && buf[i] != '\n') {
        i++;
    }
    size_t e = i;
    if (e > *pos && buf[e - 1] == '\r') {
        e--;
    }
    for (size_t k = *pos; k < e; k++) {
        if (buf[k] == '\r') {
            return 0;
        }
    }
    *s = buf + *pos;
    *n = e - *pos;
    *pos = i < end ? i + 1 : end;
    return 1;
}

static int http_ieq(const char *a, size_t alen, const char *b) {
    return alen == strlen(b) && strncasecmp(a, b, alen) == 0;
}

/* 1 when the comma-separated list v (n bytes) holds the token tok (case-insensitive). */
static int http_list_has(const char *v, size_t n, const char *tok) {
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ',')) {
            i++;
        }
        size_t b = i;
        while (i < n && v[i] != ',') {
            i++;
        }
        size_t e = i;
        while (e > b && (v[e - 1] == ' ' || v[e - 1] == '\t')) {
            e--;
        }
        if (http_ieq(v + b, e - b, tok)) {
            return 1;
        }
    }
    return 0;
}

static hv_err http_refuse(int *status, int code) {
    *status = code;
    return HV_EPROTO;
}

static hv_err http_parse_request_line(const char *s, size_t n, hv_http_request_t *req,
                                      int *status) {
    const char *sp1 = memchr(s, ' ', n);
    if (sp1 == NULL || sp1 == s) {
        return http_refuse(status, 400);
    }
    size_t mlen = (size_t)(sp1 - s);
    for (size_t i = 0; i < mlen; i++) {
        if (!http_tchar((unsigned char)s[i])) {
            return http_refuse(status, 400);
        }
    }
    const char *t = sp1 + 1;
    size_t rest = n - mlen - 1;
    const char *sp2 = memchr(t, ' ', rest);
    if (sp2 == NULL || sp2 == t) {
        return http_refuse(status, 400);
    }
    size_t tlen = (size_t)(sp2 - t);
    const char *v = sp2 + 1;
    size_t vlen = rest - tlen - 1;
    if (vlen == 8 && memcmp(v, "HTTP/1.", 7) == 0 && (v[7] == '0' || v[7] == '1')) {
        req->minor = v[7] - '0';
    } else if (vlen >= 6 && memcmp(v, "HTTP/", 5) == 0 && v[5] >= '0' && v[5] <= '9') {
        return http_refuse(status, 505);
    } else {
        return http_refuse(status, 400);
    }
    if (t[0] != '/') {
        return http_refuse(status, 400);
    }
    if (tlen >= HV_HTTP_MAX_TARGET) {
        return http_refuse(status, 414);
    }
    for (size_t i = 0; i < tlen; i++) {
        unsigned char c = (unsigned char)t[i];
        if (c <= 0x20 || c >= 0x7f) {
            return http_refuse(status, 400);
        }
    }
    const char *q = memchr(t, '?', tlen);
    size_t plen = q != NULL ? (size_t)(q - t) : tlen;
    memcpy(req->path, t, plen);
    req->path[plen] = '\0';
    if (q != NULL) {
        memcpy(req->query, q + 1, tlen - plen - 1);
        req->query[tlen - plen - 1] = '\0';
    }
    /* The method last: a malformed line is a 400 whatever its method. */
    if (mlen == 3 && memcmp(s, "GET", 3) == 0) {
        req->head = 0;
    } else if (mlen == 4 && memcmp(s, "HEAD", 4) == 0) {
        req->head = 1;
    } else if (mlen == 4 && memcmp(s, "POST", 4) == 0) {
        req->post = 1;
    } else {
        return http_refuse(status, 405);
    }
    return HV_OK;
}

hv_err hv_http_parse(const char *buf, size_t len, hv_http_request_t *req, size_t *used,
                     int *status) {
    *used = 0;
    *status = 0;
    /* Empty lines before the request line are ignored (RFC 9112 2.2). */
    size_t start = 0;
    while (start < len && (buf[start] == '\r' || buf[start] == '\n')) {
        start++;
    }
    size_t end = 0;
    for (size_t i = start; i < len; i++) {
        if (buf[i] == '\n' && ((i >= 1 && buf[i - 1] == '\n') ||
                               (i >= 2 && buf[i - 1] == '\r' && buf[i - 2] == '\n'))) {
            end = i + 1;
            break;
        }
    }
    if (end == 0) {
        return len >= HV_HTTP_MAX_HEAD ? http_refuse(status, 431) : HV_OK;
    }
    if (end > HV_HTTP_MAX_HEAD) {
        return http_refuse(status, 431);
    }
    memset(req, 0, sizeof(*req));
    size_t pos = start;
    const char *s;
    size_t n;
    if (!http_line(buf, end, &pos, &s, &n)) {
        return http_refuse(status, 400);
    }
    hv_err rc = http_parse_request_line(s, n, req, status);
    if (rc != HV_OK) {
        return rc;
    }
    int have_host = 0, have_auth = 0, have_cookie = 0, have_length = 0, conn_close = 0,
        conn_keep = 0;
    size_t clen = 0;
    size_t nheaders = 0;
    for (;;) {
        if (!http_line(buf, end, &pos, &s, &n)) {
            return http_refuse(status, 400);
        }
        if (n == 0) {
            break;
        }
        if (++nheaders > HV_HTTP_MAX_HEADERS) {
            return http_refuse(status, 431);
        }
        const char *colon = memchr(s, ':', n);
        if (colon == NULL || colon == s) {
            return http_refuse(status, 400); /* also a folded line (it starts with a space) */
        }
        size_t nlen = (size_t)(colon - s);
        for (size_t i = 0; i < nlen; i++) {
            if (!http_tchar((unsigned char)s[i])) {
                return http_refuse(status, 400);
            }
        }
        const char *v = colon + 1;
        size_t vlen = n - nlen - 1;
        while (vlen > 0 && (v[0] == ' ' || v[0] == '\t')) {
            v++;
            vlen--;
        }
        while (vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t')) {
            vlen--;
        }
        for (size_t i = 0; i < vlen; i++) {
            unsigned char c = (unsigned char)v[i];
            if ((c < 0x20 && c != '\t') || c == 0x7f) {
                return http_refuse(status, 400);
            }
        }
        if (http_ieq(s, nlen, "host")) {
            if (have_host) {
                return http_refuse(status, 400);
            }
            have_host = 1;
        } else if (http_ieq(s, nlen, "connection")) {
            conn_close |= http_list_has(v, vlen, "close");
            conn_keep |= http_list_has(v, vlen, "keep-alive");
        } else if (http_ieq(s, nlen, "content-length")) {
            /* Digits only, once: two lengths (or "5, 5") are how requests are smuggled. A
             * length over the bound is refused before its digits could overflow. */
            if (have_length || vlen == 0) {
                return http_refuse(status, 400);
            }
            have_length = 1;
            for (size_t i = 0; i < vlen; i++) {
                if (v[i] < '0' || v[i] > '9') {
                    return http_refuse(status, 400);
                }
                clen = clen * 10 + (size_t)(v[i] - '0');
                if (clen > HV_HTTP_MAX_BODY) {
                    return http_refuse(status, req->post ? 413 : 400);
                }
            }
            if (clen > 0 && !req->post) {
                return http_refuse(status, 400); /* GET and HEAD have no body here */
            }
        } else if (http_ieq(s, nlen, "cookie")) {
            if (have_cookie) {
                return http_refuse(status, 400); /* a browser sends one (RFC 6265 5.4) */
            }
            if (vlen >= HV_HTTP_MAX_COOKIE) {
                return http_refuse(status, 431);
            }
            have_cookie = 1;
            memcpy(req->cookie, v, vlen);
            req->cookie[vlen] = '\0';
        } else if (http_ieq(s, nlen, "transfer-encoding")) {
            return http_refuse(status, 400);
        } else if (http_ieq(s, nlen, "authorization")) {
            if (have_auth) {
                return http_refuse(status, 400);
            }
            if (vlen >= HV_HTTP_MAX_AUTH) {
                return http_refuse(status, 431);
            }
            have_auth = 1;
            memcpy(req->authorization, v, vlen);
            req->authorization[vlen] = '\0';
        }
    }
    if (req->minor == 1 && !have_host) {
        return http_refuse(status, 400); /* RFC 9112 3.2: a 1.1 request names its host */
    }
    /* A POST without Content-Length has no body (RFC 9112 6.3). */
    if (len - end < clen) {
        return HV_OK; /* the body is still coming; it fits the buffer (head + body bounds) */
    }
    memcpy(req->body, buf + end, clen);
    req->body[clen] = '\0';
    req->body_len = clen;
    req->keep_alive = req->minor == 1 ? !conn_close : (conn_keep && !conn_close);
    *used = end + clen;
    return HV_OK;
}

int hv_http_cookie_get(const char *cookie, const char *name, char *out, size_t cap) {
    size_t nlen = strlen(name);
    const char *p = cookie;
    while (p != NULL && *p != '\0') {
        while (*p == ' ' || *p == ';') {
            p++;
        }
        const char *end = strchr(p, ';');
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        if (n > nlen && p[nlen] == '=' && strncmp(p, name, nlen) == 0) {
            size_t vlen = n - nlen - 1;
            while (vlen > 0 && p[nlen + 1 + vlen - 1] == ' ') {
                vlen--;
            }
            if (vlen >= cap) {
                return 0;
            }
            memcpy(out, p + nlen + 1, vlen);
            out[vlen] = '\0';
            return 1;
        }
        p = end;
    }
    return 0;
}

static int http_hex(char c) {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

int hv_http_form_get(const char *body, size_t len, const char *name, char *out, size_t cap) {
    size_t nlen = strlen(name), i = 0;
    while (i < len) {
        size_t b = i;
        while (i < len && body[i] != '&') {
            i++;
        }
        size_t e = i++; /* [b, e) is one name=value pair */
        if (e - b <= nlen || body[b + nlen] != '=' || memcmp(body + b, name, nlen) != 0) {
            continue;
        }
        size_t o = 0;
        for (size_t k = b + nlen + 1; k < e; k++) {
            int c = (unsigned char)body[k];
            if (c == '+') {
                c = ' ';
            } else if (c == '%') {
                int hi = k + 2 < e ? http_hex(body[k + 1]) : -1;
                int lo = k + 2 < e ? http_hex(body[k + 2]) : -1;
                if (hi < 0 || lo < 0) {
                    return 0;
                }
                c = hi * 16 + lo;
                k += 2;
            }
            if (c < 0x20 || c == 0x7f || o + 1 >= cap) {
                return 0;
            }
            out[o++] = (char)c;
        }
        out[o] = '\0';
        return 1;
    }
    return 0;
}

int hv_http_bearer_ok(const char *authorization, const char *token) {
    if (token == NULL || token[0] == '\0') {
        return 1;
    }
    if (authorization == NULL || strncasecmp(authorization, "Bearer ", 7) != 0) {
        return 0;
    }
    const char *got = authorization + 7;
    while (*got == ' ') {
        got++;
    }
    size_t glen = strlen(got), tlen = strlen(token);
    /* Every byte of the token is looked at whatever the guess, so the time says nothing of how
     * much of it matched. */
    unsigned char diff = glen != tlen;
    for (size_t i = 0; i < tlen; i++) {
        diff |= (unsigned char)(token[i] ^ (i < glen ? got[i] : 0));
    }
    return diff == 0;
}

int hv_http_route_match(const char *route, const char *path) {
    size_t n = strlen(route);
    if (n > 1 && route[n - 1] == '/') {
        return strncmp(route, path, n) == 0 && path[n] != '\0';
    }
    return strcmp(route, path) == 0;
}

/* ---- the connection gate (pure) ------------------------------------------------------------ */

hv_http_gate_verdict hv_http_gate(const hv_http_slot_t *slots, size_t n, uint32_t addr_open,
                                  uint32_t max_conns, uint32_t max_per_addr, size_t *victim) {
    size_t best = n;
    if (addr_open >= max_per_addr) {
        for (size_t i = 0; i < n; i++) {
            if (slots[i].same_addr && slots[i].idle && !slots[i].busy &&
                (best == n || slots[i].seq < slots[best].seq)) {
                best = i;
            }
        }
        if (best == n) {
            return HV_HTTP_GATE_REFUSE_ADDR;
        }
        *victim = best;
        return HV_HTTP_GATE_EVICT;
    }
    if (n < max_conns) {
        return HV_HTTP_GATE_ADMIT;
    }
    for (size_t i = 0; i < n; i++) {
        if (slots[i].busy) {
            continue;
        }
        if (best == n || slots[i].addr_open > slots[best].addr_open ||
            (slots[i].addr_open == slots[best].addr_open && slots[i].seq < slots[best].seq)) {
            best = i;
        }
    }
    if (best == n) {
        return HV_HTTP_GATE_REFUSE_FULL;
    }
    *victim = best;
    return HV_HTTP_GATE_EVICT;
}

const char *hv_http_reason(int status) {
    switch (status) {
    case 200:
        return "OK";
    case 303:
        return "See Other";
    case 403:
        return "Forbidden";
    case 411:
        return "Length Required";
    case 413:
        return "Content Too Large";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 414:
        return "URI Too Long";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 503:
        return "Service Unavailable";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Unknown";
    }
}

/* ---- replies -------------------------------------------------------------------------------- */

static int reply_reserve(hv_http_reply_t *r, size_t more) {
    if (r->oom) {
        return 0;
    }
    if (r->len + more + 1 <= r->cap) {
        return 1;
    }
    size_t cap = r->cap ? r->cap : 4096;
    while (cap < r->len + more + 1) {
        cap *= 2;
    }
    char *nb = hv_realloc(r->body, cap);
    if (nb == NULL) {
        r->oom = 1;
        return 0;
    }
    r->body = nb;
    r->cap = cap;
    return 1;
}

hv_err hv_http_reply_header(hv_http_reply_t *r, const char *name, const char *value) {
    for (const char *p = name; *p != '\0'; p++) {
        if (!http_tchar((unsigned char)*p)) {
            return HV_EINVAL;
        }
    }
    for (const char *p = value; *p != '\0'; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f) {
            return HV_EINVAL;
        }
    }
    size_t have = strlen(r->headers);
    int n = snprintf(r->headers + have, sizeof(r->headers) - have, "%s: %s\r\n", name, value);
    if (n < 0 || (size_t)n >= sizeof(r->headers) - have) {
        r->headers[have] = '\0';
        return HV_ETOOBIG;
    }
    return HV_OK;
}

void hv_http_reply_add(hv_http_reply_t *r, const char *data, size_t len) {
    if (reply_reserve(r, len)) {
        memcpy(r->body + r->len, data, len);
        r->len += len;
        r->body[r->len] = '\0';
    }
}

void hv_http_reply_printf(hv_http_reply_t *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !reply_reserve(r, (size_t)n)) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(r->body + r->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    r->len += (size_t)n;
}

/* ---- the server ----------------------------------------------------------------------------- */

typedef struct http_conn_s {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_write_t wr;
    uv_shutdown_t sd;
    hv_http_server_t *s;
    char buf[HV_HTTP_MAX_HEAD + HV_HTTP_MAX_BODY]; /* request bytes received, not yet answered */
    size_t len;
    char *out; /* the response being written (owned) */
    int writing, close_after, closing, handles_open;
    int lingering; /* answered and shut down: what the peer still sends is read and dropped */
    int idle;      /* kept alive after a response, nothing of the next request arrived yet */
    uint64_t seq;  /* the server's count when it was accepted or last answered (hv_http_gate) */
    char addr[HV_CONNGATE_KEY_LEN]; /* the peer's IP address ("" when unknown) */
    struct http_conn_s *prev, *next;
} http_conn_t;

struct hv_http_server_s {
    uv_loop_t *loop;
    uv_tcp_t listener;
    hv_http_route_t *routes; /* owned copy */
    size_t nroutes;
    char *token; /* owned; NULL = none */
    uint32_t timeout_ms;
    hv_http_session_fn session_ok;
    void *session_ud;
    const char *login_path;
    http_conn_t *conns; /* open connections (owned) */
    uint64_t seq;       /* accepts and responses so far: the order of hv_http_slot_t.seq */
    uint64_t log_ms;    /* uv_now of the last HV-HTTP-LIMIT line; 0 = none yet */
    uint64_t unlogged;  /* refusals and evictions since that line */
    int closing, listener_open;
    hv_http_stats_t stats;
};

static void server_maybe_free(hv_http_server_t *s) {
    if (s->closing && !s->listener_open && s->conns == NULL) {
        if (s->token != NULL) {
            memset(s->token, 0, strlen(s->token));
        }
        hv_free(s->token);
        hv_free(s->routes);
        hv_free(s);
    }
}

static void conn_handle_closed(uv_handle_t *h) {
    http_conn_t *c = h->data;
    if (--c->handles_open > 0) {
        return;
    }
    hv_http_server_t *s = c->s;
    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        s->conns = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    hv_free(c->out);
    hv_free(c);
    server_maybe_free(s);
}

static void conn_close(http_conn_t *c) {
    if (c->closing) {
        return;
    }
    c->closing = 1;
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, conn_handle_closed);
    uv_close((uv_handle_t *)&c->tcp, conn_handle_closed);
}

static void conn_read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *b);
static void conn_process(http_conn_t *c);

static void conn_alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *b) {
    (void)hint;
    http_conn_t *c = h->data;
    b->base = c->buf + c->len;
    b->len = sizeof(c->buf) - c->len;
}

static void conn_timeout_cb(uv_timer_t *t);

static void conn_write_cb(uv_write_t *w, int status) {
    http_conn_t *c = w->data;
    c->writing = 0;
    hv_free(c->out);
    c->out = NULL;
    if (status != 0 || c->s->closing) {
        conn_close(c);
        return;
    }
    if (c->close_after) {
        /* Closing a socket with unread bytes (the rest of an oversized request) makes the kernel
         * send a reset, which can destroy the response before the client reads it. So: FIN
         * first, then read and drop what still comes, until the peer closes or a short bound. */
        c->lingering = 1;
        c->len = 0;
        if (uv_shutdown(&c->sd, (uv_stream_t *)&c->tcp, NULL) != 0 ||
            uv_read_start((uv_stream_t *)&c->tcp, conn_alloc_cb, conn_read_cb) != 0) {
            conn_close(c);
            return;
        }
        uv_timer_start(&c->timer, conn_timeout_cb, HV_HTTP_LINGER_MS, 0);
        return;
    }
    /* Idle until the next request begins (conn_read_cb then gives it HV_HTTP_HEAD_MS). */
    c->idle = c->len == 0;
    c->seq = ++c->s->seq;
    uv_timer_start(&c->timer, conn_timeout_cb, c->idle ? c->s->timeout_ms : HV_HTTP_HEAD_MS, 0);
    if (uv_read_start((uv_stream_t *)&c->tcp, conn_alloc_cb, conn_read_cb) != 0) {
        conn_close(c);
        return;
    }
    conn_process(c); /* a request that arrived behind the last one */
}

/* Writes one response (the body is borrowed; copied here) and, with close_after, closes. */
static void conn_respond(http_conn_t *c, int status, const char *ctype, const char *extra,
                         const char *body, size_t blen, int head_only, int close_after) {
    hv_http_server_t *s = c->s;
    s->stats.requests++;
    if (status == 401) {
        s->stats.unauthorized++;
    } else if (status >= 400 && status != 404) {
        s->stats.refused++;
    }
    uv_read_stop((uv_stream_t *)&c->tcp);
    uv_timer_stop(&c->timer);
    char hdr[512 + HV_HTTP_MAX_REPLY_HEADERS];
    int hn = snprintf(hdr, sizeof(hdr),
                      "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                      "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n%s%s%s"
                      "Connection: %s\r\n\r\n",
                      status, hv_http_reason(status), ctype, blen,
                      status == 401 ? "WWW-Authenticate: Bearer realm=\"hv\"\r\n" : "",
                      status == 405 ? "Allow: GET, HEAD\r\n" : "", extra != NULL ? extra : "",
                      close_after ? "close" : "keep-alive");
    if (hn < 0 || (size_t)hn >= sizeof(hdr)) {
        conn_close(c); /* cannot happen: the extra headers are bounded */
        return;
    }
    size_t total = (size_t)hn + (head_only ? 0 : blen);
    c->out = hv_malloc(total);
    if (c->out == NULL) {
        conn_close(c);
        return;
    }
    memcpy(c->out, hdr, (size_t)hn);
    if (!head_only && blen > 0) {
        memcpy(c->out + hn, body, blen);
    }
    c->close_after = close_after;
    c->writing = 1;
    c->wr.data = c;
    uv_buf_t b = uv_buf_init(c->out, (unsigned)total);
    if (uv_write(&c->wr, (uv_stream_t *)&c->tcp, &b, 1, conn_write_cb) != 0) {
        c->writing = 0;
        hv_free(c->out);
        c->out = NULL;
        conn_close(c);
    }
}

static void conn_error(http_conn_t *c, int status) {
    char body[128];
    int n = snprintf(body, sizeof(body), "%d %s\n", status, hv_http_reason(status));
    conn_respond(c, status, "text/plain; charset=utf-8", NULL, body, (size_t)n, 0, 1);
}

/* The access decision for a route (a request to no route: the bearer rule). 0: served; else
 * the status to answer (401 or 303 to the login page). Pure but for the session callback. */
static int conn_access(const hv_http_server_t *s, const hv_http_route_t *r,
                       const hv_http_request_t *req) {
    hv_http_access a = r != NULL ? r->access : HV_HTTP_TOKEN;
    if (a == HV_HTTP_OPEN || hv_http_bearer_ok(req->authorization, s->token)) {
        return 0;
    }
    if (a == HV_HTTP_SESSION && s->session_ok != NULL && s->session_ok(req, s->session_ud)) {
        return 0;
    }
    return a == HV_HTTP_SESSION && s->login_path != NULL ? 303 : 401;
}

static void conn_serve(http_conn_t *c, const hv_http_request_t *req) {
    hv_http_server_t *s = c->s;
    int close_after = !req->keep_alive;
    const hv_http_route_t *r = NULL;
    for (size_t i = 0; i < s->nroutes; i++) {
        if (hv_http_route_match(s->routes[i].path, req->path)) {
            r = &s->routes[i];
            break;
        }
    }
    int deny = conn_access(s, r, req);
    if (deny == 401) {
        const char *m = "401 Unauthorized: this endpoint needs 'Authorization: Bearer <token>' "
                        "with the token of metrics.token_file\n";
        conn_respond(c, 401, "text/plain; charset=utf-8", NULL, m, strlen(m), req->head,
                     close_after);
        return;
    }
    if (deny == 303) {
        char loc[300];
        snprintf(loc, sizeof(loc), "Location: %s\r\n", s->login_path);
        const char *m = "303 See Other: log in first\n";
        conn_respond(c, 303, "text/plain; charset=utf-8", loc, m, strlen(m), req->head,
                     close_after);
        return;
    }
    if (r == NULL) {
        char m[64];
        int n = snprintf(m, sizeof(m), "404 Not Found\n");
        conn_respond(c, 404, "text/plain; charset=utf-8", NULL, m, (size_t)n, req->head,
                     close_after);
        return;
    }
    if (req->post && !r->post) {
        const char *m = "405 Method Not Allowed\n";
        conn_respond(c, 405, "text/plain; charset=utf-8", NULL, m, strlen(m), 0, close_after);
        return;
    }
    hv_http_reply_t rep = {.status = 200, .content_type = "text/plain; charset=utf-8"};
    r->fn(req, &rep, r->ud);
    if (rep.oom) {
        hv_free(rep.body);
        conn_error(c, 500);
        return;
    }
    conn_respond(c, rep.status, rep.content_type, rep.headers, rep.body != NULL ? rep.body : "",
                 rep.len, req->head, close_after);
    hv_free(rep.body);
}

/* The peer's address as gRPC writes it ("ipv4:A:P", "ipv6:[A]:P"), for the audit trail. */
static void conn_peer(http_conn_t *c, char *out, size_t cap) {
    struct sockaddr_storage sa;
    int len = sizeof(sa);
    char host[INET6_ADDRSTRLEN] = "";
    out[0] = '\0';
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&sa, &len) != 0) {
        return;
    }
    if (sa.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)&sa;
        uv_ip6_name(a6, host, sizeof(host));
        snprintf(out, cap, "ipv6:[%s]:%d", host, ntohs(a6->sin6_port));
    } else if (sa.ss_family == AF_INET) {
        const struct sockaddr_in *a4 = (const struct sockaddr_in *)&sa;
        uv_ip4_name(a4, host, sizeof(host));
        snprintf(out, cap, "ipv4:%s:%d", host, ntohs(a4->sin_port));
    }
}

static void conn_process(http_conn_t *c) {
    if (c->writing || c->closing || c->len == 0) {
        return;
    }
    hv_http_request_t req;
    size_t used = 0;
    int status = 0;
    hv_err rc = hv_http_parse(c->buf, c->len, &req, &used, &status);
    if (rc != HV_OK) {
        conn_error(c, status);
        return;
    }
    if (used == 0) {
        return; /* incomplete: wait for more (the buffer's bound makes parse refuse 431) */
    }
    memmove(c->buf, c->buf + used, c->len - used);
    c->len -= used;
    /* A request may carry a secret (the bearer token, the login form's client token): no copy
     * of it stays in the buffer or on the stack once it was answered. */
    memset(c->buf + c->len, 0, used);
    conn_peer(c, req.peer, sizeof(req.peer));
    snprintf(req.addr, sizeof(req.addr), "%s", c->addr);
    conn_serve(c, &req);
    explicit_bzero(req.authorization, sizeof(req.authorization)); /* not optimised away */
    explicit_bzero(req.body, req.body_len);
}

static void conn_read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *b) {
    (void)b;
    http_conn_t *c = st->data;
    if (nread < 0) {
        conn_close(c);
        return;
    }
    if (c->lingering) {
        return; /* dropped: the buffer is reused from its start (len stays 0) */
    }
    if (c->idle && nread > 0) {
        c->idle = 0; /* a request begins: it has HV_HTTP_HEAD_MS to arrive whole */
        uv_timer_start(&c->timer, conn_timeout_cb, HV_HTTP_HEAD_MS, 0);
    }
    c->len += (size_t)nread;
    conn_process(c);
}

static void conn_timeout_cb(uv_timer_t *t) {
    http_conn_t *c = t->data;
    if (c->len > 0 && !c->writing && !c->lingering) {
        conn_error(c, 408); /* a request began and never ended */
        return;
    }
    conn_close(c); /* an idle keep-alive connection */
}

static void server_closed_listener(uv_handle_t *h) {
    hv_http_server_t *s = h->data;
    s->listener_open = 0;
    server_maybe_free(s);
}

static void conn_free_unlisted(uv_handle_t *h) { hv_free(h->data); }

/* The peer's IP address of a connection just accepted, the gate's key. */
static void conn_addr(http_conn_t *c) {
    struct sockaddr_storage sa;
    int len = sizeof(sa);
    c->addr[0] = '\0';
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&sa, &len) == 0) {
        (void)hv_conngate_key(&sa, (size_t)len, c->addr);
    }
}

/* The gate's view of the open connections (closing ones have left their place) and its verdict
 * on n, not yet listed; *victim gets the connection to close for it. */
static hv_http_gate_verdict server_gate(hv_http_server_t *s, const http_conn_t *n,
                                        http_conn_t **victim) {
    hv_http_slot_t slots[HV_HTTP_MAX_CONNS];
    http_conn_t *who[HV_HTTP_MAX_CONNS];
    size_t k = 0;
    uint32_t mine = 0;
    for (http_conn_t *c = s->conns; c != NULL && k < HV_HTTP_MAX_CONNS; c = c->next) {
        if (c->closing) {
            continue;
        }
        int same = strcmp(c->addr, n->addr) == 0;
        mine += (uint32_t)same;
        slots[k] = (hv_http_slot_t){.seq = c->seq,
                                    .same_addr = same,
                                    .busy = c->writing && !c->lingering,
                                    .idle = c->idle || c->lingering};
        who[k++] = c;
    }
    for (size_t i = 0; i < k; i++) {
        for (size_t j = 0; j < k; j++) {
            slots[i].addr_open += (uint32_t)(strcmp(who[i]->addr, who[j]->addr) == 0);
        }
    }
    size_t v = 0;
    hv_http_gate_verdict verdict =
        hv_http_gate(slots, k, mine, HV_HTTP_MAX_CONNS, HV_HTTP_MAX_PER_ADDR, &v);
    *victim = verdict == HV_HTTP_GATE_EVICT ? who[v] : NULL;
    return verdict;
}

/* HV-HTTP-LIMIT, at most once per HV_CONNGATE_LOG_MS, with the count since the last line. */
static void server_log_limit(hv_http_server_t *s, const http_conn_t *n, hv_http_gate_verdict v) {
    s->unlogged++;
    uint64_t now = uv_now(s->loop);
    if (s->log_ms != 0 && now - s->log_ms < HV_CONNGATE_LOG_MS) {
        return;
    }
    char what[160];
    if (v == HV_HTTP_GATE_REFUSE_ADDR) {
        snprintf(what, sizeof(what),
                 "was refused: its address holds %d connections, the most one "
                 "address may",
                 HV_HTTP_MAX_PER_ADDR);
    } else if (v == HV_HTTP_GATE_REFUSE_FULL) {
        snprintf(what, sizeof(what),
                 "was refused: each of the %d places holds a request being "
                 "answered",
                 HV_HTTP_MAX_CONNS);
    } else {
        snprintf(what, sizeof(what),
                 "took the place of one that held it without being answered "
                 "(all %d taken)",
                 HV_HTTP_MAX_CONNS);
    }
    HV_LOG(HV_LOG_WARN, "http", "HV-HTTP-LIMIT",
           "a connection from %s %s; %llu connections refused or closed for room since the "
           "last such line",
           n->addr[0] ? n->addr : "an unknown address", what, (unsigned long long)s->unlogged);
    s->log_ms = now ? now : 1;
    s->unlogged = 0;
}

static void server_accept_cb(uv_stream_t *l, int status) {
    hv_http_server_t *s = l->data;
    if (status != 0 || s->closing) {
        return;
    }
    http_conn_t *c = hv_calloc(1, sizeof(*c));
    if (c == NULL) {
        return;
    }
    c->s = s;
    uv_tcp_init(s->loop, &c->tcp);
    c->tcp.data = c;
    if (uv_accept(l, (uv_stream_t *)&c->tcp) != 0) {
        uv_close((uv_handle_t *)&c->tcp, conn_free_unlisted);
        return;
    }
    conn_addr(c);
    http_conn_t *victim = NULL;
    hv_http_gate_verdict v = server_gate(s, c, &victim);
    if (v == HV_HTTP_GATE_REFUSE_ADDR || v == HV_HTTP_GATE_REFUSE_FULL) {
        /* Closed at once, before any byte is read, so the backlog does not fill. */
        s->stats.refused++;
        server_log_limit(s, c, v);
        uv_close((uv_handle_t *)&c->tcp, conn_free_unlisted);
        return;
    }
    if (victim != NULL) {
        s->stats.evicted++;
        if (strcmp(victim->addr, c->addr) != 0) {
            server_log_limit(s, c, v); /* (its own idle connection: no news) */
        }
        conn_close(victim);
    }
    uv_timer_init(s->loop, &c->timer);
    c->timer.data = c;
    c->handles_open = 2;
    c->seq = ++s->seq;
    c->next = s->conns;
    if (s->conns != NULL) {
        s->conns->prev = c;
    }
    s->conns = c;
    if (uv_read_start((uv_stream_t *)&c->tcp, conn_alloc_cb, conn_read_cb) != 0) {
        conn_close(c);
        return;
    }
    uv_timer_start(&c->timer, conn_timeout_cb, HV_HTTP_HEAD_MS, 0);
}

hv_err hv_http_server_create(uv_loop_t *loop, const hv_http_opts_t *o, hv_http_server_t **out,
                             int *port_out, char *err, size_t errlen) {
    char host[256];
    int port = 0;
    struct sockaddr_storage sa;
    memset(&sa, 0, sizeof(sa));
    if (o->listen == NULL || hv_parse_hostport(o->listen, host, sizeof(host), &port) != HV_OK) {
        snprintf(err, errlen, "'%s' is not HOST:PORT", o->listen ? o->listen : "");
        return HV_EINVAL;
    }
    if (strcasecmp(host, "localhost") == 0) {
        snprintf(host, sizeof(host), "127.0.0.1");
    }
    if (uv_ip4_addr(host, port, (struct sockaddr_in *)&sa) != 0 &&
        uv_ip6_addr(host, port, (struct sockaddr_in6 *)&sa) != 0) {
        snprintf(err, errlen, "'%s' is not a numeric address (an IPv4 or IPv6 literal)", host);
        return HV_EINVAL;
    }
    hv_http_server_t *s = hv_calloc(1, sizeof(*s));
    if (s == NULL) {
        return HV_ENOMEM;
    }
    s->loop = loop;
    s->timeout_ms = o->timeout_ms ? o->timeout_ms : HV_HTTP_TIMEOUT_MS;
    s->session_ok = o->session_ok;
    s->session_ud = o->session_ud;
    s->login_path = o->login_path;
    s->routes = hv_calloc(o->nroutes ? o->nroutes : 1, sizeof(*s->routes));
    s->token = o->token != NULL && o->token[0] != '\0' ? hv_strdup(o->token) : NULL;
    if (s->routes == NULL || (o->token != NULL && o->token[0] != '\0' && s->token == NULL)) {
        hv_free(s->routes);
        hv_free(s->token);
        hv_free(s);
        return HV_ENOMEM;
    }
    if (o->nroutes > 0) {
        memcpy(s->routes, o->routes, o->nroutes * sizeof(*s->routes));
    }
    s->nroutes = o->nroutes;
    uv_tcp_init(loop, &s->listener);
    s->listener.data = s;
    s->listener_open = 1;
    int urc = uv_tcp_bind(&s->listener, (const struct sockaddr *)&sa, 0);
    if (urc == 0) {
        urc = uv_listen((uv_stream_t *)&s->listener, 64, server_accept_cb);
    }
    if (urc != 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", o->listen, uv_strerror(urc));
        s->closing = 1;
        uv_close((uv_handle_t *)&s->listener, server_closed_listener);
        return HV_EUNAVAIL;
    }
    if (port_out != NULL) {
        struct sockaddr_storage bound;
        int blen = sizeof(bound);
        *port_out = port;
        if (uv_tcp_getsockname(&s->listener, (struct sockaddr *)&bound, &blen) == 0) {
            *port_out = bound.ss_family == AF_INET6
                            ? ntohs(((struct sockaddr_in6 *)&bound)->sin6_port)
                            : ntohs(((struct sockaddr_in *)&bound)->sin_port);
        }
    }
    *out = s;
    return HV_OK;
}

void hv_http_server_close(hv_http_server_t *s) {
    if (s == NULL || s->closing) {
        return;
    }
    s->closing = 1;
    for (http_conn_t *c = s->conns; c != NULL; c = c->next) {
        conn_close(c);
    }
    uv_close((uv_handle_t *)&s->listener, server_closed_listener);
}

void hv_http_server_stats(const hv_http_server_t *s, hv_http_stats_t *out) {
    if (s == NULL) {
        memset(out, 0, sizeof(*out));
        return;
    }
    *out = s->stats;
}
