/*
 * copier: sends copies of the committed elastic state off the training thread (issue 15 §1: the
 * training state outlives its workers). The training thread hands over a serialised copy (the
 * commit's snapshot, in hv_state_save's format) when one is due; a background thread sends it
 * (in libhv: to the head, rdzv's put_state) while training goes on. A copy offered while the
 * previous one is still in flight is skipped, never queued, so a slow link costs freshness, not
 * memory or training time.
 *
 * When a copy is due is decided by hv__copy_due, a pure function of what copies cost: the first
 * commit always; after that, once the time since the last copy began is at least
 * cost_factor times what that copy cost this process's CPU (serialising it on the training
 * thread plus the copier thread's CPU time: sealing, hashing, sending), and at least
 * min_interval_ms; and never while the previous one is in flight (so never more often than a
 * send takes, wall time). With the defaults (factor 80, at least 1 s apart: the head writes and
 * syncs every copy) the copies cost at most about 5% of the steps even where the ranks and the
 * head share 2 cores (bench_copy.sh); a small state is copied about every second, a large one as
 * often as 80 times its cost allows (a 64 MiB state whose copy takes 0.17 s of CPU: every 14 s). max_interval_ms (0: none) forces a copy when the
 * last one is older, whatever it costs. The copier thread runs at nice HV_STATE_COPY_NICE
 * (default 0; up to 19, where its CPU comes from what training leaves and a busy machine
 * starves it); its wall time can be much longer than its CPU time on a busy machine, which is
 * why the cost is CPU time.
 *
 * It is not the state (elastic.c serialises and decides when to offer) nor the wire
 * (rdzv_head.c). Threading: create, offer, stats and destroy on one thread (the training
 * thread); the send function runs on the copier's own thread.
 */
#ifndef HV_WORKER_LIB_COPIER_H
#define HV_WORKER_LIB_COPIER_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* Sends one copy (data: len bytes, borrowed for the call). Runs on the copier's thread. */
typedef hv_err (*hv__copier_send_fn)(void *ud, uint32_t generation, uint64_t commit,
                                     const void *data, size_t len);

typedef struct hv__copy_policy_s {
    uint32_t cost_factor;     /* the interval is at least this many times a copy's cost */
    uint64_t min_interval_ms; /* never more often */
    uint64_t max_interval_ms; /* a copy at least this often, whatever it costs (0: no bound) */
} hv__copy_policy_t;

/* The defaults, then HV_STATE_COPY_MIN_MS / HV_STATE_COPY_MAX_MS / HV_STATE_COPY_FACTOR from the
 * environment (read here, once per copier). */
void hv__copy_policy_default(hv__copy_policy_t *p);

/* Pure: is a copy due now? first: none was offered yet; since_ms: time since the last copy
 * began; cost_ms: what the last copy cost (serialise + send; 0 when unknown). */
int hv__copy_due(const hv__copy_policy_t *p, int first, uint64_t since_ms, uint64_t cost_ms);

typedef struct hv__copier_s hv__copier_t;

typedef struct hv__copier_stats_s {
    uint64_t offered, sent, failed, skipped; /* copies */
    uint64_t bytes_sent;
    uint64_t last_cost_ms; /* the last finished copy's cost to this process's CPU: serialising
                              it (training thread) + the copier thread's CPU time to seal, hash
                              and send it; not the wall time, which waits for the head and, at
                              the copier's low priority, for the CPU (that is busy_ms) */
    uint64_t last_wall_ms; /* the last finished copy's send, wall time */
    uint64_t busy_ms;      /* summed send time (wall) */
} hv__copier_stats_t;

/* Starts the copier's thread. fn/ud are borrowed until destroy. HV_ENOMEM, HV_EINTERNAL (no
 * thread). */
hv_err hv__copier_create(hv__copier_send_fn fn, void *ud, const hv__copy_policy_t *policy,
                         hv__copier_t **out);

/* Should the caller serialise a copy now? (due by the policy and the thread is idle; a due copy
 * the thread is too busy for counts as skipped.) */
int hv__copier_want(hv__copier_t *c, uint64_t now_ms);

/* A buffer of len bytes to serialise the next copy into (owned by the caller until offered;
 * hv_free if not offered): the last sent copy's when it is that size (its pages are already
 * there), else a new one from hv_malloc_large (NULL when out of memory). The copier keeps the last
 * sent copy's buffer for this, so a job holds one more state-sized buffer while copies are on. */
void *hv__copier_buffer(hv__copier_t *c, size_t len);

/* Hands over a copy the caller serialised in ser_ms: data (len bytes, from hv_malloc or
 * hv__copier_buffer) is owned by the copier from here on, whether or not it is sent. 1: taken
 * (the send function will run for it); 0: skipped (one in flight, or stopping), data freed. */
int hv__copier_offer(hv__copier_t *c, uint32_t generation, uint64_t commit, void *data, size_t len,
                     uint64_t ser_ms, uint64_t now_ms);

/* Waits until no copy is in flight (at most timeout_ms). HV_OK or HV_ETIMEDOUT. */
hv_err hv__copier_flush(hv__copier_t *c, uint32_t timeout_ms);

void hv__copier_stats(hv__copier_t *c, hv__copier_stats_t *out);

/* Waits for the copy in flight (its send is bounded), stops the thread, frees. NULL: no-op. */
void hv__copier_destroy(hv__copier_t *c);

#endif
