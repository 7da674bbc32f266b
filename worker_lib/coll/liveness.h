/*
 * liveness: a failure detector on the data plane's own connections. A ring link is two TCP
 * connections whose data flows one way (to the right neighbour on the send socket, from the left
 * one on the receive socket); their reverse directions are idle. This module uses them, on a
 * thread of its own (never the training thread: a worker busy in a long compute step keeps
 * beating), to learn within a bounded time that a neighbour on another host went silent, without
 * waiting for TCP's own timeouts:
 *   - HEAR: on the send socket, read the one-byte heartbeats the right neighbour's own monitor
 *     writes every beat_ms. No heartbeat for silent_ms (after the first one came): its process or
 *     its host is silent.
 *   - ACK: on the receive socket, write a heartbeat every beat_ms to the left neighbour and watch
 *     that its host's kernel acknowledges them (TCP_INFO's unacknowledged segments). A heartbeat
 *     still unacknowledged after silent_ms: its host or the link is gone (a frozen process alone
 *     does not show here: its kernel still acknowledges).
 * A connection that ends (EOF, reset, shut down by an abort) is no evidence here (the ring
 * reports those itself) and is watched no more. A silence is reported once through the callback
 * (again if the peer is heard and then falls silent again); what to do with it is the caller's
 * (world.c tells the rendezvous, which tells the head). The ring's own bytes are never touched:
 * HEAR reads only the send socket's input, ACK writes only the receive socket's output.
 * The hv__live_track_* functions are the pure rule (table-tested); hv__live_start runs it over
 * real sockets.
 *
 * Threading: start and stop from one thread; the callback runs on the monitor's thread and must
 * not block (it delays the heartbeats this process owes its own neighbours). The sockets are
 * borrowed and must stay open until hv__live_stop returns.
 */
#ifndef HV_WORKER_LIB_LIVENESS_H
#define HV_WORKER_LIB_LIVENESS_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define HV__LIVE_HEAR 1u /* no heartbeat from the peer: it (or its host) is silent */
#define HV__LIVE_ACK 2u  /* the peer's host does not acknowledge our heartbeats */

/* One connection to watch. */
typedef struct hv__live_watch_s {
    int fd;       /* borrowed */
    unsigned how; /* HV__LIVE_HEAR (fd: the send socket) or HV__LIVE_ACK (the receive socket) */
    uint64_t tag; /* the caller's, passed back to the callback */
} hv__live_watch_t;

typedef struct hv__live_opts_s {
    uint32_t silent_ms; /* a peer silent this long is reported (> 0) */
    uint32_t beat_ms;   /* heartbeat interval; 0 = silent_ms / 5, at least 10 */
} hv__live_opts_t;

/* A watched peer has been silent for silent_ms (how: HV__LIVE_HEAR or HV__LIVE_ACK). */
typedef void (*hv__live_cb)(void *ud, uint64_t tag, unsigned how, uint32_t silent_ms);

typedef struct hv__live_s hv__live_t;

/* Starts the monitor's thread over w[0..n) (copied). *out is owned: hv__live_stop. Errors:
 * HV_EINVAL (n == 0 or silent_ms == 0), HV_ENOMEM, HV_EIO (no thread or eventfd). */
hv_err hv__live_start(const hv__live_opts_t *o, const hv__live_watch_t *w, size_t n, hv__live_cb cb,
                      void *ud, hv__live_t **out);
/* Stops and joins the thread (promptly: it waits in poll on an eventfd this signals) and frees
 * the monitor; the callback is not called after it returns. NULL is a no-op. */
void hv__live_stop(hv__live_t *l);

/* ---- the rule, pure (no I/O, no clock) ------------------------------------------------------ */

typedef struct hv__live_track_s {
    unsigned how;
    uint64_t heard_ms;   /* HEAR: when the last heartbeat was read (0: none yet) */
    uint64_t pending_ms; /* ACK: when the oldest unacknowledged heartbeat was written (0: none) */
    uint64_t beat_ms;    /* ACK: when the last heartbeat was written (0: never) */
    int reported;        /* this silence was reported already */
    int closed;          /* the connection ended: no more evidence from it */
} hv__live_track_t;

/* HEAR: heartbeat bytes were read at now. */
void hv__live_track_heard(hv__live_track_t *t, uint64_t now);
/* ACK: the socket has `unacked` segments sent and not acknowledged now. */
void hv__live_track_acked(hv__live_track_t *t, unsigned unacked);
/* ACK: 1 when a heartbeat is due at now (every beat_ms). */
int hv__live_track_beat_due(const hv__live_track_t *t, uint64_t now, uint32_t beat_ms);
/* ACK: a heartbeat was written at now. */
void hv__live_track_wrote(hv__live_track_t *t, uint64_t now);
/* The silence to report at now: how long the peer has been silent when that is at least
 * silent_ms and not reported yet (it is then marked reported), else 0. */
uint32_t hv__live_track_due(hv__live_track_t *t, uint64_t now, uint32_t silent_ms);
/* How long the monitor may sleep at now before something of t is due (at most beat_ms). */
uint32_t hv__live_track_wait(const hv__live_track_t *t, uint64_t now, uint32_t silent_ms,
                             uint32_t beat_ms);

#endif
