/*
 * engine: see engine.h. This file holds the threads and the state machine around rounds
 * (engine_round.c runs one round; engine_end.c ends requests and the engine, for both). State is split by owner (engine_int.h):
 *   - under mu: the incoming queue (submitted, not yet taken by a driver), the live-name set
 *     (duplicate detection), the handle table, the drive flag, the sticky failure;
 *   - the driver (whoever holds the drive flag): pending requests, the response cache, frame
 *     and scratch buffers, the rings.
 * A rank with nothing pending delays joining a round that another rank started (nothing can
 * complete without it), which keeps idle ranks from burning rounds; the delay is bounded well
 * below the peer timeout so that liveness is still proven.
 */
#include "engine_int.h"

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
#include "util.h"

static void eng_drain(hv__engine_t *e) {
    uint64_t v;
    ssize_t r = read(e->ev_fd, &v, sizeof(v));
    (void)r;
}

/* Driver: fails everything pending and queued with the sticky error. */
static void eng_fail_all(hv__engine_t *e) {
    pthread_mutex_lock(&e->mu);
    hv_err rc = e->failed != HV_OK ? e->failed : HV_ECANCELED;
    for (eng_req_t *r = e->pend_head, *next; r != NULL; r = next) {
        next = r->next;
        hv__engine_req_done_locked(e, r, rc);
    }
    e->pend_head = e->pend_tail = NULL;
    atomic_store(&e->npend, 0);
    hv__strmap_clear(&e->pend_by_name);
    for (eng_req_t *r = e->inq_head, *next; r != NULL; r = next) {
        next = r->next;
        hv__engine_req_done_locked(e, r, rc);
    }
    e->inq_head = e->inq_tail = NULL;
    e->inq_urgent = 0;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

void hv__engine_abort(hv__engine_t *e, hv_err why, const char *reason) {
    hv__engine_fail(e, why, "rank %d: %s", e->rank, reason ? reason : hv_strerror(why));
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

uint64_t hv__engine_anon_seq(hv__engine_t *e) {
    pthread_mutex_lock(&e->mu);
    uint64_t v = e->anon_seq;
    pthread_mutex_unlock(&e->mu);
    return v;
}

void hv__engine_set_anon_seq(hv__engine_t *e, uint64_t seq) {
    pthread_mutex_lock(&e->mu);
    e->anon_seq = seq;
    pthread_mutex_unlock(&e->mu);
}

void hv__engine_stats(hv__engine_t *e, hv__engine_stats_t *out) {
    pthread_mutex_lock(&e->mu);
    *out = e->stats;
    pthread_mutex_unlock(&e->mu);
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
    uint64_t now = hv__engine_now_ns();
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
            link_since = hv__engine_now_ns();
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
                    link_since = hv__engine_now_ns();
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
            if (hv__engine_round(e) != HV_OK) {
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
            link_since = hv__engine_now_ns();
        }
        int64_t wait_ns;
        if (eng_decide(e, link_since, &wait_ns)) {
            if (hv__engine_round(e) != HV_OK) {
                eng_fail_all(e);
                break;
            }
            link_since = 0;
            continue;
        }
        // Spin on the link briefly (the other ranks are probably about to answer), then sleep.
        uint64_t t0 = hv__engine_now_ns();
        int got = 0;
        while (hv__engine_now_ns() - t0 < spin_ns) {
            if (link_has_input(e)) {
                got = 1;
                break;
            }
            sched_yield();
        }
        if (got) {
            link_since = link_since ? link_since : hv__engine_now_ns();
            continue;
        }
        int w = eng_sleep(e, wait_ns, link_since == 0, 1);
        if (w == 2 && link_since == 0) {
            link_since = hv__engine_now_ns();
        }
    }
}

/* ---- submission ------------------------------------------------------------------------------ */

/* Where an operation's buffers live, asked once per submission: *device = 1 when in or out is
 * CUDA device memory. With NCCL, device tensors must sit on the communicator's device, in and
 * out alike (NCCL reads and writes them there); host tensors keep the ring. Broadcast is in
 * place: only out counts. */
static hv_err desc_devices(const hv__engine_t *e, const hv__op_desc_t *d, int *device) {
    *device = 0;
    if (d->kind == HV__OP_BARRIER || d->kind == HV__OP_JOIN || hv__gpu_count() == 0) {
        return HV_OK;
    }
    int dout = hv__gpu_device_of(d->out);
    int din = d->in != NULL && d->in != d->out ? hv__gpu_device_of(d->in) : dout;
    *device = dout >= 0 || din >= 0;
    if (e->o.nccl == NULL) {
        return HV_OK;
    }
    if (d->kind == HV__OP_BROADCAST) {
        din = dout;
    }
    int want = hv__nccl_device(e->o.nccl);
    if ((dout < 0 && din < 0) || (dout == want && din == want)) {
        return HV_OK;
    }
    char where_in[32] = "host memory", where_out[32] = "host memory";
    if (din >= 0) {
        snprintf(where_in, sizeof(where_in), "CUDA device %d", din);
    }
    if (dout >= 0) {
        snprintf(where_out, sizeof(where_out), "CUDA device %d", dout);
    }
    HV_LOG(HV_LOG_ERROR, "engine", "HV-ENGINE-DEVICE",
           "rank %d: %s '%s': input in %s, output in %s, but hv's NCCL communicator is on CUDA "
           "device %d: allocate device tensors there (hv_init makes it the current device)",
           e->rank, hv__engine_kind_name(d->kind), d->name != NULL ? d->name : "(unnamed)",
           where_in, where_out, want);
    return HV_EINVAL;
}

/* Validates d; on HV_OK *device says whether it works on device memory (desc_devices). */
static hv_err desc_check(const hv__engine_t *e, const hv__op_desc_t *d, int *device) {
    *device = 0;
    if (d->kind == HV__OP_BARRIER) {
        return HV_OK;
    }
    if (d->kind == HV__OP_JOIN) {
        return d->out != NULL ? HV_OK : HV_EINVAL;
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
    int ok;
    switch (d->kind) {
    case HV__OP_ALLREDUCE:
        ok = hv__op_valid(d->op) && (d->count == 0 || d->in != NULL);
        break;
    case HV__OP_BROADCAST:
        ok = d->root >= 0 && d->root < e->size;
        break;
    case HV__OP_ALLGATHER:
        ok = (d->count == 0 || d->in != NULL) && (d->out_cap == 0 || d->out != NULL);
        break;
    default:
        ok = 0;
        break;
    }
    return ok ? desc_devices(e, d, device) : HV_EINVAL;
}

/* device: from desc_check. */
static void req_init(eng_req_t *r, const hv__op_desc_t *d, const char *name, eng_group_t *g,
                     int device) {
    memset(r, 0, sizeof(*r));
    r->d = *d;
    snprintf(r->name, sizeof(r->name), "%s", name);
    r->d.name = r->name;
    r->grp = g;
    r->bit = ENG_NO_BIT;
    int control = d->kind == HV__OP_BARRIER || d->kind == HV__OP_JOIN;
    r->bytes = control ? 0 : d->count * hv_dtype_size(d->dtype);
    r->device = device;
    if (control) {
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
        e->inq_first_ns = hv__engine_now_ns();
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
    eng_group_t *g = hv_calloc(1, sizeof(*g));
    eng_req_t **rs = hv_calloc(n, sizeof(*rs));
    int was_empty = 0;
    hv_err rc = g && rs ? HV_OK : HV_ENOMEM;
    for (size_t i = 0; i < n && rc == HV_OK; i++) {
        int device = 0;
        if ((rc = desc_check(e, &ops[i], &device)) != HV_OK) {
            break;
        }
        if (ops[i].name == NULL) {
            rc = HV_EINVAL;
            break;
        }
        rs[i] = hv_malloc(sizeof(eng_req_t));
        if (rs[i] == NULL) {
            rc = HV_ENOMEM;
            break;
        }
        req_init(rs[i], &ops[i], ops[i].name, g, device);
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
        hv__engine_poke(e); // the background thread starts the cycle timer
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
                hv__engine_poke(e);
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
            uint64_t t0 = hv__engine_now_ns();
            while (!atomic_load_explicit(&g->done, memory_order_acquire) &&
                   hv__engine_now_ns() - t0 < spin_ns) {
                sched_yield();
            }
            pthread_mutex_lock(&e->mu);
            continue;
        }
        struct timespec ts = hv_realtime_in_ms(100);
        pthread_cond_timedwait(&e->cv, &e->mu, &ts);
    }
    pthread_mutex_unlock(&e->mu);
}

hv_err hv__engine_run(hv__engine_t *e, const hv__op_desc_t *op) {
    int device = 0;
    hv_err rc = desc_check(e, op, &device);
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
        snprintf(name, sizeof(name), "~%s.%llu", hv__engine_kind_name(op->kind),
                 (unsigned long long)(++e->anon_seq % ENG_ANON_NAMES));
    } else {
        snprintf(name, sizeof(name), "%s", op->name);
    }
    req_init(&r, op, name, &g, device);
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
    if (!atomic_load_explicit(&g->done, memory_order_acquire) && e->inq_head != NULL) {
        // A caller that blocks now gains nothing from the cycle timer: what is queued runs in
        // the next round (fused as far as it was submitted together), not a cycle later.
        e->inq_urgent = 1;
    }
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
        hv__engine_poke(e);
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
        struct timespec ts = hv_realtime_in_ms(10);
        pthread_cond_timedwait(&e->cv, &e->mu, &ts);
    }
    pthread_mutex_unlock(&e->mu);
    eng_fail_all(e);
    for (uint32_t i = 0; i < e->nslots; i++) {
        hv_free(e->slots[i].grp);
    }
    hv_free(e->slots);
    hv_free(e->free_slots);
    hv__engine_res_clear(e);
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
    hv__engine_syn_clear(e);
    hv_free(e->syn);
    hv_free(e->joined);
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
