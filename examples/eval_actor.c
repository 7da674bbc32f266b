/*
 * eval_actor: the evaluation actor of the Fashion-MNIST example (docs/actors.md, "The evaluation
 * actor"). It registers the actor class "evaluator" and serves one instance until SIGTERM or
 * SIGINT: an elastic training job (examples/elastic_train --eval-actor NAME) sends it the
 * committed model at the end of every epoch, and the actor, not the job, computes the model's
 * accuracy and loss on the test set (Debian's dataset-fashion-mnist, the loader and the model of
 * elastic_train: examples/fmnist.c, examples/mlp.c) and keeps one row per epoch. With save/load
 * the history is its state: a stop with HV_ACTOR_STATE_OUT set writes it, a start with
 * HV_ACTOR_STATE_IN reads it back, so an actor moved with its state keeps it.
 *
 *   hvctl actor create --class evaluator --name eval -- build/examples/eval_actor
 *   hvsubmit -np 2 build/examples/elastic_train --eval-actor eval
 *   build/examples/actor_call @eval history
 *
 * Methods:
 *   evaluate MODEL  MODEL is an epoch number and the parameters as bytes (mlp.h's "HVMLP1"
 *                   format, MLP_MODEL_BYTES). Classifies the test set, records (epoch, accuracy,
 *                   loss) in the history and returns the row as text,
 *                   "epoch=E accuracy=A loss=L samples=N" (A: the fraction classified right, L:
 *                   the mean cross-entropy). A row of an epoch already in the history is replaced,
 *                   so a model sent again (after a lost reply, or by a job that rolled back and
 *                   re-did the epoch) is not counted twice. A malformed model fails the call
 *                   (HV_EINVAL, the message says why).
 *   history         the rows, one line each in the format above, in epoch order ("" when none)
 *
 * Flags (the program's arguments, after `--` in hvctl actor create):
 *   --data DIR        the data set (default $HV_FMNIST_DIR, else /usr/share/datasets/fashion-mnist)
 *   --test-limit N    evaluate on the first N test samples only (default: all 10000)
 * Everything else comes from the HV_ACTOR_* environment the head sets (actor.h). Exit status 0
 * after a clean stop, 1 on an error (the message says what), 64 on bad usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hv/actor.h>

#include "fmnist.h"
#include "mlp.h"

/* Rows kept at most: far above any run of the example, and the history's text (about 60 bytes a
 * row) stays under the actor's 4 MiB frame limit. */
#define EVAL_MAX_ROWS 10000

/* One evaluation: the model of the end of `epoch` (epochs from 0, as elastic_train counts). */
typedef struct eval_row_s {
    uint64_t epoch;
    double accuracy; /* correct / samples */
    double loss;     /* mean cross-entropy over the samples */
    uint64_t samples;
} eval_row_t;

/* The instance: the history, and the buffers of one evaluation. */
typedef struct evaluator_s {
    const fmnist_t *test; /* the test set (borrowed from main, the class's ud) */
    float *params;        /* [MLP_PARAMS] the model being evaluated (owned) */
    mlp_acts_t acts;      /* MLP_EVAL_BATCH samples (owned) */
    eval_row_t *rows;     /* [nrows] in epoch order (owned) */
    size_t nrows, cap;
} evaluator_t;

static void evaluator_destroy(void *self) {
    evaluator_t *ev = self;
    if (ev == NULL) {
        return;
    }
    free(ev->params);
    mlp_acts_fini(&ev->acts);
    free(ev->rows);
    free(ev);
}

/* The constructor: its argument is not used (the history starts empty; load fills it). */
static hv_err evaluator_create(void *ud, const void *arg, size_t len, void **self_out) {
    (void)arg;
    (void)len;
    evaluator_t *ev = calloc(1, sizeof(*ev));
    if (ev == NULL) {
        return HV_ENOMEM;
    }
    ev->test = ud;
    ev->params = mlp_alloc_floats(MLP_PARAMS);
    if (ev->params == NULL || mlp_acts_init(&ev->acts, MLP_EVAL_BATCH) != HV_OK) {
        evaluator_destroy(ev);
        return HV_ENOMEM;
    }
    *self_out = ev;
    return HV_OK;
}

/* Puts row r into the history: replaces the row of the same epoch, else inserts it in epoch
 * order. HV_ETOOBIG past EVAL_MAX_ROWS, HV_ENOMEM. */
static hv_err history_put(evaluator_t *ev, const eval_row_t *r) {
    size_t i = ev->nrows;
    while (i > 0 && ev->rows[i - 1].epoch > r->epoch) {
        i--;
    }
    if (i > 0 && ev->rows[i - 1].epoch == r->epoch) {
        ev->rows[i - 1] = *r;
        return HV_OK;
    }
    if (ev->nrows == EVAL_MAX_ROWS) {
        return HV_ETOOBIG;
    }
    if (ev->nrows == ev->cap) {
        size_t cap = ev->cap ? ev->cap * 2 : 64;
        eval_row_t *rows = realloc(ev->rows, cap * sizeof(*rows));
        if (rows == NULL) {
            return HV_ENOMEM;
        }
        ev->rows = rows;
        ev->cap = cap;
    }
    memmove(&ev->rows[i + 1], &ev->rows[i], (ev->nrows - i) * sizeof(*r));
    ev->rows[i] = *r;
    ev->nrows++;
    return HV_OK;
}

/* Appends row r as text ("epoch=E accuracy=A loss=L samples=N"), with a newline when nl. */
static hv_err row_out(hv_actor_out_t *out, const eval_row_t *r, int nl) {
    char line[400]; // %.4f of any double fits (at most 316 characters)
    int n = snprintf(line, sizeof(line),
                     "epoch=%" PRIu64 " accuracy=%.4f loss=%.4f samples=%" PRIu64 "%s", r->epoch,
                     r->accuracy, r->loss, r->samples, nl ? "\n" : "");
    if (n < 0 || (size_t)n >= sizeof(line)) {
        return HV_EINTERNAL;
    }
    return hv_actor_out_append(out, line, (size_t)n);
}

static hv_err evaluate(evaluator_t *ev, const void *arg, size_t len, hv_actor_out_t *out) {
    char why[160];
    eval_row_t r = {0};
    if (mlp_model_decode(arg, len, &r.epoch, ev->params, why, sizeof(why)) != HV_OK) {
        hv_actor_out_errorf(out, "%s", why);
        return HV_EINVAL;
    }
    uint64_t correct = 0;
    double loss = 0;
    r.samples = ev->test->count;
    mlp_test(ev->params, ev->test, 0, ev->test->count, &ev->acts, &correct, &loss);
    r.accuracy = (double)correct / (double)r.samples;
    r.loss = loss / (double)r.samples;
    hv_err rc = history_put(ev, &r);
    if (rc != HV_OK) {
        hv_actor_out_errorf(out, "the history holds %d rows, the most it keeps", EVAL_MAX_ROWS);
        return rc;
    }
    return row_out(out, &r, 0);
}

static hv_err evaluator_call(void *self, const char *method, const void *arg, size_t len,
                             hv_actor_out_t *out) {
    evaluator_t *ev = self;
    if (strcmp(method, "evaluate") == 0) {
        return evaluate(ev, arg, len, out);
    }
    if (strcmp(method, "history") == 0) {
        hv_err rc = HV_OK;
        for (size_t i = 0; i < ev->nrows && rc == HV_OK; i++) {
            rc = row_out(out, &ev->rows[i], 1);
        }
        return rc;
    }
    hv_actor_out_errorf(out, "evaluator has no method '%s' (it has evaluate and history)", method);
    return HV_ENOTFOUND;
}

/* The state: the history, one row a line, "EPOCH ACCURACY LOSS SAMPLES" (%.17g: the doubles come
 * back exactly). */
static hv_err evaluator_save(void *self, hv_actor_out_t *out) {
    evaluator_t *ev = self;
    hv_err rc = HV_OK;
    for (size_t i = 0; i < ev->nrows && rc == HV_OK; i++) {
        const eval_row_t *r = &ev->rows[i];
        char line[160];
        int n = snprintf(line, sizeof(line), "%" PRIu64 " %.17g %.17g %" PRIu64 "\n", r->epoch,
                         r->accuracy, r->loss, r->samples);
        rc = n < 0 || (size_t)n >= sizeof(line) ? HV_EINTERNAL
                                                : hv_actor_out_append(out, line, (size_t)n);
    }
    return rc;
}

static hv_err evaluator_load(void *self, const void *state, size_t len) {
    evaluator_t *ev = self;
    const char *p = state, *end = p + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        char line[160];
        if (nl == NULL || (size_t)(nl - p) >= sizeof(line)) {
            fprintf(stderr,
                    "eval_actor: the saved history is not whole (a line without its end)\n");
            return HV_ECORRUPT;
        }
        memcpy(line, p, (size_t)(nl - p));
        line[nl - p] = '\0';
        eval_row_t r;
        char extra;
        if (sscanf(line, "%" SCNu64 " %lf %lf %" SCNu64 " %c", &r.epoch, &r.accuracy, &r.loss,
                   &r.samples, &extra) != 4) {
            fprintf(stderr, "eval_actor: the saved history has a malformed row: '%s'\n", line);
            return HV_ECORRUPT;
        }
        hv_err rc = history_put(ev, &r);
        if (rc != HV_OK) {
            return rc;
        }
        p = nl + 1;
    }
    fprintf(stderr, "eval_actor: loaded a history of %zu rows\n", ev->nrows);
    return HV_OK;
}

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: eval_actor [--data DIR] [--test-limit N]\n"
        "The actor class \"evaluator\" (docs/actors.md): evaluates the models an elastic_train\n"
        "job sends (--eval-actor NAME) on Fashion-MNIST's test set and keeps the history.\n"
        "  --data DIR        data set directory (default $HV_FMNIST_DIR, else\n"
        "                    %s)\n"
        "  --test-limit N    use only the first N test samples\n"
        "Methods: evaluate MODEL (elastic_train's bytes), history. Settings come from the\n"
        "HV_ACTOR_* environment that the head sets (hvctl actor create).\n",
        FMNIST_DEFAULT_DIR);
}

int main(int argc, char **argv) {
    const char *data = fmnist_default_dir();
    unsigned long long limit = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if ((strcmp(a, "--data") == 0 || strcmp(a, "--test-limit") == 0) && i + 1 < argc) {
            const char *v = argv[++i];
            char *end = NULL;
            errno = 0;
            if (a[2] == 'd') {
                data = v;
            } else if (v[0] < '0' || v[0] > '9' || (limit = strtoull(v, &end, 10)) == 0 ||
                       errno != 0 || *end != '\0') {
                fprintf(stderr,
                        "eval_actor: --test-limit: expected a whole number >= 1, got '%s'\n", v);
                return 64;
            }
            continue;
        }
        if (strcmp(a, "--data") == 0 || strcmp(a, "--test-limit") == 0) {
            fprintf(stderr, "eval_actor: %s needs a value (see --help)\n", a);
        } else {
            fprintf(stderr, "eval_actor: unknown argument '%s' (see --help)\n", a);
        }
        return 64;
    }
    fmnist_t test = {0};
    char err[1024];
    hv_err rc = fmnist_load(data, "t10k", (size_t)limit, &test, err, sizeof(err));
    if (rc != HV_OK) {
        fprintf(stderr, "eval_actor: cannot load the test set: %s%s\n", err,
                rc == HV_ENOTFOUND ? " (install dataset-fashion-mnist, or pass --data DIR)" : "");
        return 1;
    }
    hv_actor_class_t cls = HV_ACTOR_CLASS_INIT;
    cls.name = "evaluator";
    cls.create = evaluator_create;
    cls.call = evaluator_call;
    cls.destroy = evaluator_destroy;
    cls.save = evaluator_save;
    cls.load = evaluator_load;
    cls.ud = &test;
    hv_actor_server_config_t cfg = HV_ACTOR_SERVER_CONFIG_INIT;
    if (getenv("HV_ACTOR_CLASS") == NULL) {
        cfg.class_name = "evaluator";
    }
    if ((rc = hv_actor_register(&cls)) == HV_OK) {
        fprintf(stderr, "eval_actor: %zu test samples from %s\n", test.count, data);
        rc = hv_actor_serve(&cfg);
    }
    fmnist_fini(&test);
    if (rc != HV_OK) {
        fprintf(stderr, "eval_actor: %s (%s)\n", hv_strerror(rc), hv_errname(rc));
        return 1;
    }
    return 0;
}
