/*
 * svc_rdzv: the Rendezvous service libhv talks to from inside train.bin. JoinRound is held until
 * the driver answers it (the round closed, the worker was removed, or it is refused); Done is
 * recorded by the driver before the reply; WatchMembers streams carry the driver's membership
 * pushes to every worker of a job; KvPut/KvGet are a small per-job store (e.g. an NCCL unique
 * id), kept here in memory until the job finishes, and KvGet may wait for a key; PutState hands
 * each chunk of a copy of a job's state to the driver (which writes it, syncs it off the loop at
 * its end and stores it before the call is answered), FetchState reads it back through a view.
 * This module owns the calls and the key-value store; every decision and every file is the
 * driver's. Loop thread only.
 */
#ifndef HV_HEAD_SVC_RDZV_H
#define HV_HEAD_SVC_RDZV_H

#include <stddef.h>
#include <stdint.h>

#include "driver.h"
#include "err.h"
#include "rpc.h"

typedef struct hv_svc_rdzv_s hv_svc_rdzv_t;

/* Registers the Rendezvous methods on srv; d is borrowed. */
hv_err hv_svc_rdzv_create(hv_rpc_server_t *srv, hv_driver_t *d, hv_svc_rdzv_t **out);
/* The driver's io: answers waiting joins with a closed round. */
void hv_svc_rdzv_round(hv_svc_rdzv_t *s, const hv_round_info_t *r, const uint64_t *to, size_t nto);
/* Answers one waiting join: rc HV_OK = removed from the job; else refused with why. */
void hv_svc_rdzv_answer(hv_svc_rdzv_t *s, uint64_t worker_id, hv_err rc, const char *why);
/* Sends a membership push to the job's watchers (code: why the round opened, an
 * hv_ev_reason_t, the wire's EventReason). */
void hv_svc_rdzv_push(hv_svc_rdzv_t *s, uint64_t job_id, uint32_t generation, int failure,
                      uint32_t code, const char *reason, const uint64_t *removed, size_t nremoved);
/* The job is over: fail its waits, end its streams, drop its keys. */
void hv_svc_rdzv_finished(hv_svc_rdzv_t *s, uint64_t job_id);
/* Expires KvGet waits. */
void hv_svc_rdzv_tick(hv_svc_rdzv_t *s, uint64_t now);
/* Frees the service; call after the rpc engine ended every call. A copy still being synced
 * frees it when it ends (its file is then removed: no row names it). NULL is a no-op. */
void hv_svc_rdzv_destroy(hv_svc_rdzv_t *s);

#endif
