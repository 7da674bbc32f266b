/*
 * provider: the factory (provider.h, hv_provider_create). The one place that knows every
 * provider by name; the head asks it with the configured name and the config's values.
 */
#include "provider.h"

#include "provider_command.h"
#include "provider_local.h"
#include "provider_spotsim.h"

#include <stdio.h>
#include <string.h>

hv_err hv_provider_create(uv_loop_t *loop, const char *name, const hv_provider_cfg_t *cfg,
                          hv_prov_event_cb on_event, void *ud, hv_provider_t **out, char *err,
                          size_t errlen) {
    *out = NULL;
    hv_prov_local_opts_t lo = {.agent = cfg->agent,
                               .work_dir = cfg->work_dir,
                               .stop_grace_ms = cfg->stop_grace_ms,
                               .tick_ms = cfg->tick_ms};
    hv_err rc;
    if (name != NULL && strcmp(name, "local") == 0) {
        rc = hv_provider_local_create(loop, &lo, on_event, ud, out);
    } else if (name != NULL && strcmp(name, "spot-sim") == 0) {
        hv_prov_spotsim_opts_t so = {.local = lo, .sim = cfg->sim, .trace_path = cfg->sim_trace};
        rc = hv_provider_spotsim_create(loop, &so, on_event, ud, out, err, errlen);
    } else if (name != NULL && strcmp(name, "command") == 0) {
        hv_prov_command_opts_t co = {.launch = cfg->launch,
                                     .terminate = cfg->terminate,
                                     .list = cfg->list,
                                     .timeout_ms = cfg->timeout_ms};
        rc = hv_provider_command_create(loop, &co, on_event, ud, out);
    } else {
        snprintf(err, errlen, "unknown provider '%s' (local, spot-sim or command)",
                 name != NULL ? name : "");
        return HV_EINVAL;
    }
    return rc;
}
