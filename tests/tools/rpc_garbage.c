/*
 * rpc_garbage: a hostile test client. For each method path given, it sends the head (a) bytes
 * that no protobuf message parses and (b) an empty request (every field at its default), and
 * prints one line per call: "PATH garbage|empty CODE message". It exits 1 if a garbage call got
 * anything but INVALID_ARGUMENT or an empty call got UNKNOWN or INTERNAL (a handler that did not
 * validate its input), 0 otherwise. Used by tests/integration/malformed_rpc.sh.
 *
 *   rpc_garbage HOST:PORT /hvpb.v1.Jobs/Submit [PATH...]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hv.pb-c.h"
#include "rpc.h"

/* Field 1 as a varint whose continuation bit never ends: malformed for every message type.
 * protobuf-c packs unknown fields verbatim, so hv_rpc_unary sends exactly these bytes. */
static const uint8_t bad_varint[] = {0xff, 0xff, 0xff};

static int call(hv_rpc_channel_t *ch, const char *path, int garbage) {
    ProtobufCMessageUnknownField f = {.tag = 1,
                                      .wire_type = PROTOBUF_C_WIRE_TYPE_VARINT,
                                      .len = sizeof(bad_varint),
                                      .data = (uint8_t *)bad_varint};
    Hvpb__V1__ListJobsRequest r = HVPB__V1__LIST_JOBS_REQUEST__INIT;
    if (garbage) {
        r.base.n_unknown_fields = 1;
        r.base.unknown_fields = &f;
    }
    ProtobufCMessage *resp = NULL;
    hv_rpc_status_t st;
    /* Replies are read as a message without fields (every field is kept as unknown), so any
     * method's reply parses; only the status is checked. Streams answer their first message. */
    hv_rpc_unary(ch, path, &r.base, &hvpb__v1__kv_put_reply__descriptor, 3000, &resp, &st);
    hv_rpc_msg_free(resp);
    printf("%s %s %s %s\n", path, garbage ? "garbage" : "empty", hv_rpc_code_name(st.grpc_code),
           st.msg);
    if (garbage) {
        return st.grpc_code == 3 ? 0 : 1;
    }
    return st.grpc_code == 2 || st.grpc_code == 13 ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: rpc_garbage HOST:PORT PATH...   (with $HV_TOKEN_FILE: calls carry "
                        "that client token)\n");
        return 64;
    }
    hv_rpc_channel_t *ch;
    if (hv_rpc_channel_create(argv[1], &ch) != HV_OK) {
        fprintf(stderr, "rpc_garbage: bad target %s\n", argv[1]);
        return 64;
    }
    /* With a client token the calls pass the head's gate and reach decoding and validation; a
     * Cluster or Rendezvous method then refuses the client's scope (never UNKNOWN/INTERNAL). */
    const char *tf = getenv("HV_TOKEN_FILE");
    if (tf != NULL && tf[0] != '\0') {
        char tok[512] = "";
        FILE *f = fopen(tf, "r");
        if (f == NULL || fgets(tok, sizeof(tok), f) == NULL) {
            fprintf(stderr, "rpc_garbage: cannot read %s\n", tf);
            if (f != NULL) {
                fclose(f);
            }
            return 66;
        }
        fclose(f);
        tok[strcspn(tok, " \t\r\n")] = '\0';
        if (hv_rpc_channel_set_token(ch, tok) != HV_OK) {
            fprintf(stderr, "rpc_garbage: the token in %s is malformed\n", tf);
            return 65;
        }
    }
    int bad = 0;
    for (int i = 2; i < argc; i++) {
        bad += call(ch, argv[i], 1);
        bad += call(ch, argv[i], 0);
    }
    fflush(stdout);
    hv_rpc_channel_destroy(ch);
    return bad ? 1 : 0;
}
