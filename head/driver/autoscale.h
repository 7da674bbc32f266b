/*
 * autoscale: the head's autoscaler loop, the I/O edge around autoscaler/policy.c. Once a second
 * it reads the demand (hv_driver_demand) and the nodes (the driver's model), asks the policy what
 * to launch and terminate, stores each decision in sqlite (the instances table) and only then
 * carries it out through the configured provider (local, spot-sim or command), and records
 * every decision as an event with its reason (`hvctl events`).
 *
 * An instance enrolls by itself: it is launched with a token file holding an enrollment
 * credential (hvi_, head/core/creds.h) that admits that one instance, under its own node name, while
 * it is alive (hv_autoscale_admit, which svc_cluster asks on Join). It is running once a node of
 * its name has joined; it is idle while that node runs no worker. Before an idle instance is
 * terminated its node is drained, so nothing is placed on it in between.
 *
 * After a head restart the stored instances are handed back to the provider (adopt), so they are
 * watched again and never launched twice. Times: the policy's clock is monotonic; what is stored
 * is wall-clock.
 *
 * Threads: the head's loop thread only.
 */
#ifndef HV_HEAD_AUTOSCALE_H
#define HV_HEAD_AUTOSCALE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "actors_drv.h"
#include "config.h"
#include "creds.h"
#include "driver.h"
#include "err.h"

typedef struct hv_autoscale_s hv_autoscale_t;

typedef struct hv_autoscale_opts_s {
    const hv_head_config_t *cfg; /* autoscaler section; data_dir (borrowed) */
    hv_driver_t *driver;         /* demand, nodes, events, drains (borrowed) */
    hv_store_t *store;           /* the instances table (borrowed) */
    const hv_creds_t *creds;     /* makes enrollment credentials (borrowed) */
    const char *head_addr;       /* the address instances join (copied) */
    const char *agent;           /* the hvagent binary for local and spot-sim (copied) */
    hv_actors_t *actors;         /* the actors waiting for a node are demand too (borrowed;
                                  * NULL: none) */
} hv_autoscale_opts_t;

/* Creates the loop and its provider. *out is NULL (and HV_OK returned) when the config has no
 * autoscaler (provider "none"). err says what failed (a trace file that does not parse, ...). */
hv_err hv_autoscale_create(uv_loop_t *loop, const hv_autoscale_opts_t *o, hv_autoscale_t **out,
                           char *err, size_t errlen);
/* Loads the stored instances that have not ended and adopts them (after a head restart). */
hv_err hv_autoscale_load(hv_autoscale_t *a);
/* One round of decisions (the head calls it from its tick; it acts at most once a second). */
void hv_autoscale_tick(hv_autoscale_t *a, uint64_t now_ms);
/* Whether instance `instance` may join as node `name` (an hv_svc_admit_fn). */
int hv_autoscale_admit(void *ud, uint64_t instance, const char *name);
/* A clean stop of the head (SIGINT, SIGTERM, hvhead stop): the instances of the local and
 * spot-sim providers (agents on this machine) are terminated, stored as ended, and waited for
 * (runs the loop, at most kill_grace_ms + 8 s); those of the command provider are left running
 * for the next start to adopt, saying so in the log. A head that dies (SIGKILL) does neither:
 * its next start adopts them all. NULL is a no-op. */
void hv_autoscale_stop(hv_autoscale_t *a);
/* Stops the provider's watching; the instances keep running (a restarted head adopts them). */
void hv_autoscale_destroy(hv_autoscale_t *a);

#endif
