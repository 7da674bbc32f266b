/*
 * callfig_test: one actor process's call figures, table by table: which bucket a service time
 * falls in, the file line written and read back (and the lines refused), the check that the
 * histogram holds every call, adding and comparing, and the median and p99 read from the
 * buckets. `callfig_test <case>` runs one case.
 */
#include "callfig.h"
#include "hv_check.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Service times on and around the bounds land in the bucket whose upper bound holds them. */
static void case_bucket(void) {
    static const struct {
        uint64_t ns;
        size_t bucket;
    } rows[] = {
        {0, 0},        {1000, 0},         {1001, 1},         {2000, 1},
        {4999, 2},     {5001, 3},         {999999, 9},       {1000000, 9},
        {1000001, 10}, {10000000000, 21}, {10000000001, 22}, {UINT64_MAX, 22},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_callfig_t f = {0};
        hv_callfig_count(&f, 1, rows[i].ns, 3, 4);
        for (size_t b = 0; b < HV_CALLFIG_BUCKETS; b++) {
            if (f.buckets[b] != (b == rows[i].bucket)) {
                fprintf(stderr, "row %zu: %llu ns in bucket %zu, want %zu\n", i,
                        (unsigned long long)rows[i].ns, b, rows[i].bucket);
                CHECK(0);
            }
        }
    }
    CHECK_EQ(hv_callfig_bound_ns(0), 1000);
    CHECK_EQ(hv_callfig_bound_ns(HV_CALLFIG_BUCKETS - 2), 10000000000ll);
    CHECK(hv_callfig_bound_ns(HV_CALLFIG_BUCKETS - 1) == UINT64_MAX);
}

/* ok and error calls, bytes (an error's message is no result), the time summed. */
static void case_count(void) {
    hv_callfig_t f = {0};
    hv_callfig_count(&f, 1, 1500, 10, 20);
    hv_callfig_count(&f, 0, 3000, 5, 99);
    hv_callfig_count(&f, 1, 500, 0, 1);
    CHECK_EQ(f.ok, 2);
    CHECK_EQ(f.error, 1);
    CHECK_EQ(f.bytes_in, 15);
    CHECK_EQ(f.bytes_out, 21);
    CHECK_EQ(f.service_ns, 5000);
    CHECK_EQ(hv_callfig_calls(&f), 3);
    CHECK_RC(hv_callfig_check(&f), HV_OK);
    f.ok++;
    CHECK_RC(hv_callfig_check(&f), HV_EINVAL);
}

/* The line round-trips, the largest values fit HV_CALLFIG_LINE_MAX, and garbage is refused. */
static void case_line(void) {
    hv_callfig_t f = {0}, g;
    for (int i = 0; i < 1000; i++) {
        hv_callfig_count(&f, i % 7 != 0, (uint64_t)i * 37000, 64, 64);
    }
    char line[HV_CALLFIG_LINE_MAX];
    CHECK_RC(hv_callfig_format(&f, line, sizeof(line)), HV_OK);
    CHECK(strncmp(line, "hv-callfig 1 857 143 64000 54848 ", 33) == 0);
    CHECK_RC(hv_callfig_parse(line, &g), HV_OK);
    CHECK(memcmp(&f, &g, sizeof(f)) == 0);
    line[strlen(line) - 1] = '\0'; // without its newline
    CHECK_RC(hv_callfig_parse(line, &g), HV_OK);

    hv_callfig_t big;
    memset(&big, 0xff, sizeof(big));
    CHECK_RC(hv_callfig_format(&big, line, sizeof(line)), HV_OK);
    CHECK_RC(hv_callfig_format(&big, line, 100), HV_ETOOBIG);

    static const char *bad[] = {
        "",
        "hv-callfig",
        "hv-callfig 2 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0",
        "hv-callfig 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0",     // one short
        "hv-callfig 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0", // one more
        "hv-callfig 1 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0",   // 1 call, none
        "hv-callfig 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 x",
        "hv-callfig 1 0 0 0 0 -1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0",
        "hv-callfig 1 0 0 0 0 99999999999999999999999 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 "
        "0",
        "hv-callfig 1  0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0",
        "hv-callfig 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        hv_err rc = hv_callfig_parse(bad[i], &g);
        if (rc != HV_EINVAL) {
            fprintf(stderr, "bad line %zu was read: '%s'\n", i, bad[i]);
            CHECK(0);
        }
    }
    CHECK_RC(hv_callfig_parse(
                 "hv-callfig 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0", &g),
             HV_OK);
}

/* Adding saturates; ge compares every field, the buckets too. */
static void case_add_ge(void) {
    hv_callfig_t a = {0}, b = {0};
    hv_callfig_count(&a, 1, 100, 1, 1);
    b = a;
    CHECK(hv_callfig_ge(&a, &b) && hv_callfig_ge(&b, &a));
    hv_callfig_count(&b, 1, 100, 1, 1);
    CHECK(hv_callfig_ge(&b, &a) && !hv_callfig_ge(&a, &b));
    hv_callfig_t c = a;
    c.buckets[0] = 0;
    c.buckets[5] = 1; // the same call counted slower: not "counted on"
    CHECK(!hv_callfig_ge(&c, &a));
    hv_callfig_add(&a, &b);
    CHECK_EQ(a.ok, 3);
    CHECK_EQ(a.buckets[0], 3);
    hv_callfig_t top = {.ok = UINT64_MAX - 1, .service_ns = UINT64_MAX};
    hv_callfig_add(&top, &b);
    CHECK(top.ok == UINT64_MAX && top.service_ns == UINT64_MAX);
}

static int near(double got, double want) { return fabs(got - want) <= 1e-9 + want * 1e-9; }

/* Quantiles: none without calls, linear inside a bucket, the last bucket reads as 10 s. */
static void case_quantile(void) {
    hv_callfig_t f = {0};
    CHECK(hv_callfig_quantile_ms(&f, 0.5) < 0);
    /* 100 calls: 98 between 10 and 20 µs, one at 400 µs, one at 3 ms. */
    for (int i = 0; i < 98; i++) {
        hv_callfig_count(&f, 1, 15000, 0, 0);
    }
    hv_callfig_count(&f, 1, 400000, 0, 0);
    hv_callfig_count(&f, 0, 3000000, 0, 0);
    double p50 = hv_callfig_quantile_ms(&f, 0.5), p99 = hv_callfig_quantile_ms(&f, 0.99);
    double p100 = hv_callfig_quantile_ms(&f, 1.0);
    if (!near(p50, 0.010 + 0.010 * 50.0 / 98.0) || !near(p99, 0.5) || !near(p100, 5.0)) {
        fprintf(stderr, "p50 %.9f p99 %.9f p100 %.9f\n", p50, p99, p100);
        CHECK(0);
    }
    hv_callfig_t slow = {0};
    hv_callfig_count(&slow, 1, 60000000000ull, 0, 0);
    CHECK(near(hv_callfig_quantile_ms(&slow, 0.5), 10000.0));
    hv_callfig_t fast = {0};
    hv_callfig_count(&fast, 1, 300, 0, 0);
    hv_callfig_count(&fast, 1, 300, 0, 0);
    CHECK(near(hv_callfig_quantile_ms(&fast, 0.5), 0.0005));
}

HV_CHECK_MAIN(NULL, NULL, {"bucket", case_bucket}, {"count", case_count}, {"line", case_line},
              {"add_ge", case_add_ge}, {"quantile", case_quantile})
