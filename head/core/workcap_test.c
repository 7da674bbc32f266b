/*
 * workcap_test: what a job's worker credential may still do, table by table: alive while its
 * job runs, dead once it ended (every end state) or once the head no longer knows it.
 * `workcap_test <case>` runs one case.
 */
#include "workcap.h"
#include "hv_check.h"

#include <string.h>

static void case_live(void) {
    static const struct {
        int known;
        hv_job_state_t state;
        hv_err rc;
        const char *why;
    } rows[] = {
        {1, HV_JOB_PENDING, HV_OK, ""},
        {1, HV_JOB_PLACING, HV_OK, ""},
        {1, HV_JOB_RUNNING, HV_OK, ""},
        {1, HV_JOB_SUCCEEDED, HV_EAUTH, "job 7 has ended (succeeded)"},
        {1, HV_JOB_FAILED, HV_EAUTH, "job 7 has ended (failed)"},
        {1, HV_JOB_CANCELLED, HV_EAUTH, "job 7 has ended (cancelled)"},
        {0, HV_JOB_RUNNING, HV_EAUTH, "the head no longer knows job 7"},
        {0, HV_JOB_PENDING, HV_EAUTH, "the head no longer knows job 7"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_wcap_job_t j = {.known = rows[i].known, .state = rows[i].state};
        char why[300] = "";
        hv_err rc = hv_wcap_live(7, &j, why, sizeof(why));
        CHECK_RC_MSG(rc, rows[i].rc, why);
        CHECK_HAS(why, rows[i].why);
        if (rc != HV_OK) {
            CHECK_HAS(why, "the credential of job 7's workers is no longer valid");
        }
    }
    char why[300] = "";
    CHECK_RC(hv_wcap_live(3, NULL, why, sizeof(why)), HV_EAUTH);
    CHECK_HAS(why, "no longer knows job 3");
}

int main(int argc, char **argv) {
    static const hv_check_case_t cases[] = {
        {"live", case_live},
    };
    return hv_check_main(cases, sizeof(cases) / sizeof(cases[0]), argc, argv, NULL, NULL);
}
