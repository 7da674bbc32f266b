/*
 * actor_seq: a stateful actor and its caller for tests/integration/actor_move.sh (issue 17 §2:
 * a move keeps the state, loses and reorders no call).
 *
 *   actor_seq serve
 *       the actor (class "seq", started by the head with HV_ACTOR_*): method "seq" takes the
 *       decimal call number N and records it; "get" answers "count last bad" where bad counts
 *       the numbers that did not follow the previous one (a lost, repeated or reordered call);
 *       "pid" answers its process id. save/load keep the three numbers. With the creation
 *       argument "bulk=N" (HV_ACTOR_ARG) it also holds N bytes of state (zeros at first):
 *       "fill S" rewrites them from the seed S, "sum" answers "N HASH" (FNV-1a of the bytes);
 *       save/load keep them too (a large saved state, issue 17: a state over 1 MiB moved).
 *   actor_seq call NAME FIRST LAST PROGRESS_FILE [WINDOW]
 *       looks NAME up through the head (hv_actor_lookup: the handle re-resolves after a move)
 *       and sends "seq" FIRST..LAST, WINDOW in flight (default 4), 5 ms apart, writing the number of
 *       calls answered to PROGRESS_FILE as it goes. Prints "ok N resent R" (R: calls answered after being sent again) at the end;
 *       exits 1 on the first failed call, with its error.
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hv/actor.h"

typedef struct seq_s {
    long long count, last, bad;
    unsigned char *bulk; /* "bulk=N": N bytes of state (owned; NULL none) */
    size_t nbulk;
} seq_t;

static hv_err seq_create(void *ud, const void *arg, size_t len, void **self) {
    (void)ud;
    seq_t *s = calloc(1, sizeof(seq_t));
    char buf[64];
    if (s == NULL) {
        return HV_ENOMEM;
    }
    if (len > 5 && len < sizeof(buf) && memcmp(arg, "bulk=", 5) == 0) {
        memcpy(buf, arg, len);
        buf[len] = '\0';
        s->nbulk = (size_t)atoll(buf + 5);
        s->bulk = calloc(s->nbulk > 0 ? s->nbulk : 1, 1);
        if (s->bulk == NULL) {
            free(s);
            return HV_ENOMEM;
        }
    }
    *self = s;
    return HV_OK;
}

static unsigned long long bulk_sum(const seq_t *s) {
    unsigned long long h = 1469598103934665603ULL;
    for (size_t i = 0; i < s->nbulk; i++) {
        h = (h ^ s->bulk[i]) * 1099511628211ULL;
    }
    return h;
}

static hv_err seq_call(void *self, const char *method, const void *arg, size_t len,
                       hv_actor_out_t *out) {
    seq_t *s = self;
    char buf[96];
    if (strcmp(method, "seq") == 0) {
        if (len == 0 || len >= 32) {
            hv_actor_out_errorf(out, "seq takes a call number");
            return HV_EINVAL;
        }
        memcpy(buf, arg, len);
        buf[len] = '\0';
        long long n = atoll(buf);
        if (n != s->last + 1) {
            s->bad++;
        }
        s->last = n;
        s->count++;
        int k = snprintf(buf, sizeof(buf), "%lld", s->count);
        return hv_actor_out_append(out, buf, (size_t)k);
    }
    if (strcmp(method, "get") == 0) {
        int k = snprintf(buf, sizeof(buf), "%lld %lld %lld", s->count, s->last, s->bad);
        return hv_actor_out_append(out, buf, (size_t)k);
    }
    if (strcmp(method, "fill") == 0 && len > 0 && len < 32) {
        memcpy(buf, arg, len);
        buf[len] = '\0';
        unsigned long long x = (unsigned long long)atoll(buf) * 2654435761ULL + 1;
        for (size_t i = 0; i < s->nbulk; i++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            s->bulk[i] = (unsigned char)(x >> 56);
        }
        return hv_actor_out_append(out, "ok", 2);
    }
    if (strcmp(method, "sum") == 0) {
        int k = snprintf(buf, sizeof(buf), "%zu %llx", s->nbulk, bulk_sum(s));
        return hv_actor_out_append(out, buf, (size_t)k);
    }
    if (strcmp(method, "pid") == 0) {
        int k = snprintf(buf, sizeof(buf), "%ld", (long)getpid());
        return hv_actor_out_append(out, buf, (size_t)k);
    }
    hv_actor_out_errorf(out, "seq has no method '%s'", method);
    return HV_ENOTFOUND;
}

static void seq_destroy(void *self) {
    seq_t *s = self;
    free(s->bulk);
    free(s);
}

static hv_err seq_save(void *self, hv_actor_out_t *out) {
    seq_t *s = self;
    char buf[96];
    int k = snprintf(buf, sizeof(buf), "%lld %lld %lld\n", s->count, s->last, s->bad);
    hv_err rc = hv_actor_out_append(out, buf, (size_t)k);
    return rc == HV_OK && s->nbulk > 0 ? hv_actor_out_append(out, s->bulk, s->nbulk) : rc;
}

static hv_err seq_load(void *self, const void *state, size_t len) {
    seq_t *s = self;
    char buf[96];
    const char *nl = memchr(state, '\n', len < sizeof(buf) ? len : sizeof(buf));
    size_t head = nl != NULL ? (size_t)(nl - (const char *)state) + 1 : len;
    if (head >= sizeof(buf) || len - head != s->nbulk) {
        return HV_ECORRUPT; /* the numbers' line, then exactly the bulk bytes */
    }
    memcpy(buf, state, head);
    buf[head] = '\0';
    if (s->nbulk > 0) {
        memcpy(s->bulk, (const char *)state + head, s->nbulk);
    }
    return sscanf(buf, "%lld %lld %lld", &s->count, &s->last, &s->bad) == 3 ? HV_OK : HV_ECORRUPT;
}

static int serve(void) {
    hv_actor_class_t cls = HV_ACTOR_CLASS_INIT;
    cls.name = "seq";
    cls.create = seq_create;
    cls.call = seq_call;
    cls.destroy = seq_destroy;
    cls.save = seq_save;
    cls.load = seq_load;
    if (hv_actor_register(&cls) != HV_OK) {
        return 1;
    }
    hv_actor_server_config_t cfg = HV_ACTOR_SERVER_CONFIG_INIT;
    return hv_actor_serve(&cfg) == HV_OK ? 0 : 1;
}

static void progress(const char *path, long long n) {
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f != NULL) {
        fprintf(f, "%lld\n", n);
        fclose(f);
        rename(tmp, path);
    }
}

static int call(const char *name, long long first, long long last, const char *path, int window) {
    long long n = last - first + 1;
    hv_actor_t *a = NULL;
    char err[1024];
    hv_err rc = hv_actor_lookup(NULL, NULL, NULL, name, 20000, NULL, &a, err, sizeof(err));
    if (rc != HV_OK) {
        fprintf(stderr, "lookup %s: %s: %s\n", name, hv_errname(rc), err);
        return 1;
    }
    hv_future_t *inflight[64];
    long long nums[64];
    int head = 0, used = 0;
    long long next = first, done = 0, resent = 0;
    while (done < n) {
        while (used < window && next <= last) {
            char arg[32];
            int k = snprintf(arg, sizeof(arg), "%lld", next);
            int at = (head + used) % 64;
            rc = hv_actor_call_async(a, "seq", arg, (size_t)k, &inflight[at]);
            if (rc != HV_OK) {
                hv_actor_last_error(a, err, sizeof(err));
                fprintf(stderr, "call %lld not sent: %s: %s\n", next, hv_errname(rc), err);
                return 1;
            }
            nums[at] = next++;
            used++;
            struct timespec ts = {0, 5 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        hv_future_t *f = inflight[head];
        rc = hv_future_wait(f, 40000, NULL, NULL);
        if (rc != HV_OK) {
            fprintf(stderr, "call %lld failed: %s: %s (sent %u times)\n", nums[head],
                    hv_errname(rc), hv_future_error(f, NULL), hv_future_sends(f));
            return 1;
        }
        if (hv_future_sends(f) > 1) {
            resent++;
        }
        hv_future_destroy(f);
        head = (head + 1) % 64;
        used--;
        done++;
        if (done % 20 == 0 || done == n) {
            progress(path, done);
        }
    }
    printf("ok %lld resent %lld\n", done, resent);
    hv_actor_close(a);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "serve") == 0) {
        return serve();
    }
    if (argc >= 6 && strcmp(argv[1], "call") == 0) {
        int window = argc >= 7 ? atoi(argv[6]) : 4;
        if (window < 1 || window > 64) {
            fprintf(stderr, "WINDOW is 1 to 64\n");
            return 2;
        }
        return call(argv[2], atoll(argv[3]), atoll(argv[4]), argv[5], window);
    }
    fprintf(stderr,
            "usage: actor_seq serve | actor_seq call NAME FIRST LAST PROGRESS_FILE [WINDOW]\n");
    return 2;
}
