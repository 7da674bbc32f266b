/*
 * elastic_train: real learning under libhv's elastic API. A multi-layer perceptron (784-256-128-10,
 * ReLU, softmax cross-entropy, float32) learns Fashion-MNIST (Debian's dataset-fashion-mnist) with
 * SGD + momentum 0.9 and a cosine learning-rate decay over the run, data-parallel on any number
 * of workers, and keeps training when workers fail, join or are drained. The data set's README
 * lists an MLP 256-128-100 at 0.8833 test accuracy; this one reaches about 0.88 in 5 epochs
 * (0.881 to 0.884 with seeds 1 to 5), an epoch taking 2 to 3 s in one process on one core of
 * a 2020s x86 server.
 *
 * The model (layout, forward pass, initialisation, evaluation) is mlp.c's, shared with the
 * evaluation actor; the backward pass and the update are here.
 *
 * What it shows of hv/elastic.h: the weights, the momentum buffers and the scalars (epoch, step
 * in the epoch, the epoch's summed loss, the last accuracy) live in an hv_state_t; the training
 * function runs under hv_elastic_run; a sampler hands out each epoch's shuffled samples (by
 * default a constant global batch split across ranks, so the optimisation is the same at any
 * world size, and no sample is processed twice or skipped across resets); every step commits;
 * a reset callback rescales the learning rate (linear scaling rule with --batch-per-rank). A
 * step: each rank sums its samples' gradients (forward, backward), the per-layer gradients go to
 * the fused asynchronous allreduce as soon as the backward pass produced them (last layer first,
 * overlapping the rest of the backward pass), and every rank divides by the step's global sample
 * count and applies the same update. At each epoch's end the ranks split the test set, count the
 * correct predictions and allreduce the count.
 *
 * Output (stdout, rank 0, one line per epoch, then one at the end):
 *   elastic_train: epoch=E size=W generation=G rank0=NODE samples=S duplicates=D exact=X
 *                  loss=L accuracy=A seconds=T            (one line)
 *   elastic_train: done epochs=E accuracy=A resets=R rollbacks=B
 * S and D are the sampler's processed and duplicate counts at the epoch's end, X is 1 when the
 * epoch was exact (every sample once: processed == N, no duplicates, checksum N(N-1)/2), L the
 * mean training loss of the epoch, A the test accuracy, T the epoch's wall time on rank 0.
 * A worker removed by a drain prints "elastic_train: removed from the job (generation G)" on
 * stderr and exits 0. Exit status: 0 on success, 1 on any error (the message says what).
 *
 * Run it:
 *   elastic_train                                  one process
 *   HV_RDZV_DIR=/tmp/r HV_SIZE=2 HV_RANK=0 elastic_train & HV_RDZV_DIR=/tmp/r HV_SIZE=2 \
 *     HV_RANK=1 elastic_train                      two processes without a head
 *   hvsubmit --min-np 2 --max-np 4 -np 4 build/examples/elastic_train --epochs 5   on a cluster
 *
 * Flags:
 *   --epochs N            epochs to train (default 5)
 *   --batch N             global batch: samples per step over all ranks (default 64)
 *   --batch-per-rank N    instead: N samples per rank and step; the learning rate is multiplied
 *                         by the world size (linear scaling rule), again after every reset
 *   --lr X                peak learning rate (default 0.05), decayed by a cosine to 0 at the end
 *   --seed N              weight initialisation and shuffling (default 1)
 *   --data DIR            the data set (default $HV_FMNIST_DIR, else
 *                         /usr/share/datasets/fashion-mnist)
 *   --train-limit N       train on the first N training samples only (default: all 60000)
 *   --test-limit N        evaluate on the first N test samples only (default: all 10000)
 *   --step-delay-ms N     sleep N ms after every step (lets tests act in the middle of an epoch)
 *   --exit-on-node NODE:CODE  in every generation, a worker on NODE exits at its first step.
 *   --exit-at E:B:R:CODE  in the job's first generation (never after --checkpoint resumed it),
 *                         the worker of rank R (or `all`) exits with status CODE when it
 *                         reaches batch B (from 0) of epoch E (from 0). With a suffix :every,
 *                         in every generation: a program that always fails there (a worker
 *                         that a peer's failure reset before it got there fails after the reset)
 *   --kill-at E:B:R       the same, but the worker kills itself with SIGKILL
 *   --double-every N      grow over epochs: ask for twice the job's first size every N epochs
 *                         (a size callback, hv_set_size_callback), up to --double-max M
 *                         (default 64; the head also holds it to --max-np). The batch is per
 *                         rank (--batch-per-rank, default 32), so the global batch grows with
 *                         the workers, and the learning rate stays at --lr instead of decaying:
 *                         the growing batch takes the decay's place ("Don't decay the learning
 *                         rate, increase the batch size", Smith et al. 2018)
 *   --checkpoint PATH     rank 0 writes the state to PATH (hv_state_save) every
 *                         --checkpoint-every N steps (default: at each epoch's end); at start
 *                         every worker resumes from PATH when it exists (hv_state_load). With
 *                         `hvsubmit --retries`, this is the restart-the-job policy
 *   --compute-ms-per-sample X  sleep X ms per sample of this rank's share of each step: a
 *                         stand-in for an accelerator's time, so that a step takes as long as the
 *                         job's machines make it take, whatever this host's cores (benchmarks)
 *   --step-log PATH       rank 0 appends "EPOCH BATCH GENERATION" to PATH as each step starts
 *                         (steps redone after a rollback or a restart appear again: goodput)
 *   --epoch-log PATH      rank 0 appends each epoch's line to PATH too, before stdout (a file
 *                         write outlives a SIGKILL of the node or of its agent; the log stream
 *                         may lose the last lines). A rank 0 that takes over after a reset does
 *                         not print a line PATH already holds
 *   --eval-actor [NS/]NAME  the test evaluation runs in the actor NAME (class "evaluator",
 *                         examples/eval_actor.c), not in the job: rank 0 sends it the committed
 *                         model after each epoch's commit (hv_actor_lookup, hv_actor_call_async:
 *                         training does not wait for the evaluation) and prints its answers as
 *                         "elastic_train: evaluated by NAME: epoch=E accuracy=A loss=L samples=N"
 *                         when they have come (at a later epoch's end, or at the finish, which
 *                         waits up to 60 s for them, 5 s in a removed worker); the epoch lines
 *                         say accuracy=-. A model whose call was lost with the connection (the
 *                         actor moved) is sent again. A missing or unreachable actor is a
 *                         warning on stderr at each epoch's end, never an error: training goes
 *                         on (docs/actors.md)
 *   --verbose             more on stderr: configuration, data loading, progress every 100 steps
 *   --help                this text
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hv/actor.h>
#include <hv/elastic.h>
#include <hv/hv.h>

#include "fmnist.h"
#include "mlp.h"

/* ---- the backward pass (the model and its forward pass are in mlp.c) ------------------------ */

#define MOMENTUM 0.9f

/* gw[i][j] += sum_b in[b][i] * d[b][j] and gb[j] += sum_b d[b][j]: the weight gradients summed
 * over n samples, one gradient row at a time (it stays in L1 while every sample adds to it). */
static void dense_backward_weights(const float *restrict in, size_t n, size_t nin,
                                   const float *restrict d, size_t nout, float *restrict gw,
                                   float *restrict gb) {
    for (size_t i = 0; i < nin; i++) {
        float *restrict g = gw + i * nout;
        for (size_t b = 0; b < n; b++) {
            float a = in[b * nin + i];
            if (a == 0.0f) {
                continue;
            }
            const float *restrict dr = d + b * nout;
            for (size_t j = 0; j < nout; j++) {
                g[j] += a * dr[j];
            }
        }
    }
    for (size_t b = 0; b < n; b++) {
        for (size_t j = 0; j < nout; j++) {
            gb[j] += d[b * nout + j];
        }
    }
}

/* The dot product of a and b (n floats) in 8 independent partial sums, a shape the compiler
 * vectorises without reassociating a single float sum (which it may not do at -O3). */
static float dot(const float *restrict a, const float *restrict b, size_t n) {
    float acc[8] = {0};
    size_t n8 = n & ~(size_t)7;
    for (size_t j = 0; j < n8; j += 8) {
        for (size_t k = 0; k < 8; k++) {
            acc[k] += a[j + k] * b[j + k];
        }
    }
    float s = 0.0f;
    for (size_t k = 0; k < 8; k++) {
        s += acc[k];
    }
    for (size_t j = n8; j < n; j++) {
        s += a[j] * b[j];
    }
    return s;
}

/* din[b][i] = sum_j w[i][j] * d[b][j] where act[b][i] > 0, else 0 (ReLU's derivative): the loss
 * gradient one layer down. */
static void dense_backward_input(const float *restrict act, size_t n, size_t nin,
                                 const float *restrict w, const float *restrict d, size_t nout,
                                 float *restrict din) {
    for (size_t b = 0; b < n; b++) {
        for (size_t i = 0; i < nin; i++) {
            din[b * nin + i] = act[b * nin + i] > 0.0f ? dot(w + i * nout, d + b * nout, nout) : 0;
        }
    }
}

/* ---- options -------------------------------------------------------------------------------- */

/* A fault to inject (--exit-at, --kill-at): at batch `batch` of epoch `epoch`. */
typedef struct fault_s {
    int set;
    uint64_t epoch, batch;
    int rank;  /* -1: every rank */
    int code;  /* exit status (--exit-at) */
    int every; /* ":every": in every generation, not only the job's first */
} fault_t;

typedef struct opts_s {
    uint64_t epochs;
    uint32_t batch; /* global batch, or per rank when per_rank */
    int per_rank;   /* --batch-per-rank */
    double lr;      /* peak learning rate (per_rank: at world size 1) */
    uint64_t seed;
    const char *data;                 /* data directory (borrowed from argv or the environment) */
    uint64_t train_limit, test_limit; /* 0: all */
    uint32_t step_delay_ms;
    uint32_t start_delay_ms;        /* --start-delay-ms: before joining the job */
    uint32_t first_commit_delay_ms; /* --first-commit-delay-ms: generation 1, before its commit */
    fault_t exit_at, kill_at;
    char exit_node[256]; /* --exit-on-node: a worker on this node fails at its first step */
    int exit_node_code;
    uint64_t double_every;        /* --double-every: epochs between doublings (0: off) */
    uint64_t double_max;          /* --double-max: the largest size asked for */
    const char *checkpoint;       /* --checkpoint PATH, or NULL */
    uint64_t checkpoint_every;    /* --checkpoint-every steps (0: at each epoch's end) */
    double compute_ms_per_sample; /* --compute-ms-per-sample */
    const char *step_log;         /* --step-log PATH, or NULL */
    const char *epoch_log;        /* --epoch-log PATH, or NULL */
    const char *eval_actor;       /* --eval-actor [NAMESPACE/]NAME as given, or NULL */
    char eval_ns[128];            /* its namespace ("": the default one) */
    char eval_name[256];          /* its name */
    int verbose;
} opts_t;

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: elastic_train [--epochs N] [--batch N | --batch-per-rank N] [--lr X] [--seed N]\n"
        "                     [--data DIR] [--train-limit N] [--test-limit N]\n"
        "                     [--step-delay-ms N] [--start-delay-ms N]\n"
        "                     [--first-commit-delay-ms N] [--exit-at E:B:R:CODE] [--kill-at "
        "E:B:R]\n"
        "                     [--exit-on-node NODE:CODE] [--double-every N [--double-max M]]\n"
        "                     [--checkpoint PATH [--checkpoint-every N]]\n"
        "                     [--compute-ms-per-sample X] [--step-log PATH]\n"
        "                     [--eval-actor [NAMESPACE/]NAME] [--verbose]\n"
        "Trains a 784-256-128-10 MLP on Fashion-MNIST under libhv's elastic API.\n"
        "  --epochs N           epochs (default 5)\n"
        "  --batch N            global batch, split across ranks (default 64)\n"
        "  --batch-per-rank N   N samples per rank and step instead; the learning rate is\n"
        "                       multiplied by the world size (linear scaling rule)\n"
        "  --lr X               peak learning rate, cosine-decayed to 0 (default 0.05)\n"
        "  --seed N             weight initialisation and shuffling (default 1)\n"
        "  --data DIR           data set directory (default $HV_FMNIST_DIR, else\n"
        "                       %s)\n"
        "  --train-limit N      use only the first N training samples\n"
        "  --test-limit N       use only the first N test samples\n"
        "  --step-delay-ms N    sleep N ms after every step\n"
        "  --exit-at E:B:R:CODE[:every]  in the first generation (:every: in every one),\n"
        "                       rank R (or 'all') exits with CODE at batch B of epoch E\n"
        "                       (both from 0)\n"
        "  --kill-at E:B:R      the same with SIGKILL\n"
        "  --exit-on-node NODE:CODE  in every generation, a worker on node NODE exits with\n"
        "                       CODE at its first step (a flapping node, for tests)\n"
        "  --double-every N     ask the head for twice the first size every N epochs (up to\n"
        "                       --double-max, default 64); the batch is per rank (default 32)\n"
        "                       so the global batch doubles too, and the learning rate is\n"
        "                       held at --lr instead of decaying\n"
        "  --checkpoint PATH    rank 0 saves the state there every --checkpoint-every N steps\n"
        "                       (default: each epoch's end); workers resume from it at start\n"
        "  --compute-ms-per-sample X  sleep X ms per sample of this rank's share of a step\n"
        "                       (an accelerator's time, for benchmarks)\n"
        "  --start-delay-ms N   wait N ms before joining the job (a window in which a\n"
        "                       worker is placed but not a member yet, for tests)\n"
        "  --first-commit-delay-ms N  in the job's first generation, wait N ms after the\n"
        "                       first sync, before the first commit (a window in which\n"
        "                       the job has committed nothing, for tests)\n"
        "  --step-log PATH      rank 0 appends 'EPOCH BATCH GENERATION' as each step starts\n"
        "  --epoch-log PATH     rank 0 appends each epoch's line there too\n"
        "  --eval-actor NAME    rank 0 sends each epoch's committed model to the actor NAME\n"
        "                       (class evaluator, examples/eval_actor) instead of evaluating\n"
        "                       it in the job; a missing actor is a warning, training goes on\n"
        "  --verbose            configuration, data loading and progress on stderr\n"
        "Rank 0 prints one line per epoch and a final 'done' line on stdout. Exit status 0\n"
        "on success (also when a drain removed this worker), 1 on an error.\n",
        FMNIST_DEFAULT_DIR);
}

/* Parses a whole decimal number in [min, max]. */
static int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out) {
    if (s == NULL || *s < '0' || *s > '9') {
        return -1;
    }
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max) {
        return -1;
    }
    *out = v;
    return 0;
}

/* E:B:R[:CODE] (want_code) into *f. */
static int parse_fault(const char *s, int want_code, fault_t *f) {
    char buf[128];
    if (s == NULL || strlen(s) >= sizeof(buf)) {
        return -1;
    }
    strcpy(buf, s);
    char *parts[6];
    int n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ":", &save); t != NULL && n < 6;
         t = strtok_r(NULL, ":", &save)) {
        parts[n++] = t;
    }
    uint64_t e, b, r = 0, code = 0;
    int every = want_code && n == 5 && strcmp(parts[4], "every") == 0;
    if (n != (want_code ? 4 + every : 3) || parse_u64(parts[0], 0, UINT32_MAX, &e) != 0 ||
        parse_u64(parts[1], 0, UINT32_MAX, &b) != 0 ||
        (strcmp(parts[2], "all") != 0 && parse_u64(parts[2], 0, 1u << 20, &r) != 0) ||
        (want_code && parse_u64(parts[3], 0, 255, &code) != 0)) {
        return -1;
    }
    *f = (fault_t){1, e, b, strcmp(parts[2], "all") == 0 ? -1 : (int)r, (int)code, every};
    return 0;
}

/* One option with its value into *o (have_batch: --batch or --batch-per-rank seen). Returns 0, or
 * -1 on an error (printed). */
static int apply_value(opts_t *o, const char *name, const char *v, int *have_batch) {
    uint64_t u = 0;
    const char *want = NULL;
    if (strcmp(name, "--epochs") == 0) {
        want = parse_u64(v, 1, 100000, &o->epochs) ? "a whole number from 1 to 100000" : NULL;
    } else if (strcmp(name, "--batch") == 0 || strcmp(name, "--batch-per-rank") == 0) {
        int per_rank = strcmp(name, "--batch-per-rank") == 0;
        if (*have_batch && per_rank != o->per_rank) {
            fprintf(stderr, "elastic_train: --batch and --batch-per-rank exclude each other\n");
            return -1;
        }
        *have_batch = 1;
        o->per_rank = per_rank;
        want = parse_u64(v, 1, 65536, &u) ? "a whole number from 1 to 65536" : NULL;
        o->batch = (uint32_t)u;
    } else if (strcmp(name, "--lr") == 0) {
        char *end = NULL;
        errno = 0;
        o->lr = strtod(v, &end);
        want = errno != 0 || end == v || *end != '\0' || !(o->lr > 0) || o->lr > 100
                   ? "a number in (0, 100]"
                   : NULL;
    } else if (strcmp(name, "--seed") == 0) {
        want = parse_u64(v, 0, UINT64_MAX, &o->seed) ? "a whole number" : NULL;
    } else if (strcmp(name, "--data") == 0) {
        o->data = v;
        want = v[0] == '\0' ? "a directory" : NULL;
    } else if (strcmp(name, "--train-limit") == 0) {
        want = parse_u64(v, 1, UINT32_MAX, &o->train_limit) ? "a whole number >= 1" : NULL;
    } else if (strcmp(name, "--test-limit") == 0) {
        want = parse_u64(v, 1, UINT32_MAX, &o->test_limit) ? "a whole number >= 1" : NULL;
    } else if (strcmp(name, "--checkpoint") == 0) {
        o->checkpoint = v;
        want = v[0] == '\0' ? "a file path" : NULL;
    } else if (strcmp(name, "--checkpoint-every") == 0) {
        want = parse_u64(v, 1, UINT32_MAX, &o->checkpoint_every) ? "a number of steps >= 1" : NULL;
    } else if (strcmp(name, "--step-log") == 0) {
        o->step_log = v;
        want = v[0] == '\0' ? "a file path" : NULL;
    } else if (strcmp(name, "--epoch-log") == 0) {
        o->epoch_log = v;
        want = v[0] == '\0' ? "a file path" : NULL;
    } else if (strcmp(name, "--eval-actor") == 0) {
        o->eval_actor = v;
        const char *slash = strchr(v, '/');
        size_t nslen = slash != NULL ? (size_t)(slash - v) : 0;
        const char *nm = slash != NULL ? slash + 1 : v;
        want = nm[0] == '\0' || strchr(nm, '/') != NULL || nslen >= sizeof(o->eval_ns) ||
                       strlen(nm) >= sizeof(o->eval_name) || (slash != NULL && nslen == 0)
                   ? "an actor's name, or NAMESPACE/NAME"
                   : NULL;
        if (want == NULL) {
            memcpy(o->eval_ns, v, nslen);
            o->eval_ns[nslen] = '\0';
            snprintf(o->eval_name, sizeof(o->eval_name), "%s", nm);
        }
    } else if (strcmp(name, "--compute-ms-per-sample") == 0) {
        char *end = NULL;
        errno = 0;
        o->compute_ms_per_sample = strtod(v, &end);
        want = errno != 0 || end == v || *end != '\0' || !(o->compute_ms_per_sample >= 0) ||
                       o->compute_ms_per_sample > 10000
                   ? "milliseconds from 0 to 10000"
                   : NULL;
    } else if (strcmp(name, "--double-every") == 0) {
        want = parse_u64(v, 1, 100000, &o->double_every) ? "epochs from 1 to 100000" : NULL;
    } else if (strcmp(name, "--double-max") == 0) {
        want = parse_u64(v, 1, 1u << 20, &o->double_max) ? "a size from 1 to 1048576" : NULL;
    } else if (strcmp(name, "--step-delay-ms") == 0) {
        want = parse_u64(v, 0, 600000, &u) ? "milliseconds from 0 to 600000" : NULL;
        o->step_delay_ms = (uint32_t)u;
    } else if (strcmp(name, "--start-delay-ms") == 0) {
        want = parse_u64(v, 0, 600000, &u) ? "milliseconds from 0 to 600000" : NULL;
        o->start_delay_ms = (uint32_t)u;
    } else if (strcmp(name, "--first-commit-delay-ms") == 0) {
        want = parse_u64(v, 0, 600000, &u) ? "milliseconds from 0 to 600000" : NULL;
        o->first_commit_delay_ms = (uint32_t)u;
    } else if (strcmp(name, "--exit-at") == 0) {
        want = parse_fault(v, 1, &o->exit_at)
                   ? "EPOCH:BATCH:RANK:CODE[:every] (RANK a number or 'all', CODE 0..255), "
                     "e.g. 1:20:all:3"
                   : NULL;
    } else if (strcmp(name, "--exit-on-node") == 0) {
        const char *colon = strrchr(v, ':');
        uint64_t code = 0;
        want = colon == NULL || colon == v || (size_t)(colon - v) >= sizeof(o->exit_node) ||
                       parse_u64(colon + 1, 0, 255, &code)
                   ? "NODE:CODE (CODE 0..255), e.g. node-a:3"
                   : NULL;
        if (want == NULL) {
            memcpy(o->exit_node, v, (size_t)(colon - v));
            o->exit_node[colon - v] = '\0';
            o->exit_node_code = (int)code;
        }
    } else {
        want = parse_fault(v, 0, &o->kill_at)
                   ? "EPOCH:BATCH:RANK (RANK a number or 'all'), e.g. 0:50:1"
                   : NULL;
    }
    if (want != NULL) {
        fprintf(stderr, "elastic_train: %s: expected %s, got '%s'\n", name, want, v);
        return -1;
    }
    return 0;
}

/* The options that go together, once all are read: 0, or -1 on an error (printed). */
static int check_args(opts_t *o, int have_batch) {
    if (o->checkpoint_every != 0 && o->checkpoint == NULL) {
        fprintf(stderr, "elastic_train: --checkpoint-every needs --checkpoint\n");
        return -1;
    }
    if (o->double_max != 0 && o->double_every == 0) {
        fprintf(stderr, "elastic_train: --double-max needs --double-every\n");
        return -1;
    }
    if (o->double_every != 0) {
        if (have_batch && !o->per_rank) {
            fprintf(stderr, "elastic_train: --double-every grows the global batch with the "
                            "workers: give --batch-per-rank, not --batch\n");
            return -1;
        }
        if (!have_batch) {
            o->batch = 32;
        }
        o->per_rank = 1;
        o->double_max = o->double_max ? o->double_max : 64;
    }
    return 0;
}

/* Fills *o from argv. Returns 0, 1 for --help (printed), -1 on an error (printed). */
static int parse_args(int argc, char **argv, opts_t *o) {
    *o = (opts_t){.epochs = 5, .batch = 64, .lr = 0.05, .seed = 1, .data = fmnist_default_dir()};
    int have_batch = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        char name[32];
        // --flag VALUE and --flag=VALUE
        const char *eq = strchr(a, '=');
        size_t len = eq != NULL ? (size_t)(eq - a) : strlen(a);
        if (len >= sizeof(name)) {
            len = sizeof(name) - 1;
        }
        memcpy(name, a, len);
        name[len] = '\0';
        if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
            usage(stdout);
            return 1;
        }
        if (strcmp(name, "--verbose") == 0 || strcmp(name, "-v") == 0) {
            o->verbose = 1;
            continue;
        }
        static const char *const with_value[] = {"--epochs",
                                                 "--batch",
                                                 "--batch-per-rank",
                                                 "--lr",
                                                 "--seed",
                                                 "--data",
                                                 "--train-limit",
                                                 "--test-limit",
                                                 "--step-delay-ms",
                                                 "--start-delay-ms",
                                                 "--first-commit-delay-ms",
                                                 "--exit-at",
                                                 "--kill-at",
                                                 "--exit-on-node",
                                                 "--double-every",
                                                 "--double-max",
                                                 "--checkpoint",
                                                 "--checkpoint-every",
                                                 "--compute-ms-per-sample",
                                                 "--step-log",
                                                 "--epoch-log",
                                                 "--eval-actor"};
        int known = 0;
        for (size_t k = 0; k < sizeof(with_value) / sizeof(with_value[0]); k++) {
            known |= strcmp(name, with_value[k]) == 0;
        }
        if (!known) {
            fprintf(stderr, "elastic_train: unknown option '%s' (see --help)\n", a);
            return -1;
        }
        if (eq != NULL) {
            v = eq + 1;
        } else if (i + 1 < argc) {
            v = argv[++i];
        } else {
            fprintf(stderr, "elastic_train: %s needs a value (see --help)\n", name);
            return -1;
        }
        if (apply_value(o, name, v, &have_batch) != 0) {
            return -1;
        }
    }
    return check_args(o, have_batch);
}

/* ---- training ------------------------------------------------------------------------------- */

/* --eval-actor: how many models wait for the actor at most (the oldest is dropped, with a
 * warning), how long rank 0 waits for the actor at an epoch's end (a lookup while it is placed or
 * moved), and how long a process waits for its last evaluations once training is over. */
#define EVAL_PENDING_MAX 4
#define EVAL_LOOKUP_MS 1000
#define EVAL_FINISH_MS 60000
#define EVAL_REMOVED_MS 5000 /* the same for a worker a drain removed: its node is going */

/* A model on its way to the evaluation actor, kept until the actor answered, so that it can be
 * sent again when the connection broke with it in flight (the evaluator replaces the row of an
 * epoch it has: a second delivery is harmless). */
typedef struct eval_item_s {
    uint64_t epoch;
    unsigned char *model; /* MLP_MODEL_BYTES, mlp_model_encode (owned) */
    hv_future_t *f;       /* the call in flight (owned), or NULL: not sent (yet, or again) */
} eval_item_t;

/* Rank 0's link to the evaluation actor: local to the process, never in the elastic state (a
 * rank 0 that takes over after a reset finds the actor by name itself). */
typedef struct eval_link_s {
    hv_actor_t *a;                   /* connected (owned), or NULL */
    eval_item_t q[EVAL_PENDING_MAX]; /* oldest first */
    size_t n;
} eval_link_t;

typedef struct trainer_s {
    opts_t o;
    fmnist_t train, test;
    hv_sampler_t *sampler; /* owned by the state */
    size_t cap;            /* this rank's most samples in a step (the sampler's cap) */
    /* Registered in the state (committed, restored, synced from rank 0): */
    float *params;       /* [MLP_PARAMS] */
    float *velocity;     /* [MLP_PARAMS] momentum buffers */
    uint64_t epoch;      /* epochs completed */
    uint64_t batch;      /* steps done in the current epoch */
    uint64_t first_gen;  /* the generation of the job's first round (0: not yet known) */
    uint64_t first_size; /* the world size of that round (--double-every doubles it) */
    double loss_sum;     /* summed training loss of the current epoch's committed steps */
    double accuracy;     /* test accuracy at the end of the last epoch */
    /* Local to this process: */
    float *grad;      /* [MLP_PARAMS] this step's gradients, summed, then over all ranks */
    double step_loss; /* this step's loss sum (allreduced with the gradients) */
    uint64_t *idx;    /* [cap] the step's sample indices */
    mlp_acts_t acts;
    double lr;            /* the peak rate at the current world size */
    uint64_t timed_epoch; /* the epoch t_start belongs to (UINT64_MAX: none) */
    double t_start;       /* when this process started (or joined) that epoch */
    int entered;          /* train() ran before in this process */
    int step_fd;          /* --step-log, opened on first use (-1: not yet) */
    int epoch_fd;         /* --epoch-log, the same */
    eval_link_t eval;     /* --eval-actor: rank 0's link to the evaluation actor */
    uint64_t eval_sent;   /* --eval-actor: the epochs whose model this process sent (the last
                             one sent is that of epoch eval_sent - 1) */
    /* The last epoch's line, kept by every rank (they all compute the same values), and the
     * epochs whose line rank 0 printed, counted by every rank, so that a survivor that becomes
     * rank 0 neither repeats nor loses a line. */
    struct {
        uint64_t epoch, samples, duplicates;
        int exact, size;
        uint32_t generation;
        double loss, accuracy, seconds;
    } report;
    uint64_t printed;
} trainer_t;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The peak learning rate at world size `size`: with a per-rank batch the global batch grows with
 * the world, and so does the rate (the linear scaling rule); a constant global batch keeps it. */
static double peak_lr(const opts_t *o, int size) {
    return o->per_rank && o->double_every == 0 ? o->lr * size : o->lr;
}

/* --double-every: the size for an epoch (libhv calls it on rank 0 at every new epoch). */
static uint32_t double_size(uint64_t epoch, void *ud) {
    const trainer_t *t = ud;
    uint64_t size = t->first_size > 0 ? t->first_size : 1;
    for (uint64_t d = epoch / t->o.double_every; d > 0 && size < t->o.double_max; d--) {
        size *= 2;
    }
    return (uint32_t)(size < t->o.double_max ? size : t->o.double_max);
}

static void on_reset(hv_state_t *st, const hv_reset_info_t *info, void *ud) {
    (void)st;
    trainer_t *t = ud;
    double old = t->lr;
    t->lr = peak_lr(&t->o, info->new_size);
    if (hv_rank() == 0 || t->o.verbose) {
        fprintf(stderr,
                "elastic_train: rank %d: reset: generation %u -> %u, size %d -> %d, %s (%s); "
                "learning rate %g -> %g (%s)\n",
                hv_rank(), info->old_generation, info->new_generation, info->old_size,
                info->new_size, info->rollback ? "rolled back to the last commit" : "no rollback",
                info->reason != NULL ? info->reason : "", old, t->lr,
                t->o.double_every ? "held; the global batch grows with the workers"
                : t->o.per_rank   ? "linear scaling with the world size"
                                  : "constant global batch");
    }
}

static void fault_check(const trainer_t *t, const fault_t *f, int kill) {
    if (!f->set || t->epoch != f->epoch || t->batch != f->batch ||
        (f->rank >= 0 && f->rank != hv_rank()) || (!f->every && hv_generation() != t->first_gen)) {
        return;
    }
    char what[64] = "killing myself (SIGKILL)";
    if (!kill) {
        snprintf(what, sizeof(what), "exiting with status %d", f->code);
    }
    fprintf(stderr, "elastic_train: rank %d: %s at epoch %llu batch %llu (%s)\n", hv_rank(), what,
            (unsigned long long)t->epoch, (unsigned long long)t->batch,
            kill ? "--kill-at" : "--exit-at");
    fflush(stdout);
    fflush(stderr);
    if (kill) {
        raise(SIGKILL);
    }
    _exit(f->code);
}

/* Waits for every handle in h[0..n) (each must be released even after a failure, and the
 * buffers stay borrowed until then); returns the first error. */
static hv_err wait_all(hv_handle_t *h, size_t n) {
    hv_err first = HV_OK;
    for (size_t i = 0; i < n; i++) {
        if (h[i] != 0) {
            hv_err rc = hv_wait(h[i]);
            first = first == HV_OK ? rc : first;
            h[i] = 0;
        }
    }
    return first;
}

/* One step on this rank's n samples: forward, backward (summed gradients), the allreduce of the
 * gradients and the loss, and the update. */
static hv_err train_step(trainer_t *t, size_t n) {
    mlp_acts_t *A = &t->acts;
    float *p = t->params, *g = t->grad;
    memset(g, 0, MLP_PARAMS * sizeof(float));
    t->step_loss = 0;
    uint64_t correct = 0;
    if (n > 0) {
        mlp_load_batch(A, &t->train, t->idx, n);
        t->step_loss = mlp_forward(p, A, n, &correct);
    }
    // The backward pass, handing each layer's gradients to the engine as soon as they are
    // complete (as a framework's backward hooks do): the engine negotiates and fuses them while
    // the lower layers are still being computed. Ranks with n == 0 submit zeros.
    hv_handle_t h[3] = {0, 0, 0};
    hv_err rc;
    dense_backward_weights(A->a2, n, MLP_H2, A->dz, MLP_OUT, g + MLP_OFF_W3, g + MLP_OFF_B3);
    hv_tensor_t top[3] = {
        {"grad.w3", g + MLP_OFF_W3, g + MLP_OFF_W3, MLP_H2 * MLP_OUT, HV_FLOAT32},
        {"grad.b3", g + MLP_OFF_B3, g + MLP_OFF_B3, MLP_OUT, HV_FLOAT32},
        {"loss", &t->step_loss, &t->step_loss, 1, HV_FLOAT64},
    };
    if ((rc = hv_allreduce_group_async(top, 3, HV_SUM, &h[0])) != HV_OK) {
        return rc;
    }
    dense_backward_input(A->a2, n, MLP_H2, p + MLP_OFF_W3, A->dz, MLP_OUT, A->d2);
    dense_backward_weights(A->a1, n, MLP_H1, A->d2, MLP_H2, g + MLP_OFF_W2, g + MLP_OFF_B2);
    hv_tensor_t mid[2] = {
        {"grad.w2", g + MLP_OFF_W2, g + MLP_OFF_W2, MLP_H1 * MLP_H2, HV_FLOAT32},
        {"grad.b2", g + MLP_OFF_B2, g + MLP_OFF_B2, MLP_H2, HV_FLOAT32},
    };
    if ((rc = hv_allreduce_group_async(mid, 2, HV_SUM, &h[1])) != HV_OK) {
        wait_all(h, 3);
        return rc;
    }
    dense_backward_input(A->a1, n, MLP_H1, p + MLP_OFF_W2, A->d2, MLP_H2, A->d1);
    dense_backward_weights(A->x, n, MLP_IN, A->d1, MLP_H1, g + MLP_OFF_W1, g + MLP_OFF_B1);
    hv_tensor_t bottom[2] = {
        {"grad.w1", g + MLP_OFF_W1, g + MLP_OFF_W1, MLP_IN * MLP_H1, HV_FLOAT32},
        {"grad.b1", g + MLP_OFF_B1, g + MLP_OFF_B1, MLP_H1, HV_FLOAT32},
    };
    rc = hv_allreduce_group_async(bottom, 2, HV_SUM, &h[2]);
    hv_err wrc = wait_all(h, 3);
    if (rc != HV_OK || (rc = wrc) != HV_OK) {
        return rc;
    }
    // The global mean gradient, then SGD with momentum at the scheduled rate: a cosine from the
    // peak down to 0 over the run, a function of the committed progress (the same on every rank,
    // unchanged by resets).
    uint64_t total = hv_sampler_step_samples(t->sampler);
    hv_sampler_stats_t ss = {.size = sizeof(ss)};
    if (total == 0 || (rc = hv_sampler_stats(t->sampler, &ss)) != HV_OK) {
        return total == 0 ? HV_EINTERNAL : rc;
    }
    double progress =
        ((double)t->epoch + (double)ss.processed / (double)t->train.count) / (double)t->o.epochs;
    float lr =
        t->o.double_every ? (float)t->lr : (float)(t->lr * 0.5 * (1.0 + cos(M_PI * progress)));
    float scale = 1.0f / (float)total;
    float *restrict v = t->velocity;
    for (size_t i = 0; i < MLP_PARAMS; i++) {
        v[i] = MOMENTUM * v[i] + g[i] * scale;
        p[i] -= lr * v[i];
    }
    t->loss_sum += t->step_loss;
    return HV_OK;
}

/* The test accuracy: each rank classifies its contiguous share of the test set and the counts
 * are summed (every rank gets the result). */
static hv_err evaluate(trainer_t *t, double *accuracy) {
    size_t total = t->test.count, size = (size_t)hv_size(), rank = (size_t)hv_rank();
    uint64_t ok = 0;
    double loss = 0;
    mlp_test(t->params, &t->test, total * rank / size, total * (rank + 1) / size, &t->acts, &ok,
             &loss);
    int64_t correct = (int64_t)ok;
    hv_err rc = hv_allreduce(&correct, &correct, 1, HV_INT64, HV_SUM);
    if (rc != HV_OK) {
        return rc;
    }
    *accuracy = (double)correct / (double)total;
    return HV_OK;
}

static void sleep_ms(uint32_t ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void sleep_us(uint64_t us) {
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Appends line to the file of option opt (path), opened on first use into *fd (-1: not yet;
 * -2: the open failed and was reported once): one O_APPEND write, so that a line is whole in
 * the file even when the process is killed right after. */
static void append_line(int *fd, const char *path, const char *opt, const char *line) {
    if (*fd == -1 && (*fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)) < 0) {
        fprintf(stderr, "elastic_train: %s %s: %s\n", opt, path, strerror(errno));
        *fd = -2;
    }
    size_t n = strlen(line);
    if (*fd >= 0 && write(*fd, line, n) != (ssize_t)n) {
        fprintf(stderr, "elastic_train: %s %s: %s\n", opt, path, strerror(errno));
    }
}

/* --step-log: rank 0 appends the step it starts. */
static void step_log(trainer_t *t) {
    if (t->o.step_log == NULL || hv_rank() != 0) {
        return;
    }
    char line[96];
    snprintf(line, sizeof(line), "%llu %llu %u\n", (unsigned long long)t->epoch,
             (unsigned long long)t->batch, hv_generation());
    append_line(&t->step_fd, t->o.step_log, "--step-log", line);
}

/* --checkpoint: rank 0 writes the committed state (a failure is reported, training goes on). */
static void checkpoint(trainer_t *t, hv_state_t *st) {
    if (hv_rank() == 0 && hv_state_save(st, t->o.checkpoint) != HV_OK) {
        fprintf(stderr, "elastic_train: checkpoint to %s failed\n", t->o.checkpoint);
    }
}

/* An accuracy as printed: "0.8812", or "-" when the job did not compute it (--eval-actor). */
static const char *accuracy_text(double a, char *buf, size_t len) {
    snprintf(buf, len, isnan(a) ? "-" : "%.4f", a);
    return buf;
}

/* Whether the --epoch-log file already holds the line of epoch e: a rank 0 that takes over after
 * a reset cannot know whether the one before it wrote the line before it went (the nodes of a
 * test share the file). */
static int epoch_logged(const char *path, uint64_t e) {
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        return 0;
    }
    char want[64], line[512];
    snprintf(want, sizeof(want), "elastic_train: epoch=%llu ", (unsigned long long)e);
    int found = 0;
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        found = strncmp(line, want, strlen(want)) == 0;
    }
    fclose(f);
    return found;
}

/* Rank 0 prints the line of the epoch the state has just completed, once: to --epoch-log first
 * (a file outlives a lost agent; stdout may be a broken pipe then), then to stdout. Only rank 0
 * notes it as printed here; the others learn it from report_confirm. */
static void report_print(trainer_t *t) {
    if (t->printed >= t->epoch || t->report.epoch + 1 != t->epoch || hv_rank() != 0) {
        return;
    }
    if (t->o.epoch_log != NULL && epoch_logged(t->o.epoch_log, t->report.epoch)) {
        t->printed = t->epoch; /* the rank 0 before this one wrote it */
        return;
    }
    char line[512], acc[32];
    snprintf(line, sizeof(line),
             "elastic_train: epoch=%llu size=%d generation=%u rank0=%s samples=%llu "
             "duplicates=%llu exact=%d loss=%.4f accuracy=%s seconds=%.2f\n",
             (unsigned long long)t->report.epoch, t->report.size, t->report.generation,
             hv_host_name(), (unsigned long long)t->report.samples,
             (unsigned long long)t->report.duplicates, t->report.exact, t->report.loss,
             accuracy_text(t->report.accuracy, acc, sizeof(acc)), t->report.seconds);
    if (t->o.epoch_log != NULL) {
        append_line(&t->epoch_fd, t->o.epoch_log, "--epoch-log", line);
    }
    fputs(line, stdout);
    fflush(stdout);
    t->printed = t->epoch;
}

/* Every rank takes rank 0's word for which epochs were printed (a small allreduce; every rank
 * calls it at the same point). A rank that marked the epoch on its own would leave it unprinted
 * if rank 0 died before writing it and the rank became rank 0. */
static hv_err report_confirm(trainer_t *t) {
    int64_t mine = hv_rank() == 0 ? (int64_t)t->printed : 0, all = 0;
    hv_err rc = hv_allreduce(&mine, &all, 1, HV_INT64, HV_MAX);
    if (rc == HV_OK && (uint64_t)all > t->printed) {
        t->printed = (uint64_t)all;
    }
    return rc;
}

/* ---- the evaluation actor (--eval-actor) ---------------------------------------------------- */

static void eval_warn(const trainer_t *t, const char *what, const char *detail, hv_err rc) {
    fprintf(stderr, "elastic_train: warning: --eval-actor %s: %s: %s (%s)\n", t->o.eval_actor, what,
            detail[0] != '\0' ? detail : hv_strerror(rc), hv_errname(rc));
}

/* Removes the oldest model (its call, if any, goes on; its result is dropped). */
static void eval_pop(eval_link_t *L) {
    hv_future_destroy(L->q[0].f);
    free(L->q[0].model);
    L->n--;
    memmove(&L->q[0], &L->q[1], L->n * sizeof(L->q[0]));
}

/* The connection broke (or could not be used): close it; the models in flight are sent again on
 * the next connection. */
static void eval_disconnect(eval_link_t *L) {
    hv_actor_close(L->a);
    L->a = NULL;
    for (size_t i = 0; i < L->n; i++) {
        hv_future_destroy(L->q[i].f);
        L->q[i].f = NULL;
    }
}

/* Takes the outcomes that came, oldest first (the actor answers in the order sent), waiting up to
 * timeout_ms for them (0: only those already here). A result is printed on stdout; a failed
 * evaluation is a warning and is not sent again; a broken connection keeps the models for a
 * resend. */
static void eval_harvest(trainer_t *t, uint32_t timeout_ms) {
    eval_link_t *L = &t->eval;
    double until = now_s() + timeout_ms / 1000.0;
    while (L->n > 0 && L->q[0].f != NULL) {
        double left = until - now_s();
        const void *res = NULL;
        size_t len = 0;
        hv_err rc = hv_future_wait(L->q[0].f, left > 0 ? (uint32_t)(left * 1000) : 0, &res, &len);
        if (rc == HV_ETIMEDOUT) {
            return;
        }
        if (rc == HV_OK) {
            printf("elastic_train: evaluated by %s: %.*s\n", t->o.eval_actor,
                   (int)(len < 512 ? len : 512), (const char *)res);
            fflush(stdout);
            eval_pop(L);
        } else if (rc == HV_EREMOTE) {
            char what[64];
            snprintf(what, sizeof(what), "the evaluation of epoch %llu failed",
                     (unsigned long long)L->q[0].epoch);
            eval_warn(t, what, hv_future_error(L->q[0].f, NULL), rc);
            eval_pop(L);
        } else {
            char why[512];
            hv_actor_last_error(L->a, why, sizeof(why));
            eval_warn(t, "the connection to the actor broke; the models in flight are sent again",
                      why, rc);
            eval_disconnect(L);
        }
    }
}

/* Connects (a lookup by name through the head, waiting up to timeout_ms for an actor that is
 * being placed, restarted or moved) and sends every model not in flight, in epoch order.
 * Returns the lookup's error, with its message in err (errlen bytes); HV_OK when connected. */
static hv_err eval_send(trainer_t *t, uint32_t timeout_ms, char *err, size_t errlen) {
    eval_link_t *L = &t->eval;
    err[0] = '\0';
    if (L->a == NULL) {
        hv_err rc = hv_actor_lookup(NULL, NULL, t->o.eval_ns, t->o.eval_name,
                                    timeout_ms > 0 ? timeout_ms : 1, NULL, &L->a, err, errlen);
        if (rc != HV_OK) {
            L->a = NULL;
            return rc;
        }
    }
    size_t i = 0;
    while (i < L->n) {
        if (L->q[i].f != NULL) {
            i++;
            continue;
        }
        hv_err rc =
            hv_actor_call_async(L->a, "evaluate", L->q[i].model, MLP_MODEL_BYTES, &L->q[i].f);
        if (rc == HV_ETOOBIG || rc == HV_EINVAL) {
            // Over the actor's frame limit: it can never be sent (the connection still works).
            char why[512], what[96];
            L->q[i].f = NULL;
            hv_actor_last_error(L->a, why, sizeof(why));
            snprintf(what, sizeof(what), "the model of epoch %llu cannot be sent",
                     (unsigned long long)L->q[i].epoch);
            eval_warn(t, what, why, rc);
            free(L->q[i].model);
            L->n--;
            memmove(&L->q[i], &L->q[i + 1], (L->n - i) * sizeof(L->q[0]));
        } else if (rc != HV_OK) {
            char why[512];
            L->q[i].f = NULL;
            hv_actor_last_error(L->a, why, sizeof(why));
            eval_warn(t, "a model was not sent; it is sent again on a new connection", why, rc);
            eval_disconnect(L);
            return HV_OK;
        } else {
            i++;
        }
    }
    return HV_OK;
}

/* Rank 0, with the committed state at an epoch's end (t->batch == 0): queues the model of the
 * epoch just completed for the actor and sends it, without waiting for the evaluation (its result
 * is printed when it has come, at a later epoch's end or at the finish). Waits only for a lookup
 * (EVAL_LOOKUP_MS, when the actor is not connected) and while the socket's buffer is full. */
static void eval_committed(trainer_t *t) {
    eval_link_t *L = &t->eval;
    if (t->o.eval_actor == NULL || hv_rank() != 0 || t->batch != 0 || t->epoch == 0 ||
        t->eval_sent >= t->epoch) {
        return;
    }
    t->eval_sent = t->epoch;
    eval_harvest(t, 0);
    if (L->n == EVAL_PENDING_MAX) {
        fprintf(stderr,
                "elastic_train: warning: --eval-actor %s: %d models wait for the actor; the "
                "model of epoch %llu is dropped, not evaluated\n",
                t->o.eval_actor, EVAL_PENDING_MAX, (unsigned long long)L->q[0].epoch);
        eval_pop(L);
    }
    eval_item_t *it = &L->q[L->n];
    *it = (eval_item_t){.epoch = t->epoch - 1, .model = malloc(MLP_MODEL_BYTES)};
    if (it->model == NULL) {
        fprintf(stderr, "elastic_train: warning: --eval-actor %s: out of memory\n",
                t->o.eval_actor);
        return;
    }
    mlp_model_encode(it->epoch, t->params, it->model);
    L->n++;
    char err[1024];
    hv_err rc = eval_send(t, EVAL_LOOKUP_MS, err, sizeof(err));
    if (rc != HV_OK) {
        char what[128];
        snprintf(what, sizeof(what),
                 "cannot reach the actor (%zu model%s waiting for it; training goes on)", L->n,
                 L->n == 1 ? "" : "s");
        eval_warn(t, what, err, rc);
    }
}

/* When training is over (any process; only a past rank 0 has models left): waits up to
 * timeout_ms for the actor to answer every model still waiting, connecting and sending again as
 * needed, says which were not evaluated, and closes the connection. */
static void eval_finish(trainer_t *t, uint32_t timeout_ms) {
    eval_link_t *L = &t->eval;
    double until = now_s() + timeout_ms / 1000.0;
    char err[1024] = "";
    hv_err rc = HV_OK;
    while (L->n > 0 && now_s() < until) {
        uint32_t left = (uint32_t)((until - now_s()) * 1000);
        rc = eval_send(t, left, err, sizeof(err));
        if (rc == HV_ENOTFOUND || rc == HV_EAUTH || rc == HV_EPERM || rc == HV_EINVAL) {
            break; // no such actor, or not ours to call: waiting does not help
        }
        if (rc != HV_OK) {
            sleep_ms(500);
            continue;
        }
        eval_harvest(t, (uint32_t)((until - now_s()) * 1000));
    }
    if (L->n > 0) {
        char what[128];
        snprintf(what, sizeof(what), "%zu model%s not evaluated (the last of epoch %llu)", L->n,
                 L->n == 1 ? " was" : "s were", (unsigned long long)L->q[L->n - 1].epoch);
        eval_warn(t, what, rc != HV_OK ? err : "no answer in time",
                  rc != HV_OK ? rc : HV_ETIMEDOUT);
    }
    while (L->n > 0) {
        eval_pop(L);
    }
    hv_actor_close(L->a);
    L->a = NULL;
}

/* The training function run by hv_elastic_run: called again (after a sync from rank 0) after
 * every reset, so it continues from the state, never from local variables. */
static hv_err train(hv_state_t *st, void *ud) {
    trainer_t *t = ud;
    hv_err rc;
    t->lr = peak_lr(&t->o, hv_size());
    if (!t->entered) {
        // A worker that joins a running job does not print the epochs before it came.
        t->entered = 1;
        t->printed = t->epoch;
    } else {
        // An epoch's end whose commit snapshotted the state but then failed at the membership
        // check, or whose rank 0 went before it printed: the state kept the new epoch, so its
        // line is printed now (unless rank 0 said it was).
        report_print(t);
    }
    // The same for the evaluation actor: a rank 0 that takes over at an epoch's end sends the
    // model its predecessor may not have sent (a second delivery is harmless).
    eval_committed(t);
    // Every rank of the round, newcomers included, so that the collective matches.
    if ((rc = report_confirm(t)) != HV_OK) {
        return rc;
    }
    if (t->first_gen == 0) {
        // The job's first round: remember it, so that --exit-at/--kill-at act only there (a
        // replacement worker, which gets this from the sync, does not fail again). Committed at
        // once, so that a failure before the first step does not forget it.
        t->first_gen = hv_generation();
        t->first_size = (uint64_t)hv_size();
        if (t->o.first_commit_delay_ms > 0 && hv_generation() == 1) {
            sleep_ms(t->o.first_commit_delay_ms); /* a window with nothing committed (tests) */
        }
        if ((rc = hv_state_commit(st)) != HV_OK) {
            return rc;
        }
    }
    while (t->epoch < t->o.epochs) {
        if (t->timed_epoch != t->epoch) {
            t->timed_epoch = t->epoch;
            t->t_start = now_s();
        }
        for (;;) {
            size_t n = 0;
            int end = 0;
            if ((rc = hv_sampler_next(t->sampler, t->idx, t->cap, &n, &end)) != HV_OK) {
                return rc;
            }
            if (end) {
                break;
            }
            fault_check(t, &t->o.exit_at, 0);
            fault_check(t, &t->o.kill_at, 1);
            if (t->o.exit_node[0] != '\0' && strcmp(hv_host_name(), t->o.exit_node) == 0) {
                fprintf(stderr,
                        "elastic_train: rank %d on %s: exiting with status %d (--exit-on-node)\n",
                        hv_rank(), t->o.exit_node, t->o.exit_node_code);
                fflush(stdout);
                fflush(stderr);
                _exit(t->o.exit_node_code);
            }
            step_log(t);
            if (t->o.compute_ms_per_sample > 0 && n > 0) {
                sleep_us((uint64_t)(t->o.compute_ms_per_sample * 1000.0 * (double)n));
            }
            if ((rc = train_step(t, n)) != HV_OK) {
                return rc;
            }
            t->batch++;
            if ((rc = hv_state_commit(st)) != HV_OK) {
                return rc;
            }
            if (t->o.checkpoint_every != 0 && t->batch % t->o.checkpoint_every == 0) {
                checkpoint(t, st);
            }
            if (t->o.verbose && hv_rank() == 0 && t->batch % 100 == 0) {
                fprintf(stderr, "elastic_train: epoch %llu batch %llu loss %.4f\n",
                        (unsigned long long)t->epoch, (unsigned long long)t->batch,
                        t->step_loss / (double)hv_sampler_step_samples(t->sampler));
            }
            if (t->o.step_delay_ms > 0) {
                sleep_ms(t->o.step_delay_ms);
            }
        }
        // The epoch's end: what the sampler saw, the test accuracy, then the next epoch, which
        // is committed before the line is printed (a rollback to the last step would otherwise
        // print it twice).
        hv_sampler_stats_t ss = {.size = sizeof(ss)};
        // With --eval-actor the evaluation is the actor's, not the job's (NAN: printed as "-").
        double accuracy = NAN;
        if ((rc = hv_sampler_stats(t->sampler, &ss)) != HV_OK ||
            (t->o.eval_actor == NULL && (rc = evaluate(t, &accuracy)) != HV_OK) ||
            (rc = hv_sampler_next_epoch(t->sampler)) != HV_OK) {
            return rc;
        }
        uint64_t n = t->train.count;
        t->report.epoch = t->epoch;
        t->report.samples = ss.processed;
        t->report.duplicates = ss.duplicates;
        t->report.exact = ss.processed == n && ss.duplicates == 0 && ss.checksum == n * (n - 1) / 2;
        t->report.size = hv_size();
        t->report.generation = hv_generation();
        t->report.loss = t->loss_sum / (double)(ss.processed > 0 ? ss.processed : 1);
        t->report.accuracy = accuracy;
        t->report.seconds = now_s() - t->t_start;
        t->epoch++;
        t->batch = 0;
        t->loss_sum = 0;
        t->accuracy = accuracy;
        rc = hv_state_commit(st);
        if (rc != HV_OK && rc != HV_ERESET) {
            return rc;
        }
        if (rc == HV_OK && t->o.checkpoint != NULL && t->o.checkpoint_every == 0) {
            checkpoint(t, st);
        }
        report_print(t);
        if (rc == HV_OK) {
            eval_committed(t);
        }
        hv_err crc = report_confirm(t);
        if (rc == HV_ERESET || crc != HV_OK) {
            return rc == HV_ERESET ? rc : crc;
        }
    }
    return HV_OK;
}

/* ---- main ----------------------------------------------------------------------------------- */

static int fail(const char *what, hv_err rc) {
    char detail[512];
    hv_last_error(detail, sizeof(detail));
    char who[32] = "";
    if (hv_rank() >= 0) {
        snprintf(who, sizeof(who), "rank %d: ", hv_rank());
    }
    fprintf(stderr, "elastic_train: %s%s: %s%s%s%s\n", who, what, hv_strerror(rc),
            detail[0] != '\0' ? " (" : "", detail, detail[0] != '\0' ? ")" : "");
    return 1;
}

int main(int argc, char **argv) {
    trainer_t t = {.timed_epoch = UINT64_MAX, .step_fd = -1, .epoch_fd = -1};
    int pr = parse_args(argc, argv, &t.o);
    if (pr != 0) {
        return pr > 0 ? 0 : 1;
    }
    const opts_t *o = &t.o;
    char err[1024];
    double t0 = now_s();
    hv_err rc = fmnist_load(o->data, "train", o->train_limit, &t.train, err, sizeof(err));
    if (rc == HV_OK) {
        rc = fmnist_load(o->data, "t10k", o->test_limit, &t.test, err, sizeof(err));
    }
    if (rc != HV_OK) {
        fprintf(stderr, "elastic_train: cannot load the data set: %s%s\n", err,
                rc == HV_ENOTFOUND ? " (install dataset-fashion-mnist, or pass --data DIR)" : "");
        fmnist_fini(&t.train);
        return 1;
    }
    if (o->verbose) {
        fprintf(stderr,
                "elastic_train: %zu training and %zu test samples from %s in %.2f s; %llu epochs, "
                "%s batch %u, peak learning rate %g, seed %llu\n",
                t.train.count, t.test.count, o->data, now_s() - t0, (unsigned long long)o->epochs,
                o->per_rank ? "per-rank" : "global", o->batch, o->lr, (unsigned long long)o->seed);
    }
    int code = 1;
    hv_state_t *st = NULL;
    t.cap = o->batch > MLP_EVAL_BATCH ? o->batch : MLP_EVAL_BATCH;
    t.params = mlp_alloc_floats(MLP_PARAMS);
    t.velocity = mlp_alloc_floats(MLP_PARAMS);
    t.grad = mlp_alloc_floats(MLP_PARAMS);
    t.idx = calloc(t.cap, sizeof(uint64_t));
    if (t.params == NULL || t.velocity == NULL || t.grad == NULL || t.idx == NULL ||
        mlp_acts_init(&t.acts, t.cap) != HV_OK) {
        fprintf(stderr, "elastic_train: out of memory\n");
        goto out;
    }
    mlp_init_params(t.params, o->seed);
    memset(t.velocity, 0, MLP_PARAMS * sizeof(float));

    hv_sampler_config_t scfg = HV_SAMPLER_CONFIG_INIT;
    scfg.num_samples = t.train.count;
    scfg.seed = o->seed;
    scfg.batch = o->batch;
    scfg.global_batch = !o->per_rank;
    scfg.shuffle = 1;
    if ((rc = hv_state_create(&st)) != HV_OK ||
        (rc = hv_state_add_buffer(st, "params", t.params, MLP_PARAMS * sizeof(float))) != HV_OK ||
        (rc = hv_state_add_buffer(st, "velocity", t.velocity, MLP_PARAMS * sizeof(float))) !=
            HV_OK ||
        (rc = hv_state_add_u64(st, "epoch", &t.epoch)) != HV_OK ||
        (rc = hv_state_add_u64(st, "batch", &t.batch)) != HV_OK ||
        (rc = hv_state_add_u64(st, "first_generation", &t.first_gen)) != HV_OK ||
        (rc = hv_state_add_u64(st, "first_size", &t.first_size)) != HV_OK ||
        (rc = hv_state_add_buffer(st, "loss_sum", &t.loss_sum, sizeof(t.loss_sum))) != HV_OK ||
        (rc = hv_state_add_buffer(st, "accuracy", &t.accuracy, sizeof(t.accuracy))) != HV_OK ||
        (rc = hv_state_on_reset(st, on_reset, &t)) != HV_OK ||
        (rc = hv_sampler_create(st, "train", &scfg, &t.sampler)) != HV_OK) {
        code = fail("setting up the elastic state", rc);
        goto out;
    }
    if (o->checkpoint != NULL) {
        rc = hv_state_load(st, o->checkpoint);
        if (rc == HV_OK) {
            t.first_gen = UINT64_MAX; /* a resumed job is not its first run: no --exit-at */
            fprintf(stderr, "elastic_train: resumed from %s at epoch %llu, step %llu\n",
                    o->checkpoint, (unsigned long long)t.epoch, (unsigned long long)t.batch);
        } else if (rc != HV_ENOTFOUND) {
            code = fail("loading the checkpoint", rc);
            goto out;
        }
    }
    if (o->double_every != 0 && (rc = hv_set_size_callback(double_size, &t)) != HV_OK) {
        code = fail("registering the size callback", rc);
        goto out;
    }
    if (o->start_delay_ms > 0) {
        sleep_ms(o->start_delay_ms); /* a window before the first join (tests) */
    }
    rc = hv_elastic_run(st, train, &t);
    if (rc != HV_OK) {
        code = fail("training failed", rc);
        goto out;
    }
    // The last epochs' evaluations (a past rank 0's), before the final line.
    eval_finish(&t, hv_state_removed(st) ? EVAL_REMOVED_MS : EVAL_FINISH_MS);
    if (hv_state_removed(st)) {
        fprintf(stderr, "elastic_train: removed from the job (generation %u)\n", hv_generation());
    } else if (hv_rank() == 0) {
        char acc[32];
        printf("elastic_train: done epochs=%llu accuracy=%s resets=%u rollbacks=%u\n",
               (unsigned long long)t.epoch, accuracy_text(t.accuracy, acc, sizeof(acc)),
               hv_state_resets(st), hv_state_rollbacks(st));
        fflush(stdout);
    }
    code = 0;
out:
    eval_finish(&t, 0); // after a failure: what was not evaluated is said, not waited for
    hv_state_destroy(st);
    if ((rc = hv_shutdown()) != HV_OK && code == 0) {
        code = fail("hv_shutdown", rc);
    }
    free(t.params);
    free(t.velocity);
    free(t.grad);
    free(t.idx);
    mlp_acts_fini(&t.acts);
    if (t.step_fd >= 0) {
        close(t.step_fd);
    }
    if (t.epoch_fd >= 0) {
        close(t.epoch_fd);
    }
    fmnist_fini(&t.train);
    fmnist_fini(&t.test);
    return code;
}
