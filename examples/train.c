/*
 * train: a small data-parallel training loop over libhv's public API, the shape of what a
 * framework does: rank 0's initial weights are broadcast, every rank computes gradients on its
 * own shard of a synthetic linear-regression problem, the gradients of several parameter
 * tensors are submitted as named asynchronous allreduces (AVG) in reverse order and fused by
 * libhv, and every rank applies the same update. At the end the ranks check that their weights
 * are bit-identical. Rank 0 prints the loss every few steps and one summary line:
 *   train: 4 ranks, 50 steps, loss 0.0123 -> 0.0001, weights identical
 * Usage: train [STEPS [TENSORS [ELEMENTS]]] (defaults 50, 8, 256). Exit status 0 on success,
 * 1 if libhv reports an error (the message says which call and why).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hv/hv.h>

#define SAMPLES 64 /* per rank and step */

static int check(hv_err rc, const char *what) {
    if (rc != HV_OK) {
        char detail[512];
        fprintf(stderr, "train: rank %d: %s: %s (%s)\n", hv_rank(), what, hv_strerror(rc),
                hv_last_error(detail, sizeof(detail)));
        return -1;
    }
    return 0;
}

/* A deterministic pseudo-random stream per (rank, step). */
static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static float unit(uint64_t *s) {
    *s = mix(*s + 0x9e3779b97f4a7c15ull);
    return (float)((double)(*s >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

int main(int argc, char **argv) {
    long steps = argc > 1 ? strtol(argv[1], NULL, 10) : 50;
    long ntensors = argc > 2 ? strtol(argv[2], NULL, 10) : 8;
    long elems = argc > 3 ? strtol(argv[3], NULL, 10) : 256;
    if (steps < 1 || ntensors < 1 || ntensors > 1024 || elems < 1 || elems > (1L << 24)) {
        fprintf(stderr, "usage: train [STEPS [TENSORS (1..1024) [ELEMENTS (1..16M)]]]\n");
        return 2;
    }
    if (check(hv_init(), "hv_init") != 0) {
        return 1;
    }
    int rank = hv_rank(), size = hv_size();
    size_t dim = (size_t)ntensors * (size_t)elems;
    float *w = calloc(dim, sizeof(float)); // the model: all tensors back to back
    float *grad = calloc(dim, sizeof(float));
    float *truth = calloc(dim, sizeof(float)); // the weights the data was generated with
    float *x = calloc(dim, sizeof(float));
    hv_handle_t *h = calloc((size_t)ntensors, sizeof(hv_handle_t));
    char(*names)[32] = calloc((size_t)ntensors, 32);
    int rc = 1;
    if (w == NULL || grad == NULL || truth == NULL || x == NULL || h == NULL || names == NULL) {
        fprintf(stderr, "train: out of memory\n");
        goto out;
    }
    uint64_t s = 12345;
    for (size_t i = 0; i < dim; i++) {
        truth[i] = unit(&s) / sqrtf((float)dim);
    }
    // Every rank starts from rank 0's weights (here: random on rank 0, garbage elsewhere).
    s = mix((uint64_t)rank + 1);
    for (size_t i = 0; i < dim; i++) {
        w[i] = rank == 0 ? unit(&s) / sqrtf((float)dim) : 1e9f;
    }
    if (check(hv_broadcast(w, dim, HV_FLOAT32, 0), "broadcast") != 0) {
        goto out;
    }
    for (long t = 0; t < ntensors; t++) {
        snprintf(names[t], 32, "grad.%ld", t);
    }
    double first = -1, loss = 0;
    for (long step = 0; step < steps; step++) {
        // Local gradient of the mean squared error on this rank's samples.
        memset(grad, 0, dim * sizeof(float));
        double local = 0;
        uint64_t ds = mix((uint64_t)step * 1000003u + (uint64_t)rank);
        for (int k = 0; k < SAMPLES; k++) {
            double pred = 0, y = 0;
            for (size_t i = 0; i < dim; i++) {
                x[i] = unit(&ds);
                pred += (double)w[i] * x[i];
                y += (double)truth[i] * x[i];
            }
            double err = pred - y;
            local += err * err / SAMPLES;
            for (size_t i = 0; i < dim; i++) {
                grad[i] += (float)(2.0 * err * x[i] / SAMPLES);
            }
        }
        // A backward pass hands the tensors over last layer first.
        for (long t = ntensors - 1; t >= 0; t--) {
            float *g = grad + (size_t)t * (size_t)elems;
            if (check(hv_allreduce_async(names[t], g, g, (size_t)elems, HV_FLOAT32, HV_AVG, &h[t]),
                      "allreduce_async") != 0) {
                goto out;
            }
        }
        for (long t = ntensors - 1; t >= 0; t--) {
            if (check(hv_wait(h[t]), "wait") != 0) {
                goto out;
            }
        }
        // Stable for the batch's sample covariance (largest eigenvalue about
        // (1 + sqrt(dim / batch))^2 / 3 for uniform inputs).
        double q = 1.0 + sqrt((double)dim / (SAMPLES * size));
        float lr = (float)(1.0 / (q * q));
        for (size_t i = 0; i < dim; i++) {
            w[i] -= lr * grad[i];
        }
        double l = local;
        if (check(hv_allreduce(&l, &l, 1, HV_FLOAT64, HV_AVG), "loss allreduce") != 0) {
            goto out;
        }
        loss = l;
        if (first < 0) {
            first = l;
        }
        if (rank == 0 && (step % 10 == 0 || step == steps - 1)) {
            printf("step %ld loss %.6f\n", step, l);
        }
    }
    // Same weights everywhere: the bitwise min and max of a checksum agree.
    uint64_t sum = 1469598103934665603ull;
    const unsigned char *p = (const unsigned char *)w;
    for (size_t i = 0; i < dim * sizeof(float); i++) {
        sum = (sum ^ p[i]) * 1099511628211ull;
    }
    int64_t lo = (int64_t)(sum >> 1), hi = lo;
    if (check(hv_allreduce(&lo, &lo, 1, HV_INT64, HV_MIN), "checksum min") != 0 ||
        check(hv_allreduce(&hi, &hi, 1, HV_INT64, HV_MAX), "checksum max") != 0) {
        goto out;
    }
    if (lo != hi) {
        fprintf(stderr, "train: rank %d: weights differ between ranks\n", rank);
        goto out;
    }
    if (rank == 0) {
        printf("train: %d ranks, %ld steps, loss %.4f -> %.4f, weights identical\n", size, steps,
               first, loss);
    }
    rc = 0;
out:
    fflush(stdout);
    free(w);
    free(grad);
    free(truth);
    free(x);
    free(h);
    free(names);
    if (rc == 0 && check(hv_shutdown(), "hv_shutdown") != 0) {
        rc = 1;
    }
    return rc;
}
