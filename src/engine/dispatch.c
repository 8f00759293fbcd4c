/*
 * dispatch.c - running an op: its arguments checked by the op table's
 * rule, then handed to its kernel.
 */
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

static _Thread_local struct tr_result_dest result_into;

void tr_op_result_into(const struct tr_result_dest *dest)
{
    if (dest)
        result_into = *dest;
    else
        memset(&result_into, 0, sizeof result_into);
}

/* Whether the offered destination fits a result as out describes it. */
static bool dest_fits(const struct tr_value *out, struct tr_device device)
{
    const struct tr_tensor *d = result_into.tensor;

    return d && device.kind == TR_DEV_CPU && d->storage->device.kind == TR_DEV_CPU &&
           d->dtype == out->dtype && d->ndim == out->ndim &&
           memcmp(d->shape, out->shape, (size_t)d->ndim * sizeof *d->shape) == 0 &&
           !(d->storage->flags & TR_FLAG_READONLY) &&
           tr__is_contiguous(d->ndim, d->shape, d->strides);
}

/* The offered destination as a result (the offer is used up), or NULL. */
static struct tr_tensor *take_dest(void)
{
    struct tr_tensor *d = result_into.tensor;

    memset(&result_into, 0, sizeof result_into);
    return tr__tensor_alias(d);
}

struct tr_tensor *tr__new_result(const char *name, const struct tr_value *out,
                                 struct tr_device device)
{
    if (dest_fits(out, device)) {
        if (!result_into.reserve || result_into.reserve(result_into.ctx) == 0)
            return take_dest();
        memset(&result_into, 0, sizeof result_into); /* its file cannot take the data */
    }
    return tr__empty(name, out->dtype, out->ndim, out->shape, device);
}

struct tr_tensor *tr__stream_result(const char *name, const struct tr_value *out,
                                    struct tr_device device, struct tr__store *store)
{
    memset(store, 0, sizeof *store);
    store->name = name;
    if (dest_fits(out, device) && result_into.store) {
        store->fn = result_into.store;
        store->ctx = result_into.ctx;
        return take_dest();
    }
    return tr__new_result(name, out, device);
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

struct tr_tensor *tr__result(const struct tr_value *out, struct tr_device device)
{
    return tr__new_result("result", out, device);
}

struct tr_tensor *tr__reuse_result(const struct tr_arg *args, int nargs,
                                   const struct tr_value *out)
{
    if (dest_fits(out, TR_CPU))
        return NULL; /* made there, it needs no copy to reach its file */
    for (int i = 0; i < nargs; i++) {
        const struct tr_tensor *t = args[i].tensor;
        if (!args[i].consumable || !t || t->dtype != out->dtype || t->ndim != out->ndim ||
            memcmp(t->shape, out->shape, (size_t)t->ndim * sizeof *t->shape) != 0)
            continue;
        if (atomic_load(&t->storage->refs) != 1 || t->storage->kind != TR_STORAGE_POOL ||
            (t->storage->flags & TR_FLAG_READONLY) || t->storage->device.kind != TR_DEV_CPU ||
            !tr__is_contiguous(t->ndim, t->shape, t->strides))
            continue;
        return tr__tensor_alias(t);
    }
    return NULL;
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

struct tr_tensor *tr__operand(const struct tr_arg *arg, enum tr_dtype result,
                              enum tr_dtype compute)
{
    const struct tr_tensor *t = arg->tensor;

    if (t && (result == TR_DTYPE_F16 || result == TR_DTYPE_BF16) &&
        tr_dtype_is_integer(t->dtype) && tr_dtype_size(t->dtype) > 1)
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

tr_status tr_op_run(const struct tr_op_info *info, const struct tr_arg *args,
                    struct tr_tensor **results)
{
    const struct tr__op *op = tr__op_of(info);
    struct tr_value values[TR_OP_MAX_PARAMS], out[TR_OP_MAX_RESULTS];
    struct tr_value *lists[TR_OP_MAX_PARAMS] = {NULL};
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
    if (s == TR_OK && !op->kernel)
        s = tr__set_error(TR_ERR_STATE, "%s: this op cannot run yet (its kernel is not written)",
                          info->name);
    for (int i = 0; i < info->nparams && s == TR_OK; i++)
        if (args[i].tensor && args[i].tensor->storage->device.kind != TR_DEV_CPU)
            s = tr__set_error(TR_ERR_DEVICE, "%s: the CUDA kernels are not written yet",
                              info->name);
    if (s == TR_OK)
        s = op->kernel(op, args, out, results);
    for (int i = 0; i < info->nparams; i++)
        free(lists[i]);
    return s;
}
