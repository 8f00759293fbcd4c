/*
 * cpu/elementwise.c - the unary and binary ops, where and clamp, on the
 * blocked loop of map.c.  Each op has a loop per compute dtype (f32, f64,
 * i64, u64); f16 and bf16 are computed in f32; integer arithmetic wraps.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "fused_impl.h"

/* The loops of one op, by compute dtype; NULL where the op has none. */
struct loops {
    tr__block_fn f32, f64, i64, u64;
};

static tr__block_fn pick(const struct loops *l, enum tr_dtype compute)
{
    if (!l)
        return NULL;
    switch (compute) {
    case TR_DTYPE_F32: return l->f32;
    case TR_DTYPE_F64: return l->f64;
    case TR_DTYPE_U64: return l->u64;
    default: return l->i64;
    }
}

/* The loops of op id in table (indexed by op id), or NULL. */
static const struct loops *loops_of(const struct loops *table, enum tr_op_id id)
{
    return table[id].f32 || table[id].i64 ? &table[id] : NULL;
}

/* ---------------------------------------------------------------- unary */

/* expr of v, the value; P, the op's parameters (struct tr__ew_params) */
#define UNARY(name, T, expr)                                                 \
    static void name(char *out, const char *const *in, int64_t n, const void *ctx) \
    {                                                                        \
        const T *x = (const T *)(const void *)in[0];                         \
        const struct tr__ew_params *P = ctx;                                 \
        T *y = (T *)(void *)out;                                             \
        (void)P;                                                             \
        for (int64_t i = 0; i < n; i++) {                                    \
            T v = x[i];                                                      \
            y[i] = (expr);                                                   \
        }                                                                    \
    }

#define UNARY_FLOAT(op, e32, e64)                                            \
    UNARY(op##_f32, float, e32)                                              \
    UNARY(op##_f64, double, e64)

#define UNARY_ALL(op, e32, e64, ei, eu)                                      \
    UNARY_FLOAT(op, e32, e64)                                                \
    UNARY(op##_i64, int64_t, ei)                                             \
    UNARY(op##_u64, uint64_t, eu)

UNARY_ALL(neg, -v, -v, (int64_t)(0 - (uint64_t)v), 0 - v)
UNARY_ALL(abs, fabsf(v), fabs(v), v < 0 ? (int64_t)(0 - (uint64_t)v) : v, v)
UNARY_ALL(sign, (float)((v > 0) - (v < 0)) + (v != v ? v : 0),
          (double)((v > 0) - (v < 0)) + (v != v ? v : 0), (v > 0) - (v < 0), v > 0)
UNARY_ALL(square, v * v, v * v, (int64_t)((uint64_t)v * (uint64_t)v), v * v)
UNARY_ALL(relu, v > 0 || v != v ? v : 0.0f, v > 0 || v != v ? v : 0.0, v > 0 ? v : 0, v)
UNARY_ALL(floor, floorf(v), floor(v), v, v)
UNARY_ALL(ceil, ceilf(v), ceil(v), v, v)
UNARY_ALL(round, nearbyintf(v), nearbyint(v), v, v)
UNARY_ALL(trunc, truncf(v), trunc(v), v, v)
UNARY(bitwise_not_i64, int64_t, ~v)
UNARY(bitwise_not_u64, uint64_t, ~v)
/* round(x, decimals): v[0] is 10^decimals, or 10^-decimals for the
 * negative ones (PyTorch's formula, in the compute dtype); integers with
 * negative decimals go through double, as NumPy's do */
UNARY_FLOAT(round_up, nearbyintf(v * (float)P->v[0]) / (float)P->v[0],
            nearbyint(v * P->v[0]) / P->v[0])
UNARY_ALL(round_down, nearbyintf(v / (float)P->v[0]) * (float)P->v[0],
          nearbyint(v / P->v[0]) * P->v[0], (int64_t)(nearbyint((double)v / P->v[0]) * P->v[0]),
          (uint64_t)(nearbyint((double)v / P->v[0]) * P->v[0]))
UNARY_ALL(nan_to_num, v != v ? (float)P->v[0] : v == INFINITY ? (float)P->v[1] : v == -INFINITY ? (float)P->v[2] : v,
          v != v ? P->v[0] : v == INFINITY ? P->v[1] : v == -INFINITY ? P->v[2] : v, v, v)
UNARY_FLOAT(exp, expf(v), exp(v))
UNARY_FLOAT(exp2, exp2f(v), exp2(v))
UNARY_FLOAT(log, logf(v), log(v))
UNARY_FLOAT(log2, log2f(v), log2(v))
UNARY_FLOAT(log10, log10f(v), log10(v))
UNARY_FLOAT(log1p, log1pf(v), log1p(v))
UNARY_FLOAT(expm1, expm1f(v), expm1(v))
UNARY_FLOAT(sqrt, sqrtf(v), sqrt(v))
UNARY_FLOAT(rsqrt, 1.0f / sqrtf(v), 1.0 / sqrt(v))
UNARY_FLOAT(reciprocal, 1.0f / v, 1.0 / v)
UNARY_FLOAT(sin, sinf(v), sin(v))
UNARY_FLOAT(cos, cosf(v), cos(v))
UNARY_FLOAT(tan, tanf(v), tan(v))
UNARY_FLOAT(asin, asinf(v), asin(v))
UNARY_FLOAT(acos, acosf(v), acos(v))
UNARY_FLOAT(atan, atanf(v), atan(v))
UNARY_FLOAT(sinh, sinhf(v), sinh(v))
UNARY_FLOAT(cosh, coshf(v), cosh(v))
UNARY_FLOAT(tanh, tanhf(v), tanh(v))
UNARY_FLOAT(asinh, asinhf(v), asinh(v))
UNARY_FLOAT(acosh, acoshf(v), acosh(v))
UNARY_FLOAT(atanh, atanhf(v), atanh(v))
UNARY_FLOAT(sigmoid, 1.0f / (1.0f + expf(-v)), 1.0 / (1.0 + exp(-v)))
UNARY_FLOAT(silu, v / (1.0f + expf(-v)), v / (1.0 + exp(-v)))
UNARY_FLOAT(erf, erff(v), erf(v))
UNARY_FLOAT(leaky_relu, v > 0 ? v : v * (float)P->v[0], v > 0 ? v : v * P->v[0])
UNARY_FLOAT(elu, v > 0 ? v : (float)P->v[0] * expm1f(v), v > 0 ? v : P->v[0] * expm1(v))

/* softplus as max(z, 0) + log1p(exp(-|z|)), z = beta * x: the same value
 * as log1p(exp(z)), without overflow for a large z however high the
 * threshold */
static float softplus_value_f32(float v, float beta, float threshold)
{
    float z = v * beta;

    return z > threshold ? v : (fmaxf(z, 0.0f) + log1pf(expf(-fabsf(z)))) / beta;
}

static double softplus_value_f64(double v, double beta, double threshold)
{
    double z = v * beta;

    return z > threshold ? v : (fmax(z, 0.0) + log1p(exp(-fabs(z)))) / beta;
}

UNARY_FLOAT(softplus, v != v ? v : softplus_value_f32(v, (float)P->v[0], (float)P->v[1]),
            v != v ? v : softplus_value_f64(v, P->v[0], P->v[1]))
UNARY_FLOAT(gelu_none, 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)),
            0.5 * v * (1.0 + erf(v * 0.70710678118654752440)))
UNARY_FLOAT(gelu_tanh,
            0.5f * v * (1.0f + tanhf(0.79788456080286536f * (v + 0.044715f * v * v * v))),
            0.5 * v * (1.0 + tanh(0.79788456080286535588 * (v + 0.044715 * v * v * v))))

/* Predicates: a compute-typed input, bool (u8) out. */
#define PREDICATE(name, T, expr)                                             \
    static void name(char *out, const char *const *in, int64_t n, const void *ctx) \
    {                                                                        \
        const T *x = (const T *)(const void *)in[0];                         \
        uint8_t *y = (uint8_t *)out;                                         \
        (void)ctx;                                                           \
        for (int64_t i = 0; i < n; i++) {                                    \
            T v = x[i];                                                      \
            y[i] = (uint8_t)(expr);                                          \
        }                                                                    \
    }

PREDICATE(isnan_f32, float, v != v)
PREDICATE(isnan_f64, double, v != v)
PREDICATE(isnan_int, int64_t, v != v)
PREDICATE(isinf_f32, float, isinf(v))
PREDICATE(isinf_f64, double, isinf(v))
PREDICATE(isposinf_f32, float, v == INFINITY)
PREDICATE(isposinf_f64, double, v == INFINITY)
PREDICATE(isneginf_f32, float, v == -INFINITY)
PREDICATE(isneginf_f64, double, v == -INFINITY)
PREDICATE(isfinite_f32, float, isfinite(v))
PREDICATE(isfinite_f64, double, isfinite(v))
PREDICATE(isfinite_int, int64_t, v == v)
PREDICATE(not_f32, float, v == 0)
PREDICATE(not_f64, double, v == 0)
PREDICATE(not_i64, int64_t, v == 0)
PREDICATE(not_u64, uint64_t, v == 0)

static const struct loops unary_loops[TR_OP_COUNT] = {
    [TR_OP_NEG] = {neg_f32, neg_f64, neg_i64, neg_u64},
    [TR_OP_ABS] = {abs_f32, abs_f64, abs_i64, abs_u64},
    [TR_OP_SIGN] = {sign_f32, sign_f64, sign_i64, sign_u64},
    [TR_OP_SQUARE] = {square_f32, square_f64, square_i64, square_u64},
    [TR_OP_RELU] = {relu_f32, relu_f64, relu_i64, relu_u64},
    [TR_OP_FLOOR] = {floor_f32, floor_f64, floor_i64, floor_u64},
    [TR_OP_CEIL] = {ceil_f32, ceil_f64, ceil_i64, ceil_u64},
    [TR_OP_ROUND] = {round_f32, round_f64, round_i64, round_u64},
    [TR_OP_TRUNC] = {trunc_f32, trunc_f64, trunc_i64, trunc_u64},
    [TR_OP_BITWISE_NOT] = {NULL, NULL, bitwise_not_i64, bitwise_not_u64},
    [TR_OP_NAN_TO_NUM] = {nan_to_num_f32, nan_to_num_f64, nan_to_num_i64, nan_to_num_u64},
    [TR_OP_EXP] = {exp_f32, exp_f64, NULL, NULL},
    [TR_OP_EXP2] = {exp2_f32, exp2_f64, NULL, NULL},
    [TR_OP_LOG] = {log_f32, log_f64, NULL, NULL},
    [TR_OP_LOG2] = {log2_f32, log2_f64, NULL, NULL},
    [TR_OP_LOG10] = {log10_f32, log10_f64, NULL, NULL},
    [TR_OP_LOG1P] = {log1p_f32, log1p_f64, NULL, NULL},
    [TR_OP_EXPM1] = {expm1_f32, expm1_f64, NULL, NULL},
    [TR_OP_SQRT] = {sqrt_f32, sqrt_f64, NULL, NULL},
    [TR_OP_RSQRT] = {rsqrt_f32, rsqrt_f64, NULL, NULL},
    [TR_OP_RECIPROCAL] = {reciprocal_f32, reciprocal_f64, NULL, NULL},
    [TR_OP_SIN] = {sin_f32, sin_f64, NULL, NULL},
    [TR_OP_COS] = {cos_f32, cos_f64, NULL, NULL},
    [TR_OP_TAN] = {tan_f32, tan_f64, NULL, NULL},
    [TR_OP_ASIN] = {asin_f32, asin_f64, NULL, NULL},
    [TR_OP_ACOS] = {acos_f32, acos_f64, NULL, NULL},
    [TR_OP_ATAN] = {atan_f32, atan_f64, NULL, NULL},
    [TR_OP_SINH] = {sinh_f32, sinh_f64, NULL, NULL},
    [TR_OP_COSH] = {cosh_f32, cosh_f64, NULL, NULL},
    [TR_OP_TANH] = {tanh_f32, tanh_f64, NULL, NULL},
    [TR_OP_ASINH] = {asinh_f32, asinh_f64, NULL, NULL},
    [TR_OP_ACOSH] = {acosh_f32, acosh_f64, NULL, NULL},
    [TR_OP_ATANH] = {atanh_f32, atanh_f64, NULL, NULL},
    [TR_OP_SIGMOID] = {sigmoid_f32, sigmoid_f64, NULL, NULL},
    [TR_OP_SILU] = {silu_f32, silu_f64, NULL, NULL},
    [TR_OP_ERF] = {erf_f32, erf_f64, NULL, NULL},
    [TR_OP_SOFTPLUS] = {softplus_f32, softplus_f64, NULL, NULL},
    [TR_OP_LEAKY_RELU] = {leaky_relu_f32, leaky_relu_f64, NULL, NULL},
    [TR_OP_ELU] = {elu_f32, elu_f64, NULL, NULL},
    [TR_OP_ISNAN] = {isnan_f32, isnan_f64, isnan_int, isnan_int},
    [TR_OP_ISINF] = {isinf_f32, isinf_f64, isnan_int, isnan_int},
    [TR_OP_ISPOSINF] = {isposinf_f32, isposinf_f64, isnan_int, isnan_int},
    [TR_OP_ISNEGINF] = {isneginf_f32, isneginf_f64, isnan_int, isnan_int},
    [TR_OP_ISFINITE] = {isfinite_f32, isfinite_f64, isfinite_int, isfinite_int},
    [TR_OP_LOGICAL_NOT] = {not_f32, not_f64, not_i64, not_u64},
};

/* The largest finite value of float dtype d, and the lowest. */
static double largest_finite(enum tr_dtype d)
{
    switch (d) {
    case TR_DTYPE_F16: return 65504.0;
    case TR_DTYPE_BF16: return 0x1.fep127;
    case TR_DTYPE_F32: return FLT_MAX;
    default: return DBL_MAX;
    }
}

/* How unary op runs on args giving out: the loop (gelu's by its
 * approximate argument, round's by its decimals, bitwise_not of bool as
 * logical_not), its compute dtypes and parameters.  False when there is
 * no loop for these dtypes. */
static bool unary_plan(const struct tr__op *op, const struct tr_arg *args,
                       const struct tr_value *out, struct tr__ew_desc *d)
{
    static const struct loops gelu_none = {gelu_none_f32, gelu_none_f64, NULL, NULL};
    static const struct loops gelu_tanh = {gelu_tanh_f32, gelu_tanh_f64, NULL, NULL};
    static const struct loops round_up = {round_up_f32, round_up_f64, round_i64, round_u64};
    static const struct loops round_down = {round_down_f32, round_down_f64, round_down_i64,
                                            round_down_u64};
    static const struct loops logical_not = {NULL, NULL, not_i64, NULL};
    enum tr_dtype x = args[0].tensor ? args[0].tensor->dtype : tr_value_dtype(&args[0].value);
    bool predicate = op->rule == TR__RULE_PREDICATE;
    const struct loops *l = loops_of(unary_loops, op->info.id);
    struct tr__ew_params *P = &d->params;

    d->in_compute = tr__compute_dtype(predicate ? x : out->dtype);
    d->out_compute = predicate ? TR_DTYPE_BOOL : d->in_compute;
    d->nin = 1;
    switch (op->info.id) {
    case TR_OP_GELU:
        l = strcmp(args[1].value.string, "tanh") == 0 ? &gelu_tanh : &gelu_none;
        break;
    case TR_OP_ROUND:
        if (args[1].value.integer != 0) {
            int64_t decimals = args[1].value.integer;
            P->v[0] = pow(10.0, (double)(decimals < 0 ? -decimals : decimals));
            l = decimals < 0 ? &round_down : &round_up;
        }
        break;
    case TR_OP_BITWISE_NOT:
        if (x == TR_DTYPE_BOOL) {
            l = &logical_not;
            d->out_compute = TR_DTYPE_BOOL;
        }
        break;
    case TR_OP_SOFTPLUS:
    case TR_OP_LEAKY_RELU:
    case TR_OP_ELU:
        P->v[0] = tr__number(&args[1].value);
        P->v[1] = op->info.id == TR_OP_SOFTPLUS ? tr__number(&args[2].value) : 0;
        break;
    case TR_OP_NAN_TO_NUM:
        P->v[0] = tr__number(&args[1].value);
        P->v[1] = args[2].value.kind == TR_VALUE_NONE ? largest_finite(out->dtype)
                                                      : tr__number(&args[2].value);
        P->v[2] = args[3].value.kind == TR_VALUE_NONE ? -largest_finite(out->dtype)
                                                      : tr__number(&args[3].value);
        break;
    default:
        break;
    }
    d->fn = pick(l, d->in_compute);
    return d->fn != NULL;
}

/* The unary ops: computed in the result's compute dtype, or for the
 * predicates in the input's, giving bool. */
tr_status tr__k_unary(const struct tr__op *op, const struct tr_arg *args,
                      const struct tr_value *out, const struct tr_dest *dest,
                      struct tr_tensor **results);
tr_status tr__k_unary(const struct tr__op *op, const struct tr_arg *args,
                      const struct tr_value *out, const struct tr_dest *dest,
                      struct tr_tensor **results)
{
    const char *name = op->info.name;
    struct tr_tensor *x, *y = NULL;
    struct tr__store store = {0}; /* fn not NULL: y is streamed */
    struct tr__ew_desc d = {0};
    tr_status s;

    x = args[0].tensor ? tr__tensor_alias(args[0].tensor)
                       : tr__arg_tensor(&args[0], tr_value_dtype(&args[0].value));
    if (!x)
        return tr_last_status();
    if (!unary_plan(op, args, out, &d)) {
        tr_release(x);
        return tr__set_error(TR_ERR_STATE, "%s: no loop for %s", name,
                             tr_dtype_name(d.in_compute));
    }
    y = tr__stream_result(name, out, x->storage->device, dest, &store);
    s = y ? tr__map_stream(y, &store, d.out_compute, (const struct tr_tensor *const[]){x}, 1,
                           d.in_compute, d.fn, &d.params)
          : tr_last_status();
    tr_release(x);
    if (s != TR_OK) {
        tr_release(y);
        return s;
    }
    results[0] = y;
    return TR_OK;
}

/* --------------------------------------------------------------- binary */

/* omp simd: the loops vectorise despite the pointers' possible aliasing
 * (outputs never overlap inputs except exactly, in place).  Each element
 * is the same IEEE operation, or the same libm call (math.h declares no
 * vector variants without -ffast-math), so the bits do not change. */
#define BINARY(name, T, U, expr)                                             \
    TR__VECTOR_CLONES static void name(char *out, const char *const *in, int64_t n, const void *ctx) \
    {                                                                        \
        const T *a = (const T *)(const void *)in[0];                         \
        const T *b = (const T *)(const void *)in[1];                         \
        const struct tr__ew_params *P = ctx;                                 \
        U *y = (U *)(void *)out;                                             \
        (void)P;                                                             \
        _Pragma("omp simd")                                                  \
        for (int64_t i = 0; i < n; i++) {                                    \
            T p = a[i], q = b[i];                                            \
            y[i] = (U)(expr);                                                \
        }                                                                    \
    }

#define BINARY_ALL(op, ef, ei, eu)                                           \
    BINARY(op##_f32, float, float, ef)                                       \
    BINARY(op##_f64, double, double, ef)                                     \
    BINARY(op##_i64, int64_t, int64_t, ei)                                   \
    BINARY(op##_u64, uint64_t, uint64_t, eu)

/* integer power by squaring, wrapping; q >= 0 (tr__k_binary refuses a
 * negative exponent before computing) */
static int64_t ipow(int64_t p, int64_t q)
{
    uint64_t r = 1, base = (uint64_t)p;

    for (uint64_t e = q < 0 ? 0 : (uint64_t)q; e; e >>= 1) {
        if (e & 1)
            r *= base;
        base *= base;
    }
    return (int64_t)r;
}

static uint64_t upow(uint64_t p, uint64_t q)
{
    uint64_t r = 1;

    for (; q; q >>= 1) {
        if (q & 1)
            r *= p;
        p *= p;
    }
    return r;
}

BINARY_ALL(add, p + q, (int64_t)((uint64_t)p + (uint64_t)q), p + q)
BINARY_ALL(sub, p - q, (int64_t)((uint64_t)p - (uint64_t)q), p - q)
BINARY_ALL(mul, p * q, (int64_t)((uint64_t)p * (uint64_t)q), p * q)
BINARY(div_f32, float, float, p / q)
BINARY(div_f64, double, double, p / q)
BINARY(pow_f32, float, float, powf(p, q))
BINARY(pow_f64, double, double, pow(p, q))
BINARY(pow_i64, int64_t, int64_t, ipow(p, q))
BINARY(pow_u64, uint64_t, uint64_t, upow(p, q))
/* Floor division and the modulo with the divisor's sign, of floats as
 * NumPy, PyTorch and Python compute them: from fmod, so that the
 * remainder is exact and the quotient consistent with it. */
#define FLOOR_DIVMOD(T, suffix)                                              \
    static T floor_div_##suffix(T a, T b)                                    \
    {                                                                        \
        T mod = fmod##suffix(a, b), div, q;                                  \
        if (b == 0)                                                          \
            return a / b;                                                    \
        div = (a - mod) / b;                                                 \
        if (mod != 0 && (b < 0) != (mod < 0))                                \
            div -= 1;                                                        \
        if (div == 0)                                                        \
            return copysign##suffix(0, a / b);                               \
        q = floor##suffix(div);                                              \
        return div - q > (T)0.5 ? q + 1 : q;                                 \
    }                                                                        \
    static T floor_mod_##suffix(T a, T b)                                    \
    {                                                                        \
        T mod = fmod##suffix(a, b);                                          \
        if (mod == 0 || b == 0)                                              \
            return mod; /* a zero keeps a's sign, as in PyTorch */           \
        return (b < 0) != (mod < 0) ? mod + b : mod;                         \
    }

FLOOR_DIVMOD(float, f)
FLOOR_DIVMOD(double, )

/* Integers: a divisor of 0 gives 0 (NumPy's choice; PyTorch raises), and
 * -1 is taken apart, where INT64_MIN / -1 would trap. */
static int64_t floor_div_i64(int64_t a, int64_t b)
{
    int64_t q;

    if (b == 0)
        return 0;
    if (b == -1)
        return (int64_t)(0 - (uint64_t)a);
    q = a / b;
    return a % b != 0 && (a < 0) != (b < 0) ? q - 1 : q;
}

static int64_t floor_mod_i64(int64_t a, int64_t b)
{
    int64_t r;

    if (b == 0 || b == -1)
        return 0;
    r = a % b;
    return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}

static int64_t trunc_mod_i64(int64_t a, int64_t b)
{
    return b == 0 || b == -1 ? 0 : a % b;
}

/* isclose, in double: equal values (infinities too) are close, NaN only
 * to NaN with equal_nan (P->flag), and finite ones within atol + rtol *
 * |b| (P->v[0] rtol, P->v[1] atol).  Integers' distance is exact. */
static bool close_f64(double a, double b, const struct tr__ew_params *P)
{
    if (a == b)
        return true;
    if (a != a || b != b)
        return P->flag && a != a && b != b;
    if (isinf(a) || isinf(b))
        return false;
    return fabs(a - b) <= P->v[1] + P->v[0] * fabs(b);
}

static bool close_i64(int64_t a, int64_t b, const struct tr__ew_params *P)
{
    uint64_t d = a >= b ? (uint64_t)a - (uint64_t)b : (uint64_t)b - (uint64_t)a;

    return d == 0 || (double)d <= P->v[1] + P->v[0] * fabs((double)b);
}

static bool close_u64(uint64_t a, uint64_t b, const struct tr__ew_params *P)
{
    uint64_t d = a >= b ? a - b : b - a;

    return d == 0 || (double)d <= P->v[1] + P->v[0] * (double)b;
}

BINARY(floor_divide_f32, float, float, floor_div_f(p, q))
BINARY(floor_divide_f64, double, double, floor_div_(p, q))
BINARY(floor_divide_i64, int64_t, int64_t, floor_div_i64(p, q))
BINARY(floor_divide_u64, uint64_t, uint64_t, q == 0 ? 0 : p / q)
BINARY(remainder_f32, float, float, floor_mod_f(p, q))
BINARY(remainder_f64, double, double, floor_mod_(p, q))
BINARY(remainder_i64, int64_t, int64_t, floor_mod_i64(p, q))
BINARY(remainder_u64, uint64_t, uint64_t, q == 0 ? 0 : p % q)
BINARY(fmod_f32, float, float, fmodf(p, q))
BINARY(fmod_f64, double, double, fmod(p, q))
BINARY(fmod_i64, int64_t, int64_t, trunc_mod_i64(p, q))
BINARY(fmod_u64, uint64_t, uint64_t, q == 0 ? 0 : p % q)
BINARY(atan2_f32, float, float, atan2f(p, q))
BINARY(atan2_f64, double, double, atan2(p, q))
BINARY(bitwise_and_i64, int64_t, int64_t, p & q)
BINARY(bitwise_and_u64, uint64_t, uint64_t, p & q)
BINARY(bitwise_or_i64, int64_t, int64_t, p | q)
BINARY(bitwise_or_u64, uint64_t, uint64_t, p | q)
BINARY(bitwise_xor_i64, int64_t, int64_t, p ^ q)
BINARY(bitwise_xor_u64, uint64_t, uint64_t, p ^ q)

/* NaN wins: p != p picks p when p is NaN, q when q is */
BINARY_ALL(maximum, p > q || p != p ? p : q, p > q ? p : q, p > q ? p : q)
BINARY_ALL(minimum, p < q || p != p ? p : q, p < q ? p : q, p < q ? p : q)

#define COMPARE_ALL(op, expr)                                                \
    BINARY(op##_f32, float, uint8_t, expr)                                   \
    BINARY(op##_f64, double, uint8_t, expr)                                  \
    BINARY(op##_i64, int64_t, uint8_t, expr)                                 \
    BINARY(op##_u64, uint64_t, uint8_t, expr)

COMPARE_ALL(eq, p == q)
COMPARE_ALL(ne, p != q)
COMPARE_ALL(lt, p < q)
COMPARE_ALL(le, p <= q)
COMPARE_ALL(gt, p > q)
COMPARE_ALL(ge, p >= q)
/* NaN is true: it is not 0 */
COMPARE_ALL(and, p != 0 && q != 0)
COMPARE_ALL(or, p != 0 || q != 0)
COMPARE_ALL(xor, (p != 0) != (q != 0))
BINARY(isclose_f32, float, uint8_t, close_f64(p, q, P))
BINARY(isclose_f64, double, uint8_t, close_f64(p, q, P))
BINARY(isclose_i64, int64_t, uint8_t, close_i64(p, q, P))
BINARY(isclose_u64, uint64_t, uint8_t, close_u64(p, q, P))

static const struct loops binary_loops[TR_OP_COUNT] = {
    [TR_OP_ADD] = {add_f32, add_f64, add_i64, add_u64},
    [TR_OP_SUB] = {sub_f32, sub_f64, sub_i64, sub_u64},
    [TR_OP_MUL] = {mul_f32, mul_f64, mul_i64, mul_u64},
    [TR_OP_DIV] = {div_f32, div_f64, NULL, NULL},
    [TR_OP_FLOOR_DIVIDE] = {floor_divide_f32, floor_divide_f64, floor_divide_i64, floor_divide_u64},
    [TR_OP_REMAINDER] = {remainder_f32, remainder_f64, remainder_i64, remainder_u64},
    [TR_OP_FMOD] = {fmod_f32, fmod_f64, fmod_i64, fmod_u64},
    [TR_OP_ATAN2] = {atan2_f32, atan2_f64, NULL, NULL},
    [TR_OP_BITWISE_AND] = {NULL, NULL, bitwise_and_i64, bitwise_and_u64},
    [TR_OP_BITWISE_OR] = {NULL, NULL, bitwise_or_i64, bitwise_or_u64},
    [TR_OP_BITWISE_XOR] = {NULL, NULL, bitwise_xor_i64, bitwise_xor_u64},
    [TR_OP_LOGICAL_XOR] = {xor_f32, xor_f64, xor_i64, xor_u64},
    [TR_OP_ISCLOSE] = {isclose_f32, isclose_f64, isclose_i64, isclose_u64},
    [TR_OP_POW] = {pow_f32, pow_f64, pow_i64, pow_u64},
    [TR_OP_MAXIMUM] = {maximum_f32, maximum_f64, maximum_i64, maximum_u64},
    [TR_OP_MINIMUM] = {minimum_f32, minimum_f64, minimum_i64, minimum_u64},
    [TR_OP_EQ] = {eq_f32, eq_f64, eq_i64, eq_u64},
    [TR_OP_NE] = {ne_f32, ne_f64, ne_i64, ne_u64},
    [TR_OP_LT] = {lt_f32, lt_f64, lt_i64, lt_u64},
    [TR_OP_LE] = {le_f32, le_f64, le_i64, le_u64},
    [TR_OP_GT] = {gt_f32, gt_f64, gt_i64, gt_u64},
    [TR_OP_GE] = {ge_f32, ge_f64, ge_i64, ge_u64},
    [TR_OP_LOGICAL_AND] = {and_f32, and_f64, and_i64, and_u64},
    [TR_OP_LOGICAL_OR] = {or_f32, or_f64, or_i64, or_u64},
};

/* The dtype both operands of a binary op are computed in: the result's,
 * or for comparisons and logic the operands' common one (a float stays a
 * float for logic: 0.5 is true, and would be 0 as an integer). */
static enum tr_dtype operand_dtype(const struct tr__op *op, const struct tr_arg *args,
                                   const struct tr_value *out)
{
    struct tr_value a = args[0].tensor ? tr_value_of(args[0].tensor) : args[0].value;
    struct tr_value b = args[1].tensor ? tr_value_of(args[1].tensor) : args[1].value;
    enum tr_dtype d = out->dtype;

    a.weak = args[0].value.weak;
    b.weak = args[1].value.weak;

    if ((op->rule == TR__RULE_COMPARE || op->rule == TR__RULE_LOGICAL) &&
        tr_promote(&a, &b, &d) != TR_OK)
        d = TR_DTYPE_F64;
    /* u8_tensor < 300 compares with 300 itself, not with 300 wrapped */
    if (op->rule == TR__RULE_COMPARE && (!tr_constant_fits(&a, d) || !tr_constant_fits(&b, d)))
        d = tr_value_dtype(&a) == TR_DTYPE_U64 || tr_value_dtype(&b) == TR_DTYPE_U64 ? TR_DTYPE_F64
                                                                                : TR_DTYPE_I64;
    return tr__compute_dtype(d);
}

/* isclose's tolerances; nothing for the other binary ops. */
static struct tr__ew_params binary_params(const struct tr__op *op, const struct tr_arg *args)
{
    struct tr__ew_params P = {0};

    if (op->info.id == TR_OP_ISCLOSE) {
        P.v[0] = tr__number(&args[2].value);
        P.v[1] = tr__number(&args[3].value);
        P.flag = args[4].value.boolean;
    }
    return P;
}

/* Whether the integer tensor t holds a negative value. */
static bool any_negative(const struct tr_tensor *t)
{
    int64_t strides[TR_MAX_DIMS], rows, len, step;
    const int64_t *stride_ptrs[1] = {strides};
    const char *base = tr_tensor_data(t);
    struct tr__iter it;
    bool negative = false;

    if (!tr_dtype_is_integer(t->dtype) || !tr_dtype_is_signed(t->dtype) ||
        tr_tensor_numel(t) == 0)
        return false;
    tr__byte_strides(t, strides);
    tr__iter_init(&it, t->ndim, t->shape, 1, stride_ptrs);
    rows = tr__iter_rows(&it);
    len = it.shape[it.ndim - 1];
    step = it.strides[0][it.ndim - 1];
#pragma omp parallel for num_threads(tr_num_threads()) schedule(static) reduction(|| : negative) \
    if (rows * len > 32768)
    for (int64_t row = 0; row < rows; row++) {
        int64_t off, v[2048];
        tr__iter_row_offsets(&it, row, &off);
        for (int64_t first = 0; first < len && !negative; first += 2048) {
            int64_t n = len - first < 2048 ? len - first : 2048;
            tr__cpu_cast_row((char *)v, 8, TR_DTYPE_I64, base + off + first * step, step,
                             t->dtype, n);
            for (int64_t i = 0; i < n; i++)
                negative = negative || v[i] < 0;
        }
    }
    return negative;
}

tr_status tr__k_binary(const struct tr__op *op, const struct tr_arg *args,
                       const struct tr_value *out, const struct tr_dest *dest,
                       struct tr_tensor **results);
tr_status tr__k_binary(const struct tr__op *op, const struct tr_arg *args,
                       const struct tr_value *out, const struct tr_dest *dest,
                       struct tr_tensor **results)
{
    enum tr_dtype compute = operand_dtype(op, args, out);
    bool to_bool = op->rule == TR__RULE_COMPARE || op->rule == TR__RULE_LOGICAL;
    tr__block_fn fn = pick(loops_of(binary_loops, op->info.id), compute);
    struct tr__ew_params params = binary_params(op, args);
    struct tr_tensor *a, *b, *y = NULL;
    struct tr__store store = {0}; /* fn not NULL: y is streamed */
    tr_status s;

    TR_RETURN_ERROR_IF(!fn, TR_ERR_STATE, "%s: no loop for %s", op->info.name,
                       tr_dtype_name(compute));
    /* numbers become tensors of the compute dtype: exact for weak scalars */
    a = tr__operand(&args[0], out->dtype, compute);
    b = a ? tr__operand(&args[1], out->dtype, compute) : NULL;
    /* PyTorch and NumPy refuse these (1 / 2 is not an integer): checked
     * before anything is written */
    if (b && !tr_dtype_is_float(out->dtype) && op->info.id == TR_OP_POW &&
        any_negative(b)) {
        tr__set_error(TR_ERR_INVALID, "pow: integers to negative integer powers are not "
                                      "allowed (the exponent holds a negative value; cast the "
                                      "base to a float dtype)");
        tr_release(b);
        b = NULL;
    }
    if (b)
        y = tr__stream_result(op->info.name, out, out->device, dest, &store);
    if (a && b && y)
        s = tr__map_stream(y, &store, to_bool ? TR_DTYPE_BOOL : compute,
                           (const struct tr_tensor *const[]){a, b}, 2, compute, fn, &params);
    else
        s = tr_last_status();
    tr_release(a);
    tr_release(b);
    if (s != TR_OK) {
        tr_release(y);
        return s;
    }
    results[0] = y;
    return TR_OK;
}

/* ---------------------------------------------------------- where, clamp */

#define WHERE(name, T)                                                       \
    static void name(char *out, const char *const *in, int64_t n, const void *ctx) \
    {                                                                        \
        const T *c = (const T *)(const void *)in[0];                         \
        const T *a = (const T *)(const void *)in[1];                         \
        const T *b = (const T *)(const void *)in[2];                         \
        T *y = (T *)(void *)out;                                             \
        (void)ctx;                                                           \
        for (int64_t i = 0; i < n; i++)                                      \
            y[i] = c[i] != 0 ? a[i] : b[i];                                  \
    }

WHERE(where_f32, float)
WHERE(where_f64, double)
WHERE(where_i64, int64_t)
WHERE(where_u64, uint64_t)

static const struct loops where_loops = {where_f32, where_f64, where_i64, where_u64};

/* Bounds of clamp that are present: bit 0 min, bit 1 max. */
#define CLAMP(name, T)                                                       \
    static void name(char *out, const char *const *in, int64_t n, const void *ctx) \
    {                                                                        \
        int which = ((const struct tr__ew_params *)ctx)->which;              \
        const T *x = (const T *)(const void *)in[0];                         \
        const T *lo = (const T *)(const void *)in[1];                        \
        const T *hi = (const T *)(const void *)in[which == 3 ? 2 : 1];       \
        T *y = (T *)(void *)out;                                             \
        for (int64_t i = 0; i < n; i++) {                                    \
            T v = x[i];                                                      \
            if ((which & 1) && (v < lo[i] || lo[i] != lo[i]))                \
                v = lo[i];                                                   \
            if ((which & 2) && (v > hi[i] || hi[i] != hi[i]))                \
                v = hi[i];                                                   \
            if (x[i] != x[i])                                                \
                v = x[i]; /* NaN stays NaN */                                \
            y[i] = v;                                                        \
        }                                                                    \
    }

CLAMP(clamp_f32, float)
CLAMP(clamp_f64, double)
CLAMP(clamp_i64, int64_t)
CLAMP(clamp_u64, uint64_t)

static const struct loops clamp_loops = {clamp_f32, clamp_f64, clamp_i64, clamp_u64};

/* where(condition, a, b) and clamp(x, min, max): up to three operands, all
 * computed in the result's compute dtype. */
tr_status tr__k_select3(const struct tr__op *op, const struct tr_arg *args,
                        const struct tr_value *out, const struct tr_dest *dest,
                        struct tr_tensor **results);
tr_status tr__k_select3(const struct tr__op *op, const struct tr_arg *args,
                        const struct tr_value *out, const struct tr_dest *dest,
                        struct tr_tensor **results)
{
    enum tr_dtype compute = tr__compute_dtype(out->dtype);
    bool where = op->rule == TR__RULE_WHERE;
    struct tr_tensor *in[3] = {NULL, NULL, NULL}, *y = NULL;
    struct tr__store store = {0}; /* fn not NULL: y is streamed */
    struct tr__ew_params params = {0};
    int n = 0;
    tr_status s = TR_OK;

    for (int i = 0; i < 3 && s == TR_OK; i++) {
        if (args[i].value.kind == TR_VALUE_NONE && !args[i].tensor)
            continue;
        params.which |= i == 0 ? 0 : 1 << (i - 1);
        if (where && i == 0) {
            /* the condition's truth first: 0.5 is true, and would not be
             * once converted to an integer compute dtype */
            struct tr_tensor *c = tr__arg_tensor(&args[0], TR_DTYPE_BOOL);
            in[n] = c ? tr_cast(c, TR_DTYPE_BOOL) : NULL;
            tr_release(c);
        } else {
            in[n] = tr__operand(&args[i], out->dtype, compute);
        }
        if (!in[n++])
            s = tr_last_status();
    }
    /* clamp without bounds copies through memory */
    if (s == TR_OK && !where && params.which == 0)
        y = tr__new_result(op->info.name, out, in[0]->storage->device, dest);
    else if (s == TR_OK)
        y = tr__stream_result(op->info.name, out, in[0]->storage->device, dest, &store);
    if (s == TR_OK && !y)
        s = tr_last_status();
    if (s == TR_OK && !where && params.which == 0 && tr_tensor_data(y) != tr_tensor_data(in[0]))
        s = tr_copy_into(y, in[0]); /* (in place, x is already its own clamp) */
    else if (s == TR_OK)
        s = tr__map_stream(y, &store, compute, (const struct tr_tensor *const *)in, n, compute,
                           pick(where ? &where_loops : &clamp_loops, compute), &params);
    for (int i = 0; i < n; i++)
        tr_release(in[i]);
    if (s != TR_OK) {
        tr_release(y);
        return s;
    }
    results[0] = y;
    return TR_OK;
}

/* ---------------------------------------------- described for fused.c */

/* What the kernels above do, told rather than done: the loop, the compute
 * dtypes and each operand's preparation, by the same tables and the same
 * rules (fused_impl.h).  The bits of a fused chain depend on it agreeing
 * with each kernel; tests/unit/test_fused.c compares the two on generated
 * chains. */
bool tr__ew_describe(const struct tr__op *op, const struct tr_arg *args,
                     const struct tr_value *out, struct tr__ew_desc *d)
{
    const struct loops *l = NULL;

    memset(d, 0, sizeof *d);
    if (op->info.id == TR_OP_CAST) {
        /* tr_cast: each value converted straight to the dtype */
        d->in_compute = d->out_compute = out->dtype;
        d->nin = 1;
        return true;
    }
    if (op->kernel == tr__k_unary)
        return unary_plan(op, args, out, d);
    if (op->kernel == tr__k_binary) {
        bool to_bool = op->rule == TR__RULE_COMPARE || op->rule == TR__RULE_LOGICAL;
        d->in_compute = operand_dtype(op, args, out);
        d->out_compute = to_bool ? TR_DTYPE_BOOL : d->in_compute;
        d->nin = 2;
        d->param[1] = 1;
        d->prep[0] = d->prep[1] = TR__EW_OPERAND;
        d->params = binary_params(op, args);
        l = loops_of(binary_loops, op->info.id);
    } else if (op->kernel == tr__k_select3) {
        bool where = op->rule == TR__RULE_WHERE;
        d->in_compute = d->out_compute = tr__compute_dtype(out->dtype);
        for (int i = 0; i < 3; i++) {
            if (args[i].value.kind == TR_VALUE_NONE && !args[i].tensor)
                continue;
            d->params.which |= i == 0 ? 0 : 1 << (i - 1);
            d->param[d->nin] = i;
            d->prep[d->nin++] = where && i == 0 ? TR__EW_TRUTH : TR__EW_OPERAND;
        }
        if (!where && d->params.which == 0) {
            d->nin = 1; /* clamp without bounds: a copy */
            return true;
        }
        l = where ? &where_loops : &clamp_loops;
    } else {
        return false;
    }
    d->fn = l ? pick(l, d->in_compute) : NULL;
    return d->fn != NULL;
}
