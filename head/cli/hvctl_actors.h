/*
 * hvctl_actors: hvctl's actor commands (actor create, actors, actor NAME|ID, kill-actor) over the
 * Actors service. hvctl's main calls hv_ctl_actors_main first.
 */
#ifndef HV_CLI_HVCTL_ACTORS_H
#define HV_CLI_HVCTL_ACTORS_H

/* Runs an actor command and returns its exit status; -1 when argv is not an actor command
 * (hvctl parses it as usual). */
int hv_ctl_actors_main(int argc, char **argv);

#endif
