/*
 * cpu/matmul_int.c - matmul and dot of integers, exact as NumPy and
 * PyTorch compute them: each element is the sum of its products reduced
 * modulo 2^bits of the result's dtype (it wraps around).
 *
 * A sum of products modulo 2^b depends only on the operands modulo 2^b,
 * so a result of 32 bits or fewer is accumulated in uint32_t and a 64-bit
 * one in uint64_t (unsigned: wrapping is defined), then truncated to the
 * result's dtype.  32-bit lanes because x86 vector units multiply them
 * (SSE4.1 and AVX2 have no 64-bit multiply): measured, a 1024^3 i32
 * product takes a third of the time of the same one in i64.
 *
 * The operands are read as integers of that width: one of another dtype
 * is first converted to a compact copy (the conversion keeps every value:
 * the result's dtype holds both operands'), and so is a right operand
 * whose rows are not contiguous.  The output of each batch is cut into
 * fixed TILE_M x TILE_N tiles, each computed by one OpenMP thread over the
 * whole inner dimension, in blocks of BLOCK_K rows of the right operand
 * that stay in the cache while every row of the tile runs over them; the
 * innermost loop runs along a row of the right operand and of the tile.
 */
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "matmul_impl.h"
#include "../scratch_impl.h"

#define TILE_M 64
#define TILE_N 256
#define BLOCK_K 256
/* Below this many multiply-adds a product is not worth the threads. */
#define PARALLEL_MACS (INT64_C(1) << 18)

/*
 * acc[i * nj + j] = sum over p < k of a(i, p) * b(p, j), for i < mi and
 * j < nj, T-typed: a(i, p) at a[i * ars + p * acs], b(p, j) at
 * b[p * brs + j].  Four rows of the tile at a time share each row of b
 * read.  n == 1 (a matrix times a vector, dot) is a sum along p per row.
 */
#define TILE_FN(name, T)                                                     \
    static void name(T *restrict acc, const T *a, int64_t ars, int64_t acs, const T *b,      \
                     int64_t brs, int64_t mi, int64_t nj, int64_t k)         \
    {                                                                        \
        if (nj == 1) {                                                       \
            for (int64_t i = 0; i < mi; i++) {                               \
                const T *ar = a + i * ars;                                   \
                T sum = 0;                                                   \
                _Pragma("omp simd reduction(+ : sum)")                       \
                for (int64_t p = 0; p < k; p++)                              \
                    sum += ar[p * acs] * b[p * brs];                         \
                acc[i] = sum;                                                \
            }                                                                \
            return;                                                          \
        }                                                                    \
        memset(acc, 0, (size_t)(mi * nj) * sizeof(T));                       \
        for (int64_t p0 = 0; p0 < k; p0 += BLOCK_K) {                        \
            int64_t p1 = k - p0 < BLOCK_K ? k : p0 + BLOCK_K, i = 0;         \
            for (; i + 4 <= mi; i += 4) {                                    \
                T *restrict c0 = acc + i * nj, *restrict c1 = c0 + nj;       \
                T *restrict c2 = c1 + nj, *restrict c3 = c2 + nj;            \
                const T *ar = a + i * ars;                                   \
                for (int64_t p = p0; p < p1; p++) {                          \
                    const T *restrict br = b + p * brs;                      \
                    T x0 = ar[p * acs], x1 = ar[ars + p * acs];              \
                    T x2 = ar[2 * ars + p * acs], x3 = ar[3 * ars + p * acs]; \
                    _Pragma("omp simd")                                      \
                    for (int64_t j = 0; j < nj; j++) {                       \
                        T y = br[j];                                         \
                        c0[j] += x0 * y;                                     \
                        c1[j] += x1 * y;                                     \
                        c2[j] += x2 * y;                                     \
                        c3[j] += x3 * y;                                     \
                    }                                                        \
                }                                                            \
            }                                                                \
            for (; i < mi; i++) {                                            \
                T *restrict c0 = acc + i * nj;                               \
                const T *ar = a + i * ars;                                   \
                for (int64_t p = p0; p < p1; p++) {                          \
                    const T *restrict br = b + p * brs;                      \
                    T x0 = ar[p * acs];                                      \
                    _Pragma("omp simd")                                      \
                    for (int64_t j = 0; j < nj; j++)                         \
                        c0[j] += x0 * br[j];                                 \
                }                                                            \
            }                                                                \
        }                                                                    \
    }

TILE_FN(tile_u32, uint32_t)
TILE_FN(tile_u64, uint64_t)

/* The integer dtype of width bits operands are read as: the result's
 * signedness, so that converting an operand to it keeps its values. */
static enum tr_dtype lane_dtype(enum tr_dtype result, int width)
{
    if (tr_dtype_is_signed(result))
        return width == 32 ? TR_DTYPE_I32 : TR_DTYPE_I64;
    return width == 32 ? TR_DTYPE_U32 : TR_DTYPE_U64;
}

/* Sets up o for t (taken over): a compact copy of dtype lane unless t
 * has it, and for the right operand contiguous rows. */
static tr_status prepare(struct tr__mm_operand *o, struct tr_tensor *t, bool left,
                         enum tr_dtype lane, int nb)
{
    o->t = t;
    tr__mm_matrix_of(o, left);
    if (t->dtype != lane || (!left && o->cols > 1 && o->cs != 1)) {
        struct tr_tensor *copy = tr_cast(t, lane);
        if (!copy)
            return tr_last_status();
        tr_release(t);
        o->t = copy;
        tr__mm_matrix_of(o, left);
    }
    tr__mm_batch_of(o, nb);
    return TR_OK;
}

bool tr__mm_int_copies(const struct tr_value *v, bool left, enum tr_dtype result,
                       enum tr_dtype *lane)
{
    int64_t strides[TR_MAX_DIMS];
    struct tr__mm_operand o;

    *lane = lane_dtype(result, tr_dtype_size(result) <= 4 ? 32 : 64);
    tr__value_strides(v, strides);
    tr__mm_dims(&o, v->ndim, v->shape, strides, left);
    /* as prepare: tr_cast copies unless v is compact and of the lane */
    return (v->dtype != *lane || (!left && o.cols > 1 && o.cs != 1)) &&
           (v->dtype != *lane || v->strided);
}

uint64_t tr__mm_int_tile_scratch(const struct tr_value *a, const struct tr_value *b,
                                 const struct tr_value *c, int nb, int threads)
{
    int64_t strides[TR_MAX_DIMS], nbatch = 1, numel = 1;
    int64_t lane_size = tr_dtype_size(c->dtype) <= 4 ? 4 : 8;
    struct tr__mm_operand oa, ob;
    struct tr__mm_tiles tiles;

    tr__contiguous_strides(a->ndim, a->shape, strides);
    tr__mm_dims(&oa, a->ndim, a->shape, strides, true);
    tr__contiguous_strides(b->ndim, b->shape, strides);
    tr__mm_dims(&ob, b->ndim, b->shape, strides, false);
    for (int i = 0; i < c->ndim; i++)
        numel *= c->shape[i];
    for (int i = 0; i < nb; i++)
        nbatch *= c->shape[i];
    if (numel == 0 || oa.cols == 0)
        return 0;
    tiles = tr__mm_tiles_of(nbatch, oa.rows, ob.cols, oa.cols, TILE_M, TILE_N, PARALLEL_MACS);
    return (uint64_t)(tiles.parallel ? threads : 1) * TILE_M * TILE_N * (uint64_t)lane_size;
}

tr_status tr__cpu_matmul_int(const char *name, struct tr_tensor *ta, struct tr_tensor *tb,
                             struct tr_tensor *c, int nb)
{
    int width = tr_dtype_size(c->dtype) <= 4 ? 32 : 64;
    int64_t lane_size = width / 8, out_item = (int64_t)tr_dtype_size(c->dtype);
    enum tr_dtype lane = lane_dtype(c->dtype, width);
    struct tr__mm_operand a, b;
    struct tr_tensor *scratch = NULL;
    int64_t m, n, k, nbatch = 1;
    char *out, *buffers;
    struct tr__mm_tiles tiles;
    tr_status s;

    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    s = prepare(&a, ta, true, lane, nb);
    if (s == TR_OK)
        s = prepare(&b, tb, false, lane, nb);
    else
        tr_release(tb);
    if (s != TR_OK)
        goto done;
    m = a.rows;
    n = b.cols;
    k = a.cols;
    for (int i = 0; i < nb; i++)
        nbatch *= c->shape[i];
    if (tr_tensor_numel(c) == 0)
        goto done;
    out = tr_tensor_data_mut(c);
    if (!out) {
        s = tr_last_status();
        goto done;
    }
    if (k == 0) { /* an empty sum */
        tr__cpu_fill_zero(out, tr_tensor_nbytes(c));
        goto done;
    }
    tiles = tr__mm_tiles_of(nbatch, m, n, k, TILE_M, TILE_N, PARALLEL_MACS);
    scratch = tr__empty(name, TR_DTYPE_U8, 2,
                        (int64_t[]){tiles.threads, (int64_t)TILE_M * TILE_N * lane_size},
                        c->storage->device);
    if (!scratch) {
        s = tr_last_status();
        goto done;
    }
    buffers = scratch->storage->data + scratch->offset;

#pragma omp parallel for schedule(dynamic) num_threads(tiles.threads) if (tiles.parallel)
    for (int64_t w = 0; w < tiles.work; w++) {
        int64_t batch = w / (tiles.rows * tiles.cols), tile = w % (tiles.rows * tiles.cols);
        int64_t i0 = tile / tiles.cols * TILE_M, j0 = tile % tiles.cols * TILE_N;
        int64_t mi = m - i0 < TILE_M ? m - i0 : TILE_M, nj = n - j0 < TILE_N ? n - j0 : TILE_N;
        int64_t oa, ob;
        char *dst = out + ((batch * m + i0) * n + j0) * out_item, *acc;

#ifdef _OPENMP
        acc = buffers + (int64_t)omp_get_thread_num() * TILE_M * TILE_N * lane_size;
#else
        acc = buffers;
#endif
        tr__mm_batch_offsets(c, nb, &a, &b, batch, &oa, &ob);
        oa += i0 * a.rs;
        ob += j0; /* b's rows are contiguous */
        if (width == 32)
            tile_u32((uint32_t *)(void *)acc, (const uint32_t *)(const void *)a.data + oa, a.rs,
                     a.cs, (const uint32_t *)(const void *)b.data + ob, b.rs, mi, nj, k);
        else
            tile_u64((uint64_t *)(void *)acc, (const uint64_t *)(const void *)a.data + oa, a.rs,
                     a.cs, (const uint64_t *)(const void *)b.data + ob, b.rs, mi, nj, k);
        for (int64_t i = 0; i < mi; i++) /* truncated to the result's dtype */
            tr__cpu_cast_row(dst + i * n * out_item, out_item, c->dtype, acc + i * nj * lane_size,
                             lane_size, lane, nj);
    }
done:
    tr_release(scratch);
    tr_release(a.t);
    tr_release(b.t);
    return s;
}
