/*
 * ew_scalar.h - the elementwise ops one value at a time: the functions
 * that the CPU's loops (cpu/elementwise.c) and the CUDA module's kernels
 * (cuda/map.cu) both call, so that a value is computed by the same
 * expression on either.  Plain C that nvcc also compiles as device code:
 * no libc but math.h, no compound literals, no _Generic.
 *
 * The ops themselves are listed once, in ew_ops.def; including it with the
 * five macros UNARY, PREDICATE, BINARY, WHERE and CLAMP defined gives each
 * of them, by name (neg_f32, eq_u64, ...).  This header includes it once to
 * make a function tr__ew_NAME per entry and a code TR__EW_NAME per entry
 * (enum tr__ew_code), which is how an op is named to the CUDA module.
 */
#ifndef TR_EW_SCALAR_H
#define TR_EW_SCALAR_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __CUDACC__
#define TR_HD __host__ __device__
#else
#define TR_HD
#endif

/* What an elementwise op reads besides its operands. */
struct tr__ew_params {
    int which;      /* clamp's bounds: bit 0 min, bit 1 max */
    bool flag;      /* isclose's equal_nan */
    double v[3];    /* softplus: beta, threshold; leaky_relu: negative_slope;
                       elu: alpha; nan_to_num: nan, posinf, neginf; round:
                       10 to the number of decimals (or of -decimals);
                       isclose: rtol, atol */
};

/* ------------------------------------------------------------- helpers */

/* integer power by squaring, wrapping; q >= 0 (the binary kernel refuses
 * a negative exponent before computing) */
TR_HD static inline int64_t tr__ew_ipow(int64_t p, int64_t q)
{
    uint64_t r = 1, base = (uint64_t)p;

    for (uint64_t e = q < 0 ? 0 : (uint64_t)q; e; e >>= 1) {
        if (e & 1)
            r *= base;
        base *= base;
    }
    return (int64_t)r;
}

TR_HD static inline uint64_t tr__ew_upow(uint64_t p, uint64_t q)
{
    uint64_t r = 1;

    for (; q; q >>= 1) {
        if (q & 1)
            r *= p;
        p *= p;
    }
    return r;
}

/* Floor division and the modulo with the divisor's sign, of floats as
 * NumPy, PyTorch and Python compute them: from fmod, so that the
 * remainder is exact and the quotient consistent with it. */
#define TR__EW_FLOOR_DIVMOD(T, suffix)                                       \
    TR_HD static inline T tr__ew_floor_div_##T(T a, T b)                     \
    {                                                                        \
        T mod = fmod##suffix(a, b), div, q;                                  \
        if (b == 0)                                                          \
            return a / b;                                                    \
        div = (a - mod) / b;                                                 \
        if (mod != 0 && (b < 0) != (mod < 0))                                \
            div -= 1;                                                        \
        if (div == 0)                                                        \
            return copysign##suffix((T)0, a / b);                             \
        q = floor##suffix(div);                                              \
        return div - q > (T)0.5 ? q + 1 : q;                                 \
    }                                                                        \
    TR_HD static inline T tr__ew_floor_mod_##T(T a, T b)                     \
    {                                                                        \
        T mod = fmod##suffix(a, b);                                          \
        if (mod == 0 || b == 0)                                              \
            return mod; /* a zero keeps a's sign, as in PyTorch */           \
        return (b < 0) != (mod < 0) ? mod + b : mod;                         \
    }

TR__EW_FLOOR_DIVMOD(float, f)
TR__EW_FLOOR_DIVMOD(double, )

/* Integers: a divisor of 0 gives 0 (NumPy's choice; PyTorch raises), and
 * -1 is taken apart, where INT64_MIN / -1 would trap. */
TR_HD static inline int64_t tr__ew_floor_div_i64(int64_t a, int64_t b)
{
    int64_t q;

    if (b == 0)
        return 0;
    if (b == -1)
        return (int64_t)(0 - (uint64_t)a);
    q = a / b;
    return a % b != 0 && (a < 0) != (b < 0) ? q - 1 : q;
}

TR_HD static inline int64_t tr__ew_floor_mod_i64(int64_t a, int64_t b)
{
    int64_t r;

    if (b == 0 || b == -1)
        return 0;
    r = a % b;
    return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}

TR_HD static inline int64_t tr__ew_trunc_mod_i64(int64_t a, int64_t b)
{
    return b == 0 || b == -1 ? 0 : a % b;
}

/* isclose, in double: equal values (infinities too) are close, NaN only
 * to NaN with equal_nan (P->flag), and finite ones within atol + rtol *
 * |b| (P->v[0] rtol, P->v[1] atol).  Integers' distance is exact. */
TR_HD static inline bool tr__ew_close_f64(double a, double b, const struct tr__ew_params *P)
{
    if (a == b)
        return true;
    if (a != a || b != b)
        return P->flag && a != a && b != b;
    if (isinf(a) || isinf(b))
        return false;
    return fabs(a - b) <= P->v[1] + P->v[0] * fabs(b);
}

TR_HD static inline bool tr__ew_close_i64(int64_t a, int64_t b, const struct tr__ew_params *P)
{
    uint64_t d = a >= b ? (uint64_t)a - (uint64_t)b : (uint64_t)b - (uint64_t)a;

    return d == 0 || (double)d <= P->v[1] + P->v[0] * fabs((double)b);
}

TR_HD static inline bool tr__ew_close_u64(uint64_t a, uint64_t b, const struct tr__ew_params *P)
{
    uint64_t d = a >= b ? a - b : b - a;

    return d == 0 || (double)d <= P->v[1] + P->v[0] * (double)b;
}

/* softplus as max(z, 0) + log1p(exp(-|z|)), z = beta * x: the same value
 * as log1p(exp(z)), without overflow for a large z however high the
 * threshold */
TR_HD static inline float tr__ew_softplus_value_f32(float v, float beta, float threshold)
{
    float z = v * beta;

    return z > threshold ? v : (fmaxf(z, 0.0f) + log1pf(expf(-fabsf(z)))) / beta;
}

TR_HD static inline double tr__ew_softplus_value_f64(double v, double beta, double threshold)
{
    double z = v * beta;

    return z > threshold ? v : (fmax(z, 0.0) + log1p(exp(-fabs(z)))) / beta;
}

/* ------------------------------------------------------ the op families */

/* The families ew_ops.def writes its entries in, over the five base
 * macros its includer defines. */
#define UNARY_FLOAT(op, e32, e64)                                            \
    UNARY(op##_f32, float, e32)                                              \
    UNARY(op##_f64, double, e64)
#define UNARY_ALL(op, e32, e64, ei, eu)                                      \
    UNARY_FLOAT(op, e32, e64)                                                \
    UNARY(op##_i64, int64_t, ei)                                             \
    UNARY(op##_u64, uint64_t, eu)
#define BINARY_ALL(op, ef, ei, eu)                                           \
    BINARY(op##_f32, float, float, ef)                                       \
    BINARY(op##_f64, double, double, ef)                                     \
    BINARY(op##_i64, int64_t, int64_t, ei)                                   \
    BINARY(op##_u64, uint64_t, uint64_t, eu)
#define COMPARE_ALL(op, expr)                                                \
    BINARY(op##_f32, float, uint8_t, expr)                                   \
    BINARY(op##_f64, double, uint8_t, expr)                                  \
    BINARY(op##_i64, int64_t, uint8_t, expr)                                 \
    BINARY(op##_u64, uint64_t, uint8_t, expr)
#define SELECT3_ALL(FAMILY, op)                                              \
    FAMILY(op##_f32, float)                                                  \
    FAMILY(op##_f64, double)                                                 \
    FAMILY(op##_i64, int64_t)                                                \
    FAMILY(op##_u64, uint64_t)

/* One function per entry: v is a unary op's value; p and q a binary op's;
 * P the parameters. */
#define UNARY(name, T, expr)                                                 \
    TR_HD static inline T tr__ew_##name(T v, const struct tr__ew_params *P)  \
    {                                                                        \
        (void)P;                                                             \
        return (expr);                                                       \
    }
#define PREDICATE(name, T, expr)                                             \
    TR_HD static inline uint8_t tr__ew_##name(T v, const struct tr__ew_params *P) \
    {                                                                        \
        (void)P;                                                             \
        return (uint8_t)(expr);                                              \
    }
#define BINARY(name, T, U, expr)                                             \
    TR_HD static inline U tr__ew_##name(T p, T q, const struct tr__ew_params *P) \
    {                                                                        \
        (void)P;                                                             \
        return (U)(expr);                                                    \
    }
/* where(c, a, b): c is the condition, already a truth value */
#define WHERE(name, T)                                                       \
    TR_HD static inline T tr__ew_##name(T c, T a, T b, const struct tr__ew_params *P) \
    {                                                                        \
        (void)P;                                                             \
        return c != 0 ? a : b;                                               \
    }
/* clamp(x, lo, hi) of the bounds present (P->which: bit 0 min, bit 1
 * max); a NaN bound wins, and a NaN x stays NaN */
#define CLAMP(name, T)                                                       \
    TR_HD static inline T tr__ew_##name(T x, T lo, T hi, const struct tr__ew_params *P) \
    {                                                                        \
        T v = x;                                                             \
        if ((P->which & 1) && (v < lo || lo != lo))                          \
            v = lo;                                                          \
        if ((P->which & 2) && (v > hi || hi != hi))                          \
            v = hi;                                                          \
        return x != x ? x : v;                                               \
    }
#include "ew_ops.def"
#undef UNARY
#undef PREDICATE
#undef BINARY
#undef WHERE
#undef CLAMP

/* Each entry's code; TR__EW_NONE (0) is the operand itself, converted. */
#define UNARY(name, T, expr) TR__EW_##name,
#define PREDICATE(name, T, expr) TR__EW_##name,
#define BINARY(name, T, U, expr) TR__EW_##name,
#define WHERE(name, T) TR__EW_##name,
#define CLAMP(name, T) TR__EW_##name,
enum tr__ew_code {
    TR__EW_NONE,
#include "ew_ops.def"
    TR__EW_CODES
};
#undef UNARY
#undef PREDICATE
#undef BINARY
#undef WHERE
#undef CLAMP

#endif /* TR_EW_SCALAR_H */
