/*
 * hvtest: the tiny test harness of worker_lib's unit tests (not part of libhv). A test file
 * defines a table of named cases; `prog` runs them all, `prog NAME...` runs only those. Asserts
 * print both operands and the location, mark the case failed and return from it. Every wait in a
 * test must be bounded: HV_TEST_TIMEOUT_MULTIPLIER scales the bounds a test chooses.
 */
#ifndef HV_WORKER_LIB_HVTEST_H
#define HV_WORKER_LIB_HVTEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "err.h"
#include "reduce.h"

extern int hvtest_failed;  // set by a failing assert in the current case
extern int hvtest_skipped; // set by HVT_SKIP: the current case could not run here

/* Marks the current case skipped (says why); the caller returns. A run whose every case was
 * skipped exits 77 (ctest's SKIP_RETURN_CODE), so a skip never reads as a pass. */
#define HVT_SKIP(...)                                                                              \
    do {                                                                                           \
        fprintf(stderr, "  skipped: ");                                                            \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
        hvtest_skipped = 1;                                                                        \
    } while (0)

typedef struct hvtest_case_s {
    const char *name;
    void (*fn)(void);
} hvtest_case_t;

#define HVT_FAIL(...)                                                                              \
    do {                                                                                           \
        fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                            \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
        hvtest_failed = 1;                                                                         \
    } while (0)

#define ASSERT_TRUE(c)                                                                             \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            HVT_FAIL("assertion failed: %s", #c);                                                  \
            return;                                                                                \
        }                                                                                          \
    } while (0)

#define ASSERT_EQ_INT(a, b)                                                                        \
    do {                                                                                           \
        long long hvt_a = (long long)(a), hvt_b = (long long)(b);                                  \
        if (hvt_a != hvt_b) {                                                                      \
            HVT_FAIL("%s == %s: %lld != %lld", #a, #b, hvt_a, hvt_b);                              \
            return;                                                                                \
        }                                                                                          \
    } while (0)

#define ASSERT_RC(expr, want)                                                                      \
    do {                                                                                           \
        hv_err hvt_rc = (expr), hvt_want = (want);                                                 \
        if (hvt_rc != hvt_want) {                                                                  \
            HVT_FAIL("%s: got %s (%s), want %s", #expr, hv_errname(hvt_rc), hv_strerror(hvt_rc),   \
                     hv_errname(hvt_want));                                                        \
            return;                                                                                \
        }                                                                                          \
    } while (0)

#define ASSERT_OK(expr) ASSERT_RC(expr, HV_OK)

/* Scales a test's own time bound by HV_TEST_TIMEOUT_MULTIPLIER (default 1). */
static inline double hvtest_scale(double v) {
    const char *m = getenv("HV_TEST_TIMEOUT_MULTIPLIER");
    double k = m != NULL ? atof(m) : 1.0;
    return v * (k > 0 ? k : 1.0);
}

static inline double hvtest_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Writes v into element i of a buffer of type dt (fp16/bf16 rounded as libhv does). */
static inline void hvtest_store(hv_dtype dt, void *p, size_t i, double v) {
    switch (dt) {
    case HV_FLOAT32:
        ((float *)p)[i] = (float)v;
        break;
    case HV_FLOAT64:
        ((double *)p)[i] = v;
        break;
    case HV_FLOAT16:
        ((uint16_t *)p)[i] = hv__f32_to_f16((float)v);
        break;
    case HV_BFLOAT16:
        ((uint16_t *)p)[i] = hv__f32_to_bf16((float)v);
        break;
    case HV_INT32:
        ((int32_t *)p)[i] = (int32_t)v;
        break;
    case HV_INT64:
        ((int64_t *)p)[i] = (int64_t)v;
        break;
    default:
        ((uint8_t *)p)[i] = (uint8_t)v;
        break;
    }
}

/* Element i of a buffer of type dt, as a double. */
static inline double hvtest_load(hv_dtype dt, const void *p, size_t i) {
    switch (dt) {
    case HV_FLOAT32:
        return ((const float *)p)[i];
    case HV_FLOAT64:
        return ((const double *)p)[i];
    case HV_FLOAT16:
        return hv__f16_to_f32(((const uint16_t *)p)[i]);
    case HV_BFLOAT16:
        return hv__bf16_to_f32(((const uint16_t *)p)[i]);
    case HV_INT32:
        return ((const int32_t *)p)[i];
    case HV_INT64:
        return (double)((const int64_t *)p)[i];
    default:
        return ((const uint8_t *)p)[i];
    }
}

int hvtest_main(int argc, char **argv, const hvtest_case_t *cases, size_t ncases);

#define HVTEST_MAIN(cases)                                                                         \
    int hvtest_failed;                                                                             \
    int hvtest_skipped;                                                                            \
    int main(int argc, char **argv) {                                                              \
        return hvtest_main(argc, argv, cases, sizeof(cases) / sizeof(cases[0]));                   \
    }                                                                                              \
    int hvtest_main(int argc, char **argv, const hvtest_case_t *cs, size_t n) {                    \
        int failures = 0, ran = 0, skipped = 0;                                                    \
        for (size_t i = 0; i < n; i++) {                                                           \
            int want = argc < 2;                                                                   \
            for (int a = 1; a < argc; a++) {                                                       \
                want |= strcmp(argv[a], cs[i].name) == 0;                                          \
            }                                                                                      \
            if (!want) {                                                                           \
                continue;                                                                          \
            }                                                                                      \
            hvtest_failed = 0;                                                                     \
            hvtest_skipped = 0;                                                                    \
            double t0 = hvtest_now();                                                              \
            cs[i].fn();                                                                            \
            ran++;                                                                                 \
            fprintf(stderr, "%-4s %-40s %.3f s\n",                                                 \
                    hvtest_failed    ? "FAIL"                                                      \
                    : hvtest_skipped ? "skip"                                                      \
                                     : "ok",                                                       \
                    cs[i].name, hvtest_now() - t0);                                                \
            failures += hvtest_failed;                                                             \
            skipped += hvtest_skipped && !hvtest_failed;                                           \
        }                                                                                          \
        if (ran == 0) {                                                                            \
            fprintf(stderr, "no test case matched\n");                                             \
            return 2;                                                                              \
        }                                                                                          \
        return failures ? 1 : skipped == ran ? 77 : 0;                                             \
    }

#endif
