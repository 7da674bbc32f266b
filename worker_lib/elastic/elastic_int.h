/*
 * elastic_int: the inside of the elastic state (elastic.c) that the sampler (sampler.c), the
 * unit tests and the sync benchmark need, and nothing the public header should carry. A state
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

/* Hands sampler s to st: it is committed, rewound and freed with the state. HV_ENOMEM. */
hv_err hv__state_attach_sampler(hv_state_t *st, hv_sampler_t *s);

/* 1 while hv_elastic_run runs on st. */
int hv__state_running(const hv_state_t *st);

#endif
