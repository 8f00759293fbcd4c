/*
 * cpu/views.c - the view ops (reshape, transpose, permute, squeeze,
 * unsqueeze, expand, broadcast_to, flatten, diagonal, flip, narrow,
 * unflatten, movedim), which make new
 * handles of their input's storage through view.c and never copy, except
 * reshape and flatten when no strides can express the new shape; and the
 * copy ops (contiguous, clone, cast, to) over transfer.c and cast.c.
 */
#include <string.h>

#include "../kernel_impl.h"

#include "../kernels.h"

/* The tensor argument i stands for: a new handle of it, or a 0-d tensor
 * holding a number (of the dtype tr_op_infer gave it). */
static struct tr_tensor *input(const struct tr_arg *args, int i)
{
    return tr__arg_tensor(&args[i], tr_value_dtype(&args[i].value));
}

/* The k-th integer of an int-or-list argument. */
static int64_t list_int(const struct tr_arg *arg, size_t k)
{
    if (arg->value.kind != TR_VALUE_LIST)
        return arg->value.integer;
    return arg->items ? arg->items[k].value.integer : arg->value.items[k].integer;
}

static size_t list_count(const struct tr_arg *arg)
{
    return arg->value.kind == TR_VALUE_LIST ? arg->value.count : 1;
}

/* Hands the view over as the result, or the error when there is none. */
static tr_status give(struct tr_tensor *v, struct tr_tensor **results)
{
    if (!v)
        return tr_last_status();
    results[0] = v;
    return TR_OK;
}

/* reshape(x, shape) and flatten(x, start, end): a view when x's strides
 * can express the new shape, else a view of a compact copy. */
tr_status tr__k_reshape(const struct tr__op *op, const struct tr_arg *args,
                        const struct tr_value *out, const struct tr_dest *dest,
                        struct tr_tensor **results)
{
    (void)dest; /* a view, or a copy of its own: the caller copies it */
    struct tr_tensor *x = input(args, 0), *v, *compact;

    (void)op;
    if (!x)
        return tr_last_status();
    v = tr_reshape_view(x, out->shape, out->ndim);
    if (!v && tr_last_status() == TR_ERR_SHAPE) {
        /* the element counts agree (tr_op_infer saw to that): only the
         * strides are in the way, and a compact copy has none */
        compact = tr_contiguous(x);
        v = compact ? tr_reshape_view(compact, out->shape, out->ndim) : NULL;
        tr_release(compact);
    }
    tr_release(x);
    return give(v, results);
}

/* transpose(x, dim0, dim1) */
tr_status tr__k_transpose(const struct tr__op *op, const struct tr_arg *args,
                          const struct tr_value *out, const struct tr_dest *dest,
                          struct tr_tensor **results)
{
    (void)dest; /* a view, or a copy of its own: the caller copies it */
    struct tr_tensor *x = input(args, 0), *v;

    (void)op;
    (void)out;
    if (!x)
        return tr_last_status();
    v = x->ndim == 0 ? tr__tensor_alias(x)
                     : tr_transpose(x, (int)args[1].value.integer, (int)args[2].value.integer);
    tr_release(x);
    return give(v, results);
}

/* permute(x, dims) */
tr_status tr__k_permute(const struct tr__op *op, const struct tr_arg *args,
                        const struct tr_value *out, const struct tr_dest *dest,
                        struct tr_tensor **results)
{
    (void)dest; /* a view, or a copy of its own: the caller copies it */
    struct tr_tensor *x = input(args, 0), *v;
    int dims[TR_MAX_DIMS];
    size_t n = list_count(&args[1]);

    (void)op;
    (void)out;
    if (!x)
        return tr_last_status();
    for (size_t i = 0; i < n && i < TR_MAX_DIMS; i++)
        dims[i] = (int)list_int(&args[1], i);
    v = tr_permute(x, dims, (int)n);
    tr_release(x);
    return give(v, results);
}

/* squeeze(x, dim=None): the listed dimensions (all without dim) that have
 * size 1 go away. */
tr_status tr__k_squeeze(const struct tr__op *op, const struct tr_arg *args,
                        const struct tr_value *out, const struct tr_dest *dest,
                        struct tr_tensor **results)
{
    (void)dest; /* a view, or a copy of its own: the caller copies it */
    struct tr_tensor *x = input(args, 0), *v;
    int64_t shape[TR_MAX_DIMS], strides[TR_MAX_DIMS];
    bool listed[TR_MAX_DIMS];
    int n = 0;

    (void)op;
    (void)out;
    if (!x)
        return tr_last_status();
    for (int d = 0; d < TR_MAX_DIMS; d++)
        listed[d] = args[1].value.kind == TR_VALUE_NONE;
    for (size_t k = 0; args[1].value.kind != TR_VALUE_NONE && k < list_count(&args[1]); k++)
        if (x->ndim > 0)
            listed[tr__checked_dim(list_int(&args[1], k), x->ndim)] = true;
    for (int d = 0; d < x->ndim; d++) {
        if (listed[d] && x->shape[d] == 1)
            continue;
        shape[n] = x->shape[d];
        strides[n++] = x->strides[d];
    }
    v = tr_as_strided(x, x->dtype, n, shape, strides, 0);
    tr_release(x);
    return give(v, results);
}

/* unsqueeze(x, dim): a dimension of size 1 at dim. */
tr_status tr__k_unsqueeze(const struct tr__op *op, const struct tr_arg *args,
                          const struct tr_value *out, const struct tr_dest *dest,
                          struct tr_tensor **results)
{
    (void)dest; /* a view, or a copy of its own: the caller copies it */
    struct tr_tensor *x = input(args, 0), *v;
    int64_t shape[TR_MAX_DIMS], strides[TR_MAX_DIMS];
    int d;

    (void)op;
    (void)out;
    if (!x)
        return tr_last_status();
    d = tr__checked_dim(args[1].value.integer, x->ndim + 1);
    for (int i = 0, j = 0; i <= x->ndim; i++) {
        if (i != d) {
            shape[i] = x->shape[j];
            strides[i] = x->strides[j++];
            continue;
        }
        /* never stepped; PyTorch's choice keeps a compact tensor compact
         * in every reading of its strides */
        shape[i] = 1;
        if (j == x->ndim || __builtin_mul_overflow(x->shape[j], x->strides[j], &strides[i]))
            strides[i] = 1;
    }
    v = tr_as_strided(x, x->dtype, x->ndim + 1, shape, strides, 0);
    tr_release(x);
    return give(v, results);
}

/* expand(x, shape) and broadcast_to(x, shape): out's shape has the -1
 * entries resolved already. */
tr_status tr__k_expand(const struct tr__op *op, const struct tr_arg *args,
                       const struct tr_value *out, const struct tr_dest *dest,
                       struct tr_tensor **results)
{
    (void)dest; /* a view, or a copy of its own: the caller copies it */
    struct tr_tensor *x = input(args, 0), *v;

    (void)op;
    if (!x)
        return tr_last_status();
    v = tr_expand(x, out->shape, out->ndim);
    tr_release(x);
    return give(v, results);
}

/* diagonal(x, offset=0, dim1=0, dim2=1): elements [i, i + offset] of the
 * two dimensions (for a negative offset [i - offset, i]), as a last
 * dimension whose stride is the sum of theirs. */
tr_status tr__k_diagonal(const struct tr__op *op, const struct tr_arg *args,
                         const struct tr_value *out, const struct tr_dest *dest,
                         struct tr_tensor **results)
{
    (void)dest; /* a view, or a copy of its own: the caller copies it */
    struct tr_tensor *x = input(args, 0), *v = NULL;
    int64_t shape[TR_MAX_DIMS], strides[TR_MAX_DIMS], offset = args[1].value.integer;
    int64_t start = 0, len = out->shape[out->ndim - 1];
    int d1, d2, n = 0;
    bool overflow;

    if (!x)
        return tr_last_status();
    d1 = tr__checked_dim(args[2].value.integer, x->ndim);
    d2 = tr__checked_dim(args[3].value.integer, x->ndim);
    for (int d = 0; d < x->ndim; d++) {
        if (d == d1 || d == d2)
            continue;
        shape[n] = x->shape[d];
        strides[n++] = x->strides[d];
    }
    shape[n] = len;
    overflow = __builtin_add_overflow(x->strides[d1], x->strides[d2], &strides[n]) && len > 1;
    n++;
    /* the first element, in bytes from x's element 0 (none when empty,
     * and then |offset| may be anything) */
    if (len > 0)
        overflow = overflow ||
                   __builtin_mul_overflow(offset >= 0 ? offset : -offset,
                                          offset >= 0 ? x->strides[d2] : x->strides[d1], &start) ||
                   __builtin_mul_overflow(start, (int64_t)tr_dtype_size(x->dtype), &start);
    if (overflow)
        tr__set_error(TR_ERR_INVALID, "%s: the diagonal's strides overflow", op->info.name);
    else
        v = tr_as_strided(x, x->dtype, n, shape, strides, start);
    tr_release(x);
    return give(v, results);
}

/* The dims a shape-kind argument lists, made non-negative for x (a scalar
 * lists none); tr_op_infer has checked them.  Returns how many. */
static int dims_listed(const struct tr_arg *arg, const struct tr_tensor *x, int *dims)
{
    size_t n = x->ndim > 0 ? list_count(arg) : 0;

    for (size_t k = 0; k < n && k < TR_MAX_DIMS; k++)
        dims[k] = tr__checked_dim(list_int(arg, k), x->ndim);
    return (int)n;
}

/* flip(x, dims): the listed dimensions stepped backwards (tr_flip). */
tr_status tr__k_flip(const struct tr__op *op, const struct tr_arg *args,
                     const struct tr_value *out, const struct tr_dest *dest,
                     struct tr_tensor **results)
{
    (void)dest; /* a view, or a copy of its own: the caller copies it */
    struct tr_tensor *x = input(args, 0), *v;
    int dims[TR_MAX_DIMS], n;

    (void)op;
    (void)out;
    if (!x)
        return tr_last_status();
    n = dims_listed(&args[1], x, dims);
    v = tr_flip(x, dims, n);
    tr_release(x);
    return give(v, results);
}

/* narrow(x, dim, start, length): x[..., start:start + length, ...] along
 * dim, start made non-negative. */
tr_status tr__k_narrow(const struct tr__op *op, const struct tr_arg *args,
                       const struct tr_value *out, const struct tr_dest *dest,
                       struct tr_tensor **results)
{
    (void)dest; /* a view, or a copy of its own: the caller copies it */
    struct tr_tensor *x = input(args, 0), *v;
    int64_t start = args[2].value.integer, length = args[3].value.integer;
    int d;

    (void)op;
    (void)out;
    if (!x)
        return tr_last_status();
    d = tr__checked_dim(args[1].value.integer, x->ndim);
    if (start < 0)
        start += x->shape[d];
    v = tr_slice(x, d, start, start + length, 1);
    tr_release(x);
    return give(v, results);
}

/* unflatten(x, dim, sizes): out's shape has the -1 resolved; dimension
 * dim's stride s becomes s times the sizes after each new dimension, so
 * that the new dimensions step through dim's elements in order. */
tr_status tr__k_unflatten(const struct tr__op *op, const struct tr_arg *args,
                          const struct tr_value *out, const struct tr_dest *dest,
                          struct tr_tensor **results)
{
    (void)dest; /* a view, or a copy of its own: the caller copies it */
    struct tr_tensor *x = input(args, 0), *v = NULL;
    int64_t strides[TR_MAX_DIMS];
    int d, ns, n = 0;
    bool overflow = false;

    if (!x)
        return tr_last_status();
    d = tr__checked_dim(args[1].value.integer, x->ndim);
    ns = out->ndim - x->ndim + 1;
    for (int i = 0; i < x->ndim; i++) {
        if (i != d) {
            strides[n++] = x->strides[i];
            continue;
        }
        int64_t step = x->strides[d];
        for (int k = ns - 1; k >= 0; k--) {
            /* a dimension of one element is never stepped: whatever its
             * stride, it is left as the one after it would have it */
            strides[n + k] = step;
            if (out->shape[n + k] > 1)
                overflow = overflow || __builtin_mul_overflow(step, out->shape[n + k], &step);
        }
        n += ns;
    }
    if (overflow && tr_tensor_numel(x) > 0)
        tr__set_error(TR_ERR_INVALID, "%s: the strides overflow", op->info.name);
    else
        v = tr_as_strided(x, x->dtype, out->ndim, out->shape, strides, 0);
    tr_release(x);
    return give(v, results);
}

/* movedim(x, source, destination): a permutation (tr__movedim_order). */
tr_status tr__k_movedim(const struct tr__op *op, const struct tr_arg *args,
                        const struct tr_value *out, const struct tr_dest *dest,
                        struct tr_tensor **results)
{
    (void)dest; /* a view, or a copy of its own: the caller copies it */
    struct tr_tensor *x = input(args, 0), *v;
    int src[TR_MAX_DIMS], dst[TR_MAX_DIMS], order[TR_MAX_DIMS], n;

    (void)op;
    (void)out;
    if (!x)
        return tr_last_status();
    n = dims_listed(&args[1], x, src);
    dims_listed(&args[2], x, dst);
    tr__movedim_order(x->ndim, src, dst, n, order);
    v = x->ndim == 0 ? tr__tensor_alias(x) : tr_permute(x, order, x->ndim);
    tr_release(x);
    return give(v, results);
}

/* The values of a block as they are: a copy of n items of *ctx bytes. */
static void copy_block(char *out, const char *const *in, int64_t n, const void *ctx)
{
    memcpy(out, in[0], (size_t)n * *(const size_t *)ctx);
}

/* contiguous(x) and clone(x).  Given a destination, both copy into it,
 * block by block over the threads, and a destination filled by calls (an
 * output file, struct tr_sink) is handed each thread's blocks in runs, as
 * the elementwise ops hand theirs: x[::2] to a file goes there without a
 * copy of its size anywhere. */
tr_status tr__k_copy(const struct tr__op *op, const struct tr_arg *args,
                     const struct tr_value *out, const struct tr_dest *dest,
                     struct tr_tensor **results)
{
    struct tr_tensor *x = input(args, 0), *v;
    struct tr__store store;
    size_t item;
    tr_status s;

    if (!x)
        return tr_last_status();
    if (!dest) {
        v = op->info.id == TR_OP_CLONE ? tr_clone(x) : tr_contiguous(x);
        tr_release(x);
        return give(v, results);
    }
    item = tr_dtype_size(x->dtype);
    v = tr__stream_result(op->info.name, out, x->storage->device, dest, &store);
    s = v ? tr__map_stream(v, &store, x->dtype, (const struct tr_tensor *const[]){x}, 1, x->dtype,
                           copy_block, &item)
          : tr_last_status();
    tr_release(x);
    if (s != TR_OK) {
        tr_release(v);
        return s;
    }
    return give(v, results);
}

/* cast(x, dtype): x itself when compact and of dtype already. */
tr_status tr__k_cast(const struct tr__op *op, const struct tr_arg *args,
                     const struct tr_value *out, const struct tr_dest *dest,
                     struct tr_tensor **results)
{
    (void)dest; /* a view, or a copy of its own: the caller copies it */
    struct tr_tensor *x = input(args, 0), *v;

    (void)op;
    if (!x)
        return tr_last_status();
    v = tr_cast(x, out->dtype);
    tr_release(x);
    return give(v, results);
}

/* to(x, device) */
tr_status tr__k_to(const struct tr__op *op, const struct tr_arg *args,
                   const struct tr_value *out, const struct tr_dest *dest,
                   struct tr_tensor **results)
{
    (void)dest; /* a view, or a copy of its own: the caller copies it */
    struct tr_tensor *x = input(args, 0), *v;

    (void)op;
    if (!x)
        return tr_last_status();
    v = tr_to(x, out->device);
    tr_release(x);
    return give(v, results);
}
