/*
 * config_test: unit tests of hvhead's config loader. Good files (full, minimal, empty, the two
 * shipped examples) must give the expected values; each kind of mistake must be refused with
 * "FILE:LINE:COL: ..." naming the key and the value; token_file reading and token generation
 * run in a temporary data dir; an allocation-failure sweep checks every error path returns
 * HV_ENOMEM without leaks (run under ASan). `config_test <case>` runs one case.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "mem.h"
#include "hv_check.h"

#ifndef HV_TEST_DATA
#error "HV_TEST_DATA must name head/testdata"
#endif

static const char *data_path(const char *name, char *buf, size_t len) {
    snprintf(buf, len, "%s/%s", HV_TEST_DATA, name);
    return buf;
}

/* ---- good files ---------------------------------------------------------------------------- */

static void check_defaults(const hv_head_config_t *c) {
    CHECK_STR(c->cluster_name, "hv");
    CHECK_STR(c->listen, "127.0.0.1:7000");
    CHECK_STR(c->tls.cert, NULL);
    CHECK_STR(c->tls.key, NULL);
    CHECK_STR(c->tls.ca, NULL);
    CHECK_EQ(c->tls.require_client_cert, 0);
    CHECK_EQ(c->allow_insecure, 0);
    CHECK(!hv_head_config_plain_text_exposed(c));
    CHECK_STR(c->advertise, NULL);
    CHECK_STR(c->data_dir, "./hv-data");
    CHECK_STR(c->token, NULL);
    CHECK_STR(c->token_file, NULL);
    CHECK_EQ(c->heartbeat_ms, 1000);
    CHECK_EQ(c->lease_ms, 10000);
    CHECK_EQ(c->suspect_grace_ms, 500);
    CHECK_EQ(c->log_level, HV_LOG_NOTICE);
    CHECK_EQ(c->max_upload_bytes, 1ull << 30);
    CHECK_EQ(c->actor_state_max, 256ull << 20);
    CHECK_EQ(c->upload_quota_bytes, 4ull << 30);
    CHECK_EQ(c->upload_timeout_s, 3600);
    CHECK_EQ(c->kill_grace_ms, 5000);
    CHECK_EQ(c->job_wait_timeout_s, 600);
    CHECK_EQ(c->logs.max_job_bytes, 256ull << 20);
    CHECK_EQ(c->logs.max_total_bytes, 4ull << 30);
    CHECK_EQ(c->logs.reserve_free_bytes, 256ull << 20);
    CHECK_EQ(c->elastic.elastic_timeout_s, 600);
    CHECK_EQ(c->elastic.max_resets, 100);
    CHECK_EQ(c->elastic.blacklist_cooldown_s, 60);
    CHECK_EQ(c->elastic.blacklist_max_cooldown_s, 3600);
    CHECK_EQ(c->elastic.rendezvous_timeout_s, 60);
    CHECK_EQ(c->elastic.check_every, 1);
    CHECK_EQ(c->elastic.blacklist_max_strikes, 5);
    CHECK_STR(c->autoscaler.provider, "none");
    CHECK_EQ(c->autoscaler.min_nodes, 0);
    CHECK_EQ(c->autoscaler.max_nodes, 0);
    CHECK_EQ(c->autoscaler.idle_timeout_s, 300);
    CHECK_EQ(c->autoscaler.local_slots, 2);
    CHECK_STR(c->autoscaler.command_launch, NULL);
    CHECK_STR(c->autoscaler.command_terminate, NULL);
}

static void test_defaults(void) {
    hv_head_config_t c;
    char err[512] = "";
    hv_head_config_defaults(&c);
    check_defaults(&c);
    CHECK_STR(c.path, NULL);
    hv_head_config_fini(&c);
    hv_head_config_fini(&c); // twice is harmless
    hv_head_config_fini(NULL);

    CHECK_RC_MSG(hv_head_config_load(NULL, &c, err, sizeof(err)), HV_OK, err);
    check_defaults(&c);
    CHECK_STR(c.path, NULL);
    /* no node_types: one implicit type of local.slots slots, up to max_nodes */
    CHECK_EQ(c.autoscaler.ntypes, 1);
    CHECK_STR(c.autoscaler.types[0].name, "local");
    CHECK_EQ(c.autoscaler.types[0].slots, 2);
    CHECK_EQ(c.autoscaler.types[0].preemptible, 0);
    CHECK(c.autoscaler.upscaling_speed == 1.0);
    CHECK_EQ(c.autoscaler.launch_timeout_s, 300);
    hv_head_config_fini(&c);
}

static void test_full(void) {
    hv_head_config_t c;
    char err[512] = "", path[512];
    data_path("good_full.yaml", path, sizeof(path));
    hv_err rc = hv_head_config_load(path, &c, err, sizeof(err));
    CHECK_RC_MSG(rc, HV_OK, err);
    if (rc != HV_OK) {
        return;
    }
    CHECK_STR(c.path, path);
    CHECK_STR(c.cluster_name, "test-cluster_1.a");
    CHECK_STR(c.listen, "[::1]:7100");
    CHECK_STR(c.advertise, "head.example.com:7101");
    CHECK_STR(c.data_dir, "/tmp/hv-test-data");
    CHECK_STR(c.token, "s3cret-token");
    CHECK_STR(c.token_file, NULL);
    CHECK_EQ(c.heartbeat_ms, 500);
    CHECK_EQ(c.lease_ms, 1500);
    CHECK_EQ(c.suspect_grace_ms, 250);
    CHECK_EQ(c.log_level, HV_LOG_DEBUG);
    CHECK_EQ(c.max_upload_bytes, 512ull << 20);
    CHECK_EQ(c.upload_quota_bytes, 2ull << 30);
    CHECK_EQ(c.upload_timeout_s, 120);
    CHECK_EQ(c.kill_grace_ms, 0);
    CHECK_EQ(c.job_wait_timeout_s, 30);
    CHECK_EQ(c.logs.max_job_bytes, 2ull << 20);
    CHECK_EQ(c.logs.max_total_bytes, 100ull << 20);
    CHECK_EQ(c.logs.reserve_free_bytes, 0);
    CHECK_EQ(c.elastic.elastic_timeout_s, 120);
    CHECK_EQ(c.elastic.max_resets, 10);
    CHECK_EQ(c.elastic.blacklist_cooldown_s, 5);
    CHECK_EQ(c.elastic.blacklist_max_cooldown_s, 50);
    CHECK_EQ(c.elastic.rendezvous_timeout_s, 20);
    CHECK_EQ(c.elastic.check_every, 4);
    CHECK_EQ(c.elastic.blacklist_max_strikes, 2);
    CHECK_STR(c.autoscaler.provider, "command");
    CHECK_EQ(c.autoscaler.min_nodes, 1);
    CHECK_EQ(c.autoscaler.max_nodes, 8);
    CHECK_EQ(c.autoscaler.idle_timeout_s, 90);
    CHECK_EQ(c.autoscaler.local_slots, 4);
    CHECK_STR(c.autoscaler.command_launch, "./launch.sh --zone a");
    CHECK_STR(c.autoscaler.command_terminate, "./terminate.sh");
    CHECK_EQ(c.fleet.resize_interval_ms, 2000);
    CHECK_EQ(c.fleet.fcfs, 1);
    CHECK_EQ(c.fleet.reserve_pct, 25);
    CHECK_EQ(c.fleet.reserve_priority, 2);
    hv_head_config_fini(&c);
}

static void test_autoscaler(void) {
    hv_head_config_t c;
    char err[512] = "", path[512];
    hv_err rc = hv_head_config_load(data_path("good_autoscaler.yaml", path, sizeof(path)), &c, err,
                                    sizeof(err));
    CHECK_RC_MSG(rc, HV_OK, err);
    if (rc != HV_OK) {
        return;
    }
    CHECK_STR(c.autoscaler.provider, "spot-sim");
    CHECK(c.autoscaler.upscaling_speed == 0.5);
    CHECK_EQ(c.autoscaler.launch_timeout_s, 60);
    CHECK_EQ(c.autoscaler.max_launch_failures, 2);
    CHECK_EQ(c.autoscaler.set_aside_s, 30);
    CHECK_EQ(c.autoscaler.fallback_delay_s, 120);
    CHECK_EQ(c.autoscaler.ntypes, 3);
    /* fallback: spot-a, spot-b first, then ondemand (file order for the rest) */
    const hv_head_node_type_t *a = &c.autoscaler.types[0], *b = &c.autoscaler.types[1],
                              *o = &c.autoscaler.types[2];
    CHECK_STR(a->name, "spot-a");
    CHECK_STR(b->name, "spot-b");
    CHECK_STR(o->name, "ondemand");
    CHECK_EQ(a->slots, 2);
    CHECK_EQ(a->preemptible, 1);
    CHECK(a->price_per_hour == 0.12 && a->ondemand_price_per_hour == 0.40);
    CHECK_EQ(a->max_nodes, 4);
    CHECK_EQ(a->capacity, 3);
    CHECK_STR(a->labels, "zone=a,disk=ssd");
    CHECK_EQ(b->slots, 4);
    CHECK_EQ(b->gpus, 1);
    CHECK_EQ(b->preemptible, 1);
    CHECK_EQ(b->min_nodes, 1);
    CHECK_EQ(b->max_nodes, 10);             /* not given: autoscaler.max_nodes */
    CHECK(b->ondemand_price_per_hour == 0); /* preemptible without an on-demand price: unknown */
    CHECK_EQ(o->preemptible, 0);
    CHECK(o->ondemand_price_per_hour == 0.40); /* on demand: its own price */
    CHECK_STR(o->labels, NULL);
    CHECK_EQ(c.autoscaler.spot_sim.seed, 7);
    CHECK_EQ(c.autoscaler.spot_sim.boot_min_ms, 100);
    CHECK_EQ(c.autoscaler.spot_sim.boot_max_ms, 200);
    CHECK_EQ(c.autoscaler.spot_sim.preempt_every_s, 60);
    CHECK_EQ(c.autoscaler.spot_sim.notice_s, 5);
    CHECK(c.autoscaler.spot_sim.no_notice_fraction == 0.25);
    CHECK_STR(c.autoscaler.spot_sim.trace, "/tmp/trace.txt");
    hv_head_config_fini(&c);
}

static void test_minimal(void) {
    hv_head_config_t c;
    char err[512] = "", path[512];
    hv_err rc = hv_head_config_load(data_path("good_minimal.yaml", path, sizeof(path)), &c, err,
                                    sizeof(err));
    CHECK_RC_MSG(rc, HV_OK, err);
    if (rc != HV_OK) {
        return;
    }
    CHECK_STR(c.listen, "127.0.0.1:0");
    CHECK_STR(c.token_file, "/etc/hv/token");
    CHECK_STR(c.cluster_name, "hv");
    CHECK_EQ(c.lease_ms, 10000);
    CHECK_EQ(c.fleet.fcfs, 0);        /* fleet.policy: fleet by default */
    CHECK_EQ(c.fleet.reserve_pct, 0); /* no reserve by default */
    CHECK_EQ(c.fleet.reserve_priority, 1);
    hv_head_config_fini(&c);
}

static void test_empty(void) {
    static const char *files[] = {"empty.yaml", "good_comments.yaml"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        hv_head_config_t c;
        char err[512] = "", path[512];
        hv_err rc =
            hv_head_config_load(data_path(files[i], path, sizeof(path)), &c, err, sizeof(err));
        CHECK_RC_MSG(rc, HV_OK, err);
        if (rc == HV_OK) {
            check_defaults(&c);
            CHECK_STR(c.path, path);
            hv_head_config_fini(&c);
        }
    }
}

/* ---- certificates (made by the openssl command, tests/make_certs.sh) ------------------------ */

static char cert_dir[256], cert_dir_slash[260];

static void write_file(const char *path, const char *text, mode_t mode);

/* Makes the test PKI once; 0 (and the TLS checks are skipped, with a note) without openssl. */
static int have_certs(void) {
    static int state; // 0 unknown, 1 ok, -1 unavailable
    if (state == 0) {
        char cmd[800];
        snprintf(cert_dir, sizeof(cert_dir), "/tmp/hvcfgtls.XXXXXX");
        if (system("openssl version >/dev/null 2>&1") != 0 || mkdtemp(cert_dir) == NULL) {
            state = -1;
        } else {
            snprintf(cmd, sizeof(cmd), "sh '%s/../../tests/make_certs.sh' '%s'", HV_TEST_DATA,
                     cert_dir);
            state = system(cmd) == 0 ? 1 : -1;
            snprintf(cert_dir_slash, sizeof(cert_dir_slash), "%s/", cert_dir);
        }
        if (state < 0) {
            fprintf(stderr, "note: no openssl command: TLS config checks skipped\n");
        }
    }
    return state > 0;
}

static void remove_certs(void) {
    if (cert_dir[0] != '\0') {
        char cmd[400];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", cert_dir);
        if (system(cmd) != 0) {
            fprintf(stderr, "cannot remove %s\n", cert_dir);
        }
    }
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return NULL;
    }
    char *buf = hv_malloc(1 << 16);
    size_t n = buf != NULL ? fread(buf, 1, (1 << 16) - 1, f) : 0;
    fclose(f);
    if (buf != NULL) {
        buf[n] = '\0';
    }
    return buf;
}

/* A copy of text with every from replaced by to (owned). */
static char *replace_all(const char *text, const char *from, const char *to) {
    size_t n = 0, fl = strlen(from), tl = strlen(to);
    for (const char *q = strstr(text, from); q != NULL; q = strstr(q + fl, from)) {
        n++;
    }
    char *out = hv_malloc(strlen(text) + n * tl + 1), *o = out;
    for (const char *q = text;;) {
        const char *hit = strstr(q, from);
        size_t keep = hit != NULL ? (size_t)(hit - q) : strlen(q);
        memcpy(o, q, keep);
        o += keep;
        if (hit == NULL) {
            break;
        }
        memcpy(o, to, tl);
        o += tl;
        q = hit + fl;
    }
    *o = '\0';
    return out;
}

static void test_examples(void) {
    hv_head_config_t c;
    char err[512] = "", path[512];
    snprintf(path, sizeof(path), "%s/../../examples/local.yaml", HV_TEST_DATA);
    hv_err rc = hv_head_config_load(path, &c, err, sizeof(err));
    CHECK_RC_MSG(rc, HV_OK, err);
    if (rc == HV_OK) {
        CHECK_STR(c.listen, "127.0.0.1:7000");
        CHECK_STR(c.data_dir, "./hv-data");
        CHECK_STR(c.token, "hv-local-dev");
        CHECK_STR(c.token_file, NULL);
        CHECK_STR(c.autoscaler.provider, "none");
        hv_head_config_fini(&c);
    }
    /* cluster.yaml names its TLS files under /etc/hv/tls/: load it with those made here. */
    if (!have_certs()) {
        return;
    }
    snprintf(path, sizeof(path), "%s/../../examples/cluster.yaml", HV_TEST_DATA);
    char *text = slurp(path), copy[600];
    CHECK(text != NULL);
    if (text == NULL) {
        return;
    }
    char *fixed = replace_all(text, "/etc/hv/tls/", cert_dir_slash);
    snprintf(copy, sizeof(copy), "%s/cluster.yaml", cert_dir);
    write_file(copy, fixed, 0600);
    hv_free(text);
    hv_free(fixed);
    rc = hv_head_config_load(copy, &c, err, sizeof(err));
    CHECK_RC_MSG(rc, HV_OK, err);
    if (rc == HV_OK) {
        CHECK_STR(c.listen, "0.0.0.0:7000");
        CHECK(c.tls.cert != NULL && strstr(c.tls.cert, cert_dir) == c.tls.cert);
        CHECK(c.tls.key != NULL && c.tls.ca != NULL);
        CHECK_EQ(c.tls.require_client_cert, 1);
        CHECK_EQ(c.allow_insecure, 0);
        CHECK(!hv_head_config_plain_text_exposed(&c));
        CHECK_STR(c.data_dir, "/var/lib/hv");
        CHECK_STR(c.token, NULL);
        CHECK_STR(c.token_file, "/etc/hv/token");
        CHECK(c.lease_ms >= 3 * c.heartbeat_ms);
        CHECK_EQ(c.autoscaler.ntypes, 2);
        CHECK_STR(c.autoscaler.types[0].name, "gpu-spot");
        CHECK_STR(c.autoscaler.command_list, "deploy/providers/aws-spot/list.sh");
        hv_head_config_fini(&c);
    }
}

/* ---- bad files ----------------------------------------------------------------------------- */

typedef struct bad_case_s {
    const char *file;
    hv_err rc;
    const char *where;   // "LINE:COL" expected right after "FILE:"
    const char *want[3]; // substrings the message must contain (key, value, problem)
    const char *exact;   // the whole message after "FILE:LINE:COL: ", when pinned down
} bad_case_t;

static const bad_case_t bad_cases[] = {
    {"bad_unknown_key.yaml",
     HV_EINVAL,
     "3:1",
     {"heartbeet_ms"},
     "unknown key 'heartbeet_ms' (did you mean 'heartbeat_ms'?)"},
    {"bad_nested_unknown.yaml",
     HV_EINVAL,
     "2:3",
     {"'elastic.max_reset'", "elastic.max_resets"},
     NULL},
    {"bad_misplaced_key.yaml", HV_EINVAL, "1:1", {"'max_resets'", "'elastic.max_resets'"}, NULL},
    {"bad_type.yaml",
     HV_EINVAL,
     "7:15",
     {"heartbeat_ms", "fast"},
     "key 'heartbeat_ms': value 'fast' is not an integer"},
    {"bad_range.yaml", HV_EINVAL, "1:16", {"kill_grace_ms", "'700000'", "0..600000"}, NULL},
    {"bad_lease.yaml",
     HV_EINVAL,
     "2:11",
     {"lease_ms", "100"},
     "key 'lease_ms': value '100' must be at least 3 x heartbeat_ms (3000)"},
    {"bad_heartbeat_vs_default_lease.yaml",
     HV_EINVAL,
     "1:15",
     {"heartbeat_ms", "'5000'", "lease_ms"},
     NULL},
    {"bad_enum.yaml",
     HV_EINVAL,
     "1:12",
     {"log_level", "loud"},
     "key 'log_level': value 'loud' is not one of error, warn, notice, info, debug"},
    {"bad_listen.yaml",
     HV_EINVAL,
     "1:9",
     {"listen", "nohost"},
     "key 'listen': value 'nohost' is not HOST:PORT"},
    {"bad_port.yaml", HV_EINVAL, "1:9", {"listen", "'0.0.0.0:70000'", "port"}, NULL},
    {"bad_duplicate.yaml", HV_EINVAL, "3:1", {"duplicate key 'listen'", "line 1"}, NULL},
    {"bad_syntax.yaml", HV_EINVAL, "4:2", {"not valid YAML", "bad indentation", "line 1"}, NULL},
    {"bad_section.yaml",
     HV_EINVAL,
     "2:10",
     {"elastic"},
     "key 'elastic': expected a mapping, got a scalar"},
    {"bad_scalar_expected.yaml",
     HV_EINVAL,
     "2:3",
     {"listen", "expected a scalar", "sequence"},
     NULL},
    {"bad_top_level.yaml", HV_EINVAL, "1:1", {"top level", "sequence"}, NULL},
    {"bad_token_both.yaml", HV_EINVAL, "2:13", {"'token'", "'token_file'", "both"}, NULL},
    {"bad_size.yaml", HV_EINVAL, "1:13", {"max_upload", "'10XB'", "not a size"}, NULL},
    {"bad_size_range.yaml", HV_EINVAL, "1:13", {"max_upload", "'100GiB'", "1KiB..64GiB"}, NULL},
    {"bad_logs_range.yaml", HV_EINVAL, "2:18", {"max_job_bytes", "'10B'", "1KiB..1TiB"}, NULL},
    {"bad_provider.yaml", HV_EINVAL, "2:13", {"autoscaler.provider", "'aws'", "spot-sim"}, NULL},
    {"bad_command_provider.yaml",
     HV_EINVAL,
     "2:13",
     {"autoscaler.provider", "'command'", "autoscaler.command.terminate"},
     NULL},
    {"bad_cooldown.yaml", HV_EINVAL, "3:29", {"blacklist_max_cooldown_s", "'60'", "600"}, NULL},
    {"bad_fleet.yaml", HV_EINVAL, "3:14", {"fleet.starve_ms", "'10'", "1000..86400000"}, NULL},
    {"bad_fleet_policy.yaml", HV_EINVAL, "2:11", {"fleet.policy", "'sjf'", "fleet, fcfs"}, NULL},
    {"bad_fleet_reserve.yaml", HV_EINVAL, "2:16", {"fleet.reserve_pct", "'95'", "0..90"}, NULL},
    {"bad_two_documents.yaml", HV_EINVAL, "2:1", {"one YAML document"}, NULL},
    {"bad_type_no_slots.yaml",
     HV_EINVAL,
     "4:5",
     {"a"},
     "key 'autoscaler.node_types.a': 'slots' is required"},
    {"bad_type_unknown_key.yaml",
     HV_EINVAL,
     "4:19",
     {"'autoscaler.node_types.a.spot'", "preemptible"},
     NULL},
    {"bad_type_bool.yaml",
     HV_EINVAL,
     "4:32",
     {"a.preemptible"},
     "key 'autoscaler.node_types.a.preemptible': value 'maybe' is not true or false"},
    {"bad_type_price.yaml", HV_EINVAL, "4:35", {"price_per_hour", "'cheap'"}, NULL},
    {"bad_type_range.yaml",
     HV_EINVAL,
     "4:16",
     {"a.slots"},
     "key 'autoscaler.node_types.a.slots': value '5000' is out of range (1..4096)"},
    {"bad_type_duplicate.yaml",
     HV_EINVAL,
     "4:28",
     {"a.slots"},
     "duplicate key 'autoscaler.node_types.a.slots' (first given at line 4)"},
    {"bad_type_scalar.yaml",
     HV_EINVAL,
     "4:16",
     {"a.slots"},
     "key 'autoscaler.node_types.a.slots': expected a scalar, got a sequence"},
    {"bad_fallback_delay.yaml",
     HV_EINVAL,
     "3:21",
     {"fallback_delay_s"},
     "key 'autoscaler.fallback_delay_s': value '604801' is out of range (0..604800)"},
    {"bad_fallback_unknown.yaml",
     HV_EINVAL,
     "5:17",
     {"fallback"},
     "key 'autoscaler.fallback': 'b' is not a type under autoscaler.node_types"},
    {"bad_type_mins.yaml",
     HV_EINVAL,
     "4:5",
     {"node_types"},
     "key 'autoscaler.node_types': the types' min_nodes add up to 4, above autoscaler.max_nodes "
     "(3)"},
    {"bad_type_min_max.yaml",
     HV_EINVAL,
     "4:5",
     {"a"},
     "key 'autoscaler.node_types.a': min_nodes (3) is above max_nodes (2)"},
    {"bad_upscaling.yaml",
     HV_EINVAL,
     "2:20",
     {"upscaling_speed"},
     "key 'autoscaler.upscaling_speed': value '0' is out of range (0.001..1000)"},
    {"bad_boot.yaml", HV_EINVAL, "4:18", {"boot_max_ms", "100", "500"}, NULL},
    {"bad_type_name.yaml", HV_EINVAL, "3:5", {"'a b'", "letters"}, NULL},
    {"bad_insecure_listen.yaml",
     HV_EINVAL,
     "2:9",
     {"key 'listen'", "'0.0.0.0:7000'", "allow_insecure: true"},
     NULL},
    {"bad_bool.yaml",
     HV_EINVAL,
     "2:17",
     {"allow_insecure"},
     "key 'allow_insecure': value 'maybe' is not true or false"},
    {"bad_tls_no_key.yaml", HV_EINVAL, "3:3", {"key 'tls'", "'cert'", "'key'"}, NULL},
    {"bad_tls_missing_file.yaml",
     HV_EINVAL,
     "2:9",
     {"key 'tls.cert'"},
     "key 'tls.cert': certificate '/nonexistent/server.pem': cannot open: No such file or "
     "directory"},
    {"bad_tls_rcc_no_ca.yaml", HV_EINVAL, "4:24", {"tls.require_client_cert", "tls.ca"}, NULL},
};

static void run_bad_case(const bad_case_t *bc) {
    hv_head_config_t c;
    char err[512] = "", path[512], prefix[600];
    data_path(bc->file, path, sizeof(path));
    /* cfg must not be touched on failure. */
    memset(&c, 0x5A, sizeof(c));
    hv_head_config_t before;
    memcpy(&before, &c, sizeof(c));
    hv_err rc = hv_head_config_load(path, &c, err, sizeof(err));
    CHECK_RC_MSG(rc, bc->rc, err);
    CHECK(memcmp(&before, &c, sizeof(c)) == 0);
    if (rc == HV_OK) {
        hv_head_config_fini(&c);
        return;
    }
    snprintf(prefix, sizeof(prefix), "%s:%s: ", path, bc->where);
    if (strncmp(err, prefix, strlen(prefix)) != 0) {
        fprintf(stderr, "%s: message prefix\n  got:  %s\n  want: %s...\n", bc->file, err, prefix);
        hv_check_failures++;
        return;
    }
    for (size_t i = 0; i < 3 && bc->want[i] != NULL; i++) {
        if (strstr(err, bc->want[i]) == NULL) {
            fprintf(stderr, "%s: message lacks \"%s\"\n  got: %s\n", bc->file, bc->want[i], err);
            hv_check_failures++;
        }
    }
    if (bc->exact != NULL) {
        CHECK_STR(err + strlen(prefix), bc->exact);
    }
}

static void test_bad_files(void) {
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
        int before = hv_check_failures;
        run_bad_case(&bad_cases[i]);
        if (hv_check_failures != before) {
            fprintf(stderr, "  (case %s)\n", bad_cases[i].file);
        }
    }
}

static void test_missing_file(void) {
    hv_head_config_t c;
    char err[512] = "", path[512], want[600];
    data_path("no_such_file.yaml", path, sizeof(path));
    CHECK_RC_MSG(hv_head_config_load(path, &c, err, sizeof(err)), HV_ENOTFOUND, err);
    snprintf(want, sizeof(want), "%s: cannot open: No such file or directory", path);
    CHECK_STR(err, want);

    CHECK_RC_MSG(hv_head_config_load(HV_TEST_DATA, &c, err, sizeof(err)), HV_EIO, err);
    CHECK(strstr(err, "cannot read") != NULL);

    /* A NULL or zero-length message buffer is allowed. */
    CHECK_RC_MSG(hv_head_config_load(path, &c, NULL, 0), HV_ENOTFOUND, "");
    data_path("bad_type.yaml", path, sizeof(path));
    CHECK_RC_MSG(hv_head_config_load(path, &c, NULL, 0), HV_EINVAL, "");
    char tiny[8];
    CHECK_RC_MSG(hv_head_config_load(path, &c, tiny, sizeof(tiny)), HV_EINVAL, "");
    CHECK(strlen(tiny) < sizeof(tiny));
}

/* ---- tokens -------------------------------------------------------------------------------- */

static int warn_perms_seen;

static void capture_sink(hv_log_level level, const char *subsys, const char *msgid,
                         const char *text, void *ud) {
    (void)subsys;
    (void)text;
    (void)ud;
    if (level == HV_LOG_WARN && strcmp(msgid, "HV-CFG-TOKEN-PERMS") == 0) {
        warn_perms_seen++;
    }
}

static void write_file(const char *path, const char *text, mode_t mode) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f != NULL) {
        fputs(text, f);
        fclose(f);
    }
    CHECK(chmod(path, mode) == 0);
}

/* A config with defaults and the given token settings (data_dir replaced when given). */
static void token_cfg(hv_head_config_t *c, const char *token_file, const char *data_dir) {
    hv_head_config_defaults(c);
    if (token_file != NULL) {
        c->token_file = hv_strdup(token_file);
    }
    if (data_dir != NULL) {
        hv_free(c->data_dir);
        c->data_dir = hv_strdup(data_dir);
    }
}

static void test_token_file(void) {
    char dir[] = "/tmp/hv_config_test_XXXXXX";
    char path[600], err[512] = "";
    hv_head_config_t c;
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof(path), "%s/token", dir);
    hv_log_set_sink(capture_sink, NULL);

    write_file(path, "  abc123-XYZ \n\n", 0600);
    warn_perms_seen = 0;
    token_cfg(&c, path, NULL);
    CHECK_RC_MSG(hv_head_config_resolve_token(&c, err, sizeof(err)), HV_OK, err);
    CHECK_STR(c.token, "abc123-XYZ");
    CHECK_STR(c.token_file, path);
    CHECK_EQ(warn_perms_seen, 0);
    hv_head_config_fini(&c);

    /* World-readable: accepted, with a warning. */
    write_file(path, "abc123\n", 0644);
    token_cfg(&c, path, NULL);
    CHECK_RC_MSG(hv_head_config_resolve_token(&c, err, sizeof(err)), HV_OK, err);
    CHECK_STR(c.token, "abc123");
    CHECK_EQ(warn_perms_seen, 1);
    hv_head_config_fini(&c);

    /* Empty (whitespace only). */
    write_file(path, " \n\t\n", 0600);
    token_cfg(&c, path, NULL);
    CHECK_RC_MSG(hv_head_config_resolve_token(&c, err, sizeof(err)), HV_EINVAL, err);
    CHECK(strstr(err, path) != NULL && strstr(err, "empty") != NULL);
    CHECK_STR(c.token, NULL);
    hv_head_config_fini(&c);

    /* Two words. */
    write_file(path, "abc def\n", 0600);
    token_cfg(&c, path, NULL);
    CHECK_RC_MSG(hv_head_config_resolve_token(&c, err, sizeof(err)), HV_EINVAL, err);
    CHECK(strstr(err, "whitespace") != NULL);
    hv_head_config_fini(&c);

    /* Missing. */
    unlink(path);
    token_cfg(&c, path, NULL);
    CHECK_RC_MSG(hv_head_config_resolve_token(&c, err, sizeof(err)), HV_ENOTFOUND, err);
    CHECK(strstr(err, "token_file") != NULL && strstr(err, path) != NULL &&
          strstr(err, "No such file") != NULL);
    hv_head_config_fini(&c);

    /* An inline token wins and touches nothing. */
    token_cfg(&c, NULL, dir);
    c.token = hv_strdup("inline");
    CHECK_RC_MSG(hv_head_config_resolve_token(&c, err, sizeof(err)), HV_OK, err);
    CHECK_STR(c.token, "inline");
    CHECK(access(path, F_OK) != 0);
    hv_head_config_fini(&c);

    hv_log_set_sink(NULL, NULL);
    rmdir(dir);
}

static void test_token_generate(void) {
    char dir[] = "/tmp/hv_config_test_XXXXXX";
    char data_dir[600], path[700], err[512] = "";
    hv_head_config_t c1, c2;
    CHECK(mkdtemp(dir) != NULL);
    snprintf(data_dir, sizeof(data_dir), "%s/a/data", dir); // created on demand
    snprintf(path, sizeof(path), "%s/token", data_dir);

    token_cfg(&c1, NULL, data_dir);
    CHECK_RC_MSG(hv_head_config_resolve_token(&c1, err, sizeof(err)), HV_OK, err);
    CHECK(c1.token != NULL && strlen(c1.token) == 32);
    CHECK(c1.token != NULL && strspn(c1.token, "0123456789abcdef") == 32);
    CHECK_STR(c1.token_file, path);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
    CHECK(stat(data_dir, &st) == 0 && (st.st_mode & 0777) == 0700);

    /* A second start reuses the same token. */
    token_cfg(&c2, NULL, data_dir);
    CHECK_RC_MSG(hv_head_config_resolve_token(&c2, err, sizeof(err)), HV_OK, err);
    CHECK_STR(c2.token, c1.token);
    hv_head_config_fini(&c2);

    /* Allocation-failure sweep over the reuse path. */
    for (long n = 1; n < 100; n++) {
        token_cfg(&c2, NULL, data_dir);
        hv_mem_fail_after(n);
        hv_err rc = hv_head_config_resolve_token(&c2, err, sizeof(err));
        hv_mem_fail_after(0);
        if (rc == HV_OK) {
            CHECK_STR(c2.token, c1.token);
            hv_head_config_fini(&c2);
            break;
        }
        CHECK_RC_MSG(rc, HV_ENOMEM, err);
        CHECK_STR(c2.token, NULL);
        hv_head_config_fini(&c2);
    }
    hv_head_config_fini(&c1);

    /* data_dir that is a file. */
    token_cfg(&c1, NULL, path);
    CHECK(hv_head_config_resolve_token(&c1, err, sizeof(err)) != HV_OK);
    CHECK(strstr(err, path) != NULL);
    hv_head_config_fini(&c1);

    unlink(path);
    rmdir(data_dir);
    snprintf(data_dir, sizeof(data_dir), "%s/a", dir);
    rmdir(data_dir);
    rmdir(dir);
}

static void test_oom(void) {
    /* Fail the 1st, 2nd, ... allocation of a full load until one load needs no more. */
    char err[512], path[512];
    data_path("good_full.yaml", path, sizeof(path));
    int ok = 0;
    for (long n = 1; n < 1000 && !ok; n++) {
        hv_head_config_t c;
        hv_mem_fail_after(n);
        hv_err rc = hv_head_config_load(path, &c, err, sizeof(err));
        hv_mem_fail_after(0);
        if (rc == HV_OK) {
            ok = 1;
            CHECK_STR(c.autoscaler.command_terminate, "./terminate.sh");
            hv_head_config_fini(&c);
        } else {
            CHECK_RC_MSG(rc, HV_ENOMEM, err);
        }
    }
    CHECK(ok);
}

/* Text in memory: the same parser, the given name in messages, no NUL needed. */
static void test_parse_buffer(void) {
    hv_head_config_t c;
    char err[512];
    const char good[] = "lease_ms: 5000\nupload_quota: 1MiB\nXXX";
    CHECK_RC(hv_head_config_parse("mem.yaml", good, sizeof(good) - 4, &c, err, sizeof(err)), HV_OK);
    CHECK_EQ(c.lease_ms, 5000);
    CHECK_EQ(c.upload_quota_bytes, 1ull << 20);
    CHECK_STR(c.path, "mem.yaml");
    hv_head_config_fini(&c);
    const char bad[] = "lease_ms: 5000\nnope: 1\n";
    CHECK_RC(hv_head_config_parse("mem.yaml", bad, sizeof(bad) - 1, &c, err, sizeof(err)),
             HV_EINVAL);
    CHECK(strstr(err, "mem.yaml:2:1") != NULL && strstr(err, "nope") != NULL);
}

/* The bounds on what clients hold: 0 (derived at start) by default, set values kept, values out
 * of range refused with the key. */
static void test_limits(void) {
    hv_head_config_t c;
    char err[512];
    const char none[] = "lease_ms: 5000\n";
    CHECK_RC(hv_head_config_parse("l.yaml", none, sizeof(none) - 1, &c, err, sizeof(err)), HV_OK);
    CHECK_EQ(c.limits.max_connections, 0);
    CHECK_EQ(c.limits.max_connections_per_client, 0);
    hv_head_config_fini(&c);
    const char set[] = "limits:\n  max_connections: 12\n  max_connections_per_client: 8\n";
    CHECK_RC_MSG(hv_head_config_parse("l.yaml", set, sizeof(set) - 1, &c, err, sizeof(err)), HV_OK,
                 err);
    CHECK_EQ(c.limits.max_connections, 12);
    CHECK_EQ(c.limits.max_connections_per_client, 8);
    hv_head_config_fini(&c);
    const char big[] = "limits:\n  max_connections_per_client: 1000001\n";
    CHECK_RC(hv_head_config_parse("l.yaml", big, sizeof(big) - 1, &c, err, sizeof(err)), HV_EINVAL);
    CHECK(strstr(err, "max_connections_per_client") != NULL);
}

/* The durable tier of the state copies: off by default (interval 60 s, timeout 600 s); a
 * directory or a pair of commands, never both; the templates' placeholders checked at their key. */
static void test_durable(void) {
    static const struct {
        const char *text;
        hv_err want;
        const char *msg; /* in the error, or NULL */
    } rows[] = {
        {"state_copies:\n  durable:\n    dir: /shared/hv\n", HV_OK, NULL},
        {"state_copies:\n  durable:\n    upload: up {file} s3://b/{key}\n    download: dn "
         "s3://b/{key} {file}\n    remove: rm s3://b/{key}\n    interval_s: 5\n    "
         "timeout_s: 30\n",
         HV_OK, NULL},
        {"state_copies:\n  durable:\n    dir: shared/hv\n", HV_EINVAL,
         "d.yaml:3:10: key 'state_copies.durable.dir': value 'shared/hv' is not an absolute path"},
        {"state_copies:\n  durable:\n    dir: /s\n    upload: up {file}\n    download: x\n",
         HV_EINVAL, "d.yaml:4:13: key 'state_copies.durable.upload': 'dir' and 'upload' are both"},
        {"state_copies:\n  durable:\n    upload: up {file}\n", HV_EINVAL,
         "key 'state_copies.durable.upload': needs state_copies.durable.download"},
        {"state_copies:\n  durable:\n    download: dn {file}\n", HV_EINVAL,
         "key 'state_copies.durable.download': needs state_copies.durable.upload"},
        {"state_copies:\n  durable:\n    dir: /s\n    remove: rm {key}\n", HV_EINVAL,
         "key 'state_copies.durable.remove': is only used with"},
        {"state_copies:\n  durable:\n    upload: up {file} {bucket}\n    download: dn {file}\n",
         HV_EINVAL,
         "d.yaml:3:13: key 'state_copies.durable.upload': unknown placeholder '{bucket}' (known: "
         "{file} {key} {job} {sha256})"},
        {"state_copies:\n  durable:\n    dir: /s\n    interval_s: 0\n", HV_EINVAL, "interval_s"},
        {"state_copies:\n  durable:\n    dirr: /s\n", HV_EINVAL, "dirr"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_head_config_t c;
        char err[512] = "";
        hv_err rc = hv_head_config_parse("d.yaml", rows[i].text, strlen(rows[i].text), &c, err,
                                         sizeof(err));
        CHECK_RC_MSG(rc, rows[i].want, err);
        if (rows[i].msg != NULL && strstr(err, rows[i].msg) == NULL) {
            fprintf(stderr, "row %zu: message lacks \"%s\"\n  got: %s\n", i, rows[i].msg, err);
            hv_check_failures++;
        }
        if (rc == HV_OK) {
            hv_head_config_fini(&c);
        }
    }
    hv_head_config_t c;
    char err[512];
    const char off[] = "lease_ms: 5000\n";
    CHECK_RC(hv_head_config_parse("d.yaml", off, sizeof(off) - 1, &c, err, sizeof(err)), HV_OK);
    CHECK_STR(c.durable.dir, NULL);
    CHECK_STR(c.durable.upload, NULL);
    CHECK_EQ(c.durable.interval_s, 60);
    CHECK_EQ(c.durable.timeout_s, 600);
    hv_head_config_fini(&c);
    const char cmd[] = "state_copies:\n  durable:\n    upload: u {file}\n    download: d {file}\n"
                       "    interval_s: 7\n";
    CHECK_RC(hv_head_config_parse("d.yaml", cmd, sizeof(cmd) - 1, &c, err, sizeof(err)), HV_OK);
    CHECK_STR(c.durable.upload, "u {file}");
    CHECK_STR(c.durable.download, "d {file}");
    CHECK_EQ(c.durable.interval_s, 7);
    hv_head_config_fini(&c);
}

/* The metrics listener: off by default; loopback without a token; beyond loopback only with a
 * token file; a token file without a listener is a mistake. */
static void test_metrics(void) {
    static const struct {
        const char *text;
        hv_err want;
        const char *msg; /* in the error, or NULL */
    } rows[] = {
        {"metrics:\n  listen: 127.0.0.1:7001\n", HV_OK, NULL},
        {"metrics:\n  listen: '[::1]:7001'\n", HV_OK, NULL},
        {"metrics:\n  listen: 0.0.0.0:7001\n  token_file: /x\n", HV_OK, NULL},
        {"metrics:\n  listen: 0.0.0.0:7001\n", HV_EINVAL,
         "mem.yaml:2:11: key 'metrics.listen': value '0.0.0.0:7001' is not a loopback address"},
        {"metrics:\n  token_file: /x\n", HV_EINVAL, "key 'metrics.token_file': needs"},
        {"metrics:\n  listen: 127.0.0.1\n", HV_EINVAL, "is not HOST:PORT"},
        {"metrics:\n  port: 1\n", HV_EINVAL, "port"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_head_config_t c;
        char err[512] = "";
        hv_err rc = hv_head_config_parse("mem.yaml", rows[i].text, strlen(rows[i].text), &c, err,
                                         sizeof(err));
        CHECK_RC_MSG(rc, rows[i].want, err);
        if (rows[i].msg != NULL && strstr(err, rows[i].msg) == NULL) {
            fprintf(stderr, "row %zu: '%s' not in '%s'\n", i, rows[i].msg, err);
            CHECK(0);
        }
        if (rc == HV_OK) {
            CHECK(c.metrics.listen != NULL);
            hv_head_config_fini(&c);
        }
    }
    hv_head_config_t d;
    hv_head_config_defaults(&d);
    CHECK_STR(d.metrics.listen, NULL);
    CHECK_STR(d.metrics.token_file, NULL);
    hv_head_config_fini(&d);
}

/* The history's retention: keep everything by default; the keys parse and are bounded. */
static void test_history(void) {
    hv_head_config_t c;
    char err[512] = "";
    hv_head_config_defaults(&c);
    CHECK_EQ(c.history.max_age_days, 0);
    CHECK_EQ(c.history.max_jobs, 0);
    CHECK_EQ(c.history.prune_interval_s, 600);
    hv_head_config_fini(&c);
    const char good[] = "history:\n  max_age_days: 90\n  max_jobs: 10000\n  prune_interval_s: 5\n";
    CHECK_RC_MSG(hv_head_config_parse("mem.yaml", good, sizeof(good) - 1, &c, err, sizeof(err)),
                 HV_OK, err);
    CHECK_EQ(c.history.max_age_days, 90);
    CHECK_EQ(c.history.max_jobs, 10000);
    CHECK_EQ(c.history.prune_interval_s, 5);
    hv_head_config_fini(&c);
    const char *bad[] = {"history:\n  max_age_days: 40000\n", "history:\n  prune_interval_s: 0\n",
                         "history:\n  max_jobs: -1\n", "history:\n  keep: 3\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK_RC(hv_head_config_parse("mem.yaml", bad[i], strlen(bad[i]), &c, err, sizeof(err)),
                 HV_EINVAL);
        CHECK(strstr(err, "mem.yaml:2:") != NULL);
    }
}

/* ---- transport: tls and the plain-text rule ----------------------------------------------- */

/* Writes a config into the cert dir and loads it; returns the rc, err holds the message. */
static hv_err load_text(const char *name, const char *text, hv_head_config_t *c, char *err,
                        size_t errlen) {
    char path[400];
    snprintf(path, sizeof(path), "%s/%s", cert_dir, name);
    write_file(path, text, 0600);
    return hv_head_config_load(path, c, err, errlen);
}

static void test_insecure(void) {
    hv_head_config_t c;
    char err[512] = "", path[512];
    hv_err rc = hv_head_config_load(data_path("good_insecure.yaml", path, sizeof(path)), &c, err,
                                    sizeof(err));
    CHECK_RC_MSG(rc, HV_OK, err);
    if (rc == HV_OK) {
        CHECK_EQ(c.allow_insecure, 1);
        CHECK_STR(c.tls.cert, NULL); // "tls:" with nothing under it: plain text
        CHECK(hv_head_config_plain_text_exposed(&c));
        hv_head_config_fini(&c);
    }
    /* Loopback addresses need no allowance. */
    static const char *const loop[] = {"127.0.0.1:0", "localhost:7000", "\"[::1]:7000\"",
                                       "127.3.4.5:7000"};
    if (!have_certs()) {
        return;
    }
    for (size_t i = 0; i < sizeof(loop) / sizeof(loop[0]); i++) {
        char text[128];
        snprintf(text, sizeof(text), "listen: %s\n", loop[i]);
        rc = load_text("loop.yaml", text, &c, err, sizeof(err));
        CHECK_RC_MSG(rc, HV_OK, err);
        if (rc == HV_OK) {
            CHECK(!hv_head_config_plain_text_exposed(&c));
            hv_head_config_fini(&c);
        }
    }
    rc = load_text("v6.yaml", "listen: \"[::]:7000\"\n", &c, err, sizeof(err));
    CHECK_RC_MSG(rc, HV_EINVAL, err);
    CHECK(strstr(err, "v6.yaml:1:9: key 'listen'") != NULL);
}

static void test_tls(void) {
    hv_head_config_t c;
    char err[1024] = "", text[2048];
    if (!have_certs()) {
        return;
    }
    const char *d = cert_dir;
    snprintf(text, sizeof(text),
             "listen: 0.0.0.0:0\ntls:\n  cert: %s/server.pem\n  key: %s/server.key\n  ca: "
             "%s/ca.pem\n  require_client_cert: true\n",
             d, d, d);
    hv_err rc = load_text("good.yaml", text, &c, err, sizeof(err));
    CHECK_RC_MSG(rc, HV_OK, err);
    if (rc == HV_OK) {
        char want[400];
        snprintf(want, sizeof(want), "%s/server.pem", d);
        CHECK_STR(c.tls.cert, want);
        snprintf(want, sizeof(want), "%s/server.key", d);
        CHECK_STR(c.tls.key, want);
        snprintf(want, sizeof(want), "%s/ca.pem", d);
        CHECK_STR(c.tls.ca, want);
        CHECK_EQ(c.tls.require_client_cert, 1);
        CHECK(!hv_head_config_plain_text_exposed(&c));
        hv_head_config_fini(&c);
    }
    /* A key that belongs to another certificate: blamed on tls.key, at its line. */
    snprintf(text, sizeof(text), "tls:\n  cert: %s/server.pem\n  key: %s/other.key\n", d, d);
    rc = load_text("mismatch.yaml", text, &c, err, sizeof(err));
    CHECK_RC_MSG(rc, HV_EINVAL, err);
    CHECK(strstr(err, "mismatch.yaml:3:8: key 'tls.key': the private key") != NULL);
    CHECK(strstr(err, "does not match the certificate") != NULL);
    /* cert and key swapped: the certificate file holds no certificate. */
    snprintf(text, sizeof(text), "tls:\n  cert: %s/server.key\n  key: %s/server.pem\n", d, d);
    rc = load_text("swapped.yaml", text, &c, err, sizeof(err));
    CHECK_RC_MSG(rc, HV_EINVAL, err);
    CHECK(strstr(err, "swapped.yaml:2:9: key 'tls.cert': certificate") != NULL);
    CHECK(strstr(err, "not a PEM certificate") != NULL);
    /* An unreadable CA file: blamed on tls.ca. */
    snprintf(text, sizeof(text),
             "tls:\n  cert: %s/server.pem\n  key: %s/server.key\n  ca: %s/nope.pem\n", d, d, d);
    rc = load_text("noca.yaml", text, &c, err, sizeof(err));
    CHECK_RC_MSG(rc, HV_EINVAL, err);
    CHECK(strstr(err, "noca.yaml:4:7: key 'tls.ca': CA file") != NULL);
    CHECK(strstr(err, "No such file or directory") != NULL);
    /* A directory where the key should be. */
    snprintf(text, sizeof(text), "tls:\n  cert: %s/server.pem\n  key: %s\n", d, d);
    rc = load_text("dir.yaml", text, &c, err, sizeof(err));
    CHECK_RC_MSG(rc, HV_EINVAL, err);
    CHECK(strstr(err, "dir.yaml:3:8: key 'tls.key'") != NULL);
}

/* Malformed YAML gets a message in the file's terms: where, and what is wrong, never libyaml's
 * own vocabulary (tokens, scalars, indicators, "while parsing a block mapping"). */
static void test_yaml_words(void) {
    static const struct {
        const char *text;
        const char *where; /* LINE:COL */
        const char *want;
    } yc[] = {
        {"listen: [1, 2\ndata_dir: x\n", "2:9", "a '[' list that is not closed with ']'"},
        {"a: b: c\n", "1:5", "a ':' where no 'key: value' can start"},
        {"listen: \"abc\n", "2:1", "a quoted string that is never closed (it starts at line 1)"},
        {"key:\n\t- x\n", "2:1", "a tab character: YAML indents with spaces only"},
        {"- a\nb: c\n", "2:1", "bad indentation"},
        {"x: &a\n y: *b\n", "2:5", "an alias (*name) without a matching anchor"},
        {"a: @x\n", "1:4", "a character that cannot start a value here"},
    };
    static const char *const internal[] = {"token",         "scalar",           "indicator",
                                           "while parsing", "while scanning",   "block mapping",
                                           "flow sequence", "YAML syntax error"};
    char dir[] = "/tmp/hv_config_yaml_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    for (size_t i = 0; i < sizeof(yc) / sizeof(yc[0]); i++) {
        char path[600], err[512] = "", prefix[700];
        snprintf(path, sizeof(path), "%s/bad%zu.yaml", dir, i);
        write_file(path, yc[i].text, 0644);
        hv_head_config_t c;
        CHECK_RC_MSG(hv_head_config_load(path, &c, err, sizeof(err)), HV_EINVAL, err);
        snprintf(prefix, sizeof(prefix), "%s:%s: not valid YAML: ", path, yc[i].where);
        if (strncmp(err, prefix, strlen(prefix)) != 0 || strstr(err, yc[i].want) == NULL) {
            fprintf(stderr, "case %zu:\n  got:  %s\n  want: %s...%s\n", i, err, prefix, yc[i].want);
            hv_check_failures++;
        }
        for (size_t k = 0; k < sizeof(internal) / sizeof(internal[0]); k++) {
            if (strstr(err, internal[k]) != NULL) {
                fprintf(stderr, "case %zu: libyaml's '%s' in: %s\n", i, internal[k], err);
                hv_check_failures++;
            }
        }
        unlink(path);
    }
    rmdir(dir);
}

/* fleet.namespaces: each namespace's weight, quota, borrowing limit and default priority, with
 * their defaults (weight 1, no quota, no borrowing limit, priority 0); mistakes refused naming
 * the line, the key (with the list index) and the value. */
static void test_namespaces(void) {
    hv_head_config_t c;
    char err[512];
    const char none[] = "fleet:\n  resize_interval_ms: 500\n";
    CHECK_RC(hv_head_config_parse("n.yaml", none, sizeof(none) - 1, &c, err, sizeof(err)), HV_OK);
    CHECK_EQ(c.fleet.nns, 0);
    CHECK(hv_head_config_ns(&c, "default") == NULL);
    /* The one lookup: every name counts in the implicit "default", index nns. */
    CHECK_EQ(hv_head_config_ns_index(&c, "research"), 0);
    CHECK_EQ(hv_head_config_ns_index(&c, NULL), 0);
    CHECK_STR(hv_head_config_ns_name(&c, 0), "default");
    hv_head_config_fini(&c);
    const char good[] = "fleet:\n"
                        "  namespaces:\n"
                        "    - name: research\n"
                        "      weight: 3\n"
                        "      quota: {slots: 4, gpus: 2, memory: 64GiB}\n"
                        "      borrow: {slots: 2}\n"
                        "      priority: 10\n"
                        "    - name: default\n"
                        "      quota:\n"
                        "        slots: 1\n"
                        "      borrow: {memory: unlimited, slots: 0}\n";
    CHECK_RC_MSG(hv_head_config_parse("n.yaml", good, sizeof(good) - 1, &c, err, sizeof(err)),
                 HV_OK, err);
    CHECK_EQ(c.fleet.nns, 2);
    const hv_head_ns_t *r = hv_head_config_ns(&c, "research");
    CHECK(r == &c.fleet.ns[0]);
    CHECK_STR(r->name, "research");
    CHECK_EQ(r->weight, 3);
    CHECK_EQ(r->quota[0], 4);
    CHECK_EQ(r->quota[1], 2);
    CHECK_EQ(r->quota[2], 65536);
    CHECK_EQ(r->borrow[0], 2);
    CHECK(r->borrow[1] == UINT64_MAX && r->borrow[2] == UINT64_MAX);
    CHECK_EQ(r->priority, 10);
    const hv_head_ns_t *d = hv_head_config_ns(&c, "");
    CHECK(d == &c.fleet.ns[1]);
    CHECK_EQ(d->weight, 1);
    CHECK_EQ(d->quota[0], 1);
    CHECK_EQ(d->quota[1], 0);
    CHECK_EQ(d->borrow[0], 0);
    CHECK(d->borrow[2] == UINT64_MAX);
    CHECK_EQ(d->priority, 0);
    CHECK(hv_head_config_ns(&c, "other") == NULL);
    /* The one lookup (the fleet policy's and the views'): name -> index -> name. */
    static const struct {
        const char *name, *counted_in;
        size_t index;
    } rows[] = {{"research", "research", 0},
                {"default", "default", 1},
                {"", "default", 1},
                {NULL, "default", 1},
                {"other", "default", 1}};
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        CHECK_EQ(hv_head_config_ns_index(&c, rows[i].name), rows[i].index);
        CHECK_STR(hv_head_config_ns_name(&c, hv_head_config_ns_index(&c, rows[i].name)),
                  rows[i].counted_in);
    }
    hv_head_config_fini(&c);
    /* Configured without "default": an unlisted name counts in the implicit one after them. */
    const char nodef[] = "fleet:\n  namespaces:\n    - name: a\n    - name: b\n";
    CHECK_RC_MSG(hv_head_config_parse("n.yaml", nodef, sizeof(nodef) - 1, &c, err, sizeof(err)),
                 HV_OK, err);
    CHECK_EQ(hv_head_config_ns_index(&c, "b"), 1);
    CHECK_EQ(hv_head_config_ns_index(&c, "z"), 2);
    CHECK_STR(hv_head_config_ns_name(&c, 2), "default");
    CHECK_STR(hv_head_config_ns_name(&c, 0), "a");
    hv_head_config_fini(&c);
    static const struct {
        const char *text, *where, *words[3];
    } bad[] = {
        {"fleet:\n  namespaces: 3\n", "2:15", {"fleet.namespaces", "expected a list", "scalar"}},
        {"fleet:\n  namespaces:\n    - weight: 2\n",
         "3:7",
         {"fleet.namespaces[0]", "'name'", "required"}},
        {"fleet:\n  namespaces:\n    - {name: a}\n    - {name: a}\n",
         "4:14",
         {"fleet.namespaces[1].name", "'a'", "twice"}},
        {"fleet:\n  namespaces:\n    - {name: -x}\n",
         "3:14",
         {"fleet.namespaces[0].name", "'-x'", "letters"}},
        {"fleet:\n  namespaces:\n    - {name: a, weight: 0}\n",
         "3:25",
         {"fleet.namespaces[0].weight", "'0'", "1..1000"}},
        {"fleet:\n  namespaces:\n    - {name: a, quota: {slots: many}}\n",
         "3:32",
         {"fleet.namespaces[0].quota.slots", "'many'", "not an integer"}},
        {"fleet:\n  namespaces:\n    - {name: a, quota: {memory: 1000}}\n",
         "3:33",
         {"fleet.namespaces[0].quota.memory", "'1000'", "MiB"}},
        {"fleet:\n  namespaces:\n    - {name: a, borrow: {cpus: 1}}\n",
         "3:26",
         {"fleet.namespaces[0].borrow.cpus", "unknown key", "slots, gpus, memory"}},
        {"fleet:\n  namespaces:\n    - {name: a, priority: 1001}\n",
         "3:27",
         {"fleet.namespaces[0].priority", "'1001'", "-1000 to 1000"}},
        {"fleet:\n  namespaces:\n    - {name: a, color: red}\n",
         "3:17",
         {"fleet.namespaces[0].color", "unknown key", "weight"}},
        {"fleet:\n  namespaces:\n    - {name: a, quota: 4}\n",
         "3:24",
         {"fleet.namespaces[0].quota", "expected a mapping", "scalar"}},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK_RC_MSG(
            hv_head_config_parse("n.yaml", bad[i].text, strlen(bad[i].text), &c, err, sizeof(err)),
            HV_EINVAL, bad[i].text);
        char where[32];
        snprintf(where, sizeof(where), "n.yaml:%s:", bad[i].where);
        CHECK_HAS(err, where);
        for (int w = 0; w < 3; w++) {
            CHECK_HAS(err, bad[i].words[w]);
        }
    }
}

static const hv_check_case_t cases[] = {
    {"namespaces", test_namespaces},
    {"parse_buffer", test_parse_buffer},
    {"defaults", test_defaults},
    {"full", test_full},
    {"minimal", test_minimal},
    {"autoscaler", test_autoscaler},
    {"empty", test_empty},
    {"examples", test_examples},
    {"bad_files", test_bad_files},
    {"missing_file", test_missing_file},
    {"token_file", test_token_file},
    {"token_generate", test_token_generate},
    {"oom", test_oom},
    {"insecure", test_insecure},
    {"tls", test_tls},
    {"yaml_words", test_yaml_words},
    {"metrics", test_metrics},
    {"durable", test_durable},
    {"limits", test_limits},
    {"history", test_history},
};

int main(int argc, char **argv) {
    int rc = hv_check_main(cases, sizeof(cases) / sizeof(cases[0]), argc, argv, NULL, NULL);
    remove_certs();
    return rc;
}
