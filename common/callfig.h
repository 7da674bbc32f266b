/*
 * callfig: the call figures of one actor process (issue 17 §3): calls answered OK, calls that
 * failed with a method error, argument and result bytes, and the service time of each call
 * (from the start of its dispatch to its reply queued) in a small fixed histogram. The actor's
 * server (worker_lib/actor/actor.c) counts them on its dispatcher thread and writes them as one text
 * line to the file HV_ACTOR_FIGURES_OUT names; the agent reads that line back and reports it to
 * the head; the head sums the figures of an actor's processes (head/core/actorfig.c) and derives
 * the median and p99 from the histogram for hvctl, the status page and /metrics.
 *
 * Pure: no I/O, no clock, no allocation. Shared by libhv, hvagent and hvhead because all three
 * must agree on the buckets and on the line. Not here: summing across processes (actorfig).
 * Unit-tested in callfig_test.c.
 */
#ifndef HV_COMMON_CALLFIG_H
#define HV_COMMON_CALLFIG_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* Service-time buckets: upper bounds 1, 2, 5, 10, 20, 50 ... µs up to 10 s (1-2-5 steps), then
 * one bucket for everything slower. A quantile read from them is exact to the bucket (within a
 * factor of 2 to 2.5; linear inside it, as Prometheus' histogram_quantile). */
#define HV_CALLFIG_BUCKETS 23

typedef struct hv_callfig_s {
    uint64_t ok;         /* calls answered with a result */
    uint64_t error;      /* calls whose method returned an error (its message was the reply) */
    uint64_t bytes_in;   /* argument bytes of every call */
    uint64_t bytes_out;  /* result bytes of the calls answered OK */
    uint64_t service_ns; /* nanoseconds of service time, summed over every call */
    uint64_t buckets[HV_CALLFIG_BUCKETS]; /* calls by service time (not cumulative) */
} hv_callfig_t;

/* The upper bound of bucket i in nanoseconds (inclusive); UINT64_MAX for the last one. */
uint64_t hv_callfig_bound_ns(size_t i);

/* Counts one call that took ns of service time. ok: answered OK (else a method error). */
void hv_callfig_count(hv_callfig_t *f, int ok, uint64_t ns, uint64_t in, uint64_t out);

/* The line written to the figures file: "hv-callfig 1 ok error in out ns b0 .. b22\n".
 * HV_ETOOBIG when buf (len bytes) is too small; HV_CALLFIG_LINE_MAX always fits. */
#define HV_CALLFIG_LINE_MAX 640
hv_err hv_callfig_format(const hv_callfig_t *f, char *buf, size_t len);

/* Reads a line written by hv_callfig_format (trailing newline optional) and checks it
 * (hv_callfig_check). HV_EINVAL on anything else; *out set only on success. */
hv_err hv_callfig_parse(const char *text, hv_callfig_t *out);

/* HV_OK when the histogram holds exactly ok + error calls; HV_EINVAL otherwise. */
hv_err hv_callfig_check(const hv_callfig_t *f);

/* total += d, every field saturating at UINT64_MAX. */
void hv_callfig_add(hv_callfig_t *total, const hv_callfig_t *d);

/* 1 when no field of a is below the same field of b (a is b, or b counted on). */
int hv_callfig_ge(const hv_callfig_t *a, const hv_callfig_t *b);

/* The calls counted (ok + error). */
uint64_t hv_callfig_calls(const hv_callfig_t *f);

/* The q-quantile (0 < q <= 1) of the service time in milliseconds, linear inside its bucket
 * (the last bucket, over 10 s, reads as 10 s); -1 when no call was counted. */
double hv_callfig_quantile_ms(const hv_callfig_t *f, double q);

#endif
