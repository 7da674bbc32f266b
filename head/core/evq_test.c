/*
 * evq_test: the queue of events waiting for the store, row by row: arrival order kept, the
 * bound (new events dropped and counted, those before kept), an allocation that fails (dropped
 * and counted), the drop count cleared once told, and which jobs have an event waiting.
 * `evq_test <case>` runs one case.
 */
#include "evq.h"
#include "hv_check.h"

#include <stdio.h>
#include <string.h>

#include "mem.h"

/* The kinds waiting, "a,b,c". */
static void kinds(const hv_evq_t *q, char *buf, size_t len) {
    buf[0] = '\0';
    for (const hv_evq_item_t *e = hv_evq_front(q); e != NULL; e = e->next) {
        size_t l = strlen(buf);
        snprintf(buf + l, len - l, "%s%s", l ? "," : "", e->kind);
    }
}

/* Pushes, row by row, into a queue of 3: what waits and what was dropped after each. */
static void case_order_and_bound(void) {
    static const struct {
        const char *kind;
        hv_err rc;
        const char *waiting;
        uint64_t dropped;
    } rows[] = {
        {"a", HV_OK, "a", 0},          {"b", HV_OK, "a,b", 0},        {"c", HV_OK, "a,b,c", 0},
        {"d", HV_ETOOBIG, "a,b,c", 1}, {"e", HV_ETOOBIG, "a,b,c", 2},
    };
    hv_evq_t q;
    hv_evq_init(&q, 3);
    CHECK_EQ(hv_evq_empty(&q), 1);
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        char got[64];
        CHECK_RC(hv_evq_push(&q, 1, 0, rows[i].kind, NULL, "m"), rows[i].rc);
        kinds(&q, got, sizeof(got));
        CHECK_STR(got, rows[i].waiting);
        CHECK_EQ(q.dropped, rows[i].dropped);
    }
    /* Written front to back: after two, one waits and there is room again. */
    hv_evq_pop(&q);
    hv_evq_pop(&q);
    CHECK_RC(hv_evq_push(&q, 1, 0, "f", NULL, "m"), HV_OK);
    char got[64];
    kinds(&q, got, sizeof(got));
    CHECK_STR(got, "c,f");
    CHECK_EQ(hv_evq_empty(&q), 0);
    hv_evq_pop(&q);
    hv_evq_pop(&q);
    CHECK_EQ(hv_evq_empty(&q), 0); /* the drop count is not told yet */
    hv_evq_dropped_told(&q);
    CHECK_EQ(hv_evq_empty(&q), 1);
    hv_evq_pop(&q); /* nothing: harmless */
    hv_evq_fini(&q);
}

/* What an event carries comes back as given (data may be NULL). */
static void case_copies(void) {
    hv_evq_t q;
    hv_evq_init(&q, 8);
    char kind[16] = "node.dead", msg[32] = "node a is dead", data[32] = "{\"x\":1}";
    CHECK_RC(hv_evq_push(&q, 7, 3, kind, data, msg), HV_OK);
    CHECK_RC(hv_evq_push(&q, 0, 0, "head.stop", NULL, ""), HV_OK);
    memset(kind, 0, sizeof(kind)); /* the queue keeps its own copies */
    memset(msg, 0, sizeof(msg));
    memset(data, 0, sizeof(data));
    const hv_evq_item_t *e = hv_evq_front(&q);
    CHECK_EQ(e->job_id, 7);
    CHECK_EQ(e->node_id, 3);
    CHECK_STR(e->kind, "node.dead");
    CHECK_STR(e->msg, "node a is dead");
    CHECK_STR(e->data, "{\"x\":1}");
    CHECK(e->next->data == NULL);
    CHECK_STR(e->next->msg, "");
    CHECK_EQ(hv_evq_has_job(&q, 7), 1);
    CHECK_EQ(hv_evq_has_job(&q, 8), 0);
    hv_evq_pop(&q);
    CHECK_EQ(hv_evq_has_job(&q, 7), 0);
    hv_evq_fini(&q); /* frees what still waits */
    CHECK(hv_evq_front(&q) == NULL);
}

/* Out of memory: the event is dropped and counted like one past the bound. */
static void case_no_memory(void) {
    hv_evq_t q;
    hv_evq_init(&q, 8);
    hv_mem_fail_after(1);
    CHECK_RC(hv_evq_push(&q, 1, 0, "a", NULL, "m"), HV_ENOMEM);
    hv_mem_fail_after(0);
    CHECK_EQ(q.dropped, 1);
    CHECK(hv_evq_front(&q) == NULL);
    CHECK_EQ(hv_evq_empty(&q), 0);
    hv_evq_fini(&q);
}

HV_CHECK_MAIN(NULL, NULL, {"order_and_bound", case_order_and_bound}, {"copies", case_copies},
              {"no_memory", case_no_memory})
