/*
 * bench_elastic: the worker of the reset-latency benchmark (tests/perf/bench_elastic.sh), run
 * through hvsubmit as an elastic job. It trains nothing real: every step is one allreduce of a
 * model-sized buffer (--model bytes, default 1 MiB) and a commit, as a training step's
 * communication is, so what it measures is hv's reset path and not arithmetic. It uses only the
 * public API (<hv/hv.h>, <hv/elastic.h>).
 *
 * Every rank prints timestamped lines (wall-clock ms, so the script can compare them with the
 * moment it killed or drained something):
 *   BENCH fail  <t> gen=G rank=R rc=NAME step=S     the training function saw a peer fail
 *   BENCH reset <t> gen=G size=N rollback=B old=G'  after the new round formed and synced
 *   BENCH step  <t> gen=G size=N step=S             the first step completed in a round
 *   BENCH lost  <t> gen=G steps=K                   steps rolled back (restore) at a reset
 *   BENCH left  <t> gen=G                           this worker was drained out
 *   BENCH mark  <t> step=S                          the first step --mark-ms after the first
 *   BENCH done  <t> gen=G rank=R steps=S cpu_ms=C   the training function returns (--steps);
 *                                                   C: this process' CPU time so far (all threads)
 *   BENCH tick  <t> step=S ms=M                     with HV_BENCH_TRACE=1, rank 0: every step
 * Options: --model BYTES, --steps N (total steps, default: run until --seconds), --seconds S
 * (default 120; the ranks agree every 50 steps whether it has passed, so all stop at one step), --step-ms M (sleep per step, default 5), --compute-ms M (default 0: a busy loop of M ms
 * on the training thread every step, a long compute step that keeps a core busy: the soak of
 * the liveness detector, tests/perf/soak_silent.sh), --mark-ms M (default 0: no mark; a
 * window from the mark to the end leaves out what the first M ms held, bench_copy.sh's first
 * state copy).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <hv/elastic.h>
#include <hv/hv.h>

typedef struct bench_s {
    float *model;
    size_t n;
    uint64_t step;      /* in the state: committed steps */
    uint64_t max_steps; /* 0 = until the deadline */
    uint64_t deadline;  /* wall ms */
    uint32_t step_ms;
    uint32_t compute_ms;  /* --compute-ms: busy time per step */
    uint32_t printed_gen; /* the generation whose first step was printed */
    uint64_t seen_step;   /* highest step this process completed (for steps lost) */
    uint64_t mark_ms;     /* --mark-ms; 0: none */
    int trace;            /* HV_BENCH_TRACE=1: rank 0 prints every step's time (BENCH tick) */
    uint64_t first_ms;    /* wall ms of this process's first completed step */
    int marked;
} bench_t;

static uint64_t wall_ms(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (uint64_t)tv.tv_sec * 1000u + (uint64_t)tv.tv_usec / 1000u;
}

static void on_reset(hv_state_t *st, const hv_reset_info_t *info, void *ud) {
    bench_t *b = ud;
    (void)st;
    printf("BENCH reset %llu gen=%u size=%d rollback=%d old=%u\n", (unsigned long long)wall_ms(),
           info->new_generation, info->new_size, info->rollback, info->old_generation);
    if (b->seen_step > b->step) {
        printf("BENCH lost %llu gen=%u steps=%llu\n", (unsigned long long)wall_ms(),
               info->new_generation, (unsigned long long)(b->seen_step - b->step));
    }
    b->seen_step = b->step;
    fflush(stdout);
}

/* This process' CPU time (user + system, every thread: the copier's too), in ms. */
static uint64_t cpu_ms(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) {
        return 0;
    }
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000u +
           (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000u;
}

/* Whether every rank stops now (--seconds): the ranks vote every 50 steps with a one-float MAX
 * allreduce, so that they stop at the same step; each on its own clock, one would leave while the
 * others wait in the next allreduce for it (HV_EPEER). A failed vote is taken as "go on": the
 * allreduce after it fails the same way and the reset path handles it. */
static int past_deadline(const bench_t *b) {
    if (b->step == 0 || b->step % 50 != 0) {
        return 0;
    }
    float vote = wall_ms() >= b->deadline ? 1.0f : 0.0f;
    return hv_allreduce(&vote, &vote, 1, HV_FLOAT32, HV_MAX) == HV_OK && vote > 0.5f;
}

static hv_err train(hv_state_t *st, void *ud) {
    bench_t *b = ud;
    for (;;) {
        if ((b->max_steps > 0 && b->step >= b->max_steps) ||
            (b->max_steps == 0 && past_deadline(b))) {
            printf("BENCH done %llu gen=%u rank=%d steps=%llu cpu_ms=%llu\n",
                   (unsigned long long)wall_ms(), hv_generation(), hv_rank(),
                   (unsigned long long)b->step, (unsigned long long)cpu_ms());
            fflush(stdout);
            return HV_OK;
        }
        uint64_t t_step = b->trace ? wall_ms() : 0;
        hv_err rc = hv_allreduce(b->model, b->model, b->n, HV_FLOAT32, HV_AVG);
        if (rc == HV_OK) {
            b->step++;
            rc = hv_state_commit(st);
        }
        if (rc != HV_OK) {
            if (rc != HV_ERESET) {
                printf("BENCH fail %llu gen=%u rank=%d rc=%s step=%llu\n",
                       (unsigned long long)wall_ms(), hv_generation(), hv_rank(), hv_errname(rc),
                       (unsigned long long)b->step);
                fflush(stdout);
            }
            return rc;
        }
        if (b->step > b->seen_step) {
            b->seen_step = b->step;
        }
        if (b->trace && hv_rank() == 0) {
            uint64_t now = wall_ms();
            printf("BENCH tick %llu step=%llu ms=%llu\n", (unsigned long long)now,
                   (unsigned long long)b->step, (unsigned long long)(now - t_step));
        }
        if (b->mark_ms > 0 && !b->marked) {
            uint64_t now = wall_ms();
            if (b->first_ms == 0) {
                b->first_ms = now;
            } else if (now - b->first_ms >= b->mark_ms) {
                b->marked = 1;
                printf("BENCH mark %llu step=%llu\n", (unsigned long long)now,
                       (unsigned long long)b->step);
                fflush(stdout);
            }
        }
        if (b->printed_gen != hv_generation()) {
            b->printed_gen = hv_generation();
            printf("BENCH step %llu gen=%u size=%d step=%llu\n", (unsigned long long)wall_ms(),
                   hv_generation(), hv_size(), (unsigned long long)b->step);
            fflush(stdout);
        }
        if (b->step_ms > 0) {
            struct timespec ts = {0, (long)b->step_ms * 1000000L};
            nanosleep(&ts, NULL);
        }
        if (b->compute_ms > 0) {
            /* A long compute step: the training thread spins and calls nothing of libhv. */
            volatile uint64_t sink = 0;
            uint64_t until = wall_ms() + b->compute_ms;
            while (wall_ms() < until) {
                for (int k = 0; k < 10000; k++) {
                    sink += (uint64_t)k;
                }
            }
        }
    }
}

int main(int argc, char **argv) {
    size_t model = 1u << 20;
    double seconds = 120;
    bench_t b;
    memset(&b, 0, sizeof(b));
    b.step_ms = 5;
    b.trace = getenv("HV_BENCH_TRACE") != NULL && strcmp(getenv("HV_BENCH_TRACE"), "1") == 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL) {
            fprintf(stderr, "bench_elastic: %s needs a value\n", a);
            return 2;
        }
        if (strcmp(a, "--model") == 0) {
            model = strtoull(v, NULL, 10);
        } else if (strcmp(a, "--steps") == 0) {
            b.max_steps = strtoull(v, NULL, 10);
        } else if (strcmp(a, "--seconds") == 0) {
            seconds = atof(v);
        } else if (strcmp(a, "--step-ms") == 0) {
            b.step_ms = (uint32_t)strtoul(v, NULL, 10);
        } else if (strcmp(a, "--compute-ms") == 0) {
            b.compute_ms = (uint32_t)strtoul(v, NULL, 10);
        } else if (strcmp(a, "--mark-ms") == 0) {
            b.mark_ms = strtoull(v, NULL, 10);
        } else {
            fprintf(stderr, "bench_elastic: unknown option %s\n", a);
            return 2;
        }
        i++;
    }
    b.n = model / sizeof(float);
    if (b.n == 0 || (b.model = calloc(b.n, sizeof(float))) == NULL) {
        fprintf(stderr, "bench_elastic: bad --model\n");
        return 2;
    }
    b.deadline = wall_ms() + (uint64_t)(seconds * 1000.0);
    hv_state_t *st = NULL;
    hv_err rc = hv_state_create(&st);
    if (rc == HV_OK) {
        rc = hv_state_add_buffer(st, "model", b.model, b.n * sizeof(float));
    }
    if (rc == HV_OK) {
        rc = hv_state_add_u64(st, "step", &b.step);
    }
    if (rc == HV_OK) {
        rc = hv_state_on_reset(st, on_reset, &b);
    }
    if (rc == HV_OK) {
        rc = hv_elastic_run(st, train, &b);
    }
    if (rc == HV_OK && hv_state_removed(st)) {
        printf("BENCH left %llu gen=%u\n", (unsigned long long)wall_ms(), hv_generation());
    }
    if (rc != HV_OK) {
        char detail[512];
        fprintf(stderr, "bench_elastic: %s (%s)\n", hv_strerror(rc),
                hv_last_error(detail, sizeof(detail)));
    }
    hv_state_destroy(st);
    hv_shutdown();
    free(b.model);
    return rc == HV_OK ? 0 : 1;
}
