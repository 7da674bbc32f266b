/*
 * fail: a worker that fails on purpose, for tests of exit-code and log handling.
 *   fail [CODE [RANK [SLEEP_S]]]
 * Every rank prints one line to stdout and one to stderr; rank RANK (default 0) then exits with
 * CODE (default 1) at once, while the others sleep SLEEP_S seconds if given (so a test can check
 * that the head kills them) and exit 0. Uses only the public API.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <hv/hv.h>

static int parse_int(const char *s, const char *what, long min, long max, long *out) {
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max) {
        fprintf(stderr, "fail: %s: '%s' is not an integer in [%ld, %ld]\n", what, s, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

int main(int argc, char **argv) {
    long code = 1, target = 0, sleep_s = 0;
    if ((argc > 1 && parse_int(argv[1], "CODE", 0, 255, &code) != 0) ||
        (argc > 2 && parse_int(argv[2], "RANK", 0, 1L << 30, &target) != 0) ||
        (argc > 3 && parse_int(argv[3], "SLEEP_S", 0, 1L << 30, &sleep_s) != 0)) {
        fprintf(stderr, "usage: fail [CODE [RANK [SLEEP_S]]]\n");
        return 2;
    }
    hv_err rc = hv_init();
    if (rc != HV_OK) {
        fprintf(stderr, "fail: hv_init: %s\n", hv_strerror(rc));
        return 1;
    }
    int rank = hv_rank();
    printf("rank %d: stdout line\n", rank);
    fflush(stdout);
    fprintf(stderr, "rank %d: stderr line\n", rank);
    fflush(stderr);
    if (sleep_s > 0 && rank != (int)target) {
        struct timespec ts = {.tv_sec = sleep_s, .tv_nsec = 0};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
    int exit_code = rank == (int)target ? (int)code : 0;
    if (exit_code == 0) {
        hv_shutdown(); // a worker that succeeds says so (Done); the failing one just exits
    }
    return exit_code;
}
