/*
 * copies_test: the durable tier's pure rules, table by table: which copy a resume loads (head or
 * durable, the newest that is there), when a durable write is due, the commands' templates
 * (placeholders, quoting, errors), the room a copy needs on the head's disk, and the copies kept
 * by peers (issue 28 §3): the keeper's choice, the zone label, the source a resume reads; when a
 * restore of the durable copy is due. `copies_test <case>` runs one case.
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

static void case_restore_due(void) {
    static const struct {
        const char *name;
        hv_copy_ref_t head, durable;
        uint32_t resume_gen;
        int want;
    } t[] = {
        {"never resumed", NOCOPY, {2, 10, 0}, 0, 0},
        {"resume from durable, round open", NOCOPY, {2, 10, 0}, 3, 1},
        /* the resumed round closed and a later one opened before the restore began (a tick
         * that missed the open round): the resumed members still wait for the copy */
        {"resumed round already closed", NOCOPY, {2, 10, 0}, 3, 1},
        {"head file gone", {2, 12, 1}, {2, 10, 0}, 3, 1},
        {"restored: head holds it", {2, 10, 0}, {2, 10, 0}, 3, 0},
        {"resumed members committed", {3, 2, 0}, {2, 10, 0}, 3, 0},
        {"durable written after the resume", {3, 1, 1}, {3, 1, 0}, 3, 0},
        {"no durable copy", NOCOPY, NOCOPY, 3, 0},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        int got = hv_durable_restore_due(&t[i].head, &t[i].durable, t[i].resume_gen);
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

/* A copy is counted whole, with what the copies in progress have still to write, and leaves
 * twice the logs' reserve free (the reserve at most a quarter of a small disk). */
static void case_room(void) {
    const uint64_t M = 1u << 20, G = (uint64_t)1 << 30;
    static const struct {
        const char *name;
        uint64_t fs, free, arriving, replaced, reserve, total;
        int want;
    } t[] = {
        {"big disk, room", 100 * G, 10 * G, 0, 0, 256 * M, 64 * M, 1},
        {"big disk: 576 MiB keeps the 512", 100 * G, 576 * M, 0, 0, 256 * M, 64 * M, 1},
        {"big disk: 575 MiB would leave 511", 100 * G, 575 * M, 0, 0, 256 * M, 64 * M, 0},
        {"small disk keeps half (2 x a quarter)", 200 * M, 199 * M, 0, 0, 256 * M, 40 * M, 1},
        {"one copy arriving", 200 * M, 199 * M, 40 * M, 0, 256 * M, 40 * M, 1},
        /* issue 24: the third of four copies at once; each saw 199 MiB at its first chunk */
        {"two copies arriving", 200 * M, 199 * M, 80 * M, 0, 256 * M, 40 * M, 0},
        {"arriving, partly written: just", 200 * M, 150 * M, 40 * M, 0, 256 * M, 10 * M, 1},
        {"arriving, partly written: short", 200 * M, 150 * M, 40 * M, 0, 256 * M, 11 * M, 0},
        {"its own part is replaced", 200 * M, 95 * M, 0, 20 * M, 256 * M, 15 * M, 1},
        {"300 MB disk stores a copy", 286 * M, 280 * M, 0, 0, 256 * M, 120 * M, 1},
        {"no reserve", 100 * G, 64 * M, 0, 0, 0, 64 * M, 1},
        {"no room for the copy itself", 100 * G, 5 * M, 0, 0, 0, 64 * M, 0},
        {"size unknown: the reserve as set", 0, 600 * M, 0, 0, 256 * M, 64 * M, 1},
        {"size unknown, short", 0, 500 * M, 0, 0, 256 * M, 64 * M, 0},
        {"absurd sizes do not wrap", 100 * G, UINT64_MAX, UINT64_MAX, 1, 0, 2, 0},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        hv_copy_disk_t d = {.fs_bytes = t[i].fs,
                            .free_bytes = t[i].free,
                            .arriving = t[i].arriving,
                            .replaced = t[i].replaced,
                            .reserve = t[i].reserve};
        int got = hv_copy_room(&d, t[i].total);
        if (got != t[i].want) {
            fprintf(stderr, "case '%s': got %d, want %d\n", t[i].name, got, t[i].want);
        }
        CHECK_EQ(got, t[i].want);
    }
    CHECK_EQ(hv_copy_keep_free(256 * M, 100 * G), 512 * M);
    CHECK_EQ(hv_copy_keep_free(256 * M, 200 * M), 100 * M);
    CHECK_EQ(hv_copy_keep_free(256 * M, 0), 512 * M);
    CHECK_EQ(hv_copy_keep_free(UINT64_MAX, 0), UINT64_MAX);
}

/* The keeper of a peer copy: never the sender's node, never one without room or not usable;
 * another zone first, then a node without a member, then the node that holds the copy already,
 * then the most free memory, then the lowest id. */
static void case_keeper(void) {
#define K(id, zone, usable, member, free, holds)                                                   \
    { id, zone, usable, member, free, holds }
    static const struct {
        const char *name;
        hv_keeper_cand_t c[4];
        size_t n;
        uint64_t sender;
        const char *zone;
        uint64_t size;
        int want; /* index, -1: none */
    } t[] = {
        {"no other node", {K(1, "", 1, 1, 100, 0)}, 1, 1, "", 10, -1},
        {"the other node", {K(1, "", 1, 1, 100, 0), K(2, "", 1, 1, 100, 0)}, 2, 1, "", 10, 1},
        {"not usable", {K(1, "", 1, 1, 100, 0), K(2, "", 0, 0, 100, 0)}, 2, 1, "", 10, -1},
        {"no room", {K(1, "", 1, 1, 100, 0), K(2, "", 1, 0, 9, 0)}, 2, 1, "", 10, -1},
        {"room exactly", {K(1, "", 1, 1, 100, 0), K(2, "", 1, 0, 10, 0)}, 2, 1, "", 10, 1},
        {"room with its own old copy", {K(2, "", 1, 0, 4, 6)}, 1, 1, "", 10, 0},
        {"another zone over no member",
         {K(2, "a", 1, 0, 100, 0), K(3, "b", 1, 1, 100, 0)},
         2,
         1,
         "a",
         10,
         1},
        {"no zone label counts as same zone",
         {K(2, "", 1, 0, 100, 0), K(3, "b", 1, 0, 100, 0)},
         2,
         1,
         "a",
         10,
         1},
        {"sender without zone: zones ignored",
         {K(2, "b", 1, 1, 100, 0), K(3, "c", 1, 0, 100, 0)},
         2,
         1,
         "",
         10,
         1},
        {"no member over holder",
         {K(2, "", 1, 1, 100, 5), K(3, "", 1, 0, 100, 0)},
         2,
         1,
         "",
         10,
         1},
        {"holder stays over more free",
         {K(2, "", 1, 0, 500, 0), K(3, "", 1, 0, 100, 5)},
         2,
         1,
         "",
         10,
         1},
        {"most free", {K(3, "", 1, 0, 100, 0), K(2, "", 1, 0, 200, 0)}, 2, 1, "", 10, 1},
        {"lowest id on a tie", {K(3, "", 1, 0, 100, 0), K(2, "", 1, 0, 100, 0)}, 2, 1, "", 10, 1},
        {"node 0 never", {K(0, "", 1, 0, 100, 0)}, 1, 1, "", 10, -1},
        {"sender's node never, even with room and another zone",
         {K(1, "b", 1, 0, 1000, 0), K(2, "a", 1, 1, 20, 0)},
         2,
         1,
         "a",
         10,
         1},
        {"free + holds overflow is room", {K(2, "", 1, 0, UINT64_MAX, 5)}, 1, 1, "", 10, 0},
    };
#undef K
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        int got = hv_copy_keeper_choose(t[i].c, t[i].n, t[i].sender, t[i].zone, t[i].size);
        if (got != t[i].want) {
            fprintf(stderr, "case '%s': got %d, want %d\n", t[i].name, got, t[i].want);
        }
        CHECK_EQ(got, t[i].want);
    }
    CHECK_EQ(hv_copy_keeper_choose(NULL, 0, 1, "", 10), -1);
}

static void case_label(void) {
    static const struct {
        const char *labels, *key;
        size_t outlen;
        const char *want;
    } t[] = {
        {"zone=a", "zone", 16, "a"},
        {"disk=ssd,zone=us-east-1a", "zone", 16, "us-east-1a"},
        {"zones=x,zone=b", "zone", 16, "b"},
        {"zone=b,disk=ssd", "zone", 16, "b"},
        {"disk=ssd", "zone", 16, ""},
        {"", "zone", 16, ""},
        {NULL, "zone", 16, ""},
        {"zone=", "zone", 16, ""},
        {"zone=toolongvalue", "zone", 8, ""},
        {"zone=1234567", "zone", 8, "1234567"},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        char out[32] = "junk";
        hv_copy_label(t[i].labels, t[i].key, out, t[i].outlen);
        CHECK_STR(out, t[i].want);
    }
}

static void case_source(void) {
    static const struct {
        const char *name;
        hv_copy_ref_t peer;
        int keeper_ok;
        hv_copy_ref_t head, durable;
        hv_copy_source_t want;
    } t[] = {
        {"none", NOCOPY, 1, NOCOPY, NOCOPY, HV_COPY_SOURCE_NONE},
        {"peer only", {2, 10, 0}, 1, NOCOPY, NOCOPY, HV_COPY_SOURCE_PEER},
        {"peer only, keeper gone", {2, 10, 0}, 0, NOCOPY, NOCOPY, HV_COPY_SOURCE_NONE},
        {"peer same as head: peer", {2, 10, 0}, 1, {2, 10, 0}, NOCOPY, HV_COPY_SOURCE_PEER},
        {"peer newer", {2, 12, 0}, 1, {2, 10, 0}, {2, 10, 0}, HV_COPY_SOURCE_PEER},
        {"head newer", {2, 8, 0}, 1, {2, 10, 0}, NOCOPY, HV_COPY_SOURCE_HEAD},
        {"keeper gone: head", {2, 12, 0}, 0, {2, 10, 0}, NOCOPY, HV_COPY_SOURCE_HEAD},
        {"keeper gone: durable", {2, 12, 0}, 0, NOCOPY, {2, 9, 0}, HV_COPY_SOURCE_DURABLE},
        {"durable newer than peer", {2, 8, 0}, 1, NOCOPY, {3, 1, 0}, HV_COPY_SOURCE_DURABLE},
        {"head file gone: peer", {2, 8, 0}, 1, {2, 12, 1}, NOCOPY, HV_COPY_SOURCE_PEER},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        hv_copy_source_t got =
            hv_copy_source_choose(&t[i].peer, t[i].keeper_ok, &t[i].head, &t[i].durable);
        if (got != t[i].want) {
            fprintf(stderr, "case '%s': got %s, want %s\n", t[i].name, hv_copy_source_name(got),
                    hv_copy_source_name(t[i].want));
        }
        CHECK_EQ(got, t[i].want);
    }
    CHECK_STR(hv_copy_source_name(HV_COPY_SOURCE_PEER), "peer");
}

HV_CHECK_MAIN(NULL, NULL, {"choose", case_choose}, {"due", case_due},
              {"restore_due", case_restore_due}, {"expand", case_expand},
              {"peer_local", case_peer_local}, {"room", case_room}, {"keeper", case_keeper},
              {"label", case_label}, {"source", case_source})
