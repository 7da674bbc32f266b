/*
 * transport_shm: the shared-memory implementation of the transport seam for neighbours on the
 * same host. It upgrades a TCP ring link: each direction whose peer is local gets a single-
 * producer single-consumer byte ring in a POSIX shared-memory segment created by the receiver;
 * the TCP connection of that direction then only carries one-byte doorbells (to wake a sleeping
 * peer) and proves liveness (a dead peer's socket closes). Directions to remote peers stay TCP.
 * The receive side offers a zero-copy view, so reductions read the neighbour's bytes in place.
 * Not an algorithm and not a connection manager: world.c decides which directions are local.
 */
#ifndef HV_WORKER_LIB_TRANSPORT_SHM_H
#define HV_WORKER_LIB_TRANSPORT_SHM_H

#include <stddef.h>

#include "transport.h"

/* Upgrades tcp (a link from hv__tcp_link_create; ownership moves to the new link on HV_OK and
 * stays with the caller on failure). send_local / recv_local say whether the right / left
 * neighbour is on this host; ring_bytes is each ring's size (rounded to a power of two). Both
 * neighbours must call this with matching flags: it runs a short handshake over the sockets,
 * bounded by timeout_ms. A direction whose segment the peer cannot open (e.g. another machine
 * with the same host name) silently stays TCP. */
hv_err hv__shm_link_upgrade(hv__link_t *tcp, int send_local, int recv_local, size_t ring_bytes,
                            int timeout_ms, hv__link_t **out);

/* 1 if the link moves bytes of that direction through shared memory (for tests and logs). */
int hv__shm_link_uses_shm(hv__link_t *l, int send_dir);

extern const hv__transport_ops_t hv__shm_ops;

#endif
