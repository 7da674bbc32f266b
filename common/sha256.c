/*
 * sha256: SHA-256 as specified in FIPS 180-4 (sections 4.1.2, 4.2.2, 5.1.1, 5.3.3, 6.2), used to
 * name and verify artifacts and copies of the training state. Written from the standard,
 * portable C with no dependency; on x86-64 CPUs with the SHA extensions (Intel since Goldmont
 * and Ice Lake, AMD since Zen) the block function uses them instead (chosen once, at the first
 * digest, from CPUID): about five times faster, which matters for the state copies (issue 15:
 * tens of MiB hashed on the worker and again on the head at every copy). Callers: the head's
 * artifact store and state copies, the agent's artifact cache, hvsubmit, libhv's copier.
 */
#include "sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HV_SHA256_X86 1
#include <cpuid.h>
#include <immintrin.h>
#endif

/* The first 32 bits of the fractional parts of the cube roots of the first 64 primes (4.2.2). */
static const uint32_t sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define SHA256_ROTR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))
#define SHA256_CH(x, y, z) (((x) & (y)) ^ (~(x) & (z)))
#define SHA256_MAJ(x, y, z) (((x) & (y)) ^ ((x) & (z)) ^ ((y) & (z)))
#define SHA256_BSIG0(x) (SHA256_ROTR(x, 2) ^ SHA256_ROTR(x, 13) ^ SHA256_ROTR(x, 22))
#define SHA256_BSIG1(x) (SHA256_ROTR(x, 6) ^ SHA256_ROTR(x, 11) ^ SHA256_ROTR(x, 25))
#define SHA256_SSIG0(x) (SHA256_ROTR(x, 7) ^ SHA256_ROTR(x, 18) ^ ((x) >> 3))
#define SHA256_SSIG1(x) (SHA256_ROTR(x, 17) ^ SHA256_ROTR(x, 19) ^ ((x) >> 10))

/* Processes one 512-bit block (6.2.2): message schedule, 64 rounds, add into H. */
static void sha256_block(uint32_t h[8], const uint8_t *p) {
    uint32_t w[64];
    for (int t = 0; t < 16; t++) {
        w[t] = ((uint32_t)p[4 * t] << 24) | ((uint32_t)p[4 * t + 1] << 16) |
               ((uint32_t)p[4 * t + 2] << 8) | (uint32_t)p[4 * t + 3];
    }
    for (int t = 16; t < 64; t++) {
        w[t] = SHA256_SSIG1(w[t - 2]) + w[t - 7] + SHA256_SSIG0(w[t - 15]) + w[t - 16];
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int t = 0; t < 64; t++) {
        uint32_t t1 = hh + SHA256_BSIG1(e) + SHA256_CH(e, f, g) + sha256_k[t] + w[t];
        uint32_t t2 = SHA256_BSIG0(a) + SHA256_MAJ(a, b, c);
        hh = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += hh;
}

/* The portable block function over n consecutive blocks. */
static void sha256_blocks_c(uint32_t h[8], const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        sha256_block(h, p + 64 * i);
    }
}

#ifdef HV_SHA256_X86
/* The same over n blocks with the SHA extensions. The state lives in two registers as the
 * instructions want it: (A, B, E, F) and (C, D, G, H); every 4 rounds take 4 schedule words
 * W[t..t+3] plus their constants, and the schedule past the first 16 words comes from
 * SHA256MSG1 (W[t-16] + s0(W[t-15])), the add of W[t-7], and SHA256MSG2 (+ s1(W[t-2])). */
__attribute__((target("sha,sse4.1,ssse3"))) static void
sha256_blocks_x86(uint32_t h[8], const uint8_t *p, size_t n) {
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i dcba = _mm_loadu_si128((const __m128i *)&h[0]);
    __m128i hgfe = _mm_loadu_si128((const __m128i *)&h[4]);
    __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
    __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
    __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
    __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
    for (size_t b = 0; b < n; b++, p += 64) {
        __m128i save_abef = abef, save_cdgh = cdgh;
        __m128i w[4];
        for (int i = 0; i < 16; i++) {
            __m128i x;
            if (i < 4) {
                x = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * i)), bswap);
            } else {
                x = _mm_sha256msg1_epu32(w[i & 3], w[(i + 1) & 3]);
                x = _mm_add_epi32(x, _mm_alignr_epi8(w[(i + 3) & 3], w[(i + 2) & 3], 4));
                x = _mm_sha256msg2_epu32(x, w[(i + 3) & 3]);
            }
            w[i & 3] = x;
            __m128i m = _mm_add_epi32(x, _mm_loadu_si128((const __m128i *)&sha256_k[4 * i]));
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, m);
            abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(m, 0x0E));
        }
        abef = _mm_add_epi32(abef, save_abef);
        cdgh = _mm_add_epi32(cdgh, save_cdgh);
    }
    __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
    __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
    _mm_storeu_si128((__m128i *)&h[0], _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128((__m128i *)&h[4], _mm_alignr_epi8(dchg, feba, 8));
}

static int sha256_cpu_has_sha(void) {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSE4_1) || !(c & bit_SSSE3)) {
        return 0;
    }
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        return 0;
    }
    return (b & (1u << 29)) != 0; /* CPUID.(EAX=7,ECX=0):EBX.SHA[bit 29] */
}
#endif

/* 1: the CPU's SHA extensions, 0: portable C, -1: not chosen yet (a benign race: every thread
 * that chooses chooses the same). */
static int sha256_accel = -1;

static void sha256_blocks(uint32_t h[8], const uint8_t *p, size_t n) {
#ifdef HV_SHA256_X86
    int a = __atomic_load_n(&sha256_accel, __ATOMIC_RELAXED);
    if (a < 0) {
        a = sha256_cpu_has_sha();
        __atomic_store_n(&sha256_accel, a, __ATOMIC_RELAXED);
    }
    if (a) {
        sha256_blocks_x86(h, p, n);
        return;
    }
#endif
    sha256_blocks_c(h, p, n);
}

int hv__sha256_accel(int use) {
#ifdef HV_SHA256_X86
    int have = sha256_cpu_has_sha();
    __atomic_store_n(&sha256_accel, use && have, __ATOMIC_RELAXED);
    return use && have;
#else
    (void)use;
    return 0;
#endif
}

void hv_sha256_init(hv_sha256_t *ctx) {
    /* Initial hash value (5.3.3): fractional parts of the square roots of the first 8 primes. */
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(ctx->h, h0, sizeof(h0));
    ctx->len = 0;
    ctx->buflen = 0;
}

void hv_sha256_update(hv_sha256_t *ctx, const void *data, size_t len) {
    const uint8_t *p = data;
    ctx->len += len;
    if (ctx->buflen > 0) {
        size_t take = 64 - ctx->buflen;
        if (take > len) {
            take = len;
        }
        memcpy(ctx->buf + ctx->buflen, p, take);
        ctx->buflen += take;
        p += take;
        len -= take;
        if (ctx->buflen < 64) {
            return;
        }
        sha256_blocks(ctx->h, ctx->buf, 1);
        ctx->buflen = 0;
    }
    // Whole blocks straight from the caller's buffer, no copy.
    if (len >= 64) {
        sha256_blocks(ctx->h, p, len / 64);
        p += len / 64 * 64;
        len %= 64;
    }
    if (len > 0) {
        memcpy(ctx->buf, p, len);
        ctx->buflen = len;
    }
}

void hv_sha256_final(hv_sha256_t *ctx, uint8_t out[32]) {
    /* Padding (5.1.1): a 1 bit, zeros to 448 mod 512, then the length in bits, big-endian. */
    uint64_t bits = ctx->len * 8;
    ctx->buf[ctx->buflen++] = 0x80;
    if (ctx->buflen > 56) {
        memset(ctx->buf + ctx->buflen, 0, 64 - ctx->buflen);
        sha256_blocks(ctx->h, ctx->buf, 1);
        ctx->buflen = 0;
    }
    memset(ctx->buf + ctx->buflen, 0, 56 - ctx->buflen);
    for (int i = 0; i < 8; i++) {
        ctx->buf[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
    }
    sha256_blocks(ctx->h, ctx->buf, 1);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(ctx->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(ctx->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(ctx->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)ctx->h[i];
    }
    // Do not leave message bytes behind in caller storage.
    memset(ctx->buf, 0, sizeof(ctx->buf));
    ctx->buflen = 0;
}

void hv_sha256_hex(const uint8_t d[32], char hex[65]) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = digits[d[i] >> 4];
        hex[2 * i + 1] = digits[d[i] & 0xf];
    }
    hex[64] = '\0';
}

void hv_sha256_hex_of(const void *data, size_t len, char hex[65]) {
    hv_sha256_t ctx;
    uint8_t d[32];
    hv_sha256_init(&ctx);
    hv_sha256_update(&ctx, data, len);
    hv_sha256_final(&ctx, d);
    hv_sha256_hex(d, hex);
    memset(&ctx, 0, sizeof(ctx));
    memset(d, 0, sizeof(d));
}

hv_err hv_sha256_file(const char *path, char hex[65], uint64_t *size_out) {
    hv_err rc = HV_OK;
    uint8_t chunk[16384];
    hv_sha256_t ctx;
    uint64_t total = 0;
    struct stat st;

    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return errno == ENOENT ? HV_ENOTFOUND : hv_err_from_errno(errno);
    }
    if (fstat(fd, &st) != 0) {
        rc = HV_EIO;
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = HV_EINVAL;
        goto out;
    }
    hv_sha256_init(&ctx);
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            rc = HV_EIO;
            goto out;
        }
        if (n == 0) {
            break;
        }
        hv_sha256_update(&ctx, chunk, (size_t)n);
        total += (uint64_t)n;
    }
    uint8_t d[32];
    hv_sha256_final(&ctx, d);
    hv_sha256_hex(d, hex);
    if (size_out != NULL) {
        *size_out = total;
    }
out:
    close(fd);
    return rc;
}

int hv_sha256_valid_hex(const char *s) {
    if (s == NULL) {
        return 0;
    }
    for (int i = 0; i < 64; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return 0; // also stops at a NUL shorter than 64
        }
    }
    return s[64] == '\0';
}

/* HMAC (RFC 2104): H((K' ^ opad) || H((K' ^ ipad) || m)), where K' is the key padded with zeros
 * to the block size (64 bytes), or H(K) padded when the key is longer than a block. */
void hv_hmac_sha256_init(hv_hmac_sha256_t *ctx, const void *key, size_t keylen) {
    uint8_t k[64] = {0};
    if (keylen > sizeof(k)) {
        hv_sha256_t h;
        hv_sha256_init(&h);
        hv_sha256_update(&h, key, keylen);
        hv_sha256_final(&h, k);
    } else if (keylen > 0) {
        memcpy(k, key, keylen);
    }
    uint8_t pad[64];
    for (size_t i = 0; i < sizeof(pad); i++) {
        pad[i] = (uint8_t)(k[i] ^ 0x36);
    }
    hv_sha256_init(&ctx->inner);
    hv_sha256_update(&ctx->inner, pad, sizeof(pad));
    for (size_t i = 0; i < sizeof(pad); i++) {
        pad[i] = (uint8_t)(k[i] ^ 0x5c);
    }
    hv_sha256_init(&ctx->outer);
    hv_sha256_update(&ctx->outer, pad, sizeof(pad));
    /* The padded key is secret material: do not leave it on the stack. */
    volatile uint8_t *vk = k, *vp = pad;
    for (size_t i = 0; i < sizeof(k); i++) {
        vk[i] = 0;
        vp[i] = 0;
    }
}

void hv_hmac_sha256_update(hv_hmac_sha256_t *ctx, const void *data, size_t len) {
    hv_sha256_update(&ctx->inner, data, len);
}

void hv_hmac_sha256_final(hv_hmac_sha256_t *ctx, uint8_t out[32]) {
    uint8_t inner[32];
    hv_sha256_final(&ctx->inner, inner);
    hv_sha256_update(&ctx->outer, inner, sizeof(inner));
    hv_sha256_final(&ctx->outer, out);
    volatile uint8_t *v = (volatile uint8_t *)ctx;
    for (size_t i = 0; i < sizeof(*ctx); i++) {
        v[i] = 0;
    }
}

void hv_hmac_sha256(const void *key, size_t keylen, const void *data, size_t len, uint8_t out[32]) {
    hv_hmac_sha256_t ctx;
    hv_hmac_sha256_init(&ctx, key, keylen);
    hv_hmac_sha256_update(&ctx, data, len);
    hv_hmac_sha256_final(&ctx, out);
}

int hv_ct_equal(const void *a, const void *b, size_t len) {
    const volatile uint8_t *x = a, *y = b;
    uint8_t d = 0;
    for (size_t i = 0; i < len; i++) {
        d |= (uint8_t)(x[i] ^ y[i]);
    }
    return d == 0;
}
