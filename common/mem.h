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

/* A buffer of n bytes for a large, long-lived copy (a state copy: tens of MiB and more): from
 * 4 MiB up it is aligned to 2 MiB and the kernel is asked for huge pages (MADV_HUGEPAGE), so
 * that filling it takes a few page faults instead of one per 4 KiB page (64 MiB: about 30-60 ms
 * of CPU instead of 220 ms on the development machine). hv_free frees it. NULL when out of
 * memory. */
void *hv_malloc_large(size_t n);

/* Keeps large message buffers in the process's heap (glibc: no mmap below 16 MiB, no trimming
 * of the heap's top below 64 MiB): a process that receives copies in 1 MiB chunks otherwise
 * gets each one from mmap, or trims it off the heap once freed, and faults it in page by page
 * at every chunk. For a daemon (hvhead, hvagent), at its start; never in libhv (the user's
 * process). */
void hv_malloc_keep_heap(void);

/* Test hook: the n-th allocation from now (1 = the next) fails; 0 disables. */
void hv_mem_fail_after(long n);

#endif
