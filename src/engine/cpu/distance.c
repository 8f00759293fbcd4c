/*
 * cpu/distance.c - cdist (pairwise p-norm distances between the rows of
 * two batches of matrices) and cosine_similarity (along one dimension of
 * two broadcast operands).
 *
 * cdist computes in f32 (f16, bf16, f32) or f64.  For p = 2 with more
 * than MM_MIN rows on either side (PyTorch's own rule,
 * use_mm_for_euclid_dist_if_necessary) it goes through the product
 * a @ b^T of cpu/matmul.c, tiles and all, and turns each tile into
 * distances while it is in the cache (an epilogue): d = sqrt(max(|a_i|^2
 * + |b_j|^2 - 2 a_i.b_j, 0)), the squared norms summed pairwise
 * beforehand.  The expansion loses accuracy for points close together
 * relative to their norms (cdist(x, x) need not have an exact zero
 * diagonal), as PyTorch's does.  Every other case is direct: for each pair
 * of rows, the terms |a_k - b_k|^p of a block of TR__REDUCE_BLOCK
 * coordinates, summed by the tree of reduce_impl.h (max for p = inf, a
 * count of differing coordinates for p = 0), over tiles of TILE_I x TILE_J
 * pairs so that a tile's rows of b stay in the cache while the rows of a
 * pass over them.  A NaN coordinate gives NaN for every p.
 *
 * cosine_similarity computes in f64 whatever the operands (f32 values are
 * exact in f64, so the squares and products of f32 operands are too):
 * sum(a b) / (max(|a|, eps) max(|b|, eps)), each norm clamped on its own
 * as PyTorch 1.12 and later do, each sum the blocks and pairwise tree of
 * reduce_impl.h, then rounded once to the result's dtype.
 *
 * Each output element is computed by one thread, in an order fixed by the
 * shapes alone, so the bits never depend on the thread count.
 */
#include <math.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "matmul_impl.h"
#include "reduce_impl.h"
#include "../scratch_impl.h"

#include "../kernels.h"

#define BLOCK TR__REDUCE_BLOCK
/* Block sums are combined pairwise GROUP at a time, the groups' sums in
 * order: the tree of reduce_impl.h for up to GROUP blocks (a million
 * values), without a buffer that grows with the length. */
#define GROUP 256
/* PyTorch's threshold: the product when either side has more rows. */
#define MM_MIN 25
/* Pairs of rows computed together by the direct path. */
#define TILE_I 8
#define TILE_J 64
/* Below this many coordinate differences, or values, one thread. */
#define PARALLEL_WORK (INT64_C(1) << 16)

TR__PAIRWISE(sum_f32, float, float, TR__PW_SAME)
TR__PAIRWISE(sum_f64, double, double, TR__PW_SAME)
TR__PAIRWISE(sumsq_f32, float, float, TR__PW_SQUARE)
TR__PAIRWISE(sumsq_f64, double, double, TR__PW_SQUARE)

/* How a distance is made of its terms. */
enum norm { N_ZERO, N_ONE, N_TWO, N_INF, N_POW };

static enum norm norm_of(double p)
{
    return p == 0 ? N_ZERO : p == 1 ? N_ONE : p == 2 ? N_TWO : isinf(p) ? N_INF : N_POW;
}

/*
 * tree_*: the sum of a run of block sums, added one at a time.
 * rowsq_*: the sum of squares of n values step elements apart, block by
 * block (buf: BLOCK values, used when step is not 1).
 * dist_*: the p-distance of the compact rows x and y of m values (buf:
 * BLOCK values).
 */
#define DISTANCE_FNS(SUF, T, FABS, SQRT, POW)                                \
    struct tree_##SUF {                                                      \
        T part[GROUP];                                                       \
        T total;                                                             \
        int n;                                                               \
        bool grouped;                                                        \
    };                                                                       \
                                                                             \
    static void tree_add_##SUF(struct tree_##SUF *t, T v)                    \
    {                                                                        \
        t->part[t->n++] = v;                                                 \
        if (t->n == GROUP) {                                                 \
            T g = sum_##SUF(t->part, GROUP, 0);                              \
            t->total = t->grouped ? t->total + g : g;                        \
            t->grouped = true;                                               \
            t->n = 0;                                                        \
        }                                                                    \
    }                                                                        \
                                                                             \
    static T tree_sum_##SUF(const struct tree_##SUF *t)                      \
    {                                                                        \
        if (!t->grouped)                                                     \
            return sum_##SUF(t->part, t->n, 0);                              \
        return t->n ? t->total + sum_##SUF(t->part, t->n, 0) : t->total;     \
    }                                                                        \
                                                                             \
    static T rowsq_##SUF(const T *x, int64_t n, int64_t step, T *buf)        \
    {                                                                        \
        struct tree_##SUF t;                                                 \
        t.n = 0;                                                             \
        t.grouped = false;                                                   \
        t.total = 0;                                                         \
        for (int64_t k0 = 0; k0 < n; k0 += BLOCK) {                          \
            int64_t len = n - k0 < BLOCK ? n - k0 : BLOCK;                   \
            const T *v = x + k0 * step;                                      \
            if (step != 1) {                                                 \
                for (int64_t i = 0; i < len; i++)                            \
                    buf[i] = v[i * step];                                    \
                v = buf;                                                     \
            }                                                                \
            tree_add_##SUF(&t, sumsq_##SUF(v, len, 0));                      \
        }                                                                    \
        return tree_sum_##SUF(&t);                                           \
    }                                                                        \
                                                                             \
    static T dist_##SUF(const T *x, const T *y, int64_t m, enum norm how, T p, T *buf) \
    {                                                                        \
        struct tree_##SUF t;                                                 \
        T top = 0, s;                                                        \
        t.n = 0;                                                             \
        t.grouped = false;                                                   \
        t.total = 0;                                                         \
        for (int64_t k0 = 0; k0 < m; k0 += BLOCK) {                          \
            int64_t n = m - k0 < BLOCK ? m - k0 : BLOCK;                     \
            const T *a = x + k0, *b = y + k0;                                \
            switch (how) {                                                   \
            case N_INF:                                                      \
                for (int64_t i = 0; i < n; i++) {                            \
                    T d = FABS(a[i] - b[i]);                                 \
                    top = d > top || d != d ? d : top; /* NaN stays */       \
                }                                                            \
                continue;                                                    \
            case N_ZERO:                                                     \
                for (int64_t i = 0; i < n; i++) {                            \
                    T d = a[i] - b[i];                                       \
                    buf[i] = d == 0 ? (T)0 : d != d ? d : (T)1;              \
                }                                                            \
                break;                                                       \
            case N_ONE:                                                      \
                _Pragma("omp simd")                                          \
                for (int64_t i = 0; i < n; i++)                              \
                    buf[i] = FABS(a[i] - b[i]);                              \
                break;                                                       \
            case N_TWO:                                                      \
                _Pragma("omp simd")                                          \
                for (int64_t i = 0; i < n; i++)                              \
                    buf[i] = (a[i] - b[i]) * (a[i] - b[i]);                  \
                break;                                                       \
            case N_POW:                                                      \
                for (int64_t i = 0; i < n; i++)                              \
                    buf[i] = POW(FABS(a[i] - b[i]), p);                      \
                break;                                                       \
            }                                                                \
            tree_add_##SUF(&t, sum_##SUF(buf, n, 0));                        \
        }                                                                    \
        if (how == N_INF)                                                    \
            return top;                                                      \
        s = tree_sum_##SUF(&t);                                              \
        return how == N_TWO ? SQRT(s) : how == N_POW ? POW(s, (T)1 / p) : s; \
    }

DISTANCE_FNS(f32, float, fabsf, sqrtf, powf)
DISTANCE_FNS(f64, double, fabs, sqrt, pow)

/* ---------------------------------------------------------------- cdist */

/* The rows of a and b per batch of the result c (whose first nb
 * dimensions are the batch), P and R of them, m coordinates each. */
struct pairs {
    const struct tr__mm_operand *a, *b;
    const struct tr_tensor *c;
    int nb;
    int64_t nbatch, p, r, m;
};

static bool use_product(double p, int64_t rows_a, int64_t rows_b)
{
    return p == 2 && (rows_a > MM_MIN || rows_b > MM_MIN);
}

/* What the epilogue needs: each batch's squared norms of the rows of a
 * (P of them) and of b (R), in the compute dtype. */
struct expansion {
    enum tr_dtype compute;
    const char *na, *nb;
    int64_t p, r;
};

/* g = a_i.b_j becomes sqrt(max(|a_i|^2 + |b_j|^2 - 2 g, 0)); NaN stays.
 * The square roots go through SSE2 (the x86-64 baseline) four or two at
 * a time where it is there: sqrtf of a float that may be negative keeps
 * its errno path, which no compiler vectorises, and the instruction is
 * IEEE's correctly rounded root, so the bits are the scalar loop's.  The
 * first pass is built for wider vectors too (TR__VECTOR_CLONES): a third
 * less time in the epilogue of bench-cdist. */
TR__VECTOR_CLONES static void to_distances(void *ctx, int64_t batch, int64_t i0, int64_t j0, int64_t mi,
                         int64_t nj, char *tile, int64_t ld)
{
    const struct expansion *e = ctx;

    if (e->compute == TR_DTYPE_F32) {
        const float *na = (const float *)(const void *)e->na + batch * e->p + i0;
        const float *nb = (const float *)(const void *)e->nb + batch * e->r + j0;
        for (int64_t i = 0; i < mi; i++) {
            float *g = (float *)(void *)tile + i * ld;
            int64_t j = 0;
#pragma omp simd
            for (int64_t q = 0; q < nj; q++) {
                float d = (na[i] + nb[q]) - 2.0f * g[q];
                g[q] = d < 0 ? 0.0f : d;
            }
#ifdef __SSE2__
            for (; j + 4 <= nj; j += 4)
                _mm_storeu_ps(g + j, _mm_sqrt_ps(_mm_loadu_ps(g + j)));
#endif
            for (; j < nj; j++)
                g[j] = sqrtf(g[j]);
        }
    } else {
        const double *na = (const double *)(const void *)e->na + batch * e->p + i0;
        const double *nb = (const double *)(const void *)e->nb + batch * e->r + j0;
        for (int64_t i = 0; i < mi; i++) {
            double *g = (double *)(void *)tile + i * ld;
            int64_t j = 0;
#pragma omp simd
            for (int64_t q = 0; q < nj; q++) {
                double d = (na[i] + nb[q]) - 2.0 * g[q];
                g[q] = d < 0 ? 0.0 : d;
            }
#ifdef __SSE2__
            for (; j + 2 <= nj; j += 2)
                _mm_storeu_pd(g + j, _mm_sqrt_pd(_mm_loadu_pd(g + j)));
#endif
            for (; j < nj; j++)
                g[j] = sqrt(g[j]);
        }
    }
}

/* The squared norms of every row of a and of b (b: the prepared b^T, its
 * rows are columns) for each batch of the result, into norms: nbatch * P
 * of a's, then nbatch * R of b's. */
static void row_norms(const struct pairs *pr, enum tr_dtype compute, char *norms)
{
    int64_t rows = pr->nbatch * (pr->p + pr->r);
    bool parallel = rows > 1 && rows * pr->m > PARALLEL_WORK;

#pragma omp parallel for schedule(static) num_threads(tr__team_size(parallel)) if (parallel)
    for (int64_t q = 0; q < rows; q++) {
        bool left = q < pr->nbatch * pr->p;
        int64_t per = left ? pr->p : pr->r, local = left ? q : q - pr->nbatch * pr->p;
        int64_t batch = local / per, row = local % per, oa, ob, at, step;
        double buf[BLOCK]; /* f64 room, big enough for either dtype */
        const struct tr__mm_operand *o = left ? pr->a : pr->b;

        tr__mm_batch_offsets(pr->c, pr->nb, pr->a, pr->b, batch, &oa, &ob);
        /* a's row i: (i, k) at i rs + k cs; b^T's column j: (k, j) at
         * k rs + j cs */
        at = left ? oa + row * o->rs : ob + row * o->cs;
        step = left ? o->cs : o->rs;
        if (pr->m == 1 || pr->m == 0)
            step = 1;
        if (compute == TR_DTYPE_F32)
            ((float *)(void *)norms)[q] =
                rowsq_f32((const float *)(const void *)o->data + at, pr->m, step, (float *)buf);
        else
            ((double *)(void *)norms)[q] =
                rowsq_f64((const double *)(const void *)o->data + at, pr->m, step, buf);
    }
}

/* The direct distances of every pair into c (compact, of dtype out). */
static void direct_distances(const struct pairs *pr, enum tr_dtype compute, double p,
                             char *out, enum tr_dtype dtype)
{
    enum norm how = norm_of(p);
    int64_t ti = (pr->p + TILE_I - 1) / TILE_I, tj = (pr->r + TILE_J - 1) / TILE_J;
    int64_t work = pr->nbatch * ti * tj, item = (int64_t)tr_dtype_size(compute);
    int64_t out_item = (int64_t)tr_dtype_size(dtype);
    double pairs = (double)pr->nbatch * (double)pr->p * (double)pr->r * (double)pr->m;
    bool parallel = work > 1 && pairs > (double)PARALLEL_WORK;

#pragma omp parallel for schedule(dynamic) num_threads(tr__team_size(parallel)) if (parallel)
    for (int64_t w = 0; w < work; w++) {
        int64_t batch = w / (ti * tj), tile = w % (ti * tj), oa, ob;
        int64_t i0 = tile / tj * TILE_I, j0 = tile % tj * TILE_J;
        int64_t mi = pr->p - i0 < TILE_I ? pr->p - i0 : TILE_I;
        int64_t nj = pr->r - j0 < TILE_J ? pr->r - j0 : TILE_J;
        double buf[BLOCK], row[TILE_J];

        tr__mm_batch_offsets(pr->c, pr->nb, pr->a, pr->b, batch, &oa, &ob);
        for (int64_t i = i0; i < i0 + mi; i++) {
            const char *x = pr->a->data + (oa + i * pr->a->rs) * item;
            char *dst = out + ((batch * pr->p + i) * pr->r + j0) * out_item;
            for (int64_t j = j0; j < j0 + nj; j++) {
                const char *y = pr->b->data + (ob + j * pr->b->rs) * item;
                if (compute == TR_DTYPE_F32)
                    ((float *)(void *)row)[j - j0] =
                        dist_f32((const float *)(const void *)x, (const float *)(const void *)y,
                                 pr->m, how, (float)p, (float *)buf);
                else
                    row[j - j0] = dist_f64((const double *)(const void *)x,
                                           (const double *)(const void *)y, pr->m, how, p, buf);
            }
            tr__cpu_cast_row(dst, out_item, dtype, (const char *)row, item, compute, nj);
        }
    }
}

uint64_t tr__cdist_norms_bytes(const struct tr_value *a, const struct tr_value *b,
                               const struct tr_value *c, double p)
{
    int64_t nbatch = 1, rows_a = a->shape[a->ndim - 2], rows_b = b->shape[b->ndim - 2];

    if (!use_product(p, rows_a, rows_b))
        return 0;
    for (int i = 0; i < c->ndim; i++)
        if (c->shape[i] == 0)
            return 0;
    for (int i = 0; i < c->ndim - 2; i++)
        nbatch *= c->shape[i];
    return (uint64_t)(nbatch * (rows_a + rows_b)) * tr_dtype_size(tr__compute_dtype(c->dtype));
}

bool tr__cdist_product(const struct tr_value *a, const struct tr_value *b, double p)
{
    return use_product(p, a->shape[a->ndim - 2], b->shape[b->ndim - 2]);
}

/* cdist through the product: a and b^T prepared for BLAS, the result,
 * the squared norms, then the product with the epilogue. */
static tr_status by_product(const char *name, struct tr_tensor *ta, struct tr_tensor *tb,
                            const struct tr_value *out, const struct tr_dest *dest,
                            enum tr_dtype compute, struct tr_tensor **result)
{
    int nb = out->ndim - 2;
    struct tr__mm_operand a, b;
    struct tr_tensor *bt, *c = NULL, *norms = NULL;
    struct tr__store store;
    struct expansion e;
    struct pairs pr;
    uint64_t bytes;
    tr_status s;

    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    bt = tr_transpose(tb, -2, -1);
    tr_release(tb);
    if (!bt) {
        tr_release(ta);
        return tr_last_status();
    }
    s = tr__mm_prepare(name, &a, ta, true, compute, nb);
    if (s == TR_OK)
        s = tr__mm_prepare(name, &b, bt, false, compute, nb);
    else
        tr_release(bt);
    if (s == TR_OK) {
        c = tr__mm_result(name, out, dest, &a, &b, nb, &store);
        if (!c)
            s = tr_last_status();
    }
    if (s == TR_OK) {
        pr.a = &a;
        pr.b = &b;
        pr.c = c;
        pr.nb = nb;
        pr.p = a.rows;
        pr.r = b.cols;
        pr.m = a.cols;
        pr.nbatch = 1;
        for (int i = 0; i < nb; i++)
            pr.nbatch *= out->shape[i];
        bytes = tr_tensor_numel(c) ? (uint64_t)(pr.nbatch * (pr.p + pr.r)) * tr_dtype_size(compute)
                                   : 0;
        s = tr__scratch_block(name, bytes, c->storage->device, &norms);
    }
    if (s == TR_OK && norms) {
        row_norms(&pr, compute, tr_tensor_data_mut(norms));
        e.compute = compute;
        e.na = tr_tensor_data(norms);
        e.nb = e.na + pr.nbatch * pr.p * (int64_t)tr_dtype_size(compute);
        e.p = pr.p;
        e.r = pr.r;
        s = tr__mm_multiply(name, &a, &b, c, nb, compute, to_distances, &e, &store);
    }
    tr_release(norms);
    tr_release(a.t);
    tr_release(b.t);
    if (s != TR_OK) {
        tr_release(c);
        return s;
    }
    *result = c;
    return TR_OK;
}

/* cdist directly: compact copies of the compute dtype, the result, the
 * distances. */
static tr_status by_pairs(const char *name, struct tr_tensor *ta, struct tr_tensor *tb,
                          const struct tr_value *out, const struct tr_dest *dest,
                          enum tr_dtype compute, double p, struct tr_tensor **result)
{
    struct tr__mm_operand a, b;
    struct tr_tensor *c = NULL;
    struct pairs pr;
    int nb = out->ndim - 2;

    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    a.t = tr_cast(ta, compute);
    b.t = a.t ? tr_cast(tb, compute) : NULL;
    tr_release(ta);
    tr_release(tb);
    if (b.t)
        c = tr__new_result(name, out, out->device, dest);
    if (!c) {
        tr_release(a.t);
        tr_release(b.t);
        return tr_last_status();
    }
    tr__mm_matrix_of(&a, true);
    tr__mm_matrix_of(&b, true); /* b's rows as rows */
    tr__mm_batch_of(&a, nb);
    tr__mm_batch_of(&b, nb);
    pr.a = &a;
    pr.b = &b;
    pr.c = c;
    pr.nb = nb;
    pr.p = a.rows;
    pr.r = b.rows;
    pr.m = a.cols;
    pr.nbatch = 1;
    for (int i = 0; i < nb; i++)
        pr.nbatch *= out->shape[i];
    if (tr_tensor_numel(c) > 0)
        direct_distances(&pr, compute, p, tr_tensor_data_mut(c), c->dtype);
    tr_release(a.t);
    tr_release(b.t);
    *result = c;
    return TR_OK;
}

/* cdist(a, b, p) */
tr_status tr__k_cdist(const struct tr__op *op, const struct tr_arg *args,
                      const struct tr_value *out, const struct tr_dest *dest,
                      struct tr_tensor **results)
{
    const char *name = op->info.name;
    enum tr_dtype compute = tr__compute_dtype(out->dtype);
    double p = tr__number(&args[2].value);
    struct tr_tensor *ta, *tb;
    bool product;

    ta = tr__arg_tensor(&args[0], out->dtype);
    tb = ta ? tr__arg_tensor(&args[1], out->dtype) : NULL;
    if (!tb) {
        tr_release(ta);
        return tr_last_status();
    }
    product = use_product(p, ta->shape[ta->ndim - 2], tb->shape[tb->ndim - 2]);
    if (product)
        return by_product(name, ta, tb, out, dest, compute, results);
    return by_pairs(name, ta, tb, out, dest, compute, p, results);
}

/* ----------------------------------------------------- cosine_similarity */

struct cosine {
    struct tr__iter lines;       /* a's, b's and y's byte strides over the other dims */
    const char *abase, *bbase;
    char *ybase;
    enum tr_dtype adtype, bdtype, ydtype;
    int64_t astep, bstep;        /* bytes between a line's values */
    int64_t len, nlines;
    double eps;
};

/* Line l: three sums in f64 over blocks of the line, then the quotient. */
static void cosine_line(const struct cosine *j, int64_t l)
{
    double a[BLOCK], b[BLOCK];
    struct tree_f64 saa, sbb, sab;
    int64_t off[3];
    double na, nb, r;

    saa.n = sbb.n = sab.n = 0;
    saa.grouped = sbb.grouped = sab.grouped = false;
    saa.total = sbb.total = sab.total = 0;
    tr__iter_offsets(&j->lines, l, off);
    for (int64_t k0 = 0; k0 < j->len; k0 += BLOCK) {
        int64_t n = j->len - k0 < BLOCK ? j->len - k0 : BLOCK;
        tr__cpu_cast_row((char *)a, sizeof(double), TR_DTYPE_F64,
                         j->abase + off[0] + k0 * j->astep, j->astep, j->adtype, n);
        tr__cpu_cast_row((char *)b, sizeof(double), TR_DTYPE_F64,
                         j->bbase + off[1] + k0 * j->bstep, j->bstep, j->bdtype, n);
        tree_add_f64(&saa, sumsq_f64(a, n, 0));
        tree_add_f64(&sbb, sumsq_f64(b, n, 0));
#pragma omp simd
        for (int64_t i = 0; i < n; i++)
            a[i] = a[i] * b[i];
        tree_add_f64(&sab, sum_f64(a, n, 0));
    }
    /* max(norm, eps), NaN staying NaN as clamp_min keeps it */
    na = sqrt(tree_sum_f64(&saa));
    nb = sqrt(tree_sum_f64(&sbb));
    na = na < j->eps ? j->eps : na;
    nb = nb < j->eps ? j->eps : nb;
    r = tree_sum_f64(&sab) / (na * nb);
    tr__cpu_cast_row(j->ybase + off[2], 0, j->ydtype, (const char *)&r, 0, TR_DTYPE_F64, 1);
}

/* cosine_similarity(a, b, dim, eps) */
tr_status tr__k_cosine_similarity(const struct tr__op *op, const struct tr_arg *args,
                                  const struct tr_value *out, const struct tr_dest *dest,
                                  struct tr_tensor **results)
{
    const char *name = op->info.name;
    int64_t shape[TR_MAX_DIMS], as[TR_MAX_DIMS], bs[TR_MAX_DIMS], ys[TR_MAX_DIMS];
    int64_t oshape[TR_MAX_DIMS], oas[TR_MAX_DIMS], obs[TR_MAX_DIMS], oys[TR_MAX_DIMS];
    const int64_t *sp[3] = {oas, obs, oys};
    struct tr_tensor *ta, *tb, *ea = NULL, *eb = NULL, *y = NULL;
    struct cosine j;
    int ndim, d = 0, no = 0;
    tr_status s = TR_OK;
    bool parallel;

    memset(&j, 0, sizeof j);
    ta = tr__arg_tensor(&args[0], tr_value_dtype(&args[0].value));
    tb = ta ? tr__arg_tensor(&args[1], tr_value_dtype(&args[1].value)) : NULL;
    if (!tb) {
        tr_release(ta);
        return tr_last_status();
    }
    /* both broadcast to their common shape (views) */
    ndim = ta->ndim > tb->ndim ? ta->ndim : tb->ndim;
    for (int i = 0; i < ndim; i++) {
        int ia = i - (ndim - ta->ndim), ib = i - (ndim - tb->ndim);
        int64_t da = ia >= 0 ? ta->shape[ia] : 1, db = ib >= 0 ? tb->shape[ib] : 1;
        shape[i] = da == 1 ? db : da;
    }
    ea = tr_expand(ta, shape, ndim);
    eb = ea ? tr_expand(tb, shape, ndim) : NULL;
    if (eb && ndim > 0)
        s = tr__normalize_dim(name, (int)args[2].value.integer, ndim, &d);
    if (eb && s == TR_OK)
        y = tr__new_result(name, out, out->device, dest);
    if (!eb || (s == TR_OK && !y))
        s = tr_last_status();
    if (s == TR_OK && tr_tensor_numel(y) > 0) {
        tr__byte_strides(ea, as);
        tr__byte_strides(eb, bs);
        tr__byte_strides(y, ys);
        j.len = 1;
        for (int i = 0, k = 0; i < ndim; i++) {
            if (i == d) {
                j.len = shape[i];
                j.astep = as[i];
                j.bstep = bs[i];
                continue;
            }
            oshape[no] = shape[i];
            oas[no] = as[i];
            obs[no] = bs[i];
            oys[no++] = ys[k++];
        }
        tr__iter_init(&j.lines, no, oshape, 3, sp);
        j.nlines = tr__iter_count(&j.lines);
        j.abase = tr_tensor_data(ea);
        j.bbase = tr_tensor_data(eb);
        j.ybase = tr_tensor_data_mut(y);
        j.adtype = ea->dtype;
        j.bdtype = eb->dtype;
        j.ydtype = y->dtype;
        j.eps = tr__number(&args[3].value);
        parallel = j.nlines > 1 && j.nlines * (j.len ? j.len : 1) > PARALLEL_WORK;
#pragma omp parallel for schedule(static) num_threads(tr__team_size(parallel)) if (parallel)
        for (int64_t l = 0; l < j.nlines; l++)
            cosine_line(&j, l);
    }
    tr_release(eb);
    tr_release(ea);
    tr_release(tb);
    tr_release(ta);
    if (s != TR_OK) {
        tr_release(y);
        return s;
    }
    results[0] = y;
    return TR_OK;
}
