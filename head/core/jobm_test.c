/*
 * jobm_test: the job machine, scenario by scenario, with a fake clock and no I/O. Each case
 * feeds inputs (placed, started, join, done, exited, lost, drain, tick) and checks what a user
 * would see: the job's state and reason, the rounds (generation, size, rank 0's node, rollback),
 * the pushes, kills and strikes, and which joins are answered how. The scenarios follow Elastic
 * Horovod's own integration tests and the walls its users hit (removal below min-np, a deleted
 * worker counted as success, survivors aborting). `jobm_test <case>` runs one case.
 */
#include "jobm.h"
#include "hv_check.h"

#include <stdio.h>
#include <string.h>

#define NODE_A 100
#define NODE_B 200
#define NODE_C 300
#define NODE_D 400
#define MAXW 32

static hv_jm_worker_t W[MAXW];
static size_t nW;
static hv_jm_job_t J;
static hv_jm_out_t O;
static uint64_t now;

static const char *name_of(uint64_t id, void *ud) {
    (void)ud;
    return id == NODE_A ? "a" : id == NODE_B ? "b" : id == NODE_C ? "c" : id == NODE_D ? "d" : NULL;
}

static void setup(void) {
    memset(W, 0, sizeof(W));
    nW = 0;
    hv_jm_out_init(&O);
    now = 1000000;
}

static void teardown(void) {
    hv_jm_fini(&J);
    hv_jm_out_fini(&O);
}

static void job(int elastic, uint32_t np, uint32_t min_np, uint32_t max_np, uint32_t max_resets) {
    hv_jm_params_t p = {.elastic = elastic,
                        .np = np,
                        .min_np = min_np,
                        .max_np = max_np,
                        .max_resets = max_resets,
                        .check_every = 1,
                        .rdzv_timeout_s = 30,
                        .elastic_timeout_s = 600,
                        .blacklist_on = 1};
    hv_jm_init(&J, 7, &p);
    J.node_name = name_of;
    /* The scenarios below train: a commit was reported (the cases of a job that never committed
     * clear this). */
    hv_jm_note_commit(&J);
}

/* Places n workers on node (ids continue from the last), returns the first index. */
static size_t place(uint64_t node, size_t n) {
    hv_jm_worker_t *ws[MAXW];
    size_t first = nW;
    for (size_t i = 0; i < n; i++) {
        hv_jm_worker_t *w = &W[nW];
        w->id = 10 + nW;
        w->node_id = node;
        w->state = HV_WK_STARTING;
        ws[i] = w;
        nW++;
    }
    CHECK_RC(hv_jm_placed(&J, ws, n, now, &O), HV_OK);
    return first;
}

static void start_all(void) {
    for (size_t i = 0; i < nW; i++) {
        hv_jm_started(&J, &W[i], now, &O);
    }
}

static size_t count(hv_jm_act_kind_t k) {
    size_t n = 0;
    for (size_t i = 0; i < O.n; i++) {
        n += O.a[i].kind == k;
    }
    return n;
}

static const hv_jm_action_t *find(hv_jm_act_kind_t k) {
    for (size_t i = 0; i < O.n; i++) {
        if (O.a[i].kind == k) {
            return &O.a[i];
        }
    }
    return NULL;
}

static const hv_jm_action_t *find_event(const char *kind) {
    for (size_t i = 0; i < O.n; i++) {
        if (O.a[i].kind == HV_JA_EVENT && strcmp(O.a[i].event, kind) == 0) {
            return &O.a[i];
        }
    }
    return NULL;
}

static int killed(const hv_jm_worker_t *w) {
    for (size_t i = 0; i < O.n; i++) {
        if (O.a[i].kind == HV_JA_KILL && O.a[i].w == w) {
            return 1;
        }
    }
    return 0;
}

static const hv_jm_action_t *answer_of(const hv_jm_worker_t *w) {
    for (size_t i = 0; i < O.n; i++) {
        if ((O.a[i].kind == HV_JA_JOIN_REMOVED || O.a[i].kind == HV_JA_JOIN_REFUSED ||
             O.a[i].kind == HV_JA_RESEND) &&
            O.a[i].w == w) {
            return &O.a[i];
        }
    }
    return NULL;
}

static void join(size_t i, uint32_t last_gen) { hv_jm_join(&J, &W[i], last_gen, now, &O); }

/* Every live, not removed worker joins with the generation it is in. */
static void join_all(void) {
    for (size_t i = 0; i < nW; i++) {
        if (hv_wk_state_active(W[i].state) && !W[i].removed) {
            join(i, W[i].member_gen);
        }
    }
}

/* The common start of an elastic case: a job (np, min_np, max_np, max_resets) with on_a workers
 * on A and on_b on B, all started and joined into generation 1. */
static void elastic_on_a_b(uint32_t np, uint32_t min_np, uint32_t max_np, uint32_t max_resets,
                           uint32_t on_a, uint32_t on_b) {
    job(1, np, min_np, max_np, max_resets);
    place(NODE_A, on_a);
    place(NODE_B, on_b);
    start_all();
    join_all();
}

static void finish(size_t i) {
    CHECK_RC(hv_jm_done(&J, &W[i], W[i].member_gen, now, &O), HV_OK);
    hv_jm_exited(&J, &W[i], 0, 0, "exited with status 0", now, &O);
}

static hv_jm_worker_t *rank0(void) {
    for (size_t i = 0; i < nW; i++) {
        if (W[i].member_gen == J.generation && W[i].rank == 0 && !W[i].removed) {
            return &W[i];
        }
    }
    return NULL;
}

/* ---- fixed-size jobs ------------------------------------------------------------------------ */

static void case_fixed_success(void) {
    job(0, 4, 0, 0, 0);
    place(NODE_A, 2);
    place(NODE_B, 2);
    CHECK_EQ(J.state, HV_JOB_PLACING);
    start_all();
    CHECK_EQ(J.state, HV_JOB_RUNNING);
    CHECK(find_event("job.state") != NULL);
    hv_jm_out_reset(&O);
    for (size_t i = 0; i < 3; i++) {
        join(i, 0);
    }
    CHECK_EQ(count(HV_JA_ROUND), 0); /* waits for the fourth */
    CHECK_EQ(J.generation, 1);
    join(3, 0);
    const hv_jm_action_t *r = find(HV_JA_ROUND);
    CHECK(r != NULL && r->generation == 1);
    CHECK_EQ(J.size, 4);
    CHECK_EQ(J.cross_size, 2);
    CHECK_EQ(J.resets, 0);
    for (size_t i = 0; i < 4; i++) {
        CHECK_EQ(W[i].rank, i); /* placement order kept in the first round */
        CHECK_EQ(W[i].member_gen, 1);
    }
    CHECK_EQ(W[3].local_rank, 1);
    hv_jm_out_reset(&O);
    for (size_t i = 0; i < 4; i++) {
        finish(i);
    }
    CHECK_EQ(J.state, HV_JOB_SUCCEEDED);
    CHECK_STR(J.reason, "");
    CHECK_EQ(count(HV_JA_FINISHED), 1);
}

static void case_fixed_failure(void) {
    job(0, 2, 0, 0, 0);
    place(NODE_A, 2);
    start_all();
    join(0, 0);
    join(1, 0);
    hv_jm_out_reset(&O);
    hv_jm_exited(&J, &W[1], 3, 0, "rank 1 on a exited with status 3", now, &O);
    CHECK_EQ(J.state, HV_JOB_FAILED);
    CHECK_STR(J.reason, "rank 1 on a exited with status 3");
    CHECK(killed(&W[0]));
    CHECK_EQ(count(HV_JA_STRIKE), 0); /* blacklisting is for elastic jobs */
    CHECK_EQ(count(HV_JA_FINISHED), 0);
    hv_jm_out_reset(&O);
    hv_jm_exited(&J, &W[0], -1, 15, "rank 0 on a was killed by signal SIGTERM", now, &O);
    CHECK_EQ(W[0].state, HV_WK_KILLED);
    CHECK_EQ(count(HV_JA_FINISHED), 1);
    CHECK_STR(J.reason, "rank 1 on a exited with status 3"); /* the first cause stays */
}

/* A worker that joined the rendezvous and exits 0 without Done has not finished its work. */
static void case_fixed_exit0_without_done(void) {
    job(0, 1, 0, 0, 0);
    place(NODE_A, 1);
    start_all();
    join(0, 0);
    hv_jm_exited(&J, &W[0], 0, 0, "rank 0 on a exited with status 0", now, &O);
    CHECK_EQ(J.state, HV_JOB_FAILED);
    CHECK(strstr(J.reason, "without reporting Done") != NULL);
}

/* A program that never joins the rendezvous (not linked with libhv) succeeds by exiting 0. */
static void case_fixed_plain_program(void) {
    job(0, 2, 0, 0, 0);
    place(NODE_A, 2);
    start_all();
    hv_jm_exited(&J, &W[0], 0, 0, "x", now, &O);
    CHECK_EQ(J.state, HV_JOB_RUNNING);
    hv_jm_exited(&J, &W[1], 0, 0, "x", now, &O);
    CHECK_EQ(J.state, HV_JOB_SUCCEEDED);
}

static void case_fixed_rendezvous_timeout(void) {
    job(0, 3, 0, 0, 0);
    place(NODE_A, 3);
    start_all();
    join(0, 0);
    join(1, 0);
    now += 29000;
    hv_jm_tick(&J, now, &O);
    CHECK_EQ(J.state, HV_JOB_RUNNING);
    now += 2000;
    hv_jm_tick(&J, now, &O);
    CHECK_EQ(J.state, HV_JOB_FAILED);
    CHECK_STR(J.reason, "rendezvous timed out after 30 s: 2 of 3 workers joined");
    CHECK_EQ(count(HV_JA_ENDED), 1);
}

/* A fixed-size job's member that re-joins is refused: the membership cannot change. */
static void case_fixed_rejoin_refused(void) {
    job(0, 2, 0, 0, 0);
    place(NODE_A, 2);
    start_all();
    join_all();
    hv_jm_out_reset(&O);
    join(0, 1);
    const hv_jm_action_t *a = answer_of(&W[0]);
    CHECK(a != NULL && a->kind == HV_JA_JOIN_REFUSED && a->rc == HV_ESTATE);
    CHECK_EQ(J.generation, 1);
}

/* ---- elastic jobs --------------------------------------------------------------------------- */

/* Elastic Horovod: A(2) and B(2); rank 0 exits 1 -> A struck, its other worker stopped, g2 of
 * size 2 on B, rolled back. */
static void case_failure_blacklists_node(void) {
    elastic_on_a_b(4, 2, 4, 3, 2, 2);
    CHECK_EQ(J.generation, 1);
    CHECK(rank0() == &W[0]);
    hv_jm_out_reset(&O);
    hv_jm_exited(&J, &W[0], 1, 0, "rank 0 on a exited with status 1", now, &O);
    const hv_jm_action_t *s = find(HV_JA_STRIKE);
    CHECK(s != NULL && s->node_id == NODE_A);
    CHECK(killed(&W[1]));
    CHECK_EQ(W[1].removed, 1);
    CHECK_EQ(J.round_open, 1);
    CHECK_EQ(J.generation, 2);
    CHECK_EQ(J.resets, 1);
    const hv_jm_action_t *p = find(HV_JA_PUSH);
    CHECK(p != NULL && p->generation == 2 && p->failure == 1);
    CHECK(find_event("worker.fail") != NULL);
    CHECK(find_event("round.open") != NULL);
    /* the survivors' collectives fail; they restore and re-join, reporting the samples their
     * rollback sent back (every rank counts all ranks': the round keeps the most) */
    hv_jm_out_reset(&O);
    hv_jm_note_redone(&J, 64);
    join(2, 1);
    CHECK_EQ(count(HV_JA_ROUND), 0);
    hv_jm_note_redone(&J, 32);
    join(3, 1);
    CHECK_EQ(count(HV_JA_ROUND), 1);
    CHECK_EQ(J.size, 2);
    CHECK(rank0() == &W[2]);
    CHECK_EQ(J.round_rollback, 1);
    const hv_jm_action_t *e = find_event("round.close");
    CHECK(e != NULL && e->data != NULL && strstr(e->data, "\"rollback\":true") != NULL);
    CHECK(e != NULL && e->data != NULL && strstr(e->data, "\"rank0\":\"b\"") != NULL);
    CHECK(e != NULL && e->data != NULL && strstr(e->data, "\"redone_samples\":64,") != NULL);
    CHECK(e != NULL && strstr(e->text, "rolled back, 64 samples to redo") != NULL);
    CHECK_EQ(J.round_redone, 0); /* the next round starts from nothing */
    /* the stopped worker's end is no failure */
    hv_jm_out_reset(&O);
    hv_jm_exited(&J, &W[1], -1, 15, "rank 1 on a was killed by signal SIGTERM", now, &O);
    CHECK_EQ(W[1].state, HV_WK_KILLED);
    CHECK_EQ(count(HV_JA_STRIKE), 0);
    CHECK_EQ(J.state, HV_JOB_RUNNING);
    finish(2);
    CHECK_EQ(J.state, HV_JOB_RUNNING);
    finish(3);
    CHECK_EQ(J.state, HV_JOB_SUCCEEDED);
}

/* All ranks exit 1: the job fails naming the exits and no round of generation 2 closes. */
static void case_all_fail(void) {
    elastic_on_a_b(2, 1, 2, 3, 1, 1);
    hv_jm_out_reset(&O);
    hv_jm_exited(&J, &W[0], 1, 0, "rank 0 on a exited with status 1", now, &O);
    hv_jm_exited(&J, &W[1], 1, 0, "rank 1 on b exited with status 1", now, &O);
    CHECK_EQ(J.state, HV_JOB_FAILED);
    CHECK(strstr(J.reason, "failed") != NULL);
    CHECK_STR(J.reason, "all 2 workers of generation 1 failed: rank 0 on a exited with status 1; "
                        "rank 1 on b exited with status 1 (the program failed on its own: "
                        "resuming from a copy would fail the same way)");
    CHECK_EQ(count(HV_JA_ROUND), 0);
    CHECK_EQ(count(HV_JA_FINISHED), 1);
}

/* A worker killed by the head, or one that was removed, never makes a job succeed. (horovod
 * #3852: a job declared a success after one of its workers was deleted.) */
static void case_killed_never_success(void) {
    elastic_on_a_b(2, 1, 2, 3, 1, 1);
    hv_jm_out_reset(&O);
    hv_jm_lost(&J, &W[1], "rank 1 on b was lost: node b is dead", now, &O);
    CHECK_EQ(J.generation, 2);
    join(0, 1);
    CHECK_EQ(J.size, 1);
    finish(0);
    CHECK_EQ(J.state, HV_JOB_SUCCEEDED); /* the final round had one member, who finished */
    CHECK_EQ(W[1].state, HV_WK_LOST);
}

static void case_max_resets(void) {
    job(1, 2, 1, 4, 1);
    place(NODE_A, 2);
    start_all();
    join_all();
    /* g2: a node added (reset 1) */
    size_t n = place(NODE_B, 2);
    hv_jm_started(&J, &W[n], now, &O);
    hv_jm_started(&J, &W[n + 1], now, &O);
    join(n, 0);
    CHECK_EQ(J.generation, 2);
    CHECK_EQ(J.resets, 1);
    CHECK(find(HV_JA_PUSH) != NULL && find(HV_JA_PUSH)->failure == 0);
    join_all();
    CHECK_EQ(J.size, 4);
    /* g3 would be reset 2: with --max-resets 1 the job fails instead */
    hv_jm_out_reset(&O);
    hv_jm_drain(&J, NODE_A, "node a: preemption notice", 0, now, &O);
    CHECK_EQ(J.state, HV_JOB_FAILED);
    CHECK_STR(J.reason, "reset 2 was needed (drain: node a: preemption notice) but --max-resets "
                        "is 1");
}

/* Elastic Horovod: A(2), -np 2 --min-np 2 --max-np 4; B(2) joins after e0; A drained after e1 ->
 * g1 size 2, g2 size 4 (added), g3 size 2 (removed), rank 0 on B, no rollback. */
/* A placement's workers (hv_jm_place): a pending job's first ones take ranks from 0 and the job
 * is stored as placing; a running job's new ones rank after its live members until their first
 * round, and it keeps its state. */
static void case_place(void) {
    job(1, 2, 2, 4, 5);
    static const hv_jm_slot_t slots[] = {
        {.node_id = NODE_A, .rank = 0, .local_rank = 0, .local_size = 2},
        {.node_id = NODE_A, .rank = 1, .local_rank = 1, .local_size = 2},
    };
    hv_jm_worker_t nw[2] = {{.exit_code = 7}, {.exit_code = 7}};
    hv_jm_worker_t *const ws[] = {&nw[0], &nw[1]};
    hv_job_state_t st = HV_JOB__COUNT;
    CHECK_EQ(hv_jm_place(&J, slots, ws, 2, &st), 2);
    CHECK_EQ(st, HV_JOB_PLACING);
    CHECK_EQ(J.state, HV_JOB_PENDING); /* pure: the job is not changed */
    CHECK_EQ(J.nw, 0);
    for (size_t i = 0; i < 2; i++) {
        CHECK_EQ(nw[i].node_id, NODE_A);
        CHECK_EQ(nw[i].state, HV_WK_STARTING);
        CHECK_EQ(nw[i].exit_code, -1);
        CHECK_EQ(nw[i].rank, i);
        CHECK_EQ(nw[i].local_rank, i);
        CHECK_EQ(nw[i].local_size, 2);
    }
    place(NODE_A, 2);
    start_all();
    join_all();
    CHECK_EQ(J.state, HV_JOB_RUNNING);
    static const hv_jm_slot_t more[] = {{.node_id = NODE_B, .local_size = 1}};
    hv_jm_worker_t grown = {0};
    hv_jm_worker_t *const gs[] = {&grown};
    CHECK_EQ(hv_jm_place(&J, more, gs, 1, &st), 3);
    CHECK_EQ(st, HV_JOB_RUNNING);
    CHECK_EQ(grown.rank, 2);
    CHECK_EQ(grown.node_id, NODE_B);
}

static void case_grow_then_drain(void) {
    job(1, 2, 2, 4, 5);
    place(NODE_A, 2);
    start_all();
    CHECK_EQ(hv_jm_wants(&J), 0); /* it starts at -np: growth after the first round */
    join_all();
    CHECK_EQ(J.size, 2);
    CHECK_EQ(hv_jm_wants(&J), 2);
    size_t n = place(NODE_B, 2);
    CHECK_EQ(hv_jm_wants(&J), 0);
    hv_jm_started(&J, &W[n], now, &O);
    hv_jm_started(&J, &W[n + 1], now, &O);
    hv_jm_out_reset(&O);
    join(n, 0);
    CHECK_EQ(J.round_open, 1);
    CHECK_EQ(J.round_rollback, 0);
    join(n + 1, 0);
    CHECK_EQ(count(HV_JA_ROUND), 0); /* the members re-join at their next check */
    join(0, 1);
    join(1, 1);
    CHECK_EQ(count(HV_JA_ROUND), 1);
    CHECK_EQ(J.generation, 2);
    CHECK_EQ(J.size, 4);
    CHECK(rank0() == &W[0]);
    CHECK_EQ(W[n].rank, 2);
    CHECK_EQ(W[n].joined_gen, 2);
    hv_jm_out_reset(&O);
    hv_jm_drain(&J, NODE_A, "node a: preemption notice", 0, now, &O);
    const hv_jm_action_t *p = find(HV_JA_PUSH);
    CHECK(p != NULL && p->failure == 0 && p->nremoved == 2);
    CHECK_EQ(killed(&W[0]), 0); /* drained members leave at their next commit */
    hv_jm_out_reset(&O);
    join(0, 2);
    CHECK(answer_of(&W[0]) == NULL); /* it waits until the round without it has formed */
    join(n, 2);
    join(n + 1, 2);
    const hv_jm_action_t *a = answer_of(&W[0]);
    CHECK(a != NULL && a->kind == HV_JA_JOIN_REMOVED);
    CHECK_EQ(count(HV_JA_ROUND), 1);
    CHECK_EQ(J.generation, 3);
    CHECK_EQ(J.size, 2);
    CHECK(rank0() == &W[n]); /* rank 0 on B */
    CHECK_EQ(J.round_rollback, 0);
    hv_jm_out_reset(&O);
    hv_jm_exited(&J, &W[0], 0, 0, "rank 0 on a exited with status 0", now, &O);
    hv_jm_exited(&J, &W[1], 0, 0, "rank 1 on a exited with status 0", now, &O);
    CHECK_EQ(W[0].state, HV_WK_LEFT);
    CHECK(find_event("worker.left") != NULL);
    CHECK(find_event("worker.fail") == NULL);
    finish(n);
    finish(n + 1);
    CHECK_EQ(J.state, HV_JOB_SUCCEEDED);
    CHECK_EQ(J.resets, 2);
}

/* The fleet gives 2 of a job's 4 workers (both on B) to another job: make before break, as a
 * drain: they stay until the round without them closes at the others' next check, then leave
 * (worker.left, no failure), no rollback; a shrink below --min-np, of a fixed-size job, or while a
 * round is open is refused and changes nothing. */
static void case_shrink_make_before_break(void) {
    elastic_on_a_b(4, 2, 4, 10, 2, 2);
    CHECK_EQ(J.size, 4);
    CHECK_EQ(J.state, HV_JOB_RUNNING);
    uint64_t three[3] = {W[1].id, W[2].id, W[3].id};
    CHECK_RC(hv_jm_shrink(&J, three, 3, "for job 8", now, &O), HV_ESTATE); /* below min 2 */
    uint64_t ghost = 999;
    CHECK_RC(hv_jm_shrink(&J, &ghost, 1, "for job 8", now, &O), HV_ENOTFOUND);
    CHECK_EQ(J.round_open, 0);
    hv_jm_out_reset(&O);
    uint64_t two[2] = {W[2].id, W[3].id};
    CHECK_RC(hv_jm_shrink(&J, two, 2, "for job 8", now, &O), HV_OK);
    const hv_jm_action_t *p = find(HV_JA_PUSH);
    CHECK(p != NULL && p->failure == 0 && p->nremoved == 2);
    CHECK_EQ(J.round_open, 1);
    CHECK_EQ(J.round_rollback, 0);
    CHECK_EQ(J.round_code, HV_EV_SHRINK);
    CHECK(strncmp(J.round_reason, "shrink: for job 8", 17) == 0);
    CHECK_EQ(killed(&W[2]), 0);
    CHECK_RC(hv_jm_shrink(&J, two, 1, "again", now, &O), HV_ESTATE); /* a round is open */
    hv_jm_out_reset(&O);
    join(2, 1);
    join(3, 1);
    CHECK(answer_of(&W[2]) == NULL); /* leaving members wait for the round without them */
    join(0, 1);
    join(1, 1);
    CHECK_EQ(count(HV_JA_ROUND), 1);
    CHECK_EQ(J.generation, 2);
    CHECK_EQ(J.size, 2);
    CHECK_EQ(J.round_rollback, 0);
    const hv_jm_action_t *a = answer_of(&W[2]);
    CHECK(a != NULL && a->kind == HV_JA_JOIN_REMOVED);
    hv_jm_out_reset(&O);
    hv_jm_exited(&J, &W[2], 0, 0, "rank 2 on b exited with status 0", now, &O);
    hv_jm_exited(&J, &W[3], 0, 0, "rank 3 on b exited with status 0", now, &O);
    CHECK_EQ(W[2].state, HV_WK_LEFT);
    CHECK(find_event("worker.fail") == NULL);
    finish(0);
    finish(1);
    CHECK_EQ(J.state, HV_JOB_SUCCEEDED);
}

static void case_shrink_fixed_refused(void) {
    job(0, 2, 2, 2, 0);
    place(NODE_A, 2);
    start_all();
    join_all();
    uint64_t one = W[1].id;
    CHECK_RC(hv_jm_shrink(&J, &one, 1, "for job 8", now, &O), HV_ESTATE);
    CHECK_EQ(W[1].removed, 0);
}

/* The fleet stops a --preemptible job for another (hv_jm_preempt): refused without a copy, for a
 * fixed-size job, or when the resume would exceed --max-resets; otherwise
 * every worker is taken out and killed (their ends are no failures), the job is pending with the
 * next round marked as the resume round, and hv_jm_preempted says so. Placed again, its new
 * workers alone form that round (reason "resume after a preemption", rollback), its rank 0 loads
 * the head's copy, and the job succeeds. */
static void case_preempt_resume(void) {
    elastic_on_a_b(4, 2, 4, 10, 2, 2);
    CHECK_EQ(J.size, 4);
    CHECK_RC(hv_jm_preempt(&J, "preempted for job 8", now, &O), HV_ESTATE); /* no copy yet */
    CHECK_EQ(J.state, HV_JOB_RUNNING);
    J.copy = (hv_jm_copy_t){.generation = 1, .commit = 40, .stored_ms = now};
    hv_jm_params_t keep = J.p;
    J.p.max_resets = 0;
    CHECK_RC(hv_jm_preempt(&J, "preempted for job 8", now, &O), HV_ESTATE); /* no reset left */
    J.p = keep;
    CHECK_EQ(hv_jm_preempted(&J), 0);
    hv_jm_out_reset(&O);
    CHECK_RC(hv_jm_preempt(&J, "preempted for job 8", now, &O), HV_OK);
    CHECK_EQ(J.state, HV_JOB_PENDING);
    CHECK_EQ(hv_jm_preempted(&J), 1);
    CHECK_EQ(J.resume_gen, 2);
    CHECK_EQ(J.resumes, 1);
    CHECK_EQ(count(HV_JA_KILL), 4);
    CHECK(W[0].removed && W[3].removed);
    CHECK_EQ(hv_jm_wants(&J), 0);
    CHECK_RC(hv_jm_preempt(&J, "again", now, &O), HV_ESTATE); /* not running */
    hv_jm_out_reset(&O);
    for (size_t i = 0; i < 4; i++) {
        hv_jm_exited(&J, &W[i], -1, 15, "killed by signal SIGTERM", now, &O);
        CHECK_EQ(W[i].state, HV_WK_KILLED);
    }
    CHECK(find_event("worker.fail") == NULL);
    CHECK_EQ(J.state, HV_JOB_PENDING);
    CHECK_EQ(J.round_open, 0);
    /* Admitted again: 2 new workers on b. */
    now += 60000;
    hv_jm_out_reset(&O);
    size_t n = place(NODE_B, 2);
    CHECK_EQ(J.state, HV_JOB_PLACING);
    hv_jm_started(&J, &W[n], now, &O);
    hv_jm_started(&J, &W[n + 1], now, &O);
    CHECK_EQ(J.state, HV_JOB_RUNNING);
    CHECK_EQ(hv_jm_preempted(&J), 0);
    join(n, 0);
    CHECK_EQ(J.generation, 2);
    CHECK_EQ(J.round_code, HV_EV_RESUME);
    CHECK(strncmp(J.round_reason, "resume after a preemption", 25) == 0);
    CHECK_EQ(hv_jm_round_copy(&J, 2), HV_COPY_TIER_HEAD);
    join(n + 1, 0);
    CHECK_EQ(count(HV_JA_ROUND), 1);
    CHECK_EQ(J.size, 2);
    CHECK_EQ(J.round_open, 0);
    finish(n);
    finish(n + 1);
    CHECK_EQ(J.state, HV_JOB_SUCCEEDED);
}

/* A fixed-size job cannot be preempted (it has no copy to resume from). */
static void case_preempt_fixed_refused(void) {
    job(0, 2, 2, 2, 5);
    place(NODE_A, 2);
    start_all();
    J.copy = (hv_jm_copy_t){.generation = 1, .commit = 40, .stored_ms = now};
    CHECK_RC(hv_jm_preempt(&J, "preempted for job 8", now, &O), HV_ESTATE);
    CHECK_EQ(J.state, HV_JOB_RUNNING);
    CHECK_EQ(count(HV_JA_KILL), 0);
}

/* A job being stopped at its next commit (hv_jm_preempt_begin), A(2) and B(2) with a copy at
 * (1, 40) and until = now + 5000. */
static void preempt_begun(void) {
    elastic_on_a_b(4, 2, 4, 10, 2, 2);
    J.copy = (hv_jm_copy_t){.generation = 1, .commit = 40, .stored_ms = now};
    hv_jm_out_reset(&O);
    CHECK_RC(hv_jm_preempt_begin(&J, "for job 8", now, now + 5000, &O), HV_OK);
}

/* The stop at the next commit (issue 26 §2): hv_jm_preempt_begin pushes a round of code
 * HV_EV_PREEMPT (the typed field libhv reads: rank 0 sends that commit's copy first), no
 * rollback, nobody removed or killed; the round never forms, even with every member joined; due
 * once all of them are there; hv_jm_preempt then stops the job with the round dropped, and the
 * resume round after it (generation 3) forms from new workers and loads the copy. */
static void case_preempt_at_commit(void) {
    preempt_begun();
    CHECK_EQ(J.round_open, 1);
    CHECK_EQ(J.generation, 2);
    CHECK_EQ(J.round_code, HV_EV_PREEMPT);
    CHECK_EQ(J.round_rollback, 0);
    CHECK(strncmp(J.round_reason, "preempt: for job 8", 18) == 0);
    const hv_jm_action_t *p = find(HV_JA_PUSH);
    CHECK(p != NULL && p->generation == 2 && p->failure == 0 && p->nremoved == 0);
    CHECK_EQ(p->ev.reason, HV_EV_PREEMPT);
    const hv_jm_action_t *e = find_event("round.open");
    CHECK(e != NULL && e->ev.reason == HV_EV_PREEMPT);
    CHECK_EQ(count(HV_JA_KILL), 0);
    CHECK_EQ(hv_jm_preempt_due(&J, now), 0);
    /* Stopping already: neither a second stop nor a shrink. */
    CHECK_RC(hv_jm_preempt_begin(&J, "again", now, now + 5000, &O), HV_ESTATE);
    uint64_t one = W[3].id;
    CHECK_RC(hv_jm_shrink(&J, &one, 1, "for job 9", now, &O), HV_ESTATE);
    hv_jm_out_reset(&O);
    for (size_t i = 0; i < 3; i++) {
        join(i, 1);
        CHECK_EQ(hv_jm_preempt_due(&J, now), 0);
    }
    join(3, 1);
    CHECK_EQ(count(HV_JA_ROUND), 0); /* all there: the round still does not form */
    CHECK_EQ(J.round_open, 1);
    CHECK_EQ(hv_jm_preempt_due(&J, now), 1);
    hv_jm_tick(&J, now + 1000, &O);
    CHECK_EQ(count(HV_JA_ROUND), 0);
    /* Rank 0's copy of the commit arrived before its join (the driver checks it is newer). */
    J.copy = (hv_jm_copy_t){.generation = 1, .commit = 57, .stored_ms = now};
    hv_jm_out_reset(&O);
    CHECK_RC(hv_jm_preempt(&J, "preempted for job 8", now, &O), HV_OK);
    CHECK_EQ(J.state, HV_JOB_PENDING);
    CHECK_EQ(J.round_open, 0);
    CHECK_EQ(J.preempt_until, 0);
    CHECK_EQ(hv_jm_preempt_due(&J, now), 0);
    CHECK_EQ(hv_jm_preempted(&J), 1);
    CHECK_EQ(J.resume_gen, 3);
    CHECK_EQ(count(HV_JA_KILL), 4);
    CHECK_EQ(count(HV_JA_JOIN_REMOVED), 4); /* the waiting joins are answered: removed */
    CHECK(find_event("job.note") != NULL);  /* generation 2 does not form */
    CHECK(find_event("round.close") == NULL);
    hv_jm_out_reset(&O);
    for (size_t i = 0; i < 4; i++) {
        hv_jm_exited(&J, &W[i], -1, 15, "killed by signal SIGTERM", now, &O);
    }
    CHECK(find_event("worker.fail") == NULL);
    CHECK_EQ(J.state, HV_JOB_PENDING);
    now += 30000;
    size_t n = place(NODE_B, 2);
    hv_jm_started(&J, &W[n], now, &O);
    hv_jm_started(&J, &W[n + 1], now, &O);
    join(n, 0);
    join(n + 1, 0);
    CHECK_EQ(J.generation, 3);
    CHECK_EQ(J.round_open, 0);
    CHECK_EQ(J.round_code, HV_EV_RESUME);
    CHECK_EQ(J.size, 2);
    CHECK_EQ(hv_jm_round_copy(&J, 3), HV_COPY_TIER_HEAD);
    CHECK_EQ(J.resets, 2); /* the stop's round and the resume's */
    finish(n);
    finish(n + 1);
    CHECK_EQ(J.state, HV_JOB_SUCCEEDED);
}

/* When hv_jm_preempt_due says the stop is due: a table over who of the 4 members joined (W[0],
 * W[1] on a; W[2], W[3] on b), who died meanwhile (not waited for; a failure bars its node, so
 * its node-mate is taken out too) and the time against the bound (until = start + 5000). 0:
 * wait; 1: every member left is at the commit; 2: the bound passed. */
static void case_preempt_due_table(void) {
    static const struct {
        unsigned joined, dead; /* bit i: W[i] */
        uint64_t after_ms;
        int due;
    } rows[] = {
        {0x0, 0x0, 0, 0},    {0x7, 0x0, 0, 0},    {0xf, 0x0, 0, 1},    {0x7, 0x8, 0, 1},
        {0x1, 0x8, 4999, 0}, {0x1, 0x8, 5000, 2}, {0x0, 0x0, 5000, 2}, {0xf, 0x0, 9000, 1},
        {0x0, 0xf, 100, 0},  {0x0, 0xf, 5000, 2},
    };
    for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
        if (r > 0) {
            teardown();
            setup();
        }
        preempt_begun();
        uint64_t start = now;
        for (size_t i = 0; i < 4; i++) {
            if (rows[r].dead & (1u << i)) {
                hv_jm_exited(&J, &W[i], -1, 9, "killed by signal SIGKILL", now, &O);
            }
        }
        for (size_t i = 0; i < 4; i++) {
            if ((rows[r].joined & (1u << i)) && !(rows[r].dead & (1u << i))) {
                join(i, 1);
            }
        }
        int due = hv_jm_preempt_due(&J, start + rows[r].after_ms);
        if (due != rows[r].due) {
            fprintf(stderr, "row %zu: due %d, expected %d\n", r, due, rows[r].due);
        }
        CHECK_EQ(due, rows[r].due);
        CHECK_EQ(J.state, HV_JOB_RUNNING); /* a member's failure while stopping ends nothing */
        CHECK_EQ(count(HV_JA_ROUND), 0);
    }
}

/* A member fails while the job stops: the members hear of it (failure: they roll back, so rank 0
 * sends no copy of an uncommitted step) on the same preempt round; the job neither fails nor
 * forms the round; once the members left (a's) are there it is due, and stops with the copy it
 * had. */
static void case_preempt_member_fails(void) {
    preempt_begun();
    hv_jm_out_reset(&O);
    hv_jm_exited(&J, &W[2], 1, 0, "rank 2 on b exited with status 1", now, &O);
    const hv_jm_action_t *p = find(HV_JA_PUSH);
    CHECK(p != NULL && p->generation == 2 && p->failure == 1);
    CHECK_EQ(p->ev.reason, HV_EV_PREEMPT); /* still the stop: rank 0 restores, sends no copy */
    CHECK_EQ(J.round_open, 1);
    CHECK_EQ(J.state, HV_JOB_RUNNING);
    CHECK(W[3].removed); /* b is barred: its other member is taken out */
    join(0, 1);
    CHECK_EQ(hv_jm_preempt_due(&J, now), 0);
    join(1, 1);
    CHECK_EQ(count(HV_JA_ROUND), 0);
    CHECK_EQ(hv_jm_preempt_due(&J, now), 1);
    CHECK_RC(hv_jm_preempt(&J, "preempted for job 8", now, &O), HV_OK);
    CHECK_EQ(hv_jm_preempted(&J), 1);
    CHECK_EQ(J.copy.commit, 40);
}

/* hv_jm_preempt_begin refuses (HV_ESTATE, nothing changed): a fixed-size job, no copy yet, no
 * closed round yet, a round open, a job completing, or when the stop's round and the resume's
 * would exceed --max-resets. */
static void case_preempt_begin_refused(void) {
    job(0, 2, 2, 2, 5); /* fixed */
    place(NODE_A, 2);
    start_all();
    join_all();
    J.copy = (hv_jm_copy_t){.generation = 1, .commit = 40, .stored_ms = now};
    CHECK_RC(hv_jm_preempt_begin(&J, "x", now, now + 5000, &O), HV_ESTATE);
    teardown();
    setup();
    job(1, 2, 1, 2, 5);
    place(NODE_A, 2);
    start_all();
    J.copy = (hv_jm_copy_t){.generation = 1, .commit = 40, .stored_ms = now};
    CHECK_RC(hv_jm_preempt_begin(&J, "x", now, now + 5000, &O), HV_ESTATE); /* no round yet */
    join_all();
    J.copy = (hv_jm_copy_t){0};
    CHECK_RC(hv_jm_preempt_begin(&J, "x", now, now + 5000, &O), HV_ESTATE); /* no copy */
    J.copy = (hv_jm_copy_t){.generation = 1, .commit = 40, .stored_ms = now};
    J.p.max_resets = 1;
    CHECK_RC(hv_jm_preempt_begin(&J, "x", now, now + 5000, &O), HV_ESTATE); /* 2 resets */
    J.p.max_resets = 5;
    CHECK_RC(hv_jm_done(&J, &W[0], 1, now, &O), HV_OK); /* completing */
    CHECK_RC(hv_jm_preempt_begin(&J, "x", now, now + 5000, &O), HV_ESTATE);
    CHECK_EQ(J.round_open, 0);
    CHECK_EQ(J.generation, 1);
    CHECK_EQ(J.preempt_until, 0);
    CHECK_EQ(J.resets, 0);
}

/* Make before break: A(2) and B(2), -np 4 --min-np 2 --max-np 4; a preemption notice on A with
 * time to spare keeps A's members (no round, the job wants 2 replacements); C's workers join a
 * round with everybody, and only then A's leave. Without replacements in time, A's members leave
 * at the hold's end. */
static void case_notice_make_before_break(void) {
    elastic_on_a_b(4, 2, 4, 10, 2, 2);
    CHECK_EQ(J.size, 4);
    CHECK_EQ(hv_jm_wants(&J), 0);
    hv_jm_out_reset(&O);
    hv_jm_drain(&J, NODE_A, "node a: preemption notice", now + 10000, now, &O);
    CHECK_EQ(count(HV_JA_ROUND), 0);
    CHECK(find(HV_JA_PUSH) == NULL); /* nobody leaves yet */
    CHECK(W[0].evict && W[1].evict && !W[0].removed);
    CHECK_EQ(hv_jm_wants(&J), 2); /* the replacements the autoscaler buys */
    CHECK(find_event("job.note") != NULL);
    /* C's two workers arrive: a round with all six, then one without A. */
    size_t n = place(NODE_C, 2);
    hv_jm_started(&J, &W[n], now, &O);
    hv_jm_started(&J, &W[n + 1], now, &O);
    hv_jm_out_reset(&O);
    join(n, 0);
    join(n + 1, 0);
    for (size_t i = 0; i < 4; i++) {
        join(i, 1);
    }
    CHECK_EQ(J.generation, 2); /* g2 (with C) closed and answered with all six */
    CHECK_EQ(J.size, 6);
    CHECK(!W[0].removed);
    hv_jm_out_reset(&O);
    hv_jm_tick(&J, now, &O); /* the next tick: g3 without A */
    CHECK_EQ(J.generation, 3);
    CHECK(W[0].removed && W[1].removed);
    CHECK_EQ(W[n].joined_gen, 2);
    join(0, 2); /* it waits until g3 (without it) has formed, then it is answered: removed */
    CHECK(answer_of(&W[0]) == NULL);
    join(2, 2);
    join(3, 2);
    join(n, 2);
    join(n + 1, 2);
    CHECK(answer_of(&W[0]) != NULL && answer_of(&W[0])->kind == HV_JA_JOIN_REMOVED);
    CHECK_EQ(J.size, 4);
    CHECK_EQ(J.round_rollback, 0);
}

/* The same notice without replacements in time: at the hold's end A's members leave anyway. */
static void case_notice_hold_ends(void) {
    elastic_on_a_b(4, 2, 4, 10, 2, 2);
    hv_jm_out_reset(&O);
    hv_jm_drain(&J, NODE_A, "node a: preemption notice", now + 10000, now, &O);
    now += 9999;
    hv_jm_tick(&J, now, &O);
    CHECK_EQ(count(HV_JA_ROUND), 0);
    now += 1;
    hv_jm_tick(&J, now, &O);
    CHECK(W[0].removed && W[1].removed);
    CHECK_EQ(J.round_open, 1);
    CHECK(strstr(J.round_reason, "before their node goes") != NULL);
}

/* A(8) and B(4), -np 12 --min-np 8 --max-np 12; drain A: the job waits (no deadlock, horovod
 * #3494); C joins with 12 slots before the elastic timeout: a round of 12, rank 0 on B. */
static void case_drain_below_min_waits_for_capacity(void) {
    elastic_on_a_b(12, 8, 12, 5, 8, 4);
    CHECK_EQ(J.size, 12);
    hv_jm_out_reset(&O);
    hv_jm_drain(&J, NODE_A, "node a: preemption notice", 0, now, &O);
    for (size_t i = 0; i < 8; i++) {
        join(i, 1); /* answered: removed */
        hv_jm_exited(&J, &W[i], 0, 0, "left", now, &O);
    }
    for (size_t i = 8; i < 12; i++) {
        join(i, 1);
    }
    CHECK_EQ(count(HV_JA_ROUND), 0);
    now += 120000; /* past the rendezvous deadline: still below min-np, so it waits */
    hv_jm_tick(&J, now, &O);
    CHECK_EQ(J.state, HV_JOB_RUNNING);
    CHECK_EQ(J.round_open, 1);
    CHECK_EQ(hv_jm_wants(&J), 8);
    size_t n = place(NODE_C, 8);
    for (size_t i = n; i < n + 8; i++) {
        hv_jm_started(&J, &W[i], now, &O);
    }
    for (size_t i = n; i < n + 7; i++) {
        join(i, 0);
    }
    CHECK_EQ(count(HV_JA_ROUND), 0); /* 11 joined: the 12th is on its way */
    join(n + 7, 0);
    CHECK_EQ(count(HV_JA_ROUND), 1);
    CHECK_EQ(J.size, 12);
    CHECK_EQ(W[8].rank, 0); /* rank 0 on B */
    CHECK_EQ(J.state, HV_JOB_RUNNING);
}

static void case_below_min_times_out(void) {
    elastic_on_a_b(4, 3, 4, 5, 2, 2);
    hv_jm_drain(&J, NODE_A, "node a: preemption notice", 0, now, &O);
    join(2, 1);
    join(3, 1);
    now += 599000;
    hv_jm_tick(&J, now, &O);
    CHECK_EQ(J.state, HV_JOB_RUNNING);
    now += 2000;
    hv_jm_out_reset(&O);
    hv_jm_tick(&J, now, &O);
    CHECK_EQ(J.state, HV_JOB_FAILED);
    CHECK(strstr(J.reason, "--min-np is 3") != NULL);
    CHECK(strstr(J.reason, "elastic timeout (600 s)") != NULL);
    const hv_jm_action_t *a = find(HV_JA_ENDED);
    CHECK(a != NULL);
}

/* Stragglers: a member that does not re-join by the deadline is left out (and stopped) when the
 * others are at least min-np. */
static void case_straggler_left_out(void) {
    job(1, 3, 2, 3, 5);
    place(NODE_A, 3);
    start_all();
    join_all();
    hv_jm_out_reset(&O);
    join(0, 1); /* opens g2 on its own: data-plane failure */
    CHECK_EQ(J.round_open, 1);
    CHECK_EQ(J.round_rollback, 1);
    join(1, 1);
    now += 31000;
    hv_jm_tick(&J, now, &O);
    CHECK_EQ(J.size, 2);
    CHECK_EQ(W[2].removed, 1);
    CHECK(killed(&W[2]));
    hv_jm_out_reset(&O);
    join(2, 1); /* the straggler comes back: it is not part of the job any more */
    const hv_jm_action_t *a = answer_of(&W[2]);
    CHECK(a != NULL && a->kind == HV_JA_JOIN_REMOVED);
}

/* The head restarted after closing a round but before the replies reached the workers: they
 * re-join with the previous generation and get the same assignment. */
static void case_resend_lost_reply(void) {
    job(1, 2, 1, 2, 5);
    place(NODE_A, 2);
    start_all();
    join_all();
    hv_jm_out_reset(&O);
    join(1, 0);
    const hv_jm_action_t *a = answer_of(&W[1]);
    CHECK(a != NULL && a->kind == HV_JA_RESEND);
    CHECK_EQ(J.generation, 1);
    CHECK_EQ(J.round_open, 0);
}

static void case_join_refusals(void) {
    job(1, 2, 1, 2, 5);
    place(NODE_A, 2);
    start_all();
    join_all();
    finish(0);
    hv_jm_out_reset(&O);
    join(0, 1);
    const hv_jm_action_t *a = answer_of(&W[0]);
    CHECK(a != NULL && a->kind == HV_JA_JOIN_REFUSED && a->rc == HV_ENOTFOUND);
    CHECK_RC(hv_jm_done(&J, &W[1], 5, now, &O), HV_ESTATE); /* a stale generation */
    hv_jm_end(&J, HV_JOB_CANCELLED, HV_EV_CANCELLED, "cancelled by the user", &O);
    hv_jm_out_reset(&O);
    join(1, 1);
    a = answer_of(&W[1]);
    CHECK(a != NULL && a->kind == HV_JA_JOIN_REFUSED && a->rc == HV_ESTATE);
    CHECK(strstr(a->text, "cancelled by the user") != NULL);
}

/* An elastic worker that exits 0 without Done failed; it is struck like any failure. */
static void case_elastic_exit0_without_done(void) {
    elastic_on_a_b(2, 1, 2, 5, 1, 1);
    hv_jm_out_reset(&O);
    hv_jm_exited(&J, &W[1], 0, 0, "rank 1 on b exited with status 0", now, &O);
    CHECK(find(HV_JA_STRIKE) != NULL);
    CHECK_EQ(J.generation, 2);
    CHECK_EQ(J.round_rollback, 1);
    CHECK(strstr(J.round_reason, "without reporting Done") != NULL);
}

/* Newcomers alone cannot form a round after the first: somebody must hold the state. */
static void case_newcomers_need_a_survivor(void) {
    job(1, 1, 1, 3, 5);
    place(NODE_A, 1);
    start_all();
    join_all();
    size_t n = place(NODE_B, 2);
    hv_jm_started(&J, &W[n], now, &O);
    hv_jm_started(&J, &W[n + 1], now, &O);
    hv_jm_out_reset(&O);
    join(n, 0);
    join(n + 1, 0);
    CHECK_EQ(count(HV_JA_ROUND), 0); /* the member has not re-joined yet */
    now += 31000;
    hv_jm_tick(&J, now, &O);
    CHECK_EQ(count(HV_JA_ROUND), 0);
    join(0, 1);
    CHECK_EQ(count(HV_JA_ROUND), 1);
    CHECK_EQ(J.size, 3);
    CHECK(rank0() == &W[0]);
}

/* Draining the node that holds every member keeps them as the state's holders: the job grows
 * elsewhere, a round with both forms (rank 0 still on the drained node, which syncs the state),
 * and only then do they leave, without a rollback. */
static void case_drain_hands_over_state(void) {
    job(1, 2, 2, 2, 5);
    place(NODE_A, 2);
    start_all();
    join_all();
    CHECK_EQ(hv_jm_wants(&J), 0);
    hv_jm_out_reset(&O);
    hv_jm_drain(&J, NODE_A, "node a: preemption notice", 0, now, &O);
    CHECK_EQ(W[0].removed, 0);
    CHECK_EQ(count(HV_JA_PUSH), 0);
    CHECK(find_event("job.note") != NULL);
    CHECK_EQ(hv_jm_wants(&J), 2); /* replacements wanted */
    size_t n = place(NODE_B, 2);
    hv_jm_started(&J, &W[n], now, &O);
    hv_jm_started(&J, &W[n + 1], now, &O);
    join(n, 0);
    join(n + 1, 0);
    join(0, 1);
    hv_jm_out_reset(&O);
    join(1, 1);
    /* g2 formed with all four, rank 0 still on a, and was answered with all four; at the next
     * tick g3 opens to let a's workers go */
    CHECK_EQ(count(HV_JA_ROUND), 1);
    CHECK_EQ(W[0].member_gen, 2);
    CHECK_EQ(W[0].rank, 0);
    CHECK_EQ(J.generation, 2);
    CHECK_EQ(W[0].removed, 0);
    hv_jm_tick(&J, now, &O);
    CHECK_EQ(J.generation, 3);
    CHECK_EQ(J.round_open, 1);
    CHECK_EQ(J.round_rollback, 0);
    CHECK_EQ(W[0].removed, 1);
    const hv_jm_action_t *p = find(HV_JA_PUSH);
    CHECK(p != NULL && p->nremoved == 2 && p->failure == 0);
    hv_jm_out_reset(&O);
    join(0, 2);
    CHECK(answer_of(&W[0]) == NULL);
    join(n, 2);
    join(n + 1, 2);
    CHECK(answer_of(&W[0]) != NULL && answer_of(&W[0])->kind == HV_JA_JOIN_REMOVED);
    CHECK_EQ(J.size, 2);
    CHECK(rank0() == &W[n]);
    CHECK_EQ(J.state, HV_JOB_RUNNING);
}

/* ---- the end of an elastic job (Elastic Horovod: once any worker succeeded, the job is
 * completing; no round opens for it and it succeeds when the others finish) ----------------- */

/* Four one-slot nodes a..d, -np 4 --min-np 1 --max-np 4, generation 1 formed (rank 0 on a). */
static void four_nodes(void) {
    job(1, 4, 1, 4, 1000);
    place(NODE_A, 1);
    place(NODE_B, 1);
    place(NODE_C, 1);
    place(NODE_D, 1);
    start_all();
    join_all();
    CHECK_EQ(J.generation, 1);
    CHECK_EQ(J.size, 4);
    CHECK(rank0() == &W[0]);
}

static void done_and_exit(size_t i, uint32_t gen) {
    CHECK_RC(hv_jm_done(&J, &W[i], gen, now, &O), HV_OK);
    hv_jm_exited(&J, &W[i], 0, 0, "exited with status 0", now, &O);
}

/* Four workers of generation 1 all reported Done; ranks 0 and 1 have exited, 2 and 3 not yet.
 * The actions so far are cleared. */
static void all_done_two_exited(void) {
    four_nodes();
    for (size_t i = 0; i < 4; i++) {
        CHECK_RC(hv_jm_done(&J, &W[i], 1, now, &O), HV_OK);
    }
    hv_jm_exited(&J, &W[0], 0, 0, "exited with status 0", now, &O);
    hv_jm_exited(&J, &W[1], 0, 0, "exited with status 0", now, &O);
    hv_jm_out_reset(&O);
}

/* A drain opens generation 2 just as the training ends: every member of generation 1, the
 * drained one included, reports Done for generation 1. They all count, and generation 2 never
 * forms (nobody waits for it). */
static void case_done_in_older_generation(void) {
    four_nodes();
    hv_jm_out_reset(&O);
    hv_jm_drain(&J, NODE_D, "node d: drained by the operator", 0, now, &O);
    CHECK_EQ(J.generation, 2);
    CHECK_EQ(J.round_open, 1);
    CHECK_EQ(W[3].removed, 1);
    for (size_t i = 0; i < 4; i++) {
        done_and_exit(i, 1);
    }
    CHECK_EQ(J.state, HV_JOB_SUCCEEDED);
    CHECK_STR(J.reason, "");
    CHECK_EQ(count(HV_JA_ROUND), 0);
    CHECK_EQ(J.generation, 2); /* opened, never formed */
    CHECK(find_event("worker.fail") == NULL);
}

/* Issue 18, failure 1: generation 2 is open (node d drains); b and c finished their training
 * (Done for generation 1, exited 0); then rank 0 on a is killed before its own Done. The
 * drained member on d is alive and finishing: it is no reason to say that nobody survived, and
 * its Done for generation 1 is taken. The training finished: the job succeeded. */
static void case_last_holder_killed_while_finishing(void) {
    four_nodes();
    hv_jm_drain(&J, NODE_D, "node d: drained by the operator", 0, now, &O);
    done_and_exit(1, 1);
    done_and_exit(2, 1);
    hv_jm_out_reset(&O);
    hv_jm_exited(&J, &W[0], -1, 9, "rank 0 on a was killed by signal SIGKILL", now, &O);
    CHECK_EQ(J.state, HV_JOB_RUNNING);
    CHECK(strstr(J.reason, "survived") == NULL);
    CHECK_RC(hv_jm_done(&J, &W[3], 1, now, &O), HV_OK);
    CHECK_EQ(J.state, HV_JOB_RUNNING); /* d's worker still runs */
    hv_jm_exited(&J, &W[3], 0, 0, "rank 3 on d exited with status 0", now, &O);
    CHECK_EQ(J.state, HV_JOB_SUCCEEDED);
    CHECK_EQ(count(HV_JA_STRIKE), 0);
}

/* The same kill while b and c are still on their last steps (not Done yet): they hold the state
 * though they have not re-joined the open round; they finish in generation 1 and the job
 * succeeds. */
static void case_holder_killed_others_not_rejoined(void) {
    four_nodes();
    hv_jm_drain(&J, NODE_D, "node d: drained by the operator", 0, now, &O);
    hv_jm_out_reset(&O);
    hv_jm_exited(&J, &W[0], -1, 9, "rank 0 on a was killed by signal SIGKILL", now, &O);
    CHECK_EQ(J.state, HV_JOB_RUNNING);
    CHECK_EQ(J.round_rollback, 1);
    for (size_t i = 1; i < 4; i++) {
        done_and_exit(i, 1);
    }
    CHECK_EQ(J.state, HV_JOB_SUCCEEDED);
}

/* Issue 18, failure 2: every worker reported Done; a fault takes one of them (its node dies)
 * before it exited. No round opens (before: generation 2 waited the elastic timeout for 0 of
 * 0 workers and failed the job); the job succeeds when the others exit. */
static void case_done_worker_lost(void) {
    all_done_two_exited();
    hv_jm_lost(&J, &W[3], "rank 3 on d was lost: node d is dead", now, &O);
    CHECK_EQ(J.generation, 1);
    CHECK_EQ(J.round_open, 0);
    CHECK(find_event("round.open") == NULL);
    hv_jm_exited(&J, &W[2], 0, 0, "exited with status 0", now, &O);
    CHECK_EQ(J.state, HV_JOB_SUCCEEDED);
}

/* Every worker reported Done; a node drains before they all exited: no round opens and the job
 * succeeds at once when the last one exits (no wait for the elastic timeout). */
static void case_all_done_while_node_drains(void) {
    all_done_two_exited();
    hv_jm_drain(&J, NODE_D, "node d: drained by the operator", 0, now, &O);
    CHECK_EQ(J.generation, 1);
    CHECK(find_event("round.open") == NULL);
    hv_jm_exited(&J, &W[2], 0, 0, "exited with status 0", now, &O);
    hv_jm_exited(&J, &W[3], 0, 0, "exited with status 0", now, &O);
    CHECK_EQ(J.state, HV_JOB_SUCCEEDED);
}

/* The head restarts between the last commit and Done, with generation 2 open (node b drains):
 * the new head knows only what was stored. Done for generation 1 arrives from both members, the
 * drained one included, and the job succeeds. */
static void case_head_restart_before_done(void) {
    elastic_on_a_b(2, 1, 2, 1000, 1, 1);
    hv_jm_drain(&J, NODE_B, "node b: drained by the operator", 0, now, &O);
    CHECK_EQ(J.round_open, 1);
    /* the restart: a new job machine from the stored fields */
    hv_jm_job_t saved = J;
    hv_jm_params_t p = J.p;
    hv_jm_init(&J, saved.id, &p);
    J.node_name = name_of;
    J.state = saved.state;
    J.generation = saved.generation;
    J.size = saved.size;
    J.round_open = saved.round_open;
    J.round_rollback = saved.round_rollback;
    J.round_opened_ms = saved.round_opened_ms;
    J.round_deadline_ms = now + 30000;
    J.round_fail_at_ms = saved.round_fail_at_ms;
    hv_jm_fini(&saved);
    for (size_t i = 0; i < nW; i++) {
        W[i].joined = W[i].kill_sent = W[i].evict = 0;
        W[i].evict_until = 0;
        CHECK_RC(hv_jm_attach(&J, &W[i]), HV_OK);
    }
    hv_jm_out_reset(&O);
    hv_jm_drain(&J, NODE_B, "node b (draining before the head restarted)", 0, now, &O);
    now += 2000;
    done_and_exit(1, 1);
    done_and_exit(0, 1);
    CHECK_EQ(J.state, HV_JOB_SUCCEEDED);
}

/* After the first Done nothing opens a round: a newcomer's join, a drain, a member's re-join
 * (its last collective failed after another finished) are answered "removed" or noted; growth
 * stops. The job succeeds when the members finish; those who left count neither way. */
static void case_nothing_opens_after_first_success(void) {
    job(1, 3, 1, 4, 1000);
    place(NODE_A, 1);
    place(NODE_B, 1);
    place(NODE_C, 1);
    start_all();
    join_all();
    size_t n = place(NODE_D, 1); /* growth placed before the end */
    hv_jm_started(&J, &W[n], now, &O);
    hv_jm_out_reset(&O);
    CHECK_RC(hv_jm_done(&J, &W[0], 1, now, &O), HV_OK);
    CHECK_EQ(hv_jm_wants(&J), 0);
    join(n, 0);
    CHECK(answer_of(&W[n]) != NULL && answer_of(&W[n])->kind == HV_JA_JOIN_REMOVED);
    hv_jm_drain(&J, NODE_B, "node b: drained by the operator", 0, now, &O);
    join(2, 1);
    CHECK(answer_of(&W[2]) != NULL && answer_of(&W[2])->kind == HV_JA_JOIN_REMOVED);
    CHECK_EQ(J.generation, 1);
    CHECK_EQ(J.resets, 0);
    CHECK(find_event("round.open") == NULL);
    hv_jm_exited(&J, &W[0], 0, 0, "exited with status 0", now, &O);
    hv_jm_exited(&J, &W[2], 0, 0, "left", now, &O);
    CHECK_EQ(W[2].state, HV_WK_LEFT);
    hv_jm_exited(&J, &W[n], 0, 0, "left", now, &O);
    CHECK_EQ(J.state, HV_JOB_RUNNING); /* b still finishing */
    done_and_exit(1, 1);
    CHECK_EQ(J.state, HV_JOB_SUCCEEDED);
}

/* A worker that fails on its own after the first success fails the job (exit status, not a
 * kill from outside), and says so. */
static void case_failure_after_first_success(void) {
    elastic_on_a_b(2, 1, 2, 1000, 1, 1);
    done_and_exit(0, 1);
    hv_jm_out_reset(&O);
    hv_jm_exited(&J, &W[1], 3, 0, "rank 1 on b exited with status 3", now, &O);
    CHECK_EQ(J.state, HV_JOB_FAILED);
    CHECK(strstr(J.reason, "rank 1 on b exited with status 3") != NULL);
    CHECK(strstr(J.reason, "after") != NULL);
    CHECK_EQ(count(HV_JA_ROUND), 0);
}

/* A round that no worker can ever join resolves at once: the only holder left, its members on
 * a drained node leave without finishing; the job fails saying why, without waiting for the
 * elastic timeout. */
static void case_round_without_holders_fails_at_once(void) {
    elastic_on_a_b(2, 1, 2, 1000, 1, 1);
    hv_jm_drain(&J, NODE_B, "node b: drained by the operator", 0, now, &O);
    hv_jm_out_reset(&O);
    join(1, 1); /* b's member waits for the round without it */
    CHECK(answer_of(&W[1]) == NULL);
    hv_jm_exited(&J, &W[1], 0, 0, "rank 1 on b exited with status 0", now, &O); /* b went */
    CHECK_EQ(J.state, HV_JOB_RUNNING);
    hv_jm_exited(&J, &W[0], 1, 0, "rank 0 on a exited with status 1", now, &O);
    CHECK_EQ(J.state, HV_JOB_FAILED);
    CHECK_STR(J.reason, "no worker of generation 1 survived to hold the training state: rank 0 on "
                        "a exited with status 1 (the program failed on its own: resuming from a "
                        "copy would fail the same way)");
}

/* ---- suspicion: losses noticed from evidence (issue 15 §2) ---------------------------------- */

#define NODE_E 500 /* a replacement node (unnamed) */

/* B's agent and workers are SIGKILLed: its session closes (B suspected), nothing stops while no
 * round is open; A's workers re-join (their ring broke), and the rollback round closes without
 * B's workers once the grace has passed, long before the 30 s deadline or B's lease. */
static void case_suspect_round_closes_after_grace(void) {
    elastic_on_a_b(4, 2, 4, 10, 2, 2);
    hv_jm_out_reset(&O);
    hv_jm_suspect(&J, NODE_B, "its agent's session closed", now + 500, now, &O);
    CHECK_EQ(count(HV_JA_KILL), 0);
    CHECK_EQ(J.round_open, 0);
    CHECK(find_event("job.note") != NULL);
    join(0, 1);
    join(1, 1);
    CHECK_EQ(J.round_open, 1);
    CHECK_EQ(J.round_rollback, 1);
    now += 499;
    hv_jm_tick(&J, now, &O);
    CHECK_EQ(J.round_open, 1);
    now += 1;
    hv_jm_tick(&J, now, &O);
    CHECK_EQ(J.round_open, 0);
    CHECK_EQ(J.generation, 2);
    CHECK_EQ(J.size, 2);
    CHECK(W[2].removed && W[3].removed);
    CHECK(killed(&W[2]) && killed(&W[3]));
    const hv_jm_action_t *e = find_event("round.close");
    CHECK(e != NULL && e->data != NULL && strstr(e->data, "\"suspected_left_out\":2") != NULL);
    /* B's lease runs out later: its workers, already out of the job, are no failure. */
    hv_jm_out_reset(&O);
    hv_jm_lost(&J, &W[2], "rank 2 on b was lost", now, &O);
    hv_jm_lost(&J, &W[3], "rank 3 on b was lost", now, &O);
    CHECK_EQ(count(HV_JA_STRIKE), 0);
    CHECK_EQ(J.state, HV_JOB_RUNNING);
}

/* A round that opens after the grace has passed does not wait for the suspects at all. */
static void case_suspect_before_round_not_waited_for(void) {
    elastic_on_a_b(3, 1, 3, 10, 2, 1);
    hv_jm_suspect(&J, NODE_B, "its agent's session closed", now + 500, now, &O);
    now += 2000;
    hv_jm_out_reset(&O);
    join(0, 1);
    CHECK_EQ(J.round_open, 1);
    join(1, 1);
    CHECK_EQ(J.round_open, 0);
    CHECK_EQ(J.size, 2);
    CHECK(W[2].removed);
}

/* B's agent re-attaches within the grace (a broken connection, not a lost node): the round
 * waits for B's workers as usual and they stay members. */
static void case_suspect_heard_again_waits(void) {
    elastic_on_a_b(4, 2, 4, 10, 2, 2);
    hv_jm_suspect(&J, NODE_B, "its agent's session closed", now + 500, now, &O);
    join(0, 1);
    join(1, 1);
    now += 200;
    hv_jm_heard(&J, NODE_B, now, &O);
    now += 1000;
    hv_jm_tick(&J, now, &O);
    CHECK_EQ(J.round_open, 1); /* still waiting for B */
    join(2, 1);
    join(3, 1);
    CHECK_EQ(J.round_open, 0);
    CHECK_EQ(J.size, 4);
    CHECK(!W[2].removed && !W[3].removed);
}

/* An elastic job of 4 (1..4) on A, B, C and D, its first round formed. */
static void four_running(void) {
    job(1, 4, 1, 4, 20);
    place(NODE_A, 1);
    place(NODE_B, 1);
    place(NODE_C, 1);
    place(NODE_D, 1);
    start_all();
    join_all();
    hv_jm_out_reset(&O);
}

/* The seed-766 case: A and B have preemption notices (members kept until replacements hold the
 * state), C and D vanish without one. A rollback round forms from A and B after the grace,
 * and A and B stay: nobody else holds the state. Replacements join a round with them; the job
 * is then at its target (4), not beyond it, so A and B keep training until their notice's time
 * is up (the job does not drop to 2 while C's and D's replacements are on their way), then
 * leave. */
static void case_notice_members_stay_when_others_vanish(void) {
    four_running();
    hv_jm_drain(&J, NODE_A, "node a: preemption notice", now + 3000, now, &O);
    hv_jm_drain(&J, NODE_B, "node b: preemption notice", now + 3000, now, &O);
    CHECK(W[0].evict && W[1].evict);
    hv_jm_suspect(&J, NODE_C, "its agent's session closed", now + 500, now, &O);
    hv_jm_suspect(&J, NODE_D, "its agent's session closed", now + 500, now, &O);
    join(0, 1); /* their ring broke */
    join(1, 1);
    CHECK_EQ(J.round_rollback, 1);
    now += 500;
    hv_jm_tick(&J, now, &O);
    CHECK_EQ(J.round_open, 0);
    CHECK_EQ(J.size, 2);
    CHECK(W[2].removed && W[3].removed);
    hv_jm_tick(&J, now, &O);
    CHECK(!W[0].removed && !W[1].removed); /* they hold the state */
    CHECK_EQ(J.round_open, 0);
    CHECK_EQ(hv_jm_wants(&J), 4);
    /* The replacements join; A and B at their next check: a round of four. */
    size_t n = place(NODE_E, 2);
    hv_jm_started(&J, &W[n], now, &O);
    hv_jm_started(&J, &W[n + 1], now, &O);
    join(n, 0);
    join(n + 1, 0);
    join(0, 2);
    join(1, 2);
    CHECK_EQ(J.size, 4);
    CHECK_EQ(J.generation, 3);
    hv_jm_out_reset(&O);
    hv_jm_tick(&J, now, &O); /* not beyond the target: A and B stay members */
    CHECK(!W[0].removed && !W[1].removed);
    CHECK_EQ(J.generation, 3);
    CHECK_EQ(hv_jm_wants(&J), 2); /* their replacements, still */
    now += 2600;                  /* their notice's time is up: a round without A and B */
    hv_jm_tick(&J, now, &O);
    CHECK(W[0].removed && W[1].removed);
    CHECK_EQ(J.generation, 4);
    CHECK_EQ(J.round_rollback, 0);
    CHECK_EQ(J.state, HV_JOB_RUNNING);
}

/* Make before break with a loss beside a notice: A has a notice, D vanishes. A stays a member
 * while the job is not beyond its target: E's arrival (for D) keeps the round at 4 with A, and
 * only F's (for A) puts the job beyond it, when A leaves. */
static void case_notice_member_stays_until_its_replacement(void) {
    four_running();
    hv_jm_drain(&J, NODE_A, "node a: preemption notice", now + 10000, now, &O);
    CHECK(W[0].evict);
    hv_jm_suspect(&J, NODE_D, "its agent's session closed", now + 500, now, &O);
    join(0, 1);
    join(1, 1);
    join(2, 1);
    now += 500;
    hv_jm_tick(&J, now, &O);
    CHECK_EQ(J.round_open, 0);
    CHECK_EQ(J.size, 3); /* A, B, C */
    CHECK(!W[0].removed);
    CHECK_EQ(hv_jm_wants(&J), 2); /* D's and A's replacements */
    size_t e = place(NODE_E, 1);
    hv_jm_started(&J, &W[e], now, &O);
    join(e, 0);
    join(0, 2);
    join(1, 2);
    join(2, 2);
    CHECK_EQ(J.size, 4);
    uint32_t g = J.generation;
    hv_jm_tick(&J, now, &O);
    CHECK(!W[0].removed); /* at the target, not beyond: A keeps training */
    CHECK_EQ(J.generation, g);
    CHECK_EQ(hv_jm_wants(&J), 1);
    size_t f = place(NODE_E + 1, 1);
    hv_jm_started(&J, &W[f], now, &O);
    join(f, 0);
    join(0, g);
    join(1, g);
    join(2, g);
    join(e, g);
    CHECK_EQ(J.size, 5); /* F's round still has A */
    hv_jm_tick(&J, now, &O);
    CHECK(W[0].removed); /* beyond the target by one: A leaves */
    CHECK(!W[1].removed && !W[2].removed && !W[e].removed && !W[f].removed);
    CHECK_EQ(J.generation, g + 2);
    CHECK_EQ(J.round_rollback, 0);
}

/* A's notice runs out while B's workers are suspected: A's members do not leave the state to
 * B's (which may be gone); they stay until their node goes. */
static void case_notice_end_does_not_leave_to_suspects(void) {
    elastic_on_a_b(2, 1, 2, 10, 1, 1);
    hv_jm_drain(&J, NODE_A, "node a: preemption notice", now + 3000, now, &O);
    CHECK(W[0].evict);
    hv_jm_suspect(&J, NODE_B, "its agent's session closed", now + 500, now, &O);
    now += 3000;
    hv_jm_out_reset(&O);
    hv_jm_tick(&J, now, &O);
    CHECK(!W[0].removed);
    CHECK_EQ(J.round_open, 0);
}

/* B is drained (its member leaves once the round without it forms) and A's member fails before
 * that round forms: B's member is the last holder of the state, so it is taken back and the
 * rollback round forms with it instead of the job failing. */
static void case_leaving_member_taken_back_when_holders_fail(void) {
    elastic_on_a_b(2, 1, 2, 1000, 1, 1);
    hv_jm_drain(&J, NODE_B, "node b: drained by the operator", 0, now, &O);
    CHECK(W[1].removed && W[1].leaving);
    hv_jm_out_reset(&O);
    join(1, 1); /* waits for the round without it */
    CHECK(answer_of(&W[1]) == NULL);
    hv_jm_exited(&J, &W[0], 1, 0, "rank 0 on a exited with status 1", now, &O);
    CHECK_EQ(J.state, HV_JOB_RUNNING);
    CHECK(!W[1].removed && W[1].evict);
    CHECK_EQ(J.round_open, 0); /* it had joined: the rollback round formed with it */
    CHECK_EQ(J.size, 1);
    CHECK(rank0() == &W[1]);
    CHECK_EQ(J.round_rollback, 1);
    CHECK(find(HV_JA_ROUND) != NULL);
}

/* The same with the other holder vanishing (suspected, past its grace) instead of failing. */
static void case_leaving_member_taken_back_when_holders_vanish(void) {
    elastic_on_a_b(2, 1, 2, 1000, 1, 1);
    hv_jm_drain(&J, NODE_B, "node b: preemption notice", 0, now, &O);
    hv_jm_suspect(&J, NODE_A, "its agent's session closed", now + 500, now, &O);
    join(1, 1);
    CHECK_EQ(J.round_open, 1);
    now += 500;
    hv_jm_out_reset(&O);
    hv_jm_tick(&J, now, &O);
    CHECK_EQ(J.round_open, 0);
    CHECK(rank0() == &W[1]);
    CHECK(W[0].removed && killed(&W[0]));
    CHECK(answer_of(&W[1]) == NULL); /* answered with the round, not removed */
}

/* A drain while another node is suspected: its members stay as the holders (as if they were the
 * job's only members) instead of leaving the state to the suspects. */
static void case_drain_with_suspects_keeps_members(void) {
    elastic_on_a_b(2, 1, 2, 10, 1, 1);
    hv_jm_suspect(&J, NODE_B, "its agent's session closed", now + 500, now, &O);
    hv_jm_out_reset(&O);
    hv_jm_drain(&J, NODE_A, "node a: hvctl drain", 0, now, &O);
    CHECK(W[0].evict);
    CHECK(!W[0].removed);
}

static void case_names(void) {
    hv_job_state_t js;
    hv_wk_state_t ws;
    for (int i = 0; i < HV_JOB__COUNT; i++) {
        CHECK_RC(hv_job_state_parse(hv_job_state_name((hv_job_state_t)i), &js), HV_OK);
        CHECK_EQ(js, i);
    }
    for (int i = 0; i < HV_WK__COUNT; i++) {
        CHECK_RC(hv_wk_state_parse(hv_wk_state_name((hv_wk_state_t)i), &ws), HV_OK);
        CHECK_EQ(ws, i);
    }
    CHECK_RC(hv_wk_state_parse("pending", &ws), HV_OK);
    CHECK_EQ(ws, HV_WK_STARTING);
    CHECK_RC(hv_job_state_parse("bogus", &js), HV_EINVAL);
    CHECK_EQ(hv_job_state_terminal(HV_JOB_CANCELLED), 1);
    CHECK_EQ(hv_job_state_terminal(HV_JOB_RUNNING), 0);
}

/* ---- resume from the head's copy when every member is lost ---- */

/* The decision alone, case by case. */
static void case_loss_decide_table(void) {
    static const struct {
        hv_jm_loss_t in;
        hv_jm_loss_verdict_t want;
        const char *why; /* a part of the explanation on FAIL */
    } t[] = {
        {{.elastic = 1, .has_copy = 1, .resets = 0, .max_resets = 3}, HV_JM_LOSS_RESUME, ""},
        {{.elastic = 1, .has_copy = 1, .resets = 2, .max_resets = 3}, HV_JM_LOSS_RESUME, ""},
        {{.elastic = 1, .has_copy = 0, .committed = 1, .max_resets = 3},
         HV_JM_LOSS_FAIL,
         "no copy"},
        /* Nothing committed and no copy: the initial state is all there is; start again. */
        {{.elastic = 1, .has_copy = 0, .committed = 0, .max_resets = 3}, HV_JM_LOSS_RESTART, ""},
        {{.elastic = 1, .has_copy = 0, .committed = 0, .resets = 2, .max_resets = 3},
         HV_JM_LOSS_RESTART,
         ""},
        {{.elastic = 1, .has_copy = 0, .committed = 0, .resets = 3, .max_resets = 3},
         HV_JM_LOSS_FAIL,
         "a restart from the beginning (nothing was committed yet) would be reset 4, but "
         "--max-resets is 3"},
        {{.elastic = 1, .has_copy = 0, .committed = 0, .own_failure = 1, .max_resets = 3},
         HV_JM_LOSS_FAIL,
         "failed on its own"},
        {{.elastic = 0, .has_copy = 0, .committed = 0, .max_resets = 3},
         HV_JM_LOSS_FAIL,
         "fixed size"},
        /* A copy is resumed from, committed or not (the copy is the evidence). */
        {{.elastic = 1, .has_copy = 1, .committed = 0, .max_resets = 3}, HV_JM_LOSS_RESUME, ""},
        {{.elastic = 1, .has_copy = 1, .resets = 3, .max_resets = 3},
         HV_JM_LOSS_FAIL,
         "--max-resets is 3"},
        {{.elastic = 1, .has_copy = 1, .own_failure = 1, .max_resets = 3},
         HV_JM_LOSS_FAIL,
         "failed on its own"},
        {{.elastic = 0, .has_copy = 1, .max_resets = 3}, HV_JM_LOSS_FAIL, "fixed size"},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        char why[200] = "";
        CHECK_EQ(hv_jm_loss_decide(&t[i].in, why, sizeof(why)), t[i].want);
        CHECK(strstr(why, t[i].why) != NULL);
    }
}

/* A one-worker job with a stored copy loses its node: it does not fail; a round marked as the
 * resume opens, the new worker placed elsewhere forms it alone, and the events say so. */
static void case_last_member_lost_resumes(void) {
    job(1, 1, 1, 1, 5);
    place(NODE_A, 1);
    start_all();
    join_all();
    CHECK_EQ(J.generation, 1);
    J.copy = (hv_jm_copy_t){.generation = 1, .commit = 40, .stored_ms = now - 2000};
    hv_jm_out_reset(&O);
    hv_jm_lost(&J, &W[0], "rank 0 on a was lost: node a is dead", now, &O);
    CHECK_EQ(J.state, HV_JOB_RUNNING);
    CHECK_EQ(J.round_open, 1);
    CHECK_EQ(J.generation, 2);
    CHECK_EQ(J.resume_gen, 2);
    CHECK_EQ(J.resumes, 1);
    const hv_jm_action_t *e = find_event("job.resume");
    CHECK(e != NULL);
    CHECK(e != NULL && strstr(e->text, "commit 40 (2.0 s old)") != NULL);
    CHECK(e != NULL && e->data != NULL && strstr(e->data, "\"copy_commit\":40") != NULL);
    CHECK_EQ(hv_jm_wants(&J), 1);
    /* Nothing fails while the new worker starts, even past the round's deadline. */
    now += 31000;
    hv_jm_tick(&J, now, &O);
    CHECK_EQ(J.state, HV_JOB_RUNNING);
    hv_jm_out_reset(&O);
    size_t k = place(NODE_B, 1);
    hv_jm_started(&J, &W[k], now, &O);
    join(k, 0);
    CHECK_EQ(J.round_open, 0);
    CHECK_EQ(J.size, 1);
    CHECK_EQ(W[k].member_gen, 2);
    CHECK_EQ(W[k].rank, 0);
    CHECK_EQ(count(HV_JA_ROUND), 1);
    CHECK_EQ(J.resets, 1);
}

/* A one-worker elastic job (max 5 resets) whose first round formed on node a; fresh: the
 * case's earlier job is torn down first. */
static void one_worker_job(int fresh) {
    if (fresh) {
        teardown();
        setup();
    }
    job(1, 1, 1, 1, 5);
    place(NODE_A, 1);
    start_all();
    join_all();
}

/* The last member was lost on a ring neighbour's death watch, so the job resumes; its agent's
 * report comes after: a signal leaves the resume as it is, an exit status (the program's own
 * failure) fails the job at once rather than after new workers started (hv_jm_reported). */
static void case_lost_then_reported(void) {
    for (int sig = 1; sig >= 0; sig--) {
        one_worker_job(!sig);
        J.copy = (hv_jm_copy_t){.generation = 1, .commit = 40, .stored_ms = now - 2000};
        hv_jm_out_reset(&O);
        hv_jm_lost(&J, &W[0], "rank 0 on a was lost: its process ended", now, &O);
        CHECK_EQ(J.resume_gen, 2);
        CHECK_EQ(J.round_open, 1);
        W[0].exit_code = sig ? -1 : 1;
        W[0].term_signal = sig ? 9 : 0;
        hv_jm_out_reset(&O);
        hv_jm_reported(&J, &W[0], now, &O);
        if (sig) {
            CHECK_EQ(J.state, HV_JOB_RUNNING);
            CHECK_EQ(J.round_open, 1);
            continue;
        }
        CHECK_EQ(J.state, HV_JOB_FAILED);
        CHECK(strstr(J.reason, "no worker of generation 1 survived to hold the training state: "
                               "rank 0 on a was lost: its process ended") != NULL);
        CHECK(strstr(J.reason, "exit status 1") != NULL);
        CHECK(find_event("job.state") != NULL);
    }
}

/* Issue 28 §2: the one worker's node is SIGKILLed (its agent's session closes: suspected, a
 * grace of 500 ms). Nobody is left to re-join, so at the grace the head gives the worker up
 * instead of waiting for the lease (hv_jm_give_up); the driver loses it, and the job resumes
 * from its copy. Not before the grace, and not while the node is heard again. */
static void case_lone_suspect_given_up(void) {
    job(1, 1, 1, 1, 5);
    place(NODE_A, 1);
    start_all();
    join_all();
    J.copy = (hv_jm_copy_t){.generation = 1, .commit = 40, .stored_ms = now - 2000};
    hv_jm_worker_t *ws[4];
    CHECK_EQ(hv_jm_give_up(&J, now, ws, 4), 0); /* not suspected */
    hv_jm_out_reset(&O);
    hv_jm_suspect(&J, NODE_A, "its agent's session closed", now + 500, now, &O);
    CHECK_EQ(J.round_open, 0);
    CHECK_EQ(hv_jm_give_up(&J, now + 499, ws, 4), 0); /* within the grace */
    CHECK_EQ(hv_jm_give_up(&J, now + 500, ws, 4), 1);
    CHECK(ws[0] == &W[0]);
    CHECK_EQ(hv_jm_give_up(&J, now + 500, ws, 0), 0); /* no room: none */
    hv_jm_heard(&J, NODE_A, now + 300, &O); /* back within the grace: nothing to give up */
    CHECK_EQ(hv_jm_give_up(&J, now + 5000, ws, 4), 0);
    hv_jm_suspect(&J, NODE_A, "its agent's session closed", now + 1500, now + 1000, &O);
    now += 1500;
    CHECK_EQ(hv_jm_give_up(&J, now, ws, 4), 1);
    /* The driver's lost path: the job resumes from its copy. */
    hv_jm_out_reset(&O);
    hv_jm_lost(&J, &W[0], "rank 0 on a was lost: given up", now, &O);
    CHECK_EQ(J.state, HV_JOB_RUNNING);
    CHECK_EQ(J.resume_gen, 2);
    CHECK(find_event("job.resume") != NULL);
    CHECK_EQ(hv_jm_give_up(&J, now, ws, 4), 0);
}

/* Who may be given up: not while another holder of the state is unsuspected (it re-joins), not
 * a job that would fail without its lease (no copy after a commit), not a fixed-size job, not
 * before its first round formed; the last two holders together. */
static void case_give_up_rules(void) {
    hv_jm_worker_t *ws[4];
    /* Two members on a and b, only b suspected: a will re-join. */
    elastic_on_a_b(2, 1, 2, 5, 1, 1);
    J.copy = (hv_jm_copy_t){.generation = 1, .commit = 40, .stored_ms = now};
    hv_jm_suspect(&J, NODE_B, "its agent's session closed", now, now, &O);
    CHECK_EQ(hv_jm_give_up(&J, now + 1000, ws, 4), 0);
    /* Both suspected past the grace: both given up together. */
    hv_jm_suspect(&J, NODE_A, "its agent's session closed", now, now, &O);
    CHECK_EQ(hv_jm_give_up(&J, now + 1000, ws, 4), 2);
    /* Without a copy, after a commit: the job would fail, so the lease decides. */
    J.copy = (hv_jm_copy_t){0};
    CHECK_EQ(hv_jm_give_up(&J, now + 1000, ws, 4), 0);
    /* Nothing committed and no copy: a restart from the beginning is no loss either. */
    J.commit_seen = 0;
    CHECK_EQ(hv_jm_give_up(&J, now + 1000, ws, 4), 2);
    teardown();
    setup();
    job(0, 1, 1, 1, 0); /* fixed size: never */
    place(NODE_A, 1);
    start_all();
    join_all();
    J.copy = (hv_jm_copy_t){.generation = 1, .commit = 40, .stored_ms = now};
    hv_jm_suspect(&J, NODE_A, "its agent's session closed", now, now, &O);
    CHECK_EQ(hv_jm_give_up(&J, now + 1000, ws, 4), 0);
    teardown();
    setup();
    job(1, 1, 1, 1, 5); /* no round formed yet: nothing to hold */
    place(NODE_A, 1);
    start_all();
    hv_jm_suspect(&J, NODE_A, "its agent's session closed", now, now, &O);
    CHECK_EQ(hv_jm_give_up(&J, now + 1000, ws, 4), 0);
}

/* A worker the head gave up (lost) may not act for the job: no copy, no report, no Done; nor one
 * that speaks for a generation before the job's resume. The resumed generation's own workers
 * may. */
static void case_fence(void) {
    job(1, 1, 1, 1, 5);
    place(NODE_A, 1);
    start_all();
    join_all();
    J.copy = (hv_jm_copy_t){.generation = 1, .commit = 40, .stored_ms = now};
    char err[256];
    CHECK_RC(hv_jm_fence(&J, &W[0], 1, err, sizeof(err)), HV_OK);
    CHECK_RC(hv_jm_copy_check(&J, &W[0], 1, 41, err, sizeof(err)), HV_OK);
    hv_jm_lost(&J, &W[0], "rank 0 on a was lost: given up", now, &O);
    CHECK_EQ(J.resume_gen, 2);
    CHECK_RC(hv_jm_fence(&J, &W[0], 1, err, sizeof(err)), HV_EPERM);
    CHECK(strstr(err, "fenced") != NULL);
    CHECK_RC(hv_jm_copy_check(&J, &W[0], 1, 99, err, sizeof(err)), HV_EPERM);
    CHECK_RC(hv_jm_done(&J, &W[0], 1, now, &O), HV_ESTATE);
    size_t k = place(NODE_B, 1);
    hv_jm_started(&J, &W[k], now, &O);
    CHECK_RC(hv_jm_fence(&J, &W[k], 0, err, sizeof(err)), HV_OK); /* before its first round */
    join(k, 0);
    CHECK_RC(hv_jm_fence(&J, &W[k], 2, err, sizeof(err)), HV_OK);
    CHECK_RC(hv_jm_copy_check(&J, &W[k], 2, 1, err, sizeof(err)), HV_OK);
    /* A live worker of a round before the resume (it could only be stale): refused. */
    W[k].member_gen = 1;
    CHECK_RC(hv_jm_fence(&J, &W[k], 1, err, sizeof(err)), HV_EPERM);
    CHECK(strstr(err, "resumed from a copy in generation 2") != NULL);
    W[k].member_gen = 2;
}

/* Issue 28 §1: b's data plane falls silent (its ring neighbours' liveness monitors hear nothing
 * and get no acknowledgement for 600 ms, past the 500 ms grace): nobody re-joined yet (their
 * ring hangs until the peer timeout), so the job opens a rollback round at once, pushed to the
 * members; b's worker is waived already, and the round forms once a's workers re-joined. */
static void case_silent_rolls_back_at_once(void) {
    elastic_on_a_b(3, 1, 3, 10, 2, 1);
    hv_jm_out_reset(&O);
    hv_jm_silent(&J, NODE_B, "its data plane fell silent", now, now, &O);
    CHECK_EQ(J.round_open, 1);
    CHECK_EQ(J.round_rollback, 1);
    CHECK_EQ(J.round_code, HV_EV_DATA_PLANE);
    const hv_jm_action_t *p = find(HV_JA_PUSH);
    CHECK(p != NULL && p->failure && p->generation == 2);
    CHECK(strstr(J.round_reason, "node b fell silent on the data plane") != NULL);
    join(0, 1);
    CHECK_EQ(J.round_open, 1);
    join(1, 1);
    CHECK_EQ(J.round_open, 0);
    CHECK_EQ(J.size, 2);
    CHECK(W[2].removed);
    CHECK(killed(&W[2]));
    /* A second silence verdict (another job's, the same node) opens nothing more. */
    hv_jm_out_reset(&O);
    hv_jm_silent(&J, NODE_B, "its data plane fell silent", now, now, &O);
    CHECK_EQ(J.round_open, 0);
    /* A node with no member of the last round: suspected, nothing opens. */
    hv_jm_silent(&J, NODE_C, "its data plane fell silent", now, now, &O);
    CHECK_EQ(J.round_open, 0);
}

/* Issue 15, bench_spot seed 3: a job started at --min-np with one worker on a, grows by a worker
 * on b (its round open), and a dies before any commit was reported and before any copy: the job
 * does not fail; it restarts from the beginning in the open round, the newcomer on b forms it
 * alone (no copy to load), and the events say so. */
static void case_lost_before_first_commit_restarts(void) {
    job(1, 4, 1, 4, 100);
    J.commit_seen = 0;
    place(NODE_A, 1);
    start_all();
    join_all();
    CHECK_EQ(J.generation, 1);
    CHECK_EQ(hv_jm_wants(&J), 3);
    size_t k = place(NODE_B, 1);
    hv_jm_started(&J, &W[k], now, &O);
    join(k, 0);
    CHECK_EQ(J.round_open, 1);
    CHECK_EQ(J.generation, 2);
    hv_jm_out_reset(&O);
    hv_jm_lost(&J, &W[0], "rank 0 on a was lost: node a is dead", now, &O);
    CHECK_EQ(J.state, HV_JOB_RUNNING);
    CHECK_EQ(J.resume_gen, 2);
    CHECK_EQ(J.round_open, 0); /* the newcomer waiting in it formed it */
    CHECK_EQ(J.size, 1);
    CHECK_EQ(W[k].member_gen, 2);
    CHECK_EQ(W[k].rank, 0);
    CHECK_EQ(hv_jm_round_copy(&J, 2), HV_COPY_TIER_NONE); /* nothing to load: the beginning */
    const hv_jm_action_t *e = find_event("job.resume");
    CHECK(e != NULL && strstr(e->text, "every member was lost before the first commit: new "
                                       "workers start from the beginning") != NULL);
    CHECK(e != NULL && e->data != NULL && strstr(e->data, "\"restart\":true") != NULL);
    CHECK(strstr(J.round_reason, "restart: every member was lost before the first commit") != NULL);
    CHECK_EQ(J.resumes, 0); /* nothing was resumed from a copy */
}

/* The same loss once a commit was reported (or a copy came, or the head restarted): the job
 * may have finished an epoch, and without a copy it fails as before, saying why. Row by row. */
static void case_lost_after_commit_fails(void) {
    static const char *const how[] = {"report", "copy", "restart"};
    for (size_t i = 0; i < sizeof(how) / sizeof(how[0]); i++) {
        if (i > 0) {
            teardown();
            setup();
        }
        job(1, 1, 1, 1, 100);
        J.commit_seen = 0;
        place(NODE_A, 1);
        start_all();
        join_all();
        if (i == 0 || i == 1) {
            hv_jm_note_commit(&J); /* the driver: a Report with commits, a PutState */
        } else {
            hv_jm_restarted(&J, now);
        }
        hv_jm_out_reset(&O);
        hv_jm_lost(&J, &W[0], "rank 0 on a was lost: node a is dead", now, &O);
        CHECK_EQ(J.state, HV_JOB_FAILED);
        CHECK(strstr(J.reason, "no copy of the training state") != NULL);
        if (J.state != HV_JOB_FAILED) {
            fprintf(stderr, "row %s: not failed\n", how[i]);
        }
    }
}

/* A worker that exits with a status of its own before any commit: the program fails, and a
 * start from the beginning would fail the same way. */
static void case_own_failure_before_commit_fails(void) {
    job(1, 1, 1, 1, 100);
    J.commit_seen = 0;
    place(NODE_A, 1);
    start_all();
    join_all();
    hv_jm_out_reset(&O);
    hv_jm_exited(&J, &W[0], 3, 0, "rank 0 on a exited with status 3", now, &O);
    CHECK_EQ(J.state, HV_JOB_FAILED);
    CHECK(strstr(J.reason, "failed on its own") != NULL);
}

/* Issue 15, bench_spot seed 4: the only worker (placed at --min-np, not a member of a round yet)
 * is stopped by its node's drain: the job has no worker left and no round; it asks for -np
 * workers again (as a pending job), the new worker forms the first round and the job goes on.
 * Also when the node is lost instead of drained (a loss, not a failure of the program). */
static void case_start_worker_gone_wants_again(void) {
    for (int lost = 0; lost <= 1; lost++) {
        if (lost) {
            teardown();
            setup();
        }
        job(1, 4, 1, 4, 100);
        J.commit_seen = 0;
        place(NODE_A, 1);
        start_all();
        CHECK_EQ(J.state, HV_JOB_RUNNING);
        CHECK_EQ(hv_jm_wants(&J), 0); /* started with what was free: growth after round 1 */
        hv_jm_out_reset(&O);
        if (!lost) {
            hv_jm_drain(&J, NODE_A, "node a: preemption notice", now + 10000, now, &O);
            CHECK(killed(&W[0]));
            hv_jm_exited(&J, &W[0], -1, 15, "rank 0 on a was killed by signal SIGTERM", now, &O);
        } else {
            hv_jm_lost(&J, &W[0], "rank 0 on a was lost: node a is dead", now, &O);
        }
        CHECK_EQ(J.state, HV_JOB_RUNNING);
        CHECK_EQ(hv_jm_wants(&J), 4); /* -np again: the autoscaler's demand, the queue's growth */
        size_t k = place(NODE_B, 1);
        CHECK_EQ(hv_jm_wants(&J), 0); /* --min-np is there: it starts, grows after round 1 */
        hv_jm_started(&J, &W[k], now, &O);
        join(k, 0);
        CHECK_EQ(J.round_open, 0);
        CHECK_EQ(J.generation, 1);
        CHECK_EQ(W[k].member_gen, 1);
        CHECK_EQ(hv_jm_wants(&J), 3);
    }
}

/* A job of --min-np 2 that started with 2 and lost one before its first round: it wants -np
 * again (the round waits for --min-np); one with --min-np 1 that keeps one does not. */
static void case_start_below_min_np_wants(void) {
    job(1, 3, 2, 3, 100);
    place(NODE_A, 1);
    place(NODE_B, 1);
    start_all();
    CHECK_EQ(hv_jm_wants(&J), 0);
    hv_jm_out_reset(&O);
    hv_jm_drain(&J, NODE_B, "node b: hvctl drain", 0, now, &O);
    CHECK_EQ(hv_jm_wants(&J), 2);
}

/* The head's copy is gone (its file was lost) and the durable tier holds one: the job resumes,
 * and the event names the durable copy; with both there and the same commit, the head's. */
static void case_resume_from_durable(void) {
    static const struct {
        hv_jm_copy_t head, durable;
        const char *text, *tier;
    } t[] = {
        {{1, 40, 0, 1, 0},
         {1, 30, 0, 0, 0},
         "from the durable copy of generation 1, commit 30",
         "\"tier\":\"durable\""},
        {{0, 0, 0, 0, 0},
         {1, 30, 0, 0, 0},
         "from the durable copy of generation 1, commit 30",
         "\"tier\":\"durable\""},
        {{1, 30, 0, 0, 0},
         {1, 30, 0, 0, 0},
         "from the head's copy of generation 1, commit 30",
         "\"tier\":\"head\""},
        {{1, 20, 0, 0, 0},
         {1, 30, 0, 0, 0},
         "from the durable copy of generation 1, commit 30",
         "\"tier\":\"durable\""},
        /* The newest copy is kept by a peer agent (issue 28 §3): the resume names it. */
        {{1, 40, 0, 0, 7}, {1, 30, 0, 0, 0}, "from the copy kept by node ", "\"tier\":\"peer\""},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        one_worker_job(i > 0);
        J.copy = t[i].head;
        J.copy.stored_ms = now;
        J.durable = t[i].durable;
        J.durable.stored_ms = now;
        hv_jm_out_reset(&O);
        hv_jm_lost(&J, &W[0], "rank 0 on a was lost: node a is dead", now, &O);
        CHECK_EQ(J.state, HV_JOB_RUNNING);
        CHECK_EQ(J.resume_gen, 2);
        const hv_jm_action_t *e = find_event("job.resume");
        CHECK(e != NULL && strstr(e->text, t[i].text) != NULL);
        CHECK(e != NULL && e->data != NULL && strstr(e->data, t[i].tier) != NULL);
        if (e != NULL && strstr(e->text, t[i].text) == NULL) {
            fprintf(stderr, "row %zu: %s\n", i, e->text);
        }
    }
    /* The head's file gone and no durable copy: the job fails, saying there is no copy. */
    teardown();
    setup();
    job(1, 1, 1, 1, 5);
    place(NODE_A, 1);
    start_all();
    join_all();
    J.copy = (hv_jm_copy_t){.generation = 1, .commit = 40, .missing = 1};
    J.durable = (hv_jm_copy_t){0};
    hv_jm_out_reset(&O);
    hv_jm_lost(&J, &W[0], "rank 0 on a was lost: node a is dead", now, &O);
    CHECK_EQ(J.state, HV_JOB_FAILED);
    CHECK(strstr(J.reason, "no copy of the training state") != NULL);
}

/* Without a copy the job fails as before, and says that there was none. */
static void case_last_member_lost_without_copy(void) {
    job(1, 1, 1, 1, 5);
    place(NODE_A, 1);
    start_all();
    join_all();
    hv_jm_out_reset(&O);
    hv_jm_lost(&J, &W[0], "rank 0 on a was lost: node a is dead", now, &O);
    CHECK_EQ(J.state, HV_JOB_FAILED);
    CHECK(strstr(J.reason, "all 1 workers of generation 1 failed") != NULL);
    CHECK(strstr(J.reason, "no copy of the training state") != NULL);
    CHECK(find_event("job.resume") == NULL);
}

/* The resumes count as resets: a job whose nodes keep dying stops at --max-resets. */
static void case_resume_budget(void) {
    job(1, 1, 1, 1, 1);
    place(NODE_A, 1);
    start_all();
    join_all();
    J.copy = (hv_jm_copy_t){.generation = 1, .commit = 5, .stored_ms = now};
    hv_jm_lost(&J, &W[0], "rank 0 on a was lost", now, &O);
    CHECK_EQ(J.resumes, 1);
    size_t k = place(NODE_B, 1);
    hv_jm_started(&J, &W[k], now, &O);
    join(k, 0);
    CHECK_EQ(J.round_open, 0);
    hv_jm_out_reset(&O);
    hv_jm_lost(&J, &W[k], "rank 0 on b was lost", now, &O);
    CHECK_EQ(J.state, HV_JOB_FAILED);
    CHECK(strstr(J.reason, "--max-resets is 1") != NULL);
    CHECK_EQ(J.resumes, 1);
}

/* A program that exits with a status of its own is not resumed: the copy would fail again. A
 * worker killed by a signal (the OOM killer, a person) is. */
static void case_own_failure_not_resumed(void) {
    job(1, 1, 1, 1, 5);
    place(NODE_A, 1);
    start_all();
    join_all();
    J.copy = (hv_jm_copy_t){.generation = 1, .commit = 5, .stored_ms = now};
    hv_jm_exited(&J, &W[0], 3, 0, "rank 0 on a exited with status 3", now, &O);
    CHECK_EQ(J.state, HV_JOB_FAILED);
    CHECK(strstr(J.reason, "failed on its own") != NULL);
    teardown();
    setup();
    job(1, 1, 1, 1, 5);
    place(NODE_A, 1);
    start_all();
    join_all();
    J.copy = (hv_jm_copy_t){.generation = 1, .commit = 5, .stored_ms = now};
    hv_jm_exited(&J, &W[0], 0, 9, "rank 0 on a was killed by signal 9", now, &O);
    CHECK_EQ(J.state, HV_JOB_RUNNING);
    CHECK_EQ(J.resume_gen, 2);
}

/* Two members: the first loss rolls back onto the survivor as before (no resume); when the
 * survivor goes too while that round is open, the open round becomes the resume round. */
static void case_resume_in_open_round(void) {
    elastic_on_a_b(2, 1, 2, 5, 1, 1);
    J.copy = (hv_jm_copy_t){.generation = 1, .commit = 9, .stored_ms = now};
    hv_jm_lost(&J, &W[0], "rank 0 on a was lost", now, &O);
    CHECK_EQ(J.generation, 2);
    CHECK_EQ(J.resume_gen, 0);
    hv_jm_lost(&J, &W[1], "rank 1 on b was lost", now, &O);
    CHECK_EQ(J.state, HV_JOB_RUNNING);
    CHECK_EQ(J.generation, 2);
    CHECK_EQ(J.resume_gen, 2);
    size_t k = place(NODE_C, 1);
    hv_jm_started(&J, &W[k], now, &O);
    join(k, 0);
    CHECK_EQ(J.round_open, 0);
    CHECK_EQ(W[k].member_gen, 2);
}

/* ---- events' structured fields ---------------------------------------------------------------
 * Clients decide on these, never on the events' words: each scenario below leaves events whose
 * fields are checked against a table. */

/* The last event of kind (NULL: none). */
static const hv_jm_action_t *last_event(const char *kind) {
    const hv_jm_action_t *e = NULL;
    for (size_t i = 0; i < O.n; i++) {
        if (O.a[i].kind == HV_JA_EVENT && strcmp(O.a[i].event, kind) == 0) {
            e = &O.a[i];
        }
    }
    return e;
}

static void ev_start(void) { elastic_on_a_b(4, 2, 4, 3, 2, 2); }

static void ev_failure(void) {
    elastic_on_a_b(4, 2, 4, 3, 2, 2);
    hv_jm_out_reset(&O);
    hv_jm_exited(&J, &W[0], -1, 9, "Rang 0 tot", now, &O);
    now += 250;
    join_all(); /* the survivors re-join: generation 2 closes 250 ms after it opened */
}

static void ev_drain(void) {
    elastic_on_a_b(4, 2, 4, 3, 2, 2);
    hv_jm_out_reset(&O);
    hv_jm_drain(&J, NODE_B, "b geht", 0, now, &O);
}

static void ev_data_plane(void) {
    elastic_on_a_b(4, 2, 4, 3, 2, 2);
    hv_jm_out_reset(&O);
    join(1, 1); /* a member re-joins on its own: its collectives failed */
}

static void ev_grow(void) {
    elastic_on_a_b(4, 2, 4, 3, 2, 0);
    place(NODE_B, 2);
    hv_jm_started(&J, &W[2], now, &O);
    hv_jm_started(&J, &W[3], now, &O);
    hv_jm_out_reset(&O);
    join(2, 0);
}

static void ev_max_resets(void) {
    elastic_on_a_b(4, 2, 4, 0, 2, 2);
    hv_jm_out_reset(&O);
    hv_jm_exited(&J, &W[0], 3, 0, "x", now, &O);
}

static void ev_fixed_failure(void) {
    job(0, 2, 0, 0, 0);
    place(NODE_A, 2);
    start_all();
    hv_jm_out_reset(&O);
    hv_jm_exited(&J, &W[1], 3, 0, "y", now, &O);
}

static void ev_success(void) {
    elastic_on_a_b(4, 2, 4, 3, 2, 2);
    hv_jm_out_reset(&O);
    for (size_t i = 0; i < 4; i++) {
        finish(i);
    }
}

static void ev_cancel(void) {
    elastic_on_a_b(4, 2, 4, 3, 2, 2);
    hv_jm_out_reset(&O);
    hv_jm_end(&J, HV_JOB_CANCELLED, HV_EV_CANCELLED, "z", &O);
}

static void case_event_fields(void) {
    static const struct {
        const char *name;
        void (*run)(void);
        const char *kind;    /* the last event of this kind is checked */
        uint32_t generation; /* the fields it must have */
        hv_ev_reason_t reason;
        int rollback;
        uint32_t job_state; /* the wire's JobState (0: none) */
        uint64_t worker_id, node_id, duration_ms;
        uint32_t rank;
    } rows[] = {
        {"start open", ev_start, "round.open", 1, HV_EV_START, 0, 0, 0, 0, 0, 0},
        {"start close", ev_start, "round.close", 1, HV_EV_START, 0, 0, 0, 0, 0, 0},
        {"running", ev_start, "job.state", 0, HV_EV_NONE, 0, 3, 0, 0, 0, 0},
        {"failure open", ev_failure, "round.open", 2, HV_EV_FAILURE, 1, 0, 0, 0, 0, 0},
        {"failure close", ev_failure, "round.close", 2, HV_EV_FAILURE, 1, 0, 0, 0, 250, 0},
        {"failure worker", ev_failure, "worker.fail", 0, HV_EV_NONE, 0, 0, 10, NODE_A, 0, 0},
        {"drain", ev_drain, "round.open", 2, HV_EV_DRAIN, 0, 0, 0, 0, 0, 0},
        {"data plane", ev_data_plane, "round.open", 2, HV_EV_DATA_PLANE, 1, 0, 0, 0, 0, 0},
        {"grow", ev_grow, "round.open", 2, HV_EV_GROW, 0, 0, 0, 0, 0, 0},
        {"max resets", ev_max_resets, "job.state", 1, HV_EV_MAX_RESETS, 0, 5, 0, 0, 0, 0},
        {"fixed failure", ev_fixed_failure, "job.state", 0, HV_EV_WORKER_FAILED, 0, 5, 0, 0, 0, 0},
        {"success", ev_success, "job.state", 1, HV_EV_SUCCEEDED, 0, 4, 0, 0, 0, 0},
        {"cancel", ev_cancel, "job.state", 1, HV_EV_CANCELLED, 0, 6, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        setup();
        rows[i].run();
        const hv_jm_action_t *e = last_event(rows[i].kind);
        if (e == NULL) {
            fprintf(stderr, "  %s: no %s event\n", rows[i].name, rows[i].kind);
            CHECK(e != NULL);
            teardown();
            continue;
        }
        fprintf(stderr, "  %s: %s \"%s\"\n", rows[i].name, e->event, e->text);
        CHECK_EQ(e->ev.generation, rows[i].generation);
        CHECK_EQ(e->ev.reason, rows[i].reason);
        CHECK_EQ(e->ev.rollback, rows[i].rollback);
        CHECK_EQ(e->ev.job_state, rows[i].job_state);
        CHECK_EQ(e->ev.worker_id, rows[i].worker_id);
        CHECK_EQ(e->ev.node_id, rows[i].node_id);
        CHECK_EQ(e->ev.duration_ms, rows[i].duration_ms);
        CHECK_EQ(e->ev.rank, rows[i].rank);
        teardown();
    }
}

/* How a worker's end reads, row by row. */
static void case_exit_what(void) {
    static const struct {
        int code, sig;
        const char *reason, *want;
    } rows[] = {
        {0, 0, NULL, "rank 1 on b exited with status 0"},
        {3, 0, "", "rank 1 on b exited with status 3"},
        {-1, 9, NULL, "rank 1 on b was killed by signal SIGKILL"},
        {-1, 15, "stopped", "rank 1 on b was killed by signal SIGTERM"},
        {-1, 0, "no such file", "rank 1 on b could not run: no such file"},
        {2, 0, "no such file", "rank 1 on b exited with status 2"},
        {-1, 0, "", "rank 1 on b exited with status -1"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        char got[200];
        hv_jm_exit_what(got, sizeof(got), "rank 1 on b", rows[i].code, rows[i].sig, rows[i].reason);
        CHECK_STR(got, rows[i].want);
    }
}

/* Who may send a copy of the state, row by row: the head keeps generation 3, commit 10. */
static void case_copy_check(void) {
    static const struct {
        const char *name;
        hv_wk_state_t st;
        int removed;
        uint32_t member_gen, rank, gen;
        uint64_t commit;
        hv_err want;
    } rows[] = {
        {"rank 0, a newer commit", HV_WK_RUNNING, 0, 3, 0, 3, 11, HV_OK},
        {"rank 0 of a newer round", HV_WK_RUNNING, 0, 4, 0, 4, 1, HV_OK},
        {"the same commit", HV_WK_RUNNING, 0, 3, 0, 3, 10, HV_ESTATE},
        {"an older round", HV_WK_RUNNING, 0, 2, 0, 2, 99, HV_ESTATE},
        {"rank 1", HV_WK_RUNNING, 0, 3, 1, 3, 11, HV_EPERM},
        {"rank 0 of another round", HV_WK_RUNNING, 0, 4, 0, 3, 11, HV_EPERM},
        {"removed", HV_WK_RUNNING, 1, 3, 0, 3, 11, HV_EPERM},
        {"ended", HV_WK_EXITED, 0, 3, 0, 3, 11, HV_EPERM},
    };
    hv_jm_params_t p = {.elastic = 1, .np = 2, .min_np = 1, .max_np = 2, .check_every = 1};
    hv_jm_init(&J, 1, &p);
    J.copy = (hv_jm_copy_t){.generation = 3, .commit = 10, .stored_ms = 1};
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_jm_worker_t w = {.id = 7,
                            .state = rows[i].st,
                            .removed = rows[i].removed,
                            .member_gen = rows[i].member_gen,
                            .rank = rows[i].rank};
        char err[300] = "";
        hv_err rc = hv_jm_copy_check(&J, &w, rows[i].gen, rows[i].commit, err, sizeof(err));
        if (rc != rows[i].want || (rc != HV_OK && err[0] == '\0')) {
            fprintf(stderr, "%s: got %s want %s (%s)\n", rows[i].name, hv_strerror(rc),
                    hv_strerror(rows[i].want), err);
            hv_check_failures++;
        }
    }
    hv_jm_worker_t none = {.id = 7, .state = HV_WK_RUNNING, .member_gen = 1};
    J.copy.commit = 0; /* no copy kept: any first one from rank 0 */
    CHECK_RC(hv_jm_copy_check(&J, &none, 1, 1, NULL, 0), HV_OK);
}

/* Which copy a round tells its rank 0 to load, row by row: only the resume round, the newest
 * copy that is there. */
static void case_round_copy(void) {
    static const struct {
        const char *name;
        uint32_t resume_gen, gen;
        uint64_t head_commit, durable_commit;
        int head_missing;
        hv_copy_tier_t want;
    } rows[] = {
        {"not resuming", 0, 3, 10, 0, 0, HV_COPY_TIER_NONE},
        {"no round 0", 0, 0, 10, 0, 0, HV_COPY_TIER_NONE},
        {"another round", 4, 3, 10, 0, 0, HV_COPY_TIER_NONE},
        {"the resume round, head's copy", 4, 4, 10, 0, 0, HV_COPY_TIER_HEAD},
        {"the resume round, a newer durable copy", 4, 4, 10, 12, 0, HV_COPY_TIER_DURABLE},
        {"the resume round, the same commit: the head's", 4, 4, 10, 10, 0, HV_COPY_TIER_HEAD},
        {"the resume round, head's file gone", 4, 4, 10, 8, 1, HV_COPY_TIER_DURABLE},
        {"the resume round, no copy left", 4, 4, 0, 0, 0, HV_COPY_TIER_NONE},
    };
    hv_jm_params_t p = {.elastic = 1, .np = 2, .min_np = 1, .max_np = 2, .check_every = 1};
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_jm_init(&J, 1, &p);
        J.resume_gen = rows[i].resume_gen;
        J.copy = (hv_jm_copy_t){
            .generation = 3, .commit = rows[i].head_commit, .missing = rows[i].head_missing};
        J.durable = (hv_jm_copy_t){.generation = 3, .commit = rows[i].durable_commit};
        hv_copy_tier_t got = hv_jm_round_copy(&J, rows[i].gen);
        if (got != rows[i].want) {
            fprintf(stderr, "%s: got %s want %s\n", rows[i].name, hv_copy_tier_name(got),
                    hv_copy_tier_name(rows[i].want));
            hv_check_failures++;
        }
    }
}

/* Which ended jobs keep their copies: only a failed one. */
static void case_copies_kept(void) {
    static const struct {
        hv_job_state_t st;
        int want;
    } rows[] = {{HV_JOB_SUCCEEDED, 0}, {HV_JOB_FAILED, 1}, {HV_JOB_CANCELLED, 0}};
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        CHECK_EQ(hv_jm_copies_kept(rows[i].st), rows[i].want);
    }
}

/* The rank base of new workers: live members that are not removed, row by row. */
static void case_base_rank(void) {
    static const struct {
        hv_wk_state_t st[4];
        int removed[4];
        size_t n;
        uint32_t want;
    } rows[] = {
        {{HV_WK_RUNNING}, {0}, 0, 0},
        {{HV_WK_RUNNING, HV_WK_STARTING}, {0, 0}, 2, 2},
        {{HV_WK_RUNNING, HV_WK_EXITED, HV_WK_LOST, HV_WK_LEFT}, {0, 0, 0, 0}, 4, 1},
        {{HV_WK_RUNNING, HV_WK_RUNNING, HV_WK_KILLED}, {0, 1, 0}, 3, 1},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_jm_params_t p = {.elastic = 1, .np = 1, .min_np = 1, .max_np = 4, .check_every = 1};
        hv_jm_init(&J, 1, &p);
        hv_jm_worker_t ws[4];
        memset(ws, 0, sizeof(ws));
        for (size_t k = 0; k < rows[i].n; k++) {
            ws[k].id = k + 1;
            ws[k].state = rows[i].st[k];
            ws[k].removed = rows[i].removed[k];
            CHECK_RC(hv_jm_attach(&J, &ws[k]), HV_OK);
        }
        CHECK_EQ(hv_jm_base_rank(&J), rows[i].want);
        hv_jm_fini(&J);
    }
}

/* A head restart: an open round's deadlines move to a full rendezvous timeout (30 s) from now,
 * never earlier; a closed round is left alone. */
static void case_restarted(void) {
    static const struct {
        int open;
        uint64_t deadline, fail_at, want_deadline, want_fail_at;
    } rows[] = {
        {1, 1000, 2000, 130000, 130000},
        {1, 1000, 500000, 130000, 500000},
        {1, 400000, 500000, 400000, 500000},
        {0, 1000, 2000, 1000, 2000},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_jm_params_t p = {.elastic = 1, .np = 1, .min_np = 1, .max_np = 2, .rdzv_timeout_s = 30};
        hv_jm_init(&J, 1, &p);
        J.round_open = rows[i].open;
        J.round_deadline_ms = rows[i].deadline;
        J.round_fail_at_ms = rows[i].fail_at;
        hv_jm_restarted(&J, 100000);
        CHECK_EQ(J.round_deadline_ms, rows[i].want_deadline);
        CHECK_EQ(J.round_fail_at_ms, rows[i].want_fail_at);
    }
}

/* A size asked for by a worker: min 2, max 6, row by row from the target the job has. */
static void case_resize(void) {
    static const struct {
        uint32_t target, size, accepted;
        int changed;
    } rows[] = {
        {0, 4, 4, 1}, /* no target (max 6) -> 4 */
        {0, 9, 6, 0}, /* above max: max, as before */
        {0, 6, 6, 0}, /* max, as before */
        {4, 1, 2, 1}, /* below min: min */
        {4, 4, 4, 0}, /* the same */
        {2, 0, 6, 1}, /* 0: back to max */
        {1, 2, 2, 0}, /* a stored target below min already meant min */
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_jm_params_t p = {.elastic = 1, .np = 2, .min_np = 2, .max_np = 6};
        p.target = rows[i].target;
        uint32_t acc = 0;
        CHECK_EQ(hv_jm_resize(&p, rows[i].size, &acc), rows[i].changed);
        CHECK_EQ(acc, rows[i].accepted);
        CHECK_EQ(p.target, rows[i].target); /* not changed by the decision */
    }
    CHECK_EQ(hv_jm_kill_deadline(1000, 3000), 1000 + 3000 + HV_JM_KILL_SLACK_MS);
    CHECK_EQ(hv_jm_kill_overdue(0, 99999), 0); /* no kill order */
    CHECK_EQ(hv_jm_kill_overdue(9000, 9000), 0);
    CHECK_EQ(hv_jm_kill_overdue(9000, 9001), 1);
}

HV_CHECK_MAIN(
    setup, teardown, {"fixed_success", case_fixed_success}, {"event_fields", case_event_fields},
    {"fixed_failure", case_fixed_failure},
    {"shrink_make_before_break", case_shrink_make_before_break},
    {"shrink_fixed_refused", case_shrink_fixed_refused}, {"preempt_resume", case_preempt_resume},
    {"preempt_fixed_refused", case_preempt_fixed_refused},
    {"preempt_at_commit", case_preempt_at_commit}, {"preempt_due_table", case_preempt_due_table},
    {"preempt_member_fails", case_preempt_member_fails},
    {"preempt_begin_refused", case_preempt_begin_refused},
    {"fixed_exit0_without_done", case_fixed_exit0_without_done},
    {"fixed_plain_program", case_fixed_plain_program},
    {"fixed_rendezvous_timeout", case_fixed_rendezvous_timeout},
    {"fixed_rejoin_refused", case_fixed_rejoin_refused},
    {"failure_blacklists_node", case_failure_blacklists_node}, {"all_fail", case_all_fail},
    {"killed_never_success", case_killed_never_success}, {"max_resets", case_max_resets},
    {"place", case_place}, {"grow_then_drain", case_grow_then_drain},
    {"notice_make_before_break", case_notice_make_before_break},
    {"notice_hold_ends", case_notice_hold_ends},
    {"drain_below_min_waits_for_capacity", case_drain_below_min_waits_for_capacity},
    {"below_min_times_out", case_below_min_times_out},
    {"straggler_left_out", case_straggler_left_out}, {"resend_lost_reply", case_resend_lost_reply},
    {"join_refusals", case_join_refusals},
    {"elastic_exit0_without_done", case_elastic_exit0_without_done},
    {"newcomers_need_a_survivor", case_newcomers_need_a_survivor},
    {"drain_hands_over_state", case_drain_hands_over_state},
    {"done_in_older_generation", case_done_in_older_generation},
    {"last_holder_killed_while_finishing", case_last_holder_killed_while_finishing},
    {"holder_killed_others_not_rejoined", case_holder_killed_others_not_rejoined},
    {"done_worker_lost", case_done_worker_lost},
    {"all_done_while_node_drains", case_all_done_while_node_drains},
    {"head_restart_before_done", case_head_restart_before_done},
    {"nothing_opens_after_first_success", case_nothing_opens_after_first_success},
    {"failure_after_first_success", case_failure_after_first_success},
    {"round_without_holders_fails_at_once", case_round_without_holders_fails_at_once},
    {"suspect_round_closes_after_grace", case_suspect_round_closes_after_grace},
    {"suspect_before_round_not_waited_for", case_suspect_before_round_not_waited_for},
    {"suspect_heard_again_waits", case_suspect_heard_again_waits},
    {"notice_members_stay_when_others_vanish", case_notice_members_stay_when_others_vanish},
    {"notice_member_stays_until_its_replacement", case_notice_member_stays_until_its_replacement},
    {"notice_end_does_not_leave_to_suspects", case_notice_end_does_not_leave_to_suspects},
    {"drain_with_suspects_keeps_members", case_drain_with_suspects_keeps_members},
    {"leaving_member_taken_back_when_holders_fail",
     case_leaving_member_taken_back_when_holders_fail},
    {"exit_what", case_exit_what}, {"copy_check", case_copy_check}, {"base_rank", case_base_rank},
    {"restarted", case_restarted}, {"resize", case_resize},
    {"leaving_member_taken_back_when_holders_vanish",
     case_leaving_member_taken_back_when_holders_vanish},
    {"names", case_names}, {"loss_decide_table", case_loss_decide_table},
    {"lost_before_first_commit_restarts", case_lost_before_first_commit_restarts},
    {"lost_after_commit_fails", case_lost_after_commit_fails},
    {"own_failure_before_commit_fails", case_own_failure_before_commit_fails},
    {"start_worker_gone_wants_again", case_start_worker_gone_wants_again},
    {"start_below_min_np_wants", case_start_below_min_np_wants},
    {"last_member_lost_resumes", case_last_member_lost_resumes},
    {"lost_then_reported", case_lost_then_reported},
    {"lone_suspect_given_up", case_lone_suspect_given_up}, {"give_up_rules", case_give_up_rules},
    {"fence", case_fence}, {"silent_rolls_back_at_once", case_silent_rolls_back_at_once},
    {"resume_from_durable", case_resume_from_durable},
    {"last_member_lost_without_copy", case_last_member_lost_without_copy},
    {"resume_budget", case_resume_budget},
    {"own_failure_not_resumed", case_own_failure_not_resumed},
    {"resume_in_open_round", case_resume_in_open_round}, {"round_copy", case_round_copy},
    {"copies_kept", case_copies_kept})
