/*
 * gpu_allreduce: libhv on CUDA device buffers, as a training step would use it. Each rank fills
 * a device buffer with its rank + 1 and element index, averages it over the job in place
 * (hv_allreduce with HV_AVG), broadcasts a device buffer from the last rank and gathers one
 * value per rank (hv_allgather), then checks every element on the host and prints one line.
 * hv_init has made GPU local_rank % visible devices current, so cudaMalloc lands there; libhv
 * runs the collectives on NCCL when every rank has a GPU of its own, else stages them through
 * host memory. Built only when CUDA and NCCL are found. Usage: gpu_allreduce [elements]
 * (default 1048576). Exit 0 when every check passed, 1 otherwise.
 */
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>
#include <hv/hv.h>

static int cuda_ok(cudaError_t e, const char *what) {
    if (e != cudaSuccess) {
        fprintf(stderr, "gpu_allreduce: %s: %s\n", what, cudaGetErrorString(e));
        return 0;
    }
    return 1;
}

static int hv_ok(hv_err rc, const char *what) {
    if (rc != HV_OK) {
        char detail[256];
        fprintf(stderr, "gpu_allreduce: %s: %s (%s)\n", what, hv_strerror(rc),
                hv_last_error(detail, sizeof(detail)));
        return 0;
    }
    return 1;
}

int main(int argc, char **argv) {
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1u << 20;
    if (n == 0) {
        fprintf(stderr, "gpu_allreduce: elements must be a positive number, got '%s'\n", argv[1]);
        return 2;
    }
    if (!hv_ok(hv_init(), "hv_init")) {
        return 1;
    }
    int rank = hv_rank(), size = hv_size(), dev = -1, bad = 0;
    float *host = malloc(n * sizeof(float));
    float *buf = NULL, *bc = NULL, *all = NULL;
    int32_t mine = rank * 7, *gathered = NULL;
    if (host == NULL || !cuda_ok(cudaGetDevice(&dev), "cudaGetDevice") ||
        !cuda_ok(cudaMalloc((void **)&buf, n * sizeof(float)), "cudaMalloc") ||
        !cuda_ok(cudaMalloc((void **)&bc, 256 * sizeof(float)), "cudaMalloc") ||
        !cuda_ok(cudaMalloc((void **)&all, (size_t)size * sizeof(int32_t)), "cudaMalloc")) {
        bad = 1;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        host[i] = (float)(rank + 1) + (float)(i % 1000);
    }
    // The step: average the "gradients" over every rank, on the device.
    if (!cuda_ok(cudaMemcpy(buf, host, n * sizeof(float), cudaMemcpyHostToDevice), "upload") ||
        !hv_ok(hv_allreduce(buf, buf, n, HV_FLOAT32, HV_AVG), "hv_allreduce") ||
        !cuda_ok(cudaMemcpy(host, buf, n * sizeof(float), cudaMemcpyDeviceToHost), "download")) {
        bad = 1;
        goto out;
    }
    float mean_rank = (float)(size + 1) / 2.0f;
    for (size_t i = 0; i < n; i++) {
        float want = mean_rank + (float)(i % 1000);
        if (host[i] != want) {
            fprintf(stderr, "gpu_allreduce: rank %d: element %zu is %g, want %g\n", rank, i,
                    (double)host[i], (double)want);
            bad = 1;
            goto out;
        }
    }
    // Parameters from the last rank; then one value from every rank.
    for (int i = 0; i < 256; i++) {
        host[i] = rank == size - 1 ? (float)i * 0.5f : -1.0f;
    }
    gathered = malloc((size_t)size * sizeof(int32_t));
    int32_t *dmine = NULL;
    if (gathered == NULL ||
        !cuda_ok(cudaMemcpy(bc, host, 256 * sizeof(float), cudaMemcpyHostToDevice), "upload") ||
        !hv_ok(hv_broadcast(bc, 256, HV_FLOAT32, size - 1), "hv_broadcast") ||
        !cuda_ok(cudaMemcpy(host, bc, 256 * sizeof(float), cudaMemcpyDeviceToHost), "download") ||
        !cuda_ok(cudaMalloc((void **)&dmine, sizeof(int32_t)), "cudaMalloc") ||
        !cuda_ok(cudaMemcpy(dmine, &mine, sizeof(mine), cudaMemcpyHostToDevice), "upload") ||
        !hv_ok(hv_allgather(dmine, 1, HV_INT32, all, (size_t)size, NULL), "hv_allgather") ||
        !cuda_ok(cudaMemcpy(gathered, all, (size_t)size * sizeof(int32_t), cudaMemcpyDeviceToHost),
                 "download")) {
        bad = 1;
    }
    cudaFree(dmine);
    for (int i = 0; i < 256 && !bad; i++) {
        if (host[i] != (float)i * 0.5f) {
            fprintf(stderr, "gpu_allreduce: rank %d: broadcast element %d is %g\n", rank, i,
                    (double)host[i]);
            bad = 1;
        }
    }
    for (int k = 0; k < size && !bad; k++) {
        if (gathered[k] != k * 7) {
            fprintf(stderr, "gpu_allreduce: rank %d: gathered[%d] is %d\n", rank, k, gathered[k]);
            bad = 1;
        }
    }
    if (!bad) {
        printf("gpu_allreduce: rank %d of %d on GPU %d: average of %zu floats, broadcast and "
               "allgather on device buffers correct\n",
               rank, size, dev, n);
    }
out:
    fflush(stdout);
    cudaFree(buf);
    cudaFree(bc);
    cudaFree(all);
    free(host);
    free(gathered);
    hv_err rc = hv_shutdown();
    return bad || rc != HV_OK ? 1 : 0;
}
