/* copies: see copies.h. */
#include "copies.h"

#include <stdio.h>
#include <string.h>

#include "cmdtmpl.h"

const char *hv_copy_tier_name(hv_copy_tier_t t) {
    switch (t) {
    case HV_COPY_TIER_HEAD:
        return "head";
    case HV_COPY_TIER_DURABLE:
        return "durable";
    case HV_COPY_TIER_PEER:
        return "peer";
    case HV_COPY_TIER_NONE:
        break;
    }
    return "none";
}

int hv_copy_newer(const hv_copy_ref_t *a, const hv_copy_ref_t *b) {
    if (a->commit == 0) {
        return 0;
    }
    if (b->commit == 0) {
        return 1;
    }
    return a->generation > b->generation ||
           (a->generation == b->generation && a->commit > b->commit);
}

hv_copy_tier_t hv_copy_choose(const hv_copy_ref_t *head, const hv_copy_ref_t *durable) {
    int head_ok = head->commit > 0 && !head->missing;
    int durable_ok = durable->commit > 0;
    if (head_ok && (!durable_ok || !hv_copy_newer(durable, head))) {
        return HV_COPY_TIER_HEAD;
    }
    return durable_ok ? HV_COPY_TIER_DURABLE : HV_COPY_TIER_NONE;
}

int hv_durable_due(int configured, int busy, const hv_copy_ref_t *head,
                   const hv_copy_ref_t *durable, uint64_t since_ms, uint64_t interval_ms) {
    if (!configured || busy || head->commit == 0 || head->missing) {
        return 0;
    }
    if (!hv_copy_newer(head, durable)) {
        return 0; /* the durable tier already holds it (or a newer one) */
    }
    return durable->commit == 0 || since_ms >= interval_ms;
}

int hv_durable_restore_due(const hv_copy_ref_t *head, const hv_copy_ref_t *durable,
                           uint32_t resume_gen) {
    return resume_gen != 0 && hv_copy_choose(head, durable) == HV_COPY_TIER_DURABLE &&
           durable->generation < resume_gen;
}

uint64_t hv_copy_keep_free(uint64_t reserve, uint64_t fs_bytes) {
    if (fs_bytes > 0 && reserve > fs_bytes / 4) {
        reserve = fs_bytes / 4;
    }
    return reserve > UINT64_MAX / 2 ? UINT64_MAX : 2 * reserve;
}

int hv_copy_room(const hv_copy_disk_t *d, uint64_t total) {
    uint64_t have = d->free_bytes + d->replaced;
    if (have < d->free_bytes) {
        have = UINT64_MAX;
    }
    uint64_t need = d->arriving + total;
    if (need < total) {
        return 0;
    }
    return have >= need && have - need >= hv_copy_keep_free(d->reserve, d->fs_bytes);
}

int hv_copy_peer_local(const char *peer) {
    if (peer == NULL) {
        return 0;
    }
    if (strncmp(peer, "unix:", 5) == 0 || strncmp(peer, "ipv4:127.", 9) == 0 ||
        strncmp(peer, "ipv6:[::1]", 10) == 0 || strncmp(peer, "ipv6:[::ffff:127.", 17) == 0) {
        return 1;
    }
    return 0;
}

hv_err hv_durable_expand(const char *tmpl, const hv_durable_vars_t *vars, char *out, size_t outlen,
                         char *err, size_t errlen) {
    static const char *const keys[] = {"file", "key", "job", "sha256"};
    const char *vals[4] = {"", "", "", ""};
    if (vars != NULL) {
        vals[0] = vars->file ? vars->file : "";
        vals[1] = vars->key ? vars->key : "";
        vals[2] = vars->job ? vars->job : "";
        vals[3] = vars->sha256 ? vars->sha256 : "";
    }
    return hv_cmd_expand(tmpl, keys, vals, 4, HV_DURABLE_KEYS, out, outlen, err, errlen);
}

void hv_copy_label(const char *labels, const char *key, char *out, size_t outlen) {
    if (outlen == 0) {
        return;
    }
    out[0] = '\0';
    if (labels == NULL || key == NULL) {
        return;
    }
    size_t klen = strlen(key);
    const char *p = labels;
    while (*p != '\0') {
        const char *end = strchr(p, ',');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        if (len > klen && strncmp(p, key, klen) == 0 && p[klen] == '=') {
            size_t vlen = len - klen - 1;
            if (vlen < outlen) {
                memcpy(out, p + klen + 1, vlen);
                out[vlen] = '\0';
            }
            return;
        }
        if (end == NULL) {
            break;
        }
        p = end + 1;
    }
}

static int zone_other(const char *a, const char *b) {
    return a != NULL && b != NULL && a[0] != '\0' && b[0] != '\0' && strcmp(a, b) != 0;
}

/* Is a a better keeper than b (both usable, with room)? */
static int keeper_better(const hv_keeper_cand_t *a, const hv_keeper_cand_t *b,
                         const char *sender_zone) {
    int za = zone_other(a->zone, sender_zone), zb = zone_other(b->zone, sender_zone);
    if (za != zb) {
        return za;
    }
    if (a->has_member != b->has_member) {
        return !a->has_member;
    }
    if ((a->holds_bytes > 0) != (b->holds_bytes > 0)) {
        return a->holds_bytes > 0;
    }
    if (a->free_bytes != b->free_bytes) {
        return a->free_bytes > b->free_bytes;
    }
    return a->node_id < b->node_id;
}

int hv_copy_keeper_choose(const hv_keeper_cand_t *c, size_t n, uint64_t sender_node,
                          const char *sender_zone, uint64_t size) {
    int best = -1;
    for (size_t i = 0; i < n; i++) {
        const hv_keeper_cand_t *k = &c[i];
        if (!k->usable || k->node_id == 0 || k->node_id == sender_node) {
            continue;
        }
        uint64_t room = k->free_bytes + k->holds_bytes;
        if (room < k->free_bytes) {
            room = UINT64_MAX;
        }
        if (room < size) {
            continue;
        }
        if (best < 0 || keeper_better(k, &c[best], sender_zone)) {
            best = (int)i;
        }
    }
    return best;
}

const char *hv_copy_source_name(hv_copy_source_t s) {
    switch (s) {
    case HV_COPY_SOURCE_PEER:
        return "peer";
    case HV_COPY_SOURCE_HEAD:
        return "head";
    case HV_COPY_SOURCE_DURABLE:
        return "durable";
    case HV_COPY_SOURCE_NONE:
        break;
    }
    return "none";
}

hv_copy_source_t hv_copy_source_choose(const hv_copy_ref_t *peer, int keeper_ok,
                                       const hv_copy_ref_t *head, const hv_copy_ref_t *durable) {
    hv_copy_tier_t t = hv_copy_choose(head, durable);
    const hv_copy_ref_t *other = t == HV_COPY_TIER_HEAD      ? head
                                 : t == HV_COPY_TIER_DURABLE ? durable
                                                             : NULL;
    if (keeper_ok && peer->commit > 0 && (other == NULL || !hv_copy_newer(other, peer))) {
        return HV_COPY_SOURCE_PEER;
    }
    return t == HV_COPY_TIER_HEAD      ? HV_COPY_SOURCE_HEAD
           : t == HV_COPY_TIER_DURABLE ? HV_COPY_SOURCE_DURABLE
                                       : HV_COPY_SOURCE_NONE;
}
