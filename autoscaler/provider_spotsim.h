/*
 * provider_spotsim: the `spot-sim` provider, hvagent processes on this machine (provider_local.c)
 * under a simulated preemptible cloud (spotsim.c): a launch may be refused for capacity, the
 * agent starts after the boot delay, a preemption notice is a SIGTERM (the agent drains, told
 * the notice's lead time), the preemption a SIGKILL of the agent's process group and of every
 * process in its directory. Preemptions come at random (seeded, so a run is reproducible) or
 * from a trace file (spotsim.h gives its form). For tests and cost studies.
 */
#ifndef HV_AUTOSCALER_PROVIDER_SPOTSIM_H
#define HV_AUTOSCALER_PROVIDER_SPOTSIM_H

#include <uv.h>

#include "provider_local.h"
#include "spotsim.h"

typedef struct hv_prov_spotsim_opts_s {
    hv_prov_local_opts_t local; /* the processes (its gate is the simulation's own) */
    hv_ss_config_t sim;         /* the simulation; types (and trace) borrowed for the life */
    const char *trace_path;     /* a trace file read at creation (replaces sim.trace); NULL: none */
} hv_prov_spotsim_opts_t;

/* Creates the provider on loop (the loop's thread only). HV_EINVAL with err saying why: a trace
 * that cannot be read or does not parse ("PATH:LINE: ..."), or a simulation config that does not
 * do. */
hv_err hv_provider_spotsim_create(uv_loop_t *loop, const hv_prov_spotsim_opts_t *o,
                                  hv_prov_event_cb on_event, void *ud, hv_provider_t **out,
                                  char *err, size_t errlen);

#endif
