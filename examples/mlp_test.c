/*
 * mlp_test: unit tests of the examples' model (mlp.c): the model as bytes that elastic_train
 * sends to the evaluation actor (a round trip, the byte order on the wire, and each malformed
 * request refused with its reason), and mlp_test's counts on a data set whose answer is known.
 * `mlp_test` runs every case, `mlp_test NAME` one.
 */
#include "hv_check.h" // first: common/err.h before hv/hv.h's copy

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mlp.h"

/* encode then decode gives the same epoch and the same bits. */
static void model_roundtrip(void) {
    float *p = mlp_alloc_floats(MLP_PARAMS), *q = mlp_alloc_floats(MLP_PARAMS);
    unsigned char *buf = malloc(MLP_MODEL_BYTES);
    CHECK(p != NULL && q != NULL && buf != NULL);
    if (p != NULL && q != NULL && buf != NULL) {
        mlp_init_params(p, 42);
        p[MLP_OFF_B3] = -0.0f;
        p[MLP_OFF_B3 + 1] = 1e-40f; // a subnormal
        mlp_model_encode(7, p, buf);
        uint64_t epoch = 0;
        char err[160] = "";
        CHECK_RC_MSG(mlp_model_decode(buf, MLP_MODEL_BYTES, &epoch, q, err, sizeof(err)), HV_OK,
                     err);
        CHECK_EQ(epoch, 7);
        CHECK(memcmp(p, q, MLP_PARAMS * sizeof(float)) == 0);
    }
    free(p);
    free(q);
    free(buf);
}

/* The header and the floats are little-endian whatever the host. */
static void model_bytes(void) {
    float *p = mlp_alloc_floats(MLP_PARAMS);
    unsigned char *buf = malloc(MLP_MODEL_BYTES);
    CHECK(p != NULL && buf != NULL);
    if (p != NULL && buf != NULL) {
        memset(p, 0, MLP_PARAMS * sizeof(float));
        p[0] = 1.0f;               // 0x3f800000
        p[MLP_PARAMS - 1] = -2.0f; // 0xc0000000
        mlp_model_encode(0x0102030405060708ull, p, buf);
        CHECK(memcmp(buf, "HVMLP1\0\0", 8) == 0);
        static const unsigned char epoch[8] = {8, 7, 6, 5, 4, 3, 2, 1};
        CHECK(memcmp(buf + 8, epoch, 8) == 0);
        CHECK_EQ(buf[16] | buf[17] << 8 | buf[18] << 16 | (long long)buf[19] << 24, MLP_PARAMS);
        static const unsigned char one[4] = {0, 0, 0x80, 0x3f}, minus2[4] = {0, 0, 0, 0xc0};
        CHECK(memcmp(buf + MLP_MODEL_HEADER, one, 4) == 0);
        CHECK(memcmp(buf + MLP_MODEL_BYTES - 4, minus2, 4) == 0);
    }
    free(p);
    free(buf);
}

/* Each malformed request is HV_EINVAL and says what is wrong; nothing is written to *epoch. */
static void model_rejects(void) {
    static const struct {
        const char *name;
        size_t at;          // a byte to change (SIZE_MAX: none)
        unsigned char to;   // its new value
        long long len_diff; // bytes more or fewer than MLP_MODEL_BYTES
        const char *says;   // a word of the message
    } cases[] = {
        {"short", SIZE_MAX, 0, -(long long)MLP_MODEL_BYTES + 10, "not a model"},
        {"empty", SIZE_MAX, 0, -(long long)MLP_MODEL_BYTES, "not a model"},
        {"magic", 0, 'X', 0, "HVMLP1"},
        {"count", 16, 0x11, 0, "parameters, this one has 235146"},
        {"reserved", 20, 1, 0, "parameters"},
        {"truncated", SIZE_MAX, 0, -4, "bytes, a model of this shape is"},
        {"trailing", SIZE_MAX, 0, 1, "bytes, a model of this shape is"},
    };
    float *p = mlp_alloc_floats(MLP_PARAMS);
    unsigned char *buf = calloc(1, MLP_MODEL_BYTES + 1);
    CHECK(p != NULL && buf != NULL);
    for (size_t i = 0; p != NULL && buf != NULL && i < sizeof(cases) / sizeof(cases[0]); i++) {
        memset(p, 0, MLP_PARAMS * sizeof(float));
        mlp_model_encode(3, p, buf);
        if (cases[i].at != SIZE_MAX) {
            buf[cases[i].at] = cases[i].to;
        }
        uint64_t epoch = 99;
        char err[160] = "";
        size_t len = (size_t)((long long)MLP_MODEL_BYTES + cases[i].len_diff);
        hv_err rc = mlp_model_decode(buf, len, &epoch, p, err, sizeof(err));
        if (rc != HV_EINVAL || strstr(err, cases[i].says) == NULL || epoch != 99) {
            fprintf(stderr, "case %s: got %s, epoch %llu, message '%s' (want HV_EINVAL, '%s')\n",
                    cases[i].name, hv_errname(rc), (unsigned long long)epoch, err, cases[i].says);
            hv_check_failures++;
        }
    }
    free(p);
    free(buf);
}

/* All-zero parameters give all-zero logits: every sample is classified 0 (the first of equal
 * logits) and its loss is log(10). Three samples, labels 0, 3, 0: 2 correct, 3 log(10), over
 * any range split. */
static void test_counts(void) {
    uint8_t images[3 * FMNIST_PIXELS] = {0}, labels[3] = {0, 3, 0};
    images[5] = 255;
    fmnist_t d = {.count = 3, .available = 3, .images = images, .labels = labels};
    float *p = mlp_alloc_floats(MLP_PARAMS);
    mlp_acts_t A;
    CHECK(p != NULL);
    CHECK_RC(mlp_acts_init(&A, MLP_EVAL_BATCH), HV_OK);
    if (p != NULL) {
        memset(p, 0, MLP_PARAMS * sizeof(float));
        uint64_t correct = 0, c1 = 0, c2 = 0;
        double loss = 0, l1 = 0, l2 = 0;
        mlp_test(p, &d, 0, 3, &A, &correct, &loss);
        CHECK_EQ(correct, 2);
        CHECK(fabs(loss - 3 * log(10.0)) < 1e-5);
        mlp_test(p, &d, 0, 1, &A, &c1, &l1);
        mlp_test(p, &d, 1, 3, &A, &c2, &l2);
        CHECK_EQ(c1 + c2, 2);
        CHECK(fabs(l1 + l2 - loss) < 1e-9);
    }
    mlp_acts_fini(&A);
    mlp_acts_fini(NULL);
    free(p);
}

HV_CHECK_MAIN(NULL, NULL, {"model_roundtrip", model_roundtrip}, {"model_bytes", model_bytes},
              {"model_rejects", model_rejects}, {"test_counts", test_counts})
