/*
 * cachepol: the pure rule that keeps hvagent's artifact cache within its bound. Given every
 * complete artifact in the cache (its digest, size, last use and whether it is pinned) and the
 * bound in bytes, it says which artifacts to delete, in order: the least recently used first,
 * never a pinned one (an artifact a worker was handed and has not copied yet, or one being
 * served), until the total fits. When what is left over the bound is all pinned, it says so and
 * the cache stays over its bound until those are released. No I/O, no clock, no allocation: the
 * caller (agent/artifact.c) reads the directory, passes the file times as the last uses, and
 * deletes what the plan names. Reentrant.
 */
#ifndef HV_AGENT_CACHEPOL_H
#define HV_AGENT_CACHEPOL_H

#include <stddef.h>
#include <stdint.h>

/* One complete artifact in the cache. */
typedef struct hv_cachepol_entry_s {
    const char *key;  /* its digest (borrowed); equal last uses are ordered by it */
    uint64_t size;    /* bytes on disk */
    int64_t last_use; /* when it was last used, in any unit that grows with time (the agent
                         passes the file's mtime in ns) */
    int pinned;       /* 1: must stay (handed out and not placed yet, or being delivered) */
    void *ud;         /* the caller's, carried through the reordering untouched */
} hv_cachepol_entry_t;

/* What hv_cachepol_plan decided. */
typedef struct hv_cachepol_plan_s {
    size_t n_evict;       /* e[0] .. e[n_evict - 1] are to be deleted, in that order */
    uint64_t bytes;       /* the entries' total before (saturating at UINT64_MAX) */
    uint64_t bytes_after; /* the total once the n_evict entries are gone */
    int over;             /* 1: bytes_after is still over the bound: all that is left is pinned */
} hv_cachepol_plan_t;

/* Plans the evictions that bring the n entries of e within bound bytes (0 = unbounded: nothing
 * is evicted). When something is to go, e is reordered: the unpinned entries first, least
 * recently used first (equal last uses by key), then the pinned ones; otherwise e is left as it
 * is. Linear when nothing is to go, else O(n log n). */
hv_cachepol_plan_t hv_cachepol_plan(hv_cachepol_entry_t *e, size_t n, uint64_t bound);

#endif
