/*
 * driver_fleet.c: the driver asks the fleet policy (head/core/fleet.h) how the cluster is shared.
 * At each scheduling point (a submission, a job's end, a node's join, drain or loss, a round's
 * close, the tick) it builds the policy's inputs from its tables (jobs with their sizes, bounds,
 * priority and age; nodes with their capacity; which job's workers run where and which of them
 * are leaving), decides, and stores every decision that changed with its job's row before
 * driver.c acts on it (admits, shrinks, grows). The namespaces are the config's fleet.namespaces
 * (weight, quota, borrowing limit), then an implicit "default" (no quota, weight 1, no borrowing
 * limit) unless the config lists one: a job is in its hvsubmit --namespace, and one whose
 * namespace is not listed counts in "default"; the slots, GPUs and memory that actors hold count
 * against their namespace's quota the same way. With none configured every job is in "default":
 * priorities, then goodput (each job's throughput per size fitted to its workers' step reports,
 * j->tput: tput.h). Threads: the loop thread only.
 */
#include "driver_int.h"

#include <stdio.h>
#include <string.h>

#include "log.h"
#include "mem.h"
#include "util.h"

/* Live workers of j that are still in the job (not removed), and those leaving (removed, live). */
static void job_counts(const hv_djob_t *j, uint64_t node_id, uint32_t *in, uint32_t *leaving) {
    *in = 0;
    *leaving = 0;
    for (size_t i = 0; i < j->jm.nw; i++) {
        const hv_dworker_t *w = (const hv_dworker_t *)j->jm.w[i];
        if (!wlive(w) || (node_id != 0 && w->jm.node_id != node_id)) {
            continue;
        }
        if (w->jm.removed || w->jm.evict) {
            (*leaving)++;
        } else {
            (*in)++;
        }
    }
}

/* The policy's namespaces: the configured ones, then "default" unless configured. */
static size_t ns_count(const hv_driver_t *d) {
    const hv_head_config_t *c = d->cfg;
    return c->fleet.nns + (hv_head_config_ns(c, "default") == NULL);
}

/* The policy's index of namespace name (unlisted: "default"'s; the one lookup, config.h). */
static uint32_t ns_index(const hv_driver_t *d, const char *name) {
    return (uint32_t)hv_head_config_ns_index(d->cfg, name);
}

static void ns_input(const hv_driver_t *d, size_t i, hv_fl_ns_t *o) {
    memset(o, 0, sizeof(*o));
    o->weight = 1;
    for (int r = 0; r < HV_FL_NRES; r++) {
        o->borrow.r[r] = HV_FL_UNLIMITED;
    }
    if (i < d->cfg->fleet.nns) {
        const hv_head_ns_t *n = &d->cfg->fleet.ns[i];
        o->weight = n->weight;
        for (int r = 0; r < HV_FL_NRES; r++) {
            o->quota.r[r] = n->quota[r];
            o->borrow.r[r] = n->borrow[r];
        }
    }
}

typedef struct actor_use_s {
    const hv_driver_t *d;
    hv_fl_ns_t *ns;
} actor_use_t;

static void actor_use(void *fud, const char *ns, uint32_t slots, uint32_t gpus,
                      uint64_t memory_mb) {
    actor_use_t *u = fud;
    hv_fl_res_t *a = &u->ns[ns_index(u->d, ns)].actors;
    a->r[HV_FL_SLOTS] += slots;
    a->r[HV_FL_GPUS] += gpus;
    a->r[HV_FL_MEMORY] += memory_mb;
}

size_t hv_driver_fleet_namespaces(const hv_driver_t *d, hv_driver_ns_view_t *out, size_t max) {
    size_t n = ns_count(d);
    for (size_t i = 0; i < n && i < max; i++) {
        hv_driver_ns_view_t *v = &out[i];
        hv_fl_ns_t in;
        ns_input(d, i, &in);
        memset(v, 0, sizeof(*v));
        const hv_head_ns_t *cn = i < d->cfg->fleet.nns ? &d->cfg->fleet.ns[i] : NULL;
        v->name = hv_head_config_ns_name(d->cfg, i);
        v->weight = in.weight;
        v->priority = cn != NULL ? cn->priority : 0;
        for (int r = 0; r < HV_FL_NRES; r++) {
            v->quota[r] = in.quota.r[r];
            v->borrow[r] = in.borrow.r[r];
        }
        if (i < d->fl_nshare) {
            const hv_fl_share_t *s = &d->fl_share[i];
            for (int r = 0; r < HV_FL_NRES; r++) {
                v->used[r] = s->used.r[r];
                v->borrowed[r] = s->borrowed.r[r];
            }
            v->share_pm = s->share_pm;
            v->waiting = s->waiting;
        }
    }
    return n;
}

/* Live members of j kept on a node under notice (evict, not removed): they train until their
 * replacement comes or their notice ends (jobm). No change of the job is in progress for them. */
static uint32_t job_kept(const hv_djob_t *j) {
    uint32_t n = 0;
    for (size_t i = 0; i < j->jm.nw; i++) {
        const hv_dworker_t *w = (const hv_dworker_t *)j->jm.w[i];
        n += wlive(w) && !w->jm.removed && w->jm.evict;
    }
    return n;
}

/* How the policy sees j now. */
static void job_input(const hv_driver_t *d, const hv_djob_t *j, hv_fl_job_t *o) {
    const hv_jm_params_t *p = &j->jm.p;
    uint32_t in, leaving;
    job_counts(j, 0, &in, &leaving);
    memset(o, 0, sizeof(*o));
    o->id = j->jm.id;
    o->ns = ns_index(d, j->ns);
    o->priority = j->priority;
    o->elastic = p->elastic;
    /* Stopped only to resume from a state copy: an elastic job once it has one (driver.c). */
    o->preemptible = j->preemptible && p->elastic && hv_jm_copy_tier(&j->jm) != HV_COPY_TIER_NONE;
    o->per_worker.r[HV_FL_SLOTS] = 1;
    o->slots_per_host = j->slots_per_host;
    if (p->elastic) {
        /* The job's own target (a growth schedule, Rendezvous.Resize) bounds what it gets. */
        uint32_t max = hv_jm_target(p);
        uint32_t min = p->min_np > 0 ? p->min_np : 1;
        max = max < min ? min : max;
        o->min_np = min;
        o->max_np = max;
        o->np = j->np < min ? min : j->np > max ? max : j->np;
    } else {
        o->np = o->min_np = o->max_np = j->np;
    }
    if (j->jm.state == HV_JOB_PENDING) {
        o->state = HV_FL_WAITING;
        o->waiting_since_ms = hv_jm_preempted(&j->jm) ? j->resized_ms : j->submitted_ms;
        return;
    }
    o->size = in + leaving; /* live: those leaving count until they are gone */
    o->resized_ms = j->resized_ms != 0 ? j->resized_ms : j->started_ms;
    if (in < j->fleet_grant) {
        o->resized_ms = 0; /* the rest of its admission: no hold */
    }
    /* A job that cannot be resized now: placing, re-forming, ending, with workers leaving, or
     * one that cannot take more although it is below its target (finishing; its first round not
     * formed yet). Members kept on a node under notice are not a change in progress: the job
     * takes their replacements as they join (make before break; their slots count free, and
     * its size with them, so that a replacement restores the size rather than grows the job,
     * held by no resize interval or payback), and they leave after. */
    int frozen = j->jm.state != HV_JOB_RUNNING || j->jm.round_open || j->jm.ending ||
                 leaving > job_kept(j) ||
                 (p->elastic && in < o->max_np && hv_jm_wants(&j->jm) == 0);
    if (p->elastic && in < o->min_np && !j->jm.ending && hv_jm_wants(&j->jm) > 0) {
        /* Below its --min-np (a drain or a loss took workers), its round waits for capacity:
         * it is running, its floor first, and restoring the floor is no resize to hold. */
        frozen = 0;
        o->resized_ms = 0;
        o->size = in; /* those leaving are counted free (use.leaving) */
    }
    o->state = frozen ? HV_FL_FROZEN : HV_FL_RUNNING;
    if (o->state == HV_FL_RUNNING && p->elastic && o->np > in) {
        o->np = in < o->min_np ? o->min_np : in; /* np must lie in [min, max]: it is only read
                                                     for a waiting job's start */
    }
}

/* j's throughput per size, fitted to what its workers reported (tput.h; the default shape until
 * a size was observed for HV_TPUT_MIN_S): what the policy's goodput rule (fleet.h rule 4) reads. */
static void job_tput(const hv_djob_t *j, hv_tput_model_t *m) {
    if (hv_tput_fit(j->tput, j->ntput, m) != HV_OK) {
        hv_tput_default(m);
    }
}

hv_err hv__driver_fleet_decide(hv_driver_t *d, hv_driver_fleet_t *f) {
    memset(f, 0, sizeof(*f));
    uint64_t wall = hv_wall_ms();
    size_t nj = 0, nn = 0;
    for (hv_djob_t *j = d->jobs; j != NULL; j = j->next) {
        nj += job_active(j);
    }
    for (hv_dnode_t *n = d->nodes; n != NULL; n = n->next) {
        nn += !hv_node_hidden(n->state, n->retired);
    }
    hv_fl_job_t *jobs = hv_calloc(nj + 1, sizeof(*jobs));
    hv_fl_node_t *nodes = hv_calloc(nn + 1, sizeof(*nodes));
    hv_fl_use_t *use = hv_calloc(nj * nn + 1, sizeof(*use));
    hv_tput_model_t *tput = hv_calloc(nj + 1, sizeof(*tput));
    f->jobs = hv_calloc(nj + 1, sizeof(*f->jobs));
    hv_err rc = HV_ENOMEM;
    if (jobs == NULL || nodes == NULL || use == NULL || tput == NULL || f->jobs == NULL) {
        goto out;
    }
    size_t k = 0;
    for (hv_dnode_t *n = d->nodes; n != NULL; n = n->next) {
        if (hv_node_hidden(n->state, n->retired)) {
            continue;
        }
        hv_fl_node_t *o = &nodes[k++];
        o->id = n->id;
        uint32_t slots = n->acct.slots;
        if (n->acct.gpus > 0 && n->acct.gpus < slots) {
            slots = n->acct.gpus; /* a worker on a GPU node takes one of its GPUs */
        }
        o->cap.r[HV_FL_SLOTS] = slots;
        o->schedulable = n->state == HV_NODE_ALIVE && n->has_session;
        /* What the policy does not move (actors): the node's used slots beyond the jobs'. */
        uint32_t jobs_here = 0;
        for (hv_djob_t *j = d->jobs; j != NULL; j = j->next) {
            uint32_t in, leaving;
            job_counts(j, n->id, &in, &leaving);
            jobs_here += in + leaving;
        }
        o->other.r[HV_FL_SLOTS] =
            n->acct.slots_used > jobs_here ? n->acct.slots_used - jobs_here : 0;
    }
    size_t nu = 0;
    for (hv_djob_t *j = d->jobs; j != NULL; j = j->next) {
        if (!job_active(j)) {
            continue;
        }
        size_t ji = f->njobs;
        f->jobs[f->njobs++] = j;
        job_input(d, j, &jobs[ji]);
        job_tput(j, &tput[ji]);
        jobs[ji].tput = &tput[ji];
        for (size_t ni = 0; ni < k; ni++) {
            uint32_t in, leaving;
            job_counts(j, nodes[ni].id, &in, &leaving);
            if (in + leaving > 0) {
                use[nu++] = (hv_fl_use_t){
                    .job = ji, .node = ni, .workers = in + leaving, .leaving = leaving};
            }
        }
    }
    hv_fl_settings_t set;
    hv_fl_settings_default(&set);
    set.resize_interval_ms = d->cfg->fleet.resize_interval_ms;
    set.reset_ms = d->cfg->fleet.reset_ms;
    set.starve_ms = d->cfg->fleet.starve_ms;
    set.age_ms = d->cfg->fleet.age_ms;
    set.reserve_pct = d->cfg->fleet.reserve_pct;
    set.reserve_prio = (int32_t)d->cfg->fleet.reserve_priority;
    size_t nns = ns_count(d);
    hv_fl_ns_t ns[HV_DRIVER_NS_MAX];
    for (size_t i = 0; i < nns; i++) {
        ns_input(d, i, &ns[i]);
    }
    if (d->actors.use != NULL) {
        actor_use_t u = {.d = d, .ns = ns};
        d->actors.use(d->actors.ud, actor_use, &u);
    }
    hv_fl_in_t in = {.now_ms = wall,
                     .set = &set,
                     .ns = ns,
                     .nns = nns,
                     .jobs = jobs,
                     .njobs = f->njobs,
                     .nodes = nodes,
                     .nnodes = k,
                     .use = use,
                     .nuse = nu};
    char err[256];
    rc = hv_fl_decide(&in, &f->out, err, sizeof(err));
    if (rc != HV_OK) {
        HV_LOG(HV_LOG_ERROR, "driver", "HV-FLEET-DECIDE",
               "the fleet policy could not decide (%s): first come, first served this time",
               rc == HV_ENOMEM ? "out of memory" : err);
        goto out;
    }
    d->fl_nshare = f->out.nshare < HV_DRIVER_NS_MAX ? f->out.nshare : HV_DRIVER_NS_MAX;
    memcpy(d->fl_share, f->out.share, d->fl_nshare * sizeof(*d->fl_share));
    /* Store every decision that changed, each with its job's row, before anything acts on it. */
    for (size_t i = 0; i < f->out.ndec && i < f->njobs; i++) {
        hv_djob_t *j = f->jobs[i];
        const hv_fl_dec_t *dc = &f->out.dec[i];
        if ((j->fleet_decided && j->fleet_target == dc->target && j->fleet_reason == dc->reason &&
             j->fleet_cause == dc->cause) ||
            (hv_jm_preempted(&j->jm) && dc->target == 0) || /* it shows what stopped it */
            j->jm.preempt_until != 0) { /* stopping at its next commit: as it was decided */
            continue;
        }
        int was_decided = j->fleet_decided;
        uint32_t was_target = j->fleet_target;
        hv_fl_reason_t was_reason = j->fleet_reason;
        uint64_t was_cause = j->fleet_cause, was_ms = j->fleet_ms;
        j->fleet_decided = 1;
        j->fleet_target = dc->target;
        j->fleet_reason = dc->reason;
        j->fleet_cause = dc->cause;
        j->fleet_ms = wall;
        j->dirty_row = 1;
        if ((rc = hv__driver_persist(d, j)) != HV_OK) {
            /* Not stored: not decided (the next pass decides again), and nothing acts. */
            j->fleet_decided = was_decided;
            j->fleet_target = was_target;
            j->fleet_reason = was_reason;
            j->fleet_cause = was_cause;
            j->fleet_ms = was_ms;
            f->unstored = 1;
            goto out;
        }
    }
    rc = HV_OK;
out:
    hv_free(jobs);
    hv_free(nodes);
    hv_free(use);
    hv_free(tput);
    return rc;
}

void hv__driver_fleet_fini(hv_driver_fleet_t *f) {
    hv_fl_out_fini(&f->out);
    hv_free(f->jobs);
    memset(f, 0, sizeof(*f));
}

/* The words of a decision for people: "admitted", "shrunk to admit job 7", ... */
void hv__driver_fleet_why(hv_fl_reason_t r, uint64_t cause, char *buf, size_t len) {
    switch (r) {
    case HV_FL_SHRUNK_ADMIT:
        snprintf(buf, len, "shrunk so that job %llu can start", (unsigned long long)cause);
        break;
    case HV_FL_SHRUNK_PRIORITY:
        snprintf(buf, len, "shrunk for job %llu, of a higher priority", (unsigned long long)cause);
        break;
    case HV_FL_SHRUNK_RECLAIM:
        snprintf(buf, len, "shrunk: job %llu's namespace takes back its quota",
                 (unsigned long long)cause);
        break;
    case HV_FL_SHRUNK_SHARE:
        snprintf(buf, len, "shrunk: its workers serve job %llu better", (unsigned long long)cause);
        break;
    case HV_FL_ADMITTED:
        snprintf(buf, len, "admitted");
        break;
    case HV_FL_GROWN:
        snprintf(buf, len, "grown onto free capacity");
        break;
    default:
        snprintf(buf, len, "%s", hv_fl_reason_name(r));
        break;
    }
}
