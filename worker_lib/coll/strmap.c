/* strmap: see strmap.h. Linear probing, load factor <= 1/2, deletion by backward shift (no
 * tombstones), FNV-1a hashes stored in the slots so that growth does not rehash strings. */
#include "strmap.h"

#include <string.h>

#include "mem.h"

uint64_t hv__strmap_hash(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

void hv__strmap_init(hv__strmap_t *m) { memset(m, 0, sizeof(*m)); }

void hv__strmap_fini(hv__strmap_t *m) {
    hv_free(m->slots);
    memset(m, 0, sizeof(*m));
}

void hv__strmap_clear(hv__strmap_t *m) {
    if (m->slots != NULL) {
        memset(m->slots, 0, m->cap * sizeof(*m->slots));
    }
    m->len = 0;
}

static size_t find(const hv__strmap_t *m, const char *key, uint64_t h) {
    size_t mask = m->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        const hv__strmap_slot_t *s = &m->slots[i];
        if (s->key == NULL || (s->hash == h && strcmp(s->key, key) == 0)) {
            return i;
        }
    }
}

void *hv__strmap_get(const hv__strmap_t *m, const char *key) {
    if (m->len == 0) {
        return NULL;
    }
    size_t i = find(m, key, hv__strmap_hash(key));
    return m->slots[i].key != NULL ? m->slots[i].val : NULL;
}

static hv_err grow(hv__strmap_t *m) {
    size_t cap = m->cap ? m->cap * 2 : 16;
    hv__strmap_slot_t *slots = hv_calloc(cap, sizeof(*slots));
    if (slots == NULL) {
        return HV_ENOMEM;
    }
    hv__strmap_t n = {.slots = slots, .cap = cap, .len = m->len};
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slots[i].key != NULL) {
            size_t mask = cap - 1, j = m->slots[i].hash & mask;
            while (slots[j].key != NULL) {
                j = (j + 1) & mask;
            }
            slots[j] = m->slots[i];
        }
    }
    hv_free(m->slots);
    *m = n;
    return HV_OK;
}

hv_err hv__strmap_put(hv__strmap_t *m, const char *key, void *val) {
    if ((m->len + 1) * 2 > m->cap) {
        hv_err rc = grow(m);
        if (rc != HV_OK) {
            return rc;
        }
    }
    uint64_t h = hv__strmap_hash(key);
    size_t i = find(m, key, h);
    if (m->slots[i].key == NULL) {
        m->len++;
    }
    m->slots[i] = (hv__strmap_slot_t){.key = key, .hash = h, .val = val};
    return HV_OK;
}

void hv__strmap_del(hv__strmap_t *m, const char *key) {
    if (m->len == 0) {
        return;
    }
    size_t mask = m->cap - 1;
    size_t i = find(m, key, hv__strmap_hash(key));
    if (m->slots[i].key == NULL) {
        return;
    }
    m->slots[i].key = NULL;
    m->len--;
    // Backward shift: move later members of the cluster into the hole when that brings them no
    // further from their home slot.
    for (size_t j = (i + 1) & mask; m->slots[j].key != NULL; j = (j + 1) & mask) {
        size_t home = m->slots[j].hash & mask;
        // Move j to i if home is not cyclically in (i, j].
        int in_range = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!in_range) {
            m->slots[i] = m->slots[j];
            m->slots[j].key = NULL;
            i = j;
        }
    }
}
