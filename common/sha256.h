/*
 * sha256: SHA-256 (FIPS 180-4) for artifact digests. The head names uploaded binaries by their
 * digest, agents verify what they fetched, hvsubmit hashes before uploading; HMAC-SHA256
 * (RFC 2104) proves knowledge of a shared secret in libhv's actor handshake. This is a plain,
 * portable implementation written from the standards; it is not a general crypto library (no
 * constant-time guarantees beyond what the algorithm gives, except hv_ct_equal). A context is
 * caller storage (init/update/final) with no allocation; contexts are not shared between
 * threads.
 */
#ifndef HV_COMMON_SHA256_H
#define HV_COMMON_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* Running state of one digest. Caller storage; fields are private to sha256.c. */
typedef struct hv_sha256_s {
    uint32_t h[8];   /* intermediate hash value H(i) */
    uint64_t len;    /* message length so far, in bytes */
    uint8_t buf[64]; /* pending partial block */
    size_t buflen;   /* bytes used in buf, 0..63 */
} hv_sha256_t;

/* Starts a new digest in ctx (borrowed). */
void hv_sha256_init(hv_sha256_t *ctx);
/* Adds len bytes of data (borrowed; may be NULL when len == 0). */
void hv_sha256_update(hv_sha256_t *ctx, const void *data, size_t len);
/* Finishes the digest into out; ctx must be re-initialized before reuse. */
void hv_sha256_final(hv_sha256_t *ctx, uint8_t out[32]);
/* Writes d as 64 lowercase hex characters plus a NUL into hex. */
void hv_sha256_hex(const uint8_t d[32], char hex[65]);
/* The digest of len bytes of data (borrowed; may be NULL when len == 0) as 64 lowercase hex
 * characters plus a NUL into hex: init, update, final and hex in one call. The working state is
 * wiped before it returns (data may be a secret). */
void hv_sha256_hex_of(const void *data, size_t len, char hex[65]);
/* Hashes the whole file at path (borrowed) into hex; *size_out (may be NULL) gets its length.
 * Blocking (reads the file). HV_ENOTFOUND if it does not exist, HV_EIO on other read errors,
 * HV_EINVAL if path names something that is not a regular file. Outputs set only on success. */
hv_err hv_sha256_file(const char *path, char hex[65], uint64_t *size_out);
/* Tests and benchmarks: use (1) or not (0) the CPU's SHA extensions when it has them; returns
 * whether they are used now. Not thread-safe against digests in flight. */
int hv__sha256_accel(int use);
/* 1 when s is exactly 64 lowercase hex characters (a digest as hv writes it), else 0. */
int hv_sha256_valid_hex(const char *s);

/* HMAC-SHA256 (RFC 2104 with SHA-256, block size 64). Caller storage, like hv_sha256_t. */
typedef struct hv_hmac_sha256_s {
    hv_sha256_t inner; /* H(K ^ ipad || message...) */
    hv_sha256_t outer; /* H(K ^ opad || ...), finished in hv_hmac_sha256_final */
} hv_hmac_sha256_t;

/* Starts a MAC under key (borrowed, keylen bytes; a key longer than 64 bytes is hashed first, as
 * the RFC says; key may be NULL when keylen == 0). */
void hv_hmac_sha256_init(hv_hmac_sha256_t *ctx, const void *key, size_t keylen);
/* Adds len bytes of data (borrowed; may be NULL when len == 0). */
void hv_hmac_sha256_update(hv_hmac_sha256_t *ctx, const void *data, size_t len);
/* Finishes the MAC into out; ctx must be re-initialized before reuse. Wipes the key material. */
void hv_hmac_sha256_final(hv_hmac_sha256_t *ctx, uint8_t out[32]);
/* One-shot HMAC-SHA256 of data under key. */
void hv_hmac_sha256(const void *key, size_t keylen, const void *data, size_t len, uint8_t out[32]);
/* 1 when the len bytes at a and b are equal, else 0, in a time that depends only on len (for
 * comparing MACs: an attacker learns nothing from how long a refusal took). */
int hv_ct_equal(const void *a, const void *b, size_t len);

#endif
