/*
 * gpusim_test (label unit): checks libhv_gpusim.so, the CPU stand-in for CUDA and NCCL, as a
 * program using the real CUDA/NCCL API would see it: device memory faults on host access and
 * round-trips through cudaMemcpy; pointer attributes; non-blocking communicators of 2 and 3 ranks
 * (threads, one device each) running every collective, dtype and op libhv uses, alone and in
 * groups; NCCL's duplicate-GPU error; a stalled peer (pending until ncclCommAbort, which returns
 * at once); a dead peer process (ncclRemoteError). It links the shim directly (no LD_PRELOAD)
 * and sets HV_GPUSIM_DEVICES=4 before the first call. Every wait is bounded.
 */
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hv_check.h"
#include "reduce.h"

static atomic_int t_failures; // failed checks in rank threads (added to the total by main)

/* A check that may run on any thread: prints the condition and a formatted detail. */
#define TCHECK(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            char d_[256];                                                                          \
            snprintf(d_, sizeof(d_), __VA_ARGS__);                                                 \
            fprintf(stderr, "%s:%d: check failed: %s: %s\n", __FILE__, __LINE__, #cond, d_);       \
            atomic_fetch_add(&t_failures, 1);                                                      \
        }                                                                                          \
    } while (0)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_ms(int ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void collect_thread_failures(void) { hv_check_failures += atomic_exchange(&t_failures, 0); }

/* c's async state, or the error that asking for it gave. */
static ncclResult_t async_state(ncclComm_t c) {
    ncclResult_t st = ncclInProgress;
    ncclResult_t r = ncclCommGetAsyncError(c, &st);
    return r != ncclSuccess ? r : st;
}

/* Polls until c leaves ncclInProgress or limit_s passes: the async state. */
static ncclResult_t wait_comm(ncclComm_t c, double limit_s) {
    double end = now_s() + limit_s;
    for (;;) {
        ncclResult_t st = async_state(c);
        if (st != ncclInProgress || now_s() > end) {
            return st;
        }
        sleep_ms(1);
    }
}

/* Polls (as libhv does) until stream s is idle or c reports an error, at most limit_s. Returns
 * ncclSuccess, the async error, or ncclInProgress at the deadline. */
static ncclResult_t wait_stream(ncclComm_t c, cudaStream_t s, double limit_s) {
    double end = now_s() + limit_s;
    for (;;) {
        ncclResult_t st = async_state(c);
        if (st != ncclSuccess && st != ncclInProgress) {
            return st;
        }
        cudaError_t q = cudaStreamQuery(s);
        if (st == ncclSuccess && q == cudaSuccess) {
            return ncclSuccess;
        }
        if (q != cudaSuccess && q != cudaErrorNotReady) {
            return ncclUnhandledCudaError;
        }
        if (now_s() > end) {
            return ncclInProgress;
        }
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 50000};
        nanosleep(&ts, NULL);
    }
}

/* A device copy of n bytes of host memory (NULL on failure). */
static void *dev_from(const void *host, size_t n) {
    void *d = NULL;
    if (cudaMalloc(&d, n) != cudaSuccess) {
        return NULL;
    }
    if (host != NULL && cudaMemcpy(d, host, n, cudaMemcpyHostToDevice) != cudaSuccess) {
        cudaFree(d);
        return NULL;
    }
    return d;
}

/* ---- memory ------------------------------------------------------------------------------------ */

/* A child process reads p; returns how it ended (the wait status), or -1 if it did not end. */
static int child_reads(const volatile char *p) {
    pid_t pid = fork();
    if (pid == 0) {
        // Default actions, so that the fault kills the child even under ASan's handler.
        signal(SIGSEGV, SIG_DFL);
        signal(SIGBUS, SIG_DFL);
        char c = *p;
        (void)c;
        _exit(0);
    }
    if (pid < 0) {
        return -1;
    }
    int status = 0;
    for (int i = 0; i < 500; i++) {
        if (waitpid(pid, &status, WNOHANG) == pid) {
            return status;
        }
        sleep_ms(10);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

static void test_device_memory_faults(void) {
    char *d = NULL;
    CHECK_EQ(cudaMalloc((void **)&d, 1000), cudaSuccess);
    if (d == NULL) {
        return;
    }
    const char *where[2] = {d, d + 999};
    for (int i = 0; i < 2; i++) {
        int st = child_reads(where[i]);
        CHECK(st != -1 && WIFSIGNALED(st));
        if (st != -1 && WIFSIGNALED(st)) {
            CHECK_EQ(WTERMSIG(st), SIGSEGV);
        } else {
            fprintf(stderr, "  host read of device pointer %p: child status %d (want SIGSEGV)\n",
                    (const void *)where[i], st);
        }
    }
    CHECK_EQ(cudaFree(d), cudaSuccess);
}

static void test_memcpy_and_attributes(void) {
    int n = -1;
    CHECK_EQ(cudaGetDeviceCount(&n), cudaSuccess);
    CHECK_EQ(n, 4);
    CHECK_EQ(cudaSetDevice(4), cudaErrorInvalidDevice);
    CHECK_EQ(cudaPeekAtLastError(), cudaErrorInvalidDevice);
    CHECK_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
    CHECK_EQ(cudaGetLastError(), cudaSuccess);
    char bus[16] = "";
    int back_dev = -1;
    CHECK_EQ(cudaDeviceGetPCIBusId(bus, (int)sizeof(bus), 3), cudaSuccess);
    CHECK_STR(bus, "0000:13:00.0");
    CHECK_EQ(cudaDeviceGetByPCIBusId(&back_dev, bus), cudaSuccess);
    CHECK_EQ(back_dev, 3);
    CHECK_EQ(cudaDeviceGetPCIBusId(bus, 4, 0), cudaErrorInvalidValue);
    CHECK_EQ(cudaDeviceGetPCIBusId(bus, (int)sizeof(bus), 4), cudaErrorInvalidDevice);
    CHECK_STR(cudaGetErrorString(cudaErrorInsufficientDriver),
              "CUDA driver version is insufficient for CUDA runtime version");
    cudaGetLastError();
    CHECK_EQ(cudaSetDevice(2), cudaSuccess);
    int cur = -1;
    CHECK_EQ(cudaGetDevice(&cur), cudaSuccess);
    CHECK_EQ(cur, 2);

    enum { N = 1000 };
    char src[N], back[N];
    for (int i = 0; i < N; i++) {
        src[i] = (char)(i * 7 + 3);
    }
    char *d1 = NULL, *d2 = NULL, *pinned = NULL;
    CHECK_EQ(cudaMalloc((void **)&d1, N), cudaSuccess);
    CHECK_EQ(cudaMalloc((void **)&d2, N), cudaSuccess);
    CHECK_EQ(cudaMallocHost((void **)&pinned, N), cudaSuccess);
    if (d1 == NULL || d2 == NULL || pinned == NULL) {
        return;
    }
    CHECK_EQ(cudaMemcpy(d1, src, N, cudaMemcpyHostToDevice), cudaSuccess);
    CHECK_EQ(cudaMemcpy(d2, d1, N, cudaMemcpyDeviceToDevice), cudaSuccess);
    CHECK_EQ(cudaMemcpy(pinned, d2, N, cudaMemcpyDefault), cudaSuccess);
    CHECK_EQ(cudaMemcpy(back, pinned, N, cudaMemcpyHostToHost), cudaSuccess);
    CHECK_EQ(memcmp(back, src, N), 0);
    // Interior pointers, partial copies.
    memset(back, 0, N);
    CHECK_EQ(cudaMemcpy(back + 10, d2 + 10, 100, cudaMemcpyDeviceToHost), cudaSuccess);
    CHECK_EQ(memcmp(back + 10, src + 10, 100), 0);
    CHECK_EQ(cudaMemset(d1, 0x5a, N), cudaSuccess);
    CHECK_EQ(cudaMemcpy(back, d1, N, cudaMemcpyDefault), cudaSuccess);
    CHECK_EQ(back[0], 0x5a);
    CHECK_EQ(back[N - 1], 0x5a);

    // Out of range and wrong kinds: errors, never a crash.
    CHECK_EQ(cudaMemcpy(back, d1 + 1, N, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
    CHECK_EQ(cudaGetLastError(), cudaErrorInvalidValue);
    CHECK_EQ(cudaMemcpy(d1, src, N + 1, cudaMemcpyDefault), cudaErrorInvalidValue);
    CHECK_EQ(cudaMemcpy(back, src, N, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    CHECK_EQ(cudaMemcpy(back, d1, N, (enum cudaMemcpyKind)42), cudaErrorInvalidMemcpyDirection);
    CHECK_EQ(cudaFree(d1 + 1), cudaErrorInvalidValue);
    CHECK_EQ(cudaFreeHost(src), cudaErrorInvalidValue);
    CHECK_EQ(cudaGetLastError(), cudaErrorInvalidValue);

    struct cudaPointerAttributes a;
    CHECK_EQ(cudaPointerGetAttributes(&a, d1), cudaSuccess);
    CHECK_EQ(a.type, cudaMemoryTypeDevice);
    CHECK_EQ(a.device, 2);
    CHECK(a.devicePointer == d1 && a.hostPointer == NULL);
    CHECK_EQ(cudaPointerGetAttributes(&a, d1 + N - 1), cudaSuccess);
    CHECK_EQ(a.type, cudaMemoryTypeDevice);
    CHECK(a.devicePointer == d1 + N - 1);
    CHECK_EQ(cudaPointerGetAttributes(&a, pinned + 5), cudaSuccess);
    CHECK_EQ(a.type, cudaMemoryTypeHost);
    CHECK(a.hostPointer == pinned + 5);
    char *heap = malloc(16);
    CHECK_EQ(cudaPointerGetAttributes(&a, heap), cudaSuccess);
    CHECK_EQ(a.type, cudaMemoryTypeUnregistered);
    CHECK_EQ(cudaPointerGetAttributes(&a, src), cudaSuccess);
    CHECK_EQ(a.type, cudaMemoryTypeUnregistered);
    free(heap);

    CHECK_EQ(cudaFree(d1), cudaSuccess);
    CHECK_EQ(cudaPointerGetAttributes(&a, d1), cudaSuccess);
    CHECK_EQ(a.type, cudaMemoryTypeUnregistered); // freed: no longer device memory
    CHECK_EQ(cudaFree(d2), cudaSuccess);
    CHECK_EQ(cudaFreeHost(pinned), cudaSuccess);
    CHECK_EQ(cudaSetDevice(0), cudaSuccess);
}

/* ---- collectives ------------------------------------------------------------------------------- */

typedef struct rctx_s {
    int rank, n, device;
    ncclUniqueId id;
} rctx_t;

static ncclResult_t init_nonblocking(const rctx_t *x, ncclComm_t *out) {
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(out, x->n, x->id, x->rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) {
        return r;
    }
    return wait_comm(*out, 10);
}

/* Runs an op already launched and checks it completed. */
#define RUN_OK(x, c, s, launch, what)                                                              \
    do {                                                                                           \
        ncclResult_t l_ = (launch);                                                                \
        TCHECK(l_ == ncclSuccess || l_ == ncclInProgress, "rank %d: %s launch: %s", (x)->rank,     \
               what, ncclGetErrorString(l_));                                                      \
        ncclResult_t w_ = wait_stream((c), (s), 20);                                               \
        TCHECK(w_ == ncclSuccess, "rank %d: %s: %s", (x)->rank, what, ncclGetErrorString(w_));     \
    } while (0)

/* Reads back n elements of size es from device d into a new host buffer (caller frees). */
static void *host_from(const void *d, size_t bytes) {
    void *h = malloc(bytes);
    if (h != NULL && cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
        free(h);
        return NULL;
    }
    return h;
}

/* Reads back the n floats at device d and checks each against want(x, i); the first one that
 * differs fails the case, named by what. */
static void expect_f32(const rctx_t *x, const char *what, const float *d, size_t n,
                       float (*want)(const rctx_t *x, size_t i)) {
    float *g = host_from(d, n * sizeof(float));
    TCHECK(g != NULL, "rank %d: %s: read back", x->rank, what);
    for (size_t i = 0; g != NULL && i < n; i++) {
        float w = want(x, i);
        if (g[i] != w) {
            TCHECK(g[i] == w, "rank %d: %s [%zu] = %g, want %g", x->rank, what, i, (double)g[i],
                   (double)w);
            break;
        }
    }
    free(g);
}

static float want_sum_big(const rctx_t *x, size_t i) {
    return (float)(i % 1000) * (float)x->n + (float)(x->n * (x->n - 1) / 2);
}

static void rank_allreduce_f32_big(const rctx_t *x, ncclComm_t c, cudaStream_t s) {
    size_t n = 3u << 20; // 12 MiB: many 1 MiB chunks
    float *h = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        h[i] = (float)(i % 1000 + (size_t)x->rank);
    }
    float *d = dev_from(h, n * sizeof(float));
    TCHECK(d != NULL, "cudaMalloc");
    RUN_OK(x, c, s, ncclAllReduce(d, d, n, ncclFloat32, ncclSum, c, s), "allreduce f32 sum");
    expect_f32(x, "f32 sum", d, n, want_sum_big);
    cudaFree(d);
    free(h);
}

static float want_avg(const rctx_t *x, size_t i) { return (float)((int)(i % 5) + x->n - 1); }

static void rank_allreduce_small(const rctx_t *x, ncclComm_t c, cudaStream_t s) {
    enum { N = 777 };
    int n = x->n, r = x->rank;
    // int32 max, out of place.
    int32_t hi[N];
    for (int i = 0; i < N; i++) {
        hi[i] = (i * 7 + r * 13) % 101 - 50;
    }
    int32_t *si = dev_from(hi, sizeof(hi)), *ri = dev_from(NULL, sizeof(hi));
    RUN_OK(x, c, s, ncclAllReduce(si, ri, N, ncclInt32, ncclMax, c, s), "allreduce i32 max");
    int32_t *gi = host_from(ri, sizeof(hi));
    for (int i = 0; gi != NULL && i < N; i++) {
        int32_t want = INT32_MIN;
        for (int k = 0; k < n; k++) {
            int32_t v = (i * 7 + k * 13) % 101 - 50;
            want = v > want ? v : want;
        }
        if (gi[i] != want) {
            TCHECK(gi[i] == want, "rank %d: i32 max [%d] = %d, want %d", r, i, gi[i], want);
            break;
        }
    }
    free(gi);
    cudaFree(si);
    cudaFree(ri);

    // bfloat16 and float16 sums (small integers: exact in both).
    for (int t = 0; t < 2; t++) {
        uint16_t h16[N];
        for (int i = 0; i < N; i++) {
            float v = (float)(i % 8 + r);
            h16[i] = t == 0 ? hv__f32_to_bf16(v) : hv__f32_to_f16(v);
        }
        uint16_t *d = dev_from(h16, sizeof(h16));
        RUN_OK(x, c, s, ncclAllReduce(d, d, N, t == 0 ? ncclBfloat16 : ncclFloat16, ncclSum, c, s),
               t == 0 ? "allreduce bf16 sum" : "allreduce f16 sum");
        uint16_t *g = host_from(d, sizeof(h16));
        for (int i = 0; g != NULL && i < N; i++) {
            float want = (float)(n * (i % 8) + n * (n - 1) / 2);
            float got = t == 0 ? hv__bf16_to_f32(g[i]) : hv__f16_to_f32(g[i]);
            if (got != want) {
                TCHECK(got == want, "rank %d: %s sum [%d] = %g, want %g", r,
                       t == 0 ? "bf16" : "f16", i, (double)got, (double)want);
                break;
            }
        }
        free(g);
        cudaFree(d);
    }

    // float32 avg.
    float hf[N];
    for (int i = 0; i < N; i++) {
        hf[i] = (float)(r * 2 + i % 5);
    }
    float *df = dev_from(hf, sizeof(hf));
    RUN_OK(x, c, s, ncclAllReduce(df, df, N, ncclFloat32, ncclAvg, c, s), "allreduce f32 avg");
    expect_f32(x, "f32 avg", df, N, want_avg);
    cudaFree(df);

    // float64 product, uint8 min.
    double hd[N];
    uint8_t hu[N];
    for (int i = 0; i < N; i++) {
        hd[i] = (double)(r + 2) * (i % 2 ? 0.5 : 1.0);
        hu[i] = (uint8_t)((i + r * 40) % 256);
    }
    double *dd = dev_from(hd, sizeof(hd));
    uint8_t *du = dev_from(hu, sizeof(hu));
    RUN_OK(x, c, s, ncclAllReduce(dd, dd, N, ncclFloat64, ncclProd, c, s), "allreduce f64 prod");
    RUN_OK(x, c, s, ncclAllReduce(du, du, N, ncclUint8, ncclMin, c, s), "allreduce u8 min");
    double *gd = host_from(dd, sizeof(hd));
    uint8_t *gu = host_from(du, sizeof(hu));
    for (int i = 0; gd != NULL && gu != NULL && i < N; i++) {
        double wd = 1.0;
        int wu = 255;
        for (int k = 0; k < n; k++) {
            wd *= (double)(k + 2) * (i % 2 ? 0.5 : 1.0);
            int v = (i + k * 40) % 256;
            wu = v < wu ? v : wu;
        }
        if (gd[i] != wd || gu[i] != wu) {
            TCHECK(gd[i] == wd && gu[i] == wu,
                   "rank %d: [%d] f64 prod %g (want %g), u8 min %d "
                   "(want %d)",
                   r, i, gd[i], wd, gu[i], wu);
            break;
        }
    }
    free(gd);
    free(gu);
    cudaFree(dd);
    cudaFree(du);
}

enum { BCAST_N = 300001 }; // 1.2 MB: two chunks

static float want_bcast(const rctx_t *x, size_t i) {
    (void)x;
    return (float)i * 0.5f + 7.0f; // root 1's
}

static float want_gather(const rctx_t *x, size_t i) {
    (void)x;
    return (float)((int)(i / BCAST_N) * 1000000 + (int)(i % BCAST_N));
}

static void rank_broadcast_allgather(const rctx_t *x, ncclComm_t c, cudaStream_t s) {
    size_t n = BCAST_N;
    int r = x->rank;
    float *h = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        h[i] = r == 1 ? (float)i * 0.5f + 7.0f : -1.0f;
    }
    float *send = r == 1 ? dev_from(h, n * sizeof(float)) : NULL;
    float *recv = dev_from(NULL, n * sizeof(float));
    RUN_OK(x, c, s, ncclBroadcast(send, recv, n, ncclFloat32, 1, c, s), "broadcast root 1");
    expect_f32(x, "broadcast", recv, n, want_bcast);
    cudaFree(send);
    cudaFree(recv);

    for (size_t i = 0; i < n; i++) {
        h[i] = (float)(r * 1000000 + (int)i);
    }
    float *ag_send = dev_from(h, n * sizeof(float));
    float *ag_recv = dev_from(NULL, n * sizeof(float) * (size_t)x->n);
    RUN_OK(x, c, s, ncclAllGather(ag_send, ag_recv, n, ncclFloat32, c, s), "allgather");
    expect_f32(x, "allgather", ag_recv, n * (size_t)x->n, want_gather);
    cudaFree(ag_send);
    cudaFree(ag_recv);
    free(h);
}

static void rank_grouped(const rctx_t *x, ncclComm_t c, cudaStream_t s) {
    enum { A = 100, B = 50, C = 10, RS = 1000 };
    int n = x->n, r = x->rank;
    int64_t ha[A];
    uint8_t hb[B];
    int32_t hc[C];
    float hrs[RS * 4];
    for (int i = 0; i < A; i++) {
        ha[i] = (int64_t)i * 1000000000ll + r;
    }
    for (int i = 0; i < B; i++) {
        hb[i] = (uint8_t)(r == 0 ? i + 100 : 0);
    }
    for (int i = 0; i < C; i++) {
        hc[i] = r * 100 + i;
    }
    for (int i = 0; i < RS * n; i++) {
        hrs[i] = (float)(r + i);
    }
    int64_t *da = dev_from(ha, sizeof(ha));
    uint8_t *db = dev_from(hb, sizeof(hb));
    int32_t *dc = dev_from(hc, sizeof(hc)), *dcg = dev_from(NULL, sizeof(hc) * (size_t)n);
    float *drs = dev_from(hrs, sizeof(float) * RS * (size_t)n);
    TCHECK(ncclGroupStart() == ncclSuccess, "GroupStart");
    TCHECK(ncclGroupStart() == ncclSuccess, "nested GroupStart");
    ncclResult_t l1 = ncclAllReduce(da, da, A, ncclInt64, ncclSum, c, s);
    ncclResult_t l2 = ncclBroadcast(db, db, B, ncclUint8, 0, c, s);
    TCHECK(ncclGroupEnd() == ncclSuccess, "nested GroupEnd");
    ncclResult_t l3 = ncclAllGather(dc, dcg, C, ncclInt32, c, s);
    // In place: this rank's share of drs is its result.
    ncclResult_t l4 = ncclReduceScatter(drs, drs + RS * r, RS, ncclFloat32, ncclSum, c, s);
    RUN_OK(x, c, s, ncclGroupEnd(), "grouped ops");
    TCHECK(l1 == ncclSuccess && l2 == ncclSuccess && l3 == ncclSuccess && l4 == ncclSuccess,
           "rank %d: launches %d %d %d %d", r, l1, l2, l3, l4);
    int64_t *ga = host_from(da, sizeof(ha));
    uint8_t *gb = host_from(db, sizeof(hb));
    int32_t *gc = host_from(dcg, sizeof(hc) * (size_t)n);
    float *grs = host_from(drs + RS * r, sizeof(float) * RS);
    for (int i = 0; ga != NULL && i < A; i++) {
        int64_t want = (int64_t)i * 1000000000ll * n + n * (n - 1) / 2;
        TCHECK(ga[i] == want, "rank %d: grouped i64 sum [%d] = %lld, want %lld", r, i,
               (long long)ga[i], (long long)want);
        if (ga[i] != want) {
            break;
        }
    }
    for (int i = 0; gb != NULL && i < B; i++) {
        TCHECK(gb[i] == i + 100, "rank %d: grouped broadcast [%d] = %d", r, i, gb[i]);
    }
    for (int i = 0; gc != NULL && i < C * n; i++) {
        TCHECK(gc[i] == (i / C) * 100 + i % C, "rank %d: grouped allgather [%d] = %d", r, i, gc[i]);
    }
    for (int i = 0; grs != NULL && i < RS; i++) {
        float want = (float)(n * (n - 1) / 2 + n * (r * RS + i));
        if (grs[i] != want) {
            TCHECK(grs[i] == want, "rank %d: reducescatter [%d] = %g, want %g", r, i,
                   (double)grs[i], (double)want);
            break;
        }
    }
    free(ga);
    free(gb);
    free(gc);
    free(grs);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    cudaFree(dcg);
    cudaFree(drs);
}

/* Bad arguments: synchronous errors that leave the communicator usable. */
static void rank_bad_args(const rctx_t *x, ncclComm_t c, cudaStream_t s) {
    float host[16] = {0};
    float *other = NULL, *mine = NULL;
    cudaSetDevice((x->device + 1) % 4);
    cudaMalloc((void **)&other, sizeof(host));
    cudaSetDevice(x->device);
    cudaMalloc((void **)&mine, sizeof(host));
    TCHECK(ncclAllReduce(host, host, 16, ncclFloat32, ncclSum, c, s) == ncclInvalidArgument,
           "host buffer");
    TCHECK(ncclAllReduce(other, other, 16, ncclFloat32, ncclSum, c, s) == ncclInvalidArgument,
           "buffer of another device");
    TCHECK(ncclAllReduce(mine, mine, 17, ncclFloat32, ncclSum, c, s) == ncclInvalidArgument,
           "count past the allocation");
    TCHECK(ncclAllReduce(mine, mine, 16, ncclUint32, ncclSum, c, s) == ncclInvalidArgument,
           "unsupported dtype");
    TCHECK(ncclAllReduce(mine, mine, 16, ncclFloat32, (ncclRedOp_t)9, c, s) == ncclInvalidArgument,
           "bad op");
    TCHECK(ncclBroadcast(mine, mine, 16, ncclFloat32, x->n, c, s) == ncclInvalidArgument,
           "root out of range");
    TCHECK(ncclAllReduce(mine, mine, 16, ncclFloat32, ncclSum, NULL, s) == ncclInvalidArgument,
           "NULL comm");
    TCHECK(ncclGroupEnd() == ncclInvalidUsage, "GroupEnd without GroupStart");
    ncclResult_t st = ncclInProgress;
    TCHECK(ncclCommGetAsyncError(c, &st) == ncclSuccess && st == ncclSuccess,
           "rank %d: async error after bad arguments: %s", x->rank, ncclGetErrorString(st));
    cudaFree(other);
    cudaFree(mine);
}

static void *rank_collectives(void *arg) {
    rctx_t *x = arg;
    TCHECK(cudaSetDevice(x->device) == cudaSuccess, "cudaSetDevice(%d)", x->device);
    cudaStream_t s = NULL;
    TCHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "stream");
    ncclComm_t c = NULL;
    ncclResult_t r = init_nonblocking(x, &c);
    TCHECK(r == ncclSuccess, "rank %d: init: %s", x->rank, ncclGetErrorString(r));
    if (r != ncclSuccess) {
        ncclCommAbort(c);
        cudaStreamDestroy(s);
        return NULL;
    }
    int count = 0, rank = -1, dev = -1;
    ncclCommCount(c, &count);
    ncclCommUserRank(c, &rank);
    ncclCommCuDevice(c, &dev);
    TCHECK(count == x->n && rank == x->rank && dev == x->device, "count %d rank %d dev %d", count,
           rank, dev);
    rank_bad_args(x, c, s);
    rank_allreduce_f32_big(x, c, s);
    rank_allreduce_small(x, c, s);
    rank_broadcast_allgather(x, c, s);
    rank_grouped(x, c, s);
    TCHECK(ncclCommFinalize(c) == ncclSuccess, "finalize");
    TCHECK(ncclCommDestroy(c) == ncclSuccess, "destroy");
    TCHECK(cudaStreamDestroy(s) == cudaSuccess, "stream destroy");
    return NULL;
}

/* Runs fn on n rank threads (device = rank unless same_device) sharing one fresh id. */
static void run_ranks(int n, int same_device, void *(*fn)(void *)) {
    rctx_t x[4];
    pthread_t th[4];
    ncclUniqueId id;
    CHECK_EQ(ncclGetUniqueId(&id), ncclSuccess);
    for (int i = 0; i < n; i++) {
        x[i] = (rctx_t){.rank = i, .n = n, .device = same_device ? 0 : i, .id = id};
        pthread_create(&th[i], NULL, fn, &x[i]);
    }
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
    }
    collect_thread_failures();
}

static void test_collectives_2(void) { run_ranks(2, 0, rank_collectives); }
static void test_collectives_3(void) { run_ranks(3, 0, rank_collectives); }

/* ---- failures ---------------------------------------------------------------------------------- */

static void *rank_duplicate(void *arg) {
    rctx_t *x = arg;
    cudaSetDevice(x->device);
    ncclComm_t c = NULL;
    ncclResult_t r = init_nonblocking(x, &c);
    TCHECK(r == ncclInvalidUsage, "rank %d: two ranks on device 0: %s, want invalid usage", x->rank,
           ncclGetErrorString(r));
    TCHECK(strstr(ncclGetLastError(c), "Duplicate GPU") != NULL, "last error: %s",
           ncclGetLastError(c));
    TCHECK(ncclCommAbort(c) == ncclSuccess, "abort");
    return NULL;
}

static void test_duplicate_gpu(void) { run_ranks(2, 1, rank_duplicate); }

static atomic_int stall_done;

static void *rank_stall(void *arg) {
    rctx_t *x = arg;
    cudaSetDevice(x->device);
    cudaStream_t s = NULL;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    ncclComm_t c = NULL;
    ncclResult_t r = init_nonblocking(x, &c);
    TCHECK(r == ncclSuccess, "rank %d: init: %s", x->rank, ncclGetErrorString(r));
    if (x->rank == 1) {
        // The stalled peer: alive, never joins the collective.
        for (int i = 0; i < 1000 && !atomic_load(&stall_done); i++) {
            sleep_ms(10);
        }
        TCHECK(ncclCommDestroy(c) == ncclSuccess, "destroy of the idle rank");
        cudaStreamDestroy(s);
        return NULL;
    }
    float *d = dev_from(NULL, 1000 * sizeof(float));
    cudaMemset(d, 0, 1000 * sizeof(float));
    r = ncclAllReduce(d, d, 1000, ncclFloat32, ncclSum, c, s);
    TCHECK(r == ncclSuccess, "launch: %s", ncclGetErrorString(r));
    double end = now_s() + 0.3;
    while (now_s() < end) {
        ncclResult_t st = ncclSuccess;
        ncclCommGetAsyncError(c, &st);
        TCHECK(st == ncclSuccess || st == ncclInProgress, "async %s", ncclGetErrorString(st));
        TCHECK(cudaStreamQuery(s) == cudaErrorNotReady, "stream of a stalled allreduce");
        if (hv_check_failures || atomic_load(&t_failures)) {
            break;
        }
        sleep_ms(20);
    }
    double t0 = now_s();
    TCHECK(ncclCommAbort(c) == ncclSuccess, "abort");
    double took = now_s() - t0;
    TCHECK(took < 1.0, "ncclCommAbort took %.3f s", took);
    TCHECK(cudaStreamQuery(s) == cudaSuccess, "stream idle after abort");
    atomic_store(&stall_done, 1);
    cudaFree(d);
    cudaStreamDestroy(s);
    return NULL;
}

static void test_stall_then_abort(void) {
    atomic_store(&stall_done, 0);
    run_ranks(2, 0, rank_stall);
}

/* Rank 1 in a child process: joins, runs one allreduce, tells the parent, then hangs until
 * killed. Exit codes name the step that failed. */
static void dead_peer_child(ncclUniqueId id, int fd) {
    alarm(30); // never outlive a broken parent
    rctx_t x = {.rank = 1, .n = 2, .device = 1, .id = id};
    cudaSetDevice(1);
    cudaStream_t s = NULL;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    ncclComm_t c = NULL;
    if (init_nonblocking(&x, &c) != ncclSuccess) {
        _exit(3);
    }
    float *d = dev_from(NULL, 4096);
    if (ncclAllReduce(d, d, 1024, ncclFloat32, ncclSum, c, s) != ncclSuccess ||
        wait_stream(c, s, 10) != ncclSuccess) {
        _exit(4);
    }
    char b = 'k';
    if (write(fd, &b, 1) != 1) {
        _exit(5);
    }
    for (;;) {
        pause();
    }
}

static void test_dead_peer(void) {
    ncclUniqueId id;
    CHECK_EQ(ncclGetUniqueId(&id), ncclSuccess);
    int p[2];
    CHECK_EQ(pipe(p), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        dead_peer_child(id, p[1]);
    }
    close(p[1]);
    CHECK(pid > 0);
    rctx_t x = {.rank = 0, .n = 2, .device = 0, .id = id};
    cudaSetDevice(0);
    cudaStream_t s = NULL;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    ncclComm_t c = NULL;
    ncclResult_t r = init_nonblocking(&x, &c);
    CHECK_EQ(r, ncclSuccess);
    float *d = dev_from(NULL, 4096);
    CHECK_EQ(ncclAllReduce(d, d, 1024, ncclFloat32, ncclSum, c, s), ncclSuccess);
    CHECK_EQ(wait_stream(c, s, 10), ncclSuccess);
    struct pollfd pf = {.fd = p[0], .events = POLLIN};
    char b = 0;
    CHECK(poll(&pf, 1, 10000) == 1 && read(p[0], &b, 1) == 1 && b == 'k');
    // The peer is alive and idle: our next allreduce waits for it in a barrier.
    CHECK_EQ(ncclAllReduce(d, d, 1024, ncclFloat32, ncclSum, c, s), ncclSuccess);
    sleep_ms(100);
    CHECK_EQ(cudaStreamQuery(s), cudaErrorNotReady);
    kill(pid, SIGKILL); // not reaped yet: a zombie counts as dead
    double t0 = now_s();
    ncclResult_t st = ncclSuccess;
    while (now_s() - t0 < 2.0) {
        ncclCommGetAsyncError(c, &st);
        if (st != ncclSuccess && st != ncclInProgress) {
            break;
        }
        sleep_ms(1);
    }
    double took = now_s() - t0;
    CHECK_EQ(st, ncclRemoteError);
    CHECK(took < 1.0);
    if (took >= 1.0) {
        fprintf(stderr, "  dead peer noticed after %.3f s\n", took);
    }
    CHECK_EQ(cudaStreamQuery(s), cudaSuccess); // the op was dropped
    CHECK(strstr(ncclGetLastError(c), "exited") != NULL);
    // Later launches report the failure.
    CHECK_EQ(ncclAllReduce(d, d, 1024, ncclFloat32, ncclSum, c, s), ncclRemoteError);
    int status = 0;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    CHECK_EQ(ncclCommAbort(c), ncclSuccess);
    cudaFree(d);
    cudaStreamDestroy(s);
    close(p[0]);
}

/* Bad init arguments and NCCL's "use before init completed" rule. */
static void test_init_errors(void) {
    ncclUniqueId id;
    CHECK_EQ(ncclGetUniqueId(&id), ncclSuccess);
    ncclComm_t c = NULL;
    CHECK_EQ(ncclCommInitRank(&c, 0, id, 0), ncclInvalidArgument);
    CHECK_EQ(ncclCommInitRank(&c, 2, id, 2), ncclInvalidArgument);
    CHECK_EQ(ncclCommInitRank(&c, 2, id, -1), ncclInvalidArgument);
    ncclConfig_t bad;
    memset(&bad, 0, sizeof(bad));
    CHECK_EQ(ncclCommInitRankConfig(&c, 1, id, 0, &bad), ncclInvalidArgument);
    // A non-blocking rank whose peer never comes: in progress, ops refused, abort returns.
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    CHECK_EQ(ncclCommInitRankConfig(&c, 2, id, 0, &cfg), ncclInProgress);
    CHECK_EQ(wait_comm(c, 0.05), ncclInProgress);
    float *d = dev_from(NULL, 64);
    CHECK_EQ(ncclAllReduce(d, d, 16, ncclFloat32, ncclSum, c, NULL), ncclInvalidArgument);
    double t0 = now_s();
    CHECK_EQ(ncclCommAbort(c), ncclSuccess);
    CHECK(now_s() - t0 < 1.0);
    cudaFree(d);
    // One rank, blocking: completes at once; a lone allreduce copies.
    CHECK_EQ(ncclGetUniqueId(&id), ncclSuccess);
    CHECK_EQ(ncclCommInitRank(&c, 1, id, 0), ncclSuccess);
    float h[4] = {1, 2, 3, 4}, g[4] = {0};
    float *s = dev_from(h, sizeof(h)), *o = dev_from(NULL, sizeof(h));
    CHECK_EQ(ncclAllReduce(s, o, 4, ncclFloat32, ncclSum, c, NULL), ncclSuccess);
    CHECK_EQ(cudaStreamSynchronize(NULL), cudaSuccess);
    CHECK_EQ(cudaMemcpy(g, o, sizeof(g), cudaMemcpyDeviceToHost), cudaSuccess);
    CHECK_EQ(memcmp(g, h, sizeof(g)), 0);
    CHECK_EQ(ncclCommDestroy(c), ncclSuccess);
    CHECK_EQ(ncclCommGetAsyncError(c, &(ncclResult_t){0}), ncclInvalidArgument); // gone
    cudaFree(s);
    cudaFree(o);
    int v = 0;
    CHECK_EQ(ncclGetVersion(&v), ncclSuccess);
    CHECK_EQ(v, NCCL_VERSION_CODE);
}

static const char *self_path;

/* HV_GPUSIM_DEVICES=0: no device. Runs itself in a fresh process with that setting. */
static void test_no_device(void) {
    const char *e = getenv("HV_GPUSIM_DEVICES");
    if (e != NULL && strcmp(e, "0") == 0) {
        int n = -1;
        CHECK_EQ(cudaGetDeviceCount(&n), cudaErrorNoDevice);
        CHECK_EQ(n, 0);
        CHECK_EQ(cudaGetLastError(), cudaErrorNoDevice);
        void *p = NULL;
        CHECK_EQ(cudaMalloc(&p, 16), cudaErrorNoDevice);
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        setenv("HV_GPUSIM_DEVICES", "0", 1);
        execl(self_path, self_path, "no_device", (char *)NULL);
        _exit(127);
    }
    int status = -1;
    for (int i = 0; i < 1000 && waitpid(pid, &status, WNOHANG) != pid; i++) {
        sleep_ms(10);
        if (i == 999) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
        }
    }
    CHECK(WIFEXITED(status));
    CHECK_EQ(WEXITSTATUS(status), 0);
}

static const hv_check_case_t cases[] = {
    {"device_memory_faults", test_device_memory_faults},
    {"memcpy_and_attributes", test_memcpy_and_attributes},
    {"init_errors", test_init_errors},
    {"collectives_2", test_collectives_2},
    {"collectives_3", test_collectives_3},
    {"duplicate_gpu", test_duplicate_gpu},
    {"stall_then_abort", test_stall_then_abort},
    {"dead_peer", test_dead_peer},
    {"no_device", test_no_device},
};

int main(int argc, char **argv) {
    self_path = "/proc/self/exe";
    setenv("HV_GPUSIM_DEVICES", "4", 0); // before the first CUDA call
    return hv_check_main(cases, sizeof(cases) / sizeof(cases[0]), argc, argv, NULL, NULL);
}
