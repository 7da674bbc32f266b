/*
 * nccl_test (label gpu): collectives on CUDA device buffers. Ranks run as threads with
 * rdzv_local (as coll_test does). "staging": device tensors without NCCL go through pinned host
 * memory and the TCP/shm ring (2 ranks may share one GPU). "nccl": with at least 2 GPUs, the
 * same through an NCCL communicator (one GPU per rank). Without a CUDA device every case skips
 * (and says so): this build or machine has no GPU.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "engine.h"
#include "hvtest.h"
#include "log.h"
#include "mem.h"
#include "rdzv.h"
#include "transport_nccl.h"
#include "world.h"

typedef struct gctx_s {
    int rank, size, use_nccl;
    hv__rdzv_local_store_t *store;
} gctx_t;

static void *gpu_rank(void *arg) {
    gctx_t *c = arg;
    hv__world_opts_t o = {.bind_addr = "127.0.0.1:0",
                          .host_name = "g0",
                          .spin_us = UINT32_MAX,
                          .small_bytes = SIZE_MAX,
                          .spec_bytes = SIZE_MAX,
                          .use_nccl = c->use_nccl,
                          .peer_timeout_ms = 20000};
    hv__world_t *w = NULL;
    if (hv__rdzv_local_client(c->store, c->rank, &o.rdzv) != HV_OK ||
        hv__world_create(&o, &w) != HV_OK) {
        HVT_FAIL("rank %d: world", c->rank);
        return NULL;
    }
    hv__engine_t *e = hv__world_engine(w);
    size_t counts[3] = {1, 1031, 1u << 20};
    for (int t = 0; t < 3 && !hvtest_failed; t++) {
        size_t n = counts[t];
        float *host = hv_malloc(n * sizeof(float));
        void *dev = NULL;
        if (hv__gpu_device_alloc(n * sizeof(float), &dev) != HV_OK) {
            HVT_FAIL("cudaMalloc");
            hv_free(host);
            break;
        }
        for (size_t i = 0; i < n; i++) {
            host[i] = (float)(i % 100 + (size_t)c->rank);
        }
        hv__gpu_memcpy(dev, host, n * sizeof(float));
        char name[32];
        snprintf(name, sizeof(name), "dev.%d", t);
        hv__op_desc_t d = {.kind = HV__OP_ALLREDUCE,
                           .name = name,
                           .in = dev,
                           .out = dev,
                           .count = n,
                           .dtype = HV_FLOAT32,
                           .op = HV_SUM};
        hv_handle_t h;
        hv_err rc = hv__engine_submit(e, &d, 1, &h);
        if (rc == HV_OK) {
            rc = hv__engine_wait(e, h);
        }
        if (rc != HV_OK) {
            HVT_FAIL("rank %d: device allreduce of %zu: %s", c->rank, n, hv_strerror(rc));
        } else {
            hv__gpu_memcpy(host, dev, n * sizeof(float));
            float base = (float)(c->size * (c->size - 1) / 2);
            for (size_t i = 0; i < n; i++) {
                float want = (float)(i % 100) * (float)c->size + base;
                if (host[i] != want) {
                    HVT_FAIL("rank %d: [%zu] = %g, want %g", c->rank, i, (double)host[i],
                             (double)want);
                    break;
                }
            }
        }
        hv__gpu_device_free(dev);
        hv_free(host);
    }
    hv__world_destroy(w, 1);
    return NULL;
}

static void run_gpu(int n, int use_nccl) {
    hv_log_init("nccl_test");
    hv__rdzv_local_store_t *store = NULL;
    ASSERT_OK(hv__rdzv_local_store_create(n, &store));
    gctx_t cs[4];
    pthread_t th[4];
    for (int i = 0; i < n; i++) {
        cs[i] = (gctx_t){.rank = i, .size = n, .use_nccl = use_nccl, .store = store};
        pthread_create(&th[i], NULL, gpu_rank, &cs[i]);
    }
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
    }
    hv__rdzv_local_store_destroy(store);
}

static void test_staging(void) {
    if (hv__gpu_count() == 0) {
        fprintf(stderr, "  skipped: no CUDA device\n");
        return;
    }
    run_gpu(2, 0);
}

static void test_nccl(void) {
    if (hv__gpu_count() < 2) {
        fprintf(stderr, "  skipped: NCCL needs one GPU per rank (%d visible)\n", hv__gpu_count());
        return;
    }
    run_gpu(2, 1);
}

static const hvtest_case_t cases[] = {
    {"staging", test_staging},
    {"nccl", test_nccl},
};

HVTEST_MAIN(cases)
