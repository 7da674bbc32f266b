/*
 * jobfig_test: a job's totals of its workers' figures, table by table: reports from several
 * workers (and the same worker again) add up; a report out of bounds or empty is refused with
 * the field named and leaves the totals alone; totals saturate instead of wrapping.
 * `jobfig_test <case>` runs one case.
 */
#include "jobfig.h"
#include "hv_check.h"

#include <string.h>

/* Three reports of two workers (worker 1 twice, as every 10 s): the job's totals are the sums. */
static void case_sum(void) {
    static const hv_jobfig_t reports[] = {
        {.allreduce_bytes = 940584,
         .allreduce_us = 1200,
         .allreduces = 3,
         .commits = 1,
         .commit_us = 40},
        {.allreduce_bytes = 940584 * 2,
         .allreduce_us = 2500,
         .allreduces = 6,
         .commits = 2,
         .commit_us = 70},
        {.allreduce_bytes = 8, .allreduce_us = 5, .allreduces = 1},
    };
    hv_jobfig_t t = {0};
    char err[200];
    for (size_t i = 0; i < sizeof(reports) / sizeof(reports[0]); i++) {
        CHECK_EQ(hv_jobfig_check(&reports[i], err, sizeof(err)), HV_OK);
        hv_jobfig_add(&t, &reports[i]);
    }
    CHECK_EQ(t.allreduce_bytes, 940584 * 3 + 8);
    CHECK_EQ(t.allreduce_us, 3705);
    CHECK_EQ(t.allreduces, 10);
    CHECK_EQ(t.commits, 3);
    CHECK_EQ(t.commit_us, 110);
    CHECK_EQ(t.reports, 3);
}

/* What is refused, and the field the error names. */
static void case_check(void) {
    static const struct {
        hv_jobfig_t d;
        hv_err want;
        const char *names;
    } rows[] = {
        {{.commits = 1}, HV_OK, NULL},
        {{.allreduce_bytes = HV_JOBFIG_MAX_BYTES}, HV_OK, NULL},
        {{0}, HV_EINVAL, "empty"},
        {{.reports = 5}, HV_EINVAL, "empty"}, /* reports is the head's, not the worker's */
        {{.allreduce_bytes = HV_JOBFIG_MAX_BYTES + 1}, HV_EINVAL, "allreduce_bytes"},
        {{.allreduces = 1, .allreduce_us = HV_JOBFIG_MAX_US + 1}, HV_EINVAL, "allreduce_us"},
        {{.allreduces = HV_JOBFIG_MAX_COUNT + 1}, HV_EINVAL, "allreduces"},
        {{.commits = UINT64_MAX}, HV_EINVAL, "commits"},
        {{.commits = 1, .commit_us = UINT64_MAX}, HV_EINVAL, "commit_us"},
        {{.steps = 10, .step_us = 5000, .step_size = 4}, HV_OK, NULL},
        {{.steps = 10, .step_us = 5000}, HV_EINVAL, "step_size"}, /* steps at no size */
        {{.commits = 1, .step_size = 4}, HV_EINVAL, "step_size"}, /* a size with no steps */
        {{.steps = 1, .step_size = HV_JOBFIG_MAX_SIZE + 1}, HV_EINVAL, "step_size"},
        {{.steps = 1, .step_size = 2, .step_us = HV_JOBFIG_MAX_US + 1}, HV_EINVAL, "step_us"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        char err[200] = "";
        CHECK_EQ(hv_jobfig_check(&rows[i].d, err, sizeof(err)), rows[i].want);
        if (rows[i].names != NULL) {
            CHECK(strstr(err, rows[i].names) != NULL);
        }
    }
}

/* A total near the top stays at UINT64_MAX instead of wrapping to a small number (which
 * Prometheus would read as a counter reset). */
static void case_saturate(void) {
    hv_jobfig_t t = {.allreduce_bytes = UINT64_MAX - 10, .commits = 5};
    hv_jobfig_t d = {.allreduce_bytes = 100, .commits = 2};
    hv_jobfig_add(&t, &d);
    CHECK_EQ(t.allreduce_bytes, UINT64_MAX);
    CHECK_EQ(t.commits, 7);
    hv_jobfig_add(&t, &d);
    CHECK_EQ(t.allreduce_bytes, UINT64_MAX);
    CHECK_EQ(t.reports, 2);
}

HV_CHECK_MAIN(NULL, NULL, {"sum", case_sum}, {"check", case_check}, {"saturate", case_saturate})
