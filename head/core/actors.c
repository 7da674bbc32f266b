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

static void act(hv_am_out_t *out, hv_am_act_kind_t kind, uint64_t node_id, uint32_t inc) {
    if (out->n < HV_AM_MAX_ACTS) {
        out->acts[out->n++] = (hv_am_act_t){.kind = kind, .node_id = node_id, .incarnation = inc};
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

int hv_am_wants_place(const hv_am_actor_t *a) {
    return !a->proc_live && (a->state == HV_AM_PENDING || a->state == HV_AM_RESTARTING);
}

hv_err hv_am_placed(hv_am_actor_t *a, uint64_t node_id, hv_am_out_t *out) {
    out_reset(out);
    if (!hv_am_wants_place(a) || node_id == 0) {
        return HV_ESTATE;
    }
    a->incarnation++;
    a->node_id = node_id;
    a->proc_live = 1;
    a->kill_sent = 0;
    a->state = HV_AM_STARTING;
    act(out, HV_AM_ACT_RECORD, 0, 0);
    act(out, HV_AM_ACT_SPAWN, node_id, a->incarnation);
    return HV_OK;
}

hv_err hv_am_started(hv_am_actor_t *a, uint32_t inc, hv_am_out_t *out) {
    out_reset(out);
    if (inc != a->incarnation || !a->proc_live || a->kill_sent || a->state != HV_AM_STARTING) {
        return HV_ESTATE;
    }
    a->state = HV_AM_ALIVE;
    act(out, HV_AM_ACT_RECORD, 0, 0);
    announce(out, "alive (process %u)", inc);
    return HV_OK;
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
    a->proc_live = 0;
    a->kill_sent = 0;
    a->last_status = e->status;
    a->last_signal = e->signal;
    act(out, HV_AM_ACT_RECORD, 0, 0);
    act(out, HV_AM_ACT_RELEASE, a->node_id, inc);
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
    a->state = HV_AM_RESTARTING;
    a->cause = HV_AM_CAUSE_PREEMPTED;
    a->moves++;
    a->kill_sent = 1;
    act(out, HV_AM_ACT_RECORD, 0, 0);
    act(out, HV_AM_ACT_KILL, a->node_id, a->incarnation);
    announce(out,
             "moving (move %u): its node is draining; it restarts elsewhere from its "
             "constructor",
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
    act(out, HV_AM_ACT_RECORD, 0, 0);
    stop_proc(a, out);
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
    act(out, HV_AM_ACT_RECORD, 0, 0);
    stop_proc(a, out);
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

static const char *const state_names[HV_AM__STATE_COUNT] = {"pending", "starting", "alive",
                                                            "restarting", "dead"};
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
