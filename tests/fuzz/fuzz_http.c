/*
 * fuzz_http: the HTTP request parser of hvhead's metrics listener (head/services/http.c hv_http_parse).
 * Any bytes must give one of three answers: incomplete (nothing used), a request whose head and
 * body are within the bytes given and the bounds (strings terminated, a path that starts with
 * '/', a body only on POST; the cookie and form readers of the login keep theirs), or a
 * refusal with a 4xx/5xx status. Every prefix of the input must be answered the same way or as
 * incomplete, as bytes arrive in pieces from a socket.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../head/services/http.h" /* by path: -Ihead would let head/core/sched.h shadow <sched.h> */

static void check_one(const char *buf, size_t len, int *status_out, size_t *used_out) {
    hv_http_request_t req;
    size_t used = 0;
    int status = 0;
    hv_err rc = hv_http_parse(buf, len, &req, &used, &status);
    if (rc == HV_OK && used > 0) {
        if (used > len || used > HV_HTTP_MAX_HEAD + HV_HTTP_MAX_BODY || req.path[0] != '/' ||
            memchr(req.path, '\0', sizeof(req.path)) == NULL ||
            memchr(req.query, '\0', sizeof(req.query)) == NULL ||
            memchr(req.authorization, '\0', sizeof(req.authorization)) == NULL ||
            memchr(req.cookie, '\0', sizeof(req.cookie)) == NULL ||
            req.body_len > HV_HTTP_MAX_BODY || (req.body_len > 0 && !req.post) ||
            req.body[req.body_len] != '\0') {
            abort();
        }
        /* The login's readers of the cookie and the form (head/services/page_serve.c). */
        char v[80];
        if (hv_http_cookie_get(req.cookie, "hv_session", v, sizeof(v)) &&
            memchr(v, '\0', sizeof(v)) == NULL) {
            abort();
        }
        if (hv_http_form_get(req.body, req.body_len, "token", v, sizeof(v))) {
            size_t n = strlen(v);
            for (size_t i = 0; i < n; i++) {
                if ((unsigned char)v[i] < 0x20) {
                    abort();
                }
            }
        }
    } else if (rc == HV_OK) {
        if (len >= HV_HTTP_MAX_HEAD + HV_HTTP_MAX_BODY) {
            abort(); /* a full buffer must be answered, or a connection would wait forever */
        }
    } else if (rc != HV_EPROTO || status < 400 || status > 599) {
        abort();
    }
    *status_out = rc == HV_OK ? 0 : status;
    *used_out = used;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > HV_HTTP_MAX_HEAD + HV_HTTP_MAX_BODY + 64) {
        size = HV_HTTP_MAX_HEAD + HV_HTTP_MAX_BODY + 64;
    }
    char *buf = malloc(size ? size : 1);
    if (buf == NULL) {
        return 0;
    }
    memcpy(buf, data, size); /* an exact-size copy: ASan sees any read past the end */
    int status;
    size_t used;
    check_one(buf, size, &status, &used);
    if (size > 1) {
        /* A prefix is incomplete or gets the same answer (it cannot be accepted differently). */
        int s2;
        size_t u2;
        check_one(buf, size / 2, &s2, &u2);
        if (u2 > 0 && (status != 0 || used != u2)) {
            abort();
        }
    }
    free(buf);
    return 0;
}
