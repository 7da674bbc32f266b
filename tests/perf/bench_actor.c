/*
 * bench_actor: the measuring side of tests/perf/bench_actor.sh. Three modes:
 *
 *   bench_actor actor HOST:PORT [--n N] [--size B] [--inflight K]
 *       calls "echo" of an actor (examples/actor_counter; secret from HV_ACTOR_SECRET) with B
 *       bytes in and out: N synchronous calls one at a time (hv_actor_call: median and p99
 *       latency, calls/s), then N calls pipelined with K in flight (calls/s).
 *   bench_actor grpc-server ADDR_FILE
 *       a gRPC echo server on 127.0.0.1 (hv's rpc layer, common/rpc.c) that writes its
 *       "127.0.0.1:PORT" to ADDR_FILE and runs until SIGTERM.
 *   bench_actor grpc HOST:PORT [--n N] [--size B]
 *       N unary gRPC calls one at a time (hv_rpc_unary) against it: the floor.
 *   bench_actor tcp-server ADDR_FILE / bench_actor tcp HOST:PORT [--n N] [--size B]
 *       a bare TCP ping-pong of B bytes (blocking send and recv, no framing, no threads): what
 *       the kernel's loopback costs by itself, to show where an actor call's time goes.
 *
 * Each measurement prints one line: "mode calls median_us p99_us calls_per_s". The gRPC echo
 * reuses the Rendezvous KV messages of hv.proto (a bytes field each way) under its own path, so
 * it needs no proto of its own.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "actor_wire.h"
#include "hv.pb-c.h"
#include "rpc.h"
#include "util.h"

#include <hv/actor.h>

#define ECHO_PATH "/hvbench.Echo/Ping"

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Prints one result line from per-call latencies (lat, n entries; sorted here) and the wall
 * time of the run. */
static void report(const char *mode, double *lat, int n, double wall_us) {
    qsort(lat, (size_t)n, sizeof(*lat), cmp_double);
    printf("%-16s %8d %10.1f %10.1f %12.0f\n", mode, n, lat[n / 2], lat[(n * 99) / 100],
           n / (wall_us / 1e6));
    fflush(stdout);
}

static int arg_int(int argc, char **argv, const char *name, int def) {
    for (int i = 0; i + 1 < argc; i++) {
        if (strcmp(argv[i], name) == 0) {
            return atoi(argv[i + 1]);
        }
    }
    return def;
}

/* ---- actor ------------------------------------------------------------------------------------ */

static int bench_actor(const char *addr, int n, int size, int inflight) {
    const char *secret = getenv("HV_ACTOR_SECRET");
    char err[512] = "";
    hv_actor_t *a = NULL;
    hv_actor_connect_config_t cc = HV_ACTOR_CONNECT_CONFIG_INIT;
    cc.max_pending = (uint32_t)inflight;
    hv_err rc = hv_actor_connect(addr, secret ? secret : "", &cc, &a, err, sizeof(err));
    if (rc != HV_OK) {
        fprintf(stderr, "bench_actor: %s\n", err);
        return 1;
    }
    char *payload = malloc((size_t)size);
    double *lat = malloc(sizeof(double) * (size_t)n);
    hv_future_t **ring = calloc((size_t)inflight, sizeof(*ring));
    double *sent = calloc((size_t)inflight, sizeof(*sent));
    if (payload == NULL || lat == NULL || ring == NULL || sent == NULL) {
        return 1;
    }
    memset(payload, 'x', (size_t)size);
    for (int i = 0; i < n + 200; i++) {
        double t0 = now_us();
        void *res = NULL;
        size_t len = 0;
        rc = hv_actor_call(a, "echo", payload, (size_t)size, 10000, &res, &len, err, sizeof(err));
        if (rc != HV_OK || len != (size_t)size) {
            fprintf(stderr, "bench_actor: echo: %s (%s)\n", err, hv_errname(rc));
            return 1;
        }
        hv_actor_free(res);
        if (i >= 200) { // the first 200 warm up
            lat[i - 200] = now_us() - t0;
        }
    }
    double w0 = now_us();
    for (int i = 0; i < n; i++) {
        double t0 = now_us();
        void *res = NULL;
        hv_actor_call(a, "echo", payload, (size_t)size, 10000, &res, NULL, NULL, 0);
        hv_actor_free(res);
        lat[i] = now_us() - t0;
    }
    report("actor-sync", lat, n, now_us() - w0);

    /* Pipelined: keep `inflight` calls in flight; a call's latency runs from its send to the
     * moment its result is taken. */
    w0 = now_us();
    int done = 0;
    for (int i = 0; i < n + inflight; i++) {
        int slot = i % inflight;
        if (i >= inflight) {
            size_t len = 0;
            rc = hv_future_wait(ring[slot], 10000, NULL, &len);
            if (rc != HV_OK || len != (size_t)size) {
                fprintf(stderr, "bench_actor: pipelined echo: %s\n", hv_strerror(rc));
                return 1;
            }
            lat[done++] = now_us() - sent[slot];
            hv_future_destroy(ring[slot]);
            ring[slot] = NULL;
        }
        if (i < n) {
            sent[slot] = now_us();
            rc = hv_actor_call_async(a, "echo", payload, (size_t)size, &ring[slot]);
            if (rc != HV_OK) {
                fprintf(stderr, "bench_actor: call_async: %s\n", hv_strerror(rc));
                return 1;
            }
        }
    }
    char mode[32];
    snprintf(mode, sizeof(mode), "actor-pipe%d", inflight);
    report(mode, lat, done, now_us() - w0);
    hv_actor_close(a);
    free(payload);
    free(lat);
    free(ring);
    free(sent);
    return 0;
}

/* ---- gRPC ------------------------------------------------------------------------------------- */

static void echo_cb(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    (void)ud;
    const Hvpb__V1__KvPutRequest *req = (const Hvpb__V1__KvPutRequest *)m;
    Hvpb__V1__KvGetReply rep = HVPB__V1__KV_GET_REPLY__INIT;
    rep.found = 1;
    rep.value = req->value;
    hv_rpc_reply(c, &rep.base);
}

static uv_loop_t loop;
static void on_term(uv_signal_t *h, int sig) {
    (void)sig;
    uv_signal_stop(h);
    uv_stop(&loop);
}

static int grpc_server(const char *addr_file) {
    hv_rpc_engine_t *eng = NULL;
    hv_rpc_server_t *srv = NULL;
    int port = 0;
    uv_loop_init(&loop);
    if (hv_rpc_engine_create(&loop, &eng) != HV_OK ||
        hv_rpc_server_create(eng, "127.0.0.1:0", &srv, &port) != HV_OK) {
        fprintf(stderr, "bench_actor: cannot start the gRPC server\n");
        return 1;
    }
    hv_rpc_method_t m = {ECHO_PATH, HV_RPC_UNARY, &hvpb__v1__kv_put_request__descriptor,
                         echo_cb,   NULL,         NULL};
    hv_rpc_server_add(srv, &m);
    hv_rpc_server_start(srv);
    char line[64];
    int len = snprintf(line, sizeof(line), "127.0.0.1:%d\n", port);
    hv_write_file_atomic(addr_file, line, (size_t)len, 0644);
    uv_signal_t sig;
    uv_signal_init(&loop, &sig);
    uv_signal_start(&sig, on_term, SIGTERM);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&sig, NULL);
    hv_rpc_server_shutdown(srv);
    hv_rpc_engine_destroy(eng);
    return 0;
}

static int grpc_client(const char *addr, int n, int size) {
    hv_rpc_channel_t *ch = NULL;
    if (hv_rpc_channel_create(addr, &ch) != HV_OK) {
        return 1;
    }
    uint8_t *payload = malloc((size_t)size);
    double *lat = malloc(sizeof(double) * (size_t)n);
    if (payload == NULL || lat == NULL) {
        return 1;
    }
    memset(payload, 'x', (size_t)size);
    Hvpb__V1__KvPutRequest req = HVPB__V1__KV_PUT_REQUEST__INIT;
    req.key = "";
    req.value.data = payload;
    req.value.len = (size_t)size;
    double w0 = 0;
    for (int i = 0; i < n + 200; i++) {
        if (i == 200) {
            w0 = now_us();
        }
        double t0 = now_us();
        ProtobufCMessage *resp = NULL;
        hv_rpc_status_t st;
        hv_err rc = hv_rpc_unary(ch, ECHO_PATH, &req.base, &hvpb__v1__kv_get_reply__descriptor,
                                 10000, &resp, &st);
        if (rc != HV_OK || ((Hvpb__V1__KvGetReply *)resp)->value.len != (size_t)size) {
            fprintf(stderr, "bench_actor: gRPC echo: %s %s\n", hv_strerror(rc), st.msg);
            return 1;
        }
        hv_rpc_msg_free(resp);
        if (i >= 200) {
            lat[i - 200] = now_us() - t0;
        }
    }
    report("grpc-unary-sync", lat, n, now_us() - w0);
    hv_rpc_channel_destroy(ch);
    free(payload);
    free(lat);
    return 0;
}

/* ---- bare TCP ------------------------------------------------------------------------------ */

static int tcp_server(const char *addr_file, int size) {
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(lfd, 4) != 0 ||
        getsockname(lfd, (struct sockaddr *)&sa, &sl) != 0) {
        perror("bench_actor: tcp-server");
        return 1;
    }
    char line[64];
    int len = snprintf(line, sizeof(line), "127.0.0.1:%d\n", ntohs(sa.sin_port));
    hv_write_file_atomic(addr_file, line, (size_t)len, 0644);
    char *buf = malloc((size_t)size);
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0 || buf == NULL) {
            return 1;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        while (hv__actor_read_full(fd, buf, (size_t)size, hv_now_ms() + 3600000) == HV_OK &&
               hv__actor_write_full(fd, buf, (size_t)size, hv_now_ms() + 3600000) == HV_OK) {
        }
        close(fd);
    }
}

static int tcp_client(const char *addr, int n, int size) {
    int fd = -1;
    char err[256] = "";
    if (hv__actor_dial(addr, hv_now_ms() + 5000, &fd, err, sizeof(err)) != HV_OK) {
        fprintf(stderr, "bench_actor: %s\n", err);
        return 1;
    }
    char *buf = malloc((size_t)size);
    double *lat = malloc(sizeof(double) * (size_t)n);
    if (buf == NULL || lat == NULL) {
        return 1;
    }
    memset(buf, 'x', (size_t)size);
    double w0 = 0;
    for (int i = 0; i < n + 200; i++) {
        if (i == 200) {
            w0 = now_us();
        }
        double t0 = now_us();
        if (send(fd, buf, (size_t)size, MSG_NOSIGNAL) != size ||
            recv(fd, buf, (size_t)size, MSG_WAITALL) != size) {
            fprintf(stderr, "bench_actor: tcp ping-pong failed\n");
            return 1;
        }
        if (i >= 200) {
            lat[i - 200] = now_us() - t0;
        }
    }
    report("tcp-pingpong", lat, n, now_us() - w0);
    close(fd);
    free(buf);
    free(lat);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr,
                "usage: bench_actor actor|grpc|grpc-server|tcp|tcp-server ADDR [--n N] [--size B] "
                "[--inflight K]\n");
        return 64;
    }
    int n = arg_int(argc, argv, "--n", 10000);
    int size = arg_int(argc, argv, "--size", 64);
    int inflight = arg_int(argc, argv, "--inflight", 256);
    if (n < 100 || size < 1 || inflight < 1) {
        fprintf(stderr, "bench_actor: --n >= 100, --size >= 1, --inflight >= 1\n");
        return 64;
    }
    if (strcmp(argv[1], "actor") == 0) {
        return bench_actor(argv[2], n, size, inflight);
    }
    if (strcmp(argv[1], "grpc") == 0) {
        return grpc_client(argv[2], n, size);
    }
    if (strcmp(argv[1], "tcp") == 0) {
        return tcp_client(argv[2], n, size);
    }
    if (strcmp(argv[1], "tcp-server") == 0) {
        return tcp_server(argv[2], size);
    }
    if (strcmp(argv[1], "grpc-server") == 0) {
        return grpc_server(argv[2]);
    }
    fprintf(stderr, "bench_actor: unknown mode %s\n", argv[1]);
    return 64;
}
