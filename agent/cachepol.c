/*
 * cachepol: the cache bound's eviction rule (see cachepol.h for the contract).
 */
#include "cachepol.h"

#include <stdlib.h>
#include <string.h>

/* Unpinned before pinned, then the older last use first, then by key. */
static int cachepol_cmp(const void *pa, const void *pb) {
    const hv_cachepol_entry_t *a = pa, *b = pb;
    if (a->pinned != b->pinned) {
        return a->pinned ? 1 : -1;
    }
    if (a->last_use != b->last_use) {
        return a->last_use < b->last_use ? -1 : 1;
    }
    return strcmp(a->key != NULL ? a->key : "", b->key != NULL ? b->key : "");
}

hv_cachepol_plan_t hv_cachepol_plan(hv_cachepol_entry_t *e, size_t n, uint64_t bound) {
    hv_cachepol_plan_t p = {0};
    for (size_t i = 0; i < n; i++) {
        p.bytes = e[i].size > UINT64_MAX - p.bytes ? UINT64_MAX : p.bytes + e[i].size;
    }
    p.bytes_after = p.bytes;
    if (bound == 0 || p.bytes <= bound) {
        return p;
    }
    qsort(e, n, sizeof(*e), cachepol_cmp);
    while (p.n_evict < n && p.bytes_after > bound && !e[p.n_evict].pinned) {
        uint64_t sz = e[p.n_evict].size;
        p.bytes_after = sz < p.bytes_after ? p.bytes_after - sz : 0;
        p.n_evict++;
    }
    p.over = p.bytes_after > bound;
    return p;
}
