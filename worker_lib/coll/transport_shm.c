/*
 * transport_shm: see transport_shm.h. Ring layout: a header of cache-line-separated counters
 * (head: bytes ever written, by the producer; tail: bytes ever consumed, by the consumer; the
 * two "sleeping" flags) followed by the data area. Counters only grow, so head - tail is the
 * fill level and no wrap flag is needed. Sleeping uses a Dekker-style handshake: a thread that
 * is about to block sets its flag, then re-checks the ring; the other side, after moving the
 * counter, swaps the flag back to 0 and rings a doorbell (one byte over the TCP connection) if
 * it was set. Both use sequentially consistent atomics, so no wake-up is lost.
 */
#include "transport_shm.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "mem.h"
#include "transport_tcp.h"
#include "util.h"

#define SHM_MAGIC 0x48565348u // "HVSH"
#define SHM_OFFER_MAGIC 0x4f465652u
#define SHM_NAME_MAX 64
#define SHM_LINE 64

typedef struct shm_hdr_s {
    _Alignas(SHM_LINE) _Atomic uint64_t head;       // producer: bytes written
    _Alignas(SHM_LINE) _Atomic uint64_t tail;       // consumer: bytes consumed
    _Alignas(SHM_LINE) _Atomic uint32_t cons_sleep; // consumer threads (about to be) blocked
    _Alignas(SHM_LINE) _Atomic uint32_t prod_sleep; // producer is (about to be) blocked
    _Alignas(SHM_LINE) uint32_t magic;
    uint64_t size; // data bytes, a power of two
} shm_hdr_t;

typedef struct shm_ring_s {
    shm_hdr_t *h; // mapped, NULL when this direction is TCP
    unsigned char *data;
    uint64_t mask;
    size_t map_len;
} shm_ring_t;

typedef struct shm_link_s {
    hv__link_t base; // ops = &hv__shm_ops
    hv__link_t *tcp; // owned: the sockets (data for TCP directions, doorbells otherwise)
    int send_fd, recv_fd;
    shm_ring_t tx; // to the right neighbour (we produce)
    shm_ring_t rx; // from the left neighbour (we consume)
    atomic_int aborted;
    atomic_int tx_gone; // the right neighbour's doorbell socket closed (it is gone or done), or
                        // its death-watch mark said it died (peer_gone)
    atomic_int rx_gone; // the same of the left neighbour
} shm_link_t;

/* ---- segments -------------------------------------------------------------------------------- */

static hv_err ring_map(int fd, size_t bytes, int create, shm_ring_t *r) {
    size_t len = sizeof(shm_hdr_t) + bytes;
    if (create && ftruncate(fd, (off_t)len) != 0) {
        return HV_ENOMEM;
    }
    if (!create) {
        struct stat st;
        if (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(shm_hdr_t)) {
            return HV_EPROTO;
        }
        len = (size_t)st.st_size;
    }
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        return HV_ENOMEM;
    }
    r->h = p;
    r->map_len = len;
    if (create) {
        memset(p, 0, sizeof(shm_hdr_t));
        r->h->size = bytes;
        r->h->magic = SHM_MAGIC;
    } else if (r->h->magic != SHM_MAGIC || r->h->size + sizeof(shm_hdr_t) != len ||
               (r->h->size & (r->h->size - 1)) != 0) {
        munmap(p, len);
        r->h = NULL;
        return HV_EPROTO;
    }
    r->data = (unsigned char *)p + sizeof(shm_hdr_t);
    r->mask = r->h->size - 1;
    return HV_OK;
}

static void ring_unmap(shm_ring_t *r) {
    if (r->h != NULL) {
        munmap(r->h, r->map_len);
        r->h = NULL;
    }
}

hv_err hv__shm_link_upgrade(hv__link_t *tcp, int send_local, int recv_local, size_t ring_bytes,
                            int timeout_ms, hv__link_t **out) {
    size_t bytes = 4096;
    while (bytes < ring_bytes && bytes < ((size_t)1 << 30)) {
        bytes <<= 1;
    }
    shm_link_t *l = hv_calloc(1, sizeof(*l));
    if (l == NULL) {
        return HV_ENOMEM;
    }
    l->base.ops = &hv__shm_ops;
    l->tcp = tcp;
    l->send_fd = hv__tcp_link_send_fd(tcp);
    l->recv_fd = hv__tcp_link_recv_fd(tcp);
    uint64_t deadline = hv_now_ms() + (uint64_t)timeout_ms;
    hv_err rc = HV_OK;
    char name[SHM_NAME_MAX] = "";
    int rx_fd = -1;
    // 1. Receiver side: create our inbound ring and offer it to the left neighbour, over the
    //    reverse direction of its connection (never blocks: a few bytes).
    if (recv_local) {
        static atomic_uint seq;
        snprintf(name, sizeof(name), "/hv-%d-%u-%lx", (int)getpid(), atomic_fetch_add(&seq, 1),
                 (unsigned long)hv_now_ms());
        rx_fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
        uint32_t offer[2] = {SHM_OFFER_MAGIC, 0};
        if (rx_fd >= 0 && ring_map(rx_fd, bytes, 1, &l->rx) == HV_OK) {
            offer[1] = (uint32_t)strlen(name);
        } else {
            HV_LOG(HV_LOG_WARN, "shm", "HV-SHM-CREATE",
                   "cannot create a shared-memory ring (%s): using TCP", strerror(errno));
            if (rx_fd >= 0) {
                shm_unlink(name);
                close(rx_fd);
                rx_fd = -1;
            }
        }
        HV_TRY_GOTO(hv__tcp_io_until(l->recv_fd, offer, sizeof(offer), 1, deadline), rc, fail);
        if (offer[1] > 0) {
            HV_TRY_GOTO(hv__tcp_io_until(l->recv_fd, name, offer[1], 1, deadline), rc, fail);
        }
    }
    // 2. Sender side: read the right neighbour's offer, open it, answer yes or no.
    if (send_local) {
        uint32_t offer[2];
        HV_TRY_GOTO(hv__tcp_io_until(l->send_fd, offer, sizeof(offer), 0, deadline), rc, fail);
        if (offer[0] != SHM_OFFER_MAGIC || offer[1] >= SHM_NAME_MAX) {
            rc = HV_EPROTO;
            goto fail;
        }
        uint8_t ok = 0;
        if (offer[1] > 0) {
            char peer[SHM_NAME_MAX];
            HV_TRY_GOTO(hv__tcp_io_until(l->send_fd, peer, offer[1], 0, deadline), rc, fail);
            peer[offer[1]] = '\0';
            int fd = shm_open(peer, O_RDWR, 0);
            if (fd >= 0) {
                ok = ring_map(fd, 0, 0, &l->tx) == HV_OK;
                close(fd);
            }
        }
        HV_TRY_GOTO(hv__tcp_io_until(l->send_fd, &ok, 1, 1, deadline), rc, fail);
    }
    // 3. Receiver side: the answer. Unlink either way: both ends hold mappings now.
    if (recv_local) {
        uint8_t ok = 0;
        rc = hv__tcp_io_until(l->recv_fd, &ok, 1, 0, deadline);
        if (rx_fd >= 0) {
            shm_unlink(name);
            close(rx_fd);
            rx_fd = -1;
        }
        if (rc != HV_OK) {
            goto fail;
        }
        if (!ok) {
            ring_unmap(&l->rx); // the peer could not open it (another machine): TCP
        }
    }
    *out = &l->base;
    return HV_OK;
fail:
    if (rx_fd >= 0) {
        shm_unlink(name);
        close(rx_fd);
    }
    ring_unmap(&l->rx);
    ring_unmap(&l->tx);
    hv_free(l);
    return rc;
}

int hv__shm_link_uses_shm(hv__link_t *base, int send_dir) {
    if (base->ops != &hv__shm_ops) {
        return 0;
    }
    shm_link_t *l = (shm_link_t *)base;
    return send_dir ? l->tx.h != NULL : l->rx.h != NULL;
}

/* ---- doorbells ------------------------------------------------------------------------------- */

static void ring_bell(int fd) {
    char b = 1;
    ssize_t w = send(fd, &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)w; // a full socket already holds a wake-up; an error shows up on the next wait
}

/* Reads and discards doorbell bytes; notes a closed or reset connection. A neighbour that
 * closes is not an error by itself (it may simply be done): it becomes one when this side
 * still needs that direction (checked in the ops below). */
static void drain_bells(shm_link_t *l, int fd) {
    char buf[64];
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n > 0) {
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
            atomic_store(fd == l->send_fd ? &l->tx_gone : &l->rx_gone, 1);
        }
        return;
    }
}

static hv_err shm_check(shm_link_t *l, atomic_int *gone) {
    if (atomic_load_explicit(&l->aborted, memory_order_relaxed)) {
        return HV_ECANCELED;
    }
    if (gone != NULL && atomic_load_explicit(gone, memory_order_relaxed)) {
        return HV_EPEER;
    }
    return HV_OK;
}

/* ---- ops ------------------------------------------------------------------------------------- */

static int rx_has_data(shm_link_t *l);

/* An empty ring from the left: HV_EPEER once the left neighbour is gone, unless data landed
 * after the caller looked (a peer writes, then dies, then is seen gone: look again after). */
static hv_err rx_empty(shm_link_t *l) {
    hv_err rc = shm_check(l, &l->rx_gone);
    return rc == HV_EPEER && rx_has_data(l) ? HV_OK : rc;
}

static hv_err shm_send_some(hv__link_t *base, const struct iovec *iov, int iovcnt, size_t *n) {
    shm_link_t *l = (shm_link_t *)base;
    hv_err rc = shm_check(l, &l->tx_gone);
    if (rc != HV_OK) {
        return rc;
    }
    if (l->tx.h == NULL) {
        return hv__tcp_ops.send_some(l->tcp, iov, iovcnt, n);
    }
    shm_ring_t *r = &l->tx;
    uint64_t head = atomic_load_explicit(&r->h->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&r->h->tail, memory_order_acquire);
    size_t space = (size_t)(r->h->size - (head - tail));
    size_t moved = 0;
    for (int i = 0; i < iovcnt && space > 0; i++) {
        const unsigned char *src = iov[i].iov_base;
        size_t len = iov[i].iov_len < space ? iov[i].iov_len : space;
        while (len > 0) {
            size_t pos = (size_t)((head + moved) & r->mask);
            size_t chunk = r->h->size - pos < len ? r->h->size - pos : len;
            memcpy(r->data + pos, src, chunk);
            src += chunk;
            len -= chunk;
            moved += chunk;
            space -= chunk;
        }
    }
    if (moved > 0) {
        atomic_store_explicit(&r->h->head, head + moved, memory_order_seq_cst);
        // Ring only if someone sleeps and the ring was empty until this write: a consumer
        // sleeps only on an empty ring, and if the data was consumed already, whoever consumed
        // it was awake.
        if (atomic_load_explicit(&r->h->cons_sleep, memory_order_seq_cst) > 0 &&
            atomic_load_explicit(&r->h->tail, memory_order_seq_cst) == head) {
            ring_bell(l->send_fd);
        }
    }
    *n = moved;
    return HV_OK;
}

static void rx_release(shm_link_t *l, size_t k) {
    shm_ring_t *r = &l->rx;
    uint64_t tail = atomic_load_explicit(&r->h->tail, memory_order_relaxed);
    atomic_store_explicit(&r->h->tail, tail + k, memory_order_seq_cst);
    if (atomic_exchange_explicit(&r->h->prod_sleep, 0, memory_order_seq_cst)) {
        ring_bell(l->recv_fd); // the reverse direction of the left neighbour's connection
    }
}

static hv_err shm_recv_some(hv__link_t *base, const struct iovec *iov, int iovcnt, size_t *n) {
    shm_link_t *l = (shm_link_t *)base;
    if (l->rx.h == NULL) {
        hv_err rc = shm_check(l, NULL);
        return rc != HV_OK ? rc : hv__tcp_ops.recv_some(l->tcp, iov, iovcnt, n);
    }
    shm_ring_t *r = &l->rx;
    uint64_t tail = atomic_load_explicit(&r->h->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&r->h->head, memory_order_acquire);
    size_t avail = (size_t)(head - tail);
    if (avail == 0) {
        *n = 0;
        return rx_empty(l); // data first: a peer may write, then exit
    }
    size_t moved = 0;
    for (int i = 0; i < iovcnt && avail > 0; i++) {
        unsigned char *dst = iov[i].iov_base;
        size_t len = iov[i].iov_len < avail ? iov[i].iov_len : avail;
        while (len > 0) {
            size_t pos = (size_t)((tail + moved) & r->mask);
            size_t chunk = r->h->size - pos < len ? r->h->size - pos : len;
            memcpy(dst, r->data + pos, chunk);
            dst += chunk;
            len -= chunk;
            moved += chunk;
            avail -= chunk;
        }
    }
    rx_release(l, moved);
    *n = moved;
    return HV_OK;
}

static hv_err shm_recv_view(hv__link_t *base, size_t max, const void **p, size_t *n) {
    shm_link_t *l = (shm_link_t *)base;
    if (l->rx.h == NULL) {
        *n = 0; // TCP direction: the caller falls back to recv_some
        return shm_check(l, NULL);
    }
    shm_ring_t *r = &l->rx;
    uint64_t tail = atomic_load_explicit(&r->h->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&r->h->head, memory_order_acquire);
    size_t avail = (size_t)(head - tail);
    if (avail == 0) {
        *n = 0;
        return rx_empty(l);
    }
    size_t pos = (size_t)(tail & r->mask);
    size_t contig = r->h->size - pos;
    size_t k = avail < contig ? avail : contig;
    *p = r->data + pos;
    *n = k < max ? k : max;
    return HV_OK;
}

static void shm_recv_consume(hv__link_t *base, size_t k) {
    shm_link_t *l = (shm_link_t *)base;
    if (l->rx.h != NULL && k > 0) {
        rx_release(l, k);
    }
}

static int rx_has_data(shm_link_t *l) {
    shm_ring_t *r = &l->rx;
    return atomic_load_explicit(&r->h->head, memory_order_seq_cst) !=
           atomic_load_explicit(&r->h->tail, memory_order_relaxed);
}

static int tx_has_space(shm_link_t *l) {
    shm_ring_t *r = &l->tx;
    return atomic_load_explicit(&r->h->head, memory_order_relaxed) -
               atomic_load_explicit(&r->h->tail, memory_order_seq_cst) <
           r->h->size;
}

static hv_err shm_wait(hv__link_t *base, int want_send, int want_recv, int timeout_ms) {
    shm_link_t *l = (shm_link_t *)base;
    hv_err rc = shm_check(l, NULL);
    if (rc != HV_OK) {
        return rc;
    }
    // Announce that we are about to sleep, then look again (see the file comment).
    int armed = 0;
    if (want_recv && l->rx.h != NULL) {
        atomic_fetch_add_explicit(&l->rx.h->cons_sleep, 1, memory_order_seq_cst);
        armed = 1;
        if (rx_has_data(l)) {
            atomic_fetch_sub(&l->rx.h->cons_sleep, 1);
            return HV_OK;
        }
    }
    if (want_send && l->tx.h != NULL) {
        atomic_store_explicit(&l->tx.h->prod_sleep, 1, memory_order_seq_cst);
        if (tx_has_space(l)) {
            atomic_store(&l->tx.h->prod_sleep, 0);
            if (armed) {
                atomic_fetch_sub(&l->rx.h->cons_sleep, 1);
            }
            return HV_OK;
        }
    }
    // Always watch both sockets for input: doorbells, data of TCP directions, and EOF of a
    // dead peer. POLLOUT only for a TCP send direction.
    struct pollfd p[2] = {{.fd = l->recv_fd, .events = POLLIN}, {.fd = l->send_fd, .events = 0}};
    if (l->tx.h != NULL) {
        p[1].events |= POLLIN; // doorbells from the right (space freed) and its EOF
    } else if (want_send) {
        p[1].events |= POLLOUT;
    }
    if (l->rx.h == NULL && !want_recv) {
        p[0].events = 0; // TCP data we do not want yet must not wake us; errors still do
    }
    // abort() shuts both sockets down, which wakes this poll with POLLHUP.
    poll(p, 2, timeout_ms);
    if (atomic_load(&l->aborted)) {
        rc = HV_ECANCELED;
    }
    if (l->rx.h != NULL) {
        if (armed) {
            atomic_fetch_sub(&l->rx.h->cons_sleep, 1);
        }
        if (p[0].revents) {
            drain_bells(l, l->recv_fd); // we drive the link: the wake-ups are ours
        }
    }
    if (l->tx.h != NULL) {
        atomic_store(&l->tx.h->prod_sleep, 0);
        if (p[1].revents) {
            drain_bells(l, l->send_fd);
        }
    }
    if (rc == HV_OK && want_send && l->tx.h != NULL) {
        rc = shm_check(l, &l->tx_gone);
    }
    if (rc == HV_OK && want_recv && l->rx.h != NULL && !rx_has_data(l)) {
        rc = rx_empty(l);
    }
    return rc;
}

/* A closed doorbell socket counts as input: the round that follows reports the failure. */
static int sock_eof(int fd) {
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static int shm_has_input(hv__link_t *base) {
    shm_link_t *l = (shm_link_t *)base;
    if (l->rx.h == NULL) {
        return hv__tcp_ops.has_input(l->tcp);
    }
    if (rx_has_data(l) || atomic_load(&l->rx_gone) || atomic_load(&l->aborted)) {
        return 1;
    }
    struct pollfd p = {.fd = l->recv_fd, .events = POLLIN};
    if (poll(&p, 1, 0) > 0 && sock_eof(l->recv_fd)) {
        return 1;
    }
    return rx_has_data(l); // data may have landed meanwhile
}

static int shm_idle_arm(hv__link_t *base) {
    shm_link_t *l = (shm_link_t *)base;
    if (l->rx.h == NULL) {
        return 0; // TCP from the left: poll sees the data itself
    }
    atomic_fetch_add_explicit(&l->rx.h->cons_sleep, 1, memory_order_seq_cst);
    if (rx_has_data(l) || atomic_load(&l->rx_gone)) {
        atomic_fetch_sub(&l->rx.h->cons_sleep, 1);
        return 1;
    }
    return 0;
}

static int shm_idle_fd(hv__link_t *base) { return ((shm_link_t *)base)->recv_fd; }

static void shm_idle_disarm(hv__link_t *base) {
    shm_link_t *l = (shm_link_t *)base;
    if (l->rx.h != NULL) {
        atomic_fetch_sub(&l->rx.h->cons_sleep, 1);
    }
}

static void shm_drain(hv__link_t *base) {
    shm_link_t *l = (shm_link_t *)base;
    if (l->rx.h != NULL) {
        drain_bells(l, l->recv_fd);
    }
}

static void shm_abort(hv__link_t *base) {
    shm_link_t *l = (shm_link_t *)base;
    atomic_store(&l->aborted, 1);
    hv__tcp_ops.abort(l->tcp); // wakes pollers, and the peers see the connections close
}

/* As its doorbell socket's end would: data already in the ring is still read (the ops check
 * rx_gone only on an empty ring), sends fail. A TCP direction from the left ends by itself. */
static void shm_peer_gone(hv__link_t *base, int send_side, int recv_side) {
    shm_link_t *l = (shm_link_t *)base;
    if (send_side) {
        atomic_store(&l->tx_gone, 1);
    }
    if (recv_side) {
        atomic_store(&l->rx_gone, 1);
    }
}

static void shm_destroy(hv__link_t *base) {
    if (base == NULL) {
        return;
    }
    shm_link_t *l = (shm_link_t *)base;
    ring_unmap(&l->tx);
    ring_unmap(&l->rx);
    hv__tcp_ops.destroy(l->tcp);
    hv_free(l);
}

const hv__transport_ops_t hv__shm_ops = {
    .name = "shm",
    .send_some = shm_send_some,
    .recv_some = shm_recv_some,
    .recv_view = shm_recv_view,
    .recv_consume = shm_recv_consume,
    .wait = shm_wait,
    .has_input = shm_has_input,
    .idle_arm = shm_idle_arm,
    .idle_fd = shm_idle_fd,
    .idle_disarm = shm_idle_disarm,
    .drain = shm_drain,
    .abort = shm_abort,
    .peer_gone = shm_peer_gone,
    .destroy = shm_destroy,
};
