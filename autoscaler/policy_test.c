/*
 * policy_test: the autoscaler's rules, table by table, with a fake clock: each type's minimum,
 * demand served in fallback order, capacity on its way, max_nodes and the upscaling speed, GPU
 * fit, launch timeouts and failures setting a type aside and bringing it back, idle nodes given
 * back (never a busy one, never below a minimum), a full action array, and bad configurations.
 * `policy_test <case>` runs one case.
 */
#include "hv_check.h"
#include "policy.h"

#include <stdint.h>
#include <string.h>

#define S 1000ull /* ms per second */

/* spot-a (2 slots, at most 2), spot-b (4 slots, at most 2), ondemand (4 slots, at most 10). */
static const hv_as_type_t TYPES[] = {
    {.name = "spot-a", .slots = 2, .preemptible = 1, .price_per_hour = 0.1, .max_nodes = 2},
    {.name = "spot-b", .slots = 4, .preemptible = 1, .price_per_hour = 0.2, .max_nodes = 2},
    {.name = "ondemand", .slots = 4, .price_per_hour = 0.8, .max_nodes = 10},
};

static hv_as_config_t cfg(void) {
    return (hv_as_config_t){.types = TYPES,
                            .ntypes = 3,
                            .min_nodes = 0,
                            .max_nodes = 20,
                            .upscaling_speed = 1.0,
                            .idle_timeout_s = 300,
                            .launch_timeout_s = 60,
                            .max_launch_failures = 3,
                            .set_aside_s = 120};
}

/* The actions as a compact string: "L0 L0 L1 T7 A0 B0 U" (launch type, terminate instance,
 * type aside, type back, unmet). */
static void summary(const hv_as_action_t *a, size_t n, char *buf, size_t len) {
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        size_t used = strlen(buf);
        switch (a[i].kind) {
        case HV_AS_LAUNCH:
            snprintf(buf + used, len - used, "%sL%zu", i ? " " : "", a[i].type);
            break;
        case HV_AS_TERMINATE:
            snprintf(buf + used, len - used, "%sT%llu%s", i ? " " : "",
                     (unsigned long long)a[i].instance, a[i].launch_failure ? "!" : "");
            break;
        case HV_AS_TYPE_ASIDE:
            snprintf(buf + used, len - used, "%sA%zu", i ? " " : "", a[i].type);
            break;
        case HV_AS_TYPE_BACK:
            snprintf(buf + used, len - used, "%sB%zu", i ? " " : "", a[i].type);
            break;
        case HV_AS_UNMET:
            snprintf(buf + used, len - used, "%sU", i ? " " : "");
            break;
        case HV_AS_DRAIN:
            snprintf(buf + used, len - used, "%sD%llu", i ? " " : "",
                     (unsigned long long)a[i].instance);
            break;
        }
    }
}

/* Demand served in fallback order, against what already exists and is on its way. */
static void case_demand(void) {
    static const struct {
        const char *name;
        hv_as_instance_t inst[4];
        size_t ninst;
        uint32_t workers;
        uint32_t max_nodes;
        const char *want;
    } rows[] = {
        {"nothing wanted", {{0}}, 0, 0, 20, ""},
        {"one worker: the first type", {{0}}, 0, 1, 20, "L0"},
        {"two fit one spot-a node", {{0}}, 0, 2, 20, "L0"},
        {"10 workers: spot-a to its max, then spot-b, then on-demand",
         {{0}},
         0,
         10,
         20,
         "L0 L0 L1 L1"},
        {"14 workers reach on-demand", {{0}}, 0, 14, 20, "L0 L0 L1 L1 L2"},
        {"capacity launching covers it",
         {{.id = 1, .type = 0, .state = HV_AS_LAUNCHING, .launched_ms = 0},
          {.id = 2, .type = 0, .state = HV_AS_LAUNCHING, .launched_ms = 0}},
         2,
         3,
         20,
         ""},
        {"a running spot-a counts against its max",
         {{.id = 1, .type = 0, .state = HV_AS_RUNNING, .workers = 2},
          {.id = 2, .type = 0, .state = HV_AS_RUNNING, .workers = 2}},
         2,
         3,
         20,
         "L1"},
        {"a draining node (a notice: leaving) does not count against max: its replacement "
         "is bought while it runs",
         {{.id = 1, .type = 0, .state = HV_AS_DRAINING, .workers = 2},
          {.id = 2, .type = 0, .state = HV_AS_RUNNING, .workers = 2}},
         2,
         1,
         20,
         "L0"},
        {"a terminating node does not count",
         {{.id = 1, .type = 0, .state = HV_AS_TERMINATING},
          {.id = 2, .type = 0, .state = HV_AS_RUNNING, .workers = 2}},
         2,
         1,
         20,
         "L0"},
        {"max_nodes of the cluster stops it", {{0}}, 0, 10, 3, "L0 L0 L1 U"},
        {"max_nodes reached before",
         {{.id = 1, .type = 2, .state = HV_AS_RUNNING, .workers = 4}},
         1,
         1,
         1,
         "U"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_as_config_t c = cfg();
        c.max_nodes = rows[i].max_nodes;
        hv_as_type_state_t ts[3] = {{0}};
        hv_as_demand_t d = {.workers = rows[i].workers, .slots_per_worker = 1, .what = "job 1"};
        hv_as_action_t out[16];
        size_t n = hv_as_decide(&c, ts, rows[i].inst, rows[i].ninst, &d, 1, 10 * S, out, 16);
        char got[128];
        summary(out, n, got, sizeof(got));
        if (strcmp(got, rows[i].want) != 0) {
            fprintf(stderr, "row '%s'\n", rows[i].name);
        }
        CHECK_STR(got, rows[i].want);
    }
}

/* The reasons say what the user needs: who wants what, what was skipped and why. */
static void case_reasons(void) {
    hv_as_config_t c = cfg();
    c.max_nodes = 3;
    hv_as_type_state_t ts[3] = {{0}};
    hv_as_demand_t d = {.workers = 10, .slots_per_worker = 1, .what = "job 7"};
    hv_as_action_t out[8];
    size_t n = hv_as_decide(&c, ts, NULL, 0, &d, 1, 0, out, 8);
    CHECK_EQ(n, 4);
    CHECK(strstr(out[0].reason, "job 7 wants 10 more workers") != NULL);
    CHECK(strstr(out[0].reason, "a spot-a node holds 2") != NULL);
    CHECK(strstr(out[2].reason, "skipped spot-a at its max_nodes") != NULL);
    CHECK_STR(hv_as_action_name(out[3].kind), "unmet");
    CHECK(strstr(out[3].reason, "job 7 wants 2 more workers: the cluster is at max_nodes 3") !=
          NULL);
}

/* Each type's minimum, with what exists counted (a draining node does not keep the minimum). */
static void case_min_nodes(void) {
    static const hv_as_type_t types[] = {
        {.name = "a", .slots = 2, .min_nodes = 2, .max_nodes = 4},
        {.name = "b", .slots = 2, .min_nodes = 1, .max_nodes = 1},
    };
    static const struct {
        const char *name;
        hv_as_instance_t inst[3];
        size_t ninst;
        const char *want;
    } rows[] = {
        {"empty cluster", {{0}}, 0, "L0 L0 L1"},
        {"one a launching", {{.id = 1, .type = 0, .state = HV_AS_LAUNCHING}}, 1, "L0 L1"},
        {"all there",
         {{.id = 1, .type = 0, .state = HV_AS_RUNNING},
          {.id = 2, .type = 0, .state = HV_AS_RUNNING},
          {.id = 3, .type = 1, .state = HV_AS_RUNNING}},
         3,
         ""},
        {"a draining a is replaced",
         {{.id = 1, .type = 0, .state = HV_AS_RUNNING},
          {.id = 2, .type = 0, .state = HV_AS_DRAINING},
          {.id = 3, .type = 1, .state = HV_AS_RUNNING}},
         3,
         "L0"},
        {"b at its max but draining: replaced before it goes",
         {{.id = 1, .type = 0, .state = HV_AS_RUNNING},
          {.id = 2, .type = 0, .state = HV_AS_RUNNING},
          {.id = 3, .type = 1, .state = HV_AS_DRAINING}},
         3,
         "L1"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_as_config_t c = cfg();
        c.types = types;
        c.ntypes = 2;
        hv_as_type_state_t ts[2] = {{0}};
        hv_as_action_t out[8];
        size_t n = hv_as_decide(&c, ts, rows[i].inst, rows[i].ninst, NULL, 0, 1000, out, 8);
        char got[64];
        summary(out, n, got, sizeof(got));
        if (strcmp(got, rows[i].want) != 0) {
            fprintf(stderr, "row '%s'\n", rows[i].name);
        }
        CHECK_STR(got, rows[i].want);
    }
    hv_as_config_t c = cfg();
    c.types = types;
    c.ntypes = 2;
    hv_as_type_state_t ts[2] = {{0}};
    hv_as_action_t out[4];
    CHECK_EQ(hv_as_decide(&c, ts, NULL, 0, NULL, 0, 0, out, 4), 3);
    CHECK_STR(out[0].reason, "type a keeps at least 2 nodes (has 0)");
}

/* At most max(5, ceil(speed x running)) launching at once. */
static void case_upscaling_speed(void) {
    static const hv_as_type_t types[] = {{.name = "c", .slots = 1, .max_nodes = 1000}};
    static const struct {
        uint32_t running, launching;
        double speed;
        uint32_t want_launches;
    } rows[] = {
        {0, 0, 1.0, 5},   /* the floor of 5 */
        {2, 0, 1.0, 5},   /* 2 x 1.0 < 5 */
        {10, 0, 1.0, 10}, /* 10 x 1.0 */
        {10, 4, 1.0, 6},  /* 4 already launching */
        {10, 0, 0.5, 5},  /* ceil(5) */
        {11, 0, 0.5, 6},  /* ceil(5.5) */
        {20, 0, 2.0, 40}, /* doubling */
        {20, 45, 2.0, 0}, /* over the limit already */
    };
    static hv_as_instance_t inst[100];
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_as_config_t c = cfg();
        c.types = types;
        c.ntypes = 1;
        c.max_nodes = 1000;
        c.upscaling_speed = rows[i].speed;
        size_t ni = 0;
        for (uint32_t r = 0; r < rows[i].running; r++, ni++) {
            inst[ni] = (hv_as_instance_t){.id = ni + 1, .state = HV_AS_RUNNING, .workers = 1};
        }
        for (uint32_t l = 0; l < rows[i].launching; l++, ni++) {
            inst[ni] =
                (hv_as_instance_t){.id = ni + 1, .state = HV_AS_LAUNCHING, .launched_ms = 5 * S};
        }
        hv_as_type_state_t ts[1] = {{0}};
        hv_as_demand_t d = {.workers = 500, .slots_per_worker = 1};
        static hv_as_action_t out[200];
        size_t n = hv_as_decide(&c, ts, inst, ni, &d, 1, 10 * S, out, 200);
        uint32_t launches = 0;
        for (size_t j = 0; j < n; j++) {
            launches += out[j].kind == HV_AS_LAUNCH;
            CHECK(out[j].kind != HV_AS_UNMET); /* waiting for the speed is not unmet */
        }
        CHECK_EQ(launches, rows[i].want_launches);
    }
}

/* An actor's demand: node labels and memory choose the type (the first in fallback order that
 * carries the labels and has the memory); capacity on its way serves only what it fits; a demand
 * no type meets is unmet, saying which types lack what. */
static void case_actor_demand(void) {
    static const hv_as_type_t types[] = {
        {.name = "small", .slots = 4, .memory_mb = 2048, .labels = "zone=a", .max_nodes = 10},
        {.name = "big",
         .slots = 4,
         .memory_mb = 16384,
         .labels = "zone=a,disk=ssd",
         .max_nodes = 10},
        {.name = "west", .slots = 4, .memory_mb = 16384, .labels = "zone=b", .max_nodes = 10},
    };
    CHECK_EQ(hv_as_fit_demand(&types[0], &(hv_as_demand_t){.slots_per_worker = 1}), 4);
    CHECK_EQ(hv_as_fit_demand(&types[0], &(hv_as_demand_t){.memory_mb = 1024}), 2);
    CHECK_EQ(hv_as_fit_demand(&types[0], &(hv_as_demand_t){.memory_mb = 4096}), 0);
    CHECK_EQ(hv_as_fit_demand(&types[1], &(hv_as_demand_t){.labels = "disk=ssd"}), 4);
    CHECK_EQ(hv_as_fit_demand(&types[0], &(hv_as_demand_t){.labels = "disk=ssd"}), 0);
    CHECK_EQ(hv_as_fit_demand(&types[0], &(hv_as_demand_t){.labels = "zone=ab"}), 0);
    static const struct {
        const char *name;
        hv_as_instance_t inst[2];
        size_t ninst;
        hv_as_demand_t d;
        const char *want;
        const char *reason; /* a part of the first action's reason, or NULL */
    } rows[] = {
        {"no labels, little memory: the first type",
         {{0}},
         0,
         {.workers = 1, .slots_per_worker = 1, .memory_mb = 512, .what = "actor default/a"},
         "L0",
         "a small node holds 4"},
        {"memory over small's: big",
         {{0}},
         0,
         {.workers = 1, .slots_per_worker = 1, .memory_mb = 4096, .what = "actor default/a"},
         "L1",
         "skipped small too small"},
        {"a label only big has",
         {{0}},
         0,
         {.workers = 1, .slots_per_worker = 1, .labels = "disk=ssd", .what = "actor default/a"},
         "L1",
         "skipped small lacks its labels"},
        {"zone=b: west, past both",
         {{0}},
         0,
         {.workers = 1, .slots_per_worker = 1, .labels = "zone=b", .what = "actor default/a"},
         "L2",
         NULL},
        {"two actors of 8 GiB: one big node holds both",
         {{0}},
         0,
         {.workers = 2, .slots_per_worker = 1, .memory_mb = 8192, .what = "actor x"},
         "L1",
         NULL},
        {"three actors of 8 GiB: two big nodes",
         {{0}},
         0,
         {.workers = 3, .slots_per_worker = 1, .memory_mb = 8192, .what = "actor x"},
         "L1 L1",
         NULL},
        {"a small launching does not serve a memory demand it cannot hold",
         {{.id = 1, .type = 0, .state = HV_AS_LAUNCHING}},
         1,
         {.workers = 1, .slots_per_worker = 1, .memory_mb = 4096, .what = "actor default/a"},
         "L1",
         NULL},
        {"a big launching serves it",
         {{.id = 1, .type = 1, .state = HV_AS_LAUNCHING}},
         1,
         {.workers = 1, .slots_per_worker = 1, .memory_mb = 4096, .what = "actor default/a"},
         "",
         NULL},
        {"a moving actor whose big node drains: a big node is bought (the draining one's "
         "capacity is leaving, not on its way)",
         {{.id = 1, .type = 1, .state = HV_AS_DRAINING}},
         1,
         {.workers = 1, .slots_per_worker = 1, .labels = "disk=ssd", .what = "actor default/m"},
         "L1",
         "actor default/m wants 1 more workers"},
        {"a label no type has: unmet, with why",
         {{0}},
         0,
         {.workers = 1, .slots_per_worker = 1, .labels = "zone=c", .what = "actor default/a"},
         "U",
         "actor default/a wants 1 more workers"},
        {"memory no type has: unmet",
         {{0}},
         0,
         {.workers = 1, .slots_per_worker = 1, .memory_mb = 65536, .what = "actor default/a"},
         "U",
         "big too small"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_as_config_t c = cfg();
        c.types = types;
        c.ntypes = 3;
        hv_as_type_state_t ts[3] = {{0}};
        hv_as_action_t out[8];
        size_t n = hv_as_decide(&c, ts, rows[i].inst, rows[i].ninst, &rows[i].d, 1, 0, out, 8);
        char got[64];
        summary(out, n, got, sizeof(got));
        if (strcmp(got, rows[i].want) != 0 ||
            (rows[i].reason != NULL && (n == 0 || strstr(out[0].reason, rows[i].reason) == NULL))) {
            fprintf(stderr, "%s: got \"%s\" (%s), want \"%s\" (%s)\n", rows[i].name, got,
                    n > 0 ? out[0].reason : "", rows[i].want, rows[i].reason ? rows[i].reason : "");
            hv_check_failures++;
        }
    }
}

/* Workers that need GPUs go to a type that has them; a type too small is skipped. */
static void case_gpu_fit(void) {
    static const hv_as_type_t types[] = {
        {.name = "cpu", .slots = 16, .max_nodes = 10},
        {.name = "gpu4", .slots = 8, .gpus = 4, .max_nodes = 10},
    };
    CHECK_EQ(hv_as_fit(&types[0], 1, 0), 16);
    CHECK_EQ(hv_as_fit(&types[0], 3, 0), 5);
    CHECK_EQ(hv_as_fit(&types[0], 1, 1), 0);
    CHECK_EQ(hv_as_fit(&types[1], 1, 1), 4);
    CHECK_EQ(hv_as_fit(&types[1], 4, 1), 2);
    CHECK_EQ(hv_as_fit(&types[1], 0, 0), 8); /* 0 slots per worker means 1 */
    hv_as_config_t c = cfg();
    c.types = types;
    c.ntypes = 2;
    hv_as_type_state_t ts[2] = {{0}};
    hv_as_demand_t d[] = {
        {.workers = 6, .slots_per_worker = 1, .gpus_per_worker = 1, .what = "job 2"},
        {.workers = 3, .slots_per_worker = 1, .what = "job 3"},
    };
    hv_as_action_t out[8];
    size_t n = hv_as_decide(&c, ts, NULL, 0, d, 2, 0, out, 8);
    char got[64];
    summary(out, n, got, sizeof(got));
    /* job 2: two gpu4 nodes (4 + 2 GPUs); job 3 fits in what is left of them (8+8-6 slots) */
    CHECK_STR(got, "L1 L1");
    CHECK(strstr(out[0].reason, "skipped cpu too small") != NULL);
    /* a GPU demand with no GPU type: unmet, saying why */
    c.ntypes = 1;
    n = hv_as_decide(&c, ts, NULL, 0, d, 1, 0, out, 8);
    CHECK_EQ(n, 1);
    CHECK_EQ(out[0].kind, HV_AS_UNMET);
    CHECK(strstr(out[0].reason, "job 2 wants 6 more workers (1 slot, 1 GPU each) and no type can "
                                "launch: cpu too small") != NULL);
    CHECK_EQ(out[0].demand, 0);
    /* The unmet demand is named by its index in d[], not by the words of the reason: the same
     * demand second in the list, under a name that is not in the reason's usual words. */
    hv_as_demand_t d2[] = {{.workers = 0, .what = "job 3"}, d[0]};
    d2[1].what = "Auftrag 2";
    hv_as_type_state_t ts2[1] = {{0}};
    n = hv_as_decide(&c, ts2, NULL, 0, d2, 2, 0, out, 8);
    CHECK_EQ(n, 1);
    CHECK_EQ(out[0].kind, HV_AS_UNMET);
    CHECK_EQ(out[0].demand, 1);
}

/* An instance that does not join in time is terminated and counted; K failures in a row set the
 * type aside, demand falls back to the next type, and the type comes back after its set-aside. */
static void case_launch_timeout_and_set_aside(void) {
    hv_as_config_t c = cfg();
    hv_as_type_state_t ts[3] = {{0}};
    hv_as_action_t out[8], aside;
    char got[64];
    hv_as_demand_t d = {.workers = 2, .slots_per_worker = 1, .what = "job 1"};
    /* t = 59 s: the launch of t = 0 is still within its 60 s */
    hv_as_instance_t in = {.id = 9, .type = 0, .state = HV_AS_LAUNCHING, .launched_ms = 0};
    size_t n = hv_as_decide(&c, ts, &in, 1, &d, 1, 59 * S, out, 8);
    CHECK_EQ(n, 0);
    /* t = 60 s: terminated as a launch failure; the demand launches spot-a again (1 failure) */
    n = hv_as_decide(&c, ts, &in, 1, &d, 1, 60 * S, out, 8);
    summary(out, n, got, sizeof(got));
    CHECK_STR(got, "T9! L0");
    CHECK_EQ(ts[0].failures, 1);
    CHECK(strstr(out[0].reason, "did not join within the launch timeout of 60 s") != NULL);
    /* two failures the provider reports at once: the third sets spot-a aside */
    CHECK_EQ(hv_as_launch_failed(&c, ts, 0, 61 * S, "capacity", &aside), 0);
    CHECK_EQ(hv_as_launch_failed(&c, ts, 0, 62 * S, "InsufficientInstanceCapacity", &aside), 1);
    CHECK_EQ(aside.kind, HV_AS_TYPE_ASIDE);
    CHECK_EQ(aside.until_ms, 182 * S);
    CHECK_STR(aside.reason, "type spot-a set aside for 120 s after 3 launch failures in a row "
                            "(last: InsufficientInstanceCapacity)");
    /* while aside: spot-b serves the demand, the reason says spot-a was skipped */
    n = hv_as_decide(&c, ts, NULL, 0, &d, 1, 100 * S, out, 8);
    summary(out, n, got, sizeof(got));
    CHECK_STR(got, "L1");
    CHECK(strstr(out[0].reason, "skipped spot-a set aside") != NULL);
    /* at its end: back, failures cleared, used first again */
    n = hv_as_decide(&c, ts, NULL, 0, &d, 1, 182 * S, out, 8);
    summary(out, n, got, sizeof(got));
    CHECK_STR(got, "B0 L0");
    CHECK_EQ(ts[0].failures, 0);
    CHECK_EQ(ts[0].aside_until_ms, 0);
    /* a joined instance clears the count */
    hv_as_launch_failed(&c, ts, 1, 200 * S, "x", NULL);
    CHECK_EQ(ts[1].failures, 1);
    hv_as_joined(ts, 1);
    CHECK_EQ(ts[1].failures, 0);
}

/* A timeout that sets the type aside does it in the same call, and the demand falls back. */
static void case_timeout_sets_aside(void) {
    hv_as_config_t c = cfg();
    c.max_launch_failures = 1;
    hv_as_type_state_t ts[3] = {{0}};
    hv_as_instance_t in = {.id = 4, .type = 0, .state = HV_AS_LAUNCHING, .launched_ms = 0};
    hv_as_demand_t d = {.workers = 1, .slots_per_worker = 1};
    hv_as_action_t out[8];
    char got[64];
    size_t n = hv_as_decide(&c, ts, &in, 1, &d, 1, 61 * S, out, 8);
    summary(out, n, got, sizeof(got));
    CHECK_STR(got, "T4! A0 L1");
    CHECK_EQ(out[1].until_ms, 181 * S);
}

/* A running instance whose node was lost goes after the launch timeout (60 s here), and is no
 * longer counted: a replacement is launched for the type's minimum. */
static void case_lost(void) {
    static const struct {
        const char *name;
        uint64_t lost_since;
        const char *want;
    } rows[] = {
        {"node there", 0, ""},
        {"lost 59 s", 41 * S, ""},
        {"lost 60 s", 40 * S, "T1 L0"},
    };
    static const hv_as_type_t types[] = {{.name = "a", .slots = 2, .min_nodes = 1, .max_nodes = 2}};
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_as_config_t c = cfg();
        c.types = types;
        c.ntypes = 1;
        hv_as_instance_t in = {.id = 1,
                               .type = 0,
                               .state = HV_AS_RUNNING,
                               .idle_since_ms = 100 * S,
                               .workers = 1,
                               .lost_since_ms = rows[i].lost_since};
        hv_as_type_state_t ts[1] = {{0}};
        hv_as_action_t out[8];
        size_t n = hv_as_decide(&c, ts, &in, 1, NULL, 0, 100 * S, out, 8);
        char got[64];
        summary(out, n, got, sizeof(got));
        if (strcmp(got, rows[i].want) != 0) {
            fprintf(stderr, "row '%s'\n", rows[i].name);
        }
        CHECK_STR(got, rows[i].want);
        if (n == 2) {
            CHECK(strstr(out[0].reason, "its node has been lost for 60 s") != NULL);
            CHECK_EQ(out[0].launch_failure, 0);
        }
    }
}

/* The cluster's minimum, met with the first usable type in fallback order after each type's own
 * minimum. */
static void case_cluster_min(void) {
    static const struct {
        const char *name;
        uint32_t min_nodes;
        hv_as_instance_t inst[2];
        size_t ninst;
        int a_aside;
        const char *want;
    } rows[] = {
        {"empty, min 2", 2, {{0}}, 0, 0, "L0 L0"},
        {"one running", 2, {{.id = 1, .type = 1, .state = HV_AS_RUNNING}}, 1, 0, "L0"},
        {"spot-a set aside: the next type", 1, {{0}}, 0, 1, "L1"},
        {"spot-a at its max: the next",
         3,
         {{.id = 1, .type = 0, .state = HV_AS_RUNNING},
          {.id = 2, .type = 0, .state = HV_AS_RUNNING}},
         2,
         0,
         "L1"},
        {"met", 1, {{.id = 1, .type = 2, .state = HV_AS_LAUNCHING}}, 1, 0, ""},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_as_config_t c = cfg();
        c.min_nodes = rows[i].min_nodes;
        hv_as_type_state_t ts[3] = {{0}};
        if (rows[i].a_aside) {
            ts[0].aside_until_ms = 1000 * S;
        }
        hv_as_action_t out[8];
        size_t n = hv_as_decide(&c, ts, rows[i].inst, rows[i].ninst, NULL, 0, 10 * S, out, 8);
        char got[64];
        summary(out, n, got, sizeof(got));
        if (strcmp(got, rows[i].want) != 0) {
            fprintf(stderr, "row '%s'\n", rows[i].name);
        }
        CHECK_STR(got, rows[i].want);
        if (n > 0) {
            CHECK(strstr(out[0].reason, "the cluster keeps at least") != NULL);
        }
    }
}

/* Idle nodes go after the idle timeout; never a busy one, never below a minimum. */
static void case_idle(void) {
    static const struct {
        const char *name;
        hv_as_instance_t inst[3];
        size_t ninst;
        uint32_t a_min, min_nodes;
        const char *want;
    } rows[] = {
        {"idle 299 s of 300",
         {{.id = 1, .type = 1, .state = HV_AS_RUNNING, .idle_since_ms = 1 * S}},
         1,
         0,
         0,
         ""},
        {"idle 300 s", {{.id = 1, .type = 1, .state = HV_AS_RUNNING}}, 1, 0, 0, "T1"},
        {"busy, however long ago it was idle",
         {{.id = 1, .type = 1, .state = HV_AS_RUNNING, .workers = 1}},
         1,
         0,
         0,
         ""},
        {"the type's minimum stays",
         {{.id = 1, .type = 0, .state = HV_AS_RUNNING},
          {.id = 2, .type = 0, .state = HV_AS_RUNNING}},
         2,
         1,
         0,
         "T1"},
        {"the cluster's minimum stays",
         {{.id = 1, .type = 0, .state = HV_AS_RUNNING},
          {.id = 2, .type = 1, .state = HV_AS_RUNNING},
          {.id = 3, .type = 1, .state = HV_AS_RUNNING}},
         3,
         0,
         2,
         "T1"},
        {"draining is the provider's",
         {{.id = 1, .type = 1, .state = HV_AS_DRAINING}},
         1,
         0,
         0,
         ""},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_as_type_t types[] = {
            {.name = "a", .slots = 2, .min_nodes = rows[i].a_min, .max_nodes = 5},
            {.name = "b", .slots = 2, .max_nodes = 5},
        };
        hv_as_config_t c = cfg();
        c.types = types;
        c.ntypes = 2;
        c.min_nodes = rows[i].min_nodes;
        hv_as_type_state_t ts[2] = {{0}};
        hv_as_action_t out[8];
        size_t n = hv_as_decide(&c, ts, rows[i].inst, rows[i].ninst, NULL, 0, 300 * S, out, 8);
        /* with workers waiting that the cluster cannot take (at max_nodes 3), nothing goes */
        c.max_nodes = 3;
        hv_as_demand_t wait = {.workers = 9, .slots_per_worker = 1, .what = "job 1"};
        hv_as_action_t out2[8];
        size_t n2 = hv_as_decide(&c, ts, rows[i].inst, rows[i].ninst, &wait, 1, 300 * S, out2, 8);
        for (size_t k = 0; k < n2; k++) {
            CHECK(out2[k].kind != HV_AS_TERMINATE);
        }
        char got[64];
        summary(out, n, got, sizeof(got));
        if (strcmp(got, rows[i].want) != 0) {
            fprintf(stderr, "row '%s'\n", rows[i].name);
        }
        CHECK_STR(got, rows[i].want);
        if (n == 1) {
            CHECK(strstr(out[0].reason, "idle for 300 s (idle timeout 300 s)") != NULL);
            CHECK_EQ(out[0].launch_failure, 0);
        }
    }
}

/* What rule 7's actions say (a launch for demand says something else). */
static void check_handback_reasons(const hv_as_action_t *out, size_t n, uint32_t waiting) {
    for (size_t k = 0; k < n; k++) {
        if (out[k].kind == HV_AS_DRAIN) {
            CHECK(strstr(out[k].reason, "handed back: a spot node has joined") != NULL);
        }
        if (out[k].kind == HV_AS_LAUNCH && waiting == 0) {
            CHECK(strstr(out[k].reason, "before it is handed back") != NULL);
        }
    }
}

/* Rule 7: an on-demand instance is handed back for spot, make before break. Types: spot (1
 * slot, 0.1/h), ondemand (1 slot, 0.4/h); max_nodes 2. */
static void case_handback(void) {
    static const struct {
        const char *name;
        hv_as_instance_t inst[4];
        size_t ninst;
        int spot_aside, handback_off, od_min;
        uint32_t waiting;
        const char *want;
    } rows[] = {
        {"spot usable again: a spot node is launched first (beyond max_nodes by the one handed "
         "back), the on-demand one keeps its worker",
         {{.id = 1, .type = 1, .state = HV_AS_RUNNING, .workers = 1},
          {.id = 2, .type = 0, .state = HV_AS_RUNNING, .workers = 1}},
         2,
         0,
         0,
         0,
         0,
         "L0"},
        {"two on demand: two spot nodes",
         {{.id = 1, .type = 1, .state = HV_AS_RUNNING, .workers = 1},
          {.id = 2, .type = 1, .state = HV_AS_RUNNING, .workers = 1}},
         2,
         0,
         0,
         0,
         0,
         "L0 L0"},
        {"its replacement is on its way: nothing more",
         {{.id = 1, .type = 1, .state = HV_AS_RUNNING, .workers = 1},
          {.id = 2, .type = 0, .state = HV_AS_RUNNING, .workers = 1},
          {.id = 3, .type = 0, .state = HV_AS_LAUNCHING}},
         3,
         0,
         0,
         0,
         0,
         ""},
        {"the replacement joined and is idle: the on-demand instance is drained",
         {{.id = 1, .type = 1, .state = HV_AS_RUNNING, .workers = 1},
          {.id = 2, .type = 0, .state = HV_AS_RUNNING, .workers = 1},
          {.id = 3, .type = 0, .state = HV_AS_RUNNING, .idle_since_ms = 1}},
         3,
         0,
         0,
         0,
         0,
         "D1"},
        {"drained, its worker still there: it stays",
         {{.id = 1, .type = 1, .state = HV_AS_DRAINING, .workers = 1, .handback = 1},
          {.id = 3, .type = 0, .state = HV_AS_RUNNING, .idle_since_ms = 1}},
         2,
         0,
         0,
         0,
         0,
         ""},
        {"drained and empty: terminated",
         {{.id = 1, .type = 1, .state = HV_AS_DRAINING, .handback = 1},
          {.id = 3, .type = 0, .state = HV_AS_RUNNING, .workers = 1}},
         2,
         0,
         0,
         0,
         0,
         "T1"},
        {"a draining on-demand node not handed back (a user's drain) is not terminated",
         {{.id = 1, .type = 1, .state = HV_AS_DRAINING}},
         1,
         0,
         0,
         0,
         0,
         ""},
        {"spot set aside (no capacity): the on-demand node stays",
         {{.id = 1, .type = 1, .state = HV_AS_RUNNING, .workers = 1}},
         1,
         1,
         0,
         0,
         0,
         ""},
        {"handback off: stays",
         {{.id = 1, .type = 1, .state = HV_AS_RUNNING, .workers = 1}},
         1,
         0,
         1,
         0,
         0,
         ""},
        {"the on-demand type's min_nodes stays",
         {{.id = 1, .type = 1, .state = HV_AS_RUNNING, .workers = 1}},
         1,
         0,
         0,
         1,
         0,
         ""},
        {"workers wait: demand first (one spot node), no hand-back",
         {{.id = 1, .type = 1, .state = HV_AS_RUNNING, .workers = 1}},
         1,
         0,
         0,
         0,
         1,
         "L0"},
        {"an idle on-demand node is not handed back (the idle rule's)",
         {{.id = 1, .type = 1, .state = HV_AS_RUNNING, .idle_since_ms = 1}},
         1,
         0,
         0,
         0,
         0,
         ""},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_as_type_t types[] = {
            {.name = "spot", .slots = 1, .preemptible = 1, .price_per_hour = 0.1, .max_nodes = 10},
            {.name = "ondemand",
             .slots = 1,
             .price_per_hour = 0.4,
             .max_nodes = 10,
             .min_nodes = (uint32_t)rows[i].od_min},
        };
        hv_as_config_t c = cfg();
        c.types = types;
        c.ntypes = 2;
        c.max_nodes = 2;
        c.handback = !rows[i].handback_off;
        hv_as_type_state_t ts[2] = {{0}};
        if (rows[i].spot_aside) {
            ts[0].aside_until_ms = 1000 * S;
        }
        hv_as_demand_t d = {.workers = rows[i].waiting, .slots_per_worker = 1, .what = "job 1"};
        hv_as_action_t out[8];
        size_t n = hv_as_decide(&c, ts, rows[i].inst, rows[i].ninst, &d, 1, 10 * S, out, 8);
        char got[64];
        summary(out, n, got, sizeof(got));
        if (strcmp(got, rows[i].want) != 0) {
            fprintf(stderr, "row '%s'\n", rows[i].name);
        }
        CHECK_STR(got, rows[i].want);
        check_handback_reasons(out, n, rows[i].waiting);
    }
}

/* Two one-slot types: spot (0.1/h) and ondemand (0.4/h), at most 10 each. */
static const hv_as_type_t SPOT_OD[] = {
    {.name = "spot", .slots = 1, .preemptible = 1, .price_per_hour = 0.1, .max_nodes = 10},
    {.name = "ondemand", .slots = 1, .price_per_hour = 0.4, .max_nodes = 10},
};

static hv_as_config_t cfg_spot_od(void) {
    hv_as_config_t c = cfg();
    c.types = SPOT_OD;
    c.ntypes = 2;
    return c;
}

/* Rule 7: the replacement that has joined is not given back as idle while it waits for the
 * drain. */
static void case_handback_held(void) {
    hv_as_config_t c = cfg_spot_od();
    c.handback = 1;
    hv_as_type_state_t ts[2] = {{0}};
    hv_as_instance_t in[] = {{.id = 1, .type = 1, .state = HV_AS_RUNNING, .workers = 1},
                             {.id = 2, .type = 0, .state = HV_AS_RUNNING}};
    hv_as_action_t out[8];
    char got[64];
    summary(out, hv_as_decide(&c, ts, in, 2, NULL, 0, 1000 * S, out, 8), got, sizeof(got));
    CHECK_STR(got, "D1");
}

/* Rule 8: spares while the measured preemption rate is high. */
static void case_spare(void) {
    hv_as_type_t types[] = {
        {.name = "spot", .slots = 1, .preemptible = 1, .price_per_hour = 0.1, .max_nodes = 10},
        {.name = "ondemand", .slots = 1, .price_per_hour = 0.4, .max_nodes = 10},
    };
    hv_as_config_t c = cfg();
    c.types = types;
    c.ntypes = 2;
    c.max_nodes = 5;
    c.spare_per_hour = 30;
    c.spare_window_s = 600;
    hv_as_type_state_t ts[2] = {{0}};
    /* the rate: a steady 60 an hour (one a minute) over the 600 s window reads about 60 */
    for (uint64_t t = 60; t <= 3600; t += 60) {
        hv_as_preempted(&c, ts, 0, t * S);
    }
    double r = hv_as_preempt_rate(&c, ts, 0, 3600 * S);
    CHECK(r > 50 && r < 70);
    /* it decays: an hour later, nearly nothing */
    CHECK(hv_as_preempt_rate(&c, ts, 0, 7200 * S) < 1);
    CHECK(hv_as_preempt_rate(&c, ts, 1, 3600 * S) == 0);

    static const struct {
        const char *name;
        hv_as_instance_t inst[6];
        size_t ninst;
        uint64_t now_s;
        uint32_t spares, max_nodes, waiting;
        const char *want;
    } rows[] = {
        {"rate high, 4 busy: one spare launched",
         {{.id = 1, .type = 0, .state = HV_AS_RUNNING, .workers = 1},
          {.id = 2, .type = 0, .state = HV_AS_RUNNING, .workers = 1},
          {.id = 3, .type = 0, .state = HV_AS_RUNNING, .workers = 1},
          {.id = 4, .type = 0, .state = HV_AS_RUNNING, .workers = 1}},
         4,
         3600,
         1,
         5,
         0,
         "L0"},
        {"two spares wanted",
         {{.id = 1, .type = 0, .state = HV_AS_RUNNING, .workers = 1}},
         1,
         3600,
         2,
         5,
         0,
         "L0 L0"},
        {"the spare is launching: nothing more",
         {{.id = 1, .type = 0, .state = HV_AS_RUNNING, .workers = 1},
          {.id = 2, .type = 0, .state = HV_AS_LAUNCHING, .launched_ms = 3590 * S}},
         2,
         3600,
         1,
         5,
         0,
         ""},
        {"the idle spare is kept past the idle timeout",
         {{.id = 1, .type = 0, .state = HV_AS_RUNNING, .workers = 1},
          {.id = 2, .type = 0, .state = HV_AS_RUNNING, .idle_since_ms = 1 * S}},
         2,
         3600,
         1,
         5,
         0,
         ""},
        {"a second idle node beyond the spares goes",
         {{.id = 1, .type = 0, .state = HV_AS_RUNNING, .idle_since_ms = 1 * S},
          {.id = 2, .type = 0, .state = HV_AS_RUNNING, .idle_since_ms = 1 * S}},
         2,
         3600,
         1,
         5,
         0,
         "T2"},
        {"at max_nodes: no spare",
         {{.id = 1, .type = 0, .state = HV_AS_RUNNING, .workers = 1},
          {.id = 2, .type = 0, .state = HV_AS_RUNNING, .workers = 1}},
         2,
         3600,
         1,
         2,
         0,
         ""},
        {"the rate has decayed below the threshold: the idle node goes",
         {{.id = 1, .type = 0, .state = HV_AS_RUNNING, .workers = 1},
          {.id = 2, .type = 0, .state = HV_AS_RUNNING, .idle_since_ms = 1 * S}},
         2,
         7200,
         1,
         5,
         0,
         "T2"},
        {"workers wait: the demand's launches only",
         {{.id = 1, .type = 0, .state = HV_AS_RUNNING, .workers = 1}},
         1,
         3600,
         1,
         5,
         1,
         "L0"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_as_config_t cc = c;
        cc.spare_nodes = rows[i].spares;
        cc.max_nodes = rows[i].max_nodes;
        hv_as_type_state_t t2[2];
        memcpy(t2, ts, sizeof(t2));
        hv_as_demand_t d = {.workers = rows[i].waiting, .slots_per_worker = 1, .what = "job 1"};
        hv_as_action_t out[8];
        size_t n =
            hv_as_decide(&cc, t2, rows[i].inst, rows[i].ninst, &d, 1, rows[i].now_s * S, out, 8);
        char got[64];
        summary(out, n, got, sizeof(got));
        if (strcmp(got, rows[i].want) != 0) {
            fprintf(stderr, "row '%s'\n", rows[i].name);
        }
        CHECK_STR(got, rows[i].want);
        if (n > 0 && out[0].kind == HV_AS_LAUNCH && rows[i].waiting == 0) {
            CHECK(strstr(out[0].reason, "a spare spot node") != NULL);
        }
    }
    /* off (0): no spare whatever the rate */
    c.spare_per_hour = 0;
    hv_as_instance_t one = {.id = 1, .type = 0, .state = HV_AS_RUNNING, .workers = 1};
    hv_as_action_t out[8];
    CHECK_EQ(hv_as_decide(&c, ts, &one, 1, NULL, 0, 3600 * S, out, 8), 0);
}

/* A full action array: what does not fit is decided on the next call, nothing twice. */
static void case_full_array(void) {
    hv_as_config_t c = cfg();
    hv_as_type_state_t ts[3] = {{0}};
    hv_as_demand_t d = {.workers = 4, .slots_per_worker = 1};
    hv_as_action_t out[1];
    CHECK_EQ(hv_as_decide(&c, ts, NULL, 0, &d, 1, 0, out, 1), 1);
    CHECK_EQ(out[0].kind, HV_AS_LAUNCH);
    hv_as_instance_t in = {.id = 1, .type = out[0].type, .state = HV_AS_LAUNCHING};
    CHECK_EQ(hv_as_decide(&c, ts, &in, 1, &d, 1, 1, out, 1), 1);
    CHECK_EQ(out[0].kind, HV_AS_LAUNCH);
    hv_as_instance_t two[2] = {in, {.id = 2, .type = out[0].type, .state = HV_AS_LAUNCHING}};
    CHECK_EQ(hv_as_decide(&c, ts, two, 2, &d, 1, 2, out, 1), 0);
    /* a timed-out launch with no room is neither terminated nor counted */
    hv_as_instance_t late = {.id = 3, .type = 0, .state = HV_AS_LAUNCHING, .launched_ms = 0};
    CHECK_EQ(hv_as_decide(&c, ts, &late, 1, NULL, 0, 100 * S, out, 0), 0);
    CHECK_EQ(ts[0].failures, 0);
}

static void case_config(void) {
    char err[200];
    hv_as_config_t c = cfg();
    CHECK_EQ(hv_as_config_valid(&c, err, sizeof(err)), 1);
    static const struct {
        const char *name;
        hv_as_type_t t[2];
        size_t nt;
        uint32_t min_nodes, max_nodes, fails;
        double speed;
        const char *want;
    } rows[] = {
        {"no name", {{.slots = 1, .max_nodes = 1}}, 1, 0, 1, 1, 1.0, "node type 1 has no name"},
        {"twice",
         {{.name = "x", .slots = 1, .max_nodes = 1}, {.name = "x", .slots = 1}},
         2,
         0,
         1,
         1,
         1.0,
         "node type 'x' is named twice"},
        {"no slots",
         {{.name = "x", .max_nodes = 1}},
         1,
         0,
         1,
         1,
         1.0,
         "node type 'x': slots must be at least 1"},
        {"type min > max",
         {{.name = "x", .slots = 1, .min_nodes = 3, .max_nodes = 2}},
         1,
         0,
         1,
         1,
         1.0,
         "node type 'x': min_nodes 3 is above max_nodes 2"},
        {"negative price",
         {{.name = "x", .slots = 1, .price_per_hour = -1}},
         1,
         0,
         1,
         1,
         1.0,
         "node type 'x': price_per_hour must be a number >= 0"},
        {"min > max",
         {{.name = "x", .slots = 1}},
         1,
         3,
         2,
         1,
         1.0,
         "min_nodes 3 is above max_nodes 2"},
        {"speed 0",
         {{.name = "x", .slots = 1}},
         1,
         0,
         1,
         1,
         0.0,
         "upscaling_speed must be a number > 0"},
        {"no failures",
         {{.name = "x", .slots = 1}},
         1,
         0,
         1,
         0,
         1.0,
         "max_launch_failures must be at least 1"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        c = cfg();
        c.types = rows[i].t;
        c.ntypes = rows[i].nt;
        c.min_nodes = rows[i].min_nodes;
        c.max_nodes = rows[i].max_nodes;
        c.max_launch_failures = rows[i].fails;
        c.upscaling_speed = rows[i].speed;
        err[0] = '\0';
        CHECK_EQ(hv_as_config_valid(&c, err, sizeof(err)), 0);
        CHECK_STR(err, rows[i].want);
    }
}

/* Rule 9: a running job's dearer fallback waits fallback_delay_s while spot is short. Types:
 * spot (1 slot, 0.1/h, set aside: its launches were refused), ondemand (1 slot, 0.4/h); the
 * delay 60 s; the decision at 100 s. */
static void case_fallback_delay(void) {
    static const struct {
        const char *name;
        uint64_t short_since_s; /* spot short since (0: not short) */
        int spot_aside, running;
        uint32_t delay_s;
        const char *want, *reason; /* the actions; a phrase of the first one's reason */
    } rows[] = {
        {"short for 10 s of 60: the running job waits (unmet, says why)", 90, 1, 1, 60, "U",
         "ondemand waits out fallback_delay_s"},
        {"short for 60 s: on demand is bought", 40, 1, 1, 60, "L1", "skipped spot set aside"},
        {"short for 90 s: on demand is bought", 10, 1, 1, 60, "L1", "a ondemand node"},
        {"a job that does not run (no worker, or waiting to start) falls back at once", 90, 1, 0,
         60, "L1", "a ondemand node"},
        {"delay off (0): on demand at once, as before", 90, 1, 1, 0, "L1", "a ondemand node"},
        {"spot usable (its set-aside ended, probed again): spot is launched", 90, 0, 1, 60, "L0",
         "a spot node"},
        {"spot set aside with no shortage on record (a restarted head: the clock is in memory): "
         "on demand at once",
         0, 1, 1, 60, "L1", "a ondemand node"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_as_config_t c = cfg_spot_od();
        c.max_nodes = 10;
        c.fallback_delay_s = rows[i].delay_s;
        hv_as_type_state_t ts[2] = {{0}};
        ts[0].short_since_ms = rows[i].short_since_s * S;
        ts[0].aside_until_ms = rows[i].spot_aside ? 1000 * S : 0;
        hv_as_demand_t d = {
            .workers = 1, .slots_per_worker = 1, .what = "job 1", .running = rows[i].running};
        hv_as_instance_t inst[] = {{.id = 1, .type = 0, .state = HV_AS_RUNNING, .workers = 1}};
        hv_as_action_t out[8];
        size_t n = hv_as_decide(&c, ts, inst, 1, &d, 1, 100 * S, out, 8);
        char got[64];
        summary(out, n, got, sizeof(got));
        if (strcmp(got, rows[i].want) != 0 || n == 0 ||
            strstr(out[0].reason, rows[i].reason) == NULL) {
            fprintf(stderr, "row '%s': %s\n", rows[i].name, n ? out[0].reason : "(none)");
        }
        CHECK_STR(got, rows[i].want);
        CHECK(n > 0 && strstr(out[0].reason, rows[i].reason) != NULL);
    }
}

/* Rule 9's clock: the first refused launch starts it, a later one keeps it, a join clears it. */
static void case_short_since(void) {
    hv_as_config_t c = cfg();
    hv_as_type_state_t ts[3] = {{0}};
    CHECK_EQ(hv_as_launch_failed(&c, ts, 0, 5 * S, "no capacity", NULL), 0);
    CHECK_EQ(ts[0].short_since_ms, 5 * S);
    (void)hv_as_launch_failed(&c, ts, 0, 9 * S, "no capacity", NULL);
    CHECK_EQ(ts[0].short_since_ms, 5 * S);
    CHECK_EQ(ts[1].short_since_ms, 0);
    hv_as_joined(ts, 0);
    CHECK_EQ(ts[0].short_since_ms, 0);
    CHECK_EQ(ts[0].failures, 0);
    char err[200] = "";
    c.fallback_delay_s = 604801;
    CHECK_EQ(hv_as_config_valid(&c, err, sizeof(err)), 0);
    CHECK_STR(err, "fallback_delay_s 604801: at most 604800 (a week)");
    c.fallback_delay_s = 604800;
    CHECK_EQ(hv_as_config_valid(&c, err, sizeof(err)), 1);
}

HV_CHECK_MAIN(NULL, NULL, {"demand", case_demand}, {"reasons", case_reasons},
              {"min_nodes", case_min_nodes}, {"cluster_min", case_cluster_min}, {"lost", case_lost},
              {"upscaling_speed", case_upscaling_speed}, {"gpu_fit", case_gpu_fit},
              {"actor_demand", case_actor_demand},
              {"launch_timeout_and_set_aside", case_launch_timeout_and_set_aside},
              {"timeout_sets_aside", case_timeout_sets_aside}, {"idle", case_idle},
              {"full_array", case_full_array}, {"config", case_config}, {"handback", case_handback},
              {"handback_held", case_handback_held}, {"spare", case_spare},
              {"fallback_delay", case_fallback_delay}, {"short_since", case_short_since})
