/*
 * agent_load: a load generator that plays N hv agents against one hvhead, to measure what the
 * head pays for connected nodes. Each simulated agent does what agent/session.c does on the
 * wire and nothing more: Cluster.Join (distinct name, random incarnation), then a Cluster.Session
 * stream with a hello and a heartbeat every heartbeat_ms (the interval from the JoinReply). Each
 * agent has its own channel and its own TCP connection, as each real agent has its own process
 * (see load_target for how). It runs no workers and answers no order: an order from the head
 * (spawn, kill, ...) is only counted. After the duration given on the command line, or at
 * SIGINT/SIGTERM, it cancels every call and prints what it saw: sessions established,
 * heartbeats sent, replies received and their round-trip times. A Join that fails is retried
 * every 500 ms (a refused one ends the run); a Session that ends early is counted as lost and
 * not reopened. Agents start at their ramp times, but at most --window of them are between their
 * Join and their session's first answer at any time (the rest wait their turn, as a fleet of real
 * agents backs off): a head or a machine slower than the ramp then stretches the ramp instead of
 * letting every Join queue behind the others until its deadline. Everything runs on one libuv loop through common/rpc.h's event-driven engine.
 * It is not a test of the agent (agent/session.c has its own). Called by
 * tests/perf/head_load.sh and tests/integration/agent_load_smoke.sh.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "err.h"
#include "hv.pb-c.h"
#include "log.h"
#include "mem.h"
#include "rpc.h"
#include "util.h"

#define LOAD_MAX_AGENTS 10000
#define LOAD_MAX_DURATION_S 3600
#define LOAD_JOIN_TIMEOUT_MS 10000
#define LOAD_JOIN_RETRY_MS 500
#define LOAD_RTT_RING 64        /* heartbeats in flight per agent whose send time is remembered */
#define LOAD_WINDOW_DEFAULT 256 /* agents between their Join and their session's first answer */

typedef enum agent_state {
    AS_WAITING = 0, /* not started yet (ramp) or waiting to retry the Join */
    AS_JOINING = 1, /* a Join call is in flight */
    AS_OPENING = 2, /* Session stream started, no answer yet */
    AS_UP = 3,      /* the head answered on the Session stream */
    AS_LOST = 4,    /* the Session stream ended before the run did */
    AS_DONE = 5,    /* stopped by the end of the run */
} agent_state;

struct load_s;

/* One simulated agent. Owned by the load's array; every field is touched on the loop thread. */
typedef struct agent_s {
    struct load_s *ld; /* borrowed back pointer */
    char name[96];
    uint64_t incarnation;
    hv_rpc_channel_t *ch; /* owned: this agent's own channel (its own connection) */
    hv_rpc_call_t *join;  /* AS_JOINING: the Join call */
    hv_rpc_call_t *sess;  /* AS_OPENING/AS_UP: the Session stream */
    uv_timer_t timer;     /* start, join retry, then heartbeats */
    uint64_t node_id;
    uint32_t heartbeat_ms;
    agent_state state;
    uint64_t sent;                /* heartbeats queued on the stream (the first one included) */
    uint64_t replies;             /* heartbeat answers */
    uint64_t others;              /* any other HeadMsg (orders, bare acks) */
    uint64_t join_fail;           /* Join attempts that failed */
    uint64_t ring[LOAD_RTT_RING]; /* uv_hrtime() of heartbeats not yet answered, FIFO */
    size_t ring_head, ring_n;
    uint64_t join_at;  /* uv_hrtime() when its current Join was sent */
    int in_window;     /* holds one of the load's window places (Join until the session is up) */
    struct agent_s *q; /* next agent waiting for a window place */
} agent_t;

/* Heartbeat round trips in microseconds, growable. */
typedef struct rtt_s {
    uint32_t *us; /* owned */
    size_t n, cap;
} rtt_t;

typedef struct load_s {
    uv_loop_t loop;
    hv_rpc_engine_t *eng;
    const char *head; /* borrowed from argv / environment */
    const char *token;
    uint32_t hb_override_ms; /* 0 = the head's heartbeat_ms */
    uint32_t slots;
    agent_t *agents; /* owned array of n */
    size_t n;
    uint64_t t0; /* uv_hrtime() at start */
    uv_timer_t stop;
    uv_signal_t sigint, sigterm; /* either one ends the run early, with the same report */
    uv_signal_t sigusr1;         /* prints a mark: the counts so far (head_load.sh's window) */
    int stopping;
    size_t up;          /* agents whose session got an answer (ever) */
    size_t lost;        /* sessions that ended before the run did */
    uint64_t all_up_ns; /* time from start until every session was up (0 = not yet) */
    rtt_t rtt_all;      /* every heartbeat answered */
    rtt_t rtt_steady;   /* heartbeats sent after every session was up */
    rtt_t rtt_join;     /* every Join answered (ok or not), sent to answered */
    /* The window: at most `window` agents between their Join and their session's first
     * answer (0 = no bound); the others wait in a FIFO for a place. */
    size_t window, in_window;
    agent_t *q_head, *q_tail;
    size_t window_waits; /* Joins that waited for a place */
} load_t;

static uint64_t load_rand64(void) {
    static uint64_t s;
    if (s == 0) {
        s = hv_wall_ms() ^ ((uint64_t)getpid() << 32) ^ uv_hrtime();
    }
    // splitmix64: good enough for distinct incarnations.
    s += 0x9e3779b97f4a7c15ull;
    uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void rtt_add(rtt_t *r, uint64_t ns) {
    if (r->n == r->cap) {
        size_t ncap = r->cap ? r->cap * 2 : 4096;
        uint32_t *nv = hv_realloc(r->us, ncap * sizeof(*nv));
        if (nv == NULL) {
            return; // one sample fewer; the counts stay exact
        }
        r->us = nv;
        r->cap = ncap;
    }
    uint64_t us = ns / 1000;
    r->us[r->n++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

static void agent_join(agent_t *a);
static void load_stop_cb(uv_timer_t *t);

/*
 * gRPC core shares connections between channels of one process that have the same target and
 * arguments (its global subchannel pool), so 100 channels to "127.0.0.1:P" would be one TCP
 * connection, unlike 100 agent processes. Spelling the address differently per agent gives each
 * channel its own connection: inet_aton reads "127.00.0.001" as 127.0.0.1 (runs of zeros are
 * octal zeros). Agent i gets zero runs of (i/100)%10+1, (i/10)%10+1 and i%10 before the final
 * 1: 1000 distinct spellings, and then they repeat (agents past 1000 share connections).
 * Only for a dotted IPv4 head whose last three bytes are 0.0.1 (loopback); others are used
 * as given.
 */
static int load_target(const char *head, size_t i, char *out, size_t len) {
    const char *colon = strrchr(head, ':');
    size_t hlen = colon != NULL ? (size_t)(colon - head) : 0;
    if (colon == NULL || hlen < 9 || strncmp(colon - 6, ".0.0.1", 6) != 0 ||
        memchr(head, '[', hlen) != NULL) {
        snprintf(out, len, "%s", head);
        return 0;
    }
    char z[3][12];
    size_t runs[3] = {(i / 100) % 10 + 1, (i / 10) % 10 + 1, i % 10};
    for (int k = 0; k < 3; k++) {
        memset(z[k], '0', runs[k]);
        z[k][runs[k]] = '\0';
    }
    snprintf(out, len, "%.*s.%s.%s.%s1%s", (int)(hlen - 6), head, z[0], z[1], z[2], colon);
    return 1;
}

/* ---- the window ------------------------------------------------------------------------------ */

/* a no longer holds a window place (its session is up, lost, or the run ends): the next waiting
 * agent, if any, sends its Join. */
static void window_leave(agent_t *a) {
    load_t *ld = a->ld;
    if (!a->in_window) {
        return;
    }
    a->in_window = 0;
    ld->in_window--;
    while (ld->q_head != NULL && !ld->stopping && (ld->window == 0 || ld->in_window < ld->window)) {
        agent_t *next = ld->q_head;
        ld->q_head = next->q;
        if (ld->q_head == NULL) {
            ld->q_tail = NULL;
        }
        next->q = NULL;
        agent_join(next);
    }
}

/* Takes a window place for a, or queues a for one: 1 when a may send its Join now. */
static int window_enter(agent_t *a) {
    load_t *ld = a->ld;
    if (a->in_window) {
        return 1; /* a retry keeps its place */
    }
    if (ld->window != 0 && ld->in_window >= ld->window) {
        if (ld->q_tail != NULL) {
            ld->q_tail->q = a;
        } else {
            ld->q_head = a;
        }
        ld->q_tail = a;
        ld->window_waits++;
        return 0;
    }
    a->in_window = 1;
    ld->in_window++;
    return 1;
}

/* ---- Session -------------------------------------------------------------------------------- */

static void agent_send_heartbeat(agent_t *a) {
    Hvpb__V1__AgentMsg m = HVPB__V1__AGENT_MSG__INIT;
    Hvpb__V1__Heartbeat hb = HVPB__V1__HEARTBEAT__INIT;
    hb.time_ms = hv_wall_ms();
    m.body_case = HVPB__V1__AGENT_MSG__BODY_HEARTBEAT;
    m.heartbeat = &hb;
    if (hv_rpc_send(a->sess, &m.base) != HV_OK) {
        return; // a full queue skips one beat, as in the real agent
    }
    a->sent++;
    if (a->ring_n < LOAD_RTT_RING) {
        a->ring[(a->ring_head + a->ring_n) % LOAD_RTT_RING] = uv_hrtime();
        a->ring_n++;
    }
}

static void agent_hb_cb(uv_timer_t *t) {
    agent_t *a = t->data;
    if (a->sess != NULL && hv_rpc_call_open(a->sess)) {
        agent_send_heartbeat(a);
    }
}

static void agent_session_msg(hv_rpc_call_t *call, const ProtobufCMessage *msg, void *ud) {
    agent_t *a = ud;
    load_t *ld = a->ld;
    const Hvpb__V1__HeadMsg *m = (const Hvpb__V1__HeadMsg *)msg;
    (void)call;
    if (m->body_case != HVPB__V1__HEAD_MSG__BODY_HEARTBEAT) {
        a->others++;
        return;
    }
    a->replies++;
    // The head answers heartbeats in order on the stream: this one answers the oldest.
    if (a->ring_n > 0) {
        uint64_t sent_at = a->ring[a->ring_head];
        rtt_add(&ld->rtt_all, uv_hrtime() - sent_at);
        if (ld->all_up_ns != 0 && sent_at >= ld->t0 + ld->all_up_ns) {
            rtt_add(&ld->rtt_steady, uv_hrtime() - sent_at);
        }
        a->ring_head = (a->ring_head + 1) % LOAD_RTT_RING;
        a->ring_n--;
    }
    if (a->state == AS_OPENING) {
        a->state = AS_UP;
        window_leave(a);
        ld->up++;
        if (ld->up == ld->n) {
            ld->all_up_ns = uv_hrtime() - ld->t0;
            printf("agent_load: all %zu sessions established after %.0f ms\n", ld->n,
                   (double)ld->all_up_ns / 1e6);
            fflush(stdout);
        }
        uv_timer_start(&a->timer, agent_hb_cb, a->heartbeat_ms, a->heartbeat_ms);
    }
}

static void agent_session_done(hv_rpc_call_t *call, const hv_rpc_status_t *st, void *ud) {
    agent_t *a = ud;
    (void)call;
    a->sess = NULL;
    uv_timer_stop(&a->timer);
    if (a->ld->stopping) {
        a->state = AS_DONE;
        return;
    }
    a->state = AS_LOST;
    a->ld->lost++;
    window_leave(a);
    fprintf(stderr, "agent_load: %s: session ended: %s%s%s\n", a->name, hv_strerror(st->rc),
            st->msg[0] ? ": " : "", st->msg);
}

static void agent_open(agent_t *a) {
    Hvpb__V1__AgentMsg m = HVPB__V1__AGENT_MSG__INIT;
    Hvpb__V1__AgentHello h = HVPB__V1__AGENT_HELLO__INIT;
    h.node_id = a->node_id;
    h.token = (char *)a->ld->token;
    h.incarnation = a->incarnation;
    m.body_case = HVPB__V1__AGENT_MSG__BODY_HELLO;
    m.hello = &h;
    hv_rpc_client_cbs_t cbs = {.resp = &hvpb__v1__head_msg__descriptor,
                               .on_msg = agent_session_msg,
                               .on_done = agent_session_done,
                               .ud = a};
    hv_err rc = hv_rpc_call_start(a->ld->eng, a->ch, "/hvpb.v1.Cluster/Session", HV_RPC_BIDI,
                                  &m.base, 0, &cbs, &a->sess);
    if (rc != HV_OK) {
        a->sess = NULL;
        a->state = AS_LOST;
        a->ld->lost++;
        window_leave(a);
        fprintf(stderr, "agent_load: %s: cannot start Session: %s\n", a->name, hv_strerror(rc));
        return;
    }
    a->state = AS_OPENING;
    agent_send_heartbeat(a); // as the real agent does: the head answers at once
}

/* ---- Join ----------------------------------------------------------------------------------- */

static void agent_join_msg(hv_rpc_call_t *call, const ProtobufCMessage *msg, void *ud) {
    agent_t *a = ud;
    const Hvpb__V1__JoinReply *r = (const Hvpb__V1__JoinReply *)msg;
    (void)call;
    a->node_id = r->node_id;
    if (r->node_credential != NULL && r->node_credential[0] != '\0') {
        hv_rpc_channel_set_token(a->ch, r->node_credential); /* Session needs it, as hvagent's */
    }
    a->heartbeat_ms = a->ld->hb_override_ms != 0 ? a->ld->hb_override_ms : r->heartbeat_ms;
    if (a->heartbeat_ms < 50) {
        a->heartbeat_ms = 50;
    }
}

static void agent_retry_cb(uv_timer_t *t) { agent_join(t->data); }

static void agent_join_done(hv_rpc_call_t *call, const hv_rpc_status_t *st, void *ud) {
    agent_t *a = ud;
    (void)call;
    a->join = NULL;
    rtt_add(&a->ld->rtt_join, uv_hrtime() - a->join_at);
    if (a->ld->stopping) {
        a->state = AS_DONE;
        return;
    }
    if (st->rc == HV_OK && a->node_id != 0) {
        agent_open(a);
        return;
    }
    a->join_fail++;
    if (st->rc == HV_EPERM || st->rc == HV_EAUTH || st->rc == HV_EINVAL) {
        // A refusal (wrong token, bad node info) will not change on retry: end the run.
        fprintf(stderr, "agent_load: %s: the head refused the join: %s; stopping\n", a->name,
                st->msg[0] ? st->msg : hv_strerror(st->rc));
        a->state = AS_LOST;
        a->ld->lost++;
        window_leave(a);
        uv_timer_start(&a->ld->stop, load_stop_cb, 0, 0);
        return;
    }
    if (a->join_fail == 1) {
        fprintf(stderr, "agent_load: %s: join failed: %s%s%s; retrying every %d ms\n", a->name,
                hv_strerror(st->rc), st->msg[0] ? ": " : "", st->msg, LOAD_JOIN_RETRY_MS);
    }
    a->state = AS_WAITING;
    uv_timer_start(&a->timer, agent_retry_cb, LOAD_JOIN_RETRY_MS, 0);
}

static void agent_join(agent_t *a) {
    load_t *ld = a->ld;
    if (ld->stopping || !window_enter(a)) {
        return;
    }
    char *addrs[1] = {"127.0.0.1"};
    Hvpb__V1__NodeInfo node = HVPB__V1__NODE_INFO__INIT;
    node.name = a->name;
    node.addrs = addrs;
    node.n_addrs = 1;
    node.slots = ld->slots;
    node.cpus = 1;
    node.version = "agent_load";
    Hvpb__V1__JoinRequest req = HVPB__V1__JOIN_REQUEST__INIT;
    req.token = (char *)ld->token;
    req.node = &node;
    req.incarnation = a->incarnation;
    hv_rpc_client_cbs_t cbs = {.resp = &hvpb__v1__join_reply__descriptor,
                               .on_msg = agent_join_msg,
                               .on_done = agent_join_done,
                               .ud = a};
    a->node_id = 0;
    a->state = AS_JOINING;
    a->join_at = uv_hrtime();
    hv_err rc = hv_rpc_call_start(ld->eng, a->ch, "/hvpb.v1.Cluster/Join", HV_RPC_UNARY, &req.base,
                                  LOAD_JOIN_TIMEOUT_MS, &cbs, &a->join);
    if (rc != HV_OK) {
        a->join = NULL;
        a->join_fail++;
        a->state = AS_WAITING;
        uv_timer_start(&a->timer, agent_retry_cb, LOAD_JOIN_RETRY_MS, 0);
    }
}

/* ---- run ------------------------------------------------------------------------------------ */

static void load_stop_cb(uv_timer_t *t) {
    load_t *ld = t->data;
    ld->stopping = 1;
    for (size_t i = 0; i < ld->n; i++) {
        agent_t *a = &ld->agents[i];
        uv_timer_stop(&a->timer);
        if (a->join != NULL) {
            hv_rpc_call_cancel(a->join);
        }
        if (a->sess != NULL) {
            hv_rpc_call_cancel(a->sess);
        }
    }
    uv_stop(&ld->loop);
}

static void load_signal_cb(uv_signal_t *h, int signum) {
    load_t *ld = h->data;
    (void)signum;
    if (!ld->stopping) {
        load_stop_cb(&ld->stop);
    }
}

/* SIGUSR1: one line with the heartbeats answered so far, so that a caller can count those of a
 * window of its own. */
static void load_mark_cb(uv_signal_t *h, int signum) {
    load_t *ld = h->data;
    (void)signum;
    uint64_t sent = 0, replies = 0;
    for (size_t i = 0; i < ld->n; i++) {
        sent += ld->agents[i].sent;
        replies += ld->agents[i].replies;
    }
    printf("agent_load: mark t=%.3f up=%zu lost=%zu sent=%llu replies=%llu\n",
           (double)(uv_hrtime() - ld->t0) / 1e9, ld->up, ld->lost, (unsigned long long)sent,
           (unsigned long long)replies);
    fflush(stdout);
}

/* start: SIGINT and SIGTERM end the run, SIGUSR1 prints a mark; else their handles close. */
static void load_signals(load_t *ld, int start) {
    uv_signal_t *h[3] = {&ld->sigint, &ld->sigterm, &ld->sigusr1};
    const int sig[3] = {SIGINT, SIGTERM, SIGUSR1};
    for (int i = 0; i < 3; i++) {
        if (!start) {
            uv_close((uv_handle_t *)h[i], NULL);
            continue;
        }
        uv_signal_init(&ld->loop, h[i]);
        h[i]->data = ld;
        uv_signal_start(h[i], sig[i] == SIGUSR1 ? load_mark_cb : load_signal_cb, sig[i]);
    }
}

static int cmp_u32(const void *x, const void *y) {
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return a < b ? -1 : a > b;
}

static double pct_ms(const uint32_t *v, size_t n, double p) {
    if (n == 0) {
        return 0.0;
    }
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return (double)v[i] / 1000.0;
}

/* Sorts r and prints its percentiles. */
static void rtt_print(const char *what, rtt_t *r) {
    if (r->n > 0) {
        qsort(r->us, r->n, sizeof(*r->us), cmp_u32);
    }
    printf("agent_load: heartbeat round trip ms (%s): p50=%.3f p90=%.3f p99=%.3f max=%.3f "
           "(%zu samples)\n",
           what, pct_ms(r->us, r->n, 0.50), pct_ms(r->us, r->n, 0.90), pct_ms(r->us, r->n, 0.99),
           pct_ms(r->us, r->n, 1.0), r->n);
}

static void load_report(load_t *ld, double secs) {
    uint64_t sent = 0, replies = 0, others = 0, join_fail = 0;
    size_t joined = 0;
    for (size_t i = 0; i < ld->n; i++) {
        const agent_t *a = &ld->agents[i];
        sent += a->sent;
        replies += a->replies;
        others += a->others;
        join_fail += a->join_fail;
        joined += a->node_id != 0;
    }
    printf("agent_load: agents=%zu joined=%zu established=%zu lost=%zu join_failures=%llu "
           "window=%zu window_waits=%zu\n",
           ld->n, joined, ld->up, ld->lost, (unsigned long long)join_fail, ld->window,
           ld->window_waits);
    printf("agent_load: ran %.1f s: heartbeats sent=%llu replies=%llu (%.1f/s) other_msgs=%llu\n",
           secs, (unsigned long long)sent, (unsigned long long)replies,
           secs > 0 ? (double)replies / secs : 0.0, (unsigned long long)others);
    rtt_print("all", &ld->rtt_all);
    rtt_print("steady", &ld->rtt_steady);
    qsort(ld->rtt_join.us, ld->rtt_join.n, sizeof(*ld->rtt_join.us), cmp_u32);
    printf("agent_load: join round trip ms: p50=%.3f p99=%.3f max=%.3f (%zu answers)\n",
           pct_ms(ld->rtt_join.us, ld->rtt_join.n, 0.50),
           pct_ms(ld->rtt_join.us, ld->rtt_join.n, 0.99),
           pct_ms(ld->rtt_join.us, ld->rtt_join.n, 1.0), ld->rtt_join.n);
    if (ld->all_up_ns != 0) {
        printf("agent_load: all sessions established after %.0f ms\n", (double)ld->all_up_ns / 1e6);
    }
    fflush(stdout);
}

static void load_usage(FILE *f) {
    fprintf(f,
            "usage: agent_load --head HOST:PORT [options]\n"
            "Plays N hv agents (Join + Session + heartbeats, one channel each) against a head\n"
            "for a bounded time, then prints sessions established and heartbeat replies.\n"
            "  --head HOST:PORT   the head (default: $HV_HEAD)\n"
            "  --token T          join token (default: $HV_TOKEN, else \"\")\n"
            "  --agents N         simulated agents, 1..%d (default 100)\n"
            "  --duration S       run this long, 1..%d s (default 30)\n"
            "  --ramp-ms MS       start the agents evenly over MS ms (default 1000)\n"
            "  --prefix P         node names are P-0, P-1, ... (default load-PID)\n"
            "  --slots K          slots each node offers (default 1)\n"
            "  --heartbeat-ms MS  heartbeat interval (default: what the head says)\n"
            "  --window W         at most W agents between their Join and their session's\n"
            "                     first answer; the others wait their turn (default %d; 0 = no\n"
            "                     bound: every agent joins at its ramp time)\n"
            "SIGINT or SIGTERM ends the run early, with the same report; SIGUSR1 prints the\n"
            "counts so far (a line starting 'agent_load: mark').\n"
            "exit status: 0 every session was established and none was lost; 1 otherwise;\n"
            "2 bad usage.\n",
            LOAD_MAX_AGENTS, LOAD_MAX_DURATION_S, LOAD_WINDOW_DEFAULT);
}

static int load_num(const char *opt, const char *v, uint64_t min, uint64_t max, uint64_t *out) {
    if (v == NULL || hv_parse_u64(v, min, max, out) != HV_OK) {
        fprintf(stderr, "agent_load: %s '%s': expected a number from %llu to %llu\n", opt,
                v ? v : "", (unsigned long long)min, (unsigned long long)max);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    load_t ld;
    memset(&ld, 0, sizeof(ld));
    hv_log_init("agent_load");
    ld.head = getenv("HV_HEAD");
    ld.token = getenv("HV_TOKEN") ? getenv("HV_TOKEN") : "";
    uint64_t n = 100, duration = 30, ramp = 1000, slots = 1, hb = 0, window = LOAD_WINDOW_DEFAULT;
    char prefix_buf[64];
    snprintf(prefix_buf, sizeof(prefix_buf), "load-%d", (int)getpid());
    const char *prefix = prefix_buf;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            load_usage(stdout);
            return 0;
        }
        int bad = 0;
        if (strcmp(a, "--head") == 0 && v != NULL) {
            ld.head = v;
        } else if (strcmp(a, "--token") == 0 && v != NULL) {
            ld.token = v;
        } else if (strcmp(a, "--prefix") == 0 && v != NULL && v[0] != '\0' && strlen(v) < 64) {
            prefix = v;
        } else if (strcmp(a, "--agents") == 0) {
            bad = load_num(a, v, 1, LOAD_MAX_AGENTS, &n);
        } else if (strcmp(a, "--duration") == 0) {
            bad = load_num(a, v, 1, LOAD_MAX_DURATION_S, &duration);
        } else if (strcmp(a, "--ramp-ms") == 0) {
            bad = load_num(a, v, 0, 600000, &ramp);
        } else if (strcmp(a, "--slots") == 0) {
            bad = load_num(a, v, 1, 4096, &slots);
        } else if (strcmp(a, "--heartbeat-ms") == 0) {
            bad = load_num(a, v, 50, 600000, &hb);
        } else if (strcmp(a, "--window") == 0) {
            bad = load_num(a, v, 0, LOAD_MAX_AGENTS, &window);
        } else {
            fprintf(stderr, "agent_load: unknown option or missing value: '%s'\n", a);
            bad = 1;
        }
        if (bad) {
            load_usage(stderr);
            return 2;
        }
        i++;
    }
    char host[256];
    int port = 0;
    if (ld.head == NULL || hv_parse_hostport(ld.head, host, sizeof(host), &port) != HV_OK) {
        fprintf(stderr, "agent_load: bad or missing --head '%s': expected HOST:PORT\n",
                ld.head ? ld.head : "");
        return 2;
    }
    if (ramp >= duration * 1000) {
        fprintf(stderr, "agent_load: --ramp-ms %llu must be shorter than --duration %llu s\n",
                (unsigned long long)ramp, (unsigned long long)duration);
        return 2;
    }
    ld.n = (size_t)n;
    ld.slots = (uint32_t)slots;
    ld.hb_override_ms = (uint32_t)hb;
    ld.window = (size_t)window;

    int status = 1;
    hv_err rc = HV_OK;
    uv_loop_init(&ld.loop);
    ld.agents = hv_calloc(ld.n, sizeof(*ld.agents));
    if (ld.agents == NULL) {
        fprintf(stderr, "agent_load: out of memory for %zu agents\n", ld.n);
        goto out;
    }
    // The varied spellings of the head's address (load_target) must not go to DNS: gRPC's
    // default c-ares resolver sends them to the nameserver, while its native resolver
    // (getaddrinfo) reads them as numbers. Set before anything initializes gRPC (the engine
    // does), or gRPC registers two "dns" resolvers and aborts.
    char probe[320];
    if (ld.n > 1 && load_target(ld.head, 1, probe, sizeof(probe))) {
        setenv("GRPC_DNS_RESOLVER", "native", 0);
    }
    rc = hv_rpc_engine_create(&ld.loop, &ld.eng);
    if (rc != HV_OK) {
        fprintf(stderr, "agent_load: cannot create the rpc engine: %s\n", hv_strerror(rc));
        goto out;
    }
    ld.t0 = uv_hrtime();
    int varied = 0;
    for (size_t i = 0; i < ld.n; i++) {
        agent_t *a = &ld.agents[i];
        a->ld = &ld;
        snprintf(a->name, sizeof(a->name), "%s-%zu", prefix, i);
        a->incarnation = load_rand64() | 1;
        uv_timer_init(&ld.loop, &a->timer);
        a->timer.data = a;
        char target[320];
        varied = load_target(ld.head, i, target, sizeof(target));
        rc = hv_rpc_channel_create(target, &a->ch);
        if (rc != HV_OK) {
            fprintf(stderr, "agent_load: %s: cannot create a channel to %s: %s\n", a->name, target,
                    hv_strerror(rc));
            a->ch = NULL;
            goto run_out;
        }
        // Agent i starts at i * ramp / n ms, so heartbeats spread over the interval.
        uv_timer_start(&a->timer, agent_retry_cb, ramp * i / ld.n, 0);
    }
    uv_timer_init(&ld.loop, &ld.stop);
    ld.stop.data = &ld;
    uv_timer_start(&ld.stop, load_stop_cb, duration * 1000, 0);
    load_signals(&ld, 1);
    printf("agent_load: %zu agents against %s for %llu s (ramp %llu ms), %zu connections\n", ld.n,
           ld.head, (unsigned long long)duration, (unsigned long long)ramp,
           varied ? (ld.n < 1000 ? ld.n : 1000) : 1);
    fflush(stdout);
    uv_run(&ld.loop, UV_RUN_DEFAULT);
    load_report(&ld, (double)(uv_hrtime() - ld.t0) / 1e9);
    status = ld.up == ld.n && ld.lost == 0 ? 0 : 1;
    uv_close((uv_handle_t *)&ld.stop, NULL);
    load_signals(&ld, 0);
run_out:
    ld.stopping = 1;
    // Every call was cancelled by the stop timer; destroy waits for their on_done (bounded).
    hv_rpc_engine_destroy(ld.eng);
    for (size_t i = 0; i < ld.n; i++) {
        agent_t *a = &ld.agents[i];
        if (a->ld == NULL) {
            continue;
        }
        uv_close((uv_handle_t *)&a->timer, NULL);
        if (a->ch != NULL) {
            hv_rpc_channel_destroy(a->ch);
        }
    }
    uv_run(&ld.loop, UV_RUN_DEFAULT);
out:
    if (uv_loop_close(&ld.loop) != 0) {
        fprintf(stderr, "agent_load: the loop still had open handles\n");
    }
    hv_free(ld.agents);
    hv_free(ld.rtt_all.us);
    hv_free(ld.rtt_steady.us);
    hv_free(ld.rtt_join.us);
    return status;
}
