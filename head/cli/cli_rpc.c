/*
 * cli_rpc: see cli_rpc.h. Error reporting for the blocking calls of hvsubmit and hvctl.
 */
#include "cli_rpc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
    int never_connected = st->rc == HV_EUNAVAIL && st->never_connected;
    int refused = st->refused;
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

int hv_cli_rpc_stream_lost(const hv_rpc_status_t *st) {
    if (st->grpc_code == HV_CLI_GRPC_NOT_FOUND || st->rc == HV_ENOTFOUND) {
        return 0;
    }
    return st->rc == HV_OK || hv_cli_rpc_unreachable(st) || st->rc == HV_EPEER ||
           st->rc == HV_ECLOSED || st->rc == HV_ECANCELED || st->rc == HV_ETIMEDOUT ||
           st->grpc_code == HV_CLI_GRPC_CANCELLED;
}

/* Details gRPC core writes when the transport fails (lower case; matched case-insensitively). */
static const char *const rpc_transport_words[] = {
    "failed to connect",
    "connection refused",
    "connection reset",
    "socket closed",
    "broken pipe",
    "goaway",
    "transport closed",
    "keepalive",
    "dns resolution",
    "empty address list",
    "endpoint",
    "stream removed",
    "cancelling all calls",
    "connect failed",
    "name resolution",
    "no route to host",
    "tls",
    "dns",
    "ares",
    "resolve",
    "network is unreachable",
    "handshake",
};

int hv_cli_rpc_transport_detail(const hv_rpc_status_t *st) {
    if (st->from_server) {
        return 0; /* the head ended the call itself: its words, whatever they say */
    }
    /* An unmarked status: gRPC core's or the transport's, or one from a head older than the
     * mark, which is told apart by the words gRPC core uses. */
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
    if (st->from_server) {
        return st->msg[0] != '\0';
    }
    return st->msg[0] != '\0' && strstr(st->msg, "Error received from peer") == NULL &&
           strstr(st->msg, "grpc_status:") == NULL;
}

int hv_cli_rpc_open(const char *prog, const char *head, const char *ca_opt, int insecure_opt,
                    hv_rpc_channel_t **out) {
    char err[HV_CLI_ERR_LEN] = "";
    const char *ca = ca_opt != NULL && ca_opt[0] != '\0' ? ca_opt : getenv("HV_CA_FILE");
    const char *ins = getenv("HV_INSECURE");
    int insecure = insecure_opt || (ins != NULL && strcmp(ins, "1") == 0);
    hv_err rc;
    if (ca != NULL && ca[0] != '\0') {
        hv_rpc_tls_t tls = {.ca_file = ca};
        rc = hv_rpc_channel_create_tls(head, &tls, out, err, sizeof(err));
        if (rc != HV_OK) {
            fprintf(stderr, "%s: --ca: %s\n", prog, err[0] ? err : hv_strerror(rc));
            return HV_CLI_EXIT_USAGE;
        }
        return HV_CLI_EXIT_OK;
    }
    if (!hv_rpc_target_is_loopback(head)) {
        if (!insecure) {
            fprintf(stderr,
                    "%s: refusing plain text to the head at %s (not on this machine): give "
                    "--ca FILE (or HV_CA_FILE) with the CA of the head's certificate, or "
                    "--insecure (HV_INSECURE=1) on a trusted network\n",
                    prog, head);
            return HV_CLI_EXIT_USAGE;
        }
        fprintf(stderr,
                "%s: warning: plain text to %s (--insecure): anyone on the network can read "
                "and change what is sent\n",
                prog, head);
    }
    if (hv_rpc_channel_create_tls(head, NULL, out, err, sizeof(err)) != HV_OK) {
        fprintf(stderr, "%s: cannot reach the head at %s: bad address\n", prog, head);
        return HV_CLI_EXIT_UNAVAILABLE;
    }
    return HV_CLI_EXIT_OK;
}

int hv_cli_rpc_exit_code(const hv_rpc_status_t *st) {
    if (st->later) {
        return HV_CLI_EXIT_TEMPFAIL; /* the head is at a bound now (streams, descriptors) */
    }
    if (hv_cli_rpc_unreachable(st)) {
        return hv_cli_rpc_transport_detail(st) ? HV_CLI_EXIT_UNAVAILABLE : HV_CLI_EXIT_TEMPFAIL;
    }
    switch (st->grpc_code) {
    case HV_CLI_GRPC_UNAUTHENTICATED:
    case HV_CLI_GRPC_PERMISSION_DENIED:
        return HV_CLI_EXIT_NOPERM;
    case HV_CLI_GRPC_NOT_FOUND:
        return HV_CLI_EXIT_NOINPUT;
    case HV_CLI_GRPC_INVALID_ARGUMENT:
    case HV_CLI_GRPC_FAILED_PRECONDITION:
    case HV_CLI_GRPC_OUT_OF_RANGE:
    case HV_CLI_GRPC_ALREADY_EXISTS:
    case HV_CLI_GRPC_RESOURCE_EXHAUSTED: /* over a limit: -np, an upload's size (a bound
                                             * on what the head holds now is marked later) */
        return HV_CLI_EXIT_DATAERR;
    case HV_CLI_GRPC_DEADLINE_EXCEEDED:
        return HV_CLI_EXIT_TEMPFAIL;
    default:
        break;
    }
    switch (st->rc) {
    case HV_ETIMEDOUT:
        return HV_CLI_EXIT_TEMPFAIL;
    case HV_ENOTFOUND:
        return HV_CLI_EXIT_NOINPUT;
    case HV_EPERM:
        return HV_CLI_EXIT_NOPERM;
    case HV_EINVAL:
    case HV_ETOOBIG:
        return HV_CLI_EXIT_DATAERR;
    default:
        return HV_CLI_EXIT_SOFTWARE;
    }
}

const char *hv_cli_rpc_transport_words(const hv_rpc_status_t *st, const char *head, char *buf,
                                       size_t len) {
    if (hv_rpc_transport_words(st, head, buf, len) == NULL) {
        snprintf(buf, len, "%s",
                 st->rc == HV_ETIMEDOUT ? "timed out connecting" : "no connection could be made");
    }
    return buf;
}

hv_err hv_cli_token_attach(hv_rpc_channel_t *ch, const char *opt, const char *prog, char *err,
                           size_t errlen) {
    const char *env = getenv("HV_TOKEN_FILE");
    int is_default = 0;
    const char *path, *from;
    if (opt != NULL && opt[0] != '\0') {
        path = opt;
        from = "--token-file";
    } else if (env != NULL && env[0] != '\0') {
        path = env;
        from = "HV_TOKEN_FILE";
    } else {
        path = HV_CLI_DEFAULT_TOKEN_FILE;
        from = "the default";
        is_default = 1;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT && is_default) {
            snprintf(err, errlen,
                     "no client token: %s does not exist; give --token-file FILE or set "
                     "HV_TOKEN_FILE (the head writes DATA_DIR/client.token on its first start)",
                     path);
            return HV_ENOTFOUND;
        }
        snprintf(err, errlen, "client token file %s (%s): %s", path, from, strerror(e));
        return e == ENOENT ? HV_ENOTFOUND : HV_EIO;
    }
    struct stat sb;
    if (fstat(fd, &sb) == 0 && (sb.st_mode & 077) != 0) {
        fprintf(stderr,
                "%s: warning: client token file %s is readable by others (mode %03o); "
                "chmod 600 it\n",
                prog, path, (unsigned)(sb.st_mode & 0777));
    }
    char buf[HV_RPC_MAX_TOKEN + 64];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    int e = errno;
    close(fd);
    if (n < 0) {
        snprintf(err, errlen, "client token file %s: %s", path, strerror(e));
        return HV_EIO;
    }
    buf[n] = '\0';
    char *t = buf;
    while (*t == ' ' || *t == '\t' || *t == '\n' || *t == '\r') {
        t++;
    }
    size_t len = strcspn(t, " \t\r\n");
    char *rest = t + len;
    while (*rest == ' ' || *rest == '\t' || *rest == '\n' || *rest == '\r') {
        rest++;
    }
    t[len] = '\0';
    hv_err rc = HV_OK;
    if (len == 0 || *rest != '\0' || hv_rpc_channel_set_token(ch, t) != HV_OK) {
        snprintf(err, errlen, "client token file %s: expected one token of at most %d characters",
                 path, HV_RPC_MAX_TOKEN);
        rc = HV_EINVAL;
    }
    volatile char *v = buf; /* the token is a secret: no copies left behind */
    for (size_t i = 0; i < sizeof(buf); i++) {
        v[i] = 0;
    }
    return rc;
}

int hv_cli_rpc_report(const char *prog, const char *head, const char *what,
                      const hv_rpc_status_t *st, uint32_t timeout_ms) {
    char words[300];
    if (hv_cli_rpc_unreachable(st) && hv_cli_rpc_transport_detail(st)) {
        hv_cli_rpc_transport_words(st, head, words, sizeof(words));
        fprintf(stderr, "%s: cannot reach the head at %s: %s%s\n", prog, head, words,
                strcmp(words, "connection refused") == 0 ? " (is hvhead running there?)" : "");
    } else if (st->grpc_code == HV_CLI_GRPC_DEADLINE_EXCEEDED || st->rc == HV_ETIMEDOUT) {
        fprintf(stderr, "%s: the head at %s did not answer %s within %u s\n", prog, head, what,
                (unsigned)((timeout_ms + 999) / 1000));
    } else if (st->grpc_code == HV_CLI_GRPC_UNAUTHENTICATED ||
               st->grpc_code == HV_CLI_GRPC_PERMISSION_DENIED) {
        fprintf(stderr, "%s: the head refused %s: %s\n", prog, what,
                hv_cli_rpc_head_message(st)
                    ? st->msg
                    : (st->grpc_code == HV_CLI_GRPC_UNAUTHENTICATED ? "not authenticated"
                                                                    : "permission denied"));
    } else if (hv_cli_rpc_head_message(st)) {
        hv_cli_say(stderr, prog, st->msg); /* it may echo a name: nothing acts on the terminal */
    } else {
        fprintf(stderr, "%s: %s failed: %s\n", prog, what, hv_strerror(st->rc));
    }
    return hv_cli_rpc_exit_code(st);
}
