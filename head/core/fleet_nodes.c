/*
 * fleet_nodes: the fleet policy's allocation placed on the nodes (fleet.h, rule 7). A shrinking
 * job gives its workers back where that frees the most room, draining nodes first; the jobs that
 * gain place theirs as sched.c would, on the nodes with the most room for them first, an
 * admission's floor as a gang (all or nothing); every freed worker a gainer takes names the
 * gainer as the cause of the shrink that freed it.
 */
#include "fleet_int.h"

#include <string.h>

#include "mem.h"

#define HV_FL_MAX_CELLS ((size_t)1 << 24) /* jobs x nodes the scratch may hold */

hv_err hv__fl_nodes_init(hv__fl_ws_t *ws, char *err, size_t errlen) {
    const hv_fl_in_t *in = ws->in;
    size_t nj = in->njobs, nn = in->nnodes;
    if (nn != 0 && nj > HV_FL_MAX_CELLS / nn) {
        hv_errf(err, errlen, "fleet: %zu jobs on %zu nodes: more than the policy holds", nj, nn);
        return HV_EINVAL;
    }
    size_t cells = nj * nn > 0 ? nj * nn : 1, caprel = 1;
    for (size_t u = 0; u < in->nuse; u++) {
        if (in->use[u].job >= nj || in->use[u].node >= nn) {
            hv_errf(err, errlen, "fleet: use %zu: job %zu of %zu, node %zu of %zu", u,
                    in->use[u].job, nj, in->use[u].node, nn);
            return HV_EINVAL;
        }
        caprel += in->use[u].workers;
    }
    ws->mine = hv_calloc(cells, sizeof(*ws->mine));
    ws->cur = hv_calloc(cells, sizeof(*ws->cur));
    ws->free = hv_calloc(nn ? nn : 1, sizeof(*ws->free));
    ws->spare = hv_calloc(nn ? nn : 1, sizeof(*ws->spare));
    ws->took = hv_calloc(nn ? nn : 1, sizeof(*ws->took));
    ws->order = hv_calloc(nj ? nj : 1, sizeof(*ws->order));
    ws->rel = hv_calloc(caprel, sizeof(*ws->rel));
    ws->caprel = caprel;
    if (!ws->mine || !ws->cur || !ws->free || !ws->spare || !ws->took || !ws->order || !ws->rel) {
        return HV_ENOMEM;
    }
    for (size_t u = 0; u < in->nuse; u++) {
        const hv_fl_use_t *us = &in->use[u];
        ws->mine[us->job * nn + us->node] +=
            us->workers > us->leaving ? us->workers - us->leaving : 0;
    }
    return HV_OK;
}

void hv__fl_nodes_fini(hv__fl_ws_t *ws) {
    hv_free(ws->mine);
    hv_free(ws->cur);
    hv_free(ws->free);
    hv_free(ws->spare);
    hv_free(ws->took);
    hv_free(ws->order);
    hv_free(ws->rel);
}

/* ---- the nodes as the moves go ---------------------------------------------------------------- */

static void add_res(hv_fl_res_t *a, const hv_fl_res_t *d, uint32_t n, int sign) {
    hv_fl_res_t t = hv__fl_times(d, n);
    for (int r = 0; r < HV_FL_NRES; r++) {
        a->r[r] = sign > 0 ? hv__fl_sat_add(a->r[r], t.r[r]) : hv__fl_sat_sub(a->r[r], t.r[r]);
    }
}

/* Every node's room before this decision's moves. */
static void reset_nodes(hv__fl_ws_t *ws) {
    const hv_fl_in_t *in = ws->in;
    size_t nn = in->nnodes;
    memcpy(ws->cur, ws->mine, in->njobs * nn * sizeof(*ws->cur));
    for (size_t n = 0; n < nn; n++) {
        const hv_fl_node_t *nd = &in->nodes[n];
        memset(&ws->free[n], 0, sizeof(ws->free[n]));
        if (nd->schedulable) {
            for (int r = 0; r < HV_FL_NRES; r++) {
                ws->free[n].r[r] = hv__fl_sat_sub(nd->cap.r[r], nd->other.r[r]);
            }
            for (size_t i = 0; i < in->njobs; i++) {
                add_res(&ws->free[n], &ws->jobs[i].d, ws->mine[i * nn + n], -1);
            }
        }
        ws->spare[n] =
            (uint32_t)(ws->free[n].r[HV_FL_SLOTS] > UINT32_MAX ? UINT32_MAX
                                                               : ws->free[n].r[HV_FL_SLOTS]);
    }
    ws->nrel = 0;
}

/* Job i gives back k workers, one at a time from the node where that leaves the most room
 * (a node that takes no work first: its workers are leaving anyway). */
static void release(hv__fl_ws_t *ws, size_t i, uint32_t k) {
    const hv_fl_in_t *in = ws->in;
    size_t nn = in->nnodes;
    hv__fl_job_t *b = &ws->jobs[i];
    while (k-- > 0) {
        size_t best = nn;
        uint64_t bs = 0;
        for (size_t n = 0; n < nn; n++) {
            if (ws->cur[i * nn + n] == 0) {
                continue;
            }
            uint64_t s = !in->nodes[n].schedulable
                             ? UINT64_MAX
                             : ws->free[n].r[HV_FL_SLOTS] + b->d.r[HV_FL_SLOTS];
            if (best == nn || s > bs) {
                best = n;
                bs = s;
            }
        }
        if (best == nn) {
            return;
        }
        ws->cur[i * nn + best]--;
        if (in->nodes[best].schedulable) {
            add_res(&ws->free[best], &b->d, 1, +1);
        }
        if (ws->nrel > 0 && ws->rel[ws->nrel - 1].node == best && ws->rel[ws->nrel - 1].job == i) {
            ws->rel[ws->nrel - 1].n++;
        } else if (ws->nrel < ws->caprel) {
            ws->rel[ws->nrel++] = (hv__fl_rel_t){.node = best, .job = i, .n = 1};
        }
    }
}

/* How many more workers of job i node n takes. */
static uint32_t room(const hv__fl_ws_t *ws, size_t i, size_t n) {
    const hv__fl_job_t *b = &ws->jobs[i];
    if (!ws->in->nodes[n].schedulable) {
        return 0;
    }
    uint64_t k = UINT32_MAX;
    for (int r = 0; r < HV_FL_NRES; r++) {
        if (b->d.r[r] > 0 && ws->free[n].r[r] / b->d.r[r] < k) {
            k = ws->free[n].r[r] / b->d.r[r];
        }
    }
    uint32_t sph = b->j->slots_per_host, mine = ws->cur[i * ws->in->nnodes + n];
    if (sph > 0) {
        k = mine >= sph ? 0 : k < sph - mine ? k : sph - mine;
    }
    return (uint32_t)k;
}

/* Job i took k workers' slots on node n: from what was free first, then from the releases there,
 * each of which now names i as its cause. */
static void trace(hv__fl_ws_t *ws, size_t i, size_t n, uint32_t k) {
    uint64_t slots = (uint64_t)k * ws->jobs[i].d.r[HV_FL_SLOTS];
    uint64_t from_spare = slots < ws->spare[n] ? slots : ws->spare[n];
    ws->spare[n] -= (uint32_t)from_spare;
    slots -= from_spare;
    for (size_t r = 0; r < ws->nrel && slots > 0; r++) {
        hv__fl_rel_t *rl = &ws->rel[r];
        if (rl->node != n || rl->n == 0) {
            continue;
        }
        uint64_t per = ws->jobs[rl->job].d.r[HV_FL_SLOTS];
        uint64_t m = (slots + per - 1) / per;
        m = m < rl->n ? m : rl->n;
        rl->n -= (uint32_t)m;
        slots = hv__fl_sat_sub(slots, m * per);
        if (ws->jobs[rl->job].cause == 0) {
            ws->jobs[rl->job].cause = i + 1;
        }
    }
}

/* Places up to want workers of job i, the nodes with the most room first, each filled before the
 * next (sched.c's order). Fewer than gang: nothing is placed. Returns the workers placed. */
static uint32_t put(hv__fl_ws_t *ws, size_t i, uint32_t want, uint32_t gang) {
    size_t nn = ws->in->nnodes;
    hv__fl_job_t *b = &ws->jobs[i];
    memset(ws->took, 0, nn * sizeof(*ws->took));
    uint32_t placed = 0;
    while (placed < want) {
        size_t best = nn;
        uint32_t br = 0;
        for (size_t n = 0; n < nn; n++) {
            uint32_t r = room(ws, i, n);
            if (r > br) {
                best = n;
                br = r;
            }
        }
        if (best == nn) {
            break;
        }
        uint32_t k = br < want - placed ? br : want - placed;
        ws->cur[i * nn + best] += k;
        ws->took[best] += k;
        add_res(&ws->free[best], &b->d, k, -1);
        placed += k;
    }
    for (size_t n = 0; n < nn; n++) {
        if (ws->took[n] == 0) {
            continue;
        }
        if (placed < gang) {
            ws->cur[i * nn + n] -= ws->took[n];
            add_res(&ws->free[n], &b->d, ws->took[n], +1);
        } else {
            trace(ws, i, n, ws->took[n]);
        }
    }
    return placed < gang ? 0 : placed;
}

/* ---- one placement --------------------------------------------------------------------------- */

/* The workers job i has placed now. */
static uint32_t placed(const hv__fl_ws_t *ws, size_t i) {
    size_t nn = ws->in->nnodes;
    uint32_t k = 0;
    for (size_t n = 0; n < nn; n++) {
        k += ws->cur[i * nn + n];
    }
    return k;
}

/* Job i takes back up to want of the workers it released that nobody took: they stay where they
 * are (those on nodes that take work first: the others are leaving). Returns how many. */
static uint32_t reclaim(hv__fl_ws_t *ws, size_t i, uint32_t want) {
    uint32_t got = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t r = 0; r < ws->nrel && got < want; r++) {
            hv__fl_rel_t *rl = &ws->rel[r];
            int sched = ws->in->nodes[rl->node].schedulable;
            if (rl->job != i || rl->n == 0 || sched != (pass == 0)) {
                continue;
            }
            uint32_t k = rl->n < want - got ? rl->n : want - got;
            rl->n -= k;
            ws->cur[i * ws->in->nnodes + rl->node] += k;
            if (sched) {
                add_res(&ws->free[rl->node], &ws->jobs[i].d, k, -1);
            }
            got += k;
        }
    }
    return got;
}

/* Job i found room for only got of its alloc workers. */
static void short_of_room(hv__fl_ws_t *ws, size_t i, uint32_t got, int last) {
    hv__fl_job_t *b = &ws->jobs[i];
    int gang_failed = b->j->state == HV_FL_WAITING && got == 0;
    if (!last) {
        if (gang_failed) {
            b->nofit = 1;
        } else {
            b->fitcap = got;
        }
        return;
    }
    add_res(&ws->used[b->j->ns], &b->d, b->alloc - got, -1);
    b->borrowed = b->borrowed < got ? b->borrowed : got;
    b->alloc = got;
    if (gang_failed) {
        b->granted = 0;
        b->nofit = 1;
    }
}

/* 1 when job a places before job b: higher priority first, then as granted. */
static int place_before(const hv__fl_job_t *a, const hv__fl_job_t *b) {
    if (a->prio != b->prio) {
        return a->prio > b->prio;
    }
    return a->seq < b->seq;
}

/* The granted jobs in placing order into ws->order; returns their count. */
static size_t placing_order(hv__fl_ws_t *ws) {
    size_t no = 0;
    for (size_t i = 0; i < ws->in->njobs; i++) {
        hv__fl_job_t *b = &ws->jobs[i];
        if (!b->granted || b->j->state == HV_FL_FROZEN) {
            continue;
        }
        size_t k = no++; /* insertion sort: the order is nearly the grant order already */
        while (k > 0 && place_before(b, &ws->jobs[ws->order[k - 1]])) {
            ws->order[k] = ws->order[k - 1];
            k--;
        }
        ws->order[k] = i;
    }
    return no;
}

/* Every running job first gives back its workers above its floor (the room where it frees the
 * most); the admitted gangs take their floors; every running job takes back what it keeps of
 * what it gave, where nobody took it (no move); then what is still missing is placed anew. */
int hv__fl_place(hv__fl_ws_t *ws, int last) {
    reset_nodes(ws);
    for (size_t i = 0; i < ws->in->njobs; i++) {
        hv__fl_job_t *b = &ws->jobs[i];
        if (b->j->state == HV_FL_RUNNING) {
            uint32_t hold = !b->granted ? 0 : b->alloc < b->floor ? b->alloc : b->floor;
            release(ws, i, b->j->size > hold ? b->j->size - hold : 0);
        }
    }
    size_t no = placing_order(ws);
    for (size_t k = 0; k < no; k++) {
        size_t i = ws->order[k];
        if (ws->jobs[i].j->state == HV_FL_WAITING) {
            put(ws, i, ws->jobs[i].floor, ws->jobs[i].floor);
        }
    }
    for (size_t k = 0; k < no; k++) {
        size_t i = ws->order[k];
        uint32_t have = placed(ws, i), keep = ws->jobs[i].alloc;
        keep = keep < ws->jobs[i].j->size ? keep : ws->jobs[i].j->size;
        if (ws->jobs[i].j->state == HV_FL_RUNNING && have < keep) {
            reclaim(ws, i, keep - have);
        }
    }
    int ok = 1;
    for (size_t k = 0; k < no; k++) {
        size_t i = ws->order[k];
        hv__fl_job_t *b = &ws->jobs[i];
        uint32_t have = placed(ws, i);
        int gang_failed = b->j->state == HV_FL_WAITING && have == 0;
        if (have < b->alloc && !gang_failed) {
            have += put(ws, i, b->alloc - have, 0);
        }
        if (have < b->alloc) {
            short_of_room(ws, i, have, last);
            ok = 0;
        }
    }
    return ok;
}

hv_err hv__fl_moves(const hv__fl_ws_t *ws, hv_fl_out_t *out) {
    size_t nj = ws->in->njobs, nn = ws->in->nnodes, k = 0;
    for (size_t c = 0; c < nj * nn; c++) {
        k += ws->cur[c] != ws->mine[c];
    }
    out->moves = hv_calloc(k ? k : 1, sizeof(*out->moves));
    if (out->moves == NULL) {
        return HV_ENOMEM;
    }
    for (size_t i = 0; i < nj; i++) {
        for (size_t n = 0; n < nn; n++) {
            int64_t d = (int64_t)ws->cur[i * nn + n] - (int64_t)ws->mine[i * nn + n];
            if (d != 0) {
                out->moves[out->nmoves++] = (hv_fl_move_t){.job_id = ws->jobs[i].j->id,
                                                           .node_id = ws->in->nodes[n].id,
                                                           .delta = (int32_t)d};
            }
        }
    }
    return HV_OK;
}
