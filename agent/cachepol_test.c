/*
 * cachepol_test: the cache bound's eviction rule, table by table: nothing goes while the cache
 * fits or is unbounded; the least recently used go first, as many as it takes; a pinned entry
 * never goes, however old; a cache whose remainder is all pinned says it stays over; equal last
 * uses are ordered by key; size does not buy an old entry a place. `cachepol_test <case>` runs
 * one case.
 */
#include "cachepol.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "agent_test.h"

#define MAXE 6

/* One entry of a table row: key, size, last use, pinned. */
typedef struct row_entry_s {
    const char *key;
    uint64_t size;
    int64_t last_use;
    int pinned;
} row_entry_t;

typedef struct row_s {
    const char *name;
    row_entry_t in[MAXE]; /* ends at the first NULL key */
    uint64_t bound;
    const char *evict;    /* the keys deleted, in order, joined by ',' ("" = none) */
    uint64_t bytes_after; /* the total left */
    int over;             /* still over the bound (the rest is pinned) */
} row_t;

static const row_t rows[] = {
    {"unbounded", {{"a", 900, 1, 0}, {"b", 900, 2, 0}}, 0, "", 1800, 0},
    {"fits_exactly", {{"a", 100, 1, 0}, {"b", 150, 2, 0}}, 250, "", 250, 0},
    {"empty", {{NULL, 0, 0, 0}}, 10, "", 0, 0},
    {"oldest_one", {{"c", 100, 30, 0}, {"a", 100, 10, 0}, {"b", 100, 20, 0}}, 250, "a", 200, 0},
    {"oldest_two", {{"c", 100, 30, 0}, {"a", 100, 10, 0}, {"b", 100, 20, 0}}, 100, "a,b", 100, 0},
    {"down_to_zero", {{"a", 100, 10, 0}, {"b", 100, 20, 0}}, 1, "a,b", 0, 0},
    {"pinned_oldest_stays",
     {{"a", 100, 10, 1}, {"b", 100, 20, 0}, {"c", 100, 30, 0}},
     200,
     "b",
     200,
     0},
    {"pinned_then_newest",
     {{"a", 100, 10, 1}, {"b", 100, 20, 0}, {"c", 100, 30, 0}},
     100,
     "b,c",
     100,
     0},
    {"all_pinned", {{"a", 100, 10, 1}, {"b", 100, 20, 1}}, 50, "", 200, 1},
    {"rest_pinned", {{"a", 300, 10, 1}, {"b", 100, 20, 0}, {"c", 100, 5, 0}}, 250, "c,b", 300, 1},
    {"tie_by_key", {{"b", 100, 7, 0}, {"a", 100, 7, 0}, {"c", 100, 8, 0}}, 200, "a", 200, 0},
    {"size_buys_nothing", {{"big", 2000, 50, 0}, {"small", 10, 1, 0}}, 1000, "small,big", 0, 0},
    {"older_before_1970", {{"now", 10, 5, 0}, {"old", 10, -5, 0}}, 15, "old", 10, 0},
    {"zero_size_in_turn", {{"z", 0, 1, 0}, {"a", 100, 2, 0}, {"b", 100, 3, 0}}, 150, "z,a", 100, 0},
};

/* The row's plan, checked against what it wants. */
static void check_row(const row_t *r) {
    hv_cachepol_entry_t e[MAXE];
    size_t n = 0;
    while (n < MAXE && r->in[n].key != NULL) {
        e[n] = (hv_cachepol_entry_t){.key = r->in[n].key,
                                     .size = r->in[n].size,
                                     .last_use = r->in[n].last_use,
                                     .pinned = r->in[n].pinned,
                                     .ud = (void *)&r->in[n]};
        n++;
    }
    hv_cachepol_plan_t p = hv_cachepol_plan(e, n, r->bound);
    char got[128] = "";
    for (size_t i = 0; i < p.n_evict; i++) {
        size_t len = strlen(got);
        snprintf(got + len, sizeof(got) - len, "%s%s", i ? "," : "", e[i].key);
        const row_entry_t *src = e[i].ud;
        CHECK_STR(src->key, e[i].key); // ud travels with its entry
        CHECK_EQ(e[i].pinned, 0);
    }
    uint64_t before = 0;
    for (size_t i = 0; i < n; i++) {
        before += r->in[i].size;
    }
    if (strcmp(got, r->evict) != 0) {
        fprintf(stderr, "  %s: evicts \"%s\", want \"%s\"\n", r->name, got, r->evict);
        hv_check_failures++;
    }
    CHECK_EQ(p.bytes, before);
    CHECK_EQ(p.bytes_after, r->bytes_after);
    CHECK_EQ(p.over, r->over);
}

static void case_table(void) {
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        int before = hv_check_failures;
        check_row(&rows[i]);
        if (hv_check_failures != before) {
            fprintf(stderr, "  row %s failed\n", rows[i].name);
        }
    }
}

/* A total past 64 bits saturates instead of wrapping round to a small number that "fits". */
static void case_saturate(void) {
    hv_cachepol_entry_t e[2] = {{.key = "a", .size = UINT64_MAX - 5, .last_use = 1},
                                {.key = "b", .size = 100, .last_use = 2}};
    hv_cachepol_plan_t p = hv_cachepol_plan(e, 2, 1000);
    CHECK(p.bytes == UINT64_MAX);
    CHECK_EQ(p.n_evict, 1); // the oldest, the huge one, goes: what is left fits
    CHECK_STR(e[0].key, "a");
    CHECK_EQ(p.over, 0);
}

static const test_case_t cases[] = {
    {"table", case_table},
    {"saturate", case_saturate},
    {NULL, NULL},
};

int main(int argc, char **argv) { return test_run(cases, argc, argv); }
