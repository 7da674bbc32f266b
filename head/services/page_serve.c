/* page_serve: see page_serve.h. */
#include "page_serve.h"

#include "views.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "cost.h"
#include "log.h"
#include "mem.h"
#include "events.h"
#include "page.h"
#include "sha256.h"
#include "util.h"

#define PAGE_CTYPE "text/html; charset=utf-8"

/* The node type of a node name: its newest autoscaler instance's, else "manual". */
static const char *serve_node_type(const hv_instance_row_t *rows, size_t n, const char *name) {
    const char *t = HV_COST_MANUAL;
    for (size_t i = 0; name != NULL && i < n; i++) {
        if (rows[i].node_name != NULL && rows[i].type != NULL &&
            strcmp(rows[i].node_name, name) == 0) {
            t = rows[i].type;
        }
    }
    return t;
}

static void serve_job_fields(const hv_job_row_t *r, hv_page_job_t *out) {
    *out = (hv_page_job_t){.id = r->id,
                           .name = r->name,
                           .state = r->state,
                           .reason = r->reason,
                           .elastic = r->elastic,
                           .np = r->np,
                           .min_np = r->min_np,
                           .max_np = r->max_np,
                           .size = r->elastic ? r->size : r->np,
                           .generation = r->generation,
                           .resets = r->resets,
                           .submitted_ms = r->submitted_ms,
                           .started_ms = r->started_ms,
                           .ended_ms = r->ended_ms};
}

/* The actors, newest first (at most HV_PAGE_MAX_ACTORS), with their figures; *n how many. */
static hv_page_actor_t *serve_actors(hv_page_src_t *src, size_t *n) {
    size_t all = 0;
    *n = 0;
    for (const hv_dactor_t *x = hv_actors_all(src->actors); x != NULL; x = x->next) {
        all++;
    }
    size_t cap = all < HV_PAGE_MAX_ACTORS ? all : HV_PAGE_MAX_ACTORS;
    hv_page_actor_t *out = hv_calloc(cap ? cap : 1, sizeof(*out));
    if (out == NULL) {
        return NULL;
    }
    /* The list is by id (oldest first): keep the newest cap, then turn them around. */
    size_t skip = all - cap, i = 0;
    for (const hv_dactor_t *x = hv_actors_all(src->actors); x != NULL; x = x->next, i++) {
        if (i < skip) {
            continue;
        }
        const hv_dnode_t *nd = x->am.node_id != 0 ? hv_driver_node(src->d, x->am.node_id) : NULL;
        hv_callfig_t f;
        hv_actorfig_total(&x->fig, &f);
        out[cap - 1 - (i - skip)] = (hv_page_actor_t){.id = x->am.id,
                                                      .ns = x->ns,
                                                      .name = x->name,
                                                      .class_name = x->class_name,
                                                      .state = hv_am_state_name(x->am.state),
                                                      .cause = hv_am_cause_name(x->am.cause),
                                                      .node = nd != NULL ? nd->name : "",
                                                      .restarts = x->am.restarts,
                                                      .max_restarts = x->am.max_restarts,
                                                      .moves = x->am.moves,
                                                      .calls_ok = f.ok,
                                                      .calls_error = f.error,
                                                      .p99_ms = hv_callfig_quantile_ms(&f, 0.99)};
    }
    *n = cap;
    return out;
}

/* The demand of the active jobs (the autoscaler's view), filled into the page's jobs. */
static void serve_demand(hv_driver_t *d, hv_page_job_t *jobs, size_t njobs) {
    size_t n = 0;
    for (const hv_djob_t *j = hv_driver_jobs(d); j != NULL; j = j->next) {
        n++;
    }
    hv_driver_demand_t *dem = hv_calloc(n ? n : 1, sizeof(*dem));
    if (dem == NULL) {
        return;
    }
    size_t nd = hv_driver_demand(d, dem, n);
    for (size_t i = 0; i < nd; i++) {
        for (size_t k = 0; k < njobs; k++) {
            if (jobs[k].id == dem[i].job_id) {
                jobs[k].demand = dem[i].workers;
                jobs[k].pending = dem[i].pending;
            }
        }
    }
    hv_free(dem);
}

/* Live workers of j that are in the job (not leaving). */
static uint32_t serve_live(const hv_djob_t *j) {
    uint32_t n = 0;
    for (size_t i = 0; i < j->jm.nw; i++) {
        const hv_jm_worker_t *w = j->jm.w[i];
        n += hv_wk_state_active(w->state) && !w->removed && !w->evict;
    }
    return n;
}

void hv_page_sample(hv_page_src_t *src, uint64_t now) {
    for (const hv_djob_t *j = hv_driver_jobs(src->d); j != NULL; j = j->next) {
        if (j->jm.state != HV_JOB_RUNNING || j->figs.reports == 0) {
            continue;
        }
        hv_page_tjob_t *e = NULL, *spare = NULL;
        for (size_t i = 0; i < HV_PAGE_TPUT_JOBS && e == NULL; i++) {
            hv_page_tjob_t *t = &src->tput[i];
            if (t->job_id == j->jm.id) {
                e = t;
                continue;
            }
            const hv_djob_t *o = t->job_id != 0 ? hv_driver_job(src->d, t->job_id) : NULL;
            if (spare == NULL && (o == NULL || o->jm.state != HV_JOB_RUNNING)) {
                spare = t; /* free, or its job ended: a running job's page needs it more */
            }
        }
        if (e == NULL) {
            if (spare == NULL) {
                continue;
            }
            e = spare;
            e->job_id = j->jm.id;
            e->n = 0;
        }
        const hv_page_tsample_t *last = e->n > 0 ? &e->s[e->n - 1] : NULL;
        uint32_t size = serve_live(j);
        if (last != NULL && last->commits == j->figs.commits && last->size == size &&
            now < last->t_ms + 5000) {
            continue;
        }
        if (e->n == HV_PAGE_TPUT_SAMPLES) {
            memmove(&e->s[0], &e->s[1], (HV_PAGE_TPUT_SAMPLES - 1) * sizeof(e->s[0]));
            e->n--;
        }
        e->s[e->n++] = (hv_page_tsample_t){now, j->figs.commits, size};
    }
}

/* The fleet chart's series: the slots each recent job held over the span, from its rounds
 * (stored events). *pts and *names are owned by the caller (hv_free). */
static size_t serve_fleet(hv_page_src_t *src, const hv_job_row_t *jrows, size_t nj, uint64_t now,
                          hv_page_fleet_t *f, hv_svg_series_t *series, hv_svg_point_t **pts,
                          char (*names)[80]) {
    f->t1_ms = now;
    f->t0_ms = now > HV_PAGE_FLEET_SPAN_MS ? now - HV_PAGE_FLEET_SPAN_MS : 0;
    uint64_t earliest = now;
    size_t ns = 0;
    /* The newest jobs that held slots within the span, drawn oldest at the bottom. */
    for (size_t i = 0; i < nj && ns < HV_PAGE_FLEET_JOBS; i++) {
        const hv_job_row_t *r = &jrows[i];
        if (r->started_ms == 0 || (r->ended_ms != 0 && r->ended_ms < f->t0_ms)) {
            continue;
        }
        hv_event_row_t *ev = NULL;
        size_t nev = 0;
        if (hv_view_events(src->d, r->id, 0, HV_PAGE_MAX_EVENTS, &ev, &nev) != HV_OK) {
            continue;
        }
        hv_page_round_t *rounds = hv_calloc(nev + 1, sizeof(*rounds));
        char(*reasons)[HV_JM_REASON_MAX] = hv_calloc(nev + 1, HV_JM_REASON_MAX);
        hv_svg_point_t *p = hv_calloc(nev + 2, sizeof(*p));
        size_t np = 0;
        if (rounds != NULL && reasons != NULL && p != NULL) {
            size_t nr = hv_page_rounds(ev, nev, rounds, reasons, nev);
            np = hv_page_size_points(rounds, nr, r->started_ms, r->ended_ms, r->np, p, nev + 2);
        }
        hv_free(rounds);
        hv_free(reasons);
        hv_view_events_free(ev, nev);
        if (np == 0) {
            hv_free(p);
            continue;
        }
        earliest = p[0].t_ms < earliest ? p[0].t_ms : earliest;
        snprintf(names[ns], sizeof(names[ns]), "job %" PRIu64 " (%.40s)", r->id,
                 r->name != NULL ? r->name : "");
        pts[ns] = p;
        series[ns] = (hv_svg_series_t){names[ns], hv_svg_color(r->id), p, np};
        ns++;
    }
    /* Oldest job at the bottom of the stack (the list came newest first). */
    for (size_t a = 0, b = ns ? ns - 1 : 0; a < b; a++, b--) {
        hv_svg_series_t t = series[a];
        series[a] = series[b];
        series[b] = t;
    }
    if (earliest > f->t0_ms && earliest < now) {
        f->t0_ms = earliest; /* a young cluster: its span, not 15 empty minutes */
    }
    if (f->t1_ms <= f->t0_ms) {
        f->t0_ms = f->t1_ms - 1;
    }
    f->slots = series;
    f->nslots = ns;
    return ns;
}

void hv_page_serve_cluster(const hv_http_request_t *req, hv_http_reply_t *rep, void *ud) {
    (void)req;
    hv_page_src_t *src = ud;
    rep->content_type = PAGE_CTYPE;
    uint64_t now = hv_wall_ms();
    hv_instance_row_t *irows = NULL;
    size_t ni = 0;
    if (hv_view_instances(src->d, 0, &irows, &ni) != HV_OK) {
        irows = NULL;
        ni = 0;
    }
    hv_job_row_t *jrows = NULL;
    size_t nj = 0;
    if (hv_view_jobs(src->d, 0, HV_PAGE_MAX_JOBS, &jrows, &nj) != HV_OK) {
        jrows = NULL;
        nj = 0;
    }
    size_t nn = 0;
    for (const hv_dnode_t *n = hv_driver_nodes(src->d); n != NULL; n = n->next) {
        nn++;
    }
    hv_page_node_t *nodes = hv_calloc(nn ? nn : 1, sizeof(*nodes));
    hv_page_job_t *jobs = hv_calloc(nj ? nj : 1, sizeof(*jobs));
    hv_page_instance_t *insts = hv_calloc(ni ? ni : 1, sizeof(*insts));
    hv_cost_instance_t *ci = hv_calloc(ni ? ni : 1, sizeof(*ci));
    hv_page_cost_t cost[HV_COST_MAX_TYPES + 1];
    size_t na = 0;
    hv_page_actor_t *actors = src->actors != NULL ? serve_actors(src, &na) : NULL;
    if (nodes == NULL || jobs == NULL || insts == NULL || ci == NULL ||
        (src->actors != NULL && actors == NULL)) {
        rep->oom = 1;
        goto out;
    }
    size_t k = 0;
    for (const hv_dnode_t *n = hv_driver_nodes(src->d); n != NULL; n = n->next) {
        if (hv_driver_node_hidden(n)) {
            continue;
        }
        nodes[k++] = (hv_page_node_t){.id = n->id,
                                      .name = n->name,
                                      .state = hv_node_state_name(n->state),
                                      .type = serve_node_type(irows, ni, n->name),
                                      .slots = n->acct.slots,
                                      .slots_used = n->acct.slots_used,
                                      .gpus = n->acct.gpus,
                                      .last_seen_ms = n->last_seen_ms};
    }
    nn = k;
    for (size_t i = 0; i < nj; i++) {
        serve_job_fields(&jrows[i], &jobs[i]);
    }
    serve_demand(src->d, jobs, nj);
    for (size_t i = 0; i < ni; i++) {
        insts[i] = (hv_page_instance_t){irows[i].id,        irows[i].type,       irows[i].state,
                                        irows[i].node_name, irows[i].created_ms, irows[i].ended_ms,
                                        irows[i].preempted};
        ci[i] = (hv_cost_instance_t){irows[i].type, irows[i].node_name, irows[i].created_ms,
                                     irows[i].ended_ms, irows[i].preempted};
    }
    /* The cost report, as hvctl cost shows it (head/core/cost.c over the config's prices). */
    const hv_head_config_t *cfg = src->cfg;
    hv_cost_type_t ct[HV_COST_MAX_TYPES];
    size_t nct = 0;
    for (size_t t = 0; t < cfg->autoscaler.ntypes && t < HV_COST_MAX_TYPES; t++) {
        const hv_head_node_type_t *ht = &cfg->autoscaler.types[t];
        ct[nct++] =
            (hv_cost_type_t){ht->name, ht->slots, ht->price_per_hour, ht->ondemand_price_per_hour};
    }
    hv_cost_report_t r;
    hv_cost_cluster(ct, nct, ci, ni, now, &r);
    size_t nc = 0;
    for (size_t i = 0; i < r.n && nc < sizeof(cost) / sizeof(cost[0]); i++) {
        if (r.lines[i].instances == 0) {
            continue;
        }
        cost[nc++] = (hv_page_cost_t){r.lines[i].type, r.lines[i].instances, r.lines[i].instance_s,
                                      r.lines[i].cost};
    }
    hv_page_cluster_t c = {
        .cluster_name = cfg->cluster_name,
        .now_ms = now,
        .nodes = nodes,
        .nnodes = nn,
        .jobs = jobs,
        .njobs = nj,
        .actors = actors,
        .nactors = na,
        .with_actors = src->actors != NULL,
        .instances = insts,
        .ninstances = ni,
        .autoscaler =
            cfg->autoscaler.provider != NULL && strcmp(cfg->autoscaler.provider, "none") != 0,
        .cost = cost,
        .ncost = nc,
        .cost_total = r.cost,
        .preemptions = r.preemptions,
        .logout = src->login,
    };
    hv_svg_series_t fseries[HV_PAGE_FLEET_JOBS];
    hv_svg_point_t *fpts[HV_PAGE_FLEET_JOBS] = {0};
    char fnames[HV_PAGE_FLEET_JOBS][80];
    size_t nf = serve_fleet(src, jrows, nj, now, &c.fleet, fseries, fpts, fnames);
    hv_page_render_cluster(&c, rep);
    for (size_t i = 0; i < nf; i++) {
        hv_free(fpts[i]);
    }
out:
    hv_free(actors);
    hv_free(ci);
    hv_free(insts);
    hv_free(jobs);
    hv_free(nodes);
    hv_view_jobs_free(jrows, nj);
    hv_view_instances_free(irows, ni);
}

/* See page_serve.h. */
size_t hv_page_rounds(const hv_event_row_t *ev, size_t n, hv_page_round_t *out,
                      char (*reasons)[HV_JM_REASON_MAX], size_t cap) {
    size_t nr = 0;
    for (size_t i = 0; i < n; i++) {
        const hv_event_row_t *e = &ev[i];
        int open = strcmp(e->kind, "round.open") == 0;
        if (!open && strcmp(e->kind, "round.close") != 0) {
            continue;
        }
        uint64_t gen = e->f.generation;
        if (gen == 0) {
            continue;
        }
        size_t k = nr;
        while (k > 0 && out[k - 1].generation != gen) {
            k--;
        }
        if (k == 0) { /* a generation not seen yet */
            if (nr == cap) {
                continue;
            }
            k = ++nr;
            out[k - 1] =
                (hv_page_round_t){.generation = (uint32_t)gen, .opened_ms = e->time_ms, .code = ""};
            reasons[k - 1][0] = '\0';
            out[k - 1].reason = reasons[k - 1];
        }
        hv_page_round_t *r = &out[k - 1];
        if (e->f.reason != HV_EV_NONE) {
            r->code = hv_ev_reason_name(e->f.reason);
        }
        r->rollback |= e->f.rollback;
        if (open) {
            r->opened_ms = e->time_ms;
            hv_ev_json_str(e->data, "reason", reasons[k - 1], HV_JM_REASON_MAX);
        } else {
            uint64_t size = 0;
            r->closed_ms = e->time_ms;
            if (hv_ev_json_u64(e->data, "size", &size)) {
                r->size = (uint32_t)size;
            }
            if (e->f.duration_ms <= e->time_ms) {
                r->opened_ms = e->time_ms - e->f.duration_ms; /* the head's own measure */
            }
            /* The close has the round's whole reason: more failures may have joined the one
             * that opened it ("...; failure: rank 0 on a was killed ..."). */
            hv_ev_json_str(e->data, "reason", reasons[k - 1], HV_JM_REASON_MAX);
        }
    }
    return nr;
}

void hv_page_serve_job(const hv_http_request_t *req, hv_http_reply_t *rep, void *ud) {
    hv_page_src_t *src = ud;
    rep->content_type = PAGE_CTYPE;
    const char *cluster = src->cfg->cluster_name;
    const char *idtext = req->path + strlen("/job/");
    char *end = NULL;
    unsigned long long id = idtext[0] >= '1' && idtext[0] <= '9' ? strtoull(idtext, &end, 10) : 0;
    char msg[160];
    hv_job_row_t row;
    memset(&row, 0, sizeof(row));
    if (id == 0 || end == NULL || *end != '\0' || strlen(idtext) > 19) {
        rep->status = 404;
        hv_page_render_missing(cluster, "A job page is /job/<id>, with the job's number.", rep);
        return;
    }
    if (hv_view_job(src->d, id, &row) != HV_OK) {
        rep->status = 404;
        snprintf(msg, sizeof(msg), "No job %llu (hvctl jobs lists them).", id);
        hv_page_render_missing(cluster, msg, rep);
        return;
    }
    hv_event_row_t *ev = NULL;
    size_t nev = 0;
    if (hv_view_events(src->d, id, 0, HV_PAGE_MAX_EVENTS, &ev, &nev) != HV_OK) {
        ev = NULL;
        nev = 0;
    }
    const hv_djob_t *dj = hv_driver_job(src->d, id);
    size_t nw = dj != NULL ? dj->jm.nw : 0;
    hv_page_round_t *rounds = hv_calloc(nev ? nev : 1, sizeof(*rounds));
    char(*reasons)[HV_JM_REASON_MAX] = hv_calloc(nev ? nev : 1, HV_JM_REASON_MAX);
    hv_page_worker_t *ws = hv_calloc(nw ? nw : 1, sizeof(*ws));
    if (rounds == NULL || reasons == NULL || ws == NULL) {
        rep->oom = 1;
        goto out;
    }
    hv_page_jobview_t v = {
        .cluster_name = cluster, .now_ms = hv_wall_ms(), .rounds = rounds, .logout = src->login};
    serve_job_fields(&row, &v.job);
    serve_demand(src->d, &v.job, 1);
    v.nrounds = hv_page_rounds(ev, nev, rounds, reasons, nev);
    /* Its world size and throughput over its life (the last 15 minutes of it at most). */
    hv_svg_point_t *spts = hv_calloc(v.nrounds + 2, sizeof(*spts));
    hv_svg_point_t *tpts = hv_calloc(HV_PAGE_TPUT_SAMPLES, sizeof(*tpts));
    if (spts == NULL || tpts == NULL) {
        hv_free(spts);
        hv_free(tpts);
        rep->oom = 1;
        goto out;
    }
    v.t1_ms = row.ended_ms != 0 ? row.ended_ms : v.now_ms;
    v.t0_ms = row.started_ms != 0 ? row.started_ms : v.t1_ms;
    if (v.t1_ms > v.t0_ms + HV_PAGE_FLEET_SPAN_MS) {
        v.t0_ms = v.t1_ms - HV_PAGE_FLEET_SPAN_MS;
    }
    size_t nsp = hv_page_size_points(rounds, v.nrounds, row.started_ms, row.ended_ms, row.np, spts,
                                     v.nrounds + 2);
    v.size_series = (hv_svg_series_t){"workers", hv_svg_color(id), spts, nsp};
    size_t ntp = 0;
    for (size_t i = 0; i < HV_PAGE_TPUT_JOBS; i++) {
        if (src->tput[i].job_id == id) {
            ntp = hv_page_tput_points(src->tput[i].s, src->tput[i].n, HV_PAGE_TPUT_WINDOW_MS, tpts,
                                      HV_PAGE_TPUT_SAMPLES);
        }
    }
    v.tput_series = (hv_svg_series_t){"steps/s", hv_svg_color(id), tpts, ntp};
    for (size_t i = 0; i < nw; i++) {
        const hv_dworker_t *w = (const hv_dworker_t *)dj->jm.w[i];
        const hv_dnode_t *node = hv_driver_node(src->d, w->jm.node_id);
        ws[i] = (hv_page_worker_t){.id = w->jm.id,
                                   .node = node != NULL ? node->name : "?",
                                   .state = hv_wk_state_name(w->jm.state),
                                   .reason = w->reason,
                                   .rank = w->jm.rank,
                                   .member_gen = w->jm.member_gen,
                                   .exit_code = w->jm.exit_code,
                                   .term_signal = w->jm.term_signal};
    }
    v.workers = ws;
    v.nworkers = nw;
    hv_page_render_job(&v, rep);
    hv_free(spts);
    hv_free(tpts);
out:
    hv_free(ws);
    hv_free(reasons);
    hv_free(rounds);
    hv_view_events_free(ev, nev);
    hv_view_job_fini(&row);
}

/* ---- the login ------------------------------------------------------------------------------ */

static void serve_token_sha(const char *token, char hex[65]) {
    hv_sha256_hex_of(token, strlen(token), hex); // its working state wiped
}

int hv_page_session_ok(const hv_http_request_t *req, void *ud) {
    hv_page_src_t *src = ud;
    char id[HV_PAGE_SESSION_ID_LEN + 1];
    if (src->auth == NULL ||
        !hv_http_cookie_get(req->cookie, HV_PAGE_SESSION_COOKIE, id, sizeof(id))) {
        return 0;
    }
    const hv_page_session_t *s = hv_page_session_find(&src->sessions, id, hv_wall_ms());
    if (s == NULL) {
        return 0;
    }
    /* The token it logged in with must still be one of the head's (hv_auth_reload_clients drops
     * a deleted one): its sessions end with it. */
    for (size_t i = 0; i < src->auth->n_clients; i++) {
        char sha[65];
        serve_token_sha(src->auth->clients[i].token, sha);
        if (hv_creds_equal(s->token_sha, sha)) {
            return 1;
        }
    }
    char client[64], sha[65];
    snprintf(client, sizeof(client), "%s", s->client);
    snprintf(sha, sizeof(sha), "%s", s->token_sha);
    size_t n = hv_page_session_drop_token(&src->sessions, sha);
    HV_LOG(HV_LOG_NOTICE, "page", "HV-PAGE-SESSION-REVOKED",
           "status page: %zu session(s) of client token '%s' ended: the token is gone", n, client);
    return 0;
}

/* One row of the audit trail for a login or logout (never the token: who is its name). */
static void serve_audit(hv_page_src_t *src, const hv_http_request_t *req, const char *method,
                        const char *who, int code, const char *result) {
    hv_audit_row_t row;
    memset(&row, 0, sizeof(row));
    row.time_ms = hv_wall_ms();
    snprintf(row.who_kind, sizeof(row.who_kind), "%s", who != NULL ? "client" : "none");
    snprintf(row.who_id, sizeof(row.who_id), "%s", who != NULL ? who : "");
    snprintf(row.peer, sizeof(row.peer), "%s", req->peer);
    snprintf(row.method, sizeof(row.method), "%s", method);
    snprintf(row.target, sizeof(row.target), "status page");
    row.code = code;
    snprintf(row.result, sizeof(row.result), "%s", result);
    if (hv_driver_audit(src->d, &row) != HV_OK) {
        HV_LOG(HV_LOG_WARN, "page", "HV-AUDIT", "cannot write the audit trail: %s",
               hv_view_error(src->d));
    }
}

static void serve_login_form(hv_page_src_t *src, hv_http_reply_t *rep, int status,
                             const char *message) {
    rep->status = status;
    rep->content_type = PAGE_CTYPE;
    hv_page_render_login(src->cfg->cluster_name, message, rep);
}

void hv_page_serve_login(const hv_http_request_t *req, hv_http_reply_t *rep, void *ud) {
    hv_page_src_t *src = ud;
    if (!req->post && !src->login) {
        /* No login here (loopback without a token): the page is open. */
        hv_http_reply_header(rep, "Location", "/");
        rep->status = 303;
        hv_http_reply_printf(rep, "303 See Other: no login needed here\n");
        return;
    }
    if (!req->post) {
        serve_login_form(src, rep, 200, NULL);
        return;
    }
    /* An address that sent too many wrong tokens waits: its token is not even looked at. */
    uint64_t now = hv_now_ms();
    uint64_t wait = hv_page_login_wait(&src->logins, req->addr, now);
    if (wait > 0) {
        char secs[32], msg[160];
        snprintf(secs, sizeof(secs), "%llu", (unsigned long long)(wait + 999) / 1000);
        snprintf(msg, sizeof(msg), "Too many wrong tokens from your address: try again in %s s.",
                 secs);
        hv_http_reply_header(rep, "Retry-After", secs);
        serve_login_form(src, rep, 429, msg);
        return;
    }
    char token[HV_AUTH_TOKEN_MAX + 1];
    if (!hv_http_form_get(req->body, req->body_len, "token", token, sizeof(token)) ||
        token[0] == '\0') {
        serve_login_form(src, rep, 400, "Type a client token.");
        return;
    }
    hv_cred_t cred;
    hv_err rc = src->auth != NULL ? hv_auth_identify(src->auth, token, &cred) : HV_EAUTH;
    if (rc != HV_OK || cred.kind != HV_CRED_CLIENT) {
        explicit_bzero(token, sizeof(token));
        src->login_refused++;
        wait = hv_page_login_failed(&src->logins, req->addr, now);
        char next[96] = "";
        if (wait > 0) {
            snprintf(next, sizeof(next), "; its next login is tried in %llu s at the earliest",
                     (unsigned long long)(wait + 999) / 1000);
        }
        HV_LOG(HV_LOG_WARN, "page", "HV-PAGE-LOGIN-REFUSED",
               "status page: login from %s refused: not a client token of this head%s", req->peer,
               next);
        serve_audit(src, req, "PageLogin", NULL, 16,
                    "UNAUTHENTICATED: not a client token of this head");
        char msg[200];
        snprintf(msg, sizeof(msg), "That is not a client token of this head.%s",
                 wait > 0 ? " Too many wrong tokens from your address: wait before the next try."
                          : "");
        serve_login_form(src, rep, 403, msg);
        return;
    }
    hv_page_login_ok(&src->logins, req->addr);
    char sha[65];
    serve_token_sha(token, sha);
    explicit_bzero(token, sizeof(token));
    uint8_t raw[HV_PAGE_SESSION_ID_LEN / 2];
    if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
        serve_login_form(src, rep, 503, "No random bytes for a session now; try again.");
        return;
    }
    char id[HV_PAGE_SESSION_ID_LEN + 1];
    for (size_t i = 0; i < sizeof(raw); i++) {
        snprintf(id + 2 * i, 3, "%02x", raw[i]);
    }
    explicit_bzero(raw, sizeof(raw));
    hv_page_session_add(&src->sessions, id, sha, cred.client, hv_wall_ms());
    char cookie[200];
    snprintf(cookie, sizeof(cookie), "%s=%s; HttpOnly; SameSite=Strict; Path=/; Max-Age=%llu",
             HV_PAGE_SESSION_COOKIE, id, (unsigned long long)(HV_PAGE_SESSION_TTL_MS / 1000));
    hv_http_reply_header(rep, "Set-Cookie", cookie);
    hv_http_reply_header(rep, "Location", "/");
    rep->status = 303;
    hv_http_reply_printf(rep, "303 See Other: logged in\n");
    HV_LOG(HV_LOG_NOTICE, "page", "HV-PAGE-LOGIN",
           "status page: login from %s with client token '%s'", req->peer, cred.client);
    serve_audit(src, req, "PageLogin", cred.client, 0, "OK");
}

void hv_page_serve_logout(const hv_http_request_t *req, hv_http_reply_t *rep, void *ud) {
    hv_page_src_t *src = ud;
    char id[HV_PAGE_SESSION_ID_LEN + 1];
    const hv_page_session_t *s = NULL;
    if (hv_http_cookie_get(req->cookie, HV_PAGE_SESSION_COOKIE, id, sizeof(id)) &&
        (s = hv_page_session_find(&src->sessions, id, hv_wall_ms())) != NULL) {
        serve_audit(src, req, "PageLogout", s->client, 0, "OK");
        hv_page_session_drop(&src->sessions, id);
    }
    hv_http_reply_header(rep, "Set-Cookie",
                         HV_PAGE_SESSION_COOKIE "=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0");
    hv_http_reply_header(rep, "Location", "/login");
    rep->status = 303;
    hv_http_reply_printf(rep, "303 See Other: logged out\n");
}
