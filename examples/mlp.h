/*
 * mlp: the model of the Fashion-MNIST examples, a multi-layer perceptron 784-256-128-10 (ReLU,
 * softmax cross-entropy, float32): the layout of its parameters in one float array, the forward
 * pass, the weight initialisation, the evaluation of a range of a data set, and the model as
 * bytes (an epoch number and the parameters) as examples/elastic_train sends it to the
 * evaluation actor examples/eval_actor. The backward pass is training's, in elastic_train.c.
 * Example code, not part of libhv; compiled with -O3 (its loops are written for the
 * auto-vectoriser). Not thread-safe with respect to the same mlp_acts_t.
 */
#ifndef HV_EXAMPLES_MLP_H
#define HV_EXAMPLES_MLP_H

#include <stddef.h>
#include <stdint.h>

#include <hv/hv.h>

#include "fmnist.h"

#define MLP_IN FMNIST_PIXELS
#define MLP_H1 256
#define MLP_H2 128
#define MLP_OUT FMNIST_CLASSES

/* Every parameter in one float array: w1[MLP_IN][MLP_H1], b1, w2[MLP_H1][MLP_H2], b2,
 * w3[MLP_H2][MLP_OUT], b3. A weight matrix is stored input-major (row i holds the weights from
 * input i to every output), so the forward pass and the weight gradient run along contiguous
 * rows. */
#define MLP_OFF_W1 0
#define MLP_OFF_B1 (MLP_OFF_W1 + MLP_IN * MLP_H1)
#define MLP_OFF_W2 (MLP_OFF_B1 + MLP_H1)
#define MLP_OFF_B2 (MLP_OFF_W2 + MLP_H1 * MLP_H2)
#define MLP_OFF_W3 (MLP_OFF_B2 + MLP_H2)
#define MLP_OFF_B3 (MLP_OFF_W3 + MLP_H2 * MLP_OUT)
#define MLP_PARAMS (MLP_OFF_B3 + MLP_OUT)

#define MLP_EVAL_BATCH 256 /* test samples per forward pass at evaluation */

/* Activations of one batch, sample after sample (cap samples each). Caller storage; the arrays
 * are owned (mlp_acts_init allocates them, mlp_acts_fini frees them). */
typedef struct mlp_acts_s {
    size_t cap;
    float *x;   /* [cap][MLP_IN] inputs scaled to [0, 1] */
    float *a1;  /* [cap][MLP_H1] first hidden layer after ReLU */
    float *a2;  /* [cap][MLP_H2] second hidden layer after ReLU */
    float *z;   /* [cap][MLP_OUT] logits */
    float *dz;  /* [cap][MLP_OUT] loss gradient at the logits: softmax - one-hot */
    float *d2;  /* [cap][MLP_H2] loss gradient at the second layer's pre-activation (training) */
    float *d1;  /* [cap][MLP_H1] loss gradient at the first layer's pre-activation (training) */
    uint8_t *y; /* [cap] labels */
} mlp_acts_t;

/* A float array of n elements, 64-byte aligned (free()); NULL when out of memory. */
float *mlp_alloc_floats(size_t n);

/* Allocates the activations of cap samples (cap >= 1) into *A. HV_ENOMEM (nothing allocated),
 * HV_EINVAL. */
hv_err mlp_acts_init(mlp_acts_t *A, size_t cap);

/* Frees what mlp_acts_init allocated and zeroes *A. NULL is a no-op. */
void mlp_acts_fini(mlp_acts_t *A);

/* He-uniform weights for the ReLU layers, Glorot-uniform for the output layer, zero biases, from
 * seed (p: MLP_PARAMS floats). */
void mlp_init_params(float *p, uint64_t seed);

/* Scales the samples idx[0..n) of d to [0, 1] into A's input rows, their labels into A->y
 * (n <= A->cap). */
void mlp_load_batch(mlp_acts_t *A, const fmnist_t *d, const uint64_t *idx, size_t n);

/* Forward pass of n samples (A->x, A->y filled): returns the summed cross-entropy loss, and the
 * number of correct predictions in *correct; A->dz receives the loss gradient at the logits. */
double mlp_forward(const float *p, mlp_acts_t *A, size_t n, uint64_t *correct);

/* Classifies the samples [lo, hi) of d with the parameters p, MLP_EVAL_BATCH at a time (A->cap
 * must be at least that): the correct predictions into *correct, the summed cross-entropy loss
 * into *loss_sum. */
void mlp_test(const float *p, const fmnist_t *d, size_t lo, size_t hi, mlp_acts_t *A,
              uint64_t *correct, double *loss_sum);

/* ---- the model as bytes --------------------------------------------------------------------- */

/* An evaluation request: a 24-byte header, then the parameters, each a little-endian IEEE-754
 * float32:
 *   "HVMLP1\0\0" (8 bytes)  u64 epoch (little-endian)  u32 MLP_PARAMS  u32 0
 * (MLP_MODEL_BYTES in all, about 0.9 MiB: under an actor's default 4 MiB frame limit). */
#define MLP_MODEL_MAGIC "HVMLP1\0\0"
#define MLP_MODEL_HEADER 24
#define MLP_MODEL_BYTES (MLP_MODEL_HEADER + (size_t)MLP_PARAMS * 4)

/* Writes epoch and the parameters p (MLP_PARAMS floats) into buf (MLP_MODEL_BYTES bytes). */
void mlp_model_encode(uint64_t epoch, const float *p, unsigned char *buf);

/* Reads a request of len bytes into *epoch and p (MLP_PARAMS floats). HV_EINVAL when it is not
 * one, with why in err (errlen bytes, may be NULL): a wrong size, magic or parameter count (a
 * model of another shape). */
hv_err mlp_model_decode(const void *buf, size_t len, uint64_t *epoch, float *p, char *err,
                        size_t errlen);

#endif
