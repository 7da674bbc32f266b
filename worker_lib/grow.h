/*
 * grow: growth over epochs in libhv. A job grows its workers in three ways, each turned into a
 * Rendezvous.Resize call to the head (the head aims for the size within the job's min..max
 * and its autoscaler buys the nodes; the new workers join at the next membership check):
 *   - the program asks: hv_request_size (hv/elastic.h);
 *   - a callback registered with hv_set_size_callback returns the size for each new epoch;
 *   - a schedule from the job spec: `hvsubmit --grow 0:2,30:4,60:8` puts "0:2,30:4,60:8" in
 *     the workers' environment as HV_GROW_SCHEDULE; at each new epoch the size of the last
 *     step at or before it is asked for, once per change.
 * The epoch boundary is hv_sampler_next_epoch (sampler.c calls hv__grow_epoch on every rank;
 * only rank 0 asks). The schedule's parser and lookup are pure and unit-tested (grow_test.c).
 */
#ifndef HV_WORKER_GROW_H
#define HV_WORKER_GROW_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define HV_GROW_MAX_STEPS 64

typedef struct hv__grow_step_s {
    uint64_t epoch;
    uint32_t size;
} hv__grow_step_t;

/* Parses "EPOCH:SIZE[,EPOCH:SIZE...]" (epochs strictly increasing, sizes >= 1) into out (cap
 * entries); *n gets the count. HV_EINVAL with what is wrong in err ("step 2 '30x4': ..."). */
hv_err hv__grow_parse(const char *text, hv__grow_step_t *out, size_t cap, size_t *n, char *err,
                      size_t errlen);

/* The size of the last step at or before epoch; 0 when the first step comes later. */
uint32_t hv__grow_size_at(const hv__grow_step_t *steps, size_t n, uint64_t epoch);

/* A new epoch began (every rank calls it; rank 0 asks the head when the schedule or the
 * callback wants another size). Never fails the caller: a refused request is logged. */
void hv__grow_epoch(uint64_t epoch);

#endif
