/* metrics: see metrics.h. */
#include "metrics.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "conngate.h"
#include "cost.h"
#include "log.h"
#include "mem.h"
#include "rpc.h"
#include "util.h"

#define METRICS_MAX_METHODS 96 /* distinct gRPC methods counted (hv serves ~40) */
#define METRICS_CODES 17       /* gRPC status codes 0..16 */
#define METRICS_CTYPE "text/plain; version=0.0.4; charset=utf-8"
#define METRICS_MAX_DRAINING 256 /* drains timed at once (more are counted, not timed) */

/* Upper bounds (seconds) of the reset-duration buckets: a round closes in well under a second
 * when every member is alive, and waits up to the rendezvous timeout (60 s) for stragglers. */
static const double reset_bounds[] = {0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600};
#define METRICS_NBOUNDS (sizeof(reset_bounds) / sizeof(reset_bounds[0]))

typedef struct metrics_hist_s {
    uint64_t bucket[METRICS_NBOUNDS]; /* observations <= bound (not cumulative here) */
    uint64_t count;
    double sum; /* seconds */
} metrics_hist_t;

/* Upper bounds (seconds) of the drain-duration buckets: a preemption notice gives ~30 s to 2 min,
 * an operator's drain may wait for long jobs. */
static const double drain_bounds[] = {1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 14400};
#define METRICS_NDRAIN (sizeof(drain_bounds) / sizeof(drain_bounds[0]))

typedef struct metrics_dhist_s {
    uint64_t bucket[METRICS_NDRAIN];
    uint64_t count;
    double sum;
} metrics_dhist_t;

/* Upper bounds (seconds) of the queue-wait buckets: from a job's submission to its admission
 * (at once on a free cluster, minutes behind others). */
static const double qwait_bounds[] = {0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600};
#define METRICS_NQWAIT (sizeof(qwait_bounds) / sizeof(qwait_bounds[0]))
#define METRICS_MAX_NS 32 /* namespaces with a queue-wait histogram (more count in the last) */

typedef struct metrics_qhist_s {
    char ns[64]; /* the namespace's name */
    uint64_t bucket[METRICS_NQWAIT];
    uint64_t count;
    double sum;
} metrics_qhist_t;

typedef struct metrics_rpc_s {
    const char *path; /* the method's static path (borrowed from the rpc server's table) */
    uint64_t n[METRICS_CODES];
} metrics_rpc_t;

struct hv_metrics_s {
    const hv_head_config_t *cfg;   /* borrowed */
    hv_driver_t *d;                /* borrowed */
    const hv_actors_t *actors;     /* borrowed; the head's actors (may be NULL) */
    const hv_http_server_t *http;  /* the listener, or NULL (borrowed) */
    const uint64_t *login_refused; /* the status page's refused logins, or NULL (borrowed) */
    uint64_t start_wall_ms;
    /* counters */
    uint64_t resets[HV_RESET__COUNT];
    uint64_t samples_redone;
    uint64_t drains, notices, launch_failures;
    metrics_hist_t reset_round; /* a reset's round, from opened to closed */
    metrics_dhist_t drain_time; /* a node's drain, from its start to its end (gone, undrained) */
    struct {
        uint64_t node_id, since_ms; /* monotonic */
    } draining[METRICS_MAX_DRAINING];
    size_t ndraining;
    metrics_rpc_t rpc[METRICS_MAX_METHODS];
    size_t nrpc;
    uint64_t rpc_unknown[METRICS_CODES];   /* paths not served (and over METRICS_MAX_METHODS) */
    uint64_t resizes[HV_RESIZE__COUNT];    /* the fleet's decisions acted on, by cause */
    metrics_qhist_t qwait[METRICS_MAX_NS]; /* submission to admission, by namespace */
    size_t nqwait;
};

/* ---- pure helpers --------------------------------------------------------------------------- */

hv_reset_reason_t hv_metrics_reset_reason(hv_ev_reason_t code, int rollback) {
    switch (hv_ev_reset_class(code, rollback)) {
    case HV_EV_FAILURE:
        return HV_RESET_FAILURE;
    case HV_EV_DRAIN:
        return HV_RESET_DRAIN;
    case HV_EV_GROW:
        return HV_RESET_GROW;
    case HV_EV_SHRINK:
        return HV_RESET_SHRINK;
    default:
        return HV_RESET_OTHER;
    }
}

const char *hv_metrics_reset_reason_name(hv_reset_reason_t r) {
    static const char *const names[HV_RESET__COUNT] = {"failure", "drain", "grow", "shrink",
                                                       "other"};
    return (unsigned)r < HV_RESET__COUNT ? names[r] : "other";
}

hv_resize_cause_t hv_metrics_resize_cause(const char *kind, const char *reason) {
    static const struct {
        const char *word;
        hv_resize_cause_t c;
    } w[] = {{"shrunk_admit", HV_RESIZE_ADMIT},
             {"shrunk_priority", HV_RESIZE_PRIORITY},
             {"shrunk_reclaim", HV_RESIZE_RECLAIM},
             {"shrunk_share", HV_RESIZE_SHARE},
             {"preempted", HV_RESIZE_PREEMPT}};
    if (kind == NULL) {
        return HV_RESIZE_OTHER;
    }
    if (strcmp(kind, "fleet.admit") == 0) {
        return HV_RESIZE_START;
    }
    if (strcmp(kind, "fleet.grow") == 0) {
        return HV_RESIZE_GROW;
    }
    for (size_t i = 0; reason != NULL && i < sizeof(w) / sizeof(w[0]); i++) {
        if (strcmp(reason, w[i].word) == 0) {
            return w[i].c;
        }
    }
    return HV_RESIZE_OTHER;
}

const char *hv_metrics_resize_cause_name(hv_resize_cause_t c) {
    static const char *const names[HV_RESIZE__COUNT] = {"start",   "grow",  "admit",   "priority",
                                                        "reclaim", "share", "preempt", "other"};
    return (unsigned)c < HV_RESIZE__COUNT ? names[c] : "other";
}

void hv_metrics_escape_label(const char *in, char *out, size_t len) {
    size_t n = 0;
    if (len == 0) {
        return;
    }
    for (; in != NULL && *in != '\0'; in++) {
        const char *rep = *in == '\\' ? "\\\\" : *in == '"' ? "\\\"" : *in == '\n' ? "\\n" : NULL;
        size_t rl = rep != NULL ? 2 : 1;
        if (n + rl + 1 > len) {
            break;
        }
        if (rep != NULL) {
            memcpy(out + n, rep, 2);
        } else {
            out[n] = *in;
        }
        n += rl;
    }
    out[n] = '\0';
}

/* ---- counting ------------------------------------------------------------------------------- */

static void hist_observe(metrics_hist_t *h, double v) {
    for (size_t i = 0; i < METRICS_NBOUNDS; i++) {
        if (v <= reset_bounds[i]) {
            h->bucket[i]++;
            break;
        }
    }
    h->count++;
    h->sum += v;
}

/* A drain of node_id ended (the node is dead, took work again, or its agent came back new). */
static void drain_ended(hv_metrics_t *m, uint64_t node_id) {
    for (size_t i = 0; i < m->ndraining; i++) {
        if (m->draining[i].node_id == node_id) {
            uint64_t now = hv_now_ms();
            double v = (double)(now - m->draining[i].since_ms) / 1000.0;
            for (size_t b = 0; b < METRICS_NDRAIN; b++) {
                if (v <= drain_bounds[b]) {
                    m->drain_time.bucket[b]++;
                    break;
                }
            }
            m->drain_time.count++;
            m->drain_time.sum += v;
            m->draining[i] = m->draining[--m->ndraining];
            return;
        }
    }
}

/* The queue-wait histogram of namespace ns (the last one when there are too many). */
static metrics_qhist_t *qwait_of(hv_metrics_t *m, const char *ns) {
    for (size_t i = 0; i < m->nqwait; i++) {
        if (strcmp(m->qwait[i].ns, ns) == 0) {
            return &m->qwait[i];
        }
    }
    if (m->nqwait == METRICS_MAX_NS) {
        return &m->qwait[METRICS_MAX_NS - 1];
    }
    metrics_qhist_t *h = &m->qwait[m->nqwait++];
    snprintf(h->ns, sizeof(h->ns), "%s", ns);
    return h;
}

/* A fleet decision the driver acted on: counted by cause; an admission (from 0 workers) is the
 * end of the job's wait, observed from its submission. */
static void on_fleet_event(hv_metrics_t *m, uint64_t job_id, const char *kind, const char *data) {
    char reason[32] = "";
    uint64_t from = 0;
    hv_ev_json_str(data, "reason", reason, sizeof(reason));
    m->resizes[hv_metrics_resize_cause(kind, reason)]++;
    if (strcmp(kind, "fleet.admit") != 0 || (hv_ev_json_u64(data, "from", &from) && from != 0)) {
        return;
    }
    const hv_djob_t *j = hv_driver_job(m->d, job_id);
    uint64_t now = hv_wall_ms();
    if (j == NULL || j->submitted_ms == 0 || j->submitted_ms > now) {
        return;
    }
    metrics_qhist_t *h = qwait_of(m, hv_view_job_ns(m->d, j));
    double v = (double)(now - j->submitted_ms) / 1000.0;
    for (size_t b = 0; b < METRICS_NQWAIT; b++) {
        if (v <= qwait_bounds[b]) {
            h->bucket[b]++;
            break;
        }
    }
    h->count++;
    h->sum += v;
}

void hv_metrics_on_event(void *ud, uint64_t job_id, uint64_t node_id, const char *kind,
                         const hv_ev_fields_t *f, const char *data) {
    hv_metrics_t *m = ud;
    static const hv_ev_fields_t none = {0};
    if (f == NULL) {
        f = &none;
    }
    if (strcmp(kind, "round.open") == 0) {
        /* The first round of a job is its start; every later one is a reset (jobm.h). */
        if (f->generation > 1) {
            m->resets[hv_metrics_reset_reason(f->reason, f->rollback)]++;
        }
    } else if (strcmp(kind, "round.close") == 0) {
        uint64_t redone = 0;
        if (f->generation > 1) {
            hist_observe(&m->reset_round, (double)f->duration_ms / 1000.0);
        }
        if (hv_ev_json_u64(data, "redone_samples", &redone)) {
            m->samples_redone += redone;
        }
    } else if (strcmp(kind, "node.drain") == 0) {
        int from_agent = 0;
        m->drains++;
        if (hv_ev_json_bool(data, "from_agent", &from_agent) && from_agent) {
            m->notices++;
        }
        size_t i = 0;
        while (i < m->ndraining && m->draining[i].node_id != node_id) {
            i++;
        }
        if (i == m->ndraining && m->ndraining < METRICS_MAX_DRAINING) {
            m->draining[m->ndraining].node_id = node_id; /* a drain already timed keeps its start */
            m->draining[m->ndraining++].since_ms = hv_now_ms();
        }
    } else if (strcmp(kind, "node.dead") == 0 || strcmp(kind, "node.undrain") == 0 ||
               strcmp(kind, "node.join") == 0) {
        drain_ended(m, node_id);
    } else if (strcmp(kind, "autoscaler.launch_failed") == 0) {
        m->launch_failures++;
    } else if (strncmp(kind, "fleet.", 6) == 0) {
        on_fleet_event(m, job_id, kind, data);
    }
}

void hv_metrics_on_rpc(const char *path, int grpc_code, void *ud) {
    hv_metrics_t *m = ud;
    if (grpc_code < 0 || grpc_code >= METRICS_CODES) {
        grpc_code = 2; /* UNKNOWN */
    }
    if (path != NULL) {
        for (size_t i = 0; i < m->nrpc; i++) {
            if (m->rpc[i].path == path || strcmp(m->rpc[i].path, path) == 0) {
                m->rpc[i].n[grpc_code]++;
                return;
            }
        }
        if (m->nrpc < METRICS_MAX_METHODS) {
            m->rpc[m->nrpc].path = path;
            m->rpc[m->nrpc++].n[grpc_code]++;
            return;
        }
    }
    m->rpc_unknown[grpc_code]++;
}

/* Stored round.open events by (reason code, rollback): the resets among them (generation > 1)
 * by the reason they count under. */
static void seed_reset_cb(hv_ev_reason_t reason, int rollback, uint64_t n, void *ud) {
    hv_metrics_t *m = ud;
    m->resets[hv_metrics_reset_reason(reason, rollback)] += n;
}

/* Counters from the stored events, so that a restarted head goes on from them. A failing query
 * leaves that counter at zero (logged): the head still starts. */
static void metrics_seed(hv_metrics_t *m) {
    static const struct {
        const char *kind, *has;
    } q[] = {
        {"node.drain", ""},
        {"node.drain", "\"from_agent\":true"},
        {"autoscaler.launch_failed", ""},
    };
    uint64_t n[sizeof(q) / sizeof(q[0])] = {0};
    for (size_t i = 0; i < sizeof(q) / sizeof(q[0]); i++) {
        if (hv_view_event_count(m->d, 0, q[i].kind, q[i].has, &n[i]) != HV_OK) {
            HV_LOG(HV_LOG_WARN, "metrics", "HV-METRICS-SEED",
                   "cannot count the stored %s events: %s; that counter starts at 0", q[i].kind,
                   hv_view_error(m->d));
        }
    }
    m->drains = n[0];
    m->notices = n[1];
    m->launch_failures = n[2];
    if (hv_view_event_reasons(m->d, "round.open", 2, seed_reset_cb, m) != HV_OK) {
        HV_LOG(HV_LOG_WARN, "metrics", "HV-METRICS-SEED",
               "cannot count the stored round.open events: %s; resets start at 0",
               hv_view_error(m->d));
        memset(m->resets, 0, sizeof(m->resets));
    }
    if (hv_view_event_sum(m->d, 0, "round.close", "redone_samples", &m->samples_redone) != HV_OK) {
        m->samples_redone = 0;
    }
    /* The fleet's resizes by cause, from the stored fleet.* events. */
    static const char *const kinds[] = {"fleet.admit", "fleet.grow", "fleet.shrink"};
    static const char *const words[] = {"shrunk_admit", "shrunk_priority", "shrunk_reclaim",
                                        "shrunk_share", "preempted"};
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        uint64_t all = 0, named = 0;
        if (hv_view_event_count(m->d, 0, kinds[k], "", &all) != HV_OK) {
            continue;
        }
        if (k < 2) {
            m->resizes[hv_metrics_resize_cause(kinds[k], "")] += all;
            continue;
        }
        for (size_t w = 0; w < sizeof(words) / sizeof(words[0]); w++) {
            char has[64];
            uint64_t c = 0;
            snprintf(has, sizeof(has), "\"reason\":\"%s\"", words[w]);
            if (hv_view_event_count(m->d, 0, kinds[k], has, &c) == HV_OK) {
                m->resizes[hv_metrics_resize_cause(kinds[k], words[w])] += c;
                named += c;
            }
        }
        m->resizes[HV_RESIZE_OTHER] += all > named ? all - named : 0;
    }
}

hv_err hv_metrics_create(const hv_head_config_t *cfg, hv_driver_t *d, hv_metrics_t **out) {
    hv_metrics_t *m = hv_calloc(1, sizeof(*m));
    if (m == NULL) {
        return HV_ENOMEM;
    }
    m->cfg = cfg;
    m->d = d;
    m->start_wall_ms = hv_wall_ms();
    metrics_seed(m);
    *out = m;
    return HV_OK;
}

void hv_metrics_set_actors(hv_metrics_t *m, const hv_actors_t *actors) { m->actors = actors; }

void hv_metrics_set_listener(hv_metrics_t *m, const hv_http_server_t *http,
                             const uint64_t *login_refused) {
    m->http = http;
    m->login_refused = login_refused;
}

void hv_metrics_destroy(hv_metrics_t *m) {
    if (m == NULL) {
        return;
    }
    hv_free(m);
}

/* ---- the exposition ------------------------------------------------------------------------- */

static void fam(hv_http_reply_t *o, const char *name, const char *type, const char *help) {
    hv_http_reply_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* The node type of a node: its autoscaler instance's, else "manual" (joined by hand). */
static const char *node_type(const hv_instance_row_t *rows, size_t n, const char *name) {
    const char *t = HV_COST_MANUAL;
    for (size_t i = 0; i < n; i++) {
        if (rows[i].node_name != NULL && rows[i].type != NULL &&
            strcmp(rows[i].node_name, name) == 0) {
            t = rows[i].type; /* ordered by creation: the newest wins */
        }
    }
    return t;
}

/* The types a family is zero-filled over: the autoscaler's, then "manual". */
static size_t type_names(const hv_head_config_t *c, const char **names, size_t cap) {
    size_t n = 0;
    if (c->autoscaler.provider != NULL && strcmp(c->autoscaler.provider, "none") != 0) {
        for (size_t i = 0; i < c->autoscaler.ntypes && n + 1 < cap; i++) {
            names[n++] = c->autoscaler.types[i].name;
        }
    }
    names[n++] = HV_COST_MANUAL;
    return n;
}

static size_t type_index(const char **names, size_t n, const char *t) {
    for (size_t i = 0; i < n; i++) {
        if (strcmp(names[i], t) == 0) {
            return i;
        }
    }
    return n;
}

#define METRICS_MAX_TYPES (HV_COST_MAX_TYPES + 2)

static void render_nodes(hv_metrics_t *m, const hv_instance_row_t *irows, size_t ni,
                         hv_http_reply_t *o) {
    const char *types[METRICS_MAX_TYPES];
    size_t nt = type_names(m->cfg, types, METRICS_MAX_TYPES - 1);
    uint64_t count[METRICS_MAX_TYPES][HV_NODE__COUNT];
    uint64_t used[METRICS_MAX_TYPES], freeslots[METRICS_MAX_TYPES];
    memset(count, 0, sizeof(count));
    memset(used, 0, sizeof(used));
    memset(freeslots, 0, sizeof(freeslots));
    for (const hv_dnode_t *n = hv_driver_nodes(m->d); n != NULL; n = n->next) {
        if (hv_driver_node_hidden(n)) {
            continue;
        }
        size_t t = type_index(types, nt, node_type(irows, ni, n->name));
        if (t == nt) {
            if (nt + 1 >= METRICS_MAX_TYPES) {
                continue;
            }
            types[nt++] = node_type(irows, ni, n->name); /* a type no longer configured */
        }
        count[t][n->state < HV_NODE__COUNT ? n->state : HV_NODE_DEAD]++;
        if (n->state != HV_NODE_DEAD) {
            used[t] += n->acct.slots_used;
        }
        if (hv_node_takes_work(n->state, n->has_session) && n->acct.slots > n->acct.slots_used) {
            freeslots[t] += n->acct.slots - n->acct.slots_used;
        }
    }
    fam(o, "hv_nodes", "gauge", "Nodes the head knows, by state and node type.");
    for (size_t t = 0; t < nt; t++) {
        for (int s = 0; s < HV_NODE__COUNT; s++) {
            hv_http_reply_printf(o, "hv_nodes{state=\"%s\",type=\"%s\"} %" PRIu64 "\n",
                                 hv_node_state_name((hv_node_state_t)s), types[t], count[t][s]);
        }
    }
    fam(o, "hv_slots", "gauge",
        "Worker slots: used by live workers, and free on nodes that take work, by node type.");
    for (size_t t = 0; t < nt; t++) {
        hv_http_reply_printf(o, "hv_slots{state=\"used\",type=\"%s\"} %" PRIu64 "\n", types[t],
                             used[t]);
        hv_http_reply_printf(o, "hv_slots{state=\"free\",type=\"%s\"} %" PRIu64 "\n", types[t],
                             freeslots[t]);
    }
}

static void job_state_cb(const char *state, uint64_t n, void *ud) {
    uint64_t *counts = ud;
    hv_job_state_t s;
    if (hv_job_state_parse(state, &s) == HV_OK) {
        counts[s] += n;
    }
}

static void render_actors(hv_metrics_t *m, hv_http_reply_t *o) {
    if (m->actors == NULL) {
        return;
    }
    uint64_t counts[HV_AM__STATE_COUNT] = {0};
    for (const hv_dactor_t *x = hv_actors_all(m->actors); x != NULL; x = x->next) {
        counts[x->am.state]++;
    }
    fam(o, "hv_actors", "gauge", "Actors the head knows, by state (docs/actors.md).");
    for (int s = 0; s < HV_AM__STATE_COUNT; s++) {
        hv_http_reply_printf(o, "hv_actors{state=\"%s\"} %" PRIu64 "\n",
                             hv_am_state_name((hv_am_state_t)s), counts[s]);
    }
}

/* An actor's figures stay exported while it is not dead, and for this long after it died (a few
 * scrapes see the final values), as an ended job's. */
#define METRICS_ACTOR_KEEP_MS (10u * 60u * 1000u)

static int actor_exported(const hv_dactor_t *x, uint64_t now_wall_ms) {
    return x->fig_ms != 0 && (x->am.state != HV_AM_DEAD || x->ended_ms == 0 ||
                              x->ended_ms + METRICS_ACTOR_KEEP_MS > now_wall_ms);
}

/* One counter family of two series per exported actor: label=v0 and label=v1, the callfig
 * fields at offsets f0 and f1. */
static void actor_pair(hv_metrics_t *m, uint64_t now_wall_ms, hv_http_reply_t *o, const char *name,
                       const char *help, const char *label, const char *v0, const char *v1,
                       size_t f0, size_t f1) {
    fam(o, name, "counter", help);
    for (const hv_dactor_t *x = hv_actors_all(m->actors); x != NULL; x = x->next) {
        if (!actor_exported(x, now_wall_ms)) {
            continue;
        }
        hv_callfig_t f;
        hv_actorfig_total(&x->fig, &f);
        for (int r = 0; r < 2; r++) {
            uint64_t v;
            memcpy(&v, (const char *)&f + (r == 0 ? f0 : f1), sizeof(v));
            hv_http_reply_printf(o,
                                 "%s{namespace=\"%s\",name=\"%s\",actor_id=\"%" PRIu64
                                 "\",%s=\"%s\"} %" PRIu64 "\n",
                                 name, x->ns, x->name, x->am.id, label, r == 0 ? v0 : v1, v);
        }
    }
}

/* The actors' call figures (summed over each actor's processes, from their agents' reports):
 * calls by result, bytes, and the service time as a histogram in callfig's buckets. Labelled
 * by namespace, name ("" unnamed) and actor_id: a name is unique only among live actors. */
static void render_actor_figs(hv_metrics_t *m, uint64_t now_wall_ms, hv_http_reply_t *o) {
    if (m->actors == NULL) {
        return;
    }
    actor_pair(m, now_wall_ms, o, "hv_actor_calls_total",
               "Calls an actor served, by result (ok; error: its method returned an error), summed "
               "over its processes.",
               "result", "ok", "error", offsetof(hv_callfig_t, ok), offsetof(hv_callfig_t, error));
    actor_pair(
        m, now_wall_ms, o, "hv_actor_call_bytes_total",
        "Bytes of an actor's calls: in, their arguments; out, the results of those answered OK.",
        "direction", "in", "out", offsetof(hv_callfig_t, bytes_in),
        offsetof(hv_callfig_t, bytes_out));
    fam(o, "hv_actor_call_duration_seconds", "histogram",
        "Service time of an actor's calls: from the start of a call's dispatch in the actor to "
        "its reply queued (the network and the caller's side are not in it).");
    for (const hv_dactor_t *x = hv_actors_all(m->actors); x != NULL; x = x->next) {
        if (!actor_exported(x, now_wall_ms)) {
            continue;
        }
        hv_callfig_t f;
        hv_actorfig_total(&x->fig, &f);
        char labels[200];
        snprintf(labels, sizeof(labels),
                 "namespace=\"%.63s\",name=\"%.63s\",actor_id=\"%" PRIu64 "\"", x->ns, x->name,
                 x->am.id);
        uint64_t cum = 0;
        for (size_t i = 0; i + 1 < HV_CALLFIG_BUCKETS; i++) {
            cum += f.buckets[i];
            hv_http_reply_printf(
                o, "hv_actor_call_duration_seconds_bucket{%s,le=\"%g\"} %" PRIu64 "\n", labels,
                (double)hv_callfig_bound_ns(i) / 1e9, cum);
        }
        hv_http_reply_printf(o,
                             "hv_actor_call_duration_seconds_bucket{%s,le=\"+Inf\"} %" PRIu64
                             "\nhv_actor_call_duration_seconds_sum{%s} %" PRIu64 ".%09" PRIu64
                             "\nhv_actor_call_duration_seconds_count{%s} %" PRIu64 "\n",
                             labels, hv_callfig_calls(&f), labels, f.service_ns / 1000000000u,
                             f.service_ns % 1000000000u, labels, hv_callfig_calls(&f));
    }
}

static void render_jobs(hv_metrics_t *m, hv_http_reply_t *o) {
    uint64_t counts[HV_JOB__COUNT] = {0};
    if (hv_view_job_states(m->d, job_state_cb, counts) == HV_OK) {
        fam(o, "hv_jobs", "gauge", "Jobs in the state database, by state.");
        for (int s = 0; s < HV_JOB__COUNT; s++) {
            hv_http_reply_printf(o, "hv_jobs{state=\"%s\"} %" PRIu64 "\n",
                                 hv_job_state_name((hv_job_state_t)s), counts[s]);
        }
    }
    size_t njobs = 0;
    for (const hv_djob_t *j = hv_driver_jobs(m->d); j != NULL; j = j->next) {
        njobs++;
    }
    hv_driver_demand_t *dem = hv_calloc(njobs ? njobs : 1, sizeof(*dem));
    uint64_t pending = 0, grow = 0;
    if (dem != NULL) {
        size_t nd = hv_driver_demand(m->d, dem, njobs);
        for (size_t i = 0; i < nd; i++) {
            *(dem[i].pending ? &pending : &grow) += dem[i].workers;
        }
        hv_free(dem);
        fam(o, "hv_demand_workers", "gauge",
            "Workers active jobs want that the free slots cannot give now: pending jobs waiting "
            "to start, and elastic jobs that could grow.");
        hv_http_reply_printf(o, "hv_demand_workers{kind=\"pending\"} %" PRIu64 "\n", pending);
        hv_http_reply_printf(o, "hv_demand_workers{kind=\"grow\"} %" PRIu64 "\n", grow);
    }
    /* One series per active elastic job: jobs are few and end, workers and ranks are not
     * labels. The label is job_id: Prometheus itself sets "job" (the scrape job's name). */
    static const struct {
        const char *name, *help;
    } ej[] = {
        {"hv_elastic_job_world_size", "Workers in the newest closed round of an elastic job."},
        {"hv_elastic_job_generation", "Newest round (generation) of an elastic job."},
        {"hv_elastic_job_target_size", "The size an elastic job aims for now."},
    };
    for (size_t k = 0; k < sizeof(ej) / sizeof(ej[0]); k++) {
        fam(o, ej[k].name, "gauge", ej[k].help);
        for (const hv_djob_t *j = hv_driver_jobs(m->d); j != NULL; j = j->next) {
            if (!j->jm.p.elastic || hv_job_state_terminal(j->jm.state)) {
                continue;
            }
            uint64_t v = k == 0 ? j->jm.size : k == 1 ? j->jm.generation : hv_jm_target(&j->jm.p);
            hv_http_reply_printf(o, "%s{job_id=\"%" PRIu64 "\"} %" PRIu64 "\n", ej[k].name,
                                 j->jm.id, v);
        }
    }
}

static void render_events(hv_metrics_t *m, hv_http_reply_t *o) {
    uint64_t head_bytes, peer_bytes;
    hv_driver_copy_bytes(m->d, &head_bytes, &peer_bytes);
    fam(o, "hv_state_copy_bytes_total", "counter",
        "Bytes of the jobs' state copies since the head started, by where they are kept: at the "
        "head (they crossed its network and disk) or by a peer agent (only the index did).");
    hv_http_reply_printf(o, "hv_state_copy_bytes_total{kept_by=\"head\"} %" PRIu64 "\n",
                         head_bytes);
    hv_http_reply_printf(o, "hv_state_copy_bytes_total{kept_by=\"peer\"} %" PRIu64 "\n",
                         peer_bytes);
    fam(o, "hv_resets_total", "counter",
        "Resets of elastic jobs (rounds after a job's first), by reason.");
    for (int r = 0; r < HV_RESET__COUNT; r++) {
        hv_http_reply_printf(o, "hv_resets_total{reason=\"%s\"} %" PRIu64 "\n",
                             hv_metrics_reset_reason_name((hv_reset_reason_t)r), m->resets[r]);
    }
    fam(o, "hv_reset_duration_seconds", "histogram",
        "Duration of a reset by phase; phase round: from the round opening to its close.");
    uint64_t cum = 0;
    for (size_t i = 0; i < METRICS_NBOUNDS; i++) {
        cum += m->reset_round.bucket[i];
        hv_http_reply_printf(
            o, "hv_reset_duration_seconds_bucket{phase=\"round\",le=\"%g\"} %" PRIu64 "\n",
            reset_bounds[i], cum);
    }
    hv_http_reply_printf(o,
                         "hv_reset_duration_seconds_bucket{phase=\"round\",le=\"+Inf\"} %" PRIu64
                         "\nhv_reset_duration_seconds_sum{phase=\"round\"} %.3f\n"
                         "hv_reset_duration_seconds_count{phase=\"round\"} %" PRIu64 "\n",
                         m->reset_round.count, m->reset_round.sum, m->reset_round.count);
    fam(o, "hv_samples_redone_total", "counter",
        "Samples elastic jobs processed again after rolling back to their last commit.");
    hv_http_reply_printf(o, "hv_samples_redone_total %" PRIu64 "\n", m->samples_redone);
    fam(o, "hv_node_drains_total", "counter",
        "Nodes that began to drain (hvctl drain, the autoscaler, or the node's own notice).");
    hv_http_reply_printf(o, "hv_node_drains_total %" PRIu64 "\n", m->drains);
    fam(o, "hv_node_drain_duration_seconds", "histogram",
        "How long nodes this head saw begin to drain stayed draining: until the head declared "
        "them dead (their lease included), they took work again, or their agent rejoined.");
    cum = 0;
    for (size_t i = 0; i < METRICS_NDRAIN; i++) {
        cum += m->drain_time.bucket[i];
        hv_http_reply_printf(o, "hv_node_drain_duration_seconds_bucket{le=\"%g\"} %" PRIu64 "\n",
                             drain_bounds[i], cum);
    }
    hv_http_reply_printf(o,
                         "hv_node_drain_duration_seconds_bucket{le=\"+Inf\"} %" PRIu64
                         "\nhv_node_drain_duration_seconds_sum %.3f\n"
                         "hv_node_drain_duration_seconds_count %" PRIu64 "\n",
                         m->drain_time.count, m->drain_time.sum, m->drain_time.count);
    fam(o, "hv_preemption_notices_total", "counter",
        "Drain notices sent by the nodes' own agents (a preemption notice, or the agent "
        "stopping).");
    hv_http_reply_printf(o, "hv_preemption_notices_total %" PRIu64 "\n", m->notices);
    fam(o, "hv_autoscaler_launch_failures_total", "counter",
        "Autoscaler launches that failed (at once, later, or by never joining).");
    hv_http_reply_printf(o, "hv_autoscaler_launch_failures_total %" PRIu64 "\n",
                         m->launch_failures);
}

/* The fleet: its resizes by cause, the queue wait by namespace, and each namespace's share as
 * the fleet policy's newest decision left it. */
static void render_fleet(hv_metrics_t *m, hv_http_reply_t *o) {
    fam(o, "hv_fleet_resizes_total", "counter",
        "Fleet decisions the head acted on, by cause: start (a job admitted), grow (onto free "
        "capacity), admit/priority/reclaim/share (a job shrunk for another), preempt, other.");
    for (int c = 0; c < HV_RESIZE__COUNT; c++) {
        hv_http_reply_printf(o, "hv_fleet_resizes_total{cause=\"%s\"} %" PRIu64 "\n",
                             hv_metrics_resize_cause_name((hv_resize_cause_t)c), m->resizes[c]);
    }
    fam(o, "hv_queue_wait_seconds", "histogram",
        "Time from a job's submission to its admission by the fleet policy, by namespace.");
    if (m->nqwait == 0) {
        (void)qwait_of(m, hv_view_fleet_ns_name(m->d, 0)); /* an empty one: the series exist */
    }
    for (size_t i = 0; i < m->nqwait; i++) {
        const metrics_qhist_t *h = &m->qwait[i];
        char ns[160];
        hv_metrics_escape_label(h->ns, ns, sizeof(ns));
        uint64_t cum = 0;
        for (size_t b = 0; b < METRICS_NQWAIT; b++) {
            cum += h->bucket[b];
            hv_http_reply_printf(
                o, "hv_queue_wait_seconds_bucket{namespace=\"%s\",le=\"%g\"} %" PRIu64 "\n", ns,
                qwait_bounds[b], cum);
        }
        hv_http_reply_printf(o,
                             "hv_queue_wait_seconds_bucket{namespace=\"%s\",le=\"+Inf\"} %" PRIu64
                             "\nhv_queue_wait_seconds_sum{namespace=\"%s\"} %.3f\n"
                             "hv_queue_wait_seconds_count{namespace=\"%s\"} %" PRIu64 "\n",
                             ns, h->count, ns, h->sum, ns, h->count);
    }
    hv_fl_share_t sh[METRICS_MAX_NS];
    size_t n = hv_view_fleet_shares(m->d, sh, METRICS_MAX_NS);
    fam(o, "hv_namespace_share", "gauge",
        "Each namespace's dominant share of the cluster divided by its weight (0..1), as the "
        "fleet policy's newest decision leaves it.");
    for (size_t i = 0; i < n; i++) {
        char ns[160];
        hv_metrics_escape_label(hv_view_fleet_ns_name(m->d, i), ns, sizeof(ns));
        hv_http_reply_printf(o, "hv_namespace_share{namespace=\"%s\"} %.3f\n", ns,
                             (double)sh[i].share_pm / 1000.0);
    }
    fam(o, "hv_namespace_slots", "gauge",
        "Slots each namespace's jobs and actors are given (state used), and of those, beyond its "
        "quota (state borrowed), by the fleet policy's newest decision.");
    for (size_t i = 0; i < n; i++) {
        char ns[160];
        hv_metrics_escape_label(hv_view_fleet_ns_name(m->d, i), ns, sizeof(ns));
        hv_http_reply_printf(o,
                             "hv_namespace_slots{namespace=\"%s\",state=\"used\"} %" PRIu64 "\n"
                             "hv_namespace_slots{namespace=\"%s\",state=\"borrowed\"} %" PRIu64
                             "\n",
                             ns, sh[i].used.r[HV_FL_SLOTS], ns, sh[i].borrowed.r[HV_FL_SLOTS]);
    }
    fam(o, "hv_namespace_waiting_jobs", "gauge",
        "Jobs of each namespace the fleet policy's newest decision leaves waiting.");
    for (size_t i = 0; i < n; i++) {
        char ns[160];
        hv_metrics_escape_label(hv_view_fleet_ns_name(m->d, i), ns, sizeof(ns));
        hv_http_reply_printf(o, "hv_namespace_waiting_jobs{namespace=\"%s\"} %u\n", ns,
                             (unsigned)sh[i].waiting);
    }
}

static void render_instances(hv_metrics_t *m, const hv_instance_row_t *irows, size_t ni,
                             uint64_t now, hv_http_reply_t *o) {
    static const char *const states[] = {"launching", "running", "draining", "terminating"};
    const char *types[METRICS_MAX_TYPES];
    size_t nt = type_names(m->cfg, types, METRICS_MAX_TYPES);
    nt = nt > 0 ? nt - 1 : 0; /* instances are never "manual" */
    fam(o, "hv_autoscaler_instances", "gauge",
        "The autoscaler's instances that have not ended, by state and node type.");
    for (size_t t = 0; t < nt; t++) {
        for (size_t s = 0; s < sizeof(states) / sizeof(states[0]); s++) {
            uint64_t n = 0;
            for (size_t i = 0; i < ni; i++) {
                n += irows[i].ended_ms == 0 && irows[i].type != NULL && irows[i].state != NULL &&
                     strcmp(irows[i].type, types[t]) == 0 && strcmp(irows[i].state, states[s]) == 0;
            }
            hv_http_reply_printf(o,
                                 "hv_autoscaler_instances{state=\"%s\",type=\"%s\"} %" PRIu64 "\n",
                                 states[s], types[t], n);
        }
    }
    hv_cost_type_t ct[HV_COST_MAX_TYPES];
    size_t nct = 0;
    for (size_t t = 0; t < m->cfg->autoscaler.ntypes && t < HV_COST_MAX_TYPES; t++) {
        const hv_head_node_type_t *ht = &m->cfg->autoscaler.types[t];
        ct[nct++] =
            (hv_cost_type_t){ht->name, ht->slots, ht->price_per_hour, ht->ondemand_price_per_hour};
    }
    hv_cost_instance_t *ci = hv_calloc(ni ? ni : 1, sizeof(*ci));
    if (ci == NULL) {
        return;
    }
    for (size_t i = 0; i < ni; i++) {
        ci[i] = (hv_cost_instance_t){irows[i].type, irows[i].node_name, irows[i].created_ms,
                                     irows[i].ended_ms, irows[i].preempted};
    }
    hv_cost_report_t r;
    hv_cost_cluster(ct, nct, ci, ni, now, &r);
    hv_free(ci);
    fam(o, "hv_instance_seconds_total", "counter",
        "Seconds the autoscaler's instances ran (launch to end, or now), by node type.");
    for (size_t i = 0; i < r.n; i++) {
        hv_http_reply_printf(o, "hv_instance_seconds_total{type=\"%s\"} %.3f\n", r.lines[i].type,
                             r.lines[i].instance_s);
    }
    fam(o, "hv_cost_total", "counter",
        "What the autoscaler's instances cost at their type's price_per_hour (the config's "
        "currency), by node type.");
    for (size_t i = 0; i < r.n; i++) {
        hv_http_reply_printf(o, "hv_cost_total{type=\"%s\"} %.6f\n", r.lines[i].type,
                             r.lines[i].cost);
    }
    fam(o, "hv_preemptions_total", "counter", "The autoscaler's instances a preemption ended.");
    hv_http_reply_printf(o, "hv_preemptions_total %" PRIu32 "\n", r.preemptions);
}

static void render_rpcs(hv_metrics_t *m, hv_http_reply_t *o) {
    fam(o, "hv_rpcs_total", "counter",
        "gRPC calls the head served, by method and the status code they ended with.");
    uint64_t refused[METRICS_CODES] = {0};
    for (size_t i = 0; i <= m->nrpc; i++) {
        const uint64_t *n = i < m->nrpc ? m->rpc[i].n : m->rpc_unknown;
        char method[160];
        const char *path = i < m->nrpc ? m->rpc[i].path : "unknown";
        hv_metrics_escape_label(path[0] == '/' ? path + 1 : path, method, sizeof(method));
        for (int c = 0; c < METRICS_CODES; c++) {
            if (n[c] > 0) {
                hv_http_reply_printf(o, "hv_rpcs_total{method=\"%s\",code=\"%s\"} %" PRIu64 "\n",
                                     method, hv_rpc_code_name(c), n[c]);
                refused[c] += n[c];
            }
        }
    }
    hv_http_stats_t hs;
    hv_http_server_stats(m->http, &hs);
    fam(o, "hv_auth_refusals_total", "counter",
        "Calls refused for their credential: gRPC calls without a valid one (UNAUTHENTICATED) "
        "or with one of another scope (PERMISSION_DENIED), metrics scrapes without the "
        "token, and status page logins with a token that is not a client token.");
    hv_http_reply_printf(o,
                         "hv_auth_refusals_total{endpoint=\"grpc\",code=\"UNAUTHENTICATED\"} "
                         "%" PRIu64 "\n"
                         "hv_auth_refusals_total{endpoint=\"grpc\",code=\"PERMISSION_DENIED\"} "
                         "%" PRIu64 "\n"
                         "hv_auth_refusals_total{endpoint=\"metrics\",code=\"UNAUTHENTICATED\"} "
                         "%" PRIu64 "\n"
                         "hv_auth_refusals_total{endpoint=\"page\",code=\"UNAUTHENTICATED\"} "
                         "%" PRIu64 "\n",
                         refused[16], refused[7], hs.unauthorized,
                         m->login_refused != NULL ? *m->login_refused : 0);
    hv_conngate_stats_t gs;
    hv_conngate_stats(&gs);
    fam(o, "hv_connections_open", "gauge",
        "Connections to the gRPC port the head holds (limits.max_connections).");
    hv_http_reply_printf(o, "hv_connections_open %u\n", gs.open);
    fam(o, "hv_connections_refused_total", "counter",
        "Connections to the gRPC port closed at accept, by the bound that was reached: the "
        "client address's (limits.max_connections_per_client) or the one in all.");
    hv_http_reply_printf(o,
                         "hv_connections_refused_total{limit=\"client\"} %" PRIu64 "\n"
                         "hv_connections_refused_total{limit=\"total\"} %" PRIu64 "\n",
                         gs.refused_client, gs.refused_total);
}

/* The workers' own figures, summed per job from their reports (driver.h hv_driver_rdzv_report):
 * one series per job in the driver's memory that reported, active or ended (the driver forgets
 * an ended job after 10 minutes, and its series go then). Labelled by job_id only. */
static void render_jobfigs(hv_metrics_t *m, hv_http_reply_t *o) {
    static const struct {
        const char *name, *help;
        int us; /* 1: a microsecond field, exported in seconds */
    } f[] = {
        {"hv_job_allreduce_bytes_total",
         "Bytes of the tensors a job's workers allreduced (each "
         "worker its own tensors), from the workers' reports.",
         0},
        {"hv_job_allreduce_seconds_total",
         "Seconds a job's workers spent running allreduces, summed over workers.", 1},
        {"hv_job_allreduces_total", "Tensors a job's workers allreduced, summed over workers.", 0},
        {"hv_job_commits_total", "Elastic state commits of a job's workers, summed over workers.",
         0},
        {"hv_job_commit_seconds_total",
         "Seconds a job's workers spent in elastic state commits, summed over workers.", 1},
    };
    for (size_t k = 0; k < sizeof(f) / sizeof(f[0]); k++) {
        fam(o, f[k].name, "counter", f[k].help);
        for (const hv_djob_t *j = hv_driver_jobs(m->d); j != NULL; j = j->next) {
            const hv_jobfig_t *g = &j->figs;
            if (g->reports == 0) {
                continue;
            }
            uint64_t v = k == 0   ? g->allreduce_bytes
                         : k == 1 ? g->allreduce_us
                         : k == 2 ? g->allreduces
                         : k == 3 ? g->commits
                                  : g->commit_us;
            if (f[k].us) {
                hv_http_reply_printf(o, "%s{job_id=\"%" PRIu64 "\"} %" PRIu64 ".%06" PRIu64 "\n",
                                     f[k].name, j->jm.id, v / 1000000, v % 1000000);
            } else {
                hv_http_reply_printf(o, "%s{job_id=\"%" PRIu64 "\"} %" PRIu64 "\n", f[k].name,
                                     j->jm.id, v);
            }
        }
    }
}

void hv_metrics_render(hv_metrics_t *m, uint64_t now_wall_ms, hv_http_reply_t *o) {
    fam(o, "hv_build_info", "gauge", "The running hvhead's version (always 1).");
    hv_http_reply_printf(o, "hv_build_info{version=\"%s\"} 1\n", HV_VERSION_STRING);
    fam(o, "hv_head_start_time_seconds", "gauge", "When this head started (Unix time).");
    hv_http_reply_printf(o, "hv_head_start_time_seconds %.3f\n", (double)m->start_wall_ms / 1000.0);
    hv_instance_row_t *irows = NULL;
    size_t ni = 0;
    if (hv_view_instances(m->d, 0, &irows, &ni) != HV_OK) {
        irows = NULL;
        ni = 0;
    }
    render_nodes(m, irows, ni, o);
    render_jobs(m, o);
    render_jobfigs(m, o);
    render_actors(m, o);
    render_actor_figs(m, now_wall_ms, o);
    render_events(m, o);
    render_fleet(m, o);
    render_instances(m, irows, ni, now_wall_ms, o);
    hv_view_instances_free(irows, ni);
    render_rpcs(m, o);
}

void hv_metrics_serve(const hv_http_request_t *req, hv_http_reply_t *rep, void *ud) {
    (void)req;
    rep->content_type = METRICS_CTYPE;
    hv_metrics_render(ud, hv_wall_ms(), rep);
}
