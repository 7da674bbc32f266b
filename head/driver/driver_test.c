/*
 * driver_test: store first (issue 15 §3). A real driver on a real store in a temporary data dir,
 * with a fake io that records what the driver asks of the services. The store is made to fail
 * (every write, as on a read-only file, or one table's writes through a TEMP trigger) at each
 * node-state, strike, artifact-use and event write, and each case shows that nothing was acted
 * on or announced that was not stored (no order, no state change in memory or in the store, no
 * bar, no event told to the observer or the job's watchers) and that the head says so (an error
 * for the caller with sqlite's words, hv_driver_store_trouble); then that the same input works
 * once the store does, and that a waiting event is written then, in order, not lost. The access
 * commands too: a node credential's revocation and a join token's are stored before anything
 * acts on them.
 */
#include "driver.h"
#include "hv_check.h"

#include "drv_test.h"

#include "artifacts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mem.h"
#include "util.h"

/* ---- the fake io ----------------------------------------------------------------------------- */

#define MAX_SEEN 16

typedef struct fake_s {
    drvt_orders_t o;         /* the orders */
    size_t drops;            /* drop_session calls */
    size_t revoked;          /* revoked calls (the access table told) */
    char seen[MAX_SEEN][32]; /* the kinds of the events told to the observer, in order */
    uint64_t seen_job[MAX_SEEN];
    size_t nseen;
} fake_t;

static void fake_observe(void *ud, uint64_t job_id, uint64_t node_id, const char *kind,
                         const hv_ev_fields_t *ev, const char *data) {
    fake_t *f = ud;
    (void)node_id;
    (void)ev;
    (void)data;
    if (f->nseen < MAX_SEEN) {
        snprintf(f->seen[f->nseen], sizeof(f->seen[0]), "%s", kind);
        f->seen_job[f->nseen++] = job_id;
    }
}

static hv_err fake_order(void *ud, uint64_t node_id, const hv_order_t *o) {
    drvt_record(&((fake_t *)ud)->o, node_id, o);
    return HV_OK;
}

static void fake_drop(void *ud, uint64_t node_id) {
    (void)node_id;
    ((fake_t *)ud)->drops++;
}

static hv_err fake_revoked(void *ud, uint64_t node_id, uint64_t incarnation) {
    (void)node_id;
    (void)incarnation;
    fake_t *f = ud;
    f->revoked++;
    CHECK_EQ(f->drops, 0); /* the credential is refused before its session ends */
    return HV_OK;
}

static size_t orders_of(const fake_t *f, hv_order_kind_t kind) {
    size_t n = 0;
    for (size_t i = 0; i < f->o.n; i++) {
        n += f->o.kind[i] == kind;
    }
    return n;
}

/* ---- a head in a temporary data dir ----------------------------------------------------------- */

typedef struct head_s {
    char dir[64];
    hv_head_config_t cfg;
    hv_store_t *store;
    hv_driver_t *d;
    fake_t io;
} head_t;

static head_t H;

static void setup(void) {
    memset(&H, 0, sizeof(H));
    drvt_open(H.dir, "/tmp/hv-driver-test-XXXXXX", &H.cfg, &H.store);
    hv_driver_io_t io = {
        .order = fake_order, .drop_session = fake_drop, .revoked = fake_revoked, .ud = &H.io};
    CHECK_RC(hv_driver_create(&H.cfg, H.store, &io, &H.d), HV_OK);
    CHECK_RC(hv_driver_load(H.d), HV_OK);
    hv_driver_set_observer(H.d, fake_observe, &H.io);
}

static void teardown(void) {
    hv__store_fail_writes(H.store, 0);
    hv_driver_destroy(H.d);
    drvt_close(H.dir, &H.cfg, H.store);
}

/* A node joined with an open session. */
static uint64_t join(const char *name, uint32_t slots) {
    hv_node_info_t info = drvt_node(name, slots);
    return drvt_join(H.d, &info, NULL, 0);
}

/* The node's state as the store has it ("" when unknown). */
static void stored_state(uint64_t id, char *buf, size_t len) {
    hv_node_row_t r;
    buf[0] = '\0';
    if (hv_store_node_get(H.store, id, &r) == HV_OK) {
        snprintf(buf, len, "%s", r.state);
        hv_store_node_fini(&r);
    }
}

#define CHECK_STORED(id, want)                                                                     \
    do {                                                                                           \
        char st_[32];                                                                              \
        stored_state(id, st_, sizeof(st_));                                                        \
        CHECK_STR(st_, want);                                                                      \
    } while (0)

/* ---- cases ------------------------------------------------------------------------------------ */

static void case_drain_not_stored(void) {
    uint64_t a = join("a", 1);
    const hv_dnode_t *n = hv_driver_node(H.d, a);
    char err[300] = "";
    CHECK_RC(hv__store_fail_writes(H.store, 1), HV_OK);
    CHECK_RC(hv_driver_node_drain(H.d, a, 1, "test", 0, 0, err, sizeof(err)), HV_EUNAVAIL);
    CHECK(strstr(err, "the head could not store node a as draining") != NULL);
    CHECK(strstr(err, "readonly") != NULL); /* sqlite's words */
    CHECK_EQ(n->state, HV_NODE_ALIVE);
    CHECK_EQ(orders_of(&H.io, HV_ORDER_DRAIN), 0);
    CHECK(hv_driver_store_trouble(H.d) != NULL);
    CHECK_STORED(a, "alive");

    CHECK_RC(hv__store_fail_writes(H.store, 0), HV_OK);
    CHECK_RC(hv_driver_node_drain(H.d, a, 1, "test", 0, 0, err, sizeof(err)), HV_OK);
    CHECK_EQ(n->state, HV_NODE_DRAINING);
    CHECK_EQ(orders_of(&H.io, HV_ORDER_DRAIN), 1);
    CHECK_STORED(a, "draining");

    /* Undrain: the same rule. */
    CHECK_RC(hv__store_fail_writes(H.store, 1), HV_OK);
    CHECK_RC(hv_driver_node_drain(H.d, a, 0, "test", 0, 0, err, sizeof(err)), HV_EUNAVAIL);
    CHECK(strstr(err, "the head could not store node a as alive") != NULL);
    CHECK_EQ(n->state, HV_NODE_DRAINING);
    CHECK_EQ(orders_of(&H.io, HV_ORDER_UNDRAIN), 0);
    CHECK_RC(hv__store_fail_writes(H.store, 0), HV_OK);
    CHECK_RC(hv_driver_node_drain(H.d, a, 0, "test", 0, 0, err, sizeof(err)), HV_OK);
    CHECK_EQ(n->state, HV_NODE_ALIVE);
    CHECK_EQ(orders_of(&H.io, HV_ORDER_UNDRAIN), 1);
    CHECK_STORED(a, "alive");
}

/* The lease ran out: "dead" is stored before the node's session is dropped and its workers are
 * given up on; while it cannot be, the node stays as it was and each tick tries again. Then a
 * dead node's return is stored before its session is taken. */
/* Several nodes drained as one input: when one of them cannot be stored none changes (in
 * memory, in the store, no order); then all are stored and all ordered; an undrain of one that
 * is not draining changes none and names it. */
static void case_drain_many_atomic(void) {
    uint64_t ids[3] = {join("a", 1), join("b", 1), join("c", 1)};
    char err[300] = "";
    size_t bad = 9;
    CHECK_RC(hv__store_exec(H.store, "CREATE TEMP TRIGGER b_fail BEFORE UPDATE ON nodes "
                                     "WHEN NEW.name = 'b' BEGIN "
                                     "SELECT RAISE(FAIL, 'disk I/O error (injected)'); END"),
             HV_OK);
    CHECK_RC(hv_driver_nodes_drain(H.d, ids, 3, 1, "test", &bad, err, sizeof(err)), HV_EUNAVAIL);
    CHECK(strstr(err, "the head could not store the nodes as draining") != NULL);
    CHECK(strstr(err, "injected") != NULL);
    for (size_t i = 0; i < 3; i++) {
        CHECK_EQ(hv_driver_node(H.d, ids[i])->state, HV_NODE_ALIVE);
        CHECK_STORED(ids[i], "alive");
    }
    CHECK_EQ(orders_of(&H.io, HV_ORDER_DRAIN), 0);
    CHECK_RC(hv__store_exec(H.store, "DROP TRIGGER b_fail"), HV_OK);
    CHECK_RC(hv_driver_nodes_drain(H.d, ids, 3, 1, "test", &bad, err, sizeof(err)), HV_OK);
    for (size_t i = 0; i < 3; i++) {
        CHECK_EQ(hv_driver_node(H.d, ids[i])->state, HV_NODE_DRAINING);
        CHECK_STORED(ids[i], "draining");
    }
    CHECK_EQ(orders_of(&H.io, HV_ORDER_DRAIN), 3);
    uint64_t d = join("d", 1), some[2] = {ids[0], d};
    CHECK_RC(hv_driver_nodes_drain(H.d, some, 2, 0, "test", &bad, err, sizeof(err)), HV_ESTATE);
    CHECK_EQ(bad, 1);
    CHECK_STR(err, "node d is alive, not draining");
    CHECK_EQ(hv_driver_node(H.d, ids[0])->state, HV_NODE_DRAINING);
    uint64_t twice[2] = {ids[0], ids[0]};
    CHECK_RC(hv_driver_nodes_drain(H.d, twice, 2, 0, "test", &bad, err, sizeof(err)), HV_EINVAL);
    CHECK_EQ(bad, 1);
    CHECK_EQ(orders_of(&H.io, HV_ORDER_UNDRAIN), 0);
}

static void case_dead_and_back_not_stored(void) {
    uint64_t a = join("a", 1);
    const hv_dnode_t *n = hv_driver_node(H.d, a);
    uint64_t later = hv_now_ms() + H.cfg.lease_ms + 1000;
    CHECK_RC(hv__store_fail_writes(H.store, 1), HV_OK);
    hv_driver_tick(H.d, later);
    hv_driver_tick(H.d, later + 200);
    CHECK_EQ(n->state, HV_NODE_ALIVE);
    CHECK_EQ(n->has_session, 1);
    CHECK_EQ(H.io.drops, 0);
    CHECK(hv_driver_store_trouble(H.d) != NULL);
    CHECK_STORED(a, "alive");

    CHECK_RC(hv__store_fail_writes(H.store, 0), HV_OK);
    hv_driver_tick(H.d, later + 400);
    CHECK_EQ(n->state, HV_NODE_DEAD);
    CHECK_EQ(H.io.drops, 1);
    CHECK_STORED(a, "dead");

    char err[300] = "";
    CHECK_RC(hv__store_fail_writes(H.store, 1), HV_OK);
    CHECK_RC(hv_driver_node_attach(H.d, a, 7, NULL, 0, err, sizeof(err)), HV_EUNAVAIL);
    CHECK(strstr(err, "the head could not store node a as alive") != NULL);
    CHECK_EQ(n->state, HV_NODE_DEAD);
    CHECK_EQ(n->has_session, 0);
    CHECK_RC(hv__store_fail_writes(H.store, 0), HV_OK);
    CHECK_RC_MSG(hv_driver_node_attach(H.d, a, 7, NULL, 0, err, sizeof(err)), HV_OK, err);
    CHECK_EQ(n->state, HV_NODE_ALIVE);
    CHECK_STORED(a, "alive");
}

/* An elastic job with a blacklist on nodes a and b; the worker on a fails. With fail_bl, the
 * blacklist table's writes fail: the strike is not applied. Returns the bars held against a. */
static size_t strike_scenario(int fail_bl, uint64_t *stored) {
    uint64_t a = join("a", 1);
    join("b", 1);
    hv_job_submit_t s = {.name = "j",
                         .np = 2,
                         .elastic = 1,
                         .min_np = 1,
                         .max_np = 2,
                         .cooldown_set = 1,
                         .cooldown_min_s = 30,
                         .cooldown_max_s = 60};
    uint64_t job = 0;
    uint32_t np = 0;
    char err[300];
    CHECK_RC_MSG(hv_driver_submit(H.d, &s, &job, &np, err, sizeof(err)), HV_OK, err);
    hv_driver_schedule(H.d);
    CHECK_EQ(orders_of(&H.io, HV_ORDER_SPAWN), 2);
    uint64_t wa = 0;
    for (size_t i = 0; i < H.io.o.n; i++) {
        if (H.io.o.kind[i] == HV_ORDER_SPAWN) {
            CHECK_RC(hv_driver_worker_started(H.d, H.io.o.node[i], H.io.o.worker[i], 100 + (int)i),
                     HV_OK);
            if (H.io.o.node[i] == a) {
                wa = H.io.o.worker[i];
            }
        }
    }
    CHECK(wa != 0);
    if (fail_bl) {
        CHECK_RC(hv__store_exec(H.store, "CREATE TEMP TRIGGER bl_fail BEFORE INSERT ON blacklist "
                                         "BEGIN SELECT RAISE(FAIL, 'disk I/O error (injected)'); "
                                         "END"),
                 HV_OK);
    }
    CHECK_RC(hv_driver_worker_exited(H.d, a, wa, 1, 0, "exit code 1"), HV_OK);
    const hv_djob_t *jobs[4];
    const hv_dbl_t *ents[4];
    size_t bars = hv_driver_node_blacklist(H.d, a, jobs, ents, 4);
    hv_blacklist_row_t *rows = NULL;
    size_t nr = 0;
    CHECK_RC(hv_store_blacklist_list(H.store, job, &rows, &nr), HV_OK);
    *stored = nr;
    hv_store_blacklist_free_list(rows, nr);
    if (fail_bl) {
        CHECK(hv_driver_store_trouble(H.d) != NULL);
        CHECK(strstr(hv_driver_store_trouble(H.d), "injected") != NULL);
    }
    return bars;
}

static void case_strike_stored(void) {
    uint64_t stored = 0;
    CHECK_EQ(strike_scenario(0, &stored), 1);
    CHECK_EQ(stored, 1);
}

static void case_strike_not_stored(void) {
    uint64_t stored = 0;
    CHECK_EQ(strike_scenario(1, &stored), 0); /* not stored, so not applied */
    CHECK_EQ(stored, 0);
}

/* An artifact's use is recorded before it is served (svc_cluster's Fetch answers "try again
 * later" otherwise): the touch reports the store's failure in the caller's words. */
static void case_artifact_touch_not_stored(void) {
    hv_artifacts_limits_t lim = {
        .max_upload = 1 << 20, .quota = 1 << 24, .upload_timeout_ms = 1000};
    hv_artifacts_t *a = NULL;
    char err[4600];
    CHECK_RC_MSG(hv_artifacts_open(H.dir, H.store, &lim, &a, err, sizeof(err)), HV_OK, err);
    char digest[65];
    snprintf(digest, sizeof(digest), "%064d", 7);
    hv_artifact_row_t r = {
        .digest = digest, .path = "/x", .size = 1, .created_ms = 1, .last_used_ms = 1};
    CHECK_RC(hv_store_artifact_put(H.store, &r), HV_OK);
    CHECK_RC(hv__store_fail_writes(H.store, 1), HV_OK);
    CHECK(hv_artifacts_touch(a, digest, err, sizeof(err)) != HV_OK);
    CHECK(strstr(err, "the head could not record the use of artifact") != NULL);
    CHECK(strstr(err, "readonly") != NULL);
    CHECK_RC(hv__store_fail_writes(H.store, 0), HV_OK);
    hv_artifact_row_t got;
    CHECK_RC(hv_store_artifact_get(H.store, digest, &got), HV_OK);
    CHECK_EQ(got.last_used_ms, 1);
    hv_store_artifact_fini(&got);
    CHECK_RC(hv_artifacts_touch(a, digest, err, sizeof(err)), HV_OK);
    CHECK_RC(hv_store_artifact_get(H.store, digest, &got), HV_OK);
    CHECK(got.last_used_ms > 1);
    hv_store_artifact_fini(&got);
    /* The services' way in (hv_driver_artifact_touch): the same failure is the driver's store
     * trouble, and the caller gets the words for clients. */
    CHECK_RC(hv_driver_artifact_touch(H.d, digest, err, sizeof(err)), HV_EUNAVAIL); /* none */
    hv_driver_set_artifacts(H.d, a);
    CHECK_RC(hv__store_fail_writes(H.store, 1), HV_OK);
    CHECK(hv_driver_artifact_touch(H.d, digest, err, sizeof(err)) != HV_OK);
    CHECK(hv_driver_store_trouble(H.d) != NULL);
    CHECK_STR(err, hv_driver_store_trouble(H.d));
    CHECK_RC(hv__store_fail_writes(H.store, 0), HV_OK);
    CHECK_RC(hv_driver_artifact_touch(H.d, digest, err, sizeof(err)), HV_OK);
    hv_driver_set_artifacts(H.d, NULL);
    hv_artifacts_close(a);
}

/* The kinds of the stored events after seq `after`, "a,b,c". */
static void stored_kinds(uint64_t after, char *buf, size_t len) {
    hv_event_row_t *rows = NULL;
    size_t n = 0;
    buf[0] = '\0';
    CHECK_RC(hv_store_event_list(H.store, 0, after, 0, &rows, &n), HV_OK);
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(buf);
        snprintf(buf + l, len - l, "%s%s", l ? "," : "", rows[i].kind);
    }
    hv_store_event_free_list(rows, n);
}

/* The newest stored event's seq (0: none). */
static uint64_t last_seq(void) {
    hv_event_row_t *rows = NULL;
    size_t n = 0;
    uint64_t seq = 0;
    CHECK_RC(hv_store_event_list(H.store, 0, 0, 1, &rows, &n), HV_OK);
    if (n > 0) {
        seq = rows[n - 1].seq;
    }
    hv_store_event_free_list(rows, n);
    return seq;
}

/* An event whose write fails is not announced (observer, the job's newest event, settled) and
 * not lost: it waits, and the tick writes it, in order with those behind it, then tells. */
static void case_event_waits_for_store(void) {
    join("a", 2);
    hv_job_submit_t s = {.name = "j", .np = 1};
    uint64_t job = 0;
    uint32_t np = 0;
    char err[300], got[256];
    CHECK_RC_MSG(hv_driver_submit(H.d, &s, &job, &np, err, sizeof(err)), HV_OK, err);
    hv_driver_stop(H.d); /* nothing is placed: only this case's events are written */
    const hv_djob_t *j = hv_driver_job(H.d, job);
    uint64_t seq0 = last_seq(), job_seq0 = j->last_event_seq;
    size_t seen0 = H.io.nseen;
    CHECK(seq0 > 0 && job_seq0 > 0);

    CHECK_RC(hv__store_fail_writes(H.store, 1), HV_OK);
    hv_driver_event(H.d, job, 0, "test.first", NULL, "first");
    hv_driver_event(H.d, 0, 0, "test.second", "{\"n\":2}", "second");
    hv_driver_tick(H.d, hv_now_ms()); /* still failing: nothing moves */
    CHECK_EQ(H.io.nseen, seen0);      /* not told before it is stored */
    CHECK_EQ(j->last_event_seq, job_seq0);
    CHECK_EQ(hv_driver_job_settled(H.d, j), 0);
    CHECK(hv_driver_store_trouble(H.d) != NULL);
    stored_kinds(seq0, got, sizeof(got));
    CHECK_STR(got, "");

    CHECK_RC(hv__store_fail_writes(H.store, 0), HV_OK);
    hv_driver_event(H.d, 0, 0, "test.third", NULL, "third"); /* behind the waiting ones */
    CHECK_EQ(H.io.nseen, seen0);
    hv_driver_tick(H.d, hv_now_ms() + 2000);
    stored_kinds(seq0, got, sizeof(got));
    CHECK_STR(got, "test.first,test.second,test.third");
    CHECK_EQ(H.io.nseen, seen0 + 3);
    if (H.io.nseen == seen0 + 3) {
        CHECK_STR(H.io.seen[seen0], "test.first");
        CHECK_EQ(H.io.seen_job[seen0], job);
        CHECK_STR(H.io.seen[seen0 + 2], "test.third");
    }
    CHECK(j->last_event_seq > seq0);
    CHECK_EQ(hv_driver_job_settled(H.d, j), 1);
    CHECK(hv_driver_store_trouble(H.d) == NULL);
}

/* At the bound, new events are dropped and counted; the count is stored as an event once the
 * store works, after the ones that waited. */
static void case_event_bound(void) {
    hv__driver_set_event_bound(H.d, 2);
    uint64_t seq0 = last_seq();
    CHECK_RC(hv__store_fail_writes(H.store, 1), HV_OK);
    for (int i = 0; i < 5; i++) {
        hv_driver_event(H.d, 0, 0, i < 2 ? "test.kept" : "test.dropped", NULL, "e%d", i);
    }
    CHECK_RC(hv__store_fail_writes(H.store, 0), HV_OK);
    hv_driver_tick(H.d, hv_now_ms() + 2000);
    char got[256];
    stored_kinds(seq0, got, sizeof(got));
    CHECK_STR(got, "test.kept,test.kept,head.events_dropped");
    uint64_t n = 0;
    CHECK_RC(hv_store_event_count(H.store, 0, "head.events_dropped", "\"dropped\":3", &n), HV_OK);
    CHECK_EQ(n, 1);
    hv_driver_event(H.d, 0, 0, "test.after", NULL, "after"); /* straight through again */
    stored_kinds(seq0, got, sizeof(got));
    CHECK_STR(got, "test.kept,test.kept,head.events_dropped,test.after");
}

/* A node credential's revocation: while the store fails it is refused (HV_EUNAVAIL, the
 * store's words) and nothing acts on it; once stored, the access table is told, then the
 * session ends. */
static void case_revoke_stored_first(void) {
    uint64_t a = join("a", 1);
    CHECK_RC(hv__store_fail_writes(H.store, 1), HV_OK);
    char err[256] = "";
    CHECK_RC(hv_driver_node_revoke(H.d, a, err, sizeof(err)), HV_EUNAVAIL);
    CHECK(strstr(err, "could not store the revocation of node a") != NULL);
    CHECK(strstr(err, "readonly") != NULL);
    CHECK_EQ(H.io.revoked, 0);
    CHECK_EQ(H.io.drops, 0);
    hv_revoked_row_t *rows = NULL;
    size_t n = 9;
    CHECK_RC(hv_store_revoked_list(H.store, &rows, &n), HV_OK);
    CHECK_EQ(n, 0);
    CHECK_RC(hv__store_fail_writes(H.store, 0), HV_OK);
    CHECK_RC(hv_driver_node_revoke(H.d, a, err, sizeof(err)), HV_OK);
    CHECK_EQ(H.io.revoked, 1);
    CHECK_EQ(H.io.drops, 1);
    CHECK_RC(hv_store_revoked_list(H.store, &rows, &n), HV_OK);
    CHECK_EQ(n, 1);
    CHECK_EQ(rows[0].node_id, a);
    CHECK_EQ(rows[0].incarnation, 7);
    hv_free(rows);
    CHECK_RC(hv_driver_node_revoke(H.d, a + 100, err, sizeof(err)), HV_ENOTFOUND);
}

/* Join tokens: made and revoked through the driver, stored; a revoke while the store fails
 * leaves the token usable. */
static void case_jtoken_stored(void) {
    hv_jtoken_row_t row = {.id = "abc123", .secret_sha256 = "00ff", .created_ms = 5, .max_uses = 2};
    CHECK_RC(hv_driver_jtoken_create(H.d, &row), HV_OK);
    CHECK_RC(hv_driver_jtoken_create(H.d, &row), HV_EEXIST);
    hv_jtoken_row_t got;
    CHECK_RC(hv__store_fail_writes(H.store, 1), HV_OK);
    CHECK(hv_driver_jtoken_revoke(H.d, "abc123", 77, &got) != HV_OK);
    CHECK_RC(hv__store_fail_writes(H.store, 0), HV_OK);
    CHECK_RC(hv_store_jtoken_get(H.store, "abc123", &got), HV_OK);
    CHECK_EQ(got.revoked_ms, 0);
    CHECK_RC(hv_driver_jtoken_revoke(H.d, "abc123", 77, &got), HV_OK);
    CHECK_EQ(got.revoked_ms, 77);
    CHECK_RC(hv_driver_jtoken_revoke(H.d, "abc123", 99, &got), HV_OK); /* as it was */
    CHECK_EQ(got.revoked_ms, 77);
    CHECK_RC(hv_store_jtoken_get(H.store, "abc123", &got), HV_OK);
    CHECK_EQ(got.revoked_ms, 77);
    CHECK_RC(hv_driver_jtoken_revoke(H.d, "zzz999", 77, &got), HV_ENOTFOUND);
}

/* A Join admitted by a join token made with hvctl spends one use, stored before the join
 * returns (so before the agent's reply); a use that cannot be stored refuses the join; a token
 * whose last use is spent admits nobody after. */
static void case_jtoken_use_before_reply(void) {
    const char *token = "hvj_abc123.0123456789abcdef0123456789abcdef";
    hv_jtoken_row_t row = {.id = "abc123", .created_ms = 1, .max_uses = 1};
    char id[HV_JTOKEN_ID_LEN + 1];
    CHECK_EQ(hv_creds_jtoken_parse(token, id, row.secret_sha256), 1);
    CHECK_RC(hv_driver_jtoken_create(H.d, &row), HV_OK);
    hv_node_info_t info = {.name = "a", .addrs = "127.0.0.1", .slots = 1, .incarnation = 7};
    hv_admit_ask_t ask = {.token = token, .now_ms = 10};
    hv_admit_t adm;
    hv_driver_admit(H.d, &ask, &adm);
    CHECK_EQ(adm.by, HV_ADMIT_BY_JTOKEN);
    CHECK_RC(hv__store_exec(H.store, "CREATE TEMP TRIGGER jt_fail BEFORE UPDATE ON join_tokens "
                                     "BEGIN SELECT RAISE(FAIL, 'disk I/O error (injected)'); END"),
             HV_OK);
    uint64_t node = 0;
    char err[256] = "";
    CHECK_RC(hv_driver_node_join(H.d, &info, &adm, &node, err, sizeof(err)), HV_EUNAVAIL);
    CHECK(strstr(err, "could not count a use of join token abc123") != NULL);
    CHECK_RC(hv__store_exec(H.store, "DROP TRIGGER jt_fail"), HV_OK);
    hv_jtoken_row_t got;
    CHECK_RC(hv_store_jtoken_get(H.store, "abc123", &got), HV_OK);
    CHECK_EQ(got.uses, 0);
    hv_driver_admit(H.d, &ask, &adm); /* the agent tries again */
    CHECK_RC(hv_driver_node_join(H.d, &info, &adm, &node, err, sizeof(err)), HV_OK);
    CHECK_RC(hv_store_jtoken_get(H.store, "abc123", &got), HV_OK);
    CHECK_EQ(got.uses, 1);
    hv_driver_admit(H.d, &ask, &adm);
    CHECK_EQ(adm.by, HV_ADMIT_REFUSED);
    CHECK_EQ(adm.verdict, HV_JTOKEN_USED_UP);
}

/* The job's stored fleet decision: its reason's word, target and priority. */
typedef struct fleet_row_s {
    char why[32];
    uint32_t target;
    int32_t prio;
} fleet_row_t;

static fleet_row_t stored_fleet(uint64_t job) {
    fleet_row_t f = {.why = ""};
    hv_job_row_t r;
    if (hv_store_job_get(H.store, job, &r) == HV_OK) {
        snprintf(f.why, sizeof(f.why), "%s", r.fleet_reason != NULL ? r.fleet_reason : "");
        f.target = r.fleet_target;
        f.prio = r.priority;
        hv_store_job_fini(&r);
    }
    return f;
}

/* Submits the job; its id. */
static uint64_t submit(const hv_job_submit_t *sub) {
    uint64_t id = 0;
    uint32_t np = 0;
    char err[300];
    CHECK_RC_MSG(hv_driver_submit(H.d, sub, &id, &np, err, sizeof(err)), HV_OK, err);
    return id;
}

/* The fleet policy's decisions are stored with the jobs' rows before the driver acts on them: X
 * (priority 3) is admitted on a's 2 slots, Y waits for capacity; node b joins while the jobs'
 * fleet writes fail: Y is not started (no spawn order), and is once the store works. */
static void case_fleet_stored_first(void) {
    join("a", 2);
    hv_job_submit_t sx = {.name = "x", .np = 2, .priority = 3};
    hv_job_submit_t sy = {.name = "y", .np = 2};
    fleet_row_t f;
    uint64_t x = submit(&sx);
    CHECK_EQ(orders_of(&H.io, HV_ORDER_SPAWN), 2);
    f = stored_fleet(x);
    CHECK_STR(f.why, "admitted");
    CHECK_EQ(f.target, 2);
    CHECK_EQ(f.prio, 3);
    uint64_t y = submit(&sy);
    CHECK_EQ(orders_of(&H.io, HV_ORDER_SPAWN), 2);
    f = stored_fleet(y);
    CHECK_STR(f.why, "wait_capacity");
    CHECK_EQ(f.target, 0);
    CHECK_RC(hv__store_exec(H.store, "CREATE TEMP TRIGGER fl_fail BEFORE UPDATE OF fleet_reason "
                                     "ON jobs BEGIN SELECT RAISE(FAIL, 'disk I/O error "
                                     "(injected)'); END"),
             HV_OK);
    join("b", 2);
    hv_driver_tick(H.d, hv_now_ms());
    CHECK_EQ(orders_of(&H.io, HV_ORDER_SPAWN), 2); /* not stored: not acted on */
    f = stored_fleet(y);
    CHECK_STR(f.why, "wait_capacity");
    CHECK(hv_driver_store_trouble(H.d) != NULL);
    CHECK_RC(hv__store_exec(H.store, "DROP TRIGGER fl_fail"), HV_OK);
    hv_driver_tick(H.d, hv_now_ms() + 2000);
    CHECK_EQ(orders_of(&H.io, HV_ORDER_SPAWN), 4);
    f = stored_fleet(y);
    CHECK_STR(f.why, "admitted");
    CHECK_EQ(f.target, 2);
}

/* Namespaces (fleet.namespaces): a job without --priority gets its namespace's default, its
 * namespace is stored with it, and the policy's shares come back per namespace: a job of an
 * unlisted namespace counts in the implicit "default", and slots beyond a quota are borrowed. */
static void case_fleet_namespaces(void) {
    H.cfg.fleet.ns = hv_calloc(2, sizeof(*H.cfg.fleet.ns));
    CHECK(H.cfg.fleet.ns != NULL);
    H.cfg.fleet.nns = 2;
    const char *names[] = {"a", "b"};
    for (int i = 0; i < 2; i++) {
        hv_head_ns_t *n = &H.cfg.fleet.ns[i];
        n->name = hv_strdup(names[i]);
        n->weight = 1;
        n->quota[0] = 2;
        n->borrow[0] = n->borrow[1] = n->borrow[2] = UINT64_MAX;
    }
    H.cfg.fleet.ns[0].priority = 4;
    join("n", 4);
    hv_job_submit_t sx = {.name = "x", .np = 3, .ns = "a"};
    hv_job_submit_t sy = {.name = "y", .np = 1, .ns = "zzz", .priority = -2, .priority_set = 1};
    fleet_row_t f;
    uint64_t x = submit(&sx);
    uint64_t y = submit(&sy);
    f = stored_fleet(x); /* admitted, then busy (starting) */
    CHECK_EQ(f.target, 3);
    CHECK_EQ(f.prio, 4); /* a's default */
    f = stored_fleet(y);
    CHECK_STR(f.why, "admitted");
    CHECK_EQ(f.target, 1);
    CHECK_EQ(f.prio, -2); /* given */
    hv_job_row_t r;
    CHECK_RC(hv_store_job_get(H.store, y, &r), HV_OK);
    CHECK_STR(r.ns, "zzz");
    hv_store_job_fini(&r);
    hv_driver_ns_view_t v[4];
    CHECK_EQ(hv_driver_fleet_namespaces(H.d, v, 4), 3);
    CHECK_STR(v[0].name, "a");
    CHECK_EQ(v[0].quota[0], 2);
    CHECK_EQ(v[0].used[0], 3);
    CHECK_EQ(v[0].borrowed[0], 1);
    CHECK_EQ(v[0].priority, 4);
    CHECK_STR(v[1].name, "b");
    CHECK_EQ(v[1].used[0], 0);
    CHECK_STR(v[2].name, "default");
    CHECK_EQ(v[2].used[0], 1);
    CHECK(v[2].borrow[0] == UINT64_MAX);
    CHECK(v[0].share_pm > v[2].share_pm);
}

/* A fixed-size job cannot be --preemptible: stopping a job is only done to resume it from a
 * state copy, which only an elastic job makes. The submission is refused, nothing is stored or
 * started; the same job elastic is taken. */
static void case_preemptible_fixed_refused(void) {
    join("a", 2);
    hv_job_submit_t s = {.name = "f", .np = 2, .preemptible = 1};
    uint64_t id = 0;
    uint32_t np = 0;
    char err[400] = "";
    CHECK_RC(hv_driver_submit(H.d, &s, &id, &np, err, sizeof(err)), HV_EINVAL);
    CHECK(strstr(err, "--preemptible: a fixed-size job cannot be stopped and resumed") != NULL);
    CHECK_EQ(id, 0);
    CHECK_EQ(orders_of(&H.io, HV_ORDER_SPAWN), 0);
    hv_job_submit_t e = {
        .name = "e", .np = 2, .elastic = 1, .min_np = 1, .max_np = 2, .preemptible = 1};
    CHECK_RC_MSG(hv_driver_submit(H.d, &e, &id, &np, err, sizeof(err)), HV_OK, err);
    CHECK_EQ(orders_of(&H.io, HV_ORDER_SPAWN), 2);
}

HV_CHECK_MAIN(setup, teardown, {"drain_not_stored", case_drain_not_stored},
              {"fleet_namespaces", case_fleet_namespaces},
              {"fleet_stored_first", case_fleet_stored_first},
              {"preemptible_fixed_refused", case_preemptible_fixed_refused},
              {"drain_many_atomic", case_drain_many_atomic},
              {"dead_and_back_not_stored", case_dead_and_back_not_stored},
              {"strike_stored", case_strike_stored}, {"strike_not_stored", case_strike_not_stored},
              {"artifact_touch_not_stored", case_artifact_touch_not_stored},
              {"event_waits_for_store", case_event_waits_for_store},
              {"event_bound", case_event_bound}, {"revoke_stored_first", case_revoke_stored_first},
              {"jtoken_stored", case_jtoken_stored},
              {"jtoken_use_before_reply", case_jtoken_use_before_reply})
