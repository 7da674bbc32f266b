/*
 * provider_local: the `local` and `spot-sim` providers. An instance is one hvagent process on this
 * machine, started as `AGENT join HEAD --name NAME --slots N --token-file F --work-dir
 * WORK/NAME --instance-id ID [--preemptible]` in its own session, its output appended to
 * WORK/NAME/agent.log (0600, the directory 0700). It outlives the head: after a head restart the
 * head adopts it by its pid (checked against the instance's name in /proc/PID/cmdline, so a
 * reused pid is not mistaken for it) and watches it by polling.
 *
 * spot-sim (provider_spotsim.c) runs the same processes behind a gate (hv_prov_local_gate_t): the
 * gate may refuse a launch or hold it back (its agent starts when the gate says it booted), and
 * tells of notices (a SIGTERM: the agent drains) and preemptions (a SIGKILL of the group).
 *
 * Terminate sends SIGTERM (an idle agent exits at once; one with workers drains) and SIGKILL to
 * the group after stop_grace_ms.
 */
#ifndef HV_AUTOSCALER_PROVIDER_LOCAL_H
#define HV_AUTOSCALER_PROVIDER_LOCAL_H

#include <uv.h>

#include "provider.h"

/* What stands between the local provider and its instances (spot-sim's simulated cloud). The
 * provider calls it through these pointers only; it answers through hv_prov_local_boot,
 * _notice, _preempt and _note. Every hook runs on the loop's thread. */
typedef struct hv_prov_local_gate_s {
    /* A launch at now_ms: 1 accepted (the agent starts at hv_prov_local_boot), 0 refused (why). */
    int (*launch)(void *g, const hv_prov_launch_t *l, uint64_t now_ms, char *why, size_t whylen);
    /* After a head restart: a running instance is watched again. */
    void (*adopt)(void *g, const hv_prov_launch_t *l);
    /* The instance is given back or gone. */
    void (*gone)(void *g, uint64_t instance);
    /* Every tick of the provider, before it looks at its instances. */
    void (*tick)(void *g, hv_provider_t *p, uint64_t now_ms);
    /* The provider is destroyed. */
    void (*destroy)(void *g);
    void *g;
    const char *name;  /* the provider's name ("spot-sim") */
    uint32_t notice_s; /* a notice's lead time, given to the agents (--drain-deadline); 0: none */
} hv_prov_local_gate_t;

typedef struct hv_prov_local_opts_s {
    const char *agent;                /* the hvagent binary (borrowed) */
    const char *work_dir;             /* instances' directories go under it (created 0700) */
    uint32_t stop_grace_ms;           /* terminate: SIGTERM, then SIGKILL this much later */
    uint32_t tick_ms;                 /* how often adopted pids, deadlines and the gate are
                                       * checked; 0 = 100 */
    const hv_prov_local_gate_t *gate; /* NULL: local (copied; its g borrowed for the life) */
} hv_prov_local_opts_t;

/* Creates the provider on loop (the loop's thread only). On failure the gate is not destroyed (its
 * maker still owns it); once made, the provider calls its destroy hook at the end. */
hv_err hv_provider_local_create(uv_loop_t *loop, const hv_prov_local_opts_t *o,
                                hv_prov_event_cb on_event, void *ud, hv_provider_t **out);

/* The gate's answers, for an instance it holds (ignored for one the provider does not know). */
/* It booted: its agent starts (a failure is reported as LAUNCH_FAILED). */
void hv_prov_local_boot(hv_provider_t *p, uint64_t instance);
/* A preemption notice (why): SIGTERM to its agent, which drains; a NOTICE event. */
void hv_prov_local_notice(hv_provider_t *p, uint64_t instance, const char *why);
/* Preempted (after a notice or not): the instance is killed as a machine goes, then GONE. */
void hv_prov_local_preempt(hv_provider_t *p, uint64_t instance, int with_notice);
/* Something worth an event (a NOTE). */
void hv_prov_local_note(hv_provider_t *p, const char *why);

#endif
