/*
 * actor_lookup: hv_actor_lookup (include/hv/actor.h), the caller's way from an actor's name to a
 * connection: one Actors.Get to the head (with the per-actor secret), waiting while the actor is
 * not alive yet, then hv_actor_connect. The head is only on this path, never on a call's. Uses
 * the rpc layer's blocking unary call (common/rpc.c), as rdzv_head.c does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "err.h"
#include "hv.pb-c.h"
#include "mem.h"
#include "rpc.h"
#include "util.h"

#include "actor_wire.h"
#include "hv/actor.h"

#define LOOKUP_DEFAULT_MS 10000u
#define LOOKUP_POLL_MS 100u

/* The credential to present: given, else $HV_WORKER_SECRET, else the file $HV_TOKEN_FILE's
 * first line. 0 when none. */
static int lookup_cred(const char *given, char *buf, size_t len) {
    if (given != NULL && given[0] != '\0') {
        snprintf(buf, len, "%s", given);
        return 1;
    }
    const char *w = getenv("HV_WORKER_SECRET");
    if (w != NULL && w[0] != '\0') {
        snprintf(buf, len, "%s", w);
        return 1;
    }
    const char *path = getenv("HV_TOKEN_FILE");
    FILE *f = path != NULL && path[0] != '\0' ? fopen(path, "re") : NULL;
    if (f == NULL) {
        return 0;
    }
    int ok = fgets(buf, (int)len, f) != NULL;
    fclose(f);
    buf[strcspn(buf, "\r\n")] = '\0';
    return ok && buf[0] != '\0';
}

static void sleep_ms(uint32_t ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The resolver's hv__actor_resolve_fn (actor_wire.h). */
/* The actor's state by its typed code; a head too old to send one (UNSPECIFIED) is read by the
 * word it sent instead. */
static int actor_is(const Hvpb__V1__ActorView *v, Hvpb__V1__ActorState code, const char *word) {
    if (v->state_code != HVPB__V1__ACTOR_STATE__ACTOR_STATE_UNSPECIFIED) {
        return v->state_code == code;
    }
    return strcmp(v->state, word) == 0;
}

static hv_err lookup_resolve_open(const hv__actor_resolver_t *r, uint32_t timeout_ms,
                                  const hv_actor_connect_config_t *cfg, volatile int *cancel,
                                  int *fd, uint32_t *max_frame, char *addr_out, size_t addrlen,
                                  uint32_t *max_call_retries, char *err, size_t errlen) {
    const char *ca = getenv("HV_CA_FILE");
    hv_rpc_tls_t tls = {.ca_file = ca};
    hv_rpc_channel_t *ch = NULL;
    char cerr[512] = "";
    hv_err rc = hv_rpc_channel_create_tls(r->head, ca != NULL && ca[0] != '\0' ? &tls : NULL, &ch,
                                          cerr, sizeof(cerr));
    if (rc == HV_OK) {
        rc = hv_rpc_channel_set_token(ch, r->cred);
    }
    if (rc != HV_OK) {
        snprintf(err, errlen, "cannot reach the head at %s: %s", r->head,
                 cerr[0] ? cerr : hv_strerror(rc));
        hv_rpc_channel_destroy(ch);
        return rc;
    }
    uint32_t limit = timeout_ms != 0 ? timeout_ms : LOOKUP_DEFAULT_MS;
    uint64_t start = hv_now_ms();
    /* No namespace: the head decides (a job's worker: its job's, hvsubmit --namespace; a
     * client: "default"). */
    Hvpb__V1__ActorRef ref = HVPB__V1__ACTOR_REF__INIT;
    ref.name = (char *)r->name;
    ref.namespace_ = (char *)r->ns;
    Hvpb__V1__GetActorRequest req = HVPB__V1__GET_ACTOR_REQUEST__INIT;
    req.ref = &ref;
    req.with_secret = 1;
    for (;;) {
        if (cancel != NULL && *cancel) {
            snprintf(err, errlen, "cancelled");
            rc = HV_ECANCELED;
            break;
        }
        uint64_t now = hv_now_ms();
        uint32_t left = now - start < limit ? (uint32_t)(limit - (now - start)) : 1;
        ProtobufCMessage *resp = NULL;
        hv_rpc_status_t st;
        memset(&st, 0, sizeof(st));
        rc = hv_rpc_unary(ch, "/hvpb.v1.Actors/Get", &req.base, &hvpb__v1__actor_view__descriptor,
                          left < 5000 ? left : 5000, &resp, &st);
        if (rc != HV_OK) {
            snprintf(err, errlen, "the head at %s: %s", r->head,
                     st.msg[0] ? st.msg : hv_strerror(rc));
            if ((rc == HV_EUNAVAIL || rc == HV_ETIMEDOUT) && cancel != NULL &&
                hv_now_ms() - start + LOOKUP_POLL_MS < limit) {
                sleep_ms(LOOKUP_POLL_MS); /* re-resolving: the head may be restarting */
                continue;
            }
            break;
        }
        Hvpb__V1__ActorView *v = (Hvpb__V1__ActorView *)resp;
        if (actor_is(v, HVPB__V1__ACTOR_STATE__ACTOR_STATE_DEAD, "dead")) {
            snprintf(err, errlen, "actor '%s' in namespace '%s' is dead (%s): %s", r->name,
                     v->namespace_, v->cause, v->reason);
            rc = HV_ENOTFOUND;
        } else if (actor_is(v, HVPB__V1__ACTOR_STATE__ACTOR_STATE_ALIVE, "alive") &&
                   v->address[0] != '\0') {
            snprintf(addr_out, addrlen, "%s", v->address);
            *max_call_retries = v->max_call_retries;
            rc = hv__actor_open(addr_out, v->secret, cfg, fd, max_frame, err, errlen);
            memset(v->secret, 0, strlen(v->secret));
            hv_rpc_msg_free(resp);
            /* A process that just ended (restarting): the head learns it soon; ask again. */
            if (rc != HV_EUNAVAIL || hv_now_ms() - start + LOOKUP_POLL_MS >= limit) {
                break;
            }
            sleep_ms(LOOKUP_POLL_MS);
            continue;
        } else if (hv_now_ms() - start + LOOKUP_POLL_MS >= limit) {
            snprintf(err, errlen, "actor '%s' in namespace '%s' is %s after %u ms%s%s", r->name,
                     v->namespace_, v->state, limit, v->reason[0] ? ": " : "", v->reason);
            rc = HV_ETIMEDOUT;
        } else {
            memset(v->secret, 0, strlen(v->secret));
            hv_rpc_msg_free(resp);
            sleep_ms(LOOKUP_POLL_MS);
            continue;
        }
        memset(v->secret, 0, strlen(v->secret));
        hv_rpc_msg_free(resp);
        break;
    }
    hv_rpc_channel_destroy(ch);
    return rc;
}

hv_err hv_actor_lookup(const char *head, const char *credential, const char *ns, const char *name,
                       uint32_t timeout_ms, const hv_actor_connect_config_t *cfg, hv_actor_t **out,
                       char *err, size_t errlen) {
    if (out == NULL || name == NULL || name[0] == '\0' || err == NULL || errlen == 0) {
        if (err != NULL && errlen > 0) {
            snprintf(err, errlen, "hv_actor_lookup: name the actor");
        }
        return HV_EINVAL;
    }
    hv__actor_resolver_t r;
    memset(&r, 0, sizeof(r));
    if (head == NULL || head[0] == '\0') {
        head = getenv("HV_HEAD");
    }
    if (head == NULL || head[0] == '\0') {
        snprintf(err, errlen, "no head to ask: pass its address or set HV_HEAD");
        return HV_EINVAL;
    }
    if (strlen(head) >= sizeof(r.head) || strlen(name) >= sizeof(r.name) ||
        (ns != NULL && strlen(ns) >= sizeof(r.ns))) {
        snprintf(err, errlen,
                 "hv_actor_lookup: the head's address, the name or the namespace is "
                 "too long");
        return HV_EINVAL;
    }
    if (!lookup_cred(credential, r.cred, sizeof(r.cred))) {
        snprintf(err, errlen,
                 "no credential for the head: HV_WORKER_SECRET (in a job's worker), "
                 "HV_TOKEN_FILE (a client token) or pass one");
        return HV_EAUTH;
    }
    r.resolve_open = lookup_resolve_open;
    snprintf(r.head, sizeof(r.head), "%s", head);
    snprintf(r.name, sizeof(r.name), "%s", name);
    snprintf(r.ns, sizeof(r.ns), "%s", ns != NULL ? ns : "");
    int fd = -1;
    uint32_t max_frame = 0, retries = 0;
    char addr[256];
    hv_err rc = lookup_resolve_open(&r, timeout_ms, cfg, NULL, &fd, &max_frame, addr, sizeof(addr),
                                    &retries, err, errlen);
    if (rc == HV_OK) {
        rc = hv__actor_wrap(fd, addr, max_frame, cfg, &r, retries, out, err, errlen);
    }
    memset(&r, 0, sizeof(r));
    return rc;
}
