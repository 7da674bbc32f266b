/*
 * rdzv_local: an in-process rendezvous store for tests that run ranks as threads over
 * 127.0.0.1 (as gloo's tests do with a HashStore). Two kinds of store:
 *   - plain (hv__rdzv_local_store_create): rounds close when the expected number of workers
 *     joined; ranks go by requested rank, then arrival. No pushes. hv.c's single-process world
 *     uses one too.
 *   - elastic (hv__rdzv_local_store_create_elastic): a stand-in for the head's elastic
 *     rendezvous. Workers have ids; the test adds, fails and removes them; every new round is
 *     pushed to watcher threads; removed workers get a removed answer; the job can be ended.
 *     Its rules are the head's as libhv expects them (see rdzv.h), kept simple.
 * One mutex and one condition variable guard everything (joins, the KV, watchers). Not for
 * production: nothing leaves the process.
 */
#include "rdzv.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mem.h"
#include "util.h"

typedef struct local_member_s {
    int want_rank;
    int arrival;
    char addr[HV_RDZV_ADDR_MAX];
    char host[HV_RDZV_HOST_MAX];
} local_member_t;

typedef struct local_round_s {
    uint32_t generation;
    int expected; // size when the round closed
    int joined;
    int next_arrival; // arrival numbers are never reused within a round
    int closed;
    int refs;                // joiners still reading the round
    local_member_t *members; // capacity cap
    int cap;
} local_round_t;

typedef struct local_kv_s {
    struct local_kv_s *next;
    char *key; // owned
    void *val; // owned
    size_t len;
} local_kv_t;

/* ---- elastic stores ---- */

enum { W_EXPECTED = 1, W_FAILED = 2, W_REMOVED = 3 };

typedef struct local_worker_s {
    uint64_t id;
    int state;             // W_*
    uint32_t since;        // first round it was a member of (seniority); 0: none yet
    uint32_t joined_round; // the open round it joined; 0: not waiting in a round
    char addr[HV_RDZV_ADDR_MAX];
    char host[HV_RDZV_HOST_MAX];
} local_worker_t;

typedef struct local_push_s {
    uint32_t generation;
    int failure;
    char reason[HV_RDZV_REASON_MAX];
    uint64_t removed; // 0: none (tests remove one worker per round)
} local_push_t;

typedef struct local_member_copy_s {
    uint64_t id;
    char addr[HV_RDZV_ADDR_MAX];
    char host[HV_RDZV_HOST_MAX];
} local_member_copy_t;

typedef struct local_elastic_s {
    uint32_t check_every;
    local_worker_t *workers; // nworkers entries (capacity capw); never shrinks
    int nworkers, capw;
    uint32_t open_gen; // the round being gathered; 0: none
    int open_rollback;
    char open_reason[HV_RDZV_REASON_MAX];
    local_member_copy_t *closed; // the last closed round's members by rank (closed_size)
    int closed_size;
    int closed_rollback;
    char closed_reason[HV_RDZV_REASON_MAX];
    local_push_t *pushes; // every push so far, oldest first
    int npushes, capp;
    int ended;
    char end_reason[HV_RDZV_REASON_MAX];
    uint32_t done_generation;
} local_elastic_t;

struct hv__rdzv_local_store_s {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int size;            // expected members of the next round to close (plain stores)
    uint32_t generation; // last closed round
    uint64_t world_id;
    local_round_t *open; // the round being gathered, or NULL (plain stores)
    local_kv_t *kv;
    int done_count;
    uint64_t redone_max; // the most samples one note_redone reported
    local_elastic_t *el; // NULL for plain stores
};

typedef struct local_client_s {
    hv__rdzv_local_store_t *store; // borrowed
    int want_rank;
    uint64_t worker_id; // elastic stores
    char last_error[HV_RDZV_REASON_MAX];
} local_client_t;

hv_err hv__rdzv_local_store_create(int size, hv__rdzv_local_store_t **out) {
    if (size < 1) {
        return HV_EINVAL;
    }
    hv__rdzv_local_store_t *s = hv_calloc(1, sizeof(*s));
    if (s == NULL) {
        return HV_ENOMEM;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->size = size;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    s->world_id = ((uint64_t)(uintptr_t)s << 16) ^ (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec;
    *out = s;
    return HV_OK;
}

void hv__rdzv_local_store_set_size(hv__rdzv_local_store_t *s, int size) {
    pthread_mutex_lock(&s->mu);
    s->size = size;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

int hv__rdzv_local_store_done_count(hv__rdzv_local_store_t *s) {
    pthread_mutex_lock(&s->mu);
    int n = s->done_count;
    pthread_mutex_unlock(&s->mu);
    return n;
}

static void round_free(local_round_t *r) {
    if (r != NULL) {
        hv_free(r->members);
        hv_free(r);
    }
}

void hv__rdzv_local_store_destroy(hv__rdzv_local_store_t *s) {
    if (s == NULL) {
        return;
    }
    if (s->el != NULL) {
        hv_free(s->el->workers);
        hv_free(s->el->closed);
        hv_free(s->el->pushes);
        hv_free(s->el);
    }
    round_free(s->open);
    for (local_kv_t *k = s->kv, *next; k != NULL; k = next) {
        next = k->next;
        hv_free(k->key);
        hv_free(k->val);
        hv_free(k);
    }
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    hv_free(s);
}

static int member_cmp(const void *a, const void *b) {
    const local_member_t *x = a, *y = b;
    unsigned wx = (unsigned)x->want_rank, wy = (unsigned)y->want_rank; // -1 sorts last
    if (wx != wy) {
        return wx < wy ? -1 : 1;
    }
    return x->arrival - y->arrival;
}

static hv_err elastic_join(local_client_t *c, const char *my_addr, const char *my_host,
                           uint32_t last_gen, uint32_t timeout_ms, hv__rdzv_assignment_t *out);

static hv_err local_join(void *ctx, const char *my_addr, const char *my_host, uint32_t last_gen,
                         uint32_t timeout_ms, hv__rdzv_assignment_t *out) {
    local_client_t *c = ctx;
    hv__rdzv_local_store_t *s = c->store;
    if (s->el != NULL) {
        return elastic_join(c, my_addr, my_host, last_gen, timeout_ms, out);
    }
    hv_err rc = HV_OK;
    pthread_mutex_lock(&s->mu);
    if (s->open == NULL) {
        s->open = hv_calloc(1, sizeof(local_round_t));
        if (s->open == NULL) {
            rc = HV_ENOMEM;
            goto out;
        }
    }
    local_round_t *r = s->open;
    if (r->joined == r->cap) {
        int cap = r->cap ? r->cap * 2 : 8;
        local_member_t *m = hv_realloc(r->members, (size_t)cap * sizeof(*m));
        if (m == NULL) {
            rc = HV_ENOMEM;
            goto out;
        }
        r->members = m;
        r->cap = cap;
    }
    local_member_t *me = &r->members[r->joined];
    me->want_rank = c->want_rank;
    me->arrival = r->next_arrival++;
    snprintf(me->addr, sizeof(me->addr), "%s", my_addr);
    snprintf(me->host, sizeof(me->host), "%s", my_host);
    int my_arrival = me->arrival;
    r->joined++;
    r->refs++;
    struct timespec dl = hv_realtime_in_ms(timeout_ms);
    while (!r->closed) {
        if (r->joined >= s->size) {
            r->closed = 1;
            r->expected = r->joined;
            r->generation = ++s->generation;
            qsort(r->members, (size_t)r->joined, sizeof(*r->members), member_cmp);
            s->open = NULL;
            pthread_cond_broadcast(&s->cv);
            break;
        }
        if (pthread_cond_timedwait(&s->cv, &s->mu, &dl) == ETIMEDOUT && !r->closed) {
            // Leave the round: remove our entry so that a later round is not polluted.
            for (int i = 0; i < r->joined; i++) {
                if (r->members[i].arrival == my_arrival) {
                    r->members[i] = r->members[--r->joined];
                    break;
                }
            }
            r->refs--;
            rc = HV_ETIMEDOUT;
            goto out;
        }
    }
    memset(out, 0, sizeof(*out));
    out->peers = hv_calloc((size_t)r->expected, sizeof(hv__rdzv_peer_t));
    if (out->peers == NULL) {
        rc = HV_ENOMEM;
    } else {
        out->world_id = s->world_id;
        out->generation = r->generation;
        out->size = r->expected;
        for (int i = 0; i < r->expected; i++) {
            out->peers[i].rank = i;
            out->peers[i].worker_id = (uint64_t)r->members[i].arrival;
            snprintf(out->peers[i].addr, sizeof(out->peers[i].addr), "%s", r->members[i].addr);
            snprintf(out->peers[i].host, sizeof(out->peers[i].host), "%s", r->members[i].host);
            if (r->members[i].arrival == my_arrival) {
                out->rank = i;
            }
        }
        hv__rdzv_fill_topology(out);
    }
    if (--r->refs == 0) {
        round_free(r);
    }
out:
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static hv_err local_done(void *ctx, uint32_t generation) {
    local_client_t *c = ctx;
    pthread_mutex_lock(&c->store->mu);
    c->store->done_count++;
    if (c->store->el != NULL) {
        c->store->el->done_generation = generation;
    }
    pthread_mutex_unlock(&c->store->mu);
    return HV_OK;
}

static local_kv_t *kv_find(hv__rdzv_local_store_t *s, const char *key) {
    for (local_kv_t *k = s->kv; k != NULL; k = k->next) {
        if (strcmp(k->key, key) == 0) {
            return k;
        }
    }
    return NULL;
}

static hv_err local_kv_put(void *ctx, const char *key, const void *value, size_t len) {
    hv__rdzv_local_store_t *s = ((local_client_t *)ctx)->store;
    void *copy = hv_malloc(len);
    if (copy == NULL) {
        return HV_ENOMEM;
    }
    memcpy(copy, value, len);
    pthread_mutex_lock(&s->mu);
    local_kv_t *k = kv_find(s, key);
    if (k == NULL) {
        k = hv_calloc(1, sizeof(*k));
        char *kd = hv_strdup(key);
        if (k == NULL || kd == NULL) {
            hv_free(k);
            hv_free(kd);
            hv_free(copy);
            pthread_mutex_unlock(&s->mu);
            return HV_ENOMEM;
        }
        k->key = kd;
        k->next = s->kv;
        s->kv = k;
    }
    hv_free(k->val);
    k->val = copy;
    k->len = len;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return HV_OK;
}

static hv_err local_kv_get(void *ctx, const char *key, uint32_t wait_ms, void **value,
                           size_t *len) {
    hv__rdzv_local_store_t *s = ((local_client_t *)ctx)->store;
    struct timespec dl = hv_realtime_in_ms(wait_ms);
    hv_err rc = HV_ENOTFOUND;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        local_kv_t *k = kv_find(s, key);
        if (k != NULL) {
            void *copy = hv_malloc(k->len);
            if (copy == NULL) {
                rc = HV_ENOMEM;
                break;
            }
            memcpy(copy, k->val, k->len);
            *value = copy;
            *len = k->len;
            rc = HV_OK;
            break;
        }
        if (pthread_cond_timedwait(&s->cv, &s->mu, &dl) == ETIMEDOUT) {
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* ---- elastic stores: rounds, workers, pushes ------------------------------------------------ */

static local_worker_t *worker_find(local_elastic_t *el, uint64_t id) {
    for (int i = 0; i < el->nworkers; i++) {
        if (el->workers[i].id == id) {
            return &el->workers[i];
        }
    }
    return NULL;
}

/* Opens the next round and records its push (the caller holds the lock; no round is open). */
static void round_open(hv__rdzv_local_store_t *s, int failure, const char *reason,
                       uint64_t removed) {
    local_elastic_t *el = s->el;
    el->open_gen = s->generation + 1;
    el->open_rollback = failure;
    snprintf(el->open_reason, sizeof(el->open_reason), "%s", reason);
    if (el->npushes == el->capp) {
        int cap = el->capp ? el->capp * 2 : 8;
        local_push_t *p = hv_realloc(el->pushes, (size_t)cap * sizeof(*p));
        if (p == NULL) {
            return; // the watchers miss this push; the data plane still fails (tests only)
        }
        el->pushes = p;
        el->capp = cap;
    }
    local_push_t *p = &el->pushes[el->npushes++];
    p->generation = el->open_gen;
    p->failure = failure;
    p->removed = removed;
    snprintf(p->reason, sizeof(p->reason), "%s", reason);
    pthread_cond_broadcast(&s->cv);
}

static int seniority_cmp(const void *a, const void *b) {
    const local_worker_t *x = *(local_worker_t *const *)a, *y = *(local_worker_t *const *)b;
    uint32_t sx = x->since ? x->since : UINT32_MAX, sy = y->since ? y->since : UINT32_MAX;
    if (sx != sy) {
        return sx < sy ? -1 : 1;
    }
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Closes the open round when every expected worker joined it (the caller holds the lock). */
static void round_maybe_close(hv__rdzv_local_store_t *s) {
    local_elastic_t *el = s->el;
    if (el->open_gen == 0) {
        return;
    }
    int n = 0;
    for (int i = 0; i < el->nworkers; i++) {
        if (el->workers[i].state == W_EXPECTED) {
            if (el->workers[i].joined_round != el->open_gen) {
                return;
            }
            n++;
        }
    }
    if (n == 0) {
        return;
    }
    local_worker_t **ms = hv_calloc((size_t)n, sizeof(*ms));
    local_member_copy_t *cp = hv_calloc((size_t)n, sizeof(*cp));
    if (ms == NULL || cp == NULL) {
        hv_free(ms);
        hv_free(cp);
        return; // joiners time out (tests only)
    }
    n = 0;
    for (int i = 0; i < el->nworkers; i++) {
        if (el->workers[i].state == W_EXPECTED) {
            ms[n++] = &el->workers[i];
        }
    }
    // Oldest worker first, as the head does: rank 0 always holds the freshest committed state.
    qsort(ms, (size_t)n, sizeof(*ms), seniority_cmp);
    for (int r = 0; r < n; r++) {
        if (ms[r]->since == 0) {
            ms[r]->since = el->open_gen;
        }
        ms[r]->joined_round = 0;
        cp[r].id = ms[r]->id;
        memcpy(cp[r].addr, ms[r]->addr, sizeof(cp[r].addr));
        memcpy(cp[r].host, ms[r]->host, sizeof(cp[r].host));
    }
    hv_free(ms);
    hv_free(el->closed);
    el->closed = cp;
    el->closed_size = n;
    el->closed_rollback = el->open_rollback;
    memcpy(el->closed_reason, el->open_reason, sizeof(el->closed_reason));
    s->generation = el->open_gen;
    el->open_gen = 0;
    pthread_cond_broadcast(&s->cv);
}

/* Fills out from the last closed round for worker id; HV_ENOTFOUND when it is no member. */
static hv_err round_assignment(hv__rdzv_local_store_t *s, uint64_t id, hv__rdzv_assignment_t *out) {
    local_elastic_t *el = s->el;
    int me = -1;
    for (int r = 0; r < el->closed_size; r++) {
        if (el->closed[r].id == id) {
            me = r;
        }
    }
    if (me < 0) {
        return HV_ENOTFOUND;
    }
    hv__rdzv_assignment_t a = {0};
    a.peers = hv_calloc((size_t)el->closed_size, sizeof(hv__rdzv_peer_t));
    if (a.peers == NULL) {
        return HV_ENOMEM;
    }
    a.world_id = s->world_id;
    a.generation = s->generation;
    a.rank = me;
    a.size = el->closed_size;
    a.check_every = el->check_every;
    a.rollback = el->closed_rollback;
    memcpy(a.reason, el->closed_reason, sizeof(a.reason));
    for (int r = 0; r < el->closed_size; r++) {
        a.peers[r].rank = r;
        a.peers[r].worker_id = el->closed[r].id;
        memcpy(a.peers[r].addr, el->closed[r].addr, sizeof(a.peers[r].addr));
        memcpy(a.peers[r].host, el->closed[r].host, sizeof(a.peers[r].host));
    }
    hv__rdzv_fill_topology(&a);
    *out = a;
    return HV_OK;
}

static hv_err elastic_join(local_client_t *c, const char *my_addr, const char *my_host,
                           uint32_t last_gen, uint32_t timeout_ms, hv__rdzv_assignment_t *out) {
    hv__rdzv_local_store_t *s = c->store;
    local_elastic_t *el = s->el;
    struct timespec dl = hv_realtime_in_ms(timeout_ms);
    hv_err rc = HV_OK;
    uint32_t my_round = 0;
    c->last_error[0] = '\0';
    pthread_mutex_lock(&s->mu);
    for (;;) {
        local_worker_t *w = worker_find(el, c->worker_id);
        if (el->ended) {
            snprintf(c->last_error, sizeof(c->last_error), "%s", el->end_reason);
            rc = HV_ESTATE;
            break;
        }
        if (w == NULL || w->state == W_FAILED) {
            snprintf(c->last_error, sizeof(c->last_error), "worker %llu is not part of the job",
                     (unsigned long long)c->worker_id);
            rc = HV_ENOTFOUND;
            break;
        }
        if (w->state == W_REMOVED) {
            w->joined_round = 0;
            memset(out, 0, sizeof(*out));
            out->world_id = s->world_id;
            out->generation = el->open_gen ? el->open_gen : s->generation;
            out->removed = 1;
            snprintf(out->reason, sizeof(out->reason), "worker %llu removed (node drained)",
                     (unsigned long long)c->worker_id);
            break;
        }
        if (my_round == 0) {
            if (el->open_gen == 0) {
                // A member of the current round joins again: it left its world, which the head
                // treats as a failure of that world.
                char why[HV_RDZV_REASON_MAX];
                snprintf(why, sizeof(why), "worker %llu left generation %u",
                         (unsigned long long)c->worker_id, last_gen);
                round_open(s, 1, why, 0);
            }
            my_round = el->open_gen;
            w->joined_round = my_round;
            snprintf(w->addr, sizeof(w->addr), "%s", my_addr);
            snprintf(w->host, sizeof(w->host), "%s", my_host);
            round_maybe_close(s);
        }
        if (s->generation >= my_round) {
            rc = round_assignment(s, c->worker_id, out);
            break;
        }
        if (pthread_cond_timedwait(&s->cv, &s->mu, &dl) == ETIMEDOUT && s->generation < my_round) {
            w = worker_find(el, c->worker_id);
            if (w != NULL) {
                w->joined_round = 0;
            }
            snprintf(c->last_error, sizeof(c->last_error), "round %u did not close in %u ms",
                     my_round, timeout_ms);
            rc = HV_ETIMEDOUT;
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

hv_err hv__rdzv_local_store_create_elastic(uint32_t check_every, hv__rdzv_local_store_t **out) {
    hv__rdzv_local_store_t *s = NULL;
    hv_err rc = hv__rdzv_local_store_create(1, &s);
    if (rc != HV_OK) {
        return rc;
    }
    s->el = hv_calloc(1, sizeof(*s->el));
    if (s->el == NULL) {
        hv__rdzv_local_store_destroy(s);
        return HV_ENOMEM;
    }
    s->el->check_every = check_every;
    s->el->open_gen = 1; // the first round gathers the workers added before they join
    snprintf(s->el->open_reason, sizeof(s->el->open_reason), "job started");
    *out = s;
    return HV_OK;
}

void hv__rdzv_local_store_add_worker(hv__rdzv_local_store_t *s, uint64_t worker_id) {
    pthread_mutex_lock(&s->mu);
    local_elastic_t *el = s->el;
    local_worker_t *w = worker_find(el, worker_id);
    if (w == NULL && el->nworkers == el->capw) {
        int cap = el->capw ? el->capw * 2 : 8;
        local_worker_t *ws = hv_realloc(el->workers, (size_t)cap * sizeof(*ws));
        if (ws != NULL) {
            el->workers = ws;
            el->capw = cap;
        }
    }
    if (w == NULL && el->nworkers < el->capw) {
        w = &el->workers[el->nworkers++];
        memset(w, 0, sizeof(*w));
        w->id = worker_id;
    }
    if (w != NULL) {
        w->state = W_EXPECTED;
        if (el->open_gen == 0) {
            char why[HV_RDZV_REASON_MAX];
            snprintf(why, sizeof(why), "worker %llu added", (unsigned long long)worker_id);
            round_open(s, 0, why, 0);
        }
    }
    pthread_mutex_unlock(&s->mu);
}

void hv__rdzv_local_store_fail_worker(hv__rdzv_local_store_t *s, uint64_t worker_id,
                                      const char *reason) {
    pthread_mutex_lock(&s->mu);
    local_elastic_t *el = s->el;
    local_worker_t *w = worker_find(el, worker_id);
    if (w != NULL && w->state != W_FAILED) {
        w->state = W_FAILED;
        w->joined_round = 0;
        if (el->open_gen == 0) {
            round_open(s, 1, reason ? reason : "worker failed", 0);
        } else {
            el->open_rollback = 1;
            round_maybe_close(s);
        }
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void hv__rdzv_local_store_remove_worker(hv__rdzv_local_store_t *s, uint64_t worker_id) {
    pthread_mutex_lock(&s->mu);
    local_elastic_t *el = s->el;
    local_worker_t *w = worker_find(el, worker_id);
    if (w != NULL && w->state == W_EXPECTED) {
        w->state = W_REMOVED;
        if (el->open_gen == 0) {
            char why[HV_RDZV_REASON_MAX];
            snprintf(why, sizeof(why), "worker %llu removed: node drained",
                     (unsigned long long)worker_id);
            round_open(s, 0, why, worker_id);
        } else {
            round_maybe_close(s);
        }
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void hv__rdzv_local_store_end(hv__rdzv_local_store_t *s, const char *reason) {
    pthread_mutex_lock(&s->mu);
    s->el->ended = 1;
    snprintf(s->el->end_reason, sizeof(s->el->end_reason), "%s", reason ? reason : "job ended");
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

uint32_t hv__rdzv_local_store_generation(hv__rdzv_local_store_t *s) {
    pthread_mutex_lock(&s->mu);
    uint32_t g = s->generation;
    pthread_mutex_unlock(&s->mu);
    return g;
}

hv_err hv__rdzv_local_store_wait_generation(hv__rdzv_local_store_t *s, uint32_t generation,
                                            uint32_t timeout_ms) {
    struct timespec dl = hv_realtime_in_ms(timeout_ms);
    hv_err rc = HV_OK;
    pthread_mutex_lock(&s->mu);
    while (s->generation < generation) {
        if (pthread_cond_timedwait(&s->cv, &s->mu, &dl) == ETIMEDOUT &&
            s->generation < generation) {
            rc = HV_ETIMEDOUT;
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

uint32_t hv__rdzv_local_store_done_generation(hv__rdzv_local_store_t *s) {
    pthread_mutex_lock(&s->mu);
    uint32_t g = s->el != NULL ? s->el->done_generation : 0;
    pthread_mutex_unlock(&s->mu);
    return g;
}

/* ---- elastic stores: the push watcher -------------------------------------------------------- */

typedef struct local_watch_s {
    hv__rdzv_local_store_t *store; // borrowed
    hv__rdzv_push_cb cb;
    void *ud;
    pthread_t thread;
    int stop;           // under the store's lock
    uint32_t delivered; // newest generation delivered (watcher thread only)
} local_watch_t;

/* Delivers every push newer than the last one delivered, in order, without holding the lock
 * during the callback (it may abort a world, which takes other locks). */
static void *local_watch_main(void *arg) {
    local_watch_t *w = arg;
    hv__rdzv_local_store_t *s = w->store;
    pthread_mutex_lock(&s->mu);
    while (!w->stop) {
        local_push_t p = {0};
        int found = 0;
        for (int i = 0; i < s->el->npushes && !s->el->ended; i++) {
            if (s->el->pushes[i].generation > w->delivered) {
                p = s->el->pushes[i];
                found = 1;
                break;
            }
        }
        if (!found) {
            pthread_cond_wait(&s->cv, &s->mu);
            continue;
        }
        pthread_mutex_unlock(&s->mu);
        w->delivered = p.generation;
        hv__rdzv_push_t push = {.generation = p.generation,
                                .failure = p.failure,
                                .reason = p.reason,
                                .removed = p.removed ? &p.removed : NULL,
                                .n_removed = p.removed ? 1 : 0};
        w->cb(w->ud, &push);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static hv_err local_watch(void *ctx, uint32_t generation, hv__rdzv_push_cb cb, void *ud,
                          void **out) {
    local_client_t *c = ctx;
    if (c->store->el == NULL) {
        return HV_ENOTSUP; // plain stores have a fixed membership
    }
    local_watch_t *w = hv_calloc(1, sizeof(*w));
    if (w == NULL) {
        return HV_ENOMEM;
    }
    w->store = c->store;
    w->cb = cb;
    w->ud = ud;
    w->delivered = generation;
    if (pthread_create(&w->thread, NULL, local_watch_main, w) != 0) {
        hv_free(w);
        return HV_ENOMEM;
    }
    *out = w;
    return HV_OK;
}

static void local_watch_stop(void *watcher) {
    local_watch_t *w = watcher;
    if (w == NULL) {
        return;
    }
    pthread_mutex_lock(&w->store->mu);
    w->stop = 1;
    pthread_cond_broadcast(&w->store->cv);
    pthread_mutex_unlock(&w->store->mu);
    pthread_join(w->thread, NULL);
    hv_free(w);
}

static const char *local_last_error(void *ctx) { return ((local_client_t *)ctx)->last_error; }

static void local_note_redone(void *ctx, uint64_t samples) {
    hv__rdzv_local_store_t *s = ((local_client_t *)ctx)->store;
    pthread_mutex_lock(&s->mu);
    if (samples > s->redone_max) {
        s->redone_max = samples;
    }
    pthread_mutex_unlock(&s->mu);
}

uint64_t hv__rdzv_local_store_redone(hv__rdzv_local_store_t *s) {
    pthread_mutex_lock(&s->mu);
    uint64_t n = s->redone_max;
    pthread_mutex_unlock(&s->mu);
    return n;
}

static void local_destroy(void *ctx) { hv_free(ctx); }

static const hv__rdzv_ops_t local_ops = {
    .name = "local",
    .join = local_join,
    .done = local_done,
    .kv_put = local_kv_put,
    .kv_get = local_kv_get,
    .watch = local_watch,
    .watch_stop = local_watch_stop,
    .note_redone = local_note_redone,
    .last_error = local_last_error,
    .destroy = local_destroy,
};

hv_err hv__rdzv_local_client(hv__rdzv_local_store_t *s, int want_rank, hv__rdzv_t *out) {
    local_client_t *c = hv_calloc(1, sizeof(*c));
    if (c == NULL) {
        return HV_ENOMEM;
    }
    c->store = s;
    c->want_rank = want_rank;
    out->ops = &local_ops;
    out->ctx = c;
    return HV_OK;
}

hv_err hv__rdzv_local_client_worker(hv__rdzv_local_store_t *s, uint64_t worker_id,
                                    hv__rdzv_t *out) {
    if (s->el == NULL) {
        return HV_EINVAL;
    }
    hv_err rc = hv__rdzv_local_client(s, -1, out);
    if (rc == HV_OK) {
        ((local_client_t *)out->ctx)->worker_id = worker_id;
    }
    return rc;
}
