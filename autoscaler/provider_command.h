/*
 * provider_command: the `command` provider. The user gives shell command templates; the head runs
 * them with `/bin/sh -c` and reads what they print:
 *   launch     create one instance whose agent joins the head by itself. Exit 0: accepted; the
 *              first line it prints, if any, is the instance's handle (a cloud instance id),
 *              kept for terminate and list. Non-zero: the launch failed (its last stderr line
 *              says why).
 *   terminate  give the instance back. Exit 0: it is gone.
 *   list       (optional) print the instances that exist, one name or handle per line; one
 *              that is no longer listed is gone (preempted, deleted by hand).
 * Placeholders, each replaced by its value in single quotes (so no value can inject shell
 * syntax): {name} {instance} {type} {slots} {gpus} {head} {token_file} {handle}
 * {preemptible} (1 or 0). Every command is bounded by a timeout and killed with its process
 * group when it runs past it; its output is read up to 64 KiB.
 *
 * The cloud's preemption notice reaches the agent on the machine (deploy/ wires it to
 * `hvagent drain`), not this provider.
 */
#ifndef HV_AUTOSCALER_PROVIDER_COMMAND_H
#define HV_AUTOSCALER_PROVIDER_COMMAND_H

#include <uv.h>

#include "provider.h"

typedef struct hv_prov_command_opts_s {
    const char *launch;     /* template, required */
    const char *terminate;  /* template, required */
    const char *list;       /* template, or NULL */
    uint32_t timeout_ms;    /* bound of each command; 0 = 120000 */
    uint32_t list_every_ms; /* how often list runs; 0 = 10000 */
    uint32_t list_grace_ms; /* a launched instance may be missing from list this long
                                 * (clouds list new instances late); 0 = 60000 */
} hv_prov_command_opts_t;

hv_err hv_provider_command_create(uv_loop_t *loop, const hv_prov_command_opts_t *o,
                                  hv_prov_event_cb on_event, void *ud, hv_provider_t **out);

/* Expands a template into out: {key} becomes the single-quoted value of key in the
 * keys[i]/vals[i] pairs; "{{" is a literal "{". Returns HV_OK, HV_ENOTFOUND for an unknown
 * placeholder (named in err) or HV_ETOOBIG when out is too small. Exposed for its unit test. */
hv_err hv_prov_command_expand(const char *tmpl, const char *const *keys, const char *const *vals,
                              size_t n, char *out, size_t outlen, char *err, size_t errlen);

#endif
