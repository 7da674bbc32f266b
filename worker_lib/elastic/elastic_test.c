/*
 * elastic_test: the elastic layer end to end inside one process. Each worker is a thread with
 * its own member (member.c) on an elastic rdzv_local store that plays the head (rounds, pushes,
 * failed / added / removed workers), its own state bound to that member, and a data plane over
 * real TCP on 127.0.0.1. Covers: commit / restore / sync and the layout check; a worker dying
 * mid-step (the survivors see a data-plane error, restore, re-join a smaller world and agree on
 * the last commit); a worker joining (a push, HV_ERESET at the same commit on every rank, the
 * joiner receives the state by sync); a drained worker (hv_elastic_run returns HV_OK with
 * hv_state_removed, no Done, the others go on without rollback); the job ending; reset
 * callbacks; the sampler across a failure and a growth inside one epoch (every sample exactly
 * once, a constant global batch, the same partition on every rank); a stale data-plane hello;
 * with CUDA/NCCL (three GPUs, or tests/gpusim's stand-in), the model's allreduce on device
 * memory through NCCL across a failure and a growth: every round builds a new communicator.
 * Every wait is bounded; the few "wait until the push arrived" points are condition waits.
 */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elastic_int.h"
#include "hvtest.h"
#include "log.h"
#include "mem.h"
#include "member.h"
#include "rdzv.h"
#include "sampler.h"
#include "transport_nccl.h"
#include "transport_tcp.h"
#include "util.h"
#include "world.h"

#include "hv/elastic.h"

#define K 1000 // floats in the test model
#define MAX_WORKERS 8
#define MAX_RESETS 8

/* ---- harness: workers as threads ------------------------------------------------------------- */

typedef struct worker_s worker_t;
typedef struct scenario_s scenario_t;

struct scenario_s {
    hv__rdzv_local_store_t *store;
    hv_train_fn train;
    uint64_t steps;       // training length (model steps)
    uint64_t fail_id;     // worker that dies (0: none) ...
    uint64_t fail_step;   // ... at this step, before its allreduce
    uint64_t grow_id;     // worker added (0: none) ...
    uint64_t grow_step;   // ... by worker 1 at this step
    uint64_t remove_id;   // worker drained (0: none) ...
    uint64_t remove_step; // ... by worker 1 at this step
    uint64_t end_step;    // the job is ended at this step (0: never)
    uint64_t stall_id;    // worker that stops taking part (0: none) ...
    uint64_t stall_step;  // ... at this step: the head declares it failed (a push only)
    uint32_t wait_gen;    // every worker waits for this push ...
    uint64_t wait_step;   // ... before its commit at this step
    int with_sampler;     // sampler scenario
    uint64_t samples;     // sampler: data set size
    uint32_t batch;       // sampler: global batch
    int seed_differs;     // sampler: worker 2's seed is another (the ranks disagree)
    int nccl;             // the allreduce runs on device memory through NCCL
    int copies;           // rank 0's copier sends every commit it can to copy_put (copies case)
    uint64_t ghost_id;    // a worker added by worker 1 at ghost_step that joins a round and
    uint64_t ghost_step;  // dies before connecting (its round's ring can never be built)
    pthread_t ghost;
    worker_t *workers[MAX_WORKERS];
    pthread_t threads[MAX_WORKERS];
    int nthreads;
    pthread_mutex_t mu;
};

struct worker_s {
    scenario_t *sc;
    uint64_t id;
    hv__member_t *m;
    hv_state_t *st;
    hv_sampler_t *sampler;
    // the model (registered)
    float w[K];
    uint64_t step;
    uint64_t epoch;
    uint64_t idxsum; // sampler: sum of the processed indices (through an allreduce)
    float *dev;      // nccl: the allreduce's device buffer (K floats)
    // results
    hv_err run_rc;
    hv_err fail_rc;       // the data-plane error fn saw (0: none)
    uint64_t last_commit; // step of the last commit that returned HV_OK
    uint64_t reset_step;  // step when fn returned HV_ERESET
    int removed;
    uint32_t resets, rollbacks;
    hv_reset_info_t infos[MAX_RESETS];
    char reasons[MAX_RESETS][128];
    uint64_t steps_after_reset[MAX_RESETS];
    int ninfos;
    int epoch_checks; // sampler: epochs whose stats were checked
    char last_error[256];
};

/* In a train function: fail the case and stop training. */
#define T_CHECK(c)                                                                                 \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            HVT_FAIL("worker %llu: %s", (unsigned long long)w->id, #c);                            \
            return HV_EINTERNAL;                                                                   \
        }                                                                                          \
    } while (0)

static int g_use_nccl;        // world_opts: ask for NCCL (set by the nccl case only)
static uint32_t g_connect_ms; // world_opts: the ring build bound (0: 20 s)

static hv__world_opts_t world_opts(void) {
    return (hv__world_opts_t){
        .use_nccl = g_use_nccl,
        .bind_addr = "127.0.0.1:0",
        .host_name = "h0",
        .shm_bytes = 0, // real TCP
        .rdzv_timeout_ms = (uint32_t)hvtest_scale(60000),
        .connect_timeout_ms = g_connect_ms ? g_connect_ms : (uint32_t)hvtest_scale(20000),
        .peer_timeout_ms = (uint32_t)hvtest_scale(10000),
        .spin_us = UINT32_MAX,
        .small_bytes = SIZE_MAX,
        .spec_bytes = SIZE_MAX,
    };
}

static void on_reset(hv_state_t *st, const hv_reset_info_t *info, void *ud) {
    (void)st;
    worker_t *w = ud;
    if (w->ninfos < MAX_RESETS) {
        w->infos[w->ninfos] = *info;
        snprintf(w->reasons[w->ninfos], sizeof(w->reasons[0]), "%s", info->reason);
        w->infos[w->ninfos].reason = w->reasons[w->ninfos];
        w->steps_after_reset[w->ninfos] = w->step;
        w->ninfos++;
    }
}

/* ---- the copies case: what the copier sends, checked as it arrives --------------------------- */

#define COPY_BIG ((size_t)1 << 20) // uint32s in the copies case's large buffer (4 pieces)

static uint32_t g_big[COPY_BIG];      // the copies case's large buffer: every word is the step
static uint32_t g_big_load[COPY_BIG]; // where copy_put loads each copy
static char g_copy_path[64];          // copy_put's scratch file
static atomic_int g_copies_ok, g_copies_bad; // copies that were / were not one commit's state
static uint64_t g_copy_last_step;            // the step of the last copy (they must not go back)
static hv__rdzv_ops_t g_copy_ops;            // the local rendezvous with copy_put and copy_fetch

/* The copier's send (its thread): the copy must load into a state of the same registrations and
 * be one commit's state, never torn by later steps: every word of the large buffer is its step,
 * and the model is the model after that step. Slow on purpose, so training runs ahead. */
static hv_err copy_put(void *ctx, uint32_t generation, uint64_t commit, const void *data,
                       size_t len) {
    (void)ctx;
    (void)generation;
    (void)commit;
    static float w[K];
    uint64_t step = 0, epoch = 0, idxsum = 0;
    hv_state_t *st = NULL;
    int ok = hv_write_file_atomic(g_copy_path, data, len, 0600) == HV_OK &&
             hv_state_create(&st) == HV_OK && hv_state_add_buffer(st, "w", w, sizeof(w)) == HV_OK &&
             hv_state_add_u64(st, "step", &step) == HV_OK &&
             hv_state_add_u64(st, "epoch", &epoch) == HV_OK &&
             hv_state_add_u64(st, "idxsum", &idxsum) == HV_OK &&
             hv_state_add_buffer(st, "big", g_big_load, sizeof(g_big_load)) == HV_OK &&
             hv_state_load(st, g_copy_path) == HV_OK && step >= g_copy_last_step;
    for (size_t i = 0; ok && i < COPY_BIG; i++) {
        ok = g_big_load[i] == (uint32_t)step;
    }
    hv_state_destroy(st);
    atomic_fetch_add(ok ? &g_copies_ok : &g_copies_bad, 1);
    g_copy_last_step = step;
    usleep(2000);
    return HV_OK;
}

static hv_err copy_fetch(void *ctx, uint64_t commit, void **data, size_t *len) {
    (void)ctx;
    (void)commit;
    (void)data;
    (void)len;
    return HV_ENOTFOUND;
}

static hv_err make_member(uint64_t id, hv__rdzv_local_store_t *store, hv__member_t **out,
                          int copies) {
    hv__member_opts_t mo = {.world = world_opts()};
    hv_err rc = hv__rdzv_local_client_worker(store, id, &mo.world.rdzv);
    if (rc == HV_OK && copies) {
        g_copy_ops = *mo.world.rdzv.ops;
        g_copy_ops.put_state = copy_put;
        g_copy_ops.fetch_state = copy_fetch;
        mo.world.rdzv.ops = &g_copy_ops;
    }
    if (rc == HV_OK) {
        rc = hv__member_create(&mo, out);
    }
    return rc;
}

static void *worker_main(void *arg) {
    worker_t *w = arg;
    scenario_t *sc = w->sc;
    hv_err rc = make_member(w->id, sc->store, &w->m, sc->copies);
    if (rc != HV_OK) {
        HVT_FAIL("worker %llu: member: %s", (unsigned long long)w->id, hv_strerror(rc));
        w->run_rc = rc;
        return NULL;
    }
    // Worker 1 (rank 0 of the first round) starts from the model at step 0; every other
    // worker from garbage, which only a sync from rank 0 can turn into a valid model.
    for (int i = 0; i < K; i++) {
        w->w[i] = w->id == 1 ? 0.0f : (float)(w->id * 1000 + (uint64_t)i);
    }
    w->step = w->id == 1 ? 0 : 1000 + w->id;
    if (hv_state_create(&w->st) != HV_OK || hv_state_add_buffer(w->st, "w", w->w, sizeof(w->w)) ||
        hv_state_add_u64(w->st, "step", &w->step) || hv_state_add_u64(w->st, "epoch", &w->epoch) ||
        hv_state_add_u64(w->st, "idxsum", &w->idxsum) || hv_state_on_reset(w->st, on_reset, w)) {
        HVT_FAIL("worker %llu: state setup", (unsigned long long)w->id);
        return NULL;
    }
    if (sc->copies && hv_state_add_buffer(w->st, "big", g_big, sizeof(g_big)) != HV_OK) {
        HVT_FAIL("worker %llu: state setup", (unsigned long long)w->id);
        return NULL;
    }
    if (sc->with_sampler) {
        hv_sampler_config_t cfg = HV_SAMPLER_CONFIG_INIT;
        cfg.num_samples = sc->samples;
        cfg.seed = sc->seed_differs && w->id == 2 ? 8 : 7;
        cfg.batch = sc->batch;
        cfg.global_batch = 1;
        if (hv_sampler_create(w->st, "train", &cfg, &w->sampler) != HV_OK) {
            HVT_FAIL("worker %llu: sampler", (unsigned long long)w->id);
            return NULL;
        }
    }
    hv__state_bind(w->st, w->m);
    w->run_rc = hv_elastic_run(w->st, sc->train, w);
    w->removed = hv_state_removed(w->st);
    w->resets = hv_state_resets(w->st);
    w->rollbacks = hv_state_rollbacks(w->st);
    hv__member_last_error(w->m, w->last_error, sizeof(w->last_error));
    if (w->run_rc != HV_OK && w->run_rc != HV_EINTERNAL) {
        fprintf(stderr, "  worker %llu: hv_elastic_run: %s (%s)\n", (unsigned long long)w->id,
                hv_errname(w->run_rc), w->last_error);
    }
    hv_state_destroy(w->st);
    w->st = NULL;
    hv__gpu_device_free(w->dev);
    hv__member_destroy(w->m, 0);
    w->m = NULL;
    return NULL;
}

/* Starts worker id (any thread). */
static void start_worker(scenario_t *sc, uint64_t id) {
    worker_t *w = hv_calloc(1, sizeof(*w));
    w->sc = sc;
    w->id = id;
    pthread_mutex_lock(&sc->mu);
    int k = sc->nthreads++;
    sc->workers[k] = w;
    pthread_create(&sc->threads[k], NULL, worker_main, w);
    pthread_mutex_unlock(&sc->mu);
}

static void scenario_init(scenario_t *sc, uint32_t check_every, hv_train_fn train) {
    memset(sc, 0, sizeof(*sc));
    hv_log_init("elastic_test"); // HV_LOG_LEVEL / HV_LOG_SUBSYS for debugging
    pthread_mutex_init(&sc->mu, NULL);
    hv__rdzv_local_store_create_elastic(check_every, &sc->store);
    sc->train = train;
}

/* Starts workers 1..n, then joins every thread (including those started later). */
static void scenario_run(scenario_t *sc, int n) {
    for (int i = 1; i <= n; i++) {
        hv__rdzv_local_store_add_worker(sc->store, (uint64_t)i);
    }
    for (int i = 1; i <= n; i++) {
        start_worker(sc, (uint64_t)i);
    }
    for (int k = 0;; k++) {
        pthread_mutex_lock(&sc->mu);
        int have = k < sc->nthreads;
        pthread_mutex_unlock(&sc->mu);
        if (!have) {
            break;
        }
        pthread_join(sc->threads[k], NULL);
    }
    if (sc->ghost_id) {
        pthread_join(sc->ghost, NULL);
    }
}

static worker_t *scenario_worker(scenario_t *sc, uint64_t id) {
    for (int k = 0; k < sc->nthreads; k++) {
        if (sc->workers[k]->id == id) {
            return sc->workers[k];
        }
    }
    return NULL;
}

static void scenario_fini(scenario_t *sc) {
    for (int k = 0; k < sc->nthreads; k++) {
        hv_free(sc->workers[k]);
    }
    hv__rdzv_local_store_destroy(sc->store);
    pthread_mutex_destroy(&sc->mu);
}

/* The model after `steps` steps: step s adds s + i (the average of every rank's s + i). */
static int model_ok(const float *m, uint64_t steps) {
    for (int i = 0; i < K; i++) {
        double want = (double)steps * (double)(steps - 1) / 2 + (double)steps * i;
        if (m[i] != (float)want) {
            return 0;
        }
    }
    return 1;
}

/* The ghost: joins the round it was added to with an address nobody listens on, then dies
 * (the head declares it failed) without ever connecting. */
static void *ghost_main(void *arg) {
    scenario_t *sc = arg;
    hv__rdzv_t rz;
    hv__rdzv_assignment_t a;
    if (hv__rdzv_local_client_worker(sc->store, sc->ghost_id, &rz) != HV_OK) {
        return NULL;
    }
    if (rz.ops->join(rz.ctx, "127.0.0.1:1", "h0", 0, (uint32_t)hvtest_scale(60000), &a) == HV_OK) {
        hv__rdzv_local_store_fail_worker(sc->store, sc->ghost_id, "worker died while joining");
        hv__rdzv_assignment_fini(&a);
    } else {
        HVT_FAIL("the ghost could not join");
    }
    rz.ops->destroy(rz.ctx);
    return NULL;
}

/* Scenario hooks common to the train functions; return HV_OK to go on. */
static hv_err hooks_before_step(worker_t *w, hv__engine_t *e) {
    (void)e;
    scenario_t *sc = w->sc;
    if (w->id == sc->fail_id && w->step == sc->fail_step) {
        // Die mid-step: the data plane goes down at once (as a killed process's sockets do),
        // and the head learns that the worker exited.
        hv__member_abort(w->m, HV_ECANCELED, "test: this worker dies");
        hv__rdzv_local_store_fail_worker(sc->store, w->id, "worker exited with status 9");
        return HV_EINTERNAL; // not a data-plane error: hv_elastic_run returns it as it is
    }
    if (w->id == sc->stall_id && w->step == sc->stall_step) {
        // Stop taking part without closing anything (a hung host): only the head's failure
        // push can tell the others, long before their peer timeout.
        hv__rdzv_local_store_fail_worker(sc->store, w->id, "worker lost: no heartbeat");
        uint32_t next = hv__rdzv_local_store_generation(sc->store) + 1;
        if (hv__rdzv_local_store_wait_generation(sc->store, next, (uint32_t)hvtest_scale(60000)) !=
            HV_OK) {
            HVT_FAIL("worker %llu: the survivors did not form round %u", (unsigned long long)w->id,
                     next);
        }
        return HV_EINTERNAL;
    }
    if (w->id == 1 && sc->grow_id && w->step == sc->grow_step) {
        hv__rdzv_local_store_add_worker(sc->store, sc->grow_id);
        start_worker(sc, sc->grow_id);
    }
    if (w->id == 1 && sc->ghost_id && w->step == sc->ghost_step) {
        hv__rdzv_local_store_add_worker(sc->store, sc->ghost_id);
        pthread_create(&sc->ghost, NULL, ghost_main, sc);
    }
    if (w->id == 1 && sc->remove_id && w->step == sc->remove_step) {
        hv__rdzv_local_store_remove_worker(sc->store, sc->remove_id);
    }
    if (w->id == 1 && sc->end_step && w->step == sc->end_step) {
        hv__rdzv_local_store_end(sc->store, "resets exceeded --max-resets 2");
        hv__member_abort(w->m, HV_ECANCELED, "test: the job ended");
    }
    return HV_OK;
}

static hv_err commit(worker_t *w) {
    scenario_t *sc = w->sc;
    if (sc->wait_gen && w->step == sc->wait_step) {
        // Make the reset fall on this commit on every rank (without it, it falls on the first
        // check after the push reached any rank; that path is the sampler case's).
        if (hv__member_wait_pushed(w->m, sc->wait_gen, (uint32_t)hvtest_scale(30000)) != HV_OK) {
            HVT_FAIL("worker %llu: push %u did not arrive", (unsigned long long)w->id,
                     sc->wait_gen);
            return HV_EINTERNAL;
        }
    }
    hv_err rc = hv_state_commit(w->st);
    if (rc == HV_OK) {
        w->last_commit = w->step;
    } else if (rc == HV_ERESET) {
        w->reset_step = w->step;
    } else {
        w->fail_rc = rc;
    }
    return rc;
}

/* ---- the plain model: allreduce, apply, commit ----------------------------------------------- */

static hv_err train_model(hv_state_t *st, void *ud) {
    (void)st;
    worker_t *w = ud;
    hv__engine_t *e = hv__member_engine(w->m);
    // After every sync all ranks hold rank 0's model, which is the model after `step` steps.
    T_CHECK(model_ok(w->w, w->step));
    float g[K];
    if (w->sc->nccl) {
        // Every round must have built an NCCL communicator (a new one, with the round's id).
        T_CHECK(hv__world_uses_nccl(hv__member_world(w->m)));
        if (w->dev == NULL) {
            T_CHECK(hv__gpu_device_alloc(-1, sizeof(g), (void **)&w->dev) == HV_OK);
        }
    }
    while (w->step < w->sc->steps) {
        hv_err rc = hooks_before_step(w, e);
        if (rc != HV_OK) {
            return rc;
        }
        for (int i = 0; i < K; i++) {
            g[i] = (float)(w->step + (uint64_t)i); // every rank's: the average is step + i
        }
        float *buf = w->dev != NULL ? w->dev : g;
        if (w->dev != NULL) {
            T_CHECK(hv__gpu_memcpy(w->dev, g, sizeof(g)) == HV_OK);
        }
        hv__op_desc_t d = {.kind = HV__OP_ALLREDUCE,
                           .in = buf,
                           .out = buf,
                           .count = K,
                           .dtype = HV_FLOAT32,
                           .op = HV_AVG};
        if ((rc = hv__engine_run(e, &d)) != HV_OK) {
            w->fail_rc = rc;
            return rc; // a peer failed: hv_elastic_run restores and re-joins
        }
        if (w->dev != NULL) {
            T_CHECK(hv__gpu_memcpy(g, w->dev, sizeof(g)) == HV_OK);
        }
        for (int i = 0; i < K; i++) {
            w->w[i] += g[i];
        }
        w->step++;
        if ((rc = commit(w)) != HV_OK) {
            return rc;
        }
    }
    return HV_OK;
}

/* ---- the sampler model: each step processes one window of samples ------------------------- */

static hv_err train_sampler(hv_state_t *st, void *ud) {
    (void)st;
    worker_t *w = ud;
    scenario_t *sc = w->sc;
    hv__engine_t *e = hv__member_engine(w->m);
    const hv__rdzv_assignment_t *a = hv__member_assignment(w->m);
    int size = a->size, rank = a->rank;
    uint64_t n_all = sc->samples, want_sum = n_all * (n_all - 1) / 2;
    uint64_t idx[64], all[64 * MAX_WORKERS];
    size_t counts[MAX_WORKERS];
    while (w->epoch < 2) {
        for (;;) {
            hv_err rc = hooks_before_step(w, e);
            if (rc != HV_OK) {
                return rc;
            }
            size_t n = 0;
            int end = 0;
            T_CHECK(hv_sampler_next(w->sampler, idx, 64, &n, &end) == HV_OK);
            uint64_t g = hv_sampler_step_samples(w->sampler);
            if (end) {
                T_CHECK(n == 0 && g == 0);
                break;
            }
            hv_sampler_stats_t stats = {.size = sizeof(stats)};
            T_CHECK(hv_sampler_stats(w->sampler, &stats) == HV_OK);
            // The global batch stays sc->batch at every size; only the last window of the
            // epoch may be short.
            T_CHECK(g == sc->batch || stats.remaining == g);
            // Every rank's share, and all shares together are one window: no index twice.
            hv__op_desc_t d = {.kind = HV__OP_ALLGATHER,
                               .in = idx,
                               .out = all,
                               .count = n,
                               .dtype = HV_INT64,
                               .out_cap = 64 * MAX_WORKERS,
                               .counts = counts};
            if ((rc = hv__engine_run(e, &d)) != HV_OK) {
                w->fail_rc = rc;
                return rc;
            }
            uint64_t total = 0;
            for (int r = 0; r < size; r++) {
                uint64_t off, cnt;
                hv__sampler_share(g, size, r, &off, &cnt);
                T_CHECK(counts[r] == cnt);
                total += counts[r];
            }
            T_CHECK(total == g && counts[rank] == n);
            for (uint64_t i = 0; i < total; i++) {
                T_CHECK(all[i] < n_all);
                for (uint64_t j = 0; j < i; j++) {
                    T_CHECK(all[i] != all[j]);
                }
            }
            // The "gradient": the sum of this step's indices over all ranks.
            int64_t sum = 0;
            for (size_t i = 0; i < n; i++) {
                sum += (int64_t)idx[i];
            }
            d = (hv__op_desc_t){.kind = HV__OP_ALLREDUCE,
                                .in = &sum,
                                .out = &sum,
                                .count = 1,
                                .dtype = HV_INT64,
                                .op = HV_SUM};
            if ((rc = hv__engine_run(e, &d)) != HV_OK) {
                w->fail_rc = rc;
                return rc;
            }
            w->idxsum += (uint64_t)sum;
            w->step++;
            if ((rc = commit(w)) != HV_OK) {
                return rc;
            }
        }
        // The epoch is exact: every sample processed once, none twice, none skipped.
        hv_sampler_stats_t stats = {.size = sizeof(stats)};
        T_CHECK(hv_sampler_stats(w->sampler, &stats) == HV_OK);
        if (stats.processed != n_all || stats.duplicates != 0 || stats.remaining != 0 ||
            stats.checksum != want_sum || w->idxsum != want_sum || stats.epoch != w->epoch) {
            HVT_FAIL("worker %llu epoch %llu: processed %llu of %llu, duplicates %llu, remaining "
                     "%llu, checksum %llu and index sum %llu (want %llu)",
                     (unsigned long long)w->id, (unsigned long long)w->epoch,
                     (unsigned long long)stats.processed, (unsigned long long)n_all,
                     (unsigned long long)stats.duplicates, (unsigned long long)stats.remaining,
                     (unsigned long long)stats.checksum, (unsigned long long)w->idxsum,
                     (unsigned long long)want_sum);
            return HV_EINTERNAL;
        }
        w->epoch_checks++;
        T_CHECK(hv_sampler_next_epoch(w->sampler) == HV_OK);
        w->epoch++;
        w->idxsum = 0;
    }
    return HV_OK;
}

/* Two steps, each committed; the rounds the second commit ran and the stats after it, or the
 * first commit's error (fail_rc). */
static hv_err train_two_commits(hv_state_t *st, void *ud) {
    worker_t *w = ud;
    hv__engine_t *e = hv__member_engine(w->m);
    uint64_t idx[64];
    size_t n = 0;
    int end = 0;
    T_CHECK(hv_sampler_next(w->sampler, idx, 64, &n, &end) == HV_OK && !end);
    if ((w->fail_rc = hv_state_commit(st)) != HV_OK) {
        return HV_OK;
    }
    T_CHECK(hv_sampler_next(w->sampler, idx, 64, &n, &end) == HV_OK && !end);
    hv__engine_stats_t before, after;
    hv__engine_stats(e, &before);
    T_CHECK(hv_state_commit(st) == HV_OK);
    hv__engine_stats(e, &after);
    w->step = after.rounds - before.rounds;
    hv_sampler_stats_t stats = {.size = sizeof(stats)};
    T_CHECK(hv_sampler_stats(w->sampler, &stats) == HV_OK);
    w->idxsum = stats.processed;
    w->epoch = stats.duplicates;
    return HV_OK;
}

/* ---- cases ----------------------------------------------------------------------------------- */

/* Commit, restore, sync and the layout check, called directly (outside a run). */
typedef struct rt_arg_s {
    hv__rdzv_local_store_t *store;
    uint64_t id;
    int bad_layout;
    hv_err sync_rc;
    int ok;
} rt_arg_t;

static void *roundtrip_main(void *arg) {
    rt_arg_t *a = arg;
    hv__member_t *m = NULL;
    if (make_member(a->id, a->store, &m, 0) != HV_OK) {
        return NULL;
    }
    hv_state_t *st = NULL;
    double buf[300];
    uint64_t step = a->id;
    for (int i = 0; i < 300; i++) {
        buf[i] = (double)(a->id * 1000 + (uint64_t)i);
    }
    hv_state_create(&st);
    hv__state_bind(st, m);
    size_t bytes = a->bad_layout && a->id == 2 ? sizeof(double) * 299 : sizeof(buf);
    hv_state_add_buffer(st, "buf", buf, bytes);
    hv_state_add_u64(st, "step", &step);
    int ok = hv_state_restore(st) == HV_ESTATE; // nothing committed yet
    a->sync_rc = hv_state_sync(st);
    if (a->sync_rc == HV_OK) {
        // Everyone now has rank 0's (worker 1's) state.
        ok &= step == 1 && buf[299] == 1299.0;
        buf[5] = -1;
        step = 10;
        ok &= hv_state_commit(st) == HV_OK;
        buf[5] = -2;
        step = 11;
        ok &= hv_state_restore(st) == HV_OK;
        ok &= step == 10 && buf[5] == -1 && buf[6] == 1006.0;
        ok &= hv_state_commits(st) == 1;
        ok &= hv_state_check(st) == HV_OK;
        ok &= hv_state_add_buffer(st, "buf", buf, 8) == HV_EEXIST;
        ok &= hv_state_add_buffer(st, "", buf, 8) == HV_EINVAL;
        ok &= hv_state_add_buffer(st, "z", buf, 0) == HV_EINVAL;
        ok &= hv_elastic_run(st, NULL, NULL) == HV_EINVAL;
    }
    a->ok = ok;
    hv_state_destroy(st);
    hv__member_destroy(m, 0);
    return NULL;
}

static void run_roundtrip(int bad_layout, rt_arg_t *args) {
    hv__rdzv_local_store_t *store = NULL;
    hv__rdzv_local_store_create_elastic(1, &store);
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        hv__rdzv_local_store_add_worker(store, (uint64_t)i + 1);
        args[i] = (rt_arg_t){.store = store, .id = (uint64_t)i + 1, .bad_layout = bad_layout};
    }
    for (int i = 0; i < 2; i++) {
        pthread_create(&th[i], NULL, roundtrip_main, &args[i]);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
    }
    hv__rdzv_local_store_destroy(store);
}

static void test_roundtrip(void) {
    rt_arg_t a[2];
    run_roundtrip(0, a);
    for (int i = 0; i < 2; i++) {
        ASSERT_RC(a[i].sync_rc, HV_OK);
        ASSERT_TRUE(a[i].ok);
    }
    // Worker 2 registered a different size: both ranks refuse to sync (the log names it).
    run_roundtrip(1, a);
    for (int i = 0; i < 2; i++) {
        ASSERT_RC(a[i].sync_rc, HV_EPROTO);
    }
}

/* Checks the common end of a scenario: the listed workers finished training with equal models. */
static void expect_finished(scenario_t *sc, const uint64_t *ids, int n) {
    for (int k = 0; k < n; k++) {
        worker_t *w = scenario_worker(sc, ids[k]);
        ASSERT_TRUE(w != NULL);
        ASSERT_RC(w->run_rc, HV_OK);
        ASSERT_EQ_INT(w->removed, 0);
        ASSERT_EQ_INT(w->step, sc->steps);
        ASSERT_TRUE(model_ok(w->w, w->step));
    }
    ASSERT_EQ_INT(hv__rdzv_local_store_done_count(sc->store), n);
}

/* No change: sync, train, Done once per worker, no reset. */
static void test_steady(void) {
    scenario_t sc;
    scenario_init(&sc, 2, train_model);
    sc.steps = 10;
    scenario_run(&sc, 3);
    expect_finished(&sc, (const uint64_t[]){1, 2, 3}, 3);
    for (int k = 0; k < sc.nthreads; k++) {
        ASSERT_EQ_INT(sc.workers[k]->resets, 0);
        ASSERT_EQ_INT(sc.workers[k]->ninfos, 0);
    }
    ASSERT_EQ_INT(hv__rdzv_local_store_done_generation(sc.store), 1);
    scenario_fini(&sc);
}

/* Worker 3 dies in the middle of step 6: the survivors' allreduce fails at once (its sockets
 * close), they restore the last commit, re-join a world of 2 and agree on rank 0's commit. */
static void test_failure(void) {
    scenario_t sc;
    scenario_init(&sc, 1, train_model);
    sc.steps = 20;
    sc.fail_id = 3;
    sc.fail_step = 5;
    scenario_run(&sc, 3);
    ASSERT_RC(scenario_worker(&sc, 3)->run_rc, HV_EINTERNAL);
    expect_finished(&sc, (const uint64_t[]){1, 2}, 2);
    uint64_t agreed = scenario_worker(&sc, 1)->steps_after_reset[0];
    for (uint64_t id = 1; id <= 2; id++) {
        worker_t *w = scenario_worker(&sc, id);
        fprintf(stderr, "  worker %llu saw %s, resumed at step %llu\n", (unsigned long long)id,
                hv_errname(w->fail_rc), (unsigned long long)w->steps_after_reset[0]);
        ASSERT_TRUE(w->fail_rc == HV_EPEER || w->fail_rc == HV_ECANCELED);
        ASSERT_EQ_INT(w->resets, 1);
        ASSERT_EQ_INT(w->rollbacks, 1);
        ASSERT_EQ_INT(w->ninfos, 1);
        ASSERT_EQ_INT(w->infos[0].old_size, 3);
        ASSERT_EQ_INT(w->infos[0].new_size, 2);
        ASSERT_EQ_INT(w->infos[0].old_generation, 1);
        ASSERT_EQ_INT(w->infos[0].new_generation, 2);
        ASSERT_EQ_INT(w->infos[0].rollback, 1);
        // Every survivor resumed from the same commit: the new rank 0's last one (worker 1,
        // the oldest), which is step 5 unless the failure cut its last commit short.
        ASSERT_EQ_INT(w->steps_after_reset[0], agreed);
    }
    ASSERT_TRUE(agreed == 5 || agreed == 4);
    scenario_fini(&sc);
}

/* Worker 3 hangs: only the head's failure push (not a socket) tells the others, whose
 * collectives in flight fail at once with HV_ECANCELED (their peer timeout is 10 s). */
static void test_failure_push(void) {
    scenario_t sc;
    scenario_init(&sc, 1, train_model);
    sc.steps = 12;
    sc.stall_id = 3;
    sc.stall_step = 4;
    scenario_run(&sc, 3);
    ASSERT_RC(scenario_worker(&sc, 3)->run_rc, HV_EINTERNAL);
    expect_finished(&sc, (const uint64_t[]){1, 2}, 2);
    for (uint64_t id = 1; id <= 2; id++) {
        worker_t *w = scenario_worker(&sc, id);
        fprintf(stderr, "  worker %llu saw %s\n", (unsigned long long)id, hv_errname(w->fail_rc));
        // Whoever the push reaches first aborts its world: a survivor (HV_ECANCELED), or the
        // hung worker itself, whose engine still takes the push and closes its links, so that
        // both survivors may see a closed connection (HV_EPEER) before their own push arrives.
        // Either way the push ended it: never the 10 s peer timeout (HV_ETIMEDOUT).
        ASSERT_TRUE(w->fail_rc == HV_ECANCELED || w->fail_rc == HV_EPEER);
        ASSERT_EQ_INT(w->rollbacks, 1);
        ASSERT_EQ_INT(w->infos[0].new_size, 2);
        ASSERT_EQ_INT(w->steps_after_reset[0], 4);
        ASSERT_TRUE(strstr(w->infos[0].reason, "no heartbeat") != NULL);
    }
    scenario_fini(&sc);
}

/* Worker 3 joins: a push, HV_ERESET at the same commit on both old ranks, a world of 3 in
 * which the joiner receives the state by sync; no rollback. */
static void test_growth(void) {
    scenario_t sc;
    scenario_init(&sc, 2, train_model);
    sc.steps = 12;
    sc.grow_id = 3;
    sc.grow_step = 3;
    sc.wait_gen = 2;
    sc.wait_step = 4; // commit 4 is a check (every 2 commits)
    scenario_run(&sc, 2);
    expect_finished(&sc, (const uint64_t[]){1, 2, 3}, 3);
    for (uint64_t id = 1; id <= 2; id++) {
        worker_t *w = scenario_worker(&sc, id);
        ASSERT_EQ_INT(w->reset_step, 4);
        ASSERT_RC(w->fail_rc, HV_OK);
        ASSERT_EQ_INT(w->resets, 1);
        ASSERT_EQ_INT(w->rollbacks, 0);
        ASSERT_EQ_INT(w->infos[0].old_size, 2);
        ASSERT_EQ_INT(w->infos[0].new_size, 3);
        ASSERT_EQ_INT(w->infos[0].new_generation, 2);
        ASSERT_EQ_INT(w->infos[0].rollback, 0);
        ASSERT_EQ_INT(w->steps_after_reset[0], 4);
    }
    worker_t *j = scenario_worker(&sc, 3);
    ASSERT_EQ_INT(j->resets, 0);
    ASSERT_EQ_INT(j->ninfos, 0); // its first round: no callbacks
    scenario_fini(&sc);
}

/* A worker joins a round and dies before connecting: the others' build of that round (stuck in
 * connect / accept) is cancelled by the failure push, and they form the next round at once.
 * The ring build bound is 10 minutes here: without the cancel the case could not finish. */
static void test_ghost(void) {
    scenario_t sc;
    scenario_init(&sc, 1, train_model);
    g_connect_ms = 600000;
    sc.steps = 10;
    sc.ghost_id = 9;
    sc.ghost_step = 3;
    sc.wait_gen = 2;
    sc.wait_step = 4;
    scenario_run(&sc, 2);
    g_connect_ms = 0;
    expect_finished(&sc, (const uint64_t[]){1, 2}, 2);
    for (uint64_t id = 1; id <= 2; id++) {
        worker_t *w = scenario_worker(&sc, id);
        ASSERT_EQ_INT(w->reset_step, 4);
        ASSERT_EQ_INT(w->resets, 1);
        ASSERT_EQ_INT(w->infos[0].old_generation, 1);
        ASSERT_EQ_INT(w->infos[0].new_generation, 3); // round 2 never came up
        ASSERT_EQ_INT(w->infos[0].new_size, 2);
    }
    scenario_fini(&sc);
}

/* Worker 3's node is drained: every rank resets at the same commit, worker 3's re-join answers
 * "removed" (hv_elastic_run returns HV_OK, no Done), the others go on without rollback. */
static void test_drain(void) {
    scenario_t sc;
    scenario_init(&sc, 1, train_model);
    sc.steps = 10;
    sc.remove_id = 3;
    sc.remove_step = 3;
    sc.wait_gen = 2;
    sc.wait_step = 4;
    scenario_run(&sc, 3);
    worker_t *d = scenario_worker(&sc, 3);
    ASSERT_RC(d->run_rc, HV_OK);
    ASSERT_EQ_INT(d->removed, 1);
    ASSERT_EQ_INT(d->step, 4);
    expect_finished(&sc, (const uint64_t[]){1, 2}, 2); // Done: 2, not 3
    for (uint64_t id = 1; id <= 2; id++) {
        worker_t *w = scenario_worker(&sc, id);
        ASSERT_EQ_INT(w->reset_step, 4);
        ASSERT_EQ_INT(w->rollbacks, 0);
        ASSERT_EQ_INT(w->infos[0].rollback, 0);
        ASSERT_EQ_INT(w->infos[0].new_size, 2);
    }
    scenario_fini(&sc);
}

/* The head ends the job (too many resets): the re-join fails with HV_ESTATE and says why. */
static void test_job_end(void) {
    scenario_t sc;
    scenario_init(&sc, 1, train_model);
    sc.steps = 10;
    sc.end_step = 3;
    scenario_run(&sc, 2);
    for (uint64_t id = 1; id <= 2; id++) {
        worker_t *w = scenario_worker(&sc, id);
        ASSERT_RC(w->run_rc, HV_ESTATE);
        ASSERT_TRUE(strstr(w->last_error, "max-resets") != NULL);
    }
    ASSERT_EQ_INT(hv__rdzv_local_store_done_count(sc.store), 0);
    scenario_fini(&sc);
}

/* The sampler across a failure (worker 3 dies with samples handed out) and a growth (worker
 * 4 joins) inside epoch 0, then a plain epoch 1: every epoch exact on every worker, a constant
 * global batch at sizes 3, 2 and 3, the same partition on every rank (train_sampler checks). */
static void test_sampler(void) {
    scenario_t sc;
    scenario_init(&sc, 2, train_sampler);
    sc.with_sampler = 1;
    sc.samples = 2000;
    sc.batch = 24;
    sc.fail_id = 3;
    sc.fail_step = 10;
    sc.grow_id = 4;
    sc.grow_step = 30;
    sc.wait_gen = 3; // round 2 follows the failure, round 3 the growth
    sc.wait_step = 31;
    scenario_run(&sc, 3);
    ASSERT_RC(scenario_worker(&sc, 3)->run_rc, HV_EINTERNAL);
    for (uint64_t id = 1; id <= 4; id += id == 2 ? 2 : 1) {
        worker_t *w = scenario_worker(&sc, id);
        ASSERT_TRUE(w != NULL);
        ASSERT_RC(w->run_rc, HV_OK);
        ASSERT_EQ_INT(w->epoch, 2);
        ASSERT_TRUE(w->epoch_checks >= 1);
    }
    worker_t *a = scenario_worker(&sc, 1), *b = scenario_worker(&sc, 2);
    ASSERT_EQ_INT(a->resets, 2);
    ASSERT_EQ_INT(a->rollbacks, 1);
    ASSERT_EQ_INT(a->reset_step, b->reset_step); // the growth: same commit on both
    ASSERT_EQ_INT(a->step, b->step);
    ASSERT_EQ_INT(scenario_worker(&sc, 4)->step, a->step);
    ASSERT_EQ_INT(a->epoch_checks, 2);
    ASSERT_EQ_INT(hv__rdzv_local_store_done_count(sc.store), 3);
    // The survivors' rollback reported what all ranks had handed out since the commit: whole
    // windows of the global batch (24), not a rank's share (8); none when the failure reached
    // them at the check right after a commit, one for the step in flight, two when a rank had
    // drawn the next.
    uint64_t redone = hv__rdzv_local_store_redone(sc.store);
    ASSERT_TRUE(redone == 0 || redone == 24 || redone == 48);
    scenario_fini(&sc);
}

/* A partition's first commit exchanges what every rank handed out and checks it against the
 * rank's own windows; the commits after it mark the windows without a collective (no round).
 * Ranks whose samplers disagree (another seed) fail that first commit with HV_EPROTO. */
static void test_sampler_commit(void) {
    for (int differ = 0; differ <= 1; differ++) {
        scenario_t sc;
        scenario_init(&sc, 1000, train_two_commits);
        sc.with_sampler = 1;
        sc.samples = 500;
        sc.batch = 20;
        sc.seed_differs = differ;
        scenario_run(&sc, 2);
        for (uint64_t id = 1; id <= 2; id++) {
            worker_t *w = scenario_worker(&sc, id);
            ASSERT_TRUE(w != NULL);
            if (differ) {
                ASSERT_RC(w->fail_rc, HV_EPROTO);
                continue;
            }
            ASSERT_RC(w->run_rc, HV_OK);
            ASSERT_RC(w->fail_rc, HV_OK);
            ASSERT_EQ_INT(w->step, 0);    // the second commit ran no round
            ASSERT_EQ_INT(w->idxsum, 40); // two windows of 20 processed
            ASSERT_EQ_INT(w->epoch, 0);   // none twice
        }
        scenario_fini(&sc);
    }
}

/* A hello of a stale generation (or another world) is refused; the current one is accepted. */
static void test_stale_hello(void) {
    hv__tcp_listener_t *lst = NULL;
    ASSERT_OK(hv__tcp_listen("127.0.0.1:0", &lst));
    int port = hv__tcp_listener_port(lst);
    hv__tcp_ident_t cur = {
        .world_id = 77, .generation = 2, .rank = 0, .left_rank = 0, .right_rank = 0};
    // Stale connections queue first: generation 1 of this world, and generation 2 of another.
    int stale[2];
    for (int k = 0; k < 2; k++) {
        hv__tcp_ident_t old = cur;
        if (k == 0) {
            old.generation = 1;
        } else {
            old.world_id = 78;
        }
        unsigned char hello[HV__TCP_HELLO_LEN];
        hv__tcp_hello(&old, hello);
        stale[k] = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ASSERT_TRUE(connect(stale[k], (struct sockaddr *)&sa, sizeof(sa)) == 0);
        ASSERT_TRUE(write(stale[k], hello, sizeof(hello)) == (ssize_t)sizeof(hello));
    }
    // A one-rank ring connects to itself: its own hello is the one it must accept.
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    hv__link_t *l = NULL;
    ASSERT_OK(hv__tcp_link_create(lst, addr, &cur, NULL, (int)hvtest_scale(10000), &l));
    for (int k = 0; k < 2; k++) {
        // The listener closed the stale connections: EOF (or a reset), never data.
        struct timeval tv = {.tv_sec = 10};
        setsockopt(stale[k], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        char c;
        ssize_t r = recv(stale[k], &c, 1, 0);
        ASSERT_TRUE(r == 0 || (r < 0 && errno == ECONNRESET));
        close(stale[k]);
    }
    l->ops->destroy(l);
    hv__tcp_listener_destroy(lst);
}

/* The same failure and growth with the model's allreduce on device memory through NCCL: each
 * reset aborts the round's communicator and the next round builds a new one from a unique id
 * published under that round's key (hv.nccl.<generation>). Needs 3 GPUs (or the stand-in). */
static void test_nccl_reset(void) {
    int have = hv__gpu_count();
    if (have < 3) {
        HVT_SKIP("needs 3 CUDA devices, %d visible", have);
        return;
    }
    scenario_t sc;
    scenario_init(&sc, 1, train_model);
    g_use_nccl = 1;
    sc.nccl = 1;
    sc.steps = 16;
    sc.fail_id = 3;
    sc.fail_step = 4;
    sc.grow_id = 4;
    sc.grow_step = 8;
    sc.wait_gen = 3;
    sc.wait_step = 9;
    scenario_run(&sc, 3);
    g_use_nccl = 0;
    ASSERT_RC(scenario_worker(&sc, 3)->run_rc, HV_EINTERNAL);
    expect_finished(&sc, (const uint64_t[]){1, 2, 4}, 3);
    for (uint64_t id = 1; id <= 2; id++) {
        worker_t *w = scenario_worker(&sc, id);
        ASSERT_EQ_INT(w->resets, 2);
        ASSERT_EQ_INT(w->rollbacks, 1);
        ASSERT_EQ_INT(w->infos[1].new_size, 3);
        ASSERT_EQ_INT(w->reset_step, 9);
    }
    scenario_fini(&sc);
}

/* Checkpoint files: a saved state loads back into a fresh one with the same registrations (in
 * another order); a file of another state, a damaged one (any bit) and a missing one change
 * nothing; a file of the first format (FNV-1a trailer) still loads. */
static void test_checkpoint(void) {
    char dir[] = "/tmp/hv-ckpt-XXXXXX";
    ASSERT_TRUE(mkdtemp(dir) != NULL);
    char path[64], bad[80];
    snprintf(path, sizeof(path), "%s/ck", dir);
    snprintf(bad, sizeof(bad), "%s/bad", dir);
    float w[100];
    uint64_t epoch = 7, step = 3;
    for (int i = 0; i < 100; i++) {
        w[i] = (float)i * 0.5f;
    }
    hv_state_t *a = NULL, *b = NULL, *c = NULL;
    ASSERT_EQ_INT(hv_state_create(&a), HV_OK);
    ASSERT_EQ_INT(hv_state_add_buffer(a, "w", w, sizeof(w)), HV_OK);
    ASSERT_EQ_INT(hv_state_add_u64(a, "epoch", &epoch), HV_OK);
    ASSERT_EQ_INT(hv_state_add_u64(a, "step", &step), HV_OK);
    ASSERT_EQ_INT(hv_state_save(a, path), HV_OK);

    float w2[100] = {0};
    uint64_t e2 = 0, s2 = 0;
    ASSERT_EQ_INT(hv_state_create(&b), HV_OK);
    ASSERT_EQ_INT(hv_state_add_u64(b, "step", &s2), HV_OK);
    ASSERT_EQ_INT(hv_state_add_buffer(b, "w", w2, sizeof(w2)), HV_OK);
    ASSERT_EQ_INT(hv_state_add_u64(b, "epoch", &e2), HV_OK);
    ASSERT_EQ_INT(hv_state_load(b, path), HV_OK);
    ASSERT_EQ_INT((int)e2, 7);
    ASSERT_EQ_INT((int)s2, 3);
    ASSERT_TRUE(memcmp(w, w2, sizeof(w)) == 0);

    /* Another state (a buffer of another size): refused, nothing changed. */
    float small[10] = {0};
    uint64_t e3 = 99;
    ASSERT_EQ_INT(hv_state_create(&c), HV_OK);
    ASSERT_EQ_INT(hv_state_add_buffer(c, "w", small, sizeof(small)), HV_OK);
    ASSERT_EQ_INT(hv_state_add_u64(c, "epoch", &e3), HV_OK);
    ASSERT_EQ_INT(hv_state_add_u64(c, "step", &e3), HV_OK);
    ASSERT_EQ_INT(hv_state_load(c, path), HV_EINVAL);
    ASSERT_EQ_INT((int)e3, 99);

    /* A damaged file (one byte flipped) and a truncated one are refused. */
    char *data = NULL;
    size_t len = 0;
    ASSERT_EQ_INT(hv_read_file(path, 1 << 20, &data, &len), HV_OK);
    data[len / 2] ^= 1;
    ASSERT_EQ_INT(hv_write_file_atomic(bad, data, len, 0600), HV_OK);
    e2 = 0;
    ASSERT_EQ_INT(hv_state_load(b, bad), HV_EINVAL);
    ASSERT_EQ_INT((int)e2, 0);
    data[len / 2] ^= 1;
    ASSERT_EQ_INT(hv_write_file_atomic(bad, data, len - 9, 0600), HV_OK);
    ASSERT_EQ_INT(hv_state_load(b, bad), HV_EINVAL);
    /* One bit flipped, the lowest or the highest of a byte, anywhere from the header through the
     * data to the trailer: refused. */
    for (size_t i = 0, k = 0; i < len; i = i + len / 16 < len - 1 ? i + len / 16 : i + 1, k++) {
        int bit = k % 2 ? 7 : 0;
        data[i] ^= (char)(1 << bit);
        ASSERT_EQ_INT(hv_write_file_atomic(bad, data, len, 0600), HV_OK);
        ASSERT_EQ_INT(hv_state_load(b, bad), HV_EINVAL);
        data[i] ^= (char)(1 << bit);
    }
    /* A file of the first format ("HVSTATE1", a byte-wise FNV-1a trailer) still loads. */
    memcpy(data, "HVSTATE1", 8);
    uint64_t fnv = 1469598103934665603ULL;
    for (size_t i = 0; i + 8 < len; i++) {
        fnv = (fnv ^ (unsigned char)data[i]) * 1099511628211ULL;
    }
    memcpy(data + len - 8, &fnv, 8);
    ASSERT_EQ_INT(hv_write_file_atomic(bad, data, len, 0600), HV_OK);
    e2 = 0;
    ASSERT_EQ_INT(hv_state_load(b, bad), HV_OK);
    ASSERT_EQ_INT((int)e2, 7);
    data[len / 2] ^= 1;
    ASSERT_EQ_INT(hv_write_file_atomic(bad, data, len, 0600), HV_OK);
    ASSERT_EQ_INT(hv_state_load(b, bad), HV_EINVAL);
    hv_free(data);
    ASSERT_EQ_INT(hv_state_load(b, "/nonexistent/ck"), HV_ENOTFOUND);
    /* The file is private to the job's user. */
    struct stat sb;
    ASSERT_EQ_INT(stat(path, &sb), 0);
    ASSERT_EQ_INT((int)(sb.st_mode & 0777), 0600);
    hv_state_destroy(a);
    hv_state_destroy(b);
    hv_state_destroy(c);
    unlink(path);
    unlink(bad);
    rmdir(dir);
}

/* Every commit's step rewrites the whole large buffer and commits at once; the copier (at every
 * commit it is idle for) fills each copy from the lent snapshots while training goes on: every
 * copy is one commit's whole state (never a later step's words in it), and training ends exact. */
static hv_err train_copies(hv_state_t *st, void *ud) {
    worker_t *w = ud;
    while (w->step < w->sc->steps && atomic_load(&g_copies_ok) + atomic_load(&g_copies_bad) < 6) {
        w->step++;
        for (size_t i = 0; i < COPY_BIG; i++) {
            g_big[i] = (uint32_t)w->step;
        }
        for (int i = 0; i < K; i++) {
            w->w[i] += (float)(w->step - 1 + (uint64_t)i);
        }
        T_CHECK(hv_state_commit(st) == HV_OK);
    }
    return HV_OK;
}

static void test_copies(void) {
    char dir[] = "/tmp/hv-copies-XXXXXX";
    ASSERT_TRUE(mkdtemp(dir) != NULL);
    snprintf(g_copy_path, sizeof(g_copy_path), "%s/copy", dir);
    setenv("HV_STATE_COPY_MIN_MS", "0", 1);
    setenv("HV_STATE_COPY_FACTOR", "0", 1);
    scenario_t sc;
    scenario_init(&sc, 1000, train_copies);
    sc.copies = 1;
    sc.steps = 100000; /* at most: the training ends once 6 copies arrived */
    scenario_run(&sc, 1);
    unsetenv("HV_STATE_COPY_MIN_MS");
    unsetenv("HV_STATE_COPY_FACTOR");
    worker_t *w = scenario_worker(&sc, 1);
    ASSERT_TRUE(w != NULL);
    ASSERT_EQ_INT(w->run_rc, HV_OK);
    ASSERT_TRUE(model_ok(w->w, w->step));
    ASSERT_EQ_INT(atomic_load(&g_copies_bad), 0);
    ASSERT_TRUE(atomic_load(&g_copies_ok) >= 5);
    scenario_fini(&sc);
    unlink(g_copy_path);
    rmdir(dir);
}

static const hvtest_case_t cases[] = {
    {"checkpoint", test_checkpoint},
    {"copies", test_copies},
    {"roundtrip", test_roundtrip},
    {"steady", test_steady},
    {"failure", test_failure},
    {"failure_push", test_failure_push},
    {"growth", test_growth},
    {"ghost", test_ghost},
    {"drain", test_drain},
    {"job_end", test_job_end},
    {"sampler", test_sampler},
    {"sampler_commit", test_sampler_commit},
    {"stale_hello", test_stale_hello},
    {"nccl_reset", test_nccl_reset},
};

HVTEST_MAIN(cases)
