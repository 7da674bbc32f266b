/*
 * engine: see engine.h. State is split by owner:
 *   - under mu: the incoming queue (submitted, not yet taken by a driver), the live-name set
 *     (duplicate detection), the handle table, the drive flag, the sticky failure;
 *   - the driver (whoever holds the drive flag): pending requests, the response cache, frame
 *     and scratch buffers, the ring.
 * A round: take the incoming queue, encode a frame, allgather the frames around the ring,
 * decode all of them (every rank computes the same thing from the same frames), execute what is
 * ready everywhere, complete it. A rank with nothing pending delays joining a round that another
 * rank started (nothing can complete without it), which keeps idle ranks from burning rounds;
 * the delay is bounded well below the peer timeout so that liveness is still proven.
 */
#include "engine.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "mem.h"
#include "reduce.h"
#include "strmap.h"
#include "transport_nccl.h"

#define ENG_FRAME_MAGIC 0x484e4731u // "HNG1"
#define ENG_FLAG_SPEC 1u            // the frame carries data for every set bit
#define ENG_HDR_LEN 24
#define ENG_NO_BIT (-1)
#define ENG_ANON_NAMES 64 // distinct names of unnamed blocking calls (see hv__engine_run)

/* ---- types ----------------------------------------------------------------------------------- */

typedef struct eng_group_s {
    atomic_int done;     // 1 once every member completed (release: status is final)
    hv_err status;       // first error among members; under mu until done
    uint32_t remaining;  // members not yet completed; under mu
    int heap;            // 1: async (freed when its handle is released); 0: a caller's stack
} eng_group_t;

typedef struct eng_req_s {
    struct eng_req_s *next; // incoming or pending list
    struct eng_req_s *prev; // pending list only
    eng_group_t *grp;       // completion (borrowed from the group's owner)
    hv__op_desc_t d;        // copy; d.name points at name
    char name[HV__NAME_MAX + 1];
    size_t bytes;           // count * element size
    int32_t bit;            // cache bit announced in the current round, or ENG_NO_BIT
    int heap;               // allocated by the engine (async)
    int device;             // in/out are CUDA device memory (NCCL or staging)
} eng_req_t;

typedef struct eng_entry_s { // response cache entry; identical on every rank
    char *name;              // owned
    uint8_t kind, dtype, op;
    int32_t root;
    uint64_t count;
} eng_entry_t;

typedef struct eng_resolve_s { // an uncached name seen in this round's frames
    const char *name;           // borrowed from a frame (valid for the round)
    uint8_t kind, dtype, op;
    int32_t root;
    uint64_t count;
    int ranks;                  // ranks that have it pending
    int conflict;               // ranks disagree on its meta
    char why[160];              // first disagreement, for the error message
} eng_resolve_t;

typedef struct eng_slot_s {
    uint32_t gen;       // bumped on release so stale handles are refused
    eng_group_t *grp;   // NULL when free
} eng_slot_t;

struct hv__engine_s {
    hv__ring_t *ring;       // borrowed
    int rank, size;
    hv__engine_opts_t o;
    uint64_t join_delay_ns; // how long an idle rank may delay joining another rank's round
    int ev_fd;              // eventfd: wakes the background thread (submission, abort, stop)
    pthread_t thread;
    int thread_started;

    pthread_mutex_t mu;
    pthread_cond_t cv;      // completions, drive released
    eng_req_t *inq_head;    // under mu: submitted, not yet taken
    eng_req_t *inq_tail;
    int inq_urgent;         // under mu: a blocking caller waits on something in inq
    uint64_t inq_first_ns;  // under mu: arrival of the oldest request in inq
    hv__strmap_t live;      // under mu: name -> req, every not yet completed request
    int driving;            // under mu: a thread holds the drive
    int bg_watching;        // under mu: the background thread sleeps watching the link
    int stop;               // under mu
    int waiters;            // under mu: threads inside wait/run (destroy waits for them)
    hv_err failed;          // under mu (read without it as a hint): sticky failure
    char last_error[512];   // under mu
    uint64_t anon_seq;      // under mu
    eng_slot_t *slots;      // under mu: handle table
    uint32_t nslots;
    uint32_t *free_slots;
    uint32_t nfree;
    hv__engine_stats_t stats; // under mu

    // ---- driver-owned ----
    eng_req_t *pend_head;   // pending: taken from inq, not yet completed
    eng_req_t *pend_tail;
    atomic_size_t npend;    // pending count (written by the driver, read by anyone)
    hv__strmap_t pend_by_name;
    eng_entry_t *cache;     // cache[bit]
    uint32_t ncache, cache_cap;
    hv__strmap_t cache_by_name; // name -> (void *)(bit + 1)
    eng_req_t **bit_req;    // cache_cap entries: this rank's request announced with that bit
    unsigned char *frame;   // own frame being built
    size_t frame_cap;
    unsigned char *and_bits;
    size_t and_cap;
    eng_resolve_t *res;     // uncached names of this round
    size_t nres, res_cap;
    hv__strmap_t res_by_name;
    eng_req_t **exec;       // to execute this round
    size_t nexec, exec_cap;
    struct iovec *iov;
    size_t iov_cap;
    size_t *ag_buf;         // allgather: 2 * size entries (count, cap), then lens, offs
    const unsigned char **spec_ptr; // size entries: each frame's speculative data this round
    unsigned char *pinned;  // pinned host staging for device tensors without NCCL, owned
    size_t pinned_cap;
    void **nccl_bufs;       // device batch: buffers and counts for hv__nccl_allreduce
    size_t *nccl_counts;
    size_t nccl_cap;
};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static const char *kind_name(int k) {
    switch (k) {
    case HV__OP_ALLREDUCE:
        return "allreduce";
    case HV__OP_BROADCAST:
        return "broadcast";
    case HV__OP_ALLGATHER:
        return "allgather";
    case HV__OP_BARRIER:
        return "barrier";
    default:
        return "?";
    }
}

static void eng_poke(hv__engine_t *e) {
    uint64_t one = 1;
    ssize_t w = write(e->ev_fd, &one, sizeof(one));
    (void)w;
}

static void eng_drain(hv__engine_t *e) {
    uint64_t v;
    ssize_t r = read(e->ev_fd, &v, sizeof(v));
    (void)r;
}

static hv_err grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) {
        return HV_OK;
    }
    size_t c = *cap ? *cap : 16;
    while (c < need) {
        c *= 2;
    }
    void *q = hv_realloc(*p, c * elem);
    if (q == NULL) {
        return HV_ENOMEM;
    }
    *p = q;
    *cap = c;
    return HV_OK;
}

/* ---- completion (mu held) -------------------------------------------------------------------- */

/* Completes one request: the group's status keeps the first error. The request must not be
 * touched afterwards (a blocking caller's request lives on its stack). */
static void req_complete_locked(hv__engine_t *e, eng_req_t *r, hv_err rc) {
    eng_group_t *g = r->grp;
    if (hv__strmap_get(&e->live, r->name) == r) {
        hv__strmap_del(&e->live, r->name);
    }
    if (rc != HV_OK && g->status == HV_OK) {
        g->status = rc;
    }
    e->stats.tensors++;
    int heap = r->heap;
    if (--g->remaining == 0) {
        atomic_store_explicit(&g->done, 1, memory_order_release);
    }
    if (heap) {
        hv_free(r);
    }
}

static void pend_unlink(hv__engine_t *e, eng_req_t *r) {
    atomic_fetch_sub(&e->npend, 1);
    if (r->prev) {
        r->prev->next = r->next;
    } else {
        e->pend_head = r->next;
    }
    if (r->next) {
        r->next->prev = r->prev;
    } else {
        e->pend_tail = r->prev;
    }
    if (hv__strmap_get(&e->pend_by_name, r->name) == r) {
        hv__strmap_del(&e->pend_by_name, r->name);
    }
}

/* Driver: completes every request in exec[0..n) with its status (rcs may be NULL: all rc). */
static void eng_complete(hv__engine_t *e, eng_req_t **reqs, size_t n, const hv_err *rcs,
                         hv_err rc) {
    for (size_t i = 0; i < n; i++) {
        pend_unlink(e, reqs[i]);
    }
    pthread_mutex_lock(&e->mu);
    for (size_t i = 0; i < n; i++) {
        req_complete_locked(e, reqs[i], rcs ? rcs[i] : rc);
    }
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

/* ---- failure --------------------------------------------------------------------------------- */

static void eng_set_failed(hv__engine_t *e, hv_err rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void eng_set_failed(hv__engine_t *e, hv_err rc, const char *fmt, ...) {
    pthread_mutex_lock(&e->mu);
    int first = e->failed == HV_OK;
    if (first) {
        e->failed = rc;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->last_error, sizeof(e->last_error), fmt, ap);
        va_end(ap);
    }
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    if (first) {
        HV_LOG(HV_LOG_WARN, "engine", "HV-ENGINE-FAIL", "%s", e->last_error);
        hv__link_t *ls[3] = {hv__ring_link(e->ring),
                             e->o.intra ? hv__ring_link(e->o.intra) : NULL,
                             e->o.cross ? hv__ring_link(e->o.cross) : NULL};
        for (int i = 0; i < 3; i++) {
            if (ls[i] != NULL) {
                ls[i]->ops->abort(ls[i]);
            }
        }
        hv__nccl_abort(e->o.nccl);
        eng_poke(e);
    }
}

/* Driver: fails everything pending and queued with the sticky error. */
static void eng_fail_all(hv__engine_t *e) {
    pthread_mutex_lock(&e->mu);
    hv_err rc = e->failed != HV_OK ? e->failed : HV_ECANCELED;
    for (eng_req_t *r = e->pend_head, *next; r != NULL; r = next) {
        next = r->next;
        req_complete_locked(e, r, rc);
    }
    e->pend_head = e->pend_tail = NULL;
    atomic_store(&e->npend, 0);
    hv__strmap_clear(&e->pend_by_name);
    for (eng_req_t *r = e->inq_head, *next; r != NULL; r = next) {
        next = r->next;
        req_complete_locked(e, r, rc);
    }
    e->inq_head = e->inq_tail = NULL;
    e->inq_urgent = 0;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

void hv__engine_abort(hv__engine_t *e, hv_err why, const char *reason) {
    eng_set_failed(e, why, "rank %d: %s", e->rank, reason ? reason : hv_strerror(why));
}

hv_err hv__engine_status(hv__engine_t *e) {
    pthread_mutex_lock(&e->mu);
    hv_err rc = e->failed;
    pthread_mutex_unlock(&e->mu);
    return rc;
}

void hv__engine_last_error(hv__engine_t *e, char *buf, size_t len) {
    pthread_mutex_lock(&e->mu);
    snprintf(buf, len, "%s", e->last_error);
    pthread_mutex_unlock(&e->mu);
}

void hv__engine_stats(hv__engine_t *e, hv__engine_stats_t *out) {
    pthread_mutex_lock(&e->mu);
    *out = e->stats;
    pthread_mutex_unlock(&e->mu);
}

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
           c->root == r->d.root && (r->d.kind == HV__OP_ALLGATHER || c->count == r->d.count);
}

#define UNC_FIXED 16 // kind, dtype, op, pad, root (4), count (8)

/* Encodes this rank's frame for the pending list. Returns its length in *len. */
static hv_err eng_encode(hv__engine_t *e, size_t *len) {
    size_t nbytes = (e->ncache + 7) / 8;
    size_t need = ENG_HDR_LEN + nbytes + 8;
    uint32_t nunc = 0;
    size_t spec = 0;
    int spec_ok = 1;
    for (eng_req_t *r = e->pend_head; r != NULL; r = r->next) {
        r->bit = ENG_NO_BIT;
        intptr_t b = (intptr_t)hv__strmap_get(&e->cache_by_name, r->name) - 1;
        if (b >= 0 && meta_matches(&e->cache[b], r)) {
            r->bit = (int32_t)b;
            e->bit_req[b] = r;
            if (r->d.kind == HV__OP_ALLREDUCE && !r->device) {
                spec += r->bytes;
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
    hv_err rc = grow((void **)&e->frame, &e->frame_cap, need, 1);
    if (rc != HV_OK) {
        return rc;
    }
    unsigned char *f = e->frame;
    put32(f, ENG_FRAME_MAGIC);
    put32(f + 4, spec_ok ? ENG_FLAG_SPEC : 0);
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
        uint16_t nl = (uint16_t)strlen(r->name);
        memcpy(f + off, &nl, 2);
        memcpy(f + off + 2, r->name, nl);
        off += 2 + nl;
        unsigned char *m = f + off;
        m[0] = (unsigned char)r->d.kind;
        m[1] = (unsigned char)r->d.dtype;
        m[2] = (unsigned char)r->d.op;
        m[3] = 0;
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
                off += r->bytes;
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
    const unsigned char *unc;   // first uncached entry
    const unsigned char *spec;  // spec data (8-aligned) or NULL
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
        if ((rc = grow((void **)&e->nccl_bufs, &e->nccl_cap, n, sizeof(void *))) != HV_OK) {
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
    hv_err rc = grow((void **)&e->iov, &e->iov_cap, n, sizeof(struct iovec));
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
    if (rs[0]->device) {
        rc = eng_device_allreduce(e, rs, n, total);
    } else if (e->o.intra != NULL && total >= e->o.hier_min_bytes) {
        rc = hv__ring_allreduce_2d(e->o.intra, e->o.cross, &v, rs[0]->d.dtype, rs[0]->d.op,
                                   e->size);
    } else {
        rc = hv__ring_allreduce(e->ring, &v, rs[0]->d.dtype, rs[0]->d.op);
    }
    pthread_mutex_lock(&e->mu);
    e->stats.fused_calls++;
    pthread_mutex_unlock(&e->mu);
    if (rc != HV_OK) {
        eng_set_failed(e, rc, "rank %d: %s during allreduce of %zu tensor(s), %zu bytes, first '%s'",
                       e->rank, hv_strerror(rc), n, total, rs[0]->name);
    }
    return rc;
}

static hv_err eng_allgather(hv__engine_t *e, eng_req_t *r, hv_err *op_rc) {
    int n = e->size;
    size_t *cc = e->ag_buf;               // (count, cap) per rank
    size_t *lens = e->ag_buf + 2 * n, *offs = e->ag_buf + 3 * n;
    cc[2 * e->rank] = r->d.count;
    cc[2 * e->rank + 1] = r->d.out_cap;
    for (int k = 0; k < n; k++) {
        lens[k] = 2 * sizeof(size_t);
        offs[k] = (size_t)k * 2 * sizeof(size_t);
    }
    hv_err rc = hv__ring_allgatherv(e->ring, cc, lens, offs);
    if (rc != HV_OK) {
        eng_set_failed(e, rc, "rank %d: %s during allgather of '%s'", e->rank, hv_strerror(rc),
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
    if (r->device) {
        // Device buffers: gather in pinned host memory, then one copy to the device.
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
        eng_set_failed(e, rc, "rank %d: %s during allgather of '%s'", e->rank, hv_strerror(rc),
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
        eng_set_failed(e, rc, "rank %d: copying a device tensor failed", e->rank);
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
            eng_complete(e, x + i, j - i, NULL, HV_OK);
        }
        i = j;
    }
    for (i = nar; i < n && rc == HV_OK; i++) {
        eng_req_t *r = x[i];
        hv_err op_rc = HV_OK;
        switch (r->d.kind) {
        case HV__OP_BROADCAST:
            if (r->device) {
                // Staged through pinned host memory (NCCL broadcast is not wired in yet).
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
                eng_set_failed(e, rc, "rank %d: %s during broadcast of '%s' from rank %d",
                               e->rank, hv_strerror(rc), r->name, r->d.root);
            }
            break;
        case HV__OP_ALLGATHER:
            rc = eng_allgather(e, r, &op_rc);
            break;
        default: // barrier: the round itself was the barrier
            break;
        }
        if (rc == HV_OK) {
            eng_complete(e, &x[i], 1, &op_rc, op_rc);
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

static void meta_diff(char *buf, size_t len, const char *name, int k, const eng_resolve_t *a,
                      int kind, int dtype, int op, int root, uint64_t count) {
    snprintf(buf, len,
             "ranks disagree on '%s': %s %s %s root %d count %llu vs rank %d: %s %s %s root %d "
             "count %llu",
             name, kind_name(a->kind), hv__dtype_name((hv_dtype)a->dtype),
             hv__op_name((hv_op)a->op), (int)a->root, (unsigned long long)a->count, k,
             kind_name(kind), hv__dtype_name((hv_dtype)dtype), hv__op_name((hv_op)op), root,
             (unsigned long long)count);
}

static int resolve_same(const eng_resolve_t *a, int kind, int dtype, int op, int root,
                        uint64_t count) {
    return a->kind == kind && a->dtype == dtype && a->op == op && a->root == root &&
           (kind == HV__OP_ALLGATHER || a->count == count);
}

/* One negotiation round and the execution of what it found ready. */
static hv_err eng_round(hv__engine_t *e) {
    // Take the incoming queue.
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
        eng_set_failed(e, rc, "rank %d: out of memory in the engine", e->rank);
        return rc;
    }
    uint64_t t_start = now_ns();
    size_t flen = 0;
    if ((rc = eng_encode(e, &flen)) != HV_OK) {
        eng_set_failed(e, rc, "rank %d: out of memory encoding a frame", e->rank);
        return rc;
    }
    if ((rc = hv__ring_allgather_frames(e->ring, e->frame, flen)) != HV_OK) {
        eng_set_failed(e, rc, "rank %d: %s while negotiating with the other ranks", e->rank,
                       hv_strerror(rc));
        return rc;
    }
    int n = e->size;
    size_t nbytes = (e->ncache + 7) / 8;
    if ((rc = grow((void **)&e->and_bits, &e->and_cap, nbytes + 1, 1)) != HV_OK) {
        eng_set_failed(e, rc, "rank %d: out of memory", e->rank);
        return rc;
    }
    memset(e->and_bits, 0xff, nbytes);
    int all_spec = 1, same_bits = 1;
    uint32_t total_unc = 0;
    frame_view_t v0;
    for (int k = 0; k < n; k++) {
        frame_view_t v;
        if ((rc = eng_view(e, k, &v)) == HV_OK) {
            e->spec_ptr[k] = v.spec;
        }
        if (rc != HV_OK) {
            eng_set_failed(e, rc, "rank %d: malformed negotiation frame from rank %d", e->rank, k);
            return rc;
        }
        if (k == 0) {
            v0 = v;
        } else if (memcmp(v.bits, v0.bits, nbytes) != 0) {
            same_bits = 0;
        }
        for (size_t i = 0; i < nbytes; i++) {
            e->and_bits[i] &= v.bits[i];
        }
        all_spec &= (v.flags & ENG_FLAG_SPEC) != 0;
        total_unc += v.nunc;
    }
    if (nbytes > 0 && (e->ncache % 8) != 0) {
        e->and_bits[nbytes - 1] &= (unsigned char)((1u << (e->ncache % 8)) - 1);
    }
    e->nexec = 0;
    // Fast path: every rank announced the same cached allreduces and sent their data.
    if (all_spec && same_bits && total_unc == 0) {
        size_t off = 0;
        size_t cnt = 0;
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
            off += r->bytes;
            if ((rc = grow((void **)&e->exec, &e->exec_cap, cnt + 1, sizeof(*e->exec))) !=
                HV_OK) {
                eng_set_failed(e, rc, "rank %d: out of memory", e->rank);
                return rc;
            }
            e->exec[cnt++] = r;
        }
        if (cnt > 0) {
            eng_complete(e, e->exec, cnt, NULL, HV_OK);
            pthread_mutex_lock(&e->mu);
            e->stats.fast_rounds++;
            pthread_mutex_unlock(&e->mu);
        }
        return HV_OK;
    }
    // Cached names ready everywhere, in bit order.
    for (uint32_t b = 0; b < e->ncache; b++) {
        if (e->and_bits[b / 8] & (1u << (b % 8))) {
            if ((rc = grow((void **)&e->exec, &e->exec_cap, e->nexec + 1, sizeof(*e->exec))) !=
                HV_OK) {
                eng_set_failed(e, rc, "rank %d: out of memory", e->rank);
                return rc;
            }
            e->exec[e->nexec++] = e->bit_req[b];
        }
    }
    // Names announced uncached by some rank: count the ranks that have each pending.
    e->nres = 0;
    hv__strmap_clear(&e->res_by_name);
    for (int k = 0; k < n && total_unc > 0; k++) {
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
            const unsigned char *m = p + 2 + nl;
            int kind = m[0], dtype = m[1], op = m[2];
            int root = (int32_t)get32(m + 4);
            uint64_t count = get64(m + 8);
            p += 2 + nl + UNC_FIXED;
            uintptr_t ri = (uintptr_t)hv__strmap_get(&e->res_by_name, name); // index + 1
            eng_resolve_t *rs = ri ? &e->res[ri - 1] : NULL;
            if (rs == NULL) {
                if ((rc = grow((void **)&e->res, &e->res_cap, e->nres + 1, sizeof(*e->res))) !=
                    HV_OK) {
                    eng_set_failed(e, rc, "rank %d: out of memory", e->rank);
                    return rc;
                }
                // The record keeps its own copy of the name (frames are not NUL-terminated).
                rs = &e->res[e->nres++];
                memset(rs, 0, sizeof(*rs));
                rs->name = NULL;
                rs->kind = (uint8_t)kind;
                rs->dtype = (uint8_t)dtype;
                rs->op = (uint8_t)op;
                rs->root = root;
                rs->count = count;
            } else if (!rs->conflict && !resolve_same(rs, kind, dtype, op, root, count)) {
                rs->conflict = 1;
                meta_diff(rs->why, sizeof(rs->why), name, k, rs, kind, dtype, op, root, count);
            }
            rs->ranks++;
            if (rs->name == NULL) {
                char *copy = hv_strdup(name);
                if (copy == NULL ||
                    hv__strmap_put(&e->res_by_name, copy, (void *)(uintptr_t)e->nres) != HV_OK) {
                    hv_free(copy);
                    eng_set_failed(e, HV_ENOMEM, "rank %d: out of memory", e->rank);
                    return HV_ENOMEM;
                }
                rs->name = copy;
            }
        }
    }
    // Ranks that announced a cached bit for the name count too.
    for (size_t i = 0; i < e->nres; i++) {
        eng_resolve_t *rs = &e->res[i];
        intptr_t b = (intptr_t)hv__strmap_get(&e->cache_by_name, rs->name) - 1;
        if (b < 0) {
            continue;
        }
        const eng_entry_t *c = &e->cache[b];
        for (int k = 0; k < n; k++) {
            frame_view_t v;
            eng_view(e, k, &v);
            if (v.bits[b / 8] & (1u << (b % 8))) {
                rs->ranks++;
                if (!rs->conflict &&
                    !resolve_same(rs, c->kind, c->dtype, c->op, c->root, c->count)) {
                    rs->conflict = 1;
                    meta_diff(rs->why, sizeof(rs->why), rs->name, k, rs, c->kind, c->dtype,
                              c->op, c->root, c->count);
                }
            }
        }
    }
    // Resolve in first-appearance order (the same on every rank).
    for (size_t i = 0; i < e->nres && rc == HV_OK; i++) {
        eng_resolve_t *rs = &e->res[i];
        if (rs->ranks < n) {
            continue;
        }
        eng_req_t *mine = hv__strmap_get(&e->pend_by_name, rs->name);
        if (mine == NULL) {
            rc = HV_EINTERNAL; // every rank has it pending, so must we
            eng_set_failed(e, rc, "rank %d: '%s' resolved but not pending here", e->rank,
                           rs->name);
            break;
        }
        if (rs->conflict) {
            HV_LOG(HV_LOG_ERROR, "engine", "HV-ENGINE-MISMATCH", "rank %d: %s", e->rank, rs->why);
            pthread_mutex_lock(&e->mu);
            snprintf(e->last_error, sizeof(e->last_error), "%s", rs->why);
            pthread_mutex_unlock(&e->mu);
            hv_err bad = HV_EPROTO;
            eng_complete(e, &mine, 1, &bad, bad);
            continue;
        }
        intptr_t b = (intptr_t)hv__strmap_get(&e->cache_by_name, rs->name) - 1;
        if (b >= 0) {
            eng_entry_t *c = &e->cache[b]; // same name, new meta: update in place
            c->kind = rs->kind;
            c->dtype = rs->dtype;
            c->op = rs->op;
            c->root = rs->root;
            c->count = rs->count;
        } else {
            int32_t bit;
            if ((rc = cache_add(e, rs, &bit)) != HV_OK) {
                eng_set_failed(e, rc, "rank %d: out of memory", e->rank);
                break;
            }
        }
        if ((rc = grow((void **)&e->exec, &e->exec_cap, e->nexec + 1, sizeof(*e->exec))) !=
            HV_OK) {
            eng_set_failed(e, rc, "rank %d: out of memory", e->rank);
            break;
        }
        e->exec[e->nexec++] = mine;
    }
    for (size_t i = 0; i < e->nres; i++) {
        hv_free((void *)e->res[i].name);
    }
    e->nres = 0;
    hv__strmap_clear(&e->res_by_name);
    if (rc != HV_OK) {
        return rc;
    }
    // Allreduces first, grouped by (dtype, op) in list order; then the others in list order.
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
    uint64_t t_neg = now_ns();
    rc = eng_execute(e);
    HV_LOG(HV_LOG_DEBUG, "engine", "HV-ENGINE-ROUND",
           "rank %d: round: negotiation %.1f us, %zu ready, execution %.1f us", e->rank,
           (double)(t_neg - t_start) / 1e3, e->nexec, (double)(now_ns() - t_neg) / 1e3);
    return rc;
}

/* ---- driving --------------------------------------------------------------------------------- */

/* True when the link has data (or a failure) waiting from the left neighbour. */
static int link_has_input(hv__engine_t *e) {
    hv__link_t *l = hv__ring_link(e->ring);
    return l != NULL && l->ops->has_input(l);
}

/* Waits up to timeout_ns (-1: forever) for the event fd or, if watch_link, the link. Returns
 * 2 when the link has input, 1 when the event fd fired, 0 on timeout. driving: this thread
 * holds the drive, so wake-ups of the link are its to consume. */
static int eng_sleep(hv__engine_t *e, int64_t timeout_ns, int watch_link, int driving) {
    hv__link_t *l = watch_link ? hv__ring_link(e->ring) : NULL;
    struct pollfd p[2] = {{.fd = e->ev_fd, .events = POLLIN}, {.fd = -1}};
    int np = 1;
    if (l != NULL) {
        if (l->ops->idle_arm(l) == 1) {
            return 2;
        }
        p[1] = (struct pollfd){.fd = l->ops->idle_fd(l), .events = POLLIN};
        np = 2;
    }
    struct timespec ts, *tsp = NULL;
    if (timeout_ns >= 0) {
        ts.tv_sec = timeout_ns / 1000000000;
        ts.tv_nsec = timeout_ns % 1000000000;
        tsp = &ts;
    }
    int r = ppoll(p, (nfds_t)np, tsp, NULL);
    int input = 0;
    if (l != NULL) {
        l->ops->idle_disarm(l);
        input = l->ops->has_input(l);
        if (driving) {
            l->ops->drain(l);
        }
    }
    if (r > 0 && (p[0].revents & POLLIN)) {
        eng_drain(e);
    }
    if (input) {
        return 2;
    }
    return r > 0 && (p[0].revents & POLLIN) ? 1 : 0;
}

/* What the driver should do now: 1 run a round, 0 nothing (wait). Sets *wait_ns for the wait
 * (-1: no deadline) and *watch_link. */
static int eng_decide(hv__engine_t *e, uint64_t link_since, int64_t *wait_ns) {
    pthread_mutex_lock(&e->mu);
    int have_inq = e->inq_head != NULL, urgent = e->inq_urgent;
    uint64_t first = e->inq_first_ns;
    pthread_mutex_unlock(&e->mu);
    uint64_t now = now_ns();
    *wait_ns = -1;
    if (have_inq) {
        uint64_t due = urgent ? now : first + (uint64_t)e->o.cycle_time_us * 1000u;
        if (now >= due) {
            return 1;
        }
        *wait_ns = (int64_t)(due - now);
    }
    if (link_since != 0) {
        // Another rank started a round. Join at once if we have anything pending; else (nothing
        // can complete without us) after the join delay, so that a busy peer is not kept
        // negotiating with an idle one.
        if (atomic_load(&e->npend) > 0 || have_inq) {
            return 1;
        }
        uint64_t due = link_since + e->join_delay_ns;
        if (now >= due) {
            return 1;
        }
        int64_t w = (int64_t)(due - now);
        if (*wait_ns < 0 || w < *wait_ns) {
            *wait_ns = w;
        }
    }
    return 0;
}

static void eng_release_drive(hv__engine_t *e) {
    pthread_mutex_lock(&e->mu);
    e->driving = 0;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

static void *eng_thread(void *arg) {
    hv__engine_t *e = arg;
    uint64_t link_since = 0; // when input from the left was first seen while idle (0: none)
    for (;;) {
        pthread_mutex_lock(&e->mu);
        if (e->driving) {
            while (!e->stop && e->driving) {
                pthread_cond_wait(&e->cv, &e->mu);
            }
            link_since = 0; // whatever input there was, the driver handled it
        }
        if (e->stop) {
            pthread_mutex_unlock(&e->mu);
            break;
        }
        if (e->failed != HV_OK) {
            // Nothing can run any more: fail what arrives, until stop.
            e->driving = 1;
            pthread_mutex_unlock(&e->mu);
            eng_fail_all(e);
            eng_release_drive(e);
            eng_sleep(e, -1, 0, 0);
            continue;
        }
        int busy = e->inq_head != NULL || atomic_load(&e->npend) > 0;
        pthread_mutex_unlock(&e->mu);
        if (link_since == 0 && link_has_input(e)) {
            link_since = now_ns();
        }
        int64_t wait_ns;
        if (!eng_decide(e, link_since, &wait_ns)) {
            if (busy) {
                // Work is pending here: join a round the moment another rank starts one.
                // A driver that takes over meanwhile may consume the doorbell this sleep
                // relies on (shared memory), so it pokes us when it lets go (bg_watching).
                pthread_mutex_lock(&e->mu);
                e->bg_watching = link_since == 0;
                int taken = e->driving;
                pthread_mutex_unlock(&e->mu);
                int w = taken ? 1 : eng_sleep(e, wait_ns, link_since == 0, 0);
                pthread_mutex_lock(&e->mu);
                e->bg_watching = 0;
                pthread_mutex_unlock(&e->mu);
                if (w == 2 && link_since == 0) {
                    link_since = now_ns();
                }
            } else {
                // Idle: nothing can complete without a local submission (which pokes us, or is
                // driven by its blocking caller), so only look at the link at the join-delay
                // pace, to prove liveness and notice a dead peer. Not watching it avoids waking
                // up for every round a blocking caller drives.
                int64_t d = (int64_t)e->join_delay_ns;
                eng_sleep(e, wait_ns < 0 || wait_ns > d ? d : wait_ns, 0, 0);
            }
            continue;
        }
        pthread_mutex_lock(&e->mu);
        if (e->driving || e->stop) {
            pthread_mutex_unlock(&e->mu);
            continue; // a caller took the drive; re-evaluate when it is released
        }
        e->driving = 1;
        int have_inq = e->inq_head != NULL;
        pthread_mutex_unlock(&e->mu);
        // Re-check under the drive: a caller may have consumed the round that woke us.
        if (have_inq || link_has_input(e)) {
            if (eng_round(e) != HV_OK) {
                eng_fail_all(e);
            }
        } else if (hv__ring_link(e->ring) != NULL) {
            hv__link_t *l = hv__ring_link(e->ring);
            l->ops->drain(l); // stale wake-ups only
        }
        link_since = 0;
        eng_release_drive(e);
    }
    return NULL;
}

/* A blocking caller drives rounds itself until its group is done: no thread hand-off on the
 * critical path. Called with the drive held. */
static void eng_drive_until(hv__engine_t *e, eng_group_t *g) {
    uint64_t link_since = 0;
    uint64_t spin_ns = (uint64_t)e->o.spin_us * 1000u;
    while (!atomic_load_explicit(&g->done, memory_order_acquire)) {
        if (hv__engine_status(e) != HV_OK) {
            eng_fail_all(e);
            break;
        }
        if (link_since == 0 && link_has_input(e)) {
            link_since = now_ns();
        }
        int64_t wait_ns;
        if (eng_decide(e, link_since, &wait_ns)) {
            if (eng_round(e) != HV_OK) {
                eng_fail_all(e);
                break;
            }
            link_since = 0;
            continue;
        }
        // Spin on the link briefly (the other ranks are probably about to answer), then sleep.
        uint64_t t0 = now_ns();
        int got = 0;
        while (now_ns() - t0 < spin_ns) {
            if (link_has_input(e)) {
                got = 1;
                break;
            }
            sched_yield();
        }
        if (got) {
            link_since = link_since ? link_since : now_ns();
            continue;
        }
        int w = eng_sleep(e, wait_ns, link_since == 0, 1);
        if (w == 2 && link_since == 0) {
            link_since = now_ns();
        }
    }
}

/* ---- submission ------------------------------------------------------------------------------ */

static hv_err desc_check(const hv__engine_t *e, const hv__op_desc_t *d) {
    if (d->kind == HV__OP_BARRIER) {
        return HV_OK;
    }
    if (!hv__dtype_valid(d->dtype)) {
        return HV_EINVAL;
    }
    if (d->name != NULL && (d->name[0] == '\0' || strlen(d->name) > HV__NAME_MAX)) {
        return HV_EINVAL;
    }
    if (d->count > 0 && d->out == NULL) {
        return HV_EINVAL;
    }
    size_t esize = hv_dtype_size(d->dtype);
    if (d->count > SIZE_MAX / 2 / esize) {
        return HV_ETOOBIG;
    }
    switch (d->kind) {
    case HV__OP_ALLREDUCE:
        return hv__op_valid(d->op) && (d->count == 0 || d->in != NULL) ? HV_OK : HV_EINVAL;
    case HV__OP_BROADCAST:
        return d->root >= 0 && d->root < e->size ? HV_OK : HV_EINVAL;
    case HV__OP_ALLGATHER:
        return (d->count == 0 || d->in != NULL) && (d->out_cap == 0 || d->out != NULL) ? HV_OK
                                                                                         : HV_EINVAL;
    default:
        return HV_EINVAL;
    }
}

static void req_init(eng_req_t *r, const hv__op_desc_t *d, const char *name, eng_group_t *g) {
    memset(r, 0, sizeof(*r));
    r->d = *d;
    snprintf(r->name, sizeof(r->name), "%s", name);
    r->d.name = r->name;
    r->grp = g;
    r->bit = ENG_NO_BIT;
    r->bytes = d->kind == HV__OP_BARRIER ? 0 : d->count * hv_dtype_size(d->dtype);
    r->device = d->kind != HV__OP_BARRIER && hv__gpu_count() > 0 &&
                (hv__gpu_is_device(d->out) || hv__gpu_is_device(d->in));
    if (d->kind == HV__OP_BARRIER) {
        r->d.count = 0;
        r->d.dtype = HV_UINT8;
    }
    if (d->kind != HV__OP_ALLREDUCE) {
        r->d.op = HV_SUM;
    }
    if (d->kind != HV__OP_BROADCAST) {
        r->d.root = 0;
    }
}

/* Queues reqs (mu held). Fails with HV_EEXIST if a name is live (nothing queued then). */
static hv_err enqueue_locked(hv__engine_t *e, eng_req_t **rs, size_t n, int urgent) {
    for (size_t i = 0; i < n; i++) {
        if (hv__strmap_get(&e->live, rs[i]->name) != NULL) {
            return HV_EEXIST;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(rs[i]->name, rs[j]->name) == 0) {
                return HV_EEXIST;
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (hv__strmap_put(&e->live, rs[i]->name, rs[i]) != HV_OK) {
            for (size_t j = 0; j < i; j++) {
                hv__strmap_del(&e->live, rs[j]->name);
            }
            return HV_ENOMEM;
        }
    }
    if (e->inq_head == NULL) {
        e->inq_first_ns = now_ns();
    }
    for (size_t i = 0; i < n; i++) {
        rs[i]->next = NULL;
        if (e->inq_tail) {
            e->inq_tail->next = rs[i];
        } else {
            e->inq_head = rs[i];
        }
        e->inq_tail = rs[i];
    }
    e->inq_urgent |= urgent;
    return HV_OK;
}

static hv_err slot_alloc_locked(hv__engine_t *e, eng_group_t *g, hv_handle_t *out) {
    if (e->nfree == 0) {
        uint32_t n = e->nslots ? e->nslots * 2 : 64;
        eng_slot_t *s = hv_realloc(e->slots, n * sizeof(*s));
        if (s == NULL) {
            return HV_ENOMEM;
        }
        e->slots = s;
        uint32_t *f = hv_realloc(e->free_slots, n * sizeof(*f));
        if (f == NULL) {
            return HV_ENOMEM;
        }
        e->free_slots = f;
        for (uint32_t i = e->nslots; i < n; i++) {
            e->slots[i] = (eng_slot_t){.gen = 1, .grp = NULL};
            e->free_slots[e->nfree++] = n - 1 - (i - e->nslots);
        }
        e->nslots = n;
    }
    uint32_t idx = e->free_slots[--e->nfree];
    e->slots[idx].grp = g;
    *out = ((uint64_t)e->slots[idx].gen << 32) | (uint64_t)(idx + 1);
    return HV_OK;
}

static eng_slot_t *slot_get_locked(hv__engine_t *e, hv_handle_t h) {
    uint32_t idx = (uint32_t)(h & 0xffffffffu);
    if (idx == 0 || idx > e->nslots) {
        return NULL;
    }
    eng_slot_t *s = &e->slots[idx - 1];
    if (s->grp == NULL || s->gen != (uint32_t)(h >> 32)) {
        return NULL;
    }
    return s;
}

static void slot_release_locked(hv__engine_t *e, eng_slot_t *s) {
    hv_free(s->grp);
    s->grp = NULL;
    s->gen++;
    e->free_slots[e->nfree++] = (uint32_t)(s - e->slots);
}

hv_err hv__engine_submit(hv__engine_t *e, const hv__op_desc_t *ops, size_t n, hv_handle_t *out) {
    if (n == 0 || ops == NULL || out == NULL) {
        return HV_EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        hv_err rc = desc_check(e, &ops[i]);
        if (rc != HV_OK) {
            return rc;
        }
        if (ops[i].name == NULL) {
            return HV_EINVAL;
        }
    }
    eng_group_t *g = hv_calloc(1, sizeof(*g));
    eng_req_t **rs = hv_calloc(n, sizeof(*rs));
    int was_empty = 0;
    hv_err rc = g && rs ? HV_OK : HV_ENOMEM;
    for (size_t i = 0; i < n && rc == HV_OK; i++) {
        rs[i] = hv_malloc(sizeof(eng_req_t));
        if (rs[i] == NULL) {
            rc = HV_ENOMEM;
            break;
        }
        req_init(rs[i], &ops[i], ops[i].name, g);
        rs[i]->heap = 1;
    }
    if (rc == HV_OK) {
        g->heap = 1;
        g->remaining = (uint32_t)n;
        pthread_mutex_lock(&e->mu);
        if (e->failed != HV_OK) {
            rc = e->failed;
        } else if (e->stop) {
            rc = HV_ECANCELED;
        } else if ((rc = slot_alloc_locked(e, g, out)) == HV_OK) {
            was_empty = e->inq_head == NULL;
            rc = enqueue_locked(e, rs, n, 0);
            if (rc != HV_OK) {
                eng_slot_t *s = slot_get_locked(e, *out);
                s->grp = NULL; // g is freed below
                s->gen++;
                e->free_slots[e->nfree++] = (uint32_t)(s - e->slots);
            }
        }
        pthread_mutex_unlock(&e->mu);
    }
    if (rc != HV_OK) {
        for (size_t i = 0; rs != NULL && i < n; i++) {
            hv_free(rs[i]);
        }
        hv_free(rs);
        hv_free(g);
        return rc;
    }
    hv_free(rs);
    if (was_empty) {
        eng_poke(e); // the background thread starts the cycle timer
    }
    return HV_OK;
}

/* Waits for g (not in the handle table or held by the caller) to be done; drives if it can. */
static void eng_wait_group(hv__engine_t *e, eng_group_t *g, int may_drive) {
    uint64_t spin_ns = (uint64_t)e->o.spin_us * 1000u;
    int spun = 0;
    pthread_mutex_lock(&e->mu);
    while (!atomic_load_explicit(&g->done, memory_order_acquire)) {
        if (may_drive && !e->driving && !e->stop && e->failed == HV_OK) {
            e->driving = 1;
            pthread_mutex_unlock(&e->mu);
            eng_drive_until(e, g);
            pthread_mutex_lock(&e->mu);
            e->driving = 0;
            pthread_cond_broadcast(&e->cv);
            if (e->inq_head != NULL || e->bg_watching) {
                // Submissions arrived meanwhile, or the background thread sleeps on the link
                // (we may have taken its wake-up): it takes over from here.
                pthread_mutex_unlock(&e->mu);
                eng_poke(e);
                pthread_mutex_lock(&e->mu);
            }
            continue;
        }
        if (e->failed != HV_OK && !e->driving) {
            // Nobody will complete it: fail it here (the background thread may be asleep).
            e->driving = 1;
            pthread_mutex_unlock(&e->mu);
            eng_fail_all(e);
            pthread_mutex_lock(&e->mu);
            e->driving = 0;
            pthread_cond_broadcast(&e->cv);
            continue;
        }
        if (!spun) {
            // Another thread drives; it is likely to finish soon: spin briefly before sleeping.
            spun = 1;
            pthread_mutex_unlock(&e->mu);
            uint64_t t0 = now_ns();
            while (!atomic_load_explicit(&g->done, memory_order_acquire) &&
                   now_ns() - t0 < spin_ns) {
                sched_yield();
            }
            pthread_mutex_lock(&e->mu);
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&e->cv, &e->mu, &ts);
    }
    pthread_mutex_unlock(&e->mu);
}

hv_err hv__engine_run(hv__engine_t *e, const hv__op_desc_t *op) {
    hv_err rc = desc_check(e, op);
    if (rc != HV_OK) {
        return rc;
    }
    eng_group_t g = {.remaining = 1};
    eng_req_t r;
    char name[HV__NAME_MAX + 1];
    pthread_mutex_lock(&e->mu);
    if (op->name == NULL) {
        // Unnamed blocking calls match across ranks by their sequence number. The names cycle
        // (a rank cannot run ENG_ANON_NAMES calls ahead of the others: each one waits for
        // them), so the response cache holds a few entries, not one per call.
        snprintf(name, sizeof(name), "~%s.%llu", kind_name(op->kind),
                 (unsigned long long)(++e->anon_seq % ENG_ANON_NAMES));
    } else {
        snprintf(name, sizeof(name), "%s", op->name);
    }
    req_init(&r, op, name, &g);
    eng_req_t *rp = &r;
    if (e->failed != HV_OK) {
        rc = e->failed;
    } else if (e->stop) {
        rc = HV_ECANCELED;
    } else {
        rc = enqueue_locked(e, &rp, 1, 1);
    }
    if (rc == HV_OK) {
        e->waiters++;
    }
    pthread_mutex_unlock(&e->mu);
    if (rc != HV_OK) {
        return rc;
    }
    eng_wait_group(e, &g, 1);
    pthread_mutex_lock(&e->mu);
    rc = g.status;
    e->waiters--;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return rc;
}

hv_err hv__engine_wait(hv__engine_t *e, hv_handle_t h) {
    pthread_mutex_lock(&e->mu);
    eng_slot_t *s = slot_get_locked(e, h);
    if (s == NULL) {
        pthread_mutex_unlock(&e->mu);
        return HV_ENOTFOUND;
    }
    eng_group_t *g = s->grp;
    e->waiters++;
    pthread_mutex_unlock(&e->mu);
    // An async group is driven by the background thread; waiting callers may drive too (then
    // a thread waiting on the last tensor of a step does the work without a hand-off).
    eng_wait_group(e, g, 1);
    pthread_mutex_lock(&e->mu);
    hv_err rc = g->status;
    s = slot_get_locked(e, h);
    if (s != NULL && s->grp == g) {
        slot_release_locked(e, s);
    } else {
        rc = HV_ENOTFOUND; // released by a concurrent wait/test
    }
    e->waiters--;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return rc;
}

hv_err hv__engine_test(hv__engine_t *e, hv_handle_t h, int *done) {
    if (done == NULL) {
        return HV_EINVAL;
    }
    pthread_mutex_lock(&e->mu);
    eng_slot_t *s = slot_get_locked(e, h);
    if (s == NULL) {
        pthread_mutex_unlock(&e->mu);
        return HV_ENOTFOUND;
    }
    hv_err rc = HV_OK;
    *done = atomic_load_explicit(&s->grp->done, memory_order_acquire);
    if (*done) {
        rc = s->grp->status;
        slot_release_locked(e, s);
    }
    pthread_mutex_unlock(&e->mu);
    return rc;
}

/* ---- lifetime -------------------------------------------------------------------------------- */

hv_err hv__engine_create(hv__ring_t *ring, const hv__engine_opts_t *o, hv__engine_t **out) {
    hv__engine_t *e = hv_calloc(1, sizeof(*e));
    if (e == NULL) {
        return HV_ENOMEM;
    }
    e->ring = ring;
    e->rank = hv__ring_rank(ring);
    e->size = hv__ring_size(ring);
    e->o = *o;
    if (e->o.fusion_threshold == 0) {
        e->o.fusion_threshold = 128u << 20;
    }
    if (e->o.cache_capacity == 0) {
        e->o.cache_capacity = 1u << 16;
    }
    if (e->o.peer_timeout_ms == 0) {
        e->o.peer_timeout_ms = 5000;
    }
    // Idle ranks delay joining by at most timeout / (2 size): even a chain of idle ranks
    // answers within half the peer timeout.
    e->join_delay_ns = (uint64_t)e->o.peer_timeout_ms * 1000000u / (2u * (unsigned)e->size);
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    hv__strmap_init(&e->live);
    hv__strmap_init(&e->pend_by_name);
    hv__strmap_init(&e->cache_by_name);
    hv__strmap_init(&e->res_by_name);
    e->ev_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    e->ag_buf = hv_calloc((size_t)e->size * 4, sizeof(size_t));
    e->spec_ptr = hv_calloc((size_t)e->size, sizeof(*e->spec_ptr));
    hv_err rc = HV_OK;
    if (e->ev_fd < 0) {
        rc = hv_err_from_errno(errno);
    } else if (e->ag_buf == NULL || e->spec_ptr == NULL) {
        rc = HV_ENOMEM;
    } else if (pthread_create(&e->thread, NULL, eng_thread, e) != 0) {
        rc = HV_ENOMEM;
    } else {
        e->thread_started = 1;
    }
    if (rc != HV_OK) {
        hv__engine_destroy(e);
        return rc;
    }
    *out = e;
    return HV_OK;
}

void hv__engine_destroy(hv__engine_t *e) {
    if (e == NULL) {
        return;
    }
    pthread_mutex_lock(&e->mu);
    e->stop = 1;
    if (e->failed == HV_OK) {
        e->failed = HV_ECANCELED;
        snprintf(e->last_error, sizeof(e->last_error), "hv_shutdown with operations pending");
    }
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    hv__link_t *l = hv__ring_link(e->ring);
    if (e->thread_started) {
        eng_poke(e);
        pthread_join(e->thread, NULL);
    }
    // Wait (bounded) for a driving caller to notice, then fail the rest and for waiters to go.
    pthread_mutex_lock(&e->mu);
    for (int i = 0; i < 500 && (e->driving || e->waiters > 0); i++) {
        if (e->driving && l != NULL) {
            pthread_mutex_unlock(&e->mu);
            l->ops->abort(l);
            pthread_mutex_lock(&e->mu);
        }
        if (!e->driving && e->waiters > 0) {
            e->driving = 1;
            pthread_mutex_unlock(&e->mu);
            eng_fail_all(e);
            pthread_mutex_lock(&e->mu);
            e->driving = 0;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 10 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&e->cv, &e->mu, &ts);
    }
    pthread_mutex_unlock(&e->mu);
    eng_fail_all(e);
    for (uint32_t i = 0; i < e->nslots; i++) {
        hv_free(e->slots[i].grp);
    }
    hv_free(e->slots);
    hv_free(e->free_slots);
    for (uint32_t i = 0; i < e->ncache; i++) {
        hv_free(e->cache[i].name);
    }
    hv_free(e->cache);
    hv_free(e->bit_req);
    hv_free(e->frame);
    hv_free(e->and_bits);
    hv_free(e->res);
    hv_free(e->exec);
    hv_free(e->iov);
    hv_free(e->ag_buf);
    hv_free(e->spec_ptr);
    hv__gpu_host_free(e->pinned);
    hv_free(e->nccl_bufs);
    hv_free(e->nccl_counts);
    hv__strmap_fini(&e->live);
    hv__strmap_fini(&e->pend_by_name);
    hv__strmap_fini(&e->cache_by_name);
    hv__strmap_fini(&e->res_by_name);
    if (e->ev_fd >= 0) {
        close(e->ev_fd);
    }
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    hv_free(e);
}
