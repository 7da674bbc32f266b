/*
 * page_serve: the edge of the status page. Its HTTP handlers read the driver's tables, the
 * store's jobs, events and instances and the cost report into a snapshot (head/page.h), and
 * head/page.c renders it. Routes: "/" (the cluster) and "/job/<id>" (one job); they are served
 * on the metrics listener (head/metrics.c), behind its access rule (docs/status-page.md).
 * Threads: the loop thread (the driver's).
 */
#ifndef HV_HEAD_PAGE_SERVE_H
#define HV_HEAD_PAGE_SERVE_H

#include "config.h"
#include "driver.h"
#include "http.h"
#include "store.h"

#define HV_PAGE_MAX_JOBS 200    /* jobs the cluster page lists, newest first */
#define HV_PAGE_MAX_EVENTS 2000 /* newest events of a job read for its rounds */

/* What the handlers read; every pointer borrowed and outliving the listener. */
typedef struct hv_page_src_s {
    const hv_head_config_t *cfg;
    hv_driver_t *d;
    hv_store_t *store;
} hv_page_src_t;

/* The handlers (ud: an hv_page_src_t). hv_page_serve_job takes the path "/job/<id>". */
void hv_page_serve_cluster(const hv_http_request_t *req, hv_http_reply_t *rep, void *ud);
void hv_page_serve_job(const hv_http_request_t *req, hv_http_reply_t *rep, void *ud);

#endif
