/*
 * sampler: see sampler.h. The committed position (epoch, counters, bitmap) lives in buffers
 * registered with the state, so commit/restore/sync treat it like the model; the partition (the
 * order of the samples still to process, and how many windows of it were handed out) is
 * derived from it and lives here only. It is rebuilt whenever the committed position may have
 * changed under it, which is what keeps every rank on the same partition: all ranks derive it
 * from the same bitmap, with the same world size.
 */
#include "sampler.h"

#include <stdio.h>
#include <string.h>

#include "elastic_int.h"
#include "grow.h"
#include "log.h"
#include "mem.h"

/* The committed position: registered with the state as one buffer (8-byte fields). */
typedef struct sampler_pos_s {
    uint64_t epoch;
    uint64_t processed;  // distinct samples of this epoch committed
    uint64_t duplicates; // committed samples that were committed before in this epoch
    uint64_t checksum;   // sum of every committed index (duplicates included)
} sampler_pos_t;

struct hv_sampler_s {
    const hv_state_t *st; // the owner (it frees the sampler)
    hv_sampler_config_t cfg;
    char name[256];
    sampler_pos_t pos; // registered (state)
    uint64_t *bitmap;  // registered (state): bit i = sample i committed in this epoch
    size_t words;
    // The partition, derived from pos and bitmap (valid == 0: rebuild at the next call).
    int valid;
    int p_rank, p_size;
    uint64_t p_epoch;
    uint64_t *order; // the samples unprocessed at partition time, in permutation order
    uint64_t norder;
    uint64_t global;       // samples per window
    uint64_t cursor;       // windows handed out since the partition
    uint64_t step_samples; // samples in the window last handed out
    // Handed out by this rank since the last commit, and the windows' total over all ranks.
    uint64_t *pending;
    size_t npending, cappending;
    uint64_t pending_global;
    uint64_t *gather; // commit scratch
    size_t capgather;
    // Commits of this partition: the first window not committed yet, and whether a commit of
    // this partition exchanged what every rank handed out and found it equal to this rank's
    // windows (then later commits mark the windows without talking: see sampler_commit).
    uint64_t commit_cursor;
    int verified;
};

/* ---- arithmetic ------------------------------------------------------------------------------ */

uint64_t hv__sampler_global(const hv_sampler_config_t *cfg, int size) {
    return cfg->global_batch ? cfg->batch : (uint64_t)cfg->batch * (uint64_t)size;
}

void hv__sampler_share(uint64_t len, int size, int rank, uint64_t *off, uint64_t *n) {
    uint64_t base = len / (uint64_t)size, rem = len % (uint64_t)size, r = (uint64_t)rank;
    *n = base + (r < rem);
    *off = r * base + (r < rem ? r : rem);
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* xoshiro256** (Blackman and Vigna): 256 bits of state, fast, statistically strong. */
static uint64_t xoshiro_next(uint64_t s[4]) {
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Uniform in [0, range) without modulo bias: reject the lowest (2^64 mod range) values. */
static uint64_t xoshiro_below(uint64_t s[4], uint64_t range) {
    uint64_t threshold = (0 - range) % range;
    for (;;) {
        uint64_t r = xoshiro_next(s);
        if (r >= threshold) {
            return r % range;
        }
    }
}

void hv__sampler_permutation(uint64_t seed, uint64_t epoch, int shuffle, uint64_t n,
                             uint64_t *out) {
    for (uint64_t i = 0; i < n; i++) {
        out[i] = i;
    }
    if (!shuffle || n < 2) {
        return;
    }
    // The epoch is mixed in through splitmix64 so that neighbouring (seed, epoch) pairs give
    // unrelated streams.
    uint64_t x = seed;
    uint64_t e = epoch;
    x ^= splitmix64(&e);
    uint64_t s[4];
    for (int i = 0; i < 4; i++) {
        s[i] = splitmix64(&x);
    }
    for (uint64_t i = n - 1; i > 0; i--) { // Fisher-Yates
        uint64_t j = xoshiro_below(s, i + 1);
        uint64_t t = out[i];
        out[i] = out[j];
        out[j] = t;
    }
}

/* ---- lifetime -------------------------------------------------------------------------------- */

/* The sampler as a participant of its state (elastic_int.h): committed, rewound and freed with
 * it, and its uncommitted samples counted for a rollback. self is the hv_sampler_t. */
static hv_err sampler_commit(void *self, hv__engine_t *e, int size);
static void sampler_rewind(void *self);
static uint64_t sampler_pending(const void *self);
static void sampler_free(void *self);

static const hv__state_part_ops_t sampler_part_ops = {.commit = sampler_commit,
                                                      .rewind = sampler_rewind,
                                                      .pending = sampler_pending,
                                                      .free = sampler_free};

hv_err hv_sampler_create(hv_state_t *st, const char *name, const hv_sampler_config_t *cfg,
                         hv_sampler_t **out) {
    if (st == NULL || name == NULL || name[0] == '\0' || strlen(name) > 200 || cfg == NULL ||
        out == NULL || cfg->size < sizeof(hv_sampler_config_t) || cfg->num_samples == 0 ||
        cfg->batch == 0) {
        return HV_EINVAL;
    }
    if (hv__state_running(st)) {
        return HV_ESTATE;
    }
    if (cfg->num_samples > (UINT64_MAX >> 4) / sizeof(uint64_t)) {
        return HV_ETOOBIG;
    }
    hv_sampler_t *s = hv_calloc(1, sizeof(*s));
    if (s == NULL) {
        return HV_ENOMEM;
    }
    s->st = st;
    s->cfg = *cfg;
    s->cfg.size = sizeof(s->cfg);
    snprintf(s->name, sizeof(s->name), "%s", name);
    s->words = (size_t)((cfg->num_samples + 63) / 64);
    s->bitmap = hv_calloc(s->words, sizeof(uint64_t));
    if (s->bitmap == NULL) {
        hv_free(s);
        return HV_ENOMEM;
    }
    char pos_name[256], map_name[256];
    snprintf(pos_name, sizeof(pos_name), "hv.sampler.%s.pos", name);
    snprintf(map_name, sizeof(map_name), "hv.sampler.%s.processed", name);
    hv_err rc = hv__state_add_internal(st, pos_name, &s->pos, sizeof(s->pos));
    if (rc == HV_OK) {
        rc = hv__state_add_internal(st, map_name, s->bitmap, s->words * sizeof(uint64_t));
        if (rc == HV_OK) {
            rc = hv__state_add_part(st, &sampler_part_ops, s);
            if (rc != HV_OK) {
                hv__state_remove_internal(st, map_name);
            }
        }
        if (rc != HV_OK) {
            hv__state_remove_internal(st, pos_name); // nothing may point into a freed sampler
        }
    }
    if (rc != HV_OK) {
        sampler_free(s);
        return rc;
    }
    *out = s;
    return HV_OK;
}

static void sampler_free(void *self) {
    hv_sampler_t *s = self;
    if (s == NULL) {
        return;
    }
    hv_free(s->bitmap);
    hv_free(s->order);
    hv_free(s->pending);
    hv_free(s->gather);
    hv_free(s);
}

static void sampler_rewind(void *self) {
    hv_sampler_t *s = self;
    s->valid = 0;
    s->npending = 0;
    s->pending_global = 0;
    s->step_samples = 0;
}

/* ---- partition ------------------------------------------------------------------------------- */

/* Rebuilds the partition: the unprocessed samples of the epoch in permutation order. */
static hv_err sampler_partition(hv_sampler_t *s, int rank, int size) {
    uint64_t n = s->cfg.num_samples;
    if (s->order == NULL) {
        s->order = hv_malloc((size_t)n * sizeof(uint64_t));
        if (s->order == NULL) {
            return HV_ENOMEM;
        }
    }
    hv__sampler_permutation(s->cfg.seed, s->pos.epoch, s->cfg.shuffle, n, s->order);
    uint64_t k = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t x = s->order[i];
        if (!(s->bitmap[x / 64] >> (x % 64) & 1)) {
            s->order[k++] = x;
        }
    }
    s->norder = k;
    s->cursor = 0;
    s->commit_cursor = 0;
    s->verified = 0;
    s->global = hv__sampler_global(&s->cfg, size);
    s->p_rank = rank;
    s->p_size = size;
    s->p_epoch = s->pos.epoch;
    s->valid = 1;
    HV_LOG(HV_LOG_DEBUG, "sampler", "HV-SAMPLER-PARTITION",
           "sampler '%s' rank %d of %d: epoch %llu, %llu of %llu samples left, %llu per step",
           s->name, rank, size, (unsigned long long)s->pos.epoch, (unsigned long long)k,
           (unsigned long long)n, (unsigned long long)s->global);
    return HV_OK;
}

hv_err hv_sampler_next(hv_sampler_t *s, uint64_t *idx, size_t cap, size_t *n, int *epoch_end) {
    if (s == NULL || n == NULL || epoch_end == NULL || (idx == NULL && cap > 0)) {
        return HV_EINVAL;
    }
    int rank = 0, size = 0;
    HV_TRY(hv__state_world(s->st, NULL, &rank, &size));
    if (!s->valid || s->p_rank != rank || s->p_size != size || s->p_epoch != s->pos.epoch) {
        // Samples handed out under the old partition were not committed: they are unprocessed
        // in the bitmap and come out again.
        s->npending = 0;
        s->pending_global = 0;
        HV_TRY(sampler_partition(s, rank, size));
    }
    uint64_t full_off, full;
    hv__sampler_share(s->global, size, rank, &full_off, &full);
    if (cap < full) {
        return HV_ETOOBIG;
    }
    uint64_t start = s->cursor * s->global;
    if (start >= s->norder) {
        *n = 0;
        *epoch_end = 1;
        s->step_samples = 0;
        return HV_OK;
    }
    uint64_t len = s->norder - start < s->global ? s->norder - start : s->global;
    uint64_t off, cnt;
    hv__sampler_share(len, size, rank, &off, &cnt);
    if (s->npending + cnt > s->cappending) {
        size_t c = s->cappending ? s->cappending : 256;
        while (c < s->npending + cnt) {
            c *= 2;
        }
        uint64_t *p = hv_realloc(s->pending, c * sizeof(*p));
        if (p == NULL) {
            return HV_ENOMEM;
        }
        s->pending = p;
        s->cappending = c;
    }
    if (cnt > 0) {
        memcpy(idx, s->order + start + off, (size_t)cnt * sizeof(uint64_t));
        memcpy(s->pending + s->npending, idx, (size_t)cnt * sizeof(uint64_t));
    }
    s->npending += (size_t)cnt;
    s->pending_global += len;
    s->cursor++;
    s->step_samples = len;
    *n = (size_t)cnt;
    *epoch_end = 0;
    return HV_OK;
}

uint64_t hv_sampler_step_samples(const hv_sampler_t *s) { return s != NULL ? s->step_samples : 0; }

static uint64_t sampler_pending(const void *self) {
    const hv_sampler_t *s = self;
    return s != NULL ? s->pending_global : 0;
}

hv_err hv_sampler_next_epoch(hv_sampler_t *s) {
    if (s == NULL) {
        return HV_EINVAL;
    }
    // What was handed out and not committed belongs to the finished epoch: dropped.
    s->pos.epoch++;
    s->pos.processed = 0;
    s->pos.duplicates = 0;
    s->pos.checksum = 0;
    memset(s->bitmap, 0, s->words * sizeof(uint64_t));
    sampler_rewind(s);
    hv__grow_epoch(s->pos.epoch);
    return HV_OK;
}

hv_err hv_sampler_stats(const hv_sampler_t *s, hv_sampler_stats_t *out) {
    if (s == NULL || out == NULL || out->size < sizeof(hv_sampler_stats_t)) {
        return HV_EINVAL;
    }
    out->epoch = s->pos.epoch;
    out->processed = s->pos.processed;
    out->duplicates = s->pos.duplicates;
    out->remaining = s->cfg.num_samples - s->pos.processed;
    out->checksum = s->pos.checksum;
    return HV_OK;
}

/* ---- commit ---------------------------------------------------------------------------------- */

/* Marks sample x committed. */
static void sampler_mark(hv_sampler_t *s, uint64_t x) {
    uint64_t bit = 1ull << (x % 64);
    if (s->bitmap[x / 64] & bit) {
        s->pos.duplicates++;
    } else {
        s->bitmap[x / 64] |= bit;
        s->pos.processed++;
    }
    s->pos.checksum += x;
}

/* The windows handed out since the last commit: order[*lo, *hi). */
static void sampler_window(const hv_sampler_t *s, uint64_t *lo, uint64_t *hi) {
    uint64_t a = s->commit_cursor * s->global, b = s->cursor * s->global;
    *lo = a < s->norder ? a : s->norder;
    *hi = b < s->norder ? b : s->norder;
}

/* The exchange: every rank's handed-out indices (allgather with per-rank counts) are marked, and
 * the result must be the windows this rank derived itself (every rank took its share of the same
 * windows of the same partition); else the ranks disagree about the sampler (HV_EPROTO). */
static hv_err sampler_exchange(hv_sampler_t *s, hv__engine_t *e, int size) {
    size_t *counts = hv_calloc((size_t)size, sizeof(*counts));
    if (counts == NULL) {
        return HV_ENOMEM;
    }
    // Every rank handed out its share of the same windows, so their total is the guess; a rank
    // that disagrees makes every rank get HV_ETOOBIG with the true counts, and all retry.
    size_t want = (size_t)s->pending_global + 1;
    hv_err rc = HV_OK;
    size_t total = 0;
    for (int tries = 0; tries < 2; tries++) {
        if (want > s->capgather) {
            uint64_t *g = hv_realloc(s->gather, want * sizeof(*g));
            if (g == NULL) {
                rc = HV_ENOMEM;
                break;
            }
            s->gather = g;
            s->capgather = want;
        }
        hv__op_desc_t d = {.kind = HV__OP_ALLGATHER,
                           .in = s->pending,
                           .out = s->gather,
                           .count = s->npending,
                           .dtype = HV_INT64,
                           .out_cap = s->capgather,
                           .counts = counts};
        rc = hv__engine_run(e, &d);
        total = 0;
        for (int r = 0; r < size; r++) {
            total += counts[r];
        }
        if (rc != HV_ETOOBIG) {
            break;
        }
        want = total + 1;
    }
    hv_free(counts);
    if (rc != HV_OK) {
        return rc;
    }
    uint64_t n = s->cfg.num_samples;
    uint64_t dup0 = s->pos.duplicates;
    for (size_t i = 0; i < total; i++) {
        uint64_t x = s->gather[i];
        if (x >= n) {
            HV_LOG(HV_LOG_ERROR, "sampler", "HV-SAMPLER-RANGE",
                   "sampler '%s': a rank committed sample %llu of %llu: the ranks disagree about "
                   "the sampler's configuration",
                   s->name, (unsigned long long)x, (unsigned long long)n);
            return HV_EPROTO;
        }
        sampler_mark(s, x);
    }
    if (s->p_size != size) {
        return HV_OK; // (a partition of another world: nothing to compare with)
    }
    uint64_t lo, hi;
    sampler_window(s, &lo, &hi);
    int same = total == hi - lo && s->pos.duplicates == dup0;
    for (uint64_t i = lo; same && i < hi; i++) {
        uint64_t x = s->order[i];
        same = (s->bitmap[x / 64] >> (x % 64) & 1) != 0;
    }
    if (!same) {
        HV_LOG(HV_LOG_ERROR, "sampler", "HV-SAMPLER-MISMATCH",
               "sampler '%s': what the ranks handed out since the last commit (%zu samples) is not "
               "what this rank's partition holds (%llu samples; epoch %llu, %llu per step, %d "
               "ranks): the ranks disagree about the sampler's configuration (data set size, "
               "seed, batch) or about how many steps they took",
               s->name, total, (unsigned long long)(hi - lo), (unsigned long long)s->pos.epoch,
               (unsigned long long)s->global, size);
        return HV_EPROTO;
    }
    s->verified = 1;
    return HV_OK;
}

/* Commit: the windows handed out since the last commit become processed. The first commit of a
 * partition exchanges what every rank handed out and checks it against this rank's windows;
 * once that agreed, every rank derives the same windows from the same partition (the same
 * bitmap, world and configuration), so later commits of the partition mark them locally, with
 * no collective: a step's commit then costs no round trip. */
static hv_err sampler_commit(void *self, hv__engine_t *e, int size) {
    hv_sampler_t *s = self;
    if (s->pending_global > 0) {
        if (!s->verified || !s->valid || s->p_size != size) {
            HV_TRY(sampler_exchange(s, e, size));
        } else {
            uint64_t lo, hi;
            sampler_window(s, &lo, &hi);
            for (uint64_t i = lo; i < hi; i++) {
                sampler_mark(s, s->order[i]);
            }
        }
    }
    s->commit_cursor = s->cursor;
    s->npending = 0;
    s->pending_global = 0;
    return HV_OK;
}
