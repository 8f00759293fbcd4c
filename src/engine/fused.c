/*
 * fused.c - fused chains (tensorrun_fused.h): which ops may be in one,
 * typing a chain, and running it through cpu/fused.c.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu/fused_impl.h"
#include "kernels.h"
#include "scratch_impl.h"
#include "tensorrun_fused.h"

/* An argument of op as the kernels take it, from descriptions alone. */
static void args_of(const struct tr_op_info *info, const struct tr_value *values,
                    struct tr_arg *args)
{
    for (int i = 0; i < info->nparams; i++) {
        memset(&args[i], 0, sizeof args[i]);
        args[i].value = values[i];
    }
}

/* Whether the tensors among args are all on the CPU, and how many there are. */
static bool cpu_tensors(const struct tr_op_info *info, const struct tr_value *args, int *count)
{
    *count = 0;
    for (int i = 0; i < info->nparams; i++) {
        if (args[i].kind != TR_VALUE_TENSOR)
            continue;
        if (args[i].device.kind != TR_DEV_CPU)
            return false;
        (*count)++;
    }
    return true;
}

bool tr_fused_can_step(enum tr_op_id id, const struct tr_value *args,
                       const struct tr_value *result)
{
    const struct tr_op_info *info = tr_op_get(id);
    const struct tr__op *op;
    struct tr_arg targs[TR_OP_MAX_PARAMS];
    struct tr__ew_desc d;
    int tensors;

    if (!info || !args || !result || info->nresults != 1)
        return false;
    op = tr__op_of(info);
    if (op->kernel != tr__k_unary && op->kernel != tr__k_binary &&
        op->kernel != tr__k_select3 && id != TR_OP_CAST)
        return false;
    if (!cpu_tensors(info, args, &tensors) || tensors == 0 ||
        result->kind != TR_VALUE_TENSOR)
        return false;
    /* the kernel refuses negative integer exponents after looking at them */
    if (id == TR_OP_POW && !tr_dtype_is_float(result->dtype) &&
        (args[1].kind == TR_VALUE_TENSOR || !args[1].known ||
         (args[1].kind == TR_VALUE_INT && args[1].integer < 0)))
        return false;
    args_of(info, args, targs);
    return tr__ew_describe(op, targs, result, &d);
}

bool tr_fused_can_tail(enum tr_op_id id, const struct tr_value *args,
                       const struct tr_value *result)
{
    const struct tr_op_info *info = tr_op_get(id);
    const struct tr__op *op;
    int tensors;

    if (!info || !args || !result || info->nresults != 1)
        return false;
    op = tr__op_of(info);
    if (op->kernel != tr__k_reduce && op->kernel != tr__k_nn)
        return false;
    return args[0].kind == TR_VALUE_TENSOR && cpu_tensors(info, args, &tensors);
}

/* The description of argument a of a step of chain. */
static tr_status arg_value(const struct tr_fused *chain, const struct tr_value *inputs, int step,
                           int param, const struct tr_fused_arg *a, struct tr_value *out)
{
    switch (a->ref) {
    case TR_FUSED_CONST:
        *out = a->value;
        return TR_OK;
    case TR_FUSED_INPUT:
        TR_RETURN_ERROR_IF(a->index < 0 || a->index >= chain->ninputs, TR_ERR_INVALID,
                           "fused chain: step %d, argument %d: there is no input %d", step,
                           param, a->index);
        TR_RETURN_ERROR_IF(inputs[a->index].kind != TR_VALUE_TENSOR, TR_ERR_INVALID,
                           "fused chain: input %d is not a tensor", a->index);
        *out = inputs[a->index];
        return TR_OK;
    case TR_FUSED_STEP:
        TR_RETURN_ERROR_IF(a->index < 0 || a->index >= step, TR_ERR_INVALID,
                           "fused chain: step %d, argument %d: step %d is not an earlier step",
                           step, param, a->index);
        *out = chain->steps[a->index].result;
        return TR_OK;
    }
    return tr__set_error(TR_ERR_INVALID, "fused chain: step %d, argument %d: unknown reference",
                         step, param);
}

/* Types one op of the chain: step `step` (nsteps for the tail). */
static tr_status check_op(struct tr_fused *chain, const struct tr_value *inputs, int step)
{
    bool tail = step == chain->nsteps;
    struct tr_fused_op *f = tail ? &chain->tail : &chain->steps[step];
    const struct tr_op_info *info = tr_op_get(f->op);
    struct tr_value values[TR_OP_MAX_PARAMS];
    int bad;

    TR_RETURN_ERROR_IF(!info, TR_ERR_INVALID, "fused chain: step %d: no op has id %d", step,
                       (int)f->op);
    for (int i = 0; i < info->nparams; i++) {
        if (tail && i == 0) {
            values[0] = chain->steps[chain->nsteps - 1].result;
            continue;
        }
        TR_FORWARD_IF_ERROR(arg_value(chain, inputs, step, i, &f->args[i], &values[i]));
        TR_RETURN_ERROR_IF(tail && f->args[i].ref == TR_FUSED_STEP, TR_ERR_INVALID,
                           "fused chain: the tail %s takes the last step as x only",
                           info->name);
    }
    TR_FORWARD_IF_ERROR(tr_op_infer(info, values, &f->result, &bad));
    if (tail)
        TR_RETURN_ERROR_IF(!tr_fused_can_tail(f->op, values, &f->result), TR_ERR_INVALID,
                           "fused chain: %s cannot end a fused chain", info->name);
    else
        TR_RETURN_ERROR_IF(!tr_fused_can_step(f->op, values, &f->result), TR_ERR_INVALID,
                           "fused chain: step %d: %s cannot be a step of a fused chain", step,
                           info->name);
    return TR_OK;
}

tr_status tr_fused_check(struct tr_fused *chain, const struct tr_value *inputs,
                         struct tr_value *result, int *bad_step)
{
    bool used[TR_FUSED_MAX_STEPS] = {false};
    int step = -1;
    tr_status s = TR_OK;

    if (bad_step)
        *bad_step = -1;
    TR_RETURN_ERROR_IF(!chain || (chain->ninputs > 0 && !inputs), TR_ERR_INVALID,
                       "fused chain: NULL argument");
    TR_RETURN_ERROR_IF(chain->nsteps < 1 || chain->nsteps > TR_FUSED_MAX_STEPS, TR_ERR_INVALID,
                       "fused chain: %d steps (1 to %d)", chain->nsteps, TR_FUSED_MAX_STEPS);
    TR_RETURN_ERROR_IF(chain->ninputs < 0 || chain->ninputs > TR_FUSED_MAX_INPUTS,
                       TR_ERR_INVALID, "fused chain: %d inputs (0 to %d)", chain->ninputs,
                       TR_FUSED_MAX_INPUTS);
    for (step = 0; step <= chain->nsteps && s == TR_OK; step++) {
        if (step == chain->nsteps && !chain->has_tail)
            break;
        s = check_op(chain, inputs, step);
        for (int i = 0; s == TR_OK && step < chain->nsteps && i < TR_OP_MAX_PARAMS; i++)
            if (i < tr_op_get(chain->steps[step].op)->nparams &&
                chain->steps[step].args[i].ref == TR_FUSED_STEP)
                used[chain->steps[step].args[i].index] = true;
    }
    if (s != TR_OK) {
        if (bad_step)
            *bad_step = step - 1;
        return s;
    }
    for (step = 0; step + 1 < chain->nsteps; step++) {
        if (used[step])
            continue;
        if (bad_step)
            *bad_step = step;
        return tr__set_error(TR_ERR_INVALID, "fused chain: step %d: its result is not used",
                             step);
    }
    if (result)
        *result = chain->has_tail ? chain->tail.result : chain->steps[chain->nsteps - 1].result;
    return TR_OK;
}

size_t tr_fused_scratch_bytes(const struct tr_fused *chain)
{
    return tr__fused_scratch(chain);
}

/* The tail's argument for the op's parameter name, when a constant;
 * NULL when the op has no such parameter. */
static const struct tr_fused_arg *tail_arg(const struct tr__op *op, const struct tr_fused *chain,
                                           const char *name)
{
    int i = tr__param_index(op, name);

    return i < 0 ? NULL : &chain->tail.args[i];
}

/* Whether a weight or bias of the tail is there: a chain input, or a
 * constant that is not None. */
static bool tail_present(const struct tr_fused_arg *a)
{
    return a && (a->ref != TR_FUSED_CONST || a->value.kind != TR_VALUE_NONE);
}

tr_status tr_fused_memory(const struct tr_fused *chain, bool given, int threads,
                          struct tr_op_memory *out)
{
    const struct tr_value *last, *result;
    uint64_t bytes;

    TR_RETURN_ERROR_IF(!chain || !out, TR_ERR_INVALID, "fused chain: NULL argument");
    memset(out, 0, sizeof *out);
    TR_RETURN_ERROR_IF(chain->nsteps < 1 || chain->nsteps > TR_FUSED_MAX_STEPS, TR_ERR_INVALID,
                       "fused chain: %d steps (1 to %d)", chain->nsteps, TR_FUSED_MAX_STEPS);
    TR_RETURN_ERROR_IF(threads < 1, TR_ERR_INVALID, "fused chain: %d threads", threads);
    last = &chain->steps[chain->nsteps - 1].result;
    result = chain->has_tail ? &chain->tail.result : last;
    bytes = tr_dtype_size(result->dtype);
    for (int d = 0; d < result->ndim; d++)
        bytes *= (uint64_t)result->shape[d];
    out->results[0] = given ? 0 : tr_memory_block_size(bytes);
    if (chain->has_tail) {
        /* the tail's own pool blocks, sized by the functions its kernel
         * sizes them with, for values from a source: taken after the
         * result and given back before tr_fused_run returns */
        const struct tr__op *op = tr__op_of(tr_op_get(chain->tail.op));
        if (op->kernel == tr__k_reduce) {
            const struct tr_fused_arg *dims = tail_arg(op, chain, "dim");
            uint64_t partials, tiles;
            TR_FORWARD_IF_ERROR(tr__reduce_scratch(op, last, true, dims ? &dims->value : NULL,
                                                   result->dtype, threads, &partials, &tiles));
            out->scratch = tr_memory_block_size(partials) + tr_memory_block_size(tiles);
        } else {
            const struct tr_fused_arg *dim = tail_arg(op, chain, "dim");
            out->scratch = tr_memory_block_size(
                tr__nn_scratch(op, last, true, dim ? dim->value.integer : -1, result->dtype,
                               tail_present(tail_arg(op, chain, "weight")),
                               tail_present(tail_arg(op, chain, "bias")), threads));
        }
    }
    out->peak = out->results[0] + out->scratch;
    return TR_OK;
}

/* Whether caller memory d can take a result as out describes it. */
static bool dest_fits(const struct tr_tensor *d, const struct tr_value *out)
{
    return d->storage->device.kind == TR_DEV_CPU && d->dtype == out->dtype &&
           d->ndim == out->ndim &&
           memcmp(d->shape, out->shape, (size_t)d->ndim * sizeof *d->shape) == 0 &&
           !(d->storage->flags & TR_FLAG_READONLY) &&
           tr__is_contiguous(d->ndim, d->shape, d->strides);
}

/* The descriptions of a run's inputs, which must be live CPU tensors. */
static tr_status input_values(const struct tr_fused *chain, struct tr_tensor *const *inputs,
                              struct tr_value *values)
{
    TR_RETURN_ERROR_IF(chain->ninputs < 0 || chain->ninputs > TR_FUSED_MAX_INPUTS,
                       TR_ERR_INVALID, "fused chain: %d inputs (0 to %d)", chain->ninputs,
                       TR_FUSED_MAX_INPUTS);
    for (int i = 0; i < chain->ninputs; i++) {
        TR_FORWARD_IF_ERROR(tr__check(inputs[i], "fused chain"));
        TR_RETURN_ERROR_IF(inputs[i]->storage->device.kind != TR_DEV_CPU, TR_ERR_DEVICE,
                           "fused chain: input %d is not on the CPU", i);
        values[i] = tr_value_of(inputs[i]);
    }
    return TR_OK;
}

tr_status tr_fused_run(const struct tr_fused *chain, struct tr_tensor *const *inputs,
                       struct tr_tensor *dest, struct tr_tensor **result)
{
    struct tr_value values[TR_FUSED_MAX_INPUTS], out;
    struct tr_fused *checked;
    struct tr_tensor *y;
    tr_status s;

    TR_RETURN_ERROR_IF(!chain || !result, TR_ERR_INVALID, "fused chain: NULL argument");
    *result = NULL;
    TR_FORWARD_IF_ERROR(input_values(chain, inputs, values));
    checked = malloc(sizeof *checked);
    TR_RETURN_ERROR_IF(!checked, TR_ERR_OOM, "fused chain: out of memory");
    *checked = *chain;
    s = tr_fused_check(checked, values, &out, NULL);
    if (s == TR_OK && dest) {
        s = tr__check(dest, "fused chain");
        if (s == TR_OK && !dest_fits(dest, &out))
            s = tr__set_error(TR_ERR_INVALID, "fused chain: the destination is not compact "
                                              "writable CPU memory of the result's dtype and "
                                              "shape");
    }
    y = s != TR_OK ? NULL
        : dest     ? tr__tensor_alias(dest)
                   : tr__empty("fused chain", out.dtype, out.ndim, out.shape, TR_CPU);
    if (s == TR_OK && !y)
        s = tr_last_status();
    if (s == TR_OK)
        s = tr__fused_cpu_run(checked, inputs, y);
    free(checked);
    if (s != TR_OK) {
        tr_release(y);
        return s;
    }
    *result = y;
    return TR_OK;
}

tr_status tr_fused_run_sink(const struct tr_fused *chain, struct tr_tensor *const *inputs,
                            const struct tr_sink *sink)
{
    struct tr_value values[TR_FUSED_MAX_INPUTS];
    struct tr__store store;
    struct tr_fused *checked;
    tr_status s;

    TR_RETURN_ERROR_IF(!chain || !sink || !sink->store, TR_ERR_INVALID,
                       "fused chain: NULL argument");
    TR_RETURN_ERROR_IF(chain->has_tail, TR_ERR_INVALID,
                       "fused chain: only a chain without a tail can go to a sink");
    TR_FORWARD_IF_ERROR(input_values(chain, inputs, values));
    checked = malloc(sizeof *checked);
    TR_RETURN_ERROR_IF(!checked, TR_ERR_OOM, "fused chain: out of memory");
    *checked = *chain;
    s = tr_fused_check(checked, values, NULL, NULL);
    store.fn = sink->store;
    store.ctx = sink->ctx;
    store.name = "fused chain";
    if (s == TR_OK)
        s = tr__fused_cpu_stream(checked, inputs, &store);
    free(checked);
    return s;
}
