/*
 * drv_test: what the driver's unit tests share (never production code): a head's config and
 * store in a temporary data dir, and a node that joins with an open session. Header-only with
 * static definitions; include it after hv_check.h.
 */
#ifndef HV_HEAD_DRIVER_DRV_TEST_H
#define HV_HEAD_DRIVER_DRV_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "mem.h"
#include "store.h"

#define DRVT_MAX_ORDERS 32

/* The orders a fake io was given, in order (the first DRVT_MAX_ORDERS). */
typedef struct drvt_orders_s {
    hv_order_kind_t kind[DRVT_MAX_ORDERS];
    uint64_t node[DRVT_MAX_ORDERS], worker[DRVT_MAX_ORDERS], actor[DRVT_MAX_ORDERS];
    char state[DRVT_MAX_ORDERS][65]; /* SPAWN: the saved state's digest it ships ("" none) */
    size_t n;
} drvt_orders_t;

/* Records order o to node_id. */
static inline void drvt_record(drvt_orders_t *f, uint64_t node_id, const hv_order_t *o) {
    if (f->n < DRVT_MAX_ORDERS) {
        f->kind[f->n] = o->kind;
        f->node[f->n] = node_id;
        f->worker[f->n] = o->worker_id;
        f->actor[f->n] = o->actor_id;
        snprintf(f->state[f->n], sizeof(f->state[f->n]), "%s",
                 o->state_digest != NULL ? o->state_digest : "");
        f->n++;
    }
}

/* Makes a data dir from tmpl (a mkdtemp template, at most 63 characters) into dir, the default
 * config with that data dir into *cfg, and the store there into *store. */
static inline void drvt_open(char dir[64], const char *tmpl, hv_head_config_t *cfg,
                             hv_store_t **store) {
    snprintf(dir, 64, "%s", tmpl);
    CHECK(mkdtemp(dir) != NULL);
    char err[512];
    CHECK_RC_MSG(hv_head_config_parse("t.yaml", "", 0, cfg, err, sizeof(err)), HV_OK, err);
    hv_free(cfg->data_dir);
    cfg->data_dir = hv_strdup(dir);
    CHECK_RC_MSG(hv_store_open(dir, store, err, sizeof(err)), HV_OK, err);
}

/* Undoes drvt_open (the store's writes work again first), the data dir removed. */
static inline void drvt_close(const char *dir, hv_head_config_t *cfg, hv_store_t *store) {
    hv__store_fail_writes(store, 0);
    hv_store_close(store);
    hv_head_config_fini(cfg);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    CHECK_EQ(system(cmd), 0);
}

/* A node of this name and slots on 127.0.0.1, incarnation 7. */
static inline hv_node_info_t drvt_node(const char *name, uint32_t slots) {
    return (hv_node_info_t){.name = name,
                            .addrs = "127.0.0.1",
                            .peer = "ipv4:127.0.0.1:1",
                            .slots = slots,
                            .incarnation = 7};
}

/* Joins the node (admitted by the token) and attaches its session, with the n processes it says
 * still run; its id. */
static inline uint64_t drvt_join(hv_driver_t *d, const hv_node_info_t *info,
                                 const uint64_t *running, size_t n) {
    uint64_t id = 0;
    char err[256];
    hv_admit_t adm = {.by = HV_ADMIT_BY_TOKEN};
    CHECK_RC_MSG(hv_driver_node_join(d, info, &adm, &id, err, sizeof(err)), HV_OK, err);
    CHECK_RC_MSG(hv_driver_node_attach(d, id, info->incarnation, running, n, err, sizeof(err)),
                 HV_OK, err);
    return id;
}

#endif
