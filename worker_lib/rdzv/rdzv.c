/* rdzv: helpers shared by the rendezvous implementations (see rdzv.h). */
#include "rdzv.h"

#include <string.h>

#include "mem.h"

void hv__rdzv_assignment_fini(hv__rdzv_assignment_t *a) {
    if (a == NULL) {
        return;
    }
    hv_free(a->peers);
    a->peers = NULL;
}

void hv__rdzv_fill_topology(hv__rdzv_assignment_t *a) {
    int me = a->rank;
    a->local_rank = 0;
    a->local_size = 0;
    a->cross_rank = 0;
    a->cross_size = 0;
    for (int r = 0; r < a->size; r++) {
        int first = 1; // is r the lowest rank on its host?
        for (int q = 0; q < r; q++) {
            if (strcmp(a->peers[q].host, a->peers[r].host) == 0) {
                first = 0;
                break;
            }
        }
        if (first) {
            if (strcmp(a->peers[r].host, a->peers[me].host) == 0) {
                a->cross_rank = a->cross_size;
            }
            a->cross_size++;
        }
        if (strcmp(a->peers[r].host, a->peers[me].host) == 0) {
            if (r < me) {
                a->local_rank++;
            }
            a->local_size++;
        }
    }
}
