/*
 * nodes: the pure rules for one node of the cluster: its state (alive, draining, dead) and the
 * events that move it, its lease (renewed by every message of its agent, expired after
 * lease_ms of silence) and the suspicion beside it (evidence that the node is gone, such as its
 * agent's session closing, before the lease says so), its slot and GPU accounting, what the
 * head's tick owes it (its death, its last contact) and what becomes of its workers when its
 * agent says hello again (the reconcile). No I/O, no clock (the time is passed in), no
 * allocation. The head's driver keeps one hv_node_acct_t and hv_lease_t per node and
 * asks these functions; the table of nodes, sessions and the store stay with the driver.
 */
#ifndef HV_HEAD_NODES_H
#define HV_HEAD_NODES_H

#include <stdint.h>

#include "err.h"

typedef enum hv_node_state {
    HV_NODE_ALIVE = 0,    /* takes work */
    HV_NODE_DRAINING = 1, /* takes no new work; elastic jobs move off it */
    HV_NODE_DEAD = 2,     /* its lease ran out or its agent was replaced */
    HV_NODE__COUNT
} hv_node_state_t;

typedef enum hv_node_event {
    HV_NODE_EV_JOIN_NEW = 0, /* an agent joined with a new incarnation (first time or restart) */
    HV_NODE_EV_REATTACH = 1, /* the same agent opened a session again */
    HV_NODE_EV_DRAIN = 2,    /* a preemption notice, hvagent drain or hvctl drain */
    HV_NODE_EV_UNDRAIN = 3,  /* hvctl undrain */
    HV_NODE_EV_EXPIRED = 4,  /* the lease ran out */
} hv_node_event_t;

/* The state after ev in state st. A draining node stays draining when its agent re-attaches
 * (the notice still holds) but a new agent process starts alive; a dead node is back when its
 * agent re-attaches; undrain only affects a draining node. */
hv_node_state_t hv_node_next(hv_node_state_t st, hv_node_event_t ev);

/* A node the autoscaler gave back (retired) that is no longer alive (draining or dead): it is
 * no capacity and is not listed. */
int hv_node_hidden(hv_node_state_t st, int retired);

/* "alive", "draining", "dead" (the store's and the wire's words). */
const char *hv_node_state_name(hv_node_state_t st);
/* HV_EINVAL for an unknown word. */
hv_err hv_node_state_parse(const char *s, hv_node_state_t *out);

/* A lease: deadline on the caller's monotonic clock. */
typedef struct hv_lease_s {
    uint64_t deadline_ms;
    uint64_t suspect_ms; /* when the first evidence of a loss came (0: none since last heard) */
} hv_lease_t;

/* The node was heard (a message of its agent, a new session): the lease runs lease_ms from now,
 * and any suspicion ends. */
void hv_lease_renew(hv_lease_t *l, uint64_t now_ms, uint32_t lease_ms);
/* 1 when now is past the deadline. */
int hv_lease_expired(const hv_lease_t *l, uint64_t now_ms);
/* How long the node has been silent at now (lease_ms + overdue time), for messages. */
uint64_t hv_lease_silent_ms(const hv_lease_t *l, uint64_t now_ms, uint32_t lease_ms);

/* Evidence that the node is gone came at now (its agent's session closed: the process died, its
 * host went, or the connection broke). The node is suspected until it is heard again; the lease
 * still decides when it is dead (a silent partition looks the same as a loss). Returns 1 when
 * this is new (the node was not suspected), 0 when the first evidence stands. */
int hv_lease_suspect(hv_lease_t *l, uint64_t now_ms);
/* When rounds stop waiting for the node's workers: the first evidence + grace_ms, never past
 * the lease's own deadline; 0 when the node is not suspected. */
uint64_t hv_lease_waive_at(const hv_lease_t *l, uint32_t grace_ms);

/* Slots and GPUs of a node. */
typedef struct hv_node_acct_s {
    uint32_t slots;          /* offered */
    uint32_t gpus;           /* present (at most 64 are tracked) */
    uint32_t slots_used;     /* taken by live workers */
    uint64_t gpus_used_mask; /* bit i: GPU i given to a live worker */
} hv_node_acct_t;

/* Takes one slot (and GPU gpu when gpu >= 0). */
void hv_node_claim(hv_node_acct_t *a, int gpu);
/* Gives one back; never goes below zero. */
void hv_node_release(hv_node_acct_t *a, int gpu);
/* Forgets every claim (the node died: its workers are gone). */
void hv_node_reset(hv_node_acct_t *a);

/* What a Join for a node name means, given what the head knows of that name. */
typedef enum hv_join_kind {
    HV_JOIN_FIRST = 0,    /* no node of that name yet */
    HV_JOIN_SAME = 1,     /* the same agent process again (same incarnation): re-attach */
    HV_JOIN_TAKEOVER = 2, /* a new agent process, and the previous one is gone (dead, no session,
                           * or its lease ran out): the new one takes the name over */
    HV_JOIN_REFUSE = 3,   /* a new agent process while the previous one is live: the name is in
                           * use, the newcomer is refused (two agents never push each other off) */
} hv_join_kind_t;

/* known: a node of that name exists, with known_incarnation, state st, has_session and
 * lease_expired as the head sees them now; incarnation: the joining agent's. */
hv_join_kind_t hv_node_join_kind(int known, uint64_t known_incarnation, uint64_t incarnation,
                                 hv_node_state_t st, int has_session, int lease_expired);

/* The state a node is stored with at a Join of this kind (st: its state now): a first or new
 * agent starts alive, the same agent re-attaches (hv_node_next), a refused one changes nothing. */
hv_node_state_t hv_node_join_state(hv_join_kind_t kind, hv_node_state_t st);

/* 1 when the node may be given new work: alive (not draining or dead) with a live session. */
int hv_node_takes_work(hv_node_state_t st, int has_session);

/* A drain (drain = 1) or undrain of a node in state st: *out gets the state it moves to (st
 * itself: nothing to do, it is so already). HV_ESTATE to undrain a node that is not draining. */
hv_err hv_node_drain_to(hv_node_state_t st, int drain, hv_node_state_t *out);

/* After a head restart: 1 when a node stored in state st has its drain issued again to every
 * job still active (hv_jm_drain), so that its members that were not removed yet (they stay
 * while nobody else holds their job's state) are taken care of again; *hold_until gets the hold
 * they get: 0, none (the notice's end is not stored: they leave once a round holds the state
 * without them). */
int hv_node_drain_after_restart(hv_node_state_t st, uint64_t *hold_until);

/* Evidence that a node in state st is gone came at monotonic now: the node has not been heard
 * on the evidence's terms since since_ms (now for its agent's closed session; for a data plane
 * that fell silent, now minus how long it has been silent; a since_ms past now counts as now).
 * 1 when this makes it suspected (it is not dead and was not suspected yet; l records since_ms as
 * the first evidence), with *wait_ms how long rounds still wait for its workers (grace_ms from
 * since_ms: a silence longer than the grace has served it, wait 0; never past the lease) and
 * *left_ms what is left of its lease; 0 otherwise (nothing to do). */
int hv_node_suspect(hv_node_state_t st, hv_lease_t *l, uint64_t now_ms, uint64_t since_ms,
                    uint32_t grace_ms, uint64_t *wait_ms, uint64_t *left_ms);

/* What the head's tick owes a node. */
typedef enum hv_node_due {
    HV_NODE_DUE_NONE = 0, /* nothing */
    HV_NODE_DUE_DEAD = 1, /* its lease ran out: store it dead, then give its workers up */
    HV_NODE_DUE_SEEN = 2, /* store its last contact (every seen_every_ms while it is heard) */
} hv_node_due_t;

/* At monotonic now: a node in state st with lease l, last heard at wall last_seen_ms, of which
 * the store has persisted_seen_ms. A dead node is owed nothing. */
hv_node_due_t hv_node_due(hv_node_state_t st, const hv_lease_t *l, uint64_t now_ms,
                          uint64_t last_seen_ms, uint64_t persisted_seen_ms,
                          uint64_t seen_every_ms);

/* After an agent's hello (the workers it runs) and the first heartbeat behind it (every event
 * it re-sent has been applied: the stream is ordered), what becomes of one worker. */
typedef enum hv_node_recon {
    HV_RECON_KEEP = 0,       /* as the head expects */
    HV_RECON_LOST = 1,       /* live at the head, not listed: it is gone */
    HV_RECON_KILL_AGAIN = 2, /* listed, expected, but stopped while the node was out of touch
                              * (a round formed without it): the order may never have arrived */
    HV_RECON_KILL = 3,       /* listed, not expected (unknown, ended, on another node, or its job
                              * ended): killed */
} hv_node_recon_t;

/* listed: the hello listed it; live_here: the head has it live on this node; job_active: its
 * job has not ended; kill_sent: the head ordered it killed. */
hv_node_recon_t hv_node_reconcile(int listed, int live_here, int job_active, int kill_sent);

#endif
