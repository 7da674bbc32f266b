/*
 * bench_hv: what the libhv benchmarks (bench_allreduce, bench_sync) share beside bench_common.h,
 * which the MPI peer includes too: bench_check, which says which call failed on which rank.
 */
#ifndef HV_TESTS_PERF_BENCH_HV_H
#define HV_TESTS_PERF_BENCH_HV_H

#include <stdio.h>

#include <hv/hv.h>

/* bench_check: 0 when rc is HV_OK; else prints "rank R: WHAT: error (detail)" and returns -1. */
static inline int bench_check(hv_err rc, const char *what) {
    if (rc != HV_OK) {
        char detail[512];
        fprintf(stderr, "rank %d: %s: %s (%s)\n", hv_rank(), what, hv_strerror(rc),
                hv_last_error(detail, sizeof(detail)));
        return -1;
    }
    return 0;
}

#endif
