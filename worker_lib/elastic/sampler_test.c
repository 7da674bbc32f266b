/*
 * sampler_test: the sampler's arithmetic alone (sampler.h), no world: the share of a window
 * that each rank takes (sizes add up, shares are contiguous, the remainder goes to the first
 * ranks), the global batch at each world size, and the per-epoch permutation (a permutation,
 * the same for the same (seed, epoch), different across epochs and seeds, the identity without
 * shuffle, roughly uniform), and state / sampler creation under allocation failures. The end-to-end behaviour (exact epochs across failures and growth)
 * is elastic_test's.
 */
#include <stdint.h>
#include <string.h>

#include "hvtest.h"
#include "mem.h"
#include "sampler.h"

static void test_share(void) {
    for (uint64_t len = 0; len < 70; len++) {
        for (int size = 1; size <= 9; size++) {
            uint64_t next = 0, prev_n = UINT64_MAX;
            for (int r = 0; r < size; r++) {
                uint64_t off, n;
                hv__sampler_share(len, size, r, &off, &n);
                ASSERT_EQ_INT(off, next); // contiguous, in rank order
                ASSERT_TRUE(n == len / (uint64_t)size || n == len / (uint64_t)size + 1);
                ASSERT_TRUE(n <= prev_n); // the larger shares come first
                prev_n = n;
                next = off + n;
            }
            ASSERT_EQ_INT(next, len); // the whole window, once
        }
    }
    uint64_t off, n;
    hv__sampler_share(10, 4, 1, &off, &n); // 3 3 2 2
    ASSERT_EQ_INT(off, 3);
    ASSERT_EQ_INT(n, 3);
    hv__sampler_share(10, 4, 3, &off, &n);
    ASSERT_EQ_INT(off, 8);
    ASSERT_EQ_INT(n, 2);
}

static void test_global(void) {
    hv_sampler_config_t c = HV_SAMPLER_CONFIG_INIT;
    c.batch = 96;
    for (int size = 1; size <= 8; size++) {
        ASSERT_EQ_INT(hv__sampler_global(&c, size), 96); // constant across sizes
    }
    c.global_batch = 0;
    ASSERT_EQ_INT(hv__sampler_global(&c, 3), 288); // per rank: grows with the world
}

static int is_permutation(const uint64_t *p, uint64_t n) {
    unsigned char *seen = hv_calloc(n ? n : 1, 1);
    int ok = seen != NULL;
    for (uint64_t i = 0; ok && i < n; i++) {
        ok = p[i] < n && !seen[p[i]];
        if (ok) {
            seen[p[i]] = 1;
        }
    }
    hv_free(seen);
    return ok;
}

static void test_permutation(void) {
    const uint64_t n = 10007;
    uint64_t *a = hv_malloc(n * 8), *b = hv_malloc(n * 8);
    ASSERT_TRUE(a != NULL && b != NULL);
    hv__sampler_permutation(42, 0, 1, n, a);
    ASSERT_TRUE(is_permutation(a, n));
    hv__sampler_permutation(42, 0, 1, n, b);
    ASSERT_TRUE(memcmp(a, b, n * 8) == 0); // deterministic: every rank computes the same
    uint64_t fixed = 0;
    for (uint64_t i = 0; i < n; i++) {
        fixed += a[i] == i;
    }
    ASSERT_TRUE(fixed < 10); // about 1 expected
    hv__sampler_permutation(42, 1, 1, n, b);
    ASSERT_TRUE(is_permutation(b, n));
    ASSERT_TRUE(memcmp(a, b, n * 8) != 0); // a new order each epoch
    hv__sampler_permutation(43, 0, 1, n, b);
    ASSERT_TRUE(memcmp(a, b, n * 8) != 0); // and per seed
    hv__sampler_permutation(42, 5, 0, n, b);
    for (uint64_t i = 0; i < n; i++) {
        ASSERT_EQ_INT(b[i], i); // no shuffle: index order
    }
    hv__sampler_permutation(1, 0, 1, 1, b);
    ASSERT_EQ_INT(b[0], 0);
    hv_free(a);
    hv_free(b);
}

/* Where element 0 lands over many epochs of a small permutation: each of the 8 places about
 * equally often (a biased shuffle fails this by far). */
static void test_uniform(void) {
    uint64_t p[8];
    int hits[8] = {0};
    const int trials = 80000;
    for (int t = 0; t < trials; t++) {
        hv__sampler_permutation(9, (uint64_t)t, 1, 8, p);
        for (int i = 0; i < 8; i++) {
            if (p[i] == 0) {
                hits[i]++;
            }
        }
    }
    for (int i = 0; i < 8; i++) {
        // expected 10000, sd ~94: +-800 is beyond 8 sd
        ASSERT_TRUE(hits[i] > 9200 && hits[i] < 10800);
    }
}

/* Creating a state and a sampler with the n-th allocation failing, for every n: HV_ENOMEM or
 * HV_OK, never a crash, a leak or a buffer left registered into freed memory (ASan builds). */
static void test_oom(void) {
    int ok = 0;
    for (long n = 1; n < 40 && !ok; n++) {
        uint64_t step = 0;
        float w[64];
        hv_state_t *st = NULL;
        hv_sampler_t *s = NULL;
        hv_sampler_config_t cfg = HV_SAMPLER_CONFIG_INIT;
        cfg.num_samples = 1000;
        hv_mem_fail_after(n);
        hv_err rc = hv_state_create(&st);
        if (rc == HV_OK) {
            rc = hv_state_add_buffer(st, "w", w, sizeof(w));
        }
        if (rc == HV_OK) {
            rc = hv_state_add_u64(st, "step", &step);
        }
        if (rc == HV_OK) {
            rc = hv_sampler_create(st, "train", &cfg, &s);
        }
        hv_mem_fail_after(0);
        ASSERT_TRUE(rc == HV_OK || rc == HV_ENOMEM);
        if (rc == HV_ENOMEM && st != NULL) {
            // What did register is consistent: a second sampler of another name still works.
            ASSERT_RC(hv_sampler_create(st, "other", &cfg, &s), HV_OK);
        }
        ok = rc == HV_OK;
        hv_state_destroy(st);
    }
    ASSERT_TRUE(ok);
}

static const hvtest_case_t cases[] = {
    {"share", test_share},     {"global", test_global}, {"permutation", test_permutation},
    {"uniform", test_uniform}, {"oom", test_oom},
};

HVTEST_MAIN(cases)
