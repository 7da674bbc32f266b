/*
 * driver_rows.c: the driver's side of the store (store.h). The model's jobs, workers and nodes
 * to and from the tables' rows; a job's dirty rows written in one transaction
 * (hv__driver_persist, which driver.c's store-then-act calls); the model's jobs made from their
 * rows and freed; the load of the tables at the head's start (hv_driver_load); and the store's
 * health as clients see it (a failing spell: hv__driver_store_failed/_worked/_settle,
 * hv_driver_store_trouble). It decides nothing: the load hands the jobs to the job machine
 * (hv_jm_restarted, hv_jm_drain) like any other input.
 */
#include "driver_int.h"

#include <stdio.h>
#include <string.h>

#include "log.h"
#include "mem.h"
#include "util.h"

#define STORE_RETRY_LOG_MS 60000 /* how often a store that still fails is logged again */
#define STORE_OK_MS 2000         /* writes that work this long without a failure end a spell */

/* ---- the store's health --------------------------------------------------------------------- */

/* Tells every job's watchers that the store's health changed. */
static void store_announce(hv_driver_t *d) {
    for (hv_djob_t *j = d->jobs; j != NULL && d->io.job_changed != NULL; j = j->next) {
        d->io.job_changed(d->io.ud, j->jm.id);
    }
}

/* A state write failed: logged when it starts (then at most every STORE_RETRY_LOG_MS), and the
 * words for clients are kept (hv_driver_store_trouble) until a write works again. */
void hv__driver_store_failed(hv_driver_t *d, hv_err rc, const char *what) {
    uint64_t now = hv_now_ms();
    int first = !d->store_down;
    d->store_ok_since = 0;
    uint64_t avail = hv_joblogs_free_bytes(d->logs, now, first);
    char space[128] = "";
    if (avail != UINT64_MAX) {
        snprintf(space, sizeof(space), "; %s has %llu bytes free", d->cfg->data_dir,
                 (unsigned long long)avail);
    }
    snprintf(d->store_why, sizeof(d->store_why), "the head cannot store its state in %s (%s%s)",
             hv_store_path(d->store), hv_store_last_error(d->store), space);
    d->store_down = 1;
    /* A store that fails, works, fails again (a nearly full disk) is not logged at each turn. */
    if ((first && now >= d->store_failed_logged + STORE_RETRY_MS * 10) ||
        now >= d->store_failed_logged + STORE_RETRY_LOG_MS || d->store_failed_logged == 0) {
        d->store_failed_logged = now;
        HV_LOG(HV_LOG_ERROR, "store", "HV-STORE-WRITE", "cannot %s in %s: %s (%s)%s%s", what,
               hv_store_path(d->store), hv_store_last_error(d->store), hv_strerror(rc), space,
               first ? "; decisions wait and are written again every second" : " (still)");
    }
    if (first) {
        store_announce(d);
    }
}

/* Ends a failing spell when no job's decisions wait for the store and writes have worked for
 * STORE_OK_MS without a failure (on a nearly full disk a small write may work between two that
 * fail: clients are not told "works again" at each turn), or at once when sure (every waiting
 * decision was just written). */
void hv__driver_store_settle(hv_driver_t *d, uint64_t now, int sure) {
    if (!d->store_down || pending_unstored(d)) {
        return;
    }
    if (!sure && (d->store_ok_since == 0 || now < d->store_ok_since + STORE_OK_MS)) {
        return;
    }
    d->store_down = 0;
    d->store_ok_since = 0;
    d->store_why[0] = '\0';
    HV_LOG(HV_LOG_NOTICE, "store", "HV-STORE-OK", "the head stores its state in %s again",
           hv_store_path(d->store));
    store_announce(d);
}

/* A state write worked. */
void hv__driver_store_worked(hv_driver_t *d) {
    if (!d->store_down) {
        return;
    }
    uint64_t now = hv_now_ms();
    if (d->store_ok_since == 0) {
        d->store_ok_since = now;
    }
    hv__driver_store_settle(d, now, 0);
}

void hv__driver_store_result(hv_driver_t *d, hv_err rc, const char *what) {
    if (rc != HV_OK) {
        hv__driver_store_failed(d, rc, what);
    } else {
        hv__driver_store_worked(d);
    }
}

const char *hv_driver_store_trouble(hv_driver_t *d) { return d->store_down ? d->store_why : NULL; }

/* ---- rows ----------------------------------------------------------------------------------- */

void hv__driver_job_row(const hv_djob_t *j, hv_job_row_t *r) {
    memset(r, 0, sizeof(*r));
    const hv_jm_job_t *m = &j->jm;
    r->id = m->id;
    r->name = j->name;
    r->state = (char *)hv_job_state_name(m->state);
    r->reason = (char *)m->reason;
    r->spec = j->spec;
    r->spec_len = j->spec_len;
    r->np = j->np;
    r->min_np = m->p.min_np;
    r->max_np = m->p.max_np;
    r->target_np = m->p.target;
    r->max_resets = m->p.max_resets;
    r->timeout_s = j->timeout_s;
    r->resets = m->resets;
    r->generation = m->generation;
    r->submitted_ms = j->submitted_ms;
    r->started_ms = j->started_ms;
    r->ended_ms = j->ended_ms;
    r->elastic = m->p.elastic;
    r->check_every = m->p.check_every;
    r->elastic_timeout_s = m->p.elastic_timeout_s;
    r->rdzv_timeout_s = m->p.rdzv_timeout_s;
    r->cooldown_min_s = j->bl.cooldown_min_s;
    r->cooldown_max_s = j->bl.cooldown_max_s;
    r->max_strikes = j->bl.max_strikes;
    r->slots_per_host = j->slots_per_host;
    r->size = m->size;
    r->cross_size = m->cross_size;
    r->round_open = m->round_open;
    r->round_rollback = m->round_rollback;
    r->round_reason = (char *)m->round_reason;
    r->round_code = (uint32_t)m->round_code;
    r->round_opened_ms = m->round_opened_ms;
    r->round_deadline_ms = m->round_deadline_ms;
    r->round_fail_at_ms = m->round_fail_at_ms;
    r->resume_gen = m->resume_gen;
    r->resumes = m->resumes;
    r->priority = j->priority;
    r->ns = (char *)j->ns;
    r->preemptible = j->preemptible;
    r->fleet_target = j->fleet_target;
    r->fleet_reason = (char *)(j->fleet_decided ? hv_fl_reason_name(j->fleet_reason) : "");
    r->fleet_cause = j->fleet_cause;
    r->fleet_ms = j->fleet_ms;
    r->resized_ms = j->resized_ms;
}

void hv__driver_worker_row(const hv_dworker_t *w, hv_worker_row_t *r) {
    memset(r, 0, sizeof(*r));
    const hv_jm_worker_t *m = &w->jm;
    r->id = m->id;
    r->job_id = w->job->jm.id;
    r->node_id = m->node_id;
    r->rank = m->rank;
    r->attempt = w->attempt;
    r->local_rank = m->local_rank;
    r->local_size = m->local_size;
    r->generation = w->place_gen;
    r->gpu = w->gpu;
    r->pid = w->pid;
    r->exit_code = m->exit_code;
    r->term_signal = m->term_signal;
    r->state = (char *)hv_wk_state_name(m->state);
    r->reason = w->reason;
    r->started_ms = w->started_ms;
    r->ended_ms = w->ended_ms;
    r->member_gen = m->member_gen;
    r->joined_gen = m->joined_gen;
    r->cross_rank = m->cross_rank;
    r->done = m->done;
    r->removed = m->removed;
    r->addr = w->addr;
}

/* Writes what changed of j (and its workers) in one transaction. */
hv_err hv__driver_persist(hv_driver_t *d, hv_djob_t *j) {
    int any = j->jm.dirty || j->dirty_row;
    for (size_t i = 0; i < j->jm.nw && !any; i++) {
        any = j->jm.w[i]->dirty;
    }
    if (!any) {
        return HV_OK;
    }
    hv_err rc = hv_store_begin(d->store);
    if (rc == HV_OK && (j->jm.dirty || j->dirty_row)) {
        hv_job_row_t r;
        hv__driver_job_row(j, &r);
        rc = hv_store_job_update(d->store, &r);
    }
    for (size_t i = 0; i < j->jm.nw && rc == HV_OK; i++) {
        if (j->jm.w[i]->dirty) {
            hv_worker_row_t r;
            hv__driver_worker_row((hv_dworker_t *)j->jm.w[i], &r);
            rc = hv_store_worker_update(d->store, &r);
        }
    }
    if (rc == HV_OK) {
        rc = hv_store_commit(d->store);
    }
    if (rc != HV_OK) {
        hv_store_rollback(d->store);
        hv__driver_store_failed(d, rc, "store a job's state");
        return rc;
    }
    j->jm.dirty = 0;
    j->dirty_row = 0;
    for (size_t i = 0; i < j->jm.nw; i++) {
        j->jm.w[i]->dirty = 0;
    }
    hv__driver_store_worked(d);
    return HV_OK;
}

/* ---- jobs in memory ------------------------------------------------------------------------- */

void hv__driver_worker_free(hv_dworker_t *w) {
    hv_free(w->reason);
    hv_free(w->addr);
    hv_free(w);
}

void hv__driver_job_free(hv_djob_t *j) {
    for (size_t i = 0; i < j->jm.nw; i++) {
        hv__driver_worker_free((hv_dworker_t *)j->jm.w[i]);
    }
    hv_jm_fini(&j->jm);
    while (j->blacklist != NULL) {
        hv_dbl_t *b = j->blacklist;
        j->blacklist = b->next;
        hv_free(b);
    }
    if (j->log != NULL) {
        hv_joblog_close(j->log);
        hv_free(j->log);
    }
    hv_ringev_fini(&j->ringev);
    hv_free(j->name);
    hv_free(j->spec);
    hv_free(j);
}

/* ---- the indexes ----------------------------------------------------------------------------- */

/* A put that fails turns every index off: the lookups walk the lists from then on. */
static void index_put(hv_driver_t *d, hv_err rc) {
    if (rc != HV_OK && d->idx_ok) {
        d->idx_ok = 0;
        HV_LOG(HV_LOG_WARN, "driver", "HV-DRIVER-OOM",
               "out of memory growing the model's indexes: lookups walk the lists from now on");
    }
}

void hv__driver_index_node(hv_driver_t *d, hv_dnode_t *n, uint64_t old_id, const char *old_name) {
    if (old_id != 0 && old_id != n->id && hv_hmap_get_u64(&d->node_ids, old_id) == n) {
        hv_hmap_del_u64(&d->node_ids, old_id);
    }
    if (old_name != NULL && (n->name == NULL || strcmp(old_name, n->name) != 0) &&
        hv_hmap_get_str(&d->node_names, old_name) == n) {
        hv_hmap_del_str(&d->node_names, old_name);
    }
    index_put(d, hv_hmap_put_u64(&d->node_ids, n->id, n));
    index_put(d, hv_hmap_put_str(&d->node_names, n->name, n));
}

void hv__driver_index_workers(hv_driver_t *d, hv_djob_t *j) {
    for (size_t i = 0; i < j->jm.nw; i++) {
        if (hv_hmap_get_u64(&d->worker_ids, j->jm.w[i]->id) != j->jm.w[i]) {
            index_put(d, hv_hmap_put_u64(&d->worker_ids, j->jm.w[i]->id, j->jm.w[i]));
        }
    }
}

void hv__driver_index_job(hv_driver_t *d, hv_djob_t *j) {
    index_put(d, hv_hmap_put_u64(&d->job_ids, j->jm.id, j));
    hv__driver_index_workers(d, j);
}

void hv__driver_unindex_job(hv_driver_t *d, hv_djob_t *j) {
    if (hv_hmap_get_u64(&d->job_ids, j->jm.id) == j) {
        hv_hmap_del_u64(&d->job_ids, j->jm.id);
    }
    for (size_t i = 0; i < j->jm.nw; i++) {
        if (hv_hmap_get_u64(&d->worker_ids, j->jm.w[i]->id) == j->jm.w[i]) {
            hv_hmap_del_u64(&d->worker_ids, j->jm.w[i]->id);
        }
    }
}

/* Appends to the tail: the list is in submission order, which is scheduling order. */
void hv__driver_job_link(hv_driver_t *d, hv_djob_t *j) {
    hv_djob_t **p = &d->jobs;
    while (*p != NULL) {
        p = &(*p)->next;
    }
    *p = j;
    hv__driver_index_job(d, j);
}

/* A job from its row (the row's strings and spec move into the job). */
hv_err hv__driver_job_from_row(hv_driver_t *d, hv_job_row_t *r, hv_djob_t **out) {
    hv_djob_t *j = hv_calloc(1, sizeof(*j));
    if (j == NULL || (j->log = hv_calloc(1, sizeof(*j->log))) == NULL) {
        hv_free(j);
        return HV_ENOMEM;
    }
    j->log->fd = -1; /* opened when the job is linked */
    hv_jm_params_t p = {.elastic = r->elastic,
                        .np = r->np,
                        .min_np = r->min_np,
                        .max_np = r->max_np,
                        .target = r->target_np,
                        .max_resets = r->max_resets,
                        .check_every = r->check_every ? r->check_every : 1,
                        .rdzv_timeout_s = r->rdzv_timeout_s ? r->rdzv_timeout_s
                                                            : d->cfg->elastic.rendezvous_timeout_s,
                        .elastic_timeout_s = r->elastic_timeout_s
                                                 ? r->elastic_timeout_s
                                                 : d->cfg->elastic.elastic_timeout_s,
                        .blacklist_on = r->elastic && r->cooldown_min_s > 0};
    hv_jm_init(&j->jm, r->id, &p);
    j->jm.node_name = node_name_of;
    j->jm.node_name_ud = d;
    hv_job_state_t st = HV_JOB_PENDING;
    if (hv_job_state_parse(r->state, &st) != HV_OK) {
        HV_LOG(HV_LOG_WARN, "driver", "HV-JOB-STATE", "job %llu: unknown stored state '%s'",
               (unsigned long long)r->id, r->state);
        st = HV_JOB_FAILED;
    }
    j->jm.state = st;
    snprintf(j->jm.reason, sizeof(j->jm.reason), "%s", r->reason ? r->reason : "");
    j->jm.generation = r->generation;
    j->jm.size = r->size;
    j->jm.cross_size = r->cross_size;
    j->jm.resets = r->resets;
    j->jm.round_open = r->round_open;
    j->jm.round_rollback = r->round_rollback;
    snprintf(j->jm.round_reason, sizeof(j->jm.round_reason), "%s",
             r->round_reason ? r->round_reason : "");
    j->jm.round_code = r->round_code < HV_EV__COUNT ? (hv_ev_reason_t)r->round_code : HV_EV_NONE;
    j->jm.round_opened_ms = r->round_opened_ms;
    j->jm.round_deadline_ms = r->round_deadline_ms;
    j->jm.round_fail_at_ms = r->round_fail_at_ms;
    j->jm.resume_gen = r->resume_gen;
    j->jm.resumes = r->resumes;
    j->priority = r->priority;
    snprintf(j->ns, sizeof(j->ns), "%s", r->ns != NULL ? r->ns : "");
    j->preemptible = r->preemptible;
    j->fleet_target = r->fleet_target;
    j->fleet_cause = r->fleet_cause;
    j->fleet_ms = r->fleet_ms;
    j->resized_ms = r->resized_ms;
    for (int k = 0; k < HV_FL__COUNT && r->fleet_reason != NULL && r->fleet_reason[0]; k++) {
        if (strcmp(hv_fl_reason_name((hv_fl_reason_t)k), r->fleet_reason) == 0) {
            j->fleet_decided = 1;
            j->fleet_reason = (hv_fl_reason_t)k;
        }
    }
    j->name = r->name;
    r->name = NULL;
    j->spec = r->spec;
    j->spec_len = r->spec_len;
    r->spec = NULL;
    r->spec_len = 0;
    j->np = r->np;
    j->timeout_s = r->timeout_s;
    j->slots_per_host = r->slots_per_host;
    j->bl.cooldown_min_s = r->cooldown_min_s;
    j->bl.cooldown_max_s = r->cooldown_max_s;
    j->bl.max_strikes = r->max_strikes;
    j->submitted_ms = r->submitted_ms;
    j->started_ms = r->started_ms;
    j->ended_ms = r->ended_ms;
    *out = j;
    return HV_OK;
}

static hv_err worker_from_row(hv_djob_t *j, hv_worker_row_t *r, hv_dworker_t **out) {
    hv_dworker_t *w = hv_calloc(1, sizeof(*w));
    if (w == NULL) {
        return HV_ENOMEM;
    }
    hv_wk_state_t st;
    if (hv_wk_state_parse(r->state, &st) != HV_OK) {
        st = HV_WK_LOST;
    }
    w->jm.id = r->id;
    w->jm.node_id = r->node_id;
    w->jm.state = st;
    w->jm.exit_code = r->exit_code;
    w->jm.term_signal = r->term_signal;
    w->jm.joined_gen = r->joined_gen;
    w->jm.member_gen = r->member_gen;
    w->jm.rank = r->rank;
    w->jm.local_rank = r->local_rank;
    w->jm.local_size = r->local_size;
    w->jm.cross_rank = r->cross_rank;
    w->jm.done = r->done;
    w->jm.removed = r->removed;
    w->job = j;
    w->attempt = r->attempt;
    w->place_gen = r->generation;
    w->gpu = r->gpu;
    w->pid = r->pid;
    w->reason = r->reason;
    r->reason = NULL;
    w->addr = r->addr;
    r->addr = NULL;
    w->started_ms = r->started_ms;
    w->ended_ms = r->ended_ms;
    hv_err rc = hv_jm_attach(&j->jm, &w->jm);
    if (rc != HV_OK) {
        hv__driver_worker_free(w);
        return rc;
    }
    *out = w;
    return HV_OK;
}

static void job_load_blacklist(hv_driver_t *d, hv_djob_t *j) {
    hv_blacklist_row_t *rows = NULL;
    size_t n = 0;
    if (hv_store_blacklist_list(d->store, j->jm.id, &rows, &n) != HV_OK) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        hv_dbl_t *b = hv_calloc(1, sizeof(*b));
        if (b == NULL) {
            break;
        }
        b->node_id = rows[i].node_id;
        b->incarnation = rows[i].incarnation;
        b->e.strikes = rows[i].strikes;
        b->e.until_ms = rows[i].until_ms;
        b->e.permanent = rows[i].permanent;
        snprintf(b->reason, sizeof(b->reason), "%s", rows[i].reason);
        b->next = j->blacklist;
        j->blacklist = b;
    }
    hv_store_blacklist_free_list(rows, n);
}

/* The job's newest stored copy of its state, if any (jobm decides with it). */
static void job_load_copy(hv_driver_t *d, hv_djob_t *j) {
    hv_copy_row_t c;
    if (hv_store_copy_get(d->store, j->jm.id, &c) == HV_OK) {
        j->jm.copy = (hv_jm_copy_t){
            .generation = c.generation, .commit = c.commit, .stored_ms = c.stored_ms};
        snprintf(j->copy_path, sizeof(j->copy_path), "%s", c.path);
    }
    if (hv_store_durable_get(d->store, j->jm.id, &c) == HV_OK) {
        j->jm.durable = (hv_jm_copy_t){
            .generation = c.generation, .commit = c.commit, .stored_ms = c.stored_ms};
        snprintf(j->durable_key, sizeof(j->durable_key), "%s", c.path);
    }
    /* The copy a peer keeps (issue 28 §3): the job's newest when it is newer than the head's. */
    hv_peer_copy_row_t row;
    if (hv_store_peer_copy_get(d->store, j->jm.id, &row) == HV_OK) {
        j->peer = row;
        hv_copy_ref_t peer = {row.copy.generation, row.copy.commit, 0};
        hv_copy_ref_t head = {j->jm.copy.generation, j->jm.copy.commit, 0};
        if (hv_copy_newer(&peer, &head)) {
            j->jm.copy = (hv_jm_copy_t){.generation = row.copy.generation,
                                        .commit = row.copy.commit,
                                        .stored_ms = row.copy.stored_ms,
                                        .peer_node = row.node_id};
        }
    }
}

hv_err hv__driver_tput_store(hv_driver_t *d, const hv_djob_t *j, const hv_tput_sample_t *s,
                             size_t n) {
    hv_tput_row_t rows[HV_DRV_TPUT_SIZES];
    n = n < HV_DRV_TPUT_SIZES ? n : HV_DRV_TPUT_SIZES;
    for (size_t i = 0; i < n; i++) {
        rows[i] = (hv_tput_row_t){
            .job_id = j->jm.id, .size = s[i].size, .work = s[i].work, .seconds = s[i].seconds};
    }
    hv_err rc = hv_store_tput_put(d->store, j->jm.id, rows, n);
    hv__driver_store_result(d, rc, "store a job's throughput");
    return rc;
}

/* The job's stored throughput table (job_tput), what the fleet policy fits (tput.h). */
static void job_load_tput(hv_driver_t *d, hv_djob_t *j) {
    hv_tput_row_t *rows = NULL;
    size_t n = 0;
    if (hv_store_tput_get(d->store, j->jm.id, &rows, &n) != HV_OK) {
        return; /* the fleet policy uses the default shape until reports come */
    }
    j->ntput = 0;
    for (size_t i = 0; i < n && j->ntput < HV_DRV_TPUT_SIZES; i++) {
        j->tput[j->ntput++] = (hv_tput_sample_t){
            .size = rows[i].size, .work = rows[i].work, .seconds = rows[i].seconds};
    }
    hv_free(rows);
}

/* Loads a job and all its workers (any state) from the store. */
static hv_err job_load(hv_driver_t *d, hv_job_row_t *row, hv_djob_t **out) {
    hv_djob_t *j;
    HV_TRY(hv__driver_job_from_row(d, row, &j));
    hv_worker_row_t *ws = NULL;
    size_t nw = 0;
    hv_err rc = hv_store_worker_list(d->store, j->jm.id, 0, &ws, &nw);
    if (rc != HV_OK) {
        hv__driver_job_free(j);
        return rc;
    }
    for (size_t i = 0; i < nw && rc == HV_OK; i++) {
        hv_dworker_t *w;
        rc = worker_from_row(j, &ws[i], &w);
    }
    hv_store_worker_free_list(ws, nw);
    if (rc != HV_OK) {
        hv__driver_job_free(j);
        return rc;
    }
    job_load_blacklist(d, j);
    job_load_copy(d, j);
    job_load_tput(d, j);
    *out = j;
    return HV_OK;
}

hv_djob_t *hv__driver_job(hv_driver_t *d, uint64_t job_id) {
    hv_djob_t *j = job_by_id(d, job_id);
    if (j != NULL) {
        return j;
    }
    hv_job_row_t row;
    memset(&row, 0, sizeof(row));
    if (hv_store_job_get(d->store, job_id, &row) != HV_OK) {
        return NULL;
    }
    hv_err rc = job_load(d, &row, &j);
    hv_store_job_fini(&row);
    if (rc != HV_OK) {
        return NULL;
    }
    hv__driver_job_link(d, j);
    return j;
}

const hv_djob_t *hv_driver_job(hv_driver_t *d, uint64_t job_id) {
    return hv__driver_job(d, job_id);
}

hv_err hv__driver_fence(const hv_djob_t *j, const hv_dworker_t *w, uint32_t gen, const char *what,
                        char *err, size_t errlen) {
    hv_err rc = hv_jm_fence(&j->jm, &w->jm, gen, err, errlen);
    if (rc != HV_OK) {
        HV_LOG(HV_LOG_NOTICE, "driver", "HV-RDZV-FENCED", "refused %s: %s", what, err);
    }
    return rc;
}

hv_err hv__driver_rdzv_find(hv_driver_t *d, uint64_t job_id, uint64_t worker_id, hv_djob_t **jo,
                            hv_dworker_t **wo, char *err, size_t errlen) {
    hv_djob_t *j = hv__driver_job(d, job_id); /* memory, else the store (an ended job) */
    if (j == NULL) {
        snprintf(err, errlen, "job %llu is unknown", (unsigned long long)job_id);
        return HV_ENOTFOUND;
    }
    if (!job_active(j)) {
        snprintf(err, errlen, "job %llu has ended (%s)%s%s", (unsigned long long)job_id,
                 hv_job_state_name(j->jm.state), j->jm.reason[0] ? ": " : "", j->jm.reason);
        return HV_ESTATE;
    }
    hv_dworker_t *w = worker_of(j, worker_id);
    if (w == NULL) {
        snprintf(err, errlen, "worker %llu is not part of job %llu", (unsigned long long)worker_id,
                 (unsigned long long)job_id);
        return HV_ENOTFOUND;
    }
    *jo = j;
    *wo = w;
    return HV_OK;
}

/* ---- nodes, and the load at start ----------------------------------------------------------- */

void hv__driver_node_row(const hv_dnode_t *n, hv_node_row_t *r) {
    memset(r, 0, sizeof(*r));
    r->id = n->id;
    r->name = n->name;
    r->addrs = n->addrs;
    r->labels = n->labels;
    r->instance_id = n->instance_id;
    r->state = (char *)hv_node_state_name(n->state);
    r->peer = n->peer;
    r->slots = n->acct.slots;
    r->gpus = n->acct.gpus;
    r->cpus = n->cpus;
    r->memory_mb = n->memory_mb;
    r->preemptible = n->preemptible;
    r->incarnation = n->incarnation;
    r->registered_ms = n->registered_ms;
    r->last_seen_ms = n->last_seen_ms;
}

static hv_dnode_t *node_from_row(hv_node_row_t *r) {
    hv_dnode_t *n = hv_calloc(1, sizeof(*n));
    if (n == NULL) {
        return NULL;
    }
    n->id = r->id;
    n->name = r->name;
    n->addrs = r->addrs;
    n->labels = r->labels;
    n->instance_id = r->instance_id;
    n->peer = r->peer;
    r->name = r->addrs = r->labels = r->instance_id = r->peer = NULL;
    n->acct.slots = r->slots;
    n->acct.gpus = r->gpus;
    n->cpus = r->cpus;
    n->memory_mb = r->memory_mb; /* as its agent last reported it: actors needing memory are
                                  * placed before it joins again */
    n->preemptible = r->preemptible;
    n->incarnation = r->incarnation;
    if (hv_node_state_parse(r->state, &n->state) != HV_OK) {
        n->state = HV_NODE_DEAD;
    }
    n->registered_ms = r->registered_ms;
    n->last_seen_ms = n->persisted_seen_ms = r->last_seen_ms;
    return n;
}

hv_err hv__driver_load_tables(hv_driver_t *d) {
    uint64_t now = hv_now_ms(), wall = hv_wall_ms();
    hv_node_row_t *nodes = NULL;
    size_t nn = 0;
    HV_TRY(hv_store_node_list(d->store, &nodes, &nn));
    for (size_t i = 0; i < nn; i++) {
        hv_dnode_t *n = node_from_row(&nodes[i]);
        if (n == NULL) {
            hv_store_node_free_list(nodes, nn);
            return HV_ENOMEM;
        }
        /* Agents get one lease from the head's start to re-attach. */
        hv_lease_renew(&n->lease, now, d->cfg->lease_ms);
        n->next = d->nodes;
        d->nodes = n;
        hv__driver_index_node(d, n, 0, NULL);
    }
    hv_store_node_free_list(nodes, nn);

    hv_job_row_t *jobs = NULL;
    size_t nj = 0;
    HV_TRY(hv_store_job_list(d->store, 1, 0, &jobs, &nj));
    size_t nworkers = 0;
    /* job_list is newest first; link oldest first so scheduling order is kept. */
    for (size_t i = nj; i-- > 0;) {
        hv_djob_t *j;
        if (job_load(d, &jobs[i], &j) != HV_OK) {
            HV_LOG(HV_LOG_ERROR, "driver", "HV-JOB-LOAD", "job %llu could not be loaded",
                   (unsigned long long)jobs[i].id);
            continue;
        }
        uint32_t timeout = j->timeout_s ? j->timeout_s : d->cfg->job_wait_timeout_s;
        j->wait_deadline = hv_jm_preempted(&j->jm)
                               ? UINT64_MAX /* admitted once: no pending timeout */
                               : hv_cl_wait_deadline(now, wall, j->submitted_ms, timeout);
        hv_jm_restarted(&j->jm, wall);
        for (size_t k = 0; k < j->jm.nw; k++) {
            hv_dworker_t *w = (hv_dworker_t *)j->jm.w[k];
            if (!wlive(w)) {
                continue;
            }
            nworkers++;
            hv_dnode_t *n = node_by_id(d, w->jm.node_id);
            if (n != NULL) {
                hv_node_claim(&n->acct, w->gpu);
            }
        }
        hv_joblog_open(d->logs, j->log, j->jm.id);
        hv__driver_job_link(d, j);
    }
    hv_store_job_free_list(jobs, nj);

    /* Workers of jobs that ended while they were being killed are not coming back. */
    hv_worker_row_t *ws = NULL;
    size_t nw = 0;
    HV_TRY(hv_store_worker_list(d->store, 0, 1, &ws, &nw));
    for (size_t i = 0; i < nw; i++) {
        if (job_by_id(d, ws[i].job_id) != NULL) {
            continue;
        }
        hv_worker_row_t r = ws[i];
        r.state = "lost";
        r.reason = "the head restarted while its job was ending";
        r.ended_ms = wall;
        hv_err rc = hv_store_worker_update(d->store, &r);
        if (rc != HV_OK) {
            hv__driver_store_failed(d, rc, "mark a worker of an ended job lost");
        }
    }
    hv_store_worker_free_list(ws, nw);
    size_t n_active = 0;
    for (hv_djob_t *j = d->jobs; j != NULL; j = j->next) {
        n_active++;
    }
    HV_LOG(HV_LOG_NOTICE, "driver", "HV-HEAD-LOAD",
           "loaded %zu nodes, %zu active jobs, %zu live workers", nn, n_active, nworkers);
    return HV_OK;
}
