/* mem: see mem.h. */
#include "mem.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#ifdef __linux__
#include <sys/mman.h>
#endif

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

#define MEM_HUGE ((size_t)2 << 20)

void *hv_malloc_large(size_t n) {
    if (n < 2 * MEM_HUGE) {
        return hv_malloc(n);
    }
    if (mem_should_fail()) {
        return NULL;
    }
    void *p = NULL;
    if (posix_memalign(&p, MEM_HUGE, n) != 0) {
        return NULL;
    }
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    (void)madvise(p, n, MADV_HUGEPAGE); /* a hint: without it, plain pages */
#endif
    return p;
}

void hv_malloc_keep_heap(void) {
#ifdef __GLIBC__
    (void)mallopt(M_MMAP_THRESHOLD, 16 << 20);
    (void)mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
}

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
