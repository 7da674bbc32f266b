/*
 * hv: the public entry points of libhv (include/hv/hv.h) and the process-wide state behind them.
 * It reads the HV_* environment once per hv_init, picks the rendezvous, and owns the one context
 * the public API talks to. It is not where collectives or transports live (see ring.c,
 * transport_*.c, engine.c); it only wires them together. Called by the user's training program.
 */
#include "err.h"

#include "hv/hv.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

#define HV_VERSION_STR_(a, b, c) #a "." #b "." #c
#define HV_VERSION_STR(a, b, c) HV_VERSION_STR_(a, b, c)

/* Process-wide state. Written by hv_init/hv_shutdown only (which are not thread-safe with each
 * other); the rank getters read atomics so they are safe from any thread. */
static struct {
    atomic_int inited;      // 1 between a successful hv_init and hv_shutdown
    atomic_int rank;        // -1 when not initialised
    atomic_int size;
    atomic_int local_rank;
    atomic_int local_size;
    char host[256];         // node name, "" when not initialised
} g = {.rank = -1, .size = -1, .local_rank = -1, .local_size = -1};

const char *hv_version(void) {
    return HV_VERSION_STR(HV_VERSION_MAJOR, HV_VERSION_MINOR, HV_VERSION_PATCH);
}

/* Parses the integer environment variable name into [min, max]; absent leaves *out alone. */
static hv_err env_int(const char *name, long min, long max, int *out) {
    const char *s = getenv(name);
    if (s == NULL || s[0] == '\0') {
        return HV_OK;
    }
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max) {
        HV_LOG(HV_LOG_ERROR, "init", "HV-INIT-ENV", "%s=%s: expected an integer in [%ld, %ld]",
               name, s, min, max);
        return HV_EINVAL;
    }
    *out = (int)v;
    return HV_OK;
}

hv_err hv_init(void) {
    if (atomic_load(&g.inited)) {
        return HV_ESTATE;
    }
    hv_log_init("libhv");
    int rank = 0, size = 1, local_rank = -1, local_size = -1;
    hv_err rc;
    HV_TRY_GOTO(env_int("HV_SIZE", 1, INT_MAX, &size), rc, out);
    HV_TRY_GOTO(env_int("HV_RANK", 0, INT_MAX, &rank), rc, out);
    HV_TRY_GOTO(env_int("HV_LOCAL_SIZE", 1, INT_MAX, &local_size), rc, out);
    HV_TRY_GOTO(env_int("HV_LOCAL_RANK", 0, INT_MAX, &local_rank), rc, out);
    if (rank >= size) {
        HV_LOG(HV_LOG_ERROR, "init", "HV-INIT-ENV", "HV_RANK=%d is not below HV_SIZE=%d", rank,
               size);
        rc = HV_EINVAL;
        goto out;
    }
    if (local_size < 0) {
        local_size = 1;
    }
    if (local_rank < 0) {
        local_rank = 0;
    }
    if (local_rank >= local_size) {
        HV_LOG(HV_LOG_ERROR, "init", "HV-INIT-ENV", "HV_LOCAL_RANK=%d is not below HV_LOCAL_SIZE=%d",
               local_rank, local_size);
        rc = HV_EINVAL;
        goto out;
    }
    const char *node = getenv("HV_NODE");
    if (node != NULL && node[0] != '\0') {
        snprintf(g.host, sizeof(g.host), "%s", node);
    } else if (gethostname(g.host, sizeof(g.host) - 1) != 0) {
        snprintf(g.host, sizeof(g.host), "localhost");
    }
    atomic_store(&g.rank, rank);
    atomic_store(&g.size, size);
    atomic_store(&g.local_rank, local_rank);
    atomic_store(&g.local_size, local_size);
    atomic_store(&g.inited, 1);
    rc = HV_OK;
out:
    return rc;
}

hv_err hv_shutdown(void) {
    if (!atomic_load(&g.inited)) {
        return HV_OK;
    }
    atomic_store(&g.rank, -1);
    atomic_store(&g.size, -1);
    atomic_store(&g.local_rank, -1);
    atomic_store(&g.local_size, -1);
    g.host[0] = '\0';
    atomic_store(&g.inited, 0);
    return HV_OK;
}

int hv_rank(void) { return atomic_load(&g.rank); }
int hv_size(void) { return atomic_load(&g.size); }
int hv_local_rank(void) { return atomic_load(&g.local_rank); }
int hv_local_size(void) { return atomic_load(&g.local_size); }
const char *hv_host_name(void) { return g.host; }
