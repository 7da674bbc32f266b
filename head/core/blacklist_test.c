/*
 * blacklist_test: the strike and cooldown rule, table by table: the first cooldown, doubling,
 * the cap, jitter bounds, the permanent bar after max strikes, an off policy, and when a node is
 * eligible again, and which agent of a node a record holds for. `blacklist_test <case>` runs one
 * case.
 */
#include "blacklist.h"
#include "hv_check.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const hv_bl_policy_t P = {.cooldown_min_s = 10, .cooldown_max_s = 100, .max_strikes = 5};

/* Strike after strike with no jitter: 10, 20, 40, 80 s, then permanent at the fifth. */
static void case_doubling(void) {
    static const struct {
        uint32_t strikes;
        uint64_t cooldown_ms;
        int permanent;
    } want[] = {{1, 10000, 0}, {2, 20000, 0}, {3, 40000, 0}, {4, 80000, 0}, {5, 0, 1}};
    hv_bl_entry_t e = {0};
    uint64_t now = 1000000;
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        uint64_t cd = hv_bl_strike(&e, &P, now, 0);
        CHECK_EQ(e.strikes, want[i].strikes);
        CHECK_EQ(cd, want[i].cooldown_ms);
        CHECK_EQ(e.permanent, want[i].permanent);
        if (!want[i].permanent) {
            CHECK_EQ(e.until_ms, now + want[i].cooldown_ms);
        }
        now += 500000;
    }
}

static void case_cap(void) {
    hv_bl_policy_t p = {.cooldown_min_s = 30, .cooldown_max_s = 100, .max_strikes = 0};
    hv_bl_entry_t e = {0};
    uint64_t cds[6];
    for (int i = 0; i < 6; i++) {
        cds[i] = hv_bl_strike(&e, &p, 0, UINT32_MAX); /* full jitter */
    }
    CHECK_EQ(cds[0], 30000 + 7500); /* 30 s + a quarter */
    CHECK_EQ(cds[1], 60000 + 15000);
    CHECK_EQ(cds[2], 100000); /* 120 s capped at 100 */
    CHECK_EQ(cds[5], 100000);
    CHECK_EQ(e.permanent, 0); /* max_strikes 0: never permanent */
    CHECK_EQ(e.strikes, 6);
}

/* Jitter stays within [d, 1.25 d] and differs with the random number. */
static void case_jitter(void) {
    uint32_t rands[] = {0, 1u << 30, 1u << 31, 3u << 30, UINT32_MAX};
    uint64_t prev = 0;
    for (size_t i = 0; i < sizeof(rands) / sizeof(rands[0]); i++) {
        hv_bl_entry_t e = {0};
        uint64_t cd = hv_bl_strike(&e, &P, 0, rands[i]);
        CHECK(cd >= 10000 && cd <= 12500);
        CHECK(i == 0 || cd > prev);
        prev = cd;
    }
}

static void case_blocked(void) {
    hv_bl_entry_t e = {0};
    CHECK_EQ(hv_bl_blocked(&e, 0), 0);
    CHECK_EQ(hv_bl_left_ms(&e, 0), 0);
    hv_bl_strike(&e, &P, 5000, 0); /* until 15000 */
    CHECK_EQ(hv_bl_blocked(&e, 5000), 1);
    CHECK_EQ(hv_bl_blocked(&e, 14999), 1);
    CHECK_EQ(hv_bl_left_ms(&e, 14000), 1000);
    CHECK_EQ(hv_bl_blocked(&e, 15000), 0); /* the cooldown ended: eligible again */
    CHECK_EQ(hv_bl_left_ms(&e, 20000), 0);
    hv_bl_entry_t perm = {.strikes = 5, .permanent = 1};
    CHECK_EQ(hv_bl_blocked(&perm, UINT64_MAX - 1), 1);
    CHECK(hv_bl_left_ms(&perm, 0) == UINT64_MAX);
}

static void case_off(void) {
    hv_bl_policy_t off = {.cooldown_min_s = 0, .cooldown_max_s = 0, .max_strikes = 3};
    hv_bl_entry_t e = {0};
    CHECK_EQ(hv_bl_on(&off), 0);
    for (int i = 0; i < 5; i++) {
        CHECK_EQ(hv_bl_strike(&e, &off, 1000, 7), 0);
    }
    CHECK_EQ(e.strikes, 0);
    CHECK_EQ(hv_bl_blocked(&e, 1000), 0);
}

/* max_strikes 1: the first failure bars the node for good (Horovod's default behaviour). */
static void case_first_strike_permanent(void) {
    hv_bl_policy_t p = {.cooldown_min_s = 10, .cooldown_max_s = 10, .max_strikes = 1};
    hv_bl_entry_t e = {0};
    CHECK_EQ(hv_bl_strike(&e, &p, 0, 0), 0);
    CHECK_EQ(e.permanent, 1);
    CHECK_EQ(hv_bl_blocked(&e, 1u << 30), 1);
}

/* Which agent a record holds for, row by row: the same agent (incarnation 7) or a new one (8). */
static void case_agent(void) {
    static const struct {
        const char *name;
        hv_bl_entry_t e;
        uint64_t struck_inc, node_inc, now;
        int bars, ended, lifted;
        uint32_t builds_on; /* strikes of the record a new strike builds on */
    } rows[] = {
        {"clean", {0}, 7, 7, 100, 0, 0, 0, 0},
        {"cooling down", {1, 200, 0}, 7, 7, 100, 1, 0, 0, 1},
        {"cooldown ended, not told", {1, 200, 0}, 7, 7, 200, 0, 1, 1, 1},
        {"cooldown ended, told", {2, 0, 0}, 7, 7, 300, 0, 0, 1, 2},
        {"barred for good", {3, 0, 1}, 7, 7, 300, 1, 0, 0, 3},
        {"new agent while cooling down", {1, 200, 0}, 7, 8, 100, 0, 0, 0, 0},
        {"new agent, barred for good", {3, 0, 1}, 7, 8, 100, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        int bars = hv_bl_bars(&rows[i].e, rows[i].struck_inc, rows[i].node_inc, rows[i].now);
        int ended = hv_bl_cooldown_ended(&rows[i].e, rows[i].now);
        int lifted = hv_bl_lifted(&rows[i].e, rows[i].struck_inc, rows[i].node_inc, rows[i].now);
        hv_bl_entry_t b = hv_bl_of_agent(&rows[i].e, rows[i].struck_inc, rows[i].node_inc);
        if (bars != rows[i].bars || ended != rows[i].ended || lifted != rows[i].lifted ||
            b.strikes != rows[i].builds_on) {
            fprintf(stderr, "%s: bars %d/%d ended %d/%d lifted %d/%d builds on %u/%u (got/want)\n",
                    rows[i].name, bars, rows[i].bars, ended, rows[i].ended, lifted, rows[i].lifted,
                    b.strikes, rows[i].builds_on);
            hv_check_failures++;
        }
    }
}

/* A strike's event words, row by row: barred for good or for the cooldown, a node with no name. */
static void case_strike_words(void) {
    static const struct {
        const char *name;
        hv_bl_entry_t e;
        uint64_t cd;
        const char *node;
        const char *text, *data;
    } rows[] = {
        {"cooldown",
         {1, 5000, 0},
         2500,
         "n1",
         "node n1 is barred from job 7 for 2.5 s after failure 1 (rank 0 exited 1)",
         "{\"job\":7,\"node_id\":3,\"strikes\":1,\"permanent\":false,\"cooldown_ms\":2500}"},
        {"for good",
         {3, 0, 1},
         0,
         "n1",
         "node n1 is barred from job 7 for good after 3 failures (rank 0 exited 1)",
         "{\"job\":7,\"node_id\":3,\"strikes\":3,\"permanent\":true,\"cooldown_ms\":0}"},
        {"no name",
         {2, 9000, 0},
         10000,
         NULL,
         "node ? is barred from job 7 for 10.0 s after failure 2 (rank 0 exited 1)",
         "{\"job\":7,\"node_id\":3,\"strikes\":2,\"permanent\":false,\"cooldown_ms\":10000}"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        char text[300], data[200];
        hv_bl_strike_words(&rows[i].e, rows[i].cd, 7, 3, rows[i].node, "rank 0 exited 1", text,
                           sizeof(text), data, sizeof(data));
        if (strcmp(text, rows[i].text) != 0 || strcmp(data, rows[i].data) != 0) {
            fprintf(stderr, "%s: got \"%s\" %s\n", rows[i].name, text, data);
            hv_check_failures++;
        }
    }
}

HV_CHECK_MAIN(NULL, NULL, {"doubling", case_doubling}, {"cap", case_cap}, {"jitter", case_jitter},
              {"blocked", case_blocked}, {"off", case_off},
              {"first_strike_permanent", case_first_strike_permanent}, {"agent", case_agent},
              {"strike_words", case_strike_words})
