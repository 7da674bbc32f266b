/*
 * artifact_test: the agent's artifact cache against an in-process Fetch server on loopback
 * (a stand-in for the head's Cluster.Fetch, serving blobs from memory). Checks what a node
 * operator relies on: a fetched file is complete, verified and executable; concurrent requests
 * share one download; a broken stream resumes at its offset; a wrong digest, a wrong size, an
 * unknown artifact and a refused token fail with a clear reason and leave no temp file; the cache
 * serves files after an agent restart and notices a damaged one; the cache is private (0700
 * directory, 0400 files) and a new cache sweeps partial downloads of dead agents; placing makes
 * private copies, never links, without set-id bits. The bound: the least recently used files
 * go once the cache is over it, a delivered file stays until it is released, a download in
 * progress stays, and the order of use survives a restart (file mtimes).
 * `artifact_test <case>` runs one case.
 */
#include "artifact.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent_test.h"
#include "hv.pb-c.h"
#include "mem.h"
#include "sha256.h"
#include "util.h"

#define CHUNK (100 * 1024)

/* A blob the fake head serves. */
typedef struct blob_s {
    char digest[65]; /* what it is served as */
    uint8_t *data;   /* owned */
    size_t len;
    size_t break_at; /* first stream ends (OK status) after this many bytes; 0 = never */
    int stall;       /* never answer */
} blob_t;

static uv_loop_t loop;
static hv_rpc_engine_t *eng;
static hv_rpc_server_t *srv;
static hv_rpc_channel_t *chan;
static blob_t blobs[6];
static int nblobs;
static int fetch_calls;      /* Fetch calls the server saw */
static uint64_t last_offset; /* offset of the last Fetch request */
static char dir[256];

static void serve_fetch(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    (void)ud;
    const Hvpb__V1__FetchRequest *r = (const Hvpb__V1__FetchRequest *)m;
    fetch_calls++;
    last_offset = r->offset;
    if (strcmp(r->token, "tok") != 0) {
        hv_rpc_finish(c, HV_EPERM, "bad token");
        return;
    }
    blob_t *b = NULL;
    for (int i = 0; i < nblobs; i++) {
        if (strcmp(blobs[i].digest, r->digest) == 0) {
            b = &blobs[i];
        }
    }
    if (b == NULL) {
        hv_rpc_finish(c, HV_ENOTFOUND, "no such artifact %s", r->digest);
        return;
    }
    if (b->stall) {
        return;
    }
    size_t end = b->len;
    if (b->break_at != 0 && r->offset < b->break_at) {
        end = b->break_at;
    }
    for (size_t off = r->offset; off < end || (off == 0 && b->len == 0); off += CHUNK) {
        Hvpb__V1__ArtifactChunk ch = HVPB__V1__ARTIFACT_CHUNK__INIT;
        ch.offset = off;
        ch.total_size = b->len;
        ch.data.data = b->data + off;
        ch.data.len = end - off < CHUNK ? end - off : CHUNK;
        hv_rpc_send(c, &ch.base);
        if (b->len == 0) {
            break;
        }
    }
    hv_rpc_finish(c, HV_OK, NULL);
}

/* What the fake head received by UploadState (hv_artifact_put). */
static uint8_t *up_data;
static uint64_t up_total, up_have;
static char up_digest[65];
static int up_calls, up_last, up_refuse_after; /* refuse_after: fail the Nth call (0 none) */

static void serve_upload(hv_rpc_call_t *c, const ProtobufCMessage *m, void *ud) {
    const Hvpb__V1__UploadChunk *r = (const Hvpb__V1__UploadChunk *)m;
    (void)ud;
    up_calls++;
    if (up_refuse_after != 0 && up_calls >= up_refuse_after) {
        hv_rpc_finish(c, HV_ETOOBIG, "over the head's actor_state_max");
        return;
    }
    if (up_data == NULL) {
        up_data = hv_malloc(r->total_size > 0 ? r->total_size : 1);
        up_total = r->total_size;
        snprintf(up_digest, sizeof(up_digest), "%s", r->digest);
    }
    if (r->offset != up_have || r->offset + r->data.len > up_total || r->data.len > (1u << 20) ||
        strcmp(r->digest, up_digest) != 0) {
        hv_rpc_finish(c, HV_EINVAL, "bad chunk at %llu", (unsigned long long)r->offset);
        return;
    }
    memcpy(up_data + up_have, r->data.data, r->data.len);
    up_have += r->data.len;
    up_last = r->last;
    Hvpb__V1__UploadReply rep = HVPB__V1__UPLOAD_REPLY__INIT;
    rep.received = up_have;
    rep.complete = r->last && up_have == up_total;
    hv_rpc_reply(c, &rep.base);
}

static void blob_add(size_t len, int corrupt, size_t break_at, int stall) {
    blob_t *b = &blobs[nblobs++];
    memset(b, 0, sizeof(*b));
    b->data = hv_malloc(len + 1);
    for (size_t i = 0; i < len; i++) {
        b->data[i] = (uint8_t)(rand() & 0xff);
    }
    b->len = len;
    hv_sha256_hex_of(b->data, len, b->digest);
    if (corrupt && len > 0) {
        b->data[len / 2] ^= 0x5a;
    }
    b->break_at = break_at;
    b->stall = stall;
}

static void setup(void) {
    snprintf(dir, sizeof(dir), "/tmp/hv-artifact-test-%d/cache", (int)getpid());
    uv_loop_init(&loop);
    CHECK_RC(hv_rpc_engine_create(&loop, &eng), HV_OK);
    int port = 0;
    CHECK_RC(hv_rpc_server_create(eng, "127.0.0.1:0", &srv, &port), HV_OK);
    hv_rpc_method_t m = {.path = "/hvpb.v1.Cluster/Fetch",
                         .kind = HV_RPC_SERVER_STREAM,
                         .req = &hvpb__v1__fetch_request__descriptor,
                         .on_msg = serve_fetch};
    CHECK_RC(hv_rpc_server_add(srv, &m), HV_OK);
    hv_rpc_method_t um = {.path = "/hvpb.v1.Cluster/UploadState",
                          .kind = HV_RPC_UNARY,
                          .req = &hvpb__v1__upload_chunk__descriptor,
                          .on_msg = serve_upload};
    CHECK_RC(hv_rpc_server_add(srv, &um), HV_OK);
    CHECK_RC(hv_rpc_server_start(srv), HV_OK);
    char target[64];
    snprintf(target, sizeof(target), "127.0.0.1:%d", port);
    CHECK_RC(hv_rpc_channel_create(target, &chan), HV_OK);
    nblobs = 0;
    fetch_calls = 0;
}

static void rm_rf(const char *path) {
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
    if (system(cmd) != 0) {
        fprintf(stderr, "  cannot remove %s\n", path);
    }
}

static void teardown(void) {
    hv_rpc_server_shutdown(srv);
    hv_rpc_engine_destroy(eng);
    hv_rpc_channel_destroy(chan);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&loop), 0);
    for (int i = 0; i < nblobs; i++) {
        hv_free(blobs[i].data);
    }
    char top[256];
    snprintf(top, sizeof(top), "/tmp/hv-artifact-test-%d", (int)getpid());
    rm_rf(top);
}

/* What one request got. */
typedef struct got_s {
    int done;
    hv_err rc;
    char path[512];
    char detail[256];
} got_t;

static void got_cb(hv_err rc, const char *path, const char *detail, void *ud) {
    got_t *g = ud;
    g->done++;
    g->rc = rc;
    snprintf(g->path, sizeof(g->path), "%s", path != NULL ? path : "");
    snprintf(g->detail, sizeof(g->detail), "%s", detail != NULL ? detail : "");
}

static int same_content(const char *path, const blob_t *b) {
    char *data = NULL;
    size_t len = 0;
    if (hv_read_file(path, b->len + 16, &data, &len) != HV_OK) {
        return 0;
    }
    int ok = len == b->len && memcmp(data, b->data, len) == 0;
    hv_free(data);
    return ok;
}

/* Counts entries of the cache dir whose names start with '.' (temp files). */
static int temp_files(void) {
    DIR *d = opendir(dir);
    int n = 0;
    if (d == NULL) {
        return 0;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' && strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            n++;
        }
    }
    closedir(d);
    return n;
}

/* A cache in dir fetching through ch with this token (a failed check: NULL). */
static hv_artifact_cache_t *cache_on(hv_rpc_channel_t *ch, const char *token) {
    hv_artifact_cache_t *c = NULL;
    CHECK_RC(hv_artifact_cache_create(&loop, eng, ch, dir, token, &c), HV_OK);
    return c;
}

/* Asks c for blob b (want_len -1: its own length) and runs the loop until the answer came to g,
 * ms at most. */
static void get_wait(hv_artifact_cache_t *c, int b, long long want_len, got_t *g, uint64_t ms) {
    uint64_t len = want_len < 0 ? blobs[b].len : (uint64_t)want_len;
    CHECK_RC(hv_artifact_get(c, blobs[b].digest, len, got_cb, g), HV_OK);
    test_run_until(&loop, &g->done, 1, ms);
}

static void case_fetch_shared(void) {
    setup();
    blob_add(1024 * 1024 + 123, 0, 0, 0);
    hv_artifact_cache_t *c = cache_on(chan, "tok");
    got_t a = {0}, b = {0};
    CHECK_RC(hv_artifact_get(c, blobs[0].digest, blobs[0].len, got_cb, &a), HV_OK);
    CHECK_RC(hv_artifact_get(c, blobs[0].digest, blobs[0].len, got_cb, &b), HV_OK);
    CHECK_EQ(a.done, 0); // never inside get
    test_run_until(&loop, &b.done, 1, 10000);
    CHECK_EQ(a.done, 1);
    CHECK_EQ(b.done, 1);
    CHECK_RC(a.rc, HV_OK);
    CHECK_RC(b.rc, HV_OK);
    CHECK_STR(a.path, b.path);
    CHECK(same_content(a.path, &blobs[0]));
    struct stat st;
    CHECK(stat(a.path, &st) == 0 && (st.st_mode & 07777) == HV_ARTIFACT_CACHE_MODE);
    CHECK(stat(dir, &st) == 0 && (st.st_mode & 07777) == 0700); // nobody else can look in
    CHECK_EQ(fetch_calls, 1);
    CHECK_EQ(temp_files(), 0);
    // A second request is served from disk without a call.
    got_t h = {0};
    get_wait(c, 0, 0, &h, 5000);
    CHECK_RC(h.rc, HV_OK);
    CHECK_EQ(fetch_calls, 1);
    hv_artifact_cache_destroy(c);
    teardown();
}

/* hv_artifact_put: a 3.5 MiB file goes up in 1 MiB chunks, in order, named by its sha256, the
 * last one marked; a refusal from the head reaches the callback with its words. */
static void case_put(void) {
    setup();
    up_data = NULL;
    up_have = up_total = 0;
    up_calls = up_last = up_refuse_after = 0;
    hv_artifact_cache_t *c = cache_on(chan, "tok");
    blob_add(3 * 1024 * 1024 + 512 * 1024, 0, 0, 0);
    char path[300];
    snprintf(path, sizeof(path), "/tmp/hv-artifact-test-%d/state", (int)getpid());
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL && fwrite(blobs[0].data, 1, blobs[0].len, f) == blobs[0].len);
    fclose(f);
    got_t g = {0};
    char err[256];
    CHECK_RC(hv_artifact_put(c, path, got_cb, &g, err, sizeof(err)), HV_OK);
    CHECK_EQ(g.done, 0); // never inside put
    test_run_until(&loop, &g.done, 1, 10000);
    CHECK_RC(g.rc, HV_OK);
    CHECK_STR(g.path, blobs[0].digest); // the callback's digest
    CHECK_STR(up_digest, blobs[0].digest);
    CHECK_EQ(up_calls, 4);
    CHECK_EQ(up_last, 1);
    CHECK(up_have == blobs[0].len && memcmp(up_data, blobs[0].data, blobs[0].len) == 0);
    hv_free(up_data);
    /* The head refuses the second chunk: the callback says why. */
    up_data = NULL;
    up_have = up_total = 0;
    up_calls = 0;
    up_refuse_after = 2;
    got_t r = {0};
    CHECK_RC(hv_artifact_put(c, path, got_cb, &r, err, sizeof(err)), HV_OK);
    test_run_until(&loop, &r.done, 1, 10000);
    CHECK_RC(r.rc, HV_ETOOBIG);
    CHECK(strstr(r.detail, "actor_state_max") != NULL);
    hv_free(up_data);
    up_data = NULL;
    /* A file that is not there: refused at once, no callback. */
    got_t n = {0};
    CHECK(hv_artifact_put(c, "/nonexistent/state", got_cb, &n, err, sizeof(err)) != HV_OK);
    CHECK(strstr(err, "/nonexistent/state") != NULL);
    CHECK_EQ(n.done, 0);
    hv_artifact_cache_destroy(c);
    teardown();
}

static void case_restart_and_damage(void) {
    setup();
    blob_add(300000, 0, 0, 0);
    hv_artifact_cache_t *c = cache_on(chan, "tok");
    got_t a = {0};
    get_wait(c, 0, -1, &a, 10000);
    CHECK_RC(a.rc, HV_OK);
    hv_artifact_cache_destroy(c);

    // A new agent process (no head at all) finds the verified file on disk.
    CHECK_RC(hv_artifact_cache_create(&loop, NULL, NULL, dir, "tok", &c), HV_OK);
    got_t b = {0};
    get_wait(c, 0, -1, &b, 5000);
    CHECK_RC(b.rc, HV_OK);
    hv_artifact_cache_destroy(c);

    // Damage the cached copy: the next agent rejects and removes it.
    chmod(a.path, 0600);
    int fd = open(a.path, O_WRONLY);
    CHECK(fd >= 0);
    if (fd >= 0) {
        CHECK_EQ(pwrite(fd, "X", 1, 10), 1);
        close(fd);
    }
    CHECK_RC(hv_artifact_cache_create(&loop, NULL, NULL, dir, "tok", &c), HV_OK);
    got_t d = {0};
    get_wait(c, 0, -1, &d, 5000);
    CHECK_RC(d.rc, HV_ENOTFOUND);
    CHECK(access(a.path, F_OK) != 0);
    hv_artifact_cache_destroy(c);

    // With the head available it is fetched again.
    CHECK_RC(hv_artifact_cache_create(&loop, eng, chan, dir, "tok", &c), HV_OK);
    got_t e = {0};
    get_wait(c, 0, -1, &e, 10000);
    CHECK_RC(e.rc, HV_OK);
    CHECK(same_content(e.path, &blobs[0]));
    hv_artifact_cache_destroy(c);
    teardown();
}

static void case_resume(void) {
    setup();
    blob_add(700000, 0, 300 * 1024, 0);
    hv_artifact_cache_t *c = cache_on(chan, "tok");
    got_t a = {0};
    get_wait(c, 0, -1, &a, 10000);
    CHECK_RC(a.rc, HV_OK);
    CHECK_EQ(fetch_calls, 2);
    CHECK_EQ(last_offset, 300 * 1024);
    CHECK(same_content(a.path, &blobs[0]));
    CHECK_EQ(temp_files(), 0);
    hv_artifact_cache_destroy(c);
    teardown();
}

static void case_failures(void) {
    setup();
    blob_add(200000, 1, 0, 0); // served bytes do not match the digest
    blob_add(5000, 0, 0, 0);
    hv_artifact_cache_t *c = cache_on(chan, "tok");
    got_t bad = {0}, size = {0}, missing = {0}, name = {0};
    CHECK_RC(hv_artifact_get(c, blobs[0].digest, blobs[0].len, got_cb, &bad), HV_OK);
    CHECK_RC(hv_artifact_get(c, blobs[1].digest, 4999, got_cb, &size), HV_OK);
    CHECK_RC(hv_artifact_get(c, "0000000000000000000000000000000000000000000000000000000000000000",
                             10, got_cb, &missing),
             HV_OK);
    CHECK_RC(hv_artifact_get(c, "../../etc/passwd", 10, got_cb, &name), HV_OK);
    test_run_until(&loop, &missing.done, 1, 10000);
    test_run_until(&loop, &bad.done, 1, 10000);
    test_run_until(&loop, &size.done, 1, 10000);
    test_run_until(&loop, &name.done, 1, 10000);
    CHECK_RC(bad.rc, HV_ECORRUPT);
    CHECK(strstr(bad.detail, "digest mismatch") != NULL);
    CHECK_RC(size.rc, HV_ECORRUPT);
    CHECK(strstr(size.detail, "5000") != NULL);
    CHECK_RC(missing.rc, HV_ENOTFOUND);
    CHECK(strstr(missing.detail, "no such artifact") != NULL);
    CHECK_RC(name.rc, HV_EINVAL);
    CHECK_EQ(temp_files(), 0);
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, blobs[0].digest);
    CHECK(access(path, F_OK) != 0);
    fprintf(stderr, "  details: \"%s\" | \"%s\" | \"%s\"\n", bad.detail, size.detail,
            missing.detail);
    hv_artifact_cache_destroy(c);

    // A wrong token is refused (no retry).
    CHECK_RC(hv_artifact_cache_create(&loop, eng, chan, dir, "wrong", &c), HV_OK);
    got_t perm = {0};
    fetch_calls = 0;
    get_wait(c, 1, -1, &perm, 10000);
    CHECK_RC(perm.rc, HV_EPERM);
    CHECK_EQ(fetch_calls, 1);
    hv_artifact_cache_destroy(c);
    teardown();
}

static void case_unreachable(void) {
    setup();
    blob_add(1000, 0, 0, 0);
    hv_rpc_channel_t *dead = NULL;
    CHECK_RC(hv_rpc_channel_create("127.0.0.1:1", &dead), HV_OK);
    hv_artifact_cache_t *c = cache_on(dead, "tok");
    got_t a = {0};
    uint64_t t0 = hv_now_ms();
    get_wait(c, 0, -1, &a, 15000);
    CHECK_RC(a.rc, HV_EUNAVAIL);
    CHECK(hv_now_ms() - t0 < 10000);
    CHECK_EQ(temp_files(), 0);
    hv_artifact_cache_destroy(c);
    teardown();
    hv_rpc_channel_destroy(dead);
}

static void case_stop(void) {
    setup();
    blob_add(1000, 0, 0, 1);
    hv_artifact_cache_t *c = cache_on(chan, "tok");
    got_t a = {0};
    CHECK_RC(hv_artifact_get(c, blobs[0].digest, blobs[0].len, got_cb, &a), HV_OK);
    test_run_until(&loop, &fetch_calls, 1, 5000);
    hv_artifact_cache_stop(c);
    test_run_until(&loop, &a.done, 1, 5000);
    CHECK_RC(a.rc, HV_ECANCELED);
    got_t b = {0};
    CHECK_RC(hv_artifact_get(c, blobs[0].digest, blobs[0].len, got_cb, &b), HV_ECLOSED);
    CHECK_EQ(temp_files(), 0);
    hv_artifact_cache_destroy(c);
    teardown();
}

static void case_place(void) {
    char top[256], src[300], dst[300];
    snprintf(top, sizeof(top), "/tmp/hv-artifact-test-%d", (int)getpid());
    CHECK_RC(hv_mkdirs(top, 0755), HV_OK);
    snprintf(src, sizeof(src), "%s/src", top);
    snprintf(dst, sizeof(dst), "%s/dst", top);
    CHECK_RC(hv_write_file_atomic(src, "#!/bin/sh\necho hi\n", 18, 0755), HV_OK);
    chmod(src, 0755);
    char err[256];
    struct stat a, b;
    // Always a copy: a worker that could write the cached file would change what later jobs run.
    CHECK_RC(hv_artifact_place(src, dst, 0755, -1, -1, err, sizeof(err)), HV_OK);
    CHECK(stat(src, &a) == 0 && stat(dst, &b) == 0);
    CHECK(a.st_ino != b.st_ino);
    CHECK_EQ(b.st_mode & 07777, 0700); // the owner's bits only
    CHECK_EQ(b.st_size, 18);
    CHECK_RC(hv_artifact_place(src, dst, 0644, -1, -1, err, sizeof(err)), HV_OK); // replaces
    CHECK(stat(dst, &b) == 0);
    CHECK_EQ(b.st_mode & 07777, 0600);
    CHECK_EQ(a.st_mode & 07777, 0755);
    // Set-id bits never survive, even when the order asks for them.
    CHECK_RC(hv_artifact_place(src, dst, 06755, -1, -1, err, sizeof(err)), HV_OK);
    CHECK(stat(dst, &b) == 0);
    CHECK_EQ(b.st_mode & 07777, 0700);
    if (geteuid() == 0) { // placed as the run-as user
        CHECK_RC(hv_artifact_place(src, dst, 04700, 65534, 65534, err, sizeof(err)), HV_OK);
        CHECK(stat(dst, &b) == 0);
        CHECK_EQ(b.st_uid, 65534);
        CHECK_EQ(b.st_gid, 65534);
        CHECK_EQ(b.st_mode & 07777, 0700);
    }
    // A symlink at dst is replaced, not followed.
    char victim[300];
    snprintf(victim, sizeof(victim), "%s/victim", top);
    CHECK_RC(hv_write_file_atomic(victim, "keep", 4, 0644), HV_OK);
    unlink(dst);
    CHECK_EQ(symlink(victim, dst), 0);
    CHECK_RC(hv_artifact_place(src, dst, 0644, -1, -1, err, sizeof(err)), HV_OK);
    CHECK(lstat(dst, &b) == 0 && S_ISREG(b.st_mode));
    CHECK(stat(victim, &a) == 0 && a.st_size == 4);
    snprintf(src, sizeof(src), "%s/none", top);
    CHECK_RC(hv_artifact_place(src, dst, 0644, -1, -1, err, sizeof(err)), HV_ENOTFOUND);
    CHECK(strstr(err, "No such file") != NULL);
    rm_rf(top);
}

/* A cache left by an older or killed agent: an open directory, an open cached file, partial
 * downloads. A new cache closes the first two and removes the partial download of a process
 * that is gone, and keeps one of a live process (another agent sharing the directory). */
static void case_sweep(void) {
    char top[256], path[600];
    snprintf(top, sizeof(top), "/tmp/hv-artifact-test-%d", (int)getpid());
    snprintf(dir, sizeof(dir), "/tmp/hv-artifact-test-%d/cache", (int)getpid());
    CHECK_RC(hv_mkdirs(dir, 0755), HV_OK);
    chmod(dir, 0755);
    const char *hex = "ab00000000000000000000000000000000000000000000000000000000000000";
    pid_t dead = fork(); // a pid that is surely gone
    if (dead == 0) {
        _exit(0);
    }
    waitpid(dead, NULL, 0);
    snprintf(path, sizeof(path), "%s/.%s.tmp.%d", dir, hex, (int)dead);
    CHECK_RC(hv_write_file_atomic(path, "part", 4, 0600), HV_OK);
    snprintf(path, sizeof(path), "%s/.%s.tmp.1", dir, hex); // pid 1 lives
    CHECK_RC(hv_write_file_atomic(path, "part", 4, 0600), HV_OK);
    snprintf(path, sizeof(path), "%s/%s", dir, hex);
    CHECK_RC(hv_write_file_atomic(path, "whole", 5, 0755), HV_OK);
    chmod(path, 04755);
    uv_loop_init(&loop);
    hv_artifact_cache_t *c = NULL;
    CHECK_RC(hv_artifact_cache_create(&loop, NULL, NULL, dir, "tok", &c), HV_OK);
    struct stat st;
    CHECK(stat(dir, &st) == 0 && (st.st_mode & 07777) == 0700);
    CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == HV_ARTIFACT_CACHE_MODE);
    CHECK_EQ(temp_files(), 1); // only the live process's
    snprintf(path, sizeof(path), "%s/.%s.tmp.1", dir, hex);
    CHECK_EQ(access(path, F_OK), 0);
    hv_artifact_cache_destroy(c);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&loop), 0);
    rm_rf(top);
}

/* 1 when the cache holds blob i's file. */
static int cached(int i) {
    char path[600];
    snprintf(path, sizeof(path), "%s/%s", dir, blobs[i].digest);
    return access(path, F_OK) == 0;
}

/* Gets blob i and waits for the callback (HV_OK expected): the file is pinned afterwards. */
static void get_pinned(hv_artifact_cache_t *c, int i) {
    got_t g = {0};
    get_wait(c, i, -1, &g, 10000);
    CHECK_RC(g.rc, HV_OK);
}

static hv_artifact_usage_t usage(const hv_artifact_cache_t *c) {
    hv_artifact_usage_t u;
    hv_artifact_cache_usage(c, &u);
    return u;
}

/* Three 400 kB artifacts, a bound of 1,000,000 bytes: the third download pushes out the least
 * recently used one; using the second again makes the other the older; an evicted artifact is
 * fetched again when asked for. */
static void case_bound_lru(void) {
    setup();
    for (int i = 0; i < 3; i++) {
        blob_add(400000, 0, 0, 0);
    }
    hv_artifact_cache_t *c = cache_on(chan, "tok");
    hv_artifact_cache_set_max(c, 1000000);
    get_pinned(c, 0);
    hv_artifact_release(c, blobs[0].digest);
    get_pinned(c, 1);
    hv_artifact_release(c, blobs[1].digest);
    CHECK_EQ(usage(c).bytes, 800000);
    CHECK_EQ(usage(c).evicted, 0);
    get_pinned(c, 0); // a hit: blob 1 is now the least recently used
    hv_artifact_release(c, blobs[0].digest);
    CHECK_EQ(fetch_calls, 2);
    get_pinned(c, 2);
    CHECK(cached(0));
    CHECK(!cached(1));
    CHECK(cached(2));
    CHECK_EQ(usage(c).bytes, 800000);
    CHECK_EQ(usage(c).files, 2);
    CHECK_EQ(usage(c).evicted, 1);
    CHECK_EQ(usage(c).pinned, 1);
    hv_artifact_release(c, blobs[2].digest);
    CHECK_EQ(usage(c).pinned, 0);
    // Blob 1 again: fetched anew, and blob 0 (used before blob 2) makes room.
    get_pinned(c, 1);
    CHECK_EQ(fetch_calls, 4);
    CHECK(!cached(0));
    CHECK(cached(1) && cached(2));
    hv_artifact_release(c, blobs[1].digest);
    CHECK_EQ(usage(c).bytes, 800000);
    CHECK_EQ(temp_files(), 0);
    hv_artifact_cache_destroy(c);
    teardown();
}

/* A file handed out stays, whatever the bound, until it is released; two deliveries of one file
 * pin it twice. A bound of 0 keeps everything. */
static void case_pinned_stays(void) {
    setup();
    blob_add(300000, 0, 0, 0);
    blob_add(300000, 0, 0, 0);
    hv_artifact_cache_t *c = cache_on(chan, "tok");
    got_t a = {0}, b = {0};
    CHECK_RC(hv_artifact_get(c, blobs[0].digest, blobs[0].len, got_cb, &a), HV_OK);
    get_wait(c, 0, -1, &b, 10000);
    CHECK_RC(a.rc, HV_OK);
    CHECK_EQ(usage(c).pinned, 2);
    get_pinned(c, 1);
    CHECK_EQ(usage(c).bytes, 600000); // unbounded so far
    hv_artifact_cache_set_max(c, 100000);
    CHECK(cached(0) && cached(1)); // all pinned: over the bound (one WARN)
    CHECK_EQ(usage(c).evicted, 0);
    hv_artifact_release(c, blobs[0].digest);
    CHECK(cached(0)); // still one pin
    hv_artifact_release(c, blobs[0].digest);
    CHECK(!cached(0));
    CHECK(cached(1));
    CHECK_EQ(usage(c).bytes, 300000);
    hv_artifact_release(c, blobs[1].digest);
    CHECK(!cached(1));
    CHECK_EQ(usage(c).bytes, 0);
    CHECK_EQ(usage(c).files, 0);
    CHECK_EQ(usage(c).evicted, 2);
    hv_artifact_release(c, blobs[1].digest); // no pin left: ignored (logged)
    CHECK_EQ(usage(c).pinned, 0);
    // A path a worker holds is still readable while pinned: deliveries with the bound in force.
    got_t d = {0};
    get_wait(c, 0, -1, &d, 10000);
    CHECK_RC(d.rc, HV_OK);
    CHECK(same_content(d.path, &blobs[0]));
    hv_artifact_release(c, blobs[0].digest);
    CHECK(!cached(0));
    hv_artifact_cache_destroy(c);
    teardown();
}

/* A download in progress is never evicted: its temporary file stays while a finished artifact
 * is deleted for the bound. */
static void case_download_kept(void) {
    setup();
    blob_add(200000, 0, 0, 1); // never answered: stays in progress
    blob_add(200000, 0, 0, 0);
    hv_artifact_cache_t *c = cache_on(chan, "tok");
    hv_artifact_cache_set_max(c, 1000);
    got_t s = {0};
    CHECK_RC(hv_artifact_get(c, blobs[0].digest, blobs[0].len, got_cb, &s), HV_OK);
    test_run_until(&loop, &fetch_calls, 1, 5000);
    CHECK_EQ(temp_files(), 1);
    get_pinned(c, 1);
    hv_artifact_release(c, blobs[1].digest);
    CHECK(!cached(1));
    CHECK_EQ(temp_files(), 1);
    CHECK_EQ(s.done, 0);
    hv_artifact_cache_stop(c);
    test_run_until(&loop, &s.done, 1, 5000);
    CHECK_RC(s.rc, HV_ECANCELED);
    CHECK_EQ(temp_files(), 0);
    hv_artifact_cache_destroy(c);
    teardown();
}

/* Writes blob i into the cache directory as an earlier agent left it, last used at mtime_s. */
static void put_cached(int i, time_t mtime_s) {
    char path[600];
    snprintf(path, sizeof(path), "%s/%s", dir, blobs[i].digest);
    CHECK_RC(hv_write_file_atomic(path, (const char *)blobs[i].data, blobs[i].len, 0400), HV_OK);
    struct timespec t[2] = {{.tv_sec = mtime_s}, {.tv_sec = mtime_s}};
    CHECK_EQ(utimensat(AT_FDCWD, path, t, 0), 0);
}

/* A new agent takes the files' mtimes as their last uses: over the bound at start, the oldest
 * go first; a use moves the mtime to now, so the next agent keeps that file over older ones. */
static void case_restart_lru(void) {
    setup();
    for (int i = 0; i < 4; i++) {
        blob_add(100000, 0, 0, 0);
    }
    CHECK_RC(hv_mkdirs(dir, 0700), HV_OK);
    put_cached(0, 1000000000); // 2001
    put_cached(1, 1100000000);
    put_cached(2, 1200000000);
    put_cached(3, 1300000000);
    hv_artifact_cache_t *c = NULL;
    CHECK_RC(hv_artifact_cache_create(&loop, NULL, NULL, dir, "tok", &c), HV_OK);
    CHECK_EQ(usage(c).files, 4);
    CHECK_EQ(usage(c).bytes, 400000);
    hv_artifact_cache_set_max(c, 300000);
    CHECK(!cached(0));
    CHECK(cached(1) && cached(2) && cached(3));
    get_pinned(c, 1); // the oldest left becomes the newest
    hv_artifact_release(c, blobs[1].digest);
    char path[600];
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", dir, blobs[1].digest);
    CHECK(stat(path, &st) == 0 && st.st_mtime > 1300000000);
    hv_artifact_cache_destroy(c);
    uv_run(&loop, UV_RUN_NOWAIT);

    CHECK_RC(hv_artifact_cache_create(&loop, NULL, NULL, dir, "tok", &c), HV_OK);
    hv_artifact_cache_set_max(c, 150000);
    CHECK(cached(1)); // used last, in the earlier agent
    CHECK(!cached(2) && !cached(3));
    CHECK_EQ(usage(c).files, 1);
    CHECK_EQ(usage(c).evicted, 2);
    hv_artifact_cache_destroy(c);
    teardown();
}

static const test_case_t cases[] = {
    {"fetch_shared", case_fetch_shared},
    {"restart_and_damage", case_restart_and_damage},
    {"resume", case_resume},
    {"failures", case_failures},
    {"unreachable", case_unreachable},
    {"stop", case_stop},
    {"place", case_place},
    {"sweep", case_sweep},
    {"put", case_put},
    {"bound_lru", case_bound_lru},
    {"pinned_stays", case_pinned_stays},
    {"download_kept", case_download_kept},
    {"restart_lru", case_restart_lru},
    {NULL, NULL},
};

int main(int argc, char **argv) {
    srand(42);
    return test_run(cases, argc, argv);
}
