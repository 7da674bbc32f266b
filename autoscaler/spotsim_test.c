/*
 * spotsim_test: the simulated preemptible cloud with a fake clock: boot delays, capacity limits,
 * random preemptions (only preemptible instances; each notice followed by the kill after the
 * lead time; the mean gap and the no-notice fraction as configured; the same seed, the same run),
 * trace files (parsing and errors with file:line, replay in time order) and a full action array.
 * `spotsim_test <case>` runs one case.
 */
#include "hv_check.h"
#include "mem.h"
#include "spotsim.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define S 1000ull

static const hv_ss_type_t TYPES[] = {
    {.name = "spot", .preemptible = 1, .capacity = 0},
    {.name = "ondemand", .preemptible = 0, .capacity = 0},
    {.name = "scarce", .preemptible = 1, .capacity = 2},
};

static hv_ss_config_t cfg(void) {
    return (hv_ss_config_t){.types = TYPES,
                            .ntypes = 3,
                            .seed = 42,
                            .boot_min_ms = 1000,
                            .boot_max_ms = 1000,
                            .interval_s = 0,
                            .notice_s = 5,
                            .no_notice_fraction = 0};
}

static void case_boot(void) {
    hv_ss_config_t c = cfg();
    c.boot_min_ms = 500;
    c.boot_max_ms = 1500;
    hv_ss_t *s = hv_ss_create(&c, 0);
    CHECK(s != NULL);
    char why[160];
    hv_ss_action_t a[4];
    CHECK_EQ(hv_ss_launch(s, 7, 0, 0, why, sizeof(why)), 1);
    CHECK_EQ(hv_ss_launch(s, 7, 0, 0, why, sizeof(why)), 0); /* id in use */
    uint64_t at = hv_ss_next_ms(s);
    CHECK(at >= 500 && at <= 1500);
    CHECK_EQ(hv_ss_step(s, at - 1, a, 4), 0);
    CHECK_EQ(hv_ss_step(s, at, a, 4), 1);
    CHECK_EQ(a[0].kind, HV_SS_BOOTED);
    CHECK_EQ(a[0].instance, 7);
    CHECK_STR(a[0].reason, "instance 7 (spot) booted");
    CHECK_EQ(hv_ss_next_ms(s), UINT64_MAX); /* no preemptions configured */
    CHECK_EQ(hv_ss_count(s, 0), 1);
    hv_ss_terminate(s, 7);
    CHECK_EQ(hv_ss_count(s, 0), 0);
    hv_ss_destroy(s);
    /* a bad config */
    c.boot_min_ms = 2000;
    CHECK(hv_ss_create(&c, 0) == NULL);
}

static void case_capacity(void) {
    hv_ss_config_t c = cfg();
    hv_ss_t *s = hv_ss_create(&c, 0);
    char why[160];
    CHECK_EQ(hv_ss_launch(s, 1, 2, 0, why, sizeof(why)), 1);
    CHECK_EQ(hv_ss_launch(s, 2, 2, 0, why, sizeof(why)), 1);
    CHECK_EQ(hv_ss_launch(s, 3, 2, 0, why, sizeof(why)), 0);
    CHECK_STR(why, "spot-sim: no capacity for type scarce (2 of 2 in use)");
    hv_ss_terminate(s, 1);
    CHECK_EQ(hv_ss_launch(s, 3, 2, 0, why, sizeof(why)), 1);
    /* no limit on the others */
    for (uint64_t i = 10; i < 60; i++) {
        CHECK_EQ(hv_ss_launch(s, i, 0, 0, why, sizeof(why)), 1);
    }
    hv_ss_destroy(s);
}

typedef struct run_s {
    uint32_t notices, preempts, without, notes;
    double gap_sum;
    uint32_t gaps;
    int only_preemptible, kill_after_notice;
    char log[4096];
} run_t;

/* Keeps 4 spot and 2 on-demand instances running for seconds of simulated time (each preempted
 * instance replaced at once) and records what happened. */
static void simulate(const hv_ss_config_t *c, uint64_t seconds, run_t *r) {
    memset(r, 0, sizeof(*r));
    r->only_preemptible = 1;
    r->kill_after_notice = 1;
    hv_ss_t *s = hv_ss_create(c, 0);
    CHECK(s != NULL);
    char why[160];
    uint64_t next_id = 1;
    static uint64_t type_of[100000], noticed_at[100000];
    memset(type_of, 0, sizeof(type_of));
    memset(noticed_at, 0, sizeof(noticed_at));
    for (int i = 0; i < 6; i++) {
        type_of[next_id] = i < 4 ? 0 : 1;
        CHECK_EQ(hv_ss_launch(s, next_id, (size_t)type_of[next_id], 0, why, sizeof(why)), 1);
        next_id++;
    }
    uint64_t last_event = 0;
    for (uint64_t now = 0; now <= seconds * S; now += 100) {
        hv_ss_action_t a[8];
        size_t n = hv_ss_step(s, now, a, 8);
        for (size_t i = 0; i < n; i++) {
            uint64_t id = a[i].instance;
            if (a[i].kind == HV_SS_NOTICE || (a[i].kind == HV_SS_PREEMPTED && !a[i].with_notice)) {
                if (last_event != 0) {
                    r->gap_sum += (double)(now - last_event);
                    r->gaps++;
                }
                last_event = now;
                if (type_of[id] != 0) {
                    r->only_preemptible = 0;
                }
            }
            if (a[i].kind == HV_SS_NOTICE) {
                r->notices++;
                noticed_at[id] = now;
            } else if (a[i].kind == HV_SS_PREEMPTED) {
                r->preempts++;
                if (a[i].with_notice) {
                    /* the kill comes notice_s after the notice (within one tick) */
                    uint64_t d = now - noticed_at[id];
                    if (d < c->notice_s * S || d > c->notice_s * S + 100) {
                        r->kill_after_notice = 0;
                    }
                } else {
                    r->without++;
                }
                CHECK(next_id < 100000);
                type_of[next_id] = type_of[id];
                CHECK_EQ(hv_ss_launch(s, next_id, (size_t)type_of[id], now, why, sizeof(why)), 1);
                next_id++;
            } else if (a[i].kind == HV_SS_NOTE) {
                r->notes++;
            }
            if (strlen(r->log) + 40 < sizeof(r->log)) {
                size_t l = strlen(r->log);
                snprintf(r->log + l, sizeof(r->log) - l, "%d:%llu@%llu ", (int)a[i].kind,
                         (unsigned long long)id, (unsigned long long)now);
            }
        }
    }
    hv_ss_destroy(s);
}

static void case_random_preemptions(void) {
    hv_ss_config_t c = cfg();
    c.boot_min_ms = c.boot_max_ms = 0;
    c.interval_s = 10;
    static run_t r, r2, r3;
    simulate(&c, 20000, &r);
    CHECK(r.only_preemptible);
    CHECK(r.kill_after_notice);
    CHECK_EQ(r.without, 0);
    CHECK(r.notices > 1000);
    CHECK_EQ(r.preempts, r.notices); /* every notice ends in its kill (within the run) */
    /* the mean gap between preemptions is the configured 10 s, within 10% over ~2000 events */
    double mean = r.gap_sum / r.gaps / 1000.0;
    CHECK(mean > 9.0 && mean < 11.0);
    /* reproducible from the seed, different with another */
    simulate(&c, 20000, &r2);
    CHECK_STR(r2.log, r.log);
    c.seed = 43;
    simulate(&c, 20000, &r3);
    CHECK(strcmp(r3.log, r.log) != 0);
}

static void case_no_notice_fraction(void) {
    static const double fractions[] = {0.0, 0.3, 1.0};
    for (size_t i = 0; i < 3; i++) {
        hv_ss_config_t c = cfg();
        c.boot_min_ms = c.boot_max_ms = 0;
        c.interval_s = 5;
        c.no_notice_fraction = fractions[i];
        static run_t r;
        simulate(&c, 20000, &r);
        uint32_t events = r.notices + r.without;
        CHECK(events > 2000);
        double got = (double)r.without / events;
        CHECK(fabs(got - fractions[i]) < 0.05);
    }
}

static const char TRACE[] = "# time type event [arg]\n"
                            "\n"
                            "30 spot preempt   # a notice, the kill 5 s later\n"
                            "10 spot capacity 1\n"
                            "40.5 spot kill\n"
                            "10 ondemand kill\n"
                            "50 spot preempt\n";

static void case_trace_parse(void) {
    hv_ss_trace_event_t *ev = NULL;
    size_t n = 0;
    char err[200];
    CHECK_EQ(hv_ss_trace_parse(TRACE, "t.trace", TYPES, 3, &ev, &n, err, sizeof(err)), 1);
    CHECK_EQ(n, 5);
    /* sorted by time, the file's order kept at 10 s */
    CHECK_EQ(ev[0].at_ms, 10000);
    CHECK_EQ(ev[0].kind, HV_SS_TRACE_CAPACITY);
    CHECK_EQ(ev[0].arg, 1);
    CHECK_EQ(ev[1].at_ms, 10000);
    CHECK_EQ(ev[1].type, 1);
    CHECK_EQ(ev[1].kind, HV_SS_TRACE_KILL);
    CHECK_EQ(ev[2].at_ms, 30000);
    CHECK_EQ(ev[3].at_ms, 40500);
    hv_free(ev);
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"10 spot\n", "t.trace:1: expected 'TIME_S TYPE EVENT [ARG]', got 2 fields"},
        {"# c\n10 gpu preempt\n", "t.trace:2: unknown node type 'gpu'"},
        {"x spot kill\n", "t.trace:1: time 'x' is not a number of seconds >= 0"},
        {"-1 spot kill\n", "t.trace:1: time '-1' is not a number of seconds >= 0"},
        {"1 spot explode\n",
         "t.trace:1: unknown event 'explode' (preempt, kill, capacity or reclaim)"},
        {"1 spot kill 3\n", "t.trace:1: 'kill' takes no argument"},
        {"1 spot capacity\n", "t.trace:1: 'capacity' takes a number of instances (0..1000000)"},
        {"1 spot capacity -2\n", "t.trace:1: 'capacity' takes a number of instances (0..1000000)"},
        {"1 spot capacity 1 2 3\n", "t.trace:1: expected 'TIME_S TYPE EVENT [ARG]', got 5 fields"},
        {"1 spot reclaim x\n", "t.trace:1: 'reclaim' takes a number of instances (0..1000000)"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        CHECK_EQ(hv_ss_trace_parse(bad[i].text, "t.trace", TYPES, 3, &ev, &n, err, sizeof(err)), 0);
        CHECK_STR(err, bad[i].want);
        CHECK(ev == NULL);
    }
}

/* The trace replayed: capacity, a notice then the kill, a kill without notice, a no-op. */
static void case_trace_replay(void) {
    hv_ss_trace_event_t *ev = NULL;
    size_t n = 0;
    char err[200], why[160];
    CHECK_EQ(hv_ss_trace_parse(TRACE, "t.trace", TYPES, 3, &ev, &n, err, sizeof(err)), 1);
    hv_ss_config_t c = cfg();
    c.boot_min_ms = c.boot_max_ms = 0;
    c.interval_s = 10; /* ignored: a trace replaces random preemptions */
    c.trace = ev;
    c.ntrace = n;
    hv_ss_t *s = hv_ss_create(&c, 100 * S); /* the trace counts from the start */
    CHECK_EQ(hv_ss_launch(s, 1, 0, 100 * S, why, sizeof(why)), 1);
    CHECK_EQ(hv_ss_launch(s, 2, 0, 100 * S, why, sizeof(why)), 1);
    hv_ss_action_t a[16];
    char got[512] = "";
    size_t total = 0;
    for (uint64_t now = 100 * S; now <= 200 * S; now += 500) {
        size_t k = hv_ss_step(s, now, a, 16);
        for (size_t i = 0; i < k; i++, total++) {
            size_t l = strlen(got);
            snprintf(got + l, sizeof(got) - l, "%s%d:%llu@%llu", total ? " " : "", (int)a[i].kind,
                     (unsigned long long)a[i].instance, (unsigned long long)(now / 100 - 1000));
        }
        if (now == 115 * S) {
            /* capacity 1 from 110 s, two running: no launch */
            CHECK_EQ(hv_ss_launch(s, 3, 0, now, why, sizeof(why)), 0);
        }
    }
    /* (kind:instance@tenths of a second since start) boots, capacity note, the on-demand kill
     * finds nothing, notice to 1 at 30 s, its kill at 35 s, kill of 2 (no notice) at 40.5 s,
     * nothing left to preempt at 50 s */
    CHECK_STR(got, "0:1@0 0:2@0 3:0@100 3:0@100 1:1@300 2:1@350 2:2@405 3:0@500");
    hv_ss_destroy(s);
    hv_free(ev);
}

/* reclaim N: the capacity falls to N and the newest instances beyond it go at once, without
 * notice, booting ones included; a noticed one due at the same time goes first (its own kill),
 * and within capacity nothing is taken. */
static void case_trace_reclaim(void) {
    static const char text[] = "5 spot preempt\n"
                               "10 spot reclaim 1\n"
                               "20 spot capacity 3\n"
                               "30 spot reclaim 2\n";
    hv_ss_trace_event_t *ev = NULL;
    size_t n = 0;
    char err[200], why[160];
    CHECK_EQ(hv_ss_trace_parse(text, "t.trace", TYPES, 3, &ev, &n, err, sizeof(err)), 1);
    CHECK_EQ(ev[1].kind, HV_SS_TRACE_RECLAIM);
    CHECK_EQ(ev[1].arg, 1);
    hv_ss_config_t c = cfg(); /* notice_s 5 */
    c.boot_min_ms = c.boot_max_ms = 0;
    c.trace = ev;
    c.ntrace = n;
    hv_ss_t *s = hv_ss_create(&c, 0);
    CHECK_EQ(hv_ss_launch(s, 1, 0, 0, why, sizeof(why)), 1);
    CHECK_EQ(hv_ss_launch(s, 2, 0, 0, why, sizeof(why)), 1);
    hv_ss_action_t a[16];
    CHECK_EQ(hv_ss_step(s, 1 * S, a, 16), 2); /* both boot */
    c.boot_min_ms = c.boot_max_ms = 60 * S;   /* 3 and 4 still boot at 10 s */
    CHECK_EQ(hv_ss_launch(s, 3, 0, 2 * S, why, sizeof(why)), 1);
    CHECK_EQ(hv_ss_launch(s, 4, 0, 2 * S, why, sizeof(why)), 1);
    size_t k = hv_ss_step(s, 10 * S, a, 16);
    /* notice to 1 at 5 s, its kill at 10 s, then 4 and 3 (booting) taken, then the note */
    CHECK_EQ(k, 5);
    CHECK_EQ(a[0].kind, HV_SS_NOTICE);
    CHECK_EQ(a[0].instance, 1);
    CHECK_EQ(a[1].kind, HV_SS_PREEMPTED);
    CHECK_EQ(a[1].instance, 1);
    CHECK_EQ(a[1].with_notice, 1);
    CHECK_EQ(a[2].kind, HV_SS_PREEMPTED);
    CHECK_EQ(a[2].instance, 4);
    CHECK_EQ(a[2].with_notice, 0);
    CHECK_EQ(a[3].instance, 3);
    CHECK_EQ(a[4].kind, HV_SS_NOTE);
    CHECK_STR(a[4].reason, "trace at 10 s: capacity of spot is now 1");
    CHECK_EQ(hv_ss_count(s, 0), 1);
    CHECK_EQ(hv_ss_launch(s, 5, 0, 11 * S, why, sizeof(why)), 0); /* 1 of 1 in use */
    CHECK_EQ(hv_ss_step(s, 20 * S, a, 16), 1);                    /* capacity 3 */
    CHECK_EQ(hv_ss_launch(s, 6, 0, 21 * S, why, sizeof(why)), 1);
    CHECK_EQ(hv_ss_step(s, 30 * S, a, 1), 1); /* within capacity 2: only the note */
    CHECK_EQ(a[0].kind, HV_SS_NOTE);
    CHECK_EQ(hv_ss_count(s, 0), 2);
    hv_ss_destroy(s);
    hv_free(ev);
}

/* A full action array: the rest comes on the next call, in time order. */
static void case_full_array(void) {
    hv_ss_config_t c = cfg();
    hv_ss_t *s = hv_ss_create(&c, 0);
    char why[160];
    CHECK_EQ(hv_ss_launch(s, 1, 1, 0, why, sizeof(why)), 1);
    c.boot_min_ms = c.boot_max_ms = 1000;
    CHECK_EQ(hv_ss_launch(s, 2, 1, 500, why, sizeof(why)), 1);
    hv_ss_action_t a[1];
    CHECK_EQ(hv_ss_step(s, 5000, a, 1), 1);
    CHECK_EQ(a[0].instance, 1);
    CHECK_EQ(hv_ss_step(s, 5000, a, 1), 1);
    CHECK_EQ(a[0].instance, 2);
    CHECK_EQ(hv_ss_step(s, 5000, a, 1), 0);
    hv_ss_destroy(s);
}

HV_CHECK_MAIN(NULL, NULL, {"boot", case_boot}, {"capacity", case_capacity},
              {"random_preemptions", case_random_preemptions},
              {"no_notice_fraction", case_no_notice_fraction}, {"trace_parse", case_trace_parse},
              {"trace_replay", case_trace_replay}, {"trace_reclaim", case_trace_reclaim},
              {"full_array", case_full_array})
