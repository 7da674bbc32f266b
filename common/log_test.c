/*
 * log_test: a record reaches the sink as one line whatever its fields hold. Control characters a
 * peer put in a field (a newline to forge a record, an ESC to drive the operator's terminal) come
 * out escaped; printable text is untouched; a record cut at the buffer's end never ends in half an
 * escape. Each case can run alone: `log_test <case>`.
 */
#include "log.h"
#include "hv_check.h"

#include <string.h>

static char got[4096]; /* the last record the sink received */

static void capture(hv_log_level level, const char *subsys, const char *msgid, const char *text,
                    void *ud) {
    (void)level;
    (void)subsys;
    (void)msgid;
    (void)ud;
    snprintf(got, sizeof(got), "%s", text);
}

static void setup(void) {
    got[0] = '\0';
    hv_log_set_level(HV_LOG_DEBUG);
    hv_log_set_sink(capture, NULL);
}

static void teardown(void) { hv_log_set_sink(NULL, NULL); }

static void case_plain(void) {
    HV_LOG(HV_LOG_WARN, "test", "HV-TEST", "job %d: key '%s' (\u00e9t\u00e9)", 7, "a b/c\\d");
    CHECK_STR(got, "job 7: key 'a b/c\\d' (\u00e9t\u00e9)");
}

static void case_newline_forgery(void) {
    const char *key = "k\n2026-01-01T00:00:00.000Z hvhead[1] WARN auth HV-AUTH-REVOKE: forged\r";
    HV_LOG(HV_LOG_WARN, "test", "HV-TEST", "kv put '%s'", key);
    CHECK(strchr(got, '\n') == NULL);
    CHECK(strchr(got, '\r') == NULL);
    CHECK_STR(got, "kv put 'k\\n2026-01-01T00:00:00.000Z hvhead[1] WARN auth HV-AUTH-REVOKE: "
                   "forged\\r'");
}

static void case_other_controls(void) {
    HV_LOG(HV_LOG_WARN, "test", "HV-TEST", "%s", "\x1b[31mred\x7f\x01\tend");
    CHECK_STR(got, "\\x1b[31mred\\x7f\\x01\\tend");
}

static void case_cut_whole(void) {
    /* 2046 printable bytes then newlines: the escape that does not fit is left out whole. */
    char big[2060];
    memset(big, 'a', 2046);
    strcpy(big + 2046, "\n\n\n");
    HV_LOG(HV_LOG_WARN, "test", "HV-TEST", "%s", big);
    CHECK_EQ(strlen(got), 2046);
    CHECK(strchr(got, '\\') == NULL);
    CHECK(strchr(got, '\n') == NULL);
}

HV_CHECK_MAIN(setup, teardown, {"plain", case_plain}, {"newline_forgery", case_newline_forgery},
              {"other_controls", case_other_controls}, {"cut_whole", case_cut_whole})
