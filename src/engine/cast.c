/*
 * cast.c - copying values between tensors of any dtypes.
 */
#include <string.h>

#include "backend_impl.h"
#include "iter_impl.h"

tr_status tr_copy_into(struct tr_tensor *dst, const struct tr_tensor *src)
{
    int64_t ds[TR_MAX_DIMS], ss[TR_MAX_DIMS];
    char a[160], c[160];
    const struct tr__backend *b;
    char *out;

    TR_FORWARD_IF_ERROR(tr__check(dst, "copy_into"));
    TR_FORWARD_IF_ERROR(tr__check(src, "copy_into"));
    TR_RETURN_ERROR_IF(dst->ndim != src->ndim ||
                           memcmp(dst->shape, src->shape, (size_t)dst->ndim * sizeof *dst->shape),
                       TR_ERR_SHAPE, "copy_into: shapes %s and %s differ",
                       tr__format_shape(dst->shape, dst->ndim, a, sizeof a),
                       tr__format_shape(src->shape, src->ndim, c, sizeof c));
    TR_RETURN_ERROR_IF(!tr_device_equal(dst->storage->device, src->storage->device),
                       TR_ERR_DEVICE, "copy_into: the tensors are on different devices");
    b = tr__backend_of(src->storage->device.kind);
    TR_RETURN_ERROR_IF(!b->host_memory && !b->convert, TR_ERR_DEVICE,
                       "copy_into: %s has no conversion kernel", b->name);
    if (tr_tensor_numel(src) == 0)
        return TR_OK;
    out = tr_tensor_data_mut(dst);
    if (!out)
        return tr_last_status();
    tr__byte_strides(dst, ds);
    tr__byte_strides(src, ss);
    if (!b->host_memory)
        return b->convert(src->storage->device.index, out, ds, dst->dtype, tr_tensor_data(src),
                          ss, src->dtype, src->ndim, src->shape, "copy_into");
    if (dst->dtype == src->dtype)
        tr__cpu_copy(out, ds, tr_tensor_data(src), ss, src->ndim, src->shape,
                     tr_dtype_size(src->dtype));
    else
        tr__cpu_cast(out, ds, dst->dtype, tr_tensor_data(src), ss, src->dtype, src->ndim,
                     src->shape);
    return TR_OK;
}

struct tr_tensor *tr_cast(const struct tr_tensor *t, enum tr_dtype dtype)
{
    struct tr_tensor *out;

    TR_CHECK_HANDLE_OR_NULL(t, "cast");
    TR_RETURN_NULL_IF((unsigned)dtype >= TR_DTYPE_COUNT, TR_ERR_DTYPE,
                      "cast: invalid dtype %d", (int)dtype);
    if (dtype == t->dtype)
        return tr_contiguous(t);
    out = tr__empty("cast", dtype, t->ndim, t->shape, t->storage->device);
    if (out && tr_copy_into(out, t) != TR_OK) {
        tr_release(out);
        return NULL;
    }
    return out;
}
