/*
 * events: the structured fields of one event of the head's event log (the wire's Event fields
 * after `message`), and the codes for why a round opened or a job ended. The pure core (jobm)
 * fills them with each event it emits, the driver adds the node's name and appends them with
 * the event (head/store/store.c), and the services put them on the wire (proto/hv.proto: Event,
 * EventReason). Clients (hvsubmit, hvctl, the metrics, the status page) decide on these fields
 * and on the event's kind, never on its English message.
 *
 * What it is not: the event log itself (store.c) or the list of kinds (docs/internals.md).
 * Pure: no I/O. The numbering of hv_ev_reason_t and of job_state is the wire's, so a value
 * crosses unchanged; only append.
 */
#ifndef HV_HEAD_CORE_EVENTS_H
#define HV_HEAD_CORE_EVENTS_H

#include <stddef.h>
#include <stdint.h>

/* Why a round opened, or why a job ended. Values are the wire's EventReason. */
typedef enum hv_ev_reason {
    HV_EV_NONE = 0,             /* none, or an event stored before the codes */
    HV_EV_START = 1,            /* a job's first round */
    HV_EV_FAILURE = 2,          /* a member failed: roll back */
    HV_EV_DATA_PLANE = 3,       /* a member re-joined after its data plane failed: roll back */
    HV_EV_DRAIN = 4,            /* members leave a draining node */
    HV_EV_GROW = 5,             /* new workers join */
    HV_EV_SHRINK = 6,           /* the job is made smaller (not done by hv today) */
    HV_EV_RESUME = 7,           /* every member was lost: new workers load the head's copy */
    HV_EV_SUCCEEDED = 8,        /* the job's training finished */
    HV_EV_CANCELLED = 9,        /* a user cancelled the job */
    HV_EV_WORKER_FAILED = 10,   /* a worker failed and the job cannot go on */
    HV_EV_NO_SURVIVOR = 11,     /* no member of the last round is left to hold the state */
    HV_EV_MAX_RESETS = 12,      /* a reset was needed past --max-resets */
    HV_EV_ROUND_TIMEOUT = 13,   /* a round could not form in time */
    HV_EV_PENDING_TIMEOUT = 14, /* the job waited too long for slots */
    HV_EV_PREEMPT = 15,         /* the fleet stops the job at its next commit (rank 0 sends that
                                   commit's copy first); the round never forms */
    HV_EV__COUNT
} hv_ev_reason_t;

/* An event's fields; zero-initialised means "none" for each. */
typedef struct hv_ev_fields_s {
    uint32_t generation;   /* the round (round.*, job.resume); 0 = none */
    hv_ev_reason_t reason; /* why the round opened or the job ended */
    uint64_t node_id;      /* the node (a worker's, for worker.*); 0 = the event's own, if any */
    uint64_t worker_id;    /* worker.*: the worker; 0 = none */
    uint32_t rank;         /* its rank (with worker_id) */
    uint64_t duration_ms;  /* round.close: how long the round gathered */
    uint32_t job_state;    /* job.state: HV_EV_JOB_STATE(the new hv_job_state_t); 0 = none */
    int rollback;          /* round.open/close: the round rolls back */
    uint64_t actor_id;     /* actor.*: the actor; 0 = none */
} hv_ev_fields_t;

/* The wire's JobState of an hv_job_state_t (the head's enum counts from 0, the wire's from 1). */
#define HV_EV_JOB_STATE(s) ((uint32_t)(s) + 1u)

/* "failure", "drain", ...; "" for HV_EV_NONE and unknown values. Stable: hvctl --json and the
 * status page print them. */
const char *hv_ev_reason_name(hv_ev_reason_t r);

/* The reason a reset round counts under in the metrics (hv_resets_total{reason}): a round that
 * rolls back is a failure (resume and data-plane re-joins included), then drain, grow, shrink (a
 * preemption's stop included); anything else "other". Returns HV_EV_FAILURE, HV_EV_DRAIN, HV_EV_GROW, HV_EV_SHRINK or
 * HV_EV_NONE (other). */
hv_ev_reason_t hv_ev_reset_class(hv_ev_reason_t r, int rollback);

/* A top-level field of a JSON object (nested objects and strings are skipped, so a key inside a
 * value never matches). 1 when found and of the type asked; 0 otherwise (out untouched). The
 * string is unescaped into buf (truncated to len-1 bytes; \u escapes become '?'). */
int hv_ev_json_u64(const char *json, const char *key, uint64_t *out);
int hv_ev_json_bool(const char *json, const char *key, int *out);
int hv_ev_json_str(const char *json, const char *key, char *buf, size_t len);

#endif
