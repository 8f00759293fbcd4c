/*
 * cpu/matmul.c - matmul (1-d, 2-d and batched, the batch dimensions
 * broadcast as NumPy does), dot and outer.
 *
 * Integer products are exact and computed by cpu/matmul_int.c; float ones
 * go through CBLAS sgemm/dgemm.  An operand goes to BLAS where it lies,
 * without a copy, when the strides of its last two dimensions are a
 * layout BLAS reads: row-major (unit column stride, a leading dimension
 * at least the row length) or transposed (unit row stride, a leading
 * dimension at least the column length); batch dimensions may have any
 * strides, 0 included.  Otherwise, and for f16 and bf16 (computed in
 * f32), an integer operand or an f32 operand of an f64 product, the
 * operand is first converted to a compact copy of the compute dtype.
 *
 * Reproducibility: OpenBLAS's own threads split the work differently for
 * different thread counts, and the bits change with it.  So BLAS is kept
 * single-threaded (openblas_set_num_threads(1), once) and the output of
 * each batch is cut into fixed TILE_M x TILE_N tiles, whatever the thread
 * count, each computed by one gemm call over the whole inner dimension on
 * one OpenMP thread: every element is computed the same way for any
 * --threads.
 */
#include <cblas.h>
#include <limits.h>
#include <pthread.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "matmul_impl.h"
#include "../scratch_impl.h"

#include "../kernels.h"

/* An output tile: TILE_M rows by TILE_N columns.  Fixed: it decides which
 * gemm call computes each element, and so the bits.  Columns are the
 * OpenBLAS kernel's inner dimension (row-major is its column-major
 * transposed): measured with OpenBLAS 0.3.21 on Zen, calls 320 columns
 * wide or narrower run at a third of the speed of wider ones (until a
 * wider call has run on the same thread), hence 512. */
#define TILE_M 256
#define TILE_N 512
/* The most bytes of a thread's band when a result is handed to its file
 * a band at a time (tr__mm_streams): TILE_M rows of 1024 f32 values. */
#define BAND_BYTES (1024 * 1024)
/* Below this many multiply-adds a product is not worth the threads. */
#define PARALLEL_FLOPS (INT64_C(1) << 18)

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

static void blas_single_threaded(void)
{
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
    openblas_set_num_threads(1);
#endif
}

/*
 * OpenBLAS's pthreads build starts its worker threads when it is loaded,
 * and they spin on sched_yield for about 2^28 cycles (a tenth of a second)
 * before they sleep: a third runnable thread on two cores, taking CPU from
 * whatever runs first (measured: a fifth of the CPU of a 0.3 s softmax).
 * BLAS runs single-threaded here, so they are shut down as soon as the
 * program starts, when the library has that (weak: absent elsewhere).
 * Once only: openblas_set_num_threads starts the pool again when it finds
 * it shut down (its way back after a fork), so a second call, at the first
 * product, would bring back a spinning thread for the length of a short
 * run (a cdist of 100 ms ran a third slower for it).
 */
extern void blas_thread_shutdown_(void) __attribute__((weak));

static void stop_blas_threads(void)
{
    blas_single_threaded();
    if (blas_thread_shutdown_)
        blas_thread_shutdown_();
}

__attribute__((constructor)) static void stop_blas_threads_at_load(void)
{
    pthread_once(&blas_once, stop_blas_threads);
}

/*
 * Whether BLAS can read a rows x cols matrix with strides rs and cs where
 * it lies, and how: row-major, (i, j) at i * ld + j, or transposed,
 * (i, j) at i + j * ld.  The stride of a dimension of size 1 is never
 * stepped, so it does not matter.  Zero, negative and overlapping strides
 * do not qualify.
 */
static bool blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, bool *trans,
                        int *ld)
{
    int64_t row_len = cols > 1 ? cols : 1, col_len = rows > 1 ? rows : 1, l;

    if (cs == 1 || cols == 1) {
        l = rows == 1 ? row_len : rs;
        if (l >= row_len && l <= INT_MAX) {
            *trans = false;
            *ld = (int)l;
            return true;
        }
    }
    if (rs == 1 || rows == 1) {
        l = cols == 1 ? col_len : cs;
        if (l >= col_len && l <= INT_MAX) {
            *trans = true;
            *ld = (int)l;
            return true;
        }
    }
    return false;
}

tr_status tr__mm_prepare(const char *name, struct tr__mm_operand *o, struct tr_tensor *t,
                         bool left, enum tr_dtype compute, int nb)
{
    o->t = t;
    tr__mm_matrix_of(o, left);
    if (t->dtype != compute || !blas_layout(o->rows, o->cols, o->rs, o->cs, &o->trans, &o->ld)) {
        struct tr_tensor *copy = tr_cast(t, compute);
        if (!copy)
            return tr_last_status();
        tr_release(t);
        o->t = t = copy;
        tr__mm_matrix_of(o, left);
        /* a compact matrix has a row-major layout unless its rows are
         * longer than BLAS's int counts */
        TR_RETURN_ERROR_IF(!blas_layout(o->rows, o->cols, o->rs, o->cs, &o->trans, &o->ld),
                           TR_ERR_SHAPE, "%s: a %lld x %lld matrix is too large for BLAS",
                           name, (long long)o->rows, (long long)o->cols);
    }
    tr__mm_batch_of(o, nb);
    return TR_OK;
}

bool tr__mm_copies(const struct tr_value *v, bool left, enum tr_dtype compute)
{
    int64_t strides[TR_MAX_DIMS];
    struct tr__mm_operand o;

    tr__value_strides(v, strides);
    tr__mm_dims(&o, v->ndim, v->shape, strides, left);
    return v->dtype != compute || !blas_layout(o.rows, o.cols, o.rs, o.cs, &o.trans, &o.ld);
}

uint64_t tr__mm_tile_scratch(const struct tr_value *a, const struct tr_value *b,
                             const struct tr_value *c, int nb, int threads)
{
    enum tr_dtype compute = tr__compute_dtype(c->dtype);
    int64_t strides[TR_MAX_DIMS], nbatch = 1, numel = 1;
    struct tr__mm_operand oa, ob;
    struct tr__mm_tiles tiles;

    /* as multiply: tile buffers only when gemm cannot write into c */
    tr__contiguous_strides(a->ndim, a->shape, strides);
    tr__mm_dims(&oa, a->ndim, a->shape, strides, true);
    tr__contiguous_strides(b->ndim, b->shape, strides);
    tr__mm_dims(&ob, b->ndim, b->shape, strides, false);
    for (int i = 0; i < c->ndim; i++)
        numel *= c->shape[i];
    for (int i = 0; i < nb; i++)
        nbatch *= c->shape[i];
    if (numel == 0 || oa.cols == 0 || oa.cols > INT_MAX ||
        (c->dtype == compute && ob.cols <= INT_MAX))
        return 0;
    tiles = tr__mm_tiles_of(nbatch, oa.rows, ob.cols, oa.cols, TILE_M, TILE_N, PARALLEL_FLOPS);
    return (uint64_t)(tiles.parallel ? threads : 1) * TILE_M * TILE_N * tr_dtype_size(compute);
}

static void gemm(enum tr_dtype compute, const struct tr__mm_operand *a,
                 const struct tr__mm_operand *b, int m, int n, int k, const char *pa,
                 const char *pb, char *pc, int ldc)
{
    enum CBLAS_TRANSPOSE ta = a->trans ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE tb = b->trans ? CblasTrans : CblasNoTrans;

    if (compute == TR_DTYPE_F32)
        cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, (const float *)(const void *)pa, a->ld,
                    (const float *)(const void *)pb, b->ld, 0.0f, (float *)(void *)pc, ldc);
    else
        cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, (const double *)(const void *)pa, a->ld,
                    (const double *)(const void *)pb, b->ld, 0.0, (double *)(void *)pc, ldc);
}

/* A float product being computed: what every tile of it reads. */
struct product {
    const struct tr__mm_operand *a, *b;
    const struct tr_tensor *c;
    int nb;
    enum tr_dtype compute;
    int64_t m, n, k, item, out_item;
    bool direct; /* gemm writes the result's values where they go */
    tr__mm_epilogue epilogue;
    void *ctx;
};

/* Tile (batch, i0, j0) of the product into dst, of the result's dtype,
 * ldd values from one row to the next: gemm writes there when direct,
 * else into buf (TILE_M x TILE_N of the compute dtype), rounded into dst
 * row by row. */
static void product_tile(const struct product *p, int64_t batch, int64_t i0, int64_t j0,
                         char *dst, int64_t ldd, char *buf)
{
    const struct tr__mm_operand *a = p->a, *b = p->b;
    int64_t mi = p->m - i0 < TILE_M ? p->m - i0 : TILE_M;
    int64_t nj = p->n - j0 < TILE_N ? p->n - j0 : TILE_N, oa, ob;

    tr__mm_batch_offsets(p->c, p->nb, a, b, batch, &oa, &ob);
    oa += i0 * a->rs;
    ob += j0 * b->cs;
    if (p->direct) {
        gemm(p->compute, a, b, (int)mi, (int)nj, (int)p->k, a->data + oa * p->item,
             b->data + ob * p->item, dst, (int)ldd);
        if (p->epilogue)
            p->epilogue(p->ctx, batch, i0, j0, mi, nj, dst, ldd);
        return;
    }
    gemm(p->compute, a, b, (int)mi, (int)nj, (int)p->k, a->data + oa * p->item,
         b->data + ob * p->item, buf, (int)nj);
    if (p->epilogue)
        p->epilogue(p->ctx, batch, i0, j0, mi, nj, buf, nj);
    for (int64_t i = 0; i < mi; i++) /* rounded once into f16 or bf16 */
        tr__cpu_cast_row(dst + i * ldd * p->out_item, p->out_item, p->c->dtype,
                         buf + i * nj * p->item, p->item, p->compute, nj);
}

/* The calling thread's tile buffer (NULL when gemm writes direct). */
static char *tile_buffer(const struct product *p, char *buffers)
{
    return buffers ? buffers + (int64_t)tr__team_index() * TILE_M * TILE_N * p->item : NULL;
}

/* The product into c's memory, a tile at a time. */
static void multiply_into(const struct product *p, const struct tr__mm_tiles *tiles,
                          char *out, char *buffers)
{
#pragma omp parallel for schedule(dynamic) num_threads(tiles->threads) if (tiles->parallel)
    for (int64_t w = 0; w < tiles->work; w++) {
        int64_t batch = w / (tiles->rows * tiles->cols), tile = w % (tiles->rows * tiles->cols);
        int64_t i0 = tile / tiles->cols * TILE_M, j0 = tile % tiles->cols * TILE_N;

        product_tile(p, batch, i0, j0, out + ((batch * p->m + i0) * p->n + j0) * p->out_item,
                     p->n, tile_buffer(p, buffers));
    }
}

/* The bytes of a band: TILE_M rows of the result (all of them when
 * fewer), whole, as they lie in it. */
static int64_t band_bytes(int64_t m, int64_t n, int64_t out_item)
{
    return (m < TILE_M ? m : TILE_M) * n * out_item;
}

/* The product handed to store a band at a time: each thread computes a
 * band's tiles into its stage, which hands the band over in one call
 * before it takes the next.  The tiles are those of multiply_into, so
 * the bits are too. */
static tr_status multiply_streamed(const char *name, const struct product *p,
                                   const struct tr__mm_tiles *tiles, int64_t nbatch,
                                   char *buffers, const struct tr__store *store)
{
    int64_t bands = nbatch * tiles->rows, cap = band_bytes(p->m, p->n, p->out_item);
    atomic_int store_error = 0;
    bool failed = false;

#pragma omp parallel num_threads(tiles->threads) if (tiles->parallel)
    {
        struct tr__stage stage;
        char *buf = tile_buffer(p, buffers);

        tr__stage_init(&stage, store, (uint64_t)cap);
        if (!stage.buf) {
#pragma omp atomic write
            failed = true;
        }
#pragma omp for schedule(dynamic)
        for (int64_t w = 0; w < bands; w++) {
            int64_t batch = w / tiles->rows, i0 = w % tiles->rows * TILE_M;
            int64_t mi = p->m - i0 < TILE_M ? p->m - i0 : TILE_M;
            char *band;

            if (!stage.buf || stage.err)
                continue;
            band = tr__stage_place(&stage, (uint64_t)((batch * p->m + i0) * p->n * p->out_item),
                                   (uint64_t)(mi * p->n * p->out_item));
            if (p->k == 0) /* an empty sum */
                tr__cpu_fill_zero(band, (uint64_t)(mi * p->n * p->out_item));
            for (int64_t j0 = 0; j0 < p->n && p->k > 0; j0 += TILE_N)
                product_tile(p, batch, i0, j0, band + j0 * p->out_item, p->n, buf);
        }
        tr__stage_finish(&stage, &store_error); /* nothing when it has no buffer */
    }
    if (failed)
        return tr__set_error(TR_ERR_OOM, "%s: out of memory for a thread's band of the result",
                             name);
    if (atomic_load(&store_error))
        return tr__store_failed(store, atomic_load(&store_error));
    return TR_OK;
}

bool tr__mm_streams(const struct tr__mm_operand *a, const struct tr__mm_operand *b,
                    const struct tr_value *c, int nb)
{
    int64_t nbatch = 1, numel = 1, out_item = (int64_t)tr_dtype_size(c->dtype);
    struct tr__mm_tiles tiles;

    for (int i = 0; i < c->ndim; i++)
        numel *= c->shape[i];
    for (int i = 0; i < nb; i++)
        nbatch *= c->shape[i];
    if (numel == 0 || a->cols > INT_MAX || b->cols > INT_MAX ||
        band_bytes(a->rows, b->cols, out_item) > BAND_BYTES)
        return false;
    tiles = tr__mm_tiles_of(nbatch, a->rows, b->cols, a->cols, TILE_M, TILE_N, PARALLEL_FLOPS);
    /* fewer bands than threads would leave threads idle that tiles keep
     * busy */
    return !tiles.parallel || nbatch * tiles.rows >= tiles.threads;
}

struct tr_tensor *tr__mm_result(const char *name, const struct tr_value *out,
                                const struct tr_dest *dest, const struct tr__mm_operand *a,
                                const struct tr__mm_operand *b, int nb, struct tr__store *store)
{
    if (tr__mm_streams(a, b, out, nb))
        return tr__stream_result(name, out, out->device, dest, store);
    memset(store, 0, sizeof *store);
    return tr__new_result(name, out, out->device, dest);
}

tr_status tr__mm_multiply(const char *name, const struct tr__mm_operand *a,
                          const struct tr__mm_operand *b, struct tr_tensor *c, int nb,
                          enum tr_dtype compute, tr__mm_epilogue epilogue, void *ctx,
                          const struct tr__store *store)
{
    struct product p = {.a = a, .b = b, .c = c, .nb = nb, .compute = compute, .m = a->rows,
                        .n = b->cols, .k = a->cols, .epilogue = epilogue, .ctx = ctx};
    bool streamed = store && store->fn;
    int64_t nbatch = 1;
    struct tr_tensor *scratch = NULL;
    char *out = NULL, *buffers = NULL;
    struct tr__mm_tiles tiles;
    tr_status s = TR_OK;

    p.item = (int64_t)tr_dtype_size(compute);
    p.out_item = (int64_t)tr_dtype_size(c->dtype);
    /* gemm writes straight into the result (or its band) when it has the
     * compute dtype and a row length BLAS can count; else into a tile
     * buffer, then converted */
    p.direct = c->dtype == compute && p.n <= INT_MAX;
    for (int i = 0; i < nb; i++)
        nbatch *= c->shape[i];
    if (tr_tensor_numel(c) == 0)
        return TR_OK;
    if (!streamed) {
        out = tr_tensor_data_mut(c);
        if (!out)
            return tr_last_status();
    }
    if (p.k == 0 && !streamed) { /* an empty sum */
        tr__cpu_fill_zero(out, tr_tensor_nbytes(c));
        return TR_OK;
    }
    TR_RETURN_ERROR_IF(p.k > INT_MAX, TR_ERR_SHAPE,
                       "%s: the inner dimension %lld is longer than BLAS can count", name,
                       (long long)p.k);
    tiles = tr__mm_tiles_of(nbatch, p.m, p.n, p.k, TILE_M, TILE_N, PARALLEL_FLOPS);
    if (!p.direct) {
        int64_t shape[2] = {tiles.threads, (int64_t)TILE_M * TILE_N};
        scratch = tr__empty(name, compute, 2, shape, c->storage->device);
        if (!scratch)
            return tr_last_status();
        buffers = scratch->storage->data + scratch->offset;
    }
    pthread_once(&blas_once, stop_blas_threads);
    if (streamed)
        s = multiply_streamed(name, &p, &tiles, nbatch, buffers, store);
    else
        multiply_into(&p, &tiles, out, buffers);
    tr_release(scratch);
    return s;
}

/* matmul(a, b), and dot(a, b), which is matmul of two vectors. */
tr_status tr__k_matmul(const struct tr__op *op, const struct tr_arg *args,
                       const struct tr_value *out, const struct tr_dest *dest,
                       struct tr_tensor **results)
{
    const char *name = op->info.name;
    enum tr_dtype compute = tr__compute_dtype(out->dtype);
    bool integer = tr_dtype_is_integer(out->dtype);
    struct tr__mm_operand a, b;
    struct tr_tensor *ta, *tb, *c = NULL;
    struct tr__store store;
    int nb;
    tr_status s;

    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    TR_RETURN_ERROR_IF(!integer && compute != TR_DTYPE_F32 && compute != TR_DTYPE_F64,
                       TR_ERR_DTYPE, "%s: does not take %s", name, tr_dtype_name(out->dtype));
    /* an integer operand of an f16 or bf16 product is rounded to it
     * first, as the binary ops do */
    ta = integer ? tr__arg_tensor(&args[0], out->dtype)
                 : tr__operand(&args[0], out->dtype, compute);
    tb = !ta       ? NULL
         : integer ? tr__arg_tensor(&args[1], out->dtype)
                   : tr__operand(&args[1], out->dtype, compute);
    if (!tb) {
        tr_release(ta);
        return tr_last_status();
    }
    nb = out->ndim - (ta->ndim >= 2) - (tb->ndim >= 2);
    if (integer) {
        c = tr__new_result(name, out, out->device, dest);
        s = c ? tr__cpu_matmul_int(name, ta, tb, c, nb) : tr_last_status();
        if (!c) {
            tr_release(ta);
            tr_release(tb);
        }
        if (s != TR_OK) {
            tr_release(c);
            return s;
        }
        results[0] = c;
        return TR_OK;
    }
    s = tr__mm_prepare(name, &a, ta, true, compute, nb);
    if (s == TR_OK)
        s = tr__mm_prepare(name, &b, tb, false, compute, nb);
    else
        tr_release(tb);
    if (s == TR_OK) {
        c = tr__mm_result(name, out, dest, &a, &b, nb, &store);
        s = c ? tr__mm_multiply(name, &a, &b, c, nb, compute, NULL, NULL, &store)
              : tr_last_status();
    }
    tr_release(a.t);
    tr_release(b.t);
    if (s != TR_OK) {
        tr_release(c);
        return s;
    }
    results[0] = c;
    return TR_OK;
}

static void mul_f32(char *out, const char *const *in, int64_t n, const void *ctx)
{
    const float *x = (const float *)(const void *)in[0], *y = (const float *)(const void *)in[1];
    float *z = (float *)(void *)out;

    (void)ctx;
    for (int64_t i = 0; i < n; i++)
        z[i] = x[i] * y[i];
}

static void mul_f64(char *out, const char *const *in, int64_t n, const void *ctx)
{
    const double *x = (const double *)(const void *)in[0];
    const double *y = (const double *)(const void *)in[1];
    double *z = (double *)(void *)out;

    (void)ctx;
    for (int64_t i = 0; i < n; i++)
        z[i] = x[i] * y[i];
}

/* integer products wrap (in uint64_t, where wrapping is defined); the
 * result's dtype truncates them */
static void mul_i64(char *out, const char *const *in, int64_t n, const void *ctx)
{
    const int64_t *x = (const int64_t *)(const void *)in[0];
    const int64_t *y = (const int64_t *)(const void *)in[1];
    int64_t *z = (int64_t *)(void *)out;

    (void)ctx;
    for (int64_t i = 0; i < n; i++)
        z[i] = (int64_t)((uint64_t)x[i] * (uint64_t)y[i]);
}

static void mul_u64(char *out, const char *const *in, int64_t n, const void *ctx)
{
    const uint64_t *x = (const uint64_t *)(const void *)in[0];
    const uint64_t *y = (const uint64_t *)(const void *)in[1];
    uint64_t *z = (uint64_t *)(void *)out;

    (void)ctx;
    for (int64_t i = 0; i < n; i++)
        z[i] = x[i] * y[i];
}

/* outer(a, b): a[i] * b[j], each product rounded once (integers wrap;
 * bool is logical and, as PyTorch's outer gives); a as a column and b as
 * a row, broadcast against each other without copies. */
tr_status tr__k_outer(const struct tr__op *op, const struct tr_arg *args,
                      const struct tr_value *out, const struct tr_dest *dest,
                      struct tr_tensor **results)
{
    enum tr_dtype compute = tr__compute_dtype(out->dtype);
    struct tr_tensor *a, *b, *col = NULL, *row = NULL, *c = NULL;
    tr__block_fn fn = tr__mm_mul_fn(compute);
    tr_status s = TR_OK;

    a = tr__operand(&args[0], out->dtype, compute);
    b = a ? tr__operand(&args[1], out->dtype, compute) : NULL;
    if (b) {
        col = tr_as_strided(a, a->dtype, 2, (int64_t[]){a->shape[0], 1},
                            (int64_t[]){a->strides[0], 1}, 0);
        row = col ? tr_as_strided(b, b->dtype, 2, (int64_t[]){1, b->shape[0]},
                                  (int64_t[]){1, b->strides[0]}, 0)
                  : NULL;
    }
    if (row)
        c = tr__new_result(op->info.name, out, out->device, dest);
    if (!c)
        s = tr_last_status();
    else
        s = tr__map(c, compute, (const struct tr_tensor *const[]){col, row}, 2, compute, fn,
                    NULL);
    tr_release(row);
    tr_release(col);
    tr_release(b);
    tr_release(a);
    if (s != TR_OK) {
        tr_release(c);
        return s;
    }
    results[0] = c;
    return TR_OK;
}

tr__block_fn tr__mm_mul_fn(enum tr_dtype compute)
{
    return compute == TR_DTYPE_F32   ? mul_f32
           : compute == TR_DTYPE_F64 ? mul_f64
           : compute == TR_DTYPE_U64 ? mul_u64
                                     : mul_i64;
}
