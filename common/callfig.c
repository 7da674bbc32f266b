/* callfig: see callfig.h. */
#include "callfig.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CALLFIG_MAGIC "hv-callfig"
#define CALLFIG_VERSION 1

/* 1, 2, 5 µs ... 5 s, 10 s: HV_CALLFIG_BUCKETS - 1 bounds, in ns. */
static const uint64_t callfig_bounds[HV_CALLFIG_BUCKETS - 1] = {
    1000ull,       2000ull,       5000ull,       10000ull,      20000ull,     50000ull,
    100000ull,     200000ull,     500000ull,     1000000ull,    2000000ull,   5000000ull,
    10000000ull,   20000000ull,   50000000ull,   100000000ull,  200000000ull, 500000000ull,
    1000000000ull, 2000000000ull, 5000000000ull, 10000000000ull};

uint64_t hv_callfig_bound_ns(size_t i) {
    return i < HV_CALLFIG_BUCKETS - 1 ? callfig_bounds[i] : UINT64_MAX;
}

static void add_sat(uint64_t *t, uint64_t v) { *t = *t > UINT64_MAX - v ? UINT64_MAX : *t + v; }

void hv_callfig_count(hv_callfig_t *f, int ok, uint64_t ns, uint64_t in, uint64_t out) {
    size_t i = 0;
    while (i < HV_CALLFIG_BUCKETS - 1 && ns > callfig_bounds[i]) {
        i++;
    }
    add_sat(&f->buckets[i], 1);
    add_sat(ok ? &f->ok : &f->error, 1);
    add_sat(&f->bytes_in, in);
    add_sat(&f->bytes_out, ok ? out : 0);
    add_sat(&f->service_ns, ns);
}

hv_err hv_callfig_format(const hv_callfig_t *f, char *buf, size_t len) {
    int n = snprintf(buf, len, "%s %d %llu %llu %llu %llu %llu", CALLFIG_MAGIC, CALLFIG_VERSION,
                     (unsigned long long)f->ok, (unsigned long long)f->error,
                     (unsigned long long)f->bytes_in, (unsigned long long)f->bytes_out,
                     (unsigned long long)f->service_ns);
    for (size_t i = 0; i < HV_CALLFIG_BUCKETS && n >= 0 && (size_t)n < len; i++) {
        n += snprintf(buf + n, len - (size_t)n, " %llu", (unsigned long long)f->buckets[i]);
    }
    if (n >= 0 && (size_t)n < len) {
        n += snprintf(buf + n, len - (size_t)n, "\n");
    }
    return n >= 0 && (size_t)n < len ? HV_OK : HV_ETOOBIG;
}

/* One unsigned decimal field after a single space; advances *p. */
static int parse_u64(const char **p, uint64_t *out) {
    const char *s = *p;
    if (*s != ' ' || s[1] < '0' || s[1] > '9') {
        return 0;
    }
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s + 1, &end, 10);
    if (errno != 0) {
        return 0;
    }
    *out = v;
    *p = end;
    return 1;
}

hv_err hv_callfig_parse(const char *text, hv_callfig_t *out) {
    size_t ml = strlen(CALLFIG_MAGIC);
    if (text == NULL || strncmp(text, CALLFIG_MAGIC, ml) != 0) {
        return HV_EINVAL;
    }
    const char *p = text + ml;
    uint64_t version = 0;
    hv_callfig_t f = {0};
    uint64_t *fields[5 + HV_CALLFIG_BUCKETS] = {&f.ok, &f.error, &f.bytes_in, &f.bytes_out,
                                                &f.service_ns};
    for (size_t i = 0; i < HV_CALLFIG_BUCKETS; i++) {
        fields[5 + i] = &f.buckets[i];
    }
    if (!parse_u64(&p, &version) || version != CALLFIG_VERSION) {
        return HV_EINVAL;
    }
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        if (!parse_u64(&p, fields[i])) {
            return HV_EINVAL;
        }
    }
    if (*p == '\n') {
        p++;
    }
    if (*p != '\0') {
        return HV_EINVAL;
    }
    HV_TRY(hv_callfig_check(&f));
    *out = f;
    return HV_OK;
}

uint64_t hv_callfig_calls(const hv_callfig_t *f) {
    return f->ok > UINT64_MAX - f->error ? UINT64_MAX : f->ok + f->error;
}

hv_err hv_callfig_check(const hv_callfig_t *f) {
    uint64_t n = 0;
    for (size_t i = 0; i < HV_CALLFIG_BUCKETS; i++) {
        if (f->buckets[i] > UINT64_MAX - n) {
            return HV_EINVAL;
        }
        n += f->buckets[i];
    }
    return n == hv_callfig_calls(f) ? HV_OK : HV_EINVAL;
}

void hv_callfig_add(hv_callfig_t *total, const hv_callfig_t *d) {
    add_sat(&total->ok, d->ok);
    add_sat(&total->error, d->error);
    add_sat(&total->bytes_in, d->bytes_in);
    add_sat(&total->bytes_out, d->bytes_out);
    add_sat(&total->service_ns, d->service_ns);
    for (size_t i = 0; i < HV_CALLFIG_BUCKETS; i++) {
        add_sat(&total->buckets[i], d->buckets[i]);
    }
}

int hv_callfig_ge(const hv_callfig_t *a, const hv_callfig_t *b) {
    if (a->ok < b->ok || a->error < b->error || a->bytes_in < b->bytes_in ||
        a->bytes_out < b->bytes_out || a->service_ns < b->service_ns) {
        return 0;
    }
    for (size_t i = 0; i < HV_CALLFIG_BUCKETS; i++) {
        if (a->buckets[i] < b->buckets[i]) {
            return 0;
        }
    }
    return 1;
}

double hv_callfig_quantile_ms(const hv_callfig_t *f, double q) {
    uint64_t n = 0;
    for (size_t i = 0; i < HV_CALLFIG_BUCKETS; i++) {
        n += f->buckets[i];
    }
    if (n == 0) {
        return -1;
    }
    q = q <= 0 ? 0 : q > 1 ? 1 : q;
    /* The rank of the quantile among the n calls, then the bucket that holds it. */
    double rank = q * (double)n, below = 0;
    for (size_t i = 0; i < HV_CALLFIG_BUCKETS; i++) {
        double c = (double)f->buckets[i];
        if (c > 0 && below + c >= rank) {
            if (i == HV_CALLFIG_BUCKETS - 1) {
                return (double)callfig_bounds[i - 1] / 1e6;
            }
            double lo = i == 0 ? 0 : (double)callfig_bounds[i - 1];
            double hi = (double)callfig_bounds[i];
            return (lo + (hi - lo) * ((rank - below) / c)) / 1e6;
        }
        below += c;
    }
    return (double)callfig_bounds[HV_CALLFIG_BUCKETS - 2] / 1e6;
}
