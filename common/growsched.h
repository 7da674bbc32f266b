/*
 * growsched: a job's growth schedule, "EPOCH:SIZE[,EPOCH:SIZE...]" (hvsubmit --grow 0:2,30:4,60:8:
 * 2 workers from epoch 0, 4 from epoch 30, 8 from epoch 60). hvsubmit checks it and derives the
 * job's first size from it; libhv (worker_lib/elastic/grow.c) reads it from HV_GROW_SCHEDULE and asks
 * the head for each new size at the epoch boundary. Pure: no I/O, no allocation.
 */
#ifndef HV_COMMON_GROWSCHED_H
#define HV_COMMON_GROWSCHED_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define HV_GROW_MAX_STEPS 64
#define HV_GROW_MAX_SIZE 1000000u

typedef struct hv_grow_step_s {
    uint64_t epoch;
    uint32_t size;
} hv_grow_step_t;

/* Parses "EPOCH:SIZE[,EPOCH:SIZE...]" (epochs strictly increasing, sizes 1..HV_GROW_MAX_SIZE)
 * into out (cap entries); *n gets the count. HV_EINVAL with what is wrong in err ("step 2
 * '30x4': ..."). */
hv_err hv_grow_parse(const char *text, hv_grow_step_t *out, size_t cap, size_t *n, char *err,
                     size_t errlen);

/* The size of the last step at or before epoch; 0 when the first step comes later. */
uint32_t hv_grow_size_at(const hv_grow_step_t *steps, size_t n, uint64_t epoch);

#endif
