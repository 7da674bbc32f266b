/*
 * events: names of the reason codes and their class for the metrics (see events.h). Pure.
 */
#include "events.h"

const char *hv_ev_reason_name(hv_ev_reason_t r) {
    static const char *const names[HV_EV__COUNT] = {
        "",           "start",         "failure",        "data_plane",
        "drain",      "grow",          "shrink",         "resume",
        "succeeded",  "cancelled",     "worker_failed",  "no_survivor",
        "max_resets", "round_timeout", "pending_timeout"};
    return (unsigned)r < HV_EV__COUNT ? names[r] : "";
}

hv_ev_reason_t hv_ev_reset_class(hv_ev_reason_t r, int rollback) {
    if (rollback || r == HV_EV_FAILURE || r == HV_EV_DATA_PLANE || r == HV_EV_RESUME) {
        return HV_EV_FAILURE;
    }
    if (r == HV_EV_DRAIN || r == HV_EV_GROW || r == HV_EV_SHRINK) {
        return r;
    }
    return HV_EV_NONE;
}
