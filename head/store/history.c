/* history: see history.h. */
#include "history.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "mem.h"

#define HISTORY_DAY_MS (24ull * 3600 * 1000)

uint64_t hv_history_cutoff_ms(const hv_history_policy_t *p, uint64_t now_ms) {
    uint64_t age = (uint64_t)p->max_age_days * HISTORY_DAY_MS;
    return p->max_age_days == 0 || age >= now_ms ? 0 : now_ms - age;
}

void hv_history_log_path(const char *data_dir, const char *epoch, uint64_t job_id, char *buf,
                         size_t len) {
    snprintf(buf, len, "%s/logs/%s%s%llu.log", data_dir, epoch, epoch[0] ? "-" : "",
             (unsigned long long)job_id);
}

/* Removes the artifacts no stored job uses and that nobody uploaded or used for the grace:
 * their rows first (one transaction per batch), then their files. */
static hv_err prune_artifacts(hv_store_t *s, const hv_history_policy_t *p, uint64_t now_ms,
                              int batches) {
    uint64_t grace_ms =
        (uint64_t)(p->artifact_grace_s ? p->artifact_grace_s : HV_HISTORY_ARTIFACT_GRACE_S) * 1000;
    if (!hv_store_job_artifacts_complete(s) || now_ms <= grace_ms) {
        return HV_OK;
    }
    size_t total = 0;
    uint64_t bytes = 0;
    hv_err rc = HV_OK;
    for (int b = 0; b < batches; b++) {
        hv_artifact_row_t *rows = NULL;
        size_t n = 0;
        if ((rc = hv_store_artifacts_unused_delete(s, now_ms - grace_ms, HV_HISTORY_BATCH, &rows,
                                                   &n)) != HV_OK) {
            break;
        }
        for (size_t i = 0; i < n; i++) {
            /* The row is gone (committed): a file that cannot be removed stays as an orphan. */
            if (unlink(rows[i].path) != 0 && errno != ENOENT) {
                HV_LOG(HV_LOG_WARN, "history", "HV-HISTORY-UNLINK", "cannot remove %s: %s",
                       rows[i].path, strerror(errno));
            }
            bytes += rows[i].size;
        }
        total += n;
        hv_store_artifact_free_list(rows, n);
        if (n < HV_HISTORY_BATCH) {
            break;
        }
    }
    if (total > 0) {
        char msg[200], data[160];
        snprintf(msg, sizeof(msg),
                 "removed %zu artifact(s) (%llu bytes) that no kept job uses, unused for %u s",
                 total, (unsigned long long)bytes, (unsigned)(grace_ms / 1000));
        snprintf(data, sizeof(data), "{\"artifacts\":%zu,\"bytes\":%llu,\"grace_s\":%u}", total,
                 (unsigned long long)bytes, (unsigned)(grace_ms / 1000));
        HV_LOG(HV_LOG_NOTICE, "history", "HV-HISTORY-ARTIFACTS", "%s", msg);
        if (hv_store_event_append(s, 0, 0, "history.artifacts", msg, data, NULL) != HV_OK) {
            HV_LOG(HV_LOG_WARN, "history", "HV-HISTORY-EVENT", "cannot record the prune: %s",
                   hv_store_last_error(s));
        }
    }
    return rc;
}

hv_err hv_history_prune(hv_store_t *s, const char *data_dir, const hv_history_policy_t *p,
                        uint64_t now_ms, int batches, hv_history_held_fn held, void *ud,
                        size_t *pruned) {
    uint64_t cutoff = hv_history_cutoff_ms(p, now_ms);
    size_t total = 0, logs = 0;
    hv_err rc = HV_OK;
    if (pruned != NULL) {
        *pruned = 0;
    }
    for (int b = 0; b < batches && (cutoff != 0 || p->max_jobs != 0); b++) {
        uint64_t *ids = NULL;
        size_t n = 0;
        if ((rc = hv_store_history_expired(s, cutoff, p->max_jobs, HV_HISTORY_BATCH, &ids, &n)) !=
            HV_OK) {
            break;
        }
        /* A job the driver still holds (just finished, its watchers not yet answered) stays; it
         * is listed again next time. */
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (held == NULL || !held(ud, ids[i])) {
                ids[k++] = ids[i];
            }
        }
        /* A failed job keeps its newest state copy (docs/RELIABILITY.md); its file goes with
         * the job's rows. */
        hv_copy_row_t *copies = k > 0 ? hv_calloc(k, sizeof(*copies)) : NULL;
        for (size_t i = 0; copies != NULL && i < k; i++) {
            if (hv_store_copy_get(s, ids[i], &copies[i]) != HV_OK) {
                copies[i].path[0] = '\0';
            }
        }
        size_t deleted = 0;
        if (k > 0 && (rc = hv_store_history_delete(s, ids, k, &deleted)) != HV_OK) {
            hv_free(copies);
            hv_free(ids);
            break;
        }
        for (size_t i = 0; copies != NULL && i < k && deleted == k; i++) {
            if (copies[i].path[0] != '\0' && unlink(copies[i].path) != 0 && errno != ENOENT) {
                HV_LOG(HV_LOG_WARN, "history", "HV-HISTORY-UNLINK", "cannot remove %s: %s",
                       copies[i].path, strerror(errno));
            }
        }
        hv_free(copies);
        /* The rows are gone (committed): now the files. A file that cannot be removed stays as
         * an orphan with a warning; it no longer shows anywhere. */
        for (size_t i = 0; i < k && deleted == k; i++) {
            char path[4200];
            hv_history_log_path(data_dir, hv_store_epoch(s), ids[i], path, sizeof(path));
            if (unlink(path) == 0) {
                logs++;
            } else if (errno != ENOENT) {
                HV_LOG(HV_LOG_WARN, "history", "HV-HISTORY-UNLINK", "cannot remove %s: %s", path,
                       strerror(errno));
            }
        }
        total += deleted;
        hv_free(ids);
        if (n < HV_HISTORY_BATCH || k == 0) {
            break;
        }
    }
    if (total > 0) {
        char msg[200], data[160];
        snprintf(msg, sizeof(msg),
                 "pruned %zu finished job(s) and %zu log file(s) beyond the retention "
                 "(history.max_age_days %u, history.max_jobs %u)",
                 total, logs, p->max_age_days, p->max_jobs);
        snprintf(data, sizeof(data),
                 "{\"jobs\":%zu,\"logs\":%zu,\"max_age_days\":%u,\"max_jobs\":%u}", total, logs,
                 p->max_age_days, p->max_jobs);
        HV_LOG(HV_LOG_NOTICE, "history", "HV-HISTORY-PRUNE", "%s", msg);
        if (hv_store_event_append(s, 0, 0, "history.prune", msg, data, NULL) != HV_OK) {
            HV_LOG(HV_LOG_WARN, "history", "HV-HISTORY-EVENT", "cannot record the prune: %s",
                   hv_store_last_error(s));
        }
    }
    if (pruned != NULL) {
        *pruned = total;
    }
    /* After the jobs: an artifact only a pruned job used goes in the same prune. */
    hv_err arc = prune_artifacts(s, p, now_ms, batches);
    return rc != HV_OK ? rc : arc;
}
