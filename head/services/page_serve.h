/*
 * page_serve: the edge of the status page. Its HTTP handlers read the driver's tables, the
 * store's jobs, events and instances and the cost report into a snapshot (head/services/page.h), and
 * head/services/page.c renders it. Routes: "/" (the cluster) and "/job/<id>" (one job); they are served
 * on the metrics listener (head/services/metrics.c), behind its access rule (docs/status-page.md): where
 * the listener has a token (always beyond loopback), a browser logs in at "/login" with a client
 * token (checked by head/services/auth.c, never logged or shown) and gets a session cookie
 * (head/services/page_login.h); "/logout" ends it.
 * Threads: the loop thread (the driver's).
 */
#ifndef HV_HEAD_PAGE_SERVE_H
#define HV_HEAD_PAGE_SERVE_H

#include "actors_drv.h"
#include "config.h"
#include "driver.h"
#include "auth.h"
#include "http.h"
#include "jobm.h"
#include "page.h"
#include "page_login.h"

#define HV_PAGE_MAX_JOBS 200    /* jobs the cluster page lists, newest first */
#define HV_PAGE_MAX_ACTORS 200  /* actors the cluster page lists, newest first */
#define HV_PAGE_MAX_EVENTS 2000 /* newest events of a job read for its rounds */

#define HV_PAGE_FLEET_JOBS 12         /* jobs drawn on the cluster page's fleet chart */
#define HV_PAGE_FLEET_SPAN_MS 900000u /* the fleet chart's span: the last 15 minutes at most */
#define HV_PAGE_TPUT_JOBS 32          /* jobs whose figures are sampled (the newest running) */
#define HV_PAGE_TPUT_SAMPLES 240      /* samples kept per job (the oldest go first) */
#define HV_PAGE_TPUT_WINDOW_MS                                                                     \
    10000u /* a throughput point spans at least this long (workers
                                         report their figures every 10 s) */

/* One job's samples of its figures (memory only: a restarted head starts again). */
typedef struct hv_page_tjob_s {
    uint64_t job_id; /* 0: a free entry */
    size_t n;
    hv_page_tsample_t s[HV_PAGE_TPUT_SAMPLES]; /* ascending */
} hv_page_tjob_t;

/* What the handlers read; every pointer borrowed and outliving the listener. */
typedef struct hv_page_src_s {
    const hv_head_config_t *cfg;
    hv_driver_t *d;
    const hv_actors_t *actors;   /* the head's actors (NULL: none are kept) */
    const hv_auth_t *auth;       /* the client tokens a login is checked against; NULL = none */
    int login;                   /* the listener has a token: browsers log in (else all open) */
    hv_page_sessions_t sessions; /* the logged-in browsers (owned) */
    uint64_t login_refused;      /* logins refused for their token (the metrics count them) */
    hv_page_logins_t logins;     /* wrong tokens per client address (owned) */
    hv_page_tjob_t tput[HV_PAGE_TPUT_JOBS]; /* the running jobs' figures over time */
} hv_page_src_t;

/* Samples the running jobs' figures (their commits so far and their size) for the job page's
 * throughput chart; main.c calls it once a second. A sample is kept when the commits moved or
 * the last one is 5 s old. A job no longer running gives its entry up to a newer one. */
void hv_page_sample(hv_page_src_t *src, uint64_t now_wall_ms);

/* The rounds of a job (oldest first, at most cap) from its events (ascending seq): round.open
 * and round.close decide by their fields (generation, reason code, rollback, duration, and the
 * size in the close's JSON); a round's reason in words (the JSON's "reason") is copied into
 * reasons[i] (HV_JM_REASON_MAX bytes each) only to be shown. Events without a generation are
 * skipped. Pure; out[i].reason points into reasons. */
size_t hv_page_rounds(const hv_event_row_t *ev, size_t n, hv_page_round_t *out,
                      char (*reasons)[HV_JM_REASON_MAX], size_t cap);

/* The handlers (ud: an hv_page_src_t). hv_page_serve_job takes the path "/job/<id>". */
void hv_page_serve_cluster(const hv_http_request_t *req, hv_http_reply_t *rep, void *ud);
void hv_page_serve_job(const hv_http_request_t *req, hv_http_reply_t *rep, void *ud);
/* GET /login: the form; POST /login: checks the form's client token and answers 303 to "/"
 * with the session cookie (HttpOnly, SameSite=Strict, Path=/, Max-Age), or 403 and the form. */
void hv_page_serve_login(const hv_http_request_t *req, hv_http_reply_t *rep, void *ud);
/* POST /logout: drops the cookie's session and clears the cookie; 303 to /login. */
void hv_page_serve_logout(const hv_http_request_t *req, hv_http_reply_t *rep, void *ud);
/* The listener's session check (hv_http_session_fn): a live session whose client token still
 * exists (a token deleted from the data directory ends its sessions at the head's next reload
 * of the tokens, within seconds). */
int hv_page_session_ok(const hv_http_request_t *req, void *ud);

#endif
