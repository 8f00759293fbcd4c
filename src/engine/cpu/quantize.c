/*
 * cpu/quantize.c - quantisation: quantize (symmetric: i8, i16, i4),
 * quantize_affine (asymmetric: u8, u4) and dequantize.
 *
 * Both quantize ops run in two passes.  The first finds each scale's
 * statistic (max |x| for quantize; min x and max x for quantize_affine)
 * over its values: the whole tensor, each slice along dim, or each group
 * of `group` consecutive values along the last dimension.  Maxima and
 * minima do not depend on the order the values are seen in (a NaN, once
 * seen, stays), so the split of that work over threads changes no bit.
 * The second pass computes every q from its value and its scale alone,
 * row by row along the last dimension, so that i4 and u4 pack elements 2k
 * and 2k+1 of a row into byte k (2k in the low nibble, 2k+1 in the high
 * one, each as a 4-bit two's complement or unsigned number).
 *
 * The arithmetic, which tests/python/differential.py repeats in NumPy
 * bit for bit: x is read as f64 (exact for every float dtype; an integer
 * rounds to the nearest f64), then computed in x's compute precision,
 * f32, or f64 for f64 x:
 *   quantize:        scale = f32(max|x| / qmax), the division in f64 and
 *                    rounded once (for an f32 maximum the same as f32's
 *                    division); q = clamp(rint(x / scale), -qmax, qmax),
 *                    the quotient in the compute precision;
 *   quantize_affine: lo = min(min x, 0), hi = max(max x, 0) in the compute
 *                    precision, scale = f32((hi - lo) / qmax) computed
 *                    there, zero_point = clamp(rint(-lo / scale), 0, qmax),
 *                    q = clamp(rint(x / scale) + zero_point, 0, qmax);
 * rint rounding half to even.  A scale of 0 (an all-zero slice, an empty
 * one, or one so small that its scale underflows f32) gives q = 0 and a
 * zero point of 0, never NaN; a quotient that is NaN (x or the scale NaN:
 * a NaN in the slice makes its scale NaN) counts as 0.
 */
#include <math.h>
#include <string.h>

#include "../kernel_impl.h"
#include "../kernels.h"
#include "../scratch_impl.h"

/* Values read and converted at a time (even: a block never splits the
 * two nibbles of a byte). */
#define BLOCK 2048
/* Elements below which a loop is not worth the threads. */
#define PARALLEL_ELEMENTS 32768

/* ------------------------------------------------------------ the split */

/* Which scale each value takes. */
struct split {
    int ndim;                   /* of the values (unpacked) */
    int64_t shape[TR_MAX_DIMS];
    int dim;                    /* along dim (0 .. ndim-1), else -1 */
    int64_t group;              /* per group along the last dimension, else 0 */
    int64_t count;              /* scales */
};

/* The split that arguments dim (at) and group (at + 1) ask for, over
 * values of ndim and shape (tr_op_infer has checked them). */
static void split_of(struct split *sp, int ndim, const int64_t *shape, const struct tr_arg *args,
                     int at)
{
    const struct tr_value *dim = &args[at].value, *group = &args[at + 1].value;

    sp->ndim = ndim;
    if (ndim > 0)
        memcpy(sp->shape, shape, (size_t)ndim * sizeof *shape);
    sp->dim = dim->kind == TR_VALUE_NONE || ndim == 0 ? -1 : tr__checked_dim(dim->integer, ndim);
    sp->group = group->kind == TR_VALUE_NONE ? 0 : group->integer;
    sp->count = 1;
    if (sp->dim >= 0) {
        sp->count = shape[sp->dim];
    } else if (sp->group > 0) {
        for (int i = 0; i < ndim; i++)
            sp->count *= shape[i];
        sp->count /= sp->group;
    }
}

/* The rows of the values along their last dimension: how many, and how
 * long (a 0-d tensor is one row of one). */
static int64_t row_count(const struct split *sp)
{
    int64_t rows = 1;

    for (int i = 0; i + 1 < sp->ndim; i++)
        rows *= sp->shape[i];
    return rows;
}

static int64_t row_length(const struct split *sp)
{
    return sp->ndim ? sp->shape[sp->ndim - 1] : 1;
}

/* Row r of a tensor of the split's rows: the byte offset of its first
 * element (strides: the tensor's byte strides, its rank the split's) and
 * its scales: element c of the row takes scale base + c / step (step 0:
 * base for all). */
static void row_at(const struct split *sp, int64_t r, const int64_t *strides, int64_t *offset,
                   int64_t *base, int64_t *step)
{
    int64_t off = 0, at = r, along = 0;

    for (int k = sp->ndim - 2; k >= 0; k--) {
        int64_t i = at % sp->shape[k];
        at /= sp->shape[k];
        off += i * strides[k];
        if (k == sp->dim)
            along = i;
    }
    *offset = off;
    if (sp->group > 0) {
        *base = r * (row_length(sp) / sp->group);
        *step = sp->group;
    } else if (sp->dim >= 0 && sp->dim == sp->ndim - 1) {
        *base = 0;
        *step = 1;
    } else {
        *base = sp->dim >= 0 ? along : 0;
        *step = 0;
    }
}

/* ------------------------------------------------------- the statistics */

/* The slices of a whole tensor or of one dim: one per index along dim,
 * each a view without that dim. */
struct slices {
    int64_t count;
    int ndim;                        /* of one slice */
    int64_t shape[TR_MAX_DIMS];
    int64_t a[TR_MAX_DIMS];          /* byte strides */
    int64_t step;                    /* bytes from one slice to the next */
};

static void slices_of(struct slices *sl, const struct tr_tensor *x, int d)
{
    int64_t sa[TR_MAX_DIMS];

    tr__byte_strides(x, sa);
    sl->count = d >= 0 ? x->shape[d] : 1;
    sl->step = d >= 0 ? sa[d] : 0;
    sl->ndim = 0;
    for (int i = 0; i < x->ndim; i++) {
        if (i == d)
            continue;
        sl->shape[sl->ndim] = x->shape[i];
        sl->a[sl->ndim++] = sa[i];
    }
}

/* A running statistic: lo the minimum and hi the maximum of x (affine),
 * or hi the maximum of |x|; a NaN, once seen, stays in both. */
struct stat {
    double lo, hi;
};

static void stat_init(struct stat *st, bool affine)
{
    st->lo = INFINITY;
    st->hi = affine ? -INFINITY : 0;
}

static void stat_add(struct stat *st, const struct stat *o)
{
    if (o->lo < st->lo || o->lo != o->lo)
        st->lo = st->lo != st->lo ? st->lo : o->lo;
    if (o->hi > st->hi || o->hi != o->hi)
        st->hi = st->hi != st->hi ? st->hi : o->hi;
}

static void stat_values(struct stat *st, const double *v, int64_t n, bool affine)
{
    for (int64_t i = 0; i < n; i++) {
        double a = affine ? v[i] : fabs(v[i]);
        if (affine && (a < st->lo || a != a))
            st->lo = st->lo != st->lo ? st->lo : a;
        if (a > st->hi || a != a)
            st->hi = st->hi != st->hi ? st->hi : a;
    }
}

struct stat_ctx {
    enum tr_dtype dtype; /* x's */
    bool affine;
    struct stat *room;   /* one per thread of the team, or the one to use */
    bool per_thread;     /* room[tr__team_index()]; else room[0] (inside
                            a nested inactive region every thread is 0) */
};

/* The block loop of one slice: blocks of at most BLOCK values, spread
 * over the threads when parallel. */
static void slice_stat(const struct slices *sl, const char *a, bool parallel, struct stat_ctx *c)
{
    const int64_t *strides[1] = {sl->a};
    struct tr__iter it;
    int64_t rows, len, chunks, blocks, ia;

    for (int i = 0; i < sl->ndim; i++)
        if (sl->shape[i] == 0)
            return; /* no values */
    tr__iter_init(&it, sl->ndim, sl->shape, 1, strides);
    rows = tr__iter_rows(&it);
    len = it.shape[it.ndim - 1];
    ia = it.strides[0][it.ndim - 1];
    chunks = (len + BLOCK - 1) / BLOCK;
    blocks = rows * chunks;
#pragma omp parallel for num_threads(tr_num_threads()) schedule(static) \
    if (parallel && rows * len > PARALLEL_ELEMENTS)
    for (int64_t blk = 0; blk < blocks; blk++) {
        int64_t row = blk / chunks, first = blk % chunks * BLOCK, off;
        int64_t n = len - first < BLOCK ? len - first : BLOCK;
        double v[BLOCK];
        tr__iter_row_offsets(&it, row, &off);
        tr__cpu_cast_row((char *)v, 8, TR_DTYPE_F64, a + off + first * ia, ia, c->dtype, n);
        stat_values(c->per_thread ? &c->room[tr__team_index()] : c->room, v, n, c->affine);
    }
}

/* ------------------------------------------------------------ quantize */

/* The quantisation an op and its dtype argument ask for. */
struct scheme {
    bool affine, packed, wide; /* wide: computed in f64 (x is f64) */
    double qmax;               /* q in -qmax..qmax, or 0..qmax when affine */
    enum tr_dtype q;           /* q's dtype (u8 when packed) */
};

static void scheme_of(const struct tr__op *op, const struct tr_value *dtype, enum tr_dtype x,
                      struct scheme *sc)
{
    sc->affine = op->info.id == TR_OP_QUANTIZE_AFFINE;
    sc->packed = dtype->kind == TR_VALUE_STRING;
    sc->wide = x == TR_DTYPE_F64;
    sc->q = sc->packed ? TR_DTYPE_U8 : dtype->dtype;
    if (sc->affine)
        sc->qmax = sc->packed ? 15 : 255;
    else
        sc->qmax = sc->packed ? 7 : sc->q == TR_DTYPE_I16 ? 32767 : 127;
}

/* What quantize shares with its threads. */
struct quantize_job {
    struct scheme sc;
    struct split sp;
    enum tr_dtype dtype;      /* x's */
    const struct tr_tensor *x;
    const char *xd;
    int64_t xs[TR_MAX_DIMS];  /* x's byte strides */
    char *q;
    float *scales;
    uint8_t *zeros;           /* quantize_affine's zero points, else NULL */
    struct stat *room;        /* one per thread */
    int threads;
};

/* Scale j (and zero point) from its statistic. */
static void finish(const struct quantize_job *job, int64_t j, const struct stat *st)
{
    const struct scheme *sc = &job->sc;

    /* an empty slice leaves lo inf and hi -inf: both become 0 */
    double lo = st->lo < 0 || st->lo != st->lo ? st->lo : 0;
    double hi = st->hi > 0 || st->hi != st->hi ? st->hi : 0;
    double z;
    float scale;

    if (!sc->affine) {
        job->scales[j] = (float)(st->hi / sc->qmax);
        return;
    }
    if (sc->wide) {
        scale = (float)((hi - lo) / sc->qmax);
        z = scale == 0 ? 0 : nearbyint(-lo / (double)scale);
    } else {
        float lo32 = (float)lo, hi32 = (float)hi;
        scale = (hi32 - lo32) / (float)sc->qmax;
        z = scale == 0 ? 0 : nearbyintf(-lo32 / scale);
    }
    if (z != z)
        z = 0;
    z = z > sc->qmax ? sc->qmax : z < 0 ? 0 : z;
    job->scales[j] = scale;
    job->zeros[j] = (uint8_t)z;
}

/* Slice j of the whole tensor or of dim: its statistic, then its scale.
 * parallel: its blocks spread over the threads (called outside any
 * parallel region); else all on the calling thread, in its own slot. */
static void slice_scale(const struct quantize_job *job, const struct slices *sl, int64_t j,
                        bool parallel)
{
    struct stat_ctx c = {job->dtype, job->sc.affine, job->room, parallel};
    struct stat st;

    stat_init(&st, job->sc.affine);
    if (parallel) {
        for (int t = 0; t < job->threads; t++)
            stat_init(&job->room[t], job->sc.affine);
        slice_stat(sl, job->xd + j * sl->step, true, &c);
        for (int t = 0; t < job->threads; t++)
            stat_add(&st, &job->room[t]);
    } else {
        c.room = &job->room[tr__team_index()];
        stat_init(c.room, job->sc.affine);
        slice_stat(sl, job->xd + j * sl->step, false, &c);
        st = *c.room;
    }
    finish(job, j, &st);
}

/* Group j: group consecutive values of one row. */
static void group_scale(const struct quantize_job *job, int64_t j)
{
    const struct split *sp = &job->sp;
    int64_t per_row = row_length(sp) / sp->group, off, base, step;
    int64_t ls = job->xs[sp->ndim - 1];
    const char *p;
    struct stat st;
    double v[BLOCK];

    row_at(sp, j / per_row, job->xs, &off, &base, &step);
    p = job->xd + off + j % per_row * sp->group * ls;
    stat_init(&st, job->sc.affine);
    for (int64_t first = 0; first < sp->group; first += BLOCK) {
        int64_t n = sp->group - first < BLOCK ? sp->group - first : BLOCK;
        tr__cpu_cast_row((char *)v, 8, TR_DTYPE_F64, p + first * ls, ls, job->dtype, n);
        stat_values(&st, v, n, job->sc.affine);
    }
    finish(job, j, &st);
}

static void scales_of(struct quantize_job *job)
{
    const struct split *sp = &job->sp;

    if (sp->group > 0) {
        int64_t n = sp->count;
#pragma omp parallel for schedule(static) num_threads(job->threads) \
    if (n * sp->group > PARALLEL_ELEMENTS && n > 1)
        for (int64_t j = 0; j < n; j++)
            group_scale(job, j);
        return;
    }
    struct slices sl;
    slices_of(&sl, job->x, sp->dim);
    if (sl.count == 1) {
        slice_scale(job, &sl, 0, true);
    } else {
        /* many slices: each on one thread */
#pragma omp parallel for schedule(dynamic) num_threads(job->threads)
        for (int64_t j = 0; j < sl.count; j++)
            slice_scale(job, &sl, j, false);
    }
}

/* The q of a value v (as f64) whose scale is scale and zero point zero. */
static inline double quantized(const struct scheme *sc, double v, float scale, double zero)
{
    double r;

    if (scale == 0)
        return 0;
    r = sc->wide ? nearbyint(v / (double)scale) : nearbyintf((float)v / scale);
    if (r != r)
        r = 0;
    if (sc->affine) {
        r += zero;
        return r > sc->qmax ? sc->qmax : r < 0 ? 0 : r;
    }
    return r > sc->qmax ? sc->qmax : r < -sc->qmax ? -sc->qmax : r;
}

/* Values first .. first + n of row r into q. */
static void quantize_block(const struct quantize_job *job, int64_t r, int64_t first, int64_t n)
{
    const struct scheme *sc = &job->sc;
    const struct split *sp = &job->sp;
    int64_t len = row_length(sp), ls = sp->ndim ? job->xs[sp->ndim - 1] : 0;
    int64_t off, base, step;
    double v[BLOCK];
    int32_t out[BLOCK];

    row_at(sp, r, job->xs, &off, &base, &step);
    tr__cpu_cast_row((char *)v, 8, TR_DTYPE_F64, job->xd + off + first * ls, ls, job->dtype, n);
    for (int64_t i = 0; i < n; i++) {
        int64_t s = base + (step ? (first + i) / step : 0);
        double zero = sc->affine ? (double)job->zeros[s] : 0;
        out[i] = (int32_t)quantized(sc, v[i], job->scales[s], zero);
    }
    if (sc->packed) {
        uint8_t *q = (uint8_t *)job->q + (r * len + first) / 2;
        for (int64_t i = 0; i + 1 < n; i += 2)
            q[i / 2] = (uint8_t)(((uint32_t)out[i] & 15u) | ((uint32_t)out[i + 1] & 15u) << 4);
    } else if (sc->q == TR_DTYPE_I16) {
        int16_t *q = (int16_t *)(void *)job->q + r * len + first;
        for (int64_t i = 0; i < n; i++)
            q[i] = (int16_t)out[i];
    } else if (sc->q == TR_DTYPE_I8) {
        int8_t *q = (int8_t *)job->q + r * len + first;
        for (int64_t i = 0; i < n; i++)
            q[i] = (int8_t)out[i];
    } else {
        uint8_t *q = (uint8_t *)job->q + r * len + first;
        for (int64_t i = 0; i < n; i++)
            q[i] = (uint8_t)out[i];
    }
}

/* quantize(x, dtype=i8, dim=None, group=None) -> q, scale and
 * quantize_affine(x, dtype=u8, dim=None, group=None) -> q, scale,
 * zero_point: the scales (f32) and zero points (u8) of the split, then
 * every q.  Results are made in the pool in this order: q, scale, zero
 * point, then one block of a running statistic per thread. */
tr_status tr__k_quantize(const struct tr__op *op, const struct tr_arg *args,
                         const struct tr_value *out, const struct tr_dest *dest,
                         struct tr_tensor **results)
{
    (void)dest; /* its results are its own: the caller copies them */
    const char *name = op->info.name;
    int nres = op->info.nresults;
    struct tr_tensor *x, *made[3] = {NULL, NULL, NULL}, *scratch = NULL;
    struct quantize_job job;
    tr_status s = TR_OK;

    x = tr__arg_tensor(&args[0], tr_value_dtype(&args[0].value));
    if (!x)
        return tr_last_status();
    for (int i = 0; i < nres && s == TR_OK; i++) {
        made[i] = tr__empty(name, out[i].dtype, out[i].ndim, out[i].shape, out[i].device);
        if (!made[i])
            s = tr_last_status();
    }
    if (s != TR_OK) {
        tr_release(x);
        return tr__give_results(made, nres, s, results);
    }
    memset(&job, 0, sizeof job);
    scheme_of(op, &args[1].value, x->dtype, &job.sc);
    split_of(&job.sp, x->ndim, x->shape, args, 2);
    job.dtype = x->dtype;
    job.x = x;
    job.xd = tr_tensor_data(x);
    tr__byte_strides(x, job.xs);
    job.q = made[0]->storage->data + made[0]->offset;
    job.scales = (float *)(void *)(made[1]->storage->data + made[1]->offset);
    job.zeros = nres > 2 ? (uint8_t *)(made[2]->storage->data + made[2]->offset) : NULL;
    job.threads = tr__team_size(true);
    scratch = tr__empty(name, TR_DTYPE_F64, 1, (int64_t[]){2 * (int64_t)job.threads},
                        made[0]->storage->device);
    if (!scratch)
        s = tr_last_status();
    if (s == TR_OK) {
        int64_t rows = row_count(&job.sp), len = row_length(&job.sp);
        int64_t chunks = (len + BLOCK - 1) / BLOCK, blocks = rows * chunks;
        job.room = (struct stat *)(void *)(scratch->storage->data + scratch->offset);
        scales_of(&job);
#pragma omp parallel for num_threads(job.threads) schedule(static) \
    if (rows * len > PARALLEL_ELEMENTS)
        for (int64_t blk = 0; blk < blocks; blk++) {
            int64_t first = blk % chunks * BLOCK;
            quantize_block(&job, blk / chunks, first, len - first < BLOCK ? len - first : BLOCK);
        }
    }
    tr_release(scratch);
    tr_release(x);
    return tr__give_results(made, nres, s, results);
}

/* ---------------------------------------------------------- dequantize */

struct dequantize_job {
    struct split sp;           /* of the values (q's shape, unpacked) */
    enum tr_dtype dtype;       /* q's */
    int nibbles;               /* 0, or 4 (u4) or -4 (i4): two values a byte */
    const char *q;
    int64_t qs[TR_MAX_DIMS];   /* q's byte strides */
    const float *scales;
    const double *zeros;       /* NULL: none */
    float *out;
};

/* Values first .. first + n of row r: (q - zero) * scale in f64, rounded
 * once to f32 (for integer q and zero points below 2^29 the product is
 * exact, so this is f32's own product of q - zero and the scale). */
static void dequantize_block(const struct dequantize_job *job, int64_t r, int64_t first, int64_t n)
{
    const struct split *sp = &job->sp;
    int64_t len = row_length(sp), ls = sp->ndim ? job->qs[sp->ndim - 1] : 0;
    int64_t off, base, step;
    double v[BLOCK];

    row_at(sp, r, job->qs, &off, &base, &step);
    if (job->nibbles) {
        const char *p = job->q + off;
        for (int64_t i = 0; i < n; i++) {
            int64_t c = first + i;
            unsigned b = (unsigned)(uint8_t)p[(c / 2) * ls], nib = c % 2 ? b >> 4 : b & 15u;
            v[i] = job->nibbles < 0 ? (double)((int)(nib ^ 8u) - 8) : (double)nib;
        }
    } else {
        tr__cpu_cast_row((char *)v, 8, TR_DTYPE_F64, job->q + off + first * ls, ls, job->dtype,
                         n);
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t s = base + (step ? (first + i) / step : 0);
        double zero = job->zeros ? job->zeros[s] : 0;
        job->out[r * len + first + i] = (float)((v[i] - zero) * (double)job->scales[s]);
    }
}

/* dequantize(q, scale, zero_point=None, dim=None, group=None, dtype=None):
 * (q - zero_point) * scale as f32.  The pool holds, in this order, the
 * scale as a compact f32 tensor (none when it is one already), the zero
 * point as a compact f64 tensor, then the result. */
tr_status tr__k_dequantize(const struct tr__op *op, const struct tr_arg *args,
                           const struct tr_value *out, const struct tr_dest *dest,
                           struct tr_tensor **results)
{
    (void)dest; /* its results are its own: the caller copies them */
    struct tr_tensor *q, *given, *scale = NULL, *zero = NULL, *c = NULL;
    struct dequantize_job job;
    tr_status s = TR_OK;

    q = tr__arg_tensor(&args[0], tr_value_dtype(&args[0].value));
    if (!q)
        return tr_last_status();
    given = tr__arg_tensor(&args[1], TR_DTYPE_F32);
    scale = given ? tr_cast(given, TR_DTYPE_F32) : NULL;
    tr_release(given);
    if (scale && args[2].value.kind != TR_VALUE_NONE) {
        given = tr__arg_tensor(&args[2], TR_DTYPE_F64);
        zero = given ? tr_cast(given, TR_DTYPE_F64) : NULL;
        tr_release(given);
        if (!zero)
            s = tr_last_status();
    }
    if (scale && s == TR_OK)
        c = tr__empty(op->info.name, out->dtype, out->ndim, out->shape, out->device);
    if (!c && s == TR_OK)
        s = tr_last_status();
    if (s == TR_OK && tr_tensor_numel(c) > 0) {
        int64_t rows, len, chunks, blocks;
        memset(&job, 0, sizeof job);
        split_of(&job.sp, c->ndim, c->shape, args, 3);
        job.dtype = q->dtype;
        if (args[5].value.kind == TR_VALUE_STRING)
            job.nibbles = strcmp(args[5].value.string, "i4") == 0 ? -4 : 4;
        job.q = tr_tensor_data(q);
        tr__byte_strides(q, job.qs);
        job.scales = tr_tensor_data(scale);
        job.zeros = zero ? tr_tensor_data(zero) : NULL;
        job.out = (float *)(void *)(c->storage->data + c->offset);
        rows = row_count(&job.sp);
        len = row_length(&job.sp);
        chunks = (len + BLOCK - 1) / BLOCK;
        blocks = rows * chunks;
#pragma omp parallel for num_threads(tr_num_threads()) schedule(static) \
    if (rows * len > PARALLEL_ELEMENTS)
        for (int64_t blk = 0; blk < blocks; blk++) {
            int64_t first = blk % chunks * BLOCK;
            dequantize_block(&job, blk / chunks, first, len - first < BLOCK ? len - first : BLOCK);
        }
    }
    tr_release(zero);
    tr_release(scale);
    tr_release(q);
    return tr__give_results(&c, 1, s, results);
}
