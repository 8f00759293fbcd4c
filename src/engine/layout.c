/*
 * layout.c - tr_op_layout: how an op's results lie in memory, known before
 * anything runs, so that a plan can describe the next op's arguments as
 * tr_op_scratch needs them.
 *
 * The views are computed by the view kernels themselves, on a stand-in
 * tensor of the argument's description whose memory is never read (a view
 * op only computes strides), so the layout is the kernels' by
 * construction; reshape and flatten, which copy when no strides can
 * express the new shape, ask tr__view_strides as tr_reshape_view does.
 */
#include <string.h>

#include "kernel_impl.h"

/* A stand-in for every tensor: views of it only compute strides. */
static _Alignas(64) char stand_in[64];

struct tr_tensor *tr__stand_in(const char *fn, const struct tr_value *x)
{
    struct tr_blob blob = {.data = stand_in};
    int64_t lo = 0, hi = 0;

    if (x->strided) {
        if (tr__extent(fn, x->ndim, x->shape, x->strides, &lo, &hi) != TR_OK)
            return NULL;
        TR_RETURN_NULL_IF(lo < INT64_MIN / 16, TR_ERR_INVALID, "%s: the strides overflow", fn);
        blob.offset = -lo * (int64_t)tr_dtype_size(x->dtype);
    }
    return tr_from_blob(&blob, x->dtype, x->ndim, x->shape, x->strided ? x->strides : NULL,
                        TR_CPU);
}

static void compact(struct tr_value *v)
{
    v->strided = false;
    tr__contiguous_strides(v->ndim, v->shape, v->strides);
}

static void layout_of(struct tr_value *out, const struct tr_value *x)
{
    out->strided = x->strided;
    memcpy(out->strides, x->strides, sizeof out->strides);
    if (!x->strided)
        compact(out);
}

/* The result of a view op that never copies, from its kernel run on a
 * stand-in of args[0]. */
static tr_status view_layout(const struct tr__op *op, const struct tr_value *args,
                             struct tr_value *result)
{
    struct tr_arg run[TR_OP_MAX_PARAMS];
    struct tr_tensor *r[TR_OP_MAX_RESULTS] = {NULL}, *x;
    struct tr_scope *scope = tr_scope_begin();
    tr_status s;

    TR_RETURN_ERROR_IF(!scope, TR_ERR_OOM, "%s: out of memory", op->info.name);
    x = tr__stand_in(op->info.name, &args[0]);
    memset(run, 0, sizeof run);
    for (int i = 0; i < op->info.nparams; i++)
        run[i].value = args[i];
    run[0].tensor = x;
    s = x ? tr_op_run(&op->info, run, NULL, r) : tr_last_status();
    if (s == TR_OK) {
        struct tr_value v = tr_value_of(r[0]);
        result->strided = v.strided;
        memcpy(result->strides, v.strides, sizeof result->strides);
        if (!v.strided)
            compact(result);
    }
    tr_scope_end(scope, NULL, 0);
    return s;
}

tr_status tr_op_layout(const struct tr_op_info *info, const struct tr_value *args,
                       struct tr_value *results)
{
    const struct tr__op *op = tr__op_of(info);
    const struct tr_value *x = &args[0];
    bool tensor = info->nparams > 0 && x->kind == TR_VALUE_TENSOR;
    int64_t strides[TR_MAX_DIMS];
    bool empty = false;

    for (int i = 0; i < info->nresults; i++)
        compact(&results[i]);
    if (!tensor)
        return TR_OK; /* made by the op, or from a number: compact */
    for (int i = 0; i < x->ndim; i++)
        empty = empty || x->shape[i] == 0;
    switch (op->rule) {
    case TR__RULE_TRANSPOSE:
    case TR__RULE_PERMUTE:
    case TR__RULE_SQUEEZE:
    case TR__RULE_UNSQUEEZE:
    case TR__RULE_EXPAND:
    case TR__RULE_DIAGONAL:
    case TR__RULE_FLIP:
    case TR__RULE_NARROW:
    case TR__RULE_UNFLATTEN:
    case TR__RULE_MOVEDIM:
        return view_layout(op, args, &results[0]);
    case TR__RULE_RESHAPE:
    case TR__RULE_FLATTEN:
        if (x->strided)
            memcpy(strides, x->strides, sizeof strides);
        else
            tr__contiguous_strides(x->ndim, x->shape, strides);
        if (!empty && tr__view_strides(x->ndim, x->shape, strides, results[0].ndim,
                                          results[0].shape, results[0].strides))
            results[0].strided = !tr__is_contiguous(results[0].ndim, results[0].shape,
                                                    results[0].strides);
        if (!results[0].strided)
            compact(&results[0]);
        return TR_OK;
    case TR__RULE_TO:
        /* a new handle of x on its own device; else a compact copy */
        if (tr_device_equal(x->device, results[0].device))
            layout_of(&results[0], x);
        return TR_OK;
    default:
        return TR_OK; /* contiguous and cast give x only when it is compact */
    }
}
