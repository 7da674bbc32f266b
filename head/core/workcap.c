/* workcap: see workcap.h. */
#include "workcap.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

hv_err hv_wcap_live(uint64_t job_id, const hv_wcap_job_t *j, char *why, size_t whylen) {
    if (j == NULL || !j->known) {
        snprintf(why, whylen,
                 "the credential of job %" PRIu64 "'s workers is no longer valid: the head no "
                 "longer knows job %" PRIu64 " (it ended and left the history)",
                 job_id, job_id);
        return HV_EAUTH;
    }
    if (hv_job_state_terminal(j->state)) {
        snprintf(why, whylen,
                 "the credential of job %" PRIu64 "'s workers is no longer valid: job %" PRIu64
                 " has ended (%s)",
                 job_id, job_id, hv_job_state_name(j->state));
        return HV_EAUTH;
    }
    return HV_OK;
}
