/*
 * cluster: see cluster.h.
 */
#include "cluster.h"
#include "jobsize.h"

#include <stdint.h>
#include <stdio.h>

uint64_t hv_cl_drain_hold_until(uint32_t notice_ms, int can_buy, uint64_t now_ms) {
    uint32_t margin =
        notice_ms / 10 > HV_CL_DRAIN_MARGIN_MIN_MS ? notice_ms / 10 : HV_CL_DRAIN_MARGIN_MIN_MS;
    if (!can_buy || notice_ms <= margin + HV_CL_DRAIN_HOLD_MIN_MS) {
        return 0;
    }
    return now_ms + notice_ms - margin;
}

uint32_t hv_cl_start(hv_cl_pass_t *p, uint32_t np, uint32_t min_np, uint32_t free) {
    if (p->blocked) {
        return 0;
    }
    uint32_t least = hv_np_least(1, np, min_np);
    if (free < least) {
        p->blocked = 1;
        return 0;
    }
    return free < np ? free : np;
}

void hv_cl_start_failed(hv_cl_pass_t *p) { p->blocked = 1; }

uint32_t hv_cl_grow(const hv_cl_pass_t *p, uint32_t wants, uint32_t free) {
    if (p->blocked) {
        return 0;
    }
    return wants < free ? wants : free;
}

hv_err hv_cl_submit(const hv_cl_ask_t *a, const hv_cl_room_t *r, const hv_cl_defaults_t *def,
                    hv_cl_settings_t *out, char *err, size_t errlen) {
    uint32_t capacity = r->capacity + r->more;
    if (capacity == 0) {
        snprintf(err, errlen, "no node has joined the cluster: start one with 'hvagent join'");
        return HV_ESTATE;
    }
    uint32_t np = a->np;
    if (np == 0) {
        np = r->free > 0 ? r->free : 1;
    }
    int elastic = a->elastic || a->min_np != 0 || a->max_np != 0;
    uint32_t min_np = a->min_np ? a->min_np : np;
    uint32_t max_np = a->max_np ? a->max_np : np;
    if (min_np > np || max_np < np || min_np == 0) {
        snprintf(err, errlen, "need 1 <= min-np <= np <= max-np, got %u <= %u <= %u", min_np, np,
                 max_np);
        return HV_EINVAL;
    }
    /* An elastic job starts with min-np and grows as nodes come (hv_cl_start): it can run here
     * when its min-np can. */
    uint32_t need = hv_np_least(elastic, np, min_np);
    const char *what = elastic && min_np < np ? "--min-np" : "-np";
    const char *sph = a->slots_per_host ? " with that --slots-per-host" : "";
    if (need > capacity) {
        if (r->autoscaler) {
            snprintf(err, errlen,
                     "%s %u can never run here: the cluster has %u slots%s and the autoscaler "
                     "can add %u more (autoscaler.max_nodes and the node types' max_nodes)",
                     what, need, r->capacity, sph, r->more);
        } else {
            snprintf(err, errlen, "%s %u can never run here: the cluster has %u slots%s", what,
                     need, capacity, sph);
        }
        return HV_EINVAL;
    }
    hv_cl_settings_t s = {
        .elastic = elastic,
        .np = np,
        .min_np = hv_np_least(elastic, np, min_np),
        .max_np = elastic ? max_np : np,
        .target_np = elastic ? a->target_np : 0,
        .max_resets = !elastic            ? 0
                      : a->max_resets_set ? a->max_resets
                                          : def->max_resets,
        .timeout_s = a->timeout_s ? a->timeout_s : def->wait_timeout_s,
        .check_every = a->check_every ? a->check_every : def->check_every,
        .elastic_timeout_s = a->elastic_timeout_s ? a->elastic_timeout_s : def->elastic_timeout_s,
        .cooldown_min_s = a->cooldown_set ? a->cooldown_min_s : def->cooldown_min_s,
        .cooldown_max_s = a->cooldown_set ? a->cooldown_max_s : def->cooldown_max_s,
        .max_strikes = def->max_strikes};
    if (s.cooldown_max_s < s.cooldown_min_s) {
        s.cooldown_max_s = s.cooldown_min_s;
    }
    *out = s;
    return HV_OK;
}

uint32_t hv_cl_used_for_job(uint32_t total, uint32_t used, uint32_t per_host, uint32_t mine) {
    if (per_host == 0) {
        return used;
    }
    uint32_t room = per_host > mine ? per_host - mine : 0;
    uint32_t free = total > used ? total - used : 0;
    return room < free ? total - room : used;
}

uint64_t hv_cl_wait_deadline(uint64_t now, uint64_t wall, uint64_t submitted_ms,
                             uint32_t timeout_s) {
    uint64_t waited = wall > submitted_ms ? wall - submitted_ms : 0;
    uint64_t limit = (uint64_t)timeout_s * 1000u;
    return now + (limit > waited ? limit - waited : 0);
}

int hv_cl_wait_over(int pending, uint64_t now, uint64_t wait_deadline) {
    return pending && now > wait_deadline;
}

int hv_cl_forget(int ended, int ending, int settled, uint64_t now, uint64_t ended_ms) {
    return ended && !ending && settled && now > ended_ms + HV_CL_ENDED_KEEP_MS;
}

/* What j wants: to start (floor) and to grow (grow), as hv_cl_demand says. */
static void job_wants(const hv_cl_job_t *j, uint32_t *floor, uint32_t *grow) {
    *floor = 0;
    *grow = 0;
    uint32_t target = j->elastic && j->target > j->np ? j->target : j->np;
    if (j->planned && j->quota_bound) {
        return;
    }
    if (j->planned ? j->plan == 0 : j->pending) {
        *floor = j->np;
        *grow = target - j->np;
    } else if (j->planned) {
        if (j->elastic && j->target > j->plan &&
            (j->pending || j->wants > 0 || j->plan < j->size)) {
            *grow = j->target - j->plan;
        }
    } else {
        *grow = j->wants;
    }
}

size_t hv_cl_demand(const hv_cl_job_t *jobs, size_t n, uint32_t pool, hv_cl_demand_t *out,
                    size_t cap) {
    size_t k = 0;
    /* Two passes (floors, then growth), each by priority: the highest priority not yet visited
     * in this pass, the input's order among equals. */
    for (int pass = 0; pass < 2; pass++) {
        int have = 0;
        int32_t prio = 0; /* the priority visited last */
        for (;;) {
            int found = 0;
            int32_t next = INT32_MIN;
            for (size_t i = 0; i < n; i++) {
                int32_t p = jobs[i].priority;
                if ((!have || p < prio) && (!found || p > next)) {
                    next = p;
                    found = 1;
                }
            }
            if (!found) {
                break;
            }
            have = 1;
            prio = next;
            for (size_t i = 0; i < n; i++) {
                const hv_cl_job_t *j = &jobs[i];
                if (j->priority != prio) {
                    continue;
                }
                uint32_t floor, grow;
                job_wants(j, &floor, &grow);
                uint32_t want = pass == 0 ? floor : grow;
                uint32_t take = pool < want ? pool : want;
                pool -= take;
                if (want == take) {
                    continue;
                }
                size_t at = k;
                for (size_t q = 0; q < k; q++) {
                    if (out[q].job_id == j->id) {
                        at = q;
                    }
                }
                if (at == k) {
                    if (k == cap) {
                        continue;
                    }
                    out[k++] = (hv_cl_demand_t){.job_id = j->id, .pending = floor > 0};
                }
                out[at].workers += want - take;
            }
        }
    }
    return k;
}
