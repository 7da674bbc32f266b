/*
 * head_cluster: the Cluster service, i.e. everything node-facing. Join registers a node (by name;
 * a new incarnation means the agent restarted and its old workers are gone). The Session stream
 * carries heartbeats that extend the node's lease, the agent's events (worker started/exited, log
 * lines, drain notices) and the head's orders. Events with a seq are acknowledged after they are
 * applied and stored, so an agent re-sends them after a reconnect and none is lost; applying one
 * twice is harmless (the driver ignores repeats). After a reconnect the head reconciles at the
 * first heartbeat: by then every re-sent event has been applied (the stream is ordered), so a
 * worker the head believes alive that the agent did not list really is gone.
 * Fetch streams a stored artifact to an agent. Called from the head's loop thread only.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "head.h"
#include "log.h"
#include "mem.h"
#include "util.h"

#define FETCH_CHUNK (1u << 20)
#define FETCH_WINDOW 4
#define SEEN_PERSIST_MS 10000

/* Constant-time comparison, so the token cannot be guessed byte by byte from timings. */
static int token_ok(const head_t *h, const char *given) {
    const char *want = h->cfg.token ? h->cfg.token : "";
    size_t lw = strlen(want), lg = given ? strlen(given) : 0;
    unsigned char diff = (unsigned char)(lw != lg);
    for (size_t i = 0; i < lw; i++) {
        diff |= (unsigned char)(want[i] ^ (i < lg ? given[i] : 0));
    }
    return diff == 0 && lw > 0;
}

head_node_t *head_node_by_id(head_t *h, uint64_t id) {
    for (head_node_t *n = h->nodes; n != NULL; n = n->next) {
        if (n->row.id == id) {
            return n;
        }
    }
    return NULL;
}

static head_node_t *node_by_name(head_t *h, const char *name) {
    for (head_node_t *n = h->nodes; n != NULL; n = n->next) {
        if (strcmp(n->row.name, name) == 0) {
            return n;
        }
    }
    return NULL;
}

hv_err head_node_send(head_node_t *n, const Hvpb__V1__HeadMsg *msg) {
    if (n == NULL || n->session == NULL) {
        return HV_ECLOSED;
    }
    return hv_rpc_send(n->session, &msg->base);
}

static char *join_strings(char **v, size_t n) {
    size_t len = 1;
    for (size_t i = 0; i < n; i++) {
        len += strlen(v[i]) + 1;
    }
    char *out = hv_malloc(len);
    if (out == NULL) {
        return NULL;
    }
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (i > 0) {
            strcat(out, ",");
        }
        strcat(out, v[i]);
    }
    return out;
}

static char *join_labels(Hvpb__V1__KeyValue **kv, size_t n) {
    size_t len = 1;
    for (size_t i = 0; i < n; i++) {
        len += strlen(kv[i]->key) + strlen(kv[i]->value) + 2;
    }
    char *out = hv_malloc(len);
    if (out == NULL) {
        return NULL;
    }
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (i > 0) {
            strcat(out, ",");
        }
        strcat(out, kv[i]->key);
        strcat(out, "=");
        strcat(out, kv[i]->value);
    }
    return out;
}

/* ---- Join ----------------------------------------------------------------------------------- */

static void cluster_join(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    head_t *h = ud;
    const Hvpb__V1__JoinRequest *req = (const Hvpb__V1__JoinRequest *)m;
    if (!token_ok(h, req->token)) {
        HV_LOG(HV_LOG_WARN, "cluster", "HV-JOIN-TOKEN", "refused a join from %s: wrong token",
               hv_rpc_call_peer(c));
        hv_rpc_finish(c, HV_EPERM, "wrong join token for cluster '%s'", h->cfg.cluster_name);
        return;
    }
    const Hvpb__V1__NodeInfo *info = req->node;
    if (info == NULL || info->name == NULL || info->name[0] == '\0' || strlen(info->name) > 128) {
        hv_rpc_finish(c, HV_EINVAL, "node name must be 1 to 128 characters");
        return;
    }
    if (info->slots == 0 || info->slots > 4096) {
        hv_rpc_finish(c, HV_EINVAL, "node %s: slots must be 1..4096, got %u", info->name,
                      info->slots);
        return;
    }
    uint64_t now = hv_now_ms();
    head_node_t *n = node_by_name(h, info->name);
    int is_new = n == NULL;
    if (is_new) {
        n = hv_calloc(1, sizeof(*n));
        if (n == NULL) {
            hv_rpc_finish(c, HV_ENOMEM, "out of memory");
            return;
        }
        n->row.registered_ms = hv_wall_ms();
    } else if (n->row.incarnation != req->incarnation) {
        /* The agent restarted: whatever it ran before is gone. */
        if (n->session != NULL) {
            hv_rpc_call_set_data(n->session, NULL);
            hv_rpc_call_cancel(n->session);
            n->session = NULL;
        }
        head_driver_node_dead(h, n, "the agent restarted");
    }
    head_set_str(&n->row.name, info->name);
    hv_free(n->row.addrs);
    n->row.addrs = join_strings(info->addrs, info->n_addrs);
    hv_free(n->row.labels);
    n->row.labels = join_labels(info->labels, info->n_labels);
    head_set_str(&n->row.instance_id, info->instance_id);
    head_set_str(&n->row.peer, hv_rpc_call_peer(c));
    head_set_str(&n->row.state, "alive");
    n->row.slots = info->slots;
    n->row.gpus = info->gpus;
    n->row.cpus = info->cpus;
    n->row.preemptible = info->preemptible;
    n->row.incarnation = req->incarnation;
    n->row.last_seen_ms = hv_wall_ms();
    n->persisted_seen_ms = n->row.last_seen_ms;
    hv_err rc = hv_store_node_upsert(h->store, &n->row);
    if (rc != HV_OK) {
        head_store_failed(h, rc, "register node");
        if (is_new) {
            hv_store_node_fini(&n->row);
            hv_free(n);
        }
        hv_rpc_finish(c, HV_EIO, "the head cannot store the node: %s", hv_strerror(rc));
        return;
    }
    if (is_new) {
        n->next = h->nodes;
        h->nodes = n;
    }
    n->lease_deadline = now + h->cfg.lease_ms;
    head_event(h, 0, n->row.id, "node.join", "node %s joined from %s: %u slots, %u GPUs%s",
               n->row.name, hv_rpc_call_peer(c), n->row.slots, n->row.gpus,
               n->row.preemptible ? ", preemptible" : "");
    Hvpb__V1__JoinReply rep = HVPB__V1__JOIN_REPLY__INIT;
    rep.node_id = n->row.id;
    rep.heartbeat_ms = h->cfg.heartbeat_ms;
    rep.lease_ms = h->cfg.lease_ms;
    rep.cluster_name = h->cfg.cluster_name;
    hv_rpc_reply(c, &rep.base);
    head_driver_schedule(h);
}

/* ---- Session -------------------------------------------------------------------------------- */

static void send_ack(head_node_t *n) {
    Hvpb__V1__HeadMsg ack = HVPB__V1__HEAD_MSG__INIT;
    ack.ack_seq = n->max_seq_applied;
    head_node_send(n, &ack);
}

static void session_hello(head_t *h, hv_rpc_call_t *c, const Hvpb__V1__AgentHello *hello) {
    if (!token_ok(h, hello->token)) {
        hv_rpc_finish(c, HV_EPERM, "wrong join token for cluster '%s'", h->cfg.cluster_name);
        return;
    }
    head_node_t *n = head_node_by_id(h, hello->node_id);
    if (n == NULL) {
        hv_rpc_finish(c, HV_ENOTFOUND, "unknown node id %llu: join again",
                      (unsigned long long)hello->node_id);
        return;
    }
    if (n->row.incarnation != hello->incarnation) {
        hv_rpc_finish(c, HV_ESTATE, "node %s has a newer agent; join again", n->row.name);
        return;
    }
    if (n->session != NULL && n->session != c) {
        hv_rpc_call_set_data(n->session, NULL);
        hv_rpc_call_cancel(n->session);
    }
    n->session = c;
    hv_rpc_call_set_data(c, n);
    n->lease_deadline = hv_now_ms() + h->cfg.lease_ms;
    hv_free(n->hello_running);
    n->hello_running = NULL;
    n->n_hello_running = 0;
    if (hello->n_running > 0) {
        n->hello_running = hv_calloc(hello->n_running, sizeof(uint64_t));
        if (n->hello_running != NULL) {
            for (size_t i = 0; i < hello->n_running; i++) {
                n->hello_running[i] = hello->running[i]->worker_id;
            }
            n->n_hello_running = hello->n_running;
        }
    }
    n->reconcile_pending = 1;
    n->max_seq_applied = 0;
    if (strcmp(n->row.state, "dead") == 0) {
        head_set_str(&n->row.state, "alive");
        hv_store_node_set_state(h->store, n->row.id, "alive", hv_wall_ms());
        head_event(h, 0, n->row.id, "node.back", "node %s is back", n->row.name);
    }
    HV_LOG(HV_LOG_INFO, "cluster", "HV-SESSION-OPEN", "node %s session open (%zu running)",
           n->row.name, (size_t)hello->n_running);
}

/* Runs at the first heartbeat after a hello; see the file comment. */
static void session_reconcile(head_t *h, head_node_t *n) {
    n->reconcile_pending = 0;
    for (head_job_t *j = h->jobs; j != NULL; j = j->next) {
        for (uint32_t r = 0; r < j->n_workers; r++) {
            head_worker_t *w = j->workers[r];
            if (w == NULL || w->node != n) {
                continue;
            }
            const char *st = w->row.state;
            if (strcmp(st, "running") != 0 && strcmp(st, "starting") != 0) {
                continue;
            }
            int listed = 0;
            for (size_t i = 0; i < n->n_hello_running; i++) {
                listed |= n->hello_running[i] == w->row.id;
            }
            if (!listed) {
                head_driver_worker_lost(h, w,
                                        "the worker was not running when its agent "
                                        "reconnected");
            }
        }
    }
    for (size_t i = 0; i < n->n_hello_running; i++) {
        head_worker_t *w = head_worker_by_id(h, n->hello_running[i]);
        int wanted =
            w != NULL && w->node == n && !w->job->ending &&
            (strcmp(w->row.state, "running") == 0 || strcmp(w->row.state, "starting") == 0);
        if (!wanted) {
            Hvpb__V1__HeadMsg msg = HVPB__V1__HEAD_MSG__INIT;
            Hvpb__V1__KillWorker k = HVPB__V1__KILL_WORKER__INIT;
            k.worker_id = n->hello_running[i];
            k.grace_ms = h->cfg.kill_grace_ms;
            k.reason = "the head no longer expects this worker";
            msg.body_case = HVPB__V1__HEAD_MSG__BODY_KILL;
            msg.kill = &k;
            head_node_send(n, &msg);
        }
    }
    hv_free(n->hello_running);
    n->hello_running = NULL;
    n->n_hello_running = 0;
}

static void session_msg(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    head_t *h = ud;
    const Hvpb__V1__AgentMsg *am = (const Hvpb__V1__AgentMsg *)m;
    head_node_t *n = hv_rpc_call_data(c);
    if (n == NULL) {
        if (am->body_case != HVPB__V1__AGENT_MSG__BODY_HELLO) {
            hv_rpc_finish(c, HV_EPROTO, "the first Session message must be a hello");
            return;
        }
        session_hello(h, c, am->hello);
        return;
    }
    if (n->session != c) {
        return; /* a superseded stream */
    }
    n->lease_deadline = hv_now_ms() + h->cfg.lease_ms;
    n->row.last_seen_ms = hv_wall_ms();
    if (am->seq != 0 && am->seq <= n->max_seq_applied) {
        send_ack(n); /* a re-sent event we already applied */
        return;
    }
    switch (am->body_case) {
    case HVPB__V1__AGENT_MSG__BODY_HEARTBEAT: {
        if (n->reconcile_pending) {
            session_reconcile(h, n);
        }
        Hvpb__V1__HeadMsg rep = HVPB__V1__HEAD_MSG__INIT;
        Hvpb__V1__Heartbeat hb = HVPB__V1__HEARTBEAT__INIT;
        hb.time_ms = hv_wall_ms();
        rep.ack_seq = n->max_seq_applied;
        rep.body_case = HVPB__V1__HEAD_MSG__BODY_HEARTBEAT;
        rep.heartbeat = &hb;
        head_node_send(n, &rep);
        break;
    }
    case HVPB__V1__AGENT_MSG__BODY_STARTED: {
        head_worker_t *w = head_worker_by_id(h, am->started->worker_id);
        if (w != NULL) {
            head_driver_worker_started(h, w, am->started->pid);
        }
        break;
    }
    case HVPB__V1__AGENT_MSG__BODY_EXITED: {
        head_worker_t *w = head_worker_by_id(h, am->exited->worker_id);
        if (w != NULL) {
            head_driver_worker_exited(h, w, am->exited->exit_code, am->exited->term_signal,
                                      am->exited->reason);
        }
        break;
    }
    case HVPB__V1__AGENT_MSG__BODY_LOG: {
        head_worker_t *w = head_worker_by_id(h, am->log->worker_id);
        if (w != NULL) {
            head_jobs_log(h, w, am->log->stream, am->log->lines, am->log->n_lines);
        }
        break;
    }
    case HVPB__V1__AGENT_MSG__BODY_DRAIN:
        if (strcmp(n->row.state, "draining") != 0) {
            head_set_str(&n->row.state, "draining");
            hv_store_node_set_state(h->store, n->row.id, "draining", n->row.last_seen_ms);
            head_event(h, 0, n->row.id, "node.drain", "node %s is draining: %s", n->row.name,
                       am->drain->reason ? am->drain->reason : "");
        }
        break;
    case HVPB__V1__AGENT_MSG__BODY_HELLO:
        hv_rpc_finish(c, HV_EPROTO, "hello sent twice");
        return;
    default:
        break;
    }
    if (am->seq != 0) {
        n->max_seq_applied = am->seq;
        send_ack(n);
    }
}

static void session_done(hv_rpc_call_t *c, const hv_rpc_status_t *st, void *ud) {
    head_t *h = ud;
    head_node_t *n = hv_rpc_call_data(c);
    if (n != NULL && n->session == c) {
        n->session = NULL;
        if (!h->stopping) {
            HV_LOG(HV_LOG_NOTICE, "cluster", "HV-SESSION-LOST",
                   "node %s: session ended (%s); lease runs until it reconnects", n->row.name,
                   st->msg[0] ? st->msg : hv_strerror(st->rc));
        }
    }
}

/* ---- Fetch ---------------------------------------------------------------------------------- */

typedef struct fetch_s {
    int fd;
    uint64_t offset, size;
    uint8_t *buf;
} fetch_t;

static void fetch_pump(hv_rpc_call_t *c, void *ud) {
    (void)ud;
    fetch_t *f = hv_rpc_call_data(c);
    if (f == NULL || !hv_rpc_call_open(c)) {
        return;
    }
    while (f->offset < f->size && hv_rpc_call_queued(c) < FETCH_WINDOW) {
        size_t want =
            f->size - f->offset < FETCH_CHUNK ? (size_t)(f->size - f->offset) : FETCH_CHUNK;
        ssize_t r = pread(f->fd, f->buf, want, (off_t)f->offset);
        if (r <= 0) {
            hv_rpc_finish(c, HV_EIO, "cannot read artifact: %s", r < 0 ? strerror(errno) : "EOF");
            return;
        }
        Hvpb__V1__ArtifactChunk ch = HVPB__V1__ARTIFACT_CHUNK__INIT;
        ch.offset = f->offset;
        ch.total_size = f->size;
        ch.data.data = f->buf;
        ch.data.len = (size_t)r;
        if (hv_rpc_send(c, &ch.base) != HV_OK) {
            return;
        }
        f->offset += (uint64_t)r;
    }
    if (f->offset >= f->size) {
        hv_rpc_finish(c, HV_OK, NULL);
    }
}

static void cluster_fetch(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    head_t *h = ud;
    const Hvpb__V1__FetchRequest *req = (const Hvpb__V1__FetchRequest *)m;
    if (!token_ok(h, req->token)) {
        hv_rpc_finish(c, HV_EPERM, "wrong join token for cluster '%s'", h->cfg.cluster_name);
        return;
    }
    char path[4096];
    if (head_artifact_path(h, req->digest, path, sizeof(path)) != HV_OK ||
        !head_artifact_present(h, req->digest)) {
        hv_rpc_finish(c, HV_ENOTFOUND, "no artifact %s", req->digest);
        return;
    }
    fetch_t *f = hv_calloc(1, sizeof(*f));
    if (f == NULL || (f->buf = hv_malloc(FETCH_CHUNK)) == NULL) {
        hv_free(f);
        hv_rpc_finish(c, HV_ENOMEM, "out of memory");
        return;
    }
    struct stat sb;
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0 || fstat(f->fd, &sb) != 0) {
        hv_rpc_finish(c, HV_EIO, "cannot open artifact %s: %s", req->digest, strerror(errno));
        if (f->fd >= 0) {
            close(f->fd);
        }
        hv_free(f->buf);
        hv_free(f);
        return;
    }
    f->size = (uint64_t)sb.st_size;
    f->offset = req->offset <= f->size ? req->offset : f->size;
    hv_rpc_call_set_data(c, f);
    hv_rpc_call_set_drain_cb(c, fetch_pump);
    hv_store_artifact_touch(h->store, req->digest, hv_wall_ms());
    if (f->size == 0) {
        Hvpb__V1__ArtifactChunk ch = HVPB__V1__ARTIFACT_CHUNK__INIT;
        hv_rpc_send(c, &ch.base);
    }
    fetch_pump(c, ud);
}

static void fetch_done(hv_rpc_call_t *c, const hv_rpc_status_t *st, void *ud) {
    (void)st;
    (void)ud;
    fetch_t *f = hv_rpc_call_data(c);
    if (f != NULL) {
        close(f->fd);
        hv_free(f->buf);
        hv_free(f);
    }
}

/* ---- registration, tick, shutdown ----------------------------------------------------------- */

hv_err head_cluster_register(head_t *h) {
    hv_rpc_method_t ms[] = {
        {"/hvpb.v1.Cluster/Join", HV_RPC_UNARY, &hvpb__v1__join_request__descriptor, cluster_join,
         NULL, h},
        {"/hvpb.v1.Cluster/Session", HV_RPC_BIDI, &hvpb__v1__agent_msg__descriptor, session_msg,
         session_done, h},
        {"/hvpb.v1.Cluster/Fetch", HV_RPC_SERVER_STREAM, &hvpb__v1__fetch_request__descriptor,
         cluster_fetch, fetch_done, h},
    };
    for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
        HV_TRY(hv_rpc_server_add(h->srv, &ms[i]));
    }
    return HV_OK;
}

void head_cluster_tick(head_t *h, uint64_t now) {
    for (head_node_t *n = h->nodes; n != NULL; n = n->next) {
        if (strcmp(n->row.state, "dead") == 0) {
            continue;
        }
        if (now > n->lease_deadline) {
            char why[128];
            snprintf(why, sizeof(why), "no heartbeat for %.1f s (lease %.1f s)",
                     (double)(now - n->lease_deadline + h->cfg.lease_ms) / 1000.0,
                     (double)h->cfg.lease_ms / 1000.0);
            if (n->session != NULL) {
                hv_rpc_call_set_data(n->session, NULL);
                hv_rpc_call_cancel(n->session);
                n->session = NULL;
            }
            head_set_str(&n->row.state, "dead");
            hv_store_node_set_state(h->store, n->row.id, "dead", n->row.last_seen_ms);
            head_event(h, 0, n->row.id, "node.dead", "node %s is dead: %s", n->row.name, why);
            head_driver_node_dead(h, n, why);
        } else if (n->row.last_seen_ms > n->persisted_seen_ms + SEEN_PERSIST_MS) {
            hv_store_node_set_state(h->store, n->row.id, n->row.state, n->row.last_seen_ms);
            n->persisted_seen_ms = n->row.last_seen_ms;
        }
    }
}

void head_cluster_shutdown(head_t *h) {
    for (head_node_t *n = h->nodes; n != NULL; n = n->next) {
        if (n->row.last_seen_ms > n->persisted_seen_ms) {
            hv_store_node_set_state(h->store, n->row.id, n->row.state, n->row.last_seen_ms);
        }
    }
}
