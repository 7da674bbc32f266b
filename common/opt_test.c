/*
 * opt_test: the one option parser of hv's tools, table by table: each command line is read to
 * the end and what the parser handed back is written as a trace ("opt=value(num)", "arg",
 * "rest@N", "fault:why(arg)") compared with the expected one.
 */
#include "opt.h"

#include <stdio.h>
#include <string.h>

#include "hv_check.h"

enum { CMD_A = 1u, CMD_B = 2u };

static const hv_opt_t opts[] = {
    {"json", 0, HV_OPT_FLAG, 0, 0, 0, 1, NULL, "  --json  one JSON document\n"},
    {"follow", 'f', HV_OPT_FLAG, 0, 0, CMD_A, 2, NULL, NULL},
    {"limit", 0, HV_OPT_UINT, 1, 100, 0, 3, "--limit '%s': from 1 to 100", "  --limit N\n"},
    {"np", 0, HV_OPT_UINT, 0, 9, 0, 4, NULL, NULL},
    {NULL, 0, HV_OPT_HEADING, 0, 0, CMD_B, 0, NULL, "b's options:\n"},
    {"ttl", 0, HV_OPT_DURATION, 1, 3650ull * 86400000ull, CMD_B, 5, NULL, "  --ttl D\n"},
    {"who", 0, HV_OPT_TEXT, 1, 4, 0, 6, NULL, NULL},
    {"env", 'e', HV_OPT_TEXT, 0, 0, 0, 7, NULL, NULL},
};
#define NOPTS (sizeof(opts) / sizeof(opts[0]))

/* Splits line at spaces into argv (argv[0] = "prog"), runs it and writes the trace into out. */
static void trace(const char *line, unsigned flags, uint32_t cmd, char *out, size_t len) {
    static char buf[512];
    char *argv[32] = {"prog"};
    int argc = 1;
    snprintf(buf, sizeof(buf), "%s", line);
    for (char *save = NULL, *w = strtok_r(buf, " ", &save); w != NULL && argc < 32;
         w = strtok_r(NULL, " ", &save)) {
        argv[argc++] = strcmp(w, "''") == 0 ? "" : w;
    }
    hv_opt_iter_t it;
    hv_opt_got_t g;
    hv_opt_init(&it, opts, NOPTS, flags, cmd, argc, argv, 1);
    size_t used = 0;
    out[0] = '\0';
    for (int steps = 0; steps < 40; steps++) {
        hv_opt_res r = hv_opt_next(&it, &g);
        char one[160];
        char msg[160];
        if (r == HV_OPT_END) {
            break;
        }
        switch (r) {
        case HV_OPT_OPTION:
            snprintf(one, sizeof(one), "%s%s%s(%llu)", g.opt->name, g.value ? "=" : "",
                     g.value ? g.value : "", (unsigned long long)g.num);
            break;
        case HV_OPT_ARG:
            snprintf(one, sizeof(one), "%s", g.arg);
            break;
        case HV_OPT_REST:
            snprintf(one, sizeof(one), "rest@%d", g.index);
            break;
        default:
            snprintf(one, sizeof(one), "fault:%s", hv_opt_fault_msg(&g, "b", msg, sizeof(msg)));
            break;
        }
        used += (size_t)snprintf(out + used, len - used, "%s%s", used ? " " : "", one);
        if (r == HV_OPT_REST) {
            CHECK_EQ(hv_opt_next(&it, &g), HV_OPT_END);
            break;
        }
    }
}

static void case_spellings(void) {
    static const struct {
        const char *line;
        unsigned flags;
        uint32_t cmd;
        const char *want;
    } rows[] = {
        {"--json a --limit 5 b", 0, 0, "json(0) a limit=5(5) b"},
        {"--limit=7 -f -e K=V -e=X=Y", 0, 0, "limit=7(7) follow(0) env=K=V(0) env=X=Y(0)"},
        {"- --who ab", 0, 0, "- who=ab(0)"},
        {"-json", 0, 0, "fault:unknown option '-json'"},
        {"-json -np 3", HV_OPT_ONE_DASH, 0, "json(0) np=3(3)"},
        {"--e x", 0, 0, "fault:unknown option '--e' x"},
        {"--bogus=1 --json", 0, 0, "fault:unknown option '--bogus=1' json(0)"},
        {"--json=1", 0, 0, "fault:option '--json' takes no value"},
        {"--limit", 0, 0, "fault:option '--limit' needs a value"},
        {"--limit 0", 0, 0, "fault:--limit '0': from 1 to 100"},
        {"--np 10", 0, 0, "fault:--np '10': expected a number from 0 to 9"},
        {"--who ''", 0, 0, "fault:--who: expected 1 to 4 characters"},
        {"--who abcde", 0, 0, "fault:--who: expected 1 to 4 characters"},
        {"--limit -f", 0, 0, "fault:--limit '-f': from 1 to 100"},
        {"--=x --", 0, 0, "fault:unknown option '--=x' fault:unknown option '--'"},
        {"--json -- a b", HV_OPT_DASHDASH, 0, "json(0) rest@3"},
        {"--json --", HV_OPT_DASHDASH, 0, "json(0) rest@3"},
        {"-np 2 prog -np 3", HV_OPT_ONE_DASH | HV_OPT_FIRST_ARG, 0, "np=2(2) rest@3"},
        {"-np 2", HV_OPT_FIRST_ARG, 0, "fault:unknown option '-np' rest@2"},
        {"--follow --ttl 1s", 0, CMD_B,
         "fault:option '--follow' does not go with 'b' ttl=1s(1000)"},
        {"--follow --ttl 1s", 0, 0, "follow(0) ttl=1s(1000)"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        char got[1024];
        trace(rows[i].line, rows[i].flags, rows[i].cmd, got, sizeof(got));
        CHECK_STR(got, rows[i].want);
    }
}

static void case_durations(void) {
    static const struct {
        const char *text;
        int ok;
        uint64_t ms;
    } rows[] = {
        {"30", 1, 30000},     {"30s", 1, 30000},
        {"10m", 1, 600000},   {"2h", 1, 7200000},
        {"7d", 1, 604800000}, {"3650d", 1, 3650ull * 86400000ull},
        {"3651d", 0, 0},      {"0s", 0, 0},
        {"5x", 0, 0},         {"", 0, 0},
        {"s", 0, 0},          {"5ds", 0, 0},
        {"-1s", 0, 0},        {"99999999999999999999999d", 0, 0},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        uint64_t ms = 42;
        hv_err rc = hv_opt_parse_duration(rows[i].text, 1, 3650ull * 86400000ull, &ms);
        CHECK_EQ(rc == HV_OK, rows[i].ok);
        CHECK_EQ(ms, rows[i].ok ? rows[i].ms : 42);
    }
}

static void case_help(void) {
    char buf[512] = "";
    FILE *f = fmemopen(buf, sizeof(buf), "w");
    CHECK(f != NULL);
    if (f == NULL) {
        return;
    }
    hv_opt_help(f, opts, NOPTS, CMD_A);
    fputs("|", f);
    hv_opt_help(f, opts, NOPTS, CMD_B);
    fclose(f);
    CHECK_STR(buf, "  --json  one JSON document\n  --limit N\n|  --json  one JSON document\n"
                   "  --limit N\nb's options:\n  --ttl D\n");
    CHECK(hv_opt_find(opts, NOPTS, "ttl") == &opts[5]);
    CHECK(hv_opt_find(opts, NOPTS, "tt") == NULL);
}

HV_CHECK_MAIN(NULL, NULL, {"spellings", case_spellings}, {"durations", case_durations},
              {"help", case_help})
