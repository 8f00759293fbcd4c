/*
 * index.c - x[...]: NumPy basic indexing (integers, slices, ..., None) as
 * a view, and the strides of that view known before anything runs.  The
 * executor makes the view with tr_index_view; the lowering describes it
 * with tr_index_layout, which runs the same code on a stand-in tensor
 * whose memory is never read, so that the two cannot disagree.
 */
#include <string.h>

#include "kernel_impl.h"

static int64_t subscript_int(const struct tr_value *v)
{
    if (v->kind != TR_VALUE_INT)
        return TR_SLICE_NONE;
    return v->known ? v->integer : 0; /* unknown (chunk_start): strides only */
}

struct tr_tensor *tr_index_view(const struct tr_tensor *x, const struct tr_value *subs, size_t n)
{
    struct tr_tensor *t, *next;
    int consumed = 0, d = 0, ndim;

    TR_CHECK_HANDLE_OR_NULL(x, "index");
    ndim = tr_tensor_ndim(x);
    for (size_t i = 0; i < n; i++)
        consumed += subs[i].kind != TR_VALUE_STRING && subs[i].kind != TR_VALUE_NONE;
    t = tr_expand(x, tr_tensor_shape(x), ndim); /* a handle of its own */
    for (size_t i = 0; t && i < n; i++) {
        const struct tr_value *s = &subs[i];
        if (s->kind == TR_VALUE_STRING) {
            d += ndim - consumed;
            continue;
        }
        if (s->kind == TR_VALUE_NONE) {
            int64_t shape[TR_MAX_DIMS];
            int k = tr_tensor_ndim(t);
            TR_RETURN_NULL_IF(k >= TR_MAX_DIMS, TR_ERR_SHAPE,
                              "index: a tensor has at most %d dimensions", TR_MAX_DIMS);
            memcpy(shape, tr_tensor_shape(t), (size_t)d * sizeof *shape);
            shape[d] = 1;
            memcpy(shape + d + 1, tr_tensor_shape(t) + d, (size_t)(k - d) * sizeof *shape);
            next = tr_reshape_view(t, shape, k + 1);
            d++;
        } else if (s->kind == TR_VALUE_LIST && s->count == 3) {
            int64_t step = subscript_int(&s->items[2]);
            next = tr_slice(t, d, subscript_int(&s->items[0]), subscript_int(&s->items[1]),
                            step == TR_SLICE_NONE ? 1 : step);
            d++;
        } else {
            next = tr_select(t, d, subscript_int(s));
        }
        tr_release(t);
        t = next;
    }
    return t;
}

tr_status tr_index_layout(const struct tr_value *x, const struct tr_value *subs, size_t n,
                          struct tr_value *out)
{
    struct tr_scope *scope = tr_scope_begin();
    struct tr_tensor *base, *view;
    tr_status s = TR_OK;

    TR_RETURN_ERROR_IF(!scope, TR_ERR_OOM, "index: out of memory");
    base = tr__stand_in("index", x);
    view = base ? tr_index_view(base, subs, n) : NULL;
    if (view) {
        struct tr_value v = tr_value_of(view);
        out->strided = v.strided;
        memcpy(out->strides, v.strides, sizeof out->strides);
        if (!v.strided)
            tr__contiguous_strides(out->ndim, out->shape, out->strides);
    } else {
        s = tr_last_status();
    }
    tr_scope_end(scope, NULL, 0);
    return s;
}
