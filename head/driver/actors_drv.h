/*
 * actors_drv: the head's table of actors and the plumbing around their pure state machine
 * (head/core/actors.h): every input (a create or kill from svc_actors, a process's start, address
 * or exit from an agent, a node lost or draining, a job's end) goes through the machine, the row
 * is stored, and only then are its orders sent down the node's Session (through the driver's
 * io). Placement uses the head's scheduler (head/core/sched.c) on the driver's nodes, after the
 * jobs were placed; an actor's slots are claimed in the same node accounting as workers', so jobs
 * and actors never share a slot. Loaded from the store at start: live actors are kept and their
 * slots claimed again; the first heartbeat of each node's agent says which of their processes
 * still run (the driver's reconcile).
 *
 * Each actor's processes' output goes to a log of its own (joblog.h, hv_joblog_open_actor), as
 * a job's workers' do; the logs of the HV_ACTORS_DEAD_LOGS_KEPT actors that died last are kept.
 *
 * Not here: the gRPC methods (head/services/svc_actors.c), the per-actor secret (auth.c derives
 * it from the head key, svc_cluster puts it in the spawn order), the agent's side (agent/
 * workers.c: the HV_ACTOR_* environment and the address file). Loop thread only.
 */
#ifndef HV_HEAD_ACTORS_DRV_H
#define HV_HEAD_ACTORS_DRV_H

#include <stddef.h>
#include <stdint.h>

#include "actorfig.h"
#include "actors.h"
#include "driver.h"

/* One actor (read-only outside actors_drv.c). */
typedef struct hv_dactor_s {
    hv_am_actor_t am;             /* the machine's view */
    char *name, *ns, *class_name; /* owned */
    uint8_t *spec;                /* the packed JobSpec its processes are spawned with (owned) */
    size_t spec_len;
    char *reason;  /* the last event's words (owned) */
    char *address; /* host:port of its live process; "" when none (owned) */
    uint32_t max_call_retries, slots, gpus;
    char *labels;           /* node labels it needs, "k=v,k=v" ("" none; owned) */
    uint64_t memory_mb;     /* MiB of its node's memory it needs (0 none); held while proc_live */
    uint64_t gpu_mask;      /* GPUs its live process holds */
    uint64_t next_gpu_mask; /* moving: the GPUs reserved with am.next_node */
    char state_digest[65];  /* am.has_state: the saved state, an artifact (sha256 hex) */
    uint64_t state_size;
    char saved_digest[65]; /* the state the ending process just saved (in memory until its exit
                            * is stored; "" = none) */
    uint64_t saved_size;
    char saved_why[200]; /* the ending process saved a state that is not kept: why ("" none;
                          * in memory until its exit is stored, like saved_digest) */
    uint64_t created_ms, started_ms, ended_ms;
    uint64_t place_after;     /* monotonic ms: a restart after a failure waits (not stored) */
    uint64_t notice_deadline; /* monotonic ms: moving, its process is stopped to save by then
                               * even with no slot for the replacement (0: none; not stored) */
    int never_fits;           /* the last placement found no node that could ever hold it */
    char *wait_why;           /* why the last placement left it waiting (owned; not stored) */
    char *note;               /* the autoscaler's word on it ("" none; owned; not stored) */
    hv_actorfig_t fig;        /* its call figures over its processes (table actor_figures) */
    uint64_t fig_ms;          /* wall clock of the last report of them (0: none yet) */
    struct hv_joblog_s *log;  /* its processes' output (store/joblog.h; owned, made at its first
                               * line; open while log_open) */
    int log_open;             /* log is open for appends */
    int log_gone;             /* its log file was removed (one of the dead beyond the kept) */
    struct hv_dactor_s *next;
} hv_dactor_t;

typedef struct hv_actors_s hv_actors_t;

/* d and store borrowed, must outlive the table. Installs the driver's actor hooks. */
hv_err hv_actors_create(hv_driver_t *d, hv_store_t *store, hv_actors_t **out);
/* Loads every stored actor; live ones claim their slots again. After hv_driver_load. On failure
 * err says why (the head does not start). */
hv_err hv_actors_load(hv_actors_t *a, char *err, size_t errlen);
void hv_actors_destroy(hv_actors_t *a);

/* The dead actors whose logs are kept (the last to die); the older ones' files are removed. */
#define HV_ACTORS_DEAD_LOGS_KEPT 64

/* A page of actor x's output log from byte offset (joblog.h hv_joblog_read_page: at most
 * max_lines lines, about max_bytes bytes). A log removed or never written is an empty page. */
hv_err hv_actors_log_read(hv_actors_t *a, const hv_dactor_t *x, uint64_t offset, size_t max_lines,
                          size_t max_bytes, hv_joblog_page_t *out);
/* Frees what hv_actors_log_read gave (also after a failure). */
void hv_actors_log_page_free(hv_joblog_page_t *p);

/* What a create asks for. Borrowed. */
typedef struct hv_actor_new_s {
    const char *name; /* "" = unnamed */
    const char *ns;   /* the namespace */
    const char *class_name;
    const uint8_t *spec; /* the packed JobSpec of its processes */
    size_t spec_len;
    uint32_t slots, gpus, max_restarts, max_call_retries;
    const char *labels; /* node labels it needs, "k=v,k=v" (NULL or "": none) */
    uint64_t memory_mb; /* MiB of a node's memory (0: none) */
    uint64_t owner_job; /* 0: detached */
} hv_actor_new_t;

/* Creates, stores and tries to place an actor. HV_EEXIST: the name is taken by an actor of the
 * namespace that is not dead; HV_EUNAVAIL: the store failed (nothing was created). err says why.
 * An actor no node of the cluster can ever hold (labels, memory, slots, GPUs) is created
 * pending all the same, its reason saying so: a node that can may join (the autoscaler's). *out
 * borrowed. */
hv_err hv_actors_new(hv_actors_t *a, const hv_actor_new_t *c, const hv_dactor_t **out, char *err,
                     size_t errlen);
/* Kill with or without restart. HV_ENOTFOUND, HV_ESTATE (already dead; nothing to restart),
 * HV_EUNAVAIL (the store failed: nothing done). */
hv_err hv_actors_kill(hv_actors_t *a, uint64_t id, int restart, char *err, size_t errlen);

const hv_dactor_t *hv_actors_get(const hv_actors_t *a, uint64_t id);
/* The actor of that name in ns that is not dead, else the newest dead one; NULL: none. */
const hv_dactor_t *hv_actors_by_name(const hv_actors_t *a, const char *ns, const char *name);
/* Every actor, by id. */
const hv_dactor_t *hv_actors_all(const hv_actors_t *a);
/* MiB of node_id's memory taken by the actors whose process is live there. */
uint64_t hv_actors_node_memory(const hv_actors_t *a, uint64_t node_id);
/* 1 when x waits for a node that no node taking work now could ever hold (its reason says
 * what is missing); 0 when it waits for room, or does not wait. */
int hv_actors_unplaceable(const hv_dactor_t *x);
/* 1 when x waits for a node now (hv_am_is_demand: pending, restarting or moving without a
 * reserved slot; placement found none; no restart backoff holds it; now_ms: monotonic). What
 * the autoscaler buys nodes for. */
int hv_actors_waiting(const hv_dactor_t *x, uint64_t now_ms);
/* The autoscaler's word on actor id ("the autoscaler is buying a node for it: ..."; "" clears
 * it): its reason becomes the placement's reason and this. a may be NULL. */
void hv_actors_set_note(hv_actors_t *a, uint64_t id, const char *note);
/* The node's name, "" when none. */
const char *hv_actors_node_name(hv_actors_t *a, const hv_dactor_t *x);

#endif
