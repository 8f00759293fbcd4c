/*
 * raw.c - raw tensor files: bytes whose layout the caller gives.
 */
#include "io_impl.h"

#include <stdio.h>
#include <string.h>

/* The lowest and highest element offsets a layout reaches; false on
 * overflow. */
static bool reach(const struct tio_entry *e, int64_t *lo, int64_t *hi)
{
    int64_t r;

    *lo = *hi = 0;
    for (int i = 0; i < e->ndim; i++) {
        if (__builtin_mul_overflow(e->shape[i] - 1, e->strides[i], &r) ||
            (r < 0 ? __builtin_add_overflow(*lo, r, lo) : __builtin_add_overflow(*hi, r, hi)))
            return false;
    }
    return true;
}

tr_status tio__raw_describe(const struct tio_raw_layout *layout, uint64_t stream_size,
                            struct tio_entry *entry)
{
    int64_t numel = 1, span = 1, lo = 0, hi = 0, item, first = 0, end;

    if (!layout)
        return tio__error(TR_ERR_INVALID, "a raw file needs a dtype and a shape");
    if ((unsigned)layout->dtype >= TR_DTYPE_COUNT)
        return tio__error(TR_ERR_INVALID, "raw: invalid dtype");
    if (layout->ndim < 0 || layout->ndim > TR_MAX_DIMS)
        return tio__error(TR_ERR_INVALID, "raw: %d dimensions (at most %d are supported)",
                          layout->ndim, TR_MAX_DIMS);
    if (layout->offset < 0)
        return tio__error(TR_ERR_INVALID, "raw: negative offset %lld",
                          (long long)layout->offset);
    item = (int64_t)tr_dtype_size(layout->dtype);
    memset(entry, 0, sizeof *entry);
    entry->ndim = layout->ndim;
    for (int i = 0; i < layout->ndim; i++) {
        int64_t size = layout->shape[i];
        if (size < 0)
            return tio__error(TR_ERR_INVALID, "raw: negative size %lld in the shape",
                              (long long)size);
        if (__builtin_mul_overflow(span, size ? size : 1, &span) ||
            __builtin_mul_overflow(span, item, &end))
            return tio__error(TR_ERR_INVALID, "raw: the shape is too large");
        numel *= size;
        entry->shape[i] = size;
    }
    int64_t contiguous = 1;
    for (int i = layout->ndim - 1; i >= 0; i--) {
        entry->strides[i] = layout->has_strides ? layout->strides[i] : contiguous;
        contiguous *= layout->shape[i] > 1 ? layout->shape[i] : 1;
    }
    end = layout->offset;
    if (numel > 0) {
        if (!reach(entry, &lo, &hi) || __builtin_mul_overflow(lo, item, &first) ||
            __builtin_add_overflow(first, layout->offset, &first) ||
            __builtin_add_overflow(hi, 1, &end) || __builtin_mul_overflow(end, item, &end) ||
            __builtin_add_overflow(end, layout->offset, &end))
            return tio__error(TR_ERR_INVALID, "raw: the strides reach past any file");
        if (first < 0)
            return tio__error(TR_ERR_INVALID,
                              "raw: negative strides reach %lld bytes before the file's start",
                              (long long)-first);
    }
    if (stream_size != TIO_SIZE_UNKNOWN && (uint64_t)end > stream_size)
        return tio__error(TR_ERR_FORMAT,
                          "truncated: the layout reaches byte %lld, file has %llu bytes",
                          (long long)end, (unsigned long long)stream_size);
    entry->supported = true;
    entry->dtype = layout->dtype;
    snprintf(entry->dtype_text, sizeof entry->dtype_text, "%s", tr_dtype_name(layout->dtype));
    entry->offset = (uint64_t)layout->offset;
    entry->nbytes = (uint64_t)numel * (uint64_t)item;
    return TR_OK;
}
