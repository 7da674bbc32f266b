/*
 * hv_proc_test: the public API (<hv/hv.h>) across real processes: ranks are forked children
 * that meet through HV_RDZV_DIR, as the standalone launcher does. Covers the API surface, a rank
 * killed with SIGKILL in the middle of allreduces (survivors fail fast with HV_EPEER), a rank
 * stopped with SIGSTOP (survivors fail with HV_ETIMEDOUT within HV_PEER_TIMEOUT_MS), and
 * hv_init again after hv_shutdown, and hv_elastic_run through the public API on a fixed
 * membership (sync from rank 0, commits, Done, failures returned as they are), hv_join with uneven
 * data (with hv_allgather_async and hv_cross_rank), and hv_shutdown_at_exit (Done reported by an
 * exit with status 0 only). The *_device cases do the same with CUDA device buffers on
 * NCCL (one GPU per rank; they skip with fewer): the survivors' NCCL calls must fail as fast.
 * on_device runs the *_on calls (memory and stream declared) on device buffers; on_nocuda checks
 * that without CUDA (no build support or no device) they refuse declared device memory.
 * The parent never touches CUDA (a forked child could not use it then): a probe child counts
 * the devices.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "err.h" // before <hv/hv.h>: the public header then skips its copy of hv_err
#include "hvtest.h"
#include "transport_nccl.h"

#include <hv/elastic.h>
#include <hv/hv.h>

/* ---- harness --------------------------------------------------------------------------------- */

typedef int (*child_fn)(int rank, int size, int out_fd);

typedef struct proc_s {
    pid_t pid;
    int fd; // read end of the child's report pipe
} proc_t;

static char rdzv_dir[64];

/* Forks n ranks running fn; extra "K=V" environment entries (may be NULL). */
static int spawn(int n, child_fn fn, proc_t *ps, const char *const *env) {
    snprintf(rdzv_dir, sizeof(rdzv_dir), "/tmp/hv-proc-test-XXXXXX");
    if (mkdtemp(rdzv_dir) == NULL) {
        return -1;
    }
    for (int r = 0; r < n; r++) {
        int p[2];
        if (pipe(p) != 0) {
            return -1;
        }
        pid_t pid = fork();
        if (pid == 0) {
            close(p[0]);
            char rank[16], size[16];
            snprintf(rank, sizeof(rank), "%d", r);
            snprintf(size, sizeof(size), "%d", n);
            setenv("HV_RDZV_DIR", rdzv_dir, 1);
            setenv("HV_RANK", rank, 1);
            setenv("HV_SIZE", size, 1);
            for (int i = 0; env != NULL && env[i] != NULL; i++) {
                putenv((char *)env[i]);
            }
            _exit(fn(r, n, p[1]));
        }
        close(p[1]);
        ps[r].pid = pid;
        ps[r].fd = p[0];
    }
    return 0;
}

/* Reads one report line from a child within timeout_s ("" on timeout/EOF). */
static void report(proc_t *p, char *buf, size_t len, double timeout_s) {
    size_t k = 0;
    double t0 = hvtest_now();
    buf[0] = '\0';
    while (k + 1 < len && hvtest_now() - t0 < timeout_s) {
        struct pollfd pf = {.fd = p->fd, .events = POLLIN};
        if (poll(&pf, 1, 50) <= 0) {
            continue;
        }
        ssize_t r = read(p->fd, buf + k, 1);
        if (r <= 0 || buf[k] == '\n') {
            break;
        }
        k++;
    }
    buf[k] = '\0';
}

/* Waits for a child (killing it after timeout_s); returns its exit code, or -signal. */
static int reap(proc_t *p, double timeout_s) {
    double t0 = hvtest_now();
    int st = 0;
    for (;;) {
        pid_t w = waitpid(p->pid, &st, WNOHANG);
        if (w == p->pid) {
            break;
        }
        if (hvtest_now() - t0 > timeout_s) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &st, 0);
            break;
        }
        usleep(5000);
    }
    close(p->fd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
}

static void cleanup_dir(void) {
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", rdzv_dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "cannot remove %s\n", rdzv_dir);
    }
}

static void say(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(int fd, const char *fmt, ...) {
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
    va_end(ap);
    buf[n++] = '\n';
    ssize_t w = write(fd, buf, (size_t)n);
    (void)w;
}

#define CHILD_CHECK(expr)                                                                          \
    do {                                                                                           \
        hv_err c_rc = (expr);                                                                      \
        if (c_rc != HV_OK) {                                                                       \
            char c_detail[256];                                                                    \
            say(out, "FAIL %s:%d %s: %s (%s)", __FILE__, __LINE__, #expr, hv_errname(c_rc),        \
                hv_last_error(c_detail, sizeof(c_detail)));                                        \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

/* ---- cases ----------------------------------------------------------------------------------- */

static int child_api(int rank, int size, int out) {
    if (hv_rank() != -1) {
        say(out, "FAIL rank before init is %d", hv_rank());
        return 1;
    }
    CHILD_CHECK(hv_allreduce(NULL, NULL, 0, HV_FLOAT32, HV_SUM) == HV_ESTATE ? HV_OK
                                                                             : HV_EINTERNAL);
    CHILD_CHECK(hv_init());
    if (hv_rank() != rank || hv_size() != size || hv_init() != HV_ESTATE) {
        say(out, "FAIL identity %d/%d", hv_rank(), hv_size());
        return 1;
    }
    double d[1000];
    for (int i = 0; i < 1000; i++) {
        d[i] = rank + i;
    }
    CHILD_CHECK(hv_allreduce(d, d, 1000, HV_FLOAT64, HV_SUM));
    for (int i = 0; i < 1000; i++) {
        if (d[i] != size * i + size * (size - 1) / 2) {
            say(out, "FAIL allreduce [%d] = %g", i, d[i]);
            return 1;
        }
    }
    // Async, grouped, polled; in different orders on different ranks.
    int32_t a[4][100];
    hv_tensor_t ts[4];
    char names[4][8];
    for (int t = 0; t < 4; t++) {
        int k = rank % 2 ? 3 - t : t;
        for (int i = 0; i < 100; i++) {
            a[k][i] = k + 1;
        }
        snprintf(names[k], sizeof(names[k]), "g%d", k);
        ts[t] = (hv_tensor_t){
            .name = names[k], .in = a[k], .out = a[k], .count = 100, .dtype = HV_INT32};
    }
    hv_handle_t hg, h1;
    CHILD_CHECK(hv_allreduce_group_async(ts, 4, HV_MAX, &hg));
    uint16_t half[64];
    for (int i = 0; i < 64; i++) {
        half[i] = 0x3c00; // 1.0
    }
    CHILD_CHECK(hv_allreduce_async("half", half, half, 64, HV_FLOAT16, HV_SUM, &h1));
    int done = 0;
    for (double t0 = hvtest_now(); !done && hvtest_now() - t0 < 20;) {
        CHILD_CHECK(hv_test(hg, &done));
    }
    CHILD_CHECK(hv_wait(h1));
    if (!done || a[2][99] != 3 || half[63] != (size == 2 ? 0x4000 : 0x4200)) {
        say(out, "FAIL async: done %d a %d half 0x%04x", done, a[2][99], half[63]);
        return 1;
    }
    if (hv_wait(h1) != HV_ENOTFOUND) {
        say(out, "FAIL a released handle is accepted");
        return 1;
    }
    int64_t b[10];
    for (int i = 0; i < 10; i++) {
        b[i] = rank == size - 1 ? 42 : 0;
    }
    CHILD_CHECK(hv_broadcast(b, 10, HV_INT64, size - 1));
    uint8_t g[64];
    size_t counts[8];
    uint8_t mine[8] = {0};
    for (int i = 0; i <= rank; i++) {
        mine[i] = (uint8_t)rank;
    }
    CHILD_CHECK(hv_allgather(mine, (size_t)rank + 1, HV_UINT8, g, sizeof(g), counts));
    CHILD_CHECK(hv_barrier());
    if (b[9] != 42 || counts[size - 1] != (size_t)size || g[0] != 0 || g[1] != 1) {
        say(out, "FAIL bcast %lld counts %zu g %d %d", (long long)b[9], counts[size - 1], g[0],
            g[1]);
        return 1;
    }
    CHILD_CHECK(hv_shutdown());
    if (hv_rank() != -1 || hv_barrier() != HV_ESTATE) {
        say(out, "FAIL state after shutdown");
        return 1;
    }
    // Again: a new generation of the same world.
    CHILD_CHECK(hv_init());
    float f = 1.0f;
    CHILD_CHECK(hv_allreduce(&f, &f, 1, HV_FLOAT32, HV_AVG));
    CHILD_CHECK(hv_shutdown());
    say(out, "OK %g", (double)f);
    return f == 1.0f ? 0 : 1;
}

/* Runs n ranks (at most 8) of fn (env: extra NAME=VALUE strings); each must report "OK" (or
 * "OK" and a detail after a space) within 30 s and exit 0. */
static void run_ok(int n, child_fn fn, const char *const *env) {
    proc_t ps[8];
    ASSERT_TRUE(n <= 8 && spawn(n, fn, ps, env) == 0);
    for (int r = 0; r < n; r++) {
        char line[256];
        report(&ps[r], line, sizeof(line), hvtest_scale(30));
        int code = reap(&ps[r], hvtest_scale(10));
        if (code != 0 || strncmp(line, "OK", 2) != 0 || (line[2] != '\0' && line[2] != ' ')) {
            HVT_FAIL("rank %d: exit %d: %s", r, code, line);
        }
    }
    cleanup_dir();
}

static void test_api(void) { run_ok(3, child_api, NULL); }

/* Allreduce in a loop until it fails; report the error and how long after the parent's signal
 * (the parent writes the signal time to the shared file). */
static int child_loop(int rank, int size, int out) {
    (void)size;
    CHILD_CHECK(hv_init());
    size_t count = (16u << 20) / 4;
    int device = getenv("HV_TEST_DEVICE") != NULL;
    float *buf = NULL;
    if (device) {
        // On the GPU hv_init made current: the allreduces run on NCCL.
        CHILD_CHECK(hv__gpu_device_alloc(-1, count * sizeof(float), (void **)&buf));
        float zero[256] = {0};
        for (size_t off = 0; off < count; off += 256) {
            CHILD_CHECK(hv__gpu_memcpy(buf + off, zero, sizeof(zero)));
        }
    } else {
        buf = calloc(count, sizeof(float));
    }
    CHILD_CHECK(hv_allreduce(buf, buf, count, HV_FLOAT32, HV_SUM));
    say(out, "READY");
    hv_err rc = HV_OK;
    for (int i = 0; i < 1000000 && rc == HV_OK; i++) {
        rc = hv_allreduce(buf, buf, count, HV_FLOAT32, HV_SUM);
    }
    double t = hvtest_now();
    // A failed world refuses everything until it is rebuilt.
    hv_err again = hv_allreduce(buf, buf, 16, HV_FLOAT32, HV_SUM);
    char detail[256];
    hv_last_error(detail, sizeof(detail));
    hv_shutdown();
    if (device) {
        hv__gpu_device_free(buf);
    } else {
        free(buf);
    }
    say(out, "%s %.6f %s rank %d: %s", hv_errname(rc), t, hv_errname(again), rank, detail);
    return 0;
}

static void run_fault(int sig, const char *want, double bound_s, const char *const *env) {
    int n = sig == SIGKILL ? 3 : 2;
    proc_t ps[3];
    ASSERT_TRUE(spawn(n, child_loop, ps, env) == 0);
    char line[512];
    for (int r = 0; r < n; r++) {
        report(&ps[r], line, sizeof(line), hvtest_scale(30));
        if (strcmp(line, "READY") != 0) {
            HVT_FAIL("rank %d did not get ready: '%s'", r, line);
            for (int q = 0; q < n; q++) {
                kill(ps[q].pid, SIGKILL);
                reap(&ps[q], 5);
            }
            cleanup_dir();
            return;
        }
    }
    usleep(50000); // well inside the allreduce loop
    int victim = n - 1;
    double t_sig = hvtest_now();
    kill(ps[victim].pid, sig);
    for (int r = 0; r < n - 1; r++) {
        report(&ps[r], line, sizeof(line), hvtest_scale(bound_s + 10));
        char errname[32] = "", again[32] = "";
        double t = 0;
        if (sscanf(line, "%31s %lf %31s", errname, &t, again) != 3) {
            HVT_FAIL("rank %d: no report after the signal: '%s'", r, line);
            continue;
        }
        fprintf(stderr, "  rank %d: %s %.0f ms after the signal; then %s\n    (%s)\n", r, errname,
                (t - t_sig) * 1e3, again, line);
        if (strcmp(errname, want) != 0 && !(sig == SIGSTOP && strcmp(errname, "HV_EPEER") == 0)) {
            HVT_FAIL("rank %d: got %s, want %s", r, errname, want);
        }
        if (t - t_sig > bound_s) {
            HVT_FAIL("rank %d: took %.2f s, bound %.2f s", r, t - t_sig, bound_s);
        }
        if (strcmp(again, "HV_OK") == 0) {
            HVT_FAIL("rank %d: an allreduce succeeded after the failure", r);
        }
    }
    if (sig == SIGSTOP) {
        kill(ps[victim].pid, SIGKILL);
    }
    for (int r = 0; r < n; r++) {
        int code = reap(&ps[r], hvtest_scale(10));
        if (r != victim && code != 0) {
            HVT_FAIL("rank %d exited %d", r, code);
        }
    }
    cleanup_dir();
}

static void test_sigkill(void) { run_fault(SIGKILL, "HV_EPEER", 2.0, NULL); }

static void test_sigstop(void) {
    static const char *const env[] = {"HV_PEER_TIMEOUT_MS=500", NULL};
    // The survivor is inside a transfer or a negotiation: either way within the timeout
    // (+ scheduling slack), and the error is a timeout.
    run_fault(SIGSTOP, "HV_ETIMEDOUT", 1.5, env);
}

/* CUDA devices a child process sees (forked, so that the parent never initialises CUDA). */
static int probe_gpus(void) {
    pid_t pid = fork();
    if (pid == 0) {
        int n = hv__gpu_count();
        _exit(n > 100 ? 100 : n);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) {
        return 0;
    }
    return WEXITSTATUS(st);
}

static void test_sigkill_device(void) {
    int n = probe_gpus();
    if (n < 3) {
        HVT_SKIP("3 ranks on NCCL need 3 CUDA devices, %d visible", n);
        return;
    }
    static const char *const env[] = {"HV_TEST_DEVICE=1", NULL};
    // NCCL may see the loss itself (a remote error) or the negotiation over TCP sees the reset:
    // either is HV_EPEER, within the same bound as the host path.
    run_fault(SIGKILL, "HV_EPEER", 2.0, env);
}

static void test_sigstop_device(void) {
    int n = probe_gpus();
    if (n < 2) {
        HVT_SKIP("2 ranks on NCCL need 2 CUDA devices, %d visible", n);
        return;
    }
    static const char *const env[] = {"HV_TEST_DEVICE=1", "HV_PEER_TIMEOUT_MS=500", NULL};
    // A stalled NCCL call is aborted at the peer timeout plus the bytes' allowance (16 ms).
    run_fault(SIGSTOP, "HV_ETIMEDOUT", 1.5, env);
}

/* The *_on calls with declared CUDA memory: a sum, a broadcast and an asynchronous sum of device
 * buffers on the default stream, then the declarations libhv must refuse (each rank alike, so no
 * collective is left half-issued). On the CPU stand-in (HV_GPUSIM_DEVICES set) a stream CUDA does
 * not know must fail the synchronisation with HV_EIO: the stream reaches CUDA. */
static int child_on_device(int rank, int size, int out) {
    CHILD_CHECK(hv_init());
    enum { N = 3000 };
    float host[N], want[N];
    float *dev = NULL;
    CHILD_CHECK(hv__gpu_device_alloc(-1, sizeof(host), (void **)&dev));
    int ord = hv__gpu_device_of(dev);
    for (int i = 0; i < N; i++) {
        host[i] = (float)(rank * 10 + i % 50);
        want[i] = (float)(10 * size * (size - 1) / 2 + size * (i % 50));
    }
    CHILD_CHECK(hv__gpu_memcpy(dev, host, sizeof(host)));
    CHILD_CHECK(hv_allreduce_on(dev, dev, N, HV_FLOAT32, HV_SUM, ord, NULL));
    CHILD_CHECK(hv__gpu_memcpy(host, dev, sizeof(host)));
    if (memcmp(host, want, sizeof(host)) != 0) {
        say(out, "FAIL rank %d: allreduce_on: [1] = %g, want %g", rank, (double)host[1],
            (double)want[1]);
        return 1;
    }
    for (int i = 0; i < N; i++) {
        host[i] = rank == 1 ? (float)(i * 3) : -1.0f;
    }
    CHILD_CHECK(hv__gpu_memcpy(dev, host, sizeof(host)));
    CHILD_CHECK(hv_broadcast_on(dev, N, HV_FLOAT32, 1, ord, NULL));
    CHILD_CHECK(hv__gpu_memcpy(host, dev, sizeof(host)));
    if (host[7] != 21.0f || host[N - 1] != (float)((N - 1) * 3)) {
        say(out, "FAIL rank %d: broadcast_on: [7] = %g, want 21", rank, (double)host[7]);
        return 1;
    }
    for (int i = 0; i < N; i++) {
        host[i] = 1.0f;
    }
    CHILD_CHECK(hv__gpu_memcpy(dev, host, sizeof(host)));
    hv_handle_t h = 0;
    CHILD_CHECK(hv_allreduce_async_on("on.async", dev, dev, N, HV_FLOAT32, HV_SUM, ord, NULL, &h));
    CHILD_CHECK(hv_wait(h));
    CHILD_CHECK(hv__gpu_memcpy(host, dev, sizeof(host)));
    if (host[N - 1] != (float)size) {
        say(out, "FAIL rank %d: allreduce_async_on: %g, want %d", rank, (double)host[N - 1], size);
        return 1;
    }
    // Declarations that do not match the memory: refused before any collective.
    struct {
        const char *what;
        hv_err got, want;
    } bad[] = {
        {"host buffer declared device",
         hv_allreduce_on(host, host, N, HV_FLOAT32, HV_SUM, ord, NULL), HV_EINVAL},
        {"device buffer declared host", hv_allreduce_on(dev, dev, N, HV_FLOAT32, HV_SUM, -1, NULL),
         HV_EINVAL},
        {"device -2", hv_broadcast_on(dev, N, HV_FLOAT32, 0, -2, NULL), HV_EINVAL},
        {"stream with host memory", hv_broadcast_on(host, N, HV_FLOAT32, 0, -1, (void *)&host[0]),
         HV_EINVAL},
        {"async, host buffer declared device",
         hv_broadcast_async_on("on.bad", host, N, HV_FLOAT32, 0, ord, NULL, &h), HV_EINVAL},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (bad[i].got != bad[i].want) {
            say(out, "FAIL rank %d: %s: %s, want %s", rank, bad[i].what, hv_errname(bad[i].got),
                hv_errname(bad[i].want));
            return 1;
        }
    }
    if (getenv("HV_GPUSIM_DEVICES") != NULL) {
        static char not_a_stream[64];
        hv_err rc = hv_allreduce_on(dev, dev, N, HV_FLOAT32, HV_SUM, ord, not_a_stream);
        if (rc != HV_EIO) {
            say(out, "FAIL rank %d: unknown stream: %s, want HV_EIO", rank, hv_errname(rc));
            return 1;
        }
    }
    hv__gpu_device_free(dev);
    CHILD_CHECK(hv_shutdown());
    say(out, "OK");
    return 0;
}

static void test_on_device(void) {
    int n = probe_gpus();
    if (n < 1) {
        HVT_SKIP("device buffers need a CUDA device, %d visible", n);
        return;
    }
    // 2 ranks: NCCL with a GPU each, else (one GPU) staged through pinned host memory.
    run_ok(2, child_on_device, NULL);
}

/* Without CUDA (a build without it, or no device visible) declared device memory is refused
 * with HV_ENOTSUP, never read as host memory; host memory declared as such still works. */
static int child_on_nocuda(int rank, int size, int out) {
    (void)rank;
    CHILD_CHECK(hv_init());
    float host[64];
    for (int i = 0; i < 64; i++) {
        host[i] = 1.0f;
    }
    hv_handle_t h = 0;
    hv_err a = hv_allreduce_on(host, host, 64, HV_FLOAT32, HV_SUM, 0, NULL);
    hv_err b = hv_allreduce_async_on("nocuda", host, host, 64, HV_FLOAT32, HV_SUM, 0, NULL, &h);
    hv_err c = hv_broadcast_on(host, 64, HV_FLOAT32, 0, 0, NULL);
    hv_err d = hv_broadcast_async_on("nocuda.b", host, 64, HV_FLOAT32, 0, 0, NULL, &h);
    if (a != HV_ENOTSUP || b != HV_ENOTSUP || c != HV_ENOTSUP || d != HV_ENOTSUP) {
        say(out, "FAIL device 0 without CUDA: %s %s %s %s, want HV_ENOTSUP", hv_errname(a),
            hv_errname(b), hv_errname(c), hv_errname(d));
        return 1;
    }
    CHILD_CHECK(hv_allreduce_on(host, host, 64, HV_FLOAT32, HV_SUM, -1, NULL));
    if (host[63] != (float)size) {
        say(out, "FAIL host allreduce_on: %g, want %d", (double)host[63], size);
        return 1;
    }
    CHILD_CHECK(hv_shutdown());
    say(out, "OK");
    return 0;
}

static void test_on_nocuda(void) {
    int n = probe_gpus();
    if (n > 0) {
        HVT_SKIP("%d CUDA devices visible: on_device covers this build", n);
        return;
    }
    run_ok(2, child_on_nocuda, NULL);
}

static int child_solo(int rank, int size, int out) {
    (void)rank;
    (void)size;
    unsetenv("HV_RDZV_DIR");
    unsetenv("HV_RANK");
    unsetenv("HV_SIZE");
    for (int i = 0; i < 3; i++) {
        CHILD_CHECK(hv_init());
        if (hv_rank() != 0 || hv_size() != 1 || hv_local_size() != 1) {
            say(out, "FAIL solo identity");
            return 1;
        }
        int32_t x = 5;
        CHILD_CHECK(hv_allreduce(&x, &x, 1, HV_INT32, HV_AVG));
        hv_handle_t h;
        CHILD_CHECK(hv_allreduce_async("t", &x, &x, 1, HV_INT32, HV_SUM, &h));
        CHILD_CHECK(hv_wait(h));
        CHILD_CHECK(hv_barrier());
        if (x != 5) {
            say(out, "FAIL solo value %d", x);
            return 1;
        }
        CHILD_CHECK(hv_shutdown());
    }
    CHILD_CHECK(hv_shutdown()); // harmless when not initialised
    say(out, "OK");
    return 0;
}

/* Runs one rank of fn: the line it said (into line) and its exit code (-1: not started). */
static int run_one(child_fn fn, char *line, size_t len) {
    proc_t p;
    line[0] = '\0';
    if (spawn(1, fn, &p, NULL) != 0) {
        HVT_FAIL("cannot start the child");
        return -1;
    }
    report(&p, line, len, hvtest_scale(20));
    int code = reap(&p, hvtest_scale(10));
    cleanup_dir();
    return code;
}

static void test_solo_reinit(void) {
    char line[256];
    int code = run_one(child_solo, line, sizeof(line));
    if (code != 0 || strcmp(line, "OK") != 0) {
        HVT_FAIL("exit %d: %s", code, line);
    }
}

static int child_badenv(int rank, int size, int out) {
    (void)rank;
    (void)size;
    setenv("HV_PEER_TIMEOUT_MS", "soon", 1);
    hv_err rc = hv_init();
    say(out, "%s", hv_errname(rc));
    return 0;
}

static void test_bad_env(void) {
    char line[256];
    run_one(child_badenv, line, sizeof(line));
    if (strcmp(line, "HV_EINVAL") != 0) {
        HVT_FAIL("a malformed HV_PEER_TIMEOUT_MS gave %s, want HV_EINVAL", line);
    }
}

/* hv_elastic_run through the public API, on rdzv_file (a fixed membership: no pushes). */
typedef struct proc_model_s {
    float w[256];
    uint64_t step;
    int rank;
    int bad; // set when the training function saw something wrong
} proc_model_t;

static hv_err proc_train(hv_state_t *st, void *ud) {
    proc_model_t *m = ud;
    // The sync from rank 0 replaced every rank's initial model with rank 0's.
    for (int i = 0; i < 256; i++) {
        m->bad |= m->w[i] != (float)i;
    }
    m->bad |= m->step != 0 || hv_generation() != 1;
    for (; m->step < 3; m->step++) {
        hv_err rc = hv_allreduce(m->w, m->w, 256, HV_FLOAT32, HV_AVG);
        if (rc == HV_OK) {
            rc = hv_state_commit(st);
        }
        if (rc != HV_OK) {
            return rc;
        }
    }
    return HV_OK;
}

static hv_err proc_fail(hv_state_t *st, void *ud) {
    (void)st;
    (void)ud;
    return HV_EPEER; // without a head nothing re-joins: returned as it is
}

static int child_elastic(int rank, int size, int out) {
    (void)size;
    proc_model_t m = {.rank = rank, .step = rank == 0 ? 0 : 99};
    for (int i = 0; i < 256; i++) {
        m.w[i] = rank == 0 ? (float)i : -1.0f;
    }
    hv_state_t *st = NULL;
    CHILD_CHECK(hv_state_create(&st));
    CHILD_CHECK(hv_state_add_buffer(st, "w", m.w, sizeof(m.w)));
    CHILD_CHECK(hv_state_add_u64(st, "step", &m.step));
    CHILD_CHECK(hv_elastic_run(st, proc_train, &m)); // calls hv_init itself
    char done[128];
    snprintf(done, sizeof(done), "%s/done.r%d", rdzv_dir, rank);
    if (m.bad || hv_state_commits(st) != 3 || hv_state_removed(st) || hv_state_resets(st) ||
        hv_rank() != rank || access(done, F_OK) != 0) {
        say(out, "FAIL bad %d commits %llu removed %d resets %u rank %d done-file %d", m.bad,
            (unsigned long long)hv_state_commits(st), hv_state_removed(st), hv_state_resets(st),
            hv_rank(), access(done, F_OK));
        return 1;
    }
    hv_err rc = hv_elastic_run(st, proc_fail, NULL);
    hv_state_destroy(st);
    CHILD_CHECK(hv_shutdown());
    if (rc != HV_EPEER || hv_generation() != 0) {
        say(out, "FAIL a failure came back as %s (generation %u)", hv_errname(rc), hv_generation());
        return 1;
    }
    say(out, "OK");
    return 0;
}

static void test_elastic(void) { run_ok(2, child_elastic, NULL); }

/* hv_join (Horovod's join) on 3 ranks with uneven data: rank r has r + 1 steps of a named async
 * allreduce (AVG) and an unnamed blocking one (SUM); a joined rank contributes zeros, so step s
 * sums the ranks >= s. Then an unnamed call after the join (the ranks agree on its name again),
 * hv_allgather_async, hv_cross_rank/size, and a broadcast while a rank is joined (refused on
 * the ranks that issued it, HV_ENOTSUP, the engine still usable). */
static int join_steps(int rank, int size, int out) {
    for (int s = 0; s <= rank; s++) {
        float g[1000], want = 0;
        for (int i = 0; i < 1000; i++) {
            g[i] = (float)(rank + 1);
        }
        for (int r = s; r < size; r++) {
            want += (float)(r + 1);
        }
        hv_handle_t h;
        CHILD_CHECK(hv_allreduce_async("grad", g, g, 1000, HV_FLOAT32, HV_AVG, &h));
        float l = (float)(rank + 1);
        CHILD_CHECK(hv_allreduce(&l, &l, 1, HV_FLOAT32, HV_SUM));
        CHILD_CHECK(hv_wait(h));
        if (g[999] != want / (float)size || l != want) {
            say(out, "FAIL rank %d step %d: grad %g loss %g, want %g and %g", rank, s,
                (double)g[999], (double)l, (double)(want / (float)size), (double)want);
            return 1;
        }
    }
    return 0;
}

static int child_join(int rank, int size, int out) {
    CHILD_CHECK(hv_init());
    if (join_steps(rank, size, out) != 0) {
        return 1;
    }
    int last = -1;
    CHILD_CHECK(hv_join(&last));
    float one = 1.0f;
    CHILD_CHECK(hv_allreduce(&one, &one, 1, HV_FLOAT32, HV_SUM));
    int32_t mine[4] = {rank, rank, rank, rank}, all[16];
    size_t counts[4];
    hv_handle_t h;
    CHILD_CHECK(hv_allgather_async("ag", mine, (size_t)rank + 1, HV_INT32, all, 16, counts, &h));
    CHILD_CHECK(hv_wait(h));
    if (last != size - 1 || one != (float)size || counts[2] != 3 || all[0] != 0 || all[5] != 2 ||
        hv_cross_rank() != 0 || hv_cross_size() != 1) {
        say(out, "FAIL last %d one %g counts %zu all %d %d cross %d/%d", last, (double)one,
            counts[2], all[0], all[5], hv_cross_rank(), hv_cross_size());
        return 1;
    }
    // Rank 0 joins; the others' broadcast is refused once it has, then they join too.
    if (rank != 0) {
        int32_t b[4] = {0};
        hv_err rc = hv_broadcast(b, 4, HV_INT32, 1);
        char why[256];
        hv_last_error(why, sizeof(why));
        if (rc != HV_ENOTSUP || strstr(why, "joined") == NULL) {
            say(out, "FAIL a broadcast while rank 0 is joined: %s (%s)", hv_errname(rc), why);
            return 1;
        }
    }
    CHILD_CHECK(hv_join(&last));
    CHILD_CHECK(hv_barrier());
    CHILD_CHECK(hv_shutdown());
    say(out, "OK");
    return 0;
}

static void test_join(void) { run_ok(3, child_join, NULL); }

/* hv_shutdown_at_exit: a process that exits 0 while initialised reports Done (the rendezvous
 * directory's done.r0); one that exits 3 does not, nor one that did not ask for it. */
static int exit_mode; // 0: register, exit 0; 1: register, exit 3; 2: no registration, exit 0

static int child_exit(int rank, int size, int out) {
    (void)rank;
    (void)size;
    if (exit_mode != 2) {
        CHILD_CHECK(hv_shutdown_at_exit());
        CHILD_CHECK(hv_shutdown_at_exit()); // once per process: a second call changes nothing
    }
    CHILD_CHECK(hv_init());
    say(out, "OK");
    exit(exit_mode == 1 ? 3 : 0); // exit(), not _exit(): the exit handlers run
}

static void test_exit(void) {
    static const int want_code[3] = {0, 3, 0}, want_done[3] = {1, 0, 0};
    for (exit_mode = 0; exit_mode < 3; exit_mode++) {
        proc_t p;
        ASSERT_TRUE(spawn(1, child_exit, &p, NULL) == 0);
        char line[256], done[128];
        report(&p, line, sizeof(line), hvtest_scale(20));
        int code = reap(&p, hvtest_scale(10));
        snprintf(done, sizeof(done), "%s/done.r0", rdzv_dir);
        int have = access(done, F_OK) == 0;
        cleanup_dir();
        if (code != want_code[exit_mode] || strcmp(line, "OK") != 0 ||
            have != want_done[exit_mode]) {
            HVT_FAIL("mode %d: exit %d (want %d), '%s', Done reported %d (want %d)", exit_mode,
                     code, want_code[exit_mode], line, have, want_done[exit_mode]);
        }
    }
}

static const hvtest_case_t cases[] = {
    {"api", test_api},
    {"sigkill", test_sigkill},
    {"sigstop", test_sigstop},
    {"solo_reinit", test_solo_reinit},
    {"bad_env", test_bad_env},
    {"elastic", test_elastic},
    {"join", test_join},
    {"exit", test_exit},
    {"sigkill_device", test_sigkill_device},
    {"sigstop_device", test_sigstop_device},
    {"on_device", test_on_device},
    {"on_nocuda", test_on_nocuda},
};

HVTEST_MAIN(cases)
