/*
 * actor_counter: an example actor process (include/hv/actor.h). It registers the class "counter"
 * and serves one instance until SIGTERM or SIGINT; its state (the count and the number of adds)
 * survives a stop and a restart through save/load when HV_ACTOR_STATE_OUT / HV_ACTOR_STATE_IN
 * are set. Everything else comes from the environment as a later head will set it:
 *
 *   HV_ACTOR_CLASS=counter HV_ACTOR_SECRET=<16+ bytes> HV_ACTOR_LISTEN=127.0.0.1:0 \
 *   HV_ACTOR_ADDR_FILE=/tmp/a.addr [HV_ACTOR_ARG=<initial count>] ./actor_counter
 *
 * Methods (arguments and results are text, except echo):
 *   add N    adds N (a signed decimal) and returns the new count
 *   get      returns the count
 *   echo     returns its argument unchanged (the benchmark's call)
 *   fail     returns HV_EINVAL with a message (a method error)
 *   crash    aborts the process (a method that crashes the actor)
 * The caller is examples/actor_call.c; tests/perf/bench_actor.sh measures echo.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hv/actor.h>

typedef struct counter_s {
    int64_t count; // the running sum of add
    int64_t adds;  // how many adds it took
} counter_t;

/* Parses a signed decimal of len bytes (not NUL-terminated). */
static int parse_i64(const void *arg, size_t len, int64_t *out) {
    char buf[32];
    if (len == 0 || len >= sizeof(buf)) {
        return -1;
    }
    memcpy(buf, arg, len);
    buf[len] = '\0';
    char *end = NULL;
    long long v = strtoll(buf, &end, 10);
    if (end == NULL || *end != '\0') {
        return -1;
    }
    *out = v;
    return 0;
}

static hv_err counter_create(void *ud, const void *arg, size_t len, void **self_out) {
    (void)ud;
    counter_t *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return HV_ENOMEM;
    }
    if (len > 0 && parse_i64(arg, len, &c->count) != 0) {
        free(c);
        return HV_EINVAL;
    }
    *self_out = c;
    return HV_OK;
}

static hv_err put_i64(hv_actor_out_t *out, int64_t v) {
    char buf[32];
    int n = snprintf(buf, sizeof(buf), "%" PRId64, v);
    return hv_actor_out_append(out, buf, (size_t)n);
}

static hv_err counter_call(void *self, const char *method, const void *arg, size_t len,
                           hv_actor_out_t *out) {
    counter_t *c = self;
    if (strcmp(method, "echo") == 0) {
        return hv_actor_out_append(out, arg, len);
    }
    if (strcmp(method, "add") == 0) {
        int64_t n;
        if (parse_i64(arg, len, &n) != 0) {
            hv_actor_out_errorf(out, "add: '%.*s' is not a number", (int)(len < 40 ? len : 40),
                                (const char *)arg);
            return HV_EINVAL;
        }
        c->count += n;
        c->adds++;
        return put_i64(out, c->count);
    }
    if (strcmp(method, "get") == 0) {
        return put_i64(out, c->count);
    }
    if (strcmp(method, "adds") == 0) {
        return put_i64(out, c->adds);
    }
    if (strcmp(method, "fail") == 0) {
        hv_actor_out_errorf(out, "fail: this method always fails (count %" PRId64 ")", c->count);
        return HV_EINVAL;
    }
    if (strcmp(method, "crash") == 0) {
        abort();
    }
    hv_actor_out_errorf(out, "counter has no method '%s'", method);
    return HV_ENOTFOUND;
}

static void counter_destroy(void *self) { free(self); }

/* The state is two decimal numbers, "count adds". */
static hv_err counter_save(void *self, hv_actor_out_t *out) {
    counter_t *c = self;
    char buf[64];
    int n = snprintf(buf, sizeof(buf), "%" PRId64 " %" PRId64 "\n", c->count, c->adds);
    return hv_actor_out_append(out, buf, (size_t)n);
}

static hv_err counter_load(void *self, const void *state, size_t len) {
    counter_t *c = self;
    char buf[64];
    if (len >= sizeof(buf)) {
        return HV_ECORRUPT;
    }
    memcpy(buf, state, len);
    buf[len] = '\0';
    long long count, adds;
    if (sscanf(buf, "%lld %lld", &count, &adds) != 2) {
        return HV_ECORRUPT;
    }
    c->count = count;
    c->adds = adds;
    return HV_OK;
}

int main(void) {
    hv_actor_class_t cls = HV_ACTOR_CLASS_INIT;
    cls.name = "counter";
    cls.create = counter_create;
    cls.call = counter_call;
    cls.destroy = counter_destroy;
    cls.save = counter_save;
    cls.load = counter_load;
    hv_err rc = hv_actor_register(&cls);
    if (rc != HV_OK) {
        fprintf(stderr, "actor_counter: %s\n", hv_strerror(rc));
        return 1;
    }
    hv_actor_server_config_t cfg = HV_ACTOR_SERVER_CONFIG_INIT;
    if (getenv("HV_ACTOR_CLASS") == NULL) {
        cfg.class_name = "counter";
    }
    rc = hv_actor_serve(&cfg);
    if (rc != HV_OK) {
        fprintf(stderr, "actor_counter: %s (%s)\n", hv_strerror(rc), hv_errname(rc));
        return 1;
    }
    return 0;
}
