/*
 * views: see views.h. Each view is the store's read of the same name: the services get the
 * records, never the store's handle.
 */
#include "views.h"

#include "driver_int.h"

const char *hv_view_error(hv_driver_t *d) { return hv_store_last_error(d->store); }

hv_err hv_view_events(hv_driver_t *d, uint64_t job_id, uint64_t after_seq, uint32_t limit,
                      hv_event_row_t **out, size_t *n) {
    return hv_store_event_list(d->store, job_id, after_seq, limit, out, n);
}

hv_err hv_view_actor_events(hv_driver_t *d, uint64_t actor_id, uint32_t limit, hv_event_row_t **out,
                            size_t *n, uint64_t *total) {
    return hv_store_event_list_actor(d->store, actor_id, limit, out, n, total);
}

void hv_view_events_free(hv_event_row_t *rows, size_t n) { hv_store_event_free_list(rows, n); }

hv_err hv_view_event_count(hv_driver_t *d, uint64_t job_id, const char *kind, const char *data_has,
                           uint64_t *n) {
    return hv_store_event_count(d->store, job_id, kind, data_has, n);
}

hv_err hv_view_event_sum(hv_driver_t *d, uint64_t job_id, const char *kind, const char *field,
                         uint64_t *sum) {
    return hv_store_event_sum(d->store, job_id, kind, field, sum);
}

hv_err hv_view_event_reasons(hv_driver_t *d, const char *kind, uint32_t min_gen,
                             void (*fn)(hv_ev_reason_t reason, int rollback, uint64_t n, void *ud),
                             void *ud) {
    return hv_store_event_reasons(d->store, kind, min_gen, fn, ud);
}

hv_err hv_view_job_page(hv_driver_t *d, uint64_t before_id, uint32_t limit, hv_job_row_t **out,
                        size_t *n) {
    return hv_store_job_page(d->store, before_id, limit, out, n);
}

hv_err hv_view_jobs(hv_driver_t *d, int active_only, uint32_t limit, hv_job_row_t **out,
                    size_t *n) {
    return hv_store_job_list(d->store, active_only, limit, out, n);
}

void hv_view_jobs_free(hv_job_row_t *rows, size_t n) { hv_store_job_free_list(rows, n); }

hv_err hv_view_job(hv_driver_t *d, uint64_t job_id, hv_job_row_t *out) {
    return hv_store_job_get(d->store, job_id, out);
}

void hv_view_job_fini(hv_job_row_t *row) { hv_store_job_fini(row); }

hv_err hv_view_job_states(hv_driver_t *d, void (*fn)(const char *state, uint64_t n, void *ud),
                          void *ud) {
    return hv_store_job_states(d->store, fn, ud);
}

hv_err hv_view_workers(hv_driver_t *d, uint64_t job_id, int active_only, hv_worker_row_t **out,
                       size_t *n) {
    return hv_store_worker_list(d->store, job_id, active_only, out, n);
}

void hv_view_workers_free(hv_worker_row_t *rows, size_t n) { hv_store_worker_free_list(rows, n); }

hv_err hv_view_nodes(hv_driver_t *d, hv_node_row_t **out, size_t *n) {
    return hv_store_node_list(d->store, out, n);
}

void hv_view_nodes_free(hv_node_row_t *rows, size_t n) { hv_store_node_free_list(rows, n); }

int hv_view_job_log(const hv_djob_t *j, uint64_t *bytes) {
    *bytes = j->log->bytes;
    return j->log->fd >= 0;
}

hv_err hv_view_instances(hv_driver_t *d, int active_only, hv_instance_row_t **out, size_t *n) {
    return hv_store_instance_list(d->store, active_only, out, n);
}

void hv_view_instances_free(hv_instance_row_t *rows, size_t n) {
    hv_store_instance_free_list(rows, n);
}

hv_err hv_view_audit(hv_driver_t *d, const hv_audit_filter_t *f, hv_audit_row_t **out, size_t *n) {
    return hv_store_audit_list(d->store, f, out, n);
}

hv_err hv_view_jtokens(hv_driver_t *d, hv_jtoken_row_t **out, size_t *n) {
    return hv_store_jtoken_list(d->store, out, n);
}

hv_err hv_view_jtoken(hv_driver_t *d, const char *id, hv_jtoken_row_t *out) {
    return hv_store_jtoken_get(d->store, id, out);
}

hv_err hv_view_revoked(hv_driver_t *d, hv_revoked_row_t **out, size_t *n) {
    return hv_store_revoked_list(d->store, out, n);
}

size_t hv_view_fleet_shares(hv_driver_t *d, hv_fl_share_t *out, size_t cap) {
    size_t n = d->fl_nshare < cap ? d->fl_nshare : cap;
    for (size_t i = 0; i < n; i++) {
        out[i] = d->fl_share[i];
    }
    return n;
}

const char *hv_view_fleet_ns_name(hv_driver_t *d, size_t i) {
    return hv_head_config_ns_name(d->cfg, i);
}

size_t hv_view_job_tput(hv_driver_t *d, uint64_t job_id, hv_tput_sample_t *out, size_t cap) {
    const hv_djob_t *j = job_by_id(d, job_id);
    size_t n = 0;
    for (; j != NULL && n < j->ntput && n < cap; n++) {
        out[n] = j->tput[n];
    }
    return n;
}

const char *hv_view_job_ns(hv_driver_t *d, const hv_djob_t *j) {
    /* The policy's own lookup (driver_fleet.c counts the job there): unlisted, "default". */
    return hv_head_config_ns_name(d->cfg, hv_head_config_ns_index(d->cfg, j->ns));
}
