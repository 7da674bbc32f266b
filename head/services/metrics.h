/*
 * metrics: hvhead's Prometheus metrics, in the text exposition format 0.0.4, served at /metrics
 * on the listener of cfg->metrics (head/services/http.c; main.c hands it this route and the status
 * page's). docs/metrics.md lists every series.
 *
 * Two kinds of figures. Gauges are read at each scrape from the driver's tables (nodes, slots,
 * the elastic jobs in memory, demand) and from the store (jobs by state, the autoscaler's
 * instances and, through cost.h, their instance-seconds and cost). Counters are counted as
 * things happen, through two hooks the head wires up: the driver's event observer
 * (hv_metrics_on_event: resets by reason code, reset durations, samples redone, drains and their
 * durations, preemption notices, launch failures) and the gRPC server's call observer (hv_metrics_on_rpc: calls by
 * method and code, authentication refusals). The workers' own figures (allreduce bytes and time,
 * commits and their time) are summed per job by the driver from the workers' reports
 * (hv_driver_rdzv_report, core/jobfig.h) and exported per job while the driver holds the job.
 * The counters that stored events can give back are
 * seeded from them at creation, so a head restart does not reset them; the duration histograms
 * and the RPC counters start at zero with each head (Prometheus handles a counter
 * reset). No series has a per-worker or per-rank label.
 *
 * What it is not: a decision maker (it reads, never changes, the driver's state) or a store of
 * history. It reads events' kinds and structured fields (events.h), never their English
 * messages. The pure helpers below (a round's reset reason, label escaping) are unit-tested in
 * metrics_test.c. Threads: the head's loop thread.
 */
#ifndef HV_HEAD_METRICS_H
#define HV_HEAD_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "actors_drv.h"
#include "config.h"
#include "driver.h"
#include "err.h"
#include "events.h"
#include "http.h"
#include "views.h"

typedef struct hv_metrics_s hv_metrics_t;

/* cfg and d are borrowed and must outlive the metrics. Seeds the counters from the
 * stored events (blocking: a few counting queries). */
hv_err hv_metrics_create(const hv_head_config_t *cfg, hv_driver_t *d, hv_metrics_t **out);
/* Frees m. NULL is a no-op. */
void hv_metrics_destroy(hv_metrics_t *m);

/* The head's actors (borrowed, may be NULL): hv_actors{state}. */
void hv_metrics_set_actors(hv_metrics_t *m, const hv_actors_t *actors);
/* The HTTP listener that serves /metrics (its refusals are counted) and the status page's count
 * of refused logins (main.c wires both; borrowed, either may be NULL). */
void hv_metrics_set_listener(hv_metrics_t *m, const hv_http_server_t *http,
                             const uint64_t *login_refused);

/* The /metrics route (an hv_http_handler; ud is the hv_metrics_t). */
void hv_metrics_serve(const hv_http_request_t *req, hv_http_reply_t *rep, void *ud);

/* The driver's event observer (hv_driver_observe_fn); ud is the hv_metrics_t. */
void hv_metrics_on_event(void *ud, uint64_t job_id, uint64_t node_id, const char *kind,
                         const hv_ev_fields_t *f, const char *data);
/* The gRPC server's call observer (hv_rpc_observe_cb); ud is the hv_metrics_t. */
void hv_metrics_on_rpc(const char *path, int grpc_code, void *ud);

/* Appends the whole exposition to out. now_wall_ms: the wall clock (for costs up to now). */
void hv_metrics_render(hv_metrics_t *m, uint64_t now_wall_ms, hv_http_reply_t *out);

/* ---- pure helpers (exposed for the tests) --------------------------------------------------- */

typedef enum hv_reset_reason {
    HV_RESET_FAILURE = 0, /* a member failed or its data plane broke: roll back */
    HV_RESET_DRAIN,       /* members leave a draining node */
    HV_RESET_GROW,        /* new workers join */
    HV_RESET_SHRINK,      /* the job is made smaller (hv takes no worker away today: 0) */
    HV_RESET_OTHER,       /* anything else */
    HV_RESET__COUNT
} hv_reset_reason_t;

/* The reason a reset counts under, from its round.open's fields: a round that rolls back is a
 * failure, else its reason code (drain, grow, shrink), else other (hv_ev_reset_class). */
hv_reset_reason_t hv_metrics_reset_reason(hv_ev_reason_t code, int rollback);
const char *hv_metrics_reset_reason_name(hv_reset_reason_t r);

/* What a fleet decision the driver acted on counts under in hv_fleet_resizes_total{cause}: its
 * event's kind (fleet.admit, fleet.grow, fleet.shrink) and its data's reason word
 * (hv_fl_reason_name: shrunk_admit, shrunk_priority, ...). */
typedef enum hv_resize_cause {
    HV_RESIZE_START = 0, /* fleet.admit: a job started (or resumed) with the workers given */
    HV_RESIZE_GROW,      /* fleet.grow: onto free capacity */
    HV_RESIZE_ADMIT,     /* fleet.shrink so that another job can start */
    HV_RESIZE_PRIORITY,  /* fleet.shrink for a job of a higher priority */
    HV_RESIZE_RECLAIM,   /* fleet.shrink: another namespace takes back its quota */
    HV_RESIZE_SHARE,     /* fleet.shrink: fair share, goodput */
    HV_RESIZE_PREEMPT,   /* stopped for another job */
    HV_RESIZE_OTHER,
    HV_RESIZE__COUNT
} hv_resize_cause_t;
hv_resize_cause_t hv_metrics_resize_cause(const char *kind, const char *reason);
const char *hv_metrics_resize_cause_name(hv_resize_cause_t c);

/* A label value escaped for the exposition (\\, \", \n), truncated to len-1 bytes. */
void hv_metrics_escape_label(const char *in, char *out, size_t len);

#endif
