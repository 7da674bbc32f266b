/*
 * cli_rpc_test: the CLIs' retry of a call that never reached the head decides on the status's
 * fields (never_connected, refused), not on its words: a status in other words is retried the
 * same, and gRPC's words without the fields are not retried. `cli_rpc_test <case>` runs one case.
 */
#include "cli_rpc.h"
#include "hv_check.h"
#include "util.h"

#include <stdio.h>
#include <string.h>

static hv_rpc_status_t status(int never_connected, int refused, const char *msg) {
    hv_rpc_status_t st;
    memset(&st, 0, sizeof(st));
    st.rc = HV_EUNAVAIL;
    st.grpc_code = 14;
    st.never_connected = never_connected;
    st.refused = refused;
    snprintf(st.msg, sizeof(st.msg), "%s", msg);
    return st;
}

static void case_words_changed(void) {
    uint32_t pause = 1;
    /* never connected, in any words: retried */
    hv_rpc_status_t st = status(1, 0, "keine Verbindung zum Kopf");
    CHECK_EQ(hv_cli_rpc_connect_retry(&st, hv_now_ms(), &pause), 1);
    CHECK_EQ(pause, 2); /* the pause doubles */
    /* refused: retried for the short bound only (HV_CLI_CONNECT_RETRY_MS) */
    st = status(1, 1, "Verbindung abgelehnt");
    pause = 1;
    CHECK_EQ(hv_cli_rpc_connect_retry(&st, hv_now_ms(), &pause), 1);
    pause = 1;
    CHECK_EQ(hv_cli_rpc_connect_retry(&st, hv_now_ms() - HV_CLI_CONNECT_RETRY_MS, &pause), 0);
    st = status(1, 0, "Verbindung abgelehnt"); /* not refused: the longer bound */
    pause = 1;
    CHECK_EQ(hv_cli_rpc_connect_retry(&st, hv_now_ms() - HV_CLI_CONNECT_RETRY_MS, &pause), 1);
    /* gRPC's words without the fields (the head answered, or the call was under way): no retry */
    st = status(0, 0, "failed to connect to all addresses; Connection refused");
    pause = 1;
    CHECK_EQ(hv_cli_rpc_connect_retry(&st, hv_now_ms(), &pause), 0);
    /* the fields on a status that is not "unavailable": no retry */
    st = status(1, 1, "failed to connect");
    st.rc = HV_ETIMEDOUT;
    CHECK_EQ(hv_cli_rpc_connect_retry(&st, hv_now_ms(), &pause), 0);
}

HV_CHECK_MAIN(NULL, NULL, {"words_changed", case_words_changed})
