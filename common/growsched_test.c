/*
 * growsched_test: the growth schedule's parser and lookup, table by table.
 */
#include "growsched.h"
#include "hv_check.h"

#include <string.h>

static void case_parse(void) {
    static const struct {
        const char *text;
        int ok;
        size_t n;
        const char *err; /* part of the message */
    } rows[] = {
        {"0:2,30:4,60:8", 1, 3, NULL},
        {"5:4", 1, 1, NULL},
        {"", 0, 0, "empty schedule"},
        {"0:2,", 0, 0, "step 2"},
        {"0:2,30x4", 0, 0, "step 2 '30x4'"},
        {"0:0", 0, 0, "SIZE >= 1"},
        {"0:2,0:4", 0, 0, "epochs must increase"},
        {"30:4,10:2", 0, 0, "epochs must increase"},
        {"-1:2", 0, 0, "step 1"},
        {"1:+2", 0, 0, "step 1"},
        {"1:2 ", 0, 0, "step 1"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_grow_step_t st[8];
        size_t n = 99;
        char err[200] = "";
        hv_err rc = hv_grow_parse(rows[i].text, st, 8, &n, err, sizeof(err));
        CHECK_EQ(rc == HV_OK, rows[i].ok);
        if (rows[i].ok) {
            CHECK_EQ(n, rows[i].n);
        } else {
            CHECK(strstr(err, rows[i].err) != NULL);
        }
    }
    hv_grow_step_t st[2];
    size_t n;
    char err[200];
    CHECK_RC(hv_grow_parse("0:1,1:2,2:3", st, 2, &n, err, sizeof(err)), HV_EINVAL);
    CHECK(strstr(err, "more than 2 steps") != NULL);
}

static void case_size_at(void) {
    hv_grow_step_t st[3];
    size_t n;
    char err[200];
    CHECK_RC(hv_grow_parse("0:2,30:4,60:8", st, 3, &n, err, sizeof(err)), HV_OK);
    static const struct {
        uint64_t epoch;
        uint32_t size;
    } rows[] = {{0, 2}, {29, 2}, {30, 4}, {59, 4}, {60, 8}, {1000, 8}};
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        CHECK_EQ(hv_grow_size_at(st, n, rows[i].epoch), rows[i].size);
    }
    CHECK_RC(hv_grow_parse("5:3", st, 3, &n, err, sizeof(err)), HV_OK);
    CHECK_EQ(hv_grow_size_at(st, n, 4), 0);
    CHECK_EQ(hv_grow_size_at(st, n, 5), 3);
}

HV_CHECK_MAIN(NULL, NULL, {"parse", case_parse}, {"size_at", case_size_at})
