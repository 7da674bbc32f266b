/*
 * cluster_test: the head's decisions across jobs and nodes, one table per decision (inputs ->
 * outputs, one row per case). `cluster_test <case>` runs one case.
 */
#include "cluster.h"
#include "hv_check.h"

#include <stdint.h>

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* The drain hold: members stay until the margin before the node goes, only when replacements
 * can come and the notice leaves time. */
static void case_drain_hold(void) {
    static const struct {
        const char *name;
        uint32_t notice_ms;
        int can_buy;
        uint64_t now, want;
    } rows[] = {
        {"no notice", 0, 1, 1000, 0},
        {"no autoscaler", 30000, 0, 1000, 0},
        {"30 s notice: a 3 s margin", 30000, 1, 1000, 1000 + 27000},
        {"120 s notice: a 12 s margin", 120000, 1, 0, 108000},
        {"5 s notice: the 2 s least margin", 5000, 1, 100, 100 + 3000},
        {"3.001 s: just above margin + hold", 3001, 1, 0, 1001},
        {"3 s: margin + hold, no more: at once", 3000, 1, 0, 0},
        {"2 s: shorter than the margin", 2000, 1, 0, 0},
    };
    for (size_t i = 0; i < N(rows); i++) {
        uint64_t got = hv_cl_drain_hold_until(rows[i].notice_ms, rows[i].can_buy, rows[i].now);
        if (got != rows[i].want) {
            fprintf(stderr, "%s: got %llu want %llu\n", rows[i].name, (unsigned long long)got,
                    (unsigned long long)rows[i].want);
            hv_check_failures++;
        }
    }
}

int main(int argc, char **argv) {
    static const hv_check_case_t cases[] = {
        {"drain_hold", case_drain_hold},
    };
    return hv_check_main(cases, N(cases), argc, argv, NULL, NULL);
}
