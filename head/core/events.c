/*
 * events: names of the reason codes, their class for the metrics, and the readers of an event's
 * JSON data (see events.h). Pure.
 */
#include "events.h"

#include <string.h>

const char *hv_ev_reason_name(hv_ev_reason_t r) {
    static const char *const names[HV_EV__COUNT] = {
        "",           "start",         "failure",         "data_plane",
        "drain",      "grow",          "shrink",          "resume",
        "succeeded",  "cancelled",     "worker_failed",   "no_survivor",
        "max_resets", "round_timeout", "pending_timeout", "preempt"};
    return (unsigned)r < HV_EV__COUNT ? names[r] : "";
}

hv_ev_reason_t hv_ev_reset_class(hv_ev_reason_t r, int rollback) {
    if (rollback || r == HV_EV_FAILURE || r == HV_EV_DATA_PLANE || r == HV_EV_RESUME) {
        return HV_EV_FAILURE;
    }
    if (r == HV_EV_DRAIN || r == HV_EV_GROW || r == HV_EV_SHRINK) {
        return r;
    }
    if (r == HV_EV_PREEMPT) {
        return HV_EV_SHRINK; /* the fleet stopping a job: made smaller, to none */
    }
    return HV_EV_NONE;
}

/* ---- an event's JSON data ---------------------------------------------------------------- */

/* Skips a JSON string starting at its opening quote; returns the character after its closing
 * quote, or NULL when it does not end. */
static const char *json_skip_str(const char *p) {
    for (p++; *p != '\0'; p++) {
        if (*p == '\\' && p[1] != '\0') {
            p++;
        } else if (*p == '"') {
            return p + 1;
        }
    }
    return NULL;
}

static const char *json_ws(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') {
        p++;
    }
    return p;
}

/* The value of a top-level key: its first character, or NULL. */
static const char *json_find(const char *js, const char *key) {
    if (js == NULL) {
        return NULL;
    }
    size_t klen = strlen(key);
    int depth = 0;
    const char *p = js;
    while (*p != '\0') {
        if (*p == '"') {
            const char *s = p + 1;
            const char *e = json_skip_str(p);
            if (e == NULL) {
                return NULL;
            }
            p = json_ws(e);
            if (depth == 1 && *p == ':' && (size_t)(e - 1 - s) == klen &&
                memcmp(s, key, klen) == 0) {
                return json_ws(p + 1);
            }
            continue;
        }
        if (*p == '{' || *p == '[') {
            depth++;
        } else if (*p == '}' || *p == ']') {
            depth--;
        }
        p++;
    }
    return NULL;
}

int hv_ev_json_u64(const char *json, const char *key, uint64_t *out) {
    const char *v = json_find(json, key);
    if (v == NULL || *v < '0' || *v > '9') {
        return 0;
    }
    uint64_t n = 0;
    for (; *v >= '0' && *v <= '9'; v++) {
        uint64_t d = (uint64_t)(*v - '0');
        if (n > (UINT64_MAX - d) / 10) {
            return 0;
        }
        n = n * 10 + d;
    }
    *out = n;
    return 1;
}

int hv_ev_json_bool(const char *json, const char *key, int *out) {
    const char *v = json_find(json, key);
    if (v != NULL && strncmp(v, "true", 4) == 0) {
        *out = 1;
        return 1;
    }
    if (v != NULL && strncmp(v, "false", 5) == 0) {
        *out = 0;
        return 1;
    }
    return 0;
}

int hv_ev_json_str(const char *json, const char *key, char *buf, size_t len) {
    const char *v = json_find(json, key);
    if (v == NULL || *v != '"' || len == 0 || json_skip_str(v) == NULL) {
        return 0;
    }
    size_t n = 0;
    for (v++; *v != '"'; v++) {
        char c = *v;
        if (c == '\\') {
            v++;
            c = *v == 'n' ? '\n' : *v == 't' ? '\t' : *v == 'u' ? '?' : *v;
            if (*v == 'u') {
                for (int i = 0; i < 4 && v[1] != '"' && v[1] != '\0'; i++) {
                    v++;
                }
            }
        }
        if (n + 1 < len) {
            buf[n++] = c;
        }
    }
    buf[n] = '\0';
    return 1;
}
