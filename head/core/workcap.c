/* workcap: see workcap.h. */
#include "workcap.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "sched.h"

#define WCAP_MAX_LABELS 64

hv_err hv_wcap_live(uint64_t job_id, const hv_wcap_job_t *j, char *why, size_t whylen) {
    if (j == NULL || !j->known) {
        snprintf(why, whylen,
                 "the credential of job %" PRIu64 "'s workers is no longer valid: the head no "
                 "longer knows job %" PRIu64 " (it ended and left the history)",
                 job_id, job_id);
        return HV_EAUTH;
    }
    if (hv_job_state_terminal(j->state)) {
        snprintf(why, whylen,
                 "the credential of job %" PRIu64 "'s workers is no longer valid: job %" PRIu64
                 " has ended (%s)",
                 job_id, job_id, hv_job_state_name(j->state));
        return HV_EAUTH;
    }
    return HV_OK;
}

/* The value of key in labels ("k=v,k=v"), into out: 1 when the key is there (several times:
 * the first), else 0. A pair without '=' has the empty value. */
static int label_value(const char *labels, const char *key, char *out, size_t len) {
    size_t klen = strlen(key);
    out[0] = '\0';
    for (const char *p = labels; p != NULL && *p != '\0';) {
        const char *end = strchr(p, ',');
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        size_t k = eq != NULL ? (size_t)(eq - p) : n;
        if (k == klen && memcmp(p, key, klen) == 0) {
            size_t v = eq != NULL ? n - k - 1 : 0;
            snprintf(out, len, "%.*s", (int)v, eq != NULL ? eq + 1 : "");
            return 1;
        }
        p = end != NULL ? end + 1 : NULL;
    }
    return 0;
}

/* Pairs in labels ("" and NULL: 0). */
static size_t label_count(const char *labels) {
    size_t n = 0;
    for (const char *p = labels; p != NULL && *p != '\0'; n++) {
        p = strchr(p, ',');
        p = p != NULL ? p + 1 : NULL;
    }
    return n;
}

int hv_wcap_node_identity(const char *labels, char *out, size_t len) {
    return label_value(labels, HV_WCAP_RUN_AS_LABEL, out, len) && out[0] != '\0';
}

hv_err hv_wcap_actor_labels(uint64_t job_id, const char *worker_node, const char *want,
                            const char *const *nodes, size_t n, char *out, size_t outlen, char *why,
                            size_t whylen) {
    char id[300], asked[300];
    want = want != NULL ? want : "";
    if (!hv_wcap_node_identity(worker_node, id, sizeof(id))) {
        snprintf(why, whylen,
                 "permission denied: the node of this worker of job %" PRIu64
                 " does not say which user it runs workers as (its agent sets no %s label: an "
                 "older agent), so an actor of its job cannot be held to that user",
                 job_id, HV_WCAP_RUN_AS_LABEL);
        return HV_EPERM;
    }
    int has = label_value(want, HV_WCAP_RUN_AS_LABEL, asked, sizeof(asked));
    if (has && strcmp(asked, id) != 0) {
        snprintf(why, whylen,
                 "permission denied: the workers of job %" PRIu64
                 " run as '%s': an actor one of them creates runs as that user only, not "
                 "'%.80s' (label %s)",
                 job_id, id, asked, HV_WCAP_RUN_AS_LABEL);
        return HV_EPERM;
    }
    size_t pairs = label_count(want) + (has ? 0 : 1);
    int w = has ? snprintf(out, outlen, "%s", want)
                : snprintf(out, outlen, "%s%s%s=%s", want, want[0] != '\0' ? "," : "",
                           HV_WCAP_RUN_AS_LABEL, id);
    if (pairs > WCAP_MAX_LABELS || w < 0 || (size_t)w >= outlen) {
        snprintf(why, whylen,
                 "labels: an actor a job's worker creates also needs %s=%s: at most %d labels "
                 "with it",
                 HV_WCAP_RUN_AS_LABEL, id, WCAP_MAX_LABELS - 1);
        return HV_EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if (hv_sched_labels_have(nodes[i], out)) {
            return HV_OK;
        }
    }
    snprintf(why, whylen,
             "permission denied: an actor that a worker of job %" PRIu64
             " creates runs as that job's user '%s' only (on nodes labelled %s=%s), and none of "
             "the %zu live nodes is one%s%.200s",
             job_id, id, HV_WCAP_RUN_AS_LABEL, id, n, want[0] != '\0' ? " with labels " : "", want);
    return HV_EPERM;
}
