/*
 * driver_events.c: the driver's events (driver.h: hv_driver_event, hv_driver_event_f,
 * hv_driver_set_observer). An event is logged, then written to the store; only once it is
 * written is it told to the observer (metrics) and the job's watchers. One whose append fails
 * waits in d->events (core/evq.c), in order behind any other waiting, and the driver's tick
 * writes them again (hv__driver_events_flush); past EVENT_WAIT_MAX new ones are dropped,
 * counted, logged, and the count is recorded as one event when the store works again.
 * It decides nothing about jobs or nodes; driver.c and the other driver files call it.
 */
#include "driver_int.h"

#include <stdarg.h>
#include <stdio.h>

#include "log.h"

void hv_driver_set_observer(hv_driver_t *d, hv_driver_observe_fn fn, void *ud) {
    d->observe = fn;
    d->observe_ud = ud;
}

/* Writes one event (f: its fields; node: its node's name or NULL); once it is stored, tells the
 * observer and the job's watchers. */
static hv_err event_store(hv_driver_t *d, uint64_t job_id, uint64_t node_id, const char *kind,
                          const hv_ev_fields_t *f, const char *node, const char *data,
                          const char *msg) {
    hv_ev_fields_t ev = *f;
    uint64_t seq = 0;
    hv_err rc =
        hv_store_event_append_f(d->store, job_id, node_id, kind, msg, data, &ev, node, &seq);
    if (rc != HV_OK) {
        hv__driver_store_failed(d, rc, "append an event");
        return rc;
    }
    hv__driver_store_worked(d);
    if (d->observe != NULL) {
        d->observe(d->observe_ud, job_id, node_id, kind, &ev, data);
    }
    if (job_id != 0) {
        hv_djob_t *j = job_by_id(d, job_id);
        if (j != NULL && seq > j->last_event_seq) {
            j->last_event_seq = seq;
        }
        if (d->io.job_changed != NULL) {
            d->io.job_changed(d->io.ud, job_id);
        }
    }
    return HV_OK;
}

/* Writes the waiting events in order, stopping at the first that fails; then records how many
 * were dropped, if any. Returns the number written. */
size_t hv__driver_events_flush(hv_driver_t *d) {
    size_t n = 0;
    const hv_evq_item_t *e;
    while ((e = hv_evq_front(&d->events)) != NULL) {
        if (event_store(d, e->job_id, e->node_id, e->kind, &e->f, e->node, e->data, e->msg) !=
            HV_OK) {
            return n;
        }
        hv_evq_pop(&d->events);
        n++;
    }
    if (d->events.dropped != 0) {
        char msg[300], data[64];
        snprintf(msg, sizeof(msg),
                 "%llu events were lost: the store failed while %zu others waited for it",
                 (unsigned long long)d->events.dropped, d->events.max);
        snprintf(data, sizeof(data), "{\"dropped\":%llu}", (unsigned long long)d->events.dropped);
        hv_ev_fields_t none = {0};
        if (event_store(d, 0, 0, "head.events_dropped", &none, NULL, data, msg) == HV_OK) {
            HV_LOG(HV_LOG_NOTICE, "store", "HV-EVENT-DROPPED", "%s", msg);
            hv_evq_dropped_told(&d->events);
            n++;
        }
    }
    return n;
}

void hv__driver_set_event_bound(hv_driver_t *d, size_t max) {
    d->events.max = max > 0 ? max : EVENT_WAIT_MAX;
}

/* Logs the event, then stores it: at once when no other waits, else behind them. f: the event's
 * fields (NULL: none); a node named by them (a worker's) is the event's node when node_id is 0,
 * and the node's name goes with the event. */
void hv__driver_event_v(hv_driver_t *d, uint64_t job_id, uint64_t node_id, const char *kind,
                        const hv_ev_fields_t *f, const char *data, const char *msg) {
    hv_ev_fields_t ev = {0};
    if (f != NULL) {
        ev = *f;
    }
    if (node_id == 0) {
        node_id = ev.node_id;
    }
    ev.node_id = node_id;
    const char *node = node_id != 0 ? node_name_of(node_id, d) : NULL;
    HV_LOG(HV_LOG_INFO, "head", "HV-HEAD-EVENT", "%s job=%llu node=%llu: %s", kind,
           (unsigned long long)job_id, (unsigned long long)node_id, msg);
    if ((!hv_evq_empty(&d->events) ||
         event_store(d, job_id, node_id, kind, &ev, node, data, msg) != HV_OK) &&
        hv_evq_push_f(&d->events, job_id, node_id, kind, &ev, node, data, msg) != HV_OK &&
        d->events.dropped == 1) {
        HV_LOG(HV_LOG_ERROR, "store", "HV-EVENT-DROPPED",
               "%zu events wait for the store in %s (the most the head keeps, or memory ran out): "
               "new events are dropped until it works again, starting with %s: %s",
               d->events.n, hv_store_path(d->store), kind, msg);
    }
}

/* hv_driver_event and hv_driver_event_f: the words formatted, then as hv__driver_event_v. */
__attribute__((format(printf, 7, 0))) static void
event_va(hv_driver_t *d, uint64_t job_id, uint64_t node_id, const char *kind,
         const hv_ev_fields_t *f, const char *data, const char *fmt, va_list ap) {
    char msg[1024];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    hv__driver_event_v(d, job_id, node_id, kind, f, data, msg);
}

void hv_driver_event(hv_driver_t *d, uint64_t job_id, uint64_t node_id, const char *kind,
                     const char *data, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    event_va(d, job_id, node_id, kind, NULL, data, fmt, ap);
    va_end(ap);
}

void hv_driver_event_f(hv_driver_t *d, uint64_t job_id, uint64_t node_id, const char *kind,
                       const hv_ev_fields_t *f, const char *data, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    event_va(d, job_id, node_id, kind, f, data, fmt, ap);
    va_end(ap);
}

void hv__driver_events_fini(hv_driver_t *d) {
    hv__driver_events_flush(d); /* a last try: what still fails is lost, and said so */
    if (!hv_evq_empty(&d->events)) {
        HV_LOG(HV_LOG_ERROR, "store", "HV-EVENT-LOST",
               "%zu events could not be stored in %s before the head stopped (and %llu were "
               "dropped before): they are lost",
               d->events.n, hv_store_path(d->store), (unsigned long long)d->events.dropped);
    }
    hv_evq_fini(&d->events);
}
