/*
 * nodes_test: the node state table (every state x event), lease expiry and silence, slot and
 * GPU accounting, and which nodes take work. `nodes_test <case>` runs one case.
 */
#include "nodes.h"
#include "hv_check.h"

#define A HV_NODE_ALIVE
#define D HV_NODE_DRAINING
#define X HV_NODE_DEAD

static void case_transitions(void) {
    /* rows: state; columns: JOIN_NEW, REATTACH, DRAIN, UNDRAIN, EXPIRED */
    static const hv_node_state_t want[3][5] = {
        /* alive    */ {A, A, D, A, X},
        /* draining */ {A, D, D, A, X},
        /* dead     */ {A, A, X, X, X},
    };
    for (int s = 0; s < 3; s++) {
        for (int e = 0; e < 5; e++) {
            hv_node_state_t got = hv_node_next((hv_node_state_t)s, (hv_node_event_t)e);
            if (got != want[s][e]) {
                fprintf(stderr, "state %s event %d: got %s want %s\n",
                        hv_node_state_name((hv_node_state_t)s), e, hv_node_state_name(got),
                        hv_node_state_name(want[s][e]));
                hv_check_failures++;
            }
        }
    }
}

static void case_names(void) {
    hv_node_state_t st;
    for (int s = 0; s < HV_NODE__COUNT; s++) {
        CHECK_RC(hv_node_state_parse(hv_node_state_name((hv_node_state_t)s), &st), HV_OK);
        CHECK_EQ(st, s);
    }
    CHECK_RC(hv_node_state_parse("gone", &st), HV_EINVAL);
    CHECK_RC(hv_node_state_parse(NULL, &st), HV_EINVAL);
}

static void case_lease(void) {
    hv_lease_t l;
    hv_lease_renew(&l, 1000, 2000);
    CHECK_EQ(hv_lease_expired(&l, 3000), 0);
    CHECK_EQ(hv_lease_expired(&l, 3001), 1);
    CHECK_EQ(hv_lease_silent_ms(&l, 3500, 2000), 2500);
    hv_lease_renew(&l, 3400, 2000);
    CHECK_EQ(hv_lease_expired(&l, 3500), 0);
}

/* Evidence of a loss (the agent's session closed) makes the node suspected at once: rounds stop
 * waiting for it a grace after the first evidence (later evidence does not move that), never
 * later than the lease; hearing from the node ends the suspicion. */
static void case_suspect_then_heard(void) {
    hv_lease_t l;
    hv_lease_renew(&l, 1000, 10000);
    CHECK_EQ(hv_lease_waive_at(&l, 500), 0);
    CHECK_EQ(hv_lease_suspect(&l, 2000), 1);
    CHECK_EQ(hv_lease_waive_at(&l, 500), 2500);
    CHECK_EQ(hv_lease_suspect(&l, 2300), 0);
    CHECK_EQ(hv_lease_waive_at(&l, 500), 2500);
    CHECK_EQ(hv_lease_expired(&l, 2600), 0); /* the lease still decides death */
    hv_lease_renew(&l, 2700, 10000);
    CHECK_EQ(hv_lease_waive_at(&l, 500), 0);
}

/* A grace longer than what is left of the lease ends with the lease. */
static void case_suspect_grace_capped_by_lease(void) {
    hv_lease_t l;
    hv_lease_renew(&l, 1000, 2000);
    CHECK_EQ(hv_lease_suspect(&l, 2500), 1);
    CHECK_EQ(hv_lease_waive_at(&l, 5000), 3000);
    CHECK_EQ(hv_lease_waive_at(&l, 0), 2500);
}

static void case_accounting(void) {
    hv_node_acct_t a = {.slots = 4, .gpus = 2};
    hv_node_claim(&a, 1);
    hv_node_claim(&a, -1);
    CHECK_EQ(a.slots_used, 2);
    CHECK_EQ(a.gpus_used_mask, 2);
    hv_node_release(&a, 1);
    CHECK_EQ(a.slots_used, 1);
    CHECK_EQ(a.gpus_used_mask, 0);
    hv_node_release(&a, -1);
    hv_node_release(&a, -1); /* one too many: stays at zero */
    CHECK_EQ(a.slots_used, 0);
    hv_node_claim(&a, 70); /* beyond the tracked GPUs: a slot, no bit */
    CHECK_EQ(a.gpus_used_mask, 0);
    hv_node_claim(&a, 0);
    hv_node_reset(&a);
    CHECK_EQ(a.slots_used, 0);
    CHECK_EQ(a.gpus_used_mask, 0);
}

static void case_takes_work(void) {
    CHECK_EQ(hv_node_takes_work(A, 1), 1);
    CHECK_EQ(hv_node_takes_work(A, 0), 0);
    CHECK_EQ(hv_node_takes_work(D, 1), 0);
    CHECK_EQ(hv_node_takes_work(X, 1), 0);
}

static void case_join_kind(void) {
    static const struct {
        int known;
        uint64_t known_inc, inc;
        hv_node_state_t st;
        int has_session, expired;
        hv_join_kind_t want;
    } rows[] = {
        /* a name never seen */
        {0, 0, 7, A, 0, 0, HV_JOIN_FIRST},
        /* the same agent re-joins (reconnect, head restart), whatever its state */
        {1, 7, 7, A, 1, 0, HV_JOIN_SAME},
        {1, 7, 7, X, 0, 1, HV_JOIN_SAME},
        {1, 7, 7, D, 0, 0, HV_JOIN_SAME},
        /* a second live agent with the same name: refused */
        {1, 7, 8, A, 1, 0, HV_JOIN_REFUSE},
        {1, 7, 8, D, 1, 0, HV_JOIN_REFUSE},
        /* the previous agent is gone: takeover with the new incarnation */
        {1, 7, 8, A, 1, 1, HV_JOIN_TAKEOVER}, /* its lease ran out (hung or partitioned) */
        {1, 7, 8, A, 0, 0, HV_JOIN_TAKEOVER}, /* its stream closed (killed, restarted) */
        {1, 7, 8, X, 1, 0, HV_JOIN_TAKEOVER}, /* declared dead */
        {1, 7, 8, X, 0, 1, HV_JOIN_TAKEOVER},
        {1, 7, 8, D, 0, 1, HV_JOIN_TAKEOVER},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_join_kind_t got = hv_node_join_kind(rows[i].known, rows[i].known_inc, rows[i].inc,
                                               rows[i].st, rows[i].has_session, rows[i].expired);
        if (got != rows[i].want) {
            fprintf(stderr, "join row %zu: got %d want %d\n", i, got, rows[i].want);
            hv_check_failures++;
        }
    }
}

/* The tick's due, row by row: lease 10 s renewed at monotonic 1000 (deadline 11000); the last
 * contact is persisted every 10 s. */
static void case_due(void) {
    static const struct {
        const char *name;
        hv_node_state_t st;
        uint64_t now, seen, persisted;
        hv_node_due_t want;
    } rows[] = {
        {"heard, stored lately", A, 5000, 20000, 15000, HV_NODE_DUE_NONE},
        {"heard, stored long ago", A, 5000, 30001, 20000, HV_NODE_DUE_SEEN},
        {"exactly the interval: not yet", A, 5000, 30000, 20000, HV_NODE_DUE_NONE},
        {"draining, stored long ago", D, 5000, 30001, 20000, HV_NODE_DUE_SEEN},
        {"lease ran out", A, 11001, 20000, 20000, HV_NODE_DUE_DEAD},
        {"lease ran out while draining", D, 11001, 40000, 20000, HV_NODE_DUE_DEAD},
        {"lease at its deadline: still alive", A, 11000, 20000, 20000, HV_NODE_DUE_NONE},
        {"dead: nothing", X, 99999, 40000, 20000, HV_NODE_DUE_NONE},
    };
    hv_lease_t l;
    hv_lease_renew(&l, 1000, 10000);
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_node_due_t got =
            hv_node_due(rows[i].st, &l, rows[i].now, rows[i].seen, rows[i].persisted, 10000);
        if (got != rows[i].want) {
            fprintf(stderr, "%s: got %d want %d\n", rows[i].name, got, rows[i].want);
            hv_check_failures++;
        }
    }
}

/* The reconcile after an agent's hello, every combination of the four facts. */
static void case_reconcile(void) {
    static const struct {
        int listed, live_here, job_active, kill_sent;
        hv_node_recon_t want;
    } rows[] = {
        {0, 0, 0, 0, HV_RECON_KEEP},       {0, 0, 1, 1, HV_RECON_KEEP}, {0, 1, 1, 0, HV_RECON_LOST},
        {0, 1, 0, 0, HV_RECON_LOST},       {0, 1, 1, 1, HV_RECON_LOST}, {1, 1, 1, 0, HV_RECON_KEEP},
        {1, 1, 1, 1, HV_RECON_KILL_AGAIN}, {1, 1, 0, 0, HV_RECON_KILL}, {1, 1, 0, 1, HV_RECON_KILL},
        {1, 0, 1, 0, HV_RECON_KILL},       {1, 0, 0, 0, HV_RECON_KILL}, {1, 0, 1, 1, HV_RECON_KILL},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_node_recon_t got = hv_node_reconcile(rows[i].listed, rows[i].live_here,
                                                rows[i].job_active, rows[i].kill_sent);
        if (got != rows[i].want) {
            fprintf(stderr, "listed %d live_here %d job_active %d kill_sent %d: got %d want %d\n",
                    rows[i].listed, rows[i].live_here, rows[i].job_active, rows[i].kill_sent, got,
                    rows[i].want);
            hv_check_failures++;
        }
    }
}

/* The state a Join stores, every kind from every state. */
static void case_join_state(void) {
    /* rows: state now; columns: FIRST, SAME, TAKEOVER, REFUSE */
    static const hv_node_state_t want[3][4] = {
        /* alive    */ {A, A, A, A},
        /* draining */ {A, D, A, D},
        /* dead     */ {A, A, A, X},
    };
    for (int s = 0; s < 3; s++) {
        for (int k = 0; k < 4; k++) {
            CHECK_EQ(hv_node_join_state((hv_join_kind_t)k, (hv_node_state_t)s), want[s][k]);
        }
    }
}

/* Drain and undrain from each state. */
static void case_drain_to(void) {
    static const struct {
        hv_node_state_t st;
        int drain;
        hv_err rc;
        hv_node_state_t want;
    } rows[] = {
        {A, 1, HV_OK, D}, {D, 1, HV_OK, D},     {X, 1, HV_OK, X},
        {D, 0, HV_OK, A}, {A, 0, HV_ESTATE, A}, {X, 0, HV_ESTATE, X},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_node_state_t got = rows[i].st;
        CHECK_RC(hv_node_drain_to(rows[i].st, rows[i].drain, &got), rows[i].rc);
        CHECK_EQ(got, rows[i].want);
    }
}

/* After a head restart, a node's drain goes out again only when it was stored draining, and
 * then with no hold; row by row. */
static void case_drain_after_restart(void) {
    static const struct {
        hv_node_state_t st;
        int want;
    } rows[] = {{A, 0}, {D, 1}, {X, 0}};
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        uint64_t hold = 99;
        CHECK_EQ(hv_node_drain_after_restart(rows[i].st, &hold), rows[i].want);
        CHECK_EQ(hold, 0);
    }
}

/* The first evidence of a loss makes a live node suspected, once: lease 10 s from 1000, a grace
 * of 500 ms. */
static void case_suspect(void) {
    static const struct {
        const char *name;
        hv_node_state_t st;
        uint64_t before; /* an earlier evidence at (0: none) */
        uint64_t now;
        uint64_t since; /* not heard since (0: now) */
        uint32_t grace;
        int want;
        uint64_t wait, left;
    } rows[] = {
        {"alive", A, 0, 2000, 0, 500, 1, 500, 9000},
        {"draining", D, 0, 2000, 0, 500, 1, 500, 9000},
        {"dead: the lease decided", X, 0, 2000, 0, 500, 0, 0, 0},
        {"already suspected", A, 1500, 2000, 0, 500, 0, 0, 0},
        {"a grace past the lease ends with it", A, 0, 10800, 0, 500, 1, 200, 200},
        {"no grace", A, 0, 2000, 0, 0, 1, 0, 9000},
        {"silent 300 ms: 200 ms of the grace left", A, 0, 2000, 1700, 500, 1, 200, 9000},
        {"silent longer than the grace: no wait", A, 0, 2000, 1400, 500, 1, 0, 9000},
        {"a silence said to start later counts from now", A, 0, 2000, 2500, 500, 1, 500, 9000},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_lease_t l;
        hv_lease_renew(&l, 1000, 10000);
        if (rows[i].before != 0) {
            hv_lease_suspect(&l, rows[i].before);
        }
        uint64_t wait = 0, left = 0;
        uint64_t since = rows[i].since ? rows[i].since : rows[i].now;
        int got = hv_node_suspect(rows[i].st, &l, rows[i].now, since, rows[i].grace, &wait, &left);
        if (got != rows[i].want || wait != rows[i].wait || left != rows[i].left) {
            fprintf(stderr, "%s: got %d wait %llu left %llu, want %d %llu %llu\n", rows[i].name,
                    got, (unsigned long long)wait, (unsigned long long)left, rows[i].want,
                    (unsigned long long)rows[i].wait, (unsigned long long)rows[i].left);
            hv_check_failures++;
        }
    }
}

HV_CHECK_MAIN(NULL, NULL, {"transitions", case_transitions}, {"names", case_names},
              {"lease", case_lease}, {"suspect_then_heard", case_suspect_then_heard},
              {"suspect_grace_capped_by_lease", case_suspect_grace_capped_by_lease},
              {"accounting", case_accounting}, {"takes_work", case_takes_work},
              {"join_kind", case_join_kind}, {"due", case_due}, {"reconcile", case_reconcile},
              {"drain_to", case_drain_to}, {"join_state", case_join_state},
              {"suspect", case_suspect}, {"drain_after_restart", case_drain_after_restart})
