/*
 * member: one worker's membership in a job across rounds. It owns the rendezvous client, the
 * current world (world.c) and the push watcher, and it is what the elastic layer (elastic.c)
 * drives: leave the current world and join the next round (rejoin), report Done once, learn the
 * newest generation the head pushed. A failure push aborts the current world at once, so that
 * collectives in flight fail with HV_ECANCELED instead of waiting for a socket error or the
 * peer timeout ("the socket error or the push, whichever comes first").
 * hv.c keeps one member per process (the public API's world); tests keep one per thread. It is
 * not the retry loop, the state or the sampler (elastic.c, sampler.c).
 *
 * Threading: create, destroy, rejoin and done from one thread (the owner); hv__member_abort,
 * hv__member_pushed and hv__member_wait_pushed from any thread; the push watcher runs on its own
 * thread and only touches the pushed generations and the current world's abort under m->mu.
 */
#ifndef HV_WORKER_LIB_MEMBER_H
#define HV_WORKER_LIB_MEMBER_H

#include <stdint.h>

#include "engine.h"
#include "err.h"
#include "rdzv.h"
#include "world.h"

typedef struct hv__member_s hv__member_t;

/* Called by the owner's thread whenever the current world changes: w is the new world after a
 * join, NULL when the member left its world (w is borrowed; valid until the next call). */
typedef void (*hv__member_world_cb)(void *ud, hv__world_t *w);

typedef struct hv__member_opts_s {
    hv__world_opts_t world; /* template for every world: world.rdzv is owned by the member from
                               the call on, even on failure; its strings are copied;
                               world.last_generation is the round before the first join */
    hv__member_world_cb on_world; /* optional */
    void *ud;
} hv__member_opts_t;

/* What a rejoin found. */
typedef struct hv__member_change_s {
    uint32_t old_generation, new_generation;
    int old_size, new_size;
    int removed;  /* 1: this worker was removed from the job (no world any more) */
    int rollback; /* the head says the round follows a failure */
    char reason[HV_RDZV_REASON_MAX];
} hv__member_change_t;

/* Joins the first round and builds its world, then starts the push watcher when the rendezvous
 * has one. Errors: those of hv__world_create; HV_ESTATE when the first answer is "removed". */
hv_err hv__member_create(hv__member_opts_t *o, hv__member_t **out);

/* Stops the watcher, reports Done when report_done is set and Done was not reported yet (never
 * for a removed worker), destroys the world and the rendezvous client. NULL is a no-op. Returns
 * Done's status. */
hv_err hv__member_destroy(hv__member_t *m, int report_done);

/* The current world, its engine and assignment (NULL between rounds or after a removal).
 * Owner's thread. */
hv__world_t *hv__member_world(hv__member_t *m);
hv__engine_t *hv__member_engine(hv__member_t *m);
const hv__rdzv_assignment_t *hv__member_assignment(hv__member_t *m);

/* Asks the rendezvous for a new job size (hv_request_size). HV_ENOTSUP when it has none (a
 * fixed local run). Owner's thread. */
hv_err hv__member_resize(hv__member_t *m, uint32_t size, const char *reason, uint32_t *accepted);

/* 1 when the rendezvous pushes membership changes (the head, an elastic local store). */
int hv__member_elastic(const hv__member_t *m);
/* 1 after a rejoin answered "removed". */
int hv__member_removed(const hv__member_t *m);

/* The newest generation pushed so far (0 if none). Any thread. */
uint32_t hv__member_pushed(hv__member_t *m);
/* Waits up to timeout_ms until a push of generation >= gen arrived. HV_OK or HV_ETIMEDOUT. */
hv_err hv__member_wait_pushed(hv__member_t *m, uint32_t gen, uint32_t timeout_ms);
/* 1 when the newest round pushed after gen (waiting for one timeout_ms at most) stops the job at
 * this commit (the push's stop flag: the fleet's preemption, MembershipPush.reason_code
 * PREEMPT): rank 0 sends a copy of the commit's state before it re-joins. Any thread. */
int hv__member_stop_asked(hv__member_t *m, uint32_t gen, uint32_t timeout_ms);

/* Leaves the current world without Done and joins the next round (last_generation = the
 * world's), retrying when the round's data plane cannot be built (a member died meanwhile).
 * On HV_OK *out (optional) says what changed; when removed, there is no world any more.
 * Errors: those of the join (HV_ESTATE: the job ended; HV_ENOTFOUND: no member any more;
 * HV_ETIMEDOUT; HV_EUNAVAIL); hv__member_last_error says why. */
hv_err hv__member_rejoin(hv__member_t *m, hv__member_change_t *out);

/* Before a rejoin after a rollback: the samples it sent back to be done again, for the head's
 * accounting (a rendezvous without the report ignores it). */
void hv__member_note_redone(hv__member_t *m, uint64_t samples);

/* Reports the process' figures to the rendezvous now (rdzv.h report; nothing when it has no
 * reports). Blocks for one bounded call. */
void hv__member_report(hv__member_t *m);

/* Reports Done for the current generation, once (later calls return the first status).
 * HV_ESTATE without a world. */
hv_err hv__member_done(hv__member_t *m);

/* Aborts the current world's data plane (any thread, never blocks). */
void hv__member_abort(hv__member_t *m, hv_err why, const char *reason);

/* The rendezvous' copies of the state (rdzv.h put_state / fetch_state); HV_ENOTSUP when it has
 * none. put_state may be called from another thread (libhv's copier) while m is in use; m must
 * outlive the call. */
int hv__member_can_copy(const hv__member_t *m);
hv_err hv__member_put_state(hv__member_t *m, uint32_t generation, uint64_t commit, const void *data,
                            size_t len);
hv_err hv__member_fetch_state(hv__member_t *m, uint64_t commit, void **data, size_t *len);

/* The detail of the last failed join ("" if none), copied into buf. */
void hv__member_last_error(hv__member_t *m, char *buf, size_t len);

#endif
