/*
 * fuzz_rpc: the head's request decode-and-validate path for every method (head/services/validate.c's
 * table): the first byte picks the method, the rest is the request as it arrives on the wire.
 * It is unpacked with the method's descriptor by hv_rpc_unpack, as common/rpc.c does, and a
 * request that parses goes through the method's check; a refusal must be HV_EINVAL with a
 * message. A request that parses and passes is packed again and must parse again (what the head
 * stores, e.g. a job spec, it re-reads later).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rpc.h"
#include "../../head/services/validate.h" /* one include dir per target: see CMakeLists.txt */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t n = 0;
    const hv_validate_method_t *ms = hv_validate_methods(&n);
    if (size < 1) {
        return 0;
    }
    const hv_validate_method_t *m = &ms[data[0] % n];
    ProtobufCMessage *req = hv_rpc_unpack(m->req, data + 1, size - 1);
    if (req == NULL) {
        return 0; /* the rpc layer answers INVALID_ARGUMENT "malformed request" */
    }
    char err[600];
    err[0] = '\0';
    hv_err rc = m->check != NULL ? m->check(req, err, sizeof(err)) : HV_OK;
    if (rc != HV_OK && (rc != HV_EINVAL || err[0] == '\0')) {
        abort();
    }
    if (rc == HV_OK) {
        size_t len = protobuf_c_message_get_packed_size(req);
        uint8_t *buf = malloc(len ? len : 1);
        if (buf != NULL) {
            protobuf_c_message_pack(req, buf);
            ProtobufCMessage *again = hv_rpc_unpack(m->req, buf, len);
            if (again == NULL) {
                abort();
            }
            protobuf_c_message_free_unpacked(again, NULL);
            free(buf);
        }
    }
    protobuf_c_message_free_unpacked(req, NULL);
    return 0;
}
