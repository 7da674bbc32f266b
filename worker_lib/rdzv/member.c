/*
 * member: see member.h. The rendezvous client lives as long as the member (the worker's
 * identity towards the head or the test store); worlds borrow it. The push watcher is started
 * once, after the first join, and keeps running across rounds: it records the newest pushed
 * generation (which the elastic layer compares with the world's at its membership checks) and
 * aborts the current world when a push says that a member failed.
 */
#include "member.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "mem.h"
#include "util.h"

/* Consecutive rounds whose data plane could not be built before a rejoin gives up. Each such
 * round means a member died between the join and the connect; the head opens another round
 * for that (and ends the job after --max-resets), so this bound only stops a loop against a
 * rendezvous that never changes. */
#define MEMBER_BUILD_TRIES 8

struct hv__member_s {
    pthread_mutex_t mu; // guards world (against the watcher's abort), pushed, fail_gen
    pthread_cond_t cv;  // signalled on every push (hv__member_wait_pushed)
    hv__rdzv_t rdzv;    // owned
    hv__world_opts_t wo;
    char bind_addr[128];
    char advertise_ip[64];
    char host_name[HV_RDZV_HOST_MAX];
    hv__world_t *world;  // owned; NULL between rounds and after a removal
    uint32_t generation; // the last round joined
    void *watch;         // the push watcher, NULL without pushes
    int elastic;         // the rendezvous pushes
    uint32_t pushed;     // newest generation pushed (mu)
    uint32_t fail_gen;   // newest generation pushed with failure = 1 (mu)
    uint32_t stop_gen;   // newest generation pushed to stop the job at this commit (mu)
    int removed;         // a join answered "removed"
    int done_reported;   // Done was sent (done_rc is its status)
    hv_err done_rc;
    hv__member_world_cb on_world;
    void *ud;
    char last_error[512]; // owner's thread
};

static void copy_str(char *dst, size_t cap, const char **field) {
    if (*field != NULL) {
        snprintf(dst, cap, "%s", *field);
        *field = dst;
    }
}

/* The watcher's callback (its own thread). */
static void member_on_push(void *ud, const hv__rdzv_push_t *p) {
    hv__member_t *m = ud;
    pthread_mutex_lock(&m->mu);
    if (p->generation > m->pushed) {
        m->pushed = p->generation;
    }
    if (p->failure && p->generation > m->fail_gen) {
        m->fail_gen = p->generation;
    }
    if (p->stop && p->generation > m->stop_gen) {
        m->stop_gen = p->generation;
    }
    if (p->failure && m->world != NULL &&
        p->generation > hv__world_assignment(m->world)->generation) {
        // A member of this world failed: fail what is in flight now rather than when a
        // socket error (or the peer timeout) reaches this rank.
        char why[HV_RDZV_REASON_MAX + 64];
        snprintf(why, sizeof(why), "membership push: round %u opened after a failure (%s)",
                 p->generation, p->reason);
        hv__world_abort(m->world, HV_ECANCELED, why);
    }
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
}

/* Installs w as the current world (aborting it at once if a failure push already doomed it). */
static void member_set_world(hv__member_t *m, hv__world_t *w) {
    pthread_mutex_lock(&m->mu);
    m->world = w;
    if (w != NULL) {
        uint32_t gen = hv__world_assignment(w)->generation;
        if (m->fail_gen > gen) {
            char why[128];
            snprintf(why, sizeof(why), "a member failed: round %u was pushed while joining %u",
                     m->fail_gen, gen);
            hv__world_abort(w, HV_ECANCELED, why);
        }
    }
    pthread_mutex_unlock(&m->mu);
    if (m->on_world != NULL) {
        m->on_world(m->ud, w);
    }
}

static void note_error(hv__member_t *m, hv_err rc, const char *what) {
    const char *detail = m->rdzv.ops->last_error ? m->rdzv.ops->last_error(m->rdzv.ctx) : "";
    snprintf(m->last_error, sizeof(m->last_error), "%s: %s%s%s", what, hv_strerror(rc),
             detail[0] ? ": " : "", detail);
}

/* World build cancel: a failure pushed for a round after the one being built dooms it. */
static int member_build_cancelled(void *ud, uint32_t generation) {
    hv__member_t *m = ud;
    pthread_mutex_lock(&m->mu);
    int doomed = m->fail_gen > generation;
    pthread_mutex_unlock(&m->mu);
    return doomed;
}

/* Data-plane errors: the round was joined but its ring could not be built. */
static int build_error(hv_err rc) {
    return rc == HV_EPEER || rc == HV_ETIMEDOUT || rc == HV_ECANCELED || rc == HV_ECLOSED ||
           rc == HV_EIO;
}

/* Joins the round after last_gen and builds its world (retrying build failures). */
static hv_err member_join(hv__member_t *m, uint32_t last_gen, hv__world_t **out) {
    for (int tries = 1;; tries++) {
        hv__world_opts_t o = m->wo;
        o.rdzv = m->rdzv;
        o.rdzv_borrowed = 1;
        o.last_generation = last_gen;
        o.cancel = member_build_cancelled;
        o.cancel_ud = m;
        hv__world_t *w = NULL;
        hv_err rc = hv__world_create(&o, &w);
        if (rc == HV_OK) {
            m->generation = hv__world_assignment(w)->generation;
            *out = w;
            return HV_OK;
        }
        if (o.joined_generation > last_gen && build_error(rc) && tries < MEMBER_BUILD_TRIES) {
            HV_LOG(HV_LOG_WARN, "member", "HV-MEMBER-REBUILD",
                   "round %u was joined but its data plane failed (%s): joining the next round",
                   o.joined_generation, hv_strerror(rc));
            last_gen = o.joined_generation;
            continue;
        }
        if (o.joined_generation > last_gen) {
            m->generation = o.joined_generation;
        }
        note_error(m, rc, o.joined_generation ? "building the data plane" : "joining the round");
        return rc;
    }
}

hv_err hv__member_create(hv__member_opts_t *o, hv__member_t **out) {
    hv__member_t *m = hv_calloc(1, sizeof(*m));
    if (m == NULL) {
        o->world.rdzv.ops->destroy(o->world.rdzv.ctx);
        return HV_ENOMEM;
    }
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->cv, NULL);
    m->rdzv = o->world.rdzv;
    m->wo = o->world;
    m->wo.rdzv = (hv__rdzv_t){0};
    copy_str(m->bind_addr, sizeof(m->bind_addr), &m->wo.bind_addr);
    copy_str(m->advertise_ip, sizeof(m->advertise_ip), &m->wo.advertise_ip);
    copy_str(m->host_name, sizeof(m->host_name), &m->wo.host_name);
    m->on_world = o->on_world;
    m->ud = o->ud;
    hv__world_t *w = NULL;
    hv_err rc = member_join(m, o->world.last_generation, &w);
    if (rc != HV_OK) {
        goto fail;
    }
    if (hv__world_assignment(w)->removed) {
        snprintf(m->last_error, sizeof(m->last_error),
                 "this worker was removed from the job before it joined a round");
        hv__world_destroy(w, 0);
        rc = HV_ESTATE;
        goto fail;
    }
    if (m->rdzv.ops->watch != NULL) {
        rc = m->rdzv.ops->watch(m->rdzv.ctx, m->generation, member_on_push, m, &m->watch);
        if (rc == HV_OK) {
            m->elastic = 1;
        } else if (rc != HV_ENOTSUP) {
            hv__world_destroy(w, 0);
            goto fail;
        }
        rc = HV_OK;
    }
    member_set_world(m, w);
    *out = m;
    return HV_OK;
fail:
    m->rdzv.ops->destroy(m->rdzv.ctx);
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    hv_free(m);
    return rc;
}

hv_err hv__member_resize(hv__member_t *m, uint32_t size, const char *reason, uint32_t *accepted) {
    if (m == NULL || m->rdzv.ops == NULL || m->rdzv.ops->resize == NULL) {
        return HV_ENOTSUP;
    }
    return m->rdzv.ops->resize(m->rdzv.ctx, size, reason, accepted);
}

hv_err hv__member_destroy(hv__member_t *m, int report_done) {
    if (m == NULL) {
        return HV_OK;
    }
    if (m->watch != NULL) {
        m->rdzv.ops->watch_stop(m->watch);
        m->watch = NULL;
    }
    hv_err rc = HV_OK;
    if (report_done && !m->done_reported && m->world != NULL && !m->removed) {
        rc = hv__member_done(m);
    }
    hv__world_t *w = m->world;
    pthread_mutex_lock(&m->mu);
    m->world = NULL;
    pthread_mutex_unlock(&m->mu);
    hv__world_destroy(w, 0);
    m->rdzv.ops->destroy(m->rdzv.ctx);
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    hv_free(m);
    return rc;
}

hv__world_t *hv__member_world(hv__member_t *m) { return m->world; }

hv__engine_t *hv__member_engine(hv__member_t *m) {
    return m->world != NULL ? hv__world_engine(m->world) : NULL;
}

const hv__rdzv_assignment_t *hv__member_assignment(hv__member_t *m) {
    return m->world != NULL ? hv__world_assignment(m->world) : NULL;
}

int hv__member_elastic(const hv__member_t *m) { return m->elastic; }

int hv__member_can_copy(const hv__member_t *m) {
    return m != NULL && m->rdzv.ops != NULL && m->rdzv.ops->put_state != NULL &&
           m->rdzv.ops->fetch_state != NULL;
}

hv_err hv__member_put_state(hv__member_t *m, uint32_t generation, uint64_t commit, const void *data,
                            size_t len) {
    if (!hv__member_can_copy(m)) {
        return HV_ENOTSUP;
    }
    return m->rdzv.ops->put_state(m->rdzv.ctx, generation, commit, data, len);
}

hv_err hv__member_fetch_state(hv__member_t *m, uint64_t commit, void **data, size_t *len) {
    if (!hv__member_can_copy(m)) {
        return HV_ENOTSUP;
    }
    return m->rdzv.ops->fetch_state(m->rdzv.ctx, commit, data, len);
}
int hv__member_removed(const hv__member_t *m) { return m->removed; }

uint32_t hv__member_pushed(hv__member_t *m) {
    pthread_mutex_lock(&m->mu);
    uint32_t g = m->pushed;
    pthread_mutex_unlock(&m->mu);
    return g;
}

int hv__member_stop_asked(hv__member_t *m, uint32_t gen, uint32_t timeout_ms) {
    if (hv__member_wait_pushed(m, gen + 1, timeout_ms) != HV_OK) {
        return 0;
    }
    pthread_mutex_lock(&m->mu);
    int asked = m->stop_gen > gen && m->stop_gen == m->pushed;
    pthread_mutex_unlock(&m->mu);
    return asked;
}

hv_err hv__member_wait_pushed(hv__member_t *m, uint32_t gen, uint32_t timeout_ms) {
    struct timespec dl = hv_realtime_in_ms(timeout_ms);
    hv_err rc = HV_OK;
    pthread_mutex_lock(&m->mu);
    while (m->pushed < gen) {
        if (pthread_cond_timedwait(&m->cv, &m->mu, &dl) == ETIMEDOUT && m->pushed < gen) {
            rc = HV_ETIMEDOUT;
            break;
        }
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

void hv__member_note_redone(hv__member_t *m, uint64_t samples) {
    if (m != NULL && m->rdzv.ops != NULL && m->rdzv.ops->note_redone != NULL && samples > 0) {
        m->rdzv.ops->note_redone(m->rdzv.ctx, samples);
    }
}

void hv__member_report(hv__member_t *m) {
    if (m != NULL && m->rdzv.ops != NULL && m->rdzv.ops->report != NULL) {
        m->rdzv.ops->report(m->rdzv.ctx);
    }
}

hv_err hv__member_rejoin(hv__member_t *m, hv__member_change_t *out) {
    hv__member_change_t ch = {.old_generation = m->generation};
    hv__world_t *old = m->world;
    if (old != NULL) {
        ch.old_size = hv__world_assignment(old)->size;
        // Which neighbours' links broke: the head's evidence that their node is gone.
        uint64_t broken[HV_RDZV_BROKEN_MAX];
        size_t nb = hv__world_broken_peers(old, broken, HV_RDZV_BROKEN_MAX);
        if (nb > 0 && m->rdzv.ops->note_broken != NULL) {
            m->rdzv.ops->note_broken(m->rdzv.ctx, broken, nb);
        }
        uint64_t dead[HV_RDZV_DEAD_MAX];
        size_t nd = hv__world_dead_peers(old, dead, HV_RDZV_DEAD_MAX);
        if (nd > 0 && m->rdzv.ops->note_dead != NULL) {
            m->rdzv.ops->note_dead(m->rdzv.ctx, dead, nd);
        }
    }
    pthread_mutex_lock(&m->mu);
    m->world = NULL;
    pthread_mutex_unlock(&m->mu);
    if (m->on_world != NULL) {
        m->on_world(m->ud, NULL);
    }
    hv__world_leave(old);
    if (m->removed) {
        return HV_ESTATE; // nothing to join any more
    }
    m->last_error[0] = '\0';
    hv__world_t *w = NULL;
    hv_err rc = member_join(m, ch.old_generation, &w);
    if (rc != HV_OK) {
        HV_LOG(HV_LOG_ERROR, "member", "HV-MEMBER-REJOIN", "leaving round %u: %s",
               ch.old_generation, m->last_error);
        return rc;
    }
    const hv__rdzv_assignment_t *a = hv__world_assignment(w);
    ch.new_generation = a->generation;
    ch.rollback = a->rollback;
    snprintf(ch.reason, sizeof(ch.reason), "%s", a->reason);
    if (a->removed) {
        m->removed = 1;
        ch.removed = 1;
        HV_LOG(HV_LOG_INFO, "member", "HV-MEMBER-REMOVED",
               "removed from the job at round %u (%s): leaving without Done", a->generation,
               a->reason);
        hv__world_destroy(w, 0);
    } else {
        ch.new_size = a->size;
        HV_LOG(HV_LOG_INFO, "member", "HV-MEMBER-ROUND",
               "round %u -> %u: rank %d of %d (was %d ranks)%s%s", ch.old_generation,
               ch.new_generation, a->rank, a->size, ch.old_size, a->reason[0] ? ": " : "",
               a->reason);
        member_set_world(m, w);
    }
    if (out != NULL) {
        *out = ch;
    }
    return HV_OK;
}

hv_err hv__member_done(hv__member_t *m) {
    if (m->done_reported) {
        return m->done_rc;
    }
    if (m->world == NULL || m->removed) {
        return HV_ESTATE;
    }
    m->done_reported = 1;
    m->done_rc = m->rdzv.ops->done(m->rdzv.ctx, m->generation);
    return m->done_rc;
}

void hv__member_abort(hv__member_t *m, hv_err why, const char *reason) {
    pthread_mutex_lock(&m->mu);
    if (m->world != NULL) {
        hv__world_abort(m->world, why, reason);
    }
    pthread_mutex_unlock(&m->mu);
}

void hv__member_last_error(hv__member_t *m, char *buf, size_t len) {
    snprintf(buf, len, "%s", m->last_error);
}
