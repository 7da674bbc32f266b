/*
 * actors: the pure state machine of one actor (see actors.h for the states and the rules).
 * Every input resets the output, checks that the event is about the actor's current process,
 * changes the actor and lists the actions in the order the driver carries them out: RECORD
 * first (the row is stored before anything is acted on), then orders, then the announcement.
 */
#include "actors.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void out_reset(hv_am_out_t *out) {
    out->n = 0;
    out->text[0] = '\0';
}

static hv_am_act_t *act(hv_am_out_t *out, hv_am_act_kind_t kind, uint64_t node_id, uint32_t inc) {
    static hv_am_act_t sink; /* never read: only when an input lists more than HV_AM_MAX_ACTS */
    if (out->n < HV_AM_MAX_ACTS) {
        out->acts[out->n] = (hv_am_act_t){.kind = kind, .node_id = node_id, .incarnation = inc};
        return &out->acts[out->n++];
    }
    return &sink;
}

/* Orders the next incarnation on node_id (the reserved slot when reserved), loading the saved
 * state when one waits. */
static void spawn_next(hv_am_actor_t *a, uint64_t node_id, int reserved, hv_am_out_t *out) {
    a->incarnation++;
    a->node_id = node_id;
    a->proc_live = 1;
    a->kill_sent = 0;
    a->state = HV_AM_STARTING;
    hv_am_act_t *s = act(out, HV_AM_ACT_SPAWN, node_id, a->incarnation);
    s->reserved = reserved;
    s->with_state = a->has_state;
}

/* Gives a reserved slot back (a move that ends otherwise). */
static void unreserve(hv_am_actor_t *a, hv_am_out_t *out) {
    if (a->next_node != 0) {
        act(out, HV_AM_ACT_RELEASE, a->next_node, 0)->reserved = 1;
        a->next_node = 0;
    }
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
announce(hv_am_out_t *out, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->text, sizeof(out->text), fmt, ap);
    va_end(ap);
    act(out, HV_AM_ACT_ANNOUNCE, 0, 0);
}

/* Says what ended the process, for announcements ("exited with status 3", "killed by signal
 * 9"). */
static void end_words(const hv_am_exit_t *e, char *buf, size_t len) {
    if (e->why != NULL && e->why[0] != '\0' && e->signal == 0 && e->status < 0) {
        snprintf(buf, len, "its process could not run: %.150s", e->why);
    } else if (e->signal != 0) {
        snprintf(buf, len, "its process was killed by signal %d", e->signal);
    } else {
        snprintf(buf, len, "its process exited with status %d", e->status);
    }
}

void hv_am_create(hv_am_actor_t *a, uint64_t id, uint32_t max_restarts, uint64_t owner_job,
                  hv_am_out_t *out) {
    out_reset(out);
    memset(a, 0, sizeof(*a));
    a->id = id;
    a->state = HV_AM_PENDING;
    a->max_restarts = max_restarts;
    a->owner_job = owner_job;
    a->last_status = -1;
    act(out, HV_AM_ACT_RECORD, 0, 0);
    announce(out, "created (max %u restarts, %s)", max_restarts,
             owner_job != 0 ? "owned by a job" : "detached");
}

static void failed(hv_am_actor_t *a, hv_am_cause_t cause, const char *what, hv_am_out_t *out);

int hv_am_wants_place(const hv_am_actor_t *a) {
    if (a->state == HV_AM_MOVING) {
        return a->next_node == 0;
    }
    return !a->proc_live && (a->state == HV_AM_PENDING || a->state == HV_AM_RESTARTING);
}

int hv_am_is_demand(const hv_am_actor_t *a, int placed_none, int held) {
    return hv_am_wants_place(a) && placed_none && !held;
}

hv_err hv_am_placed(hv_am_actor_t *a, uint64_t node_id, hv_am_out_t *out) {
    out_reset(out);
    if (!hv_am_wants_place(a) || node_id == 0) {
        return HV_ESTATE;
    }
    if (a->state == HV_AM_MOVING && a->proc_live) {
        /* Make before break: the slot first, then the old process stops and saves. */
        a->next_node = node_id;
        act(out, HV_AM_ACT_RECORD, 0, 0);
        act(out, HV_AM_ACT_RESERVE, node_id, 0);
        if (!a->kill_sent) {
            a->kill_sent = 1;
            act(out, HV_AM_ACT_KILL, a->node_id, a->incarnation);
        }
        announce(out,
                 "moving (move %u): a slot is reserved for its replacement; its process stops "
                 "and saves its state",
                 a->moves);
        return HV_OK;
    }
    act(out, HV_AM_ACT_RECORD, 0, 0);
    spawn_next(a, node_id, 0, out);
    return HV_OK;
}

hv_err hv_am_started(hv_am_actor_t *a, uint32_t inc, hv_am_out_t *out) {
    out_reset(out);
    if (inc != a->incarnation || !a->proc_live || a->kill_sent || a->state != HV_AM_STARTING) {
        return HV_ESTATE;
    }
    a->state = HV_AM_ALIVE;
    act(out, HV_AM_ACT_RECORD, 0, 0);
    if (a->has_state) {
        a->has_state = 0; /* loaded: the state now lives in the process */
        announce(out, "alive (process %u) with its saved state loaded (move %u done)", inc,
                 a->moves);
    } else {
        announce(out, "alive (process %u)", inc);
    }
    return HV_OK;
}

/* The moving actor's old process ended (stopped to save, or on its own). */
static void moved_exit(hv_am_actor_t *a, int stopped, const hv_am_exit_t *e, hv_am_out_t *out) {
    if (e->state_saved) {
        a->has_state = 1;
    }
    if (!stopped) {
        /* It failed while waiting for a place: the restart policy decides, the reserved slot
         * (none yet: a reservation always stops it) stays free. */
        char what[200];
        end_words(e, what, sizeof(what));
        failed(a, HV_AM_CAUSE_EXITED, what, out);
        return;
    }
    /* A state saved but not kept (over the head's limit, its upload failed) is said, never
     * dropped silently. */
    const char *lost =
        !a->has_state && e->state_why != NULL && e->state_why[0] != '\0' ? e->state_why : NULL;
    if (a->next_node != 0) {
        uint64_t to = a->next_node;
        a->next_node = 0;
        spawn_next(a, to, 1, out);
        if (lost != NULL) {
            announce(out,
                     "moving (move %u): its saved state was not kept: %.150s; the replacement "
                     "starts from its constructor",
                     a->moves, lost);
        } else {
            announce(out,
                     a->has_state
                         ? "moving (move %u): its state was saved; the replacement starts on "
                           "its new node and loads it"
                         : "moving (move %u): no state was saved (its class has no save, "
                           "or it failed); the replacement starts from its constructor",
                     a->moves);
        }
        return;
    }
    /* The notice ran out first: it waits for a node (wants_place), with its state. */
    if (lost != NULL) {
        announce(out,
                 "moving (move %u): its saved state was not kept: %.150s; waiting for a node "
                 "with room",
                 a->moves, lost);
        return;
    }
    announce(out, "moving (move %u): %s; waiting for a node with room", a->moves,
             a->has_state ? "its state was saved" : "no state was saved");
}

/* The running process failed (cause: EXITED or NODE_LOST; what: its words): restart it while
 * restarts are left, else the actor is dead. */
static void failed(hv_am_actor_t *a, hv_am_cause_t cause, const char *what, hv_am_out_t *out) {
    if (a->restarts < a->max_restarts) {
        a->restarts++;
        a->state = HV_AM_RESTARTING;
        a->cause = cause;
        announce(out, "restarting (restart %u of %u): %s", a->restarts, a->max_restarts, what);
    } else {
        a->state = HV_AM_DEAD;
        a->cause = a->max_restarts == 0 ? cause : HV_AM_CAUSE_OUT_OF_RESTARTS;
        announce(out, "dead (%s): %s", hv_am_cause_name(a->cause), what);
    }
}

hv_err hv_am_exited(hv_am_actor_t *a, uint32_t inc, const hv_am_exit_t *e, hv_am_out_t *out) {
    out_reset(out);
    if (inc != a->incarnation || !a->proc_live) {
        return HV_ESTATE;
    }
    int stopped = a->kill_sent; /* ordered to stop (a move: to save), not a failure */
    a->proc_live = 0;
    a->kill_sent = 0;
    a->last_status = e->status;
    a->last_signal = e->signal;
    act(out, HV_AM_ACT_RECORD, 0, 0);
    act(out, HV_AM_ACT_RELEASE, a->node_id, inc);
    if (a->state == HV_AM_MOVING) {
        moved_exit(a, stopped, e, out);
        return HV_OK;
    }
    if (a->state == HV_AM_DEAD || a->state == HV_AM_RESTARTING) {
        return HV_OK; /* it was being stopped: dead stays dead, a restart now wants a place */
    }
    char what[200];
    end_words(e, what, sizeof(what));
    if (e->status == 0 && e->signal == 0) {
        a->state = HV_AM_DEAD; /* it ended on its own, as a program that is done */
        a->cause = HV_AM_CAUSE_EXITED;
        announce(out, "dead (exited): %s", what);
        return HV_OK;
    }
    failed(a, HV_AM_CAUSE_EXITED, what, out);
    return HV_OK;
}

hv_err hv_am_node_lost(hv_am_actor_t *a, uint64_t node_id, hv_am_out_t *out) {
    out_reset(out);
    if (!a->proc_live || node_id != a->node_id) {
        return HV_ESTATE;
    }
    a->proc_live = 0;
    a->kill_sent = 0;
    a->last_status = -1;
    a->last_signal = 0;
    act(out, HV_AM_ACT_RECORD, 0, 0);
    act(out, HV_AM_ACT_RELEASE, node_id, a->incarnation);
    if (a->state == HV_AM_MOVING) {
        /* Lost before it could save: the move fails, the actor restarts from its constructor
         * (on the reserved slot when there is one; no restart counted: it was told to go). */
        a->has_state = 0;
        if (a->next_node != 0) {
            uint64_t to = a->next_node;
            a->next_node = 0;
            spawn_next(a, to, 1, out);
        } else {
            a->state = HV_AM_RESTARTING;
        }
        announce(out,
                 "move %u failed: its node was lost before its state was saved; it restarts "
                 "from its constructor",
                 a->moves);
        return HV_OK;
    }
    if (a->state == HV_AM_DEAD || a->state == HV_AM_RESTARTING) {
        return HV_OK;
    }
    failed(a, HV_AM_CAUSE_NODE_LOST, "its node was lost", out);
    return HV_OK;
}

hv_err hv_am_notice(hv_am_actor_t *a, uint64_t node_id, hv_am_out_t *out) {
    out_reset(out);
    if (!a->proc_live || node_id != a->node_id || a->kill_sent ||
        (a->state != HV_AM_STARTING && a->state != HV_AM_ALIVE)) {
        return HV_ESTATE;
    }
    a->state = HV_AM_MOVING;
    a->cause = HV_AM_CAUSE_PREEMPTED;
    a->moves++;
    act(out, HV_AM_ACT_RECORD, 0, 0);
    announce(out,
             "moving (move %u): its node is draining; it serves until a slot for its "
             "replacement is reserved",
             a->moves);
    return HV_OK;
}

hv_err hv_am_notice_expired(hv_am_actor_t *a, hv_am_out_t *out) {
    out_reset(out);
    if (a->state != HV_AM_MOVING || !a->proc_live || a->kill_sent || a->next_node != 0) {
        return HV_ESTATE;
    }
    a->kill_sent = 1;
    act(out, HV_AM_ACT_RECORD, 0, 0);
    act(out, HV_AM_ACT_KILL, a->node_id, a->incarnation);
    announce(out,
             "moving (move %u): the notice runs out and no node has room; its process stops "
             "and saves its state, and the replacement is placed with it when a node has room",
             a->moves);
    return HV_OK;
}

/* Stops the live process, once. */
static void stop_proc(hv_am_actor_t *a, hv_am_out_t *out) {
    if (a->proc_live && !a->kill_sent) {
        a->kill_sent = 1;
        act(out, HV_AM_ACT_KILL, a->node_id, a->incarnation);
    }
}

/* Dead with cause, the process stopped. */
static void end(hv_am_actor_t *a, hv_am_cause_t cause, const char *why, hv_am_out_t *out) {
    a->state = HV_AM_DEAD;
    a->cause = cause;
    a->has_state = 0;
    act(out, HV_AM_ACT_RECORD, 0, 0);
    stop_proc(a, out);
    unreserve(a, out);
    announce(out, "dead (%s): %s", hv_am_cause_name(cause), why);
}

hv_err hv_am_kill(hv_am_actor_t *a, int restart, hv_am_out_t *out) {
    out_reset(out);
    if (a->state == HV_AM_DEAD || (restart && !a->proc_live)) {
        return HV_ESTATE;
    }
    if (!restart) {
        end(a, HV_AM_CAUSE_KILLED, "killed on request", out);
        return HV_OK;
    }
    if (a->restarts >= a->max_restarts) {
        end(a, HV_AM_CAUSE_OUT_OF_RESTARTS, "killed on request with no restart left", out);
        return HV_OK;
    }
    a->restarts++;
    a->state = HV_AM_RESTARTING;
    a->cause = HV_AM_CAUSE_KILLED;
    a->has_state = 0; /* a requested restart is from the constructor */
    act(out, HV_AM_ACT_RECORD, 0, 0);
    stop_proc(a, out);
    unreserve(a, out);
    announce(out, "restarting (restart %u of %u): killed on request", a->restarts, a->max_restarts);
    return HV_OK;
}

hv_err hv_am_owner_ended(hv_am_actor_t *a, uint64_t job_id, hv_am_out_t *out) {
    out_reset(out);
    if (a->owner_job == 0 || a->owner_job != job_id || a->state == HV_AM_DEAD) {
        return HV_ESTATE;
    }
    end(a, HV_AM_CAUSE_OWNER_ENDED, "the job that owned it ended", out);
    return HV_OK;
}

static const char *const state_names[HV_AM__STATE_COUNT] = {"pending",    "starting", "alive",
                                                            "restarting", "dead",     "moving"};
static const char *const cause_names[HV_AM__CAUSE_COUNT] = {
    "", "exited", "killed", "node lost", "preempted", "out of restarts", "owner ended"};

const char *hv_am_state_name(hv_am_state_t st) {
    return (unsigned)st < HV_AM__STATE_COUNT ? state_names[st] : "?";
}

hv_err hv_am_state_parse(const char *s, hv_am_state_t *out) {
    for (int i = 0; s != NULL && i < HV_AM__STATE_COUNT; i++) {
        if (strcmp(s, state_names[i]) == 0) {
            *out = (hv_am_state_t)i;
            return HV_OK;
        }
    }
    return HV_EINVAL;
}

const char *hv_am_cause_name(hv_am_cause_t c) {
    return (unsigned)c < HV_AM__CAUSE_COUNT ? cause_names[c] : "?";
}

hv_err hv_am_cause_parse(const char *s, hv_am_cause_t *out) {
    for (int i = 0; s != NULL && i < HV_AM__CAUSE_COUNT; i++) {
        if (strcmp(s, cause_names[i]) == 0) {
            *out = (hv_am_cause_t)i;
            return HV_OK;
        }
    }
    return HV_EINVAL;
}

const char *hv_am_step(const hv_am_actor_t *prev, const hv_am_actor_t *now) {
    if (now->state == HV_AM_DEAD && prev->state != HV_AM_DEAD) {
        return "death";
    }
    if (now->restarts > prev->restarts) {
        return "restart";
    }
    if (now->moves > prev->moves) {
        return "move";
    }
    return "";
}

int hv_am_name_ok(const char *name) {
    size_t n = name != NULL ? strlen(name) : 0;
    if (n == 0 || n > 63 || name[0] == '.' || name[0] == '-') {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-')) {
            return 0;
        }
    }
    return 1;
}
