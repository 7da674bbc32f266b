/* jobfig: see jobfig.h. */
#include "jobfig.h"

#include <stdio.h>

hv_err hv_jobfig_check(const hv_jobfig_t *d, char *err, size_t errlen) {
    const struct {
        const char *name;
        uint64_t v, max;
    } f[] = {
        {"allreduce_bytes", d->allreduce_bytes, HV_JOBFIG_MAX_BYTES},
        {"allreduce_us", d->allreduce_us, HV_JOBFIG_MAX_US},
        {"allreduces", d->allreduces, HV_JOBFIG_MAX_COUNT},
        {"commits", d->commits, HV_JOBFIG_MAX_COUNT},
        {"commit_us", d->commit_us, HV_JOBFIG_MAX_US},
        {"steps", d->steps, HV_JOBFIG_MAX_COUNT},
        {"step_us", d->step_us, HV_JOBFIG_MAX_US},
        {"step_size", d->step_size, HV_JOBFIG_MAX_SIZE},
    };
    int any = 0;
    for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
        if (f[i].v > f[i].max) {
            snprintf(err, errlen, "report field %s is %llu, more than one report may carry (%llu)",
                     f[i].name, (unsigned long long)f[i].v, (unsigned long long)f[i].max);
            return HV_EINVAL;
        }
        any |= f[i].v != 0;
    }
    if ((d->steps != 0) != (d->step_size != 0)) {
        snprintf(err, errlen,
                 "report field step_size is %u with %llu steps: a size comes with steps",
                 d->step_size, (unsigned long long)d->steps);
        return HV_EINVAL;
    }
    if (!any) {
        snprintf(err, errlen, "an empty report (every figure is 0)");
        return HV_EINVAL;
    }
    return HV_OK;
}

static void add_sat(uint64_t *t, uint64_t v) { *t = *t > UINT64_MAX - v ? UINT64_MAX : *t + v; }

void hv_jobfig_add(hv_jobfig_t *total, const hv_jobfig_t *d) {
    add_sat(&total->allreduce_bytes, d->allreduce_bytes);
    add_sat(&total->allreduce_us, d->allreduce_us);
    add_sat(&total->allreduces, d->allreduces);
    add_sat(&total->commits, d->commits);
    add_sat(&total->commit_us, d->commit_us);
    add_sat(&total->steps, d->steps);
    add_sat(&total->step_us, d->step_us);
    if (d->step_size != 0) {
        total->step_size = d->step_size;
    }
    add_sat(&total->reports, 1);
}
