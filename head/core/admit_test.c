/*
 * admit_test: the admission of a Join, table by table: each way in (the configured token, a
 * valid join token, an instance's enrollment, a node's own credential) and each refusal, with
 * its code; a join token's state said only with its secret; a re-joining agent spends no use;
 * a node credential re-joins its own node only. `admit_test CASE` runs one case.
 */
#include "admit.h"
#include "hv_check.h"

#include <stdio.h>
#include <string.h>

#define TOKEN "hvj_abc123.0123456789abcdef0123456789abcdef"
#define OTHER "hvj_abc123.0123456789abcdef0123456789abcdee" /* the same id, another secret */

static hv_jtoken_row_t row_of(const char *token, uint64_t expires, uint32_t max, uint32_t uses,
                              uint64_t revoked) {
    hv_jtoken_row_t r = {
        .expires_ms = expires, .max_uses = max, .uses = uses, .revoked_ms = revoked};
    char id[HV_JTOKEN_ID_LEN + 1];
    CHECK_EQ(hv_creds_jtoken_parse(token, id, r.secret_sha256), 1);
    memcpy(r.id, id, sizeof(id));
    return r;
}

static void case_table(void) {
    hv_jtoken_row_t ok = row_of(TOKEN, 0, 0, 0, 0), used = row_of(TOKEN, 0, 1, 1, 0),
                    gone = row_of(TOKEN, 0, 0, 0, 5), old = row_of(TOKEN, 100, 0, 0, 0);
    static const char *const none = NULL;
    const struct {
        const char *what;
        hv_admit_ask_t ask;
        hv_admit_by by;
        hv_admit_refusal why;
        hv_err rc;
        hv_jtoken_verdict verdict;
    } rows[] = {
        {"static", {.token = "s3cret", .static_token = "s3cret"}, HV_ADMIT_BY_TOKEN, 0, HV_OK, 1},
        {"static wrong",
         {.token = "s3cre", .static_token = "s3cret"},
         HV_ADMIT_REFUSED,
         HV_ADMIT_WRONG_TOKEN,
         HV_EAUTH,
         1},
        {"no static configured",
         {.token = "", .static_token = ""},
         HV_ADMIT_REFUSED,
         HV_ADMIT_WRONG_TOKEN,
         HV_EAUTH,
         1},
        {"no token",
         {.token = none, .static_token = "s3cret"},
         HV_ADMIT_REFUSED,
         HV_ADMIT_WRONG_TOKEN,
         HV_EAUTH,
         1},
        {"jtoken",
         {.token = TOKEN, .jtoken = &ok, .now_ms = 50},
         HV_ADMIT_BY_JTOKEN,
         0,
         HV_OK,
         HV_JTOKEN_OK},
        {"jtoken unknown",
         {.token = TOKEN, .now_ms = 50},
         HV_ADMIT_REFUSED,
         HV_ADMIT_JTOKEN_BAD,
         HV_EAUTH,
         HV_JTOKEN_WRONG},
        {"jtoken wrong secret",
         {.token = OTHER, .jtoken = &used, .now_ms = 50},
         HV_ADMIT_REFUSED,
         HV_ADMIT_JTOKEN_BAD,
         HV_EAUTH,
         HV_JTOKEN_WRONG},
        {"jtoken used up",
         {.token = TOKEN, .jtoken = &used, .now_ms = 50},
         HV_ADMIT_REFUSED,
         HV_ADMIT_JTOKEN_BAD,
         HV_EAUTH,
         HV_JTOKEN_USED_UP},
        {"jtoken revoked",
         {.token = TOKEN, .jtoken = &gone, .now_ms = 50},
         HV_ADMIT_REFUSED,
         HV_ADMIT_JTOKEN_BAD,
         HV_EAUTH,
         HV_JTOKEN_REVOKED},
        {"jtoken expired",
         {.token = TOKEN, .jtoken = &old, .now_ms = 100},
         HV_ADMIT_REFUSED,
         HV_ADMIT_JTOKEN_BAD,
         HV_EAUTH,
         HV_JTOKEN_EXPIRED},
        {"renewal keeps its use",
         {.token = TOKEN, .jtoken = &used, .renewal = 1, .cred_node = 4},
         HV_ADMIT_BY_NODE,
         0,
         HV_OK,
         HV_JTOKEN_WRONG},
        {"renewal with a bad jtoken",
         {.token = "hvj_x", .renewal = 1, .cred_node = 4},
         HV_ADMIT_BY_NODE,
         0,
         HV_OK,
         HV_JTOKEN_WRONG},
        {"node credential",
         {.token = "junk", .renewal = 1, .cred_node = 4},
         HV_ADMIT_BY_NODE,
         0,
         HV_OK,
         1},
        {"instance",
         {.token = "hvi_7_x", .instance = 1, .instance_admits = 1},
         HV_ADMIT_BY_INSTANCE,
         0,
         HV_OK,
         1},
        {"instance not this node",
         {.token = "hvi_7_x", .instance = 1},
         HV_ADMIT_REFUSED,
         HV_ADMIT_NOT_INSTANCE,
         HV_EPERM,
         1},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv_admit_t a;
        hv_admit_decide(&rows[i].ask, &a);
        if (a.by != rows[i].by || a.refusal != rows[i].why || a.rc != rows[i].rc ||
            a.verdict != rows[i].verdict) {
            fprintf(stderr, "row: %s\n", rows[i].what);
        }
        CHECK_EQ(a.by, rows[i].by);
        CHECK_EQ(a.refusal, rows[i].why);
        CHECK_RC(a.rc, rows[i].rc);
        CHECK_EQ(a.verdict, rows[i].verdict);
    }
}

/* The join token's id is named for the words, "?" for one not of the form. */
static void case_jtoken_id(void) {
    hv_admit_t a;
    hv_admit_ask_t ask = {.token = TOKEN};
    hv_admit_decide(&ask, &a);
    CHECK_STR(a.jtoken, "abc123");
    ask.token = "hvj_nope";
    hv_admit_decide(&ask, &a);
    CHECK_STR(a.jtoken, "?");
    ask.token = "s3cret";
    hv_admit_decide(&ask, &a);
    CHECK_STR(a.jtoken, "");
}

/* A node credential re-joins its own node only; the other ways in are not checked here. */
static void case_node(void) {
    hv_admit_ask_t ask = {.renewal = 1, .cred_node = 4};
    hv_admit_t a;
    hv_admit_decide(&ask, &a);
    hv_admit_node(&a, 4);
    CHECK_EQ(a.by, HV_ADMIT_BY_NODE);
    hv_admit_node(&a, 5);
    CHECK_EQ(a.by, HV_ADMIT_REFUSED);
    CHECK_EQ(a.refusal, HV_ADMIT_NOT_THIS_NODE);
    CHECK_RC(a.rc, HV_EPERM);
    hv_admit_decide(&ask, &a);
    hv_admit_node(&a, 0); /* no node of that name */
    CHECK_EQ(a.refusal, HV_ADMIT_NOT_THIS_NODE);
    ask = (hv_admit_ask_t){.token = "s3cret", .static_token = "s3cret"};
    hv_admit_decide(&ask, &a);
    hv_admit_node(&a, 9);
    CHECK_EQ(a.by, HV_ADMIT_BY_TOKEN);
}

int main(int argc, char **argv) {
    static const hv_check_case_t cases[] = {
        {"table", case_table}, {"jtoken_id", case_jtoken_id}, {"node", case_node}};
    return hv_check_main(cases, sizeof(cases) / sizeof(cases[0]), argc, argv, NULL, NULL);
}
