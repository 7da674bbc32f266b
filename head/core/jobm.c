/*
 * jobm: see jobm.h. Vocabulary used below:
 *   live      the worker's process may still run (starting or running);
 *   expected  live, not removed and not done: the open round waits for it;
 *   member    member_gen == the last closed round's generation (closed_gen);
 *   survivor  a live member that is not removed: it holds the committed training state.
 * closed_gen is not stored: at a close every expected worker that did not join is removed, so
 * the newest member_gen among the job's workers is the last closed round.
 */
#include "jobm.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "mem.h"
#include "rounds.h"
#include "jobsize.h"

static const char *const job_names[HV_JOB__COUNT] = {"pending",   "placing", "running",
                                                     "succeeded", "failed",  "cancelled"};
static const char *const wk_names[HV_WK__COUNT] = {"starting", "running", "exited",
                                                   "killed",   "lost",    "left"};

const char *hv_job_state_name(hv_job_state_t s) { return s < HV_JOB__COUNT ? job_names[s] : "?"; }
const char *hv_wk_state_name(hv_wk_state_t s) { return s < HV_WK__COUNT ? wk_names[s] : "?"; }

hv_err hv_job_state_parse(const char *s, hv_job_state_t *out) {
    for (int i = 0; s != NULL && i < HV_JOB__COUNT; i++) {
        if (strcmp(s, job_names[i]) == 0) {
            *out = (hv_job_state_t)i;
            return HV_OK;
        }
    }
    return HV_EINVAL;
}

hv_err hv_wk_state_parse(const char *s, hv_wk_state_t *out) {
    if (s != NULL && strcmp(s, "pending") == 0) {
        *out = HV_WK_STARTING;
        return HV_OK;
    }
    for (int i = 0; s != NULL && i < HV_WK__COUNT; i++) {
        if (strcmp(s, wk_names[i]) == 0) {
            *out = (hv_wk_state_t)i;
            return HV_OK;
        }
    }
    return HV_EINVAL;
}

int hv_job_state_terminal(hv_job_state_t s) {
    return s == HV_JOB_SUCCEEDED || s == HV_JOB_FAILED || s == HV_JOB_CANCELLED;
}

int hv_wk_state_active(hv_wk_state_t s) { return s == HV_WK_STARTING || s == HV_WK_RUNNING; }

/* ---- actions -------------------------------------------------------------------------------- */

void hv_jm_out_init(hv_jm_out_t *o) { memset(o, 0, sizeof(*o)); }

void hv_jm_out_reset(hv_jm_out_t *o) {
    for (size_t i = 0; i < o->n; i++) {
        hv_free(o->a[i].data);
        hv_free(o->a[i].removed);
    }
    o->n = 0;
    o->oom = 0;
}

void hv_jm_out_fini(hv_jm_out_t *o) {
    hv_jm_out_reset(o);
    hv_free(o->a);
    memset(o, 0, sizeof(*o));
}

static hv_jm_action_t *act(hv_jm_out_t *o, hv_jm_act_kind_t kind) {
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 16;
        hv_jm_action_t *a = hv_realloc(o->a, cap * sizeof(*a));
        if (a == NULL) {
            o->oom = 1;
            return NULL;
        }
        o->a = a;
        o->cap = cap;
    }
    hv_jm_action_t *x = &o->a[o->n++];
    memset(x, 0, sizeof(*x));
    x->kind = kind;
    return x;
}

static void act_text(hv_jm_action_t *x, const char *fmt, va_list ap) {
    vsnprintf(x->text, sizeof(x->text), fmt, ap);
}

/* Takes ownership of data (may be NULL); f: the event's fields (NULL: none). */
static void act_event_v(hv_jm_out_t *o, const char *kind, const hv_ev_fields_t *f, char *data,
                        const char *fmt, va_list ap) {
    hv_jm_action_t *x = act(o, HV_JA_EVENT);
    if (x == NULL) {
        hv_free(data);
        return;
    }
    snprintf(x->event, sizeof(x->event), "%s", kind);
    if (f != NULL) {
        x->ev = *f;
    }
    x->data = data;
    act_text(x, fmt, ap);
}

static void act_event(hv_jm_out_t *o, const char *kind, char *data, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void act_event_f(hv_jm_out_t *o, const char *kind, const hv_ev_fields_t *f, char *data,
                        const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void act_event(hv_jm_out_t *o, const char *kind, char *data, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    act_event_v(o, kind, NULL, data, fmt, ap);
    va_end(ap);
}

static void act_event_f(hv_jm_out_t *o, const char *kind, const hv_ev_fields_t *f, char *data,
                        const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    act_event_v(o, kind, f, data, fmt, ap);
    va_end(ap);
}

/* The fields of an event about worker w. */
static hv_ev_fields_t worker_fields(const hv_jm_worker_t *w) {
    return (hv_ev_fields_t){.node_id = w->node_id, .worker_id = w->id, .rank = w->rank};
}

static void act_worker(hv_jm_out_t *o, hv_jm_act_kind_t kind, hv_jm_worker_t *w, hv_err rc,
                       const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void act_worker(hv_jm_out_t *o, hv_jm_act_kind_t kind, hv_jm_worker_t *w, hv_err rc,
                       const char *fmt, ...) {
    hv_jm_action_t *x = act(o, kind);
    if (x == NULL) {
        return;
    }
    x->w = w;
    x->rc = rc;
    va_list ap;
    va_start(ap, fmt);
    act_text(x, fmt, ap);
    va_end(ap);
}

/* ---- helpers -------------------------------------------------------------------------------- */

static int live(const hv_jm_worker_t *w) { return hv_wk_state_active(w->state); }
static int expected(const hv_jm_worker_t *w) { return live(w) && !w->removed && !w->done; }

static void mark(hv_jm_worker_t *w) { w->dirty = 1; }

/* Its node is suspected lost (see hv_jm_suspect). */
static int suspected(const hv_jm_worker_t *w) { return w->suspect_until != 0; }
/* Suspected, and its grace has passed: a round no longer waits for it. */
static int waived(const hv_jm_worker_t *w, uint64_t now) {
    return suspected(w) && now >= w->suspect_until;
}

static uint32_t closed_gen(const hv_jm_job_t *j) {
    uint32_t g = 0;
    for (size_t i = 0; i < j->nw; i++) {
        if (j->w[i]->member_gen > g) {
            g = j->w[i]->member_gen;
        }
    }
    return g;
}

static size_t count_live(const hv_jm_job_t *j) {
    size_t n = 0;
    for (size_t i = 0; i < j->nw; i++) {
        n += live(j->w[i]);
    }
    return n;
}

/* A worker reported Done for the last closed round: its training finished, so the job is
 * completing (Elastic Horovod's rule: once any worker succeeded no new round opens, and the job
 * succeeds when the others end without failing). Fixed-size jobs have no rounds to stop. */
static int completing(const hv_jm_job_t *j) {
    if (!j->p.elastic) {
        return 0;
    }
    uint32_t cg = closed_gen(j);
    for (size_t i = 0; i < j->nw; i++) {
        if (cg > 0 && j->w[i]->member_gen == cg && j->w[i]->done) {
            return 1;
        }
    }
    return 0;
}

static size_t count_done(const hv_jm_job_t *j) {
    size_t n = 0;
    for (size_t i = 0; i < j->nw; i++) {
        n += j->w[i]->done != 0;
    }
    return n;
}

/* Live members of the last closed round that still hold the state. */
static size_t count_survivors(const hv_jm_job_t *j, uint32_t cg) {
    size_t n = 0;
    for (size_t i = 0; i < j->nw; i++) {
        const hv_jm_worker_t *w = j->w[i];
        n += cg > 0 && w->member_gen == cg && live(w) && !w->removed;
    }
    return n;
}

static void append(char *buf, size_t len, const char *sep, const char *text) {
    size_t l = strlen(buf);
    if (l + 1 < len) {
        snprintf(buf + l, len - l, "%s%s", l > 0 ? sep : "", text);
    }
}

static void job_kill(hv_jm_worker_t *w, const char *why, hv_jm_out_t *out) {
    if (!live(w) || w->kill_sent) {
        return;
    }
    w->kill_sent = 1;
    act_worker(out, HV_JA_KILL, w, HV_OK, "%s", why);
}

/* ---- JSON for event data -------------------------------------------------------------------- */

typedef struct jbuf_s {
    char *s;
    size_t len, cap;
    int oom;
} jbuf_t;

static void jb_put(jbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void jb_put(jbuf_t *b, const char *fmt, ...) {
    if (b->oom) {
        return;
    }
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if (b->s != NULL && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap ? b->cap : 256) * 2 + (size_t)n;
        char *s = hv_realloc(b->s, cap);
        if (s == NULL) {
            b->oom = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

/* A JSON string literal. */
static void jb_str(jbuf_t *b, const char *s) {
    jb_put(b, "\"");
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\') {
            jb_put(b, "\\%c", *p);
        } else if (*p < 0x20) {
            jb_put(b, "\\u%04x", *p);
        } else {
            jb_put(b, "%c", *p);
        }
    }
    jb_put(b, "\"");
}

static char *jb_take(jbuf_t *b) {
    if (b->oom) {
        hv_free(b->s);
        return NULL;
    }
    return b->s;
}

static const char *node_name(const hv_jm_job_t *j, uint64_t node_id) {
    const char *n = j->node_name != NULL ? j->node_name(node_id, j->node_name_ud) : NULL;
    return n != NULL ? n : "?";
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

void hv_jm_init(hv_jm_job_t *j, uint64_t id, const hv_jm_params_t *p) {
    memset(j, 0, sizeof(*j));
    j->id = id;
    j->p = *p;
    if (!j->p.elastic) {
        j->p.min_np = j->p.max_np = j->p.np;
    }
    j->state = HV_JOB_PENDING;
}

void hv_jm_fini(hv_jm_job_t *j) {
    hv_free(j->w);
    j->w = NULL;
    j->nw = j->capw = 0;
}

hv_err hv_jm_attach(hv_jm_job_t *j, hv_jm_worker_t *w) {
    if (j->nw == j->capw) {
        size_t cap = j->capw ? j->capw * 2 : 8;
        hv_jm_worker_t **v = hv_realloc(j->w, cap * sizeof(*v));
        if (v == NULL) {
            return HV_ENOMEM;
        }
        j->w = v;
        j->capw = cap;
    }
    j->w[j->nw++] = w;
    return HV_OK;
}

static void after_end(hv_jm_job_t *j, hv_jm_out_t *out) {
    if (j->ending && count_live(j) == 0) {
        j->ending = 0;
        act(out, HV_JA_FINISHED);
    }
}

void hv_jm_end(hv_jm_job_t *j, hv_job_state_t st, hv_ev_reason_t code, const char *reason,
               hv_jm_out_t *out) {
    if (hv_job_state_terminal(j->state) || !hv_job_state_terminal(st)) {
        return;
    }
    j->state = st;
    snprintf(j->reason, sizeof(j->reason), "%s", reason ? reason : "");
    /* round_open stays as it was: a job that ended while a round gathered shows that round as
     * never formed (its generation was opened, not closed). */
    j->ending = 1;
    j->dirty = 1;
    for (size_t i = 0; i < j->nw; i++) {
        job_kill(j->w[i], reason && reason[0] ? reason : "the job ended", out);
    }
    hv_ev_fields_t f = {
        .job_state = HV_EV_JOB_STATE(st), .reason = code, .generation = j->generation};
    if (j->reason[0] != '\0') {
        act_event_f(out, "job.state", &f, NULL, "job %llu %s: %s", (unsigned long long)j->id,
                    hv_job_state_name(st), j->reason);
    } else {
        act_event_f(out, "job.state", &f, NULL, "job %llu %s", (unsigned long long)j->id,
                    hv_job_state_name(st));
    }
    act(out, HV_JA_ENDED);
    after_end(j, out);
}

/* ---- rounds --------------------------------------------------------------------------------- */

static void close_round(hv_jm_job_t *j, uint64_t now, hv_jm_out_t *out) {
    uint32_t gen = j->generation;
    uint32_t prev = closed_gen(j);
    size_t n = 0;
    for (size_t i = 0; i < j->nw; i++) {
        n += expected(j->w[i]) && j->w[i]->joined;
    }
    hv_round_member_t *m = hv_calloc(n ? n : 1, sizeof(*m));
    hv_jm_worker_t **mw = hv_calloc(n ? n : 1, sizeof(*mw));
    hv_round_slot_t *slots = hv_calloc(n ? n : 1, sizeof(*slots));
    size_t *scratch = hv_calloc(n ? n : 1, sizeof(*scratch));
    uint64_t *ids_prev = hv_calloc(j->nw ? j->nw : 1, sizeof(*ids_prev));
    uint64_t *ids_next = hv_calloc(n ? n : 1, sizeof(*ids_next));
    if (m == NULL || mw == NULL || slots == NULL || scratch == NULL || ids_prev == NULL ||
        ids_next == NULL) {
        out->oom = 1; /* the round stays open; the next tick tries again */
        goto out;
    }
    size_t k = 0, np = 0;
    for (size_t i = 0; i < j->nw; i++) {
        hv_jm_worker_t *w = j->w[i];
        if (prev > 0 && w->member_gen == prev) {
            ids_prev[np++] = w->id;
        }
        if (!(expected(w) && w->joined)) {
            continue;
        }
        m[k].worker_id = w->id;
        m[k].node_id = w->node_id;
        m[k].joined_gen = w->joined_gen;
        m[k].prev_rank = w->member_gen > 0 ? w->rank : HV_ROUND_NEW;
        ids_next[k] = w->id;
        mw[k++] = w;
    }
    uint32_t hosts = 0;
    hv_round_assign(m, n, scratch, slots, &hosts);
    size_t left_suspected = 0;
    for (size_t i = 0; i < j->nw; i++) {
        left_suspected += expected(j->w[i]) && !j->w[i]->joined && suspected(j->w[i]);
    }
    /* Whoever was expected and did not come is left out: it must not train in a stale ring. */
    for (size_t i = 0; i < j->nw; i++) {
        hv_jm_worker_t *w = j->w[i];
        if (expected(w) && !w->joined) {
            w->removed = 1;
            mark(w);
            job_kill(w,
                     suspected(w) ? "its node was suspected lost and the job's new round formed "
                                    "without it"
                                  : "it did not join its job's new round in time",
                     out);
        }
    }
    const char *rank0 = "?";
    for (size_t i = 0; i < n; i++) {
        hv_jm_worker_t *w = mw[i];
        w->member_gen = gen;
        if (w->joined_gen == 0) {
            w->joined_gen = gen;
        }
        w->rank = slots[i].rank;
        w->local_rank = slots[i].local_rank;
        w->local_size = slots[i].local_size;
        w->cross_rank = slots[i].cross_rank;
        w->joined = 0;
        w->done = 0;
        mark(w);
        if (w->rank == 0) {
            rank0 = node_name(j, w->node_id);
        }
    }
    size_t added = 0, removed = 0;
    hv_round_diff(ids_prev, np, ids_next, n, &added, &removed);
    j->size = (uint32_t)n;
    j->cross_size = hosts;
    j->round_open = 0;
    j->failures[0] = '\0';
    j->dirty = 1;
    uint64_t waited = now > j->round_opened_ms ? now - j->round_opened_ms : 0;
    jbuf_t b = {0};
    jb_put(&b, "{\"generation\":%u,\"size\":%zu,\"nodes\":%u,\"reason\":", gen, n, hosts);
    jb_str(&b, j->round_reason);
    jb_put(&b, ",\"rollback\":%s,\"resets\":%u,\"added\":%zu,\"removed\":%zu,\"wait_ms\":%llu",
           j->round_rollback ? "true" : "false", j->resets, added, removed,
           (unsigned long long)waited);
    jb_put(&b, ",\"redone_samples\":%llu,\"suspected_left_out\":%zu,\"rank0\":",
           (unsigned long long)j->round_redone, left_suspected);
    jb_str(&b, rank0);
    jb_put(&b, ",\"members\":[");
    for (uint32_t r = 0; r < n; r++) {
        for (size_t i = 0; i < n; i++) {
            if (mw[i]->rank == r) {
                jb_put(&b, "%s{\"worker\":%llu,\"rank\":%u,\"node\":", r ? "," : "",
                       (unsigned long long)mw[i]->id, r);
                jb_str(&b, node_name(j, mw[i]->node_id));
                jb_put(&b, "}");
            }
        }
    }
    jb_put(&b, "]}");
    char redo[64] = "";
    if (j->round_rollback) {
        snprintf(redo, sizeof(redo),
                 j->round_redone ? ", rolled back, %llu samples to redo" : ", rolled back",
                 (unsigned long long)j->round_redone);
    }
    j->round_redone = 0;
    hv_ev_fields_t cf = {.generation = gen,
                         .reason = j->round_code,
                         .duration_ms = waited,
                         .rollback = j->round_rollback};
    act_event_f(out, "round.close", &cf, jb_take(&b),
                "generation %u: %zu workers on %u nodes, rank 0 on %s (+%zu -%zu%s) after %llu "
                "ms; reason: %s",
                gen, n, hosts, rank0, added, removed, redo, (unsigned long long)waited,
                j->round_reason);
    hv_jm_action_t *x = act(out, HV_JA_ROUND);
    if (x != NULL) {
        x->generation = gen;
    }
out:
    hv_free(m);
    hv_free(mw);
    hv_free(slots);
    hv_free(scratch);
    hv_free(ids_prev);
    hv_free(ids_next);
}

/* ---- leaving members (issue 15 §2): a member removed by a drain holds the state until a round
 * without it has closed ---------------------------------------------------------------------- */

/* Answers the JoinRound that each leaving member holds: removed (it leaves now). */
static void release_leavers(hv_jm_job_t *j, const char *why, hv_jm_out_t *out) {
    for (size_t i = 0; i < j->nw; i++) {
        hv_jm_worker_t *w = j->w[i];
        if (w->leaving && w->removed && w->joined) {
            w->joined = 0;
            act_worker(out, HV_JA_JOIN_REMOVED, w, HV_OK, "%s", why);
        }
    }
}

/* While a round is open, the members leaving drained nodes are the last holders of the state
 * when no other member of generation cg is left that may carry it on (the others are gone, or
 * suspected lost past their grace): they are taken back, and stay like the members of a
 * draining node that nobody else can take the state from (evict, until others hold it). */
static void readmit_leavers(hv_jm_job_t *j, uint32_t cg, uint64_t now, hv_jm_out_t *out) {
    size_t leavers = 0, others = 0;
    for (size_t i = 0; i < j->nw; i++) {
        const hv_jm_worker_t *w = j->w[i];
        if (cg == 0 || w->member_gen != cg || !live(w) || w->kill_sent) {
            continue;
        }
        if (w->removed) {
            leavers += w->leaving;
        } else {
            others += !waived(w, now);
        }
    }
    if (leavers == 0 || others > 0) {
        return;
    }
    for (size_t i = 0; i < j->nw; i++) {
        hv_jm_worker_t *w = j->w[i];
        if (w->member_gen == cg && live(w) && !w->kill_sent && w->removed && w->leaving) {
            w->removed = 0;
            w->leaving = 0;
            w->evict = 1;
            w->evict_until = 0;
            mark(w);
        }
    }
    act_event(out, "job.note", NULL,
              "job %llu takes back its %zu workers leaving drained nodes: no other worker of "
              "generation %u is left to hold the training state; they stay until others hold it",
              (unsigned long long)j->id, leavers, cg);
}

static void leave_kept(hv_jm_job_t *j, int only_due, uint64_t now, hv_jm_out_t *out);
static void stop_node(hv_jm_job_t *j, uint64_t node_id, const char *why, hv_jm_out_t *out);
static void check_success(hv_jm_job_t *j, hv_jm_out_t *out);

static void evaluate(hv_jm_job_t *j, uint64_t now, hv_jm_out_t *out) {
    if (!j->round_open || hv_job_state_terminal(j->state)) {
        return;
    }
    if (completing(j)) {
        /* The open round never forms: the job ends when its workers have (check_success). */
        check_success(j, out);
        return;
    }
    if (j->preempt_until != 0) {
        return; /* a preempt round never forms: the job stops (hv_jm_preempt_due) */
    }
    uint32_t cg = closed_gen(j);
    readmit_leavers(j, cg, now, out);
    /* A round that resumes from the head's copy needs no member of the last round. */
    int resuming = j->resume_gen != 0 && j->resume_gen == j->generation && cg < j->resume_gen;
    /* Members of the last round that may still carry the state on: those that will re-join, and
     * those leaving a drained node that may yet finish their training. Without any, the round
     * can never form: say so now rather than at the elastic timeout. */
    size_t possible = resuming ? 1 : 0;
    for (size_t i = 0; i < j->nw; i++) {
        const hv_jm_worker_t *w = j->w[i];
        possible += cg > 0 && w->member_gen == cg && live(w) && !w->kill_sent;
    }
    if (cg > 0 && possible == 0) {
        char why[HV_JM_REASON_MAX + 128];
        if (j->failures[0] != '\0') {
            snprintf(why, sizeof(why),
                     "no worker of generation %u survived to hold the training state: %s", cg,
                     j->failures);
        } else {
            snprintf(why, sizeof(why),
                     "generation %u could not form: no worker of generation %u is left to hold "
                     "the training state",
                     j->generation, cg);
        }
        hv_jm_end(j, HV_JOB_FAILED, HV_EV_NO_SURVIVOR, why, out);
        return;
    }
    hv_round_view_t v = {.min_np = hv_np_least(j->p.elastic, j->p.np, j->p.min_np),
                         .now = now,
                         .deadline = j->round_deadline_ms,
                         .fail_at = j->round_fail_at_ms};
    int holder_waiting = 0;
    for (size_t i = 0; i < j->nw; i++) {
        const hv_jm_worker_t *w = j->w[i];
        if (expected(w)) {
            v.expected++;
            v.joined += w->joined;
            v.waived += !w->joined && waived(w, now);
            holder_waiting |= cg > 0 && w->member_gen == cg && w->joined;
        }
    }
    hv_round_decision_t d = hv_round_decide(&v);
    if (d == HV_ROUND_CLOSE && cg > 0 && !holder_waiting && !resuming) {
        /* Only newcomers joined: nobody could pass the state on. Wait for a survivor; if none is
         * left the failure path has already ended the job. */
        d = now >= v.fail_at ? HV_ROUND_FAIL : HV_ROUND_WAIT;
    }
    if (d == HV_ROUND_CLOSE) {
        close_round(j, now, out);
        if (!j->round_open) {
            release_leavers(j, "the round without it formed: others hold the training state", out);
        }
        /* Not now: the close's answers are built from the members as they are when the
         * actions are carried out, and must still include the ones that leave next. */
        j->release_due = 1;
    } else if (d == HV_ROUND_FAIL) {
        char why[HV_JM_REASON_MAX + 128];
        if (!j->p.elastic) {
            snprintf(why, sizeof(why), "rendezvous timed out after %u s: %u of %u workers joined",
                     j->p.rdzv_timeout_s, v.joined, j->p.np);
        } else {
            snprintf(why, sizeof(why),
                     "generation %u could not form: %u of %u workers joined, --min-np is %u, "
                     "and the elastic timeout (%u s) passed",
                     j->generation, v.joined, v.expected, j->p.min_np, j->p.elastic_timeout_s);
        }
        hv_jm_end(j, HV_JOB_FAILED, HV_EV_ROUND_TIMEOUT, why, out);
    }
}

static void open_round(hv_jm_job_t *j, const char *reason, hv_ev_reason_t code, int rollback,
                       uint64_t now, hv_jm_out_t *out);

/* Members kept on a draining node to hold the state leave, if others hold it: once a round with
 * workers elsewhere has formed (they synced the state to them at its start), those kept without a
 * time bound, and of those kept until a notice's end only as many as the job has beyond its
 * target (their replacements took their places: the soonest to go first; the others keep
 * training until a replacement comes or their time is up); or, with only_due, those whose time
 * after a preemption notice is up (no replacement came in time). */
static int leaves_now(const hv_jm_worker_t *w, int only_due, uint64_t now) {
    return live(w) && !w->removed && w->evict &&
           (!only_due || (w->evict_until != 0 && now >= w->evict_until));
}

/* w is the kept member (bounded by a notice) whose time is up first (ties: the first in the
 * job's order) among those still in generation cg. */
static int soonest_kept(const hv_jm_job_t *j, const hv_jm_worker_t *w, uint32_t cg, uint64_t now) {
    int before = 1;
    for (size_t i = 0; i < j->nw; i++) {
        const hv_jm_worker_t *o = j->w[i];
        if (o == w) {
            before = 0;
            continue;
        }
        if (leaves_now(o, 0, now) && o->member_gen == cg && o->evict_until != 0 &&
            (o->evict_until < w->evict_until || (before && o->evict_until == w->evict_until))) {
            return 0;
        }
    }
    return 1;
}

static void leave_kept(hv_jm_job_t *j, int only_due, uint64_t now, hv_jm_out_t *out) {
    uint32_t cg = closed_gen(j);
    size_t leaving = 0, others = 0;
    for (size_t i = 0; i < j->nw; i++) {
        const hv_jm_worker_t *w = j->w[i];
        leaving += w->member_gen == cg && leaves_now(w, only_due, now) ? 1u : 0u;
        /* A member on a node suspected lost is no holder to leave the state to. */
        others += w->member_gen == cg && live(w) && !w->removed && !w->evict && !suspected(w);
    }
    if (leaving == 0 || others == 0 || (only_due && j->round_open) ||
        hv_job_state_terminal(j->state) || completing(j)) {
        return;
    }
    /* Beyond its target by (after the round that brought replacements in): so many may go. */
    size_t members = 0, target = hv_jm_target(&j->p), surplus;
    for (size_t i = 0; i < j->nw; i++) {
        members += j->w[i]->member_gen == cg && live(j->w[i]) && !j->w[i]->removed;
    }
    surplus = members > target ? members - target : 0;
    leaving = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < j->nw; i++) {
            hv_jm_worker_t *w = j->w[i];
            if (!leaves_now(w, only_due, now) || w->member_gen != cg) {
                continue;
            }
            if (!only_due && w->evict_until != 0) {
                if (pass == 0 || surplus == 0 || !soonest_kept(j, w, cg, now)) {
                    continue;
                }
            } else if (pass == 1) {
                continue;
            }
            w->removed = 1;
            w->leaving = 1;
            mark(w);
            surplus -= surplus > 0;
            leaving++;
        }
    }
    if (leaving == 0) {
        return;
    }
    char reason[200];
    snprintf(reason, sizeof(reason),
             only_due ? "drain: %zu workers leave before their node goes (no replacement in time)"
                      : "drain: %zu workers on draining nodes leave now that others hold the state",
             leaving);
    open_round(j, reason, HV_EV_DRAIN, 0, now, out);
}

/* Workers removed from the membership that are still alive (they leave at their next check). */
static void push_round(hv_jm_job_t *j, hv_jm_out_t *out) {
    hv_jm_action_t *x = act(out, HV_JA_PUSH);
    if (x == NULL) {
        return;
    }
    x->generation = j->generation;
    x->failure = j->round_rollback;
    x->ev.generation = j->generation;
    x->ev.reason = j->round_code;
    snprintf(x->text, sizeof(x->text), "%s", j->round_reason);
    size_t n = 0;
    for (size_t i = 0; i < j->nw; i++) {
        n += live(j->w[i]) && j->w[i]->removed;
    }
    if (n > 0 && (x->removed = hv_calloc(n, sizeof(uint64_t))) != NULL) {
        for (size_t i = 0; i < j->nw; i++) {
            if (live(j->w[i]) && j->w[i]->removed) {
                x->removed[x->nremoved++] = j->w[i]->id;
            }
        }
    }
}

/* Opens the next round (or, when one is open, adds this reason to it). Every round after the
 * first is a reset, bounded by max_resets. */
static void open_round(hv_jm_job_t *j, const char *reason, hv_ev_reason_t code, int rollback,
                       uint64_t now, hv_jm_out_t *out) {
    if (hv_job_state_terminal(j->state)) {
        return;
    }
    if (completing(j)) {
        act_event(out, "job.note", NULL, "job %llu is completing: no new round for: %s",
                  (unsigned long long)j->id, reason);
        return;
    }
    if (j->round_open) {
        j->round_rollback |= rollback;
        append(j->round_reason, sizeof(j->round_reason), "; ", reason);
        j->dirty = 1;
        hv_ev_fields_t uf = {.generation = j->generation, .reason = code, .rollback = rollback};
        act_event_f(out, "round.update", &uf, NULL, "generation %u also: %s", j->generation,
                    reason);
        /* The members must hear of a failure (they roll back) and of removals at once. */
        push_round(j, out);
        evaluate(j, now, out);
        return;
    }
    uint32_t cg = closed_gen(j);
    if (cg > 0) {
        if (j->resets + 1 > j->p.max_resets) {
            char why[HV_JM_REASON_MAX + 128];
            snprintf(why, sizeof(why), "reset %u was needed (%s) but --max-resets is %u",
                     j->resets + 1, reason, j->p.max_resets);
            hv_jm_end(j, HV_JOB_FAILED, HV_EV_MAX_RESETS, why, out);
            return;
        }
        j->resets++;
    }
    j->generation++;
    j->round_open = 1;
    j->round_rollback = rollback;
    snprintf(j->round_reason, sizeof(j->round_reason), "%s", reason);
    j->round_code = code;
    j->round_opened_ms = now;
    j->round_deadline_ms = now + (uint64_t)j->p.rdzv_timeout_s * 1000u;
    uint32_t wait_s = j->p.elastic ? j->p.elastic_timeout_s : j->p.rdzv_timeout_s;
    j->round_fail_at_ms = now + (uint64_t)wait_s * 1000u;
    if (j->round_fail_at_ms < j->round_deadline_ms) {
        j->round_fail_at_ms = j->round_deadline_ms;
    }
    j->dirty = 1;
    jbuf_t b = {0};
    jb_put(&b, "{\"generation\":%u,\"reason\":", j->generation);
    jb_str(&b, reason);
    jb_put(&b, ",\"rollback\":%s,\"resets\":%u}", rollback ? "true" : "false", j->resets);
    hv_ev_fields_t of = {.generation = j->generation, .reason = code, .rollback = rollback};
    act_event_f(out, "round.open", &of, jb_take(&b), "generation %u opened%s: %s", j->generation,
                rollback ? " (roll back)" : "", reason);
    if (cg > 0) {
        push_round(j, out);
    }
    evaluate(j, now, out);
}

/* ---- inputs --------------------------------------------------------------------------------- */

uint32_t hv_jm_place(const hv_jm_job_t *j, const hv_jm_slot_t *slots, hv_jm_worker_t *const *ws,
                     uint32_t n, hv_job_state_t *state) {
    uint32_t base = hv_jm_base_rank(j);
    for (uint32_t r = 0; r < n; r++) {
        hv_jm_worker_t *w = ws[r];
        w->node_id = slots[r].node_id;
        w->state = HV_WK_STARTING;
        w->exit_code = -1;
        w->rank = base + slots[r].rank;
        w->local_rank = slots[r].local_rank;
        w->local_size = slots[r].local_size;
    }
    *state = j->state == HV_JOB_PENDING ? HV_JOB_PLACING : j->state;
    return base + n;
}

hv_err hv_jm_placed(hv_jm_job_t *j, hv_jm_worker_t **ws, size_t n, uint64_t now, hv_jm_out_t *out) {
    (void)out;
    for (size_t i = 0; i < n; i++) {
        HV_TRY(hv_jm_attach(j, ws[i]));
        mark(ws[i]);
    }
    if (j->state == HV_JOB_PENDING) {
        j->state = HV_JOB_PLACING;
        j->dirty = 1;
    }
    if (j->round_open) {
        uint64_t d = now + (uint64_t)j->p.rdzv_timeout_s * 1000u;
        if (d > j->round_deadline_ms) {
            j->round_deadline_ms = d;
            j->dirty = 1;
        }
    }
    return HV_OK;
}

void hv_jm_started(hv_jm_job_t *j, hv_jm_worker_t *w, uint64_t now, hv_jm_out_t *out) {
    (void)now;
    if (w->state != HV_WK_STARTING) {
        return; /* a repeat, or it already ended */
    }
    w->state = HV_WK_RUNNING;
    mark(w);
    if (j->state != HV_JOB_PLACING) {
        return;
    }
    size_t running = 0;
    for (size_t i = 0; i < j->nw; i++) {
        const hv_jm_worker_t *o = j->w[i];
        if (o->state == HV_WK_STARTING && !o->removed) {
            return;
        }
        running += o->state == HV_WK_RUNNING;
    }
    j->state = HV_JOB_RUNNING;
    j->dirty = 1;
    hv_ev_fields_t f = {.job_state = HV_EV_JOB_STATE(HV_JOB_RUNNING)};
    act_event_f(out, "job.state", &f, NULL, "job %llu running: %zu workers started",
                (unsigned long long)j->id, running);
}

/* Elastic: the job is completing (a member of the last round reported Done) and no member of
 * that round may still finish: those that reported Done have exited, the others have ended too
 * (removed, stopped, or lost after the training finished) or are being killed. Newcomers that
 * never became members hold nothing and are stopped. Fixed-size: every worker exited 0. Whatever
 * still runs is stopped. A failure after the first success does not come here: it ends the job
 * (fail_worker). */
static void check_success(hv_jm_job_t *j, hv_jm_out_t *out) {
    if (hv_job_state_terminal(j->state)) {
        return;
    }
    if (j->p.elastic) {
        if (!completing(j)) {
            return;
        }
        uint32_t cg = closed_gen(j);
        for (size_t i = 0; i < j->nw; i++) {
            const hv_jm_worker_t *w = j->w[i];
            if (w->member_gen == cg && live(w) && (w->done || !w->kill_sent)) {
                return;
            }
        }
        hv_jm_end(j, HV_JOB_SUCCEEDED, HV_EV_SUCCEEDED, "", out);
        return;
    }
    size_t members = 0;
    for (size_t i = 0; i < j->nw; i++) {
        const hv_jm_worker_t *w = j->w[i];
        if (w->removed) {
            continue;
        }
        if (w->state != HV_WK_EXITED || w->exit_code != 0 || w->term_signal != 0) {
            return;
        }
        members++;
    }
    if (members == 0) {
        return;
    }
    hv_jm_end(j, HV_JOB_SUCCEEDED, HV_EV_SUCCEEDED, "", out);
}

/* ---- resume from the head's copy ------------------------------------------------------------ */

hv_jm_loss_verdict_t hv_jm_loss_decide(const hv_jm_loss_t *in, char *why, size_t len) {
    const char *no = NULL;
    char buf[160];
    if (!in->elastic) {
        no = "a job of fixed size is not resumed";
    } else if (in->own_failure) {
        no = "the program failed on its own: resuming from a copy would fail the same way";
    } else if (!in->has_copy && in->committed) {
        no = "no copy of the training state was stored outside its nodes yet";
    } else if (in->resets + 1 > in->max_resets) {
        snprintf(buf, sizeof(buf), "%s would be reset %u, but --max-resets is %u",
                 in->has_copy ? "a resume from the stored copy"
                              : "a restart from the beginning (nothing was committed yet)",
                 in->resets + 1, in->max_resets);
        no = buf;
    }
    if (no != NULL) {
        if (why != NULL && len > 0) {
            snprintf(why, len, "%s", no);
        }
        return HV_JM_LOSS_FAIL;
    }
    /* Without a copy and without a commit, the initial state is the whole training state: new
     * workers starting from the beginning redo no epoch that could have finished. */
    return in->has_copy ? HV_JM_LOSS_RESUME : HV_JM_LOSS_RESTART;
}

/* Every member was lost before the job committed anything, and no copy exists
 * (HV_JM_LOSS_RESTART): a round of new workers starts the training from the beginning. It is
 * marked as the resume round (so that it may form with newcomers only), and loads no copy
 * (hv_jm_round_copy: there is none). */
static void restart_from_start(hv_jm_job_t *j, uint64_t now, hv_jm_out_t *out) {
    j->resume_gen = j->round_open ? j->generation : j->generation + 1;
    j->resumed_from = HV_COPY_TIER_NONE;
    j->dirty = 1;
    char reason[HV_JM_REASON_MAX];
    snprintf(reason, sizeof(reason),
             "restart: every member was lost before the first commit (%.300s); new workers "
             "start from the beginning",
             j->failures);
    jbuf_t b = {0};
    jb_put(&b,
           "{\"generation\":%u,\"tier\":\"none\",\"restart\":true,\"failures\":", j->resume_gen);
    jb_str(&b, j->failures);
    jb_put(&b, "}");
    hv_ev_fields_t rf = {.generation = j->resume_gen, .reason = HV_EV_RESUME, .rollback = 1};
    act_event_f(out, "job.resume", &rf, jb_take(&b),
                "job %llu restarts in generation %u: every member was lost before the first "
                "commit: new workers start from the beginning",
                (unsigned long long)j->id, j->resume_gen);
    open_round(j, reason, HV_EV_RESUME, 1, now, out);
}

/* Every member that held the state is gone, the last being w. Resumes the job from the head's
 * copy, or restarts it from the beginning, when hv_jm_loss_decide says so (returns 1: a round of
 * new workers is open, marked as the resume round, and the driver places them); else writes why
 * not into no and returns 0. */
static int resume_or_explain(hv_jm_job_t *j, const hv_jm_worker_t *w, uint64_t now, char *no,
                             size_t len, hv_jm_out_t *out) {
    hv_copy_tier_t tier = hv_jm_copy_tier(j);
    hv_jm_loss_t in = {.elastic = j->p.elastic,
                       .own_failure = w->state == HV_WK_EXITED && w->term_signal == 0,
                       .has_copy = tier != HV_COPY_TIER_NONE,
                       .committed = j->commit_seen,
                       .resets = j->resets,
                       .max_resets = j->p.max_resets};
    hv_jm_loss_verdict_t v = hv_jm_loss_decide(&in, no, len);
    if (v == HV_JM_LOSS_FAIL) {
        return 0;
    }
    j->resume_trigger = w->id;
    if (v == HV_JM_LOSS_RESTART) {
        restart_from_start(j, now, out);
        return 1;
    }
    const hv_jm_copy_t *c = tier == HV_COPY_TIER_DURABLE ? &j->durable : &j->copy;
    char from[120];
    const char *keeper = NULL;
    if (tier == HV_COPY_TIER_HEAD && c->peer_node != 0) {
        keeper = j->node_name != NULL ? j->node_name(c->peer_node, j->node_name_ud) : NULL;
        snprintf(from, sizeof(from), "the copy kept by node %s's agent", keeper ? keeper : "?");
    } else {
        snprintf(from, sizeof(from), "%s",
                 tier == HV_COPY_TIER_DURABLE ? "the durable copy" : "the head's copy");
    }
    /* Marked first: the round's evaluation must not fail it for want of a member. */
    j->resume_gen = j->round_open ? j->generation : j->generation + 1;
    j->resumes++;
    j->resumed_from = keeper != NULL || c->peer_node != 0 ? HV_COPY_TIER_PEER : tier;
    j->dirty = 1;
    uint64_t age = now > c->stored_ms ? now - c->stored_ms : 0;
    char reason[HV_JM_REASON_MAX];
    snprintf(reason, sizeof(reason),
             "resume: every member was lost (%.300s); new workers load %.120s of generation "
             "%u, commit %llu",
             j->failures, from, c->generation, (unsigned long long)c->commit);
    jbuf_t b = {0};
    jb_put(&b,
           "{\"generation\":%u,\"tier\":\"%s\",\"copy_generation\":%u,\"copy_commit\":%llu,"
           "\"copy_age_ms\":%llu,\"resumes\":%u,\"failures\":",
           j->resume_gen, hv_copy_tier_name(j->resumed_from), c->generation,
           (unsigned long long)c->commit, (unsigned long long)age, j->resumes);
    jb_str(&b, j->failures);
    jb_put(&b, "}");
    hv_ev_fields_t rf = {.generation = j->resume_gen, .reason = HV_EV_RESUME, .rollback = 1};
    act_event_f(out, "job.resume", &rf, jb_take(&b),
                "job %llu resumes in generation %u from %s of generation %u, commit "
                "%llu (%.1f s old): every member was lost",
                (unsigned long long)j->id, j->resume_gen, from, c->generation,
                (unsigned long long)c->commit, (double)age / 1000.0);
    open_round(j, reason, HV_EV_RESUME, 1, now, out);
    return 1;
}

hv_copy_tier_t hv_jm_copy_tier(const hv_jm_job_t *j) {
    hv_copy_ref_t head = {j->copy.generation, j->copy.commit, j->copy.missing};
    hv_copy_ref_t durable = {j->durable.generation, j->durable.commit, 0};
    return hv_copy_choose(&head, &durable);
}

hv_copy_tier_t hv_jm_round_copy(const hv_jm_job_t *j, uint32_t gen) {
    if (gen == 0 || gen != j->resume_gen) {
        return HV_COPY_TIER_NONE;
    }
    return hv_jm_copy_tier(j);
}

int hv_jm_copies_kept(hv_job_state_t s) { return s == HV_JOB_FAILED; }

/* w failed (its state is already final). */
static void fail_worker(hv_jm_job_t *j, hv_jm_worker_t *w, const char *what, uint64_t now,
                        hv_jm_out_t *out) {
    hv_ev_fields_t wf = worker_fields(w);
    act_event_f(out, "worker.fail", &wf, NULL, "%s", what);
    if (hv_job_state_terminal(j->state)) {
        return;
    }
    append(j->failures, sizeof(j->failures), "; ", what);
    if (!j->p.elastic) {
        hv_jm_end(j, HV_JOB_FAILED, HV_EV_WORKER_FAILED, what, out);
        return;
    }
    if (completing(j)) {
        /* A worker failed on its own after others finished the training: no round can redo
         * anything, and the job fails (Elastic Horovod's rule). */
        char why[HV_JM_REASON_MAX + 128];
        snprintf(why, sizeof(why), "%s, after %zu workers had finished the training", what,
                 count_done(j));
        hv_jm_end(j, HV_JOB_FAILED, HV_EV_WORKER_FAILED, why, out);
        return;
    }
    if (j->p.blacklist_on) {
        hv_jm_action_t *x = act(out, HV_JA_STRIKE);
        if (x != NULL) {
            x->node_id = w->node_id;
            snprintf(x->text, sizeof(x->text), "%s", what);
        }
        char why[300];
        snprintf(why, sizeof(why), "a worker of the job failed on %s", node_name(j, w->node_id));
        stop_node(j, w->node_id, why, out);
    }
    uint32_t cg = closed_gen(j);
    size_t survivors = count_survivors(j, cg);
    size_t others = 0, failed = 0, members = 0, finishing = 0;
    for (size_t i = 0; i < j->nw; i++) {
        const hv_jm_worker_t *o = j->w[i];
        others += live(o) && !o->removed;
        if (cg > 0 && o->member_gen == cg) {
            members++;
            failed += !live(o) && !o->removed;
            /* Leaving a drained node, it may still report Done for this round. */
            finishing += live(o) && o->removed && !o->kill_sent;
        }
    }
    char why[HV_JM_REASON_MAX + 128];
    if (cg == 0) {
        /* No round closed yet: there is no state to lose. Carry on with whoever is left; with
         * nobody left because its node was lost (not the program failing), the job asks for new
         * workers again (hv_jm_wants) and starts with them. */
        if (others == 0 && w->state == HV_WK_LOST) {
            act_event(out, "job.note", NULL,
                      "job %llu lost every worker before its first round formed (%s): new "
                      "workers start from the beginning",
                      (unsigned long long)j->id, what);
            evaluate(j, now, out);
            return;
        }
        if (others == 0) {
            snprintf(why, sizeof(why), "all workers failed: %s", j->failures);
            hv_jm_end(j, HV_JOB_FAILED, HV_EV_WORKER_FAILED, why, out);
            return;
        }
        evaluate(j, now, out);
        return;
    }
    if (survivors == 0 && finishing == 0) {
        char no[200] = "", why2[HV_JM_REASON_MAX + 400];
        if (resume_or_explain(j, w, now, no, sizeof(no), out)) {
            return;
        }
        if (failed == members) {
            snprintf(why2, sizeof(why2), "all %zu workers of generation %u failed: %s (%s)",
                     members, cg, j->failures, no);
        } else {
            snprintf(why2, sizeof(why2),
                     "no worker of generation %u survived to hold the training state: %s (%s)", cg,
                     j->failures, no);
        }
        hv_jm_end(j, HV_JOB_FAILED, HV_EV_NO_SURVIVOR, why2, out);
        return;
    }
    char reason[300];
    snprintf(reason, sizeof(reason), "failure: %s", what);
    open_round(j, reason, HV_EV_FAILURE, 1, now, out);
}

static void worker_ended(hv_jm_job_t *j, hv_jm_worker_t *w, hv_wk_state_t st, int failure,
                         const char *what, uint64_t now, hv_jm_out_t *out) {
    w->state = st;
    w->joined = 0;
    mark(w);
    hv_ev_fields_t wf = worker_fields(w);
    if (failure) {
        fail_worker(j, w, what, now, out);
    } else if (!hv_job_state_terminal(j->state)) {
        if (st == HV_WK_LEFT) {
            act_event_f(out, "worker.left", &wf, NULL, "%s after leaving the job", what);
        } else if (st == HV_WK_KILLED && !j->ending) {
            act_event_f(out, "worker.killed", &wf, NULL, "%s", what);
        }
        check_success(j, out);
        evaluate(j, now, out);
    } else if (st == HV_WK_KILLED) {
        act_event_f(out, "worker.killed", &wf, NULL, "%s", what);
    }
    after_end(j, out);
}

void hv_jm_exited(hv_jm_job_t *j, hv_jm_worker_t *w, int exit_code, int term_signal,
                  const char *what, uint64_t now, hv_jm_out_t *out) {
    if (!live(w)) {
        return;
    }
    w->exit_code = exit_code;
    w->term_signal = term_signal;
    int ok = exit_code == 0 && term_signal == 0;
    if (w->removed) {
        worker_ended(j, w, w->kill_sent ? HV_WK_KILLED : HV_WK_LEFT, 0, what, now, out);
        return;
    }
    if (w->kill_sent) {
        worker_ended(j, w, HV_WK_KILLED, 0, what, now, out);
        return;
    }
    if (term_signal != 0 && completing(j)) {
        /* Killed from outside around the end (its node's agent, a person, the kernel) while the
         * training had finished: not a failure of the job. */
        act_event(out, "job.note", NULL, "%s, after the training had finished: not a failure",
                  what);
        worker_ended(j, w, HV_WK_EXITED, 0, what, now, out);
        return;
    }
    int need_done = j->p.elastic || w->member_gen > 0;
    if (ok && need_done && !w->done) {
        char why[HV_JM_REASON_MAX + 128];
        snprintf(why, sizeof(why), "%s without reporting Done (%s)", what,
                 j->p.elastic ? "training must return from hv_elastic_run"
                              : "it joined the rendezvous but did not call hv_shutdown");
        worker_ended(j, w, HV_WK_EXITED, 1, why, now, out);
        return;
    }
    worker_ended(j, w, HV_WK_EXITED, !ok, what, now, out);
}

void hv_jm_lost(hv_jm_job_t *j, hv_jm_worker_t *w, const char *what, uint64_t now,
                hv_jm_out_t *out) {
    if (!live(w)) {
        return;
    }
    w->exit_code = -1;
    int failure = !w->removed && !w->kill_sent;
    if (failure && completing(j)) {
        act_event(out, "job.note", NULL, "%s, after the training had finished: not a failure",
                  what);
        failure = 0;
    }
    worker_ended(j, w, HV_WK_LOST, failure, what, now, out);
}

void hv_jm_reported(hv_jm_job_t *j, const hv_jm_worker_t *w, uint64_t now, hv_jm_out_t *out) {
    (void)now;
    if (hv_job_state_terminal(j->state) || !j->round_open || j->resume_gen == 0 ||
        j->resume_gen != j->generation || j->resume_trigger == 0 || j->resume_trigger != w->id ||
        w->exit_code == 0 || w->term_signal != 0) {
        return;
    }
    hv_jm_loss_t in = {.elastic = j->p.elastic,
                       .own_failure = 1,
                       .has_copy = hv_jm_copy_tier(j) != HV_COPY_TIER_NONE,
                       .committed = j->commit_seen,
                       .resets = j->resets,
                       .max_resets = j->p.max_resets};
    char no[200] = "";
    if (hv_jm_loss_decide(&in, no, sizeof(no)) != HV_JM_LOSS_FAIL) {
        return;
    }
    char why[HV_JM_REASON_MAX + 400];
    snprintf(why, sizeof(why),
             "no worker of generation %u survived to hold the training state: %s (%s; its "
             "agent reported exit status %d after the resume began)",
             closed_gen(j), j->failures, no, w->exit_code);
    hv_jm_end(j, HV_JOB_FAILED, HV_EV_NO_SURVIVOR, why, out);
}

void hv_jm_join(hv_jm_job_t *j, hv_jm_worker_t *w, uint32_t last_gen, uint64_t now,
                hv_jm_out_t *out) {
    if (hv_job_state_terminal(j->state)) {
        act_worker(out, HV_JA_JOIN_REFUSED, w, HV_ESTATE, "job %llu has ended (%s)%s%s",
                   (unsigned long long)j->id, hv_job_state_name(j->state), j->reason[0] ? ": " : "",
                   j->reason);
        return;
    }
    if (!live(w)) {
        act_worker(out, HV_JA_JOIN_REFUSED, w, HV_ENOTFOUND, "worker %llu of job %llu is %s",
                   (unsigned long long)w->id, (unsigned long long)j->id,
                   hv_wk_state_name(w->state));
        return;
    }
    if (w->removed) {
        if (w->leaving && j->round_open && w->member_gen == closed_gen(j) && !completing(j)) {
            /* Leaving a drained node: it waits until the round without it has closed. */
            w->joined = 1;
            evaluate(j, now, out);
            return;
        }
        w->joined = 0;
        act_worker(out, HV_JA_JOIN_REMOVED, w, HV_OK, "worker %llu was removed from job %llu",
                   (unsigned long long)w->id, (unsigned long long)j->id);
        return;
    }
    if (w->done) {
        act_worker(out, HV_JA_JOIN_REFUSED, w, HV_ESTATE,
                   "worker %llu already reported Done in generation %u", (unsigned long long)w->id,
                   w->member_gen);
        return;
    }
    int resend = !j->round_open && w->member_gen > 0 && w->member_gen == j->generation &&
                 last_gen < j->generation;
    if (completing(j) && !resend) {
        /* Its last collectives failed after others finished, or it is a newcomer: there is no
         * round to join. It leaves (neither success nor failure). */
        w->joined = 0;
        w->removed = 1;
        mark(w);
        act_worker(out, HV_JA_JOIN_REMOVED, w, HV_OK,
                   "job %llu is completing: its training finished on other workers",
                   (unsigned long long)j->id);
        check_success(j, out);
        return;
    }
    if (!j->round_open) {
        if (w->member_gen == 0 && j->resume_gen > j->generation) {
            /* A preempted job's new workers: the resume round (hv_jm_preempt). */
            char reason[240];
            snprintf(reason, sizeof(reason),
                     "resume after a preemption: new workers load the copy of generation %u, "
                     "commit %llu",
                     hv_jm_copy_tier(j) == HV_COPY_TIER_DURABLE ? j->durable.generation
                                                                : j->copy.generation,
                     (unsigned long long)(hv_jm_copy_tier(j) == HV_COPY_TIER_DURABLE
                                              ? j->durable.commit
                                              : j->copy.commit));
            open_round(j, reason, HV_EV_RESUME, 1, now, out);
        } else if (w->member_gen == 0) {
            char reason[240];
            snprintf(reason, sizeof(reason), "grow: %s",
                     j->grow_reason[0] ? j->grow_reason : "new workers joined");
            int first = closed_gen(j) == 0;
            open_round(j, first ? "start" : reason, first ? HV_EV_START : HV_EV_GROW, 0, now, out);
        } else if (resend) {
            /* It missed the reply of the round it belongs to (the head restarted, or the call
             * broke): answer it again. */
            act_worker(out, HV_JA_RESEND, w, HV_OK, "generation %u", j->generation);
            return;
        } else if (!j->p.elastic) {
            act_worker(out, HV_JA_JOIN_REFUSED, w, HV_ESTATE,
                       "job %llu is not elastic: its membership cannot change "
                       "(did a collective fail?)",
                       (unsigned long long)j->id);
            return;
        } else {
            char reason[200];
            snprintf(reason, sizeof(reason), "worker %llu on %s re-joined: its data plane failed",
                     (unsigned long long)w->id, node_name(j, w->node_id));
            open_round(j, reason, HV_EV_DATA_PLANE, 1, now, out);
        }
    }
    if (!j->round_open || !live(w) || w->removed) {
        if (!hv_job_state_terminal(j->state) && live(w) && w->removed) {
            act_worker(out, HV_JA_JOIN_REMOVED, w, HV_OK, "worker %llu was removed",
                       (unsigned long long)w->id);
        } else if (hv_job_state_terminal(j->state)) {
            act_worker(out, HV_JA_JOIN_REFUSED, w, HV_ESTATE, "job %llu has ended: %s",
                       (unsigned long long)j->id, j->reason);
        }
        return;
    }
    w->joined = 1;
    evaluate(j, now, out);
}

void hv_jm_note_redone(hv_jm_job_t *j, uint64_t samples) {
    if (samples > j->round_redone) {
        j->round_redone = samples;
    }
}

void hv_jm_note_commit(hv_jm_job_t *j) { j->commit_seen = 1; }

void hv_jm_join_gone(hv_jm_job_t *j, hv_jm_worker_t *w) {
    (void)j;
    w->joined = 0;
}

/* The first Done of an elastic job: the round that may be open never forms; its joiners, and
 * newcomers that hold nothing, leave. The members still training finish in their round. */
static void begin_completing(hv_jm_job_t *j, const hv_jm_worker_t *first, hv_jm_out_t *out) {
    uint32_t cg = closed_gen(j);
    act_event(out, "job.note", NULL,
              "job %llu is completing: rank %u on %s finished its training in generation %u%s",
              (unsigned long long)j->id, first->rank, node_name(j, first->node_id), cg,
              j->round_open ? "; the open round will not form" : "");
    release_leavers(j, "job is completing: its training finished on other workers", out);
    for (size_t i = 0; i < j->nw; i++) {
        hv_jm_worker_t *w = j->w[i];
        if (!live(w) || w->removed || w->done || (w->member_gen == cg && !w->joined)) {
            continue;
        }
        w->removed = 1;
        mark(w);
        if (w->joined) {
            w->joined = 0;
            act_worker(out, HV_JA_JOIN_REMOVED, w, HV_OK,
                       "job %llu is completing: its training finished on other workers",
                       (unsigned long long)j->id);
        }
        if (w->member_gen != cg) {
            job_kill(w, "its job is completing", out);
        }
    }
}

hv_err hv_jm_done(hv_jm_job_t *j, hv_jm_worker_t *w, uint32_t gen, uint64_t now, hv_jm_out_t *out) {
    /* A member of the last closed round that finished its training in it counts, even if a
     * newer round opened meanwhile or its node drained (it was removed from that round). */
    if (hv_job_state_terminal(j->state) || !live(w) || (w->removed && !j->p.elastic) ||
        w->member_gen == 0 || w->member_gen != closed_gen(j) ||
        (gen != 0 && gen != w->member_gen)) {
        return HV_ESTATE;
    }
    if (!w->done) {
        int first = !completing(j);
        w->done = 1;
        w->joined = 0;
        mark(w);
        if (first && j->p.elastic) {
            begin_completing(j, w, out);
        }
        evaluate(j, now, out);
    }
    return HV_OK;
}

/* Stops the job's workers on node_id (removed, killed), e.g. after a strike. */
static void stop_node(hv_jm_job_t *j, uint64_t node_id, const char *why, hv_jm_out_t *out) {
    for (size_t i = 0; i < j->nw; i++) {
        hv_jm_worker_t *w = j->w[i];
        if (w->node_id != node_id || !live(w) || w->removed) {
            continue;
        }
        w->removed = 1;
        mark(w);
        if (w->joined) {
            w->joined = 0;
            act_worker(out, HV_JA_JOIN_REMOVED, w, HV_OK, "%s", why);
        }
        job_kill(w, why, out);
    }
}

/* Takes w out of the job, make before break, for a drain or a shrink (why: for its log): a member
 * of the closed generation cg leaves once the round without it has closed; a worker waiting to
 * join is told it was removed; one that was never a member holds no state and is stopped now.
 * Returns 1 when w was a member (it has state to hand over), 0 otherwise. */
static int take_out(hv_jm_worker_t *w, uint32_t cg, const char *why, hv_jm_out_t *out) {
    w->removed = 1;
    mark(w);
    if (cg > 0 && w->member_gen == cg) {
        w->leaving = 1;
    } else if (w->joined) {
        w->joined = 0;
        act_worker(out, HV_JA_JOIN_REMOVED, w, HV_OK, "%s", why);
    }
    if (w->member_gen == 0) {
        job_kill(w, why, out);
        return 0;
    }
    return 1;
}

/* A draining node's members of generation cg stay as evicted members (until others hold the
 * state, or until `until` when not 0); its workers that are not members yet hold nothing and
 * are stopped now. */
static void keep_members(hv_jm_job_t *j, uint64_t node_id, uint32_t cg, uint64_t until,
                         hv_jm_out_t *out) {
    j->release_due = 0; /* they leave after the next round closes, not after the last one */
    for (size_t i = 0; i < j->nw; i++) {
        hv_jm_worker_t *w = j->w[i];
        if (w->node_id != node_id || !live(w) || w->removed) {
            continue;
        }
        if (w->member_gen == cg) {
            w->evict = 1;
            w->evict_until = until;
        } else {
            w->removed = 1;
            mark(w);
            job_kill(w, "its node is draining", out);
        }
    }
}

void hv_jm_drain(hv_jm_job_t *j, uint64_t node_id, const char *why, uint64_t hold_until,
                 uint64_t now, hv_jm_out_t *out) {
    if (hv_job_state_terminal(j->state)) {
        return;
    }
    if (completing(j)) {
        /* Its members there are finishing (begin_completing stopped everyone else): no round,
         * they end on their own or with the node. */
        return;
    }
    size_t members = 0, here = 0, holders_elsewhere = 0, members_here = 0;
    uint32_t cg = closed_gen(j);
    for (size_t i = 0; i < j->nw; i++) {
        const hv_jm_worker_t *w = j->w[i];
        if (cg > 0 && w->member_gen == cg && live(w) && !w->removed && !w->evict) {
            /* A member on a node suspected lost holds the state for nobody. */
            holders_elsewhere += w->node_id != node_id && !suspected(w);
            members_here += w->node_id == node_id;
        }
    }
    if (j->p.elastic && members_here > 0 && holders_elsewhere == 0) {
        /* Removing them would lose the training state: they stay as its holders until workers
         * elsewhere (placed as the job grows) have joined a round and received it. */
        /* With a notice's time, bounded by it: once others hold the state they may stay as
         * members until replacements come (leave_kept). */
        keep_members(j, node_id, cg, hold_until > now ? hold_until : 0, out);
        act_event(out, "job.note", NULL,
                  "job %llu keeps its %zu workers on draining node %s until workers elsewhere "
                  "hold the training state",
                  (unsigned long long)j->id, members_here, node_name(j, node_id));
        evaluate(j, now, out);
        return;
    }
    if (j->p.elastic && members_here > 0 && hold_until > now) {
        /* Make before break: the members stay (and count as missing, so the job wants and the
         * autoscaler buys their replacements) until a round with the replacements has formed,
         * or until hold_until. */
        keep_members(j, node_id, cg, hold_until, out);
        act_event(out, "job.note", NULL,
                  "job %llu keeps its %zu workers on node %s until replacements hold the "
                  "training state, for at most %.1f s",
                  (unsigned long long)j->id, members_here, node_name(j, node_id),
                  (double)(hold_until - now) / 1000.0);
        evaluate(j, now, out);
        return;
    }
    for (size_t i = 0; i < j->nw; i++) {
        hv_jm_worker_t *w = j->w[i];
        if (w->node_id != node_id || !live(w) || w->removed) {
            continue;
        }
        here++;
        if (!j->p.elastic) {
            continue;
        }
        members += take_out(w, cg, "its node is draining", out);
    }
    if (here == 0) {
        return;
    }
    if (!j->p.elastic) {
        act_event(out, "job.note", NULL,
                  "job %llu is not elastic: its %zu workers stay on draining node %s until "
                  "they end or the node stops",
                  (unsigned long long)j->id, here, node_name(j, node_id));
        return;
    }
    if (members == 0) {
        evaluate(j, now, out);
        return;
    }
    char reason[300];
    snprintf(reason, sizeof(reason), "drain: %s", why);
    open_round(j, reason, HV_EV_DRAIN, 0, now, out);
}

/* ---- shrink: the head's fleet policy gives some of an elastic job's workers to another job -- */

/* 1 when id is one of ids[0..n). */
static int id_in(const uint64_t *ids, size_t n, uint64_t id) {
    for (size_t k = 0; k < n; k++) {
        if (ids[k] == id) {
            return 1;
        }
    }
    return 0;
}

hv_err hv_jm_shrink(hv_jm_job_t *j, const uint64_t *ids, size_t n, const char *why, uint64_t now,
                    hv_jm_out_t *out) {
    if (!j->p.elastic || hv_job_state_terminal(j->state) || j->state != HV_JOB_RUNNING ||
        completing(j) || j->round_open || n == 0) {
        return HV_ESTATE;
    }
    uint32_t cg = closed_gen(j);
    size_t keep = 0, holders = 0;
    for (size_t i = 0; i < j->nw; i++) {
        const hv_jm_worker_t *w = j->w[i];
        if (!live(w) || w->removed || w->evict) {
            continue;
        }
        if (!id_in(ids, n, w->id)) {
            keep++;
            holders += cg > 0 && w->member_gen == cg && !suspected(w);
        }
    }
    /* Every named worker must be live and still in the job; the rest must stay within the
     * bounds and hold the state (make before break: a holder leaves once the round without it
     * has closed). */
    for (size_t k = 0; k < n; k++) {
        const hv_jm_worker_t *w = NULL;
        for (size_t i = 0; i < j->nw && w == NULL; i++) {
            w = j->w[i]->id == ids[k] ? j->w[i] : NULL;
        }
        if (w == NULL || !live(w) || w->removed || w->evict) {
            return HV_ENOTFOUND;
        }
    }
    if (keep < j->p.min_np || keep == 0 || holders == 0) {
        return HV_ESTATE;
    }
    for (size_t i = 0; i < j->nw; i++) {
        if (id_in(ids, n, j->w[i]->id)) {
            take_out(j->w[i], cg, "the head gave its slot to another job", out);
        }
    }
    char reason[300];
    snprintf(reason, sizeof(reason), "shrink: %s",
             why != NULL && why[0] ? why : "the head's fleet");
    open_round(j, reason, HV_EV_SHRINK, 0, now, out);
    return HV_OK;
}

/* ---- preemption: stopped for another job, resumed later from the copy ----------------------- */

int hv_jm_preempted(const hv_jm_job_t *j) {
    return j->state == HV_JOB_PENDING && j->resume_gen > j->generation;
}

hv_err hv_jm_preempt_begin(hv_jm_job_t *j, const char *why, uint64_t now, uint64_t until,
                           hv_jm_out_t *out) {
    if (!j->p.elastic || j->state != HV_JOB_RUNNING || j->ending || completing(j) ||
        j->round_open || j->preempt_until != 0 || hv_jm_copy_tier(j) == HV_COPY_TIER_NONE ||
        closed_gen(j) == 0) {
        return HV_ESTATE;
    }
    if (j->resets + 2 > j->p.max_resets) {
        return HV_ESTATE; /* the stop's round and the resume's: it keeps running instead */
    }
    char reason[300];
    snprintf(reason, sizeof(reason), "preempt: %s",
             why != NULL && why[0] ? why : "the head's fleet");
    j->preempt_until = until > now ? until : now + 1;
    j->preempt_copy = j->copy;
    open_round(j, reason, HV_EV_PREEMPT, 0, now, out);
    if (!j->round_open) {
        j->preempt_until = 0; /* the job ended (--max-resets) or is completing */
        return HV_ESTATE;
    }
    return HV_OK;
}

int hv_jm_preempt_due(const hv_jm_job_t *j, uint64_t now) {
    if (j->preempt_until == 0 || j->state != HV_JOB_RUNNING) {
        return 0;
    }
    uint32_t cg = closed_gen(j);
    size_t members = 0, joined = 0;
    for (size_t i = 0; i < j->nw; i++) {
        const hv_jm_worker_t *w = j->w[i];
        if (cg > 0 && w->member_gen == cg && live(w) && !w->removed) {
            members++;
            joined += w->joined != 0;
        }
    }
    if (members > 0 && joined == members) {
        return 1;
    }
    return now >= j->preempt_until ? 2 : 0;
}

hv_err hv_jm_preempt(hv_jm_job_t *j, const char *why, uint64_t now, hv_jm_out_t *out) {
    hv_copy_tier_t tier = hv_jm_copy_tier(j);
    int stopping = j->preempt_until != 0;
    if (!j->p.elastic || j->state != HV_JOB_RUNNING || j->ending || completing(j) ||
        (j->round_open && !stopping) || tier == HV_COPY_TIER_NONE) {
        return HV_ESTATE;
    }
    if (!stopping && j->resets + 1 > j->p.max_resets) {
        return HV_ESTATE; /* its resume would fail it: it keeps running instead */
    }
    j->preempt_until = 0;
    j->preempt_copy = (hv_jm_copy_t){0};
    if (j->round_open) {
        /* The preempt round never forms: the resume round comes after it. */
        j->round_open = 0;
        act_event(out, "job.note", NULL, "job %llu: generation %u does not form: the job stops",
                  (unsigned long long)j->id, j->generation);
    }
    const char *text = why != NULL && why[0] ? why : "preempted by the head's fleet";
    for (size_t i = 0; i < j->nw; i++) {
        hv_jm_worker_t *w = j->w[i];
        if (!live(w)) {
            continue;
        }
        /* Neither success nor failure: the head took it out (a member's state is in the copy). */
        w->removed = 1;
        w->leaving = 0;
        w->evict = 0;
        mark(w);
        if (w->joined) {
            w->joined = 0;
            act_worker(out, HV_JA_JOIN_REMOVED, w, HV_OK, "%s", text);
        }
        job_kill(w, text, out);
    }
    /* The round after the last one is the resume round: it forms with new workers only, and its
     * rank 0 loads the copy chosen then (hv_jm_round_copy). Waiting, the job is pending again. */
    j->state = HV_JOB_PENDING;
    j->resume_gen = j->generation + 1;
    j->resumes++;
    j->resumed_from = tier;
    j->failures[0] = '\0';
    j->dirty = 1;
    (void)now;
    return HV_OK;
}

/* ---- suspicion: losses noticed from evidence, not only from silence ------------------------- */

void hv_jm_suspect(hv_jm_job_t *j, uint64_t node_id, const char *why, uint64_t until, uint64_t now,
                   hv_jm_out_t *out) {
    if (hv_job_state_terminal(j->state)) {
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < j->nw; i++) {
        hv_jm_worker_t *w = j->w[i];
        if (w->node_id != node_id || !live(w)) {
            continue;
        }
        if (!suspected(w) || until < w->suspect_until) {
            w->suspect_until = until != 0 ? until : 1; /* the first evidence counts */
        }
        n++;
    }
    if (n == 0) {
        return;
    }
    act_event(out, "job.note", NULL,
              "job %llu: its %zu workers on node %s are suspected lost (%s); a round waits for "
              "them %.1f s at most",
              (unsigned long long)j->id, n, node_name(j, node_id), why ? why : "no reason given",
              until > now ? (double)(until - now) / 1000.0 : 0.0);
    evaluate(j, now, out);
}

void hv_jm_silent(hv_jm_job_t *j, uint64_t node_id, const char *why, uint64_t until, uint64_t now,
                  hv_jm_out_t *out) {
    hv_jm_suspect(j, node_id, why, until, now, out);
    if (!j->p.elastic || hv_job_state_terminal(j->state) || j->round_open || completing(j)) {
        return;
    }
    uint32_t cg = closed_gen(j);
    size_t n = 0;
    for (size_t i = 0; i < j->nw; i++) {
        const hv_jm_worker_t *w = j->w[i];
        n += cg > 0 && w->member_gen == cg && w->node_id == node_id && live(w) && !w->removed;
    }
    if (n == 0) {
        return;
    }
    /* The ring hangs on the silent node until the peer timeout: the others must roll back now. */
    char reason[300];
    snprintf(reason, sizeof(reason), "failure: node %s fell silent on the data plane (%.200s)",
             node_name(j, node_id), why ? why : "no reason given");
    open_round(j, reason, HV_EV_DATA_PLANE, 1, now, out);
}

size_t hv_jm_give_up(const hv_jm_job_t *j, uint64_t now, hv_jm_worker_t **out, size_t cap) {
    uint32_t cg = closed_gen(j);
    if (!j->p.elastic || hv_job_state_terminal(j->state) || completing(j) || cg == 0) {
        return 0;
    }
    size_t n = 0;
    for (size_t i = 0; i < j->nw; i++) {
        hv_jm_worker_t *w = j->w[i];
        /* Who may still carry the state on: live members not stopped (leaving ones too, they
         * may still finish). One of them not past its grace, and nobody is given up. */
        if (w->member_gen != cg || !live(w) || w->kill_sent || (w->removed && !w->leaving)) {
            continue;
        }
        if (!waived(w, now)) {
            return 0;
        }
        if (n < cap) {
            out[n] = w;
        }
        n++;
    }
    if (n == 0 || n > cap) {
        return 0;
    }
    /* Only when the loss would be resumed from a copy or restarted: a job that would fail waits
     * for the lease, which may yet bring its node back. */
    hv_jm_loss_t in = {.elastic = 1,
                       .has_copy = hv_jm_copy_tier(j) != HV_COPY_TIER_NONE,
                       .committed = j->commit_seen,
                       .resets = j->resets,
                       .max_resets = j->p.max_resets};
    return hv_jm_loss_decide(&in, NULL, 0) == HV_JM_LOSS_FAIL ? 0 : n;
}

hv_err hv_jm_fence(const hv_jm_job_t *j, const hv_jm_worker_t *w, uint32_t gen, char *err,
                   size_t len) {
    if (!live(w)) {
        snprintf(err, len,
                 "worker %llu of job %llu is %s at the head: it may no longer act for the job "
                 "(fenced)",
                 (unsigned long long)w->id, (unsigned long long)j->id, hv_wk_state_name(w->state));
        return HV_EPERM;
    }
    if (gen != 0 && j->resume_gen != 0 && gen < j->resume_gen && w->member_gen < j->resume_gen) {
        snprintf(err, len,
                 "worker %llu of job %llu speaks for generation %u, but the job was resumed from "
                 "a copy in generation %u (fenced)",
                 (unsigned long long)w->id, (unsigned long long)j->id, gen, j->resume_gen);
        return HV_EPERM;
    }
    return HV_OK;
}

void hv_jm_heard(hv_jm_job_t *j, uint64_t node_id, uint64_t now, hv_jm_out_t *out) {
    size_t n = 0;
    for (size_t i = 0; i < j->nw; i++) {
        hv_jm_worker_t *w = j->w[i];
        if (w->node_id == node_id && suspected(w)) {
            w->suspect_until = 0;
            n += live(w) && !w->removed;
        }
    }
    if (n > 0 && !hv_job_state_terminal(j->state)) {
        act_event(out, "job.note", NULL,
                  "job %llu: node %s is back; its %zu workers are no longer suspected",
                  (unsigned long long)j->id, node_name(j, node_id), n);
    }
    (void)now;
}

void hv_jm_tick(hv_jm_job_t *j, uint64_t now, hv_jm_out_t *out) {
    if (j->release_due) {
        j->release_due = 0;
        leave_kept(j, 0, now, out);
    }
    leave_kept(j, 1, now, out);
    evaluate(j, now, out);
}

void hv_jm_exit_what(char *buf, size_t len, const char *who, int exit_code, int term_signal,
                     const char *reason) {
    if (reason != NULL && reason[0] != '\0' && exit_code < 0 && term_signal == 0) {
        snprintf(buf, len, "%s could not run: %s", who, reason);
    } else if (term_signal != 0) {
        const char *name = sigabbrev_np(term_signal);
        snprintf(buf, len, "%s was killed by signal SIG%s", who, name ? name : "?");
    } else {
        snprintf(buf, len, "%s exited with status %d", who, exit_code);
    }
}

hv_err hv_jm_copy_check(const hv_jm_job_t *j, const hv_jm_worker_t *w, uint32_t generation,
                        uint64_t commit, char *err, size_t errlen) {
    if (hv_jm_fence(j, w, generation, err, errlen) != HV_OK) {
        return HV_EPERM;
    }
    if (!hv_wk_state_active(w->state) || w->removed || w->member_gen != generation ||
        w->rank != 0) {
        snprintf(err, errlen,
                 "worker %llu is not rank 0 of generation %u of job %llu: only that member "
                 "sends copies",
                 (unsigned long long)w->id, generation, (unsigned long long)j->id);
        return HV_EPERM;
    }
    const hv_jm_copy_t *c = &j->copy;
    if (c->commit > 0 &&
        (generation < c->generation || (generation == c->generation && commit <= c->commit))) {
        snprintf(err, errlen,
                 "the head keeps a newer copy (generation %u, commit %llu) than generation %u, "
                 "commit %llu",
                 c->generation, (unsigned long long)c->commit, generation,
                 (unsigned long long)commit);
        return HV_ESTATE;
    }
    return HV_OK;
}

uint32_t hv_jm_base_rank(const hv_jm_job_t *j) {
    uint32_t n = 0;
    for (size_t i = 0; i < j->nw; i++) {
        n += hv_wk_state_active(j->w[i]->state) && !j->w[i]->removed;
    }
    return n;
}

void hv_jm_restarted(hv_jm_job_t *j, uint64_t now) {
    /* Whether a step was committed was known to the old process only: assume one was. */
    j->commit_seen = 1;
    if (!j->round_open) {
        return;
    }
    uint64_t dl = now + (uint64_t)j->p.rdzv_timeout_s * 1000u;
    if (j->round_deadline_ms < dl) {
        j->round_deadline_ms = dl;
    }
    if (j->round_fail_at_ms < dl) {
        j->round_fail_at_ms = dl;
    }
}

int hv_jm_resize(const hv_jm_params_t *p, uint32_t size, uint32_t *accepted) {
    hv_jm_params_t next = *p;
    next.target = size;
    *accepted = hv_jm_target(&next);
    return *accepted != hv_jm_target(p);
}

uint64_t hv_jm_kill_deadline(uint64_t now, uint32_t grace_ms) {
    return now + grace_ms + HV_JM_KILL_SLACK_MS;
}

int hv_jm_kill_overdue(uint64_t kill_deadline, uint64_t now) {
    return kill_deadline != 0 && now > kill_deadline;
}

uint32_t hv_jm_target(const hv_jm_params_t *p) {
    if (p->target == 0) {
        return p->max_np;
    }
    return p->target < p->min_np ? p->min_np : p->target > p->max_np ? p->max_np : p->target;
}

uint32_t hv_jm_wants(const hv_jm_job_t *j) {
    if (!j->p.elastic || j->ending || (j->state != HV_JOB_RUNNING && j->state != HV_JOB_PLACING)) {
        return 0;
    }
    uint32_t n = 0;
    for (size_t i = 0; i < j->nw; i++) {
        const hv_jm_worker_t *w = j->w[i];
        if (w->done) {
            return 0; /* training is finishing */
        }
        n += live(w) && !w->removed && !w->evict;
    }
    uint32_t t = hv_jm_target(&j->p);
    if (closed_gen(j) == 0) {
        /* It started with what was free and grows after its first round, unless it has fewer
         * than --min-np left to form that round: then it asks again as a pending job does. */
        if (n >= j->p.min_np) {
            return 0;
        }
        t = t > j->p.np ? t : j->p.np;
    }
    return t > n ? t - n : 0;
}
