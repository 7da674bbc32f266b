/*
 * creds: the head's credential maths, pure (no I/O, no clock): the MACs that make and recognise
 * the credentials the head derives under its key, and the form and verdict of join tokens.
 * services/auth.c (the access table, the key and token files) and the driver (the enrollment
 * credential of an autoscaler instance, the admission of a Join) build on it.
 *
 * Derived credentials, recognisable by their prefix so that a leaked value says what it opens:
 *   hvn_<node>_<incarnation hex>_<mac>  a node's agent process
 *   hvw_<job>_<worker>_<mac>            one worker of one job
 *   hva_<actor>_<mac>                   one actor (what its callers and its process share)
 *   hvi_<instance>_<mac>                the enrollment of one autoscaler instance
 * mac = HMAC-SHA256(head key, "<epoch>:" + ("node:<node>:<incarnation>" | "worker:<job>:<worker>"
 * | "actor:<actor>" | "instance:<instance>")), 128 bits in hex. The epoch is the state database's
 * (a new state.db makes every credential of the old one invalid); the legacy epoch "" adds no
 * prefix, so the MACs of databases from before epochs stay as they were.
 *
 * Join tokens (`hvctl token create`, the model: Kubernetes bootstrap tokens) are
 *   hvj_<id>.<secret>   id: 6 letters or digits, may be shown; secret: 32 hex digits, shown once.
 * The head stores only the secret's SHA-256, with the token's expiry, uses and revocation.
 *
 * Every comparison with a secret is constant-time. Threads: any (no shared state).
 */
#ifndef HV_HEAD_CORE_CREDS_H
#define HV_HEAD_CORE_CREDS_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define HV_CREDS_KEY_BYTES 32
#define HV_CREDS_MAX 128      /* longest derived credential, with its NUL */
#define HV_CREDS_EPOCH_MAX 32 /* characters of a state epoch */

/* What the MACs are keyed with: the head's key (<data_dir>/auth.key) and the state's epoch. */
typedef struct hv_creds_s {
    uint8_t key[HV_CREDS_KEY_BYTES];
    char epoch[HV_CREDS_EPOCH_MAX + 1];
} hv_creds_t;

/* Sets c's key (copied) and the legacy epoch "". */
void hv_creds_init(hv_creds_t *c, const uint8_t key[HV_CREDS_KEY_BYTES]);
/* Sets the epoch mixed into every MAC (copied; at most HV_CREDS_EPOCH_MAX characters and no ':',
 * else HV_EINVAL). Call it before any credential is made. */
hv_err hv_creds_set_epoch(hv_creds_t *c, const char *epoch);

/* Constant-time string equality (both NUL-terminated; the time depends only on the lengths). */
int hv_creds_equal(const char *want, const char *given);
/* Zeroes n bytes at p so that the compiler keeps the writes (for secrets on the stack). */
void hv_creds_wipe(void *p, size_t n);

/* The credentials (out: HV_CREDS_MAX bytes each). */
void hv_creds_node(const hv_creds_t *c, uint64_t node_id, uint64_t incarnation, char *out);
void hv_creds_worker(const hv_creds_t *c, uint64_t job_id, uint64_t worker_id, char *out);
void hv_creds_actor(const hv_creds_t *c, uint64_t actor_id, char *out);
void hv_creds_instance(const hv_creds_t *c, uint64_t instance, char *out);

/* 1 when token is a credential of that kind that c made, with its numbers in the out-params
 * (assigned only then); else 0. A revoked node credential is still recognised here: the access
 * table (services/auth.c) keeps the revocations. */
int hv_creds_node_id(const hv_creds_t *c, const char *token, uint64_t *node_id,
                     uint64_t *incarnation);
int hv_creds_worker_id(const hv_creds_t *c, const char *token, uint64_t *job_id,
                       uint64_t *worker_id);
int hv_creds_instance_id(const hv_creds_t *c, const char *token, uint64_t *instance);

/* ---- join tokens (hvj_<id>.<secret>) ------------------------------------------------------- */

#define HV_JTOKEN_ID_LEN 6
#define HV_JTOKEN_SECRET_LEN 32
#define HV_JTOKEN_MAX (4 + HV_JTOKEN_ID_LEN + 1 + HV_JTOKEN_SECRET_LEN + 1)

/* 1 when token has the form hvj_<id>.<secret>: its id into id (HV_JTOKEN_ID_LEN + 1 bytes) and
 * the hex SHA-256 of its secret into sha (65 bytes); else 0 (nothing written). */
int hv_creds_jtoken_parse(const char *token, char *id, char *sha);
/* 1 when id could be a join token's id (what `hvctl token revoke ID` accepts). */
int hv_creds_jtoken_id_valid(const char *id);

typedef enum hv_jtoken_verdict {
    HV_JTOKEN_OK = 0,
    HV_JTOKEN_WRONG = 1,   /* the secret is not this token's */
    HV_JTOKEN_REVOKED = 2, /* revoked (hvctl token revoke) */
    HV_JTOKEN_EXPIRED = 3, /* past its expiry */
    HV_JTOKEN_USED_UP = 4, /* every use it had is spent */
} hv_jtoken_verdict;

/* The decision for a stored token (want: its secret's hash) and a given secret's hash at
 * now_ms: the hash is compared first (constant-time), so a wrong secret learns nothing of the
 * token's state. expires_ms 0 = never; max_uses 0 = no limit; revoked_ms 0 = not revoked. */
hv_jtoken_verdict hv_creds_jtoken_check(const char *want, const char *given, uint64_t expires_ms,
                                        uint32_t max_uses, uint32_t uses, uint64_t revoked_ms,
                                        uint64_t now_ms);
/* "valid", "wrong secret", "revoked", "expired", "used up". */
const char *hv_creds_jtoken_verdict_name(hv_jtoken_verdict v);

#endif
