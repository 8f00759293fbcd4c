/*
 * cpu/triangle.c - tril and triu: a compact copy of x in which the
 * elements of each matrix (the last two dimensions) on the wrong side of
 * a diagonal are zero.
 *
 * Each row of each matrix is one unit of work: the part kept is copied
 * as it is (bit for bit, any dtype), the rest set to zero bytes, so the
 * result does not depend on how the threads share the rows.
 */
#include <string.h>

#include "../kernel_impl.h"

#include "../kernels.h"

/* Bytes below which the copy stays on the calling thread. */
#define PARALLEL_BYTES (UINT64_C(1) << 20)

/* Copies n items of size bytes from src, stepping step bytes, to dst. */
static void copy_items(char *dst, const char *src, int64_t step, int64_t n, size_t size)
{
    if (step == (int64_t)size) {
        memcpy(dst, src, (size_t)n * size);
        return;
    }
    switch (size) {
    case 1:
        for (int64_t j = 0; j < n; j++)
            dst[j] = src[j * step];
        break;
    case 2:
        for (int64_t j = 0; j < n; j++)
            memcpy(dst + j * 2, src + j * step, 2);
        break;
    case 4:
        for (int64_t j = 0; j < n; j++)
            memcpy(dst + j * 4, src + j * step, 4);
        break;
    default:
        for (int64_t j = 0; j < n; j++)
            memcpy(dst + j * (int64_t)size, src + j * step, size);
        break;
    }
}

/* tril(x, diagonal=0) keeps the elements [i, j] with j - i <= diagonal,
 * triu(x, diagonal=0) those with j - i >= diagonal. */
tr_status tr__k_triangle(const struct tr__op *op, const struct tr_arg *args,
                         const struct tr_value *out, const struct tr_dest *dest,
                         struct tr_tensor **results)
{
    bool lower = op->info.id == TR_OP_TRIL;
    struct tr_tensor *x = tr__arg_tensor(&args[0], out->dtype), *t;
    int64_t strides[TR_MAX_DIMS], rows, cols, total, k = args[1].value.integer;
    size_t size = tr_dtype_size(out->dtype);
    int nd = out->ndim;
    const char *src;
    char *data;

    if (!x)
        return tr_last_status();
    t = tr__new_result(op->info.name, out, out->device, dest);
    if (!t) {
        tr_release(x);
        return tr_last_status();
    }
    rows = out->shape[nd - 2];
    cols = out->shape[nd - 1];
    total = tr_tensor_numel(t);
    if (total == 0) {
        tr_release(x);
        results[0] = t;
        return TR_OK;
    }
    /* past these bounds every diagonal gives the same triangle, and i + k
     * below cannot overflow */
    if (k > cols)
        k = cols;
    if (k < -rows - 1)
        k = -rows - 1;
    tr__byte_strides(x, strides);
    src = x->storage->data + x->offset;
    data = t->storage->data + t->offset;
    total /= cols; /* rows of all the matrices */
#pragma omp parallel for num_threads(tr_num_threads()) schedule(static) \
    if ((uint64_t)total * (uint64_t)cols * size > PARALLEL_BYTES)
    for (int64_t r = 0; r < total; r++) {
        int64_t i = r % rows, rest = r / rows, from = i * strides[nd - 2], lo, hi;
        char *row = data + r * cols * (int64_t)size;

        for (int d = nd - 3; d >= 0; d--) {
            from += (rest % out->shape[d]) * strides[d];
            rest /= out->shape[d];
        }
        /* the columns kept: [lo, hi) */
        lo = lower ? 0 : i + k;
        hi = lower ? i + k + 1 : cols;
        lo = lo < 0 ? 0 : lo > cols ? cols : lo;
        hi = hi < lo ? lo : hi > cols ? cols : hi;
        memset(row, 0, (size_t)lo * size);
        copy_items(row + lo * (int64_t)size, src + from + lo * strides[nd - 1], strides[nd - 1],
                   hi - lo, size);
        memset(row + hi * (int64_t)size, 0, (size_t)(cols - hi) * size);
    }
    tr_release(x);
    results[0] = t;
    return TR_OK;
}
