/*
 * reduce_body.h - the module's reductions (struct tr_cuda_reduce), one
 * value, one thread and one tree at a time: written once for the GPU
 * kernels (cuda/reduce.cu) and the host stand-in of the tests.  Plain C
 * that nvcc also compiles as device code.
 *
 * The order is fixed by n alone.  An output's n values are dealt to G
 * groups (tr__cuda_reduce_groups) of TR__CUDA_REDUCE_THREADS threads: the
 * thread u = g * THREADS + t of the output takes values u, u + G * THREADS,
 * ...; a group's threads are then merged in a tree (stride THREADS / 2,
 * then half that, ...), and the groups' results in a second tree (pairs at
 * distance 1, 2, 4, ...).  Whatever the launch, every merge is the same.
 *
 * Sums of floats accumulate in f64 with Neumaier's compensation, so that
 * the result is within an f64 rounding or two of the exact sum before it
 * is rounded to the result; integer sums wrap.  max, min, argmax and
 * argmin keep the first NaN, else the first extreme, as the CPU's do: each
 * candidate carries its position, and a tie goes to the lower one.
 */
#ifndef TR_CUDA_REDUCE_BODY_H
#define TR_CUDA_REDUCE_BODY_H

#include "map_body.h"

#define TR__CUDA_REDUCE_THREADS 256

/* An output's partial result. */
struct tr__cuda_acc {
    double s, c;             /* a float sum: s + c (Neumaier) */
    uint64_t u;              /* an integer sum, wrapping */
    union tr__cuda_value v;  /* an extreme, of the compute dtype */
    int64_t index;           /* its position among the n */
    int state;               /* 0: no value yet, 1: a value, 2: NaN */
};

/* Groups per output: one for up to 16384 values, then one per 16384, at
 * most 1024. */
TR_HD static inline int64_t tr__cuda_reduce_groups(int64_t n)
{
    int64_t g = n / 16384;

    return g < 1 ? 1 : g > 1024 ? 1024 : g;
}

TR_HD static inline void tr__cuda_acc_init(struct tr__cuda_acc *a)
{
    memset(a, 0, sizeof *a);
}

TR_HD static inline void tr__cuda_neumaier(struct tr__cuda_acc *a, double x)
{
    double t = a->s + x;

    if (fabs(a->s) >= fabs(x))
        a->c += (a->s - t) + x;
    else
        a->c += (x - t) + a->s;
    a->s = t;
}

TR_HD static inline bool tr__cuda_is_nan(int compute, const union tr__cuda_value *v)
{
    return compute == TR_DTYPE_F32 ? v->f32 != v->f32
           : compute == TR_DTYPE_F64 ? v->f64 != v->f64
                                     : false;
}

/* -1, 0 or 1 as a is below, equal to or above b (neither NaN). */
TR_HD static inline int tr__cuda_order(int compute, const union tr__cuda_value *a,
                                       const union tr__cuda_value *b)
{
    switch (compute) {
    case TR_DTYPE_F32: return (a->f32 > b->f32) - (a->f32 < b->f32);
    case TR_DTYPE_F64: return (a->f64 > b->f64) - (a->f64 < b->f64);
    case TR_DTYPE_U64: return (a->u64 > b->u64) - (a->u64 < b->u64);
    default: return (a->i64 > b->i64) - (a->i64 < b->i64);
    }
}

/* Whether candidate c takes the place of a's extreme. */
TR_HD static inline bool tr__cuda_better(const struct tr_cuda_reduce *r,
                                         const struct tr__cuda_acc *c,
                                         const struct tr__cuda_acc *a)
{
    bool wants_max = r->kind == TR_CUDA_MAX || r->kind == TR_CUDA_ARGMAX;
    int o;

    if (c->state == 0)
        return false;
    if (a->state == 0)
        return true;
    if (c->state == 2 || a->state == 2)
        return c->state == 2 && (a->state != 2 || c->index < a->index);
    o = tr__cuda_order(r->in_compute, &c->v, &a->v);
    return (wants_max ? o > 0 : o < 0) || (o == 0 && c->index < a->index);
}

/* Value v (of in_compute), the j-th of its output, into a. */
TR_HD static inline void tr__cuda_reduce_add(const struct tr_cuda_reduce *r,
                                             struct tr__cuda_acc *a,
                                             const union tr__cuda_value *v, int64_t j)
{
    struct tr__cuda_acc c;
    double x;

    switch (r->kind) {
    case TR_CUDA_SUM:
    case TR_CUDA_MEAN:
        if (r->in_compute == TR_DTYPE_F32)
            tr__cuda_neumaier(a, (double)v->f32);
        else if (r->in_compute == TR_DTYPE_F64)
            tr__cuda_neumaier(a, v->f64);
        else
            a->u += v->u64;
        return;
    case TR_CUDA_NORM: /* in f64 */
        x = fabs(v->f64);
        if (isinf(r->ord)) {
            a->state = a->state == 2 || x != x ? 2 : 1;
            a->s = x > a->s ? x : a->s;
        } else {
            tr__cuda_neumaier(a, r->ord == 1 ? x : r->ord == 2 ? x * x : pow(x, r->ord));
        }
        return;
    default:
        c.v = *v;
        c.index = j;
        c.state = tr__cuda_is_nan(r->in_compute, v) ? 2 : 1;
        if (tr__cuda_better(r, &c, a)) {
            a->v = c.v;
            a->index = c.index;
            a->state = c.state;
        }
        return;
    }
}

/* b's values into a's. */
TR_HD static inline void tr__cuda_reduce_merge(const struct tr_cuda_reduce *r,
                                               struct tr__cuda_acc *a,
                                               const struct tr__cuda_acc *b)
{
    switch (r->kind) {
    case TR_CUDA_SUM:
    case TR_CUDA_MEAN:
    case TR_CUDA_NORM:
        if (r->kind == TR_CUDA_NORM && isinf(r->ord)) {
            a->state = a->state == 2 || b->state == 2 ? 2 : a->state | b->state;
            a->s = b->s > a->s ? b->s : a->s;
            return;
        }
        tr__cuda_neumaier(a, b->s);
        a->c += b->c;
        a->u += b->u;
        return;
    default:
        if (tr__cuda_better(r, b, a))
            *a = *b;
        return;
    }
}

/* Thread u of U (the output's threads) over output o's values. */
TR_HD static inline void tr__cuda_reduce_thread(const struct tr_cuda_reduce *r, int64_t o,
                                                int64_t u, int64_t U, struct tr__cuda_acc *a)
{
    const char *base = (const char *)r->x + tr__cuda_offset(r->nkept, r->kept_shape,
                                                            r->kept_strides, o);
    union tr__cuda_value v;

    tr__cuda_acc_init(a);
    for (int64_t j = u; j < r->n; j += U) {
        const char *src = base + tr__cuda_offset(r->nreduced, r->reduced_shape,
                                                 r->reduced_strides, j);
        tr__convert_value(&v, (enum tr_dtype)r->in_compute, src, (enum tr_dtype)r->x_dtype);
        tr__cuda_reduce_add(r, a, &v, j);
    }
}

/* The finished value of a, output o, stored in the result. */
TR_HD static inline void tr__cuda_reduce_finish(const struct tr_cuda_reduce *r,
                                                const struct tr__cuda_acc *a, int64_t o)
{
    char *dst = (char *)r->out + o * tr__item_size(r->out_dtype);
    double s = isfinite(a->s) ? a->s + a->c : a->s;
    union tr__cuda_value f;
    int fin = r->in_compute;

    switch (r->kind) {
    case TR_CUDA_SUM:
    case TR_CUDA_MEAN:
        if (r->in_compute == TR_DTYPE_F32)
            f.f32 = r->kind == TR_CUDA_MEAN ? (float)s / (float)r->n : (float)s;
        else if (r->in_compute == TR_DTYPE_F64)
            f.f64 = r->kind == TR_CUDA_MEAN ? s / (double)r->n : s;
        else
            f.u64 = a->u;
        break;
    case TR_CUDA_NORM:
        fin = TR_DTYPE_F64;
        if (isinf(r->ord))
            f.f64 = a->state == 2 ? (double)NAN : a->s;
        else
            f.f64 = r->ord == 1 ? s : r->ord == 2 ? sqrt(s) : pow(s, 1.0 / r->ord);
        break;
    case TR_CUDA_ARGMAX:
    case TR_CUDA_ARGMIN:
        fin = TR_DTYPE_I64;
        f.i64 = a->index;
        break;
    default:
        if (a->state != 0)
            f = a->v;
        else if (r->in_compute == TR_DTYPE_F32) /* no values: the CPU's identities */
            f.f32 = r->kind == TR_CUDA_MAX ? -INFINITY : INFINITY;
        else if (r->in_compute == TR_DTYPE_F64)
            f.f64 = r->kind == TR_CUDA_MAX ? -INFINITY : INFINITY;
        else
            f.u64 = 0;
        break;
    }
    tr__convert_value(dst, (enum tr_dtype)r->out_dtype, &f, (enum tr_dtype)fin);
}

/* One step of the tree over a group's THREADS partials: stride s (THREADS
 * / 2, then half of that, ... 1), thread t; after the last, p[0] holds the
 * group's result.  (On the GPU the steps are a barrier apart.) */
TR_HD static inline void tr__cuda_reduce_step(const struct tr_cuda_reduce *r,
                                              struct tr__cuda_acc *p, int s, int t)
{
    if (t < s)
        tr__cuda_reduce_merge(r, &p[t], &p[t + s]);
}

/* The tree over an output's G group results, into p[0]. */
TR_HD static inline void tr__cuda_reduce_group_tree(const struct tr_cuda_reduce *r,
                                                    struct tr__cuda_acc *p, int64_t G)
{
    for (int64_t s = 1; s < G; s *= 2)
        for (int64_t i = 0; i + s < G; i += 2 * s)
            tr__cuda_reduce_merge(r, &p[i], &p[i + s]);
}

#endif /* TR_CUDA_REDUCE_BODY_H */
