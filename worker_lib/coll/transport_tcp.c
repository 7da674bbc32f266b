/*
 * transport_tcp: see transport_tcp.h. The link owns two non-blocking sockets (send_fd to the
 * right neighbour, recv_fd from the left) and an eventfd that abort() signals so that a thread
 * blocked in poll() wakes at once. abort() shuts the sockets down but does not close them, so a
 * concurrent poll() never races with the descriptor being reused; destroy() closes.
 */
#include "transport_tcp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "mem.h"
#include "util.h"

#define TCP_HELLO_MAGIC 0x48564450u // "HVDP"
#define TCP_HELLO_VERSION 2u
#define TCP_HELLO_LEN HV__TCP_HELLO_LEN
#define TCP_HELLO_WAIT_MS 2000 // bound on reading one hello from an accepted connection

struct hv__tcp_listener_s {
    int fd;   // listening socket (non-blocking), owned
    int port; // bound port
};

typedef struct tcp_link_s {
    hv__link_t base;    // ops = &hv__tcp_ops
    int send_fd;        // to the right neighbour, owned
    int recv_fd;        // from the left neighbour, owned
    int abort_fd;       // eventfd written by abort, owned
    atomic_int aborted; // 1 after abort
    atomic_int tx_gone; // the right neighbour died (peer_gone): sends fail
} tcp_link_t;

/* ---- addresses ------------------------------------------------------------------------------- */

static hv_err tcp_resolve(const char *hostport, int passive, struct sockaddr_storage *ss,
                          socklen_t *sslen) {
    char host[256];
    int port = 0;
    if (hv_parse_hostport(hostport, host, sizeof(host), &port) != HV_OK || port < 0 ||
        port > 65535) {
        HV_LOG(HV_LOG_ERROR, "tcp", "HV-TCP-ADDR", "'%s' is not a host:port address", hostport);
        return HV_EINVAL;
    }
    char service[16];
    snprintf(service, sizeof(service), "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    if (passive) {
        hints.ai_flags = AI_PASSIVE;
    }
    struct addrinfo *res = NULL;
    int g = getaddrinfo(host[0] ? host : NULL, service, &hints, &res);
    if (g != 0 || res == NULL) {
        HV_LOG(HV_LOG_ERROR, "tcp", "HV-TCP-ADDR", "cannot resolve '%s': %s", hostport,
               gai_strerror(g));
        return HV_EINVAL;
    }
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *sslen = res->ai_addrlen;
    freeaddrinfo(res);
    return HV_OK;
}

static int tcp_remaining(uint64_t deadline) {
    uint64_t now = hv_now_ms();
    return now >= deadline ? 0 : (int)(deadline - now);
}

/* ---- listener -------------------------------------------------------------------------------- */

hv_err hv__tcp_listen(const char *bind_addr, hv__tcp_listener_t **out) {
    struct sockaddr_storage ss;
    socklen_t sslen = 0;
    hv_err rc = tcp_resolve(bind_addr ? bind_addr : "0.0.0.0:0", 1, &ss, &sslen);
    if (rc != HV_OK) {
        return rc;
    }
    hv__tcp_listener_t *l = hv_calloc(1, sizeof(*l));
    if (l == NULL) {
        return HV_ENOMEM;
    }
    l->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (l->fd < 0) {
        rc = hv_err_from_errno(errno);
        goto fail;
    }
    int one = 1;
    setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(l->fd, (struct sockaddr *)&ss, sslen) != 0 || listen(l->fd, 128) != 0) {
        HV_LOG(HV_LOG_ERROR, "tcp", "HV-TCP-LISTEN", "cannot listen on %s: %s",
               bind_addr ? bind_addr : "0.0.0.0:0", strerror(errno));
        rc = HV_EIO;
        goto fail;
    }
    struct sockaddr_storage bound;
    socklen_t blen = sizeof(bound);
    if (getsockname(l->fd, (struct sockaddr *)&bound, &blen) != 0) {
        rc = HV_EIO;
        goto fail;
    }
    l->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                : ((struct sockaddr_in *)&bound)->sin_port);
    *out = l;
    return HV_OK;
fail:
    if (l->fd >= 0) {
        close(l->fd);
    }
    hv_free(l);
    return rc;
}

int hv__tcp_listener_port(const hv__tcp_listener_t *l) { return l->port; }

void hv__tcp_listener_destroy(hv__tcp_listener_t *l) {
    if (l == NULL) {
        return;
    }
    close(l->fd);
    hv_free(l);
}

/* ---- handshake ------------------------------------------------------------------------------- */

static void put32(unsigned char *p, uint32_t v) {
    v = htonl(v);
    memcpy(p, &v, 4);
}

/* Hello: magic, version, world_id (hi, lo), generation, ring, from rank, to rank. */
static void hello_encode(unsigned char *b, uint64_t world, uint32_t gen, uint32_t ring,
                         uint32_t from, uint32_t to) {
    put32(b, TCP_HELLO_MAGIC);
    put32(b + 4, TCP_HELLO_VERSION);
    put32(b + 8, (uint32_t)(world >> 32));
    put32(b + 12, (uint32_t)world);
    put32(b + 16, gen);
    put32(b + 20, ring);
    put32(b + 24, from);
    put32(b + 28, to);
}

void hv__tcp_hello(const hv__tcp_ident_t *id, unsigned char out[HV__TCP_HELLO_LEN]) {
    hello_encode(out, id->world_id, id->generation, id->ring, id->rank, id->right_rank);
}

hv_err hv__tcp_io_until(int fd, void *buf, size_t len, int writing, uint64_t deadline) {
    size_t done = 0;
    while (done < len) {
        ssize_t n = writing ? send(fd, (char *)buf + done, len - done, MSG_NOSIGNAL)
                            : recv(fd, (char *)buf + done, len - done, 0);
        if (n > 0) {
            done += (size_t)n;
            continue;
        }
        if (n == 0) {
            return HV_EPEER;
        }
        if (errno == EINTR) {
            continue;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            return errno == ECONNRESET || errno == EPIPE ? HV_EPEER : HV_EIO;
        }
        int left = tcp_remaining(deadline);
        if (left == 0) {
            return HV_ETIMEDOUT;
        }
        struct pollfd p = {.fd = fd, .events = writing ? POLLOUT : POLLIN};
        poll(&p, 1, left);
    }
    return HV_OK;
}

/* Reads or writes exactly len bytes on a non-blocking socket within timeout_ms. */
static hv_err tcp_io_full(int fd, void *buf, size_t len, int writing, int timeout_ms) {
    return hv__tcp_io_until(fd, buf, len, writing, hv_now_ms() + (uint64_t)timeout_ms);
}

static void tcp_tune(int fd, const hv__tcp_opts_t *opts) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (opts != NULL && opts->sock_buf > 0) {
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &opts->sock_buf, sizeof(opts->sock_buf));
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &opts->sock_buf, sizeof(opts->sock_buf));
    }
}

#define TCP_CANCEL_POLL_MS 50 // a build checks its cancel callback at least this often

static int tcp_cancelled(const hv__tcp_opts_t *opts) {
    return opts != NULL && opts->cancelled != NULL && opts->cancelled(opts->cancel_ud);
}

/* A wait slice: the time left, at most TCP_CANCEL_POLL_MS when the build can be cancelled. */
static int tcp_slice(const hv__tcp_opts_t *opts, uint64_t deadline) {
    int left = tcp_remaining(deadline);
    return opts != NULL && opts->cancelled != NULL && left > TCP_CANCEL_POLL_MS ? TCP_CANCEL_POLL_MS
                                                                                : left;
}

/* Connects to addr, retrying refused connections until the deadline (or a cancel). */
static hv_err tcp_connect(const char *addr, const hv__tcp_opts_t *opts, uint64_t deadline,
                          int *out) {
    struct sockaddr_storage ss;
    socklen_t sslen = 0;
    hv_err rc = tcp_resolve(addr, 0, &ss, &sslen);
    if (rc != HV_OK) {
        return rc;
    }
    for (;;) {
        int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            return hv_err_from_errno(errno);
        }
        tcp_tune(fd, opts);
        int err = 0;
        if (connect(fd, (struct sockaddr *)&ss, sslen) != 0) {
            err = errno;
            if (err == EINPROGRESS) {
                struct pollfd p = {.fd = fd, .events = POLLOUT};
                int pr;
                while ((pr = poll(&p, 1, tcp_slice(opts, deadline))) == 0 &&
                       tcp_remaining(deadline) > 0 && !tcp_cancelled(opts)) {
                }
                socklen_t elen = sizeof(err);
                if (pr <= 0) {
                    err = ETIMEDOUT;
                } else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0) {
                    err = errno;
                }
            }
        }
        if (err == 0) {
            *out = fd;
            return HV_OK;
        }
        close(fd);
        if (tcp_cancelled(opts)) {
            return HV_ECANCELED;
        }
        if (tcp_remaining(deadline) == 0) {
            HV_LOG(HV_LOG_ERROR, "tcp", "HV-TCP-CONNECT", "cannot connect to %s: %s", addr,
                   strerror(err));
            return HV_ETIMEDOUT;
        }
        if (err != ECONNREFUSED && err != EINTR && err != ETIMEDOUT && err != EAGAIN) {
            HV_LOG(HV_LOG_ERROR, "tcp", "HV-TCP-CONNECT", "cannot connect to %s: %s", addr,
                   strerror(err));
            return HV_EPEER;
        }
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* Accepts connections until every link i got the hello of ids[i].left_rank for its ring
 * (connections for other worlds, generations or rings are closed). */
static hv_err tcp_accept_lefts(hv__tcp_listener_t *lst, const hv__tcp_ident_t *ids, int n,
                               const hv__tcp_opts_t *opts, uint64_t deadline, int *fds) {
    int missing = n;
    while (missing > 0) {
        int left = tcp_remaining(deadline);
        if (left == 0) {
            for (int i = 0; i < n; i++) {
                if (fds[i] < 0) {
                    HV_LOG(HV_LOG_ERROR, "tcp", "HV-TCP-ACCEPT",
                           "rank %u: left neighbour (rank %u) of ring %u did not connect in time",
                           ids[i].rank, ids[i].left_rank, ids[i].ring);
                }
            }
            return HV_ETIMEDOUT;
        }
        if (tcp_cancelled(opts)) {
            return HV_ECANCELED;
        }
        struct pollfd p = {.fd = lst->fd, .events = POLLIN};
        if (poll(&p, 1, tcp_slice(opts, deadline)) <= 0) {
            continue;
        }
        int fd = accept4(lst->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            continue;
        }
        tcp_tune(fd, opts);
        unsigned char got[TCP_HELLO_LEN];
        int wait = left < TCP_HELLO_WAIT_MS ? left : TCP_HELLO_WAIT_MS;
        int matched = -1;
        if (tcp_io_full(fd, got, sizeof(got), 0, wait) == HV_OK) {
            for (int i = 0; i < n && matched < 0; i++) {
                unsigned char want[TCP_HELLO_LEN];
                hello_encode(want, ids[i].world_id, ids[i].generation, ids[i].ring,
                             ids[i].left_rank, ids[i].rank);
                if (fds[i] < 0 && memcmp(got, want, sizeof(got)) == 0) {
                    matched = i;
                }
            }
        }
        if (matched < 0) {
            HV_LOG(HV_LOG_INFO, "tcp", "HV-TCP-STRAY",
                   "rank %u: refused a connection that is no expected neighbour of generation %u",
                   ids[0].rank, ids[0].generation);
            close(fd);
            continue;
        }
        fds[matched] = fd;
        missing--;
    }
    return HV_OK;
}

hv_err hv__tcp_links_create(hv__tcp_listener_t *lst, const char *const *right_addrs,
                            const hv__tcp_ident_t *ids, int n, const hv__tcp_opts_t *opts,
                            int timeout_ms, hv__link_t **outs) {
    uint64_t deadline = hv_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 1);
    hv_err rc = HV_OK;
    tcp_link_t *ls[8] = {0};
    int rfds[8];
    if (n < 1 || n > 8) {
        return HV_EINVAL;
    }
    for (int i = 0; i < n; i++) {
        rfds[i] = -1;
    }
    for (int i = 0; i < n; i++) {
        ls[i] = hv_calloc(1, sizeof(tcp_link_t));
        if (ls[i] == NULL) {
            rc = HV_ENOMEM;
            goto fail;
        }
        ls[i]->base.ops = &hv__tcp_ops;
        ls[i]->send_fd = ls[i]->recv_fd = -1;
        ls[i]->abort_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (ls[i]->abort_fd < 0) {
            rc = hv_err_from_errno(errno);
            goto fail;
        }
    }
    // Connect first: the peers' listeners queue us even before they accept, so every rank can
    // connect right and then accept left without a deadlock.
    for (int i = 0; i < n; i++) {
        HV_TRY_GOTO(tcp_connect(right_addrs[i], opts, deadline, &ls[i]->send_fd), rc, fail);
        unsigned char hello[TCP_HELLO_LEN];
        hello_encode(hello, ids[i].world_id, ids[i].generation, ids[i].ring, ids[i].rank,
                     ids[i].right_rank);
        HV_TRY_GOTO(
            tcp_io_full(ls[i]->send_fd, hello, sizeof(hello), 1, tcp_remaining(deadline) + 1), rc,
            fail);
    }
    HV_TRY_GOTO(tcp_accept_lefts(lst, ids, n, opts, deadline, rfds), rc, fail);
    for (int i = 0; i < n; i++) {
        ls[i]->recv_fd = rfds[i];
        outs[i] = &ls[i]->base;
    }
    return HV_OK;
fail:
    for (int i = 0; i < n; i++) {
        if (rfds[i] >= 0) {
            close(rfds[i]);
        }
        if (ls[i] != NULL) {
            if (ls[i]->send_fd >= 0) {
                close(ls[i]->send_fd);
            }
            if (ls[i]->abort_fd >= 0) {
                close(ls[i]->abort_fd);
            }
            hv_free(ls[i]);
        }
    }
    return rc;
}

hv_err hv__tcp_link_create(hv__tcp_listener_t *lst, const char *right_addr,
                           const hv__tcp_ident_t *id, const hv__tcp_opts_t *opts, int timeout_ms,
                           hv__link_t **out) {
    return hv__tcp_links_create(lst, &right_addr, id, 1, opts, timeout_ms, out);
}

int hv__tcp_link_send_fd(hv__link_t *l) { return ((tcp_link_t *)l)->send_fd; }
int hv__tcp_link_recv_fd(hv__link_t *l) { return ((tcp_link_t *)l)->recv_fd; }

/* ---- ops ------------------------------------------------------------------------------------- */

static hv_err tcp_errno(const char *what) {
    int e = errno;
    if (e == ECONNRESET || e == EPIPE || e == ENOTCONN || e == ECONNABORTED) {
        HV_LOG(HV_LOG_INFO, "tcp", "HV-TCP-RESET", "%s: %s", what, strerror(e));
        return HV_EPEER;
    }
    HV_LOG(HV_LOG_ERROR, "tcp", "HV-TCP-IO", "%s: %s", what, strerror(e));
    return HV_EIO;
}

static hv_err tcp_send_some(hv__link_t *base, const struct iovec *iov, int iovcnt, size_t *n) {
    tcp_link_t *l = (tcp_link_t *)base;
    if (atomic_load_explicit(&l->aborted, memory_order_relaxed)) {
        return HV_ECANCELED;
    }
    if (atomic_load_explicit(&l->tx_gone, memory_order_relaxed)) {
        return HV_EPEER; // nobody will read it
    }
    struct msghdr m = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt};
    for (;;) {
        ssize_t r = sendmsg(l->send_fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r >= 0) {
            *n = (size_t)r;
            return HV_OK;
        }
        if (errno == EINTR) {
            continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
            *n = 0;
            return HV_OK;
        }
        if (atomic_load(&l->aborted)) {
            return HV_ECANCELED;
        }
        return tcp_errno("send");
    }
}

static hv_err tcp_recv_some(hv__link_t *base, const struct iovec *iov, int iovcnt, size_t *n) {
    tcp_link_t *l = (tcp_link_t *)base;
    if (atomic_load_explicit(&l->aborted, memory_order_relaxed)) {
        return HV_ECANCELED;
    }
    struct msghdr m = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt};
    for (;;) {
        ssize_t r = recvmsg(l->recv_fd, &m, MSG_DONTWAIT);
        if (r > 0) {
            *n = (size_t)r;
            return HV_OK;
        }
        if (r == 0) {
            size_t want = 0;
            for (int i = 0; i < iovcnt; i++) {
                want += iov[i].iov_len;
            }
            if (want == 0) {
                *n = 0;
                return HV_OK;
            }
            HV_LOG(HV_LOG_INFO, "tcp", "HV-TCP-EOF", "fd %d: the peer closed", l->recv_fd);
            return atomic_load(&l->aborted) ? HV_ECANCELED : HV_EPEER; // orderly close: gone
        }
        if (errno == EINTR) {
            continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            *n = 0;
            return HV_OK;
        }
        if (atomic_load(&l->aborted)) {
            return HV_ECANCELED;
        }
        return tcp_errno("recv");
    }
}

static hv_err tcp_wait(hv__link_t *base, int want_send, int want_recv, int timeout_ms) {
    tcp_link_t *l = (tcp_link_t *)base;
    struct pollfd p[3];
    int np = 0;
    p[np++] = (struct pollfd){.fd = l->abort_fd, .events = POLLIN};
    if (want_send) {
        p[np++] = (struct pollfd){.fd = l->send_fd, .events = POLLOUT};
    }
    if (want_recv) {
        p[np++] = (struct pollfd){.fd = l->recv_fd, .events = POLLIN};
    }
    int r = poll(p, (nfds_t)np, timeout_ms);
    if (atomic_load(&l->aborted) || (r > 0 && (p[0].revents & POLLIN))) {
        return HV_ECANCELED;
    }
    return HV_OK; // progress possible, an error to be read by the next op, or timeout
}

static int tcp_has_input(hv__link_t *base) {
    struct pollfd p = {.fd = ((tcp_link_t *)base)->recv_fd, .events = POLLIN};
    return poll(&p, 1, 0) > 0;
}

static int tcp_idle_arm(hv__link_t *base) {
    (void)base;
    return 0; // poll() on the socket itself sees data that is already there
}

static void tcp_drain(hv__link_t *base) { (void)base; }

static int tcp_idle_fd(hv__link_t *base) { return ((tcp_link_t *)base)->recv_fd; }

static void tcp_idle_disarm(hv__link_t *base) { (void)base; }

static void tcp_abort(hv__link_t *base) {
    tcp_link_t *l = (tcp_link_t *)base;
    if (atomic_exchange(&l->aborted, 1)) {
        return;
    }
    uint64_t one = 1;
    ssize_t w = write(l->abort_fd, &one, sizeof(one));
    (void)w;
    // Shut down, do not close: another thread may be inside poll() on these descriptors.
    shutdown(l->send_fd, SHUT_RDWR);
    shutdown(l->recv_fd, SHUT_RDWR);
}

/* A dead left neighbour needs nothing here: what it sent is in this socket's queue or still in
 * its own, and its connection ends (EOF or reset) once its process is gone. */
static void tcp_peer_gone(hv__link_t *base, int send_side, int recv_side) {
    (void)recv_side;
    if (send_side) {
        atomic_store(&((tcp_link_t *)base)->tx_gone, 1);
    }
}

static void tcp_destroy(hv__link_t *base) {
    if (base == NULL) {
        return;
    }
    tcp_link_t *l = (tcp_link_t *)base;
    close(l->send_fd);
    close(l->recv_fd);
    close(l->abort_fd);
    hv_free(l);
}

const hv__transport_ops_t hv__tcp_ops = {
    .name = "tcp",
    .send_some = tcp_send_some,
    .recv_some = tcp_recv_some,
    .recv_view = NULL,
    .recv_consume = NULL,
    .wait = tcp_wait,
    .has_input = tcp_has_input,
    .idle_arm = tcp_idle_arm,
    .idle_fd = tcp_idle_fd,
    .idle_disarm = tcp_idle_disarm,
    .drain = tcp_drain,
    .abort = tcp_abort,
    .peer_gone = tcp_peer_gone,
    .destroy = tcp_destroy,
};
