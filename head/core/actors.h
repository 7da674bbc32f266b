/*
 * actors: the pure state machine of one actor as the head keeps it (issue 17). An actor is one
 * long-lived process of a registered class (worker_lib/include/hv/actor.h) with a resource
 * demand, an optional name unique within a namespace, an owner (none: detached; or the job that
 * created it) and a restart policy. This module decides what each input means: its new state and
 * the actions the driver carries out (record the row, spawn a process on a node, kill one, give
 * the node's slot back, announce an event). No I/O, no clock, no allocation; placement itself
 * (which node) is the caller's (head/core/sched.c through the driver), and so is storing.
 *
 * At most one process of an actor exists at a time: a process is ordered (proc_live), reports
 * its address, and ends. Each process has an incarnation number (1, 2, ...); an event about an
 * older incarnation is stale and ignored. A restart after a failure is placed only once the
 * previous process is gone. A move (a drain or preemption notice of the actor's node) is make
 * before break: the actor goes `moving`, its process keeps serving while a slot for the
 * replacement is sought; once one is reserved (RESERVE) the old process is stopped (it answers
 * the calls it received and saves its state), and when it has ended the replacement is spawned
 * on the reserved node with the saved state (the driver stored it first; none saved: from its
 * constructor). When the notice runs out before a slot is found the process is stopped anyway
 * (its state saved) and the replacement is placed with that state when a node has room.
 *
 * States and what moves them:
 *   pending     created, waiting for a node with room      -> starting (placed)
 *   starting    a process was ordered, address unknown     -> alive (started), restarting/dead
 *   alive       the process listens at its address         -> restarting/dead
 *   restarting  the process ended (or is being stopped) and a new one will be placed
 *   moving      its node is draining: the process serves (or is saving) while the replacement
 *               is placed                                  -> starting (replacement spawned)
 *   dead        final, with a cause: exited (on its own with status 0, or its restarts were 0),
 *               killed, node lost, preempted, out of restarts, owner ended
 * A process that fails (non-zero status, a signal, its node lost) is restarted while
 * restarts < max_restarts (each restart counts, also one asked by kill --restart); a drain or
 * preemption notice moves the actor without counting a restart. Callers are reentrant-safe:
 * the machine only touches the actor and the output given.
 */
#ifndef HV_HEAD_ACTORS_H
#define HV_HEAD_ACTORS_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef enum hv_am_state {
    HV_AM_PENDING = 0,
    HV_AM_STARTING = 1,
    HV_AM_ALIVE = 2,
    HV_AM_RESTARTING = 3,
    HV_AM_DEAD = 4,
    HV_AM_MOVING = 5, /* its node is noticed or draining: the replacement is being placed */
    HV_AM__STATE_COUNT
} hv_am_state_t;

/* Why an actor is dead, or why its last restart happened. Stored by name; append only. */
typedef enum hv_am_cause {
    HV_AM_CAUSE_NONE = 0,
    HV_AM_CAUSE_EXITED = 1,          /* its process ended (status or signal) */
    HV_AM_CAUSE_KILLED = 2,          /* hvctl kill-actor / Actors.Kill */
    HV_AM_CAUSE_NODE_LOST = 3,       /* its node died with it */
    HV_AM_CAUSE_PREEMPTED = 4,       /* a preemption notice or drain of its node */
    HV_AM_CAUSE_OUT_OF_RESTARTS = 5, /* it failed again after max_restarts restarts */
    HV_AM_CAUSE_OWNER_ENDED = 6,     /* the job that owned it ended */
    HV_AM__CAUSE_COUNT
} hv_am_cause_t;

/* One actor as the machine sees it. The driver owns it and stores every field. */
typedef struct hv_am_actor_s {
    uint64_t id;
    hv_am_state_t state;
    hv_am_cause_t cause;   /* dead: why; else the cause of the last restart (NONE: none yet) */
    uint32_t max_restarts; /* restarts allowed after failures (0: none) */
    uint32_t restarts;     /* restarts so far (failures and kill --restart; not moves) */
    uint32_t moves;        /* restarts elsewhere after a notice (not counted in restarts) */
    uint32_t incarnation;  /* the latest process ordered (0: none yet) */
    uint64_t node_id;      /* where that process runs or ran (0: none) */
    uint64_t owner_job;    /* 0: detached; else it dies with this job */
    uint64_t next_node;    /* moving: the node whose slot is reserved for the replacement */
    int has_state;         /* a saved state waits for the next process to load it */
    int proc_live;         /* a process of incarnation is ordered and has not been seen ending */
    int kill_sent;         /* that process was ordered to stop */
    int last_status;       /* the last process's exit status (-1: none or a signal) */
    int last_signal;       /* the signal that ended it (0: none) */
} hv_am_actor_t;

typedef enum hv_am_act_kind {
    HV_AM_ACT_RECORD = 0,   /* store the actor's row (always first when present) */
    HV_AM_ACT_SPAWN = 1,    /* start incarnation `incarnation` on node `node_id` */
    HV_AM_ACT_KILL = 2,     /* stop incarnation `incarnation` on node `node_id` */
    HV_AM_ACT_RELEASE = 3,  /* give node `node_id` the actor's slot back */
    HV_AM_ACT_ANNOUNCE = 4, /* an event: out->text says what happened */
    HV_AM_ACT_RESERVE = 5,  /* take the actor's slot on node `node_id` for its replacement */
} hv_am_act_kind_t;

typedef struct hv_am_act_s {
    hv_am_act_kind_t kind;
    uint64_t node_id;
    uint32_t incarnation;
    int reserved;   /* SPAWN onto / RELEASE of the slot a RESERVE took (not the running one's) */
    int with_state; /* SPAWN: the process loads the actor's saved state */
} hv_am_act_t;

#define HV_AM_MAX_ACTS 6

/* What one input decided. Caller storage; every input function resets it first. */
typedef struct hv_am_out_s {
    size_t n;
    hv_am_act_t acts[HV_AM_MAX_ACTS];
    char text[256]; /* the announcement (empty: none) */
} hv_am_out_t;

/* What the caller knows of an exit or a loss. */
typedef struct hv_am_exit_s {
    int status;            /* exit status, -1 when killed by a signal or unknown */
    int signal;            /* the signal, 0 when none */
    const char *why;       /* the agent's words when it could not run it ("spawn failed: ..."), or
                      * NULL; borrowed */
    int state_saved;       /* the process saved its state and the caller stored it */
    const char *state_why; /* !state_saved: it saved a state that was not kept, and why ("its
                            * saved state of N bytes is over ..."), or NULL; borrowed */
} hv_am_exit_t;

/* A new actor (state pending). RECORD, ANNOUNCE. */
void hv_am_create(hv_am_actor_t *a, uint64_t id, uint32_t max_restarts, uint64_t owner_job,
                  hv_am_out_t *out);

/* 1 when the actor waits for a node: pending or restarting with no process left, or moving
 * without a reserved slot. */
int hv_am_wants_place(const hv_am_actor_t *a);

/* 1 when the actor is pending demand: what `hvctl status` lists among the waiting demand with
 * its reason, and what the autoscaler buys a node for. It wants a place (hv_am_wants_place:
 * pending; restarting with its process gone; moving with no slot reserved for its replacement,
 * whether its old process still serves or was stopped when the notice ran out), the last
 * placement found no node for it (placed_none), and no restart backoff holds it (held). A
 * moving actor counts like a pending one: a drain of the only node that fits it makes the
 * autoscaler buy one before the node goes. */
int hv_am_is_demand(const hv_am_actor_t *a, int placed_none, int held);

/* Placed on node_id: a new incarnation is ordered (state starting): RECORD, SPAWN (with_state
 * when a saved state waits). Moving with its process still there: the slot is reserved and the
 * process stopped, to save its state: RECORD, RESERVE, KILL, ANNOUNCE. HV_ESTATE when the
 * actor does not want a place. */
hv_err hv_am_placed(hv_am_actor_t *a, uint64_t node_id, hv_am_out_t *out);

/* Incarnation inc listens (its address is the caller's to store). Starting -> alive: RECORD,
 * ANNOUNCE. A stale incarnation, or a process that was told to stop, changes nothing (n = 0);
 * returns HV_ESTATE then. */
hv_err hv_am_started(hv_am_actor_t *a, uint32_t inc, hv_am_out_t *out);

/* Incarnation inc ended with e. Gives its slot back (RELEASE) and decides: restart (state
 * restarting; placement is the caller's next step), or dead with a cause. Stale: HV_ESTATE. */
hv_err hv_am_exited(hv_am_actor_t *a, uint32_t inc, const hv_am_exit_t *e, hv_am_out_t *out);

/* The actor's node died (its processes with it): as an exit with cause node lost. Ignored
 * (HV_ESTATE) when no process of the actor is on node_id. */
hv_err hv_am_node_lost(hv_am_actor_t *a, uint64_t node_id, hv_am_out_t *out);

/* A preemption notice or a drain of node_id: the actor goes moving (cause preempted, a move
 * counted, not a restart) and wants a place for its replacement; its process keeps serving
 * until that place is reserved. RECORD, ANNOUNCE. HV_ESTATE when not on that node. */
hv_err hv_am_notice(hv_am_actor_t *a, uint64_t node_id, hv_am_out_t *out);

/* The notice's time runs out before a slot for the replacement was found: the process is
 * stopped now, to save its state (break before make); the replacement is placed with it when a
 * node has room. RECORD, KILL, ANNOUNCE. HV_ESTATE when the actor is not moving with a process
 * still to stop. */
hv_err hv_am_notice_expired(hv_am_actor_t *a, hv_am_out_t *out);

/* Kill: without restart the actor is dead (killed) at once and its process is stopped; with
 * restart the process is stopped and a new one placed, counting a restart (dead, out of
 * restarts, when none is left). HV_ESTATE on a dead actor. */
hv_err hv_am_kill(hv_am_actor_t *a, int restart, hv_am_out_t *out);

/* The owner job ended: a dead actor (owner ended) whose process is stopped. HV_ESTATE when it
 * is detached, owned by another job, or already dead. */
hv_err hv_am_owner_ended(hv_am_actor_t *a, uint64_t job_id, hv_am_out_t *out);

/* An actor's process has an id in the space of the agents' worker ids, apart from the job
 * workers' (sqlite row ids, far below 2^62): bit 62 set, the actor id above bit 20, the
 * incarnation in the low 20 bits. */
#define HV_AM_PROC_BIT (1ULL << 62)
#define HV_AM_PROC_INC_BITS 20
static inline uint64_t hv_am_proc_id(uint64_t actor_id, uint32_t inc) {
    return HV_AM_PROC_BIT | (actor_id << HV_AM_PROC_INC_BITS) |
           (inc & ((1u << HV_AM_PROC_INC_BITS) - 1));
}
static inline int hv_am_proc_is(uint64_t proc) { return (proc & HV_AM_PROC_BIT) != 0; }
static inline uint64_t hv_am_proc_actor(uint64_t proc) {
    return (proc & ~HV_AM_PROC_BIT) >> HV_AM_PROC_INC_BITS;
}
static inline uint32_t hv_am_proc_inc(uint64_t proc) {
    return (uint32_t)(proc & ((1u << HV_AM_PROC_INC_BITS) - 1));
}

/* The name of the saved state's file in the replacement's directory (the agent gives its path
 * as HV_ACTOR_STATE_IN). */
#define HV_AM_STATE_FILE "hv-actor-state.in"

/* "pending", "starting", "alive", "restarting", "dead", "moving" (the store's and the wire's
 * words). */
const char *hv_am_state_name(hv_am_state_t st);
hv_err hv_am_state_parse(const char *s, hv_am_state_t *out);
/* "", "exited", "killed", "node lost", "preempted", "out of restarts", "owner ended". */
const char *hv_am_cause_name(hv_am_cause_t c);
hv_err hv_am_cause_parse(const char *s, hv_am_cause_t *out);

/* What an input did to the actor's life, from its state before (prev) to after (now), for its
 * history (`hvctl actor`): "death" when it became dead, "restart" when a restart was counted,
 * "move" when a move was, else "" (started, a move's later steps, no change). */
const char *hv_am_step(const hv_am_actor_t *prev, const hv_am_actor_t *now);

/* 1 when name is a valid actor name or namespace: 1 to 63 of [A-Za-z0-9._-], not starting with
 * '.' or '-'. */
int hv_am_name_ok(const char *name);

#endif
