/*
 * blacklist: the pure rule for barring a node from a job after its workers failed there. One
 * entry is one (job, node) pair; the node is named by the id the head gave it, never by host
 * name, so a new machine that reuses a name starts clean. Each failure is a strike; the node then
 * gets no work of that job for a cooldown that doubles with every strike (min, 2 min, 4 min, ...
 * up to max), with up to 25% jitter so that nodes struck together do not come back together;
 * after max_strikes strikes the bar is permanent. No I/O, no clock, no allocation: the caller
 * (the head's driver) passes the time and a random number and stores the entry. Reentrant.
 */
#ifndef HV_HEAD_BLACKLIST_H
#define HV_HEAD_BLACKLIST_H

#include <stddef.h>
#include <stdint.h>

/* How a job treats failures. */
typedef struct hv_bl_policy_s {
    uint32_t cooldown_min_s; /* first cooldown in seconds; 0 turns blacklisting off */
    uint32_t cooldown_max_s; /* cap of the doubling cooldown (>= cooldown_min_s) */
    uint32_t max_strikes;    /* strikes after which the bar is permanent; 0 = never permanent */
} hv_bl_policy_t;

/* One node's record for one job. Zeroed = clean. */
typedef struct hv_bl_entry_s {
    uint32_t strikes;  /* failures counted */
    uint64_t until_ms; /* wall-clock ms when the cooldown ends (meaningless when permanent) */
    int permanent;     /* 1: barred for good */
} hv_bl_entry_t;

/* 1 when the policy bars nodes at all (cooldown_min_s > 0). */
int hv_bl_on(const hv_bl_policy_t *p);

/* Records one failure at now_ms. rand32 is a uniformly random 32-bit number (the jitter).
 * Returns the cooldown given in ms (0 when the bar became permanent or the policy is off;
 * then e is unchanged when off). */
uint64_t hv_bl_strike(hv_bl_entry_t *e, const hv_bl_policy_t *p, uint64_t now_ms, uint32_t rand32);

/* 1 when the node may not run the job's workers at now_ms. */
int hv_bl_blocked(const hv_bl_entry_t *e, uint64_t now_ms);

/* Milliseconds left of the cooldown at now_ms (0 when not blocked; UINT64_MAX if permanent). */
uint64_t hv_bl_left_ms(const hv_bl_entry_t *e, uint64_t now_ms);

/* A record holds for the agent process it was earned under (struck_inc: the node's incarnation
 * at the strike); another agent on the node (a new machine that reuses the name) starts clean. */

/* 1 when e bars the node's current agent (node_inc) from the job at now_ms. */
int hv_bl_bars(const hv_bl_entry_t *e, uint64_t struck_inc, uint64_t node_inc, uint64_t now_ms);
/* The record a new strike against the node's current agent builds on: *e, or a clean one. */
hv_bl_entry_t hv_bl_of_agent(const hv_bl_entry_t *e, uint64_t struck_inc, uint64_t node_inc);
/* 1 when e's cooldown has ended by now_ms and was not told yet (until_ms is still set: the
 * caller tells it, then sets until_ms to 0; the strikes stay). */
int hv_bl_cooldown_ended(const hv_bl_entry_t *e, uint64_t now_ms);
/* 1 when the node's current agent was struck and may run the job again at now_ms (not barred
 * for good, its cooldown over): a job that grows onto it says so. */
int hv_bl_lifted(const hv_bl_entry_t *e, uint64_t struck_inc, uint64_t node_inc, uint64_t now_ms);

/* Pure: the words of the event ("node.blacklist") a stored strike of node node_id (its name
 * node; NULL: "?") against job job_id emits: text for people (barred for good after N failures,
 * or barred for the cooldown after failure N, and what failed), data as JSON (job, node_id,
 * strikes, permanent, cooldown_ms). e: the entry after the strike; cooldown_ms: what
 * hv_bl_strike returned. Both are cut to their lengths (the text's end, what, goes first). */
void hv_bl_strike_words(const hv_bl_entry_t *e, uint64_t cooldown_ms, uint64_t job_id,
                        uint64_t node_id, const char *node, const char *what, char *text,
                        size_t textlen, char *data, size_t datalen);

#endif
