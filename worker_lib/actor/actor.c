/*
 * actor: the actor process's side of libhv's actors (include/hv/actor.h): the class registry,
 * and a server that holds one instance of one class and serves calls on it over TCP.
 *
 * Threads: hv_actor_server_start starts ONE dispatcher thread that owns everything below the
 * registry: the listening socket, every connection, the instance. It runs a poll loop: it
 * accepts, runs each connection's handshake, reads whatever arrived, runs every complete CALL in
 * the order of its connection (so calls of one connection run in the order sent, and no two
 * calls of the instance ever run at once), appends each reply to its connection's output buffer,
 * and flushes every buffer once per turn (so a pipelined burst is answered with few writes), or
 * sooner, without blocking, once the calls of a turn have run ACTOR_FLUSH_US (so slow calls are
 * answered one by one as they finish).
 * Other threads reach it only through the mutex-protected request fields (save, stop) and a
 * wake-up pipe. A first version: one slow method delays every caller of the actor; calls of
 * different connections interleave frame by frame in the order the loop reads them.
 *
 * Bounds: a frame over max_frame closes its connection with an ERROR frame; a connection that
 * has not authenticated within handshake_timeout_ms is closed; at most max_conns connections; a
 * connection whose unsent replies pass ACTOR_OUT_HIGH is neither read nor served until they drain
 * (a caller that does not read its replies cannot make the actor buffer without end).
 *
 * Figures (common/callfig.h): the dispatcher thread counts each call it runs (answered OK or
 * with a method error, argument and result bytes, its service time from the start of its
 * dispatch to its reply queued) in its own fields, with no lock, and when HV_ACTOR_FIGURES_OUT
 * names a file (the agent sets it) writes them there at most once per ACTOR_FIGURES_MS while
 * they change, and once more when the server stops: one line, to a temporary file renamed over
 * the old one (no fsync: the figures must survive the process, not the machine).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "log.h"
#include "mem.h"
#include "sha256.h"
#include "util.h"

#include "actor_wire.h"
#include "callfig.h"
#include "hv/actor.h"

#define ACTOR_CLASSES_MAX 4096 // classes one process may register
#define ACTOR_CONNS_DEFAULT 256
#define ACTOR_HANDSHAKE_DEFAULT_MS 5000
#define ACTOR_READ_CHUNK (64u << 10) // bytes asked of one recv
#define ACTOR_OUT_HIGH (8u << 20)    // unsent reply bytes above which a connection is not read
#define ACTOR_STOP_FLUSH_MS 2000     // bound on flushing replies at stop
#define ACTOR_STATE_MAX (1ull << 30) // largest state file read at start
#define ACTOR_FLUSH_US 2000          // a turn that ran calls this long sends their replies
#define ACTOR_FIGURES_MS 1000        // the figures file is written at most this often

/* ---- the class registry (process-wide) ------------------------------------------------------ */

/* One registered class: a copy whose name points into the entry itself. Entries are allocated
 * one by one and kept for the life of the process, so a copy of cls (a server's) stays valid
 * while the array of pointers grows. */
typedef struct reg_entry_s {
    hv_actor_class_t cls;
    char name[HV_ACTOR_NAME_MAX + 1];
} reg_entry_t;

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static reg_entry_t **registry; // owned (process lifetime), under registry_mu
static size_t registry_n;      // entries used
static size_t registry_cap;    // entries allocated

static int actor_name_ok(const char *name) {
    size_t n = name != NULL ? strlen(name) : 0;
    if (n == 0 || n > HV_ACTOR_NAME_MAX) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-')) {
            return 0;
        }
    }
    return 1;
}

hv_err hv_actor_register(const hv_actor_class_t *cls) {
    if (cls == NULL || cls->size < sizeof(hv_actor_class_t) || !actor_name_ok(cls->name) ||
        cls->create == NULL || cls->call == NULL) {
        HV_LOG(HV_LOG_ERROR, "actor", "HV-ACTOR-CLASS",
               "hv_actor_register: a class needs size, a name of 1..%d bytes of [A-Za-z0-9_.-], "
               "create and call",
               HV_ACTOR_NAME_MAX);
        return HV_EINVAL;
    }
    hv_err rc = HV_OK;
    pthread_mutex_lock(&registry_mu);
    for (size_t i = 0; i < registry_n; i++) {
        if (strcmp(registry[i]->name, cls->name) == 0) {
            rc = HV_EEXIST;
            goto out;
        }
    }
    if (registry_n == ACTOR_CLASSES_MAX) {
        rc = HV_ETOOBIG;
        goto out;
    }
    if (registry_n == registry_cap) {
        size_t cap = registry_cap ? registry_cap * 2 : 16;
        reg_entry_t **g = hv_realloc(registry, cap * sizeof(*registry));
        if (g == NULL) {
            rc = HV_ENOMEM;
            goto out;
        }
        registry = g;
        registry_cap = cap;
    }
    reg_entry_t *e = hv_calloc(1, sizeof(*e));
    if (e == NULL) {
        rc = HV_ENOMEM;
        goto out;
    }
    e->cls = *cls;
    snprintf(e->name, sizeof(e->name), "%s", cls->name);
    e->cls.name = e->name;
    registry[registry_n++] = e;
out:
    pthread_mutex_unlock(&registry_mu);
    return rc;
}

static hv_err actor_find_class(const char *name, hv_actor_class_t *out) {
    hv_err rc = HV_ENOTFOUND;
    pthread_mutex_lock(&registry_mu);
    for (size_t i = 0; i < registry_n; i++) {
        if (strcmp(registry[i]->name, name) == 0) {
            *out = registry[i]->cls;
            rc = HV_OK;
            break;
        }
    }
    pthread_mutex_unlock(&registry_mu);
    return rc;
}

/* ---- growable byte buffers and the result writer -------------------------------------------- */

typedef struct wbuf_s {
    uint8_t *p; // owned
    size_t len; // bytes used
    size_t cap; // bytes allocated
} wbuf_t;

static hv_err wbuf_reserve(wbuf_t *b, size_t more) {
    if (b->cap - b->len >= more) {
        return HV_OK;
    }
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < more) {
        cap *= 2;
    }
    uint8_t *p = hv_realloc(b->p, cap);
    if (p == NULL) {
        return HV_ENOMEM;
    }
    b->p = p;
    b->cap = cap;
    return HV_OK;
}

static hv_err wbuf_append(wbuf_t *b, const void *data, size_t len) {
    HV_TRY(wbuf_reserve(b, len));
    if (len > 0) {
        memcpy(b->p + b->len, data, len);
    }
    b->len += len;
    return HV_OK;
}

/* A method's result goes straight into its connection's output buffer, after the reply header
 * reserved at start; the header is filled in once the method returned. */
struct hv_actor_out_s {
    wbuf_t *b;       // borrowed: the connection's output (or save's buffer)
    size_t start;    // offset of the first result byte in b
    size_t limit;    // most result bytes allowed (the frame limit)
    hv_err overflow; // HV_ETOOBIG or HV_ENOMEM once an append failed
    int has_msg;     // hv_actor_out_errorf was called
    char msg[HV__ACTOR_ERRMSG_MAX];
};

hv_err hv_actor_out_append(hv_actor_out_t *out, const void *data, size_t len) {
    if (out == NULL || (data == NULL && len > 0)) {
        return HV_EINVAL;
    }
    if (out->b->len - out->start + len > out->limit) {
        out->overflow = HV_ETOOBIG;
        return HV_ETOOBIG;
    }
    hv_err rc = wbuf_append(out->b, data, len);
    if (rc != HV_OK) {
        out->overflow = rc;
    }
    return rc;
}

void hv_actor_out_errorf(hv_actor_out_t *out, const char *fmt, ...) {
    if (out == NULL || fmt == NULL) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->msg, sizeof(out->msg), fmt, ap);
    va_end(ap);
    out->has_msg = 1;
}

void hv_actor_out_error(hv_actor_out_t *out, const char *msg) {
    if (out == NULL || msg == NULL) {
        return;
    }
    snprintf(out->msg, sizeof(out->msg), "%s", msg);
    out->has_msg = 1;
}

/* ---- the server ----------------------------------------------------------------------------- */

typedef struct conn_s {
    int fd;                         // owned, non-blocking
    int authed;                     // 1 once the caller proved the secret
    int closing;                    // close once out is flushed (after an ERROR frame)
    uint64_t deadline;              // hv_now_ms: end of the handshake, or of the closing flush
    uint8_t nonce[HV__ACTOR_NONCE]; // our challenge
    wbuf_t in;                      // received, not yet parsed
    wbuf_t out;                     // replies not yet sent, from out_off
    size_t out_off;                 // bytes of out already sent
    char peer[64];                  // "ip:port", for the log
    uint64_t last_id;               // the last call run on this connection (0: none)
} conn_t;

struct hv_actor_server_s {
    hv_actor_class_t cls; // copy of the registered class
    char class_name[HV_ACTOR_NAME_MAX + 1];
    void *self;                           // the instance, owned (cls.destroy)
    char secret[HV_ACTOR_SECRET_MAX + 1]; // never logged
    char state_out[PATH_MAX];             // "" when none
    uint32_t max_frame, max_conns, hs_timeout_ms;
    int lfd; // listening socket, owned by the thread after start
    int port;
    int wake[2]; // pipe: other threads wake the loop
    pthread_t thr;
    conn_t **conns; // loop thread only
    size_t nconns;
    uint64_t calls; // calls served, loop thread only
    /* The call figures: loop thread only while it runs, then hv_actor_server_stop's. */
    hv_callfig_t fig;
    int fig_dirty;              // fig changed since it was last written
    uint64_t fig_written_ms;    // hv_now_ms of the last write
    char figures_out[PATH_MAX]; // HV_ACTOR_FIGURES_OUT ("" none)
    /* Requests from other threads, under mu. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;              // 1: the loop should end
    const char *save_path; // a pending save request (borrowed from the waiting caller)
    int save_busy;         // a save request is in progress
    int save_done;         // the loop finished the request
    hv_err save_rc;
};

static void conn_free(conn_t *c) {
    if (c == NULL) {
        return;
    }
    if (c->fd >= 0) {
        close(c->fd);
    }
    hv_free(c->in.p);
    hv_free(c->out.p);
    hv_free(c);
}

/* Appends one whole frame to c's output. */
static hv_err conn_frame(conn_t *c, uint8_t type, uint64_t id, const void *body, size_t len) {
    uint8_t h[HV__ACTOR_HDR];
    hv__actor_hdr_t hd = {.len = (uint32_t)len, .type = type, .id = id};
    hv__actor_hdr_put(h, &hd);
    HV_TRY(wbuf_append(&c->out, h, sizeof(h)));
    return wbuf_append(&c->out, body, len);
}

/* Queues an ERROR frame and marks c to close once it is sent (bounded by the deadline). */
static void conn_refuse(conn_t *c, hv_err code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void conn_refuse(conn_t *c, hv_err code, const char *fmt, ...) {
    uint8_t body[4 + 256];
    hv__actor_put_u32(body, (uint32_t)code);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf((char *)body + 4, sizeof(body) - 4, fmt, ap);
    va_end(ap);
    size_t tl = n < 0 ? 0 : (size_t)n < sizeof(body) - 4 ? (size_t)n : sizeof(body) - 5;
    (void)conn_frame(c, HV__ACTOR_ERROR, 0, body, 4 + tl);
    c->closing = 1;
    c->deadline = hv_now_ms() + 1000;
}

/* Sends what c's output holds without blocking. HV_EPEER when the socket failed. */
static hv_err conn_flush(conn_t *c) {
    while (c->out_off < c->out.len) {
        ssize_t n = send(c->fd, c->out.p + c->out_off, c->out.len - c->out_off,
                         MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
            c->out_off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            /* A slow reader: drop the sent prefix now and then, or the buffer would keep
             * growing while it is never empty. */
            if (c->out_off >= (1u << 20) && c->out_off >= c->out.len / 2) {
                memmove(c->out.p, c->out.p + c->out_off, c->out.len - c->out_off);
                c->out.len -= c->out_off;
                c->out_off = 0;
            }
            return HV_OK;
        }
        return HV_EPEER;
    }
    c->out.len = 0;
    c->out_off = 0;
    return HV_OK;
}

static uint64_t actor_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* 1 when the call frame h (body: its bytes) does not carry a method name the actor can run:
 * none, longer than HV_ACTOR_METHOD_MAX (or than the frame), or with a NUL inside (it would run
 * the method named by the bytes before the NUL). Refused with HV_EINVAL saying which, before
 * anything runs; the connection closes after the error (a caller built on libhv cannot send
 * either). */
static int srv_bad_name(conn_t *c, const hv__actor_hdr_t *h, const uint8_t *body) {
    if (h->name_len == 0 || h->name_len > h->len) {
        conn_refuse(c, HV_EINVAL, "invalid call: a method name of %u bytes in a frame of %u",
                    h->name_len, h->len);
    } else if (h->name_len > HV_ACTOR_METHOD_MAX) {
        conn_refuse(c, HV_EINVAL, "invalid call: a method name of %u bytes, at most %d",
                    h->name_len, HV_ACTOR_METHOD_MAX);
    } else if (memchr(body, '\0', h->name_len) != NULL) {
        conn_refuse(c, HV_EINVAL,
                    "invalid call: the method name has a NUL byte at offset %zu (no method runs)",
                    (size_t)((const uint8_t *)memchr(body, '\0', h->name_len) - body));
    } else {
        return 0;
    }
    HV_LOG(HV_LOG_WARN, "actor", "HV-ACTOR-CALL", "refused a call from %s: %s", c->peer,
           "its method name is empty, too long or has a NUL byte");
    return 1;
}

/* Runs one call, appends its REPLY (status, then result or message) to c's output, and counts
 * it in the figures. */
static hv_err srv_call(hv_actor_server_t *s, conn_t *c, uint64_t id, const uint8_t *body,
                       uint32_t len, uint16_t name_len) {
    uint64_t t0 = actor_now_ns();
    char method[HV_ACTOR_METHOD_MAX + 1];
    memcpy(method, body, name_len);
    method[name_len] = '\0';
    size_t hdr_at = c->out.len;
    HV_TRY(wbuf_reserve(&c->out, HV__ACTOR_HDR + 4));
    c->out.len += HV__ACTOR_HDR + 4;
    hv_actor_out_t out = {.b = &c->out, .start = c->out.len, .limit = s->max_frame - 4};
    hv_err rc = s->cls.call(s->self, method, body + name_len, len - name_len, &out);
    s->calls++;
    c->last_id = id;
    if (rc == HV_OK && out.overflow != HV_OK) {
        rc = out.overflow;
        hv_actor_out_errorf(&out, "the result of %s is over the actor's frame limit of %u bytes",
                            method, s->max_frame);
    }
    if (rc != HV_OK) {
        /* The result is replaced by the error message. */
        c->out.len = out.start;
        const char *msg = out.has_msg ? out.msg : hv_strerror(rc);
        HV_TRY(wbuf_append(&c->out, msg, strlen(msg)));
    }
    uint8_t *h = c->out.p + hdr_at;
    hv__actor_hdr_t hd = {
        .len = (uint32_t)(c->out.len - hdr_at - HV__ACTOR_HDR), .type = HV__ACTOR_REPLY, .id = id};
    hv__actor_hdr_put(h, &hd);
    hv__actor_put_u32(h + HV__ACTOR_HDR, (uint32_t)rc);
    hv_callfig_count(&s->fig, rc == HV_OK, actor_now_ns() - t0, len - name_len,
                     c->out.len - out.start);
    s->fig_dirty = 1;
    return HV_OK;
}

/* Writes the figures to HV_ACTOR_FIGURES_OUT (temporary file, then rename). A failure is
 * logged once and tried again at the next write. */
static void srv_figures_write(hv_actor_server_t *s) {
    char line[HV_CALLFIG_LINE_MAX], tmp[PATH_MAX + 16];
    static int warned;
    s->fig_written_ms = hv_now_ms();
    if (hv_callfig_format(&s->fig, line, sizeof(line)) != HV_OK ||
        snprintf(tmp, sizeof(tmp), "%s.tmp", s->figures_out) >= (int)sizeof(tmp)) {
        return;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    size_t len = strlen(line);
    int ok = fd >= 0 && write(fd, line, len) == (ssize_t)len;
    if (fd >= 0) {
        ok = close(fd) == 0 && ok;
    }
    if (ok && rename(tmp, s->figures_out) == 0) {
        s->fig_dirty = 0;
        return;
    }
    if (!warned) {
        warned = 1;
        HV_LOG(HV_LOG_WARN, "actor", "HV-ACTOR-FIGURES",
               "actor %s: cannot write its figures to %s: %s", s->class_name, s->figures_out,
               strerror(errno));
    }
}

/* The milliseconds until the figures are due to be written (-1: nothing to write). */
static int srv_figures_due(const hv_actor_server_t *s, uint64_t now) {
    if (!s->fig_dirty || s->figures_out[0] == '\0') {
        return -1;
    }
    uint64_t at = s->fig_written_ms + ACTOR_FIGURES_MS;
    return at > now ? (int)(at - now) : 0;
}

/* Checks a caller's AUTH and answers WELCOME, or refuses. */
static void srv_auth(hv_actor_server_t *s, conn_t *c, const uint8_t *body) {
    uint8_t want[HV__ACTOR_MAC];
    hv__actor_mac(s->secret, 0, c->nonce, body, want);
    if (!hv_ct_equal(want, body + HV__ACTOR_NONCE, HV__ACTOR_MAC)) {
        HV_LOG(HV_LOG_WARN, "actor", "HV-ACTOR-AUTH",
               "refused a connection from %s: it does not know this actor's secret", c->peer);
        conn_refuse(c, HV_EAUTH, "not authenticated: wrong secret for this actor");
        return;
    }
    uint8_t mac[HV__ACTOR_MAC];
    hv__actor_mac(s->secret, 1, body, c->nonce, mac);
    if (conn_frame(c, HV__ACTOR_WELCOME, 0, mac, sizeof(mac)) != HV_OK) {
        conn_refuse(c, HV_ENOMEM, "out of memory");
        return;
    }
    c->authed = 1;
}

/* 1 when c holds a whole frame (or a header over the limit) that it may handle now. */
static int conn_ready(const hv_actor_server_t *s, const conn_t *c) {
    if (c->closing || c->in.len < HV__ACTOR_HDR || c->out.len - c->out_off >= ACTOR_OUT_HIGH) {
        return 0;
    }
    hv__actor_hdr_t h;
    hv__actor_hdr_get(c->in.p, &h);
    return h.len > s->max_frame || c->in.len >= HV__ACTOR_HDR + (size_t)h.len;
}

static uint64_t actor_now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Handles every complete frame in c's input. The replies of a burst of fast calls leave in one
 * write at the end of the turn; once the calls have run ACTOR_FLUSH_US since the last write,
 * the replies ready so far are sent at once (without blocking), so the first caller of a
 * pipelined batch of slow calls is answered when its call is done, not after the whole batch. */
static void srv_parse(hv_actor_server_t *s, conn_t *c) {
    size_t pos = 0;
    uint64_t flushed = actor_now_us();
    while (!c->closing && c->in.len - pos >= HV__ACTOR_HDR &&
           c->out.len - c->out_off < ACTOR_OUT_HIGH) {
        hv__actor_hdr_t h;
        hv__actor_hdr_get(c->in.p + pos, &h);
        if (!c->authed && (h.type != HV__ACTOR_AUTH || h.len != HV__ACTOR_AUTH_LEN)) {
            conn_refuse(c, HV_EPROTO, "protocol error: the handshake comes first");
            break;
        }
        if (h.len > s->max_frame) {
            HV_LOG(HV_LOG_WARN, "actor", "HV-ACTOR-FRAME",
                   "closing the connection from %s: a frame of %u bytes is over the limit of %u",
                   c->peer, h.len, s->max_frame);
            conn_refuse(c, HV_ETOOBIG, "a frame of %u bytes is over this actor's limit of %u bytes",
                        h.len, s->max_frame);
            break;
        }
        if (c->in.len - pos < HV__ACTOR_HDR + (size_t)h.len) {
            break; // wait for the rest of the frame
        }
        const uint8_t *body = c->in.p + pos + HV__ACTOR_HDR;
        pos += HV__ACTOR_HDR + (size_t)h.len;
        if (!c->authed) {
            srv_auth(s, c, body);
        } else if (h.type != HV__ACTOR_CALL) {
            conn_refuse(c, HV_EPROTO,
                        "protocol error: expected a call (frame type %u), not type %u",
                        HV__ACTOR_CALL, h.type);
        } else if (srv_bad_name(c, &h, body)) {
            /* refused, nothing run (srv_bad_name said why) */
        } else if (srv_call(s, c, h.id, body, h.len, h.name_len) != HV_OK) {
            conn_refuse(c, HV_ENOMEM, "the actor ran out of memory");
        } else if (actor_now_us() - flushed >= ACTOR_FLUSH_US) {
            if (conn_flush(c) != HV_OK) {
                c->closing = 2; // the caller is gone: drop without flushing
            }
            flushed = actor_now_us();
        }
    }
    memmove(c->in.p, c->in.p + pos, c->in.len - pos);
    c->in.len -= pos;
}

/* Reads what is available on c (one recv) and handles it. HV_ECLOSED when the caller is gone. */
static hv_err srv_read(hv_actor_server_t *s, conn_t *c) {
    size_t want = ACTOR_READ_CHUNK;
    if (c->in.len >= HV__ACTOR_HDR) {
        /* A frame larger than one chunk: make room for all of it (its size was checked). */
        hv__actor_hdr_t h;
        hv__actor_hdr_get(c->in.p, &h);
        size_t need = HV__ACTOR_HDR + (size_t)h.len;
        if (h.len <= s->max_frame && need > c->in.len + want) {
            want = need - c->in.len;
        }
    }
    if (wbuf_reserve(&c->in, want) != HV_OK) {
        conn_refuse(c, HV_ENOMEM, "the actor ran out of memory");
        return HV_OK;
    }
    ssize_t n = recv(c->fd, c->in.p + c->in.len, c->in.cap - c->in.len, MSG_DONTWAIT);
    if (n == 0) {
        return HV_ECLOSED;
    }
    if (n < 0) {
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? HV_OK : HV_ECLOSED;
    }
    c->in.len += (size_t)n;
    srv_parse(s, c);
    return HV_OK;
}

static void srv_accept(hv_actor_server_t *s) {
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int fd = accept4(s->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            return; // EAGAIN, or a transient failure (EMFILE): the next turn tries again
        }
        conn_t *c = hv_calloc(1, sizeof(*c));
        conn_t **grown =
            c != NULL ? hv_realloc(s->conns, (s->nconns + 1) * sizeof(*s->conns)) : NULL;
        if (grown == NULL) {
            hv_free(c);
            close(fd);
            continue;
        }
        s->conns = grown;
        c->fd = fd;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        char host[48] = "?", serv[16] = "?";
        getnameinfo((struct sockaddr *)&ss, sl, host, sizeof(host), serv, sizeof(serv),
                    NI_NUMERICHOST | NI_NUMERICSERV);
        snprintf(c->peer, sizeof(c->peer), "%s:%s", host, serv);
        s->conns[s->nconns++] = c;
        if (s->nconns > s->max_conns) {
            conn_refuse(c, HV_EUNAVAIL, "the actor has %u connections already", s->max_conns);
            continue;
        }
        c->deadline = hv_now_ms() + s->hs_timeout_ms;
        uint8_t hello[HV__ACTOR_HELLO_LEN] = {0};
        hv__actor_put_u32(hello, HV__ACTOR_MAGIC);
        hello[4] = HV__ACTOR_VERSION;
        hv__actor_put_u32(hello + 8, s->max_frame);
        if (hv__actor_nonce(c->nonce) != HV_OK) {
            conn_refuse(c, HV_EIO, "the actor has no random source");
            continue;
        }
        memcpy(hello + 12, c->nonce, HV__ACTOR_NONCE);
        if (conn_frame(c, HV__ACTOR_HELLO, 0, hello, sizeof(hello)) != HV_OK) {
            conn_refuse(c, HV_ENOMEM, "out of memory");
        }
    }
}

static hv_err srv_save_to(hv_actor_server_t *s, const char *path) {
    if (s->cls.save == NULL) {
        return HV_ENOTSUP;
    }
    wbuf_t b = {0};
    hv_actor_out_t out = {.b = &b, .start = 0, .limit = ACTOR_STATE_MAX};
    hv_err rc = s->cls.save(s->self, &out);
    if (rc == HV_OK && out.overflow != HV_OK) {
        rc = out.overflow;
    }
    if (rc == HV_OK) {
        rc = hv_write_file_atomic(path, b.p != NULL ? b.p : (uint8_t *)"", b.len, 0600);
    }
    if (rc != HV_OK) {
        HV_LOG(HV_LOG_ERROR, "actor", "HV-ACTOR-SAVE",
               "actor %s: saving its state to %s failed: %s", s->class_name, path,
               out.has_msg ? out.msg : hv_strerror(rc));
    }
    hv_free(b.p);
    return rc;
}

/* Takes requests from other threads (save, stop). Returns 1 when the loop should end. */
static int srv_requests(hv_actor_server_t *s) {
    char drain[64];
    while (read(s->wake[0], drain, sizeof(drain)) > 0) {
    }
    pthread_mutex_lock(&s->mu);
    if (s->save_path != NULL && !s->save_done) {
        const char *path = s->save_path;
        pthread_mutex_unlock(&s->mu);
        hv_err rc = srv_save_to(s, path);
        pthread_mutex_lock(&s->mu);
        s->save_rc = rc;
        s->save_done = 1;
        pthread_cond_broadcast(&s->cv);
    }
    int stop = s->stop;
    pthread_mutex_unlock(&s->mu);
    return stop;
}

static void srv_drop(hv_actor_server_t *s, size_t i) {
    conn_free(s->conns[i]);
    s->conns[i] = s->conns[--s->nconns];
}

static void *srv_loop(void *arg) {
    hv_actor_server_t *s = arg;
    struct pollfd *pf = NULL;
    size_t pf_cap = 0;
    for (;;) {
        if (pf_cap < s->nconns + 2) {
            struct pollfd *g = hv_realloc(pf, (s->nconns + 2) * sizeof(*pf));
            if (g == NULL) {
                /* Keep serving the connections that fit; the next turn tries again. */
                usleep(1000);
                continue;
            }
            pf = g;
            pf_cap = s->nconns + 2;
        }
        uint64_t now = hv_now_ms();
        int timeout = 1000;
        pf[0] = (struct pollfd){.fd = s->wake[0], .events = POLLIN};
        pf[1] = (struct pollfd){.fd = s->lfd, .events = POLLIN};
        for (size_t i = 0; i < s->nconns; i++) {
            conn_t *c = s->conns[i];
            short ev = 0;
            if (!c->closing && c->out.len - c->out_off < ACTOR_OUT_HIGH) {
                ev |= POLLIN;
            }
            if (c->out_off < c->out.len) {
                ev |= POLLOUT;
            }
            pf[i + 2] = (struct pollfd){.fd = c->fd, .events = ev};
            if (conn_ready(s, c)) {
                timeout = 0; // calls wait in the buffer: serve them without waiting
            }
            if (!c->authed || c->closing) {
                int left = c->deadline > now ? (int)(c->deadline - now) : 0;
                timeout = left < timeout ? left : timeout;
            }
        }
        int due = srv_figures_due(s, now);
        if (due >= 0 && due < timeout) {
            timeout = due;
        }
        size_t polled = s->nconns;
        int pr = poll(pf, polled + 2, timeout);
        if (pr < 0 && errno != EINTR) {
            HV_LOG(HV_LOG_ERROR, "actor", "HV-ACTOR-POLL", "poll: %s", strerror(errno));
        }
        if (pf[0].revents != 0 && srv_requests(s)) {
            break;
        }
        /* Connections first (in their slots as polled), then new ones. */
        for (size_t i = 0; i < polled; i++) {
            conn_t *c = s->conns[i];
            if (pf[i + 2].revents & (POLLIN | POLLHUP | POLLERR)) {
                if (c->closing || srv_read(s, c) != HV_OK) {
                    c->closing = 2; // the caller is gone: drop without flushing
                }
            }
        }
        if (pf[1].revents & POLLIN) {
            srv_accept(s);
        }
        now = hv_now_ms();
        for (size_t i = s->nconns; i-- > 0;) {
            conn_t *c = s->conns[i];
            if (conn_ready(s, c)) {
                srv_parse(s, c); // calls left waiting while replies were over the bound
            }
            if (c->closing != 2 && conn_flush(c) != HV_OK) {
                c->closing = 2;
            }
            int expired = (!c->authed || c->closing) && now >= c->deadline;
            if (c->closing == 2 || (c->closing && c->out_off == c->out.len) || expired) {
                if (expired && !c->authed && !c->closing) {
                    HV_LOG(HV_LOG_WARN, "actor", "HV-ACTOR-HANDSHAKE",
                           "closing the connection from %s: no handshake within %u ms", c->peer,
                           s->hs_timeout_ms);
                }
                srv_drop(s, i);
            }
        }
        if (srv_figures_due(s, now) == 0) {
            srv_figures_write(s);
        }
    }
    hv_free(pf);
    /* Stop: the calls run were answered in the turns above; send the replies, then GOAWAY with
     * the last call run, so that each caller knows which of its calls in flight never ran and
     * may be sent again (to this actor's replacement after a move), all bounded. */
    close(s->lfd);
    s->lfd = -1;
    uint64_t deadline = hv_now_ms() + ACTOR_STOP_FLUSH_MS;
    while (s->nconns > 0) {
        conn_t *c = s->conns[s->nconns - 1];
        if (c->authed && !c->closing) {
            static const char why[] = "the actor is stopping (moved, killed or its node drained)";
            uint8_t body[4 + sizeof(why)];
            hv__actor_put_u32(body, (uint32_t)HV_EUNAVAIL);
            memcpy(body + 4, why, sizeof(why) - 1);
            (void)conn_frame(c, HV__ACTOR_GOAWAY, c->last_id, body, 4 + sizeof(why) - 1);
        }
        if (c->out_off < c->out.len) {
            (void)hv__actor_write_full(c->fd, c->out.p + c->out_off, c->out.len - c->out_off,
                                       deadline);
        }
        srv_drop(s, s->nconns - 1);
    }
    return NULL;
}

/* ---- start / stop --------------------------------------------------------------------------- */

static const char *cfg_str(const char *v, const char *env) {
    if (v != NULL) {
        return v;
    }
    const char *e = getenv(env);
    return e != NULL && *e != '\0' ? e : NULL;
}

static hv_err srv_listen(hv_actor_server_t *s, const char *addr) {
    char host[256];
    int port = 0;
    if (hv_parse_hostport(addr, host, sizeof(host), &port) != HV_OK) {
        HV_LOG(HV_LOG_ERROR, "actor", "HV-ACTOR-LISTEN", "listen address '%s' is not host:port",
               addr);
        return HV_EINVAL;
    }
    char service[16];
    snprintf(service, sizeof(service), "%d", port);
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *res = NULL;
    int g = getaddrinfo(host, service, &hints, &res);
    if (g != 0 || res == NULL) {
        HV_LOG(HV_LOG_ERROR, "actor", "HV-ACTOR-LISTEN", "cannot resolve '%s': %s", addr,
               gai_strerror(g));
        return HV_EINVAL;
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    }
    if (fd < 0 || bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 128) != 0) {
        HV_LOG(HV_LOG_ERROR, "actor", "HV-ACTOR-LISTEN", "cannot listen on %s: %s", addr,
               strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        freeaddrinfo(res);
        return HV_EUNAVAIL;
    }
    freeaddrinfo(res);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
        close(fd);
        return HV_EIO;
    }
    s->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                             : ((struct sockaddr_in *)&ss)->sin_port);
    s->lfd = fd;
    return HV_OK;
}

static hv_err cfg_u32(uint32_t v, const char *env, uint32_t min, uint32_t max, uint32_t def,
                      uint32_t *out) {
    if (v != 0) {
        *out = v;
    } else if (getenv(env) != NULL && *getenv(env) != '\0') {
        uint64_t x;
        if (hv_parse_size(getenv(env), &x) != HV_OK) {
            HV_LOG(HV_LOG_ERROR, "actor", "HV-ACTOR-CONFIG", "%s=%s: expected a size", env,
                   getenv(env));
            return HV_EINVAL;
        }
        *out = x > UINT32_MAX ? UINT32_MAX : (uint32_t)x;
    } else {
        *out = def;
    }
    if (*out < min || *out > max) {
        HV_LOG(HV_LOG_ERROR, "actor", "HV-ACTOR-CONFIG", "%s %u is outside [%u, %u]", env, *out,
               min, max);
        return HV_EINVAL;
    }
    return HV_OK;
}

static void srv_free(hv_actor_server_t *s) {
    if (s->self != NULL && s->cls.destroy != NULL) {
        s->cls.destroy(s->self);
    }
    if (s->lfd >= 0) {
        close(s->lfd);
    }
    for (int i = 0; i < 2; i++) {
        if (s->wake[i] >= 0) {
            close(s->wake[i]);
        }
    }
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    volatile char *v = s->secret;
    for (size_t i = 0; i < sizeof(s->secret); i++) {
        v[i] = 0;
    }
    hv_free(s->conns);
    hv_free(s);
}

hv_err hv_actor_server_start(const hv_actor_server_config_t *cfg, hv_actor_server_t **out) {
    if (cfg == NULL || cfg->size < sizeof(hv_actor_server_config_t) || out == NULL) {
        return HV_EINVAL;
    }
    const char *class_name = cfg_str(cfg->class_name, "HV_ACTOR_CLASS");
    const char *secret = cfg_str(cfg->secret, "HV_ACTOR_SECRET");
    const char *listen_addr = cfg_str(cfg->listen, "HV_ACTOR_LISTEN");
    const char *state_in = cfg_str(cfg->state_in, "HV_ACTOR_STATE_IN");
    const char *state_out = cfg_str(cfg->state_out, "HV_ACTOR_STATE_OUT");
    const char *addr_file = cfg_str(cfg->addr_file, "HV_ACTOR_ADDR_FILE");
    const char *figures_out = cfg_str(NULL, "HV_ACTOR_FIGURES_OUT");
    const void *arg = cfg->arg;
    size_t arg_len = cfg->arg_len;
    if (arg == NULL && getenv("HV_ACTOR_ARG") != NULL) {
        arg = getenv("HV_ACTOR_ARG");
        arg_len = strlen(arg);
    }
    if (class_name == NULL) {
        HV_LOG(HV_LOG_ERROR, "actor", "HV-ACTOR-CONFIG",
               "no actor class: set class_name or HV_ACTOR_CLASS");
        return HV_EINVAL;
    }
    if (secret == NULL || strlen(secret) < HV_ACTOR_SECRET_MIN ||
        strlen(secret) > HV_ACTOR_SECRET_MAX) {
        HV_LOG(HV_LOG_ERROR, "actor", "HV-ACTOR-CONFIG",
               "the actor's secret (secret or HV_ACTOR_SECRET) must be %d to %d bytes",
               HV_ACTOR_SECRET_MIN, HV_ACTOR_SECRET_MAX);
        return HV_EINVAL;
    }
    if ((state_out != NULL && strlen(state_out) >= PATH_MAX) ||
        (figures_out != NULL && strlen(figures_out) >= PATH_MAX)) {
        return HV_EINVAL;
    }
    hv_actor_server_t *s = hv_calloc(1, sizeof(*s));
    if (s == NULL) {
        return HV_ENOMEM;
    }
    s->lfd = -1;
    s->wake[0] = s->wake[1] = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    snprintf(s->secret, sizeof(s->secret), "%s", secret);
    snprintf(s->state_out, sizeof(s->state_out), "%s", state_out ? state_out : "");
    snprintf(s->figures_out, sizeof(s->figures_out), "%s", figures_out ? figures_out : "");
    snprintf(s->class_name, sizeof(s->class_name), "%s", class_name);
    hv_err rc;
    char *state = NULL;
    HV_TRY_GOTO(cfg_u32(cfg->max_frame, "HV_ACTOR_MAX_FRAME", 1024, HV_ACTOR_FRAME_MAX,
                        HV_ACTOR_FRAME_DEFAULT, &s->max_frame),
                rc, fail);
    s->max_conns = cfg->max_conns ? cfg->max_conns : ACTOR_CONNS_DEFAULT;
    s->hs_timeout_ms =
        cfg->handshake_timeout_ms ? cfg->handshake_timeout_ms : ACTOR_HANDSHAKE_DEFAULT_MS;
    if ((rc = actor_find_class(class_name, &s->cls)) != HV_OK) {
        HV_LOG(HV_LOG_ERROR, "actor", "HV-ACTOR-CLASS", "no actor class named '%s' is registered",
               class_name);
        goto fail;
    }
    if (state_in != NULL && s->cls.load == NULL) {
        HV_LOG(HV_LOG_ERROR, "actor", "HV-ACTOR-LOAD",
               "actor class %s has no load callback: it cannot start from the state file %s",
               class_name, state_in);
        rc = HV_ENOTSUP;
        goto fail;
    }
    size_t state_len = 0;
    if (state_in != NULL &&
        (rc = hv_read_file(state_in, ACTOR_STATE_MAX, &state, &state_len)) != HV_OK) {
        HV_LOG(HV_LOG_ERROR, "actor", "HV-ACTOR-LOAD", "cannot read the state file %s: %s",
               state_in, hv_strerror(rc));
        goto fail;
    }
    if ((rc = s->cls.create(s->cls.ud, arg, arg != NULL ? arg_len : 0, &s->self)) != HV_OK) {
        HV_LOG(HV_LOG_ERROR, "actor", "HV-ACTOR-CREATE", "the constructor of %s failed: %s",
               class_name, hv_strerror(rc));
        s->self = NULL;
        goto fail;
    }
    if (state != NULL && (rc = s->cls.load(s->self, state, state_len)) != HV_OK) {
        HV_LOG(HV_LOG_ERROR, "actor", "HV-ACTOR-LOAD", "%s: loading the state file %s failed: %s",
               class_name, state_in, hv_strerror(rc));
        goto fail;
    }
    HV_TRY_GOTO(srv_listen(s, listen_addr ? listen_addr : "127.0.0.1:0"), rc, fail);
    if (pipe2(s->wake, O_NONBLOCK | O_CLOEXEC) != 0) {
        rc = hv_err_from_errno(errno);
        goto fail;
    }
    if (addr_file != NULL) {
        char host[256] = "127.0.0.1", line[300];
        int port = 0;
        if (listen_addr != NULL) {
            (void)hv_parse_hostport(listen_addr, host, sizeof(host), &port);
        }
        if (strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0) {
            snprintf(host, sizeof(host), "127.0.0.1");
        }
        int n = snprintf(line, sizeof(line), "%s:%d\n", host, s->port);
        if ((rc = hv_write_file_atomic(addr_file, line, (size_t)n, 0644)) != HV_OK) {
            HV_LOG(HV_LOG_ERROR, "actor", "HV-ACTOR-ADDR", "cannot write %s: %s", addr_file,
                   hv_strerror(rc));
            goto fail;
        }
    }
    if (pthread_create(&s->thr, NULL, srv_loop, s) != 0) {
        rc = HV_ENOMEM;
        goto fail;
    }
    hv_free(state);
    HV_LOG(HV_LOG_INFO, "actor", "HV-ACTOR-START", "actor %s serves on port %d", class_name,
           s->port);
    *out = s;
    return HV_OK;
fail:
    hv_free(state);
    srv_free(s);
    return rc;
}

int hv_actor_server_port(const hv_actor_server_t *s) { return s != NULL ? s->port : -1; }

hv_err hv_actor_server_save(hv_actor_server_t *s, const char *path) {
    if (s == NULL || path == NULL || *path == '\0') {
        return HV_EINVAL;
    }
    if (s->cls.save == NULL) {
        return HV_ENOTSUP;
    }
    pthread_mutex_lock(&s->mu);
    while (s->save_busy && !s->stop) {
        pthread_cond_wait(&s->cv, &s->mu);
    }
    if (s->stop) {
        pthread_mutex_unlock(&s->mu);
        return HV_ECLOSED;
    }
    s->save_busy = 1;
    s->save_path = path;
    s->save_done = 0;
    (void)!write(s->wake[1], "s", 1);
    while (!s->save_done && !s->stop) {
        pthread_cond_wait(&s->cv, &s->mu);
    }
    hv_err rc = s->save_done ? s->save_rc : HV_ECLOSED;
    s->save_path = NULL;
    s->save_busy = 0;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

hv_err hv_actor_server_stop(hv_actor_server_t *s) {
    if (s == NULL) {
        return HV_OK;
    }
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    (void)!write(s->wake[1], "x", 1);
    pthread_join(s->thr, NULL);
    if (s->figures_out[0] != '\0') {
        srv_figures_write(s); // the last word: what the agent reports with the exit
    }
    hv_err rc = HV_OK;
    if (s->state_out[0] != '\0' && s->cls.save != NULL) {
        rc = srv_save_to(s, s->state_out);
    }
    HV_LOG(HV_LOG_INFO, "actor", "HV-ACTOR-STOP", "actor %s stopped after %llu calls",
           s->class_name, (unsigned long long)s->calls);
    srv_free(s);
    return rc;
}

hv_err hv_actor_serve(const hv_actor_server_config_t *cfg) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    hv_actor_server_t *s = NULL;
    HV_TRY(hv_actor_server_start(cfg, &s));
    int sig = 0;
    while (sigwait(&set, &sig) != 0) {
    }
    HV_LOG(HV_LOG_INFO, "actor", "HV-ACTOR-SIGNAL", "signal %d: stopping", sig);
    return hv_actor_server_stop(s);
}
