/*
 * creds_test: the credential maths table by table: derived credentials (stable for one key and
 * epoch, useless under another, any change to the numbers or the mac refused), the enrollment
 * credentials of autoscaler instances, the epoch, the join tokens' form and verdict, and the
 * constant-time comparison. `creds_test CASE` runs one case.
 */
#include "creds.h"
#include "hv_check.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static void setup_key(hv_creds_t *c, uint8_t fill) {
    uint8_t key[HV_CREDS_KEY_BYTES];
    memset(key, fill, sizeof(key));
    hv_creds_init(c, key);
}

/* Each kind made and recognised, with its numbers; forged, truncated, extended or foreign ones
 * are not. */
static void case_derived(void) {
    hv_creds_t a, b;
    setup_key(&a, 1);
    setup_key(&b, 2);
    char w[HV_CREDS_MAX], w2[HV_CREDS_MAX], n[HV_CREDS_MAX];
    hv_creds_worker(&a, 8, 3, w);
    hv_creds_worker(&a, 8, 3, w2);
    CHECK_STR(w, w2);
    CHECK(strncmp(w, "hvw_8_3_", 8) == 0);
    uint64_t x = 0, y = 0;
    CHECK_EQ(hv_creds_worker_id(&a, w, &x, &y), 1);
    CHECK_EQ(x, 8);
    CHECK_EQ(y, 3);
    CHECK_EQ(hv_creds_node_id(&a, w, &x, &y), 0); /* a worker's is no node's */
    char forged[HV_CREDS_MAX + 8];
    snprintf(forged, sizeof(forged), "hvw_9_3_%s", w + 8);
    CHECK_EQ(hv_creds_worker_id(&a, forged, &x, &y), 0);
    snprintf(forged, sizeof(forged), "%s", w);
    forged[strlen(forged) - 1] = forged[strlen(forged) - 1] == '0' ? '1' : '0';
    CHECK_EQ(hv_creds_worker_id(&a, forged, &x, &y), 0);
    snprintf(forged, sizeof(forged), "%.*s", (int)strlen(w) - 1, w);
    CHECK_EQ(hv_creds_worker_id(&a, forged, &x, &y), 0);
    snprintf(forged, sizeof(forged), "%sx", w);
    CHECK_EQ(hv_creds_worker_id(&a, forged, &x, &y), 0);
    static const char *const junk[] = {
        "hvw__3_00", "hvw_99999999999999999999_3_00", "hvn_1_zz_00", "", "hvw_", NULL};
    for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
        CHECK_EQ(hv_creds_worker_id(&a, junk[i], &x, &y), 0);
        CHECK_EQ(hv_creds_node_id(&a, junk[i], &x, &y), 0);
    }
    CHECK_EQ(hv_creds_worker_id(&b, w, &x, &y), 0);
    hv_creds_node(&a, 12, 0xdeadbeef, n);
    CHECK(strncmp(n, "hvn_12_deadbeef_", 16) == 0);
    CHECK_EQ(hv_creds_node_id(&a, n, &x, &y), 1);
    CHECK_EQ(x, 12);
    CHECK_EQ(y, 0xdeadbeef);
    CHECK_EQ(hv_creds_node_id(&b, n, &x, &y), 0);
    char a1[HV_CREDS_MAX], a2[HV_CREDS_MAX];
    hv_creds_actor(&a, 1, a1);
    hv_creds_actor(&a, 2, a2);
    CHECK(strncmp(a1, "hva_1_", 6) == 0);
    CHECK(strcmp(a1, a2) != 0);
    hv_creds_actor(&b, 1, a2);
    CHECK(strcmp(a1, a2) != 0);
}

/* Enrollment credentials of autoscaler instances: recognised for their own instance only, and
 * any change (another id, another key, a flipped mac) is refused. */
static void case_instance(void) {
    hv_creds_t a;
    setup_key(&a, 3);
    char c7[HV_CREDS_MAX], c8[HV_CREDS_MAX];
    hv_creds_instance(&a, 7, c7);
    hv_creds_instance(&a, 8, c8);
    CHECK(strncmp(c7, "hvi_7_", 6) == 0);
    CHECK(strcmp(c7, c8) != 0);
    uint64_t id = 0;
    CHECK_EQ(hv_creds_instance_id(&a, c7, &id), 1);
    CHECK_EQ(id, 7);
    /* instance 8's mac under instance 7's number */
    char forged[HV_CREDS_MAX];
    snprintf(forged, sizeof(forged), "hvi_7_%s", c8 + 6);
    CHECK_EQ(hv_creds_instance_id(&a, forged, &id), 0);
    snprintf(forged, sizeof(forged), "%s", c7);
    forged[strlen(forged) - 1] = forged[strlen(forged) - 1] == '0' ? '1' : '0';
    CHECK_EQ(hv_creds_instance_id(&a, forged, &id), 0);
    CHECK_EQ(hv_creds_instance_id(&a, "hvi_7_", &id), 0);
    CHECK_EQ(hv_creds_instance_id(&a, "hvi__abc", &id), 0);
    CHECK_EQ(hv_creds_instance_id(&a, "", &id), 0);
    CHECK_EQ(hv_creds_instance_id(&a, NULL, &id), 0);
    setup_key(&a, 4); /* another head's key */
    CHECK_EQ(hv_creds_instance_id(&a, c7, &id), 0);
}

/* The epoch: the same key with another epoch recognises none of the old credentials; the
 * legacy epoch "" keeps the MACs of before. */
static void case_epoch(void) {
    hv_creds_t a;
    setup_key(&a, 5);
    char legacy[HV_CREDS_MAX], w[HV_CREDS_MAX], i[HV_CREDS_MAX];
    hv_creds_worker(&a, 1, 1, legacy);
    CHECK_RC(hv_creds_set_epoch(&a, "0123456789abcdef"), HV_OK);
    hv_creds_worker(&a, 1, 1, w);
    hv_creds_instance(&a, 1, i);
    CHECK(strcmp(w, legacy) != 0);
    uint64_t x, y;
    CHECK_EQ(hv_creds_worker_id(&a, w, &x, &y), 1);
    CHECK_EQ(hv_creds_worker_id(&a, legacy, &x, &y), 0);
    CHECK_RC(hv_creds_set_epoch(&a, "fedcba9876543210"), HV_OK); /* a new state.db */
    CHECK_EQ(hv_creds_worker_id(&a, w, &x, &y), 0);
    CHECK_EQ(hv_creds_instance_id(&a, i, &x), 0);
    CHECK_RC(hv_creds_set_epoch(&a, ""), HV_OK);
    CHECK_EQ(hv_creds_worker_id(&a, legacy, &x, &y), 1);
    CHECK_RC(hv_creds_set_epoch(&a, "a:b"), HV_EINVAL);
    CHECK_RC(hv_creds_set_epoch(&a, "0123456789abcdef0123456789abcdef0"), HV_EINVAL);
    CHECK_RC(hv_creds_set_epoch(&a, NULL), HV_EINVAL);
}

/* Join tokens: hvj_<6 letters or digits>.<32 hex digits> parse to the id and the secret's
 * hash; anything else is refused. The check: a wrong secret first, then revoked, expired, used
 * up. */
static void case_jtoken(void) {
    char id[HV_JTOKEN_ID_LEN + 1] = "", sha[65] = "", sha2[65] = "";
    const char *good = "hvj_abc123.0123456789abcdef0123456789abcdef";
    CHECK_EQ(hv_creds_jtoken_parse(good, id, sha), 1);
    CHECK_STR(id, "abc123");
    CHECK_EQ(strlen(sha), 64);
    CHECK_EQ(hv_creds_jtoken_parse("hvj_abc123.0123456789abcdef0123456789abcdee", id, sha2), 1);
    CHECK(strcmp(sha, sha2) != 0);
    const char *bad[] = {
        "",
        "hvj_",
        "hvc_abc123.0123456789abcdef0123456789abcdef",  /* another prefix */
        "hvj_ABC123.0123456789abcdef0123456789abcdef",  /* upper case id */
        "hvj_abc12.30123456789abcdef0123456789abcdef",  /* the dot in the wrong place */
        "hvj_abc123.0123456789abcdef0123456789abcdeg",  /* not hex */
        "hvj_abc123.0123456789abcdef0123456789abcde",   /* short */
        "hvj_abc123.0123456789abcdef0123456789abcdef0", /* long */
        "hvj_abc123_0123456789abcdef0123456789abcdef",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char bid[HV_JTOKEN_ID_LEN + 1] = "x", bsha[65] = "x";
        CHECK_EQ(hv_creds_jtoken_parse(bad[i], bid, bsha), 0);
        CHECK_STR(bid, "x");
    }
    CHECK_EQ(hv_creds_jtoken_parse(NULL, id, sha2), 0);
    CHECK_EQ(hv_creds_jtoken_id_valid("abc123"), 1);
    CHECK_EQ(hv_creds_jtoken_id_valid("abc12"), 0);
    CHECK_EQ(hv_creds_jtoken_id_valid("abc12/"), 0);

    static const struct {
        int same; /* the given hash is the stored one */
        uint64_t expires_ms;
        uint32_t max_uses, uses;
        uint64_t revoked_ms, now_ms;
        hv_jtoken_verdict want;
    } rows[] = {
        {1, 0, 0, 5, 0, 99, HV_JTOKEN_OK},           {1, 1000, 2, 1, 0, 999, HV_JTOKEN_OK},
        {0, 1000, 2, 1, 0, 999, HV_JTOKEN_WRONG},    {0, 1000, 2, 5, 7, 2000, HV_JTOKEN_WRONG},
        {1, 1000, 2, 1, 0, 1000, HV_JTOKEN_EXPIRED}, {1, 1000, 2, 2, 0, 999, HV_JTOKEN_USED_UP},
        {1, 1000, 2, 2, 5, 2000, HV_JTOKEN_REVOKED},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        CHECK_EQ(hv_creds_jtoken_check(sha, rows[i].same ? sha : sha2, rows[i].expires_ms,
                                       rows[i].max_uses, rows[i].uses, rows[i].revoked_ms,
                                       rows[i].now_ms),
                 rows[i].want);
    }
    CHECK_EQ(hv_creds_jtoken_check("", "", 0, 0, 0, 0, 1), HV_JTOKEN_WRONG);
    CHECK_STR(hv_creds_jtoken_verdict_name(HV_JTOKEN_USED_UP), "used up");
    CHECK_STR(hv_creds_jtoken_verdict_name(HV_JTOKEN_OK), "valid");
}

static void case_equal(void) {
    CHECK(hv_creds_equal("abc", "abc"));
    CHECK(!hv_creds_equal("abc", "abd"));
    CHECK(!hv_creds_equal("abc", "ab"));
    CHECK(!hv_creds_equal("", "a"));
    CHECK(hv_creds_equal("", ""));
}

HV_CHECK_MAIN(NULL, NULL, {"derived", case_derived}, {"instance", case_instance},
              {"epoch", case_epoch}, {"jtoken", case_jtoken}, {"equal", case_equal})
