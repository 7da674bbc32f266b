/*
 * jobsize: the one rule for the fewest workers a job starts (and runs) with, used by the head's
 * scheduler, its job machine, the submit check, the CLIs' views and the simulators alike: an
 * elastic job's --min-np when set (and not above -np), otherwise -np. Header-only.
 */
#ifndef HV_COMMON_JOBSIZE_H
#define HV_COMMON_JOBSIZE_H

#include <stdint.h>

/* The fewest workers a job with these sizes starts with. */
static inline uint32_t hv_np_least(int elastic, uint32_t np, uint32_t min_np) {
    return elastic && min_np != 0 && min_np <= np ? min_np : np;
}

#endif
