/*
 * shape.c - checks on shapes, strides and dims that every constructor
 * shares, with overflow caught before any arithmetic goes wrong.
 */
#include "engine_impl.h"

tr_status tr__check_shape(const char *fn, int ndim, const int64_t *shape,
                          enum tr_dtype dtype, int64_t *numel)
{
    char buf[160];
    int64_t n = 1, span = (int64_t)tr_dtype_size(dtype);

    TR_RETURN_ERROR_IF((unsigned)dtype >= TR_DTYPE_COUNT, TR_ERR_DTYPE,
                       "%s: invalid dtype %d", fn, (int)dtype);
    TR_RETURN_ERROR_IF(ndim < 0 || ndim > TR_MAX_DIMS, TR_ERR_SHAPE,
                       "%s: %d dimensions (at most %d are supported)", fn, ndim,
                       TR_MAX_DIMS);
    TR_RETURN_ERROR_IF(ndim > 0 && !shape, TR_ERR_INVALID, "%s: no shape given", fn);
    for (int i = 0; i < ndim; i++)
        TR_RETURN_ERROR_IF(shape[i] < 0, TR_ERR_SHAPE,
                           "%s: negative size %lld in shape %s", fn, (long long)shape[i],
                           tr__format_shape(shape, ndim, buf, sizeof buf));
    /* the sizes other than 0 must multiply out within int64 bytes, even in
     * an empty tensor, so that no stride derived from them can overflow */
    for (int i = 0; i < ndim; i++) {
        TR_RETURN_ERROR_IF(__builtin_mul_overflow(span, shape[i] ? shape[i] : 1, &span),
                           TR_ERR_SHAPE, "%s: shape %s of %s is too large", fn,
                           tr__format_shape(shape, ndim, buf, sizeof buf),
                           tr_dtype_name(dtype));
        n *= shape[i];
    }
    *numel = n;
    return TR_OK;
}

tr_status tr__extent(const char *fn, int ndim, const int64_t *shape,
                     const int64_t *strides, int64_t *lo, int64_t *hi)
{
    int64_t low = 0, high = 0, reach;

    *lo = *hi = 0;
    for (int i = 0; i < ndim; i++)
        if (shape[i] == 0)
            return TR_OK;
    for (int i = 0; i < ndim; i++) {
        bool overflow = __builtin_mul_overflow(shape[i] - 1, strides[i], &reach);
        if (!overflow)
            overflow = reach < 0 ? __builtin_add_overflow(low, reach, &low)
                                 : __builtin_add_overflow(high, reach, &high);
        TR_RETURN_ERROR_IF(overflow, TR_ERR_INVALID,
                           "%s: the strides reach past the addressable range", fn);
    }
    *lo = low;
    *hi = high;
    return TR_OK;
}

void tr__contiguous_strides(int ndim, const int64_t *shape, int64_t *strides)
{
    int64_t s = 1;

    /* saturating: an empty tensor's other sizes may multiply past int64
     * (its strides are never used to address anything) */
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        if (__builtin_mul_overflow(s, shape[i] > 1 ? shape[i] : 1, &s))
            s = INT64_MAX;
    }
}

void tr__byte_strides(const struct tr_tensor *t, int64_t *out)
{
    for (int i = 0; i < t->ndim; i++)
        out[i] = t->shape[i] == 1 ? 0 : t->strides[i] * (int64_t)tr_dtype_size(t->dtype);
}

tr_status tr__normalize_dim(const char *fn, int dim, int ndim, int *out)
{
    TR_RETURN_ERROR_IF(dim < -ndim || dim >= ndim || ndim == 0, TR_ERR_INDEX,
                       "%s: dimension %d is out of range for a tensor of %d dimension%s",
                       fn, dim, ndim, ndim == 1 ? "" : "s");
    *out = dim < 0 ? dim + ndim : dim;
    return TR_OK;
}

bool tr__is_contiguous(int ndim, const int64_t *shape, const int64_t *strides)
{
    int64_t expected = 1;

    for (int i = 0; i < ndim; i++)
        if (shape[i] == 0)
            return true;
    for (int i = ndim - 1; i >= 0; i--) {
        if (shape[i] != 1 && strides[i] != expected)
            return false;
        expected *= shape[i];
    }
    return true;
}

bool tr_strides_are_contiguous(int ndim, const int64_t *shape, const int64_t *strides)
{
    return tr__is_contiguous(ndim, shape, strides);
}
