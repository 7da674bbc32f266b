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
