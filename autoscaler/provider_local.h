/*
 * provider_local: the `local` and `spot-sim` providers. An instance is one hvagent process on this
 * machine, started as `AGENT join HEAD --name NAME --slots N --token-file F --work-dir
 * WORK/NAME --instance-id ID [--preemptible]` in its own session, its output appended to
 * WORK/NAME/agent.log (0600, the directory 0700). It outlives the head: after a head restart the
 * head adopts it by its pid (checked against the instance's name in /proc/PID/cmdline, so a
 * reused pid is not mistaken for it) and watches it by polling.
 *
 * spot-sim (opts.sim set) runs the same processes under a simulated cloud (spotsim.h): a launch
 * may be refused for capacity, the agent starts after the boot delay, a preemption notice is a
 * SIGTERM (the agent drains), the preemption a SIGKILL of the agent's process group.
 *
 * Terminate sends SIGTERM (an idle agent exits at once; one with workers drains) and SIGKILL to
 * the group after stop_grace_ms.
 */
#ifndef HV_AUTOSCALER_PROVIDER_LOCAL_H
#define HV_AUTOSCALER_PROVIDER_LOCAL_H

#include <uv.h>

#include "provider.h"
#include "spotsim.h"

typedef struct hv_prov_local_opts_s {
    const char *agent;         /* the hvagent binary (borrowed) */
    const char *work_dir;      /* instances' directories go under it (created 0700) */
    uint32_t stop_grace_ms;    /* terminate: SIGTERM, then SIGKILL this much later */
    uint32_t tick_ms;          /* how often adopted pids, deadlines and the simulation are
                                 * checked; 0 = 100 */
    const hv_ss_config_t *sim; /* NULL: local; else spot-sim (borrowed for the life) */
} hv_prov_local_opts_t;

/* Creates the provider on loop (the loop's thread only). */
hv_err hv_provider_local_create(uv_loop_t *loop, const hv_prov_local_opts_t *o,
                                hv_prov_event_cb on_event, void *ud, hv_provider_t **out);

#endif
