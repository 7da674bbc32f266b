/*
 * fmnist_test: unit tests of the Fashion-MNIST loader (fmnist.c). Synthetic idx files written to
 * a temporary directory cover the happy path and every check (magic, dimensions, truncation,
 * trailing data, damaged gzip, count mismatch, labels out of range, missing files); the case
 * "dataset" reads the real data set from fmnist_default_dir() (Debian's dataset-fashion-mnist)
 * and checks its published shape. `fmnist_test` runs every case, `fmnist_test NAME...` only
 * those. Exit status 0 when all pass, 1 on a failure, 77 (ctest's skip) when every case passed
 * but the data set is not installed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "fmnist.h"

static int failed;  // set by a failing check in the current case
static int skipped; // set when the current case could not run here
static char tmpdir[256];

#define PATH_LEN 512 // every path a case builds: tmpdir, '/', a short name

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);                  \
            failed = 1;                                                                            \
            return;                                                                                \
        }                                                                                          \
    } while (0)

#define CHECK_EQ(a, b)                                                                             \
    do {                                                                                           \
        long long va = (long long)(a), vb = (long long)(b);                                        \
        if (va != vb) {                                                                            \
            fprintf(stderr, "%s:%d: %s == %s: %lld != %lld\n", __FILE__, __LINE__, #a, #b, va,     \
                    vb);                                                                           \
            failed = 1;                                                                            \
            return;                                                                                \
        }                                                                                          \
    } while (0)

#define CHECK_RC(expr, want, err)                                                                  \
    do {                                                                                           \
        hv_err rc_ = (expr), want_ = (want);                                                       \
        if (rc_ != want_) {                                                                        \
            fprintf(stderr, "%s:%d: %s: got %s (%s), want %s; message: %s\n", __FILE__, __LINE__,  \
                    #expr, hv_errname(rc_), hv_strerror(rc_), hv_errname(want_), err);             \
            failed = 1;                                                                            \
            return;                                                                                \
        }                                                                                          \
    } while (0)

/* The message names the file and says what is wrong. */
#define CHECK_MSG(err, path, word)                                                                 \
    do {                                                                                           \
        if (strstr(err, path) == NULL || strstr(err, word) == NULL) {                              \
            fprintf(stderr, "%s:%d: message \"%s\" lacks \"%s\" or \"%s\"\n", __FILE__, __LINE__,  \
                    err, path, word);                                                              \
            failed = 1;                                                                            \
            return;                                                                                \
        }                                                                                          \
    } while (0)

static void put32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* Writes <tmpdir>/<name>: an idx header (magic, ndims sizes) and len bytes of data, then extra
 * bytes of 0x55; gzip-compressed when gz. The full path goes to path (PATH_LEN bytes). */
static int write_idx(const char *name, uint32_t magic, const uint32_t *dims, unsigned ndims,
                     const uint8_t *data, size_t len, size_t extra, int gz, char *path) {
    int plen = snprintf(path, PATH_LEN, "%s/%s", tmpdir, name);
    if (plen < 0 || plen >= PATH_LEN) {
        return -1;
    }
    unsigned char hdr[16];
    put32(hdr, magic);
    for (unsigned i = 0; i < ndims; i++) {
        put32(hdr + 4 + 4 * i, dims[i]);
    }
    size_t hlen = 4 + 4 * (size_t)ndims;
    uint8_t *all = malloc(hlen + len + extra + 1);
    if (all == NULL) {
        return -1;
    }
    memcpy(all, hdr, hlen);
    if (len > 0) {
        memcpy(all + hlen, data, len);
    }
    memset(all + hlen + len, 0x55, extra);
    size_t total = hlen + len + extra;
    int ok;
    if (gz) {
        gzFile f = gzopen(path, "wb");
        ok = f != NULL && gzwrite(f, all, (unsigned)total) == (int)total;
        ok = f != NULL && gzclose(f) == Z_OK && ok;
    } else {
        FILE *f = fopen(path, "wb");
        ok = f != NULL && fwrite(all, 1, total, f) == total;
        ok = f != NULL && fclose(f) == 0 && ok;
    }
    free(all);
    return ok ? 0 : -1;
}

/* A synthetic split "name" of n samples: image k has every pixel equal to k, label k % 10 (or
 * the labels given). */
static int write_split(const char *split, uint32_t nimages, uint32_t nlabels,
                       const uint8_t *labels) {
    char path[PATH_LEN], name[128];
    uint8_t *img = malloc((size_t)nimages * FMNIST_PIXELS + 1);
    uint8_t lab[256];
    if (img == NULL || nlabels > sizeof(lab)) {
        free(img);
        return -1;
    }
    for (uint32_t k = 0; k < nimages; k++) {
        memset(img + (size_t)k * FMNIST_PIXELS, (int)k, FMNIST_PIXELS);
    }
    for (uint32_t k = 0; k < nlabels; k++) {
        lab[k] = labels != NULL ? labels[k] : (uint8_t)(k % 10);
    }
    uint32_t idims[3] = {nimages, FMNIST_ROWS, FMNIST_COLS}, ldims[1] = {nlabels};
    snprintf(name, sizeof(name), "%s-images-idx3-ubyte.gz", split);
    int rc = write_idx(name, FMNIST_MAGIC_IMAGES, idims, 3, img, (size_t)nimages * FMNIST_PIXELS, 0,
                       1, path);
    snprintf(name, sizeof(name), "%s-labels-idx1-ubyte.gz", split);
    if (rc == 0) {
        rc = write_idx(name, FMNIST_MAGIC_LABELS, ldims, 1, lab, nlabels, 0, 1, path);
    }
    free(img);
    return rc;
}

static void t_roundtrip(void) {
    CHECK(write_split("rt", 5, 5, NULL) == 0);
    char err[512] = "";
    fmnist_t d = {0};
    CHECK_RC(fmnist_load(tmpdir, "rt", 0, &d, err, sizeof(err)), HV_OK, err);
    CHECK_EQ(d.count, 5);
    CHECK_EQ(d.available, 5);
    for (size_t k = 0; k < 5; k++) {
        CHECK_EQ(d.labels[k], k);
        CHECK_EQ(d.images[k * FMNIST_PIXELS], k);
        CHECK_EQ(d.images[k * FMNIST_PIXELS + FMNIST_PIXELS - 1], k);
    }
    fmnist_fini(&d);
    CHECK(d.images == NULL && d.labels == NULL && d.count == 0);
    fmnist_fini(NULL);
}

static void t_limit(void) {
    CHECK(write_split("lim", 5, 5, NULL) == 0);
    char err[512] = "";
    fmnist_t d = {0};
    CHECK_RC(fmnist_load(tmpdir, "lim", 3, &d, err, sizeof(err)), HV_OK, err);
    CHECK_EQ(d.count, 3);
    CHECK_EQ(d.available, 5);
    CHECK_EQ(d.labels[2], 2);
    CHECK_EQ(d.images[2 * FMNIST_PIXELS + 100], 2);
    fmnist_fini(&d);
    // A limit above the count loads everything.
    CHECK_RC(fmnist_load(tmpdir, "lim", 50, &d, err, sizeof(err)), HV_OK, err);
    CHECK_EQ(d.count, 5);
    fmnist_fini(&d);
}

static void t_plain(void) {
    // zlib reads an uncompressed file transparently, whatever its name.
    char path[PATH_LEN], err[512] = "";
    uint8_t lab[3] = {7, 8, 9};
    uint32_t dims[1] = {3};
    CHECK(write_idx("plain.idx", FMNIST_MAGIC_LABELS, dims, 1, lab, 3, 0, 0, path) == 0);
    uint32_t got[3];
    uint8_t *data = NULL;
    size_t n = 0;
    CHECK_RC(fmnist_read_idx(path, FMNIST_MAGIC_LABELS, 0, got, &data, &n, err, sizeof(err)), HV_OK,
             err);
    CHECK_EQ(n, 3);
    CHECK_EQ(got[0], 3);
    CHECK_EQ(got[1], 1);
    CHECK_EQ(data[2], 9);
    free(data);
}

static void t_missing(void) {
    char err[PATH_LEN + 256] = "", want[PATH_LEN];
    fmnist_t d = {0};
    CHECK_RC(fmnist_load(tmpdir, "nosuch", 0, &d, err, sizeof(err)), HV_ENOTFOUND, err);
    snprintf(want, sizeof(want), "%s/nosuch-images-idx3-ubyte.gz", tmpdir);
    CHECK_MSG(err, want, "No such file");
    CHECK(d.images == NULL);
    CHECK_RC(fmnist_load(tmpdir, "", 0, &d, err, sizeof(err)), HV_EINVAL, err);
    CHECK_RC(fmnist_load(NULL, "train", 0, &d, err, sizeof(err)), HV_EINVAL, err);
}

static void t_bad_magic(void) {
    char path[PATH_LEN], err[512] = "";
    uint32_t dims[3] = {1, 28, 28};
    uint8_t img[FMNIST_PIXELS] = {0};
    CHECK(write_idx("bm-images-idx3-ubyte.gz", 0x00000903u, dims, 3, img, sizeof(img), 0, 1,
                    path) == 0);
    fmnist_t d = {0};
    CHECK_RC(fmnist_load(tmpdir, "bm", 0, &d, err, sizeof(err)), HV_ECORRUPT, err);
    CHECK_MSG(err, path, "magic number 0x00000903");
    // A labels file where images are expected.
    CHECK(write_idx("bm2-images-idx3-ubyte.gz", FMNIST_MAGIC_LABELS, dims, 1, img, 1, 0, 1, path) ==
          0);
    CHECK_RC(fmnist_load(tmpdir, "bm2", 0, &d, err, sizeof(err)), HV_ECORRUPT, err);
    CHECK_MSG(err, path, "magic");
    // Too short for a header.
    CHECK(write_idx("short.gz", FMNIST_MAGIC_LABELS, dims, 0, NULL, 0, 0, 1, path) == 0);
    uint32_t got[3];
    uint8_t *data = NULL;
    size_t n = 0;
    CHECK_RC(fmnist_read_idx(path, FMNIST_MAGIC_LABELS, 0, got, &data, &n, err, sizeof(err)),
             HV_ECORRUPT, err);
    CHECK_MSG(err, path, "truncated idx header");
    CHECK(data == NULL);
}

static void t_dims(void) {
    char path[PATH_LEN], err[512] = "";
    uint32_t dims[3] = {2, 27, 28};
    uint8_t img[2 * 27 * 28] = {0};
    CHECK(write_idx("dim-images-idx3-ubyte.gz", FMNIST_MAGIC_IMAGES, dims, 3, img, sizeof(img), 0,
                    1, path) == 0);
    fmnist_t d = {0};
    CHECK_RC(fmnist_load(tmpdir, "dim", 0, &d, err, sizeof(err)), HV_ECORRUPT, err);
    CHECK_MSG(err, path, "27x28");
    uint32_t zero[3] = {2, 0, 28};
    CHECK(write_idx("dim0-images-idx3-ubyte.gz", FMNIST_MAGIC_IMAGES, zero, 3, img, 0, 0, 1,
                    path) == 0);
    CHECK_RC(fmnist_load(tmpdir, "dim0", 0, &d, err, sizeof(err)), HV_ECORRUPT, err);
    CHECK_MSG(err, path, "implausible dimension");
}

static void t_truncated(void) {
    char path[PATH_LEN], err[512] = "";
    uint32_t dims[3] = {5, 28, 28};
    uint8_t img[3 * FMNIST_PIXELS] = {0};
    CHECK(write_idx("tr-images-idx3-ubyte.gz", FMNIST_MAGIC_IMAGES, dims, 3, img, sizeof(img), 0, 1,
                    path) == 0);
    fmnist_t d = {0};
    CHECK_RC(fmnist_load(tmpdir, "tr", 0, &d, err, sizeof(err)), HV_ECORRUPT, err);
    CHECK_MSG(err, path, "truncated");
    CHECK(strstr(err, "holds 3 complete items") != NULL);
    // With a limit the file only needs to hold that many.
    CHECK(write_split("trl", 5, 5, NULL) == 0);
    CHECK(write_idx("trl-images-idx3-ubyte.gz", FMNIST_MAGIC_IMAGES, dims, 3, img, sizeof(img), 0,
                    1, path) == 0);
    CHECK_RC(fmnist_load(tmpdir, "trl", 3, &d, err, sizeof(err)), HV_OK, err);
    CHECK_EQ(d.count, 3);
    CHECK_EQ(d.available, 5);
    fmnist_fini(&d);
    CHECK_RC(fmnist_load(tmpdir, "trl", 4, &d, err, sizeof(err)), HV_ECORRUPT, err);
    CHECK_MSG(err, path, "truncated");
}

static void t_trailing(void) {
    char path[PATH_LEN], err[512] = "";
    uint8_t lab[2] = {1, 2};
    uint32_t dims[1] = {2};
    CHECK(write_idx("trail.gz", FMNIST_MAGIC_LABELS, dims, 1, lab, 2, 1, 1, path) == 0);
    uint32_t got[3];
    uint8_t *data = NULL;
    size_t n = 0;
    CHECK_RC(fmnist_read_idx(path, FMNIST_MAGIC_LABELS, 0, got, &data, &n, err, sizeof(err)),
             HV_ECORRUPT, err);
    CHECK_MSG(err, path, "unexpected data after the 2 items");
    // Reading fewer items than the file holds ignores the rest.
    CHECK_RC(fmnist_read_idx(path, FMNIST_MAGIC_LABELS, 1, got, &data, &n, err, sizeof(err)), HV_OK,
             err);
    CHECK_EQ(n, 1);
    CHECK_EQ(data[0], 1);
    free(data);
}

static void t_damaged_gzip(void) {
    // A gzip stream cut in the middle (as an interrupted download leaves it).
    char path[PATH_LEN], err[512] = "";
    uint32_t dims[1] = {4000};
    uint8_t lab[4000];
    for (size_t i = 0; i < sizeof(lab); i++) {
        lab[i] = (uint8_t)((i * 2654435761u) >> 13) % 10;
    }
    CHECK(write_idx("cut.gz", FMNIST_MAGIC_LABELS, dims, 1, lab, sizeof(lab), 0, 1, path) == 0);
    FILE *f = fopen(path, "rb+");
    CHECK(f != NULL);
    CHECK(fseek(f, 0, SEEK_END) == 0);
    long size = ftell(f);
    fclose(f);
    CHECK(size > 40);
    CHECK(truncate(path, size / 2) == 0);
    uint32_t got[3];
    uint8_t *data = NULL;
    size_t n = 0;
    hv_err rc = fmnist_read_idx(path, FMNIST_MAGIC_LABELS, 0, got, &data, &n, err, sizeof(err));
    CHECK(rc == HV_ECORRUPT || rc == HV_EIO);
    CHECK_MSG(err, path, ":");
    CHECK(data == NULL);
}

static void t_mismatch(void) {
    char err[512] = "";
    fmnist_t d = {0};
    CHECK(write_split("mm", 5, 4, NULL) == 0);
    CHECK_RC(fmnist_load(tmpdir, "mm", 0, &d, err, sizeof(err)), HV_ECORRUPT, err);
    CHECK_MSG(err, "mm-labels-idx1-ubyte.gz", "holds 5 images but");
    CHECK(strstr(err, "holds 4 labels") != NULL);
    uint8_t bad[3] = {0, 10, 1};
    CHECK(write_split("bl", 3, 3, bad) == 0);
    CHECK_RC(fmnist_load(tmpdir, "bl", 0, &d, err, sizeof(err)), HV_ECORRUPT, err);
    CHECK_MSG(err, "bl-labels-idx1-ubyte.gz", "label 10 of sample 1 is out of range");
}

static void t_default_dir(void) {
    const char *old = getenv("HV_FMNIST_DIR");
    char *saved = old != NULL ? strdup(old) : NULL;
    setenv("HV_FMNIST_DIR", "/some/where", 1);
    int ok1 = strcmp(fmnist_default_dir(), "/some/where") == 0;
    setenv("HV_FMNIST_DIR", "", 1);
    int ok2 = strcmp(fmnist_default_dir(), FMNIST_DEFAULT_DIR) == 0;
    if (saved != NULL) {
        setenv("HV_FMNIST_DIR", saved, 1);
        free(saved);
    } else {
        unsetenv("HV_FMNIST_DIR");
    }
    CHECK(ok1);
    CHECK(ok2);
}

/* The real data set: 60000 training and 10000 test images, balanced classes. */
static void t_dataset(void) {
    const char *dir = fmnist_default_dir();
    char path[4200], err[512] = "";
    snprintf(path, sizeof(path), "%s/t10k-labels-idx1-ubyte.gz", dir);
    if (access(path, R_OK) != 0) {
        fprintf(stderr, "  skipped: %s: %s (install dataset-fashion-mnist or set HV_FMNIST_DIR)\n",
                path, strerror(errno));
        skipped = 1;
        return;
    }
    static const struct {
        const char *split;
        size_t count;
    } splits[2] = {{"train", 60000}, {"t10k", 10000}};
    for (int s = 0; s < 2; s++) {
        fmnist_t d = {0};
        CHECK_RC(fmnist_load(dir, splits[s].split, 0, &d, err, sizeof(err)), HV_OK, err);
        size_t per[FMNIST_CLASSES] = {0}, dark = 0, bright = 0;
        for (size_t i = 0; i < d.count; i++) {
            per[d.labels[i]]++;
        }
        for (size_t i = 0; i < d.count * FMNIST_PIXELS; i++) {
            dark += d.images[i] == 0;
            bright += d.images[i] == 255;
        }
        size_t count = d.count;
        fmnist_fini(&d);
        CHECK_EQ(count, splits[s].count);
        for (int c = 0; c < FMNIST_CLASSES; c++) {
            CHECK_EQ(per[c], splits[s].count / FMNIST_CLASSES);
        }
        // Clothes on a black background: many zero pixels, some saturated ones.
        CHECK(dark > count * FMNIST_PIXELS / 4);
        CHECK(bright > 0);
        // The first samples again, with a limit.
        CHECK_RC(fmnist_load(dir, splits[s].split, 100, &d, err, sizeof(err)), HV_OK, err);
        CHECK_EQ(d.count, 100);
        CHECK_EQ(d.available, splits[s].count);
        fmnist_fini(&d);
    }
}

static const struct {
    const char *name;
    void (*fn)(void);
} cases[] = {
    {"roundtrip", t_roundtrip},
    {"limit", t_limit},
    {"plain", t_plain},
    {"missing", t_missing},
    {"bad_magic", t_bad_magic},
    {"dims", t_dims},
    {"truncated", t_truncated},
    {"trailing", t_trailing},
    {"damaged_gzip", t_damaged_gzip},
    {"mismatch", t_mismatch},
    {"default_dir", t_default_dir},
    {"dataset", t_dataset},
};

/* Removes the files the cases wrote, then the directory. */
static void remove_tmpdir(void) {
    static const char *names[] = {"rt", "lim", "bm", "bm2", "dim", "dim0", "tr", "trl", "mm", "bl"};
    char path[PATH_LEN];
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s-images-idx3-ubyte.gz", tmpdir, names[i]);
        unlink(path);
        snprintf(path, sizeof(path), "%s/%s-labels-idx1-ubyte.gz", tmpdir, names[i]);
        unlink(path);
    }
    static const char *files[] = {"plain.idx", "short.gz", "trail.gz", "cut.gz"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", tmpdir, files[i]);
        unlink(path);
    }
    if (rmdir(tmpdir) != 0) {
        fprintf(stderr, "fmnist_test: cannot remove %s: %s\n", tmpdir, strerror(errno));
    }
}

int main(int argc, char **argv) {
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof(tmpdir), "%s/fmnist_test.XXXXXX",
             base != NULL && base[0] != '\0' ? base : "/tmp");
    if (mkdtemp(tmpdir) == NULL) {
        fprintf(stderr, "fmnist_test: mkdtemp %s: %s\n", tmpdir, strerror(errno));
        return 1;
    }
    int failures = 0, ran = 0, skips = 0;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int want = argc < 2;
        for (int a = 1; a < argc; a++) {
            want |= strcmp(argv[a], cases[i].name) == 0;
        }
        if (!want) {
            continue;
        }
        failed = skipped = 0;
        cases[i].fn();
        ran++;
        fprintf(stderr, "%-4s %s\n", failed ? "FAIL" : skipped ? "skip" : "ok", cases[i].name);
        failures += failed;
        skips += skipped && !failed;
    }
    remove_tmpdir();
    if (ran == 0) {
        fprintf(stderr, "no test case matched\n");
        return 2;
    }
    // The data set's absence is a skip (77), never a pass: the loader was not tried on it.
    return failures ? 1 : skips ? 77 : 0;
}
