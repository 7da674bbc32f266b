/*
 * cli_rpc: see cli_rpc.h. Error reporting for the blocking calls of hvsubmit and hvctl.
 */
#include "cli_rpc.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli_common.h"
#include "util.h"

hv_err hv_cli_rpc_unary(hv_rpc_channel_t *ch, const char *path, const ProtobufCMessage *req,
                        const ProtobufCMessageDescriptor *resp_desc, uint32_t timeout_ms,
                        ProtobufCMessage **resp_out, hv_rpc_status_t *st) {
    uint64_t start = hv_now_ms();
    uint32_t pause_ms = 100;
    for (;;) {
        hv_err rc = hv_rpc_unary(ch, path, req, resp_desc, timeout_ms, resp_out, st);
        if (rc == HV_OK || !hv_cli_rpc_connect_retry(st, start, &pause_ms)) {
            return rc;
        }
    }
}

int hv_cli_rpc_connect_retry(const hv_rpc_status_t *st, uint64_t start_ms, uint32_t *pause_ms) {
    int never_connected = st->rc == HV_EUNAVAIL && strstr(st->msg, "failed to connect") != NULL;
    int refused = strcasestr(st->msg, "connection refused") != NULL;
    uint64_t give_up = start_ms + (refused ? HV_CLI_CONNECT_RETRY_MS : HV_CLI_CONNECT_SLOW_MS);
    if (!never_connected || hv_now_ms() + *pause_ms > give_up) {
        return 0;
    }
    usleep(*pause_ms * 1000u);
    *pause_ms = *pause_ms * 2 > 1000 ? 1000 : *pause_ms * 2;
    return 1;
}

int hv_cli_rpc_unreachable(const hv_rpc_status_t *st) {
    return st->grpc_code == HV_CLI_GRPC_UNAVAILABLE || st->rc == HV_EUNAVAIL;
}

/* Details gRPC core writes when the transport fails (lower case; matched case-insensitively). */
static const char *const rpc_transport_words[] = {
    "failed to connect",    "connection refused", "connection reset",
    "socket closed",        "broken pipe",        "goaway",
    "transport closed",     "keepalive",          "dns resolution",
    "empty address list",   "endpoint",           "stream removed",
    "cancelling all calls", "connect failed",     "name resolution",
    "no route to host",
};

int hv_cli_rpc_transport_detail(const hv_rpc_status_t *st) {
    if (st->msg[0] == '\0') {
        return 1;
    }
    for (size_t i = 0; i < sizeof(rpc_transport_words) / sizeof(rpc_transport_words[0]); i++) {
        if (strcasestr(st->msg, rpc_transport_words[i]) != NULL) {
            return 1;
        }
    }
    return 0;
}

int hv_cli_rpc_head_message(const hv_rpc_status_t *st) {
    return st->msg[0] != '\0' && strstr(st->msg, "Error received from peer") == NULL &&
           strstr(st->msg, "grpc_status:") == NULL;
}

int hv_cli_rpc_report(const char *prog, const char *head, const char *what,
                      const hv_rpc_status_t *st, uint32_t timeout_ms) {
    if (hv_cli_rpc_unreachable(st) && hv_cli_rpc_transport_detail(st)) {
        /* gRPC's detail for the common case is long; say it plainly. */
        const char *detail = st->msg[0] ? st->msg : hv_strerror(st->rc);
        if (strstr(detail, "Connection refused") != NULL) {
            detail = "connection refused (is hvhead running there?)";
        }
        fprintf(stderr, "%s: cannot reach the head at %s: %s\n", prog, head, detail);
    } else if (st->grpc_code == HV_CLI_GRPC_DEADLINE_EXCEEDED || st->rc == HV_ETIMEDOUT) {
        fprintf(stderr, "%s: the head at %s did not answer %s within %u s\n", prog, head, what,
                (unsigned)((timeout_ms + 999) / 1000));
    } else if (hv_cli_rpc_head_message(st)) {
        fprintf(stderr, "%s: %s\n", prog, st->msg);
    } else {
        fprintf(stderr, "%s: %s failed: %s\n", prog, what, hv_strerror(st->rc));
    }
    return HV_CLI_EXIT_FAIL;
}
