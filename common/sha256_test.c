/*
 * sha256_test: checks hv_sha256 against the FIPS 180-2/NIST example vectors, against itself
 * when the input is fed in odd-sized pieces, and hv_sha256_file against the system's sha256sum;
 * HMAC-SHA256 against RFC 4231's test cases, and hv_ct_equal.
 * Each case can run alone: `sha256_test <case>`.
 */
#include "sha256.h"
#include "hv_check.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The vectors go through the one-shot hv_sha256_hex_of (init, update, final, hex). */
#define hex_of hv_sha256_hex_of

static void test_vectors(void) {
    char hex[65];
    hex_of("", 0, hex);
    CHECK_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    hex_of("abc", 3, hex);
    CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    hex_of(m448, strlen(m448), hex);
    CHECK_STR(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    const char *m896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                       "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    hex_of(m896, strlen(m896), hex);
    CHECK_STR(hex, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

static void test_million_a(void) {
    /* One million 'a', fed 1000 bytes at a time. */
    char block[1000];
    memset(block, 'a', sizeof(block));
    hv_sha256_t ctx;
    uint8_t d[32];
    char hex[65];
    hv_sha256_init(&ctx);
    for (int i = 0; i < 1000; i++) {
        hv_sha256_update(&ctx, block, sizeof(block));
    }
    hv_sha256_final(&ctx, d);
    hv_sha256_hex(d, hex);
    CHECK_STR(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void test_split_updates(void) {
    /* Every split point and odd piece sizes across the 55/56/64 padding boundaries must agree
     * with a one-shot digest. */
    uint8_t msg[200];
    for (size_t i = 0; i < sizeof(msg); i++) {
        msg[i] = (uint8_t)(i * 7 + 3);
    }
    for (size_t len = 0; len <= sizeof(msg); len++) {
        char want[65], got[65];
        hex_of(msg, len, want);
        for (size_t piece = 1; piece <= 70; piece += 3) {
            hv_sha256_t ctx;
            uint8_t d[32];
            hv_sha256_init(&ctx);
            for (size_t off = 0; off < len; off += piece) {
                size_t n = len - off < piece ? len - off : piece;
                hv_sha256_update(&ctx, msg + off, n);
            }
            hv_sha256_final(&ctx, d);
            hv_sha256_hex(d, got);
            if (strcmp(got, want) != 0) {
                fprintf(stderr, "len %zu piece %zu: got %s want %s\n", len, piece, got, want);
                hv_check_failures++;
                return;
            }
        }
    }
}

/* The CPU's SHA extensions (when this machine has them) agree with the portable code on every
 * length from 0 to 300 and on a large buffer fed in odd pieces; prints both speeds. */
static void test_accel(void) {
    static uint8_t msg[(size_t)4 << 20];
    for (size_t i = 0; i < sizeof(msg); i++) {
        msg[i] = (uint8_t)(i * 2654435761u >> 13);
    }
    int have = hv__sha256_accel(1);
    printf("SHA extensions: %s\n", have ? "used" : "not on this CPU (portable code only)");
    for (size_t len = 0; len <= 300; len++) {
        char a[65], c[65];
        hv__sha256_accel(1);
        hex_of(msg, len, a);
        hv__sha256_accel(0);
        hex_of(msg, len, c);
        CHECK_STR(a, c);
    }
    char hx[2][65];
    for (int use = 0; use < 2; use++) {
        hv__sha256_accel(use);
        hv_sha256_t ctx;
        uint8_t d[32];
        uint64_t t0 = hv_now_ms();
        hv_sha256_init(&ctx);
        for (size_t off = 0, step = 1; off < sizeof(msg); off += step, step = step * 3 + 1) {
            size_t n = sizeof(msg) - off < step ? sizeof(msg) - off : step;
            hv_sha256_update(&ctx, msg + off, n);
        }
        hv_sha256_final(&ctx, d);
        hv_sha256_hex(d, hx[use]);
        uint64_t ms = hv_now_ms() - t0;
        printf("%s: 4 MiB in %llu ms\n", use ? "accelerated" : "portable", (unsigned long long)ms);
    }
    CHECK_STR(hx[0], hx[1]);
    hv__sha256_accel(1);
}

static void test_valid_hex(void) {
    CHECK(hv_sha256_valid_hex("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
    CHECK(!hv_sha256_valid_hex("E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855"));
    CHECK(!hv_sha256_valid_hex("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85"));
    CHECK(!hv_sha256_valid_hex("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
                               "0"));
    CHECK(!hv_sha256_valid_hex("g3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
    CHECK(!hv_sha256_valid_hex(""));
    CHECK(!hv_sha256_valid_hex(NULL));
}

static void test_file(void) {
    char path[] = "/tmp/hv_sha256_test_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) {
        return;
    }
    /* 300 KiB of patterned bytes: several read chunks and a partial last one. */
    size_t len = 300 * 1024 + 17;
    uint8_t *data = malloc(len);
    CHECK(data != NULL);
    if (data == NULL) {
        close(fd);
        unlink(path);
        return;
    }
    for (size_t i = 0; i < len; i++) {
        data[i] = (uint8_t)((i * 2654435761u) >> 13);
    }
    CHECK(write(fd, data, len) == (ssize_t)len);
    close(fd);

    char hex[65] = {0};
    uint64_t size = 0;
    CHECK_RC(hv_sha256_file(path, hex, &size), HV_OK);
    CHECK(size == len);
    char mem_hex[65];
    hex_of(data, len, mem_hex);
    CHECK_STR(hex, mem_hex);

    char cmd[128], line[256] = {0};
    snprintf(cmd, sizeof(cmd), "sha256sum %s 2>/dev/null", path);
    FILE *p = popen(cmd, "r");
    if (p != NULL && fgets(line, sizeof(line), p) != NULL && strlen(line) > 64) {
        line[64] = '\0';
        CHECK_STR(hex, line);
    } else {
        fprintf(stderr, "note: sha256sum not available; compared with the in-memory digest\n");
    }
    if (p != NULL) {
        pclose(p);
    }
    free(data);
    unlink(path);

    CHECK_RC(hv_sha256_file("/nonexistent/hv/file", hex, NULL), HV_ENOTFOUND);
    CHECK_RC(hv_sha256_file("/tmp", hex, NULL), HV_EINVAL);
}

static void hmac_hex(const void *key, size_t keylen, const void *data, size_t len, char hex[65]) {
    uint8_t d[32];
    hv_hmac_sha256(key, keylen, data, len, d);
    hv_sha256_hex(d, hex);
}

static void test_hmac(void) {
    /* RFC 4231 test cases 1, 2 and 6 (a key longer than the block is hashed first). */
    char hex[65];
    uint8_t k1[20], k6[131];
    memset(k1, 0x0b, sizeof(k1));
    memset(k6, 0xaa, sizeof(k6));
    hmac_hex(k1, sizeof(k1), "Hi There", 8, hex);
    CHECK_STR(hex, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    const char *m2 = "what do ya want for nothing?";
    hmac_hex("Jefe", 4, m2, strlen(m2), hex);
    CHECK_STR(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    const char *m6 = "Test Using Larger Than Block-Size Key - Hash Key First";
    hmac_hex(k6, sizeof(k6), m6, strlen(m6), hex);
    CHECK_STR(hex, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    /* A key of exactly one block, a message fed in pieces (Python's hmac module gave the
     * expected value). */
    uint8_t k64[64];
    char msg[200];
    memset(k64, 0xaa, sizeof(k64));
    memset(msg, 'x', sizeof(msg));
    hv_hmac_sha256_t ctx;
    hv_hmac_sha256_init(&ctx, k64, sizeof(k64));
    hv_hmac_sha256_update(&ctx, msg, 7);
    hv_hmac_sha256_update(&ctx, msg + 7, 130);
    hv_hmac_sha256_update(&ctx, msg + 137, 63);
    uint8_t d[32];
    hv_hmac_sha256_final(&ctx, d);
    hv_sha256_hex(d, hex);
    CHECK_STR(hex, "195d3c6f6ae442a555518c607580f7e912914e7e4dea6e891e8cff56abc6d91f");
}

static void test_ct_equal(void) {
    uint8_t a[32], b[32];
    memset(a, 7, sizeof(a));
    memset(b, 7, sizeof(b));
    CHECK(hv_ct_equal(a, b, sizeof(a)));
    b[31] ^= 1;
    CHECK(!hv_ct_equal(a, b, sizeof(a)));
    CHECK(hv_ct_equal(a, b, 31));
    CHECK(hv_ct_equal(a, b, 0));
}

HV_CHECK_MAIN(NULL, NULL, {"vectors", test_vectors}, {"million_a", test_million_a},
              {"split_updates", test_split_updates}, {"accel", test_accel},
              {"valid_hex", test_valid_hex}, {"file", test_file}, {"hmac", test_hmac},
              {"ct_equal", test_ct_equal})
