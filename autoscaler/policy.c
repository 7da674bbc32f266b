/*
 * policy: see policy.h for the rules. Capacity on its way (instances launching) is counted per
 * type, not per instance: a type's launching nodes are one pool of slots and GPUs, which is exact
 * for the usual one shape of worker and close enough for mixed shapes (the next call corrects it
 * once the nodes joined and the head placed what it could).
 */
#include "policy.h"

#include "err.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define AS_MAX_TYPES 64 /* types a configuration may have (arrays on the stack) */

const char *hv_as_action_name(hv_as_action_kind k) {
    switch (k) {
    case HV_AS_LAUNCH:
        return "launch";
    case HV_AS_TERMINATE:
        return "terminate";
    case HV_AS_TYPE_ASIDE:
        return "type-aside";
    case HV_AS_TYPE_BACK:
        return "type-back";
    case HV_AS_UNMET:
        return "unmet";
    case HV_AS_DRAIN:
        return "drain";
    }
    return "?";
}

int hv_as_config_valid(const hv_as_config_t *c, char *err, size_t errlen) {
    if (c == NULL || (c->ntypes > 0 && c->types == NULL)) {
        hv_errf(err, errlen, "no configuration");
        return 0;
    }
    if (c->ntypes > AS_MAX_TYPES) {
        hv_errf(err, errlen, "%zu node types: at most %d", c->ntypes, AS_MAX_TYPES);
        return 0;
    }
    for (size_t i = 0; i < c->ntypes; i++) {
        const hv_as_type_t *t = &c->types[i];
        if (t->name == NULL || t->name[0] == '\0') {
            hv_errf(err, errlen, "node type %zu has no name", i + 1);
            return 0;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(c->types[j].name, t->name) == 0) {
                hv_errf(err, errlen, "node type '%s' is named twice", t->name);
                return 0;
            }
        }
        if (t->slots == 0) {
            hv_errf(err, errlen, "node type '%s': slots must be at least 1", t->name);
            return 0;
        }
        if (t->min_nodes > t->max_nodes) {
            hv_errf(err, errlen, "node type '%s': min_nodes %u is above max_nodes %u", t->name,
                    t->min_nodes, t->max_nodes);
            return 0;
        }
        if (!(t->price_per_hour >= 0) || !isfinite(t->price_per_hour)) {
            hv_errf(err, errlen, "node type '%s': price_per_hour must be a number >= 0", t->name);
            return 0;
        }
    }
    if (c->min_nodes > c->max_nodes) {
        hv_errf(err, errlen, "min_nodes %u is above max_nodes %u", c->min_nodes, c->max_nodes);
        return 0;
    }
    if (!(c->upscaling_speed > 0) || !isfinite(c->upscaling_speed)) {
        hv_errf(err, errlen, "upscaling_speed must be a number > 0");
        return 0;
    }
    if (c->max_launch_failures == 0) {
        hv_errf(err, errlen, "max_launch_failures must be at least 1");
        return 0;
    }
    if (c->fallback_delay_s > 7u * 86400u) {
        hv_errf(err, errlen, "fallback_delay_s %u: at most 604800 (a week)", c->fallback_delay_s);
        return 0;
    }
    if (!(c->spare_per_hour >= 0) || !isfinite(c->spare_per_hour)) {
        hv_errf(err, errlen, "spare_preemptions_per_hour must be a number >= 0");
        return 0;
    }
    return 1;
}

uint32_t hv_as_fit(const hv_as_type_t *t, uint32_t slots_per_worker, uint32_t gpus_per_worker) {
    uint32_t s = slots_per_worker ? slots_per_worker : 1;
    uint32_t n = t->slots / s;
    if (gpus_per_worker > 0) {
        uint32_t g = t->gpus / gpus_per_worker;
        n = g < n ? g : n;
    }
    return n;
}

/* 1 when every "k=v" of want is among have's (both "k=v,k=v"; NULL or "" is none). The same
 * rule as the head's scheduler (head/core/sched.c, hv_sched_labels_have), which this library
 * does not link. */
static int labels_have(const char *have, const char *want) {
    const char *p = want;
    while (p != NULL && *p != '\0') {
        const char *end = strchr(p, ',');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        int found = 0;
        const char *q = have;
        while (len > 0 && !found && q != NULL && *q != '\0') {
            const char *qe = strchr(q, ',');
            size_t ql = qe != NULL ? (size_t)(qe - q) : strlen(q);
            found = ql == len && memcmp(p, q, len) == 0;
            q = qe != NULL ? qe + 1 : NULL;
        }
        if (len > 0 && !found) {
            return 0;
        }
        p = end != NULL ? end + 1 : NULL;
    }
    return 1;
}

uint32_t hv_as_fit_demand(const hv_as_type_t *t, const hv_as_demand_t *d) {
    if (!labels_have(t->labels, d->labels)) {
        return 0;
    }
    uint32_t n = hv_as_fit(t, d->slots_per_worker, d->gpus_per_worker);
    if (d->memory_mb > 0) {
        uint64_t m = t->memory_mb / d->memory_mb;
        n = m < n ? (uint32_t)m : n;
    }
    return n;
}

/* ---- the action list ------------------------------------------------------------------------ */

typedef struct acts_s {
    hv_as_action_t *out;
    size_t n, cap;
} acts_t;

static hv_as_action_t *act_new(acts_t *a, hv_as_action_kind kind, size_t type) {
    if (a->n >= a->cap) {
        return NULL;
    }
    hv_as_action_t *x = &a->out[a->n++];
    memset(x, 0, sizeof(*x));
    x->kind = kind;
    x->type = type;
    return x;
}

static void reasonf(hv_as_action_t *x, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->reason, sizeof(x->reason), fmt, ap);
    va_end(ap);
}

/* Appends to buf (which holds a string) without overflowing it. */
static void appendf(char *buf, size_t len, const char *fmt, ...) {
    size_t used = strlen(buf);
    if (used + 1 >= len) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, len - used, fmt, ap);
    va_end(ap);
}

/* ---- launch failures ------------------------------------------------------------------------ */

static int count_failure(const hv_as_config_t *c, hv_as_type_state_t *ts, size_t type,
                         uint64_t now_ms, const char *why, hv_as_action_t *aside) {
    hv_as_type_state_t *s = &ts[type];
    s->failures++;
    if (s->short_since_ms == 0) {
        s->short_since_ms = now_ms ? now_ms : 1; /* rule 9: short of capacity since */
    }
    if (s->aside_until_ms != 0 || s->failures < c->max_launch_failures) {
        return 0;
    }
    s->aside_until_ms = now_ms + (uint64_t)c->set_aside_s * 1000u;
    if (s->aside_until_ms == 0) {
        s->aside_until_ms = 1; /* now_ms 0 and no set-aside time: still marked */
    }
    if (aside != NULL) {
        memset(aside, 0, sizeof(*aside));
        aside->kind = HV_AS_TYPE_ASIDE;
        aside->type = type;
        aside->until_ms = s->aside_until_ms;
        reasonf(aside, "type %s set aside for %u s after %u launch failures in a row (last: %s)",
                c->types[type].name, c->set_aside_s, s->failures, why ? why : "unknown");
    }
    return 1;
}

int hv_as_launch_failed(const hv_as_config_t *c, hv_as_type_state_t *ts, size_t type,
                        uint64_t now_ms, const char *why, hv_as_action_t *aside) {
    if (c == NULL || ts == NULL || type >= c->ntypes) {
        return 0;
    }
    return count_failure(c, ts, type, now_ms, why, aside);
}

void hv_as_joined(hv_as_type_state_t *ts, size_t type) {
    if (ts != NULL) {
        ts[type].failures = 0;
        ts[type].short_since_ms = 0;
    }
}

/* ---- the measured preemption rate (rule 8) ---------------------------------------------------- */

static double spare_window_ms(const hv_as_config_t *c) {
    return (double)(c->spare_window_s ? c->spare_window_s : 3600u) * 1000.0;
}

/* The type's decayed preemption count at now_ms. */
static double preempt_score(const hv_as_config_t *c, const hv_as_type_state_t *s, uint64_t now_ms) {
    if (s->preempt_score <= 0) {
        return 0;
    }
    double dt = now_ms > s->preempt_at_ms ? (double)(now_ms - s->preempt_at_ms) : 0.0;
    return s->preempt_score * exp(-dt / spare_window_ms(c));
}

void hv_as_preempted(const hv_as_config_t *c, hv_as_type_state_t *ts, size_t type,
                     uint64_t now_ms) {
    if (c == NULL || ts == NULL || type >= c->ntypes) {
        return;
    }
    ts[type].preempt_score = preempt_score(c, &ts[type], now_ms) + 1.0;
    ts[type].preempt_at_ms = now_ms;
}

/* A steady rate of r per hour holds the decayed count at r x window / 1 h. */
double hv_as_preempt_rate(const hv_as_config_t *c, const hv_as_type_state_t *ts, size_t type,
                          uint64_t now_ms) {
    if (c == NULL || ts == NULL || type >= c->ntypes) {
        return 0;
    }
    return preempt_score(c, &ts[type], now_ms) * 3600000.0 / spare_window_ms(c);
}

/* ---- decide --------------------------------------------------------------------------------- */

typedef struct count_s {
    uint32_t exist[AS_MAX_TYPES];      /* launching + running: against max_nodes */
    uint32_t keep[AS_MAX_TYPES];       /* launching + running: against min_nodes */
    uint64_t free_slots[AS_MAX_TYPES]; /* capacity on its way, per type */
    uint64_t free_gpus[AS_MAX_TYPES];
    uint64_t free_mem[AS_MAX_TYPES]; /* MiB */
    uint32_t exist_total, keep_total, running, launching;
    uint32_t idle[AS_MAX_TYPES]; /* running, no worker, node there: not yet held for a rule */
    uint32_t held[AS_MAX_TYPES]; /* idle nodes kept for a hand-back or as spares (rule 6 spares
                                   * them) */
} count_t;

static int timed_out(const hv_as_config_t *c, const hv_as_instance_t *in, uint64_t now_ms) {
    return in->state == HV_AS_LAUNCHING && now_ms >= in->launched_ms &&
           now_ms - in->launched_ms >= (uint64_t)c->launch_timeout_s * 1000u;
}

static int aside(const hv_as_type_state_t *ts, size_t t) { return ts[t].aside_until_ms != 0; }

static uint32_t launch_limit(const hv_as_config_t *c, const count_t *k) {
    double want = ceil(c->upscaling_speed * (double)k->running);
    uint32_t lim = want > 1e6 ? 1000000u : (uint32_t)want;
    return lim < 5 ? 5 : lim;
}

static int may_launch(const hv_as_config_t *c, const count_t *k) {
    return k->exist_total < c->max_nodes && k->launching < launch_limit(c, k);
}

static void launched(const hv_as_config_t *c, count_t *k, size_t t) {
    k->exist[t]++;
    k->keep[t]++;
    k->exist_total++;
    k->keep_total++;
    k->launching++;
    k->free_slots[t] += c->types[t].slots;
    k->free_gpus[t] += c->types[t].gpus;
    k->free_mem[t] += c->types[t].memory_mb;
}

/* Takes up to want workers of demand d from type t's capacity on its way; returns how many. */
static uint32_t take_pool(const hv_as_config_t *c, count_t *k, size_t t, uint32_t want,
                          const hv_as_demand_t *d) {
    uint32_t s = d->slots_per_worker ? d->slots_per_worker : 1, g = d->gpus_per_worker;
    if (!labels_have(c->types[t].labels, d->labels)) {
        return 0;
    }
    uint64_t n = k->free_slots[t] / s;
    if (g > 0 && k->free_gpus[t] / g < n) {
        n = k->free_gpus[t] / g;
    }
    if (d->memory_mb > 0 && k->free_mem[t] / d->memory_mb < n) {
        n = k->free_mem[t] / d->memory_mb;
    }
    uint32_t got = n < want ? (uint32_t)n : want;
    k->free_slots[t] -= (uint64_t)got * s;
    k->free_gpus[t] -= (uint64_t)got * g;
    k->free_mem[t] -= (uint64_t)got * d->memory_mb;
    return got;
}

/* Rule 9: an earlier preemptible type, cheaper than t, short of capacity for less than
 * fallback_delay_s at now_ms, that a running job's demand d waits for; c->ntypes when none. */
static size_t delayed_for(const hv_as_config_t *c, const hv_as_type_state_t *ts, size_t t,
                          const hv_as_demand_t *d, uint64_t now_ms) {
    if (c->fallback_delay_s == 0 || !d->running) {
        return c->ntypes;
    }
    uint64_t delay_ms = (uint64_t)c->fallback_delay_s * 1000u;
    for (size_t p = 0; p < t; p++) {
        const hv_as_type_t *y = &c->types[p];
        uint64_t since = ts[p].short_since_ms;
        if (y->preemptible && y->price_per_hour < c->types[t].price_per_hour && since != 0 &&
            (now_ms < since || now_ms - since < delay_ms) && hv_as_fit_demand(y, d) > 0) {
            return p;
        }
    }
    return c->ntypes;
}

/* Why type t cannot take a node of this demand now, or NULL when it can. */
static const char *type_blocked(const hv_as_config_t *c, const hv_as_type_state_t *ts,
                                const count_t *k, size_t t, const hv_as_demand_t *d,
                                uint64_t now_ms) {
    if (!labels_have(c->types[t].labels, d->labels)) {
        return "lacks its labels";
    }
    if (hv_as_fit_demand(&c->types[t], d) == 0) {
        return "too small";
    }
    if (aside(ts, t)) {
        return "set aside";
    }
    if (k->exist[t] >= c->types[t].max_nodes) {
        return "at its max_nodes";
    }
    if (delayed_for(c, ts, t, d, now_ms) < c->ntypes) {
        return "waits out fallback_delay_s while a cheaper preemptible type is short";
    }
    return NULL;
}

/* Rule 4 for one demand. Returns 0, or 1 when it stays unmet (an UNMET action was added). */
static int serve(const hv_as_config_t *c, const hv_as_type_state_t *ts, count_t *k,
                 const hv_as_demand_t *d, size_t di, uint64_t now_ms, acts_t *a) {
    uint32_t s = d->slots_per_worker ? d->slots_per_worker : 1, g = d->gpus_per_worker;
    uint32_t rem = d->workers;
    for (size_t t = 0; t < c->ntypes && rem > 0; t++) {
        rem -= take_pool(c, k, t, rem, d);
    }
    const char *what = d->what ? d->what : "a job";
    while (rem > 0) {
        if (!may_launch(c, k)) {
            if (k->exist_total >= c->max_nodes) {
                hv_as_action_t *x = act_new(a, HV_AS_UNMET, 0);
                if (x != NULL) {
                    x->demand = di;
                    reasonf(x, "%s wants %u more workers: the cluster is at max_nodes %u", what,
                            rem, c->max_nodes);
                }
                return 1;
            }
            return 0; /* launching as fast as allowed: the rest on a later call */
        }
        size_t pick = c->ntypes;
        char skipped[HV_AS_REASON / 2] = "";
        for (size_t t = 0; t < c->ntypes; t++) {
            const char *why = type_blocked(c, ts, k, t, d, now_ms);
            if (why == NULL) {
                pick = t;
                break;
            }
            appendf(skipped, sizeof(skipped), "%s%s %s", skipped[0] ? ", " : "", c->types[t].name,
                    why);
        }
        if (pick == c->ntypes) {
            hv_as_action_t *x = act_new(a, HV_AS_UNMET, 0);
            if (x != NULL) {
                x->demand = di;
                reasonf(x,
                        "%s wants %u more workers (%u slot%s, %u GPU%s each) and no type can "
                        "launch: %s",
                        what, rem, s, s == 1 ? "" : "s", g, g == 1 ? "" : "s",
                        c->ntypes ? skipped : "no node types configured");
            }
            return 1;
        }
        hv_as_action_t *x = act_new(a, HV_AS_LAUNCH, pick);
        if (x == NULL) {
            return 0;
        }
        uint32_t fit = hv_as_fit_demand(&c->types[pick], d);
        reasonf(x, "%s wants %u more workers than the cluster can take: a %s node holds %u%s%s",
                what, rem, c->types[pick].name, fit, skipped[0] ? "; skipped " : "", skipped);
        launched(c, k, pick);
        rem -= take_pool(c, k, pick, rem, d);
    }
    return 0;
}

/* Rule 7's target for an instance of type t: the first preemptible type before it in fallback
 * order, cheaper, usable now and offering at least what t offers; c->ntypes when none. */
static size_t handback_target(const hv_as_config_t *c, const hv_as_type_state_t *ts, size_t t) {
    const hv_as_type_t *o = &c->types[t];
    if (o->preemptible) {
        return c->ntypes;
    }
    for (size_t p = 0; p < t; p++) {
        const hv_as_type_t *y = &c->types[p];
        if (y->preemptible && !aside(ts, p) && y->price_per_hour < o->price_per_hour &&
            y->slots >= o->slots && y->gpus >= o->gpus && y->memory_mb >= o->memory_mb &&
            labels_have(y->labels, o->labels) && y->max_nodes > 0) {
            return p;
        }
    }
    return c->ntypes;
}

static int handback_candidate(const hv_as_config_t *c, const hv_as_instance_t *in) {
    return in->type < c->ntypes && in->state == HV_AS_RUNNING && in->workers > 0 &&
           in->lost_since_ms == 0 && !c->types[in->type].preemptible;
}

/* Rule 7. */
static void handback(const hv_as_config_t *c, const hv_as_type_state_t *ts,
                     const hv_as_instance_t *inst, size_t ninst, count_t *k, acts_t *a) {
    uint32_t pending = 0, onway[AS_MAX_TYPES];
    for (size_t i = 0; i < ninst; i++) {
        pending += handback_candidate(c, &inst[i]);
    }
    if (pending == 0) {
        return;
    }
    for (size_t t = 0; t < c->ntypes; t++) {
        onway[t] = (uint32_t)(k->free_slots[t] / c->types[t].slots); /* launching, unclaimed */
    }
    for (size_t i = 0; i < ninst; i++) {
        const hv_as_instance_t *in = &inst[i];
        if (!handback_candidate(c, in) || k->keep[in->type] <= c->types[in->type].min_nodes) {
            continue;
        }
        size_t p = handback_target(c, ts, in->type);
        if (p == c->ntypes) {
            continue;
        }
        const char *pn = c->types[p].name, *tn = c->types[in->type].name;
        if (k->idle[p] > 0) { /* made: a node of p has joined and waits; break */
            hv_as_action_t *x = act_new(a, HV_AS_DRAIN, in->type);
            if (x == NULL) {
                return;
            }
            k->idle[p]--;
            k->held[p]++;
            k->keep[in->type]--;
            k->keep_total--;
            x->instance = in->id;
            reasonf(x,
                    "instance %llu (%s) is handed back: a %s node has joined to take its "
                    "workers (%.3f/h instead of %.3f/h)",
                    (unsigned long long)in->id, tn, pn, c->types[p].price_per_hour,
                    c->types[in->type].price_per_hour);
            continue;
        }
        if (onway[p] > 0) { /* its replacement is on its way */
            onway[p]--;
            k->free_slots[p] -= c->types[p].slots;
            k->free_gpus[p] -= c->types[p].gpus;
            k->free_mem[p] -= c->types[p].memory_mb;
            continue;
        }
        if (k->exist[p] >= c->types[p].max_nodes) { /* the type's own cap holds after the swap */
            continue;
        }
        if (k->exist_total >= c->max_nodes + pending || k->launching >= launch_limit(c, k)) {
            return;
        }
        hv_as_action_t *x = act_new(a, HV_AS_LAUNCH, p);
        if (x == NULL) {
            return;
        }
        reasonf(x,
                "%s is usable again: a %s node to take the workers of instance %llu (%s) before "
                "it is handed back",
                pn, pn, (unsigned long long)in->id, tn);
        k->exist[p]++;
        k->keep[p]++;
        k->exist_total++;
        k->keep_total++;
        k->launching++;
    }
}

/* Rule 8. */
static void spares(const hv_as_config_t *c, const hv_as_type_state_t *ts, count_t *k,
                   uint64_t now_ms, acts_t *a) {
    uint32_t want = c->spare_nodes ? c->spare_nodes : 1;
    for (size_t t = 0; t < c->ntypes; t++) {
        const hv_as_type_t *y = &c->types[t];
        double rate = hv_as_preempt_rate(c, ts, t, now_ms);
        if (!y->preemptible || aside(ts, t) || rate < c->spare_per_hour) {
            continue;
        }
        uint32_t have = k->idle[t] + (uint32_t)(k->free_slots[t] / y->slots);
        uint32_t keep = have < want ? have : want;
        k->held[t] += keep < k->idle[t] ? keep : k->idle[t];
        k->idle[t] -= keep < k->idle[t] ? keep : k->idle[t];
        while (have < want && k->exist[t] < y->max_nodes && may_launch(c, k)) {
            hv_as_action_t *x = act_new(a, HV_AS_LAUNCH, t);
            if (x == NULL) {
                return;
            }
            reasonf(x,
                    "a spare %s node (%u kept): %.1f preemptions an hour measured, at least %.1f "
                    "call for one",
                    y->name, want, rate, c->spare_per_hour);
            k->exist[t]++;
            k->keep[t]++;
            k->exist_total++;
            k->keep_total++;
            k->launching++;
            have++;
        }
    }
}

/* Rule 6. */
static void give_back_idle(const hv_as_config_t *c, const hv_as_instance_t *inst, size_t ninst,
                           int waiting, count_t *k, uint64_t now_ms, acts_t *a) {
    /* 6. idle nodes, unless workers still wait: the demand counts what the free slots cannot
     * give, so an idle node is about to be used (or its demand is unmet, and giving the node
     * back would only buy it again). Nodes held by rules 7 and 8 stay. */
    for (size_t i = 0; i < ninst && !waiting; i++) {
        const hv_as_instance_t *in = &inst[i];
        if (in->type >= c->ntypes || in->state != HV_AS_RUNNING || in->workers > 0 ||
            in->lost_since_ms != 0 || now_ms < in->idle_since_ms ||
            now_ms - in->idle_since_ms < (uint64_t)c->idle_timeout_s * 1000u) {
            continue;
        }
        if (k->held[in->type] > 0) {
            k->held[in->type]--;
            continue;
        }
        if (k->keep[in->type] <= c->types[in->type].min_nodes || k->keep_total <= c->min_nodes) {
            continue;
        }
        hv_as_action_t *x = act_new(a, HV_AS_TERMINATE, in->type);
        if (x == NULL) {
            break;
        }
        x->instance = in->id;
        reasonf(x, "instance %llu (%s) idle for %llu s (idle timeout %u s)",
                (unsigned long long)in->id, c->types[in->type].name,
                (unsigned long long)((now_ms - in->idle_since_ms) / 1000u), c->idle_timeout_s);
        k->keep[in->type]--;
        k->keep_total--;
    }
}

/* Rule 7, the end: a handed-back instance whose workers have moved off it goes. */
static void terminate_handed_back(const hv_as_config_t *c, const hv_as_instance_t *inst,
                                  size_t ninst, acts_t *a) {
    /* 7. a handed-back instance whose workers have moved off it goes */
    for (size_t i = 0; i < ninst; i++) {
        const hv_as_instance_t *in = &inst[i];
        if (in->type >= c->ntypes || in->state != HV_AS_DRAINING || !in->handback ||
            in->workers > 0) {
            continue;
        }
        hv_as_action_t *x = act_new(a, HV_AS_TERMINATE, in->type);
        if (x == NULL) {
            break;
        }
        x->instance = in->id;
        reasonf(x, "instance %llu (%s) handed back: its workers have moved off it",
                (unsigned long long)in->id, c->types[in->type].name);
    }
}

size_t hv_as_decide(const hv_as_config_t *c, hv_as_type_state_t *ts, const hv_as_instance_t *inst,
                    size_t ninst, const hv_as_demand_t *d, size_t nd, uint64_t now_ms,
                    hv_as_action_t *out, size_t cap) {
    if (c == NULL || ts == NULL || out == NULL || c->ntypes > AS_MAX_TYPES ||
        (ninst > 0 && inst == NULL) || (nd > 0 && d == NULL)) {
        return 0;
    }
    acts_t a = {.out = out, .n = 0, .cap = cap};

    /* 1. set-asides that ended */
    for (size_t t = 0; t < c->ntypes; t++) {
        if (aside(ts, t) && now_ms >= ts[t].aside_until_ms) {
            hv_as_action_t *x = act_new(&a, HV_AS_TYPE_BACK, t);
            if (x == NULL) {
                break;
            }
            ts[t].aside_until_ms = 0;
            ts[t].failures = 0;
            reasonf(x, "type %s is tried again: its %u s set-aside ended", c->types[t].name,
                    c->set_aside_s);
        }
    }

    /* 2. launches that took too long; count what exists */
    count_t k;
    memset(&k, 0, sizeof(k));
    for (size_t i = 0; i < ninst; i++) {
        const hv_as_instance_t *in = &inst[i];
        if (in->type >= c->ntypes || in->state == HV_AS_TERMINATING) {
            continue;
        }
        if (timed_out(c, in, now_ms)) {
            hv_as_action_t *x = act_new(&a, HV_AS_TERMINATE, in->type);
            if (x == NULL) {
                continue; /* no room: decided on the next call; still not counted as capacity */
            }
            x->instance = in->id;
            x->launch_failure = 1;
            reasonf(x, "instance %llu (%s) did not join within the launch timeout of %u s",
                    (unsigned long long)in->id, c->types[in->type].name, c->launch_timeout_s);
            hv_as_action_t as;
            if (count_failure(c, ts, in->type, now_ms, "did not join in time", &as)) {
                hv_as_action_t *y = act_new(&a, HV_AS_TYPE_ASIDE, in->type);
                if (y != NULL) {
                    *y = as;
                }
            }
            continue;
        }
        if (in->state == HV_AS_RUNNING && in->lost_since_ms != 0 && now_ms >= in->lost_since_ms &&
            now_ms - in->lost_since_ms >= (uint64_t)c->launch_timeout_s * 1000u) {
            hv_as_action_t *x = act_new(&a, HV_AS_TERMINATE, in->type);
            if (x == NULL) {
                continue;
            }
            x->instance = in->id;
            reasonf(x, "instance %llu (%s): its node has been lost for %llu s",
                    (unsigned long long)in->id, c->types[in->type].name,
                    (unsigned long long)((now_ms - in->lost_since_ms) / 1000u));
            continue;
        }
        /* A draining instance is leaving (a preemption notice: the cloud takes it): its
         * replacement may be bought while it still runs, so it does not count against
         * max_nodes. */
        if (in->state != HV_AS_DRAINING) {
            k.exist[in->type]++;
            k.exist_total++;
        }
        if (in->state == HV_AS_LAUNCHING) {
            k.keep[in->type]++;
            k.keep_total++;
            k.launching++;
            k.free_slots[in->type] += c->types[in->type].slots;
            k.free_gpus[in->type] += c->types[in->type].gpus;
            k.free_mem[in->type] += c->types[in->type].memory_mb;
        } else if (in->state == HV_AS_RUNNING) {
            k.keep[in->type]++;
            k.keep_total++;
            k.running++;
            k.idle[in->type] += in->workers == 0 && in->lost_since_ms == 0;
        }
    }

    /* 3. each type's minimum */
    for (size_t t = 0; t < c->ntypes; t++) {
        while (!aside(ts, t) && k.keep[t] < c->types[t].min_nodes &&
               k.exist[t] < c->types[t].max_nodes && may_launch(c, &k)) {
            hv_as_action_t *x = act_new(&a, HV_AS_LAUNCH, t);
            if (x == NULL) {
                break;
            }
            reasonf(x, "type %s keeps at least %u nodes (has %u)", c->types[t].name,
                    c->types[t].min_nodes, k.keep[t]);
            launched(c, &k, t);
        }
    }

    /* 3b. the cluster's minimum, in fallback order */
    while (k.keep_total < c->min_nodes && may_launch(c, &k)) {
        size_t t = 0;
        while (t < c->ntypes && (aside(ts, t) || k.exist[t] >= c->types[t].max_nodes)) {
            t++;
        }
        hv_as_action_t *x = t < c->ntypes ? act_new(&a, HV_AS_LAUNCH, t) : NULL;
        if (x == NULL) {
            break;
        }
        reasonf(x, "the cluster keeps at least %u nodes (has %u)", c->min_nodes, k.keep_total);
        launched(c, &k, t);
    }

    /* 4, 5. demand */
    for (size_t i = 0; i < nd; i++) {
        if (d[i].workers > 0) {
            (void)serve(c, ts, &k, &d[i], i, now_ms, &a);
        }
    }

    int waiting = 0;
    for (size_t i = 0; i < nd; i++) {
        waiting |= d[i].workers > 0;
    }

    /* 7. on-demand handed back for spot, make before break; 8. spares */
    if (c->handback && !waiting) {
        handback(c, ts, inst, ninst, &k, &a);
    }
    if (c->spare_per_hour > 0 && !waiting) {
        spares(c, ts, &k, now_ms, &a);
    }

    give_back_idle(c, inst, ninst, waiting, &k, now_ms, &a); /* 6 */
    terminate_handed_back(c, inst, ninst, &a);               /* 7: the break's end */
    return a.n;
}
