/*
 * conngate: bounds the connections hvhead's gRPC server holds open, per client (the peer's IP
 * address) and in all. gRPC core 1.51 has no setting for it, and it accepts its connections
 * itself (grpc_server_add_channel_from_fd, which would let hv accept them, takes no TLS), so the
 * gate sits under gRPC: this module defines accept4(). An executable's definition of a symbol
 * that a shared library it links against references is exported and takes the place of libc's
 * (ASan's interceptor included), so libgrpc's listener (and libuv's, for the metrics page)
 * accepts through it. On a port the head registered (hv_conngate_watch_port), a new connection
 * over a bound is closed at once and the next pending one is taken, until the kernel's queue is
 * empty (gRPC's listener is edge-triggered); on any other listener, or before hv_conngate_start,
 * accept4 is the plain system call.
 *
 * A connection has no call to answer with RESOURCE_EXHAUSTED: the client sees the connection
 * closed during its setup. Each refusal is counted (hv_conngate_stats) and logged (HV-CONN-LIMIT,
 * at most once per HV_CONNGATE_LOG_MS with the number left unlogged).
 *
 * Three layers, each tested on its own (conngate_test.c):
 *  - hv_conngate_decide: the decision, pure (table-tested);
 *  - hv_conntab: the table of admitted connections (fd -> the socket's identity and its
 *    client), counted per client and in all. Connections that gRPC closed are found lazily: when
 *    a new one would go over a bound, entries whose fd no longer refers to the socket recorded
 *    are dropped, then the decision is taken again (tested with real sockets);
 *  - the process-wide gate (hv_conngate_start, accept4): I/O, one mutex, called from gRPC's
 *    poller threads and the loop thread.
 * What it is not: a rate limiter, or a bound on streams and calls (head/services/svc_jobs.c bounds Watch
 * streams). Only hvhead links it.
 */
#ifndef HV_HEAD_CONNGATE_H
#define HV_HEAD_CONNGATE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define HV_CONNGATE_KEY_LEN 48  /* an IPv6 address as text, with its NUL */
#define HV_CONNGATE_LOG_MS 5000 /* HV-CONN-LIMIT at most this often */
#define HV_CONNGATE_PRUNE_MS 50 /* a full scan for closed connections at most this often */
#define HV_CONNGATE_MAX_PORTS 8 /* listening ports the gate watches */

typedef struct hv_conngate_limits_s {
    uint32_t max_total;      /* connections open at once, in all; 0 = no bound */
    uint32_t max_per_client; /* connections open at once from one peer address; 0 = no bound */
    uint32_t node_share;     /* of max_total, the places only nodes' addresses may take */
} hv_conngate_limits_t;

typedef enum hv_conngate_verdict {
    HV_CONNGATE_ADMIT = 0,
    HV_CONNGATE_REFUSE_CLIENT = 1, /* the client's bound is reached */
    HV_CONNGATE_REFUSE_TOTAL = 2,  /* the bound in all is reached */
    HV_CONNGATE_REFUSE_SHARE = 3,  /* only the places kept for nodes' addresses are left */
} hv_conngate_verdict;

/* Whether one more connection from a client that holds client_open of the total_open ones may
 * be admitted; node says the client's address is a node's (hv_conntab_note_node). The client's
 * bound is checked first (when both are reached, the client is the one that holds too many),
 * then the bound in all; an address that is no node's may not take the last node_share places,
 * so that agents re-connecting (after a network fault or a head restart) are not locked out by
 * a few other addresses at their bounds. Pure. */
hv_conngate_verdict hv_conngate_decide(uint32_t client_open, uint32_t total_open, int node,
                                       const hv_conngate_limits_t *lim);

/* Fills the bounds left at 0 from the open-file limit nofile, less reserve descriptors kept for
 * other uses: (nofile - reserve) / HV_CONNGATE_FDS_PER_CONN in all, at least 2 and at most
 * HV_CONNGATE_MAX_AUTO; half of the bound in all per client (at least 1). Set bounds stay. The
 * nodes' share is a quarter of the bound in all, always derived (0 below 4). Pure.
 * At nofile 1024 and reserve 64: 480 in all, 240 per client, 120 kept for nodes (every local
 * process is the client 127.0.0.1: a loopback cluster of 16 workers and its agents uses a few
 * dozen). */
#define HV_CONNGATE_FDS_PER_CONN 2 /* a connection's socket, and room for what its calls open */
#define HV_CONNGATE_MAX_AUTO 32768 /* derived bound in all at most, however high the limit */
void hv_conngate_derive(uint64_t nofile, uint64_t reserve, hv_conngate_limits_t *lim);

/* The peer key of a socket address: its IP address as text, an IPv4 address mapped into IPv6
 * written as IPv4 ("127.0.0.1"). Returns 0, or -1 for an address that is not IP (out is ""). */
int hv_conngate_key(const void *sockaddr, size_t len, char out[HV_CONNGATE_KEY_LEN]);
/* The same key from gRPC's form of a call's peer ("ipv4:127.0.0.1:4242", "ipv6:[::1]:4242",
 * "ipv6:%5B::ffff:10.0.0.1%5D:4242"). Returns 0, or -1 for one that is not IP (out is ""). Pure. */
int hv_conngate_peer_key(const char *peer, char out[HV_CONNGATE_KEY_LEN]);

/* ---- the table of admitted connections (not thread-safe: the gate holds its mutex) ---------- */

typedef struct hv_conntab_s hv_conntab_t;

hv_err hv_conntab_create(hv_conntab_t **out);
/* Frees the table (the sockets are not closed). NULL is a no-op. */
void hv_conntab_destroy(hv_conntab_t *t);

/* Decides on fd, a socket just accepted from the client key (borrowed), and records it when it
 * is admitted. An entry already at fd is dropped first (the kernel reuses only a closed
 * descriptor's number). Over a bound, closed connections are pruned (hv_conntab_prune; at most
 * once per HV_CONNGATE_PRUNE_MS of now_ms, a monotonic clock, so a flood of refusals does not
 * rescan the table each time) and the decision is taken again. HV_CONNGATE_ADMIT is returned
 * also when the table cannot grow (out of memory): the connection is then not counted. */
hv_conngate_verdict hv_conntab_admit(hv_conntab_t *t, int fd, const char *key,
                                     const hv_conngate_limits_t *lim, uint64_t now_ms);
/* Notes key as a node's address (an agent called from it with its node credential): from then
 * on it may take the places kept for nodes. At most HV_CONNGATE_MAX_NODES addresses; later ones
 * are not noted (HV_ETOOBIG). Errors: HV_ENOMEM. */
#define HV_CONNGATE_MAX_NODES 65536
hv_err hv_conntab_note_node(hv_conntab_t *t, const char *key);
int hv_conntab_is_node(const hv_conntab_t *t, const char *key);
/* Drops the entries whose fd no longer refers to the socket recorded (closed, or reused for
 * another file). Returns how many it dropped. */
uint32_t hv_conntab_prune(hv_conntab_t *t);
/* Connections recorded, in all and from key. */
uint32_t hv_conntab_total(const hv_conntab_t *t);
uint32_t hv_conntab_count(const hv_conntab_t *t, const char *key);

/* ---- the process-wide gate ------------------------------------------------------------------ */

/* Sets the bounds and turns the gate on (again: new bounds apply to the next connection). Until
 * then accept4 passes everything through. Errors: HV_ENOMEM. */
hv_err hv_conngate_start(const hv_conngate_limits_t *lim);
/* Connections accepted on a listener bound to this port (any address) go through the gate. Call
 * before the server starts accepting. Errors: HV_ETOOBIG (more than HV_CONNGATE_MAX_PORTS),
 * HV_EINVAL (port out of range). */
hv_err hv_conngate_watch_port(int port);
/* Notes a call's peer (gRPC's form, as hv_conngate_peer_key reads it) as a node's address, in
 * the gate's table (hv_conntab_note_node). Before hv_conngate_start, or for a peer that is not
 * IP, nothing is noted. Thread-safe. */
void hv_conngate_note_node_peer(const char *peer);
/* Turns the gate off and frees its table. Call once the servers are shut down. */
void hv_conngate_stop(void);

typedef struct hv_conngate_stats_s {
    uint32_t open;           /* connections counted as open (closed ones go at the next prune) */
    uint64_t refused_client; /* refused at a client's bound, since start */
    uint64_t refused_total;  /* refused at the bound in all (or the nodes' share), since start */
} hv_conngate_stats_t;

/* A snapshot of the gate's figures. Prunes first (at most once per HV_CONNGATE_PRUNE_MS), so
 * that open counts the connections gRPC still holds. Thread-safe. */
void hv_conngate_stats(hv_conngate_stats_t *out);

#endif
