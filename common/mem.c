/* mem: see mem.h. */
#include "mem.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_long mem_fail_countdown;

static int mem_should_fail(void) {
    long v = atomic_load(&mem_fail_countdown);
    while (v > 0) {
        if (atomic_compare_exchange_weak(&mem_fail_countdown, &v, v - 1)) {
            return v == 1;
        }
    }
    return 0;
}

void hv_mem_fail_after(long n) { atomic_store(&mem_fail_countdown, n); }

void *hv_malloc(size_t n) { return mem_should_fail() ? NULL : malloc(n ? n : 1); }

void *hv_calloc(size_t count, size_t n) {
    return mem_should_fail() ? NULL : calloc(count ? count : 1, n ? n : 1);
}

void *hv_realloc(void *p, size_t n) { return mem_should_fail() ? NULL : realloc(p, n ? n : 1); }

void hv_free(void *p) { free(p); }

char *hv_strdup(const char *s) {
    if (s == NULL) {
        return NULL;
    }
    return hv_strndup(s, strlen(s));
}

char *hv_strndup(const char *s, size_t n) {
    if (s == NULL) {
        return NULL;
    }
    size_t len = strnlen(s, n);
    char *out = hv_malloc(len + 1);
    if (out != NULL) {
        memcpy(out, s, len);
        out[len] = '\0';
    }
    return out;
}
