/*
 * cpu/nn.c - the neural ops that work along one dimension: softmax,
 * log_softmax and l2_normalize (along dim), layer_norm and rms_norm (along
 * the last).
 *
 * Each line (one index of the other dimensions) is computed by one thread,
 * in f32 for f16, bf16, f32 and the integers, in f64 for f64, and the
 * threads share out the lines, so the bits never depend on the thread
 * count.  A line's sums use the blocks and the pairwise tree of
 * reduce_impl.h, so they are the bits of the reduction ops: layer_norm's
 * mean is mean(x, -1), l2_normalize's norm is norm(x, 2, dim) (accumulated
 * in f64, rounded to the compute dtype), rms_norm's mean square is
 * mean(x * x, -1).  A line that is a compact run of the compute dtype is
 * read where it is; otherwise a line of up to LINE_CACHE values is read
 * once into a buffer (into the result itself when the result's line is a
 * compact run of the compute dtype) and its passes run there, and a longer
 * one is read again, a block at a time, for each pass.
 *
 * A result whose destination is filled by calls (tr__stream_result) is
 * streamed there when its lines are its rows (the last dimension): each
 * thread finishes a run of its lines in its stage (TR__STAGE_BYTES) and
 * hands the run over in one call, so the result never lives in memory
 * whole.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels.h"
#include "fused_impl.h"
#include "reduce_impl.h"
#include "../scratch_impl.h"

#define BLOCK TR__REDUCE_BLOCK
/* Values of a line held in a thread's buffer (256 KiB of f32). */
#define LINE_CACHE 65536
#define PARALLEL_ELEMENTS 32768
/* Lines read together when a line's values are further apart in memory
 * than neighbouring lines are (softmax over dim 0 of a matrix: each line a
 * column): TILE lines of up to TILE_LEN values are read, and their results
 * written, a row at a time, instead of each line walking its own column
 * across thousands of pages.  TILE_PITCH keeps the rows of the raw buffer
 * out of each other's cache sets. */
#define TILE 16
#define TILE_LEN 8192
#define TILE_PITCH(len) ((len) + 16)

enum kind { K_SOFTMAX, K_LOG_SOFTMAX, K_L2_NORMALIZE, K_LAYER_NORM, K_RMS_NORM, K_CROSS_ENTROPY };

struct job {
    enum kind kind;
    enum tr_dtype compute;
    const char *xbase;
    enum tr_dtype xdtype;
    int64_t xstep;           /* bytes between a line's values in x */
    char *ybase;
    enum tr_dtype ydtype;
    int64_t ystep;
    struct tr__iter lines;   /* the other dimensions: x's and y's byte strides */
    int64_t nlines, len, nblocks;
    bool cached;             /* len <= LINE_CACHE: the line is read once */
    bool direct;             /* y's lines are compact runs of the compute dtype */
    bool tiled;              /* lines go TILE at a time (see TILE) */
    double eps;
    const void *weight;      /* len values of the compute dtype, or NULL */
    const void *bias;
    struct tr__store store;  /* fn not NULL: y is streamed */
    int64_t line_bytes;      /* a line of y */
    int64_t stage_lines;     /* lines of y a thread's stage holds */
    const struct tr__source *src; /* not NULL: x's values come from it */
    const int64_t *target;   /* cross_entropy: each line's class, in [0, len) */
    char *loss;              /* cross_entropy: each line's loss (compute dtype) */
};

/* A thread's buffers. */
struct work {
    char *line;  /* min(len, LINE_CACHE) values, when cached */
    char *block; /* BLOCK values read for a pass, when not cached */
    char *out;   /* BLOCK results before they are stored, when not direct */
    char *tmp;   /* BLOCK exponentials, to be summed */
    char *tile;  /* TILE lines of the compute dtype, when tiled */
    char *raw;   /* TILE lines of x's or y's dtype, TILE_PITCH apart */
    char *sums;  /* nblocks partial sums (8 bytes each) */
    struct tr__stage stage; /* stage_lines finished lines of y, when streamed */
    void *scratch;          /* the source's, when there is one */
};

/* f64 squares of the values, as norm reads them */
#define PW_SQUARE_F64(x, p) ((double)(x) * (double)(x))

TR__PAIRWISE(sum_f32, float, float, TR__PW_SAME)
TR__PAIRWISE(sum_f64, double, double, TR__PW_SAME)
TR__PAIRWISE(sqdev_f32, float, float, TR__PW_SQDEV)
TR__PAIRWISE(sqdev_f64, double, double, TR__PW_SQDEV)
TR__PAIRWISE(sumsq_f32, float, float, TR__PW_SQUARE)
TR__PAIRWISE(sumsq_f64, double, double, TR__PW_SQUARE)
TR__PAIRWISE(normsq_f32, float, double, PW_SQUARE_F64)
#define normsq_f64 sumsq_f64

/* y[i] = e^(x[i] - m): f32 by the vectorised exponential of reduce_impl.h
 * (logsumexp's too), f64 by libm. */
static void exp_sub_f32(float *y, const float *x, int64_t n, float m)
{
    tr__expf_sub_row(y, x, n, m);
}

static void exp_sub_f64(double *y, const double *x, int64_t n, double m)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = exp(x[i] - m);
}

/*
 * line_f32 / line_f64: computes line l of job j into its place in y, or
 * into yline (compact, of y's dtype) when that is not NULL; or, when
 * `given` is not NULL, the line whose values are there already (compact,
 * of the compute dtype), leaving its results there too.  block_*() gives
 * a block's values: from the cached line, or read into w->block.
 */
#define LINE_FN(SUF, T, LOG, SQRT)                                           \
    /* The largest value, NaN winning: eight running maxima (which the       \
     * compiler may vectorise), then the rest. */                            \
    static T max_##SUF(const T *a, int64_t n)                                \
    {                                                                        \
        T m[8];                                                              \
        int nan[8] = {0};                                                    \
        int64_t i = 0;                                                       \
        for (int k = 0; k < 8; k++)                                          \
            m[k] = a[0];                                                     \
        for (; i + 8 <= n; i += 8)                                           \
            for (int k = 0; k < 8; k++) {                                    \
                m[k] = a[i + k] > m[k] ? a[i + k] : m[k];                    \
                nan[k] |= a[i + k] != a[i + k];                              \
            }                                                                \
        for (; i < n; i++) {                                                 \
            m[0] = a[i] > m[0] ? a[i] : m[0];                                \
            nan[0] |= a[i] != a[i];                                          \
        }                                                                    \
        for (int k = 1; k < 8; k++) {                                        \
            m[0] = m[k] > m[0] ? m[k] : m[0];                                \
            nan[0] |= nan[k];                                                \
        }                                                                    \
        return nan[0] ? (T)NAN : m[0];                                       \
    }                                                                        \
                                                                             \
    static const T *block_##SUF(const struct job *j, struct work *w, const T *line, \
                                const char *x, int64_t l, int64_t b, int64_t n) \
    {                                                                        \
        if (line)                                                            \
            return line + b * BLOCK;                                         \
        if (j->src) {                                                        \
            j->src->fetch(j->src, w->scratch, l, b * BLOCK, n, w->block, j->compute); \
            return (const T *)(void *)w->block;                              \
        }                                                                    \
        tr__cpu_cast_row(w->block, sizeof(T), j->compute, x + b * BLOCK * j->xstep, \
                         j->xstep, j->xdtype, n);                            \
        return (const T *)(const void *)w->block;                            \
    }                                                                        \
                                                                             \
    static void line_##SUF(const struct job *j, int64_t l, struct work *w, T *given, \
                           char *yline)                                      \
    {                                                                        \
        int64_t off[2], len = j->len, nb = j->nblocks;                       \
        const T *wt = j->weight, *bs = j->bias;                              \
        T *sums = (T *)(void *)w->sums, *line = NULL, *exps = NULL;          \
        double *dsums = (double *)(void *)w->sums;                           \
        T m = 0, s = 0, inv = 0, mean = 0, rstd = 0, denom = 0, lse = 0;     \
        const char *x;                                                       \
        char *y;                                                             \
                                                                             \
        if (len == 0)                                                        \
            return;                                                          \
        tr__iter_offsets(&j->lines, l, off);                                 \
        x = j->xbase + off[0];                                               \
        y = yline ? yline : j->ybase + off[1];                               \
        /* line: the values, when all are at hand (x itself when it is a   \
         * compact run of the compute dtype); exps: where softmax keeps    \
         * the exponentials, when it can */                                 \
        if (given) {                                                         \
            line = exps = given;                                             \
        } else if (!j->src && j->xdtype == j->compute &&                     \
                   j->xstep == (int64_t)sizeof(T)) {                         \
            line = (T *)(uintptr_t)x;                                        \
            exps = j->direct ? (T *)(void *)y : (T *)(void *)w->line;        \
        } else if (j->cached) {                                              \
            line = exps = j->direct ? (T *)(void *)y : (T *)(void *)w->line; \
            if (j->src)                                                      \
                j->src->fetch(j->src, w->scratch, l, 0, len, (char *)line, j->compute); \
            else                                                             \
                tr__cpu_cast_row((char *)line, sizeof(T), j->compute, x, j->xstep, \
                                 j->xdtype, len);                            \
        }                                                                    \
        for (int pass = 0; pass < 2; pass++) {                               \
            for (int64_t b = 0; b < nb; b++) {                               \
                int64_t n = len - b * BLOCK < BLOCK ? len - b * BLOCK : BLOCK; \
                const T *v = block_##SUF(j, w, line, x, l, b, n);            \
                switch (j->kind) {                                           \
                case K_SOFTMAX:                                              \
                case K_LOG_SOFTMAX:                                          \
                case K_CROSS_ENTROPY:                                        \
                    if (pass == 0) {                                         \
                        T bm = max_##SUF(v, n);                              \
                        m = b == 0 || bm != bm || (m == m && bm > m) ? bm : m; \
                    } else {                                                 \
                        T *e = exps && j->kind == K_SOFTMAX ? exps + b * BLOCK \
                                                            : (T *)(void *)w->tmp; \
                        exp_sub_##SUF(e, v, n, m);                           \
                        sums[b] = sum_##SUF(e, n, 0);                        \
                    }                                                        \
                    break;                                                   \
                case K_L2_NORMALIZE:                                         \
                    if (pass == 0)                                           \
                        dsums[b] = normsq_##SUF(v, n, 0);                    \
                    break;                                                   \
                case K_LAYER_NORM:                                           \
                    sums[b] = pass == 0 ? sum_##SUF(v, n, 0) : sqdev_##SUF(v, n, mean); \
                    break;                                                   \
                case K_RMS_NORM:                                             \
                    if (pass == 0)                                           \
                        sums[b] = sumsq_##SUF(v, n, 0);                      \
                    break;                                                   \
                }                                                            \
            }                                                                \
            /* what the pass has found */                                    \
            switch (j->kind) {                                               \
            case K_SOFTMAX:                                                  \
            case K_LOG_SOFTMAX:                                              \
            case K_CROSS_ENTROPY:                                            \
                if (pass == 1) {                                             \
                    s = sum_##SUF(sums, nb, 0);                              \
                    inv = (T)1 / s;                                          \
                    lse = LOG(s);                                            \
                }                                                            \
                break;                                                       \
            case K_L2_NORMALIZE:                                             \
                /* max(norm, eps), NaN staying NaN as clamp_min keeps it */  \
                denom = (T)sqrt(sum_f64(dsums, nb, 0));                      \
                denom = denom < (T)j->eps ? (T)j->eps : denom;               \
                break;                                                       \
            case K_LAYER_NORM:                                               \
                if (pass == 0) {                                             \
                    mean = sum_##SUF(sums, nb, 0) / (T)len;                  \
                } else {                                                     \
                    T var = sum_##SUF(sums, nb, 0) / (T)len;                 \
                    rstd = (T)1 / SQRT(var + (T)j->eps);                     \
                }                                                            \
                break;                                                       \
            case K_RMS_NORM:                                                 \
                rstd = (T)1 / SQRT(sum_##SUF(sums, nb, 0) / (T)len + (T)j->eps); \
                break;                                                       \
            }                                                                \
            if (j->kind == K_L2_NORMALIZE || j->kind == K_RMS_NORM)          \
                break; /* one pass is enough */                              \
        }                                                                    \
        if (j->kind == K_CROSS_ENTROPY) {                                    \
            /* -log_softmax at the target, log_softmax's very operations */  \
            T xt;                                                            \
            tr__cpu_cast_row((char *)&xt, sizeof(T), j->compute,             \
                             x + j->target[l] * j->xstep, j->xstep, j->xdtype, 1); \
            ((T *)(void *)j->loss)[l] = -((xt - m) - lse);                   \
            return;                                                          \
        }                                                                    \
        /* the results, block by block */                                    \
        for (int64_t b = 0; b < nb; b++) {                                   \
            int64_t n = len - b * BLOCK < BLOCK ? len - b * BLOCK : BLOCK, first = b * BLOCK; \
            const T *v = block_##SUF(j, w, line, x, l, b, n);                \
            T *dst = given      ? given + first                              \
                     : j->direct ? (T *)(void *)y + first                     \
                                 : (T *)(void *)w->out;                       \
            switch (j->kind) {                                               \
            case K_CROSS_ENTROPY: /* returned above */                       \
                break;                                                       \
            case K_SOFTMAX:                                                  \
                if (exps) {                                                  \
                    v = exps + first;                                        \
                } else {                                                     \
                    exp_sub_##SUF(dst, v, n, m);                             \
                    v = dst;                                                 \
                }                                                            \
                /* times 1 / s, as PyTorch does: a division each is     \
                 * slower, for half an ulp */                                \
                _Pragma("omp simd")                                          \
                for (int64_t i = 0; i < n; i++)                              \
                    dst[i] = v[i] * inv;                                     \
                break;                                                       \
            case K_LOG_SOFTMAX:                                              \
                _Pragma("omp simd")                                          \
                for (int64_t i = 0; i < n; i++)                              \
                    dst[i] = (v[i] - m) - lse;                               \
                break;                                                       \
            case K_L2_NORMALIZE:                                             \
                _Pragma("omp simd")                                          \
                for (int64_t i = 0; i < n; i++)                              \
                    dst[i] = v[i] / denom;                                   \
                break;                                                       \
            case K_LAYER_NORM:                                               \
                /* the same operations with or without weight and bias */   \
                _Pragma("omp simd")                                          \
                for (int64_t i = 0; i < n; i++)                              \
                    dst[i] = (v[i] - mean) * rstd;                           \
                if (wt) {                                                    \
                    _Pragma("omp simd")                                      \
                    for (int64_t i = 0; i < n; i++)                          \
                        dst[i] = dst[i] * wt[first + i];                     \
                }                                                            \
                if (bs) {                                                    \
                    _Pragma("omp simd")                                      \
                    for (int64_t i = 0; i < n; i++)                          \
                        dst[i] = dst[i] + bs[first + i];                     \
                }                                                            \
                break;                                                       \
            case K_RMS_NORM:                                                 \
                _Pragma("omp simd")                                          \
                for (int64_t i = 0; i < n; i++)                              \
                    dst[i] = v[i] * rstd;                                    \
                if (wt) {                                                    \
                    _Pragma("omp simd")                                      \
                    for (int64_t i = 0; i < n; i++)                          \
                        dst[i] = dst[i] * wt[first + i];                     \
                }                                                            \
                break;                                                       \
            }                                                                \
            if (!j->direct && !given)                                        \
                tr__cpu_cast_row(y + first * j->ystep, j->ystep, j->ydtype, w->out, \
                                 sizeof(T), j->compute, n);                  \
        }                                                                    \
    }

LINE_FN(f32, float, logf, sqrtf)
LINE_FN(f64, double, log, sqrt)

/* ---------------------------------------------------------- the kernel */

static enum kind kind_of(enum tr_op_id id)
{
    switch (id) {
    case TR_OP_LOG_SOFTMAX: return K_LOG_SOFTMAX;
    case TR_OP_L2_NORMALIZE: return K_L2_NORMALIZE;
    case TR_OP_LAYER_NORM: return K_LAYER_NORM;
    case TR_OP_RMS_NORM: return K_RMS_NORM;
    case TR_OP_CROSS_ENTROPY: return K_CROSS_ENTROPY;
    default: return K_SOFTMAX;
    }
}

/* Whether a weight or bias argument is present (not None). */
static bool vector_present(const struct tr_arg *a)
{
    return a && !(a->value.kind == TR_VALUE_NONE && !a->tensor);
}

/* A weight or bias as len compact values of the compute dtype at room
 * (*out = room; NULL when the argument is None). */
static tr_status vector_arg(const struct tr_arg *a, enum tr_dtype compute, int64_t len,
                            char *room, void **out)
{
    int64_t strides[TR_MAX_DIMS];
    struct tr_tensor *t;

    *out = NULL;
    if (!vector_present(a))
        return TR_OK;
    t = tr__arg_tensor(a, tr_value_dtype(&a->value));
    if (!t)
        return tr_last_status();
    *out = room;
    tr__byte_strides(t, strides);
    tr__cpu_cast_row(room, (int64_t)tr_dtype_size(compute), compute, tr_tensor_data(t),
                     t->ndim > 0 ? strides[0] : 0, t->dtype, len);
    tr_release(t);
    return TR_OK;
}

/* Typed copies between TILE lines at byte offsets offs (stepping step
 * bytes) and the raw buffer's rows; one row position for all lines, then
 * the next. */
#define TILE_MOVE(T, TO_RAW)                                                 \
    for (int64_t r = 0; r < len; r++)                                        \
        for (int q = 0; q < nt; q++) {                                       \
            char *a = raw + ((int64_t)q * TILE_PITCH(len) + r) * (int64_t)sizeof(T); \
            char *b = base + offs[q] + r * step;                             \
            if (TO_RAW)                                                      \
                memcpy(a, b, sizeof(T));                                     \
            else                                                             \
                memcpy(b, a, sizeof(T));                                     \
        }

static void tile_move(char *raw, char *base, const int64_t *offs, int nt, int64_t len,
                      int64_t step, size_t size, bool to_raw)
{
    switch (size) {
    case 1: TILE_MOVE(uint8_t, to_raw); break;
    case 2: TILE_MOVE(uint16_t, to_raw); break;
    case 4: TILE_MOVE(uint32_t, to_raw); break;
    default: TILE_MOVE(uint64_t, to_raw); break;
    }
}

/* Where lines l .. l + n - 1 of a streamed result go in w's stage. */
static char *stage_lines(const struct job *j, struct work *w, int64_t l, int64_t n)
{
    return tr__stage_place(&w->stage, (uint64_t)(l * j->line_bytes), (uint64_t)(n * j->line_bytes));
}

/* Lines l0 .. l0 + nt - 1 of a tiled job: read into the first half of
 * w->raw, computed in w->tile, written from the second half (one half
 * for both would have a wider y overwrite x rows not yet read). */
static void tile_lines(const struct job *j, int64_t l0, int nt, struct work *w)
{
    size_t csize = tr_dtype_size(j->compute), xsize = tr_dtype_size(j->xdtype);
    size_t ysize = tr_dtype_size(j->ydtype);
    int64_t xoffs[TILE], yoffs[TILE], off[2], len = j->len, pitch = TILE_PITCH(len);
    char *yraw = w->raw + TILE * pitch * 8;

    for (int q = 0; q < nt; q++) {
        tr__iter_offsets(&j->lines, l0 + q, off);
        xoffs[q] = off[0];
        yoffs[q] = off[1];
    }
    tile_move(w->raw, (char *)j->xbase, xoffs, nt, len, j->xstep, xsize, true);
    for (int q = 0; q < nt; q++) {
        char *line = w->tile + (int64_t)q * len * (int64_t)csize;
        tr__cpu_cast_row(line, (int64_t)csize, j->compute, w->raw + q * pitch * (int64_t)xsize,
                         (int64_t)xsize, j->xdtype, len);
        if (j->compute == TR_DTYPE_F32)
            line_f32(j, l0 + q, w, (float *)(void *)line, NULL);
        else
            line_f64(j, l0 + q, w, (double *)(void *)line, NULL);
        if (j->kind == K_CROSS_ENTROPY)
            continue; /* a loss per line, in j->loss */
        tr__cpu_cast_row(yraw + q * pitch * (int64_t)ysize, (int64_t)ysize, j->ydtype, line,
                         (int64_t)csize, j->compute, len);
    }
    if (j->kind == K_CROSS_ENTROPY)
        return;
    if (j->store.fn) {
        char *to = stage_lines(j, w, l0, nt);
        for (int q = 0; q < nt; q++)
            yoffs[q] = q * j->line_bytes;
        tile_move(yraw, to, yoffs, nt, len, (int64_t)ysize, ysize, false);
    } else {
        tile_move(yraw, j->ybase, yoffs, nt, len, j->ystep, ysize, false);
    }
}

/* The pool scratch of a job (scratch_impl.h): the weight and the bias in
 * the compute dtype, then each thread's buffers, at 64-byte offsets. */
struct layout {
    uint64_t weight, bias;                                 /* offsets */
    uint64_t line, block, out, tmp, tile, raw, sums, each; /* in a thread's part */
    int threads;
    uint64_t total;
};

static bool job_parallel(const struct job *j)
{
    return j->nlines > 1 && j->nlines * j->len > PARALLEL_ELEMENTS;
}

static void layout_of(const struct job *j, bool weight, bool bias, int threads,
                      struct layout *l)
{
    uint64_t size = tr_dtype_size(j->compute), vec = (uint64_t)j->len * size, each = 0;
    bool line = j->cached && !j->direct && !j->tiled, out = !j->direct && !j->tiled;

    memset(l, 0, sizeof *l);
    l->line = tr__carve(&each, line ? vec : 0);
    l->block = tr__carve(&each, !j->cached ? BLOCK * size : 0);
    l->out = tr__carve(&each, out ? BLOCK * size : 0);
    l->tile = tr__carve(&each, j->tiled ? TILE * vec : 0);
    l->raw = tr__carve(&each, j->tiled ? 2 * TILE * (uint64_t)TILE_PITCH(j->len) * 8 : 0);
    l->tmp = tr__carve(&each, BLOCK * size);
    l->sums = tr__carve(&each, (uint64_t)j->nblocks * 8);
    l->each = (each + 63) / 64 * 64;
    l->threads = threads;
    l->weight = tr__carve(&l->total, weight ? vec : 0);
    l->bias = tr__carve(&l->total, bias ? vec : 0);
    l->total = (l->total + 63) / 64 * 64 + (uint64_t)threads * l->each;
}

/* Thread t's buffers in the scratch at base. */
static void work_at(const struct job *j, const struct layout *l, char *base, int t,
                    struct work *w)
{
    char *mine = base + (l->total - (uint64_t)l->threads * l->each) + (uint64_t)t * l->each;
    bool line = j->cached && !j->direct && !j->tiled, out = !j->direct && !j->tiled;

    memset(w, 0, sizeof *w);
    w->line = line ? mine + l->line : NULL;
    w->block = !j->cached ? mine + l->block : NULL;
    w->out = out ? mine + l->out : NULL;
    w->tile = j->tiled ? mine + l->tile : NULL;
    w->raw = j->tiled ? mine + l->raw : NULL;
    w->tmp = mine + l->tmp;
    w->sums = mine + l->sums;
}

/* The job's shape for x of shape (ndim of them) and byte strides xs, along
 * d, into a compact result of dtype ydtype: everything but the data.  x
 * from a source (fused_impl.h) is never tiled: the source reads a line's
 * values where they are itself. */
static void job_geometry(struct job *j, int ndim, const int64_t *shape, const int64_t *xs,
                         enum tr_dtype xdtype, bool source, int d, enum tr_dtype ydtype,
                         int64_t *oshape, int64_t *oxs, int64_t *oys)
{
    int64_t ys[TR_MAX_DIMS];
    const int64_t *sp[2] = {oxs, oys};
    int no = 0;

    tr__contiguous_strides(ndim, shape, ys);
    j->compute = tr__compute_dtype(ydtype);
    j->len = 1;
    for (int i = 0; i < ndim; i++) {
        ys[i] *= (int64_t)tr_dtype_size(ydtype);
        if (i == d) {
            j->len = shape[i];
            j->xstep = xs[i];
            j->ystep = ys[i];
            continue;
        }
        oshape[no] = shape[i];
        oxs[no] = xs[i];
        oys[no++] = ys[i];
    }
    tr__iter_init(&j->lines, no, oshape, 2, sp);
    j->nlines = tr__iter_count(&j->lines);
    j->nblocks = j->len == 0 ? 0 : (j->len - 1) / BLOCK + 1; /* no overflow for any length */
    j->cached = j->len <= LINE_CACHE;
    /* a line of one value is a compact run whatever its stride;
     * cross_entropy's result is not made of lines */
    j->direct = (j->len == 1 || j->ystep == (int64_t)tr_dtype_size(j->compute)) &&
                ydtype == j->compute && j->kind != K_CROSS_ENTROPY;
    j->xdtype = xdtype;
    j->ydtype = ydtype;
    j->tiled = !source && j->len > 1 && j->len <= TILE_LEN && j->nlines > 1 &&
               llabs(j->xstep) > (int64_t)tr_dtype_size(xdtype) &&
               llabs(j->lines.strides[0][j->lines.ndim - 1]) < llabs(j->xstep);
}

static int dim_along(const struct tr__op *op, int64_t dim, int ndim)
{
    if (ndim == 0 || (op->rule == TR__RULE_CROSS_ENTROPY && ndim == 1))
        return 0; /* cross_entropy of [C] logits: the classes are dimension 0 */
    if (op->rule == TR__RULE_LAYER_NORM)
        return ndim - 1; /* layer_norm and rms_norm: the last dimension */
    return (int)(dim < 0 ? dim + ndim : dim);
}

uint64_t tr__nn_scratch(const struct tr__op *op, const struct tr_value *x, bool source,
                        int64_t dim, enum tr_dtype y, bool weight, bool bias, int threads)
{
    int64_t xs[TR_MAX_DIMS], oshape[TR_MAX_DIMS], oxs[TR_MAX_DIMS], oys[TR_MAX_DIMS];
    int64_t numel = 1;
    struct layout l;
    struct job j;

    for (int i = 0; i < x->ndim; i++)
        numel *= x->shape[i];
    if (numel == 0)
        return 0;
    memset(&j, 0, sizeof j);
    j.kind = kind_of(op->info.id);
    tr__value_byte_strides(x, xs);
    job_geometry(&j, x->ndim, x->shape, xs, x->dtype, source, dim_along(op, dim, x->ndim), y,
                 oshape, oxs, oys);
    layout_of(&j, weight, bias, job_parallel(&j) ? threads : 1, &l);
    return l.total;
}

/* The dimension a row-wise op works along: dim, or the last one. */
static tr_status line_dim(const struct tr__op *op, const struct tr_arg *args, int ndim, int *d)
{
    const struct tr_arg *dim_arg = tr__arg_named(op, args, "dim");

    *d = 0;
    if (ndim > 0 && dim_arg)
        return tr__normalize_dim(op->info.name, (int)dim_arg->value.integer, ndim, d);
    if (ndim > 0)
        *d = ndim - 1; /* layer_norm and rms_norm: the last dimension */
    return TR_OK;
}

/* The row-wise op of x, or of src's values when x is NULL, along d into y
 * (out's dtype and shape), streamed through store when its fn is set. */
static tr_status nn_into(const struct tr__op *op, const struct tr_arg *args,
                         const struct tr_value *out, const struct tr_tensor *x,
                         const struct tr__source *src, int d, struct tr_tensor *y,
                         const struct tr__store *store, const int64_t *target, char *loss)
{
    static const char nothing[1]; /* x's base when the values come from src */
    const char *name = op->info.name;
    const struct tr_arg *eps_arg = tr__arg_named(op, args, "eps");
    const struct tr_arg *weight_arg = tr__arg_named(op, args, "weight");
    const struct tr_arg *bias_arg = tr__arg_named(op, args, "bias");
    int64_t xs[TR_MAX_DIMS] = {0}, oshape[TR_MAX_DIMS], oxs[TR_MAX_DIMS], oys[TR_MAX_DIMS];
    const int64_t *xshape = x ? x->shape : src->shape;
    int xndim = x ? x->ndim : src->ndim;
    struct tr_tensor *scratch = NULL;
    void *weight = NULL, *bias = NULL;
    char *room = NULL;
    struct layout l;
    struct job j;
    int64_t units;
    atomic_int store_error = 0;
    bool failed = false;
    tr_status s = TR_OK;

    (void)out; /* y has its dtype and shape */
    memset(&j, 0, sizeof j);
    j.kind = kind_of(op->info.id);
    j.store = *store;
    if (tr_tensor_numel(y) == 0)
        return TR_OK;
    if (src) {
        bool flags[TR_MAX_DIMS] = {false};
        if (xndim > 0)
            flags[d] = true;
        TR_FORWARD_IF_ERROR(src->bind(src, flags));
    }
    if (x)
        tr__byte_strides(x, xs);
    /* y is compact: a new pool tensor or a destination (struct tr_dest) */
    job_geometry(&j, xndim, xshape, xs, x ? x->dtype : src->dtype, src != NULL, d, y->dtype,
                 oshape, oxs, oys);
    layout_of(&j, vector_present(weight_arg), vector_present(bias_arg),
              tr__team_size(job_parallel(&j)), &l);
    s = tr__scratch_block(name, l.total, y->storage->device, &scratch);
    if (s != TR_OK)
        goto done;
    room = tr_tensor_data_mut(scratch);
    s = vector_arg(weight_arg, j.compute, j.len, room + l.weight, &weight);
    if (s == TR_OK)
        s = vector_arg(bias_arg, j.compute, j.len, room + l.bias, &bias);
    if (s != TR_OK)
        goto done;
    j.src = src;
    j.target = target;
    j.loss = loss;
    j.xbase = x ? tr_tensor_data(x) : nothing;
    j.ybase = tr_tensor_data_mut(y);
    j.eps = eps_arg ? tr__number(&eps_arg->value) : 0;
    j.weight = weight;
    j.bias = bias;
    units = j.tiled ? (j.nlines + TILE - 1) / TILE : j.nlines;
    j.line_bytes = j.len * (int64_t)tr_dtype_size(j.ydtype);
    j.stage_lines = TR__STAGE_BYTES / j.line_bytes;
    if (j.stage_lines < (j.tiled ? TILE : 1))
        j.stage_lines = j.tiled ? TILE : 1;

#pragma omp parallel num_threads(l.threads) if (l.threads > 1)
    {
        struct work w;
        bool have = true;

        work_at(&j, &l, room, tr__team_index(), &w);
        /* a streamed result's stage is outside the pool: a fixed size,
         * like BLAS's own buffers (tensorrun(1), STATISTICS); so is a
         * source's scratch (tr_fused_scratch_bytes) */
        if (j.store.fn) {
            tr__stage_init(&w.stage, &j.store, (uint64_t)(j.stage_lines * j.line_bytes));
            have = w.stage.buf != NULL;
        }
        if (have && j.src) {
            w.scratch = tr__source_scratch(j.src);
            have = w.scratch != NULL;
        }
        if (!have) {
#pragma omp atomic write
            failed = true;
        }
#pragma omp for schedule(static)
        for (int64_t u = 0; u < units; u++) {
            int64_t left = j.nlines - u * TILE;

            char *yline;

            if (!have || w.stage.err)
                continue;
            if (j.tiled) {
                tile_lines(&j, u * TILE, left < TILE ? (int)left : TILE, &w);
                continue;
            }
            yline = j.store.fn ? stage_lines(&j, &w, u, 1) : NULL;
            if (j.compute == TR_DTYPE_F32)
                line_f32(&j, u, &w, NULL, yline);
            else
                line_f64(&j, u, &w, NULL, yline);
        }
        tr__stage_finish(&w.stage, &store_error); /* nothing when it has no buffer */
        free(w.scratch);
    }
    if (failed)
        s = tr__set_error(TR_ERR_OOM, "%s: out of memory for a thread's stage or scratch", name);
    else if (atomic_load(&store_error))
        s = tr__store_failed(&j.store, atomic_load(&store_error));
done:
    tr_release(scratch);
    return s;
}

tr_status tr__k_nn(const struct tr__op *op, const struct tr_arg *args,
                   const struct tr_value *out, const struct tr_dest *dest,
                   struct tr_tensor **results)
{
    struct tr_tensor *x, *y = NULL;
    struct tr__store store = {0}; /* fn not NULL: y is streamed */
    int d = 0;
    tr_status s;

    x = tr__arg_tensor(&args[0], tr_value_dtype(&args[0].value));
    if (!x)
        return tr_last_status();
    s = line_dim(op, args, x->ndim, &d);
    if (s == TR_OK) {
        /* streamed when the lines are rows short enough for a stage */
        bool rows = x->ndim > 0 && d == x->ndim - 1 && x->shape[d] <= LINE_CACHE;
        y = rows ? tr__stream_result(op->info.name, out, x->storage->device, dest, &store)
                 : tr__new_result(op->info.name, out, x->storage->device, dest);
        if (!y)
            s = tr_last_status();
    }
    if (s == TR_OK)
        s = nn_into(op, args, out, x, NULL, d, y, &store, NULL, NULL);
    tr_release(x);
    if (s != TR_OK) {
        tr_release(y);
        return s;
    }
    results[0] = y;
    return TR_OK;
}

tr_status tr__nn_source(const struct tr__op *op, const struct tr_arg *args,
                        const struct tr_value *out, const struct tr__source *src,
                        struct tr_tensor *y)
{
    struct tr__store none = {0};
    int d;

    none.name = op->info.name;
    TR_FORWARD_IF_ERROR(line_dim(op, args, src->ndim, &d));
    return nn_into(op, args, out, NULL, src, d, y, &none, NULL, NULL);
}

/* ------------------------------------------------------- cross_entropy */

/* The classes' dimension of cross_entropy's logits x (ndim of them). */
static int class_dim(int64_t dim, int ndim)
{
    if (ndim == 1)
        return 0;
    return (int)(dim < 0 ? dim + ndim : dim);
}

/* The lines (target values) of cross_entropy on logits x along d. */
static int64_t class_lines(int ndim, const int64_t *shape, int d)
{
    int64_t n = 1;

    for (int i = 0; i < ndim; i++)
        if (i != d)
            n *= shape[i];
    return n;
}

/* Where the losses go: the result itself ("none" of the compute dtype),
 * or a block of the lines' losses (and, for "mean" and "sum", a sum per
 * BLOCK of them). */
static uint64_t loss_bytes(int64_t lines, enum tr_dtype y, const char *reduction)
{
    enum tr_dtype compute = tr__compute_dtype(y);
    bool none = strcmp(reduction, "none") == 0;

    if (none && y == compute)
        return 0;
    return (uint64_t)(lines + (none ? 0 : (lines + BLOCK - 1) / BLOCK)) * tr_dtype_size(compute);
}

tr_status tr__cross_entropy_scratch(const struct tr__op *op, const struct tr_value *x,
                                    int64_t dim, const char *reduction, enum tr_dtype y,
                                    int threads, uint64_t *losses, uint64_t *lines)
{
    int d = class_dim(dim, x->ndim);
    int64_t n = class_lines(x->ndim, x->shape, d);

    *losses = n > 0 ? loss_bytes(n, y, reduction) : 0;
    *lines = n > 0 ? tr__nn_scratch(op, x, false, dim, y, false, false, threads) : 0;
    return TR_OK;
}

#define REDUCE_LOSSES(SUF, T)                                                \
    static T total_##SUF(const T *loss, int64_t n, T *sums)                  \
    {                                                                        \
        int64_t nb = (n + BLOCK - 1) / BLOCK;                                \
        for (int64_t b = 0; b < nb; b++)                                     \
            sums[b] = sum_##SUF(loss + b * BLOCK, n - b * BLOCK < BLOCK ? n - b * BLOCK : BLOCK, 0); \
        return sum_##SUF(sums, nb, 0);                                       \
    }

REDUCE_LOSSES(f32, float)
REDUCE_LOSSES(f64, double)

/* cross_entropy(logits, target, dim, reduction): log_softmax's passes
 * along the classes of each line, a loss per line, then their sum (the
 * tree of reduce_impl.h, as sum gives) or mean. */
tr_status tr__k_cross_entropy(const struct tr__op *op, const struct tr_arg *args,
                              const struct tr_value *out, const struct tr_dest *dest,
                              struct tr_tensor **results)
{
    const char *name = op->info.name, *reduction = args[3].value.string;
    struct tr_tensor *x, *given, *target = NULL, *y = NULL, *room = NULL;
    enum tr_dtype compute = tr__compute_dtype(out->dtype);
    bool none = strcmp(reduction, "none") == 0;
    struct tr__store store = {0};
    int64_t lines, classes;
    char *loss = NULL;
    int d;
    tr_status s = TR_OK;

    (void)dest; /* its result is its own */
    x = tr__arg_tensor(&args[0], out->dtype);
    if (!x)
        return tr_last_status();
    d = class_dim(args[2].value.integer, x->ndim);
    classes = x->shape[d];
    lines = class_lines(x->ndim, x->shape, d);
    given = tr__arg_tensor(&args[1], TR_DTYPE_I64);
    target = given ? tr_cast(given, TR_DTYPE_I64) : NULL;
    tr_release(given);
    if (!target)
        s = tr_last_status();
    if (s == TR_OK) {
        const int64_t *t = tr_tensor_data(target);
        /* no ignore_index: PyTorch's default of -100 is out of range too */
        for (int64_t i = 0; i < lines && s == TR_OK; i++)
            if (t[i] < 0 || t[i] >= classes)
                s = tr_set_error(TR_ERR_INDEX, "%s: the target %lld is not a class of 0..%lld",
                                 name, (long long)t[i], (long long)classes - 1);
    }
    if (s == TR_OK) {
        y = tr__new_result(name, out, out->device, NULL);
        if (!y)
            s = tr_last_status();
    }
    if (s == TR_OK && lines > 0) {
        s = tr__scratch_block(name, loss_bytes(lines, out->dtype, reduction), y->storage->device,
                              &room);
        loss = s != TR_OK ? NULL : room ? tr_tensor_data_mut(room) : tr_tensor_data_mut(y);
    }
    if (s == TR_OK && lines > 0)
        s = nn_into(op, args, out, x, NULL, d, y, &store, tr_tensor_data(target), loss);
    if (s == TR_OK && !none) {
        /* the sum of nothing is 0, its mean NaN, as PyTorch gives */
        double v;
        if (compute == TR_DTYPE_F32) {
            float t = lines ? total_f32((const float *)(void *)loss, lines,
                                        (float *)(void *)loss + lines)
                            : 0.0f;
            v = strcmp(reduction, "mean") == 0 ? (double)(t / (float)lines) : (double)t;
        } else {
            double t = lines ? total_f64((const double *)(void *)loss, lines,
                                         (double *)(void *)loss + lines)
                             : 0.0;
            v = strcmp(reduction, "mean") == 0 ? t / (double)lines : t;
        }
        tr__cpu_cast_row(tr_tensor_data_mut(y), 0, y->dtype, (const char *)&v, 0, TR_DTYPE_F64, 1);
    } else if (s == TR_OK && room) {
        tr__cpu_cast_row(tr_tensor_data_mut(y), (int64_t)tr_dtype_size(y->dtype), y->dtype, loss,
                         (int64_t)tr_dtype_size(compute), compute, lines);
    }
    tr_release(room);
    tr_release(target);
    tr_release(x);
    if (s != TR_OK) {
        tr_release(y);
        return s;
    }
    results[0] = y;
    return TR_OK;
}
