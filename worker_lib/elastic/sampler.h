/*
 * sampler: the elastic sampler behind hv_sampler_* (include/hv/elastic.h). Per epoch, a
 * permutation of the sample indices from (seed, epoch) (xoshiro256** seeded by splitmix64,
 * Fisher-Yates); a bitmap of processed samples that is part of the elastic state (committed,
 * restored and synced with it, registered through elastic_int.h); at every commit the windows
 * handed out since the last commit are marked: at the first commit of a partition by exchanging
 * the indices each rank handed out (allgather with per-rank counts) and checking them against
 * this rank's own windows, at later ones locally (every rank derives the same windows).
 * Whenever the state may have moved under it (restore, sync, a new world) the sampler
 * re-partitions: the samples not yet processed, in permutation order, are cut into windows of
 * the global batch G and rank r takes the r-th share of each window. Every rank computes the
 * same partition from the same bitmap, so all agree on the end of the epoch without talking.
 * Programs call it through the public API; the state it belongs to commits, rewinds and frees
 * it through the participant ops it registers (elastic_int.h hv__state_part_ops_t: commit is
 * collective at a partition's first commit, one allgather, two when a rank's guess of the total
 * was short, and local after it; rewind forgets what was handed out since the last commit and
 * re-partitions at the next hv_sampler_next). The pure arithmetic is exposed for sampler_test.
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
