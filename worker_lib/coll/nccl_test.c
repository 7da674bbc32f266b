/*
 * nccl_test (label gpu): collectives on CUDA device buffers. Ranks run as threads with
 * rdzv_local (as coll_test does), all on one host. Cases:
 *   staging     device tensors without NCCL: staged through pinned host memory and the ring;
 *   nccl        one GPU per rank: allreduce, broadcast and allgather run on NCCL (the world must
 *               say so), results checked element by element;
 *   shared_gpu  more ranks than GPUs on the host: NCCL would refuse, so every rank agrees to
 *               stage instead, and the results are still right;
 *   mismatch    one rank passes device memory, another host memory, for one name: both get
 *               HV_EPROTO, and the next operation works;
 *   wrong_device  with NCCL, a tensor on another GPU than the communicator's: HV_EINVAL at
 *               submission, nothing queued.
 * Without a CUDA device every case skips and says so. tests/gpusim runs this test on the CPU
 * stand-in for CUDA/NCCL (label unit); on a GPU machine it runs as is (label gpu).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "hvtest.h"
#include "log.h"
#include "mem.h"
#include "rdzv.h"
#include "transport_nccl.h"
#include "world.h"

#define MAX_RANKS 4

typedef struct gctx_s gctx_t;
typedef void (*body_fn)(gctx_t *c, hv__engine_t *e);

struct gctx_s {
    int rank, size;
    int use_nccl;    // ask for NCCL (HV_NCCL)
    int expect_nccl; // what the world must have decided: 1, 0, or -1 (either)
    body_fn body;
    hv__rdzv_local_store_t *store;
};

/* ---- helpers --------------------------------------------------------------------------------- */

/* A device copy of n elements of dt, element i = v(i). NULL (and a failure) on error. */
static void *dev_make(hv_dtype dt, size_t n, double (*v)(size_t i, int rank), int rank) {
    size_t bytes = n * hv_dtype_size(dt);
    void *host = hv_malloc(bytes ? bytes : 1);
    void *dev = NULL;
    if (host == NULL || hv__gpu_device_alloc(-1, bytes, &dev) != HV_OK) {
        HVT_FAIL("rank %d: cannot allocate %zu device bytes", rank, bytes);
        hv_free(host);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        hvtest_store(dt, host, i, v(i, rank));
    }
    if (hv__gpu_memcpy(dev, host, bytes) != HV_OK) {
        HVT_FAIL("rank %d: host -> device copy failed", rank);
    }
    hv_free(host);
    return dev;
}

/* Compares n device elements with want(i, arg); reports the first difference. */
static void dev_check(const char *what, int rank, hv_dtype dt, const void *dev, size_t n,
                      double (*want)(size_t i, int arg), int arg) {
    size_t bytes = n * hv_dtype_size(dt);
    void *host = hv_malloc(bytes ? bytes : 1);
    if (host == NULL || hv__gpu_memcpy(host, dev, bytes) != HV_OK) {
        HVT_FAIL("rank %d: %s: device -> host copy failed", rank, what);
        hv_free(host);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        double got = hvtest_load(dt, host, i), w = want(i, arg);
        if (got != w) {
            HVT_FAIL("rank %d: %s: [%zu] = %g, want %g", rank, what, i, got, w);
            break;
        }
    }
    hv_free(host);
}

static hv_err run1(hv__engine_t *e, const hv__op_desc_t *d) {
    hv_handle_t h;
    hv_err rc = hv__engine_submit(e, d, 1, &h);
    return rc == HV_OK ? hv__engine_wait(e, h) : rc;
}

static double v_mod100(size_t i, int rank) { return (double)(i % 100) + rank; }
static double w_mod100(size_t i, int size) {
    return (double)(i % 100) * size + (double)(size * (size - 1) / 2);
}
static double v_mod7(size_t i, int rank) { return (double)(i % 7) + rank; }
static double w_mod7_avg(size_t i, int size) { return (double)(i % 7) + (size - 1) / 2.0; }
static double v_max(size_t i, int rank) { return (double)(rank * 1000) + (double)i; }
static double w_max(size_t i, int size) { return (double)((size - 1) * 1000) + (double)i; }
static double v_zero(size_t i, int rank) {
    (void)i;
    (void)rank;
    return 0;
}
static double v_root(size_t i, int rank) { return rank == 1 ? (double)i * 3 : -1; }
static double w_root(size_t i, int size) {
    (void)size;
    return (double)i * 3;
}
static double v_piece(size_t i, int rank) { return rank * 100 + (double)i; }
static double v_byte(size_t i, int rank) { return (double)((rank * 64 + (int)i) % 256); }
static double w_byte(size_t i, int size) {
    (void)size;
    return (double)(i % 256);
}

/* ---- bodies ---------------------------------------------------------------------------------- */

/* Every collective on device tensors, checked against the reference. */
static void body_collectives(gctx_t *c, hv__engine_t *e) {
    int r = c->rank, n = c->size;
    // In-place float32 sums across sizes (one element, a prime, 4 MiB).
    size_t counts[3] = {1, 1031, 1u << 20};
    for (int t = 0; t < 3 && !hvtest_failed; t++) {
        void *d = dev_make(HV_FLOAT32, counts[t], v_mod100, r);
        char name[32];
        snprintf(name, sizeof(name), "sum.%d", t);
        hv__op_desc_t op = {.kind = HV__OP_ALLREDUCE,
                            .name = name,
                            .in = d,
                            .out = d,
                            .count = counts[t],
                            .dtype = HV_FLOAT32,
                            .op = HV_SUM};
        hv_err rc = d != NULL ? run1(e, &op) : HV_ENOMEM;
        if (rc != HV_OK) {
            HVT_FAIL("rank %d: %s of %zu: %s", r, name, counts[t], hv_strerror(rc));
        } else {
            dev_check(name, r, HV_FLOAT32, d, counts[t], w_mod100, n);
        }
        hv__gpu_device_free(d);
    }
    // Out of place, float64 average.
    void *in = dev_make(HV_FLOAT64, 4099, v_mod7, r), *out = dev_make(HV_FLOAT64, 4099, v_zero, r);
    hv__op_desc_t avg = {.kind = HV__OP_ALLREDUCE,
                         .name = "avg",
                         .in = in,
                         .out = out,
                         .count = 4099,
                         .dtype = HV_FLOAT64,
                         .op = HV_AVG};
    if (in != NULL && out != NULL) {
        hv_err rc = run1(e, &avg);
        if (rc != HV_OK) {
            HVT_FAIL("rank %d: avg: %s", r, hv_strerror(rc));
        } else {
            dev_check("avg (out)", r, HV_FLOAT64, out, 4099, w_mod7_avg, n);
            dev_check("avg (in untouched)", r, HV_FLOAT64, in, 4099, v_mod7, r);
        }
    }
    hv__gpu_device_free(in);
    hv__gpu_device_free(out);
    // A group of three int32 MAX tensors: one fused batch.
    size_t gc[3] = {10, 1000, 100000};
    void *g[3];
    hv__op_desc_t gd[3];
    for (int t = 0; t < 3; t++) {
        g[t] = dev_make(HV_INT32, gc[t], v_max, r);
        static const char *names[3] = {"grp.a", "grp.b", "grp.c"};
        gd[t] = (hv__op_desc_t){.kind = HV__OP_ALLREDUCE,
                                .name = names[t],
                                .in = g[t],
                                .out = g[t],
                                .count = gc[t],
                                .dtype = HV_INT32,
                                .op = HV_MAX};
    }
    hv_handle_t h;
    hv_err rc = hv__engine_submit(e, gd, 3, &h);
    if (rc == HV_OK) {
        rc = hv__engine_wait(e, h);
    }
    if (rc != HV_OK) {
        HVT_FAIL("rank %d: group: %s", r, hv_strerror(rc));
    }
    for (int t = 0; t < 3; t++) {
        if (rc == HV_OK) {
            dev_check(gd[t].name, r, HV_INT32, g[t], gc[t], w_max, n);
        }
        hv__gpu_device_free(g[t]);
    }
    // Broadcast from rank 1.
    void *b = dev_make(HV_FLOAT32, 1000, v_root, r);
    hv__op_desc_t bd = {.kind = HV__OP_BROADCAST,
                        .name = "bcast",
                        .in = b,
                        .out = b,
                        .count = 1000,
                        .dtype = HV_FLOAT32,
                        .root = 1};
    if ((rc = run1(e, &bd)) != HV_OK) {
        HVT_FAIL("rank %d: broadcast: %s", r, hv_strerror(rc));
    } else {
        dev_check("broadcast", r, HV_FLOAT32, b, 1000, w_root, n);
    }
    hv__gpu_device_free(b);
    // Allgather with per-rank counts (rank k gives (k + 1) * 5 elements), then equal counts.
    size_t mine = (size_t)(r + 1) * 5, total = 0;
    for (int k = 0; k < n; k++) {
        total += (size_t)(k + 1) * 5;
    }
    void *pin = dev_make(HV_INT32, mine, v_piece, r), *pout = dev_make(HV_INT32, total, v_zero, r);
    size_t got_counts[MAX_RANKS] = {0};
    hv__op_desc_t ad = {.kind = HV__OP_ALLGATHER,
                        .name = "gatherv",
                        .in = pin,
                        .out = pout,
                        .count = mine,
                        .dtype = HV_INT32,
                        .out_cap = total,
                        .counts = got_counts};
    if ((rc = run1(e, &ad)) != HV_OK) {
        HVT_FAIL("rank %d: allgather: %s", r, hv_strerror(rc));
    } else {
        int32_t *host = hv_malloc(total * sizeof(int32_t));
        hv__gpu_memcpy(host, pout, total * sizeof(int32_t));
        size_t off = 0;
        for (int k = 0; k < n && !hvtest_failed; k++) {
            if (got_counts[k] != (size_t)(k + 1) * 5) {
                HVT_FAIL("rank %d: allgather count of rank %d = %zu", r, k, got_counts[k]);
            }
            for (size_t j = 0; j < (size_t)(k + 1) * 5; j++, off++) {
                if (host[off] != k * 100 + (int32_t)j) {
                    HVT_FAIL("rank %d: allgather [%zu] = %d, want %d", r, off, host[off],
                             k * 100 + (int)j);
                    break;
                }
            }
        }
        hv_free(host);
    }
    hv__gpu_device_free(pin);
    hv__gpu_device_free(pout);
    void *ein = dev_make(HV_UINT8, 64, v_byte, r), *eout = dev_make(HV_UINT8, 64 * n, v_zero, r);
    hv__op_desc_t ed = {.kind = HV__OP_ALLGATHER,
                        .name = "gather",
                        .in = ein,
                        .out = eout,
                        .count = 64,
                        .dtype = HV_UINT8,
                        .out_cap = 64 * (size_t)n};
    if ((rc = run1(e, &ed)) != HV_OK) {
        HVT_FAIL("rank %d: equal allgather: %s", r, hv_strerror(rc));
    } else {
        dev_check("equal allgather", r, HV_UINT8, eout, 64 * (size_t)n, w_byte, n);
    }
    hv__gpu_device_free(ein);
    hv__gpu_device_free(eout);
}

/* Rank 0 passes device memory, the others host memory, for one name. */
static void body_mismatch(gctx_t *c, hv__engine_t *e) {
    float host[16] = {0};
    void *dev = c->rank == 0 ? dev_make(HV_FLOAT32, 16, v_zero, 0) : NULL;
    hv__op_desc_t d = {.kind = HV__OP_ALLREDUCE,
                       .name = "mixed",
                       .in = c->rank == 0 ? dev : host,
                       .out = c->rank == 0 ? dev : host,
                       .count = 16,
                       .dtype = HV_FLOAT32,
                       .op = HV_SUM};
    hv_err rc = run1(e, &d);
    if (rc != HV_EPROTO) {
        HVT_FAIL("rank %d: mixed device/host: got %s, want HV_EPROTO", c->rank, hv_errname(rc));
    }
    char why[512];
    hv__engine_last_error(e, why, sizeof(why));
    if (strstr(why, "device memory") == NULL || strstr(why, "host memory") == NULL) {
        HVT_FAIL("rank %d: the error does not say device vs host: '%s'", c->rank, why);
    }
    hv__gpu_device_free(dev);
    // The engine is not broken: a matching operation goes through.
    for (int i = 0; i < 16; i++) {
        host[i] = (float)c->rank;
    }
    hv__op_desc_t ok = {.kind = HV__OP_ALLREDUCE,
                        .name = "after",
                        .in = host,
                        .out = host,
                        .count = 16,
                        .dtype = HV_FLOAT32,
                        .op = HV_SUM};
    ASSERT_OK(run1(e, &ok));
    ASSERT_EQ_INT(host[15], c->size * (c->size - 1) / 2);
}

/* With NCCL on device d, a tensor on another device is refused at submission. */
static void body_wrong_device(gctx_t *c, hv__engine_t *e) {
    if (c->rank == 0) {
        // The communicator's device is the thread's current one (hv__nccl_create set it).
        void *p = NULL;
        void *probe = dev_make(HV_FLOAT32, 1, v_zero, 0);
        int mine = hv__gpu_device_of(probe);
        hv__gpu_device_free(probe);
        int other = (mine + 1) % hv__gpu_count();
        ASSERT_OK(hv__gpu_device_alloc(other, 64, &p));
        hv__op_desc_t d = {.kind = HV__OP_ALLREDUCE,
                           .name = "elsewhere",
                           .in = p,
                           .out = p,
                           .count = 16,
                           .dtype = HV_FLOAT32,
                           .op = HV_SUM};
        hv_handle_t h;
        hv_err rc = hv__engine_submit(e, &d, 1, &h);
        hv__gpu_device_free(p);
        if (rc != HV_EINVAL) {
            HVT_FAIL("tensor on device %d (communicator on %d): got %s, want HV_EINVAL", other,
                     mine, hv_errname(rc));
        }
    }
    // Both ranks go on with a tensor on the right device.
    void *d = dev_make(HV_FLOAT32, 1031, v_mod100, c->rank);
    hv__op_desc_t op = {.kind = HV__OP_ALLREDUCE,
                        .name = "right",
                        .in = d,
                        .out = d,
                        .count = 1031,
                        .dtype = HV_FLOAT32,
                        .op = HV_SUM};
    hv_err rc = run1(e, &op);
    if (rc != HV_OK) {
        HVT_FAIL("rank %d: allreduce after the refusal: %s", c->rank, hv_strerror(rc));
    } else {
        dev_check("after the refusal", c->rank, HV_FLOAT32, d, 1031, w_mod100, c->size);
    }
    hv__gpu_device_free(d);
}

/* ---- runner ---------------------------------------------------------------------------------- */

static void *rank_main(void *arg) {
    gctx_t *c = arg;
    hv__world_opts_t o = {.bind_addr = "127.0.0.1:0",
                          .host_name = "g0",
                          .spin_us = UINT32_MAX,
                          .small_bytes = SIZE_MAX,
                          .spec_bytes = SIZE_MAX,
                          .use_nccl = c->use_nccl,
                          .shm_bytes = 1u << 20,
                          .peer_timeout_ms = 20000};
    hv__world_t *w = NULL;
    if (hv__rdzv_local_client(c->store, c->rank, &o.rdzv) != HV_OK ||
        hv__world_create(&o, &w) != HV_OK) {
        HVT_FAIL("rank %d: world", c->rank);
        return NULL;
    }
    int nccl = hv__world_uses_nccl(w);
    if (c->expect_nccl >= 0 && nccl != c->expect_nccl) {
        HVT_FAIL("rank %d: NCCL %s, want %s", c->rank, nccl ? "on" : "off",
                 c->expect_nccl ? "on" : "off");
    } else {
        c->body(c, hv__world_engine(w));
    }
    hv__world_destroy(w, 1);
    return NULL;
}

static void run_ranks(int n, int use_nccl, int expect_nccl, body_fn body) {
    hv_log_init("nccl_test");
    hv__rdzv_local_store_t *store = NULL;
    ASSERT_OK(hv__rdzv_local_store_create(n, &store));
    gctx_t cs[MAX_RANKS];
    pthread_t th[MAX_RANKS];
    for (int i = 0; i < n; i++) {
        cs[i] = (gctx_t){.rank = i,
                         .size = n,
                         .use_nccl = use_nccl,
                         .expect_nccl = expect_nccl,
                         .body = body,
                         .store = store};
        pthread_create(&th[i], NULL, rank_main, &cs[i]);
    }
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
    }
    hv__rdzv_local_store_destroy(store);
}

static int need_gpus(int n) {
    int have = hv__gpu_count();
    if (have < n) {
        HVT_SKIP("needs %d CUDA device(s), %d visible", n, have);
        return 0;
    }
    return 1;
}

static void test_staging(void) {
    if (need_gpus(1)) {
        run_ranks(2, 0, 0, body_collectives);
    }
}

static void test_nccl(void) {
    if (need_gpus(2)) {
        run_ranks(2, 1, 1, body_collectives);
    }
}

static void test_shared_gpu(void) {
    int have = hv__gpu_count();
    if (!need_gpus(1)) {
        return;
    }
    if (have + 1 > MAX_RANKS) {
        HVT_SKIP("%d devices: would need %d ranks", have, have + 1);
        return;
    }
    run_ranks(have + 1, 1, 0, body_collectives);
}

static void test_mismatch(void) {
    if (need_gpus(1)) {
        run_ranks(2, 0, -1, body_mismatch);
    }
}

static void test_wrong_device(void) {
    if (need_gpus(2)) {
        run_ranks(2, 1, 1, body_wrong_device);
    }
}

static const hvtest_case_t cases[] = {
    {"staging", test_staging},           {"nccl", test_nccl},
    {"shared_gpu", test_shared_gpu},     {"mismatch", test_mismatch},
    {"wrong_device", test_wrong_device},
};

HVTEST_MAIN(cases)
