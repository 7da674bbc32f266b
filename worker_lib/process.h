/*
 * process: what the rest of libhv may ask of hv.c's process-wide state. The elastic layer
 * (elastic.c) drives the process's membership through it when a program calls hv_elastic_run
 * with the public API; tests that run ranks as threads bind their own members instead
 * (elastic_int.h) and never come here. Not the public API.
 *
 * Threading: as hv.c's: call from the thread that runs hv_init / the training function.
 */
#ifndef HV_WORKER_LIB_PROCESS_H
#define HV_WORKER_LIB_PROCESS_H

#include "member.h"

/* The process's membership, NULL when libhv is not initialised or runs without a data plane
 * (identity from HV_RANK/HV_SIZE only). Borrowed: valid until hv_shutdown. */
hv__member_t *hv__process_member(void);

/* 1 between hv_init and hv_shutdown. */
int hv__process_inited(void);

#endif
