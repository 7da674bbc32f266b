/*
 * serve_test: how the rpc layer's tests run a blocking client against a server on the same
 * process's loop: the client on a second thread, the loop turned on the main thread until the
 * client returns. Test-only; include it after hv_check.h (its CHECK).
 */
#ifndef HV_COMMON_SERVE_TEST_H
#define HV_COMMON_SERVE_TEST_H

#include <pthread.h>
#include <unistd.h>

#include <uv.h>

#include "util.h"

typedef struct serve_test_client_s {
    void *(*fn)(void *); // the client, run on the second thread with a NULL argument
    volatile int done;   // set by that thread once fn returned
} serve_test_client_t;

static void *serve_test_trampoline(void *arg) {
    serve_test_client_t *c = arg;
    void *r = c->fn(NULL);
    c->done = 1;
    return r;
}

/* Runs fn on a thread while the main thread turns loop (and hook, optional, between turns),
 * until fn returns or limit_ms pass (a failed check), then lets the server see the client's
 * last closes for about 50 ms. */
static inline void serve_test_while(uv_loop_t *loop, void *(*fn)(void *), void (*hook)(void),
                                    uint64_t limit_ms) {
    serve_test_client_t c = {.fn = fn, .done = 0};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, serve_test_trampoline, &c) == 0);
    uint64_t deadline = hv_now_ms() + limit_ms;
    while (!c.done && hv_now_ms() < deadline) {
        uv_run(loop, UV_RUN_NOWAIT);
        if (hook != NULL) {
            hook();
        }
        usleep(200);
    }
    CHECK(c.done);
    pthread_join(t, NULL);
    for (int i = 0; i < 50; i++) {
        uv_run(loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
}

#endif
