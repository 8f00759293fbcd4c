/*
 * cpu/reduce.c - the reductions (sum mean prod max min argmax argmin var
 * std norm all any logsumexp nansum nanmean count_nonzero) over any
 * dimensions of a strided tensor, and cumsum and cumprod along one
 * dimension.
 *
 * A reduction maps each output element to the n values it reduces: the
 * kept dimensions of x give the element's place (folded, row-major, which
 * is also the result's order), the reduced dimensions walk its n values in
 * row-major order.  Those n values are cut into blocks (reduce_impl.h); a
 * unit of work is one block of one output, read straight from x's strided
 * (or broadcast) memory into the pass's compute dtype, without a copy of x,
 * and reduced to a partial; an output's partials are then combined in
 * block order.  The threads share out the units, but each output's tree
 * depends on n alone, so the bits are the same for every thread count.
 * Outputs go CHUNK_UNITS units at a time, which bounds the memory for
 * partials whatever the shape.
 *
 * Compute dtypes: sums, means, products and logsumexp in the result's
 * (f32 for f16, bf16 and integers that give floats; i64 or u64, wrapping,
 * for integer sums); max, min, argmax, argmin, all and any in x's; var,
 * std and norm accumulate in f64 whatever x is, so that squares of large
 * f32 values do not overflow, and are rounded once to the result's dtype.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "../kernels.h"
#include "fused_impl.h"
#include "reduce_impl.h"
#include "../scratch_impl.h"

#define BLOCK TR__REDUCE_BLOCK
/* Units (blocks of outputs) per round: bounds the partials to 1 MiB. */
#define CHUNK_UNITS 65536
/* Below this many values a reduction runs on the calling thread. */
#define PARALLEL_ELEMENTS 32768
/* Outputs read together when the reduced values are further apart in
 * memory than neighbouring outputs (a reduction over an outer dimension):
 * a block of TILE outputs is read row by row, 256 bytes of f32 at a time,
 * instead of each output walking its own column across thousands of
 * pages.  (64 measured 1.5 times faster than 16 and 32; the tile buffer
 * is at most 2 MiB a thread, and only as long as a block's values need.) */
#define TILE 64
_Static_assert(TILE <= TR__SOURCE_TILE, "a source's tile holds TILE outputs");
/* Items between the rows of a tile buffer: the values of a block (BLOCK,
 * or all n when fewer) plus a cache line, so that the TILE rows written
 * together do not fall in the same cache sets (rows exactly 16 KiB apart
 * do, and thrash). */
#define TILE_PITCH(block) ((block) + 16)

/* A partial or a final result of one output: a value of the pass's compute
 * dtype and, for argmax and argmin, that value's position among the n. */
struct acc {
    union {
        float f32;
        double f64;
        int64_t i64;
        uint64_t u64;
    } v;
    int64_t index;
};

struct pass;

/* Reduces n compact values of the pass's compute dtype, the first of them
 * at position `first` of the output's n; param is the output's parameter
 * for a second pass (a mean, a maximum). */
typedef void (*leaf_fn)(const struct pass *ps, const void *values, int64_t n, int64_t first,
                        double param, struct acc *out);
/* Combines one output's partials (n >= 1), in block order. */
typedef void (*combine_fn)(const struct acc *parts, int64_t n, struct acc *out);

struct pass {
    enum tr_dtype compute;
    leaf_fn leaf;
    combine_fn combine;
    double ord; /* norm's order, for the general p-norm */
};

/* ------------------------------------------------------- exponential */

#if defined(__x86_64__)
/* Four of tr__expf at once, operation for operation (reduce_impl.h). */
static inline __m128 expf4(__m128 v)
{
    __m128 nan = _mm_cmpunord_ps(v, v);
    __m128 c = _mm_min_ps(_mm_max_ps(v, _mm_set1_ps(TR__EXP_LO)), _mm_set1_ps(TR__EXP_HI));
    __m128 kf = _mm_sub_ps(_mm_add_ps(_mm_mul_ps(c, _mm_set1_ps(TR__EXP_LOG2E)),
                                      _mm_set1_ps(TR__EXP_ROUND)),
                           _mm_set1_ps(TR__EXP_ROUND));
    __m128 r = _mm_sub_ps(_mm_sub_ps(c, _mm_mul_ps(kf, _mm_set1_ps(TR__EXP_C1))),
                          _mm_mul_ps(kf, _mm_set1_ps(TR__EXP_C2)));
    __m128i k = _mm_cvttps_epi32(kf), bias = _mm_set1_epi32(127);
    /* k / 2 rounded toward zero, as C divides */
    __m128i k1 = _mm_srai_epi32(_mm_add_epi32(k, _mm_srli_epi32(k, 31)), 1);
    __m128i k2 = _mm_sub_epi32(k, k1);
    __m128 s1 = _mm_castsi128_ps(_mm_slli_epi32(_mm_add_epi32(k1, bias), 23));
    __m128 s2 = _mm_castsi128_ps(_mm_slli_epi32(_mm_add_epi32(k2, bias), 23));
    __m128 p = _mm_set1_ps(TR__EXP_P0);

    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(TR__EXP_P1));
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(TR__EXP_P2));
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(TR__EXP_P3));
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(TR__EXP_P4));
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(TR__EXP_P5));
    p = _mm_add_ps(_mm_add_ps(_mm_mul_ps(_mm_mul_ps(p, r), r), r), _mm_set1_ps(1.0f));
    p = _mm_mul_ps(_mm_mul_ps(p, s1), s2);
    return _mm_or_ps(_mm_and_ps(nan, v), _mm_andnot_ps(nan, p));
}

/* Eight at once: the same operations on 256-bit registers. */
__attribute__((target("avx2")))
static inline __m256 expf8(__m256 v)
{
    __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    __m256 c = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(TR__EXP_LO)),
                             _mm256_set1_ps(TR__EXP_HI));
    __m256 kf = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(c, _mm256_set1_ps(TR__EXP_LOG2E)),
                                            _mm256_set1_ps(TR__EXP_ROUND)),
                              _mm256_set1_ps(TR__EXP_ROUND));
    __m256 r = _mm256_sub_ps(_mm256_sub_ps(c, _mm256_mul_ps(kf, _mm256_set1_ps(TR__EXP_C1))),
                             _mm256_mul_ps(kf, _mm256_set1_ps(TR__EXP_C2)));
    __m256i k = _mm256_cvttps_epi32(kf), bias = _mm256_set1_epi32(127);
    __m256i k1 = _mm256_srai_epi32(_mm256_add_epi32(k, _mm256_srli_epi32(k, 31)), 1);
    __m256i k2 = _mm256_sub_epi32(k, k1);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23));
    __m256 p = _mm256_set1_ps(TR__EXP_P0);

    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(TR__EXP_P1));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(TR__EXP_P2));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(TR__EXP_P3));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(TR__EXP_P4));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(TR__EXP_P5));
    p = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(p, r), r), r),
                      _mm256_set1_ps(1.0f));
    p = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
    return _mm256_or_ps(_mm256_and_ps(nan, v), _mm256_andnot_ps(nan, p));
}

__attribute__((target("avx2")))
static void expf_sub_row_avx2(float *y, const float *x, int64_t n, float sub)
{
    const __m256 vsub = _mm256_set1_ps(sub);
    int64_t i = 0;

    /* four independent chains per step: the polynomial is one long chain
     * of dependent operations (measured on the development machine's
     * EPYC: a tenth less CPU for a softmax than with two) */
    for (; i + 32 <= n; i += 32) {
        __m256 a = expf8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vsub));
        __m256 b = expf8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vsub));
        __m256 c = expf8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 16), vsub));
        __m256 d = expf8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 24), vsub));
        _mm256_storeu_ps(y + i, a);
        _mm256_storeu_ps(y + i + 8, b);
        _mm256_storeu_ps(y + i + 16, c);
        _mm256_storeu_ps(y + i + 24, d);
    }
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, expf8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vsub)));
    for (; i < n; i++)
        y[i] = tr__expf(x[i] - sub);
}
#endif

void tr__expf_sub_row(float *y, const float *x, int64_t n, float sub)
{
    int64_t i = 0;

#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2")) {
        expf_sub_row_avx2(y, x, n, sub);
        return;
    }
    for (; i + 4 <= n; i += 4)
        _mm_storeu_ps(y + i, expf4(_mm_sub_ps(_mm_loadu_ps(x + i), _mm_set1_ps(sub))));
#endif
    for (; i < n; i++)
        y[i] = tr__expf(x[i] - sub);
}

/* -------------------------------------------------------------- sums */

#define PW_ABS(x, p) fabs(x)
#define PW_POW(x, p) pow(fabs(x), (p))
#define PW_ACC32(x, p) ((x).v.f32)
#define PW_ACC64(x, p) ((x).v.f64)

TR__PAIRWISE(sum_f32, float, float, TR__PW_SAME)
TR__PAIRWISE(sum_f64, double, double, TR__PW_SAME)
TR__PAIRWISE(sqdev_f64, double, double, TR__PW_SQDEV)
TR__PAIRWISE(sumsq_f64, double, double, TR__PW_SQUARE)
TR__PAIRWISE(abssum_f64, double, double, PW_ABS)
TR__PAIRWISE(powsum_f64, double, double, PW_POW)
/* NaN counts as 0, and the tree stays the sum's */
#define PW_NAN0(x, p) ((x) == (x) ? (x) : 0)
TR__PAIRWISE(nansum_f32, float, float, PW_NAN0)
TR__PAIRWISE(nansum_f64, double, double, PW_NAN0)
/* the blocks' sums, by the same tree as the values of a block */
TR__PAIRWISE(parts_sum_f32, struct acc, float, PW_ACC32)
TR__PAIRWISE(parts_sum_f64, struct acc, double, PW_ACC64)

/* Integer sums and products wrap (two's complement), so their order does
 * not matter; i64 values are summed as u64, which is the same bits. */
static uint64_t sum_u64(const uint64_t *a, int64_t n)
{
    uint64_t s = 0;

    for (int64_t i = 0; i < n; i++)
        s += a[i];
    return s;
}

static uint64_t prod_u64(const uint64_t *a, int64_t n)
{
    uint64_t s = 1;

    for (int64_t i = 0; i < n; i++)
        s *= a[i];
    return s;
}

#define LEAF(name, field, expr)                                              \
    static void name(const struct pass *ps, const void *values, int64_t n, int64_t first, \
                     double param, struct acc *out)                          \
    {                                                                        \
        (void)ps;                                                            \
        (void)first;                                                         \
        (void)param;                                                         \
        out->v.field = (expr);                                               \
    }

LEAF(leaf_sum_f32, f32, sum_f32(values, n, 0))
LEAF(leaf_sum_f64, f64, sum_f64(values, n, 0))
LEAF(leaf_sum_int, u64, sum_u64(values, n))
LEAF(leaf_sqdev_f64, f64, sqdev_f64(values, n, param))
LEAF(leaf_sumsq_f64, f64, sumsq_f64(values, n, 0))
LEAF(leaf_abssum_f64, f64, abssum_f64(values, n, 0))
LEAF(leaf_powsum_f64, f64, powsum_f64(values, n, ps->ord))

/* The sum of e^(x - param): the exponentials of a block first (f32 by the
 * vectorised exponential that softmax uses too), then their pairwise sum. */
static void leaf_expsum_f32(const struct pass *ps, const void *values, int64_t n, int64_t first,
                            double param, struct acc *out)
{
    float e[BLOCK];

    (void)ps;
    (void)first;
    tr__expf_sub_row(e, values, n, (float)param);
    out->v.f32 = sum_f32(e, n, 0);
}

static void leaf_expsum_f64(const struct pass *ps, const void *values, int64_t n, int64_t first,
                            double param, struct acc *out)
{
    const double *a = values;
    double e[BLOCK];

    (void)ps;
    (void)first;
    for (int64_t i = 0; i < n; i++)
        e[i] = exp(a[i] - param);
    out->v.f64 = sum_f64(e, n, 0);
}

/* nansum and nanmean: the sum without the NaN, and (in index) how many
 * values are not NaN, for the mean. */
#define LEAF_NANSUM(name, field, T, sum)                                     \
    static void name(const struct pass *ps, const void *values, int64_t n, int64_t first, \
                     double param, struct acc *out)                          \
    {                                                                        \
        const T *a = values;                                                 \
        int64_t count = 0;                                                   \
        (void)ps;                                                            \
        (void)first;                                                         \
        (void)param;                                                         \
        for (int64_t i = 0; i < n; i++)                                      \
            count += a[i] == a[i];                                           \
        out->v.field = sum(a, n, 0);                                         \
        out->index = count;                                                  \
    }

LEAF_NANSUM(leaf_nansum_f32, f32, float, nansum_f32)
LEAF_NANSUM(leaf_nansum_f64, f64, double, nansum_f64)

/* count_nonzero: NaN is not zero */
#define LEAF_NONZERO(name, T)                                                \
    static void name(const struct pass *ps, const void *values, int64_t n, int64_t first, \
                     double param, struct acc *out)                          \
    {                                                                        \
        const T *a = values;                                                 \
        uint64_t count = 0;                                                  \
        (void)ps;                                                            \
        (void)first;                                                         \
        (void)param;                                                         \
        for (int64_t i = 0; i < n; i++)                                      \
            count += a[i] != 0;                                              \
        out->v.u64 = count;                                                  \
    }

LEAF_NONZERO(leaf_nonzero_f32, float)
LEAF_NONZERO(leaf_nonzero_f64, double)
LEAF_NONZERO(leaf_nonzero_i64, int64_t)

static void combine_sum_f32(const struct acc *parts, int64_t n, struct acc *out)
{
    out->v.f32 = parts_sum_f32(parts, n, 0);
}

static void combine_sum_f64(const struct acc *parts, int64_t n, struct acc *out)
{
    out->v.f64 = parts_sum_f64(parts, n, 0);
}

static void combine_nansum_f32(const struct acc *parts, int64_t n, struct acc *out)
{
    out->v.f32 = parts_sum_f32(parts, n, 0);
    out->index = 0;
    for (int64_t i = 0; i < n; i++)
        out->index += parts[i].index;
}

static void combine_nansum_f64(const struct acc *parts, int64_t n, struct acc *out)
{
    out->v.f64 = parts_sum_f64(parts, n, 0);
    out->index = 0;
    for (int64_t i = 0; i < n; i++)
        out->index += parts[i].index;
}

static void combine_sum_int(const struct acc *parts, int64_t n, struct acc *out)
{
    uint64_t s = 0;

    for (int64_t i = 0; i < n; i++)
        s += parts[i].v.u64;
    out->v.u64 = s;
}

/* ---------------------------------------------------------- products */

/* Float products run in order: their bits depend on the order, which is
 * the values' own, then the blocks'. */
#define PROD_FLOAT(name, T)                                                  \
    static T name(const T *a, int64_t n)                                     \
    {                                                                        \
        T s = 1;                                                             \
        for (int64_t i = 0; i < n; i++)                                      \
            s *= a[i];                                                       \
        return s;                                                            \
    }

PROD_FLOAT(prod_f32, float)
PROD_FLOAT(prod_f64, double)

LEAF(leaf_prod_f32, f32, prod_f32(values, n))
LEAF(leaf_prod_f64, f64, prod_f64(values, n))
LEAF(leaf_prod_int, u64, prod_u64(values, n))

#define COMBINE_PROD(name, field, T)                                         \
    static void name(const struct acc *parts, int64_t n, struct acc *out)    \
    {                                                                        \
        T s = 1;                                                             \
        for (int64_t i = 0; i < n; i++)                                      \
            s *= parts[i].v.field;                                           \
        out->v.field = s;                                                    \
    }

COMBINE_PROD(combine_prod_f32, f32, float)
COMBINE_PROD(combine_prod_f64, f64, double)
COMBINE_PROD(combine_prod_int, u64, uint64_t)

/* -------------------------------------------------------- max and min */

/* The extreme of n values with NaN winning (the first NaN, payload and
 * all); of equal values the first.  The NaN test is kept apart from the
 * comparison so that the loop stays a plain select.  An empty run gives
 * the identity: -inf for max, +inf for min (only logsumexp asks). */
#define EXTREME_FLOAT(name, T, CMP, EMPTY)                                   \
    static T name(const T *a, int64_t n)                                     \
    {                                                                        \
        T m;                                                                 \
        bool nan = false;                                                    \
        if (n <= 0)                                                          \
            return (EMPTY);                                                  \
        m = a[0];                                                            \
        for (int64_t i = 0; i < n; i++) {                                    \
            T v = a[i];                                                      \
            m = v CMP m ? v : m;                                             \
            nan |= v != v;                                                   \
        }                                                                    \
        for (int64_t i = 0; nan && i < n; i++)                               \
            if (a[i] != a[i])                                                \
                return a[i];                                                 \
        return m;                                                            \
    }

#define EXTREME_INT(name, T, CMP)                                            \
    static T name(const T *a, int64_t n)                                     \
    {                                                                        \
        T m = n > 0 ? a[0] : 0;                                              \
        for (int64_t i = 1; i < n; i++)                                      \
            m = a[i] CMP m ? a[i] : m;                                       \
        return m;                                                            \
    }

EXTREME_FLOAT(max_f32, float, >, -INFINITY)
EXTREME_FLOAT(max_f64, double, >, -INFINITY)
EXTREME_FLOAT(min_f32, float, <, INFINITY)
EXTREME_FLOAT(min_f64, double, <, INFINITY)
EXTREME_INT(max_i64, int64_t, >)
EXTREME_INT(max_u64, uint64_t, >)
EXTREME_INT(min_i64, int64_t, <)
EXTREME_INT(min_u64, uint64_t, <)

LEAF(leaf_max_f32, f32, max_f32(values, n))
LEAF(leaf_max_f64, f64, max_f64(values, n))
LEAF(leaf_max_i64, i64, max_i64(values, n))
LEAF(leaf_max_u64, u64, max_u64(values, n))
LEAF(leaf_min_f32, f32, min_f32(values, n))
LEAF(leaf_min_f64, f64, min_f64(values, n))
LEAF(leaf_min_i64, i64, min_i64(values, n))
LEAF(leaf_min_u64, u64, min_u64(values, n))

/* |x| at its largest, NaN winning: norm's ord = inf. */
static double absmax_f64(const double *a, int64_t n)
{
    double m = 0;
    bool nan = false;

    for (int64_t i = 0; i < n; i++) {
        double v = fabs(a[i]);
        m = v > m ? v : m;
        nan |= v != v;
    }
    return nan ? NAN : m;
}

LEAF(leaf_absmax_f64, f64, absmax_f64(values, n))

/* The partials in block order by the same rule: the first NaN, else the
 * first of the extremes. */
#define COMBINE_EXTREME(name, field, CMP, FLOAT)                             \
    static void name(const struct acc *parts, int64_t n, struct acc *out)    \
    {                                                                        \
        *out = parts[0];                                                     \
        for (int64_t i = 1; i < n; i++) {                                    \
            if ((FLOAT) && out->v.field != out->v.field)                     \
                break;                                                       \
            if (((FLOAT) && parts[i].v.field != parts[i].v.field) ||         \
                parts[i].v.field CMP out->v.field)                           \
                *out = parts[i];                                             \
        }                                                                    \
    }

COMBINE_EXTREME(combine_max_f32, f32, >, 1)
COMBINE_EXTREME(combine_max_f64, f64, >, 1)
COMBINE_EXTREME(combine_max_i64, i64, >, 0)
COMBINE_EXTREME(combine_max_u64, u64, >, 0)
COMBINE_EXTREME(combine_min_f32, f32, <, 1)
COMBINE_EXTREME(combine_min_f64, f64, <, 1)
COMBINE_EXTREME(combine_min_i64, i64, <, 0)
COMBINE_EXTREME(combine_min_u64, u64, <, 0)

/* ------------------------------------------------- argmax and argmin */

/* The position of the first extreme, or of the first NaN. */
#define ARG_EXTREME(name, field, T, CMP)                                     \
    static void name(const struct pass *ps, const void *values, int64_t n, int64_t first, \
                     double param, struct acc *out)                          \
    {                                                                        \
        const T *a = values;                                                 \
        int64_t best = 0;                                                    \
        T m = a[0];                                                          \
        (void)ps;                                                            \
        (void)param;                                                         \
        for (int64_t i = 1; i < n && m == m; i++) {                          \
            T v = a[i];                                                      \
            if (v != v || v CMP m) {                                         \
                m = v;                                                       \
                best = i;                                                    \
            }                                                                \
        }                                                                    \
        out->v.field = m;                                                    \
        out->index = first + best;                                           \
    }

ARG_EXTREME(leaf_argmax_f32, f32, float, >)
ARG_EXTREME(leaf_argmax_f64, f64, double, >)
ARG_EXTREME(leaf_argmax_i64, i64, int64_t, >)
ARG_EXTREME(leaf_argmax_u64, u64, uint64_t, >)
ARG_EXTREME(leaf_argmin_f32, f32, float, <)
ARG_EXTREME(leaf_argmin_f64, f64, double, <)
ARG_EXTREME(leaf_argmin_i64, i64, int64_t, <)
ARG_EXTREME(leaf_argmin_u64, u64, uint64_t, <)

/* ------------------------------------------------------- all and any */

#define TRUTH(name, T, ALL)                                                  \
    static void name(const struct pass *ps, const void *values, int64_t n, int64_t first, \
                     double param, struct acc *out)                          \
    {                                                                        \
        const T *a = values;                                                 \
        bool r = (ALL);                                                      \
        (void)ps;                                                            \
        (void)first;                                                         \
        (void)param;                                                         \
        /* stops at the first value that settles it; NaN is true */         \
        for (int64_t i = 0; i < n && r == (ALL); i++)                        \
            r = a[i] != 0;                                                   \
        out->v.u64 = r;                                                      \
    }

TRUTH(leaf_all_f32, float, true)
TRUTH(leaf_all_f64, double, true)
TRUTH(leaf_all_i64, int64_t, true)
TRUTH(leaf_any_f32, float, false)
TRUTH(leaf_any_f64, double, false)
TRUTH(leaf_any_i64, int64_t, false)

static void combine_all(const struct acc *parts, int64_t n, struct acc *out)
{
    out->v.u64 = 1;
    for (int64_t i = 0; i < n; i++)
        out->v.u64 &= parts[i].v.u64;
}

static void combine_any(const struct acc *parts, int64_t n, struct acc *out)
{
    out->v.u64 = 0;
    for (int64_t i = 0; i < n; i++)
        out->v.u64 |= parts[i].v.u64;
}

/* ------------------------------------------------------------- plans */

/* x seen as outputs x reduced values. */
struct plan {
    const char *base;
    enum tr_dtype dtype;
    struct tr__iter kept;    /* one operand: x's byte strides */
    struct tr__iter reduced;
    int64_t nout, n, nblocks;
    bool tiled;              /* read TILE outputs at a time (see TILE) */
    int64_t pitch;           /* items between a tile buffer's rows */
    const struct tr__source *src; /* not NULL: the values come from it, not x */
};

/* The value of item k of a dims argument (an int list given either way). */
static int64_t dims_item(const struct tr_arg *a, size_t k)
{
    return a->items ? a->items[k].value.integer : a->value.items[k].integer;
}

/* flags[d] for each dimension that dims (an int, a list, None or absent)
 * names; the op table's rule has checked them. */
static tr_status dims_flags(const char *name, const struct tr_arg *dims, int ndim, bool *flags)
{
    size_t count = dims && dims->value.kind == TR_VALUE_LIST ? dims->value.count : 1;

    memset(flags, 0, TR_MAX_DIMS * sizeof *flags);
    if (!dims || (dims->value.kind == TR_VALUE_NONE && !dims->tensor)) {
        for (int d = 0; d < ndim; d++)
            flags[d] = true;
        return TR_OK;
    }
    if (ndim == 0)
        return TR_OK; /* a scalar's dim 0 or -1: nothing to walk */
    for (size_t k = 0; k < count; k++) {
        int64_t v = dims->value.kind == TR_VALUE_LIST ? dims_item(dims, k) : dims->value.integer;
        int d;
        TR_RETURN_ERROR_IF(v < INT32_MIN || v > INT32_MAX, TR_ERR_INDEX,
                           "%s: dim %lld is out of range", name, (long long)v);
        TR_FORWARD_IF_ERROR(tr__normalize_dim(name, (int)v, ndim, &d));
        flags[d] = true;
    }
    return TR_OK;
}

/* The plan of a reduction over the flagged dimensions of ndim-d values
 * of dtype with byte strides: everything but the data. */
static void plan_geometry(struct plan *p, int ndim, const int64_t *shape,
                          const int64_t *strides, enum tr_dtype dtype, const bool *flags)
{
    int64_t kshape[TR_MAX_DIMS], kstrides[TR_MAX_DIMS];
    int64_t rshape[TR_MAX_DIMS], rstrides[TR_MAX_DIMS];
    const int64_t *sp;
    int nk = 0, nr = 0;

    for (int d = 0; d < ndim; d++) {
        if (flags[d]) {
            rshape[nr] = shape[d];
            rstrides[nr++] = strides[d];
        } else {
            kshape[nk] = shape[d];
            kstrides[nk++] = strides[d];
        }
    }
    sp = kstrides;
    tr__iter_init(&p->kept, nk, kshape, 1, &sp);
    sp = rstrides;
    tr__iter_init(&p->reduced, nr, rshape, 1, &sp);
    p->nout = tr__iter_count(&p->kept);
    p->n = tr__iter_count(&p->reduced);
    p->nblocks = p->n == 0 ? 1 : (p->n - 1) / BLOCK + 1; /* no overflow: n may be any size */
    p->pitch = TILE_PITCH(p->n < BLOCK ? p->n : BLOCK);
    p->base = NULL;
    p->dtype = dtype;
    p->src = NULL;
    {
        int64_t rstep = llabs(p->reduced.strides[0][p->reduced.ndim - 1]);
        int64_t kstep = llabs(p->kept.strides[0][p->kept.ndim - 1]);
        p->tiled = p->nout > 1 && p->n > 1 && rstep != (int64_t)tr_dtype_size(dtype) &&
                   kstep < rstep;
    }
}

static void plan_init(struct plan *p, const struct tr_tensor *x, const bool *flags)
{
    int64_t strides[TR_MAX_DIMS];

    tr__byte_strides(x, strides);
    plan_geometry(p, x->ndim, x->shape, strides, x->dtype, flags);
    p->base = tr_tensor_data(x);
}

/* The plan of a reduction over the flagged dimensions of values of dtype
 * and shape that a source (fused_impl.h) gives: it walks the values
 * itself, so only the counts are the plan's, and it is never tiled. */
static void plan_source_geometry(struct plan *p, int ndim, const int64_t *shape,
                                 enum tr_dtype dtype, const bool *flags)
{
    memset(p, 0, sizeof *p);
    p->nout = p->n = 1;
    for (int d = 0; d < ndim; d++) {
        if (flags[d])
            p->n *= shape[d];
        else
            p->nout *= shape[d];
    }
    p->nblocks = p->n == 0 ? 1 : (p->n - 1) / BLOCK + 1; /* no overflow: n may be any size */
    p->dtype = dtype;
}

static tr_status plan_init_source(struct plan *p, const struct tr__source *src, const bool *flags)
{
    plan_source_geometry(p, src->ndim, src->shape, src->dtype, flags);
    p->src = src;
    p->pitch = TILE_PITCH(p->n < BLOCK ? p->n : BLOCK); /* when src->tiles */
    return src->bind(src, flags);
}

/* The pool scratch of a plan (scratch_impl.h): outputs go cnt at a time;
 * one block holds their accumulators, partials, parameters and finished
 * values (at 64-byte offsets), another every thread's tile buffer. */
struct layout {
    int64_t cnt;
    uint64_t accs, parts, params, vals, partials; /* offsets; the block's bytes */
    uint64_t tile;                                /* one thread's tile buffer */
    int threads;
    uint64_t tiles;                               /* the tile buffers' block */
};

static void layout_of(const struct plan *p, bool two_pass, enum tr_dtype fin, int max_threads,
                      struct layout *l)
{
    int64_t cnt = CHUNK_UNITS / p->nblocks;

    memset(l, 0, sizeof *l);
    cnt = cnt < 1 ? 1 : cnt > p->nout ? p->nout : cnt;
    l->cnt = cnt;
    l->accs = tr__carve(&l->partials, (uint64_t)cnt * sizeof(struct acc));
    l->parts = tr__carve(&l->partials,
                         p->nblocks > 1 ? (uint64_t)(cnt * p->nblocks) * sizeof(struct acc) : 0);
    l->params = tr__carve(&l->partials, two_pass ? (uint64_t)cnt * sizeof(double) : 0);
    l->vals = tr__carve(&l->partials, (uint64_t)cnt * tr_dtype_size(fin));
    /* the first round has the most outputs: its team is the largest */
    l->threads = cnt * p->n > PARALLEL_ELEMENTS ? max_threads : 1;
    l->tile = p->tiled ? (uint64_t)TILE * (uint64_t)p->pitch * tr_dtype_size(p->dtype) : 0;
    l->tiles = (uint64_t)l->threads * l->tile;
}

/*
 * One pass over outputs o0 .. o0 + cnt - 1: accs[o - o0] receives each
 * output's result.  parts has room for cnt * nblocks partials (unused when
 * there is one block); params, when not NULL, holds each output's
 * parameter.  A unit of work is one block of one output, or of a tile of
 * TILE outputs; units are taken block-major, so that neighbouring outputs
 * read neighbouring memory.  Either way every output's leaf sees the same
 * values.  tiles holds a tile buffer of tile_bytes for each thread of the
 * team, when the plan is tiled.  A source's values are fetched into each
 * thread's own scratch of the source (malloc, outside the pool: see
 * tr_fused_scratch_bytes); false when a thread cannot have it.
 */
static bool run_pass(const struct plan *p, const struct pass *ps, int64_t o0, int64_t cnt,
                     const double *params, struct acc *parts, struct acc *accs, char *tiles,
                     uint64_t tile_bytes)
{
    bool src_tiles = p->src && p->src->tiles && cnt > 1;
    int64_t nb = p->nblocks;
    int64_t per_block = p->tiled || src_tiles ? (cnt + TILE - 1) / TILE : cnt;
    int64_t units = per_block * nb, csize = (int64_t)tr_dtype_size(ps->compute);
    size_t size = tr_dtype_size(p->dtype);
    bool parallel = cnt * p->n > PARALLEL_ELEMENTS, failed = false;

#pragma omp parallel num_threads(tr__team_size(parallel)) if (parallel)
    {
        _Alignas(64) char buf[BLOCK * 8];
        char *raw = p->tiled ? tiles + (uint64_t)tr__team_index() * tile_bytes : NULL;
        void *scratch = p->src ? tr__source_scratch(p->src) : NULL;
        /* a source's tile of values, outside the pool as its scratch is */
        char *values_tile = src_tiles ? aligned_alloc(64, (size_t)TILE * (size_t)p->pitch * 8)
                                      : NULL;

        if ((p->src && !scratch) || (src_tiles && !values_tile)) {
#pragma omp atomic write
            failed = true;
        }
#pragma omp for schedule(static)
        for (int64_t u = 0; u < units; u++) {
            int64_t j = nb == 1 ? 0 : u / per_block, first = j * BLOCK;
            int64_t m = p->n - first < BLOCK ? p->n - first : BLOCK, off[TILE];
            int64_t o = nb == 1 ? u : u % per_block;
            int nt = 1;
            const void *values;

            if (src_tiles) {
                if (!scratch || !values_tile)
                    continue;
                o *= TILE;
                nt = cnt - o < TILE ? (int)(cnt - o) : TILE;
                p->src->fetch_tile(p->src, scratch, o0 + o, nt, first, m, values_tile, p->pitch,
                                   ps->compute);
                for (int q = 0; q < nt; q++)
                    ps->leaf(ps, values_tile + (int64_t)q * p->pitch * csize, m, first,
                             params ? params[o + q] : 0,
                             nb == 1 ? &accs[o + q] : &parts[(o + q) * nb + j]);
                continue;
            }
            if (p->src) {
                if (!scratch)
                    continue;
                p->src->fetch(p->src, scratch, o0 + o, first, m, buf, ps->compute);
                ps->leaf(ps, buf, m, first, params ? params[o] : 0,
                         nb == 1 ? &accs[o] : &parts[o * nb + j]);
                continue;
            }
            if (!p->tiled) {
                tr__iter_offsets(&p->kept, o0 + o, off);
                values = tr__walk_block(&p->reduced, p->base + off[0], p->dtype, first, m, buf,
                                        ps->compute);
                ps->leaf(ps, values, m, first, params ? params[o] : 0,
                         nb == 1 ? &accs[o] : &parts[o * nb + j]);
                continue;
            }
            o *= TILE;
            nt = cnt - o < TILE ? (int)(cnt - o) : TILE;
            for (int q = 0; q < nt; q++)
                tr__iter_offsets(&p->kept, o0 + o + q, &off[q]);
            tr__gather_tile(&p->reduced, p->base, off, nt, first, m, size, p->pitch, raw);
            for (int q = 0; q < nt; q++) {
                const char *row = raw + (int64_t)q * p->pitch * (int64_t)size;
                if (p->dtype == ps->compute) {
                    values = row;
                } else {
                    tr__cpu_cast_row(buf, csize, ps->compute, row, (int64_t)size, p->dtype, m);
                    values = buf;
                }
                ps->leaf(ps, values, m, first, params ? params[o + q] : 0,
                         nb == 1 ? &accs[o + q] : &parts[(o + q) * nb + j]);
            }
        }
        free(scratch);
        free(values_tile);
        if (nb > 1) {
#pragma omp for schedule(static)
            for (int64_t k = 0; k < cnt; k++)
                ps->combine(parts + k * nb, nb, &accs[k]);
        }
    }
    return !failed;
}

/* --------------------------------------------------------- the kernel */

enum kind {
    K_SUM, K_MEAN, K_PROD, K_MAX, K_MIN, K_ARGMAX, K_ARGMIN, K_VAR, K_STD, K_NORM,
    K_ALL, K_ANY, K_LOGSUMEXP, K_NANSUM, K_NANMEAN, K_NONZERO
};


/* Picks by compute dtype: f32, f64, i64 (also bool), u64. */
#define BY_DTYPE(c, a, b, i, u)                                              \
    ((c) == TR_DTYPE_F32 ? (a) : (c) == TR_DTYPE_F64 ? (b) : (c) == TR_DTYPE_U64 ? (u) : (i))

/* The first pass of each kind; `compute` is its compute dtype. */
static struct pass first_pass(enum kind k, enum tr_dtype compute, double ord)
{
    struct pass ps = {compute, NULL, NULL, ord};
    enum tr_dtype c = compute;

    switch (k) {
    case K_SUM:
    case K_MEAN:
        ps.leaf = BY_DTYPE(c, leaf_sum_f32, leaf_sum_f64, leaf_sum_int, leaf_sum_int);
        ps.combine = BY_DTYPE(c, combine_sum_f32, combine_sum_f64, combine_sum_int,
                              combine_sum_int);
        break;
    case K_PROD:
        ps.leaf = BY_DTYPE(c, leaf_prod_f32, leaf_prod_f64, leaf_prod_int, leaf_prod_int);
        ps.combine = BY_DTYPE(c, combine_prod_f32, combine_prod_f64, combine_prod_int,
                              combine_prod_int);
        break;
    case K_MAX:
    case K_LOGSUMEXP:
        ps.leaf = BY_DTYPE(c, leaf_max_f32, leaf_max_f64, leaf_max_i64, leaf_max_u64);
        ps.combine = BY_DTYPE(c, combine_max_f32, combine_max_f64, combine_max_i64,
                              combine_max_u64);
        break;
    case K_MIN:
        ps.leaf = BY_DTYPE(c, leaf_min_f32, leaf_min_f64, leaf_min_i64, leaf_min_u64);
        ps.combine = BY_DTYPE(c, combine_min_f32, combine_min_f64, combine_min_i64,
                              combine_min_u64);
        break;
    case K_ARGMAX:
        ps.leaf = BY_DTYPE(c, leaf_argmax_f32, leaf_argmax_f64, leaf_argmax_i64,
                           leaf_argmax_u64);
        ps.combine = BY_DTYPE(c, combine_max_f32, combine_max_f64, combine_max_i64,
                              combine_max_u64);
        break;
    case K_ARGMIN:
        ps.leaf = BY_DTYPE(c, leaf_argmin_f32, leaf_argmin_f64, leaf_argmin_i64,
                           leaf_argmin_u64);
        ps.combine = BY_DTYPE(c, combine_min_f32, combine_min_f64, combine_min_i64,
                              combine_min_u64);
        break;
    case K_VAR:
    case K_STD:
        ps.leaf = leaf_sum_f64;
        ps.combine = combine_sum_f64;
        break;
    case K_NORM:
        ps.combine = combine_sum_f64;
        if (isinf(ord)) {
            ps.leaf = leaf_absmax_f64;
            ps.combine = combine_max_f64;
        } else if (ord == 1) {
            ps.leaf = leaf_abssum_f64;
        } else if (ord == 2) {
            ps.leaf = leaf_sumsq_f64;
        } else {
            ps.leaf = leaf_powsum_f64;
        }
        break;
    case K_ALL:
        ps.leaf = BY_DTYPE(c, leaf_all_f32, leaf_all_f64, leaf_all_i64, leaf_all_i64);
        ps.combine = combine_all;
        break;
    case K_NANSUM:
    case K_NANMEAN:
        /* integers have no NaN: their nansum is their sum */
        ps.leaf = BY_DTYPE(c, leaf_nansum_f32, leaf_nansum_f64, leaf_sum_int, leaf_sum_int);
        ps.combine = BY_DTYPE(c, combine_nansum_f32, combine_nansum_f64, combine_sum_int,
                              combine_sum_int);
        break;
    case K_NONZERO:
        ps.leaf = BY_DTYPE(c, leaf_nonzero_f32, leaf_nonzero_f64, leaf_nonzero_i64,
                           leaf_nonzero_i64);
        ps.combine = combine_sum_int;
        break;
    case K_ANY:
        ps.leaf = BY_DTYPE(c, leaf_any_f32, leaf_any_f64, leaf_any_i64, leaf_any_i64);
        ps.combine = combine_any;
        break;
    }
    return ps;
}

/* The dtype the values are read in, and the dtype of the finished values
 * before they are stored as the result's dtype. */
static void compute_dtypes(enum kind k, enum tr_dtype x, enum tr_dtype y, enum tr_dtype *in,
                           enum tr_dtype *fin)
{
    switch (k) {
    case K_MAX:
    case K_MIN:
    case K_ARGMAX:
    case K_ARGMIN:
    case K_ALL:
    case K_ANY:
    case K_NONZERO:
        *in = tr__compute_dtype(x);
        break;
    case K_VAR:
    case K_STD:
    case K_NORM:
        *in = TR_DTYPE_F64;
        break;
    default:
        *in = tr__compute_dtype(y);
        break;
    }
    *fin = k == K_ARGMAX || k == K_ARGMIN || k == K_NONZERO ? TR_DTYPE_I64
           : k == K_ALL || k == K_ANY     ? TR_DTYPE_BOOL
                                          : *in;
}

/* Writes output o's finished value (dtype fin) at vals. */
static void finish(enum kind k, enum tr_dtype in, const struct acc *a, int64_t n, double param,
                   double ord, int64_t correction, char *vals)
{
    double d;
    float f;

    switch (k) {
    case K_MEAN:
        if (in == TR_DTYPE_F32) {
            f = a->v.f32 / (float)n;
            memcpy(vals, &f, sizeof f);
        } else {
            d = a->v.f64 / (double)n;
            memcpy(vals, &d, sizeof d);
        }
        return;
    case K_NANMEAN:
        /* the mean of the values that are not NaN: NaN when none is */
        if (in == TR_DTYPE_F32) {
            f = a->v.f32 / (float)a->index;
            memcpy(vals, &f, sizeof f);
        } else {
            d = a->v.f64 / (double)a->index;
            memcpy(vals, &d, sizeof d);
        }
        return;
    case K_ARGMAX:
    case K_ARGMIN:
        memcpy(vals, &a->index, sizeof a->index);
        return;
    case K_NONZERO:
        memcpy(vals, &a->v.u64, sizeof a->v.u64);
        return;
    case K_ALL:
    case K_ANY:
        *vals = (char)(a->v.u64 != 0);
        return;
    case K_VAR:
    case K_STD:
        /* PyTorch's divisor: N - correction, or 0 when that is not
         * positive (giving inf, or NaN for 0 / 0) */
        d = a->v.f64 / (n > correction ? (double)(n - correction) : 0.0);
        if (k == K_STD)
            d = sqrt(d);
        memcpy(vals, &d, sizeof d);
        return;
    case K_NORM:
        d = a->v.f64;
        if (ord == 2)
            d = sqrt(d);
        else if (!isinf(ord) && ord != 1)
            d = pow(d, 1.0 / ord);
        memcpy(vals, &d, sizeof d);
        return;
    case K_LOGSUMEXP:
        /* log(sum(exp(x - m))) + m, m the maximum unless it is infinite:
         * then 0, so that inf - inf never happens (PyTorch's rule) */
        if (in == TR_DTYPE_F32) {
            f = logf(a->v.f32) + (float)param;
            memcpy(vals, &f, sizeof f);
        } else {
            d = log(a->v.f64) + param;
            memcpy(vals, &d, sizeof d);
        }
        return;
    default:
        memcpy(vals, &a->v, tr_dtype_size(in));
        return;
    }
}

static enum kind kind_of(enum tr_op_id id)
{
    switch (id) {
    case TR_OP_MEAN: return K_MEAN;
    case TR_OP_PROD: return K_PROD;
    case TR_OP_MAX: return K_MAX;
    case TR_OP_MIN: return K_MIN;
    case TR_OP_ARGMAX: return K_ARGMAX;
    case TR_OP_ARGMIN: return K_ARGMIN;
    case TR_OP_VAR: return K_VAR;
    case TR_OP_STD: return K_STD;
    case TR_OP_NORM: return K_NORM;
    case TR_OP_ALL: return K_ALL;
    case TR_OP_ANY: return K_ANY;
    case TR_OP_LOGSUMEXP: return K_LOGSUMEXP;
    case TR_OP_NANSUM: return K_NANSUM;
    case TR_OP_NANMEAN: return K_NANMEAN;
    case TR_OP_COUNT_NONZERO: return K_NONZERO;
    default: return K_SUM;
    }
}

/* The reduction op of x, or of src's values when x is NULL, into y (out's
 * dtype and shape, compact). */
static tr_status reduce_into(const struct tr__op *op, const struct tr_arg *args,
                             const struct tr_value *out, const struct tr_tensor *x,
                             const struct tr__source *src, struct tr_tensor *y)
{
    const char *name = op->info.name;
    enum kind k = kind_of(op->info.id);
    const struct tr_arg *ord_arg = tr__arg_named(op, args, "ord"), *corr = tr__arg_named(op, args, "correction");
    double ord = ord_arg ? tr__number(&ord_arg->value) : 2;
    int64_t correction = corr ? corr->value.integer : 0;
    bool two_pass = k == K_VAR || k == K_STD || k == K_LOGSUMEXP;
    enum tr_dtype in, fin;
    struct pass ps;
    struct plan p;
    struct layout l;
    bool flags[TR_MAX_DIMS];
    int64_t cnt, done_outputs = 0;
    size_t fin_size;
    struct tr_tensor *partials = NULL, *tiles = NULL;
    struct acc *accs, *parts;
    double *params;
    char *vals, *ydata, *room;
    tr_status s;

    (void)out; /* y has its dtype and shape */
    s = dims_flags(name, tr__arg_named(op, args, "dim"), x ? x->ndim : src->ndim, flags);
    if (s != TR_OK)
        return s;
    if (x)
        plan_init(&p, x, flags);
    else
        TR_FORWARD_IF_ERROR(plan_init_source(&p, src, flags));
    if (p.nout == 0)
        return TR_OK;
    ydata = tr_tensor_data_mut(y);
    if ((k == K_ARGMAX || k == K_ARGMIN) && p.n == 0)
        return tr__set_error(TR_ERR_SHAPE, "%s: the tensor has no elements to take the %s of",
                             name, name);
    compute_dtypes(k, p.dtype, y->dtype, &in, &fin);
    ps = first_pass(k, in, ord);
    fin_size = tr_dtype_size(fin);
    layout_of(&p, two_pass, fin, tr__team_size(true), &l);
    cnt = l.cnt;
    s = tr__scratch_block(name, l.partials, y->storage->device, &partials);
    if (s == TR_OK)
        s = tr__scratch_block(name, l.tiles, y->storage->device, &tiles);
    if (s != TR_OK)
        goto done;
    room = tr_tensor_data_mut(partials);
    accs = (struct acc *)(void *)(room + l.accs);
    parts = p.nblocks > 1 ? (struct acc *)(void *)(room + l.parts) : NULL;
    params = two_pass ? (double *)(void *)(room + l.params) : NULL;
    vals = room + l.vals;
    for (int64_t o0 = 0; o0 < p.nout; o0 += cnt) {
        int64_t c = p.nout - o0 < cnt ? p.nout - o0 : cnt;
        if (!run_pass(&p, &ps, o0, c, NULL, parts, accs,
                      tiles ? tr_tensor_data_mut(tiles) : NULL, l.tile))
            break;
        if (two_pass) {
            struct pass second = ps;
            for (int64_t o = 0; o < c; o++) {
                double m = in == TR_DTYPE_F32 ? accs[o].v.f32 : accs[o].v.f64;
                if (k == K_LOGSUMEXP)
                    params[o] = isinf(m) ? 0 : m;
                else
                    params[o] = m / (double)p.n; /* the mean, for the deviations */
            }
            if (k == K_LOGSUMEXP) {
                second.leaf = in == TR_DTYPE_F32 ? leaf_expsum_f32 : leaf_expsum_f64;
                second.combine = in == TR_DTYPE_F32 ? combine_sum_f32 : combine_sum_f64;
            } else {
                second.leaf = leaf_sqdev_f64;
            }
            if (!run_pass(&p, &second, o0, c, params, parts, accs,
                          tiles ? tr_tensor_data_mut(tiles) : NULL, l.tile))
                break;
        }
        for (int64_t o = 0; o < c; o++)
            finish(k, in, &accs[o], p.n, params ? params[o] : 0, ord, correction,
                   vals + o * (int64_t)fin_size);
        tr__cpu_cast_row(ydata + o0 * (int64_t)tr_dtype_size(y->dtype),
                         (int64_t)tr_dtype_size(y->dtype), y->dtype, vals, (int64_t)fin_size,
                         fin, c);
        done_outputs = o0 + c;
    }
    if (done_outputs < p.nout)
        s = tr__set_error(TR_ERR_OOM, "%s: out of memory for a thread's scratch", name);
done:
    tr_release(tiles);
    tr_release(partials);
    return s;
}

tr_status tr__k_reduce(const struct tr__op *op, const struct tr_arg *args,
                       const struct tr_value *out, const struct tr_dest *dest,
                       struct tr_tensor **results)
{
    struct tr_tensor *x, *y;
    bool flags[TR_MAX_DIMS];
    tr_status s;

    x = tr__arg_tensor(&args[0], tr_value_dtype(&args[0].value));
    if (!x)
        return tr_last_status();
    s = dims_flags(op->info.name, tr__arg_named(op, args, "dim"), x->ndim, flags);
    y = s == TR_OK ? tr__new_result(op->info.name, out, x->storage->device, dest) : NULL;
    if (s == TR_OK && !y)
        s = tr_last_status();
    if (s == TR_OK)
        s = reduce_into(op, args, out, x, NULL, y);
    tr_release(x);
    if (s != TR_OK) {
        tr_release(y);
        return s;
    }
    results[0] = y;
    return TR_OK;
}

tr_status tr__reduce_source(const struct tr__op *op, const struct tr_arg *args,
                            const struct tr_value *out, const struct tr__source *src,
                            struct tr_tensor *y)
{
    return reduce_into(op, args, out, NULL, src, y);
}

tr_status tr__reduce_flags(const struct tr__op *op, const struct tr_value *dims, int ndim,
                           bool *flags)
{
    struct tr_arg dims_arg;

    memset(&dims_arg, 0, sizeof dims_arg);
    if (dims)
        dims_arg.value = *dims;
    return dims_flags(op->info.name, dims ? &dims_arg : NULL, ndim, flags);
}

enum tr_dtype tr__reduce_compute(const struct tr__op *op, enum tr_dtype x, enum tr_dtype y)
{
    enum tr_dtype in, fin;

    compute_dtypes(kind_of(op->info.id), x, y, &in, &fin);
    return in;
}

tr_status tr__reduce_scratch(const struct tr__op *op, const struct tr_value *x, bool source,
                             const struct tr_value *dims, enum tr_dtype y, int threads,
                             uint64_t *partials, uint64_t *tiles)
{
    enum kind k = kind_of(op->info.id);
    struct tr_arg dims_arg;
    int64_t strides[TR_MAX_DIMS];
    bool flags[TR_MAX_DIMS];
    enum tr_dtype in, fin;
    struct layout l;
    struct plan p;

    *partials = *tiles = 0;
    memset(&dims_arg, 0, sizeof dims_arg);
    if (dims)
        dims_arg.value = *dims;
    TR_FORWARD_IF_ERROR(dims_flags(op->info.name, dims ? &dims_arg : NULL, x->ndim, flags));
    if (source) {
        plan_source_geometry(&p, x->ndim, x->shape, x->dtype, flags);
    } else {
        tr__value_byte_strides(x, strides);
        plan_geometry(&p, x->ndim, x->shape, strides, x->dtype, flags);
    }
    if (p.nout == 0 || ((k == K_ARGMAX || k == K_ARGMIN) && p.n == 0))
        return TR_OK;
    compute_dtypes(k, x->dtype, y, &in, &fin);
    layout_of(&p, k == K_VAR || k == K_STD || k == K_LOGSUMEXP, fin, threads, &l);
    *partials = l.partials;
    *tiles = l.tiles;
    return TR_OK;
}

/* ---------------------------------------------------- cumsum, cumprod */

/* The running sum or product of n values with the carry from the blocks
 * before; floats accumulate in f64 (as PyTorch's CPU cumsum does, so each
 * f32 element is within an ulp or two of the exact running result),
 * integers wrap (an i64 product is the same bits as a u64 one). */
static void scan_f64(double *a, int64_t n, double *carry)
{
    double s = *carry;

    for (int64_t i = 0; i < n; i++) {
        s += a[i];
        a[i] = s;
    }
    *carry = s;
}

static void scan_u64(uint64_t *a, int64_t n, uint64_t *carry)
{
    uint64_t s = *carry;

    for (int64_t i = 0; i < n; i++) {
        s += a[i];
        a[i] = s;
    }
    *carry = s;
}

static void scan_prod_f64(double *a, int64_t n, double *carry)
{
    double s = *carry;

    for (int64_t i = 0; i < n; i++) {
        s *= a[i];
        a[i] = s;
    }
    *carry = s;
}

static void scan_prod_u64(uint64_t *a, int64_t n, uint64_t *carry)
{
    uint64_t s = *carry;

    for (int64_t i = 0; i < n; i++) {
        s *= a[i];
        a[i] = s;
    }
    *carry = s;
}

/* The running sum (cumsum) or product (cumprod) along one dimension: each
 * line (every index of the other dimensions) is scanned in order by one
 * thread; lines are shared out.  A single line is scanned by one thread
 * alone. */
tr_status tr__k_cumsum(const struct tr__op *op, const struct tr_arg *args,
                       const struct tr_value *out, const struct tr_dest *dest,
                       struct tr_tensor **results);
tr_status tr__k_cumsum(const struct tr__op *op, const struct tr_arg *args,
                       const struct tr_value *out, const struct tr_dest *dest,
                       struct tr_tensor **results)
{
    const char *name = op->info.name;
    bool product = op->info.id == TR_OP_CUMPROD;
    void (*scan_float)(double *, int64_t, double *) = product ? scan_prod_f64 : scan_f64;
    void (*scan_int)(uint64_t *, int64_t, uint64_t *) = product ? scan_prod_u64 : scan_u64;
    int64_t xs[TR_MAX_DIMS], ys[TR_MAX_DIMS], oshape[TR_MAX_DIMS], oxs[TR_MAX_DIMS],
        oys[TR_MAX_DIMS];
    const int64_t *sp[2] = {oxs, oys};
    struct tr_tensor *x, *y = NULL;
    struct tr__iter lines;
    enum tr_dtype compute;
    int64_t len = 1, xstep = 0, ystep = 0, nlines;
    const char *xbase;
    char *ybase;
    int d = 0, no = 0;
    tr_status s = TR_OK;

    x = tr__arg_tensor(&args[0], tr_value_dtype(&args[0].value));
    if (!x)
        return tr_last_status();
    if (x->ndim > 0)
        s = tr__normalize_dim(name, (int)args[1].value.integer, x->ndim, &d);
    if (s == TR_OK) {
        y = tr__new_result(name, out, x->storage->device, dest);
        if (!y)
            s = tr_last_status();
    }
    if (s != TR_OK || tr_tensor_numel(y) == 0)
        goto done;
    compute = tr_dtype_is_float(y->dtype) ? TR_DTYPE_F64 : tr__compute_dtype(y->dtype);
    tr__byte_strides(x, xs);
    tr__byte_strides(y, ys);
    for (int i = 0; i < x->ndim; i++) {
        if (i == d) {
            len = x->shape[i];
            xstep = xs[i];
            ystep = ys[i];
            continue;
        }
        oshape[no] = x->shape[i];
        oxs[no] = xs[i];
        oys[no++] = ys[i];
    }
    tr__iter_init(&lines, no, oshape, 2, sp);
    nlines = tr__iter_count(&lines);
    xbase = tr_tensor_data(x);
    ybase = tr_tensor_data_mut(y);

#pragma omp parallel num_threads(tr_num_threads()) \
    if (nlines > 1 && nlines * len > PARALLEL_ELEMENTS)
    {
        _Alignas(64) char buf[BLOCK * 8];

#pragma omp for schedule(static)
        for (int64_t l = 0; l < nlines; l++) {
            int64_t off[2];
            double fcarry = product;
            uint64_t icarry = product;

            tr__iter_offsets(&lines, l, off);
            for (int64_t first = 0; first < len; first += BLOCK) {
                int64_t m = len - first < BLOCK ? len - first : BLOCK;
                tr__cpu_cast_row(buf, 8, compute, xbase + off[0] + first * xstep, xstep,
                                 x->dtype, m);
                if (compute == TR_DTYPE_F64)
                    scan_float((double *)(void *)buf, m, &fcarry);
                else
                    scan_int((uint64_t *)(void *)buf, m, &icarry);
                tr__cpu_cast_row(ybase + off[1] + first * ystep, ystep, y->dtype, buf, 8,
                                 compute, m);
            }
        }
    }
done:
    tr_release(x);
    if (s != TR_OK) {
        tr_release(y);
        return s;
    }
    results[0] = y;
    return TR_OK;
}
