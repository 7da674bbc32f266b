/*
 * cli_json: see cli_json.h. The writer (commas, indentation, misuse caught), a message's fields
 * by name through protobuf-c's descriptors, and the scanner that checks a JSON text from the head
 * before it is embedded or a top-level field of it is read.
 */
#include "cli_json.h"

#include <stdio.h>
#include <string.h>

#include "utf8.h"

/* ---- the writer --------------------------------------------------------------------------- */

void hv_cli_json_write_string(FILE *f, const char *s) {
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    fputc('"', f);
    while (*p) {
        unsigned char c = *p;
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc(c, f);
            p++;
        } else if (c < 0x20 || c == 0x7f) {
            switch (c) {
            case '\n':
                fputs("\\n", f);
                break;
            case '\r':
                fputs("\\r", f);
                break;
            case '\t':
                fputs("\\t", f);
                break;
            case '\b':
                fputs("\\b", f);
                break;
            case '\f':
                fputs("\\f", f);
                break;
            default:
                fprintf(f, "\\u%04x", c);
                break;
            }
            p++;
        } else {
            size_t n = hv_utf8_len((const char *)p);
            if (n == 0) {
                fputs("\\ufffd", f);
                p++;
            } else if (n == 2 && c == 0xc2 && p[1] <= 0x9f) {
                fprintf(f, "\\u%04x", p[1]); /* a C1 control (8-bit CSI): escaped as C0 ones */
                p += 2;
            } else if (n == 3 && c == 0xe2 && p[1] == 0x80 && (p[2] == 0xa8 || p[2] == 0xa9)) {
                fprintf(f, "\\u%04x", 0x2000 + (p[2] - 0x80)); /* line/paragraph separator */
                p += 3;
            } else {
                fwrite(p, 1, n, f);
                p += n;
            }
        }
    }
    fputc('"', f);
}

void hv_cli_json_init(hv_cli_json_t *j, FILE *f) {
    memset(j, 0, sizeof(*j));
    j->f = f;
}

static void json_indent(hv_cli_json_t *j) {
    fputc('\n', j->f);
    for (int i = 0; i < j->depth; i++) {
        fputs("  ", j->f);
    }
}

/* Called before every value: checks that a value may come here and writes the separator. */
static int json_before_value(hv_cli_json_t *j) {
    if (j->err) {
        return 0;
    }
    if (j->depth == 0) {
        return 1; /* the document's one value */
    }
    int lvl = j->depth - 1;
    if (j->is_obj[lvl]) {
        if (!j->want_value) {
            j->err = 1; /* a value in an object needs a key first */
            return 0;
        }
        j->want_value = 0;
        return 1; /* the key already wrote the separator */
    }
    if (j->count[lvl]) {
        fputc(',', j->f);
    }
    j->count[lvl] = 1;
    json_indent(j);
    return 1;
}

static void json_open(hv_cli_json_t *j, int is_obj) {
    if (!json_before_value(j)) {
        return;
    }
    if (j->depth >= HV_CLI_JSON_MAX_DEPTH) {
        j->err = 1;
        return;
    }
    fputc(is_obj ? '{' : '[', j->f);
    j->is_obj[j->depth] = (unsigned char)is_obj;
    j->count[j->depth] = 0;
    j->depth++;
}

static void json_close(hv_cli_json_t *j, int is_obj) {
    if (j->err) {
        return;
    }
    if (j->depth == 0 || j->is_obj[j->depth - 1] != is_obj || j->want_value) {
        j->err = 1;
        return;
    }
    int had = j->count[j->depth - 1];
    j->depth--;
    if (had) {
        json_indent(j);
    }
    fputc(is_obj ? '}' : ']', j->f);
}

void hv_cli_json_obj_begin(hv_cli_json_t *j) { json_open(j, 1); }
void hv_cli_json_obj_end(hv_cli_json_t *j) { json_close(j, 1); }
void hv_cli_json_arr_begin(hv_cli_json_t *j) { json_open(j, 0); }
void hv_cli_json_arr_end(hv_cli_json_t *j) { json_close(j, 0); }

/* Called before every key: checks that a key may come here and writes the separator. */
static int json_before_key(hv_cli_json_t *j) {
    if (j->err) {
        return 0;
    }
    if (j->depth == 0 || !j->is_obj[j->depth - 1] || j->want_value) {
        j->err = 1;
        return 0;
    }
    int lvl = j->depth - 1;
    if (j->count[lvl]) {
        fputc(',', j->f);
    }
    j->count[lvl] = 1;
    json_indent(j);
    return 1;
}

void hv_cli_json_key(hv_cli_json_t *j, const char *key) {
    if (!json_before_key(j)) {
        return;
    }
    hv_cli_json_write_string(j->f, key);
    fputs(": ", j->f);
    j->want_value = 1;
}

/* A key that is already a checked JSON string token (quotes included). */
static void json_raw_key(hv_cli_json_t *j, const char *tok, size_t len) {
    if (!json_before_key(j)) {
        return;
    }
    fwrite(tok, 1, len, j->f);
    fputs(": ", j->f);
    j->want_value = 1;
}

/* A value that is already a checked JSON scalar token (string, number, true, false, null). */
static void json_raw_value(hv_cli_json_t *j, const char *tok, size_t len) {
    if (json_before_value(j)) {
        fwrite(tok, 1, len, j->f);
    }
}

void hv_cli_json_str(hv_cli_json_t *j, const char *s) {
    if (json_before_value(j)) {
        hv_cli_json_write_string(j->f, s);
    }
}

void hv_cli_json_u64(hv_cli_json_t *j, uint64_t v) {
    if (json_before_value(j)) {
        fprintf(j->f, "%llu", (unsigned long long)v);
    }
}

void hv_cli_json_f64(hv_cli_json_t *j, double v) {
    if (json_before_value(j)) {
        if (v != v || v > 1e300 || v < -1e300) {
            fputs("null", j->f); /* JSON has no NaN or infinity */
        } else {
            fprintf(j->f, "%.6g", v);
        }
    }
}

void hv_cli_json_i64(hv_cli_json_t *j, int64_t v) {
    if (json_before_value(j)) {
        fprintf(j->f, "%lld", (long long)v);
    }
}

void hv_cli_json_bool(hv_cli_json_t *j, int v) {
    if (json_before_value(j)) {
        fputs(v ? "true" : "false", j->f);
    }
}

void hv_cli_json_null(hv_cli_json_t *j) {
    if (json_before_value(j)) {
        fputs("null", j->f);
    }
}

/* ---- a message's fields -------------------------------------------------------------------- */

/* The field that path names in m ("name", or "info.name" through a submessage): its
 * descriptor, and the message that holds it (NULL when a submessage on the way is unset, so the
 * field has its default). 0 when the path names no scalar field. */
static int json_field_find(const ProtobufCMessage *m, const char *path, size_t len,
                           const ProtobufCFieldDescriptor **fd, const ProtobufCMessage **holder) {
    const ProtobufCMessageDescriptor *d = m->descriptor;
    char name[64];
    for (;;) {
        const char *dot = memchr(path, '.', len);
        size_t n = dot != NULL ? (size_t)(dot - path) : len;
        if (n == 0 || n >= sizeof(name)) {
            return 0;
        }
        memcpy(name, path, n);
        name[n] = '\0';
        const ProtobufCFieldDescriptor *f =
            protobuf_c_message_descriptor_get_field_by_name(d, name);
        if (f == NULL) {
            return 0;
        }
        if (dot == NULL) {
            *fd = f;
            *holder = m;
            return f->type != PROTOBUF_C_TYPE_MESSAGE && f->type != PROTOBUF_C_TYPE_BYTES &&
                   (f->label != PROTOBUF_C_LABEL_REPEATED || f->type == PROTOBUF_C_TYPE_STRING);
        }
        if (f->type != PROTOBUF_C_TYPE_MESSAGE || f->label == PROTOBUF_C_LABEL_REPEATED) {
            return 0;
        }
        d = f->descriptor;
        if (m != NULL) {
            m = *(const ProtobufCMessage *const *)((const char *)m + f->offset);
        }
        path += n + 1;
        len -= n + 1;
    }
}

/* Writes one scalar field of holder (NULL: the field's default) as the next value. */
static void json_field_value(hv_cli_json_t *j, const ProtobufCFieldDescriptor *f,
                             const ProtobufCMessage *holder) {
    const char *at = holder != NULL ? (const char *)holder + f->offset : NULL;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) { /* repeated string: an array */
        size_t n = at != NULL ? *(const size_t *)((const char *)holder + f->quantifier_offset) : 0;
        char *const *v = at != NULL ? *(char *const *const *)at : NULL;
        hv_cli_json_arr_begin(j);
        for (size_t i = 0; i < n; i++) {
            hv_cli_json_str(j, v[i]);
        }
        hv_cli_json_arr_end(j);
        return;
    }
    switch (f->type) {
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        hv_cli_json_u64(j, at != NULL ? *(const uint32_t *)at : 0);
        break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        hv_cli_json_u64(j, at != NULL ? *(const uint64_t *)at : 0);
        break;
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_ENUM:
        hv_cli_json_i64(j, at != NULL ? *(const int32_t *)at : 0);
        break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        hv_cli_json_i64(j, at != NULL ? *(const int64_t *)at : 0);
        break;
    case PROTOBUF_C_TYPE_BOOL:
        hv_cli_json_bool(j, at != NULL ? *(const protobuf_c_boolean *)at : 0);
        break;
    case PROTOBUF_C_TYPE_FLOAT:
        hv_cli_json_f64(j, at != NULL ? *(const float *)at : 0);
        break;
    case PROTOBUF_C_TYPE_DOUBLE:
        hv_cli_json_f64(j, at != NULL ? *(const double *)at : 0);
        break;
    default: /* PROTOBUF_C_TYPE_STRING */
        hv_cli_json_str(j, at != NULL ? *(const char *const *)at : NULL);
        break;
    }
}

void hv_cli_json_fields(hv_cli_json_t *j, const ProtobufCMessage *m, const char *spec) {
    for (const char *p = spec; *p != '\0';) {
        size_t len = strcspn(p, " ");
        const char *eq = memchr(p, '=', len);
        const char *path = eq != NULL ? eq + 1 : p;
        size_t keylen = eq != NULL ? (size_t)(eq - p) : len;
        const ProtobufCFieldDescriptor *f = NULL;
        const ProtobufCMessage *holder = NULL;
        char key[64];
        if (len > 0) {
            if (keylen == 0 || keylen >= sizeof(key) ||
                !json_field_find(m, path, len - (size_t)(path - p), &f, &holder)) {
                j->err = 1; /* a spec that names no field: a bug, shown as output refused */
                return;
            }
            memcpy(key, p, keylen);
            key[keylen] = '\0';
            hv_cli_json_key(j, key);
            json_field_value(j, f, holder);
        }
        p += len;
        p += *p == ' ';
    }
}

/* ---- embedding a JSON text ------------------------------------------------------------------ */

/* A scan of one JSON text. With out == NULL it only checks; with out set it writes every token
 * through the writer (run only after a check passed, so every write succeeds). */
typedef struct jscan_s {
    const char *p;      /* next byte */
    hv_cli_json_t *out; /* NULL: check only */
    int depth;          /* containers open in the text */
    int max_depth;      /* containers the writer has room for */
    const char *key;    /* find: the top-level key looked for, quoted ("\"step\""), or NULL */
    const char *found;  /* find: where its value's token starts (NULL: not found) */
    size_t found_len;   /* find: the token's length */
} jscan_t;

static void jscan_ws(jscan_t *s) {
    while (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r') {
        s->p++;
    }
}

static int jscan_hex(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* A string token at s->p (which is '"'); its length including both quotes in *len. */
static int jscan_string(jscan_t *s, size_t *len) {
    const unsigned char *p = (const unsigned char *)s->p + 1;
    for (;;) {
        unsigned char c = *p;
        if (c == '"') {
            break;
        }
        if (c < 0x20) {
            return 0; /* a control character or the end of the text */
        }
        if (c == '\\') {
            char e = (char)p[1];
            if (e == 'u') {
                if (!jscan_hex((char)p[2]) || !jscan_hex((char)p[3]) || !jscan_hex((char)p[4]) ||
                    !jscan_hex((char)p[5])) {
                    return 0;
                }
                p += 6;
            } else if (e != '\0' && strchr("\"\\/bfnrt", e) != NULL) {
                p += 2;
            } else {
                return 0;
            }
            continue;
        }
        size_t n = hv_utf8_len((const char *)p);
        if (n == 0) {
            return 0;
        }
        p += n;
    }
    *len = (size_t)((const char *)p + 1 - s->p);
    return 1;
}

/* A number token; its length in *len. */
static int jscan_number(jscan_t *s, size_t *len) {
    const char *p = s->p;
    if (*p == '-') {
        p++;
    }
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (*p >= '0' && *p <= '9') {
            p++;
        }
    } else {
        return 0;
    }
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9')) {
            return 0;
        }
        while (*p >= '0' && *p <= '9') {
            p++;
        }
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') {
            p++;
        }
        if (!(*p >= '0' && *p <= '9')) {
            return 0;
        }
        while (*p >= '0' && *p <= '9') {
            p++;
        }
    }
    *len = (size_t)(p - s->p);
    return 1;
}

static int jscan_value(jscan_t *s);

/* An object or array at s->p. */
static int jscan_container(jscan_t *s, int is_obj) {
    if (++s->depth > s->max_depth) {
        return 0;
    }
    if (s->out != NULL && is_obj) {
        hv_cli_json_obj_begin(s->out);
    } else if (s->out != NULL) {
        hv_cli_json_arr_begin(s->out);
    }
    s->p++;
    jscan_ws(s);
    char close = is_obj ? '}' : ']';
    if (*s->p != close) {
        for (;;) {
            if (is_obj) {
                size_t len = 0;
                if (*s->p != '"' || !jscan_string(s, &len)) {
                    return 0;
                }
                if (s->out != NULL) {
                    json_raw_key(s->out, s->p, len);
                }
                int want = s->key != NULL && s->depth == 1 && s->found == NULL &&
                           strlen(s->key) == len && memcmp(s->key, s->p, len) == 0;
                s->p += len;
                jscan_ws(s);
                if (*s->p != ':') {
                    return 0;
                }
                s->p++;
                jscan_ws(s);
                const char *start = s->p;
                if (!jscan_value(s)) {
                    return 0;
                }
                if (want) {
                    s->found = start;
                    s->found_len = (size_t)(s->p - start);
                }
            } else if (!jscan_value(s)) {
                return 0;
            }
            jscan_ws(s);
            if (*s->p == ',') {
                s->p++;
                jscan_ws(s);
                continue;
            }
            if (*s->p != close) {
                return 0;
            }
            break;
        }
    }
    s->p++;
    s->depth--;
    if (s->out != NULL && is_obj) {
        hv_cli_json_obj_end(s->out);
    } else if (s->out != NULL) {
        hv_cli_json_arr_end(s->out);
    }
    return 1;
}

/* One value at s->p (no leading whitespace). */
static int jscan_value(jscan_t *s) {
    size_t len = 0;
    char c = *s->p;
    if (c == '{' || c == '[') {
        return jscan_container(s, c == '{');
    }
    if (c == '"') {
        if (!jscan_string(s, &len)) {
            return 0;
        }
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        if (!jscan_number(s, &len)) {
            return 0;
        }
    } else if (strncmp(s->p, "true", 4) == 0 || strncmp(s->p, "null", 4) == 0) {
        len = 4;
    } else if (strncmp(s->p, "false", 5) == 0) {
        len = 5;
    } else {
        return 0;
    }
    if (s->out != NULL) {
        json_raw_value(s->out, s->p, len);
    }
    s->p += len;
    return 1;
}

/* Checks (out == NULL) or writes one whole text. */
static int jscan_text(const char *text, hv_cli_json_t *out, int max_depth) {
    jscan_t s = {.p = text, .out = out, .depth = 0, .max_depth = max_depth};
    jscan_ws(&s);
    if (!jscan_value(&s)) {
        return 0;
    }
    jscan_ws(&s);
    return *s.p == '\0';
}

hv_err hv_cli_json_embed(hv_cli_json_t *j, const char *text, int want_object) {
    if (j->err || text == NULL) {
        return HV_EINVAL;
    }
    const char *first = text;
    while (*first == ' ' || *first == '\t' || *first == '\n' || *first == '\r') {
        first++;
    }
    if (want_object && *first != '{') {
        return HV_EINVAL;
    }
    if (!jscan_text(text, NULL, HV_CLI_JSON_MAX_DEPTH - j->depth)) {
        return HV_EINVAL;
    }
    jscan_text(text, j, HV_CLI_JSON_MAX_DEPTH - j->depth);
    return j->err ? HV_EINVAL : HV_OK;
}

/* The token of the top-level key's value in the object text, or NULL (not an object, not valid
 * JSON, or no such key). */
static const char *json_find(const char *text, const char *key, size_t *len) {
    char quoted[64];
    int n = snprintf(quoted, sizeof(quoted), "\"%s\"", key);
    if (text == NULL || n < 0 || (size_t)n >= sizeof(quoted)) {
        return NULL;
    }
    jscan_t s = {.p = text, .max_depth = HV_CLI_JSON_MAX_DEPTH, .key = quoted};
    jscan_ws(&s);
    if (*s.p != '{' || !jscan_value(&s)) {
        return NULL;
    }
    jscan_ws(&s);
    if (*s.p != '\0' || s.found == NULL) {
        return NULL;
    }
    *len = s.found_len;
    return s.found;
}

int hv_cli_json_field_str(const char *json, const char *key, char *buf, size_t len) {
    size_t tl = 0;
    const char *t = json_find(json, key, &tl);
    if (t == NULL || *t != '"' || len == 0) {
        return 0;
    }
    size_t o = 0;
    for (size_t i = 1; i + 1 < tl && o + 1 < len; i++) {
        char c = t[i];
        if (c == '\\') {
            char e = t[++i];
            c = e == 'n'   ? '\n'
                : e == 't' ? '\t'
                : e == 'r' ? '\r'
                : e == 'b' ? '\b'
                : e == 'f' ? '\f'
                           : e;
            if (e == 'u') {
                c = '?'; /* the head writes \u only for control characters */
                i += 4;
            }
        }
        buf[o++] = c;
    }
    buf[o] = '\0';
    return 1;
}

int hv_cli_json_field_u64(const char *json, const char *key, uint64_t *out) {
    size_t tl = 0;
    const char *t = json_find(json, key, &tl);
    if (t == NULL || tl == 0 || tl > 20 || *t < '0' || *t > '9') {
        return 0;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < tl; i++) {
        if (t[i] < '0' || t[i] > '9' || v > (UINT64_MAX - (uint64_t)(t[i] - '0')) / 10) {
            return 0; /* a fraction, an exponent or too big */
        }
        v = v * 10 + (uint64_t)(t[i] - '0');
    }
    *out = v;
    return 1;
}

hv_err hv_cli_json_finish(hv_cli_json_t *j) {
    if (j->err || j->depth != 0 || j->want_value) {
        return HV_EINVAL;
    }
    fputc('\n', j->f);
    return HV_OK;
}

void hv_cli_json_kv_u64(hv_cli_json_t *j, const char *key, uint64_t v) {
    hv_cli_json_key(j, key);
    hv_cli_json_u64(j, v);
}

void hv_cli_json_kv_str(hv_cli_json_t *j, const char *key, const char *s) {
    hv_cli_json_key(j, key);
    hv_cli_json_str(j, s);
}
