/* copykeep: see copykeep.h. */
#include "copykeep.h"

#include <stdio.h>
#include <string.h>

#include "cachepol.h"
#include "mem.h"
#include "sha256.h"

typedef struct keep_ent_s {
    hv_copykeep_info_t info;
    uint8_t *buf; /* info.size bytes */
    hv_sha256_t sha;
} keep_ent_t;

struct hv_copykeep_s {
    uint64_t cap, used;
    /* The buffer of the last copy released for a newer one of its job, kept for the next copy
     * of that size (a job's copies are all one size): filling a fresh buffer of a large copy
     * costs the agent's loop a page fault per page (64 MiB: 220 ms of CPU on the development
     * machine, more than the rest of receiving the copy), on a node that trains too. Not
     * counted in used, but kept only while used + spare_size <= cap, so the copies and the spare
     * never hold more than the bound. */
    uint8_t *spare;
    uint64_t spare_size;
    keep_ent_t *e;
    size_t n, room;
    uint64_t refused, evicted, bytes_in, bytes_out;
};

hv_err hv_copykeep_create(uint64_t cap, hv_copykeep_t **out) {
    hv_copykeep_t *k = hv_calloc(1, sizeof(*k));
    if (k == NULL) {
        return HV_ENOMEM;
    }
    k->cap = cap;
    *out = k;
    return HV_OK;
}

static void spare_free(hv_copykeep_t *k) {
    hv_free(k->spare);
    k->spare = NULL;
    k->spare_size = 0;
}

/* Removes entry i (order is not kept). keep: its buffer may become the spare (a newer copy of
 * its job replaced it: the next copy will be of its size). */
static void ent_drop_keep(hv_copykeep_t *k, size_t i, int keep) {
    k->used -= k->e[i].info.size;
    if (keep && k->used + k->e[i].info.size <= k->cap) {
        spare_free(k);
        k->spare = k->e[i].buf;
        k->spare_size = k->e[i].info.size;
    } else {
        hv_free(k->e[i].buf);
    }
    k->e[i] = k->e[k->n - 1];
    k->n--;
}

static void ent_drop(hv_copykeep_t *k, size_t i) { ent_drop_keep(k, i, 0); }

/* A buffer for a new copy of size bytes, once make_room made room for it: the spare when it is
 * that size, else a fresh one (the spare freed first, so that the bound holds). */
static uint8_t *buf_take(hv_copykeep_t *k, uint64_t size) {
    if (k->spare != NULL && k->spare_size == size) {
        uint8_t *b = k->spare;
        k->spare = NULL;
        k->spare_size = 0;
        return b;
    }
    spare_free(k);
    return hv_malloc_large((size_t)size);
}

void hv_copykeep_destroy(hv_copykeep_t *k) {
    if (k == NULL) {
        return;
    }
    for (size_t i = 0; i < k->n; i++) {
        hv_free(k->e[i].buf);
    }
    spare_free(k);
    hv_free(k->e);
    hv_free(k);
}

static keep_ent_t *ent_find(hv_copykeep_t *k, uint64_t job, uint32_t gen, uint64_t commit) {
    for (size_t i = 0; i < k->n; i++) {
        const hv_copykeep_info_t *in = &k->e[i].info;
        if (in->job_id == job && in->generation == gen && in->commit == commit) {
            return &k->e[i];
        }
    }
    return NULL;
}

static int ref_newer(const hv_copykeep_info_t *a, const hv_copykeep_info_t *b) {
    return a->generation > b->generation ||
           (a->generation == b->generation && a->commit > b->commit);
}

/* May entry i go for room? Only when complete and a newer complete copy of its job is here. */
static int ent_spare(const hv_copykeep_t *k, size_t i) {
    const hv_copykeep_info_t *a = &k->e[i].info;
    if (!a->complete) {
        return 0;
    }
    for (size_t j = 0; j < k->n; j++) {
        const hv_copykeep_info_t *b = &k->e[j].info;
        if (j != i && b->job_id == a->job_id && b->complete && ref_newer(b, a)) {
            return 1;
        }
    }
    return 0;
}

/* Makes room for size more bytes: 1 (done, maybe after dropping spare copies) or 0 (refused,
 * nothing dropped). */
static int make_room(hv_copykeep_t *k, uint64_t size, char *err, size_t errlen) {
    if (size > k->cap) {
        hv_errf(err, errlen, "copy of %llu bytes is over this agent's copy memory (%llu bytes)",
                (unsigned long long)size, (unsigned long long)k->cap);
        return 0;
    }
    if (k->used + size <= k->cap) {
        return 1;
    }
    hv_cachepol_entry_t *pe = hv_calloc(k->n, sizeof(*pe));
    char(*keys)[48] = hv_calloc(k->n, sizeof(*keys));
    if (pe == NULL || keys == NULL) {
        hv_free(pe);
        hv_free(keys);
        hv_errf(err, errlen, "out of memory");
        return 0;
    }
    for (size_t i = 0; i < k->n; i++) {
        const hv_copykeep_info_t *in = &k->e[i].info;
        snprintf(keys[i], sizeof(keys[i]), "%llu-%u-%llu", (unsigned long long)in->job_id,
                 in->generation, (unsigned long long)in->commit);
        pe[i].key = keys[i];
        pe[i].size = in->size;
        pe[i].last_use = (int64_t)in->last_use_ms;
        pe[i].pinned = !ent_spare(k, i);
        pe[i].ud = &k->e[i];
    }
    hv_cachepol_plan_t plan;
    if (k->cap > size) {
        plan = hv_cachepol_plan(pe, k->n, k->cap - size);
    } else {
        /* The new copy takes the whole bound: every copy here must go (cachepol's bound 0 would
         * mean unbounded). */
        memset(&plan, 0, sizeof(plan));
        for (size_t i = 0; i < k->n; i++) {
            plan.over |= pe[i].pinned;
            plan.bytes_after += pe[i].pinned ? pe[i].size : 0;
        }
        plan.n_evict = plan.over ? 0 : k->n;
    }
    int ok = !plan.over;
    if (ok) {
        /* The plan names entries by pointer into k->e, which ent_drop reorders: take the victims'
         * names first, then drop them by name. */
        hv_copykeep_info_t *vic = hv_calloc(plan.n_evict ? plan.n_evict : 1, sizeof(*vic));
        if (vic == NULL) {
            ok = 0;
            hv_errf(err, errlen, "out of memory");
        } else {
            for (size_t v = 0; v < plan.n_evict; v++) {
                vic[v] = ((const keep_ent_t *)pe[v].ud)->info;
            }
            for (size_t v = 0; v < plan.n_evict; v++) {
                keep_ent_t *x = ent_find(k, vic[v].job_id, vic[v].generation, vic[v].commit);
                if (x != NULL) {
                    ent_drop(k, (size_t)(x - k->e));
                    k->evicted++;
                }
            }
            hv_free(vic);
        }
    } else {
        hv_errf(err, errlen,
                "no room for a copy of %llu bytes: %llu of %llu bytes hold copies that are "
                "their job's only one or in progress",
                (unsigned long long)size, (unsigned long long)plan.bytes_after,
                (unsigned long long)k->cap);
    }
    hv_free(pe);
    hv_free(keys);
    return ok;
}

hv_err hv_copykeep_put(hv_copykeep_t *k, uint64_t job_id, uint32_t generation, uint64_t commit,
                       uint64_t size, uint64_t offset, const void *data, size_t len,
                       const char *sha256, uint64_t now_ms, int *complete, char *err,
                       size_t errlen) {
    *complete = 0;
    if (job_id == 0 || size == 0 || offset > size || len > size - offset) {
        hv_errf(err, errlen, "bad chunk: job %llu, size %llu, offset %llu, length %zu",
                (unsigned long long)job_id, (unsigned long long)size, (unsigned long long)offset,
                len);
        return HV_EINVAL;
    }
    keep_ent_t *x = ent_find(k, job_id, generation, commit);
    if (offset == 0) {
        if (x != NULL) {
            ent_drop(k, (size_t)(x - k->e));
        }
        if (size > SIZE_MAX || !make_room(k, size, err, errlen)) {
            k->refused++;
            return HV_ETOOBIG;
        }
        if (k->n == k->room) {
            size_t room = k->room ? 2 * k->room : 8;
            keep_ent_t *ne = hv_realloc(k->e, room * sizeof(*ne));
            if (ne == NULL) {
                hv_errf(err, errlen, "out of memory");
                return HV_ENOMEM;
            }
            k->e = ne;
            k->room = room;
        }
        uint8_t *buf = buf_take(k, size);
        if (buf == NULL) {
            hv_errf(err, errlen, "out of memory for a copy of %llu bytes",
                    (unsigned long long)size);
            k->refused++;
            return HV_ETOOBIG;
        }
        x = &k->e[k->n++];
        memset(x, 0, sizeof(*x));
        x->info.job_id = job_id;
        x->info.generation = generation;
        x->info.commit = commit;
        x->info.size = size;
        x->buf = buf;
        hv_sha256_init(&x->sha);
        k->used += size;
    } else if (x == NULL || x->info.complete || x->info.received != offset) {
        hv_errf(err, errlen, "chunk at %llu continues no copy in progress of job %llu g%u c%llu",
                (unsigned long long)offset, (unsigned long long)job_id, generation,
                (unsigned long long)commit);
        return HV_ESTATE;
    }
    memcpy(x->buf + offset, data, len);
    hv_sha256_update(&x->sha, data, len);
    x->info.received += len;
    x->info.last_use_ms = now_ms;
    k->bytes_in += len;
    if (x->info.received < x->info.size) {
        return HV_OK;
    }
    uint8_t d[32];
    char hex[65];
    hv_sha256_final(&x->sha, d);
    hv_sha256_hex(d, hex);
    if (sha256 == NULL || strcmp(hex, sha256) != 0) {
        hv_errf(err, errlen, "copy of job %llu g%u c%llu: SHA-256 %s, the sender said %.64s",
                (unsigned long long)job_id, generation, (unsigned long long)commit, hex,
                sha256 ? sha256 : "(none)");
        ent_drop(k, (size_t)(x - k->e));
        return HV_EPROTO;
    }
    memcpy(x->info.sha256, hex, sizeof(hex));
    x->info.complete = 1;
    *complete = 1;
    return HV_OK;
}

hv_err hv_copykeep_read(hv_copykeep_t *k, uint64_t job_id, uint32_t generation, uint64_t commit,
                        uint64_t offset, void *buf, size_t cap, size_t *n, hv_copykeep_info_t *info,
                        uint64_t now_ms) {
    *n = 0;
    keep_ent_t *x = ent_find(k, job_id, generation, commit);
    if (x == NULL || !x->info.complete) {
        return HV_ENOTFOUND;
    }
    x->info.last_use_ms = now_ms;
    if (info != NULL) {
        *info = x->info;
    }
    if (offset >= x->info.size) {
        return HV_OK;
    }
    uint64_t left = x->info.size - offset;
    size_t take = left < cap ? (size_t)left : cap;
    memcpy(buf, x->buf + offset, take);
    *n = take;
    k->bytes_out += take;
    return HV_OK;
}

void hv_copykeep_release(hv_copykeep_t *k, uint64_t job_id, uint32_t generation, uint64_t commit,
                         size_t *n) {
    size_t gone = 0;
    keep_ent_t *keep = ent_find(k, job_id, generation, commit);
    if (keep != NULL && keep->info.complete) {
        hv_copykeep_info_t ref = keep->info;
        for (size_t i = 0; i < k->n;) {
            const hv_copykeep_info_t *in = &k->e[i].info;
            if (in->job_id == job_id && in->complete && ref_newer(&ref, in)) {
                ent_drop_keep(k, i, in->size == ref.size);
                gone++;
            } else {
                i++;
            }
        }
    }
    if (n != NULL) {
        *n = gone;
    }
}

void hv_copykeep_drop_job(hv_copykeep_t *k, uint64_t job_id) {
    for (size_t i = 0; i < k->n;) {
        if (k->e[i].info.job_id == job_id) {
            ent_drop(k, i);
        } else {
            i++;
        }
    }
    spare_free(k); /* a job ended: its copies' size may not come again */
}

hv_err hv_copykeep_list(const hv_copykeep_t *k, hv_copykeep_info_t **out, size_t *n) {
    *out = NULL;
    *n = 0;
    if (k->n == 0) {
        return HV_OK;
    }
    hv_copykeep_info_t *v = hv_calloc(k->n, sizeof(*v));
    if (v == NULL) {
        return HV_ENOMEM;
    }
    for (size_t i = 0; i < k->n; i++) {
        v[i] = k->e[i].info;
    }
    *out = v;
    *n = k->n;
    return HV_OK;
}

void hv_copykeep_stats(const hv_copykeep_t *k, hv_copykeep_stats_t *out) {
    memset(out, 0, sizeof(*out));
    out->cap = k->cap;
    out->used = k->used;
    out->spare = k->spare_size;
    out->copies = k->n;
    out->refused = k->refused;
    out->evicted = k->evicted;
    out->bytes_in = k->bytes_in;
    out->bytes_out = k->bytes_out;
}
