/*
 * liveness: see liveness.h. The thread's loop: for every watched socket, take in what happened
 * (HEAR: read the heartbeats waiting; ACK: read TCP_INFO's unacknowledged segments, write a
 * heartbeat when one is due), ask the rule whether a silence is due, then sleep in poll() on the
 * HEAR sockets and the stop eventfd until a heartbeat arrives or the next thing is due. Every
 * socket call is non-blocking.
 */
#include "liveness.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "mem.h"
#include "util.h"

#define LIVE_BEAT_MIN_MS 10u

/* ---- the rule ------------------------------------------------------------------------------- */

void hv__live_track_heard(hv__live_track_t *t, uint64_t now) {
    t->heard_ms = now;
    t->reported = 0; // heard again: a later silence is news
}

void hv__live_track_acked(hv__live_track_t *t, unsigned unacked) {
    if (unacked == 0) {
        t->pending_ms = 0;
        t->reported = 0; // acknowledged again: a later silence is news
    }
}

int hv__live_track_beat_due(const hv__live_track_t *t, uint64_t now, uint32_t beat_ms) {
    return t->beat_ms == 0 || now >= t->beat_ms + beat_ms;
}

void hv__live_track_wrote(hv__live_track_t *t, uint64_t now) {
    t->beat_ms = now;
    if (t->pending_ms == 0) {
        t->pending_ms = now;
    }
}

static uint64_t silent_since(const hv__live_track_t *t) {
    return t->how == HV__LIVE_HEAR ? t->heard_ms : t->pending_ms;
}

uint32_t hv__live_track_due(hv__live_track_t *t, uint64_t now, uint32_t silent_ms) {
    uint64_t since = silent_since(t);
    if (t->closed || t->reported || since == 0 || now < since + silent_ms) {
        return 0;
    }
    t->reported = 1;
    uint64_t d = now - since;
    return d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
}

uint32_t hv__live_track_wait(const hv__live_track_t *t, uint64_t now, uint32_t silent_ms,
                             uint32_t beat_ms) {
    uint64_t wait = beat_ms;
    if (t->closed) {
        return (uint32_t)wait;
    }
    if (t->how == HV__LIVE_ACK) {
        uint64_t next = t->beat_ms + beat_ms;
        wait = t->beat_ms == 0 || next <= now ? 0 : next - now;
    }
    uint64_t since = silent_since(t);
    if (since != 0 && !t->reported) {
        uint64_t at = since + silent_ms;
        uint64_t left = at <= now ? 0 : at - now;
        wait = left < wait ? left : wait;
    }
    return (uint32_t)(wait < beat_ms ? wait : beat_ms);
}

/* ---- the monitor ---------------------------------------------------------------------------- */

struct hv__live_s {
    hv__live_watch_t *w; // n, owned copy
    hv__live_track_t *t; // n, owned; the thread's only
    struct pollfd *p;    // n + 1, owned; the thread's only
    size_t n;
    uint32_t silent_ms, beat_ms;
    hv__live_cb cb;
    void *ud;
    int stop_fd; // eventfd, owned
    pthread_t thread;
};

/* HEAR: reads every heartbeat waiting (they carry nothing but their arrival). */
static void live_read(hv__live_t *l, size_t i, uint64_t now) {
    char buf[256];
    for (;;) {
        ssize_t r = recv(l->w[i].fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (r > 0) {
            hv__live_track_heard(&l->t[i], now);
            continue;
        }
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
            l->t[i].closed = 1; // ended (or shut down by an abort): the ring reports that
        }
        return;
    }
}

/* ACK: takes in what the kernel says is unacknowledged, then writes a heartbeat when due. */
static void live_beat(hv__live_t *l, size_t i, uint64_t now) {
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    memset(&ti, 0, sizeof(ti));
    if (getsockopt(l->w[i].fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
        ti.tcpi_state != TCP_ESTABLISHED) {
        l->t[i].closed = 1;
        return;
    }
    hv__live_track_acked(&l->t[i], ti.tcpi_unacked);
    if (!hv__live_track_beat_due(&l->t[i], now, l->beat_ms)) {
        return;
    }
    char b = 1;
    ssize_t r = send(l->w[i].fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (r == 1) {
        hv__live_track_wrote(&l->t[i], now);
    } else if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
               errno != ENOBUFS) {
        l->t[i].closed = 1;
    }
    // EAGAIN: the peer reads nothing (its window is full): nothing is in flight, nothing is due
}

static void *live_main(void *arg) {
    hv__live_t *l = arg;
    for (;;) {
        uint64_t now = hv_now_ms();
        uint32_t wait = l->beat_ms;
        nfds_t np = 0;
        l->p[np++] = (struct pollfd){.fd = l->stop_fd, .events = POLLIN};
        for (size_t i = 0; i < l->n; i++) {
            hv__live_track_t *t = &l->t[i];
            if (!t->closed) {
                if (l->w[i].how == HV__LIVE_HEAR) {
                    live_read(l, i, now);
                } else {
                    live_beat(l, i, now);
                }
            }
            uint32_t silent = hv__live_track_due(t, now, l->silent_ms);
            if (silent > 0) {
                l->cb(l->ud, l->w[i].tag, l->w[i].how, silent);
            }
            uint32_t w = hv__live_track_wait(t, now, l->silent_ms, l->beat_ms);
            wait = w < wait ? w : wait;
            if (!t->closed && l->w[i].how == HV__LIVE_HEAR) {
                l->p[np++] = (struct pollfd){.fd = l->w[i].fd, .events = POLLIN};
            }
        }
        int r = poll(l->p, np, (int)(wait > 0 ? wait : 1));
        if (r > 0 && (l->p[0].revents & POLLIN)) {
            return NULL;
        }
    }
}

hv_err hv__live_start(const hv__live_opts_t *o, const hv__live_watch_t *w, size_t n, hv__live_cb cb,
                      void *ud, hv__live_t **out) {
    if (n == 0 || o == NULL || o->silent_ms == 0 || cb == NULL) {
        return HV_EINVAL;
    }
    hv__live_t *l = hv_calloc(1, sizeof(*l));
    if (l == NULL) {
        return HV_ENOMEM;
    }
    l->w = hv_calloc(n, sizeof(*l->w));
    l->t = hv_calloc(n, sizeof(*l->t));
    l->p = hv_calloc(n + 1, sizeof(*l->p));
    l->stop_fd = -1;
    if (l->w == NULL || l->t == NULL || l->p == NULL) {
        hv__live_stop(l);
        return HV_ENOMEM;
    }
    memcpy(l->w, w, n * sizeof(*w));
    for (size_t i = 0; i < n; i++) {
        l->t[i].how = w[i].how;
    }
    l->n = n;
    l->silent_ms = o->silent_ms;
    l->beat_ms = o->beat_ms ? o->beat_ms : o->silent_ms / 5;
    if (l->beat_ms < LIVE_BEAT_MIN_MS) {
        l->beat_ms = LIVE_BEAT_MIN_MS;
    }
    l->cb = cb;
    l->ud = ud;
    l->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (l->stop_fd < 0 || pthread_create(&l->thread, NULL, live_main, l) != 0) {
        HV_LOG(HV_LOG_WARN, "live", "HV-LIVE-START",
               "cannot start the data plane's liveness monitor: %s", strerror(errno));
        l->n = 0; // no thread to join
        hv__live_stop(l);
        return HV_EIO;
    }
    *out = l;
    return HV_OK;
}

void hv__live_stop(hv__live_t *l) {
    if (l == NULL) {
        return;
    }
    if (l->n > 0) {
        uint64_t one = 1;
        ssize_t r = write(l->stop_fd, &one, sizeof(one));
        (void)r;
        pthread_join(l->thread, NULL);
    }
    if (l->stop_fd >= 0) {
        close(l->stop_fd);
    }
    hv_free(l->w);
    hv_free(l->t);
    hv_free(l->p);
    hv_free(l);
}
