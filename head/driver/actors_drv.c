/*
 * actors_drv: the head's actors, around the pure machine (actors.h). Each input copies the
 * actor, lets the machine decide, stores the row (a failed write puts the copy back and nothing
 * is acted on), then carries out the orders: spawn and kill down the node's Session, slots given
 * back, an event appended ("actor.<state>"). See actors_drv.h.
 */
#include "actors_drv.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "joblog.h"
#include "log.h"
#include "mem.h"
#include "nodes.h"
#include "sched.h"
#include "store.h"
#include "util.h"

#define ACTORS_MAX_NODES 4096 /* nodes looked at for one placement */
/* A restart after a failure waits 250 ms, doubling with each restart up to 16 s, so a program
 * that cannot start does not use up its restarts in a second; one that ran a minute or more
 * before failing waits the least again. */
#define ACTORS_BACKOFF_MIN_MS 250u
#define ACTORS_BACKOFF_MAX_MS 16000u
#define ACTORS_HEALTHY_MS 60000u

struct hv_actors_s {
    hv_driver_t *d;     /* borrowed */
    hv_store_t *store;  /* borrowed */
    hv_dactor_t *head;  /* by id */
    hv_dactor_t **tail; /* where the next one goes */
    uint64_t next_id;
    int placing; /* re-entry guard: hv_driver_schedule calls back into the schedule hook */
};

static void set_str(char **dst, const char *src) {
    char *copy = hv_strdup(src != NULL ? src : "");
    if (copy != NULL) {
        hv_free(*dst);
        *dst = copy;
    }
}

static void actor_free(hv_dactor_t *x) {
    if (x->log_open) {
        hv_joblog_close(x->log);
    }
    hv_free(x->log);
    hv_free(x->name);
    hv_free(x->ns);
    hv_free(x->class_name);
    hv_free(x->spec);
    hv_free(x->reason);
    hv_free(x->address);
    hv_free(x->labels);
    hv_free(x->wait_why);
    hv_free(x->note);
    hv_free(x);
}

static hv_err record(hv_actors_t *a, const hv_dactor_t *x) {
    hv_actor_row_t r = {.id = x->am.id,
                        .name = x->name,
                        .ns = x->ns,
                        .class_name = x->class_name,
                        .spec = x->spec,
                        .spec_len = x->spec_len,
                        .reason = x->reason,
                        .max_restarts = x->am.max_restarts,
                        .max_call_retries = x->max_call_retries,
                        .restarts = x->am.restarts,
                        .moves = x->am.moves,
                        .incarnation = x->am.incarnation,
                        .slots = x->slots,
                        .gpus = x->gpus,
                        .gpu_mask = x->gpu_mask,
                        .node_id = x->am.node_id,
                        .owner_job = x->am.owner_job,
                        .proc_live = x->am.proc_live,
                        .kill_sent = x->am.kill_sent,
                        .last_status = x->am.last_status,
                        .last_signal = x->am.last_signal,
                        .address = x->address,
                        .created_ms = x->created_ms,
                        .started_ms = x->started_ms,
                        .ended_ms = x->ended_ms,
                        .next_node = x->am.next_node,
                        .next_gpu_mask = x->next_gpu_mask,
                        .has_state = x->am.has_state,
                        .state_size = x->state_size,
                        .labels = x->labels,
                        .memory_mb = x->memory_mb};
    snprintf(r.state_digest, sizeof(r.state_digest), "%s", x->state_digest);
    snprintf(r.state, sizeof(r.state), "%s", hv_am_state_name(x->am.state));
    snprintf(r.cause, sizeof(r.cause), "%s", hv_am_cause_name(x->am.cause));
    hv_err rc = hv_store_actor_put(a->store, &r);
    if (rc != HV_OK) {
        HV_LOG(HV_LOG_ERROR, "actors", "HV-STORE-WRITE",
               "cannot store actor %" PRIu64 " in %s: %s; the change is not acted on", x->am.id,
               hv_store_path(a->store), hv_store_last_error(a->store));
    }
    return rc;
}

/* The i-th GPU of mask (-1 when it has fewer). */
static int mask_gpu(uint64_t mask, uint32_t i) {
    for (int g = 0; g < 64; g++) {
        if ((mask >> g) & 1u) {
            if (i-- == 0) {
                return g;
            }
        }
    }
    return -1;
}

static void take_slots(hv_actors_t *a, uint64_t node_id, uint32_t slots, uint64_t mask,
                       int give_back) {
    for (uint32_t i = 0; i < slots; i++) {
        hv_driver_node_take(a->d, node_id, mask_gpu(mask, i), give_back);
    }
}

static void send_spawn(hv_actors_t *a, hv_dactor_t *x, uint64_t node_id, uint32_t inc,
                       int with_state) {
    hv_order_t o = {.kind = HV_ORDER_SPAWN,
                    .state_digest =
                        with_state && x->state_digest[0] != '\0' ? x->state_digest : NULL,
                    .state_size = x->state_size,
                    .worker_id = hv_am_proc_id(x->am.id, inc),
                    .size = 1,
                    .local_size = 1,
                    .gpu = mask_gpu(x->gpu_mask, 0),
                    .spec = x->spec,
                    .spec_len = x->spec_len,
                    .actor_id = x->am.id};
    hv_err rc = hv_driver_order(a->d, node_id, &o);
    if (rc != HV_OK) {
        /* The node lost its session meanwhile: its agent's hello (or its loss) tells later. */
        HV_LOG(HV_LOG_WARN, "actors", "HV-ACTOR-ORDER",
               "actor %" PRIu64 ": the spawn order did not reach node %" PRIu64 ": %s", x->am.id,
               node_id, hv_strerror(rc));
    }
}

static void send_kill(hv_actors_t *a, uint64_t node_id, uint64_t proc, const char *why) {
    hv_order_t o = {.kind = HV_ORDER_KILL,
                    .worker_id = proc,
                    .grace_ms = hv_driver_kill_grace_ms(a->d),
                    .reason = why};
    (void)hv_driver_order(a->d, node_id, &o);
}

static const char *who(const hv_dactor_t *x, char *buf, size_t len) {
    if (x->name[0] != '\0') {
        snprintf(buf, len, "actor %" PRIu64 " (%s/%s)", x->am.id, x->ns, x->name);
    } else {
        snprintf(buf, len, "actor %" PRIu64, x->am.id);
    }
    return buf;
}

/* s as the inside of a JSON string into buf (cut to fit, never mid-escape). */
static void json_inner(const char *s, char *buf, size_t len) {
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        char e[8];
        int n = *p == '"' || *p == '\\' ? snprintf(e, sizeof(e), "\\%c", *p)
                : *p < 0x20             ? snprintf(e, sizeof(e), "\\u%04x", *p)
                                        : snprintf(e, sizeof(e), "%c", *p);
        if (n < 0 || o + (size_t)n >= len) {
            break;
        }
        memcpy(buf + o, e, (size_t)n);
        o += (size_t)n;
    }
    buf[o] = '\0';
}

/* An actor event's data (docs/internals.md, actor.*): who, its state and counts after the
 * input, the step it took (hv_am_step) and the announcement's words. */
static void event_data(const hv_dactor_t *x, const char *step, const char *text, char *buf,
                       size_t len) {
    char words[600]; /* text is at most 255 bytes: 6 per byte escaped would not fit, cut */
    json_inner(text, words, sizeof(words));
    int n = snprintf(buf, len,
                     "{\"actor_id\":%" PRIu64 ",\"namespace\":\"%s\",\"name\":\"%s\","
                     "\"state\":\"%s\",\"cause\":\"%s\",\"restarts\":%u,\"moves\":%u,"
                     "\"step\":\"%s\",\"reason\":\"%s\"}",
                     x->am.id, x->ns, x->name, hv_am_state_name(x->am.state),
                     hv_am_cause_name(x->am.cause), x->am.restarts, x->am.moves, step, words);
    if (n < 0 || (size_t)n >= len) {
        snprintf(buf, len, "{\"actor_id\":%" PRIu64 "}", x->am.id); /* cannot happen: sized */
    }
}

/* Carries out out for x, whose state before the input was prev: store first; on failure x is
 * put back and nothing else happens (HV_EUNAVAIL). */
static void log_died(hv_actors_t *a, hv_dactor_t *x);

static hv_err run(hv_actors_t *a, hv_dactor_t *x, const hv_am_actor_t *prev,
                  const hv_am_out_t *out) {
    /* What the row says after the input: which GPUs each slot holds (a spawn onto the reserved
     * slot takes its GPUs; a released one gives them back), and the saved state (the one the
     * ending process just saved, once the machine took it; none once loaded or dropped). The
     * acts below use the masks as they were. */
    uint64_t mask = x->gpu_mask, next_mask = x->next_gpu_mask;
    char old_digest[65];
    uint64_t old_size = x->state_size;
    snprintf(old_digest, sizeof(old_digest), "%s", x->state_digest);
    for (size_t i = 0; i < out->n; i++) {
        const hv_am_act_t *c = &out->acts[i];
        if (c->kind == HV_AM_ACT_SPAWN && c->reserved) {
            x->gpu_mask = next_mask;
            x->next_gpu_mask = 0;
        } else if (c->kind == HV_AM_ACT_RELEASE && c->reserved) {
            x->next_gpu_mask = 0;
        } else if (c->kind == HV_AM_ACT_RELEASE) {
            x->gpu_mask = 0;
        }
    }
    if (x->am.has_state && !prev->has_state && x->saved_digest[0] != '\0') {
        snprintf(x->state_digest, sizeof(x->state_digest), "%s", x->saved_digest);
        x->state_size = x->saved_size;
    } else if (!x->am.has_state) {
        x->state_digest[0] = '\0'; /* loaded (or dropped): the artifact may be collected */
        x->state_size = 0;
    }
    if (out->n > 0 && out->acts[0].kind == HV_AM_ACT_RECORD) {
        char *old_reason = x->reason;
        uint64_t old_ended = x->ended_ms;
        if (out->text[0] != '\0') {
            x->reason = hv_strdup(out->text);
            if (x->reason == NULL) {
                x->reason = old_reason;
                old_reason = NULL;
            }
        } else {
            old_reason = NULL; /* unchanged */
        }
        if (x->am.state == HV_AM_DEAD && prev->state != HV_AM_DEAD) {
            x->ended_ms = hv_wall_ms();
        }
        if (record(a, x) != HV_OK) {
            /* Put everything back: memory stays what the store holds. */
            x->am = *prev;
            x->gpu_mask = mask;
            x->next_gpu_mask = next_mask;
            snprintf(x->state_digest, sizeof(x->state_digest), "%s", old_digest);
            x->state_size = old_size;
            x->ended_ms = old_ended;
            if (old_reason != NULL) {
                hv_free(x->reason);
                x->reason = old_reason;
            }
            return HV_EUNAVAIL;
        }
        hv_free(old_reason);
    }
    char name[128];
    for (size_t i = 0; i < out->n; i++) {
        const hv_am_act_t *c = &out->acts[i];
        switch (c->kind) {
        case HV_AM_ACT_RECORD:
            break;
        case HV_AM_ACT_SPAWN:
            send_spawn(a, x, c->node_id, c->incarnation, c->with_state);
            break;
        case HV_AM_ACT_RESERVE:
            break; /* the slots were taken at placement (place_all), before the row was stored */
        case HV_AM_ACT_KILL:
            send_kill(a, c->node_id, hv_am_proc_id(x->am.id, c->incarnation), x->reason);
            break;
        case HV_AM_ACT_RELEASE:
            take_slots(a, c->node_id, x->slots, c->reserved ? next_mask : mask, 1);
            if (!c->reserved) {
                set_str(&x->address, "");
            }
            break;
        case HV_AM_ACT_ANNOUNCE: {
            char kind[32], data[1024];
            snprintf(kind, sizeof(kind), "actor.%s", hv_am_state_name(x->am.state));
            event_data(x, hv_am_step(prev, &x->am), out->text, data, sizeof(data));
            hv_ev_fields_t f = {.actor_id = x->am.id};
            hv_driver_event_f(a->d, 0, x->am.node_id, kind, &f, data, "%s: %s",
                              who(x, name, sizeof(name)), out->text);
            break;
        }
        }
    }
    if (x->am.state == HV_AM_DEAD && prev->state != HV_AM_DEAD) {
        log_died(a, x);
    }
    return HV_OK;
}

/* ---- output logs ------------------------------------------------------------------------------ */

/* Removes the log files of the dead actors beyond the HV_ACTORS_DEAD_LOGS_KEPT that died last. */
static void logs_prune(hv_actors_t *a) {
    for (;;) {
        size_t kept = 0;
        hv_dactor_t *oldest = NULL;
        for (hv_dactor_t *x = a->head; x != NULL; x = x->next) {
            if (x->am.state == HV_AM_DEAD && !x->log_gone) {
                kept++;
                if (oldest == NULL || x->ended_ms < oldest->ended_ms) {
                    oldest = x;
                }
            }
        }
        if (kept <= HV_ACTORS_DEAD_LOGS_KEPT) {
            return;
        }
        char path[4096];
        hv_joblog_actor_path(hv_driver_joblogs(a->d), oldest->am.id, path, sizeof(path));
        if (oldest->log_open) {
            hv_joblog_close(oldest->log);
            oldest->log_open = 0;
        }
        if (unlink(path) != 0 && errno != ENOENT) {
            HV_LOG(HV_LOG_WARN, "actors", "HV-ACTOR-LOG", "cannot remove %s: %s", path,
                   strerror(errno));
        }
        oldest->log_gone = 1;
    }
}

/* An actor died: its log is closed (kept among the last dead ones'). */
static void log_died(hv_actors_t *a, hv_dactor_t *x) {
    if (x->log_open) {
        hv_joblog_close(x->log);
        x->log_open = 0;
    }
    logs_prune(a);
}

hv_err hv_actors_log_read(hv_actors_t *a, const hv_dactor_t *x, uint64_t offset, size_t max_lines,
                          size_t max_bytes, hv_joblog_page_t *out) {
    char path[4096];
    hv_joblog_actor_path(hv_driver_joblogs(a->d), x->am.id, path, sizeof(path));
    if (x->log_gone) {
        memset(out, 0, sizeof(*out));
        out->next_offset = offset;
        return HV_OK;
    }
    return hv_joblog_read_page(path, offset, max_lines, max_bytes, out);
}

void hv_actors_log_page_free(hv_joblog_page_t *p) { hv_joblog_page_free(p); }

/* ---- placement ------------------------------------------------------------------------------- */

/* Finds a node for x with hv_sched_place: all of its slots on one node. 1 and the node's index
 * and GPUs when found. */
static int find_node(hv_actors_t *a, const hv_dactor_t *x, hv_sched_node_t *nodes, size_t n,
                     size_t *at, uint64_t *mask) {
    hv_sched_slot_t slots[64];
    hv_sched_req_t req = {.np = x->slots, .slots_per_host = x->slots};
    (void)a;
    if (x->slots == 0 || x->slots > 64 || n == 0) {
        return 0;
    }
    /* The whole cluster first (the scheduler's preference: the fullest fit); a split over nodes
     * is refused, then each node alone. */
    for (size_t k = 0; k <= n; k++) {
        const hv_sched_node_t *base = k == 0 ? nodes : &nodes[k - 1];
        size_t cnt = k == 0 ? n : 1;
        if (hv_sched_place(base, cnt, &req, slots) != HV_OK) {
            continue;
        }
        int one = 1;
        for (uint32_t i = 1; i < x->slots; i++) {
            one &= slots[i].node == slots[0].node;
        }
        if (!one) {
            continue;
        }
        *at = (size_t)(base - nodes) + slots[0].node;
        *mask = 0;
        for (uint32_t i = 0; i < x->slots; i++) {
            if (slots[i].gpu >= 0) {
                *mask |= 1ULL << slots[i].gpu;
            }
        }
        return 1;
    }
    return 0;
}

/* After a failure that restarts x: when it may be placed again. */
static void backoff(hv_dactor_t *x) {
    if (x->am.state != HV_AM_RESTARTING || x->am.proc_live) {
        return;
    }
    uint64_t ms = ACTORS_BACKOFF_MIN_MS;
    int healthy = x->started_ms != 0 && hv_wall_ms() > x->started_ms + ACTORS_HEALTHY_MS;
    for (uint32_t i = 1; !healthy && i < x->am.restarts && ms < ACTORS_BACKOFF_MAX_MS; i++) {
        ms *= 2;
    }
    x->place_after = hv_now_ms() + (ms < ACTORS_BACKOFF_MAX_MS ? ms : ACTORS_BACKOFF_MAX_MS);
}

static hv_dactor_t *find(const hv_actors_t *a, uint64_t id);

uint64_t hv_actors_node_memory(const hv_actors_t *a, uint64_t node_id) {
    uint64_t sum = 0;
    for (const hv_dactor_t *x = a->head; x != NULL; x = x->next) {
        if (x->am.proc_live && x->am.node_id == node_id) {
            sum += x->memory_mb;
        }
    }
    return sum;
}

int hv_actors_waiting(const hv_dactor_t *x, uint64_t now_ms) {
    return hv_am_is_demand(&x->am, x->wait_why != NULL, now_ms < x->place_after);
}

/* reason = the placement's words, then the autoscaler's. */
static void compose_reason(hv_dactor_t *x) {
    if (x->wait_why == NULL) {
        return;
    }
    char why[800];
    snprintf(why, sizeof(why), "%s%s%s", x->wait_why,
             x->note != NULL && x->note[0] != '\0' ? "; " : "", x->note != NULL ? x->note : "");
    if (x->reason == NULL || strcmp(x->reason, why) != 0) {
        set_str(&x->reason, why);
    }
}

void hv_actors_set_note(hv_actors_t *a, uint64_t id, const char *note) {
    hv_dactor_t *x = a != NULL ? find(a, id) : NULL;
    if (x == NULL || !hv_am_wants_place(&x->am)) {
        return;
    }
    set_str(&x->note, note);
    compose_reason(x);
}

int hv_actors_unplaceable(const hv_dactor_t *x) {
    return hv_am_wants_place(&x->am) && x->never_fits;
}

/* The demand's words for a reason: "3 free slots, GPUs, 512 MiB of free memory and labels
 * zone=b". */
static void demand_words(const hv_dactor_t *x, char *buf, size_t len) {
    int w = snprintf(buf, len, "%u free slot%s%s", x->slots, x->slots == 1 ? "" : "s",
                     x->gpus > 0 ? " with GPUs" : "");
    size_t used = w > 0 && (size_t)w < len ? (size_t)w : len - 1;
    if (x->memory_mb > 0 && used + 1 < len) {
        w = snprintf(buf + used, len - used, ", %" PRIu64 " MiB of free memory", x->memory_mb);
        used += w > 0 && (size_t)w < len - used ? (size_t)w : len - used - 1;
    }
    if (x->labels != NULL && x->labels[0] != '\0' && used + 1 < len) {
        snprintf(buf + used, len - used, ", labels %.200s", x->labels);
    }
}

static void place_all(hv_actors_t *a) {
    static hv_sched_node_t nodes[ACTORS_MAX_NODES];
    static uint64_t ids[ACTORS_MAX_NODES];
    int any = 0;
    for (hv_dactor_t *x = a->head; x != NULL; x = x->next) {
        any |= hv_am_wants_place(&x->am);
    }
    if (!any) {
        return;
    }
    for (hv_dactor_t *x = a->head; x != NULL; x = x->next) {
        if (!hv_am_wants_place(&x->am) || hv_now_ms() < x->place_after) {
            continue; /* placed, or waits out its backoff (the driver's tick schedules again) */
        }
        if (x->notice_deadline != 0 && hv_now_ms() >= x->notice_deadline) {
            /* The notice runs out with no slot found: save now, place the state later. */
            hv_am_actor_t prev = x->am;
            hv_am_out_t out;
            x->notice_deadline = 0;
            if (hv_am_notice_expired(&x->am, &out) == HV_OK) {
                (void)run(a, x, &prev, &out);
            }
        }
        /* The nodes that could hold it now (hv_sched_fit); find_node picks among them. The
         * others count for the reason: could one hold it once what runs there ends? */
        hv_sched_demand_t dem = {
            .slots = x->slots, .gpus = x->gpus, .memory_mb = x->memory_mb, .labels = x->labels};
        size_t n = 0, takes = 0, later = 0;
        const char *never_why = NULL;
        for (const hv_dnode_t *nd = hv_driver_nodes(a->d); nd != NULL && n < ACTORS_MAX_NODES;
             nd = nd->next) {
            if (!hv_node_takes_work(nd->state, nd->has_session)) {
                continue;
            }
            takes++;
            hv_sched_node_t sn = {.id = nd->id,
                                  .slots_total = nd->acct.slots,
                                  .slots_used = nd->acct.slots_used,
                                  .gpus = nd->acct.gpus,
                                  .gpus_used_mask = nd->acct.gpus_used_mask,
                                  .schedulable = 1,
                                  .labels = nd->labels,
                                  .memory_mb = nd->memory_mb,
                                  .mem_used_mb =
                                      x->memory_mb > 0 ? hv_actors_node_memory(a, nd->id) : 0};
            const char *why = NULL;
            hv_sched_fit_t fit = hv_sched_fit(&sn, &dem, &why);
            if (fit == HV_SCHED_FIT_NEVER) {
                never_why = why;
                continue; /* a GPU actor goes to GPU nodes, a CPU actor leaves them free */
            }
            later += fit == HV_SCHED_FIT_LATER;
            if (fit == HV_SCHED_FIT_NOW) {
                nodes[n] = sn;
                ids[n++] = nd->id;
            }
        }
        size_t at;
        uint64_t mask;
        if (!find_node(a, x, nodes, n, &at, &mask)) {
            /* It waits; the next schedule tries again. Why, for hvctl status and hvctl actor
             * (kept in memory; stored with the next change). */
            char dw[300], why[640];
            demand_words(x, dw, sizeof(dw));
            x->never_fits = n == 0 && later == 0;
            if (x->never_fits) {
                snprintf(why, sizeof(why),
                         "no node can ever hold it: none of the %zu nodes that take work has "
                         "%s%s%s%s",
                         takes, dw, never_why != NULL ? " (missing: " : "",
                         never_why != NULL ? never_why : "", never_why != NULL ? ")" : "");
            } else {
                snprintf(why, sizeof(why),
                         "waiting for a node with %s (%zu of %zu nodes that take work could "
                         "hold it once what runs there ends)",
                         dw, n + later, takes);
            }
            if (x->wait_why == NULL || strcmp(x->wait_why, why) != 0) {
                set_str(&x->wait_why, why);
            }
            compose_reason(x);
            continue;
        }
        x->never_fits = 0;
        hv_free(x->wait_why);
        hv_free(x->note);
        x->wait_why = x->note = NULL;
        hv_am_actor_t prev = x->am;
        hv_am_out_t out;
        if (hv_am_placed(&x->am, ids[at], &out) != HV_OK) {
            continue;
        }
        int reserve = x->am.next_node == ids[at]; /* a move's slot, the old process still there */
        uint64_t old_mask = reserve ? x->next_gpu_mask : x->gpu_mask;
        if (reserve) {
            x->next_gpu_mask = mask;
        } else {
            x->gpu_mask = mask;
        }
        take_slots(a, ids[at], x->slots, mask, 0);
        if (run(a, x, &prev, &out) != HV_OK) {
            take_slots(a, ids[at], x->slots, mask, 1);
            if (reserve) {
                x->next_gpu_mask = old_mask;
            } else {
                x->gpu_mask = old_mask;
            }
        } else if (reserve) {
            x->notice_deadline = 0;
        }
    }
}

/* ---- the driver's hooks ---------------------------------------------------------------------- */

static hv_dactor_t *find(const hv_actors_t *a, uint64_t id) {
    for (hv_dactor_t *x = a->head; x != NULL; x = x->next) {
        if (x->am.id == id) {
            return x;
        }
    }
    return NULL;
}

static void hook_started(void *ud, uint64_t node_id, uint64_t proc, int pid, const char *address) {
    hv_actors_t *a = ud;
    hv_dactor_t *x = find(a, hv_am_proc_actor(proc));
    (void)pid;
    if (x == NULL || address == NULL || address[0] == '\0' || x->am.node_id != node_id) {
        return; /* the first report (no address yet), or not ours */
    }
    hv_am_actor_t prev = x->am;
    hv_am_out_t out;
    if (hv_am_started(&x->am, hv_am_proc_inc(proc), &out) != HV_OK) {
        return;
    }
    char *old = x->address;
    x->address = NULL;
    set_str(&x->address, address);
    uint64_t old_started = x->started_ms;
    x->started_ms = hv_wall_ms();
    if (run(a, x, &prev, &out) != HV_OK) {
        hv_free(x->address);
        x->address = old;
        x->started_ms = old_started;
        return;
    }
    hv_free(old);
}

static void exited(hv_actors_t *a, hv_dactor_t *x, uint32_t inc, int code, int sig,
                   const char *why) {
    hv_am_actor_t prev = x->am;
    hv_am_out_t out;
    hv_am_exit_t e = {
        .status = sig != 0 ? -1 : code,
        .signal = sig,
        .why = why,
        .state_saved = x->saved_digest[0] != '\0' && inc == x->am.incarnation,
        .state_why = x->saved_why[0] != '\0' && inc == x->am.incarnation ? x->saved_why : NULL};
    if (hv_am_exited(&x->am, inc, &e, &out) == HV_OK && run(a, x, &prev, &out) == HV_OK &&
        prev.state != HV_AM_RESTARTING && prev.state != HV_AM_MOVING) {
        backoff(x); /* a failure (not the end of a process it stopped itself) */
    }
    x->saved_digest[0] = '\0';
    x->saved_size = 0;
    x->saved_why[0] = '\0';
}

static void hook_exited(void *ud, uint64_t node_id, uint64_t proc, int code, int sig,
                        const char *reason) {
    hv_actors_t *a = ud;
    hv_dactor_t *x = find(a, hv_am_proc_actor(proc));
    if (x == NULL || x->am.node_id != node_id) {
        return;
    }
    if (reason != NULL && reason[0] != '\0') {
        char name[128];
        HV_LOG(HV_LOG_WARN, "actors", "HV-ACTOR-EXIT", "%s: process %u on node %" PRIu64 ": %s",
               who(x, name, sizeof(name)), hv_am_proc_inc(proc), node_id, reason);
    }
    exited(a, x, hv_am_proc_inc(proc), code, sig, reason);
    hv_driver_schedule(a->d);
}

static void hook_reconcile(void *ud, uint64_t node_id, const uint64_t *procs, size_t n) {
    hv_actors_t *a = ud;
    for (hv_dactor_t *x = a->head; x != NULL; x = x->next) {
        if (!x->am.proc_live || x->am.node_id != node_id) {
            continue;
        }
        uint64_t mine = hv_am_proc_id(x->am.id, x->am.incarnation);
        int listed = 0;
        for (size_t k = 0; k < n; k++) {
            listed |= procs[k] == mine;
        }
        if (!listed) { /* it ended while the head or the agent was away */
            exited(a, x, x->am.incarnation, -1, 0, "it was not running when its agent reconnected");
        }
    }
    for (size_t k = 0; k < n; k++) {
        if (!hv_am_proc_is(procs[k])) {
            continue;
        }
        hv_dactor_t *x = find(a, hv_am_proc_actor(procs[k]));
        int wanted = x != NULL && x->am.proc_live && x->am.node_id == node_id &&
                     x->am.incarnation == hv_am_proc_inc(procs[k]);
        if (!wanted || x->am.kill_sent) {
            send_kill(a, node_id, procs[k], "the head no longer expects this actor process");
        }
    }
}

static void hook_node_lost(void *ud, uint64_t node_id) {
    hv_actors_t *a = ud;
    for (hv_dactor_t *x = a->head; x != NULL; x = x->next) {
        hv_am_actor_t prev = x->am;
        hv_am_out_t out;
        if (hv_am_node_lost(&x->am, node_id, &out) == HV_OK && run(a, x, &prev, &out) == HV_OK &&
            prev.state != HV_AM_RESTARTING) {
            backoff(x);
        }
    }
}

/* The time a moving actor's process gets to answer its calls and save within a notice of
 * notice_ms: the kill grace and a second for the exit report come off. */
static uint64_t notice_deadline(hv_actors_t *a, uint32_t notice_ms) {
    uint64_t keep = (uint64_t)hv_driver_kill_grace_ms(a->d) + 1000u;
    return hv_now_ms() + (notice_ms > keep ? notice_ms - keep : 0);
}

static void hook_node_drain(void *ud, uint64_t node_id, uint32_t notice_ms) {
    hv_actors_t *a = ud;
    int any = 0;
    for (hv_dactor_t *x = a->head; x != NULL; x = x->next) {
        hv_am_actor_t prev = x->am;
        hv_am_out_t out;
        if (hv_am_notice(&x->am, node_id, &out) == HV_OK && run(a, x, &prev, &out) == HV_OK) {
            /* A drain without a deadline (hvctl drain) waits for a node as long as it takes. */
            x->notice_deadline = notice_ms > 0 ? notice_deadline(a, notice_ms) : 0;
            x->place_after = 0;
            any = 1;
        }
    }
    if (any) {
        hv_driver_schedule(a->d);
    }
}

static void hook_state_saved(void *ud, uint64_t node_id, uint64_t proc, const char *digest,
                             uint64_t size, const char *why) {
    hv_actors_t *a = ud;
    hv_dactor_t *x = find(a, hv_am_proc_actor(proc));
    if (x == NULL || x->am.node_id != node_id || hv_am_proc_inc(proc) != x->am.incarnation) {
        return;
    }
    if (digest == NULL || strlen(digest) != 64) {
        /* Saved but not kept: the exit that follows says why (its events, its reason). */
        snprintf(x->saved_why, sizeof(x->saved_why), "%s", why != NULL ? why : "");
        return;
    }
    snprintf(x->saved_digest, sizeof(x->saved_digest), "%s", digest);
    x->saved_size = size;
    x->saved_why[0] = '\0';
}

/* A process's call figures: added to the actor's (actorfig), stored, and only then kept; when
 * the store fails the report is dropped (logged): the next one carries the running totals. A
 * report must come from the node of the actor's current process: an agent cannot count for an
 * actor elsewhere. */
/* Output of an actor's process from node_id's agent: into the actor's log, when that node runs
 * (or is taking over) its process (a node reports only on its own). */
static void hook_log(void *ud, uint64_t node_id, uint64_t proc, uint32_t stream, char **lines,
                     size_t n) {
    hv_actors_t *a = ud;
    hv_dactor_t *x = find(a, hv_am_proc_actor(proc));
    if (x == NULL || x->log_gone || (x->am.node_id != node_id && x->am.next_node != node_id)) {
        return;
    }
    if (!x->log_open) {
        if (x->log == NULL && (x->log = hv_calloc(1, sizeof(*x->log))) == NULL) {
            return; /* out of memory: these lines are lost, the next ones try again */
        }
        hv_joblog_open_actor(hv_driver_joblogs(a->d), x->log, x->am.id);
        x->log_open = 1;
    }
    (void)hv_joblog_append(hv_driver_joblogs(a->d), x->log, hv_am_proc_inc(proc), stream, lines, n,
                           hv_now_ms());
}

static void hook_figures(void *ud, uint64_t node_id, uint64_t proc, const hv_callfig_t *f,
                         int final) {
    hv_actors_t *a = ud;
    hv_dactor_t *x = find(a, hv_am_proc_actor(proc));
    if (x == NULL || x->am.node_id != node_id || hv_am_proc_inc(proc) != x->am.incarnation) {
        return;
    }
    hv_actorfig_t next = x->fig;
    hv_actorfig_how_t how;
    hv_err rc = hv_actorfig_report(&next, proc, f, final, &how);
    if (rc != HV_OK || how == HV_ACTORFIG_SAME) {
        if (rc == HV_EINVAL) {
            HV_LOG(HV_LOG_WARN, "actors", "HV-ACTOR-FIGURES",
                   "actor %" PRIu64 ": process %u reported call figures that do not add up; "
                   "ignored",
                   x->am.id, hv_am_proc_inc(proc));
        }
        return;
    }
    uint64_t now = hv_wall_ms();
    hv_actor_fig_row_t r = {.actor_id = x->am.id,
                            .proc = next.proc,
                            .ended = next.ended,
                            .base = next.base,
                            .cur = next.cur,
                            .report_ms = now};
    if (hv_store_actor_fig_put(a->store, &r) != HV_OK) {
        HV_LOG(HV_LOG_WARN, "actors", "HV-STORE-WRITE",
               "cannot store the call figures of actor %" PRIu64 " in %s: %s; this report is "
               "dropped",
               x->am.id, hv_store_path(a->store), hv_store_last_error(a->store));
        return;
    }
    x->fig = next;
    x->fig_ms = now;
}

static void hook_job_ended(void *ud, uint64_t job_id) {
    hv_actors_t *a = ud;
    for (hv_dactor_t *x = a->head; x != NULL; x = x->next) {
        hv_am_actor_t prev = x->am;
        hv_am_out_t out;
        if (hv_am_owner_ended(&x->am, job_id, &out) == HV_OK) {
            (void)run(a, x, &prev, &out);
        }
    }
}

static int hook_node_specs_any(void *ud, uint64_t node_id,
                               int (*fn)(const uint8_t *spec, size_t len, void *fud), void *fud) {
    hv_actors_t *a = ud;
    for (hv_dactor_t *x = a->head; x != NULL; x = x->next) {
        if (x->am.proc_live && x->am.node_id == node_id && fn(x->spec, x->spec_len, fud)) {
            return 1;
        }
    }
    return 0;
}

static int hook_node_state_is(void *ud, uint64_t node_id, const char *digest) {
    hv_actors_t *a = ud;
    for (hv_dactor_t *x = a->head; x != NULL; x = x->next) {
        if (x->am.proc_live && x->am.node_id == node_id && x->am.has_state &&
            strcmp(x->state_digest, digest) == 0) {
            return 1;
        }
    }
    return 0;
}

/* The node slots each actor holds, as load and place_all take them: its live process's, and a
 * move's slot reserved for the replacement. */
static void hook_use(void *ud,
                     void (*fn)(void *fud, const char *ns, uint32_t slots, uint32_t gpus,
                                uint64_t memory_mb),
                     void *fud) {
    hv_actors_t *a = ud;
    for (hv_dactor_t *x = a->head; x != NULL; x = x->next) {
        uint32_t held = (x->am.proc_live && x->am.node_id != 0) + (x->am.next_node != 0);
        if (held > 0) {
            fn(fud, x->ns, held * x->slots, held * x->gpus, held * x->memory_mb);
        }
    }
}

static void hook_schedule(void *ud) {
    hv_actors_t *a = ud;
    if (a->placing) {
        return;
    }
    a->placing = 1;
    place_all(a);
    a->placing = 0;
}

/* ---- the table -------------------------------------------------------------------------------- */

hv_err hv_actors_create(hv_driver_t *d, hv_store_t *store, hv_actors_t **out) {
    hv_actors_t *a = hv_calloc(1, sizeof(*a));
    if (a == NULL) {
        return HV_ENOMEM;
    }
    a->d = d;
    a->store = store;
    a->tail = &a->head;
    a->next_id = 1;
    hv_driver_actor_hooks_t h = {.started = hook_started,
                                 .exited = hook_exited,
                                 .reconcile = hook_reconcile,
                                 .node_lost = hook_node_lost,
                                 .node_drain = hook_node_drain,
                                 .state_saved = hook_state_saved,
                                 .job_ended = hook_job_ended,
                                 .figures = hook_figures,
                                 .log = hook_log,
                                 .schedule = hook_schedule,
                                 .node_specs_any = hook_node_specs_any,
                                 .node_state_is = hook_node_state_is,
                                 .use = hook_use,
                                 .ud = a};
    hv_driver_set_actor_hooks(d, &h);
    *out = a;
    return HV_OK;
}

void hv_actors_destroy(hv_actors_t *a) {
    if (a == NULL) {
        return;
    }
    hv_driver_set_actor_hooks(a->d, NULL);
    for (hv_dactor_t *x = a->head, *nx; x != NULL; x = nx) {
        nx = x->next;
        actor_free(x);
    }
    hv_free(a);
}

static void append(hv_actors_t *a, hv_dactor_t *x) {
    *a->tail = x;
    a->tail = &x->next;
    if (x->am.id >= a->next_id) {
        a->next_id = x->am.id + 1;
    }
}

/* The stored call figures, onto the loaded actors. */
static hv_err load_figures(hv_actors_t *a, char *err, size_t errlen) {
    hv_actor_fig_row_t *rows = NULL;
    size_t n = 0;
    hv_err rc = hv_store_actor_fig_list(a->store, &rows, &n);
    if (rc != HV_OK) {
        snprintf(err, errlen, "cannot read the actors' call figures from %s: %s",
                 hv_store_path(a->store), hv_store_last_error(a->store));
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        hv_dactor_t *x = find(a, rows[i].actor_id);
        if (x != NULL) {
            x->fig.base = rows[i].base;
            x->fig.cur = rows[i].cur;
            x->fig.proc = rows[i].proc;
            x->fig.ended = rows[i].ended;
            x->fig_ms = rows[i].report_ms;
        }
    }
    hv_free(rows);
    return HV_OK;
}

hv_err hv_actors_load(hv_actors_t *a, char *err, size_t errlen) {
    hv_actor_row_t *rows = NULL;
    size_t n = 0;
    hv_err rc = hv_store_actor_list(a->store, &rows, &n);
    if (rc != HV_OK) {
        snprintf(err, errlen, "cannot read the actors from %s: %s", hv_store_path(a->store),
                 hv_store_last_error(a->store));
        return rc;
    }
    size_t live = 0;
    for (size_t i = 0; i < n; i++) {
        hv_actor_row_t *r = &rows[i];
        hv_dactor_t *x = hv_calloc(1, sizeof(*x));
        if (x == NULL) {
            rc = HV_ENOMEM;
            snprintf(err, errlen, "out of memory loading the actors");
            break;
        }
        x->am.id = r->id;
        if (hv_am_state_parse(r->state, &x->am.state) != HV_OK ||
            hv_am_cause_parse(r->cause, &x->am.cause) != HV_OK) {
            snprintf(err, errlen, "actor %" PRIu64 " in %s has an unknown state '%s' or cause '%s'",
                     r->id, hv_store_path(a->store), r->state, r->cause);
            hv_free(x);
            rc = HV_ECORRUPT;
            break;
        }
        x->am.max_restarts = r->max_restarts;
        x->am.restarts = r->restarts;
        x->am.moves = r->moves;
        x->am.incarnation = r->incarnation;
        x->am.node_id = r->node_id;
        x->am.owner_job = r->owner_job;
        x->am.proc_live = r->proc_live;
        x->am.kill_sent = r->kill_sent;
        x->am.last_status = r->last_status;
        x->am.last_signal = r->last_signal;
        /* The strings move from the row (it is finished below with NULLs). */
        x->name = r->name;
        x->ns = r->ns;
        x->class_name = r->class_name;
        x->spec = r->spec;
        x->spec_len = r->spec_len;
        x->reason = r->reason;
        x->address = r->address;
        x->labels = r->labels;
        x->memory_mb = r->memory_mb;
        r->name = r->ns = r->class_name = r->reason = r->address = r->labels = NULL;
        r->spec = NULL;
        x->max_call_retries = r->max_call_retries;
        x->slots = r->slots;
        x->gpus = r->gpus;
        x->gpu_mask = r->gpu_mask;
        x->created_ms = r->created_ms;
        x->started_ms = r->started_ms;
        x->ended_ms = r->ended_ms;
        x->am.next_node = r->next_node;
        x->next_gpu_mask = r->next_gpu_mask;
        x->am.has_state = r->has_state;
        snprintf(x->state_digest, sizeof(x->state_digest), "%s", r->state_digest);
        x->state_size = r->state_size;
        if (x->am.proc_live) {
            take_slots(a, x->am.node_id, x->slots, x->gpu_mask, 0);
            live++;
        }
        if (x->am.next_node != 0) {
            take_slots(a, x->am.next_node, x->slots, x->next_gpu_mask, 0);
        }
        append(a, x);
    }
    for (size_t i = 0; i < n; i++) {
        hv_actor_row_fini(&rows[i]);
    }
    hv_free(rows);
    if (rc == HV_OK) {
        rc = load_figures(a, err, errlen);
        logs_prune(a);
    }
    if (rc == HV_OK && n > 0) {
        HV_LOG(HV_LOG_INFO, "actors", "HV-ACTORS-LOAD",
               "%zu actors loaded, %zu with a process to re-attach", n, live);
    }
    return rc;
}

hv_err hv_actors_new(hv_actors_t *a, const hv_actor_new_t *c, const hv_dactor_t **out, char *err,
                     size_t errlen) {
    if (c->name[0] != '\0') {
        const hv_dactor_t *o = hv_actors_by_name(a, c->ns, c->name);
        if (o != NULL && o->am.state != HV_AM_DEAD) {
            snprintf(err, errlen,
                     "an actor named '%s' already exists in namespace '%s' (actor %" PRIu64
                     ", %s): kill it first or choose another name",
                     c->name, c->ns, o->am.id, hv_am_state_name(o->am.state));
            return HV_EEXIST;
        }
    }
    hv_dactor_t *x = hv_calloc(1, sizeof(*x));
    if (x == NULL || (x->spec = hv_malloc(c->spec_len > 0 ? c->spec_len : 1)) == NULL) {
        hv_free(x);
        snprintf(err, errlen, "out of memory");
        return HV_ENOMEM;
    }
    memcpy(x->spec, c->spec, c->spec_len);
    x->spec_len = c->spec_len;
    set_str(&x->name, c->name);
    set_str(&x->ns, c->ns);
    set_str(&x->class_name, c->class_name);
    set_str(&x->address, "");
    set_str(&x->labels, c->labels);
    x->memory_mb = c->memory_mb;
    x->slots = c->slots > 0 ? c->slots : 1;
    x->gpus = c->gpus;
    x->max_call_retries = c->max_call_retries;
    x->created_ms = hv_wall_ms();
    hv_am_out_t mo;
    hv_am_create(&x->am, a->next_id, c->max_restarts, c->owner_job, &mo);
    set_str(&x->reason, mo.text);
    if (x->name == NULL || x->ns == NULL || x->class_name == NULL || x->address == NULL ||
        x->reason == NULL || x->labels == NULL) {
        actor_free(x);
        snprintf(err, errlen, "out of memory");
        return HV_ENOMEM;
    }
    if (record(a, x) != HV_OK) {
        snprintf(err, errlen, "the head could not store the actor: %s; nothing was created",
                 hv_store_last_error(a->store));
        actor_free(x);
        return HV_EUNAVAIL;
    }
    append(a, x);
    char name[128], data[1024];
    event_data(x, "", mo.text, data, sizeof(data));
    hv_ev_fields_t f = {.actor_id = x->am.id};
    hv_driver_event_f(a->d, 0, 0, "actor.pending", &f, data, "%s of class %s: %s",
                      who(x, name, sizeof(name)), x->class_name, mo.text);
    hv_driver_schedule(a->d);
    *out = x;
    return HV_OK;
}

hv_err hv_actors_kill(hv_actors_t *a, uint64_t id, int restart, char *err, size_t errlen) {
    hv_dactor_t *x = find(a, id);
    if (x == NULL) {
        snprintf(err, errlen, "no actor %" PRIu64, id);
        return HV_ENOTFOUND;
    }
    hv_am_actor_t prev = x->am;
    hv_am_out_t out;
    if (hv_am_kill(&x->am, restart, &out) != HV_OK) {
        snprintf(err, errlen, "actor %" PRIu64 " is %s%s", id, hv_am_state_name(x->am.state),
                 x->am.state == HV_AM_DEAD ? "" : " with no process to restart");
        return HV_ESTATE;
    }
    if (run(a, x, &prev, &out) != HV_OK) {
        snprintf(err, errlen, "the head could not store the kill: %s; nothing was done",
                 hv_store_last_error(a->store));
        return HV_EUNAVAIL;
    }
    hv_driver_schedule(a->d);
    return HV_OK;
}

const hv_dactor_t *hv_actors_get(const hv_actors_t *a, uint64_t id) { return find(a, id); }

const hv_dactor_t *hv_actors_by_name(const hv_actors_t *a, const char *ns, const char *name) {
    const hv_dactor_t *dead = NULL;
    for (const hv_dactor_t *x = a->head; x != NULL; x = x->next) {
        if (strcmp(x->ns, ns) != 0 || strcmp(x->name, name) != 0) {
            continue;
        }
        if (x->am.state != HV_AM_DEAD) {
            return x;
        }
        dead = x; /* the newest dead one, ids grow */
    }
    return dead;
}

const hv_dactor_t *hv_actors_all(const hv_actors_t *a) { return a->head; }

const char *hv_actors_node_name(hv_actors_t *a, const hv_dactor_t *x) {
    const hv_dnode_t *n = x->am.node_id != 0 ? hv_driver_node(a->d, x->am.node_id) : NULL;
    return n != NULL && n->name != NULL ? n->name : "";
}
