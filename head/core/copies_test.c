/*
 * copies_test: the durable tier's pure rules, table by table: which copy a resume loads (head or
 * durable, the newest that is there), when a durable write is due, and the commands' templates
 * (placeholders, quoting, errors). `copies_test <case>` runs one case.
 */
#include "copies.h"
#include "hv_check.h"

#include <stdint.h>

#define NOCOPY                                                                                     \
    { 0, 0, 0 }

static void case_choose(void) {
    static const struct {
        const char *name;
        hv_copy_ref_t head, durable;
        hv_copy_tier_t want;
    } t[] = {
        {"none", NOCOPY, NOCOPY, HV_COPY_TIER_NONE},
        {"head only", {2, 10, 0}, NOCOPY, HV_COPY_TIER_HEAD},
        {"durable only", NOCOPY, {2, 10, 0}, HV_COPY_TIER_DURABLE},
        {"same commit: head (no download)", {2, 10, 0}, {2, 10, 0}, HV_COPY_TIER_HEAD},
        {"head newer commit", {2, 12, 0}, {2, 10, 0}, HV_COPY_TIER_HEAD},
        {"head newer generation", {3, 1, 0}, {2, 10, 0}, HV_COPY_TIER_HEAD},
        {"durable newer (head restored older)", {2, 8, 0}, {2, 10, 0}, HV_COPY_TIER_DURABLE},
        {"head file gone", {2, 12, 1}, {2, 10, 0}, HV_COPY_TIER_DURABLE},
        {"head file gone, no durable", {2, 12, 1}, NOCOPY, HV_COPY_TIER_NONE},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        hv_copy_tier_t got = hv_copy_choose(&t[i].head, &t[i].durable);
        if (got != t[i].want) {
            fprintf(stderr, "case '%s': got %s, want %s\n", t[i].name, hv_copy_tier_name(got),
                    hv_copy_tier_name(t[i].want));
        }
        CHECK_EQ(got, t[i].want);
    }
    CHECK_STR(hv_copy_tier_name(HV_COPY_TIER_DURABLE), "durable");
}

static void case_due(void) {
    static const struct {
        const char *name;
        int configured, busy;
        hv_copy_ref_t head, durable;
        uint64_t since_ms;
        int want;
    } t[] = {
        {"not configured", 0, 0, {1, 5, 0}, NOCOPY, UINT64_MAX, 0},
        {"no head copy", 1, 0, NOCOPY, NOCOPY, UINT64_MAX, 0},
        {"first copy at once", 1, 0, {1, 5, 0}, NOCOPY, 0, 1},
        {"one in flight", 1, 1, {1, 5, 0}, NOCOPY, UINT64_MAX, 0},
        {"already durable", 1, 0, {1, 5, 0}, {1, 5, 0}, UINT64_MAX, 0},
        {"durable newer", 1, 0, {1, 4, 0}, {1, 5, 0}, UINT64_MAX, 0},
        {"newer, interval not over", 1, 0, {1, 9, 0}, {1, 5, 0}, 59999, 0},
        {"newer, interval over", 1, 0, {1, 9, 0}, {1, 5, 0}, 60000, 1},
        {"head file gone", 1, 0, {1, 9, 1}, {1, 5, 0}, UINT64_MAX, 0},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        int got = hv_durable_due(t[i].configured, t[i].busy, &t[i].head, &t[i].durable,
                                 t[i].since_ms, 60000);
        if (got != t[i].want) {
            fprintf(stderr, "case '%s'\n", t[i].name);
        }
        CHECK_EQ(got, t[i].want);
    }
}

static void case_expand(void) {
    static const struct {
        const char *tmpl;
        hv_err rc;
        const char *want; /* the command, or a part of the error */
    } t[] = {
        {"cp {file} /b/{key}", HV_OK, "cp '/s/a b.bin' /b/'k1'"},
        {"up --job {job} --sum {sha256} {{x}", HV_OK, "up --job '7' --sum 'ab' {x}"},
        {"echo {file}{file}", HV_OK, "echo '/s/a b.bin''/s/a b.bin'"},
        {"q {key}", HV_OK, "q 'k1'"},
        {"bad {bucket}", HV_ENOTFOUND, "unknown placeholder '{bucket}'"},
        {"open {file", HV_ENOTFOUND, "unknown placeholder '{file'"},
    };
    hv_durable_vars_t v = {.file = "/s/a b.bin", .key = "k1", .job = "7", .sha256 = "ab"};
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        char out[256], err[256] = "";
        hv_err rc = hv_durable_expand(t[i].tmpl, &v, out, sizeof(out), err, sizeof(err));
        CHECK_RC_MSG(rc, t[i].rc, err);
        if (rc == HV_OK) {
            CHECK_STR(out, t[i].want);
        } else {
            CHECK(strstr(err, t[i].want) != NULL);
        }
    }
    /* A quote in a value cannot end the quoting. */
    hv_durable_vars_t q = {.file = "x'; rm -rf /; '"};
    char out[256], err[256];
    CHECK_EQ(hv_durable_expand("up {file}", &q, out, sizeof(out), err, sizeof(err)), HV_OK);
    CHECK_STR(out, "up 'x'\\''; rm -rf /; '\\'''");
    /* Too long. */
    CHECK_EQ(hv_durable_expand("0123456789 {file}", &v, out, 12, err, sizeof(err)), HV_ETOOBIG);
    /* Template check only. */
    CHECK_EQ(hv_durable_expand("cp {file} {key}", NULL, out, sizeof(out), err, sizeof(err)), HV_OK);
    CHECK_STR(out, "cp '' ''");
}

static void case_peer_local(void) {
    static const struct {
        const char *peer;
        int want;
    } t[] = {
        {"ipv4:127.0.0.1:4242", 1},
        {"ipv4:127.1.2.3:1", 1},
        {"ipv6:[::1]:4242", 1},
        {"ipv6:[::ffff:127.0.0.1]:9", 1},
        {"unix:/run/hv.sock", 1},
        {"ipv4:10.0.0.7:4242", 0},
        {"ipv6:[fe80::1]:4242", 0},
        {"ipv4:128.0.0.1:1", 0},
        {"", 0},
        {NULL, 0},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        CHECK_EQ(hv_copy_peer_local(t[i].peer), t[i].want);
    }
}

int main(int argc, char **argv) {
    static const hv_check_case_t cases[] = {
        {"choose", case_choose},
        {"due", case_due},
        {"expand", case_expand},
        {"peer_local", case_peer_local},
    };
    return hv_check_main(cases, sizeof(cases) / sizeof(cases[0]), argc, argv, NULL, NULL);
}
