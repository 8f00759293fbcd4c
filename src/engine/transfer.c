/*
 * transfer.c - copies: compacting a view, cloning it, moving it between
 * devices, reading it out to the host.
 */
#include <string.h>

#include "backend_impl.h"
#include "iter_impl.h"

/* ---------------------------------------------------------------- copies */

static const char *element0(const struct tr_tensor *t)
{
    return t->storage->data + t->offset;
}

/* Copies t's values into the compact tensor out of t's shape on t's device. */
static tr_status gather(struct tr_tensor *out, const struct tr_tensor *t, const char *fn)
{
    int64_t src_strides[TR_MAX_DIMS];

    if (tr_tensor_numel(t) == 0)
        return TR_OK;
    tr__byte_strides(t, src_strides);
    return tr__device_gather(t->storage->device, out->storage->data + out->offset, element0(t),
                             tr_dtype_size(t->dtype), t->ndim, t->shape, src_strides, fn);
}

struct tr_tensor *tr_clone(const struct tr_tensor *t)
{
    struct tr_tensor *out;

    TR_CHECK_HANDLE_OR_NULL(t, "clone");
    out = tr__empty("clone", t->dtype, t->ndim, t->shape, t->storage->device);
    if (out && gather(out, t, "clone") != TR_OK) {
        tr_release(out);
        return NULL;
    }
    return out;
}

struct tr_tensor *tr_contiguous(const struct tr_tensor *t)
{
    TR_CHECK_HANDLE_OR_NULL(t, "contiguous");
    if (tr__is_contiguous(t->ndim, t->shape, t->strides))
        return tr__tensor_alias(t);
    return tr_clone(t);
}

/* t moved between the host and a device: through the device's staging
 * buffers (staging.c) when it has them, else compacted where it lives (a
 * device gathers its own views), then one transfer of exactly its bytes. */
static struct tr_tensor *move_compact(const struct tr_tensor *t, struct tr_device to)
{
    struct tr_device from = t->storage->device;
    struct tr_tensor *compact, *out = NULL;
    uint64_t bytes = tr_tensor_nbytes(t);
    tr_status status = TR_OK;

    if (tr_device_equal(from, TR_CPU) && tr__staging_takes(t, to)) {
        out = tr__empty("to", t->dtype, t->ndim, t->shape, to);
        if (out && tr__staging_upload(to, out->storage->data + out->offset, t, "to") != TR_OK) {
            tr_release(out);
            out = NULL;
        }
        return out;
    }
    compact = tr_contiguous(t);
    if (compact)
        out = tr__empty("to", t->dtype, t->ndim, t->shape, to);
    if (out && bytes > 0)
        status = tr_device_equal(from, TR_CPU)
                     ? tr__device_upload(to, out->storage->data, element0(compact), bytes, "to")
                     : tr__device_download(from, out->storage->data, element0(compact), bytes,
                                           "to");
    if (status != TR_OK) {
        tr_release(out);
        out = NULL;
    }
    tr_release(compact);
    return out;
}

struct tr_tensor *tr_to(const struct tr_tensor *t, struct tr_device device)
{
    struct tr_device from;
    struct tr_tensor *host, *out;

    TR_CHECK_HANDLE_OR_NULL(t, "to");
    from = t->storage->device;
    if (tr_device_equal(from, device))
        return tr__tensor_alias(t);
    if (tr__device_check(device, "to") != TR_OK)
        return NULL;
    if (tr_device_equal(from, TR_CPU) || tr_device_equal(device, TR_CPU))
        return move_compact(t, device);
    host = move_compact(t, TR_CPU); /* between two devices, through the host */
    out = host ? move_compact(host, device) : NULL;
    tr_release(host);
    return out;
}

tr_status tr_copy_to_host(const struct tr_tensor *t, void *dst, size_t size)
{
    int64_t src_strides[TR_MAX_DIMS];
    struct tr_tensor *compact;
    tr_status s;

    TR_FORWARD_IF_ERROR(tr__check(t, "copy_to_host"));
    TR_RETURN_ERROR_IF(size < tr_tensor_nbytes(t), TR_ERR_INVALID,
                       "copy_to_host: %zu bytes of room for %llu bytes of data", size,
                       (unsigned long long)tr_tensor_nbytes(t));
    if (tr_tensor_numel(t) == 0)
        return TR_OK;
    if (tr_device_equal(t->storage->device, TR_CPU)) { /* straight into dst */
        tr__byte_strides(t, src_strides);
        tr__cpu_gather(dst, element0(t), tr_dtype_size(t->dtype), t->ndim, t->shape,
                       src_strides);
        return TR_OK;
    }
    compact = tr_contiguous(t); /* gathered where it lives, then one download */
    if (!compact)
        return tr_last_status();
    s = tr__device_download(t->storage->device, dst, element0(compact), tr_tensor_nbytes(t),
                            "copy_to_host");
    tr_release(compact);
    return s;
}

/* ------------------------------------------------------------- elements */

static double load_f64(const char *p, enum tr_dtype dtype)
{
    union {
        uint8_t u8; uint16_t u16; uint32_t u32; uint64_t u64;
        int8_t i8; int16_t i16; int32_t i32; int64_t i64;
        float f32; double f64;
    } v;

    memcpy(&v, p, tr_dtype_size(dtype));
    switch (dtype) {
    case TR_DTYPE_BOOL: return v.u8 != 0;
    case TR_DTYPE_U8: return v.u8;
    case TR_DTYPE_U16: return v.u16;
    case TR_DTYPE_U32: return v.u32;
    case TR_DTYPE_U64: return (double)v.u64;
    case TR_DTYPE_I8: return v.i8;
    case TR_DTYPE_I16: return v.i16;
    case TR_DTYPE_I32: return v.i32;
    case TR_DTYPE_I64: return (double)v.i64;
    case TR_DTYPE_F16: return tr_f16_to_f32(v.u16);
    case TR_DTYPE_BF16: return tr_bf16_to_f32(v.u16);
    case TR_DTYPE_F32: return v.f32;
    case TR_DTYPE_F64: return v.f64;
    default: return 0;
    }
}

tr_status tr_tensor_item(const struct tr_tensor *t, const int64_t *index, double *out)
{
    int64_t offset = 0, item;
    char buf[8];

    TR_FORWARD_IF_ERROR(tr__check(t, "item"));
    item = (int64_t)tr_dtype_size(t->dtype);
    for (int i = 0; i < t->ndim; i++) {
        TR_RETURN_ERROR_IF(index[i] < 0 || index[i] >= t->shape[i], TR_ERR_INDEX,
                           "item: index %lld is out of range for dimension %d of size %lld",
                           (long long)index[i], i, (long long)t->shape[i]);
        offset += index[i] * t->strides[i] * item;
    }
    TR_FORWARD_IF_ERROR(tr__device_download(t->storage->device, buf, element0(t) + offset,
                                            (uint64_t)item, "item"));
    *out = load_f64(buf, t->dtype);
    return TR_OK;
}
