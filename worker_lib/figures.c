/* figures: see figures.h. */
#include "figures.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

/* Nanoseconds are kept so that many short allreduces (microseconds each) add up exactly; they
 * are read as microseconds. */
static _Atomic uint64_t ar_bytes, ar_ns, ar_n, commit_n, commit_ns;

void hv__figures_add_allreduce(uint64_t n, uint64_t bytes, uint64_t ns) {
    atomic_fetch_add_explicit(&ar_n, n, memory_order_relaxed);
    atomic_fetch_add_explicit(&ar_bytes, bytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&ar_ns, ns, memory_order_relaxed);
}

void hv__figures_add_commit(uint64_t ns) {
    atomic_fetch_add_explicit(&commit_n, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&commit_ns, ns, memory_order_relaxed);
}

/* Steps waiting to be reported: those of the round now (cur) and of one before it at another
 * size (prev: a report takes it first). Under step_mu (a commit and the reporter). */
typedef struct steps_s {
    uint32_t size;
    uint64_t n, ns;
} steps_t;
static pthread_mutex_t step_mu = PTHREAD_MUTEX_INITIALIZER;
static steps_t step_cur, step_prev;
static uint32_t step_gen;
static uint64_t step_last_ns; /* the last commit's time (0: none yet) */

void hv__figures_add_step(uint32_t gen, uint32_t size, uint64_t now_ns) {
    pthread_mutex_lock(&step_mu);
    if (step_last_ns != 0 && gen == step_gen && size == step_cur.size && now_ns > step_last_ns) {
        step_cur.n++;
        step_cur.ns += now_ns - step_last_ns;
    } else if (gen != step_gen || size != step_cur.size) {
        if (step_cur.n > 0) {
            step_prev = step_cur; /* at most one older size waits: an older one is dropped */
        }
        step_cur = (steps_t){.size = size};
        step_gen = gen;
    }
    step_last_ns = now_ns;
    pthread_mutex_unlock(&step_mu);
}

int hv__figures_take_steps(uint64_t *n, uint64_t *us, uint32_t *size) {
    pthread_mutex_lock(&step_mu);
    steps_t *t = step_prev.n > 0 ? &step_prev : step_cur.n > 0 ? &step_cur : NULL;
    if (t != NULL) {
        *n = t->n;
        *us = t->ns / 1000;
        *size = t->size;
        t->n = 0;
        t->ns = 0;
    }
    pthread_mutex_unlock(&step_mu);
    return t != NULL;
}

void hv__figures_read(hv__figures_t *out) {
    out->allreduce_bytes = atomic_load_explicit(&ar_bytes, memory_order_relaxed);
    out->allreduce_us = atomic_load_explicit(&ar_ns, memory_order_relaxed) / 1000;
    out->allreduces = atomic_load_explicit(&ar_n, memory_order_relaxed);
    out->commits = atomic_load_explicit(&commit_n, memory_order_relaxed);
    out->commit_us = atomic_load_explicit(&commit_ns, memory_order_relaxed) / 1000;
}

uint64_t hv__figures_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t sub0(uint64_t b, uint64_t a) { return b > a ? b - a : 0; }

hv__figures_t hv__figures_sub(const hv__figures_t *b, const hv__figures_t *a) {
    hv__figures_t d = {
        .allreduce_bytes = sub0(b->allreduce_bytes, a->allreduce_bytes),
        .allreduce_us = sub0(b->allreduce_us, a->allreduce_us),
        .allreduces = sub0(b->allreduces, a->allreduces),
        .commits = sub0(b->commits, a->commits),
        .commit_us = sub0(b->commit_us, a->commit_us),
    };
    return d;
}

int hv__figures_zero(const hv__figures_t *f) {
    return f->allreduce_bytes == 0 && f->allreduce_us == 0 && f->allreduces == 0 &&
           f->commits == 0 && f->commit_us == 0;
}
