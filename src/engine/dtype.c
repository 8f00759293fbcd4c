/*
 * dtype.c - the dtype table and the exact 16-bit float conversions.
 */
#include "engine_impl.h"

#include <math.h>
#include <string.h>

struct dtype_info {
    const char *name;
    const char *long_name;
    size_t size;
    char kind;
};

static const struct dtype_info dtypes[TR_DTYPE_COUNT] = {
#define TR__DTYPE_INFO(e, name, size, kind, long_name)                       \
    [TR_DTYPE_##e] = {#name, long_name, size, kind},
    TR_DTYPE_MAP(TR__DTYPE_INFO)
#undef TR__DTYPE_INFO
};

static bool valid(enum tr_dtype dtype)
{
    return (unsigned)dtype < TR_DTYPE_COUNT;
}

size_t tr_dtype_size(enum tr_dtype dtype)
{
    return valid(dtype) ? dtypes[dtype].size : 0;
}

const char *tr_dtype_name(enum tr_dtype dtype)
{
    return valid(dtype) ? dtypes[dtype].name : "?";
}

tr_status tr_dtype_parse(const char *name, enum tr_dtype *out)
{
    for (int i = 0; name && i < TR_DTYPE_COUNT; i++) {
        if (strcmp(name, dtypes[i].name) == 0 || strcmp(name, dtypes[i].long_name) == 0) {
            *out = (enum tr_dtype)i;
            return TR_OK;
        }
    }
    return tr__set_error(TR_ERR_DTYPE, "unknown dtype '%s'", name ? name : "(null)");
}

bool tr_dtype_is_float(enum tr_dtype dtype)
{
    return valid(dtype) && dtypes[dtype].kind == 'f';
}

bool tr_dtype_is_integer(enum tr_dtype dtype)
{
    return valid(dtype) && (dtypes[dtype].kind == 'u' || dtypes[dtype].kind == 'i');
}

bool tr_dtype_is_signed(enum tr_dtype dtype)
{
    return valid(dtype) && (dtypes[dtype].kind == 'i' || dtypes[dtype].kind == 'f');
}

/* ------------------------------------------------------ 16-bit floats */

static uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Rounds m >> shift to nearest, ties to even (shift in 1..31). */
static uint32_t shift_round_even(uint32_t m, unsigned shift)
{
    uint32_t r = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);

    if (rem > half || (rem == half && (r & 1)))
        r++;
    return r;
}

float tr_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;

    if (exp == 0x1f) /* infinity, or NaN made quiet */
        return bits_float(sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0));
    if (exp == 0) {
        /* zero or subnormal: man units of 2^-24, exact in f32 */
        float v = (float)man * 0x1p-24f;
        return sign ? -v : v;
    }
    return bits_float(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t tr_f32_to_f16(float value)
{
    uint32_t x = float_bits(value);
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
        return (uint16_t)(sign | shift_round_even((a & 0x7fffffu) | 0x800000u, shift));
    }
    /* normal: rebias the exponent, round 23 mantissa bits to 10; a carry
     * out of the mantissa correctly bumps the exponent */
    return (uint16_t)(sign | shift_round_even(((e - 112) << 23) | (a & 0x7fffffu), 13));
}

/* d rounded to f32 "to odd": truncated toward zero, with the last bit set
 * when anything was cut off.  Rounding that once more to a format with at
 * least two fewer significant bits, to nearest even, gives exactly the
 * correctly rounded result from d, which rounding through (float)d does not
 * always (double rounding). */
static float f64_to_f32_round_odd(double d)
{
    float f = (float)d;
    uint32_t bits;

    if (d != d || (double)f == d)
        return f;
    bits = float_bits(f);
    if (fabs((double)f) > fabs(d))
        bits--; /* rounded away from zero: step back toward it */
    return bits_float(bits | 1u);
}

uint16_t tr_f64_to_f16(double value)
{
    return tr_f32_to_f16(f64_to_f32_round_odd(value));
}

uint16_t tr_f64_to_bf16(double value)
{
    return tr_f32_to_bf16(f64_to_f32_round_odd(value));
}

float tr_bf16_to_f32(uint16_t bits)
{
    uint32_t u = (uint32_t)bits << 16;

    if ((u & 0x7fffffffu) > 0x7f800000u)
        u |= 0x400000u;
    return bits_float(u);
}

uint16_t tr_f32_to_bf16(float value)
{
    uint32_t x = float_bits(value);

    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)shift_round_even(x, 16);
}
