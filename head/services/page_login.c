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
