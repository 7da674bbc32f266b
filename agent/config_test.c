/*
 * config_test: hvagent's command line. Checks the defaults a user gets (name, slots from GPUs
 * or CPUs, work dir, pid file, addresses for a loopback head, token from HV_TOKEN), every flag in
 * both "--flag value" and "--flag=value" forms, and that each bad input is refused with a message
 * naming the flag and the value. `config_test <case>` runs one case.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_test.h"
#include "util.h"

#define ARGV(...)                                                                                  \
    (char *[]) { "hvagent", __VA_ARGS__, NULL }

static int argc_of(char **argv) {
    int n = 0;
    while (argv[n] != NULL) {
        n++;
    }
    return n;
}

/* Parses and expects success. */
static void parse_ok(char **argv, hv_agent_config_t *cfg) {
    char err[512];
    hv_err rc = hv_agent_config_parse(argc_of(argv), argv, cfg, err, sizeof(err));
    if (rc != HV_OK) {
        fprintf(stderr, "  unexpected error: %s (%s)\n", err, hv_errname(rc));
        hv_check_failures++;
    }
}

/* Parses, expects HV_EINVAL and a message containing want. */
static void parse_bad(char **argv, const char *want) {
    hv_agent_config_t cfg;
    char err[512];
    hv_err rc = hv_agent_config_parse(argc_of(argv), argv, &cfg, err, sizeof(err));
    CHECK_RC(rc, HV_EINVAL);
    if (strstr(err, want) == NULL) {
        fprintf(stderr, "  message \"%s\" does not contain \"%s\"\n", err, want);
        hv_check_failures++;
    }
    hv_agent_config_fini(&cfg);
}

static void case_defaults(void) {
    unsetenv("HV_AGENT_GPUS");
    setenv("HV_TOKEN", "from-env", 1);
    hv_agent_config_t cfg;
    parse_ok(ARGV("join", "127.0.0.1:7000"), &cfg);
    CHECK_EQ(cfg.cmd, HV_AGENT_CMD_JOIN);
    CHECK_STR(cfg.head, "127.0.0.1:7000");
    CHECK_STR(cfg.head_host, "127.0.0.1");
    CHECK_EQ(cfg.head_port, 7000);
    CHECK_STR(cfg.token, "from-env");
    CHECK(cfg.name[0] != '\0');
    CHECK_EQ(cfg.cpus, hv_agent_cpu_count());
    CHECK_EQ(cfg.slots, cfg.gpus > 0 ? cfg.gpus : cfg.cpus);
    CHECK_EQ(cfg.orphan_kill, 1);
    CHECK_EQ(cfg.connect_timeout_ms, 30000);
    CHECK_EQ(cfg.drain_deadline_ms, 120000);
    CHECK_EQ(cfg.cache_max_mb, 4096);
    CHECK_EQ(cfg.copy_mb, hv_agent_copy_mb_default(cfg.memory_mb));
    CHECK_EQ(cfg.daemon, 0);
    char cwd[PATH_MAX], want[PATH_MAX + 300];
    CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
    snprintf(want, sizeof(want), "%s/hv-agent-%s", cwd, cfg.name);
    CHECK_STR(cfg.work_dir, want);
    snprintf(want, sizeof(want), "%s/hv-agent-%s/hvagent.pid", cwd, cfg.name);
    CHECK_STR(cfg.pid_file, want);
    CHECK_EQ(cfg.naddrs, 1); // loopback head
    CHECK_STR(cfg.addrs[0], "127.0.0.1");
    hv_agent_config_fini(&cfg);
    unsetenv("HV_TOKEN");

    setenv("HV_AGENT_GPUS", "4", 1);
    parse_ok(ARGV("join", "localhost:7000"), &cfg);
    CHECK_EQ(cfg.gpus, 4);
    CHECK_EQ(cfg.slots, 4);
    CHECK_STR(cfg.token, "");
    hv_agent_config_fini(&cfg);
    unsetenv("HV_AGENT_GPUS");
}

static void case_all_flags(void) {
    hv_agent_config_t cfg;
    char tokfile[] = "/tmp/hv-config-test-XXXXXX";
    int fd = mkstemp(tokfile);
    CHECK(fd >= 0);
    CHECK_EQ(write(fd, "file-token\n", 11), 11);
    close(fd);
    parse_ok(ARGV("join", "--token-file", tokfile, "--slots=3", "--name", "gpu-7.a_b", "--labels",
                  "zone=z1,tier=spot", "--labels=zone=z2", "--work-dir", "/srv/hv", "--addr",
                  "10.0.0.5", "--addr=fe80::1", "--preemptible", "--instance-id", "i-123",
                  "--orphan-policy=keep", "--connect-timeout", "5", "--drain-deadline", "25",
                  "--cache-max-mb", "512", "--daemon", "--pid-file", "run/a.pid",
                  "--log-file=/var/log/hvagent.log", "--log-level", "debug", "--insecure",
                  "head.example:7001"),
             &cfg);
    CHECK_STR(cfg.token, "file-token");
    CHECK_EQ(cfg.slots, 3);
    CHECK_STR(cfg.name, "gpu-7.a_b");
    CHECK_EQ(cfg.nlabels, 2);
    CHECK_STR(cfg.label_keys[0], "zone");
    CHECK_STR(cfg.label_values[0], "z2");
    CHECK_STR(cfg.label_keys[1], "tier");
    CHECK_STR(cfg.label_values[1], "spot");
    CHECK_STR(cfg.work_dir, "/srv/hv");
    CHECK_EQ(cfg.naddrs, 2);
    CHECK_STR(cfg.addrs[0], "10.0.0.5");
    CHECK_STR(cfg.addrs[1], "fe80::1");
    CHECK_EQ(cfg.preemptible, 1);
    CHECK_STR(cfg.instance_id, "i-123");
    CHECK_EQ(cfg.orphan_kill, 0);
    CHECK_EQ(cfg.connect_timeout_ms, 5000);
    CHECK_EQ(cfg.drain_deadline_ms, 25000);
    CHECK_EQ(cfg.cache_max_mb, 512);
    CHECK_EQ(cfg.daemon, 1);
    char cwd[PATH_MAX], want[PATH_MAX + 64];
    CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
    snprintf(want, sizeof(want), "%s/run/a.pid", cwd);
    CHECK_STR(cfg.pid_file, want);
    CHECK_STR(cfg.log_file, "/var/log/hvagent.log");
    CHECK_EQ(cfg.log_level_set, 1);
    CHECK_EQ(cfg.log_level, HV_LOG_DEBUG);
    CHECK_STR(cfg.head_host, "head.example");
    hv_agent_config_fini(&cfg);
    unlink(tokfile);
    // 0: SIGTERM stops at once, as before drains existed.
    parse_ok(ARGV("join", "h:1", "--insecure", "--drain-deadline=0"), &cfg);
    CHECK_EQ(cfg.drain_deadline_ms, 0);
    hv_agent_config_fini(&cfg);
    parse_ok(ARGV("join", "h:1", "--insecure", "--drain-deadline", "86400"), &cfg);
    CHECK_EQ(cfg.drain_deadline_ms, 86400000u);
    hv_agent_config_fini(&cfg);
    // --cache-max-mb: 0 is unbounded; the largest bound still fits in bytes.
    parse_ok(ARGV("join", "h:1", "--insecure", "--cache-max-mb=0"), &cfg);
    CHECK_EQ(cfg.cache_max_mb, 0);
    hv_agent_config_fini(&cfg);
    parse_ok(ARGV("join", "h:1", "--insecure", "--cache-max-mb", "1073741824"), &cfg);
    CHECK(cfg.cache_max_mb == HV_AGENT_CACHE_MAX_MB_MAX);
    CHECK((cfg.cache_max_mb << 20) >> 20 == cfg.cache_max_mb);
    hv_agent_config_fini(&cfg);
    // --copy-memory: given, it stands whatever --memory-mb says; 0 keeps no peer's copy.
    parse_ok(ARGV("join", "h:1", "--insecure", "--memory-mb=64000", "--copy-memory=300"), &cfg);
    CHECK_EQ(cfg.copy_mb, 300);
    hv_agent_config_fini(&cfg);
    parse_ok(ARGV("join", "h:1", "--insecure", "--copy-memory", "0"), &cfg);
    CHECK_EQ(cfg.copy_mb, 0);
    hv_agent_config_fini(&cfg);
    // Not given: a quarter of --memory-mb, at most 4096.
    parse_ok(ARGV("join", "h:1", "--insecure", "--memory-mb=2000"), &cfg);
    CHECK_EQ(cfg.copy_mb, 500);
    hv_agent_config_fini(&cfg);
}

/* --copy-memory's default (issue 28 §3): a quarter of the node's memory, at most 4096 MiB, at
 * least 1; 1024 when the memory is unknown. */
static void case_copy_default(void) {
    static const struct {
        uint64_t memory_mb, want;
    } t[] = {{0, 1024}, {1, 1}, {3, 1}, {4, 1}, {2000, 500}, {16384, 4096}, {1 << 20, 4096}};
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        CHECK_EQ(hv_agent_copy_mb_default(t[i].memory_mb), t[i].want);
    }
}

static void case_stop_drain(void) {
    hv_agent_config_t cfg;
    parse_ok(ARGV("stop", "--work-dir", "/srv/hv", "--timeout", "7"), &cfg);
    CHECK_EQ(cfg.cmd, HV_AGENT_CMD_STOP);
    CHECK_STR(cfg.pid_file, "/srv/hv/hvagent.pid");
    CHECK_EQ(cfg.stop_timeout_ms, 7000);
    hv_agent_config_fini(&cfg);
    parse_ok(ARGV("drain", "--pid-file", "/x/y.pid"), &cfg);
    CHECK_EQ(cfg.cmd, HV_AGENT_CMD_DRAIN);
    CHECK_STR(cfg.pid_file, "/x/y.pid");
    hv_agent_config_fini(&cfg);
    parse_ok(ARGV("stop", "--name", "n1"), &cfg);
    char cwd[PATH_MAX], want[PATH_MAX + 64];
    CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
    snprintf(want, sizeof(want), "%s/hv-agent-n1/hvagent.pid", cwd);
    CHECK_STR(cfg.pid_file, want);
    hv_agent_config_fini(&cfg);
    parse_ok(ARGV("join", "--help"), &cfg);
    CHECK_EQ(cfg.cmd, HV_AGENT_CMD_HELP);
    hv_agent_config_fini(&cfg);
    parse_ok(ARGV("--version"), &cfg);
    CHECK_EQ(cfg.cmd, HV_AGENT_CMD_VERSION);
    hv_agent_config_fini(&cfg);
}

static void case_errors(void) {
    char *none[] = {"hvagent", NULL};
    parse_bad(none, "missing command");
    parse_bad(ARGV("run"), "unknown command \"run\"");
    parse_bad(ARGV("join"), "needs the head address");
    parse_bad(ARGV("join", "head"), "bad head address \"head\"");
    parse_bad(ARGV("join", "head:99999"), "bad head address");
    parse_bad(ARGV("join", "head:0"), "bad head address");
    parse_bad(ARGV("join", "h:1", "h:2"), "unexpected argument \"h:2\"");
    parse_bad(ARGV("join", "h:1", "--slots", "abc"), "--slots \"abc\"");
    parse_bad(ARGV("join", "h:1", "--slots", "0"), "--slots \"0\"");
    parse_bad(ARGV("join", "h:1", "--slots"), "--slots needs a value");
    parse_bad(ARGV("join", "h:1", "--copy-memory", "lots"),
              "--copy-memory \"lots\": want a number");
    parse_bad(ARGV("join", "h:1", "--labels", "novalue"), "--labels: \"novalue\"");
    parse_bad(ARGV("join", "h:1", "--labels", "=v"), "--labels: \"=v\"");
    parse_bad(ARGV("join", "h:1", "--labels", "zone=a,hv.run_as=root"),
              "--labels: hv.run_as is the agent's own label");
    parse_bad(ARGV("join", "h:1", "--addr", "10.0.0.300"), "--addr \"10.0.0.300\"");
    parse_bad(ARGV("join", "h:1", "--orphan-policy", "maybe"), "--orphan-policy \"maybe\"");
    parse_bad(ARGV("join", "h:1", "--token", "a", "--token-file", "/etc/hostname"), "not both");
    parse_bad(ARGV("join", "h:1", "--token-file", "/nonexistent/tok"),
              "--token-file /nonexistent/tok");
    parse_bad(ARGV("join", "h:1", "--frobnicate"), "unknown option '--frobnicate'");
    parse_bad(ARGV("join", "h:1", "--daemon=yes"), "--daemon takes no value");
    /* A single-dash word is an option hvagent does not know, not the head's address (it was
     * reported as 'bad head address "-x"' before the common option parser). */
    parse_bad(ARGV("join", "-x"), "unknown option '-x' for 'hvagent join'");
    parse_bad(ARGV("join", "h:1", "-s", "4"), "unknown option '-s' for 'hvagent join'");
    parse_bad(ARGV("join", "h:1", "--name", "a/b"), "--name \"a/b\"");
    parse_bad(ARGV("join", "h:1", "--name", ".."), "--name \"..\"");
    parse_bad(ARGV("join", "h:1", "--log-level", "loud"), "--log-level \"loud\"");
    parse_bad(ARGV("join", "h:1", "--connect-timeout", "0"), "--connect-timeout \"0\"");
    parse_bad(ARGV("join", "h:1", "--drain-deadline", "2m"),
              "--drain-deadline \"2m\": want seconds from 0 to 86400");
    parse_bad(ARGV("join", "h:1", "--drain-deadline", "-1"), "--drain-deadline \"-1\"");
    parse_bad(ARGV("join", "h:1", "--drain-deadline", "86401"), "--drain-deadline \"86401\"");
    parse_bad(ARGV("join", "h:1", "--drain-deadline"), "--drain-deadline needs a value");
    parse_bad(ARGV("join", "h:1", "--cache-max-mb", "-1"),
              "--cache-max-mb \"-1\": want a number of MiB from 0 to 1073741824 (0: unbounded)");
    parse_bad(ARGV("join", "h:1", "--cache-max-mb", "4G"), "--cache-max-mb \"4G\"");
    parse_bad(ARGV("join", "h:1", "--cache-max-mb", ""), "--cache-max-mb \"\"");
    parse_bad(ARGV("join", "h:1", "--cache-max-mb", " 5"), "--cache-max-mb \" 5\"");
    parse_bad(ARGV("join", "h:1", "--cache-max-mb", "1073741825"), "--cache-max-mb \"1073741825\"");
    parse_bad(ARGV("join", "h:1", "--cache-max-mb", "99999999999999999999999"),
              "--cache-max-mb \"99999999999999999999999\"");
    parse_bad(ARGV("join", "h:1", "--cache-max-mb"), "--cache-max-mb needs a value");
    parse_bad(ARGV("stop", "--cache-max-mb", "5"),
              "unknown option '--cache-max-mb' for 'hvagent stop'");
    parse_bad(ARGV("drain", "--drain-deadline", "5"),
              "unknown option '--drain-deadline' for 'hvagent drain'");
    parse_bad(ARGV("stop", "--slots", "2"), "unknown option '--slots' for 'hvagent stop'");
    parse_bad(ARGV("stop", "h:1"), "unexpected argument");
}

static void case_host_facts(void) {
    CHECK(hv_agent_host_is_loopback("localhost"));
    CHECK(hv_agent_host_is_loopback("127.0.0.1"));
    CHECK(hv_agent_host_is_loopback("127.1.2.3"));
    CHECK(hv_agent_host_is_loopback("::1"));
    CHECK(!hv_agent_host_is_loopback("10.0.0.1"));
    CHECK(!hv_agent_host_is_loopback("head.example"));
    CHECK(hv_agent_cpu_count() >= 1);
    setenv("HV_AGENT_GPUS", "8", 1);
    CHECK_EQ(hv_agent_gpu_count(), 8);
    unsetenv("HV_AGENT_GPUS");
    // A non-loopback head: every non-loopback IPv4 of this host, or 127.0.0.1 if there is none.
    hv_agent_config_t cfg;
    parse_ok(ARGV("join", "192.0.2.1:7000", "--insecure"), &cfg);
    CHECK(cfg.naddrs >= 1);
    for (size_t i = 0; i < cfg.naddrs; i++) {
        if (cfg.naddrs > 1) {
            CHECK(!hv_agent_host_is_loopback(cfg.addrs[i]));
        }
        fprintf(stderr, "  default addr: %s\n", cfg.addrs[i]);
    }
    hv_agent_config_fini(&cfg);
}

/* TLS flags and the plain-text rule: a head beyond loopback needs --ca or --insecure. */
static void case_tls(void) {
    hv_agent_config_t cfg;
    char cwd[PATH_MAX], want[PATH_MAX + 64];
    CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
    unsetenv("HV_CA_FILE");
    unsetenv("HV_INSECURE");
    parse_ok(ARGV("join", "10.0.0.1:7000", "--ca", "tls/ca.pem", "--cert=/etc/hv/node.pem", "--key",
                  "/etc/hv/node.key"),
             &cfg);
    snprintf(want, sizeof(want), "%s/tls/ca.pem", cwd); // workers run elsewhere: absolute
    CHECK_STR(cfg.ca_file, want);
    CHECK_STR(cfg.cert_file, "/etc/hv/node.pem");
    CHECK_STR(cfg.key_file, "/etc/hv/node.key");
    CHECK_EQ(cfg.insecure, 0);
    hv_agent_config_fini(&cfg);
    parse_ok(ARGV("join", "127.0.0.1:7000"), &cfg); // loopback: plain text is the default
    CHECK_STR(cfg.ca_file, "");
    hv_agent_config_fini(&cfg);
    parse_bad(ARGV("join", "10.0.0.1:7000"), "refusing plain text to the head at 10.0.0.1:7000");
    parse_bad(ARGV("join", "head.example:7000"), "--insecure");
    parse_bad(ARGV("join", "10.0.0.1:7000", "--ca", "/ca.pem", "--cert", "/c.pem"),
              "--cert and --key go together");
    parse_bad(ARGV("join", "10.0.0.1:7000", "--key", "/k.pem", "--cert", "/c.pem"), "need --ca");
    parse_bad(ARGV("join", "10.0.0.1:7000", "--ca", ""), "--ca: bad path");
    parse_bad(ARGV("stop", "--ca", "/ca.pem"), "unknown option '--ca' for 'hvagent stop'");
    setenv("HV_CA_FILE", "/etc/hv/ca.pem", 1);
    parse_ok(ARGV("join", "10.0.0.1:7000"), &cfg);
    CHECK_STR(cfg.ca_file, "/etc/hv/ca.pem");
    hv_agent_config_fini(&cfg);
    parse_ok(ARGV("join", "10.0.0.1:7000", "--ca", "/other.pem"), &cfg); // the flag wins
    CHECK_STR(cfg.ca_file, "/other.pem");
    hv_agent_config_fini(&cfg);
    unsetenv("HV_CA_FILE");
    setenv("HV_INSECURE", "1", 1);
    parse_ok(ARGV("join", "10.0.0.1:7000"), &cfg);
    CHECK_EQ(cfg.insecure, 1);
    CHECK_STR(cfg.ca_file, "");
    hv_agent_config_fini(&cfg);
    unsetenv("HV_INSECURE");
}

static const test_case_t cases[] = {
    {"defaults", case_defaults},         {"all_flags", case_all_flags},
    {"stop_drain", case_stop_drain},     {"errors", case_errors},
    {"host_facts", case_host_facts},     {"tls", case_tls},
    {"copy_default", case_copy_default}, {NULL, NULL},
};

int main(int argc, char **argv) { return test_run(cases, argc, argv); }
