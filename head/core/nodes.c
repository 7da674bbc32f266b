/* nodes: see nodes.h. */
#include "nodes.h"

#include <string.h>

static const char *const node_names[HV_NODE__COUNT] = {"alive", "draining", "dead"};

hv_node_state_t hv_node_next(hv_node_state_t st, hv_node_event_t ev) {
    switch (ev) {
    case HV_NODE_EV_JOIN_NEW:
        return HV_NODE_ALIVE;
    case HV_NODE_EV_REATTACH:
        return st == HV_NODE_DEAD ? HV_NODE_ALIVE : st;
    case HV_NODE_EV_DRAIN:
        return st == HV_NODE_DEAD ? HV_NODE_DEAD : HV_NODE_DRAINING;
    case HV_NODE_EV_UNDRAIN:
        return st == HV_NODE_DRAINING ? HV_NODE_ALIVE : st;
    case HV_NODE_EV_EXPIRED:
        return HV_NODE_DEAD;
    }
    return st;
}

int hv_node_hidden(hv_node_state_t st, int retired) { return retired && st != HV_NODE_ALIVE; }

const char *hv_node_state_name(hv_node_state_t st) {
    return st < HV_NODE__COUNT ? node_names[st] : "?";
}

hv_err hv_node_state_parse(const char *s, hv_node_state_t *out) {
    for (int i = 0; s != NULL && i < HV_NODE__COUNT; i++) {
        if (strcmp(s, node_names[i]) == 0) {
            *out = (hv_node_state_t)i;
            return HV_OK;
        }
    }
    return HV_EINVAL;
}

void hv_lease_renew(hv_lease_t *l, uint64_t now_ms, uint32_t lease_ms) {
    l->deadline_ms = now_ms + lease_ms;
    l->suspect_ms = 0;
}

int hv_lease_expired(const hv_lease_t *l, uint64_t now_ms) { return now_ms > l->deadline_ms; }

uint64_t hv_lease_silent_ms(const hv_lease_t *l, uint64_t now_ms, uint32_t lease_ms) {
    uint64_t since = l->deadline_ms >= lease_ms ? l->deadline_ms - lease_ms : 0;
    return now_ms > since ? now_ms - since : 0;
}

int hv_lease_suspect(hv_lease_t *l, uint64_t now_ms) {
    if (l->suspect_ms != 0) {
        return 0;
    }
    l->suspect_ms = now_ms != 0 ? now_ms : 1;
    return 1;
}

uint64_t hv_lease_waive_at(const hv_lease_t *l, uint32_t grace_ms) {
    if (l->suspect_ms == 0) {
        return 0;
    }
    uint64_t at = l->suspect_ms + grace_ms;
    return at < l->deadline_ms ? at : l->deadline_ms;
}

void hv_node_claim(hv_node_acct_t *a, int gpu) {
    a->slots_used++;
    if (gpu >= 0 && gpu < 64) {
        a->gpus_used_mask |= 1ull << gpu;
    }
}

void hv_node_release(hv_node_acct_t *a, int gpu) {
    if (a->slots_used > 0) {
        a->slots_used--;
    }
    if (gpu >= 0 && gpu < 64) {
        a->gpus_used_mask &= ~(1ull << gpu);
    }
}

void hv_node_reset(hv_node_acct_t *a) {
    a->slots_used = 0;
    a->gpus_used_mask = 0;
}

hv_join_kind_t hv_node_join_kind(int known, uint64_t known_incarnation, uint64_t incarnation,
                                 hv_node_state_t st, int has_session, int lease_expired) {
    if (!known) {
        return HV_JOIN_FIRST;
    }
    if (known_incarnation == incarnation) {
        return HV_JOIN_SAME;
    }
    if (st != HV_NODE_DEAD && has_session && !lease_expired) {
        return HV_JOIN_REFUSE;
    }
    return HV_JOIN_TAKEOVER;
}

hv_err hv_node_drain_to(hv_node_state_t st, int drain, hv_node_state_t *out) {
    if (!drain && st != HV_NODE_DRAINING) {
        return HV_ESTATE;
    }
    *out = hv_node_next(st, drain ? HV_NODE_EV_DRAIN : HV_NODE_EV_UNDRAIN);
    return HV_OK;
}

int hv_node_suspect(hv_node_state_t st, hv_lease_t *l, uint64_t now_ms, uint64_t since_ms,
                    uint32_t grace_ms, uint64_t *wait_ms, uint64_t *left_ms) {
    if (since_ms > now_ms) {
        since_ms = now_ms;
    }
    if (st == HV_NODE_DEAD || !hv_lease_suspect(l, since_ms)) {
        return 0;
    }
    uint64_t waive = hv_lease_waive_at(l, grace_ms);
    *wait_ms = waive > now_ms ? waive - now_ms : 0;
    *left_ms = l->deadline_ms > now_ms ? l->deadline_ms - now_ms : 0;
    return 1;
}

hv_node_due_t hv_node_due(hv_node_state_t st, const hv_lease_t *l, uint64_t now_ms,
                          uint64_t last_seen_ms, uint64_t persisted_seen_ms,
                          uint64_t seen_every_ms) {
    if (st == HV_NODE_DEAD) {
        return HV_NODE_DUE_NONE;
    }
    if (hv_lease_expired(l, now_ms)) {
        return HV_NODE_DUE_DEAD;
    }
    return last_seen_ms > persisted_seen_ms + seen_every_ms ? HV_NODE_DUE_SEEN : HV_NODE_DUE_NONE;
}

hv_node_recon_t hv_node_reconcile(int listed, int live_here, int job_active, int kill_sent) {
    if (!listed) {
        return live_here ? HV_RECON_LOST : HV_RECON_KEEP;
    }
    if (!live_here || !job_active) {
        return HV_RECON_KILL;
    }
    return kill_sent ? HV_RECON_KILL_AGAIN : HV_RECON_KEEP;
}

hv_node_state_t hv_node_join_state(hv_join_kind_t kind, hv_node_state_t st) {
    switch (kind) {
    case HV_JOIN_FIRST:
    case HV_JOIN_TAKEOVER:
        return hv_node_next(HV_NODE_ALIVE, HV_NODE_EV_JOIN_NEW);
    case HV_JOIN_SAME:
        return hv_node_next(st, HV_NODE_EV_REATTACH);
    case HV_JOIN_REFUSE:
        break;
    }
    return st;
}

int hv_node_takes_work(hv_node_state_t st, int has_session) {
    return st == HV_NODE_ALIVE && has_session;
}

int hv_node_drain_after_restart(hv_node_state_t st, uint64_t *hold_until) {
    *hold_until = 0;
    return st == HV_NODE_DRAINING;
}
