/*
 * backend_cuda_kernels.c - the CUDA backend's kernels: what runs an op on
 * a CUDA device, on the module's kernels (cuda/cuda_module.h).
 *
 * - The views and cast and to are the CPU's kernels: they only describe
 *   memory, or copy through the backend's own copies (gather, convert).
 * - The unary and binary ops, where and clamp plan as the CPU's kernels
 *   plan (tr__ew_describe: the same entry of ew_ops.def, compute dtypes and
 *   operand preparation), then run as one map of the module.
 * - contiguous and clone copy with the backend's gather, or convert into a
 *   destination on the device.
 * - zeros, ones, full (and _like) store one converted value by a map; rand
 *   and randn are the module's, on the CPU's own element function.
 * - sum, mean, max, min, argmax, argmin and norm are the module's reduce,
 *   over the dimensions and in the compute dtype the CPU's would take.
 * - matmul of floats is one cuBLAS strided-batched product, its operands
 *   copied first only where cuBLAS cannot read them as they lie.
 * - softmax, log_softmax, l2_normalize, layer_norm and rms_norm are the
 *   module's rowwise, the CPU's formulas with f64 sums.
 * - gather and index_select are the module's gather, which reports the
 *   first index out of range; topk is the module's topk.
 *
 * Which ops have a kernel here is the cuda column of ops.def: the table is
 * made from it, and an op the column names without a kernel here is a
 * bug that tests/unit/test_backend.c finds.
 */
#include "backend_cuda_impl.h"

#include <string.h>

#include "cpu/fused_impl.h"
#include "cpu/reduce_impl.h"
#include "cuda/reduce_body.h"
#include "cuda/topk_body.h"
#include "kernels.h"
#include "scratch_impl.h"

/* A result's destination when it is on the result's device (anything
 * else, the caller copies into). */
static const struct tr_dest *dest_on(const struct tr_dest *dest, struct tr_device device)
{
    return dest && dest->tensor && !dest->sink &&
                   tr_device_equal(dest->tensor->storage->device, device)
               ? dest
               : NULL;
}

/* An operand of an elementwise op as the CPU's kernel prepares it (a
 * tensor on the device, or a 0-d constant on the host). */
static struct tr_tensor *prepare(const struct tr_arg *arg, enum tr__ew_prep prep,
                                 enum tr_dtype result, enum tr_dtype compute)
{
    struct tr_tensor *c, *t;

    switch (prep) {
    case TR__EW_OPERAND:
        return tr__operand(arg, result, compute);
    case TR__EW_TRUTH:
        c = tr__arg_tensor(arg, TR_DTYPE_BOOL);
        t = c ? tr_cast(c, TR_DTYPE_BOOL) : NULL;
        tr_release(c);
        return t;
    default:
        return arg->tensor ? tr__tensor_alias(arg->tensor)
                           : tr__arg_tensor(arg, tr_value_dtype(&arg->value));
    }
}

/* o describes t broadcast to the result's ndim dimensions: its memory on the
 * device, or the value of a 0-d constant on the host. */
static tr_status describe(struct tr_cuda_operand *o, const struct tr_tensor *t, int ndim,
                          struct tr_device device, const char *fn)
{
    int64_t strides[TR_MAX_DIMS];
    int lead = ndim - t->ndim;

    memset(o, 0, sizeof *o);
    o->dtype = t->dtype;
    if (!tr_device_equal(t->storage->device, device)) {
        TR_RETURN_ERROR_IF(t->ndim != 0 || !tr__backend_of(t->storage->device.kind)->host_memory,
                           TR_ERR_DEVICE, "%s: an operand is not on %s", fn,
                           tr__backend_of(device.kind)->name);
        memcpy(o->value, tr_tensor_data(t), tr_dtype_size(t->dtype));
        return TR_OK;
    }
    o->data = tr_tensor_data(t);
    tr__byte_strides(t, strides);
    for (int d = 0; d < ndim; d++)
        o->strides[d] = d < lead ? 0 : strides[d - lead];
    return TR_OK;
}

/* The unary and binary ops, where and clamp: one map. */
static tr_status cuda_k_elementwise(const struct tr__op *op, const struct tr_arg *args,
                                    const struct tr_value *out, const struct tr_dest *dest,
                                    struct tr_tensor **results)
{
    const char *name = op->info.name;
    struct tr_tensor *in[TR_CUDA_MAX_OPERANDS] = {NULL, NULL, NULL}, *y = NULL;
    struct tr_cuda_map m = {0};
    struct tr__ew_desc d;
    tr_status s = TR_OK;

    TR_RETURN_ERROR_IF(!tr__ew_describe(op, args, out, &d), TR_ERR_STATE,
                       "%s: no CUDA kernel for these dtypes", name);
    m.code = d.code;
    m.nin = d.nin;
    m.ndim = out->ndim;
    m.out_dtype = out->dtype;
    m.in_compute = d.in_compute;
    m.out_compute = d.out_compute;
    m.params = d.params;
    for (int d_ = 0; d_ < out->ndim; d_++)
        m.shape[d_] = out->shape[d_];
    for (int k = 0; k < d.nin && s == TR_OK; k++) {
        in[k] = prepare(&args[d.param[k]], d.prep[k], out->dtype, d.in_compute);
        s = in[k] ? describe(&m.in[k], in[k], out->ndim, out->device, name)
                  : tr_last_status();
    }
    if (s == TR_OK) {
        y = tr__new_result(name, out, out->device, dest_on(dest, out->device));
        s = y ? TR_OK : tr_last_status();
    }
    if (s == TR_OK && tr_tensor_numel(y) > 0) {
        m.out = tr_tensor_data_mut(y);
        tr__byte_strides(y, m.out_strides);
        s = tr__cuda_map(out->device.index, &m, name);
    }
    for (int k = 0; k < d.nin; k++)
        tr_release(in[k]);
    return tr__give_results(&y, 1, s, results);
}

/* contiguous(x) and clone(x): a copy of its own (the backend's gather),
 * or a conversion into a destination on the device. */
static tr_status cuda_k_copy(const struct tr__op *op, const struct tr_arg *args,
                             const struct tr_value *out, const struct tr_dest *dest,
                             struct tr_tensor **results)
{
    const struct tr_dest *into = dest_on(dest, out->device);
    struct tr_tensor *y;
    tr_status s;

    if (!into)
        return tr__kernel_for(op->info.id)(op, args, out, NULL, results);
    y = tr__new_result(op->info.name, out, out->device, into);
    if (!y)
        return tr_last_status();
    s = tr_tensor_data(y) == tr_tensor_data(args[0].tensor) ? TR_OK
                                                             : tr_copy_into(y, args[0].tensor);
    return tr__give_results(&y, 1, s, results);
}

/* zeros, ones, full and their _like forms: the value converted to the
 * result's dtype by tr_copy_into's rules (as on the CPU), then stored in
 * every element by a map. */
static tr_status cuda_k_fill(const struct tr__op *op, const struct tr_arg *args,
                             const struct tr_value *out, const struct tr_dest *dest,
                             struct tr_tensor **results)
{
    enum tr_op_id id = op->info.id;
    struct tr_arg number = {.value = {.kind = TR_VALUE_INT,
                                      .integer = id == TR_OP_ONES || id == TR_OP_ONES_LIKE}};
    bool given = id == TR_OP_FULL || id == TR_OP_FULL_LIKE;
    struct tr_tensor *value = tr__arg_tensor(given ? &args[1] : &number, out->dtype), *y = NULL;
    struct tr_cuda_map m = {.code = TR__EW_NONE, .nin = 1, .ndim = out->ndim,
                            .out_dtype = out->dtype, .in_compute = out->dtype,
                            .out_compute = out->dtype};
    tr_status s = value ? TR_OK : tr_last_status();

    for (int d = 0; d < out->ndim; d++)
        m.shape[d] = out->shape[d];
    if (s == TR_OK)
        s = describe(&m.in[0], value, out->ndim, out->device, op->info.name);
    if (s == TR_OK) {
        y = tr__new_result(op->info.name, out, out->device, dest_on(dest, out->device));
        s = y ? TR_OK : tr_last_status();
    }
    if (s == TR_OK && tr_tensor_numel(y) > 0) {
        m.out = tr_tensor_data_mut(y);
        tr__byte_strides(y, m.out_strides);
        s = tr__cuda_map(out->device.index, &m, op->info.name);
    }
    tr_release(value);
    return tr__give_results(&y, 1, s, results);
}

/* rand(shape, seed, dtype) and randn: the bits of the CPU's (philox_math.h). */
static tr_status cuda_k_random(const struct tr__op *op, const struct tr_arg *args,
                               const struct tr_value *out, const struct tr_dest *dest,
                               struct tr_tensor **results)
{
    /* a negative seed stands for its two's complement bits */
    uint64_t seed = (uint64_t)args[1].value.integer;
    struct tr_tensor *y;
    tr_status s = TR_OK;

    TR_RETURN_ERROR_IF(!tr_dtype_is_float(out->dtype), TR_ERR_DTYPE, "%s: makes floats, not %s",
                       op->info.name, tr_dtype_name(out->dtype));
    y = tr__new_result(op->info.name, out, out->device, dest_on(dest, out->device));
    if (!y)
        return tr_last_status();
    if (tr_tensor_numel(y) > 0)
        s = tr__cuda_random(out->device.index, tr_tensor_data_mut(y), out->dtype,
                            op->info.id == TR_OP_RANDN, seed, (uint64_t)tr_tensor_numel(y),
                            op->info.name);
    return tr__give_results(&y, 1, s, results);
}

uint64_t tr__cuda_reduce_scratch(int64_t nout, int64_t n)
{
    int64_t groups = tr__cuda_reduce_groups(n);

    return groups > 1 ? (uint64_t)(nout * groups) * sizeof(struct tr__cuda_acc) : 0;
}

static enum tr_cuda_reduce_kind reduce_kind(enum tr_op_id id)
{
    switch (id) {
    case TR_OP_MEAN: return TR_CUDA_MEAN;
    case TR_OP_MAX: return TR_CUDA_MAX;
    case TR_OP_MIN: return TR_CUDA_MIN;
    case TR_OP_ARGMAX: return TR_CUDA_ARGMAX;
    case TR_OP_ARGMIN: return TR_CUDA_ARGMIN;
    case TR_OP_NORM: return TR_CUDA_NORM;
    default: return TR_CUDA_SUM;
    }
}

/* sum, mean, max, min, argmax, argmin and norm over the dimensions the
 * CPU's reduction would take, values read in its compute dtype, in the
 * module's fixed order (cuda/reduce_body.h). */
static tr_status cuda_k_reduce(const struct tr__op *op, const struct tr_arg *args,
                               const struct tr_value *out, const struct tr_dest *dest,
                               struct tr_tensor **results)
{
    const char *name = op->info.name;
    const struct tr_tensor *x = args[0].tensor;
    const struct tr_arg *dim = tr__arg_named(op, args, "dim"), *ord = tr__arg_named(op, args, "ord");
    struct tr_cuda_reduce r = {.kind = reduce_kind(op->info.id), .x = tr_tensor_data(x),
                               .x_dtype = x->dtype, .nout = 1, .n = 1,
                               .ord = ord ? tr__number(&ord->value) : 2,
                               .out_dtype = out->dtype};
    struct tr_tensor *y, *partials = NULL;
    int64_t strides[TR_MAX_DIMS];
    bool flags[TR_MAX_DIMS];
    tr_status s;

    TR_FORWARD_IF_ERROR(tr__reduce_flags(op, dim ? &dim->value : NULL, x->ndim, flags));
    r.in_compute = tr__reduce_compute(op, x->dtype, out->dtype);
    tr__byte_strides(x, strides);
    for (int d = 0; d < x->ndim; d++) {
        if (flags[d]) {
            r.reduced_shape[r.nreduced] = x->shape[d];
            r.reduced_strides[r.nreduced++] = strides[d];
            r.n *= x->shape[d];
        } else {
            r.kept_shape[r.nkept] = x->shape[d];
            r.kept_strides[r.nkept++] = strides[d];
            r.nout *= x->shape[d];
        }
    }
    TR_RETURN_ERROR_IF((r.kind == TR_CUDA_ARGMAX || r.kind == TR_CUDA_ARGMIN) && r.n == 0 &&
                           r.nout > 0,
                       TR_ERR_SHAPE, "%s: the tensor has no elements to take the %s of", name,
                       name);
    y = tr__new_result(name, out, out->device, dest_on(dest, out->device));
    if (!y)
        return tr_last_status();
    s = tr__scratch_block(name, tr__cuda_reduce_scratch(r.nout, r.n), out->device, &partials);
    if (s == TR_OK && r.nout > 0) {
        r.out = tr_tensor_data_mut(y);
        r.partials = partials ? tr_tensor_data_mut(partials) : NULL;
        s = tr__cuda_reduce(out->device.index, &r, name);
    }
    tr_release(partials);
    return tr__give_results(&y, 1, s, results);
}

/* ------------------------------------------------ gather, index_select */

/* The value of index operand o at element e of a result of shape. */
static tr_status index_at(const struct tr_cuda_operand *o, int ndim, const int64_t *shape,
                          int64_t e, struct tr_device device, int64_t *v)
{
    int64_t io = 0;
    unsigned char raw[8] = {0};

    for (int d = ndim - 1; d >= 0; d--) {
        io += e % shape[d] * o->strides[d];
        e /= shape[d];
    }
    if (o->data)
        TR_FORWARD_IF_ERROR(tr__device_download(device, raw, (const char *)o->data + io,
                                                tr_dtype_size(o->dtype), "gather"));
    else
        memcpy(raw, o->value, sizeof raw);
    tr__convert_value(v, TR_DTYPE_I64, raw, (enum tr_dtype)o->dtype);
    return TR_OK;
}

/* A number argument as a 0-d tensor of its own dtype on device. */
static struct tr_tensor *upload_number(const struct tr_arg *arg, struct tr_device device)
{
    struct tr_tensor *host = tr__arg_tensor(arg, tr_value_dtype(&arg->value));
    struct tr_tensor *t = host ? tr_to(host, device) : NULL;

    tr_release(host);
    return t;
}

/* gather(x, dim, index) and index_select(x, dim, index): the module's
 * gather, the index read where it lies; an index out of range is
 * TR_ERR_INDEX naming the first, as on the CPU, and nothing is kept. */
static tr_status cuda_k_gather(const struct tr__op *op, const struct tr_arg *args,
                               const struct tr_value *out, const struct tr_dest *dest,
                               struct tr_tensor **results)
{
    (void)dest; /* its results are its own: the caller copies them */
    const char *name = op->info.name;
    bool select = op->info.id == TR_OP_INDEX_SELECT;
    /* the device of the tensor operands (out's says the CPU for a number x) */
    struct tr_device device = (args[0].tensor ? args[0].tensor : args[2].tensor)->storage->device;
    /* x a number: its 0-d tensor moved to the device (one block) */
    struct tr_tensor *x = args[0].tensor ? tr__tensor_alias(args[0].tensor)
                                         : upload_number(&args[0], device);
    int d = x ? tr__checked_dim(args[1].value.integer, x->ndim) : 0;
    struct tr_cuda_gather g = {.ndim = out->ndim, .dim = d, .from_end = select};
    struct tr_tensor *index = x ? tr__arg_tensor(&args[2], TR_DTYPE_I64) : NULL, *y = NULL;
    struct tr_tensor *bad = NULL;
    uint64_t first_bad = UINT64_MAX;
    int64_t xs[TR_MAX_DIMS];
    tr_status s = index ? TR_OK : tr_last_status();

    if (s == TR_OK) {
        g.x = tr_tensor_data(x);
        g.item = (int64_t)tr_dtype_size(x->dtype);
        g.size = x->ndim ? x->shape[d] : 1;
    }

    if (s == TR_OK && select) {
        /* the 1-d index runs along dim; a 0-d one names one slice */
        s = describe(&g.index, index, 1, device, name);
        if (s == TR_OK && x->ndim > 0) {
            int64_t along = g.index.strides[0];
            memset(g.index.strides, 0, sizeof g.index.strides);
            g.index.strides[d] = index->ndim ? along : 0;
        }
    } else if (s == TR_OK) {
        s = describe(&g.index, index, out->ndim, device, name);
    }
    if (s == TR_OK) {
        y = tr__empty(name, out->dtype, out->ndim, out->shape, device);
        s = y ? tr__scratch_block(name, sizeof first_bad, device, &bad) : tr_last_status();
    }
    if (s == TR_OK && tr_tensor_numel(y) > 0) {
        tr__byte_strides(x, xs);
        for (int i = 0; i < out->ndim; i++) {
            g.shape[i] = out->shape[i];
            g.x_strides[i] = x->ndim ? xs[i] : 0;
        }
        g.out = tr_tensor_data_mut(y);
        g.first_bad = tr_tensor_data_mut(bad);
        s = tr__device_upload(device, g.first_bad, &first_bad, sizeof first_bad, name);
        if (s == TR_OK)
            s = tr__cuda_gather(device.index, &g, name);
        if (s == TR_OK)
            s = tr__device_download(device, &first_bad, g.first_bad, sizeof first_bad, name);
        if (s == TR_OK && first_bad != UINT64_MAX) {
            int64_t v = 0;
            s = index_at(&g.index, g.ndim, g.shape, (int64_t)first_bad, device, &v);
            if (s == TR_OK)
                s = tr__set_error(TR_ERR_INDEX,
                                  "%s: index %lld is out of range for dimension %d of size %lld",
                                  name, (long long)v, d, (long long)g.size);
        }
    }
    tr_release(bad);
    tr_release(index);
    tr_release(x);
    return tr__give_results(&y, 1, s, results);
}

/* ------------------------------------------------------------- topk */

/* topk(x, k, dim, largest): the module's topk, the CPU's order (its keys)
 * without sorting the line; values and indices in the results' shape. */
static tr_status cuda_k_topk(const struct tr__op *op, const struct tr_arg *args,
                             const struct tr_value *out, const struct tr_dest *dest,
                             struct tr_tensor **results)
{
    (void)dest; /* its results are its own: the caller copies them */
    const char *name = op->info.name;
    /* x a number: its 0-d tensor moved to the device (one block) */
    struct tr_tensor *x = args[0].tensor ? tr__tensor_alias(args[0].tensor)
                                         : upload_number(&args[0], out->device);
    struct tr_tensor *made[2] = {NULL, NULL};
    struct tr_cuda_topk t = {.largest = args[3].value.boolean, .nlines = 1};
    int64_t xs[TR_MAX_DIMS], os[TR_MAX_DIMS];
    int d = 0;
    tr_status s = x ? TR_OK : tr_last_status();

    if (x) {
        d = tr__checked_dim(args[2].value.integer, x->ndim);
        t.x = tr_tensor_data(x);
        t.x_dtype = x->dtype;
        t.len = x->ndim ? x->shape[d] : 1;
        t.k = x->ndim ? args[1].value.integer : 1;
        t.item = (int64_t)tr_dtype_size(x->dtype);
    }
    for (int i = 0; i < 2 && s == TR_OK; i++) {
        made[i] = tr__empty(name, out[i].dtype, out[i].ndim, out[i].shape, out[i].device);
        s = made[i] ? TR_OK : tr_last_status();
    }
    if (s == TR_OK && tr_tensor_numel(made[0]) > 0) {
        tr__byte_strides(x, xs);
        tr__contiguous_strides(out->ndim, out->shape, os);
        t.x_step = x->ndim ? xs[d] : 0;
        t.out_step = out->ndim ? os[d] : 0;
        for (int i = 0; i < x->ndim; i++) {
            if (i == d)
                continue;
            t.other_shape[t.nother] = x->shape[i];
            t.x_strides[t.nother] = xs[i];
            t.out_strides[t.nother++] = os[i];
            t.nlines *= x->shape[i];
        }
        t.values = tr_tensor_data_mut(made[0]);
        t.indices = tr_tensor_data_mut(made[1]);
        s = tr__cuda_topk(out->device.index, &t, name);
    }
    tr_release(x);
    return tr__give_results(made, 2, s, results);
}

/* --------------------------------------------------------- row-wise */

static enum tr_cuda_rowwise_kind rowwise_kind(enum tr_op_id id)
{
    switch (id) {
    case TR_OP_LOG_SOFTMAX: return TR_CUDA_LOG_SOFTMAX;
    case TR_OP_L2_NORMALIZE: return TR_CUDA_L2_NORMALIZE;
    case TR_OP_LAYER_NORM: return TR_CUDA_LAYER_NORM;
    case TR_OP_RMS_NORM: return TR_CUDA_RMS_NORM;
    default: return TR_CUDA_SOFTMAX;
    }
}

/* softmax, log_softmax and l2_normalize along dim, layer_norm and
 * rms_norm along the last dimension: one block of the module's per line,
 * the CPU's formulas in its compute dtype, the sums in f64. */
static tr_status cuda_k_rowwise(const struct tr__op *op, const struct tr_arg *args,
                                const struct tr_value *out, const struct tr_dest *dest,
                                struct tr_tensor **results)
{
    const char *name = op->info.name;
    const struct tr_tensor *x = args[0].tensor;
    const struct tr_arg *dim = tr__arg_named(op, args, "dim"), *eps = tr__arg_named(op, args, "eps");
    const struct tr_arg *vectors[2] = {tr__arg_named(op, args, "weight"),
                                       tr__arg_named(op, args, "bias")};
    struct tr_cuda_rowwise w = {.kind = rowwise_kind(op->info.id), .x = tr_tensor_data(x),
                                .x_dtype = x->dtype, .y_dtype = out->dtype,
                                .compute = tr__compute_dtype(out->dtype), .nlines = 1, .len = 1,
                                .eps = eps ? tr__number(&eps->value) : 0};
    struct tr_cuda_operand *into[2] = {&w.weight, &w.bias};
    struct tr_tensor *held[2] = {NULL, NULL}, *y = NULL;
    int64_t xs[TR_MAX_DIMS], ys[TR_MAX_DIMS];
    int d = 0;
    tr_status s = TR_OK;

    if (x->ndim > 0 && dim)
        s = tr__normalize_dim(name, (int)dim->value.integer, x->ndim, &d);
    else if (x->ndim > 0)
        d = x->ndim - 1; /* layer_norm and rms_norm: the last dimension */
    w.weight.dtype = w.bias.dtype = -1;
    for (int v = 0; v < 2 && s == TR_OK; v++) {
        const struct tr_arg *a = vectors[v];
        if (!a || (a->value.kind == TR_VALUE_NONE && !a->tensor))
            continue;
        held[v] = tr__arg_tensor(a, tr_value_dtype(&a->value));
        s = held[v] ? describe(into[v], held[v], 1, out->device, name) : tr_last_status();
    }
    if (s == TR_OK) {
        y = tr__new_result(name, out, out->device, dest_on(dest, out->device));
        s = y ? TR_OK : tr_last_status();
    }
    if (s == TR_OK && tr_tensor_numel(y) > 0) {
        tr__byte_strides(x, xs);
        tr__byte_strides(y, ys);
        for (int i = 0; i < x->ndim; i++) {
            if (i == d) {
                w.len = x->shape[i];
                w.x_step = xs[i];
                w.y_step = ys[i];
                continue;
            }
            w.other_shape[w.nother] = x->shape[i];
            w.x_strides[w.nother] = xs[i];
            w.y_strides[w.nother++] = ys[i];
            w.nlines *= x->shape[i];
        }
        w.y = tr_tensor_data_mut(y);
        s = tr__cuda_rowwise(out->device.index, &w, name);
    }
    tr_release(held[0]);
    tr_release(held[1]);
    return tr__give_results(&y, 1, s, results);
}

/* ----------------------------------------------------------- matmul */

/* o's matrix (rows x cols, element strides rs and cs) as cuBLAS reads it:
 * row-major or stored transposed; false when it is neither. */
static bool blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, int64_t *ld,
                        int *trans)
{
    if ((cols == 1 || cs == 1) && (rows == 1 || rs >= cols)) {
        *ld = rows == 1 || rs < 1 ? (cols > 1 ? cols : 1) : rs;
        *trans = 0;
        return true;
    }
    if ((rows == 1 || rs == 1) && (cols == 1 || cs >= rows)) {
        *ld = cols == 1 || cs < 1 ? (rows > 1 ? rows : 1) : cs;
        *trans = 1;
        return true;
    }
    return false;
}

bool tr__cuda_mm_plan(const struct tr_value *a, const struct tr_value *b,
                      const struct tr_value *c, struct tr__cuda_mm *mm)
{
    const struct tr_value *ops[2] = {a, b};
    int nb = c->ndim - (a->ndim >= 2) - (b->ndim >= 2);
    int64_t batch = 1;

    memset(mm, 0, sizeof *mm);
    for (int i = 0; i < nb; i++)
        batch *= c->shape[i];
    mm->p.dtype = c->dtype;
    mm->p.batch = batch;
    for (int w = 0; w < 2; w++) {
        const struct tr_value *v = ops[w];
        int64_t strides[TR_MAX_DIMS], rows, cols, rs, cs, ld = 0, stride = 0, inner = 1;
        int vb = v->ndim > 2 ? v->ndim - 2 : 0, trans = 0;
        bool linear = true, readable;

        tr__value_strides(v, strides);
        if (v->ndim >= 2) {
            rows = v->shape[v->ndim - 2];
            cols = v->shape[v->ndim - 1];
            rs = strides[v->ndim - 2];
            cs = strides[v->ndim - 1];
        } else if (w == 0) {
            rows = 1, cols = v->shape[0], rs = 0, cs = strides[0];
        } else {
            rows = v->shape[0], cols = 1, rs = strides[0], cs = 0;
        }
        /* the batch is one stride over c's batch dimensions flattened */
        for (int i = nb - 1; i >= 0; i--) {
            int j = i - (nb - vb);
            int64_t bs = j >= 0 && v->shape[j] != 1 ? strides[j] : 0;
            if (c->shape[i] != 1) {
                if (inner == 1 && stride == 0)
                    stride = bs;
                linear = linear && bs == stride * inner;
            }
            inner *= c->shape[i];
        }
        readable = blas_layout(rows, cols, rs, cs, &ld, &trans) && rs >= 0 && cs >= 0 &&
                   stride >= 0;
        if (v->dtype != c->dtype || !readable || !linear) {
            /* a compact copy of c's dtype: its batch that of c, or none */
            int nd = 0;
            uint64_t n = tr_dtype_size(c->dtype);
            if (vb > 0)
                for (int i = 0; i < nb; i++)
                    mm->copy_shape[w][nd++] = c->shape[i];
            for (int i = v->ndim - (v->ndim >= 2 ? 2 : 1); i < v->ndim; i++)
                mm->copy_shape[w][nd++] = v->shape[i];
            for (int i = 0; i < nd; i++)
                n *= (uint64_t)mm->copy_shape[w][i];
            mm->copy[w] = true;
            mm->copy_ndim[w] = nd;
            mm->copy_bytes[w] = n;
            ld = cols > 1 ? cols : 1;
            trans = 0;
            stride = vb > 0 ? rows * cols : 0;
        }
        if (w == 0) {
            mm->p.m = rows;
            mm->p.k = cols;
            mm->p.lda = ld;
            mm->p.trans_a = trans;
            mm->p.stride_a = stride;
        } else {
            mm->p.n = cols;
            mm->p.ldb = ld;
            mm->p.trans_b = trans;
            mm->p.stride_b = stride;
        }
    }
    return mm->p.m <= INT32_MAX && mm->p.n <= INT32_MAX && mm->p.k <= INT32_MAX &&
           mm->p.batch <= INT32_MAX && mm->p.lda <= INT32_MAX && mm->p.ldb <= INT32_MAX;
}

/* matmul of floats: operands where they lie when cuBLAS reads them so,
 * else compact copies of the result's dtype first; one strided-batched
 * product. */
static tr_status cuda_k_matmul(const struct tr__op *op, const struct tr_arg *args,
                               const struct tr_value *out, const struct tr_dest *dest,
                               struct tr_tensor **results)
{
    const char *name = op->info.name;
    struct tr_value a = tr_value_of(args[0].tensor), b = tr_value_of(args[1].tensor);
    struct tr_tensor *copies[2] = {NULL, NULL}, *y = NULL;
    const void *data[2];
    struct tr__cuda_mm mm;
    tr_status s = TR_OK;

    TR_RETURN_ERROR_IF(!tr__cuda_mm_plan(&a, &b, out, &mm), TR_ERR_SHAPE,
                       "%s: a dimension is past what cuBLAS takes (2^31 - 1)", name);
    for (int w = 0; w < 2 && s == TR_OK; w++) {
        const struct tr_tensor *t = args[w].tensor;
        data[w] = tr_tensor_data(t);
        if (!mm.copy[w])
            continue;
        /* t's matrices, their batch expanded to the copy's */
        struct tr_tensor *view = tr_expand(t, mm.copy_shape[w], mm.copy_ndim[w]);
        copies[w] = view ? tr__empty(name, out->dtype, mm.copy_ndim[w], mm.copy_shape[w],
                                     out->device)
                         : NULL;
        s = copies[w] ? tr_copy_into(copies[w], view) : tr_last_status();
        tr_release(view);
        data[w] = s == TR_OK ? tr_tensor_data(copies[w]) : NULL;
    }
    if (s == TR_OK) {
        y = tr__new_result(name, out, out->device, dest_on(dest, out->device));
        s = y ? TR_OK : tr_last_status();
    }
    if (s == TR_OK && tr_tensor_numel(y) > 0) {
        mm.p.a = data[0];
        mm.p.b = data[1];
        mm.p.c = tr_tensor_data_mut(y);
        mm.p.tf32 = tr_matmul_tf32();
        if (mm.p.k == 0) /* no products to add: zeros */
            s = tr__device_fill_zero(out->device, mm.p.c,
                                     (uint64_t)tr_tensor_numel(y) * tr_dtype_size(y->dtype),
                                     name);
        else
            s = tr__cuda_matmul(out->device.index, &mm.p, name);
    }
    tr_release(copies[0]);
    tr_release(copies[1]);
    return tr__give_results(&y, 1, s, results);
}

void tr__cuda_kernels_init(struct tr__backend *b)
{
    for (int id = 0; id < TR_OP_COUNT; id++) {
        const struct tr__op *op = tr__op_of(tr_op_get((enum tr_op_id)id));
        tr__kernel_fn cpu = tr__kernel_for((enum tr_op_id)id);

        b->kernels[id] = NULL;
        if (op->cuda == TR__TAKES_NONE)
            continue;
        if (cpu == tr__k_unary || cpu == tr__k_binary || cpu == tr__k_select3)
            b->kernels[id] = cuda_k_elementwise;
        else if (cpu == tr__k_copy)
            b->kernels[id] = cuda_k_copy;
        else if (cpu == tr__k_fill)
            b->kernels[id] = cuda_k_fill;
        else if (cpu == tr__k_random)
            b->kernels[id] = cuda_k_random;
        else if (cpu == tr__k_reduce)
            b->kernels[id] = cuda_k_reduce;
        else if (id == TR_OP_MATMUL)
            b->kernels[id] = cuda_k_matmul;
        else if (cpu == tr__k_nn)
            b->kernels[id] = cuda_k_rowwise;
        else if (cpu == tr__k_gather || cpu == tr__k_index_select)
            b->kernels[id] = cuda_k_gather;
        else if (id == TR_OP_TOPK)
            b->kernels[id] = cuda_k_topk;
        else if (op->info.group_id == TR_GROUP_VIEWS || id == TR_OP_CAST || id == TR_OP_TO)
            b->kernels[id] = cpu;
    }
}
