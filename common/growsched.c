/*
 * growsched: see growsched.h.
 */
#include "growsched.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

hv_err hv_grow_parse(const char *text, hv_grow_step_t *out, size_t cap, size_t *n, char *err,
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
            colon[1] > '9' || *e2 != '\0' || errno != 0 || sz == 0 || sz > HV_GROW_MAX_SIZE) {
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

uint32_t hv_grow_size_at(const hv_grow_step_t *steps, size_t n, uint64_t epoch) {
    uint32_t size = 0;
    for (size_t i = 0; i < n && steps[i].epoch <= epoch; i++) {
        size = steps[i].size;
    }
    return size;
}
