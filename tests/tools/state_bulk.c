/*
 * state_bulk: an elastic worker with a large training state, for tests/integration/
 * copy_reserve.sh (issue 24: copies of several jobs at once must keep the data directory's
 * reserve).
 *
 *   state_bulk MIB GO_FILE AFTER_FILE LINES
 *       registers MIB MiB of state (a pattern, so no page is left unwritten), prints
 *       "state_bulk: ready", waits (at most 60 s) for GO_FILE to exist, commits once (rank 0's
 *       first commit hands a copy of the state to the copier, which sends it to the head), prints
 *       "state_bulk: committed", waits (at most 60 s) for AFTER_FILE, prints LINES lines
 *       "state_bulk: line N of LINES" and returns; hv_elastic_run lets the copy in flight end.
 *       Exits 0, or 1 with the error.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hv/elastic.h"

typedef struct bulk_s {
    const char *go, *after;
    long lines;
} bulk_t;

/* Waits (at most 60 s, 10 ms apart) for path to exist. */
static int wait_file(const char *path) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 6000; i++) {
        if (access(path, F_OK) == 0) {
            return 0;
        }
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "state_bulk: %s did not appear within 60 s\n", path);
    return -1;
}

static hv_err bulk_train(hv_state_t *st, void *ud) {
    bulk_t *b = ud;
    if (wait_file(b->go) != 0) {
        return HV_ETIMEDOUT;
    }
    hv_err rc = hv_state_commit(st);
    if (rc != HV_OK) {
        return rc;
    }
    printf("state_bulk: committed\n");
    fflush(stdout);
    if (wait_file(b->after) != 0) {
        return HV_ETIMEDOUT;
    }
    for (long i = 1; i <= b->lines; i++) {
        printf("state_bulk: line %ld of %ld\n", i, b->lines);
    }
    fflush(stdout);
    return HV_OK;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: state_bulk MIB GO_FILE AFTER_FILE LINES\n");
        return 2;
    }
    size_t bytes = (size_t)strtoul(argv[1], NULL, 10) << 20;
    bulk_t b = {.go = argv[2], .after = argv[3], .lines = strtol(argv[4], NULL, 10)};
    unsigned char *buf = malloc(bytes ? bytes : 1);
    hv_state_t *st = NULL;
    if (bytes == 0 || buf == NULL || hv_state_create(&st) != HV_OK ||
        hv_state_add_buffer(st, "bulk", buf, bytes) != HV_OK) {
        fprintf(stderr, "state_bulk: cannot set up %s MiB of state\n", argv[1]);
        return 1;
    }
    for (size_t i = 0; i < bytes; i++) {
        buf[i] = (unsigned char)(i * 131u + (i >> 12));
    }
    printf("state_bulk: ready\n");
    fflush(stdout);
    hv_err rc = hv_elastic_run(st, bulk_train, &b);
    if (rc != HV_OK) {
        char why[256];
        fprintf(stderr, "state_bulk: %s (%s)\n", hv_strerror(rc), hv_last_error(why, sizeof(why)));
    }
    hv_state_destroy(st);
    hv_shutdown();
    free(buf);
    return rc == HV_OK ? 0 : 1;
}
