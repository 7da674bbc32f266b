/* creds: see creds.h. */
#include "creds.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "sha256.h"

#define CREDS_MAC_HEX 32 /* 128 bits of the HMAC, in hex */

void hv_creds_wipe(void *p, size_t n) {
    volatile unsigned char *v = p;
    for (size_t i = 0; i < n; i++) {
        v[i] = 0;
    }
}

void hv_creds_init(hv_creds_t *c, const uint8_t key[HV_CREDS_KEY_BYTES]) {
    hv_creds_wipe(c, sizeof(*c));
    memcpy(c->key, key, HV_CREDS_KEY_BYTES);
}

hv_err hv_creds_set_epoch(hv_creds_t *c, const char *epoch) {
    if (epoch == NULL || strlen(epoch) > HV_CREDS_EPOCH_MAX || strchr(epoch, ':') != NULL) {
        return HV_EINVAL;
    }
    snprintf(c->epoch, sizeof(c->epoch), "%s", epoch);
    return HV_OK;
}

int hv_creds_equal(const char *want, const char *given) {
    size_t lw = strlen(want), lg = strlen(given);
    unsigned char diff = (unsigned char)(lw != lg);
    for (size_t i = 0; i < lw; i++) {
        diff |= (unsigned char)(want[i] ^ (i < lg ? given[i] : 0));
    }
    return diff == 0;
}

/* HMAC-SHA256 (RFC 2104) of "<epoch>:" + msg ("" + msg for the legacy epoch "") under the head
 * key; hex of the first 128 bits into out[33]. */
static void creds_mac(const hv_creds_t *c, const char *msg, char out[CREDS_MAC_HEX + 1]) {
    uint8_t pad[64], inner[32], full[32];
    hv_sha256_t h;
    memset(pad, 0x36, sizeof(pad));
    for (size_t i = 0; i < HV_CREDS_KEY_BYTES; i++) {
        pad[i] ^= c->key[i];
    }
    hv_sha256_init(&h);
    hv_sha256_update(&h, pad, sizeof(pad));
    if (c->epoch[0] != '\0') {
        hv_sha256_update(&h, c->epoch, strlen(c->epoch));
        hv_sha256_update(&h, ":", 1);
    }
    hv_sha256_update(&h, msg, strlen(msg));
    hv_sha256_final(&h, inner);
    memset(pad, 0x5c, sizeof(pad));
    for (size_t i = 0; i < HV_CREDS_KEY_BYTES; i++) {
        pad[i] ^= c->key[i];
    }
    hv_sha256_init(&h);
    hv_sha256_update(&h, pad, sizeof(pad));
    hv_sha256_update(&h, inner, sizeof(inner));
    hv_sha256_final(&h, full);
    char hex[65];
    hv_sha256_hex(full, hex);
    memcpy(out, hex, CREDS_MAC_HEX);
    out[CREDS_MAC_HEX] = '\0';
    hv_creds_wipe(pad, sizeof(pad));
    hv_creds_wipe(inner, sizeof(inner));
}

void hv_creds_node(const hv_creds_t *c, uint64_t node_id, uint64_t incarnation, char *out) {
    char msg[80], mac[CREDS_MAC_HEX + 1];
    snprintf(msg, sizeof(msg), "node:%" PRIu64 ":%" PRIu64, node_id, incarnation);
    creds_mac(c, msg, mac);
    snprintf(out, HV_CREDS_MAX, "hvn_%" PRIu64 "_%" PRIx64 "_%s", node_id, incarnation, mac);
}

void hv_creds_worker(const hv_creds_t *c, uint64_t job_id, uint64_t worker_id, char *out) {
    char msg[80], mac[CREDS_MAC_HEX + 1];
    snprintf(msg, sizeof(msg), "worker:%" PRIu64 ":%" PRIu64, job_id, worker_id);
    creds_mac(c, msg, mac);
    snprintf(out, HV_CREDS_MAX, "hvw_%" PRIu64 "_%" PRIu64 "_%s", job_id, worker_id, mac);
}

void hv_creds_actor(const hv_creds_t *c, uint64_t actor_id, char *out) {
    char msg[80], mac[CREDS_MAC_HEX + 1];
    snprintf(msg, sizeof(msg), "actor:%" PRIu64, actor_id);
    creds_mac(c, msg, mac);
    snprintf(out, HV_CREDS_MAX, "hva_%" PRIu64 "_%s", actor_id, mac);
}

void hv_creds_instance(const hv_creds_t *c, uint64_t instance, char *out) {
    char msg[80], mac[CREDS_MAC_HEX + 1];
    snprintf(msg, sizeof(msg), "instance:%" PRIu64, instance);
    creds_mac(c, msg, mac);
    snprintf(out, HV_CREDS_MAX, "hvi_%" PRIu64 "_%s", instance, mac);
}

/* Parses "<dec>_" (base 10) or "<hex>_" (base 16) at *p; advances past the '_'. */
static int parse_num(const char **p, int base, uint64_t *out) {
    const char *s = *p;
    uint64_t v = 0;
    size_t n = 0;
    for (; *s != '_' && *s != '\0'; s++, n++) {
        int d;
        if (*s >= '0' && *s <= '9') {
            d = *s - '0';
        } else if (base == 16 && *s >= 'a' && *s <= 'f') {
            d = *s - 'a' + 10;
        } else {
            return 0;
        }
        if (n >= (base == 10 ? 19u : 16u)) {
            return 0;
        }
        v = v * (uint64_t)base + (uint64_t)d;
    }
    if (*s != '_' || n == 0) {
        return 0;
    }
    *p = s + 1;
    *out = v;
    return 1;
}

int hv_creds_node_id(const hv_creds_t *c, const char *token, uint64_t *node_id,
                     uint64_t *incarnation) {
    if (token == NULL || strncmp(token, "hvn_", 4) != 0) {
        return 0;
    }
    const char *p = token + 4;
    uint64_t node, inc;
    char want[HV_CREDS_MAX];
    if (!parse_num(&p, 10, &node) || !parse_num(&p, 16, &inc)) {
        return 0;
    }
    hv_creds_node(c, node, inc, want);
    if (!hv_creds_equal(want, token)) {
        return 0;
    }
    *node_id = node;
    *incarnation = inc;
    return 1;
}

int hv_creds_worker_id(const hv_creds_t *c, const char *token, uint64_t *job_id,
                       uint64_t *worker_id) {
    if (token == NULL || strncmp(token, "hvw_", 4) != 0) {
        return 0;
    }
    const char *p = token + 4;
    uint64_t job, worker;
    char want[HV_CREDS_MAX];
    if (!parse_num(&p, 10, &job) || !parse_num(&p, 10, &worker)) {
        return 0;
    }
    hv_creds_worker(c, job, worker, want);
    if (!hv_creds_equal(want, token)) {
        return 0;
    }
    *job_id = job;
    *worker_id = worker;
    return 1;
}

int hv_creds_instance_id(const hv_creds_t *c, const char *token, uint64_t *instance) {
    if (token == NULL || strncmp(token, "hvi_", 4) != 0) {
        return 0;
    }
    const char *p = token + 4;
    uint64_t id;
    char want[HV_CREDS_MAX];
    if (!parse_num(&p, 10, &id)) {
        return 0;
    }
    hv_creds_instance(c, id, want);
    if (!hv_creds_equal(want, token)) {
        return 0;
    }
    *instance = id;
    return 1;
}

/* ---- join tokens ---------------------------------------------------------------------------- */

int hv_creds_jtoken_id_valid(const char *id) {
    if (id == NULL || strlen(id) != HV_JTOKEN_ID_LEN) {
        return 0;
    }
    for (size_t i = 0; i < HV_JTOKEN_ID_LEN; i++) {
        if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'z'))) {
            return 0;
        }
    }
    return 1;
}

int hv_creds_jtoken_parse(const char *token, char *id, char *sha) {
    if (token == NULL || strncmp(token, "hvj_", 4) != 0 || strlen(token) != HV_JTOKEN_MAX - 1 ||
        token[4 + HV_JTOKEN_ID_LEN] != '.') {
        return 0;
    }
    char idbuf[HV_JTOKEN_ID_LEN + 1];
    memcpy(idbuf, token + 4, HV_JTOKEN_ID_LEN);
    idbuf[HV_JTOKEN_ID_LEN] = '\0';
    const char *secret = token + 4 + HV_JTOKEN_ID_LEN + 1;
    if (!hv_creds_jtoken_id_valid(idbuf)) {
        return 0;
    }
    for (size_t i = 0; i < HV_JTOKEN_SECRET_LEN; i++) {
        char ch = secret[i];
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) {
            return 0;
        }
    }
    hv_sha256_hex_of(secret, HV_JTOKEN_SECRET_LEN, sha);
    memcpy(id, idbuf, sizeof(idbuf));
    return 1;
}

hv_jtoken_verdict hv_creds_jtoken_check(const char *want, const char *given, uint64_t expires_ms,
                                        uint32_t max_uses, uint32_t uses, uint64_t revoked_ms,
                                        uint64_t now_ms) {
    if (want == NULL || given == NULL || want[0] == '\0' || !hv_creds_equal(want, given)) {
        return HV_JTOKEN_WRONG;
    }
    if (revoked_ms != 0) {
        return HV_JTOKEN_REVOKED;
    }
    if (expires_ms != 0 && now_ms >= expires_ms) {
        return HV_JTOKEN_EXPIRED;
    }
    if (max_uses != 0 && uses >= max_uses) {
        return HV_JTOKEN_USED_UP;
    }
    return HV_JTOKEN_OK;
}

const char *hv_creds_jtoken_verdict_name(hv_jtoken_verdict v) {
    switch (v) {
    case HV_JTOKEN_OK:
        return "valid";
    case HV_JTOKEN_WRONG:
        return "wrong secret";
    case HV_JTOKEN_REVOKED:
        return "revoked";
    case HV_JTOKEN_EXPIRED:
        return "expired";
    case HV_JTOKEN_USED_UP:
        return "used up";
    }
    return "invalid";
}
