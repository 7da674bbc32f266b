/*
 * hmap: a small hash index from a key to a borrowed pointer, for the models looked up per
 * message (the driver's nodes, jobs and workers by id and by name). Open addressing with linear
 * probing and backward-shift deletion (no tombstones); it doubles past 1/2 full. One map holds
 * one kind of key: 64-bit integers (the _u64 calls) or strings (the _str calls; the map keeps its
 * own copy of each key). Values are never NULL (NULL means "absent"). Not thread-safe.
 */
#ifndef HV_COMMON_HMAP_H
#define HV_COMMON_HMAP_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef struct hv_hmap_ent_s {
    uint64_t hash; /* the key's hash (u64 maps: the key itself is in ikey) */
    uint64_t ikey;
    char *skey; /* string maps: the owned copy of the key */
    void *val;  /* NULL: the slot is empty */
} hv_hmap_ent_t;

typedef struct hv_hmap_s {
    hv_hmap_ent_t *e;
    size_t cap; /* 0 or a power of two */
    size_t n;
} hv_hmap_t;

void hv_hmap_init(hv_hmap_t *m);
/* Frees the table and the keys (the values are borrowed: untouched). */
void hv_hmap_fini(hv_hmap_t *m);
size_t hv_hmap_count(const hv_hmap_t *m);

/* The value under key, or NULL. */
void *hv_hmap_get_u64(const hv_hmap_t *m, uint64_t key);
/* Sets key's value (replacing any); val must not be NULL. HV_ENOMEM leaves the map unchanged. */
hv_err hv_hmap_put_u64(hv_hmap_t *m, uint64_t key, void *val);
/* Removes key; returns its value (NULL: it was absent). */
void *hv_hmap_del_u64(hv_hmap_t *m, uint64_t key);

void *hv_hmap_get_str(const hv_hmap_t *m, const char *key);
hv_err hv_hmap_put_str(hv_hmap_t *m, const char *key, void *val);
void *hv_hmap_del_str(hv_hmap_t *m, const char *key);

#endif
