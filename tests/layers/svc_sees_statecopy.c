/* A planted violation (tests/layers): a service reaches the state only through the driver (its
 * views and commands); this file includes the store layer's statecopy.h under the services' include
 * path and must fail to compile. */
#include "statecopy.h"
