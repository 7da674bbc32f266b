/*
 * rdzv_local: an in-process rendezvous store for tests that run ranks as threads over
 * 127.0.0.1 (as gloo's tests do with a HashStore). Rounds close when the expected number of
 * workers joined; ranks go by requested rank, then arrival. One mutex guards everything.
 * Not for production: nothing leaves the process.
 */
#include "rdzv.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mem.h"

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

struct hv__rdzv_local_store_s {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int size;            // expected members of the next round to close
    uint32_t generation; // last closed round
    uint64_t world_id;
    local_round_t *open; // the round being gathered, or NULL
    local_kv_t *kv;
    int done_count;
};

typedef struct local_client_s {
    hv__rdzv_local_store_t *store; // borrowed
    int want_rank;
} local_client_t;

static void deadline_after(struct timespec *ts, uint32_t ms) {
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

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

static hv_err local_join(void *ctx, const char *my_addr, const char *my_host, uint32_t last_gen,
                         uint32_t timeout_ms, hv__rdzv_assignment_t *out) {
    (void)last_gen;
    local_client_t *c = ctx;
    hv__rdzv_local_store_t *s = c->store;
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
    struct timespec dl;
    deadline_after(&dl, timeout_ms);
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

static hv_err local_done(void *ctx) {
    local_client_t *c = ctx;
    pthread_mutex_lock(&c->store->mu);
    c->store->done_count++;
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
    struct timespec dl;
    deadline_after(&dl, wait_ms);
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

static void local_destroy(void *ctx) { hv_free(ctx); }

static const hv__rdzv_ops_t local_ops = {
    .name = "local",
    .join = local_join,
    .done = local_done,
    .kv_put = local_kv_put,
    .kv_get = local_kv_get,
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
