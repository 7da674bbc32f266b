/*
 * sleeper: a worker that takes a while, for scheduling, cancel and drain tests.
 *   sleeper [SECONDS]
 * Prints "rank R started", sleeps SECONDS (default 1), prints "rank R done" and exits 0. Uses
 * only the public API.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <hv/hv.h>

int main(int argc, char **argv) {
    double secs = 1.0;
    if (argc > 1) {
        char *end = NULL;
        errno = 0;
        secs = strtod(argv[1], &end);
        if (errno != 0 || end == argv[1] || *end != '\0' || secs < 0 || secs > 1e7) {
            fprintf(stderr, "usage: sleeper [SECONDS]: '%s' is not a number of seconds\n", argv[1]);
            return 2;
        }
    }
    hv_err rc = hv_init();
    if (rc != HV_OK) {
        fprintf(stderr, "sleeper: hv_init: %s\n", hv_strerror(rc));
        return 1;
    }
    int rank = hv_rank();
    printf("rank %d started\n", rank);
    fflush(stdout);
    struct timespec ts = {.tv_sec = (time_t)secs, .tv_nsec = (long)((secs - (time_t)secs) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    printf("rank %d done\n", rank);
    fflush(stdout);
    rc = hv_shutdown();
    if (rc != HV_OK) {
        fprintf(stderr, "sleeper: hv_shutdown: %s\n", hv_strerror(rc));
        return 1;
    }
    return 0;
}
