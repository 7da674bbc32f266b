/*
 * mem: hv's allocator entry points. Everything allocates through these so that tests can fail
 * the Nth allocation (hv_mem_fail_after) and check that every caller returns HV_ENOMEM cleanly.
 * Never aborts: libhv runs inside the user's process.
 */
#ifndef HV_COMMON_MEM_H
#define HV_COMMON_MEM_H

#include <stddef.h>

void *hv_malloc(size_t n);
void *hv_calloc(size_t count, size_t n);
void *hv_realloc(void *p, size_t n);
void hv_free(void *p);
/* Returns an owned copy of s, or NULL (s == NULL or out of memory). */
char *hv_strdup(const char *s);
/* Returns an owned copy of at most n bytes of s, always NUL-terminated, or NULL. */
char *hv_strndup(const char *s, size_t n);

/* Test hook: the n-th allocation from now (1 = the next) fails; 0 disables. */
void hv_mem_fail_after(long n);

#endif
