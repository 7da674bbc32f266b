/*
 * svc_jobs: the Jobs service (hvsubmit, hvctl): submit, get, list, cancel, nodes, events, drain,
 * and Watch. It validates what clients send, asks the driver, and builds the replies (views of
 * jobs and nodes). Watch streams are served from the job's log file and from the event log in
 * sqlite, for replay and live alike: a watcher remembers its byte offset and last event seq and
 * is pumped whenever the driver says the job changed or its send queue drains, so a slow client
 * never makes the head buffer without bound and a client that reconnects resumes exactly where
 * it stopped. The final JobView goes out once every worker ended. (Uploads: svc_artifacts.c.)
 * Loop thread only.
 */
#ifndef HV_HEAD_SVC_JOBS_H
#define HV_HEAD_SVC_JOBS_H

#include <stdint.h>

#include "config.h"
#include "driver.h"
#include "views.h"
#include "err.h"
#include "rpc.h"

typedef struct hv_svc_jobs_s hv_svc_jobs_t;

/* Registers the Jobs methods (but uploads) on srv. Everything is borrowed. */
hv_err hv_svc_jobs_create(hv_rpc_server_t *srv, const hv_head_config_t *cfg, hv_driver_t *d,
                          hv_svc_jobs_t **out);
/* The driver's io: the job changed; its watchers get what is new. */
void hv_svc_jobs_changed(hv_svc_jobs_t *s, uint64_t job_id);
/* Ends every watch stream (shutdown). */
void hv_svc_jobs_close(hv_svc_jobs_t *s);
/* Frees the service; call after the rpc engine ended every call. NULL is a no-op. */
void hv_svc_jobs_destroy(hv_svc_jobs_t *s);

#endif
