/*
 * hello: the smallest libhv program. Joins the job, prints one line naming its rank, local rank
 * and host, leaves the job and exits 0 (1 if libhv fails). Used by the integration tests and as
 * the first thing to try on a new cluster. Uses only the public API.
 */
#include <stdio.h>

#include <hv/hv.h>

int main(void) {
    hv_err rc = hv_init();
    if (rc != HV_OK) {
        fprintf(stderr, "hello: hv_init: %s\n", hv_strerror(rc));
        return 1;
    }
    printf("hello from rank %d of %d (local rank %d of %d) on host %s\n", hv_rank(), hv_size(),
           hv_local_rank(), hv_local_size(), hv_host_name());
    fflush(stdout);
    rc = hv_shutdown();
    if (rc != HV_OK) {
        fprintf(stderr, "hello: hv_shutdown: %s\n", hv_strerror(rc));
        return 1;
    }
    return 0;
}
