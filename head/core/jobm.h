/*
 * jobm: the decisions of one job, fixed-size or elastic, as a state machine. The head's driver
 * feeds it inputs (workers placed, started, exited or lost, a rendezvous join, Done, a node
 * draining, cancel, the time) and gets back the new state plus a list of actions (kill this
 * worker, push this membership change, answer the joiners of a closed round, strike this node,
 * record this event). jobm does no I/O and reads no clock: the driver stores what jobm marked
 * dirty, then carries the actions out, so every decision is durable before anyone hears of it.
 *
 * The model (Elastic Horovod's, see docs/internals.md):
 *   - Workers join rounds; each round has a generation. A round opens at the first join of a
 *     job, when a member fails, when a node with members drains, when a new worker joins, or
 *     when a member re-joins on its own (its data plane failed). It closes when every expected
 *     worker joined, or at its deadline with at least min_np, and ranks are assigned oldest
 *     worker first (rounds.h). Every round after the first is a reset; max_resets bounds them.
 *   - Outcome is explicit. A fixed-size job succeeds when every worker exited 0 (and reported
 *     Done if it joined the rendezvous). An elastic job follows Elastic Horovod's results rule:
 *     once a member of the last closed round reports Done for that round (even if a newer round
 *     opened meanwhile, or its node drained), the job is completing: no round opens or forms
 *     again (joiners and newcomers leave, drains and growth change nothing), and the job succeeds
 *     when every member of that round has ended; it fails only if one fails on its own after
 *     that (an exit status, or exit 0 without Done). A kill by a signal or a lost node after the
 *     first Done is no failure: the training had finished. A worker the head removed or killed
 *     never counts as a success unless it reported Done for the round it ran in, and one that
 *     exits 0 without Done after joining is a failure.
 *   - A failure of an elastic job strikes the worker's node (the driver applies blacklist.h),
 *     stops the job's other workers there, and opens a rollback round with the survivors (live
 *     members of the last round, re-joined or not); with no survivor holding the state, and no
 *     member leaving a drained node that may still finish, the job fails and says why. A
 *     fixed-size job fails at once.
 *   - A round below min_np waits for capacity until the elastic timeout, then fails the job. A
 *     round that no member of the last round can ever join resolves at once.
 *
 * Ownership: the driver allocates workers (embedding hv_jm_worker_t) and jobs; jobm keeps an
 * array of pointers to the job's workers (owned array, borrowed workers). Actions are written
 * into an hv_jm_out_t that the caller resets between uses. Single-threaded.
 */
#ifndef HV_HEAD_JOBM_H
#define HV_HEAD_JOBM_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "events.h"
#include "copies.h"

typedef enum hv_job_state {
    HV_JOB_PENDING = 0, /* waiting for slots */
    HV_JOB_PLACING = 1, /* workers ordered, not all started */
    HV_JOB_RUNNING = 2,
    HV_JOB_SUCCEEDED = 3,
    HV_JOB_FAILED = 4,
    HV_JOB_CANCELLED = 5,
    HV_JOB__COUNT
} hv_job_state_t;

typedef enum hv_wk_state {
    HV_WK_STARTING = 0, /* spawn ordered */
    HV_WK_RUNNING = 1,
    HV_WK_EXITED = 2, /* ended on its own */
    HV_WK_KILLED = 3, /* ended after the head ordered it killed */
    HV_WK_LOST = 4,   /* gone without an exit report (node dead, no report after a kill) */
    HV_WK_LEFT = 5,   /* ended after the head removed it from the job (drain) */
    HV_WK__COUNT
} hv_wk_state_t;

/* The store's and the wire's words ("pending", "running", ...; "starting", "left", ...). */
const char *hv_job_state_name(hv_job_state_t s);
const char *hv_wk_state_name(hv_wk_state_t s);
/* HV_EINVAL for an unknown word. The store's "pending" worker state reads as starting. */
hv_err hv_job_state_parse(const char *s, hv_job_state_t *out);
hv_err hv_wk_state_parse(const char *s, hv_wk_state_t *out);
int hv_job_state_terminal(hv_job_state_t s);
int hv_wk_state_active(hv_wk_state_t s);

/* A worker as the job machine sees it. Embedded first in the driver's worker. */
typedef struct hv_jm_worker_s {
    uint64_t id;      /* worker id; also its age (older workers have smaller ids) */
    uint64_t node_id; /* where it runs */
    /* persisted */
    hv_wk_state_t state;
    int exit_code, term_signal;
    uint32_t joined_gen; /* first round it was a member of (its seniority); 0 = none yet */
    uint32_t member_gen; /* last round it was a member of; 0 = none yet */
    uint32_t rank, local_rank, local_size, cross_rank; /* in member_gen (placement before) */
    int done;                                          /* reported Done as a member of member_gen */
    int removed; /* the head took it out of the job: its end is neither success nor failure */
    /* in memory only */
    int joined;           /* its JoinRound waits in the open round */
    int kill_sent;        /* a kill order went out */
    uint64_t evict_until; /* evict after a preemption notice: leave by then (wall ms; 0: no
                           * bound but a round with others holding the state) */
    int evict;   /* its node drains but no other worker holds the state yet: it stays until a
                      round with workers elsewhere has formed, then leaves */
    int leaving; /* a member removed by a drain that has not left yet: its JoinRound waits
                  * until the round without it has closed (others hold the state), and it is
                  * taken back as a holder if every other holder is lost meanwhile (in memory:
                  * after a head restart it is answered `removed` at once, as before) */
    uint64_t suspect_until; /* its node is suspected lost (evidence, not silence: its agent's
                             * session closed): rounds stop waiting for it at this wall ms, and
                             * it does not count as holding the state for others; 0: not */
    int dirty;              /* changed since the driver stored it */
} hv_jm_worker_t;

/* A job's settings, fixed at submission. */
typedef struct hv_jm_params_s {
    int elastic;
    uint32_t np, min_np, max_np; /* fixed-size jobs: all equal to np */
    uint32_t target;             /* elastic: the size asked for now (0 = max_np; see
                                    hv_jm_target); a growth schedule or the program moves it */
    uint32_t max_resets;
    uint32_t check_every;       /* told to workers at every round */
    uint32_t rdzv_timeout_s;    /* how long a round waits for stragglers */
    uint32_t elastic_timeout_s; /* how long a round may wait for min_np */
    int blacklist_on;           /* a failure strikes the node and stops the job there */
} hv_jm_params_t;

#define HV_JM_REASON_MAX 512

/* The newest copy of a job's committed training state that the head keeps (libhv sends it after
 * a commit: docs/RELIABILITY.md). commit 0: no copy. */
typedef struct hv_jm_copy_s {
    uint32_t generation; /* the round it was committed in */
    uint64_t commit;     /* the sender's commit count */
    uint64_t stored_ms;  /* wall clock */
    int missing;         /* the head's copy: its row is stored but its file is gone */
    uint64_t peer_node;  /* the job's newest copy (j->copy) is kept by this node's agent, not the
                            head (issue 28 §3; 0: the head keeps it) */
} hv_jm_copy_t;

/* What the job machine knows when the last member that held the state is gone. */
typedef struct hv_jm_loss_s {
    int elastic;
    int own_failure;     /* the last one exited with a status of its own (the program failed,
                             not its node): a copy would fail the same way */
    int has_copy;        /* a copy of the state is kept (the head's or the durable tier's) */
    int committed;       /* the head has evidence that a step may have been committed: a worker
                            reported a commit, a copy of the state reached the head, or the head
                            restarted since (its evidence is in memory); see hv_jm_job_t's
                            commit_seen */
    uint32_t resets;     /* rounds opened after the first so far */
    uint32_t max_resets; /* the job's bound on them */
} hv_jm_loss_t;

typedef enum hv_jm_loss_verdict {
    HV_JM_LOSS_FAIL = 0,    /* the job fails (why says what else would have been needed) */
    HV_JM_LOSS_RESUME = 1,  /* a new round of new workers resumes from the copy */
    HV_JM_LOSS_RESTART = 2, /* nothing was committed yet and no copy exists: new workers start
                               from the beginning (the initial state is all there is to lose) */
} hv_jm_loss_verdict_t;

/* Which of the job's copies a resume loads now: the newest that is there (copies.h). */
struct hv_jm_job_s;
hv_copy_tier_t hv_jm_copy_tier(const struct hv_jm_job_s *j);

/* Pure: which copy the round of generation gen tells its rank 0 to load before the first sync:
 * the job's resume round (resume_gen) loads the copy hv_jm_copy_tier chooses; every other round,
 * and a resume round with no copy left, none (HV_COPY_TIER_NONE). */
hv_copy_tier_t hv_jm_round_copy(const struct hv_jm_job_s *j, uint32_t gen);

/* Pure: does a job that ended in state s keep its copies of the training state (the head's and
 * the durable one)? Only a failed one: the head's file is a checkpoint in hv_state_save's format
 * that an operator may resume from by hand (hv_state_load). A job that succeeded or was
 * cancelled has no use for them. */
int hv_jm_copies_kept(hv_job_state_t s);

/* Pure: fail, resume or restart a job whose every member is lost. A copy is resumed from; with
 * none, a job that never committed a step (in->committed is 0: the head saw no commit, no copy
 * and did not restart since the job started) starts again from the beginning with new workers,
 * which repeats nothing: no epoch can have finished without a commit. Both count as a reset
 * under --max-resets. On FAIL, why (may be NULL) gets a clause for the failure message ("no copy
 * of the training state was stored", ...). */
hv_jm_loss_verdict_t hv_jm_loss_decide(const hv_jm_loss_t *in, char *why, size_t len);

typedef struct hv_jm_job_s {
    uint64_t id;
    hv_jm_params_t p;
    /* persisted */
    hv_job_state_t state;
    char reason[HV_JM_REASON_MAX]; /* why it ended ("" while active or on success) */
    uint32_t generation;           /* the newest round, open or closed; 0 = none yet */
    uint32_t size;                 /* members of the last closed round */
    uint32_t cross_size;           /* nodes of the last closed round */
    uint32_t resets;               /* rounds opened after the first */
    int round_open;                /* a round is gathering workers (or, once the job ended,
                                      the newest round never formed) */
    int round_rollback;            /* it follows a failure */
    char round_reason[256];        /* why the newest round opened */
    hv_ev_reason_t round_code;     /* the same as a code (HV_EV_NONE: a row stored before it) */
    uint64_t round_opened_ms;      /* wall-clock ms */
    uint64_t round_deadline_ms;    /* stragglers are left out after this */
    uint64_t round_fail_at_ms;     /* the job fails if the round cannot close by then */
    uint32_t resume_gen;           /* the round that resumes the job from the head's copy of its
                                      state, after every member was lost (0: none) */
    uint32_t resumes;              /* such resumes so far */
    /* in memory */
    int commit_seen; /* a step of the job may have been committed: a worker reported a commit
                        (libhv reports its first one before it goes on, rdzv.h report), a copy of
                        the state came, or the head restarted since the job started (this is
                        memory only, so a loaded job counts as committed: hv_jm_restarted).
                        Without it, losing every member restarts the job (hv_jm_loss_decide) */
    uint64_t resume_trigger;     /* the member whose loss, the last of its generation, opened the
                                resume round (0: none); its agent's report may still fail the
                                job (hv_jm_reported) */
    hv_jm_copy_t copy;           /* the newest copy of the state the head keeps (the driver
                                        sets it from the store) */
    hv_copy_tier_t resumed_from; /* the copy the last resume decided here loaded (NONE: none,
                                    or decided before a head restart) */
    hv_jm_copy_t durable;        /* the newest copy in the durable tier (likewise; commit 0: none);
                             a resume loads the newest of the two (hv_copy_choose) */
    /* Names a node for messages and event data (may return NULL); set by the driver. */
    const char *(*node_name)(uint64_t node_id, void *ud);
    void *node_name_ud;
    char failures[HV_JM_REASON_MAX]; /* failures since the last closed round, "; "-separated */
    char grow_reason[200];           /* why the driver placed the newest workers (for the round
                                        they open: "cooldown of node a ended", "free slots") */
    uint64_t round_redone;           /* samples the rollback before the open round sent back
                                        (the most any joiner reported; in its round.close) */
    int ending;                      /* terminal, some workers still alive */
    uint64_t preempt_until;    /* stopping at its next commit (hv_jm_preempt_begin): stopped by
                                then at the latest (wall ms; 0: not stopping) */
    hv_jm_copy_t preempt_copy; /* the head's newest copy when the stop began */
    int release_due;    /* a round closed with members kept on draining nodes: they leave at the
                      * next tick, once the close's answers went out (hv_jm_tick) */
    int dirty;          /* changed since the driver stored it */
    hv_jm_worker_t **w; /* every worker of the job (owned array, borrowed workers) */
    size_t nw, capw;
} hv_jm_job_t;

typedef enum hv_jm_act_kind {
    HV_JA_KILL = 0,     /* order w killed (text: reason) */
    HV_JA_PUSH,         /* push (generation, failure, ev.reason, text) and the removed workers */
    HV_JA_ROUND,        /* the round `generation` closed: answer its joiners */
    HV_JA_RESEND,       /* answer w with the current closed round again (a lost reply) */
    HV_JA_JOIN_REMOVED, /* answer w's join: removed from the job */
    HV_JA_JOIN_REFUSED, /* answer w's join with rc and text */
    HV_JA_STRIKE,       /* strike node_id for this job (text: the failure) */
    HV_JA_EVENT,        /* append an event (event kind, text, optional JSON data) */
    HV_JA_ENDED,        /* the job reached a terminal state (waiting joins must fail) */
    HV_JA_FINISHED,     /* terminal and no worker alive: final view, free rendezvous state */
} hv_jm_act_kind_t;

typedef struct hv_jm_action_s {
    hv_jm_act_kind_t kind;
    hv_jm_worker_t *w;   /* KILL, RESEND, JOIN_*: the worker */
    uint64_t node_id;    /* STRIKE */
    uint32_t generation; /* PUSH, ROUND */
    int failure;         /* PUSH: a member failed (roll back) */
    hv_err rc;           /* JOIN_REFUSED */
    char event[24];      /* EVENT: kind, e.g. "round.close" */
    hv_ev_fields_t ev;   /* EVENT: its fields (generation, reason code, worker, ...); PUSH:
                            ev.reason is why the round opened (HV_EV_PREEMPT: rank 0 sends a
                            copy of the commit it re-joins at) */
    char text[HV_JM_REASON_MAX];
    char *data;        /* EVENT: a JSON object or NULL (owned by the out list) */
    uint64_t *removed; /* PUSH: worker ids not in the new round (owned by the out list) */
    size_t nremoved;
} hv_jm_action_t;

typedef struct hv_jm_out_s {
    hv_jm_action_t *a; /* owned */
    size_t n, cap;
    int oom; /* an action could not be recorded (out of memory) */
} hv_jm_out_t;

void hv_jm_out_init(hv_jm_out_t *o);
/* Frees what the actions own and empties the list (keeps its storage). */
void hv_jm_out_reset(hv_jm_out_t *o);
void hv_jm_out_fini(hv_jm_out_t *o);

/* Initialises a pending job. */
void hv_jm_init(hv_jm_job_t *j, uint64_t id, const hv_jm_params_t *p);
void hv_jm_fini(hv_jm_job_t *j);

/* Adds a worker that the driver loaded from the store (any state); no decision is taken. */
hv_err hv_jm_attach(hv_jm_job_t *j, hv_jm_worker_t *w);

/* Where one new worker goes: its node and its ranks there (from the scheduler's slots). */
typedef struct hv_jm_slot_s {
    uint64_t node_id;
    uint32_t rank;       /* among the workers placed together, from 0 */
    uint32_t local_rank; /* among those on its node */
    uint32_t local_size;
} hv_jm_slot_t;

/* The job machine's part of n new workers of j, one per slot (pure; the workers are not taken
 * into j yet): each STARTING, exit code -1, on its slot's node, with rank hv_jm_base_rank(j) plus
 * its slot's rank (until its first round assigns the real one) and its slot's local rank and
 * size. *state: the job's state the placement stores with them (placing for a pending job, else
 * its own). Returns the size they start with (HV_SIZE until their first round: the base rank
 * plus n). */
uint32_t hv_jm_place(const hv_jm_job_t *j, const hv_jm_slot_t *slots, hv_jm_worker_t *const *ws,
                     uint32_t n, hv_job_state_t *state);
/* The driver placed workers (state STARTING, spawn orders about to go out): the first placement
 * moves a pending job to placing; workers placed while a round is open are expected in it (its
 * deadline is extended so they have time to start). */
hv_err hv_jm_placed(hv_jm_job_t *j, hv_jm_worker_t **ws, size_t n, uint64_t now, hv_jm_out_t *out);
void hv_jm_started(hv_jm_job_t *j, hv_jm_worker_t *w, uint64_t now, hv_jm_out_t *out);
/* The worker ended on its own or after a kill. what: a description for messages ("rank 2 on
 * node-b exited with status 3"). */
void hv_jm_exited(hv_jm_job_t *j, hv_jm_worker_t *w, int exit_code, int term_signal,
                  const char *what, uint64_t now, hv_jm_out_t *out);
/* The worker is gone without an exit report. */
void hv_jm_lost(hv_jm_job_t *j, hv_jm_worker_t *w, const char *what, uint64_t now,
                hv_jm_out_t *out);
/* The agent's report of how w exited, after w was already ended as lost (a ring neighbour's
 * death watch saw it die first); w->exit_code and w->term_signal hold the report. When that
 * loss, the last of its generation's members, opened the resume round (resume_gen) and the
 * report shows the program's own failure (an exit status, no signal), the job fails now, as it
 * would have had the status come first (hv_jm_loss_decide), instead of waiting for new workers
 * to resume a program that fails on its own. Otherwise nothing changes. */
void hv_jm_reported(hv_jm_job_t *j, const hv_jm_worker_t *w, uint64_t now, hv_jm_out_t *out);
/* A JoinRound arrived from w (the driver keeps the call and its address). */
void hv_jm_join(hv_jm_job_t *j, hv_jm_worker_t *w, uint32_t last_gen, uint64_t now,
                hv_jm_out_t *out);
/* Before hv_jm_join: the joiner's rollback sent back samples to be done again (the most any
 * joiner of a round reports is the round's figure: every rank counts all ranks' samples). */
void hv_jm_note_redone(hv_jm_job_t *j, uint64_t samples);
/* Evidence that a step of the job was committed (a worker's report of its commits, a copy of
 * the state that came): from now on the job is never restarted from the beginning. */
void hv_jm_note_commit(hv_jm_job_t *j);
/* A JoinRound of w went away (the worker gave up or died while waiting). */
void hv_jm_join_gone(hv_jm_job_t *j, hv_jm_worker_t *w);
/* Done from w for generation gen (0 = unknown): w finished its training in the last closed
 * round; the first Done of an elastic job makes it complete (see the results rule above).
 * HV_ESTATE for a stale generation (w is not a member of the last closed round), a worker that
 * is not active, a removed worker of a fixed-size job, or a job that ended. */
hv_err hv_jm_done(hv_jm_job_t *j, hv_jm_worker_t *w, uint32_t gen, uint64_t now, hv_jm_out_t *out);
/* The node drains: the job's workers there leave at their next membership check. why: the
 * node's name and the reason, for messages. hold_until (wall ms; 0: none): a preemption notice
 * that leaves time: an elastic job's members there stay until replacements elsewhere joined a
 * round and hold the state (make before break: the job does not run short while new nodes
 * boot), but leave at hold_until at the latest (hv_jm_tick). The round that brings the
 * replacements in still has the leaving members, so it may exceed --max-np by them for that one
 * round; the next round, opened as it closes, drops them. */
void hv_jm_drain(hv_jm_job_t *j, uint64_t node_id, const char *why, uint64_t hold_until,
                 uint64_t now, hv_jm_out_t *out);
/* The head's fleet policy takes n workers (ids) out of a running elastic job, to give their
 * slots to another job (why: for messages, "for job 7", ...). Make before break, as a drain: the
 * members among them stay in the job until the round without them (opened now, reason
 * "shrink: why", code HV_EV_SHRINK, no rollback) has closed at the others' next membership
 * check, then their JoinRound is answered `removed` and they leave (HV_WK_LEFT); ones that
 * never joined a round are stopped at once. HV_ESTATE when the job is not a running elastic job
 * with no round open and not completing, or when the others would be fewer than --min-np or
 * none of them holds the state; HV_ENOTFOUND for an id that is not a live worker still in the
 * job. Nothing changes unless HV_OK. */
hv_err hv_jm_shrink(hv_jm_job_t *j, const uint64_t *ids, size_t n, const char *why, uint64_t now,
                    hv_jm_out_t *out);
/* The head's fleet policy stops a running elastic job to give all its slots to a job of a
 * higher priority (issue 26: --preemptible); it resumes later from its newest state copy. Every
 * live worker is taken out of the job and stopped (neither success nor failure: a stopped
 * member's work since the copy's commit is redone, from the copy, on resume), and the job is
 * pending again with its next round marked as the resume round (resume_gen = generation + 1):
 * once placed again, its new workers form that round alone and its rank 0 loads the copy
 * hv_jm_copy_tier chooses then (the Durable resume path). Counts as a resume and, when the
 * round opens, a reset. HV_ESTATE, nothing changed, when the job is not a running elastic job
 * with no round open and not completing, has no copy of its state, or would exceed
 * --max-resets on resuming. why: for messages ("preempted for job 7"). After
 * hv_jm_preempt_begin it stops the job with its preempt round open (the round is dropped,
 * never formed). */
hv_err hv_jm_preempt(hv_jm_job_t *j, const char *why, uint64_t now, hv_jm_out_t *out);
/* The stop at the next commit (make before break, as a shrink): checks as hv_jm_preempt (and
 * that the preempt round and the resume round fit --max-resets), then opens a round of code
 * HV_EV_PREEMPT (reason "preempt: why", for people): the members re-join at their next
 * membership check, a commit, and rank 0 first sends a copy of that commit's state (libhv does
 * when the round pushed to it carries that code: MembershipPush.reason_code) and waits for it
 * to be stored. The round never closes:
 * once every live member of the last round has joined it (hv_jm_preempt_due 1) or at `until`
 * (wall ms; 2) the caller stops the job with hv_jm_preempt, which resumes it later from the
 * newest copy then. Memory only: a head restart forgets it (the round then forms, and the
 * policy decides again). */
hv_err hv_jm_preempt_begin(hv_jm_job_t *j, const char *why, uint64_t now, uint64_t until,
                           hv_jm_out_t *out);
/* Pure: 0 when j is not stopping or not yet due; 1 when every live member of its last round
 * joined the preempt round (all at the same commit, rank 0's copy of it stored); 2 when no commit
 * came by preempt_until (members failed, or one computes a long step). */
int hv_jm_preempt_due(const hv_jm_job_t *j, uint64_t now);
/* Pure: j was stopped by hv_jm_preempt and waits to resume (pending, its resume round not
 * opened yet). Derived from stored fields: it survives a head restart. */
int hv_jm_preempted(const hv_jm_job_t *j);
/* Evidence that node_id is gone came (its agent's session closed) while its lease runs: the
 * job's live workers there are suspected. A round that is open, or opens before the node is
 * heard again, stops waiting for them at `until` (wall ms: the evidence plus a short grace) and
 * closes without them (they are removed and stopped); members kept on draining nodes do not
 * count them as holders of the state. Nothing is stopped while no round is open: the lease
 * still decides when the node is dead. why: the evidence, for messages. */
void hv_jm_suspect(hv_jm_job_t *j, uint64_t node_id, const char *why, uint64_t until, uint64_t now,
                   hv_jm_out_t *out);
/* Evidence that node_id's data plane fell silent (ringev.h's silence rule: its ring neighbours'
 * liveness monitors hear nothing from it and its host acknowledges nothing). As hv_jm_suspect
 * (until: how long rounds still wait, counted from when it fell silent); and since its members'
 * ring hangs on it until the peer timeout, an elastic job with a live member of its last round
 * there opens a rollback round now (reason data_plane) when none is open: the others are pushed
 * the failure, roll back and re-join. */
void hv_jm_silent(hv_jm_job_t *j, uint64_t node_id, const char *why, uint64_t until, uint64_t now,
                  hv_jm_out_t *out);
/* Pure: the workers of an elastic job to give up as lost at now (the driver does so through its
 * lost path, which stores, then resumes). When every member of the last closed round that may
 * still carry the state on (live, not stopped; leaving members of drained nodes count) is on a
 * node suspected lost and past its grace (its agent's session closed, or its data plane fell
 * silent), nobody is left to re-join: rather than wait for the lease, they are given up now, if
 * the job would then resume from its copy or restart (hv_jm_loss_decide; one that would fail
 * waits for the lease, which may yet bring the node back). A given-up worker that is in fact
 * alive is fenced (hv_jm_fence) and stopped when its node is heard again (the reconcile: the head
 * no longer expects it there). Writes them to out (at most cap; more than cap: none) and returns
 * how many. */
size_t hv_jm_give_up(const hv_jm_job_t *j, uint64_t now, hv_jm_worker_t **out, size_t cap);
/* May w still act for its job as a worker of round gen (0: not said) — send a copy of the state,
 * report its figures or its neighbours' silence, report Done? HV_OK, or HV_EPERM with err saying
 * why: the head gave it up or it ended (it is not active), or gen is a round before the job was
 * resumed from a copy while w belongs to none after it (its generation was replaced). Every such
 * Rendezvous call is checked (the copy also by hv_jm_copy_check, Done also by hv_jm_done). */
hv_err hv_jm_fence(const hv_jm_job_t *j, const hv_jm_worker_t *w, uint32_t gen, char *err,
                   size_t len);
/* node_id was heard again (its agent re-attached within the lease): its workers are no longer
 * suspected. Those a round left out meanwhile stay removed (their kill orders stand). */
void hv_jm_heard(hv_jm_job_t *j, uint64_t node_id, uint64_t now, hv_jm_out_t *out);
/* Ends the job (cancelled, or failed for a reason found outside: wait timeout). Terminal states
 * only; a job already terminal is left alone. code: why, for the job.state event's reason field
 * (HV_EV_CANCELLED, HV_EV_PENDING_TIMEOUT, ...). */
void hv_jm_end(hv_jm_job_t *j, hv_job_state_t st, hv_ev_reason_t code, const char *reason,
               hv_jm_out_t *out);
/* Deadlines of the open round. */
void hv_jm_tick(hv_jm_job_t *j, uint64_t now, hv_jm_out_t *out);

/* How a worker's end reads in messages: who ("rank 2 on node-b") could not run (the agent's
 * reason, when there is no exit status and no signal), was killed by signal SIGx, or exited with
 * status n. Pure; writes at most len bytes to buf. */
void hv_jm_exit_what(char *buf, size_t len, const char *who, int exit_code, int term_signal,
                     const char *reason);

/* May w send a copy of the state committed in (generation, commit)? Only rank 0 of that round,
 * alive and not removed, and only a copy newer than the one the head keeps (j->copy). HV_EPERM
 * (not that member) or HV_ESTATE (an older copy), err says why. */
hv_err hv_jm_copy_check(const hv_jm_job_t *j, const hv_jm_worker_t *w, uint32_t generation,
                        uint64_t commit, char *err, size_t errlen);

/* The first rank of workers placed now: after the job's live members that are not removed (new
 * workers of a running job keep these ranks until their first round assigns the real ones;
 * HV_RANK < HV_SIZE must hold in their environment). 0 for a job's first placement. */
uint32_t hv_jm_base_rank(const hv_jm_job_t *j);

/* The head restarted at wall time now with j loaded from the store: an open round gets a full
 * rendezvous timeout from now (its workers' calls broke with the old process and they join
 * again), and the job counts as having committed (commit_seen: the evidence was in memory). */
void hv_jm_restarted(hv_jm_job_t *j, uint64_t now);

/* A worker of an elastic job asks for `size` workers: 1 when the size the job aims for changes
 * (the caller stores p->target = size, then acts), 0 when it stays (nothing to store). Either
 * way *accepted gets the size aimed for, `size` kept within [min_np, max_np]. */
int hv_jm_resize(const hv_jm_params_t *p, uint32_t size, uint32_t *accepted);

#define HV_JM_KILL_SLACK_MS 5000u /* after the grace, how long a killed worker may take to report */

/* A kill order with the agent's grace grace_ms goes out at monotonic now: when the worker is
 * given up as lost if its exit was not reported by then. */
uint64_t hv_jm_kill_deadline(uint64_t now, uint32_t grace_ms);
/* 1 when a worker killed with deadline kill_deadline (0: none) is overdue at monotonic now. */
int hv_jm_kill_overdue(uint64_t kill_deadline, uint64_t now);

/* The size an elastic job aims for: its target within [min_np, max_np], max_np without one. */
uint32_t hv_jm_target(const hv_jm_params_t *p);

/* How many more workers an elastic job could use now (0 for a fixed-size job, a job that is not
 * running or placing, or one that is finishing). Counts live workers that are not removed. A job
 * whose first round has not formed yet started with what was free, up to -np, and grows after
 * that round; but when it has fewer than --min-np workers left (a drain or a loss took the ones
 * it started with before they formed it), it wants workers up to -np again, as a pending job
 * does (its target when larger), or it would never start. */
uint32_t hv_jm_wants(const hv_jm_job_t *j);

#endif
