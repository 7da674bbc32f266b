/*
 * autoscale: see autoscale.h. The instances live in a list, each mirrored by a row of the
 * instances table; a row is written before the provider is asked anything, and a row that could
 * not be written is written again on the next tick (dirty) before anything else is decided.
 */
#include "autoscale.h"

#include "log.h"
#include "mem.h"
#include "policy.h"
#include "provider.h"
#include "store.h"
#include "util.h"

#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define AS_PERIOD_MS 1000u
#define AS_SOON_MS                                                                                 \
    3000u /* after a notice or a preemption: decide at every head tick for this
                          * long, so the replacement is bought once the job asks for it */
#define AS_MAX_ACTIONS 64
#define AS_MAX_DEMAND 256
#define AS_NAME 128
#define AS_PATH 1024
#define AS_HANDBACK_NOTICE_MS 5000u /* a hand-back's drain notice (hv_cl_drain_hold_until: 3 s) */

typedef struct as_inst_s {
    struct as_inst_s *next;
    uint64_t id;
    size_t type; /* index into cfg types; ntypes when the type is no longer configured */
    hv_as_inst_state state;
    int ended;
    int dirty;     /* the row must be written again */
    int preempted; /* a preemption ended it */
    int noticed;   /* the provider delivered a preemption notice (its end is a preemption) */
    int handback;  /* drained to be handed back (policy rule 7): terminated once empty */
    char name[AS_NAME];
    char handle[64];
    char reason[HV_AS_REASON];
    uint64_t launched_mono, idle_since_mono;
    uint64_t lost_since_mono; /* running, its node dead or missing since (0: there) */
    uint64_t created_wall, joined_wall, ended_wall;
} as_inst_t;

struct hv_autoscale_s {
    uv_loop_t *loop;
    const hv_head_config_t *cfg;
    hv_driver_t *d;
    hv_actors_t *actors; /* borrowed; NULL: none */
    hv_store_t *store;
    const hv_creds_t *creds;
    char head_addr[256];
    char agent[AS_PATH];
    char dir[AS_PATH]; /* <data_dir>/instances: token files, local agents' work dirs */
    const char *provider_name;
    hv_provider_t *prov;
    hv_as_type_t *types;
    hv_as_config_t pc;
    hv_as_type_state_t *ts;
    hv_ss_type_t *ss_types;
    as_inst_t *insts;
    uint64_t next_id;
    uint64_t last_ms;
    uint64_t soon_until;      /* decide at every head tick until then (after a notice or a loss) */
    char unmet[HV_AS_REASON]; /* the last unmet demand told (told again when it changes) */
};

static const char *state_word(const as_inst_t *in) {
    if (in->ended) {
        return "ended";
    }
    switch (in->state) {
    case HV_AS_LAUNCHING:
        return "launching";
    case HV_AS_RUNNING:
        return "running";
    case HV_AS_DRAINING:
        return "draining";
    case HV_AS_TERMINATING:
        return "terminating";
    }
    return "?";
}

static const char *type_name(const hv_autoscale_t *a, const as_inst_t *in) {
    return in->type < a->pc.ntypes ? a->pc.types[in->type].name : "?";
}

static as_inst_t *find(hv_autoscale_t *a, uint64_t id) {
    for (as_inst_t *in = a->insts; in != NULL; in = in->next) {
        if (in->id == id) {
            return in;
        }
    }
    return NULL;
}

static void token_path(const hv_autoscale_t *a, uint64_t id, char *buf, size_t len) {
    snprintf(buf, len, "%s/%" PRIu64 ".token", a->dir, id);
}

/* Writes the instance's row. On failure the row stays dirty and the tick writes it again. */
static hv_err persist(hv_autoscale_t *a, as_inst_t *in) {
    char id[24];
    snprintf(id, sizeof(id), "%" PRIu64, in->id);
    double price = in->type < a->pc.ntypes ? a->pc.types[in->type].price_per_hour : 0.0;
    hv_instance_row_t row = {.id = id,
                             .provider = (char *)a->provider_name,
                             .state = (char *)state_word(in),
                             .node_name = in->name,
                             .price_milli = (uint64_t)(price * 1000.0 + 0.5),
                             .created_ms = in->created_wall,
                             .ended_ms = in->ended ? in->ended_wall : 0,
                             .type = (char *)type_name(a, in),
                             .handle = in->handle,
                             .joined_ms = in->joined_wall,
                             .reason = in->reason,
                             .preempted = in->preempted};
    hv_err rc = hv_store_instance_put(a->store, &row);
    in->dirty = rc != HV_OK;
    if (rc != HV_OK) {
        HV_LOG(HV_LOG_ERROR, "autoscale", "HV-AS-STORE",
               "instance %" PRIu64 " not stored (%s: %s); trying again", in->id, hv_strerror(rc),
               hv_store_last_error(a->store));
    }
    return rc;
}

static void as_event(hv_autoscale_t *a, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void as_event(hv_autoscale_t *a, const char *kind, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    hv_driver_event(a->d, 0, 0, kind, NULL, "%s", msg);
}

/* The instance is gone: stored as ended, its enrollment credential void. */
static void ended(hv_autoscale_t *a, as_inst_t *in, const char *why, int preempted) {
    if (in->ended) {
        return;
    }
    in->ended = 1;
    in->ended_wall = hv_wall_ms();
    in->preempted = preempted;
    snprintf(in->reason, sizeof(in->reason), "%s", why);
    (void)persist(a, in);
    char tok[AS_PATH + 32];
    token_path(a, in->id, tok, sizeof(tok));
    (void)unlink(tok);
    const hv_dnode_t *nd = hv_driver_node_by_name(a->d, in->name);
    if (nd != NULL) {
        hv_driver_node_retire(a->d, nd->id);
    }
}

static void set_aside_event(hv_autoscale_t *a, const hv_as_action_t *x) {
    as_event(a, "autoscaler.type_aside", "%s", x->reason);
}

/* A launch that failed (at once, or later, or by not joining): counted against its type. */
static void launch_failed(hv_autoscale_t *a, as_inst_t *in, const char *why) {
    hv_as_action_t aside;
    if (in->type < a->pc.ntypes &&
        hv_as_launch_failed(&a->pc, a->ts, in->type, hv_now_ms(), why, &aside)) {
        set_aside_event(a, &aside);
    }
}

/* ---- provider events ------------------------------------------------------------------------ */

static void on_provider_event(hv_provider_t *p, hv_prov_event ev, uint64_t id, hv_prov_cause cause,
                              const char *why, void *ud) {
    (void)p;
    hv_autoscale_t *a = ud;
    as_inst_t *in = find(a, id);
    if (ev == HV_PROV_NOTE || in == NULL) {
        if (why != NULL && why[0] != '\0') {
            as_event(a, "autoscaler.note", "%s", why);
        }
        return;
    }
    const char *tn = type_name(a, in);
    switch (ev) {
    case HV_PROV_NOTICE:
        if (!in->noticed && in->type < a->pc.ntypes) {
            hv_as_preempted(&a->pc, a->ts, in->type, hv_now_ms()); /* the spare rule's rate */
        }
        in->noticed = 1;
        if (!in->ended && in->state != HV_AS_TERMINATING) {
            in->state = HV_AS_DRAINING;
            (void)persist(a, in);
        }
        as_event(a, "autoscaler.notice", "instance %" PRIu64 " (%s, node %s): %s", id, tn, in->name,
                 why ? why : "preemption notice");
        a->soon_until = hv_now_ms() + AS_SOON_MS;
        break;
    case HV_PROV_LAUNCH_FAILED:
        /* One that is already being terminated (it did not join in time) was counted as a
         * launch failure then: its launch command failing afterwards is the same failure. */
        if (!in->ended && in->state == HV_AS_TERMINATING) {
            ended(a, in, why ? why : "launch failed", 0);
        } else if (!in->ended) {
            char r[HV_AS_REASON];
            snprintf(r, sizeof(r), "launch failed: %s", why ? why : "unknown");
            ended(a, in, r, 0);
            as_event(a, "autoscaler.launch_failed", "instance %" PRIu64 " (%s): %s", id, tn, r);
            launch_failed(a, in, why); /* after its event: it may set the type aside */
        }
        break;
    case HV_PROV_GONE:
        if (!in->ended) {
            int never_joined = in->joined_wall == 0 && in->state != HV_AS_TERMINATING;
            int preempted = in->noticed || cause == HV_PROV_CAUSE_PREEMPTED;
            char r[HV_AS_REASON];
            snprintf(r, sizeof(r), "%s%.150s",
                     in->noticed && cause != HV_PROV_CAUSE_PREEMPTED
                         ? "preempted after its notice: "
                         : "",
                     why ? why : "gone");
            why = r;
            if (preempted && !in->noticed && in->type < a->pc.ntypes) {
                hv_as_preempted(&a->pc, a->ts, in->type, hv_now_ms());
            }
            ended(a, in, why, preempted);
            if (preempted) {
                a->soon_until = hv_now_ms() + AS_SOON_MS;
            }
            as_event(a, preempted ? "autoscaler.preempted" : "autoscaler.gone",
                     "instance %" PRIu64 " (%s, node %s) is gone: %s", id, tn, in->name,
                     why ? why : "gone");
            if (never_joined && !preempted) {
                launch_failed(a, in, why);
            }
        }
        break;
    case HV_PROV_NOTE:
        break;
    }
}

/* ---- decisions ------------------------------------------------------------------------------ */

static void do_launch(hv_autoscale_t *a, const hv_as_action_t *x, uint64_t now) {
    const hv_head_node_type_t *t = &a->cfg->autoscaler.types[x->type];
    as_inst_t *in = hv_calloc(1, sizeof(*in));
    if (in == NULL) {
        return;
    }
    in->id = a->next_id++;
    in->type = x->type;
    in->state = HV_AS_LAUNCHING;
    in->launched_mono = now;
    in->created_wall = hv_wall_ms();
    snprintf(in->name, sizeof(in->name), "%s-%" PRIu64, t->name, in->id);
    char tok[AS_PATH + 32], cred[HV_CREDS_MAX + 1];
    token_path(a, in->id, tok, sizeof(tok));
    hv_creds_instance(a->creds, in->id, cred);
    strcat(cred, "\n");
    hv_err rc = hv_write_file_atomic(tok, cred, strlen(cred), 0600);
    memset(cred, 0, sizeof(cred));
    if (rc != HV_OK) {
        HV_LOG(HV_LOG_ERROR, "autoscale", "HV-AS-TOKEN", "cannot write %s: %s; no launch", tok,
               hv_strerror(rc));
        hv_free(in);
        return;
    }
    /* Stored before the provider hears of it: a head that dies now adopts or ends it. */
    if (persist(a, in) != HV_OK) {
        (void)unlink(tok);
        hv_free(in);
        return;
    }
    in->next = a->insts;
    a->insts = in;
    hv_prov_launch_t l = {.instance = in->id,
                          .name = in->name,
                          .type = in->type,
                          .type_name = t->name,
                          .slots = t->slots,
                          .gpus = t->gpus,
                          .preemptible = t->preemptible,
                          .labels = t->labels,
                          .memory_mb = t->memory_mb,
                          .head = a->head_addr,
                          .token_file = tok};
    char err[300] = "";
    rc = hv_provider_launch(a->prov, &l, err, sizeof(err));
    if (rc != HV_OK) {
        char r[HV_AS_REASON];
        snprintf(r, sizeof(r), "launch failed: %.150s", err[0] ? err : hv_strerror(rc));
        ended(a, in, r, 0);
        as_event(a, "autoscaler.launch_failed", "instance %" PRIu64 " (%s): %s", in->id, t->name,
                 r);
        launch_failed(a, in, err);
        return;
    }
    const char *h = hv_provider_handle(a->prov, in->id);
    if (h != NULL) {
        snprintf(in->handle, sizeof(in->handle), "%s", h);
        (void)persist(a, in);
    }
    as_event(a, "autoscaler.launch", "instance %" PRIu64 " (%s, node %s, %u slots, %.3f/h): %s",
             in->id, t->name, in->name, t->slots, t->price_per_hour, x->reason);
}

static void do_terminate(hv_autoscale_t *a, const hv_as_action_t *x) {
    as_inst_t *in = find(a, x->instance);
    if (in == NULL || in->ended) {
        return;
    }
    /* Nothing may be placed on it between now and its end. */
    const hv_dnode_t *nd = hv_driver_node_by_name(a->d, in->name);
    if (nd != NULL && nd->state == HV_NODE_ALIVE) {
        (void)hv_driver_node_drain(a->d, nd->id, 1, "the autoscaler gives it back", 0, 0, NULL, 0);
    }
    in->state = HV_AS_TERMINATING;
    snprintf(in->reason, sizeof(in->reason), "%s", x->reason);
    if (persist(a, in) != HV_OK) {
        return; /* decided again on the next tick, once stored */
    }
    as_event(a, x->launch_failure ? "autoscaler.launch_failed" : "autoscaler.terminate",
             "instance %" PRIu64 " (%s, node %s): %s", in->id, type_name(a, in), in->name,
             x->reason);
    if (hv_provider_terminate(a->prov, in->id) == HV_ENOTFOUND) {
        ended(a, in, x->reason, 0);
    }
}

/* Rule 7's break: the instance's jobs move their workers off it as on a notice of
 * AS_HANDBACK_NOTICE_MS (held while they grow onto the joined spot node, at most 3 s: an elastic
 * job at its max-np may not grow before they leave, and then it re-forms without them and grows
 * onto the free node); terminated once empty. */
static void do_drain(hv_autoscale_t *a, const hv_as_action_t *x) {
    as_inst_t *in = find(a, x->instance);
    const hv_dnode_t *nd = in != NULL && !in->ended ? hv_driver_node_by_name(a->d, in->name) : NULL;
    if (nd == NULL || nd->state != HV_NODE_ALIVE) {
        return;
    }
    char err[200] = "";
    if (hv_driver_node_drain(a->d, nd->id, 1, "the autoscaler hands it back", 0,
                             AS_HANDBACK_NOTICE_MS, err, sizeof(err)) != HV_OK) {
        return; /* decided again on the next tick */
    }
    in->handback = 1;
    in->state = HV_AS_DRAINING;
    snprintf(in->reason, sizeof(in->reason), "%s", x->reason);
    (void)persist(a, in);
    as_event(a, "autoscaler.handback", "instance %" PRIu64 " (%s, node %s): %s", in->id,
             type_name(a, in), in->name, x->reason);
}

static void act(hv_autoscale_t *a, const hv_as_action_t *x, uint64_t now) {
    switch (x->kind) {
    case HV_AS_LAUNCH:
        do_launch(a, x, now);
        break;
    case HV_AS_TERMINATE:
        do_terminate(a, x);
        break;
    case HV_AS_TYPE_ASIDE:
        set_aside_event(a, x);
        break;
    case HV_AS_TYPE_BACK:
        as_event(a, "autoscaler.type_back", "%s", x->reason);
        break;
    case HV_AS_DRAIN:
        do_drain(a, x);
        break;
    case HV_AS_UNMET:
        if (strcmp(a->unmet, x->reason) != 0) {
            snprintf(a->unmet, sizeof(a->unmet), "%s", x->reason);
            as_event(a, "autoscaler.unmet", "%s", x->reason);
        }
        break;
    }
}

/* What the nodes say about the instances: joined, draining, busy or idle. */
static void sync_nodes(hv_autoscale_t *a, uint64_t now) {
    for (as_inst_t *in = a->insts; in != NULL; in = in->next) {
        if (in->ended) {
            continue;
        }
        if (in->handle[0] == '\0') {
            const char *h = hv_provider_handle(a->prov, in->id);
            if (h != NULL) {
                snprintf(in->handle, sizeof(in->handle), "%s", h);
                in->dirty = 1;
            }
        }
        const hv_dnode_t *nd = hv_driver_node_by_name(a->d, in->name);
        if (nd == NULL || nd->state == HV_NODE_DEAD) {
            if (in->state == HV_AS_RUNNING && in->lost_since_mono == 0) {
                in->lost_since_mono = now;
            }
            continue;
        }
        in->lost_since_mono = 0;
        if (in->state == HV_AS_LAUNCHING) {
            in->state = HV_AS_RUNNING;
            in->joined_wall = hv_wall_ms();
            in->idle_since_mono = now;
            in->dirty = 1;
            if (in->type < a->pc.ntypes) {
                hv_as_joined(a->ts, in->type);
            }
            as_event(a, "autoscaler.joined",
                     "instance %" PRIu64 " (%s) joined as node %s, %.1f s after its launch", in->id,
                     type_name(a, in), in->name, (double)(now - in->launched_mono) / 1000.0);
        }
        if (in->state == HV_AS_RUNNING && nd->state == HV_NODE_DRAINING) {
            in->state = HV_AS_DRAINING;
            in->dirty = 1;
        }
        if (nd->acct.slots_used > 0) {
            in->idle_since_mono = 0;
        } else if (in->idle_since_mono == 0) {
            in->idle_since_mono = now;
        }
    }
}

/* Slots the autoscaler could add to what the driver counts now (alive nodes): each type up to
 * its max, all up to max_nodes. An instance whose node is not alive (launching, draining, given
 * back) counts as room: a submit must not be refused in the moment between an idle node going
 * away and its instance ending, nor counted twice in the moment a node joined. */
static uint32_t room(void *ud) {
    hv_autoscale_t *a = ud;
    uint32_t exist[HV_SS_MAX_TYPES] = {0}, total = 0, best = 0;
    for (const as_inst_t *in = a->insts; in != NULL; in = in->next) {
        const hv_dnode_t *nd = hv_driver_node_by_name(a->d, in->name);
        if (!in->ended && nd != NULL && nd->state == HV_NODE_ALIVE && in->type < a->pc.ntypes &&
            in->type < HV_SS_MAX_TYPES) {
            exist[in->type]++;
            total++;
        }
    }
    uint64_t by_type = 0;
    for (size_t t = 0; t < a->pc.ntypes && t < HV_SS_MAX_TYPES; t++) {
        const hv_as_type_t *ty = &a->pc.types[t];
        if (ty->max_nodes > exist[t]) {
            by_type += (uint64_t)(ty->max_nodes - exist[t]) * ty->slots;
        }
        best = ty->slots > best ? ty->slots : best;
    }
    uint64_t by_total = a->pc.max_nodes > total ? (uint64_t)(a->pc.max_nodes - total) * best : 0;
    uint64_t r = by_type < by_total ? by_type : by_total;
    return r > UINT32_MAX ? UINT32_MAX : (uint32_t)r;
}

/* Rule 9's input: the job has a live worker (it trains on what it has while it waits). */
static int job_runs(hv_autoscale_t *a, uint64_t job_id) {
    const hv_djob_t *j = hv_driver_job(a->d, job_id);
    for (size_t i = 0; j != NULL && i < j->jm.nw; i++) {
        const hv_jm_worker_t *w = j->jm.w[i];
        if (hv_wk_state_active(w->state) && !w->removed && !w->evict) {
            return 1;
        }
    }
    return 0;
}

void hv_autoscale_tick(hv_autoscale_t *a, uint64_t now) {
    if (a == NULL || (a->last_ms != 0 && now - a->last_ms < AS_PERIOD_MS && now >= a->soon_until)) {
        return;
    }
    a->last_ms = now;
    sync_nodes(a, now);
    int dirty = 0;
    for (as_inst_t *in = a->insts; in != NULL; in = in->next) {
        if (in->dirty && persist(a, in) != HV_OK) {
            dirty = 1;
        }
    }
    /* Drop ended instances from memory (their rows stay for the cost report). */
    for (as_inst_t **pp = &a->insts; *pp != NULL;) {
        as_inst_t *in = *pp;
        if (in->ended && !in->dirty) {
            *pp = in->next;
            hv_free(in);
        } else {
            pp = &in->next;
        }
    }
    if (dirty) {
        return; /* decide once the store has what is decided already */
    }
    size_t ninst = 0;
    for (as_inst_t *in = a->insts; in != NULL; in = in->next) {
        ninst++;
    }
    hv_as_instance_t *inst = hv_calloc(ninst + 1, sizeof(*inst));
    hv_driver_demand_t dd[AS_MAX_DEMAND];
    hv_as_demand_t dem[AS_MAX_DEMAND];
    char what[AS_MAX_DEMAND][48];
    hv_as_action_t *acts = hv_calloc(AS_MAX_ACTIONS, sizeof(*acts));
    if (inst == NULL || acts == NULL) {
        hv_free(inst);
        hv_free(acts);
        return;
    }
    size_t i = 0;
    for (as_inst_t *in = a->insts; in != NULL; in = in->next, i++) {
        uint32_t workers = 0;
        const hv_dnode_t *nd = hv_driver_node_by_name(a->d, in->name);
        if (nd != NULL && nd->state != HV_NODE_DEAD) {
            workers = nd->acct.slots_used;
        }
        inst[i] =
            (hv_as_instance_t){.id = in->id,
                               .type = in->type,
                               .state = in->state,
                               .launched_ms = in->launched_mono,
                               .idle_since_ms = in->idle_since_mono ? in->idle_since_mono : now,
                               .lost_since_ms = in->lost_since_mono,
                               .workers = workers,
                               .handback = in->handback};
    }
    size_t nd = hv_driver_demand(a->d, dd, AS_MAX_DEMAND);
    for (size_t k = 0; k < nd; k++) {
        snprintf(what[k], sizeof(what[k]), "job %" PRIu64 " (%s)", dd[k].job_id,
                 dd[k].pending ? "to start" : "to grow");
        dem[k] = (hv_as_demand_t){.workers = dd[k].workers,
                                  .slots_per_worker = 1,
                                  .gpus_per_worker = 0,
                                  .what = what[k],
                                  .running = !dd[k].pending && job_runs(a, dd[k].job_id)};
    }
    /* The actors waiting for a node: one worker each of their demand (slots, GPUs, memory,
     * labels). */
    const hv_dactor_t *wa[AS_MAX_DEMAND];
    size_t first_actor = nd;
    for (const hv_dactor_t *x = a->actors != NULL ? hv_actors_all(a->actors) : NULL;
         x != NULL && nd < AS_MAX_DEMAND; x = x->next) {
        if (!hv_actors_waiting(x, now)) {
            continue;
        }
        snprintf(what[nd], sizeof(what[nd]), "actor %" PRIu64 "%s%.20s", x->am.id,
                 x->name[0] ? " " : "", x->name);
        wa[nd] = x;
        dem[nd] = (hv_as_demand_t){.workers = 1,
                                   .slots_per_worker = x->slots,
                                   .gpus_per_worker = x->gpus,
                                   .memory_mb = x->memory_mb,
                                   .labels = x->labels,
                                   .what = what[nd]};
        nd++;
    }
    size_t n = hv_as_decide(&a->pc, a->ts, inst, ninst, dem, nd, now, acts, AS_MAX_ACTIONS);
    int unmet = 0;
    for (size_t k = 0; k < n; k++) {
        unmet |= acts[k].kind == HV_AS_UNMET;
        act(a, &acts[k], now);
    }
    if (!unmet) {
        a->unmet[0] = '\0';
    }
    /* What each waiting actor hears (hvctl status, hvctl actor): a node of a type that holds it
     * is launching, or why none can be bought. */
    for (size_t k = first_actor; k < nd; k++) {
        char note[HV_AS_REASON + 64] = "";
        for (as_inst_t *in = a->insts; in != NULL && note[0] == '\0'; in = in->next) {
            if (in->state == HV_AS_LAUNCHING && !in->ended && in->type < a->pc.ntypes &&
                hv_as_fit_demand(&a->pc.types[in->type], &dem[k]) > 0) {
                snprintf(note, sizeof(note),
                         "the autoscaler is buying a node for it: instance %" PRIu64
                         " (type %s) is launching",
                         in->id, a->pc.types[in->type].name);
            }
        }
        for (size_t q = 0; q < n && note[0] == '\0'; q++) {
            if (acts[q].kind == HV_AS_UNMET && acts[q].demand == k) {
                snprintf(note, sizeof(note), "the autoscaler cannot buy a node for it: %s",
                         acts[q].reason);
            }
        }
        hv_actors_set_note(a->actors, wa[k]->am.id, note);
    }
    hv_free(inst);
    hv_free(acts);
}

int hv_autoscale_admit(void *ud, uint64_t instance, const char *name) {
    hv_autoscale_t *a = ud;
    as_inst_t *in = a != NULL ? find(a, instance) : NULL;
    return in != NULL && !in->ended && name != NULL && strcmp(in->name, name) == 0;
}

/* ---- create, load, destroy ------------------------------------------------------------------ */

static hv_err make_policy(hv_autoscale_t *a, char *err, size_t errlen) {
    const hv_head_config_t *c = a->cfg;
    size_t nt = c->autoscaler.ntypes;
    a->types = hv_calloc(nt + 1, sizeof(*a->types));
    a->ts = hv_calloc(nt + 1, sizeof(*a->ts));
    a->ss_types = hv_calloc(nt + 1, sizeof(*a->ss_types));
    if (a->types == NULL || a->ts == NULL || a->ss_types == NULL) {
        snprintf(err, errlen, "out of memory");
        return HV_ENOMEM;
    }
    for (size_t t = 0; t < nt; t++) {
        const hv_head_node_type_t *ht = &c->autoscaler.types[t];
        a->types[t] = (hv_as_type_t){.name = ht->name,
                                     .slots = ht->slots,
                                     .gpus = ht->gpus,
                                     .preemptible = ht->preemptible,
                                     .price_per_hour = ht->price_per_hour,
                                     .min_nodes = ht->min_nodes,
                                     .max_nodes = ht->max_nodes,
                                     .labels = ht->labels,
                                     .memory_mb = ht->memory_mb};
        a->ss_types[t] = (hv_ss_type_t){
            .name = ht->name, .preemptible = ht->preemptible, .capacity = ht->capacity};
    }
    a->pc = (hv_as_config_t){.types = a->types,
                             .ntypes = nt,
                             .min_nodes = c->autoscaler.min_nodes,
                             .max_nodes = c->autoscaler.max_nodes,
                             .upscaling_speed = c->autoscaler.upscaling_speed,
                             .idle_timeout_s = c->autoscaler.idle_timeout_s,
                             .launch_timeout_s = c->autoscaler.launch_timeout_s,
                             .max_launch_failures = c->autoscaler.max_launch_failures,
                             .set_aside_s = c->autoscaler.set_aside_s,
                             .handback = c->autoscaler.handback,
                             .spare_per_hour = c->autoscaler.spare_per_hour,
                             .spare_nodes = c->autoscaler.spare_nodes,
                             .spare_window_s = c->autoscaler.spare_window_s,
                             .fallback_delay_s = c->autoscaler.fallback_delay_s};
    if (!hv_as_config_valid(&a->pc, err, errlen)) {
        return HV_EINVAL;
    }
    return HV_OK;
}

hv_err hv_autoscale_create(uv_loop_t *loop, const hv_autoscale_opts_t *o, hv_autoscale_t **out,
                           char *err, size_t errlen) {
    *out = NULL;
    const char *pn = o->cfg->autoscaler.provider;
    if (pn == NULL || strcmp(pn, "none") == 0) {
        return HV_OK;
    }
    hv_autoscale_t *a = hv_calloc(1, sizeof(*a));
    if (a == NULL) {
        snprintf(err, errlen, "out of memory");
        return HV_ENOMEM;
    }
    a->loop = loop;
    a->cfg = o->cfg;
    a->d = o->driver;
    a->actors = o->actors;
    a->store = o->store;
    a->creds = o->creds;
    a->provider_name = pn;
    a->next_id = 1;
    snprintf(a->head_addr, sizeof(a->head_addr), "%s", o->head_addr);
    snprintf(a->agent, sizeof(a->agent), "%s", o->agent ? o->agent : "hvagent");
    snprintf(a->dir, sizeof(a->dir), "%s/instances", o->cfg->data_dir);
    hv_err rc = hv_mkdirs(a->dir, 0700);
    if (rc != HV_OK) {
        snprintf(err, errlen, "cannot create %s: %s", a->dir, hv_strerror(rc));
        hv_autoscale_destroy(a);
        return rc;
    }
    if ((rc = make_policy(a, err, errlen)) != HV_OK) {
        hv_autoscale_destroy(a);
        return rc;
    }
    /* Every command is bounded by the launch timeout, as documented (the config caps it at a day,
     * which fits in 32 bits of ms). */
    const hv_head_config_t *c = o->cfg;
    uint64_t bound = (uint64_t)c->autoscaler.launch_timeout_s * 1000u;
    hv_provider_cfg_t pc = {
        .agent = a->agent,
        .work_dir = a->dir,
        .stop_grace_ms = c->kill_grace_ms + 5000u,
        .tick_ms = 100,
        .sim = {.types = a->ss_types,
                .ntypes = c->autoscaler.ntypes,
                .seed = c->autoscaler.spot_sim.seed,
                .boot_min_ms = c->autoscaler.spot_sim.boot_min_ms,
                .boot_max_ms = c->autoscaler.spot_sim.boot_max_ms,
                .interval_s = c->autoscaler.spot_sim.preempt_every_s,
                .notice_s = c->autoscaler.spot_sim.notice_s,
                .no_notice_fraction = c->autoscaler.spot_sim.no_notice_fraction},
        .sim_trace = c->autoscaler.spot_sim.trace,
        .launch = c->autoscaler.command_launch,
        .terminate = c->autoscaler.command_terminate,
        .list = c->autoscaler.command_list,
        .timeout_ms = bound > UINT32_MAX ? UINT32_MAX : (uint32_t)bound};
    rc = hv_provider_create(loop, pn, &pc, on_provider_event, a, &a->prov, err, errlen);
    if (rc != HV_OK) {
        if (err[0] == '\0') {
            snprintf(err, errlen, "cannot start the %s provider: %s", pn, hv_strerror(rc));
        }
        hv_autoscale_destroy(a);
        return rc;
    }
    hv_driver_set_room(a->d, room, a);
    *out = a;
    return HV_OK;
}

static hv_as_inst_state state_of(const char *w) {
    if (strcmp(w, "running") == 0) {
        return HV_AS_RUNNING;
    }
    if (strcmp(w, "draining") == 0) {
        return HV_AS_DRAINING;
    }
    if (strcmp(w, "terminating") == 0) {
        return HV_AS_TERMINATING;
    }
    return HV_AS_LAUNCHING;
}

hv_err hv_autoscale_load(hv_autoscale_t *a) {
    if (a == NULL) {
        return HV_OK;
    }
    hv_instance_row_t *rows = NULL;
    size_t n = 0;
    hv_err rc = hv_store_instance_list(a->store, 0, &rows, &n);
    if (rc != HV_OK) {
        HV_LOG(HV_LOG_ERROR, "autoscale", "HV-AS-LOAD", "instances not loaded: %s",
               hv_store_last_error(a->store));
        return rc;
    }
    uint64_t now = hv_now_ms(), wall = hv_wall_ms();
    size_t adopted = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t id = strtoull(rows[i].id, NULL, 10);
        if (id >= a->next_id) {
            a->next_id = id + 1;
        }
        if (rows[i].ended_ms != 0 || strcmp(rows[i].provider, a->provider_name) != 0) {
            const hv_dnode_t *nd = hv_driver_node_by_name(a->d, rows[i].node_name);
            if (rows[i].ended_ms != 0 && nd != NULL) {
                hv_driver_node_retire(a->d, nd->id);
            }
            continue;
        }
        as_inst_t *in = hv_calloc(1, sizeof(*in));
        if (in == NULL) {
            rc = HV_ENOMEM;
            break;
        }
        in->id = id;
        in->type = a->pc.ntypes;
        for (size_t t = 0; t < a->pc.ntypes; t++) {
            if (strcmp(a->pc.types[t].name, rows[i].type) == 0) {
                in->type = t;
            }
        }
        in->state = state_of(rows[i].state);
        snprintf(in->name, sizeof(in->name), "%s", rows[i].node_name);
        snprintf(in->handle, sizeof(in->handle), "%s", rows[i].handle);
        snprintf(in->reason, sizeof(in->reason), "%s", rows[i].reason);
        in->created_wall = rows[i].created_ms;
        in->joined_wall = rows[i].joined_ms;
        uint64_t age = wall > rows[i].created_ms ? wall - rows[i].created_ms : 0;
        in->launched_mono = now > age ? now - age : 0;
        in->next = a->insts;
        a->insts = in;
        const hv_head_node_type_t *t =
            in->type < a->pc.ntypes ? &a->cfg->autoscaler.types[in->type] : NULL;
        char tok[AS_PATH + 32];
        token_path(a, in->id, tok, sizeof(tok));
        hv_prov_launch_t l = {.instance = in->id,
                              .name = in->name,
                              .type = in->type,
                              .type_name = rows[i].type,
                              .slots = t ? t->slots : 1,
                              .gpus = t ? t->gpus : 0,
                              .preemptible = t ? t->preemptible : 0,
                              .head = a->head_addr,
                              .token_file = tok};
        hv_err arc = hv_provider_adopt(a->prov, &l, in->handle[0] ? in->handle : NULL);
        if (arc != HV_OK) {
            ended(a, in, "lost while the head was down", 0);
            continue;
        }
        adopted++;
        if (in->type == a->pc.ntypes) {
            HV_LOG(HV_LOG_WARN, "autoscale", "HV-AS-TYPE",
                   "instance %" PRIu64 " is of type '%s', which the config no longer has: it is "
                   "watched but never given back automatically",
                   in->id, rows[i].type);
        }
        if (in->state == HV_AS_TERMINATING &&
            hv_provider_terminate(a->prov, in->id) == HV_ENOTFOUND) {
            ended(a, in, in->reason, 0);
        }
    }
    hv_store_instance_free_list(rows, n);
    HV_LOG(HV_LOG_NOTICE, "autoscale", "HV-AS-LOAD",
           "autoscaler (%s): %zu instances adopted, next id %" PRIu64, a->provider_name, adopted,
           a->next_id);
    return rc;
}

static void stop_wait_cb(uv_timer_t *t) { (void)t; }

void hv_autoscale_stop(hv_autoscale_t *a) {
    if (a == NULL) {
        return;
    }
    size_t live = 0;
    char ids[256] = "";
    for (as_inst_t *in = a->insts; in != NULL; in = in->next) {
        if (!in->ended) {
            size_t used = strlen(ids);
            if (used + 24 < sizeof(ids)) {
                snprintf(ids + used, sizeof(ids) - used, "%s%s", live > 0 ? ", " : "", in->name);
            }
            live++;
        }
    }
    if (live == 0) {
        return;
    }
    /* Machines the user pays for (command) stay for the next start to adopt, and it says so;
     * agents on this machine (local, spot-sim) go with the head that started them, so a clean
     * stop leaves the machine as it was. */
    if (strcmp(a->provider_name, "command") == 0) {
        HV_LOG(HV_LOG_NOTICE, "autoscale", "HV-AS-LEAVE",
               "autoscaler (command): leaving %zu instance(s) running (%s): the next hvhead "
               "start on this data directory adopts them; terminate them with your provider "
               "if no head will",
               live, ids);
        return;
    }
    HV_LOG(HV_LOG_NOTICE, "autoscale", "HV-AS-STOP",
           "autoscaler (%s): the head stops: giving back its %zu instance(s) (%s)",
           a->provider_name, live, ids);
    hv_as_action_t x = {.kind = HV_AS_TERMINATE};
    snprintf(x.reason, sizeof(x.reason), "the head stopped");
    for (as_inst_t *in = a->insts; in != NULL; in = in->next) {
        if (!in->ended) {
            x.instance = in->id;
            do_terminate(a, &x);
        }
    }
    /* The provider reports each one gone (its agent exited, or was killed after the grace
     * period): run the loop until then, bounded. */
    uv_timer_t wake;
    uv_timer_init(a->loop, &wake);
    uv_timer_start(&wake, stop_wait_cb, 100, 100);
    uint64_t deadline = hv_now_ms() + a->cfg->kill_grace_ms + 5000u + 3000u;
    for (;;) {
        live = 0;
        for (as_inst_t *in = a->insts; in != NULL; in = in->next) {
            live += !in->ended;
        }
        if (live == 0 || hv_now_ms() >= deadline) {
            break;
        }
        uv_run(a->loop, UV_RUN_ONCE);
    }
    uv_close((uv_handle_t *)&wake, NULL);
    uv_run(a->loop, UV_RUN_NOWAIT);
    if (live > 0) {
        HV_LOG(HV_LOG_WARN, "autoscale", "HV-AS-STOP-LEFT",
               "autoscaler (%s): %zu instance(s) did not end in time; the next start adopts them",
               a->provider_name, live);
    }
}

void hv_autoscale_destroy(hv_autoscale_t *a) {
    if (a == NULL) {
        return;
    }
    if (a->d != NULL) {
        hv_driver_set_room(a->d, NULL, NULL);
    }
    hv_provider_destroy(a->prov);
    while (a->insts != NULL) {
        as_inst_t *in = a->insts;
        a->insts = in->next;
        hv_free(in);
    }
    hv_free(a->types);
    hv_free(a->ts);
    hv_free(a->ss_types);
    hv_free(a);
}
