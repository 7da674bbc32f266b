/*
 * tput_test: the throughput model, one table of measurements -> fitted shape and predictions.
 * `tput_test <case>` runs one case.
 */
#include "tput.h"
#include "hv_check.h"

#include <math.h>
#include <stdint.h>

#define N(a) (sizeof(a) / sizeof((a)[0]))

static int near(double got, double want, double rel) {
    return fabs(got - want) <= rel * fmax(fabs(want), 1e-9);
}

#define CHECK_NEAR(got, want, rel)                                                                 \
    do {                                                                                           \
        double g__ = (got), w__ = (want);                                                          \
        if (!near(g__, w__, (rel))) {                                                              \
            fprintf(stderr, "%s:%d: %s ~ %s\n  got:  %.6g\n  want: %.6g\n", __FILE__, __LINE__,    \
                    #got, #want, g__, w__);                                                        \
            hv_check_failures++;                                                                   \
        }                                                                                          \
    } while (0)

/* Samples of a job whose step time is a/n + b + c*n: `secs` seconds at each size. */
static size_t synth(hv_tput_sample_t *s, const uint32_t *sizes, size_t n, double a, double b,
                    double c, double secs, const double *noise) {
    for (size_t i = 0; i < n; i++) {
        double t = (a / sizes[i] + b + c * sizes[i]) * (noise ? 1 + noise[i] : 1);
        s[i] = (hv_tput_sample_t){.size = sizes[i], .work = secs / t, .seconds = secs};
    }
    return n;
}

/* Nothing measured: linear scaling with a 5% discount, one unit of work a second at size 1. */
static void case_default(void) {
    hv_tput_model_t m;
    CHECK_RC(hv_tput_fit(NULL, 0, &m), HV_OK);
    CHECK_EQ(m.kind, HV_TPUT_DEFAULT);
    CHECK_EQ(m.sizes, 0);
    CHECK_NEAR(hv_tput_rate(&m, 1), 1.0, 1e-12);
    CHECK_EQ(hv_tput_rate(&m, 0), 0);
    static const struct {
        uint32_t n;
        double speedup;
    } rows[] = {{1, 1.0},
                {2, 1.0 / (0.95 / 2 + 0.05)},
                {8, 1.0 / (0.95 / 8 + 0.05)},
                {16, 1.0 / (0.95 / 16 + 0.05)}};
    for (size_t i = 0; i < N(rows); i++) {
        CHECK_NEAR(hv_tput_speedup(&m, rows[i].n), rows[i].speedup, 1e-9);
    }
    CHECK_NEAR(hv_tput_speedup(&m, 2), 1.905, 1e-3);
    CHECK_NEAR(hv_tput_speedup(&m, 8), 5.926, 1e-3);
    /* each worker adds less than the one before, never nothing */
    for (uint32_t n = 1; n < 64; n++) {
        CHECK(hv_tput_gain(&m, n) > 0);
        CHECK(hv_tput_gain(&m, n + 1) < hv_tput_gain(&m, n));
    }
}

/* One size: the default shape through the measured point. */
static void case_one_size(void) {
    hv_tput_sample_t s[] = {{.size = 4, .work = 100, .seconds = 10}};
    hv_tput_model_t m;
    CHECK_RC(hv_tput_fit(s, N(s), &m), HV_OK);
    CHECK_EQ(m.kind, HV_TPUT_ONE);
    CHECK_EQ(m.sizes, 1);
    CHECK_EQ(m.largest, 4);
    CHECK_NEAR(hv_tput_rate(&m, 4), 10.0, 1e-9);
    CHECK_NEAR(hv_tput_speedup(&m, 8), 1.0 / (0.95 / 8 + 0.05), 1e-9);
}

/* A table of measurements (sizes with their true shape, maybe with noise) -> the fitted kind and
 * the speedups predicted at sizes seen and unseen. */
static void case_fits(void) {
    static const double noise2[] = {0.02, -0.02, 0.015, -0.01};
    static const struct {
        const char *name;
        uint32_t sizes[4];
        size_t n;
        double a, b, c;
        const double *noise;
        hv_tput_kind_t kind;
        double rel;    /* how close the speedups must be to the true ones */
        uint32_t upto; /* ... from size 1 to this one */
    } rows[] = {
        {"2 sizes, Amdahl", {1, 4}, 2, 1.0, 0.1, 0, NULL, HV_TPUT_TWO, 1e-9, 16},
        {"2 sizes far apart, Amdahl", {2, 8}, 2, 0.6, 0.02, 0, NULL, HV_TPUT_TWO, 1e-9, 16},
        {"3 sizes, ring latency too", {1, 2, 8}, 3, 1.0, 0.05, 0.01, NULL, HV_TPUT_FIT, 1e-6, 16},
        {"4 sizes, Amdahl: no latency", {1, 2, 3, 4}, 4, 1.0, 0.2, 0, NULL, HV_TPUT_FIT, 1e-6, 16},
        /* noise may invent a small latency term: close within the sizes seen and a little past
         * them, pessimistic far beyond (the limit tput.h names) */
        {"4 sizes, 2% noise", {1, 2, 4, 6}, 4, 1.0, 0.05, 0, noise2, HV_TPUT_FIT, 0.06, 8},
    };
    for (size_t i = 0; i < N(rows); i++) {
        hv_tput_sample_t s[4];
        size_t n =
            synth(s, rows[i].sizes, rows[i].n, rows[i].a, rows[i].b, rows[i].c, 5.0, rows[i].noise);
        hv_tput_model_t m, truth = {.a = rows[i].a, .b = rows[i].b, .c = rows[i].c};
        CHECK_RC(hv_tput_fit(s, n, &m), HV_OK);
        if (m.kind != rows[i].kind) {
            fprintf(stderr, "%s: kind %d, want %d\n", rows[i].name, m.kind, rows[i].kind);
            hv_check_failures++;
        }
        for (uint32_t k = 1; k <= rows[i].upto; k++) {
            double got = hv_tput_speedup(&m, k), want = hv_tput_speedup(&truth, k);
            if (!near(got, want, rows[i].rel)) {
                fprintf(stderr, "%s: speedup(%u) %.4f, want %.4f\n", rows[i].name, k, got, want);
                hv_check_failures++;
            }
        }
    }
}

/* The latency term makes the speedup peak: past sqrt(a/c) one more worker slows the job. */
static void case_peak(void) {
    static const uint32_t sizes[] = {1, 2, 4, 8};
    hv_tput_sample_t s[4];
    hv_tput_model_t m;
    CHECK_RC(hv_tput_fit(s, synth(s, sizes, 4, 1.0, 0.0, 0.01, 3.0, NULL), &m), HV_OK);
    CHECK(hv_tput_gain(&m, 8) > 0);  /* 8 -> 9: still up (the peak is 10) */
    CHECK(hv_tput_gain(&m, 10) < 0); /* 10 -> 11: down */
    CHECK(hv_tput_gain(&m, 16) < 0);
}

/* Two sizes that do not look like Amdahl: better than linear reads as linear, slower with more
 * workers reads as flat (one more worker is worth nothing). */
static void case_two_odd(void) {
    hv_tput_model_t m;
    hv_tput_sample_t super[] = {{1, 10, 10}, {2, 25, 10}}; /* 1.0 s and 0.4 s a unit */
    CHECK_RC(hv_tput_fit(super, 2, &m), HV_OK);
    CHECK_EQ(m.kind, HV_TPUT_TWO);
    CHECK(m.b == 0 && m.c == 0 && m.a > 0);
    CHECK_NEAR(hv_tput_speedup(&m, 4), 4.0, 1e-9);
    hv_tput_sample_t slower[] = {{1, 10, 10}, {2, 10, 12}}; /* 1.0 s and 1.2 s a unit */
    CHECK_RC(hv_tput_fit(slower, 2, &m), HV_OK);
    CHECK(m.a == 0 && m.b > 0);
    CHECK_NEAR(hv_tput_gain(&m, 1), 0.0, 1e-9);
    CHECK_NEAR(hv_tput_gain(&m, 5), 0.0, 1e-9);
}

/* What is used: samples of a size add up; a size seen too briefly, and garbage, are not. */
static void case_samples_used(void) {
    hv_tput_model_t m;
    hv_tput_sample_t split[] = {{4, 40, 4}, {4, 60, 6}}; /* 100 in 10 s at 4, two reports */
    CHECK_RC(hv_tput_fit(split, 2, &m), HV_OK);
    CHECK_EQ(m.kind, HV_TPUT_ONE);
    CHECK_NEAR(hv_tput_rate(&m, 4), 10.0, 1e-9);
    hv_tput_sample_t brief[] = {{4, 100, 10}, {8, 10, 0.3}, {8, 5, 0.1}}; /* 8: 0.4 s in all */
    CHECK_RC(hv_tput_fit(brief, 3, &m), HV_OK);
    CHECK_EQ(m.sizes, 1);
    CHECK_EQ(m.largest, 4);
    hv_tput_sample_t junk[] = {{0, 10, 10},  {3, -1, 10},       {3, 10, 0},
                               {3, NAN, 10}, {3, 10, INFINITY}, {70000, 10, 10}};
    CHECK_RC(hv_tput_fit(junk, N(junk), &m), HV_OK);
    CHECK_EQ(m.kind, HV_TPUT_DEFAULT);
    CHECK_RC(hv_tput_fit(NULL, 1, &m), HV_EINVAL);
    CHECK_RC(hv_tput_fit(split, 2, NULL), HV_EINVAL);
}

/* The driver's table of observations: a size adds to its own sample, a new size takes a free
 * entry or the one observed the shortest, old observations are halved past HV_TPUT_KEEP_S, and
 * garbage is not added. */
static void case_note(void) {
    hv_tput_sample_t s[3];
    size_t n = 0;
    static const struct {
        uint32_t size;
        double work, secs;
        size_t want_n;
        uint32_t want_size; /* the sample written */
        double want_work, want_secs;
    } rows[] = {
        {2, 20, 10, 1, 2, 20, 10},       /* new size: a new entry */
        {2, 10, 5, 1, 2, 30, 15},        /* the same size adds */
        {4, 40, 10, 2, 4, 40, 10},       /* another */
        {8, 80, 20, 3, 8, 80, 20},       /* the table is full now */
        {16, 16, 1, 3, 16, 16, 1},       /* replaces the shortest observed (4: 10 s) */
        {0, 10, 10, 3, 0, 0, 0},         /* garbage: nothing */
        {3, -1, 10, 3, 0, 0, 0},         /* garbage */
        {3, NAN, 10, 3, 0, 0, 0},        /* garbage */
        {70000, 1, 1, 3, 0, 0, 0},       /* too large */
        {8, 1000, 600, 3, 8, 1080, 620}, /* 620 s at 8 now */
        {8, 10, 10, 3, 8, 550, 320},     /* past KEEP_S: halved, then added */
    };
    for (size_t i = 0; i < N(rows); i++) {
        hv_tput_note(s, N(s), &n, rows[i].size, rows[i].work, rows[i].secs);
        CHECK_EQ(n, rows[i].want_n);
        if (rows[i].want_size == 0) {
            continue;
        }
        int found = 0;
        for (size_t k = 0; k < n; k++) {
            if (s[k].size == rows[i].want_size) {
                found = 1;
                CHECK_NEAR(s[k].work, rows[i].want_work, 1e-12);
                CHECK_NEAR(s[k].seconds, rows[i].want_secs, 1e-12);
            }
            CHECK(s[k].size != 4 || i < 4); /* 4 was replaced */
        }
        CHECK(found);
    }
    hv_tput_note(NULL, 3, &n, 2, 1, 1); /* no table: nothing, no crash */
    hv_tput_note(s, 0, &n, 2, 1, 1);
    CHECK_EQ(n, 3);
}

/* The driver's path: each worker of a round reports its steps over the same time (the head adds
 * them divided by the size), the table is fitted, and the job whose steps divide among its
 * workers gains more from one more worker than the job whose step time does not depend on its
 * size (elastic_train --compute-ms-per-sample against --step-delay-ms). */
static void case_reports_to_gain(void) {
    hv_tput_sample_t scal[4], flat[4];
    size_t ns = 0, nf = 0;
    for (uint32_t size = 1; size <= 2; size++) {
        for (uint32_t w = 0; w < size; w++) {   /* every worker of the round reports */
            for (int rep = 0; rep < 3; rep++) { /* three reports of 1 s each */
                double scal_step = 0.100 / size + 0.005, flat_step = 0.050 + 0.001 / size;
                hv_tput_note(scal, N(scal), &ns, size, 1.0 / scal_step / size, 1.0 / size);
                hv_tput_note(flat, N(flat), &nf, size, 1.0 / flat_step / size, 1.0 / size);
            }
        }
    }
    CHECK_EQ(ns, 2);
    hv_tput_model_t ms, mf;
    CHECK_RC(hv_tput_fit(scal, ns, &ms), HV_OK);
    CHECK_RC(hv_tput_fit(flat, nf, &mf), HV_OK);
    CHECK_EQ(ms.kind, HV_TPUT_TWO);
    CHECK_NEAR(hv_tput_rate(&ms, 2), 1.0 / 0.055, 1e-6);
    CHECK_NEAR(hv_tput_rate(&mf, 1), 1.0 / 0.051, 1e-6);
    CHECK(hv_tput_gain(&ms, 2) > 0.5);
    CHECK(hv_tput_gain(&mf, 2) < 0.05);
}

HV_CHECK_MAIN(NULL, NULL, {"note", case_note}, {"reports_to_gain", case_reports_to_gain},
              {"default", case_default}, {"one_size", case_one_size}, {"fits", case_fits},
              {"peak", case_peak}, {"two_odd", case_two_odd}, {"samples_used", case_samples_used})
