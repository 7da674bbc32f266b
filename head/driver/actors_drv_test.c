/*
 * actors_drv_test: the head's actors on a real driver and a real store in a temporary data dir,
 * with a fake io that records the orders: placement takes a node's slot and sends a spawn with
 * the actor's id; the address makes it alive; a kill -9 restarts it after its backoff on a node
 * with room; nothing is created or killed that the store did not take; a head restart (a new
 * driver and table on the same store) keeps the live actor, its address and its slot, and the
 * agent's re-attach says whether its process still runs; call figures add up across a restart
 * and come back after a head restart.
 */
#include "actors_drv.h"
#include "hv_check.h"

#include "drv_test.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "mem.h"
#include "store.h"
#include "util.h"

typedef drvt_orders_t fake_t;

static hv_err fake_order(void *ud, uint64_t node_id, const hv_order_t *o) {
    drvt_record(ud, node_id, o);
    return HV_OK;
}

static void fake_drop(void *ud, uint64_t node_id) {
    (void)ud;
    (void)node_id;
}

typedef struct head_s {
    char dir[64];
    hv_head_config_t cfg;
    hv_store_t *store;
    hv_driver_t *d;
    hv_actors_t *a;
    fake_t io;
} head_t;

static head_t H;

/* A driver and an actors table on the store (a head start). */
static void head_start(void) {
    hv_driver_io_t io = {.order = fake_order, .drop_session = fake_drop, .ud = &H.io};
    char err[512] = "";
    CHECK_RC(hv_driver_create(&H.cfg, H.store, &io, &H.d), HV_OK);
    CHECK_RC(hv_actors_create(H.d, H.store, &H.a), HV_OK);
    CHECK_RC(hv_driver_load(H.d), HV_OK);
    CHECK_RC_MSG(hv_actors_load(H.a, err, sizeof(err)), HV_OK, err);
}

static void head_stop(void) {
    hv_actors_destroy(H.a);
    hv_driver_destroy(H.d);
    H.a = NULL;
    H.d = NULL;
}

static void setup(void) {
    memset(&H, 0, sizeof(H));
    drvt_open(H.dir, "/tmp/hv-actors-test-XXXXXX", &H.cfg, &H.store);
    head_start();
}

static void teardown(void) {
    hv__store_fail_writes(H.store, 0);
    head_stop();
    drvt_close(H.dir, &H.cfg, H.store);
}

/* Joins info's node with its running processes; the reconcile after the hello. */
static uint64_t join_info(const hv_node_info_t *info, const uint64_t *running, size_t n) {
    uint64_t id = drvt_join(H.d, info, running, n);
    hv_driver_node_heartbeat(H.d, id); /* the reconcile after the hello */
    return id;
}

static uint64_t join(const char *name, uint32_t slots, const uint64_t *running, size_t n) {
    hv_node_info_t info = drvt_node(name, slots);
    return join_info(&info, running, n);
}

/* An actor of class counter in namespace default on one slot, with these needs. */
static const hv_dactor_t *create_with(const char *name, uint32_t max_restarts, const char *labels,
                                      uint64_t mem, hv_err want) {
    static const uint8_t spec[] = {0x0a, 0x01, 'x'};
    hv_actor_new_t c = {.name = name,
                        .ns = "default",
                        .class_name = "counter",
                        .spec = spec,
                        .spec_len = sizeof(spec),
                        .slots = 1,
                        .max_restarts = max_restarts,
                        .labels = labels,
                        .memory_mb = mem};
    const hv_dactor_t *x = NULL;
    char err[300] = "";
    CHECK_RC_MSG(hv_actors_new(H.a, &c, &x, err, sizeof(err)), want, err);
    return x;
}

static const hv_dactor_t *create(const char *name, uint32_t max_restarts, hv_err want) {
    return create_with(name, max_restarts, NULL, 0, want);
}

static void sleep_ms(unsigned ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Node a with one slot (*na) and actor ctr (no restarts) serving there, at 127.0.0.1:5000. */
static const hv_dactor_t *serving_on_a(uint64_t *na) {
    *na = join("a", 1, NULL, 0);
    const hv_dactor_t *x = create("ctr", 0, HV_OK);
    CHECK_RC(hv_driver_actor_address(H.d, *na, H.io.worker[0], 42, "127.0.0.1:5000"), HV_OK);
    return x;
}

/* serving_on_a, then node a drained for why (notice: the agent's own, of notice_ms). */
static const hv_dactor_t *draining_a(uint64_t *na, const char *why, int notice,
                                     uint32_t notice_ms) {
    const hv_dactor_t *x = serving_on_a(na);
    char err[256];
    CHECK_RC_MSG(hv_driver_node_drain(H.d, *na, 1, why, notice, notice_ms, err, sizeof(err)), HV_OK,
                 err);
    return x;
}

/* Placement, spawn, address, kill -9, restart after the backoff on a node with room. */
static void case_lifecycle(void) {
    uint64_t na = join("a", 1, NULL, 0);
    const hv_dactor_t *x = create("ctr", 1, HV_OK);
    CHECK(x != NULL);
    if (x == NULL) {
        return;
    }
    CHECK_EQ(x->am.state, HV_AM_STARTING);
    CHECK_EQ(H.io.n, 1);
    CHECK_EQ(H.io.kind[0], HV_ORDER_SPAWN);
    CHECK_EQ(H.io.actor[0], x->am.id);
    CHECK_EQ(H.io.worker[0], hv_am_proc_id(x->am.id, 1));
    CHECK_EQ(hv_driver_node(H.d, na)->acct.slots_used, 1);
    create("ctr", 1, HV_EEXIST); /* the name is taken while it is not dead */
    CHECK_RC(hv_driver_actor_address(H.d, na, H.io.worker[0], 42, "127.0.0.1:5000"), HV_OK);
    CHECK_EQ(x->am.state, HV_AM_ALIVE);
    CHECK_STR(x->address, "127.0.0.1:5000");
    CHECK(hv_actors_by_name(H.a, "default", "ctr") == x);
    /* A second actor waits: the only slot is taken. */
    const hv_dactor_t *y = create("other", 0, HV_OK);
    CHECK_EQ(y->am.state, HV_AM_PENDING);
    CHECK(strstr(y->reason, "waiting for a node with 1 free slot (") != NULL);
    /* kill -9: its slot goes back at once, which the waiting actor takes; ctr waits its
     * backoff, then a node with room (b) gets it. */
    CHECK_RC(hv_driver_worker_exited(H.d, na, H.io.worker[0], -1, 9, ""), HV_OK);
    CHECK_EQ(x->am.state, HV_AM_RESTARTING);
    CHECK_EQ(x->am.restarts, 1);
    CHECK_STR(x->address, "");
    CHECK_EQ(y->am.state, HV_AM_STARTING);
    /* Its events are stored with its id, the restart's data naming it, the step and cause. */
    hv_event_row_t *ev = NULL;
    size_t nev = 0;
    uint64_t total = 0;
    CHECK_RC(hv_store_event_list_actor(H.store, x->am.id, 0, &ev, &nev, &total), HV_OK);
    CHECK_EQ(nev, 3); /* pending, alive, restarting */
    CHECK_EQ(total, 3);
    if (nev == 3) {
        CHECK_STR(ev[0].kind, "actor.pending");
        CHECK_STR(ev[2].kind, "actor.restarting");
        CHECK_EQ(ev[2].f.actor_id, x->am.id);
        char want[160];
        snprintf(want, sizeof(want),
                 "{\"actor_id\":%" PRIu64 ",\"namespace\":\"default\",\"name\":\"ctr\","
                 "\"state\":\"restarting\",\"cause\":\"exited\",\"restarts\":1,\"moves\":0,"
                 "\"step\":\"restart\",",
                 x->am.id);
        CHECK(strncmp(ev[2].data, want, strlen(want)) == 0);
        CHECK(strstr(ev[2].data, "killed by signal 9\"}") != NULL);
        CHECK(strstr(ev[1].data, "\"step\":\"\"") != NULL); /* alive: no step */
    }
    hv_store_event_free_list(ev, nev);
    uint64_t nb = join("b", 1, NULL, 0);
    CHECK_EQ(x->am.state, HV_AM_RESTARTING); /* still in its backoff */
    sleep_ms(300);
    hv_driver_schedule(H.d);
    CHECK_EQ(x->am.state, HV_AM_STARTING);
    CHECK_EQ(x->am.node_id, nb);
    CHECK_EQ(H.io.worker[H.io.n - 1], hv_am_proc_id(x->am.id, 2));
    /* An exit of the old process changes nothing. */
    CHECK_RC(hv_driver_worker_exited(H.d, na, hv_am_proc_id(x->am.id, 1), -1, 9, ""), HV_OK);
    CHECK_EQ(x->am.state, HV_AM_STARTING);
}

/* Nothing is created, or killed, that the store did not take. */
static void case_store_first(void) {
    uint64_t na = join("a", 2, NULL, 0);
    CHECK_RC(hv__store_fail_writes(H.store, 1), HV_OK);
    create("ctr", 0, HV_EUNAVAIL);
    CHECK(hv_actors_all(H.a) == NULL);
    CHECK_EQ(H.io.n, 0);
    CHECK_RC(hv__store_fail_writes(H.store, 0), HV_OK);
    const hv_dactor_t *x = create("ctr", 0, HV_OK);
    CHECK_RC(hv_driver_actor_address(H.d, na, hv_am_proc_id(x->am.id, 1), 1, "127.0.0.1:1"), HV_OK);
    size_t orders = H.io.n;
    CHECK_RC(hv__store_fail_writes(H.store, 1), HV_OK);
    char err[300] = "";
    CHECK_RC(hv_actors_kill(H.a, x->am.id, 0, err, sizeof(err)), HV_EUNAVAIL);
    CHECK(strstr(err, "could not store the kill") != NULL);
    CHECK_EQ(x->am.state, HV_AM_ALIVE);
    CHECK_STR(x->reason, "alive (process 1)"); /* memory stays what the store holds */
    CHECK_EQ(x->ended_ms, 0);
    CHECK_EQ(H.io.n, orders);
    CHECK_RC(hv__store_fail_writes(H.store, 0), HV_OK);
    CHECK_RC(hv_actors_kill(H.a, x->am.id, 0, err, sizeof(err)), HV_OK);
    CHECK_EQ(x->am.state, HV_AM_DEAD);
    CHECK_EQ(H.io.kind[H.io.n - 1], HV_ORDER_KILL);
}

/* A head restart: the live actor comes back with its address and its slot; the agent's hello
 * lists its process (kept) or not (it ended meanwhile: restarted). */
static void case_head_restart(void) {
    uint64_t na = join("a", 1, NULL, 0);
    const hv_dactor_t *x = create("ctr", 3, HV_OK);
    uint64_t id = x->am.id, proc = hv_am_proc_id(id, 1);
    CHECK_RC(hv_driver_actor_address(H.d, na, proc, 1, "127.0.0.1:7"), HV_OK);
    head_stop();
    head_start();
    x = hv_actors_by_name(H.a, "default", "ctr");
    CHECK(x != NULL);
    if (x == NULL) {
        return;
    }
    CHECK_EQ(x->am.id, id);
    CHECK_EQ(x->am.state, HV_AM_ALIVE);
    CHECK_STR(x->address, "127.0.0.1:7");
    CHECK_EQ(hv_driver_node(H.d, na)->acct.slots_used, 1);
    size_t orders = H.io.n;
    join("a", 1, &proc, 1); /* the same agent, its process listed */
    CHECK_EQ(x->am.state, HV_AM_ALIVE);
    CHECK_EQ(H.io.n, orders); /* no kill, no spawn */
    /* Another restart, and this time the agent's hello does not list it. */
    head_stop();
    head_start();
    x = hv_actors_by_name(H.a, "default", "ctr");
    join("a", 1, NULL, 0);
    CHECK_EQ(x->am.state, HV_AM_RESTARTING);
    CHECK_EQ(x->am.restarts, 1);
    CHECK(strstr(x->reason, "not running when its agent reconnected") != NULL);
}

/* ok calls and error calls, each 10 µs. */
static hv_callfig_t figs(uint64_t ok, uint64_t error) {
    hv_callfig_t f = {0};
    for (uint64_t i = 0; i < ok + error; i++) {
        hv_callfig_count(&f, i < ok, 10000, 1, 1);
    }
    return f;
}

static int figs_are(const hv_dactor_t *x, uint64_t ok, uint64_t error) {
    hv_callfig_t t;
    hv_actorfig_total(&x->fig, &t);
    return t.ok == ok && t.error == error;
}

/* Call figures through the driver: a report from the actor's node adds up, one from another
 * node or of an older process is ignored, a kill -9's last figures (sent with the exit) stay
 * when the next process reports, a report the store refused changes nothing, and a head restart
 * brings the totals back from the store. */
static void case_figures(void) {
    uint64_t na = join("a", 1, NULL, 0);
    uint64_t nb = join("b", 1, NULL, 0);
    const hv_dactor_t *x = create("ctr", 2, HV_OK);
    uint64_t id = x->am.id, p1 = hv_am_proc_id(id, 1);
    uint64_t at = x->am.node_id, other = at == na ? nb : na;
    CHECK_RC(hv_driver_actor_address(H.d, at, p1, 1, "127.0.0.1:5000"), HV_OK);
    CHECK(x->fig_ms == 0);
    hv_callfig_t f = figs(3, 1);
    hv_driver_actor_figures(H.d, at, p1, &f, 0);
    CHECK(figs_are(x, 3, 1));
    CHECK(x->fig_ms > 0);
    f = figs(50, 0);
    hv_driver_actor_figures(H.d, other, p1, &f, 0);                /* not its node */
    hv_driver_actor_figures(H.d, at, hv_am_proc_id(id, 2), &f, 0); /* not ordered yet */
    CHECK(figs_are(x, 3, 1));
    /* The store refuses: nothing changes; the next report carries the running totals. */
    CHECK_RC(hv__store_fail_writes(H.store, 1), HV_OK);
    f = figs(5, 1);
    hv_driver_actor_figures(H.d, at, p1, &f, 0);
    CHECK(figs_are(x, 3, 1));
    CHECK_RC(hv__store_fail_writes(H.store, 0), HV_OK);
    hv_driver_actor_figures(H.d, at, p1, &f, 0);
    CHECK(figs_are(x, 5, 1));
    /* kill -9: the agent sends the file's last figures, then the exit; the next process counts
     * from 0 on top. */
    f = figs(6, 1);
    hv_driver_actor_figures(H.d, at, p1, &f, 1);
    CHECK_RC(hv_driver_worker_exited(H.d, at, p1, -1, 9, ""), HV_OK);
    CHECK(figs_are(x, 6, 1));
    sleep_ms(300);
    hv_driver_schedule(H.d);
    CHECK_EQ(x->am.incarnation, 2);
    uint64_t p2 = hv_am_proc_id(id, 2), at2 = x->am.node_id;
    CHECK_RC(hv_driver_actor_address(H.d, at2, p2, 2, "127.0.0.1:5001"), HV_OK);
    f = figs(2, 0);
    hv_driver_actor_figures(H.d, at2, p2, &f, 0);
    CHECK(figs_are(x, 8, 1));
    hv_driver_actor_figures(H.d, at, p1, &f, 1); /* the old process's final, again */
    CHECK(figs_are(x, 8, 1));
    head_stop();
    head_start();
    x = hv_actors_get(H.a, id);
    CHECK(x != NULL);
    if (x == NULL) {
        return;
    }
    CHECK(figs_are(x, 8, 1));
    CHECK(x->fig_ms > 0);
    f = figs(4, 0);
    hv_driver_actor_figures(H.d, at2, p2, &f, 0);
    CHECK(figs_are(x, 10, 1));
}

/* A drain moves the actor make before break: it serves while a slot is sought; the slot on the
 * other node is reserved (taken) before the old process is told to stop; the state it saved is
 * stored with the actor before the replacement is ordered with it; a head restart in between
 * keeps the reservation and the state. */
static void case_move(void) {
    static const char digest[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    uint64_t na = 0;
    const hv_dactor_t *x = draining_a(&na, "test", 0, 0);
    CHECK_EQ(x->am.state, HV_AM_MOVING);
    CHECK_EQ(H.io.kind[H.io.n - 1], HV_ORDER_DRAIN); /* no node has room: no kill, it serves */
    uint64_t nb = join("b", 1, NULL, 0);
    hv_driver_schedule(H.d);
    CHECK_EQ(x->am.next_node, nb);
    CHECK_EQ(hv_driver_node(H.d, nb)->acct.slots_used, 1); /* reserved */
    CHECK_EQ(H.io.kind[H.io.n - 1], HV_ORDER_KILL);
    CHECK_EQ(H.io.node[H.io.n - 1], na);
    /* A head restart before the old process ended: the reservation and the slots stay. */
    head_stop();
    head_start();
    x = hv_actors_by_name(H.a, "default", "ctr");
    CHECK_EQ(x->am.state, HV_AM_MOVING);
    CHECK_EQ(x->am.next_node, nb);
    CHECK_EQ(hv_driver_node(H.d, nb)->acct.slots_used, 1);
    size_t before = H.io.n;
    /* The old process saved its state (stored as an artifact) and ended. */
    hv_driver_actor_state_saved(H.d, na, hv_am_proc_id(x->am.id, 1), digest, 12, NULL);
    CHECK_RC(hv_driver_worker_exited(H.d, na, hv_am_proc_id(x->am.id, 1), 0, 0, ""), HV_OK);
    CHECK_EQ(x->am.state, HV_AM_STARTING);
    CHECK_EQ(x->am.node_id, nb);
    CHECK_EQ(x->am.has_state, 1);
    CHECK_EQ(H.io.n, before + 1);
    CHECK_EQ(H.io.kind[H.io.n - 1], HV_ORDER_SPAWN);
    CHECK_EQ(H.io.node[H.io.n - 1], nb);
    CHECK_STR(H.io.state[H.io.n - 1], digest);
    CHECK_EQ(hv_driver_node(H.d, na)->acct.slots_used, 0);
    CHECK_EQ(hv_driver_node(H.d, nb)->acct.slots_used, 1);
    /* Stored before the spawn: a head restart now re-orders nothing and keeps the state. */
    head_stop();
    head_start();
    x = hv_actors_by_name(H.a, "default", "ctr");
    CHECK_STR(x->state_digest, digest);
    CHECK_EQ(x->am.has_state, 1);
    CHECK_RC(hv_driver_actor_address(H.d, nb, hv_am_proc_id(x->am.id, 2), 43, "127.0.0.1:5001"),
             HV_OK);
    CHECK_EQ(x->am.state, HV_AM_ALIVE);
    CHECK_EQ(x->am.has_state, 0);
    CHECK_STR(x->state_digest, ""); /* loaded: the artifact may be collected */
    CHECK_EQ(x->am.moves, 1);
    CHECK_EQ(x->am.restarts, 0);
    CHECK(strstr(x->reason, "saved state loaded") != NULL);
}

/* A state the process saved but the head did not keep (over actor_state_max): the replacement
 * is spawned without one, and the actor's reason says why (never silently). */
static void case_state_not_kept(void) {
    uint64_t na = 0;
    const hv_dactor_t *x = draining_a(&na, "test", 0, 0);
    uint64_t nb = join("b", 1, NULL, 0);
    hv_driver_schedule(H.d);
    CHECK_EQ(x->am.next_node, nb);
    hv_driver_actor_state_saved(H.d, na, hv_am_proc_id(x->am.id, 1), NULL, 300u << 20,
                                "its saved state of 314572800 bytes is over the head's "
                                "actor_state_max of 268435456 bytes");
    CHECK_RC(hv_driver_worker_exited(H.d, na, hv_am_proc_id(x->am.id, 1), 0, 0, ""), HV_OK);
    CHECK_EQ(x->am.state, HV_AM_STARTING);
    CHECK_EQ(x->am.has_state, 0);
    CHECK_EQ(H.io.kind[H.io.n - 1], HV_ORDER_SPAWN);
    CHECK_STR(H.io.state[H.io.n - 1], "");
    CHECK(strstr(x->reason, "its saved state was not kept: its saved state of 314572800 bytes "
                            "is over the head's actor_state_max") != NULL);
    CHECK_STR(x->saved_why, ""); /* used once */
}

/* A notice that runs out with no node to go to: the process is stopped to save anyway (break
 * before make), and the replacement is placed with the stored state once a node joins. */
static void case_notice_runs_out(void) {
    static const char digest[] = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";
    uint64_t na = 0;
    /* The agent's own notice, 100 ms: less than the kill grace, so the time is up at once. */
    const hv_dactor_t *x = draining_a(&na, "notice", 1, 100);
    hv_driver_schedule(H.d);
    CHECK_EQ(x->am.state, HV_AM_MOVING);
    CHECK_EQ(x->am.kill_sent, 1);
    CHECK_EQ(H.io.kind[H.io.n - 1], HV_ORDER_KILL);
    CHECK_EQ(H.io.node[H.io.n - 1], na);
    hv_driver_actor_state_saved(H.d, na, hv_am_proc_id(x->am.id, 1), digest, 20, NULL);
    CHECK_RC(hv_driver_worker_exited(H.d, na, hv_am_proc_id(x->am.id, 1), 0, 0, ""), HV_OK);
    CHECK_EQ(x->am.state, HV_AM_MOVING);
    CHECK_EQ(x->am.has_state, 1);
    CHECK_STR(x->state_digest, digest);
    uint64_t nb = join("b", 1, NULL, 0);
    hv_driver_schedule(H.d);
    CHECK_EQ(x->am.state, HV_AM_STARTING);
    CHECK_EQ(x->am.node_id, nb);
    CHECK_EQ(H.io.kind[H.io.n - 1], HV_ORDER_SPAWN);
    CHECK_STR(H.io.state[H.io.n - 1], digest);
    CHECK_EQ(hv_driver_node_actor_state_is(H.d, nb, digest), 1); /* b may fetch it */
    CHECK_EQ(hv_driver_node_actor_state_is(H.d, na, digest), 0);
}

static uint64_t join_with(const char *name, uint32_t slots, const char *labels, uint64_t mem) {
    hv_node_info_t info = drvt_node(name, slots);
    info.labels = labels;
    info.memory_mb = mem;
    return join_info(&info, NULL, 0);
}

static const hv_dactor_t *create_demand(const char *name, const char *labels, uint64_t mem) {
    return create_with(name, 0, labels, mem, HV_OK);
}

/* Placement by labels and memory: an actor goes to the node with its labels and the memory it
 * needs; memory is held while it runs (a second one that does not fit beside it waits, saying
 * for what), and a demand no node meets says so (never) and is placed when such a node joins.
 * The demand survives a head restart. */
static void case_labels_memory(void) {
    uint64_t na = join_with("a", 4, "zone=a", 4096);
    uint64_t nb = join_with("b", 4, "zone=b,disk=ssd", 8192);
    const hv_dactor_t *x = create_demand("ssd", "disk=ssd", 0);
    CHECK_EQ(x->am.state, HV_AM_STARTING);
    CHECK_EQ(x->am.node_id, nb);
    const hv_dactor_t *y = create_demand("big", NULL, 6000);
    CHECK_EQ(y->am.state, HV_AM_STARTING);
    CHECK_EQ(y->am.node_id, nb); /* only b has 6000 MiB */
    CHECK_EQ(hv_actors_node_memory(H.a, nb), 6000);
    const hv_dactor_t *z = create_demand("big2", NULL, 3000);
    CHECK_EQ(z->am.state, HV_AM_STARTING);
    CHECK_EQ(z->am.node_id, na); /* b has 2192 MiB left */
    const hv_dactor_t *w = create_demand("big3", NULL, 5000);
    CHECK_EQ(w->am.state, HV_AM_PENDING); /* b could once big ends: waits */
    CHECK(!hv_actors_unplaceable(w));
    CHECK(strstr(w->reason, "waiting for a node with 1 free slot, 5000 MiB of free memory") !=
          NULL);
    const hv_dactor_t *v = create_demand("west", "zone=c", 0);
    CHECK_EQ(v->am.state, HV_AM_PENDING);
    CHECK(hv_actors_unplaceable(v));
    CHECK(strstr(v->reason, "no node can ever hold it") != NULL);
    CHECK(strstr(v->reason, "labels zone=c") != NULL);
    CHECK(strstr(v->reason, "missing: labels") != NULL);
    const hv_dactor_t *u = create_demand("huge", NULL, 100000);
    CHECK(hv_actors_unplaceable(u));
    CHECK(strstr(u->reason, "missing: memory") != NULL);
    /* The autoscaler's word is added to the reason, and goes once it is placed. */
    hv_actors_set_note(H.a, v->am.id, "the autoscaler is buying a node for it: instance 1");
    CHECK(strstr(v->reason, "no node can ever hold it") != NULL);
    CHECK(strstr(v->reason, "; the autoscaler is buying a node for it: instance 1") != NULL);
    CHECK(hv_actors_waiting(v, UINT64_MAX));
    uint64_t nc = join_with("c", 1, "zone=c", 1024);
    CHECK_EQ(v->am.state, HV_AM_STARTING);
    CHECK_EQ(v->am.node_id, nc);
    CHECK(!hv_actors_waiting(v, UINT64_MAX));
    /* big ends: big3 takes its memory. */
    CHECK_RC(hv_driver_worker_exited(H.d, nb, hv_am_proc_id(y->am.id, 1), 0, 0, ""), HV_OK);
    CHECK_EQ(w->am.state, HV_AM_STARTING);
    CHECK_EQ(w->am.node_id, nb);
    uint64_t wid = w->am.id;
    head_stop();
    head_start();
    w = hv_actors_get(H.a, wid);
    CHECK(w != NULL);
    if (w != NULL) {
        CHECK_EQ(w->memory_mb, 5000);
        CHECK_STR(w->labels, "");
    }
    v = hv_actors_by_name(H.a, "default", "west");
    CHECK(v != NULL);
    if (v != NULL) {
        CHECK_STR(v->labels, "zone=c");
    }
}

/* The lines of actor x's log (its output), joined with '|'. */
static void log_text(const hv_dactor_t *x, char *buf, size_t len) {
    hv_joblog_page_t pg;
    buf[0] = '\0';
    CHECK_RC(hv_actors_log_read(H.a, x, 0, 100, 1u << 20, &pg), HV_OK);
    size_t used = 0;
    for (size_t i = 0; i < pg.n && used < len; i++) {
        used += (size_t)snprintf(buf + used, len - used, "%s[%u]%u:%s", i ? "|" : "",
                                 pg.lines[i].rank, pg.lines[i].stream, pg.lines[i].text);
    }
    hv_actors_log_page_free(&pg);
}

/* An actor's output goes to its own log (from its node only: another node's report of it is
 * dropped), numbered by process; it outlives the actor; of the dead, only the logs of the
 * HV_ACTORS_DEAD_LOGS_KEPT that died last are kept. */
static void case_logs(void) {
    uint64_t na = join("a", 80, NULL, 0), nb = join("b", 1, NULL, 0);
    const hv_dactor_t *x = create("ctr", 1, HV_OK);
    CHECK(x != NULL && x->am.node_id == na);
    if (x == NULL) {
        return;
    }
    uint64_t p1 = hv_am_proc_id(x->am.id, 1);
    char *out[] = {"hello"}, *err2[] = {"HV-ACTOR-AUTH: refused"}, *forged[] = {"forged"};
    CHECK_RC(hv_driver_worker_log(H.d, na, p1, 1, out, 1), HV_OK);
    CHECK_RC(hv_driver_worker_log(H.d, na, p1, 2, err2, 1), HV_OK);
    CHECK_RC(hv_driver_worker_log(H.d, nb, p1, 1, forged, 1), HV_OK); /* not its node */
    char buf[1024];
    log_text(x, buf, sizeof(buf));
    CHECK_STR(buf, "[1]1:hello|[1]2:HV-ACTOR-AUTH: refused");
    /* A restart: the next process's lines are numbered 2. */
    char err[300];
    CHECK_RC(hv_actors_kill(H.a, x->am.id, 1, err, sizeof(err)), HV_OK);
    CHECK_RC(hv_driver_worker_exited(H.d, na, p1, -1, 15, ""), HV_OK);
    sleep_ms(300);
    hv_driver_schedule(H.d);
    uint64_t p2 = hv_am_proc_id(x->am.id, 2);
    CHECK_RC(hv_driver_worker_log(H.d, x->am.node_id, p2, 1, out, 1), HV_OK);
    log_text(x, buf, sizeof(buf));
    CHECK_STR(buf, "[1]1:hello|[1]2:HV-ACTOR-AUTH: refused|[2]1:hello");
    /* Dead: the log stays. Then HV_ACTORS_DEAD_LOGS_KEPT more actors die after it: its log is
     * the oldest of the dead and goes; theirs stay. */
    CHECK_RC(hv_actors_kill(H.a, x->am.id, 0, err, sizeof(err)), HV_OK);
    log_text(x, buf, sizeof(buf));
    CHECK_STR(buf, "[1]1:hello|[1]2:HV-ACTOR-AUTH: refused|[2]1:hello");
    const hv_dactor_t *last = NULL;
    for (int i = 0; i < HV_ACTORS_DEAD_LOGS_KEPT; i++) {
        char name[16];
        snprintf(name, sizeof(name), "a%d", i);
        last = create(name, 0, HV_OK);
        if (last == NULL) {
            return;
        }
        CHECK_RC(
            hv_driver_worker_log(H.d, last->am.node_id, hv_am_proc_id(last->am.id, 1), 1, out, 1),
            HV_OK);
        sleep_ms(2); /* deaths in order */
        CHECK_RC(hv_actors_kill(H.a, last->am.id, 0, err, sizeof(err)), HV_OK);
    }
    log_text(x, buf, sizeof(buf));
    CHECK_STR(buf, "");
    CHECK(x->log_gone);
    log_text(last, buf, sizeof(buf));
    CHECK_STR(buf, "[1]1:hello");
}

/* The slots an actor holds count in its namespace for the fleet policy (fleet.namespaces): an
 * actor of namespace research and a job of it use 2 slots of research's quota of 1, one of
 * them borrowed; a job of another namespace counts in the implicit default. */
static void case_fleet_namespace_use(void) {
    H.cfg.fleet.ns = hv_calloc(1, sizeof(*H.cfg.fleet.ns));
    CHECK(H.cfg.fleet.ns != NULL);
    H.cfg.fleet.nns = 1;
    hv_head_ns_t *rs = &H.cfg.fleet.ns[0];
    rs->name = hv_strdup("research");
    rs->weight = 1;
    rs->quota[0] = 1;
    rs->borrow[0] = rs->borrow[1] = rs->borrow[2] = UINT64_MAX;
    join("a", 4, NULL, 0);
    static const uint8_t spec[] = {0x0a, 0x01, 'x'};
    hv_actor_new_t c = {.name = "ps",
                        .ns = "research",
                        .class_name = "counter",
                        .spec = spec,
                        .spec_len = sizeof(spec),
                        .slots = 1};
    const hv_dactor_t *x = NULL;
    char err[300] = "";
    CHECK_RC_MSG(hv_actors_new(H.a, &c, &x, err, sizeof(err)), HV_OK, err);
    hv_job_submit_t sj = {.name = "j", .np = 1, .ns = "research"};
    hv_job_submit_t so = {.name = "o", .np = 1};
    uint64_t id = 0;
    uint32_t np = 0;
    CHECK_RC_MSG(hv_driver_submit(H.d, &sj, &id, &np, err, sizeof(err)), HV_OK, err);
    CHECK_RC_MSG(hv_driver_submit(H.d, &so, &id, &np, err, sizeof(err)), HV_OK, err);
    hv_driver_ns_view_t v[2];
    CHECK_EQ(hv_driver_fleet_namespaces(H.d, v, 2), 2);
    CHECK_STR(v[0].name, "research");
    CHECK_EQ(v[0].used[0], 2); /* its actor and its job */
    CHECK_EQ(v[0].borrowed[0], 1);
    CHECK_STR(v[1].name, "default");
    CHECK_EQ(v[1].used[0], 1);
}

int main(int argc, char **argv) {
    hv_log_set_level(HV_LOG_ERROR);
    hv_log_init("actors_drv_test");
    static const hv_check_case_t cases[] = {
        {"logs", case_logs},
        {"lifecycle", case_lifecycle},
        {"store_first", case_store_first},
        {"head_restart", case_head_restart},
        {"move", case_move},
        {"state_not_kept", case_state_not_kept},
        {"notice_runs_out", case_notice_runs_out},
        {"labels_memory", case_labels_memory},
        {"figures", case_figures},
        {"fleet_namespace_use", case_fleet_namespace_use},
    };
    return hv_check_main(cases, sizeof(cases) / sizeof(cases[0]), argc, argv, setup, teardown);
}
