/*
 * transport: the seam between libhv's collective algorithms (ring.c) and the ways bytes move
 * between ranks (transport_tcp.c, transport_shm.c; NCCL lives in transport_nccl.c behind its own
 * collective seam because NCCL runs whole collectives). A link is one ring position's pair of
 * byte pipes: it sends to the right neighbour and receives from the left one (for 2 ranks both
 * are the same peer, over two pipes). Algorithms only see the ops below and never know which
 * transport they drive. This header is not a connection manager: world.c builds links.
 *
 * Threading: a link is used by one thread at a time (the engine's driver), except ops->abort,
 * which any thread may call at any time to wake that thread and fail the link.
 * Errors: HV_EPEER (the peer closed or reset the connection), HV_ECANCELED (aborted locally),
 * HV_EIO (any other socket error).
 */
#ifndef HV_WORKER_LIB_TRANSPORT_H
#define HV_WORKER_LIB_TRANSPORT_H

#include <stddef.h>
#include <sys/uio.h>

#include "err.h"

typedef struct hv__link_s hv__link_t;

typedef struct hv__transport_ops_s {
    const char *name; /* "tcp", "shm" */

    /* Moves up to the bytes described by iov[0..iovcnt) to the right peer without blocking.
     * *n receives the number of bytes taken (0 when the pipe is full). */
    hv_err (*send_some)(hv__link_t *l, const struct iovec *iov, int iovcnt, size_t *n);

    /* Moves up to the bytes described by iov into caller memory without blocking. *n receives
     * the number of bytes stored (0 when nothing arrived). */
    hv_err (*recv_some)(hv__link_t *l, const struct iovec *iov, int iovcnt, size_t *n);

    /* Optional zero-copy receive (NULL when the transport has none): *p and *n describe up to max
     * received bytes in the transport's own memory (*n may be 0). They stay valid until
     * recv_consume(l, k), which releases the first k of them. */
    hv_err (*recv_view)(hv__link_t *l, size_t max, const void **p, size_t *n);
    void (*recv_consume)(hv__link_t *l, size_t k);

    /* Blocks until send_some (want_send) or recv_some (want_recv) may make progress, a peer
     * fails, the link is aborted (HV_ECANCELED) or timeout_ms passes (HV_OK either way: the
     * caller retries and tracks its own deadline). */
    hv_err (*wait)(hv__link_t *l, int want_send, int want_recv, int timeout_ms);

    /* Idle waiting (the engine between rounds). has_input: 1 when data or a failure from the
     * left peer is waiting (never consumes; any thread). idle_arm announces a sleeper before a
     * poll() for POLLIN on idle_fd(); it returns 1 (and announces nothing) when input is already
     * there. Every idle_arm that returned 0 is followed by idle_disarm after waking. Several
     * threads may sleep at once. drain discards pending wake-ups; only the thread that drives
     * the link calls it (after it consumed what woke it). */
    int (*has_input)(hv__link_t *l);
    int (*idle_arm)(hv__link_t *l);
    int (*idle_fd)(hv__link_t *l);
    void (*idle_disarm)(hv__link_t *l);
    void (*drain)(hv__link_t *l);

    /* Any thread, never blocks: fails the link (later ops return HV_ECANCELED), wakes a thread
     * blocked in wait, and closes the connections so that the peers notice at once. */
    void (*abort)(hv__link_t *l);

    /* Any thread, never blocks: the peer on a side (send_side: the right, recv_side: the left)
     * is known to be dead (its death-watch mark) before its connection may show it. Unlike
     * abort this is an end of input, not a failure: what the peer wrote before it died is still
     * received, and an op fails with HV_EPEER only once it needs that side and nothing more can
     * come from it (a send to it always does). A thread blocked in wait sees it within the
     * wait's timeout. */
    void (*peer_gone)(hv__link_t *l, int send_side, int recv_side);

    /* Frees the link (closes what abort did not). The link must not be in use. */
    void (*destroy)(hv__link_t *l);
} hv__transport_ops_t;

/* Every transport's link struct starts with this. */
struct hv__link_s {
    const hv__transport_ops_t *ops;
};

#endif
