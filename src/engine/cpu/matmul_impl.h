/*
 * cpu/matmul_impl.h - what the float (BLAS) and the integer matmul share:
 * an operand seen as a rows x cols matrix per batch, with the strides of
 * its batch dimensions along the result's.
 */
#ifndef TR_MATMUL_IMPL_H
#define TR_MATMUL_IMPL_H

#include "../kernel_impl.h"

#ifdef _OPENMP
#include <omp.h>
#endif

struct tr__mm_operand {
    struct tr_tensor *t;             /* the handle read: the argument or a compact copy */
    const char *data;                /* its element 0 */
    int64_t rows, cols;
    int64_t rs, cs;                  /* row and column strides, in elements */
    int64_t batch[TR_MAX_DIMS];      /* strides along the result's batch dims; 0 broadcasts */
    bool trans;                      /* BLAS only: stored transposed, (i, j) at i + j * ld */
    int ld;                          /* BLAS only: the leading dimension */
};

/* The matrix dimensions of an operand of ndim >= 1 dimensions of shape
 * and strides (in elements): a 1-d left operand is one row, a 1-d right
 * operand one column. */
static inline void tr__mm_dims(struct tr__mm_operand *o, int ndim, const int64_t *shape,
                               const int64_t *strides, bool left)
{
    if (ndim >= 2) {
        o->rows = shape[ndim - 2];
        o->cols = shape[ndim - 1];
        o->rs = strides[ndim - 2];
        o->cs = strides[ndim - 1];
    } else if (left) {
        o->rows = 1;
        o->cols = shape[0];
        o->rs = 0;
        o->cs = strides[0];
    } else {
        o->rows = shape[0];
        o->cols = 1;
        o->rs = strides[0];
        o->cs = 0;
    }
}

/* Reads o->t's matrix dimensions (tr__mm_dims). */
static inline void tr__mm_matrix_of(struct tr__mm_operand *o, bool left)
{
    tr__mm_dims(o, o->t->ndim, o->t->shape, o->t->strides, left);
}

/* Sets o->batch for the nb batch dimensions of the result (o->t's own
 * batch dimensions are its last ones; missing or size-1 ones broadcast)
 * and o->data. */
static inline void tr__mm_batch_of(struct tr__mm_operand *o, int nb)
{
    const struct tr_tensor *t = o->t;
    int tb = t->ndim > 2 ? t->ndim - 2 : 0;

    for (int i = 0; i < nb; i++) {
        int j = i - (nb - tb); /* t's dimension for result batch dim i */
        o->batch[i] = j >= 0 && t->shape[j] != 1 ? t->strides[j] : 0;
    }
    o->data = tr_tensor_data(t);
}

/* The offsets, in elements, of batch number `batch` (row-major over the
 * result's first nb dimensions) in a and b. */
static inline void tr__mm_batch_offsets(const struct tr_tensor *c, int nb,
                                        const struct tr__mm_operand *a,
                                        const struct tr__mm_operand *b, int64_t batch,
                                        int64_t *oa, int64_t *ob)
{
    *oa = 0;
    *ob = 0;
    for (int d = nb - 1; d >= 0; d--) {
        int64_t idx = batch % c->shape[d];
        batch /= c->shape[d];
        *oa += idx * a->batch[d];
        *ob += idx * b->batch[d];
    }
}

/* How a product's output is shared out: rows x cols tiles per batch,
 * work tiles in all, handed to threads (parallel) when there are at least
 * min_macs multiply-adds.  The split depends only on the shapes, never on
 * the thread count, so every tile is computed the same way. */
struct tr__mm_tiles {
    int64_t rows, cols, work;
    bool parallel;
    int threads;
};

static inline struct tr__mm_tiles tr__mm_tiles_of(int64_t nbatch, int64_t m, int64_t n,
                                                  int64_t k, int64_t tile_m, int64_t tile_n,
                                                  double min_macs)
{
    struct tr__mm_tiles t;

    t.rows = (m + tile_m - 1) / tile_m;
    t.cols = (n + tile_n - 1) / tile_n;
    t.work = nbatch * t.rows * t.cols;
    t.parallel = t.work > 1 && (double)nbatch * (double)m * (double)n * (double)k >= min_macs;
    t.threads = 1;
#ifdef _OPENMP
    if (t.parallel)
        t.threads = tr_num_threads();
#endif
    return t;
}

/* The pool scratch of the products (scratch.c), from the descriptions of
 * the operands as the kernels receive them (after tr__operand), for the
 * result c, whose first nb dimensions are the batch: whether an operand
 * is copied (to the compute dtype, or compact for BLAS or the integer
 * loops), in the dtype it is copied to; and the bytes of the tile buffers. */
bool tr__mm_copies(const struct tr_value *v, bool left, enum tr_dtype compute);
uint64_t tr__mm_tile_scratch(const struct tr_value *a, const struct tr_value *b,
                             const struct tr_value *c, int nb, int threads);
bool tr__mm_int_copies(const struct tr_value *v, bool left, enum tr_dtype result,
                       enum tr_dtype *lane);
uint64_t tr__mm_int_tile_scratch(const struct tr_value *a, const struct tr_value *b,
                                 const struct tr_value *c, int nb, int threads);

/* Sets up operand o for t (a new handle of the argument, which o takes
 * over, even on failure): converted to a compact copy of dtype compute
 * when BLAS cannot read it as it is; batch strides for the nb batch
 * dimensions of the result.  left: a 1-d t is a row, else a column. */
tr_status tr__mm_prepare(const char *name, struct tr__mm_operand *o, struct tr_tensor *t,
                         bool left, enum tr_dtype compute, int nb);

/* Called on the thread that computed it with each output tile of a float
 * product, before it is rounded into the result: rows i0 .. i0 + mi - 1
 * and columns j0 .. j0 + nj - 1 of batch number `batch`, in the compute
 * dtype at tile, ld values from one row to the next; it may rewrite them
 * (cdist turns products into distances there, while the tile is in the
 * cache). */
typedef void (*tr__mm_epilogue)(void *ctx, int64_t batch, int64_t i0, int64_t j0, int64_t mi,
                                int64_t nj, char *tile, int64_t ld);

/* Whether the result c of the float product of a and b (prepared; c's
 * first nb dimensions are the batch) is better handed to a store a band
 * at a time, when its destination takes stores, than computed into the
 * destination's mapping: a band (the TILE_M rows of the result that one
 * row of tiles makes, whole) fits a thread's 1 MiB, and there are at
 * least as many bands as threads. */
bool tr__mm_streams(const struct tr__mm_operand *a, const struct tr__mm_operand *b,
                    const struct tr_value *c, int nb);
/* The product's result: tr__stream_result when tr__mm_streams says so,
 * else tr__new_result, with store->fn NULL. */
struct tr_tensor *tr__mm_result(const char *name, const struct tr_value *out,
                                const struct tr_dest *dest, const struct tr__mm_operand *a,
                                const struct tr__mm_operand *b, int nb, struct tr__store *store);

/* The float product of a and b (prepared, of dtype compute) into the
 * compact result c, whose first nb dimensions are the batch: tiles of
 * fixed sizes, one gemm call each, shared out over the threads; the
 * epilogue (or NULL) runs on each tile.  With a store (not NULL, its fn
 * set: tr__mm_result's), c's memory is never written: each thread
 * computes a band's tiles into a buffer of its own (malloc'd, outside the
 * pool, as a stage is) and hands the band over in one call.  An empty
 * inner dimension gives zeros without calling the epilogue.  Its tile
 * buffers are tr__mm_tile_scratch. */
tr_status tr__mm_multiply(const char *name, const struct tr__mm_operand *a,
                          const struct tr__mm_operand *b, struct tr_tensor *c, int nb,
                          enum tr_dtype compute, tr__mm_epilogue epilogue, void *ctx,
                          const struct tr__store *store);

/* The elementwise product of two blocks of dtype compute (f32, f64, i64
 * or u64; integers wrap), for tr__map: outer's, and einsum's products
 * without a summed letter. */
tr__block_fn tr__mm_mul_fn(enum tr_dtype compute);

/* The integer product of a and b (new handles, which it takes over) into
 * the compact result c of an integer dtype, whose first nb dimensions are
 * the batch (cpu/matmul_int.c). */
tr_status tr__cpu_matmul_int(const char *name, struct tr_tensor *a, struct tr_tensor *b,
                             struct tr_tensor *c, int nb);

#endif /* TR_MATMUL_IMPL_H */
