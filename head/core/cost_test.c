/*
 * cost_test: the cost report, table by table: instance time at each type's price and on-demand
 * price, instances still running (charged up to now), a job's share of the slots it used, nodes
 * joined by hand, preemptions the job survived, and unknown on-demand prices.
 */
#include "cost.h"
#include "hv_check.h"

#include <math.h>
#include <string.h>

#define H 3600000ull /* an hour in ms */

static const hv_cost_type_t T[] = {
    {"spot", 2, 0.10, 0.40},  /* preemptible, with its on-demand price */
    {"od", 2, 0.40, 0.40},    /* on demand */
    {"spot-x", 4, 0.20, 0.0}, /* preemptible, on-demand price unknown */
};

static int near(double a, double b) { return fabs(a - b) < 1e-9; }

static const hv_cost_line_t *line(const hv_cost_report_t *r, const char *type) {
    for (size_t i = 0; i < r->n; i++) {
        if (strcmp(r->lines[i].type, type) == 0) {
            return &r->lines[i];
        }
    }
    return NULL;
}

static void case_cluster(void) {
    static const hv_cost_instance_t in[] = {
        {"spot", "spot-1", 0, 2 * H, 1}, /* 2 h, preempted */
        {"spot", "spot-2", H, 0, 0},     /* running since 1 h: 2 h at now = 3 h */
        {"od", "od-3", 0, H / 2, 0},     /* half an hour */
        {"gone", "old-4", 0, H, 0},      /* a type no longer configured: not counted */
    };
    hv_cost_report_t r;
    hv_cost_cluster(T, 3, in, 4, 3 * H, &r);
    CHECK_EQ(r.n, 2); /* spot-x was never used */
    const hv_cost_line_t *s = line(&r, "spot"), *o = line(&r, "od");
    CHECK(s != NULL && o != NULL);
    if (s == NULL || o == NULL) {
        return;
    }
    CHECK(near(s->instance_s, 4 * 3600.0));
    CHECK(near(s->cost, 0.40));
    CHECK(near(s->ondemand, 1.60));
    CHECK_EQ(s->instances, 2);
    CHECK_EQ(s->preemptions, 1);
    CHECK(near(o->instance_s, 1800.0));
    CHECK(near(o->cost, 0.20));
    CHECK(near(r.cost, 0.60));
    CHECK(near(r.ondemand, 1.80));
    CHECK(near(r.instance_s, 4 * 3600.0 + 1800.0));
    CHECK_EQ(r.preemptions, 1);
    CHECK(r.ondemand_known);

    /* An instance of a type without an on-demand price makes the total's unknown. */
    static const hv_cost_instance_t x[] = {{"spot-x", "x-1", 0, H, 0}};
    hv_cost_cluster(T, 3, x, 1, 2 * H, &r);
    CHECK_EQ(r.n, 1);
    CHECK(near(r.cost, 0.20));
    CHECK(!r.ondemand_known);
    /* Nothing launched: an empty report. */
    hv_cost_cluster(T, 3, NULL, 0, H, &r);
    CHECK_EQ(r.n, 0);
    CHECK(near(r.cost, 0.0));
}

/* A job pays for the slots its workers held: one worker on a 2-slot node is half the node. */
static void case_job_share(void) {
    static const hv_cost_instance_t in[] = {
        {"spot", "spot-1", 0, 0, 0},
        {"od", "od-2", 0, 0, 0},
        {"spot", "spot-3", 0, 0, 0}, /* ran nothing of this job */
    };
    static const hv_cost_worker_t w[] = {
        {"spot-1", 2, H, 3 * H},   /* 2 h on half a spot node: 1 instance-hour */
        {"spot-1", 2, H, 2 * H},   /* 1 h: 0.5 instance-hour */
        {"od-2", 2, 2 * H, 0},     /* running since 2 h, now 4 h: 1 instance-hour */
        {"manual-a", 4, H, 2 * H}, /* a node joined by hand with 4 slots: 0.25, free */
        {"nowhere", 2, 0, 0},      /* never started: nothing */
    };
    hv_cost_report_t r;
    hv_cost_job(T, 3, in, 3, w, 5, 0, 4 * H, &r);
    const hv_cost_line_t *s = line(&r, "spot"), *o = line(&r, "od"), *m = line(&r, "manual");
    CHECK(s != NULL && o != NULL && m != NULL);
    if (s == NULL || o == NULL || m == NULL) {
        return;
    }
    CHECK_EQ(r.n, 3);
    CHECK(near(s->instance_s, 1.5 * 3600));
    CHECK(near(s->cost, 0.15));
    CHECK(near(s->ondemand, 0.60));
    CHECK_EQ(s->instances, 1);
    CHECK(near(o->instance_s, 3600.0));
    CHECK(near(o->cost, 0.40));
    CHECK(near(m->instance_s, 900.0));
    CHECK(near(m->cost, 0.0));
    CHECK(near(r.cost, 0.55));
    CHECK(near(r.ondemand, 1.00));
}

/* A node name reused by a later instance: each worker is charged to the instance it ran on. */
static void case_job_reused_name(void) {
    static const hv_cost_instance_t in[] = {
        {"spot", "n", 0, H, 1}, /* preempted at 1 h */
        {"od", "n", H, 0, 0},   /* the same name, on demand, from 1 h */
    };
    static const hv_cost_worker_t w[] = {{"n", 2, H / 2, H}, {"n", 2, H, 3 * H / 2}};
    hv_cost_report_t r;
    hv_cost_job(T, 3, in, 2, w, 2, 0, 2 * H, &r);
    const hv_cost_line_t *s = line(&r, "spot"), *o = line(&r, "od");
    CHECK(s != NULL && o != NULL);
    if (s != NULL && o != NULL) {
        CHECK(near(s->instance_s, 900.0));
        CHECK(near(o->instance_s, 900.0));
        CHECK_EQ(s->preemptions, 1);
    }
    CHECK_EQ(r.preemptions, 1);

    /* A worker recorded past its instance's end (the head noticed the loss later) is still
     * that instance's type, not a node joined by hand. */
    static const hv_cost_worker_t late[] = {{"n", 2, 2 * H, 2 * H + 1000}};
    static const hv_cost_instance_t gone[] = {{"spot", "n", 1, H, 1}};
    hv_cost_job(T, 3, gone, 1, late, 1, 0, 3 * H, &r);
    CHECK(line(&r, "manual") == NULL);
    CHECK(line(&r, "spot") != NULL && near(line(&r, "spot")->instance_s, 0.5));
}

/* Survived: the preempted instance ended before the job; not when the job ended first, nor
 * when the instance ran none of the job's workers. */
static void case_job_preemptions(void) {
    static const struct {
        uint64_t inst_end, job_end;
        const char *worker_node;
        uint32_t want;
    } rows[] = {
        {H, 2 * H, "a", 1}, /* preempted during the job */
        {H, 0, "a", 1},     /* the job still runs */
        {2 * H, H, "a", 0}, /* the job had ended: nothing to survive */
        {H, 2 * H, "b", 0}, /* another node's preemption */
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_cost_instance_t in[] = {{"spot", "a", 0, rows[i].inst_end, 1}, {"spot", "b", 0, 0, 0}};
        hv_cost_worker_t w[] = {{rows[i].worker_node, 2, 1000, H / 2}};
        hv_cost_report_t r;
        hv_cost_job(T, 3, in, 2, w, 1, rows[i].job_end, 3 * H, &r);
        CHECK_EQ(r.preemptions, rows[i].want);
    }
}

HV_CHECK_MAIN(NULL, NULL, {"cluster", case_cluster}, {"job_share", case_job_share},
              {"job_reused_name", case_job_reused_name}, {"job_preemptions", case_job_preemptions})
