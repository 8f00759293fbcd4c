/*
 * convert_scalar.h - one value from one dtype to another, by the rules of
 * tr_copy_into: the exact 16-bit float conversions, and each source's load
 * into the widest value of its kind (double for floats, int64_t or
 * uint64_t for integers and bool) with each destination's store from it,
 * so that every pair rounds or wraps once, from the source's exact value.
 * The CPU's conversion loops (cpu/cast.c, dtype.c) and the CUDA module's
 * kernels both use these; plain C that nvcc compiles as device code too.
 */
#ifndef TR_CONVERT_SCALAR_H
#define TR_CONVERT_SCALAR_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ew_scalar.h" /* TR_HD */
#include "tensorrun.h" /* enum tr_dtype */

TR_HD static inline int tr__clz64(uint64_t v)
{
#ifdef __CUDA_ARCH__
    return __clzll((long long)v);
#else
    return __builtin_clzll(v);
#endif
}

/* ------------------------------------------------------ 16-bit floats */

TR_HD static inline uint32_t tr__float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

TR_HD static inline float tr__bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Rounds m >> shift to nearest, ties to even (shift in 1..31). */
TR_HD static inline uint32_t tr__shift_round_even(uint32_t m, unsigned shift)
{
    uint32_t r = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);

    if (rem > half || (rem == half && (r & 1)))
        r++;
    return r;
}

TR_HD static inline float tr__f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;

    if (exp == 0x1f) /* infinity, or NaN made quiet */
        return tr__bits_float(sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0));
    if (exp == 0) {
        /* zero or subnormal: man units of 2^-24, exact in f32 */
        float v = (float)man * 0x1p-24f;
        return sign ? -v : v;
    }
    return tr__bits_float(sign | ((exp + 112) << 23) | (man << 13));
}

TR_HD static inline uint16_t tr__f32_to_f16(float value)
{
    uint32_t x = tr__float_bits(value);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t a = x & 0x7fffffffu;
    uint32_t e = a >> 23;

    if (a > 0x7f800000u) /* NaN: quiet, top payload bits kept */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) /* 65520 and up round past 65504: infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (e < 113) {
        /* below 2^-14: an f16 subnormal (or zero) in units of 2^-24 */
        unsigned shift = 126 - e;
        if (e == 0 || shift > 24)
            return sign;
        return (uint16_t)(sign | tr__shift_round_even((a & 0x7fffffu) | 0x800000u, shift));
    }
    /* normal: rebias the exponent, round 23 mantissa bits to 10; a carry
     * out of the mantissa correctly bumps the exponent */
    return (uint16_t)(sign | tr__shift_round_even(((e - 112) << 23) | (a & 0x7fffffu), 13));
}

TR_HD static inline float tr__bf16_to_f32(uint16_t bits)
{
    uint32_t u = (uint32_t)bits << 16;

    if ((u & 0x7fffffffu) > 0x7f800000u)
        u |= 0x400000u;
    return tr__bits_float(u);
}

TR_HD static inline uint16_t tr__f32_to_bf16(float value)
{
    uint32_t x = tr__float_bits(value);

    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)tr__shift_round_even(x, 16);
}

/* d rounded to f32 "to odd": truncated toward zero, with the last bit set
 * when anything was cut off.  Rounding that once more to a format with at
 * least two fewer significant bits, to nearest even, gives exactly the
 * correctly rounded result from d, which rounding through (float)d does not
 * always (double rounding). */
TR_HD static inline float tr__f64_to_f32_round_odd(double d)
{
    float f = (float)d;
    uint32_t bits;

    if (d != d || (double)f == d)
        return f;
    bits = tr__float_bits(f);
    if (fabs((double)f) > fabs(d))
        bits--; /* rounded away from zero: step back toward it */
    return tr__bits_float(bits | 1u);
}

TR_HD static inline uint16_t tr__f64_to_f16(double value)
{
    return tr__f32_to_f16(tr__f64_to_f32_round_odd(value));
}

TR_HD static inline uint16_t tr__f64_to_bf16(double value)
{
    return tr__f32_to_bf16(tr__f64_to_f32_round_odd(value));
}

/* --------------------------------------------------------------- loads */

TR_HD static inline uint64_t tr__cv_load_bool(uint8_t x) { return x != 0; }
TR_HD static inline uint64_t tr__cv_load_u8(uint8_t x) { return x; }
TR_HD static inline uint64_t tr__cv_load_u16(uint16_t x) { return x; }
TR_HD static inline uint64_t tr__cv_load_u32(uint32_t x) { return x; }
TR_HD static inline uint64_t tr__cv_load_u64(uint64_t x) { return x; }
TR_HD static inline int64_t tr__cv_load_i8(int8_t x) { return x; }
TR_HD static inline int64_t tr__cv_load_i16(int16_t x) { return x; }
TR_HD static inline int64_t tr__cv_load_i32(int32_t x) { return x; }
TR_HD static inline int64_t tr__cv_load_i64(int64_t x) { return x; }
TR_HD static inline double tr__cv_load_f16(uint16_t x) { return tr__f16_to_f32(x); }
TR_HD static inline double tr__cv_load_bf16(uint16_t x) { return tr__bf16_to_f32(x); }
TR_HD static inline double tr__cv_load_f32(float x) { return x; }
TR_HD static inline double tr__cv_load_f64(double x) { return x; }

/* -------------------------------------------------------------- stores */

/* Integers from integers wrap; from floats truncate toward zero and
 * saturate, NaN giving 0.  (double)MAX may round up past MAX (2^63 for
 * int64), which the >= comparison turns into saturation as wanted. */
#define TR__CV_INTEGER_STORES(T, MIN, MAX)                                          \
    TR_HD static inline T tr__cv_##T##_from_u(uint64_t v) { return (T)v; }                 \
    TR_HD static inline T tr__cv_##T##_from_i(int64_t v) { return (T)(uint64_t)v; }       \
    TR_HD static inline T tr__cv_##T##_from_f(double v)                                     \
    {                                                                        \
        if (v != v)                                                          \
            return 0;                                                        \
        if (v <= (double)(MIN))                                              \
            return (MIN);                                                    \
        if (v >= (double)(MAX))                                              \
            return (MAX);                                                    \
        return (T)v;                                                         \
    }

TR__CV_INTEGER_STORES(uint8_t, 0, UINT8_MAX)
TR__CV_INTEGER_STORES(uint16_t, 0, UINT16_MAX)
TR__CV_INTEGER_STORES(uint32_t, 0, UINT32_MAX)
TR__CV_INTEGER_STORES(uint64_t, 0, UINT64_MAX)
TR__CV_INTEGER_STORES(int8_t, INT8_MIN, INT8_MAX)
TR__CV_INTEGER_STORES(int16_t, INT16_MIN, INT16_MAX)
TR__CV_INTEGER_STORES(int32_t, INT32_MIN, INT32_MAX)
TR__CV_INTEGER_STORES(int64_t, INT64_MIN, INT64_MAX)

TR_HD static inline uint8_t tr__cv_boolean_from_u(uint64_t v) { return v != 0; }
TR_HD static inline uint8_t tr__cv_boolean_from_i(int64_t v) { return v != 0; }
TR_HD static inline uint8_t tr__cv_boolean_from_f(double v) { return v != 0; }

/* An integer as a double rounded "to odd" (cut toward zero, the last bit
 * set when anything was cut off), so that rounding it once more, to the
 * 11 or 8 significant bits of f16 or bf16, rounds once from the exact
 * integer.  Exact below 2^53. */
TR_HD static inline double tr__cv_u64_round_odd(uint64_t v)
{
    int shift = v >> 53 ? 11 - tr__clz64(v) : 0;

    if (shift <= 0)
        return (double)v;
    return ldexp((double)((v >> shift) | ((v & ((UINT64_C(1) << shift) - 1)) != 0)), shift);
}

TR_HD static inline double tr__cv_i64_round_odd(int64_t v)
{
    return v < 0 ? -tr__cv_u64_round_odd((uint64_t)0 - (uint64_t)v) : tr__cv_u64_round_odd((uint64_t)v);
}

TR_HD static inline uint16_t tr__cv_f16_from_u(uint64_t v) { return tr__f64_to_f16(tr__cv_u64_round_odd(v)); }
TR_HD static inline uint16_t tr__cv_f16_from_i(int64_t v) { return tr__f64_to_f16(tr__cv_i64_round_odd(v)); }
TR_HD static inline uint16_t tr__cv_f16_from_f(double v) { return tr__f64_to_f16(v); }
TR_HD static inline uint16_t tr__cv_bf16_from_u(uint64_t v) { return tr__f64_to_bf16(tr__cv_u64_round_odd(v)); }
TR_HD static inline uint16_t tr__cv_bf16_from_i(int64_t v) { return tr__f64_to_bf16(tr__cv_i64_round_odd(v)); }
TR_HD static inline uint16_t tr__cv_bf16_from_f(double v) { return tr__f64_to_bf16(v); }
TR_HD static inline float tr__cv_f32_from_u(uint64_t v) { return (float)v; }
TR_HD static inline float tr__cv_f32_from_i(int64_t v) { return (float)v; }
TR_HD static inline float tr__cv_f32_from_f(double v) { return (float)v; }
TR_HD static inline double tr__cv_f64_from_u(uint64_t v) { return (double)v; }
TR_HD static inline double tr__cv_f64_from_i(int64_t v) { return (double)v; }
TR_HD static inline double tr__cv_f64_from_f(double v) { return v; }

/* ------------------------------------------------------ any to any */

/* The bytes of one element of dtype. */
TR_HD static inline int64_t tr__item_size(int dtype)
{
    switch (dtype) {
    case TR_DTYPE_BOOL: case TR_DTYPE_U8: case TR_DTYPE_I8: return 1;
    case TR_DTYPE_U16: case TR_DTYPE_I16: case TR_DTYPE_F16: case TR_DTYPE_BF16: return 2;
    case TR_DTYPE_U32: case TR_DTYPE_I32: case TR_DTYPE_F32: return 4;
    default: return 8;
    }
}

/* The value at src, of dtype from, stored at dst as dtype to. */
TR_HD static inline void tr__convert_value(void *dst, enum tr_dtype to, const void *src,
                                           enum tr_dtype from)
{
    int kind = 0; /* 'u', 'i' or 'f': which of the three holds the value */
    uint64_t u = 0;
    int64_t i = 0;
    double f = 0;

    /* the same dtype: the bits as they are, as the CPU's copies keep them
     * (through double, a GPU would make every NaN its one NaN) */
    if (from == to) {
        memcpy(dst, src, (size_t)tr__item_size(to));
        return;
    }
    switch (from) {
#define TR__CV_LOAD(E, T, LOAD, K, V)                                        \
    case TR_DTYPE_##E: {                                                     \
        T x;                                                                 \
        memcpy(&x, src, sizeof x);                                           \
        V = tr__cv_##LOAD(x);                                                \
        kind = K;                                                            \
        break;                                                               \
    }
        TR__CV_LOAD(BOOL, uint8_t, load_bool, 'u', u)
        TR__CV_LOAD(U8, uint8_t, load_u8, 'u', u)
        TR__CV_LOAD(U16, uint16_t, load_u16, 'u', u)
        TR__CV_LOAD(U32, uint32_t, load_u32, 'u', u)
        TR__CV_LOAD(U64, uint64_t, load_u64, 'u', u)
        TR__CV_LOAD(I8, int8_t, load_i8, 'i', i)
        TR__CV_LOAD(I16, int16_t, load_i16, 'i', i)
        TR__CV_LOAD(I32, int32_t, load_i32, 'i', i)
        TR__CV_LOAD(I64, int64_t, load_i64, 'i', i)
        TR__CV_LOAD(F16, uint16_t, load_f16, 'f', f)
        TR__CV_LOAD(BF16, uint16_t, load_bf16, 'f', f)
        TR__CV_LOAD(F32, float, load_f32, 'f', f)
        TR__CV_LOAD(F64, double, load_f64, 'f', f)
#undef TR__CV_LOAD
    default: return;
    }
    switch (to) {
#define TR__CV_STORE(E, T, PREFIX)                                           \
    case TR_DTYPE_##E: {                                                     \
        T y = kind == 'u' ? tr__cv_##PREFIX##_from_u(u)                      \
              : kind == 'i' ? tr__cv_##PREFIX##_from_i(i)                    \
                            : tr__cv_##PREFIX##_from_f(f);                   \
        memcpy(dst, &y, sizeof y);                                           \
        break;                                                               \
    }
        TR__CV_STORE(BOOL, uint8_t, boolean)
        TR__CV_STORE(U8, uint8_t, uint8_t)
        TR__CV_STORE(U16, uint16_t, uint16_t)
        TR__CV_STORE(U32, uint32_t, uint32_t)
        TR__CV_STORE(U64, uint64_t, uint64_t)
        TR__CV_STORE(I8, int8_t, int8_t)
        TR__CV_STORE(I16, int16_t, int16_t)
        TR__CV_STORE(I32, int32_t, int32_t)
        TR__CV_STORE(I64, int64_t, int64_t)
        TR__CV_STORE(F16, uint16_t, f16)
        TR__CV_STORE(BF16, uint16_t, bf16)
        TR__CV_STORE(F32, float, f32)
        TR__CV_STORE(F64, double, f64)
#undef TR__CV_STORE
    default: break;
    }
}

#endif /* TR_CONVERT_SCALAR_H */
