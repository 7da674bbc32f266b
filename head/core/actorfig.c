/* actorfig: see actorfig.h. */
#include "actorfig.h"

#include <string.h>

/* Moves cur into base (the process's figures are final). */
static void actorfig_fold(hv_actorfig_t *a) {
    hv_callfig_add(&a->base, &a->cur);
    memset(&a->cur, 0, sizeof(a->cur));
}

hv_err hv_actorfig_report(hv_actorfig_t *a, uint64_t proc, const hv_callfig_t *r, int final,
                          hv_actorfig_how_t *how) {
    if (hv_callfig_check(r) != HV_OK) {
        return HV_EINVAL;
    }
    if (proc < a->proc || (proc == a->proc && a->ended)) {
        return HV_ESTATE;
    }
    hv_actorfig_how_t h;
    if (proc != a->proc) {
        /* A newer process: whatever its predecessor reported last is all it will ever count
         * (it ended without a final report: killed, or its node lost). */
        actorfig_fold(a);
        a->proc = proc;
        a->cur = *r;
        h = HV_ACTORFIG_NEXT;
    } else if (hv_callfig_ge(r, &a->cur)) {
        h = memcmp(r, &a->cur, sizeof(*r)) == 0 && !final ? HV_ACTORFIG_SAME : HV_ACTORFIG_ON;
        a->cur = *r;
    } else {
        /* Some counter went back: the process counts from 0 again. Keep what it had. */
        actorfig_fold(a);
        a->cur = *r;
        h = HV_ACTORFIG_RESTARTED;
    }
    if (final) {
        actorfig_fold(a);
        a->ended = 1;
    } else {
        a->ended = 0;
    }
    if (how != NULL) {
        *how = h;
    }
    return HV_OK;
}

void hv_actorfig_total(const hv_actorfig_t *a, hv_callfig_t *out) {
    *out = a->base;
    hv_callfig_add(out, &a->cur);
}
