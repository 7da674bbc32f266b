/*
 * page_login: the status page's sessions, the pure part of its login. A browser cannot send the
 * listener's bearer token, so beyond loopback the page asks for a client token once (POST
 * /login, head/services/page_serve.c checks it against head/services/auth.c) and answers with a session cookie:
 * a random id that is not the token and says nothing of it. This module holds the sessions in
 * memory (a fixed table; a head restart logs everyone out): it adds one, finds the one a cookie
 * names (constant-time comparison, expired ones never found), drops one (logout) and drops those
 * of a token that is gone (a client token deleted from the data directory). It also keeps the
 * failed logins per client address, so that guessing tokens is slow (hv_page_login_wait: after
 * HV_PAGE_LOGIN_FREE wrong tokens an address waits 1 s before its next try, then twice as long
 * after each further one, up to 5 minutes). It does no I/O and reads no clock: the random id and
 * the time are passed in. Threads: the head's loop thread.
 */
#ifndef HV_HEAD_PAGE_LOGIN_H
#define HV_HEAD_PAGE_LOGIN_H

#include <stddef.h>
#include <stdint.h>

#define HV_PAGE_SESSION_COOKIE "hv_session"
#define HV_PAGE_SESSION_ID_LEN 64                   /* hex digits of a session id (256 bits) */
#define HV_PAGE_SESSION_TTL_MS (8ull * 3600 * 1000) /* a login lasts 8 hours at most */
#define HV_PAGE_MAX_SESSIONS 64                     /* at once; a new one evicts the oldest */

typedef struct hv_page_session_s {
    char id[HV_PAGE_SESSION_ID_LEN + 1]; /* "" = a free slot */
    char token_sha[65];  /* hex SHA-256 of the client token it logged in with (never the token) */
    char client[64];     /* that token's name ("default", a clients/ file name), for the log */
    uint64_t expires_ms; /* wall clock */
} hv_page_session_t;

typedef struct hv_page_sessions_s {
    hv_page_session_t s[HV_PAGE_MAX_SESSIONS];
} hv_page_sessions_t;

#define HV_PAGE_LOGIN_FREE 5          /* wrong tokens from one address before it must wait */
#define HV_PAGE_LOGIN_WAIT_MS 1000ull /* the first wait; it doubles with each wrong token */
#define HV_PAGE_LOGIN_WAIT_MAX_MS (5ull * 60 * 1000)
#define HV_PAGE_LOGIN_FORGET_MS (15ull * 60 * 1000) /* failures forgotten after this long */
#define HV_PAGE_LOGIN_ADDRS 256                     /* addresses remembered at once */

/* The failed logins of one client address. */
typedef struct hv_page_login_addr_s {
    char addr[48];     /* the client's IP address; "" = a free slot */
    uint32_t failures; /* wrong tokens in a row */
    uint64_t last_ms;  /* the last one (monotonic) */
    uint64_t until_ms; /* no login is tried before this (monotonic); 0 = none */
} hv_page_login_addr_t;

typedef struct hv_page_logins_s {
    hv_page_login_addr_t a[HV_PAGE_LOGIN_ADDRS];
} hv_page_logins_t;

/* How long addr must still wait before a login of its is tried at now_ms (monotonic); 0: now. */
uint64_t hv_page_login_wait(const hv_page_logins_t *t, const char *addr, uint64_t now_ms);

/* A wrong token from addr at now_ms: counted, and past HV_PAGE_LOGIN_FREE in a row the address
 * waits HV_PAGE_LOGIN_WAIT_MS, doubled for each further one, at most HV_PAGE_LOGIN_WAIT_MAX_MS.
 * Failures older than HV_PAGE_LOGIN_FORGET_MS are forgotten. A full table forgets the address
 * that waits least (none before one that waits). Returns the wait it now has (0: none). */
uint64_t hv_page_login_failed(hv_page_logins_t *t, const char *addr, uint64_t now_ms);

/* A good login from addr: its failures are forgotten. */
void hv_page_login_ok(hv_page_logins_t *t, const char *addr);

/* 1 when id is HV_PAGE_SESSION_ID_LEN lowercase hex digits (a cookie value worth looking up). */
int hv_page_session_id_valid(const char *id);

/* Adds a session with id (valid, from the caller's random source), the token's hash and name,
 * lasting HV_PAGE_SESSION_TTL_MS from now_ms. A full table drops the session that ends first
 * (expired ones first). */
void hv_page_session_add(hv_page_sessions_t *t, const char *id, const char *token_sha,
                         const char *client, uint64_t now_ms);

/* The live session the cookie value id names, or NULL (unknown, expired, malformed). */
const hv_page_session_t *hv_page_session_find(const hv_page_sessions_t *t, const char *id,
                                              uint64_t now_ms);

/* Drops the session id (logout); 1 when there was one. */
int hv_page_session_drop(hv_page_sessions_t *t, const char *id);

/* Drops every session logged in with the token of this hash; returns how many. */
size_t hv_page_session_drop_token(hv_page_sessions_t *t, const char *token_sha);

#endif
