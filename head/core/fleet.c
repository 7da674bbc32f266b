/*
 * fleet: see fleet.h. This file allocates over the cluster's totals (floors, then growth, tier 1
 * then tier 2) and explains the result; fleet_nodes.c places it on the nodes.
 */
#include "fleet.h"
#include "fleet_int.h"

#include <stdio.h>
#include <string.h>

#include "mem.h"

static const char *const reason_names[] = {
    "kept",           "admitted",     "grown",         "shrunk_admit", "shrunk_priority",
    "shrunk_reclaim", "shrunk_share", "preempted",     "wait_quota",   "wait_capacity",
    "wait_fit",       "wait_behind",  "held_interval", "held_cost",    "busy",
    "moved",
};
_Static_assert(sizeof(reason_names) / sizeof(reason_names[0]) == HV_FL__COUNT,
               "a word for every reason");

const char *hv_fl_reason_name(hv_fl_reason_t r) {
    return r >= 0 && r < HV_FL__COUNT ? reason_names[r] : "unknown";
}

void hv_fl_settings_default(hv_fl_settings_t *s) {
    *s = (hv_fl_settings_t){.resize_interval_ms = HV_FL_INTERVAL_MS,
                            .reset_ms = HV_FL_RESET_MS,
                            .starve_ms = HV_FL_STARVE_MS,
                            .age_ms = HV_FL_AGE_MS,
                            .keep_pct = 10,
                            .min_gain_pm = 20,
                            .reserve_prio = 1};
}

/* ---- the jobs as this decision sees them ------------------------------------------------------ */

static hv_err check_input(const hv_fl_in_t *in, char *err, size_t errlen) {
    if (in->nns == 0 || in->ns == NULL) {
        hv_errf(err, errlen, "fleet: no namespace given (one with no quota is the least)");
        return HV_EINVAL;
    }
    for (size_t i = 0; i < in->njobs; i++) {
        const hv_fl_job_t *j = &in->jobs[i];
        if (j->ns >= in->nns) {
            hv_errf(err, errlen, "fleet: job %llu: namespace index %u, only %zu namespaces",
                    (unsigned long long)j->id, j->ns, in->nns);
            return HV_EINVAL;
        }
        uint32_t lo = j->elastic ? j->min_np : j->np, hi = j->elastic ? j->max_np : j->np;
        if (lo == 0 || lo > hi || (j->elastic && (j->np < lo || j->np > hi))) {
            hv_errf(err, errlen, "fleet: job %llu: need 1 <= min-np <= np <= max-np, got %u %u %u",
                    (unsigned long long)j->id, lo, j->np, hi);
            return HV_EINVAL;
        }
    }
    return HV_OK;
}

/* Which namespaces use more than their quota now (their jobs' sizes and their actors). */
static void over_quota(hv__fl_ws_t *ws) {
    const hv_fl_in_t *in = ws->in;
    for (size_t k = 0; k < in->nns; k++) {
        ws->used[k] = in->ns[k].actors;
    }
    for (size_t i = 0; i < in->njobs; i++) {
        hv_fl_res_t u = hv__fl_times(&ws->jobs[i].d, in->jobs[i].size);
        for (int r = 0; r < HV_FL_NRES; r++) {
            ws->used[in->jobs[i].ns].r[r] = hv__fl_sat_add(ws->used[in->jobs[i].ns].r[r], u.r[r]);
        }
    }
    for (size_t k = 0; k < in->nns; k++) {
        ws->over[k] = 0;
        for (int r = 0; r < HV_FL_NRES; r++) {
            ws->over[k] |= ws->used[k].r[r] > in->ns[k].quota.r[r];
        }
    }
}

/* Floor, keep and cap of every job, and what does not change between allocations. leaving: per
 * job, its workers that leave with its change in progress (scratch). */
static void prepare(hv__fl_ws_t *ws, uint32_t *leaving) {
    const hv_fl_in_t *in = ws->in;
    const hv_fl_settings_t *s = &ws->set;
    for (size_t u = 0; u < in->nuse; u++) {
        leaving[in->use[u].job] += in->use[u].leaving;
    }
    for (size_t i = 0; i < in->njobs; i++) {
        const hv_fl_job_t *j = &in->jobs[i];
        hv__fl_job_t *b = &ws->jobs[i];
        *b = (hv__fl_job_t){.j = j, .d = j->per_worker, .fitcap = UINT32_MAX, .prio = j->priority};
        b->d.r[HV_FL_SLOTS] = b->d.r[HV_FL_SLOTS] ? b->d.r[HV_FL_SLOTS] : 1;
        uint32_t lo = j->elastic ? j->min_np : j->np, hi = j->elastic ? j->max_np : j->np;
        switch (j->state) {
        case HV_FL_FROZEN: /* what stays once its change is made */
            b->floor = b->keep = b->cap = j->size > leaving[i] ? j->size - leaving[i] : 0;
            b->hard = 1;
            break;
        case HV_FL_RUNNING:
            b->floor = lo;
            b->held = j->elastic && j->resized_ms + s->resize_interval_ms > in->now_ms;
            b->keep = b->held && j->size > lo ? j->size : lo;
            b->cap = b->held ? b->keep : hi;
            b->hard = !j->preemptible;
            break;
        default: {
            uint64_t waited = hv__fl_sat_sub(in->now_ms, j->waiting_since_ms);
            b->floor = b->keep = lo;
            b->cap = hi;
            b->starving = waited >= s->starve_ms;
            b->prio += s->age_ms ? (int64_t)(waited / s->age_ms) : 0;
            break;
        }
        }
    }
    over_quota(ws);
}

static const hv_tput_model_t *model(const hv__fl_job_t *b) {
    static const hv_tput_model_t def = {
        .kind = HV_TPUT_DEFAULT, .a = 1.0 - HV_TPUT_SERIAL, .b = HV_TPUT_SERIAL};
    return b->j->tput != NULL ? b->j->tput : &def;
}

/* ---- granting ------------------------------------------------------------------------------- */

enum { FIT_OK = 0, FIT_QUOTA = 1, FIT_CAPACITY = 2 };

/* Whether n more workers of b fit what is left and its namespace's limit in tier (1: its quota;
 * 2: its quota and its borrowing limit). A resource the workers do not take is not checked. */
static int fits(const hv__fl_ws_t *ws, const hv__fl_job_t *b, uint32_t n, int tier) {
    hv_fl_res_t need = hv__fl_times(&b->d, n);
    const hv_fl_ns_t *ns = &ws->in->ns[b->j->ns];
    const hv_fl_res_t *used = &ws->used[b->j->ns];
    int quota = 0, cap = 0;
    for (int r = 0; r < HV_FL_NRES; r++) {
        if (need.r[r] == 0) {
            continue;
        }
        uint64_t limit =
            tier == 1 ? ns->quota.r[r] : hv__fl_sat_add(ns->quota.r[r], ns->borrow.r[r]);
        quota |= hv__fl_sat_add(used->r[r], need.r[r]) > limit;
        cap |= need.r[r] > ws->avail.r[r];
    }
    return quota ? FIT_QUOTA : cap ? FIT_CAPACITY : FIT_OK;
}

/* 1 when b's floor stays out of the reserve (rule 8): a job that could not be taken back at once
 * (not preemptible) below the priority the reserve is for. Its growth may use the reserve: a
 * shrink gives that back at the job's next commit. */
static int outside_reserve(const hv__fl_ws_t *ws, const hv__fl_job_t *b) {
    return ws->set.reserve_pct > 0 && !b->j->preemptible && b->prio < ws->set.reserve_prio;
}

/* 1 when n more floor workers of b (outside the reserve) leave the reserve free. */
static int reserve_fits(const hv__fl_ws_t *ws, const hv__fl_job_t *b, uint32_t n) {
    hv_fl_res_t need = hv__fl_times(&b->d, n);
    for (int r = 0; r < HV_FL_NRES; r++) {
        uint64_t keep = ws->total.r[r] / 100 * ws->set.reserve_pct +
                        ws->total.r[r] % 100 * ws->set.reserve_pct / 100;
        if (need.r[r] > 0 &&
            hv__fl_sat_add(ws->low.r[r], need.r[r]) > hv__fl_sat_sub(ws->total.r[r], keep)) {
            return 0;
        }
    }
    return 1;
}

static void give(hv__fl_ws_t *ws, hv__fl_job_t *b, uint32_t n, int tier) {
    hv_fl_res_t need = hv__fl_times(&b->d, n);
    int floor = !b->granted && outside_reserve(ws, b);
    for (int r = 0; r < HV_FL_NRES; r++) {
        ws->low.r[r] = floor ? hv__fl_sat_add(ws->low.r[r], need.r[r]) : ws->low.r[r];
        ws->avail.r[r] = hv__fl_sat_sub(ws->avail.r[r], need.r[r]);
        ws->used[b->j->ns].r[r] = hv__fl_sat_add(ws->used[b->j->ns].r[r], need.r[r]);
    }
    b->alloc += n;
    b->borrowed += tier == 2 ? n : 0;
}

/* A namespace's dominant share of the cluster divided by its weight. */
static double share(const hv__fl_ws_t *ws, uint32_t ns) {
    double s = 0;
    for (int r = 0; r < HV_FL_NRES; r++) {
        if (ws->total.r[r] > 0) {
            double f = (double)ws->used[ns].r[r] / (double)ws->total.r[r];
            s = f > s ? f : s;
        }
    }
    uint32_t w = ws->in->ns[ns].weight;
    return s / (w ? w : 1);
}

/* ---- floors ---------------------------------------------------------------------------------- */

static int cls(const hv__fl_job_t *b) {
    return b->j->state != HV_FL_WAITING ? 0 : b->starving ? 1 : 2;
}

/* 1 when a's floor goes before b's. */
static int floor_before(const hv__fl_ws_t *ws, const hv__fl_job_t *a, const hv__fl_job_t *b,
                        int tier) {
    if (a->prio != b->prio) {
        return a->prio > b->prio;
    }
    if (cls(a) != cls(b)) {
        return cls(a) < cls(b);
    }
    if (tier == 2 && cls(a) == 2 && a->j->ns != b->j->ns) {
        double sa = share(ws, a->j->ns), sb = share(ws, b->j->ns);
        if (sa != sb) {
            return sa < sb;
        }
    }
    if (cls(a) != 0 && a->j->waiting_since_ms != b->j->waiting_since_ms) {
        return a->j->waiting_since_ms < b->j->waiting_since_ms;
    }
    return a->j->id < b->j->id;
}

static int floor_candidate(const hv__fl_job_t *b) {
    return !b->granted && !b->hard && !b->nofit && !b->tried && b->floor > 0 &&
           b->j->state != HV_FL_FROZEN;
}

/* A floor that did not fit in tier: the job's reason (final in tier 2), and a starving job's
 * block on the admissions behind it. */
static void floor_failed(hv__fl_ws_t *ws, size_t i, int fit, int tier) {
    hv__fl_job_t *b = &ws->jobs[i];
    if (tier == 1) {
        /* a running job (its floor would be taken away) or a starving one that does not fit
         * its quota: the rest of its namespace goes to tier 2 behind it, instead of passing it
         * here; other waiting jobs may (backfill) */
        ws->closed[b->j->ns] |= b->j->state == HV_FL_RUNNING || b->starving;
        return;
    }
    b->why = b->j->state == HV_FL_RUNNING ? HV_FL_PREEMPTED
             : fit == FIT_QUOTA           ? HV_FL_WAIT_QUOTA
                                          : HV_FL_WAIT_CAPACITY;
    if (fit == FIT_CAPACITY && b->j->state == HV_FL_WAITING &&
        (ws->pri_by == 0 || b->prio > ws->pri_prio)) {
        /* a lower priority that could not be taken back at once does not pass it (rule 3) */
        ws->pri_prio = b->prio;
        ws->pri_by = i + 1;
    }
    if (!b->starving) {
        return;
    }
    for (size_t k = 0; k < ws->in->nns; k++) {
        if (fit == FIT_CAPACITY || k == b->j->ns) {
            if (ws->blk_by[k] == 0 || b->prio > ws->blk_prio[k]) {
                ws->blk_prio[k] = b->prio;
                ws->blk_by[k] = i + 1;
            }
        }
    }
}

static void floors(hv__fl_ws_t *ws, int tier) {
    size_t nj = ws->in->njobs;
    for (size_t i = 0; i < nj; i++) {
        ws->jobs[i].tried = 0;
    }
    ws->pri_by = 0;
    for (size_t k = 0; k < ws->in->nns; k++) {
        ws->blk_by[k] = 0;
        ws->closed[k] = 0;
    }
    for (;;) {
        size_t best = nj;
        for (size_t i = 0; i < nj; i++) {
            if (floor_candidate(&ws->jobs[i]) &&
                (best == nj || floor_before(ws, &ws->jobs[i], &ws->jobs[best], tier))) {
                best = i;
            }
        }
        if (best == nj) {
            return;
        }
        hv__fl_job_t *b = &ws->jobs[best];
        b->tried = 1;
        b->cause = 0;
        uint32_t ns = b->j->ns;
        if (ws->closed[ns]) {
            continue;
        }
        if (b->j->state == HV_FL_WAITING && ws->pri_by != 0 && b->prio < ws->pri_prio &&
            !b->j->preemptible) {
            b->why = HV_FL_WAIT_BEHIND;
            b->cause = ws->pri_by;
            continue;
        }
        if (b->j->state == HV_FL_WAITING && ws->blk_by[ns] != 0 && b->prio <= ws->blk_prio[ns]) {
            b->why = HV_FL_WAIT_BEHIND;
            b->cause = ws->blk_by[ns];
            continue;
        }
        int fit = fits(ws, b, b->floor, tier);
        if (fit == FIT_OK && outside_reserve(ws, b) && !reserve_fits(ws, b, b->floor)) {
            fit = FIT_CAPACITY; /* the reserve counts as taken for it */
        }
        if (fit != FIT_OK) {
            floor_failed(ws, best, fit, tier);
            continue;
        }
        give(ws, b, b->floor, tier);
        b->granted = 1;
        b->seq = ++ws->seq;
        b->why = HV_FL_KEPT;
        b->cause = 0;
        if (b->j->state == HV_FL_WAITING) {
            ws->last_admit = best + 1;
        }
    }
}

/* ---- growth ---------------------------------------------------------------------------------- */

/* 1 when growing b from its size to n pays for the reset over the interval (at least
 * HV_FL_PAYBACK_MIN_MS; or what is left of its work, when shorter): the work the extra rate adds
 * exceeds the work the pause loses. A job that does not run yet starts at n: nothing to pay. */
static int pays(const hv__fl_ws_t *ws, const hv__fl_job_t *b, uint32_t n) {
    if (b->j->state != HV_FL_RUNNING || b->j->size == 0 || n <= b->j->size) {
        return 1;
    }
    double old = hv_tput_rate(model(b), b->j->size), now = hv_tput_rate(model(b), n);
    uint32_t hold = ws->set.resize_interval_ms > HV_FL_PAYBACK_MIN_MS ? ws->set.resize_interval_ms
                                                                      : HV_FL_PAYBACK_MIN_MS;
    double h = hold / 1000.0, reset = ws->set.reset_ms / 1000.0;
    if (b->j->remaining > 0 && now > 0 && b->j->remaining / now < h) {
        h = b->j->remaining / now;
    }
    return (now - old) * (h - reset) > old * reset;
}

/* What b's next worker is worth: its marginal gain per unit of its dominant resource; a worker
 * it already has counts keep_pct more. */
static double worth(const hv__fl_ws_t *ws, const hv__fl_job_t *b) {
    double g = hv_tput_gain(model(b), b->alloc), dom = 0;
    for (int r = 0; r < HV_FL_NRES; r++) {
        if (ws->total.r[r] > 0) {
            double f = (double)b->d.r[r] / (double)ws->total.r[r];
            dom = f > dom ? f : dom;
        }
    }
    g = dom > 0 ? g / dom : g;
    if (b->alloc < b->j->size && g > 0) {
        g *= 1.0 + ws->set.keep_pct / 100.0;
    }
    return g;
}

/* Whether b takes one more worker in this growth pass, and what it is worth (*v). */
static int wants(hv__fl_ws_t *ws, hv__fl_job_t *b, int tier, double *v) {
    uint32_t cap = b->cap < b->fitcap ? b->cap : b->fitcap;
    if (!b->granted || b->alloc >= cap || fits(ws, b, 1, tier) != FIT_OK) {
        return 0;
    }
    *v = worth(ws, b);
    if (b->alloc < b->keep || b->alloc < b->j->size) {
        return 1; /* what it has is given back before anyone grows */
    }
    if (hv_tput_gain(model(b), b->alloc) * 1000.0 < ws->set.min_gain_pm) {
        return 0;
    }
    if (!pays(ws, b, b->alloc + 1)) {
        b->cost_held = 1;
        return 0;
    }
    return 1;
}

/* 1 when a's next worker goes before b's. */
static int grow_before(const hv__fl_ws_t *ws, const hv__fl_job_t *a, double va,
                       const hv__fl_job_t *b, double vb, int tier) {
    int ka = a->alloc < a->keep, kb = b->alloc < b->keep;
    if (ka != kb) {
        return ka;
    }
    if (a->prio != b->prio) {
        return a->prio > b->prio;
    }
    if (tier == 2 && a->j->ns != b->j->ns) {
        double sa = share(ws, a->j->ns), sb = share(ws, b->j->ns);
        if (sa != sb) {
            return sa < sb;
        }
    }
    if (va != vb) {
        return va > vb;
    }
    return a->j->id < b->j->id;
}

static void grow(hv__fl_ws_t *ws, int tier) {
    size_t nj = ws->in->njobs;
    for (;;) {
        size_t best = nj;
        double bv = 0;
        for (size_t i = 0; i < nj; i++) {
            double v;
            if (wants(ws, &ws->jobs[i], tier, &v) &&
                (best == nj || grow_before(ws, &ws->jobs[i], v, &ws->jobs[best], bv, tier))) {
                best = i;
                bv = v;
            }
        }
        if (best == nj) {
            return;
        }
        give(ws, &ws->jobs[best], 1, tier);
    }
}

/* ---- one allocation -------------------------------------------------------------------------- */

static void allocate(hv__fl_ws_t *ws) {
    const hv_fl_in_t *in = ws->in;
    memset(&ws->total, 0, sizeof(ws->total));
    memset(&ws->avail, 0, sizeof(ws->avail));
    memset(&ws->low, 0, sizeof(ws->low));
    for (size_t n = 0; n < in->nnodes; n++) {
        if (in->nodes[n].schedulable) {
            for (int r = 0; r < HV_FL_NRES; r++) {
                ws->total.r[r] = hv__fl_sat_add(ws->total.r[r], in->nodes[n].cap.r[r]);
                ws->avail.r[r] = hv__fl_sat_add(
                    ws->avail.r[r], hv__fl_sat_sub(in->nodes[n].cap.r[r], in->nodes[n].other.r[r]));
            }
        }
    }
    for (size_t k = 0; k < in->nns; k++) {
        ws->used[k] = in->ns[k].actors;
    }
    ws->seq = 0;
    ws->last_admit = 0;
    for (size_t i = 0; i < in->njobs; i++) {
        hv__fl_job_t *b = &ws->jobs[i];
        b->alloc = b->borrowed = 0;
        b->granted = b->cost_held = 0;
        b->why = HV_FL_WAIT_CAPACITY;
        b->cause = 0;
        if (b->hard) { /* running: it has them, whatever the totals say */
            /* a frozen job's floor is what stays once its change is made */
            uint32_t n =
                b->j->state == HV_FL_FROZEN || b->floor < b->j->size ? b->floor : b->j->size;
            give(ws, b, n, 0);
            b->granted = 1;
            b->seq = ++ws->seq;
            b->why = HV_FL_KEPT;
        }
    }
    for (int tier = 1; tier <= 2; tier++) {
        floors(ws, tier);
        grow(ws, tier);
    }
}

/* ---- the answer ------------------------------------------------------------------------------ */

/* Why a running job ends below its size: the job that took its workers, in the terms that
 * relate them. */
static void shrink_reason(const hv__fl_ws_t *ws, const hv__fl_job_t *b, hv_fl_dec_t *d) {
    d->reason = HV_FL_SHRUNK_SHARE;
    if (b->cause == 0) {
        return;
    }
    const hv__fl_job_t *c = &ws->jobs[b->cause - 1];
    d->cause = c->j->id;
    if (c->prio > b->prio) {
        d->reason = HV_FL_SHRUNK_PRIORITY;
    } else if (c->j->ns != b->j->ns && ws->over[b->j->ns] && c->alloc > c->borrowed) {
        d->reason = HV_FL_SHRUNK_RECLAIM;
    } else if (c->j->state == HV_FL_WAITING) {
        d->reason = HV_FL_SHRUNK_ADMIT;
    }
}

/* 1 when job i leaves a node it is on (its size may stay: it moves). */
static int moved(const hv__fl_ws_t *ws, size_t i) {
    size_t nn = ws->in->nnodes;
    for (size_t n = 0; n < nn; n++) {
        if (ws->cur[i * nn + n] < ws->mine[i * nn + n]) {
            return 1;
        }
    }
    return 0;
}

static void explain(const hv__fl_ws_t *ws, hv_fl_out_t *out) {
    const hv_fl_in_t *in = ws->in;
    int pressure = 0; /* a job waits, or one would grow */
    for (size_t i = 0; i < in->njobs; i++) {
        const hv__fl_job_t *b = &ws->jobs[i];
        pressure |= (b->j->state == HV_FL_WAITING && !b->granted) ||
                    (b->j->elastic && b->alloc < b->j->max_np);
    }
    for (size_t i = 0; i < in->njobs; i++) {
        const hv__fl_job_t *b = &ws->jobs[i];
        hv_fl_dec_t *d = &out->dec[i];
        *d = (hv_fl_dec_t){.job_id = b->j->id, .target = b->alloc, .borrowed = b->borrowed};
        if (b->j->state == HV_FL_FROZEN) {
            d->reason = HV_FL_BUSY;
        } else if (b->j->state == HV_FL_WAITING || !b->granted) {
            d->target = b->granted ? b->alloc : 0;
            d->reason = b->granted ? HV_FL_ADMITTED : b->nofit ? HV_FL_WAIT_FIT : b->why;
            size_t c = b->cause ? b->cause : d->reason == HV_FL_PREEMPTED ? ws->last_admit : 0;
            d->cause = c && !b->granted ? ws->jobs[c - 1].j->id : 0;
            d->borrowed = b->granted ? b->borrowed : 0;
        } else if (b->alloc > b->j->size) {
            d->reason = HV_FL_GROWN;
        } else if (b->alloc < b->j->size) {
            shrink_reason(ws, b, d);
        } else if (moved(ws, i)) {
            d->reason = HV_FL_MOVED;
            d->cause = b->cause ? ws->jobs[b->cause - 1].j->id : 0;
        } else {
            d->reason = b->held && pressure ? HV_FL_HELD_INTERVAL
                        : b->cost_held      ? HV_FL_HELD_COST
                                            : HV_FL_KEPT;
        }
    }
}

static void shares(const hv__fl_ws_t *ws, hv_fl_out_t *out) {
    const hv_fl_in_t *in = ws->in;
    for (size_t k = 0; k < in->nns; k++) {
        hv_fl_share_t *s = &out->share[k];
        s->used = ws->used[k];
        for (int r = 0; r < HV_FL_NRES; r++) {
            s->borrowed.r[r] = hv__fl_sat_sub(ws->used[k].r[r], in->ns[k].quota.r[r]);
        }
        double sh = share(ws, (uint32_t)k) * 1000.0 + 0.5;
        s->share_pm = sh > UINT32_MAX ? UINT32_MAX : (uint32_t)sh;
        s->waiting = 0;
    }
    uint64_t next = 0;
    for (size_t i = 0; i < in->njobs; i++) {
        const hv__fl_job_t *b = &ws->jobs[i];
        uint64_t at = 0;
        if (b->j->state == HV_FL_WAITING && !b->granted) {
            out->share[b->j->ns].waiting++;
            at = b->starving ? 0 : hv__fl_sat_add(b->j->waiting_since_ms, ws->set.starve_ms);
        } else if (b->held) {
            at = hv__fl_sat_add(b->j->resized_ms, ws->set.resize_interval_ms);
        }
        if (at > in->now_ms && (next == 0 || at < next)) {
            next = at;
        }
    }
    out->recheck_ms = next;
}

static void ws_fini(hv__fl_ws_t *ws) {
    hv__fl_nodes_fini(ws);
    hv_free(ws->jobs);
    hv_free(ws->used);
    hv_free(ws->blk_prio);
    hv_free(ws->blk_by);
    hv_free(ws->over);
    hv_free(ws->closed);
    hv_free(ws->leaving);
}

void hv_fl_out_fini(hv_fl_out_t *out) {
    hv_free(out->dec);
    hv_free(out->share);
    hv_free(out->moves);
    memset(out, 0, sizeof(*out));
}

hv_err hv_fl_decide(const hv_fl_in_t *in, hv_fl_out_t *out, char *err, size_t errlen) {
    if (in == NULL || out == NULL) {
        return HV_EINVAL;
    }
    memset(out, 0, sizeof(*out));
    HV_TRY(check_input(in, err, errlen));
    hv__fl_ws_t ws = {.in = in};
    if (in->set != NULL) {
        ws.set = *in->set;
    } else {
        hv_fl_settings_default(&ws.set);
    }
    size_t nj = in->njobs ? in->njobs : 1;
    ws.jobs = hv_calloc(nj, sizeof(*ws.jobs));
    ws.used = hv_calloc(in->nns, sizeof(*ws.used));
    ws.blk_prio = hv_calloc(in->nns, sizeof(*ws.blk_prio));
    ws.blk_by = hv_calloc(in->nns, sizeof(*ws.blk_by));
    ws.over = hv_calloc(in->nns, sizeof(*ws.over));
    ws.closed = hv_calloc(in->nns, sizeof(*ws.closed));
    ws.leaving = hv_calloc(nj, sizeof(*ws.leaving));
    out->dec = hv_calloc(nj, sizeof(*out->dec));
    out->share = hv_calloc(in->nns, sizeof(*out->share));
    hv_err rc = HV_ENOMEM;
    if (ws.jobs && ws.used && ws.blk_prio && ws.blk_by && ws.over && ws.closed && ws.leaving &&
        out->dec && out->share) {
        rc = hv__fl_nodes_init(&ws, err, errlen);
    }
    if (rc == HV_OK) {
        prepare(&ws, ws.leaving);
        /* each try that does not fit marks a gang or lowers a cap: bounded */
        size_t limit = 2 * in->njobs + 2;
        for (size_t t = 0;; t++) {
            allocate(&ws);
            if (hv__fl_place(&ws, t >= limit) || t >= limit) {
                break;
            }
        }
        out->ndec = in->njobs;
        out->nshare = in->nns;
        explain(&ws, out);
        shares(&ws, out);
        rc = hv__fl_moves(&ws, out);
    }
    ws_fini(&ws);
    if (rc != HV_OK) {
        hv_fl_out_fini(out);
    }
    return rc;
}
