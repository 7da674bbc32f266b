/*
 * cli_json_test: unit tests of the CLIs' JSON writer (cli_json.h): string escapes (controls,
 * U+2028, invalid UTF-8), a message's fields by a spec, a whole document and the misuse that is
 * refused, a JSON text from the head embedded after its check, and a top-level field read from
 * one. Run all cases, or one by name: cli_json_test json_escape.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_json.h"
#include "hv_check.h"

static void write_escaped(FILE *f, void *ud) { hv_cli_json_write_string(f, (const char *)ud); }

static void test_json_escape(void) {
    static const struct {
        const char *in;
        const char *out;
    } cases[] = {
        {"", "\"\""},
        {"plain", "\"plain\""},
        {"quote\" back\\slash", "\"quote\\\" back\\\\slash\""},
        {"nl\ncr\rtab\t", "\"nl\\ncr\\rtab\\t\""},
        {"\x01\x1f\x7f", "\"\\u0001\\u001f\\u007f\""},
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
         "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\""},
        {"bad\xff", "\"bad\\ufffd\""},
        {"trunc\xc3", "\"trunc\\ufffd\""},
        {"overlong\xc0\xaf", "\"overlong\\ufffd\\ufffd\""},
        {"surrogate\xed\xa0\x80", "\"surrogate\\ufffd\\ufffd\\ufffd\""},
        {"toobig\xf4\x90\x80\x80", "\"toobig\\ufffd\\ufffd\\ufffd\\ufffd\""},
        {"</script>", "\"</script>\""},
        {"csi\xc2\x9b"
         "2Jnel\xc2\x85 nbsp\xc2\xa0",
         "\"csi\\u009b2Jnel\\u0085 nbsp\xc2\xa0\""},
        {"ls\xe2\x80\xa8ps\xe2\x80\xa9"
         "dash\xe2\x80\x94",
         "\"ls\\u2028ps\\u2029dash\xe2\x80\x94\""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *out = hv_check_capture(write_escaped, (void *)cases[i].in);
        CHECK_STR(out, cases[i].out);
        free(out);
    }
}

/* A message's fields by a spec (hv_cli_json_fields); ud: {message, spec}. */
typedef struct fields_case_s {
    const ProtobufCMessage *m;
    const char *spec;
} fields_case_t;

static void write_fields(FILE *f, void *ud) {
    const fields_case_t *c = ud;
    hv_cli_json_t j;
    hv_cli_json_init(&j, f);
    hv_cli_json_obj_begin(&j);
    hv_cli_json_fields(&j, c->m, c->spec);
    hv_cli_json_obj_end(&j);
    if (hv_cli_json_finish(&j) != HV_OK) {
        fputs("<refused>", f);
    }
}

static void test_json_fields(void) {
    Hvpb__V1__NodeInfo info = HVPB__V1__NODE_INFO__INIT;
    char *addrs[] = {"10.0.0.1", "10.0.0.2"};
    info.name = "n\"1";
    info.slots = 4;
    info.addrs = addrs;
    info.n_addrs = 2;
    Hvpb__V1__NodeView n = HVPB__V1__NODE_VIEW__INIT;
    n.node_id = 18446744073709551615ull;
    n.info = &info;
    Hvpb__V1__NodeView bare = HVPB__V1__NODE_VIEW__INIT; /* no info: its fields' defaults */
    Hvpb__V1__WorkerView w = HVPB__V1__WORKER_VIEW__INIT;
    w.exit_code = -1;
    w.done = 1;
    w.node = NULL;
    Hvpb__V1__CostReply cost = HVPB__V1__COST_REPLY__INIT;
    cost.cost = 0.25;
    static const char *const node_spec = "node_id name=info.name slots=info.slots addrs=info.addrs";
    const struct {
        fields_case_t c;
        const char *want;
    } cases[] = {
        {{&n.base, node_spec},
         "{\n  \"node_id\": 18446744073709551615,\n  \"name\": \"n\\\"1\",\n  \"slots\": 4,\n"
         "  \"addrs\": [\n    \"10.0.0.1\",\n    \"10.0.0.2\"\n  ]\n}\n"},
        {{&bare.base, node_spec},
         "{\n  \"node_id\": 0,\n  \"name\": \"\",\n  \"slots\": 0,\n  \"addrs\": []\n}\n"},
        {{&w.base, "exit_code done node state_code"},
         "{\n  \"exit_code\": -1,\n  \"done\": true,\n  \"node\": \"\",\n  \"state_code\": 0\n}\n"},
        {{&cost.base, "total=cost"}, "{\n  \"total\": 0.25\n}\n"},
        {{&n.base, ""}, "{}\n"},
        /* Misuse: no such field, a submessage itself, a repeated message, an empty key. */
        {{&n.base, "node_id nosuch"}, "<refused>"},
        {{&n.base, "info"}, "<refused>"},
        {{&n.base, "blacklist"}, "<refused>"},
        {{&n.base, "=node_id"}, "<refused>"},
        {{&n.base, "x=info.nosuch"}, "<refused>"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *out = hv_check_capture(write_fields, (void *)&cases[i].c);
        const char *refused = strstr(out, "<refused>");
        CHECK_STR(refused != NULL && strstr(cases[i].want, "<refused>") ? "<refused>" : out,
                  cases[i].want);
        free(out);
    }
}

static void test_json_field(void) {
    static const char *const data =
        "{\"actor_id\":7,\"name\":\"x\",\"sub\":{\"step\":\"inner\"},\"step\":\"restart\","
        "\"reason\":\"said \\\"no\\\"\\n\\u0001\",\"big\":18446744073709551616,"
        "\"neg\":-1,\"frac\":1.5,\"t\":true}";
    static const struct {
        const char *json, *key;
        int str_ok;
        const char *str;
        int num_ok;
        uint64_t num;
    } cases[] = {
        {data, "step", 1, "restart", 0, 0}, /* the top level's, not sub's */
        {data, "name", 1, "x", 0, 0},
        {data, "reason", 1, "said \"no\"\n?", 0, 0},
        {data, "actor_id", 0, "", 1, 7},
        {data, "big", 0, "", 0, 0},
        {data, "neg", 0, "", 0, 0},
        {data, "frac", 0, "", 0, 0},
        {data, "t", 0, "", 0, 0},
        {data, "missing", 0, "", 0, 0},
        {"{\"step\":\"restart\"", "step", 0, "", 0, 0}, /* not valid JSON */
        {"[\"step\",\"x\"]", "step", 0, "", 0, 0},      /* not an object */
        {"", "step", 0, "", 0, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[64] = "untouched";
        uint64_t n = 99;
        CHECK(hv_cli_json_field_str(cases[i].json, cases[i].key, buf, sizeof(buf)) ==
              cases[i].str_ok);
        CHECK_STR(buf, cases[i].str_ok ? cases[i].str : "untouched");
        CHECK(hv_cli_json_field_u64(cases[i].json, cases[i].key, &n) == cases[i].num_ok);
        CHECK(n == (cases[i].num_ok ? cases[i].num : 99));
    }
    char small[4];
    CHECK(hv_cli_json_field_str(data, "step", small, sizeof(small)) == 1);
    CHECK_STR(small, "res");
}

static void write_doc(FILE *f, void *ud) {
    (void)ud;
    hv_cli_json_t j;
    hv_cli_json_init(&j, f);
    hv_cli_json_obj_begin(&j);
    hv_cli_json_key(&j, "jobs");
    hv_cli_json_arr_begin(&j);
    hv_cli_json_obj_begin(&j);
    hv_cli_json_key(&j, "id");
    hv_cli_json_u64(&j, 18446744073709551615ull);
    hv_cli_json_key(&j, "name");
    hv_cli_json_str(&j, "a\"b");
    hv_cli_json_key(&j, "exit");
    hv_cli_json_i64(&j, -1);
    hv_cli_json_key(&j, "ok");
    hv_cli_json_bool(&j, 1);
    hv_cli_json_key(&j, "none");
    hv_cli_json_null(&j);
    hv_cli_json_key(&j, "empty");
    hv_cli_json_arr_begin(&j);
    hv_cli_json_arr_end(&j);
    hv_cli_json_obj_end(&j);
    hv_cli_json_u64(&j, 2);
    hv_cli_json_arr_end(&j);
    hv_cli_json_key(&j, "labels");
    hv_cli_json_obj_begin(&j);
    hv_cli_json_obj_end(&j);
    hv_cli_json_obj_end(&j);
    CHECK_RC(hv_cli_json_finish(&j), HV_OK);
}

static void write_bad_doc(FILE *f, void *ud) {
    int which = *(int *)ud;
    hv_cli_json_t j;
    hv_cli_json_init(&j, f);
    hv_cli_json_obj_begin(&j);
    if (which == 0) {
        hv_cli_json_u64(&j, 1); /* a value with no key */
        hv_cli_json_obj_end(&j);
    } else if (which == 1) {
        hv_cli_json_key(&j, "k"); /* a key with no value */
        hv_cli_json_obj_end(&j);
    } else if (which == 2) {
        hv_cli_json_arr_end(&j); /* wrong closer */
    } else {
        /* left open */
    }
    CHECK_RC(hv_cli_json_finish(&j), HV_EINVAL);
}

static void test_json_doc(void) {
    char *out = hv_check_capture(write_doc, NULL);
    CHECK_STR(out, "{\n"
                   "  \"jobs\": [\n"
                   "    {\n"
                   "      \"id\": 18446744073709551615,\n"
                   "      \"name\": \"a\\\"b\",\n"
                   "      \"exit\": -1,\n"
                   "      \"ok\": true,\n"
                   "      \"none\": null,\n"
                   "      \"empty\": []\n"
                   "    },\n"
                   "    2\n"
                   "  ],\n"
                   "  \"labels\": {}\n"
                   "}\n");
    free(out);
    for (int which = 0; which < 4; which++) {
        out = hv_check_capture(write_bad_doc, &which);
        free(out);
    }
}

/* Writes {"k": <text>} for test_json_embed; the embed's result goes back through ud. */
typedef struct embed_case_s {
    const char *text;
    int want_object;
    int depth; /* arrays to open around the object first */
    hv_err rc;
} embed_case_t;

static void write_embed(FILE *f, void *ud) {
    embed_case_t *c = ud;
    hv_cli_json_t j;
    hv_cli_json_init(&j, f);
    for (int i = 0; i < c->depth; i++) {
        hv_cli_json_arr_begin(&j);
    }
    hv_cli_json_obj_begin(&j);
    hv_cli_json_key(&j, "k");
    c->rc = hv_cli_json_embed(&j, c->text, c->want_object);
    if (c->rc != HV_OK) {
        hv_cli_json_null(&j);
    }
    hv_cli_json_key(&j, "after");
    hv_cli_json_u64(&j, 1);
    hv_cli_json_obj_end(&j);
    for (int i = 0; i < c->depth; i++) {
        hv_cli_json_arr_end(&j);
    }
    CHECK_RC(hv_cli_json_finish(&j), HV_OK);
}

static void test_json_embed(void) {
    /* An object from the head is re-indented; strings and numbers keep their spelling. */
    embed_case_t c = {" {\"generation\":3, \"size\" : 2,\"rollback\":true,\"removed\":[7,8],"
                      "\"reason\":\"failure: rank 1 \\\"x\\\" \\u00e9 caf\xc3\xa9\",\"x\":-1.5e+3,"
                      "\"none\":null,\"e\":{},\"a\":[]} \n",
                      1, 0, HV_EINVAL};
    char *out = hv_check_capture(write_embed, &c);
    CHECK_RC(c.rc, HV_OK);
    CHECK_STR(out, "{\n"
                   "  \"k\": {\n"
                   "    \"generation\": 3,\n"
                   "    \"size\": 2,\n"
                   "    \"rollback\": true,\n"
                   "    \"removed\": [\n"
                   "      7,\n"
                   "      8\n"
                   "    ],\n"
                   "    \"reason\": \"failure: rank 1 \\\"x\\\" \\u00e9 caf\xc3\xa9\",\n"
                   "    \"x\": -1.5e+3,\n"
                   "    \"none\": null,\n"
                   "    \"e\": {},\n"
                   "    \"a\": []\n"
                   "  },\n"
                   "  \"after\": 1\n"
                   "}\n");
    free(out);

    /* Any value when an object is not required. */
    static const char *const ok_any[] = {"[1,\"two\",[3]]", "0",     "-0.25",
                                         "\"s\"",           "false", "  null  "};
    for (size_t i = 0; i < sizeof(ok_any) / sizeof(ok_any[0]); i++) {
        embed_case_t k = {ok_any[i], 0, 0, HV_EINVAL};
        out = hv_check_capture(write_embed, &k);
        if (k.rc != HV_OK) {
            fprintf(stderr, "embed '%s': %s, want HV_OK\n", ok_any[i], hv_errname(k.rc));
            hv_check_failures++;
        }
        free(out);
    }

    /* Refused, with nothing written: the document still holds "k": null. */
    static const char *const bad[] = {
        "",
        "   ",
        "{",
        "{\"a\":1,}",
        "{\"a\" 1}",
        "{a:1}",
        "{'a':1}",
        "{\"a\":1} x",
        "{\"a\":1}{}",
        "{\"a\":01}",
        "{\"a\":1.}",
        "{\"a\":-}",
        "{\"a\":1e}",
        "{\"a\":+1}",
        "{\"a\":tru}",
        "{\"a\":\"unterminated}",
        "{\"a\":\"tab\tinside\"}",
        "{\"a\":\"bad \\x escape\"}",
        "{\"a\":\"short \\u12\"}",
        "{\"a\":\"bad utf8 \xff\"}",
        "{\"a\":[1,2}",
        "[1]", /* not an object */
        "\"text\"",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        embed_case_t k = {bad[i], 1, 0, HV_OK};
        out = hv_check_capture(write_embed, &k);
        if (k.rc != HV_EINVAL) {
            fprintf(stderr, "embed '%s': %s, want HV_EINVAL\n", bad[i], hv_errname(k.rc));
            hv_check_failures++;
        }
        CHECK_STR(out, "{\n  \"k\": null,\n  \"after\": 1\n}\n");
        free(out);
    }

    /* Nesting: the writer's depth bound counts the containers already open around it. */
    char deep[64] = "";
    for (int i = 0; i < 14; i++) {
        strcat(deep, "[");
    }
    strcat(deep, "1");
    for (int i = 0; i < 14; i++) {
        strcat(deep, "]");
    }
    embed_case_t d1 = {deep, 0, 0, HV_EINVAL}; /* 1 + 14 levels: fits in 16 */
    out = hv_check_capture(write_embed, &d1);
    CHECK_RC(d1.rc, HV_OK);
    free(out);
    embed_case_t d2 = {deep, 0, 2, HV_OK}; /* 3 + 14: too deep */
    out = hv_check_capture(write_embed, &d2);
    CHECK_RC(d2.rc, HV_EINVAL);
    CHECK_HAS(out, "\"k\": null");
    free(out);
}

HV_CHECK_MAIN(NULL, NULL, {"json_escape", test_json_escape}, {"json_fields", test_json_fields},
              {"json_doc", test_json_doc}, {"json_embed", test_json_embed},
              {"json_field", test_json_field})
