/*
 * cpu/quantile.c - median and quantile along one dimension, or over the
 * whole tensor: each output's values are copied into a thread's room and
 * the order statistics asked for are selected there (quickselect, with a
 * sort of what is left when a pivot keeps choosing badly), never by a
 * sort of the whole line.  The values are compared as themselves (f16 and
 * bf16 as f32, integers as 64-bit integers), so the selection is exact.
 *
 * When neighbouring outputs lie closer in memory than the values of one
 * output (a median over dim 0 of a C-order matrix), TILE outputs are read
 * together, row by row, so that memory is read in runs rather than one
 * value per cache line.  Outputs are independent, so the bits do not
 * depend on the thread count.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels.h"
#include "../scratch_impl.h"
#include "reduce_impl.h"

/* Outputs read together when their values are further apart than they. */
#define TILE 64
/* Below this many values the work runs on the calling thread. */
#define PARALLEL_ELEMENTS 32768

/* The dtype values are selected in: exact and order-preserving for x's. */
static enum tr_dtype select_dtype(enum tr_dtype d)
{
    if (d == TR_DTYPE_F64)
        return TR_DTYPE_F64;
    return tr_dtype_is_float(d) ? TR_DTYPE_F32 : tr__compute_dtype(d);
}

/* How the outputs' values lie: n values a stride of step bytes apart for
 * each output; outputs as outer x inner, inner ones `inner_step` apart;
 * `all` when the values are the whole tensor (one output). */
struct geometry {
    bool all;
    int64_t n, nout, inner, chunks, nunits, tile;
    int64_t step, inner_step;
    struct tr__iter outer;  /* the kept dimensions but the innermost */
    struct tr__iter whole;  /* all of x, for `all` */
};

static void geometry_of(struct geometry *g, int ndim, const int64_t *shape,
                        const int64_t *strides, int dim)
{
    int64_t oshape[TR_MAX_DIMS], ostrides[TR_MAX_DIMS];
    const int64_t *sp[1] = {ostrides};
    int no = 0;

    memset(g, 0, sizeof *g);
    g->all = dim < 0;
    g->n = 1;
    g->inner = 1;
    if (g->all) {
        const int64_t *wp[1] = {strides};
        for (int i = 0; i < ndim; i++)
            g->n *= shape[i];
        tr__iter_init(&g->whole, ndim, shape, 1, wp);
    } else {
        for (int i = 0; i < ndim; i++) {
            if (i == dim) {
                g->n = shape[i];
                g->step = strides[i];
                continue;
            }
            oshape[no] = shape[i];
            ostrides[no++] = strides[i];
        }
        if (no > 0) {
            g->inner = oshape[no - 1];
            g->inner_step = ostrides[no - 1];
            no--;
        }
    }
    tr__iter_init(&g->outer, no, oshape, 1, sp);
    g->nout = tr__iter_count(&g->outer) * g->inner;
    g->tile = !g->all && g->n > 1 && g->inner > 1 && llabs(g->inner_step) < llabs(g->step)
                  ? TILE
                  : 1;
    g->chunks = (g->inner + g->tile - 1) / g->tile;
    g->nunits = g->nout ? tr__iter_count(&g->outer) * g->chunks : 0;
}

static bool parallel(const struct geometry *g)
{
    return g->nunits > 1 && g->nout * g->n > PARALLEL_ELEMENTS;
}

/* The room of one thread, and of the team. */
static uint64_t thread_room(const struct geometry *g, enum tr_dtype x)
{
    return (uint64_t)g->tile * (uint64_t)g->n * tr_dtype_size(select_dtype(x));
}

uint64_t tr__quantile_scratch(const struct tr_value *x, const struct tr_value *dim, int threads)
{
    int64_t strides[TR_MAX_DIMS];
    struct geometry g;
    int d = -1;

    if (dim->kind == TR_VALUE_INT && x->ndim > 0)
        d = (int)(dim->integer < 0 ? dim->integer + x->ndim : dim->integer);
    tr__value_byte_strides(x, strides);
    geometry_of(&g, x->ndim, x->shape, strides, d);
    if (g.nout == 0 || g.n == 0)
        return 0;
    return (parallel(&g) ? (uint64_t)threads : 1) * thread_room(&g, x->dtype);
}

/* --------------------------------------------------------- selection */

/* a[k] once a is partly ordered: nothing before k is greater, nothing
 * after it smaller.  Hoare's partition around a median of three; after
 * `limit` rounds what is left is sorted instead, so that no input makes
 * it quadratic. */
#define SELECT(name, T)                                                      \
    static int cmp_##name(const void *p, const void *q)                      \
    {                                                                        \
        T a = *(const T *)p, b = *(const T *)q;                              \
        return (a > b) - (a < b);                                            \
    }                                                                        \
    static T name(T *a, int64_t n, int64_t k)                                \
    {                                                                        \
        int64_t lo = 0, hi = n - 1;                                          \
        int rounds = 0, limit = 8;                                           \
        for (int64_t m = n; m > 1; m >>= 1)                                  \
            limit += 2;                                                      \
        while (lo < hi) {                                                    \
            int64_t mid = lo + (hi - lo) / 2, i = lo, j = hi;                \
            T x = a[lo], y = a[mid], z = a[hi], p;                           \
            if (rounds++ > limit) {                                          \
                qsort(a + lo, (size_t)(hi - lo + 1), sizeof *a, cmp_##name);  \
                break;                                                       \
            }                                                                \
            p = x < y ? (y < z ? y : x < z ? z : x) : (x < z ? x : y < z ? z : y); \
            while (i <= j) {                                                 \
                while (a[i] < p)                                             \
                    i++;                                                     \
                while (a[j] > p)                                             \
                    j--;                                                     \
                if (i <= j) {                                                \
                    T t = a[i];                                              \
                    a[i++] = a[j];                                           \
                    a[j--] = t;                                              \
                }                                                            \
            }                                                                \
            if (k <= j)                                                      \
                hi = j;                                                      \
            else if (k >= i)                                                 \
                lo = i;                                                      \
            else                                                             \
                break; /* between j and i: equal to the pivot */             \
        }                                                                    \
        return a[k];                                                         \
    }                                                                        \
    /* the smallest of a[k + 1 ..] after name(a, n, k): statistic k + 1 */   \
    static T name##_next(const T *a, int64_t n, int64_t k)                   \
    {                                                                        \
        T m = a[k + 1];                                                      \
        for (int64_t i = k + 2; i < n; i++)                                  \
            m = a[i] < m ? a[i] : m;                                         \
        return m;                                                            \
    }

SELECT(select_f32, float)
SELECT(select_f64, double)
SELECT(select_i64, int64_t)
SELECT(select_u64, uint64_t)

/* Statistics lo and lo + 1 (hi) of the n values at a, as doubles (exact
 * for floats; integers past 2^53 are rounded only here, for the
 * interpolation); *nan when a value is NaN, which every statistic then is. */
static void order_stats(enum tr_dtype c, void *a, int64_t n, int64_t lo, bool want_hi,
                        double *vlo, double *vhi)
{
    switch (c) {
    case TR_DTYPE_F32:
        *vlo = select_f32(a, n, lo);
        *vhi = want_hi ? select_f32_next(a, n, lo) : *vlo;
        break;
    case TR_DTYPE_F64:
        *vlo = select_f64(a, n, lo);
        *vhi = want_hi ? select_f64_next(a, n, lo) : *vlo;
        break;
    case TR_DTYPE_U64:
        *vlo = (double)select_u64(a, n, lo);
        *vhi = want_hi ? (double)select_u64_next(a, n, lo) : *vlo;
        break;
    default:
        *vlo = (double)select_i64(a, n, lo);
        *vhi = want_hi ? (double)select_i64_next(a, n, lo) : *vlo;
        break;
    }
}

static bool has_nan(enum tr_dtype c, const void *a, int64_t n)
{
    if (c == TR_DTYPE_F32) {
        const float *f = a;
        for (int64_t i = 0; i < n; i++)
            if (f[i] != f[i])
                return true;
    } else if (c == TR_DTYPE_F64) {
        const double *f = a;
        for (int64_t i = 0; i < n; i++)
            if (f[i] != f[i])
                return true;
    }
    return false;
}

/* The median's value itself, in the select dtype, at out. */
static void median_of(enum tr_dtype c, void *a, int64_t n, char *out)
{
    int64_t k = (n - 1) / 2; /* the lower of the two middle values */

    switch (c) {
    case TR_DTYPE_F32: {
        float v = has_nan(c, a, n) ? NAN : select_f32(a, n, k);
        memcpy(out, &v, sizeof v);
        break;
    }
    case TR_DTYPE_F64: {
        double v = has_nan(c, a, n) ? NAN : select_f64(a, n, k);
        memcpy(out, &v, sizeof v);
        break;
    }
    case TR_DTYPE_U64: {
        uint64_t v = select_u64(a, n, k);
        memcpy(out, &v, sizeof v);
        break;
    }
    default: {
        int64_t v = select_i64(a, n, k);
        memcpy(out, &v, sizeof v);
        break;
    }
    }
}

enum interpolation { I_LINEAR, I_LOWER, I_HIGHER, I_NEAREST, I_MIDPOINT };

static enum interpolation interpolation_of(const char *s)
{
    static const char *const names[] = {"linear", "lower", "higher", "nearest", "midpoint"};

    for (int i = 0; i < 5; i++)
        if (strcmp(s, names[i]) == 0)
            return (enum interpolation)i;
    return I_LINEAR;
}

/* PyTorch's lerp: from the nearer end, so that weight 1 gives b exactly. */
static double lerp(double a, double b, double w)
{
    return w < 0.5 ? a + w * (b - a) : b - (b - a) * (1 - w);
}

/* Quantile q of the n values at a (NumPy's and PyTorch's positions:
 * q * (n - 1) between the order statistics). */
static double quantile_of(enum tr_dtype c, void *a, int64_t n, double q, enum interpolation how)
{
    double pos = q * (double)(n - 1), vlo, vhi, w;
    int64_t lo = (int64_t)floor(pos);

    if (has_nan(c, a, n))
        return NAN;
    if (lo > n - 1)
        lo = n - 1;
    w = pos - (double)lo;
    switch (how) {
    case I_LOWER:
        order_stats(c, a, n, lo, false, &vlo, &vhi);
        return vlo;
    case I_HIGHER:
        order_stats(c, a, n, w > 0 ? lo + 1 : lo, false, &vlo, &vhi);
        return vlo;
    case I_NEAREST:
        order_stats(c, a, n, (int64_t)nearbyint(pos), false, &vlo, &vhi);
        return vlo;
    default:
        order_stats(c, a, n, lo, w > 0 && lo + 1 < n, &vlo, &vhi);
        return lerp(vlo, vhi, how == I_MIDPOINT ? (w > 0 ? 0.5 : 0) : w);
    }
}

/* --------------------------------------------------------------- kernel */

/* Item k of the q argument: a number, or one of a list. */
static double q_at(const struct tr_arg *q, int64_t k)
{
    if (q->value.kind != TR_VALUE_LIST)
        return tr__number(&q->value);
    return q->items ? tr__number(&q->items[k].value) : tr__number(&q->value.items[k]);
}

/* median(x, dim, keepdim) and quantile(x, q, dim, keepdim, interpolation). */
tr_status tr__k_quantile(const struct tr__op *op, const struct tr_arg *args,
                         const struct tr_value *out, const struct tr_dest *dest,
                         struct tr_tensor **results)
{
    const char *name = op->info.name;
    bool median = op->info.id == TR_OP_MEDIAN;
    const struct tr_arg *dim = &args[median ? 1 : 2], *q = median ? NULL : &args[1];
    enum interpolation how = median ? I_LOWER : interpolation_of(args[4].value.string);
    int64_t nq = q && q->value.kind == TR_VALUE_LIST ? (int64_t)q->value.count : 1;
    struct tr_tensor *x, *y = NULL, *room = NULL;
    enum tr_dtype c, res;
    int64_t strides[TR_MAX_DIMS];
    struct geometry g;
    size_t csize, rsize, ysize;
    int d = -1, team;
    const char *xbase;
    char *ybase, *rbase;
    tr_status s = TR_OK;

    x = tr__arg_tensor(&args[0], tr_value_dtype(&args[0].value));
    if (!x)
        return tr_last_status();
    if (dim->value.kind == TR_VALUE_INT && x->ndim > 0)
        s = tr__normalize_dim(name, (int)dim->value.integer, x->ndim, &d);
    if (s == TR_OK) {
        y = tr__new_result(name, out, x->storage->device, dest);
        if (!y)
            s = tr_last_status();
    }
    if (s != TR_OK)
        goto done;
    tr__byte_strides(x, strides);
    geometry_of(&g, x->ndim, x->shape, strides, d);
    if (g.nout == 0)
        goto done;
    c = select_dtype(x->dtype);
    res = median ? c : TR_DTYPE_F64;
    csize = tr_dtype_size(c);
    rsize = tr_dtype_size(res);
    ysize = tr_dtype_size(y->dtype);
    team = parallel(&g) ? tr__team_size(true) : 1;
    s = tr__scratch_block(name, (uint64_t)team * thread_room(&g, x->dtype), x->storage->device,
                          &room);
    if (s != TR_OK)
        goto done;
    xbase = tr_tensor_data(x);
    ybase = tr_tensor_data_mut(y);
    rbase = tr_tensor_data_mut(room);

#pragma omp parallel num_threads(team) if (team > 1)
    {
        char *buf = rbase + (uint64_t)tr__team_index() * thread_room(&g, x->dtype);
        _Alignas(8) char vals[TILE * 8];

#pragma omp for schedule(dynamic, 1)
        for (int64_t u = 0; u < g.nunits; u++) {
            int64_t o = u / g.chunks, i0 = (u % g.chunks) * g.tile, off[1] = {0};
            int64_t cnt = g.inner - i0 < g.tile ? g.inner - i0 : g.tile, l0 = o * g.inner + i0;
            const char *base;

            tr__iter_offsets(&g.outer, o, off);
            base = xbase + off[0] + i0 * g.inner_step;
            if (g.all) {
                int last = g.whole.ndim - 1;
                int64_t len = g.whole.shape[last], step = g.whole.strides[0][last], row_off[1];
                for (int64_t r = 0; r < tr__iter_rows(&g.whole); r++) {
                    tr__iter_row_offsets(&g.whole, r, row_off);
                    tr__cpu_cast_row(buf + r * len * (int64_t)csize, (int64_t)csize, c,
                                     xbase + row_off[0], step, x->dtype, len);
                }
            } else if (cnt == 1) {
                tr__cpu_cast_row(buf, (int64_t)csize, c, base, g.step, x->dtype, g.n);
            } else {
                /* row j of the tile: value j of cnt outputs, to cnt lines */
                for (int64_t j = 0; j < g.n; j++)
                    tr__cpu_cast_row(buf + j * (int64_t)csize, g.n * (int64_t)csize, c,
                                     base + j * g.step, g.inner_step, x->dtype, cnt);
            }
            for (int64_t k = 0; k < nq; k++) {
                for (int64_t t = 0; t < cnt; t++) {
                    char *a = buf + t * g.n * (int64_t)csize;
                    if (median) {
                        median_of(c, a, g.n, vals + t * (int64_t)rsize);
                    } else {
                        double v = quantile_of(c, a, g.n, q_at(q, k), how);
                        memcpy(vals + t * (int64_t)rsize, &v, sizeof v);
                    }
                }
                tr__cpu_cast_row(ybase + (k * g.nout + l0) * (int64_t)ysize, (int64_t)ysize,
                                 y->dtype, vals, (int64_t)rsize, res, cnt);
            }
        }
    }
done:
    tr_release(room);
    tr_release(x);
    if (s != TR_OK) {
        tr_release(y);
        return s;
    }
    results[0] = y;
    return TR_OK;
}
