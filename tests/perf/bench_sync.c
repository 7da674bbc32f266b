/*
 * bench_sync: how long an elastic state takes to reach the other ranks (hv_state_sync: what a
 * joiner waits for after every new round), next to a plain ring broadcast of the same bytes
 * (the ring's bandwidth) and a commit (the in-memory snapshot). Two modes, as bench_allreduce:
 *   bench_sync --launch N [opts]  forks N ranks of itself that meet through a temporary
 *                                 HV_RDZV_DIR (fixed membership: every rank but 0 receives,
 *                                 exactly as joiners do after a new round);
 *   bench_sync [opts]             one rank under any launcher that sets libhv's environment.
 * Options: --sizes 64M,512M (state bytes), --runs R (timed repetitions, median reported),
 * --tensors T (the state is T buffers of equal size, as a model's tensors; default 16).
 * Rank 0 prints one line per measurement:
 *   ROW <kind> <bytes> <time_us> <GB/s>     kind: bcast | sync | commit; GB/s = bytes / time
 * Each run starts after a barrier and ends with one, so the time is until the last rank has
 * the state. Every sync is checked: the receivers hold rank 0's bytes afterwards. Uses only the
 * public API (<hv/hv.h>, <hv/elastic.h>).
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hv/elastic.h>
#include <hv/hv.h>

#include "bench_common.h"
#include "bench_hv.h"

static void row(const char *kind, size_t bytes, double secs) {
    printf("ROW %s %zu %.1f %.3f\n", kind, bytes, secs * 1e6, secs > 0 ? bytes / secs / 1e9 : 0);
    fflush(stdout);
}

/* Fills buf with a pattern that depends on who holds it (rank 0's differs from the others'). */
static void fill(unsigned char *buf, size_t n, int rank, int run) {
    uint64_t v = 0x9e3779b97f4a7c15ull * (uint64_t)(rank * 131 + run + 1);
    for (size_t i = 0; i + 8 <= n; i += 4096) {
        memcpy(buf + i, &v, 8);
    }
}

static int bench_size(size_t bytes, int runs, int tensors) {
    int rank = hv_rank();
    size_t per = bytes / (size_t)tensors;
    unsigned char *buf = malloc(per * (size_t)tensors + 64);
    if (buf == NULL) {
        fprintf(stderr, "rank %d: cannot allocate %zu bytes\n", rank, bytes);
        return -1;
    }
    memset(buf, 0, per * (size_t)tensors); // touch every page before timing
    hv_state_t *st = NULL;
    if (bench_check(hv_state_create(&st), "hv_state_create") != 0) {
        free(buf);
        return -1;
    }
    for (int t = 0; t < tensors; t++) {
        char name[32];
        snprintf(name, sizeof(name), "model.%d", t);
        if (bench_check(hv_state_add_buffer(st, name, buf + (size_t)t * per, per), "add_buffer") !=
            0) {
            goto fail;
        }
    }
    double tb[64], ts[64], tc[64];
    if (runs > 64) {
        runs = 64;
    }
    // Warm-up: the first sync also allocates and faults in the snapshots.
    if (bench_check(hv_state_sync(st), "warm-up sync") != 0) {
        goto fail;
    }
    for (int r = 0; r < runs; r++) {
        fill(buf, per * (size_t)tensors, rank, r);
        if (bench_check(hv_barrier(), "barrier") != 0) {
            goto fail;
        }
        double t0 = bench_now();
        if (bench_check(hv_broadcast(buf, per * (size_t)tensors, HV_UINT8, 0), "broadcast") != 0 ||
            bench_check(hv_barrier(), "barrier") != 0) {
            goto fail;
        }
        tb[r] = bench_now() - t0;

        fill(buf, per * (size_t)tensors, rank, r + 1000);
        if (bench_check(hv_barrier(), "barrier") != 0) {
            goto fail;
        }
        t0 = bench_now();
        if (bench_check(hv_state_sync(st), "sync") != 0 ||
            bench_check(hv_barrier(), "barrier") != 0) {
            goto fail;
        }
        ts[r] = bench_now() - t0;
        unsigned char want[8];
        fill(want, 8, 0, r + 1000);
        size_t last = (per * (size_t)tensors - 8) / 4096 * 4096; // the last word fill() wrote
        if (memcmp(buf, want, 8) != 0 || memcmp(buf + last, want, 8) != 0) {
            fprintf(stderr, "rank %d: the synced state is not rank 0's\n", rank);
            goto fail;
        }

        t0 = bench_now();
        if (bench_check(hv_state_commit(st), "commit") != 0) {
            goto fail;
        }
        tc[r] = bench_now() - t0; // local: a copy into the snapshot
    }
    if (rank == 0) {
        row("bcast", per * (size_t)tensors, bench_median(tb, runs));
        row("sync", per * (size_t)tensors, bench_median(ts, runs));
        row("commit", per * (size_t)tensors, bench_median(tc, runs));
    }
    hv_state_destroy(st);
    free(buf);
    return 0;
fail:
    hv_state_destroy(st);
    free(buf);
    return -1;
}

static int worker(const size_t *sizes, int nsizes, int runs, int tensors) {
    if (bench_check(hv_init(), "hv_init") != 0) {
        return 1;
    }
    int rc = 0;
    for (int i = 0; i < nsizes && rc == 0; i++) {
        rc = bench_size(sizes[i], runs, tensors);
    }
    hv_shutdown();
    return rc == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    size_t sizes[16];
    int nsizes = 0, runs = 3, tensors = 16, n = 0;
    const char *list = "64M,512M";
    char *child_argv[64];
    int ca = 0;
    child_argv[ca++] = argv[0];
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--launch") == 0) {
            n = atoi(argv[++i]);
            continue; // the children run the same options without --launch
        }
        if (i + 1 < argc && strcmp(argv[i], "--sizes") == 0) {
            list = argv[i + 1];
        } else if (i + 1 < argc && strcmp(argv[i], "--runs") == 0) {
            runs = atoi(argv[i + 1]);
        } else if (i + 1 < argc && strcmp(argv[i], "--tensors") == 0) {
            tensors = atoi(argv[i + 1]);
        } else {
            fprintf(stderr, "usage: bench_sync [--launch N] [--sizes 64M,512M] [--runs R] "
                            "[--tensors T]\n");
            return 2;
        }
        if (ca + 2 < 63) {
            child_argv[ca++] = argv[i];
            child_argv[ca++] = argv[i + 1];
        }
        i++;
    }
    child_argv[ca] = NULL;
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", list);
    for (char *tok = strtok(buf, ","); tok != NULL && nsizes < 16; tok = strtok(NULL, ",")) {
        sizes[nsizes] = bench_parse_size(tok);
        if (sizes[nsizes] == 0) {
            fprintf(stderr, "bad size '%s'\n", tok);
            return 2;
        }
        nsizes++;
    }
    if (runs < 1 || tensors < 1 || nsizes == 0) {
        return 2;
    }
    if (n > 0) {
        return n > 64 ? 2 : bench_launch(n, child_argv, "hv-bench-sync");
    }
    return worker(sizes, nsizes, runs, tensors);
}
