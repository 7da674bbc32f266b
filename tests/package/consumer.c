/*
 * consumer: a training program's view of an installed libhv, built out of tree by
 * tests/package/package_test.sh against the Debian packages (once with CMake's
 * find_package(hv CONFIG), once with pkg-config). It includes only <hv/hv.h>, prints the
 * library's version and runs one allreduce in a single-process world (rank 0 of 1).
 */
#include <stdio.h>
#include <string.h>

#include <hv/hv.h>

int main(void) {
    printf("libhv %s (built against %d.%d.%d)\n", hv_version(), HV_VERSION_MAJOR, HV_VERSION_MINOR,
           HV_VERSION_PATCH);
    hv_err rc = hv_init();
    if (rc != HV_OK) {
        fprintf(stderr, "consumer: hv_init: %s\n", hv_strerror(rc));
        return 1;
    }
    float in[4] = {1, 2, 3, 4}, out[4] = {0};
    rc = hv_allreduce(in, out, 4, HV_FLOAT32, HV_SUM);
    if (rc != HV_OK || memcmp(in, out, sizeof(in)) != 0) {
        fprintf(stderr, "consumer: hv_allreduce: %s\n", hv_strerror(rc));
        hv_shutdown();
        return 1;
    }
    printf("rank %d of %d: allreduce %g %g %g %g\n", hv_rank(), hv_size(), out[0], out[1], out[2],
           out[3]);
    return hv_shutdown() == HV_OK ? 0 : 1;
}
