/*
 * dispatch.c - running an op: its arguments checked by the op table's
 * rule, then handed to its kernel.
 */
#include "backend_impl.h"
#include "kernel_impl.h"
#include "kernels.h"

#include <stdlib.h>
#include <string.h>

struct tr_value tr_value_of(const struct tr_tensor *t)
{
    struct tr_value v;

    memset(&v, 0, sizeof v);
    v.kind = TR_VALUE_TENSOR;
    v.dtype = t->dtype;
    v.ndim = t->ndim;
    memcpy(v.shape, t->shape, sizeof v.shape);
    v.device = t->storage->device;
    v.strided = !tr__is_contiguous(t->ndim, t->shape, t->strides);
    memcpy(v.strides, t->strides, sizeof v.strides);
    return v;
}

/* ---------------------------------------------------------- kernel table */

static const tr__kernel_fn kernels[TR_OP_COUNT] = {
#define KERNEL(id, fn) [TR_OP_##id] = fn,
#include "kernels.def"
#undef KERNEL
};

tr__kernel_fn tr__kernel_for(enum tr_op_id id)
{
    return (unsigned)id < TR_OP_COUNT ? kernels[id] : NULL;
}

/* ---------------------------------------------------------- helpers */

/* --------------------------------------------------------- destinations */

/* The bytes t addresses: [*lo, *hi) (empty for no elements). */
static void byte_range(const struct tr_tensor *t, uintptr_t *lo, uintptr_t *hi)
{
    int64_t first = 0, last = 0, item = (int64_t)tr_dtype_size(t->dtype);
    uintptr_t base = (uintptr_t)t->storage->data + (uintptr_t)t->offset;

    *lo = *hi = base;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] == 0)
            return;
        if (t->strides[i] < 0)
            first += (t->shape[i] - 1) * t->strides[i];
        else
            last += (t->shape[i] - 1) * t->strides[i];
    }
    *lo = base + (uintptr_t)(first * item);
    *hi = base + (uintptr_t)((last + 1) * item);
}

/* Whether operand t is exactly the memory d: the same bytes, dtype, shape
 * and strides, so that an elementwise kernel reads each element of it
 * before it writes the same element of d. */
static bool same_memory(const struct tr_tensor *t, const struct tr_tensor *d)
{
    return t->storage->data == d->storage->data && t->offset == d->offset &&
           t->dtype == d->dtype && t->ndim == d->ndim &&
           memcmp(t->shape, d->shape, (size_t)t->ndim * sizeof *t->shape) == 0 &&
           memcmp(t->strides, d->strides, (size_t)t->ndim * sizeof *t->strides) == 0;
}

/* Whether the kernel may write d while it reads operand t: they share no
 * byte, or the op is elementwise and t is exactly d. */
static bool may_write_over(const struct tr_op_info *info, const struct tr_tensor *t,
                           const struct tr_tensor *d)
{
    uintptr_t tlo, thi, dlo, dhi;

    if (t->storage->device.kind != TR_DEV_CPU)
        return true; /* another device's memory is not d's */
    byte_range(t, &tlo, &thi);
    byte_range(d, &dlo, &dhi);
    if (tlo >= thi || dlo >= dhi || thi <= dlo || dhi <= tlo)
        return true;
    return (info->group_id == TR_GROUP_UNARY || info->group_id == TR_GROUP_BINARY) &&
           same_memory(t, d);
}

/* dest as the kernel of info may use it for the result out describes, or
 * NULL: it fits (CPU, writable, compact, of out's dtype and shape) and
 * overlaps no operand it may not write over. */
static const struct tr_dest *usable_dest(const struct tr_op_info *info,
                                         const struct tr_arg *args,
                                         const struct tr_value *out,
                                         const struct tr_dest *dest)
{
    const struct tr_tensor *d = dest ? dest->tensor : NULL;

    if (!d || out->device.kind != TR_DEV_CPU || d->storage->device.kind != TR_DEV_CPU ||
        d->dtype != out->dtype || d->ndim != out->ndim ||
        memcmp(d->shape, out->shape, (size_t)d->ndim * sizeof *d->shape) != 0 ||
        (d->storage->flags & TR_FLAG_READONLY) ||
        !tr__is_contiguous(d->ndim, d->shape, d->strides))
        return NULL;
    for (int i = 0; i < info->nparams; i++) {
        if (args[i].tensor && !may_write_over(info, args[i].tensor, d))
            return NULL;
        for (size_t k = 0; args[i].items && k < args[i].value.count; k++)
            if (args[i].items[k].tensor && !may_write_over(info, args[i].items[k].tensor, d))
                return NULL;
    }
    return dest;
}

struct tr_tensor *tr__new_result(const char *name, const struct tr_value *out,
                                 struct tr_device device, const struct tr_dest *dest)
{
    const struct tr_sink *sink = dest ? dest->sink : NULL;

    if (dest && (!sink || !sink->reserve || sink->reserve(sink->ctx) == 0))
        return tr__tensor_alias(dest->tensor);
    /* no destination, or its file cannot take the data */
    return tr__empty(name, out->dtype, out->ndim, out->shape, device);
}

struct tr_tensor *tr__stream_result(const char *name, const struct tr_value *out,
                                    struct tr_device device, const struct tr_dest *dest,
                                    struct tr__store *store)
{
    memset(store, 0, sizeof *store);
    store->name = name;
    if (dest && dest->sink && dest->sink->store) {
        store->fn = dest->sink->store;
        store->ctx = dest->sink->ctx;
        return tr__tensor_alias(dest->tensor);
    }
    return tr__new_result(name, out, device, dest);
}

tr_status tr__store_failed(const struct tr__store *store, int err)
{
    return tr__set_error(TR_ERR_IO, "%s: cannot write the result to its file: %s", store->name,
                         strerror(err));
}

void tr__stage_init(struct tr__stage *st, const struct tr__store *store, uint64_t cap)
{
    memset(st, 0, sizeof *st);
    st->store = store;
    st->cap = cap;
    st->buf = malloc((size_t)cap);
}

static void stage_flush(struct tr__stage *st)
{
    if (st->used > 0 && !st->err)
        st->err = st->store->fn(st->store->ctx, st->first, st->buf, (size_t)st->used);
    st->used = 0;
}

char *tr__stage_place(struct tr__stage *st, uint64_t at, uint64_t n)
{
    if (st->used > 0 && (at != st->first + st->used || st->used + n > st->cap))
        stage_flush(st);
    if (st->used == 0)
        st->first = at;
    st->used += n;
    return st->buf + (at - st->first);
}

void tr__stage_finish(struct tr__stage *st, atomic_int *first_error)
{
    int none = 0;

    if (!st->buf)
        return;
    stage_flush(st);
    free(st->buf);
    st->buf = NULL;
    if (st->err)
        atomic_compare_exchange_strong(first_error, &none, st->err);
}

enum tr_dtype tr__compute_dtype(enum tr_dtype d)
{
    switch (d) {
    case TR_DTYPE_F16:
    case TR_DTYPE_BF16:
    case TR_DTYPE_F32:
        return TR_DTYPE_F32;
    case TR_DTYPE_F64:
        return TR_DTYPE_F64;
    case TR_DTYPE_U8:
    case TR_DTYPE_U16:
    case TR_DTYPE_U32:
    case TR_DTYPE_U64:
        return TR_DTYPE_U64;
    default:
        return TR_DTYPE_I64;
    }
}

static void free_constant(void *data, void *ctx)
{
    (void)ctx;
    free(data);
}

/* A constant is not pool memory: its few bytes are the tensor's own
 * (adopted), so that a scalar in an expression never shows in the pool's
 * statistics. */
struct tr_tensor *tr__arg_tensor(const struct tr_arg *arg, enum tr_dtype dtype)
{
    const struct tr_value *v = &arg->value;
    union {
        double f64;
        int64_t i64;
        uint8_t b;
    } bits;
    struct tr_blob blob = {.deleter = free_constant};
    struct tr_tensor *t;
    enum tr_dtype from;

    if (arg->tensor)
        return tr__tensor_alias(arg->tensor);
    switch (v->kind) {
    case TR_VALUE_INT:
        bits.i64 = v->integer;
        from = TR_DTYPE_I64;
        break;
    case TR_VALUE_BOOL:
        bits.b = v->boolean;
        from = TR_DTYPE_BOOL;
        break;
    case TR_VALUE_FLOAT:
        bits.f64 = v->number;
        from = TR_DTYPE_F64;
        break;
    default:
        tr__set_error(TR_ERR_INVALID, "a tensor or a number is needed here");
        return NULL;
    }
    blob.data = malloc(sizeof(double));
    blob.nbytes = sizeof(double);
    if (!blob.data) {
        tr__set_error(TR_ERR_OOM, "out of memory for a constant");
        return NULL;
    }
    tr__cpu_cast_row(blob.data, 0, dtype, (const char *)&bits, 0, from, 1);
    t = tr_from_blob(&blob, dtype, 0, NULL, NULL, TR_CPU);
    if (!t)
        free(blob.data);
    return t;
}

bool tr__operand_rounds(enum tr_dtype t, enum tr_dtype result)
{
    return (result == TR_DTYPE_F16 || result == TR_DTYPE_BF16) && tr_dtype_is_integer(t) &&
           tr_dtype_size(t) > 1;
}

struct tr_tensor *tr__operand(const struct tr_arg *arg, enum tr_dtype result,
                              enum tr_dtype compute)
{
    const struct tr_tensor *t = arg->tensor;

    if (t && tr__operand_rounds(t->dtype, result))
        return tr_cast(arg->tensor, result);
    if (!t && (result == TR_DTYPE_F16 || result == TR_DTYPE_BF16) &&
        (arg->value.kind == TR_VALUE_INT || arg->value.kind == TR_VALUE_FLOAT)) {
        /* a number takes the tensor's dtype before it is computed with, as
         * in PyTorch: f16_tensor * 70000 is inf, f16_tensor / 70000 is 0 */
        struct tr_arg rounded = *arg;
        double from = arg->value.kind == TR_VALUE_INT ? (double)arg->value.integer
                                                      : arg->value.number;
        uint16_t narrow;
        tr__cpu_cast_row((char *)&narrow, 0, result, (const char *)&from, 0, TR_DTYPE_F64, 1);
        rounded.value.kind = TR_VALUE_FLOAT;
        tr__cpu_cast_row((char *)&rounded.value.number, 0, TR_DTYPE_F64, (const char *)&narrow,
                         0, result, 1);
        return tr__arg_tensor(&rounded, compute);
    }
    return tr__arg_tensor(arg, compute);
}

/* ---------------------------------------------------------- running */

static bool any_tensor(const struct tr_arg *args, int n)
{
    for (int i = 0; i < n; i++)
        if (args[i].tensor || (args[i].value.kind == TR_VALUE_LIST && args[i].items &&
                               any_tensor(args[i].items, (int)args[i].value.count)))
            return true;
    return false;
}

tr_status tr_op_run(const struct tr_op_info *info, const struct tr_arg *args,
                    const struct tr_dest *dest, struct tr_tensor **results)
{
    return tr_op_run_on(info, args, TR_CPU, dest, results);
}

tr_status tr_op_run_on(const struct tr_op_info *info, const struct tr_arg *args,
                       struct tr_device device, const struct tr_dest *dest,
                       struct tr_tensor **results)
{
    const struct tr__op *op = tr__op_of(info);
    struct tr_value values[TR_OP_MAX_PARAMS], out[TR_OP_MAX_RESULTS];
    struct tr_value *lists[TR_OP_MAX_PARAMS] = {NULL};
    tr__kernel_fn kernel = NULL;
    tr_status s = TR_OK;
    int bad;

    for (int i = 0; i < info->nparams && s == TR_OK; i++) {
        values[i] = args[i].tensor ? tr_value_of(args[i].tensor) : args[i].value;
        values[i].weak = args[i].value.weak;
        if (args[i].value.kind == TR_VALUE_LIST && args[i].items) {
            size_t n = args[i].value.count;
            lists[i] = calloc(n ? n : 1, sizeof *lists[i]);
            if (!lists[i])
                s = tr__set_error(TR_ERR_OOM, "out of memory running %s", info->name);
            for (size_t k = 0; lists[i] && k < n; k++)
                lists[i][k] = args[i].items[k].tensor ? tr_value_of(args[i].items[k].tensor)
                                                      : args[i].items[k].value;
            values[i].items = lists[i];
        }
    }
    if (s == TR_OK)
        s = tr_op_infer(info, values, out, &bad);
    for (int r = 0; s == TR_OK && r < info->nresults && !any_tensor(args, info->nparams); r++)
        out[r].device = device;
    if (s == TR_OK)
        s = tr__kernel_select(info, args, out, &kernel);
    if (s == TR_OK)
        s = kernel(op, args, out, usable_dest(info, args, &out[0], dest), results);
    for (int i = 0; i < info->nparams; i++)
        free(lists[i]);
    return s;
}
