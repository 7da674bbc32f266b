/*
 * copykeep: the copies of other nodes' jobs' training state that this agent keeps in memory (issue
 * 28 §3, docs/RELIABILITY.md "Copies kept by peers"). A job's member sends its committed state to
 * the agent of another node, which the head named as its keeper; the copy arrives in chunks into a
 * buffer reserved for all of it, is checked against its SHA-256 at the end, and is then read back
 * by a resume or a joiner's sync. The head keeps only the index (which node holds which
 * generation); the bytes never pass it.
 *
 * The memory is bounded (hvagent --copy-memory). A new copy that does not fit makes room by
 * dropping the least recently used copies that are not their job's only complete copy (an older
 * generation whose newer one is here) -- never a job's only copy, never a copy in progress; when
 * that is not enough the new copy is refused (HV_ETOOBIG) and nothing is dropped: its member sends
 * to the head instead. The buffer of a copy released for its job's newer one is kept (while it
 * fits under the bound) for the job's next copy, which is of its size: no page faults to fill
 * it. The choice is agent/cachepol.c's plan, with those copies pinned.
 *
 * It is not the wire (the copy endpoint's handlers) nor the choice of keeper (head/core/copies.c).
 * Not thread-safe: one thread (the agent's loop).
 */
#ifndef HV_AGENT_COPYKEEP_H
#define HV_AGENT_COPYKEEP_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef struct hv_copykeep_s hv_copykeep_t;

/* One copy, as listed. */
typedef struct hv_copykeep_info_s {
    uint64_t job_id;
    uint32_t generation;
    uint64_t commit, size;
    uint64_t received; /* bytes arrived (size once complete) */
    int complete;      /* every byte arrived and the SHA-256 matched */
    char sha256[65];   /* "" until complete */
    uint64_t last_use_ms;
} hv_copykeep_info_t;

typedef struct hv_copykeep_stats_s {
    uint64_t cap, used; /* bytes: the bound, and what the copies here reserve */
    uint64_t spare;     /* bytes: a released copy's buffer kept for the next copy of its size
                           (used + spare <= cap) */
    size_t copies;      /* held (complete or in progress) */
    uint64_t refused;   /* copies refused for room */
    uint64_t evicted;   /* copies dropped for room */
    uint64_t bytes_in;  /* chunk bytes taken */
    uint64_t bytes_out; /* bytes read back */
} hv_copykeep_stats_t;

/* cap: the bound in bytes (0: keeps none, every copy is refused). HV_ENOMEM. */
hv_err hv_copykeep_create(uint64_t cap, hv_copykeep_t **out);
void hv_copykeep_destroy(hv_copykeep_t *k);

/* Takes one chunk of job's copy (generation, commit) of size bytes total. offset 0 starts it:
 * room for all size bytes is made (or the copy refused: HV_ETOOBIG, nothing dropped); a copy of
 * the same (job, generation, commit) already here is started again. Any other offset continues
 * the copy in progress (HV_ESTATE when there is none with these numbers or the offset is not
 * where it stopped). When offset + len == size, sha256 (hex) must match (HV_EPROTO otherwise,
 * and the copy is dropped) and *complete is set. HV_EINVAL: job 0, size 0, or a chunk past
 * size. err gets the reason. */
hv_err hv_copykeep_put(hv_copykeep_t *k, uint64_t job_id, uint32_t generation, uint64_t commit,
                       uint64_t size, uint64_t offset, const void *data, size_t len,
                       const char *sha256, uint64_t now_ms, int *complete, char *err,
                       size_t errlen);

/* Reads up to cap bytes of job's complete copy (generation, commit) from offset; *n gets the
 * count, *info (may be NULL) the copy. Marks it used. HV_ENOTFOUND: no such complete copy. */
hv_err hv_copykeep_read(hv_copykeep_t *k, uint64_t job_id, uint32_t generation, uint64_t commit,
                        uint64_t offset, void *buf, size_t cap, size_t *n, hv_copykeep_info_t *info,
                        uint64_t now_ms);

/* The head stored the index naming job's copy (generation, commit) as the one kept: drops the
 * job's older copies here, when that one is here and complete (a job's only copy is never
 * dropped). *n (may be NULL) gets how many went. */
void hv_copykeep_release(hv_copykeep_t *k, uint64_t job_id, uint32_t generation, uint64_t commit,
                         size_t *n);

/* Drops every copy of job (it ended). */
void hv_copykeep_drop_job(hv_copykeep_t *k, uint64_t job_id);

/* Lists the copies (*out: hv_free it; NULL when none). HV_ENOMEM. */
hv_err hv_copykeep_list(const hv_copykeep_t *k, hv_copykeep_info_t **out, size_t *n);

void hv_copykeep_stats(const hv_copykeep_t *k, hv_copykeep_stats_t *out);

#endif
