/*
 * bench_allreduce: libhv's allreduce benchmark (busbw per size, and a ResNet-50 step of 161
 * named async tensors submitted in reverse order). Two modes:
 *   bench_allreduce --launch N [opts]  forks N ranks of itself that meet through a temporary
 *                                      HV_RDZV_DIR (the standalone launcher);
 *   bench_allreduce [opts]             one rank under any launcher that sets libhv's
 *                                      environment (hvsubmit/hvagent, or the launcher above).
 * Options: --sizes 4K,1M,... --runs R --resnet COUNTS_FILE --steps S, and --device: the buffers
 * are CUDA device memory (cudaMalloc on the GPU hv_init made current; built with CUDA only), so
 * libhv runs them on NCCL (a GPU per rank) or stages them through host memory. Rank 0 prints ROW
 * lines (see bench_common.h). Uses only the public API (and the CUDA runtime for --device).
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hv/hv.h>

#include "bench_common.h"
#include "bench_hv.h"

#ifdef HV_BENCH_CUDA
#include <cuda_runtime_api.h>
#endif

static int on_device; // --device: buffers in CUDA device memory

/* A buffer of bytes (+64) filled with v, on the host or (--device) the current GPU. */
static float *buf_alloc(size_t bytes, float v) {
    size_t n = bytes / sizeof(float);
    float *h = malloc(bytes + 64);
    if (h == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        h[i] = v;
    }
    if (!on_device) {
        return h;
    }
#ifdef HV_BENCH_CUDA
    void *d = NULL;
    if (cudaMalloc(&d, bytes + 64) != cudaSuccess ||
        cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
        fprintf(stderr, "rank %d: cannot allocate %zu bytes on the GPU\n", hv_rank(), bytes);
        cudaFree(d);
        d = NULL;
    }
    free(h);
    return d;
#else
    free(h);
    return NULL;
#endif
}

static void buf_free(float *p) {
#ifdef HV_BENCH_CUDA
    if (on_device) {
        cudaFree(p);
        return;
    }
#endif
    free(p);
}

static int bench_sizes(const bench_cfg_t *c) {
    size_t max = 0;
    for (int i = 0; i < c->nsizes; i++) {
        max = c->sizes[i] > max ? c->sizes[i] : max;
    }
    float *buf = buf_alloc(max, 1.0f);
    if (buf == NULL) {
        return -1;
    }
    for (int s = 0; s < c->nsizes; s++) {
        size_t count = c->sizes[s] / sizeof(float);
        int iters = bench_iters(c->sizes[s]);
        double t[16];
        for (int w = 0; w < (iters > 10 ? 10 : 2); w++) {
            if (bench_check(hv_allreduce(buf, buf, count, HV_FLOAT32, HV_SUM), "warm-up") != 0) {
                return -1;
            }
        }
        for (int r = 0; r < c->runs && r < 16; r++) {
            if (bench_check(hv_barrier(), "barrier") != 0) {
                return -1;
            }
            double t0 = bench_now();
            for (int i = 0; i < iters; i++) {
                if (bench_check(hv_allreduce(buf, buf, count, HV_FLOAT32, HV_SUM), "allreduce") !=
                    0) {
                    return -1;
                }
            }
            t[r] = (bench_now() - t0) / iters;
        }
        if (hv_rank() == 0) {
            bench_row("allreduce", count * sizeof(float), bench_median(t, c->runs), hv_size());
        }
    }
    buf_free(buf);
    return 0;
}

static int bench_resnet(const bench_cfg_t *c) {
    static size_t counts[BENCH_MAX_TENSORS];
    int nt = bench_read_counts(c->resnet, counts, BENCH_MAX_TENSORS);
    if (nt <= 0) {
        return -1;
    }
    float *bufs[BENCH_MAX_TENSORS];
    char names[BENCH_MAX_TENSORS][32];
    hv_handle_t h[BENCH_MAX_TENSORS];
    size_t total = 0;
    for (int i = 0; i < nt; i++) {
        bufs[i] = buf_alloc(counts[i] * sizeof(float), 0.5f);
        if (bufs[i] == NULL) {
            return -1;
        }
        snprintf(names[i], sizeof(names[i]), "resnet50.grad.%d", i);
        total += counts[i] * sizeof(float);
    }
    double t[64];
    int steps = c->resnet_steps < 64 ? c->resnet_steps : 64;
    for (int s = -2; s < steps; s++) {
        if (bench_check(hv_barrier(), "barrier") != 0) {
            return -1;
        }
        double t0 = bench_now();
        // A backward pass hands gradients over in reverse registration order.
        for (int i = nt - 1; i >= 0; i--) {
            if (bench_check(hv_allreduce_async(names[i], bufs[i], bufs[i], counts[i], HV_FLOAT32,
                                               HV_SUM, &h[i]),
                            "allreduce_async") != 0) {
                return -1;
            }
        }
        for (int i = nt - 1; i >= 0; i--) {
            if (bench_check(hv_wait(h[i]), "wait") != 0) {
                return -1;
            }
        }
        if (s >= 0) {
            t[s] = bench_now() - t0;
        }
    }
    if (hv_rank() == 0) {
        bench_row("resnet", total, bench_median(t, steps), hv_size());
    }
    for (int i = 0; i < nt; i++) {
        buf_free(bufs[i]);
    }
    return 0;
}

static int worker(const bench_cfg_t *c) {
    if (bench_check(hv_init(), "hv_init") != 0) {
        return 1;
    }
    int rc = 0;
    if (c->nsizes > 0) {
        rc = bench_sizes(c);
    }
    if (rc == 0 && c->resnet != NULL) {
        rc = bench_resnet(c);
    }
    hv_shutdown();
    return rc == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    int used[256] = {0};
    bench_cfg_t c = {0};
    if (argc > 255 || bench_parse(argc, argv, &c, used) != 0) {
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        on_device |= strcmp(argv[i], "--device") == 0;
    }
#ifndef HV_BENCH_CUDA
    if (on_device) {
        fprintf(stderr, "bench_allreduce: --device needs a build with CUDA (none was found)\n");
        return 2;
    }
#endif
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--launch") == 0) {
            int n = atoi(argv[i + 1]);
            if (n < 1 || n > 64) {
                fprintf(stderr, "--launch N: 1..64\n");
                return 2;
            }
            // Children get the same arguments minus --launch N.
            char *args[256];
            int k = 0;
            for (int j = 0; j < argc; j++) {
                if (j == i || j == i + 1) {
                    continue;
                }
                args[k++] = argv[j];
            }
            args[k] = NULL;
            return bench_launch(n, args, "hv-bench");
        }
    }
    return worker(&c);
}
