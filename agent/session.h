/*
 * session: hvagent's connection to the head. It joins the cluster (unary Cluster/Join), holds
 * the node's lease over one bidirectional Cluster/Session stream (hello, then a heartbeat every
 * heartbeat_ms), reconnects with backoff when the stream ends (Join again with the same
 * incarnation, then a new Session), and carries what the node reports:
 *   - events that must not be lost (worker started / exited) get seq 1, 2, 3... and are kept until
 *     the head acknowledges them (HeadMsg.ack_seq), then re-sent in order after a reconnect;
 *   - worker output lines, batched per worker and stream (at most HV_SESSION_LOG_BATCH bytes a
 *     message), buffered up to a bound while the head is unreachable, oldest lines dropped first
 *     (the worker's stream later gets one line saying how many were dropped).
 * Orders from the head (spawn, kill, drain, shutdown) are handed to the owner; the session does
 * not act on them. It knows nothing about processes (agent/workers.c) or the CLI (main.c).
 *
 * Threads: everything runs on the loop thread of the rpc engine; callbacks run there.
 */
#ifndef HV_AGENT_SESSION_H
#define HV_AGENT_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "callfig.h"
#include "err.h"
#include "hv.pb-c.h"
#include "rpc.h"

#define HV_SESSION_JOIN_TIMEOUT_MS 10000    /* deadline of one Join call */
#define HV_SESSION_BACKOFF_MIN_MS 200       /* first reconnect delay */
#define HV_SESSION_BACKOFF_MAX_MS 5000      /* reconnect delay cap */
#define HV_SESSION_LOG_BATCH (256u * 1024u) /* bytes of lines in one LogLines message */
#define HV_SESSION_LOG_BUFFER (4u << 20)    /* default bound of buffered log bytes */
#define HV_SESSION_INFLIGHT_MAX 64          /* log messages queued in the rpc layer at once */

typedef struct hv_session_s hv_session_t;

/* A live worker, as the hello and heartbeats report it. */
typedef struct hv_session_running_s {
    uint64_t worker_id;
    int pid;
} hv_session_running_t;

/* The owner's side. Every callback is optional except running. */
typedef struct hv_session_cbs_s {
    /* The head accepted a Join (first = 1 for the first one of this process). cluster is the
     * head's cluster name (borrowed). */
    void (*on_joined)(hv_session_t *s, int first, uint64_t node_id, const char *cluster, void *ud);
    /* A Session stream got its first answer from the head (first = 1 the first time in this
     * process): the node is registered and holds its lease. */
    void (*on_connected)(hv_session_t *s, int first, void *ud);
    /* An order (HeadMsg with a spawn, kill, drain or shutdown body); m is borrowed. */
    void (*on_order)(hv_session_t *s, const Hvpb__V1__HeadMsg *m, void *ud);
    /* The session gave up for good: the first Join was refused (HV_EPERM, HV_EINVAL,
     * HV_ENOTSUP) or the head stayed unreachable for connect_timeout_ms (HV_EUNAVAIL). msg says
     * why. The session is stopped when this runs. */
    void (*on_fatal)(hv_session_t *s, hv_err rc, const char *msg, void *ud);
    /* No Session with the head for longer than lease_ms since the last message from it. Once per
     * disconnection. */
    void (*on_lease_expired)(hv_session_t *s, void *ud);
    /* Required: the workers running now. Returns the count; *out is an owned array (hv_free),
     * NULL when the count is 0. */
    size_t (*running)(hv_session_running_t **out, void *ud);
    void *ud;
} hv_session_cbs_t;

typedef struct hv_session_config_s {
    const char *head;               /* "host:port", for messages */
    const char *token;              /* join token ("" if none) */
    uint64_t incarnation;           /* random per agent process, nonzero */
    const Hvpb__V1__NodeInfo *node; /* what the node says about itself; deep-copied */
    uint32_t connect_timeout_ms;    /* how long the first Join may keep failing (0 = 30 s) */
    size_t log_buffer;              /* bound on buffered log bytes (0 = HV_SESSION_LOG_BUFFER) */
} hv_session_config_t;

/* Creates the session and starts joining at once. e and ch are borrowed (ch: the head's channel,
 * shared with the artifact cache) and must outlive the session; cfg is copied. */
hv_err hv_session_create(uv_loop_t *loop, hv_rpc_engine_t *e, hv_rpc_channel_t *ch,
                         const hv_session_config_t *cfg, const hv_session_cbs_t *cbs,
                         hv_session_t **out);

/* Queues the reliable events. reason is copied (NULL = ""). HV_ENOMEM is the only error; the
 * event is then lost and logged. */
hv_err hv_session_worker_started(hv_session_t *s, uint64_t worker_id, int pid);
/* An actor's process (worker_id from the head's actor space) listens at address (copied): the
 * same start event again, with the address, numbered and kept like the others. */
hv_err hv_session_worker_address(hv_session_t *s, uint64_t worker_id, int pid, const char *address);
hv_err hv_session_worker_exited(hv_session_t *s, uint64_t worker_id, int exit_code, int term_signal,
                                const char *reason);
/* The same, for an actor's process that left a saved state: data (len bytes, copied; at most
 * HV_SESSION_STATE_MAX) travels with the exit event, kept and re-sent like it. */
#define HV_SESSION_STATE_MAX (1u << 20)
hv_err hv_session_actor_exited(hv_session_t *s, uint64_t worker_id, int exit_code, int term_signal,
                               const char *reason, const void *data, size_t len);
/* The same, for a larger state (over HV_SESSION_STATE_MAX): uploaded to the head first
 * (hv_artifact_put) and named by digest (64 hex) and size; or, with why (not NULL or ""), a
 * saved state of size bytes that could not be sent, and why (the head says so in the actor's
 * events). Strings copied. */
hv_err hv_session_actor_exited_ref(hv_session_t *s, uint64_t worker_id, int exit_code,
                                   int term_signal, const char *reason, const char *digest,
                                   uint64_t size, const char *why);

/* An actor's process's call figures (common/callfig.h; f copied). Not final: its running
 * totals, sent now if the stream is open and has room, else dropped (HV_EAGAIN: the next report
 * carries them; HV_EUNAVAIL). final: its last figures, a reliable event numbered and kept like an exit; queue
 * it just before the process's exit. */
hv_err hv_session_actor_figures(hv_session_t *s, uint64_t worker_id, const hv_callfig_t *f,
                                int final);

/* Queues one output line of a worker (stream 1 = stdout, 2 = stderr). line is copied; len at
 * most HV_PROC_LINE_MAX is expected (longer lines are cut here too). Never fails: under memory
 * pressure or over the buffer bound the oldest lines are dropped and counted. */
void hv_session_log(hv_session_t *s, uint64_t worker_id, int stream, const char *line, size_t len);

/* Tells the head the node should be drained (preemption notice); sent now and again on every
 * new stream until the node is undrained, each time with the time left until deadline_ms from
 * now (0 = unknown) and followed by a heartbeat. Also marks the node draining in heartbeats.
 * reason is copied. */
void hv_session_drain_notice(hv_session_t *s, const char *reason, uint32_t deadline_ms);
/* draining = 1: marks the node draining in heartbeats (after a DrainOrder). draining = 0
 * (undrain): heartbeats say not draining and a notice given before is forgotten (not sent
 * again on the next stream). */
void hv_session_set_draining(hv_session_t *s, int draining);
/* 1 while heartbeats say draining. */
int hv_session_draining(const hv_session_t *s);

/* The node credential the head gave in the last Join ("" before one): the key of the grants
 * this agent's Keeper service checks (agent/keeper.h). Borrowed; valid until the next Join. */
const char *hv_session_credential(const hv_session_t *s);
/* 1 once the head answered a heartbeat sent after the last drain notice on the same stream:
 * the stream is ordered, so the head has read the notice. 0 before, and after an undrain. */
int hv_session_drain_confirmed(const hv_session_t *s);

/* True while a Session stream is open and the head answered on it. */
int hv_session_connected(const hv_session_t *s);
/* Reliable events not yet acknowledged by the head. */
size_t hv_session_unacked(const hv_session_t *s);
/* Lines dropped so far because the buffer was full (all workers). */
uint64_t hv_session_dropped_lines(const hv_session_t *s);
/* Node id from the last JoinReply (0 before the first join). */
uint64_t hv_session_node_id(const hv_session_t *s);
/* Heartbeat interval and lease from the last JoinReply (defaults before the first join). */
uint32_t hv_session_lease_ms(const hv_session_t *s);

/* Stops reconnecting and half-closes the stream (queued messages still go out). The rpc call,
 * if any, ends when the head closes it or when the engine is destroyed. Idempotent. */
void hv_session_stop(hv_session_t *s);

/* Stops, closes the timers and frees the session once they are closed. Call after
 * hv_rpc_engine_destroy (no call may still reference the session). destroy(NULL) is a no-op. */
void hv_session_destroy(hv_session_t *s);

#endif
