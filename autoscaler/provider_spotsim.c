/*
 * provider_spotsim: see provider_spotsim.h. The simulation is the local provider's gate: the
 * provider asks it at each launch, adoption and end, and steps it at each tick; it answers with
 * hv_prov_local_boot, _notice, _preempt and _note.
 */
#include "provider_spotsim.h"

#include "mem.h"
#include "util.h"

#include <stdio.h>

typedef struct spotsim_s {
    hv_ss_config_t c;
    hv_ss_trace_event_t *trace; /* read from the trace file (owned); NULL: none or borrowed */
    hv_ss_t *ss;
} spotsim_t;

static int ss_launch(void *g, const hv_prov_launch_t *l, uint64_t now, char *why, size_t len) {
    spotsim_t *s = g;
    return hv_ss_launch(s->ss, l->instance, l->type, now, why, len);
}

static void ss_adopt(void *g, const hv_prov_launch_t *l) {
    spotsim_t *s = g;
    (void)hv_ss_adopt(s->ss, l->instance, l->type);
}

static void ss_gone(void *g, uint64_t instance) {
    spotsim_t *s = g;
    hv_ss_terminate(s->ss, instance);
}

static void ss_tick(void *g, hv_provider_t *p, uint64_t now) {
    spotsim_t *s = g;
    hv_ss_action_t acts[16];
    size_t n;
    while ((n = hv_ss_step(s->ss, now, acts, 16)) > 0) {
        for (size_t i = 0; i < n; i++) {
            const hv_ss_action_t *a = &acts[i];
            switch (a->kind) {
            case HV_SS_NOTE:
                hv_prov_local_note(p, a->reason);
                break;
            case HV_SS_BOOTED:
                hv_prov_local_boot(p, a->instance);
                break;
            case HV_SS_NOTICE:
                hv_prov_local_notice(p, a->instance, a->reason);
                break;
            case HV_SS_PREEMPTED:
                hv_prov_local_preempt(p, a->instance, a->with_notice);
                break;
            }
        }
        if (n < 16) {
            break;
        }
    }
}

static void ss_destroy(void *g) {
    spotsim_t *s = g;
    hv_ss_destroy(s->ss);
    hv_free(s->trace);
    hv_free(s);
}

/* Reads and parses the trace file into s (its events owned by s). */
static hv_err ss_read_trace(spotsim_t *s, const char *path, char *err, size_t errlen) {
    char *text = NULL;
    size_t len = 0;
    hv_err rc = hv_read_file(path, 4u << 20, &text, &len);
    if (rc != HV_OK) {
        snprintf(err, errlen, "%s: cannot read the spot-sim trace: %s", path, hv_strerror(rc));
        return rc;
    }
    size_t n = 0;
    int ok = hv_ss_trace_parse(text, path, s->c.types, s->c.ntypes, &s->trace, &n, err, errlen);
    hv_free(text);
    if (!ok) {
        return HV_EINVAL;
    }
    s->c.trace = s->trace;
    s->c.ntrace = n;
    return HV_OK;
}

hv_err hv_provider_spotsim_create(uv_loop_t *loop, const hv_prov_spotsim_opts_t *o,
                                  hv_prov_event_cb on_event, void *ud, hv_provider_t **out,
                                  char *err, size_t errlen) {
    *out = NULL;
    spotsim_t *s = hv_calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "out of memory");
        return HV_ENOMEM;
    }
    s->c = o->sim;
    hv_err rc = HV_OK;
    if (o->trace_path != NULL && (rc = ss_read_trace(s, o->trace_path, err, errlen)) != HV_OK) {
        ss_destroy(s);
        return rc;
    }
    if ((s->ss = hv_ss_create(&s->c, uv_now(loop))) == NULL) {
        snprintf(err, errlen, "spot-sim: the simulation's settings do not do");
        ss_destroy(s);
        return HV_EINVAL;
    }
    hv_prov_local_gate_t gate = {.launch = ss_launch,
                                 .adopt = ss_adopt,
                                 .gone = ss_gone,
                                 .tick = ss_tick,
                                 .destroy = ss_destroy,
                                 .g = s,
                                 .name = "spot-sim",
                                 .notice_s = s->c.notice_s};
    hv_prov_local_opts_t lo = o->local;
    lo.gate = &gate;
    if ((rc = hv_provider_local_create(loop, &lo, on_event, ud, out)) != HV_OK) {
        ss_destroy(s); /* a provider that was not made leaves its gate to its maker */
    }
    return rc;
}
