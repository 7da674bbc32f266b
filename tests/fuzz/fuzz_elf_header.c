/*
 * fuzz_elf_header: hvsubmit's ELF check (head/cli/cli_common.c hv_cli_elf_check_header) on any
 * bytes. It must never read past the buffer (ASan), must say why when it refuses, and may accept
 * only what starts with the ELF magic and holds a whole header of its class.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* a copy of exactly size bytes, so any read past it is caught */
    unsigned char *buf = malloc(size ? size : 1);
    if (buf == NULL) {
        return 0;
    }
    memcpy(buf, data, size);
    char err[256];
    memset(err, 'x', sizeof(err));
    hv_err rc = hv_cli_elf_check_header(buf, size, err, sizeof(err));
    if (rc == HV_OK) {
        size_t need = size >= 5 && buf[4] == 1 ? 52 : 64; /* Elf32_Ehdr / Elf64_Ehdr */
        if (size < need || memcmp(buf,
                                  "\x7f"
                                  "ELF",
                                  4) != 0) {
            abort();
        }
    } else if (memchr(err, '\0', sizeof(err)) == NULL || err[0] == '\0') {
        abort(); /* a refusal always says why */
    }
    free(buf);
    return 0;
}
