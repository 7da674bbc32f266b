/*
 * cluster: see cluster.h.
 */
#include "cluster.h"

uint64_t hv_cl_drain_hold_until(uint32_t notice_ms, int can_buy, uint64_t now_ms) {
    uint32_t margin =
        notice_ms / 10 > HV_CL_DRAIN_MARGIN_MIN_MS ? notice_ms / 10 : HV_CL_DRAIN_MARGIN_MIN_MS;
    if (!can_buy || notice_ms <= margin + HV_CL_DRAIN_HOLD_MIN_MS) {
        return 0;
    }
    return now_ms + notice_ms - margin;
}

uint32_t hv_cl_start(hv_cl_pass_t *p, uint32_t np, uint32_t free) {
    if (p->blocked) {
        return 0;
    }
    if (free < np) {
        p->blocked = 1;
        return 0;
    }
    return np;
}

void hv_cl_start_failed(hv_cl_pass_t *p) { p->blocked = 1; }

uint32_t hv_cl_grow(const hv_cl_pass_t *p, uint32_t wants, uint32_t free) {
    if (p->blocked) {
        return 0;
    }
    return wants < free ? wants : free;
}

size_t hv_cl_demand(const hv_cl_job_t *jobs, size_t n, uint32_t pool, hv_cl_demand_t *out,
                    size_t cap) {
    size_t k = 0;
    for (size_t i = 0; i < n && k < cap; i++) {
        const hv_cl_job_t *j = &jobs[i];
        uint32_t want = j->wants;
        if (j->pending) {
            want = j->elastic && j->target > j->np ? j->target : j->np;
        }
        if (want == 0) {
            continue;
        }
        uint32_t take = pool < want ? pool : want;
        pool -= take;
        if (want > take) {
            out[k].job_id = j->id;
            out[k].workers = want - take;
            out[k].pending = j->pending;
            k++;
        }
    }
    return k;
}
