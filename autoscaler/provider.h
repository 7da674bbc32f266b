/*
 * provider: how the autoscaler gets machines and gives them back, behind one interface. The
 * head's autoscaler loop decides (policy.c) and a provider carries out: launch an instance whose
 * agent joins the head by itself with a credential that admits that one instance, terminate it,
 * and report what happens to it (gone, a preemption notice, a launch that failed later). After a
 * head restart the loop hands each stored instance back to the provider (adopt) so it is watched
 * again, never launched twice.
 *
 * Providers: `local` (provider_local.c: hvagent processes on this machine), `spot-sim`
 * (provider_spotsim.c: the same processes under a simulated cloud, spotsim.c: boot delays,
 * capacity, preemptions) and `command` (provider_command.c: the user's shell command templates
 * for launch, terminate and list). hv_provider_create (provider.c) makes one by its name, so the
 * head names none of them.
 *
 * Threads: every call on the loop's thread; events are delivered there.
 */
#ifndef HV_AUTOSCALER_PROVIDER_H
#define HV_AUTOSCALER_PROVIDER_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "err.h"
#include "spotsim.h"

typedef struct hv_provider_s hv_provider_t;

/* What one launch asks for. Strings are borrowed for the call. */
typedef struct hv_prov_launch_s {
    uint64_t instance; /* the head's id for it */
    const char *name;  /* the node name its agent joins with */
    size_t type;       /* index of the node type */
    const char *type_name;
    uint32_t slots, gpus;
    int preemptible;        /* the agent says so to the head (hvagent --preemptible) */
    const char *labels;     /* "k=v,k=v" its agent joins with (hvagent --labels); NULL: none */
    uint64_t memory_mb;     /* hvagent --memory-mb; 0: the machine's */
    const char *head;       /* the address agents join, host:port */
    const char *token_file; /* a 0600 file with the credential that admits this instance */
} hv_prov_launch_t;

typedef enum hv_prov_event_e {
    HV_PROV_GONE = 0,      /* the instance no longer exists (terminated, preempted, crashed) */
    HV_PROV_NOTICE,        /* a preemption notice reached it (its agent is draining) */
    HV_PROV_LAUNCH_FAILED, /* an accepted launch failed later */
    HV_PROV_NOTE,          /* something worth an event, nothing to do */
} hv_prov_event;

/* Why an instance is GONE, as a code (the words are for people and may change). */
typedef enum hv_prov_cause_e {
    HV_PROV_CAUSE_NONE = 0,   /* NOTICE, LAUNCH_FAILED, NOTE */
    HV_PROV_CAUSE_TERMINATED, /* given back (terminate), or never booted */
    HV_PROV_CAUSE_PREEMPTED,  /* the cloud took it (with or without a notice) */
    HV_PROV_CAUSE_LOST,       /* anything else: its agent exited or was killed, it is not listed */
} hv_prov_cause;

/* cause: GONE's cause (HV_PROV_CAUSE_NONE for the other events); why: in the user's terms
 * ("preempted after its notice", "agent exited with status 1"), for events and logs only. */
typedef void (*hv_prov_event_cb)(hv_provider_t *p, hv_prov_event ev, uint64_t instance,
                                 hv_prov_cause cause, const char *why, void *ud);

typedef struct hv_provider_vtbl_s {
    const char *name; /* "local", "spot-sim" */
    /* Starts a launch. HV_OK: accepted (it joins later, or a LAUNCH_FAILED/GONE event says why
     * not). Else the launch did not happen; err says why (e.g. no capacity). */
    hv_err (*launch)(hv_provider_t *p, const hv_prov_launch_t *l, char *err, size_t errlen);
    /* Gives the instance back: its agent is stopped (SIGTERM, SIGKILL after a grace period) and
     * a GONE event follows. HV_ENOTFOUND when the provider does not know it. */
    hv_err (*terminate)(hv_provider_t *p, uint64_t instance);
    /* After a head restart: an instance launched before, with the handle handle() gave then.
     * The provider watches it again (HV_OK), or reports it GONE when it no longer exists. */
    hv_err (*adopt)(hv_provider_t *p, const hv_prov_launch_t *l, const char *handle);
    /* What to store to adopt the instance later (local: the agent's pid). NULL if unknown. */
    const char *(*handle)(hv_provider_t *p, uint64_t instance);
    /* Stops watching; instances keep running (they outlive a head restart). */
    void (*destroy)(hv_provider_t *p);
} hv_provider_vtbl_t;

struct hv_provider_s {
    const hv_provider_vtbl_t *v;
    hv_prov_event_cb on_event;
    void *ud;
};

static inline hv_err hv_provider_launch(hv_provider_t *p, const hv_prov_launch_t *l, char *err,
                                        size_t errlen) {
    return p->v->launch(p, l, err, errlen);
}
static inline hv_err hv_provider_terminate(hv_provider_t *p, uint64_t instance) {
    return p->v->terminate(p, instance);
}
static inline hv_err hv_provider_adopt(hv_provider_t *p, const hv_prov_launch_t *l,
                                       const char *handle) {
    return p->v->adopt(p, l, handle);
}
static inline const char *hv_provider_handle(hv_provider_t *p, uint64_t instance) {
    return p->v->handle(p, instance);
}
static inline void hv_provider_destroy(hv_provider_t *p) {
    if (p != NULL) {
        p->v->destroy(p);
    }
}

/* What hv_provider_create needs; each provider reads its own part. Borrowed for the call, but
 * for sim.types (and sim.trace), borrowed for the provider's life. */
typedef struct hv_provider_cfg_s {
    /* local, spot-sim: hvagent processes on this machine */
    const char *agent;      /* the hvagent binary */
    const char *work_dir;   /* the instances' directories go under it (created 0700) */
    uint32_t stop_grace_ms; /* terminate: SIGTERM, then SIGKILL this much later */
    uint32_t tick_ms;       /* how often pids, deadlines and the simulation are checked; 0: 100 */
    /* spot-sim: the simulation (spotsim.h); a trace is read from sim_trace (NULL: none, or the
     * one in sim.trace) */
    hv_ss_config_t sim;
    const char *sim_trace;
    /* command: the templates (provider_command.h) and the bound of each command (0: 120 s) */
    const char *launch, *terminate, *list;
    uint32_t timeout_ms;
} hv_provider_cfg_t;

/* Creates the provider called name ("local", "spot-sim" or "command") on loop (its thread only).
 * HV_EINVAL for another name or a config that does not do (err says why, naming the file and line
 * of a trace that does not parse); else the provider's own error, err saying what failed. */
hv_err hv_provider_create(uv_loop_t *loop, const char *name, const hv_provider_cfg_t *cfg,
                          hv_prov_event_cb on_event, void *ud, hv_provider_t **out, char *err,
                          size_t errlen);

#endif
