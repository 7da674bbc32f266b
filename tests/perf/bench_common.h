/*
 * bench_common: what the allreduce benchmarks share so that libhv and the MPI peer are measured
 * the same way: the size list, iteration counts, the ResNet-50 tensor list, and the output
 * format; and the launcher that forks a benchmark's ranks over a rendezvous directory (used by
 * bench_allreduce and bench_sync). Each benchmark prints, from rank 0, one line per measurement:
 *   ROW <kind> <bytes> <time_us> <busbw_GBps>
 * kind is "allreduce" (one in-place float32 sum of <bytes>) or "resnet" (one training step's
 * 161 gradients; time per step). busbw follows nccl-tests: bytes / time * 2 (n - 1) / n.
 * Times are medians over `runs` timed runs, each averaging `iters` back-to-back calls.
 */
#ifndef HV_TESTS_PERF_BENCH_COMMON_H
#define HV_TESTS_PERF_BENCH_COMMON_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BENCH_MAX_SIZES 32
#define BENCH_MAX_TENSORS 1024

typedef struct bench_cfg_s {
    size_t sizes[BENCH_MAX_SIZES];
    int nsizes;
    int runs;
    const char *resnet; // counts file, or NULL
    int resnet_steps;
} bench_cfg_t;

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline size_t bench_parse_size(const char *s) {
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == NULL || end == s) {
        return 0;
    }
    switch (*end) {
    case 'k':
    case 'K':
        v *= 1024;
        break;
    case 'm':
    case 'M':
        v *= 1024 * 1024;
        break;
    case 'g':
    case 'G':
        v *= 1024.0 * 1024 * 1024;
        break;
    default:
        break;
    }
    return (size_t)v;
}

/* Parses "--sizes 4K,1M" (or "none"), "--runs N", "--resnet FILE", "--steps N"; returns 0 or -1. Unknown
 * arguments are left for the caller (their indexes are marked in used[]). */
static inline int bench_parse(int argc, char **argv, bench_cfg_t *c, int *used) {
    static const char *defaults = "4K,64K,1M,16M,64M,256M";
    const char *sizes = defaults;
    c->runs = 3;
    c->resnet = NULL;
    c->resnet_steps = 6;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--sizes") == 0) {
            sizes = argv[++i];
            used[i - 1] = used[i] = 1;
        } else if (i + 1 < argc && strcmp(argv[i], "--runs") == 0) {
            c->runs = atoi(argv[++i]);
            used[i - 1] = used[i] = 1;
        } else if (i + 1 < argc && strcmp(argv[i], "--resnet") == 0) {
            c->resnet = argv[++i];
            used[i - 1] = used[i] = 1;
        } else if (i + 1 < argc && strcmp(argv[i], "--steps") == 0) {
            c->resnet_steps = atoi(argv[++i]);
            used[i - 1] = used[i] = 1;
        }
    }
    c->nsizes = 0;
    if (strcmp(sizes, "none") == 0) {
        return 0; // only the ResNet step (--resnet), if any
    }
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", sizes);
    for (char *tok = strtok(buf, ","); tok != NULL && c->nsizes < BENCH_MAX_SIZES;
         tok = strtok(NULL, ",")) {
        size_t v = bench_parse_size(tok);
        if (v == 0 && strcmp(tok, "0") != 0) {
            fprintf(stderr, "bad size '%s'\n", tok);
            return -1;
        }
        c->sizes[c->nsizes++] = v;
    }
    if (c->runs < 1) {
        c->runs = 1;
    }
    return 0;
}

/* Back-to-back calls per timed run: enough to amortise timer noise, bounded for big sizes. */
static inline int bench_iters(size_t bytes) {
    size_t target = 256u << 20;
    size_t it = bytes ? target / bytes : 1000;
    if (it < 3) {
        it = 3;
    }
    if (it > 2000) {
        it = 2000;
    }
    return (int)it;
}

/* Reads the ResNet-50 tensor element counts (one per line). Returns how many, or -1. */
static inline int bench_read_counts(const char *path, size_t *counts, int max) {
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        perror(path);
        return -1;
    }
    int n = 0;
    unsigned long long v;
    while (n < max && fscanf(f, "%llu", &v) == 1) {
        counts[n++] = (size_t)v;
    }
    fclose(f);
    return n;
}

static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static inline double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), bench_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static inline void bench_row(const char *kind, size_t bytes, double secs, int n) {
    double busbw = secs > 0 ? (double)bytes / secs * 2.0 * (n - 1) / n / 1e9 : 0;
    printf("ROW %s %zu %.2f %.3f\n", kind, bytes, secs * 1e6, busbw);
    fflush(stdout);
}

/* Forks n (at most 64) ranks of this program, argv as given, meeting through a fresh rendezvous
 * directory /tmp/<prefix>-XXXXXX (HV_RDZV_DIR, HV_RANK, HV_SIZE; every rank on this host, so
 * HV_LOCAL_RANK = rank). Waits for all; when one fails the others are stopped. Returns 0 if
 * every rank exited 0. */
static inline int bench_launch(int n, char **argv, const char *prefix) {
    char dir[256];
    snprintf(dir, sizeof(dir), "/tmp/%s-XXXXXX", prefix);
    if (n > 64 || mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    pid_t pids[64];
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            char rank[16], size[16];
            snprintf(rank, sizeof(rank), "%d", r);
            snprintf(size, sizeof(size), "%d", n);
            setenv("HV_RDZV_DIR", dir, 1);
            setenv("HV_RANK", rank, 1);
            setenv("HV_SIZE", size, 1);
            setenv("HV_LOCAL_RANK", rank, 1);
            setenv("HV_LOCAL_SIZE", size, 1);
            execv("/proc/self/exe", argv);
            _exit(127);
        }
    }
    int failed = 0;
    for (int r = 0; r < n; r++) {
        int st = 0;
        waitpid(pids[r], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            failed = 1;
            for (int q = 0; q < n; q++) {
                kill(pids[q], SIGTERM); // one failed: do not leave the others waiting
            }
        }
    }
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "could not remove %s\n", dir);
    }
    return failed;
}

#endif
