/*
 * ring: see ring.h. Everything is built on one progress loop, ring_xfer(): it sends a byte range
 * of one scatter list to the right neighbour while it receives a byte range from the left one,
 * either copying it into place or reducing it into place through a cache-sized staging piece
 * (or straight from the transport's memory when it offers a zero-copy view). Neither direction
 * waits for the other, so two neighbours that send to each other never deadlock, and reduction
 * overlaps with the kernel moving the next bytes. When nothing moves it spins for spin_us, then
 * blocks in the transport's wait; timeout_ms without progress fails the call.
 */
#include "ring.h"

#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "mem.h"
#include "reduce.h"

#define RING_IOV_MAX 64
#define RING_WAIT_SLICE_MS 50
#define RING_FRAME_MAX (256u << 20) // a negotiation frame larger than this is a protocol error

typedef struct frame_s {
    unsigned char *p; // owned
    size_t len;
    size_t cap;
} frame_t;

struct hv__ring_s {
    int rank;
    int size;
    hv__link_t *link; // borrowed (owned by world.c)
    hv__ring_opts_t o;
    unsigned char *stage;   // o.stage_bytes, owned: receive staging for reductions
    unsigned char *scratch; // small-allreduce gather area, owned, grows
    size_t scratch_cap;
    frame_t *frames;   // size entries, owned
    size_t *blk_len;   // 2 * size entries, owned: block lengths then offsets (small path)
    struct iovec *own; // owned segments after a reduce-scatter (hierarchical), owned
    size_t nown, own_cap;
    atomic_uint broken; // HV__RING_LEFT/RIGHT: sides whose neighbour failed (set by the driver)
};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

hv_err hv__ring_create(int rank, int size, hv__link_t *link, const hv__ring_opts_t *opts,
                       hv__ring_t **out) {
    if (size < 1 || rank < 0 || rank >= size || (size > 1 && link == NULL)) {
        return HV_EINVAL;
    }
    hv__ring_t *r = hv_calloc(1, sizeof(*r));
    if (r == NULL) {
        return HV_ENOMEM;
    }
    r->rank = rank;
    r->size = size;
    r->link = link;
    r->o = *opts;
    if (r->o.stage_bytes < 4096) {
        r->o.stage_bytes = 4096;
    }
    r->o.stage_bytes &= ~(size_t)7;
    if (r->o.timeout_ms == 0) {
        r->o.timeout_ms = 5000;
    }
    r->stage = hv_malloc(r->o.stage_bytes);
    r->frames = hv_calloc((size_t)size, sizeof(frame_t));
    r->blk_len = hv_calloc((size_t)size * 2, sizeof(size_t));
    if (r->stage == NULL || r->frames == NULL || r->blk_len == NULL) {
        hv__ring_destroy(r);
        return HV_ENOMEM;
    }
    *out = r;
    return HV_OK;
}

void hv__ring_destroy(hv__ring_t *r) {
    if (r == NULL) {
        return;
    }
    if (r->frames != NULL) {
        for (int i = 0; i < r->size; i++) {
            hv_free(r->frames[i].p);
        }
    }
    hv_free(r->frames);
    hv_free(r->blk_len);
    hv_free(r->own);
    hv_free(r->stage);
    hv_free(r->scratch);
    hv_free(r);
}

int hv__ring_rank(const hv__ring_t *r) { return r->rank; }
int hv__ring_size(const hv__ring_t *r) { return r->size; }
hv__link_t *hv__ring_link(hv__ring_t *r) { return r->link; }

unsigned hv__ring_broken(const hv__ring_t *r) {
    return r != NULL ? atomic_load(&((hv__ring_t *)r)->broken) : 0;
}

/* Records which side failed when rc says that the neighbour there did (the connection broke or
 * it made no progress); an abort (HV_ECANCELED) or a local error says nothing about a peer. */
static hv_err ring_broke(hv__ring_t *r, hv_err rc, unsigned sides) {
    if (rc == HV_EPEER || rc == HV_EIO || rc == HV_ETIMEDOUT) {
        atomic_fetch_or(&r->broken, sides);
    }
    return rc;
}

/* ---- cursors over scatter lists -------------------------------------------------------------- */

typedef struct cursor_s {
    const hv__vec_t *v;
    int idx;    // current region
    size_t off; // offset inside it
} cursor_t;

static void cur_skip_empty(cursor_t *c) {
    while (c->idx < c->v->n && c->off >= c->v->iov[c->idx].iov_len) {
        c->idx++;
        c->off = 0;
    }
}

static void cur_seek(cursor_t *c, const hv__vec_t *v, size_t pos) {
    c->v = v;
    c->idx = 0;
    c->off = 0;
    while (c->idx < v->n && pos >= v->iov[c->idx].iov_len) {
        pos -= v->iov[c->idx].iov_len;
        c->idx++;
    }
    c->off = pos;
    cur_skip_empty(c);
}

static void cur_advance(cursor_t *c, size_t n) {
    while (n > 0 && c->idx < c->v->n) {
        size_t room = c->v->iov[c->idx].iov_len - c->off;
        size_t take = n < room ? n : room;
        c->off += take;
        n -= take;
        cur_skip_empty(c);
    }
}

/* Describes up to len bytes from the cursor as at most max iovecs; returns the count. */
static int cur_iov(const cursor_t *c, size_t len, struct iovec *out, int max) {
    int k = 0;
    int idx = c->idx;
    size_t off = c->off;
    while (len > 0 && idx < c->v->n && k < max) {
        size_t room = c->v->iov[idx].iov_len - off;
        size_t take = len < room ? len : room;
        if (take > 0) {
            out[k].iov_base = (char *)c->v->iov[idx].iov_base + off;
            out[k].iov_len = take;
            k++;
            len -= take;
        }
        idx++;
        off = 0;
    }
    return k;
}

/* Reduces len bytes of src into the list at the cursor and advances it. */
static void cur_reduce(cursor_t *c, const unsigned char *src, size_t len, hv_dtype dt, hv_op op,
                       size_t esize) {
    while (len > 0 && c->idx < c->v->n) {
        size_t room = c->v->iov[c->idx].iov_len - c->off;
        size_t take = len < room ? len : room;
        hv__reduce(op, dt, (char *)c->v->iov[c->idx].iov_base + c->off, src, take / esize);
        src += take;
        len -= take;
        c->off += take;
        cur_skip_empty(c);
    }
}

/* Copies len bytes between the list at the cursor and flat memory; advances the cursor. */
static void cur_copy(cursor_t *c, unsigned char *flat, size_t len, int to_list) {
    while (len > 0 && c->idx < c->v->n) {
        size_t room = c->v->iov[c->idx].iov_len - c->off;
        size_t take = len < room ? len : room;
        char *p = (char *)c->v->iov[c->idx].iov_base + c->off;
        if (to_list) {
            memcpy(p, flat, take);
        } else {
            memcpy(flat, p, take);
        }
        flat += take;
        len -= take;
        c->off += take;
        cur_skip_empty(c);
    }
}

/* ---- the progress loop ----------------------------------------------------------------------- */

typedef struct pace_s {
    uint64_t last_ns; // last time anything moved
} pace_t;

/* Called when an iteration moved nothing: spins, then blocks; fails after timeout_ms. */
static hv_err ring_pace(hv__ring_t *r, pace_t *p, int want_send, int want_recv) {
    uint64_t now = now_ns();
    uint64_t idle = now - p->last_ns;
    // The neighbours this rank waits on are the broken side when the wait fails.
    unsigned sides = (want_send ? HV__RING_RIGHT : 0u) | (want_recv ? HV__RING_LEFT : 0u);
    if (sides == 0) {
        sides = HV__RING_LEFT | HV__RING_RIGHT;
    }
    if (idle >= (uint64_t)r->o.timeout_ms * 1000000u) {
        return ring_broke(r, HV_ETIMEDOUT, sides); // they made no progress
    }
    if (idle < (uint64_t)r->o.spin_us * 1000u) {
        // Spinning: give the core away if another thread wants it (ranks may share cores).
        sched_yield();
        return HV_OK;
    }
    uint64_t left_ms = ((uint64_t)r->o.timeout_ms * 1000000u - idle) / 1000000u + 1;
    int slice = left_ms < RING_WAIT_SLICE_MS ? (int)left_ms : RING_WAIT_SLICE_MS;
    // A transport that sees its peer die while waiting (shared memory checks the peer's
    // process) says so here, not in send_some/recv_some.
    return ring_broke(r, r->link->ops->wait(r->link, want_send, want_recv, slice), sides);
}

typedef struct xfer_s {
    cursor_t sc;  // next byte to send
    size_t s_rem; // bytes left to send
    cursor_t rc;  // next destination byte (copied or reduced into)
    size_t r_rem; // bytes left to receive (including staged, unreduced ones)
    int reduce;   // 1: received bytes are reduced into the destination
    int relay;    // 1: send only what has been received (broadcast relay)
    hv_dtype dt;
    hv_op op;
    size_t esize;
} xfer_t;

static hv_err ring_xfer(hv__ring_t *r, xfer_t *x) {
    const hv__transport_ops_t *ops = r->link->ops;
    struct iovec iov[RING_IOV_MAX];
    size_t fill = 0; // staged bytes (reduce mode)
    size_t recvd = 0, sent = 0;
    pace_t pace = {.last_ns = now_ns()};
    hv_err rc = HV_OK;
    while (x->s_rem > 0 || x->r_rem > 0) {
        int moved = 0;
        if (x->s_rem > 0) {
            size_t want = x->s_rem;
            if (x->relay && want > recvd - sent) {
                want = recvd - sent;
            }
            if (want > 0) {
                int k = cur_iov(&x->sc, want, iov, RING_IOV_MAX);
                size_t n = 0;
                if ((rc = ops->send_some(r->link, iov, k, &n)) != HV_OK) {
                    return ring_broke(r, rc, HV__RING_RIGHT);
                }
                if (n > 0) {
                    cur_advance(&x->sc, n);
                    x->s_rem -= n;
                    sent += n;
                    moved = 1;
                }
            }
        }
        if (x->r_rem > 0 && !x->reduce) {
            int k = cur_iov(&x->rc, x->r_rem, iov, RING_IOV_MAX);
            size_t n = 0;
            if ((rc = ops->recv_some(r->link, iov, k, &n)) != HV_OK) {
                return ring_broke(r, rc, HV__RING_LEFT);
            }
            if (n > 0) {
                cur_advance(&x->rc, n);
                x->r_rem -= n;
                recvd += n;
                moved = 1;
            }
        } else if (x->r_rem > 0) {
            size_t n = 0;
            if (fill == 0 && ops->recv_view != NULL) {
                const void *p = NULL;
                if ((rc = ops->recv_view(r->link, x->r_rem, &p, &n)) != HV_OK) {
                    return ring_broke(r, rc, HV__RING_LEFT);
                }
                size_t whole = n / x->esize * x->esize;
                if (whole > 0) {
                    cur_reduce(&x->rc, p, whole, x->dt, x->op, x->esize);
                    ops->recv_consume(r->link, whole);
                    x->r_rem -= whole;
                    moved = 1;
                }
                n = whole > 0 ? 0 : n; // a split element goes through the staging piece
            }
            if (ops->recv_view == NULL || fill > 0 || n > 0) {
                size_t room = r->o.stage_bytes - fill;
                if (room > x->r_rem - fill) {
                    room = x->r_rem - fill;
                }
                struct iovec one = {.iov_base = r->stage + fill, .iov_len = room};
                size_t got = 0;
                if (room > 0 && (rc = ops->recv_some(r->link, &one, 1, &got)) != HV_OK) {
                    return ring_broke(r, rc, HV__RING_LEFT);
                }
                fill += got;
                size_t whole = fill / x->esize * x->esize;
                if (whole > 0) {
                    cur_reduce(&x->rc, r->stage, whole, x->dt, x->op, x->esize);
                    x->r_rem -= whole;
                    fill -= whole;
                    if (fill > 0) {
                        memmove(r->stage, r->stage + whole, fill);
                    }
                }
                moved |= got > 0;
            }
        }
        if (moved) {
            pace.last_ns = now_ns();
            continue;
        }
        if ((rc = ring_pace(r, &pace, x->s_rem > 0 && (!x->relay || recvd > sent), x->r_rem > 0)) !=
            HV_OK) {
            return rc;
        }
    }
    return HV_OK;
}

/* ---- allreduce ------------------------------------------------------------------------------- */

static hv_err ring_scratch(hv__ring_t *r, size_t need) {
    if (need <= r->scratch_cap) {
        return HV_OK;
    }
    unsigned char *p = hv_malloc(need);
    if (p == NULL) {
        return HV_ENOMEM;
    }
    hv_free(r->scratch);
    r->scratch = p;
    r->scratch_cap = need;
    return HV_OK;
}

/* Small buffers: gather every rank's whole contribution, then reduce in rank order locally
 * (one round of n-1 steps instead of two, and the same order on every rank). */
static hv_err ring_allreduce_small(hv__ring_t *r, const hv__vec_t *buf, hv_dtype dt, hv_op op) {
    size_t b = buf->total, esize = hv_dtype_size(dt);
    int n = r->size;
    hv_err rc = ring_scratch(r, b * (size_t)n);
    if (rc != HV_OK) {
        return rc;
    }
    cursor_t c;
    cur_seek(&c, buf, 0);
    cur_copy(&c, r->scratch + (size_t)r->rank * b, b, 0);
    size_t *lens = r->blk_len, *offs = r->blk_len + n;
    for (int k = 0; k < n; k++) {
        lens[k] = b;
        offs[k] = (size_t)k * b;
    }
    if ((rc = hv__ring_allgatherv(r, r->scratch, lens, offs)) != HV_OK) {
        return rc;
    }
    for (int k = 1; k < n; k++) {
        hv__reduce(op, dt, r->scratch, r->scratch + (size_t)k * b, b / esize);
    }
    if (op == HV_AVG) {
        hv__reduce_scale(dt, r->scratch, b / esize, n);
    }
    cur_seek(&c, buf, 0);
    cur_copy(&c, r->scratch, b, 1);
    return HV_OK;
}

static void vec_scale(const hv__vec_t *buf, size_t off, size_t len, hv_dtype dt, int n) {
    size_t esize = hv_dtype_size(dt);
    cursor_t c;
    cur_seek(&c, buf, off);
    while (len > 0 && c.idx < buf->n) {
        size_t room = buf->iov[c.idx].iov_len - c.off;
        size_t take = len < room ? len : room;
        hv__reduce_scale(dt, (char *)buf->iov[c.idx].iov_base + c.off, take / esize, n);
        len -= take;
        cur_advance(&c, take);
    }
}

/* The ring allreduce as one pipeline. The buffer is cut into chunks (chunk_bytes, so that a
 * chunk's working set stays in cache) and each chunk into n segments. Per chunk, step s < n-1
 * (reduce-scatter) receives segment rank-s-1 and reduces it into place, and step s >= n-1
 * (allgather) receives segment rank-(s-n+1) and copies it into place. What a rank sends at
 * step s >= 1 is exactly what it received at step s-1, so the send side trails the receive side
 * byte by byte instead of waiting for step boundaries: a piece is forwarded right after it was
 * reduced, while it is still in cache; for n > 2 the steps overlap along the ring; and the next
 * chunk's first step (the rank's own raw segment) streams while this chunk finishes. A raw
 * segment is never overwritten before it was sent: the allgather that overwrites it carries a
 * reduction that includes it. */
typedef struct ar_plan_s {
    size_t count; // elements in the buffer
    size_t chunk; // elements per chunk
    size_t esize;
    int n, rank;
    int s_first; // first step run per chunk (0, or n-1 for the allgather phase alone)
    int s_last;  // one past the last (2(n-1), or n-1 for the reduce-scatter phase alone)
    long total;  // steps over all chunks
} ar_plan_t;

static void plan_init(ar_plan_t *p, const hv__ring_t *r, size_t total_bytes, size_t esize,
                      int s_first, int s_last) {
    memset(p, 0, sizeof(*p));
    p->count = total_bytes / esize;
    p->esize = esize;
    p->n = r->size;
    p->rank = r->rank;
    p->s_first = s_first;
    p->s_last = s_last;
    size_t chunk_bytes = r->o.chunk_bytes ? r->o.chunk_bytes : total_bytes;
    p->chunk = chunk_bytes / esize;
    if (p->chunk < (size_t)p->n) {
        p->chunk = (size_t)p->n;
    }
    size_t nchunks = (p->count + p->chunk - 1) / p->chunk;
    p->total = (long)nchunks * (s_last - s_first);
}

/* Segment k of chunk c. */
static void plan_seg(const ar_plan_t *p, size_t c, int k, size_t *off, size_t *len) {
    k = ((k % p->n) + p->n) % p->n;
    size_t base = c * p->chunk, cnt = p->count - base < p->chunk ? p->count - base : p->chunk;
    *off = (base + (size_t)((unsigned __int128)cnt * (unsigned)k / (unsigned)p->n)) * p->esize;
    *len =
        (base + (size_t)((unsigned __int128)cnt * (unsigned)(k + 1) / (unsigned)p->n)) * p->esize -
        *off;
}

/* The step (within its chunk) of global step j, and the chunk. */
static int plan_step(const ar_plan_t *p, long j, size_t *c) {
    int per = p->s_last - p->s_first;
    *c = (size_t)(j / per);
    return p->s_first + (int)(j % per);
}

/* The segment received at chunk step s: reduce-scatter steps receive rank-s-1, allgather
 * steps rank-(s-n+1). */
static int seg_recv(const ar_plan_t *p, int s) {
    return s < p->n - 1 ? p->rank - s - 1 : p->rank - (s - (p->n - 1));
}

/* The segment sent at chunk step s: the own raw segment first, then what step s-1 received. */
static int seg_send(const ar_plan_t *p, int s) { return s == 0 ? p->rank : seg_recv(p, s - 1); }

/* The ring allreduce pipeline, or one of its phases (see plan_init). scale_div > 1 divides the
 * rank's own segment once, when the last reduce-scatter step finishes a piece (AVG). */
static hv_err ring_pipe(hv__ring_t *r, const hv__vec_t *buf, hv_dtype dt, hv_op op, int s_first,
                        int s_last, int scale_div) {
    size_t esize = hv_dtype_size(dt);
    int n = r->size;
    ar_plan_t pl;
    plan_init(&pl, r, buf->total, esize, s_first, s_last);
    const hv__transport_ops_t *ops = r->link->ops;
    struct iovec iov[RING_IOV_MAX];
    long ss = 0, rstep = 0; // current send / receive step (global)
    size_t s_off, s_len, r_off, r_len, c;
    size_t sdone = 0; // bytes sent in step ss
    size_t rdone = 0; // bytes received and processed in step rstep
    size_t fill = 0;  // staged, unreduced bytes (reduce-scatter steps)
    cursor_t sc, rc_;
    int st = plan_step(&pl, 0, &c);
    plan_seg(&pl, c, seg_send(&pl, st), &s_off, &s_len);
    plan_seg(&pl, c, seg_recv(&pl, st), &r_off, &r_len);
    int rs_step = st; // chunk step of rstep
    cur_seek(&sc, buf, s_off);
    cur_seek(&rc_, buf, r_off);
    pace_t pace = {.last_ns = now_ns()};
    hv_err rc = HV_OK;
    while (ss < pl.total || rstep < pl.total) {
        int moved = 0;
        // ---- send: as much of the current step as is final ----
        while (ss < pl.total) {
            if (sdone == s_len) {
                if (++ss < pl.total) {
                    sdone = 0;
                    st = plan_step(&pl, ss, &c);
                    plan_seg(&pl, c, seg_send(&pl, st), &s_off, &s_len);
                    cur_seek(&sc, buf, s_off);
                }
                continue;
            }
            // A chunk's first step sends data that is final already; later steps forward what
            // receive step ss - 1 has processed so far.
            int first = (ss % (pl.s_last - pl.s_first)) == 0;
            size_t avail = first || rstep > ss - 1 ? s_len : (rstep == ss - 1 ? rdone : 0);
            if (sdone >= avail) {
                break;
            }
            int k = cur_iov(&sc, avail - sdone, iov, RING_IOV_MAX);
            size_t got = 0;
            if ((rc = ops->send_some(r->link, iov, k, &got)) != HV_OK) {
                return ring_broke(r, rc, HV__RING_RIGHT);
            }
            if (got == 0) {
                break;
            }
            cur_advance(&sc, got);
            sdone += got;
            moved = 1;
        }
        // ---- receive: reduce (reduce-scatter) or copy (allgather) into place ----
        if (rstep < pl.total) {
            size_t left = r_len - rdone;
            size_t got = 0;
            if (left == 0) {
                got = 0;
            } else if (rs_step >= n - 1) {
                int k = cur_iov(&rc_, left, iov, RING_IOV_MAX);
                if ((rc = ops->recv_some(r->link, iov, k, &got)) != HV_OK) {
                    return ring_broke(r, rc, HV__RING_LEFT);
                }
                cur_advance(&rc_, got);
                rdone += got;
            } else {
                // Zero-copy when the transport offers a view (shared memory): reduce straight
                // from the neighbour's bytes. Otherwise through the cache-sized staging piece.
                const unsigned char *src = NULL;
                size_t whole = 0, view = 0;
                if (fill == 0 && ops->recv_view != NULL) {
                    const void *p = NULL;
                    if ((rc = ops->recv_view(r->link, left, &p, &view)) != HV_OK) {
                        return ring_broke(r, rc, HV__RING_LEFT);
                    }
                    // Elements must be aligned to be read in place (the byte stream may have
                    // been shifted by an earlier odd-sized message): else stage them.
                    whole = ((uintptr_t)p & (esize - 1)) == 0 ? view / esize * esize : 0;
                    src = p;
                }
                if (whole == 0) {
                    size_t room = r->o.stage_bytes - fill;
                    if (room > left - fill) {
                        room = left - fill;
                    }
                    struct iovec one = {.iov_base = r->stage + fill, .iov_len = room};
                    if (room > 0 && (rc = ops->recv_some(r->link, &one, 1, &got)) != HV_OK) {
                        return ring_broke(r, rc, HV__RING_LEFT);
                    }
                    fill += got;
                    whole = fill / esize * esize;
                    src = r->stage;
                } else {
                    got = whole;
                }
                if (whole > 0) {
                    cur_reduce(&rc_, src, whole, dt, op, esize);
                    if (rs_step == n - 2 && scale_div > 1) {
                        // The last reduce-scatter step makes this rank's segment final: scale
                        // the piece now, before it is forwarded.
                        vec_scale(buf, r_off + rdone, whole, dt, scale_div);
                    }
                    rdone += whole;
                    if (src == r->stage) {
                        fill -= whole;
                        if (fill > 0) {
                            memmove(r->stage, r->stage + whole, fill);
                        }
                    } else {
                        ops->recv_consume(r->link, whole);
                    }
                }
            }
            moved |= got > 0;
            if (rdone == r_len) {
                if (++rstep < pl.total) {
                    rdone = 0;
                    rs_step = plan_step(&pl, rstep, &c);
                    plan_seg(&pl, c, seg_recv(&pl, rs_step), &r_off, &r_len);
                    cur_seek(&rc_, buf, r_off);
                }
                moved = 1;
            }
        }
        if (moved) {
            pace.last_ns = now_ns();
            continue;
        }
        int want_send = 0;
        if (ss < pl.total) {
            int first = (ss % (pl.s_last - pl.s_first)) == 0;
            size_t avail = first || rstep > ss - 1 ? s_len : (rstep == ss - 1 ? rdone : 0);
            want_send = sdone < avail;
        }
        if ((rc = ring_pace(r, &pace, want_send, rstep < pl.total)) != HV_OK) {
            return rc;
        }
    }
    return HV_OK;
}

/* The ring allreduce as one pipeline. The buffer is cut into chunks (chunk_bytes, so that a
 * chunk's working set stays in cache) and each chunk into n segments. Per chunk, step s < n-1
 * (reduce-scatter) receives segment rank-s-1 and reduces it into place, and step s >= n-1
 * (allgather) receives segment rank-(s-n+1) and copies it into place. What a rank sends at
 * step s >= 1 is exactly what it received at step s-1, so the send side trails the receive side
 * byte by byte instead of waiting for step boundaries: a piece is forwarded right after it was
 * reduced, while it is still in cache; for n > 2 the steps overlap along the ring; and the next
 * chunk's first step (the rank's own raw segment) streams while this chunk finishes. A raw
 * segment is never overwritten before it was sent: the allgather that overwrites it carries a
 * reduction that includes it. */
hv_err hv__ring_allreduce(hv__ring_t *r, const hv__vec_t *buf, hv_dtype dt, hv_op op) {
    size_t esize = hv_dtype_size(dt);
    if (esize == 0 || !hv__op_valid(op) || buf->total % esize != 0) {
        return HV_EINVAL;
    }
    int n = r->size;
    if (n == 1 || buf->total == 0) {
        return HV_OK; // AVG over one rank is the identity
    }
    if (buf->total <= r->o.small_bytes) {
        return ring_allreduce_small(r, buf, dt, op);
    }
    return ring_pipe(r, buf, dt, op, 0, 2 * (n - 1), op == HV_AVG ? n : 0);
}

/* Describes this rank's owned segments (segment rank+1 of every chunk, after a reduce-scatter)
 * as a scatter list into buf, in r->own (valid until the next call). */
static hv_err ring_owned(hv__ring_t *r, const hv__vec_t *buf, size_t esize, hv__vec_t *out) {
    ar_plan_t pl;
    plan_init(&pl, r, buf->total, esize, 0, r->size - 1);
    size_t nchunks = (pl.count + pl.chunk - 1) / pl.chunk;
    r->nown = 0;
    size_t total = 0;
    for (size_t c = 0; c < nchunks; c++) {
        size_t off, len;
        plan_seg(&pl, c, r->rank + 1, &off, &len);
        cursor_t cu;
        cur_seek(&cu, buf, off);
        while (len > 0 && cu.idx < buf->n) {
            if (r->nown == r->own_cap) {
                size_t cap = r->own_cap ? r->own_cap * 2 : 64;
                struct iovec *v = hv_realloc(r->own, cap * sizeof(*v));
                if (v == NULL) {
                    return HV_ENOMEM;
                }
                r->own = v;
                r->own_cap = cap;
            }
            size_t room = buf->iov[cu.idx].iov_len - cu.off;
            size_t take = len < room ? len : room;
            r->own[r->nown].iov_base = (char *)buf->iov[cu.idx].iov_base + cu.off;
            r->own[r->nown].iov_len = take;
            r->nown++;
            total += take;
            len -= take;
            cur_advance(&cu, take);
        }
    }
    *out = (hv__vec_t){.iov = r->own, .n = (int)r->nown, .total = total};
    return HV_OK;
}

hv_err hv__ring_allreduce_2d(hv__ring_t *intra, hv__ring_t *cross, const hv__vec_t *buf,
                             hv_dtype dt, hv_op op, int world_size) {
    size_t esize = hv_dtype_size(dt);
    if (esize == 0 || !hv__op_valid(op) || buf->total % esize != 0) {
        return HV_EINVAL;
    }
    if (buf->total == 0) {
        return HV_OK;
    }
    // AVG: sum everywhere, divide once where each element becomes final.
    hv_op sop = op == HV_AVG ? HV_SUM : op;
    int li = intra->size;
    hv_err rc = HV_OK;
    if (li > 1) {
        rc = ring_pipe(intra, buf, dt, sop, 0, li - 1, 0);
    }
    hv__vec_t own = *buf;
    if (rc == HV_OK && li > 1) {
        rc = ring_owned(intra, buf, esize, &own);
    }
    if (rc == HV_OK && cross->size > 1 && own.total > 0) {
        rc = hv__ring_allreduce(cross, &own, dt, sop);
    }
    if (rc == HV_OK && op == HV_AVG && world_size > 1) {
        vec_scale(&own, 0, own.total, dt, world_size);
    }
    if (rc == HV_OK && li > 1) {
        rc = ring_pipe(intra, buf, dt, sop, li - 1, 2 * (li - 1), 0);
    }
    return rc;
}

/* ---- broadcast and allgather ----------------------------------------------------------------- */

hv_err hv__ring_broadcast(hv__ring_t *r, void *buf, size_t len, int root) {
    int n = r->size;
    if (root < 0 || root >= n) {
        return HV_EINVAL;
    }
    if (n == 1 || len == 0) {
        return HV_OK;
    }
    int pos = (r->rank - root + n) % n; // distance from the root along the ring
    struct iovec one = {.iov_base = buf, .iov_len = len};
    hv__vec_t v = {.iov = &one, .n = 1, .total = len};
    xfer_t x = {.esize = 1};
    cur_seek(&x.sc, &v, 0);
    cur_seek(&x.rc, &v, 0);
    if (pos == 0) {
        x.s_rem = len;
    } else {
        x.r_rem = len;
        if (pos < n - 1) {
            x.s_rem = len;
            x.relay = 1;
        }
    }
    return ring_xfer(r, &x);
}

hv_err hv__ring_allgatherv(hv__ring_t *r, void *out, const size_t *lens, const size_t *offs) {
    int n = r->size;
    if (n == 1) {
        return HV_OK;
    }
    size_t total = 0;
    for (int k = 0; k < n; k++) {
        if (offs[k] + lens[k] > total) {
            total = offs[k] + lens[k];
        }
    }
    struct iovec one = {.iov_base = out, .iov_len = total};
    hv__vec_t v = {.iov = &one, .n = 1, .total = total};
    for (int s = 0; s < n - 1; s++) {
        int ks = ((r->rank - s) % n + n) % n;
        int kr = ((r->rank - s - 1) % n + n) % n;
        xfer_t x = {.esize = 1, .s_rem = lens[ks], .r_rem = lens[kr]};
        cur_seek(&x.sc, &v, offs[ks]);
        cur_seek(&x.rc, &v, offs[kr]);
        hv_err rc = ring_xfer(r, &x);
        if (rc != HV_OK) {
            return rc;
        }
    }
    return HV_OK;
}

/* ---- frames ---------------------------------------------------------------------------------- */

static hv_err frame_reserve(frame_t *f, size_t len) {
    if (len <= f->cap) {
        return HV_OK;
    }
    size_t cap = f->cap ? f->cap : 256;
    while (cap < len) {
        cap *= 2;
    }
    unsigned char *p = hv_realloc(f->p, cap);
    if (p == NULL) {
        return HV_ENOMEM;
    }
    f->p = p;
    f->cap = cap;
    return HV_OK;
}

/* One step of the frame allgather: send frame ks (length-prefixed) while receiving frame kr,
 * whose length is learnt from its 4-byte prefix. */
static hv_err ring_frame_step(hv__ring_t *r, int ks, int kr) {
    const hv__transport_ops_t *ops = r->link->ops;
    frame_t *sf = &r->frames[ks], *rf = &r->frames[kr];
    // [u32 length][payload][zeros up to a multiple of 8]: the padding keeps the byte stream
    // 8-aligned for the transfers that follow (zero-copy reads need aligned elements).
    static const unsigned char zeros[8];
    unsigned char shdr[4], rhdr[4];
    uint32_t slen32 = (uint32_t)sf->len;
    memcpy(shdr, &slen32, 4);
    size_t s_pad = (8 - (4 + sf->len) % 8) % 8;
    size_t s_total = 4 + sf->len + s_pad, s_done = 0;
    size_t r_hdr = 0, r_len = 0, r_done = 0;
    int r_known = 0;
    pace_t pace = {.last_ns = now_ns()};
    hv_err rc;
    while (s_done < s_total || !r_known || r_done < r_len) {
        int moved = 0;
        if (s_done < s_total) {
            struct iovec iov[3];
            int k = 0;
            if (s_done < 4) {
                iov[k++] = (struct iovec){.iov_base = shdr + s_done, .iov_len = 4 - s_done};
            }
            if (s_done < 4 + sf->len && sf->len > 0) {
                size_t o = s_done > 4 ? s_done - 4 : 0;
                iov[k++] = (struct iovec){.iov_base = sf->p + o, .iov_len = sf->len - o};
            }
            size_t po = s_done > 4 + sf->len ? s_done - 4 - sf->len : 0;
            if (s_pad > po) {
                iov[k++] = (struct iovec){.iov_base = (void *)(zeros + po), .iov_len = s_pad - po};
            }
            size_t n = 0;
            if ((rc = ops->send_some(r->link, iov, k, &n)) != HV_OK) {
                return ring_broke(r, rc, HV__RING_RIGHT);
            }
            s_done += n;
            moved |= n > 0;
        }
        if (!r_known) {
            struct iovec one = {.iov_base = rhdr + r_hdr, .iov_len = 4 - r_hdr};
            size_t n = 0;
            if ((rc = ops->recv_some(r->link, &one, 1, &n)) != HV_OK) {
                return ring_broke(r, rc, HV__RING_LEFT);
            }
            r_hdr += n;
            moved |= n > 0;
            if (r_hdr == 4) {
                uint32_t l32;
                memcpy(&l32, rhdr, 4);
                if (l32 > RING_FRAME_MAX) {
                    HV_LOG(HV_LOG_ERROR, "ring", "HV-RING-FRAME",
                           "rank %d: frame of %u bytes from the left neighbour is over the limit",
                           r->rank, l32);
                    return HV_EPROTO;
                }
                r_len = l32;
                if ((rc = frame_reserve(rf, r_len + 8)) != HV_OK) {
                    return rc;
                }
                rf->len = r_len;
                r_len += (8 - (4 + r_len) % 8) % 8; // receive the padding too (into the slack)
                r_known = 1;
            }
        }
        if (r_known && r_done < r_len) {
            struct iovec one = {.iov_base = rf->p + r_done, .iov_len = r_len - r_done};
            size_t n = 0;
            if ((rc = ops->recv_some(r->link, &one, 1, &n)) != HV_OK) {
                return ring_broke(r, rc, HV__RING_LEFT);
            }
            r_done += n;
            moved |= n > 0;
        }
        if (moved) {
            pace.last_ns = now_ns();
            continue;
        }
        if ((rc = ring_pace(r, &pace, s_done < s_total, !r_known || r_done < r_len)) != HV_OK) {
            return rc;
        }
    }
    return HV_OK;
}

hv_err hv__ring_allgather_frames(hv__ring_t *r, const void *data, size_t len) {
    if (len > RING_FRAME_MAX) {
        return HV_ETOOBIG;
    }
    frame_t *mine = &r->frames[r->rank];
    hv_err rc = frame_reserve(mine, len);
    if (rc != HV_OK) {
        return rc;
    }
    if (len > 0) {
        memcpy(mine->p, data, len);
    }
    mine->len = len;
    int n = r->size;
    for (int s = 0; s < n - 1; s++) {
        int ks = ((r->rank - s) % n + n) % n;
        int kr = ((r->rank - s - 1) % n + n) % n;
        if ((rc = ring_frame_step(r, ks, kr)) != HV_OK) {
            return rc;
        }
    }
    return HV_OK;
}

const void *hv__ring_frame(const hv__ring_t *r, int k, size_t *len) {
    *len = r->frames[k].len;
    return r->frames[k].p;
}
