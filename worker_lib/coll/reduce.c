/*
 * reduce: see reduce.h. The kernels are plain loops over restrict pointers so that the compiler
 * vectorises them (this file is built with -O3). float16 and bfloat16 go through float in blocks:
 * float has more than twice their precision, so one rounding of the float result is exactly the
 * correctly rounded half-precision result (no double-rounding error for +, *, min, max).
 */
#include "reduce.h"

#include <string.h>

int hv__dtype_valid(hv_dtype dt) { return (unsigned)dt < HV__DTYPE_COUNT; }
int hv__op_valid(hv_op op) { return (unsigned)op < HV__OP_COUNT; }

size_t hv_dtype_size(hv_dtype dt) {
    static const size_t sizes[HV__DTYPE_COUNT] = {
        [HV_FLOAT32] = 4, [HV_FLOAT64] = 8, [HV_FLOAT16] = 2, [HV_BFLOAT16] = 2,
        [HV_INT32] = 4,   [HV_INT64] = 8,   [HV_UINT8] = 1,
    };
    return hv__dtype_valid(dt) ? sizes[dt] : 0;
}

const char *hv__dtype_name(hv_dtype dt) {
    static const char *names[HV__DTYPE_COUNT] = {
        [HV_FLOAT32] = "float32",   [HV_FLOAT64] = "float64", [HV_FLOAT16] = "float16",
        [HV_BFLOAT16] = "bfloat16", [HV_INT32] = "int32",     [HV_INT64] = "int64",
        [HV_UINT8] = "uint8",
    };
    return hv__dtype_valid(dt) ? names[dt] : "?";
}

const char *hv__op_name(hv_op op) {
    static const char *names[HV__OP_COUNT] = {
        [HV_SUM] = "sum", [HV_AVG] = "avg",         [HV_MIN] = "min",
        [HV_MAX] = "max", [HV_PRODUCT] = "product",
    };
    return hv__op_valid(op) ? names[op] : "?";
}

/* ---- conversions ----------------------------------------------------------------------------- */

static inline uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static inline float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

uint16_t hv__f32_to_f16(float f) {
    uint32_t x = f2u(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    uint32_t o;
    if (x >= 0x47800000u) {
        // |f| >= 65536, inf or NaN: every finite value here rounds to inf.
        o = x > 0x7f800000u ? 0x7e00u : 0x7c00u;
    } else if (x < 0x38800000u) {
        // Below the smallest normal half (2^-14): let the FPU round the subnormal by adding 0.5,
        // which aligns the half's subnormal ulp (2^-24) with the float's last mantissa bit.
        o = f2u(u2f(x) + 0.5f) - 0x3f000000u;
    } else {
        uint32_t mant_odd = (x >> 13) & 1u;
        x += ((uint32_t)(15 - 127) << 23) + 0xfffu; // rebias the exponent, add half an ulp - 1
        x += mant_odd;                              // ... plus one if odd: ties go to even
        o = x >> 13;
    }
    return (uint16_t)(o | sign);
}

float hv__f16_to_f32(uint16_t h) {
    const uint32_t shifted_exp = 0x7c00u << 13;
    uint32_t o = ((uint32_t)h & 0x7fffu) << 13;
    uint32_t exp = shifted_exp & o;
    o += (uint32_t)(127 - 15) << 23;
    if (exp == shifted_exp) {
        o += (uint32_t)(128 - 16) << 23; // inf / NaN
    } else if (exp == 0) {
        o += 1u << 23; // zero / subnormal: renormalise through the FPU (exact)
        o = f2u(u2f(o) - u2f(113u << 23));
    }
    o |= ((uint32_t)h & 0x8000u) << 16;
    return u2f(o);
}

uint16_t hv__f32_to_bf16(float f) {
    uint32_t x = f2u(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((x >> 16) | 0x40u); // quiet NaN
    }
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

float hv__bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

/* ---- kernels --------------------------------------------------------------------------------- */

#define HV__MIN(a, b) ((b) < (a) ? (b) : (a))
#define HV__MAX(a, b) ((b) > (a) ? (b) : (a))

#define DEFINE_SUM_PROD(T, sfx)                                                                    \
    static void sum_##sfx(T *restrict d, const T *restrict s, size_t n) {                          \
        for (size_t i = 0; i < n; i++) {                                                           \
            d[i] = (T)(d[i] + s[i]);                                                               \
        }                                                                                          \
    }                                                                                              \
    static void prod_##sfx(T *restrict d, const T *restrict s, size_t n) {                         \
        for (size_t i = 0; i < n; i++) {                                                           \
            d[i] = (T)(d[i] * s[i]);                                                               \
        }                                                                                          \
    }

#define DEFINE_MIN_MAX(T, sfx)                                                                     \
    static void min_##sfx(T *restrict d, const T *restrict s, size_t n) {                          \
        for (size_t i = 0; i < n; i++) {                                                           \
            d[i] = HV__MIN(d[i], s[i]);                                                            \
        }                                                                                          \
    }                                                                                              \
    static void max_##sfx(T *restrict d, const T *restrict s, size_t n) {                          \
        for (size_t i = 0; i < n; i++) {                                                           \
            d[i] = HV__MAX(d[i], s[i]);                                                            \
        }                                                                                          \
    }

DEFINE_SUM_PROD(float, f32)
DEFINE_SUM_PROD(double, f64)
DEFINE_SUM_PROD(uint8_t, u8) // promoted to int: no overflow, truncation wraps as intended
DEFINE_MIN_MAX(float, f32)
DEFINE_MIN_MAX(double, f64)
DEFINE_MIN_MAX(int32_t, i32)
DEFINE_MIN_MAX(int64_t, i64)
DEFINE_MIN_MAX(uint8_t, u8)

/* Integer sums and products wrap (two's complement), as in every other allreduce library; do
 * them in unsigned arithmetic so that overflow is defined behaviour. */
static void sum_i32w(int32_t *restrict d, const int32_t *restrict s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        d[i] = (int32_t)((uint32_t)d[i] + (uint32_t)s[i]);
    }
}
static void prod_i32w(int32_t *restrict d, const int32_t *restrict s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        d[i] = (int32_t)((uint32_t)d[i] * (uint32_t)s[i]);
    }
}
static void sum_i64w(int64_t *restrict d, const int64_t *restrict s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        d[i] = (int64_t)((uint64_t)d[i] + (uint64_t)s[i]);
    }
}
static void prod_i64w(int64_t *restrict d, const int64_t *restrict s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        d[i] = (int64_t)((uint64_t)d[i] * (uint64_t)s[i]);
    }
}

/* Half-precision types: widen a block to float, reduce there, narrow with one rounding. */
#define HALF_BLOCK 256

static void reduce_half(hv_op op, int bf, uint16_t *restrict d, const uint16_t *restrict s,
                        size_t n) {
    float a[HALF_BLOCK], b[HALF_BLOCK];
    for (size_t off = 0; off < n; off += HALF_BLOCK) {
        size_t m = n - off < HALF_BLOCK ? n - off : HALF_BLOCK;
        if (bf) {
            for (size_t i = 0; i < m; i++) {
                a[i] = hv__bf16_to_f32(d[off + i]);
                b[i] = hv__bf16_to_f32(s[off + i]);
            }
        } else {
            for (size_t i = 0; i < m; i++) {
                a[i] = hv__f16_to_f32(d[off + i]);
                b[i] = hv__f16_to_f32(s[off + i]);
            }
        }
        switch (op) {
        case HV_SUM:
        case HV_AVG:
            sum_f32(a, b, m);
            break;
        case HV_PRODUCT:
            prod_f32(a, b, m);
            break;
        case HV_MIN:
            min_f32(a, b, m);
            break;
        case HV_MAX:
        default:
            max_f32(a, b, m);
            break;
        }
        if (bf) {
            for (size_t i = 0; i < m; i++) {
                d[off + i] = hv__f32_to_bf16(a[i]);
            }
        } else {
            for (size_t i = 0; i < m; i++) {
                d[off + i] = hv__f32_to_f16(a[i]);
            }
        }
    }
}

#define DISPATCH(sfx, T, sumfn, prodfn)                                                            \
    switch (op) {                                                                                  \
    case HV_SUM:                                                                                   \
    case HV_AVG:                                                                                   \
        sumfn((T *)dst, (const T *)src, n);                                                        \
        return;                                                                                    \
    case HV_PRODUCT:                                                                               \
        prodfn((T *)dst, (const T *)src, n);                                                       \
        return;                                                                                    \
    case HV_MIN:                                                                                   \
        min_##sfx((T *)dst, (const T *)src, n);                                                    \
        return;                                                                                    \
    case HV_MAX:                                                                                   \
        max_##sfx((T *)dst, (const T *)src, n);                                                    \
        return;                                                                                    \
    default:                                                                                       \
        return;                                                                                    \
    }

void hv__reduce(hv_op op, hv_dtype dt, void *dst, const void *src, size_t n) {
    switch (dt) {
    case HV_FLOAT32:
        DISPATCH(f32, float, sum_f32, prod_f32)
    case HV_FLOAT64:
        DISPATCH(f64, double, sum_f64, prod_f64)
    case HV_INT32:
        DISPATCH(i32, int32_t, sum_i32w, prod_i32w)
    case HV_INT64:
        DISPATCH(i64, int64_t, sum_i64w, prod_i64w)
    case HV_UINT8:
        DISPATCH(u8, uint8_t, sum_u8, prod_u8)
    case HV_FLOAT16:
        reduce_half(op, 0, (uint16_t *)dst, (const uint16_t *)src, n);
        return;
    case HV_BFLOAT16:
        reduce_half(op, 1, (uint16_t *)dst, (const uint16_t *)src, n);
        return;
    default:
        return;
    }
}

void hv__reduce_scale(hv_dtype dt, void *buf, size_t n, int divisor) {
    if (divisor <= 1) {
        return;
    }
    switch (dt) {
    case HV_FLOAT32: {
        float *p = buf;
        float inv = (float)divisor;
        for (size_t i = 0; i < n; i++) {
            p[i] = p[i] / inv;
        }
        return;
    }
    case HV_FLOAT64: {
        double *p = buf;
        for (size_t i = 0; i < n; i++) {
            p[i] = p[i] / (double)divisor;
        }
        return;
    }
    case HV_INT32: {
        int32_t *p = buf;
        for (size_t i = 0; i < n; i++) {
            p[i] = p[i] / divisor;
        }
        return;
    }
    case HV_INT64: {
        int64_t *p = buf;
        for (size_t i = 0; i < n; i++) {
            p[i] = p[i] / divisor;
        }
        return;
    }
    case HV_UINT8: {
        uint8_t *p = buf;
        for (size_t i = 0; i < n; i++) {
            p[i] = (uint8_t)(p[i] / divisor);
        }
        return;
    }
    case HV_FLOAT16:
    case HV_BFLOAT16: {
        uint16_t *p = buf;
        int bf = dt == HV_BFLOAT16;
        for (size_t i = 0; i < n; i++) {
            float v = (bf ? hv__bf16_to_f32(p[i]) : hv__f16_to_f32(p[i])) / (float)divisor;
            p[i] = bf ? hv__f32_to_bf16(v) : hv__f32_to_f16(v);
        }
        return;
    }
    default:
        return;
    }
}
