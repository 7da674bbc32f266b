/*
 * figures: the worker's own cumulative figures that the head sums per job for its /metrics
 * (docs/metrics.md "Workers' figures"): the bytes of the tensors this process allreduced and the
 * time the engine spent running those allreduces, and the elastic state's commits and the time
 * they took. The engine (engine_round.c) and the state (elastic.c) add to them; the head's
 * rendezvous client (rdzv_head.c) reads them and reports what grew since its last report.
 *
 * It is process-wide (one worker process is one member of one job) and counts only: no I/O, no
 * decision. Not per world: the counters run on across resets, the reader takes differences.
 *
 * Threading: every function may be called from any thread (relaxed atomics: a reader may see
 * one counter of an operation before another, never a torn value).
 */
#ifndef HV_WORKER_LIB_FIGURES_H
#define HV_WORKER_LIB_FIGURES_H

#include <stdint.h>

typedef struct hv__figures_s {
    uint64_t allreduce_bytes; /* bytes of the tensors allreduced (this process' payload) */
    uint64_t allreduce_us;    /* microseconds spent running them (the ring or the fast path) */
    uint64_t allreduces;      /* tensors allreduced */
    uint64_t commits;         /* hv_state_commit calls that succeeded */
    uint64_t commit_us;       /* microseconds those commits took (snapshot and checks) */
} hv__figures_t;

/* n tensors of bytes in all were allreduced in ns nanoseconds. */
void hv__figures_add_allreduce(uint64_t n, uint64_t bytes, uint64_t ns);
/* One commit took ns nanoseconds. */
void hv__figures_add_commit(uint64_t ns);
/* Step throughput: a commit of round gen at world size `size` at monotonic now_ns. The time from
 * the previous commit of the same round is one step (a reset's pause, between two rounds, is never
 * in one). Steps wait, per size, until hv__figures_take_steps takes them. */
void hv__figures_add_step(uint32_t gen, uint32_t size, uint64_t now_ns);
/* Takes the steps waiting at one size (the older size first when a round changed it): 1 with *n
 * steps that took *us microseconds at *size, cleared here; 0 when none wait. */
int hv__figures_take_steps(uint64_t *n, uint64_t *us, uint32_t *size);

/* Monotonic nanoseconds (what the callers time with). */
uint64_t hv__figures_now_ns(void);
/* The counters now. */
void hv__figures_read(hv__figures_t *out);
/* b - a, field by field (0 where b is not above a). Pure. */
hv__figures_t hv__figures_sub(const hv__figures_t *b, const hv__figures_t *a);
/* 1 when every field is 0. */
int hv__figures_zero(const hv__figures_t *f);

#endif
