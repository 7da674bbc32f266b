/*
 * svc_actors: the Actors service (Create, Get, List, Kill) over the head's actors
 * (head/driver/actors_drv.h). Callers: hvctl (client token) and libhv's hv_actor_lookup inside a
 * job's workers (worker secret, the "default" namespace only). Loop thread only.
 */
#ifndef HV_HEAD_SVC_ACTORS_H
#define HV_HEAD_SVC_ACTORS_H

#include "actors_drv.h"
#include "auth.h"
#include "driver.h"
#include "rpc.h"

typedef struct hv_svc_actors_s hv_svc_actors_t;

/* Registers the Actors methods on srv. Everything is borrowed and must outlive the server. */
hv_err hv_svc_actors_create(hv_rpc_server_t *srv, hv_auth_t *auth, hv_driver_t *d,
                            hv_actors_t *actors, hv_svc_actors_t **out);
/* After the rpc engine ended every call. NULL is a no-op. */
void hv_svc_actors_destroy(hv_svc_actors_t *s);

#endif
