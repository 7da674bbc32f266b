/*
 * bench_mpi: the peer measurement for bench_allreduce: MPI_Allreduce (in place, float32 sum)
 * with the same sizes, iteration counts and output as libhv's benchmark, and the ResNet-50
 * step as one MPI_Allreduce per tensor in reverse order (what a framework without fusion does).
 * Run it under mpirun; bench_allreduce.sh does, once forced to TCP and once with defaults.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_common.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int used[256] = {0};
    bench_cfg_t c = {0};
    if (argc > 255 || bench_parse(argc, argv, &c, used) != 0) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    size_t max = 0;
    for (int i = 0; i < c.nsizes; i++) {
        max = c.sizes[i] > max ? c.sizes[i] : max;
    }
    float *buf = malloc(max + 64);
    for (size_t i = 0; i < max / sizeof(float); i++) {
        buf[i] = 1.0f;
    }
    for (int s = 0; s < c.nsizes; s++) {
        int count = (int)(c.sizes[s] / sizeof(float));
        int iters = bench_iters(c.sizes[s]);
        double t[16];
        for (int w = 0; w < (iters > 10 ? 10 : 2); w++) {
            MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
        for (int r = 0; r < c.runs && r < 16; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = bench_now();
            for (int i = 0; i < iters; i++) {
                MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            }
            t[r] = (bench_now() - t0) / iters;
        }
        if (rank == 0) {
            bench_row("allreduce", (size_t)count * sizeof(float), bench_median(t, c.runs), size);
        }
    }
    free(buf);
    if (c.resnet != NULL) {
        static size_t counts[BENCH_MAX_TENSORS];
        int nt = bench_read_counts(c.resnet, counts, BENCH_MAX_TENSORS);
        if (nt <= 0) {
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        float *bufs[BENCH_MAX_TENSORS];
        size_t total = 0;
        for (int i = 0; i < nt; i++) {
            bufs[i] = malloc(counts[i] * sizeof(float) + 64);
            for (size_t k = 0; k < counts[i]; k++) {
                bufs[i][k] = 0.5f;
            }
            total += counts[i] * sizeof(float);
        }
        double t[64];
        int steps = c.resnet_steps < 64 ? c.resnet_steps : 64;
        for (int s = -2; s < steps; s++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = bench_now();
            for (int i = nt - 1; i >= 0; i--) {
                MPI_Allreduce(MPI_IN_PLACE, bufs[i], (int)counts[i], MPI_FLOAT, MPI_SUM,
                              MPI_COMM_WORLD);
            }
            if (s >= 0) {
                t[s] = bench_now() - t0;
            }
        }
        if (rank == 0) {
            bench_row("resnet", total, bench_median(t, steps), size);
        }
        for (int i = 0; i < nt; i++) {
            free(bufs[i]);
        }
    }
    MPI_Finalize();
    return 0;
}
