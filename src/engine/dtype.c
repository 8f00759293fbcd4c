/*
 * dtype.c - the dtype table and the exact 16-bit float conversions.
 */
#include "engine_impl.h"

#include "convert_scalar.h"

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

float tr_f16_to_f32(uint16_t bits) { return tr__f16_to_f32(bits); }
uint16_t tr_f32_to_f16(float value) { return tr__f32_to_f16(value); }
uint16_t tr_f64_to_f16(double value) { return tr__f64_to_f16(value); }
uint16_t tr_f64_to_bf16(double value) { return tr__f64_to_bf16(value); }
float tr_bf16_to_f32(uint16_t bits) { return tr__bf16_to_f32(bits); }
uint16_t tr_f32_to_bf16(float value) { return tr__f32_to_bf16(value); }
