/* copygrant: see copygrant.h. */
#include "copygrant.h"

#include <stdio.h>
#include <string.h>

#include "sha256.h"

void hv_copygrant_make(const char *secret, const hv_copygrant_t *g, char out[HV_COPYGRANT_HEX]) {
    char msg[200];
    int len = snprintf(msg, sizeof(msg), "copy:%s:%llu:%llu:%u:%llu:%llu:%llu",
                       g->verb == HV_COPYGRANT_PUT     ? "put"
                       : g->verb == HV_COPYGRANT_FETCH ? "fetch"
                                                       : "none",
                       (unsigned long long)g->keeper_node, (unsigned long long)g->job_id,
                       g->generation, (unsigned long long)g->commit, (unsigned long long)g->size,
                       (unsigned long long)g->expires_ms);
    hv_hmac_sha256_t h;
    uint8_t mac[32];
    hv_hmac_sha256_init(&h, secret, secret != NULL ? strlen(secret) : 0);
    hv_hmac_sha256_update(&h, msg, (size_t)len);
    hv_hmac_sha256_final(&h, mac);
    hv_sha256_hex(mac, out);
    memset(mac, 0, sizeof(mac));
}

hv_err hv_copygrant_check(const char *secret, const hv_copygrant_t *g, const char *grant,
                          uint64_t now_ms) {
    if (secret == NULL || secret[0] == '\0' || grant == NULL) {
        return HV_EAUTH;
    }
    char want[HV_COPYGRANT_HEX];
    hv_copygrant_make(secret, g, want);
    size_t lw = strlen(want), lg = strlen(grant);
    unsigned char diff = (unsigned char)(lw != lg);
    for (size_t i = 0; i < lw; i++) {
        diff |= (unsigned char)(want[i] ^ (i < lg ? grant[i] : 0));
    }
    if (diff != 0) {
        return HV_EAUTH;
    }
    return g->expires_ms > now_ms ? HV_OK : HV_EPERM;
}
