/* The control of the layer probes (tests/layers): under core's include path a core header and
 * the base library's compile, so a probe that fails does so for the header it names. */
#include "err.h"
#include "jobm.h"

int hv__layer_core_control(void);
int hv__layer_core_control(void) { return HV_JOB_PENDING; }
