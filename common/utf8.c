/* utf8: see utf8.h. */
#include "utf8.h"

size_t hv_utf8_len(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    unsigned c = p[0];
    size_t n;
    unsigned min, cp;
    if (c != 0 && c < 0x80) {
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2, min = 0x80, cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3, min = 0x800, cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4, min = 0x10000, cp = c & 0x07;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) {
            return 0; /* a NUL stops here too */
        }
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
        return 0;
    }
    return n;
}

long hv_utf8_bad_at(const char *s) {
    for (size_t i = 0; s != NULL && s[i] != '\0';) {
        size_t n = hv_utf8_len(s + i);
        if (n == 0) {
            return (long)i;
        }
        i += n;
    }
    return -1;
}

size_t hv_utf8_repair(char *s) {
    size_t fixed = 0;
    for (size_t i = 0; s != NULL && s[i] != '\0';) {
        size_t n = hv_utf8_len(s + i);
        if (n == 0) {
            s[i] = '?';
            fixed++;
            n = 1;
        }
        i += n;
    }
    return fixed;
}
