/*
 * actor_test: libhv's actors (include/hv/actor.h) through real sockets and real processes. Each
 * case forks an actor process that registers the test class "t" and runs hv_actor_serve (so
 * SIGTERM, SIGKILL and a crashing method hit a real process), then calls it as a user would:
 * order with many calls in flight, a bound on a wait, a wrong secret, an oversized frame (the
 * caller refuses to send one; a hostile peer that sends one is cut off), a handshake that never
 * comes, a SIGKILL and a crashing method with calls in flight (HV_EINDOUBT at once, not a hang),
 * a method error (HV_EREMOTE with the method's code and message; hv_actor_last_error), save/load
 * across a stop and a restart, 200 classes in one process, and the replies of a pipelined batch
 * of slow calls sent as each call ends, and the call figures the server writes (HV_ACTOR_FIGURES_OUT).
 * `actor_test NAME` runs one case.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "actor_wire.h"
#include "callfig.h"
#include "hv/actor.h"
#include "hvtest.h"
#include "util.h"

#define SECRET "test-secret-0123456789abcdef"

/* ---- the test class, run in the forked actor process ----------------------------------------- */

typedef struct tstate_s {
    int64_t count;     // add / get
    uint32_t last[16]; // seq: the last number seen per stream
} tstate_t;

static hv_err t_create(void *ud, const void *arg, size_t len, void **self_out) {
    (void)ud;
    (void)arg;
    (void)len;
    tstate_t *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return HV_ENOMEM;
    }
    *self_out = t;
    return HV_OK;
}

static int64_t t_num(const void *arg, size_t len) {
    char buf[32];
    len = len < sizeof(buf) - 1 ? len : sizeof(buf) - 1;
    memcpy(buf, arg, len);
    buf[len] = '\0';
    return strtoll(buf, NULL, 10);
}

static hv_err t_call(void *self, const char *method, const void *arg, size_t len,
                     hv_actor_out_t *out) {
    tstate_t *t = self;
    char buf[32];
    if (strcmp(method, "seq") == 0) {
        /* arg: u32 stream, u32 number. Each stream's numbers must come 1, 2, 3, ... */
        uint32_t v[2];
        if (len != sizeof(v)) {
            return HV_EINVAL;
        }
        memcpy(v, arg, sizeof(v));
        if (v[0] >= 16 || v[1] != t->last[v[0]] + 1) {
            hv_actor_out_errorf(out, "stream %u: got %u after %u", v[0], v[1], t->last[v[0] & 15]);
            return HV_EPROTO;
        }
        t->last[v[0]] = v[1];
        return hv_actor_out_append(out, arg, len);
    }
    if (strcmp(method, "echo") == 0) {
        return hv_actor_out_append(out, arg, len);
    }
    if (strcmp(method, "add") == 0 || strcmp(method, "get") == 0) {
        if (method[0] == 'a') {
            t->count += t_num(arg, len);
        }
        int n = snprintf(buf, sizeof(buf), "%lld", (long long)t->count);
        return hv_actor_out_append(out, buf, (size_t)n);
    }
    if (strcmp(method, "big") == 0) {
        size_t n = (size_t)t_num(arg, len);
        char *b = calloc(1, n);
        hv_err rc = b != NULL ? hv_actor_out_append(out, b, n) : HV_ENOMEM;
        free(b);
        return rc;
    }
    if (strcmp(method, "sleep") == 0) {
        usleep((useconds_t)t_num(arg, len) * 1000);
        return HV_OK;
    }
    if (strcmp(method, "fail") == 0) {
        hv_actor_out_errorf(out, "bad input '%.*s'", (int)len, (const char *)arg);
        return HV_EINVAL;
    }
    if (strcmp(method, "nap") == 0) {
        /* sleep, then the time it ended (CLOCK_MONOTONIC: the caller's clock too). */
        usleep((useconds_t)t_num(arg, len) * 1000);
        double end = hvtest_now();
        return hv_actor_out_append(out, &end, sizeof(end));
    }
    if (strcmp(method, "fail2") == 0) {
        hv_actor_out_error(out, "100% plain: %s stays"); // taken as it is, not a format
        return HV_EIO;
    }
    if (strcmp(method, "crash") == 0) {
        abort();
    }
    return HV_ENOTFOUND;
}

static hv_err t_save(void *self, hv_actor_out_t *out) {
    tstate_t *t = self;
    return hv_actor_out_append(out, &t->count, sizeof(t->count));
}

static hv_err t_load(void *self, const void *state, size_t len) {
    tstate_t *t = self;
    if (len != sizeof(t->count)) {
        return HV_ECORRUPT;
    }
    memcpy(&t->count, state, sizeof(t->count));
    return HV_OK;
}

/* ---- an actor process per case ----------------------------------------------------------------- */

typedef struct srv_s {
    pid_t pid;
    char dir[64];    // per-case temporary directory
    char addr[64];   // "127.0.0.1:PORT"
    char state[128]; // dir/state
} srv_t;

typedef struct srv_opts_s {
    uint32_t max_frame;
    uint32_t hs_timeout_ms;
    int save;    // state_out = dir/state
    int load;    // state_in = dir/state
    int figures; // HV_ACTOR_FIGURES_OUT = dir/figures
} srv_opts_t;

/* The test's actor class t under this name. */
static hv_actor_class_t t_class(const char *name) {
    /* size, name, create, call, destroy, save, load, ud (HV_ACTOR_CLASS_INIT's order) */
    hv_actor_class_t cls = {
        sizeof(hv_actor_class_t), name, t_create, t_call, free, t_save, t_load, NULL};
    return cls;
}

/* Forks the actor process and waits (bounded) for its address. 0 on success. */
static int srv_start(srv_t *s, const srv_opts_t *o) {
    char addr_file[128];
    snprintf(addr_file, sizeof(addr_file), "%s/addr", s->dir);
    unlink(addr_file);
    snprintf(s->state, sizeof(s->state), "%s/state", s->dir);
    fflush(NULL);
    s->pid = fork();
    if (s->pid == 0) {
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core); // the crash case aborts
        hv_actor_class_t cls = t_class("t");
        if (hv_actor_register(&cls) != HV_OK) {
            _exit(3);
        }
        hv_actor_server_config_t cfg = HV_ACTOR_SERVER_CONFIG_INIT;
        cfg.class_name = "t";
        cfg.secret = SECRET;
        cfg.addr_file = addr_file;
        cfg.max_frame = o ? o->max_frame : 0;
        cfg.handshake_timeout_ms = o ? o->hs_timeout_ms : 0;
        cfg.state_out = o && o->save ? s->state : NULL;
        cfg.state_in = o && o->load ? s->state : NULL;
        if (o != NULL && o->figures) {
            char figures[160];
            snprintf(figures, sizeof(figures), "%s/figures", s->dir);
            setenv("HV_ACTOR_FIGURES_OUT", figures, 1);
        }
        _exit(hv_actor_serve(&cfg) == HV_OK ? 0 : 1);
    }
    double end = hvtest_now() + hvtest_scale(10);
    while (hvtest_now() < end) {
        char *text = NULL;
        size_t len = 0;
        if (hv_read_file(addr_file, 64, &text, &len) == HV_OK) {
            snprintf(s->addr, sizeof(s->addr), "%.*s", (int)(len > 0 ? len - 1 : 0), text);
            free(text);
            return 0;
        }
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            s->pid = 0;
            HVT_FAIL("the actor process exited before listening (status %d)", st);
            return -1;
        }
        usleep(5000);
    }
    HVT_FAIL("the actor process did not listen within 10 s");
    return -1;
}

/* Ends the actor process (SIGKILL unless already gone) and reaps it. */
static void srv_kill(srv_t *s) {
    if (s->pid > 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
    }
}

/* Stops it the graceful way (SIGTERM) and returns its exit status, or -1 after 10 s. */
static int srv_term(srv_t *s) {
    kill(s->pid, SIGTERM);
    double end = hvtest_now() + hvtest_scale(10);
    while (hvtest_now() < end) {
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            s->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        usleep(5000);
    }
    srv_kill(s);
    return -1;
}

static void srv_cleanup(srv_t *s) {
    srv_kill(s);
    char path[160];
    const char *names[] = {"addr", "state", "figures", "figures.tmp"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", s->dir, names[i]);
        unlink(path);
    }
    rmdir(s->dir);
}

/* Starts a fresh actor process with options o in a new directory (0), or fails the case (-1). */
static int srv_open(srv_t *s, const srv_opts_t *o) {
    snprintf(s->dir, sizeof(s->dir), "/tmp/hv_actor_test.XXXXXX");
    if (mkdtemp(s->dir) == NULL) {
        HVT_FAIL("mkdtemp: %s", strerror(errno));
        return -1;
    }
    return srv_start(s, o);
}

/* Runs body against a fresh actor process with options o, always cleaning up. */
static void with_actor(void (*body)(srv_t *), const srv_opts_t *o) {
    srv_t s = {0};
    if (srv_open(&s, o) == 0) {
        body(&s);
    }
    if (s.dir[0] != '\0') {
        srv_cleanup(&s);
    }
}

static hv_actor_t *connect_ok(srv_t *s);

/* with_actor, with a handle connected to it for body (closed after it). */
static void with_conn(void (*body)(srv_t *, hv_actor_t *), const srv_opts_t *o) {
    srv_t s = {0};
    hv_actor_t *a = srv_open(&s, o) == 0 ? connect_ok(&s) : NULL;
    if (a != NULL) {
        body(&s, a);
        hv_actor_close(a);
    }
    if (s.dir[0] != '\0') {
        srv_cleanup(&s);
    }
}

static hv_actor_t *connect_ok(srv_t *s) {
    hv_actor_t *a = NULL;
    char err[256] = "";
    hv_err rc = hv_actor_connect(s->addr, SECRET, NULL, &a, err, sizeof(err));
    if (rc != HV_OK) {
        HVT_FAIL("connect %s: %s (%s)", s->addr, err, hv_errname(rc));
        return NULL;
    }
    return a;
}

/* A raw connection to the actor that has read its HELLO (-1: a failed check). */
static int dial_hello(srv_t *s, uint64_t deadline) {
    int fd = -1;
    hv_err rc = hv__actor_dial(s->addr, deadline, &fd, NULL, 0);
    uint8_t hello[HV__ACTOR_HDR + HV__ACTOR_HELLO_LEN];
    if (rc == HV_OK && (rc = hv__actor_read_full(fd, hello, sizeof(hello), deadline)) != HV_OK) {
        close(fd);
    }
    if (rc != HV_OK) {
        HVT_FAIL("dial %s and read its hello: %s", s->addr, hv_errname(rc));
        return -1;
    }
    return fd;
}

/* Reads the ERROR frame the actor sends on fd: its code is want, and the actor closes after it. */
static void expect_error_frame(int fd, uint64_t deadline, hv_err want) {
    uint8_t reply[HV__ACTOR_HDR + 256];
    hv__actor_hdr_t h;
    ASSERT_OK(hv__actor_read_full(fd, reply, HV__ACTOR_HDR, deadline));
    hv__actor_hdr_get(reply, &h);
    ASSERT_EQ_INT(h.type, HV__ACTOR_ERROR);
    ASSERT_TRUE(h.len >= 4 && h.len <= 256);
    ASSERT_OK(hv__actor_read_full(fd, reply + HV__ACTOR_HDR, h.len, deadline));
    ASSERT_EQ_INT(hv__actor_get_u32(reply + HV__ACTOR_HDR), want);
    ASSERT_RC(hv__actor_read_full(fd, reply, 1, deadline), HV_ECLOSED);
}

/* ---- cases ---------------------------------------------------------------------------------- */

/* Two connections, 3000 calls each, up to 256 in flight on each: every call runs in the order
 * its connection sent it (the actor checks) and each result is its own. */
static void order_body(srv_t *s) {
    enum { N = 3000, K = 256 };
    hv_actor_t *a[2] = {connect_ok(s), connect_ok(s)};
    static hv_future_t *fs[2][N];
    ASSERT_TRUE(a[0] != NULL && a[1] != NULL);
    uint32_t next[2] = {0, 0}, got[2] = {0, 0};
    while (got[0] < N || got[1] < N) {
        for (int c = 0; c < 2; c++) {
            while (next[c] < N && next[c] - got[c] < K) {
                uint32_t v[2] = {(uint32_t)c, next[c] + 1};
                ASSERT_OK(hv_actor_call_async(a[c], "seq", v, sizeof(v), &fs[c][next[c]]));
                next[c]++;
            }
            /* Take half of what is in flight, oldest first. */
            uint32_t upto = got[c] + (next[c] - got[c] + 1) / 2;
            for (; got[c] < upto; got[c]++) {
                const void *d = NULL;
                size_t len = 0;
                hv_err rc = hv_future_wait(fs[c][got[c]], 10000, &d, &len);
                if (rc != HV_OK) {
                    HVT_FAIL("call %u of connection %d: %s: %s", got[c] + 1, c, hv_errname(rc),
                             hv_future_error(fs[c][got[c]], NULL));
                    return;
                }
                uint32_t v[2];
                ASSERT_EQ_INT(len, sizeof(v));
                memcpy(v, d, sizeof(v));
                ASSERT_EQ_INT(v[0], c);
                ASSERT_EQ_INT(v[1], got[c] + 1);
                hv_future_destroy(fs[c][got[c]]);
            }
        }
    }
    hv_actor_close(a[0]);
    hv_actor_close(a[1]);
}
static void case_order_pipelined(void) { with_actor(order_body, NULL); }

/* hv_future_wait returns HV_ETIMEDOUT at its bound while the method still runs, and the same
 * future then completes; hv_actor_call's timeout says the outcome is unknown; closing the handle
 * ends a call in flight with HV_ECANCELED. */
static void wait_body(srv_t *s) {
    hv_actor_t *a = connect_ok(s);
    ASSERT_TRUE(a != NULL);
    hv_future_t *f = NULL;
    ASSERT_OK(hv_actor_call_async(a, "sleep", "1500", 4, &f));
    double t0 = hvtest_now();
    ASSERT_RC(hv_future_wait(f, 100, NULL, NULL), HV_ETIMEDOUT);
    double waited = hvtest_now() - t0;
    ASSERT_TRUE(waited >= 0.09 && waited < hvtest_scale(1.0));
    ASSERT_RC(hv_future_wait(f, 0, NULL, NULL), HV_ETIMEDOUT);
    ASSERT_OK(hv_future_wait(f, 10000, NULL, NULL));
    hv_future_destroy(f);
    char err[256] = "";
    t0 = hvtest_now();
    ASSERT_RC(hv_actor_call(a, "sleep", "1000", 4, 100, NULL, NULL, err, sizeof(err)),
              HV_ETIMEDOUT);
    ASSERT_TRUE(hvtest_now() - t0 < hvtest_scale(1.0));
    ASSERT_TRUE(strstr(err, "may still run") != NULL);
    /* The abandoned call still completes in order before this one. */
    void *res = NULL;
    size_t len = 0;
    ASSERT_OK(hv_actor_call(a, "echo", "hi", 2, 10000, &res, &len, NULL, 0));
    ASSERT_TRUE(len == 2 && memcmp(res, "hi", 2) == 0);
    hv_actor_free(res);
    /* Closing the handle with a call in flight ends it with HV_ECANCELED at once; the future
     * outlives the handle. */
    ASSERT_OK(hv_actor_call_async(a, "sleep", "2000", 4, &f));
    t0 = hvtest_now();
    hv_actor_close(a);
    ASSERT_RC(hv_future_wait(f, 10000, NULL, NULL), HV_ECANCELED);
    ASSERT_TRUE(hvtest_now() - t0 < hvtest_scale(1.0));
    ASSERT_TRUE(strstr(hv_future_error(f, NULL), "closed by the caller") != NULL);
    hv_future_destroy(f);
}
static void case_wait_bound(void) { with_actor(wait_body, NULL); }

/* A caller with another secret is refused (HV_EAUTH, in words), and the actor goes on serving
 * the right one. */
static void secret_body(srv_t *s) {
    hv_actor_t *a = NULL;
    char err[256] = "";
    ASSERT_RC(hv_actor_connect(s->addr, "another-secret-0123456789", NULL, &a, err, sizeof(err)),
              HV_EAUTH);
    ASSERT_TRUE(a == NULL);
    ASSERT_TRUE(strstr(err, "secret") != NULL);
    ASSERT_TRUE(strstr(err, "refused") != NULL); // the actor said no, not just the caller
    ASSERT_RC(hv_actor_connect(s->addr, "short", NULL, &a, err, sizeof(err)), HV_EINVAL);

    /* A hostile caller that ignores the handshake's outcome: a forged AUTH, then a call at once.
     * The actor answers ERROR (HV_EAUTH) and closes; the call never runs. */
    uint64_t deadline = hv_now_ms() + 5000;
    int fd = dial_hello(s, deadline);
    ASSERT_TRUE(fd >= 0);
    uint8_t msg[HV__ACTOR_HDR + HV__ACTOR_AUTH_LEN + HV__ACTOR_HDR + 4] = {0};
    hv__actor_hdr_t h = {.len = HV__ACTOR_AUTH_LEN, .type = HV__ACTOR_AUTH};
    hv__actor_hdr_put(msg, &h);
    h = (hv__actor_hdr_t){.len = 4, .type = HV__ACTOR_CALL, .name_len = 4, .id = 1};
    hv__actor_hdr_put(msg + HV__ACTOR_HDR + HV__ACTOR_AUTH_LEN, &h);
    memcpy(msg + sizeof(msg) - 4, "echo", 4);
    ASSERT_OK(hv__actor_write_full(fd, msg, sizeof(msg), deadline));
    expect_error_frame(fd, deadline, HV_EAUTH);
    close(fd);

    a = connect_ok(s);
    ASSERT_TRUE(a != NULL);
    ASSERT_OK(hv_actor_call(a, "echo", "ok", 2, 10000, NULL, NULL, NULL, 0));
    hv_actor_close(a);
}
static void case_wrong_secret(void) { with_actor(secret_body, NULL); }

/* With a 64 KiB frame limit: the caller refuses to send a larger call (not delivered), and a peer
 * that sends a larger frame anyway gets an ERROR frame (HV_ETOOBIG) and is cut off, while other
 * callers go on. */
static void frame_body(srv_t *s, hv_actor_t *a) {
    size_t big = 70000;
    char *buf = calloc(1, big);
    ASSERT_TRUE(buf != NULL);
    hv_future_t *f = NULL;
    hv_err rc = hv_actor_call_async(a, "echo", buf, big, &f);
    free(buf);
    ASSERT_RC(rc, HV_ETOOBIG);
    ASSERT_TRUE(f == NULL);

    /* The hostile peer: a valid handshake, then a header announcing 1 MiB. */
    uint64_t deadline = hv_now_ms() + 5000;
    int fd = -1;
    uint32_t max_frame = 0;
    ASSERT_OK(hv__actor_dial(s->addr, deadline, &fd, NULL, 0));
    ASSERT_OK(hv__actor_client_handshake(fd, SECRET, deadline, &max_frame, NULL, 0));
    ASSERT_EQ_INT(max_frame, 65536);
    uint8_t hdr[HV__ACTOR_HDR];
    hv__actor_hdr_t h = {.len = 1u << 20, .type = HV__ACTOR_CALL, .name_len = 4, .id = 1};
    hv__actor_hdr_put(hdr, &h);
    ASSERT_OK(hv__actor_write_full(fd, hdr, sizeof(hdr), deadline));
    expect_error_frame(fd, deadline, HV_ETOOBIG);
    close(fd);

    ASSERT_OK(hv_actor_call(a, "echo", "still", 5, 10000, NULL, NULL, NULL, 0));
}
static void case_oversized_frame(void) {
    srv_opts_t o = {.max_frame = 65536};
    with_conn(frame_body, &o);
}

/* A connection that never authenticates is closed at the handshake timeout. */
static void handshake_body(srv_t *s) {
    uint64_t deadline = hv_now_ms() + 5000;
    int fd = dial_hello(s, deadline);
    ASSERT_TRUE(fd >= 0);
    double t0 = hvtest_now();
    uint8_t b;
    ASSERT_RC(hv__actor_read_full(fd, &b, 1, deadline), HV_ECLOSED);
    ASSERT_TRUE(hvtest_now() - t0 < hvtest_scale(2.0));
    close(fd);
}
static void case_handshake_timeout(void) {
    srv_opts_t o = {.hs_timeout_ms = 300};
    with_actor(handshake_body, &o);
}

/* Checks that every future in fs ends with HV_EINDOUBT within a bound, not at its timeout. */
static void expect_in_doubt(hv_future_t **fs, int n, double t0) {
    for (int i = 0; i < n; i++) {
        hv_err rc = hv_future_wait(fs[i], 20000, NULL, NULL);
        if (rc != HV_EINDOUBT) {
            HVT_FAIL("call %d: got %s, want HV_EINDOUBT", i, hv_errname(rc));
            return;
        }
        const char *msg = hv_future_error(fs[i], NULL);
        if (strstr(msg, "may or may not have run") == NULL) {
            HVT_FAIL("call %d: message '%s'", i, msg);
            return;
        }
    }
    if (hvtest_now() - t0 > hvtest_scale(3.0)) {
        HVT_FAIL("the calls took %.1f s to fail", hvtest_now() - t0);
    }
    for (int i = 0; i < n; i++) {
        hv_future_destroy(fs[i]);
    }
}

/* SIGKILL of the actor process with calls in flight: each fails with HV_EINDOUBT at once; a later
 * call is not sent (HV_EUNAVAIL). */
static void sigkill_body(srv_t *s, hv_actor_t *a) {
    hv_future_t *fs[11];
    ASSERT_OK(hv_actor_call_async(a, "sleep", "5000", 4, &fs[0]));
    for (int i = 1; i < 11; i++) {
        ASSERT_OK(hv_actor_call_async(a, "echo", "x", 1, &fs[i]));
    }
    usleep(200 * 1000);
    double t0 = hvtest_now();
    kill(s->pid, SIGKILL);
    expect_in_doubt(fs, 11, t0);
    hv_future_t *f = NULL;
    char err[512] = "";
    ASSERT_RC(hv_actor_call_async(a, "echo", "x", 1, &f), HV_EUNAVAIL);
    ASSERT_RC(hv_actor_call(a, "echo", "x", 1, 1000, NULL, NULL, err, sizeof(err)), HV_EUNAVAIL);
    ASSERT_TRUE(strstr(err, "not sent") != NULL);
    /* The handle says why it broke, in the user's terms. */
    char why[512] = "";
    ASSERT_RC(hv_actor_last_error(a, why, sizeof(why)), HV_EUNAVAIL);
    ASSERT_TRUE(strstr(why, "not sent") != NULL && strstr(why, s->addr) != NULL);
}
static void case_sigkill_inflight(void) { with_conn(sigkill_body, NULL); }

/* A method that crashes the actor process fails the caller's pending calls with HV_EINDOUBT. */
static void crash_body(srv_t *s, hv_actor_t *a) {
    (void)s;
    hv_future_t *fs[6];
    double t0 = hvtest_now();
    ASSERT_OK(hv_actor_call_async(a, "crash", NULL, 0, &fs[0]));
    int sent = 1;
    for (int i = 1; i < 6; i++) {
        /* On a busy machine the crash may have ended the connection already: a call then is
         * refused at once as not sent (HV_EUNAVAIL, safe to send again), never left pending. */
        hv_err rc = hv_actor_call_async(a, "echo", "x", 1, &fs[sent]);
        ASSERT_TRUE(rc == HV_OK || rc == HV_EUNAVAIL);
        sent += rc == HV_OK;
    }
    expect_in_doubt(fs, sent, t0);
    ASSERT_TRUE(strstr(hv_strerror(HV_EINDOUBT), "outcome unknown") != NULL);
}
static void case_method_crash(void) { with_conn(crash_body, NULL); }

/* A method error reaches the caller as HV_EREMOTE with the method's code and message; the
 * connection goes on. */
static void error_body(srv_t *s, hv_actor_t *a) {
    (void)s;
    hv_future_t *f = NULL;
    ASSERT_OK(hv_actor_call_async(a, "fail", "xyz", 3, &f));
    ASSERT_RC(hv_future_wait(f, 10000, NULL, NULL), HV_EREMOTE);
    hv_err code = HV_OK;
    const char *msg = hv_future_error(f, &code);
    ASSERT_RC(code, HV_EINVAL);
    ASSERT_TRUE(strcmp(msg, "bad input 'xyz'") == 0);
    hv_future_destroy(f);
    char err[256] = "", last[256] = "x";
    ASSERT_RC(hv_actor_last_error(a, last, sizeof(last)), HV_OK); // nothing failed on it yet
    ASSERT_TRUE(last[0] == '\0');
    ASSERT_RC(hv_actor_call(a, "nope", NULL, 0, 10000, NULL, NULL, err, sizeof(err)), HV_EREMOTE);
    ASSERT_TRUE(strstr(err, "HV_ENOTFOUND") != NULL);
    /* hv_actor_call's remote code, as a code. */
    ASSERT_RC(hv_actor_last_error(a, last, sizeof(last)), HV_ENOTFOUND);
    ASSERT_TRUE(strcmp(last, err) == 0);
    /* hv_actor_out_error: the message as it is. */
    ASSERT_OK(hv_actor_call_async(a, "fail2", NULL, 0, &f));
    ASSERT_RC(hv_future_wait(f, 10000, NULL, NULL), HV_EREMOTE);
    ASSERT_TRUE(strcmp(hv_future_error(f, &code), "100% plain: %s stays") == 0);
    ASSERT_RC(code, HV_EIO);
    hv_future_destroy(f);
    void *res = NULL;
    size_t len = 0;
    ASSERT_OK(hv_actor_call(a, "echo", "after", 5, 10000, &res, &len, NULL, 0));
    ASSERT_TRUE(len == 5 && memcmp(res, "after", 5) == 0);
    hv_actor_free(res);
}
static void case_method_error(void) { with_conn(error_body, NULL); }

/* The figures file (HV_ACTOR_FIGURES_OUT) as the server last wrote it; 0 when it holds one. */
static int figures_read(srv_t *s, hv_callfig_t *out) {
    char path[160], *text = NULL;
    snprintf(path, sizeof(path), "%s/figures", s->dir);
    if (hv_read_file(path, HV_CALLFIG_LINE_MAX, &text, NULL) != HV_OK) {
        return -1;
    }
    int rc = hv_callfig_parse(text, out) == HV_OK ? 0 : -1;
    free(text);
    return rc;
}

/* The server counts its calls (answered OK, or a method error), their argument and result
 * bytes and their service time, and writes them to HV_ACTOR_FIGURES_OUT within about a second
 * while they change, and once more at its stop. */
static void figures_body(srv_t *s) {
    hv_actor_t *a = connect_ok(s);
    ASSERT_TRUE(a != NULL);
    for (int i = 0; i < 5; i++) {
        ASSERT_OK(hv_actor_call(a, "echo", "abc", 3, 10000, NULL, NULL, NULL, 0));
    }
    for (int i = 0; i < 2; i++) {
        ASSERT_RC(hv_actor_call(a, "fail", "xyz", 3, 10000, NULL, NULL, NULL, 0), HV_EREMOTE);
    }
    hv_callfig_t f = {0};
    double end = hvtest_now() + hvtest_scale(5);
    while (hvtest_now() < end && (figures_read(s, &f) != 0 || hv_callfig_calls(&f) < 7)) {
        usleep(20000);
    }
    ASSERT_EQ_INT(f.ok, 5);
    ASSERT_EQ_INT(f.error, 2);
    ASSERT_EQ_INT(f.bytes_in, 21);
    ASSERT_EQ_INT(f.bytes_out, 15);
    ASSERT_TRUE(f.service_ns > 0 && hv_callfig_quantile_ms(&f, 0.99) > 0);
    ASSERT_OK(hv_actor_call(a, "echo", "z", 1, 10000, NULL, NULL, NULL, 0));
    hv_actor_close(a);
    /* The last call is in the file written at the stop, however soon the stop comes. */
    ASSERT_EQ_INT(srv_term(s), 0);
    ASSERT_TRUE(figures_read(s, &f) == 0);
    ASSERT_EQ_INT(f.ok, 6);
    ASSERT_EQ_INT(f.error, 2);
}
static void case_figures(void) {
    srv_opts_t o = {.figures = 1};
    with_actor(figures_body, &o);
}

/* The counter's state survives a stop (SIGTERM: saved to the state file) and a restart from it
 * (loaded before the first call). */
static void save_body(srv_t *s) {
    hv_actor_t *a = connect_ok(s);
    ASSERT_TRUE(a != NULL);
    void *res = NULL;
    size_t len = 0;
    ASSERT_OK(hv_actor_call(a, "add", "5", 1, 10000, NULL, NULL, NULL, 0));
    ASSERT_OK(hv_actor_call(a, "add", "37", 2, 10000, &res, &len, NULL, 0));
    ASSERT_TRUE(len == 2 && memcmp(res, "42", 2) == 0);
    hv_actor_free(res);
    hv_actor_close(a);
    ASSERT_EQ_INT(srv_term(s), 0);
    struct stat st;
    ASSERT_TRUE(stat(s->state, &st) == 0 && st.st_size == 8);

    srv_opts_t o = {.load = 1, .save = 1};
    ASSERT_TRUE(srv_start(s, &o) == 0);
    a = connect_ok(s);
    ASSERT_TRUE(a != NULL);
    res = NULL;
    ASSERT_OK(hv_actor_call(a, "get", NULL, 0, 10000, &res, &len, NULL, 0));
    ASSERT_TRUE(len == 2 && memcmp(res, "42", 2) == 0);
    hv_actor_free(res);
    hv_actor_close(a);
}
static void case_save_load(void) {
    srv_opts_t o = {.save = 1};
    with_actor(save_body, &o);
}

/* Starts a server of class cls inside the test process (cfg: its config), at addr. */
static hv_err local_server(hv_actor_server_config_t *cfg, const char *cls, hv_actor_server_t **srv,
                           char addr[64]) {
    *cfg = (hv_actor_server_config_t)HV_ACTOR_SERVER_CONFIG_INIT;
    cfg->class_name = cls;
    cfg->secret = SECRET;
    hv_err rc = hv_actor_server_start(cfg, srv);
    if (rc == HV_OK) {
        snprintf(addr, 64, "127.0.0.1:%d", hv_actor_server_port(*srv));
    }
    return rc;
}

/* A server inside the test process (hv_actor_server_start): hv_actor_server_save writes the state
 * between calls, and stop frees everything (the sanitizer build checks for leaks here). */
static void case_in_process_save(void) {
    hv_actor_class_t cls = t_class("t_local");
    cls.load = NULL; /* saved here, never loaded */
    hv_err rc = hv_actor_register(&cls);
    ASSERT_TRUE(rc == HV_OK || rc == HV_EEXIST);
    ASSERT_RC(hv_actor_register(&cls), HV_EEXIST);
    cls.name = "bad name";
    ASSERT_RC(hv_actor_register(&cls), HV_EINVAL);
    hv_actor_server_config_t cfg;
    hv_actor_server_t *srv = NULL;
    char addr[64], path[64] = "/tmp/hv_actor_test.state.XXXXXX";
    ASSERT_OK(local_server(&cfg, "t_local", &srv, addr));
    int fd = mkstemp(path);
    ASSERT_TRUE(fd >= 0);
    close(fd);
    hv_actor_t *a = NULL;
    ASSERT_OK(hv_actor_connect(addr, SECRET, NULL, &a, NULL, 0));
    ASSERT_OK(hv_actor_call(a, "add", "3", 1, 10000, NULL, NULL, NULL, 0));
    ASSERT_OK(hv_actor_server_save(srv, path));
    struct stat st;
    int saved = stat(path, &st) == 0 && st.st_size == 8;
    unlink(path);
    hv_future_t *f = NULL;
    ASSERT_OK(hv_actor_call_async(a, "sleep", "50", 2, &f));
    ASSERT_OK(hv_actor_server_stop(srv));
    /* The call sent before the stop was answered, or not delivered (the actor's GOAWAY said it
     * never ran it), or in doubt: never a hang. */
    rc = hv_future_wait(f, 10000, NULL, NULL);
    ASSERT_TRUE(rc == HV_OK || rc == HV_EUNAVAIL || rc == HV_EINDOUBT);
    hv_future_destroy(f);
    hv_actor_close(a);
    ASSERT_TRUE(saved);
    cfg.class_name = "missing";
    ASSERT_RC(hv_actor_server_start(&cfg, &srv), HV_ENOTFOUND);
    cfg.class_name = "t_local";
    cfg.secret = "short";
    ASSERT_RC(hv_actor_server_start(&cfg, &srv), HV_EINVAL);
}

/* A caller keeps at most max_pending calls in flight: one more is refused (not sent) until some
 * complete. */
static void pending_body(srv_t *s) {
    hv_actor_connect_config_t cc = HV_ACTOR_CONNECT_CONFIG_INIT;
    cc.max_pending = 4;
    hv_actor_t *a = NULL;
    ASSERT_OK(hv_actor_connect(s->addr, SECRET, &cc, &a, NULL, 0));
    hv_future_t *fs[5] = {NULL};
    ASSERT_OK(hv_actor_call_async(a, "sleep", "300", 3, &fs[0]));
    for (int i = 1; i < 4; i++) {
        ASSERT_OK(hv_actor_call_async(a, "echo", "x", 1, &fs[i]));
    }
    ASSERT_RC(hv_actor_call_async(a, "echo", "x", 1, &fs[4]), HV_ETOOBIG);
    for (int i = 0; i < 4; i++) {
        ASSERT_OK(hv_future_wait(fs[i], 10000, NULL, NULL));
        hv_future_destroy(fs[i]);
    }
    ASSERT_OK(hv_actor_call_async(a, "echo", "x", 1, &fs[4]));
    ASSERT_OK(hv_future_wait(fs[4], 10000, NULL, NULL));
    hv_future_destroy(fs[4]);
    hv_actor_close(a);
}
static void case_pending_bound(void) { with_actor(pending_body, NULL); }

/* Connecting is bounded: nothing listening is HV_EUNAVAIL at once; a listener that never greets
 * (not an actor, or a stuck one) is HV_ETIMEDOUT at connect_timeout_ms. */
static void case_connect_bounds(void) {
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    ASSERT_TRUE(lfd >= 0 && bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    ASSERT_TRUE(listen(lfd, 4) == 0 && getsockname(lfd, (struct sockaddr *)&sa, &sl) == 0);
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", ntohs(sa.sin_port));
    hv_actor_connect_config_t cc = HV_ACTOR_CONNECT_CONFIG_INIT;
    cc.connect_timeout_ms = 300;
    hv_actor_t *a = NULL;
    char err[256] = "";
    double t0 = hvtest_now();
    hv_err rc = hv_actor_connect(addr, SECRET, &cc, &a, err, sizeof(err));
    double took = hvtest_now() - t0;
    ASSERT_RC(rc, HV_ETIMEDOUT);
    ASSERT_TRUE(took >= 0.29 && took < hvtest_scale(2.0));
    ASSERT_TRUE(strstr(err, "did not greet") != NULL);
    /* A peer that accepts and closes before greeting (an actor's process as it dies) is
     * unavailable, not "not an actor": a re-resolving handle asks the head again. */
    pid_t closer = fork();
    ASSERT_TRUE(closer >= 0);
    if (closer == 0) {
        for (int i = 0; i < 2; i++) { // the timed-out connection above, then ours
            int c = accept(lfd, NULL, NULL);
            if (c >= 0) {
                close(c);
            }
        }
        _exit(0);
    }
    rc = hv_actor_connect(addr, SECRET, &cc, &a, err, sizeof(err));
    ASSERT_TRUE(waitpid(closer, NULL, 0) == closer);
    ASSERT_RC(rc, HV_EUNAVAIL);
    ASSERT_TRUE(strstr(err, "before its greeting") != NULL);
    close(lfd); // now nothing listens there
    ASSERT_RC(hv_actor_connect(addr, SECRET, &cc, &a, err, sizeof(err)), HV_EUNAVAIL);
    ASSERT_TRUE(strstr(err, "cannot connect") != NULL);
    ASSERT_RC(hv_actor_connect("no-port", SECRET, &cc, &a, err, sizeof(err)), HV_EINVAL);
}

/* A peer that authenticates and then sends garbage (random headers) is cut off; the actor
 * survives and serves the next caller. */
static void garbage_body(srv_t *s) {
    unsigned seed = 12345;
    for (int round = 0; round < 20; round++) {
        uint64_t deadline = hv_now_ms() + 5000;
        int fd = -1;
        uint32_t mf = 0;
        ASSERT_OK(hv__actor_dial(s->addr, deadline, &fd, NULL, 0));
        ASSERT_OK(hv__actor_client_handshake(fd, SECRET, deadline, &mf, NULL, 0));
        uint8_t junk[256];
        for (size_t i = 0; i < sizeof(junk); i++) {
            junk[i] = (uint8_t)rand_r(&seed);
        }
        junk[4] = (uint8_t)(round % 8); // every frame type, valid or not, comes first
        (void)hv__actor_write_full(fd, junk, sizeof(junk), deadline);
        shutdown(fd, SHUT_WR);
        /* Whatever comes back, the actor ends the connection within the bound. */
        uint8_t b[4096];
        hv_err rc;
        while ((rc = hv__actor_read_full(fd, b, 1, deadline)) == HV_OK) {
        }
        ASSERT_TRUE(rc == HV_ECLOSED || rc == HV_EPEER);
        close(fd);
    }
    hv_actor_t *a = connect_ok(s);
    ASSERT_TRUE(a != NULL);
    ASSERT_OK(hv_actor_call(a, "echo", "alive", 5, 10000, NULL, NULL, NULL, 0));
    hv_actor_close(a);
}
static void case_garbage_frames(void) { with_actor(garbage_body, NULL); }

/* One call frame sent by hand after a good handshake: method (name_len bytes, NULs and all) with
 * argument "x". The answer's frame type and code; text gets the message (ERROR) or the result
 * (REPLY). */
static void raw_call(srv_t *s, const char *method, uint16_t name_len, uint8_t *type, uint32_t *code,
                     char *text, size_t tlen) {
    uint64_t deadline = hv_now_ms() + 5000;
    int fd = -1;
    uint32_t mf = 0;
    *type = 0;
    ASSERT_OK(hv__actor_dial(s->addr, deadline, &fd, NULL, 0));
    ASSERT_OK(hv__actor_client_handshake(fd, SECRET, deadline, &mf, NULL, 0));
    uint8_t msg[HV__ACTOR_HDR + 300 + 1];
    hv__actor_hdr_t h = {
        .len = name_len + 1u, .type = HV__ACTOR_CALL, .name_len = name_len, .id = 7};
    hv__actor_hdr_put(msg, &h);
    memcpy(msg + HV__ACTOR_HDR, method, name_len);
    msg[HV__ACTOR_HDR + name_len] = 'x';
    ASSERT_OK(hv__actor_write_full(fd, msg, HV__ACTOR_HDR + name_len + 1u, deadline));
    uint8_t reply[HV__ACTOR_HDR + 512];
    ASSERT_OK(hv__actor_read_full(fd, reply, HV__ACTOR_HDR, deadline));
    hv__actor_hdr_get(reply, &h);
    ASSERT_TRUE(h.len >= 4 && h.len <= 512);
    ASSERT_OK(hv__actor_read_full(fd, reply + HV__ACTOR_HDR, h.len, deadline));
    *type = h.type;
    *code = hv__actor_get_u32(reply + HV__ACTOR_HDR);
    snprintf(text, tlen, "%.*s", (int)(h.len - 4), (const char *)reply + HV__ACTOR_HDR + 4);
    close(fd);
}

/* A method name the actor cannot run is refused with HV_EINVAL saying why, and runs nothing: one
 * over 255 bytes (was "expected a call (frame type 5)"), one with a NUL inside ("echo\0evil" ran
 * echo), an empty one. 255 bytes is still a name (an unknown method: the method's error). */
static void bad_name_body(srv_t *s) {
    char name[300], text[600];
    uint8_t type;
    uint32_t code;
    memset(name, 'm', sizeof(name));
    raw_call(s, name, 256, &type, &code, text, sizeof(text));
    ASSERT_EQ_INT(type, HV__ACTOR_ERROR);
    ASSERT_EQ_INT(code, HV_EINVAL);
    ASSERT_TRUE(strstr(text, "a method name of 256 bytes, at most 255") != NULL);
    raw_call(s, "echo\0evil", 9, &type, &code, text, sizeof(text));
    ASSERT_EQ_INT(type, HV__ACTOR_ERROR);
    ASSERT_EQ_INT(code, HV_EINVAL);
    ASSERT_TRUE(strstr(text, "the method name has a NUL byte at offset 4") != NULL);
    raw_call(s, "", 0, &type, &code, text, sizeof(text));
    ASSERT_EQ_INT(type, HV__ACTOR_ERROR);
    ASSERT_EQ_INT(code, HV_EINVAL);
    raw_call(s, name, 255, &type, &code, text, sizeof(text));
    ASSERT_EQ_INT(type, HV__ACTOR_REPLY); /* a name: the class says it has no such method */
    ASSERT_TRUE(code != HV_OK);
    raw_call(s, "echo", 4, &type, &code, text, sizeof(text));
    ASSERT_EQ_INT(type, HV__ACTOR_REPLY);
    ASSERT_EQ_INT(code, HV_OK);
    ASSERT_TRUE(strcmp(text, "x") == 0);
}
static void case_bad_method_name(void) { with_actor(bad_name_body, NULL); }

/* A caller that sends 64 calls of 1 MiB results and reads nothing for a while: the actor stops
 * serving it at its bound of unsent replies instead of buffering 64 MiB, then, once the caller
 * reads, answers every call in order without further prompting. */
/* The resident memory of process pid, in KiB (-1 when unknown). */
static long rss_kib(pid_t pid) {
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kib = -1;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "VmRSS:", 6) == 0) {
            kib = strtol(line + 6, NULL, 10);
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return kib;
}

static void backpressure_body(srv_t *s) {
    enum { N = 64, MIB = 1 << 20 };
    uint64_t deadline = hv_now_ms() + (uint64_t)hvtest_scale(20000);
    int fd = -1;
    uint32_t mf = 0;
    ASSERT_OK(hv__actor_dial(s->addr, deadline, &fd, NULL, 0));
    ASSERT_OK(hv__actor_client_handshake(fd, SECRET, deadline, &mf, NULL, 0));
    /* All calls in one write, so that the actor reads them in one turn. */
    enum { CALL = HV__ACTOR_HDR + 3 + 7 };
    uint8_t calls[N * CALL];
    for (int i = 0; i < N; i++) {
        hv__actor_hdr_t h = {.len = 3 + 7, .type = HV__ACTOR_CALL, .name_len = 3, .id = 100 + i};
        hv__actor_hdr_put(calls + i * CALL, &h);
        memcpy(calls + i * CALL + HV__ACTOR_HDR, "big1048576", 10);
    }
    long rss0 = rss_kib(s->pid);
    ASSERT_OK(hv__actor_write_full(fd, calls, sizeof(calls), deadline));
    usleep(300 * 1000);
    long grown = rss_kib(s->pid) - rss0;
    if (rss0 > 0 && grown > 48 * 1024) {
        HVT_FAIL("the actor grew by %ld KiB holding replies nobody reads (bound: 8 MiB)", grown);
    }
    uint8_t *buf = malloc(MIB);
    ASSERT_TRUE(buf != NULL);
    for (int i = 0; i < N; i++) {
        uint8_t hb[HV__ACTOR_HDR + 4];
        hv__actor_hdr_t h;
        hv_err rc = hv__actor_read_full(fd, hb, sizeof(hb), deadline);
        if (rc == HV_OK) {
            rc = hv__actor_read_full(fd, buf, MIB, deadline);
        }
        if (rc != HV_OK) {
            HVT_FAIL("reply %d: %s", i, hv_errname(rc));
            break;
        }
        hv__actor_hdr_get(hb, &h);
        if (h.type != HV__ACTOR_REPLY || h.id != (uint64_t)(100 + i) || h.len != 4 + MIB ||
            hv__actor_get_u32(hb + HV__ACTOR_HDR) != 0) {
            HVT_FAIL("reply %d: type %u id %llu len %u", i, h.type, (unsigned long long)h.id,
                     h.len);
            break;
        }
    }
    free(buf);
    close(fd);
}
static void case_backpressure(void) { with_actor(backpressure_body, NULL); }

/* A process registers more than the former limit of 64 classes, and serves the last one. */
static void case_many_classes(void) {
    enum { N = 200 };
    hv_actor_class_t cls = HV_ACTOR_CLASS_INIT;
    cls.create = t_create;
    cls.call = t_call;
    cls.destroy = free;
    char name[32];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "many.%d", i);
        cls.name = name; // copied by the registry
        hv_err rc = hv_actor_register(&cls);
        if (rc != HV_OK) {
            HVT_FAIL("registering class %d: %s", i, hv_errname(rc));
            return;
        }
    }
    snprintf(name, sizeof(name), "many.%d", N - 1);
    ASSERT_RC(hv_actor_register(&cls), HV_EEXIST);
    hv_actor_server_config_t cfg;
    hv_actor_server_t *srv = NULL;
    char addr[64];
    ASSERT_OK(local_server(&cfg, "many.199", &srv, addr));
    hv_actor_t *a = NULL;
    ASSERT_OK(hv_actor_connect(addr, SECRET, NULL, &a, NULL, 0));
    void *res = NULL;
    size_t len = 0;
    ASSERT_OK(hv_actor_call(a, "add", "7", 1, 10000, &res, &len, NULL, 0));
    ASSERT_TRUE(len == 1 && memcmp(res, "7", 1) == 0);
    hv_actor_free(res);
    hv_actor_close(a);
    ASSERT_OK(hv_actor_server_stop(srv));
}

/* 50 slow calls (20 ms each) pipelined on one connection: each reply arrives when its call is
 * done, not after the batch the actor read with it has run (up to 1 s later). */
static void slow_batch_body(srv_t *s) {
    enum { N = 50 };
    hv_actor_t *a = connect_ok(s);
    ASSERT_TRUE(a != NULL);
    hv_future_t *fs[N];
    double t0 = hvtest_now(), late = 0, first = 0;
    for (int i = 0; i < N; i++) {
        ASSERT_OK(hv_actor_call_async(a, "nap", "20", 2, &fs[i]));
    }
    for (int i = 0; i < N; i++) {
        const void *d = NULL;
        size_t len = 0;
        ASSERT_OK(hv_future_wait(fs[i], 10000, &d, &len));
        double now = hvtest_now(), end;
        ASSERT_EQ_INT(len, sizeof(end));
        memcpy(&end, d, sizeof(end));
        late = now - end > late ? now - end : late;
        first = i == 0 ? now - t0 : first;
    }
    double all = hvtest_now() - t0;
    for (int i = 0; i < N; i++) {
        hv_future_destroy(fs[i]);
    }
    hv_actor_close(a);
    ASSERT_TRUE(all >= 0.9); // the calls ran one at a time
    if (late > hvtest_scale(0.1) || first > hvtest_scale(0.2)) {
        HVT_FAIL("a reply came %.3f s after its call ended; the first after %.3f s (the batch "
                 "%.3f s)",
                 late, first, all);
    }
}
static void case_slow_batch(void) { with_actor(slow_batch_body, NULL); }

/* The actor's stop with calls in flight: the one it ran is answered, then its GOAWAY names it, so
 * the calls it never read fail as not delivered (HV_EUNAVAIL, safe to send again), not in doubt. */
static void goaway_body(srv_t *s) {
    hv_actor_t *a = connect_ok(s);
    ASSERT_TRUE(a != NULL);
    hv_future_t *fs[6];
    ASSERT_OK(hv_actor_call_async(a, "sleep", "600", 3, &fs[0]));
    usleep(150 * 1000); /* it runs; the dispatcher reads nothing more until it returns */
    kill(s->pid, SIGTERM);
    usleep(50 * 1000);
    for (int i = 1; i < 6; i++) {
        ASSERT_OK(hv_actor_call_async(a, "echo", "x", 1, &fs[i]));
    }
    ASSERT_OK(hv_future_wait(fs[0], 20000, NULL, NULL));
    ASSERT_TRUE(hv_future_sends(fs[0]) == 1);
    for (int i = 1; i < 6; i++) {
        hv_err rc = hv_future_wait(fs[i], 20000, NULL, NULL);
        if (rc != HV_EUNAVAIL) {
            HVT_FAIL("call %d: got %s (%s), want HV_EUNAVAIL", i, hv_errname(rc),
                     hv_future_error(fs[i], NULL));
            return;
        }
        const char *msg = hv_future_error(fs[i], NULL);
        if (strstr(msg, "not delivered") == NULL || strstr(msg, "stopping") == NULL) {
            HVT_FAIL("call %d: message '%s'", i, msg);
            return;
        }
    }
    for (int i = 0; i < 6; i++) {
        hv_future_destroy(fs[i]);
    }
    hv_actor_close(a);
}
static void case_stop_goaway(void) { with_actor(goaway_body, NULL); }

/* The fate of a call pending when its connection ended (hv__actor_fate_of), row by row. */
static void case_fate_table(void) {
    static const struct {
        int can_resolve, goaway;
        uint64_t goaway_id, id;
        uint32_t sends, max_retries;
        hv__actor_fate want;
    } rows[] = {
        /* the actor said it did not run it: resent by a re-resolving handle, else not delivered */
        {1, 1, 4, 5, 1, 0, HV__FATE_RESEND},
        {0, 1, 4, 5, 1, 0, HV__FATE_NOT_DELIVERED},
        /* queued while reconnecting (never sent) */
        {1, 0, 0, 9, 0, 0, HV__FATE_RESEND},
        {0, 0, 0, 9, 0, 0, HV__FATE_NOT_DELIVERED},
        /* sent, no word: at most once by default */
        {1, 0, 0, 3, 1, 0, HV__FATE_IN_DOUBT},
        {0, 0, 0, 3, 1, 2, HV__FATE_IN_DOUBT},
        /* with retries: resent while sends <= max_retries */
        {1, 0, 0, 3, 1, 2, HV__FATE_RESEND},
        {1, 0, 0, 3, 2, 2, HV__FATE_RESEND},
        {1, 0, 0, 3, 3, 2, HV__FATE_IN_DOUBT},
        /* a GOAWAY that names a later call: this one ran, its reply was lost with the line */
        {1, 1, 7, 5, 1, 0, HV__FATE_IN_DOUBT},
        {1, 1, 7, 5, 1, 1, HV__FATE_RESEND},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        hv__actor_fate got =
            hv__actor_fate_of(rows[i].can_resolve, rows[i].goaway, rows[i].goaway_id, rows[i].id,
                              rows[i].sends, rows[i].max_retries);
        if (got != rows[i].want) {
            HVT_FAIL("row %zu: fate %d, want %d", i, (int)got, (int)rows[i].want);
        }
    }
}

static const hvtest_case_t cases[] = {
    {"order_pipelined", case_order_pipelined},
    {"wait_bound", case_wait_bound},
    {"wrong_secret", case_wrong_secret},
    {"oversized_frame", case_oversized_frame},
    {"handshake_timeout", case_handshake_timeout},
    {"sigkill_inflight", case_sigkill_inflight},
    {"method_crash", case_method_crash},
    {"method_error", case_method_error},
    {"save_load", case_save_load},
    {"in_process_save", case_in_process_save},
    {"pending_bound", case_pending_bound},
    {"connect_bounds", case_connect_bounds},
    {"garbage_frames", case_garbage_frames},
    {"bad_method_name", case_bad_method_name},
    {"backpressure", case_backpressure},
    {"slow_batch", case_slow_batch},
    {"many_classes", case_many_classes},
    {"stop_goaway", case_stop_goaway},
    {"fate_table", case_fate_table},
    {"figures", case_figures},
};

HVTEST_MAIN(cases)
