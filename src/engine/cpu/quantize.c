/*
 * cpu/quantize.c - quantisation: quantize (symmetric, i8) and dequantize.
 */
#include <math.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "../kernel_impl.h"

#include "../kernels.h"

/* Values read and converted at a time. */
#define BLOCK 2048
/* Elements below which a loop is not worth the threads. */
#define PARALLEL_ELEMENTS 32768

static int threads_for(bool parallel)
{
#ifdef _OPENMP
    return parallel ? tr_num_threads() : 1;
#else
    (void)parallel;
    return 1;
#endif
}

static int thread_index(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* A dim that tr_op_infer has checked, made non-negative (a scalar takes 0
 * and -1). */
static int dim_of(int64_t dim, int ndim)
{
    int n = ndim > 0 ? ndim : 1;

    return (int)(dim < 0 ? dim + n : dim);
}

static tr_status give(struct tr_tensor **made, int n, tr_status s, struct tr_tensor **results)
{
    for (int i = 0; i < n; i++) {
        if (s != TR_OK)
            tr_release(made[i]);
        else
            results[i] = made[i];
    }
    return s;
}

/* ------------------------------------------------------------- quantize */

/* The slices of a quantize or dequantize: the whole tensor when dim is
 * None, else one per index along dim, each a view without that dim. */
struct slices {
    int64_t count;
    int ndim;                        /* of one slice */
    int64_t shape[TR_MAX_DIMS];
    int64_t a[TR_MAX_DIMS], b[TR_MAX_DIMS]; /* byte strides of two operands */
    int64_t step_a, step_b;          /* bytes from one slice to the next */
};

static void slices_of(struct slices *sl, const struct tr_tensor *ta, const struct tr_tensor *tb,
                      const struct tr_arg *dim_arg)
{
    int64_t sa[TR_MAX_DIMS], sb[TR_MAX_DIMS];
    int d = dim_arg->value.kind == TR_VALUE_NONE || ta->ndim == 0
                ? -1
                : dim_of(dim_arg->value.integer, ta->ndim);

    tr__byte_strides(ta, sa);
    tr__byte_strides(tb, sb);
    sl->count = d >= 0 ? ta->shape[d] : 1;
    sl->step_a = d >= 0 ? sa[d] : 0;
    sl->step_b = d >= 0 ? sb[d] : 0;
    sl->ndim = 0;
    for (int i = 0; i < ta->ndim; i++) {
        if (i == d)
            continue;
        sl->shape[sl->ndim] = ta->shape[i];
        sl->a[sl->ndim] = sa[i];
        sl->b[sl->ndim++] = sb[i];
    }
}

/* Runs the block loop of one slice: for each block of at most BLOCK
 * elements, fn(pa, inner stride a, pb, inner stride b, n, ctx). */
typedef void (*block_fn)(const char *pa, int64_t sa, char *pb, int64_t sb, int64_t n, void *ctx);

static void for_blocks(const struct slices *sl, const char *a, char *b, bool parallel,
                       block_fn fn, void *ctx)
{
    const int64_t *strides[2] = {sl->a, sl->b};
    struct tr__iter it;
    int64_t rows, len, chunks, blocks, ia, ib;

    tr__iter_init(&it, sl->ndim, sl->shape, 2, strides);
    rows = tr__iter_rows(&it);
    len = it.shape[it.ndim - 1];
    ia = it.strides[0][it.ndim - 1];
    ib = it.strides[1][it.ndim - 1];
    chunks = (len + BLOCK - 1) / BLOCK;
    blocks = rows * chunks;
#pragma omp parallel for num_threads(tr_num_threads()) schedule(static) \
    if (parallel && rows * len > PARALLEL_ELEMENTS)
    for (int64_t blk = 0; blk < blocks; blk++) {
        int64_t row = blk / chunks, first = blk % chunks * BLOCK, off[2];
        int64_t n = len - first < BLOCK ? len - first : BLOCK;
        tr__iter_row_offsets(&it, row, off);
        fn(a + off[0] + first * ia, ia, b + off[1] + first * ib, ib, n, ctx);
    }
}

/* max |x| of the blocks seen; NaN wins. */
struct absmax {
    enum tr_dtype dtype;
    double *max;     /* one per thread of the team, or the one to use */
    bool per_thread; /* max[omp_get_thread_num()]; else max[0] (inside a
                        nested inactive region every thread is number 0) */
};

static void absmax_block(const char *pa, int64_t sa, char *pb, int64_t sb, int64_t n, void *ctx)
{
    struct absmax *m = ctx;
    double v[BLOCK], *best = m->per_thread ? &m->max[thread_index()] : m->max;

    (void)pb;
    (void)sb;
    tr__cpu_cast_row((char *)v, 8, TR_DTYPE_F64, pa, sa, m->dtype, n);
    for (int64_t i = 0; i < n; i++) {
        double a = fabs(v[i]);
        if (a > *best || a != a)
            *best = *best != *best ? *best : a;
    }
}

struct quantize_ctx {
    enum tr_dtype dtype; /* x's */
    double scale;
};

/* q (operand b, i8) = clamp(round_half_even(x / scale), -127, 127), 0
 * where the quotient is NaN (scale 0, or x or scale NaN).  The quotient
 * is rounded in x's compute dtype (f32 but for f64) before it is rounded
 * to an integer, as PyTorch does: an f32 quotient that rounds to exactly
 * k + 0.5 goes to the even neighbour even when the f64 quotient lies just
 * off the half. */
static void quantize_block(const char *pa, int64_t sa, char *pb, int64_t sb, int64_t n, void *ctx)
{
    const struct quantize_ctx *q = ctx;
    float scale32 = (float)q->scale;
    bool wide = q->dtype == TR_DTYPE_F64;
    double v[BLOCK];

    tr__cpu_cast_row((char *)v, 8, TR_DTYPE_F64, pa, sa, q->dtype, n);
    for (int64_t i = 0; i < n; i++) {
        double r = q->scale == 0 ? 0
                   : wide        ? nearbyint(v[i] / q->scale)
                                 : nearbyintf((float)v[i] / scale32);
        if (r != r)
            r = 0;
        r = r > 127 ? 127 : r < -127 ? -127 : r;
        pb[i * sb] = (char)(int8_t)r;
    }
}

/* What quantize shares with its slices. */
struct quantize_job {
    const struct slices *sl;
    enum tr_dtype dtype; /* x's */
    const char *x;
    char *q;
    float *scales;
    double *room;        /* a running maximum per thread */
    int threads;
};

/* Slice j: its scale, then its values.  parallel: its blocks spread over
 * the threads (called outside any parallel region); else all on the
 * calling thread, which uses its own slot of room. */
static void quantize_slice(const struct quantize_job *job, int64_t j, bool parallel)
{
    const struct slices *sl = job->sl;
    const char *xj = job->x + j * sl->step_a;
    char *qj = job->q + j * sl->step_b;
    struct absmax m = {job->dtype, job->room, parallel};
    struct quantize_ctx q = {job->dtype, 0};
    double best = 0;

    if (parallel) {
        for (int t = 0; t < job->threads; t++)
            job->room[t] = 0;
        for_blocks(sl, xj, qj, true, absmax_block, &m);
        for (int t = 0; t < job->threads; t++)
            if (job->room[t] > best || job->room[t] != job->room[t])
                best = best != best ? best : job->room[t];
    } else {
        m.max = &job->room[thread_index()];
        *m.max = 0;
        for_blocks(sl, xj, qj, false, absmax_block, &m);
        best = *m.max;
    }
    /* max|x| / 127 in f64, rounded once to f32: for an f32 max the same
     * as the f32 division, f64 having more than twice f32's digits */
    job->scales[j] = (float)(best / 127.0);
    q.scale = (double)job->scales[j];
    for_blocks(sl, xj, qj, parallel, quantize_block, &q);
}

/* quantize(x, dtype=i8, dim=None) -> q, scale: scale = max|x| / 127 as
 * f32, one for x or one per index along dim. */
tr_status tr__k_quantize(const struct tr__op *op, const struct tr_arg *args,
                         const struct tr_value *out, const struct tr_dest *dest,
                         struct tr_tensor **results)
{
    (void)dest; /* its results are its own: the caller copies them */
    const char *name = op->info.name;
    struct tr_tensor *x, *made[2] = {NULL, NULL}, *scratch = NULL;
    struct quantize_job job;
    struct slices sl;
    tr_status s = TR_OK;

    x = tr__arg_tensor(&args[0], tr_value_dtype(&args[0].value));
    if (!x)
        return tr_last_status();
    for (int i = 0; i < 2 && s == TR_OK; i++) {
        made[i] = tr__empty(name, out[i].dtype, out[i].ndim, out[i].shape, out[i].device);
        if (!made[i])
            s = tr_last_status();
    }
    if (s != TR_OK) {
        tr_release(x);
        return give(made, 2, s, results);
    }
    slices_of(&sl, x, made[0], &args[2]);
    job.sl = &sl;
    job.dtype = x->dtype;
    job.x = tr_tensor_data(x);
    job.q = made[0]->storage->data + made[0]->offset;
    job.scales = (float *)(void *)(made[1]->storage->data + made[1]->offset);
    job.threads = threads_for(true);
    scratch = tr__empty(name, TR_DTYPE_F64, 1, (int64_t[]){job.threads}, made[0]->storage->device);
    if (!scratch)
        s = tr_last_status();
    if (s == TR_OK && tr_tensor_numel(x) == 0) {
        /* no values: every maximum, and so every scale, is 0 */
        for (int64_t j = 0; j < sl.count; j++)
            job.scales[j] = 0;
    } else if (s == TR_OK && sl.count == 1) {
        job.room = (double *)(void *)(scratch->storage->data + scratch->offset);
        quantize_slice(&job, 0, true);
    } else if (s == TR_OK) {
        /* many slices: each on one thread */
        job.room = (double *)(void *)(scratch->storage->data + scratch->offset);
#pragma omp parallel for schedule(dynamic) num_threads(job.threads)
        for (int64_t j = 0; j < sl.count; j++)
            quantize_slice(&job, j, false);
    }
    tr_release(scratch);
    tr_release(x);
    return give(made, 2, s, results);
}

struct dequantize_ctx {
    enum tr_dtype dtype; /* q's */
    double scale;
};

/* out (operand b, f32) = q (operand a) * scale, rounded once. */
static void dequantize_block(const char *pa, int64_t sa, char *pb, int64_t sb, int64_t n, void *ctx)
{
    const struct dequantize_ctx *dq = ctx;
    double v[BLOCK];

    tr__cpu_cast_row((char *)v, 8, TR_DTYPE_F64, pa, sa, dq->dtype, n);
    for (int64_t i = 0; i < n; i++) {
        float r = (float)(v[i] * dq->scale);
        memcpy(pb + i * sb, &r, sizeof r);
    }
}

/* dequantize(q, scale, dim=None): q * scale as f32, the scale per index
 * along dim or one for all. */
tr_status tr__k_dequantize(const struct tr__op *op, const struct tr_arg *args,
                           const struct tr_value *out, const struct tr_dest *dest,
                           struct tr_tensor **results)
{
    (void)dest; /* its results are its own: the caller copies them */
    struct tr_tensor *q, *given, *scale = NULL, *c = NULL;
    struct slices sl;
    tr_status s = TR_OK;

    q = tr__arg_tensor(&args[0], tr_value_dtype(&args[0].value));
    if (!q)
        return tr_last_status();
    given = tr__arg_tensor(&args[1], TR_DTYPE_F32);
    scale = given ? tr_cast(given, TR_DTYPE_F32) : NULL;
    tr_release(given);
    if (scale)
        c = tr__empty(op->info.name, out->dtype, out->ndim, out->shape, out->device);
    if (!c)
        s = tr_last_status();
    if (s == TR_OK && tr_tensor_numel(c) > 0) {
        const float *scales = tr_tensor_data(scale);
        const char *qb = tr_tensor_data(q);
        char *cb = c->storage->data + c->offset;

        slices_of(&sl, q, c, &args[2]);
        if (sl.count == 1) {
            struct dequantize_ctx dq = {q->dtype, (double)scales[0]};
            for_blocks(&sl, qb, cb, true, dequantize_block, &dq);
        } else {
#pragma omp parallel for num_threads(tr_num_threads()) schedule(dynamic)
            for (int64_t j = 0; j < sl.count; j++) {
                struct dequantize_ctx dq = {q->dtype, (double)scales[j]};
                for_blocks(&sl, qb + j * sl.step_a, cb + j * sl.step_b, false, dequantize_block,
                           &dq);
            }
        }
    }
    tr_release(scale);
    tr_release(q);
    return give(&c, 1, s, results);
}
