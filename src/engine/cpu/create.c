/*
 * cpu/create.c - the ops that make tensors from their arguments alone:
 * zeros, ones, full, arange, linspace, eye, and rand and randn, whose
 * numbers philox_math.h defines for the CPU and CUDA alike; and
 * zeros_like, ones_like and full_like, which take only x's description.
 *
 * Every value depends only on its own index, so the blocks the threads
 * share out give the same bits for any thread count.
 */
#include <string.h>

#include "../kernel_impl.h"
#include "../philox_math.h"

#include "../kernels.h"

/* Values per unit of parallel work, and the least worth spreading. */
#define BLOCK 4096
#define PARALLEL_VALUES 65536

/* A number argument as a value of dtype `from` in bits: i64 for integers,
 * bool for booleans, f64 for the rest. */
struct number {
    union {
        int64_t i64;
        uint8_t b;
        double f64;
    } bits;
    enum tr_dtype from;
};

static struct number number_of(const struct tr_value *v)
{
    struct number n;

    memset(&n, 0, sizeof n);
    if (v->kind == TR_VALUE_INT) {
        n.bits.i64 = v->integer;
        n.from = TR_DTYPE_I64;
    } else if (v->kind == TR_VALUE_BOOL) {
        n.bits.b = v->boolean;
        n.from = TR_DTYPE_BOOL;
    } else {
        n.bits.f64 = v->number;
        n.from = TR_DTYPE_F64;
    }
    return n;
}

/* The compact result out describes, on its device (in dest when there is
 * one); errors name the op. */
static struct tr_tensor *new_result(const struct tr__op *op, const struct tr_value *out,
                                    const struct tr_dest *dest)
{
    return tr__new_result(op->info.name, out, out->device, dest);
}

static tr_status finish(struct tr_tensor *t, tr_status s, struct tr_tensor **results)
{
    if (s != TR_OK) {
        tr_release(t);
        return s;
    }
    results[0] = t;
    return TR_OK;
}

/* Sets every element of the compact tensor t to the item at value. */
static void fill(struct tr_tensor *t, const void *value)
{
    size_t size = tr_dtype_size(t->dtype);
    int64_t n = tr_tensor_numel(t), blocks = (n + BLOCK - 1) / BLOCK;
    char *data = t->storage->data + t->offset;
    bool zero = true;

    if (n == 0)
        return;
    for (size_t k = 0; k < size; k++)
        zero = zero && ((const unsigned char *)value)[k] == 0;
    if (zero) {
        tr__cpu_fill_zero(data, (uint64_t)n * size);
        return;
    }
#pragma omp parallel for num_threads(tr_num_threads()) schedule(static) if (n > PARALLEL_VALUES)
    for (int64_t b = 0; b < blocks; b++) {
        int64_t end = (b + 1) * BLOCK < n ? (b + 1) * BLOCK : n;
        for (int64_t i = b * BLOCK; i < end; i++)
            memcpy(data + i * (int64_t)size, value, size);
    }
}

/* zeros(shape, dtype), ones(shape, dtype), full(shape, value, dtype), and
 * zeros_like(x, dtype), ones_like(x, dtype), full_like(x, value, dtype),
 * whose x gives only the shape (out has it) and never its values. */
tr_status tr__k_fill(const struct tr__op *op, const struct tr_arg *args,
                     const struct tr_value *out, const struct tr_dest *dest,
                     struct tr_tensor **results)
{
    struct tr_tensor *t = new_result(op, out, dest);
    struct tr_value one = {.kind = TR_VALUE_INT, .integer = 1};
    struct number n;
    char item[8];

    if (!t)
        return tr_last_status();
    if (op->info.id == TR_OP_ZEROS || op->info.id == TR_OP_ZEROS_LIKE) {
        memset(item, 0, sizeof item);
    } else {
        bool ones = op->info.id == TR_OP_ONES || op->info.id == TR_OP_ONES_LIKE;
        n = number_of(ones ? &one : &args[1].value);
        /* the conversion rules of tr_copy_into: full(s, 2.7, i32) holds 2 */
        tr__cpu_cast_row(item, 0, t->dtype, (const char *)&n.bits, 0, n.from, 1);
    }
    fill(t, item);
    return finish(t, TR_OK, results);
}

/* arange(start, stop=None, step=1, dtype): start + i * step, computed in
 * i64 when start, stop and step are all integers, else in f64, then
 * converted to the result's dtype. */
tr_status tr__k_arange(const struct tr__op *op, const struct tr_arg *args,
                       const struct tr_value *out, const struct tr_dest *dest,
                       struct tr_tensor **results)
{
    const struct tr_value *a = &args[0].value, *b = &args[1].value, *c = &args[2].value;
    bool integers = a->kind == TR_VALUE_INT && c->kind == TR_VALUE_INT &&
                    (b->kind == TR_VALUE_INT || b->kind == TR_VALUE_NONE);
    struct tr_tensor *t = new_result(op, out, dest);
    int64_t n, blocks, size;
    char *data;

    if (!t)
        return tr_last_status();
    n = out->shape[0];
    blocks = (n + BLOCK - 1) / BLOCK;
    size = (int64_t)tr_dtype_size(t->dtype);
    data = t->storage->data + t->offset;
#pragma omp parallel for num_threads(tr_num_threads()) schedule(static) if (n > PARALLEL_VALUES)
    for (int64_t blk = 0; blk < blocks; blk++) {
        int64_t first = blk * BLOCK, count = n - first < BLOCK ? n - first : BLOCK;
        union {
            int64_t i64[BLOCK];
            double f64[BLOCK];
        } buf;
        /* arange(n) counts from 0 to n - 1: the one argument is the stop */
        bool one_arg = b->kind == TR_VALUE_NONE;

        if (integers) {
            uint64_t start = one_arg ? 0 : (uint64_t)a->integer, step = (uint64_t)c->integer;
            for (int64_t i = 0; i < count; i++) /* unsigned: wraps, never undefined */
                buf.i64[i] = (int64_t)(start + (uint64_t)(first + i) * step);
        } else {
            double start = one_arg ? 0.0 : tr__number(a), step = tr__number(c);
            for (int64_t i = 0; i < count; i++)
                buf.f64[i] = start + (double)(first + i) * step;
        }
        tr__cpu_cast_row(data + first * size, size, t->dtype, (const char *)&buf, 8,
                         integers ? TR_DTYPE_I64 : TR_DTYPE_F64, count);
    }
    return finish(t, TR_OK, results);
}

/* linspace(start, stop, steps, dtype): computed in f64 from both ends, as
 * PyTorch does, so that the first value is start and the last stop
 * exactly. */
tr_status tr__k_linspace(const struct tr__op *op, const struct tr_arg *args,
                         const struct tr_value *out, const struct tr_dest *dest,
                         struct tr_tensor **results)
{
    double start = tr__number(&args[0].value), stop = tr__number(&args[1].value), step;
    struct tr_tensor *t = new_result(op, out, dest);
    int64_t n, half, blocks, size;
    char *data;

    if (!t)
        return tr_last_status();
    n = out->shape[0];
    half = n / 2;
    step = n > 1 ? (stop - start) / (double)(n - 1) : 0.0;
    blocks = (n + BLOCK - 1) / BLOCK;
    size = (int64_t)tr_dtype_size(t->dtype);
    data = t->storage->data + t->offset;
#pragma omp parallel for num_threads(tr_num_threads()) schedule(static) if (n > PARALLEL_VALUES)
    for (int64_t blk = 0; blk < blocks; blk++) {
        int64_t first = blk * BLOCK, count = n - first < BLOCK ? n - first : BLOCK;
        double buf[BLOCK];

        for (int64_t k = 0; k < count; k++) {
            int64_t i = first + k;
            /* from the nearer end; one step is start alone */
            buf[k] = i < half || n == 1 ? start + step * (double)i
                                        : stop - step * (double)(n - 1 - i);
        }
        tr__cpu_cast_row(data + first * size, size, t->dtype, (const char *)buf, 8,
                         TR_DTYPE_F64, count);
    }
    return finish(t, TR_OK, results);
}

/* eye(n, m=None, dtype): ones on the main diagonal, zeros elsewhere. */
tr_status tr__k_eye(const struct tr__op *op, const struct tr_arg *args,
                    const struct tr_value *out, const struct tr_dest *dest,
                    struct tr_tensor **results)
{
    struct tr_tensor *t = new_result(op, out, dest);
    int64_t rows, cols, diag, size, one = 1;
    char item[8], *data;

    (void)args;
    if (!t)
        return tr_last_status();
    rows = out->shape[0];
    cols = out->shape[1];
    diag = rows < cols ? rows : cols;
    size = (int64_t)tr_dtype_size(t->dtype);
    if (rows * cols == 0)
        return finish(t, TR_OK, results);
    data = t->storage->data + t->offset;
    tr__cpu_fill_zero(data, (uint64_t)(rows * cols * size));
    tr__cpu_cast_row(item, 0, t->dtype, (const char *)&one, 0, TR_DTYPE_I64, 1);
    for (int64_t i = 0; i < diag; i++)
        memcpy(data + (i * cols + i) * size, item, (size_t)size);
    return finish(t, TR_OK, results);
}

/* rand(shape, seed=0, dtype) and randn: element i from Philox-4x32-10
 * with counter i, as philox_math.h defines. */
tr_status tr__k_random(const struct tr__op *op, const struct tr_arg *args,
                       const struct tr_value *out, const struct tr_dest *dest,
                       struct tr_tensor **results)
{
    bool normal = op->info.id == TR_OP_RANDN;
    /* a negative seed stands for its two's complement bits */
    uint64_t seed = (uint64_t)args[1].value.integer;
    enum tr_dtype dtype = out->dtype;
    struct tr_tensor *t;
    int64_t n, blocks;
    char *data;

    TR_RETURN_ERROR_IF(!tr_dtype_is_float(dtype), TR_ERR_DTYPE,
                       "%s: makes floats, not %s", op->info.name, tr_dtype_name(dtype));
    t = new_result(op, out, dest);
    if (!t)
        return tr_last_status();
    n = tr_tensor_numel(t);
    blocks = (n + BLOCK - 1) / BLOCK;
    data = t->storage->data + t->offset;
#pragma omp parallel for num_threads(tr_num_threads()) schedule(static) \
    if (n > PARALLEL_VALUES / 16)
    for (int64_t blk = 0; blk < blocks; blk++) {
        int64_t first = blk * BLOCK, end = n - first < BLOCK ? n : first + BLOCK;

        for (int64_t i = first; i < end; i++)
            tr__random_store(data + i * (int64_t)tr_dtype_size(dtype), dtype, normal, seed,
                             (uint64_t)i);
    }
    return finish(t, TR_OK, results);
}
