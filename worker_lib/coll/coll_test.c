/*
 * coll_test: collectives end to end inside one process: N ranks run as threads, each with its
 * own world (rendezvous through rdzv_local, data plane over 127.0.0.1), and compare what they
 * get with a reference computed here. Covers every dtype x op, in and out of place, counts 0, 1,
 * a prime and large, 1 to 8 ranks, named async operations submitted in different orders,
 * 1000 tensors in one step, broadcast, allgather, barrier, argument errors, and failures: a rank
 * that dies mid-allreduce, a stalled peer, re-initialisation afterwards; join (ranks with less
 * data contribute zeros until every rank joined); named blocking calls among async ones in
 * different orders, neither they nor a wait held back by the fusion cycle.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "hvtest.h"
#include "log.h"
#include "mem.h"
#include "rdzv.h"
#include "reduce.h"
#include "transport_shm.h"
#include "transport_tcp.h"
#include "world.h"

/* ---- harness: run a function on N ranks ------------------------------------------------------ */

/* Transport mode of the next run_ranks: shared-memory ring size (0: TCP only), and how many
 * consecutive ranks share a host name (0: all on one host). */
static size_t g_shm_bytes;
static int g_ranks_per_host;
static int g_hier;          // 1: hierarchical mode, used for every allreduce (min bytes 1)
static uint32_t g_cycle_us; // the engine's fusion cycle (0: the default, 1 ms)

typedef struct rank_ctx_s rank_ctx_t;
typedef void (*rank_fn)(rank_ctx_t *c);

struct rank_ctx_s {
    int rank, size;
    hv__world_t *w;
    hv__engine_t *e;
    void *arg;
    rank_fn fn;
    hv__rdzv_local_store_t *store;
    uint32_t peer_timeout_ms;
    uint64_t fusion_threshold;
    const char *host;
    hv_err create_rc;
};

static void *rank_main(void *arg) {
    rank_ctx_t *c = arg;
    char host[32] = "h0";
    if (g_ranks_per_host > 0) {
        snprintf(host, sizeof(host), "h%d", c->rank / g_ranks_per_host);
    }
    hv__world_opts_t o = {
        .bind_addr = "127.0.0.1:0",
        .host_name = c->host ? c->host : host,
        .shm_bytes = g_shm_bytes,
        .hierarchical = g_hier,
        .hier_min_bytes = 1,
        .rdzv_timeout_ms = (uint32_t)hvtest_scale(20000),
        .connect_timeout_ms = (uint32_t)hvtest_scale(20000),
        .peer_timeout_ms = c->peer_timeout_ms ? c->peer_timeout_ms : 5000,
        .spin_us = UINT32_MAX,
        .fusion_threshold = c->fusion_threshold,
        .cycle_time_us = g_cycle_us,
        .small_bytes = SIZE_MAX,
        .spec_bytes = SIZE_MAX,
    };
    c->create_rc = hv__rdzv_local_client(c->store, c->rank, &o.rdzv);
    if (c->create_rc == HV_OK) {
        c->create_rc = hv__world_create(&o, &c->w);
    }
    if (c->create_rc != HV_OK) {
        HVT_FAIL("rank %d: world create: %s", c->rank, hv_strerror(c->create_rc));
        return NULL;
    }
    c->e = hv__world_engine(c->w);
    c->fn(c);
    hv__world_destroy(c->w, 1);
    return NULL;
}

/* Runs fn on n ranks; ctx_init (optional) adjusts each rank's context first. */
static void run_ranks(int n, rank_fn fn, void *arg, uint32_t peer_timeout_ms) {
    hv_log_init("coll_test"); // HV_LOG_LEVEL / HV_LOG_SUBSYS for debugging
    hv__rdzv_local_store_t *store = NULL;
    if (hv__rdzv_local_store_create(n, &store) != HV_OK) {
        HVT_FAIL("store");
        return;
    }
    rank_ctx_t cs[16];
    pthread_t th[16];
    for (int i = 0; i < n; i++) {
        cs[i] = (rank_ctx_t){.rank = i,
                             .size = n,
                             .arg = arg,
                             .fn = fn,
                             .store = store,
                             .peer_timeout_ms = peer_timeout_ms};
        pthread_create(&th[i], NULL, rank_main, &cs[i]);
    }
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
    }
    hv__rdzv_local_store_destroy(store);
}

/* ---- values with exact results --------------------------------------------------------------- */

static double val_for(hv_op op, hv_dtype dt, int rank, size_t i) {
    switch (op) {
    case HV_PRODUCT:
        return (double)(1 + ((i + (size_t)rank) % 2)); // 1 or 2: products stay exact
    case HV_MIN:
    case HV_MAX:
        return (double)((i * 7 + (size_t)rank * 13) % 50) - (dt == HV_UINT8 ? 0 : 20);
    default:
        return (double)((i % 7) + (size_t)rank); // sums stay small and exact
    }
}

static int is_int(hv_dtype dt) { return dt == HV_INT32 || dt == HV_INT64 || dt == HV_UINT8; }

/* The expected result at element i (independent of the reduction order: exact values). */
static double expect(hv_op op, hv_dtype dt, int n, size_t i) {
    double acc = val_for(op, dt, 0, i);
    for (int r = 1; r < n; r++) {
        double v = val_for(op, dt, r, i);
        switch (op) {
        case HV_PRODUCT:
            acc *= v;
            break;
        case HV_MIN:
            acc = v < acc ? v : acc;
            break;
        case HV_MAX:
            acc = v > acc ? v : acc;
            break;
        default:
            acc += v;
            break;
        }
    }
    if (op == HV_AVG) {
        acc = is_int(dt) ? trunc(acc / n) : acc / n;
    }
    return acc;
}

/* val_for, and so expect, repeat every EXPECT_PERIOD elements (2, 50 and 7 divide it): check_buf
 * works out one period of expected values and compares every element with it. (expect for each
 * element, on every rank, cost count x ranks^2 val_for calls: most of the sweeps' time, minutes
 * of CPU under the sanitizers.) */
#define EXPECT_PERIOD 350

/* Checks buf against the expected values; returns 0 and reports on the first mismatch. */
static int check_buf(int rank, hv_op op, hv_dtype dt, int n, const void *buf, size_t count) {
    double want_at[EXPECT_PERIOD];
    size_t period = count < EXPECT_PERIOD ? count : EXPECT_PERIOD;
    for (size_t i = 0; i < period; i++) {
        for (int r = 0; r < n; r++) { /* the period holds: a change to val_for must keep it */
            if (val_for(op, dt, r, i) != val_for(op, dt, r, i + EXPECT_PERIOD)) {
                HVT_FAIL("val_for does not repeat every %d elements", EXPECT_PERIOD);
                return 0;
            }
        }
        double want = expect(op, dt, n, i);
        if (dt == HV_FLOAT16 || dt == HV_BFLOAT16) {
            // The expected value itself rounded through the type (AVG may be inexact there).
            void *tmp = &(uint16_t){0};
            hvtest_store(dt, tmp, 0, want);
            want = hvtest_load(dt, tmp, 0);
        } else if (dt == HV_FLOAT32) {
            want = (float)want;
        }
        want_at[i] = want;
    }
    for (size_t i = 0; i < count; i++) {
        double got = hvtest_load(dt, buf, i), want = want_at[i % EXPECT_PERIOD];
        if (got != want) {
            HVT_FAIL("rank %d of %d: %s %s count %zu: [%zu] = %.9g, want %.9g", rank, n,
                     hv__dtype_name(dt), hv__op_name(op), count, i, got, want);
            return 0;
        }
    }
    return 1;
}

/* ---- cases ----------------------------------------------------------------------------------- */

typedef struct sweep_arg_s {
    const size_t *counts;
    size_t ncounts;
    int all_types;
} sweep_arg_t;

static void rank_sweep(rank_ctx_t *c) {
    const sweep_arg_t *a = c->arg;
    for (int dt = 0; dt < HV__DTYPE_COUNT; dt++) {
        if (!a->all_types && dt != HV_FLOAT32 && dt != HV_FLOAT16) {
            continue;
        }
        size_t es = hv_dtype_size((hv_dtype)dt);
        for (int op = 0; op < HV__OP_COUNT; op++) {
            for (size_t k = 0; k < a->ncounts; k++) {
                size_t count = a->counts[k];
                unsigned char *in = hv_malloc(count * es + 1), *out = hv_malloc(count * es + 1);
                for (size_t i = 0; i < count; i++) {
                    hvtest_store((hv_dtype)dt, in, i, val_for((hv_op)op, (hv_dtype)dt, c->rank, i));
                }
                // Out of place, then in place on the result's copy of the input.
                hv__op_desc_t d = {.kind = HV__OP_ALLREDUCE,
                                   .in = in,
                                   .out = out,
                                   .count = count,
                                   .dtype = (hv_dtype)dt,
                                   .op = (hv_op)op};
                hv_err rc = hv__engine_run(c->e, &d);
                int ok =
                    rc == HV_OK && check_buf(c->rank, (hv_op)op, (hv_dtype)dt, c->size, out, count);
                if (rc != HV_OK) {
                    HVT_FAIL("rank %d: allreduce %s %s count %zu: %s", c->rank,
                             hv__dtype_name((hv_dtype)dt), hv__op_name((hv_op)op), count,
                             hv_strerror(rc));
                }
                if (ok) {
                    d.in = d.out = in;
                    rc = hv__engine_run(c->e, &d);
                    ok = rc == HV_OK &&
                         check_buf(c->rank, (hv_op)op, (hv_dtype)dt, c->size, in, count);
                    if (rc != HV_OK) {
                        HVT_FAIL("rank %d: in-place allreduce: %s", c->rank, hv_strerror(rc));
                    }
                }
                hv_free(in);
                hv_free(out);
                if (!ok) {
                    return;
                }
            }
        }
    }
}

static void test_types_ops(void) {
    // 0, 1, a prime, not divisible by 2..8, and one past the small-message path.
    static const size_t counts[] = {0, 1, 1031, 5003, 40009};
    sweep_arg_t a = {counts, sizeof(counts) / sizeof(counts[0]), 1};
    for (int n = 1; n <= 3 && !hvtest_failed; n++) {
        run_ranks(n, rank_sweep, &a, 0);
    }
}

static void test_sizes_1_to_8(void) {
    static const size_t counts[] = {1, 7, 4099, 100003};
    sweep_arg_t a = {counts, sizeof(counts) / sizeof(counts[0]), 0};
    for (int n = 4; n <= 8 && !hvtest_failed; n++) {
        run_ranks(n, rank_sweep, &a, 0);
    }
}

/* Big buffers: every element is checked, and results must be identical on all ranks. */
typedef struct big_arg_s {
    size_t count;
    _Atomic(uint64_t) digest[8];
} big_arg_t;

static void rank_big(rank_ctx_t *c) {
    big_arg_t *a = c->arg;
    float *buf = hv_malloc(a->count * sizeof(float));
    ASSERT_TRUE(buf != NULL);
    for (size_t i = 0; i < a->count; i++) {
        buf[i] = (float)((i % 1000) + (size_t)c->rank);
    }
    hv__op_desc_t d = {.kind = HV__OP_ALLREDUCE,
                       .in = buf,
                       .out = buf,
                       .count = a->count,
                       .dtype = HV_FLOAT32,
                       .op = HV_SUM};
    hv_err rc = hv__engine_run(c->e, &d);
    if (rc != HV_OK) {
        HVT_FAIL("rank %d: %s", c->rank, hv_strerror(rc));
        hv_free(buf);
        return;
    }
    float base = (float)(c->size * (c->size - 1) / 2);
    for (size_t i = 0; i < a->count; i++) {
        float want = (float)(i % 1000) * (float)c->size + base;
        if (buf[i] != want) {
            HVT_FAIL("rank %d: [%zu] = %g, want %g", c->rank, i, (double)buf[i], (double)want);
            break;
        }
    }
    hv_free(buf);
}

static void test_big(void) {
    big_arg_t a = {.count = (64u << 20) / sizeof(float)};
    run_ranks(2, rank_big, &a, 0);
    a.count = (8u << 20) / sizeof(float) + 3;
    if (!hvtest_failed) {
        run_ranks(4, rank_big, &a, 0);
    }
}

/* Random floats (inexact sums): every rank must get bit-identical results. */
typedef struct det_arg_s {
    size_t count;
    uint64_t sums[8];
} det_arg_t;

static void rank_determinism(rank_ctx_t *c) {
    det_arg_t *a = c->arg;
    float *buf = hv_malloc(a->count * sizeof(float));
    uint64_t s = 0x12345 + (uint64_t)c->rank * 7919;
    for (size_t i = 0; i < a->count; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        buf[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5) * 1000.0f;
    }
    hv__op_desc_t d = {.kind = HV__OP_ALLREDUCE,
                       .in = buf,
                       .out = buf,
                       .count = a->count,
                       .dtype = HV_FLOAT32,
                       .op = HV_AVG};
    hv_err rc = hv__engine_run(c->e, &d);
    if (rc != HV_OK) {
        HVT_FAIL("rank %d: %s", c->rank, hv_strerror(rc));
    }
    uint64_t h = 1469598103934665603ull;
    const unsigned char *p = (const unsigned char *)buf;
    for (size_t i = 0; i < a->count * sizeof(float); i++) {
        h = (h ^ p[i]) * 1099511628211ull;
    }
    a->sums[c->rank] = h;
    hv_free(buf);
}

static void test_determinism(void) {
    for (int n = 2; n <= 5; n++) {
        size_t counts[] = {33, 50001};
        for (size_t k = 0; k < 2; k++) {
            det_arg_t a = {.count = counts[k]};
            run_ranks(n, rank_determinism, &a, 0);
            for (int r = 1; r < n; r++) {
                if (a.sums[r] != a.sums[0]) {
                    HVT_FAIL("%d ranks, %zu floats: rank %d's result differs from rank 0's", n,
                             counts[k], r);
                    return;
                }
            }
        }
    }
}

/* Named async tensors submitted in a different random order on every rank, several steps. */
#define ORDER_T 60
static void rank_orders(rank_ctx_t *c) {
    static const hv_dtype types[] = {HV_FLOAT32, HV_INT32, HV_FLOAT64, HV_BFLOAT16};
    float *bufs[ORDER_T];
    size_t counts[ORDER_T];
    int perm[ORDER_T];
    uint64_t s = 99 + (uint64_t)c->rank * 1000003;
    for (int t = 0; t < ORDER_T; t++) {
        counts[t] = (size_t)(t * 37 % 2000) + (t % 3 == 0 ? 20000 : 1);
        bufs[t] = hv_malloc(counts[t] * 8);
        perm[t] = t;
    }
    for (int step = 0; step < 4 && !hvtest_failed; step++) {
        for (int t = ORDER_T - 1; t > 0; t--) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            int j = (int)((s >> 33) % (uint64_t)(t + 1));
            int x = perm[t];
            perm[t] = perm[j];
            perm[j] = x;
        }
        hv_handle_t h[ORDER_T];
        for (int k = 0; k < ORDER_T; k++) {
            int t = perm[k];
            hv_dtype dt = types[t % 4];
            hv_op op = (hv_op)(t % HV__OP_COUNT);
            for (size_t i = 0; i < counts[t]; i++) {
                hvtest_store(dt, bufs[t], i, val_for(op, dt, c->rank, i));
            }
            char name[32];
            snprintf(name, sizeof(name), "grad.%d", t);
            hv__op_desc_t d = {.kind = HV__OP_ALLREDUCE,
                               .name = name,
                               .in = bufs[t],
                               .out = bufs[t],
                               .count = counts[t],
                               .dtype = dt,
                               .op = op};
            ASSERT_OK(hv__engine_submit(c->e, &d, 1, &h[k]));
            if (k % 17 == 5) {
                usleep(200); // let some rounds start with only part of the step submitted
            }
        }
        for (int k = 0; k < ORDER_T; k++) {
            ASSERT_OK(hv__engine_wait(c->e, h[k]));
        }
        for (int t = 0; t < ORDER_T; t++) {
            if (!check_buf(c->rank, (hv_op)(t % HV__OP_COUNT), types[t % 4], c->size, bufs[t],
                           counts[t])) {
                break;
            }
        }
    }
    for (int t = 0; t < ORDER_T; t++) {
        hv_free(bufs[t]);
    }
}

static void test_random_orders(void) {
    for (int n = 2; n <= 4 && !hvtest_failed; n++) {
        run_ranks(n, rank_orders, NULL, 0);
    }
}

/* 1000 small tensors in one step: few fused collectives, right results. */
#define MANY 1000
static void rank_many(rank_ctx_t *c) {
    float *buf = hv_malloc(MANY * 64 * sizeof(float));
    hv_tensor_t *ts = hv_calloc(MANY, sizeof(*ts));
    char(*names)[16] = hv_malloc(MANY * 16);
    for (int step = 0; step < 3 && !hvtest_failed; step++) {
        hv__engine_stats_t st0;
        hv__engine_stats(c->e, &st0);
        hv_handle_t hs[MANY];
        for (int t = 0; t < MANY; t++) {
            int k = c->rank % 2 ? MANY - 1 - t : t; // odd ranks submit in reverse
            float *p = buf + (size_t)k * 64;
            for (int i = 0; i < 64; i++) {
                p[i] = (float)(k % 10 + c->rank);
            }
            snprintf(names[k], 16, "t%d", k);
            hv__op_desc_t d = {.kind = HV__OP_ALLREDUCE,
                               .name = names[k],
                               .in = p,
                               .out = p,
                               .count = 64,
                               .dtype = HV_FLOAT32,
                               .op = HV_SUM};
            ASSERT_OK(hv__engine_submit(c->e, &d, 1, &hs[t]));
        }
        for (int t = 0; t < MANY; t++) {
            ASSERT_OK(hv__engine_wait(c->e, hs[t]));
        }
        for (int k = 0; k < MANY; k++) {
            float want = (float)((k % 10) * c->size + c->size * (c->size - 1) / 2);
            if (buf[(size_t)k * 64 + 63] != want) {
                HVT_FAIL("rank %d tensor %d: %g want %g", c->rank, k,
                         (double)buf[(size_t)k * 64 + 63], (double)want);
                return;
            }
        }
        hv__engine_stats_t st1;
        hv__engine_stats(c->e, &st1);
        if (step > 0 && st1.fused_calls - st0.fused_calls > 20) {
            HVT_FAIL("rank %d: 1000 tensors took %llu collectives (fusion not working)", c->rank,
                     (unsigned long long)(st1.fused_calls - st0.fused_calls));
        }
        if (c->rank == 0 && step == 2) {
            fprintf(stderr, "  1000 tensors, step 3: %llu rounds, %llu fused calls\n",
                    (unsigned long long)(st1.rounds - st0.rounds),
                    (unsigned long long)(st1.fused_calls - st0.fused_calls));
        }
    }
    hv_free(names);
    hv_free(ts);
    hv_free(buf);
}

static void test_many_tensors(void) { run_ranks(2, rank_many, NULL, 0); }

/* Broadcast from every root, allgather with different counts, barrier. */
static void rank_bcast_gather(rank_ctx_t *c) {
    int n = c->size;
    for (int root = 0; root < n; root++) {
        size_t count = 70001;
        int32_t *b = hv_malloc(count * 4);
        for (size_t i = 0; i < count; i++) {
            b[i] = c->rank == root ? (int32_t)(i * 3 + (size_t)root) : -1;
        }
        hv__op_desc_t d = {.kind = HV__OP_BROADCAST,
                           .in = b,
                           .out = b,
                           .count = count,
                           .dtype = HV_INT32,
                           .root = root};
        hv_err rc = hv__engine_run(c->e, &d);
        int bad = rc != HV_OK;
        for (size_t i = 0; i < count && !bad; i++) {
            if (b[i] != (int32_t)(i * 3 + (size_t)root)) {
                HVT_FAIL("rank %d: broadcast from %d: [%zu] = %d", c->rank, root, i, b[i]);
                bad = 1;
            }
        }
        hv_free(b);
        if (rc != HV_OK) {
            HVT_FAIL("rank %d: broadcast: %s", c->rank, hv_strerror(rc));
        }
        if (bad) {
            return;
        }
    }
    // Allgather: rank r contributes 3 (r + 1) doubles valued r * 1000 + i.
    size_t mine = 3 * (size_t)(c->rank + 1), total = 3 * (size_t)(n * (n + 1) / 2);
    double *in = hv_malloc(mine * 8), *out = hv_malloc(total * 8);
    for (size_t i = 0; i < mine; i++) {
        in[i] = c->rank * 1000.0 + (double)i;
    }
    size_t counts[16];
    hv__op_desc_t d = {.kind = HV__OP_ALLGATHER,
                       .in = in,
                       .out = out,
                       .count = mine,
                       .dtype = HV_FLOAT64,
                       .out_cap = total,
                       .counts = counts};
    ASSERT_OK(hv__engine_run(c->e, &d));
    size_t k = 0;
    for (int r = 0; r < n; r++) {
        ASSERT_EQ_INT(counts[r], 3 * (r + 1));
        for (size_t i = 0; i < counts[r]; i++, k++) {
            if (out[k] != r * 1000.0 + (double)i) {
                HVT_FAIL("rank %d: allgather [%zu] = %g", c->rank, k, out[k]);
                return;
            }
        }
    }
    // A rank whose buffer is too small makes every rank fail the same way.
    d.out_cap = c->rank == n - 1 ? total - 1 : total;
    ASSERT_RC(hv__engine_run(c->e, &d), HV_ETOOBIG);
    hv_free(in);
    hv_free(out);
    hv__op_desc_t bar = {.kind = HV__OP_BARRIER};
    for (int i = 0; i < 5; i++) {
        ASSERT_OK(hv__engine_run(c->e, &bar));
    }
}

static void test_bcast_gather_barrier(void) {
    for (int n = 1; n <= 4 && !hvtest_failed; n++) {
        run_ranks(n, rank_bcast_gather, NULL, 0);
    }
}

/* Wrong use is an error, never a crash. */
static void rank_errors(rank_ctx_t *c) {
    float x[4] = {1, 2, 3, 4};
    hv__op_desc_t d = {.kind = HV__OP_ALLREDUCE,
                       .in = x,
                       .out = x,
                       .count = 4,
                       .dtype = (hv_dtype)42,
                       .op = HV_SUM};
    ASSERT_RC(hv__engine_run(c->e, &d), HV_EINVAL);
    d.dtype = HV_FLOAT32;
    d.op = (hv_op)9;
    ASSERT_RC(hv__engine_run(c->e, &d), HV_EINVAL);
    d.op = HV_SUM;
    d.out = NULL;
    ASSERT_RC(hv__engine_run(c->e, &d), HV_EINVAL);
    d.out = x;
    hv__op_desc_t b = {.kind = HV__OP_BROADCAST,
                       .in = x,
                       .out = x,
                       .count = 4,
                       .dtype = HV_FLOAT32,
                       .root = c->size};
    ASSERT_RC(hv__engine_run(c->e, &b), HV_EINVAL);
    // Duplicate pending name, stale handle.
    hv_handle_t h1, h2;
    d.name = "dup";
    ASSERT_OK(hv__engine_submit(c->e, &d, 1, &h1));
    ASSERT_RC(hv__engine_submit(c->e, &d, 1, &h2), HV_EEXIST);
    ASSERT_OK(hv__engine_wait(c->e, h1));
    ASSERT_RC(hv__engine_wait(c->e, h1), HV_ENOTFOUND);
    ASSERT_RC(hv__engine_wait(c->e, 0), HV_ENOTFOUND);
    int done = 0;
    ASSERT_RC(hv__engine_test(c->e, 12345, &done), HV_ENOTFOUND);
    // Ranks that disagree about a tensor both get HV_EPROTO; the engine stays usable.
    float y[12] = {0};
    hv__op_desc_t m = {.kind = HV__OP_ALLREDUCE,
                       .name = "mismatch",
                       .in = y,
                       .out = y,
                       .count = c->rank == 0 ? 10 : 12,
                       .dtype = HV_FLOAT32,
                       .op = HV_SUM};
    ASSERT_RC(hv__engine_run(c->e, &m), HV_EPROTO);
    d.name = NULL;
    ASSERT_OK(hv__engine_run(c->e, &d));
    // hv_test polls to completion.
    d.name = "polled";
    ASSERT_OK(hv__engine_submit(c->e, &d, 1, &h1));
    double t0 = hvtest_now();
    hv_err rc = HV_OK;
    for (done = 0; !done && hvtest_now() - t0 < hvtest_scale(10);) {
        rc = hv__engine_test(c->e, h1, &done);
    }
    ASSERT_TRUE(done);
    ASSERT_OK(rc);
}

static void test_errors(void) { run_ranks(2, rank_errors, NULL, 0); }

/* A rank dies in the middle of a large allreduce: the others fail fast, then re-initialise. */
typedef struct kill_arg_s {
    _Atomic(double) fail_at[8];
    hv_err rc[8];
    double started;
    size_t n_broken[8];    // hv__world_broken_peers after the failure, per rank
    uint64_t broken[8][6]; // the worker ids it names
    uint64_t dead_id;      // the worker id of the rank that died
} kill_arg_t;

typedef struct killer_s {
    rank_ctx_t *c;
    kill_arg_t *a;
} killer_t;

static void *killer(void *arg) {
    killer_t *k = arg;
    usleep(8000); // every rank is inside the allreduce's data phase by now
    k->a->started = hvtest_now();
    hv__world_abort(k->c->w, HV_ECANCELED, "test: rank dies"); // sockets shut down at once
    return NULL;
}

static void rank_kill(rank_ctx_t *c) {
    kill_arg_t *a = c->arg;
    size_t count = (64u << 20) / 4;
    float *buf = hv_calloc(count, sizeof(float));
    hv__op_desc_t d = {.kind = HV__OP_ALLREDUCE,
                       .in = buf,
                       .out = buf,
                       .count = count,
                       .dtype = HV_FLOAT32,
                       .op = HV_SUM};
    ASSERT_OK(hv__engine_run(c->e, &d)); // warm: everybody is up
    pthread_t th;
    killer_t k = {c, a};
    if (c->rank == c->size - 1) {
        pthread_create(&th, NULL, killer, &k);
    }
    a->rc[c->rank] = hv__engine_run(c->e, &d);
    a->fail_at[c->rank] = hvtest_now();
    a->n_broken[c->rank] = hv__world_broken_peers(c->w, a->broken[c->rank], 6);
    a->dead_id = hv__world_assignment(c->w)->peers[c->size - 1].worker_id;
    if (c->rank == c->size - 1) {
        pthread_join(th, NULL);
    } else if (hv__engine_run(c->e, &d) == HV_OK) { // every later call fails at once too
        HVT_FAIL("rank %d: allreduce succeeded after a peer died", c->rank);
    }
    hv_free(buf);
}

static void rank_simple(rank_ctx_t *c) {
    float x[1000];
    for (int i = 0; i < 1000; i++) {
        x[i] = (float)c->rank;
    }
    hv__op_desc_t d = {.kind = HV__OP_ALLREDUCE,
                       .in = x,
                       .out = x,
                       .count = 1000,
                       .dtype = HV_FLOAT32,
                       .op = HV_SUM};
    ASSERT_OK(hv__engine_run(c->e, &d));
    ASSERT_TRUE(x[999] == (float)(c->size * (c->size - 1) / 2));
}

static int g_kill_ranks = 3;

static void test_kill_rank(void) {
    kill_arg_t a;
    memset(&a, 0, sizeof(a));
    int n = g_kill_ranks;
    run_ranks(n, rank_kill, &a, 0);
    ASSERT_RC(a.rc[n - 1], HV_ECANCELED);
    for (int r = 0; r < n - 1; r++) {
        double dt = a.fail_at[r] - a.started;
        fprintf(stderr, "  rank %d saw %s %.1f ms after the kill\n", r, hv_errname(a.rc[r]),
                dt * 1e3);
        if (a.rc[r] != HV_EPEER) {
            HVT_FAIL("rank %d: got %s, want HV_EPEER", r, hv_errname(a.rc[r]));
        }
        if (dt > 2.0) {
            HVT_FAIL("rank %d took %.2f s to notice the dead peer (bound 2 s)", r, dt);
        }
    }
    // The rank that aborted names no neighbour; a neighbour of it names it (the other may have
    // seen its neighbour's abort first, and names that one).
    ASSERT_EQ_INT(a.n_broken[n - 1], 0);
    int named = 0;
    for (int r = 0; r < n - 1; r++) {
        for (size_t k = 0; k < a.n_broken[r]; k++) {
            named |= a.broken[r][k] == a.dead_id;
        }
    }
    ASSERT_TRUE(named);
    // Re-initialise: a fresh world works (the survivors plus a replacement).
    run_ranks(n, rank_simple, NULL, 0);
}

/* A peer that connects and then never answers: the survivor times out within the bound. */
typedef struct stall_arg_s {
    hv__rdzv_local_store_t *store;
    hv_err rc;
    double took;
    size_t n_broken; // the survivor's hv__world_broken_peers after the timeout
    uint64_t broken[6];
    uint64_t stalled_id; // the stalled rank's worker id
} stall_arg_t;

static void *stalled_peer(void *arg) {
    stall_arg_t *s = arg;
    hv__tcp_listener_t *lst = NULL;
    hv__rdzv_t rz;
    hv__rdzv_assignment_t asg;
    if (hv__tcp_listen("127.0.0.1:0", &lst) != HV_OK ||
        hv__rdzv_local_client(s->store, 1, &rz) != HV_OK) {
        return NULL;
    }
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", hv__tcp_listener_port(lst));
    if (rz.ops->join(rz.ctx, addr, "h0", 0, 10000, &asg) == HV_OK) {
        hv__tcp_ident_t id = {.world_id = asg.world_id,
                              .generation = asg.generation,
                              .rank = 1,
                              .left_rank = 0,
                              .right_rank = 0};
        hv__link_t *l = NULL;
        if (hv__tcp_link_create(lst, asg.peers[0].addr, &id, NULL, 10000, &l) == HV_OK) {
            usleep((useconds_t)hvtest_scale(1.5e6)); // connected, silent
            l->ops->destroy(l);
        }
        hv__rdzv_assignment_fini(&asg);
    }
    rz.ops->destroy(rz.ctx);
    hv__tcp_listener_destroy(lst);
    return NULL;
}

static void *stall_survivor(void *arg) {
    stall_arg_t *s = arg;
    hv__world_opts_t o = {.bind_addr = "127.0.0.1:0",
                          .host_name = "h0",
                          .peer_timeout_ms = 300,
                          .spin_us = UINT32_MAX,
                          .small_bytes = SIZE_MAX,
                          .spec_bytes = SIZE_MAX};
    hv__world_t *w = NULL;
    if (hv__rdzv_local_client(s->store, 0, &o.rdzv) != HV_OK || hv__world_create(&o, &w) != HV_OK) {
        s->rc = HV_EINTERNAL;
        return NULL;
    }
    float x[100] = {0};
    hv__op_desc_t d = {.kind = HV__OP_ALLREDUCE,
                       .in = x,
                       .out = x,
                       .count = 100,
                       .dtype = HV_FLOAT32,
                       .op = HV_SUM};
    double t0 = hvtest_now();
    s->rc = hv__engine_run(hv__world_engine(w), &d);
    s->took = hvtest_now() - t0;
    s->n_broken = hv__world_broken_peers(w, s->broken, 6);
    s->stalled_id = hv__world_assignment(w)->peers[1].worker_id;
    hv__world_destroy(w, 0);
    return NULL;
}

static void test_stalled_peer(void) {
    stall_arg_t s = {0};
    ASSERT_OK(hv__rdzv_local_store_create(2, &s.store));
    pthread_t a, b;
    pthread_create(&a, NULL, stall_survivor, &s);
    pthread_create(&b, NULL, stalled_peer, &s);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    hv__rdzv_local_store_destroy(s.store);
    fprintf(stderr, "  stalled peer: %s after %.0f ms (timeout 300 ms)\n", hv_errname(s.rc),
            s.took * 1e3);
    ASSERT_RC(s.rc, HV_ETIMEDOUT);
    ASSERT_TRUE(s.took >= 0.25 && s.took < hvtest_scale(1.3));
    // The silent neighbour is the broken one (both sides of a two-rank ring are that rank).
    ASSERT_EQ_INT(s.n_broken, 1);
    ASSERT_TRUE(s.broken[0] == s.stalled_id);
}

/* Both ranks have seen their operation pending before rank 0 aborts (without this, rank 0
 * could abort before rank 1 looked, and rank 1 would see the abort instead of "pending"). */
static pthread_barrier_t pending_seen;

/* Shutting down with operations pending completes them with HV_ECANCELED. */
static void rank_pending_shutdown(rank_ctx_t *c) {
    float x[8] = {0};
    hv_handle_t h;
    hv__op_desc_t d = {.kind = HV__OP_ALLREDUCE,
                       .name = c->rank == 0 ? "only-rank0" : "other",
                       .in = x,
                       .out = x,
                       .count = 8,
                       .dtype = HV_FLOAT32,
                       .op = HV_SUM};
    int done = 1;
    hv_err src = hv__engine_submit(c->e, &d, 1, &h);
    usleep(20000);
    hv_err trc = src == HV_OK ? hv__engine_test(c->e, h, &done) : src;
    pthread_barrier_wait(&pending_seen); /* reached by both ranks whatever happened */
    ASSERT_OK(src);
    ASSERT_OK(trc);
    ASSERT_EQ_INT(done, 0);
    // Rank 0 aborts: its own operations fail with HV_ECANCELED, the peer's with HV_EPEER (its
    // connection closed), both at once.
    double t0 = hvtest_now();
    hv_err want = HV_EPEER;
    if (c->rank == 0) {
        hv__engine_abort(c->e, HV_ECANCELED, "test abort");
        want = HV_ECANCELED;
    }
    ASSERT_RC(hv__engine_wait(c->e, h), want);
    ASSERT_RC(hv__engine_run(c->e, &d), want);
    ASSERT_TRUE(hvtest_now() - t0 < hvtest_scale(2.0));
}

static void test_abort_pending(void) {
    pthread_barrier_init(&pending_seen, NULL, 2);
    run_ranks(2, rank_pending_shutdown, NULL, 0);
    pthread_barrier_destroy(&pending_seen);
}

/* Fail the Nth allocation, for every N of a short session (world, blocking, async, grouped
 * collectives): every call returns HV_OK or an error (never crashes), and under ASan nothing
 * leaks. One rank: a failure on one rank of several would leave the others waiting for a
 * collective that never comes, which is the expected behaviour, not a test. */
static void test_alloc_failures(void) {
    hv_log_set_level(HV_LOG_ERROR);
    int completed = 0;
    for (long nth = 1; nth <= 400 && !completed; nth++) {
        hv__rdzv_local_store_t *store = NULL;
        ASSERT_OK(hv__rdzv_local_store_create(1, &store));
        hv__world_opts_t o = {.bind_addr = "127.0.0.1:0",
                              .host_name = "h0",
                              .spin_us = UINT32_MAX,
                              .small_bytes = SIZE_MAX,
                              .spec_bytes = SIZE_MAX};
        hv__world_t *w = NULL;
        hv_mem_fail_after(nth);
        hv_err rc = hv__rdzv_local_client(store, 0, &o.rdzv);
        if (rc == HV_OK) {
            rc = hv__world_create(&o, &w);
        }
        int steps_ok = 0;
        if (rc == HV_OK) {
            hv__engine_t *e = hv__world_engine(w);
            float x[64] = {1};
            hv__op_desc_t d = {.kind = HV__OP_ALLREDUCE,
                               .in = x,
                               .out = x,
                               .count = 64,
                               .dtype = HV_FLOAT32,
                               .op = HV_SUM};
            hv_handle_t h;
            if (hv__engine_run(e, &d) == HV_OK) {
                steps_ok++;
            }
            d.name = "a";
            if (hv__engine_submit(e, &d, 1, &h) == HV_OK && hv__engine_wait(e, h) == HV_OK) {
                steps_ok++;
            }
            hv__op_desc_t g[2] = {d, d};
            g[0].name = "g0";
            g[1].name = "g1";
            if (hv__engine_submit(e, g, 2, &h) == HV_OK && hv__engine_wait(e, h) == HV_OK) {
                steps_ok++;
            }
            hv__world_destroy(w, 1);
        } else if (rc != HV_ENOMEM) {
            HVT_FAIL("allocation %ld failing made world creation return %s", nth, hv_errname(rc));
        }
        hv_mem_fail_after(0);
        hv__rdzv_local_store_destroy(store);
        completed = steps_ok == 3 && nth > 300; // past every allocation of the session
    }
    hv_log_set_level(HV_LOG_WARN);
}

/* The same cases over shared memory (all ranks on one host), and mixed (two ranks per host:
 * shared memory inside a host, TCP between hosts). Small rings force wrap-around and full-ring
 * waits. */
static void with_shm(void (*fn)(void), size_t bytes, int per_host) {
    g_shm_bytes = bytes;
    g_ranks_per_host = per_host;
    fn();
    g_shm_bytes = 0;
    g_ranks_per_host = 0;
}

static void test_shm_types_ops(void) { with_shm(test_types_ops, 1u << 20, 0); }
static void test_shm_sizes(void) { with_shm(test_sizes_1_to_8, 64u << 10, 2); }
static void test_shm_big(void) { with_shm(test_big, 4u << 20, 0); }
static void test_shm_orders(void) { with_shm(test_random_orders, 1u << 20, 0); }
static void test_shm_bcast_gather(void) { with_shm(test_bcast_gather_barrier, 8u << 10, 0); }
static void test_shm_kill(void) { with_shm(test_kill_rank, 1u << 20, 0); }
static void test_shm_determinism(void) { with_shm(test_determinism, 64u << 10, 2); }

/* Hierarchical (2D) allreduce: hosts of 2 and of 3 ranks, over TCP and with shared memory
 * inside hosts. */
static void with_hier(void (*fn)(void), size_t shm, int per_host) {
    g_hier = 1;
    with_shm(fn, shm, per_host);
    g_hier = 0;
}

static void run_hier_sweep(void) {
    static const size_t counts[] = {0, 1, 7, 1031, 40009, 300007};
    sweep_arg_t a = {counts, sizeof(counts) / sizeof(counts[0]), 1};
    run_ranks(4, rank_sweep, &a, 0); // 2 hosts x 2 (or 4 x 1 with 1 per host: flat)
    if (!hvtest_failed && g_ranks_per_host == 2) {
        run_ranks(6, rank_sweep, &a, 0); // 3 hosts x 2
    }
    if (!hvtest_failed && g_ranks_per_host == 3) {
        run_ranks(6, rank_sweep, &a, 0); // 2 hosts x 3
    }
}

static void test_hier_tcp(void) { with_hier(run_hier_sweep, 0, 2); }
static void test_hier_shm(void) { with_hier(run_hier_sweep, 1u << 20, 3); }
static void test_hier_orders(void) { with_hier(test_random_orders, 1u << 20, 2); }
static void test_hier_kill(void) {
    g_kill_ranks = 4; // 2 hosts x 2: the victim is on the second host
    with_hier(test_kill_rank, 0, 2);
    g_kill_ranks = 3;
}
static void test_hier_determinism(void) { with_hier(test_determinism, 64u << 10, 2); }

/* Horovod's join at the engine: rank r runs r + 1 steps of a group of three named allreduces
 * (fused) while the ranks with fewer steps have joined and contribute zeros; the rank that joins
 * last is the one with the most steps; ranks joining in the same round agree on the last one;
 * a joined rank's own pending allreduce still completes with its data. */
static int join_now(rank_ctx_t *c, int *last) {
    hv__op_desc_t j = {.kind = HV__OP_JOIN, .name = "hv.join", .out = last};
    hv_err rc = hv__engine_run(c->e, &j);
    if (rc != HV_OK) {
        HVT_FAIL("rank %d: join: %s", c->rank, hv_strerror(rc));
    }
    return rc == HV_OK;
}

static void rank_join(rank_ctx_t *c) {
    int n = c->size;
    static const size_t sizes[3] = {10, 1000, 3};
    static const char *names[3] = {"t0", "t1", "t2"};
    double *t[3];
    for (int k = 0; k < 3; k++) {
        t[k] = hv_malloc(sizes[k] * sizeof(double));
    }
    for (int s = 0; s <= c->rank && !hvtest_failed; s++) {
        hv__op_desc_t d[3];
        for (int k = 0; k < 3; k++) {
            for (size_t i = 0; i < sizes[k]; i++) {
                t[k][i] = c->rank + 1 + (double)i;
            }
            d[k] = (hv__op_desc_t){.kind = HV__OP_ALLREDUCE,
                                   .name = names[k],
                                   .in = t[k],
                                   .out = t[k],
                                   .count = sizes[k],
                                   .dtype = HV_FLOAT64,
                                   .op = HV_SUM};
        }
        hv_handle_t h;
        ASSERT_OK(hv__engine_submit(c->e, d, 3, &h));
        ASSERT_OK(hv__engine_wait(c->e, h));
        double base = 0; // sum over the ranks that have not joined: those with r >= s
        int members = 0;
        for (int r = s; r < n; r++) {
            base += r + 1;
            members++;
        }
        for (int k = 0; k < 3; k++) {
            for (size_t i = 0; i < sizes[k]; i++) {
                if (t[k][i] != base + (double)members * (double)i) {
                    HVT_FAIL("rank %d step %d: %s[%zu] = %g, want %g", c->rank, s, names[k], i,
                             t[k][i], base + members * (double)i);
                    break;
                }
            }
        }
    }
    for (int k = 0; k < 3; k++) {
        hv_free(t[k]);
    }
    int last = -2;
    if (!join_now(c, &last)) {
        return;
    }
    ASSERT_EQ_INT(last, n - 1);
    // Everyone joins at once: whoever is last, every rank says the same.
    int64_t mine = -2, all[16];
    if (!join_now(c, &last)) {
        return;
    }
    mine = last;
    hv__op_desc_t g = {.kind = HV__OP_ALLGATHER,
                       .in = &mine,
                       .out = all,
                       .count = 1,
                       .dtype = HV_INT64,
                       .out_cap = 16};
    ASSERT_OK(hv__engine_run(c->e, &g));
    for (int r = 0; r < n; r++) {
        ASSERT_TRUE(all[r] == all[0] && all[r] >= 0 && all[r] < n);
    }
    // Rank 0 joins with an allreduce of its own pending: it completes with every rank's data.
    double own = c->rank + 1;
    hv__op_desc_t o = {.kind = HV__OP_ALLREDUCE,
                       .name = "own",
                       .in = &own,
                       .out = &own,
                       .count = 1,
                       .dtype = HV_FLOAT64,
                       .op = HV_SUM};
    hv_handle_t ho;
    if (c->rank == 0) {
        ASSERT_OK(hv__engine_submit(c->e, &o, 1, &ho));
        if (!join_now(c, &last)) {
            return;
        }
        ASSERT_OK(hv__engine_wait(c->e, ho));
    } else {
        usleep(20000); // rank 0 has joined by now, most likely: the path under test
        ASSERT_OK(hv__engine_run(c->e, &o));
        if (!join_now(c, &last)) {
            return;
        }
    }
    ASSERT_TRUE(own == n * (n + 1) / 2.0);
}

static void test_join(void) {
    for (int n = 1; n <= 4 && !hvtest_failed; n++) {
        run_ranks(n, rank_join, NULL, 0);
    }
}

/* Named blocking calls (hv__engine_run with a name: hv_allreduce_named) are matched by name, so
 * ranks may issue them in different orders around their async calls: even ranks run the blocking
 * one first and then submit three async ones; odd ranks submit the async ones (in reverse) and
 * then run the blocking one, with theirs in flight. Neither the blocking call nor the wait that
 * follows may wait for the fusion cycle (a minute here: the test would outlast its bound).
 * (That a wait keeps the fusion of what was submitted together: many_tensors.) */
#define NB_T 3
static void rank_named_blocking(rank_ctx_t *c) {
    static const char *names[NB_T] = {"nb.t0", "nb.t1", "nb.t2"};
    static const size_t counts[NB_T] = {7, 300, 1};
    float t[NB_T][300], b[50];
    for (int step = 0; step < 4 && !hvtest_failed; step++) {
        for (int k = 0; k < NB_T; k++) {
            for (size_t i = 0; i < counts[k]; i++) {
                t[k][i] = (float)(c->rank + k + (int)i % 5 + step);
            }
        }
        for (size_t i = 0; i < 50; i++) {
            b[i] = (float)(c->rank * 2 + (int)i);
        }
        hv__op_desc_t bd = {.kind = HV__OP_ALLREDUCE,
                            .name = "nb.blocking",
                            .in = b,
                            .out = b,
                            .count = 50,
                            .dtype = HV_FLOAT32,
                            .op = HV_SUM};
        hv_handle_t h[NB_T];
        int even = c->rank % 2 == 0;
        if (even) {
            ASSERT_OK(hv__engine_run(c->e, &bd));
        }
        for (int j = 0; j < NB_T; j++) {
            int k = even ? j : NB_T - 1 - j;
            hv__op_desc_t d = {.kind = HV__OP_ALLREDUCE,
                               .name = names[k],
                               .in = t[k],
                               .out = t[k],
                               .count = counts[k],
                               .dtype = HV_FLOAT32,
                               .op = HV_SUM};
            ASSERT_OK(hv__engine_submit(c->e, &d, 1, &h[k]));
        }
        if (!even) {
            ASSERT_OK(hv__engine_run(c->e, &bd));
        }
        for (int k = 0; k < NB_T; k++) {
            ASSERT_OK(hv__engine_wait(c->e, h[k]));
        }
        int n = c->size;
        for (size_t i = 0; i < 50; i++) {
            float want = (float)(n * (n - 1) + n * (int)i);
            if (b[i] != want) {
                HVT_FAIL("rank %d step %d: blocking[%zu] = %g, want %g", c->rank, step, i,
                         (double)b[i], (double)want);
                return;
            }
        }
        for (int k = 0; k < NB_T; k++) {
            for (size_t i = 0; i < counts[k]; i++) {
                float want = (float)(n * (n - 1) / 2 + n * (k + (int)i % 5 + step));
                if (t[k][i] != want) {
                    HVT_FAIL("rank %d step %d: %s[%zu] = %g, want %g", c->rank, step, names[k], i,
                             (double)t[k][i], (double)want);
                    return;
                }
            }
        }
    }
}

static void test_named_blocking(void) {
    double t0 = hvtest_now();
    g_cycle_us = 60u * 1000 * 1000;
    for (int n = 2; n <= 3 && !hvtest_failed; n++) {
        run_ranks(n, rank_named_blocking, NULL, 0);
    }
    g_cycle_us = 0;
    double took = hvtest_now() - t0;
    if (took > hvtest_scale(30)) {
        HVT_FAIL("named blocking calls and waits took %.1f s: they waited for the fusion cycle",
                 took);
    }
}

/* ---- a dead neighbour's side ends like an EOF (transport.h peer_gone) ----------------------- */

/* Two ranks' links over 127.0.0.1 (upgraded to shared memory when shm_bytes > 0), built on two
 * threads. */
typedef struct pair_s {
    hv__tcp_listener_t *lst[2];
    char addr[2][64];
    size_t shm_bytes;
    hv__link_t *l[2];
    hv_err rc[2];
} pair_t;

typedef struct pair_arg_s {
    pair_t *p;
    int rank;
} pair_arg_t;

static void *pair_main(void *arg) {
    pair_arg_t *a = arg;
    pair_t *p = a->p;
    int r = a->rank;
    hv__tcp_ident_t id = {.world_id = 7,
                          .generation = 1,
                          .rank = (uint32_t)r,
                          .left_rank = (uint32_t)!r,
                          .right_rank = (uint32_t)!r};
    p->rc[r] = hv__tcp_link_create(p->lst[r], p->addr[!r], &id, NULL, 10000, &p->l[r]);
    if (p->rc[r] == HV_OK && p->shm_bytes > 0) {
        hv__link_t *up = NULL;
        p->rc[r] = hv__shm_link_upgrade(p->l[r], 1, 1, p->shm_bytes, 10000, &up);
        if (p->rc[r] == HV_OK) {
            p->l[r] = up;
        }
    }
    return NULL;
}

static void pair_make(pair_t *p, size_t shm_bytes) {
    memset(p, 0, sizeof(*p));
    p->shm_bytes = shm_bytes;
    for (int r = 0; r < 2; r++) {
        ASSERT_OK(hv__tcp_listen("127.0.0.1:0", &p->lst[r]));
        snprintf(p->addr[r], sizeof(p->addr[r]), "127.0.0.1:%d", hv__tcp_listener_port(p->lst[r]));
    }
    pthread_t th[2];
    pair_arg_t args[2] = {{p, 0}, {p, 1}};
    for (int r = 0; r < 2; r++) {
        pthread_create(&th[r], NULL, pair_main, &args[r]);
    }
    for (int r = 0; r < 2; r++) {
        pthread_join(th[r], NULL);
        hv__tcp_listener_destroy(p->lst[r]);
    }
    ASSERT_OK(p->rc[0]);
    ASSERT_OK(p->rc[1]);
}

/* Rank 1 writes its last bytes and dies (its mark says so before its sockets do): rank 0 still
 * receives every byte, then HV_EPEER from that side; a send to the dead rank fails at once. */
static void peer_gone_case(size_t shm_bytes) {
    pair_t p;
    pair_make(&p, shm_bytes);
    if (hvtest_failed) {
        return;
    }
    unsigned char out[3000], in[3000];
    for (size_t i = 0; i < sizeof(out); i++) {
        out[i] = (unsigned char)(i * 7);
    }
    size_t sent = 0, got = 0, n = 0;
    while (sent < sizeof(out)) {
        struct iovec v = {out + sent, sizeof(out) - sent};
        ASSERT_OK(p.l[1]->ops->send_some(p.l[1], &v, 1, &n));
        sent += n;
    }
    p.l[0]->ops->peer_gone(p.l[0], 1, 1);
    hv_err rc = HV_OK;
    double t0 = hvtest_now();
    while (got < sizeof(in) && rc == HV_OK && hvtest_now() - t0 < 5) {
        struct iovec v = {in + got, sizeof(in) - got};
        rc = p.l[0]->ops->recv_some(p.l[0], &v, 1, &n);
        got += rc == HV_OK ? n : 0;
        if (rc == HV_OK && n == 0) {
            rc = p.l[0]->ops->wait(p.l[0], 0, 1, 50);
        }
    }
    ASSERT_OK(rc);
    ASSERT_TRUE(got == sizeof(in) && memcmp(in, out, sizeof(in)) == 0);
    struct iovec v = {out, 1};
    ASSERT_RC(p.l[0]->ops->send_some(p.l[0], &v, 1, &n), HV_EPEER);
    if (shm_bytes > 0) {
        // The ring is empty now and nothing more can come: the end, not a wait for a timeout.
        struct iovec w = {in, 1};
        ASSERT_RC(p.l[0]->ops->recv_some(p.l[0], &w, 1, &n), HV_EPEER);
    }
    for (int r = 0; r < 2; r++) {
        p.l[r]->ops->destroy(p.l[r]);
    }
}

static void test_peer_gone_tcp(void) { peer_gone_case(0); }
static void test_peer_gone_shm(void) { peer_gone_case(64u << 10); }

static const hvtest_case_t cases[] = {
    {"types_ops", test_types_ops},
    {"sizes_1_to_8", test_sizes_1_to_8},
    {"big", test_big},
    {"determinism", test_determinism},
    {"random_orders", test_random_orders},
    {"many_tensors", test_many_tensors},
    {"bcast_gather_barrier", test_bcast_gather_barrier},
    {"errors", test_errors},
    {"kill_rank", test_kill_rank},
    {"stalled_peer", test_stalled_peer},
    {"peer_gone_tcp", test_peer_gone_tcp},
    {"peer_gone_shm", test_peer_gone_shm},
    {"abort_pending", test_abort_pending},
    {"alloc_failures", test_alloc_failures},
    {"join", test_join},
    {"named_blocking", test_named_blocking},
    {"shm_types_ops", test_shm_types_ops},
    {"shm_sizes_mixed_hosts", test_shm_sizes},
    {"shm_big", test_shm_big},
    {"shm_random_orders", test_shm_orders},
    {"shm_bcast_gather_barrier", test_shm_bcast_gather},
    {"shm_kill_rank", test_shm_kill},
    {"shm_determinism_mixed_hosts", test_shm_determinism},
    {"hier_tcp", test_hier_tcp},
    {"hier_shm", test_hier_shm},
    {"hier_random_orders", test_hier_orders},
    {"hier_kill_rank", test_hier_kill},
    {"hier_determinism", test_hier_determinism},
};

HVTEST_MAIN(cases)
