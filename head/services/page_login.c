/* page_login: see page_login.h. */
#include "page_login.h"

#include <stdio.h>
#include <string.h>

/* Equal strings of length n, in a time that depends only on n. */
static int login_equal(const char *a, const char *b, size_t n) {
    unsigned char d = 0;
    for (size_t i = 0; i < n; i++) {
        d |= (unsigned char)(a[i] ^ b[i]);
    }
    return d == 0;
}

int hv_page_session_id_valid(const char *id) {
    size_t n = 0;
    for (; id[n] != '\0'; n++) {
        if (n >= HV_PAGE_SESSION_ID_LEN ||
            !((id[n] >= '0' && id[n] <= '9') || (id[n] >= 'a' && id[n] <= 'f'))) {
            return 0;
        }
    }
    return n == HV_PAGE_SESSION_ID_LEN;
}

void hv_page_session_add(hv_page_sessions_t *t, const char *id, const char *token_sha,
                         const char *client, uint64_t now_ms) {
    size_t k = 0;
    for (size_t i = 0; i < HV_PAGE_MAX_SESSIONS; i++) {
        const hv_page_session_t *s = &t->s[i];
        if (s->id[0] == '\0' || s->expires_ms <= now_ms) {
            k = i; /* a free or expired slot */
            break;
        }
        if (s->expires_ms < t->s[k].expires_ms) {
            k = i;
        }
    }
    hv_page_session_t *s = &t->s[k];
    memset(s, 0, sizeof(*s));
    snprintf(s->id, sizeof(s->id), "%s", id);
    snprintf(s->token_sha, sizeof(s->token_sha), "%s", token_sha);
    snprintf(s->client, sizeof(s->client), "%s", client);
    s->expires_ms = now_ms + HV_PAGE_SESSION_TTL_MS;
}

const hv_page_session_t *hv_page_session_find(const hv_page_sessions_t *t, const char *id,
                                              uint64_t now_ms) {
    if (id == NULL || !hv_page_session_id_valid(id)) {
        return NULL;
    }
    const hv_page_session_t *hit = NULL;
    for (size_t i = 0; i < HV_PAGE_MAX_SESSIONS; i++) {
        const hv_page_session_t *s = &t->s[i];
        if (s->id[0] != '\0' && login_equal(s->id, id, HV_PAGE_SESSION_ID_LEN) &&
            s->expires_ms > now_ms) {
            hit = s;
        }
    }
    return hit;
}

int hv_page_session_drop(hv_page_sessions_t *t, const char *id) {
    int n = 0;
    for (size_t i = 0; id != NULL && hv_page_session_id_valid(id) && i < HV_PAGE_MAX_SESSIONS;
         i++) {
        if (t->s[i].id[0] != '\0' && login_equal(t->s[i].id, id, HV_PAGE_SESSION_ID_LEN)) {
            memset(&t->s[i], 0, sizeof(t->s[i]));
            n = 1;
        }
    }
    return n;
}

/* The slot of addr, or NULL. */
static hv_page_login_addr_t *login_slot(const hv_page_logins_t *t, const char *addr) {
    for (size_t i = 0; addr != NULL && addr[0] != '\0' && i < HV_PAGE_LOGIN_ADDRS; i++) {
        if (strcmp(t->a[i].addr, addr) == 0) {
            return (hv_page_login_addr_t *)&t->a[i];
        }
    }
    return NULL;
}

uint64_t hv_page_login_wait(const hv_page_logins_t *t, const char *addr, uint64_t now_ms) {
    const hv_page_login_addr_t *a = login_slot(t, addr);
    return a != NULL && a->until_ms > now_ms ? a->until_ms - now_ms : 0;
}

uint64_t hv_page_login_failed(hv_page_logins_t *t, const char *addr, uint64_t now_ms) {
    hv_page_login_addr_t *a = login_slot(t, addr);
    if (a == NULL) {
        /* A free slot, else the one that waits least, then the oldest. */
        a = &t->a[0];
        for (size_t i = 0; i < HV_PAGE_LOGIN_ADDRS; i++) {
            hv_page_login_addr_t *b = &t->a[i];
            if (b->addr[0] == '\0') {
                a = b;
                break;
            }
            uint64_t bw = b->until_ms > now_ms ? b->until_ms - now_ms : 0;
            uint64_t aw = a->until_ms > now_ms ? a->until_ms - now_ms : 0;
            if (bw < aw || (bw == aw && b->last_ms < a->last_ms)) {
                a = b;
            }
        }
        memset(a, 0, sizeof(*a));
        snprintf(a->addr, sizeof(a->addr), "%s", addr != NULL ? addr : "");
    } else if (now_ms - a->last_ms >= HV_PAGE_LOGIN_FORGET_MS && a->until_ms <= now_ms) {
        a->failures = 0;
    }
    a->failures++;
    a->last_ms = now_ms;
    if (a->failures <= HV_PAGE_LOGIN_FREE) {
        return 0;
    }
    uint32_t k = a->failures - HV_PAGE_LOGIN_FREE - 1;
    uint64_t wait = k >= 20 ? HV_PAGE_LOGIN_WAIT_MAX_MS : HV_PAGE_LOGIN_WAIT_MS << k;
    if (wait > HV_PAGE_LOGIN_WAIT_MAX_MS) {
        wait = HV_PAGE_LOGIN_WAIT_MAX_MS;
    }
    a->until_ms = now_ms + wait;
    return wait;
}

void hv_page_login_ok(hv_page_logins_t *t, const char *addr) {
    hv_page_login_addr_t *a = login_slot(t, addr);
    if (a != NULL) {
        memset(a, 0, sizeof(*a));
    }
}

size_t hv_page_session_drop_token(hv_page_sessions_t *t, const char *token_sha) {
    size_t n = 0;
    for (size_t i = 0; i < HV_PAGE_MAX_SESSIONS; i++) {
        if (t->s[i].id[0] != '\0' && strcmp(t->s[i].token_sha, token_sha) == 0) {
            memset(&t->s[i], 0, sizeof(t->s[i]));
            n++;
        }
    }
    return n;
}
