/* page: see page.h. */
#include "page.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "mem.h"

#define PAGE_REFRESH_S 5 /* the inline script reloads the page this often */

void hv_page_escape(hv_http_reply_t *out, const char *s) {
    if (s == NULL) {
        return;
    }
    const char *run = s;
    for (const char *p = s;; p++) {
        const char *ent = NULL;
        switch (*p) {
        case '&':
            ent = "&amp;";
            break;
        case '<':
            ent = "&lt;";
            break;
        case '>':
            ent = "&gt;";
            break;
        case '"':
            ent = "&quot;";
            break;
        case '\'':
            ent = "&#39;";
            break;
        default:
            /* Control bytes (but tab and newline) have no place in text: '?' stands for them. */
            if (*p != '\0' && (unsigned char)*p < 0x20 && *p != '\t' && *p != '\n') {
                ent = "?";
            }
            break;
        }
        if (ent == NULL && *p != '\0') {
            continue;
        }
        hv_http_reply_add(out, run, (size_t)(p - run));
        if (*p == '\0') {
            return;
        }
        hv_http_reply_add(out, ent, strlen(ent));
        run = p + 1;
    }
}

static void page_text(hv_http_reply_t *o, const char *s) { hv_http_reply_add(o, s, strlen(s)); }

const char *hv_page_fmt_duration(uint64_t ms, char *buf, size_t len) {
    if (ms < 1000) {
        snprintf(buf, len, "%" PRIu64 " ms", ms);
    } else if (ms < 60000) {
        snprintf(buf, len, "%.1f s", (double)ms / 1000.0);
    } else if (ms < 3600000) {
        snprintf(buf, len, "%" PRIu64 "m %02" PRIu64 "s", ms / 60000, (ms / 1000) % 60);
    } else {
        snprintf(buf, len, "%" PRIu64 "h %02" PRIu64 "m", ms / 3600000, (ms / 60000) % 60);
    }
    return buf;
}

/* A wall-clock time as UTC "2026-11-25 14:07:44", or "-" for 0. */
static const char *page_fmt_time(uint64_t ms, char *buf, size_t len) {
    if (ms == 0) {
        snprintf(buf, len, "-");
        return buf;
    }
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (gmtime_r(&t, &tm) == NULL || strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm) == 0) {
        snprintf(buf, len, "%" PRIu64, ms);
    }
    return buf;
}

static void page_head(hv_http_reply_t *o, const char *cluster, const char *title) {
    page_text(o, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>");
    hv_page_escape(o, title);
    if (cluster != NULL && cluster[0] != '\0') {
        page_text(o, " - ");
        hv_page_escape(o, cluster);
    }
    page_text(o, " - hv</title>\n<style>\n"
                 "body{font-family:sans-serif;margin:1.5em;color:#222}\n"
                 "h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.5em}\n"
                 "table{border-collapse:collapse;margin:.3em 0}\n"
                 "th,td{border:1px solid #ccc;padding:.2em .6em;text-align:left;"
                 "vertical-align:top;white-space:nowrap}\n"
                 "td.reason{white-space:normal;max-width:40em}\n"
                 "th{background:#eee}td.n{text-align:right}\n"
                 ".s-alive,.s-running,.s-succeeded{color:#060}"
                 ".s-dead,.s-failed,.s-lost{color:#a00}"
                 ".s-draining,.s-pending,.s-placing,.s-open{color:#a60}\n"
                 ".bar{background:#48c;height:.8em;display:inline-block;min-width:2px}\n"
                 ".muted{color:#777}pre{background:#f6f6f6;padding:.5em}\n"
                 "</style>\n"
                 "<script>setTimeout(function(){location.reload();},");
    hv_http_reply_printf(o, "%d", PAGE_REFRESH_S * 1000);
    page_text(o, ");</script>\n</head><body>\n");
}

static void page_foot(hv_http_reply_t *o, uint64_t now_ms, int logout) {
    char t[32];
    hv_http_reply_printf(o,
                         "<p class=\"muted\">As of %s UTC; this page reloads every %d s. "
                         "<a href=\"/\">cluster</a> &middot; <a href=\"/metrics\">metrics</a>",
                         page_fmt_time(now_ms, t, sizeof(t)), PAGE_REFRESH_S);
    if (logout) {
        page_text(o, " &middot; <form method=\"post\" action=\"/logout\" style=\"display:inline\">"
                     "<button id=\"logout\">log out</button></form>");
    }
    page_text(o, "</p>\n</body></html>\n");
}

/* <td class="s-STATE">STATE</td>: the class is only set for a plain word. */
static void page_state_cell(hv_http_reply_t *o, const char *state) {
    const char *s = state != NULL ? state : "";
    int plain = s[0] != '\0' && strspn(s, "abcdefghijklmnopqrstuvwxyz_") == strlen(s);
    if (plain) {
        hv_http_reply_printf(o, "<td class=\"s-%s\">%s</td>", s, s);
    } else {
        page_text(o, "<td>");
        hv_page_escape(o, s);
        page_text(o, "</td>");
    }
}

static int page_is(const char *s, const char *word) { return s != NULL && strcmp(s, word) == 0; }

/* The summary that hvctl status prints: nodes, slots, jobs by state, the pending demand and why
 * each pending job waits. */
static void page_summary(const hv_page_cluster_t *c, hv_http_reply_t *o) {
    unsigned alive = 0, draining = 0, dead = 0;
    uint64_t slots = 0, used = 0, free = 0;
    for (size_t i = 0; i < c->nnodes; i++) {
        const hv_page_node_t *n = &c->nodes[i];
        if (page_is(n->state, "alive")) {
            alive++;
            slots += n->slots;
            used += n->slots_used;
            free += n->slots > n->slots_used ? n->slots - n->slots_used : 0;
        } else if (page_is(n->state, "draining")) {
            draining++;
            used += n->slots_used;
        } else {
            dead++;
        }
    }
    static const char *const states[] = {"pending",   "placing", "running",
                                         "succeeded", "failed",  "cancelled"};
    unsigned count[6] = {0};
    unsigned pending = 0, grow_jobs = 0;
    uint64_t demand = 0, grow = 0;
    for (size_t i = 0; i < c->njobs; i++) {
        const hv_page_job_t *j = &c->jobs[i];
        for (size_t s = 0; s < 6; s++) {
            count[s] += page_is(j->state, states[s]);
        }
        if (page_is(j->state, "pending")) {
            pending++;
            demand += j->np;
        } else if (j->demand > 0 && !j->pending) {
            grow_jobs++;
            grow += j->demand;
        }
    }
    page_text(o, "<h2>Summary</h2>\n<table id=\"summary\">\n");
    hv_http_reply_printf(o,
                         "<tr><th>nodes</th><td>%u alive, %u draining, %u dead</td></tr>\n"
                         "<tr><th>slots</th><td>%" PRIu64 " used, %" PRIu64 " free (of %" PRIu64
                         " on alive nodes)</td></tr>\n<tr><th>jobs</th><td>",
                         alive, draining, dead, used, free, slots);
    for (size_t s = 0; s < 6; s++) {
        hv_http_reply_printf(o, "%s%u %s", s ? ", " : "", count[s], states[s]);
    }
    page_text(o, "</td></tr>\n<tr><th>demand</th><td id=\"demand\">");
    if (pending == 0) {
        page_text(o, "none pending");
    } else {
        hv_http_reply_printf(o, "%u job%s waiting for %" PRIu64 " slot%s (%" PRIu64 " free now)",
                             pending, pending == 1 ? "" : "s", demand, demand == 1 ? "" : "s",
                             free);
    }
    if (grow_jobs > 0) {
        hv_http_reply_printf(o, "; %u elastic job%s could grow by %" PRIu64 " worker%s", grow_jobs,
                             grow_jobs == 1 ? "" : "s", grow, grow == 1 ? "" : "s");
    }
    page_text(o, "</td></tr>\n</table>\n");
    if (pending == 0) {
        return;
    }
    /* Why each pending job waits, oldest first (the jobs come newest first), as hvctl job says. */
    page_text(o, "<ul id=\"pending\">\n");
    for (size_t k = c->njobs; k > 0; k--) {
        const hv_page_job_t *j = &c->jobs[k - 1];
        if (!page_is(j->state, "pending")) {
            continue;
        }
        char ago[32];
        hv_http_reply_printf(o, "<li><a href=\"/job/%" PRIu64 "\">job %" PRIu64 "</a> (", j->id,
                             j->id);
        hv_page_escape(o, j->name);
        hv_http_reply_printf(
            o,
            ") waits for %u free slot%s: %" PRIu64 " of %" PRIu64
            " free now (%u node%s alive, %u draining, %u dead); submitted %s "
            "ago</li>\n",
            j->np, j->np == 1 ? "" : "s", free, slots, alive, alive == 1 ? "" : "s", draining, dead,
            hv_page_fmt_duration(c->now_ms > j->submitted_ms ? c->now_ms - j->submitted_ms : 0, ago,
                                 sizeof(ago)));
    }
    page_text(o, "</ul>\n");
}

static void page_nodes(const hv_page_cluster_t *c, hv_http_reply_t *o) {
    page_text(o, "<h2>Nodes</h2>\n");
    if (c->nnodes == 0) {
        page_text(o, "<p class=\"muted\">No node has joined.</p>\n");
        return;
    }
    page_text(o, "<table id=\"nodes\"><tr><th>id</th><th>name</th><th>state</th><th>type</th>"
                 "<th>slots used</th><th>GPUs</th><th>last seen</th></tr>\n");
    char t[32], ago[32];
    for (size_t i = 0; i < c->nnodes; i++) {
        const hv_page_node_t *n = &c->nodes[i];
        hv_http_reply_printf(o, "<tr><td class=\"n\">%" PRIu64 "</td><td>", n->id);
        hv_page_escape(o, n->name);
        page_text(o, "</td>");
        page_state_cell(o, n->state);
        page_text(o, "<td>");
        hv_page_escape(o, n->type);
        hv_http_reply_printf(
            o,
            "</td><td class=\"n\">%u / %u</td><td class=\"n\">%u</td><td title=\"%s UTC\">%s ago"
            "</td></tr>\n",
            n->slots_used, n->slots, n->gpus, page_fmt_time(n->last_seen_ms, t, sizeof(t)),
            hv_page_fmt_duration(c->now_ms > n->last_seen_ms ? c->now_ms - n->last_seen_ms : 0, ago,
                                 sizeof(ago)));
    }
    page_text(o, "</table>\n");
}

static void page_job_size(const hv_page_job_t *j, hv_http_reply_t *o) {
    if (j->elastic) {
        hv_http_reply_printf(o, "%u (elastic %u..%u)", j->size, j->min_np, j->max_np);
    } else {
        hv_http_reply_printf(o, "%u", j->np);
    }
}

static void page_jobs(const hv_page_cluster_t *c, hv_http_reply_t *o) {
    page_text(o, "<h2>Jobs</h2>\n");
    if (c->njobs == 0) {
        page_text(o, "<p class=\"muted\">No job yet.</p>\n");
        return;
    }
    page_text(o, "<table id=\"jobs\"><tr><th>id</th><th>name</th><th>state</th><th>workers</th>"
                 "<th>generation</th><th>resets</th><th>submitted</th><th>reason</th></tr>\n");
    char t[32];
    for (size_t i = 0; i < c->njobs; i++) {
        const hv_page_job_t *j = &c->jobs[i];
        hv_http_reply_printf(
            o, "<tr><td class=\"n\"><a href=\"/job/%" PRIu64 "\">%" PRIu64 "</a></td><td>", j->id,
            j->id);
        hv_page_escape(o, j->name);
        page_text(o, "</td>");
        page_state_cell(o, j->state);
        page_text(o, "<td class=\"n\">");
        page_job_size(j, o);
        hv_http_reply_printf(
            o, "</td><td class=\"n\">%u</td><td class=\"n\">%u</td><td>%s</td><td>", j->generation,
            j->resets, page_fmt_time(j->submitted_ms, t, sizeof(t)));
        hv_page_escape(o, j->reason);
        page_text(o, "</td></tr>\n");
    }
    page_text(o, "</table>\n");
}

/* The actors: who they are, where they run, how often they restarted or moved, and the calls
 * they served with the 99th percentile of their service time. */
static void page_actors(const hv_page_cluster_t *c, hv_http_reply_t *o) {
    if (!c->with_actors) {
        return;
    }
    page_text(o, "<h2>Actors</h2>\n");
    if (c->nactors == 0) {
        page_text(o, "<p class=\"muted\">No actor yet.</p>\n");
        return;
    }
    page_text(o, "<table id=\"actors\"><tr><th>id</th><th>namespace/name</th><th>class</th>"
                 "<th>state</th><th>node</th><th>restarts</th><th>moves</th><th>calls</th>"
                 "<th>failed</th><th>p99</th></tr>\n");
    for (size_t i = 0; i < c->nactors; i++) {
        const hv_page_actor_t *x = &c->actors[i];
        hv_http_reply_printf(o, "<tr><td class=\"n\">%" PRIu64 "</td><td>", x->id);
        hv_page_escape(o, x->ns);
        page_text(o, "/");
        hv_page_escape(o, x->name != NULL && x->name[0] != '\0' ? x->name : "-");
        page_text(o, "</td><td>");
        hv_page_escape(o, x->class_name);
        page_text(o, "</td>");
        page_state_cell(o, x->state);
        page_text(o, "<td>");
        hv_page_escape(o, x->node != NULL && x->node[0] != '\0' ? x->node : "-");
        hv_http_reply_printf(o,
                             "</td><td class=\"n\">%u / %u</td><td class=\"n\">%u</td>"
                             "<td class=\"n\">%" PRIu64 "</td><td class=\"n\">%" PRIu64 "</td>",
                             x->restarts, x->max_restarts, x->moves, x->calls_ok + x->calls_error,
                             x->calls_error);
        if (x->p99_ms >= 0) {
            hv_http_reply_printf(o, "<td class=\"n\">%.3g ms</td></tr>\n", x->p99_ms);
        } else {
            page_text(o, "<td class=\"n\">-</td></tr>\n");
        }
    }
    page_text(o, "</table>\n");
}

static void page_instances(const hv_page_cluster_t *c, hv_http_reply_t *o) {
    page_text(o, "<h2>Autoscaler</h2>\n");
    if (!c->autoscaler && c->ninstances == 0) {
        page_text(o, "<p class=\"muted\">No autoscaler is configured.</p>\n");
    } else if (c->ninstances == 0) {
        page_text(o, "<p class=\"muted\">No instance launched.</p>\n");
    } else {
        page_text(o, "<table id=\"instances\"><tr><th>instance</th><th>type</th><th>state</th>"
                     "<th>node</th><th>launched</th><th>ended</th></tr>\n");
        char t1[32], t2[32];
        for (size_t i = 0; i < c->ninstances; i++) {
            const hv_page_instance_t *in = &c->instances[i];
            page_text(o, "<tr><td>");
            hv_page_escape(o, in->id);
            page_text(o, "</td><td>");
            hv_page_escape(o, in->type);
            page_text(o, "</td>");
            page_state_cell(o, in->state);
            page_text(o, "<td>");
            hv_page_escape(o, in->node);
            hv_http_reply_printf(o, "</td><td>%s</td><td>%s%s</td></tr>\n",
                                 page_fmt_time(in->created_ms, t1, sizeof(t1)),
                                 page_fmt_time(in->ended_ms, t2, sizeof(t2)),
                                 in->preempted ? " (preempted)" : "");
        }
        page_text(o, "</table>\n");
    }
    page_text(o, "<h2>Cost</h2>\n");
    if (c->ncost == 0) {
        page_text(o, "<p class=\"muted\">No instance cost anything yet.</p>\n");
        return;
    }
    page_text(o, "<table id=\"cost\"><tr><th>type</th><th>instances</th><th>instance-hours</th>"
                 "<th>cost</th></tr>\n");
    for (size_t i = 0; i < c->ncost; i++) {
        const hv_page_cost_t *l = &c->cost[i];
        page_text(o, "<tr><td>");
        hv_page_escape(o, l->type);
        hv_http_reply_printf(
            o,
            "</td><td class=\"n\">%u</td><td class=\"n\">%.3f</td><td class=\"n\">%.4f</td>"
            "</tr>\n",
            l->instances, l->instance_s / 3600.0, l->cost);
    }
    hv_http_reply_printf(o,
                         "<tr><th>total</th><td></td><td></td><td class=\"n\">%.4f</td></tr>\n"
                         "</table>\n<p>%u preemption%s.</p>\n",
                         c->cost_total, c->preemptions, c->preemptions == 1 ? "" : "s");
}

/* One chart (core/svgchart.h) into the page, or a line saying why there is none. */
static void page_chart(hv_http_reply_t *o, const hv_svg_chart_t *ch, const hv_svg_series_t *s,
                       size_t ns) {
    char *svg = NULL;
    size_t len = 0;
    hv_err rc = hv_svg_chart(ch, s, ns, &svg, &len);
    if (rc == HV_OK) {
        page_text(o, "<div class=\"chart\">");
        hv_http_reply_add(o, svg, len);
        page_text(o, "</div>\n");
    } else if (rc == HV_ENOMEM) {
        o->oom = 1;
    } else {
        page_text(o, "<p class=\"muted\">No time span to draw yet.</p>\n");
    }
    hv_free(svg);
}

/* The fleet: slots over time, stacked by job. */
static void page_fleet(const hv_page_cluster_t *c, hv_http_reply_t *o) {
    page_text(o, "<h2>Fleet</h2>\n");
    if (c->fleet.nslots == 0) {
        page_text(o, "<p class=\"muted\">No job held slots lately.</p>\n");
        return;
    }
    hv_svg_chart_t ch = {.title = "Slots held, by job",
                         .unit = "slots",
                         .css_class = "hv-chart fleet-slots",
                         .width = 760,
                         .height = 220,
                         .t0_ms = c->fleet.t0_ms,
                         .t1_ms = c->fleet.t1_ms,
                         .stacked = 1};
    page_chart(o, &ch, c->fleet.slots, c->fleet.nslots);
}

void hv_page_render_cluster(const hv_page_cluster_t *c, hv_http_reply_t *o) {
    page_head(o, c->cluster_name, "Cluster");
    page_text(o, "<h1>hv cluster");
    if (c->cluster_name != NULL && c->cluster_name[0] != '\0') {
        page_text(o, " ");
        hv_page_escape(o, c->cluster_name);
    }
    page_text(o, "</h1>\n");
    page_summary(c, o);
    page_fleet(c, o);
    page_nodes(c, o);
    page_jobs(c, o);
    page_actors(c, o);
    page_instances(c, o);
    page_foot(o, c->now_ms, c->logout);
}

/* The rounds as a timeline: one row per generation, a bar as long as the round took. */
static void page_rounds(const hv_page_jobview_t *v, hv_http_reply_t *o) {
    page_text(o, "<h2>Generations</h2>\n");
    if (v->nrounds == 0) {
        page_text(o, "<p class=\"muted\">No round has opened.</p>\n");
        return;
    }
    uint64_t longest = 1;
    for (size_t i = 0; i < v->nrounds; i++) {
        const hv_page_round_t *r = &v->rounds[i];
        uint64_t end = r->closed_ms ? r->closed_ms : v->now_ms;
        if (end > r->opened_ms && end - r->opened_ms > longest) {
            longest = end - r->opened_ms;
        }
    }
    page_text(o, "<table id=\"rounds\"><tr><th>generation</th><th>opened</th><th>reason</th>"
                 "<th>workers</th><th>took</th><th></th></tr>\n");
    char t[32], d[32];
    for (size_t i = 0; i < v->nrounds; i++) {
        const hv_page_round_t *r = &v->rounds[i];
        uint64_t end = r->closed_ms ? r->closed_ms : v->now_ms;
        uint64_t took = end > r->opened_ms ? end - r->opened_ms : 0;
        hv_http_reply_printf(o, "<tr class=\"round\" data-generation=\"%u\" data-reason=\"",
                             r->generation);
        hv_page_escape(o, r->code);
        hv_http_reply_printf(o, "\"><td class=\"n\">%u</td><td>%s</td><td class=\"reason\">",
                             r->generation, page_fmt_time(r->opened_ms, t, sizeof(t)));
        hv_page_escape(o, r->reason);
        if (r->rollback) {
            page_text(o, " <span class=\"muted\">(rolled back)</span>");
        }
        if (r->closed_ms) {
            hv_http_reply_printf(o, "</td><td class=\"n\">%u</td><td>%s</td>", r->size,
                                 hv_page_fmt_duration(took, d, sizeof(d)));
        } else {
            hv_http_reply_printf(o, "</td><td></td><td class=\"s-open\">open for %s</td>",
                                 hv_page_fmt_duration(took, d, sizeof(d)));
        }
        hv_http_reply_printf(o, "<td><span class=\"bar\" style=\"width:%upx\"></span></td></tr>\n",
                             (unsigned)(took * 300 / longest));
    }
    page_text(o, "</table>\n");
}

static void page_workers(const hv_page_jobview_t *v, hv_http_reply_t *o) {
    page_text(o, "<h2>Workers</h2>\n");
    if (v->nworkers == 0) {
        page_text(o, "<p class=\"muted\">No worker is in the head's memory (a finished job's "
                     "workers are forgotten after a restart).</p>\n");
        return;
    }
    page_text(o, "<table id=\"workers\"><tr><th>id</th><th>node</th><th>state</th>"
                 "<th>rank</th><th>generation</th><th>exit</th><th>reason</th></tr>\n");
    for (size_t i = 0; i < v->nworkers; i++) {
        const hv_page_worker_t *w = &v->workers[i];
        hv_http_reply_printf(o, "<tr><td class=\"n\">%" PRIu64 "</td><td>", w->id);
        hv_page_escape(o, w->node);
        page_text(o, "</td>");
        page_state_cell(o, w->state);
        if (w->member_gen > 0) {
            hv_http_reply_printf(o, "<td class=\"n\">%u</td><td class=\"n\">%u</td>", w->rank,
                                 w->member_gen);
        } else {
            page_text(o, "<td></td><td></td>");
        }
        if (w->term_signal > 0) {
            hv_http_reply_printf(o, "<td>signal %d</td><td>", w->term_signal);
        } else if (page_is(w->state, "running") || page_is(w->state, "starting") ||
                   page_is(w->state, "pending")) {
            page_text(o, "<td></td><td>");
        } else {
            hv_http_reply_printf(o, "<td>%d</td><td>", w->exit_code);
        }
        hv_page_escape(o, w->reason);
        page_text(o, "</td></tr>\n");
    }
    page_text(o, "</table>\n");
}

void hv_page_render_job(const hv_page_jobview_t *v, hv_http_reply_t *o) {
    const hv_page_job_t *j = &v->job;
    char title[48], t[32];
    snprintf(title, sizeof(title), "Job %" PRIu64, j->id);
    page_head(o, v->cluster_name, title);
    hv_http_reply_printf(o, "<h1>Job %" PRIu64 ": ", j->id);
    hv_page_escape(o, j->name);
    page_text(o, "</h1>\n<table id=\"job\"><tr><th>state</th>");
    page_state_cell(o, j->state);
    page_text(o, "</tr>\n<tr><th>workers</th><td>");
    page_job_size(j, o);
    hv_http_reply_printf(o,
                         "</td></tr>\n<tr><th>generation</th><td id=\"generation\">%u</td></tr>\n"
                         "<tr><th>resets</th><td>%u</td></tr>\n",
                         j->generation, j->resets);
    hv_http_reply_printf(o, "<tr><th>submitted</th><td>%s</td></tr>\n",
                         page_fmt_time(j->submitted_ms, t, sizeof(t)));
    hv_http_reply_printf(o, "<tr><th>started</th><td>%s</td></tr>\n",
                         page_fmt_time(j->started_ms, t, sizeof(t)));
    hv_http_reply_printf(o, "<tr><th>ended</th><td>%s</td></tr>\n",
                         page_fmt_time(j->ended_ms, t, sizeof(t)));
    if (j->reason != NULL && j->reason[0] != '\0') {
        page_text(o, "<tr><th>reason</th><td>");
        hv_page_escape(o, j->reason);
        page_text(o, "</td></tr>\n");
    }
    if (j->pending) {
        hv_http_reply_printf(o, "<tr><th>waits for</th><td>%u free slot%s</td></tr>\n", j->demand,
                             j->demand == 1 ? "" : "s");
    }
    page_text(o, "</table>\n");
    if (v->t1_ms > v->t0_ms) {
        page_text(o, "<h2>Over time</h2>\n");
        hv_svg_chart_t ch = {.title = "World size",
                             .unit = "workers",
                             .css_class = "hv-chart job-size",
                             .width = 760,
                             .height = 180,
                             .t0_ms = v->t0_ms,
                             .t1_ms = v->t1_ms};
        page_chart(o, &ch, &v->size_series, 1);
        ch.title = "Step throughput";
        ch.unit = "steps/s";
        ch.css_class = "hv-chart job-tput";
        if (v->tput_series.n > 0) {
            page_chart(o, &ch, &v->tput_series, 1);
        } else {
            page_text(o, "<p class=\"muted\" id=\"no-tput\">No step throughput measured by "
                         "this head (its workers report their commits every few seconds while "
                         "it runs).</p>\n");
        }
    }
    page_rounds(v, o);
    page_workers(v, o);
    page_foot(o, v->now_ms, v->logout);
}

void hv_page_render_missing(const char *cluster_name, const char *message, hv_http_reply_t *o) {
    page_head(o, cluster_name, "Not found");
    page_text(o, "<h1>Not found</h1>\n<p>");
    hv_page_escape(o, message);
    page_text(o, "</p>\n<p><a href=\"/\">cluster</a></p>\n</body></html>\n");
}

void hv_page_render_login(const char *cluster_name, const char *message, hv_http_reply_t *o) {
    /* Not page_head: its reload would wipe what is being typed. */
    page_text(o,
              "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>Log in");
    if (cluster_name != NULL && cluster_name[0] != '\0') {
        page_text(o, " - ");
        hv_page_escape(o, cluster_name);
    }
    page_text(o, " - hv</title>\n<style>body{font-family:sans-serif;margin:1.5em;color:#222}"
                 "h1{font-size:1.4em}.err{color:#a00}input{width:30em}</style>\n</head><body>\n"
                 "<h1>Log in to the hv status page</h1>\n");
    if (message != NULL && message[0] != '\0') {
        page_text(o, "<p class=\"err\" id=\"login-error\">");
        hv_page_escape(o, message);
        page_text(o, "</p>\n");
    }
    page_text(o, "<form method=\"post\" action=\"/login\">\n<p><label>Client token "
                 "(<code>hvc_...</code>, as in <code>client.token</code>)<br>"
                 "<input type=\"password\" name=\"token\" autocomplete=\"off\" autofocus>"
                 "</label></p>\n<p><button type=\"submit\">Log in</button></p>\n</form>\n"
                 "<p class=\"muted\">The token is checked once; the browser keeps a session "
                 "cookie (not the token) for 8 hours or until you log out.</p>\n"
                 "</body></html>\n");
}

size_t hv_page_size_points(const hv_page_round_t *rounds, size_t nrounds, uint64_t started_ms,
                           uint64_t ended_ms, uint32_t np, hv_svg_point_t *out, size_t cap) {
    size_t n = 0;
    for (size_t i = 0; i < nrounds && n < cap; i++) {
        if (rounds[i].closed_ms != 0 && (ended_ms == 0 || rounds[i].closed_ms < ended_ms)) {
            out[n++] = (hv_svg_point_t){rounds[i].closed_ms, rounds[i].size};
        }
    }
    if (nrounds == 0 && started_ms != 0 && n < cap) {
        out[n++] = (hv_svg_point_t){started_ms, np};
    }
    if (ended_ms != 0 && n > 0 && n < cap) {
        out[n++] = (hv_svg_point_t){ended_ms, 0};
    }
    return n;
}

size_t hv_page_tput_points(const hv_page_tsample_t *s, size_t n, uint64_t window_ms,
                           hv_svg_point_t *out, size_t cap) {
    size_t k = 0, from = 0;
    for (size_t i = 1; i < n && k < cap; i++) {
        if (s[i].t_ms < s[0].t_ms + window_ms) {
            continue;
        }
        while (from + 1 < i && s[from + 1].t_ms + window_ms <= s[i].t_ms) {
            from++; /* the newest sample at least window_ms older */
        }
        uint64_t dt = s[i].t_ms - s[from].t_ms;
        if (dt == 0 || s[i].size == 0 || s[i].commits < s[from].commits) {
            continue;
        }
        double v = (double)(s[i].commits - s[from].commits) * 1000.0 / (double)dt / s[i].size;
        out[k++] = (hv_svg_point_t){s[i].t_ms, v};
    }
    return k;
}
