/*
 * durable_test: the durable tier's I/O on real files and real commands: a copy written to a
 * directory and read back, a read whose digest does not match (nothing published), the same
 * through upload/download/remove commands (cp and rm), a command that fails (its status and
 * output in the error) and one that outlasts its timeout (killed, with its process group).
 * `durable_test <case>` runs one case.
 */
#include "durable.h"
#include "hv_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sha256.h"
#include "util.h"

static char tmp[256];

static void setup(void) {
    snprintf(tmp, sizeof(tmp), "/tmp/hv_durable_test.XXXXXX");
    if (mkdtemp(tmp) == NULL) {
        perror("mkdtemp");
        exit(1);
    }
}

static void teardown(void) {
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
    if (system(cmd) != 0) {
        fprintf(stderr, "cannot remove %s\n", tmp);
    }
}

/* Writes a file of n bytes (a pattern) at path; its digest into hex. */
static void make_file(const char *path, size_t n, char hex[65]) {
    FILE *f = fopen(path, "wb");
    hv_sha256_t sha;
    hv_sha256_init(&sha);
    for (size_t i = 0; i < n; i++) {
        uint8_t b = (uint8_t)(i * 7 + 3);
        fputc(b, f);
        hv_sha256_update(&sha, &b, 1);
    }
    fclose(f);
    uint8_t dg[32];
    hv_sha256_final(&sha, dg);
    hv_sha256_hex(dg, hex);
}

static int same_files(const char *a, const char *b) {
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "cmp -s '%s' '%s'", a, b);
    return system(cmd) == 0;
}

/* Runs one operation to its end. */
static hv_durable_op_t run_op(hv_durable_t *d, const hv_durable_op_t *op) {
    hv_durable_op_t out = {0};
    CHECK_EQ(hv_durable_submit(d, op), HV_OK);
    CHECK_EQ(hv_durable_flush(d, 10000), HV_OK);
    CHECK_EQ(hv_durable_poll(d, &out, 1), 1);
    return out;
}

/* run_op for an operation that must succeed. */
static hv_durable_op_t run_ok(hv_durable_t *d, const hv_durable_op_t *op) {
    hv_durable_op_t r = run_op(d, op);
    CHECK_RC_MSG(r.rc, HV_OK, r.err);
    return r;
}

static hv_durable_op_t op_of(hv_durable_kind_t kind, const char *key, const char *file,
                             const char *hex, uint64_t size) {
    hv_durable_op_t op = {.kind = kind, .job_id = 7, .generation = 2, .commit = 40, .size = size};
    snprintf(op.key, sizeof(op.key), "%s", key);
    snprintf(op.file, sizeof(op.file), "%s", file);
    snprintf(op.sha256, sizeof(op.sha256), "%s", hex);
    return op;
}

/* Reads the stored e-7-g2-c40.bin back into dst (the same as src, size bytes of digest hex); then
 * with a wrong digest (wrong_digest) or a wrong size: refused as corrupt, nothing published; then
 * drops it: published (where the write put it) is gone. */
static void read_then_drop(hv_durable_t *d, const char *src, const char *dst, const char *hex,
                           uint64_t size, int wrong_digest, const char *published) {
    hv_durable_op_t rd = op_of(HV_DURABLE_READ, "e-7-g2-c40.bin", dst, hex, size);
    run_ok(d, &rd);
    CHECK(same_files(src, dst));
    unlink(dst);
    if (wrong_digest) {
        rd.sha256[0] = rd.sha256[0] == 'a' ? 'b' : 'a';
    } else {
        rd.size = size - 1;
    }
    hv_durable_op_t r = run_op(d, &rd);
    CHECK_EQ(r.rc, HV_ECORRUPT);
    if (wrong_digest) {
        CHECK(strstr(r.err, "digest") != NULL);
    }
    CHECK(access(dst, F_OK) != 0);
    hv_durable_op_t dr = op_of(HV_DURABLE_DROP, "e-7-g2-c40.bin", "", "", 0);
    run_ok(d, &dr);
    CHECK(access(published, F_OK) != 0);
}

/* Write, read back (into a states directory that is gone: it is made again), a read with the
 * wrong digest publishes nothing, drop. */
static void case_dir(void) {
    char shared[300], src[300], dst[400], final[400], hex[65], err[256];
    snprintf(shared, sizeof(shared), "%s/shared/sub", tmp);
    snprintf(src, sizeof(src), "%s/src.bin", tmp);
    snprintf(dst, sizeof(dst), "%s/states/e-7-g2-c40.bin", tmp);
    make_file(src, 3 << 20, hex);
    hv_durable_opts_t o = {.dir = shared, .timeout_ms = 5000};
    hv_durable_t *d = NULL;
    CHECK_RC_MSG(hv_durable_create(&o, &d, err, sizeof(err)), HV_OK, err);
    if (d == NULL) {
        return;
    }
    hv_durable_op_t w = op_of(HV_DURABLE_WRITE, "e-7-g2-c40.bin", src, hex, 3 << 20);
    run_ok(d, &w);
    snprintf(final, sizeof(final), "%s/e-7-g2-c40.bin", shared);
    CHECK(same_files(src, final));
    read_then_drop(d, src, dst, hex, 3 << 20, 1, final);
    hv_durable_destroy(d);
}

/* The same through commands; the placeholders are quoted (a space in the directory). */
static void case_commands(void) {
    char bucket[300], src[300], dst[300], up[600], down[600], rm[600], obj[400], hex[65], err[256];
    snprintf(bucket, sizeof(bucket), "%s/a bucket", tmp);
    mkdir(bucket, 0700);
    snprintf(src, sizeof(src), "%s/e-7-g2-c40.bin", tmp);
    snprintf(dst, sizeof(dst), "%s/restored.bin", tmp);
    make_file(src, 100000, hex);
    snprintf(up, sizeof(up), "cp {file} '%s'/{key} && test {job} = 7", bucket);
    snprintf(down, sizeof(down), "cp '%s'/{key} {file}", bucket);
    snprintf(rm, sizeof(rm), "rm '%s'/{key}", bucket);
    hv_durable_opts_t o = {.upload = up, .download = down, .remove = rm, .timeout_ms = 5000};
    hv_durable_t *d = NULL;
    CHECK_RC_MSG(hv_durable_create(&o, &d, err, sizeof(err)), HV_OK, err);
    if (d == NULL) {
        return;
    }
    hv_durable_op_t r = run_op(
        d,
        &(hv_durable_op_t){
            .kind = HV_DURABLE_WRITE, .job_id = 7, .generation = 2, .commit = 40, .size = 100000});
    CHECK(r.rc != HV_OK); /* no file: refused */
    hv_durable_op_t w = op_of(HV_DURABLE_WRITE, "e-7-g2-c40.bin", src, hex, 100000);
    r = run_ok(d, &w);
    snprintf(obj, sizeof(obj), "%s/e-7-g2-c40.bin", bucket);
    CHECK(same_files(src, obj));
    char link[400];
    snprintf(link, sizeof(link), "%s.up.part", src);
    CHECK(access(link, F_OK) != 0); /* the upload's own name is gone */
    read_then_drop(d, src, dst, hex, 100000, 0, obj);
    hv_durable_destroy(d);
}

/* A command that fails says how, with the tail of its output; one that outlasts the timeout is
 * killed with its children. */
static void case_command_fails(void) {
    char src[300], hex[65], err[256];
    snprintf(src, sizeof(src), "%s/e-7-g2-c40.bin", tmp);
    make_file(src, 1000, hex);
    hv_durable_opts_t o = {.upload = "echo 'no such bucket' >&2; exit 3",
                           .download = "sleep 30 & sleep 30",
                           .timeout_ms = 400};
    hv_durable_t *d = NULL;
    CHECK_RC_MSG(hv_durable_create(&o, &d, err, sizeof(err)), HV_OK, err);
    if (d == NULL) {
        return;
    }
    hv_durable_op_t w = op_of(HV_DURABLE_WRITE, "k.bin", src, hex, 1000);
    hv_durable_op_t r = run_op(d, &w);
    CHECK_EQ(r.rc, HV_EIO);
    CHECK_STR(r.err, "the command exited with status 3: no such bucket ");
    char dst[300];
    snprintf(dst, sizeof(dst), "%s/r.bin", tmp);
    hv_durable_op_t rd = op_of(HV_DURABLE_READ, "k.bin", dst, hex, 1000);
    uint64_t t0 = hv_now_ms();
    r = run_op(d, &rd);
    uint64_t took = hv_now_ms() - t0;
    CHECK_EQ(r.rc, HV_ETIMEDOUT);
    CHECK(strstr(r.err, "did not finish within") != NULL);
    CHECK(took < 5000);
    CHECK(access(dst, F_OK) != 0);
    hv_durable_destroy(d);
}

/* Stopping the head does not wait for a slow command: destroy kills it. */
static void case_destroy_kills(void) {
    char err[256], dst[300];
    hv_durable_opts_t o = {.upload = "true", .download = "sleep 30", .timeout_ms = 600000};
    hv_durable_t *d = NULL;
    CHECK_RC_MSG(hv_durable_create(&o, &d, err, sizeof(err)), HV_OK, err);
    if (d == NULL) {
        return;
    }
    snprintf(dst, sizeof(dst), "%s/r.bin", tmp);
    hv_durable_op_t rd = op_of(HV_DURABLE_READ, "k.bin", dst, "00", 1);
    CHECK_EQ(hv_durable_submit(d, &rd), HV_OK);
    CHECK_EQ(hv_durable_flush(d, 300), HV_ETIMEDOUT); /* it runs */
    uint64_t t0 = hv_now_ms();
    hv_durable_destroy(d);
    CHECK(hv_now_ms() - t0 < 3000);
    CHECK(access(dst, F_OK) != 0);
}

HV_CHECK_MAIN(setup, teardown, {"dir", case_dir}, {"commands", case_commands},
              {"command_fails", case_command_fails}, {"destroy_kills", case_destroy_kills})
