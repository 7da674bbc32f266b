/*
 * fuzz_config: hvhead's config parser (head/config.c) on arbitrary text, from memory. Every
 * input must either load (then the result is checked for the invariants hvhead relies on) or
 * fail with a one-line message naming the file.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    hv_head_config_t cfg;
    char err[1024];
    err[0] = '\0';
    hv_err rc = hv_head_config_parse("fuzz.yaml", (const char *)data, size, &cfg, err, sizeof(err));
    if (rc == HV_OK) {
        /* What the rest of the head takes for granted of a loaded config. */
        if (cfg.cluster_name == NULL || cfg.listen == NULL || cfg.data_dir == NULL ||
            cfg.autoscaler.provider == NULL || cfg.heartbeat_ms < 50 ||
            cfg.lease_ms < 3 * cfg.heartbeat_ms || cfg.max_upload_bytes < 1024) {
            abort();
        }
        hv_head_config_fini(&cfg);
    } else if (err[0] == '\0' || strncmp(err, "fuzz.yaml", 9) != 0 || strchr(err, '\n') != NULL) {
        abort(); /* a refusal always says where, on one line */
    }
    return 0;
}
