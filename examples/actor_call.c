/*
 * actor_call: calls one method of an actor from the command line (include/hv/actor.h) and
 * prints the result. The secret comes from HV_ACTOR_SECRET (never from the command line, where
 * other users could read it).
 *
 *   HV_ACTOR_SECRET=... ./actor_call HOST:PORT METHOD [ARG] [--timeout MS]
 *   ./actor_call @[NAMESPACE/]NAME METHOD [ARG] [--timeout MS]
 *
 * The second form finds the actor by name through the head (hv_actor_lookup): HV_HEAD, and
 * HV_WORKER_SECRET inside a job's worker or HV_TOKEN_FILE (a client token) elsewhere.
 *
 * Exit status: 0 on success, 1 when the method returned an error (HV_EREMOTE), 2 when the call
 * was not delivered, 3 when its outcome is unknown (HV_EINDOUBT or a timeout), 64 on bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hv/actor.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr,
                "usage: HV_ACTOR_SECRET=... %s HOST:PORT METHOD [ARG] [--timeout MS]\n"
                "       %s @[NAMESPACE/]NAME METHOD [ARG] [--timeout MS]\n",
                argv[0], argv[0]);
        return 64;
    }
    const char *arg = argc > 3 && strcmp(argv[3], "--timeout") != 0 ? argv[3] : "";
    unsigned timeout = 10000;
    for (int i = 3; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--timeout") == 0) {
            timeout = (unsigned)strtoul(argv[i + 1], NULL, 10);
        }
    }
    const char *secret = getenv("HV_ACTOR_SECRET");
    char err[1024] = "";
    hv_actor_t *a = NULL;
    hv_err rc;
    if (argv[1][0] == '@') {
        char ns[128] = "";
        const char *name = argv[1] + 1, *slash = strchr(name, '/');
        if (slash != NULL && (size_t)(slash - name) < sizeof(ns)) {
            memcpy(ns, name, (size_t)(slash - name));
            ns[slash - name] = '\0';
            name = slash + 1;
        }
        rc = hv_actor_lookup(NULL, NULL, ns, name, timeout, NULL, &a, err, sizeof(err));
    } else {
        rc = hv_actor_connect(argv[1], secret ? secret : "", NULL, &a, err, sizeof(err));
    }
    if (rc != HV_OK) {
        fprintf(stderr, "actor_call: %s (%s)\n", err, hv_errname(rc));
        return 2;
    }
    void *res = NULL;
    size_t len = 0;
    rc = hv_actor_call(a, argv[2], arg, strlen(arg), timeout, &res, &len, err, sizeof(err));
    hv_actor_close(a);
    if (rc != HV_OK) {
        fprintf(stderr, "actor_call: %s (%s)\n", err, hv_errname(rc));
        return rc == HV_EREMOTE ? 1 : rc == HV_EINDOUBT || rc == HV_ETIMEDOUT ? 3 : 2;
    }
    fwrite(res, 1, len, stdout);
    fputc('\n', stdout);
    hv_actor_free(res);
    return 0;
}
