/*
 * engine_round: one round of the engine (see engine.h for the protocol): encode this rank's
 * frame (a bit per cached name pending here, the uncached names, and for small steady-state
 * steps the data itself), allgather the frames around the ring, decode every frame the same way
 * on every rank, grow the response cache identically everywhere, and execute what is ready:
 * allreduces fused by (device, dtype, op) up to the fusion threshold, as one ring (or 2D)
 * allreduce over the tensors where they lie; broadcasts and allgathers one by one; barriers
 * complete with the round. A rank that called hv_join says so in its frame: until every rank
 * did, the others' allreduces need only the ranks that have not joined, and a joined rank runs
 * them with zeros of its own (synthetic requests); other operations fail on the ranks that
 * issued them. Runs on the driver thread only; its state is driver-owned.
 */
#include "engine_int.h"

#include <stdio.h>
#include <string.h>

#include "log.h"
#include "mem.h"
#include "figures.h"
#include "reduce.h"
#include "transport_nccl.h"

#define ENG_FRAME_MAGIC 0x484e4731u // "HNG1"
#define ENG_FLAG_SPEC 1u            // the frame carries data for every set bit
#define ENG_FLAG_JOINED 2u          // the rank called hv_join and waits for the others
#define ENG_HDR_LEN 24
#define SPEC_PAD(x) (((x) + 7) & ~(size_t)7) // each tensor's data starts 8-aligned in a frame

/* ---- frames ---------------------------------------------------------------------------------- */

static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get32(const unsigned char *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static uint64_t get64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static int meta_matches(const eng_entry_t *c, const eng_req_t *r) {
    return c->kind == r->d.kind && c->dtype == r->d.dtype && c->op == r->d.op &&
           c->device == r->device && c->root == r->d.root &&
           (r->d.kind == HV__OP_ALLGATHER || c->count == r->d.count);
}

#define UNC_FIXED 16 // kind, dtype, op, device, root (4), count (8)

/* Encodes this rank's frame for the pending list. Returns its length in *len. */
static hv_err eng_encode(hv__engine_t *e, size_t *len) {
    size_t nbytes = (e->ncache + 7) / 8;
    size_t need = ENG_HDR_LEN + nbytes + 8;
    uint32_t nunc = 0;
    size_t spec = 0;
    int spec_ok = 1, joined = 0;
    for (eng_req_t *r = e->pend_head; r != NULL; r = r->next) {
        r->bit = ENG_NO_BIT;
        if (r->d.kind == HV__OP_JOIN) {
            joined = 1; // a flag, not an operation to match
            continue;
        }
        intptr_t b = (intptr_t)hv__strmap_get(&e->cache_by_name, r->name) - 1;
        if (b >= 0 && meta_matches(&e->cache[b], r)) {
            r->bit = (int32_t)b;
            e->bit_req[b] = r;
            if (r->d.kind == HV__OP_ALLREDUCE && !r->device) {
                spec += SPEC_PAD(r->bytes);
            } else {
                spec_ok = 0;
            }
        } else {
            nunc++;
            need += 2 + strlen(r->name) + UNC_FIXED;
            spec_ok = 0;
        }
    }
    if (spec > e->o.spec_bytes) {
        spec_ok = 0;
    }
    if (spec_ok) {
        need += spec;
    }
    hv_err rc = hv__engine_grow((void **)&e->frame, &e->frame_cap, need, 1);
    if (rc != HV_OK) {
        return rc;
    }
    unsigned char *f = e->frame;
    put32(f, ENG_FRAME_MAGIC);
    put32(f + 4, (spec_ok ? ENG_FLAG_SPEC : 0) | (joined ? ENG_FLAG_JOINED : 0));
    put32(f + 8, e->ncache);
    put32(f + 12, nunc);
    put64(f + 16, spec_ok ? spec : 0);
    unsigned char *bits = f + ENG_HDR_LEN;
    memset(bits, 0, nbytes);
    size_t off = ENG_HDR_LEN + nbytes;
    for (eng_req_t *r = e->pend_head; r != NULL; r = r->next) {
        if (r->bit != ENG_NO_BIT) {
            bits[r->bit / 8] |= (unsigned char)(1u << (r->bit % 8));
            continue;
        }
        if (r->d.kind == HV__OP_JOIN) {
            continue;
        }
        uint16_t nl = (uint16_t)strlen(r->name);
        memcpy(f + off, &nl, 2);
        memcpy(f + off + 2, r->name, nl);
        off += 2 + nl;
        unsigned char *m = f + off;
        m[0] = (unsigned char)r->d.kind;
        m[1] = (unsigned char)r->d.dtype;
        m[2] = (unsigned char)r->d.op;
        m[3] = (unsigned char)(r->device != 0);
        put32(m + 4, (uint32_t)r->d.root);
        put64(m + 8, (uint64_t)r->d.count);
        off += UNC_FIXED;
    }
    if (spec_ok) {
        off = (off + 7) & ~(size_t)7; // the data starts 8-aligned (frame buffers are)
        for (uint32_t b = 0; b < e->ncache; b++) {
            if (bits[b / 8] & (1u << (b % 8))) {
                eng_req_t *r = e->bit_req[b];
                if (r->bytes > 0) {
                    memcpy(f + off, r->d.in, r->bytes);
                }
                memset(f + off + r->bytes, 0, SPEC_PAD(r->bytes) - r->bytes);
                off += SPEC_PAD(r->bytes);
            }
        }
    }
    *len = off;
    return HV_OK;
}

/* A decoded view of one rank's frame. */
typedef struct frame_view_s {
    uint32_t flags;
    uint32_t nunc;
    const unsigned char *bits;
    const unsigned char *unc;  // first uncached entry
    const unsigned char *spec; // spec data (8-aligned) or NULL
    uint64_t spec_bytes;
} frame_view_t;

static hv_err eng_view(hv__engine_t *e, int k, frame_view_t *v) {
    size_t len = 0;
    const unsigned char *f = hv__ring_frame(e->ring, k, &len);
    if (len < ENG_HDR_LEN || get32(f) != ENG_FRAME_MAGIC) {
        return HV_EPROTO;
    }
    v->flags = get32(f + 4);
    uint32_t nbits = get32(f + 8);
    v->nunc = get32(f + 12);
    v->spec_bytes = get64(f + 16);
    if (nbits != e->ncache) {
        HV_LOG(HV_LOG_ERROR, "engine", "HV-ENGINE-CACHE",
               "rank %d: rank %d's response cache has %u entries, mine %u", e->rank, k, nbits,
               e->ncache);
        return HV_EPROTO;
    }
    size_t off = ENG_HDR_LEN;
    size_t nbytes = (nbits + 7) / 8;
    if (len < off + nbytes) {
        return HV_EPROTO;
    }
    v->bits = f + off;
    off += nbytes;
    v->unc = f + off;
    for (uint32_t i = 0; i < v->nunc; i++) {
        if (len < off + 2) {
            return HV_EPROTO;
        }
        uint16_t nl;
        memcpy(&nl, f + off, 2);
        if (nl > HV__NAME_MAX || len < off + 2 + nl + UNC_FIXED) {
            return HV_EPROTO;
        }
        off += 2 + nl + UNC_FIXED;
    }
    v->spec = NULL;
    if (v->flags & ENG_FLAG_SPEC) {
        off = (off + 7) & ~(size_t)7;
        if (len != off + v->spec_bytes) {
            return HV_EPROTO;
        }
        v->spec = f + off;
    }
    return HV_OK;
}

/* ---- execution ------------------------------------------------------------------------------- */

static int exec_key(const eng_req_t *r) {
    return (r->device * HV__DTYPE_COUNT + r->d.dtype) * HV__OP_COUNT + r->d.op;
}

/* Pinned host staging of at least n bytes (device tensors without NCCL). */
static hv_err eng_pinned(hv__engine_t *e, size_t n) {
    if (n <= e->pinned_cap && e->pinned != NULL) {
        return HV_OK;
    }
    void *p = NULL;
    hv_err rc = hv__gpu_host_alloc(n, &p);
    if (rc != HV_OK) {
        return rc;
    }
    hv__gpu_host_free(e->pinned);
    e->pinned = p;
    e->pinned_cap = n;
    return HV_OK;
}

/* A batch of device tensors: NCCL when the world has a communicator, else staged through
 * pinned host memory and reduced by the ring like host tensors. */
static hv_err eng_device_allreduce(hv__engine_t *e, eng_req_t **rs, size_t n, size_t total) {
    hv_err rc;
    if (e->o.nccl != NULL) {
        if ((rc = hv__engine_grow((void **)&e->nccl_bufs, &e->nccl_cap, n, sizeof(void *))) !=
            HV_OK) {
            return rc;
        }
        e->nccl_counts = hv_realloc(e->nccl_counts, e->nccl_cap * sizeof(size_t));
        if (e->nccl_counts == NULL) {
            return HV_ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
            e->nccl_bufs[i] = rs[i]->d.out;
            e->nccl_counts[i] = rs[i]->d.count;
        }
        return hv__nccl_allreduce(e->o.nccl, e->nccl_bufs, e->nccl_counts, n, rs[0]->d.dtype,
                                  rs[0]->d.op);
    }
    if ((rc = eng_pinned(e, total)) != HV_OK) {
        return rc;
    }
    size_t off = 0;
    for (size_t i = 0; i < n && rc == HV_OK; i++) {
        rc = hv__gpu_memcpy(e->pinned + off, rs[i]->d.out, rs[i]->bytes);
        off += rs[i]->bytes;
    }
    struct iovec one = {.iov_base = e->pinned, .iov_len = total};
    hv__vec_t v = {.iov = &one, .n = 1, .total = total};
    if (rc == HV_OK) {
        rc = hv__ring_allreduce(e->ring, &v, rs[0]->d.dtype, rs[0]->d.op);
    }
    off = 0;
    for (size_t i = 0; i < n && rc == HV_OK; i++) {
        rc = hv__gpu_memcpy(rs[i]->d.out, e->pinned + off, rs[i]->bytes);
        off += rs[i]->bytes;
    }
    return rc;
}

static hv_err eng_fused_allreduce(hv__engine_t *e, eng_req_t **rs, size_t n) {
    hv_err rc = hv__engine_grow((void **)&e->iov, &e->iov_cap, n, sizeof(struct iovec));
    if (rc != HV_OK) {
        return rc;
    }
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        e->iov[i].iov_base = rs[i]->d.out;
        e->iov[i].iov_len = rs[i]->bytes;
        total += rs[i]->bytes;
    }
    hv__vec_t v = {.iov = e->iov, .n = (int)n, .total = total};
    uint64_t t0 = hv__engine_now_ns();
    if (rs[0]->device) {
        rc = eng_device_allreduce(e, rs, n, total);
    } else if (e->o.intra != NULL && total >= e->o.hier_min_bytes) {
        rc =
            hv__ring_allreduce_2d(e->o.intra, e->o.cross, &v, rs[0]->d.dtype, rs[0]->d.op, e->size);
    } else {
        rc = hv__ring_allreduce(e->ring, &v, rs[0]->d.dtype, rs[0]->d.op);
    }
    if (rc == HV_OK) {
        hv__figures_add_allreduce(n, total, hv__engine_now_ns() - t0);
    }
    pthread_mutex_lock(&e->mu);
    e->stats.fused_calls++;
    pthread_mutex_unlock(&e->mu);
    if (rc != HV_OK) {
        hv__engine_fail(e, rc,
                        "rank %d: %s during allreduce of %zu tensor(s), %zu bytes, first '%s'",
                        e->rank, hv_strerror(rc), n, total, rs[0]->name);
    }
    return rc;
}

static hv_err eng_allgather(hv__engine_t *e, eng_req_t *r, hv_err *op_rc) {
    int n = e->size;
    size_t *cc = e->ag_buf; // (count, cap) per rank
    size_t *lens = e->ag_buf + 2 * n, *offs = e->ag_buf + 3 * n;
    cc[2 * e->rank] = r->d.count;
    cc[2 * e->rank + 1] = r->d.out_cap;
    for (int k = 0; k < n; k++) {
        lens[k] = 2 * sizeof(size_t);
        offs[k] = (size_t)k * 2 * sizeof(size_t);
    }
    hv_err rc = hv__ring_allgatherv(e->ring, cc, lens, offs);
    if (rc != HV_OK) {
        hv__engine_fail(e, rc, "rank %d: %s during allgather of '%s'", e->rank, hv_strerror(rc),
                        r->name);
        return rc;
    }
    size_t esize = hv_dtype_size(r->d.dtype), total = 0;
    int short_cap = 0;
    for (int k = 0; k < n; k++) {
        total += cc[2 * k];
    }
    for (int k = 0; k < n; k++) {
        short_cap |= cc[2 * k + 1] < total;
    }
    if (r->d.counts != NULL) {
        for (int k = 0; k < n; k++) {
            r->d.counts[k] = cc[2 * k];
        }
    }
    if (short_cap) {
        *op_rc = HV_ETOOBIG; // every rank sees the same caps, so every rank says the same
        return HV_OK;
    }
    size_t acc = 0;
    for (int k = 0; k < n; k++) {
        offs[k] = acc;
        lens[k] = cc[2 * k] * esize;
        acc += lens[k];
    }
    char *out = r->d.out;
    if (r->device && e->o.nccl != NULL) {
        rc = hv__nccl_allgatherv(e->o.nccl, r->d.in, out, lens, offs);
    } else if (r->device) {
        // Device buffers without NCCL: gather in pinned host memory, then one copy to the device.
        if ((rc = eng_pinned(e, acc)) == HV_OK &&
            (rc = hv__gpu_memcpy(e->pinned + offs[e->rank], r->d.in, lens[e->rank])) == HV_OK &&
            (rc = hv__ring_allgatherv(e->ring, e->pinned, lens, offs)) == HV_OK) {
            rc = hv__gpu_memcpy(out, e->pinned, acc);
        }
    } else {
        if (lens[e->rank] > 0 && (const char *)r->d.in != out + offs[e->rank]) {
            memmove(out + offs[e->rank], r->d.in, lens[e->rank]);
        }
        rc = hv__ring_allgatherv(e->ring, out, lens, offs);
    }
    if (rc != HV_OK) {
        hv__engine_fail(e, rc, "rank %d: %s during allgather of '%s'", e->rank, hv_strerror(rc),
                        r->name);
    }
    return rc;
}

/* Executes exec[0..nexec) (the same list on every rank) and completes it. */
static hv_err eng_execute(hv__engine_t *e) {
    size_t n = e->nexec;
    eng_req_t **x = e->exec;
    // eng_round put the allreduces first, grouped by (dtype, op) in list order.
    hv_err rc = HV_OK;
    size_t nar = 0;
    while (nar < n && x[nar]->d.kind == HV__OP_ALLREDUCE) {
        nar++;
    }
    for (size_t i = 0; i < nar && rc == HV_OK; i++) {
        eng_req_t *r = x[i];
        if (r->d.in != r->d.out && r->bytes > 0) {
            if (r->device) {
                rc = hv__gpu_memcpy(r->d.out, r->d.in, r->bytes);
            } else {
                memcpy(r->d.out, r->d.in, r->bytes);
            }
        }
    }
    if (rc != HV_OK) {
        hv__engine_fail(e, rc, "rank %d: copying a device tensor failed", e->rank);
        return rc;
    }
    // Batches: consecutive runs of equal (dtype, op) up to the fusion threshold.
    size_t i = 0;
    while (i < nar && rc == HV_OK) {
        size_t j = i + 1;
        uint64_t bytes = x[i]->bytes;
        while (j < nar && exec_key(x[j]) == exec_key(x[i]) &&
               bytes + x[j]->bytes <= e->o.fusion_threshold) {
            bytes += x[j]->bytes;
            j++;
        }
        rc = eng_fused_allreduce(e, x + i, j - i);
        if (rc == HV_OK) {
            hv__engine_complete(e, x + i, j - i, NULL, HV_OK);
        }
        i = j;
    }
    for (i = nar; i < n && rc == HV_OK; i++) {
        eng_req_t *r = x[i];
        hv_err op_rc = HV_OK;
        switch (r->d.kind) {
        case HV__OP_BROADCAST:
            if (r->device && e->o.nccl != NULL) {
                rc = hv__nccl_broadcast(e->o.nccl, r->d.out, r->bytes, r->d.root);
            } else if (r->device) {
                // Staged through pinned host memory.
                rc = eng_pinned(e, r->bytes);
                if (rc == HV_OK) {
                    rc = hv__gpu_memcpy(e->pinned, r->d.out, r->bytes);
                }
                if (rc == HV_OK) {
                    rc = hv__ring_broadcast(e->ring, e->pinned, r->bytes, r->d.root);
                }
                if (rc == HV_OK) {
                    rc = hv__gpu_memcpy(r->d.out, e->pinned, r->bytes);
                }
            } else {
                rc = hv__ring_broadcast(e->ring, r->d.out, r->bytes, r->d.root);
            }
            if (rc != HV_OK) {
                hv__engine_fail(e, rc, "rank %d: %s during broadcast of '%s' from rank %d", e->rank,
                                hv_strerror(rc), r->name, r->d.root);
            }
            break;
        case HV__OP_ALLGATHER:
            rc = eng_allgather(e, r, &op_rc);
            break;
        default: // barrier: the round itself was the barrier
            break;
        }
        if (rc == HV_OK) {
            hv__engine_complete(e, &x[i], 1, &op_rc, op_rc);
        }
    }
    return rc;
}

/* Sorts exec[0..nar) allreduces by (dtype, op) keeping list order within a key: insertion sort
 * on a small key (35 values) is stable and cheap for the list sizes we see. */
static void exec_stable_sort(eng_req_t **x, size_t n) {
    for (size_t i = 1; i < n; i++) {
        eng_req_t *v = x[i];
        size_t j = i;
        while (j > 0 && exec_key(x[j - 1]) > exec_key(v)) {
            x[j] = x[j - 1];
            j--;
        }
        x[j] = v;
    }
}

void hv__engine_res_clear(hv__engine_t *e) {
    for (size_t i = 0; i < e->nres; i++) {
        hv_free((void *)e->res[i].name);
    }
    e->nres = 0;
    hv__strmap_clear(&e->res_by_name);
}

/* ---- hv_join ------------------------------------------------------------------------------- */

/* The per-rank join flags (this round's, then the last round's), made at the first round. */
static hv_err join_track_alloc(hv__engine_t *e) {
    if (e->joined != NULL) {
        return HV_OK;
    }
    e->joined = hv_calloc(2 * (size_t)e->size, 1);
    if (e->joined == NULL) {
        hv__engine_fail(e, HV_ENOMEM, "rank %d: out of memory", e->rank);
        return HV_ENOMEM;
    }
    e->join_last = -1;
    return HV_OK;
}

/* After the flags of this round are read: the rank that joined last is the highest of those
 * that joined in this round (as Horovod's coordinator, which reads ranks in order). */
static void join_track(hv__engine_t *e, int njoined) {
    unsigned char *now = e->joined, *prev = e->joined + e->size;
    for (int k = 0; k < e->size; k++) {
        if (now[k] && !prev[k]) {
            e->join_last = k;
        }
    }
    memcpy(prev, now, (size_t)e->size);
    e->njoined = njoined;
}

/* Whether an operation may go on while ranks are joined: allreduces of host memory. */
static int join_ok(const hv__engine_t *e, int kind, int device) {
    return e->njoined == 0 || (kind == HV__OP_ALLREDUCE && !device);
}

/* Fails this rank's r (another kind of operation while ranks are joined) with HV_ENOTSUP. */
static void join_refuse(hv__engine_t *e, eng_req_t *r) {
    char why[400];
    snprintf(why, sizeof(why),
             "rank %d: %s '%s'%s while %d rank(s) have joined (hv_join): until every rank has "
             "joined only allreduces of host memory go on",
             e->rank, hv__engine_kind_name(r->d.kind), r->name,
             r->device ? " of device memory" : "", e->njoined);
    HV_LOG(HV_LOG_ERROR, "engine", "HV-ENGINE-JOINED", "%s", why);
    pthread_mutex_lock(&e->mu);
    snprintf(e->last_error, sizeof(e->last_error), "%s", why);
    pthread_mutex_unlock(&e->mu);
    hv_err no = HV_ENOTSUP;
    hv__engine_complete(e, &r, 1, &no, no);
}

/* A joined rank's part of another rank's allreduce: zeros of the announced size, reduced like a
 * request of its own and dropped after the round (hv__engine_syn_clear). */
static eng_req_t *syn_new(hv__engine_t *e, const char *name, int dtype, int op, uint64_t count) {
    if (hv__engine_grow((void **)&e->syn, &e->syn_cap, e->nsyn + 1, sizeof(*e->syn)) != HV_OK) {
        return NULL;
    }
    eng_req_t *r = hv_calloc(1, sizeof(*r));
    size_t bytes = (size_t)count * hv_dtype_size((hv_dtype)dtype);
    void *zeros = bytes > 0 ? hv_calloc(1, bytes) : NULL;
    if (r == NULL || (bytes > 0 && zeros == NULL)) {
        hv_free(r);
        hv_free(zeros);
        return NULL;
    }
    snprintf(r->name, sizeof(r->name), "%s", name);
    r->d = (hv__op_desc_t){.kind = HV__OP_ALLREDUCE,
                           .name = r->name,
                           .in = zeros,
                           .out = zeros,
                           .count = (size_t)count,
                           .dtype = (hv_dtype)dtype,
                           .op = (hv_op)op};
    r->bytes = bytes;
    r->bit = ENG_NO_BIT;
    r->synthetic = 1;
    e->syn[e->nsyn++] = r;
    return r;
}

void hv__engine_syn_clear(hv__engine_t *e) {
    for (size_t i = 0; i < e->nsyn; i++) {
        hv_free(e->syn[i]->d.out);
        hv_free(e->syn[i]);
    }
    e->nsyn = 0;
}

/* Every rank has joined: each completes its hv_join with the rank that joined last. */
static void round_join_done(hv__engine_t *e) {
    if (e->njoined < e->size) {
        return;
    }
    for (eng_req_t *r = e->pend_head; r != NULL; r = r->next) {
        if (r->d.kind == HV__OP_JOIN) {
            *(int *)r->d.out = e->join_last;
            hv__engine_complete(e, &r, 1, NULL, HV_OK);
            break;
        }
    }
    memset(e->joined, 0, 2 * (size_t)e->size);
    e->join_last = -1;
    e->njoined = 0;
}

/* Whether this rank announced cached bit b in this round's frame. */
static int own_bit(const hv__engine_t *e, uint32_t b) {
    return (e->frame[ENG_HDR_LEN + b / 8] >> (b % 8)) & 1;
}

/* ---- the round ------------------------------------------------------------------------------- */

static hv_err cache_add(hv__engine_t *e, const eng_resolve_t *rs, int32_t *bit) {
    *bit = ENG_NO_BIT;
    if (e->ncache >= e->o.cache_capacity) {
        return HV_OK; // full: this name keeps being negotiated by name
    }
    if (e->ncache == e->cache_cap) {
        uint32_t cap = e->cache_cap ? e->cache_cap * 2 : 64;
        eng_entry_t *c = hv_realloc(e->cache, cap * sizeof(*c));
        if (c == NULL) {
            return HV_ENOMEM;
        }
        e->cache = c;
        eng_req_t **br = hv_realloc(e->bit_req, cap * sizeof(*br));
        if (br == NULL) {
            return HV_ENOMEM;
        }
        e->bit_req = br;
        e->cache_cap = cap;
    }
    eng_entry_t *c = &e->cache[e->ncache];
    c->name = hv_strdup(rs->name);
    if (c->name == NULL) {
        return HV_ENOMEM;
    }
    c->kind = rs->kind;
    c->dtype = rs->dtype;
    c->op = rs->op;
    c->device = rs->device;
    c->root = rs->root;
    c->count = rs->count;
    if (hv__strmap_put(&e->cache_by_name, c->name, (void *)(intptr_t)(e->ncache + 1)) != HV_OK) {
        hv_free(c->name);
        return HV_ENOMEM;
    }
    *bit = (int32_t)e->ncache++;
    pthread_mutex_lock(&e->mu);
    e->stats.cache_entries = e->ncache;
    pthread_mutex_unlock(&e->mu);
    return HV_OK;
}

/* An operation's meta as announced in a frame or kept in the cache. */
typedef struct eng_meta_s {
    int kind, dtype, op, device, root;
    uint64_t count;
} eng_meta_t;

static void meta_diff(char *buf, size_t len, const char *name, int k, const eng_resolve_t *a,
                      const eng_meta_t *m) {
    snprintf(buf, len,
             "ranks disagree on '%s': %s %s %s %s memory root %d count %llu vs rank %d: %s %s %s "
             "%s memory root %d count %llu",
             name, hv__engine_kind_name(a->kind), hv__dtype_name((hv_dtype)a->dtype),
             hv__op_name((hv_op)a->op), a->device ? "device" : "host", (int)a->root,
             (unsigned long long)a->count, k, hv__engine_kind_name(m->kind),
             hv__dtype_name((hv_dtype)m->dtype), hv__op_name((hv_op)m->op),
             m->device ? "device" : "host", m->root, (unsigned long long)m->count);
}

static int resolve_same(const eng_resolve_t *a, const eng_meta_t *m) {
    return a->kind == m->kind && a->dtype == m->dtype && a->op == m->op && a->device == m->device &&
           a->root == m->root && (m->kind == HV__OP_ALLGATHER || a->count == m->count);
}

/* What the negotiation found in this round's frames (round_negotiate). */
typedef struct round_view_s {
    size_t nbytes;      /* bytes of the cache's bit set in every frame */
    int all_spec;       /* every rank sent its data with its frame */
    int same_bits;      /* every rank announced the same cached bits */
    uint32_t total_unc; /* uncached names announced, over all ranks */
    int njoined;        /* ranks whose frames say they joined (hv_join) */
} round_view_t;

/* Moves the incoming queue (filled by the user's threads) onto the pending list. */
static hv_err round_take_queue(hv__engine_t *e) {
    pthread_mutex_lock(&e->mu);
    eng_req_t *in = e->inq_head;
    e->inq_head = e->inq_tail = NULL;
    e->inq_urgent = 0;
    e->stats.rounds++;
    pthread_mutex_unlock(&e->mu);
    hv_err rc = HV_OK;
    for (eng_req_t *r = in, *next; r != NULL; r = next) {
        next = r->next;
        r->next = NULL;
        r->prev = e->pend_tail;
        if (e->pend_tail) {
            e->pend_tail->next = r;
        } else {
            e->pend_head = r;
        }
        e->pend_tail = r;
        atomic_fetch_add(&e->npend, 1);
        if (hv__strmap_put(&e->pend_by_name, r->name, r) != HV_OK) {
            rc = HV_ENOMEM;
        }
    }
    if (rc != HV_OK) {
        hv__engine_fail(e, rc, "rank %d: out of memory in the engine", e->rank);
    }
    return rc;
}

/* Negotiate: encodes this rank's frame, allgathers every rank's, and ANDs their cached bits
 * into and_bits (the cached names pending everywhere). */
static hv_err round_negotiate(hv__engine_t *e, round_view_t *out) {
    size_t flen = 0;
    hv_err rc = eng_encode(e, &flen);
    if (rc != HV_OK) {
        hv__engine_fail(e, rc, "rank %d: out of memory encoding a frame", e->rank);
        return rc;
    }
    if ((rc = hv__ring_allgather_frames(e->ring, e->frame, flen)) != HV_OK) {
        hv__engine_fail(e, rc, "rank %d: %s while negotiating with the other ranks", e->rank,
                        hv_strerror(rc));
        return rc;
    }
    size_t nbytes = (e->ncache + 7) / 8;
    if ((rc = hv__engine_grow((void **)&e->and_bits, &e->and_cap, nbytes + 1, 1)) != HV_OK) {
        hv__engine_fail(e, rc, "rank %d: out of memory", e->rank);
        return rc;
    }
    memset(e->and_bits, 0xff, nbytes);
    round_view_t rv = {.nbytes = nbytes, .all_spec = 1, .same_bits = 1};
    if ((rc = join_track_alloc(e)) != HV_OK) {
        return rc;
    }
    frame_view_t v0;
    for (int k = 0; k < e->size; k++) {
        frame_view_t v;
        if ((rc = eng_view(e, k, &v)) == HV_OK) {
            e->spec_ptr[k] = v.spec;
        }
        if (rc != HV_OK) {
            hv__engine_fail(e, rc, "rank %d: malformed negotiation frame from rank %d", e->rank, k);
            return rc;
        }
        if (k == 0) {
            v0 = v;
        } else if (memcmp(v.bits, v0.bits, nbytes) != 0) {
            rv.same_bits = 0;
        }
        e->joined[k] = (v.flags & ENG_FLAG_JOINED) != 0;
        rv.njoined += e->joined[k];
        for (size_t i = 0; i < nbytes; i++) {
            e->and_bits[i] &= v.bits[i];
        }
        rv.all_spec &= (v.flags & ENG_FLAG_SPEC) != 0;
        rv.total_unc += v.nunc;
    }
    if (rv.njoined > 0 && rv.njoined < e->size) {
        // Ready everywhere while ranks are joined: announced by every rank that has not joined
        // (when all have, by every rank as usual: nobody contributes zeros then).
        memset(e->and_bits, 0xff, nbytes);
        for (int k = 0; k < e->size; k++) {
            frame_view_t v;
            eng_view(e, k, &v);
            for (size_t i = 0; i < nbytes && !e->joined[k]; i++) {
                e->and_bits[i] &= v.bits[i];
            }
        }
    }
    join_track(e, rv.njoined);
    if (nbytes > 0 && (e->ncache % 8) != 0) {
        e->and_bits[nbytes - 1] &= (unsigned char)((1u << (e->ncache % 8)) - 1);
    }
    *out = rv;
    return HV_OK;
}

/* The fast path, when every rank announced the same cached allreduces and sent their data:
 * reduces the frames' data straight into the outputs and completes them. */
static hv_err round_fast(hv__engine_t *e) {
    int n = e->size;
    size_t off = 0;
    size_t cnt = 0;
    uint64_t t0 = hv__engine_now_ns(), bytes = 0;
    for (uint32_t b = 0; b < e->ncache; b++) {
        if (!(e->and_bits[b / 8] & (1u << (b % 8)))) {
            continue;
        }
        eng_req_t *r = e->bit_req[b];
        for (int k = 0; k < n; k++) {
            if (k == 0) {
                memcpy(r->d.out, e->spec_ptr[k] + off, r->bytes);
            } else {
                hv__reduce(r->d.op, r->d.dtype, r->d.out, e->spec_ptr[k] + off, r->d.count);
            }
        }
        if (r->d.op == HV_AVG) {
            hv__reduce_scale(r->d.dtype, r->d.out, r->d.count, n);
        }
        off += SPEC_PAD(r->bytes);
        bytes += r->bytes;
        hv_err rc = hv__engine_grow((void **)&e->exec, &e->exec_cap, cnt + 1, sizeof(*e->exec));
        if (rc != HV_OK) {
            hv__engine_fail(e, rc, "rank %d: out of memory", e->rank);
            return rc;
        }
        e->exec[cnt++] = r;
    }
    if (cnt > 0) {
        /* The data came inside the round's frames: the time is the reduction's. */
        hv__figures_add_allreduce(cnt, bytes, hv__engine_now_ns() - t0);
        hv__engine_complete(e, e->exec, cnt, NULL, HV_OK);
        pthread_mutex_lock(&e->mu);
        e->stats.fast_rounds++;
        pthread_mutex_unlock(&e->mu);
    }
    return HV_OK;
}

/* Plan, 1: the cached names ready everywhere go to exec, in bit order (a joined rank's zeros
 * for those it does not have; other kinds of operations are refused while ranks are joined). */
static hv_err round_plan_cached(hv__engine_t *e) {
    for (uint32_t b = 0; b < e->ncache; b++) {
        if (!(e->and_bits[b / 8] & (1u << (b % 8)))) {
            continue;
        }
        const eng_entry_t *c = &e->cache[b];
        eng_req_t *r = own_bit(e, b) ? e->bit_req[b] : NULL;
        if (!join_ok(e, c->kind, c->device)) {
            if (r != NULL) {
                join_refuse(e, r);
            }
            continue;
        }
        if (r == NULL && (r = syn_new(e, c->name, c->dtype, c->op, c->count)) == NULL) {
            hv__engine_fail(e, HV_ENOMEM, "rank %d: out of memory", e->rank);
            return HV_ENOMEM;
        }
        hv_err rc =
            hv__engine_grow((void **)&e->exec, &e->exec_cap, e->nexec + 1, sizeof(*e->exec));
        if (rc != HV_OK) {
            hv__engine_fail(e, rc, "rank %d: out of memory", e->rank);
            return rc;
        }
        e->exec[e->nexec++] = r;
    }
    return HV_OK;
}

/* Plan, 2: one resolve record per name some rank announced uncached, counting the ranks that
 * announced it and noting the first disagreement on its meta. */
static hv_err round_count_uncached(hv__engine_t *e) {
    for (int k = 0; k < e->size; k++) {
        frame_view_t v;
        eng_view(e, k, &v);
        const unsigned char *p = v.unc;
        for (uint32_t i = 0; i < v.nunc; i++) {
            uint16_t nl;
            memcpy(&nl, p, 2);
            // Names are not NUL-terminated in the frame: copy into the resolve record's key.
            char name[HV__NAME_MAX + 1];
            memcpy(name, p + 2, nl);
            name[nl] = '\0';
            const unsigned char *mp = p + 2 + nl;
            eng_meta_t m = {.kind = mp[0],
                            .dtype = mp[1],
                            .op = mp[2],
                            .device = mp[3],
                            .root = (int32_t)get32(mp + 4),
                            .count = get64(mp + 8)};
            p += 2 + nl + UNC_FIXED;
            uintptr_t ri = (uintptr_t)hv__strmap_get(&e->res_by_name, name); // index + 1
            eng_resolve_t *rs = ri ? &e->res[ri - 1] : NULL;
            if (rs == NULL) {
                hv_err rc =
                    hv__engine_grow((void **)&e->res, &e->res_cap, e->nres + 1, sizeof(*e->res));
                if (rc != HV_OK) {
                    hv__engine_fail(e, rc, "rank %d: out of memory", e->rank);
                    return rc;
                }
                // The record keeps its own copy of the name (frames are not NUL-terminated).
                rs = &e->res[e->nres++];
                memset(rs, 0, sizeof(*rs));
                rs->name = NULL;
                rs->kind = (uint8_t)m.kind;
                rs->dtype = (uint8_t)m.dtype;
                rs->op = (uint8_t)m.op;
                rs->device = (uint8_t)m.device;
                rs->root = m.root;
                rs->count = m.count;
            } else if (!rs->conflict && !resolve_same(rs, &m)) {
                rs->conflict = 1;
                meta_diff(rs->why, sizeof(rs->why), name, k, rs, &m);
            }
            rs->ranks++;
            rs->ranks_nj += !e->joined[k];
            if (rs->name == NULL) {
                char *copy = hv_strdup(name);
                if (copy == NULL ||
                    hv__strmap_put(&e->res_by_name, copy, (void *)(uintptr_t)e->nres) != HV_OK) {
                    hv_free(copy);
                    hv__engine_fail(e, HV_ENOMEM, "rank %d: out of memory", e->rank);
                    return HV_ENOMEM;
                }
                rs->name = copy;
            }
        }
    }
    return HV_OK;
}

/* Plan, 3: ranks that announced a cached bit for a resolve record's name count too (checked
 * against the cached meta). */
static void round_count_cached(hv__engine_t *e) {
    for (size_t i = 0; i < e->nres; i++) {
        eng_resolve_t *rs = &e->res[i];
        intptr_t b = (intptr_t)hv__strmap_get(&e->cache_by_name, rs->name) - 1;
        if (b < 0) {
            continue;
        }
        const eng_entry_t *c = &e->cache[b];
        eng_meta_t cm = {.kind = c->kind,
                         .dtype = c->dtype,
                         .op = c->op,
                         .device = c->device,
                         .root = c->root,
                         .count = c->count};
        for (int k = 0; k < e->size; k++) {
            frame_view_t v;
            eng_view(e, k, &v);
            if (v.bits[b / 8] & (1u << (b % 8))) {
                rs->ranks++;
                rs->ranks_nj += !e->joined[k];
                if (!rs->conflict && !resolve_same(rs, &cm)) {
                    rs->conflict = 1;
                    meta_diff(rs->why, sizeof(rs->why), rs->name, k, rs, &cm);
                }
            }
        }
    }
}

/* Plan, 4: resolves the names pending on every rank, in first-appearance order (the same on
 * every rank): a conflict fails that operation with HV_EPROTO; the others enter the cache (or
 * update its entry) and go to exec. */
static hv_err round_resolve(hv__engine_t *e) {
    hv_err rc = HV_OK;
    int all_joined = e->njoined == e->size;
    for (size_t i = 0; i < e->nres && rc == HV_OK; i++) {
        eng_resolve_t *rs = &e->res[i];
        if (all_joined ? rs->ranks < e->size : rs->ranks_nj < e->size - e->njoined) {
            continue;
        }
        eng_req_t *mine = hv__strmap_get(&e->pend_by_name, rs->name);
        if (!join_ok(e, rs->kind, rs->device)) {
            if (mine != NULL) {
                join_refuse(e, mine);
            }
            continue;
        }
        if (mine == NULL && e->joined[e->rank] && !rs->conflict &&
            (mine = syn_new(e, rs->name, rs->dtype, rs->op, rs->count)) == NULL) {
            rc = HV_ENOMEM;
            hv__engine_fail(e, rc, "rank %d: out of memory", e->rank);
            break;
        }
        if (mine == NULL && e->joined[e->rank]) {
            continue; // a conflict among the others: theirs fail, this rank has nothing
        }
        if (mine == NULL) {
            rc = HV_EINTERNAL; // every rank has it pending, so must we
            hv__engine_fail(e, rc, "rank %d: '%s' resolved but not pending here", e->rank,
                            rs->name);
            break;
        }
        if (rs->conflict) {
            HV_LOG(HV_LOG_ERROR, "engine", "HV-ENGINE-MISMATCH", "rank %d: %s", e->rank, rs->why);
            pthread_mutex_lock(&e->mu);
            snprintf(e->last_error, sizeof(e->last_error), "%s", rs->why);
            pthread_mutex_unlock(&e->mu);
            hv_err bad = HV_EPROTO;
            hv__engine_complete(e, &mine, 1, &bad, bad);
            continue;
        }
        intptr_t b = (intptr_t)hv__strmap_get(&e->cache_by_name, rs->name) - 1;
        if (b >= 0) {
            eng_entry_t *c = &e->cache[b]; // same name, new meta: update in place
            c->kind = rs->kind;
            c->dtype = rs->dtype;
            c->op = rs->op;
            c->device = rs->device;
            c->root = rs->root;
            c->count = rs->count;
        } else {
            int32_t bit;
            if ((rc = cache_add(e, rs, &bit)) != HV_OK) {
                hv__engine_fail(e, rc, "rank %d: out of memory", e->rank);
                break;
            }
        }
        if ((rc = hv__engine_grow((void **)&e->exec, &e->exec_cap, e->nexec + 1,
                                  sizeof(*e->exec))) != HV_OK) {
            hv__engine_fail(e, rc, "rank %d: out of memory", e->rank);
            break;
        }
        e->exec[e->nexec++] = mine;
    }
    return rc;
}

/* Plan, 5: allreduces first, grouped by (dtype, op) in list order; then the others in list
 * order (what eng_execute expects). */
static void round_order(hv__engine_t *e) {
    size_t nar = 0;
    eng_req_t **x = e->exec;
    for (size_t i = 0; i < e->nexec; i++) {
        if (x[i]->d.kind == HV__OP_ALLREDUCE) {
            // shift the allreduce down keeping relative order of both groups
            eng_req_t *t = x[i];
            memmove(x + nar + 1, x + nar, (i - nar) * sizeof(*x));
            x[nar++] = t;
        }
    }
    exec_stable_sort(x, nar);
}

/* One negotiation round and the execution of what it found ready. Steps: take the queue;
 * negotiate (frames allgathered, cached bits ANDed); the fast path when it applies, else plan
 * (cached names ready, uncached names counted and resolved, ordered) and execute, which
 * completes each operation (finish). */
hv_err hv__engine_round(hv__engine_t *e) {
    hv_err rc = round_take_queue(e);
    if (rc != HV_OK) {
        return rc;
    }
    uint64_t t_start = hv__engine_now_ns();
    round_view_t rv;
    if ((rc = round_negotiate(e, &rv)) != HV_OK) {
        return rc;
    }
    e->nexec = 0;
    hv__engine_syn_clear(e);
    if (rv.njoined == 0 && rv.all_spec && rv.same_bits && rv.total_unc == 0) {
        return round_fast(e);
    }
    if ((rc = round_plan_cached(e)) != HV_OK) {
        return rc;
    }
    hv__engine_res_clear(e); // (a round that failed half-way may have left some)
    if (rv.total_unc > 0 && (rc = round_count_uncached(e)) != HV_OK) {
        return rc;
    }
    round_count_cached(e);
    rc = round_resolve(e);
    hv__engine_res_clear(e);
    if (rc != HV_OK) {
        return rc;
    }
    round_order(e);
    uint64_t t_neg = hv__engine_now_ns();
    rc = eng_execute(e);
    hv__engine_syn_clear(e);
    if (rc == HV_OK) {
        round_join_done(e);
    }
    HV_LOG(HV_LOG_DEBUG, "engine", "HV-ENGINE-ROUND",
           "rank %d: round: negotiation %.1f us, %zu ready, execution %.1f us", e->rank,
           (double)(t_neg - t_start) / 1e3, e->nexec, (double)(hv__engine_now_ns() - t_neg) / 1e3);
    return rc;
}
