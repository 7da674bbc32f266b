/*
 * rdzv_head: the rendezvous client for the head's Rendezvous service (proto/hv.proto: JoinRound,
 * Done, KvPut, KvGet), over the blocking calls of common/rpc.h. It is the only worker_lib file
 * that sees protobuf types; it converts them to hv__rdzv_assignment_t and checks what the head
 * sent (ranks in range, addresses present) before anything else uses it. WatchMembers (the
 * membership push) belongs to the elastic layer, not here.
 */
#include "rdzv.h"

#include <stdio.h>
#include <string.h>

#include "hv.pb-c.h"
#include "log.h"
#include "mem.h"
#include "rpc.h"

#define HEAD_CALL_MS 10000       // Done, KvPut: plain unary calls
#define HEAD_JOIN_SLACK_MS 10000 // JoinRound blocks until the round closes; give it room
#define HEAD_KV_VALUE_MAX (64u << 10)

typedef struct head_client_s {
    hv_rpc_channel_t *ch; // owned
    uint64_t job_id;
    uint64_t worker_id;
    char target[256];
} head_client_t;

static hv_err head_join(void *ctx, const char *my_addr, const char *my_host, uint32_t last_gen,
                        uint32_t timeout_ms, hv__rdzv_assignment_t *out) {
    (void)my_host; // the head knows the node from the agent that spawned us
    head_client_t *c = ctx;
    Hvpb__V1__RdzvJoinRequest req = HVPB__V1__RDZV_JOIN_REQUEST__INIT;
    req.job_id = c->job_id;
    req.worker_id = c->worker_id;
    req.addr = (char *)my_addr;
    req.last_generation = last_gen;
    ProtobufCMessage *resp = NULL;
    hv_rpc_status_t st;
    hv_err rc = hv_rpc_unary(c->ch, "/hvpb.v1.Rendezvous/JoinRound", &req.base,
                             &hvpb__v1__rdzv_join_reply__descriptor,
                             timeout_ms + HEAD_JOIN_SLACK_MS, &resp, &st);
    if (rc != HV_OK) {
        HV_LOG(rc == HV_ENOTSUP ? HV_LOG_INFO : HV_LOG_ERROR, "rdzv", "HV-RDZV-JOIN",
               "job %llu worker %llu: JoinRound at %s failed: %s (%s)",
               (unsigned long long)c->job_id, (unsigned long long)c->worker_id, c->target,
               hv_strerror(rc), st.msg);
        return rc;
    }
    Hvpb__V1__RdzvJoinReply *r = (Hvpb__V1__RdzvJoinReply *)resp;
    hv__rdzv_assignment_t a = {0};
    rc = HV_EPROTO;
    if (r->size == 0 || r->rank >= r->size || r->n_peers != r->size || r->size > (1u << 20)) {
        HV_LOG(HV_LOG_ERROR, "rdzv", "HV-RDZV-REPLY",
               "JoinRound reply is inconsistent: rank %u size %u with %zu peers", r->rank, r->size,
               r->n_peers);
        goto out;
    }
    a.peers = hv_calloc(r->size, sizeof(hv__rdzv_peer_t));
    if (a.peers == NULL) {
        rc = HV_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < r->n_peers; i++) {
        const Hvpb__V1__PeerInfo *p = r->peers[i];
        if (p->rank >= r->size || a.peers[p->rank].addr[0] != '\0' || p->addr == NULL ||
            p->addr[0] == '\0' || strlen(p->addr) >= HV_RDZV_ADDR_MAX) {
            HV_LOG(HV_LOG_ERROR, "rdzv", "HV-RDZV-REPLY",
                   "JoinRound reply: peer %zu (rank %u, addr '%s') is invalid or duplicated", i,
                   p->rank, p->addr ? p->addr : "");
            goto out;
        }
        hv__rdzv_peer_t *q = &a.peers[p->rank];
        q->rank = (int)p->rank;
        q->worker_id = p->worker_id;
        snprintf(q->addr, sizeof(q->addr), "%s", p->addr);
        snprintf(q->host, sizeof(q->host), "%s", p->host ? p->host : "");
    }
    a.world_id = c->job_id;
    a.generation = r->generation;
    a.rank = (int)r->rank;
    a.size = (int)r->size;
    a.local_rank = (int)r->local_rank;
    a.local_size = (int)r->local_size;
    a.cross_rank = (int)r->cross_rank;
    a.cross_size = (int)r->cross_size;
    if (a.local_size == 0 || a.local_rank >= a.local_size || a.cross_size == 0) {
        hv__rdzv_fill_topology(&a); // an older head: derive from the peers' hosts
    }
    *out = a;
    a.peers = NULL;
    rc = HV_OK;
out:
    hv_free(a.peers);
    hv_rpc_msg_free(resp);
    return rc;
}

static hv_err head_done(void *ctx) {
    head_client_t *c = ctx;
    Hvpb__V1__RdzvDoneRequest req = HVPB__V1__RDZV_DONE_REQUEST__INIT;
    req.job_id = c->job_id;
    req.worker_id = c->worker_id;
    ProtobufCMessage *resp = NULL;
    hv_rpc_status_t st;
    hv_err rc = hv_rpc_unary(c->ch, "/hvpb.v1.Rendezvous/Done", &req.base,
                             &hvpb__v1__rdzv_done_reply__descriptor, HEAD_CALL_MS, &resp, &st);
    if (rc != HV_OK) {
        HV_LOG(HV_LOG_WARN, "rdzv", "HV-RDZV-DONE", "job %llu worker %llu: Done failed: %s (%s)",
               (unsigned long long)c->job_id, (unsigned long long)c->worker_id, hv_strerror(rc),
               st.msg);
    }
    hv_rpc_msg_free(resp);
    return rc;
}

static hv_err head_kv_put(void *ctx, const char *key, const void *value, size_t len) {
    head_client_t *c = ctx;
    if (strlen(key) > 256 || len > HEAD_KV_VALUE_MAX) {
        return HV_ETOOBIG;
    }
    Hvpb__V1__KvPutRequest req = HVPB__V1__KV_PUT_REQUEST__INIT;
    req.job_id = c->job_id;
    req.key = (char *)key;
    req.value.data = (uint8_t *)value;
    req.value.len = len;
    ProtobufCMessage *resp = NULL;
    hv_err rc = hv_rpc_unary(c->ch, "/hvpb.v1.Rendezvous/KvPut", &req.base,
                             &hvpb__v1__kv_put_reply__descriptor, HEAD_CALL_MS, &resp, NULL);
    hv_rpc_msg_free(resp);
    return rc;
}

static hv_err head_kv_get(void *ctx, const char *key, uint32_t wait_ms, void **value, size_t *len) {
    head_client_t *c = ctx;
    Hvpb__V1__KvGetRequest req = HVPB__V1__KV_GET_REQUEST__INIT;
    req.job_id = c->job_id;
    req.key = (char *)key;
    req.wait_ms = wait_ms;
    ProtobufCMessage *resp = NULL;
    hv_err rc =
        hv_rpc_unary(c->ch, "/hvpb.v1.Rendezvous/KvGet", &req.base,
                     &hvpb__v1__kv_get_reply__descriptor, wait_ms + HEAD_CALL_MS, &resp, NULL);
    if (rc != HV_OK) {
        return rc;
    }
    Hvpb__V1__KvGetReply *r = (Hvpb__V1__KvGetReply *)resp;
    if (!r->found) {
        rc = HV_ENOTFOUND;
    } else if (r->value.len > HEAD_KV_VALUE_MAX) {
        rc = HV_ETOOBIG;
    } else {
        void *copy = hv_malloc(r->value.len);
        if (copy == NULL) {
            rc = HV_ENOMEM;
        } else {
            if (r->value.len > 0) {
                memcpy(copy, r->value.data, r->value.len);
            }
            *value = copy;
            *len = r->value.len;
        }
    }
    hv_rpc_msg_free(resp);
    return rc;
}

static void head_destroy(void *ctx) {
    head_client_t *c = ctx;
    hv_rpc_channel_destroy(c->ch);
    hv_free(c);
}

static const hv__rdzv_ops_t head_ops = {
    .name = "head",
    .join = head_join,
    .done = head_done,
    .kv_put = head_kv_put,
    .kv_get = head_kv_get,
    .destroy = head_destroy,
};

hv_err hv__rdzv_head_client(const char *head_addr, uint64_t job_id, uint64_t worker_id,
                            hv__rdzv_t *out) {
    head_client_t *c = hv_calloc(1, sizeof(*c));
    if (c == NULL) {
        return HV_ENOMEM;
    }
    snprintf(c->target, sizeof(c->target), "%s", head_addr);
    hv_err rc = hv_rpc_channel_create(head_addr, &c->ch);
    if (rc != HV_OK) {
        HV_LOG(HV_LOG_ERROR, "rdzv", "HV-RDZV-HEAD", "cannot open a channel to the head at %s: %s",
               head_addr, hv_strerror(rc));
        hv_free(c);
        return rc;
    }
    c->job_id = job_id;
    c->worker_id = worker_id;
    out->ops = &head_ops;
    out->ctx = c;
    return HV_OK;
}
