/* svc_jobs: see svc_jobs.h. */
#include "svc_jobs.h"

#include "views.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hv.pb-c.h"
#include "log.h"
#include "mem.h"
#include "sha256.h"
#include "util.h"
#include "validate.h"

#define WATCH_WINDOW 8                 /* messages a watcher may have queued */
#define WATCH_BATCH_LINES 1024         /* log lines per message at most */
#define WATCH_BATCH_BYTES (256u << 10) /* log text per message at most */
#define LOG_MAX_LINE 16384
#define NODE_BL_MAX 32 /* blacklist entries shown per node */
#define LIST_JOBS_DEFAULT 100
/* Bytes of views one ListJobs or ListNodes reply holds at most: half the message limit
 * (HV_RPC_MAX_MSG), so that the reply's framing and a view at its largest always fit. A page
 * ends early at this bound and its next_page_token continues the list. */
#define LIST_PAGE_BYTES (4u << 20)
#define VIEW_REASON_MAX 1024 /* bytes of a reason shown in a listed view */
#define HV_SVC_NS_MAX 257 /* namespaces a ListJobs reply holds at most (config.c: 256 + default) */

typedef struct watch_s {
    hv_svc_jobs_t *svc;
    hv_rpc_call_t *call;
    uint64_t job_id;
    int logs, events, follow;
    FILE *rf;             /* read handle on the job's log */
    uint64_t log_pos;     /* byte offset of the next line to read */
    uint64_t skip_lines;  /* lines still to skip (resume) */
    uint64_t event_after; /* last event seq sent */
    uint64_t sent_max;    /* the newest event seq it read from the store and sent (0: none) */
    int store_said;       /* this watcher was told the head cannot store its state */
    int finished;
    struct watch_s *next;
} watch_t;

struct hv_svc_jobs_s {
    const hv_head_config_t *cfg;
    hv_driver_t *d;
    watch_t *watchers;
};

/* ---- views ---------------------------------------------------------------------------------- */

/* Cut copies of strings for one reply. A view shows each stored string cut to its documented
 * bound (validate.h), so that rows stored before the bounds existed, or strings an agent sent,
 * never make a reply too large to send. Owned copies live here until clip_free. */
typedef struct clip_s {
    char **v;   /* owned copies */
    size_t n;   /* copies in v */
    size_t cap; /* room in v */
} clip_t;

/* s, or a copy of its first bytes ending in "..." when it is longer than max (cut at a UTF-8
 * character boundary); "" when s is NULL or memory runs out. */
static char *clip_str(clip_t *c, const char *s, size_t max) {
    if (s == NULL) {
        return "";
    }
    size_t n = strnlen(s, max + 1);
    if (n <= max) {
        return (char *)s;
    }
    size_t cut = max > 3 ? max - 3 : 0;
    while (cut > 0 && ((unsigned char)s[cut] & 0xc0) == 0x80) {
        cut--;
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        char **v = hv_realloc(c->v, cap * sizeof(*v));
        if (v == NULL) {
            return "";
        }
        c->v = v;
        c->cap = cap;
    }
    char *x = hv_malloc(cut + 4);
    if (x == NULL) {
        return "";
    }
    memcpy(x, s, cut);
    memcpy(x + cut, "...", 4);
    c->v[c->n++] = x;
    return x;
}

static void clip_free(clip_t *c) {
    for (size_t i = 0; i < c->n; i++) {
        hv_free(c->v[i]);
    }
    hv_free(c->v);
    memset(c, 0, sizeof(*c));
}

/* The bytes a view adds to a reply as one repeated field: the view, its length and its tag. */
static size_t field_size(size_t packed) { return packed + 11; }

/* The head's enums and the wire's count the same states and reasons (the wire's from 1: 0 is
 * UNSPECIFIED), so a state crosses as its value + 1 and a reason code unchanged. */
_Static_assert((int)HVPB__V1__JOB_STATE__JOB_STATE_PENDING == (int)HV_JOB_PENDING + 1 &&
                   (int)HVPB__V1__JOB_STATE__JOB_STATE_CANCELLED == (int)HV_JOB_CANCELLED + 1 &&
                   HV_JOB__COUNT == 6,
               "JobState follows hv_job_state_t");
_Static_assert((int)HVPB__V1__WORKER_STATE__WORKER_STATE_STARTING == (int)HV_WK_STARTING + 1 &&
                   (int)HVPB__V1__WORKER_STATE__WORKER_STATE_LEFT == (int)HV_WK_LEFT + 1 &&
                   HV_WK__COUNT == 6,
               "WorkerState follows hv_wk_state_t");
_Static_assert((int)HVPB__V1__NODE_STATE__NODE_STATE_ALIVE == (int)HV_NODE_ALIVE + 1 &&
                   (int)HVPB__V1__NODE_STATE__NODE_STATE_DRAINING == (int)HV_NODE_DRAINING + 1 &&
                   (int)HVPB__V1__NODE_STATE__NODE_STATE_DEAD == (int)HV_NODE_DEAD + 1 &&
                   HV_NODE__COUNT == 3,
               "NodeState follows hv_node_state_t");
_Static_assert((int)HVPB__V1__EVENT_REASON__EVENT_REASON_START == (int)HV_EV_START &&
                   (int)HVPB__V1__EVENT_REASON__EVENT_REASON_PREEMPT == (int)HV_EV_PREEMPT &&
                   HV_EV__COUNT == 16,
               "EventReason follows hv_ev_reason_t");

static Hvpb__V1__JobState job_state_code(hv_job_state_t st) {
    return (unsigned)st < HV_JOB__COUNT ? (Hvpb__V1__JobState)(st + 1)
                                        : HVPB__V1__JOB_STATE__JOB_STATE_UNSPECIFIED;
}

static Hvpb__V1__EventReason reason_code(uint32_t r) {
    return r < HV_EV__COUNT ? (Hvpb__V1__EventReason)r
                            : HVPB__V1__EVENT_REASON__EVENT_REASON_UNSPECIFIED;
}

/* A job's newest round: "" before the first, "open" while it gathers, "closed", or "not formed"
 * when the job ended while it gathered; *code gets the same as a code. */
static const char *round_state(uint32_t generation, int open, hv_job_state_t st,
                               Hvpb__V1__RoundState *code) {
    if (generation == 0) {
        *code = HVPB__V1__ROUND_STATE__ROUND_STATE_NONE;
        return "";
    }
    if (!open) {
        *code = HVPB__V1__ROUND_STATE__ROUND_STATE_CLOSED;
        return "closed";
    }
    if (hv_job_state_terminal(st)) {
        *code = HVPB__V1__ROUND_STATE__ROUND_STATE_NOT_FORMED;
        return "not formed";
    }
    *code = HVPB__V1__ROUND_STATE__ROUND_STATE_OPEN;
    return "open";
}

/* An event message, borrowing row's strings. */
static void event_from_row(Hvpb__V1__Event *e, const hv_event_row_t *row) {
    hvpb__v1__event__init(e);
    e->seq = row->seq;
    e->time_ms = row->time_ms;
    e->job_id = row->job_id;
    e->node_id = row->node_id;
    e->kind = row->kind;
    e->message = row->message;
    e->data = row->data;
    e->generation = row->f.generation;
    e->reason = reason_code(row->f.reason);
    e->node = row->node != NULL ? row->node : "";
    e->worker_id = row->f.worker_id;
    e->rank = row->f.rank;
    e->duration_ms = row->f.duration_ms;
    e->job_state = row->f.job_state <= HV_JOB__COUNT ? (Hvpb__V1__JobState)row->f.job_state
                                                     : HVPB__V1__JOB_STATE__JOB_STATE_UNSPECIFIED;
    e->rollback = row->f.rollback;
}

/* A JobView of j; the arrays are allocated into *scratch (free with view_free). Strings are
 * borrowed from j, which must not change until the view is sent. */
typedef struct view_scratch_s {
    Hvpb__V1__WorkerView *wv;
    Hvpb__V1__WorkerView **wp;
    Hvpb__V1__JobSpec *spec;
    clip_t clip;                    /* the view's cut strings */
    Hvpb__V1__StateCopyRef copy;    /* the newest state copy (v->copy points here) */
    Hvpb__V1__StateCopyRef durable; /* the durable tier's (v->durable_copy) */
    Hvpb__V1__SizeThroughput tput[HV_DRV_TPUT_SIZES]; /* v->throughput's */
    Hvpb__V1__SizeThroughput *tputp[HV_DRV_TPUT_SIZES];
} view_scratch_t;

/* v->throughput from a job's table s[0..n) (at most HV_DRV_TPUT_SIZES), in m/p. */
static void view_tput(Hvpb__V1__JobView *v, const hv_tput_sample_t *s, size_t n,
                      Hvpb__V1__SizeThroughput *m, Hvpb__V1__SizeThroughput **p) {
    v->n_throughput = 0;
    for (size_t i = 0; i < n && i < HV_DRV_TPUT_SIZES; i++) {
        hvpb__v1__size_throughput__init(&m[i]);
        m[i].size = s[i].size;
        m[i].steps_per_s = s[i].seconds > 0 ? s[i].work / s[i].seconds : 0;
        m[i].seconds = s[i].seconds;
        p[v->n_throughput++] = &m[i];
    }
    v->throughput = v->n_throughput > 0 ? p : NULL;
}

static void view_fill(hv_svc_jobs_t *s, const hv_djob_t *j, Hvpb__V1__JobView *v,
                      view_scratch_t *sc) {
    memset(sc, 0, sizeof(*sc));
    hvpb__v1__job_view__init(v);
    const hv_jm_job_t *m = &j->jm;
    v->job_id = m->id;
    v->name = clip_str(&sc->clip, j->name, HV_JOB_NAME_MAX);
    v->state = (char *)hv_job_state_name(m->state);
    v->state_code = job_state_code(m->state);
    v->np = j->np;
    v->reason = clip_str(&sc->clip, m->reason, VIEW_REASON_MAX);
    v->submitted_ms = j->submitted_ms;
    v->started_ms = j->started_ms;
    v->ended_ms = j->ended_ms;
    v->resets = m->resets;
    v->min_np = m->p.min_np;
    v->max_np = m->p.max_np;
    v->elastic = m->p.elastic;
    v->generation = m->generation;
    v->size = m->size;
    v->round_reason = clip_str(&sc->clip, m->round_reason, VIEW_REASON_MAX);
    v->round_reason_code = reason_code(m->round_code);
    v->round_state =
        (char *)round_state(m->generation, m->round_open, m->state, &v->round_state_code);
    v->max_resets = m->p.max_resets;
    v->check_every = m->p.check_every;
    v->resumes = m->resumes;
    v->resume_generation = m->resume_gen;
    v->priority = j->priority;
    v->preemptible = j->preemptible;
    v->fleet_target = j->fleet_target;
    v->fleet_reason = (char *)(j->fleet_decided ? hv_fl_reason_name(j->fleet_reason) : "");
    v->fleet_cause = j->fleet_cause;
    v->fleet_ms = j->fleet_ms;
    v->namespace_ = (char *)(j->ns[0] != '\0' ? j->ns : "default");
    view_tput(v, j->tput, j->ntput, sc->tput, sc->tputp);
    if (m->copy.commit > 0) {
        sc->copy = (Hvpb__V1__StateCopyRef)HVPB__V1__STATE_COPY_REF__INIT;
        sc->copy.generation = m->copy.generation;
        sc->copy.commit = m->copy.commit;
        sc->copy.stored_ms = m->copy.stored_ms;
        sc->copy.sha256 = "";
        v->copy = &sc->copy;
    }
    if (m->durable.commit > 0) {
        sc->durable = (Hvpb__V1__StateCopyRef)HVPB__V1__STATE_COPY_REF__INIT;
        sc->durable.generation = m->durable.generation;
        sc->durable.commit = m->durable.commit;
        sc->durable.stored_ms = m->durable.stored_ms;
        sc->durable.sha256 = "";
        v->durable_copy = &sc->durable;
    }
    v->resumed_from =
        m->resumed_from == HV_COPY_TIER_NONE ? "" : (char *)hv_copy_tier_name(m->resumed_from);
    v->copy_on_own_node = hv_driver_copy_on_own_node(s->d, j);
    v->copy_keeper = (char *)hv_driver_copy_keeper(s->d, j);
    sc->spec = hvpb__v1__job_spec__unpack(NULL, j->spec_len, j->spec);
    v->binary_digest = sc->spec && sc->spec->binary ? sc->spec->binary->digest : "";
    if (m->nw == 0) {
        return;
    }
    sc->wv = hv_calloc(m->nw, sizeof(*sc->wv));
    sc->wp = hv_calloc(m->nw, sizeof(*sc->wp));
    if (sc->wv == NULL || sc->wp == NULL) {
        return;
    }
    for (size_t i = 0; i < m->nw; i++) {
        hv_dworker_t *w = (hv_dworker_t *)m->w[i];
        Hvpb__V1__WorkerView *x = &sc->wv[i];
        hvpb__v1__worker_view__init(x);
        x->worker_id = w->jm.id;
        x->rank = w->jm.rank;
        x->node = (char *)hv_driver_worker_node(s->d, w);
        x->state = (char *)hv_wk_state_name(w->jm.state);
        x->state_code = (unsigned)w->jm.state < HV_WK__COUNT
                            ? (Hvpb__V1__WorkerState)(w->jm.state + 1)
                            : HVPB__V1__WORKER_STATE__WORKER_STATE_UNSPECIFIED;
        x->pid = w->pid;
        x->exit_code = w->jm.exit_code;
        x->term_signal = w->jm.term_signal;
        x->attempt = w->attempt;
        x->reason = clip_str(&sc->clip, w->reason, VIEW_REASON_MAX);
        x->generation = w->jm.member_gen;
        x->joined_generation = w->jm.joined_gen;
        x->done = w->jm.done;
        sc->wp[i] = x;
    }
    v->workers = sc->wp;
    v->n_workers = m->nw;
}

static void view_free(view_scratch_t *sc) {
    clip_free(&sc->clip);
    hv_free(sc->wv);
    hv_free(sc->wp);
    if (sc->spec != NULL) {
        hvpb__v1__job_spec__free_unpacked(sc->spec, NULL);
    }
}

/* ---- watch ---------------------------------------------------------------------------------- */

/* Parses "[rank]<stream>:text" in place. */
static int parse_log_line(char *line, Hvpb__V1__LogLine *out) {
    if (line[0] != '[') {
        return -1;
    }
    char *end;
    unsigned long rank = strtoul(line + 1, &end, 10);
    if (*end != ']') {
        return -1;
    }
    if (strncmp(end, "]<stdout>:", 10) == 0) {
        out->stream = 1;
    } else if (strncmp(end, "]<stderr>:", 10) == 0) {
        out->stream = 2;
    } else {
        return -1;
    }
    out->rank = (uint32_t)rank;
    out->text = end + 10;
    return 0;
}

/* Reads the next complete lines of the job's log into one LogBatch message (at most
 * WATCH_BATCH_LINES lines / WATCH_BATCH_BYTES of text) and sends batches while the watcher's
 * window allows. Returns 1 when the watcher has read everything written so far. */
static int watch_send_logs(watch_t *w, const hv_djob_t *j) {
    static char text[WATCH_BATCH_BYTES + LOG_MAX_LINE + 64];
    static Hvpb__V1__LogLine lines[WATCH_BATCH_LINES];
    static Hvpb__V1__LogLine *lp[WATCH_BATCH_LINES];
    clearerr(w->rf);
    if (fseeko(w->rf, (off_t)w->log_pos, SEEK_SET) != 0) {
        return 1;
    }
    while (hv_rpc_call_queued(w->call) < WATCH_WINDOW) {
        size_t n = 0, used = 0;
        uint64_t pos = w->log_pos;
        while (n < WATCH_BATCH_LINES && used < WATCH_BATCH_BYTES) {
            char *line = text + used;
            if (fgets(line, (int)(sizeof(text) - used), w->rf) == NULL) {
                break;
            }
            size_t len = strlen(line);
            if (len == 0 || line[len - 1] != '\n') {
                break; /* a partial line: the writer is mid-line; read it next time */
            }
            pos += len;
            line[len - 1] = '\0';
            if (w->skip_lines > 0) {
                w->skip_lines--;
                continue;
            }
            hvpb__v1__log_line__init(&lines[n]);
            if (parse_log_line(line, &lines[n]) != 0) {
                continue;
            }
            lp[n] = &lines[n];
            n++;
            used += len;
        }
        if (n > 0) {
            Hvpb__V1__LogBatch b = HVPB__V1__LOG_BATCH__INIT;
            Hvpb__V1__WatchItem it = HVPB__V1__WATCH_ITEM__INIT;
            b.lines = lp;
            b.n_lines = n;
            it.body_case = HVPB__V1__WATCH_ITEM__BODY_LOGS;
            it.logs = &b;
            if (hv_rpc_send(w->call, &it.base) != HV_OK) {
                return 0; /* not consumed: re-read from log_pos next time */
            }
        }
        if (pos == w->log_pos) {
            break; /* nothing new */
        }
        w->log_pos = pos;
        if (fseeko(w->rf, (off_t)w->log_pos, SEEK_SET) != 0) {
            break;
        }
    }
    uint64_t bytes = 0;
    return !hv_view_job_log(j, &bytes) || w->log_pos >= bytes;
}

static void watch_finish(watch_t *w, hv_err rc, const char *msg) {
    if (w->finished) {
        return;
    }
    w->finished = 1;
    if (msg != NULL) {
        hv_rpc_finish(w->call, rc, "%s", msg);
    } else {
        hv_rpc_finish(w->call, rc, NULL);
    }
}

/* Tells an events watcher when the head's state writes start failing and when they work again
 * (hv_driver_store_trouble): an event that is not stored (seq 0), kind "head.store.down" with
 * the head's words, or "head.store.up". The job's progress waits meanwhile, so without this a
 * client would wait in silence. */
static void watch_store_notice(hv_svc_jobs_t *s, watch_t *w, uint64_t job_id) {
    const char *trouble = hv_driver_store_trouble(s->d);
    if (!w->events || (trouble != NULL) == w->store_said ||
        hv_rpc_call_queued(w->call) >= WATCH_WINDOW) {
        return;
    }
    Hvpb__V1__Event e = HVPB__V1__EVENT__INIT;
    Hvpb__V1__WatchItem it = HVPB__V1__WATCH_ITEM__INIT;
    e.time_ms = hv_wall_ms();
    e.job_id = job_id;
    e.kind = trouble != NULL ? "head.store.down" : "head.store.up";
    char msg[700] = "";
    if (trouble != NULL) {
        snprintf(msg, sizeof(msg), "%s; job %llu waits for it", trouble,
                 (unsigned long long)job_id);
    }
    e.message = trouble != NULL ? msg : "the head stores its state again";
    it.body_case = HVPB__V1__WATCH_ITEM__BODY_EVENT;
    it.event = &e;
    if (hv_rpc_send(w->call, &it.base) == HV_OK) {
        w->store_said = trouble != NULL;
    }
}

/* Sends what the watcher has not seen yet, up to its window. */
static void watch_pump(hv_svc_jobs_t *s, watch_t *w) {
    if (w->finished || !hv_rpc_call_open(w->call)) {
        return;
    }
    const hv_djob_t *j = hv_driver_job(s->d, w->job_id);
    if (j == NULL) {
        watch_finish(w, HV_ENOTFOUND, "the job is gone");
        return;
    }
    watch_store_notice(s, w, j->jm.id);
    int caught_up = 1;
    /* Only ask the store when the job has events this watcher has not seen (the pump runs at
     * every send completion, so this check keeps log streaming off sqlite). */
    uint64_t newest = j->last_event_seq > w->sent_max ? j->last_event_seq : w->sent_max;
    int news = newest == 0 || w->event_after < newest;
    if (w->events && news && hv_rpc_call_queued(w->call) < WATCH_WINDOW) {
        hv_event_row_t *ev = NULL;
        size_t n = 0;
        if (hv_view_events(s->d, j->jm.id, w->event_after, 0, &ev, &n) == HV_OK) {
            for (size_t i = 0; i < n; i++) {
                if (hv_rpc_call_queued(w->call) >= WATCH_WINDOW) {
                    caught_up = 0;
                    break;
                }
                Hvpb__V1__Event e;
                Hvpb__V1__WatchItem it = HVPB__V1__WATCH_ITEM__INIT;
                event_from_row(&e, &ev[i]);
                it.body_case = HVPB__V1__WATCH_ITEM__BODY_EVENT;
                it.event = &e;
                if (hv_rpc_send(w->call, &it.base) != HV_OK) {
                    caught_up = 0;
                    break;
                }
                w->event_after = ev[i].seq;
                if (ev[i].seq > w->sent_max) {
                    w->sent_max = ev[i].seq;
                }
            }
            hv_view_events_free(ev, n);
        }
    } else if (w->events && news) {
        caught_up = 0;
    }
    if (w->logs && w->rf != NULL) {
        caught_up &= watch_send_logs(w, j);
    }
    if (!caught_up) {
        return;
    }
    /* An end is told once it is stored (a failing store holds it back, and the watcher was told
     * why by watch_store_notice). */
    if (hv_job_state_terminal(j->jm.state) && !j->jm.ending && hv_driver_job_settled(s->d, j)) {
        Hvpb__V1__JobView v;
        view_scratch_t sc;
        Hvpb__V1__WatchItem it = HVPB__V1__WATCH_ITEM__INIT;
        view_fill(s, j, &v, &sc);
        it.body_case = HVPB__V1__WATCH_ITEM__BODY_DONE;
        it.done = &v;
        hv_rpc_send(w->call, &it.base);
        view_free(&sc);
        watch_finish(w, HV_OK, NULL);
    } else if (!w->follow) {
        watch_finish(w, HV_OK, NULL);
    }
}

void hv_svc_jobs_changed(hv_svc_jobs_t *s, uint64_t job_id) {
    for (watch_t *w = s->watchers; w != NULL; w = w->next) {
        if (w->job_id == job_id) {
            watch_pump(s, w);
        }
    }
}

static void watch_drain(hv_rpc_call_t *c, void *ud) {
    watch_t *w = hv_rpc_call_data(c);
    if (w != NULL) {
        watch_pump(ud, w);
    }
}

static void watch_unlink(hv_svc_jobs_t *s, watch_t *w) {
    for (watch_t **p = &s->watchers; *p != NULL; p = &(*p)->next) {
        if (*p == w) {
            *p = w->next;
            break;
        }
    }
    if (w->rf != NULL) {
        fclose(w->rf);
        w->rf = NULL;
    }
}

void hv_svc_jobs_close(hv_svc_jobs_t *s) {
    for (watch_t *w = s->watchers; w != NULL; w = w->next) {
        watch_finish(w, HV_EUNAVAIL, "the head is shutting down");
    }
}

/* Admits one more Watch stream, or refuses it with RESOURCE_EXHAUSTED: each open stream holds the
 * job's log file (a descriptor) for as long as it lasts, so their number is bounded in all and
 * per client credential (limits.max_watch_streams, limits.max_watch_streams_per_client). */
static int watch_admit(hv_svc_jobs_t *s, hv_rpc_call_t *c, uint64_t job_id) {
    const char *mine = hv_rpc_call_bearer(c);
    uint32_t total = 0, same = 0;
    for (watch_t *w = s->watchers; w != NULL; w = w->next) {
        total++;
        same += strcmp(hv_rpc_call_bearer(w->call), mine) == 0;
    }
    uint32_t max_total = s->cfg->limits.max_watch_streams;
    uint32_t max_client = s->cfg->limits.max_watch_streams_per_client;
    if (max_client != 0 && same >= max_client) {
        HV_LOG(HV_LOG_WARN, "jobs", "HV-WATCH-LIMIT",
               "refused a Watch stream from %s: %u open with its credential, limit %u",
               hv_rpc_call_peer(c), same, max_client);
        hv_rpc_finish_later(
            c, HV_ETOOBIG,
            "too many watch streams for this client credential: %u open, limit %u "
            "(limits.max_watch_streams_per_client); job %llu is not affected: follow "
            "it later (hvctl logs -f %llu) or close other streams",
            same, max_client, (unsigned long long)job_id, (unsigned long long)job_id);
        return 0;
    }
    if (max_total != 0 && total >= max_total) {
        HV_LOG(HV_LOG_WARN, "jobs", "HV-WATCH-LIMIT",
               "refused a Watch stream from %s: %u open in all, limit %u", hv_rpc_call_peer(c),
               total, max_total);
        hv_rpc_finish_later(c, HV_ETOOBIG,
                            "too many watch streams: %u open, limit %u (limits.max_watch_streams); "
                            "job %llu is not affected: follow it later (hvctl logs -f %llu)",
                            total, max_total, (unsigned long long)job_id,
                            (unsigned long long)job_id);
        return 0;
    }
    return 1;
}

static void jobs_watch(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_jobs_t *s = ud;
    const Hvpb__V1__WatchRequest *req = (const Hvpb__V1__WatchRequest *)m;
    if (!watch_admit(s, c, req->job_id)) {
        return;
    }
    const hv_djob_t *j = hv_driver_job(s->d, req->job_id);
    if (j == NULL) {
        hv_rpc_finish(c, HV_ENOTFOUND, "no job %llu", (unsigned long long)req->job_id);
        return;
    }
    watch_t *w = hv_calloc(1, sizeof(*w));
    if (w == NULL) {
        hv_rpc_finish(c, HV_ENOMEM, "out of memory");
        return;
    }
    w->svc = s;
    w->call = c;
    w->job_id = req->job_id;
    w->logs = req->logs;
    w->events = req->events;
    w->follow = req->follow;
    w->skip_lines = req->log_offset;
    w->event_after = req->event_after;
    if (w->logs) {
        char path[4096];
        hv_driver_log_path(s->d, j->jm.id, path, sizeof(path));
        w->rf = fopen(path, "r");
        if (w->rf == NULL && (errno == EMFILE || errno == ENFILE)) {
            HV_LOG(HV_LOG_WARN, "jobs", "HV-LOG-READ", "cannot read %s: %s", path, strerror(errno));
            hv_free(w);
            hv_rpc_finish_later(c, HV_ETOOBIG,
                                "the head is out of file descriptors; try again when fewer "
                                "streams are open");
            return;
        }
        if (w->rf == NULL && errno != ENOENT) {
            HV_LOG(HV_LOG_WARN, "jobs", "HV-LOG-READ", "cannot read %s: %s", path, strerror(errno));
        }
    }
    w->next = s->watchers;
    s->watchers = w;
    hv_rpc_call_set_data(c, w);
    hv_rpc_call_set_drain_cb(c, watch_drain);
    watch_pump(s, w);
}

static void watch_done(hv_rpc_call_t *c, const hv_rpc_status_t *st, void *ud) {
    (void)st;
    watch_t *w = hv_rpc_call_data(c);
    if (w != NULL) {
        watch_unlink(ud, w);
        hv_free(w);
    }
}

/* ---- submit --------------------------------------------------------------------------------- */

/* After hv_validate_submit: are the job's artifacts here. HV_OK or HV_ESTATE with a message. */
static hv_err submit_check(hv_svc_jobs_t *s, const Hvpb__V1__JobSpec *spec, char *err, size_t len) {
    if (spec->binary != NULL && !hv_view_artifact_present(s->d, spec->binary->digest)) {
        snprintf(err, len, "binary %s (%s) has not been uploaded", spec->binary->name,
                 spec->binary->digest);
        return HV_ESTATE;
    }
    for (size_t i = 0; i < spec->n_files; i++) {
        const Hvpb__V1__FileRef *f = spec->files[i];
        if (!hv_view_artifact_present(s->d, f->digest)) {
            snprintf(err, len, "file %s (%s) has not been uploaded", f->name, f->digest);
            return HV_ESTATE;
        }
    }
    return HV_OK;
}

static void jobs_submit(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_jobs_t *s = ud;
    const Hvpb__V1__SubmitRequest *req = (const Hvpb__V1__SubmitRequest *)m;
    Hvpb__V1__JobSpec *spec = req->spec;
    char err[600];
    hv_err rc = hv_validate_submit(req, err, sizeof(err));
    if (rc == HV_OK) {
        rc = submit_check(s, spec, err, sizeof(err));
    }
    if (rc != HV_OK) {
        hv_rpc_finish(c, rc, "%s", err);
        return;
    }
    /* The default name is borrowed for packing only: the rpc layer frees the message. */
    char *given_name = spec->name;
    if (spec->name == NULL || spec->name[0] == '\0') {
        spec->name = spec->binary != NULL ? spec->binary->name : spec->command;
    }
    size_t len = hvpb__v1__job_spec__get_packed_size(spec);
    uint8_t *packed = hv_malloc(len ? len : 1);
    if (packed == NULL) {
        spec->name = given_name;
        hv_rpc_finish(c, HV_ENOMEM, "out of memory");
        return;
    }
    hvpb__v1__job_spec__pack(spec, packed);
    hv_job_submit_t sub = {.name = spec->name,
                           .spec = packed,
                           .spec_len = len,
                           .np = spec->np,
                           .elastic = spec->elastic,
                           .min_np = spec->min_np,
                           .max_np = spec->max_np,
                           .max_resets = spec->max_resets,
                           .max_resets_set = spec->max_resets_set,
                           .timeout_s = spec->timeout_s,
                           .slots_per_host = spec->slots_per_host,
                           .elastic_timeout_s = spec->elastic_timeout_s,
                           .check_every = spec->check_every,
                           .cooldown_set = spec->cooldown_set,
                           .cooldown_min_s = spec->cooldown_min_s,
                           .cooldown_max_s = spec->cooldown_max_s,
                           .target_np = spec->target_np,
                           .priority = spec->priority,
                           .priority_set = spec->priority_set,
                           .preemptible = spec->preemptible,
                           .ns = spec->namespace_};
    /* The artifacts it uses are stored with it (the history prunes those no kept job uses). */
    const char *uses[HV_STORE_SPEC_DIGESTS_MAX];
    size_t nuses = 0;
    if (spec->binary != NULL && spec->binary->digest != NULL && spec->binary->digest[0] != '\0') {
        uses[nuses++] = spec->binary->digest;
    }
    for (size_t i = 0; i < spec->n_files && nuses < HV_STORE_SPEC_DIGESTS_MAX; i++) {
        if (spec->files[i]->digest != NULL && spec->files[i]->digest[0] != '\0') {
            uses[nuses++] = spec->files[i]->digest;
        }
    }
    sub.artifacts = uses;
    sub.nartifacts = nuses;
    uint64_t job_id = 0;
    uint32_t np = 0;
    rc = hv_driver_submit(s->d, &sub, &job_id, &np, err, sizeof(err));
    HV_LOG(rc == HV_OK ? HV_LOG_NOTICE : HV_LOG_INFO, "jobs", "HV-JOB-SUBMIT",
           "job %llu (%s): %u workers%s%s", (unsigned long long)job_id, spec->name, np,
           rc == HV_OK ? "" : ": refused: ", rc == HV_OK ? "" : err);
    spec->name = given_name;
    hv_free(packed);
    if (rc != HV_OK) {
        hv_rpc_finish(c, rc, "%s", err);
        return;
    }
    Hvpb__V1__SubmitReply rep = HVPB__V1__SUBMIT_REPLY__INIT;
    rep.job_id = job_id;
    rep.np = np;
    rep.lease_ms = s->cfg->lease_ms;
    hv_rpc_reply(c, &rep.base);
}

/* ---- queries -------------------------------------------------------------------------------- */

static void jobs_get(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_jobs_t *s = ud;
    const Hvpb__V1__JobRef *req = (const Hvpb__V1__JobRef *)m;
    const hv_djob_t *j = hv_driver_job(s->d, req->job_id);
    if (j == NULL) {
        hv_rpc_finish(c, HV_ENOTFOUND, "no job %llu", (unsigned long long)req->job_id);
        return;
    }
    Hvpb__V1__JobView v;
    view_scratch_t sc;
    view_fill(s, j, &v, &sc);
    hv_rpc_reply(c, &v.base);
    view_free(&sc);
}

static void jobs_cancel(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_jobs_t *s = ud;
    const Hvpb__V1__JobRef *req = (const Hvpb__V1__JobRef *)m;
    if (hv_driver_cancel(s->d, req->job_id) != HV_OK) {
        hv_rpc_finish(c, HV_ENOTFOUND, "no job %llu", (unsigned long long)req->job_id);
        return;
    }
    const hv_djob_t *j = hv_driver_job(s->d, req->job_id);
    Hvpb__V1__CancelReply rep = HVPB__V1__CANCEL_REPLY__INIT;
    rep.state = (char *)(j != NULL ? hv_job_state_name(j->jm.state) : "cancelled");
    rep.state_code = job_state_code(j != NULL ? j->jm.state : HV_JOB_CANCELLED);
    hv_rpc_reply(c, &rep.base);
}

/* A listed job's throughput table (JobView.throughput), from the head's memory. */
typedef struct row_tput_s {
    Hvpb__V1__SizeThroughput m[HV_DRV_TPUT_SIZES];
    Hvpb__V1__SizeThroughput *p[HV_DRV_TPUT_SIZES];
} row_tput_t;

/* The fields of a view of a stored job row (ListJobs reads rows, not the driver's model). */
static void view_from_row(Hvpb__V1__JobView *v, const hv_job_row_t *row, clip_t *clip) {
    hvpb__v1__job_view__init(v);
    v->job_id = row->id;
    v->name = clip_str(clip, row->name, HV_JOB_NAME_MAX);
    v->state = clip_str(clip, row->state, 16);
    v->np = row->np;
    v->reason = clip_str(clip, row->reason, VIEW_REASON_MAX);
    v->submitted_ms = row->submitted_ms;
    v->started_ms = row->started_ms;
    v->ended_ms = row->ended_ms;
    v->resets = row->resets;
    v->min_np = row->min_np;
    v->max_np = row->max_np;
    v->elastic = row->elastic;
    v->generation = row->generation;
    v->size = row->size;
    v->round_reason = clip_str(clip, row->round_reason, VIEW_REASON_MAX);
    v->round_reason_code = reason_code(row->round_code);
    hv_job_state_t st = HV_JOB_PENDING;
    if (hv_job_state_parse(row->state, &st) == HV_OK) {
        v->state_code = job_state_code(st);
    }
    v->round_state =
        (char *)round_state(row->generation, row->round_open, st, &v->round_state_code);
    v->max_resets = row->max_resets;
    v->check_every = row->check_every;
    v->resumes = row->resumes;
    v->resume_generation = row->resume_gen;
    v->priority = row->priority;
    v->preemptible = row->preemptible;
    v->fleet_target = row->fleet_target;
    v->fleet_reason = clip_str(clip, row->fleet_reason, 32);
    v->fleet_cause = row->fleet_cause;
    v->fleet_ms = row->fleet_ms;
    v->namespace_ = row->ns != NULL && row->ns[0] != '\0' ? clip_str(clip, row->ns, 64) : "default";
}

/* The fleet policy's namespaces for the first page of ListJobs (hvctl queue). */
typedef struct ns_reply_s {
    hv_driver_ns_view_t v[HV_SVC_NS_MAX];
    Hvpb__V1__NamespaceShare m[HV_SVC_NS_MAX];
    Hvpb__V1__NamespaceShare *p[HV_SVC_NS_MAX];
    uint64_t res[HV_SVC_NS_MAX][4][3];
    size_t n;
} ns_reply_t;

static void ns_reply_fill(const hv_driver_t *d, ns_reply_t *r) {
    size_t n = hv_driver_fleet_namespaces(d, r->v, HV_SVC_NS_MAX);
    r->n = n < HV_SVC_NS_MAX ? n : HV_SVC_NS_MAX;
    for (size_t i = 0; i < r->n; i++) {
        const hv_driver_ns_view_t *v = &r->v[i];
        Hvpb__V1__NamespaceShare *m = &r->m[i];
        *m = (Hvpb__V1__NamespaceShare)HVPB__V1__NAMESPACE_SHARE__INIT;
        m->name = (char *)v->name;
        m->weight = v->weight;
        m->priority = v->priority;
        memcpy(r->res[i][0], v->quota, sizeof(v->quota));
        memcpy(r->res[i][1], v->borrow, sizeof(v->borrow));
        memcpy(r->res[i][2], v->used, sizeof(v->used));
        memcpy(r->res[i][3], v->borrowed, sizeof(v->borrowed));
        m->quota = r->res[i][0];
        m->n_quota = 3;
        m->borrow = r->res[i][1];
        m->n_borrow = 3;
        m->used = r->res[i][2];
        m->n_used = 3;
        m->borrowed = r->res[i][3];
        m->n_borrowed = 3;
        m->share_pm = v->share_pm;
        m->waiting = v->waiting;
        r->p[i] = m;
    }
}

static void jobs_list(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_jobs_t *s = ud;
    const Hvpb__V1__ListJobsRequest *req = (const Hvpb__V1__ListJobsRequest *)m;
    char verr[200];
    if (hv_validate_list_jobs(req, verr, sizeof(verr)) != HV_OK) {
        hv_rpc_finish(c, HV_EINVAL, "%s", verr);
        return;
    }
    /* One row more than the page tells whether a job follows it. */
    uint32_t limit = req->limit ? req->limit : LIST_JOBS_DEFAULT;
    uint64_t before = req->page_token != NULL ? strtoull(req->page_token, NULL, 10) : 0;
    hv_job_row_t *rows = NULL;
    size_t n = 0;
    hv_err rc = hv_view_job_page(s->d, before, limit + 1, &rows, &n);
    if (rc != HV_OK) {
        hv_rpc_finish(c, rc, "cannot list jobs: %s", hv_view_error(s->d));
        return;
    }
    Hvpb__V1__JobView *vs = hv_calloc(n ? n : 1, sizeof(*vs));
    Hvpb__V1__JobView **vp = hv_calloc(n ? n : 1, sizeof(*vp));
    row_tput_t *rt = hv_calloc(n ? n : 1, sizeof(*rt));
    clip_t clip = {0};
    if (vs == NULL || vp == NULL || rt == NULL) {
        hv_rpc_finish(c, HV_ENOMEM, "out of memory");
    } else {
        /* The page ends at limit jobs or at LIST_PAGE_BYTES, whichever comes first; one job
         * always fits (its strings are cut). */
        size_t k = 0, bytes = 0;
        for (; k < n && k < limit; k++) {
            view_from_row(&vs[k], &rows[k], &clip);
            hv_tput_sample_t t[HV_DRV_TPUT_SIZES];
            size_t nt = hv_view_job_tput(s->d, rows[k].id, t, HV_DRV_TPUT_SIZES);
            view_tput(&vs[k], t, nt, rt[k].m, rt[k].p);
            size_t sz = field_size(hvpb__v1__job_view__get_packed_size(&vs[k]));
            if (k > 0 && bytes + sz > LIST_PAGE_BYTES) {
                break;
            }
            bytes += sz;
            vp[k] = &vs[k];
        }
        char token[24] = "";
        if (k < n) {
            snprintf(token, sizeof(token), "%llu", (unsigned long long)rows[k - 1].id);
        }
        Hvpb__V1__ListJobsReply rep = HVPB__V1__LIST_JOBS_REPLY__INIT;
        rep.jobs = vp;
        rep.n_jobs = k;
        rep.next_page_token = token;
        ns_reply_t *ns = before == 0 ? hv_calloc(1, sizeof(*ns)) : NULL;
        if (ns != NULL) {
            ns_reply_fill(s->d, ns);
            rep.namespaces = ns->p;
            rep.n_namespaces = ns->n;
        }
        hv_rpc_reply(c, &rep.base);
        hv_free(ns);
    }
    clip_free(&clip);
    hv_free(vs);
    hv_free(vp);
    hv_free(rt);
    hv_view_jobs_free(rows, n);
}

/* Splits a comma list into a NULL-free array of pointers into `copy` (owned by the caller). */
static size_t split_commas(char *copy, char **out, size_t max) {
    size_t n = 0;
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t != NULL && n < max;
         t = strtok_r(NULL, ",", &save)) {
        out[n++] = t;
    }
    return n;
}

enum { MAXL = 64 }; /* addresses and labels shown per node: HV_NODE_ADDRS_MAX, _LABELS_MAX */
_Static_assert(MAXL == HV_NODE_ADDRS_MAX && MAXL == HV_NODE_LABELS_MAX, "node view lists");

/* One node's view and the storage it borrows. */
typedef struct node_slot_s {
    Hvpb__V1__NodeView v;
    Hvpb__V1__NodeInfo info;
    clip_t clip; /* the view's cut strings */
    char *addr_copy, *label_copy;
    char *addrs[MAXL];
    Hvpb__V1__KeyValue kv[MAXL];
    Hvpb__V1__KeyValue *kvp[MAXL];
    Hvpb__V1__BlacklistEntry bl[NODE_BL_MAX];
    Hvpb__V1__BlacklistEntry *blp[NODE_BL_MAX];
} node_slot_t;

static void node_view(hv_svc_jobs_t *s, const hv_dnode_t *nd, node_slot_t *x) {
    hvpb__v1__node_view__init(&x->v);
    hvpb__v1__node_info__init(&x->info);
    x->info.name = clip_str(&x->clip, nd->name, HV_NODE_NAME_MAX);
    x->info.slots = nd->acct.slots;
    x->info.gpus = nd->acct.gpus;
    x->info.cpus = nd->cpus;
    x->info.memory_mb = nd->memory_mb;
    x->info.preemptible = nd->preemptible;
    x->info.instance_id = clip_str(&x->clip, nd->instance_id, HV_NODE_FIELD_MAX);
    x->addr_copy = hv_strdup(nd->addrs);
    x->label_copy = hv_strdup(nd->labels);
    if (x->addr_copy != NULL) {
        x->info.n_addrs = split_commas(x->addr_copy, x->addrs, MAXL);
        for (size_t k = 0; k < x->info.n_addrs; k++) {
            x->addrs[k] = clip_str(&x->clip, x->addrs[k], HV_NODE_ADDR_MAX);
        }
        x->info.addrs = x->addrs;
    }
    if (x->label_copy != NULL) {
        char *parts[MAXL];
        size_t nl = split_commas(x->label_copy, parts, MAXL);
        for (size_t k = 0; k < nl; k++) {
            hvpb__v1__key_value__init(&x->kv[k]);
            char *eq = strchr(parts[k], '=');
            if (eq != NULL) {
                *eq = '\0';
            }
            x->kv[k].key = clip_str(&x->clip, parts[k], HV_LABEL_KEY_MAX);
            x->kv[k].value = clip_str(&x->clip, eq ? eq + 1 : "", HV_LABEL_VALUE_MAX);
            x->kvp[k] = &x->kv[k];
        }
        x->info.n_labels = nl;
        x->info.labels = x->kvp;
    }
    x->v.node_id = nd->id;
    x->v.info = &x->info;
    x->v.state = (char *)hv_node_state_name(nd->state);
    x->v.state_code = (unsigned)nd->state < HV_NODE__COUNT
                          ? (Hvpb__V1__NodeState)(nd->state + 1)
                          : HVPB__V1__NODE_STATE__NODE_STATE_UNSPECIFIED;
    x->v.slots_used = nd->acct.slots_used;
    x->v.last_seen_ms = nd->last_seen_ms;
    if (nd->state != HV_NODE_DEAD && nd->lease.suspect_ms != 0) {
        // The lease counts on the monotonic clock; the view shows the wall clock.
        uint64_t mono = hv_now_ms(), wall = hv_wall_ms();
        uint64_t ago = mono > nd->lease.suspect_ms ? mono - nd->lease.suspect_ms : 0;
        x->v.suspected_ms = wall > ago ? wall - ago : 1;
    }
    x->v.addr = clip_str(&x->clip, nd->peer, HV_NODE_ADDR_MAX);
    const hv_djob_t *jobs[NODE_BL_MAX];
    const hv_dbl_t *ents[NODE_BL_MAX];
    size_t nb = hv_driver_node_blacklist(s->d, nd->id, jobs, ents, NODE_BL_MAX);
    for (size_t k = 0; k < nb; k++) {
        hvpb__v1__blacklist_entry__init(&x->bl[k]);
        x->bl[k].job_id = jobs[k]->jm.id;
        x->bl[k].strikes = ents[k]->e.strikes;
        x->bl[k].until_ms = ents[k]->e.permanent ? 0 : ents[k]->e.until_ms;
        x->bl[k].permanent = ents[k]->e.permanent;
        x->bl[k].reason = clip_str(&x->clip, ents[k]->reason, VIEW_REASON_MAX);
        x->blp[k] = &x->bl[k];
    }
    x->v.blacklist = x->blp;
    x->v.n_blacklist = nb;
}

static void node_view_free(node_slot_t *x) {
    clip_free(&x->clip);
    hv_free(x->addr_copy);
    hv_free(x->label_copy);
}

/* Answers with a ListNodesReply of the n nodes nds, in that order. page > 0: a page of them,
 * which ends at page nodes or at LIST_PAGE_BYTES (at least one node), with a next_page_token
 * when nodes are left; 0: all of them (DrainNodes: at most HV_DRAIN_NODES_MAX, which fit). */
static void reply_nodes(hv_rpc_call_t *c, hv_svc_jobs_t *s, const hv_dnode_t *const *nds, size_t n,
                        size_t page) {
    node_slot_t *slots = hv_calloc(n ? n : 1, sizeof(*slots));
    Hvpb__V1__NodeView **vp = hv_calloc(n ? n : 1, sizeof(*vp));
    if (slots == NULL || vp == NULL) {
        hv_free(slots);
        hv_free(vp);
        hv_rpc_finish(c, HV_ENOMEM, "out of memory");
        return;
    }
    size_t k = 0, bytes = 0;
    for (; k < n && (page == 0 || k < page); k++) {
        node_view(s, nds[k], &slots[k]);
        size_t sz = field_size(hvpb__v1__node_view__get_packed_size(&slots[k].v));
        if (page > 0 && k > 0 && bytes + sz > LIST_PAGE_BYTES) {
            node_view_free(&slots[k]);
            break;
        }
        bytes += sz;
        vp[k] = &slots[k].v;
    }
    char token[24] = "";
    if (k < n) {
        snprintf(token, sizeof(token), "%llu", (unsigned long long)nds[k - 1]->id);
    }
    Hvpb__V1__ListNodesReply rep = HVPB__V1__LIST_NODES_REPLY__INIT;
    rep.nodes = vp;
    rep.n_nodes = k;
    rep.cluster_name = s->cfg->cluster_name;
    rep.next_page_token = token;
    hv_rpc_reply(c, &rep.base);
    for (size_t i = 0; i < k; i++) {
        node_view_free(&slots[i]);
    }
    hv_free(slots);
    hv_free(vp);
}

/* Newest first: by id, descending. */
static int node_newer(const void *a, const void *b) {
    uint64_t x = (*(hv_dnode_t *const *)a)->id, y = (*(hv_dnode_t *const *)b)->id;
    return x > y ? -1 : x < y;
}

static void jobs_nodes(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_jobs_t *s = ud;
    const Hvpb__V1__ListNodesRequest *req = (const Hvpb__V1__ListNodesRequest *)m;
    char verr[200];
    if (hv_validate_list_nodes(req, verr, sizeof(verr)) != HV_OK) {
        hv_rpc_finish(c, HV_EINVAL, "%s", verr);
        return;
    }
    uint64_t before = req->page_token != NULL ? strtoull(req->page_token, NULL, 10) : 0;
    /* Nodes the autoscaler gave back (retired and no longer alive) are not listed: their
     * instances are in the cost report. A page holds the nodes with an id below the token's. */
    size_t n = 0;
    for (const hv_dnode_t *nd = hv_driver_nodes(s->d); nd != NULL; nd = nd->next) {
        n += !hv_driver_node_hidden(nd) && (before == 0 || nd->id < before);
    }
    const hv_dnode_t **nds = hv_calloc(n ? n : 1, sizeof(*nds));
    if (nds == NULL) {
        hv_rpc_finish(c, HV_ENOMEM, "out of memory");
        return;
    }
    size_t i = 0;
    for (const hv_dnode_t *nd = hv_driver_nodes(s->d); nd != NULL && i < n; nd = nd->next) {
        if (!hv_driver_node_hidden(nd) && (before == 0 || nd->id < before)) {
            nds[i++] = nd;
        }
    }
    qsort(nds, n, sizeof(*nds), node_newer);
    reply_nodes(c, s, nds, n, req->page_size != 0 ? req->page_size : (n ? n : 1));
    hv_free(nds);
}

/* What a drain or undrain is recorded as when the caller gave no reason. */
static const char *drain_why(const char *reason, int drain) {
    return reason != NULL && reason[0] != '\0' ? reason : (drain ? "hvctl drain" : "hvctl undrain");
}

static void jobs_drain_node(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_jobs_t *s = ud;
    const Hvpb__V1__NodeDrainRequest *req = (const Hvpb__V1__NodeDrainRequest *)m;
    char verr[300];
    if (hv_validate_node_drain(req, verr, sizeof(verr)) != HV_OK) {
        hv_rpc_finish(c, HV_EINVAL, "%s", verr);
        return;
    }
    const hv_dnode_t *nd = hv_driver_node_find(s->d, req->node);
    if (nd == NULL) {
        hv_rpc_finish(c, HV_ENOTFOUND, "no node named '%s'", req->node ? req->node : "");
        return;
    }
    char derr[300];
    hv_err rc = hv_driver_node_drain(s->d, nd->id, req->drain, drain_why(req->reason, req->drain),
                                     0, 0, derr, sizeof(derr));
    if (rc == HV_EUNAVAIL) {
        hv_rpc_finish_later(c, rc, "%s; node %s was not %s", derr, nd->name,
                            req->drain ? "drained" : "undrained");
        return;
    }
    if (rc == HV_ESTATE) {
        hv_rpc_finish(c, rc, "node %s is %s, not draining", nd->name,
                      hv_node_state_name(nd->state));
        return;
    }
    if (rc != HV_OK) {
        hv_rpc_finish(c, rc, "cannot %s node %s: %s", req->drain ? "drain" : "undrain", nd->name,
                      hv_strerror(rc));
        return;
    }
    node_slot_t *x = hv_calloc(1, sizeof(*x));
    if (x == NULL) {
        hv_rpc_finish(c, HV_ENOMEM, "out of memory");
        return;
    }
    node_view(s, nd, x);
    hv_rpc_reply(c, &x->v.base);
    node_view_free(x);
    hv_free(x);
}

/* The nodes are named here; the driver drains (or undrains) them as one input (stored together,
 * then acted on, so that a job on several of them re-forms once). */
_Static_assert(HV_DRAIN_NODES_MAX <= HV_DRIVER_DRAIN_MAX, "DrainNodes fits one driver input");
static void jobs_drain_nodes(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_jobs_t *s = ud;
    const Hvpb__V1__NodesDrainRequest *req = (const Hvpb__V1__NodesDrainRequest *)m;
    char verr[300];
    if (hv_validate_nodes_drain(req, verr, sizeof(verr)) != HV_OK) {
        hv_rpc_finish(c, HV_EINVAL, "%s", verr);
        return;
    }
    size_t n = req->n_nodes;
    const hv_dnode_t *nds[HV_DRAIN_NODES_MAX];
    uint64_t ids[HV_DRAIN_NODES_MAX];
    for (size_t i = 0; i < n; i++) {
        nds[i] = hv_driver_node_find(s->d, req->nodes[i]);
        if (nds[i] == NULL) {
            hv_rpc_finish(c, HV_ENOTFOUND, "no node named '%s' (nothing was changed)",
                          req->nodes[i]);
            return;
        }
        ids[i] = nds[i]->id;
    }
    size_t bad = 0;
    char derr[300] = "";
    hv_err rc = hv_driver_nodes_drain(s->d, ids, n, req->drain, drain_why(req->reason, req->drain),
                                      &bad, derr, sizeof(derr));
    if (rc == HV_EINVAL) {
        size_t k = 0;
        while (k < bad && ids[k] != ids[bad]) {
            k++;
        }
        hv_rpc_finish(c, rc, "nodes '%s' and '%s' are the same node %s", req->nodes[k],
                      req->nodes[bad], nds[bad]->name);
        return;
    }
    if (rc == HV_EUNAVAIL) {
        hv_rpc_finish_later(c, rc, "%s; no node was %s", derr,
                            req->drain ? "drained" : "undrained");
        return;
    }
    if (rc != HV_OK) {
        hv_rpc_finish(c, rc, "%s (nothing was changed)", derr);
        return;
    }
    reply_nodes(c, s, nds, n, 0);
}

static void jobs_events(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_jobs_t *s = ud;
    const Hvpb__V1__ListEventsRequest *req = (const Hvpb__V1__ListEventsRequest *)m;
    char verr[200];
    if (hv_validate_list_events(req, verr, sizeof(verr)) != HV_OK) {
        hv_rpc_finish(c, HV_EINVAL, "%s", verr);
        return;
    }
    if (req->job_id != 0 && hv_driver_job(s->d, req->job_id) == NULL) {
        hv_rpc_finish(c, HV_ENOTFOUND, "no job %llu", (unsigned long long)req->job_id);
        return;
    }
    hv_event_row_t *ev = NULL;
    size_t n = 0;
    uint64_t total = 0;
    uint32_t limit = req->limit ? req->limit : 200;
    hv_err rc = req->actor_id != 0
                    ? hv_view_actor_events(s->d, req->actor_id, limit, &ev, &n, &total)
                    : hv_view_events(s->d, req->job_id, 0, limit, &ev, &n);
    if (rc != HV_OK) {
        hv_rpc_finish(c, rc, "cannot list events: %s", hv_view_error(s->d));
        return;
    }
    Hvpb__V1__Event *es = hv_calloc(n ? n : 1, sizeof(*es));
    Hvpb__V1__Event **ep = hv_calloc(n ? n : 1, sizeof(*ep));
    if (es == NULL || ep == NULL) {
        hv_rpc_finish(c, HV_ENOMEM, "out of memory");
    } else {
        /* The newest events that fit in LIST_PAGE_BYTES (a limit of 100000 would not fit in
         * one message), still in ascending order. */
        size_t first = n, bytes = 0;
        while (first > 0) {
            event_from_row(&es[first - 1], &ev[first - 1]);
            size_t sz = field_size(hvpb__v1__event__get_packed_size(&es[first - 1]));
            if (first < n && bytes + sz > LIST_PAGE_BYTES) {
                break;
            }
            bytes += sz;
            first--;
        }
        for (size_t i = first; i < n; i++) {
            ep[i - first] = &es[i];
        }
        Hvpb__V1__ListEventsReply rep = HVPB__V1__LIST_EVENTS_REPLY__INIT;
        rep.events = ep;
        rep.n_events = n - first;
        rep.total = total;
        hv_rpc_reply(c, &rep.base);
    }
    hv_free(es);
    hv_free(ep);
    hv_view_events_free(ev, n);
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

hv_err hv_svc_jobs_create(hv_rpc_server_t *srv, const hv_head_config_t *cfg, hv_driver_t *d,
                          hv_svc_jobs_t **out) {
    hv_svc_jobs_t *s = hv_calloc(1, sizeof(*s));
    if (s == NULL) {
        return HV_ENOMEM;
    }
    s->cfg = cfg;
    s->d = d;
    hv_rpc_method_t ms[] = {
        {"/hvpb.v1.Jobs/Submit", HV_RPC_UNARY, &hvpb__v1__submit_request__descriptor, jobs_submit,
         NULL, s},
        {"/hvpb.v1.Jobs/GetJob", HV_RPC_UNARY, &hvpb__v1__job_ref__descriptor, jobs_get, NULL, s},
        {"/hvpb.v1.Jobs/ListJobs", HV_RPC_UNARY, &hvpb__v1__list_jobs_request__descriptor,
         jobs_list, NULL, s},
        {"/hvpb.v1.Jobs/ListNodes", HV_RPC_UNARY, &hvpb__v1__list_nodes_request__descriptor,
         jobs_nodes, NULL, s},
        {"/hvpb.v1.Jobs/ListEvents", HV_RPC_UNARY, &hvpb__v1__list_events_request__descriptor,
         jobs_events, NULL, s},
        {"/hvpb.v1.Jobs/Cancel", HV_RPC_UNARY, &hvpb__v1__job_ref__descriptor, jobs_cancel, NULL,
         s},
        {"/hvpb.v1.Jobs/Watch", HV_RPC_SERVER_STREAM, &hvpb__v1__watch_request__descriptor,
         jobs_watch, watch_done, s},
        {"/hvpb.v1.Jobs/DrainNode", HV_RPC_UNARY, &hvpb__v1__node_drain_request__descriptor,
         jobs_drain_node, NULL, s},
        {"/hvpb.v1.Jobs/DrainNodes", HV_RPC_UNARY, &hvpb__v1__nodes_drain_request__descriptor,
         jobs_drain_nodes, NULL, s},
    };
    hv_err rc = hv_rpc_server_add_n(srv, ms, sizeof(ms) / sizeof(ms[0]));
    if (rc != HV_OK) {
        hv_free(s);
        return rc;
    }
    *out = s;
    return HV_OK;
}

void hv_svc_jobs_destroy(hv_svc_jobs_t *s) {
    if (s == NULL) {
        return;
    }
    while (s->watchers != NULL) {
        watch_t *w = s->watchers;
        watch_unlink(s, w);
        hv_free(w);
    }
    hv_free(s);
}
