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
 * only rank 0 asks). The schedule's parser and lookup are common/growsched.c (hvsubmit checks --grow with it).
 */
#ifndef HV_WORKER_GROW_H
#define HV_WORKER_GROW_H

#include <stddef.h>
#include <stdint.h>

#include "growsched.h"

/* A new epoch began (every rank calls it; rank 0 asks the head when the schedule or the
 * callback wants another size). Never fails the caller: a refused request is logged. */
void hv__grow_epoch(uint64_t epoch);

#endif
