/*
 * actors_test: the actor state machine (actors.h), table by table: creation, placement and
 * start, restart on failure up to max_restarts, notice (a move that does not count), kill with
 * and without restart, owner death, node loss, stale events of older processes, a head restart
 * (a stored actor fed the same inputs), and the words stored. `actors_test <case>` runs one.
 */
#include "actors.h"
#include "hv_check.h"

#include <stdio.h>
#include <string.h>

/* The kinds of out's actions as a string: R(ecord) S(pawn) K(ill) F(ree) A(nnounce)
 * V (reserVe). */
static const char *kinds(const hv_am_out_t *out) {
    static char buf[HV_AM_MAX_ACTS + 1];
    static const char letters[] = "RSKFAV";
    for (size_t i = 0; i < out->n; i++) {
        buf[i] = letters[out->acts[i].kind];
    }
    buf[out->n] = '\0';
    return buf;
}

static hv_am_actor_t alive_on(uint64_t node, uint32_t max_restarts, uint64_t owner) {
    hv_am_actor_t a;
    hv_am_out_t out;
    hv_am_create(&a, 7, max_restarts, owner, &out);
    CHECK_RC(hv_am_placed(&a, node, &out), HV_OK);
    CHECK_RC(hv_am_started(&a, a.incarnation, &out), HV_OK);
    return a;
}

static void case_create_place_start(void) {
    hv_am_actor_t a;
    hv_am_out_t out;
    hv_am_create(&a, 7, 2, 0, &out);
    CHECK_EQ(a.state, HV_AM_PENDING);
    CHECK_STR(kinds(&out), "RA");
    CHECK_EQ(hv_am_wants_place(&a), 1);
    CHECK_RC(hv_am_started(&a, 1, &out), HV_ESTATE); /* nothing ordered yet */
    CHECK_RC(hv_am_placed(&a, 0, &out), HV_ESTATE);  /* no node */
    CHECK_RC(hv_am_placed(&a, 3, &out), HV_OK);
    CHECK_STR(kinds(&out), "RS");
    CHECK_EQ(out.acts[1].node_id, 3);
    CHECK_EQ(out.acts[1].incarnation, 1);
    CHECK_EQ(a.state, HV_AM_STARTING);
    CHECK_EQ(hv_am_wants_place(&a), 0);
    CHECK_RC(hv_am_placed(&a, 4, &out), HV_ESTATE); /* one process at a time */
    CHECK_RC(hv_am_started(&a, 1, &out), HV_OK);
    CHECK_STR(kinds(&out), "RA");
    CHECK_EQ(a.state, HV_AM_ALIVE);
    CHECK_RC(hv_am_started(&a, 1, &out), HV_ESTATE); /* a repeated report changes nothing */
    CHECK_EQ(out.n, 0);
}

/* Failures, one row per exit of the live process: the state, cause and restarts after it. */
static void case_restart_policy(void) {
    static const struct {
        uint32_t max_restarts;
        int status, signal;
        hv_am_state_t state;
        hv_am_cause_t cause;
        uint32_t restarts;
        const char *acts;
    } rows[] = {
        {2, -1, 9, HV_AM_RESTARTING, HV_AM_CAUSE_EXITED, 1, "RFA"}, /* kill -9: restart */
        {2, 3, 0, HV_AM_RESTARTING, HV_AM_CAUSE_EXITED, 1, "RFA"},  /* status 3: restart */
        {2, 0, 0, HV_AM_DEAD, HV_AM_CAUSE_EXITED, 0, "RFA"},        /* status 0: done */
        {0, 1, 0, HV_AM_DEAD, HV_AM_CAUSE_EXITED, 0, "RFA"},        /* no restarts allowed */
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_am_actor_t a = alive_on(3, rows[i].max_restarts, 0);
        hv_am_out_t out;
        hv_am_exit_t e = {.status = rows[i].status, .signal = rows[i].signal};
        CHECK_RC(hv_am_exited(&a, 1, &e, &out), HV_OK);
        CHECK_EQ(a.state, rows[i].state);
        CHECK_EQ(a.cause, rows[i].cause);
        CHECK_EQ(a.restarts, rows[i].restarts);
        CHECK_STR(kinds(&out), rows[i].acts);
        CHECK_EQ(out.acts[1].node_id, 3); /* the slot goes back to the node it ran on */
        CHECK_EQ(a.last_signal, rows[i].signal);
    }
    /* A process that could not run: the agent's words are in the announcement. */
    hv_am_actor_t a = alive_on(3, 1, 0);
    hv_am_out_t out;
    hv_am_exit_t e = {.status = -1, .why = "spawn failed: node n1 has no 'nope' on PATH"};
    CHECK_RC(hv_am_exited(&a, 1, &e, &out), HV_OK);
    CHECK(strstr(out.text, "could not run: spawn failed: node n1 has no 'nope'") != NULL);
}

/* kill -9 again and again: restarts 1, 2, then dead "out of restarts". */
static void case_out_of_restarts(void) {
    hv_am_actor_t a = alive_on(3, 2, 0);
    hv_am_out_t out;
    hv_am_exit_t e = {.status = -1, .signal = 9};
    for (uint32_t i = 1; i <= 2; i++) {
        CHECK_RC(hv_am_exited(&a, a.incarnation, &e, &out), HV_OK);
        CHECK_EQ(a.state, HV_AM_RESTARTING);
        CHECK_EQ(a.restarts, i);
        CHECK_EQ(hv_am_wants_place(&a), 1);
        CHECK_RC(hv_am_placed(&a, 4, &out), HV_OK);
        CHECK_EQ(a.incarnation, i + 1);
        CHECK_RC(hv_am_started(&a, a.incarnation, &out), HV_OK);
    }
    CHECK_RC(hv_am_exited(&a, a.incarnation, &e, &out), HV_OK);
    CHECK_EQ(a.state, HV_AM_DEAD);
    CHECK_EQ(a.cause, HV_AM_CAUSE_OUT_OF_RESTARTS);
    CHECK_EQ(a.restarts, 2);
    CHECK(strstr(out.text, "out of restarts") != NULL);
    CHECK_EQ(hv_am_wants_place(&a), 0);
}

/* Events of an older process change nothing: its exit after a restart, its start. */
static void case_stale(void) {
    hv_am_actor_t a = alive_on(3, 5, 0);
    hv_am_out_t out;
    hv_am_exit_t e = {.status = 1};
    CHECK_RC(hv_am_exited(&a, 1, &e, &out), HV_OK);
    CHECK_RC(hv_am_placed(&a, 4, &out), HV_OK);
    CHECK_RC(hv_am_exited(&a, 1, &e, &out), HV_ESTATE); /* repeated */
    CHECK_RC(hv_am_started(&a, 1, &out), HV_ESTATE);
    CHECK_RC(hv_am_node_lost(&a, 3, &out), HV_ESTATE); /* the old node */
    CHECK_EQ(a.state, HV_AM_STARTING);
    CHECK_EQ(a.restarts, 1);
    CHECK_EQ(out.n, 0);
}

static void case_kill(void) {
    /* Without restart: dead at once, its process stopped; the exit only frees the slot. */
    hv_am_actor_t a = alive_on(3, 5, 0);
    hv_am_out_t out;
    CHECK_RC(hv_am_kill(&a, 0, &out), HV_OK);
    CHECK_STR(kinds(&out), "RKA");
    CHECK_EQ(a.state, HV_AM_DEAD);
    CHECK_EQ(a.cause, HV_AM_CAUSE_KILLED);
    CHECK_RC(hv_am_kill(&a, 0, &out), HV_ESTATE);
    hv_am_exit_t e = {.status = -1, .signal = 15};
    CHECK_RC(hv_am_exited(&a, 1, &e, &out), HV_OK);
    CHECK_STR(kinds(&out), "RF");
    CHECK_EQ(a.cause, HV_AM_CAUSE_KILLED);
    CHECK_EQ(hv_am_wants_place(&a), 0);

    /* With restart: counted, placed again once the old process is gone. */
    a = alive_on(3, 1, 0);
    CHECK_RC(hv_am_kill(&a, 1, &out), HV_OK);
    CHECK_STR(kinds(&out), "RKA");
    CHECK_EQ(a.state, HV_AM_RESTARTING);
    CHECK_EQ(a.restarts, 1);
    CHECK_EQ(hv_am_wants_place(&a), 0); /* not before the exit */
    CHECK_RC(hv_am_exited(&a, 1, &e, &out), HV_OK);
    CHECK_EQ(a.state, HV_AM_RESTARTING);
    CHECK_EQ(hv_am_wants_place(&a), 1);
    CHECK_RC(hv_am_placed(&a, 3, &out), HV_OK);
    /* No restart left: kill --restart ends it. */
    CHECK_RC(hv_am_kill(&a, 1, &out), HV_OK);
    CHECK_EQ(a.state, HV_AM_DEAD);
    CHECK_EQ(a.cause, HV_AM_CAUSE_OUT_OF_RESTARTS);

    /* A pending actor: killed without an order; kill --restart has nothing to restart. */
    hv_am_create(&a, 8, 1, 0, &out);
    CHECK_RC(hv_am_kill(&a, 1, &out), HV_ESTATE);
    CHECK_RC(hv_am_kill(&a, 0, &out), HV_OK);
    CHECK_STR(kinds(&out), "RA");
}

/* A notice moves the actor, make before break: moving (serving), a slot reserved, then the old
 * process stopped to save, then the replacement spawned on the reserved slot with the state. */
static void case_notice(void) {
    hv_am_actor_t a = alive_on(3, 0, 0);
    hv_am_out_t out;
    CHECK_RC(hv_am_notice(&a, 4, &out), HV_ESTATE); /* another node */
    CHECK_RC(hv_am_notice(&a, 3, &out), HV_OK);
    CHECK_STR(kinds(&out), "RA"); /* nothing stopped yet: it serves */
    CHECK_EQ(a.state, HV_AM_MOVING);
    CHECK_EQ(a.cause, HV_AM_CAUSE_PREEMPTED);
    CHECK_EQ(a.moves, 1);
    CHECK_EQ(hv_am_wants_place(&a), 1);
    CHECK_RC(hv_am_notice(&a, 3, &out), HV_ESTATE); /* already moving */
    CHECK_RC(hv_am_placed(&a, 5, &out), HV_OK);
    CHECK_STR(kinds(&out), "RVKA");
    CHECK_EQ(out.acts[1].node_id, 5);
    CHECK_EQ(out.acts[2].node_id, 3);
    CHECK_EQ(a.next_node, 5);
    CHECK_EQ(a.node_id, 3);
    CHECK_EQ(hv_am_wants_place(&a), 0);
    CHECK_RC(hv_am_notice_expired(&a, &out), HV_ESTATE); /* already stopping */
    hv_am_exit_t e = {.status = 0, .state_saved = 1};
    CHECK_RC(hv_am_exited(&a, 1, &e, &out), HV_OK);
    CHECK_STR(kinds(&out), "RFSA");
    CHECK_EQ(out.acts[1].node_id, 3);
    CHECK_EQ(out.acts[1].reserved, 0);
    CHECK_EQ(out.acts[2].node_id, 5);
    CHECK_EQ(out.acts[2].reserved, 1);
    CHECK_EQ(out.acts[2].with_state, 1);
    CHECK_EQ(a.state, HV_AM_STARTING);
    CHECK_EQ(a.restarts, 0);
    CHECK_EQ(a.node_id, 5);
    CHECK_EQ(a.next_node, 0);
    CHECK_RC(hv_am_started(&a, 2, &out), HV_OK);
    CHECK_EQ(a.state, HV_AM_ALIVE);
    CHECK_EQ(a.has_state, 0);
    CHECK(strstr(out.text, "saved state loaded") != NULL);
}

/* A state the process saved but the caller could not keep (over the head's limit, its upload
 * failed): the replacement starts from its constructor and the announcement says why. */
static void case_state_not_kept(void) {
    hv_am_actor_t a = alive_on(3, 2, 0);
    hv_am_out_t out;
    CHECK_RC(hv_am_notice(&a, 3, &out), HV_OK);
    CHECK_RC(hv_am_placed(&a, 5, &out), HV_OK);
    hv_am_exit_t e = {.status = 0,
                      .state_why = "its saved state of 300 MiB is over the head's "
                                   "actor_state_max of 256 MiB"};
    CHECK_RC(hv_am_exited(&a, 1, &e, &out), HV_OK);
    CHECK_STR(kinds(&out), "RFSA");
    CHECK_EQ(out.acts[2].with_state, 0);
    CHECK_EQ(a.has_state, 0);
    CHECK(strstr(out.text, "its saved state was not kept: its saved state of 300 MiB is over "
                           "the head's actor_state_max") != NULL);
    CHECK(strstr(out.text, "starts from its constructor") != NULL);
    /* The notice ran out first: the same words while it waits for a node. */
    a = alive_on(3, 2, 0);
    CHECK_RC(hv_am_notice(&a, 3, &out), HV_OK);
    CHECK_RC(hv_am_notice_expired(&a, &out), HV_OK);
    CHECK_RC(hv_am_exited(&a, 1, &e, &out), HV_OK);
    CHECK(strstr(out.text, "not kept") != NULL && strstr(out.text, "waiting for a node") != NULL);
    /* A state that was kept wins over stray words. */
    a = alive_on(3, 2, 0);
    CHECK_RC(hv_am_notice(&a, 3, &out), HV_OK);
    CHECK_RC(hv_am_placed(&a, 5, &out), HV_OK);
    e.state_saved = 1;
    CHECK_RC(hv_am_exited(&a, 1, &e, &out), HV_OK);
    CHECK_EQ(out.acts[2].with_state, 1);
    CHECK(strstr(out.text, "not kept") == NULL);
}

/* What counts as pending demand (hvctl status, the autoscaler), one row per situation: a
 * moving actor without a reserved slot counts like a pending one, with its process serving or
 * stopped at the notice's end; one whose slot is reserved, or that runs, does not. */
static void case_demand_table(void) {
    enum {
        PENDING,
        ALIVE,
        RESTARTING,
        RESTART_STOPPING,
        MOVING,
        MOVING_RESERVED,
        MOVING_EXPIRED,
        MOVING_SAVED,
        DEAD
    };
    static const struct {
        const char *name;
        int situation;
        int placed_none; /* the last placement found no node */
        int held;        /* a restart backoff holds it */
        int demand;
    } rows[] = {
        {"pending, no node found", PENDING, 1, 0, 1},
        {"pending, not tried yet", PENDING, 0, 0, 0},
        {"alive", ALIVE, 1, 0, 0},
        {"restarting, no node found", RESTARTING, 1, 0, 1},
        {"restarting in its backoff", RESTARTING, 1, 1, 0},
        {"restart asked, old process still stopping", RESTART_STOPPING, 1, 0, 0},
        {"moving, serving, no node found", MOVING, 1, 0, 1},
        {"moving, not tried yet", MOVING, 0, 0, 0},
        {"moving with a reserved slot", MOVING_RESERVED, 1, 0, 0},
        {"moving, stopped at the notice's end", MOVING_EXPIRED, 1, 0, 1},
        {"moving, stopped and saved, no node", MOVING_SAVED, 1, 0, 1},
        {"dead", DEAD, 1, 0, 0},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_am_actor_t a = alive_on(3, 2, 0);
        hv_am_out_t out;
        hv_am_exit_t crash = {.status = -1, .signal = 9}, saved = {.status = 0, .state_saved = 1};
        switch (rows[i].situation) {
        case PENDING:
            hv_am_create(&a, 7, 2, 0, &out);
            break;
        case RESTARTING:
            CHECK_RC(hv_am_exited(&a, 1, &crash, &out), HV_OK);
            break;
        case RESTART_STOPPING:
            CHECK_RC(hv_am_kill(&a, 1, &out), HV_OK);
            break;
        case MOVING:
            CHECK_RC(hv_am_notice(&a, 3, &out), HV_OK);
            break;
        case MOVING_RESERVED:
            CHECK_RC(hv_am_notice(&a, 3, &out), HV_OK);
            CHECK_RC(hv_am_placed(&a, 5, &out), HV_OK);
            break;
        case MOVING_EXPIRED:
            CHECK_RC(hv_am_notice(&a, 3, &out), HV_OK);
            CHECK_RC(hv_am_notice_expired(&a, &out), HV_OK);
            break;
        case MOVING_SAVED:
            CHECK_RC(hv_am_notice(&a, 3, &out), HV_OK);
            CHECK_RC(hv_am_notice_expired(&a, &out), HV_OK);
            CHECK_RC(hv_am_exited(&a, 1, &saved, &out), HV_OK);
            CHECK_EQ(a.state, HV_AM_MOVING);
            break;
        case DEAD:
            CHECK_RC(hv_am_kill(&a, 0, &out), HV_OK);
            break;
        default:
            break;
        }
        int got = hv_am_is_demand(&a, rows[i].placed_none, rows[i].held);
        if (got != rows[i].demand) {
            fprintf(stderr, "row '%s': demand %d, want %d (state %s)\n", rows[i].name, got,
                    rows[i].demand, hv_am_state_name(a.state));
        }
        CHECK_EQ(got, rows[i].demand);
    }
}

/* One row per way a move goes on after the notice: placed or not, how the old process ends. */
static void case_move_table(void) {
    enum { NONE, EXIT_SAVED, EXIT_NOSAVE, CRASH, LOST };
    static const struct {
        const char *name;
        int place;         /* a node had room before the end */
        int expire;        /* the notice ran out first */
        int end;           /* how the old process ended */
        const char *kinds; /* of the end's output */
        hv_am_state_t state;
        int with_state; /* the spawn (now or at the next placement) loads a state */
        uint32_t restarts;
    } rows[] = {
        {"move done", 1, 0, EXIT_SAVED, "RFSA", HV_AM_STARTING, 1, 0},
        {"no save/load: constructor", 1, 0, EXIT_NOSAVE, "RFSA", HV_AM_STARTING, 0, 0},
        {"save killed by the grace", 1, 0, CRASH, "RFSA", HV_AM_STARTING, 0, 0},
        {"node lost before the save", 1, 0, LOST, "RFSA", HV_AM_STARTING, 0, 0},
        {"notice ran out, saved", 0, 1, EXIT_SAVED, "RFA", HV_AM_MOVING, 1, 0},
        {"notice ran out, lost", 0, 1, LOST, "RFA", HV_AM_RESTARTING, 0, 0},
        {"crashed while waiting", 0, 0, CRASH, "RFA", HV_AM_RESTARTING, 0, 1},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_am_actor_t a = alive_on(3, 2, 0);
        hv_am_out_t out;
        CHECK_RC(hv_am_notice(&a, 3, &out), HV_OK);
        if (rows[i].place) {
            CHECK_RC(hv_am_placed(&a, 5, &out), HV_OK);
        }
        if (rows[i].expire) {
            CHECK_RC(hv_am_notice_expired(&a, &out), HV_OK);
            CHECK_STR(kinds(&out), "RKA");
        }
        hv_am_exit_t e = {.status = 0, .state_saved = rows[i].end == EXIT_SAVED};
        if (rows[i].end == CRASH) {
            e = (hv_am_exit_t){.status = -1, .signal = 9};
        }
        if (rows[i].end == LOST) {
            CHECK_RC(hv_am_node_lost(&a, 3, &out), HV_OK);
        } else {
            CHECK_RC(hv_am_exited(&a, 1, &e, &out), HV_OK);
        }
        if (strcmp(kinds(&out), rows[i].kinds) != 0 || a.state != rows[i].state ||
            a.restarts != rows[i].restarts) {
            fprintf(stderr, "row '%s': %s %s %u\n", rows[i].name, kinds(&out),
                    hv_am_state_name(a.state), a.restarts);
        }
        CHECK_STR(kinds(&out), rows[i].kinds);
        CHECK_EQ(a.state, rows[i].state);
        CHECK_EQ(a.restarts, rows[i].restarts);
        CHECK_EQ(a.has_state, rows[i].with_state);
        if (a.state == HV_AM_MOVING || a.state == HV_AM_RESTARTING) {
            CHECK_EQ(hv_am_wants_place(&a), 1);
            CHECK_RC(hv_am_placed(&a, 6, &out), HV_OK);
            CHECK_STR(kinds(&out), "RS");
            CHECK_EQ(out.acts[1].with_state, rows[i].with_state);
            CHECK_EQ(out.acts[1].reserved, 0);
        } else {
            CHECK_EQ(a.node_id, 5);
        }
    }
    /* Killed while moving with a slot reserved: the slot goes back. */
    hv_am_actor_t a = alive_on(3, 2, 0);
    hv_am_out_t out;
    CHECK_RC(hv_am_notice(&a, 3, &out), HV_OK);
    CHECK_RC(hv_am_placed(&a, 5, &out), HV_OK);
    CHECK_RC(hv_am_kill(&a, 0, &out), HV_OK);
    CHECK_STR(kinds(&out), "RFA"); /* the process was already told to stop */
    CHECK_EQ(out.acts[1].reserved, 1);
    CHECK_EQ(out.acts[1].node_id, 5);
    CHECK_EQ(a.next_node, 0);
    CHECK_EQ(a.state, HV_AM_DEAD);
}

static void case_node_lost(void) {
    static const struct {
        uint32_t max_restarts;
        hv_am_state_t state;
        hv_am_cause_t cause;
    } rows[] = {
        {1, HV_AM_RESTARTING, HV_AM_CAUSE_NODE_LOST},
        {0, HV_AM_DEAD, HV_AM_CAUSE_NODE_LOST},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_am_actor_t a = alive_on(3, rows[i].max_restarts, 0);
        hv_am_out_t out;
        CHECK_RC(hv_am_node_lost(&a, 9, &out), HV_ESTATE);
        CHECK_RC(hv_am_node_lost(&a, 3, &out), HV_OK);
        CHECK_STR(kinds(&out), "RFA");
        CHECK_EQ(a.state, rows[i].state);
        CHECK_EQ(a.cause, rows[i].cause);
    }
}

static void case_owner_ended(void) {
    hv_am_actor_t a = alive_on(3, 5, 42);
    hv_am_out_t out;
    CHECK_RC(hv_am_owner_ended(&a, 41, &out), HV_ESTATE); /* another job */
    CHECK_RC(hv_am_owner_ended(&a, 42, &out), HV_OK);
    CHECK_STR(kinds(&out), "RKA");
    CHECK_EQ(a.state, HV_AM_DEAD);
    CHECK_EQ(a.cause, HV_AM_CAUSE_OWNER_ENDED);
    CHECK_RC(hv_am_owner_ended(&a, 42, &out), HV_ESTATE);
    hv_am_actor_t d = alive_on(3, 5, 0); /* detached: outlives every job */
    CHECK_RC(hv_am_owner_ended(&d, 42, &out), HV_ESTATE);
    CHECK_EQ(d.state, HV_AM_ALIVE);
}

/* A head restart: the stored row is the whole actor; the same inputs mean the same. The head
 * that comes back learns a process is gone either by its exit (re-sent by its agent) or by the
 * node's loss; the stored incarnation filters what belongs to the process it ordered. */
static void case_head_restart(void) {
    hv_am_actor_t a = alive_on(3, 2, 0);
    hv_am_actor_t stored = a; /* what the store holds */
    hv_am_actor_t b = stored;
    hv_am_out_t out;
    hv_am_exit_t e = {.status = -1, .signal = 9};
    CHECK_RC(hv_am_exited(&b, 1, &e, &out), HV_OK);
    CHECK_EQ(b.state, HV_AM_RESTARTING);
    CHECK_EQ(b.restarts, 1);
    CHECK_RC(hv_am_started(&b, 1, &out), HV_ESTATE);
    /* A stored starting actor whose address came after the restart. */
    hv_am_actor_t c;
    hv_am_create(&c, 9, 0, 0, &out);
    CHECK_RC(hv_am_placed(&c, 3, &out), HV_OK);
    hv_am_actor_t c2 = c;
    CHECK_RC(hv_am_started(&c2, 1, &out), HV_OK);
    CHECK_EQ(c2.state, HV_AM_ALIVE);
}

static void case_words(void) {
    for (int i = 0; i < HV_AM__STATE_COUNT; i++) {
        hv_am_state_t st;
        CHECK_RC(hv_am_state_parse(hv_am_state_name((hv_am_state_t)i), &st), HV_OK);
        CHECK_EQ(st, i);
    }
    for (int i = 0; i < HV_AM__CAUSE_COUNT; i++) {
        hv_am_cause_t c;
        CHECK_RC(hv_am_cause_parse(hv_am_cause_name((hv_am_cause_t)i), &c), HV_OK);
        CHECK_EQ(c, i);
    }
    hv_am_state_t st;
    CHECK_RC(hv_am_state_parse("zombie", &st), HV_EINVAL);
    static const struct {
        const char *name;
        int ok;
    } names[] = {{"counter", 1},
                 {"eval-1.v2_x", 1},
                 {"", 0},
                 {"-x", 0},
                 {".x", 0},
                 {"a b", 0},
                 {"a/b", 0},
                 {NULL, 0},
                 {"0123456789012345678901234567890123456789012345678901234567890123", 0}};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        CHECK_EQ(hv_am_name_ok(names[i].name), names[i].ok);
    }
}

/* hv_am_step through a life: each input's step, as `hvctl actor` shows it in the history. */
static void case_steps(void) {
    enum { CREATE, PLACE, START, CRASH, EXIT0, NOTICE, KILL, KILL_RESTART, LOST };
    static const struct {
        int op;
        uint64_t node;
        const char *step;
    } life[] = {
        {CREATE, 0, ""},     {PLACE, 1, ""},
        {START, 0, ""},      {CRASH, 0, "restart"},
        {PLACE, 1, ""},      {START, 0, ""},
        {NOTICE, 1, "move"}, {PLACE, 2, ""}, /* the slot reserved, the old process stops */
        {EXIT0, 0, ""},                      /* it stopped: the replacement starts */
        {START, 0, ""},      {KILL_RESTART, 0, "restart"},
        {PLACE, 3, ""},      {START, 0, ""},
        {LOST, 3, "death"}, /* out of restarts */
    };
    hv_am_actor_t a;
    hv_am_out_t out;
    hv_am_exit_t crash = {.status = -1, .signal = 9};
    hv_am_exit_t ok = {.status = 0};
    memset(&a, 0, sizeof(a));
    for (size_t i = 0; i < sizeof(life) / sizeof(life[0]); i++) {
        hv_am_actor_t prev = a;
        hv_err rc = HV_OK;
        switch (life[i].op) {
        case CREATE:
            hv_am_create(&a, 5, 2, 0, &out);
            break;
        case PLACE:
            rc = hv_am_placed(&a, life[i].node, &out);
            break;
        case START:
            rc = hv_am_started(&a, a.incarnation, &out);
            break;
        case CRASH:
            rc = hv_am_exited(&a, a.incarnation, &crash, &out);
            break;
        case EXIT0:
            rc = hv_am_exited(&a, a.incarnation, &ok, &out);
            break;
        case NOTICE:
            rc = hv_am_notice(&a, life[i].node, &out);
            break;
        case KILL:
            rc = hv_am_kill(&a, 0, &out);
            break;
        case KILL_RESTART:
            rc = hv_am_kill(&a, 1, &out);
            rc = rc == HV_OK ? hv_am_exited(&a, a.incarnation, &crash, &out) : rc;
            break;
        case LOST:
            rc = hv_am_node_lost(&a, life[i].node, &out);
            break;
        }
        CHECK_RC(rc, HV_OK);
        if (strcmp(hv_am_step(&prev, &a), life[i].step) != 0) {
            fprintf(stderr, "step %zu: got '%s', want '%s'\n", i, hv_am_step(&prev, &a),
                    life[i].step);
            CHECK(0);
        }
    }
    CHECK_EQ(a.state, HV_AM_DEAD);
    CHECK_EQ(a.restarts, 2);
    CHECK_EQ(a.moves, 1);
    /* Dead stays dead: no second death; killed without restart: a death. */
    CHECK(strcmp(hv_am_step(&a, &a), "") == 0);
    hv_am_actor_t b;
    hv_am_create(&b, 6, 0, 0, &out);
    hv_am_actor_t before = b;
    CHECK_RC(hv_am_kill(&b, 0, &out), HV_OK);
    CHECK(strcmp(hv_am_step(&before, &b), "death") == 0);
}

HV_CHECK_MAIN(NULL, NULL, {"create_place_start", case_create_place_start},
              {"restart_policy", case_restart_policy}, {"out_of_restarts", case_out_of_restarts},
              {"stale", case_stale}, {"kill", case_kill}, {"notice", case_notice},
              {"move_table", case_move_table}, {"demand_table", case_demand_table},
              {"state_not_kept", case_state_not_kept}, {"node_lost", case_node_lost},
              {"owner_ended", case_owner_ended}, {"head_restart", case_head_restart},
              {"words", case_words}, {"steps", case_steps})
