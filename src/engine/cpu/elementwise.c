/*
 * cpu/elementwise.c - the unary and binary ops, where and clamp, on the
 * blocked loop of map.c.  Each op has a loop per compute dtype (f32, f64,
 * i64, u64); f16 and bf16 are computed in f32; integer arithmetic wraps.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "fused_impl.h"

/* The loop of each entry of ew_ops.def, calling its function of
 * ew_scalar.h on each value.  omp simd: the binary loops vectorise despite
 * the pointers' possible aliasing (outputs never overlap inputs except
 * exactly, in place).  Each element is the same IEEE operation, or the same
 * libm call (math.h declares no vector variants without -ffast-math), so
 * the bits do not change. */
#define UNARY(name, T, expr)                                                 \
    static void name(char *out, const char *const *in, int64_t n, const void *ctx) \
    {                                                                        \
        const T *x = (const T *)(const void *)in[0];                         \
        T *y = (T *)(void *)out;                                             \
        for (int64_t i = 0; i < n; i++)                                      \
            y[i] = tr__ew_##name(x[i], ctx);                                 \
    }
#define PREDICATE(name, T, expr)                                             \
    static void name(char *out, const char *const *in, int64_t n, const void *ctx) \
    {                                                                        \
        const T *x = (const T *)(const void *)in[0];                         \
        uint8_t *y = (uint8_t *)out;                                         \
        for (int64_t i = 0; i < n; i++)                                      \
            y[i] = tr__ew_##name(x[i], ctx);                                 \
    }
#define BINARY(name, T, U, expr)                                             \
    TR__VECTOR_CLONES static void name(char *out, const char *const *in, int64_t n, const void *ctx) \
    {                                                                        \
        const T *a = (const T *)(const void *)in[0];                         \
        const T *b = (const T *)(const void *)in[1];                         \
        U *y = (U *)(void *)out;                                             \
        _Pragma("omp simd")                                                  \
        for (int64_t i = 0; i < n; i++)                                      \
            y[i] = tr__ew_##name(a[i], b[i], ctx);                           \
    }
#define WHERE(name, T)                                                       \
    static void name(char *out, const char *const *in, int64_t n, const void *ctx) \
    {                                                                        \
        const T *c = (const T *)(const void *)in[0];                         \
        const T *a = (const T *)(const void *)in[1];                         \
        const T *b = (const T *)(const void *)in[2];                         \
        T *y = (T *)(void *)out;                                             \
        for (int64_t i = 0; i < n; i++)                                      \
            y[i] = tr__ew_##name(c[i], a[i], b[i], ctx);                     \
    }
/* clamp's operands are x and the bounds present: in[1] is the min when
 * there is one, else the max */
#define CLAMP(name, T)                                                       \
    static void name(char *out, const char *const *in, int64_t n, const void *ctx) \
    {                                                                        \
        int which = ((const struct tr__ew_params *)ctx)->which;              \
        const T *x = (const T *)(const void *)in[0];                         \
        const T *lo = (const T *)(const void *)in[1];                        \
        const T *hi = (const T *)(const void *)in[which == 3 ? 2 : 1];       \
        T *y = (T *)(void *)out;                                             \
        for (int64_t i = 0; i < n; i++)                                      \
            y[i] = tr__ew_##name(x[i], lo[i], hi[i], ctx);                   \
    }
#include "../ew_ops.def"
#undef UNARY
#undef PREDICATE
#undef BINARY
#undef WHERE
#undef CLAMP

#define UNARY(name, T, expr) [TR__EW_##name] = name,
#define PREDICATE(name, T, expr) [TR__EW_##name] = name,
#define BINARY(name, T, U, expr) [TR__EW_##name] = name,
#define WHERE(name, T) [TR__EW_##name] = name,
#define CLAMP(name, T) [TR__EW_##name] = name,
static const tr__block_fn loop_of_code[TR__EW_CODES] = {
#include "../ew_ops.def"
};
#undef UNARY
#undef PREDICATE
#undef BINARY
#undef WHERE
#undef CLAMP

/* The loops of one op, by compute dtype; TR__EW_NONE where it has none. */
struct loops {
    enum tr__ew_code f32, f64, i64, u64;
};

static enum tr__ew_code pick(const struct loops *l, enum tr_dtype compute)
{
    if (!l)
        return TR__EW_NONE;
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

static const struct loops unary_loops[TR_OP_COUNT] = {
    [TR_OP_NEG] = {TR__EW_neg_f32, TR__EW_neg_f64, TR__EW_neg_i64, TR__EW_neg_u64},
    [TR_OP_ABS] = {TR__EW_abs_f32, TR__EW_abs_f64, TR__EW_abs_i64, TR__EW_abs_u64},
    [TR_OP_SIGN] = {TR__EW_sign_f32, TR__EW_sign_f64, TR__EW_sign_i64, TR__EW_sign_u64},
    [TR_OP_SQUARE] = {TR__EW_square_f32, TR__EW_square_f64, TR__EW_square_i64, TR__EW_square_u64},
    [TR_OP_RELU] = {TR__EW_relu_f32, TR__EW_relu_f64, TR__EW_relu_i64, TR__EW_relu_u64},
    [TR_OP_FLOOR] = {TR__EW_floor_f32, TR__EW_floor_f64, TR__EW_floor_i64, TR__EW_floor_u64},
    [TR_OP_CEIL] = {TR__EW_ceil_f32, TR__EW_ceil_f64, TR__EW_ceil_i64, TR__EW_ceil_u64},
    [TR_OP_ROUND] = {TR__EW_round_f32, TR__EW_round_f64, TR__EW_round_i64, TR__EW_round_u64},
    [TR_OP_TRUNC] = {TR__EW_trunc_f32, TR__EW_trunc_f64, TR__EW_trunc_i64, TR__EW_trunc_u64},
    [TR_OP_BITWISE_NOT] = {TR__EW_NONE, TR__EW_NONE, TR__EW_bitwise_not_i64, TR__EW_bitwise_not_u64},
    [TR_OP_NAN_TO_NUM] = {TR__EW_nan_to_num_f32, TR__EW_nan_to_num_f64, TR__EW_nan_to_num_i64, TR__EW_nan_to_num_u64},
    [TR_OP_EXP] = {TR__EW_exp_f32, TR__EW_exp_f64, TR__EW_NONE, TR__EW_NONE},
    [TR_OP_EXP2] = {TR__EW_exp2_f32, TR__EW_exp2_f64, TR__EW_NONE, TR__EW_NONE},
    [TR_OP_LOG] = {TR__EW_log_f32, TR__EW_log_f64, TR__EW_NONE, TR__EW_NONE},
    [TR_OP_LOG2] = {TR__EW_log2_f32, TR__EW_log2_f64, TR__EW_NONE, TR__EW_NONE},
    [TR_OP_LOG10] = {TR__EW_log10_f32, TR__EW_log10_f64, TR__EW_NONE, TR__EW_NONE},
    [TR_OP_LOG1P] = {TR__EW_log1p_f32, TR__EW_log1p_f64, TR__EW_NONE, TR__EW_NONE},
    [TR_OP_EXPM1] = {TR__EW_expm1_f32, TR__EW_expm1_f64, TR__EW_NONE, TR__EW_NONE},
    [TR_OP_SQRT] = {TR__EW_sqrt_f32, TR__EW_sqrt_f64, TR__EW_NONE, TR__EW_NONE},
    [TR_OP_RSQRT] = {TR__EW_rsqrt_f32, TR__EW_rsqrt_f64, TR__EW_NONE, TR__EW_NONE},
    [TR_OP_RECIPROCAL] = {TR__EW_reciprocal_f32, TR__EW_reciprocal_f64, TR__EW_NONE, TR__EW_NONE},
    [TR_OP_SIN] = {TR__EW_sin_f32, TR__EW_sin_f64, TR__EW_NONE, TR__EW_NONE},
    [TR_OP_COS] = {TR__EW_cos_f32, TR__EW_cos_f64, TR__EW_NONE, TR__EW_NONE},
    [TR_OP_TAN] = {TR__EW_tan_f32, TR__EW_tan_f64, TR__EW_NONE, TR__EW_NONE},
    [TR_OP_ASIN] = {TR__EW_asin_f32, TR__EW_asin_f64, TR__EW_NONE, TR__EW_NONE},
    [TR_OP_ACOS] = {TR__EW_acos_f32, TR__EW_acos_f64, TR__EW_NONE, TR__EW_NONE},
    [TR_OP_ATAN] = {TR__EW_atan_f32, TR__EW_atan_f64, TR__EW_NONE, TR__EW_NONE},
    [TR_OP_SINH] = {TR__EW_sinh_f32, TR__EW_sinh_f64, TR__EW_NONE, TR__EW_NONE},
    [TR_OP_COSH] = {TR__EW_cosh_f32, TR__EW_cosh_f64, TR__EW_NONE, TR__EW_NONE},
    [TR_OP_TANH] = {TR__EW_tanh_f32, TR__EW_tanh_f64, TR__EW_NONE, TR__EW_NONE},
    [TR_OP_ASINH] = {TR__EW_asinh_f32, TR__EW_asinh_f64, TR__EW_NONE, TR__EW_NONE},
    [TR_OP_ACOSH] = {TR__EW_acosh_f32, TR__EW_acosh_f64, TR__EW_NONE, TR__EW_NONE},
    [TR_OP_ATANH] = {TR__EW_atanh_f32, TR__EW_atanh_f64, TR__EW_NONE, TR__EW_NONE},
    [TR_OP_SIGMOID] = {TR__EW_sigmoid_f32, TR__EW_sigmoid_f64, TR__EW_NONE, TR__EW_NONE},
    [TR_OP_SILU] = {TR__EW_silu_f32, TR__EW_silu_f64, TR__EW_NONE, TR__EW_NONE},
    [TR_OP_ERF] = {TR__EW_erf_f32, TR__EW_erf_f64, TR__EW_NONE, TR__EW_NONE},
    [TR_OP_SOFTPLUS] = {TR__EW_softplus_f32, TR__EW_softplus_f64, TR__EW_NONE, TR__EW_NONE},
    [TR_OP_LEAKY_RELU] = {TR__EW_leaky_relu_f32, TR__EW_leaky_relu_f64, TR__EW_NONE, TR__EW_NONE},
    [TR_OP_ELU] = {TR__EW_elu_f32, TR__EW_elu_f64, TR__EW_NONE, TR__EW_NONE},
    [TR_OP_ISNAN] = {TR__EW_isnan_f32, TR__EW_isnan_f64, TR__EW_isnan_int, TR__EW_isnan_int},
    [TR_OP_ISINF] = {TR__EW_isinf_f32, TR__EW_isinf_f64, TR__EW_isnan_int, TR__EW_isnan_int},
    [TR_OP_ISPOSINF] = {TR__EW_isposinf_f32, TR__EW_isposinf_f64, TR__EW_isnan_int, TR__EW_isnan_int},
    [TR_OP_ISNEGINF] = {TR__EW_isneginf_f32, TR__EW_isneginf_f64, TR__EW_isnan_int, TR__EW_isnan_int},
    [TR_OP_ISFINITE] = {TR__EW_isfinite_f32, TR__EW_isfinite_f64, TR__EW_isfinite_int, TR__EW_isfinite_int},
    [TR_OP_LOGICAL_NOT] = {TR__EW_not_f32, TR__EW_not_f64, TR__EW_not_i64, TR__EW_not_u64},
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
    static const struct loops gelu_none = {TR__EW_gelu_none_f32, TR__EW_gelu_none_f64, TR__EW_NONE, TR__EW_NONE};
    static const struct loops gelu_tanh = {TR__EW_gelu_tanh_f32, TR__EW_gelu_tanh_f64, TR__EW_NONE, TR__EW_NONE};
    static const struct loops round_up = {TR__EW_round_up_f32, TR__EW_round_up_f64, TR__EW_round_i64, TR__EW_round_u64};
    static const struct loops round_down = {TR__EW_round_down_f32, TR__EW_round_down_f64, TR__EW_round_down_i64,
                                            TR__EW_round_down_u64};
    static const struct loops logical_not = {TR__EW_NONE, TR__EW_NONE, TR__EW_not_i64, TR__EW_NONE};
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
    d->code = pick(l, d->in_compute);
    d->fn = loop_of_code[d->code];
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

static const struct loops binary_loops[TR_OP_COUNT] = {
    [TR_OP_ADD] = {TR__EW_add_f32, TR__EW_add_f64, TR__EW_add_i64, TR__EW_add_u64},
    [TR_OP_SUB] = {TR__EW_sub_f32, TR__EW_sub_f64, TR__EW_sub_i64, TR__EW_sub_u64},
    [TR_OP_MUL] = {TR__EW_mul_f32, TR__EW_mul_f64, TR__EW_mul_i64, TR__EW_mul_u64},
    [TR_OP_DIV] = {TR__EW_div_f32, TR__EW_div_f64, TR__EW_NONE, TR__EW_NONE},
    [TR_OP_FLOOR_DIVIDE] = {TR__EW_floor_divide_f32, TR__EW_floor_divide_f64, TR__EW_floor_divide_i64, TR__EW_floor_divide_u64},
    [TR_OP_REMAINDER] = {TR__EW_remainder_f32, TR__EW_remainder_f64, TR__EW_remainder_i64, TR__EW_remainder_u64},
    [TR_OP_FMOD] = {TR__EW_fmod_f32, TR__EW_fmod_f64, TR__EW_fmod_i64, TR__EW_fmod_u64},
    [TR_OP_ATAN2] = {TR__EW_atan2_f32, TR__EW_atan2_f64, TR__EW_NONE, TR__EW_NONE},
    [TR_OP_BITWISE_AND] = {TR__EW_NONE, TR__EW_NONE, TR__EW_bitwise_and_i64, TR__EW_bitwise_and_u64},
    [TR_OP_BITWISE_OR] = {TR__EW_NONE, TR__EW_NONE, TR__EW_bitwise_or_i64, TR__EW_bitwise_or_u64},
    [TR_OP_BITWISE_XOR] = {TR__EW_NONE, TR__EW_NONE, TR__EW_bitwise_xor_i64, TR__EW_bitwise_xor_u64},
    [TR_OP_LOGICAL_XOR] = {TR__EW_xor_f32, TR__EW_xor_f64, TR__EW_xor_i64, TR__EW_xor_u64},
    [TR_OP_ISCLOSE] = {TR__EW_isclose_f32, TR__EW_isclose_f64, TR__EW_isclose_i64, TR__EW_isclose_u64},
    [TR_OP_POW] = {TR__EW_pow_f32, TR__EW_pow_f64, TR__EW_pow_i64, TR__EW_pow_u64},
    [TR_OP_MAXIMUM] = {TR__EW_maximum_f32, TR__EW_maximum_f64, TR__EW_maximum_i64, TR__EW_maximum_u64},
    [TR_OP_MINIMUM] = {TR__EW_minimum_f32, TR__EW_minimum_f64, TR__EW_minimum_i64, TR__EW_minimum_u64},
    [TR_OP_EQ] = {TR__EW_eq_f32, TR__EW_eq_f64, TR__EW_eq_i64, TR__EW_eq_u64},
    [TR_OP_NE] = {TR__EW_ne_f32, TR__EW_ne_f64, TR__EW_ne_i64, TR__EW_ne_u64},
    [TR_OP_LT] = {TR__EW_lt_f32, TR__EW_lt_f64, TR__EW_lt_i64, TR__EW_lt_u64},
    [TR_OP_LE] = {TR__EW_le_f32, TR__EW_le_f64, TR__EW_le_i64, TR__EW_le_u64},
    [TR_OP_GT] = {TR__EW_gt_f32, TR__EW_gt_f64, TR__EW_gt_i64, TR__EW_gt_u64},
    [TR_OP_GE] = {TR__EW_ge_f32, TR__EW_ge_f64, TR__EW_ge_i64, TR__EW_ge_u64},
    [TR_OP_LOGICAL_AND] = {TR__EW_and_f32, TR__EW_and_f64, TR__EW_and_i64, TR__EW_and_u64},
    [TR_OP_LOGICAL_OR] = {TR__EW_or_f32, TR__EW_or_f64, TR__EW_or_i64, TR__EW_or_u64},
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
    tr__block_fn fn = loop_of_code[pick(loops_of(binary_loops, op->info.id), compute)];
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

static const struct loops where_loops = {TR__EW_where_f32, TR__EW_where_f64, TR__EW_where_i64, TR__EW_where_u64};

static const struct loops clamp_loops = {TR__EW_clamp_f32, TR__EW_clamp_f64, TR__EW_clamp_i64, TR__EW_clamp_u64};

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
                           loop_of_code[pick(where ? &where_loops : &clamp_loops, compute)],
                           &params);
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
    d->code = pick(l, d->in_compute);
    d->fn = loop_of_code[d->code];
    return d->fn != NULL;
}
