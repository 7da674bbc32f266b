/*
 * cost: see cost.h.
 */
#include "cost.h"

#include <stdio.h>
#include <string.h>

static const hv_cost_type_t *type_of(const hv_cost_type_t *types, size_t ntypes, const char *name,
                                     size_t *idx) {
    for (size_t i = 0; i < ntypes && name != NULL; i++) {
        if (strcmp(types[i].name, name) == 0) {
            *idx = i;
            return &types[i];
        }
    }
    return NULL;
}

static void report_init(const hv_cost_type_t *types, size_t ntypes, hv_cost_report_t *out) {
    memset(out, 0, sizeof(*out));
    out->n = ntypes < HV_COST_MAX_TYPES ? ntypes : HV_COST_MAX_TYPES;
    for (size_t i = 0; i < out->n; i++) {
        snprintf(out->lines[i].type, sizeof(out->lines[i].type), "%s", types[i].name);
        out->lines[i].ondemand_known = types[i].ondemand_per_hour > 0;
    }
}

/* Adds seconds of a type (or of manual nodes when t is NULL) to the report. */
static hv_cost_line_t *charge(hv_cost_report_t *r, const hv_cost_type_t *t, size_t idx,
                              double secs) {
    hv_cost_line_t *l;
    if (t != NULL && idx < r->n) {
        l = &r->lines[idx];
        l->cost += secs * t->price_per_hour / 3600.0;
        l->ondemand += secs * t->ondemand_per_hour / 3600.0;
    } else {
        size_t m = r->n;
        for (size_t i = 0; i < r->n; i++) {
            if (strcmp(r->lines[i].type, HV_COST_MANUAL) == 0) {
                m = i;
            }
        }
        if (m == r->n) {
            memset(&r->lines[m], 0, sizeof(r->lines[m]));
            snprintf(r->lines[m].type, sizeof(r->lines[m].type), "%s", HV_COST_MANUAL);
            r->lines[m].ondemand_known = 1; /* free either way */
            r->n++;
        }
        l = &r->lines[m];
    }
    l->instance_s += secs;
    return l;
}

/* Sums the lines; drops the types that were never used. */
static void report_finish(hv_cost_report_t *r) {
    size_t k = 0;
    r->ondemand_known = 1;
    for (size_t i = 0; i < r->n; i++) {
        hv_cost_line_t *l = &r->lines[i];
        if (l->instance_s <= 0 && l->instances == 0 && l->preemptions == 0) {
            continue;
        }
        r->instance_s += l->instance_s;
        r->cost += l->cost;
        r->ondemand += l->ondemand;
        r->preemptions += l->preemptions;
        r->ondemand_known &= l->ondemand_known;
        if (k != i) {
            r->lines[k] = *l;
        }
        k++;
    }
    r->n = k;
}

static uint64_t end_or_now(uint64_t end_ms, uint64_t now_ms) { return end_ms ? end_ms : now_ms; }

static double span_s(uint64_t a, uint64_t b) { return b > a ? (double)(b - a) / 1000.0 : 0.0; }

void hv_cost_cluster(const hv_cost_type_t *types, size_t ntypes, const hv_cost_instance_t *insts,
                     size_t ninsts, uint64_t now_ms, hv_cost_report_t *out) {
    report_init(types, ntypes, out);
    for (size_t i = 0; i < ninsts; i++) {
        const hv_cost_instance_t *in = &insts[i];
        size_t idx = 0;
        const hv_cost_type_t *t = type_of(types, ntypes, in->type, &idx);
        if (t == NULL) {
            continue; /* a type no longer configured: its price is unknown */
        }
        hv_cost_line_t *l =
            charge(out, t, idx, span_s(in->start_ms, end_or_now(in->end_ms, now_ms)));
        l->instances++;
        l->preemptions += in->preempted ? 1u : 0u;
    }
    report_finish(out);
}

/* Whether worker wk ran on instance in, and for how long (seconds, 0 when not). */
static int overlap(const hv_cost_worker_t *wk, const hv_cost_instance_t *in, uint64_t now_ms,
                   double *secs) {
    uint64_t ws = wk->start_ms, we = end_or_now(wk->end_ms, now_ms);
    uint64_t is = in->start_ms, ie = end_or_now(in->end_ms, now_ms);
    if (wk->start_ms == 0 || wk->node == NULL || in->node == NULL ||
        strcmp(in->node, wk->node) != 0 || ie <= ws || is >= we) {
        return 0;
    }
    *secs = span_s(is > ws ? is : ws, ie < we ? ie : we);
    return 1;
}

void hv_cost_job(const hv_cost_type_t *types, size_t ntypes, const hv_cost_instance_t *insts,
                 size_t ninsts, const hv_cost_worker_t *workers, size_t nworkers,
                 uint64_t job_end_ms, uint64_t now_ms, hv_cost_report_t *out) {
    report_init(types, ntypes, out);
    /* Each instance: the slot time of the job's workers on it; whether it ran one at all; a
     * preemption the job survived (the instance ended before the job did). */
    for (size_t i = 0; i < ninsts; i++) {
        const hv_cost_instance_t *in = &insts[i];
        size_t idx = 0;
        const hv_cost_type_t *t = type_of(types, ntypes, in->type, &idx);
        uint32_t slots = t != NULL && t->slots > 0 ? t->slots : 1;
        double secs = 0, s;
        int used = 0;
        for (size_t w = 0; w < nworkers; w++) {
            if (overlap(&workers[w], in, now_ms, &s)) {
                used = 1;
                secs += s / (double)slots;
            }
        }
        if (!used || t == NULL) {
            continue;
        }
        hv_cost_line_t *l = charge(out, t, idx, secs);
        l->instances++;
        if (in->preempted && in->end_ms != 0 && (job_end_ms == 0 || in->end_ms < job_end_ms)) {
            l->preemptions++;
        }
    }
    /* A worker no instance's lifetime covers: on a node of that name (its times were recorded
     * on either side of the instance's end, by the head's clock), it is charged to the type of
     * the last such instance; on a node that joined by hand, it is free ("manual"). */
    for (size_t w = 0; w < nworkers; w++) {
        const hv_cost_worker_t *wk = &workers[w];
        double s;
        int on_instance = 0;
        const hv_cost_instance_t *named = NULL;
        for (size_t i = 0; i < ninsts && !on_instance; i++) {
            on_instance = overlap(wk, &insts[i], now_ms, &s);
            if (wk->node != NULL && insts[i].node != NULL && strcmp(insts[i].node, wk->node) == 0) {
                named = &insts[i];
            }
        }
        if (on_instance || wk->start_ms == 0 || wk->node == NULL) {
            continue;
        }
        size_t idx = 0;
        const hv_cost_type_t *t = named ? type_of(types, ntypes, named->type, &idx) : NULL;
        uint32_t slots = t != NULL && t->slots > 0 ? t->slots
                         : wk->node_slots > 0      ? wk->node_slots
                                                   : 1;
        charge(out, t, idx, span_s(wk->start_ms, end_or_now(wk->end_ms, now_ms)) / slots);
    }
    report_finish(out);
}
