/*
 * hvctl_actors: hvctl's actor commands (actor create, actors, actor NAME|ID, kill-actor) over the
 * Actors service. hvctl's main calls hv_ctl_actors_main first.
 */
#ifndef HV_CLI_HVCTL_ACTORS_H
#define HV_CLI_HVCTL_ACTORS_H

#include "hv.pb-c.h"

/* Runs an actor command and returns its exit status; -1 when argv is not an actor command
 * (hvctl parses it as usual). */
int hv_ctl_actors_main(int argc, char **argv);

typedef struct hv_rpc_channel_s hv_rpc_channel_t;
/* For hvctl status: the head's List of every actor (an owned reply: free it with
 * hv_rpc_msg_free), or NULL when the head has no Actors service or does not answer. */
Hvpb__V1__ListActorsReply *hv_ctl_actors_fetch(hv_rpc_channel_t *ch);

/* For hvctl status: one line of actors by state, then each actor waiting for a place with its
 * reason. Prints nothing when r is NULL or has no actors. */
void hv_ctl_actors_status(const Hvpb__V1__ListActorsReply *r);

#endif
