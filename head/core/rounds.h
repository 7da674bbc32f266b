/*
 * rounds: the pure rules of an elastic rendezvous round, shared by every job. A round gathers
 * the workers of a job's next membership (a generation); this module decides
 *   - the rank order when it closes (hv_round_assign): hosts keep their seniority and new hosts
 *     are appended, so the oldest surviving worker becomes rank 0 and holds the freshest state;
 *     a host's ranks stay contiguous (shared memory, hierarchical rings);
 *   - whether an open round closes, keeps waiting or fails (hv_round_decide);
 *   - how two memberships differ (hv_round_diff), for the event log.
 * No I/O, no clock, no allocation: the caller (head/core/jobm.c) passes the time and scratch space.
 * Reentrant.
 */
#ifndef HV_HEAD_ROUNDS_H
#define HV_HEAD_ROUNDS_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define HV_ROUND_NEW UINT32_MAX /* prev_rank of a worker that was never a member */

/* A worker that takes part in the round being closed. Borrowed, read-only. */
typedef struct hv_round_member_s {
    uint64_t worker_id;  /* unique; breaks ties (older workers have smaller ids) */
    uint64_t node_id;    /* the node it runs on */
    uint32_t joined_gen; /* the first round it was a member of; 0 = new */
    uint32_t prev_rank;  /* its rank in its last round; HV_ROUND_NEW if new */
} hv_round_member_t;

/* Where a member goes. */
typedef struct hv_round_slot_s {
    uint32_t rank;       /* 0..n-1 */
    uint32_t local_rank; /* among members on the same node, in rank order */
    uint32_t local_size; /* members on the node */
    uint32_t cross_rank; /* index of the node among the round's nodes, in rank order */
} hv_round_slot_t;

/* Assigns ranks to n members: out[i] is the slot of m[i]. Nodes are ordered by seniority (the
 * oldest joined_gen among their members that were members before, then the lowest previous
 * rank; nodes with only new workers come after, by their lowest worker id); within a node,
 * former members by joined_gen then previous rank, new workers after them by worker id.
 * scratch must hold n entries. *cross_size gets the number of nodes. Deterministic.
 * HV_EINVAL when a pointer is NULL with n > 0. */
hv_err hv_round_assign(const hv_round_member_t *m, size_t n, size_t *scratch, hv_round_slot_t *out,
                       uint32_t *cross_size);

typedef enum hv_round_decision {
    HV_ROUND_WAIT = 0,  /* keep waiting */
    HV_ROUND_CLOSE = 1, /* close with the workers that joined */
    HV_ROUND_FAIL = 2,  /* give up: the job cannot get min_np workers in time */
} hv_round_decision_t;

/* What an open round looks like at `now` (all times in ms on one clock). */
typedef struct hv_round_view_s {
    uint32_t expected; /* workers the round waits for: surviving members and newcomers */
    uint32_t joined;   /* of those, how many joined */
    uint32_t min_np;   /* the job's minimum (>= 1) */
    uint64_t now;      /* current time */
    uint64_t deadline; /* when waiting for stragglers ends: close with >= min_np joined */
    uint64_t fail_at;  /* when the round fails if it still cannot close (elastic timeout) */
    uint32_t waived;   /* of those that did not join, how many the round no longer waits for:
                        * their node is suspected lost and its grace has passed */
} hv_round_view_t;

/* Closes when every expected worker joined or is waived and those that joined are at least
 * min_np; at the deadline, closes with those that joined if they are at least min_np; fails at
 * fail_at when it cannot close; otherwise waits (e.g. below min_np: for capacity to arrive). */
hv_round_decision_t hv_round_decide(const hv_round_view_t *v);

/* Counts ids of next not in prev (added) and of prev not in next (removed). */
void hv_round_diff(const uint64_t *prev, size_t nprev, const uint64_t *next, size_t nnext,
                   size_t *added, size_t *removed);

#endif
