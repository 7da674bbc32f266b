/*
 * evq: see evq.h.
 */
#include "evq.h"

#include <string.h>

#include "mem.h"

void hv_evq_init(hv_evq_t *q, size_t max) {
    memset(q, 0, sizeof(*q));
    q->max = max > 0 ? max : 1;
}

void hv_evq_fini(hv_evq_t *q) {
    while (q->head != NULL) {
        hv_evq_pop(q);
    }
    q->dropped = 0;
}

int hv_evq_empty(const hv_evq_t *q) { return q->head == NULL && q->dropped == 0; }

hv_err hv_evq_push(hv_evq_t *q, uint64_t job_id, uint64_t node_id, const char *kind,
                   const char *data, const char *msg) {
    return hv_evq_push_f(q, job_id, node_id, kind, NULL, NULL, data, msg);
}

hv_err hv_evq_push_f(hv_evq_t *q, uint64_t job_id, uint64_t node_id, const char *kind,
                     const hv_ev_fields_t *f, const char *node, const char *data, const char *msg) {
    if (q->n >= q->max) {
        q->dropped++;
        return HV_ETOOBIG;
    }
    size_t lk = strlen(kind) + 1, ld = data != NULL ? strlen(data) + 1 : 0, lm = strlen(msg) + 1;
    size_t ln = node != NULL ? strlen(node) + 1 : 0;
    hv_evq_item_t *e = hv_malloc(sizeof(*e) + lk + ld + lm + ln);
    if (e == NULL) {
        q->dropped++;
        return HV_ENOMEM;
    }
    char *p = (char *)(e + 1);
    *e = (hv_evq_item_t){.job_id = job_id, .node_id = node_id, .kind = p};
    if (f != NULL) {
        e->f = *f;
    }
    memcpy(p, kind, lk);
    p += lk;
    if (data != NULL) {
        memcpy(p, data, ld);
        e->data = p;
        p += ld;
    }
    memcpy(p, msg, lm);
    e->msg = p;
    p += lm;
    if (node != NULL) {
        memcpy(p, node, ln);
        e->node = p;
    }
    if (q->tail != NULL) {
        q->tail->next = e;
    } else {
        q->head = e;
    }
    q->tail = e;
    q->n++;
    return HV_OK;
}

const hv_evq_item_t *hv_evq_front(const hv_evq_t *q) { return q->head; }

void hv_evq_pop(hv_evq_t *q) {
    hv_evq_item_t *e = q->head;
    if (e == NULL) {
        return;
    }
    q->head = e->next;
    if (q->head == NULL) {
        q->tail = NULL;
    }
    q->n--;
    hv_free(e);
}

void hv_evq_dropped_told(hv_evq_t *q) { q->dropped = 0; }

int hv_evq_has_job(const hv_evq_t *q, uint64_t job_id) {
    for (const hv_evq_item_t *e = q->head; e != NULL; e = e->next) {
        if (e->job_id == job_id) {
            return 1;
        }
    }
    return 0;
}
