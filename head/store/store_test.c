/*
 * store_test: checks hvhead's sqlite store the way the head uses it: every table written,
 * closed, and read back identical through a fresh handle (persistence), upsert and list
 * semantics, transactions, a real v1 database migrated to v2, and the refusals an operator
 * sees: a newer schema, a garbage or truncated state.db (left byte-for-byte untouched), a data
 * dir that cannot be used, a head killed with SIGKILL mid-run. Each case works in its own
 * mkdtemp dir under /tmp, removed afterwards. Each case can run alone: `store_test <case>`.
 */
#include "store.h"

#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "mem.h"
#include "hv_check.h"

/* Like CHECK_RC but also prints the store's detail; for calls on an open handle. */
#define CHECK_OK(s, got)                                                                           \
    do {                                                                                           \
        hv_err g_ = (got);                                                                         \
        if (g_ != HV_OK) {                                                                         \
            fprintf(stderr, "%s:%d: %s\n  got:  %s (%s)\n  want: HV_OK\n", __FILE__, __LINE__,     \
                    #got, hv_errname(g_), hv_store_last_error(s));                                 \
            hv_check_failures++;                                                                   \
        }                                                                                          \
    } while (0)

/* CHECK_U64 and CHECK_I64: got == want as that type, both printed when they differ. */
#define CHECK_NUM_(got, want, type, fmt)                                                           \
    do {                                                                                           \
        type g_ = (type)(got), w_ = (type)(want);                                                  \
        if (g_ != w_) {                                                                            \
            fprintf(stderr, "%s:%d: %s\n  got:  %" fmt "\n  want: %" fmt "\n", __FILE__, __LINE__, \
                    #got, g_, w_);                                                                 \
            hv_check_failures++;                                                                   \
        }                                                                                          \
    } while (0)
#define CHECK_U64(got, want) CHECK_NUM_(got, want, uint64_t, PRIu64)
#define CHECK_I64(got, want) CHECK_NUM_(got, want, int64_t, PRId64)

#define CHECK_CONTAINS(hay, needle)                                                                \
    do {                                                                                           \
        const char *h_ = (hay), *n_ = (needle);                                                    \
        if (h_ == NULL || strstr(h_, n_) == NULL) {                                                \
            fprintf(stderr, "%s:%d: %s\n  got:  \"%s\"\n  want it to contain: \"%s\"\n", __FILE__, \
                    __LINE__, #hay, h_ ? h_ : "(null)", n_);                                       \
            hv_check_failures++;                                                                   \
        }                                                                                          \
    } while (0)

/* ---- helpers --------------------------------------------------------------------------------- */

static char tmp_dir[256];

static void make_tmp(void) {
    hv_check_tmpdir(tmp_dir, sizeof(tmp_dir), "/tmp/hv_store_test.XXXXXX");
}

static void remove_tmp(void) {
    hv_check_rmtree(tmp_dir);
    tmp_dir[0] = '\0';
}

static void path_in(char *buf, size_t len, const char *name) {
    snprintf(buf, len, "%s/%s", tmp_dir, name);
}

static hv_store_t *open_ok(const char *dir) {
    hv_store_t *s = NULL;
    char err[512] = "";
    hv_err rc = hv_store_open(dir, &s, err, sizeof(err));
    if (rc != HV_OK) {
        fprintf(stderr, "hv_store_open(%s): %s: %s\n", dir, hv_errname(rc), err);
        exit(1); // the rest of the case cannot run
    }
    return s;
}

/* A database made at schema `version` holding `sql`'s rows, opened (so migrated to the newest):
 * NULL, after a failed check, when it cannot be made. */
static hv_store_t *open_from_version(int version, const char *sql) {
    char err[512] = "";
    hv_err rc = hv__store_create_at_version(tmp_dir, version, sql, err, sizeof(err));
    CHECK_RC_MSG(rc, HV_OK, err);
    if (rc != HV_OK) {
        return NULL;
    }
    hv_store_t *s = open_ok(tmp_dir);
    CHECK_I64(hv_store_schema_version(s), HV_STORE_SCHEMA_VERSION);
    return s;
}

/* Reads a whole file into an owned buffer. */
static uint8_t *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = hv_malloc((size_t)n + 1);
    if (buf != NULL && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        hv_free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void write_all(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(data, 1, len, f) != len) {
        perror(path);
        exit(2);
    }
    fclose(f);
}

/* ---- cases ----------------------------------------------------------------------------------- */

static const uint8_t spec_bytes[] = {0x0a, 0x00, 0xff, 0x10, 0x00, 0x80, 0x7f, 0x01};

/* The ids that test_persist's rows got. */
typedef struct persisted_s {
    uint64_t node, bare, job, bare_job, worker, seq1, seq2;
} persisted_t;

/* One row of every kind, every field set (and bare ones with NULL strings). */
static void persist_write(hv_store_t *s, persisted_t *p) {
    hv_node_row_t node = {.name = "n1",
                          .addrs = "10.0.0.1:7001,[::1]:7001",
                          .labels = "zone=a,gpu=h100",
                          .instance_id = "i-123",
                          .state = "draining",
                          .peer = "10.0.0.1:50123",
                          .slots = 8,
                          .gpus = 4,
                          .cpus = 96,
                          .preemptible = 1,
                          .incarnation = UINT64_MAX - 5,
                          .registered_ms = 1700000000123ull,
                          .last_seen_ms = 1700000009999ull};
    CHECK_OK(s, hv_store_node_upsert(s, &node));
    CHECK(node.id != 0);
    hv_node_row_t bare = {.name = "n2"}; // every other string NULL
    CHECK_OK(s, hv_store_node_upsert(s, &bare));

    hv_job_row_t job = {.name = "train",
                        .state = "running",
                        .reason = "placed on 2 nodes",
                        .spec = (uint8_t *)spec_bytes,
                        .spec_len = sizeof(spec_bytes),
                        .np = 4,
                        .min_np = 2,
                        .max_np = 8,
                        .max_resets = 3,
                        .timeout_s = 600,
                        .resets = 1,
                        .generation = 7,
                        .submitted_ms = 1700000000001ull,
                        .started_ms = 1700000000002ull,
                        .ended_ms = 0};
    CHECK_OK(s, hv_store_job_insert(s, &job));
    CHECK(job.id != 0);
    hv_job_row_t bare_job = {0}; // NULL strings, no spec
    CHECK_OK(s, hv_store_job_insert(s, &bare_job));

    hv_worker_row_t w = {.job_id = job.id,
                         .node_id = node.id,
                         .rank = 3,
                         .attempt = 2,
                         .local_rank = 1,
                         .local_size = 4,
                         .generation = 7,
                         .gpu = -1,
                         .pid = 4242,
                         .exit_code = -3,
                         .term_signal = 9,
                         .state = "killed",
                         .reason = "node lost",
                         .started_ms = 1700000000100ull,
                         .ended_ms = 1700000000200ull};
    CHECK_OK(s, hv_store_worker_insert(s, &w));
    CHECK(w.id != 0);

    CHECK_OK(s, hv_store_event_append(s, job.id, node.id, "worker.lost", "rank 3 lost",
                                      "{\"rank\":3}", &p->seq1));
    CHECK_OK(s, hv_store_event_append(s, 0, 0, NULL, NULL, NULL, &p->seq2));
    CHECK(p->seq2 > p->seq1);

    hv_artifact_row_t art = {.digest = "ab12",
                             .path = "/var/lib/hv/artifacts/ab12",
                             .size = 5000000000ull,
                             .created_ms = 11,
                             .last_used_ms = 12};
    CHECK_OK(s, hv_store_artifact_put(s, &art));
    hv_blacklist_row_t bl = {.job_id = job.id,
                             .node_id = node.id,
                             .reason = "3 failures",
                             .strikes = 3,
                             .until_ms = 1700000100000ull,
                             .permanent = 1,
                             .incarnation = 0xfedcba9876543210ull};
    CHECK_OK(s, hv_store_blacklist_put(s, &bl));
    hv_instance_row_t inst = {.id = "spot-1",
                              .provider = "spot-sim",
                              .state = "running",
                              .node_name = "n1",
                              .price_milli = 1234,
                              .created_ms = 5,
                              .ended_ms = 0,
                              .type = "spot-a",
                              .handle = "4242",
                              .joined_ms = 7,
                              .reason = "",
                              .preempted = 1};
    CHECK_OK(s, hv_store_instance_put(s, &inst));
    *p = (persisted_t){.node = node.id,
                       .bare = bare.id,
                       .job = job.id,
                       .bare_job = bare_job.id,
                       .worker = w.id,
                       .seq1 = p->seq1,
                       .seq2 = p->seq2};
}

/* The nodes and jobs as a fresh handle reads them. */
static void persist_check_nodes_jobs(hv_store_t *s, const persisted_t *p) {
    hv_node_row_t n = {0};
    CHECK_OK(s, hv_store_node_get(s, p->node, &n));
    CHECK_U64(n.id, p->node);
    CHECK_STR(n.name, "n1");
    CHECK_STR(n.addrs, "10.0.0.1:7001,[::1]:7001");
    CHECK_STR(n.labels, "zone=a,gpu=h100");
    CHECK_STR(n.instance_id, "i-123");
    CHECK_STR(n.state, "draining");
    CHECK_STR(n.peer, "10.0.0.1:50123");
    CHECK_U64(n.slots, 8);
    CHECK_U64(n.gpus, 4);
    CHECK_U64(n.cpus, 96);
    CHECK_I64(n.preemptible, 1);
    CHECK_U64(n.incarnation, UINT64_MAX - 5);
    CHECK_U64(n.registered_ms, 1700000000123ull);
    CHECK_U64(n.last_seen_ms, 1700000009999ull);
    hv_store_node_fini(&n);

    CHECK_OK(s, hv_store_node_get(s, p->bare, &n));
    CHECK_STR(n.name, "n2");
    CHECK_STR(n.addrs, "");      // NULL in, "" out
    CHECK_STR(n.state, "alive"); // NULL state = the initial state
    CHECK_STR(n.peer, "");
    hv_store_node_fini(&n);

    hv_job_row_t j = {0};
    CHECK_OK(s, hv_store_job_get(s, p->job, &j));
    CHECK_U64(j.id, p->job);
    CHECK_STR(j.name, "train");
    CHECK_STR(j.state, "running");
    CHECK_STR(j.reason, "placed on 2 nodes");
    CHECK_U64(j.spec_len, sizeof(spec_bytes));
    CHECK(j.spec != NULL && memcmp(j.spec, spec_bytes, sizeof(spec_bytes)) == 0);
    CHECK_U64(j.np, 4);
    CHECK_U64(j.min_np, 2);
    CHECK_U64(j.max_np, 8);
    CHECK_U64(j.max_resets, 3);
    CHECK_U64(j.timeout_s, 600);
    CHECK_U64(j.resets, 1);
    CHECK_U64(j.generation, 7);
    CHECK_U64(j.submitted_ms, 1700000000001ull);
    CHECK_U64(j.started_ms, 1700000000002ull);
    CHECK_U64(j.ended_ms, 0);
    hv_store_job_fini(&j);
    CHECK_OK(s, hv_store_job_get(s, p->bare_job, &j));
    CHECK_STR(j.name, "");
    CHECK_STR(j.state, "pending");
    CHECK_STR(j.reason, "");
    CHECK(j.spec == NULL);
    CHECK_U64(j.spec_len, 0);
    hv_store_job_fini(&j);
}

/* The workers, events, artifacts, blacklist and instances as a fresh handle reads them. */
static void persist_check_rest(hv_store_t *s, const persisted_t *p) {
    hv_worker_row_t wr = {0};
    CHECK_OK(s, hv_store_worker_get(s, p->worker, &wr));
    CHECK_U64(wr.id, p->worker);
    CHECK_U64(wr.job_id, p->job);
    CHECK_U64(wr.node_id, p->node);
    CHECK_U64(wr.rank, 3);
    CHECK_U64(wr.attempt, 2);
    CHECK_U64(wr.local_rank, 1);
    CHECK_U64(wr.local_size, 4);
    CHECK_U64(wr.generation, 7);
    CHECK_I64(wr.gpu, -1);
    CHECK_I64(wr.pid, 4242);
    CHECK_I64(wr.exit_code, -3);
    CHECK_I64(wr.term_signal, 9);
    CHECK_STR(wr.state, "killed");
    CHECK_STR(wr.reason, "node lost");
    CHECK_U64(wr.started_ms, 1700000000100ull);
    CHECK_U64(wr.ended_ms, 1700000000200ull);
    hv_store_worker_fini(&wr);

    hv_event_row_t *ev = NULL;
    size_t nev = 0;
    CHECK_OK(s, hv_store_event_list(s, 0, 0, 0, &ev, &nev));
    CHECK_U64(nev, 2);
    if (nev == 2) {
        CHECK_U64(ev[0].seq, p->seq1);
        CHECK_U64(ev[0].job_id, p->job);
        CHECK_U64(ev[0].node_id, p->node);
        CHECK_STR(ev[0].kind, "worker.lost");
        CHECK_STR(ev[0].message, "rank 3 lost");
        CHECK(ev[0].time_ms > 1600000000000ull); // stamped with the wall clock
        CHECK_U64(ev[1].seq, p->seq2);
        CHECK_STR(ev[1].kind, "");
        CHECK_STR(ev[1].message, "");
    }
    hv_store_event_free_list(ev, nev);

    hv_artifact_row_t a = {0};
    CHECK_OK(s, hv_store_artifact_get(s, "ab12", &a));
    CHECK_STR(a.digest, "ab12");
    CHECK_STR(a.path, "/var/lib/hv/artifacts/ab12");
    CHECK_U64(a.size, 5000000000ull);
    CHECK_U64(a.created_ms, 11);
    CHECK_U64(a.last_used_ms, 12);
    hv_store_artifact_fini(&a);

    hv_blacklist_row_t *bls = NULL;
    size_t nbl = 0;
    CHECK_OK(s, hv_store_blacklist_list(s, 0, &bls, &nbl));
    CHECK_U64(nbl, 1);
    if (nbl == 1) {
        CHECK_U64(bls[0].job_id, p->job);
        CHECK_U64(bls[0].node_id, p->node);
        CHECK_I64(bls[0].permanent, 1);
        CHECK(bls[0].incarnation == 0xfedcba9876543210ull);
        CHECK_STR(bls[0].reason, "3 failures");
        CHECK_U64(bls[0].strikes, 3);
        CHECK_U64(bls[0].until_ms, 1700000100000ull);
    }
    hv_store_blacklist_free_list(bls, nbl);

    hv_instance_row_t in = {0};
    CHECK_OK(s, hv_store_instance_get(s, "spot-1", &in));
    CHECK_STR(in.id, "spot-1");
    CHECK_STR(in.provider, "spot-sim");
    CHECK_STR(in.state, "running");
    CHECK_STR(in.node_name, "n1");
    CHECK_U64(in.price_milli, 1234);
    CHECK_U64(in.created_ms, 5);
    CHECK_U64(in.ended_ms, 0);
    CHECK_STR(in.type, "spot-a");
    CHECK_STR(in.handle, "4242");
    CHECK_U64(in.joined_ms, 7);
    CHECK_STR(in.reason, "");
    CHECK_I64(in.preempted, 1);
    hv_store_instance_fini(&in);
}

static void test_persist(void) {
    hv_store_t *s = open_ok(tmp_dir);
    CHECK_I64(hv_store_schema_version(s), HV_STORE_SCHEMA_VERSION);
    char want_path[300];
    path_in(want_path, sizeof(want_path), "state.db");
    CHECK_STR(hv_store_path(s), want_path);

    persisted_t ids = {0};
    persist_write(s, &ids);
    hv_store_close(s);

    /* A fresh handle sees exactly what was written. */
    s = open_ok(tmp_dir);
    persist_check_nodes_jobs(s, &ids);
    persist_check_rest(s, &ids);
    hv_store_close(s);
}

static void test_node_upsert(void) {
    hv_store_t *s = open_ok(tmp_dir);
    hv_node_row_t a = {.name = "alpha", .slots = 2, .incarnation = 1, .state = "alive"};
    hv_node_row_t b = {.name = "beta", .slots = 4};
    CHECK_OK(s, hv_store_node_upsert(s, &a));
    CHECK_OK(s, hv_store_node_upsert(s, &b));
    CHECK(a.id != b.id);
    uint64_t first_id = a.id;

    /* The agent re-registers after a restart: same name, new incarnation and address. */
    hv_node_row_t again = {.name = "alpha",
                           .slots = 6,
                           .incarnation = 2,
                           .state = "alive",
                           .addrs = "10.0.0.9:7001",
                           .last_seen_ms = 99,
                           .memory_mb = 4096};
    CHECK_OK(s, hv_store_node_upsert(s, &again));
    CHECK_U64(again.id, first_id);

    hv_node_row_t *rows = NULL;
    size_t n = 0;
    CHECK_OK(s, hv_store_node_list(s, &rows, &n));
    CHECK_U64(n, 2);
    if (n == 2) {
        CHECK_U64(rows[0].id, first_id);
        CHECK_STR(rows[0].name, "alpha");
        CHECK_U64(rows[0].slots, 6);
        CHECK_U64(rows[0].incarnation, 2);
        CHECK_STR(rows[0].addrs, "10.0.0.9:7001");
        CHECK_U64(rows[0].memory_mb, 4096); /* stored since v15: known before a rejoin */
        CHECK_STR(rows[1].name, "beta");
        CHECK_U64(rows[1].memory_mb, 0);
    }
    hv_store_node_free_list(rows, n);

    CHECK_OK(s, hv_store_node_set_state(s, first_id, "dead", 12345));
    hv_node_row_t got = {0};
    CHECK_OK(s, hv_store_node_get(s, first_id, &got));
    CHECK_STR(got.state, "dead");
    CHECK_U64(got.last_seen_ms, 12345);
    CHECK_U64(got.memory_mb, 4096); /* a state change keeps it */
    hv_store_node_fini(&got);

    CHECK_RC(hv_store_node_set_state(s, 9999, "dead", 1), HV_ENOTFOUND);
    CHECK_RC(hv_store_node_get(s, 9999, &got), HV_ENOTFOUND);
    CHECK_CONTAINS(hv_store_last_error(s), "9999");
    CHECK_RC(hv_store_node_set_state(s, first_id, "sleepy", 1), HV_EINVAL); // not a node state
    hv_node_row_t noname = {.slots = 1};
    CHECK_RC(hv_store_node_upsert(s, &noname), HV_EINVAL);
    hv_store_close(s);
}

/* Appends "state=n " (the states come in the query's order: sorted). */
static void job_state_cat(const char *state, uint64_t n, void *ud) {
    char *buf = ud;
    size_t len = strlen(buf);
    snprintf(buf + len, 256 - len, "%s=%llu ", state, (unsigned long long)n);
}

static void test_job_list(void) {
    hv_store_t *s = open_ok(tmp_dir);
    static const char *const states[] = {"pending", "succeeded", "running",
                                         "failed",  "placing",   "cancelled"};
    uint64_t ids[6];
    for (int i = 0; i < 6; i++) {
        hv_job_row_t j = {.name = "j", .state = (char *)states[i], .np = (uint32_t)i};
        CHECK_OK(s, hv_store_job_insert(s, &j));
        ids[i] = j.id;
        CHECK(i == 0 || ids[i] > ids[i - 1]);
    }
    /* Lists and pages, newest first: which jobs come (by their index in ids and states). */
    static const struct {
        int page;        // hv_store_job_page, else hv_store_job_list
        int active_only; // list: pending, placing and running only
        int before;      // page: below ids[before]; -1: from the top
        uint32_t limit;  // 0: all
        size_t n;
        int want[6];
    } lists[] = {
        {0, 0, -1, 0, 6, {5, 4, 3, 2, 1, 0}},
        {0, 1, -1, 0, 3, {4, 2, 0}}, // placing, running, pending
        {0, 0, -1, 2, 2, {5, 4}},
        {0, 1, -1, 2, 2, {4, 2}},
        {1, 0, -1, 4, 4, {5, 4, 3, 2}},
        {1, 0, 2, 4, 2, {1, 0}},
        {1, 0, 0, 0, 0, {0}},
    };
    hv_job_row_t *rows = NULL;
    size_t n = 0;
    for (size_t c = 0; c < sizeof(lists) / sizeof(lists[0]); c++) {
        uint64_t before = lists[c].before < 0 ? 0 : ids[lists[c].before];
        if (lists[c].page) {
            CHECK_OK(s, hv_store_job_page(s, before, lists[c].limit, &rows, &n));
        } else {
            CHECK_OK(s, hv_store_job_list(s, lists[c].active_only, lists[c].limit, &rows, &n));
        }
        CHECK_U64(n, lists[c].n);
        for (size_t i = 0; i < n && i < lists[c].n; i++) {
            CHECK_U64(rows[i].id, ids[lists[c].want[i]]);
            CHECK_STR(rows[i].state, states[lists[c].want[i]]);
        }
        hv_store_job_free_list(rows, n);
    }

    /* Counts by state (the metrics' hv_jobs): one each, none for succeeded. */
    char seen[256] = "";
    CHECK_OK(s, hv_store_job_states(s, job_state_cat, seen));
    CHECK_STR(seen, "cancelled=1 failed=1 pending=1 placing=1 running=1 succeeded=1 ");

    /* update: everything but spec changes; the job leaves the active list. */
    hv_job_row_t j = {0};
    CHECK_OK(s, hv_store_job_get(s, ids[0], &j));
    hv_job_row_t upd = {.id = ids[0],
                        .name = "renamed",
                        .state = "cancelled",
                        .reason = "by user",
                        .np = 9,
                        .generation = 3,
                        .ended_ms = 77,
                        .spec = NULL,
                        .spec_len = 0};
    CHECK_OK(s, hv_store_job_update(s, &upd));
    hv_store_job_fini(&j);
    hv_job_row_t spec_job = {
        .state = "pending", .spec = (uint8_t *)spec_bytes, .spec_len = sizeof(spec_bytes)};
    CHECK_OK(s, hv_store_job_insert(s, &spec_job));
    hv_job_row_t upd2 = {.id = spec_job.id, .state = "running"}; // spec NULL in the update
    CHECK_OK(s, hv_store_job_update(s, &upd2));
    CHECK_OK(s, hv_store_job_get(s, spec_job.id, &j));
    CHECK_U64(j.spec_len, sizeof(spec_bytes)); // update leaves the spec alone
    CHECK_STR(j.state, "running");
    hv_store_job_fini(&j);
    CHECK_OK(s, hv_store_job_get(s, ids[0], &j));
    CHECK_STR(j.name, "renamed");
    CHECK_STR(j.state, "cancelled");
    CHECK_STR(j.reason, "by user");
    CHECK_U64(j.np, 9);
    CHECK_U64(j.generation, 3);
    CHECK_U64(j.ended_ms, 77);
    hv_store_job_fini(&j);

    CHECK_OK(s, hv_store_job_list(s, 1, 0, &rows, &n));
    CHECK_U64(n, 3); // spec_job running, placing, running; pending one was cancelled
    hv_store_job_free_list(rows, n);

    upd.id = 424242;
    CHECK_RC(hv_store_job_update(s, &upd), HV_ENOTFOUND);
    CHECK_RC(hv_store_job_get(s, 424242, &j), HV_ENOTFOUND);
    hv_job_row_t bad = {.state = "exploded"};
    CHECK_RC(hv_store_job_insert(s, &bad), HV_EINVAL);
    CHECK_CONTAINS(hv_store_last_error(s), "CHECK constraint failed");
    hv_store_close(s);
}

static void test_worker_list(void) {
    hv_store_t *s = open_ok(tmp_dir);
    hv_job_row_t j1 = {.state = "running"}, j2 = {.state = "running"};
    CHECK_OK(s, hv_store_job_insert(s, &j1));
    CHECK_OK(s, hv_store_job_insert(s, &j2));
    /* Inserted out of order on purpose: the list orders by job, rank, attempt. */
    struct {
        uint64_t job;
        uint32_t rank, attempt;
        const char *state;
    } spec[] = {
        {j2.id, 0, 0, "running"},  {j1.id, 1, 1, "running"}, {j1.id, 1, 0, "lost"},
        {j1.id, 0, 0, "starting"}, {j2.id, 1, 0, "exited"},  {j1.id, 2, 0, "pending"},
    };
    for (size_t i = 0; i < sizeof(spec) / sizeof(spec[0]); i++) {
        hv_worker_row_t w = {.job_id = spec[i].job,
                             .rank = spec[i].rank,
                             .attempt = spec[i].attempt,
                             .state = (char *)spec[i].state,
                             .gpu = -1};
        CHECK_OK(s, hv_store_worker_insert(s, &w));
    }
    hv_worker_row_t *rows = NULL;
    size_t n = 0;
    CHECK_OK(s, hv_store_worker_list(s, 0, 0, &rows, &n));
    CHECK_U64(n, 6);
    if (n == 6) {
        const uint32_t want_rank[] = {0, 1, 1, 2, 0, 1}, want_att[] = {0, 0, 1, 0, 0, 0};
        for (int i = 0; i < 6; i++) {
            CHECK_U64(rows[i].job_id, i < 4 ? j1.id : j2.id);
            CHECK_U64(rows[i].rank, want_rank[i]);
            CHECK_U64(rows[i].attempt, want_att[i]);
        }
    }
    hv_store_worker_free_list(rows, n);

    CHECK_OK(s, hv_store_worker_list(s, j1.id, 0, &rows, &n));
    CHECK_U64(n, 4);
    hv_store_worker_free_list(rows, n);

    CHECK_OK(s, hv_store_worker_list(s, j1.id, 1, &rows, &n));
    CHECK_U64(n, 3); // starting, running, pending; not lost
    if (n == 3) {
        CHECK_STR(rows[0].state, "starting");
        CHECK_STR(rows[1].state, "running");
        CHECK_STR(rows[2].state, "pending");
    }
    hv_store_worker_free_list(rows, n);

    CHECK_OK(s, hv_store_worker_list(s, 0, 1, &rows, &n));
    CHECK_U64(n, 4);
    hv_worker_row_t w = {0};
    if (n == 4) {
        w = rows[3]; // j2 rank 0 running: borrow fields to build an update
        CHECK_U64(w.job_id, j2.id);
        hv_worker_row_t upd = {.id = w.id,
                               .job_id = j2.id,
                               .rank = 0,
                               .state = "exited",
                               .exit_code = 0,
                               .pid = 77,
                               .gpu = 2,
                               .ended_ms = 5};
        CHECK_OK(s, hv_store_worker_update(s, &upd));
    }
    hv_store_worker_free_list(rows, n);
    CHECK_OK(s, hv_store_worker_list(s, j2.id, 1, &rows, &n));
    CHECK_U64(n, 0);
    hv_store_worker_free_list(rows, n);

    CHECK_OK(s, hv_store_worker_list(s, 9999, 0, &rows, &n)); // no such job: empty, not an error
    CHECK_U64(n, 0);
    hv_store_worker_free_list(rows, n);

    hv_worker_row_t orphan = {.job_id = 9999, .state = "pending"};
    CHECK_RC(hv_store_worker_insert(s, &orphan), HV_EINVAL); // foreign key: no such job
    CHECK_CONTAINS(hv_store_last_error(s), "FOREIGN KEY");
    hv_worker_row_t missing = {.id = 9999, .job_id = j1.id, .state = "pending"};
    CHECK_RC(hv_store_worker_update(s, &missing), HV_ENOTFOUND);
    hv_store_close(s);
}

/* hv_store_event_sum of the field `arg` (sum) or hv_store_event_count of the events whose data
 * holds `arg` is `want`. */
static void event_number_is(hv_store_t *s, int sum, uint64_t job, const char *kind, const char *arg,
                            uint64_t want) {
    uint64_t got = 99;
    CHECK_OK(s, sum ? hv_store_event_sum(s, job, kind, arg, &got)
                    : hv_store_event_count(s, job, kind, arg, &got));
    CHECK_U64(got, want);
    if (got != want) {
        fprintf(stderr, "  (the %s of %s events of job %" PRIu64 " with \"%s\")\n",
                sum ? "sum" : "count", kind, job, arg != NULL ? arg : "(null)");
    }
}

static void test_events(void) {
    hv_store_t *s = open_ok(tmp_dir);
    uint64_t seq[10];
    for (int i = 0; i < 10; i++) {
        char msg[32];
        snprintf(msg, sizeof(msg), "event %d", i);
        /* Even events belong to job 1, odd ones to job 2. */
        CHECK_OK(s, hv_store_event_append(s, (uint64_t)(i % 2 + 1), 0, "k", msg, NULL, &seq[i]));
        CHECK(i == 0 || seq[i] > seq[i - 1]);
    }
    CHECK_OK(s, hv_store_event_append(s, 1, 0, "k", "no seq wanted", NULL, NULL));

    hv_event_row_t *ev = NULL;
    size_t n = 0;
    CHECK_OK(s, hv_store_event_list(s, 0, 0, 0, &ev, &n));
    CHECK_U64(n, 11);
    hv_store_event_free_list(ev, n);

    CHECK_OK(s, hv_store_event_list(s, 0, seq[6], 0, &ev, &n)); // strictly after seq[6]
    CHECK_U64(n, 4);
    if (n == 4) {
        CHECK_U64(ev[0].seq, seq[7]);
        CHECK_STR(ev[0].message, "event 7");
        CHECK_STR(ev[3].message, "no seq wanted");
    }
    hv_store_event_free_list(ev, n);

    /* limit: the NEWEST 3, still ascending. */
    CHECK_OK(s, hv_store_event_list(s, 0, 0, 3, &ev, &n));
    CHECK_U64(n, 3);
    if (n == 3) {
        CHECK_U64(ev[0].seq, seq[8]);
        CHECK_U64(ev[1].seq, seq[9]);
        CHECK(ev[2].seq > ev[1].seq);
    }
    hv_store_event_free_list(ev, n);

    /* Counting by kind and data: two rollback rounds of job 3, one plain round, one of job 4. */
    CHECK_OK(s, hv_store_event_append(s, 3, 0, "round.close", "", "{\"rollback\":true}", NULL));
    CHECK_OK(s, hv_store_event_append(s, 3, 0, "round.close", "", "{\"rollback\":true}", NULL));
    CHECK_OK(s, hv_store_event_append(s, 3, 0, "round.close", "", "{\"rollback\":false}", NULL));
    CHECK_OK(s, hv_store_event_append(s, 4, 0, "round.close", "", "{\"rollback\":true}", NULL));
    event_number_is(s, 0, 3, "round.close", "\"rollback\":true", 2);
    event_number_is(s, 0, 0, "round.close", "\"rollback\":true", 3);
    event_number_is(s, 0, 3, "round.close", "", 3);
    event_number_is(s, 0, 0, "k", NULL, 11);
    /* "" counts events without data too (autoscaler.launch_failed has none). */
    CHECK_OK(s, hv_store_event_append(s, 0, 0, "nodata", "m", NULL, NULL));
    event_number_is(s, 0, 0, "nodata", "", 1);
    /* Summing a field of the data: job 3 redid 64 + 36 samples; other kinds do not count. */
    CHECK_OK(s, hv_store_event_append(s, 3, 0, "round.close", "", "{\"redone_samples\":64}", NULL));
    CHECK_OK(s, hv_store_event_append(s, 3, 0, "round.close", "", "{\"redone_samples\":36}", NULL));
    CHECK_OK(s, hv_store_event_append(s, 4, 0, "round.close", "", "{\"redone_samples\":5}", NULL));
    CHECK_OK(s, hv_store_event_append(s, 3, 0, "worker.fail", "", "{\"redone_samples\":7}", NULL));
    CHECK_OK(s, hv_store_event_append(s, 3, 0, "round.close", "", "", NULL));
    event_number_is(s, 1, 3, "round.close", "redone_samples", 100);
    event_number_is(s, 1, 0, "round.close", "redone_samples", 105);
    event_number_is(s, 1, 9, "round.close", "redone_samples", 0);
    event_number_is(s, 0, 5, "round.close", "", 0);

    /* job filter + limit: job 2 has seq[1,3,5,7,9]; newest 2 = 7, 9. */
    CHECK_OK(s, hv_store_event_list(s, 2, 0, 2, &ev, &n));
    CHECK_U64(n, 2);
    if (n == 2) {
        CHECK_U64(ev[0].seq, seq[7]);
        CHECK_U64(ev[1].seq, seq[9]);
        CHECK_U64(ev[0].job_id, 2);
    }
    hv_store_event_free_list(ev, n);

    /* job filter + after_seq + limit bigger than what is left. */
    CHECK_OK(s, hv_store_event_list(s, 1, seq[4], 100, &ev, &n));
    CHECK_U64(n, 3); // seq 6, 8, and "no seq wanted"
    if (n == 3) {
        CHECK_STR(ev[0].message, "event 6");
        CHECK_STR(ev[1].message, "event 8");
        CHECK_STR(ev[2].message, "no seq wanted");
    }
    hv_store_event_free_list(ev, n);

    CHECK_OK(s, hv_store_event_list(s, 0, UINT64_MAX, 0, &ev, &n));
    CHECK_U64(n, 0);
    hv_store_event_free_list(ev, n);
    hv_store_close(s);
}

static void test_artifacts(void) {
    hv_store_t *s = open_ok(tmp_dir);
    const char *digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    hv_artifact_row_t a = {.digest = (char *)digest,
                           .path = "/d/a",
                           .size = 4,
                           .created_ms = 100,
                           .last_used_ms = 100};
    CHECK_OK(s, hv_store_artifact_put(s, &a));
    CHECK_OK(s, hv_store_artifact_touch(s, digest, 250));
    hv_artifact_row_t got = {0};
    CHECK_OK(s, hv_store_artifact_get(s, digest, &got));
    CHECK_U64(got.last_used_ms, 250);
    CHECK_U64(got.created_ms, 100);
    CHECK_U64(got.size, 4);
    CHECK_STR(got.path, "/d/a");
    hv_store_artifact_fini(&got);

    a.path = "/d/b"; // put again replaces
    a.size = 8;
    CHECK_OK(s, hv_store_artifact_put(s, &a));
    CHECK_OK(s, hv_store_artifact_get(s, digest, &got));
    CHECK_STR(got.path, "/d/b");
    CHECK_U64(got.size, 8);
    hv_store_artifact_fini(&got);

    CHECK_RC(hv_store_artifact_get(s, "nope", &got), HV_ENOTFOUND);
    CHECK(got.digest == NULL); // out untouched on failure
    CHECK_RC(hv_store_artifact_touch(s, "nope", 1), HV_ENOTFOUND);
    hv_artifact_row_t nodigest = {.path = "/x"};
    CHECK_RC(hv_store_artifact_put(s, &nodigest), HV_EINVAL);
    hv_store_close(s);
}

static void test_blacklist(void) {
    hv_store_t *s = open_ok(tmp_dir);
    /* Entries are per (job, node id): the same node can be barred from one job and not another. */
    hv_blacklist_row_t a = {
        .job_id = 2, .node_id = 9, .strikes = 1, .until_ms = 10, .reason = "r1"};
    hv_blacklist_row_t b = {.job_id = 2, .node_id = 3, .strikes = 2, .until_ms = 20};
    hv_blacklist_row_t c = {.job_id = 4, .node_id = 9, .strikes = 1, .until_ms = 30};
    CHECK_OK(s, hv_store_blacklist_put(s, &a));
    CHECK_OK(s, hv_store_blacklist_put(s, &b));
    CHECK_OK(s, hv_store_blacklist_put(s, &c));
    a.strikes = 5; // a second strike replaces the entry
    a.until_ms = 40;
    CHECK_OK(s, hv_store_blacklist_put(s, &a));
    hv_blacklist_row_t *rows = NULL;
    size_t n = 0;
    CHECK_OK(s, hv_store_blacklist_list(s, 2, &rows, &n));
    CHECK_U64(n, 2);
    if (n == 2) {
        CHECK_U64(rows[0].node_id, 3);
        CHECK_STR(rows[0].reason, "");
        CHECK_U64(rows[1].node_id, 9);
        CHECK_U64(rows[1].strikes, 5);
        CHECK_U64(rows[1].until_ms, 40);
        CHECK_I64(rows[1].permanent, 0);
    }
    hv_store_blacklist_free_list(rows, n);
    CHECK_OK(s, hv_store_blacklist_list(s, 0, &rows, &n));
    CHECK_U64(n, 3);
    hv_store_blacklist_free_list(rows, n);
    CHECK_OK(s, hv_store_blacklist_remove(s, 2, 9));
    CHECK_RC(hv_store_blacklist_remove(s, 2, 9), HV_ENOTFOUND);
    CHECK_OK(s, hv_store_blacklist_list(s, 0, &rows, &n));
    CHECK_U64(n, 2);
    hv_store_blacklist_free_list(rows, n);
    hv_blacklist_row_t noid = {.job_id = 2};
    CHECK_RC(hv_store_blacklist_put(s, &noid), HV_EINVAL);

    /* instances: the other v2 table. */
    hv_instance_row_t i1 = {.id = "i-1", .provider = "local", .created_ms = 1};
    hv_instance_row_t i2 = {.id = "i-2", .provider = "local", .created_ms = 2, .ended_ms = 9};
    CHECK_OK(s, hv_store_instance_put(s, &i1));
    CHECK_OK(s, hv_store_instance_put(s, &i2));
    hv_instance_row_t *ins = NULL;
    CHECK_OK(s, hv_store_instance_list(s, 0, &ins, &n));
    CHECK_U64(n, 2);
    hv_store_instance_free_list(ins, n);
    CHECK_OK(s, hv_store_instance_list(s, 1, &ins, &n));
    CHECK_U64(n, 1);
    if (n == 1) {
        CHECK_STR(ins[0].id, "i-1");
    }
    hv_store_instance_free_list(ins, n);
    hv_store_close(s);
}

static void test_rollback(void) {
    hv_store_t *s = open_ok(tmp_dir);
    CHECK_RC(hv_store_commit(s), HV_ESTATE); // nothing open
    CHECK_OK(s, hv_store_rollback(s));       // nothing open: no-op

    CHECK_OK(s, hv_store_begin(s));
    CHECK_RC(hv_store_begin(s), HV_ESTATE);
    hv_job_row_t j = {.state = "pending"};
    CHECK_OK(s, hv_store_job_insert(s, &j));
    hv_worker_row_t w = {.job_id = j.id, .state = "pending"};
    CHECK_OK(s, hv_store_worker_insert(s, &w));
    CHECK_OK(s, hv_store_event_append(s, j.id, 0, "submitted", "", NULL, NULL));
    hv_node_row_t nd = {.name = "n"};
    CHECK_OK(s, hv_store_node_upsert(s, &nd));
    CHECK_OK(s, hv_store_rollback(s));

    hv_job_row_t *jobs = NULL;
    hv_worker_row_t *workers = NULL;
    hv_event_row_t *ev = NULL;
    hv_node_row_t *nodes = NULL;
    size_t n = 99;
    CHECK_OK(s, hv_store_job_list(s, 0, 0, &jobs, &n));
    CHECK_U64(n, 0);
    hv_store_job_free_list(jobs, n);
    CHECK_OK(s, hv_store_worker_list(s, 0, 0, &workers, &n));
    CHECK_U64(n, 0);
    hv_store_worker_free_list(workers, n);
    CHECK_OK(s, hv_store_event_list(s, 0, 0, 0, &ev, &n));
    CHECK_U64(n, 0);
    hv_store_event_free_list(ev, n);
    CHECK_OK(s, hv_store_node_list(s, &nodes, &n));
    CHECK_U64(n, 0);
    hv_store_node_free_list(nodes, n);

    /* A committed transaction survives a reopen; an open one at close does not. */
    CHECK_OK(s, hv_store_begin(s));
    hv_job_row_t kept = {.state = "pending", .name = "kept"};
    CHECK_OK(s, hv_store_job_insert(s, &kept));
    CHECK_OK(s, hv_store_commit(s));
    CHECK_OK(s, hv_store_begin(s));
    hv_job_row_t lost = {.state = "pending", .name = "lost"};
    CHECK_OK(s, hv_store_job_insert(s, &lost));
    hv_store_close(s);
    s = open_ok(tmp_dir);
    CHECK_OK(s, hv_store_job_list(s, 0, 0, &jobs, &n));
    CHECK_U64(n, 1);
    if (n == 1) {
        CHECK_STR(jobs[0].name, "kept");
    }
    hv_store_job_free_list(jobs, n);
    hv_store_close(s);
}

static void test_migrate_v1(void) {
    /* A real v1 database (only the first migration step) with rows written the v1 way. */
    const char *v1_rows =
        "INSERT INTO jobs (id, name, state, spec, np, min_np, max_np, submitted_ms)"
        " VALUES (5, 'old-job', 'running', x'0a00ff', 4, 2, 8, 1234);"
        "INSERT INTO workers (id, job_id, rank, attempt, state, pid, gpu)"
        " VALUES (11, 5, 2, 1, 'running', 999, 3);"
        "INSERT INTO nodes (name, slots) VALUES ('oldnode', 8);"
        "INSERT INTO events (time_ms, job_id, kind, message) VALUES (1, 5, 'k', 'v1 event');";
    /* The v1 file really lacks the later tables: this open is the first to create them. */
    hv_store_t *s = open_from_version(1, v1_rows);
    if (s == NULL) {
        return;
    }
    hv_job_row_t j = {0};
    CHECK_OK(s, hv_store_job_get(s, 5, &j));
    CHECK_STR(j.name, "old-job");
    CHECK_STR(j.state, "running");
    CHECK_U64(j.spec_len, 3);
    CHECK(j.spec != NULL && j.spec[0] == 0x0a && j.spec[1] == 0x00 && j.spec[2] == 0xff);
    CHECK_U64(j.np, 4);
    CHECK_U64(j.min_np, 2);
    CHECK_U64(j.max_np, 8);
    CHECK_U64(j.submitted_ms, 1234);
    CHECK_U64(j.generation, 0); // the v2 column's default on old rows
    hv_store_job_fini(&j);
    hv_worker_row_t w = {0};
    CHECK_OK(s, hv_store_worker_get(s, 11, &w));
    CHECK_U64(w.job_id, 5);
    CHECK_U64(w.rank, 2);
    CHECK_U64(w.attempt, 1);
    CHECK_I64(w.pid, 999);
    CHECK_I64(w.gpu, 3);
    CHECK_STR(w.state, "running");
    CHECK_U64(w.generation, 0);
    hv_store_worker_fini(&w);
    hv_event_row_t *ev = NULL;
    size_t n = 0;
    CHECK_OK(s, hv_store_event_list(s, 5, 0, 0, &ev, &n));
    CHECK_U64(n, 1);
    if (n == 1) {
        CHECK_STR(ev[0].message, "v1 event");
    }
    hv_store_event_free_list(ev, n);

    /* The new tables and columns work. */
    hv_blacklist_row_t bl = {.job_id = 5, .node_id = 1, .strikes = 1};
    CHECK_OK(s, hv_store_blacklist_put(s, &bl));
    hv_instance_row_t in = {.id = "i-9", .provider = "local"};
    CHECK_OK(s, hv_store_instance_put(s, &in));
    hv_job_row_t upd = {.id = 5, .name = "old-job", .state = "running", .generation = 4};
    CHECK_OK(s, hv_store_job_update(s, &upd));
    hv_job_row_t newer = {.state = "pending"};
    CHECK_OK(s, hv_store_job_insert(s, &newer));
    CHECK(newer.id > 5); // ids continue after the old rows
    hv_store_close(s);

    /* Reopening a current database migrates nothing and keeps the new data. */
    s = open_ok(tmp_dir);
    CHECK_I64(hv_store_schema_version(s), HV_STORE_SCHEMA_VERSION);
    CHECK_OK(s, hv_store_job_get(s, 5, &j));
    CHECK_U64(j.generation, 4);
    hv_store_job_fini(&j);
    hv_blacklist_row_t *bls = NULL;
    CHECK_OK(s, hv_store_blacklist_list(s, 0, &bls, &n));
    CHECK_U64(n, 1);
    hv_store_blacklist_free_list(bls, n);
    hv_store_close(s);
}

/* A v2 database (what hvhead wrote before elastic jobs) with a running job: v3 keeps every row,
 * its ids and the id counter, and adds the elastic columns with defaults. */
static void test_migrate_v2(void) {
    const char *v2_rows =
        "INSERT INTO jobs (id, name, state, np, min_np, max_np, generation)"
        " VALUES (3, 'j', 'running', 2, 2, 2, 1);"
        "INSERT INTO workers (id, job_id, rank, attempt, state, pid, generation, reason)"
        " VALUES (40, 3, 1, 1, 'running', 77, 1, 'r');"
        "INSERT INTO workers (id, job_id, rank, attempt, state) VALUES (41, 3, 0, 1, 'killed');"
        "DELETE FROM workers WHERE id = 41;" /* the counter is ahead of the rows */
        "INSERT INTO blacklist (node_name, strikes) VALUES ('old', 2);"
        "INSERT INTO events (time_ms, job_id, kind, message) VALUES (1, 3, 'k', 'v2 event');"
        "INSERT INTO instances (id, provider, state, node_name, created_ms)"
        " VALUES ('7', 'local', 'running', 'n7', 11);";
    hv_store_t *s = open_from_version(2, v2_rows);
    if (s == NULL) {
        return;
    }
    hv_worker_row_t w = {0};
    CHECK_OK(s, hv_store_worker_get(s, 40, &w));
    CHECK_U64(w.job_id, 3);
    CHECK_U64(w.rank, 1);
    CHECK_I64(w.pid, 77);
    CHECK_U64(w.generation, 1);
    CHECK_STR(w.state, "running");
    CHECK_STR(w.reason, "r");
    CHECK_U64(w.member_gen, 0);
    CHECK_STR(w.addr, "");
    /* the new state and columns (upd borrows w's strings but state and addr) */
    hv_worker_row_t upd = w;
    upd.state = "left";
    upd.member_gen = 2;
    upd.joined_gen = 1;
    upd.done = 1;
    upd.removed = 1;
    upd.addr = "10.0.0.5:4000";
    CHECK_OK(s, hv_store_worker_update(s, &upd));
    hv_store_worker_fini(&w);
    CHECK_OK(s, hv_store_worker_get(s, 40, &w));
    CHECK_STR(w.state, "left");
    CHECK_U64(w.member_gen, 2);
    CHECK_I64(w.done, 1);
    CHECK_I64(w.removed, 1);
    CHECK_STR(w.addr, "10.0.0.5:4000");
    hv_store_worker_fini(&w);
    hv_worker_row_t nw = {.job_id = 3, .state = "starting"};
    CHECK_OK(s, hv_store_worker_insert(s, &nw));
    CHECK(nw.id > 41); /* ids are never handed out twice */
    hv_job_row_t j = {0};
    CHECK_OK(s, hv_store_job_get(s, 3, &j));
    CHECK_I64(j.elastic, 0);
    CHECK_U64(j.check_every, 1);
    CHECK_STR(j.round_reason, "");
    hv_store_job_fini(&j);
    /* v4: an instance keeps its row; the new columns are empty */
    hv_instance_row_t in = {0};
    CHECK_OK(s, hv_store_instance_get(s, "7", &in));
    CHECK_STR(in.node_name, "n7");
    CHECK_U64(in.created_ms, 11);
    CHECK_STR(in.type, "");
    CHECK_STR(in.handle, "");
    CHECK_U64(in.joined_ms, 0);
    CHECK_I64(in.preempted, 0);
    hv_store_instance_fini(&in);
    hv_blacklist_row_t *bls = NULL;
    size_t n = 0;
    CHECK_OK(s, hv_store_blacklist_list(s, 0, &bls, &n));
    CHECK_U64(n, 0); /* the host-name entries had no writer and are gone */
    hv_store_blacklist_free_list(bls, n);
    hv_event_row_t *ev = NULL;
    CHECK_OK(s, hv_store_event_list(s, 3, 0, 0, &ev, &n));
    CHECK_U64(n, 1);
    if (n == 1) {
        CHECK_STR(ev[0].message, "v2 event");
        CHECK_STR(ev[0].data, "");
    }
    hv_store_event_free_list(ev, n);
    hv_store_close(s);
}

/* Elastic columns round-trip. */
static void test_elastic_job(void) {
    hv_store_t *s = open_ok(tmp_dir);
    hv_job_row_t row = {.name = "e",
                        .state = "running",
                        .np = 4,
                        .elastic = 1,
                        .check_every = 5,
                        .elastic_timeout_s = 60,
                        .rdzv_timeout_s = 30,
                        .cooldown_min_s = 10,
                        .cooldown_max_s = 100,
                        .max_strikes = 4,
                        .slots_per_host = 2,
                        .size = 3,
                        .cross_size = 2,
                        .round_open = 1,
                        .round_rollback = 1,
                        .round_reason = "failure: rank 1 on b exited with status 1",
                        .round_opened_ms = 11,
                        .round_deadline_ms = 22,
                        .round_fail_at_ms = 33,
                        .generation = 7,
                        .resets = 6};
    CHECK_OK(s, hv_store_job_insert(s, &row));
    hv_job_row_t got = {0};
    CHECK_OK(s, hv_store_job_get(s, row.id, &got));
    CHECK_I64(got.elastic, 1);
    CHECK_U64(got.check_every, 5);
    CHECK_U64(got.elastic_timeout_s, 60);
    CHECK_U64(got.rdzv_timeout_s, 30);
    CHECK_U64(got.cooldown_min_s, 10);
    CHECK_U64(got.cooldown_max_s, 100);
    CHECK_U64(got.max_strikes, 4);
    CHECK_U64(got.slots_per_host, 2);
    CHECK_U64(got.size, 3);
    CHECK_U64(got.cross_size, 2);
    CHECK_I64(got.round_open, 1);
    CHECK_I64(got.round_rollback, 1);
    CHECK_STR(got.round_reason, "failure: rank 1 on b exited with status 1");
    CHECK_U64(got.round_opened_ms, 11);
    CHECK_U64(got.round_deadline_ms, 22);
    CHECK_U64(got.round_fail_at_ms, 33);
    hv_store_job_fini(&got);
    row.round_open = 0;
    row.round_reason = "";
    row.size = 2;
    CHECK_OK(s, hv_store_job_update(s, &row));
    CHECK_OK(s, hv_store_job_get(s, row.id, &got));
    CHECK_I64(got.round_open, 0);
    CHECK_U64(got.size, 2);
    CHECK_U64(got.check_every, 5);
    hv_store_job_fini(&got);
    hv_store_close(s);
}

static void test_newer_version(void) {
    char err[512] = "";
    /* One above what this head writes (other branches add steps: follow the constant). */
    char newer[64];
    snprintf(newer, sizeof(newer), "PRAGMA user_version = %d", HV_STORE_SCHEMA_VERSION + 1);
    CHECK_RC(hv__store_create_at_version(tmp_dir, 2, newer, err, sizeof(err)), HV_OK);
    char path[300];
    path_in(path, sizeof(path), "state.db");
    size_t len0 = 0, len1 = 0;
    uint8_t *before = read_all(path, &len0);
    hv_store_t *s = NULL;
    err[0] = '\0';
    CHECK_RC(hv_store_open(tmp_dir, &s, err, sizeof(err)), HV_ENOTSUP);
    CHECK(s == NULL);
    char want[128];
    snprintf(want, sizeof(want),
             "state.db has schema version %d, newer than this hvhead's %d; use a newer hvhead",
             HV_STORE_SCHEMA_VERSION + 1, HV_STORE_SCHEMA_VERSION);
    CHECK_CONTAINS(err, want);
    CHECK_CONTAINS(err, path);
    uint8_t *after = read_all(path, &len1);
    CHECK(before != NULL && after != NULL && len0 == len1 && memcmp(before, after, len0) == 0);
    hv_free(before);
    hv_free(after);

    /* Our tables but no schema version: not ours to migrate. */
    remove_tmp();
    make_tmp();
    CHECK_RC(hv__store_create_at_version(tmp_dir, 2, "PRAGMA user_version = 0", err, sizeof(err)),
             HV_OK);
    err[0] = '\0';
    CHECK_RC(hv_store_open(tmp_dir, &s, err, sizeof(err)), HV_EINVAL);
    CHECK_CONTAINS(err, "not hvhead's state");
}

/* Opens a damaged state.db and checks the refusal and that the file is unchanged. */
static void expect_corrupt(const char *what) {
    char path[300], err[768] = "";
    path_in(path, sizeof(path), "state.db");
    size_t len0 = 0, len1 = 0;
    uint8_t *before = read_all(path, &len0);
    hv_store_t *s = NULL;
    hv_err rc = hv_store_open(tmp_dir, &s, err, sizeof(err));
    if (rc != HV_ECORRUPT) {
        fprintf(stderr, "%s: %s\n", what, err);
    }
    CHECK_RC(rc, HV_ECORRUPT);
    CHECK(s == NULL);
    hv_store_close(s);
    CHECK_CONTAINS(err, path);
    CHECK_CONTAINS(err, "move it aside to start fresh, or restore a backup");
    uint8_t *after = read_all(path, &len1);
    CHECK(after != NULL);
    CHECK_U64(len1, len0);
    CHECK(before != NULL && after != NULL && len0 == len1 && memcmp(before, after, len0) == 0);
    fprintf(stderr, "  (%s: %s)\n", what, err);
    hv_free(before);
    hv_free(after);
}

static void test_garbage_file(void) {
    char path[300];
    path_in(path, sizeof(path), "state.db");
    uint8_t junk[8192];
    for (size_t i = 0; i < sizeof(junk); i++) {
        junk[i] = (uint8_t)(i * 131u + 7u);
    }
    write_all(path, junk, sizeof(junk));
    expect_corrupt("garbage");
    char err[768] = "";
    hv_store_t *s = NULL;
    (void)hv_store_open(tmp_dir, &s, err, sizeof(err));
    CHECK_CONTAINS(err, "file is not a database"); // sqlite's own words

    /* Text that is not a database at all. */
    const char text[] = "this is my shopping list, not a database\n";
    write_all(path, text, sizeof(text) - 1);
    expect_corrupt("text");
}

/* An empty (0-byte) state.db is a lost database, not a new one: refused, left as it is. */
static void test_empty_file(void) {
    char path[300];
    path_in(path, sizeof(path), "state.db");
    write_all(path, "", 0);
    expect_corrupt("empty");
    char err[768] = "";
    hv_store_t *s = NULL;
    (void)hv_store_open(tmp_dir, &s, err, sizeof(err));
    CHECK_CONTAINS(err, "is empty");
}

static int is_epoch(const char *e) {
    if (strlen(e) != 16) {
        return 0;
    }
    for (const char *p = e; *p != '\0'; p++) {
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) {
            return 0;
        }
    }
    return 1;
}

/* A new database gets a random epoch, kept across opens; another new one gets another. A
 * database from before epochs that handed out ids keeps the legacy epoch ""; an unused one gets
 * a random one. */
static void test_epoch(void) {
    hv_store_t *s = open_ok(tmp_dir);
    char first[40];
    snprintf(first, sizeof(first), "%s", hv_store_epoch(s));
    CHECK(is_epoch(first));
    hv_store_close(s);
    s = open_ok(tmp_dir);
    CHECK_STR(hv_store_epoch(s), first);
    hv_store_close(s);
    char path[300], aside[320];
    path_in(path, sizeof(path), "state.db");
    snprintf(aside, sizeof(aside), "%s.old", path);
    CHECK(rename(path, aside) == 0);
    s = open_ok(tmp_dir);
    CHECK(is_epoch(hv_store_epoch(s)));
    CHECK(strcmp(hv_store_epoch(s), first) != 0);
    hv_store_close(s);

    char err[512] = "";
    unlink(path);
    CHECK_RC(hv__store_create_at_version(tmp_dir, 4, NULL, err, sizeof(err)), HV_OK);
    s = open_ok(tmp_dir);
    CHECK(is_epoch(hv_store_epoch(s)));
    hv_store_close(s);
    unlink(path);
    CHECK_RC(hv__store_create_at_version(tmp_dir, 4,
                                         "INSERT INTO jobs (id, name, state, np, min_np, max_np)"
                                         " VALUES (1, 'j', 'succeeded', 1, 1, 1);"
                                         "DELETE FROM jobs;",
                                         err, sizeof(err)),
             HV_OK);
    s = open_ok(tmp_dir);
    CHECK_STR(hv_store_epoch(s), "");
    hv_store_close(s);
}

/* A v5 database (with a job) migrates to v6: the job stays, the audit and join token tables
 * are there and empty. */
static void test_migrate_v5(void) {
    hv_store_t *s = open_from_version(5, "INSERT INTO jobs (id, name, state, np, min_np, max_np)"
                                         " VALUES (7, 'j', 'running', 1, 1, 1);");
    if (s == NULL) {
        return;
    }
    hv_job_row_t j;
    CHECK_OK(s, hv_store_job_get(s, 7, &j));
    CHECK_STR(j.name, "j");
    hv_store_job_fini(&j);
    hv_audit_row_t *rows = NULL;
    size_t n = 9;
    hv_audit_filter_t f = {0};
    CHECK_OK(s, hv_store_audit_list(s, &f, &rows, &n));
    CHECK_U64(n, 0);
    hv_free(rows);
    hv_jtoken_row_t *toks = NULL;
    CHECK_OK(s, hv_store_jtoken_list(s, &toks, &n));
    CHECK_U64(n, 0);
    hv_free(toks);
    hv_store_close(s);
}

/* A v6 database with a running job migrates to v7: the job has no resume yet and no copy; a
 * copy is recorded, replaced by a newer one, survives a reopen, and is forgotten on removal. */
static void test_state_copies(void) {
    hv_store_t *s = open_from_version(6, "INSERT INTO jobs (id, name, state, np, min_np, max_np)"
                                         " VALUES (3, 'j', 'running', 1, 1, 1);");
    if (s == NULL) {
        return;
    }
    hv_job_row_t j;
    CHECK_OK(s, hv_store_job_get(s, 3, &j));
    CHECK_U64(j.resume_gen, 0);
    CHECK_U64(j.resumes, 0);
    j.resume_gen = 5;
    j.resumes = 1;
    CHECK_OK(s, hv_store_job_update(s, &j));
    hv_store_job_fini(&j);
    hv_copy_row_t c;
    CHECK_RC(hv_store_copy_get(s, 3, &c), HV_ENOTFOUND);
    hv_copy_row_t r = {.job_id = 3, .generation = 2, .commit = 40, .size = 1000, .stored_ms = 7};
    snprintf(r.sha256, sizeof(r.sha256), "%064d", 1);
    snprintf(r.path, sizeof(r.path), "/data/states/e-3-40.bin");
    CHECK_OK(s, hv_store_copy_put(s, &r));
    r.commit = 41;
    r.generation = 3;
    snprintf(r.path, sizeof(r.path), "/data/states/e-3-41.bin");
    CHECK_OK(s, hv_store_copy_put(s, &r));
    r.job_id = 0;
    CHECK_RC(hv_store_copy_put(s, &r), HV_EINVAL);
    hv_store_close(s);
    s = open_ok(tmp_dir);
    CHECK_OK(s, hv_store_copy_get(s, 3, &c));
    CHECK_U64(c.generation, 3);
    CHECK_U64(c.commit, 41);
    CHECK_U64(c.size, 1000);
    CHECK_U64(c.stored_ms, 7);
    CHECK_STR(c.path, "/data/states/e-3-41.bin");
    CHECK_OK(s, hv_store_job_get(s, 3, &j));
    CHECK_U64(j.resume_gen, 5);
    CHECK_U64(j.resumes, 1);
    hv_store_job_fini(&j);
    CHECK_OK(s, hv_store_copy_remove(s, 3));
    CHECK_RC(hv_store_copy_get(s, 3, &c), HV_ENOTFOUND);
    hv_store_close(s);
}

/* v10: events carry structured fields. Rows stored by an older head read: their rounds' fields come
 * from their JSON (generation, rollback, wait), their reason codes from the words their reasons
 * began with; other old rows read as "none"; a job's newest round gets its code too. A new event
 * keeps every field it was appended with, and an event appended without fields reads as none. */
/* v15: a v14 node migrates with memory 0 (unknown until its agent joins again); a join writes
 * it and a reopen (a head restart) reads it back. */
static void test_migrate_v15(void) {
    hv_store_t *s = open_from_version(14, "INSERT INTO nodes (name, state, slots) VALUES"
                                          " ('old', 'alive', 2);");
    if (s == NULL) {
        return;
    }
    hv_node_row_t *rows = NULL;
    size_t n = 0;
    CHECK_OK(s, hv_store_node_list(s, &rows, &n));
    CHECK_U64(n, 1);
    if (n == 1) {
        CHECK_STR(rows[0].name, "old");
        CHECK_U64(rows[0].memory_mb, 0);
    }
    hv_store_node_free_list(rows, n);
    hv_node_row_t join = {.name = "old", .slots = 2, .state = "alive", .memory_mb = 512};
    CHECK_OK(s, hv_store_node_upsert(s, &join));
    hv_store_close(s);
    s = open_ok(tmp_dir);
    hv_node_row_t got = {0};
    CHECK_OK(s, hv_store_node_get(s, join.id, &got));
    CHECK_U64(got.memory_mb, 512);
    hv_store_node_fini(&got);
    hv_store_close(s);
}

static void test_event_fields(void) {
    const char *v8_rows =
        "INSERT INTO jobs (id, name, state, spec, np, min_np, max_np, submitted_ms, generation,"
        " round_reason) VALUES (5, 'old', 'running', x'00', 2, 1, 4, 1, 3, 'drain: node b');"
        "INSERT INTO events (time_ms, job_id, kind, message, data) VALUES"
        " (1, 5, 'round.open', 'm1', '{\"generation\":1,\"reason\":\"start\",\"rollback\":false,"
        "\"resets\":0}'),"
        " (2, 5, 'round.close', 'm2', '{\"generation\":1,\"size\":2,\"reason\":\"start\","
        "\"wait_ms\":40}'),"
        " (3, 5, 'round.open', 'm3', '{\"generation\":2,\"reason\":\"failure: rank 0\","
        "\"rollback\":true,\"resets\":1}'),"
        " (4, 5, 'round.open', 'm4', '{\"generation\":3,\"reason\":\"grow: free slots\","
        "\"rollback\":false,\"resets\":2}'),"
        " (5, 5, 'job.state', 'job 5 running', '');";
    hv_store_t *s = open_from_version(8, v8_rows);
    if (s == NULL) {
        return;
    }
    hv_event_row_t *ev = NULL;
    size_t n = 0;
    CHECK_OK(s, hv_store_event_list(s, 5, 0, 0, &ev, &n));
    CHECK_U64(n, 5);
    if (n == 5) {
        CHECK_U64(ev[0].f.generation, 1);
        CHECK_I64(ev[0].f.reason, HV_EV_START);
        CHECK_U64(ev[1].f.duration_ms, 40);
        CHECK_I64(ev[2].f.reason, HV_EV_FAILURE);
        CHECK_I64(ev[2].f.rollback, 1);
        CHECK_U64(ev[2].f.generation, 2);
        CHECK_I64(ev[3].f.reason, HV_EV_GROW);
        CHECK_I64(ev[3].f.rollback, 0);
        CHECK_U64(ev[4].f.generation, 0);
        CHECK_I64(ev[4].f.reason, HV_EV_NONE);
        CHECK_U64(ev[4].f.job_state, 0);
        CHECK_STR(ev[4].node, "");
    }
    hv_store_event_free_list(ev, n);
    hv_job_row_t j = {0};
    CHECK_OK(s, hv_store_job_get(s, 5, &j));
    CHECK_U64(j.round_code, HV_EV_DRAIN);
    j.round_code = HV_EV_RESUME;
    CHECK_OK(s, hv_store_job_update(s, &j));
    hv_store_job_fini(&j);
    CHECK_OK(s, hv_store_job_get(s, 5, &j));
    CHECK_U64(j.round_code, HV_EV_RESUME);
    hv_store_job_fini(&j);
    /* Resets by reason (generation >= 2), as the metrics count them after a restart. */
    hv_ev_fields_t f = {.generation = 4,
                        .reason = HV_EV_DATA_PLANE,
                        .worker_id = 77,
                        .rank = 3,
                        .duration_ms = 1234,
                        .job_state = 4,
                        .rollback = 1};
    uint64_t seq = 0;
    CHECK_OK(s, hv_store_event_append_f(s, 5, 9, "round.open", "words", NULL, &f, "node-x", &seq));
    CHECK_OK(s, hv_store_event_append(s, 5, 0, "job.note", "plain", NULL, NULL));
    CHECK_OK(s, hv_store_event_list(s, 5, seq - 1, 0, &ev, &n));
    CHECK_U64(n, 2);
    if (n == 2) {
        CHECK_U64(ev[0].node_id, 9);
        CHECK_STR(ev[0].node, "node-x");
        CHECK_U64(ev[0].f.generation, 4);
        CHECK_I64(ev[0].f.reason, HV_EV_DATA_PLANE);
        CHECK_U64(ev[0].f.worker_id, 77);
        CHECK_U64(ev[0].f.rank, 3);
        CHECK_U64(ev[0].f.duration_ms, 1234);
        CHECK_U64(ev[0].f.job_state, 4);
        CHECK_I64(ev[0].f.rollback, 1);
        CHECK_I64(ev[1].f.reason, HV_EV_NONE);
        CHECK_U64(ev[1].f.worker_id, 0);
        CHECK_STR(ev[1].node, "");
    }
    hv_store_event_free_list(ev, n);
    hv_store_close(s);
}

/* An actor's events (v17): a v16 database migrates (its events have no actor), and the events
 * of one actor are listed, newest `limit` of them in ascending order, with their count. */
static void test_event_actor(void) {
    const char *v16_rows = "INSERT INTO events (time_ms, job_id, kind, message, data) VALUES"
                           " (1, 0, 'actor.restarting', 'actor 4: old', '{\"actor_id\":4}');";
    hv_store_t *s = open_from_version(16, v16_rows);
    if (s == NULL) {
        return;
    }
    static const struct {
        uint64_t actor;
        const char *kind;
    } rows[] = {{4, "actor.pending"},    {5, "actor.pending"}, {4, "actor.alive"}, {0, "node.dead"},
                {4, "actor.restarting"}, {5, "actor.dead"},    {4, "actor.dead"}};
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_ev_fields_t f = {.actor_id = rows[i].actor};
        CHECK_OK(s, hv_store_event_append_f(s, 0, 0, rows[i].kind, "m", "{}", &f, NULL, NULL));
    }
    static const struct {
        uint64_t actor;
        uint32_t limit;
        size_t n;
        uint64_t total;
        const char *first, *last;
    } cases[] = {
        {4, 0, 4, 4, "actor.pending", "actor.dead"},    /* the old row has none */
        {4, 2, 2, 4, "actor.restarting", "actor.dead"}, /* the newest two, in order */
        {5, 10, 2, 2, "actor.pending", "actor.dead"},
        {9, 10, 0, 0, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        hv_event_row_t *ev = NULL;
        size_t n = 99;
        uint64_t total = 99;
        CHECK_OK(s, hv_store_event_list_actor(s, cases[i].actor, cases[i].limit, &ev, &n, &total));
        CHECK_U64(n, cases[i].n);
        CHECK_U64(total, cases[i].total);
        if (n == cases[i].n && n > 0) {
            CHECK_STR(ev[0].kind, cases[i].first);
            CHECK_STR(ev[n - 1].kind, cases[i].last);
            CHECK(ev[0].seq < ev[n - 1].seq);
            for (size_t k = 0; k < n; k++) {
                CHECK_U64(ev[k].f.actor_id, cases[i].actor);
            }
        }
        hv_store_event_free_list(ev, n);
    }
    /* Without a count. */
    hv_event_row_t *ev = NULL;
    size_t n = 0;
    CHECK_OK(s, hv_store_event_list_actor(s, 5, 1, &ev, &n, NULL));
    CHECK_U64(n, 1);
    hv_store_event_free_list(ev, n);
    hv_store_close(s);
}

/* The durable tier's copies: a v8 database migrates (a job's head copy kept), the durable row is
 * stored apart from the head's, replaced, survives a reopen, and goes with the job's history. */
static void test_durable_copies(void) {
    hv_store_t *s = open_from_version(8, "INSERT INTO jobs (id, name, state, np, min_np, max_np)"
                                         " VALUES (3, 'j', 'running', 1, 1, 1);"
                                         "INSERT INTO state_copies VALUES (3, 2, 40, 10, 'ab',"
                                         " '/d/e-3-g2-c40.bin', 7);");
    if (s == NULL) {
        return;
    }
    hv_copy_row_t c;
    CHECK_RC(hv_store_durable_get(s, 3, &c), HV_ENOTFOUND);
    hv_copy_row_t r = {.job_id = 3, .generation = 2, .commit = 30, .size = 9, .stored_ms = 5};
    snprintf(r.sha256, sizeof(r.sha256), "cd");
    snprintf(r.path, sizeof(r.path), "e-3-g2-c30.bin");
    CHECK_OK(s, hv_store_durable_put(s, &r));
    r.commit = 40;
    snprintf(r.path, sizeof(r.path), "e-3-g2-c40.bin");
    CHECK_OK(s, hv_store_durable_put(s, &r));
    hv_store_close(s);
    s = open_ok(tmp_dir);
    CHECK_OK(s, hv_store_durable_get(s, 3, &c));
    CHECK_U64(c.commit, 40);
    CHECK_STR(c.path, "e-3-g2-c40.bin");
    CHECK_OK(s, hv_store_copy_get(s, 3, &c)); /* the head's own row is apart */
    CHECK_STR(c.path, "/d/e-3-g2-c40.bin");
    CHECK_OK(s, hv_store_durable_remove(s, 3));
    CHECK_RC(hv_store_durable_get(s, 3, &c), HV_ENOTFOUND);
    CHECK_OK(s, hv_store_copy_get(s, 3, &c));
    hv_store_close(s);
}

/* The index of the copies kept by peers (v20): a v18 database migrates (the head's and the
 * durable tier's rows kept), a row is stored, replaced by the next generation's keeper, survives a
 * reopen, a node's loss forgets only its rows, and the rows go with the job's history. */
static void test_peer_copies(void) {
    hv_store_t *s = open_from_version(18, "INSERT INTO jobs (id, name, state, np, min_np, max_np)"
                                          " VALUES (3, 'j', 'running', 1, 1, 1);"
                                          "INSERT INTO jobs (id, name, state, np, min_np, max_np)"
                                          " VALUES (4, 'k', 'succeeded', 1, 1, 1);"
                                          "INSERT INTO state_copies VALUES (3, 2, 40, 10, 'ab',"
                                          " '/d/e-3-g2-c40.bin', 7);");
    if (s == NULL) {
        return;
    }
    hv_peer_copy_row_t p;
    CHECK_RC(hv_store_peer_copy_get(s, 3, &p), HV_ENOTFOUND);
    CHECK_STR(hv_store_last_error(s), "peer copy get: job 3 has no copy kept by a peer");
    hv_peer_copy_row_t r = {
        .copy = {.job_id = 3, .generation = 2, .commit = 41, .size = 10, .stored_ms = 8},
        .node_id = 5,
        .incarnation = 0xabc,
        .addr = "10.0.0.5:7100"};
    snprintf(r.copy.sha256, sizeof(r.copy.sha256), "cd");
    hv_peer_copy_row_t bad = r;
    bad.node_id = 0;
    CHECK_RC(hv_store_peer_copy_put(s, &bad), HV_EINVAL);
    CHECK_OK(s, hv_store_peer_copy_put(s, &r));
    r.copy.generation = 3;
    r.copy.commit = 50;
    r.node_id = 6;
    snprintf(r.addr, sizeof(r.addr), "10.0.0.6:7100");
    CHECK_OK(s, hv_store_peer_copy_put(s, &r));
    hv_peer_copy_row_t other = r;
    other.copy.job_id = 4;
    other.node_id = 5;
    CHECK_OK(s, hv_store_peer_copy_put(s, &other));
    hv_store_close(s);
    s = open_ok(tmp_dir);
    CHECK_OK(s, hv_store_peer_copy_get(s, 3, &p));
    CHECK_U64(p.copy.generation, 3);
    CHECK_U64(p.copy.commit, 50);
    CHECK_U64(p.copy.size, 10);
    CHECK_STR(p.copy.sha256, "cd");
    CHECK_U64(p.node_id, 6);
    CHECK_U64(p.incarnation, 0xabc);
    CHECK_STR(p.addr, "10.0.0.6:7100");
    hv_copy_row_t c;
    CHECK_OK(s, hv_store_copy_get(s, 3, &c)); /* the head's own row is apart */
    CHECK_U64(c.commit, 40);
    size_t n = 99;
    CHECK_OK(s, hv_store_peer_copy_forget_node(s, 5, &n)); /* job 4's keeper */
    CHECK_U64(n, 1);
    CHECK_RC(hv_store_peer_copy_get(s, 4, &p), HV_ENOTFOUND);
    CHECK_OK(s, hv_store_peer_copy_get(s, 3, &p));
    CHECK_OK(s, hv_store_peer_copy_forget_node(s, 5, &n));
    CHECK_U64(n, 0);
    CHECK_OK(s, hv_store_peer_copy_remove(s, 3));
    CHECK_RC(hv_store_peer_copy_get(s, 3, &p), HV_ENOTFOUND);
    CHECK_OK(s, hv_store_peer_copy_remove(s, 3)); /* no-op */
    /* A finished job's history takes its peer row with it. */
    CHECK_OK(s, hv_store_peer_copy_put(s, &other));
    uint64_t ids[] = {4};
    size_t deleted = 0;
    CHECK_OK(s, hv_store_history_delete(s, ids, 1, &deleted));
    CHECK_U64(deleted, 1);
    CHECK_RC(hv_store_peer_copy_get(s, 4, &p), HV_ENOTFOUND);
    hv_store_close(s);
}

/* The fleet's throughput table (v21): a v20 database migrates (its peer rows kept); a job's rows
 * are replaced whole by the next put (a size evicted from the table goes), read back by size with
 * their values exact after a reopen, kept apart per job, and go with a finished job's history. */
static void test_tput(void) {
    hv_store_t *s = open_from_version(20, "INSERT INTO jobs (id, name, state, np, min_np, max_np)"
                                          " VALUES (3, 'j', 'running', 1, 1, 1);"
                                          "INSERT INTO jobs (id, name, state, np, min_np, max_np)"
                                          " VALUES (4, 'k', 'succeeded', 1, 1, 1);"
                                          "INSERT INTO peer_copies VALUES (3, 2, 41, 10, 'cd', 5,"
                                          " 2748, '10.0.0.5:7100', 8);");
    if (s == NULL) {
        return;
    }
    hv_tput_row_t *got = NULL;
    size_t n = 99;
    CHECK_OK(s, hv_store_tput_get(s, 3, &got, &n));
    CHECK_U64(n, 0);
    hv_free(got);
    hv_tput_row_t rows[3] = {{0, 4, 120.5, 3.25}, {0, 2, 60.0, 2.0}, {0, 8, 1.0 / 3.0, 0.1}};
    CHECK_RC(hv_store_tput_put(s, 0, rows, 3), HV_EINVAL);
    CHECK_OK(s, hv_store_tput_put(s, 3, rows, 3));
    CHECK_OK(s, hv_store_tput_put(s, 4, rows, 1));
    rows[0].work = 200.0; /* size 8 evicted, size 4 grew */
    CHECK_OK(s, hv_store_tput_put(s, 3, rows, 2));
    hv_store_close(s);
    s = open_ok(tmp_dir);
    CHECK_OK(s, hv_store_tput_get(s, 3, &got, &n));
    CHECK_U64(n, 2);
    CHECK_U64(got[0].job_id, 3);
    CHECK_U64(got[0].size, 2);
    CHECK(got[0].work == 60.0 && got[0].seconds == 2.0);
    CHECK_U64(got[1].size, 4);
    CHECK(got[1].work == 200.0 && got[1].seconds == 3.25);
    hv_free(got);
    hv_peer_copy_row_t p;
    CHECK_OK(s, hv_store_peer_copy_get(s, 3, &p)); /* the v20 rows are kept */
    CHECK_U64(p.copy.commit, 41);
    uint64_t ids[] = {4};
    size_t deleted = 0;
    CHECK_OK(s, hv_store_history_delete(s, ids, 1, &deleted));
    CHECK_U64(deleted, 1);
    CHECK_OK(s, hv_store_tput_get(s, 4, &got, &n));
    CHECK_U64(n, 0);
    hv_free(got);
    CHECK_OK(s, hv_store_tput_put(s, 3, NULL, 0)); /* forgets them */
    CHECK_OK(s, hv_store_tput_get(s, 3, &got, &n));
    CHECK_U64(n, 0);
    hv_free(got);
    hv_store_close(s);
}

/* An upgrade keeps revocations: a v7 database and the old revocations file (a blank line, a
 * duplicate) migrate to v8, the file is imported once and renamed .imported; a second import
 * (no file) changes nothing, and the rows survive a reopen. A damaged file imports nothing and
 * stays; a store that cannot write stores nothing and keeps the file. */
/* Actors (v9): a row survives a close and reopen as written; a put replaces it. */
static void test_actors(void) {
    hv_store_t *s = open_ok(tmp_dir);
    uint8_t spec[3] = {1, 2, 3};
    hv_actor_row_t r = {.id = 4,
                        .name = "counter",
                        .ns = "default",
                        .class_name = "counter",
                        .spec = spec,
                        .spec_len = sizeof(spec),
                        .reason = "alive (process 1)",
                        .max_restarts = 2,
                        .restarts = 1,
                        .incarnation = 2,
                        .slots = 1,
                        .node_id = 7,
                        .proc_live = 1,
                        .last_status = -1,
                        .last_signal = 9,
                        .address = "127.0.0.1:4000",
                        .created_ms = 11};
    snprintf(r.state, sizeof(r.state), "alive");
    CHECK_RC(hv_store_actor_put(s, &r), HV_OK);
    r.restarts = 2;
    CHECK_RC(hv_store_actor_put(s, &r), HV_OK);
    hv_store_close(s);
    s = open_ok(tmp_dir);
    hv_actor_row_t *rows = NULL;
    size_t n = 0;
    CHECK_RC(hv_store_actor_list(s, &rows, &n), HV_OK);
    CHECK_U64(n, 1);
    if (n == 1) {
        CHECK_U64(rows[0].id, 4);
        CHECK_STR(rows[0].name, "counter");
        CHECK_STR(rows[0].state, "alive");
        CHECK_STR(rows[0].address, "127.0.0.1:4000");
        CHECK_U64(rows[0].restarts, 2);
        CHECK_U64(rows[0].spec_len, 3);
        CHECK_I64(rows[0].last_status, -1);
        CHECK_I64(rows[0].last_signal, 9);
        hv_actor_row_fini(&rows[0]);
    }
    hv_free(rows);
    hv_store_close(s);
}

/* Actors' call figures (v16): a database at v15 (actors, no figures) migrates and has none; a
 * row survives a close and reopen as written, a put replaces it; a row that does not hold
 * figures is refused when listed (HV_ECORRUPT), not read as zeros. */
static void test_actor_figures(void) {
    hv_store_t *s = open_from_version(15, NULL);
    if (s == NULL) {
        return;
    }
    hv_actor_fig_row_t *rows = NULL;
    size_t n = 9;
    CHECK_RC(hv_store_actor_fig_list(s, &rows, &n), HV_OK);
    CHECK_U64(n, 0);
    hv_free(rows);
    hv_actor_fig_row_t r = {.actor_id = 3, .proc = 77, .ended = 0, .report_ms = 1234};
    hv_callfig_count(&r.base, 1, 1500, 10, 20);
    hv_callfig_count(&r.cur, 0, 7000000, 5, 0);
    CHECK_RC(hv_store_actor_fig_put(s, &r), HV_OK);
    hv_callfig_count(&r.cur, 1, 100, 1, 1);
    r.ended = 1;
    CHECK_RC(hv_store_actor_fig_put(s, &r), HV_OK);
    hv_store_close(s);
    s = open_ok(tmp_dir);
    rows = NULL;
    CHECK_RC(hv_store_actor_fig_list(s, &rows, &n), HV_OK);
    CHECK_U64(n, 1);
    if (n == 1) {
        CHECK_U64(rows[0].actor_id, 3);
        CHECK_U64(rows[0].proc, 77);
        CHECK_I64(rows[0].ended, 1);
        CHECK_U64(rows[0].report_ms, 1234);
        CHECK(memcmp(&rows[0].base, &r.base, sizeof(r.base)) == 0);
        CHECK(memcmp(&rows[0].cur, &r.cur, sizeof(r.cur)) == 0);
    }
    hv_free(rows);
    rows = NULL;
    CHECK_RC(hv__store_exec(s, "UPDATE actor_figures SET cur = 'garbage'"), HV_OK);
    CHECK_RC(hv_store_actor_fig_list(s, &rows, &n), HV_ECORRUPT);
    CHECK(rows == NULL);
    hv_store_close(s);
}

static void test_revoked_import(void) {
    char err[512] = "";
    hv_store_t *s = open_from_version(7, NULL);
    if (s == NULL) {
        return;
    }
    char path[600], done[700];
    snprintf(path, sizeof(path), "%s/revoked_nodes", tmp_dir);
    snprintf(done, sizeof(done), "%s.imported", path);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f == NULL) {
        hv_store_close(s);
        return;
    }
    fputs("3 9\n\n5 1f\n3 9\n", f);
    fclose(f);
    size_t n = 99;
    CHECK_RC_MSG(hv_store_revoked_import(s, path, &n, err, sizeof(err)), HV_OK, err);
    CHECK_U64(n, 3);
    CHECK(access(path, F_OK) != 0);
    CHECK(access(done, F_OK) == 0);
    CHECK_RC_MSG(hv_store_revoked_import(s, path, &n, err, sizeof(err)), HV_OK, err);
    CHECK_U64(n, 0);
    hv_store_close(s);
    s = open_ok(tmp_dir);
    hv_revoked_row_t *rows = NULL;
    CHECK_OK(s, hv_store_revoked_list(s, &rows, &n));
    CHECK_U64(n, 2);
    if (n == 2) {
        CHECK_U64(rows[0].node_id, 3);
        CHECK_U64(rows[0].incarnation, 9);
        CHECK_U64(rows[1].node_id, 5);
        CHECK_U64(rows[1].incarnation, 0x1f);
    }
    hv_free(rows);

    /* A damaged file: nothing imported, the file stays, err names the line. */
    f = fopen(path, "w");
    fputs("7 2\nnot a line\n", f);
    fclose(f);
    CHECK_RC(hv_store_revoked_import(s, path, &n, err, sizeof(err)), HV_ECORRUPT);
    CHECK(strstr(err, "revoked_nodes:2: not a revoked node credential") != NULL);
    CHECK(access(path, F_OK) == 0);
    /* A store that cannot write: nothing imported, the file stays for the next start. */
    f = fopen(path, "w");
    fputs("7 2\n", f);
    fclose(f);
    CHECK_OK(s, hv__store_fail_writes(s, 1));
    CHECK(hv_store_revoked_import(s, path, &n, err, sizeof(err)) != HV_OK);
    CHECK(strstr(err, "readonly") != NULL);
    CHECK(access(path, F_OK) == 0);
    hv_revoked_row_t r = {.node_id = 8, .incarnation = 1, .revoked_ms = 5};
    CHECK(hv_store_revoked_put(s, &r) != HV_OK);
    CHECK_OK(s, hv__store_fail_writes(s, 0));
    CHECK_OK(s, hv_store_revoked_list(s, &rows, &n));
    CHECK_U64(n, 2);
    hv_free(rows);
    CHECK_RC_MSG(hv_store_revoked_import(s, path, &n, err, sizeof(err)), HV_OK, err);
    CHECK_U64(n, 1);
    hv_store_close(s);
}

static void audit_add(hv_store_t *s, uint64_t t, const char *who, const char *method, int code,
                      uint64_t keep) {
    hv_audit_row_t r = {0};
    r.time_ms = t;
    snprintf(r.who_kind, sizeof(r.who_kind), "%s", code == 16 ? "none" : "client");
    snprintf(r.who_id, sizeof(r.who_id), "%s", who);
    snprintf(r.peer, sizeof(r.peer), "ipv4:127.0.0.1:5000");
    snprintf(r.method, sizeof(r.method), "%s", method);
    snprintf(r.target, sizeof(r.target), "job 1");
    r.code = code;
    snprintf(r.result, sizeof(r.result), "%s", code == 0 ? "OK" : "UNAUTHENTICATED: no");
    CHECK_OK(s, hv_store_audit_append(s, &r, keep));
}

/* Audit rows come back newest first, filtered by time, who, method and refusal, paged by seq;
 * only the newest `keep` stay. */
static void test_audit(void) {
    hv_store_t *s = open_ok(tmp_dir);
    audit_add(s, 1000, "default", "Submit", 0, 0);
    audit_add(s, 2000, "alice", "Cancel", 0, 0);
    audit_add(s, 3000, "", "ListJobs", 16, 0);
    audit_add(s, 4000, "default", "DrainNode", 0, 0);
    hv_audit_row_t *rows = NULL;
    size_t n = 0;
    hv_audit_filter_t f = {0};
    CHECK_OK(s, hv_store_audit_list(s, &f, &rows, &n));
    CHECK_U64(n, 4);
    CHECK_STR(rows[0].method, "DrainNode");
    CHECK_STR(rows[3].method, "Submit");
    CHECK_STR(rows[3].peer, "ipv4:127.0.0.1:5000");
    CHECK_STR(rows[3].target, "job 1");
    CHECK_STR(rows[3].result, "OK");
    uint64_t second = rows[1].seq;
    hv_free(rows);
    f.refused_only = 1;
    CHECK_OK(s, hv_store_audit_list(s, &f, &rows, &n));
    CHECK_U64(n, 1);
    CHECK_STR(rows[0].method, "ListJobs");
    CHECK_I64(rows[0].code, 16);
    CHECK_STR(rows[0].who_kind, "none");
    hv_free(rows);
    f = (hv_audit_filter_t){.who = "default"};
    CHECK_OK(s, hv_store_audit_list(s, &f, &rows, &n));
    CHECK_U64(n, 2);
    hv_free(rows);
    f = (hv_audit_filter_t){.method = "cancel"}; /* any case */
    CHECK_OK(s, hv_store_audit_list(s, &f, &rows, &n));
    CHECK_U64(n, 1);
    CHECK_STR(rows[0].who_id, "alice");
    hv_free(rows);
    f = (hv_audit_filter_t){.since_ms = 2000, .limit = 2};
    CHECK_OK(s, hv_store_audit_list(s, &f, &rows, &n));
    CHECK_U64(n, 2);
    CHECK_STR(rows[1].method, "ListJobs");
    hv_free(rows);
    f = (hv_audit_filter_t){.before_seq = second};
    CHECK_OK(s, hv_store_audit_list(s, &f, &rows, &n));
    CHECK_U64(n, 2);
    CHECK_STR(rows[0].method, "Cancel");
    hv_free(rows);
    /* Retention: keep 3 drops the oldest two of five. */
    audit_add(s, 5000, "default", "Undrain", 0, 3);
    f = (hv_audit_filter_t){0};
    CHECK_OK(s, hv_store_audit_list(s, &f, &rows, &n));
    CHECK_U64(n, 3);
    CHECK_STR(rows[2].method, "ListJobs");
    hv_free(rows);
    hv_store_close(s);
}

/* Join tokens: stored by id with the secret's hash; a use counts only while the token is
 * usable (not revoked, not expired, uses left). */
static void test_join_tokens(void) {
    hv_store_t *s = open_ok(tmp_dir);
    hv_jtoken_row_t t = {0};
    snprintf(t.id, sizeof(t.id), "abc123");
    snprintf(t.secret_sha256, sizeof(t.secret_sha256), "%064d", 0);
    t.created_ms = 1000;
    t.expires_ms = 5000;
    t.max_uses = 2;
    snprintf(t.created_by, sizeof(t.created_by), "default");
    CHECK_OK(s, hv_store_jtoken_insert(s, &t));
    CHECK_RC(hv_store_jtoken_insert(s, &t), HV_EEXIST);
    hv_jtoken_row_t u = {0};
    snprintf(u.id, sizeof(u.id), "zzz999");
    snprintf(u.secret_sha256, sizeof(u.secret_sha256), "%064d", 1);
    u.created_ms = 2000;
    CHECK_OK(s, hv_store_jtoken_insert(s, &u));

    CHECK_OK(s, hv_store_jtoken_use(s, "abc123", 2000));
    CHECK_RC(hv_store_jtoken_use(s, "abc123", 6000), HV_ENOTFOUND); /* expired */
    CHECK_OK(s, hv_store_jtoken_use(s, "abc123", 3000));
    CHECK_RC(hv_store_jtoken_use(s, "abc123", 3000), HV_ENOTFOUND); /* no uses left */
    CHECK_RC(hv_store_jtoken_use(s, "nope00", 3000), HV_ENOTFOUND);
    hv_jtoken_row_t got;
    CHECK_OK(s, hv_store_jtoken_get(s, "abc123", &got));
    CHECK_U64(got.uses, 2);
    CHECK_U64(got.max_uses, 2);
    CHECK_U64(got.expires_ms, 5000);
    CHECK_STR(got.created_by, "default");
    CHECK_RC(hv_store_jtoken_get(s, "nope00", &got), HV_ENOTFOUND);

    CHECK_OK(s, hv_store_jtoken_use(s, "zzz999", 1u << 30)); /* never expires, no limit */
    CHECK_OK(s, hv_store_jtoken_revoke(s, "zzz999", 7000));
    CHECK_RC(hv_store_jtoken_revoke(s, "zzz999", 8000), HV_ENOTFOUND);
    CHECK_RC(hv_store_jtoken_use(s, "zzz999", 7001), HV_ENOTFOUND);
    hv_jtoken_row_t *rows = NULL;
    size_t n = 0;
    CHECK_OK(s, hv_store_jtoken_list(s, &rows, &n));
    CHECK_U64(n, 2);
    CHECK_STR(rows[0].id, "abc123");
    CHECK_U64(rows[1].revoked_ms, 7000);
    hv_free(rows);
    hv_store_close(s);
}

static void test_truncated_file(void) {
    /* A database of many pages, closed cleanly (WAL checkpointed into the main file). */
    hv_store_t *s = open_ok(tmp_dir);
    char msg[512];
    memset(msg, 'x', sizeof(msg) - 1);
    msg[sizeof(msg) - 1] = '\0';
    CHECK_OK(s, hv_store_begin(s));
    for (int i = 0; i < 400; i++) {
        CHECK_OK(s, hv_store_event_append(s, (uint64_t)i, 0, "filler", msg, NULL, NULL));
    }
    CHECK_OK(s, hv_store_commit(s));
    hv_store_close(s);

    char path[300];
    path_in(path, sizeof(path), "state.db");
    size_t full_len = 0;
    uint8_t *full = read_all(path, &full_len);
    CHECK(full != NULL && full_len > 16 * 4096);
    const size_t cuts[] = {100, 4096, (full_len / 2) & ~(size_t)4095, full_len - 4096};
    for (size_t i = 0; full != NULL && i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        write_all(path, full, cuts[i]);
        char what[64];
        snprintf(what, sizeof(what), "truncated to %zu of %zu bytes", cuts[i], full_len);
        expect_corrupt(what);
    }
    hv_free(full);
}

static void test_damaged_page(void) {
    /* A page in the middle overwritten with junk: the header and the schema still read fine,
     * only PRAGMA quick_check finds the damage. */
    hv_store_t *s = open_ok(tmp_dir);
    char msg[512];
    memset(msg, 'y', sizeof(msg) - 1);
    msg[sizeof(msg) - 1] = '\0';
    CHECK_OK(s, hv_store_begin(s));
    for (int i = 0; i < 400; i++) {
        CHECK_OK(s, hv_store_event_append(s, 1, 0, "filler", msg, NULL, NULL));
    }
    CHECK_OK(s, hv_store_commit(s));
    hv_store_close(s);

    char path[300];
    path_in(path, sizeof(path), "state.db");
    size_t len = 0;
    uint8_t *data = read_all(path, &len);
    CHECK(data != NULL && len > 16 * 4096);
    if (data == NULL) {
        return;
    }
    size_t page = (len / 4096 / 2) * 4096;
    for (size_t i = 0; i < 4096; i++) {
        data[page + i] = (uint8_t)(i * 37u + 11u);
    }
    write_all(path, data, len);
    hv_free(data);
    expect_corrupt("junk page");
}

static void test_unwritable_dir(void) {
    char err[512] = "";
    hv_store_t *s = NULL;
    /* A data dir below a regular file can never be created. */
    char file[300], dir[400];
    path_in(file, sizeof(file), "plainfile");
    write_all(file, "x", 1);
    snprintf(dir, sizeof(dir), "%s/data", file);
    hv_err rc = hv_store_open(dir, &s, err, sizeof(err));
    CHECK(rc != HV_OK);
    CHECK(s == NULL);
    CHECK_CONTAINS(err, "cannot create data dir");
    CHECK_CONTAINS(err, dir);
    CHECK_CONTAINS(err, "Not a directory");

    /* The data dir itself is a file. */
    err[0] = '\0';
    rc = hv_store_open(file, &s, err, sizeof(err));
    CHECK(rc != HV_OK);
    CHECK_CONTAINS(err, "is not a directory");

    /* state.db is a directory. */
    char sub[300], db[400];
    path_in(sub, sizeof(sub), "d");
    snprintf(db, sizeof(db), "%s/state.db", sub);
    CHECK(mkdir(sub, 0700) == 0 && mkdir(db, 0700) == 0);
    err[0] = '\0';
    rc = hv_store_open(sub, &s, err, sizeof(err));
    CHECK(rc != HV_OK);
    CHECK_CONTAINS(err, "not a regular file");

    /* A read-only dir (root ignores modes, so only as another user). */
    char ro[300];
    path_in(ro, sizeof(ro), "ro");
    CHECK(mkdir(ro, 0500) == 0);
    if (geteuid() != 0) {
        err[0] = '\0';
        rc = hv_store_open(ro, &s, err, sizeof(err));
        CHECK_RC(rc, HV_EPERM);
        CHECK_CONTAINS(err, "is not writable");
        CHECK_CONTAINS(err, ro);
    } else {
        fprintf(stderr, "  (read-only dir check skipped: running as root)\n");
    }

    /* No data dir given. */
    err[0] = '\0';
    CHECK_RC(hv_store_open("", &s, err, sizeof(err)), HV_EINVAL);
    CHECK_CONTAINS(err, "no data dir");

    /* A data dir that does not exist yet is created, parents included. */
    char deep[300];
    path_in(deep, sizeof(deep), "a/b/c");
    s = open_ok(deep);
    hv_store_close(s);
    struct stat st;
    char deep_db[400];
    snprintf(deep_db, sizeof(deep_db), "%s/state.db", deep);
    CHECK(stat(deep_db, &st) == 0 && S_ISREG(st.st_mode));
}

static void test_crash_recovery(void) {
    /* The head is SIGKILLed right after a commit: nothing is closed, the WAL is not
     * checkpointed. A new head must see every committed write and none of the open one. */
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        hv_store_t *s = NULL;
        char err[512];
        if (hv_store_open(tmp_dir, &s, err, sizeof(err)) != HV_OK) {
            _exit(3);
        }
        hv_job_row_t j = {.name = "survivor", .state = "running", .np = 2};
        if (hv_store_job_insert(s, &j) != HV_OK ||
            hv_store_event_append(s, j.id, 0, "started", "before the crash", NULL, NULL) != HV_OK ||
            hv_store_begin(s) != HV_OK) {
            _exit(4);
        }
        hv_job_row_t open_txn = {.name = "uncommitted", .state = "pending"};
        if (hv_store_job_insert(s, &open_txn) != HV_OK) {
            _exit(5);
        }
        kill(getpid(), SIGKILL);
        _exit(6);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    char wal[300];
    path_in(wal, sizeof(wal), "state.db-wal");
    CHECK(access(wal, F_OK) == 0); // WAL mode, and the crash left the log behind

    hv_store_t *s = open_ok(tmp_dir);
    hv_job_row_t *jobs = NULL;
    size_t n = 0;
    CHECK_OK(s, hv_store_job_list(s, 0, 0, &jobs, &n));
    CHECK_U64(n, 1);
    if (n == 1) {
        CHECK_STR(jobs[0].name, "survivor");
        CHECK_STR(jobs[0].state, "running");
        CHECK_U64(jobs[0].np, 2);
    }
    hv_store_job_free_list(jobs, n);
    hv_event_row_t *ev = NULL;
    CHECK_OK(s, hv_store_event_list(s, 0, 0, 0, &ev, &n));
    CHECK_U64(n, 1);
    hv_store_event_free_list(ev, n);
    hv_store_close(s);
}

static void test_oom(void) {
    /* Fail each allocation of a read in turn: every one returns HV_ENOMEM or succeeds, and
     * nothing leaks (ASan checks). */
    hv_store_t *s = open_ok(tmp_dir);
    hv_job_row_t j = {.name = "n",
                      .state = "pending",
                      .reason = "r",
                      .spec = (uint8_t *)spec_bytes,
                      .spec_len = sizeof(spec_bytes)};
    for (int i = 0; i < 3; i++) {
        CHECK_OK(s, hv_store_job_insert(s, &j));
    }
    int saw_enomem = 0, saw_ok = 0;
    for (long k = 1; k < 40 && !saw_ok; k++) {
        hv_job_row_t *rows = NULL;
        size_t n = 0;
        hv_mem_fail_after(k);
        hv_err rc = hv_store_job_list(s, 0, 0, &rows, &n);
        hv_mem_fail_after(0);
        if (rc == HV_OK) {
            saw_ok = 1;
            CHECK_U64(n, 3);
            hv_store_job_free_list(rows, n);
        } else {
            CHECK_RC(rc, HV_ENOMEM);
            CHECK(rows == NULL);
            saw_enomem = 1;
        }
    }
    CHECK(saw_enomem && saw_ok);
    hv_store_close(s);
}

/* History retention: the finished jobs beyond an age or a count are listed oldest first, never
 * an active one; deleting them takes their workers, events and blacklist entries and leaves every
 * other job's rows and the node events (job 0) alone; a job that became active again is kept. */
static void test_history(void) {
    hv_store_t *s = open_ok(tmp_dir);
    /* ended: 1000, 2000, 3000, 4000 (finished); 5: running; 6: cancelled while pending (no end,
     * submitted at 500). */
    static const struct {
        const char *state;
        uint64_t submitted, ended;
    } jobs[] = {{"succeeded", 100, 1000}, {"failed", 200, 2000}, {"cancelled", 300, 3000},
                {"succeeded", 400, 4000}, {"running", 450, 0},   {"cancelled", 500, 0}};
    uint64_t id[6];
    for (int i = 0; i < 6; i++) {
        hv_job_row_t j = {.name = "j",
                          .state = (char *)jobs[i].state,
                          .np = 1,
                          .submitted_ms = jobs[i].submitted,
                          .ended_ms = jobs[i].ended};
        CHECK_OK(s, hv_store_job_insert(s, &j));
        id[i] = j.id;
        hv_worker_row_t w = {.job_id = j.id, .node_id = 1, .gpu = -1, .state = "exited"};
        CHECK_OK(s, hv_store_worker_insert(s, &w));
        CHECK_OK(s, hv_store_event_append(s, j.id, 0, "job.submit", "m", NULL, NULL));
        hv_blacklist_row_t b = {.job_id = j.id, .node_id = 1, .reason = "r", .strikes = 1};
        CHECK_OK(s, hv_store_blacklist_put(s, &b));
    }
    CHECK_OK(s, hv_store_event_append(s, 0, 1, "node.dead", "node 1 died", NULL, NULL));
    uint64_t *ids = NULL;
    size_t n = 9;
    /* No retention: nothing. */
    CHECK_OK(s, hv_store_history_expired(s, 0, 0, 100, &ids, &n));
    CHECK_EQ(n, 0);
    CHECK(ids == NULL);
    /* By age: ended before 2500 (job 6 counts from its submission, 500). */
    CHECK_OK(s, hv_store_history_expired(s, 2500, 0, 100, &ids, &n));
    CHECK_EQ(n, 3);
    if (n == 3) {
        CHECK_U64(ids[0], id[5]);
        CHECK_U64(ids[1], id[0]);
        CHECK_U64(ids[2], id[1]);
    }
    hv_free(ids);
    /* By count: the newest 2 finished stay (4000, 3000); the running job is not counted. */
    CHECK_OK(s, hv_store_history_expired(s, 0, 2, 100, &ids, &n));
    CHECK_EQ(n, 3);
    hv_free(ids);
    /* Both, and the cap: the union, at most cap of it, oldest first. */
    CHECK_OK(s, hv_store_history_expired(s, 2500, 3, 2, &ids, &n));
    CHECK_EQ(n, 2);
    if (n == 2) {
        CHECK_U64(ids[0], id[5]);
        CHECK_U64(ids[1], id[0]);
    }
    hv_free(ids);

    /* Delete 1 and 2, and ask for 5 (running: kept) too. */
    uint64_t del[] = {id[0], id[1], id[4], 999};
    size_t deleted = 0;
    CHECK_OK(s, hv_store_history_delete(s, del, 4, &deleted));
    CHECK_EQ(deleted, 2);
    hv_job_row_t got;
    memset(&got, 0, sizeof(got));
    CHECK_RC(hv_store_job_get(s, id[0], &got), HV_ENOTFOUND);
    CHECK_RC(hv_store_job_get(s, id[1], &got), HV_ENOTFOUND);
    CHECK_OK(s, hv_store_job_get(s, id[4], &got));
    hv_store_job_fini(&got);
    CHECK_OK(s, hv_store_job_get(s, id[2], &got));
    hv_store_job_fini(&got);
    hv_event_row_t *ev = NULL;
    size_t nev = 0;
    CHECK_OK(s, hv_store_event_list(s, id[0], 0, 0, &ev, &nev));
    CHECK_EQ(nev, 0);
    hv_store_event_free_list(ev, nev);
    CHECK_OK(s, hv_store_event_list(s, id[4], 0, 0, &ev, &nev));
    CHECK_EQ(nev, 1);
    hv_store_event_free_list(ev, nev);
    CHECK_OK(s, hv_store_event_list(s, 0, 0, 0, &ev, &nev));
    CHECK_EQ(nev, 5); /* jobs 3..6 and the node's */
    hv_store_event_free_list(ev, nev);
    hv_worker_row_t *ws = NULL;
    size_t nw = 0;
    CHECK_OK(s, hv_store_worker_list(s, 0, 0, &ws, &nw));
    CHECK_EQ(nw, 4);
    hv_store_worker_free_list(ws, nw);
    hv_blacklist_row_t *bl = NULL;
    size_t nb = 0;
    CHECK_OK(s, hv_store_blacklist_list(s, 0, &bl, &nb));
    CHECK_EQ(nb, 4);
    hv_store_blacklist_free_list(bl, nb);
    /* Ids are never handed out again (AUTOINCREMENT): a new job is not job 1. */
    hv_job_row_t j7 = {.name = "new", .state = "pending"};
    CHECK_OK(s, hv_store_job_insert(s, &j7));
    CHECK(j7.id > id[5]);
    /* Inside an open transaction it refuses (the caller's transaction is not committed). */
    CHECK_OK(s, hv_store_begin(s));
    CHECK_RC(hv_store_history_delete(s, del, 1, &deleted), HV_ESTATE);
    CHECK_OK(s, hv_store_rollback(s));
    hv_store_close(s);
}

/* ---- runner ---------------------------------------------------------------------------------- */

/* The digests of a fake spec: its bytes name them ("A" -> aa, "B" -> bb). */
static size_t fake_digests(void *ud, const uint8_t *spec, size_t len, char (*out)[65], size_t cap) {
    (void)ud;
    size_t n = 0;
    for (size_t i = 0; i < len && n < cap; i++) {
        snprintf(out[n++], 65, "%c%c", spec[i] + 32, spec[i] + 32);
    }
    return n;
}

/* v9: a v8 database with two jobs migrates; until the fill ran no artifact is removed (the
 * references are incomplete); the fill reads the specs once; then only an artifact no job uses
 * goes (row deleted, returned for its file); a job inserted with its artifacts protects them
 * until the history deletes it, then they go too. */
static void test_job_artifacts(void) {
    char err[512] = "";
    CHECK_RC(hv__store_create_at_version(
                 tmp_dir, 8,
                 "INSERT INTO jobs (id, name, state, spec) VALUES (1, 'a', 'succeeded', 'A');"
                 "INSERT INTO jobs (id, name, state, spec) VALUES (2, 'b', 'running', 'AB');",
                 err, sizeof(err)),
             HV_OK);
    hv_store_t *s = open_ok(tmp_dir);
    CHECK_I64(hv_store_schema_version(s), HV_STORE_SCHEMA_VERSION);
    CHECK_I64(hv_store_job_artifacts_complete(s), 0);
    hv_artifact_row_t *rows = NULL;
    size_t n = 0, filled = 0;
    CHECK_RC(hv_store_artifacts_unused_delete(s, UINT64_MAX >> 2, 10, &rows, &n), HV_ESTATE);
    static const char *const dg[] = {"aa", "bb", "cc", "zz"};
    for (size_t i = 0; i < 4; i++) {
        hv_artifact_row_t a = {.digest = (char *)dg[i], .path = "/nowhere", .created_ms = 5};
        CHECK_OK(s, hv_store_artifact_put(s, &a));
    }
    CHECK_OK(s, hv_store_job_artifacts_fill(s, fake_digests, NULL, &filled));
    CHECK_U64(filled, 2);
    CHECK_I64(hv_store_job_artifacts_complete(s), 1);
    CHECK_OK(s, hv_store_job_artifacts_fill(s, fake_digests, NULL, &filled)); /* once only */
    CHECK_U64(filled, 0);
    /* Nothing older than 5: nothing goes. Then only cc and zz (no job uses them). */
    CHECK_OK(s, hv_store_artifacts_unused_delete(s, 5, 10, &rows, &n));
    CHECK_U64(n, 0);
    hv_store_artifact_free_list(rows, n);
    const char *const uses[] = {"cc"};
    hv_job_row_t j = {.name = "c", .state = "pending", .artifacts = uses, .nartifacts = 1};
    CHECK_OK(s, hv_store_job_insert(s, &j));
    CHECK_OK(s, hv_store_artifacts_unused_delete(s, 6, 10, &rows, &n));
    CHECK_U64(n, 1);
    if (n == 1) {
        CHECK_STR(rows[0].digest, "zz");
        CHECK_STR(rows[0].path, "/nowhere");
    }
    hv_store_artifact_free_list(rows, n);
    hv_artifact_row_t r;
    CHECK_RC(hv_store_artifact_get(s, "zz", &r), HV_ENOTFOUND);
    /* Job 1 goes with the history: aa is still used by job 2, bb too; nothing goes. */
    uint64_t ids[] = {1};
    size_t deleted = 0;
    CHECK_OK(s, hv_store_history_delete(s, ids, 1, &deleted));
    CHECK_U64(deleted, 1);
    CHECK_OK(s, hv_store_artifacts_unused_delete(s, 6, 10, &rows, &n));
    CHECK_U64(n, 0);
    hv_store_artifact_free_list(rows, n);
    /* An artifact no job uses but an actor that is not dead does (its digest is in its packed
     * spec) stays; once the actor is dead it goes. */
    hv_artifact_row_t dd = {.digest = "dd", .path = "/nowhere", .created_ms = 5};
    CHECK_OK(s, hv_store_artifact_put(s, &dd));
    uint8_t spec[] = "\x12\x04\x0a\x02"
                     "dd";
    hv_actor_row_t ar = {.id = 7,
                         .name = "e",
                         .ns = "default",
                         .class_name = "c",
                         .spec = spec,
                         .spec_len = sizeof(spec) - 1,
                         .reason = "",
                         .address = ""};
    snprintf(ar.state, sizeof(ar.state), "alive");
    CHECK_OK(s, hv_store_actor_put(s, &ar));
    CHECK_OK(s, hv_store_artifacts_unused_delete(s, 6, 10, &rows, &n));
    CHECK_U64(n, 0);
    hv_store_artifact_free_list(rows, n);
    snprintf(ar.state, sizeof(ar.state), "dead");
    CHECK_OK(s, hv_store_actor_put(s, &ar));
    CHECK_OK(s, hv_store_artifacts_unused_delete(s, 6, 10, &rows, &n));
    CHECK_U64(n, 1);
    if (n == 1) {
        CHECK_STR(rows[0].digest, "dd");
    }
    hv_store_artifact_free_list(rows, n);
    hv_store_close(s);
}

/* A call on a row that is not there: HV_ENOTFOUND and the exact words users are shown. */
static void check_missing(hv_store_t *s, hv_err rc, const char *want) {
    CHECK_RC(rc, HV_ENOTFOUND);
    CHECK_STR(hv_store_last_error(s), want);
}

/* The words each call gives for a missing row (hv_store_last_error; the CLIs show them). */
static void test_not_found_texts(void) {
    hv_store_t *s = open_ok(tmp_dir);
    hv_node_row_t node;
    hv_job_row_t job;
    hv_worker_row_t worker;
    hv_artifact_row_t art;
    hv_instance_row_t inst;
    hv_jtoken_row_t tok;
    hv_copy_row_t copy;
    const hv_job_row_t job_upd = {.id = 42, .state = "running"};
    const hv_worker_row_t worker_upd = {.id = 43, .job_id = 1, .state = "pending"};
    check_missing(s, hv_store_node_get(s, 7, &node), "no node 7");
    check_missing(s, hv_store_node_set_state(s, 8, "dead", 1), "node set state: no node 8");
    check_missing(s, hv_store_job_get(s, 9, &job), "no job 9");
    check_missing(s, hv_store_job_update(s, &job_upd), "job update: no job 42");
    check_missing(s, hv_store_worker_get(s, 10, &worker), "no worker 10");
    check_missing(s, hv_store_worker_update(s, &worker_upd), "worker update: no worker 43");
    check_missing(s, hv_store_artifact_get(s, "d1", &art), "no artifact d1");
    check_missing(s, hv_store_artifact_get(s, NULL, &art), "no artifact (null)");
    check_missing(s, hv_store_artifact_touch(s, "d2", 5), "artifact touch: no artifact d2");
    check_missing(s, hv_store_instance_get(s, "i-1", &inst), "no instance i-1");
    check_missing(s, hv_store_jtoken_get(s, "t1", &tok), "join token get: no join token t1");
    check_missing(s, hv_store_jtoken_revoke(s, "t2", 5),
                  "join token revoke: no usable join token t2");
    check_missing(s, hv_store_jtoken_use(s, "t3", 5), "join token use: no usable join token t3");
    check_missing(s, hv_store_copy_get(s, 11, &copy), "state copy get: job 11 has no copy");
    check_missing(s, hv_store_durable_get(s, 12, &copy), "durable copy get: job 12 has no copy");
    check_missing(s, hv_store_blacklist_remove(s, 13, 14),
                  "blacklist remove: node 14 is not blacklisted for job 13");
    hv_store_close(s);
}

static const hv_check_case_t cases[] = {
    {"persist", test_persist},
    {"node_upsert", test_node_upsert},
    {"job_list", test_job_list},
    {"worker_list", test_worker_list},
    {"events", test_events},
    {"artifacts", test_artifacts},
    {"blacklist", test_blacklist},
    {"rollback", test_rollback},
    {"migrate_v1", test_migrate_v1},
    {"migrate_v2", test_migrate_v2},
    {"elastic_job", test_elastic_job},
    {"newer_version", test_newer_version},
    {"garbage_file", test_garbage_file},
    {"truncated_file", test_truncated_file},
    {"empty_file", test_empty_file},
    {"epoch", test_epoch},
    {"migrate_v5", test_migrate_v5},
    {"state_copies", test_state_copies},
    {"durable_copies", test_durable_copies},
    {"peer_copies", test_peer_copies},
    {"tput", test_tput},
    {"revoked_import", test_revoked_import},
    {"actors", test_actors},
    {"actor_figures", test_actor_figures},
    {"audit", test_audit},
    {"join_tokens", test_join_tokens},
    {"damaged_page", test_damaged_page},
    {"unwritable_dir", test_unwritable_dir},
    {"crash_recovery", test_crash_recovery},
    {"oom", test_oom},
    {"history", test_history},
    {"job_artifacts", test_job_artifacts},
    {"event_fields", test_event_fields},
    {"event_actor", test_event_actor},
    {"migrate_v15", test_migrate_v15},
    {"not_found_texts", test_not_found_texts},
};

int main(int argc, char **argv) {
    hv_log_set_level(HV_LOG_WARN); // HV_LOG_LEVEL in the environment overrides
    hv_log_init("store_test");
    return hv_check_main(cases, sizeof(cases) / sizeof(cases[0]), argc, argv, make_tmp, remove_tmp);
}
