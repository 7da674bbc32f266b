/*
 * svc_cost: see svc_cost.h.
 */
#include "svc_cost.h"

#include "views.h"

#include <stdio.h>
#include <string.h>

#include "cost.h"
#include "hv.pb-c.h"
#include "jobm.h"
#include "mem.h"
#include "util.h"

struct hv_svc_cost_s {
    const hv_head_config_t *cfg;
    hv_driver_t *d;
};

/* The rows the report needs, owned here. */
typedef struct cost_input_s {
    hv_cost_type_t types[HV_COST_MAX_TYPES];
    size_t ntypes;
    hv_instance_row_t *irows;
    size_t ni;
    hv_cost_instance_t *insts;
    hv_worker_row_t *wrows;
    size_t nw;
    hv_cost_worker_t *workers;
    hv_node_row_t *nrows;
    size_t nn;
} cost_input_t;

static void input_fini(cost_input_t *in) {
    hv_view_instances_free(in->irows, in->ni);
    hv_view_workers_free(in->wrows, in->nw);
    hv_view_nodes_free(in->nrows, in->nn);
    hv_free(in->insts);
    hv_free(in->workers);
}

static const hv_node_row_t *node_of(const cost_input_t *in, uint64_t id) {
    for (size_t i = 0; i < in->nn; i++) {
        if (in->nrows[i].id == id) {
            return &in->nrows[i];
        }
    }
    return NULL;
}

/* Loads the types, the instances and (job_id != 0) the job's workers with their nodes. */
static hv_err input_load(hv_svc_cost_t *s, uint64_t job_id, cost_input_t *in) {
    memset(in, 0, sizeof(*in));
    const hv_head_config_t *c = s->cfg;
    for (size_t t = 0; t < c->autoscaler.ntypes && t < HV_COST_MAX_TYPES; t++) {
        const hv_head_node_type_t *ht = &c->autoscaler.types[t];
        in->types[in->ntypes++] =
            (hv_cost_type_t){ht->name, ht->slots, ht->price_per_hour, ht->ondemand_price_per_hour};
    }
    hv_err rc = hv_view_instances(s->d, 0, &in->irows, &in->ni);
    if (rc != HV_OK) {
        return rc;
    }
    in->insts = hv_calloc(in->ni ? in->ni : 1, sizeof(*in->insts));
    if (in->insts == NULL) {
        return HV_ENOMEM;
    }
    for (size_t i = 0; i < in->ni; i++) {
        const hv_instance_row_t *r = &in->irows[i];
        in->insts[i] =
            (hv_cost_instance_t){r->type, r->node_name, r->created_ms, r->ended_ms, r->preempted};
    }
    if (job_id == 0) {
        return HV_OK;
    }
    if ((rc = hv_view_workers(s->d, job_id, 0, &in->wrows, &in->nw)) != HV_OK ||
        (rc = hv_view_nodes(s->d, &in->nrows, &in->nn)) != HV_OK) {
        return rc;
    }
    in->workers = hv_calloc(in->nw ? in->nw : 1, sizeof(*in->workers));
    if (in->workers == NULL) {
        return HV_ENOMEM;
    }
    for (size_t i = 0; i < in->nw; i++) {
        const hv_worker_row_t *w = &in->wrows[i];
        const hv_node_row_t *n = node_of(in, w->node_id);
        in->workers[i] =
            (hv_cost_worker_t){n ? n->name : NULL, n ? n->slots : 1, w->started_ms, w->ended_ms};
    }
    return HV_OK;
}

static double price_of(const cost_input_t *in, const char *type) {
    for (size_t t = 0; t < in->ntypes; t++) {
        if (strcmp(in->types[t].name, type) == 0) {
            return in->types[t].price_per_hour;
        }
    }
    return 0;
}

static void cost_call(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_svc_cost_t *s = ud;
    const Hvpb__V1__CostRequest *req = (const Hvpb__V1__CostRequest *)m;
    uint64_t now = hv_wall_ms(), job_end = 0;
    hv_job_row_t job;
    memset(&job, 0, sizeof(job));
    if (req->job_id != 0) {
        hv_err rc = hv_view_job(s->d, req->job_id, &job);
        if (rc == HV_ENOTFOUND) {
            hv_rpc_finish(c, rc, "no job %llu", (unsigned long long)req->job_id);
            return;
        }
        if (rc != HV_OK) {
            hv_rpc_finish(c, rc, "cannot read job %llu: %s", (unsigned long long)req->job_id,
                          hv_view_error(s->d));
            return;
        }
        job_end = job.ended_ms;
    }
    cost_input_t in;
    hv_cost_report_t r;
    uint64_t rollbacks = 0, redone = 0;
    hv_err rc = input_load(s, req->job_id, &in);
    if (rc == HV_OK) {
        rc = hv_view_event_count(s->d, req->job_id, "round.close", "\"rollback\":true", &rollbacks);
    }
    if (rc == HV_OK) {
        rc = hv_view_event_sum(s->d, req->job_id, "round.close", "redone_samples", &redone);
    }
    if (rc != HV_OK) {
        hv_rpc_finish(c, rc, "cannot read the cost's records: %s", hv_view_error(s->d));
        input_fini(&in);
        hv_view_job_fini(&job);
        return;
    }
    if (req->job_id != 0) {
        hv_cost_job(in.types, in.ntypes, in.insts, in.ni, in.workers, in.nw, job_end, now, &r);
    } else {
        hv_cost_cluster(in.types, in.ntypes, in.insts, in.ni, now, &r);
    }
    Hvpb__V1__CostLine lines[HV_COST_MAX_TYPES + 1];
    Hvpb__V1__CostLine *lp[HV_COST_MAX_TYPES + 1];
    for (size_t i = 0; i < r.n; i++) {
        const hv_cost_line_t *l = &r.lines[i];
        hvpb__v1__cost_line__init(&lines[i]);
        lines[i].type = (char *)l->type;
        lines[i].instance_seconds = l->instance_s;
        lines[i].cost = l->cost;
        lines[i].ondemand_cost = l->ondemand;
        lines[i].ondemand_known = l->ondemand_known;
        lines[i].instances = l->instances;
        lines[i].preemptions = l->preemptions;
        lines[i].price_per_hour = price_of(&in, l->type);
        lp[i] = &lines[i];
    }
    Hvpb__V1__CostReply rep = HVPB__V1__COST_REPLY__INIT;
    rep.job_id = req->job_id;
    rep.types = lp;
    rep.n_types = r.n;
    rep.instance_seconds = r.instance_s;
    rep.cost = r.cost;
    rep.ondemand_cost = r.ondemand;
    rep.ondemand_known = r.ondemand_known;
    rep.preemptions = r.preemptions;
    rep.rollbacks = (uint32_t)(rollbacks > UINT32_MAX ? UINT32_MAX : rollbacks);
    rep.redone_samples = redone;
    if (req->job_id != 0) {
        uint64_t end = job.ended_ms ? job.ended_ms : now;
        rep.wall_seconds = end > job.submitted_ms ? (double)(end - job.submitted_ms) / 1000.0 : 0;
        rep.state = job.state;
        hv_job_state_t st;
        if (hv_job_state_parse(job.state, &st) == HV_OK) {
            rep.state_code = (Hvpb__V1__JobState)(st + 1); /* the wire counts from 1 */
        }
    }
    hv_rpc_reply(c, &rep.base);
    input_fini(&in);
    hv_view_job_fini(&job);
}

hv_err hv_svc_cost_create(hv_rpc_server_t *srv, const hv_head_config_t *cfg, hv_driver_t *d,
                          hv_svc_cost_t **out) {
    hv_svc_cost_t *s = hv_calloc(1, sizeof(*s));
    if (s == NULL) {
        return HV_ENOMEM;
    }
    s->cfg = cfg;
    s->d = d;
    hv_rpc_method_t ms[] = {{"/hvpb.v1.Jobs/Cost", HV_RPC_UNARY,
                             &hvpb__v1__cost_request__descriptor, cost_call, NULL, s}};
    hv_err rc = hv_rpc_server_add_n(srv, ms, 1);
    if (rc != HV_OK) {
        hv_free(s);
        return rc;
    }
    *out = s;
    return HV_OK;
}

void hv_svc_cost_destroy(hv_svc_cost_t *s) { hv_free(s); }
