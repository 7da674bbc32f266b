/* copier: see copier.h. */
#include "copier.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "mem.h"
#include "util.h"

/* A copy costs the head about as much CPU again as it costs the worker (receiving, hashing,
 * writing: bench_copy.sh's "head CPU"), and where the ranks and the head share the cores any CPU
 * taken from one rank delays the whole synchronous ring (about 3x its share of the CPU in
 * bench_copy.sh on 2 cores): at 40 times the worker's cost, a 64 MiB state's copies cost 6-8% of
 * the steps; 80 times keeps them under 5%. */
#define COPY_FACTOR_DEFAULT 80
#define COPY_MIN_MS_DEFAULT 1000 /* the head writes and syncs each copy: at most one a second */
#define COPY_MAX_MS_DEFAULT 0
/* The copier's nice value: 0 by default. At 19 it yields the CPU to training, but on a machine
 * with no idle CPU it is starved: at a load average of 19 on 2 cores a 64 MiB copy took minutes
 * and fault.elastic_resume_head_restart saw no copy before its job ended; a copy that never
 * goes out protects nothing. Operators whose nodes run short of CPU may set it. */
#define COPY_NICE_DEFAULT 0

struct hv__copier_s {
    hv__copier_send_fn fn;
    void *ud;
    hv__copy_policy_t policy;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* under mu */
    int stop;
    int busy;   /* a copy is handed over and not finished */
    void *data; /* the copy handed over (owned) */
    size_t len;
    /* The last copy's buffer once sent (owned), for the next copy to be serialised into: a fresh
     * buffer of a large state is faulted in page by page on the training thread (0.4-0.5 s for
     * 64 MiB on the development machine, against 20 ms for a copy into touched memory). */
    void *spare;
    size_t spare_cap;
    uint32_t generation;
    uint64_t commit;
    uint64_t ser_ms; /* what serialising it cost the training thread */
    hv__copier_stats_t st;
    /* the training thread's */
    int offered_any;
    uint64_t last_begin_ms;
};

static uint64_t env_u64(const char *name, uint64_t dflt, uint64_t max) {
    const char *v = getenv(name);
    uint64_t x = 0;
    if (v == NULL || v[0] == '\0') {
        return dflt;
    }
    if (hv_parse_u64(v, 0, max, &x) != HV_OK) {
        HV_LOG(HV_LOG_WARN, "elastic", "HV-COPY-ENV",
               "%s=%s is not a number from 0 to %llu: "
               "using %llu",
               name, v, (unsigned long long)max, (unsigned long long)dflt);
        return dflt;
    }
    return x;
}

void hv__copy_policy_default(hv__copy_policy_t *p) {
    p->cost_factor = (uint32_t)env_u64("HV_STATE_COPY_FACTOR", COPY_FACTOR_DEFAULT, 100000);
    p->min_interval_ms = env_u64("HV_STATE_COPY_MIN_MS", COPY_MIN_MS_DEFAULT, 86400000);
    p->max_interval_ms = env_u64("HV_STATE_COPY_MAX_MS", COPY_MAX_MS_DEFAULT, 86400000);
}

int hv__copy_due(const hv__copy_policy_t *p, int first, uint64_t since_ms, uint64_t cost_ms) {
    if (first) {
        return 1;
    }
    if (since_ms < p->min_interval_ms) {
        return 0;
    }
    if (p->max_interval_ms != 0 && since_ms >= p->max_interval_ms) {
        return 1;
    }
    return since_ms >= cost_ms * (uint64_t)p->cost_factor;
}

/* Lowers this thread's CPU priority when HV_STATE_COPY_NICE asks (Linux: a nice value is per
 * thread, set by its id), so that hashing and sending a copy run in the time training leaves:
 * the training thread of every rank waits for the slowest, so a copier that delays one rank
 * delays all. Best effort: a failure leaves the thread at the process's priority. */
static void copier_nice(void) {
#ifdef SYS_gettid
    int nice = (int)env_u64("HV_STATE_COPY_NICE", COPY_NICE_DEFAULT, 19);
    if (nice > 0 && setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), nice) != 0) {
        HV_LOG(HV_LOG_DEBUG, "elastic", "HV-COPY-NICE", "the copier keeps its priority");
    }
#endif
}

/* This thread's CPU time in ms. */
static uint64_t thread_cpu_ms(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) {
        return 0;
    }
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void *copier_main(void *arg) {
    hv__copier_t *c = arg;
    copier_nice();
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->stop && c->data == NULL) {
            pthread_cond_wait(&c->cv, &c->mu);
        }
        if (c->data == NULL) {
            break; /* stopping with nothing to send */
        }
        void *data = c->data;
        size_t len = c->len;
        uint32_t gen = c->generation;
        uint64_t commit = c->commit;
        pthread_mutex_unlock(&c->mu);
        uint64_t t0 = hv_now_ms(), cpu0 = thread_cpu_ms();
        hv_err rc = c->fn(c->ud, gen, commit, data, len);
        uint64_t took = hv_now_ms() - t0, cpu = thread_cpu_ms() - cpu0;
        pthread_mutex_lock(&c->mu);
        hv_free(c->spare);
        c->spare = data;
        c->spare_cap = len;
        c->data = NULL;
        c->busy = 0;
        c->st.busy_ms += took;
        c->st.last_cost_ms = c->ser_ms + cpu;
        c->st.last_wall_ms = took;
        HV_LOG(HV_LOG_DEBUG, "elastic", "HV-COPY-SENT",
               "copy of generation %u, commit %llu (%zu bytes): %s in %llu ms; it cost %llu ms of "
               "CPU (%llu ms serialising on the training thread)",
               gen, (unsigned long long)commit, len, rc == HV_OK ? "sent" : "failed",
               (unsigned long long)took, (unsigned long long)c->st.last_cost_ms,
               (unsigned long long)c->ser_ms);
        if (rc == HV_OK) {
            c->st.sent++;
            c->st.bytes_sent += len;
        } else {
            c->st.failed++;
        }
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

hv_err hv__copier_create(hv__copier_send_fn fn, void *ud, const hv__copy_policy_t *policy,
                         hv__copier_t **out) {
    hv__copier_t *c = hv_calloc(1, sizeof(*c));
    if (c == NULL) {
        return HV_ENOMEM;
    }
    c->fn = fn;
    c->ud = ud;
    c->policy = *policy;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    if (pthread_create(&c->thread, NULL, copier_main, c) != 0) {
        pthread_cond_destroy(&c->cv);
        pthread_mutex_destroy(&c->mu);
        hv_free(c);
        return HV_EINTERNAL;
    }
    *out = c;
    return HV_OK;
}

void *hv__copier_buffer(hv__copier_t *c, size_t len) {
    void *b = NULL;
    pthread_mutex_lock(&c->mu);
    if (c->spare != NULL && c->spare_cap == len) {
        b = c->spare;
        c->spare = NULL;
        c->spare_cap = 0;
    }
    pthread_mutex_unlock(&c->mu);
    return b != NULL ? b : hv_malloc_large(len);
}

int hv__copier_want(hv__copier_t *c, uint64_t now_ms) {
    pthread_mutex_lock(&c->mu);
    uint64_t since = now_ms > c->last_begin_ms ? now_ms - c->last_begin_ms : 0;
    int due = hv__copy_due(&c->policy, !c->offered_any, since, c->st.last_cost_ms);
    int want = due && !c->busy;
    if (due && c->busy) {
        c->st.skipped++;
    }
    pthread_mutex_unlock(&c->mu);
    return want;
}

int hv__copier_offer(hv__copier_t *c, uint32_t generation, uint64_t commit, void *data, size_t len,
                     uint64_t ser_ms, uint64_t now_ms) {
    pthread_mutex_lock(&c->mu);
    c->offered_any = 1;
    c->st.offered++;
    if (c->busy || c->stop) {
        c->st.skipped++;
        pthread_mutex_unlock(&c->mu);
        hv_free(data);
        return 0;
    }
    c->busy = 1;
    c->data = data;
    c->len = len;
    c->generation = generation;
    c->commit = commit;
    c->ser_ms = ser_ms;
    c->last_begin_ms = now_ms;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return 1;
}

hv_err hv__copier_flush(hv__copier_t *c, uint32_t timeout_ms) {
    struct timespec ts = hv_realtime_in_ms(timeout_ms);
    hv_err rc = HV_OK;
    pthread_mutex_lock(&c->mu);
    while (c->busy && rc == HV_OK) {
        if (pthread_cond_timedwait(&c->cv, &c->mu, &ts) != 0) {
            rc = c->busy ? HV_ETIMEDOUT : HV_OK;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

void hv__copier_stats(hv__copier_t *c, hv__copier_stats_t *out) {
    pthread_mutex_lock(&c->mu);
    *out = c->st;
    pthread_mutex_unlock(&c->mu);
}

void hv__copier_destroy(hv__copier_t *c) {
    if (c == NULL) {
        return;
    }
    pthread_mutex_lock(&c->mu);
    c->stop = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->thread, NULL);
    hv_free(c->data);
    hv_free(c->spare);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    hv_free(c);
}
