/*
 * ringev_test: which nodes the survivors' reports of broken ring links condemn (a table of
 * rounds, reports and who has re-joined), how reports are kept per round, and the members read
 * from the job machine (hv_ringev_judge).
 * `ringev_test <case>` runs one case.
 */
#include "ringev.h"
#include "hv_check.h"

#include <string.h>

#define MAXM 6

/* One row: a round's members in rank order (worker ids 1..n; node of each, spoke, mute),
 * reports (reporter, subject) and the nodes the rule must name. */
typedef struct row_s {
    const char *what;
    int n;
    uint64_t node[MAXM];
    int spoke[MAXM];
    int mute[MAXM];
    int nrep;
    struct {
        uint64_t reporter, subject;
    } rep[8];
    int nwant;
    uint64_t want[3]; /* node ids, in rank order of their first named worker */
} row_t;

static void case_table(void) {
    static const row_t rows[] = {
        {"two nodes: the survivor names the frozen one",
         2,
         {10, 20},
         {1, 0},
         {0, 0},
         1,
         {{1, 2}},
         1,
         {20}},
        {"both re-joined (a transient break): none",
         2,
         {10, 20},
         {1, 1},
         {0, 0},
         2,
         {{1, 2}, {2, 1}},
         0,
         {0}},
        {"no report: none (the lease decides)", 2, {10, 20}, {1, 0}, {0, 0}, 0, {{0, 0}}, 0, {0}},
        {"three nodes, the cascade: 1 names 3, 2 names 1 (who re-joined)",
         3,
         {10, 20, 30},
         {1, 1, 0},
         {0, 0, 0},
         2,
         {{1, 3}, {2, 1}},
         1,
         {30}},
        {"three nodes, the upstream neighbour has not spoken yet: wait",
         3,
         {10, 20, 30},
         {1, 0, 0},
         {0, 0, 0},
         1,
         {{1, 3}},
         0,
         {0}},
        {"the accuser's report arrives before the accused re-joins: wait for the others",
         3,
         {10, 20, 30},
         {0, 1, 0},
         {0, 0, 0},
         1,
         {{2, 1}},
         0,
         {0}},
        {"the other neighbour is gone: it cannot speak",
         3,
         {10, 20, 30},
         {1, 0, 0},
         {0, 1, 0},
         1,
         {{1, 3}},
         1,
         {30}},
        {"two workers a node: one boundary named, the other neighbour spoke",
         4,
         {10, 10, 20, 20},
         {1, 1, 0, 0},
         {0, 0, 0, 0},
         2,
         {{1, 4}, {2, 1}},
         1,
         {20}},
        {"a worker of the named node re-joined: it is alive",
         4,
         {10, 10, 20, 20},
         {1, 1, 1, 0},
         {0, 0, 0, 0},
         1,
         {{1, 4}},
         0,
         {0}},
        {"named only by a neighbour on its own node: none",
         3,
         {10, 10, 20},
         {0, 1, 1},
         {0, 0, 0},
         1,
         {{2, 1}},
         0,
         {0}},
        {"reports naming or made by non-members count for nothing",
         2,
         {10, 20},
         {1, 0},
         {0, 0},
         2,
         {{1, 9}, {9, 2}},
         0,
         {0}},
        {"two nodes frozen at once, each named",
         4,
         {10, 20, 30, 40},
         {1, 0, 1, 0},
         {0, 0, 0, 0},
         2,
         {{1, 2}, {3, 4}},
         2,
         {20, 40}},
        {"the named worker ended (its exit was reported): its node is alive",
         2,
         {10, 20},
         {1, 0},
         {0, 1},
         1,
         {{1, 2}},
         0,
         {0}},
        {"one member: no neighbours", 1, {10}, {1}, {0}, 1, {{1, 1}}, 0, {0}},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const row_t *r = &rows[i];
        hv_ringev_t ev = {0};
        for (int k = 0; k < r->nrep; k++) {
            CHECK_RC(hv_ringev_note(&ev, 7, r->rep[k].reporter, &r->rep[k].subject, 1), HV_OK);
        }
        hv_ringev_member_t m[MAXM];
        for (int k = 0; k < r->n; k++) {
            m[k] = (hv_ringev_member_t){.worker_id = (uint64_t)k + 1,
                                        .node_id = r->node[k],
                                        .spoke = r->spoke[k],
                                        .mute = r->mute[k]};
        }
        hv_ringev_verdict_t v[3];
        size_t nv = hv_ringev_decide(&ev, m, (size_t)r->n, v, 3);
        int ok = nv == (size_t)r->nwant;
        for (size_t k = 0; ok && k < nv; k++) {
            ok = v[k].node_id == r->want[k];
        }
        if (!ok) {
            fprintf(stderr, "row %zu (%s): got %zu verdicts (first node %llu), want %d\n", i,
                    r->what, nv, nv > 0 ? (unsigned long long)v[0].node_id : 0ULL, r->nwant);
            hv_check_failures++;
        }
        hv_ringev_fini(&ev);
    }
}

/* The silence rule: a row's members as above, reports (reporter, subject, how, silent_ms; how 0
 * is a broken link named at a re-join), and the node the rule must name with the silence it
 * carries (0: none). */
typedef struct srow_s {
    const char *what;
    int n;
    uint64_t node[MAXM];
    int spoke[MAXM];
    int mute[MAXM];
    int nrep;
    hv_ringev_report_t rep[6];
    uint64_t want;    /* node id, 0: none */
    uint32_t want_ms; /* its silence */
    int want_silent;  /* condemned by the silence rule (0: by broken links) */
} srow_t;

#define H HV_RINGEV_HEAR
#define K HV_RINGEV_ACK

static const srow_t silent_rows[] = {
    {"two nodes, a link down: no heartbeat, no acknowledgement",
     2,
     {10, 20},
     {0, 0},
     {0, 0},
     2,
     {{1, 2, H, 520}, {1, 2, K, 610}},
     20,
     520,
     1},
    {"two nodes, no heartbeat but acknowledged (a starved or frozen process): none",
     2,
     {10, 20},
     {0, 0},
     {0, 0},
     1,
     {{1, 2, H, 520}},
     0,
     0,
     0},
    {"two nodes, not acknowledged but beating: none",
     2,
     {10, 20},
     {0, 0},
     {0, 0},
     1,
     {{1, 2, K, 520}},
     0,
     0,
     0},
    {"three nodes, node 20's link down: its left hears nothing, its right gets no ack",
     3,
     {10, 20, 30},
     {0, 0, 0},
     {0, 0, 0},
     2,
     {{1, 2, H, 500}, {3, 2, K, 560}},
     20,
     500,
     1},
    {"three nodes, the right neighbour's report has not come yet: wait",
     3,
     {10, 20, 30},
     {0, 0, 0},
     {0, 0, 0},
     1,
     {{1, 2, H, 500}},
     0,
     0,
     0},
    {"each neighbour in the other's way counts for nothing",
     3,
     {10, 20, 30},
     {0, 0, 0},
     {0, 0, 0},
     2,
     {{1, 2, K, 500}, {3, 2, H, 560}},
     0,
     0,
     0},
    {"the silent node reported something itself: it reaches the head",
     3,
     {10, 20, 30},
     {0, 0, 0},
     {0, 0, 0},
     3,
     {{1, 2, H, 500}, {3, 2, K, 560}, {2, 1, H, 500}},
     0,
     0,
     0},
    {"the right neighbour is gone: it cannot speak",
     3,
     {10, 20, 30},
     {0, 0, 0},
     {0, 0, 1},
     1,
     {{1, 2, H, 700}},
     20,
     700,
     1},
    {"the right neighbour re-joined naming it broken",
     3,
     {10, 20, 30},
     {0, 0, 1},
     {0, 0, 0},
     2,
     {{1, 2, H, 500}, {3, 2, 0, 0}},
     20,
     500,
     1},
    {"two workers on node 20: the left of the first and the right of the last",
     4,
     {10, 10, 20, 20},
     {0, 0, 0, 0},
     {0, 0, 0, 0},
     2,
     {{2, 3, H, 510}, {1, 4, K, 540}},
     20,
     510,
     1},
    {"two workers on node 20: one side only: none",
     4,
     {10, 10, 20, 20},
     {0, 0, 0, 0},
     {0, 0, 0, 0},
     1,
     {{2, 3, H, 510}},
     0,
     0,
     0},
    {"reports from a neighbour on the subject's own node: none",
     3,
     {10, 10, 20},
     {0, 0, 0},
     {0, 0, 0},
     2,
     {{1, 2, H, 500}, {1, 2, K, 500}},
     0,
     0,
     0},
    {"a worker of the silent node re-joined: it is alive",
     3,
     {10, 20, 30},
     {0, 1, 0},
     {0, 0, 0},
     2,
     {{1, 2, H, 500}, {3, 2, K, 560}},
     0,
     0,
     0},
    {"the subject ended (its exit was reported): its node is alive",
     3,
     {10, 20, 30},
     {0, 0, 0},
     {0, 1, 0},
     2,
     {{1, 2, H, 500}, {3, 2, K, 560}},
     0,
     0,
     0},
    {"broken links first: both neighbours re-joined naming it",
     3,
     {10, 20, 30},
     {1, 0, 1},
     {0, 0, 0},
     3,
     {{1, 2, 0, 0}, {3, 2, 0, 0}, {1, 2, H, 500}},
     20,
     0,
     0},
};

static void case_silent_table(void) {
    for (size_t i = 0; i < sizeof(silent_rows) / sizeof(silent_rows[0]); i++) {
        const srow_t *r = &silent_rows[i];
        hv_ringev_t ev = {0};
        for (int k = 0; k < r->nrep; k++) {
            const hv_ringev_report_t *p = &r->rep[k];
            if (p->how == HV_RINGEV_BROKEN) {
                CHECK_RC(hv_ringev_note(&ev, 7, p->reporter, &p->subject, 1), HV_OK);
            } else {
                CHECK_RC(
                    hv_ringev_note_silent(&ev, 7, p->reporter, p->subject, p->how, p->silent_ms),
                    HV_OK);
            }
        }
        hv_ringev_member_t m[MAXM];
        for (int k = 0; k < r->n; k++) {
            m[k] = (hv_ringev_member_t){.worker_id = (uint64_t)k + 1,
                                        .node_id = r->node[k],
                                        .spoke = r->spoke[k],
                                        .mute = r->mute[k]};
        }
        hv_ringev_verdict_t v[3];
        size_t nv = hv_ringev_decide(&ev, m, (size_t)r->n, v, 3);
        int ok = r->want == 0
                     ? nv == 0
                     : nv == 1 && v[0].node_id == r->want && v[0].silent == r->want_silent &&
                           (!r->want_silent || v[0].silent_ms == r->want_ms);
        if (!ok) {
            fprintf(stderr, "row %zu (%s): got %zu verdicts (node %llu, silent %d, %u ms)\n", i,
                    r->what, nv, nv > 0 ? (unsigned long long)v[0].node_id : 0ULL,
                    nv > 0 ? v[0].silent : 0, nv > 0 ? v[0].silent_ms : 0);
            hv_check_failures++;
        }
        hv_ringev_fini(&ev);
    }
}

/* Silence reports are kept per round like the others, once per (reporter, subject, how); an
 * unknown way is dropped. */
static void case_silent_notes(void) {
    hv_ringev_t ev = {0};
    CHECK_RC(hv_ringev_note_silent(&ev, 4, 1, 2, H, 500), HV_OK);
    CHECK_RC(hv_ringev_note_silent(&ev, 4, 1, 2, H, 900), HV_OK); // repeated: the first stays
    CHECK_RC(hv_ringev_note_silent(&ev, 4, 1, 2, K, 600), HV_OK);
    CHECK_RC(hv_ringev_note_silent(&ev, 4, 1, 2, 7, 600), HV_OK); // unknown: dropped
    CHECK_RC(hv_ringev_note_silent(&ev, 3, 1, 3, H, 600), HV_OK); // older round: dropped
    CHECK_EQ(ev.n, 2);
    CHECK_EQ(ev.r[0].silent_ms, 500);
    uint64_t subj = 2;
    CHECK_RC(hv_ringev_note(&ev, 4, 1, &subj, 1), HV_OK); // a broken link is another report
    CHECK_EQ(ev.n, 3);
    CHECK_RC(hv_ringev_note_silent(&ev, 5, 3, 1, K, 600), HV_OK); // a newer round replaces
    CHECK_EQ(ev.n, 1);
    CHECK_EQ(ev.generation, 5);
    hv_ringev_fini(&ev);
}

#undef H
#undef K

/* The verdict says who was named and by whom (for the event's message). */
static void case_verdict_names(void) {
    hv_ringev_t ev = {0};
    uint64_t subj[2] = {4, 4};
    CHECK_RC(hv_ringev_note(&ev, 3, 1, subj, 2), HV_OK);
    CHECK_EQ(ev.n, 1); // the same report twice is kept once
    hv_ringev_member_t m[4] = {{1, 10, 1, 0}, {2, 10, 1, 0}, {3, 20, 0, 0}, {4, 20, 0, 0}};
    hv_ringev_verdict_t v;
    CHECK_EQ(hv_ringev_decide(&ev, m, 4, &v, 1), 1);
    CHECK_EQ(v.node_id, 20);
    CHECK_EQ(v.worker_id, 4);
    CHECK_EQ(v.reporter, 1);
    CHECK_EQ(hv_ringev_decide(&ev, m, 4, &v, 0), 0); // no room: nothing written
    hv_ringev_fini(&ev);
}

/* Reports are kept for one round: an older round's are dropped, a newer round's replace them. */
static void case_rounds(void) {
    hv_ringev_t ev = {0};
    uint64_t a = 2, b = 3;
    CHECK_RC(hv_ringev_note(&ev, 5, 1, &a, 1), HV_OK);
    CHECK_RC(hv_ringev_note(&ev, 4, 1, &b, 1), HV_OK);
    CHECK_EQ(ev.n, 1);
    CHECK_EQ(ev.generation, 5);
    CHECK_RC(hv_ringev_note(&ev, 6, 1, &b, 1), HV_OK);
    CHECK_EQ(ev.n, 1);
    CHECK_EQ(ev.generation, 6);
    CHECK_EQ(ev.r[0].subject, 3);
    for (uint64_t k = 0; k < 40; k++) { // grows
        CHECK_RC(hv_ringev_note(&ev, 6, 100 + k, &a, 1), HV_OK);
    }
    CHECK_EQ(ev.n, 41);
    hv_ringev_clear(&ev);
    CHECK_EQ(ev.n, 0);
    CHECK_EQ(ev.generation, 0);
    hv_ringev_fini(&ev);
}

/* The members as the job machine sees them: rank order from member_gen/rank, spoke from a
 * waiting JoinRound, mute from an ended, removed or already suspected worker; reports about a
 * round that a later one replaced are forgotten. */
static void case_judge_job(void) {
    hv_jm_worker_t w[4] = {
        {.id = 11, .node_id = 10, .state = HV_WK_RUNNING, .member_gen = 3, .rank = 1},
        {.id = 12, .node_id = 20, .state = HV_WK_RUNNING, .member_gen = 3, .rank = 2},
        {.id = 13, .node_id = 30, .state = HV_WK_RUNNING, .member_gen = 3, .rank = 0},
        {.id = 14, .node_id = 30, .state = HV_WK_RUNNING, .member_gen = 2, .rank = 0},
    };
    hv_jm_worker_t *ws[4] = {&w[0], &w[1], &w[2], &w[3]};
    hv_jm_job_t j;
    memset(&j, 0, sizeof(j));
    j.w = ws;
    j.nw = 4;
    hv_ringev_t ev = {0};
    uint64_t subj = 12; // ring 13 -> 11 -> 12 -> 13: 11 (node 10) names 12 (node 20)
    CHECK_RC(hv_ringev_note(&ev, 3, 11, &subj, 1), HV_OK);
    w[0].joined = 1;
    hv_ringev_verdict_t v[2];
    CHECK_EQ(hv_ringev_judge(&ev, &j, v, 2), 0); // 13, 12's other neighbour, has not spoken
    w[2].suspect_until = 5000;                   // 13's node is suspected: it cannot speak
    CHECK_EQ(hv_ringev_judge(&ev, &j, v, 2), 1);
    CHECK_EQ(v[0].node_id, 20);
    w[2].suspect_until = 0;
    w[2].state = HV_WK_LOST; // gone: it cannot speak either
    CHECK_EQ(hv_ringev_judge(&ev, &j, v, 2), 1);
    w[1].joined = 1; // 12 re-joined after all: alive
    CHECK_EQ(hv_ringev_judge(&ev, &j, v, 2), 0);
    w[1].joined = 0;
    w[1].state = HV_WK_EXITED; // 12 crashed and its agent said so: the node is alive
    CHECK_EQ(hv_ringev_judge(&ev, &j, v, 2), 0);
    w[1].state = HV_WK_RUNNING;
    w[1].joined = 0;
    w[0].member_gen = 4; // round 4 closed: the reports about round 3 are history
    CHECK_EQ(hv_ringev_judge(&ev, &j, v, 2), 0);
    CHECK_EQ(ev.n, 0);
    hv_ringev_fini(&ev);
}

/* Death watch (hv_ringev_dead): a worker reported dead by a same-node ring neighbour is ended
 * at once; a row changes one thing from the base job and says whether the report is acted on.
 * Base: round 3 closed, ring 0 -> 1 -> 2 -> 3 (ids 1..4); 1 and 2 on node 10, 3 and 4 on node 20;
 * reporter 2 (rank 1) names 1 (rank 0) from last_gen 3. */
typedef struct drow_s {
    const char *what;
    int change; // which field of the base to change (0: none)
    uint64_t reporter, subject;
    uint32_t last_gen;
    int acted;        // 1: the subject is returned
    uint64_t machine; // a node the caller knows shares the reporter's machine (0: none)
} drow_t;

enum { D_NONE, D_SUBJ_EXITED, D_SUBJ_DONE, D_SUBJ_OLD, D_REP_EXITED, D_LATER_ROUND, D_SUBJ_NODE };

static const drow_t dead_rows[] = {
    {"same node, left neighbour, same round: ended at once", D_NONE, 2, 1, 3, 1, 0},
    {"same node, right neighbour: ended at once", D_NONE, 1, 2, 3, 1, 0},
    {"a neighbour on another node: the watch cannot see it, nothing", D_NONE, 2, 3, 3, 0, 0},
    {"a neighbour on another node of the same machine: ended at once", D_NONE, 2, 3, 3, 1, 20},
    {"another node, a third node shares the machine: nothing", D_NONE, 2, 3, 3, 0, 30},
    {"same node but not a ring neighbour: nothing", D_SUBJ_NODE, 2, 4, 3, 0, 0},
    {"the reporter's round is not the last closed one: nothing", D_NONE, 2, 1, 2, 0, 0},
    {"a later round closed already: the report is history", D_LATER_ROUND, 2, 1, 3, 0, 0},
    {"the subject's exit was reported already: nothing more to do", D_SUBJ_EXITED, 2, 1, 3, 0, 0},
    {"the subject reported Done: its end is no failure to hurry", D_SUBJ_DONE, 2, 1, 3, 0, 0},
    {"the subject was not a member of that round: nothing", D_SUBJ_OLD, 2, 1, 3, 0, 0},
    {"the reporter itself ended: nothing", D_REP_EXITED, 2, 1, 3, 0, 0},
    {"a worker that is not of this job: nothing", D_NONE, 2, 99, 3, 0, 0},
    {"the reporter names itself: nothing", D_NONE, 2, 2, 3, 0, 0},
    {"round 0 (a first join): nothing", D_NONE, 2, 1, 0, 0, 0},
};

static void case_dead_table(void) {
    for (size_t r = 0; r < sizeof(dead_rows) / sizeof(dead_rows[0]); r++) {
        const drow_t *d = &dead_rows[r];
        hv_jm_worker_t w[4];
        for (int i = 0; i < 4; i++) {
            w[i] = (hv_jm_worker_t){.id = (uint64_t)i + 1,
                                    .node_id = i < 2 ? 10 : 20,
                                    .state = HV_WK_RUNNING,
                                    .member_gen = 3,
                                    .rank = (uint32_t)i};
        }
        switch (d->change) {
        case D_SUBJ_EXITED:
            w[0].state = HV_WK_EXITED;
            break;
        case D_SUBJ_DONE:
            w[0].done = 1;
            break;
        case D_SUBJ_OLD:
            w[0].member_gen = 2;
            break;
        case D_REP_EXITED:
            w[1].state = HV_WK_LOST;
            break;
        case D_LATER_ROUND:
            w[2].member_gen = 4;
            break;
        case D_SUBJ_NODE:
            w[3].node_id = 10;
            break; // 4 (rank 3) on 2's node, not its neighbour
        }
        hv_jm_worker_t *ws[4] = {&w[0], &w[1], &w[2], &w[3]};
        hv_jm_job_t j;
        memset(&j, 0, sizeof(j));
        j.w = ws;
        j.nw = 4;
        const hv_jm_worker_t *rep = &w[d->reporter - 1];
        hv_jm_worker_t *got =
            hv_ringev_dead(&j, rep, d->last_gen, d->subject, &d->machine, d->machine != 0);
        uint64_t want = d->acted ? d->subject : 0;
        if ((got != NULL ? got->id : 0) != want) {
            fprintf(stderr, "row '%s': got worker %llu, want %llu\n", d->what,
                    (unsigned long long)(got != NULL ? got->id : 0), (unsigned long long)want);
        }
        CHECK_EQ(got != NULL ? got->id : 0, want);
    }
    hv_jm_worker_t w = {.id = 1, .node_id = 10, .state = HV_WK_RUNNING, .member_gen = 3};
    hv_jm_worker_t *ws[1] = {&w};
    hv_jm_job_t j;
    memset(&j, 0, sizeof(j));
    j.w = ws;
    j.nw = 1;
    CHECK(hv_ringev_dead(&j, NULL, 3, 1, NULL, 0) == NULL); // no reporter
}

HV_CHECK_MAIN(NULL, NULL, {"table", case_table}, {"silent_table", case_silent_table},
              {"silent_notes", case_silent_notes}, {"verdict_names", case_verdict_names},
              {"rounds", case_rounds}, {"judge_job", case_judge_job},
              {"dead_table", case_dead_table})
