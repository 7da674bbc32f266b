/* keeper: see keeper.h. */
#include "keeper.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "copygrant.h"
#include "copykeep.h"
#include "log.h"
#include "mem.h"
#include "util.h"

#define KEEPER_CHUNK_MAX ((size_t)1 << 20) /* bytes a Put carries and a Read returns at most */

struct hv_keeper_s {
    hv_rpc_server_t *srv;
    hv_copykeep_t *keep;
    uint64_t node_id;
    char cred[HV_RPC_MAX_TOKEN + 1]; /* "" until joined */
};

/* Is the grant shown with g's fields the head's for g's verb at this node? When not, ends the
 * call saying why and returns 0. */
static int grant_ok(hv_rpc_call_t *c, const hv_keeper_t *k, const hv_copygrant_t *g,
                    const char *grant) {
    if (k->cred[0] == '\0' || g->keeper_node != k->node_id) {
        hv_rpc_finish(c, HV_EAUTH, "this agent is not node %llu's keeper now",
                      (unsigned long long)g->keeper_node);
        return 0;
    }
    hv_err rc = hv_copygrant_check(k->cred, g, grant, hv_wall_ms());
    if (rc != HV_OK) {
        hv_rpc_finish(c, rc, "%s",
                      rc == HV_EPERM ? "the grant expired"
                                     : "the grant was not made by the head for this copy");
        return 0;
    }
    return 1;
}

static void keeper_put(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_keeper_t *k = ud;
    const Hvpb__V1__KeepChunk *r = (const Hvpb__V1__KeepChunk *)m;
    char why[300];
    hv_copygrant_t g = {.verb = HV_COPYGRANT_PUT,
                        .keeper_node = r->keeper_node,
                        .job_id = r->job_id,
                        .generation = r->generation,
                        .commit = r->commit,
                        .size = r->size,
                        .expires_ms = r->expires_ms};
    if (!grant_ok(c, k, &g, r->grant)) {
        return;
    }
    hv_err rc;
    if (r->data.len > KEEPER_CHUNK_MAX) {
        hv_rpc_finish(c, HV_EINVAL, "a chunk of %zu bytes: at most %zu", r->data.len,
                      KEEPER_CHUNK_MAX);
        return;
    }
    int complete = 0;
    rc = hv_copykeep_put(k->keep, r->job_id, r->generation, r->commit, r->size, r->offset,
                         r->data.data, r->data.len, r->sha256, hv_now_ms(), &complete, why,
                         sizeof(why));
    if (rc != HV_OK) {
        hv_rpc_finish(c, rc, "%s", why);
        return;
    }
    if (complete) {
        HV_LOG(HV_LOG_INFO, "keeper", "HV-KEEPER-COPY",
               "keeps job %llu's copy of generation %u, commit %llu (%llu bytes)",
               (unsigned long long)r->job_id, r->generation, (unsigned long long)r->commit,
               (unsigned long long)r->size);
    }
    Hvpb__V1__KeepReply rep = HVPB__V1__KEEP_REPLY__INIT;
    rep.complete = complete;
    hv_rpc_reply(c, &rep.base);
}

static void keeper_read(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    hv_keeper_t *k = ud;
    const Hvpb__V1__ReadKeptRequest *r = (const Hvpb__V1__ReadKeptRequest *)m;
    hv_copygrant_t g = {.verb = HV_COPYGRANT_FETCH,
                        .keeper_node = r->keeper_node,
                        .job_id = r->job_id,
                        .generation = r->generation,
                        .commit = r->commit,
                        .size = r->size,
                        .expires_ms = r->expires_ms};
    if (!grant_ok(c, k, &g, r->grant)) {
        return;
    }
    hv_err rc;
    size_t cap =
        r->max_bytes == 0 || r->max_bytes > KEEPER_CHUNK_MAX ? KEEPER_CHUNK_MAX : r->max_bytes;
    uint8_t *buf = hv_malloc(cap);
    if (buf == NULL) {
        hv_rpc_finish(c, HV_ENOMEM, "out of memory");
        return;
    }
    size_t n = 0;
    hv_copykeep_info_t info;
    rc = hv_copykeep_read(k->keep, r->job_id, r->generation, r->commit, r->offset, buf, cap, &n,
                          &info, hv_now_ms());
    if (rc == HV_OK && info.size != r->size) {
        rc = HV_ENOTFOUND;
    }
    if (rc != HV_OK) {
        hv_free(buf);
        hv_rpc_finish(c, HV_ENOTFOUND,
                      "no complete copy of job %llu, generation %u, commit %llu "
                      "here",
                      (unsigned long long)r->job_id, r->generation, (unsigned long long)r->commit);
        return;
    }
    Hvpb__V1__ReadKeptReply rep = HVPB__V1__READ_KEPT_REPLY__INIT;
    rep.data.data = buf;
    rep.data.len = n;
    rep.sha256 = info.sha256;
    hv_rpc_reply(c, &rep.base);
    hv_free(buf);
}

hv_err hv_keeper_create(hv_rpc_engine_t *e, const char *host, uint64_t cap, const hv_rpc_tls_t *tls,
                        hv_keeper_t **out, char *addr, size_t addrlen, char *err, size_t errlen) {
    hv_keeper_t *k = hv_calloc(1, sizeof(*k));
    if (k == NULL || hv_copykeep_create(cap, &k->keep) != HV_OK) {
        hv_free(k);
        return HV_ENOMEM;
    }
    int v6 = strchr(host, ':') != NULL;
    char listen[300];
    snprintf(listen, sizeof(listen), v6 ? "[%s]:0" : "%s:0", host);
    int port = 0;
    hv_err rc = hv_rpc_server_create_tls(e, listen, tls, &k->srv, &port, err, errlen);
    if (rc == HV_OK) {
        const hv_rpc_method_t ms[] = {
            {"/hvpb.v1.Keeper/Put", HV_RPC_UNARY, &hvpb__v1__keep_chunk__descriptor, keeper_put,
             NULL, k},
            {"/hvpb.v1.Keeper/Read", HV_RPC_UNARY, &hvpb__v1__read_kept_request__descriptor,
             keeper_read, NULL, k},
        };
        rc = hv_rpc_server_add_n(k->srv, ms, sizeof(ms) / sizeof(ms[0]));
        if (rc == HV_OK) {
            rc = hv_rpc_server_start(k->srv);
        }
        if (rc != HV_OK) {
            snprintf(err, errlen, "cannot serve on %s: %s", listen, hv_strerror(rc));
            hv_rpc_server_shutdown(k->srv);
        }
    }
    if (rc != HV_OK) {
        hv_copykeep_destroy(k->keep);
        hv_free(k);
        return rc;
    }
    snprintf(addr, addrlen, v6 ? "[%s]:%d" : "%s:%d", host, port);
    *out = k;
    return HV_OK;
}

void hv_keeper_set_identity(hv_keeper_t *k, uint64_t node_id, const char *cred) {
    k->node_id = node_id;
    snprintf(k->cred, sizeof(k->cred), "%s", cred != NULL ? cred : "");
}

void hv_keeper_release(hv_keeper_t *k, const Hvpb__V1__CopyRelease *r) {
    size_t n = 0;
    if (r->drop_all) {
        hv_copykeep_drop_job(k->keep, r->job_id);
    } else {
        hv_copykeep_release(k->keep, r->job_id, r->generation, r->commit, &n);
    }
    hv_copykeep_stats_t st;
    hv_copykeep_stats(k->keep, &st);
    HV_LOG(HV_LOG_DEBUG, "keeper", "HV-KEEPER-RELEASE",
           "job %llu: %s; %zu copies here, %" PRIu64 " of %" PRIu64 " bytes",
           (unsigned long long)r->job_id,
           r->drop_all ? "every copy dropped" : "older copies dropped", st.copies, st.used, st.cap);
}

void hv_keeper_shutdown(hv_keeper_t *k) {
    if (k != NULL && k->srv != NULL) {
        hv_rpc_server_shutdown(k->srv);
    }
}

void hv_keeper_destroy(hv_keeper_t *k) {
    if (k == NULL) {
        return;
    }
    hv_copykeep_destroy(k->keep);
    memset(k->cred, 0, sizeof(k->cred));
    hv_free(k);
}
