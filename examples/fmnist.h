/*
 * fmnist: a loader for Fashion-MNIST (Zalando's 28x28 grey-scale clothing images, 10 classes) in
 * the gzip-compressed idx format of the original distribution and of Debian's
 * dataset-fashion-mnist package (/usr/share/datasets/fashion-mnist). It reads one split ("train":
 * 60000 samples, "t10k": 10000) into memory, checking magic numbers, dimensions, sizes and labels,
 * and names the file in every error. It is example code for examples/elastic_train.c, not part of
 * libhv; it needs zlib. Not thread-safe with respect to the same fmnist_t.
 */
#ifndef HV_EXAMPLES_FMNIST_H
#define HV_EXAMPLES_FMNIST_H

#include <stddef.h>
#include <stdint.h>

#include <hv/hv.h>

#define FMNIST_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"
#define FMNIST_ROWS 28
#define FMNIST_COLS 28
#define FMNIST_PIXELS (FMNIST_ROWS * FMNIST_COLS)
#define FMNIST_CLASSES 10

/* idx magic numbers: 0x08 (unsigned byte data) in byte 2, the number of dimensions in byte 3. */
#define FMNIST_MAGIC_IMAGES 0x00000803u
#define FMNIST_MAGIC_LABELS 0x00000801u

/* One split in memory (caller storage; fmnist_load fills it, fmnist_fini frees it). */
typedef struct fmnist_s {
    size_t count;     /* samples loaded (the file's count, or the limit) */
    size_t available; /* samples in the files */
    uint8_t *images;  /* count * FMNIST_PIXELS bytes, image after image, row-major; owned */
    uint8_t *labels;  /* count labels in 0..FMNIST_CLASSES-1; owned */
} fmnist_t;

/* The data directory: $HV_FMNIST_DIR when set and not empty, else FMNIST_DEFAULT_DIR. Static or
 * environment storage; never NULL. */
const char *fmnist_default_dir(void);

/* Reads the idx file at path (gzip-compressed, or plain: zlib reads both) whose magic must be
 * magic (FMNIST_MAGIC_IMAGES or FMNIST_MAGIC_LABELS). dims receives the dimensions (the count
 * first; 3 entries for images, 1 for labels; the rest set to 1). With limit > 0 only the first
 * min(limit, count) items are read; with limit 0 all of them, and bytes after them are an error.
 * *out receives an owned buffer (free()) of *nitems items of dims[1] * dims[2] bytes each.
 * err (errlen bytes, may be NULL) receives "PATH: what went wrong" on failure.
 * Errors: HV_EINVAL (bad arguments), HV_ENOTFOUND (no such file), HV_EIO (read error, not gzip
 * data), HV_ECORRUPT (wrong magic, implausible dimensions, truncated file, trailing data),
 * HV_ENOMEM. */
hv_err fmnist_read_idx(const char *path, uint32_t magic, size_t limit, uint32_t dims[3],
                       uint8_t **out, size_t *nitems, char *err, size_t errlen);

/* Loads split ("train" or "t10k") from dir: <dir>/<split>-images-idx3-ubyte.gz and
 * <dir>/<split>-labels-idx1-ubyte.gz. limit > 0 keeps only the first limit samples (fewer when
 * the files hold fewer). Checks that the images are 28x28, that both files hold the same number
 * of samples and that every label is below 10. *out is filled only on success (fmnist_fini
 * frees it). err as for fmnist_read_idx. Errors: as fmnist_read_idx, and HV_ECORRUPT for a
 * mismatch between the two files or a label out of range. */
hv_err fmnist_load(const char *dir, const char *split, size_t limit, fmnist_t *out, char *err,
                   size_t errlen);

/* Frees what fmnist_load allocated and zeroes *d. NULL is a no-op. */
void fmnist_fini(fmnist_t *d);

#endif
