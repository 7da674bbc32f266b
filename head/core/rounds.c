/*
 * rounds: see rounds.h. Orders are computed with an insertion sort over indices: rounds hold at
 * most a few thousand workers, and a stable, obviously deterministic order matters more here
 * than n log n.
 */
#include "rounds.h"

/* Seniority of a member: smaller is older. New workers come after every former member. */
static uint64_t member_key(const hv_round_member_t *x) {
    uint64_t gen = x->joined_gen == 0 ? UINT32_MAX : x->joined_gen;
    return (gen << 32) | x->prev_rank;
}

/* The seniority of a node: its oldest member's key, then (for nodes of new workers only, which
 * all share the same key) the smallest worker id. */
typedef struct node_key_s {
    uint64_t key;
    uint64_t min_id;
} node_key_t;

static node_key_t node_key(const hv_round_member_t *m, size_t n, uint64_t node_id) {
    node_key_t k = {UINT64_MAX, UINT64_MAX};
    for (size_t i = 0; i < n; i++) {
        if (m[i].node_id != node_id) {
            continue;
        }
        uint64_t mk = member_key(&m[i]);
        if (mk < k.key) {
            k.key = mk;
        }
        if (m[i].worker_id < k.min_id) {
            k.min_id = m[i].worker_id;
        }
    }
    return k;
}

/* 1 when member a goes before member b. */
static int before(const hv_round_member_t *m, size_t n, size_t a, size_t b) {
    if (m[a].node_id != m[b].node_id) {
        node_key_t ka = node_key(m, n, m[a].node_id), kb = node_key(m, n, m[b].node_id);
        if (ka.key != kb.key) {
            return ka.key < kb.key;
        }
        if (ka.min_id != kb.min_id) {
            return ka.min_id < kb.min_id;
        }
        return m[a].node_id < m[b].node_id;
    }
    uint64_t ka = member_key(&m[a]), kb = member_key(&m[b]);
    if (ka != kb) {
        return ka < kb;
    }
    return m[a].worker_id < m[b].worker_id;
}

hv_err hv_round_assign(const hv_round_member_t *m, size_t n, size_t *scratch, hv_round_slot_t *out,
                       uint32_t *cross_size) {
    if (n > 0 && (m == NULL || scratch == NULL || out == NULL)) {
        return HV_EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        size_t j = i;
        while (j > 0 && before(m, n, i, scratch[j - 1])) {
            scratch[j] = scratch[j - 1];
            j--;
        }
        scratch[j] = i;
    }
    uint32_t hosts = 0;
    size_t r = 0;
    while (r < n) {
        size_t end = r;
        while (end < n && m[scratch[end]].node_id == m[scratch[r]].node_id) {
            end++;
        }
        for (size_t k = r; k < end; k++) {
            hv_round_slot_t *s = &out[scratch[k]];
            s->rank = (uint32_t)k;
            s->local_rank = (uint32_t)(k - r);
            s->local_size = (uint32_t)(end - r);
            s->cross_rank = hosts;
        }
        hosts++;
        r = end;
    }
    if (cross_size != NULL) {
        *cross_size = hosts;
    }
    return HV_OK;
}

hv_round_decision_t hv_round_decide(const hv_round_view_t *v) {
    uint32_t min_np = v->min_np ? v->min_np : 1;
    int enough = v->joined >= min_np;
    if (enough && v->joined + v->waived >= v->expected) {
        return HV_ROUND_CLOSE;
    }
    if (enough && v->now >= v->deadline) {
        return HV_ROUND_CLOSE;
    }
    if (v->now >= v->fail_at) {
        return HV_ROUND_FAIL;
    }
    return HV_ROUND_WAIT;
}

static int contains(const uint64_t *v, size_t n, uint64_t x) {
    for (size_t i = 0; i < n; i++) {
        if (v[i] == x) {
            return 1;
        }
    }
    return 0;
}

void hv_round_diff(const uint64_t *prev, size_t nprev, const uint64_t *next, size_t nnext,
                   size_t *added, size_t *removed) {
    size_t a = 0, r = 0;
    for (size_t i = 0; i < nnext; i++) {
        a += !contains(prev, nprev, next[i]);
    }
    for (size_t i = 0; i < nprev; i++) {
        r += !contains(next, nnext, prev[i]);
    }
    *added = a;
    *removed = r;
}
