/*
 * hv/elastic.h: elastic training with libhv. A job submitted with --min-np/--max-np keeps running
 * when workers fail, when nodes join and when nodes are drained (a cloud's preemption notice).
 * This header is the authoritative description of the elastic API; the model is Elastic
 * Horovod's (state, commit, restore, sync, a run function that retries), with the membership
 * pushed by the head to every worker under a generation number.
 *
 * The pieces:
 *   - A state object (hv_state_t) holds the buffers and scalars that make up the training state
 *     (model weights, optimizer moments, epoch, step). commit snapshots them in memory; restore
 *     goes back to the last snapshot; sync broadcasts them from rank 0 (the oldest surviving
 *     worker: the head orders ranks by seniority) after every new round, so a worker that joins
 *     receives the state at ring bandwidth.
 *   - hv_elastic_run wraps the user's training function in the retry loop:
 *       sync -> train; a peer's failure: restore, re-join, sync, train again;
 *       a membership change seen at a commit: re-join without restoring;
 *       the function returns HV_OK: report Done to the head and return.
 *   - Reset callbacks run after every new round (e.g. to rescale the learning rate).
 *   - A sampler (hv_sampler_t) partitions the sample indices of each epoch across ranks (seeded
 *     shuffle), marks what was processed at every commit (checked across ranks at the first
 *     commit after each partition, then derived locally), and after a reset re-partitions
 *     only the samples not yet processed in this epoch: within an epoch no sample is processed
 *     twice and none is skipped. It can keep the global batch constant across world sizes.
 *
 * Errors are returned, never raised: nothing in this path kills or exits the process. Unless
 * said otherwise, a function here may be called only from the thread that runs the training
 * function (the state is not thread-safe); hv_generation() is thread-safe.
 *
 * A typical program:
 *
 *     static hv_err train(hv_state_t *st, void *ud) {
 *         struct model *m = ud;
 *         for (; m->epoch < EPOCHS; m->epoch++) {
 *             uint64_t idx[256]; size_t n; int end;
 *             while (hv_sampler_next(m->sampler, idx, 256, &n, &end) == HV_OK && !end) {
 *                 compute_gradients(m, idx, n);                       // sums over n samples
 *                 hv_err rc = hv_allreduce(m->grad, m->grad, m->nparams, HV_FLOAT32, HV_SUM);
 *                 if (rc != HV_OK) return rc;                         // a peer failed: retried
 *                 apply(m, hv_sampler_step_samples(m->sampler));      // divide by the global batch
 *                 if ((rc = hv_state_commit(st)) != HV_OK) return rc; // HV_ERESET: re-join
 *             }
 *             hv_sampler_next_epoch(m->sampler);
 *         }
 *         return HV_OK;
 *     }
 *     ...
 *     hv_state_create(&st);
 *     hv_state_add_buffer(st, "weights", m.w, m.nparams * sizeof(float));
 *     hv_state_add_u64(st, "epoch", &m.epoch);
 *     hv_sampler_create(st, "train", &scfg, &m.sampler);
 *     rc = hv_elastic_run(st, train, &m);   // HV_OK also when this worker was drained
 *     hv_state_destroy(st);
 *     hv_shutdown();
 */
#ifndef HV_ELASTIC_H
#define HV_ELASTIC_H

#include <stddef.h>
#include <stdint.h>

#include "hv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- state ----------------------------------------------------------------------------------- */

typedef struct hv_state_s hv_state_t;

/* Creates an empty state. *out is owned by the caller (hv_state_destroy). Errors: HV_ENOMEM. */
HV_API hv_err hv_state_create(hv_state_t **out);

/* Frees the state, its snapshots and the samplers created on it. The registered buffers are the
 * caller's and are not touched. NULL is a no-op. */
HV_API void hv_state_destroy(hv_state_t *st);

/* Registers bytes of host memory at buf under name (copied, at most 255 bytes, unique in the
 * state). buf is borrowed and must stay valid for the life of the state. Every rank must
 * register the same names with the same sizes in the same order (sync checks it: HV_EPROTO).
 * Register before hv_elastic_run. Errors: HV_EINVAL (NULL, empty name, bytes == 0), HV_EEXIST
 * (name taken), HV_ESTATE (a run is in progress), HV_ENOMEM. */
HV_API hv_err hv_state_add_buffer(hv_state_t *st, const char *name, void *buf, size_t bytes);

/* Registers a scalar (epoch, step, ...) as an 8-byte buffer. Same rules as add_buffer. */
HV_API hv_err hv_state_add_u64(hv_state_t *st, const char *name, uint64_t *value);

/* Commits: snapshots every registered buffer in memory (the state restore returns to), lets the
 * samplers record what this step processed (a small collective), then, every check_every
 * commits (the job's --check-every, from the head), checks the membership with the other ranks
 * (a small allreduce; every rank sees the same answer at the same commit).
 * Returns HV_OK, or HV_ERESET when the membership changed (workers were added, or some are
 * leaving because their node is drained): return it from the training function and
 * hv_elastic_run re-joins without restoring. A data-plane error (HV_EPEER, HV_ETIMEDOUT,
 * HV_ECANCELED) means a peer failed: return it too. Collective: every rank must commit the same
 * number of times. Blocking. */
HV_API hv_err hv_state_commit(hv_state_t *st);

/* Copies the last snapshot back into the registered buffers (and rewinds the samplers). Before
 * the first commit the snapshot is the state as it was when hv_elastic_run started. Local, never
 * blocks. Errors: HV_ESTATE when there is no snapshot yet. */
HV_API hv_err hv_state_restore(hv_state_t *st);

/* Broadcasts every registered buffer from rank 0 to all ranks and snapshots the result.
 * hv_elastic_run calls it after every new round; call it directly only outside a run.
 * Collective, blocking. Errors: data-plane errors as for hv_broadcast; HV_EPROTO when ranks
 * registered different buffers. */
HV_API hv_err hv_state_sync(hv_state_t *st);

/* Checks the membership now (a collective, as at a commit). HV_OK or HV_ERESET. */
HV_API hv_err hv_state_check(hv_state_t *st);

/* What changed at a reset, passed to reset callbacks (read-only, valid during the call). */
typedef struct hv_reset_info_s {
    int old_size, new_size;  /* world sizes before and after */
    uint32_t old_generation; /* the round this worker was in before */
    uint32_t new_generation; /* the round it is in now */
    int rollback;            /* 1: a peer failed and the state was restored */
    const char *reason;      /* the head's reason for the round ("failure: ...", ...) */
} hv_reset_info_t;

/* Called on every rank after each new round has formed and the state was synced, before the
 * training function runs again (not before the first round). fn must not call collectives. */
typedef void (*hv_reset_fn)(hv_state_t *st, const hv_reset_info_t *info, void *ud);

/* Adds a reset callback (up to 16; called in the order added). Errors: HV_EINVAL, HV_ETOOBIG. */
HV_API hv_err hv_state_on_reset(hv_state_t *st, hv_reset_fn fn, void *ud);

/* The training function run by hv_elastic_run. It returns HV_OK when training is finished,
 * HV_ERESET from a commit, a data-plane error from a collective, or any other error to stop. */
typedef hv_err (*hv_train_fn)(hv_state_t *st, void *ud);

/* Runs fn under the elastic retry loop. Calls hv_init() first when libhv is not initialised.
 *   - Before each call of fn: sync the state from rank 0 (and, after a reset, run the reset
 *     callbacks).
 *   - fn returns HV_OK: this worker reports Done to the head and hv_elastic_run returns HV_OK.
 *     The world stays up (collectives still work) until hv_shutdown.
 *   - HV_ERESET: leave the ring and join the next round; no restore.
 *   - HV_EPEER, HV_ETIMEDOUT, HV_ECANCELED, HV_ECLOSED, HV_EIO: restore the last commit, leave
 *     the ring, join the next round.
 *   - Anything else is returned at once (the world is left as it is).
 * When the head removes this worker from the job (its node is drained), hv_elastic_run returns
 * HV_OK and hv_state_removed() is 1: the program should exit normally without further
 * collectives. When the head ends the job (too many resets, too few workers for too long) the
 * re-join fails and its error is returned (HV_ESTATE; hv_last_error says why). Each re-join is
 * bounded by the rendezvous timeout. Blocking; not re-entrant.
 * Without a head (HV_RDZV_DIR, or a single process) there are no membership changes: fn's
 * failures are returned as they are. */
HV_API hv_err hv_elastic_run(hv_state_t *st, hv_train_fn fn, void *ud);

/* 1 when the head removed this worker from the job (drain) during hv_elastic_run. */
HV_API int hv_state_removed(const hv_state_t *st);

/* Resets this worker went through (new rounds after the first), and of those, rollbacks. */
HV_API uint32_t hv_state_resets(const hv_state_t *st);
HV_API uint32_t hv_state_rollbacks(const hv_state_t *st);

/* Commits made so far (survives restores: counts the commits whose snapshot was taken, one
 * whose membership check then asked for a reset included). */
HV_API uint64_t hv_state_commits(const hv_state_t *st);

/* Checkpoints to disk, for a job that must start over (every node lost at once, a restart-the-
 * job policy): hv_state_save writes the last commit of every registered buffer (the samplers'
 * positions included) to path atomically (a temporary file, fsync, rename; mode 0600); call it
 * on one rank (rank 0), after hv_state_commit. hv_state_load reads such a file back into the
 * registered buffers, matched by name and size (the same registrations, in any order), before
 * hv_elastic_run (which then syncs rank 0's values to every rank). HV_ENOTFOUND: no file;
 * HV_EINVAL: not a checkpoint of this state (a log line says why; nothing is changed);
 * HV_ESTATE: inside hv_elastic_run. */
HV_API hv_err hv_state_save(const hv_state_t *st, const char *path);
HV_API hv_err hv_state_load(hv_state_t *st, const char *path);

/* The generation (round number) of the current world; 0 when not initialised. Thread-safe. */
HV_API uint32_t hv_generation(void);

/* ---- growth over epochs ------------------------------------------------------------------- */

/* Asks the head for `size` workers for this job (grow.h): the head aims for it within the job's
 * [min-np, max-np], its autoscaler buys the nodes, and the new workers join at the next
 * membership check. Any rank may ask (rank 0 at an epoch boundary, usually); *accepted (may be
 * NULL) gets what the head aims for. HV_ESTATE before hv_init, HV_ENOTSUP without a head (a
 * fixed local run), the head's refusal otherwise (a fixed-size job). */
HV_API hv_err hv_request_size(uint32_t size, const char *reason, uint32_t *accepted);

/* Returns the size wanted from `epoch` on (0: no change), given the epoch and whatever the
 * program reports through ud (its loss, accuracy, throughput). */
typedef uint32_t (*hv_size_fn)(uint64_t epoch, void *ud);
/* Registers fn: rank 0 calls it at every new epoch (hv_sampler_next_epoch) and asks the head
 * for its answer when it changed. It wins over the job's growth schedule (hvsubmit --grow,
 * HV_GROW_SCHEDULE) for the epochs where it returns non-zero. NULL unregisters. */
HV_API hv_err hv_set_size_callback(hv_size_fn fn, void *ud);

/* ---- sampler --------------------------------------------------------------------------------- */

typedef struct hv_sampler_s hv_sampler_t;

typedef struct hv_sampler_config_s {
    size_t size;          /* sizeof(hv_sampler_config_t) */
    uint64_t num_samples; /* samples in the data set, indices 0..num_samples-1; > 0 */
    uint64_t seed;        /* shuffle seed; epoch e uses a permutation derived from (seed, e) */
    uint32_t batch;       /* samples per step: the global batch when global_batch is 1, else
                             per rank; > 0 */
    int global_batch;     /* 1: batch is the global batch, split across ranks (per-rank batch =
                             batch / size, the remainder spread over the first ranks), so the
                             optimisation is the same at any world size; 0: batch per rank */
    int shuffle;          /* 1: a new seeded permutation each epoch; 0: index order */
} hv_sampler_config_t;

#define HV_SAMPLER_CONFIG_INIT                                                                     \
    { sizeof(hv_sampler_config_t), 0, 0, 32, 1, 1 }

/* Creates a sampler whose position (epoch, processed samples) is part of st, so it is
 * committed, restored and synced with the rest of the state. name is copied. *out is owned by
 * st (freed by hv_state_destroy). Create before hv_elastic_run. Errors: HV_EINVAL, HV_EEXIST,
 * HV_ESTATE, HV_ENOMEM. */
HV_API hv_err hv_sampler_create(hv_state_t *st, const char *name, const hv_sampler_config_t *cfg,
                                hv_sampler_t **out);

/* This rank's sample indices for the next step, into idx (cap entries). *n may be 0 on some
 * ranks in the last step of an epoch (they still take part in the step's collectives). When
 * every sample of the epoch has been handed out, *epoch_end is 1 and *n is 0 on every rank:
 * finish the epoch and call hv_sampler_next_epoch. Samples handed out count as processed at the
 * next commit; a restore hands them out again. Local (no collective); every rank computes the
 * same partition. Errors: HV_EINVAL, HV_ETOOBIG (cap below this rank's batch), HV_ESTATE (no
 * world yet). */
HV_API hv_err hv_sampler_next(hv_sampler_t *s, uint64_t *idx, size_t cap, size_t *n,
                              int *epoch_end);

/* Global samples of the step last returned by hv_sampler_next, over all ranks: the divisor
 * that turns summed gradients into the batch mean. */
HV_API uint64_t hv_sampler_step_samples(const hv_sampler_t *s);

/* Starts the next epoch (a new permutation, nothing processed). Call on every rank. It is the
 * epoch boundary of growth over epochs: rank 0 asks the head for the size that the growth
 * schedule or the size callback wants from the new epoch on. */
HV_API hv_err hv_sampler_next_epoch(hv_sampler_t *s);

typedef struct hv_sampler_stats_s {
    size_t size;         /* sizeof(hv_sampler_stats_t), set by the caller */
    uint64_t epoch;      /* the current epoch, from 0 */
    uint64_t processed;  /* samples of this epoch committed as processed, by all ranks */
    uint64_t duplicates; /* committed samples that had been committed before in this epoch */
    uint64_t remaining;  /* samples of this epoch not yet committed */
    uint64_t checksum;   /* sum of the committed sample indices of this epoch */
} hv_sampler_stats_t;

/* Fills *out (out->size must be set). At the end of an exact epoch: processed == num_samples,
 * duplicates == 0, remaining == 0, checksum == num_samples * (num_samples - 1) / 2. */
HV_API hv_err hv_sampler_stats(const hv_sampler_t *s, hv_sampler_stats_t *out);

#ifdef __cplusplus
}
#endif

#endif
