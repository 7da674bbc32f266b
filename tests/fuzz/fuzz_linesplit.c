/*
 * fuzz_linesplit: the agent's output line splitter (agent/spawn.c hv_linesplit_*). The first
 * bytes choose how the rest is cut into reads (as pipes deliver it); the splitter must deliver
 * pieces of at most HV_PROC_LINE_MAX bytes without a newline in them, and the pieces joined must
 * be exactly the input without its newlines (nothing lost, nothing invented).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spawn.h"

typedef struct out_s {
    const uint8_t *want; /* the input without newlines */
    size_t want_len;
    size_t got; /* bytes delivered so far */
} out_t;

static void on_piece(void *ud, const char *line, size_t len) {
    out_t *o = ud;
    if (len > HV_PROC_LINE_MAX || memchr(line, '\n', len) != NULL || o->got + len > o->want_len ||
        memcmp(o->want + o->got, line, len) != 0) {
        abort();
    }
    o->got += len;
}

static hv_linesplit_t ls; /* 16 KiB: not on the stack */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) {
        return 0;
    }
    unsigned step_seed = data[0] | (unsigned)data[1] << 8;
    data += 2;
    size -= 2;
    uint8_t *want = malloc(size ? size : 1);
    if (want == NULL) {
        return 0;
    }
    size_t wl = 0;
    for (size_t i = 0; i < size; i++) {
        if (data[i] != '\n') {
            want[wl++] = data[i];
        }
    }
    out_t o = {want, wl, 0};
    memset(&ls, 0, sizeof(ls));
    /* Reads of 1 .. 2*HV_PROC_LINE_MAX bytes, varying with the seed. */
    size_t off = 0;
    unsigned x = step_seed | 1;
    while (off < size) {
        x = x * 1103515245u + 12345u;
        size_t step = 1 + (x >> 8) % (2 * HV_PROC_LINE_MAX);
        if (step > size - off) {
            step = size - off;
        }
        hv_linesplit_feed(&ls, (const char *)data + off, step, on_piece, &o, NULL);
        off += step;
    }
    hv_linesplit_flush(&ls, on_piece, &o);
    if (o.got != wl || ls.len != 0) {
        abort();
    }
    free(want);
    return 0;
}
