/*
 * hmap_test: the hash index agrees with a plain array model over many random puts, gets and
 * deletes (integer keys from a small range, so that runs collide and deletes shift entries
 * back), string keys are copied (the caller's buffer may change), replacing a key keeps the
 * count, and a failed allocation leaves the map as it was. `hmap_test <case>` runs one case.
 */
#include "hmap.h"
#include "hv_check.h"
#include "mem.h"

#include <stdio.h>
#include <stdlib.h>

#define KEYS 600

static uint64_t rng = 88172645463325252ULL;
static uint64_t next_rand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void case_u64_model(void) {
    static int vals[KEYS];
    void *model[KEYS] = {0};
    hv_hmap_t m;
    hv_hmap_init(&m);
    size_t live = 0;
    for (int step = 0; step < 200000; step++) {
        uint64_t k = next_rand() % KEYS;
        switch (next_rand() % 3) {
        case 0:
            CHECK_RC(hv_hmap_put_u64(&m, k, &vals[k]), HV_OK);
            live += model[k] == NULL;
            model[k] = &vals[k];
            break;
        case 1: {
            void *got = hv_hmap_del_u64(&m, k);
            CHECK(got == model[k]);
            live -= model[k] != NULL;
            model[k] = NULL;
            break;
        }
        default:
            CHECK(hv_hmap_get_u64(&m, k) == model[k]);
        }
        if (step % 5000 == 0) {
            CHECK_EQ(hv_hmap_count(&m), live);
            for (uint64_t j = 0; j < KEYS; j++) {
                CHECK(hv_hmap_get_u64(&m, j) == model[j]);
            }
        }
    }
    CHECK_EQ(hv_hmap_count(&m), live);
    hv_hmap_fini(&m);
    CHECK(hv_hmap_get_u64(&m, 1) == NULL);
}

static void case_str_keys(void) {
    hv_hmap_t m;
    hv_hmap_init(&m);
    static int vals[1000];
    char buf[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(buf, sizeof(buf), "node-%d", i);
        CHECK_RC(hv_hmap_put_str(&m, buf, &vals[i]), HV_OK);
    }
    snprintf(buf, sizeof(buf), "changed"); /* the map holds its own copies */
    CHECK_EQ(hv_hmap_count(&m), 1000);
    for (int i = 0; i < 1000; i++) {
        snprintf(buf, sizeof(buf), "node-%d", i);
        CHECK(hv_hmap_get_str(&m, buf) == &vals[i]);
    }
    CHECK(hv_hmap_get_str(&m, "node-1000") == NULL);
    CHECK(hv_hmap_get_str(&m, NULL) == NULL);
    CHECK_RC(hv_hmap_put_str(&m, "node-7", &vals[0]), HV_OK); /* replace */
    CHECK_EQ(hv_hmap_count(&m), 1000);
    CHECK(hv_hmap_get_str(&m, "node-7") == &vals[0]);
    for (int i = 0; i < 1000; i += 2) {
        snprintf(buf, sizeof(buf), "node-%d", i);
        CHECK(hv_hmap_del_str(&m, buf) != NULL);
    }
    CHECK_EQ(hv_hmap_count(&m), 500);
    for (int i = 0; i < 1000; i++) {
        snprintf(buf, sizeof(buf), "node-%d", i);
        CHECK((hv_hmap_get_str(&m, buf) != NULL) == (i % 2 == 1));
    }
    CHECK(hv_hmap_del_str(&m, "absent") == NULL);
    CHECK_RC(hv_hmap_put_str(&m, "x", NULL), HV_EINVAL);
    hv_hmap_fini(&m);
}

static void case_enomem(void) {
    hv_hmap_t m;
    hv_hmap_init(&m);
    static int v;
    hv_mem_fail_after(1);
    CHECK_RC(hv_hmap_put_u64(&m, 5, &v), HV_ENOMEM);
    CHECK_EQ(hv_hmap_count(&m), 0);
    CHECK(hv_hmap_get_u64(&m, 5) == NULL);
    for (uint64_t k = 0; k < 8; k++) { /* fills the first table to half */
        CHECK_RC(hv_hmap_put_u64(&m, k, &v), HV_OK);
    }
    hv_mem_fail_after(1); /* the growth fails */
    CHECK_RC(hv_hmap_put_u64(&m, 100, &v), HV_ENOMEM);
    CHECK_EQ(hv_hmap_count(&m), 8);
    CHECK(hv_hmap_get_u64(&m, 100) == NULL);
    hv_mem_fail_after(1); /* the string map's key copy fails */
    hv_hmap_t s;
    hv_hmap_init(&s);
    CHECK_RC(hv_hmap_put_str(&s, "a", &v), HV_ENOMEM);
    CHECK_EQ(hv_hmap_count(&s), 0);
    hv_mem_fail_after(0);
    hv_hmap_fini(&s);
    hv_hmap_fini(&m);
}

HV_CHECK_MAIN(NULL, NULL, {"u64_model", case_u64_model}, {"str_keys", case_str_keys},
              {"enomem", case_enomem})
