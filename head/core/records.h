/*
 * records: the records of the head's state as the store keeps them and the driver's views
 * (driver/views.h) hand them to the services: plain structs, one per table a service reads
 * (nodes, jobs, worker attempts, events, autoscaler instances, the audit trail, join tokens,
 * state copies, revoked node credentials). The store (head/store/store.h) fills, writes and frees
 * them; nothing here does I/O.
 *
 * Ownership: a record filled by the store owns its char* / uint8_t* fields (freed with the
 * store's or the view's matching free); one passed in to be written is borrowed.
 */
#ifndef HV_HEAD_CORE_RECORDS_H
#define HV_HEAD_CORE_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#include "events.h"

typedef struct hv_node_row_s {
    uint64_t id;       // assigned by the store
    char *name;        // unique node name (required for upsert)
    char *addrs;       // comma-separated addresses the agent advertises
    char *labels;      // "k=v,k=v"
    char *instance_id; // provider instance id, "" if none
    char *state;       // "alive" | "dead" | "draining"
    char *peer;        // address the head saw the agent connect from
    uint32_t slots, gpus, cpus;
    int preemptible;      // 0 or 1
    uint64_t incarnation; // agent incarnation (stored as signed 64 bit, full range kept)
    uint64_t registered_ms, last_seen_ms; // wall-clock ms
    uint64_t memory_mb; // the memory its agent reported at its join, MiB (0: unknown)
} hv_node_row_t;

#define HV_STORE_SPEC_DIGESTS_MAX 257 /* artifacts one job's spec uses: a binary and 256 files */

typedef struct hv_job_row_s {
    uint64_t id; // assigned by the store; never reused
    char *name;
    char *state;   // "pending" | "placing" | "running" | "succeeded" | "failed" | "cancelled"
    char *reason;  // why the job is in its state ("" if nothing to say)
    uint8_t *spec; // the packed JobSpec, opaque to the store; may be NULL when spec_len is 0
    size_t spec_len;
    uint32_t np, min_np, max_np, max_resets, timeout_s, resets, generation;
    uint64_t submitted_ms, started_ms, ended_ms; // wall-clock ms, 0 = not yet
    /* v3: elastic settings (fixed at submission) */
    int elastic;                                // 0 or 1
    uint32_t check_every;                       // commits between membership checks
    uint32_t elastic_timeout_s, rdzv_timeout_s; // round bounds
    uint32_t cooldown_min_s, cooldown_max_s;    // blacklist cooldown range (0 = off)
    uint32_t max_strikes;                       // strikes before a permanent bar (0 = never)
    uint32_t slots_per_host;                    // placement limit (0 = none)
    /* v3: the newest round */
    uint32_t size, cross_size;      // members and nodes of the last closed round
    int round_open, round_rollback; // 0 or 1
    char *round_reason;             // why the newest round opened
    uint64_t round_opened_ms, round_deadline_ms, round_fail_at_ms; // wall-clock ms
    uint32_t target_np;  // v4: elastic: the size asked for now (0 = max_np)
    uint32_t resume_gen; // v7: the round that resumed the job from a copy (0 = none)
    uint32_t resumes;    // v7: how many times every member was lost and the job resumed
    /* v9: the digests of the artifacts the spec uses (its binary, its files), borrowed; written
     * by hv_store_job_insert in the job's transaction (job_artifacts), never read back here. */
    const char *const *artifacts;
    size_t nartifacts;
    uint32_t round_code; // v10: why the newest round opened (hv_ev_reason_t; 0 = none)
    /* v18: sharing the cluster (issue 26; head/core/fleet.h) */
    int32_t priority;      // higher goes first (hvsubmit --priority; 0 by default)
    int preemptible;       // may be stopped to resume later from its state copy
    uint32_t fleet_target; // the fleet policy's newest target size (0: waits, or none yet)
    char *fleet_reason;    // its reason's stable word ("admitted", "shrunk_admit", ...; "": none)
    uint64_t fleet_cause;  // the job the reason names (0: none)
    uint64_t fleet_ms, resized_ms; // wall ms: when decided; when last started or resized
    char *ns; // v19: its namespace (hvsubmit --namespace: actors, quotas, fair share; "": default)
} hv_job_row_t;

typedef struct hv_worker_row_s {
    uint64_t id;      // assigned by the store; never reused
    uint64_t job_id;  // must name an existing job (HV_EINVAL otherwise)
    uint64_t node_id; // 0 = not placed yet
    uint32_t rank, attempt, local_rank, local_size, generation;
    int gpu; // -1 = none
    int pid, exit_code, term_signal;
    char *state; // "pending" | "starting" | "running" | "exited" | "lost" | "killed" | "left"
    char *reason;
    uint64_t started_ms, ended_ms; // wall-clock ms, 0 = not yet
    /* v3: membership (generation above is the round the worker was placed in) */
    uint32_t member_gen, joined_gen; // last and first round it was a member of (0 = none)
    uint32_t cross_rank;             // in member_gen (rank, local_rank, local_size too)
    int done, removed;               // reported Done; taken out of the job by the head
    char *addr;                      // data-plane address from its last JoinRound
} hv_worker_row_t;

typedef struct hv_event_row_s {
    uint64_t seq;     // strictly increasing, never reused
    uint64_t time_ms; // wall-clock ms when appended
    uint64_t job_id;  // 0 = none
    uint64_t node_id; // 0 = none
    char *kind, *message;
    char *data;       // a JSON object with the event's fields, or "" (v3)
    hv_ev_fields_t f; // v10: its structured fields (f.node_id = node_id; all 0 in older rows
                      // but rounds', which the migration filled from their data)
    char *node;       // v10: the node's name ("" = none, or an older row)
} hv_event_row_t;

typedef struct hv_instance_row_s {
    char *id;                      // the head's instance id, decimal (required)
    char *provider;                // provider name ("local", "command", "spot-sim")
    char *state;                   // "launching", "running", "draining", "terminating", "ended"
    char *node_name;               // the node name its agent joins with
    uint64_t price_milli;          // price in thousandths of a currency unit per hour
    uint64_t created_ms, ended_ms; // wall-clock ms, ended 0 = still running
    char *type;                    // node type (v4)
    char *handle;                  // the provider's handle to adopt it again (v4)
    uint64_t joined_ms;            // wall-clock ms its agent joined, 0 = not yet (v4)
    char *reason;                  // why it ended (v4)
    int preempted;                 // a preemption ended it (v4)
} hv_instance_row_t;

/* One call that changed something, or was refused. Never a secret: who_id is a client token's
 * name, a node id or a join token's id. */
typedef struct hv_audit_row_s {
    uint64_t seq;      // set by the store (ascending)
    uint64_t time_ms;  // wall clock
    char who_kind[16]; // "client", "node", "worker", "join-token", "none"
    char who_id[64];   // the client token's name, the node id, the join token's id; "" none
    char peer[64];     // the caller's address
    char method[64];   // the gRPC method's name ("Submit", "Join")
    char target[64];   // what it acts on: "job 3", "node gpu1", "token abc123"; "" none
    int code;          // gRPC status code, 0 = OK
    char result[256];  // "OK" or "<CODE NAME>: <message>"
} hv_audit_row_t;

typedef struct hv_audit_filter_s {
    uint64_t before_seq; // only rows with seq below it (paging); 0 = from the newest
    uint64_t since_ms;   // only rows at or after it (wall clock); 0 = all
    const char *who;     // a who_id or a who_kind; NULL or "" = anyone
    const char *method;  // a method name; NULL or "" = any
    int refused_only;    // only rows with a code other than OK
    uint32_t limit;      // at most this many rows; 0 = no limit
} hv_audit_filter_t;

typedef struct hv_jtoken_row_s {
    char id[16];                     // shown (core/creds.h: HV_JTOKEN_ID_LEN characters)
    char secret_sha256[65];          // hex SHA-256 of the secret; the secret itself is never stored
    uint64_t created_ms, expires_ms; // wall clock; expires 0 = never
    uint32_t max_uses, uses;         // max 0 = unlimited
    uint64_t revoked_ms;             // 0 = not revoked
    char created_by[64];             // the client token's name that made it
} hv_jtoken_row_t;

typedef struct hv_copy_row_s {
    uint64_t job_id;
    uint32_t generation; // the round the copy was committed in
    uint64_t commit;     // the sender's commit count
    uint64_t size;       // bytes
    char sha256[65];     // hex
    char path[512];      // the file under <data>/states/
    uint64_t stored_ms;  // wall clock
} hv_copy_row_t;

/* A copy kept by a peer (issue 28 §3): which node's agent holds which generation of a job's
 * state in memory (schema v20, peer_copies; one row per job, the newest). copy.path is unused
 * (""); the copy is named by the keeper's node, the incarnation of its agent that took it (a
 * restarted agent holds nothing) and the address its copy endpoint had. */
typedef struct hv_peer_copy_row_s {
    hv_copy_row_t copy;
    uint64_t node_id;     // the keeper
    uint64_t incarnation; // its agent's incarnation when it acked
    char addr[256];       // its copy endpoint ("host:port")
} hv_peer_copy_row_t;

/* What a job measured at one world size (schema v21, job_tput): work (steps, each counted once
 * for the job) done in seconds of running at that size; the fleet policy's goodput model fits it
 * (core/tput.h, hv_tput_sample_t). One row per job and size. */
typedef struct hv_tput_row_s {
    uint64_t job_id;
    uint32_t size;
    double work;
    double seconds;
} hv_tput_row_t;

typedef struct hv_revoked_row_s {
    uint64_t node_id, incarnation; /* the credential: a node and its agent's incarnation */
    uint64_t revoked_ms;           /* wall clock; 0 for those imported from the old file */
} hv_revoked_row_t;

/* A page of an output log (a job's or an actor's) read back: its whole lines from an offset
 * (store/joblog.c hv_joblog_read_page fills it). */
typedef struct hv_joblog_line_s {
    uint32_t rank, stream; /* stream 1 stdout, 2 stderr */
    char *text;            /* into the page's buf */
} hv_joblog_line_t;

typedef struct hv_joblog_page_s {
    char *buf;               /* owned: the lines' text */
    hv_joblog_line_t *lines; /* owned: n of them */
    size_t n;
    uint64_t next_offset; /* the byte after the last whole line read */
    int more;             /* lines follow that did not fit (max_lines or max_bytes) */
} hv_joblog_page_t;

#endif
