/*
 * cli_rpc: see cli_rpc.h. Error reporting for the blocking calls of hvsubmit and hvctl.
 */
#include "cli_rpc.h"

#include <stdio.h>
#include <string.h>

#include "cli_common.h"

int hv_cli_rpc_unreachable(const hv_rpc_status_t *st) {
    return st->grpc_code == HV_CLI_GRPC_UNAVAILABLE || st->rc == HV_EUNAVAIL;
}

int hv_cli_rpc_report(const char *prog, const char *head, const char *what,
                      const hv_rpc_status_t *st, uint32_t timeout_ms) {
    if (hv_cli_rpc_unreachable(st)) {
        /* gRPC's detail for the common case is long; say it plainly. */
        const char *detail = st->msg[0] ? st->msg : hv_strerror(st->rc);
        if (strstr(detail, "Connection refused") != NULL) {
            detail = "connection refused (is hvhead running there?)";
        }
        fprintf(stderr, "%s: cannot reach the head at %s: %s\n", prog, head, detail);
    } else if (st->grpc_code == HV_CLI_GRPC_DEADLINE_EXCEEDED || st->rc == HV_ETIMEDOUT) {
        fprintf(stderr, "%s: the head at %s did not answer %s within %u s\n", prog, head, what,
                (unsigned)((timeout_ms + 999) / 1000));
    } else if (st->msg[0] != '\0') {
        fprintf(stderr, "%s: %s\n", prog, st->msg);
    } else {
        fprintf(stderr, "%s: %s failed: %s\n", prog, what, hv_strerror(st->rc));
    }
    return HV_CLI_EXIT_FAIL;
}
