/*
 * tput: a job's throughput at each size, estimated from what it measured at the sizes it ran at,
 * for the fleet policy (fleet.h) to tell what one more worker is worth to it. Pure: no I/O, no
 * clock, no allocation. Table-tested in tput_test.c.
 *
 * The model. A step of synchronous data-parallel training splits its work over the n workers and
 * then synchronises them, so the time one unit of work (a step, or a sample: one unit per job,
 * used consistently) takes at size n is
 *
 *     T(n) = a/n + b + c*n        (a, b, c >= 0; a > 0 unless the job does not scale at all)
 *
 * a: the part that divides among workers (compute), b: the part that does not (the allreduce's
 * bandwidth term, which a ring keeps nearly constant, the commit, Python), c: the part that grows
 * with the ring (per-hop latency). The throughput is 1/T(n) work per second, which rises as
 * n/(a + b*n) while c is 0 (Amdahl's law; Optimus' model without its parameter-server terms) and
 * peaks at n = sqrt(a/c) when c > 0. The speedup s(n) = T(1)/T(n) and the marginal gain of one
 * more worker, s(n+1) - s(n), are in the units of one worker of the same job, so jobs of different
 * step sizes compare.
 *
 * What the fit does with what it has (samples at the same size are added; a size observed for
 * less than HV_TPUT_MIN_S seconds is not used):
 *   - no size measured: the default shape, linear scaling with a discount: a = 1 - d, b = d,
 *     c = 0 with d = HV_TPUT_SERIAL (5%: 2 workers are 1.9x, 8 are 5.9x, 16 are 9.1x of one);
 *   - one size: the default shape, scaled so that it passes through the measured time;
 *   - two sizes: a/n + b through both points (c = 0); when they show no gain (b would be
 *     negative means better than linear: a/n alone, by least squares; a negative a means more
 *     workers were slower: flat, b alone);
 *   - three or more: weighted least squares (weights: the seconds observed at each size) over
 *     the three terms, and over every subset of them, keeping the best fit whose terms are all
 *     non-negative (so a fit never predicts a negative time).
 *
 * Limits (docs/PERFORMANCE.md, "Fleet"): the model knows system throughput only, not statistical
 * efficiency (Pollux's second factor: a larger global batch may need more samples; with a fixed
 * global batch, as elastic_train keeps, the two are the same). It extrapolates beyond the largest
 * size measured from the shape of the smaller ones, which is optimistic when the ring's latency
 * term has not shown yet: the policy grows one interval at a time and measures again. A size
 * measured while the node was shared with other work reads slower than it is. Noise in two close
 * sizes can make the fitted gain too small or too large; sizes far apart fit better.
 */
#ifndef HV_HEAD_TPUT_H
#define HV_HEAD_TPUT_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define HV_TPUT_SERIAL 0.05 /* the default shape's part of a step that does not divide */
#define HV_TPUT_MIN_S 0.5   /* a size observed for less (seconds in all) is not used */
#define HV_TPUT_MAX_SIZE 65536u
#define HV_TPUT_KEEP_S 600.0 /* a size observed longer has its old observations halved */

/* What a job measured at one size: work done (steps or samples) in seconds of running at that
 * size (a reset's pause not included). */
typedef struct hv_tput_sample_s {
    uint32_t size;
    double work;
    double seconds;
} hv_tput_sample_t;

typedef enum hv_tput_kind {
    HV_TPUT_DEFAULT = 0, /* nothing measured: the default shape */
    HV_TPUT_ONE = 1,     /* one size: the default shape through it */
    HV_TPUT_TWO = 2,     /* two sizes: a/n + b through both */
    HV_TPUT_FIT = 3,     /* three or more: least squares */
} hv_tput_kind_t;

typedef struct hv_tput_model_s {
    hv_tput_kind_t kind;
    double a, b, c;   /* seconds per unit of work at size n: a/n + b + c*n */
    uint32_t sizes;   /* distinct sizes the fit used */
    uint32_t largest; /* the largest of them (0: none) */
} hv_tput_model_t;

/* Adds what a job measured (work done in seconds at size) to its table s of *n samples, one per
 * size, at most cap: to that size's sample, or a new one, or, the table being full, in place of
 * the sample observed for the fewest seconds. A sample observed longer than HV_TPUT_KEEP_S has its
 * work and seconds halved first (its rate stays; newer observations weigh as much as older ones,
 * so a job whose step time drifts is followed). Nothing is added for a size of 0 or above
 * HV_TPUT_MAX_SIZE, or work or seconds not positive and finite. */
void hv_tput_note(hv_tput_sample_t *s, size_t cap, size_t *n, uint32_t size, double work,
                  double seconds);

/* The default shape (nothing measured), one unit of work per second at size 1. */
void hv_tput_default(hv_tput_model_t *m);

/* Fits the model to n samples (s may be NULL when n is 0). Samples with a size of 0 or above
 * HV_TPUT_MAX_SIZE, or without positive work and seconds, are skipped; so is a size whose seconds
 * add up to less than HV_TPUT_MIN_S. HV_EINVAL only when m is NULL or s is NULL with n > 0; *m is
 * always a usable model on HV_OK. */
hv_err hv_tput_fit(const hv_tput_sample_t *s, size_t n, hv_tput_model_t *m);

/* Work per second at size n (0 for n = 0). */
double hv_tput_rate(const hv_tput_model_t *m, uint32_t n);
/* rate(n) / rate(1): how many workers of size 1 the job at size n is worth. */
double hv_tput_speedup(const hv_tput_model_t *m, uint32_t n);
/* What one more worker adds: speedup(n + 1) - speedup(n) (negative past the peak). */
double hv_tput_gain(const hv_tput_model_t *m, uint32_t n);

#endif
