/*
 * mlp: the Fashion-MNIST examples' model (see mlp.h): the forward pass, the initialisation, the
 * evaluation of a range of a data set and the model as bytes. Used by examples/elastic_train.c
 * (training, and its own test accuracy) and examples/eval_actor.c (the evaluation actor).
 */
#include "mlp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SAMPLE_BLOCK 4 /* samples that share a weight row in the forward pass (stays in L1) */

float *mlp_alloc_floats(size_t n) {
    return aligned_alloc(64, ((n * sizeof(float) + 63) / 64) * 64);
}

hv_err mlp_acts_init(mlp_acts_t *A, size_t cap) {
    if (A == NULL || cap == 0) {
        return HV_EINVAL;
    }
    *A = (mlp_acts_t){.cap = cap};
    A->x = mlp_alloc_floats(cap * MLP_IN);
    A->a1 = mlp_alloc_floats(cap * MLP_H1);
    A->a2 = mlp_alloc_floats(cap * MLP_H2);
    A->z = mlp_alloc_floats(cap * MLP_OUT);
    A->dz = mlp_alloc_floats(cap * MLP_OUT);
    A->d2 = mlp_alloc_floats(cap * MLP_H2);
    A->d1 = mlp_alloc_floats(cap * MLP_H1);
    A->y = calloc(cap, 1);
    if (A->x == NULL || A->a1 == NULL || A->a2 == NULL || A->z == NULL || A->dz == NULL ||
        A->d2 == NULL || A->d1 == NULL || A->y == NULL) {
        mlp_acts_fini(A);
        return HV_ENOMEM;
    }
    return HV_OK;
}

void mlp_acts_fini(mlp_acts_t *A) {
    if (A == NULL) {
        return;
    }
    free(A->x);
    free(A->a1);
    free(A->a2);
    free(A->z);
    free(A->dz);
    free(A->d2);
    free(A->d1);
    free(A->y);
    *A = (mlp_acts_t){0};
}

/* out[b][j] = bias[j] + sum_i in[b][i] * w[i][j] (then ReLU when relu), for n samples. Zero
 * inputs are skipped: about half of a Fashion-MNIST image is black background, and half of the
 * hidden units are 0 after ReLU. The innermost loop is a contiguous axpy that the compiler
 * vectorises; SAMPLE_BLOCK samples reuse each weight row while it is in L1. */
static void dense_forward(const float *restrict in, size_t n, size_t nin, const float *restrict w,
                          const float *restrict bias, size_t nout, float *restrict out, int relu) {
    for (size_t b = 0; b < n; b++) {
        memcpy(out + b * nout, bias, nout * sizeof(float));
    }
    for (size_t b0 = 0; b0 < n; b0 += SAMPLE_BLOCK) {
        size_t bn = n - b0 < SAMPLE_BLOCK ? n - b0 : SAMPLE_BLOCK;
        for (size_t i = 0; i < nin; i++) {
            const float *restrict wr = w + i * nout;
            for (size_t k = 0; k < bn; k++) {
                float a = in[(b0 + k) * nin + i];
                if (a == 0.0f) {
                    continue;
                }
                float *restrict o = out + (b0 + k) * nout;
                for (size_t j = 0; j < nout; j++) {
                    o[j] += a * wr[j];
                }
            }
        }
    }
    if (relu) {
        for (size_t i = 0; i < n * nout; i++) {
            out[i] = out[i] > 0.0f ? out[i] : 0.0f;
        }
    }
}

double mlp_forward(const float *p, mlp_acts_t *A, size_t n, uint64_t *correct) {
    dense_forward(A->x, n, MLP_IN, p + MLP_OFF_W1, p + MLP_OFF_B1, MLP_H1, A->a1, 1);
    dense_forward(A->a1, n, MLP_H1, p + MLP_OFF_W2, p + MLP_OFF_B2, MLP_H2, A->a2, 1);
    dense_forward(A->a2, n, MLP_H2, p + MLP_OFF_W3, p + MLP_OFF_B3, MLP_OUT, A->z, 0);
    double loss = 0;
    uint64_t ok = 0;
    for (size_t b = 0; b < n; b++) {
        const float *z = A->z + b * MLP_OUT;
        float *dz = A->dz + b * MLP_OUT;
        size_t best = 0;
        for (size_t j = 1; j < MLP_OUT; j++) {
            best = z[j] > z[best] ? j : best;
        }
        ok += best == A->y[b];
        // Softmax with the largest logit subtracted, so exp never overflows.
        double sum = 0;
        for (size_t j = 0; j < MLP_OUT; j++) {
            dz[j] = expf(z[j] - z[best]);
            sum += dz[j];
        }
        loss += log(sum) - (double)(z[A->y[b]] - z[best]);
        for (size_t j = 0; j < MLP_OUT; j++) {
            dz[j] = (float)(dz[j] / sum);
        }
        dz[A->y[b]] -= 1.0f;
    }
    *correct = ok;
    return loss;
}

/* splitmix64: a small, good 64-bit generator for the weight initialisation. */
static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform weights in [-bound, bound], zero biases. */
static void init_layer(float *w, float *bias, size_t nin, size_t nout, double bound, uint64_t *s) {
    for (size_t i = 0; i < nin * nout; i++) {
        double u = (double)(splitmix(s) >> 11) / 9007199254740992.0; // [0, 1)
        w[i] = (float)((2.0 * u - 1.0) * bound);
    }
    memset(bias, 0, nout * sizeof(float));
}

void mlp_init_params(float *p, uint64_t seed) {
    uint64_t s = seed ^ 0x6d6c702d696e6974ull; // "mlp-init": not the sampler's stream
    init_layer(p + MLP_OFF_W1, p + MLP_OFF_B1, MLP_IN, MLP_H1, sqrt(6.0 / MLP_IN), &s);
    init_layer(p + MLP_OFF_W2, p + MLP_OFF_B2, MLP_H1, MLP_H2, sqrt(6.0 / MLP_H1), &s);
    init_layer(p + MLP_OFF_W3, p + MLP_OFF_B3, MLP_H2, MLP_OUT, sqrt(6.0 / (MLP_H2 + MLP_OUT)), &s);
}

void mlp_load_batch(mlp_acts_t *A, const fmnist_t *d, const uint64_t *idx, size_t n) {
    for (size_t b = 0; b < n; b++) {
        const uint8_t *img = d->images + idx[b] * MLP_IN;
        float *x = A->x + b * MLP_IN;
        for (size_t i = 0; i < MLP_IN; i++) {
            x[i] = (float)img[i] * (1.0f / 255.0f);
        }
        A->y[b] = d->labels[idx[b]];
    }
}

void mlp_test(const float *p, const fmnist_t *d, size_t lo, size_t hi, mlp_acts_t *A,
              uint64_t *correct, double *loss_sum) {
    uint64_t idx[MLP_EVAL_BATCH], all = 0;
    double loss = 0;
    for (size_t s = lo; s < hi; s += MLP_EVAL_BATCH) {
        size_t n = hi - s < MLP_EVAL_BATCH ? hi - s : MLP_EVAL_BATCH;
        for (size_t b = 0; b < n; b++) {
            idx[b] = s + b;
        }
        uint64_t ok = 0;
        mlp_load_batch(A, d, idx, n);
        loss += mlp_forward(p, A, n, &ok);
        all += ok;
    }
    *correct = all;
    *loss_sum = loss;
}

/* ---- the model as bytes --------------------------------------------------------------------- */

static void put_le(unsigned char *b, uint64_t v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        b[i] = (unsigned char)(v >> (8 * i));
    }
}

static uint64_t get_le(const unsigned char *b, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        v |= (uint64_t)b[i] << (8 * i);
    }
    return v;
}

void mlp_model_encode(uint64_t epoch, const float *p, unsigned char *buf) {
    memcpy(buf, MLP_MODEL_MAGIC, 8);
    put_le(buf + 8, epoch, 8);
    put_le(buf + 16, MLP_PARAMS, 4);
    put_le(buf + 20, 0, 4);
    // Byte by byte, so that the bytes are little-endian whatever the host's order.
    for (size_t i = 0; i < MLP_PARAMS; i++) {
        uint32_t u;
        memcpy(&u, &p[i], sizeof(u));
        put_le(buf + MLP_MODEL_HEADER + 4 * i, u, 4);
    }
}

hv_err mlp_model_decode(const void *buf, size_t len, uint64_t *epoch, float *p, char *err,
                        size_t errlen) {
    const unsigned char *b = buf;
    const char *why = NULL;
    char what[128];
    if (len < MLP_MODEL_HEADER || memcmp(b, MLP_MODEL_MAGIC, 8) != 0) {
        why = "not a model (expected the header \"HVMLP1\" that elastic_train sends)";
    } else if (get_le(b + 16, 4) != MLP_PARAMS || get_le(b + 20, 4) != 0) {
        snprintf(what, sizeof(what), "a model of %llu parameters, this one has %u",
                 (unsigned long long)get_le(b + 16, 4), (unsigned)MLP_PARAMS);
        why = what;
    } else if (len != MLP_MODEL_BYTES) {
        snprintf(what, sizeof(what), "%zu bytes, a model of this shape is %zu", len,
                 (size_t)MLP_MODEL_BYTES);
        why = what;
    }
    if (why != NULL) {
        if (err != NULL && errlen > 0) {
            snprintf(err, errlen, "%s", why);
        }
        return HV_EINVAL;
    }
    *epoch = get_le(b + 8, 8);
    for (size_t i = 0; i < MLP_PARAMS; i++) {
        uint32_t u = (uint32_t)get_le(b + MLP_MODEL_HEADER + 4 * i, 4);
        memcpy(&p[i], &u, sizeof(u));
    }
    return HV_OK;
}
