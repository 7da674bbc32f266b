/*
 * svc_cost: Jobs.Cost, what the cluster or one job cost (hvctl cost, hvsubmit's last line). It
 * reads the autoscaler's instances, the job's workers and the nodes (views.h), prices them
 * with the configured node types through the pure cost module (cost.h), and adds the job's
 * rollbacks from its round events. Read only. Loop thread only.
 */
#ifndef HV_HEAD_SVC_COST_H
#define HV_HEAD_SVC_COST_H

#include "config.h"
#include "err.h"
#include "rpc.h"
#include "views.h"

typedef struct hv_svc_cost_s hv_svc_cost_t;

/* Registers Jobs.Cost on srv. cfg and d are borrowed. */
hv_err hv_svc_cost_create(hv_rpc_server_t *srv, const hv_head_config_t *cfg, hv_driver_t *d,
                          hv_svc_cost_t **out);
/* NULL is a no-op; after the rpc engine ended every call. */
void hv_svc_cost_destroy(hv_svc_cost_t *s);

#endif
