/*
 * hmap: see hmap.h. Keys hash through the splitmix64 finalizer (integers) or FNV-1a then the
 * same finalizer (strings); a slot's home is hash & (cap - 1).
 */
#include "hmap.h"

#include <string.h>

#include "mem.h"

#define HMAP_MIN_CAP 16

static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

static uint64_t hash_str(const char *s) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s != '\0'; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ULL;
    }
    return mix64(h);
}

void hv_hmap_init(hv_hmap_t *m) { memset(m, 0, sizeof(*m)); }

void hv_hmap_fini(hv_hmap_t *m) {
    for (size_t i = 0; i < m->cap; i++) {
        if (m->e[i].val != NULL) {
            hv_free(m->e[i].skey);
        }
    }
    hv_free(m->e);
    memset(m, 0, sizeof(*m));
}

size_t hv_hmap_count(const hv_hmap_t *m) { return m->n; }

/* The slot holding (hash, ikey or skey), or the empty slot where it would go; cap > 0. */
static size_t find(const hv_hmap_t *m, uint64_t hash, uint64_t ikey, const char *skey) {
    size_t mask = m->cap - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
        const hv_hmap_ent_t *e = &m->e[i];
        if (e->val == NULL) {
            return i;
        }
        if (e->hash == hash &&
            (skey != NULL ? e->skey != NULL && strcmp(e->skey, skey) == 0 : e->ikey == ikey)) {
            return i;
        }
    }
}

static hv_err grow(hv_hmap_t *m) {
    size_t cap = m->cap ? m->cap * 2 : HMAP_MIN_CAP;
    hv_hmap_ent_t *e = hv_calloc(cap, sizeof(*e));
    if (e == NULL) {
        return HV_ENOMEM;
    }
    hv_hmap_t bigger = {.e = e, .cap = cap, .n = m->n};
    for (size_t i = 0; i < m->cap; i++) {
        if (m->e[i].val != NULL) {
            bigger.e[find(&bigger, m->e[i].hash, m->e[i].ikey, m->e[i].skey)] = m->e[i];
        }
    }
    hv_free(m->e);
    *m = bigger;
    return HV_OK;
}

static void *get(const hv_hmap_t *m, uint64_t hash, uint64_t ikey, const char *skey) {
    return m->cap == 0 ? NULL : m->e[find(m, hash, ikey, skey)].val;
}

static hv_err put(hv_hmap_t *m, uint64_t hash, uint64_t ikey, const char *skey, void *val) {
    if (val == NULL) {
        return HV_EINVAL;
    }
    if (m->cap > 0) {
        hv_hmap_ent_t *e = &m->e[find(m, hash, ikey, skey)];
        if (e->val != NULL) {
            e->val = val;
            return HV_OK;
        }
    }
    char *copy = NULL;
    if (skey != NULL && (copy = hv_strdup(skey)) == NULL) {
        return HV_ENOMEM;
    }
    if ((m->n + 1) * 2 > m->cap && grow(m) != HV_OK) {
        hv_free(copy);
        return HV_ENOMEM;
    }
    m->e[find(m, hash, ikey, skey)] =
        (hv_hmap_ent_t){.hash = hash, .ikey = ikey, .skey = copy, .val = val};
    m->n++;
    return HV_OK;
}

/* Empties slot i and moves later entries of the same run back so that none is left behind an
 * empty slot on its probe path. */
static void *del(hv_hmap_t *m, uint64_t hash, uint64_t ikey, const char *skey) {
    if (m->cap == 0) {
        return NULL;
    }
    size_t mask = m->cap - 1, i = find(m, hash, ikey, skey);
    void *val = m->e[i].val;
    if (val == NULL) {
        return NULL;
    }
    hv_free(m->e[i].skey);
    m->e[i] = (hv_hmap_ent_t){0};
    m->n--;
    for (size_t j = (i + 1) & mask; m->e[j].val != NULL; j = (j + 1) & mask) {
        size_t home = m->e[j].hash & mask;
        /* j's entry may move to i when i lies on its path: home..j (cyclically) covers i. */
        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->e[i] = m->e[j];
            m->e[j] = (hv_hmap_ent_t){0};
            i = j;
        }
    }
    return val;
}

void *hv_hmap_get_u64(const hv_hmap_t *m, uint64_t key) { return get(m, mix64(key), key, NULL); }
hv_err hv_hmap_put_u64(hv_hmap_t *m, uint64_t key, void *val) {
    return put(m, mix64(key), key, NULL, val);
}
void *hv_hmap_del_u64(hv_hmap_t *m, uint64_t key) { return del(m, mix64(key), key, NULL); }

void *hv_hmap_get_str(const hv_hmap_t *m, const char *key) {
    return key == NULL ? NULL : get(m, hash_str(key), 0, key);
}
hv_err hv_hmap_put_str(hv_hmap_t *m, const char *key, void *val) {
    return key == NULL ? HV_EINVAL : put(m, hash_str(key), 0, key, val);
}
void *hv_hmap_del_str(hv_hmap_t *m, const char *key) {
    return key == NULL ? NULL : del(m, hash_str(key), 0, key);
}
