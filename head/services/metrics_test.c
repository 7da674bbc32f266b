/*
 * metrics_test: the pure helpers (a round's reset reason from its code, top-level JSON fields of
 * events, label escaping), then the counters end to end on a real store and driver in a temporary
 * data dir: events appended through the driver, with their words changed (another language, JSON
 * words that disagree), are counted by their fields (resets by reason code, the reset histogram,
 * samples redone, drains and notices, launch failures), calls by method and code, and a second
 * metrics object made on the same store (a restarted head) starts from the stored counts.
 */
#include "metrics.h"
#include "hv_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mem.h"
#include "store.h" /* the test wires a driver on a store, as main.c does */

static void case_reset_reason(void) {
    static const struct {
        hv_ev_reason_t code;
        int rollback;
        hv_reset_reason_t want;
    } rows[] = {
        {HV_EV_FAILURE, 1, HV_RESET_FAILURE},
        {HV_EV_DATA_PLANE, 1, HV_RESET_FAILURE},
        {HV_EV_RESUME, 1, HV_RESET_FAILURE},
        {HV_EV_DRAIN, 1, HV_RESET_FAILURE}, /* a failure joined the drain's round */
        {HV_EV_DRAIN, 0, HV_RESET_DRAIN},
        {HV_EV_GROW, 0, HV_RESET_GROW},
        {HV_EV_SHRINK, 0, HV_RESET_SHRINK},
        {HV_EV_FAILURE, 0, HV_RESET_FAILURE},
        {HV_EV_START, 0, HV_RESET_OTHER},
        {HV_EV_NONE, 0, HV_RESET_OTHER},
        {(hv_ev_reason_t)99, 0, HV_RESET_OTHER},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        CHECK_EQ(hv_metrics_reset_reason(rows[i].code, rows[i].rollback), rows[i].want);
    }
    CHECK_STR(hv_metrics_reset_reason_name(HV_RESET_FAILURE), "failure");
    CHECK_STR(hv_metrics_reset_reason_name(HV_RESET_SHRINK), "shrink");
}

static void case_json(void) {
    const char *js = "{\"generation\":3,\"reason\":\"drain: \\\"a\\\" \\\"wait_ms\\\":9\","
                     "\"members\":[{\"worker\":1,\"wait_ms\":7}],\"rollback\":false,"
                     "\"wait_ms\":1500, \"x\" : true}";
    uint64_t v = 0;
    CHECK(hv_ev_json_u64(js, "generation", &v));
    CHECK_EQ(v, 3);
    CHECK(hv_ev_json_u64(js, "wait_ms", &v)); /* the top-level one, not the nested one */
    CHECK_EQ(v, 1500);
    CHECK(!hv_ev_json_u64(js, "worker", &v));
    CHECK(!hv_ev_json_u64(js, "reason", &v));
    int b = -1;
    CHECK(hv_ev_json_bool(js, "rollback", &b));
    CHECK_EQ(b, 0);
    CHECK(hv_ev_json_bool(js, "x", &b));
    CHECK_EQ(b, 1);
    char s[16];
    CHECK(hv_ev_json_str(js, "reason", s, sizeof(s)));
    CHECK_STR(s, "drain: \"a\" \"wai"); /* truncated to 15 bytes */
    CHECK(!hv_ev_json_str(js, "generation", s, sizeof(s)));
    CHECK(!hv_ev_json_u64(NULL, "a", &v));
    CHECK(!hv_ev_json_u64("{\"a\":\"unterminated", "a", &v));
    CHECK(!hv_ev_json_u64("{\"a\":99999999999999999999999}", "a", &v));
    char e[32];
    hv_metrics_escape_label("a\"b\\c\nd", e, sizeof(e));
    CHECK_STR(e, "a\\\"b\\\\c\\nd");
    hv_metrics_escape_label("abcdef", e, 4);
    CHECK_STR(e, "abc");
}

/* ---- counters on a real store ---------------------------------------------------------------- */

static char dir[] = "/tmp/hv-metrics-test-XXXXXX";

/* The value of the series line that starts with `series ` in text; -1 when absent. */
static double series(const char *text, const char *name) {
    char pat[300];
    snprintf(pat, sizeof(pat), "\n%s ", name);
    const char *p = strstr(text, pat);
    return p != NULL ? atof(p + strlen(pat)) : -1;
}

static char *render(hv_metrics_t *m) {
    hv_http_reply_t r = {0};
    hv_metrics_render(m, 1000, &r);
    CHECK(!r.oom);
    return r.body;
}

static void case_counters(void) {
    CHECK(mkdtemp(dir) != NULL);
    hv_head_config_t cfg;
    char err[512];
    CHECK_RC_MSG(hv_head_config_parse("t.yaml", "", 0, &cfg, err, sizeof(err)), HV_OK, err);
    hv_free(cfg.data_dir);
    cfg.data_dir = hv_strdup(dir);
    hv_store_t *store = NULL;
    CHECK_RC_MSG(hv_store_open(dir, &store, err, sizeof(err)), HV_OK, err);
    hv_driver_io_t io = {0};
    hv_driver_t *d = NULL;
    CHECK_RC(hv_driver_create(&cfg, store, &io, &d), HV_OK);
    CHECK_RC(hv_driver_load(d), HV_OK);
    hv_metrics_t *m = NULL;
    CHECK_RC(hv_metrics_create(&cfg, d, &m), HV_OK);
    hv_driver_set_observer(d, hv_metrics_on_event, m);

    /* The events as jobm and the driver write them, but with their words changed (another
     * language, a reworded message): the counters go by the kinds and the structured fields. The
     * JSON's words and numbers disagree with the fields on purpose. */
    hv_ev_fields_t g1 = {.generation = 1, .reason = HV_EV_START};
    hv_ev_fields_t c1 = {.generation = 1, .reason = HV_EV_START, .duration_ms = 40};
    hv_ev_fields_t g2 = {.generation = 2, .reason = HV_EV_FAILURE, .rollback = 1};
    hv_ev_fields_t c2 = {.generation = 2, .reason = HV_EV_FAILURE, .duration_ms = 1500};
    hv_ev_fields_t g3 = {.generation = 3, .reason = HV_EV_GROW};
    hv_ev_fields_t g4 = {.generation = 4, .reason = HV_EV_DRAIN};
    hv_driver_event_f(d, 1, 0, "round.open", &g1, "{\"reason\":\"Anfang\",\"resets\":5}", "g1");
    hv_driver_event_f(d, 1, 0, "round.close", &c1, "{\"size\":2,\"redone_samples\":0}", "c1");
    hv_driver_event_f(d, 1, 0, "round.open", &g2,
                      "{\"reason\":\"drain: Fehler, Rang 0\",\"rollback\":false,\"resets\":0}",
                      "Generation 2 geöffnet");
    hv_driver_event_f(d, 1, 0, "round.close", &c2, "{\"wait_ms\":1,\"redone_samples\":64}", "c2");
    hv_driver_event_f(d, 1, 0, "round.open", &g3, "{\"reason\":\"shrink: mehr Platz\"}", "g3");
    hv_driver_event_f(d, 1, 0, "round.open", &g4, "{\"reason\":\"grow: Knoten b\"}", "g4");
    hv_driver_event(d, 0, 2, "node.drain", "{\"from_agent\":true,\"notice_ms\":30000}", "d");
    hv_driver_event(d, 0, 2, "node.drain", "{\"from_agent\":false,\"notice_ms\":0}", "d");
    hv_driver_event(d, 0, 0, "autoscaler.launch_failed", NULL, "lf");
    hv_driver_event(d, 0, 2, "node.dead", NULL, "gone"); /* node 2's drain ends */
    hv_driver_event(d, 0, 3, "node.undrain", NULL, "u"); /* node 3 was not draining */
    /* The fleet's decisions as the driver acts on them (job 9 is not in the driver: no wait). */
    hv_driver_event(d, 9, 0, "fleet.admit", "{\"reason\":\"admitted\",\"from\":0,\"to\":2}", "a");
    hv_driver_event(d, 1, 0, "fleet.grow", "{\"reason\":\"grown\",\"from\":2,\"to\":4}", "g");
    hv_driver_event(d, 1, 0, "fleet.shrink", "{\"reason\":\"shrunk_admit\",\"cause\":9}", "s");
    hv_driver_event(d, 1, 0, "fleet.shrink", "{\"reason\":\"shrunk_priority\",\"cause\":9}", "s");
    hv_driver_event(d, 1, 0, "fleet.shrink", "{\"reason\":\"shrunk_admit\",\"cause\":8}", "s");
    hv_metrics_on_rpc("/hvpb.v1.Jobs/Submit", 0, m);
    hv_metrics_on_rpc("/hvpb.v1.Jobs/Submit", 0, m);
    hv_metrics_on_rpc("/hvpb.v1.Jobs/Submit", 16, m);
    hv_metrics_on_rpc(NULL, 12, m);

    char *t = render(m);
    CHECK(t != NULL);
    if (t == NULL) {
        return;
    }
    CHECK_EQ(series(t, "hv_resets_total{reason=\"failure\"}"), 1);
    CHECK_EQ(series(t, "hv_resets_total{reason=\"grow\"}"), 1);
    CHECK_EQ(series(t, "hv_resets_total{reason=\"drain\"}"), 1);
    CHECK_EQ(series(t, "hv_resets_total{reason=\"shrink\"}"), 0);
    CHECK_EQ(series(t, "hv_resets_total{reason=\"other\"}"), 0);
    CHECK_EQ(series(t, "hv_reset_duration_seconds_count{phase=\"round\"}"), 1);
    CHECK_EQ(series(t, "hv_reset_duration_seconds_bucket{phase=\"round\",le=\"1\"}"), 0);
    CHECK_EQ(series(t, "hv_reset_duration_seconds_bucket{phase=\"round\",le=\"2.5\"}"), 1);
    CHECK_EQ(series(t, "hv_reset_duration_seconds_bucket{phase=\"round\",le=\"+Inf\"}"), 1);
    CHECK_EQ(series(t, "hv_samples_redone_total"), 64);
    CHECK_EQ(series(t, "hv_node_drains_total"), 2);
    CHECK_EQ(series(t, "hv_preemption_notices_total"), 1);
    CHECK_EQ(series(t, "hv_autoscaler_launch_failures_total"), 1);
    CHECK_EQ(series(t, "hv_node_drain_duration_seconds_count"), 1);
    CHECK_EQ(series(t, "hv_node_drain_duration_seconds_bucket{le=\"1\"}"), 1);
    CHECK_EQ(series(t, "hv_rpcs_total{method=\"hvpb.v1.Jobs/Submit\",code=\"OK\"}"), 2);
    CHECK_EQ(series(t, "hv_rpcs_total{method=\"hvpb.v1.Jobs/Submit\",code=\"UNAUTHENTICATED\"}"),
             1);
    CHECK_EQ(series(t, "hv_rpcs_total{method=\"unknown\",code=\"UNIMPLEMENTED\"}"), 1);
    CHECK_EQ(series(t, "hv_auth_refusals_total{endpoint=\"grpc\",code=\"UNAUTHENTICATED\"}"), 1);
    CHECK_EQ(series(t, "hv_jobs{state=\"running\"}"), 0);
    CHECK_EQ(series(t, "hv_nodes{state=\"alive\",type=\"manual\"}"), 0);
    CHECK(strstr(t, "# TYPE hv_reset_duration_seconds histogram\n") != NULL);
    CHECK_EQ(series(t, "hv_fleet_resizes_total{cause=\"start\"}"), 1);
    CHECK_EQ(series(t, "hv_fleet_resizes_total{cause=\"grow\"}"), 1);
    CHECK_EQ(series(t, "hv_fleet_resizes_total{cause=\"admit\"}"), 2);
    CHECK_EQ(series(t, "hv_fleet_resizes_total{cause=\"priority\"}"), 1);
    CHECK_EQ(series(t, "hv_fleet_resizes_total{cause=\"share\"}"), 0);
    CHECK_EQ(series(t, "hv_queue_wait_seconds_count{namespace=\"default\"}"), 0);
    CHECK(strstr(t, "# TYPE hv_queue_wait_seconds histogram\n") != NULL);
    CHECK(strstr(t, "# TYPE hv_namespace_share gauge\n") != NULL);
    hv_free(t);

    /* A restarted head: the counters that stored events give back start from them. */
    hv_driver_set_observer(d, NULL, NULL);
    hv_metrics_destroy(m);
    CHECK_RC(hv_metrics_create(&cfg, d, &m), HV_OK);
    t = render(m);
    if (t != NULL) {
        CHECK_EQ(series(t, "hv_resets_total{reason=\"failure\"}"), 1);
        CHECK_EQ(series(t, "hv_resets_total{reason=\"grow\"}"), 1);
        CHECK_EQ(series(t, "hv_resets_total{reason=\"drain\"}"), 1);
        CHECK_EQ(series(t, "hv_resets_total{reason=\"other\"}"), 0);
        CHECK_EQ(series(t, "hv_samples_redone_total"), 64);
        CHECK_EQ(series(t, "hv_node_drains_total"), 2);
        CHECK_EQ(series(t, "hv_preemption_notices_total"), 1);
        CHECK_EQ(series(t, "hv_autoscaler_launch_failures_total"), 1);
        CHECK_EQ(series(t, "hv_reset_duration_seconds_count{phase=\"round\"}"), 0);
        CHECK_EQ(series(t, "hv_fleet_resizes_total{cause=\"start\"}"), 1);
        CHECK_EQ(series(t, "hv_fleet_resizes_total{cause=\"grow\"}"), 1);
        CHECK_EQ(series(t, "hv_fleet_resizes_total{cause=\"admit\"}"), 2);
        CHECK_EQ(series(t, "hv_fleet_resizes_total{cause=\"priority\"}"), 1);
        CHECK_EQ(series(t, "hv_fleet_resizes_total{cause=\"other\"}"), 0);
    }
    hv_free(t);
    hv_metrics_destroy(m);
    hv_driver_destroy(d);
    hv_store_close(store);
    hv_head_config_fini(&cfg);
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    CHECK_EQ(system(cmd), 0);
}

/* A fleet event's kind and reason word -> hv_fleet_resizes_total's cause. */
static void case_resize_cause(void) {
    static const struct {
        const char *kind, *reason, *want;
    } t[] = {{"fleet.admit", "admitted", "start"},
             {"fleet.grow", "grown", "grow"},
             {"fleet.shrink", "shrunk_admit", "admit"},
             {"fleet.shrink", "shrunk_priority", "priority"},
             {"fleet.shrink", "shrunk_reclaim", "reclaim"},
             {"fleet.shrink", "shrunk_share", "share"},
             {"fleet.shrink", "preempted", "preempt"},
             {"fleet.shrink", "kept", "other"},
             {"fleet.shrink", NULL, "other"},
             {NULL, "shrunk_admit", "other"}};
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        CHECK_STR(hv_metrics_resize_cause_name(hv_metrics_resize_cause(t[i].kind, t[i].reason)),
                  t[i].want);
    }
    CHECK_STR(hv_metrics_resize_cause_name(HV_RESIZE__COUNT), "other");
}

HV_CHECK_MAIN(NULL, NULL, {"reset_reason", case_reset_reason}, {"json", case_json},
              {"counters", case_counters}, {"resize_cause", case_resize_cause})
