/*
 * actorfig: an actor's call figures summed over its processes (issue 17 §3). Each process of
 * an actor counts its own calls from 0 (common/callfig.h) and its agent reports the running
 * totals, about once a second while they change and once more with the process's exit. The
 * head keeps, per actor, the sum of its ended processes (base) and the last report of its
 * current process (cur); the actor's figures are base + cur, so a restart or a move never sets
 * them back. The driver (actors_drv.c) stores the result (table actor_figures) after each
 * report, so the totals survive a head restart.
 *
 * Pure: no I/O, no clock, no allocation. It decides what a report means: the same process
 * counting on (replace cur), a newer process (its predecessor's last figures go into base), the
 * same process whose counters went back (they started again at 0: what it had counted goes
 * into base first), a report of an ended or older process (ignored). Figures are counters, not
 * decisions: nothing else in the head depends on them. Unit-tested in actorfig_test.c.
 */
#ifndef HV_HEAD_ACTORFIG_H
#define HV_HEAD_ACTORFIG_H

#include <stdint.h>

#include "callfig.h"
#include "err.h"

typedef struct hv_actorfig_s {
    hv_callfig_t base; /* the sum of the actor's processes that ended (or were replaced) */
    hv_callfig_t cur;  /* the last report of process proc, since its start */
    uint64_t proc;     /* the process cur belongs to (0: none reported yet) */
    int ended;         /* proc's final report was added: cur is empty, later ones are stale */
} hv_actorfig_t;

/* What a report did. */
typedef enum hv_actorfig_how {
    HV_ACTORFIG_SAME = 0,      /* nothing new: the same figures again (no store needed) */
    HV_ACTORFIG_ON = 1,        /* the current process counted on */
    HV_ACTORFIG_NEXT = 2,      /* a newer process: its predecessor's figures went into base */
    HV_ACTORFIG_RESTARTED = 3, /* the current process's counters went back to 0 */
} hv_actorfig_how_t;

/* Applies process proc's report r (running totals since that process started; checked with
 * hv_callfig_check by the caller or here). final: the process ended, r is its last word (its
 * figures go into base). Process ids of one actor grow with each process (hv_am_proc_id).
 * HV_EINVAL: r is not consistent (its histogram does not hold its calls); HV_ESTATE: r is of a
 * process older than proc, or of proc after its final report (a late or repeated report): a is
 * unchanged either way. *how (may be NULL) says what it did on HV_OK. */
hv_err hv_actorfig_report(hv_actorfig_t *a, uint64_t proc, const hv_callfig_t *r, int final,
                          hv_actorfig_how_t *how);

/* The actor's figures: base + cur. */
void hv_actorfig_total(const hv_actorfig_t *a, hv_callfig_t *out);

#endif
