/* cmdtmpl: see cmdtmpl.h. */
#include "cmdtmpl.h"

#include <stdio.h>
#include <string.h>

hv_err hv_cmd_expand(const char *tmpl, const char *const *keys, const char *const *vals, size_t n,
                     const char *known, char *out, size_t outlen, char *err, size_t errlen) {
    size_t o = 0;
#define PUT(c)                                                                                     \
    do {                                                                                           \
        if (o + 1 >= outlen) {                                                                     \
            snprintf(err, errlen, "the command is longer than %zu bytes", outlen - 1);             \
            return HV_ETOOBIG;                                                                     \
        }                                                                                          \
        out[o++] = (c);                                                                            \
    } while (0)
    for (const char *p = tmpl; *p != '\0'; p++) {
        if (p[0] == '{' && p[1] == '{') {
            PUT('{');
            p++;
            continue;
        }
        if (*p != '{') {
            PUT(*p);
            continue;
        }
        const char *end = strchr(p, '}');
        size_t klen = end ? (size_t)(end - p - 1) : 0;
        size_t k = 0;
        while (end != NULL && k < n &&
               (strlen(keys[k]) != klen || strncmp(keys[k], p + 1, klen) != 0)) {
            k++;
        }
        if (end == NULL || k == n) {
            int shown = end ? (int)(end - p + 1) : (int)strcspn(p, " \t");
            snprintf(err, errlen, "unknown placeholder '%.*s' (known: %s)", shown > 40 ? 40 : shown,
                     p, known);
            return HV_ENOTFOUND;
        }
        /* 'value' with each ' written as '\'' */
        PUT('\'');
        for (const char *v = vals[k] ? vals[k] : ""; *v != '\0'; v++) {
            if (*v == '\'') {
                PUT('\'');
                PUT('\\');
                PUT('\'');
                PUT('\'');
            } else {
                PUT(*v);
            }
        }
        PUT('\'');
        p = end;
    }
    out[o] = '\0';
    return HV_OK;
#undef PUT
}
