/*
 * reduce_test: unit tests of reduce.c: the half-precision conversions against slow reference
 * implementations (all 65536 halves, edge cases, a million random floats) and every dtype x op
 * kernel against a scalar reference.
 */
#include "reduce.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "hvtest.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The value of a finite half, computed from its fields with exact double arithmetic. */
static double half_value(uint16_t h) {
    int e = (h >> 10) & 0x1f;
    int m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

/* Reference float -> half: nearest representable, ties to even, overflow to inf. */
static uint16_t ref_f32_to_f16(float f) {
    if (isnan(f)) {
        return 0x7e00;
    }
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    double a = fabs((double)f);
    if (a >= 65520.0) {
        return sign | 0x7c00;
    }
    // Binary search over the positive finite halves 0x0000..0x7bff (monotonic in value).
    int lo = 0, hi = 0x7bff;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (half_value((uint16_t)mid) <= a) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    int best = lo;
    if (lo < 0x7bff) {
        double d0 = a - half_value((uint16_t)lo), d1 = half_value((uint16_t)(lo + 1)) - a;
        if (d1 < d0 || (d1 == d0 && (lo & 1))) {
            best = lo + 1;
        }
    } else if (a - half_value(0x7bff) >= 16.0) {
        best = 0x7c00;
    }
    return (uint16_t)(sign | best);
}

static uint16_t ref_f32_to_bf16(float f) {
    if (isnan(f)) {
        uint32_t u;
        memcpy(&u, &f, 4);
        return (uint16_t)((u >> 16) | 0x40);
    }
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t lo = u & 0xffff0000u, hi = lo + 0x10000u;
    double dl = fabs((double)f - (double)u2f(lo));
    double dh = fabs((double)u2f(hi) - (double)f);
    if ((hi & 0x7f800000u) == 0x7f800000u && (lo & 0x7f800000u) != 0x7f800000u) {
        // rounding up reaches inf: compare with the distance to 2^128
        dh = fabs(ldexp(1.0, 128) * (signbit(f) ? -1 : 1) - (double)f);
    }
    if (dh < dl || (dh == dl && ((lo >> 16) & 1))) {
        return (uint16_t)(hi >> 16);
    }
    return (uint16_t)(lo >> 16);
}

static void test_f16_roundtrip(void) {
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = hv__f16_to_f32((uint16_t)h);
        int e = (h >> 10) & 0x1f, m = h & 0x3ff;
        if (e == 0x1f && m != 0) {
            ASSERT_TRUE(isnan(f));
            continue;
        }
        if (e != 0x1f) {
            double want = half_value((uint16_t)h);
            if ((double)f != want) {
                HVT_FAIL("half 0x%04x -> %.10g, want %.10g", h, (double)f, want);
                return;
            }
        }
        uint16_t back = hv__f32_to_f16(f);
        if (back != h) {
            HVT_FAIL("half 0x%04x -> %g -> 0x%04x", h, (double)f, back);
            return;
        }
    }
}

static unsigned f2u_t(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void check_f16(float f) {
    uint16_t got = hv__f32_to_f16(f), want = ref_f32_to_f16(f);
    if (got != want) {
        HVT_FAIL("f32 %.9g (0x%08x): got half 0x%04x, want 0x%04x", (double)f, f2u_t(f), got, want);
    }
}

static void test_f16_rounding(void) {
    // Ties, halfway points, subnormals, overflow boundary.
    float edge[] = {0.0f,          -0.0f,          1.0f,           65504.0f,      65519.99f,
                    65520.0f,      65536.0f,       1e10f,          -1e10f,        5.9604645e-8f,
                    2.9802322e-8f, 2.98023259e-8f, 8.940697e-8f,   6.1035156e-5f, 6.1035152e-5f,
                    1.0009765625f, 1.00048828125f, 1.00146484375f, INFINITY,      -INFINITY,
                    1e-30f,        3.0e-8f};
    for (size_t i = 0; i < sizeof(edge) / sizeof(edge[0]); i++) {
        check_f16(edge[i]);
        if (hvtest_failed) {
            return;
        }
    }
    // Every midpoint between adjacent halves, and one float either side of it.
    for (uint32_t h = 0; h < 0x7bff; h++) {
        double mid = (half_value((uint16_t)h) + half_value((uint16_t)(h + 1))) / 2;
        float fm = (float)mid; // exact: halves have 11 bits
        check_f16(fm);
        check_f16(nextafterf(fm, 0));
        check_f16(nextafterf(fm, INFINITY));
        check_f16(-fm);
        if (hvtest_failed) {
            return;
        }
    }
    for (int i = 0; i < 1000000; i++) {
        uint32_t u = (uint32_t)rng();
        float f = u2f(u);
        if (isnan(f)) {
            ASSERT_TRUE(((hv__f32_to_f16(f) & 0x7c00) == 0x7c00) && (hv__f32_to_f16(f) & 0x3ff));
            continue;
        }
        // Bias towards the half range: scale the exponent into [-30, 17].
        if (i % 2) {
            u = (u & 0x807fffffu) | ((uint32_t)(97 + rng() % 48) << 23);
            f = u2f(u);
        }
        check_f16(f);
        if (hvtest_failed) {
            return;
        }
    }
}

static void test_bf16(void) {
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = hv__bf16_to_f32((uint16_t)h);
        if (isnan(f)) {
            continue;
        }
        ASSERT_EQ_INT(hv__f32_to_bf16(f), h);
    }
    for (int i = 0; i < 1000000; i++) {
        float f = u2f((uint32_t)rng());
        if (isnan(f)) {
            ASSERT_TRUE(isnan(hv__bf16_to_f32(hv__f32_to_bf16(f))));
            continue;
        }
        uint16_t got = hv__f32_to_bf16(f), want = ref_f32_to_bf16(f);
        if (got != want) {
            HVT_FAIL("f32 %.9g: got bf16 0x%04x, want 0x%04x", (double)f, got, want);
            return;
        }
    }
    ASSERT_EQ_INT(hv__f32_to_bf16(1.00390625f), 0x3f80);      // tie, even stays
    ASSERT_EQ_INT(hv__f32_to_bf16(1.01171875f), 0x3f82);      // tie, odd rounds up
    ASSERT_EQ_INT(hv__f32_to_bf16(u2f(0x7f7fffffu)), 0x7f80); // max float -> inf
}

/* Reference reduction in double (exact for the small integers used below). */
static double ref_op(hv_op op, double a, double b) {
    switch (op) {
    case HV_SUM:
    case HV_AVG:
        return a + b;
    case HV_PRODUCT:
        return a * b;
    case HV_MIN:
        return a < b ? a : b;
    default:
        return a > b ? a : b;
    }
}

static void test_kernels(void) {
    size_t n = 1031; // prime, not a multiple of any vector width or block
    static unsigned char a[1031 * 8], b[1031 * 8];
    for (int dt = 0; dt < HV__DTYPE_COUNT; dt++) {
        for (int op = 0; op < HV__OP_COUNT; op++) {
            for (size_t i = 0; i < n; i++) {
                // Small values keep every result exact in every type (uint8: 0..7).
                hvtest_store((hv_dtype)dt, a, i, (double)(rng() % 8));
                hvtest_store((hv_dtype)dt, b, i, (double)(rng() % 8) - (dt == HV_UINT8 ? 0 : 3));
            }
            static unsigned char want[1031 * 8];
            for (size_t i = 0; i < n; i++) {
                hvtest_store((hv_dtype)dt, want, i,
                             ref_op((hv_op)op, hvtest_load((hv_dtype)dt, a, i),
                                    hvtest_load((hv_dtype)dt, b, i)));
            }
            hv__reduce((hv_op)op, (hv_dtype)dt, a, b, n);
            for (size_t i = 0; i < n; i++) {
                double g = hvtest_load((hv_dtype)dt, a, i), w = hvtest_load((hv_dtype)dt, want, i);
                if (g != w) {
                    HVT_FAIL("%s %s [%zu]: got %g want %g", hv__dtype_name((hv_dtype)dt),
                             hv__op_name((hv_op)op), i, g, w);
                    return;
                }
            }
        }
        // AVG's division.
        for (size_t i = 0; i < n; i++) {
            hvtest_store((hv_dtype)dt, a, i, (double)(4 * (i % 16)));
        }
        hv__reduce_scale((hv_dtype)dt, a, n, 4);
        for (size_t i = 0; i < n; i++) {
            ASSERT_TRUE(hvtest_load((hv_dtype)dt, a, i) == (double)(i % 16));
        }
    }
    ASSERT_EQ_INT(hv_dtype_size(HV_BFLOAT16), 2);
    ASSERT_EQ_INT(hv_dtype_size((hv_dtype)99), 0);
}

static void test_int_wrap(void) {
    int32_t a[3] = {INT32_MAX, INT32_MIN, 7}, b[3] = {1, -1, 3};
    hv__reduce(HV_SUM, HV_INT32, a, b, 3);
    ASSERT_EQ_INT(a[0], INT32_MIN);
    ASSERT_EQ_INT(a[1], INT32_MAX);
    uint8_t c[2] = {250, 3}, d[2] = {10, 100};
    hv__reduce(HV_SUM, HV_UINT8, c, d, 2);
    ASSERT_EQ_INT(c[0], 4);
    ASSERT_EQ_INT(c[1], 103);
}

static const hvtest_case_t cases[] = {
    {"f16_roundtrip", test_f16_roundtrip},
    {"f16_rounding", test_f16_rounding},
    {"bf16", test_bf16},
    {"kernels", test_kernels},
    {"int_wrap", test_int_wrap},
};

HVTEST_MAIN(cases)
