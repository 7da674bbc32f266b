/*
 * reduce: the element-wise reduction kernels of libhv (dst = dst op src) for every hv_dtype and
 * hv_op, the AVG division, and exact float16/bfloat16 conversions (round to nearest even). It is
 * pure computation on caller memory: no allocation, no I/O, no state; every function is
 * thread-safe. Called by ring.c (reduce-scatter) and engine.c (small-message path). Built with
 * -O3 so the loops vectorise.
 */
#ifndef HV_WORKER_LIB_REDUCE_H
#define HV_WORKER_LIB_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#include "hv/hv.h"

/* True when dt / op are known values. */
int hv__dtype_valid(hv_dtype dt);
int hv__op_valid(hv_op op);
/* Stable short names ("float32", "sum") for messages. */
const char *hv__dtype_name(hv_dtype dt);
const char *hv__op_name(hv_op op);

/* dst[i] = dst[i] op src[i] for i < n elements. AVG reduces as SUM (divide once at the end with
 * hv__reduce_scale). dst and src must not overlap. */
void hv__reduce(hv_op op, hv_dtype dt, void *dst, const void *src, size_t n);

/* buf[i] /= divisor for n elements (the final step of AVG). Integers truncate toward zero. */
void hv__reduce_scale(hv_dtype dt, void *buf, size_t n, int divisor);

/* Exact conversions. float -> half/bfloat16 round to nearest, ties to even; overflow gives inf,
 * NaN stays NaN (quiet). */
uint16_t hv__f32_to_f16(float f);
float hv__f16_to_f32(uint16_t h);
uint16_t hv__f32_to_bf16(float f);
float hv__bf16_to_f32(uint16_t h);

#endif
