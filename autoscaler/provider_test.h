/*
 * provider_test.h: what the providers' tests share: a recorder of provider events and a lookup in
 * it. Header-only, for tests.
 */
#ifndef HV_AUTOSCALER_PROVIDER_TEST_H
#define HV_AUTOSCALER_PROVIDER_TEST_H

#include <stdio.h>

#include "provider.h"

#define REC_MAX 32

/* The events a provider reported, in order. */
typedef struct rec_s {
    int n;
    hv_prov_event ev[REC_MAX];
    uint64_t inst[REC_MAX];
    hv_prov_cause cause[REC_MAX];
    char why[REC_MAX][300];
} rec_t;

/* An hv_prov_event_cb that appends to the rec_t in ud. */
static inline void rec_event(hv_provider_t *p, hv_prov_event ev, uint64_t instance,
                             hv_prov_cause cause, const char *why, void *ud) {
    (void)p;
    rec_t *r = ud;
    if (r->n < REC_MAX) {
        r->ev[r->n] = ev;
        r->inst[r->n] = instance;
        r->cause[r->n] = cause;
        snprintf(r->why[r->n], sizeof(r->why[0]), "%s", why);
        r->n++;
    }
}

/* Index of the first event ev of instance, or -1. */
static inline int rec_find(const rec_t *r, hv_prov_event ev, uint64_t instance) {
    for (int i = 0; i < r->n; i++) {
        if (r->ev[i] == ev && r->inst[i] == instance) {
            return i;
        }
    }
    return -1;
}

#endif
