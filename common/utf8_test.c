/*
 * utf8_test: which bytes are UTF-8 text, table by table (valid sequences of every length, the
 * forms that are not: stray continuations, overlong forms, surrogates, above U+10FFFF, cut
 * short), where the first bad byte is, and the in-place repair. `utf8_test <case>` runs one.
 */
#include "utf8.h"
#include "hv_check.h"

#include <string.h>

static void case_len(void) {
    static const struct {
        const char *s;
        size_t n;
    } rows[] = {
        {"a", 1},
        {"\x7f", 1},
        {"", 0},
        {"\xc3\xa9", 2},         /* é */
        {"\xc2\x80", 2},         /* U+0080 */
        {"\xe2\x82\xac", 3},     /* € */
        {"\xef\xbf\xbd", 3},     /* U+FFFD */
        {"\xf0\x9f\x98\x80", 4}, /* an emoji */
        {"\xf4\x8f\xbf\xbf", 4}, /* U+10FFFF */
        {"\x80", 0},             /* a stray continuation */
        {"\xbf", 0},
        {"\xc0\xaf", 0},         /* overlong '/' */
        {"\xc1\xbf", 0},         /* overlong */
        {"\xe0\x80\xaf", 0},     /* overlong */
        {"\xf0\x80\x80\xaf", 0}, /* overlong */
        {"\xed\xa0\x80", 0},     /* a surrogate (U+D800) */
        {"\xed\xbf\xbf", 0},     /* U+DFFF */
        {"\xf4\x90\x80\x80", 0}, /* U+110000 */
        {"\xf5\x80\x80\x80", 0},
        {"\xff", 0},
        {"\xfe", 0},
        {"\xc3", 0}, /* cut short by the end */
        {"\xe2\x82", 0},
        {"\xf0\x9f\x98", 0},
        {"\xc3(", 0}, /* not a continuation */
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        size_t got = hv_utf8_len(rows[i].s);
        if (got != rows[i].n) {
            fprintf(stderr, "row %zu\n", i);
        }
        CHECK_EQ(got, rows[i].n);
    }
}

static void case_bad_at(void) {
    static const struct {
        const char *s;
        long at;
    } rows[] = {
        {"plain text", -1},
        {"", -1},
        {NULL, -1},
        {"d\xc3\xa9j\xc3\xa0 \xe2\x82\xac \xf0\x9f\x98\x80", -1},
        {"\xff", 0},
        {"ab\xffzz", 2},
        {"job-\xc3\xa9-\xc3", 7},
        {"\xc3\xa9\xed\xa0\x80", 2},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        CHECK_EQ(hv_utf8_bad_at(rows[i].s), rows[i].at);
    }
}

static void case_repair(void) {
    char a[] = "ok \xc3\xa9";
    CHECK_EQ(hv_utf8_repair(a), 0);
    CHECK_STR(a, "ok \xc3\xa9");
    char b[] = "a\xff"
               "b\xe2\x82"
               "c\xed\xa0\x80";
    CHECK_EQ(hv_utf8_repair(b), 6);
    CHECK_STR(b, "a?b??c???");
    CHECK_EQ(hv_utf8_bad_at(b), -1);
    CHECK_EQ(hv_utf8_repair(NULL), 0);
}

int main(int argc, char **argv) {
    static const hv_check_case_t cases[] = {
        {"len", case_len},
        {"bad_at", case_bad_at},
        {"repair", case_repair},
    };
    return hv_check_main(cases, sizeof(cases) / sizeof(cases[0]), argc, argv, NULL, NULL);
}
