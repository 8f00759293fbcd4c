/*
 * sort_key.h - a value as a 64-bit key whose unsigned order is ascending
 * order: NaN above +inf, -0 equal to +0; signed integers (and bool) offset
 * by 2^63, unsigned ones as they are.  Inverting every bit gives
 * descending order, NaN first.  The CPU's sort (cpu/select.c) and the CUDA
 * module's topk (cuda/topk_body.h) both order by these; plain C that nvcc
 * also compiles as device code.
 */
#ifndef TR_SORT_KEY_H
#define TR_SORT_KEY_H

#include <stdint.h>
#include <string.h>

#include "ew_scalar.h" /* TR_HD */

TR_HD static inline uint64_t tr__sort_key_f64(double v)
{
    uint64_t k;

    if (v != v)
        return UINT64_MAX;
    if (v == 0)
        v = 0.0; /* -0 sorts as +0: they are equal */
    memcpy(&k, &v, sizeof k);
    return k >> 63 ? ~k : k | ((uint64_t)1 << 63);
}

TR_HD static inline uint64_t tr__sort_key_i64(int64_t v)
{
    return (uint64_t)v ^ ((uint64_t)1 << 63);
}

#endif /* TR_SORT_KEY_H */
