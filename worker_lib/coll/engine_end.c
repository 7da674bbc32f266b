/*
 * engine_end: how a request and the engine end, for engine.c (the threads and the state machine
 * around rounds) and engine_round.c (one round) alike: a request completed with its status, the
 * engine failed (the first failure sticks, every link aborted), and the small helpers both use
 * (the clock, kind names, growing a scratch array, waking the background thread). Calls neither
 * of them back: they both call here, so the two do not call each other in a circle.
 */
#include "engine_int.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "mem.h"
#include "transport_nccl.h"

uint64_t hv__engine_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

const char *hv__engine_kind_name(int k) {
    switch (k) {
    case HV__OP_ALLREDUCE:
        return "allreduce";
    case HV__OP_BROADCAST:
        return "broadcast";
    case HV__OP_ALLGATHER:
        return "allgather";
    case HV__OP_BARRIER:
        return "barrier";
    case HV__OP_JOIN:
        return "join";
    default:
        return "?";
    }
}

void hv__engine_poke(hv__engine_t *e) {
    uint64_t one = 1;
    ssize_t w = write(e->ev_fd, &one, sizeof(one));
    (void)w;
}

hv_err hv__engine_grow(void **p, size_t *cap, size_t need, size_t elem) {
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

void hv__engine_req_done_locked(hv__engine_t *e, eng_req_t *r, hv_err rc) {
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
void hv__engine_complete(hv__engine_t *e, eng_req_t **reqs, size_t n, const hv_err *rcs,
                         hv_err rc) {
    for (size_t i = 0; i < n; i++) {
        if (!reqs[i]->synthetic) { // a joined rank's zeros: nobody waits for them
            pend_unlink(e, reqs[i]);
        }
    }
    pthread_mutex_lock(&e->mu);
    for (size_t i = 0; i < n; i++) {
        if (!reqs[i]->synthetic) {
            hv__engine_req_done_locked(e, reqs[i], rcs ? rcs[i] : rc);
        }
    }
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

/* ---- failure --------------------------------------------------------------------------------- */

void hv__engine_fail(hv__engine_t *e, hv_err rc, const char *fmt, ...) {
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
        hv__link_t *ls[3] = {hv__ring_link(e->ring), e->o.intra ? hv__ring_link(e->o.intra) : NULL,
                             e->o.cross ? hv__ring_link(e->o.cross) : NULL};
        for (int i = 0; i < 3; i++) {
            if (ls[i] != NULL) {
                ls[i]->ops->abort(ls[i]);
            }
        }
        hv__nccl_abort(e->o.nccl);
        hv__engine_poke(e);
    }
}
