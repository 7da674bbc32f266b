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

static const hv_ringev_report_t *find(const hv_ringev_t *ev, uint64_t reporter, uint64_t subject,
                                      unsigned how) {
    for (size_t i = 0; i < ev->n; i++) {
        const hv_ringev_report_t *r = &ev->r[i];
        if (r->reporter == reporter && r->subject == subject && r->how == how) {
            return r;
        }
    }
    return NULL;
}

/* Room for n more reports of round generation: 0 when they are about an older round than the one
 * held (dropped), 1 when there is room (a newer round replaced what was held), -1 out of memory
 * (ev unchanged). */
static int prepare(hv_ringev_t *ev, uint32_t generation, size_t n) {
    if (generation < ev->generation) {
        return 0; // about a round that is history already
    }
    if (ev->n + n > ev->cap) {
        size_t cap = ev->cap ? ev->cap : 8;
        while (cap < ev->n + n) {
            cap *= 2;
        }
        hv_ringev_report_t *r = hv_realloc(ev->r, cap * sizeof(*r));
        if (r == NULL) {
            return -1;
        }
        ev->r = r;
        ev->cap = cap;
    }
    if (generation > ev->generation) {
        ev->n = 0;
        ev->generation = generation;
    }
    return 1;
}

hv_err hv_ringev_note(hv_ringev_t *ev, uint32_t generation, uint64_t reporter,
                      const uint64_t *subjects, size_t n) {
    int p = prepare(ev, generation, n);
    if (p <= 0) {
        return p < 0 ? HV_ENOMEM : HV_OK;
    }
    for (size_t i = 0; i < n; i++) {
        if (find(ev, reporter, subjects[i], HV_RINGEV_BROKEN) == NULL) {
            ev->r[ev->n++] = (hv_ringev_report_t){
                .reporter = reporter, .subject = subjects[i], .how = HV_RINGEV_BROKEN};
        }
    }
    return HV_OK;
}

hv_err hv_ringev_note_silent(hv_ringev_t *ev, uint32_t generation, uint64_t reporter,
                             uint64_t subject, unsigned how, uint32_t silent_ms) {
    if (how != HV_RINGEV_HEAR && how != HV_RINGEV_ACK) {
        return HV_OK;
    }
    int p = prepare(ev, generation, 1);
    if (p <= 0) {
        return p < 0 ? HV_ENOMEM : HV_OK;
    }
    if (find(ev, reporter, subject, how) == NULL) {
        ev->r[ev->n++] = (hv_ringev_report_t){
            .reporter = reporter, .subject = subject, .how = how, .silent_ms = silent_ms};
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
        if (ev->r[i].how == HV_RINGEV_BROKEN && ev->r[i].subject == m[k].worker_id && rep != NULL &&
            rep->node_id != m[k].node_id) {
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

/* A worker of node re-joined, or reported something itself: the node reaches the head. */
static int node_spoke(const hv_ringev_t *ev, const hv_ringev_member_t *m, size_t n, uint64_t node) {
    for (size_t k = 0; k < n; k++) {
        if (m[k].node_id == node && m[k].spoke) {
            return 1;
        }
    }
    for (size_t i = 0; i < ev->n; i++) {
        const hv_ringev_member_t *rep = member(m, n, ev->r[i].reporter);
        if (rep != NULL && rep->node_id == node) {
            return 1;
        }
    }
    return 0;
}

/* Neighbour nb of worker k has said all it can about k in its own way (how): it reported k
 * silent so, or it re-joined naming k broken, or it cannot speak. */
static int watched_out(const hv_ringev_t *ev, const hv_ringev_member_t *nb,
                       const hv_ringev_member_t *k, unsigned how) {
    return nb->mute || find(ev, nb->worker_id, k->worker_id, how) != NULL ||
           (nb->spoke && find(ev, nb->worker_id, k->worker_id, HV_RINGEV_BROKEN) != NULL);
}

/* The silence rule (ringev.h) for node: 1 when it is met, with *ms the shortest silence reported
 * and *rep a reporter. */
static int node_silent(const hv_ringev_t *ev, const hv_ringev_member_t *m, size_t n, uint64_t node,
                       uint32_t *ms, uint64_t *rep) {
    for (size_t k = 0; k < n; k++) {
        if (m[k].node_id != node || m[k].mute) {
            continue;
        }
        const hv_ringev_member_t *left = &m[(k + n - 1) % n], *right = &m[(k + 1) % n];
        if ((left->node_id != node && !watched_out(ev, left, &m[k], HV_RINGEV_HEAR)) ||
            (right->node_id != node && !watched_out(ev, right, &m[k], HV_RINGEV_ACK))) {
            return 0;
        }
    }
    int any = 0;
    uint32_t best = UINT32_MAX;
    for (size_t i = 0; i < ev->n; i++) {
        const hv_ringev_report_t *r = &ev->r[i];
        const hv_ringev_member_t *by = member(m, n, r->reporter), *sub = member(m, n, r->subject);
        if (r->how != HV_RINGEV_BROKEN && by != NULL && sub != NULL && sub->node_id == node &&
            by->node_id != node && !sub->mute) {
            if (!any) {
                *rep = r->reporter;
            }
            any = 1;
            best = r->silent_ms < best ? r->silent_ms : best;
        }
    }
    *ms = best;
    return any;
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
        if (m[k].mute || node_spoke(ev, m, n, node)) {
            continue;
        }
        uint64_t by = named_by(ev, m, n, k), silent_by = 0;
        uint32_t ms = 0;
        if (by != 0 && node_heard_out(m, n, node)) {
            out[nv++] =
                (hv_ringev_verdict_t){.node_id = node, .worker_id = m[k].worker_id, .reporter = by};
        } else if (node_silent(ev, m, n, node, &ms, &silent_by)) {
            out[nv++] = (hv_ringev_verdict_t){.node_id = node,
                                              .worker_id = m[k].worker_id,
                                              .reporter = silent_by,
                                              .silent = 1,
                                              .silent_ms = ms};
        }
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

hv_jm_worker_t *hv_ringev_dead(const hv_jm_job_t *j, const hv_jm_worker_t *reporter,
                               uint32_t last_gen, uint64_t subject, const uint64_t *machine,
                               size_t n_machine) {
    if (reporter == NULL || last_gen == 0 || !hv_wk_state_active(reporter->state) ||
        reporter->member_gen != last_gen || subject == reporter->id) {
        return NULL;
    }
    hv_jm_worker_t *s = NULL;
    uint32_t n = 0; // members of round last_gen
    for (size_t i = 0; i < j->nw; i++) {
        hv_jm_worker_t *w = j->w[i];
        if (w->member_gen > last_gen) {
            return NULL; // a later round closed: last_gen is history
        }
        n += w->member_gen == last_gen;
        if (w->id == subject) {
            s = w;
        }
    }
    if (s == NULL || !hv_wk_state_active(s->state) || s->member_gen != last_gen || s->done ||
        s->node_id == 0 || n < 2 || s->rank >= n || reporter->rank >= n) {
        return NULL;
    }
    int here = s->node_id == reporter->node_id;
    for (size_t i = 0; i < n_machine && !here; i++) {
        here = machine[i] == s->node_id;
    }
    if (!here) {
        return NULL;
    }
    uint32_t left = (reporter->rank + n - 1) % n, right = (reporter->rank + 1) % n;
    return s->rank == left || s->rank == right ? s : NULL;
}
