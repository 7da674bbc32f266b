/*
 * head_jobs: the Jobs service (hvsubmit, hvctl): submit, get, list, cancel, events, and Watch.
 * A job's output is kept as a file, <data>/logs/<id>.log, one line per output line in the form
 * hvsubmit prints ("[rank]<stdout>:text"). Watch streams are served from that file and from the
 * event log in sqlite, for replay and live alike: a watcher remembers its byte offset and last
 * event seq, and is pumped whenever the job has news or its send queue drains. So a slow client
 * never makes the head buffer without bound, and a client that reconnects (after a head restart)
 * resumes exactly where it stopped. The final JobView is sent once every worker ended.
 * Loop thread only. (Upload and StatArtifact live in head_artifacts.c.)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "head.h"
#include "log.h"
#include "mem.h"
#include "sha256.h"
#include "util.h"

#define WATCH_WINDOW 8                 /* messages a watcher may have queued */
#define WATCH_BATCH_LINES 1024         /* log lines per message at most */
#define WATCH_BATCH_BYTES (256u << 10) /* log text per message at most */
#define JOB_LOG_MAX (1ull << 30)       /* a job's log stops growing past 1 GiB */
#define SUBMIT_MAX_ARGS 4096
#define SUBMIT_MAX_FILES 256

struct head_watch_s {
    hv_rpc_call_t *call;
    head_job_t *job;
    int logs, events, follow;
    FILE *rf;             /* read handle on the job's log */
    uint64_t log_pos;     /* byte offset of the next line to read */
    uint64_t skip_lines;  /* lines still to skip (resume) */
    uint64_t event_after; /* last event seq sent */
    int finished;
    head_watch_t *next;
};

/* ---- views ---------------------------------------------------------------------------------- */

/* The job fields of a view, borrowed from row. */
static void view_from_row(Hvpb__V1__JobView *v, const hv_job_row_t *row) {
    hvpb__v1__job_view__init(v);
    v->job_id = row->id;
    v->name = row->name;
    v->state = row->state;
    v->np = row->np;
    v->reason = row->reason;
    v->submitted_ms = row->submitted_ms;
    v->started_ms = row->started_ms;
    v->ended_ms = row->ended_ms;
    v->resets = row->resets;
    v->min_np = row->min_np;
    v->max_np = row->max_np;
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
}

typedef struct view_scratch_s {
    Hvpb__V1__WorkerView *wv;
    Hvpb__V1__WorkerView **wp;
} view_scratch_t;

void head_jobs_fill_view(head_t *h, head_job_t *j, Hvpb__V1__JobView *v, void **scratch) {
    view_from_row(v, &j->row);
    v->binary_digest = j->spec && j->spec->binary ? j->spec->binary->digest : "";
    view_scratch_t *s = hv_calloc(1, sizeof(*s));
    *scratch = s;
    if (s == NULL || j->n_workers == 0) {
        return;
    }
    s->wv = hv_calloc(j->n_workers, sizeof(*s->wv));
    s->wp = hv_calloc(j->n_workers, sizeof(*s->wp));
    if (s->wv == NULL || s->wp == NULL) {
        return;
    }
    size_t n = 0;
    for (uint32_t r = 0; r < j->n_workers; r++) {
        head_worker_t *w = j->workers[r];
        if (w == NULL) {
            continue;
        }
        Hvpb__V1__WorkerView *x = &s->wv[n];
        hvpb__v1__worker_view__init(x);
        x->worker_id = w->row.id;
        x->rank = w->row.rank;
        head_node_t *nd = w->node ? w->node : head_node_by_id(h, w->row.node_id);
        x->node = nd ? nd->row.name : "?";
        x->state = w->row.state;
        x->pid = w->row.pid;
        x->exit_code = w->row.exit_code;
        x->term_signal = w->row.term_signal;
        x->attempt = w->row.attempt;
        x->reason = w->row.reason;
        s->wp[n] = x;
        n++;
    }
    v->workers = s->wp;
    v->n_workers = n;
}

void head_jobs_free_view(Hvpb__V1__JobView *v, void *scratch) {
    (void)v;
    view_scratch_t *s = scratch;
    if (s != NULL) {
        hv_free(s->wv);
        hv_free(s->wp);
        hv_free(s);
    }
}

/* A job in memory, or loaded back from the store (ended jobs are evicted after a while). */
static head_job_t *job_lookup(head_t *h, uint64_t id) {
    head_job_t *j = head_job_by_id(h, id);
    if (j == NULL) {
        head_driver_restore_job(h, id, &j);
    }
    return j;
}

/* ---- logs ----------------------------------------------------------------------------------- */

void head_jobs_log(head_t *h, head_worker_t *w, uint32_t stream, char **lines, size_t n) {
    head_job_t *j = w->job;
    if (j->log == NULL || n == 0) {
        return;
    }
    const char *sname = stream == 2 ? "stderr" : "stdout";
    for (size_t i = 0; i < n; i++) {
        if (j->log_bytes >= JOB_LOG_MAX) {
            HV_LOG(HV_LOG_WARN, "jobs", "HV-LOG-FULL",
                   "job %llu: log reached %llu bytes; "
                   "further output is dropped",
                   (unsigned long long)j->row.id, (unsigned long long)JOB_LOG_MAX);
            break;
        }
        /* One stored line per output line: strip anything that would break the framing. */
        const char *text = lines[i];
        size_t len = strnlen(text, HEAD_LOG_MAX_LINE);
        int wrote = fprintf(j->log, "[%u]<%s>:", w->row.rank, sname);
        for (size_t k = 0; k < len; k++) {
            fputc(text[k] == '\n' || text[k] == '\r' ? ' ' : text[k], j->log);
        }
        fputc('\n', j->log);
        j->log_bytes += (uint64_t)(wrote > 0 ? wrote : 0) + len + 1;
        j->log_lines++;
    }
    fflush(j->log);
    head_jobs_notify(h, j);
}

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

/* ---- watch ---------------------------------------------------------------------------------- */

static void watch_finish(head_watch_t *w, hv_err rc, const char *msg) {
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

/* Reads the next complete lines of the job's log into one LogBatch message (at most
 * WATCH_BATCH_LINES lines / WATCH_BATCH_BYTES of text) and sends batches while the watcher's
 * window allows. Returns 1 when the watcher has read everything written so far. */
static int watch_send_logs(head_watch_t *w) {
    static char text[WATCH_BATCH_BYTES + HEAD_LOG_MAX_LINE + 64];
    static Hvpb__V1__LogLine lines[WATCH_BATCH_LINES];
    static Hvpb__V1__LogLine *lp[WATCH_BATCH_LINES];
    head_job_t *j = w->job;
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
    return w->log_pos >= j->log_bytes || j->log == NULL;
}

/* Sends what the watcher has not seen yet, up to its window. */
static void watch_pump(head_t *h, head_watch_t *w) {
    if (w->finished || !hv_rpc_call_open(w->call)) {
        return;
    }
    head_job_t *j = w->job;
    int caught_up = 1;
    /* Only ask the store when the job has events this watcher has not seen (the pump runs at
     * every send completion, so this check keeps log streaming off sqlite). */
    int news = j->last_event_seq == 0 || w->event_after < j->last_event_seq;
    if (w->events && news && hv_rpc_call_queued(w->call) < WATCH_WINDOW) {
        hv_event_row_t *ev = NULL;
        size_t n = 0;
        if (hv_store_event_list(h->store, j->row.id, w->event_after, 0, &ev, &n) == HV_OK) {
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
            }
            hv_store_event_free_list(ev, n);
        }
    } else if (w->events && news) {
        caught_up = 0;
    }
    if (w->logs && w->rf != NULL) {
        caught_up &= watch_send_logs(w);
    }
    if (!caught_up) {
        return;
    }
    if (head_job_terminal(j) && !j->ending) {
        Hvpb__V1__JobView v;
        void *scratch;
        Hvpb__V1__WatchItem it = HVPB__V1__WATCH_ITEM__INIT;
        head_jobs_fill_view(h, j, &v, &scratch);
        it.body_case = HVPB__V1__WATCH_ITEM__BODY_DONE;
        it.done = &v;
        hv_rpc_send(w->call, &it.base);
        head_jobs_free_view(&v, scratch);
        watch_finish(w, HV_OK, NULL);
    } else if (!w->follow) {
        watch_finish(w, HV_OK, NULL);
    }
}

void head_jobs_notify(head_t *h, head_job_t *j) {
    for (head_watch_t *w = j->watchers; w != NULL; w = w->next) {
        watch_pump(h, w);
    }
}

static void watch_drain(hv_rpc_call_t *c, void *ud) {
    head_watch_t *w = hv_rpc_call_data(c);
    if (w != NULL && w->job != NULL) {
        watch_pump(ud, w);
    }
}

static void watch_unlink(head_watch_t *w) {
    if (w->job == NULL) {
        return;
    }
    for (head_watch_t **p = &w->job->watchers; *p != NULL; p = &(*p)->next) {
        if (*p == w) {
            *p = w->next;
            break;
        }
    }
    w->job = NULL;
    if (w->rf != NULL) {
        fclose(w->rf);
        w->rf = NULL;
    }
}

void head_jobs_close_watchers(head_job_t *j) {
    while (j->watchers != NULL) {
        head_watch_t *w = j->watchers;
        watch_finish(w, HV_EUNAVAIL, "the head is shutting down");
        watch_unlink(w); /* freed in watch_done */
    }
}

static void jobs_watch(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    head_t *h = ud;
    const Hvpb__V1__WatchRequest *req = (const Hvpb__V1__WatchRequest *)m;
    head_job_t *j = job_lookup(h, req->job_id);
    if (j == NULL) {
        hv_rpc_finish(c, HV_ENOTFOUND, "no job %llu", (unsigned long long)req->job_id);
        return;
    }
    head_watch_t *w = hv_calloc(1, sizeof(*w));
    if (w == NULL) {
        hv_rpc_finish(c, HV_ENOMEM, "out of memory");
        return;
    }
    w->call = c;
    w->job = j;
    w->logs = req->logs;
    w->events = req->events;
    w->follow = req->follow;
    w->skip_lines = req->log_offset;
    w->event_after = req->event_after;
    if (w->logs) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/logs/%llu.log", h->cfg.data_dir,
                 (unsigned long long)j->row.id);
        w->rf = fopen(path, "r");
        if (w->rf == NULL && errno != ENOENT) {
            HV_LOG(HV_LOG_WARN, "jobs", "HV-LOG-READ", "cannot read %s: %s", path, strerror(errno));
        }
    }
    w->next = j->watchers;
    j->watchers = w;
    hv_rpc_call_set_data(c, w);
    hv_rpc_call_set_drain_cb(c, watch_drain);
    watch_pump(h, w);
}

static void watch_done(hv_rpc_call_t *c, const hv_rpc_status_t *st, void *ud) {
    (void)st;
    (void)ud;
    head_watch_t *w = hv_rpc_call_data(c);
    if (w != NULL) {
        watch_unlink(w);
        hv_free(w);
    }
}

/* ---- submit --------------------------------------------------------------------------------- */

static int safe_name(const char *s) {
    return s != NULL && s[0] != '\0' && strchr(s, '/') == NULL && strcmp(s, ".") != 0 &&
           strcmp(s, "..") != 0 && strlen(s) <= 255;
}

static void jobs_submit(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    head_t *h = ud;
    const Hvpb__V1__SubmitRequest *req = (const Hvpb__V1__SubmitRequest *)m;
    Hvpb__V1__JobSpec *spec = req->spec;
    if (spec == NULL || spec->binary == NULL) {
        hv_rpc_finish(c, HV_EINVAL, "the job has no binary");
        return;
    }
    if (!safe_name(spec->binary->name)) {
        hv_rpc_finish(c, HV_EINVAL, "binary name '%s' must be a plain file name",
                      spec->binary->name);
        return;
    }
    if (!head_artifact_present(h, spec->binary->digest)) {
        hv_rpc_finish(c, HV_ESTATE, "binary %s (%s) has not been uploaded", spec->binary->name,
                      spec->binary->digest);
        return;
    }
    if (spec->n_args > SUBMIT_MAX_ARGS || spec->n_files > SUBMIT_MAX_FILES) {
        hv_rpc_finish(c, HV_EINVAL, "too many arguments or files (limits %d and %d)",
                      SUBMIT_MAX_ARGS, SUBMIT_MAX_FILES);
        return;
    }
    for (size_t i = 0; i < spec->n_files; i++) {
        Hvpb__V1__FileRef *f = spec->files[i];
        if (!safe_name(f->name) || strcmp(f->name, spec->binary->name) == 0) {
            hv_rpc_finish(c, HV_EINVAL,
                          "file name '%s' must be a plain file name, distinct "
                          "from the binary's",
                          f->name);
            return;
        }
        for (size_t k = 0; k < i; k++) {
            if (strcmp(spec->files[k]->name, f->name) == 0) {
                hv_rpc_finish(c, HV_EINVAL, "file name '%s' is given twice", f->name);
                return;
            }
        }
        if (!head_artifact_present(h, f->digest)) {
            hv_rpc_finish(c, HV_ESTATE, "file %s (%s) has not been uploaded", f->name, f->digest);
            return;
        }
    }
    for (size_t i = 0; i < spec->n_env; i++) {
        if (spec->env[i]->key == NULL || spec->env[i]->key[0] == '\0' ||
            strchr(spec->env[i]->key, '=') != NULL) {
            hv_rpc_finish(c, HV_EINVAL, "environment variable %zu has an empty or bad name", i);
            return;
        }
    }
    uint32_t capacity = head_capacity(h, spec->slots_per_host);
    if (capacity == 0) {
        hv_rpc_finish(c, HV_ESTATE,
                      "no node has joined the cluster: start one with "
                      "'hvagent join %s'",
                      h->advertise);
        return;
    }
    uint32_t np = spec->np;
    int took_free = 0;
    if (np == 0) {
        np = head_free_slots(h, spec->slots_per_host);
        if (np == 0) {
            np = 1;
        }
        took_free = 1;
    }
    if (np > capacity) {
        hv_rpc_finish(c, HV_EINVAL, "-np %u can never run here: the cluster has %u slots%s", np,
                      capacity, spec->slots_per_host ? " with that --slots-per-host" : "");
        return;
    }
    if ((spec->min_np != 0 && spec->min_np > np) || (spec->max_np != 0 && spec->max_np < np)) {
        hv_rpc_finish(c, HV_EINVAL, "need min-np <= np <= max-np, got %u <= %u <= %u", spec->min_np,
                      np, spec->max_np);
        return;
    }
    /* The default name is borrowed for packing only: the rpc layer frees the message. */
    char *given_name = spec->name;
    if (spec->name == NULL || spec->name[0] == '\0') {
        spec->name = spec->binary->name;
    }
    head_job_t *j;
    hv_err rc = head_driver_submit(h, spec, np, &j);
    spec->name = given_name;
    if (rc != HV_OK) {
        hv_rpc_finish(c, rc, "the head cannot store the job: %s", hv_strerror(rc));
        return;
    }
    HV_LOG(HV_LOG_NOTICE, "jobs", "HV-JOB-SUBMIT", "job %llu (%s): %u workers%s",
           (unsigned long long)j->row.id, j->row.name, np, took_free ? " (every free slot)" : "");
    Hvpb__V1__SubmitReply rep = HVPB__V1__SUBMIT_REPLY__INIT;
    rep.job_id = j->row.id;
    rep.np = np;
    hv_rpc_reply(c, &rep.base);
    head_driver_schedule(h);
}

/* ---- queries -------------------------------------------------------------------------------- */

static void jobs_get(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    head_t *h = ud;
    const Hvpb__V1__JobRef *req = (const Hvpb__V1__JobRef *)m;
    head_job_t *j = job_lookup(h, req->job_id);
    if (j == NULL) {
        hv_rpc_finish(c, HV_ENOTFOUND, "no job %llu", (unsigned long long)req->job_id);
        return;
    }
    Hvpb__V1__JobView v;
    void *scratch;
    head_jobs_fill_view(h, j, &v, &scratch);
    hv_rpc_reply(c, &v.base);
    head_jobs_free_view(&v, scratch);
}

static void jobs_cancel(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    head_t *h = ud;
    const Hvpb__V1__JobRef *req = (const Hvpb__V1__JobRef *)m;
    head_job_t *j = job_lookup(h, req->job_id);
    if (j == NULL) {
        hv_rpc_finish(c, HV_ENOTFOUND, "no job %llu", (unsigned long long)req->job_id);
        return;
    }
    if (!head_job_terminal(j)) {
        head_driver_end_job(h, j, "cancelled", "cancelled by the user");
    }
    Hvpb__V1__CancelReply rep = HVPB__V1__CANCEL_REPLY__INIT;
    rep.state = j->row.state;
    hv_rpc_reply(c, &rep.base);
}

static void jobs_list(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    head_t *h = ud;
    const Hvpb__V1__ListJobsRequest *req = (const Hvpb__V1__ListJobsRequest *)m;
    hv_job_row_t *rows = NULL;
    size_t n = 0;
    hv_err rc = hv_store_job_list(h->store, 0, req->limit ? req->limit : 100, &rows, &n);
    if (rc != HV_OK) {
        hv_rpc_finish(c, rc, "cannot list jobs: %s", hv_store_last_error(h->store));
        return;
    }
    Hvpb__V1__JobView *vs = hv_calloc(n ? n : 1, sizeof(*vs));
    Hvpb__V1__JobView **vp = hv_calloc(n ? n : 1, sizeof(*vp));
    if (vs == NULL || vp == NULL) {
        hv_rpc_finish(c, HV_ENOMEM, "out of memory");
    } else {
        for (size_t i = 0; i < n; i++) {
            view_from_row(&vs[i], &rows[i]);
            vp[i] = &vs[i];
        }
        Hvpb__V1__ListJobsReply rep = HVPB__V1__LIST_JOBS_REPLY__INIT;
        rep.jobs = vp;
        rep.n_jobs = n;
        hv_rpc_reply(c, &rep.base);
    }
    hv_free(vs);
    hv_free(vp);
    hv_store_job_free_list(rows, n);
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

static void jobs_nodes(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    (void)m;
    head_t *h = ud;
    size_t n = 0;
    for (head_node_t *nd = h->nodes; nd != NULL; nd = nd->next) {
        n++;
    }
    enum { MAXL = 64 };
    typedef struct {
        Hvpb__V1__NodeView v;
        Hvpb__V1__NodeInfo info;
        char *addr_copy, *label_copy;
        char *addrs[MAXL];
        Hvpb__V1__KeyValue kv[MAXL];
        Hvpb__V1__KeyValue *kvp[MAXL];
    } slot_t;
    slot_t *slots = hv_calloc(n ? n : 1, sizeof(*slots));
    Hvpb__V1__NodeView **vp = hv_calloc(n ? n : 1, sizeof(*vp));
    if (slots == NULL || vp == NULL) {
        hv_free(slots);
        hv_free(vp);
        hv_rpc_finish(c, HV_ENOMEM, "out of memory");
        return;
    }
    size_t i = 0;
    for (head_node_t *nd = h->nodes; nd != NULL; nd = nd->next, i++) {
        slot_t *s = &slots[i];
        hvpb__v1__node_view__init(&s->v);
        hvpb__v1__node_info__init(&s->info);
        s->info.name = nd->row.name;
        s->info.slots = nd->row.slots;
        s->info.gpus = nd->row.gpus;
        s->info.cpus = nd->row.cpus;
        s->info.preemptible = nd->row.preemptible;
        s->info.instance_id = nd->row.instance_id;
        s->addr_copy = hv_strdup(nd->row.addrs);
        s->label_copy = hv_strdup(nd->row.labels);
        if (s->addr_copy != NULL) {
            s->info.n_addrs = split_commas(s->addr_copy, s->addrs, MAXL);
            s->info.addrs = s->addrs;
        }
        if (s->label_copy != NULL) {
            char *parts[MAXL];
            size_t nl = split_commas(s->label_copy, parts, MAXL);
            for (size_t k = 0; k < nl; k++) {
                hvpb__v1__key_value__init(&s->kv[k]);
                char *eq = strchr(parts[k], '=');
                if (eq != NULL) {
                    *eq = '\0';
                }
                s->kv[k].key = parts[k];
                s->kv[k].value = eq ? eq + 1 : "";
                s->kvp[k] = &s->kv[k];
            }
            s->info.n_labels = nl;
            s->info.labels = s->kvp;
        }
        s->v.node_id = nd->row.id;
        s->v.info = &s->info;
        s->v.state = nd->row.state;
        s->v.slots_used = nd->slots_used;
        s->v.last_seen_ms = nd->row.last_seen_ms;
        s->v.addr = nd->row.peer;
        vp[i] = &s->v;
    }
    Hvpb__V1__ListNodesReply rep = HVPB__V1__LIST_NODES_REPLY__INIT;
    rep.nodes = vp;
    rep.n_nodes = n;
    hv_rpc_reply(c, &rep.base);
    for (i = 0; i < n; i++) {
        hv_free(slots[i].addr_copy);
        hv_free(slots[i].label_copy);
    }
    hv_free(slots);
    hv_free(vp);
}

static void jobs_events(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    head_t *h = ud;
    const Hvpb__V1__ListEventsRequest *req = (const Hvpb__V1__ListEventsRequest *)m;
    if (req->job_id != 0 && job_lookup(h, req->job_id) == NULL) {
        hv_rpc_finish(c, HV_ENOTFOUND, "no job %llu", (unsigned long long)req->job_id);
        return;
    }
    hv_event_row_t *ev = NULL;
    size_t n = 0;
    hv_err rc =
        hv_store_event_list(h->store, req->job_id, 0, req->limit ? req->limit : 200, &ev, &n);
    if (rc != HV_OK) {
        hv_rpc_finish(c, rc, "cannot list events: %s", hv_store_last_error(h->store));
        return;
    }
    Hvpb__V1__Event *es = hv_calloc(n ? n : 1, sizeof(*es));
    Hvpb__V1__Event **ep = hv_calloc(n ? n : 1, sizeof(*ep));
    if (es == NULL || ep == NULL) {
        hv_rpc_finish(c, HV_ENOMEM, "out of memory");
    } else {
        for (size_t i = 0; i < n; i++) {
            event_from_row(&es[i], &ev[i]);
            ep[i] = &es[i];
        }
        Hvpb__V1__ListEventsReply rep = HVPB__V1__LIST_EVENTS_REPLY__INIT;
        rep.events = ep;
        rep.n_events = n;
        hv_rpc_reply(c, &rep.base);
    }
    hv_free(es);
    hv_free(ep);
    hv_store_event_free_list(ev, n);
}

hv_err head_jobs_register(head_t *h) {
    hv_rpc_method_t ms[] = {
        {"/hvpb.v1.Jobs/Submit", HV_RPC_UNARY, &hvpb__v1__submit_request__descriptor, jobs_submit,
         NULL, h},
        {"/hvpb.v1.Jobs/GetJob", HV_RPC_UNARY, &hvpb__v1__job_ref__descriptor, jobs_get, NULL, h},
        {"/hvpb.v1.Jobs/ListJobs", HV_RPC_UNARY, &hvpb__v1__list_jobs_request__descriptor,
         jobs_list, NULL, h},
        {"/hvpb.v1.Jobs/ListNodes", HV_RPC_UNARY, &hvpb__v1__list_nodes_request__descriptor,
         jobs_nodes, NULL, h},
        {"/hvpb.v1.Jobs/ListEvents", HV_RPC_UNARY, &hvpb__v1__list_events_request__descriptor,
         jobs_events, NULL, h},
        {"/hvpb.v1.Jobs/Cancel", HV_RPC_UNARY, &hvpb__v1__job_ref__descriptor, jobs_cancel, NULL,
         h},
        {"/hvpb.v1.Jobs/Watch", HV_RPC_SERVER_STREAM, &hvpb__v1__watch_request__descriptor,
         jobs_watch, watch_done, h},
    };
    for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
        HV_TRY(hv_rpc_server_add(h->srv, &ms[i]));
    }
    return HV_OK;
}
