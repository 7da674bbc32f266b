/*
 * head_driver: the life of a job. A submitted job waits (bounded by its timeout) until the
 * placement (sched.c) finds np free slots on live nodes, jobs taken in submission order; then one
 * worker row per rank is stored and a spawn order goes to each agent. The job runs when every
 * worker started; it succeeds when every worker exited 0; it fails at the first worker that
 * exits non-zero, is killed by a signal, cannot start, or is lost with its node. Ending a job
 * writes its terminal state and reason first, then kills the live workers (SIGTERM, then SIGKILL
 * after the grace), and a worker that does not report its exit by kill_grace + 5 s is declared
 * lost, so no job stays "running" forever. Watchers get the final view once every worker ended.
 * Loop thread only; every change is stored before orders go out.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "head.h"
#include "log.h"
#include "mem.h"
#include "sched.h"
#include "util.h"

#define KILL_SLACK_MS 5000
#define ENDED_JOB_KEEP_MS 600000 /* ended jobs stay in memory this long for watchers */

static int state_is(const char *st, const char *want) { return strcmp(st, want) == 0; }

static int worker_active(const head_worker_t *w) {
    return state_is(w->row.state, "pending") || state_is(w->row.state, "starting") ||
           state_is(w->row.state, "running");
}

int head_job_terminal(const head_job_t *j) {
    return state_is(j->row.state, "succeeded") || state_is(j->row.state, "failed") ||
           state_is(j->row.state, "cancelled");
}

head_job_t *head_job_by_id(head_t *h, uint64_t id) {
    for (head_job_t *j = h->jobs; j != NULL; j = j->next) {
        if (j->row.id == id) {
            return j;
        }
    }
    return NULL;
}

head_worker_t *head_worker_by_id(head_t *h, uint64_t id) {
    for (head_job_t *j = h->jobs; j != NULL; j = j->next) {
        for (uint32_t r = 0; r < j->n_workers; r++) {
            if (j->workers[r] != NULL && j->workers[r]->row.id == id) {
                return j->workers[r];
            }
        }
    }
    return NULL;
}

static const char *node_name(const head_worker_t *w) {
    return w->node != NULL ? w->node->row.name : "?";
}

static void node_release(head_worker_t *w) {
    head_node_t *n = w->node;
    if (n == NULL) {
        return;
    }
    if (n->slots_used > 0) {
        n->slots_used--;
    }
    if (w->row.gpu >= 0 && w->row.gpu < 64) {
        n->gpus_used_mask &= ~(1ull << w->row.gpu);
    }
}

static void node_claim(head_worker_t *w) {
    head_node_t *n = w->node;
    if (n == NULL) {
        return;
    }
    n->slots_used++;
    if (w->row.gpu >= 0 && w->row.gpu < 64) {
        n->gpus_used_mask |= 1ull << w->row.gpu;
    }
}

static void job_store(head_t *h, head_job_t *j) {
    hv_err rc = hv_store_job_update(h->store, &j->row);
    if (rc != HV_OK) {
        head_store_failed(h, rc, "update job");
    }
}

static void worker_store(head_t *h, head_worker_t *w) {
    hv_err rc = hv_store_worker_update(h->store, &w->row);
    if (rc != HV_OK) {
        head_store_failed(h, rc, "update worker");
    }
}

static void job_open_log(head_t *h, head_job_t *j) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/logs/%llu.log", h->cfg.data_dir,
             (unsigned long long)j->row.id);
    j->log = fopen(path, "a");
    if (j->log == NULL) {
        HV_LOG(HV_LOG_ERROR, "driver", "HV-LOG-OPEN", "cannot open %s: job output is not kept",
               path);
        return;
    }
    long end = ftell(j->log);
    j->log_bytes = end > 0 ? (uint64_t)end : 0;
}

static void job_free(head_job_t *j) {
    head_jobs_close_watchers(j);
    head_rdzv_free_job(j);
    for (uint32_t r = 0; r < j->n_workers; r++) {
        if (j->workers[r] != NULL) {
            hv_store_worker_fini(&j->workers[r]->row);
            hv_free(j->workers[r]->rdzv_addr);
            hv_free(j->workers[r]);
        }
    }
    hv_free(j->workers);
    if (j->log != NULL) {
        fclose(j->log);
    }
    if (j->spec != NULL) {
        hvpb__v1__job_spec__free_unpacked(j->spec, NULL);
    }
    hv_free(j->end_state);
    hv_store_job_fini(&j->row);
    hv_free(j);
}

/* Appends to the tail: the list is in submission order, which is scheduling order. */
static void job_link(head_t *h, head_job_t *j) {
    head_job_t **p = &h->jobs;
    while (*p != NULL) {
        p = &(*p)->next;
    }
    *p = j;
}

static hv_err job_from_row(head_t *h, hv_job_row_t *row, head_job_t **out) {
    head_job_t *j = hv_calloc(1, sizeof(*j));
    if (j == NULL) {
        return HV_ENOMEM;
    }
    j->row = *row;
    memset(row, 0, sizeof(*row));
    j->spec = hvpb__v1__job_spec__unpack(NULL, j->row.spec_len, j->row.spec);
    if (j->spec == NULL) {
        HV_LOG(HV_LOG_ERROR, "driver", "HV-JOB-SPEC", "job %llu: stored spec is unreadable",
               (unsigned long long)j->row.id);
        job_free(j);
        return HV_ECORRUPT;
    }
    j->n_workers = j->row.np;
    j->workers = hv_calloc(j->n_workers ? j->n_workers : 1, sizeof(*j->workers));
    if (j->workers == NULL) {
        job_free(j);
        return HV_ENOMEM;
    }
    (void)h;
    *out = j;
    return HV_OK;
}

/* ---- load ----------------------------------------------------------------------------------- */

hv_err head_driver_load(head_t *h) {
    uint64_t now = hv_now_ms();
    hv_node_row_t *nodes = NULL;
    size_t nn = 0;
    HV_TRY(hv_store_node_list(h->store, &nodes, &nn));
    for (size_t i = 0; i < nn; i++) {
        head_node_t *n = hv_calloc(1, sizeof(*n));
        if (n == NULL) {
            hv_store_node_free_list(nodes, nn);
            return HV_ENOMEM;
        }
        n->row = nodes[i];
        memset(&nodes[i], 0, sizeof(nodes[i]));
        /* Agents get one lease from the head's start to re-attach. */
        n->lease_deadline = now + h->cfg.lease_ms;
        n->persisted_seen_ms = n->row.last_seen_ms;
        n->next = h->nodes;
        h->nodes = n;
    }
    hv_store_node_free_list(nodes, nn);

    hv_job_row_t *jobs = NULL;
    size_t nj = 0;
    HV_TRY(hv_store_job_list(h->store, 1, 0, &jobs, &nj));
    /* job_list is newest first; link oldest first so scheduling order is kept. */
    for (size_t i = nj; i-- > 0;) {
        head_job_t *j;
        if (job_from_row(h, &jobs[i], &j) != HV_OK) {
            continue;
        }
        uint32_t timeout = j->row.timeout_s ? j->row.timeout_s : h->cfg.job_wait_timeout_s;
        uint64_t waited = hv_wall_ms() - j->row.submitted_ms;
        j->wait_deadline = now + (timeout * 1000ull > waited ? timeout * 1000ull - waited : 0);
        job_open_log(h, j);
        job_link(h, j);
    }
    hv_store_job_free_list(jobs, nj);

    hv_worker_row_t *ws = NULL;
    size_t nw = 0;
    HV_TRY(hv_store_worker_list(h->store, 0, 1, &ws, &nw));
    for (size_t i = 0; i < nw; i++) {
        head_job_t *j = head_job_by_id(h, ws[i].job_id);
        if (j == NULL || ws[i].rank >= j->n_workers) {
            /* The job ended while this worker was being killed: it is not coming back. */
            head_set_str(&ws[i].state, "lost");
            head_set_str(&ws[i].reason, "the head restarted while its job was ending");
            ws[i].ended_ms = hv_wall_ms();
            hv_store_worker_update(h->store, &ws[i]);
            continue;
        }
        head_worker_t *w = hv_calloc(1, sizeof(*w));
        if (w == NULL) {
            hv_store_worker_free_list(ws, nw);
            return HV_ENOMEM;
        }
        w->row = ws[i];
        memset(&ws[i], 0, sizeof(ws[i]));
        w->job = j;
        w->node = head_node_by_id(h, w->row.node_id);
        if (j->workers[w->row.rank] != NULL) {
            hv_store_worker_fini(&j->workers[w->row.rank]->row);
            hv_free(j->workers[w->row.rank]);
        }
        j->workers[w->row.rank] = w;
        node_claim(w);
    }
    hv_store_worker_free_list(ws, nw);
    size_t n_active = 0;
    for (head_job_t *j = h->jobs; j != NULL; j = j->next) {
        n_active++;
    }
    HV_LOG(HV_LOG_NOTICE, "driver", "HV-HEAD-LOAD",
           "loaded %zu nodes, %zu active jobs, %zu workers", nn, n_active, nw);
    return HV_OK;
}

hv_err head_driver_restore_job(head_t *h, uint64_t id, head_job_t **out) {
    hv_job_row_t row;
    memset(&row, 0, sizeof(row));
    HV_TRY(hv_store_job_get(h->store, id, &row));
    head_job_t *j;
    hv_err rc = job_from_row(h, &row, &j);
    if (rc != HV_OK) {
        hv_store_job_fini(&row);
        return rc;
    }
    hv_worker_row_t *ws = NULL;
    size_t nw = 0;
    if (hv_store_worker_list(h->store, id, 0, &ws, &nw) == HV_OK) {
        /* ordered by rank, attempt: the last row of a rank is its latest attempt */
        for (size_t i = 0; i < nw; i++) {
            if (ws[i].rank >= j->n_workers) {
                continue;
            }
            head_worker_t *w = j->workers[ws[i].rank];
            if (w == NULL && (w = hv_calloc(1, sizeof(*w))) == NULL) {
                break;
            }
            hv_store_worker_fini(&w->row);
            w->row = ws[i];
            memset(&ws[i], 0, sizeof(ws[i]));
            w->job = j;
            w->node = head_node_by_id(h, w->row.node_id);
            j->workers[w->row.rank] = w;
        }
        hv_store_worker_free_list(ws, nw);
    }
    job_link(h, j);
    *out = j;
    return HV_OK;
}

void head_driver_free(head_t *h) {
    while (h->jobs != NULL) {
        head_job_t *j = h->jobs;
        h->jobs = j->next;
        job_free(j);
    }
    while (h->nodes != NULL) {
        head_node_t *n = h->nodes;
        h->nodes = n->next;
        hv_store_node_fini(&n->row);
        hv_free(n->hello_running);
        hv_free(n);
    }
}

/* ---- capacity ------------------------------------------------------------------------------- */

/* Fills sched nodes from live nodes. `need_session`: only nodes that can take orders now. */
static size_t sched_nodes(head_t *h, hv_sched_node_t *out, head_node_t **map, size_t cap,
                          int need_session) {
    size_t n = 0;
    for (head_node_t *nd = h->nodes; nd != NULL && n < cap; nd = nd->next) {
        int alive = state_is(nd->row.state, "alive");
        out[n].id = nd->row.id;
        out[n].slots_total = nd->row.slots;
        out[n].slots_used = nd->slots_used;
        out[n].gpus = nd->row.gpus;
        out[n].gpus_used_mask = nd->gpus_used_mask;
        out[n].schedulable = alive && (!need_session || nd->session != NULL);
        map[n] = nd;
        n++;
    }
    return n;
}

static size_t node_count(head_t *h) {
    size_t n = 0;
    for (head_node_t *nd = h->nodes; nd != NULL; nd = nd->next) {
        n++;
    }
    return n;
}

/* Slots usable now (nodes that can take orders) or in total (every live node, were it empty). */
static uint32_t count_slots(head_t *h, uint32_t slots_per_host, int free_now) {
    size_t cap = node_count(h) + 1;
    hv_sched_node_t *sn = hv_calloc(cap, sizeof(*sn));
    head_node_t **map = hv_calloc(cap, sizeof(*map));
    uint32_t slots = 0;
    if (sn != NULL && map != NULL) {
        size_t n = sched_nodes(h, sn, map, cap, free_now);
        slots = free_now ? hv_sched_free(sn, n, slots_per_host)
                         : hv_sched_capacity(sn, n, slots_per_host);
    }
    hv_free(sn);
    hv_free(map);
    return slots;
}

uint32_t head_free_slots(head_t *h, uint32_t slots_per_host) {
    return count_slots(h, slots_per_host, 1);
}

uint32_t head_capacity(head_t *h, uint32_t slots_per_host) {
    return count_slots(h, slots_per_host, 0);
}

/* ---- submit and schedule -------------------------------------------------------------------- */

hv_err head_driver_submit(head_t *h, Hvpb__V1__JobSpec *spec, uint32_t np, head_job_t **out) {
    hv_job_row_t row;
    memset(&row, 0, sizeof(row));
    size_t len = hvpb__v1__job_spec__get_packed_size(spec);
    row.spec = hv_malloc(len);
    if (row.spec == NULL) {
        return HV_ENOMEM;
    }
    hvpb__v1__job_spec__pack(spec, row.spec);
    row.spec_len = len;
    row.name = hv_strdup(spec->name);
    row.state = hv_strdup("pending");
    row.reason = hv_strdup("");
    row.np = np;
    row.min_np = spec->min_np ? spec->min_np : np;
    row.max_np = spec->max_np ? spec->max_np : np;
    row.max_resets = spec->max_resets;
    row.timeout_s = spec->timeout_s ? spec->timeout_s : h->cfg.job_wait_timeout_s;
    row.submitted_ms = hv_wall_ms();
    hv_err rc = hv_store_job_insert(h->store, &row);
    if (rc != HV_OK) {
        head_store_failed(h, rc, "insert job");
        hv_store_job_fini(&row);
        return rc;
    }
    head_job_t *j;
    rc = job_from_row(h, &row, &j);
    if (rc != HV_OK) {
        hv_store_job_fini(&row);
        return rc;
    }
    j->wait_deadline = hv_now_ms() + (uint64_t)j->row.timeout_s * 1000u;
    job_open_log(h, j);
    job_link(h, j);
    head_event(h, j->row.id, 0, "job.state", "job %llu (%s) submitted: %u workers, pending",
               (unsigned long long)j->row.id, j->row.name, np);
    *out = j;
    return HV_OK;
}

static void send_spawn(head_t *h, head_job_t *j, head_worker_t *w) {
    Hvpb__V1__SpawnWorker sp = HVPB__V1__SPAWN_WORKER__INIT;
    sp.worker_id = w->row.id;
    sp.job_id = j->row.id;
    sp.rank = w->row.rank;
    sp.size = j->row.np;
    sp.local_rank = w->row.local_rank;
    sp.local_size = w->row.local_size;
    sp.binary = j->spec->binary;
    sp.n_args = j->spec->n_args;
    sp.args = j->spec->args;
    sp.n_env = j->spec->n_env;
    sp.env = j->spec->env;
    sp.n_files = j->spec->n_files;
    sp.files = j->spec->files;
    uint32_t gpu = (uint32_t)w->row.gpu;
    if (w->row.gpu >= 0) {
        sp.n_gpus = 1;
        sp.gpus = &gpu;
    }
    sp.head_addr = h->advertise;
    sp.generation = j->row.generation;
    Hvpb__V1__HeadMsg msg = HVPB__V1__HEAD_MSG__INIT;
    msg.body_case = HVPB__V1__HEAD_MSG__BODY_SPAWN;
    msg.spawn = &sp;
    if (head_node_send(w->node, &msg) != HV_OK) {
        head_driver_worker_lost(h, w, "its node's session closed before the spawn order");
    }
}

/* Places one pending job if it fits now. Returns 1 if placed. */
static int schedule_job(head_t *h, head_job_t *j) {
    size_t cap = node_count(h) + 1;
    hv_sched_node_t *sn = hv_calloc(cap, sizeof(*sn));
    head_node_t **map = hv_calloc(cap, sizeof(*map));
    hv_sched_slot_t *slots = hv_calloc(j->row.np, sizeof(*slots));
    int placed = 0;
    if (sn == NULL || map == NULL || slots == NULL) {
        goto out;
    }
    size_t n = sched_nodes(h, sn, map, cap, 1);
    hv_sched_req_t req = {.np = j->row.np, .slots_per_host = j->spec->slots_per_host};
    if (hv_sched_place(sn, n, &req, slots) != HV_OK) {
        goto out;
    }
    /* Store every worker and the job's new state in one transaction, then send orders. */
    hv_err rc = hv_store_begin(h->store);
    for (uint32_t r = 0; r < j->row.np && rc == HV_OK; r++) {
        head_worker_t *w = hv_calloc(1, sizeof(*w));
        if (w == NULL) {
            rc = HV_ENOMEM;
            break;
        }
        w->job = j;
        w->node = map[slots[r].node];
        w->row.job_id = j->row.id;
        w->row.node_id = w->node->row.id;
        w->row.rank = slots[r].rank;
        w->row.local_rank = slots[r].local_rank;
        w->row.local_size = slots[r].local_size;
        w->row.gpu = slots[r].gpu;
        w->row.attempt = 1;
        w->row.generation = j->row.generation;
        w->row.exit_code = -1;
        w->row.state = hv_strdup("starting");
        w->row.reason = hv_strdup("");
        rc = hv_store_worker_insert(h->store, &w->row);
        if (rc != HV_OK) {
            hv_store_worker_fini(&w->row);
            hv_free(w);
            break;
        }
        j->workers[slots[r].rank] = w;
    }
    if (rc == HV_OK) {
        head_set_str(&j->row.state, "placing");
        rc = hv_store_job_update(h->store, &j->row);
    }
    if (rc == HV_OK) {
        rc = hv_store_commit(h->store);
    }
    if (rc != HV_OK) {
        head_store_failed(h, rc, "place job");
        hv_store_rollback(h->store);
        head_set_str(&j->row.state, "pending");
        for (uint32_t r = 0; r < j->n_workers; r++) {
            if (j->workers[r] != NULL) {
                hv_store_worker_fini(&j->workers[r]->row);
                hv_free(j->workers[r]);
                j->workers[r] = NULL;
            }
        }
        goto out;
    }
    for (uint32_t r = 0; r < j->n_workers; r++) {
        node_claim(j->workers[r]);
    }
    char hosts[512] = "";
    for (uint32_t r = 0; r < j->n_workers; r++) {
        if (j->workers[r]->row.local_rank == 0) {
            size_t l = strlen(hosts);
            snprintf(hosts + l, sizeof(hosts) - l, "%s%s x%u", l ? ", " : "",
                     node_name(j->workers[r]), j->workers[r]->row.local_size);
        }
    }
    head_event(h, j->row.id, 0, "job.state", "job %llu placing %u workers on %s",
               (unsigned long long)j->row.id, j->row.np, hosts);
    for (uint32_t r = 0; r < j->n_workers && !j->ending; r++) {
        send_spawn(h, j, j->workers[r]);
    }
    placed = 1;
out:
    hv_free(sn);
    hv_free(map);
    hv_free(slots);
    return placed;
}

void head_driver_schedule(head_t *h) {
    if (h->stopping) {
        return;
    }
    for (head_job_t *j = h->jobs; j != NULL; j = j->next) {
        if (!state_is(j->row.state, "pending") || j->ending) {
            continue;
        }
        /* First come, first served: a job that does not fit blocks the ones behind it, so a
         * large job is not starved by a stream of small ones. */
        if (!schedule_job(h, j)) {
            break;
        }
    }
}

/* ---- worker events -------------------------------------------------------------------------- */

static int job_live_workers(const head_job_t *j) {
    int n = 0;
    for (uint32_t r = 0; r < j->n_workers; r++) {
        n += j->workers[r] != NULL && worker_active(j->workers[r]);
    }
    return n;
}

/* An ending job whose workers have all ended: tell watchers and the rendezvous. */
static void job_maybe_finished(head_t *h, head_job_t *j) {
    if (!j->ending || job_live_workers(j) > 0) {
        return;
    }
    j->ending = 0;
    head_rdzv_job_ended(h, j);
    head_jobs_notify(h, j);
    head_driver_schedule(h);
}

static void job_set_terminal(head_t *h, head_job_t *j, const char *state, const char *reason) {
    head_set_str(&j->row.state, state);
    head_set_str(&j->row.reason, reason);
    j->row.ended_ms = hv_wall_ms();
    job_store(h, j);
    /* Set before the event: watchers must not see a terminal job as finished while its
     * workers are still being reaped (job_maybe_finished clears it). */
    j->ending = 1;
    if (reason != NULL && reason[0] != '\0') {
        head_event(h, j->row.id, 0, "job.state", "job %llu %s: %s", (unsigned long long)j->row.id,
                   state, reason);
    } else {
        head_event(h, j->row.id, 0, "job.state", "job %llu %s", (unsigned long long)j->row.id,
                   state);
    }
}

void head_driver_end_job(head_t *h, head_job_t *j, const char *state, const char *reason) {
    if (head_job_terminal(j)) {
        return;
    }
    job_set_terminal(h, j, state, reason);
    uint64_t now = hv_now_ms();
    for (uint32_t r = 0; r < j->n_workers; r++) {
        head_worker_t *w = j->workers[r];
        if (w == NULL || !worker_active(w)) {
            continue;
        }
        w->kill_deadline = now + h->cfg.kill_grace_ms + KILL_SLACK_MS;
        Hvpb__V1__KillWorker k = HVPB__V1__KILL_WORKER__INIT;
        k.worker_id = w->row.id;
        k.grace_ms = h->cfg.kill_grace_ms;
        k.reason = (char *)reason;
        Hvpb__V1__HeadMsg msg = HVPB__V1__HEAD_MSG__INIT;
        msg.body_case = HVPB__V1__HEAD_MSG__BODY_KILL;
        msg.kill = &k;
        head_node_send(w->node, &msg); /* no session: the kill deadline declares it lost */
    }
    job_maybe_finished(h, j);
}

void head_driver_worker_started(head_t *h, head_worker_t *w, int pid) {
    if (!state_is(w->row.state, "starting")) {
        return; /* a repeat, or it already ended */
    }
    head_job_t *j = w->job;
    head_set_str(&w->row.state, "running");
    w->row.pid = pid;
    w->row.started_ms = hv_wall_ms();
    worker_store(h, w);
    HV_LOG(HV_LOG_INFO, "driver", "HV-WORKER-START", "job %llu rank %u started on %s (pid %d)",
           (unsigned long long)j->row.id, w->row.rank, node_name(w), pid);
    if (j->ending || !state_is(j->row.state, "placing")) {
        return;
    }
    for (uint32_t r = 0; r < j->n_workers; r++) {
        if (j->workers[r] == NULL || state_is(j->workers[r]->row.state, "starting")) {
            return;
        }
    }
    head_set_str(&j->row.state, "running");
    j->row.started_ms = hv_wall_ms();
    job_store(h, j);
    head_event(h, j->row.id, 0, "job.state", "job %llu running: %u workers started",
               (unsigned long long)j->row.id, j->row.np);
}

static void describe_exit(char *buf, size_t len, const head_worker_t *w, int code, int sig,
                          const char *reason) {
    if (reason != NULL && reason[0] != '\0' && code < 0 && sig == 0) {
        snprintf(buf, len, "rank %u on %s could not run: %s", w->row.rank, node_name(w), reason);
    } else if (sig != 0) {
        const char *name = sigabbrev_np(sig);
        snprintf(buf, len, "rank %u on %s was killed by signal SIG%s", w->row.rank, node_name(w),
                 name ? name : "?");
    } else {
        snprintf(buf, len, "rank %u on %s exited with status %d", w->row.rank, node_name(w), code);
    }
}

void head_driver_worker_exited(head_t *h, head_worker_t *w, int exit_code, int term_signal,
                               const char *reason) {
    if (!worker_active(w)) {
        return;
    }
    head_job_t *j = w->job;
    int killed_by_us = w->kill_deadline != 0;
    head_set_str(&w->row.state, killed_by_us ? "killed" : "exited");
    w->row.exit_code = exit_code;
    w->row.term_signal = term_signal;
    head_set_str(&w->row.reason, reason);
    w->row.ended_ms = hv_wall_ms();
    w->kill_deadline = 0;
    worker_store(h, w);
    node_release(w);
    char what[512];
    describe_exit(what, sizeof(what), w, exit_code, term_signal, reason);
    int ok = exit_code == 0 && term_signal == 0;
    if (!ok || killed_by_us) {
        const char *kind = killed_by_us ? "worker.killed" : ok ? "worker.exit" : "worker.fail";
        head_event(h, j->row.id, w->row.node_id, kind, "%s", what);
    }
    if (j->ending || head_job_terminal(j)) {
        job_maybe_finished(h, j);
    } else if (!ok) {
        head_driver_end_job(h, j, "failed", what);
    } else {
        for (uint32_t r = 0; r < j->n_workers; r++) {
            head_worker_t *o = j->workers[r];
            if (o == NULL || !state_is(o->row.state, "exited") || o->row.exit_code != 0 ||
                o->row.term_signal != 0) {
                head_driver_schedule(h);
                return;
            }
        }
        job_set_terminal(h, j, "succeeded", "");
        job_maybe_finished(h, j);
    }
    head_driver_schedule(h);
}

void head_driver_worker_lost(head_t *h, head_worker_t *w, const char *reason) {
    if (!worker_active(w)) {
        return;
    }
    head_job_t *j = w->job;
    head_set_str(&w->row.state, "lost");
    head_set_str(&w->row.reason, reason);
    w->row.ended_ms = hv_wall_ms();
    w->kill_deadline = 0;
    worker_store(h, w);
    node_release(w);
    char what[600];
    snprintf(what, sizeof(what), "rank %u on %s was lost: %s", w->row.rank, node_name(w), reason);
    head_event(h, j->row.id, w->row.node_id, "worker.lost", "%s", what);
    if (j->ending || head_job_terminal(j)) {
        job_maybe_finished(h, j);
    } else {
        head_driver_end_job(h, j, "failed", what);
    }
}

void head_driver_node_dead(head_t *h, head_node_t *n, const char *reason) {
    char why[512];
    snprintf(why, sizeof(why), "node %s is dead: %s", n->row.name, reason);
    for (head_job_t *j = h->jobs; j != NULL; j = j->next) {
        for (uint32_t r = 0; r < j->n_workers; r++) {
            head_worker_t *w = j->workers[r];
            if (w != NULL && w->node == n && worker_active(w)) {
                head_driver_worker_lost(h, w, why);
            }
        }
    }
    n->slots_used = 0;
    n->gpus_used_mask = 0;
}

/* ---- tick ----------------------------------------------------------------------------------- */

void head_driver_tick(head_t *h, uint64_t now) {
    for (head_job_t *j = h->jobs; j != NULL; j = j->next) {
        if (state_is(j->row.state, "pending") && !j->ending && now > j->wait_deadline) {
            char why[256];
            snprintf(why, sizeof(why),
                     "waited %u s for %u free slots; %u are free now (%u in the cluster)",
                     j->row.timeout_s, j->row.np, head_free_slots(h, j->spec->slots_per_host),
                     head_capacity(h, j->spec->slots_per_host));
            head_driver_end_job(h, j, "failed", why);
            continue;
        }
        for (uint32_t r = 0; r < j->n_workers; r++) {
            head_worker_t *w = j->workers[r];
            if (w != NULL && w->kill_deadline != 0 && now > w->kill_deadline && worker_active(w)) {
                head_driver_worker_lost(h, w, "it did not report an exit after the kill order");
            }
        }
    }
    /* Forget ended jobs nobody watches after a while; the store keeps them. */
    for (head_job_t **p = &h->jobs; *p != NULL;) {
        head_job_t *j = *p;
        if (head_job_terminal(j) && !j->ending && j->watchers == NULL &&
            hv_wall_ms() > j->row.ended_ms + ENDED_JOB_KEEP_MS) {
            *p = j->next;
            job_free(j);
        } else {
            p = &j->next;
        }
    }
}
