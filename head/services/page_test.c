/*
 * page_test: the status page's HTML (head/services/page.c) from table-driven snapshots: escaping of every
 * head-provided string (a job named like markup, reasons and node names with quotes and control
 * bytes), the summary's pending demand and why each pending job waits, the job page's
 * generations with their reasons, rollbacks and durations, an open round, the workers, durations
 * in words, the route matching of the HTTP server that serves /job/<id>, and a job's rounds read
 * from its events' fields (hv_page_rounds) with their messages and JSON words garbled.
 */
#include "page.h"
#include "page_login.h"
#include "page_serve.h"
#include "hv_check.h"

#include <stdio.h>
#include <string.h>

#include "mem.h"

/* 1 when the rendered body holds s. */
static int has(const hv_http_reply_t *r, const char *s) {
    return r->body != NULL && strstr(r->body, s) != NULL;
}

static void reply_free(hv_http_reply_t *r) {
    hv_free(r->body);
    memset(r, 0, sizeof(*r));
}

static void case_escape(void) {
    static const struct {
        const char *in, *want;
    } rows[] = {
        {"plain", "plain"},
        {"", ""},
        {"<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"},
        {"a&b", "a&amp;b"},
        {"\"quoted\" 'single'", "&quot;quoted&quot; &#39;single&#39;"},
        {"bell\a esc\x1b tab\tnl\n", "bell? esc? tab\tnl\n"},
        {"&amp;", "&amp;amp;"},
        {"utf-8 \xc3\xa9", "utf-8 \xc3\xa9"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_http_reply_t r = {0};
        hv_page_escape(&r, rows[i].in);
        hv_http_reply_add(&r, "", 0);
        CHECK_STR(r.body != NULL ? r.body : "", rows[i].want);
        reply_free(&r);
    }
    hv_http_reply_t r = {0};
    hv_page_escape(&r, NULL);
    CHECK_EQ(r.len, 0);
    reply_free(&r);
}

static void case_duration(void) {
    static const struct {
        uint64_t ms;
        const char *want;
    } rows[] = {{0, "0 ms"},       {850, "850 ms"},    {1000, "1.0 s"},
                {12345, "12.3 s"}, {245000, "4m 05s"}, {7380000, "2h 03m"}};
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        char b[32];
        CHECK_STR(hv_page_fmt_duration(rows[i].ms, b, sizeof(b)), rows[i].want);
    }
}

static const uint64_t T0 = 1764000000000ull; /* a wall clock, ms */

static void case_cluster(void) {
    hv_page_node_t nodes[] = {
        {1, "node-a", "alive", "manual", 4, 3, 0, T0 - 1000},
        {2, "node-<b>", "draining", "spot", 2, 1, 1, T0 - 2000},
        {3, "node-c", "dead", "manual", 2, 0, 0, T0 - 90000},
    };
    hv_page_job_t jobs[] = {
        /* newest first */
        {.id = 3,
         .name = "<img src=x onerror=alert(1)>",
         .state = "pending",
         .np = 8,
         .submitted_ms = T0 - 65000,
         .demand = 8,
         .pending = 1},
        {.id = 2,
         .name = "grower",
         .state = "running",
         .elastic = 1,
         .np = 2,
         .min_np = 1,
         .max_np = 4,
         .size = 2,
         .generation = 3,
         .resets = 2,
         .demand = 2},
        {.id = 1, .name = "done \"q\"", .state = "failed", .reason = "rank 0 exited <1>", .np = 1},
    };
    hv_page_instance_t insts[] = {{"17", "spot", "running", "node-<b>", T0 - 3600000, 0, 0}};
    hv_page_cost_t cost[] = {{"spot", 1, 3600.0, 0.25}};
    hv_page_cluster_t c = {.cluster_name = "lab & co",
                           .now_ms = T0,
                           .nodes = nodes,
                           .nnodes = 3,
                           .jobs = jobs,
                           .njobs = 3,
                           .instances = insts,
                           .ninstances = 1,
                           .autoscaler = 1,
                           .cost = cost,
                           .ncost = 1,
                           .cost_total = 0.25,
                           .preemptions = 1};
    hv_http_reply_t r = {0};
    hv_page_render_cluster(&c, &r);
    hv_http_reply_add(&r, "", 0);
    CHECK(!r.oom);
    static const char *const want[] = {
        "<!DOCTYPE html>",
        "<title>Cluster - lab &amp; co - hv</title>",
        "1 alive, 1 draining, 1 dead",
        "4 used, 1 free (of 4 on alive nodes)",
        "1 pending, 0 placing, 1 running, 0 succeeded, 1 failed, 0 cancelled",
        "1 job waiting for 8 slots (1 free now); 1 elastic job could grow by 2 workers",
        "&lt;img src=x onerror=alert(1)&gt;) waits for 8 free slots: 1 of 4 free now (1 node "
        "alive, 1 draining, 1 dead); submitted 1m 05s ago",
        "<td>node-&lt;b&gt;</td><td class=\"s-draining\">draining</td><td>spot</td>",
        "<td class=\"n\">2 (elastic 1..4)</td><td class=\"n\">3</td><td class=\"n\">2</td>",
        "done &quot;q&quot;",
        "rank 0 exited &lt;1&gt;",
        "<a href=\"/job/3\">",
        "<td>17</td><td>spot</td><td class=\"s-running\">running</td><td>node-&lt;b&gt;</td>",
        "<td class=\"n\">1</td><td class=\"n\">1.000</td><td class=\"n\">0.2500</td>",
        "1 preemption.",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        if (!has(&r, want[i])) {
            fprintf(stderr, "missing: %s\n", want[i]);
        }
        CHECK(has(&r, want[i]));
    }
    /* No head-provided markup survives, and no external asset is referenced. */
    CHECK(!has(&r, "<img"));
    CHECK(!has(&r, "<b>"));
    CHECK(!has(&r, "src=\"http"));
    CHECK(!has(&r, "href=\"http"));
    reply_free(&r);

    /* An empty cluster says so. */
    hv_page_cluster_t e = {.now_ms = T0};
    hv_page_render_cluster(&e, &r);
    hv_http_reply_add(&r, "", 0);
    CHECK(has(&r, "none pending"));
    CHECK(has(&r, "No node has joined."));
    CHECK(has(&r, "No job yet."));
    CHECK(has(&r, "No autoscaler is configured."));
    CHECK(!has(&r, "action=\"/logout\"")); /* no login, no log-out button */
    CHECK(!has(&r, "id=\"pending\""));
    reply_free(&r);
}

/* The actors' section: one row per actor with its state, node, restarts, moves, calls and p99;
 * names escaped; an actor without calls shows no p99; a head with no actor says so, and a page
 * without actors (with_actors 0) has no section. */
static void case_actors(void) {
    hv_page_actor_t actors[] = {
        {.id = 2,
         .ns = "default",
         .name = "eval<1>",
         .class_name = "counter",
         .state = "alive",
         .node = "node-a",
         .restarts = 1,
         .max_restarts = 3,
         .moves = 2,
         .calls_ok = 40,
         .calls_error = 2,
         .p99_ms = 0.0123},
        {.id = 1,
         .ns = "team",
         .name = "",
         .class_name = "seq",
         .state = "dead",
         .cause = "killed",
         .node = "",
         .p99_ms = -1},
    };
    hv_page_cluster_t c = {.now_ms = T0, .actors = actors, .nactors = 2, .with_actors = 1};
    hv_http_reply_t r = {0};
    hv_page_render_cluster(&c, &r);
    hv_http_reply_add(&r, "", 0);
    CHECK(!r.oom);
    static const char *const want[] = {
        "<h2>Actors</h2>",
        "<table id=\"actors\">",
        "<td class=\"n\">2</td><td>default/eval&lt;1&gt;</td><td>counter</td><td "
        "class=\"s-alive\">alive</td><td>node-a</td><td class=\"n\">1 / 3</td><td "
        "class=\"n\">2</td><td class=\"n\">42</td><td class=\"n\">2</td><td "
        "class=\"n\">0.0123 ms</td>",
        "<td>team/-</td><td>seq</td><td class=\"s-dead\">dead</td><td>-</td>",
        "<td class=\"n\">0</td><td class=\"n\">0</td><td class=\"n\">-</td></tr>",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        if (!has(&r, want[i])) {
            fprintf(stderr, "missing: %s\n", want[i]);
        }
        CHECK(has(&r, want[i]));
    }
    CHECK(!has(&r, "<1>"));
    reply_free(&r);
    hv_page_cluster_t e = {.now_ms = T0, .with_actors = 1};
    hv_page_render_cluster(&e, &r);
    hv_http_reply_add(&r, "", 0);
    CHECK(has(&r, "No actor yet."));
    reply_free(&r);
    hv_page_cluster_t none = {.now_ms = T0};
    hv_page_render_cluster(&none, &r);
    hv_http_reply_add(&r, "", 0);
    CHECK(!has(&r, "<h2>Actors</h2>"));
    reply_free(&r);
}

static void case_job(void) {
    hv_page_round_t rounds[] = {
        {1, "start", "start", 0, T0 - 60000, T0 - 59150, 4},
        {2, "failure: rank 0 on node-a was killed by signal SIGKILL", "failure", 1, T0 - 30000,
         T0 - 17700, 2},
        {3, "grow: <free> slots", "grow", 0, T0 - 5000, 0, 0},
    };
    hv_page_worker_t ws[] = {
        {11, "node-a", "failed", "killed by signal SIGKILL", 0, 1, 0, 9},
        {12, "node-b", "running", NULL, 0, 2, 0, 0},
        {13, "node-b", "exited", "", 1, 2, 3, 0},
    };
    hv_page_jobview_t v = {.cluster_name = "hv",
                           .now_ms = T0,
                           .job = {.id = 7,
                                   .name = "train </td>",
                                   .state = "running",
                                   .elastic = 1,
                                   .min_np = 2,
                                   .max_np = 4,
                                   .size = 2,
                                   .generation = 3,
                                   .resets = 2,
                                   .submitted_ms = T0 - 61000},
                           .rounds = rounds,
                           .nrounds = 3,
                           .workers = ws,
                           .nworkers = 3};
    hv_http_reply_t r = {0};
    hv_page_render_job(&v, &r);
    hv_http_reply_add(&r, "", 0);
    static const char *const want[] = {
        "<title>Job 7 - hv - hv</title>",
        "<h1>Job 7: train &lt;/td&gt;</h1>",
        "<td class=\"s-running\">running</td>",
        "<td id=\"generation\">3</td>",
        "<tr class=\"round\" data-generation=\"1\" data-reason=\"start\"><td class=\"n\">1</td>",
        "<td class=\"reason\">start</td><td class=\"n\">4</td><td>850 ms</td>",
        "<tr class=\"round\" data-generation=\"2\" data-reason=\"failure\">",
        "failure: rank 0 on node-a was killed by signal SIGKILL <span class=\"muted\">(rolled "
        "back)</span></td><td class=\"n\">2</td><td>12.3 s</td>",
        "grow: &lt;free&gt; slots</td><td></td><td class=\"s-open\">open for 5.0 s</td>",
        "<td class=\"n\">11</td><td>node-a</td><td class=\"s-failed\">failed</td><td "
        "class=\"n\">0</td><td class=\"n\">1</td><td>signal 9</td><td>killed by signal "
        "SIGKILL</td>",
        "<td class=\"n\">12</td><td>node-b</td><td class=\"s-running\">running</td><td "
        "class=\"n\">0</td><td class=\"n\">2</td><td></td><td></td>",
        "<td>3</td>",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        if (!has(&r, want[i])) {
            fprintf(stderr, "missing: %s\n", want[i]);
        }
        CHECK(has(&r, want[i]));
    }
    CHECK(!has(&r, "<free>"));
    reply_free(&r);

    /* A job with no round and no worker in memory. */
    hv_page_jobview_t e = {
        .now_ms = T0,
        .job = {.id = 9, .name = "q", .state = "pending", .np = 2, .demand = 2, .pending = 1}};
    hv_page_render_job(&e, &r);
    hv_http_reply_add(&r, "", 0);
    CHECK(has(&r, "No round has opened."));
    CHECK(has(&r, "<tr><th>waits for</th><td>2 free slots</td></tr>"));
    CHECK(has(&r, "No worker is in the head"));
    reply_free(&r);

    hv_page_render_missing(NULL, "No job <5>.", &r);
    hv_http_reply_add(&r, "", 0);
    CHECK(has(&r, "No job &lt;5&gt;."));
    reply_free(&r);
}

static void case_routes(void) {
    static const struct {
        const char *route, *path;
        int want;
    } rows[] = {
        {"/", "/", 1},
        {"/", "/x", 0},
        {"/metrics", "/metrics", 1},
        {"/metrics", "/metrics/", 0},
        {"/job/", "/job/7", 1},
        {"/job/", "/job/", 0},
        {"/job/", "/job", 0},
        {"/job/", "/jobs/7", 0},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        CHECK_EQ(hv_http_route_match(rows[i].route, rows[i].path), rows[i].want);
    }
}

/* The login's sessions: found by their id until they expire, dropped by logout or with their
 * token, a full table evicting the one that ends first; malformed ids never match. */
static void case_sessions(void) {
    static hv_page_sessions_t t;
    memset(&t, 0, sizeof(t));
    char id[HV_PAGE_MAX_SESSIONS + 2][HV_PAGE_SESSION_ID_LEN + 1];
    for (size_t i = 0; i < sizeof(id) / sizeof(id[0]); i++) {
        for (size_t k = 0; k < HV_PAGE_SESSION_ID_LEN; k++) {
            id[i][k] = "0123456789abcdef"[(i * 7 + k) % 16];
        }
        id[i][HV_PAGE_SESSION_ID_LEN] = '\0';
        id[i][0] = "0123456789abcdef"[i % 16];
        id[i][1] = "0123456789abcdef"[i / 16];
    }
    CHECK(hv_page_session_id_valid(id[0]));
    CHECK(!hv_page_session_id_valid("abc"));
    CHECK(!hv_page_session_id_valid(""));
    char upper[HV_PAGE_SESSION_ID_LEN + 1];
    memcpy(upper, id[0], sizeof(upper));
    upper[5] = 'A';
    CHECK(!hv_page_session_id_valid(upper));
    uint64_t now = 1000000;
    hv_page_session_add(&t, id[0], "sha-a", "default", now);
    hv_page_session_add(&t, id[1], "sha-b", "ci", now + 1);
    const hv_page_session_t *s = hv_page_session_find(&t, id[0], now + 10);
    CHECK(s != NULL);
    CHECK_STR(s->client, "default");
    CHECK(hv_page_session_find(&t, upper, now) == NULL);
    CHECK(hv_page_session_find(&t, id[2], now) == NULL);
    CHECK(hv_page_session_find(&t, "", now) == NULL);
    /* Expiry: found until the TTL, not at it. */
    CHECK(hv_page_session_find(&t, id[0], now + HV_PAGE_SESSION_TTL_MS - 1) != NULL);
    CHECK(hv_page_session_find(&t, id[0], now + HV_PAGE_SESSION_TTL_MS) == NULL);
    /* Logout drops one; a token's removal drops its sessions only. */
    CHECK_EQ(hv_page_session_drop(&t, id[0]), 1);
    CHECK_EQ(hv_page_session_drop(&t, id[0]), 0);
    CHECK(hv_page_session_find(&t, id[0], now) == NULL);
    hv_page_session_add(&t, id[2], "sha-b", "ci", now + 2);
    hv_page_session_add(&t, id[3], "sha-c", "other", now + 3);
    CHECK_EQ(hv_page_session_drop_token(&t, "sha-b"), 2);
    CHECK(hv_page_session_find(&t, id[1], now + 5) == NULL);
    CHECK(hv_page_session_find(&t, id[3], now + 5) != NULL);
    /* A full table: the session that ends first goes (id[3], the oldest now). */
    for (size_t i = 4; i < 4 + HV_PAGE_MAX_SESSIONS - 1; i++) {
        hv_page_session_add(&t, id[i % (HV_PAGE_MAX_SESSIONS + 2)], "sha-d", "d", now + 10 + i);
    }
    CHECK(hv_page_session_find(&t, id[3], now + 100) != NULL);
    hv_page_session_add(&t, id[1], "sha-e", "e", now + 1000);
    CHECK(hv_page_session_find(&t, id[3], now + 1000) == NULL);
    CHECK(hv_page_session_find(&t, id[1], now + 1000) != NULL);
}

/* The login form: a password field posting to /login, the message escaped, no reload. */
/* Wrong tokens per address: five free, then a wait from 1 s doubling to 5 min; another address
 * is not held back; a good login or 15 quiet minutes forget them; a full table forgets the
 * address that waits least. Each row is a step on one table, in order. */
static void case_login_limit(void) {
    static hv_page_logins_t t; /* 256 x 72 bytes: not on the stack */
    enum { FAIL, OK, WAIT };
    static const struct {
        const char *addr;
        int op;
        uint64_t now, want; /* FAIL: the wait it gets; WAIT: the wait it has */
    } steps[] = {
        {"10.0.0.1", FAIL, 1000, 0},    {"10.0.0.1", FAIL, 1001, 0},
        {"10.0.0.1", FAIL, 1002, 0},    {"10.0.0.1", FAIL, 1003, 0},
        {"10.0.0.1", FAIL, 1004, 0},    {"10.0.0.1", WAIT, 1005, 0},
        {"10.0.0.1", FAIL, 1005, 1000},                              /* the sixth: 1 s */
        {"10.0.0.1", WAIT, 1500, 505},  {"10.0.0.2", WAIT, 1500, 0}, /* others go on */
        {"10.0.0.1", WAIT, 2005, 0},    {"10.0.0.1", FAIL, 2005, 2000},
        {"10.0.0.1", FAIL, 4005, 4000}, {"10.0.0.1", FAIL, 8005, 8000},
        {"10.0.0.1", OK, 9000, 0},      {"10.0.0.1", WAIT, 9000, 0}, /* forgotten */
        {"10.0.0.1", FAIL, 9001, 0},                                 /* counts from 1 again */
        {"10.0.0.3", FAIL, 0, 0},       {"10.0.0.3", FAIL, 1, 0},
        {"10.0.0.3", FAIL, 2, 0},       {"10.0.0.3", FAIL, 3, 0},
        {"10.0.0.3", FAIL, 4, 0},       {"10.0.0.3", FAIL, 900005, 0}, /* 15 quiet minutes */
    };
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        uint64_t got = 0;
        if (steps[i].op == FAIL) {
            got = hv_page_login_failed(&t, steps[i].addr, steps[i].now);
        } else if (steps[i].op == OK) {
            hv_page_login_ok(&t, steps[i].addr);
        } else {
            got = hv_page_login_wait(&t, steps[i].addr, steps[i].now);
        }
        if (got != steps[i].want) {
            fprintf(stderr, "step %zu (%s): got %llu, want %llu\n", i, steps[i].addr,
                    (unsigned long long)got, (unsigned long long)steps[i].want);
        }
        CHECK_EQ(got, steps[i].want);
    }
    /* The wait is capped at 5 minutes. */
    uint64_t w = 0;
    for (int i = 0; i < 40; i++) {
        w = hv_page_login_failed(&t, "10.0.0.4", 1000000);
    }
    CHECK_EQ(w, HV_PAGE_LOGIN_WAIT_MAX_MS);
    /* A full table: a flood of new addresses does not forget one that waits. */
    char a[48];
    for (int i = 0; i < 2 * HV_PAGE_LOGIN_ADDRS; i++) {
        snprintf(a, sizeof(a), "10.1.%d.%d", i / 256, i % 256);
        hv_page_login_failed(&t, a, 1000001);
    }
    CHECK_EQ(hv_page_login_wait(&t, "10.0.0.4", 1000001), HV_PAGE_LOGIN_WAIT_MAX_MS - 1);
}

static void case_login_form(void) {
    hv_http_reply_t r = {.status = 200};
    hv_page_render_login("c<1>", "bad <token>", &r);
    CHECK(strstr(r.body, "action=\"/login\"") != NULL);
    CHECK(strstr(r.body, "type=\"password\" name=\"token\"") != NULL);
    CHECK(strstr(r.body, "bad &lt;token&gt;") != NULL);
    CHECK(strstr(r.body, "c&lt;1&gt;") != NULL);
    CHECK(strstr(r.body, "location.reload") == NULL);
    hv_free(r.body);
    /* Behind the login, every page has the log-out button. */
    hv_page_cluster_t c = {.now_ms = 1, .logout = 1};
    hv_http_reply_t p = {.status = 200};
    hv_page_render_cluster(&c, &p);
    CHECK(strstr(p.body, "<form method=\"post\" action=\"/logout\"") != NULL);
    hv_free(p.body);
}

/* The rounds of a job come from its events' fields, never from their words: messages and reasons
 * in another language (or garbled), and JSON without the round's numbers, still give the right
 * generations, reasons, rollbacks and durations. */
static void case_rounds_from_fields(void) {
    hv_event_row_t ev[] = {
        {.seq = 1,
         .time_ms = 1000,
         .kind = "round.open",
         .message = "Runde 1 offen",
         .data = "{\"reason\":\"Anfang\"}",
         .f = {.generation = 1, .reason = HV_EV_START}},
        {.seq = 2,
         .time_ms = 1900,
         .kind = "round.close",
         .message = "zu",
         .data = "{\"size\":4}",
         .f = {.generation = 1, .reason = HV_EV_START, .duration_ms = 900}},
        {.seq = 3, .time_ms = 5000, .kind = "job.note", .message = "round.open generation 9"},
        {.seq = 4,
         .time_ms = 6000,
         .kind = "round.open",
         .message = "Fehler!",
         .data = "{\"reason\":\"Fehler: Rang 0\",\"rollback\":false}",
         .f = {.generation = 2, .reason = HV_EV_FAILURE, .rollback = 1}},
        {.seq = 5,
         .time_ms = 9000,
         .kind = "round.close",
         .message = "x",
         .data = "",
         .f = {.generation = 2, .reason = HV_EV_FAILURE, .duration_ms = 2500, .rollback = 1}},
        {.seq = 6,
         .time_ms = 9500,
         .kind = "round.open",
         .message = "generation 7 opened",
         .data = NULL,
         .f = {.generation = 3, .reason = HV_EV_DRAIN}},
    };
    hv_page_round_t r[8];
    char reasons[8][HV_JM_REASON_MAX];
    size_t n = hv_page_rounds(ev, sizeof(ev) / sizeof(ev[0]), r, reasons, 8);
    CHECK_EQ(n, 3);
    if (n != 3) {
        return;
    }
    CHECK_EQ(r[0].generation, 1);
    CHECK_STR(r[0].code, "start");
    CHECK_EQ(r[0].size, 4);
    CHECK_EQ(r[0].opened_ms, 1000);
    CHECK_EQ(r[0].closed_ms, 1900);
    CHECK_STR(r[0].reason, "Anfang"); /* shown as the head wrote it */
    CHECK_EQ(r[1].generation, 2);
    CHECK_STR(r[1].code, "failure");
    CHECK_EQ(r[1].rollback, 1);     /* the field, not the JSON's false */
    CHECK_EQ(r[1].opened_ms, 6500); /* the close's duration: the head's own measure */
    CHECK_EQ(r[1].closed_ms, 9000);
    CHECK_EQ(r[2].generation, 3);
    CHECK_STR(r[2].code, "drain");
    CHECK_EQ(r[2].closed_ms, 0);
}

/* The fleet's pictures: a job's size over time from its rounds, its throughput from samples,
 * and the cluster page's stacked chart in the HTML with the jobs' colours. */
static void case_fleet_charts(void) {
    hv_page_round_t r[] = {{.generation = 1, .closed_ms = 1000, .size = 2},
                           {.generation = 2, .closed_ms = 0, .size = 0}, /* still open */
                           {.generation = 3, .closed_ms = 3000, .size = 4},
                           {.generation = 4, .closed_ms = 9000, .size = 1}}; /* after the end */
    hv_svg_point_t p[8];
    size_t n = hv_page_size_points(r, 4, 500, 5000, 9, p, 8);
    CHECK_EQ(n, 3);
    CHECK(p[0].t_ms == 1000 && p[0].v == 2);
    CHECK(p[1].t_ms == 3000 && p[1].v == 4);
    CHECK(p[2].t_ms == 5000 && p[2].v == 0);
    n = hv_page_size_points(NULL, 0, 500, 0, 3, p, 8); /* fixed size, running */
    CHECK_EQ(n, 1);
    CHECK(p[0].t_ms == 500 && p[0].v == 3);
    CHECK_EQ(hv_page_size_points(NULL, 0, 0, 0, 3, p, 8), 0); /* never started */
    CHECK_EQ(hv_page_size_points(r, 4, 500, 5000, 9, p, 2), 2);

    /* 4 workers commit 2 steps a second each (8 commits/s in all): 2 steps/s. */
    hv_page_tsample_t s[] = {{0, 0, 4},       {5000, 40, 4},   {10000, 80, 4},
                             {15000, 120, 4}, {20000, 120, 4}, {30000, 120, 2}};
    hv_svg_point_t t[8];
    n = hv_page_tput_points(s, 6, 10000, t, 8);
    CHECK_EQ(n, 4);
    CHECK(t[0].t_ms == 10000 && t[0].v == 2.0);
    CHECK(t[1].t_ms == 15000 && t[1].v == 2.0);
    CHECK(t[2].t_ms == 20000 && t[2].v == 1.0);              /* 40 commits in the last 10 s */
    CHECK(t[3].t_ms == 30000 && t[3].v == 0.0);              /* stalled */
    CHECK_EQ(hv_page_tput_points(s, 2, 10000, t, 8), 0);     /* less than one window */
    hv_page_tsample_t back[] = {{0, 50, 2}, {10000, 10, 2}}; /* a restarted count: no point */
    CHECK_EQ(hv_page_tput_points(back, 2, 10000, t, 8), 0);

    hv_svg_point_t a[] = {{T0 - 60000, 2}, {T0 - 30000, 4}};
    hv_svg_point_t b[] = {{T0 - 30000, 2}};
    hv_svg_series_t ser[] = {{"job 1 (a)", hv_svg_color(1), a, 2},
                             {"job 2 (<b>)", hv_svg_color(2), b, 1}};
    hv_page_cluster_t c = {.cluster_name = "x",
                           .now_ms = T0,
                           .fleet = {.t0_ms = T0 - 60000, .t1_ms = T0, .slots = ser, .nslots = 2}};
    hv_http_reply_t o = {0};
    hv_page_render_cluster(&c, &o);
    CHECK(has(&o, "<h2>Fleet</h2>"));
    CHECK(has(&o, "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"hv-chart fleet-slots\""));
    char col[32];
    snprintf(col, sizeof(col), "fill=\"#%06x\"", (unsigned)hv_svg_color(2));
    CHECK(has(&o, col));
    CHECK(has(&o, "data-label=\"job 2 (&lt;b&gt;)\""));
    CHECK(!has(&o, "(<b>)"));
    reply_free(&o);
    /* A job's page: its size and throughput charts; without throughput, a line says why. */
    hv_svg_point_t tp[] = {{T0 - 20000, 2.5}};
    hv_page_jobview_t v = {.cluster_name = "x",
                           .now_ms = T0,
                           .job = {.id = 1, .name = "a", .state = "running"},
                           .t0_ms = T0 - 60000,
                           .t1_ms = T0,
                           .size_series = {"workers", hv_svg_color(1), a, 2},
                           .tput_series = {"steps/s", hv_svg_color(1), tp, 1}};
    hv_page_render_job(&v, &o);
    CHECK(has(&o, "class=\"hv-chart job-size\""));
    CHECK(has(&o, "class=\"hv-chart job-tput\""));
    CHECK(!has(&o, "no-tput"));
    reply_free(&o);
    v.tput_series.n = 0;
    hv_page_render_job(&v, &o);
    CHECK(has(&o, "class=\"hv-chart job-size\""));
    CHECK(!has(&o, "job-tput"));
    CHECK(has(&o, "id=\"no-tput\""));
    reply_free(&o);
    v.t0_ms = v.t1_ms = 0; /* never started: no pictures */
    hv_page_render_job(&v, &o);
    CHECK(!has(&o, "<svg"));
    reply_free(&o);
    c.fleet.nslots = 0;
    hv_page_render_cluster(&c, &o);
    CHECK(has(&o, "No job held slots lately."));
    CHECK(!has(&o, "<svg"));
    reply_free(&o);
}

HV_CHECK_MAIN(NULL, NULL, {"fleet_charts", case_fleet_charts}, {"escape", case_escape},
              {"duration", case_duration}, {"cluster", case_cluster}, {"actors", case_actors},
              {"job", case_job}, {"routes", case_routes}, {"sessions", case_sessions},
              {"login_form", case_login_form}, {"login_limit", case_login_limit},
              {"rounds_from_fields", case_rounds_from_fields})
