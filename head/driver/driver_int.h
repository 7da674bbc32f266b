/*
 * driver_int.h: what the driver's own files share, and nothing else includes: the driver's
 * struct, the queue of decisions waiting for the store, small lookups, and the hv__driver_*
 * functions one driver file calls in another. driver.c is the plumbing (inputs → core → store →
 * act); driver_fleet.c asks the fleet policy and stores its decisions; driver_copies.c keeps
 * the state copies (their chunks written, synced off the loop, then stored); driver_events.c
 * writes the events; driver_rows.c turns the tables' rows into the model and back, keeps the
 * store's health and loads the tables at start; driver_access.c and driver_artifacts.c are
 * leaves (the access commands; the artifact store's commands and views). Each file calls only those after it in that list, never back: the
 * lookups they all need are the inline functions below. Threads: the head's loop thread only, as
 * driver.h says.
 */
#ifndef HV_HEAD_DRIVER_INT_H
#define HV_HEAD_DRIVER_INT_H

#include "driver.h"

#include <string.h>

#include "creds.h"
#include "artifacts.h"
#include "durable.h"
#include "evq.h"
#include "hmap.h"
#include "joblog.h"
#include "statecopy.h"
#include "store.h"

#define STORE_RETRY_MS 1000 /* while the store fails, waiting decisions are retried this often */
#define EVENT_WAIT_MAX 4096 /* events kept while the store fails (a message: at most 1 KiB) */

/* A job's actions that wait for the store (its decision is not durable yet). */
typedef struct pending_s {
    hv_djob_t *job;
    hv_jm_out_t out;
    int stored; /* flush_pending stored the job; its actions go out next */
    struct pending_s *next;
} pending_t;

/* The driver (driver.h's hv_driver_t): its fields are read and written by the driver's files
 * only. */
#define HV_DRIVER_NS_MAX 257 /* fleet.namespaces' most (256), and an implicit "default" */

struct hv_driver_s {
    const hv_head_config_t *cfg; /* borrowed */
    hv_store_t *store;           /* borrowed */
    hv_driver_io_t io;
    hv_dnode_t *nodes;
    hv_djob_t *jobs; /* submission order (= scheduling order) */
    pending_t *pending;
    hv_jm_out_t out; /* scratch for one input */
    int stopping;
    hv_driver_room_fn room; /* slots an autoscaler can still add (hv_driver_set_room) */
    void *room_ud;
    uint64_t store_failed_logged; /* monotonic ms of the last "store failing" log */
    int store_down;               /* the last state write failed */
    uint64_t store_retry_at;      /* monotonic ms of the next retry of waiting decisions */
    uint64_t store_ok_since;      /* while store_down: monotonic ms of the first write that worked
                                   * since the last failure; 0 = none */
    char store_why[512];          /* while store_down: the line for clients */
    hv_joblogs_t *logs;           /* the job output files (owned) */
    hv_statecopies_t *copies;     /* the files of the jobs' state copies (owned) */
    hv_durable_t *durable;        /* the durable tier of the copies (owned; NULL: none) */
    hv_artifacts_t *arts;         /* the artifact store (borrowed; NULL: none) */
    struct copy_pub_s *pubs;      /* copies being synced off the loop (driver_copies.c) */
    hv_driver_observe_fn observe; /* told of each event (hv_driver_set_observer) */
    void *observe_ud;
    hv_driver_actor_hooks_t actors; /* the actors' part (hv_driver_set_actor_hooks) */
    hv_evq_t events;                /* events waiting for the store (evq.h) */
    /* Indexes of the model, looked up per message (hv__driver_index_*): nodes by id and by
     * name, jobs by id, workers by id. While idx_ok is 0 (an index could not grow) the lookups
     * walk the lists instead, so a failed allocation never loses a lookup. */
    hv_hmap_t node_ids, node_names, job_ids, worker_ids;
    int idx_ok;
    int sched_defer; /* inside one input that changes several things: schedule once at its end */
    /* The newest fleet decision's namespaces (driver_fleet.c's order: hv_driver_fleet_namespaces) */
    hv_fl_share_t fl_share[HV_DRIVER_NS_MAX];
    size_t fl_nshare;
    const hv_creds_t *creds;  /* makes the keepers' grants (hv_driver_set_creds; NULL: none) */
    uint64_t copy_bytes_head; /* bytes of copies stored at the head since it started */
    uint64_t copy_bytes_peer; /* ...and kept by peers (the index only passes the head) */
};

/* ---- lookups (the model in memory) ---------------------------------------------------------- */

static inline hv_djob_t *job_by_id(hv_driver_t *d, uint64_t id) {
    if (d->idx_ok) {
        return hv_hmap_get_u64(&d->job_ids, id);
    }
    for (hv_djob_t *j = d->jobs; j != NULL; j = j->next) {
        if (j->jm.id == id) {
            return j;
        }
    }
    return NULL;
}

static inline hv_dworker_t *worker_of(hv_djob_t *j, uint64_t id) {
    for (size_t i = 0; i < j->jm.nw; i++) {
        if (j->jm.w[i]->id == id) {
            return (hv_dworker_t *)j->jm.w[i];
        }
    }
    return NULL;
}

static inline int job_active(const hv_djob_t *j) { return !hv_job_state_terminal(j->jm.state); }

static inline hv_dnode_t *node_by_id(const hv_driver_t *d, uint64_t id) {
    if (d->idx_ok) {
        return hv_hmap_get_u64(&d->node_ids, id);
    }
    for (hv_dnode_t *n = d->nodes; n != NULL; n = n->next) {
        if (n->id == id) {
            return n;
        }
    }
    return NULL;
}

static inline hv_dnode_t *node_by_name(const hv_driver_t *d, const char *name) {
    if (d->idx_ok) {
        return hv_hmap_get_str(&d->node_names, name);
    }
    for (hv_dnode_t *n = d->nodes; n != NULL && name != NULL; n = n->next) {
        if (strcmp(n->name, name) == 0) {
            return n;
        }
    }
    return NULL;
}

/* The name of node node_id (ud: the driver), NULL when unknown; jobm's node_name callback. */
static inline const char *node_name_of(uint64_t node_id, void *ud) {
    const hv_dnode_t *n = node_by_id(ud, node_id);
    return n != NULL ? n->name : NULL;
}

/* 1 when some job's decisions or some event wait for the store. */
static inline int pending_unstored(const hv_driver_t *d) {
    if (!hv_evq_empty(&d->events)) {
        return 1;
    }
    for (const pending_t *p = d->pending; p != NULL; p = p->next) {
        if (!p->stored) {
            return 1;
        }
    }
    return 0;
}

static inline int wlive(const hv_dworker_t *w) { return hv_wk_state_active(w->jm.state); }

/* ---- driver_rows.c: the indexes (see hv_driver_s) --------------------------------------------- */

/* Indexes node n (after its id or name changed: old_id/old_name, 0/NULL for a new node), job j
 * and its workers, or the workers of j that are not indexed yet; un-indexes a job and its
 * workers before they are freed. A failed allocation turns the indexes off (idx_ok = 0). */
void hv__driver_index_node(hv_driver_t *d, hv_dnode_t *n, uint64_t old_id, const char *old_name);
void hv__driver_index_job(hv_driver_t *d, hv_djob_t *j);
void hv__driver_index_workers(hv_driver_t *d, hv_djob_t *j);
void hv__driver_unindex_job(hv_driver_t *d, hv_djob_t *j);

/* ---- driver.c ------------------------------------------------------------------------------- */

/* Stores j, then carries out out's actions; if the store fails they wait (after any already
 * waiting for j). out is emptied either way. */
void hv__driver_apply(hv_driver_t *d, hv_djob_t *j, hv_jm_out_t *out);

/* ---- driver_fleet.c ------------------------------------------------------------------------- */

/* One decision of the fleet policy: out.dec[i] is about jobs[i] (the active jobs, in order). */
typedef struct hv_driver_fleet_s {
    hv_fl_out_t out;
    hv_djob_t **jobs; /* owned array, borrowed jobs */
    size_t njobs;
    int unstored; /* a changed decision could not be stored: act on none */
} hv_driver_fleet_t;

/* Builds the policy's inputs from the tables, decides, and stores each decision that changed
 * with its job's row. HV_OK: f->out holds the decision, every part of it stored. Else nothing
 * to act on (f->unstored: the store failed; otherwise the policy could not decide and the
 * caller falls back to first come, first served). Either way hv__driver_fleet_fini after. */
hv_err hv__driver_fleet_decide(hv_driver_t *d, hv_driver_fleet_t *f);
void hv__driver_fleet_fini(hv_driver_fleet_t *f);
/* A decision in words for events and messages ("shrunk so that job 7 can start", ...). */
/* A job stopping at its next commit for another (driver.c fleet_preempt): stops it once every
 * member is at that commit, or at the bound (hv_jm_preempt_due). Called after its joins and on
 * the tick. */
void hv__driver_fleet_preempt_due(hv_driver_t *d, hv_djob_t *j);
void hv__driver_fleet_why(hv_fl_reason_t r, uint64_t cause, char *buf, size_t len);

/* ---- driver_rows.c -------------------------------------------------------------------------- */

/* A state write failed (what: the write, for the log): logged, and kept for clients
 * (hv_driver_store_trouble) until a write works again. */
void hv__driver_store_failed(hv_driver_t *d, hv_err rc, const char *what);

/* A state write worked: may end a failing spell. */
void hv__driver_store_worked(hv_driver_t *d);
/* A write of the head's state made beside the driver's own (an artifact's use, artifacts.c)
 * failed (rc != HV_OK; what: "record an artifact's use") or worked: the store's trouble follows
 * it as for the driver's own writes, so watchers hear of a failing store whichever write met it. */
void hv__driver_store_result(hv_driver_t *d, hv_err rc, const char *what);
/* Stores s[0..n) as j's throughput table (job_tput): HV_OK, or the store's failure (counted as
 * the store failing). */
hv_err hv__driver_tput_store(hv_driver_t *d, const hv_djob_t *j, const hv_tput_sample_t *s,
                             size_t n);

/* Ends a failing spell when nothing waits for the store and writes have worked for a while, or
 * at once when sure (every waiting decision was just written). */
void hv__driver_store_settle(hv_driver_t *d, uint64_t now, int sure);

/* The rows of a job, a worker, a node (r borrows the model's strings). */
void hv__driver_job_row(const hv_djob_t *j, hv_job_row_t *r);
void hv__driver_worker_row(const hv_dworker_t *w, hv_worker_row_t *r);
void hv__driver_node_row(const hv_dnode_t *n, hv_node_row_t *r);

/* Writes what changed of j (and its workers) in one transaction. */
hv_err hv__driver_persist(hv_driver_t *d, hv_djob_t *j);

/* A job from its row (the row's strings and spec move into the job); *out owned by the caller
 * until linked. */
hv_err hv__driver_job_from_row(hv_driver_t *d, hv_job_row_t *r, hv_djob_t **out);

/* Appends j to the driver's jobs (submission order, which is scheduling order). */
void hv__driver_job_link(hv_driver_t *d, hv_djob_t *j);

/* A job in memory, or loaded back from the store (hv_driver_job's, writable). */
hv_djob_t *hv__driver_job(hv_driver_t *d, uint64_t job_id);

/* hv_jm_fence for a Rendezvous call (what: "Done", "a copy of the state", ...); a refusal is
 * logged (HV-RDZV-FENCED). */
hv_err hv__driver_fence(const hv_djob_t *j, const hv_dworker_t *w, uint32_t gen, const char *what,
                        char *err, size_t errlen);

/* The job and worker of a rendezvous call (the job from memory, else from the store), or an
 * error for the caller in err: HV_ENOTFOUND, or HV_ESTATE when the job has ended. */
hv_err hv__driver_rdzv_find(hv_driver_t *d, uint64_t job_id, uint64_t worker_id, hv_djob_t **jo,
                            hv_dworker_t **wo, char *err, size_t errlen);

/* Loads nodes, active jobs with their workers and blacklists from the store (hv_driver_load's
 * reading part; driver.c then hands the drains in progress to the job machine). */
hv_err hv__driver_load_tables(hv_driver_t *d);

/* Frees a worker, a job with its workers (neither linked any more). */
void hv__driver_worker_free(hv_dworker_t *w);
void hv__driver_job_free(hv_djob_t *j);

/* ---- driver_events.c ------------------------------------------------------------------------ */

/* Logs the event, then stores it: at once when no other waits, else behind them (f: NULL for
 * none; msg: the message, at most 1 KiB). */
void hv__driver_event_v(hv_driver_t *d, uint64_t job_id, uint64_t node_id, const char *kind,
                        const hv_ev_fields_t *f, const char *data, const char *msg);

/* Writes the waiting events in order, stopping at the first that fails; returns how many were
 * written. */
size_t hv__driver_events_flush(hv_driver_t *d);

/* At the driver's destruction: a last try to write the waiting events (what still fails is
 * logged as lost), then the queue is freed. */
void hv__driver_events_fini(hv_driver_t *d);

/* ---- driver_access.c ------------------------------------------------------------------------ */

/* Counts one use of the join token that admitted a Join, once its node is stored. HV_EAUTH when
 * the token admits nobody any more, HV_EUNAVAIL when the store fails; err says why. */
hv_err hv__driver_jtoken_use(hv_driver_t *d, const hv_admit_t *a, char *err, size_t errlen);

/* ---- driver_copies.c ------------------------------------------------------------------------ */

/* A finished job's copies: the head's kept when the job failed, removed otherwise; the durable
 * one dropped unless the job failed. */
void hv__driver_job_forget_copy(hv_driver_t *d, hv_djob_t *j);

/* Each tick: the durable tier's finished operations, missing head copies, due writes and
 * restores. */
void hv__driver_tick_copies(hv_driver_t *d, uint64_t now);
/* Is the job's newest copy (jm.copy) the one a peer keeps (j->peer)? */
static inline int peer_newest(const hv_djob_t *j) {
    return j->peer.node_id != 0 && j->jm.copy.commit != 0 &&
           j->peer.copy.commit == j->jm.copy.commit &&
           j->peer.copy.generation == j->jm.copy.generation;
}
/* node's agent is gone (the node died, or a new agent replaced it): its copies went with its
 * memory. Their rows are forgotten (stored first) and each such job's newest copy falls back to
 * the head's. Called before its workers are lost, so a resume never counts on them. */
void hv__driver_peer_forget_node(hv_driver_t *d, uint64_t node_id);
/* The round that resumes j from its newest copy, when a peer keeps it: fills info from the
 * index row, with a fetch grant; 0 when the copy is not a peer's (the caller reads the head's). */
int hv__driver_peer_round(hv_driver_t *d, hv_djob_t *j, hv_round_info_t *info);

/* Copies still being synced when the driver goes: their files are removed when the sync ends,
 * and no one is told. */
void hv__driver_copies_orphan(hv_driver_t *d);

#endif
