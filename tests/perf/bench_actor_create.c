/*
 * bench_actor_create: create to first call served, from one C program (tests/perf/
 * bench_actor_create.sh runs it beside the CLI path). It creates actors of class "counter" running
 * PROGRAM (a program on the nodes) with Actors.Create, one after the other on one channel, and
 * right after each create starts a thread that looks the actor up by name (hv_actor_lookup: one
 * Actors.Get, again every 100 ms while the actor is not alive yet, then a connection to it) and
 * calls "get" on it. It prints, per actor and in total, the time from just before its Create to
 * the moment its first call returned.
 *
 *   bench_actor_create HEAD PREFIX N PROGRAM
 *
 * The credential is the client token in $HV_TOKEN_FILE. Every wait is bounded: 10 s a Create,
 * 60 s a lookup, 10 s a call. Exit 0 when every actor served its first call, 1 otherwise, 2 on
 * bad usage. Not a test of correctness; the actors stay (the script's cleanup kills them).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hv.pb-c.h"
#include "rpc.h"

#include <hv/actor.h>

#define BENCH_MAX_ACTORS 1000

typedef struct {
    const char *head;  /* borrowed: argv */
    const char *token; /* borrowed: main's buffer */
    char name[64];     /* the actor's name */
    uint64_t t_create; /* ns, CLOCK_MONOTONIC: just before its Create */
    uint64_t t_served; /* ns: its first call returned; 0 when it failed */
    pthread_t th;
    int started; /* th was started */
} bench_actor_t;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *first_call(void *arg) {
    bench_actor_t *b = arg;
    hv_actor_t *a = NULL;
    char err[512];
    hv_err rc =
        hv_actor_lookup(b->head, b->token, "default", b->name, 60000, NULL, &a, err, sizeof(err));
    void *res = NULL;
    size_t len = 0;
    if (rc == HV_OK) {
        rc = hv_actor_call(a, "get", NULL, 0, 10000, &res, &len, err, sizeof(err));
        hv_actor_close(a);
    }
    if (rc == HV_OK) {
        b->t_served = now_ns();
        hv_actor_free(res);
    } else {
        fprintf(stderr, "bench_actor_create: %s: %s (%s)\n", b->name, err, hv_errname(rc));
    }
    return NULL;
}

static int create(hv_rpc_channel_t *ch, const char *name, const char *program) {
    Hvpb__V1__ActorSpec sp = HVPB__V1__ACTOR_SPEC__INIT;
    sp.name = (char *)name;
    sp.namespace_ = "";
    sp.class_name = "counter";
    sp.arg = "";
    sp.slots = 1;
    sp.detached = 1;
    sp.command = (char *)program;
    Hvpb__V1__CreateActorRequest req = HVPB__V1__CREATE_ACTOR_REQUEST__INIT;
    req.spec = &sp;
    ProtobufCMessage *resp = NULL;
    hv_rpc_status_t st;
    memset(&st, 0, sizeof(st));
    if (hv_rpc_unary(ch, "/hvpb.v1.Actors/Create", &req.base, &hvpb__v1__actor_view__descriptor,
                     10000, &resp, &st) != HV_OK) {
        fprintf(stderr, "bench_actor_create: create %s: %s\n", name, st.msg);
        return -1;
    }
    hv_rpc_msg_free(resp);
    return 0;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc != 5 || atoi(argv[3]) < 1 || atoi(argv[3]) > BENCH_MAX_ACTORS) {
        fprintf(stderr, "usage: HV_TOKEN_FILE=... %s HEAD PREFIX N PROGRAM (N: 1 to %d)\n", argv[0],
                BENCH_MAX_ACTORS);
        return 2;
    }
    const char *head = argv[1], *prefix = argv[2], *program = argv[4];
    size_t n = (size_t)atoi(argv[3]);
    char token[512] = "";
    const char *path = getenv("HV_TOKEN_FILE");
    FILE *f = path != NULL ? fopen(path, "re") : NULL;
    if (f == NULL || fgets(token, sizeof(token), f) == NULL) {
        fprintf(stderr, "bench_actor_create: no client token in $HV_TOKEN_FILE\n");
        if (f != NULL) {
            fclose(f);
        }
        return 2;
    }
    fclose(f);
    token[strcspn(token, "\r\n")] = '\0';
    hv_rpc_channel_t *ch = NULL;
    if (hv_rpc_channel_create(head, &ch) != HV_OK || hv_rpc_channel_set_token(ch, token) != HV_OK) {
        fprintf(stderr, "bench_actor_create: cannot open a channel to %s\n", head);
        hv_rpc_channel_destroy(ch);
        return 1;
    }
    bench_actor_t *bs = calloc(n, sizeof(*bs));
    uint64_t *lat = calloc(n, sizeof(*lat));
    int status = bs != NULL && lat != NULL ? 0 : 1;
    uint64_t creates_done = 0;
    for (size_t i = 0; status == 0 && i < n; i++) {
        bench_actor_t *b = &bs[i];
        b->head = head;
        b->token = token;
        snprintf(b->name, sizeof(b->name), "%.40s%zu", prefix, i + 1);
        b->t_create = now_ns();
        if (create(ch, b->name, program) != 0) {
            status = 1;
            break;
        }
        if (pthread_create(&b->th, NULL, first_call, b) != 0) {
            fprintf(stderr, "bench_actor_create: cannot start a thread\n");
            status = 1;
            break;
        }
        b->started = 1;
    }
    creates_done = now_ns();
    size_t served = 0;
    uint64_t last = 0;
    for (size_t i = 0; bs != NULL && i < n; i++) {
        if (bs[i].started) {
            pthread_join(bs[i].th, NULL);
        }
        if (bs[i].t_served != 0) {
            lat[served++] = bs[i].t_served - bs[i].t_create;
            last = bs[i].t_served > last ? bs[i].t_served : last;
        }
    }
    if (status == 0 && served == n) {
        qsort(lat, n, sizeof(*lat), cmp_u64);
        double med = n % 2 ? (double)lat[n / 2] : ((double)lat[n / 2 - 1] + lat[n / 2]) / 2;
        size_t p99 = (99 * n + 99) / 100; /* the ceil(0.99 n)-th, 1-based */
        printf("%zu actors: create -> first call: median %.1f ms, p99 %.1f ms, max %.1f ms; "
               "%zu creates took %.1f ms (%.2f ms each); first create -> all served %.1f ms\n",
               n, med / 1e6, (double)lat[p99 - 1] / 1e6, (double)lat[n - 1] / 1e6, n,
               (double)(creates_done - bs[0].t_create) / 1e6,
               (double)(creates_done - bs[0].t_create) / 1e6 / (double)n,
               (double)(last - bs[0].t_create) / 1e6);
    } else {
        fprintf(stderr, "bench_actor_create: %zu of %zu actors served a first call\n", served, n);
        status = 1;
    }
    free(lat);
    free(bs);
    hv_rpc_channel_destroy(ch);
    memset(token, 0, sizeof(token));
    return status;
}
