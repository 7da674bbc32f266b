/*
 * svc_cluster: the Cluster service, everything node-facing. Join registers a node; the Session
 * stream carries the agent's heartbeats (lease), events (worker started/exited, log lines, drain
 * notices) and the head's orders; Fetch streams an artifact to an agent. It decodes messages,
 * calls the driver, and owns the Session calls (orders go out through hv_svc_cluster_order).
 * Events with a seq are acknowledged after the driver applied them, so an agent re-sends them
 * after a reconnect and none is lost; applying one twice is harmless (the driver ignores
 * repeats). Join's admission is decided by core/admit.c through the driver (hv_driver_admit:
 * the configured join token, a join token made with hvctl token create while valid, counted one
 * use per join, an instance's enrollment, or a node's own credential). Not here: any decision
 * about nodes or workers (driver.c). Loop thread only.
 */
#ifndef HV_HEAD_SVC_CLUSTER_H
#define HV_HEAD_SVC_CLUSTER_H

#include <stdint.h>

#include "auth.h"
#include "config.h"
#include "driver.h"
#include "err.h"
#include "rpc.h"

typedef struct hv_svc_cluster_s hv_svc_cluster_t;

/* Registers Join, Session and Fetch on srv. Everything is borrowed and must outlive the
 * service; advertise is the head address workers are told (copied). */
hv_err hv_svc_cluster_create(hv_rpc_server_t *srv, const hv_head_config_t *cfg, hv_driver_t *d,
                             const char *advertise, hv_svc_cluster_t **out);
/* Gives the service the head's credentials (borrowed, must outlive it): Join returns the node
 * credential and accepts it for re-joins; spawn orders carry the worker's secret. */
void hv_svc_cluster_set_auth(hv_svc_cluster_t *s, const hv_auth_t *a);
/* Whether autoscaler instance `instance` may join as node `name` now (alive, its own name). */
typedef int (*hv_svc_admit_fn)(void *ud, uint64_t instance, const char *name);
/* Lets Join accept instance enrollment credentials (hvi_), asking fn (head/driver/autoscale.c, wired by
 * main.c) whether the instance may join. */
void hv_svc_cluster_set_admit(hv_svc_cluster_t *s, hv_svc_admit_fn fn, void *ud);
/* Sends an order down the node's Session. HV_ECLOSED when it has none. */
hv_err hv_svc_cluster_order(hv_svc_cluster_t *s, uint64_t node_id, const hv_order_t *o);
/* Ends the node's Session (if any). */
void hv_svc_cluster_drop(hv_svc_cluster_t *s, uint64_t node_id);
/* Frees the service; call after the rpc engine ended every call. NULL is a no-op. */
void hv_svc_cluster_destroy(hv_svc_cluster_t *s);

#endif
