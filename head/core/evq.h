/*
 * evq: the events that wait for the head's store, as a bounded queue in arrival order. The
 * driver (head/driver/driver_events.c) writes an event at once when none waits; when the write
 * fails, or others wait before it, the event joins the queue, and the tick writes the queue front
 * to back, stopping at the first failure, so the store sees events in the order they happened.
 * The bound keeps memory finite while the store fails for long: at the bound a new event is
 * dropped (those before it are kept, in order) and counted, for the driver to log when dropping
 * starts and to record the count once the store works. No I/O, no clock; it allocates one block
 * per event (hv_malloc). Single-threaded.
 */
#ifndef HV_HEAD_EVQ_H
#define HV_HEAD_EVQ_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "events.h"

/* One waiting event; its strings live in the same block (owned by the queue). */
typedef struct hv_evq_item_s {
    uint64_t job_id, node_id; /* 0: none */
    const char *kind, *msg;
    const char *data; /* a JSON object, or NULL */
    hv_ev_fields_t f; /* its structured fields (events.h) */
    const char *node; /* the node's name, or NULL */
    struct hv_evq_item_s *next;
} hv_evq_item_t;

typedef struct hv_evq_s {
    hv_evq_item_t *head, *tail; /* oldest first (owned) */
    size_t n;                   /* how many wait */
    size_t max;                 /* the bound */
    uint64_t dropped;           /* dropped at the bound (or for want of memory) since the count
                                   was last cleared (hv_evq_dropped_told) */
} hv_evq_t;

/* An empty queue that keeps at most max events (max > 0). */
void hv_evq_init(hv_evq_t *q, size_t max);
/* Frees every waiting event. */
void hv_evq_fini(hv_evq_t *q);
/* 1 when nothing waits: no event and no uncleared drop count (a new event may be written at
 * once). */
int hv_evq_empty(const hv_evq_t *q);
/* Appends a copy of the event (strings borrowed for the call). HV_ETOOBIG at the bound and
 * HV_ENOMEM without memory: the event is dropped and counted (q->dropped; 1 means dropping just
 * started). */
hv_err hv_evq_push(hv_evq_t *q, uint64_t job_id, uint64_t node_id, const char *kind,
                   const char *data, const char *msg);
/* The same with the event's fields (f copied; NULL: none) and its node's name (NULL: none). */
hv_err hv_evq_push_f(hv_evq_t *q, uint64_t job_id, uint64_t node_id, const char *kind,
                     const hv_ev_fields_t *f, const char *node, const char *data, const char *msg);
/* The oldest waiting event (NULL: none), borrowed until hv_evq_pop. */
const hv_evq_item_t *hv_evq_front(const hv_evq_t *q);
/* Removes the oldest (it was written). */
void hv_evq_pop(hv_evq_t *q);
/* The drop count was recorded: it starts from zero again. */
void hv_evq_dropped_told(hv_evq_t *q);
/* 1 when an event of job job_id waits. */
int hv_evq_has_job(const hv_evq_t *q, uint64_t job_id);

#endif
