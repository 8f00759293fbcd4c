/*
 * rowwise_body.h - the module's row-wise ops (struct tr_cuda_rowwise), one
 * line by TR__CUDA_ROW_THREADS threads: written once for the GPU kernel
 * (cuda/rowwise.cu) and the host stand-in of the tests.  Plain C that nvcc
 * also compiles as device code.
 *
 * Thread t of a line takes its values t, t + THREADS, ...; a pass's
 * partials (a maximum, or an f64 sum with Neumaier's compensation) are
 * merged in the tree of reduce_body.h, so the order depends on len alone.
 * The formulas are the CPU's (cpu/nn.c): softmax is e^(x - max) times
 * 1 / sum, log_softmax (x - max) - log(sum), l2_normalize x / max(norm,
 * eps), layer_norm (x - mean) * rstd * weight + bias, rms_norm x * rstd *
 * weight; each in the compute dtype but the sums.
 */
#ifndef TR_CUDA_ROWWISE_BODY_H
#define TR_CUDA_ROWWISE_BODY_H

#include "reduce_body.h"

#define TR__CUDA_ROW_THREADS 256

/* A pass's partial: a running maximum (NaN winning) or an f64 sum. */
struct tr__cuda_row_acc {
    double s, c;
    int nan;
};

/* Value i of line l (offset base: the line's start) as compute. */
TR_HD static inline double tr__cuda_row_value(const struct tr_cuda_rowwise *w, const char *base,
                                              int64_t i)
{
    union tr__cuda_value v;

    tr__convert_value(&v, (enum tr_dtype)w->compute, base + i * w->x_step,
                      (enum tr_dtype)w->x_dtype);
    return w->compute == TR_DTYPE_F32 ? (double)v.f32 : v.f64;
}

/* A value of the compute dtype, rounded to it. */
TR_HD static inline double tr__cuda_row_round(const struct tr_cuda_rowwise *w, double v)
{
    return w->compute == TR_DTYPE_F32 ? (double)(float)v : v;
}

/* Element i of a weight or bias, as compute. */
TR_HD static inline double tr__cuda_row_vector(const struct tr_cuda_rowwise *w,
                                               const struct tr_cuda_operand *o, int64_t i)
{
    const void *src = o->data ? (const void *)((const char *)o->data + i * o->strides[0])
                              : (const void *)o->value;
    union tr__cuda_value v;

    tr__convert_value(&v, (enum tr_dtype)w->compute, src, (enum tr_dtype)o->dtype);
    return w->compute == TR_DTYPE_F32 ? (double)v.f32 : v.f64;
}

/* The byte offsets of line l in x and y. */
TR_HD static inline void tr__cuda_row_offsets(const struct tr_cuda_rowwise *w, int64_t l,
                                              int64_t *xo, int64_t *yo)
{
    *xo = tr__cuda_offset(w->nother, w->other_shape, w->x_strides, l);
    *yo = tr__cuda_offset(w->nother, w->other_shape, w->y_strides, l);
}

/* Thread t's partial of pass (0: the maximum or the first sum; 1: the
 * second sum, given the first pass's result p). */
TR_HD static inline void tr__cuda_row_partial(const struct tr_cuda_rowwise *w, const char *x,
                                              int pass, double p, int t,
                                              struct tr__cuda_row_acc *a)
{
    struct tr__cuda_acc sum;
    bool softmax = w->kind == TR_CUDA_SOFTMAX || w->kind == TR_CUDA_LOG_SOFTMAX;

    a->s = a->c = 0;
    a->nan = 0;
    if (softmax && pass == 0) {
        a->s = -INFINITY;
        for (int64_t i = t; i < w->len; i += TR__CUDA_ROW_THREADS) {
            double v = tr__cuda_row_value(w, x, i);
            a->nan |= v != v;
            a->s = v > a->s ? v : a->s;
        }
        return;
    }
    tr__cuda_acc_init(&sum);
    for (int64_t i = t; i < w->len; i += TR__CUDA_ROW_THREADS) {
        double v = tr__cuda_row_value(w, x, i), e;
        float d;
        if (softmax) { /* pass 1: e^(x - max) in the compute dtype */
            e = w->compute == TR_DTYPE_F32 ? (double)expf((float)v - (float)p) : exp(v - p);
        } else if (w->kind == TR_CUDA_LAYER_NORM && pass == 0) {
            e = v;
        } else if (w->kind == TR_CUDA_LAYER_NORM) { /* pass 1: (x - mean)^2 */
            d = (float)v - (float)p;
            e = w->compute == TR_DTYPE_F32 ? (double)(d * d) : (v - p) * (v - p);
        } else {
            e = v * v;
        }
        tr__cuda_neumaier(&sum, e);
    }
    a->s = sum.s;
    a->c = sum.c;
}

/* b into a: the larger (NaN winning) for a softmax's pass 0, else the sum. */
TR_HD static inline void tr__cuda_row_merge(const struct tr_cuda_rowwise *w, int pass,
                                            struct tr__cuda_row_acc *a,
                                            const struct tr__cuda_row_acc *b)
{
    struct tr__cuda_acc sum;

    if ((w->kind == TR_CUDA_SOFTMAX || w->kind == TR_CUDA_LOG_SOFTMAX) && pass == 0) {
        a->nan |= b->nan;
        a->s = b->s > a->s ? b->s : a->s;
        return;
    }
    sum.s = a->s;
    sum.c = a->c;
    tr__cuda_neumaier(&sum, b->s);
    a->s = sum.s;
    a->c = sum.c + b->c;
}

/* A merged pass's value: the maximum (NaN if any), or the sum. */
TR_HD static inline double tr__cuda_row_total(const struct tr_cuda_rowwise *w, int pass,
                                              const struct tr__cuda_row_acc *a)
{
    if ((w->kind == TR_CUDA_SOFTMAX || w->kind == TR_CUDA_LOG_SOFTMAX) && pass == 0)
        return a->nan ? (double)NAN : a->s;
    return isfinite(a->s) ? a->s + a->c : a->s;
}

/* What pass 1 is given: softmax's maximum, layer_norm's mean. */
TR_HD static inline double tr__cuda_row_between(const struct tr_cuda_rowwise *w,
                                                const double *totals)
{
    if (w->kind == TR_CUDA_LAYER_NORM)
        return tr__cuda_row_round(w, tr__cuda_row_round(w, totals[0]) / (double)w->len);
    return totals[0];
}

/* How many passes w takes before its results. */
TR_HD static inline int tr__cuda_row_passes(const struct tr_cuda_rowwise *w)
{
    return w->kind == TR_CUDA_L2_NORMALIZE || w->kind == TR_CUDA_RMS_NORM ? 1 : 2;
}

/* What the results need from the passes' totals: the values the CPU keeps
 * (the maximum and 1 / sum or log(sum); the norm; the mean and rstd), each
 * rounded to the compute dtype as it would be there.  k[0], k[1]. */
TR_HD static inline void tr__cuda_row_finish(const struct tr_cuda_rowwise *w,
                                             const double *totals, double *k)
{
    bool f32 = w->compute == TR_DTYPE_F32;
    double n = (double)w->len, d;

    switch (w->kind) {
    case TR_CUDA_SOFTMAX:
    case TR_CUDA_LOG_SOFTMAX:
        k[0] = totals[0];
        d = tr__cuda_row_round(w, totals[1]);
        k[1] = w->kind == TR_CUDA_SOFTMAX ? (f32 ? (double)(1.0f / (float)d) : 1.0 / d)
                                          : (f32 ? (double)logf((float)d) : log(d));
        break;
    case TR_CUDA_L2_NORMALIZE: /* max(norm, eps), NaN staying NaN */
        d = tr__cuda_row_round(w, sqrt(totals[0]));
        k[0] = d < tr__cuda_row_round(w, w->eps) ? tr__cuda_row_round(w, w->eps) : d;
        break;
    case TR_CUDA_LAYER_NORM:
        k[0] = tr__cuda_row_round(w, tr__cuda_row_round(w, totals[0]) / n);
        d = tr__cuda_row_round(w, tr__cuda_row_round(w, totals[1]) / n);
        k[1] = f32 ? (double)(1.0f / sqrtf((float)d + (float)w->eps)) : 1.0 / sqrt(d + w->eps);
        break;
    default: /* rms_norm */
        d = tr__cuda_row_round(w, tr__cuda_row_round(w, totals[0]) / n);
        k[1] = f32 ? (double)(1.0f / sqrtf((float)d + (float)w->eps)) : 1.0 / sqrt(d + w->eps);
        break;
    }
}

/* Result i of the line at x (into y), given k of tr__cuda_row_finish. */
TR_HD static inline void tr__cuda_row_result(const struct tr_cuda_rowwise *w, const char *x,
                                             char *y, int64_t i, const double *k)
{
    double v = tr__cuda_row_value(w, x, i), r;
    float f;

    if (w->compute == TR_DTYPE_F32) {
        float xv = (float)v;
        switch (w->kind) {
        case TR_CUDA_SOFTMAX: f = expf(xv - (float)k[0]) * (float)k[1]; break;
        case TR_CUDA_LOG_SOFTMAX: f = (xv - (float)k[0]) - (float)k[1]; break;
        case TR_CUDA_L2_NORMALIZE: f = xv / (float)k[0]; break;
        case TR_CUDA_LAYER_NORM:
            f = (xv - (float)k[0]) * (float)k[1];
            if (w->weight.dtype >= 0)
                f = f * (float)tr__cuda_row_vector(w, &w->weight, i);
            if (w->bias.dtype >= 0)
                f = f + (float)tr__cuda_row_vector(w, &w->bias, i);
            break;
        default:
            f = xv * (float)k[1];
            if (w->weight.dtype >= 0)
                f = f * (float)tr__cuda_row_vector(w, &w->weight, i);
            break;
        }
        tr__convert_value(y + i * w->y_step, (enum tr_dtype)w->y_dtype, &f, TR_DTYPE_F32);
        return;
    }
    switch (w->kind) {
    case TR_CUDA_SOFTMAX: r = exp(v - k[0]) * k[1]; break;
    case TR_CUDA_LOG_SOFTMAX: r = (v - k[0]) - k[1]; break;
    case TR_CUDA_L2_NORMALIZE: r = v / k[0]; break;
    case TR_CUDA_LAYER_NORM:
        r = (v - k[0]) * k[1];
        if (w->weight.dtype >= 0)
            r = r * tr__cuda_row_vector(w, &w->weight, i);
        if (w->bias.dtype >= 0)
            r = r + tr__cuda_row_vector(w, &w->bias, i);
        break;
    default:
        r = v * k[1];
        if (w->weight.dtype >= 0)
            r = r * tr__cuda_row_vector(w, &w->weight, i);
        break;
    }
    tr__convert_value(y + i * w->y_step, (enum tr_dtype)w->y_dtype, &r, TR_DTYPE_F64);
}

#endif /* TR_CUDA_ROWWISE_BODY_H */
