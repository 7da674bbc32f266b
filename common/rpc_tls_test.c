/*
 * rpc_tls_test: the rpc layer's TLS over loopback with certificates made by the openssl command
 * (tests/make_certs.sh): a TLS server on an engine + libuv loop (main thread), blocking clients
 * on a second thread. Checks what a user sees: a verified call works; a plain-text client, a
 * wrong CA and a misnamed certificate fail with a message in the user's terms; a method under
 * the client-certificate prefix refuses a client without one; bad key material is refused
 * before serving. Skips (77) without openssl. Cases run alone by name: rpc_tls_test [case].
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HV_CHECK_FATAL // a case cannot go on past a failed step
#include "hv_check.h"
#include "hv.pb-c.h"
#include "mem.h"
#include "rpc.h"
#include "serve_test.h"
#include "util.h"

static char dir[256];
static char f_ca[300], f_other_ca[300], f_cert[300], f_key[300], f_ccert[300], f_ckey[300],
    f_wcert[300], f_wkey[300], f_okey[300];
static uv_loop_t loop;
static hv_rpc_engine_t *eng;
static hv_rpc_server_t *srv;
static int port;

static void get_job(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    (void)ud;
    Hvpb__V1__JobView v = HVPB__V1__JOB_VIEW__INIT;
    v.job_id = ((const Hvpb__V1__JobRef *)m)->job_id;
    v.name = "tls";
    hv_rpc_reply(c, &v.base);
}

static void server_up(const hv_rpc_tls_t *tls) {
    char err[512] = "";
    CHECK(uv_loop_init(&loop) == 0);
    CHECK_RC(hv_rpc_engine_create(&loop, &eng), HV_OK);
    hv_err rc = hv_rpc_server_create_tls(eng, "127.0.0.1:0", tls, &srv, &port, err, sizeof(err));
    if (rc != HV_OK) {
        fprintf(stderr, "server: %s\n", err);
    }
    CHECK_RC(rc, HV_OK);
    hv_rpc_method_t m[2] = {
        {"/hvpb.v1.Jobs/GetJob", HV_RPC_UNARY, &hvpb__v1__job_ref__descriptor, get_job, NULL, NULL},
        {"/hvpb.v1.Cluster/GetJob", HV_RPC_UNARY, &hvpb__v1__job_ref__descriptor, get_job, NULL,
         NULL},
    };
    CHECK_RC(hv_rpc_server_add_n(srv, m, 2), HV_OK);
    CHECK_RC(hv_rpc_server_start(srv), HV_OK);
}

static void server_down(void) {
    hv_rpc_server_shutdown(srv);
    hv_rpc_engine_destroy(eng);
    CHECK(uv_loop_close(&loop) == 0);
}

static void serve_while(void *(*fn)(void *)) { serve_test_while(&loop, fn, NULL, 60000); }

/* One GetJob through a fresh channel to host:port with tls (NULL = plain text). */
static hv_err call(const char *host, const hv_rpc_tls_t *tls, const char *path,
                   hv_rpc_status_t *st) {
    char target[300], err[512] = "";
    snprintf(target, sizeof(target), "%s:%d", host, port);
    hv_rpc_channel_t *ch;
    hv_err rc = hv_rpc_channel_create_tls(target, tls, &ch, err, sizeof(err));
    if (rc != HV_OK) {
        snprintf(st->msg, sizeof(st->msg), "%s", err);
        return rc;
    }
    Hvpb__V1__JobRef r = HVPB__V1__JOB_REF__INIT;
    r.job_id = 5;
    ProtobufCMessage *resp = NULL;
    rc = hv_rpc_unary(ch, path, &r.base, &hvpb__v1__job_view__descriptor, 5000, &resp, st);
    if (rc == HV_OK) {
        CHECK(((Hvpb__V1__JobView *)resp)->job_id == 5);
        hv_rpc_msg_free(resp);
    }
    hv_rpc_channel_destroy(ch);
    printf("  %s %s -> %s: %s\n", host, tls ? "tls" : "plain", hv_errname(rc), st->msg);
    return rc;
}

static void *clients_basic(void *arg) {
    (void)arg;
    hv_rpc_status_t st;
    hv_rpc_tls_t good = {.ca_file = f_ca};
    CHECK_RC(call("127.0.0.1", &good, "/hvpb.v1.Jobs/GetJob", &st), HV_OK);
    CHECK_RC(call("localhost", &good, "/hvpb.v1.Jobs/GetJob", &st), HV_OK);
    /* No client certificate needed without a prefix, even on the Cluster path. */
    CHECK_RC(call("127.0.0.1", &good, "/hvpb.v1.Cluster/GetJob", &st), HV_OK);

    hv_rpc_tls_t wrong = {.ca_file = f_other_ca};
    CHECK(call("127.0.0.1", &wrong, "/hvpb.v1.Jobs/GetJob", &st) != HV_OK);
    CHECK(strstr(st.msg, "not signed by the CA") != NULL);
    CHECK(strstr(st.msg, f_other_ca) != NULL);

    CHECK(call("127.0.0.1", NULL, "/hvpb.v1.Jobs/GetJob", &st) != HV_OK);
    CHECK(strstr(st.msg, "if it uses TLS") != NULL && strstr(st.msg, "--ca") != NULL);

    hv_rpc_tls_t missing = {.ca_file = "/nonexistent/ca.pem"};
    CHECK_RC(call("127.0.0.1", &missing, "/hvpb.v1.Jobs/GetJob", &st), HV_ENOTFOUND);
    CHECK(strstr(st.msg, "CA file '/nonexistent/ca.pem': cannot open") != NULL);
    hv_rpc_tls_t notpem = {.ca_file = f_key};
    CHECK_RC(call("127.0.0.1", &notpem, "/hvpb.v1.Jobs/GetJob", &st), HV_EINVAL);
    CHECK(strstr(st.msg, "not a PEM certificate") != NULL);
    hv_rpc_tls_t half = {.ca_file = f_ca, .cert_file = f_ccert};
    CHECK_RC(call("127.0.0.1", &half, "/hvpb.v1.Jobs/GetJob", &st), HV_EINVAL);
    return NULL;
}

static int case_basic(void) {
    hv_rpc_tls_t tls = {.cert_file = f_cert, .key_file = f_key};
    server_up(&tls);
    serve_while(clients_basic);
    server_down();
    return 0;
}

static void *clients_wrongname(void *arg) {
    (void)arg;
    hv_rpc_status_t st;
    hv_rpc_tls_t good = {.ca_file = f_ca};
    CHECK(call("127.0.0.1", &good, "/hvpb.v1.Jobs/GetJob", &st) != HV_OK);
    CHECK(strstr(st.msg, "does not name the address") != NULL);
    return NULL;
}

static int case_wrongname(void) {
    hv_rpc_tls_t tls = {.cert_file = f_wcert, .key_file = f_wkey};
    server_up(&tls);
    serve_while(clients_wrongname);
    server_down();
    return 0;
}

static void *clients_mtls(void *arg) {
    (void)arg;
    hv_rpc_status_t st;
    hv_rpc_tls_t nocert = {.ca_file = f_ca};
    hv_rpc_tls_t withcert = {.ca_file = f_ca, .cert_file = f_ccert, .key_file = f_ckey};
    /* Outside the prefix, no certificate is needed; inside it, one is. */
    CHECK_RC(call("127.0.0.1", &nocert, "/hvpb.v1.Jobs/GetJob", &st), HV_OK);
    CHECK_RC(call("127.0.0.1", &nocert, "/hvpb.v1.Cluster/GetJob", &st), HV_EPERM);
    CHECK(strstr(st.msg, "requires a client certificate") != NULL);
    CHECK_RC(call("127.0.0.1", &withcert, "/hvpb.v1.Cluster/GetJob", &st), HV_OK);
    CHECK_RC(call("127.0.0.1", &withcert, "/hvpb.v1.Jobs/GetJob", &st), HV_OK);
    /* A client certificate from another CA fails the handshake. */
    hv_rpc_tls_t foreign = {.ca_file = f_ca, .cert_file = f_other_ca, .key_file = f_okey};
    char okey[300];
    snprintf(okey, sizeof(okey), "%s/other-ca.key", dir);
    foreign.key_file = okey;
    CHECK(call("127.0.0.1", &foreign, "/hvpb.v1.Jobs/GetJob", &st) != HV_OK);
    return NULL;
}

static int case_mtls(void) {
    hv_rpc_tls_t tls = {.ca_file = f_ca,
                        .cert_file = f_cert,
                        .key_file = f_key,
                        .client_cert_prefix = "/hvpb.v1.Cluster/"};
    server_up(&tls);
    serve_while(clients_mtls);
    server_down();
    return 0;
}

/* A listener replaced (as after EMFILE) keeps the TLS material and the client-certificate rule,
 * on the same port. */
static int case_relisten(void) {
    hv_rpc_tls_t tls = {.ca_file = f_ca,
                        .cert_file = f_cert,
                        .key_file = f_key,
                        .client_cert_prefix = "/hvpb.v1.Cluster/"};
    server_up(&tls);
    hv_err rc = hv_rpc_server_relisten(srv);
    CHECK(rc == HV_OK || rc == HV_EUNAVAIL); /* a busy port: the watchdog tries again */
    uint64_t deadline = hv_now_ms() + 5000;
    while (hv_rpc_server_relistens(srv) < 1 && hv_now_ms() < deadline) {
        uv_run(&loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
    CHECK(hv_rpc_server_relistens(srv) == 1);
    serve_while(clients_mtls);
    server_down();
    return 0;
}

static int case_check(void) {
    char err[512];
    const char *which = NULL;
    hv_rpc_tls_t ok = {.ca_file = f_ca, .cert_file = f_cert, .key_file = f_key};
    CHECK_RC(hv_rpc_tls_check(&ok, &which, err, sizeof(err)), HV_OK);
    hv_rpc_tls_t mismatch = {.cert_file = f_cert, .key_file = f_okey};
    CHECK_RC(hv_rpc_tls_check(&mismatch, &which, err, sizeof(err)), HV_EINVAL);
    printf("  mismatch: %s\n", err);
    CHECK(strcmp(which, "key") == 0 && strstr(err, "does not match") != NULL);
    hv_rpc_tls_t nofile = {.cert_file = "/nonexistent.pem", .key_file = f_key};
    CHECK_RC(hv_rpc_tls_check(&nofile, &which, err, sizeof(err)), HV_ENOTFOUND);
    CHECK(strcmp(which, "cert") == 0);
    hv_rpc_tls_t swapped = {.cert_file = f_key, .key_file = f_cert};
    CHECK_RC(hv_rpc_tls_check(&swapped, &which, err, sizeof(err)), HV_EINVAL);
    CHECK(strcmp(which, "cert") == 0 && strstr(err, "not a PEM certificate") != NULL);
    /* A passphrase-protected key is named as such. */
    char enc[400], cmd[1200];
    snprintf(enc, sizeof(enc), "%s/enc.key", dir);
    snprintf(cmd, sizeof(cmd),
             "openssl pkey -in '%s' -aes256 -passout pass:secret -out '%s' 2>/dev/null", f_key,
             enc);
    CHECK(system(cmd) == 0);
    hv_rpc_tls_t encrypted = {.cert_file = f_cert, .key_file = enc};
    CHECK_RC(hv_rpc_tls_check(&encrypted, &which, err, sizeof(err)), HV_EINVAL);
    CHECK(strcmp(which, "key") == 0 && strstr(err, "encrypted with a passphrase") != NULL);
    /* The real server refuses the same bad pair before binding. */
    CHECK(uv_loop_init(&loop) == 0);
    CHECK_RC(hv_rpc_engine_create(&loop, &eng), HV_OK);
    CHECK_RC(hv_rpc_server_create_tls(eng, "127.0.0.1:0", &mismatch, &srv, &port, err, sizeof(err)),
             HV_EINVAL);
    hv_rpc_engine_destroy(eng);
    CHECK(uv_loop_close(&loop) == 0);
    return 0;
}

/* Measures (prints, asserts only success): a new TLS connection's first call (handshake
 * included) and the steady unary call time on one channel, TLS against plain text. */
#define LAT_CALLS 2000
static uint64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}
static double lat_first_ms, lat_call_us;
static const hv_rpc_tls_t *lat_client_tls;
static void *clients_latency(void *arg) {
    (void)arg;
    char target[64], err[512];
    snprintf(target, sizeof(target), "127.0.0.1:%d", port);
    hv_rpc_channel_t *ch;
    CHECK_RC(hv_rpc_channel_create_tls(target, lat_client_tls, &ch, err, sizeof(err)), HV_OK);
    Hvpb__V1__JobRef r = HVPB__V1__JOB_REF__INIT;
    hv_rpc_status_t st;
    ProtobufCMessage *resp = NULL;
    uint64_t t0 = now_us();
    CHECK_RC(hv_rpc_unary(ch, "/hvpb.v1.Jobs/GetJob", &r.base, &hvpb__v1__job_view__descriptor,
                          5000, &resp, &st),
             HV_OK);
    hv_rpc_msg_free(resp);
    lat_first_ms = (double)(now_us() - t0) / 1000.0;
    t0 = now_us();
    for (int i = 0; i < LAT_CALLS; i++) {
        CHECK_RC(hv_rpc_unary(ch, "/hvpb.v1.Jobs/GetJob", &r.base, &hvpb__v1__job_view__descriptor,
                              5000, &resp, &st),
                 HV_OK);
        hv_rpc_msg_free(resp);
    }
    lat_call_us = (double)(now_us() - t0) / LAT_CALLS;
    hv_rpc_channel_destroy(ch);
    return NULL;
}

static int case_latency(void) {
    hv_rpc_tls_t stls = {.cert_file = f_cert, .key_file = f_key};
    hv_rpc_tls_t ctls = {.ca_file = f_ca};
    for (int tls = 0; tls < 2; tls++) {
        server_up(tls ? &stls : NULL);
        lat_client_tls = tls ? &ctls : NULL;
        serve_while(clients_latency);
        server_down();
        printf("  %s: first call (connect%s) %.2f ms, then %.1f us per unary call (%d calls)\n",
               tls ? "tls  " : "plain", tls ? " + TLS handshake" : "", lat_first_ms, lat_call_us,
               LAT_CALLS);
    }
    return 0;
}

static int case_loopback(void) {
    CHECK(hv_rpc_target_is_loopback("127.0.0.1:7000"));
    CHECK(hv_rpc_target_is_loopback("127.1.2.3:1"));
    CHECK(hv_rpc_target_is_loopback("localhost:7000"));
    CHECK(hv_rpc_target_is_loopback("LOCALHOST:7000"));
    CHECK(hv_rpc_target_is_loopback("[::1]:7000"));
    CHECK(hv_rpc_target_is_loopback("unix:/tmp/hv.sock"));
    CHECK(!hv_rpc_target_is_loopback("0.0.0.0:7000"));
    CHECK(!hv_rpc_target_is_loopback("10.0.0.1:7000"));
    CHECK(!hv_rpc_target_is_loopback("127.0.0.1.example.com:7000"));
    CHECK(!hv_rpc_target_is_loopback("head:7000"));
    CHECK(!hv_rpc_target_is_loopback("[::]:7000"));
    CHECK(!hv_rpc_target_is_loopback("[2001:db8::1]:7000"));
    return 0;
}

static const struct {
    const char *name;
    int (*fn)(void);
} cases[] = {
    {"loopback", case_loopback},   {"check", case_check}, {"basic", case_basic},
    {"wrongname", case_wrongname}, {"mtls", case_mtls},   {"latency", case_latency},
    {"relisten", case_relisten},
};

int main(int argc, char **argv) {
    const char *src = getenv("HV_SRC_DIR");
    if (system("openssl version >/dev/null 2>&1") != 0 || src == NULL) {
        printf("SKIP: needs the openssl command and HV_SRC_DIR\n");
        return 77;
    }
    snprintf(dir, sizeof(dir), "/tmp/hvtls.XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "sh '%s/tests/make_certs.sh' '%s'", src, dir);
    CHECK(system(cmd) == 0);
    snprintf(f_ca, sizeof(f_ca), "%s/ca.pem", dir);
    snprintf(f_other_ca, sizeof(f_other_ca), "%s/other-ca.pem", dir);
    snprintf(f_cert, sizeof(f_cert), "%s/server.pem", dir);
    snprintf(f_key, sizeof(f_key), "%s/server.key", dir);
    snprintf(f_ccert, sizeof(f_ccert), "%s/client.pem", dir);
    snprintf(f_ckey, sizeof(f_ckey), "%s/client.key", dir);
    snprintf(f_wcert, sizeof(f_wcert), "%s/wrongname.pem", dir);
    snprintf(f_wkey, sizeof(f_wkey), "%s/wrongname.key", dir);
    snprintf(f_okey, sizeof(f_okey), "%s/other.key", dir);
    int ran = 0, bad = 0;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (argc > 1 && strcmp(argv[1], cases[i].name) != 0) {
            continue;
        }
        printf("case %s\n", cases[i].name);
        fflush(stdout);
        bad |= cases[i].fn() != 0;
        ran++;
    }
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "cannot remove %s\n", dir);
    }
    printf("%d passed\n", ran);
    return ran > 0 && !bad ? 0 : 1;
}
