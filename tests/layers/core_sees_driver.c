/* A planted violation (tests/layers): the pure core may include only core/ and the base
 * library; this file includes the driver's header under core's include path and must fail to
 * compile. */
#include "driver.h"
