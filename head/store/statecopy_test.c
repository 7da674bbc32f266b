/*
 * statecopy_test: the files of the head's state copies, on a real directory: a copy in chunks
 * is published under its own name only once every byte arrived and its digest matches; a wrong
 * digest or a chunk out of order leaves no file behind; a new copy at offset 0 replaces one in
 * progress; a head that starts again removes the half-written parts. (The room a copy needs on
 * the disk is a pure rule: head/core/copies_test.c.)
 */
#include "statecopy.h"
#include "hv_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sha256.h"

static char tmp_dir[256];

static void make_tmp(void) {
    hv_check_tmpdir(tmp_dir, sizeof(tmp_dir), "/tmp/hv_statecopy_test.XXXXXX");
}

static void remove_tmp(void) {
    hv_check_rmtree(tmp_dir);
    tmp_dir[0] = '\0';
}

static void digest(const uint8_t *b, size_t n, char hex[65]) { hv_sha256_hex_of(b, n, hex); }

/* Files in the states dir ending in suffix. */
static int count(const char *dir, const char *suffix) {
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "ls %s | grep -c '%s$'", dir, suffix);
    FILE *f = popen(cmd, "r");
    int n = -1;
    if (f != NULL) {
        if (fscanf(f, "%d", &n) != 1) {
            n = -1;
        }
        pclose(f);
    }
    return n;
}

static void test_chunks_publish(void) {
    char dir[400], err[600], hex[65];
    snprintf(dir, sizeof(dir), "%s/states", tmp_dir);
    hv_statecopies_t *c = NULL;
    CHECK_RC(hv_statecopies_create(dir, "e1", 0, &c), HV_OK);
    uint8_t data[3000];
    for (size_t i = 0; i < sizeof(data); i++) {
        data[i] = (uint8_t)(i * 7);
    }
    digest(data, sizeof(data), hex);
    int complete = -1;
    hv_statecopy_done_t done;
    CHECK_RC(
        hv_statecopy_put(c, 5, 2, 40, 3000, 0, data, 1000, "", &complete, &done, err, sizeof(err)),
        HV_OK);
    CHECK_EQ(complete, 0);
    /* Out of order: refused, the sender starts again. */
    CHECK_RC(hv_statecopy_put(c, 5, 2, 40, 3000, 2000, data + 2000, 1000, hex, &complete, &done,
                              err, sizeof(err)),
             HV_ESTATE);
    CHECK_RC(
        hv_statecopy_put(c, 5, 2, 40, 3000, 0, data, 2000, "", &complete, &done, err, sizeof(err)),
        HV_OK);
    CHECK_EQ(count(dir, ".part"), 1);
    CHECK_RC(hv_statecopy_put(c, 5, 2, 40, 3000, 2000, data + 2000, 1000, hex, &complete, &done,
                              err, sizeof(err)),
             HV_OK);
    CHECK_EQ(complete, 1);
    CHECK_EQ(done.size, 3000);
    CHECK_EQ(done.commit, 40);
    CHECK_STR(done.sha256, hex);
    CHECK(strstr(done.path, "/states/e1-5-g2-c40.bin") != NULL);
    /* Handed over, not yet published: the part is the caller's, and a new copy of the same job
     * may start meanwhile under a name of its own. */
    CHECK_EQ(count(dir, ".part"), 1);
    CHECK(access(done.path, F_OK) != 0);
    int c2 = -1;
    hv_statecopy_done_t next;
    CHECK_RC(hv_statecopy_put(c, 5, 2, 41, 3000, 0, data, 1000, "", &c2, &next, err, sizeof(err)),
             HV_OK);
    CHECK_EQ(count(dir, ".part"), 2);
    CHECK_RC(hv_statecopy_publish(&done, err, sizeof(err)), HV_OK);
    CHECK_EQ(done.fd, -1);
    CHECK_EQ(count(dir, ".part"), 1);
    hv_statecopy_discard(&done); /* after publish: nothing */
    CHECK(access(done.path, F_OK) == 0);
    uint8_t back[3000];
    size_t n = 0;
    CHECK_RC(hv_statecopy_read(done.path, 1000, back, 5000, &n), HV_OK);
    CHECK_EQ(n, 2000);
    CHECK(memcmp(back, data + 1000, 2000) == 0);
    struct stat st;
    CHECK(stat(done.path, &st) == 0 && (st.st_mode & 0777) == 0600);
    hv_statecopy_remove(done.path);
    CHECK_RC(hv_statecopy_read(done.path, 0, back, 10, &n), HV_ENOTFOUND);
    hv_statecopies_destroy(c); /* the copy in progress goes with it */
    CHECK_EQ(count(dir, ".part"), 0);
}

static void test_bad_digest(void) {
    char dir[400], err[600], hex[65];
    snprintf(dir, sizeof(dir), "%s/states", tmp_dir);
    hv_statecopies_t *c = NULL;
    CHECK_RC(hv_statecopies_create(dir, "", 0, &c), HV_OK);
    uint8_t data[100] = {1, 2, 3};
    digest(data, sizeof(data), hex);
    hex[0] = hex[0] == 'a' ? 'b' : 'a';
    int complete = -1;
    hv_statecopy_done_t done;
    CHECK_RC(
        hv_statecopy_put(c, 1, 1, 1, 100, 0, data, 100, hex, &complete, &done, err, sizeof(err)),
        HV_EPROTO);
    CHECK(strstr(err, "digest") != NULL);
    CHECK_EQ(count(dir, ".part"), 0);
    CHECK_EQ(count(dir, ".bin"), 0);
    /* A chunk past the copy's end. */
    CHECK_RC(
        hv_statecopy_put(c, 1, 1, 1, 100, 90, data, 20, hex, &complete, &done, err, sizeof(err)),
        HV_EINVAL);
    hv_statecopies_destroy(c);
}

static void test_restart_drops_parts(void) {
    char dir[400], err[600];
    snprintf(dir, sizeof(dir), "%s/states", tmp_dir);
    hv_statecopies_t *c = NULL;
    CHECK_RC(hv_statecopies_create(dir, "e", 0, &c), HV_OK);
    uint8_t data[10] = {0};
    int complete = 0;
    hv_statecopy_done_t done;
    CHECK_RC(hv_statecopy_put(c, 9, 1, 1, 20, 0, data, 10, "", &complete, &done, err, sizeof(err)),
             HV_OK);
    CHECK_EQ(count(dir, ".part"), 1);
    /* The head dies (the part stays on disk), then starts again. */
    hv_statecopies_t *c2 = NULL;
    CHECK_RC(hv_statecopies_create(dir, "e", 0, &c2), HV_OK);
    CHECK_EQ(count(dir, ".part"), 0);
    hv_statecopies_destroy(c2);
    hv_statecopies_destroy(c);
}

/* A publish that cannot finish (the states directory went while the copy was synced) fails with
 * the file's name, and nothing is published. */
static void test_publish_fails(void) {
    char dir[400], err[600], hex[65], moved[450];
    snprintf(dir, sizeof(dir), "%s/states", tmp_dir);
    snprintf(moved, sizeof(moved), "%s/moved", tmp_dir);
    hv_statecopies_t *c = NULL;
    CHECK_RC(hv_statecopies_create(dir, "e", 0, &c), HV_OK);
    uint8_t data[64] = {7};
    digest(data, sizeof(data), hex);
    int complete = 0;
    hv_statecopy_done_t done;
    CHECK_RC(hv_statecopy_put(c, 3, 1, 9, 64, 0, data, 64, hex, &complete, &done, err, sizeof(err)),
             HV_OK);
    CHECK_EQ(complete, 1);
    CHECK(rename(dir, moved) == 0);
    CHECK_RC(hv_statecopy_publish(&done, err, sizeof(err)), HV_EIO);
    CHECK(strstr(err, "cannot publish") != NULL && strstr(err, "e-3-g1-c9.bin") != NULL);
    CHECK_EQ(count(moved, ".part"), 1); /* its name was gone: what is left goes at the next start */
    hv_statecopies_destroy(c);
}

HV_CHECK_MAIN(make_tmp, remove_tmp, {"chunks_publish", test_chunks_publish},
              {"bad_digest", test_bad_digest}, {"restart_drops_parts", test_restart_drops_parts},
              {"publish_fails", test_publish_fails})
