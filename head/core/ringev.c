/*
 * ringev: see ringev.h. The rule runs over a round's members in rank order; a round has at most
 * a few hundred members and a job's reports at most six per member, so the quadratic scans
 * below stay far under a millisecond and need no index.
 */
#include "ringev.h"

#include <string.h>

#include "mem.h"

void hv_ringev_fini(hv_ringev_t *ev) {
    hv_free(ev->r);
    memset(ev, 0, sizeof(*ev));
}

void hv_ringev_clear(hv_ringev_t *ev) {
    ev->n = 0;
    ev->generation = 0;
}

static int has_report(const hv_ringev_t *ev, uint64_t reporter, uint64_t subject) {
    for (size_t i = 0; i < ev->n; i++) {
        if (ev->r[i].reporter == reporter && ev->r[i].subject == subject) {
            return 1;
        }
    }
    return 0;
}

hv_err hv_ringev_note(hv_ringev_t *ev, uint32_t generation, uint64_t reporter,
                      const uint64_t *subjects, size_t n) {
    if (generation < ev->generation) {
        return HV_OK; // about a round that is history already
    }
    if (ev->n + n > ev->cap) {
        size_t cap = ev->cap ? ev->cap : 8;
        while (cap < ev->n + n) {
            cap *= 2;
        }
        hv_ringev_report_t *r = hv_realloc(ev->r, cap * sizeof(*r));
        if (r == NULL) {
            return HV_ENOMEM;
        }
        ev->r = r;
        ev->cap = cap;
    }
    if (generation > ev->generation) {
        ev->n = 0;
        ev->generation = generation;
    }
    for (size_t i = 0; i < n; i++) {
        if (!has_report(ev, reporter, subjects[i])) {
            ev->r[ev->n++] = (hv_ringev_report_t){.reporter = reporter, .subject = subjects[i]};
        }
    }
    return HV_OK;
}

static const hv_ringev_member_t *member(const hv_ringev_member_t *m, size_t n, uint64_t id) {
    for (size_t i = 0; i < n; i++) {
        if (m[i].worker_id == id) {
            return &m[i];
        }
    }
    return NULL;
}

/* A neighbour on another node named worker k (any ring: the host and cross rings of a
 * hierarchical world name theirs too). Returns the reporter, 0 when none. */
static uint64_t named_by(const hv_ringev_t *ev, const hv_ringev_member_t *m, size_t n, size_t k) {
    for (size_t i = 0; i < ev->n; i++) {
        const hv_ringev_member_t *rep = member(m, n, ev->r[i].reporter);
        if (ev->r[i].subject == m[k].worker_id && rep != NULL && rep->node_id != m[k].node_id) {
            return rep->worker_id;
        }
    }
    return 0;
}

/* Everything node could be told is in: each flat-ring neighbour of its workers on another node
 * has spoken or cannot speak. */
static int node_heard_out(const hv_ringev_member_t *m, size_t n, uint64_t node) {
    for (size_t k = 0; k < n; k++) {
        if (m[k].node_id != node) {
            continue;
        }
        const hv_ringev_member_t *nb[2] = {&m[(k + n - 1) % n], &m[(k + 1) % n]};
        for (int s = 0; s < 2; s++) {
            if (nb[s]->node_id != node && !nb[s]->spoke && !nb[s]->mute) {
                return 0;
            }
        }
    }
    return 1;
}

static int node_spoke(const hv_ringev_member_t *m, size_t n, uint64_t node) {
    for (size_t k = 0; k < n; k++) {
        if (m[k].node_id == node && m[k].spoke) {
            return 1;
        }
    }
    return 0;
}

size_t hv_ringev_decide(const hv_ringev_t *ev, const hv_ringev_member_t *m, size_t n,
                        hv_ringev_verdict_t *out, size_t cap) {
    size_t nv = 0;
    if (ev->n == 0 || n < 2) {
        return 0;
    }
    for (size_t k = 0; k < n && nv < cap; k++) {
        uint64_t node = m[k].node_id;
        int done = 0;
        for (size_t v = 0; v < nv; v++) {
            done |= out[v].node_id == node;
        }
        if (done) {
            continue;
        }
        // A named worker that ended was explained by its own exit (its agent reported it, so its
        // node is alive); one whose node is suspected already needs no second verdict.
        uint64_t by = m[k].mute ? 0 : named_by(ev, m, n, k);
        if (by == 0 || node_spoke(m, n, node) || !node_heard_out(m, n, node)) {
            continue;
        }
        out[nv++] =
            (hv_ringev_verdict_t){.node_id = node, .worker_id = m[k].worker_id, .reporter = by};
    }
    return nv;
}

size_t hv_ringev_judge(hv_ringev_t *ev, const hv_jm_job_t *j, hv_ringev_verdict_t *out,
                       size_t cap) {
    if (ev->n == 0) {
        return 0;
    }
    size_t n = 0;
    for (size_t i = 0; i < j->nw; i++) {
        if (j->w[i]->member_gen > ev->generation) {
            hv_ringev_clear(ev); // a later round closed: the reports are history
            return 0;
        }
        n += j->w[i]->member_gen == ev->generation;
    }
    hv_ringev_member_t *m = n >= 2 ? hv_calloc(n, sizeof(*m)) : NULL;
    if (m == NULL) {
        return 0;
    }
    size_t placed = 0;
    for (size_t i = 0; i < j->nw; i++) {
        const hv_jm_worker_t *w = j->w[i];
        if (w->member_gen != ev->generation || w->rank >= n || m[w->rank].worker_id != 0) {
            continue;
        }
        m[w->rank] = (hv_ringev_member_t){.worker_id = w->id,
                                          .node_id = w->node_id,
                                          .spoke = w->joined,
                                          .mute = !hv_wk_state_active(w->state) || w->removed ||
                                                  w->suspect_until != 0};
        placed++;
    }
    // Ranks that do not make 0..n-1 (never, short of a bug) decide nothing.
    size_t nv = placed == n ? hv_ringev_decide(ev, m, n, out, cap) : 0;
    hv_free(m);
    return nv;
}
