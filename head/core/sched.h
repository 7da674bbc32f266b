/*
 * sched: the head's pure placement function. Given a snapshot of nodes (slots, GPUs, whether
 * each may take work) and a request for np worker slots, it decides which node runs each rank,
 * the rank's local rank and local size, and which GPU it gets. It does no I/O, takes no locks
 * and allocates nothing: the caller (the head's job driver) builds the node array from its
 * state, calls hv_sched_place, and records the result. It is not the policy that decides when
 * to place, how many workers a job gets, or when to ask the autoscaler for nodes; those are
 * cluster.h's, whose inputs the driver counts with hv_sched_free/hv_sched_capacity. Reentrant.
 */
#ifndef HV_HEAD_SCHED_H
#define HV_HEAD_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* One node as the scheduler sees it. Borrowed, read-only. */
typedef struct hv_sched_node_s {
    uint64_t id;             /* node id; breaks ties (lower id first) */
    uint32_t slots_total;    /* worker slots the node offers */
    uint32_t slots_used;     /* slots already taken by running workers */
    uint32_t gpus;           /* GPUs on the node; 0 = CPU-only. At most 64 are used. */
    uint64_t gpus_used_mask; /* bit i set = GPU i already given to a worker */
    int schedulable;         /* nonzero: alive, not draining, not blacklisted */
    /* Read by hv_sched_fit only (an actor's demand); hv_sched_place ignores them. */
    const char *labels;   /* "k=v,k=v" as the agent declared them (NULL or "": none) */
    uint64_t memory_mb;   /* memory the agent reported (0: unknown, meets no memory demand) */
    uint64_t mem_used_mb; /* taken by the demands placed on it (actors') */
} hv_sched_node_t;

/* What a job asks for. */
typedef struct hv_sched_req_s {
    uint32_t np;             /* number of worker slots (ranks) to place; > 0 */
    uint32_t slots_per_host; /* at most this many of the job's ranks per node; 0 = no limit */
} hv_sched_req_t;

/* Where one rank goes. out[r] describes rank r. */
typedef struct hv_sched_slot_s {
    size_t node;         /* index into the nodes array given to hv_sched_place */
    uint32_t rank;       /* global rank, equal to its index in out */
    uint32_t local_rank; /* 0..local_size-1 among this job's ranks on the node */
    uint32_t local_size; /* this job's ranks on the node */
    int gpu;             /* GPU index for CUDA_VISIBLE_DEVICES, or -1 on a CPU-only node */
} hv_sched_slot_t;

/* The slots a job could use right now: the sum over schedulable nodes of their free slots,
 * each capped at slots_per_host (0 = no cap) and, on GPU nodes, at the free GPUs. Saturates
 * at UINT32_MAX. nodes may be NULL when n == 0. */
uint32_t hv_sched_free(const hv_sched_node_t *nodes, size_t n, uint32_t slots_per_host);

/* The slots a job could use if every schedulable node were empty: as hv_sched_free but with
 * slots_used and gpus_used_mask taken as 0. A request above this cannot be met without more
 * nodes, however long it waits. Saturates at UINT32_MAX. */
uint32_t hv_sched_capacity(const hv_sched_node_t *nodes, size_t n, uint32_t slots_per_host);

/* Places req->np ranks on nodes (borrowed, n entries) and writes out[0..np-1] (caller storage,
 * req->np entries). Ranks go host by host: the ranks on one node are contiguous, with local
 * ranks 0..k-1 and local_size k. To use as few nodes as possible, nodes are taken in order of
 * most usable free slots first (ties: lower id, then lower index), each filled up to its free
 * slots and slots_per_host before the next. On a GPU node each rank gets the lowest GPU index
 * not in gpus_used_mask and not given to an earlier rank of this placement; a GPU node with no
 * free GPU takes no more ranks. Deterministic for equal input.
 * Returns HV_EINVAL when np == 0 or a pointer is NULL, HV_EUNAVAIL when the free slots cannot
 * hold np now. out is written only on HV_OK. */
hv_err hv_sched_place(const hv_sched_node_t *nodes, size_t n, const hv_sched_req_t *req,
                      hv_sched_slot_t *out);

/* ---- one process with a demand (an actor) ---------------------------------------------------- */

/* What one process needs of a single node: all its slots there, GPUs (one per slot on a GPU
 * node; a process without GPUs goes to CPU nodes only), memory, and labels the node must carry
 * with these exact values. Borrowed. */
typedef struct hv_sched_demand_s {
    uint32_t slots;     /* 0 counts as 1 */
    uint32_t gpus;      /* > 0: a GPU node with that many free GPUs */
    uint64_t memory_mb; /* 0: no memory demand */
    const char *labels; /* "k=v,k=v": every pair must be among the node's (NULL or "": none) */
} hv_sched_demand_t;

typedef enum hv_sched_fit {
    HV_SCHED_FIT_NOW = 0,   /* it fits now */
    HV_SCHED_FIT_LATER = 1, /* it fits once what runs there ends (slots, GPUs or memory) */
    HV_SCHED_FIT_NEVER = 2, /* it cannot fit even on the empty node (or the node takes no work) */
} hv_sched_fit_t;

/* Whether d fits on nd. On FIT_NEVER and FIT_LATER, *why (when not NULL) names what is missing,
 * for the user: "labels", "memory", "slots", "GPUs", "a CPU node" or "takes no work" (static
 * strings). */
hv_sched_fit_t hv_sched_fit(const hv_sched_node_t *nd, const hv_sched_demand_t *d,
                            const char **why);

/* 1 when every "k=v" pair of want (comma-separated; NULL or "" is none) is among have's.
 * A pair without '=' asks for the key with an empty value. */
int hv_sched_labels_have(const char *have, const char *want);

/* 1 when s is a valid label demand: 1 to 64 comma-separated pairs k=v, keys 1 to 63 bytes
 * without ',' or '=', values at most 256 bytes without ','. */
int hv_sched_labels_ok(const char *s);

#endif
