/*
 * elastic_int: the inside of the elastic state (elastic.c) that its participants (the sampler,
 * sampler.c, through hv__state_part_ops_t), the unit tests and the sync benchmark need, and nothing the public header should carry. A state
 * normally drives the process's membership (hv.c); tests that run ranks as threads bind each
 * rank's state to that rank's own member instead.
 *
 * Threading: as the public state: the thread that runs the training function.
 */
#ifndef HV_WORKER_LIB_ELASTIC_INT_H
#define HV_WORKER_LIB_ELASTIC_INT_H

#include <stddef.h>

#include "engine.h"
#include "err.h"
#include "member.h"

#include "hv/elastic.h"

/* Makes st use member m (borrowed; must outlive every use of st) instead of the process's
 * membership: hv_elastic_run then neither calls hv_init nor touches hv.c's state. */
void hv__state_bind(hv_state_t *st, hv__member_t *m);

/* The membership st drives (the bound one, else the process's; NULL when there is none). */
hv__member_t *hv__state_member(const hv_state_t *st);

/* The current world's engine, rank and size. HV_ESTATE when there is no world (not
 * initialised, between rounds, removed). */
hv_err hv__state_world(const hv_state_t *st, hv__engine_t **e, int *rank, int *size);

/* Registers a buffer owned by libhv (a sampler's position) under name. Same rules and errors
 * as hv_state_add_buffer. */
hv_err hv__state_add_internal(hv_state_t *st, const char *name, void *buf, size_t bytes);

/* Unregisters the buffer name (a sampler whose creation failed half-way). No-op if absent. */
void hv__state_remove_internal(hv_state_t *st, const char *name);

/* A participant of a state beside its buffers (a sampler, sampler.c): it follows the state's
 * life through these ops, so the state knows no participant by name. self is the participant. */
typedef struct hv__state_part_ops_s {
    /* At every commit, after the buffers' snapshot: collective over the world (engine e of
     * size ranks). An error fails the commit. */
    hv_err (*commit)(void *self, hv__engine_t *e, int size);
    /* The state was restored, synced, or the world changed: forget what is not committed. */
    void (*rewind)(void *self);
    /* Samples handed out since the last commit over all ranks (what a rollback sends back). */
    uint64_t (*pending)(const void *self);
    /* With the state (hv_state_destroy). */
    void (*free)(void *self);
} hv__state_part_ops_t;

/* Hands participant self (with its ops, static) to st: committed, rewound and freed with the
 * state from now on. HV_ENOMEM. */
hv_err hv__state_add_part(hv_state_t *st, const hv__state_part_ops_t *ops, void *self);

/* 1 while hv_elastic_run runs on st. */
int hv__state_running(const hv_state_t *st);

#endif
