/*
 * page: the HTML of hvhead's read-only status page (docs/status-page.md). Two pages: the cluster
 * ("/": the summary hvctl status prints with why pending work waits, the nodes, the jobs, the
 * actors, the autoscaler's instances and the cost report) and one job ("/job/<id>": its state, its rounds
 * (generations) over time with their reasons and durations, its workers).
 *
 * Pure: the caller gathers a snapshot (head/services/page_serve.c reads the driver and the store) and
 * these functions write HTML into a reply buffer. Every string from the snapshot is
 * HTML-escaped (job names, reasons and node names can hold anything). The page has no external
 * assets (inline CSS, one small inline script that reloads it every few seconds) so that it
 * works offline. Nothing secret is ever in a snapshot. Threads: any (no shared state).
 */
#ifndef HV_HEAD_PAGE_H
#define HV_HEAD_PAGE_H

#include <stddef.h>
#include <stdint.h>

#include "http.h"
#include "svgchart.h"

/* Every string below is borrowed and may be NULL (shown as ""). Times are wall-clock ms. */

typedef struct hv_page_node_s {
    uint64_t id;
    const char *name, *state, *type; /* type: the autoscaler's node type, "manual" otherwise */
    uint32_t slots, slots_used, gpus;
    uint64_t last_seen_ms;
} hv_page_node_t;

typedef struct hv_page_job_s {
    uint64_t id;
    const char *name, *state, *reason; /* reason: why it ended ("" while active) */
    int elastic;
    uint32_t np, min_np, max_np, size, generation, resets;
    uint64_t submitted_ms, started_ms, ended_ms;
    uint32_t demand; /* workers it wants that the free slots cannot give now */
    int pending;     /* it waits to start (demand is what it waits for) */
} hv_page_job_t;

/* An actor, as hvctl actors lists it, with its call figures (summed over its processes). */
typedef struct hv_page_actor_s {
    uint64_t id;
    const char *ns, *name, *class_name, *state, *cause, *node; /* name "" unnamed */
    uint32_t restarts, max_restarts, moves;
    uint64_t calls_ok, calls_error;
    double p99_ms; /* service time, ms; < 0: no call yet */
} hv_page_actor_t;

typedef struct hv_page_instance_s {
    const char *id, *type, *state, *node;
    uint64_t created_ms, ended_ms;
    int preempted;
} hv_page_instance_t;

typedef struct hv_page_cost_s {
    const char *type;
    uint32_t instances;
    double instance_s, cost;
} hv_page_cost_t;

/* The fleet as pictures (core/svgchart.h draws them): series over [t0_ms, t1_ms]. */
typedef struct hv_page_fleet_s {
    uint64_t t0_ms, t1_ms;
    const hv_svg_series_t *slots; /* slots held by each job over time, stacked (one per job) */
    size_t nslots;
} hv_page_fleet_t;

/* One sample of a job's figures (the head's memory: page_serve.c samples the driver's totals
 * each second): its workers' commits so far and its world size then. */
typedef struct hv_page_tsample_s {
    uint64_t t_ms;
    uint64_t commits; /* summed over workers (each commits once per step) */
    uint32_t size;
} hv_page_tsample_t;

typedef struct hv_page_cluster_s {
    const char *cluster_name;
    uint64_t now_ms;
    const hv_page_node_t *nodes;
    size_t nnodes;
    const hv_page_job_t *jobs; /* newest first */
    size_t njobs;
    const hv_page_actor_t *actors; /* newest first */
    size_t nactors;
    int with_actors; /* the head keeps actors (show the section, even empty) */
    const hv_page_instance_t *instances;
    size_t ninstances;
    int autoscaler; /* an autoscaler provider is configured */
    const hv_page_cost_t *cost;
    size_t ncost;
    double cost_total;
    uint32_t preemptions;
    int logout; /* the page is behind the login: show the log-out button */
    hv_page_fleet_t fleet;
} hv_page_cluster_t;

/* One round (generation) of a job, from its round.open and round.close events' fields. */
typedef struct hv_page_round_s {
    uint32_t generation;
    const char *reason; /* why it opened, in words for people */
    const char *code;   /* the same as a code's word ("failure", "drain", ...; "" unknown) */
    int rollback;
    uint64_t opened_ms;
    uint64_t closed_ms; /* 0: still open (or never closed) */
    uint32_t size;      /* members once closed */
} hv_page_round_t;

typedef struct hv_page_worker_s {
    uint64_t id;
    const char *node, *state, *reason;
    uint32_t rank, member_gen; /* member_gen 0: not a member of any round yet */
    int exit_code, term_signal;
} hv_page_worker_t;

typedef struct hv_page_jobview_s {
    const char *cluster_name;
    uint64_t now_ms;
    hv_page_job_t job;
    const hv_page_round_t *rounds; /* oldest first */
    size_t nrounds;
    const hv_page_worker_t *workers;
    size_t nworkers;
    int logout; /* the page is behind the login: show the log-out button */
    /* Its world size and step throughput over [t0_ms, t1_ms] (either may have no points). */
    uint64_t t0_ms, t1_ms;
    hv_svg_series_t size_series, tput_series;
} hv_page_jobview_t;

/* Appends s HTML-escaped (& < > " ' and control bytes become entities or '?'). s NULL: nothing. */
void hv_page_escape(hv_http_reply_t *out, const char *s);

/* Appends the cluster page / one job's page (a whole HTML document). */
void hv_page_render_cluster(const hv_page_cluster_t *c, hv_http_reply_t *out);
void hv_page_render_job(const hv_page_jobview_t *v, hv_http_reply_t *out);

/* Appends a page that says what was not found (a whole HTML document; message escaped). */
void hv_page_render_missing(const char *cluster_name, const char *message, hv_http_reply_t *out);
/* The login form (POST /login with the field "token"); message (escaped) says why the last try
 * failed, or NULL. No reload script, no secret. */
void hv_page_render_login(const char *cluster_name, const char *message, hv_http_reply_t *out);

/* A job's world size over time from its rounds (oldest first): each closed round's size from
 * its close; 0 from ended_ms (0: not ended). Without a round (a fixed-size job), np from
 * started_ms. Writes at most cap points, returns how many. Pure. */
size_t hv_page_size_points(const hv_page_round_t *rounds, size_t nrounds, uint64_t started_ms,
                           uint64_t ended_ms, uint32_t np, hv_svg_point_t *out, size_t cap);

/* A job's step throughput over time from its samples (ascending): at each sample at least
 * window_ms after the first, the commits since the newest sample at least window_ms older,
 * divided by the time between them and by the world size (steps per second per worker, i.e.
 * the job's steps per second). Writes at most cap points, returns how many. Pure. */
size_t hv_page_tput_points(const hv_page_tsample_t *s, size_t n, uint64_t window_ms,
                           hv_svg_point_t *out, size_t cap);

/* A duration in words for people: "850 ms", "12.3 s", "4m 05s", "2h 03m". Pure. */
const char *hv_page_fmt_duration(uint64_t ms, char *buf, size_t len);

#endif
