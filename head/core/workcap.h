/*
 * workcap: what a job's worker credential (hvw_<job>_<worker>_<mac>, services/auth.h) may still
 * do, as pure decisions (no I/O, no clock, no allocation; table-tested in workcap_test.c):
 *
 *   - whether it is alive: only while its job has not ended. Once the job succeeded, failed or
 *     was cancelled, or once the head no longer knows it (history retention pruned it), the
 *     credential is useless on every service; nothing is ever assumed of a job the head does
 *     not know (no namespace "default" for it).
 *
 * A client token is not held by these rules: it may do everything (docs/security.md).
 */
#ifndef HV_HEAD_WORKCAP_H
#define HV_HEAD_WORKCAP_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "jobm.h"

/* A worker credential's job as the head knows it (in memory, or from its store). */
typedef struct hv_wcap_job_s {
    int known;            /* 0: the head does not know the job (pruned, or never stored) */
    hv_job_state_t state; /* when known */
} hv_wcap_job_t;

/* Whether the credential of job_id's workers may still be used: HV_OK while its job is known and
 * has not ended; else HV_EAUTH with why (whylen bytes): the job ended (its state), or the head
 * no longer knows it. */
hv_err hv_wcap_live(uint64_t job_id, const hv_wcap_job_t *j, char *why, size_t whylen);

#endif
