/*
 * fold.c - arithmetic on constants (see fold.h).
 */
#include "config.h"

#include "fold.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

/* The unary ones first (FOLD_NEG, FOLD_NOT): see arity_of. */
enum fold_op {
    FOLD_NEG, FOLD_NOT, FOLD_ADD, FOLD_SUB, FOLD_MUL, FOLD_DIV, FOLD_FLOORDIV, FOLD_MOD, FOLD_POW,
    FOLD_MAX, FOLD_MIN, FOLD_AND, FOLD_OR, FOLD_XOR
};

static const char *const fold_names[] = {
    "neg", "bitwise_not", "add", "sub", "mul", "div", "floor_divide", "remainder", "pow",
    "maximum", "minimum", "bitwise_and", "bitwise_or", "bitwise_xor"};

static const char *const fold_symbols[] = {"-", "~", "+", "-", "*", "/", "//", "%", "**",
                                           "maximum", "minimum", "&", "|", "^"};

/* Python's floor division and modulo: the quotient rounded down, the
 * remainder with the divisor's sign.  b is neither 0 nor, with a at
 * INT64_MIN, -1. */
static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;

    return a % b != 0 && (a < 0) != (b < 0) ? q - 1 : q;
}

static int64_t floor_mod(int64_t a, int64_t b)
{
    int64_t r = a % b;

    return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}

/* The float floor division and modulo of PyTorch's floor_divide and
 * remainder (Python's, but for the sign of a zero remainder: a's): fmod
 * first, so that the remainder is exact. */
static double float_floor_div(double a, double b)
{
    double mod = fmod(a, b), div, floor_div_v;

    if (b == 0)
        return a / b;
    div = (a - mod) / b;
    if (mod != 0 && (b < 0) != (mod < 0))
        div -= 1.0;
    if (div == 0)
        return copysign(0.0, a / b);
    floor_div_v = floor(div);
    return div - floor_div_v > 0.5 ? floor_div_v + 1.0 : floor_div_v;
}

static double float_floor_mod(double a, double b)
{
    double mod = fmod(a, b);

    if (mod == 0 || b == 0)
        return mod; /* a zero keeps a's sign, as remainder's does */
    return (b < 0) != (mod < 0) ? mod + b : mod;
}

static bool is_number(const struct tr_value *v)
{
    return v->known && (v->kind == TR_VALUE_INT || v->kind == TR_VALUE_FLOAT);
}

static double as_double(const struct tr_value *v)
{
    return v->kind == TR_VALUE_INT ? (double)v->integer : v->number;
}

static enum fold_result overflow(enum fold_op op, int64_t a, int64_t b)
{
    if (op == FOLD_NEG)
        tr_set_error(TR_ERR_INVALID, "-(%" PRId64 ") does not fit a 64-bit integer", a);
    else
        tr_set_error(TR_ERR_INVALID,
                     "%" PRId64 " %s %" PRId64 " does not fit a 64-bit integer (write one "
                     "of them as a float, e.g. %" PRId64 ".0, for a float result)",
                     a, fold_symbols[op], b, a);
    return FOLD_ERROR;
}

/* a ** b for b >= 0, by squaring, with every step checked. */
static enum fold_result integer_pow(int64_t a, int64_t b, int64_t *out)
{
    int64_t result = 1, base = a;
    uint64_t e = (uint64_t)b;

    while (e) {
        if ((e & 1) && __builtin_mul_overflow(result, base, &result))
            return overflow(FOLD_POW, a, b);
        e >>= 1;
        if (e && __builtin_mul_overflow(base, base, &base))
            return overflow(FOLD_POW, a, b);
    }
    *out = result;
    return FOLD_OK;
}

static enum fold_result fold_integers(enum fold_op op, int64_t a, int64_t b, int64_t *out)
{
    bool over = false;

    switch (op) {
    case FOLD_NEG: over = __builtin_sub_overflow(0, a, out); break;
    case FOLD_NOT: *out = ~a; break;
    case FOLD_AND: *out = a & b; break;
    case FOLD_OR: *out = a | b; break;
    case FOLD_XOR: *out = a ^ b; break;
    case FOLD_FLOORDIV:
    case FOLD_MOD:
        if (b == 0) {
            tr_set_error(TR_ERR_INVALID, "%" PRId64 " %s 0: integer division by zero", a,
                         fold_symbols[op]);
            return FOLD_ERROR;
        }
        if (b == -1) { /* INT64_MIN // -1 overflows; a % -1 is 0 */
            over = op == FOLD_FLOORDIV && __builtin_sub_overflow(0, a, out);
            if (op == FOLD_MOD)
                *out = 0;
            break;
        }
        *out = op == FOLD_FLOORDIV ? floor_div(a, b) : floor_mod(a, b);
        break;
    case FOLD_ADD: over = __builtin_add_overflow(a, b, out); break;
    case FOLD_SUB: over = __builtin_sub_overflow(a, b, out); break;
    case FOLD_MUL: over = __builtin_mul_overflow(a, b, out); break;
    case FOLD_MAX: *out = a > b ? a : b; break;
    case FOLD_MIN: *out = a < b ? a : b; break;
    case FOLD_POW:
        if (b < 0) {
            /* (-2) ** -2 in parentheses: -2 ** -2 would read as -(2 ** -2) */
            const char *open = a < 0 ? "(" : "", *close = a < 0 ? ")" : "";
            tr_set_error(TR_ERR_INVALID,
                         "%s%" PRId64 "%s ** %" PRId64 ": an integer to a negative integer "
                         "power is not allowed (write %s%" PRId64 ".0%s ** %" PRId64
                         " for a float)",
                         open, a, close, b, open, a, close, b);
            return FOLD_ERROR;
        }
        return integer_pow(a, b, out);
    default:
        return FOLD_NO;
    }
    return over ? overflow(op, a, b) : FOLD_OK;
}

static double fold_doubles(enum fold_op op, double x, double y)
{
    switch (op) {
    case FOLD_NEG: return -x;
    case FOLD_ADD: return x + y;
    case FOLD_SUB: return x - y;
    case FOLD_MUL: return x * y;
    case FOLD_DIV: return x / y;
    case FOLD_FLOORDIV: return float_floor_div(x, y);
    case FOLD_MOD: return float_floor_mod(x, y);
    case FOLD_POW: return pow(x, y);
    /* NaN propagates, as through the ops */
    case FOLD_MAX: return isnan(x) || x > y ? x : y;
    default: return isnan(x) || x < y ? x : y;
    }
}

enum fold_result fold_constants(const char *name, const struct tr_value *args, int nargs,
                                struct tr_value *out)
{
    size_t k;
    int arity;
    bool integers = true;

    for (k = 0; k < sizeof fold_names / sizeof *fold_names && strcmp(fold_names[k], name) != 0;
         k++)
        ;
    if (k == sizeof fold_names / sizeof *fold_names)
        return FOLD_NO;
    arity = k <= FOLD_NOT ? 1 : 2;
    if (nargs < arity)
        return FOLD_NO;
    for (int i = 0; i < arity; i++) {
        if (!is_number(&args[i]))
            return FOLD_NO;
        integers = integers && args[i].kind == TR_VALUE_INT;
    }
    memset(out, 0, sizeof *out);
    out->known = out->weak = true;
    if (integers && k != FOLD_DIV) {
        out->kind = TR_VALUE_INT;
        return fold_integers((enum fold_op)k, args[0].integer, arity > 1 ? args[1].integer : 0,
                             &out->integer);
    }
    /* bitwise ops on a float: left to the op, which refuses it */
    if (k == FOLD_NOT || k >= FOLD_AND)
        return FOLD_NO;
    out->kind = TR_VALUE_FLOAT;
    out->number = fold_doubles((enum fold_op)k, as_double(&args[0]),
                               arity > 1 ? as_double(&args[1]) : 0);
    return FOLD_OK;
}

bool fold_attribute(const char *attr, const struct tr_value *tensor, struct tr_value *out,
                    struct tr_value *items)
{
    memset(out, 0, sizeof *out);
    out->known = out->weak = true;
    if (strcmp(attr, "shape") == 0) {
        for (int i = 0; i < tensor->ndim; i++) {
            memset(&items[i], 0, sizeof items[i]);
            items[i].kind = TR_VALUE_INT;
            items[i].known = items[i].weak = true;
            items[i].integer = tensor->shape[i];
        }
        out->kind = TR_VALUE_LIST;
        out->count = (size_t)tensor->ndim;
        out->items = items;
    } else if (strcmp(attr, "ndim") == 0) {
        out->kind = TR_VALUE_INT;
        out->integer = tensor->ndim;
    } else if (strcmp(attr, "numel") == 0) {
        /* a view of an empty tensor (x.T of [0, 2^62, 2^62]) can have
         * sizes whose product, taken in order, passes int64 */
        out->kind = TR_VALUE_INT;
        out->integer = 0;
        for (int i = 0; i < tensor->ndim; i++)
            if (tensor->shape[i] == 0)
                return true;
        out->integer = 1;
        for (int i = 0; i < tensor->ndim; i++)
            if (__builtin_mul_overflow(out->integer, tensor->shape[i], &out->integer)) {
                tr_set_error(TR_ERR_SHAPE, "numel: the tensor has more than %" PRId64
                             " elements", INT64_MAX);
                return false;
            }
    } else if (strcmp(attr, "dtype") == 0) {
        out->kind = TR_VALUE_DTYPE;
        out->dtype = tensor->dtype;
    } else {
        return false;
    }
    return true;
}

enum fold_result fold_list_index(int64_t n, int64_t i, int64_t *at)
{
    if (i < -n || i >= n) {
        tr_set_error(TR_ERR_INDEX, "index %" PRId64 " is out of range for a list of %" PRId64,
                     i, n);
        return FOLD_ERROR;
    }
    *at = i < 0 ? i + n : i;
    return FOLD_OK;
}

/* A slice bound, clamped as Python clamps it. */
static int64_t slice_bound(int64_t v, int64_t n, int64_t step, bool is_start)
{
    if (v == TR_SLICE_NONE)
        return step > 0 ? (is_start ? 0 : n) : (is_start ? n - 1 : -1);
    if (v < 0)
        v += n;
    if (step > 0)
        return v < 0 ? 0 : v > n ? n : v;
    return v < -1 ? -1 : v > n - 1 ? n - 1 : v;
}

enum fold_result fold_list_slice(int64_t n, int64_t start, int64_t stop, int64_t step,
                                 int64_t *first, int64_t *by, int64_t *count)
{
    int64_t a, b;

    if (step == TR_SLICE_NONE)
        step = 1;
    if (step == 0) {
        tr_set_error(TR_ERR_INDEX, "a slice step must not be zero");
        return FOLD_ERROR;
    }
    a = slice_bound(start, n, step, true);
    b = slice_bound(stop, n, step, false);
    *first = a;
    *by = step;
    /* in uint64: b - a + step - 1 and -step pass int64 for steps near its ends */
    *count = step > 0 ? (b > a ? (int64_t)((uint64_t)(b - a - 1) / (uint64_t)step) + 1 : 0)
                      : (a > b ? (int64_t)((uint64_t)(a - b - 1) / -(uint64_t)step) + 1 : 0);
    return FOLD_OK;
}

static enum tr_dtype number_dtype(const struct tr_value *v)
{
    if (!v->known)
        return TR_DTYPE_COUNT;
    switch (v->kind) {
    case TR_VALUE_INT: return TR_DTYPE_I64;
    case TR_VALUE_FLOAT: return TR_DTYPE_F64;
    case TR_VALUE_BOOL: return TR_DTYPE_BOOL;
    default: return TR_DTYPE_COUNT;
    }
}

enum tr_dtype fold_stored_dtype(const struct tr_value *v, const struct tr_value *items)
{
    enum tr_dtype d = TR_DTYPE_BOOL;

    if (v->kind != TR_VALUE_LIST)
        return number_dtype(v);
    for (size_t i = 0; i < v->count; i++) {
        enum tr_dtype item = number_dtype(&items[i]);
        if (item == TR_DTYPE_COUNT)
            return TR_DTYPE_COUNT;
        if (item == TR_DTYPE_F64 || (item == TR_DTYPE_I64 && d == TR_DTYPE_BOOL))
            d = item;
    }
    return v->count ? d : TR_DTYPE_I64; /* [] as NumPy's int64 array... of nothing */
}
