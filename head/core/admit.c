/* admit: see admit.h. */
#include "admit.h"

#include <stdio.h>
#include <string.h>

static void refuse(hv_admit_t *out, hv_admit_refusal why, hv_err rc) {
    out->by = HV_ADMIT_REFUSED;
    out->refusal = why;
    out->rc = rc;
}

void hv_admit_decide(const hv_admit_ask_t *a, hv_admit_t *out) {
    memset(out, 0, sizeof(*out));
    out->verdict = HV_JTOKEN_WRONG;
    const char *t = a->token != NULL ? a->token : "";
    if (a->static_token != NULL && a->static_token[0] != '\0' &&
        hv_creds_equal(a->static_token, t)) {
        out->by = HV_ADMIT_BY_TOKEN;
        return;
    }
    int jbad = 0;
    if (strncmp(t, "hvj_", 4) == 0 && !a->renewal) {
        /* A re-joining agent's node credential decides below: it spends no use. */
        char sha[65];
        if (!hv_creds_jtoken_parse(t, out->jtoken, sha)) {
            snprintf(out->jtoken, sizeof(out->jtoken), "?");
        } else if (a->jtoken != NULL) {
            const hv_jtoken_row_t *r = a->jtoken;
            out->verdict = hv_creds_jtoken_check(r->secret_sha256, sha, r->expires_ms, r->max_uses,
                                                 r->uses, r->revoked_ms, a->now_ms);
        }
        if (out->verdict == HV_JTOKEN_OK) {
            out->by = HV_ADMIT_BY_JTOKEN;
            return;
        }
        jbad = 1;
    }
    if (a->instance) {
        if (!a->instance_admits) {
            refuse(out, HV_ADMIT_NOT_INSTANCE, HV_EPERM);
            return;
        }
        out->by = HV_ADMIT_BY_INSTANCE;
        return;
    }
    if (a->renewal) {
        out->by = HV_ADMIT_BY_NODE;
        out->node = a->cred_node;
        return;
    }
    refuse(out, jbad ? HV_ADMIT_JTOKEN_BAD : HV_ADMIT_WRONG_TOKEN, HV_EAUTH);
}

void hv_admit_node(hv_admit_t *a, uint64_t known_node) {
    if (a->by == HV_ADMIT_BY_NODE && (known_node == 0 || known_node != a->node)) {
        refuse(a, HV_ADMIT_NOT_THIS_NODE, HV_EPERM);
    }
}
