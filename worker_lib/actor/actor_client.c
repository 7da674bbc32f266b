/*
 * actor_client: the calling side of libhv's actors (include/hv/actor.h): a connection to one
 * actor, calls that return futures, and the outcome of each.
 *
 * Threads: a handle has one receiving thread, started by hv_actor_connect, that reads replies
 * and completes futures; callers send from their own threads under the handle's send lock (a
 * call's bytes are in the socket when hv_actor_call_async returns). The actor answers the calls
 * of one connection in the order sent, so the calls in flight are a FIFO: a reply must answer
 * the oldest pending call (anything else is a protocol error that breaks the connection).
 *
 * Locks: send_mu (one sender at a time; taken first), then mu (the pending FIFO, every future's
 * outcome, refs, the broken/closed flags; the receiving thread takes only mu). When the
 * connection breaks, the receiving thread sets broken and fails every pending call under mu in
 * one step, and a sender checks broken under mu before it queues a call, so no call can be
 * queued after the last failure and wait for ever.
 *
 * Lifetime: the handle and its futures share the state; refs counts the user's handle plus
 * every future not yet destroyed, and the last one frees it.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "log.h"
#include "mem.h"
#include "util.h"

#include "actor_wire.h"
#include "hv/actor.h"

#define CLIENT_SEND_TIMEOUT_DEFAULT_MS 10000
#define CLIENT_READ_CHUNK (64u << 10)

struct hv_future_s {
    hv_actor_t *a; // shared state (one ref)
    uint64_t id;   // call id
    int done;      // outcome known (under a->mu)
    int abandoned; // destroyed while pending: the receiver frees it
    hv_err rc;     // the outcome
    hv_err remote; // the method's code (HV_EREMOTE)
    uint8_t *data; // owned: the result (HV_OK)
    size_t len;    // bytes at data
    char *msg;     // owned: the message of a failure, or NULL
    uint8_t *req;  // owned, re-resolving handles only: method then argument, to
                   // send the call again after a move or a restart
    size_t req_len;
    uint16_t name_len;
    uint32_t sends;           // times put on the wire (0: queued while the handle reconnects)
    struct hv_future_s *next; // pending FIFO
};

struct hv_actor_s {
    int fd;             // owned
    char addr[256];     // for messages
    uint32_t max_frame; // the actor's limit (from HELLO)
    uint32_t max_pending;
    uint32_t send_timeout_ms;
    pthread_t reader;
    pthread_mutex_t send_mu;  // one sender at a time
    pthread_mutex_t mu;       // everything below
    pthread_cond_t cv;        // a future completed
    int refs;                 // the handle + live futures
    int closed;               // hv_actor_close was called
    int broken;               // the connection is lost: new calls are not sent
    hv_future_t *head, *tail; // pending calls, oldest first
    uint32_t npending;
    uint64_t next_id;
    char why[512];       // why the connection broke (an ERROR frame's text, or a reset)
    hv_err last_code;    // the most recent failure on this handle (hv_actor_last_error)
    char last_msg[1280]; // its message
    /* A handle from hv_actor_lookup re-resolves its actor through the head when the connection
     * ends (a move, a restart) and sends the calls that did not run again, in order. */
    int can_resolve;
    hv__actor_resolver_t res; // cred: never logged, wiped at the end
    hv_actor_connect_config_t cfg;
    uint32_t max_call_retries; // resends of a call whose outcome is unknown (0: at most once)
    int goaway;                // the actor said which calls it ran before it stopped
    uint64_t goaway_id;        // the last of them
    int moving;                // reconnecting: new calls wait in the FIFO, unsent (under mu)
    volatile int cancel;       // hv_actor_close: stop reconnecting
    uint32_t reconnects;
};

/* Records the most recent failure (under mu). */
static void set_last(hv_actor_t *a, hv_err code, const char *msg) {
    a->last_code = code;
    snprintf(a->last_msg, sizeof(a->last_msg), "%s", msg);
}

/* Records why the connection broke (under mu: callers read it when a call is refused). */
static void set_why(hv_actor_t *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_why(hv_actor_t *a, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&a->mu);
    vsnprintf(a->why, sizeof(a->why), fmt, ap);
    pthread_mutex_unlock(&a->mu);
    va_end(ap);
}

static void actor_unref(hv_actor_t *a) {
    pthread_mutex_lock(&a->mu);
    int last = --a->refs == 0;
    pthread_mutex_unlock(&a->mu);
    if (last) {
        memset(&a->res, 0, sizeof(a->res));
        pthread_mutex_destroy(&a->send_mu);
        pthread_mutex_destroy(&a->mu);
        pthread_cond_destroy(&a->cv);
        hv_free(a);
    }
}

static void future_free(hv_future_t *f) {
    hv_free(f->req);
    hv_free(f->data);
    hv_free(f->msg);
    hv_free(f);
}

/* Sets f's outcome (under a->mu). Returns 1 when f was abandoned and must be freed now. */
static int future_finish(hv_future_t *f, hv_err rc, hv_err remote, uint8_t *data, size_t len,
                         const char *msg) {
    f->rc = rc;
    f->remote = remote;
    f->data = data;
    f->len = len;
    if (msg != NULL) {
        f->msg = hv_strdup(msg);
    }
    f->done = 1;
    return f->abandoned;
}

static void free_dead(hv_actor_t *a, hv_future_t *dead) {
    while (dead != NULL) {
        hv_future_t *n = dead->next;
        future_free(dead);
        dead = n;
        pthread_mutex_lock(&a->mu);
        a->refs--; // never the last: the handle's ref is held while the receiver runs
        pthread_mutex_unlock(&a->mu);
    }
}

/* Handles one frame from the actor. Returns HV_OK, or an error that breaks the connection (why
 * filled). dead collects abandoned futures. */
static hv_err actor_frame(hv_actor_t *a, const hv__actor_hdr_t *h, const uint8_t *body,
                          hv_future_t **dead) {
    if (h->type == HV__ACTOR_GOAWAY) {
        size_t tl = h->len > 4 ? h->len - 4 : 0;
        tl = tl < sizeof(a->why) - 40 ? tl : sizeof(a->why) - 40;
        pthread_mutex_lock(&a->mu);
        a->goaway = 1;
        a->goaway_id = h->id;
        snprintf(a->why, sizeof(a->why), "%.*s", (int)tl, (const char *)body + 4);
        pthread_mutex_unlock(&a->mu);
        return HV_ECLOSED;
    }
    if (h->type == HV__ACTOR_ERROR) {
        size_t tl = h->len > 4 ? h->len - 4 : 0;
        tl = tl < sizeof(a->why) - 40 ? tl : sizeof(a->why) - 40;
        pthread_mutex_lock(&a->mu);
        snprintf(a->why, sizeof(a->why), "the actor closed the connection: %.*s", (int)tl,
                 (const char *)body + 4);
        pthread_mutex_unlock(&a->mu);
        return HV_ECLOSED;
    }
    if (h->type != HV__ACTOR_REPLY || h->len < 4) {
        set_why(a, "protocol error: unexpected frame type %u from the actor", h->type);
        return HV_EPROTO;
    }
    uint32_t status = hv__actor_get_u32(body);
    size_t len = h->len - 4;
    uint8_t *data = NULL;
    char *msg = NULL;
    if (status == HV_OK && len > 0) {
        data = hv_malloc(len);
        if (data == NULL) {
            set_why(a, "out of memory for a result of %zu bytes", len);
            return HV_ENOMEM;
        }
        memcpy(data, body + 4, len);
    } else if (status != HV_OK) {
        size_t tl = len < HV__ACTOR_ERRMSG_MAX ? len : HV__ACTOR_ERRMSG_MAX;
        msg = hv_malloc(tl + 1);
        if (msg != NULL) {
            memcpy(msg, body + 4, tl);
            msg[tl] = '\0';
        }
    }
    pthread_mutex_lock(&a->mu);
    hv_future_t *f = a->head;
    if (f == NULL || f->id != h->id) {
        pthread_mutex_unlock(&a->mu);
        hv_free(data);
        hv_free(msg);
        set_why(a, "protocol error: a reply to call %llu out of order", (unsigned long long)h->id);
        return HV_EPROTO;
    }
    a->head = f->next;
    if (a->head == NULL) {
        a->tail = NULL;
    }
    a->npending--;
    f->next = NULL;
    f->rc = status == HV_OK ? HV_OK : HV_EREMOTE;
    f->remote = (hv_err)status;
    f->data = data;
    f->len = len;
    f->msg = msg;
    f->done = 1;
    if (f->abandoned) {
        f->next = *dead;
        *dead = f;
    }
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    return HV_OK;
}

/* Reads frames from the current connection until it ends (the actor closed it, GOAWAY, a
 * reset, a protocol error). */
static void actor_read_conn(hv_actor_t *a) {
    uint8_t *buf = NULL;
    size_t cap = 0, len = 0;
    hv_err rc = HV_OK;
    for (;;) {
        /* Room for a whole frame when the one at the front is larger than a chunk. */
        size_t want = CLIENT_READ_CHUNK;
        if (len >= HV__ACTOR_HDR) {
            hv__actor_hdr_t h;
            hv__actor_hdr_get(buf, &h);
            if (h.len > a->max_frame + 4u) {
                set_why(a, "protocol error: a reply of %u bytes", h.len);
                break;
            }
            if (HV__ACTOR_HDR + (size_t)h.len > len + want) {
                want = HV__ACTOR_HDR + (size_t)h.len - len;
            }
        }
        if (cap - len < want) {
            uint8_t *g = hv_realloc(buf, len + want);
            if (g == NULL) {
                set_why(a, "out of memory");
                break;
            }
            buf = g;
            cap = len + want;
        }
        ssize_t n = recv(a->fd, buf + len, cap - len, 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        len += (size_t)n;
        size_t pos = 0;
        hv_future_t *dead = NULL;
        while (rc == HV_OK && len - pos >= HV__ACTOR_HDR) {
            hv__actor_hdr_t h;
            hv__actor_hdr_get(buf + pos, &h);
            if (len - pos < HV__ACTOR_HDR + (size_t)h.len) {
                break;
            }
            rc = actor_frame(a, &h, buf + pos + HV__ACTOR_HDR, &dead);
            pos += HV__ACTOR_HDR + (size_t)h.len;
        }
        free_dead(a, dead);
        if (rc != HV_OK) {
            break;
        }
        memmove(buf, buf + pos, len - pos);
        len -= pos;
    }
    hv_free(buf);
}

static hv_err actor_send(hv_actor_t *a, struct iovec *iov, int n);

/* Puts f (queued or to be sent again) on the wire (under send_mu). A failed send breaks the
 * connection; the reader then decides again. */
static void actor_resend(hv_actor_t *a, hv_future_t *f) {
    uint8_t hdr[HV__ACTOR_HDR];
    hv__actor_hdr_t h = {
        .len = (uint32_t)f->req_len, .type = HV__ACTOR_CALL, .name_len = f->name_len, .id = f->id};
    hv__actor_hdr_put(hdr, &h);
    struct iovec iov[2] = {{hdr, sizeof(hdr)}, {f->req, f->req_len}};
    if (actor_send(a, iov, 2) != HV_OK) {
        set_why(a, "sending to the actor failed or made no progress for %u ms", a->send_timeout_ms);
        shutdown(a->fd, SHUT_RDWR);
    }
}

/* The connection ended. Decides each pending call's fate (hv__actor_fate_of); a handle that can
 * re-resolve finds its actor again through the head (bounded) and sends the calls that did not
 * run (and, with retries, those in doubt) again, in order, then the calls queued meanwhile.
 * Returns 1 when reading goes on on a new connection, 0 when the handle is broken. */
static int actor_conn_ended(hv_actor_t *a) {
    pthread_mutex_lock(&a->mu);
    int resolve = a->can_resolve && !a->closed;
    char doubt[1024], undelivered[1024];
    hv_err doubt_rc = a->closed ? HV_ECANCELED : HV_EINDOUBT;
    if (a->closed) {
        snprintf(doubt, sizeof(doubt),
                 "the connection to the actor at %s was closed by the caller with the call in "
                 "flight; it may or may not have run",
                 a->addr);
    } else {
        snprintf(doubt, sizeof(doubt),
                 "%s%sthe actor at %s went away with the call in flight (its process died, or "
                 "the connection broke); the call may or may not have run",
                 a->why, a->why[0] ? "; " : "", a->addr);
    }
    snprintf(undelivered, sizeof(undelivered),
             "not delivered: %s%sthe actor at %s stopped before running the call; sending it "
             "again is safe",
             a->why, a->why[0] ? "; " : "", a->addr);
    if (a->why[0] == '\0') {
        snprintf(a->why, sizeof(a->why), "the connection to the actor at %.255s was lost", a->addr);
    }
    hv_future_t *keep = NULL, **kt = &keep, *last = NULL, *dead = NULL;
    uint32_t kept = 0;
    while (a->head != NULL) {
        hv_future_t *f = a->head;
        a->head = f->next;
        f->next = NULL;
        hv__actor_fate fate = hv__actor_fate_of(resolve, a->goaway, a->goaway_id, f->id, f->sends,
                                                a->max_call_retries);
        if (fate == HV__FATE_RESEND) {
            *kt = f;
            kt = &f->next;
            last = f;
            kept++;
            continue;
        }
        int drop = fate == HV__FATE_NOT_DELIVERED
                       ? future_finish(f, HV_EUNAVAIL, HV_OK, NULL, 0, undelivered)
                       : future_finish(f, doubt_rc, HV_OK, NULL, 0, doubt);
        if (drop) {
            f->next = dead;
            dead = f;
        }
    }
    a->head = keep;
    a->tail = last;
    a->npending = kept;
    if (!a->closed) {
        set_last(a, HV_EUNAVAIL, a->why);
    }
    if (!resolve) {
        a->broken = 1;
        pthread_cond_broadcast(&a->cv);
        pthread_mutex_unlock(&a->mu);
        free_dead(a, dead);
        return 0;
    }
    a->moving = 1; /* new calls wait in the FIFO */
    char why[512];
    snprintf(why, sizeof(why), "%s", a->why);
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    free_dead(a, dead);

    int fd = -1;
    uint32_t max_frame = 0, retries = 0;
    char addr[256] = "", err[512] = "";
    hv_err rc = a->res.resolve_open(&a->res, a->cfg.resolve_timeout_ms, &a->cfg, &a->cancel, &fd,
                                    &max_frame, addr, sizeof(addr), &retries, err, sizeof(err));
    pthread_mutex_lock(&a->send_mu);
    pthread_mutex_lock(&a->mu);
    if (rc == HV_OK && !a->closed) {
        close(a->fd);
        a->fd = fd;
        a->max_frame = max_frame;
        snprintf(a->addr, sizeof(a->addr), "%s", addr);
        a->goaway = 0;
        a->why[0] = '\0';
        a->moving = 0;
        a->reconnects++;
        if (a->cfg.max_call_retries == 0) {
            a->max_call_retries = retries; /* the actor's own setting, from the head */
        }
        /* Nobody else takes calls off the FIFO (only this thread does) and senders wait on
         * send_mu: walk it without mu, in order. */
        hv_future_t *f = a->head;
        for (hv_future_t *g = f; g != NULL; g = g->next) {
            g->sends++;
        }
        pthread_mutex_unlock(&a->mu);
        for (; f != NULL; f = f->next) {
            actor_resend(a, f);
        }
        pthread_mutex_unlock(&a->send_mu);
        return 1;
    }
    if (fd >= 0) {
        close(fd);
    }
    /* The actor could not be found again: every call kept fails. Those that never ran are not
     * delivered; those kept for a retry stay in doubt. */
    snprintf(a->why, sizeof(a->why),
             "%.200s; finding the actor again through the head failed: %.250s", why,
             a->closed ? "the handle was closed" : err);
    snprintf(undelivered, sizeof(undelivered), "not delivered: %s; sending it again is safe",
             a->why);
    snprintf(doubt, sizeof(doubt), "%s; the call may or may not have run", a->why);
    dead = NULL;
    while (a->head != NULL) {
        hv_future_t *f = a->head;
        a->head = f->next;
        f->next = NULL;
        int in_doubt = f->sends > 0 && !(a->goaway && f->id > a->goaway_id);
        if (future_finish(f, in_doubt ? doubt_rc : HV_EUNAVAIL, HV_OK, NULL, 0,
                          in_doubt ? doubt : undelivered)) {
            f->next = dead;
            dead = f;
        }
    }
    a->tail = NULL;
    a->npending = 0;
    a->broken = 1;
    a->moving = 0;
    if (!a->closed) {
        set_last(a, HV_EUNAVAIL, a->why);
    }
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    pthread_mutex_unlock(&a->send_mu);
    free_dead(a, dead);
    return 0;
}

static void *actor_reader(void *arg) {
    hv_actor_t *a = arg;
    do {
        actor_read_conn(a);
    } while (actor_conn_ended(a));
    return NULL;
}

hv_err hv__actor_open(const char *addr, const char *secret, const hv_actor_connect_config_t *cfg,
                      int *fd_out, uint32_t *max_frame, char *err, size_t errlen) {
    if (addr == NULL || strlen(addr) >= 256) {
        hv_errf(err, errlen, "no actor address");
        return HV_EINVAL;
    }
    if (secret == NULL || strlen(secret) < HV_ACTOR_SECRET_MIN ||
        strlen(secret) > HV_ACTOR_SECRET_MAX) {
        hv_errf(err, errlen, "an actor's secret is %d to %d bytes", HV_ACTOR_SECRET_MIN,
                HV_ACTOR_SECRET_MAX);
        return HV_EINVAL;
    }
    uint32_t connect_ms =
        cfg && cfg->connect_timeout_ms ? cfg->connect_timeout_ms : HV_ACTOR_CONNECT_TIMEOUT_DEFAULT;
    uint64_t deadline = hv_now_ms() + connect_ms;
    int fd = -1;
    HV_TRY(hv__actor_dial(addr, deadline, &fd, err, errlen));
    hv_err rc = hv__actor_client_handshake(fd, secret, deadline, max_frame, err, errlen);
    if (rc != HV_OK) {
        close(fd);
        return rc;
    }
    *fd_out = fd;
    return HV_OK;
}

/* cfg with every field the caller's struct has (an older, shorter one leaves the rest 0). */
static void cfg_copy(const hv_actor_connect_config_t *cfg, hv_actor_connect_config_t *out) {
    memset(out, 0, sizeof(*out));
    if (cfg != NULL) {
        /* An older caller's struct ends before resolve_timeout_ms (its padding is not ours). */
        memcpy(out, cfg, cfg->size >= sizeof(*out) ? sizeof(*out) : HV__ACTOR_CFG_V1_SIZE);
    }
    out->size = sizeof(*out);
    if (out->resolve_timeout_ms == 0) {
        out->resolve_timeout_ms = HV_ACTOR_RESOLVE_TIMEOUT_DEFAULT;
    }
}

hv_err hv__actor_wrap(int fd, const char *addr, uint32_t max_frame,
                      const hv_actor_connect_config_t *cfg, const hv__actor_resolver_t *res,
                      uint32_t max_call_retries, hv_actor_t **out, char *err, size_t errlen) {
    hv_actor_t *a = hv_calloc(1, sizeof(*a));
    if (a == NULL) {
        close(fd);
        hv_errf(err, errlen, "out of memory");
        return HV_ENOMEM;
    }
    a->fd = fd;
    snprintf(a->addr, sizeof(a->addr), "%s", addr);
    a->max_frame = max_frame;
    cfg_copy(cfg, &a->cfg);
    a->max_pending = a->cfg.max_pending ? a->cfg.max_pending : HV_ACTOR_PENDING_DEFAULT;
    a->send_timeout_ms =
        a->cfg.send_timeout_ms ? a->cfg.send_timeout_ms : CLIENT_SEND_TIMEOUT_DEFAULT_MS;
    if (res != NULL && res->resolve_open != NULL) {
        a->can_resolve = 1;
        a->res = *res;
        a->max_call_retries =
            a->cfg.max_call_retries != 0 ? a->cfg.max_call_retries : max_call_retries;
    }
    a->refs = 1;
    a->next_id = 1;
    pthread_mutex_init(&a->send_mu, NULL);
    pthread_mutex_init(&a->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&a->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&a->reader, NULL, actor_reader, a) != 0) {
        close(fd);
        actor_unref(a);
        hv_errf(err, errlen, "cannot start a thread");
        return HV_ENOMEM;
    }
    *out = a;
    return HV_OK;
}

hv_err hv_actor_connect(const char *addr, const char *secret, const hv_actor_connect_config_t *cfg,
                        hv_actor_t **out, char *err, size_t errlen) {
    if (out == NULL) {
        hv_errf(err, errlen, "no place for the handle");
        return HV_EINVAL;
    }
    if (cfg != NULL && cfg->size < HV__ACTOR_CFG_V1_SIZE) {
        hv_errf(err, errlen, "hv_actor_connect_config_t.size is not set");
        return HV_EINVAL;
    }
    int fd = -1;
    uint32_t max_frame = 0;
    HV_TRY(hv__actor_open(addr, secret, cfg, &fd, &max_frame, err, errlen));
    return hv__actor_wrap(fd, addr, max_frame, cfg, NULL, 0, out, err, errlen);
}

uint32_t hv_future_sends(const hv_future_t *f) {
    if (f == NULL) {
        return 0;
    }
    pthread_mutex_lock(&f->a->mu);
    uint32_t n = f->sends;
    pthread_mutex_unlock(&f->a->mu);
    return n;
}

/* Writes the whole iovec (header, method, argument) within the send timeout. */
static hv_err actor_send(hv_actor_t *a, struct iovec *iov, int n) {
    uint64_t deadline = 0;
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    for (;;) {
        ssize_t w = sendmsg(a->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                return HV_EPEER;
            }
            /* The socket's buffer is full (the actor is not reading): wait, bounded. */
            if (deadline == 0) {
                deadline = hv_now_ms() + a->send_timeout_ms;
            }
            int left = hv__actor_ms_left(deadline);
            if (left == 0) {
                return HV_ETIMEDOUT;
            }
            struct pollfd p = {.fd = a->fd, .events = POLLOUT};
            (void)poll(&p, 1, left);
            continue;
        }
        size_t done = (size_t)w;
        while (m.msg_iovlen > 0 && done >= m.msg_iov->iov_len) {
            done -= m.msg_iov->iov_len;
            m.msg_iov++;
            m.msg_iovlen--;
        }
        if (m.msg_iovlen == 0) {
            return HV_OK;
        }
        m.msg_iov->iov_base = (uint8_t *)m.msg_iov->iov_base + done;
        m.msg_iov->iov_len -= done;
    }
}

hv_err hv_actor_call_async(hv_actor_t *a, const char *method, const void *arg, size_t len,
                           hv_future_t **out) {
    size_t name_len = method != NULL ? strlen(method) : 0;
    if (a == NULL || out == NULL || name_len == 0 || name_len > HV_ACTOR_METHOD_MAX ||
        (arg == NULL && len > 0)) {
        return HV_EINVAL;
    }
    if (name_len + len > a->max_frame) {
        char msg[160];
        snprintf(msg, sizeof(msg),
                 "not sent: %zu bytes of method name and argument are over the "
                 "actor's frame limit of %u bytes",
                 name_len + len, a->max_frame);
        pthread_mutex_lock(&a->mu);
        set_last(a, HV_ETOOBIG, msg);
        pthread_mutex_unlock(&a->mu);
        return HV_ETOOBIG;
    }
    hv_future_t *f = hv_calloc(1, sizeof(*f));
    if (f != NULL && a->can_resolve) {
        /* Kept to send the call again after a move or a restart. */
        f->req_len = name_len + len;
        f->name_len = (uint16_t)name_len;
        if ((f->req = hv_malloc(f->req_len)) == NULL) {
            hv_free(f);
            f = NULL;
        } else {
            memcpy(f->req, method, name_len);
            if (len > 0) {
                memcpy(f->req + name_len, arg, len);
            }
        }
    }
    if (f == NULL) {
        pthread_mutex_lock(&a->mu);
        set_last(a, HV_ENOMEM, "not sent: out of memory");
        pthread_mutex_unlock(&a->mu);
        return HV_ENOMEM;
    }
    pthread_mutex_lock(&a->send_mu);
    pthread_mutex_lock(&a->mu);
    hv_err rc = a->closed                       ? HV_ECLOSED
                : a->broken                     ? HV_EUNAVAIL
                : a->npending >= a->max_pending ? HV_ETOOBIG
                                                : HV_OK;
    if (rc != HV_OK) {
        char msg[600];
        if (rc == HV_EUNAVAIL) {
            snprintf(msg, sizeof(msg), "not sent: %s", a->why);
        } else if (rc == HV_ETOOBIG) {
            snprintf(msg, sizeof(msg),
                     "not sent: %u calls are in flight on this handle (its limit)", a->max_pending);
        } else {
            snprintf(msg, sizeof(msg), "not sent: the handle is closed");
        }
        set_last(a, rc, msg);
        pthread_mutex_unlock(&a->mu);
        pthread_mutex_unlock(&a->send_mu);
        future_free(f);
        return rc;
    }
    f->a = a;
    f->id = a->next_id++;
    if (a->tail != NULL) {
        a->tail->next = f;
    } else {
        a->head = f;
    }
    a->tail = f;
    a->npending++;
    a->refs++;
    int queue_only = a->moving; /* the reader sends it once the handle reconnected */
    f->sends = queue_only ? 0 : 1;
    pthread_mutex_unlock(&a->mu);
    if (queue_only) {
        pthread_mutex_unlock(&a->send_mu);
        *out = f;
        return HV_OK;
    }
    uint8_t hdr[HV__ACTOR_HDR];
    hv__actor_hdr_t h = {.len = (uint32_t)(name_len + len),
                         .type = HV__ACTOR_CALL,
                         .name_len = (uint16_t)name_len,
                         .id = f->id};
    hv__actor_hdr_put(hdr, &h);
    struct iovec iov[3] = {{hdr, sizeof(hdr)}, {(void *)method, name_len}, {(void *)arg, len}};
    if (actor_send(a, iov, len > 0 ? 3 : 2) != HV_OK) {
        /* Part of the call may be in the socket: the stream is unusable. The receiving thread
         * sees the end of the connection and fails every pending call, this one included, as
         * in doubt. */
        set_why(a, "sending to the actor failed or made no progress for %u ms", a->send_timeout_ms);
        shutdown(a->fd, SHUT_RDWR);
    }
    pthread_mutex_unlock(&a->send_mu);
    *out = f;
    return HV_OK;
}

hv_err hv_future_wait(hv_future_t *f, uint32_t timeout_ms, const void **data_out, size_t *len_out) {
    if (f == NULL) {
        return HV_EINVAL;
    }
    hv_actor_t *a = f->a;
    pthread_mutex_lock(&a->mu);
    if (!f->done && timeout_ms > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += timeout_ms / 1000;
        ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        while (!f->done) {
            if (pthread_cond_timedwait(&a->cv, &a->mu, &ts) == ETIMEDOUT) {
                break;
            }
        }
    }
    hv_err rc = f->done ? f->rc : HV_ETIMEDOUT;
    pthread_mutex_unlock(&a->mu);
    if (rc == HV_OK) {
        if (data_out != NULL) {
            *data_out = f->data;
        }
        if (len_out != NULL) {
            *len_out = f->len;
        }
    }
    return rc;
}

const char *hv_future_error(const hv_future_t *f, hv_err *remote_code_out) {
    if (f == NULL) {
        return "";
    }
    pthread_mutex_lock(&f->a->mu);
    int done = f->done;
    hv_err remote = f->rc == HV_EREMOTE ? f->remote : HV_OK;
    const char *msg = f->msg;
    hv_err rc = f->rc;
    pthread_mutex_unlock(&f->a->mu);
    if (remote_code_out != NULL) {
        *remote_code_out = done ? remote : HV_OK;
    }
    if (!done || rc == HV_OK) {
        return "";
    }
    if (msg != NULL) {
        return msg;
    }
    return hv_strerror(rc == HV_EREMOTE ? remote : rc);
}

void hv_future_destroy(hv_future_t *f) {
    if (f == NULL) {
        return;
    }
    hv_actor_t *a = f->a;
    pthread_mutex_lock(&a->mu);
    int pending = !f->done;
    if (pending) {
        f->abandoned = 1; // the receiving thread frees it and drops its ref
    }
    pthread_mutex_unlock(&a->mu);
    if (!pending) {
        future_free(f);
        actor_unref(a);
    }
}

hv_err hv_actor_call(hv_actor_t *a, const char *method, const void *arg, size_t len,
                     uint32_t timeout_ms, void **data_out, size_t *len_out, char *err,
                     size_t errlen) {
    hv_future_t *f = NULL;
    hv_err rc = hv_actor_call_async(a, method, arg, len, &f);
    if (rc != HV_OK) {
        if (a != NULL && rc != HV_EINVAL) {
            hv_actor_last_error(a, err, errlen); // call_async recorded why
        } else {
            hv_errf(err, errlen, "not sent: %s", hv_strerror(rc));
        }
        return rc;
    }
    rc = hv_future_wait(f, timeout_ms, NULL, NULL);
    if (rc == HV_OK) {
        if (data_out != NULL) {
            *data_out = f->data; // handed over to the caller
            f->data = NULL;
        }
        if (len_out != NULL) {
            *len_out = f->len;
        }
    } else {
        char msg[1200];
        hv_err code = rc;
        if (rc == HV_ETIMEDOUT) {
            snprintf(msg, sizeof(msg),
                     "no answer from the actor at %s within %u ms; the call may still run", a->addr,
                     timeout_ms);
        } else if (rc == HV_EREMOTE) {
            const char *m = hv_future_error(f, &code);
            snprintf(msg, sizeof(msg), "%s: %s (%s)", method, m, hv_errname(code));
        } else {
            snprintf(msg, sizeof(msg), "%s", hv_future_error(f, NULL));
        }
        hv_errf(err, errlen, "%s", msg);
        pthread_mutex_lock(&a->mu);
        set_last(a, code, msg);
        pthread_mutex_unlock(&a->mu);
    }
    hv_future_destroy(f);
    return rc;
}

void hv_actor_free(void *p) { hv_free(p); }

hv_err hv_actor_last_error(hv_actor_t *a, char *buf, size_t len) {
    if (a == NULL) {
        hv_errf(buf, len, "no actor handle");
        return HV_EINVAL;
    }
    pthread_mutex_lock(&a->mu);
    hv_err rc = a->last_code;
    hv_errf(buf, len, "%s", a->last_msg);
    pthread_mutex_unlock(&a->mu);
    return rc;
}

void hv_actor_close(hv_actor_t *a) {
    if (a == NULL) {
        return;
    }
    pthread_mutex_lock(&a->mu);
    a->closed = 1;
    a->cancel = 1;
    pthread_mutex_unlock(&a->mu);
    shutdown(a->fd, SHUT_RDWR);
    pthread_join(a->reader, NULL);
    close(a->fd);
    actor_unref(a);
}
