/*
 * copygrant_test: the grant a member shows a keeper agent (issue 28 §3): a grant made for one
 * copy opens exactly that copy with that verb at that keeper until it expires; any other field,
 * another secret, a changed or missing grant is refused as unauthenticated, an expired one as
 * not permitted. The MAC is checked against an HMAC-SHA256 computed here from its definition.
 */
#include "copygrant.h"
#include "hv_check.h"
#include "sha256.h"

#include <stdio.h>
#include <string.h>

static const char *const SECRET = "hvn_5_abc_0123456789abcdef0123456789abcdef";

static hv_copygrant_t base(void) {
    hv_copygrant_t g = {HV_COPYGRANT_PUT, 5, 7, 3, 40, 64u << 20, 1000000};
    return g;
}

static void case_definition(void) {
    hv_copygrant_t g = base();
    char got[HV_COPYGRANT_HEX];
    hv_copygrant_make(SECRET, &g, got);
    const char *msg = "copy:put:5:7:3:40:67108864:1000000";
    hv_hmac_sha256_t h;
    uint8_t mac[32];
    char want[65];
    hv_hmac_sha256_init(&h, SECRET, strlen(SECRET));
    hv_hmac_sha256_update(&h, msg, strlen(msg));
    hv_hmac_sha256_final(&h, mac);
    hv_sha256_hex(mac, want);
    CHECK_STR(got, want);
    CHECK_EQ(strlen(got), 64);
}

static void case_check(void) {
    hv_copygrant_t g = base();
    char grant[HV_COPYGRANT_HEX];
    hv_copygrant_make(SECRET, &g, grant);
    CHECK_EQ(hv_copygrant_check(SECRET, &g, grant, 999999), HV_OK);
    CHECK_EQ(hv_copygrant_check(SECRET, &g, grant, 1000000), HV_EPERM); /* expired */
    CHECK_EQ(hv_copygrant_check(SECRET, &g, NULL, 0), HV_EAUTH);
    CHECK_EQ(hv_copygrant_check(SECRET, &g, "", 0), HV_EAUTH);
    CHECK_EQ(hv_copygrant_check(NULL, &g, grant, 0), HV_EAUTH);
    CHECK_EQ(hv_copygrant_check("", &g, grant, 0), HV_EAUTH);
    CHECK_EQ(hv_copygrant_check("hvn_6_abc_other", &g, grant, 0), HV_EAUTH);
    char longer[HV_COPYGRANT_HEX + 1];
    snprintf(longer, sizeof(longer), "%s0", grant);
    CHECK_EQ(hv_copygrant_check(SECRET, &g, longer, 0), HV_EAUTH);
    char flipped[HV_COPYGRANT_HEX];
    memcpy(flipped, grant, sizeof(flipped));
    flipped[10] = flipped[10] == 'a' ? 'b' : 'a';
    CHECK_EQ(hv_copygrant_check(SECRET, &g, flipped, 0), HV_EAUTH);
    /* Every field is bound: a change of any one refuses the grant. */
    for (int f = 0; f < 7; f++) {
        hv_copygrant_t o = base();
        switch (f) {
        case 0:
            o.verb = HV_COPYGRANT_FETCH;
            break;
        case 1:
            o.keeper_node = 6;
            break;
        case 2:
            o.job_id = 8;
            break;
        case 3:
            o.generation = 4;
            break;
        case 4:
            o.commit = 41;
            break;
        case 5:
            o.size = 1;
            break;
        default:
            o.expires_ms = 2000000; /* a member cannot extend its grant */
            break;
        }
        CHECK_EQ(hv_copygrant_check(SECRET, &o, grant, 0), HV_EAUTH);
    }
}

HV_CHECK_MAIN(NULL, NULL, {"definition", case_definition}, {"check", case_check})
