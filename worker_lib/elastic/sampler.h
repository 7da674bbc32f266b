/*
 * sampler: the elastic sampler behind hv_sampler_* (include/hv/elastic.h). Per epoch, a
 * permutation of the sample indices from (seed, epoch) (xoshiro256** seeded by splitmix64,
 * Fisher-Yates); a bitmap of processed samples that is part of the elastic state (committed,
 * restored and synced with it, registered through elastic_int.h); at every commit the indices
 * each rank handed out since the last commit are exchanged (allgather with per-rank counts) and
 * marked. Whenever the state may have moved under it (restore, sync, a new world) the sampler
 * re-partitions: the samples not yet processed, in permutation order, are cut into windows of
 * the global batch G and rank r takes the r-th share of each window. Every rank computes the
 * same partition from the same bitmap, so all agree on the end of the epoch without talking.
 * Called by elastic.c (commit, rewind, free) and by programs through the public API; the pure
 * arithmetic is exposed for sampler_test.
 *
 * Threading: the training function's thread (as the state).
 */
#ifndef HV_WORKER_LIB_SAMPLER_H
#define HV_WORKER_LIB_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "err.h"

#include "hv/elastic.h"

/* Commit: exchanges what every rank handed out since the last commit and marks it processed.
 * Collective (one allgather, two when a rank's guess of the total was short). Errors: those of
 * the allgather, HV_ENOMEM, HV_EPROTO (an index out of range: ranks disagree). */
hv_err hv__sampler_commit(hv_sampler_t *s, hv__engine_t *e, int size);

/* The state was restored, synced or the world changed: forget what was handed out since the
 * last commit and re-partition at the next hv_sampler_next. Local. */
void hv__sampler_rewind(hv_sampler_t *s);

/* Samples handed out since the last commit, over all ranks (what a rewind sends back). */
uint64_t hv__sampler_pending_global(const hv_sampler_t *s);

/* Frees s (its registered buffers are libhv's own). NULL is a no-op. */
void hv__sampler_free(hv_sampler_t *s);

/* ---- the arithmetic (pure) ---- */

/* The global batch at world size: cfg->batch when cfg->global_batch, else batch x size. */
uint64_t hv__sampler_global(const hv_sampler_config_t *cfg, int size);

/* Rank's share of a window of len samples over size ranks: len / size each, the remainder one
 * each to the first ranks. *off is where the share starts inside the window. */
void hv__sampler_share(uint64_t len, int size, int rank, uint64_t *off, uint64_t *n);

/* Writes the order of epoch's samples into out (n entries): a permutation of 0..n-1 derived from
 * (seed, epoch) when shuffle, else 0..n-1. */
void hv__sampler_permutation(uint64_t seed, uint64_t epoch, int shuffle, uint64_t n, uint64_t *out);

#endif
