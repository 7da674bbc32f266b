/*
 * strmap: a small open-addressing hash map from NUL-terminated strings to pointers, used by the
 * engine for tensor names (pending requests, the response cache). Keys are borrowed: the caller
 * keeps each key alive while it is in the map (it usually lives in the value). Not thread-safe;
 * each map has one owner. Not a general container: no iteration order guarantees.
 */
#ifndef HV_WORKER_LIB_STRMAP_H
#define HV_WORKER_LIB_STRMAP_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef struct hv__strmap_slot_s {
    const char *key; // NULL = empty
    uint64_t hash;
    void *val;
} hv__strmap_slot_t;

typedef struct hv__strmap_s {
    hv__strmap_slot_t *slots; // owned; cap entries (a power of two) or NULL
    size_t cap;
    size_t len;
} hv__strmap_t;

void hv__strmap_init(hv__strmap_t *m);
void hv__strmap_fini(hv__strmap_t *m);
/* The value for key, or NULL. */
void *hv__strmap_get(const hv__strmap_t *m, const char *key);
/* Inserts or replaces. HV_ENOMEM when growing fails (the map is unchanged). */
hv_err hv__strmap_put(hv__strmap_t *m, const char *key, void *val);
/* Removes key if present. */
void hv__strmap_del(hv__strmap_t *m, const char *key);
/* Removes everything (keeps the storage). */
void hv__strmap_clear(hv__strmap_t *m);

uint64_t hv__strmap_hash(const char *s);

#endif
