/*
 * transport_tcp: the TCP implementation of the transport seam (transport.h), plus the listener
 * and the connection handshake that build a ring link: connect to the right neighbour, accept
 * the left one, and check each other with a hello (world id, generation, ranks) so that stale
 * or foreign connections are refused. Sockets are non-blocking with TCP_NODELAY; waiting is
 * poll() on the two sockets and an eventfd that abort() signals. Not an algorithm: ring.c
 * decides what to send. Called by world.c (build) and, through the ops, by ring.c.
 */
#ifndef HV_WORKER_LIB_TRANSPORT_TCP_H
#define HV_WORKER_LIB_TRANSPORT_TCP_H

#include <stdint.h>

#include "transport.h"

typedef struct hv__tcp_listener_s hv__tcp_listener_t;

/* Listens on bind_addr ("0.0.0.0:0", "127.0.0.1:0", "10.0.0.5:7100"; NULL = "0.0.0.0:0").
 * *out is owned by the caller (hv__tcp_listener_destroy). Errors: HV_EINVAL (bad address),
 * HV_EIO (bind/listen failed; the log says why), HV_ENOMEM. */
hv_err hv__tcp_listen(const char *bind_addr, hv__tcp_listener_t **out);
/* The bound port. */
int hv__tcp_listener_port(const hv__tcp_listener_t *l);
void hv__tcp_listener_destroy(hv__tcp_listener_t *l);

/* Who a link belongs to: both ends must agree on world_id, generation and ring. */
typedef struct hv__tcp_ident_s {
    uint64_t world_id;   /* the job (or test world) */
    uint32_t generation; /* the rendezvous round */
    uint32_t rank;       /* my rank */
    uint32_t left_rank;  /* whom I accept */
    uint32_t right_rank; /* whom I connect to */
    uint32_t ring;       /* which ring of this world (0: all ranks; others: hierarchical) */
} hv__tcp_ident_t;

/* Options of a link's sockets. */
typedef struct hv__tcp_opts_s {
    int sock_buf; /* SO_SNDBUF/SO_RCVBUF in bytes; 0 leaves the kernel's autotuning */
    /* Optional: polled (at least every 50 ms) while a link is being built; non-zero stops the
     * build with HV_ECANCELED (an elastic round that a failure doomed before it was up). */
    int (*cancelled)(void *ud);
    void *cancel_ud;
} hv__tcp_opts_t;

/* Builds the ring link: connects to right_addr ("ip:port", retrying until timeout_ms), sends
 * the hello, and accepts on lst until the left neighbour's matching hello arrives (others are
 * closed). Blocking, bounded by timeout_ms (HV_ETIMEDOUT) or opts->cancelled (HV_ECANCELED). lst is borrowed. *out is owned
 * (ops->destroy). */
hv_err hv__tcp_link_create(hv__tcp_listener_t *lst, const char *right_addr,
                           const hv__tcp_ident_t *id, const hv__tcp_opts_t *opts, int timeout_ms,
                           hv__link_t **out);

/* Builds several ring links at once (one per ids[i], connecting to right_addrs[i]): connects
 * all, then accepts until every link's left neighbour arrived, in whatever order they come.
 * On HV_OK outs[i] are owned by the caller; on failure nothing is. */
hv_err hv__tcp_links_create(hv__tcp_listener_t *lst, const char *const *right_addrs,
                            const hv__tcp_ident_t *ids, int n, const hv__tcp_opts_t *opts,
                            int timeout_ms, hv__link_t **outs);

#define HV__TCP_HELLO_LEN 32

/* The hello that the connecting end of link id sends to its right neighbour: world id,
 * generation, ring, from rank, to rank (tests forge stale ones with it). */
void hv__tcp_hello(const hv__tcp_ident_t *id, unsigned char out[HV__TCP_HELLO_LEN]);

/* Reads (writing = 0) or writes exactly len bytes on a non-blocking socket, waiting in poll()
 * until deadline (hv_now_ms() clock). HV_EPEER when the peer closed or reset, HV_ETIMEDOUT at
 * the deadline, HV_EIO on another socket error. buf is borrowed. */
hv_err hv__tcp_io_until(int fd, void *buf, size_t len, int writing, uint64_t deadline);

/* The two sockets of a TCP link (for transports layered on it, e.g. shm doorbells). */
int hv__tcp_link_send_fd(hv__link_t *l);
int hv__tcp_link_recv_fd(hv__link_t *l);

extern const hv__transport_ops_t hv__tcp_ops;

#endif
