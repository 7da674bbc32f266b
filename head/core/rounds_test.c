/*
 * rounds_test: the rank order of a closing round (seniority, contiguous hosts, newcomers
 * appended), the close/wait/fail decision table, and the membership diff. Each ordering case is
 * a scenario an operator would recognise (a failure, a node added, a drain).
 * `rounds_test <case>` runs one case.
 */
#include "rounds.h"
#include "hv_check.h"

#include <stdio.h>

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define NEW HV_ROUND_NEW

/* Assigns and checks: want_rank[i] is the rank member i must get; checks local ranks and
 * cross ranks follow from node runs. */
static void check_assign(const hv_round_member_t *m, size_t n, const uint32_t *want_rank,
                         uint32_t want_hosts) {
    size_t scratch[64];
    hv_round_slot_t out[64];
    uint32_t hosts = 0;
    CHECK_RC(hv_round_assign(m, n, scratch, out, &hosts), HV_OK);
    CHECK_EQ(hosts, want_hosts);
    for (size_t i = 0; i < n; i++) {
        CHECK_EQ(out[i].rank, want_rank[i]);
    }
    /* local ranks: members of one node are contiguous, local_rank = rank - first rank */
    for (size_t i = 0; i < n; i++) {
        uint32_t first = UINT32_MAX, count = 0;
        for (size_t j = 0; j < n; j++) {
            if (m[j].node_id == m[i].node_id) {
                count++;
                if (out[j].rank < first) {
                    first = out[j].rank;
                }
            }
        }
        CHECK_EQ(out[i].local_size, count);
        CHECK_EQ(out[i].local_rank, out[i].rank - first);
        CHECK(out[i].cross_rank < hosts);
    }
}

/* The first round: everyone new; nodes in order of their first worker id, workers by id. */
static void case_first_round(void) {
    hv_round_member_t m[] = {
        {.worker_id = 11, .node_id = 2, .prev_rank = NEW},
        {.worker_id = 12, .node_id = 2, .prev_rank = NEW},
        {.worker_id = 13, .node_id = 1, .prev_rank = NEW},
        {.worker_id = 14, .node_id = 1, .prev_rank = NEW},
    };
    uint32_t want[] = {0, 1, 2, 3};
    check_assign(m, N(m), want, 2);
}

/* Elastic Horovod's scenario: A(2) ranks 0,1 from g1; B(2) added in g2 -> ranks 2,3. */
static void case_added_host_appended(void) {
    hv_round_member_t m[] = {
        {.worker_id = 20, .node_id = 5, .joined_gen = 0, .prev_rank = NEW}, /* B, new */
        {.worker_id = 1, .node_id = 4, .joined_gen = 1, .prev_rank = 1},    /* A */
        {.worker_id = 21, .node_id = 5, .joined_gen = 0, .prev_rank = NEW}, /* B, new */
        {.worker_id = 0, .node_id = 4, .joined_gen = 1, .prev_rank = 0},    /* A */
    };
    uint32_t want[] = {2, 1, 3, 0};
    check_assign(m, N(m), want, 2);
}

/* Then A is drained: B's workers (joined g2, ranks 2,3) become 0,1: rank 0 on B. */
static void case_drain_oldest_survivor_rank0(void) {
    hv_round_member_t m[] = {
        {.worker_id = 21, .node_id = 5, .joined_gen = 2, .prev_rank = 3},
        {.worker_id = 20, .node_id = 5, .joined_gen = 2, .prev_rank = 2},
    };
    uint32_t want[] = {1, 0};
    check_assign(m, N(m), want, 1);
}

/* Rank 0's node failed: the node that held rank 2 leads; a newcomer on a third node last, and
 * a newcomer on a surviving node goes after that node's former members. */
static void case_failure_with_newcomers(void) {
    hv_round_member_t m[] = {
        {.worker_id = 30, .node_id = 9, .joined_gen = 0, .prev_rank = NEW}, /* new node */
        {.worker_id = 3, .node_id = 7, .joined_gen = 1, .prev_rank = 3},
        {.worker_id = 31, .node_id = 7, .joined_gen = 0, .prev_rank = NEW}, /* new on 7 */
        {.worker_id = 2, .node_id = 7, .joined_gen = 1, .prev_rank = 2},
    };
    uint32_t want[] = {3, 1, 2, 0};
    check_assign(m, N(m), want, 2);
}

/* A node that joined in g1 outranks one whose oldest member joined in g2, whatever the previous
 * ranks say (a senior worker may sit at a high rank after re-orderings). */
static void case_generation_before_rank(void) {
    hv_round_member_t m[] = {
        {.worker_id = 50, .node_id = 2, .joined_gen = 2, .prev_rank = 0},
        {.worker_id = 5, .node_id = 1, .joined_gen = 1, .prev_rank = 4},
    };
    uint32_t want[] = {1, 0};
    check_assign(m, N(m), want, 2);
}

static void case_deterministic(void) {
    hv_round_member_t a[] = {
        {.worker_id = 8, .node_id = 3, .prev_rank = NEW},
        {.worker_id = 7, .node_id = 4, .prev_rank = NEW},
        {.worker_id = 9, .node_id = 3, .prev_rank = NEW},
    };
    hv_round_member_t b[] = {a[2], a[0], a[1]};
    size_t scratch[3];
    hv_round_slot_t oa[3], ob[3];
    CHECK_RC(hv_round_assign(a, 3, scratch, oa, NULL), HV_OK);
    CHECK_RC(hv_round_assign(b, 3, scratch, ob, NULL), HV_OK);
    CHECK_EQ(oa[0].rank, ob[1].rank);
    CHECK_EQ(oa[1].rank, ob[2].rank);
    CHECK_EQ(oa[2].rank, ob[0].rank);
    CHECK_EQ(oa[1].rank, 0); /* node 4's worker 7 is the oldest id */
    CHECK_RC(hv_round_assign(NULL, 0, NULL, NULL, NULL), HV_OK);
    CHECK_RC(hv_round_assign(NULL, 2, scratch, oa, NULL), HV_EINVAL);
}

static void case_decide(void) {
    static const struct {
        const char *what;
        hv_round_view_t v;
        hv_round_decision_t want;
    } t[] = {
        {"all joined", {4, 4, 2, 100, 1000, 5000, 0}, HV_ROUND_CLOSE},
        {"waiting for stragglers", {4, 3, 2, 100, 1000, 5000, 0}, HV_ROUND_WAIT},
        {"deadline with enough", {4, 3, 2, 1000, 1000, 5000, 0}, HV_ROUND_CLOSE},
        {"deadline below min", {4, 1, 2, 1000, 1000, 5000, 0}, HV_ROUND_WAIT},
        {"below min, all joined", {1, 1, 2, 100, 1000, 5000, 0}, HV_ROUND_WAIT},
        {"below min at fail_at", {1, 1, 2, 5000, 1000, 5000, 0}, HV_ROUND_FAIL},
        {"fixed-size: all of np", {4, 4, 4, 100, 1000, 1000, 0}, HV_ROUND_CLOSE},
        {"fixed-size: timeout", {4, 3, 4, 1000, 1000, 1000, 0}, HV_ROUND_FAIL},
        {"nobody expected", {0, 0, 1, 100, 1000, 5000, 0}, HV_ROUND_WAIT},
        {"more joined than expected", {2, 3, 2, 100, 1000, 5000, 0}, HV_ROUND_CLOSE},
        /* A member whose node is suspected lost (its agent's session closed) is waived once its
         * grace passed: the round closes without it long before the deadline. */
        {"suspect waived: close without it", {4, 3, 2, 100, 1000, 5000, 1}, HV_ROUND_CLOSE},
        {"suspect waived, a straggler left", {4, 2, 2, 100, 1000, 5000, 1}, HV_ROUND_WAIT},
        {"suspects waived, below min", {4, 1, 2, 100, 1000, 5000, 3}, HV_ROUND_WAIT},
        {"every member suspected", {2, 0, 1, 100, 1000, 5000, 2}, HV_ROUND_WAIT},
    };
    for (size_t i = 0; i < N(t); i++) {
        hv_round_decision_t got = hv_round_decide(&t[i].v);
        if (got != t[i].want) {
            fprintf(stderr, "decide '%s': got %d want %d\n", t[i].what, got, t[i].want);
            hv_check_failures++;
        }
    }
}

static void case_diff(void) {
    uint64_t g1[] = {1, 2, 3, 4}, g2[] = {3, 4, 5}, none[1];
    size_t a, r;
    hv_round_diff(g1, 4, g2, 3, &a, &r);
    CHECK_EQ(a, 1);
    CHECK_EQ(r, 2);
    hv_round_diff(none, 0, g1, 4, &a, &r);
    CHECK_EQ(a, 4);
    CHECK_EQ(r, 0);
    hv_round_diff(g1, 4, g1, 4, &a, &r);
    CHECK_EQ(a + r, 0);
}

HV_CHECK_MAIN(NULL, NULL, {"first_round", case_first_round},
              {"added_host_appended", case_added_host_appended},
              {"drain_oldest_survivor_rank0", case_drain_oldest_survivor_rank0},
              {"failure_with_newcomers", case_failure_with_newcomers},
              {"generation_before_rank", case_generation_before_rank},
              {"deterministic", case_deterministic}, {"decide", case_decide}, {"diff", case_diff})
