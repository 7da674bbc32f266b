/*
 * driver_copies.c: the bookkeeping of the jobs' state copies (docs/RELIABILITY.md). The head's
 * copy: a worker's PutState is checked against the job machine, its file (statecopy.c) recorded
 * in the store, and only then counted on (hv_driver_copy_*); FetchState reads the row back. The
 * durable tier: each tick hands due writes and resumes' restores to durable.c's thread and
 * stores what it finished before the job machine counts on it (hv__driver_tick_copies). A job
 * that finished forgets its copies (hv__driver_job_forget_copy). Which copy a resume loads and
 * when a durable write is due are decided by the pure core (jobm.h, copies.h).
 */
#include "driver_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "copygrant.h"
#include "log.h"
#include "mem.h"
#include "util.h"
#include "views.h"

_Static_assert(HV_VIEW_COPY_CHUNK_MAX == HV_STATECOPY_CHUNK_MAX, "a copy's chunk, read as written");

/* ---- copies of the training state (Rendezvous.PutState/FetchState) -------------------------- */

/* The row of a copy stored now: the head's (path under <data>/states/) or the durable tier's
 * (path = its key there). */
static hv_copy_row_t copy_row(uint64_t job_id, uint32_t generation, uint64_t commit, uint64_t size,
                              const char *sha256, const char *path) {
    hv_copy_row_t row = {.job_id = job_id,
                         .generation = generation,
                         .commit = commit,
                         .size = size,
                         .stored_ms = hv_wall_ms()};
    snprintf(row.sha256, sizeof(row.sha256), "%s", sha256);
    snprintf(row.path, sizeof(row.path), "%s", path);
    return row;
}

/* Asks the durable tier to drop key (a newer copy replaced it, or its job finished). */
static void durable_drop(hv_driver_t *d, uint64_t job_id, const char *key) {
    if (d->durable == NULL || key == NULL || key[0] == '\0') {
        return;
    }
    hv_durable_op_t op = {.kind = HV_DURABLE_DROP, .job_id = job_id};
    snprintf(op.key, sizeof(op.key), "%s", key);
    if (hv_durable_submit(d->durable, &op) != HV_OK) {
        HV_LOG(HV_LOG_WARN, "copies", "HV-DURABLE-DROP", "job %llu: cannot drop %s: out of memory",
               (unsigned long long)job_id, key);
    }
}

static void peer_release(hv_driver_t *d, uint64_t node_id, uint64_t job_id, uint32_t generation,
                         uint64_t commit, int drop_all);

/* A finished job's copy: kept when the job failed (an operator may resume it by hand with
 * hv_state_load: the file is in hv_state_save's format), removed otherwise. */
void hv__driver_job_forget_copy(hv_driver_t *d, hv_djob_t *j) {
    hv_statecopy_abort(d->copies, j->jm.id);
    hv_copy_row_t c;
    int keep = hv_jm_copies_kept(j->jm.state);
    if (j->jm.durable.commit != 0 && !keep &&
        hv_store_durable_get(d->store, j->jm.id, &c) == HV_OK &&
        hv_store_durable_remove(d->store, j->jm.id) == HV_OK) {
        j->jm.durable = (hv_jm_copy_t){0};
        j->durable_key[0] = '\0';
        durable_drop(d, j->jm.id, c.path);
    }
    if (j->peer.node_id != 0 && !keep && hv_store_peer_copy_remove(d->store, j->jm.id) == HV_OK) {
        peer_release(d, j->peer.node_id, j->jm.id, 0, 0, 1);
        j->peer = (hv_peer_copy_row_t){0};
    }
    if (j->jm.copy.commit == 0 || hv_store_copy_get(d->store, j->jm.id, &c) != HV_OK) {
        return;
    }
    if (keep) {
        HV_LOG(HV_LOG_NOTICE, "driver", "HV-COPY-KEPT",
               "job %llu failed; its last state copy (generation %u, commit %llu) stays in %s",
               (unsigned long long)j->jm.id, c.generation, (unsigned long long)c.commit, c.path);
        return;
    }
    if (hv_store_copy_remove(d->store, j->jm.id) == HV_OK) {
        hv_statecopy_remove(c.path);
    }
}

hv_err hv_driver_copy_check(hv_driver_t *d, uint64_t job_id, uint64_t worker_id,
                            uint32_t generation, uint64_t commit, char *err, size_t errlen) {
    hv_djob_t *j;
    hv_dworker_t *w;
    HV_TRY(hv__driver_rdzv_find(d, job_id, worker_id, &j, &w, err, errlen));
    HV_TRY(hv__driver_fence(j, w, generation, "a copy of the state", err, errlen));
    if (commit > 0) {
        hv_jm_note_commit(&j->jm); /* a copy, taken or not, says a step was committed */
    }
    return hv_jm_copy_check(&j->jm, &w->jm, generation, commit, err, errlen);
}

/* A copy's file is published: checks again, records it in the store (before anything counts on
 * it) and makes it the job's newest. old_path gets the previous copy's file, to remove ("" when
 * none). HV_EIO when the store fails: done->path is then named by no row. */
static hv_err copy_stored(hv_driver_t *d, uint64_t job_id, uint64_t worker_id,
                          const hv_statecopy_done_t *done, char *old_path, size_t old_len,
                          char *err, size_t errlen) {
    HV_TRY(hv_driver_copy_check(d, job_id, worker_id, done->generation, done->commit, err, errlen));
    hv_djob_t *j = job_by_id(d, job_id);
    hv_copy_row_t prev;
    old_path[0] = '\0';
    if (hv_store_copy_get(d->store, job_id, &prev) == HV_OK) {
        snprintf(old_path, old_len, "%s", prev.path);
    }
    hv_copy_row_t row =
        copy_row(job_id, done->generation, done->commit, done->size, done->sha256, done->path);
    hv_err rc = hv_store_copy_put(d->store, &row);
    if (rc != HV_OK) {
        old_path[0] = '\0';
        snprintf(err, errlen, "the head cannot record the copy: %s", hv_store_last_error(d->store));
        return HV_EIO;
    }
    /* Stored: only now does the job machine count on it. */
    d->copy_bytes_head += done->size;
    j->jm.copy = (hv_jm_copy_t){
        .generation = row.generation, .commit = row.commit, .stored_ms = row.stored_ms};
    snprintf(j->copy_path, sizeof(j->copy_path), "%s", row.path);
    if (strcmp(old_path, row.path) == 0) {
        old_path[0] = '\0';
    }
    if (d->io.job_changed != NULL) {
        d->io.job_changed(d->io.ud, job_id);
    }
    return HV_OK;
}

/* A copy whose last chunk arrived: synced and renamed off the loop (io.queue_work), then stored
 * on the loop before its sender is told (the work's argument). */
typedef struct copy_pub_s {
    hv_driver_t *d; /* NULL once the driver is gone (orphaned) */
    uint64_t job_id, worker_id;
    hv_statecopy_done_t done;
    hv_err rc;
    char err[700];
    hv_driver_copy_fn fn; /* NULL once forgotten */
    void *ud;
    struct copy_pub_s *next;
} copy_pub_t;

static void pub_unlink(hv_driver_t *d, copy_pub_t *p) {
    for (copy_pub_t **pp = &d->pubs; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            return;
        }
    }
}

/* Off the loop: the sync and rename (touches only p->done). */
static void pub_work(void *arg) {
    copy_pub_t *p = arg;
    p->rc = hv_statecopy_publish(&p->done, p->err, sizeof(p->err));
}

/* The loop: the synced copy is stored (only then is it the job's newest, and the previous one's
 * file removed). Returns p->rc. */
static hv_err pub_store(hv_driver_t *d, copy_pub_t *p) {
    char old[512] = "";
    if (p->rc == HV_OK) {
        p->rc = copy_stored(d, p->job_id, p->worker_id, &p->done, old, sizeof(old), p->err,
                            sizeof(p->err));
        if (p->rc != HV_OK) {
            hv_statecopy_remove(p->done.path); /* never named by a row */
        } else {
            hv_statecopy_remove(old[0] ? old : NULL);
            HV_LOG(HV_LOG_DEBUG, "rdzv", "HV-COPY-STORED",
                   "job %llu: copy of generation %u, commit %llu stored (%llu bytes)",
                   (unsigned long long)p->job_id, p->done.generation,
                   (unsigned long long)p->done.commit, (unsigned long long)p->done.size);
        }
    } else {
        HV_LOG(HV_LOG_WARN, "rdzv", "HV-COPY-WRITE", "job %llu: %s", (unsigned long long)p->job_id,
               p->err);
    }
    return p->rc;
}

/* Back on the loop after the sync: stored, and the sender, if still there, told. */
static void pub_after(void *arg, int cancelled) {
    copy_pub_t *p = arg;
    hv_driver_t *d = p->d;
    if (cancelled && p->rc == HV_OK) {
        p->rc = HV_ECANCELED;
        snprintf(p->err, sizeof(p->err), "the copy's sync was cancelled");
    }
    if (p->done.fd >= 0) {
        hv_statecopy_discard(&p->done); /* the work never ran */
    }
    if (d == NULL) {
        /* The head is stopping and the driver is gone: no row names this file. */
        if (p->rc == HV_OK) {
            hv_statecopy_remove(p->done.path);
        }
        hv_free(p);
        return;
    }
    pub_unlink(d, p);
    pub_store(d, p);
    if (p->fn != NULL) {
        p->fn(p->ud, p->rc, p->err);
    }
    hv_free(p);
}

hv_err hv_driver_copy_put(hv_driver_t *d, const hv_copy_chunk_t *c, hv_driver_copy_fn fn, void *ud,
                          hv_copy_put_t *out, char *err, size_t errlen) {
    *out = HV_COPY_PUT_PART;
    /* Refused: the part in progress, if any, is left alone (it may be the current rank 0's). */
    HV_TRY(hv_driver_copy_check(d, c->job_id, c->worker_id, c->generation, c->commit, err, errlen));
    int complete = 0;
    hv_statecopy_done_t done;
    hv_err rc =
        hv_statecopy_put(d->copies, c->job_id, c->generation, c->commit, c->total, c->offset,
                         c->data, c->len, c->sha256, &complete, &done, err, errlen);
    if (rc != HV_OK) {
        if (rc == HV_EIO) {
            HV_LOG(HV_LOG_WARN, "rdzv", "HV-COPY-WRITE", "job %llu: %s",
                   (unsigned long long)c->job_id, err);
        }
        return rc;
    }
    if (!complete) {
        return HV_OK;
    }
    /* The fsync and rename of a copy of gigabytes must not hold the loop. */
    copy_pub_t *p = hv_calloc(1, sizeof(*p));
    if (p == NULL) {
        hv_statecopy_discard(&done);
        snprintf(err, errlen, "out of memory");
        return HV_ENOMEM;
    }
    *p = (copy_pub_t){
        .d = d, .job_id = c->job_id, .worker_id = c->worker_id, .done = done, .fn = fn, .ud = ud};
    if (d->io.queue_work == NULL) { /* no thread pool (the unit tests): in line */
        pub_work(p);
        rc = pub_store(d, p);
        snprintf(err, errlen, "%s", rc != HV_OK ? p->err : "");
        hv_free(p);
        *out = rc == HV_OK ? HV_COPY_PUT_STORED : HV_COPY_PUT_PART;
        return rc;
    }
    if (d->io.queue_work(d->io.ud, pub_work, pub_after, p) != HV_OK) {
        hv_statecopy_discard(&p->done);
        hv_free(p);
        snprintf(err, errlen, "the head cannot queue the copy's sync");
        return HV_EINTERNAL;
    }
    p->next = d->pubs;
    d->pubs = p;
    *out = HV_COPY_PUT_PENDING;
    return HV_OK;
}

void hv_driver_copy_forget(hv_driver_t *d, void *ud) {
    for (copy_pub_t *p = d->pubs; p != NULL; p = p->next) {
        if (p->ud == ud) {
            p->fn = NULL;
        }
    }
}

void hv__driver_copies_orphan(hv_driver_t *d) {
    while (d->pubs != NULL) {
        copy_pub_t *p = d->pubs;
        d->pubs = p->next;
        p->d = NULL;
        p->fn = NULL;
    }
}

hv_err hv_driver_copy_get(hv_driver_t *d, uint64_t job_id, uint64_t worker_id, hv_copy_row_t *out,
                          char *err, size_t errlen) {
    hv_djob_t *j;
    hv_dworker_t *w;
    HV_TRY(hv__driver_rdzv_find(d, job_id, worker_id, &j, &w, err, errlen));
    if (!hv_wk_state_active(w->jm.state)) {
        snprintf(err, errlen, "worker %llu of job %llu is %s", (unsigned long long)worker_id,
                 (unsigned long long)job_id, hv_wk_state_name(w->jm.state));
        return HV_EPERM;
    }
    if (hv_jm_copy_tier(&j->jm) == HV_COPY_TIER_DURABLE) {
        snprintf(err, errlen,
                 "the head is restoring job %llu's copy (generation %u, commit %llu) from the "
                 "durable tier: try again",
                 (unsigned long long)job_id, j->jm.durable.generation,
                 (unsigned long long)j->jm.durable.commit);
        return HV_EUNAVAIL;
    }
    hv_err rc = hv_store_copy_get(d->store, job_id, out);
    if (rc != HV_OK) {
        snprintf(err, errlen, "job %llu has no stored copy of its state",
                 (unsigned long long)job_id);
    }
    return rc;
}

hv_err hv_view_copy_read(hv_driver_t *d, const hv_copy_row_t *row, uint64_t offset, uint8_t *buf,
                         size_t cap, size_t *n) {
    (void)d;
    return hv_statecopy_read(row->path, offset, buf, cap, n);
}

/* ---- the durable tier (docs/RELIABILITY.md "The durable tier") ------------------------------ */

int hv_driver_copy_on_own_node(hv_driver_t *d, const hv_djob_t *j) {
    if (!job_active(j) || !j->jm.p.elastic || j->jm.copy.commit == 0 || j->jm.durable.commit != 0 ||
        peer_newest(j)) {
        return 0;
    }
    size_t live = 0;
    for (size_t i = 0; i < j->jm.nw; i++) {
        const hv_dworker_t *w = (const hv_dworker_t *)j->jm.w[i];
        if (!wlive(w)) {
            continue;
        }
        const hv_dnode_t *n = node_by_id(d, w->jm.node_id);
        if (n == NULL || !hv_copy_peer_local(n->peer)) {
            return 0;
        }
        live++;
    }
    return live > 0;
}

#define DURABLE_RETRY_MS 5000 /* a failed restore is tried again after this */

/* The key of a copy in the tier: the name of the head's file (<epoch>-<job>-g<gen>-c<commit>.bin),
 * unique to the copy. */
static const char *key_of(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash != NULL ? slash + 1 : path;
}

/* A durable write finished (loop thread): stored, then counted on; the replaced object goes. */
static void durable_wrote(hv_driver_t *d, hv_djob_t *j, const hv_durable_op_t *op) {
    if ((op->rc == HV_ENOTFOUND || op->rc == HV_ECORRUPT) && j != NULL) {
        /* A newer head copy replaced the file meanwhile: that one is written at once. */
        j->durable_began = 0;
        HV_LOG(HV_LOG_INFO, "copies", "HV-DURABLE-WRITE",
               "job %llu: the copy of generation %u, commit %llu was replaced while it was being "
               "written (%s); writing the newer one",
               (unsigned long long)op->job_id, op->generation, (unsigned long long)op->commit,
               op->err);
        return;
    }
    if (op->rc != HV_OK) {
        HV_LOG(HV_LOG_WARN, "copies", "HV-DURABLE-WRITE",
               "job %llu: the copy of generation %u, commit %llu was not written to %s: %s (%s); "
               "the next try is in %u s",
               (unsigned long long)op->job_id, op->generation, (unsigned long long)op->commit,
               hv_durable_describe(d->durable), op->err, hv_strerror(op->rc),
               d->cfg->durable.interval_s);
        return;
    }
    if (j == NULL || (job_active(j) == 0 && j->jm.state != HV_JOB_FAILED)) {
        durable_drop(d, op->job_id, op->key); /* the job finished meanwhile */
        return;
    }
    hv_copy_row_t row =
        copy_row(op->job_id, op->generation, op->commit, op->size, op->sha256, op->key);
    hv_err rc = hv_store_durable_put(d->store, &row);
    if (rc != HV_OK) {
        hv__driver_store_failed(d, rc, "record a durable copy");
        durable_drop(d, op->job_id, op->key); /* never named by a row */
        return;
    }
    hv__driver_store_worked(d);
    char old[sizeof(j->durable_key)];
    snprintf(old, sizeof(old), "%s", j->durable_key);
    /* Stored: only now does the job count on it. */
    j->jm.durable = (hv_jm_copy_t){
        .generation = row.generation, .commit = row.commit, .stored_ms = row.stored_ms};
    snprintf(j->durable_key, sizeof(j->durable_key), "%s", op->key);
    if (strcmp(old, op->key) != 0) {
        durable_drop(d, op->job_id, old);
    }
    HV_LOG(HV_LOG_INFO, "copies", "HV-DURABLE-WRITE",
           "job %llu: the copy of generation %u, commit %llu (%llu bytes) is in %s (%llu ms)",
           (unsigned long long)op->job_id, op->generation, (unsigned long long)op->commit,
           (unsigned long long)op->size, hv_durable_describe(d->durable),
           (unsigned long long)op->took_ms);
    if (d->io.job_changed != NULL) {
        d->io.job_changed(d->io.ud, op->job_id);
    }
}

/* A restore finished (loop thread): the file is checked and published under <data>/states/; it
 * becomes the head's copy once its row is stored. */
static void durable_restored(hv_driver_t *d, hv_djob_t *j, const hv_durable_op_t *op,
                             uint64_t now) {
    if (j == NULL || !job_active(j)) {
        if (op->rc == HV_OK) {
            hv_statecopy_remove(op->file);
        }
        return;
    }
    if (op->rc != HV_OK) {
        j->restore_after = now + DURABLE_RETRY_MS;
        hv_driver_event(d, op->job_id, 0, "job.restore_failed", NULL,
                        "job %llu: the head could not restore the durable copy of generation %u, "
                        "commit %llu from %s: %s; it tries again in %u s",
                        (unsigned long long)op->job_id, op->generation,
                        (unsigned long long)op->commit, hv_durable_describe(d->durable), op->err,
                        DURABLE_RETRY_MS / 1000);
        return;
    }
    hv_copy_row_t row = {.job_id = op->job_id,
                         .generation = op->generation,
                         .commit = op->commit,
                         .size = op->size,
                         .stored_ms = j->jm.durable.stored_ms};
    snprintf(row.sha256, sizeof(row.sha256), "%s", op->sha256);
    snprintf(row.path, sizeof(row.path), "%s", op->file);
    hv_err rc = hv_store_copy_put(d->store, &row);
    if (rc != HV_OK) {
        hv__driver_store_failed(d, rc, "record a restored copy");
        j->restore_after = now + DURABLE_RETRY_MS;
        return;
    }
    hv__driver_store_worked(d);
    if (j->copy_path[0] != '\0' && strcmp(j->copy_path, op->file) != 0) {
        hv_statecopy_remove(j->copy_path);
    }
    j->jm.copy = (hv_jm_copy_t){
        .generation = row.generation, .commit = row.commit, .stored_ms = row.stored_ms};
    snprintf(j->copy_path, sizeof(j->copy_path), "%s", op->file);
    hv_driver_event(d, op->job_id, 0, "job.restore", NULL,
                    "job %llu: the head restored the durable copy of generation %u, commit %llu "
                    "(%llu bytes) from %s in %.1f s",
                    (unsigned long long)op->job_id, op->generation, (unsigned long long)op->commit,
                    (unsigned long long)op->size, hv_durable_describe(d->durable),
                    (double)op->took_ms / 1000.0);
}

/* Each tick: the finished durable operations; whether each running elastic job's head copy is
 * still there (a lost states directory); then a restore where a resume loads the durable copy
 * (the newest that is there), or a durable write where one is due (hv_durable_due). */
void hv__driver_tick_copies(hv_driver_t *d, uint64_t now) {
    hv_durable_op_t done[4];
    size_t n;
    while (d->durable != NULL && (n = hv_durable_poll(d->durable, done, 4)) > 0) {
        for (size_t i = 0; i < n; i++) {
            hv_djob_t *j = job_by_id(d, done[i].job_id);
            if (j != NULL && done[i].kind != HV_DURABLE_DROP) {
                j->durable_busy = 0;
            }
            if (done[i].kind == HV_DURABLE_WRITE) {
                durable_wrote(d, j, &done[i]);
            } else if (done[i].kind == HV_DURABLE_READ) {
                durable_restored(d, j, &done[i], now);
            } else if (done[i].rc != HV_OK) {
                HV_LOG(HV_LOG_WARN, "copies", "HV-DURABLE-DROP",
                       "job %llu: the replaced durable copy %s was not removed: %s",
                       (unsigned long long)done[i].job_id, done[i].key, done[i].err);
            }
        }
    }
    for (hv_djob_t *j = d->jobs; j != NULL; j = j->next) {
        if (!job_active(j) || !j->jm.p.elastic) {
            continue;
        }
        if (peer_newest(j)) {
            continue; /* kept by a peer: the head's file is older, and the durable tier gets the
                         head's copies only */
        }
        if (j->jm.copy.commit > 0 && !j->jm.copy.missing && !j->durable_busy &&
            access(j->copy_path, F_OK) != 0 && errno == ENOENT) {
            j->jm.copy.missing = 1;
            HV_LOG(HV_LOG_WARN, "copies", "HV-COPY-MISSING",
                   "job %llu: the head's copy of its state (generation %u, commit %llu) is gone "
                   "from %s%s",
                   (unsigned long long)j->jm.id, j->jm.copy.generation,
                   (unsigned long long)j->jm.copy.commit, j->copy_path,
                   j->jm.durable.commit > 0 ? "; the durable copy stands in" : "");
        }
        if (d->durable == NULL || j->durable_busy) {
            continue;
        }
        hv_durable_op_t op = {.job_id = j->jm.id};
        hv_copy_row_t row;
        hv_copy_ref_t head = {j->jm.copy.generation, j->jm.copy.commit, j->jm.copy.missing};
        hv_copy_ref_t dur = {j->jm.durable.generation, j->jm.durable.commit, 0};
        if (hv_copy_choose(&head, &dur) == HV_COPY_TIER_DURABLE) {
            /* Restored only for a resume that loads it (a running job sends newer copies), even
             * when the resumed round closed before this tick saw it open. */
            if (!hv_durable_restore_due(&head, &dur, j->jm.resume_gen) || now < j->restore_after ||
                hv_store_durable_get(d->store, j->jm.id, &row) != HV_OK) {
                continue;
            }
            op.kind = HV_DURABLE_READ;
            hv_statecopy_path(d->copies, j->jm.id, row.generation, row.commit, op.file,
                              sizeof(op.file));
        } else {
            uint64_t since = j->durable_began != 0 ? now - j->durable_began : UINT64_MAX;
            if (!hv_durable_due(1, 0, &head, &dur, since,
                                (uint64_t)d->cfg->durable.interval_s * 1000u) ||
                hv_store_copy_get(d->store, j->jm.id, &row) != HV_OK) {
                continue;
            }
            op.kind = HV_DURABLE_WRITE;
            snprintf(op.file, sizeof(op.file), "%s", row.path);
            j->durable_began = now;
        }
        op.generation = row.generation;
        op.commit = row.commit;
        op.size = row.size;
        snprintf(op.sha256, sizeof(op.sha256), "%s", row.sha256);
        snprintf(op.key, sizeof(op.key), "%s",
                 op.kind == HV_DURABLE_READ ? row.path : key_of(row.path));
        if (hv_durable_submit(d->durable, &op) == HV_OK) {
            j->durable_busy = 1;
        }
    }
}

/* ---- copies kept by peers (issue 28 §3) ----------------------------------------------------- */

#define PEER_PUT_GRANT_MS 60000     /* a put grant: the copy's send must start within this */
#define PEER_PUT_GRANT_PER_MIB 1000 /* ...and a second more per MiB (at 1 MiB/s at worst) */
#define PEER_FETCH_GRANT_MS 600000  /* a resume's fetch grant */

void hv_driver_set_creds(hv_driver_t *d, const struct hv_creds_s *creds) { d->creds = creds; }

void hv_driver_copy_bytes(const hv_driver_t *d, uint64_t *head, uint64_t *peer) {
    *head = d->copy_bytes_head;
    *peer = d->copy_bytes_peer;
}

/* Does n's agent serve copies now? (alive, not draining, attached, announced an endpoint) */
static int keeper_usable(const hv_dnode_t *n) {
    return n->state == HV_NODE_ALIVE && n->has_session && n->copy_addr != NULL &&
           n->copy_addr[0] != '\0' && n->copy_memory > 0;
}

/* The grant for verb on the copy (job, generation, commit, size) at keeper n. */
static void keeper_grant(const hv_driver_t *d, const hv_dnode_t *n, hv_copygrant_verb_t verb,
                         uint64_t job_id, uint32_t generation, uint64_t commit, uint64_t size,
                         uint64_t expires_ms, hv_copy_keeper_t *out) {
    char secret[HV_CREDS_MAX];
    hv_creds_node(d->creds, n->id, n->incarnation, secret);
    hv_copygrant_t g = {.verb = verb,
                        .keeper_node = n->id,
                        .job_id = job_id,
                        .generation = generation,
                        .commit = commit,
                        .size = size,
                        .expires_ms = expires_ms};
    hv_copygrant_make(secret, &g, out->grant);
    hv_creds_wipe(secret, sizeof(secret));
    out->node_id = n->id;
    out->expires_ms = expires_ms;
    snprintf(out->addr, sizeof(out->addr), "%s", n->copy_addr);
    snprintf(out->name, sizeof(out->name), "%s", n->name);
}

/* Bytes of peers' copies the index says n keeps, other than job's. */
static uint64_t keeper_holds(const hv_driver_t *d, uint64_t node_id, uint64_t job_id,
                             uint64_t *this_job) {
    uint64_t sum = 0;
    *this_job = 0;
    for (const hv_djob_t *j = d->jobs; j != NULL; j = j->next) {
        if (j->peer.node_id != node_id) {
            continue;
        }
        if (j->jm.id == job_id) {
            *this_job = j->peer.copy.size;
        } else {
            sum += j->peer.copy.size;
        }
    }
    return sum;
}

hv_err hv_driver_copy_plan(hv_driver_t *d, uint64_t job_id, uint64_t worker_id, uint32_t generation,
                           uint64_t commit, uint64_t size, hv_copy_keeper_t *out, char *err,
                           size_t errlen) {
    HV_TRY(hv_driver_copy_check(d, job_id, worker_id, generation, commit, err, errlen));
    hv_djob_t *j = job_by_id(d, job_id);
    hv_dworker_t *w = worker_of(j, worker_id);
    const hv_dnode_t *self = node_by_id(d, w->jm.node_id);
    if (d->creds == NULL) {
        snprintf(err, errlen, "the head makes no grants (no credentials)");
        return HV_ENOTFOUND;
    }
    /* The durable tier is filled from the head's copies: once its interval has passed since the
     * last durable write began, the next copy goes to the head (then to the tier). */
    uint64_t now = hv_now_ms();
    if (d->durable != NULL && !j->durable_busy &&
        (j->durable_began == 0 ||
         now - j->durable_began >= (uint64_t)d->cfg->durable.interval_s * 1000u)) {
        snprintf(err, errlen, "a durable copy is due: this one goes to the head");
        return HV_ENOTFOUND;
    }
    size_t cap = 0;
    for (const hv_dnode_t *n = d->nodes; n != NULL; n = n->next) {
        cap++;
    }
    hv_keeper_cand_t *c = hv_calloc(cap ? cap : 1, sizeof(*c));
    const hv_dnode_t **nodes = hv_calloc(cap ? cap : 1, sizeof(*nodes));
    char(*zones)[64] = hv_calloc(cap ? cap : 1, sizeof(*zones));
    if (c == NULL || nodes == NULL || zones == NULL) {
        hv_free(c);
        hv_free(nodes);
        hv_free(zones);
        snprintf(err, errlen, "out of memory");
        return HV_ENOMEM;
    }
    size_t n = 0;
    for (const hv_dnode_t *nd = d->nodes; nd != NULL; nd = nd->next) {
        uint64_t mine = 0, others = keeper_holds(d, nd->id, job_id, &mine);
        hv_copy_label(nd->labels, HV_COPY_ZONE_KEY, zones[n], sizeof(zones[n]));
        int member = 0;
        for (size_t i = 0; i < j->jm.nw; i++) {
            const hv_dworker_t *o = (const hv_dworker_t *)j->jm.w[i];
            member |= wlive(o) && o->jm.node_id == nd->id;
        }
        c[n] = (hv_keeper_cand_t){
            .node_id = nd->id,
            .zone = zones[n],
            .usable = keeper_usable(nd),
            .has_member = member,
            .free_bytes = nd->copy_memory > others + mine ? nd->copy_memory - others - mine : 0,
            .holds_bytes = mine};
        nodes[n++] = nd;
    }
    char self_zone[64] = "";
    if (self != NULL) {
        hv_copy_label(self->labels, HV_COPY_ZONE_KEY, self_zone, sizeof(self_zone));
    }
    int k = hv_copy_keeper_choose(c, n, w->jm.node_id, self_zone, size);
    hv_err rc = HV_OK;
    if (k < 0) {
        snprintf(err, errlen, "no other node's agent can keep a copy of %llu bytes",
                 (unsigned long long)size);
        rc = HV_ENOTFOUND;
    } else {
        uint64_t ms = PEER_PUT_GRANT_MS + (size >> 20) * PEER_PUT_GRANT_PER_MIB;
        keeper_grant(d, nodes[k], HV_COPYGRANT_PUT, job_id, generation, commit, size,
                     hv_wall_ms() + ms, out);
    }
    hv_free(c);
    hv_free(nodes);
    hv_free(zones);
    return rc;
}

/* Tells node's agent to drop job's copies older than (generation, commit), or all of them. */
static void peer_release(hv_driver_t *d, uint64_t node_id, uint64_t job_id, uint32_t generation,
                         uint64_t commit, int drop_all) {
    hv_order_t o = {.kind = HV_ORDER_COPY_RELEASE,
                    .job_id = job_id,
                    .generation = generation,
                    .commit = commit,
                    .drop_all = drop_all};
    if (d->io.order != NULL && d->io.order(d->io.ud, node_id, &o) != HV_OK) {
        HV_LOG(HV_LOG_INFO, "copies", "HV-COPY-RELEASE",
               "job %llu: node %llu has no session: its older copies stay until it drops them",
               (unsigned long long)job_id, (unsigned long long)node_id);
    }
}

hv_err hv_driver_copy_kept(hv_driver_t *d, uint64_t job_id, uint64_t worker_id, uint32_t generation,
                           uint64_t commit, uint64_t size, const char *sha256, uint64_t keeper_node,
                           char *err, size_t errlen) {
    HV_TRY(hv_driver_copy_check(d, job_id, worker_id, generation, commit, err, errlen));
    hv_djob_t *j = job_by_id(d, job_id);
    hv_dworker_t *w = worker_of(j, worker_id);
    const hv_dnode_t *n = node_by_id(d, keeper_node);
    if (n == NULL || !keeper_usable(n) || keeper_node == w->jm.node_id) {
        snprintf(err, errlen, "node %llu cannot keep job %llu's copy now",
                 (unsigned long long)keeper_node, (unsigned long long)job_id);
        return HV_ESTATE;
    }
    hv_peer_copy_row_t row = {.copy = copy_row(job_id, generation, commit, size, sha256, ""),
                              .node_id = n->id,
                              .incarnation = n->incarnation};
    snprintf(row.addr, sizeof(row.addr), "%s", n->copy_addr);
    hv_err rc = hv_store_peer_copy_put(d->store, &row);
    if (rc != HV_OK) {
        hv__driver_store_failed(d, rc, "record a peer's copy");
        snprintf(err, errlen, "the head cannot record the copy: %s", hv_store_last_error(d->store));
        return HV_EIO;
    }
    hv__driver_store_worked(d);
    /* Stored: only now does the job count on it. */
    uint64_t prev = j->peer.node_id;
    j->peer = row;
    j->jm.copy = (hv_jm_copy_t){.generation = generation,
                                .commit = commit,
                                .stored_ms = row.copy.stored_ms,
                                .peer_node = n->id};
    d->copy_bytes_peer += size;
    peer_release(d, n->id, job_id, generation, commit, 0);
    if (prev != 0 && prev != n->id) {
        peer_release(d, prev, job_id, 0, 0, 1);
    }
    HV_LOG(HV_LOG_INFO, "copies", "HV-COPY-PEER",
           "job %llu: node %s keeps the copy of generation %u, commit %llu (%llu bytes)",
           (unsigned long long)job_id, n->name, generation, (unsigned long long)commit,
           (unsigned long long)size);
    if (d->io.job_changed != NULL) {
        d->io.job_changed(d->io.ud, job_id);
    }
    return HV_OK;
}

/* The job's newest copy is the head's again (or none): its peer row is gone. */
static void peer_fall_back(hv_driver_t *d, hv_djob_t *j) {
    int was_newest = peer_newest(j);
    j->peer = (hv_peer_copy_row_t){0};
    if (!was_newest) {
        return;
    }
    hv_copy_row_t c;
    j->jm.copy = (hv_jm_copy_t){0};
    if (hv_store_copy_get(d->store, j->jm.id, &c) == HV_OK) {
        j->jm.copy = (hv_jm_copy_t){
            .generation = c.generation, .commit = c.commit, .stored_ms = c.stored_ms};
        j->jm.copy.missing = j->copy_path[0] == '\0' || access(j->copy_path, F_OK) != 0;
    }
}

void hv__driver_peer_forget_node(hv_driver_t *d, uint64_t node_id) {
    size_t n = 0;
    for (hv_djob_t *j = d->jobs; j != NULL; j = j->next) {
        n += j->peer.node_id == node_id;
    }
    if (n == 0) {
        return;
    }
    hv_err rc = hv_store_peer_copy_forget_node(d->store, node_id, NULL);
    if (rc != HV_OK) {
        hv__driver_store_failed(d, rc, "forget a lost keeper's copies");
    }
    for (hv_djob_t *j = d->jobs; j != NULL; j = j->next) {
        if (j->peer.node_id == node_id) {
            HV_LOG(HV_LOG_NOTICE, "copies", "HV-COPY-PEER-LOST",
                   "job %llu: its copy of generation %u, commit %llu went with node %llu's agent; "
                   "the head's copy (commit %llu) stands in",
                   (unsigned long long)j->jm.id, j->peer.copy.generation,
                   (unsigned long long)j->peer.copy.commit, (unsigned long long)node_id,
                   (unsigned long long)j->jm.copy.commit);
            peer_fall_back(d, j);
        }
    }
}

int hv__driver_peer_round(hv_driver_t *d, hv_djob_t *j, hv_round_info_t *info) {
    if (!peer_newest(j) || d->creds == NULL) {
        return 0;
    }
    const hv_dnode_t *n = node_by_id(d, j->peer.node_id);
    if (n == NULL || n->incarnation != j->peer.incarnation) {
        return 0;
    }
    const hv_copy_row_t *c = &j->peer.copy;
    hv_copy_keeper_t k;
    keeper_grant(d, n, HV_COPYGRANT_FETCH, j->jm.id, c->generation, c->commit, c->size,
                 hv_wall_ms() + PEER_FETCH_GRANT_MS, &k);
    info->resume = 1;
    info->copy_generation = c->generation;
    info->copy_commit = c->commit;
    info->copy_size = c->size;
    info->copy_stored_ms = c->stored_ms;
    snprintf(info->copy_sha256, sizeof(info->copy_sha256), "%s", c->sha256);
    info->keeper_node = n->id;
    info->keeper_expires_ms = k.expires_ms;
    snprintf(info->keeper_addr, sizeof(info->keeper_addr), "%s", j->peer.addr);
    snprintf(info->keeper_name, sizeof(info->keeper_name), "%s", n->name);
    snprintf(info->keeper_grant, sizeof(info->keeper_grant), "%s", k.grant);
    return 1;
}

const char *hv_driver_copy_keeper(const hv_driver_t *d, const hv_djob_t *j) {
    const hv_dnode_t *n = peer_newest(j) ? node_by_id(d, j->peer.node_id) : NULL;
    return n != NULL ? n->name : "";
}
