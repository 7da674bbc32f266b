/*
 * session: the agent's side of Cluster/Join and Cluster/Session (see session.h for the contract).
 * A state machine driven by rpc callbacks and one 100 ms tick: JOINING (a Join call in flight),
 * OPENING (Session stream started, hello sent, no answer yet), CONNECTED (the head answered),
 * BACKOFF (waiting to join again), STOPPED. The tick sends heartbeats, notices a stream gone
 * quiet, fires the lease expiry and ends the backoff. Outgoing data sits in two queues: reliable
 * events (kept until acknowledged) and log batches (dropped oldest first over a byte bound); a
 * flush sends both in the order they were produced, without letting the rpc layer buffer more
 * than HV_SESSION_INFLIGHT_MAX log messages.
 */
#include "session.h"

#include <stdio.h>
#include <string.h>

#include "log.h"
#include "mem.h"
#include "util.h"

#define SESSION_TICK_MS 100
#define SESSION_DEFAULT_HEARTBEAT_MS 1000
#define SESSION_DEFAULT_LEASE_MS 10000
#define SESSION_CONNECT_TIMEOUT_MS 30000
#define SESSION_LINE_COST 8 /* bytes counted per line on top of its text (framing) */

typedef enum session_state {
    ST_JOINING = 0,
    ST_OPENING = 1,
    ST_CONNECTED = 2,
    ST_BACKOFF = 3,
    ST_STOPPED = 4,
} session_state;

typedef enum event_kind {
    EV_STARTED = 1,
    EV_EXITED = 2,
    EV_FIGURES = 3, /* an actor's process's final call figures, just before its exit */
} event_kind;

/* A reliable event, kept until the head acknowledges its seq. */
typedef struct event_s {
    uint64_t seq;
    event_kind kind;
    uint64_t worker_id;
    int pid;         /* EV_STARTED */
    int exit_code;   /* EV_EXITED */
    int term_signal; /* EV_EXITED */
    char *reason;    /* EV_EXITED; owned */
    uint8_t *state;  /* EV_EXITED of an actor's process that saved its state; owned */
    size_t state_len;
    int state_saved;
    char state_digest[65]; /* EV_EXITED: a larger state uploaded first ("" none) */
    uint64_t state_size;   /* its size, or the size of one not sent */
    char *state_error;     /* a saved state that was not sent, and why (owned; NULL none) */
    hv_callfig_t *fig;     /* EV_FIGURES; owned */
    uint64_t log_mark;     /* log batches with an id below this were produced before the event */
    struct event_s *next;
} event_t;

/* Lines of one worker stream waiting to be sent, in order. */
typedef struct logbatch_s {
    uint64_t id; /* increasing per session object */
    uint64_t worker_id;
    uint32_t stream;
    char **lines; /* owned strings in [first, n) */
    size_t first;
    size_t n;
    size_t cap;
    size_t bytes; /* cost of the lines in [first, n) */
    int sealed;   /* no more lines may join (an event was queued after it) */
    struct logbatch_s *next;
} logbatch_t;

/* Lines of one worker stream that were dropped and not yet reported. */
typedef struct dropped_s {
    uint64_t worker_id;
    uint32_t stream;
    uint64_t count;
    struct dropped_s *next;
} dropped_t;

struct hv_session_s {
    uv_loop_t *loop;      /* borrowed */
    hv_rpc_engine_t *eng; /* borrowed */
    hv_rpc_channel_t *ch; /* borrowed */
    hv_session_cbs_t cbs;
    char *head;                      /* owned copy of cfg->head */
    char *token;                     /* owned */
    char cred[HV_RPC_MAX_TOKEN + 1]; /* the node credential of the last Join ("" none) */
    uint64_t incarnation;
    Hvpb__V1__NodeInfo *node; /* owned deep copy (protobuf-c unpacked) */
    uint32_t connect_timeout_ms;
    size_t log_limit;

    session_state state;
    hv_rpc_call_t *join_call; /* JOINING: in flight */
    hv_rpc_call_t *call;      /* OPENING/CONNECTED: the Session stream */
    uv_timer_t tick;
    uv_timer_t flush_timer; /* 0 ms: sends the lines of one loop iteration together */
    uint64_t node_id;
    uint32_t heartbeat_ms;
    uint32_t lease_ms;
    int joined_once;       /* a Join succeeded at least once */
    int connected_once;    /* a Session got an answer at least once */
    uint64_t started_ms;   /* when the session object started (first-join deadline) */
    uint64_t backoff_ms;   /* next reconnect delay */
    uint64_t retry_at;     /* BACKOFF: when to join again */
    uint64_t opened_at;    /* OPENING: when the stream was started */
    uint64_t last_contact; /* last message from the head (0 = never) */
    uint64_t next_heartbeat;
    int lease_fired; /* on_lease_expired ran for this disconnection */
    uint64_t rng;    /* jitter state */
    int draining;
    char *drain_reason;   /* owned; the DrainNotice given, NULL if none (or undrained) */
    uint64_t drain_until; /* loop ms when the node is expected to die; 0 = unknown */
    int drain_pending;    /* the notice is still to be sent on this stream */
    int drain_sent;       /* the notice went out on the current stream */
    int drain_confirmed;  /* the head answered a heartbeat sent after the notice */
    uint64_t hb_sent;     /* heartbeats sent on the current stream */
    uint64_t hb_answered; /* heartbeat answers received on the current stream */
    uint64_t drain_mark;  /* hb_sent when the notice went out */
    char last_error[300]; /* why the last attempt failed, for messages */
    int last_explained;   /* ...in the rpc layer's own words (hv_rpc_status_t.explained) */

    uint64_t next_seq;
    event_t *ev_head, *ev_tail; /* unacknowledged events, by seq */
    event_t *ev_unsent;         /* first event not yet sent on the current stream */
    size_t ev_count;

    uint64_t next_batch_id;
    logbatch_t *log_head, *log_tail;
    size_t log_bytes;   /* cost of every queued line */
    dropped_t *dropped; /* drop counts not yet reported */
    uint64_t dropped_total;
    int drop_warned; /* a WARN was logged for the current overflow */
    int closing;     /* timer handles whose close callback is still due */
};

static void session_join(hv_session_t *s);
static void session_flush(hv_session_t *s);
static void session_flush_cb(uv_timer_t *t);
static int log_slots(const hv_session_t *s);
static hv_err send_figures(hv_session_t *s, uint64_t seq, uint64_t worker_id, const hv_callfig_t *f,
                           int final);

static uint64_t session_jitter(hv_session_t *s, uint64_t ms) {
    // xorshift64: +-20% spread so a cluster's agents do not reconnect in lockstep.
    s->rng ^= s->rng << 13;
    s->rng ^= s->rng >> 7;
    s->rng ^= s->rng << 17;
    uint64_t spread = ms / 5;
    if (spread == 0) {
        return ms;
    }
    return ms - spread + s->rng % (2 * spread + 1);
}

/* ---- log queue ------------------------------------------------------------------------------ */

static void batch_free(logbatch_t *b) {
    for (size_t i = b->first; i < b->n; i++) {
        hv_free(b->lines[i]);
    }
    hv_free(b->lines);
    hv_free(b);
}

static void dropped_add(hv_session_t *s, uint64_t worker_id, uint32_t stream, uint64_t n) {
    for (dropped_t *d = s->dropped; d != NULL; d = d->next) {
        if (d->worker_id == worker_id && d->stream == stream) {
            d->count += n;
            return;
        }
    }
    dropped_t *d = hv_calloc(1, sizeof(*d));
    if (d == NULL) {
        return; // the notice is lost; the total is still counted and logged
    }
    d->worker_id = worker_id;
    d->stream = stream;
    d->count = n;
    d->next = s->dropped;
    s->dropped = d;
}

/* Drops the oldest queued line. */
static void log_drop_oldest(hv_session_t *s) {
    logbatch_t *b = s->log_head;
    if (b == NULL) {
        return;
    }
    if (b->first < b->n) {
        size_t cost = strlen(b->lines[b->first]) + SESSION_LINE_COST;
        hv_free(b->lines[b->first]);
        b->first++;
        b->bytes -= cost;
        s->log_bytes -= cost;
        dropped_add(s, b->worker_id, b->stream, 1);
        s->dropped_total++;
    }
    if (b->first >= b->n) {
        s->log_head = b->next;
        if (s->log_tail == b) {
            s->log_tail = NULL;
        }
        batch_free(b);
    }
}

static void log_overflow_warn(hv_session_t *s) {
    if (!s->drop_warned) {
        s->drop_warned = 1;
        HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-LOG-DROP",
               "worker output buffer is full (%zu bytes) while the head is %s: dropping the "
               "oldest lines",
               s->log_limit, s->state == ST_CONNECTED ? "slow" : "unreachable");
    }
}

void hv_session_log(hv_session_t *s, uint64_t worker_id, int stream, const char *line, size_t len) {
    if (s->state == ST_STOPPED && s->call == NULL) {
        return;
    }
    if (len > HV_SESSION_LOG_BATCH / 2) {
        len = HV_SESSION_LOG_BATCH / 2;
    }
    size_t cost = len + SESSION_LINE_COST;
    while (s->log_bytes + cost > s->log_limit && s->log_head != NULL) {
        log_overflow_warn(s);
        log_drop_oldest(s);
    }
    logbatch_t *b = s->log_tail;
    if (b == NULL || b->sealed || b->worker_id != worker_id || b->stream != (uint32_t)stream ||
        b->bytes + cost > HV_SESSION_LOG_BATCH) {
        b = hv_calloc(1, sizeof(*b));
        if (b == NULL) {
            goto lost;
        }
        b->id = s->next_batch_id++;
        b->worker_id = worker_id;
        b->stream = (uint32_t)stream;
        if (s->log_tail != NULL) {
            s->log_tail->next = b;
        } else {
            s->log_head = b;
        }
        s->log_tail = b;
    }
    if (b->n == b->cap) {
        size_t ncap = b->cap ? b->cap * 2 : 16;
        char **nl = hv_realloc(b->lines, ncap * sizeof(*nl));
        if (nl == NULL) {
            goto lost;
        }
        b->lines = nl;
        b->cap = ncap;
    }
    char *copy = hv_strndup(line, len);
    if (copy == NULL) {
        goto lost;
    }
    b->lines[b->n++] = copy;
    b->bytes += cost;
    s->log_bytes += cost;
    if (s->call != NULL && !uv_is_active((uv_handle_t *)&s->flush_timer)) {
        // Not now: the rest of this pipe read most likely adds lines to the same batch.
        uv_timer_start(&s->flush_timer, session_flush_cb, 0, 0);
    }
    return;
lost:
    dropped_add(s, worker_id, (uint32_t)stream, 1);
    s->dropped_total++;
}

/* ---- event queue ---------------------------------------------------------------------------- */

static hv_err event_push(hv_session_t *s, event_t *e) {
    e->seq = s->next_seq++;
    // Lines produced before the event go out before it: close the open batch.
    if (s->log_tail != NULL) {
        s->log_tail->sealed = 1;
    }
    e->log_mark = s->next_batch_id;
    if (s->ev_tail != NULL) {
        s->ev_tail->next = e;
    } else {
        s->ev_head = e;
    }
    s->ev_tail = e;
    if (s->ev_unsent == NULL) {
        s->ev_unsent = e;
    }
    s->ev_count++;
    if (s->call != NULL) {
        session_flush(s);
    }
    return HV_OK;
}

hv_err hv_session_worker_started(hv_session_t *s, uint64_t worker_id, int pid) {
    event_t *e = hv_calloc(1, sizeof(*e));
    if (e == NULL) {
        HV_LOG(HV_LOG_ERROR, "agent", "HV-AGENT-EVENT-LOST",
               "out of memory: the start of worker %llu (pid %d) is not reported",
               (unsigned long long)worker_id, pid);
        return HV_ENOMEM;
    }
    e->kind = EV_STARTED;
    e->worker_id = worker_id;
    e->pid = pid;
    return event_push(s, e);
}

/* A new event of kind for worker_id, or NULL when out of memory. payload is what the caller
 * allocated for it (owned; NULL when not needed): it is freed when the event cannot be made, and
 * payload_failed (the caller's allocation failed) makes the event fail too. A failure is logged
 * as the loss of what ("the exit of worker"). */
static event_t *event_new(int kind, uint64_t worker_id, void *payload, int payload_failed,
                          const char *what) {
    event_t *e = payload_failed ? NULL : hv_calloc(1, sizeof(*e));
    if (e == NULL) {
        hv_free(payload);
        HV_LOG(HV_LOG_ERROR, "agent", "HV-AGENT-EVENT-LOST",
               "out of memory: %s %llu is not reported", what, (unsigned long long)worker_id);
        return NULL;
    }
    e->kind = kind;
    e->worker_id = worker_id;
    return e;
}

hv_err hv_session_worker_address(hv_session_t *s, uint64_t worker_id, int pid,
                                 const char *address) {
    char *a = hv_strdup(address != NULL ? address : "");
    event_t *e = event_new(EV_STARTED, worker_id, a, a == NULL, "the address of actor process");
    if (e == NULL) {
        return HV_ENOMEM;
    }
    e->pid = pid;
    e->reason = a; /* a start event with an address: the actor's process listens */
    return event_push(s, e);
}

hv_err hv_session_worker_exited(hv_session_t *s, uint64_t worker_id, int exit_code, int term_signal,
                                const char *reason) {
    return hv_session_actor_exited(s, worker_id, exit_code, term_signal, reason, NULL, 0);
}

/* A new exit event with its own copy of reason; extra (owned, may be NULL) is freed on failure,
 * which is logged: NULL when out of memory (or extra_failed: an allocation of the caller's). */
static event_t *exit_event_new(uint64_t worker_id, int exit_code, int term_signal,
                               const char *reason, void *extra, int extra_failed) {
    char *r = hv_strdup(reason != NULL ? reason : "");
    event_t *e =
        event_new(EV_EXITED, worker_id, r, r == NULL || extra_failed, "the exit of worker");
    if (e == NULL) {
        hv_free(extra);
        return NULL;
    }
    e->exit_code = exit_code;
    e->term_signal = term_signal;
    e->reason = r;
    return e;
}

hv_err hv_session_actor_exited(hv_session_t *s, uint64_t worker_id, int exit_code, int term_signal,
                               const char *reason, const void *data, size_t len) {
    uint8_t *st = data != NULL && len <= HV_SESSION_STATE_MAX ? hv_malloc(len > 0 ? len : 1) : NULL;
    event_t *e =
        exit_event_new(worker_id, exit_code, term_signal, reason, st, data != NULL && st == NULL);
    if (e == NULL) {
        return HV_ENOMEM;
    }
    if (st != NULL) {
        if (len > 0) {
            memcpy(st, data, len);
        }
        e->state = st;
        e->state_len = len;
        e->state_saved = 1;
    }
    return event_push(s, e);
}

hv_err hv_session_actor_exited_ref(hv_session_t *s, uint64_t worker_id, int exit_code,
                                   int term_signal, const char *reason, const char *digest,
                                   uint64_t size, const char *why) {
    int has_why = why != NULL && why[0] != '\0';
    char *w = has_why ? hv_strdup(why) : NULL;
    event_t *e = exit_event_new(worker_id, exit_code, term_signal, reason, w, has_why && w == NULL);
    if (e == NULL) {
        return HV_ENOMEM;
    }
    e->state_saved = 1;
    e->state_size = size;
    e->state_error = w;
    if (w == NULL && digest != NULL) {
        snprintf(e->state_digest, sizeof(e->state_digest), "%s", digest);
    }
    return event_push(s, e);
}

hv_err hv_session_actor_figures(hv_session_t *s, uint64_t worker_id, const hv_callfig_t *f,
                                int final) {
    if (!final) {
        /* Running totals: one lost (no stream now, or a full one) is made good by the next. */
        if (s->state != ST_CONNECTED || s->call == NULL || !hv_rpc_call_open(s->call) ||
            !log_slots(s)) {
            return HV_EUNAVAIL;
        }
        return send_figures(s, 0, worker_id, f, 0);
    }
    hv_callfig_t *copy = hv_malloc(sizeof(*copy));
    event_t *e = event_new(EV_FIGURES, worker_id, copy, copy == NULL,
                           "the event with the last call figures of actor process");
    if (e == NULL) {
        return HV_ENOMEM;
    }
    *copy = *f;
    e->fig = copy;
    return event_push(s, e);
}

static void event_free(event_t *e) {
    hv_free(e->fig);
    hv_free(e->state);
    hv_free(e->state_error);
    hv_free(e->reason);
    hv_free(e);
}

/* Drops every event with seq <= ack. */
static void session_ack(hv_session_t *s, uint64_t ack) {
    while (s->ev_head != NULL && s->ev_head->seq <= ack) {
        event_t *e = s->ev_head;
        s->ev_head = e->next;
        if (s->ev_tail == e) {
            s->ev_tail = NULL;
        }
        if (s->ev_unsent == e) {
            s->ev_unsent = e->next;
        }
        s->ev_count--;
        event_free(e);
    }
}

/* ---- sending -------------------------------------------------------------------------------- */

static hv_err send_figures(hv_session_t *s, uint64_t seq, uint64_t worker_id, const hv_callfig_t *f,
                           int final) {
    Hvpb__V1__AgentMsg m = HVPB__V1__AGENT_MSG__INIT;
    Hvpb__V1__ActorFigures af = HVPB__V1__ACTOR_FIGURES__INIT;
    uint64_t buckets[HV_CALLFIG_BUCKETS];
    memcpy(buckets, f->buckets, sizeof(buckets));
    af.worker_id = worker_id;
    af.final = final;
    af.calls_ok = f->ok;
    af.calls_error = f->error;
    af.bytes_in = f->bytes_in;
    af.bytes_out = f->bytes_out;
    af.service_ns = f->service_ns;
    af.buckets = buckets;
    af.n_buckets = HV_CALLFIG_BUCKETS;
    m.seq = seq;
    m.body_case = HVPB__V1__AGENT_MSG__BODY_ACTOR_FIGURES;
    m.actor_figures = &af;
    return hv_rpc_send(s->call, &m.base);
}

static hv_err send_event(hv_session_t *s, const event_t *e) {
    Hvpb__V1__AgentMsg m = HVPB__V1__AGENT_MSG__INIT;
    if (e->kind == EV_FIGURES) {
        return send_figures(s, e->seq, e->worker_id, e->fig, 1);
    }
    Hvpb__V1__WorkerStarted st = HVPB__V1__WORKER_STARTED__INIT;
    Hvpb__V1__WorkerExited ex = HVPB__V1__WORKER_EXITED__INIT;
    m.seq = e->seq;
    if (e->kind == EV_STARTED) {
        st.worker_id = e->worker_id;
        st.pid = e->pid;
        if (e->reason != NULL) {
            st.actor_address = e->reason;
        }
        m.body_case = HVPB__V1__AGENT_MSG__BODY_STARTED;
        m.started = &st;
    } else {
        ex.worker_id = e->worker_id;
        ex.exit_code = e->exit_code;
        ex.term_signal = e->term_signal;
        ex.reason = e->reason;
        ex.actor_state_saved = e->state_saved;
        ex.actor_state.data = e->state;
        ex.actor_state.len = e->state_len;
        ex.actor_state_digest = (char *)e->state_digest;
        ex.actor_state_size = e->state_size;
        ex.actor_state_error = e->state_error != NULL ? e->state_error : (char *)"";
        m.body_case = HVPB__V1__AGENT_MSG__BODY_EXITED;
        m.exited = &ex;
    }
    return hv_rpc_send(s->call, &m.base);
}

static hv_err send_lines(hv_session_t *s, uint64_t worker_id, uint32_t stream, char **lines,
                         size_t n) {
    Hvpb__V1__AgentMsg m = HVPB__V1__AGENT_MSG__INIT;
    Hvpb__V1__LogLines ll = HVPB__V1__LOG_LINES__INIT;
    ll.worker_id = worker_id;
    ll.stream = stream;
    ll.lines = lines;
    ll.n_lines = n;
    m.body_case = HVPB__V1__AGENT_MSG__BODY_LOG;
    m.log = &ll;
    return hv_rpc_send(s->call, &m.base);
}

static void send_heartbeat(hv_session_t *s) {
    hv_session_running_t *run = NULL;
    size_t n = s->cbs.running(&run, s->cbs.ud);
    hv_free(run);
    Hvpb__V1__AgentMsg m = HVPB__V1__AGENT_MSG__INIT;
    Hvpb__V1__Heartbeat hb = HVPB__V1__HEARTBEAT__INIT;
    hb.time_ms = hv_wall_ms();
    hb.running = (uint32_t)n;
    hb.draining = s->draining ? 1 : 0;
    m.body_case = HVPB__V1__AGENT_MSG__BODY_HEARTBEAT;
    m.heartbeat = &hb;
    if (hv_rpc_send(s->call, &m.base) == HV_OK) { // a full queue skips one beat
        s->hb_sent++;
    }
}

/* What a DrainNotice says about the time left: 0 when unknown, at least 1 ms once known. */
static uint32_t drain_left_ms(const hv_session_t *s) {
    if (s->drain_until == 0) {
        return 0;
    }
    uint64_t now = uv_now(s->loop);
    uint64_t left = s->drain_until > now ? s->drain_until - now : 1;
    return left > UINT32_MAX ? UINT32_MAX : (uint32_t)left;
}

static int log_slots(const hv_session_t *s) {
    return hv_rpc_call_queued(s->call) < HV_SESSION_INFLIGHT_MAX;
}

/* Sends what is queued, oldest first, while the stream takes it. */
static void session_flush(hv_session_t *s) {
    if (s->call == NULL || !hv_rpc_call_open(s->call)) {
        return;
    }
    if (s->drain_pending && s->drain_reason != NULL) {
        Hvpb__V1__AgentMsg m = HVPB__V1__AGENT_MSG__INIT;
        Hvpb__V1__DrainNotice dn = HVPB__V1__DRAIN_NOTICE__INIT;
        dn.reason = s->drain_reason;
        dn.deadline_ms = drain_left_ms(s);
        m.body_case = HVPB__V1__AGENT_MSG__BODY_DRAIN;
        m.drain = &dn;
        if (hv_rpc_send(s->call, &m.base) == HV_OK) {
            s->drain_pending = 0;
            s->drain_sent = 1;
            s->drain_mark = s->hb_sent;
            // A heartbeat right behind the notice: it carries the draining flag at once, and
            // the head's answer to it proves the notice was read (the stream is ordered and
            // the head answers every heartbeat).
            send_heartbeat(s);
        }
    }
    while (s->dropped != NULL && log_slots(s)) {
        dropped_t *d = s->dropped;
        char text[160];
        snprintf(text, sizeof(text),
                 "[hvagent: %llu log lines dropped while the head was unreachable]",
                 (unsigned long long)d->count);
        char *lines[1] = {text};
        if (send_lines(s, d->worker_id, d->stream, lines, 1) != HV_OK) {
            return;
        }
        s->dropped = d->next;
        hv_free(d);
    }
    for (;;) {
        event_t *e = s->ev_unsent;
        logbatch_t *b = s->log_head;
        if (e != NULL && (b == NULL || b->id >= e->log_mark)) {
            if (send_event(s, e) != HV_OK) {
                return;
            }
            s->ev_unsent = e->next;
            continue;
        }
        if (b == NULL || !log_slots(s)) {
            return;
        }
        if (send_lines(s, b->worker_id, b->stream, b->lines + b->first, b->n - b->first) != HV_OK) {
            return;
        }
        s->log_bytes -= b->bytes;
        s->log_head = b->next;
        if (s->log_tail == b) {
            s->log_tail = NULL;
        }
        batch_free(b);
    }
}

static void session_flush_cb(uv_timer_t *t) { session_flush(t->data); }

static void session_drain_cb(hv_rpc_call_t *call, void *ud) {
    hv_session_t *s = ud;
    (void)call;
    session_flush(s);
}

/* ---- connection state machine --------------------------------------------------------------- */

static void session_backoff(hv_session_t *s) {
    if (s->state == ST_STOPPED) {
        return;
    }
    s->state = ST_BACKOFF;
    uint64_t delay = session_jitter(s, s->backoff_ms);
    s->retry_at = uv_now(s->loop) + delay;
    s->backoff_ms *= 2;
    if (s->backoff_ms > HV_SESSION_BACKOFF_MAX_MS) {
        s->backoff_ms = HV_SESSION_BACKOFF_MAX_MS;
    }
}

static void session_fatal(hv_session_t *s, hv_err rc, const char *msg) {
    s->state = ST_STOPPED;
    if (s->cbs.on_fatal != NULL) {
        s->cbs.on_fatal(s, rc, msg, s->cbs.ud);
    }
}

static void session_on_msg(hv_rpc_call_t *call, const ProtobufCMessage *msg, void *ud) {
    hv_session_t *s = ud;
    const Hvpb__V1__HeadMsg *m = (const Hvpb__V1__HeadMsg *)msg;
    (void)call;
    s->last_contact = uv_now(s->loop);
    if (s->state == ST_OPENING) {
        s->state = ST_CONNECTED;
        s->backoff_ms = HV_SESSION_BACKOFF_MIN_MS;
        s->lease_fired = 0;
        s->drop_warned = 0;
        HV_LOG(HV_LOG_NOTICE, "agent", "HV-AGENT-SESSION",
               "session with the head %s established (node %llu, %zu events to confirm)", s->head,
               (unsigned long long)s->node_id, s->ev_count);
        int first = !s->connected_once;
        s->connected_once = 1;
        if (s->cbs.on_connected != NULL) {
            s->cbs.on_connected(s, first, s->cbs.ud);
        }
    }
    session_ack(s, m->ack_seq);
    if (m->body_case == HVPB__V1__HEAD_MSG__BODY_HEARTBEAT) {
        s->hb_answered++;
        if (s->drain_sent && !s->drain_confirmed && s->hb_answered > s->drain_mark) {
            s->drain_confirmed = 1;
            HV_LOG(HV_LOG_INFO, "agent", "HV-AGENT-DRAIN-NOTICED",
                   "the head %s has the drain notice", s->head);
        }
    }
    if (m->body_case != HVPB__V1__HEAD_MSG__BODY_HEARTBEAT &&
        m->body_case != HVPB__V1__HEAD_MSG__BODY__NOT_SET && s->cbs.on_order != NULL &&
        s->state != ST_STOPPED) {
        s->cbs.on_order(s, m, s->cbs.ud);
    }
    session_flush(s);
}

static void session_on_done(hv_rpc_call_t *call, const hv_rpc_status_t *st, void *ud) {
    hv_session_t *s = ud;
    (void)call;
    s->call = NULL;
    snprintf(s->last_error, sizeof(s->last_error), "%s%s%.250s", hv_strerror(st->rc),
             st->msg[0] ? ": " : "", st->msg);
    s->last_explained = st->explained;
    // Events sent on this stream and not acknowledged go again on the next one.
    s->ev_unsent = s->ev_head;
    if (s->state == ST_STOPPED) {
        return;
    }
    if (s->state == ST_CONNECTED) {
        HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-HEAD-LOST",
               "lost the session with the head %s: %s; reconnecting", s->head, s->last_error);
    } else {
        HV_LOG(HV_LOG_INFO, "agent", "HV-AGENT-SESSION-FAIL", "session with %s failed: %s", s->head,
               s->last_error);
    }
    session_backoff(s);
}

static void session_open(hv_session_t *s) {
    hv_session_running_t *run = NULL;
    size_t n = s->cbs.running(&run, s->cbs.ud);
    Hvpb__V1__RunningWorker *rw = n ? hv_calloc(n, sizeof(*rw)) : NULL;
    Hvpb__V1__RunningWorker **rwp = n ? hv_calloc(n, sizeof(*rwp)) : NULL;
    if (n > 0 && (rw == NULL || rwp == NULL)) {
        n = 0; // the head then learns about them from the started events and heartbeats
    }
    for (size_t i = 0; i < n; i++) {
        Hvpb__V1__RunningWorker init = HVPB__V1__RUNNING_WORKER__INIT;
        rw[i] = init;
        rw[i].worker_id = run[i].worker_id;
        rw[i].pid = run[i].pid;
        rwp[i] = &rw[i];
    }
    Hvpb__V1__AgentMsg m = HVPB__V1__AGENT_MSG__INIT;
    Hvpb__V1__AgentHello h = HVPB__V1__AGENT_HELLO__INIT;
    h.node_id = s->node_id;
    h.token = (char *)""; // the Session is authorized by the node credential (metadata)
    h.incarnation = s->incarnation;
    h.running = rwp;
    h.n_running = n;
    m.body_case = HVPB__V1__AGENT_MSG__BODY_HELLO;
    m.hello = &h;
    hv_rpc_client_cbs_t cbs = {.resp = &hvpb__v1__head_msg__descriptor,
                               .on_msg = session_on_msg,
                               .on_done = session_on_done,
                               .ud = s};
    hv_err rc = hv_rpc_call_start(s->eng, s->ch, "/hvpb.v1.Cluster/Session", HV_RPC_BIDI, &m.base,
                                  0, &cbs, &s->call);
    hv_free(rw);
    hv_free(rwp);
    hv_free(run);
    if (rc != HV_OK) {
        snprintf(s->last_error, sizeof(s->last_error), "cannot start Session: %s", hv_strerror(rc));
        s->last_explained = 0;
        HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-SESSION-FAIL", "%s", s->last_error);
        s->call = NULL;
        session_backoff(s);
        return;
    }
    hv_rpc_call_set_drain_cb(s->call, session_drain_cb);
    s->state = ST_OPENING;
    s->opened_at = uv_now(s->loop);
    s->hb_sent = 0;
    s->hb_answered = 0;
    s->drain_sent = 0;
    // Every unacknowledged event goes right after the hello and before the first heartbeat:
    // the head reconciles the hello's worker list at that heartbeat, after applying them.
    for (s->ev_unsent = s->ev_head; s->ev_unsent != NULL; s->ev_unsent = s->ev_unsent->next) {
        if (send_event(s, s->ev_unsent) != HV_OK) {
            break;
        }
    }
    // A drain notice is repeated on every new stream: the last one may have been lost with it.
    s->drain_pending = s->drain_reason != NULL;
    send_heartbeat(s); // also gets the head to answer at once
    s->next_heartbeat = s->opened_at + s->heartbeat_ms;
    session_flush(s);
}

static void join_on_msg(hv_rpc_call_t *call, const ProtobufCMessage *msg, void *ud) {
    hv_session_t *s = ud;
    const Hvpb__V1__JoinReply *r = (const Hvpb__V1__JoinReply *)msg;
    (void)call;
    s->node_id = r->node_id;
    if (r->node_credential != NULL && r->node_credential[0] != '\0') {
        /* From now on every call (Session, Fetch, re-joins) carries the node credential, and the
         * join token is forgotten: it admitted this agent once. */
        if (hv_rpc_channel_set_token(s->ch, r->node_credential) != HV_OK) {
            HV_LOG(HV_LOG_ERROR, "agent", "HV-AGENT-CRED", "the head sent an unusable credential");
        }
        snprintf(s->cred, sizeof(s->cred), "%s", r->node_credential);
        volatile char *t = s->token;
        for (size_t i = 0; t[i] != '\0'; i++) {
            t[i] = '\0';
        }
    }
    s->heartbeat_ms = r->heartbeat_ms != 0 ? r->heartbeat_ms : SESSION_DEFAULT_HEARTBEAT_MS;
    if (s->heartbeat_ms < 50) {
        s->heartbeat_ms = 50;
    }
    s->lease_ms = r->lease_ms != 0 ? r->lease_ms : SESSION_DEFAULT_LEASE_MS;
    if (s->lease_ms < 2 * s->heartbeat_ms) {
        s->lease_ms = 2 * s->heartbeat_ms;
    }
    int first = !s->joined_once;
    s->joined_once = 1;
    HV_LOG(first ? HV_LOG_INFO : HV_LOG_NOTICE, "agent", "HV-AGENT-JOINED",
           "joined %s (cluster \"%s\") as node %llu; heartbeat %u ms, lease %u ms", s->head,
           r->cluster_name, (unsigned long long)r->node_id, s->heartbeat_ms, s->lease_ms);
    if (s->cbs.on_joined != NULL) {
        s->cbs.on_joined(s, first, r->node_id, r->cluster_name, s->cbs.ud);
    }
}

static int join_refusal(hv_err rc) {
    return rc == HV_EPERM || rc == HV_EAUTH || rc == HV_EINVAL || rc == HV_ENOTSUP ||
           rc == HV_EEXIST;
}

static void join_on_done(hv_rpc_call_t *call, const hv_rpc_status_t *st, void *ud) {
    hv_session_t *s = ud;
    (void)call;
    s->join_call = NULL;
    if (s->state == ST_STOPPED) {
        return;
    }
    if (st->rc == HV_OK && s->node_id != 0) {
        session_open(s);
        return;
    }
    hv_err rc = st->rc == HV_OK ? HV_EPROTO : st->rc;
    snprintf(s->last_error, sizeof(s->last_error), "%.290s",
             st->msg[0] ? st->msg : hv_strerror(rc));
    s->last_explained = st->explained;
    /* HV_EEXIST: another live agent holds our node name. Retrying would only fight it for the
     * name, so this agent stops, even after it was joined once (it was taken over). */
    if ((!s->joined_once && join_refusal(rc)) || rc == HV_EEXIST) {
        session_fatal(s, rc, s->last_error);
        return;
    }
    if (rc == HV_EAUTH) {
        /* The node credential is no longer accepted: revoked (hvctl node revoke), or the head's
         * data directory (its key) was replaced. The join token is gone, so stop. */
        char msg[512];
        snprintf(msg, sizeof(msg),
                 "the head %s no longer accepts this node's credential (%s); restart the agent "
                 "with the join token to join again",
                 s->head, s->last_error);
        session_fatal(s, rc, msg);
        return;
    }
    if (join_refusal(rc)) {
        HV_LOG(HV_LOG_ERROR, "agent", "HV-AGENT-JOIN-REFUSED",
               "the head %s refused the re-join: %s; retrying", s->head, s->last_error);
        s->backoff_ms = HV_SESSION_BACKOFF_MAX_MS;
    } else {
        HV_LOG(HV_LOG_INFO, "agent", "HV-AGENT-JOIN-FAIL", "join %s failed: %s (%s)", s->head,
               s->last_error, hv_errname(rc));
    }
    session_backoff(s);
    uint64_t give_up = s->started_ms + s->connect_timeout_ms;
    if (!s->joined_once && s->retry_at > give_up) {
        s->retry_at = give_up; // one last try at the deadline
    }
    if (!s->joined_once && uv_now(s->loop) >= give_up) {
        char msg[512], plain[300];
        /* gRPC's own text ("DNS resolution failed ... C-ares status ...") in plain words, or
         * the rpc layer's account of it (TLS) as it is. */
        const char *why = s->last_explained ? NULL
                                            : hv_rpc_plain_transport_error(s->last_error, s->head,
                                                                           plain, sizeof(plain));
        snprintf(msg, sizeof(msg), "cannot reach the head at %s after %u s: %s", s->head,
                 (unsigned)((uv_now(s->loop) - s->started_ms + 500) / 1000),
                 why != NULL ? why : s->last_error);
        session_fatal(s, HV_EUNAVAIL, msg);
    }
}

static void session_join(hv_session_t *s) {
    Hvpb__V1__JoinRequest req = HVPB__V1__JOIN_REQUEST__INIT;
    req.token = s->token;
    req.node = s->node;
    req.incarnation = s->incarnation;
    hv_rpc_client_cbs_t cbs = {.resp = &hvpb__v1__join_reply__descriptor,
                               .on_msg = join_on_msg,
                               .on_done = join_on_done,
                               .ud = s};
    s->state = ST_JOINING;
    s->node_id = 0;
    hv_err rc = hv_rpc_call_start(s->eng, s->ch, "/hvpb.v1.Cluster/Join", HV_RPC_UNARY, &req.base,
                                  HV_SESSION_JOIN_TIMEOUT_MS, &cbs, &s->join_call);
    if (rc != HV_OK) {
        s->join_call = NULL;
        snprintf(s->last_error, sizeof(s->last_error), "cannot start Join: %s", hv_strerror(rc));
        session_backoff(s);
    }
}

static void session_tick(uv_timer_t *t) {
    hv_session_t *s = t->data;
    uint64_t now = uv_now(s->loop);
    if (s->state == ST_STOPPED) {
        return;
    }
    if (s->state == ST_BACKOFF && now >= s->retry_at) {
        session_join(s);
    }
    if ((s->state == ST_OPENING || s->state == ST_CONNECTED) && s->call != NULL) {
        uint64_t quiet = s->lease_ms > 3 * s->heartbeat_ms ? s->lease_ms : 3 * s->heartbeat_ms;
        uint64_t since = s->state == ST_OPENING ? s->opened_at : s->last_contact;
        if (now - since > quiet) {
            HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-HEAD-QUIET",
                   "no answer from the head %s for %llu ms: reopening the session", s->head,
                   (unsigned long long)(now - since));
            hv_rpc_call_cancel(s->call); // on_done follows and schedules the reconnect
        } else if (now >= s->next_heartbeat) {
            send_heartbeat(s);
            s->next_heartbeat = now + s->heartbeat_ms;
        }
    }
    if (s->state != ST_CONNECTED && s->connected_once && !s->lease_fired &&
        now - s->last_contact > s->lease_ms) {
        s->lease_fired = 1;
        HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-LEASE",
               "no session with the head %s for %llu ms (lease %u ms)", s->head,
               (unsigned long long)(now - s->last_contact), s->lease_ms);
        if (s->cbs.on_lease_expired != NULL) {
            s->cbs.on_lease_expired(s, s->cbs.ud);
        }
    }
}

/* ---- API ------------------------------------------------------------------------------------ */

hv_err hv_session_create(uv_loop_t *loop, hv_rpc_engine_t *e, hv_rpc_channel_t *ch,
                         const hv_session_config_t *cfg, const hv_session_cbs_t *cbs,
                         hv_session_t **out) {
    if (cbs == NULL || cbs->running == NULL || cfg == NULL || cfg->node == NULL) {
        return HV_EINVAL;
    }
    hv_err rc = HV_ENOMEM;
    hv_session_t *s = hv_calloc(1, sizeof(*s));
    uint8_t *packed = NULL;
    if (s == NULL) {
        return HV_ENOMEM;
    }
    s->head = hv_strdup(cfg->head != NULL ? cfg->head : "");
    s->token = hv_strdup(cfg->token != NULL ? cfg->token : "");
    // A deep copy of the node info through its wire form.
    size_t len = protobuf_c_message_get_packed_size(&cfg->node->base);
    packed = hv_malloc(len);
    if (s->head == NULL || s->token == NULL || packed == NULL) {
        goto fail;
    }
    protobuf_c_message_pack(&cfg->node->base, packed);
    s->node = hvpb__v1__node_info__unpack(NULL, len, packed);
    if (s->node == NULL) {
        goto fail;
    }
    hv_free(packed);
    packed = NULL;
    s->loop = loop;
    s->eng = e;
    s->ch = ch;
    s->cbs = *cbs;
    s->incarnation = cfg->incarnation;
    s->rng = cfg->incarnation | 1;
    s->connect_timeout_ms =
        cfg->connect_timeout_ms != 0 ? cfg->connect_timeout_ms : SESSION_CONNECT_TIMEOUT_MS;
    s->log_limit = cfg->log_buffer != 0 ? cfg->log_buffer : HV_SESSION_LOG_BUFFER;
    s->heartbeat_ms = SESSION_DEFAULT_HEARTBEAT_MS;
    s->lease_ms = SESSION_DEFAULT_LEASE_MS;
    s->backoff_ms = HV_SESSION_BACKOFF_MIN_MS;
    s->next_seq = 1;
    s->next_batch_id = 1;
    s->started_ms = uv_now(loop);
    uv_timer_init(loop, &s->tick);
    s->tick.data = s;
    uv_timer_init(loop, &s->flush_timer);
    s->flush_timer.data = s;
    uv_timer_start(&s->tick, session_tick, SESSION_TICK_MS, SESSION_TICK_MS);
    session_join(s);
    *out = s;
    return HV_OK;
fail:
    hv_free(packed);
    if (s->node != NULL) {
        hvpb__v1__node_info__free_unpacked(s->node, NULL);
    }
    hv_free(s->head);
    hv_free(s->token);
    hv_free(s);
    return rc;
}

void hv_session_drain_notice(hv_session_t *s, const char *reason, uint32_t deadline_ms) {
    s->draining = 1;
    char *r = hv_strdup(reason != NULL ? reason : "");
    if (r == NULL) {
        return; // heartbeats still say draining; the head drains the node on that alone
    }
    hv_free(s->drain_reason);
    s->drain_reason = r;
    s->drain_until = deadline_ms != 0 ? uv_now(s->loop) + deadline_ms : 0;
    s->drain_pending = 1;
    s->drain_sent = 0;
    s->drain_confirmed = 0;
    session_flush(s);
}

void hv_session_set_draining(hv_session_t *s, int draining) {
    s->draining = draining ? 1 : 0;
    if (!draining) {
        // Undrained: the notice must not be repeated on the next stream either.
        hv_free(s->drain_reason);
        s->drain_reason = NULL;
        s->drain_until = 0;
        s->drain_pending = 0;
        s->drain_sent = 0;
        s->drain_confirmed = 0;
    }
}

int hv_session_draining(const hv_session_t *s) { return s->draining; }

const char *hv_session_credential(const hv_session_t *s) { return s->cred; }

int hv_session_drain_confirmed(const hv_session_t *s) { return s->drain_confirmed; }

int hv_session_connected(const hv_session_t *s) { return s->state == ST_CONNECTED; }

size_t hv_session_unacked(const hv_session_t *s) { return s->ev_count; }

uint64_t hv_session_dropped_lines(const hv_session_t *s) { return s->dropped_total; }

uint64_t hv_session_node_id(const hv_session_t *s) { return s->node_id; }

uint32_t hv_session_lease_ms(const hv_session_t *s) { return s->lease_ms; }

void hv_session_stop(hv_session_t *s) {
    if (s == NULL || s->state == ST_STOPPED) {
        return;
    }
    s->state = ST_STOPPED;
    uv_timer_stop(&s->tick);
    uv_timer_stop(&s->flush_timer);
    if (s->join_call != NULL) {
        hv_rpc_call_cancel(s->join_call);
    }
    if (s->call != NULL) {
        hv_rpc_finish(s->call, HV_OK, NULL);
    }
}

static void session_closed_cb(uv_handle_t *h) {
    hv_session_t *s = h->data;
    if (--s->closing > 0) {
        return; // the other timer is still closing
    }
    session_ack(s, UINT64_MAX);
    while (s->log_head != NULL) {
        logbatch_t *b = s->log_head;
        s->log_head = b->next;
        batch_free(b);
    }
    while (s->dropped != NULL) {
        dropped_t *d = s->dropped;
        s->dropped = d->next;
        hv_free(d);
    }
    hvpb__v1__node_info__free_unpacked(s->node, NULL);
    hv_free(s->drain_reason);
    hv_free(s->head);
    hv_free(s->token);
    hv_free(s);
}

void hv_session_destroy(hv_session_t *s) {
    if (s == NULL) {
        return;
    }
    hv_session_stop(s);
    if (s->call != NULL || s->join_call != NULL) {
        HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-SESSION-LEAK",
               "session destroyed while an rpc call is still open: leaking it");
        return;
    }
    s->closing = 2;
    uv_close((uv_handle_t *)&s->tick, session_closed_cb);
    uv_close((uv_handle_t *)&s->flush_timer, session_closed_cb);
}
