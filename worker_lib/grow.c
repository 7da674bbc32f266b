/*
 * grow: see grow.h.
 */
#include "grow.h"

#include "hv/elastic.h"
#include "log.h"
#include "member.h"
#include "process.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

hv_err hv__grow_parse(const char *text, hv__grow_step_t *out, size_t cap, size_t *n, char *err,
                      size_t errlen) {
    *n = 0;
    if (text == NULL || text[0] == '\0') {
        snprintf(err, errlen, "empty schedule: want EPOCH:SIZE[,EPOCH:SIZE...], e.g. 0:2,30:4");
        return HV_EINVAL;
    }
    const char *p = text;
    for (size_t i = 1;; i++) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char step[64];
        if (len == 0 || len >= sizeof(step)) {
            snprintf(err, errlen, "step %zu: empty or too long; want EPOCH:SIZE", i);
            return HV_EINVAL;
        }
        memcpy(step, p, len);
        step[len] = '\0';
        char *colon = strchr(step, ':'), *e1 = NULL, *e2 = NULL;
        errno = 0;
        unsigned long long ep = colon ? strtoull(step, &e1, 10) : 0;
        unsigned long sz = colon ? strtoul(colon + 1, &e2, 10) : 0;
        if (colon == NULL || e1 != colon || step[0] < '0' || step[0] > '9' || colon[1] < '0' ||
            colon[1] > '9' || *e2 != '\0' || errno != 0 || sz == 0 || sz > 1000000) {
            snprintf(err, errlen, "step %zu '%s': want EPOCH:SIZE with SIZE >= 1 (e.g. 30:4)", i,
                     step);
            return HV_EINVAL;
        }
        if (*n > 0 && ep <= out[*n - 1].epoch) {
            snprintf(err, errlen, "step %zu '%s': epochs must increase (after epoch %llu)", i, step,
                     (unsigned long long)out[*n - 1].epoch);
            return HV_EINVAL;
        }
        if (*n == cap) {
            snprintf(err, errlen, "more than %zu steps", cap);
            return HV_EINVAL;
        }
        out[*n].epoch = ep;
        out[*n].size = (uint32_t)sz;
        (*n)++;
        if (end == NULL) {
            return HV_OK;
        }
        p = end + 1;
    }
}

uint32_t hv__grow_size_at(const hv__grow_step_t *steps, size_t n, uint64_t epoch) {
    uint32_t size = 0;
    for (size_t i = 0; i < n && steps[i].epoch <= epoch; i++) {
        size = steps[i].size;
    }
    return size;
}

static struct {
    pthread_mutex_t mu;
    hv_size_fn fn;
    void *ud;
    uint32_t asked; /* the last size asked for (0: none yet) */
    int parsed;     /* HV_GROW_SCHEDULE read (1), or found bad (-1) */
    hv__grow_step_t steps[HV_GROW_MAX_STEPS];
    size_t nsteps;
} G = {.mu = PTHREAD_MUTEX_INITIALIZER};

hv_err hv_set_size_callback(hv_size_fn fn, void *ud) {
    pthread_mutex_lock(&G.mu);
    G.fn = fn;
    G.ud = ud;
    pthread_mutex_unlock(&G.mu);
    return HV_OK;
}

hv_err hv_request_size(uint32_t size, const char *reason, uint32_t *accepted) {
    if (size == 0) {
        return HV_EINVAL;
    }
    hv__member_t *m = hv__process_member();
    if (m == NULL) {
        return HV_ESTATE;
    }
    uint32_t got = 0;
    hv_err rc = hv__member_resize(m, size, reason, &got);
    if (rc == HV_OK) {
        HV_LOG(HV_LOG_NOTICE, "grow", "HV-GROW",
               "asked the head for %u workers (%s): it aims for %u", size,
               reason ? reason : "program", got);
        if (accepted != NULL) {
            *accepted = got;
        }
    } else {
        HV_LOG(HV_LOG_WARN, "grow", "HV-GROW", "asking the head for %u workers failed: %s", size,
               hv_strerror(rc));
    }
    return rc;
}

void hv__grow_epoch(uint64_t epoch) {
    if (hv_rank() != 0) {
        return;
    }
    pthread_mutex_lock(&G.mu);
    if (G.parsed == 0) {
        const char *env = getenv("HV_GROW_SCHEDULE");
        G.parsed = 1;
        if (env != NULL && env[0] != '\0') {
            char err[200];
            if (hv__grow_parse(env, G.steps, HV_GROW_MAX_STEPS, &G.nsteps, err, sizeof(err)) !=
                HV_OK) {
                HV_LOG(HV_LOG_ERROR, "grow", "HV-GROW", "HV_GROW_SCHEDULE ignored: %s", err);
                G.parsed = -1;
                G.nsteps = 0;
            }
        }
    }
    uint32_t want = hv__grow_size_at(G.steps, G.nsteps, epoch);
    const char *why = "growth schedule";
    if (G.fn != NULL) {
        uint32_t f = G.fn(epoch, G.ud);
        if (f != 0) {
            want = f;
            why = "size callback";
        }
    }
    int ask = want != 0 && want != G.asked;
    if (ask) {
        G.asked = want;
    }
    pthread_mutex_unlock(&G.mu);
    if (ask) {
        char reason[96];
        snprintf(reason, sizeof(reason), "epoch %llu, %s", (unsigned long long)epoch, why);
        (void)hv_request_size(want, reason, NULL);
    }
}
