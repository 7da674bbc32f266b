/* A planted violation (tests/layers): a service reaches the state only through the driver (its
 * views and commands); this file includes the store layer's artifacts.h under the services' include
 * path and must fail to compile. */
#include "artifacts.h"
