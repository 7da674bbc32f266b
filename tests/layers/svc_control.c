/* The control of the services' layer probes (tests/layers): under the services' include path
 * the driver's headers (its commands and views) compile, so a probe that fails does so for the
 * header it names. */
#include "driver.h"
#include "err.h"
#include "views.h"

int hv__layer_svc_control(hv_driver_t *d);
int hv__layer_svc_control(hv_driver_t *d) { return hv_view_artifact_present(d, "") ? 1 : 0; }
