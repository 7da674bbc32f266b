/*
 * driver: see driver.h. The path of every input is the same:
 *   1. find the job and worker, call the job machine (jobm.c), which changes the model and
 *      returns actions;
 *   2. hv__driver_apply(): store every row the job machine marked dirty in one transaction;
 *   3. only if that succeeded, carry the actions out (orders, answers, pushes, events).
 * When the store fails, the job's actions wait in its queue and the tick tries again, in order
 * (every STORE_RETRY_MS while it fails); meanwhile hv_driver_store_trouble says why, for the
 * services to tell their clients, and a job's end is told only once it is stored.
 * Placement (sched.c) and node events (nodes.c) are decided here with the pure modules, stored,
 * then announced, the same way. Events too: one whose append fails waits, in order behind any
 * other waiting, and is told to the observer and the job's watchers only once it is written
 * (EVENT_WAIT_MAX of them at most: beyond, new ones are dropped, counted, logged, and the count
 * is recorded as an event when the store works again: driver_events.c).
 *
 * This file is the plumbing: the inputs, the store-then-act path (hv__driver_apply and the queue
 * of decisions waiting for the store), the orders and answers through hv_driver_io_t, placement,
 * nodes, rendezvous and the tick. Beside it, sharing driver_int.h: driver_rows.c (the model to
 * and from the tables' rows, a job's write, the store's health, the load at start),
 * driver_events.c (events: stored, then told) and driver_copies.c (the state copies' and the
 * durable tier's bookkeeping).
 */
#include "driver_int.h"

#include "actors.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "cluster.h"
#include "copies.h"
#include "durable.h"
#include "evq.h"
#include "log.h"
#include "mem.h"
#include "sched.h"
#include "util.h"
#include "jobsize.h"

#define SEEN_PERSIST_MS 10000 /* how often last_seen is written for a live node */

/* ---- small helpers -------------------------------------------------------------------------- */

static void set_str(char **dst, const char *src) {
    char *copy = hv_strdup(src ? src : "");
    if (copy != NULL) {
        hv_free(*dst);
        *dst = copy;
    }
}

static uint32_t rand32(void) {
    uint32_t v = 0;
    if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v)) {
        v = (uint32_t)(hv_now_ms() * 2654435761u);
    }
    return v;
}

const hv_dnode_t *hv_driver_nodes(const hv_driver_t *d) { return d->nodes; }

const hv_djob_t *hv_driver_jobs(const hv_driver_t *d) { return d->jobs; }

void hv_driver_node_retire(hv_driver_t *d, uint64_t node_id) {
    hv_dnode_t *nd = node_by_id(d, node_id);
    if (nd != NULL) {
        nd->retired = 1;
    }
}

const hv_dnode_t *hv_driver_node(const hv_driver_t *d, uint64_t id) { return node_by_id(d, id); }

const hv_dnode_t *hv_driver_node_by_name(const hv_driver_t *d, const char *name) {
    return node_by_name(d, name);
}

const hv_dnode_t *hv_driver_node_find(const hv_driver_t *d, const char *name_or_id) {
    const hv_dnode_t *n = node_by_name(d, name_or_id);
    if (n == NULL && name_or_id != NULL && name_or_id[0] >= '0' && name_or_id[0] <= '9') {
        char *end = NULL;
        unsigned long long id = strtoull(name_or_id, &end, 10);
        if (end != NULL && *end == '\0') {
            n = node_by_id(d, id);
        }
    }
    return n;
}

const char *hv_driver_worker_node(hv_driver_t *d, const hv_dworker_t *w) {
    const char *n = node_name_of(w->jm.node_id, d);
    return n != NULL ? n : "?";
}

static hv_dworker_t *worker_by_id(hv_driver_t *d, uint64_t id) {
    if (d->idx_ok) {
        return hv_hmap_get_u64(&d->worker_ids, id);
    }
    for (hv_djob_t *j = d->jobs; j != NULL; j = j->next) {
        hv_dworker_t *w = worker_of(j, id);
        if (w != NULL) {
            return w;
        }
    }
    return NULL;
}

/* The worker node_id reports on (*out NULL when the head does not know it: nothing to apply).
 * HV_EPERM when it is placed on another node: a node credential acts only for its own workers. */
static hv_err worker_of_node(hv_driver_t *d, uint64_t node_id, uint64_t worker_id,
                             hv_dworker_t **out) {
    hv_dworker_t *w = worker_by_id(d, worker_id);
    if (w != NULL && w->jm.node_id != node_id) {
        return HV_EPERM;
    }
    *out = w;
    return HV_OK;
}

int hv_driver_job_active(hv_driver_t *d, uint64_t job_id) {
    hv_djob_t *j = job_by_id(d, job_id);
    return j != NULL && job_active(j);
}

void hv_driver_job_counts(hv_driver_t *d, size_t counts[HV_JOB__COUNT]) {
    memset(counts, 0, sizeof(size_t) * HV_JOB__COUNT);
    for (hv_djob_t *j = d->jobs; j != NULL; j = j->next) {
        if ((unsigned)j->jm.state < HV_JOB__COUNT) {
            counts[j->jm.state]++;
        }
    }
}

/* "rank 2 on node-b" */
static void worker_desc(hv_driver_t *d, const hv_dworker_t *w, char *buf, size_t len) {
    snprintf(buf, len, "rank %u on %s", w->jm.rank, hv_driver_worker_node(d, w));
}

/* ---- job logs ------------------------------------------------------------------------------- */

void hv_driver_log_path(const hv_driver_t *d, uint64_t job_id, char *buf, size_t len) {
    hv_joblog_path(d->logs, job_id, buf, len);
}

hv_err hv_driver_worker_log(hv_driver_t *d, uint64_t node_id, uint64_t worker_id, uint32_t stream,
                            char **lines, size_t n) {
    if (hv_am_proc_is(worker_id)) { /* an actor's process: its own log (actors_drv.c) */
        if (d->actors.log != NULL && n > 0) {
            d->actors.log(d->actors.ud, node_id, worker_id, stream, lines, n);
        }
        return HV_OK;
    }
    hv_dworker_t *w;
    HV_TRY(worker_of_node(d, node_id, worker_id, &w));
    if (w == NULL || n == 0) {
        return HV_OK;
    }
    hv_djob_t *j = w->job;
    if (hv_joblog_append(d->logs, j->log, w->jm.rank, stream, lines, n, hv_now_ms()) &&
        d->io.job_changed != NULL) {
        d->io.job_changed(d->io.ud, j->jm.id);
    }
    return HV_OK;
}

/* The job ended: a job that lost output to the caps says how much, once, in its log and its
 * events. */
static void job_log_ended(hv_driver_t *d, hv_djob_t *j) {
    if (j->log->dropped == 0 || j->log_end_said) {
        return;
    }
    j->log_end_said = 1;
    char why[160];
    snprintf(why, sizeof(why), "%s",
             j->log->capped ? "logs.max_job_bytes"
                            : "logs.max_total_bytes, logs.reserve_free_bytes or a full disk");
    char line[400];
    snprintf(line, sizeof(line), "%llu bytes of the job's output were dropped (%s)",
             (unsigned long long)j->log->dropped, why);
    hv_joblog_note(d->logs, j->log, 0, line);
    hv_driver_event(d, j->jm.id, 0, "job.note", NULL, "job %llu: %s", (unsigned long long)j->jm.id,
                    line);
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

hv_err hv_driver_create(const hv_head_config_t *cfg, hv_store_t *store, const hv_driver_io_t *io,
                        hv_driver_t **out) {
    hv_driver_t *d = hv_calloc(1, sizeof(*d));
    if (d == NULL) {
        return HV_ENOMEM;
    }
    d->cfg = cfg;
    d->store = store;
    d->io = *io;
    d->idx_ok = 1; /* the indexes are empty maps (zeroed) */
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/logs", cfg->data_dir);
    hv_joblog_limits_t lim = {.max_job_bytes = cfg->logs.max_job_bytes,
                              .max_total_bytes = cfg->logs.max_total_bytes,
                              .reserve_free_bytes = cfg->logs.reserve_free_bytes};
    hv_err rc = hv_joblogs_create(dir, hv_store_epoch(store), &lim, NULL, &d->logs);
    if (rc != HV_OK) {
        hv_free(d);
        return rc;
    }
    snprintf(dir, sizeof(dir), "%s/states", cfg->data_dir);
    if ((rc = hv_statecopies_create(dir, hv_store_epoch(store), cfg->logs.reserve_free_bytes,
                                    &d->copies)) != HV_OK) {
        hv_joblogs_destroy(d->logs);
        hv_free(d);
        return rc;
    }
    if (cfg->durable.dir != NULL || cfg->durable.upload != NULL) {
        hv_durable_opts_t o = {.dir = cfg->durable.dir,
                               .upload = cfg->durable.upload,
                               .download = cfg->durable.download,
                               .remove = cfg->durable.remove,
                               .timeout_ms = cfg->durable.timeout_s * 1000u};
        char why[700] = "";
        if ((rc = hv_durable_create(&o, &d->durable, why, sizeof(why))) != HV_OK) {
            HV_LOG(HV_LOG_ERROR, "copies", "HV-DURABLE-START", "the durable tier: %s",
                   why[0] ? why : hv_strerror(rc));
            hv_statecopies_destroy(d->copies);
            hv_joblogs_destroy(d->logs);
            hv_free(d);
            return rc;
        }
        HV_LOG(HV_LOG_NOTICE, "copies", "HV-DURABLE-START",
               "the jobs' state copies are also written to %s, every %u s at most",
               hv_durable_describe(d->durable), cfg->durable.interval_s);
    }
    hv_jm_out_init(&d->out);
    hv_evq_init(&d->events, EVENT_WAIT_MAX);
    *out = d;
    return HV_OK;
}

hv_err hv_driver_load(hv_driver_t *d) {
    HV_TRY(hv__driver_load_tables(d));
    uint64_t wall = hv_wall_ms();
    /* Drains in progress go on: workers on draining nodes that were not removed yet (they stay
     * while nobody else holds their job's state) are taken care of again. */
    for (hv_dnode_t *n = d->nodes; n != NULL; n = n->next) {
        uint64_t hold_until = 0;
        if (!hv_node_drain_after_restart(n->state, &hold_until)) {
            continue;
        }
        char what[300];
        snprintf(what, sizeof(what), "node %s (draining before the head restarted)", n->name);
        for (hv_djob_t *j = d->jobs; j != NULL; j = j->next) {
            if (job_active(j)) {
                hv_jm_drain(&j->jm, n->id, what, hold_until, wall, &d->out);
                hv__driver_apply(d, j, &d->out);
            }
        }
    }
    return HV_OK;
}

void hv_driver_stop(hv_driver_t *d) { d->stopping = 1; }

void hv_driver_destroy(hv_driver_t *d) {
    if (d == NULL) {
        return;
    }
    hv_durable_destroy(d->durable); /* first: its thread reads the jobs' files */
    hv__driver_events_fini(d);
    while (d->pending != NULL) {
        pending_t *p = d->pending;
        d->pending = p->next;
        hv_jm_out_fini(&p->out);
        hv_free(p);
    }
    while (d->jobs != NULL) {
        hv_djob_t *j = d->jobs;
        d->jobs = j->next;
        hv__driver_job_free(j);
    }
    while (d->nodes != NULL) {
        hv_dnode_t *n = d->nodes;
        d->nodes = n->next;
        if (n->last_seen_ms > n->persisted_seen_ms &&
            hv_store_node_set_state(d->store, n->id, hv_node_state_name(n->state),
                                    n->last_seen_ms) != HV_OK) {
            /* Only a later last_seen is lost: the state itself was stored when it changed. */
            HV_LOG(HV_LOG_WARN, "store", "HV-STORE-WRITE",
                   "cannot store node %s's last contact at shutdown in %s: %s", n->name,
                   hv_store_path(d->store), hv_store_last_error(d->store));
        }
        hv_free(n->name);
        hv_free(n->addrs);
        hv_free(n->labels);
        hv_free(n->instance_id);
        hv_free(n->peer);
        hv_free(n->copy_addr);
        hv_free(n->hello_running);
        hv_free(n);
    }
    hv_jm_out_fini(&d->out);
    hv__driver_copies_orphan(d); /* before the copies' files: a sync in flight reads only its own */
    hv_hmap_fini(&d->node_ids);
    hv_hmap_fini(&d->node_names);
    hv_hmap_fini(&d->job_ids);
    hv_hmap_fini(&d->worker_ids);
    hv_statecopies_destroy(d->copies);
    hv_joblogs_destroy(d->logs);
    hv_free(d);
}

/* ---- applying decisions --------------------------------------------------------------------- */

static void out_move(hv_jm_out_t *dst, hv_jm_out_t *src) {
    for (size_t i = 0; i < src->n; i++) {
        if (dst->n == dst->cap) {
            size_t cap = dst->cap ? dst->cap * 2 : 16;
            hv_jm_action_t *a = hv_realloc(dst->a, cap * sizeof(*a));
            if (a == NULL) {
                dst->oom = 1;
                hv_free(src->a[i].data);
                hv_free(src->a[i].removed);
                continue;
            }
            dst->a = a;
            dst->cap = cap;
        }
        dst->a[dst->n++] = src->a[i];
    }
    src->n = 0; /* ownership of data/removed moved */
}

/* Builds the round of j (generation gen) by rank and hands it to io->round for to[]. */
static void send_round(hv_driver_t *d, hv_djob_t *j, uint32_t gen, const uint64_t *to, size_t nto) {
    size_t n = j->jm.size;
    if (n == 0 || d->io.round == NULL) {
        return;
    }
    hv_round_peer_t *peers = hv_calloc(n, sizeof(*peers));
    uint64_t *all = NULL;
    if (peers == NULL) {
        return;
    }
    size_t found = 0;
    for (size_t i = 0; i < j->jm.nw; i++) {
        hv_dworker_t *w = (hv_dworker_t *)j->jm.w[i];
        if (w->jm.member_gen != gen || w->jm.removed || w->jm.rank >= n) {
            continue;
        }
        hv_round_peer_t *p = &peers[w->jm.rank];
        p->worker_id = w->jm.id;
        p->rank = w->jm.rank;
        p->local_rank = w->jm.local_rank;
        p->local_size = w->jm.local_size;
        p->cross_rank = w->jm.cross_rank;
        p->addr = w->addr ? w->addr : "";
        p->host = hv_driver_worker_node(d, w);
        found++;
    }
    if (found != n) {
        HV_LOG(HV_LOG_ERROR, "driver", "HV-ROUND-HOLE",
               "job %llu generation %u: %zu of %zu members found; the round is not answered",
               (unsigned long long)j->jm.id, gen, found, n);
        hv_free(peers);
        return;
    }
    if (to == NULL) {
        all = hv_calloc(n, sizeof(*all));
        if (all == NULL) {
            hv_free(peers);
            return;
        }
        for (size_t r = 0; r < n; r++) {
            all[r] = peers[r].worker_id;
        }
        to = all;
        nto = n;
    }
    hv_round_info_t info = {.job_id = j->jm.id,
                            .generation = gen,
                            .size = (uint32_t)n,
                            .cross_size = j->jm.cross_size,
                            .check_every = j->jm.p.check_every,
                            .rollback = j->jm.round_rollback,
                            .reason = j->jm.round_reason,
                            .peers = peers};
    hv_copy_row_t copy;
    hv_copy_tier_t tier = hv_jm_round_copy(&j->jm, gen);
    if (tier == HV_COPY_TIER_HEAD && hv__driver_peer_round(d, j, &info)) {
        /* A peer keeps it: its rank 0 reads it there (the head's copy is the fallback). */
    } else if (tier != HV_COPY_TIER_NONE &&
               (tier == HV_COPY_TIER_DURABLE
                    ? hv_store_durable_get(d->store, j->jm.id, &copy)
                    : hv_store_copy_get(d->store, j->jm.id, &copy)) == HV_OK) {
        /* The round that resumes the job: its rank 0 loads this copy before the first sync. From
         * the durable tier, FetchState answers "try again" until the head restored it into
         * <data>/states/ (driver_copies.c), then serves it as its own. */
        info.resume = 1;
        info.copy_generation = copy.generation;
        info.copy_commit = copy.commit;
        info.copy_size = copy.size;
        info.copy_stored_ms = copy.stored_ms;
        snprintf(info.copy_sha256, sizeof(info.copy_sha256), "%s", copy.sha256);
    }
    d->io.round(d->io.ud, &info, to, nto);
    HV_LOG(HV_LOG_INFO, "driver", "HV-RDZV-ROUND",
           "job %llu: generation %u answered to %zu of %zu workers", (unsigned long long)j->jm.id,
           gen, nto, n);
    hv_free(all);
    hv_free(peers);
}

static void send_kill(hv_driver_t *d, hv_dworker_t *w, const char *reason) {
    w->kill_deadline = hv_jm_kill_deadline(hv_now_ms(), d->cfg->kill_grace_ms);
    hv_order_t o = {.kind = HV_ORDER_KILL,
                    .worker_id = w->jm.id,
                    .job_id = w->job->jm.id,
                    .grace_ms = d->cfg->kill_grace_ms,
                    .reason = reason};
    if (d->io.order != NULL) {
        d->io.order(d->io.ud, w->jm.node_id, &o); /* no session: the kill deadline decides */
    }
}

static hv_dbl_t *bl_entry(hv_djob_t *j, uint64_t node_id, int create) {
    for (hv_dbl_t *b = j->blacklist; b != NULL; b = b->next) {
        if (b->node_id == node_id) {
            return b;
        }
    }
    if (!create) {
        return NULL;
    }
    hv_dbl_t *b = hv_calloc(1, sizeof(*b));
    if (b != NULL) {
        b->node_id = node_id;
        b->next = j->blacklist;
        j->blacklist = b;
    }
    return b;
}

/* A strike is stored before the job's blacklist counts it: when the store fails it is not
 * applied (the node is not barred on the strength of a record the head does not have), the
 * failure is logged with sqlite's words and clients are told the head cannot store its state
 * (hv_driver_store_trouble). It is not retried: the job's own decision (its rows) waits for the
 * store and is retried, and a node that fails the job again is struck again then. */
static void strike(hv_driver_t *d, hv_djob_t *j, uint64_t node_id, const char *what) {
    hv_dbl_t *b = bl_entry(j, node_id, 1);
    if (b == NULL) {
        return;
    }
    hv_dnode_t *nd = node_by_id(d, node_id);
    uint64_t inc = nd != NULL ? nd->incarnation : 0;
    hv_bl_entry_t e = hv_bl_of_agent(&b->e, b->incarnation, inc);
    uint64_t wall = hv_wall_ms();
    uint64_t cd = hv_bl_strike(&e, &j->bl, wall, rand32());
    char reason[sizeof(b->reason)];
    snprintf(reason, sizeof(reason), "%s", what);
    hv_blacklist_row_t row = {.job_id = j->jm.id,
                              .node_id = node_id,
                              .reason = reason,
                              .strikes = e.strikes,
                              .until_ms = e.until_ms,
                              .permanent = e.permanent,
                              .incarnation = inc};
    hv_err rc = hv_store_blacklist_put(d->store, &row);
    if (rc != HV_OK) {
        char msg[200];
        snprintf(msg, sizeof(msg), "store strike %u of node %llu against job %llu (not applied)",
                 e.strikes, (unsigned long long)node_id, (unsigned long long)j->jm.id);
        hv__driver_store_failed(d, rc, msg);
        return;
    }
    hv__driver_store_worked(d);
    b->e = e;
    b->incarnation = inc;
    memcpy(b->reason, reason, sizeof(b->reason));
    char text[HV_JM_REASON_MAX + 160], data[256];
    hv_bl_strike_words(&b->e, cd, j->jm.id, node_id, node_name_of(node_id, d), what, text,
                       sizeof(text), data, sizeof(data));
    hv_driver_event(d, j->jm.id, node_id, "node.blacklist", data, "%s", text);
}

static void exec_actions(hv_driver_t *d, hv_djob_t *j, hv_jm_out_t *out) {
    if (hv_job_state_terminal(j->jm.state)) {
        job_log_ended(d, j); /* before the end's own events, which let watchers see the end */
    }
    for (size_t i = 0; i < out->n; i++) {
        hv_jm_action_t *a = &out->a[i];
        hv_dworker_t *w = (hv_dworker_t *)a->w;
        switch (a->kind) {
        case HV_JA_KILL:
            if (wlive(w)) {
                send_kill(d, w, a->text);
            }
            break;
        case HV_JA_PUSH:
            if (d->io.push != NULL) {
                d->io.push(d->io.ud, j->jm.id, a->generation, a->failure, (uint32_t)a->ev.reason,
                           a->text, a->removed, a->nremoved);
            }
            break;
        case HV_JA_ROUND:
            send_round(d, j, a->generation, NULL, 0);
            break;
        case HV_JA_RESEND: {
            uint64_t id = w->jm.id;
            send_round(d, j, w->jm.member_gen, &id, 1);
            break;
        }
        case HV_JA_JOIN_REMOVED:
            if (d->io.join_answer != NULL) {
                d->io.join_answer(d->io.ud, w->jm.id, HV_OK, a->text);
            }
            break;
        case HV_JA_JOIN_REFUSED:
            if (d->io.join_answer != NULL) {
                d->io.join_answer(d->io.ud, w->jm.id, a->rc, a->text);
            }
            break;
        case HV_JA_STRIKE:
            strike(d, j, a->node_id, a->text);
            break;
        case HV_JA_EVENT:
            hv__driver_event_v(d, j->jm.id, 0, a->event, &a->ev, a->data, a->text);
            break;
        case HV_JA_ENDED: {
            if (d->actors.job_ended != NULL) {
                d->actors.job_ended(d->actors.ud, j->jm.id); /* the actors it owned end */
            }
            char why[HV_JM_REASON_MAX + 64];
            snprintf(why, sizeof(why), "job %llu has ended (%s)%s%s", (unsigned long long)j->jm.id,
                     hv_job_state_name(j->jm.state), j->jm.reason[0] ? ": " : "", j->jm.reason);
            for (size_t k = 0; k < j->jm.nw; k++) {
                hv_jm_worker_t *o = j->jm.w[k];
                if (o->joined && d->io.join_answer != NULL) {
                    o->joined = 0;
                    d->io.join_answer(d->io.ud, o->id, HV_ESTATE, why);
                }
            }
            break;
        }
        case HV_JA_FINISHED:
            hv__driver_job_forget_copy(d, j);
            if (d->io.job_finished != NULL) {
                d->io.job_finished(d->io.ud, j->jm.id);
            }
            break;
        }
    }
    if (d->io.job_changed != NULL) {
        d->io.job_changed(d->io.ud, j->jm.id);
    }
}

static pending_t *pending_of(hv_driver_t *d, const hv_djob_t *j) {
    for (pending_t *p = d->pending; p != NULL; p = p->next) {
        if (p->job == j) {
            return p;
        }
    }
    return NULL;
}

int hv_driver_job_settled(hv_driver_t *d, const hv_djob_t *j) {
    return pending_of(d, j) == NULL && !hv_evq_has_job(&d->events, j->jm.id);
}

/* Stores j, then carries out out's actions; if the store fails they wait (after any already
 * waiting for j). out is emptied either way. */
void hv__driver_apply(hv_driver_t *d, hv_djob_t *j, hv_jm_out_t *out) {
    if (out->oom) {
        HV_LOG(HV_LOG_ERROR, "driver", "HV-DRIVER-OOM",
               "job %llu: out of memory while deciding; some actions were dropped",
               (unsigned long long)j->jm.id);
    }
    if (hv_job_state_terminal(j->jm.state) && j->ended_ms == 0) {
        j->ended_ms = hv_wall_ms();
        j->dirty_row = 1;
    }
    if (j->jm.state == HV_JOB_RUNNING && j->started_ms == 0) {
        j->started_ms = hv_wall_ms();
        j->dirty_row = 1;
    }
    pending_t *p = pending_of(d, j);
    if (p == NULL && hv__driver_persist(d, j) == HV_OK) {
        exec_actions(d, j, out);
        hv_jm_out_reset(out);
        return;
    }
    if (p == NULL) {
        p = hv_calloc(1, sizeof(*p));
        if (p == NULL) {
            HV_LOG(HV_LOG_ERROR, "driver", "HV-DRIVER-OOM",
                   "job %llu: out of memory: acting without the store",
                   (unsigned long long)j->jm.id);
            exec_actions(d, j, out);
            hv_jm_out_reset(out);
            return;
        }
        hv_jm_out_init(&p->out);
        p->job = j;
        p->next = d->pending;
        d->pending = p;
    }
    out_move(&p->out, out);
    hv_jm_out_reset(out);
}

/* 1 when some job's decisions wait for the store. */
/* Retries the store for every job whose actions wait. When every one is stored, the store is
 * said to work again before their actions go out, so a watcher hears "stores again" before the
 * job's end. */
static void flush_pending(hv_driver_t *d) {
    int any =
        hv__driver_events_flush(d) > 0; /* events first: a job's actions add theirs behind them */
    for (pending_t *p = d->pending; p != NULL; p = p->next) {
        p->stored = hv__driver_persist(d, p->job) == HV_OK;
        any |= p->stored;
    }
    hv__driver_store_settle(d, hv_now_ms(), any);
    for (pending_t **pp = &d->pending; *pp != NULL;) {
        pending_t *p = *pp;
        /* Again: an action carried out just before may have changed this job (a no-op else). */
        if (!p->stored || hv__driver_persist(d, p->job) != HV_OK) {
            p->stored = 0;
            pp = &p->next;
            continue;
        }
        *pp = p->next;
        HV_LOG(HV_LOG_NOTICE, "store", "HV-STORE-OK",
               "job %llu: the store works again; %zu waiting actions go out",
               (unsigned long long)p->job->jm.id, p->out.n);
        exec_actions(d, p->job, &p->out);
        hv_jm_out_fini(&p->out);
        hv_free(p);
    }
}

/* ---- capacity and placement ----------------------------------------------------------------- */

static size_t node_count(hv_driver_t *d) {
    size_t n = 0;
    for (hv_dnode_t *nd = d->nodes; nd != NULL; nd = nd->next) {
        n++;
    }
    return n;
}

/* Whether job j may place workers on node nd now (its blacklist: blacklist.h). */
static int eligible(const hv_djob_t *j, const hv_dnode_t *nd, uint64_t wall) {
    for (const hv_dbl_t *b = j != NULL ? j->blacklist : NULL; b != NULL; b = b->next) {
        if (b->node_id == nd->id) {
            return !hv_bl_bars(&b->e, b->incarnation, nd->incarnation, wall);
        }
    }
    return 1;
}

/* The scheduler's view of the nodes for job j (NULL: any job). need_session: only nodes that
 * can take orders now. With a per-job host limit, a node's room is what the limit leaves beside
 * the job's live workers there. */
static size_t sched_nodes(hv_driver_t *d, const hv_djob_t *j, hv_sched_node_t *out,
                          hv_dnode_t **map, size_t cap, int need_session) {
    size_t n = 0;
    uint64_t wall = hv_wall_ms();
    for (hv_dnode_t *nd = d->nodes; nd != NULL && n < cap; nd = nd->next) {
        if (hv_node_hidden(nd->state, nd->retired)) {
            continue;
        }
        out[n].id = nd->id;
        out[n].slots_total = nd->acct.slots;
        out[n].slots_used = nd->acct.slots_used;
        out[n].gpus = nd->acct.gpus;
        out[n].gpus_used_mask = nd->acct.gpus_used_mask;
        int alive = nd->state == HV_NODE_ALIVE;
        out[n].schedulable = alive && (!need_session || nd->has_session) && eligible(j, nd, wall);
        if (j != NULL && j->slots_per_host > 0) {
            uint32_t mine = 0;
            for (size_t i = 0; i < j->jm.nw; i++) {
                mine += j->jm.w[i]->node_id == nd->id && hv_wk_state_active(j->jm.w[i]->state);
            }
            out[n].slots_used =
                hv_cl_used_for_job(out[n].slots_total, out[n].slots_used, j->slots_per_host, mine);
        }
        map[n] = nd;
        n++;
    }
    return n;
}

static uint32_t count_slots(hv_driver_t *d, const hv_djob_t *j, uint32_t slots_per_host,
                            int free_now) {
    size_t cap = node_count(d) + 1;
    hv_sched_node_t *sn = hv_calloc(cap, sizeof(*sn));
    hv_dnode_t **map = hv_calloc(cap, sizeof(*map));
    uint32_t slots = 0;
    if (sn != NULL && map != NULL) {
        size_t n = sched_nodes(d, j, sn, map, cap, free_now);
        uint32_t sph = j != NULL && j->slots_per_host ? 0 : slots_per_host;
        slots = free_now ? hv_sched_free(sn, n, sph) : hv_sched_capacity(sn, n, sph);
    }
    hv_free(sn);
    hv_free(map);
    return slots;
}

uint32_t hv_driver_free_slots(hv_driver_t *d, uint32_t slots_per_host) {
    return count_slots(d, NULL, slots_per_host, 1);
}

uint32_t hv_driver_capacity(hv_driver_t *d, uint32_t slots_per_host) {
    return count_slots(d, NULL, slots_per_host, 0);
}

static void send_spawn(hv_driver_t *d, hv_djob_t *j, hv_dworker_t *w, uint32_t size) {
    hv_order_t o = {.kind = HV_ORDER_SPAWN,
                    .worker_id = w->jm.id,
                    .job_id = j->jm.id,
                    .rank = w->jm.rank,
                    .size = size,
                    .local_rank = w->jm.local_rank,
                    .local_size = w->jm.local_size,
                    .generation = w->place_gen,
                    .gpu = w->gpu,
                    .spec = j->spec,
                    .spec_len = j->spec_len};
    hv_err rc = d->io.order != NULL ? d->io.order(d->io.ud, w->jm.node_id, &o) : HV_ECLOSED;
    hv_dnode_t *sn = rc == HV_OK ? node_by_id(d, w->jm.node_id) : NULL;
    if (sn != NULL && sn->reconcile_pending) {
        /* Ordered on the new Session after its hello: the agent knows this worker even though
         * the hello did not list it, so the reconcile at the next heartbeat must not call it
         * lost (a node that just joined gets work at once). */
        uint64_t *grown = hv_realloc(sn->hello_running, (sn->n_hello_running + 1) * sizeof(*grown));
        if (grown != NULL) {
            grown[sn->n_hello_running++] = w->jm.id;
            sn->hello_running = grown;
        }
    }
    if (rc != HV_OK && wlive(w)) {
        char what[300];
        worker_desc(d, w, what, sizeof(what));
        strncat(what, " was lost: its node's session closed before the spawn order",
                sizeof(what) - strlen(what) - 1);
        hv_dnode_t *nd = node_by_id(d, w->jm.node_id);
        if (nd != NULL) {
            hv_node_release(&nd->acct, w->gpu);
        }
        set_str(&w->reason, "its node's session closed before the spawn order");
        w->ended_ms = hv_wall_ms();
        hv_jm_lost(&j->jm, &w->jm, what, hv_wall_ms(), &d->out);
        hv__driver_apply(d, j, &d->out);
    }
}

/* Places n workers of j; grow_reason for rounds opened by them ("" for the first placement).
 * Returns 1 if placed. */
static int place(hv_driver_t *d, hv_djob_t *j, uint32_t n, const char *why) {
    size_t cap = node_count(d) + 1;
    hv_sched_node_t *sn = hv_calloc(cap, sizeof(*sn));
    hv_dnode_t **map = hv_calloc(cap, sizeof(*map));
    hv_sched_slot_t *slots = hv_calloc(n, sizeof(*slots));
    hv_jm_slot_t *js = hv_calloc(n, sizeof(*js));
    hv_dworker_t **ws = hv_calloc(n, sizeof(*ws));
    int placed = 0;
    uint32_t made = 0;
    if (sn == NULL || map == NULL || slots == NULL || js == NULL || ws == NULL) {
        goto out;
    }
    size_t nn = sched_nodes(d, j, sn, map, cap, 1);
    hv_sched_req_t req = {.np = n, .slots_per_host = 0};
    if (hv_sched_place(sn, nn, &req, slots) != HV_OK) {
        goto out;
    }
    for (; made < n; made++) {
        if ((ws[made] = hv_calloc(1, sizeof(*ws[made]))) == NULL) {
            goto out;
        }
        js[made] = (hv_jm_slot_t){.node_id = map[slots[made].node]->id,
                                  .rank = slots[made].rank,
                                  .local_rank = slots[made].local_rank,
                                  .local_size = slots[made].local_size};
    }
    int first = j->jm.state == HV_JOB_PENDING;
    hv_job_state_t state; /* jm is the first member of a worker */
    uint32_t size = hv_jm_place(&j->jm, js, (hv_jm_worker_t *const *)ws, n, &state);
    /* Store every worker and the job's new state in one transaction, then send orders. */
    hv_err rc = hv_store_begin(d->store);
    for (uint32_t r = 0; r < n && rc == HV_OK; r++) {
        hv_dworker_t *w = ws[r];
        w->job = j;
        w->gpu = slots[r].gpu;
        w->attempt = 1;
        w->place_gen = j->jm.generation;
        w->reason = hv_strdup("");
        w->addr = hv_strdup("");
        hv_worker_row_t row;
        hv__driver_worker_row(w, &row);
        row.job_id = j->jm.id;
        rc = hv_store_worker_insert(d->store, &row);
        w->jm.id = row.id;
    }
    if (rc == HV_OK && first) {
        hv_job_row_t row;
        hv__driver_job_row(j, &row);
        row.state = (char *)hv_job_state_name(state);
        rc = hv_store_job_update(d->store, &row);
    }
    if (rc == HV_OK) {
        rc = hv_store_commit(d->store);
    }
    if (rc != HV_OK) {
        hv__driver_store_failed(d, rc, "place a job's workers");
        hv_store_rollback(d->store);
        goto out;
    }
    made = 0;                                    /* the job has them now */
    hv_jm_worker_t **jw = (hv_jm_worker_t **)ws; /* jm is the first member */
    if (hv_jm_placed(&j->jm, jw, n, hv_wall_ms(), &d->out) != HV_OK) {
        HV_LOG(HV_LOG_ERROR, "driver", "HV-DRIVER-OOM", "job %llu: out of memory placing workers",
               (unsigned long long)j->jm.id);
    }
    hv__driver_index_workers(d, j);
    if (why != NULL && why[0] != '\0') {
        snprintf(j->jm.grow_reason, sizeof(j->jm.grow_reason), "%s", why);
    }
    for (uint32_t r = 0; r < n; r++) {
        ws[r]->jm.dirty = 0;
        hv_dnode_t *nd = node_by_id(d, ws[r]->jm.node_id);
        if (nd != NULL) {
            hv_node_claim(&nd->acct, ws[r]->gpu);
        }
    }
    j->jm.dirty = 0;
    char hosts[512] = "";
    for (uint32_t r = 0; r < n; r++) {
        if (ws[r]->jm.local_rank == 0) {
            size_t l = strlen(hosts);
            snprintf(hosts + l, sizeof(hosts) - l, "%s%s x%u", l ? ", " : "",
                     hv_driver_worker_node(d, ws[r]), ws[r]->jm.local_size);
        }
    }
    if (first) {
        hv_ev_fields_t f = {.job_state = HV_EV_JOB_STATE(HV_JOB_PLACING)};
        hv_driver_event_f(d, j->jm.id, 0, "job.state", &f, NULL,
                          "job %llu placing %u worker%s on %s%s", (unsigned long long)j->jm.id, n,
                          n == 1 ? "" : "s", hosts,
                          n < j->np ? " (fewer than -np, at least --min-np: it grows as slots "
                                      "free up)"
                                    : "");
    } else {
        hv_driver_event(d, j->jm.id, 0, "job.grow", NULL, "job %llu grows by %u workers on %s (%s)",
                        (unsigned long long)j->jm.id, n, hosts, why);
    }
    hv__driver_apply(d, j, &d->out);
    for (uint32_t r = 0; r < n && !hv_job_state_terminal(j->jm.state); r++) {
        send_spawn(d, j, ws[r], size);
    }
    placed = 1;
out:
    for (uint32_t i = 0; i < made; i++) {
        hv__driver_worker_free(ws[i]);
    }
    hv_free(sn);
    hv_free(map);
    hv_free(slots);
    hv_free(js);
    hv_free(ws);
    return placed;
}

/* Why an elastic job may grow now, for its next round's reason. */
static void grow_reason(hv_driver_t *d, const hv_djob_t *j, char *buf, size_t len) {
    uint64_t wall = hv_wall_ms();
    for (const hv_dbl_t *b = j->blacklist; b != NULL; b = b->next) {
        hv_dnode_t *nd = node_by_id(d, b->node_id);
        if (nd != NULL && hv_bl_lifted(&b->e, b->incarnation, nd->incarnation, wall) &&
            hv_node_takes_work(nd->state, nd->has_session) &&
            nd->acct.slots_used < nd->acct.slots) {
            snprintf(buf, len, "cooldown of node %s ended", nd->name);
            return;
        }
    }
    snprintf(buf, len, "free slots");
}

static void schedule_jobs(hv_driver_t *d);

void hv_driver_schedule(hv_driver_t *d) {
    if (d->stopping || d->sched_defer) {
        return;
    }
    schedule_jobs(d);
    if (d->actors.schedule != NULL) {
        d->actors.schedule(d->actors.ud);
    }
}

/* ---- the actors' hooks (head/driver/actors_drv.c) --------------------------------------------- */

void hv_driver_set_actor_hooks(hv_driver_t *d, const hv_driver_actor_hooks_t *h) {
    memset(&d->actors, 0, sizeof(d->actors));
    if (h != NULL) {
        d->actors = *h;
    }
}

hv_err hv_driver_order(hv_driver_t *d, uint64_t node_id, const hv_order_t *o) {
    return d->io.order != NULL ? d->io.order(d->io.ud, node_id, o) : HV_ECLOSED;
}

void hv_driver_node_take(hv_driver_t *d, uint64_t node_id, int gpu, int give_back) {
    hv_dnode_t *n = node_by_id(d, node_id);
    if (n != NULL) {
        if (give_back) {
            hv_node_release(&n->acct, gpu);
        } else {
            hv_node_claim(&n->acct, gpu);
        }
    }
}

uint32_t hv_driver_kill_grace_ms(const hv_driver_t *d) { return d->cfg->kill_grace_ms; }

int hv_driver_node_actor_state_is(hv_driver_t *d, uint64_t node_id, const char *digest) {
    return d->actors.node_state_is != NULL &&
           d->actors.node_state_is(d->actors.ud, node_id, digest);
}

int hv_driver_node_actor_specs_any(hv_driver_t *d, uint64_t node_id,
                                   int (*fn)(const uint8_t *spec, size_t len, void *fud),
                                   void *fud) {
    return d->actors.node_specs_any != NULL &&
           d->actors.node_specs_any(d->actors.ud, node_id, fn, fud);
}

struct hv_joblogs_s *hv_driver_joblogs(hv_driver_t *d) {
    return d->logs;
}

void hv_driver_actor_figures(hv_driver_t *d, uint64_t node_id, uint64_t proc, const hv_callfig_t *f,
                             int final) {
    if (hv_am_proc_is(proc) && d->actors.figures != NULL) {
        d->actors.figures(d->actors.ud, node_id, proc, f, final);
    }
}

hv_err hv_driver_actor_address(hv_driver_t *d, uint64_t node_id, uint64_t proc, int pid,
                               const char *address) {
    if (d->actors.started != NULL) {
        d->actors.started(d->actors.ud, node_id, proc, pid, address);
    }
    return HV_OK;
}

/* One pass of the queue the old way (cluster.h): pending jobs in order, then growth; when the
 * head is configured so (fleet.policy: fcfs) or the fleet policy could not decide. */
static void schedule_fcfs(hv_driver_t *d) {
    hv_cl_pass_t pass = {0};
    for (hv_djob_t *j = d->jobs; j != NULL; j = j->next) {
        if (j->jm.state != HV_JOB_PENDING || pass.blocked) {
            continue;
        }
        uint32_t n = hv_cl_start(&pass, j->np, hv_np_least(j->jm.p.elastic, j->np, j->jm.p.min_np),
                                 count_slots(d, j, j->slots_per_host, 1));
        if (n > 0 && !place(d, j, n, "")) {
            hv_cl_start_failed(&pass);
        }
    }
    for (hv_djob_t *j = d->jobs; j != NULL && !pass.blocked; j = j->next) {
        uint32_t want = hv_jm_wants(&j->jm);
        uint32_t n = want > 0 ? hv_cl_grow(&pass, want, count_slots(d, j, 0, 1)) : 0;
        if (n > 0) {
            char why[200];
            grow_reason(d, j, why, sizeof(why));
            place(d, j, n, why);
        }
    }
}

/* An event about a fleet decision the driver acted on (kind fleet.admit, fleet.resume: a
 * preempted job admitted again, fleet.shrink, fleet.grow): the reason's word, the job it names, the sizes before and after, as typed data. */
static void fleet_event(hv_driver_t *d, hv_djob_t *j, const char *kind, hv_ev_reason_t code,
                        uint32_t from, uint32_t to, const hv_fl_dec_t *dc) {
    char words[200], data[320];
    hv__driver_fleet_why(dc->reason, dc->cause, words, sizeof(words));
    snprintf(data, sizeof(data),
             "{\"reason\":\"%s\",\"cause\":%llu,\"from\":%u,\"to\":%u,\"target\":%u,"
             "\"priority\":%d,\"borrowed\":%u}",
             hv_fl_reason_name(dc->reason), (unsigned long long)dc->cause, from, to, dc->target,
             (int)j->priority, dc->borrowed);
    hv_ev_fields_t f = {.reason = code};
    hv_driver_event_f(d, j->jm.id, 0, kind, &f, data, "job %llu%s: %u -> %u workers (fleet: %s)",
                      (unsigned long long)j->jm.id,
                      strcmp(kind, "fleet.resume") == 0 ? " resumes from its state copy" : "", from,
                      to, words);
}

/* Which n workers of j leave: on the nodes the policy's moves name first, then any; the
 * youngest first, rank 0 of the last round last. Returns how many were chosen. */
static size_t shrink_pick(const hv_djob_t *j, const hv_fl_out_t *fo, uint32_t n, uint64_t *ids) {
    size_t got = 0;
    for (int pass = 0; pass < 3 && got < n; pass++) {
        for (size_t m = 0; m < fo->nmoves && got < n && pass < 2; m++) {
            const hv_fl_move_t *mv = &fo->moves[m];
            if (mv->job_id != j->jm.id || mv->delta >= 0) {
                continue;
            }
            uint32_t want = (uint32_t)(-mv->delta), took = 0;
            for (size_t i = j->jm.nw; i-- > 0 && took < want && got < n;) {
                const hv_jm_worker_t *w = j->jm.w[i];
                int chosen = 0;
                for (size_t c = 0; c < got; c++) {
                    chosen |= ids[c] == w->id;
                }
                if (chosen || w->node_id != mv->node_id || !hv_wk_state_active(w->state) ||
                    w->removed || w->evict || (pass == 0 && w->rank == 0 && w->member_gen)) {
                    continue;
                }
                ids[got++] = w->id;
                took++;
            }
        }
        for (size_t i = j->jm.nw; pass == 2 && i-- > 0 && got < n;) {
            const hv_jm_worker_t *w = j->jm.w[i];
            int chosen = 0;
            for (size_t c = 0; c < got; c++) {
                chosen |= ids[c] == w->id;
            }
            if (!chosen && hv_wk_state_active(w->state) && !w->removed && !w->evict &&
                !(w->rank == 0 && w->member_gen)) {
                ids[got++] = w->id;
            }
        }
    }
    return got;
}

/* How long a job stopping for another waits for its next commit before it is stopped anyway
 * (its steps since its newest copy are then redone from that copy). */
#define PREEMPT_COMMIT_WAIT_MS 5000u

/* The policy stops j (PREEMPTED, stored with its row) to give its slots to job dc->cause: a
 * running elastic --preemptible job with a state copy is stopped whole at its next commit, make
 * before break as a shrink is (hv_jm_preempt_begin): a round is pushed whose members re-join at
 * their next membership check, rank 0 first sending a copy of that commit's state; once every
 * member is there (or after PREEMPT_COMMIT_WAIT_MS) hv__driver_fleet_preempt_due stops it
 * (hv_jm_preempt: its workers are taken out and killed, it is pending again, its next round the
 * resume round; stored first, then the kills go out). It waits without a pending timeout; when
 * the policy admits it again its new workers resume from the newest copy (fleet.resume). A job
 * that cannot be stopped now (a round open, completing, no copy) is left running: the next pass
 * decides again. */
static void fleet_preempt(hv_driver_t *d, hv_djob_t *j, const hv_fl_dec_t *dc, uint32_t in,
                          uint64_t wall) {
    if (!j->preemptible || dc->cause == 0 || j->jm.state != HV_JOB_RUNNING ||
        j->jm.preempt_until != 0) {
        return;
    }
    char why[200];
    snprintf(why, sizeof(why), "stops at its next commit for job %llu, of a higher priority",
             (unsigned long long)dc->cause);
    j->dirty_row = 1;
    if (hv_jm_preempt_begin(&j->jm, why, wall, wall + PREEMPT_COMMIT_WAIT_MS, &d->out) != HV_OK) {
        hv_jm_out_reset(&d->out);
        return;
    }
    j->preempt_cause = dc->cause;
    j->preempt_from = in;
    hv__driver_apply(d, j, &d->out);
}

void hv__driver_fleet_preempt_due(hv_driver_t *d, hv_djob_t *j) {
    uint64_t wall = hv_wall_ms();
    int due = hv_jm_preempt_due(&j->jm, wall);
    if (due == 0) {
        return;
    }
    uint64_t cause = j->preempt_cause;
    uint64_t waited = wall + PREEMPT_COMMIT_WAIT_MS > j->jm.preempt_until
                          ? wall + PREEMPT_COMMIT_WAIT_MS - j->jm.preempt_until
                          : 0;
    int fresh = j->jm.copy.generation > j->jm.preempt_copy.generation ||
                j->jm.copy.commit > j->jm.preempt_copy.commit;
    char why[200];
    snprintf(why, sizeof(why),
             "preempted for job %llu, of a higher priority: it resumes later "
             "from its state copy",
             (unsigned long long)cause);
    uint64_t before = j->resized_ms;
    j->resized_ms = wall; /* waiting since: the preemption (job_input) */
    j->dirty_row = 1;
    if (hv_jm_preempt(&j->jm, why, wall, &d->out) != HV_OK) {
        /* Completing, ended: it runs on; its round forms as any other. */
        j->resized_ms = before;
        hv_jm_out_reset(&d->out);
        j->jm.preempt_until = 0;
        j->preempt_cause = 0;
        hv_jm_tick(&j->jm, wall, &d->out);
        hv__driver_apply(d, j, &d->out);
        return;
    }
    j->wait_deadline = UINT64_MAX; /* no pending timeout: it was admitted once */
    j->fleet_grant = 0;
    j->preempt_cause = 0;
    /* What stopped it, stored with its row (the policy's later passes keep it: driver_fleet.c). */
    j->fleet_decided = 1;
    j->fleet_target = 0;
    j->fleet_reason = HV_FL_PREEMPTED;
    j->fleet_cause = cause;
    char data[480];
    hv_copy_tier_t tier = hv_jm_copy_tier(&j->jm);
    const hv_jm_copy_t *c = tier == HV_COPY_TIER_DURABLE ? &j->jm.durable : &j->jm.copy;
    snprintf(data, sizeof(data),
             "{\"reason\":\"%s\",\"cause\":%llu,\"from\":%u,\"to\":0,\"priority\":%d,"
             "\"tier\":\"%s\",\"copy_generation\":%u,\"copy_commit\":%llu,\"resume_gen\":%u,"
             "\"at_commit\":%s,\"new_copy\":%s,\"waited_ms\":%llu}",
             hv_fl_reason_name(HV_FL_PREEMPTED), (unsigned long long)cause, j->preempt_from,
             (int)j->priority, hv_copy_tier_name(tier), c->generation,
             (unsigned long long)c->commit, j->jm.resume_gen, due == 1 ? "true" : "false",
             fresh ? "true" : "false", (unsigned long long)waited);
    hv_ev_fields_t f = {.reason = HV_EV_PREEMPT, .generation = j->jm.generation};
    hv_driver_event_f(d, j->jm.id, 0, "fleet.preempt", &f, data,
                      "job %llu preempted for job %llu: its %u workers stop %s; it waits to "
                      "resume from its state copy (generation %u, commit %llu)",
                      (unsigned long long)j->jm.id, (unsigned long long)cause, j->preempt_from,
                      due == 1 ? (fresh ? "at a commit, its copy stored"
                                        : "at a commit, with no newer copy (steps since the copy "
                                          "are redone)")
                               : "now: no commit came within the bound (steps since the copy "
                                 "are redone)",
                      c->generation, (unsigned long long)c->commit);
    hv__driver_apply(d, j, &d->out);
}

/* Acts on one stored decision about j: shrinks first (the workers leave at the job's next
 * commit, make before break), then admissions and growth onto what is free now (slots that
 * leaving workers hold free up as they go: a later pass places there). */
static void fleet_act(hv_driver_t *d, hv_djob_t *j, const hv_fl_dec_t *dc, const hv_fl_out_t *fo,
                      int shrinks) {
    uint32_t in = 0;
    for (size_t i = 0; i < j->jm.nw; i++) {
        const hv_jm_worker_t *w = j->jm.w[i];
        in += hv_wk_state_active(w->state) && !w->removed && !w->evict;
    }
    uint64_t wall = hv_wall_ms();
    if (shrinks && dc->reason == HV_FL_PREEMPTED) {
        fleet_preempt(d, j, dc, in, wall);
        return;
    }
    if (shrinks) {
        int shrunk = dc->reason == HV_FL_SHRUNK_ADMIT || dc->reason == HV_FL_SHRUNK_PRIORITY ||
                     dc->reason == HV_FL_SHRUNK_RECLAIM || dc->reason == HV_FL_SHRUNK_SHARE;
        if (!shrunk || dc->cause == 0 || j->jm.state != HV_JOB_RUNNING || !j->jm.p.elastic ||
            dc->target >= in || dc->target == 0) {
            /* a fixed-size job is never shrunk; stopping one is not wired yet; and a shrink
             * that gives workers to no other job (the policy fitting a job to a node that was
             * lost or is suspected) is the failure path's to make, with its rollback */
            return;
        }
        uint32_t n = in - dc->target;
        uint64_t *ids = hv_calloc(n, sizeof(*ids));
        if (ids == NULL || shrink_pick(j, fo, n, ids) != n) {
            hv_free(ids);
            return;
        }
        char why[200];
        hv__driver_fleet_why(dc->reason, dc->cause, why, sizeof(why));
        uint64_t before = j->resized_ms;
        j->resized_ms = wall;
        j->dirty_row = 1;
        if (hv_jm_shrink(&j->jm, ids, n, why, wall, &d->out) == HV_OK) {
            fleet_event(d, j, "fleet.shrink", HV_EV_SHRINK, in, dc->target, dc);
            hv__driver_apply(d, j, &d->out);
        } else {
            j->resized_ms = before;
            hv_jm_out_reset(&d->out);
        }
        hv_free(ids);
        return;
    }
    if (j->jm.state == HV_JOB_PENDING && dc->target > 0) {
        if (count_slots(d, j, j->slots_per_host, 1) < dc->target) {
            return; /* the slots it was given are still held by leaving workers */
        }
        /* An elastic job starts at -np, as hvsubmit announced, and grows to the rest of what
         * it was given after its first round. */
        uint32_t n = dc->target;
        if (j->jm.p.elastic && j->np < n && j->np >= j->jm.p.min_np && j->np > 0) {
            n = j->np;
        }
        uint64_t before = j->resized_ms;
        j->resized_ms = wall;
        j->dirty_row = 1;
        j->fleet_grant = dc->target > n ? dc->target : 0;
        int resuming = hv_jm_preempted(&j->jm);
        if (place(d, j, n, "")) {
            fleet_event(d, j, resuming ? "fleet.resume" : "fleet.admit",
                        resuming ? HV_EV_RESUME : HV_EV_START, 0, n, dc);
        } else {
            j->resized_ms = before;
        }
        return;
    }
    if ((j->jm.state == HV_JOB_RUNNING || j->jm.state == HV_JOB_PLACING) && j->jm.p.elastic &&
        dc->target > in && dc->reason != HV_FL_PREEMPTED) {
        uint32_t want = hv_jm_wants(&j->jm);
        uint32_t n = dc->target - in;
        n = n > want ? want : n;
        uint32_t free = count_slots(d, j, 0, 1);
        n = n > free ? free : n;
        if (n == 0) {
            return;
        }
        char why[200];
        grow_reason(d, j, why, sizeof(why));
        uint64_t before = j->resized_ms;
        j->resized_ms = wall;
        j->dirty_row = 1;
        if (place(d, j, n, why)) {
            if (in + n >= j->fleet_grant) {
                j->fleet_grant = 0;
            }
            fleet_event(d, j, "fleet.grow", HV_EV_GROW, in, in + n, dc);
        } else {
            j->resized_ms = before;
        }
    }
}

/* One pass of the queue: the fleet policy decides (driver_fleet.c, stored first), then the
 * driver acts: shrinks, then admissions and growth in the policy's order of the jobs. */
static void schedule_jobs(hv_driver_t *d) {
    if (d->cfg->fleet.fcfs) { /* fleet.policy: fcfs, the old queue (for comparisons) */
        schedule_fcfs(d);
        return;
    }
    hv_driver_fleet_t f;
    hv_err rc = hv__driver_fleet_decide(d, &f);
    if (rc != HV_OK) {
        if (!f.unstored) {
            schedule_fcfs(d);
        }
        hv__driver_fleet_fini(&f);
        return;
    }
    for (int shrinks = 1; shrinks >= 0; shrinks--) {
        for (size_t i = 0; i < f.njobs && i < f.out.ndec; i++) {
            if (job_active(f.jobs[i])) {
                fleet_act(d, f.jobs[i], &f.out.dec[i], &f.out, shrinks);
            }
        }
    }
    hv__driver_fleet_fini(&f);
}

void hv_driver_set_room(hv_driver_t *d, hv_driver_room_fn fn, void *ud) {
    d->room = fn;
    d->room_ud = ud;
}

size_t hv_driver_demand(hv_driver_t *d, hv_driver_demand_t *out, size_t cap) {
    size_t nj = 0;
    for (hv_djob_t *j = d->jobs; j != NULL; j = j->next) {
        nj++;
    }
    hv_cl_job_t *jobs = hv_calloc(nj ? nj : 1, sizeof(*jobs));
    if (d->stopping || jobs == NULL) {
        hv_free(jobs);
        return 0;
    }
    size_t n = 0;
    uint32_t pool = hv_driver_free_slots(d, 0), adds = 0;
    for (hv_djob_t *j = d->jobs; j != NULL; j = j->next) {
        /* The plan: the fleet policy's last decision about the job (driver_fleet.c). */
        uint32_t live = 0;
        for (size_t i = 0; i < j->jm.nw; i++) {
            const hv_dworker_t *w = (const hv_dworker_t *)j->jm.w[i];
            live += wlive(w) && !w->jm.removed && !w->jm.evict;
        }
        int planned = j->fleet_decided && job_active(j);
        jobs[n++] = (hv_cl_job_t){.id = j->jm.id,
                                  .pending = j->jm.state == HV_JOB_PENDING,
                                  .elastic = j->jm.p.elastic,
                                  .np = j->np,
                                  .target = hv_jm_target(&j->jm.p),
                                  .wants = hv_jm_wants(&j->jm),
                                  .planned = planned,
                                  .plan = j->fleet_target,
                                  .quota_bound = j->fleet_reason == HV_FL_WAIT_QUOTA,
                                  .priority = j->priority,
                                  .size = live};
        if (planned && j->fleet_target > live) {
            adds += j->fleet_target - live; /* the free slots the plan gives already */
        }
    }
    n = hv_cl_demand(jobs, n, pool > adds ? pool - adds : 0, out, cap);
    hv_free(jobs);
    return n;
}

/* ---- submit and cancel ---------------------------------------------------------------------- */

hv_err hv_driver_submit(hv_driver_t *d, const hv_job_submit_t *s, uint64_t *job_id,
                        uint32_t *np_out, char *err, size_t errlen) {
    const hv_head_config_t *c = d->cfg;
    hv_cl_ask_t ask = {.np = s->np,
                       .elastic = s->elastic,
                       .min_np = s->min_np,
                       .max_np = s->max_np,
                       .target_np = s->target_np,
                       .max_resets = s->max_resets,
                       .max_resets_set = s->max_resets_set,
                       .timeout_s = s->timeout_s,
                       .slots_per_host = s->slots_per_host,
                       .check_every = s->check_every,
                       .elastic_timeout_s = s->elastic_timeout_s,
                       .cooldown_set = s->cooldown_set,
                       .cooldown_min_s = s->cooldown_min_s,
                       .cooldown_max_s = s->cooldown_max_s};
    hv_cl_room_t room = {.capacity = hv_driver_capacity(d, s->slots_per_host),
                         .free = hv_driver_free_slots(d, s->slots_per_host),
                         .autoscaler = d->room != NULL,
                         .more = d->room != NULL ? d->room(d->room_ud) : 0};
    hv_cl_defaults_t def = {.max_resets = c->elastic.max_resets,
                            .wait_timeout_s = c->job_wait_timeout_s,
                            .check_every = c->elastic.check_every,
                            .elastic_timeout_s = c->elastic.elastic_timeout_s,
                            .cooldown_min_s = c->elastic.blacklist_cooldown_s,
                            .cooldown_max_s = c->elastic.blacklist_max_cooldown_s,
                            .max_strikes = c->elastic.blacklist_max_strikes};
    hv_cl_settings_t set;
    HV_TRY(hv_cl_submit(&ask, &room, &def, &set, err, errlen));
    int elastic = set.elastic;
    uint32_t np = set.np;
    if (s->preemptible && !elastic) {
        /* Stopping a job is only done to resume it from a state copy, which only an elastic
         * job's commits make (docs/scheduling.md, "Preemptible jobs"). */
        snprintf(err, errlen,
                 "--preemptible: a fixed-size job cannot be stopped and resumed (it has no state "
                 "copy to resume from); submit it elastic (--min-np/--max-np, training in "
                 "hv_elastic_run with state copies) or without --preemptible");
        return HV_EINVAL;
    }
    hv_job_row_t row;
    memset(&row, 0, sizeof(row));
    row.name = (char *)s->name;
    row.state = "pending";
    row.reason = "";
    row.spec = (uint8_t *)s->spec;
    row.spec_len = s->spec_len;
    row.np = np;
    row.min_np = set.min_np;
    row.max_np = set.max_np;
    row.target_np = set.target_np;
    row.max_resets = set.max_resets;
    row.timeout_s = set.timeout_s;
    row.submitted_ms = hv_wall_ms();
    row.elastic = elastic;
    row.check_every = set.check_every;
    row.elastic_timeout_s = set.elastic_timeout_s;
    row.rdzv_timeout_s = c->elastic.rendezvous_timeout_s;
    row.cooldown_min_s = set.cooldown_min_s;
    row.cooldown_max_s = set.cooldown_max_s;
    row.max_strikes = set.max_strikes;
    row.slots_per_host = s->slots_per_host;
    row.round_reason = "";
    row.artifacts = s->artifacts;
    row.nartifacts = s->nartifacts;
    row.priority = s->priority;
    row.ns = (char *)(s->ns != NULL ? s->ns : "");
    if (!s->priority_set && s->priority == 0) {
        const hv_head_ns_t *cns = hv_head_config_ns(c, s->ns);
        if (cns == NULL) {
            cns = hv_head_config_ns(c, "default"); /* an unlisted namespace counts there */
        }
        row.priority = cns != NULL ? cns->priority : 0; /* its namespace's default priority */
    }
    row.preemptible = s->preemptible;
    hv_err rc = hv_store_job_insert(d->store, &row);
    if (rc != HV_OK) {
        hv__driver_store_failed(d, rc, "insert a job");
        snprintf(err, errlen, "%s; the job was not submitted: try again once there is room",
                 d->store_why);
        return HV_EUNAVAIL;
    }
    hv__driver_store_worked(d);
    hv_job_row_t copy = row;
    copy.name = hv_strdup(s->name);
    copy.spec = hv_malloc(s->spec_len ? s->spec_len : 1);
    copy.round_reason = NULL;
    if (copy.name == NULL || copy.spec == NULL) {
        hv_free(copy.name);
        hv_free(copy.spec);
        snprintf(err, errlen, "out of memory");
        return HV_ENOMEM;
    }
    if (s->spec_len > 0) {
        memcpy(copy.spec, s->spec, s->spec_len);
    }
    hv_djob_t *j;
    rc = hv__driver_job_from_row(d, &copy, &j);
    hv_free(copy.name);
    hv_free(copy.spec);
    if (rc != HV_OK) {
        snprintf(err, errlen, "out of memory");
        return rc;
    }
    j->wait_deadline = hv_cl_wait_deadline(hv_now_ms(), 0, 0, j->timeout_s);
    hv_joblog_open(d->logs, j->log, j->jm.id);
    hv__driver_job_link(d, j);
    hv_ev_fields_t f = {.job_state = HV_EV_JOB_STATE(HV_JOB_PENDING)};
    if (elastic) {
        hv_driver_event_f(d, j->jm.id, 0, "job.state", &f, NULL,
                          "job %llu (%s) submitted: %u workers (elastic %u..%u, max resets %u, "
                          "check every %u commits), pending",
                          (unsigned long long)j->jm.id, j->name, np, row.min_np, row.max_np,
                          row.max_resets, row.check_every);
    } else {
        hv_driver_event_f(d, j->jm.id, 0, "job.state", &f, NULL,
                          "job %llu (%s) submitted: %u workers, pending",
                          (unsigned long long)j->jm.id, j->name, np);
    }
    *job_id = j->jm.id;
    *np_out = np;
    hv_driver_schedule(d);
    return HV_OK;
}

hv_err hv_driver_cancel(hv_driver_t *d, uint64_t job_id) {
    hv_djob_t *j = hv__driver_job(d, job_id);
    if (j == NULL) {
        return HV_ENOTFOUND;
    }
    if (job_active(j)) {
        hv_jm_end(&j->jm, HV_JOB_CANCELLED, HV_EV_CANCELLED, "cancelled by the user", &d->out);
        hv__driver_apply(d, j, &d->out);
    }
    return HV_OK;
}

/* ---- workers -------------------------------------------------------------------------------- */

hv_err hv_driver_worker_started(hv_driver_t *d, uint64_t node_id, uint64_t worker_id, int pid) {
    if (hv_am_proc_is(worker_id)) {
        return hv_driver_actor_address(d, node_id, worker_id, pid, NULL);
    }
    hv_dworker_t *w;
    HV_TRY(worker_of_node(d, node_id, worker_id, &w));
    if (w == NULL || w->jm.state != HV_WK_STARTING) {
        return HV_OK; /* a repeat, or it already ended */
    }
    w->pid = pid;
    w->started_ms = hv_wall_ms();
    HV_LOG(HV_LOG_INFO, "driver", "HV-WORKER-START", "job %llu worker %llu started on %s (pid %d)",
           (unsigned long long)w->job->jm.id, (unsigned long long)w->jm.id,
           hv_driver_worker_node(d, w), pid);
    hv_jm_started(&w->job->jm, &w->jm, hv_wall_ms(), &d->out);
    hv__driver_apply(d, w->job, &d->out);
    return HV_OK;
}

/* Common end of a worker: releases its slot, records why. */
static void worker_gone(hv_driver_t *d, hv_dworker_t *w, const char *reason) {
    hv_dnode_t *nd = node_by_id(d, w->jm.node_id);
    if (nd != NULL) {
        hv_node_release(&nd->acct, w->gpu);
    }
    set_str(&w->reason, reason);
    w->ended_ms = hv_wall_ms();
    w->kill_deadline = 0;
}

void hv_driver_actor_state_saved(hv_driver_t *d, uint64_t node_id, uint64_t worker_id,
                                 const char *digest, uint64_t size, const char *why) {
    if (hv_am_proc_is(worker_id) && d->actors.state_saved != NULL) {
        d->actors.state_saved(d->actors.ud, node_id, worker_id, digest, size, why);
    }
}

hv_err hv_driver_worker_exited(hv_driver_t *d, uint64_t node_id, uint64_t worker_id, int exit_code,
                               int term_signal, const char *reason) {
    if (hv_am_proc_is(worker_id)) {
        if (d->actors.exited != NULL) {
            d->actors.exited(d->actors.ud, node_id, worker_id, exit_code, term_signal, reason);
        }
        return HV_OK;
    }
    hv_dworker_t *w;
    HV_TRY(worker_of_node(d, node_id, worker_id, &w));
    char who[300], what[600];
    if (w != NULL && !wlive(w) && w->dead_seen) {
        /* Ended already on a ring neighbour's death watch: the decisions are made; its real
         * status is recorded (the workers table shows it) and told, once. One may be undone:
         * a resume of a job whose last member was lost this way, when the status shows the
         * program failed on its own (hv_jm_reported). */
        w->dead_seen = 0;
        w->jm.exit_code = exit_code;
        w->jm.term_signal = term_signal;
        w->jm.dirty = 1;
        (void)hv__driver_persist(d, w->job); /* a record (acted on only as below) */
        worker_desc(d, w, who, sizeof(who));
        hv_jm_exit_what(what, sizeof(what), who, exit_code, term_signal, reason);
        hv_driver_event(d, w->job->jm.id, w->jm.node_id, "job.note", NULL,
                        "%s (its agent's report, %llu ms after its ring neighbour saw it die)",
                        what, (unsigned long long)(hv_wall_ms() - w->ended_ms));
        hv_jm_reported(&w->job->jm, &w->jm, hv_wall_ms(), &d->out);
        hv__driver_apply(d, w->job, &d->out);
        hv_driver_schedule(d);
        return HV_OK;
    }
    if (w == NULL || !wlive(w)) {
        return HV_OK;
    }
    worker_desc(d, w, who, sizeof(who));
    hv_jm_exit_what(what, sizeof(what), who, exit_code, term_signal, reason);
    worker_gone(d, w, reason);
    hv_jm_exited(&w->job->jm, &w->jm, exit_code, term_signal, what, hv_wall_ms(), &d->out);
    hv__driver_apply(d, w->job, &d->out);
    hv_driver_schedule(d);
    return HV_OK;
}

static void worker_lost(hv_driver_t *d, hv_dworker_t *w, const char *reason) {
    if (!wlive(w)) {
        return;
    }
    char who[300], what[700];
    worker_desc(d, w, who, sizeof(who));
    snprintf(what, sizeof(what), "%s was lost: %s", who, reason);
    worker_gone(d, w, reason);
    hv_ev_fields_t f = {.worker_id = w->jm.id, .rank = w->jm.rank};
    hv_driver_event_f(d, w->job->jm.id, w->jm.node_id, "worker.lost", &f, NULL, "%s", what);
    hv_jm_lost(&w->job->jm, &w->jm, what, hv_wall_ms(), &d->out);
    hv__driver_apply(d, w->job, &d->out);
}

/* ---- nodes ---------------------------------------------------------------------------------- */

/* Stores n as being in state st (seen at wall time seen) before anything acts on it: on failure
 * the caller leaves n as it was (the store's trouble is logged and kept for clients, and err,
 * when given, has the words for the caller). */
static hv_err node_store_as(hv_driver_t *d, hv_dnode_t *n, hv_node_state_t st, uint64_t seen,
                            char *err, size_t errlen) {
    hv_err rc = hv_store_node_set_state(d->store, n->id, hv_node_state_name(st), seen);
    if (rc != HV_OK) {
        char what[160];
        snprintf(what, sizeof(what), "store node %s as %s", n->name, hv_node_state_name(st));
        hv__driver_store_failed(d, rc, what);
        if (err != NULL) {
            /* A caller's request refused: said each time (hv__driver_store_failed's line is rate-limited). */
            snprintf(err, errlen, "the head could not store node %s as %s: %s", n->name,
                     hv_node_state_name(st), hv_store_last_error(d->store));
            HV_LOG(HV_LOG_ERROR, "driver", "HV-NODE-NOT-STORED", "%s; node %s stays %s", err,
                   n->name, hv_node_state_name(n->state));
        }
        return rc;
    }
    n->persisted_seen_ms = seen;
    hv__driver_store_worked(d);
    return HV_OK;
}

/* n's agent was heard at now (a Join of the same agent, a new Session): its lease runs again and
 * a suspicion ends (its jobs wait for its workers again). */
static void node_renew(hv_driver_t *d, hv_dnode_t *n, uint64_t now) {
    int was_suspected = hv_lease_waive_at(&n->lease, 0) != 0;
    hv_lease_renew(&n->lease, now, d->cfg->lease_ms);
    if (!was_suspected) {
        return;
    }
    hv_driver_event(d, 0, n->id, "node.heard", NULL,
                    "node %s is heard again within its lease: no longer suspected", n->name);
    for (hv_djob_t *j = d->jobs; j != NULL; j = j->next) {
        if (job_active(j)) {
            hv_jm_heard(&j->jm, n->id, hv_wall_ms(), &d->out);
            hv__driver_apply(d, j, &d->out);
        }
    }
}

/* Every live worker on n is gone (the node died or its agent was replaced). */
static void node_lost_workers(hv_driver_t *d, hv_dnode_t *n, const char *why) {
    hv__driver_peer_forget_node(d, n->id); /* first: no resume counts on its copies */
    for (hv_djob_t *j = d->jobs; j != NULL; j = j->next) {
        for (size_t i = 0; i < j->jm.nw; i++) {
            hv_dworker_t *w = (hv_dworker_t *)j->jm.w[i];
            if (w->jm.node_id == n->id && wlive(w)) {
                worker_lost(d, w, why);
            }
        }
    }
    if (d->actors.node_lost != NULL) {
        d->actors.node_lost(d->actors.ud, n->id);
    }
    hv_node_reset(&n->acct);
}

hv_err hv_driver_node_join(hv_driver_t *d, const hv_node_info_t *info, hv_admit_t *a,
                           uint64_t *node_id, char *err, size_t errlen) {
    uint64_t now = hv_now_ms();
    hv_dnode_t *n = node_by_name(d, info->name);
    hv_admit_node(a, n != NULL ? n->id : 0);
    if (a->by == HV_ADMIT_REFUSED) {
        snprintf(err, errlen, "not admitted");
        return a->rc != HV_OK ? a->rc : HV_EPERM;
    }
    hv_join_kind_t kind = n == NULL
                              ? hv_node_join_kind(0, 0, info->incarnation, HV_NODE_ALIVE, 0, 0)
                              : hv_node_join_kind(1, n->incarnation, info->incarnation, n->state,
                                                  n->has_session, hv_lease_expired(&n->lease, now));
    if (kind == HV_JOIN_REFUSE) {
        uint64_t silent = hv_lease_silent_ms(&n->lease, now, d->cfg->lease_ms);
        HV_LOG(HV_LOG_WARN, "driver", "HV-JOIN-NAME-IN-USE",
               "refused a second agent named %s from %s: the agent from %s is live (heard %llu ms "
               "ago)",
               n->name, info->peer ? info->peer : "?", n->peer ? n->peer : "?",
               (unsigned long long)silent);
        snprintf(err, errlen,
                 "node name %s is in use by a live agent (connected from %s, heard %llu ms ago); "
                 "give this agent another --name, or stop the other one (its name is free once "
                 "it has been silent for %u ms)",
                 n->name, n->peer ? n->peer : "?", (unsigned long long)silent, d->cfg->lease_ms);
        return HV_EEXIST;
    }
    int is_new = kind == HV_JOIN_FIRST;
    int restarted = kind == HV_JOIN_TAKEOVER;
    hv_node_state_t st = hv_node_join_state(kind, n != NULL ? n->state : HV_NODE_ALIVE);
    hv_dnode_t tmp;
    memset(&tmp, 0, sizeof(tmp));
    if (!is_new) {
        tmp = *n;
    } else {
        tmp.registered_ms = hv_wall_ms();
    }
    tmp.name = (char *)info->name;
    tmp.addrs = (char *)info->addrs;
    tmp.labels = (char *)info->labels;
    tmp.instance_id = (char *)info->instance_id;
    tmp.peer = (char *)info->peer;
    tmp.acct.slots = info->slots;
    tmp.acct.gpus = info->gpus;
    tmp.cpus = info->cpus;
    tmp.memory_mb = info->memory_mb;
    tmp.preemptible = info->preemptible;
    tmp.incarnation = info->incarnation;
    tmp.state = st;
    tmp.last_seen_ms = hv_wall_ms();
    hv_node_row_t row;
    hv__driver_node_row(&tmp, &row);
    hv_err rc = hv_store_node_upsert(d->store, &row);
    if (rc != HV_OK) {
        hv__driver_store_failed(d, rc, "register a node");
        snprintf(err, errlen, "the head cannot store the node: %s", hv_strerror(rc));
        return HV_EIO;
    }
    if (is_new) {
        n = hv_calloc(1, sizeof(*n));
        if (n == NULL) {
            snprintf(err, errlen, "out of memory");
            return HV_ENOMEM;
        }
        n->registered_ms = tmp.registered_ms;
        n->next = d->nodes;
        d->nodes = n;
    } else if (restarted) {
        /* The agent restarted: whatever it ran before is gone. */
        if (n->has_session && d->io.drop_session != NULL) {
            d->io.drop_session(d->io.ud, n->id);
        }
        n->has_session = 0;
        node_lost_workers(d, n, "the agent restarted");
    }
    uint64_t old_id = n->id;
    n->id = row.id;
    set_str(&n->name, info->name);
    hv__driver_index_node(d, n, old_id, NULL); /* found by this name: only the id may change */
    set_str(&n->addrs, info->addrs);
    set_str(&n->labels, info->labels);
    set_str(&n->instance_id, info->instance_id);
    set_str(&n->peer, info->peer);
    set_str(&n->copy_addr, info->copy_addr != NULL ? info->copy_addr : "");
    n->copy_memory = info->copy_memory;
    n->acct.slots = info->slots;
    n->acct.gpus = info->gpus;
    n->cpus = info->cpus;
    n->memory_mb = info->memory_mb;
    n->preemptible = info->preemptible;
    n->incarnation = info->incarnation;
    n->state = st;
    n->retired = 0;
    n->last_seen_ms = n->persisted_seen_ms = tmp.last_seen_ms;
    node_renew(d, n, now);
    hv_driver_event(d, 0, n->id, "node.join", NULL, "node %s joined from %s: %u slots, %u GPUs%s",
                    n->name, info->peer ? info->peer : "?", n->acct.slots, n->acct.gpus,
                    n->preemptible ? ", preemptible" : "");
    *node_id = n->id;
    /* The loop thread is the only one: nothing used the token between its check and this. */
    if (a->by == HV_ADMIT_BY_JTOKEN && (rc = hv__driver_jtoken_use(d, a, err, errlen)) != HV_OK) {
        return rc;
    }
    hv_driver_schedule(d);
    return HV_OK;
}

hv_err hv_driver_node_attach(hv_driver_t *d, uint64_t node_id, uint64_t incarnation,
                             const uint64_t *running, size_t nrunning, char *err, size_t errlen) {
    hv_dnode_t *n = node_by_id(d, node_id);
    if (n == NULL) {
        snprintf(err, errlen, "unknown node id %llu: join again", (unsigned long long)node_id);
        return HV_ENOTFOUND;
    }
    if (n->incarnation != incarnation) {
        snprintf(err, errlen, "node %s has a newer agent; join again", n->name);
        return HV_ESTATE;
    }
    /* A dead node coming back is stored as alive before its session is taken. */
    hv_node_state_t st = hv_node_next(n->state, HV_NODE_EV_REATTACH);
    uint64_t seen = hv_wall_ms();
    if (st != n->state && node_store_as(d, n, st, seen, err, errlen) != HV_OK) {
        return HV_EUNAVAIL;
    }
    n->has_session = 1;
    node_renew(d, n, hv_now_ms());
    hv_free(n->hello_running);
    n->hello_running = NULL;
    n->n_hello_running = 0;
    if (nrunning > 0 && (n->hello_running = hv_calloc(nrunning, sizeof(uint64_t))) != NULL) {
        memcpy(n->hello_running, running, nrunning * sizeof(uint64_t));
        n->n_hello_running = nrunning;
    }
    n->reconcile_pending = 1;
    if (st != n->state) {
        n->state = st;
        n->last_seen_ms = seen;
        hv_driver_event(d, 0, n->id, "node.back", NULL, "node %s is back", n->name);
    }
    HV_LOG(HV_LOG_INFO, "driver", "HV-SESSION-OPEN", "node %s session open (%zu running)", n->name,
           nrunning);
    return HV_OK;
}

void hv_driver_node_detach(hv_driver_t *d, uint64_t node_id) {
    hv_dnode_t *n = node_by_id(d, node_id);
    if (n != NULL) {
        n->has_session = 0;
    }
}

/* Evidence that n is gone came while its lease runs: the node is suspected (once: later
 * evidence changes nothing) and so are its jobs' workers. what: the evidence for the event's
 * message; job_why: for the jobs' notes; data: the event's evidence fields (JSON members);
 * silent_ms: how long its data plane has been silent (0: the evidence is of now, not a silence;
 * a silence counts from its start, and its jobs' rings that hang on it roll back now). */
static void node_suspect(hv_driver_t *d, hv_dnode_t *n, const char *what, const char *job_why,
                         const char *data_fields, uint32_t silent_ms) {
    uint64_t wall = hv_wall_ms(), wait = 0, left = 0, mono = hv_now_ms();
    uint64_t since = mono > silent_ms ? mono - silent_ms : 0;
    if (d->stopping || !hv_node_suspect(n->state, &n->lease, mono, since, d->cfg->suspect_grace_ms,
                                        &wait, &left)) {
        return;
    }
    char data[384];
    snprintf(data, sizeof(data), "{%s,\"grace_ms\":%llu,\"lease_left_ms\":%llu}", data_fields,
             (unsigned long long)wait, (unsigned long long)left);
    if (d->io.wake != NULL) {
        d->io.wake(d->io.ud, wait); /* its grace ends then: act at once, not at a tick */
    }
    hv_driver_event(d, 0, n->id, "node.suspect", data,
                    "node %s is suspected lost: %s; rounds wait %.1f s for its workers, its lease "
                    "runs %.1f s more",
                    n->name, what, (double)wait / 1000.0, (double)left / 1000.0);
    for (hv_djob_t *j = d->jobs; j != NULL; j = j->next) {
        if (job_active(j) && silent_ms > 0) {
            hv_jm_silent(&j->jm, n->id, job_why, wall + wait, wall, &d->out);
            hv__driver_apply(d, j, &d->out);
        } else if (job_active(j)) {
            hv_jm_suspect(&j->jm, n->id, job_why, wall + wait, wall, &d->out);
            hv__driver_apply(d, j, &d->out);
        }
    }
}

void hv_driver_node_session_lost(hv_driver_t *d, uint64_t node_id, const char *why) {
    hv_dnode_t *n = node_by_id(d, node_id);
    if (n == NULL) {
        return;
    }
    n->has_session = 0;
    char what[320];
    snprintf(what, sizeof(what), "its agent's session closed (%.256s)",
             why != NULL && why[0] != '\0' ? why : "no reason given");
    node_suspect(d, n, what, "its agent's session closed", "\"evidence\":\"session closed\"", 0);
}

void hv_driver_node_heard(hv_driver_t *d, uint64_t node_id) {
    hv_dnode_t *n = node_by_id(d, node_id);
    if (n != NULL) {
        node_renew(d, n, hv_now_ms());
        n->last_seen_ms = hv_wall_ms();
    }
}

/* At the first heartbeat after a hello every re-sent event has been applied (the stream is
 * ordered): a worker the head believes alive that the agent did not list is really gone, and a
 * worker the agent runs that the head does not expect is killed. */
void hv_driver_node_heartbeat(hv_driver_t *d, uint64_t node_id) {
    hv_dnode_t *n = node_by_id(d, node_id);
    if (n == NULL || !n->reconcile_pending) {
        return;
    }
    n->reconcile_pending = 0;
    for (hv_djob_t *j = d->jobs; j != NULL; j = j->next) {
        for (size_t i = 0; i < j->jm.nw; i++) {
            hv_dworker_t *w = (hv_dworker_t *)j->jm.w[i];
            if (w->jm.node_id != n->id || !wlive(w)) {
                continue;
            }
            int listed = 0;
            for (size_t k = 0; k < n->n_hello_running; k++) {
                listed |= n->hello_running[k] == w->jm.id;
            }
            if (hv_node_reconcile(listed, 1, job_active(j), w->jm.kill_sent) == HV_RECON_LOST) {
                worker_lost(d, w, "the worker was not running when its agent reconnected");
            }
        }
    }
    if (d->actors.reconcile != NULL) {
        d->actors.reconcile(d->actors.ud, n->id, n->hello_running, n->n_hello_running);
    }
    for (size_t k = 0; k < n->n_hello_running; k++) {
        if (hv_am_proc_is(n->hello_running[k])) {
            continue; /* an actor's process: the actors' reconcile decided */
        }
        hv_dworker_t *w = worker_by_id(d, n->hello_running[k]);
        int here = w != NULL && w->jm.node_id == n->id && wlive(w);
        hv_node_recon_t r =
            hv_node_reconcile(1, here, here && job_active(w->job), here && w->jm.kill_sent);
        if (r == HV_RECON_KILL_AGAIN) {
            send_kill(d, w, "its job moved on without it while its node was out of touch");
            continue;
        }
        if (r == HV_RECON_KILL) {
            hv_order_t o = {.kind = HV_ORDER_KILL,
                            .worker_id = n->hello_running[k],
                            .grace_ms = d->cfg->kill_grace_ms,
                            .reason = "the head no longer expects this worker"};
            if (d->io.order != NULL) {
                d->io.order(d->io.ud, n->id, &o);
            }
        }
    }
    hv_free(n->hello_running);
    n->hello_running = NULL;
    n->n_hello_running = 0;
    hv_driver_schedule(d);
}

static void node_drained(hv_driver_t *d, hv_dnode_t *n, hv_node_state_t st, uint64_t seen,
                         int drain, const char *reason, int from_agent, uint32_t notice_ms);

hv_err hv_driver_node_drain(hv_driver_t *d, uint64_t node_id, int drain, const char *reason,
                            int from_agent, uint32_t notice_ms, char *err, size_t errlen) {
    hv_dnode_t *n = node_by_id(d, node_id);
    if (err != NULL && errlen > 0) {
        err[0] = '\0';
    }
    if (n == NULL) {
        return HV_ENOTFOUND;
    }
    hv_node_state_t st;
    HV_TRY(hv_node_drain_to(n->state, drain, &st));
    if (st == n->state) {
        return HV_OK; /* already so */
    }
    uint64_t seen = hv_wall_ms();
    if (node_store_as(d, n, st, seen, err, errlen) != HV_OK) {
        return HV_EUNAVAIL; /* n stays as it was: nothing is ordered or re-formed */
    }
    node_drained(d, n, st, seen, drain, reason, from_agent, notice_ms);
    return HV_OK;
}

hv_err hv_driver_nodes_drain(hv_driver_t *d, const uint64_t *ids, size_t n, int drain,
                             const char *reason, size_t *bad, char *err, size_t errlen) {
    hv_node_state_t st[HV_DRIVER_DRAIN_MAX];
    hv_dnode_t *nd[HV_DRIVER_DRAIN_MAX];
    if (n > HV_DRIVER_DRAIN_MAX) {
        snprintf(err, errlen, "at most %d nodes at once", HV_DRIVER_DRAIN_MAX);
        return HV_EINVAL;
    }
    for (size_t i = 0; i < n; i++) { /* every node checked before any changes */
        *bad = i;
        if ((nd[i] = node_by_id(d, ids[i])) == NULL) {
            snprintf(err, errlen, "no node %llu", (unsigned long long)ids[i]);
            return HV_ENOTFOUND;
        }
        for (size_t k = 0; k < i; k++) {
            if (nd[k] == nd[i]) {
                snprintf(err, errlen, "node %s is named twice", nd[i]->name);
                return HV_EINVAL;
            }
        }
        hv_err rc = hv_node_drain_to(nd[i]->state, drain, &st[i]);
        if (rc != HV_OK) {
            snprintf(err, errlen, "node %s is %s, not draining", nd[i]->name,
                     hv_node_state_name(nd[i]->state));
            return rc;
        }
    }
    /* Every new state in one transaction: all are stored, or none is and none changes. */
    uint64_t seen = hv_wall_ms();
    hv_err rc = hv_store_begin(d->store);
    for (size_t i = 0; i < n && rc == HV_OK; i++) {
        if (st[i] != nd[i]->state) {
            rc = hv_store_node_set_state(d->store, nd[i]->id, hv_node_state_name(st[i]), seen);
        }
    }
    if (rc == HV_OK) {
        rc = hv_store_commit(d->store);
    }
    if (rc != HV_OK) {
        snprintf(err, errlen, "the head could not store the nodes as %s: %s",
                 drain ? "draining" : "alive", hv_store_last_error(d->store));
        hv_store_rollback(d->store);
        hv__driver_store_failed(d, rc, drain ? "store nodes as draining" : "store nodes as alive");
        HV_LOG(HV_LOG_ERROR, "driver", "HV-NODE-NOT-STORED", "%s; none of the %zu nodes changed",
               err, n);
        return HV_EUNAVAIL;
    }
    hv__driver_store_worked(d);
    /* One scheduling pass once every node changed (the fleet decides on the whole change: an
     * undrain of two nodes grows a job by two in one round, not by one and then, held by the
     * resize interval, later). */
    d->sched_defer = 1;
    for (size_t i = 0; i < n; i++) {
        if (st[i] != nd[i]->state) {
            nd[i]->persisted_seen_ms = seen;
            node_drained(d, nd[i], st[i], seen, drain, reason, 0, 0);
        }
    }
    d->sched_defer = 0;
    hv_driver_schedule(d);
    return HV_OK;
}

/* A drain or undrain of n stored as st: in memory, then acted on (orders, events, the jobs'
 * rounds, placement). */
static void node_drained(hv_driver_t *d, hv_dnode_t *n, hv_node_state_t st, uint64_t seen,
                         int drain, const char *reason, int from_agent, uint32_t notice_ms) {
    n->state = st;
    n->last_seen_ms = seen;
    const char *why = reason != NULL && reason[0] != '\0' ? reason : "no reason given";
    if (!drain) {
        hv_driver_event(d, 0, n->id, "node.undrain", NULL, "node %s takes work again (%s)", n->name,
                        why);
        if (d->io.order != NULL) {
            hv_order_t o = {.kind = HV_ORDER_UNDRAIN, .reason = why};
            d->io.order(d->io.ud, n->id, &o);
        }
        hv_driver_schedule(d);
        return;
    }
    /* from_agent: the node's own notice (a preemption notice, or its agent stopping), with the
     * time it gave (0: unknown); else hvctl drain or the autoscaler. */
    char ddata[96];
    snprintf(ddata, sizeof(ddata), "{\"from_agent\":%s,\"notice_ms\":%u}",
             from_agent ? "true" : "false", notice_ms);
    hv_driver_event(d, 0, n->id, "node.drain", ddata, "node %s is draining: %s", n->name, why);
    if (d->actors.node_drain != NULL) {
        d->actors.node_drain(d->actors.ud, n->id, from_agent ? notice_ms : 0);
    }
    if (!from_agent && d->io.order != NULL) {
        hv_order_t o = {.kind = HV_ORDER_DRAIN, .reason = why};
        d->io.order(d->io.ud, n->id, &o);
    }
    char what[400];
    snprintf(what, sizeof(what), "node %s (%s)", n->name, why);
    /* An autoscaler (d->room) can buy replacements for members to stay until (cluster.h). */
    uint64_t now = hv_wall_ms();
    uint64_t hold_until = hv_cl_drain_hold_until(notice_ms, d->room != NULL, now);
    for (hv_djob_t *j = d->jobs; j != NULL; j = j->next) {
        if (!job_active(j)) {
            continue;
        }
        hv_jm_drain(&j->jm, n->id, what, hold_until, now, &d->out);
        hv__driver_apply(d, j, &d->out);
    }
    hv_driver_schedule(d);
}

int hv_driver_node_jobs_any(hv_driver_t *d, uint64_t node_id,
                            int (*fn)(const hv_djob_t *j, void *ud), void *ud) {
    for (hv_djob_t *j = d->jobs; j != NULL; j = j->next) {
        if (!job_active(j)) {
            continue;
        }
        for (size_t i = 0; i < j->jm.nw; i++) {
            const hv_dworker_t *w = (const hv_dworker_t *)j->jm.w[i];
            if (w->jm.node_id == node_id && wlive(w)) {
                int r = fn(j, ud);
                if (r != 0) {
                    return r;
                }
                break; /* one call per job */
            }
        }
    }
    return 0;
}

size_t hv_driver_node_blacklist(hv_driver_t *d, uint64_t node_id, const hv_djob_t **jobs,
                                const hv_dbl_t **entries, size_t cap) {
    size_t n = 0;
    uint64_t wall = hv_wall_ms();
    for (hv_djob_t *j = d->jobs; j != NULL && n < cap; j = j->next) {
        if (!job_active(j)) {
            continue;
        }
        hv_dnode_t *nd = node_by_id(d, node_id);
        for (hv_dbl_t *b = j->blacklist; b != NULL && n < cap; b = b->next) {
            if (b->node_id == node_id && nd != NULL &&
                hv_bl_bars(&b->e, b->incarnation, nd->incarnation, wall)) {
                jobs[n] = j;
                entries[n] = b;
                n++;
            }
        }
    }
    return n;
}

/* ---- rendezvous ----------------------------------------------------------------------------- */

/* The job and worker of a rendezvous call, or an error for the caller. */
/* The survivors' reports of broken ring links (core/ringev.c decides): a node they condemn is
 * suspected like one whose session closed. Judged at every JoinRound of the job (a join is news
 * too: its worker spoke). */
static void ring_evidence(hv_driver_t *d, hv_djob_t *j, const hv_dworker_t *w, uint32_t last_gen,
                          const uint64_t *broken, size_t n_broken) {
    if (n_broken > 0 && last_gen > 0 &&
        hv_ringev_note(&j->ringev, last_gen, w->jm.id, broken, n_broken) != HV_OK) {
        return; // out of memory: evidence only, the lease still decides
    }
    hv_ringev_verdict_t v[4];
    size_t nv = hv_ringev_judge(&j->ringev, &j->jm, v, 4);
    for (size_t k = 0; k < nv; k++) {
        hv_dnode_t *nd = node_by_id(d, v[k].node_id);
        char what[256], why[160], data[200];
        if (v[k].silent && nd != NULL) {
            snprintf(what, sizeof(what),
                     "its data plane fell silent: the ring neighbours of worker %llu hear no "
                     "heartbeat from it and its host acknowledges none of theirs for %.1f s (job "
                     "%llu, round %u; first reported by worker %llu)",
                     (unsigned long long)v[k].worker_id, (double)v[k].silent_ms / 1000.0,
                     (unsigned long long)j->jm.id, j->ringev.generation,
                     (unsigned long long)v[k].reporter);
            snprintf(why, sizeof(why),
                     "its data plane fell silent: worker %llu's ring neighbours hear nothing "
                     "from it for %.1f s",
                     (unsigned long long)v[k].worker_id, (double)v[k].silent_ms / 1000.0);
            snprintf(data, sizeof(data),
                     "\"evidence\":\"silent\",\"job_id\":%llu,\"worker_id\":%llu,"
                     "\"reported_by\":%llu,\"silent_ms\":%u",
                     (unsigned long long)j->jm.id, (unsigned long long)v[k].worker_id,
                     (unsigned long long)v[k].reporter, v[k].silent_ms);
            node_suspect(d, nd, what, why, data, v[k].silent_ms ? v[k].silent_ms : 1);
            continue;
        }
        snprintf(what, sizeof(what),
                 "the ring neighbours of worker %llu reported broken links (job %llu, round %u; "
                 "first reported by worker %llu)",
                 (unsigned long long)v[k].worker_id, (unsigned long long)j->jm.id,
                 j->ringev.generation, (unsigned long long)v[k].reporter);
        snprintf(why, sizeof(why), "the ring neighbours of worker %llu reported broken links",
                 (unsigned long long)v[k].worker_id);
        snprintf(data, sizeof(data),
                 "\"evidence\":\"ring\",\"job_id\":%llu,\"worker_id\":%llu,\"reported_by\":%llu",
                 (unsigned long long)j->jm.id, (unsigned long long)v[k].worker_id,
                 (unsigned long long)v[k].reporter);
        if (nd != NULL) {
            node_suspect(d, nd, what, why, data, 0);
        }
    }
}

/* Death watch: workers that w's death watch saw die on its machine in round last_gen
 * (core/ringev.c hv_ringev_dead decides) end now, as if their exit had been reported, so the
 * round does not wait for their agent's report (a killed Python process takes a few hundred ms
 * to go). worker_lost stores them before anything acts on it; the exit report that follows
 * finds them ended and changes nothing. */
static void ring_dead(hv_driver_t *d, hv_djob_t *j, const hv_dworker_t *w, uint32_t last_gen,
                      const uint64_t *dead, size_t n_dead) {
    /* The nodes of the dead workers that share w's machine by the head's record: w's own, or,
     * when w's agent's session comes from the head's own machine, another node whose agent's
     * does too (agents on one machine, as in tests and benchmarks). */
    const hv_dnode_t *mine = node_by_id(d, w->jm.node_id);
    int local = mine != NULL && hv_copy_peer_local(mine->peer);
    uint64_t machine[2]; /* the service allows two dead peers (a worker's ring neighbours) */
    size_t nm = 0;
    for (size_t i = 0; i < n_dead && nm < 2; i++) {
        const hv_dworker_t *s = worker_by_id(d, dead[i]);
        const hv_dnode_t *sn = s != NULL ? node_by_id(d, s->jm.node_id) : NULL;
        if (local && sn != NULL && hv_copy_peer_local(sn->peer)) {
            machine[nm++] = sn->id;
        }
    }
    for (size_t i = 0; i < n_dead; i++) {
        hv_jm_worker_t *s = hv_ringev_dead(&j->jm, &w->jm, last_gen, dead[i], machine, nm);
        if (s == NULL) {
            continue;
        }
        char why[256];
        snprintf(why, sizeof(why),
                 "its process ended (ring neighbour worker %llu on the same machine saw its "
                 "death-watch mark released, round %u; its agent's report says how)",
                 (unsigned long long)w->jm.id, last_gen);
        ((hv_dworker_t *)s)->dead_seen = 1;
        worker_lost(d, (hv_dworker_t *)s, why);
    }
}

hv_err hv_driver_rdzv_join(hv_driver_t *d, uint64_t job_id, uint64_t worker_id, const char *addr,
                           uint32_t last_gen, uint64_t redone_samples, const uint64_t *broken,
                           size_t n_broken, const uint64_t *dead, size_t n_dead, char *err,
                           size_t errlen) {
    hv_djob_t *j;
    hv_dworker_t *w;
    HV_TRY(hv__driver_rdzv_find(d, job_id, worker_id, &j, &w, err, errlen));
    if (addr == NULL || addr[0] == '\0' || strlen(addr) > 255) {
        snprintf(err, errlen, "a data-plane address is required");
        return HV_EINVAL;
    }
    if (w->addr == NULL || strcmp(w->addr, addr) != 0) {
        set_str(&w->addr, addr);
        w->jm.dirty = 1;
    }
    hv_jm_note_redone(&j->jm, redone_samples);
    if (job_active(j)) {
        ring_dead(d, j, w, last_gen, dead, n_dead);
    }
    hv_jm_join(&j->jm, &w->jm, last_gen, hv_wall_ms(), &d->out);
    hv__driver_apply(d, j, &d->out);
    hv__driver_fleet_preempt_due(d, j);
    if (job_active(j)) {
        ring_evidence(d, j, w, last_gen, broken, n_broken);
    }
    return HV_OK;
}

hv_err hv_driver_rdzv_resize(hv_driver_t *d, uint64_t job_id, uint64_t worker_id, uint32_t size,
                             const char *reason, uint32_t *accepted, char *err, size_t errlen) {
    hv_djob_t *j;
    hv_dworker_t *w;
    HV_TRY(hv__driver_rdzv_find(d, job_id, worker_id, &j, &w, err, errlen));
    if (!j->jm.p.elastic) {
        snprintf(err, errlen, "job %llu is not elastic: its size is fixed at %u",
                 (unsigned long long)job_id, j->np);
        return HV_ESTATE;
    }
    uint32_t old = hv_jm_target(&j->jm.p), now = 0;
    int changed = hv_jm_resize(&j->jm.p, size, &now);
    *accepted = now;
    if (!changed) {
        return HV_OK;
    }
    uint32_t before = j->jm.p.target;
    j->jm.p.target = size;
    j->dirty_row = 1;
    hv_err rc = hv__driver_persist(d, j); /* stored before anything is bought or placed for it */
    if (rc != HV_OK) {
        j->jm.p.target = before;
        snprintf(err, errlen, "the head cannot store the new size: %s", hv_strerror(rc));
        return HV_EIO;
    }
    hv_driver_event(d, j->jm.id, 0, "job.resize", NULL,
                    "job %llu asks for %u workers (was %u; %u..%u)%s%s",
                    (unsigned long long)j->jm.id, now, old, j->jm.p.min_np, j->jm.p.max_np,
                    reason && reason[0] ? ": " : "", reason ? reason : "");
    hv_driver_schedule(d);
    return HV_OK;
}

hv_err hv_driver_rdzv_report(hv_driver_t *d, uint64_t job_id, uint64_t worker_id, uint32_t gen,
                             const hv_jobfig_t *delta, char *err, size_t errlen) {
    hv_djob_t *j;
    hv_dworker_t *w;
    HV_TRY(hv__driver_rdzv_find(d, job_id, worker_id, &j, &w, err, errlen));
    HV_TRY(hv__driver_fence(j, w, gen, "a report of figures", err, errlen));
    HV_TRY(hv_jobfig_check(delta, err, errlen));
    /* Memory only: counters that start again with each head process, as Prometheus expects. */
    hv_jobfig_add(&j->figs, delta);
    if (delta->steps > 0 && delta->step_size > 0) {
        /* Per world size, as one worker saw it: every worker of the round reports its own steps
         * over the same time, so each adds 1/size of them. Stored before the policy decides
         * with it (job_tput): a head restart keeps what the job measured. Not stored: this
         * report's steps are not counted (the next ones are). */
        double n = delta->step_size;
        hv_tput_sample_t next[HV_DRV_TPUT_SIZES];
        size_t nnext = j->ntput;
        memcpy(next, j->tput, sizeof(next));
        hv_tput_note(next, HV_DRV_TPUT_SIZES, &nnext, delta->step_size, (double)delta->steps / n,
                     (double)delta->step_us / 1e6 / n);
        if (hv__driver_tput_store(d, j, next, nnext) == HV_OK) {
            memcpy(j->tput, next, sizeof(next));
            j->ntput = nnext;
        }
    }
    if (delta->commits > 0) {
        hv_jm_note_commit(&j->jm); /* the job is never restarted from the beginning now */
    }
    return HV_OK;
}

hv_err hv_driver_rdzv_silent(hv_driver_t *d, uint64_t job_id, uint64_t worker_id, uint32_t gen,
                             const hv_driver_silent_t *s, size_t n, char *err, size_t errlen) {
    hv_djob_t *j;
    hv_dworker_t *w;
    HV_TRY(hv__driver_rdzv_find(d, job_id, worker_id, &j, &w, err, errlen));
    HV_TRY(hv__driver_fence(j, w, gen, "a report of silent neighbours", err, errlen));
    for (size_t i = 0; i < n; i++) {
        HV_LOG(
            HV_LOG_INFO, "driver", "HV-RING-SILENT",
            "job %llu round %u: worker %llu reports its ring neighbour %llu silent for %u ms (%s)",
            (unsigned long long)job_id, gen, (unsigned long long)worker_id,
            (unsigned long long)s[i].worker_id, s[i].silent_ms,
            s[i].how == HV_RINGEV_HEAR ? "no heartbeat" : "no acknowledgement");
        if (hv_ringev_note_silent(&j->ringev, gen, w->jm.id, s[i].worker_id, s[i].how,
                                  s[i].silent_ms) != HV_OK) {
            return HV_OK; // out of memory: evidence only, the lease still decides
        }
    }
    ring_evidence(d, j, w, 0, NULL, 0);
    return HV_OK;
}

void hv_driver_rdzv_join_gone(hv_driver_t *d, uint64_t worker_id) {
    hv_dworker_t *w = worker_by_id(d, worker_id);
    if (w != NULL) {
        hv_jm_join_gone(&w->job->jm, &w->jm);
    }
}

hv_err hv_driver_rdzv_done(hv_driver_t *d, uint64_t job_id, uint64_t worker_id, uint32_t gen,
                           char *err, size_t errlen) {
    hv_djob_t *j;
    hv_dworker_t *w;
    HV_TRY(hv__driver_rdzv_find(d, job_id, worker_id, &j, &w, err, errlen));
    HV_TRY(hv__driver_fence(j, w, gen, "Done", err, errlen));
    hv_err rc = hv_jm_done(&j->jm, &w->jm, gen, hv_wall_ms(), &d->out);
    if (rc != HV_OK) {
        snprintf(err, errlen,
                 "worker %llu cannot report Done for generation %u: it is %s in generation %u%s",
                 (unsigned long long)worker_id, gen, hv_wk_state_name(w->jm.state),
                 w->jm.member_gen, w->jm.removed ? " and was removed from the job" : "");
        hv_jm_out_reset(&d->out);
        return rc;
    }
    hv__driver_apply(d, j, &d->out);
    if (pending_of(d, j) != NULL) {
        snprintf(err, errlen, "the head cannot store Done now; try again");
        return HV_EIO;
    }
    return HV_OK;
}

hv_err hv_driver_rdzv_check(hv_driver_t *d, uint64_t job_id, uint64_t worker_id,
                            uint32_t *generation, int *failure, uint32_t *code, const char **reason,
                            char *err, size_t errlen) {
    hv_djob_t *j;
    hv_dworker_t *w;
    HV_TRY(hv__driver_rdzv_find(d, job_id, worker_id, &j, &w, err, errlen));
    *generation = j->jm.generation;
    *failure = j->jm.round_rollback;
    *code = (uint32_t)j->jm.round_code;
    *reason = j->jm.round_reason;
    return HV_OK;
}

/* ---- tick ----------------------------------------------------------------------------------- */

static int seen_due(const hv_dnode_t *n, uint64_t now) {
    return hv_node_due(n->state, &n->lease, now, n->last_seen_ms, n->persisted_seen_ms,
                       SEEN_PERSIST_MS) == HV_NODE_DUE_SEEN;
}

/* The live nodes whose last-seen time is due to be stored (each every SEEN_PERSIST_MS) are
 * stored in one transaction: with 10,000 agents that is one sqlite commit a tick instead of a
 * thousand a second. Nothing acts on these writes; a node's persisted time moves only once the
 * commit worked, so after a failure the next tick writes it again. */
static void store_seen(hv_driver_t *d, uint64_t now) {
    hv_err rc = hv_store_begin(d->store);
    if (rc != HV_OK) {
        for (hv_dnode_t *n = d->nodes; n != NULL; n = n->next) {
            if (seen_due(n, now)) {
                (void)node_store_as(d, n, n->state, n->last_seen_ms, NULL, 0);
            }
        }
        return;
    }
    for (hv_dnode_t *n = d->nodes; n != NULL && rc == HV_OK; n = n->next) {
        if (seen_due(n, now)) {
            rc = hv_store_node_set_state(d->store, n->id, hv_node_state_name(n->state),
                                         n->last_seen_ms);
            if (rc == HV_ENOTFOUND) { /* this node's row only: the others are still stored */
                hv__driver_store_failed(d, rc, "store a node's last-seen time");
                rc = HV_OK;
            }
        }
    }
    if (rc == HV_OK) {
        rc = hv_store_commit(d->store);
    }
    if (rc != HV_OK) {
        hv_store_rollback(d->store);
        hv__driver_store_failed(d, rc, "store the nodes' last-seen times");
        return;
    }
    for (hv_dnode_t *n = d->nodes; n != NULL; n = n->next) {
        if (seen_due(n, now)) {
            n->persisted_seen_ms = n->last_seen_ms;
        }
    }
    hv__driver_store_worked(d);
}

static void tick_nodes(hv_driver_t *d, uint64_t now) {
    size_t nseen = 0;
    for (hv_dnode_t *n = d->nodes; n != NULL; n = n->next) {
        hv_node_due_t due = hv_node_due(n->state, &n->lease, now, n->last_seen_ms,
                                        n->persisted_seen_ms, SEEN_PERSIST_MS);
        if (due == HV_NODE_DUE_DEAD) {
            /* Stored first: if the store fails, the node stays as it was and the next tick tries
             * again (its workers are not given up on before the head can record why). */
            hv_node_state_t st = hv_node_next(n->state, HV_NODE_EV_EXPIRED);
            if (node_store_as(d, n, st, n->last_seen_ms, NULL, 0) != HV_OK) {
                continue;
            }
            char why[128];
            snprintf(why, sizeof(why), "no heartbeat for %.1f s (lease %.1f s)",
                     (double)hv_lease_silent_ms(&n->lease, now, d->cfg->lease_ms) / 1000.0,
                     (double)d->cfg->lease_ms / 1000.0);
            if (n->has_session && d->io.drop_session != NULL) {
                d->io.drop_session(d->io.ud, n->id);
            }
            n->has_session = 0;
            n->lease.suspect_ms = 0; /* the lease decided: a suspicion is over */
            n->state = st;
            hv_driver_event(d, 0, n->id, "node.dead", NULL, "node %s is dead: %s", n->name, why);
            char lost[256];
            snprintf(lost, sizeof(lost), "node %s is dead: %s", n->name, why);
            node_lost_workers(d, n, lost);
        } else if (due == HV_NODE_DUE_SEEN) {
            nseen++;
        }
    }
    if (nseen > 0) {
        store_seen(d, now);
    }
}

/* The last holders of j's state are all on nodes suspected lost, past their grace: they are
 * given up as lost now (jobm decides, hv_jm_give_up), through the lost path that stores the
 * resume before it acts. */
static void tick_give_up(hv_driver_t *d, hv_djob_t *j, uint64_t wall) {
    hv_jm_worker_t *ws[16];
    size_t n = hv_jm_give_up(&j->jm, wall, ws, sizeof(ws) / sizeof(ws[0]));
    for (size_t i = 0; i < n && job_active(j); i++) {
        hv_dworker_t *w = (hv_dworker_t *)ws[i];
        const char *node = node_name_of(w->jm.node_id, d);
        char why[256];
        snprintf(why, sizeof(why),
                 "its node %s is suspected lost and no other worker of the job holds the training "
                 "state: given up before its lease",
                 node != NULL ? node : "?");
        worker_lost(d, w, why);
    }
}

/* Announces cooldowns that ended (the node may be used again by the job). */
static void tick_cooldowns(hv_driver_t *d, hv_djob_t *j, uint64_t wall) {
    for (hv_dbl_t *b = j->blacklist; b != NULL; b = b->next) {
        if (hv_bl_cooldown_ended(&b->e, wall)) {
            const char *name = node_name_of(b->node_id, d);
            hv_driver_event(d, j->jm.id, b->node_id, "node.cooldown", NULL,
                            "node %s may run job %llu again: its cooldown ended (%u strikes)",
                            name ? name : "?", (unsigned long long)j->jm.id, b->e.strikes);
            b->e.until_ms = 0; /* announced; the strikes stay */
        }
    }
}

void hv_driver_wake(hv_driver_t *d, uint64_t now) {
    (void)now;
    uint64_t wall = hv_wall_ms();
    for (hv_djob_t *j = d->jobs; j != NULL; j = j->next) {
        if (job_active(j)) {
            hv_jm_tick(&j->jm, wall, &d->out);
            hv__driver_apply(d, j, &d->out);
            tick_give_up(d, j, wall);
        }
    }
    hv_driver_schedule(d);
}

void hv_driver_tick(hv_driver_t *d, uint64_t now) {
    uint64_t wall = hv_wall_ms();
    if (!d->store_down || now >= d->store_retry_at) {
        d->store_retry_at = now + STORE_RETRY_MS;
        flush_pending(d);
    }
    hv__driver_store_settle(d, now, 0);
    tick_nodes(d, now);
    hv__driver_tick_copies(d, now);
    for (hv_djob_t *j = d->jobs; j != NULL; j = j->next) {
        if (hv_cl_wait_over(j->jm.state == HV_JOB_PENDING, now, j->wait_deadline)) {
            char why[256];
            snprintf(why, sizeof(why),
                     "waited %u s for %u free slots; %u are free now (%u in the cluster)",
                     j->timeout_s, hv_np_least(j->jm.p.elastic, j->np, j->jm.p.min_np),
                     count_slots(d, j, j->slots_per_host, 1),
                     count_slots(d, j, j->slots_per_host, 0));
            hv_jm_end(&j->jm, HV_JOB_FAILED, HV_EV_PENDING_TIMEOUT, why, &d->out);
            hv__driver_apply(d, j, &d->out);
            continue;
        }
        for (size_t i = 0; i < j->jm.nw; i++) {
            hv_dworker_t *w = (hv_dworker_t *)j->jm.w[i];
            if (hv_jm_kill_overdue(w->kill_deadline, now) && wlive(w)) {
                worker_lost(d, w, "it did not report an exit after the kill order");
            }
        }
        if (job_active(j)) {
            tick_cooldowns(d, j, wall);
            hv_jm_tick(&j->jm, wall, &d->out);
            hv__driver_apply(d, j, &d->out);
            hv__driver_fleet_preempt_due(d, j);
            tick_give_up(d, j, wall);
        }
    }
    /* Forget ended jobs after a while; the store keeps them. */
    for (hv_djob_t **p = &d->jobs; *p != NULL;) {
        hv_djob_t *j = *p;
        if (hv_cl_forget(!job_active(j), j->jm.ending, hv_driver_job_settled(d, j), wall,
                         j->ended_ms)) {
            *p = j->next;
            hv__driver_unindex_job(d, j);
            hv__driver_job_free(j);
        } else {
            p = &j->next;
        }
    }
    hv_driver_schedule(d);
}
