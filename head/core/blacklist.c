/*
 * blacklist: see blacklist.h. The cooldown after strike s is min * 2^(s-1) seconds, capped at
 * max, plus a jitter of up to a quarter of it (still capped at max).
 */
#include "blacklist.h"

#include <stddef.h>
#include <stdio.h>

int hv_bl_on(const hv_bl_policy_t *p) { return p != NULL && p->cooldown_min_s > 0; }

uint64_t hv_bl_strike(hv_bl_entry_t *e, const hv_bl_policy_t *p, uint64_t now_ms, uint32_t rand32) {
    if (!hv_bl_on(p)) {
        return 0;
    }
    e->strikes++;
    if (p->max_strikes > 0 && e->strikes >= p->max_strikes) {
        e->permanent = 1;
        e->until_ms = 0;
        return 0;
    }
    uint64_t max_ms =
        (uint64_t)(p->cooldown_max_s > p->cooldown_min_s ? p->cooldown_max_s : p->cooldown_min_s) *
        1000u;
    uint64_t ms = (uint64_t)p->cooldown_min_s * 1000u;
    for (uint32_t s = 1; s < e->strikes && ms < max_ms; s++) {
        ms *= 2;
    }
    if (ms > max_ms) {
        ms = max_ms;
    }
    ms += (ms / 4) * rand32 / UINT32_MAX;
    if (ms > max_ms) {
        ms = max_ms;
    }
    e->until_ms = now_ms + ms;
    return ms;
}

int hv_bl_blocked(const hv_bl_entry_t *e, uint64_t now_ms) {
    return e->permanent || (e->strikes > 0 && now_ms < e->until_ms);
}

uint64_t hv_bl_left_ms(const hv_bl_entry_t *e, uint64_t now_ms) {
    if (e->permanent) {
        return UINT64_MAX;
    }
    return hv_bl_blocked(e, now_ms) ? e->until_ms - now_ms : 0;
}

int hv_bl_bars(const hv_bl_entry_t *e, uint64_t struck_inc, uint64_t node_inc, uint64_t now_ms) {
    return struck_inc == node_inc && hv_bl_blocked(e, now_ms);
}

hv_bl_entry_t hv_bl_of_agent(const hv_bl_entry_t *e, uint64_t struck_inc, uint64_t node_inc) {
    hv_bl_entry_t clean = {0};
    return struck_inc == node_inc ? *e : clean;
}

int hv_bl_cooldown_ended(const hv_bl_entry_t *e, uint64_t now_ms) {
    return e->strikes > 0 && !e->permanent && e->until_ms != 0 && now_ms >= e->until_ms;
}

int hv_bl_lifted(const hv_bl_entry_t *e, uint64_t struck_inc, uint64_t node_inc, uint64_t now_ms) {
    return struck_inc == node_inc && e->strikes > 0 && !e->permanent && !hv_bl_blocked(e, now_ms);
}

void hv_bl_strike_words(const hv_bl_entry_t *e, uint64_t cooldown_ms, uint64_t job_id,
                        uint64_t node_id, const char *node, const char *what, char *text,
                        size_t textlen, char *data, size_t datalen) {
    const char *name = node != NULL ? node : "?";
    if (e->permanent) {
        snprintf(text, textlen, "node %s is barred from job %llu for good after %u failures (%s)",
                 name, (unsigned long long)job_id, e->strikes, what);
    } else {
        snprintf(text, textlen, "node %s is barred from job %llu for %.1f s after failure %u (%s)",
                 name, (unsigned long long)job_id, (double)cooldown_ms / 1000.0, e->strikes, what);
    }
    snprintf(data, datalen,
             "{\"job\":%llu,\"node_id\":%llu,\"strikes\":%u,\"permanent\":%s,\"cooldown_ms\":%llu}",
             (unsigned long long)job_id, (unsigned long long)node_id, e->strikes,
             e->permanent ? "true" : "false", (unsigned long long)cooldown_ms);
}
