/*
 * elastic: the elastic state and the retry loop of include/hv/elastic.h. A state is a list of
 * registered buffers (the user's, and the samplers' positions) with an in-memory snapshot of
 * each: commit copies buffers to snapshots, restore copies back, sync broadcasts every buffer
 * from rank 0 and snapshots the result. hv_elastic_run wraps the training function: sync, run;
 * on a peer's failure restore, re-join, sync, run again; on a membership change seen at a
 * commit re-join without restoring; on success report Done.
 *
 * Membership changes reach a worker as pushes (member.c records the newest pushed generation);
 * commit turns them into a decision every rank takes at the same commit: every check_every
 * commits of a round the ranks allreduce (MAX) the newest generation each has seen pushed, and
 * if it is newer than the world's, every rank returns HV_ERESET. A failure needs no check: the
 * member aborts the world when the push arrives, and a dead peer fails the data plane anyway,
 * whichever comes first.
 *
 * It is not the membership (member.c), the sampler's arithmetic (sampler.c) or the transport.
 * The collectives here go straight to the world's engine (hv__engine_run), so a state bound to
 * a test's own member (elastic_int.h) works the same as one on the process's membership (hv.c).
 */
#include "elastic_int.h"

#include <inttypes.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "copier.h"
#include "figures.h"
#include "log.h"
#include "mem.h"
#include "process.h"
#include "util.h"

#define STATE_NAME_MAX 255
#define STATE_RESET_FNS 16
#define STATE_SYNC_PACK_MAX 4096     // buffers up to this size are synced together
#define COPY_PIECE ((size_t)1 << 20) // a copy is filled from the snapshots in pieces of this

typedef struct state_buf_s {
    char name[STATE_NAME_MAX + 1];
    void *buf; // borrowed (the user's, or a sampler's)
    size_t bytes;
    void *snap; // owned: the last committed copy (NULL before the first snapshot)
} state_buf_t;

struct hv_state_s {
    state_buf_t *bufs; // registration order (the same on every rank)
    int nbufs, capbufs;
    struct {
        const hv__state_part_ops_t *ops;
        void *self; // owned: freed through ops->free
    } * parts;      // the participants (samplers)
    int nparts, capparts;
    struct {
        hv_reset_fn fn;
        void *ud;
    } resets[STATE_RESET_FNS];
    int nresets;
    hv__member_t *bound;       // borrowed: a test's member, NULL = the process's
    int running;               // inside hv_elastic_run
    int have_snapshot;         // every buffer has a snapshot
    int removed;               // the head removed this worker (drain)
    uint32_t resets_seen;      // rounds after the first (hv_state_resets)
    uint32_t rollbacks;        // of those, after a restore
    uint64_t commits;          // commits whose snapshot was taken (a reset may have followed)
    uint64_t round_commits;    // commits in the current round (the check cadence)
    uint32_t round_generation; // the round round_commits counts in
    hv__copier_t *copier;      // owned while hv_elastic_run runs: copies to the head (NULL: off)
    hv__member_t *copy_member; // borrowed while the copier runs: where its copies go
    /* The copy in flight is filled from the snapshots, in pieces (copy_fill): by the copier's
     * thread, or by the training thread when it must write a snapshot before the copier got to
     * them. A piece is claimed by fill_next and counted in fill_done once copied; while
     * fill_done < nfill the snapshots are lent to the copy and nothing may write them. */
    struct copy_piece_s {
        unsigned char *dst;
        const unsigned char *src;
        size_t n;
    } * fill; // owned (kept from copy to copy)
    size_t nfill, capfill;
    atomic_size_t fill_next, fill_done;
};

/* ---- registration ---------------------------------------------------------------------------- */

hv_err hv_state_create(hv_state_t **out) {
    if (out == NULL) {
        return HV_EINVAL;
    }
    hv_state_t *st = hv_calloc(1, sizeof(*st));
    if (st == NULL) {
        return HV_ENOMEM;
    }
    *out = st;
    return HV_OK;
}

void hv_state_destroy(hv_state_t *st) {
    if (st == NULL) {
        return;
    }
    for (int i = 0; i < st->nparts; i++) {
        st->parts[i].ops->free(st->parts[i].self);
    }
    for (int i = 0; i < st->nbufs; i++) {
        hv_free(st->bufs[i].snap);
    }
    hv_free(st->fill);
    hv_free(st->parts);
    hv_free(st->bufs);
    hv_free(st);
}

hv_err hv__state_add_internal(hv_state_t *st, const char *name, void *buf, size_t bytes) {
    if (st == NULL || name == NULL || name[0] == '\0' || buf == NULL || bytes == 0 ||
        strlen(name) > STATE_NAME_MAX) {
        return HV_EINVAL;
    }
    if (st->running) {
        return HV_ESTATE;
    }
    for (int i = 0; i < st->nbufs; i++) {
        if (strcmp(st->bufs[i].name, name) == 0) {
            return HV_EEXIST;
        }
    }
    if (st->nbufs == st->capbufs) {
        int cap = st->capbufs ? st->capbufs * 2 : 8;
        state_buf_t *b = hv_realloc(st->bufs, (size_t)cap * sizeof(*b));
        if (b == NULL) {
            return HV_ENOMEM;
        }
        st->bufs = b;
        st->capbufs = cap;
    }
    state_buf_t *b = &st->bufs[st->nbufs++];
    memset(b, 0, sizeof(*b));
    snprintf(b->name, sizeof(b->name), "%s", name);
    b->buf = buf;
    b->bytes = bytes;
    st->have_snapshot = 0; // the new buffer has none yet
    return HV_OK;
}

static void copy_fill_finish(hv_state_t *st);

void hv__state_remove_internal(hv_state_t *st, const char *name) {
    copy_fill_finish(st); /* a copy may still read this buffer's snapshot */
    for (int i = 0; i < st->nbufs; i++) {
        if (strcmp(st->bufs[i].name, name) == 0) {
            hv_free(st->bufs[i].snap);
            memmove(&st->bufs[i], &st->bufs[i + 1],
                    (size_t)(st->nbufs - i - 1) * sizeof(*st->bufs));
            st->nbufs--;
            return;
        }
    }
}

hv_err hv_state_add_buffer(hv_state_t *st, const char *name, void *buf, size_t bytes) {
    return hv__state_add_internal(st, name, buf, bytes);
}

hv_err hv_state_add_u64(hv_state_t *st, const char *name, uint64_t *value) {
    return hv__state_add_internal(st, name, value, sizeof(*value));
}

hv_err hv__state_add_part(hv_state_t *st, const hv__state_part_ops_t *ops, void *self) {
    if (st->nparts == st->capparts) {
        int cap = st->capparts ? st->capparts * 2 : 4;
        void *v = hv_realloc(st->parts, (size_t)cap * sizeof(*st->parts));
        if (v == NULL) {
            return HV_ENOMEM;
        }
        st->parts = v;
        st->capparts = cap;
    }
    st->parts[st->nparts].ops = ops;
    st->parts[st->nparts].self = self;
    st->nparts++;
    return HV_OK;
}

hv_err hv_state_on_reset(hv_state_t *st, hv_reset_fn fn, void *ud) {
    if (st == NULL || fn == NULL) {
        return HV_EINVAL;
    }
    if (st->nresets == STATE_RESET_FNS) {
        return HV_ETOOBIG;
    }
    st->resets[st->nresets].fn = fn;
    st->resets[st->nresets].ud = ud;
    st->nresets++;
    return HV_OK;
}

void hv__state_bind(hv_state_t *st, hv__member_t *m) { st->bound = m; }

hv__member_t *hv__state_member(const hv_state_t *st) {
    return st->bound != NULL ? st->bound : hv__process_member();
}

hv_err hv__state_world(const hv_state_t *st, hv__engine_t **e, int *rank, int *size) {
    hv__member_t *m = hv__state_member(st);
    const hv__rdzv_assignment_t *a = m != NULL ? hv__member_assignment(m) : NULL;
    hv__engine_t *eng = m != NULL ? hv__member_engine(m) : NULL;
    if (a == NULL || eng == NULL) {
        return HV_ESTATE;
    }
    if (e != NULL) {
        *e = eng;
    }
    if (rank != NULL) {
        *rank = a->rank;
    }
    if (size != NULL) {
        *size = a->size;
    }
    return HV_OK;
}

int hv__state_running(const hv_state_t *st) { return st->running; }

int hv_state_removed(const hv_state_t *st) { return st != NULL && st->removed; }
uint32_t hv_state_resets(const hv_state_t *st) { return st != NULL ? st->resets_seen : 0; }
uint32_t hv_state_rollbacks(const hv_state_t *st) { return st != NULL ? st->rollbacks : 0; }
uint64_t hv_state_commits(const hv_state_t *st) { return st != NULL ? st->commits : 0; }

/* ---- checkpoint files ------------------------------------------------------------------------ */

/* File: "HVSTATE2" | u32 count | per buffer: u16 name length, name, u64 bytes, data | u64
 * checksum of everything before it (ckpt_sum). Little-endian as the machine writes it (a
 * checkpoint is read back by the same job on the same kind of machine). Files of the first
 * format, "HVSTATE1" with a byte-wise FNV-1a trailer, are still read. */
#define CKPT_MAGIC "HVSTATE2"
#define CKPT_MAGIC_V1 "HVSTATE1"
#define CKPT_MAX ((size_t)1 << 36)
#define CKPT_FNV_BASIS 1469598103934665603ULL
#define CKPT_FNV_PRIME 1099511628211ULL

static uint64_t ckpt_fnv(uint64_t h, const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        h = (h ^ p[i]) * CKPT_FNV_PRIME;
    }
    return h;
}

/* The trailer's checksum: four independent lanes over 8-byte words (each word xored in,
 * multiplied by a 64-bit odd constant, its high half folded down), then the lanes, the tail and
 * the length through FNV-1a. It finds truncation and damage as the byte-wise FNV-1a did (any
 * change to one word changes its lane), at memory speed: the lanes run in parallel (64 MiB:
 * about 10 ms, against 80-95 ms byte by byte on the copier thread of every copy; issue 28 §3).
 * Not a digest against tampering: copies are checked with SHA-256 on the wire. */
static uint64_t ckpt_sum(const unsigned char *p, size_t n) {
    const uint64_t m = 0x9E3779B97F4A7C15ULL;
    uint64_t h[4] = {CKPT_FNV_BASIS, CKPT_FNV_BASIS ^ 1, CKPT_FNV_BASIS ^ 2, CKPT_FNV_BASIS ^ 3};
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        for (int l = 0; l < 4; l++) {
            uint64_t w;
            memcpy(&w, p + i + 8 * (size_t)l, 8);
            h[l] = (h[l] ^ w) * m;
            h[l] ^= h[l] >> 32;
        }
    }
    uint64_t r = CKPT_FNV_BASIS;
    r = ckpt_fnv(r, (const unsigned char *)h, sizeof(h));
    r = ckpt_fnv(r, p + i, n - i);
    uint64_t len = n;
    return ckpt_fnv(r, (const unsigned char *)&len, sizeof(len));
}

/* Writes the checksum trailer of a serialised state of len bytes. */
static void ckpt_seal(unsigned char *buf, size_t len) {
    uint64_t h = ckpt_sum(buf, len - 8);
    memcpy(buf + len - 8, &h, 8);
}

/* Is the trailer of this image (len >= 16 bytes, its magic checked) right for its format? */
static int ckpt_sealed(const unsigned char *b, size_t len) {
    uint64_t h = 0;
    memcpy(&h, b + len - 8, 8);
    if (memcmp(b, CKPT_MAGIC_V1, 8) == 0) {
        return h == ckpt_fnv(CKPT_FNV_BASIS, b, len - 8);
    }
    return h == ckpt_sum(b, len - 8);
}

/* The size of the state in the checkpoint format. */
static size_t state_serialized_size(const hv_state_t *st) {
    size_t total = 8 + 4 + 8;
    for (int i = 0; i < st->nbufs; i++) {
        total += 2 + strlen(st->bufs[i].name) + 8 + st->bufs[i].bytes;
    }
    return total;
}

/* The state in the checkpoint format (the last commit when there is one) into out, of
 * state_serialized_size bytes; the checksum trailer is left 0 (ckpt_seal). */
/* The checkpoint format's framing: the magic and the count at out, returning where the first
 * entry goes; an entry's name and size at p, returning where its data goes. */
static unsigned char *ckpt_frame_head(unsigned char *out, int nbufs) {
    uint32_t n = (uint32_t)nbufs;
    memcpy(out, CKPT_MAGIC, 8);
    memcpy(out + 8, &n, 4);
    return out + 12;
}

static unsigned char *ckpt_frame_entry(unsigned char *p, const state_buf_t *b) {
    uint16_t nl = (uint16_t)strlen(b->name);
    uint64_t bytes = b->bytes;
    memcpy(p, &nl, 2);
    memcpy(p + 2, b->name, nl);
    memcpy(p + 2 + nl, &bytes, 8);
    return p + 2 + nl + 8;
}

static void state_serialize_into(const hv_state_t *st, unsigned char *out) {
    unsigned char *p = ckpt_frame_head(out, st->nbufs);
    for (int i = 0; i < st->nbufs; i++) {
        const state_buf_t *b = &st->bufs[i];
        p = ckpt_frame_entry(p, b);
        /* the last commit when there is one: what a restarted job must resume from */
        memcpy(p, st->have_snapshot && b->snap != NULL ? b->snap : b->buf, b->bytes);
        p += b->bytes;
    }
    memset(p, 0, 8);
}

hv_err hv_state_save(const hv_state_t *st, const char *path) {
    if (st == NULL || path == NULL || path[0] == '\0') {
        return HV_EINVAL;
    }
    size_t total = state_serialized_size(st);
    unsigned char *out = hv_malloc(total);
    if (out == NULL) {
        return HV_ENOMEM;
    }
    state_serialize_into(st, out);
    ckpt_seal(out, total);
    hv_err rc = hv_write_file_atomic(path, out, total, 0600);
    hv_free(out);
    if (rc != HV_OK) {
        HV_LOG(HV_LOG_WARN, "elastic", "HV-STATE-SAVE", "writing the checkpoint %s failed: %s",
               path, hv_strerror(rc));
    }
    return rc;
}

static hv_err state_deserialize(hv_state_t *st, const char *data, size_t len, const char *what);

hv_err hv_state_load(hv_state_t *st, const char *path) {
    if (st == NULL || path == NULL || path[0] == '\0') {
        return HV_EINVAL;
    }
    if (st->running) {
        return HV_ESTATE;
    }
    char *data = NULL;
    size_t len = 0;
    hv_err rc = hv_read_file(path, CKPT_MAX, &data, &len);
    if (rc != HV_OK) {
        return rc; /* HV_ENOTFOUND: no checkpoint yet */
    }
    rc = state_deserialize(st, data, len, path);
    hv_free(data);
    return rc;
}

/* Copies a checkpoint image (len bytes) into the registered buffers; what: its name for the log.
 * Checks everything before copying anything: HV_EINVAL (logged) changes nothing. */
static hv_err state_deserialize(hv_state_t *st, const char *data, size_t len, const char *what) {
    const unsigned char *b = (const unsigned char *)data, *end = b + len;
    const char *why = NULL;
    uint32_t n = 0;
    if (len < 20 || (memcmp(b, CKPT_MAGIC, 8) != 0 && memcmp(b, CKPT_MAGIC_V1, 8) != 0)) {
        why = "not an hv checkpoint";
    } else if (!ckpt_sealed(b, len)) {
        why = "checksum mismatch (a truncated or damaged file)";
    } else {
        memcpy(&n, b + 8, 4);
        if (n != (uint32_t)st->nbufs) {
            why = "it holds another set of buffers";
        }
    }
    const unsigned char *p = b + 12;
    end -= 8;
    /* First check every entry against the registered buffers, then copy: a mismatch changes
     * nothing. */
    for (int pass = 0; pass < 2 && why == NULL; pass++) {
        p = b + 12;
        for (uint32_t i = 0; i < n && why == NULL; i++) {
            uint16_t nl;
            uint64_t bytes;
            if (end - p < 2 || (memcpy(&nl, p, 2), end - p < 2 + (ptrdiff_t)nl + 8)) {
                why = "truncated entry";
                break;
            }
            memcpy(&bytes, p + 2 + nl, 8);
            const unsigned char *d = p + 2 + nl + 8;
            state_buf_t *sb = NULL;
            for (int k = 0; k < st->nbufs; k++) {
                if (strlen(st->bufs[k].name) == nl && memcmp(st->bufs[k].name, p + 2, nl) == 0) {
                    sb = &st->bufs[k];
                }
            }
            if (sb == NULL || bytes != sb->bytes || (uint64_t)(end - d) < bytes) {
                why = sb == NULL ? "a buffer name this state does not have"
                                 : "a buffer of another size";
                break;
            }
            if (pass == 1) {
                memcpy(sb->buf, d, sb->bytes);
            }
            p = d + bytes;
        }
    }
    if (why != NULL) {
        HV_LOG(HV_LOG_WARN, "elastic", "HV-STATE-LOAD", "checkpoint %s not loaded: %s", what, why);
        return HV_EINVAL;
    }
    st->have_snapshot = 0; /* the next sync or commit snapshots what was loaded */
    return HV_OK;
}

/* ---- snapshot, restore ----------------------------------------------------------------------- */

/* Copies every buffer into its snapshot (allocated on first use), once a copy in flight has
 * taken what it needs from the snapshots. */
static hv_err state_snapshot(hv_state_t *st) {
    copy_fill_finish(st);
    for (int i = 0; i < st->nbufs; i++) {
        state_buf_t *b = &st->bufs[i];
        if (b->snap == NULL && (b->snap = hv_malloc(b->bytes)) == NULL) {
            HV_LOG(HV_LOG_ERROR, "elastic", "HV-STATE-NOMEM",
                   "cannot allocate the %zu-byte snapshot of '%s'", b->bytes, b->name);
            return HV_ENOMEM;
        }
        memcpy(b->snap, b->buf, b->bytes);
    }
    st->have_snapshot = 1;
    return HV_OK;
}

static void state_rewind_parts(hv_state_t *st) {
    for (int i = 0; i < st->nparts; i++) {
        st->parts[i].ops->rewind(st->parts[i].self);
    }
}

hv_err hv_state_restore(hv_state_t *st) {
    if (st == NULL) {
        return HV_EINVAL;
    }
    if (!st->have_snapshot) {
        return HV_ESTATE;
    }
    for (int i = 0; i < st->nbufs; i++) {
        memcpy(st->bufs[i].buf, st->bufs[i].snap, st->bufs[i].bytes);
    }
    state_rewind_parts(st);
    return HV_OK;
}

/* ---- sync ------------------------------------------------------------------------------------ */

/* FNV-1a over the registered names and sizes: what every rank must agree on. */
static uint64_t layout_hash(const hv_state_t *st) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < st->nbufs; i++) {
        const unsigned char *p = (const unsigned char *)st->bufs[i].name;
        for (size_t k = 0; k <= strlen(st->bufs[i].name); k++) { // the NUL separates names
            h = (h ^ p[k]) * 1099511628211ull;
        }
        uint64_t b = st->bufs[i].bytes;
        for (int k = 0; k < 8; k++) {
            h = (h ^ ((b >> (8 * k)) & 0xff)) * 1099511628211ull;
        }
    }
    return h;
}

/* This rank's layout as text, "name\tbytes\n" per buffer (owned). */
static char *layout_text(const hv_state_t *st, size_t *len) {
    size_t cap = 1;
    for (int i = 0; i < st->nbufs; i++) {
        cap += strlen(st->bufs[i].name) + 24;
    }
    char *t = hv_malloc(cap);
    if (t == NULL) {
        return NULL;
    }
    size_t k = 0;
    for (int i = 0; i < st->nbufs; i++) {
        k += (size_t)snprintf(t + k, cap - k, "%s\t%zu\n", st->bufs[i].name, st->bufs[i].bytes);
    }
    *len = k;
    return t;
}

/* Entry i of a layout text (name and size), 0 when there is none. */
static int layout_entry(const char *t, size_t len, int i, char *name, size_t cap, size_t *bytes) {
    size_t p = 0;
    for (int k = 0; k < i && p < len; p++) {
        k += t[p] == '\n';
    }
    if (p >= len) {
        return 0;
    }
    size_t q = p;
    while (q < len && t[q] != '\t') {
        q++;
    }
    size_t n = q - p < cap - 1 ? q - p : cap - 1;
    memcpy(name, t + p, n);
    name[n] = '\0';
    *bytes = 0;
    for (q++; q < len && t[q] >= '0' && t[q] <= '9'; q++) {
        *bytes = *bytes * 10 + (size_t)(t[q] - '0');
    }
    return 1;
}

/* Every rank has the layout texts of all (rank order): log the first difference with rank 0. */
static void layout_explain(const char *all, const size_t *counts, int size, int me) {
    size_t off0 = 0, off = counts[0];
    for (int r = 1; r < size; r++) {
        const char *t0 = all + off0, *t = all + off;
        for (int i = 0;; i++) {
            char n0[STATE_NAME_MAX + 1], n[STATE_NAME_MAX + 1];
            size_t b0 = 0, b = 0;
            int h0 = layout_entry(t0, counts[0], i, n0, sizeof(n0), &b0);
            int h = layout_entry(t, counts[r], i, n, sizeof(n), &b);
            if (!h0 && !h) {
                break;
            }
            if (h0 != h || strcmp(n0, n) != 0 || b0 != b) {
                char a0[STATE_NAME_MAX + 64], a[STATE_NAME_MAX + 64];
                snprintf(a0, sizeof(a0), h0 ? "'%s' (%zu bytes)" : "nothing", n0, b0);
                snprintf(a, sizeof(a), h ? "'%s' (%zu bytes)" : "nothing", n, b);
                HV_LOG(HV_LOG_ERROR, "elastic", "HV-STATE-LAYOUT",
                       "rank %d: the ranks registered different state: buffer #%d is %s on rank "
                       "0 but %s on rank %d (every rank must register the same names with the "
                       "same sizes in the same order)",
                       me, i, a0, a, r);
                return;
            }
        }
        off += counts[r];
    }
}

/* Checks that every rank registered the same buffers (one allgather of a hash; on a mismatch a
 * second one of the layouts, to name the difference). HV_EPROTO on every rank when they differ. */
static hv_err layout_check(hv_state_t *st, hv__engine_t *e, int rank, int size) {
    uint64_t *hs = hv_calloc((size_t)size, sizeof(*hs));
    if (hs == NULL) {
        return HV_ENOMEM;
    }
    uint64_t h = layout_hash(st);
    hv__op_desc_t d = {.kind = HV__OP_ALLGATHER,
                       .in = &h,
                       .out = hs,
                       .count = 1,
                       .dtype = HV_INT64,
                       .out_cap = (size_t)size};
    hv_err rc = hv__engine_run(e, &d);
    int same = 1;
    for (int r = 0; rc == HV_OK && r < size; r++) {
        same &= hs[r] == hs[0];
    }
    hv_free(hs);
    if (rc != HV_OK || same) {
        return rc;
    }
    size_t len = 0, *counts = hv_calloc((size_t)size, sizeof(*counts));
    char *mine = layout_text(st, &len), *all = NULL;
    size_t cap = len * (size_t)size + 1;
    for (int tries = 0; rc == HV_OK && tries < 2; tries++) {
        hv_free(all);
        all = hv_malloc(cap);
        if (mine == NULL || counts == NULL || all == NULL) {
            rc = HV_ENOMEM; // the others fail the collective: peers see the error too
            break;
        }
        d = (hv__op_desc_t){.kind = HV__OP_ALLGATHER,
                            .in = mine,
                            .out = all,
                            .count = len,
                            .dtype = HV_UINT8,
                            .out_cap = cap,
                            .counts = counts};
        rc = hv__engine_run(e, &d);
        if (rc == HV_ETOOBIG) {
            cap = 1;
            for (int r = 0; r < size; r++) {
                cap += counts[r];
            }
            rc = HV_OK;
            continue;
        }
        if (rc == HV_OK) {
            layout_explain(all, counts, size, rank);
            rc = HV_EPROTO;
        }
        break;
    }
    hv_free(all);
    hv_free(mine);
    hv_free(counts);
    return rc;
}

/* Rank 0's buffers to every rank: one negotiation round for all, then one pipelined ring
 * broadcast per large buffer (the ring relays each piece as it arrives, so a large state moves
 * at link bandwidth) and one for all the small ones together (the step counters, the commit
 * count, a sampler's position: each would otherwise cost a pass around the ring of its own).
 * Every rank has the same layout (layout_check), so every rank packs the same way. */
static hv_err sync_broadcast(hv_state_t *st, hv__engine_t *e) {
    size_t small_bytes = 0;
    int nsmall = 0;
    for (int i = 0; i < st->nbufs; i++) {
        if (st->bufs[i].bytes <= STATE_SYNC_PACK_MAX) {
            small_bytes += st->bufs[i].bytes;
            nsmall++;
        }
    }
    int pack = nsmall > 1;
    hv__op_desc_t *ds = hv_calloc((size_t)st->nbufs, sizeof(*ds));
    char(*names)[32] = hv_calloc((size_t)st->nbufs, sizeof(*names));
    unsigned char *packed = pack ? hv_malloc(small_bytes) : NULL;
    if (ds == NULL || names == NULL || (pack && packed == NULL)) {
        hv_free(ds);
        hv_free(names);
        hv_free(packed);
        return HV_ENOMEM;
    }
    size_t nops = 0, off = 0;
    for (int i = 0; i < st->nbufs; i++) {
        state_buf_t *b = &st->bufs[i];
        if (pack && b->bytes <= STATE_SYNC_PACK_MAX) {
            memcpy(packed + off, b->buf, b->bytes);
            off += b->bytes;
            continue;
        }
        snprintf(names[nops], sizeof(names[nops]), "hv.state.sync.%d", i);
        ds[nops] = (hv__op_desc_t){.kind = HV__OP_BROADCAST,
                                   .name = names[nops],
                                   .in = b->buf,
                                   .out = b->buf,
                                   .count = b->bytes,
                                   .dtype = HV_UINT8,
                                   .root = 0};
        nops++;
    }
    if (pack) {
        ds[nops++] = (hv__op_desc_t){.kind = HV__OP_BROADCAST,
                                     .name = "hv.state.sync.small",
                                     .in = packed,
                                     .out = packed,
                                     .count = small_bytes,
                                     .dtype = HV_UINT8,
                                     .root = 0};
    }
    hv_handle_t h = 0;
    hv_err rc = hv__engine_submit(e, ds, nops, &h);
    if (rc == HV_OK) {
        rc = hv__engine_wait(e, h);
    }
    off = 0;
    for (int i = 0; rc == HV_OK && pack && i < st->nbufs; i++) {
        state_buf_t *b = &st->bufs[i];
        if (b->bytes <= STATE_SYNC_PACK_MAX) {
            memcpy(b->buf, packed + off, b->bytes);
            off += b->bytes;
        }
    }
    hv_free(ds);
    hv_free(names);
    hv_free(packed);
    return rc;
}

hv_err hv_state_sync(hv_state_t *st) {
    if (st == NULL) {
        return HV_EINVAL;
    }
    hv__engine_t *e = NULL;
    int rank = 0, size = 0;
    hv_err rc = hv__state_world(st, &e, &rank, &size);
    if (rc != HV_OK) {
        return rc;
    }
    if (size > 1) {
        HV_TRY(layout_check(st, e, rank, size));
    }
    if (size > 1 && st->nbufs > 0) {
        HV_TRY(sync_broadcast(st, e));
    }
    HV_TRY(state_snapshot(st));
    state_rewind_parts(st);
    return HV_OK;
}

/* ---- copies outside the workers (issue 15 §1) ------------------------------------------------ */

/* Copies the pieces of the copy in flight that no one has claimed yet (either thread). */
static void copy_fill_work(hv_state_t *st) {
    for (;;) {
        size_t i = atomic_fetch_add(&st->fill_next, 1);
        if (i >= st->nfill) {
            return;
        }
        memcpy(st->fill[i].dst, st->fill[i].src, st->fill[i].n);
        atomic_fetch_add(&st->fill_done, 1);
    }
}

/* Returns once every piece of the copy in flight is copied: the snapshots are the state's again.
 * On the training thread, before it writes a snapshot: it copies what the copier has not taken
 * yet itself (what serialising cost it before), and waits at most for the piece the copier is
 * copying. */
static void copy_fill_finish(hv_state_t *st) {
    if (atomic_load(&st->fill_done) >= st->nfill) {
        return;
    }
    copy_fill_work(st);
    while (atomic_load(&st->fill_done) < st->nfill) {
        sched_yield();
    }
}

/* The copier's send, on its thread: fills the copy from the lent snapshots (copy_offer), seals
 * it (its checksum, a pass over every byte), then the member's rendezvous sends it to a keeper. */
static hv_err copy_send(void *ud, uint32_t generation, uint64_t commit, const void *data,
                        size_t len) {
    hv_state_t *st = ud;
    copy_fill_finish(st);
    ckpt_seal((unsigned char *)data, len); /* the copier owns the buffer */
    return hv__member_put_state(st->copy_member, generation, commit, data, len);
}

/* Writes the copy's framing into out (the checkpoint format, as state_serialize_into) and lists
 * its data as pieces to copy from the snapshots. HV_ENOMEM. */
static hv_err copy_plan(hv_state_t *st, unsigned char *out) {
    size_t n = 0;
    for (int i = 0; i < st->nbufs; i++) {
        n += (st->bufs[i].bytes + COPY_PIECE - 1) / COPY_PIECE;
    }
    if (n > st->capfill) {
        struct copy_piece_s *f = hv_realloc(st->fill, n * sizeof(*f));
        if (f == NULL) {
            return HV_ENOMEM;
        }
        st->fill = f;
        st->capfill = n;
    }
    unsigned char *p = ckpt_frame_head(out, st->nbufs);
    size_t k = 0;
    for (int i = 0; i < st->nbufs; i++) {
        const state_buf_t *b = &st->bufs[i];
        p = ckpt_frame_entry(p, b);
        for (size_t off = 0; off < b->bytes; off += COPY_PIECE) {
            st->fill[k].dst = p + off;
            st->fill[k].src = (const unsigned char *)b->snap + off;
            st->fill[k].n = b->bytes - off < COPY_PIECE ? b->bytes - off : COPY_PIECE;
            k++;
        }
        p += b->bytes;
    }
    memset(p, 0, 8);
    st->nfill = k;
    return HV_OK;
}

/* Rank 0 after a commit: when a copy is due (copier.h) and none is in flight, lends the commit's
 * snapshots to the copier's thread, which copies them into the copy (issue 28 §3: the training
 * thread pays only the framing, a few bytes a buffer; before, it copied the whole state here). The
 * next commit's snapshot takes back what the copier has not copied by then (copy_fill_finish). */
static void copy_offer(hv_state_t *st, uint32_t generation) {
    uint64_t t0 = hv_now_ms();
    if (!hv__copier_want(st->copier, t0)) {
        return;
    }
    size_t len = state_serialized_size(st);
    unsigned char *buf = hv__copier_buffer(st->copier, len);
    if (buf == NULL) {
        return; /* out of memory: no copy this time, training goes on */
    }
    if (!st->have_snapshot || copy_plan(st, buf) != HV_OK) {
        st->nfill = 0;
        state_serialize_into(st, buf);
    }
    atomic_store(&st->fill_done, 0);
    atomic_store(&st->fill_next, 0);
    uint64_t t1 = hv_now_ms();
    if (!hv__copier_offer(st->copier, generation, st->commits, buf, len, t1 - t0, t1)) {
        st->nfill = 0; /* not taken (the copier stops): the snapshots are not lent */
    }
}

/* Rank 0 re-joining at a commit's membership check, when the round pushed stops the job there
 * (the fleet's preemption: the push's stop flag): the copy in flight finishes, then a copy of this
 * commit's state is sent and stored before the re-join, so that the job resumes from this very
 * commit (no step redone). Each wait is bounded; the head stops the job anyway at its bound. */
static void copy_at_stop(hv_state_t *st, hv__member_t *m) {
    const hv__rdzv_assignment_t *a = hv__member_assignment(m);
    if (st->copier == NULL || a == NULL || a->rank != 0 ||
        !hv__member_stop_asked(m, a->generation, 500)) {
        return;
    }
    if (hv__copier_flush(st->copier, 10000) != HV_OK) {
        return;
    }
    uint64_t t0 = hv_now_ms();
    size_t len = state_serialized_size(st);
    unsigned char *buf = hv__copier_buffer(st->copier, len);
    if (buf == NULL) {
        return;
    }
    state_serialize_into(st, buf);
    uint64_t t1 = hv_now_ms();
    hv__copier_offer(st->copier, a->generation, st->commits, buf, len, t1 - t0, t1);
    hv_err rc = hv__copier_flush(st->copier, 10000);
    HV_LOG(HV_LOG_INFO, "elastic", "HV-COPY-STOP", "the job stops at commit %llu: its copy %s",
           (unsigned long long)st->commits, rc == HV_OK ? "was sent" : "is still in flight");
}

/* hv_elastic_run's start: copies go to the head when the rendezvous keeps them (the head's)
 * and HV_STATE_COPY is not 0. No copier is no failure: the job only loses its protection. */
static void copy_start(hv_state_t *st, hv__member_t *m) {
    const char *env = getenv("HV_STATE_COPY");
    if (!hv__member_elastic(m) || !hv__member_can_copy(m) || st->nbufs == 0 ||
        (env != NULL && strcmp(env, "0") == 0)) {
        return;
    }
    hv__copy_policy_t p;
    hv__copy_policy_default(&p);
    st->copy_member = m;
    if (hv__copier_create(copy_send, st, &p, &st->copier) != HV_OK) {
        HV_LOG(HV_LOG_WARN, "elastic", "HV-COPY-START",
               "no copies of the state outside this node: the copier did not start");
        st->copier = NULL;
    }
}

/* hv_elastic_run's end: the copy in flight finishes (bounded), then the thread goes. */
static void copy_stop(hv_state_t *st) {
    if (st->copier == NULL) {
        return;
    }
    hv__copier_stats_t cs;
    hv__copier_stats(st->copier, &cs);
    hv__copier_destroy(st->copier);
    st->copier = NULL;
    if (cs.offered > 0) {
        HV_LOG(HV_LOG_INFO, "elastic", "HV-COPY-STATS",
               "state copies: %llu sent (%llu bytes), %llu failed, %llu skipped while one was in "
               "flight; last cost %llu ms (its send took %llu ms)",
               (unsigned long long)cs.sent, (unsigned long long)cs.bytes_sent,
               (unsigned long long)cs.failed, (unsigned long long)cs.skipped,
               (unsigned long long)cs.last_cost_ms, (unsigned long long)cs.last_wall_ms);
    }
}

/* The first round of a worker whose job lost every member: rank 0 loads the head's copy before
 * the first sync, which hands it to every other rank. */
static hv_err copy_resume(hv_state_t *st, hv__member_t *m) {
    const hv__rdzv_assignment_t *a = hv__member_assignment(m);
    if (a == NULL || !a->resume || a->rank != 0) {
        return HV_OK;
    }
    void *data = NULL;
    size_t len = 0;
    hv_err rc = hv__member_fetch_state(m, a->resume_commit, &data, &len);
    if (rc == HV_OK) {
        char what[96];
        snprintf(what, sizeof(what), "the copy of commit %llu",
                 (unsigned long long)a->resume_commit);
        rc = state_deserialize(st, data, len, what);
        hv_free(data);
    }
    if (rc != HV_OK) {
        HV_LOG(HV_LOG_ERROR, "elastic", "HV-COPY-RESUME",
               "every member of the job was lost and this round resumes from its copy (a peer "
               "keeper's or the head's), but it could not be loaded: %s",
               hv_strerror(rc));
        return rc;
    }
    HV_LOG(HV_LOG_NOTICE, "elastic", "HV-COPY-RESUME",
           "resumed from the copy of generation %u, commit %llu (%zu bytes, %.1f s old)",
           a->resume_generation, (unsigned long long)a->resume_commit, len,
           (double)a->resume_age_ms / 1000.0);
    return HV_OK;
}

/* ---- commit, check --------------------------------------------------------------------------- */

hv_err hv_state_check(hv_state_t *st) {
    if (st == NULL) {
        return HV_EINVAL;
    }
    hv__engine_t *e = NULL;
    HV_TRY(hv__state_world(st, &e, NULL, NULL));
    hv__member_t *m = hv__state_member(st);
    if (!hv__member_elastic(m)) {
        return HV_OK; // a fixed membership never changes
    }
    uint32_t gen = hv__member_assignment(m)->generation;
    uint32_t pushed = hv__member_pushed(m);
    // One small allreduce: if any rank has seen a newer round pushed, all reset here.
    int64_t v = pushed > gen ? (int64_t)pushed : (int64_t)gen;
    hv__op_desc_t d = {
        .kind = HV__OP_ALLREDUCE, .in = &v, .out = &v, .count = 1, .dtype = HV_INT64, .op = HV_MAX};
    hv_err rc = hv__engine_run(e, &d);
    if (rc != HV_OK) {
        return rc;
    }
    if (v > (int64_t)gen) {
        HV_LOG(HV_LOG_INFO, "elastic", "HV-STATE-RESET",
               "rank %d: round %" PRId64 " was pushed while in round %u: re-joining",
               hv__member_assignment(m)->rank, v, gen);
        return HV_ERESET;
    }
    return HV_OK;
}

hv_err hv_state_commit(hv_state_t *st) {
    if (st == NULL) {
        return HV_EINVAL;
    }
    hv__engine_t *e = NULL;
    int size = 0;
    uint64_t t0 = hv__figures_now_ns();
    HV_TRY(hv__state_world(st, &e, NULL, &size));
    for (int i = 0; i < st->nparts; i++) {
        HV_TRY(st->parts[i].ops->commit(st->parts[i].self, e, size));
    }
    HV_TRY(state_snapshot(st));
    const hv__rdzv_assignment_t *a = hv__member_assignment(hv__state_member(st));
    if (a->generation != st->round_generation) {
        // Every rank of a new round (survivors and joiners alike) counts from zero, so the
        // checks fall on the same commits everywhere.
        st->round_generation = a->generation;
        st->round_commits = 0;
    }
    st->round_commits++;
    st->commits++; /* committed (its snapshot taken), whether or not a reset follows */
    uint32_t every = a->check_every ? a->check_every : 1;
    if (st->round_commits % every == 0) {
        HV_TRY(hv_state_check(st));
    }
    if (st->copier != NULL && a->rank == 0) {
        copy_offer(st, a->generation);
    }
    uint64_t t1 = hv__figures_now_ns();
    hv__figures_add_commit(t1 - t0);
    hv__figures_add_step(a->generation, (uint32_t)size, t1);
    if (st->commits == 1) {
        /* The head learns of the process' first commit before training goes on: a job whose
         * members are all lost is restarted from the beginning only when none reported one
         * (one bounded call per process; a failed one leaves the periodic reports to tell). */
        hv__member_report(hv__state_member(st));
    }
    return HV_OK;
}

/* ---- the run loop ---------------------------------------------------------------------------- */

/* Errors of the data plane: a peer failed or the world was aborted. */
static int peer_failure(hv_err rc) {
    return rc == HV_EPEER || rc == HV_ETIMEDOUT || rc == HV_ECANCELED || rc == HV_ECLOSED ||
           rc == HV_EIO;
}

static void run_callbacks(hv_state_t *st, const hv__member_change_t *ch, int rollback) {
    hv_reset_info_t info = {.old_size = ch->old_size,
                            .new_size = ch->new_size,
                            .old_generation = ch->old_generation,
                            .new_generation = ch->new_generation,
                            .rollback = rollback,
                            .reason = ch->reason};
    for (int i = 0; i < st->nresets; i++) {
        st->resets[i].fn(st, &info, st->resets[i].ud);
    }
}

static hv_err run_loop(hv_state_t *st, hv__member_t *m, hv_train_fn fn, void *ud) {
    int elastic = hv__member_elastic(m);
    int first = 1, rollback = 0;
    hv__member_change_t ch = {0};
    HV_TRY(state_snapshot(st)); // restore before the first commit returns here
    for (;;) {
        if (first) {
            HV_TRY(copy_resume(st, m));
            HV_TRY(state_snapshot(st)); // a failed first sync restores the loaded copy
        }
        hv_err rc = hv_state_sync(st);
        if (rc == HV_OK) {
            if (!first) {
                run_callbacks(st, &ch, rollback);
            }
            rc = fn(st, ud);
            if (rc == HV_OK) {
                // Done's failure is logged where it happens; training itself succeeded.
                hv__member_done(m);
                return HV_OK;
            }
        }
        int restore;
        if (elastic && rc == HV_ERESET) {
            restore = 0;
        } else if (elastic && peer_failure(rc)) {
            restore = 1;
        } else {
            return rc;
        }
        const hv__rdzv_assignment_t *a = hv__member_assignment(m);
        // A failure is worth a warning; a membership change (growth, drain) is routine.
        HV_LOG(restore ? HV_LOG_WARN : HV_LOG_INFO, "elastic", "HV-ELASTIC-RESET",
               "rank %d of %d, round %u: %s: %s", a ? a->rank : -1, a ? a->size : 0,
               a ? a->generation : 0, hv_strerror(rc),
               restore ? "restoring the last commit and re-joining" : "re-joining");
        if (restore) {
            uint64_t redone = 0;
            for (int i = 0; i < st->nparts; i++) {
                redone += st->parts[i].ops->pending(st->parts[i].self);
            }
            HV_TRY(hv_state_restore(st));
            hv__member_note_redone(m, redone);
        }
        if (!restore) {
            copy_at_stop(st, m);
        }
        HV_TRY(hv__member_rejoin(m, &ch));
        if (ch.removed) {
            st->removed = 1;
            return HV_OK;
        }
        // The head's flag covers a worker that reset at a check while another failed.
        rollback = restore || ch.rollback;
        st->resets_seen++;
        st->rollbacks += rollback != 0;
        state_rewind_parts(st);
        first = 0;
    }
}

hv_err hv_elastic_run(hv_state_t *st, hv_train_fn fn, void *ud) {
    if (st == NULL || fn == NULL) {
        return HV_EINVAL;
    }
    if (st->running) {
        return HV_ESTATE;
    }
    hv__member_t *m = st->bound;
    if (m == NULL) {
        if (!hv__process_inited()) {
            HV_TRY(hv_init());
        }
        m = hv__process_member();
        if (m == NULL) {
            HV_LOG(HV_LOG_ERROR, "elastic", "HV-ELASTIC-NODATA",
                   "hv_elastic_run needs a data plane: libhv was started without a rendezvous "
                   "(set HV_HEAD/HV_JOB_ID/HV_WORKER_ID, or HV_RDZV_DIR with HV_RANK and HV_SIZE)");
            return HV_ENOTSUP;
        }
    }
    if (hv__member_removed(m)) {
        st->removed = 1;
        return HV_OK;
    }
    st->running = 1;
    st->removed = 0;
    copy_start(st, m);
    hv_err rc = run_loop(st, m, fn, ud);
    copy_stop(st);
    st->running = 0;
    return rc;
}
