/*
 * copygrant: the grant that lets a job's member reach another node's agent for a copy of the
 * job's state (issue 28 §3, docs/RELIABILITY.md "Copies kept by peers"). The keeper's agent
 * listens for copies from other nodes; every call there must show who may do what. The head,
 * which the member and the keeper each already trust over their own authenticated channels,
 * makes the grant; the keeper checks it on every call without asking the head.
 *
 *   grant = hex(HMAC-SHA256(keeper's node credential,
 *               "copy:<verb>:<keeper node>:<job>:<generation>:<commit>:<size>:<expires ms>"))
 *
 * keyed with the keeper agent's node credential (hvn_..., head/core/creds.h): a secret only the
 * head and that agent hold, so a grant opens one verb on one copy of one job at one keeper until
 * it expires, and a member of another job (or a copy of another size) cannot reuse it. The
 * fields travel in the call beside the grant; the keeper recomputes the MAC from them. Pure: no
 * I/O, no clock (now is the caller's), constant-time comparison; reentrant.
 */
#ifndef HV_COMMON_COPYGRANT_H
#define HV_COMMON_COPYGRANT_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define HV_COPYGRANT_HEX 65 /* 64 hex digits and a NUL */

typedef enum hv_copygrant_verb {
    HV_COPYGRANT_PUT = 1,   /* send (keep) this copy */
    HV_COPYGRANT_FETCH = 2, /* read it back (a resume, a joiner's sync) */
} hv_copygrant_verb_t;

typedef struct hv_copygrant_s {
    hv_copygrant_verb_t verb;
    uint64_t keeper_node;
    uint64_t job_id;
    uint32_t generation;
    uint64_t commit, size;
    uint64_t expires_ms; /* wall clock, ms since the epoch */
} hv_copygrant_t;

/* Makes the grant for g under secret (the keeper's node credential, NUL-terminated) into out. */
void hv_copygrant_make(const char *secret, const hv_copygrant_t *g, char out[HV_COPYGRANT_HEX]);

/* Checks a grant shown with the fields g at now_ms: HV_OK; HV_EAUTH (no secret, no grant, or the
 * MAC does not match: not made by the head for these fields); HV_EPERM (a true grant that has
 * expired: expires_ms <= now_ms). */
hv_err hv_copygrant_check(const char *secret, const hv_copygrant_t *g, const char *grant,
                          uint64_t now_ms);

#endif
