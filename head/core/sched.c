/*
 * sched: pure placement of a job's ranks on nodes (see sched.h). Everything here is arithmetic
 * on the caller's arrays: no I/O, no allocation, no global state. The head's job driver is the
 * only caller. Placement walks nodes in a total order (usable free slots descending, then id,
 * then index) without sorting, so that it needs no scratch memory: each step picks the next
 * node after the previous one in that order, O(n) per node used.
 */
#include "sched.h"

#include <string.h>

/* GPUs beyond the width of gpus_used_mask cannot be tracked, so they are not handed out. */
#define SCHED_MAX_GPUS 64u

static uint32_t sched_gpu_count(const hv_sched_node_t *nd) {
    return nd->gpus > SCHED_MAX_GPUS ? SCHED_MAX_GPUS : nd->gpus;
}

/* The mask of GPU indices that exist on the node (bits 0..gpus-1). */
static uint64_t sched_gpu_all(const hv_sched_node_t *nd) {
    uint32_t g = sched_gpu_count(nd);
    return g >= 64 ? UINT64_MAX : (((uint64_t)1 << g) - 1);
}

static uint32_t sched_popcount(uint64_t x) {
    uint32_t c = 0;
    while (x != 0) {
        x &= x - 1;
        c++;
    }
    return c;
}

/* Slots of this node a job may use: free (or total when empty is set) slots, capped by the
 * per-host limit and, on GPU nodes, by the GPUs left. */
static uint32_t sched_usable(const hv_sched_node_t *nd, uint32_t slots_per_host, int empty) {
    if (!nd->schedulable) {
        return 0;
    }
    uint32_t used = empty ? 0 : nd->slots_used;
    uint32_t k = nd->slots_total > used ? nd->slots_total - used : 0;
    if (slots_per_host > 0 && k > slots_per_host) {
        k = slots_per_host;
    }
    if (nd->gpus > 0) {
        uint64_t busy = empty ? 0 : (nd->gpus_used_mask & sched_gpu_all(nd));
        uint32_t free_gpus = sched_gpu_count(nd) - sched_popcount(busy);
        if (k > free_gpus) {
            k = free_gpus;
        }
    }
    return k;
}

static uint32_t sched_sum(const hv_sched_node_t *nodes, size_t n, uint32_t slots_per_host,
                          int empty) {
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        total += sched_usable(&nodes[i], slots_per_host, empty);
        if (total >= UINT32_MAX) {
            return UINT32_MAX;
        }
    }
    return (uint32_t)total;
}

uint32_t hv_sched_free(const hv_sched_node_t *nodes, size_t n, uint32_t slots_per_host) {
    return nodes == NULL ? 0 : sched_sum(nodes, n, slots_per_host, 0);
}

uint32_t hv_sched_capacity(const hv_sched_node_t *nodes, size_t n, uint32_t slots_per_host) {
    return nodes == NULL ? 0 : sched_sum(nodes, n, slots_per_host, 1);
}

/* The placement order: a before b when a has more usable slots, then lower id, then lower
 * index. Returns nonzero when (fa, ida, ia) comes strictly before (fb, idb, ib). */
static int sched_before(uint32_t fa, uint64_t ida, size_t ia, uint32_t fb, uint64_t idb,
                        size_t ib) {
    if (fa != fb) {
        return fa > fb;
    }
    if (ida != idb) {
        return ida < idb;
    }
    return ia < ib;
}

hv_err hv_sched_place(const hv_sched_node_t *nodes, size_t n, const hv_sched_req_t *req,
                      hv_sched_slot_t *out) {
    if (req == NULL || out == NULL || req->np == 0 || (nodes == NULL && n > 0)) {
        return HV_EINVAL;
    }
    if (n == 0 || hv_sched_free(nodes, n, req->slots_per_host) < req->np) {
        return HV_EUNAVAIL;
    }

    uint32_t rank = 0;
    int have_prev = 0;
    uint32_t prev_free = 0;
    uint64_t prev_id = 0;
    size_t prev_idx = 0;
    while (rank < req->np) {
        /* The next node in placement order after the previous pick. */
        size_t best = n;
        uint32_t best_free = 0;
        for (size_t i = 0; i < n; i++) {
            uint32_t f = sched_usable(&nodes[i], req->slots_per_host, 0);
            if (f == 0) {
                continue;
            }
            if (have_prev && !sched_before(prev_free, prev_id, prev_idx, f, nodes[i].id, i)) {
                continue;
            }
            if (best == n || sched_before(f, nodes[i].id, i, best_free, nodes[best].id, best)) {
                best = i;
                best_free = f;
            }
        }
        if (best == n) {
            // Cannot happen: the free-slot check above guarantees enough nodes.
            return HV_EINTERNAL;
        }
        have_prev = 1;
        prev_free = best_free;
        prev_id = nodes[best].id;
        prev_idx = best;

        const hv_sched_node_t *nd = &nodes[best];
        uint32_t k = req->np - rank < best_free ? req->np - rank : best_free;
        uint64_t taken = nd->gpus_used_mask;
        uint64_t all = sched_gpu_all(nd);
        for (uint32_t j = 0; j < k; j++) {
            hv_sched_slot_t *s = &out[rank + j];
            s->node = best;
            s->rank = rank + j;
            s->local_rank = j;
            s->local_size = k;
            s->gpu = -1;
            if (nd->gpus > 0) {
                /* sched_usable capped k at the free GPUs, so a free bit exists. */
                uint64_t avail = all & ~taken;
                int g = 0;
                while (((avail >> g) & 1) == 0) {
                    g++;
                }
                taken |= (uint64_t)1 << g;
                s->gpu = g;
            }
        }
        rank += k;
    }
    return HV_OK;
}

/* ---- one process with a demand -------------------------------------------------------------- */

/* 1 when the pair [k, k+klen) "=" [v, v+vlen) is among have's pairs. */
static int sched_label_in(const char *have, const char *k, size_t klen, const char *v,
                          size_t vlen) {
    const char *p = have;
    while (p != NULL && *p != '\0') {
        const char *end = strchr(p, ',');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        size_t hk = eq != NULL ? (size_t)(eq - p) : len;
        size_t hv = eq != NULL ? len - hk - 1 : 0;
        if (hk == klen && hv == vlen && memcmp(p, k, klen) == 0 &&
            (vlen == 0 || memcmp(eq + 1, v, vlen) == 0)) {
            return 1;
        }
        p = end != NULL ? end + 1 : NULL;
    }
    return 0;
}

int hv_sched_labels_have(const char *have, const char *want) {
    const char *p = want;
    while (p != NULL && *p != '\0') {
        const char *end = strchr(p, ',');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        size_t k = eq != NULL ? (size_t)(eq - p) : len;
        if (len > 0 && !sched_label_in(have, p, k, eq != NULL ? eq + 1 : p + len,
                                       eq != NULL ? len - k - 1 : 0)) {
            return 0;
        }
        p = end != NULL ? end + 1 : NULL;
    }
    return 1;
}

int hv_sched_labels_ok(const char *s) {
    if (s == NULL || *s == '\0') {
        return 0;
    }
    size_t pairs = 0;
    const char *p = s;
    while (p != NULL) {
        const char *end = strchr(p, ',');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        if (eq == NULL || eq == p || (size_t)(eq - p) > 63 || len - (size_t)(eq - p) - 1 > 256 ||
            memchr(eq + 1, '=', len - (size_t)(eq - p) - 1) != NULL || ++pairs > 64) {
            return 0;
        }
        p = end != NULL ? end + 1 : NULL;
    }
    return 1;
}

hv_sched_fit_t hv_sched_fit(const hv_sched_node_t *nd, const hv_sched_demand_t *d,
                            const char **why) {
    const char *w = NULL;
    hv_sched_fit_t fit = HV_SCHED_FIT_NOW;
    uint32_t slots = d->slots > 0 ? d->slots : 1;
    if (!nd->schedulable) {
        w = "takes no work";
        fit = HV_SCHED_FIT_NEVER;
    } else if (!hv_sched_labels_have(nd->labels, d->labels)) {
        w = "labels";
        fit = HV_SCHED_FIT_NEVER;
    } else if ((d->gpus > 0) != (nd->gpus > 0)) {
        w = d->gpus > 0 ? "GPUs" : "a CPU node";
        fit = HV_SCHED_FIT_NEVER;
    } else if (d->memory_mb > nd->memory_mb) {
        w = "memory";
        fit = HV_SCHED_FIT_NEVER;
    } else if (sched_usable(nd, slots, 1) < slots) {
        w = nd->slots_total < slots ? "slots" : "GPUs";
        fit = HV_SCHED_FIT_NEVER;
    } else if (d->memory_mb > 0 && nd->mem_used_mb + d->memory_mb > nd->memory_mb) {
        w = "memory";
        fit = HV_SCHED_FIT_LATER;
    } else if (sched_usable(nd, slots, 0) < slots) {
        w = "slots";
        fit = HV_SCHED_FIT_LATER;
    }
    if (why != NULL) {
        *why = w;
    }
    return fit;
}
