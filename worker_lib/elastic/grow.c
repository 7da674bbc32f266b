/*
 * grow: see grow.h.
 */
#include "grow.h"

#include "hv/elastic.h"
#include "log.h"
#include "member.h"
#include "process.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
    pthread_mutex_t mu;
    hv_size_fn fn;
    void *ud;
    uint32_t asked; /* the last size asked for (0: none yet) */
    int parsed;     /* HV_GROW_SCHEDULE read (1), or found bad (-1) */
    hv_grow_step_t steps[HV_GROW_MAX_STEPS];
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
            if (hv_grow_parse(env, G.steps, HV_GROW_MAX_STEPS, &G.nsteps, err, sizeof(err)) !=
                HV_OK) {
                HV_LOG(HV_LOG_ERROR, "grow", "HV-GROW", "HV_GROW_SCHEDULE ignored: %s", err);
                G.parsed = -1;
                G.nsteps = 0;
            }
        }
    }
    uint32_t want = hv_grow_size_at(G.steps, G.nsteps, epoch);
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
