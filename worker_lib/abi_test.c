/*
 * abi_test: what a user of the installed library sees. This file includes only <hv/hv.h> (not
 * hv's internal err.h), so it checks that the public copy of hv_err has the same values as the
 * internal one, and it loads libhv.so with dlopen to check that only the public hv_* API is
 * exported (no internal hv__ symbols, no common/ helpers such as hv_malloc).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <hv/hv.h>

_Static_assert(HV_OK == 0 && HV_EINVAL == 1 && HV_ENOMEM == 2 && HV_ETIMEDOUT == 3, "hv_err");
_Static_assert(HV_ECLOSED == 4 && HV_ECANCELED == 5 && HV_EPROTO == 6 && HV_ESTATE == 7, "hv_err");
_Static_assert(HV_EPEER == 8 && HV_EIO == 9 && HV_EINTERNAL == 10 && HV_ENOTFOUND == 11, "hv_err");
_Static_assert(HV_EEXIST == 12 && HV_EPERM == 13 && HV_EUNAVAIL == 14 && HV_ETOOBIG == 15,
               "hv_err");
_Static_assert(HV_ENOTSUP == 16 && HV_ECORRUPT == 17 && HV_ERESET == 18 && HV_EAUTH == 19,
               "hv_err");
_Static_assert(HV_EINDOUBT == 20 && HV_EREMOTE == 21, "hv_err");
_Static_assert(HV__ERR_COUNT == 22, "a new hv_err value must be added to hv/hv.h too");

static int failures;

static void expect(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "FAIL %s\n", what);
        failures++;
    }
}

int main(int argc, char **argv) {
    const char *lib = argc > 1 ? argv[1] : "libhv.so";
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        fprintf(stderr, "FAIL dlopen %s: %s\n", lib, dlerror());
        return 1;
    }
    static const char *public_api[] = {"hv_version",
                                       "hv_strerror",
                                       "hv_errname",
                                       "hv_init",
                                       "hv_init_config",
                                       "hv_shutdown",
                                       "hv_abort",
                                       "hv_last_error",
                                       "hv_set_logger",
                                       "hv_rank",
                                       "hv_size",
                                       "hv_local_rank",
                                       "hv_local_size",
                                       "hv_host_name",
                                       "hv_dtype_size",
                                       "hv_allreduce",
                                       "hv_allreduce_async",
                                       "hv_allreduce_group_async",
                                       "hv_broadcast",
                                       "hv_broadcast_async",
                                       "hv_cuda_built",
                                       "hv_allreduce_on",
                                       "hv_allreduce_async_on",
                                       "hv_broadcast_on",
                                       "hv_broadcast_async_on",
                                       "hv_allgather",
                                       "hv_barrier",
                                       "hv_wait",
                                       "hv_test",
                                       "hv_request_size",
                                       "hv_set_size_callback",
                                       "hv_state_save",
                                       "hv_state_load",
                                       "hv_actor_register",
                                       "hv_actor_serve",
                                       "hv_actor_connect",
                                       "hv_actor_call_async",
                                       "hv_future_wait",
                                       "hv_future_sends",
                                       "hv_actor_close",
                                       "hv_actor_lookup",
                                       "hv_actor_last_error",
                                       "hv_actor_out_error",
                                       "hv_shutdown_at_exit",
                                       "hv_cross_rank",
                                       "hv_cross_size",
                                       "hv_allgather_async",
                                       "hv_join"};
    for (size_t i = 0; i < sizeof(public_api) / sizeof(public_api[0]); i++) {
        char what[128];
        snprintf(what, sizeof(what), "%s is exported", public_api[i]);
        expect(dlsym(h, public_api[i]) != NULL, what);
    }
    static const char *internal[] = {"hv__engine_create", "hv__ring_allreduce",
                                     "hv_malloc",         "hv_log_write",
                                     "hv_rpc_unary",      "hv__reduce",
                                     "hv_grow_parse",     "hvpb__v1__rdzv_join_request__descriptor",
                                     "hv__actor_mac",     "hv_hmac_sha256"};
    for (size_t i = 0; i < sizeof(internal) / sizeof(internal[0]); i++) {
        char what[128];
        snprintf(what, sizeof(what), "%s is not exported", internal[i]);
        expect(dlsym(h, internal[i]) == NULL, what);
    }
    const char *(*version)(void) = (const char *(*)(void))dlsym(h, "hv_version");
    char want[32];
    snprintf(want, sizeof(want), "%d.%d.%d", HV_VERSION_MAJOR, HV_VERSION_MINOR, HV_VERSION_PATCH);
    expect(version != NULL && strcmp(version(), want) == 0, "hv_version matches the header");
    const char *(*errname)(hv_err) = (const char *(*)(hv_err))dlsym(h, "hv_errname");
    expect(errname != NULL && strcmp(errname(HV_ERESET), "HV_ERESET") == 0,
           "public and internal hv_err agree (HV_ERESET)");
    expect(errname != NULL && strcmp(errname(HV_EPEER), "HV_EPEER") == 0,
           "public and internal hv_err agree (HV_EPEER)");
    // The library knows no value past the public HV__ERR_COUNT: a code appended to common/err.h
    // must be appended to <hv/hv.h> too.
    expect(errname != NULL && strcmp(errname(HV__ERR_COUNT), "HV_E?") == 0,
           "<hv/hv.h> has every hv_err value of common/err.h");
    expect(errname != NULL && strcmp(errname((hv_err)(HV__ERR_COUNT - 1)), "HV_E?") != 0,
           "<hv/hv.h> has no hv_err value the library does not know");
    size_t (*dsize)(hv_dtype) = (size_t(*)(hv_dtype))dlsym(h, "hv_dtype_size");
    expect(dsize != NULL && dsize(HV_BFLOAT16) == 2 && dsize(HV_INT64) == 8, "hv_dtype_size");
    dlclose(h);
    fprintf(stderr, "%s abi\n", failures ? "FAIL" : "ok  ");
    return failures ? 1 : 0;
}
