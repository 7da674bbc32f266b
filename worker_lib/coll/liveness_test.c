/*
 * liveness_test: the data plane's liveness monitor (liveness.h). The rule as tables (a heartbeat
 * heard, acknowledged or not, when a silence is due and how long the monitor may sleep), then
 * two monitors over a ring of two ranks made of real loopback TCP connections: no report while
 * both beat, a report from the left neighbour within the bound once the right one's monitor
 * stops (its kernel still acknowledges: no ACK report), and none when the connections close
 * (an ended connection is the ring's evidence, not the monitor's). A host that stops
 * acknowledging needs a link taken down: tests/integration/elastic_silent_loss.sh.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hvtest.h"
#include "liveness.h"

/* ---- the rule ------------------------------------------------------------------------------- */

static void track_hear(void) {
    hv__live_track_t t = {.how = HV__LIVE_HEAR};
    // Nothing heard yet: never due (a neighbour that has not started beating is not silent).
    ASSERT_EQ_INT(hv__live_track_due(&t, 100000, 500), 0);
    hv__live_track_heard(&t, 1000);
    static const struct {
        uint64_t now;
        uint32_t want;
    } rows[] = {{1000, 0}, {1499, 0}, {1500, 500}, {1600, 0}, {5000, 0}};
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        ASSERT_EQ_INT(hv__live_track_due(&t, rows[i].now, 500), rows[i].want);
    }
    // Heard again: a later silence is reported again, measured from the new heartbeat.
    hv__live_track_heard(&t, 6000);
    ASSERT_EQ_INT(hv__live_track_due(&t, 6400, 500), 0);
    ASSERT_EQ_INT(hv__live_track_due(&t, 6700, 500), 700);
    t.closed = 1;
    hv__live_track_heard(&t, 7000);
    ASSERT_EQ_INT(hv__live_track_due(&t, 9000, 500), 0); // closed: no evidence any more
}

static void track_ack(void) {
    hv__live_track_t t = {.how = HV__LIVE_ACK};
    ASSERT_TRUE(hv__live_track_beat_due(&t, 0, 100)); // never beat: due at once
    hv__live_track_wrote(&t, 100);
    ASSERT_TRUE(!hv__live_track_beat_due(&t, 199, 100));
    ASSERT_TRUE(hv__live_track_beat_due(&t, 200, 100));
    hv__live_track_acked(&t, 0); // acknowledged: nothing outstanding
    ASSERT_EQ_INT(t.pending_ms, 0);
    ASSERT_EQ_INT(hv__live_track_due(&t, 5000, 500), 0);
    // Unacknowledged from the heartbeat of 200 on: the oldest one counts, later ones do not move
    // it, and the silence is due silent_ms after it.
    hv__live_track_wrote(&t, 200);
    hv__live_track_acked(&t, 1);
    hv__live_track_wrote(&t, 300);
    hv__live_track_acked(&t, 2);
    ASSERT_EQ_INT(t.pending_ms, 200);
    ASSERT_EQ_INT(hv__live_track_due(&t, 699, 500), 0);
    ASSERT_EQ_INT(hv__live_track_due(&t, 700, 500), 500);
    ASSERT_EQ_INT(hv__live_track_due(&t, 900, 500), 0); // reported once
    // Acknowledged again (the link came back): re-armed.
    hv__live_track_acked(&t, 0);
    hv__live_track_wrote(&t, 1000);
    ASSERT_EQ_INT(hv__live_track_due(&t, 1600, 500), 600);
}

static void track_wait(void) {
    hv__live_track_t hear = {.how = HV__LIVE_HEAR};
    ASSERT_EQ_INT(hv__live_track_wait(&hear, 0, 500, 100), 100); // nothing heard: one beat
    hv__live_track_heard(&hear, 1000);
    ASSERT_EQ_INT(hv__live_track_wait(&hear, 1000, 500, 100), 100);
    ASSERT_EQ_INT(hv__live_track_wait(&hear, 1450, 500, 100), 50); // the deadline is nearer
    ASSERT_EQ_INT(hv__live_track_wait(&hear, 1600, 500, 100), 0);
    hv__live_track_t ack = {.how = HV__LIVE_ACK};
    ASSERT_EQ_INT(hv__live_track_wait(&ack, 1000, 500, 100), 0); // first beat due now
    hv__live_track_wrote(&ack, 1000);
    ASSERT_EQ_INT(hv__live_track_wait(&ack, 1030, 500, 100), 70);
}

/* ---- over real sockets ---------------------------------------------------------------------- */

/* A loopback TCP connection: *a connects, *b accepts. */
static int tcp_pair(int *a, int *b) {
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(l, 1) != 0 ||
        getsockname(l, (struct sockaddr *)&sa, &len) != 0) {
        return -1;
    }
    *a = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (*a < 0 || connect(*a, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(l);
        return -1;
    }
    *b = accept(l, NULL, NULL);
    close(l);
    int one = 1;
    setsockopt(*a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(*b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return *b < 0 ? -1 : 0;
}

/* What one rank's monitor reported. */
typedef struct seen_s {
    atomic_int n;
    atomic_uint how;
    atomic_uint silent_ms;
    atomic_ullong tag;
    double t; // hvtest_now() of the first report
} seen_t;

static void on_silent(void *ud, uint64_t tag, unsigned how, uint32_t silent_ms) {
    seen_t *s = ud;
    if (atomic_fetch_add(&s->n, 1) == 0) {
        s->t = hvtest_now();
        atomic_store(&s->how, how);
        atomic_store(&s->silent_ms, silent_ms);
        atomic_store(&s->tag, tag);
    }
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* A ring of two ranks: rank 0 sends on c01[0] (rank 1 receives on c01[1]), rank 1 sends on
 * c10[0] (rank 0 receives on c10[1]). Each rank watches its right neighbour with HEAR on its send
 * socket and its left one with ACK on its receive socket. */
typedef struct ring2_s {
    int c01[2], c10[2];
    seen_t seen[2];
    hv__live_t *mon[2];
} ring2_t;

static int ring2_start(ring2_t *r, uint32_t silent_ms) {
    memset(r, 0, sizeof(*r));
    if (tcp_pair(&r->c01[0], &r->c01[1]) != 0 || tcp_pair(&r->c10[0], &r->c10[1]) != 0) {
        return -1;
    }
    hv__live_opts_t o = {.silent_ms = silent_ms};
    hv__live_watch_t w0[2] = {{.fd = r->c01[0], .how = HV__LIVE_HEAR, .tag = 11},
                              {.fd = r->c10[1], .how = HV__LIVE_ACK, .tag = 11}};
    hv__live_watch_t w1[2] = {{.fd = r->c10[0], .how = HV__LIVE_HEAR, .tag = 10},
                              {.fd = r->c01[1], .how = HV__LIVE_ACK, .tag = 10}};
    if (hv__live_start(&o, w0, 2, on_silent, &r->seen[0], &r->mon[0]) != HV_OK ||
        hv__live_start(&o, w1, 2, on_silent, &r->seen[1], &r->mon[1]) != HV_OK) {
        return -1;
    }
    return 0;
}

static void ring2_stop(ring2_t *r) {
    hv__live_stop(r->mon[0]);
    hv__live_stop(r->mon[1]);
    int fds[4] = {r->c01[0], r->c01[1], r->c10[0], r->c10[1]};
    for (int i = 0; i < 4; i++) {
        if (fds[i] > 0) {
            close(fds[i]);
        }
    }
}

static void beating_is_quiet(void) {
    ring2_t r;
    ASSERT_TRUE(ring2_start(&r, 200) == 0);
    sleep_s(1.2); // six thresholds
    int n0 = atomic_load(&r.seen[0].n), n1 = atomic_load(&r.seen[1].n);
    ring2_stop(&r);
    ASSERT_EQ_INT(n0, 0);
    ASSERT_EQ_INT(n1, 0);
}

static void stopped_neighbour_is_heard_silent(void) {
    ring2_t r;
    ASSERT_TRUE(ring2_start(&r, 200) == 0);
    sleep_s(0.3); // rank 0 has heard rank 1's heartbeats
    // Rank 1's monitor stops (a frozen process: its sockets stay open, its kernel acknowledges).
    double t0 = hvtest_now();
    hv__live_stop(r.mon[1]);
    r.mon[1] = NULL;
    double bound = hvtest_scale(2.0);
    while (atomic_load(&r.seen[0].n) == 0 && hvtest_now() - t0 < bound) {
        sleep_s(0.01);
    }
    sleep_s(0.5); // an ACK report would come now too, if the rule let it
    seen_t *s = &r.seen[0];
    int n = atomic_load(&s->n);
    double after = s->t - t0;
    unsigned how = atomic_load(&s->how), silent = atomic_load(&s->silent_ms);
    unsigned long long tag = atomic_load(&s->tag);
    ring2_stop(&r);
    ASSERT_EQ_INT(n, 1);
    ASSERT_EQ_INT(how, HV__LIVE_HEAR);
    ASSERT_EQ_INT(tag, 11);
    ASSERT_TRUE(silent >= 200);
    // The last heartbeat came at most one beat (40 ms) before the stop.
    ASSERT_TRUE(after >= 0.15);
    ASSERT_TRUE(after <= bound);
}

static void closed_is_no_evidence(void) {
    ring2_t r;
    ASSERT_TRUE(ring2_start(&r, 200) == 0);
    sleep_s(0.3);
    hv__live_stop(r.mon[1]);
    r.mon[1] = NULL;
    // Rank 1 closes its sockets (a process that ended): rank 0 sees the ends, not a silence.
    shutdown(r.c10[0], SHUT_RDWR);
    shutdown(r.c01[1], SHUT_RDWR);
    sleep_s(0.8);
    int n = atomic_load(&r.seen[0].n);
    ring2_stop(&r);
    ASSERT_EQ_INT(n, 0);
}

static void bad_options(void) {
    hv__live_watch_t w = {.fd = 0, .how = HV__LIVE_HEAR};
    hv__live_t *l = NULL;
    hv__live_opts_t zero = {.silent_ms = 0}, ok = {.silent_ms = 100};
    ASSERT_RC(hv__live_start(&zero, &w, 1, on_silent, NULL, &l), HV_EINVAL);
    ASSERT_RC(hv__live_start(&ok, &w, 0, on_silent, NULL, &l), HV_EINVAL);
    hv__live_stop(NULL);
}

static const hvtest_case_t cases[] = {
    {"track_hear", track_hear},
    {"track_ack", track_ack},
    {"track_wait", track_wait},
    {"beating_is_quiet", beating_is_quiet},
    {"stopped_neighbour_is_heard_silent", stopped_neighbour_is_heard_silent},
    {"closed_is_no_evidence", closed_is_no_evidence},
    {"bad_options", bad_options},
};

HVTEST_MAIN(cases)
