/*
 * driver_access.c: the driver's commands on who may join and call the head (driver.h "access"):
 * join tokens made and revoked, node credentials revoked, the audit trail appended. Each is
 * stored before it acts; the services decide nothing here and write nothing themselves. A leaf
 * of the driver: it calls the store and the driver's io, never the driver's other files.
 */
#include "driver_int.h"

#include <inttypes.h>
#include <stdio.h>

#include "log.h"
#include "util.h"

hv_err hv_driver_jtoken_create(hv_driver_t *d, const hv_jtoken_row_t *row) {
    return hv_store_jtoken_insert(d->store, row);
}

hv_err hv_driver_jtoken_revoke(hv_driver_t *d, const char *id, uint64_t now_ms,
                               hv_jtoken_row_t *out) {
    HV_TRY(hv_store_jtoken_get(d->store, id, out));
    if (out->revoked_ms == 0) {
        HV_TRY(hv_store_jtoken_revoke(d->store, id, now_ms));
        out->revoked_ms = now_ms;
    }
    return HV_OK;
}

hv_err hv_driver_node_revoke(hv_driver_t *d, uint64_t node_id, char *err, size_t errlen) {
    const hv_dnode_t *n = node_by_id(d, node_id);
    if (n == NULL) {
        snprintf(err, errlen, "no node %" PRIu64, node_id);
        return HV_ENOTFOUND;
    }
    uint64_t incarnation = n->incarnation;
    hv_revoked_row_t row = {
        .node_id = node_id, .incarnation = incarnation, .revoked_ms = hv_wall_ms()};
    hv_err rc = hv_store_revoked_put(d->store, &row);
    if (rc != HV_OK) {
        HV_LOG(HV_LOG_ERROR, "auth", "HV-STORE-WRITE",
               "cannot store the revocation of node %s (id %" PRIu64 ") in %s: %s; it is not "
               "revoked",
               n->name, node_id, hv_store_path(d->store), hv_store_last_error(d->store));
        snprintf(err, errlen, "the head could not store the revocation of node %s: %s", n->name,
                 hv_store_last_error(d->store));
        return HV_EUNAVAIL;
    }
    if (d->io.revoked != NULL && (rc = d->io.revoked(d->io.ud, node_id, incarnation)) != HV_OK) {
        snprintf(err, errlen, "%s", hv_strerror(rc));
        return rc;
    }
    if (d->io.drop_session != NULL) {
        d->io.drop_session(d->io.ud, node_id);
    }
    return HV_OK;
}

void hv_driver_admit(hv_driver_t *d, hv_admit_ask_t *ask, hv_admit_t *out) {
    char id[HV_JTOKEN_ID_LEN + 1], sha[65];
    hv_jtoken_row_t row;
    ask->jtoken = NULL;
    if (ask->token != NULL && hv_creds_jtoken_parse(ask->token, id, sha) &&
        hv_store_jtoken_get(d->store, id, &row) == HV_OK) {
        ask->jtoken = &row;
    }
    hv_admit_decide(ask, out);
    ask->jtoken = NULL;
}

/* Counts one use of the join token that admitted a Join (the node is stored). */
hv_err hv__driver_jtoken_use(hv_driver_t *d, const hv_admit_t *a, char *err, size_t errlen) {
    hv_err rc = hv_store_jtoken_use(d->store, a->jtoken, hv_wall_ms());
    if (rc == HV_ENOTFOUND) {
        snprintf(err, errlen, "not authenticated: join token %s is no longer valid", a->jtoken);
        return HV_EAUTH;
    }
    if (rc != HV_OK) {
        snprintf(err, errlen, "the head could not count a use of join token %s: %s; try again",
                 a->jtoken, hv_store_last_error(d->store));
        return HV_EUNAVAIL;
    }
    return HV_OK;
}

hv_err hv_driver_audit(hv_driver_t *d, const hv_audit_row_t *row) {
    return hv_store_audit_append(d->store, row, HV_STORE_AUDIT_KEEP);
}
