/*
 * actor_wire: the frames between an actor and its callers (docs/actors.md, "The wire"), and the
 * blocking socket helpers and handshake of the calling side. Pure encoding plus a few bounded
 * socket operations; the server (actor.c) and the client (actor_client.c) use it, tests use it
 * to play a hostile peer. It knows nothing of classes, futures or threads.
 *
 * Every frame is a 16-byte header, little-endian:
 *     u32 body length | u8 type | u8 0 | u16 method name length (CALL) or 0 | u64 call id
 * followed by the body. The handshake: the actor sends HELLO (magic, version, its frame limit,
 * a 32-byte nonce); the caller answers AUTH (its own nonce and a MAC over both nonces under the
 * secret); the actor checks the MAC in constant time and answers WELCOME (its own MAC, so that
 * the caller knows the actor holds the secret too) or ERROR, then closes. After that: CALL
 * (method name, argument) and REPLY (u32 status, result or error message), in order.
 */
#ifndef HV_WORKER_LIB_ACTOR_WIRE_H
#define HV_WORKER_LIB_ACTOR_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "hv/actor.h"

#define HV__ACTOR_HDR 16            /* header bytes */
#define HV__ACTOR_NONCE 32          /* nonce bytes */
#define HV__ACTOR_MAC 32            /* HMAC-SHA256 bytes */
#define HV__ACTOR_VERSION 1         /* wire version in HELLO */
#define HV__ACTOR_MAGIC 0x31415648u /* "HVA1" read as a little-endian u32 */
#define HV__ACTOR_HELLO_LEN 44      /* magic u32, version u16, 0 u16, max frame u32, nonce */
#define HV__ACTOR_AUTH_LEN 64       /* client nonce, client MAC */
#define HV__ACTOR_ERRMSG_MAX 1024   /* longest error text in ERROR and REPLY */
/* sizeof(hv_actor_connect_config_t) before resolve_timeout_ms (older callers) */
#define HV__ACTOR_CFG_V1_SIZE (sizeof(size_t) + 3 * sizeof(uint32_t))
#define HV__ACTOR_CRED_MAX 260 /* a head credential (HV_RPC_MAX_TOKEN) and its NUL */

typedef enum hv__actor_frame {
    HV__ACTOR_HELLO = 1,   /* actor -> caller: challenge */
    HV__ACTOR_AUTH = 2,    /* caller -> actor: response and counter-challenge */
    HV__ACTOR_WELCOME = 3, /* actor -> caller: its response */
    HV__ACTOR_ERROR = 4,   /* either way: u32 hv_err, text; the sender closes next */
    HV__ACTOR_CALL = 5,    /* caller -> actor: method name, argument */
    HV__ACTOR_REPLY = 6,   /* actor -> caller: u32 status (0 or the method's hv_err), bytes */
    HV__ACTOR_GOAWAY = 7,  /* actor -> caller at its stop: the header's id is the last call it
                            * ran on this connection (0: none); every later call was not run;
                            * body u32 hv_err, text; the actor closes next */
} hv__actor_frame;

/* A decoded header. */
typedef struct hv__actor_hdr_s {
    uint32_t len;      /* body bytes after the header */
    uint8_t type;      /* hv__actor_frame */
    uint16_t name_len; /* CALL: method name bytes at the start of the body */
    uint64_t id;       /* call id (CALL, REPLY); 0 otherwise */
} hv__actor_hdr_t;

void hv__actor_put_u32(uint8_t *p, uint32_t v);
uint32_t hv__actor_get_u32(const uint8_t *p);
void hv__actor_hdr_put(uint8_t p[HV__ACTOR_HDR], const hv__actor_hdr_t *h);
void hv__actor_hdr_get(const uint8_t p[HV__ACTOR_HDR], hv__actor_hdr_t *h);

/* The MACs of the handshake: HMAC-SHA256 under the secret of a role label and both nonces, the
 * peer's challenge first ("hv-actor-v1 caller" || actor nonce || caller nonce for the caller,
 * "hv-actor-v1 actor" || caller nonce || actor nonce for the actor), so that one side's answer
 * can never be replayed as the other's. */
void hv__actor_mac(const char *secret, int actor_side, const uint8_t first[HV__ACTOR_NONCE],
                   const uint8_t second[HV__ACTOR_NONCE], uint8_t out[HV__ACTOR_MAC]);

/* Fills a nonce from the kernel's random source. HV_EIO if it is unavailable. */
hv_err hv__actor_nonce(uint8_t out[HV__ACTOR_NONCE]);

/* Milliseconds left until deadline (an hv_now_ms value), at least 0. */
int hv__actor_ms_left(uint64_t deadline);

/* Blocking I/O on a socket (blocking or not) up to an hv_now_ms deadline: all len bytes or an
 * error (HV_ETIMEDOUT, HV_ECLOSED at end of stream, HV_EPEER on a reset, HV_EIO). */
hv_err hv__actor_read_full(int fd, void *buf, size_t len, uint64_t deadline);
hv_err hv__actor_write_full(int fd, const void *buf, size_t len, uint64_t deadline);

/* Opens a TCP connection to addr ("host:port") with TCP_NODELAY, within the deadline; *fd_out is
 * a blocking socket. Errors: HV_EINVAL (malformed), HV_EUNAVAIL (refused, unreachable, unknown
 * host), HV_ETIMEDOUT. err gets the reason. */
hv_err hv__actor_dial(const char *addr, uint64_t deadline, int *fd_out, char *err, size_t errlen);

/* The caller's side of the handshake on a connected socket: reads HELLO, sends AUTH, checks
 * WELCOME. *max_frame_out gets the actor's frame limit. Errors as hv_actor_connect. */
hv_err hv__actor_client_handshake(int fd, const char *secret, uint64_t deadline,
                                  uint32_t *max_frame_out, char *err, size_t errlen);

/* ---- re-resolving handles (actor_client.c; actor_lookup.c makes the resolver) ------------------------------------ */

typedef struct hv__actor_resolver_s hv__actor_resolver_t;

/* Asks the head for r's actor until it is alive (bounded by timeout_ms, polling every 100 ms)
 * and opens a connection to it: *fd, *max_frame, its address and its max_call_retries. Stops
 * early (HV_ECANCELED) once *cancel is set (may be NULL). actor_lookup.c's, handed to the
 * handle in the resolver, so that actor_client.c re-resolves without calling back into it. */
typedef hv_err (*hv__actor_resolve_fn)(const hv__actor_resolver_t *r, uint32_t timeout_ms,
                                       const hv_actor_connect_config_t *cfg, volatile int *cancel,
                                       int *fd, uint32_t *max_frame, char *addr, size_t addrlen,
                                       uint32_t *max_call_retries, char *err, size_t errlen);

/* What a handle from hv_actor_lookup keeps to find its actor again after a move or a restart.
 * cred is a credential for the head: never logged, wiped when the handle is freed. */
struct hv__actor_resolver_s {
    hv__actor_resolve_fn resolve_open; /* how (actor_lookup.c) */
    char head[256];
    char cred[HV__ACTOR_CRED_MAX];
    char ns[64];
    char name[64];
};

/* The fate of one call still pending when its connection ended (pure; actor_client.c):
 *  RESEND          it never ran (the actor's GOAWAY said so) and the handle can re-resolve, or
 *                  its outcome is unknown and a retry is left (sends <= max_retries): queued
 *                  and sent again, in order, once the handle reconnected;
 *  NOT_DELIVERED   it never ran and the handle cannot re-resolve: HV_EUNAVAIL, safe to resend;
 *  IN_DOUBT        sent, outcome unknown, no retry left: HV_EINDOUBT. */
typedef enum hv__actor_fate {
    HV__FATE_RESEND,
    HV__FATE_NOT_DELIVERED,
    HV__FATE_IN_DOUBT
} hv__actor_fate;
hv__actor_fate hv__actor_fate_of(int can_resolve, int goaway, uint64_t goaway_id, uint64_t id,
                                 uint32_t sends, uint32_t max_retries);

/* Dials addr and authenticates with secret (hv_actor_connect without the handle). */
hv_err hv__actor_open(const char *addr, const char *secret, const hv_actor_connect_config_t *cfg,
                      int *fd, uint32_t *max_frame, char *err, size_t errlen);
/* The handle around an open connection fd (taken); res (copied) NULL: it cannot re-resolve. */
hv_err hv__actor_wrap(int fd, const char *addr, uint32_t max_frame,
                      const hv_actor_connect_config_t *cfg, const hv__actor_resolver_t *res,
                      uint32_t max_call_retries, hv_actor_t **out, char *err, size_t errlen);

#endif
