/*
 * hvctl_actors: hvctl's actor commands (actor create, actors, actor NAME|ID, kill-actor,
 * actor-logs) over the
 * Actors service: their calls and output. hvctl parses their options with its own (one table)
 * into hv_ctl_actor_opts_t and calls hv_ctl_actors_run.
 */
#ifndef HV_CLI_HVCTL_ACTORS_H
#define HV_CLI_HVCTL_ACTORS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hv.pb-c.h"

#define HV_CTL_ACTORS_MAX_ENV 256   /* --env of actor create */
#define HV_CTL_ACTORS_MAX_LABELS 64 /* --label of actor create */

/* An actor command's options, as hvctl parsed them. Strings borrowed from argv. */
typedef struct hv_ctl_actor_opts_s {
    const char *cmd;                          /* "create", "list", "get", "kill", "logs" */
    int json;                                 /* --json */
    int restart;                              /* kill-actor --restart */
    const char *target;                       /* NAME|ID of actor, kill-actor, actor-logs */
    const char *name, *ns, *class_name, *arg; /* --name, --namespace, --class, --arg */
    uint32_t slots, gpus, max_restarts, max_call_retries;
    uint64_t owner_job, memory_mb;
    const char *labels[HV_CTL_ACTORS_MAX_LABELS]; /* --label K=V */
    size_t nlabels;
    const char *env[HV_CTL_ACTORS_MAX_ENV]; /* --env K=V */
    size_t nenv;
    char **prog; /* PROGRAM [ARGS] after "--" */
    int nprog;
} hv_ctl_actor_opts_t;

typedef struct hv_rpc_channel_s hv_rpc_channel_t;

/* Runs the actor command o over ch (a channel to head, borrowed, with the client token) and
 * returns hvctl's exit status. */
int hv_ctl_actors_run(hv_rpc_channel_t *ch, const char *head, const hv_ctl_actor_opts_t *o);

/* The actor commands' --help. */
void hv_ctl_actors_usage(FILE *f);

/* For hvctl status: the head's List of every actor (an owned reply: free it with
 * hv_rpc_msg_free), or NULL when the head has no Actors service or does not answer. */
Hvpb__V1__ListActorsReply *hv_ctl_actors_fetch(hv_rpc_channel_t *ch);

/* For hvctl status: one line of actors by state, then each actor waiting for a place with its
 * reason. Prints nothing when r is NULL or has no actors. */
void hv_ctl_actors_status(const Hvpb__V1__ListActorsReply *r);

#endif
