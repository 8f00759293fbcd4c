/*
 * scratch.c - tr_op_scratch: what each kernel takes from the pool, as a
 * function of its arguments' descriptions and the thread count.
 *
 * Each kernel's declaration below replays the kernel's allocations in the
 * kernel's order (take, then drop when the kernel releases it), in block
 * bytes, so that its peak is the kernel's: operand copies made before the
 * result, the result, then scratch taken after it.  Where the sizes follow
 * from more than a shape (partials, per-thread buffers, tiles, BLAS's
 * layouts), the declaration calls the function the kernel itself sizes
 * them with (scratch_impl.h, matmul_impl.h).  tests/unit/test_scratch.c
 * runs every op that has a kernel against its declaration.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "backend_cuda_impl.h"
#include "cpu/einsum_impl.h"
#include "cpu/matmul_impl.h"
#include "cpu/reduce_impl.h"
#include "kernels.h"
#include "scratch_impl.h"

int tr__team_size(bool parallel)
{
#ifdef _OPENMP
    return parallel ? tr_num_threads() : 1;
#else
    (void)parallel;
    return 1;
#endif
}

int tr__team_index(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

static void value_strides(const struct tr_value *v, int64_t *out)
{
    if (v->strided)
        memcpy(out, v->strides, sizeof v->strides);
    else
        tr__contiguous_strides(v->ndim, v->shape, out);
}

void tr__value_strides(const struct tr_value *v, int64_t *out)
{
    value_strides(v, out);
}

void tr__value_byte_strides(const struct tr_value *v, int64_t *out)
{
    int64_t item = (int64_t)tr_dtype_size(v->dtype);

    value_strides(v, out);
    for (int i = 0; i < v->ndim; i++) /* as tr__byte_strides; saturating, as the strides */
        if (v->shape[i] == 1)
            out[i] = 0;
        else if (__builtin_mul_overflow(out[i], item, &out[i]))
            out[i] = out[i] < 0 ? INT64_MIN : INT64_MAX;
}

tr_status tr__scratch_block(const char *fn, uint64_t bytes, struct tr_device device,
                            struct tr_tensor **t)
{
    *t = NULL;
    if (bytes == 0)
        return TR_OK;
    *t = tr__empty(fn, TR_DTYPE_U8, 1, (int64_t[]){(int64_t)bytes}, device);
    return *t ? TR_OK : tr_last_status();
}

/* ------------------------------------------------------- the test switch */

static pthread_once_t misdeclare_once = PTHREAD_ONCE_INIT;
static int misdeclared = -1; /* the op id whose scratch is declared wrong */

static void read_misdeclare(void)
{
    const char *name = getenv("TENSORRUN_TEST_MISDECLARE_SCRATCH");
    const struct tr_op_info *op = name && *name ? tr_op_find(name) : NULL;

    misdeclared = op ? (int)op->id : -1;
}

/* ------------------------------------------------------------ the tally */

/* A replay of a kernel's pool blocks: what it holds now and at most. */
struct tally {
    const struct tr__op *op;
    const struct tr_value *args, *results;
    const bool *given;
    int threads;
    uint64_t live, peak;
    uint64_t result[TR_OP_MAX_RESULTS];
};

static void take(struct tally *t, uint64_t bytes)
{
    t->live += tr_memory_block_size(bytes);
    if (t->live > t->peak)
        t->peak = t->live;
}

static void drop(struct tally *t, uint64_t bytes)
{
    t->live -= tr_memory_block_size(bytes);
}

static int64_t numel_of(const struct tr_value *v)
{
    int64_t n = 1;

    if (v->kind != TR_VALUE_TENSOR)
        return 1; /* a number: a 0-d tensor */
    for (int i = 0; i < v->ndim; i++)
        if (v->shape[i] == 0)
            return 0; /* whatever the other sizes multiply to */
    for (int i = 0; i < v->ndim; i++)
        n *= v->shape[i];
    return n;
}

static uint64_t bytes_of(const struct tr_value *v, enum tr_dtype dtype)
{
    return (uint64_t)numel_of(v) * tr_dtype_size(dtype);
}

/* Result i made in the pool by the kernel (nothing when given). */
static void take_result(struct tally *t, int i)
{
    t->result[i] = t->given && t->given[i] ? 0 : tr_memory_block_size(bytes_of(&t->results[i], t->results[i].dtype));
    t->live += t->result[i];
    if (t->live > t->peak)
        t->peak = t->live;
}

static bool is_tensor(const struct tr_value *v)
{
    return v->kind == TR_VALUE_TENSOR;
}

static bool is_none(const struct tr_value *v)
{
    return v->kind == TR_VALUE_NONE;
}

/* What tr_cast(t, to) copies for the tensor tr__arg_tensor(v, made) gives
 * (a number becomes a compact 0-d tensor of dtype made, outside the
 * pool): nothing when it is compact and of dtype to already. */
static uint64_t cast_bytes(const struct tr_value *v, enum tr_dtype made, enum tr_dtype to)
{
    enum tr_dtype from = is_tensor(v) ? v->dtype : made;

    return from != to || (is_tensor(v) && v->strided) ? bytes_of(v, to) : 0;
}

/* What tr__operand copies: an integer tensor wider than a byte promoted to
 * an f16 or bf16 result is first rounded to it. */
static uint64_t operand_bytes(const struct tr_value *v, enum tr_dtype result)
{
    bool narrow = result == TR_DTYPE_F16 || result == TR_DTYPE_BF16;

    return is_tensor(v) && narrow && tr_dtype_is_integer(v->dtype) && tr_dtype_size(v->dtype) > 1
               ? bytes_of(v, result)
               : 0;
}

/* The description of what tr__operand gives for v. */
static struct tr_value operand_value(const struct tr_value *v, enum tr_dtype result)
{
    struct tr_value o = *v;

    if (operand_bytes(v, result)) {
        o.dtype = result;
        o.strided = false;
    }
    return o;
}

static const struct tr_value *arg_named(const struct tally *t, const char *name)
{
    int i = tr__param_index(t->op, name);

    return i < 0 ? NULL : &t->args[i];
}

/* ------------------------------------------------------- the declarations */

/* Ops whose kernels make their results and nothing else: the unary ops
 * (a number operand is a constant, not pool memory), cumsum, concat and
 * stack (each item is converted into its place), the ops that create. */
static tr_status results_only(struct tally *t)
{
    for (int i = 0; i < t->op->info.nresults; i++)
        take_result(t, i);
    return TR_OK;
}

/* tr__k_binary and tr__k_outer: both operands, then the result. */
static tr_status two_operands(struct tally *t)
{
    enum tr_dtype out = t->results[0].dtype;
    uint64_t a = operand_bytes(&t->args[0], out), b = operand_bytes(&t->args[1], out);

    take(t, a);
    take(t, b);
    take_result(t, 0);
    drop(t, a);
    drop(t, b);
    return TR_OK;
}

/* tr__k_select3: where's condition as a compact bool tensor, the other
 * operands as tr__operand gives them, then the result. */
static tr_status select3(struct tally *t)
{
    bool where = t->op->rule == TR__RULE_WHERE;
    enum tr_dtype out = t->results[0].dtype;
    uint64_t held[3] = {0, 0, 0};

    for (int i = 0; i < 3; i++) {
        if (is_none(&t->args[i]))
            continue;
        held[i] = where && i == 0 ? cast_bytes(&t->args[0], TR_DTYPE_BOOL, TR_DTYPE_BOOL)
                                  : operand_bytes(&t->args[i], out);
        take(t, held[i]);
    }
    take_result(t, 0);
    for (int i = 0; i < 3; i++)
        drop(t, held[i]);
    return TR_OK;
}

/* tr__k_reduce: the result, then the partials and the tile buffers; on
 * CUDA, the result and its groups' partials (backend_cuda_kernels.c). */
static tr_status reduction(struct tally *t)
{
    const struct tr_value *x = &t->args[0];
    uint64_t partials, tiles;

    if (t->results[0].device.kind == TR_DEV_CUDA) {
        bool flags[TR_MAX_DIMS];
        int64_t nout = 1, n = 1;
        TR_FORWARD_IF_ERROR(tr__reduce_flags(t->op, arg_named(t, "dim"), x->ndim, flags));
        for (int d = 0; d < x->ndim; d++)
            *(flags[d] ? &n : &nout) *= x->shape[d];
        take_result(t, 0);
        take(t, tr__cuda_reduce_scratch(nout, n));
        return TR_OK;
    }
    TR_FORWARD_IF_ERROR(tr__reduce_scratch(t->op, &t->args[0], false, arg_named(t, "dim"),
                                           t->results[0].dtype, t->threads, &partials, &tiles));
    take_result(t, 0);
    take(t, partials);
    take(t, tiles);
    return TR_OK;
}

/* tr__k_nn: the result, then one block of weight, bias and line buffers. */
static tr_status neural(struct tally *t)
{
    const struct tr_value *dim = arg_named(t, "dim"), *w = arg_named(t, "weight");
    const struct tr_value *b = arg_named(t, "bias");

    take_result(t, 0);
    if (t->results[0].device.kind == TR_DEV_CUDA)
        return TR_OK; /* the module's kernel takes no scratch */
    take(t, tr__nn_scratch(t->op, &t->args[0], false, dim ? dim->integer : -1,
                           t->results[0].dtype, w && !is_none(w), b && !is_none(b), t->threads));
    return TR_OK;
}

/* Results that are a copy (reshape of a view its strides cannot express,
 * tr_contiguous, tr_clone, tr_cast or tr_to of x): a copy
 * of bytes when one is made, else x itself. */
static void copy_result(struct tally *t, uint64_t bytes)
{
    t->result[0] = tr_memory_block_size(bytes);
    take(t, bytes);
}

/* tr__k_reshape: a view, or a view of a compact copy when the strides
 * cannot express the new shape. */
static tr_status reshape(struct tally *t)
{
    const struct tr_value *x = &t->args[0], *y = &t->results[0];
    int64_t strides[TR_MAX_DIMS], new_strides[TR_MAX_DIMS];

    if (!is_tensor(x) || numel_of(x) == 0)
        return TR_OK;
    value_strides(x, strides);
    if (!tr__view_strides(x->ndim, x->shape, strides, y->ndim, y->shape, new_strides))
        copy_result(t, bytes_of(x, x->dtype));
    return TR_OK;
}

/* The other views: new handles of their input's storage. */
static tr_status view(struct tally *t)
{
    (void)t;
    return TR_OK;
}

/* tr__k_copy: into its destination when it has one, else a copy (clone,
 * or contiguous of a strided x) or x itself. */
static tr_status copy(struct tally *t)
{
    const struct tr_value *x = &t->args[0];
    bool clone = t->op->info.id == TR_OP_CLONE;

    if (t->given && t->given[0])
        return TR_OK;
    copy_result(t, clone || (is_tensor(x) && x->strided) ? bytes_of(x, t->results[0].dtype) : 0);
    return TR_OK;
}

static tr_status cast(struct tally *t)
{
    const struct tr_value *x = &t->args[0];

    copy_result(t, cast_bytes(x, tr_value_dtype(x), t->results[0].dtype));
    return TR_OK;
}

/* tr_to: a compact copy where x lives when it is not compact, then one
 * block on the device it goes to. */
static tr_status to(struct tally *t)
{
    const struct tr_value *x = &t->args[0];
    struct tr_device from = is_tensor(x) ? x->device : TR_CPU;
    uint64_t compact = is_tensor(x) && x->strided ? bytes_of(x, x->dtype) : 0;

    if (tr_device_equal(from, t->results[0].device))
        return TR_OK;
    take(t, compact);
    copy_result(t, bytes_of(x, x->dtype));
    drop(t, compact);
    return TR_OK;
}

/* tr__k_matmul: floats (tr__operand's copies, then BLAS's, then the
 * result and the tile buffers); integers (the result, then the operands
 * as the integer loops read them, then the tile buffers). */
static tr_status matmul(struct tally *t)
{
    const struct tr_value *c = &t->results[0];
    enum tr_dtype compute = tr__compute_dtype(c->dtype);
    struct tr_value v[2];
    uint64_t copies[2] = {0, 0};
    int nb = c->ndim - (t->args[0].ndim >= 2) - (t->args[1].ndim >= 2);

    if (c->device.kind == TR_DEV_CUDA) { /* backend_cuda_kernels.c's copies, then the result */
        struct tr__cuda_mm mm;
        if (tr__cuda_mm_plan(&t->args[0], &t->args[1], c, &mm)) {
            take(t, mm.copy_bytes[0]);
            take(t, mm.copy_bytes[1]);
        }
        take_result(t, 0);
        return TR_OK;
    }
    if (tr_dtype_is_integer(c->dtype)) {
        take_result(t, 0);
        for (int i = 0; i < 2; i++) {
            enum tr_dtype lane;
            if (tr__mm_int_copies(&t->args[i], i == 0, c->dtype, &lane))
                take(t, bytes_of(&t->args[i], lane));
        }
        take(t, tr__mm_int_tile_scratch(&t->args[0], &t->args[1], c, nb, t->threads));
        return TR_OK;
    }
    for (int i = 0; i < 2; i++) {
        uint64_t first = operand_bytes(&t->args[i], c->dtype);
        v[i] = operand_value(&t->args[i], c->dtype);
        take(t, first);
        if (tr__mm_copies(&v[i], i == 0, compute)) {
            copies[i] = bytes_of(&v[i], compute);
            take(t, copies[i]);
            drop(t, first); /* prepare releases the operand for its copy */
        }
    }
    take_result(t, 0);
    take(t, tr__mm_tile_scratch(&v[0], &v[1], c, nb, t->threads));
    return TR_OK;
}

/* tr__k_sort: the results, then a line's room for each thread. */
static tr_status sort(struct tally *t)
{
    const struct tr_value *x = &t->args[0];
    bool topk = t->op->rule == TR__RULE_TOPK;
    int64_t dim = t->args[topk ? 2 : 1].integer;
    int64_t n = x->ndim ? x->shape[dim < 0 ? dim + x->ndim : dim] : 1;
    int64_t k = topk ? t->args[1].integer : n;

    if (topk && x->ndim == 0)
        k = 1; /* as the kernel: the scalar itself */
    if (t->results[0].device.kind == TR_DEV_CUDA) { /* topk: a number x goes up first */
        if (!is_tensor(x))
            take(t, tr_dtype_size(t->results[0].dtype));
        results_only(t);
        return TR_OK;
    }
    results_only(t);
    take(t, tr__sort_scratch(x, dim, k, t->threads));
    return TR_OK;
}

/* median and quantile: the result, then the values' room for each thread. */
static tr_status quantile(struct tally *t)
{
    bool median = t->op->info.id == TR_OP_MEDIAN;

    results_only(t);
    take(t, tr__quantile_scratch(&t->args[0], &t->args[median ? 1 : 2], t->threads));
    return TR_OK;
}

/* gather and index_select: the index as a compact i64 tensor, then the
 * result; on CUDA, the result and the block where the kernel reports an
 * index out of range. */
static tr_status indexed(struct tally *t)
{
    if (t->results[0].device.kind == TR_DEV_CUDA) {
        /* a number x goes up as a 0-d tensor first */
        if (!is_tensor(&t->args[0]))
            take(t, tr_dtype_size(t->results[0].dtype));
        take_result(t, 0);
        take(t, sizeof(uint64_t));
        return TR_OK;
    }
    uint64_t index = cast_bytes(&t->args[2], TR_DTYPE_I64, TR_DTYPE_I64);

    take(t, index);
    take_result(t, 0);
    drop(t, index);
    return TR_OK;
}

/* quantize and quantize_affine: the results (q, scale, and the zero
 * point), then a running statistic (two f64) for every thread. */
static tr_status quantize(struct tally *t)
{
    results_only(t);
    take(t, (uint64_t)t->threads * 2 * sizeof(double));
    return TR_OK;
}

/* dequantize: the scale as a compact f32 tensor and the zero point as a
 * compact f64 one, then the result. */
static tr_status dequantize(struct tally *t)
{
    uint64_t scale = cast_bytes(&t->args[1], TR_DTYPE_F32, TR_DTYPE_F32);
    uint64_t zero = is_none(&t->args[2]) ? 0 : cast_bytes(&t->args[2], TR_DTYPE_F64, TR_DTYPE_F64);

    take(t, scale);
    take(t, zero);
    take_result(t, 0);
    drop(t, scale);
    drop(t, zero);
    return TR_OK;
}

/* roll: the result, then, without dims, a compact copy of a strided x to
 * flatten. */
static tr_status roll(struct tally *t)
{
    const struct tr_value *x = &t->args[0];
    uint64_t compact = is_none(&t->args[2]) && numel_of(&t->results[0]) > 0
                           ? cast_bytes(x, t->results[0].dtype, t->results[0].dtype)
                           : 0;

    take_result(t, 0);
    take(t, compact);
    drop(t, compact);
    return TR_OK;
}

/* take_along_dim: the indices (broadcast to the result's shape along a
 * dim) as a compact i64 tensor, then the result. */
static tr_status take_along(struct tally *t)
{
    const struct tr_value *index = &t->args[1], *dim = &t->args[2];
    struct tr_value seen = *index;
    uint64_t bytes;

    if (!is_none(dim) && is_tensor(index)) {
        const struct tr_value *y = &t->results[0];
        int64_t strides[TR_MAX_DIMS];
        value_strides(index, strides);
        for (int i = 0; i < y->ndim; i++)
            if (index->shape[i] != y->shape[i])
                strides[i] = 0; /* tr_expand's */
        memcpy(seen.shape, y->shape, sizeof seen.shape);
        memcpy(seen.strides, strides, sizeof seen.strides);
        seen.strided = !tr__is_contiguous(y->ndim, y->shape, strides);
    }
    bytes = cast_bytes(&seen, TR_DTYPE_I64, TR_DTYPE_I64);
    take(t, bytes);
    take_result(t, 0);
    drop(t, bytes);
    return TR_OK;
}

/* one_hot: x as a compact i64 tensor, then the result. */
static tr_status one_hot(struct tally *t)
{
    uint64_t values = cast_bytes(&t->args[0], TR_DTYPE_I64, TR_DTYPE_I64);

    take(t, values);
    take_result(t, 0);
    drop(t, values);
    return TR_OK;
}

/* tr__k_einsum: its steps replayed on the descriptions (cpu/einsum.c). */
static tr_status einsum(struct tally *t)
{
    uint64_t peak, result;

    TR_FORWARD_IF_ERROR(tr__einsum_memory(t->op, t->args, &t->results[0],
                                          t->given && t->given[0], t->threads, &peak, &result));
    t->result[0] = result;
    t->live += result;
    if (peak > t->peak)
        t->peak = peak;
    return TR_OK;
}

/* cdist through the product: matmul's copies of a and of b^T (a view of b
 * with its last two dimensions swapped), the result, the squared norms,
 * the tile buffers; directly: compact copies of the compute dtype, then
 * the result. */
static tr_status cdist(struct tally *t)
{
    const struct tr_value *a = &t->args[0], *b = &t->args[1], *c = &t->results[0];
    enum tr_dtype compute = tr__compute_dtype(c->dtype);
    double p = tr__number(&t->args[2]);
    struct tr_value bt = *b;
    int64_t strides[TR_MAX_DIMS];
    int n = b->ndim;

    if (!tr__cdist_product(a, b, p)) {
        take(t, cast_bytes(a, compute, compute));
        take(t, cast_bytes(b, compute, compute));
        take_result(t, 0);
        return TR_OK;
    }
    value_strides(b, strides);
    memcpy(bt.strides, strides, sizeof bt.strides);
    bt.shape[n - 2] = b->shape[n - 1];
    bt.shape[n - 1] = b->shape[n - 2];
    bt.strides[n - 2] = strides[n - 1];
    bt.strides[n - 1] = strides[n - 2];
    bt.strided = true;
    take(t, tr__mm_copies(a, true, compute) ? bytes_of(a, compute) : 0);
    take(t, tr__mm_copies(&bt, false, compute) ? bytes_of(b, compute) : 0);
    take_result(t, 0);
    take(t, tr__cdist_norms_bytes(a, b, c, p));
    take(t, tr__mm_tile_scratch(a, &bt, c, c->ndim - 2, t->threads));
    return TR_OK;
}

/* cross_entropy: the target as a compact i64 tensor, the result, the
 * losses, log_softmax's line buffers. */
static tr_status cross_entropy(struct tally *t)
{
    uint64_t index = cast_bytes(&t->args[1], TR_DTYPE_I64, TR_DTYPE_I64), losses, lines;

    TR_FORWARD_IF_ERROR(tr__cross_entropy_scratch(t->op, &t->args[0], t->args[2].integer,
                                                  t->args[3].string, t->results[0].dtype,
                                                  t->threads, &losses, &lines));
    take(t, index);
    take_result(t, 0);
    take(t, losses);
    take(t, lines);
    return TR_OK;
}

/* Every kernel of kernels.def, its declaration, and whether it makes its
 * result in a destination (tr_op_takes_dest). */
static const struct {
    tr__kernel_fn kernel;
    tr_status (*declare)(struct tally *t);
    bool takes_dest;
} declarations[] = {
    {tr__k_unary, results_only, true},     {tr__k_binary, two_operands, true},
    {tr__k_select3, select3, true},        {tr__k_reduce, reduction, true},
    {tr__k_cumsum, results_only, true},    {tr__k_nn, neural, true},
    {tr__k_fill, results_only, true},      {tr__k_arange, results_only, true},
    {tr__k_linspace, results_only, true},  {tr__k_eye, results_only, true},
    {tr__k_random, results_only, true},    {tr__k_reshape, reshape, false},
    {tr__k_transpose, view, false},        {tr__k_permute, view, false},
    {tr__k_squeeze, view, false},          {tr__k_unsqueeze, view, false},
    {tr__k_expand, view, false},           {tr__k_diagonal, view, false},
    {tr__k_copy, copy, true},              {tr__k_cast, cast, false},
    {tr__k_to, to, false},                 {tr__k_matmul, matmul, true},
    {tr__k_outer, two_operands, true},     {tr__k_sort, sort, false},
    {tr__k_gather, indexed, false},        {tr__k_index_select, indexed, false},
    {tr__k_join, results_only, false},     {tr__k_quantize, quantize, false},
    {tr__k_dequantize, dequantize, false},
    {tr__k_flip, view, false},             {tr__k_narrow, view, false},
    {tr__k_unflatten, view, false},        {tr__k_movedim, view, false},
    {tr__k_triangle, results_only, true},
    {tr__k_quantile, quantile, true},
    {tr__k_roll, roll, false},             {tr__k_repeat, results_only, false},
    {tr__k_repeat_interleave, results_only, false},
    {tr__k_pad, results_only, false},      {tr__k_take_along_dim, take_along, false},
    {tr__k_one_hot, one_hot, false},
    {tr__k_einsum, einsum, true},
    {tr__k_cdist, cdist, true},            {tr__k_cosine_similarity, results_only, true},
    {tr__k_cross_entropy, cross_entropy, false},
};

static int declaration_of(const struct tr_op_info *info)
{
    tr__kernel_fn kernel = tr__kernel_for(info->id);

    for (size_t i = 0; kernel && i < sizeof declarations / sizeof declarations[0]; i++)
        if (declarations[i].kernel == kernel)
            return (int)i;
    return -1;
}

bool tr_op_takes_dest(const struct tr_op_info *info)
{
    int i = declaration_of(info);

    return i >= 0 && declarations[i].takes_dest;
}

tr_status tr_op_scratch(const struct tr_op_info *info, const struct tr_value *args,
                        const struct tr_value *results, const bool *given, int threads,
                        struct tr_op_memory *out)
{
    const struct tr__op *op = tr__op_of(info);
    int i = declaration_of(info);
    struct tally t;
    uint64_t held = 0;

    memset(out, 0, sizeof *out);
    TR_RETURN_ERROR_IF(threads < 1, TR_ERR_INVALID, "%s: %d threads", info->name, threads);
    TR_RETURN_ERROR_IF(i < 0, TR_ERR_STATE, "%s: this op cannot run yet (its kernel is not written)",
                       info->name);
    memset(&t, 0, sizeof t);
    t.op = op;
    t.args = args;
    t.results = results;
    t.given = declarations[i].takes_dest ? given : NULL;
    t.threads = threads;
    TR_FORWARD_IF_ERROR(declarations[i].declare(&t));
    for (int r = 0; r < info->nresults; r++) {
        out->results[r] = t.result[r];
        held += t.result[r];
    }
    pthread_once(&misdeclare_once, read_misdeclare);
    if ((int)info->id == misdeclared)
        t.peak += 512; /* the test switch: one small block too many */
    out->peak = t.peak;
    out->scratch = t.peak - held;
    return TR_OK;
}
