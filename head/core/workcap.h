/*
 * workcap: what a job's worker credential (hvw_<job>_<worker>_<mac>, services/auth.h) may still
 * do, as pure decisions (no I/O, no clock, no allocation; table-tested in workcap_test.c):
 *
 *   - whether it is alive: only while its job has not ended. Once the job succeeded, failed or
 *     was cancelled, or once the head no longer knows it (history retention pruned it), the
 *     credential is useless on every service; nothing is ever assumed of a job the head does
 *     not know (no namespace "default" for it);
 *   - where, and as whom, an actor it creates may run: as its job's workers run. A worker is
 *     held to the run-as identity of the node it runs on (the agent declares it as the node
 *     label hv.run_as=<user>: its --run-as user, or the agent's own), and the actor's label
 *     demand gets that label, so placement, restarts and moves only ever use nodes whose
 *     workers run as that same user. The request is refused when the worker's node declares no
 *     identity, when it asks for another one, or when no node that could take work runs as
 *     that user with the labels asked for.
 *
 * A client token is not held by these rules: it may do everything (docs/security.md).
 */
#ifndef HV_HEAD_WORKCAP_H
#define HV_HEAD_WORKCAP_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "jobm.h"

/* The node label an agent declares its workers' user with (agent/main.c sets it). */
#define HV_WCAP_RUN_AS_LABEL "hv.run_as"

/* A worker credential's job as the head knows it (in memory, or from its store). */
typedef struct hv_wcap_job_s {
    int known;            /* 0: the head does not know the job (pruned, or never stored) */
    hv_job_state_t state; /* when known */
} hv_wcap_job_t;

/* Whether the credential of job_id's workers may still be used: HV_OK while its job is known and
 * has not ended; else HV_EAUTH with why (whylen bytes): the job ended (its state), or the head
 * no longer knows it. */
hv_err hv_wcap_live(uint64_t job_id, const hv_wcap_job_t *j, char *why, size_t whylen);

/* The run-as identity a node's labels ("k=v,k=v" as stored) declare, into out (len bytes): 1,
 * or 0 when they declare none ("" in out). */
int hv_wcap_node_identity(const char *labels, char *out, size_t len);

/* An actor that a worker of job_id creates from a node with labels worker_node: want is the
 * label demand it asked for ("k=v,k=v"; NULL or "": none), nodes[0..n) the labels of the live
 * nodes (not dead). HV_OK and the actor's label demand in out (outlen bytes): want with
 * hv.run_as=<identity> added (kept once when it asked for that very one). HV_EPERM and why
 * (whylen bytes) when the worker's node declares no identity, when want asks for another
 * identity, or when no node in nodes runs as that identity and carries want; HV_EINVAL when
 * the demand would have more than 64 labels or not fit out. */
hv_err hv_wcap_actor_labels(uint64_t job_id, const char *worker_node, const char *want,
                            const char *const *nodes, size_t n, char *out, size_t outlen, char *why,
                            size_t whylen);

#endif
