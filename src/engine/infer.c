/*
 * infer.c - the results an op will give, from what is known of its
 * arguments before anything is computed: the rules of the op table, with
 * NumPy broadcasting and PyTorch's dtype promotion (weak scalars), and the
 * checks that let a pipeline be refused before it runs.
 */
#include "ops_impl.h"
#include "cpu/einsum_impl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Records an error about argument arg (-1: none in particular). */
__attribute__((format(printf, 5, 6)))
static tr_status fail(int *bad, int arg, tr_status status, const char *op, const char *fmt, ...)
{
    char text[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    *bad = arg;
    return tr_set_error(status, "%s: %s", op, text);
}

static char *shape_text(const struct tr_value *v, char *buf, size_t size)
{
    return tr_format_shape(v->shape, v->ndim, buf, size);
}

/* ------------------------------------------------------------- dtypes */

static int category(enum tr_dtype d)
{
    return d == TR_DTYPE_BOOL ? 0 : tr_dtype_is_float(d) ? 2 : 1;
}

enum tr_dtype tr_value_dtype(const struct tr_value *v)
{
    switch (v->kind) {
    case TR_VALUE_TENSOR:
        return v->dtype;
    case TR_VALUE_BOOL:
        return TR_DTYPE_BOOL;
    case TR_VALUE_INT:
        return TR_DTYPE_I64;
    default:
        return TR_DTYPE_F64;
    }
}

/* Two integer dtypes: the smallest that holds both ranges (PyTorch). */
static tr_status promote_integers(enum tr_dtype a, enum tr_dtype b, enum tr_dtype *out)
{
    size_t sa = tr_dtype_size(a), sb = tr_dtype_size(b);
    bool ua = !tr_dtype_is_signed(a), ub = !tr_dtype_is_signed(b);

    if (ua == ub) {
        *out = sa >= sb ? a : b;
        return TR_OK;
    }
    /* one signed, one unsigned: a signed type wider than the unsigned one */
    size_t uns = ua ? sa : sb, sig = ua ? sb : sa;
    size_t need = uns * 2 > sig ? uns * 2 : sig;
    if (need > 8)
        return tr_set_error(TR_ERR_DTYPE, "%s and %s have no common integer type (u64 values "
                                          "do not fit a signed one); cast one of them",
                            tr_dtype_name(a), tr_dtype_name(b));
    *out = need == 2 ? TR_DTYPE_I16 : need == 4 ? TR_DTYPE_I32 : TR_DTYPE_I64;
    return TR_OK;
}

static enum tr_dtype promote_floats(enum tr_dtype a, enum tr_dtype b)
{
    if (a == b)
        return a;
    if ((a == TR_DTYPE_F16 && b == TR_DTYPE_BF16) || (a == TR_DTYPE_BF16 && b == TR_DTYPE_F16))
        return TR_DTYPE_F32;
    return tr_dtype_size(a) >= tr_dtype_size(b) ? a : b;
}

/* How strongly an operand decides the dtype (PyTorch): a tensor with
 * dimensions, then a rank-0 tensor, then a number (weak). */
static int priority(const struct tr_value *v)
{
    if (v->kind != TR_VALUE_TENSOR || v->weak)
        return 0;
    return v->ndim > 0 ? 2 : 1;
}

tr_status tr_promote(const struct tr_value *a, const struct tr_value *b, enum tr_dtype *out)
{
    enum tr_dtype da = tr_value_dtype(a), db = tr_value_dtype(b);
    int ca = category(da), cb = category(db), pa = priority(a), pb = priority(b);

    if (pa != pb) {
        /* the weaker operand widens the stronger one only when it is of a
         * higher category: to its own dtype when it is a rank-0 tensor, to
         * the default dtype of that category when it is a number */
        bool a_strong = pa > pb;
        enum tr_dtype strong = a_strong ? da : db, weak = a_strong ? db : da;
        int cs = a_strong ? ca : cb, cw = a_strong ? cb : ca;
        if (cw <= cs)
            *out = strong;
        else if ((a_strong ? pb : pa) == 1)
            *out = weak;
        else
            *out = cw == 2 ? TR_DTYPE_F32 : TR_DTYPE_I64;
        return TR_OK;
    }
    if (ca != cb) {
        *out = ca > cb ? da : db;
        return TR_OK;
    }
    if (ca == 2) {
        *out = promote_floats(da, db);
        return TR_OK;
    }
    if (ca == 0) {
        *out = TR_DTYPE_BOOL;
        return TR_OK;
    }
    return promote_integers(da, db, out);
}

bool tr_constant_fits(const struct tr_value *v, enum tr_dtype dtype)
{
    int64_t lo, hi;

    if (v->kind != TR_VALUE_INT || !v->known || !tr_dtype_is_integer(dtype) ||
        dtype == TR_DTYPE_I64)
        return true;
    if (dtype == TR_DTYPE_U64)
        return v->integer >= 0;
    hi = (int64_t)((UINT64_C(1) << (8 * tr_dtype_size(dtype) - tr_dtype_is_signed(dtype))) - 1);
    lo = tr_dtype_is_signed(dtype) ? -hi - 1 : 0;
    return v->integer >= lo && v->integer <= hi;
}

/* A known integer argument of an op whose result has dtype d is converted
 * to d, which must hold it (PyTorch refuses i32_tensor + 2**40 too). */
static tr_status check_fits(const char *op, int *bad, int arg, const struct tr_value *v,
                            enum tr_dtype d)
{
    if (tr_constant_fits(v, d))
        return TR_OK;
    *bad = arg;
    return tr_set_error(TR_ERR_DTYPE, "%s: the constant %lld does not fit %s; cast the tensor "
                                      "to a wider dtype first (e.g. cast(x, i64))",
                        op, (long long)v->integer, tr_dtype_name(d));
}

/* ------------------------------------------------------------- shapes */

static void set_tensor(struct tr_value *out, enum tr_dtype dtype, int ndim, const int64_t *shape,
                       struct tr_device device)
{
    memset(out, 0, sizeof *out);
    out->kind = TR_VALUE_TENSOR;
    out->dtype = dtype;
    out->ndim = ndim;
    if (ndim > 0)
        memcpy(out->shape, shape, (size_t)ndim * sizeof *shape);
    out->device = device;
}

/* A number where a tensor is wanted: a 0-d tensor, weak when written in
 * the pipeline. */
static struct tr_value as_tensor(const struct tr_value *v)
{
    struct tr_value t;

    if (v->kind == TR_VALUE_TENSOR)
        return *v;
    set_tensor(&t, tr_value_dtype(v), 0, NULL, TR_CPU);
    t.weak = v->weak;
    return t;
}

static tr_status broadcast(const char *op, int *bad, int arg, const struct tr_value *a,
                           const struct tr_value *b, int *ndim, int64_t *shape)
{
    int n = a->ndim > b->ndim ? a->ndim : b->ndim;
    char sa[160], sb[160];

    for (int i = 0; i < n; i++) {
        int ia = i - (n - a->ndim), ib = i - (n - b->ndim);
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return fail(bad, arg, TR_ERR_SHAPE, op,
                        "shapes %s and %s cannot be broadcast together (%lld != %lld in "
                        "dimension %d)",
                        shape_text(a, sa, sizeof sa), shape_text(b, sb, sizeof sb),
                        (long long)da, (long long)db, i);
        shape[i] = da == 1 ? db : da;
    }
    *ndim = n;
    return TR_OK;
}

static tr_status normalize_dim(const char *op, int *bad, int arg, int64_t dim, int ndim, int *out)
{
    int n = ndim > 0 ? ndim : 1; /* a scalar accepts dim 0 and -1, as PyTorch does */

    *out = 0;
    if (dim < -n || dim >= n)
        return fail(bad, arg, TR_ERR_INDEX, op,
                    "dim %lld is out of range for a tensor of %d dimension%s", (long long)dim,
                    ndim, ndim == 1 ? "" : "s");
    *out = (int)(dim < 0 ? dim + n : dim);
    return TR_OK;
}

/* A shape argument: an integer or a list of integers. */
static tr_status shape_arg(const char *op, int *bad, int arg, const struct tr_value *v,
                           bool allow_minus_one, int *ndim, int64_t *shape)
{
    const struct tr_value *items = v->kind == TR_VALUE_LIST ? v->items : v;
    size_t n = v->kind == TR_VALUE_LIST ? v->count : 1;

    if (n > TR_MAX_DIMS)
        return fail(bad, arg, TR_ERR_SHAPE, op, "%zu dimensions (at most %d are supported)", n,
                    TR_MAX_DIMS);
    for (size_t i = 0; i < n; i++) {
        if (items[i].kind != TR_VALUE_INT || !items[i].known)
            return fail(bad, arg, TR_ERR_INVALID, op, "a shape is a list of integer constants");
        if (items[i].integer < (allow_minus_one ? -1 : 0))
            return fail(bad, arg, TR_ERR_SHAPE, op, "invalid size %lld in the shape",
                        (long long)items[i].integer);
        shape[i] = items[i].integer;
    }
    *ndim = (int)n;
    return TR_OK;
}

/* Reduced dims: flags[d] set for every dimension a dims argument names. */
static tr_status dims_arg(const char *op, int *bad, int arg, const struct tr_value *v, int ndim,
                          bool *flags)
{
    const struct tr_value *items = v->kind == TR_VALUE_LIST ? v->items : v;
    size_t n = v->kind == TR_VALUE_LIST ? v->count : 1;

    memset(flags, 0, TR_MAX_DIMS * sizeof *flags);
    if (v->kind == TR_VALUE_NONE) {
        for (int d = 0; d < ndim; d++)
            flags[d] = true;
        return TR_OK;
    }
    for (size_t i = 0; i < n; i++) {
        int d;
        TR_FORWARD_IF_ERROR(normalize_dim(op, bad, arg, items[i].integer, ndim, &d));
        if (ndim > 0 && flags[d])
            return fail(bad, arg, TR_ERR_INDEX, op, "dim %d is listed twice", d);
        if (ndim > 0)
            flags[d] = true;
    }
    return TR_OK;
}

static void reduce_shape(const struct tr_value *x, const bool *flags, bool keepdim,
                         struct tr_value *out, enum tr_dtype dtype)
{
    int64_t shape[TR_MAX_DIMS];
    int n = 0;

    for (int d = 0; d < x->ndim; d++) {
        if (!flags[d])
            shape[n++] = x->shape[d];
        else if (keepdim)
            shape[n++] = 1;
    }
    set_tensor(out, dtype, n, shape, x->device);
}

/* The number of elements; -1 when it passes int64 (a view such as x.T of
 * an empty [0, 2^62, 2^62] can put the zero last). */
static int64_t numel(const struct tr_value *v)
{
    int64_t n = 1;

    for (int d = 0; d < v->ndim; d++)
        if (v->shape[d] == 0)
            return 0;
    for (int d = 0; d < v->ndim; d++)
        if (__builtin_mul_overflow(n, v->shape[d], &n))
            return -1;
    return n;
}

/* ------------------------------------------------------------- checks */

/* Checks that each argument is of its parameter's kind. */
static tr_status check_kinds(const struct tr__op *op, const struct tr_value *args, int *bad)
{
    for (int i = 0; i < op->info.nparams; i++) {
        const struct tr_param *p = &op->info.params[i];
        const struct tr_value *v = &args[i];
        bool okay;
        switch (p->kind) {
        case TR_PARAM_TENSOR:
            okay = v->kind == TR_VALUE_TENSOR || v->kind == TR_VALUE_INT ||
                   v->kind == TR_VALUE_FLOAT || v->kind == TR_VALUE_BOOL;
            break;
        case TR_PARAM_TENSOR_OR_NONE:
            okay = v->kind == TR_VALUE_NONE || v->kind == TR_VALUE_TENSOR ||
                   v->kind == TR_VALUE_INT || v->kind == TR_VALUE_FLOAT ||
                   v->kind == TR_VALUE_BOOL;
            break;
        case TR_PARAM_TENSORS:
            okay = v->kind == TR_VALUE_LIST && v->count > 0;
            for (size_t k = 0; okay && k < v->count; k++)
                okay = v->items[k].kind == TR_VALUE_TENSOR || v->items[k].kind == TR_VALUE_INT ||
                       v->items[k].kind == TR_VALUE_FLOAT || v->items[k].kind == TR_VALUE_BOOL;
            break;
        case TR_PARAM_INT:
            okay = v->kind == TR_VALUE_INT;
            break;
        case TR_PARAM_INT_OR_NONE:
            okay = v->kind == TR_VALUE_INT || v->kind == TR_VALUE_NONE;
            break;
        case TR_PARAM_DIMS:
            okay = v->kind == TR_VALUE_INT || v->kind == TR_VALUE_NONE ||
                   v->kind == TR_VALUE_LIST;
            for (size_t k = 0; okay && v->kind == TR_VALUE_LIST && k < v->count; k++)
                okay = v->items[k].kind == TR_VALUE_INT;
            break;
        case TR_PARAM_SHAPE:
            okay = v->kind == TR_VALUE_INT || v->kind == TR_VALUE_LIST;
            for (size_t k = 0; okay && v->kind == TR_VALUE_LIST && k < v->count; k++)
                okay = v->items[k].kind == TR_VALUE_INT;
            break;
        case TR_PARAM_NUMBER:
            okay = v->kind == TR_VALUE_INT || v->kind == TR_VALUE_FLOAT ||
                   v->kind == TR_VALUE_BOOL;
            break;
        case TR_PARAM_NUMBER_OR_NONE:
            okay = v->kind == TR_VALUE_INT || v->kind == TR_VALUE_FLOAT ||
                   v->kind == TR_VALUE_NONE;
            break;
        case TR_PARAM_NUMBERS:
            okay = v->kind == TR_VALUE_INT || v->kind == TR_VALUE_FLOAT ||
                   (v->kind == TR_VALUE_LIST && v->count > 0);
            for (size_t k = 0; okay && v->kind == TR_VALUE_LIST && k < v->count; k++)
                okay = v->items[k].kind == TR_VALUE_INT || v->items[k].kind == TR_VALUE_FLOAT;
            break;
        case TR_PARAM_BOOL:
            okay = v->kind == TR_VALUE_BOOL;
            break;
        case TR_PARAM_DTYPE:
            okay = v->kind == TR_VALUE_DTYPE;
            break;
        case TR_PARAM_DTYPE_OR_NONE:
            okay = v->kind == TR_VALUE_DTYPE || v->kind == TR_VALUE_NONE;
            break;
        case TR_PARAM_QDTYPE:
        case TR_PARAM_QDTYPE_OR_NONE:
            okay = v->kind == TR_VALUE_DTYPE ||
                   (v->kind == TR_VALUE_STRING && tr_packed_dtype_word(v->string)) ||
                   (v->kind == TR_VALUE_NONE && p->kind == TR_PARAM_QDTYPE_OR_NONE);
            break;
        case TR_PARAM_STRING:
        case TR_PARAM_DEVICE:
            okay = v->kind == TR_VALUE_STRING;
            break;
        default:
            okay = false;
        }
        if (!okay && v->kind == TR_VALUE_LIST) {
            /* the list is right, one of its items is not (when every item
             * is an integer, a list is what is wrong: below) */
            size_t k = 0;
            while (k < v->count && v->items[k].kind == TR_VALUE_INT)
                k++;
            if (k < v->count)
                return fail(bad, i, TR_ERR_INVALID, op->info.name,
                            "argument '%s' must be %s; the item at index %zu is %s", p->name,
                            tr_param_kind_what(p->kind), k,
                            v->items[k].kind == TR_VALUE_FLOAT
                                ? "a float (an integer is wanted: 7 / 2 is the float 3.5)"
                                : "not an integer");
        }
        if (!okay && (p->kind == TR_PARAM_DTYPE || p->kind == TR_PARAM_DTYPE_OR_NONE) &&
            v->kind == TR_VALUE_STRING && tr_packed_dtype_word(v->string))
            return fail(bad, i, TR_ERR_DTYPE, op->info.name,
                        "%s is a packed dtype (two values a byte) that only quantize, "
                        "quantize_affine and dequantize take; a tensor cannot have it",
                        v->string);
        if (!okay) {
            static const char *const what[] = {
                [TR_VALUE_NONE] = "None", [TR_VALUE_TENSOR] = "a tensor",
                [TR_VALUE_INT] = "an integer", [TR_VALUE_FLOAT] = "a number",
                [TR_VALUE_BOOL] = "a bool", [TR_VALUE_STRING] = "a string",
                [TR_VALUE_DTYPE] = "a dtype", [TR_VALUE_LIST] = "a list",
            };
            return fail(bad, i, TR_ERR_INVALID, op->info.name,
                        "argument '%s' must be %s, not %s", p->name, tr_param_kind_what(p->kind),
                        (unsigned)v->kind <= TR_VALUE_LIST ? what[v->kind] : "?");
        }
        /* integers the rules compute with must be constants */
        if ((p->kind == TR_PARAM_INT || p->kind == TR_PARAM_INT_OR_NONE) &&
            v->kind == TR_VALUE_INT && !v->known)
            return fail(bad, i, TR_ERR_INVALID, op->info.name,
                        "argument '%s' must be a constant, known before the stage runs",
                        p->name);
    }
    return TR_OK;
}

static tr_status check_dtypes(const struct tr__op *op, const struct tr_value *args, int *bad)
{
    for (int i = 0; i < op->info.nparams; i++) {
        const struct tr_param *p = &op->info.params[i];
        const struct tr_value *v = &args[i];
        size_t n = p->kind == TR_PARAM_TENSORS ? v->count : 1;
        /* the op's dtypes are its data's, not its indices', conditions',
         * weights' or scales' (marked in ops.def) */
        if (p->any_dtype ||
            (p->kind != TR_PARAM_TENSOR && p->kind != TR_PARAM_TENSORS &&
             p->kind != TR_PARAM_TENSOR_OR_NONE))
            continue;
        for (size_t k = 0; k < n; k++) {
            const struct tr_value *item = p->kind == TR_PARAM_TENSORS ? &v->items[k] : v;
            if (item->kind == TR_VALUE_NONE)
                continue;
            enum tr_dtype d = tr_value_dtype(item);
            if (!tr__takes(op->takes, d) && item->kind == TR_VALUE_FLOAT)
                return fail(bad, i, TR_ERR_DTYPE, op->info.name,
                            "does not take a float number (it takes %s)", op->info.dtypes);
            if (!tr__takes(op->takes, d))
                return fail(bad, i, TR_ERR_DTYPE, op->info.name,
                            "does not take %s (it takes %s)", tr_dtype_name(d), op->info.dtypes);
        }
    }
    return TR_OK;
}

/* ------------------------------------------------------------- rules */

#define ARG(i) (&args[i])
#define NAME (op->info.name)

static enum tr_dtype floating(enum tr_dtype d)
{
    return tr_dtype_is_float(d) ? d : TR_DTYPE_F32;
}

static enum tr_dtype summed(enum tr_dtype d)
{
    if (tr_dtype_is_float(d))
        return d;
    return d == TR_DTYPE_BOOL || tr_dtype_is_signed(d) ? TR_DTYPE_I64 : TR_DTYPE_U64;
}

static tr_status rule_create(const struct tr__op *op, const struct tr_value *args,
                             struct tr_value *out, int *bad)
{
    int64_t shape[TR_MAX_DIMS];
    int ndim, di = tr__param_index(op, "dtype");
    enum tr_dtype dtype = TR_DTYPE_F32;

    TR_FORWARD_IF_ERROR(shape_arg(NAME, bad, 0, ARG(0), false, &ndim, shape));
    if (di >= 0 && ARG(di)->kind == TR_VALUE_DTYPE)
        dtype = ARG(di)->dtype;
    if (op->takes == TR__TAKES_FLOAT && !tr_dtype_is_float(dtype))
        return fail(bad, di, TR_ERR_DTYPE, NAME, "makes floats, not %s", tr_dtype_name(dtype));
    if (op->rule == TR__RULE_FULL && ARG(2)->kind == TR_VALUE_NONE)
        dtype = ARG(1)->kind == TR_VALUE_INT    ? TR_DTYPE_I64
                : ARG(1)->kind == TR_VALUE_BOOL ? TR_DTYPE_BOOL
                                                : TR_DTYPE_F32;
    if (op->rule == TR__RULE_FULL)
        TR_FORWARD_IF_ERROR(check_fits(NAME, bad, 1, ARG(1), dtype));
    if (tr__check_shape(NAME, ndim, shape, dtype, &(int64_t){0}) != TR_OK) {
        *bad = 0;
        return tr_last_status();
    }
    set_tensor(out, dtype, ndim, shape, TR_CPU);
    return TR_OK;
}

static tr_status rule_arange(const struct tr__op *op, const struct tr_value *args,
                             struct tr_value *out, int *bad)
{
    const struct tr_value *a = ARG(0), *b = ARG(1), *c = ARG(2);
    double start = tr__number(a), stop, step = tr__number(c), count;
    bool integers = a->kind == TR_VALUE_INT && c->kind == TR_VALUE_INT &&
                    (b->kind == TR_VALUE_INT || b->kind == TR_VALUE_NONE);
    int64_t n;

    for (int i = 0; i < 3; i++)
        if (ARG(i)->kind != TR_VALUE_NONE && !ARG(i)->known)
            return fail(bad, i, TR_ERR_INVALID, NAME, "its arguments must be constants");
    if (b->kind == TR_VALUE_NONE) {
        stop = start;
        start = 0;
    } else {
        stop = tr__number(b);
    }
    if (step == 0 || step != step)
        return fail(bad, 2, TR_ERR_INVALID, NAME, "the step must not be zero");
    if (integers) {
        /* exactly, past 2**53 too */
        int64_t lo = b->kind == TR_VALUE_NONE ? 0 : a->integer;
        int64_t hi = b->kind == TR_VALUE_NONE ? a->integer : b->integer, by = c->integer, span;
        if (__builtin_sub_overflow(hi, lo, &span))
            return fail(bad, 1, TR_ERR_SHAPE, NAME, "too many values");
        n = (by > 0 && span > 0)   ? (span - 1) / by + 1
            : (by < 0 && span < 0) ? (span + 1) / by + 1
                                   : 0;
        set_tensor(out, ARG(3)->kind == TR_VALUE_DTYPE ? ARG(3)->dtype : TR_DTYPE_I64, 1, &n,
                   TR_CPU);
        return TR_OK;
    }
    count = ceil((stop - start) / step);
    if (!(count >= 0))
        count = 0;
    if (count > 9.2e18)
        return fail(bad, 1, TR_ERR_SHAPE, NAME, "too many values");
    n = (int64_t)count;
    set_tensor(out, ARG(3)->kind == TR_VALUE_DTYPE ? ARG(3)->dtype
                    : integers                      ? TR_DTYPE_I64
                                                    : TR_DTYPE_F32,
               1, &n, TR_CPU);
    return TR_OK;
}

static tr_status rule_linspace(const struct tr__op *op, const struct tr_value *args,
                               struct tr_value *out, int *bad)
{
    int64_t n = ARG(2)->integer;

    if (n < 0)
        return fail(bad, 2, TR_ERR_INVALID, NAME, "steps must not be negative");
    set_tensor(out, ARG(3)->dtype, 1, &n, TR_CPU);
    return TR_OK;
}

static tr_status rule_eye(const struct tr__op *op, const struct tr_value *args,
                          struct tr_value *out, int *bad)
{
    int64_t shape[2] = {ARG(0)->integer, ARG(1)->kind == TR_VALUE_INT ? ARG(1)->integer
                                                                      : ARG(0)->integer};

    if (shape[0] < 0 || shape[1] < 0)
        return fail(bad, shape[0] < 0 ? 0 : 1, TR_ERR_INVALID, NAME, "sizes must not be negative");
    set_tensor(out, ARG(2)->dtype, 2, shape, TR_CPU);
    return TR_OK;
}

static tr_status rule_reshape(const struct tr__op *op, const struct tr_value *args,
                              struct tr_value *out, int *bad)
{
    struct tr_value x = as_tensor(ARG(0));
    int64_t shape[TR_MAX_DIMS], known = 1, total = numel(&x);
    int ndim, infer = -1;
    char a[160], b[160];

    TR_FORWARD_IF_ERROR(shape_arg(NAME, bad, 1, ARG(1), true, &ndim, shape));
    if (total < 0)
        return fail(bad, 0, TR_ERR_SHAPE, NAME, "%s has too many elements",
                    shape_text(&x, a, sizeof a));
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == -1) {
            if (infer >= 0)
                return fail(bad, 1, TR_ERR_SHAPE, NAME, "only one size may be -1");
            infer = i;
        } else if (__builtin_mul_overflow(known, shape[i], &known)) {
            return fail(bad, 1, TR_ERR_SHAPE, NAME, "the shape has too many elements");
        }
    }
    if (infer >= 0 && known != 0 && total % known == 0)
        shape[infer] = total / known;
    else if (infer >= 0 || known != total)
        return fail(bad, 1, TR_ERR_SHAPE, NAME, "cannot reshape %s (%lld elements) into %s",
                    shape_text(&x, a, sizeof a), (long long)total,
                    tr_format_shape(shape, ndim, b, sizeof b));
    set_tensor(out, x.dtype, ndim, shape, x.device);
    return TR_OK;
}

static tr_status rule_transpose(const struct tr__op *op, const struct tr_value *args,
                                struct tr_value *out, int *bad)
{
    struct tr_value x = as_tensor(ARG(0));
    int a, b;
    int64_t t;

    TR_FORWARD_IF_ERROR(normalize_dim(NAME, bad, 1, ARG(1)->integer, x.ndim, &a));
    TR_FORWARD_IF_ERROR(normalize_dim(NAME, bad, 2, ARG(2)->integer, x.ndim, &b));
    *out = x;
    out->weak = false;
    if (x.ndim > 0) {
        t = out->shape[a];
        out->shape[a] = out->shape[b];
        out->shape[b] = t;
    }
    return TR_OK;
}

static tr_status rule_permute(const struct tr__op *op, const struct tr_value *args,
                              struct tr_value *out, int *bad)
{
    struct tr_value x = as_tensor(ARG(0));
    bool seen[TR_MAX_DIMS] = {false};
    int n = ARG(1)->kind == TR_VALUE_LIST ? (int)ARG(1)->count : 1, d;

    if (n != x.ndim)
        return fail(bad, 1, TR_ERR_SHAPE, NAME, "%d dimensions given for a tensor of %d", n,
                    x.ndim);
    *out = x;
    out->weak = false;
    for (int i = 0; i < n; i++) {
        const struct tr_value *item = ARG(1)->kind == TR_VALUE_LIST ? &ARG(1)->items[i] : ARG(1);
        TR_FORWARD_IF_ERROR(normalize_dim(NAME, bad, 1, item->integer, x.ndim, &d));
        if (seen[d])
            return fail(bad, 1, TR_ERR_SHAPE, NAME, "dimension %d appears twice", d);
        seen[d] = true;
        out->shape[i] = x.shape[d];
    }
    return TR_OK;
}

static tr_status rule_squeeze(const struct tr__op *op, const struct tr_value *args,
                              struct tr_value *out, int *bad)
{
    struct tr_value x = as_tensor(ARG(0));
    bool flags[TR_MAX_DIMS];
    int64_t shape[TR_MAX_DIMS];
    int n = 0;

    TR_FORWARD_IF_ERROR(dims_arg(NAME, bad, 1, ARG(1), x.ndim, flags));
    for (int d = 0; d < x.ndim; d++)
        if (!(flags[d] && x.shape[d] == 1))
            shape[n++] = x.shape[d];
    set_tensor(out, x.dtype, n, shape, x.device);
    return TR_OK;
}

static tr_status rule_unsqueeze(const struct tr__op *op, const struct tr_value *args,
                                struct tr_value *out, int *bad)
{
    struct tr_value x = as_tensor(ARG(0));
    int64_t shape[TR_MAX_DIMS];
    int d;

    if (x.ndim >= TR_MAX_DIMS)
        return fail(bad, 0, TR_ERR_SHAPE, NAME, "a tensor has at most %d dimensions", TR_MAX_DIMS);
    TR_FORWARD_IF_ERROR(normalize_dim(NAME, bad, 1, ARG(1)->integer, x.ndim + 1, &d));
    for (int i = 0, j = 0; i <= x.ndim; i++)
        shape[i] = i == d ? 1 : x.shape[j++];
    set_tensor(out, x.dtype, x.ndim + 1, shape, x.device);
    return TR_OK;
}

static tr_status rule_expand(const struct tr__op *op, const struct tr_value *args,
                             struct tr_value *out, int *bad)
{
    struct tr_value x = as_tensor(ARG(0));
    int64_t want[TR_MAX_DIMS], shape[TR_MAX_DIMS];
    int n;
    char a[160], b[160];

    TR_FORWARD_IF_ERROR(shape_arg(NAME, bad, 1, ARG(1), true, &n, want));
    if (n < x.ndim)
        return fail(bad, 1, TR_ERR_SHAPE, NAME, "cannot expand %s to %d dimensions",
                    shape_text(&x, a, sizeof a), n);
    for (int i = 0; i < n; i++) {
        int j = i - (n - x.ndim);
        int64_t have = j >= 0 ? x.shape[j] : 1;
        if (want[i] == -1 && j >= 0)
            shape[i] = have;
        else if (want[i] >= 0 && (have == want[i] || have == 1))
            shape[i] = want[i];
        else
            return fail(bad, 1, TR_ERR_SHAPE, NAME, "cannot expand %s to %s",
                        shape_text(&x, a, sizeof a), tr_format_shape(want, n, b, sizeof b));
    }
    set_tensor(out, x.dtype, n, shape, x.device);
    return TR_OK;
}

static tr_status rule_flatten(const struct tr__op *op, const struct tr_value *args,
                              struct tr_value *out, int *bad)
{
    struct tr_value x = as_tensor(ARG(0));
    int64_t shape[TR_MAX_DIMS], merged = 1;
    int s, e, n = 0;

    if (x.ndim == 0) {
        int64_t one = 1;
        set_tensor(out, x.dtype, 1, &one, x.device);
        return TR_OK;
    }
    TR_FORWARD_IF_ERROR(normalize_dim(NAME, bad, 1, ARG(1)->integer, x.ndim, &s));
    TR_FORWARD_IF_ERROR(normalize_dim(NAME, bad, 2, ARG(2)->integer, x.ndim, &e));
    if (s > e)
        return fail(bad, 2, TR_ERR_INVALID, NAME, "start %d comes after end %d", s, e);
    for (int d = s; d <= e; d++)
        if (x.shape[d] == 0)
            merged = 0;
    for (int d = s; d <= e && merged; d++)
        if (__builtin_mul_overflow(merged, x.shape[d], &merged))
            return fail(bad, 0, TR_ERR_SHAPE, NAME, "the merged dimension has more than %lld "
                        "elements", (long long)INT64_MAX);
    for (int d = 0; d < x.ndim; d++) {
        if (d < s || d > e)
            shape[n++] = x.shape[d];
        if (d == e)
            shape[n++] = merged;
    }
    set_tensor(out, x.dtype, n, shape, x.device);
    return TR_OK;
}

static tr_status rule_diagonal(const struct tr__op *op, const struct tr_value *args,
                               struct tr_value *out, int *bad)
{
    struct tr_value x = as_tensor(ARG(0));
    int64_t shape[TR_MAX_DIMS], off = ARG(1)->integer, len;
    int d1, d2, n = 0;

    if (x.ndim < 2)
        return fail(bad, 0, TR_ERR_SHAPE, NAME, "needs at least 2 dimensions, not %d", x.ndim);
    TR_FORWARD_IF_ERROR(normalize_dim(NAME, bad, 2, ARG(2)->integer, x.ndim, &d1));
    TR_FORWARD_IF_ERROR(normalize_dim(NAME, bad, 3, ARG(3)->integer, x.ndim, &d2));
    if (d1 == d2)
        return fail(bad, 3, TR_ERR_INVALID, NAME, "dim1 and dim2 are both %d", d1);
    len = off >= 0 ? (x.shape[d2] - off < x.shape[d1] ? x.shape[d2] - off : x.shape[d1])
                   : (x.shape[d1] + off < x.shape[d2] ? x.shape[d1] + off : x.shape[d2]);
    for (int d = 0; d < x.ndim; d++)
        if (d != d1 && d != d2)
            shape[n++] = x.shape[d];
    shape[n++] = len > 0 ? len : 0;
    set_tensor(out, x.dtype, n, shape, x.device);
    return TR_OK;
}

static tr_status rule_elementwise(const struct tr__op *op, const struct tr_value *args,
                                  struct tr_value *out, int *bad)
{
    struct tr_value x = as_tensor(ARG(0));
    enum tr_dtype d = x.dtype;

    switch (op->rule) {
    case TR__RULE_FLOATING:
        d = floating(d);
        break;
    case TR__RULE_GELU:
        if (strcmp(ARG(1)->string, "none") != 0 && strcmp(ARG(1)->string, "tanh") != 0)
            return fail(bad, 1, TR_ERR_INVALID, NAME,
                        "approximate must be \"none\" or \"tanh\", not \"%s\"", ARG(1)->string);
        d = floating(d);
        break;
    case TR__RULE_PREDICATE:
        d = TR_DTYPE_BOOL;
        break;
    case TR__RULE_CAST:
        d = ARG(1)->dtype;
        break;
    default:
        if (op->info.id == TR_OP_SQUARE && d == TR_DTYPE_BOOL)
            d = TR_DTYPE_I64; /* PyTorch's pow(x, 2) */
        break;
    }
    *out = x;
    out->dtype = d;
    out->weak = x.weak && op->rule != TR__RULE_CAST && op->rule != TR__RULE_PREDICATE;
    if (op->rule == TR__RULE_TO &&
        tr_device_parse(ARG(1)->string, &out->device) != TR_OK)
        return fail(bad, 1, TR_ERR_INVALID, NAME, "%s", tr_last_error());
    return TR_OK;
}

static tr_status rule_binary(const struct tr__op *op, const struct tr_value *args,
                             struct tr_value *out, int *bad)
{
    struct tr_value a = as_tensor(ARG(0)), b = as_tensor(ARG(1));
    int64_t shape[TR_MAX_DIMS];
    enum tr_dtype d;
    int n;

    if (tr_promote(&a, &b, &d) != TR_OK)
        return fail(bad, 1, TR_ERR_DTYPE, NAME, "%s", tr_last_error());
    TR_FORWARD_IF_ERROR(broadcast(NAME, bad, 1, &a, &b, &n, shape));
    if (op->rule == TR__RULE_DIVIDE)
        d = floating(d);
    else if (op->rule == TR__RULE_COMPARE || op->rule == TR__RULE_LOGICAL)
        d = TR_DTYPE_BOOL;
    else
        for (int i = 0; i < 2; i++)
            TR_FORWARD_IF_ERROR(check_fits(NAME, bad, i, ARG(i), d));
    if (op->info.id == TR_OP_ISCLOSE)
        for (int i = 2; i < 4; i++)
            if (!(tr__number(ARG(i)) >= 0))
                return fail(bad, i, TR_ERR_INVALID, NAME, "%s must not be negative",
                            op->info.params[i].name);
    if (op->info.id == TR_OP_POW && !tr_dtype_is_float(d) && ARG(1)->kind == TR_VALUE_INT &&
        ARG(1)->known && ARG(1)->integer < 0)
        return fail(bad, 1, TR_ERR_DTYPE, NAME,
                    "an integer tensor to a negative integer power (%lld) is not allowed; "
                    "cast it to a float first (e.g. cast(x, f32))",
                    (long long)ARG(1)->integer);
    set_tensor(out, d, n, shape, a.kind == TR_VALUE_TENSOR && !a.weak ? a.device : b.device);
    out->weak = a.weak && b.weak && op->rule != TR__RULE_COMPARE && op->rule != TR__RULE_LOGICAL;
    return TR_OK;
}

/* where(condition, a, b): the dtype of a and b; clamp(x, min, max): of x
 * with the bounds given.  The shape broadcasts all of them. */
static tr_status rule_where_clamp(const struct tr__op *op, const struct tr_value *args,
                                  struct tr_value *out, int *bad)
{
    struct tr_value acc = as_tensor(ARG(0)), typed = as_tensor(ARG(op->rule == TR__RULE_WHERE));
    int64_t shape[TR_MAX_DIMS];
    int n;

    if (op->rule == TR__RULE_CLAMP && ARG(1)->kind == TR_VALUE_NONE &&
        ARG(2)->kind == TR_VALUE_NONE)
        return fail(bad, -1, TR_ERR_INVALID, NAME, "give min, max or both");

    for (int i = 1; i < 3; i++) {
        struct tr_value v;
        if (ARG(i)->kind == TR_VALUE_NONE)
            continue;
        v = as_tensor(ARG(i));
        TR_FORWARD_IF_ERROR(broadcast(NAME, bad, i, &acc, &v, &n, shape));
        memcpy(acc.shape, shape, sizeof shape);
        acc.ndim = n;
        if (i > (op->rule == TR__RULE_WHERE)) {
            if (tr_promote(&typed, &v, &typed.dtype) != TR_OK)
                return fail(bad, i, TR_ERR_DTYPE, NAME, "%s", tr_last_error());
            typed.weak = typed.weak && v.weak;
        }
    }
    /* where(mask, 0.1, 0.2): numbers meeting a tensor, the mask, take the
     * default dtype of their category, as in PyTorch */
    if (op->rule == TR__RULE_WHERE && typed.weak && !acc.weak && tr_dtype_is_float(typed.dtype))
        typed.dtype = TR_DTYPE_F32;
    for (int i = op->rule == TR__RULE_WHERE; i < 3; i++)
        TR_FORWARD_IF_ERROR(check_fits(NAME, bad, i, ARG(i), typed.dtype));
    set_tensor(out, typed.dtype, acc.ndim, acc.shape, acc.device);
    return TR_OK;
}

static tr_status rule_reduce(const struct tr__op *op, const struct tr_value *args,
                             struct tr_value *out, int *bad)
{
    struct tr_value x = as_tensor(ARG(0));
    int di = tr__param_index(op, "dim"), ki = tr__param_index(op, "keepdim");
    bool flags[TR_MAX_DIMS], keepdim = ki >= 0 && ARG(ki)->boolean;
    enum tr_dtype d = x.dtype;

    if (op->rule == TR__RULE_NORM) {
        double ord = tr__number(ARG(1));
        if (!(ord > 0))
            return fail(bad, 1, TR_ERR_INVALID, NAME, "ord must be a positive number or inf");
    }
    if (op->rule == TR__RULE_ARGEXTREME && ARG(di)->kind == TR_VALUE_NONE && numel(&x) == 0)
        return fail(bad, 0, TR_ERR_SHAPE, NAME, "an empty tensor has no element to take the %s of",
                    NAME);
    if (op->rule == TR__RULE_ARGEXTREME && ARG(di)->kind == TR_VALUE_NONE) {
        /* over the flattened tensor: a scalar index (all ones with keepdim) */
        int64_t ones[TR_MAX_DIMS];
        for (int i = 0; i < x.ndim; i++)
            ones[i] = 1;
        set_tensor(out, TR_DTYPE_I64, keepdim ? x.ndim : 0, ones, x.device);
        return TR_OK;
    }
    TR_FORWARD_IF_ERROR(dims_arg(NAME, bad, di, ARG(di), x.ndim, flags));
    switch (op->rule) {
    case TR__RULE_SUM:
        d = summed(d);
        break;
    case TR__RULE_MEAN:
    case TR__RULE_NORM:
        d = floating(d);
        break;
    case TR__RULE_ARGEXTREME:
    case TR__RULE_COUNT:
        d = TR_DTYPE_I64;
        break;
    case TR__RULE_TRUTH:
        d = TR_DTYPE_BOOL;
        break;
    default:
        break;
    }
    for (int i = 0; i < x.ndim; i++)
        if (flags[i] && x.shape[i] == 0 &&
            (op->rule == TR__RULE_EXTREME || op->rule == TR__RULE_ARGEXTREME))
            return fail(bad, 0, TR_ERR_SHAPE, NAME,
                        "dimension %d has no elements to take the %s of", i, NAME);
    reduce_shape(&x, flags, keepdim, out, d);
    return TR_OK;
}

/* median(x, dim, keepdim): x's dtype; quantile(x, q, dim, keepdim,
 * interpolation): a float, with a first dimension for a list of q.  The
 * values reduced (along dim, or all) must not be none. */
static tr_status rule_quantile(const struct tr__op *op, const struct tr_value *args,
                               struct tr_value *out, int *bad)
{
    static const char *const ways[] = {"linear", "lower", "higher", "nearest", "midpoint"};
    struct tr_value x = as_tensor(ARG(0)), reduced;
    bool median = op->info.id == TR_OP_MEDIAN, flags[TR_MAX_DIMS];
    int di = median ? 1 : 2, n = 0;
    bool keepdim = ARG(di + 1)->boolean;
    const struct tr_value *q = median ? NULL : ARG(1);
    int64_t shape[TR_MAX_DIMS];

    TR_FORWARD_IF_ERROR(dims_arg(NAME, bad, di, ARG(di), x.ndim, flags));
    for (int i = 0; i < x.ndim; i++)
        if (flags[i] && x.shape[i] == 0)
            return fail(bad, 0, TR_ERR_SHAPE, NAME, "dimension %d has no elements to take the %s of",
                        i, NAME);
    if (q) {
        const struct tr_value *items = q->kind == TR_VALUE_LIST ? q->items : q;
        size_t nq = q->kind == TR_VALUE_LIST ? q->count : 1;
        bool known = false;
        for (size_t k = 0; k < nq; k++) {
            double v = tr__number(&items[k]);
            if (!items[k].known)
                return fail(bad, 1, TR_ERR_INVALID, NAME, "q must be constants");
            if (!(v >= 0 && v <= 1))
                return fail(bad, 1, TR_ERR_INVALID, NAME, "q must lie in [0, 1], not %g", v);
        }
        for (int i = 0; i < 5; i++)
            known = known || strcmp(ARG(4)->string, ways[i]) == 0;
        if (!known)
            return fail(bad, 4, TR_ERR_INVALID, NAME,
                        "interpolation must be \"linear\", \"lower\", \"higher\", "
                        "\"nearest\" or \"midpoint\", not \"%s\"", ARG(4)->string);
        if (q->kind == TR_VALUE_LIST)
            shape[n++] = (int64_t)nq;
    }
    reduce_shape(&x, flags, keepdim, &reduced, median ? x.dtype : floating(x.dtype));
    if (n + reduced.ndim > TR_MAX_DIMS)
        return fail(bad, 1, TR_ERR_SHAPE, NAME, "more than %d dimensions", TR_MAX_DIMS);
    memcpy(shape + n, reduced.shape, (size_t)reduced.ndim * sizeof *shape);
    set_tensor(out, reduced.dtype, n + reduced.ndim, shape, x.device);
    return TR_OK;
}

static tr_status rule_cumsum(const struct tr__op *op, const struct tr_value *args,
                             struct tr_value *out, int *bad)
{
    struct tr_value x = as_tensor(ARG(0));
    int d;

    TR_FORWARD_IF_ERROR(normalize_dim(NAME, bad, 1, ARG(1)->integer, x.ndim, &d));
    *out = x;
    out->weak = false;
    out->dtype = summed(x.dtype);
    return TR_OK;
}

static tr_status rule_matmul(const struct tr__op *op, const struct tr_value *args,
                             struct tr_value *out, int *bad)
{
    struct tr_value a = as_tensor(ARG(0)), b = as_tensor(ARG(1)), ba, bb;
    int64_t shape[TR_MAX_DIMS], m, k1, k2, n;
    char sa[160], sb[160];
    enum tr_dtype d;
    int nb, nout = 0;

    if (a.ndim == 0 || b.ndim == 0)
        return fail(bad, a.ndim == 0 ? 0 : 1, TR_ERR_SHAPE, NAME,
                    "needs tensors of at least 1 dimension, not a scalar");
    if (tr_promote(&a, &b, &d) != TR_OK)
        return fail(bad, 1, TR_ERR_DTYPE, NAME, "%s", tr_last_error());
    m = a.ndim >= 2 ? a.shape[a.ndim - 2] : 1;
    k1 = a.shape[a.ndim - 1];
    k2 = b.ndim >= 2 ? b.shape[b.ndim - 2] : b.shape[0];
    n = b.ndim >= 2 ? b.shape[b.ndim - 1] : 1;
    if (k1 != k2)
        return fail(bad, 1, TR_ERR_SHAPE, NAME, "shapes %s and %s do not line up (%lld != %lld)",
                    shape_text(&a, sa, sizeof sa), shape_text(&b, sb, sizeof sb),
                    (long long)k1, (long long)k2);
    /* batch dimensions broadcast */
    ba = a;
    bb = b;
    ba.ndim = a.ndim > 2 ? a.ndim - 2 : 0;
    bb.ndim = b.ndim > 2 ? b.ndim - 2 : 0;
    TR_FORWARD_IF_ERROR(broadcast(NAME, bad, 1, &ba, &bb, &nb, shape));
    nout = nb;
    if (a.ndim >= 2)
        shape[nout++] = m;
    if (b.ndim >= 2)
        shape[nout++] = n;
    if (nout > TR_MAX_DIMS)
        return fail(bad, 1, TR_ERR_SHAPE, NAME, "the result would have too many dimensions");
    set_tensor(out, d, nout, shape, a.device);
    return TR_OK;
}

static tr_status rule_vectors(const struct tr__op *op, const struct tr_value *args,
                              struct tr_value *out, int *bad)
{
    struct tr_value a = as_tensor(ARG(0)), b = as_tensor(ARG(1));
    enum tr_dtype d;
    char sa[160], sb[160];

    if (a.ndim != 1 || b.ndim != 1)
        return fail(bad, a.ndim != 1 ? 0 : 1, TR_ERR_SHAPE, NAME,
                    "needs two vectors, not %s and %s", shape_text(&a, sa, sizeof sa),
                    shape_text(&b, sb, sizeof sb));
    if (tr_promote(&a, &b, &d) != TR_OK)
        return fail(bad, 1, TR_ERR_DTYPE, NAME, "%s", tr_last_error());
    if (op->rule == TR__RULE_DOT) {
        if (a.shape[0] != b.shape[0])
            return fail(bad, 1, TR_ERR_SHAPE, NAME, "lengths %lld and %lld differ",
                        (long long)a.shape[0], (long long)b.shape[0]);
        set_tensor(out, d, 0, NULL, a.device);
    } else {
        int64_t shape[2] = {a.shape[0], b.shape[0]};
        set_tensor(out, d, 2, shape, a.device);
    }
    return TR_OK;
}

static tr_status rule_along_dim(const struct tr__op *op, const struct tr_value *args,
                                struct tr_value *out, int *bad)
{
    struct tr_value x = as_tensor(ARG(0));
    int di = tr__param_index(op, "dim"), d;

    TR_FORWARD_IF_ERROR(normalize_dim(NAME, bad, di, ARG(di)->integer, x.ndim, &d));
    *out = x;
    out->weak = false;
    out->dtype = op->rule == TR__RULE_ARGSORT ? TR_DTYPE_I64 : floating(x.dtype);
    return TR_OK;
}

static tr_status rule_layer_norm(const struct tr__op *op, const struct tr_value *args,
                                 struct tr_value *out, int *bad)
{
    struct tr_value x = as_tensor(ARG(0));
    int wi = tr__param_index(op, "weight"), bi = tr__param_index(op, "bias");
    char s[160];

    if (x.ndim == 0)
        return fail(bad, 0, TR_ERR_SHAPE, NAME, "needs at least 1 dimension");
    for (int k = 0; k < 2; k++) {
        int i = k == 0 ? wi : bi;
        struct tr_value p;
        if (i < 0 || ARG(i)->kind == TR_VALUE_NONE)
            continue;
        p = as_tensor(ARG(i));
        if (p.ndim != 1 || p.shape[0] != x.shape[x.ndim - 1])
            return fail(bad, i, TR_ERR_SHAPE, NAME, "%s must have shape [%lld], not %s",
                        op->info.params[i].name, (long long)x.shape[x.ndim - 1],
                        shape_text(&p, s, sizeof s));
    }
    *out = x;
    out->weak = false;
    out->dtype = floating(x.dtype);
    return TR_OK;
}

static tr_status rule_topk_sort(const struct tr__op *op, const struct tr_value *args,
                                struct tr_value *results, int *bad)
{
    struct tr_value x = as_tensor(ARG(0));
    int di = tr__param_index(op, "dim"), d;

    TR_FORWARD_IF_ERROR(normalize_dim(NAME, bad, di, ARG(di)->integer, x.ndim, &d));
    results[0] = x;
    results[0].weak = false;
    if (op->rule == TR__RULE_TOPK) {
        int64_t k = ARG(1)->integer, size = x.ndim ? x.shape[d] : 1;
        if (k < 0 || k > size)
            return fail(bad, 1, TR_ERR_INDEX, NAME,
                        "k = %lld is out of range for dimension %d of size %lld", (long long)k, d,
                        (long long)size);
        if (x.ndim)
            results[0].shape[d] = k;
    }
    results[1] = results[0];
    results[1].dtype = TR_DTYPE_I64;
    return TR_OK;
}

static bool integer_index(const struct tr_value *v)
{
    return v->kind == TR_VALUE_TENSOR && tr_dtype_is_integer(v->dtype);
}

static tr_status rule_gather(const struct tr__op *op, const struct tr_value *args,
                             struct tr_value *out, int *bad)
{
    struct tr_value x = as_tensor(ARG(0)), index = as_tensor(ARG(2));
    int d;
    char s[160], t[160];

    TR_FORWARD_IF_ERROR(normalize_dim(NAME, bad, 1, ARG(1)->integer, x.ndim, &d));
    if (!integer_index(&index))
        return fail(bad, 2, TR_ERR_DTYPE, NAME, "the index must be a tensor of integers, not %s",
                    tr_dtype_name(index.dtype));
    if (op->rule == TR__RULE_INDEX_SELECT) {
        if (index.ndim > 1)
            return fail(bad, 2, TR_ERR_SHAPE, NAME, "the index must be 1-d, not %s",
                        shape_text(&index, s, sizeof s));
        *out = x;
        out->weak = false;
        if (x.ndim)
            out->shape[d] = index.ndim ? index.shape[0] : 1;
        return TR_OK;
    }
    if (index.ndim != x.ndim)
        return fail(bad, 2, TR_ERR_SHAPE, NAME, "index %s and x %s differ in rank",
                    shape_text(&index, s, sizeof s), shape_text(&x, t, sizeof t));
    for (int i = 0; i < x.ndim; i++)
        if (i != d && index.shape[i] > x.shape[i])
            return fail(bad, 2, TR_ERR_SHAPE, NAME,
                        "index %s is larger than x %s in dimension %d",
                        shape_text(&index, s, sizeof s), shape_text(&x, t, sizeof t), i);
    set_tensor(out, x.dtype, index.ndim, index.shape, x.device);
    return TR_OK;
}

static tr_status rule_join(const struct tr__op *op, const struct tr_value *args,
                           struct tr_value *out, int *bad)
{
    const struct tr_value *list = ARG(0);
    struct tr_value first = as_tensor(&list->items[0]);
    int64_t shape[TR_MAX_DIMS];
    enum tr_dtype d = first.dtype;
    bool stack = op->rule == TR__RULE_STACK;
    int n = first.ndim, dim;
    char s[160], t[160];

    if (!stack && n == 0)
        return fail(bad, 0, TR_ERR_SHAPE, NAME, "cannot join scalars (use stack)");
    if (stack && n >= TR_MAX_DIMS)
        return fail(bad, 0, TR_ERR_SHAPE, NAME, "the result would have too many dimensions");
    TR_FORWARD_IF_ERROR(normalize_dim(NAME, bad, 1, ARG(1)->integer, stack ? n + 1 : n, &dim));
    memcpy(shape, first.shape, sizeof shape);
    for (size_t i = 1; i < list->count; i++) {
        struct tr_value v = as_tensor(&list->items[i]), acc = first;
        acc.dtype = d;
        if (tr_promote(&acc, &v, &d) != TR_OK)
            return fail(bad, 0, TR_ERR_DTYPE, NAME, "%s", tr_last_error());
        if (v.ndim != n)
            return fail(bad, 0, TR_ERR_SHAPE, NAME, "tensors of %d and %d dimensions (%s and %s)",
                        n, v.ndim, shape_text(&first, s, sizeof s), shape_text(&v, t, sizeof t));
        for (int k = 0; k < n; k++) {
            if (!stack && k == dim) {
                if (__builtin_add_overflow(shape[k], v.shape[k], &shape[k]))
                    return fail(bad, 0, TR_ERR_SHAPE, NAME, "the joined dimension has more "
                                "than %lld elements", (long long)INT64_MAX);
                continue;
            }
            if (v.shape[k] != first.shape[k])
                return fail(bad, 0, TR_ERR_SHAPE, NAME,
                            "shapes %s and %s differ in dimension %d%s",
                            shape_text(&first, s, sizeof s), shape_text(&v, t, sizeof t), k,
                            stack ? "" : ", which is not the one joined");
        }
    }
    if (stack) {
        for (int k = n; k > dim; k--)
            shape[k] = shape[k - 1];
        shape[dim] = (int64_t)list->count;
        n++;
    }
    set_tensor(out, d, n, shape, first.device);
    return TR_OK;
}

/* The shape of the scale for values of x's shape, split as dim (argument
 * at) and group (at + 1) say: one value (0-d) without either; [n] along a
 * dim of n (a 0-d x has one slice); x's shape with its last dimension
 * divided by group. */
static tr_status scale_shape(const struct tr__op *op, const struct tr_value *args, int at,
                             const struct tr_value *x, int *bad, struct tr_value *scale)
{
    const struct tr_value *dim = ARG(at), *group = ARG(at + 1);
    int64_t shape[TR_MAX_DIMS];
    int d;

    if (dim->kind != TR_VALUE_NONE && group->kind != TR_VALUE_NONE)
        return fail(bad, at + 1, TR_ERR_INVALID, NAME,
                    "takes dim (a scale per slice) or group (a scale per group along the "
                    "last dimension), not both");
    if (group->kind != TR_VALUE_NONE) {
        int64_t g = group->integer, last;
        if (g < 1)
            return fail(bad, at + 1, TR_ERR_INVALID, NAME, "group must be at least 1, not %lld",
                        (long long)g);
        if (x->ndim == 0)
            return fail(bad, at + 1, TR_ERR_SHAPE, NAME,
                        "group splits the last dimension, and the values are 0-d");
        last = x->shape[x->ndim - 1];
        if (last % g != 0)
            return fail(bad, at + 1, TR_ERR_SHAPE, NAME,
                        "group %lld does not divide the last dimension, of %lld", (long long)g,
                        (long long)last);
        memcpy(shape, x->shape, (size_t)x->ndim * sizeof *shape);
        shape[x->ndim - 1] = last / g;
        set_tensor(scale, TR_DTYPE_F32, x->ndim, shape, x->device);
        return TR_OK;
    }
    if (dim->kind == TR_VALUE_NONE) {
        set_tensor(scale, TR_DTYPE_F32, 0, NULL, x->device);
        return TR_OK;
    }
    TR_FORWARD_IF_ERROR(normalize_dim(NAME, bad, at, dim->integer, x->ndim, &d));
    shape[0] = x->ndim ? x->shape[d] : 1;
    set_tensor(scale, TR_DTYPE_F32, 1, shape, x->device);
    return TR_OK;
}

/* quantize -> q, scale and quantize_affine -> q, scale, zero_point: q of
 * x's shape in the dtype asked for (u8 with the last dimension halved
 * for i4 and u4), the scale f32 and the zero point u8 of scale_shape's
 * shape. */
static tr_status rule_quantize(const struct tr__op *op, const struct tr_value *args,
                               struct tr_value *results, int *bad)
{
    bool affine = op->info.id == TR_OP_QUANTIZE_AFFINE;
    struct tr_value x = as_tensor(ARG(0));
    const char *word = ARG(1)->kind == TR_VALUE_STRING ? ARG(1)->string : NULL;
    const char *asked = word ? word : tr_dtype_name(ARG(1)->dtype);
    enum tr_dtype q = word ? TR_DTYPE_U8 : ARG(1)->dtype;
    char s[160];

    if (affine && (word ? strcmp(word, "u4") != 0 : q != TR_DTYPE_U8))
        return fail(bad, 1, TR_ERR_DTYPE, NAME,
                    "quantizes to u8 (values 0..255) or u4 (0..15, two a byte), not %s", asked);
    if (!affine && (word ? strcmp(word, "i4") != 0 : q != TR_DTYPE_I8 && q != TR_DTYPE_I16))
        return fail(bad, 1, TR_ERR_DTYPE, NAME,
                    "quantizes to i8 (values -127..127), i16 (-32767..32767) or i4 (-7..7, two "
                    "a byte), not %s",
                    asked);
    if (word && (x.ndim == 0 || x.shape[x.ndim - 1] % 2 != 0))
        return fail(bad, 0, TR_ERR_SHAPE, NAME,
                    "%s packs two values a byte along the last dimension, which must be even; "
                    "x has shape %s",
                    word, shape_text(&x, s, sizeof s));
    TR_FORWARD_IF_ERROR(scale_shape(op, args, 2, &x, bad, &results[1]));
    set_tensor(&results[0], q, x.ndim, x.shape, x.device);
    if (word)
        results[0].shape[x.ndim - 1] /= 2;
    if (affine) {
        results[2] = results[1];
        results[2].dtype = TR_DTYPE_U8;
    }
    return TR_OK;
}

/* A scale or zero point (argument at) of dequantize: one value without dim
 * and group, else exactly the shape scale_shape gives. */
static tr_status check_scale(const struct tr__op *op, const struct tr_value *args, int at,
                             const struct tr_value *want, int *bad)
{
    struct tr_value v = as_tensor(ARG(at));
    const char *what = at == 1 ? "the scale" : "the zero point";
    char s[160], t[160];
    bool same = v.ndim == want->ndim;

    if (ARG(3)->kind == TR_VALUE_NONE && ARG(4)->kind == TR_VALUE_NONE) {
        if (numel(&v) != 1)
            return fail(bad, at, TR_ERR_SHAPE, NAME,
                        "without dim or group %s is one value, not %s", what,
                        shape_text(&v, s, sizeof s));
        return TR_OK;
    }
    for (int i = 0; same && i < v.ndim; i++)
        same = v.shape[i] == want->shape[i];
    if (!same)
        return fail(bad, at, TR_ERR_SHAPE, NAME, "%s must have shape %s, not %s", what,
                    shape_text(want, s, sizeof s), shape_text(&v, t, sizeof t));
    return TR_OK;
}

/* dequantize: f32 values of q's shape, or with dtype i4 or u4 of a u8 q's
 * shape with the last dimension doubled. */
static tr_status rule_dequantize(const struct tr__op *op, const struct tr_value *args,
                                 struct tr_value *out, int *bad)
{
    struct tr_value q = as_tensor(ARG(0)), want;
    const char *word = ARG(5)->kind == TR_VALUE_STRING ? ARG(5)->string : NULL;
    int64_t shape[TR_MAX_DIMS];

    if (ARG(5)->kind == TR_VALUE_DTYPE)
        return fail(bad, 5, TR_ERR_DTYPE, NAME,
                    "dtype says how q holds its values: None (as its own dtype says), or i4 or "
                    "u4 (two a byte in u8), not %s",
                    tr_dtype_name(ARG(5)->dtype));
    if (q.ndim > 0)
        memcpy(shape, q.shape, (size_t)q.ndim * sizeof *shape);
    if (word) {
        if (q.dtype != TR_DTYPE_U8)
            return fail(bad, 0, TR_ERR_DTYPE, NAME,
                        "%s values come two a byte in a u8 tensor, not in %s", word,
                        tr_dtype_name(q.dtype));
        if (q.ndim == 0)
            return fail(bad, 0, TR_ERR_SHAPE, NAME,
                        "%s values are packed along the last dimension, and q is 0-d", word);
        if (__builtin_mul_overflow(shape[q.ndim - 1], 2, &shape[q.ndim - 1]))
            return fail(bad, 0, TR_ERR_SHAPE, NAME, "q's last dimension, doubled, passes int64");
    }
    set_tensor(out, TR_DTYPE_F32, q.ndim, shape, q.device);
    TR_FORWARD_IF_ERROR(scale_shape(op, args, 3, out, bad, &want));
    TR_FORWARD_IF_ERROR(check_scale(op, args, 1, &want, bad));
    if (ARG(2)->kind != TR_VALUE_NONE)
        TR_FORWARD_IF_ERROR(check_scale(op, args, 2, &want, bad));
    return TR_OK;
}

/* zeros_like(x, dtype), ones_like and full_like(x, value, dtype): x's
 * shape on x's device, of x's dtype unless dtype is given (PyTorch's
 * full_like converts value to it). */
static tr_status rule_like(const struct tr__op *op, const struct tr_value *args,
                           struct tr_value *out, int *bad)
{
    const struct tr_value *x = ARG(0);
    int di = tr__param_index(op, "dtype"), vi = tr__param_index(op, "value");
    enum tr_dtype dtype;

    if (x->kind != TR_VALUE_TENSOR)
        return fail(bad, 0, TR_ERR_INVALID, NAME, "x must be a tensor, not a number");
    dtype = ARG(di)->kind == TR_VALUE_DTYPE ? ARG(di)->dtype : x->dtype;
    if (vi >= 0)
        TR_FORWARD_IF_ERROR(check_fits(NAME, bad, vi, ARG(vi), dtype));
    set_tensor(out, dtype, x->ndim, x->shape, x->device);
    return TR_OK;
}

/* A list of dims (or one) given as a shape argument: known integers, each
 * made non-negative for a tensor of ndim dimensions (a scalar takes 0 and
 * -1), none twice; *n is how many (a scalar's dims count, but name none). */
static tr_status dim_list(const char *op, int *bad, int arg, const struct tr_value *v, int ndim,
                          int *dims, int *n)
{
    const struct tr_value *items = v->kind == TR_VALUE_LIST ? v->items : v;
    size_t count = v->kind == TR_VALUE_LIST ? v->count : 1;
    bool seen[TR_MAX_DIMS] = {false};

    if (count > (size_t)(ndim > 0 ? ndim : 1))
        return fail(bad, arg, TR_ERR_INDEX, op, "%zu dimensions listed for a tensor of %d", count,
                    ndim);
    for (size_t i = 0; i < count; i++) {
        if (items[i].kind != TR_VALUE_INT || !items[i].known)
            return fail(bad, arg, TR_ERR_INVALID, op, "dimensions are integer constants");
        TR_FORWARD_IF_ERROR(normalize_dim(op, bad, arg, items[i].integer, ndim, &dims[i]));
        if (seen[dims[i]])
            return fail(bad, arg, TR_ERR_INDEX, op, "dim %d is listed twice", dims[i]);
        seen[dims[i]] = true;
    }
    *n = (int)count;
    return TR_OK;
}

/* flip(x, dims): x's shape. */
static tr_status rule_flip(const struct tr__op *op, const struct tr_value *args,
                           struct tr_value *out, int *bad)
{
    struct tr_value x = as_tensor(ARG(0));
    int dims[TR_MAX_DIMS], n;

    TR_FORWARD_IF_ERROR(dim_list(NAME, bad, 1, ARG(1), x.ndim, dims, &n));
    set_tensor(out, x.dtype, x.ndim, x.shape, x.device);
    return TR_OK;
}

/* narrow(x, dim, start, length): start may count from the end; start and
 * start + length lie in [0, size], as PyTorch's. */
static tr_status rule_narrow(const struct tr__op *op, const struct tr_value *args,
                             struct tr_value *out, int *bad)
{
    struct tr_value x = as_tensor(ARG(0));
    int64_t start = ARG(2)->integer, length = ARG(3)->integer, size;
    int d;

    if (x.ndim == 0)
        return fail(bad, 0, TR_ERR_SHAPE, NAME, "cannot narrow a 0-d tensor");
    TR_FORWARD_IF_ERROR(normalize_dim(NAME, bad, 1, ARG(1)->integer, x.ndim, &d));
    size = x.shape[d];
    if (start < -size || start > size)
        return fail(bad, 2, TR_ERR_INDEX, NAME,
                    "start %lld is out of range for dimension %d of size %lld",
                    (long long)start, d, (long long)size);
    if (start < 0)
        start += size;
    if (length < 0 || length > size - start)
        return fail(bad, 3, TR_ERR_INDEX, NAME,
                    "length %lld from start %lld passes the end of dimension %d of size %lld",
                    (long long)length, (long long)start, d, (long long)size);
    set_tensor(out, x.dtype, x.ndim, x.shape, x.device);
    out->shape[d] = length;
    return TR_OK;
}

/* unflatten(x, dim, sizes): dimension dim becomes sizes, which multiply
 * to its size (one of them may be -1). */
static tr_status rule_unflatten(const struct tr__op *op, const struct tr_value *args,
                                struct tr_value *out, int *bad)
{
    struct tr_value x = as_tensor(ARG(0));
    int64_t sizes[TR_MAX_DIMS], shape[TR_MAX_DIMS], known = 1, size;
    int d, ns, n = 0, infer = -1;
    char a[160];

    if (x.ndim == 0)
        return fail(bad, 0, TR_ERR_SHAPE, NAME, "cannot unflatten a 0-d tensor");
    TR_FORWARD_IF_ERROR(normalize_dim(NAME, bad, 1, ARG(1)->integer, x.ndim, &d));
    TR_FORWARD_IF_ERROR(shape_arg(NAME, bad, 2, ARG(2), true, &ns, sizes));
    if (ns == 0)
        return fail(bad, 2, TR_ERR_SHAPE, NAME, "sizes must not be empty");
    if (x.ndim - 1 + ns > TR_MAX_DIMS)
        return fail(bad, 2, TR_ERR_SHAPE, NAME, "the result would have %d dimensions (at most "
                    "%d are supported)", x.ndim - 1 + ns, TR_MAX_DIMS);
    for (int i = 0; i < ns; i++) {
        if (sizes[i] == -1) {
            if (infer >= 0)
                return fail(bad, 2, TR_ERR_SHAPE, NAME, "only one size may be -1");
            infer = i;
        } else if (__builtin_mul_overflow(known, sizes[i], &known)) {
            return fail(bad, 2, TR_ERR_SHAPE, NAME, "the sizes have too many elements");
        }
    }
    size = x.shape[d];
    if (infer >= 0 && known != 0 && size % known == 0)
        sizes[infer] = size / known;
    else if (infer >= 0 || known != size)
        return fail(bad, 2, TR_ERR_SHAPE, NAME,
                    "sizes %s do not multiply to the size %lld of dimension %d%s",
                    tr_format_shape(sizes, ns, a, sizeof a), (long long)size, d,
                    infer >= 0 && known == 0 ? " (-1 beside a 0 could be any size)" : "");
    for (int i = 0; i < x.ndim; i++) {
        if (i != d) {
            shape[n++] = x.shape[i];
            continue;
        }
        for (int k = 0; k < ns; k++)
            shape[n++] = sizes[k];
    }
    set_tensor(out, x.dtype, n, shape, x.device);
    return TR_OK;
}

/* movedim(x, source, destination): as many of each, none twice. */
static tr_status rule_movedim(const struct tr__op *op, const struct tr_value *args,
                              struct tr_value *out, int *bad)
{
    struct tr_value x = as_tensor(ARG(0));
    int src[TR_MAX_DIMS], dst[TR_MAX_DIMS], order[TR_MAX_DIMS], ns, nd;

    TR_FORWARD_IF_ERROR(dim_list(NAME, bad, 1, ARG(1), x.ndim, src, &ns));
    TR_FORWARD_IF_ERROR(dim_list(NAME, bad, 2, ARG(2), x.ndim, dst, &nd));
    if (ns != nd)
        return fail(bad, 2, TR_ERR_INVALID, NAME,
                    "%d source dimensions and %d destinations: give as many of each", ns, nd);
    set_tensor(out, x.dtype, x.ndim, x.shape, x.device);
    tr__movedim_order(x.ndim, src, dst, x.ndim > 0 ? ns : 0, order);
    for (int i = 0; i < x.ndim; i++)
        out->shape[i] = x.shape[order[i]];
    return TR_OK;
}

/* tril(x, diagonal) and triu: x's dtype and shape, at least a matrix. */
static tr_status rule_triangle(const struct tr__op *op, const struct tr_value *args,
                               struct tr_value *out, int *bad)
{
    struct tr_value x = as_tensor(ARG(0));

    if (x.ndim < 2)
        return fail(bad, 0, TR_ERR_SHAPE, NAME, "needs at least 2 dimensions, not %d", x.ndim);
    set_tensor(out, x.dtype, x.ndim, x.shape, x.device);
    return TR_OK;
}

/* ------------------------------------------------- rearranging copies */

/* An argument of kind shape read as integers of any sign (roll's shifts,
 * pad's widths, repeat's counts): an integer or a list of at most max
 * integer constants. */
static tr_status ints_arg(const char *op, int *bad, int arg, const struct tr_value *v, size_t max,
                          const char *what, size_t *n, int64_t *out)
{
    const struct tr_value *items = v->kind == TR_VALUE_LIST ? v->items : v;

    *n = v->kind == TR_VALUE_LIST ? v->count : 1;
    if (*n > max)
        return fail(bad, arg, TR_ERR_SHAPE, op, "%zu %s, more than the %zu a tensor of up to "
                    "%d dimensions can take", *n, what, max, TR_MAX_DIMS);
    for (size_t i = 0; i < *n; i++) {
        if (items[i].kind != TR_VALUE_INT || !items[i].known)
            return fail(bad, arg, TR_ERR_INVALID, op, "%s are integer constants, known before "
                        "the stage runs", what);
        out[i] = items[i].integer;
    }
    return TR_OK;
}

/* A dim of an op that, as PyTorch, refuses one on a 0-d tensor. */
static tr_status tensor_dim(const char *op, int *bad, int arg, int64_t dim, int ndim, int *out)
{
    if (ndim == 0)
        return fail(bad, arg, TR_ERR_INDEX, op, "dim %lld is out of range for a tensor of 0 "
                    "dimensions (leave dim out)", (long long)dim);
    return normalize_dim(op, bad, arg, dim, ndim, out);
}

static tr_status rule_roll(const struct tr__op *op, const struct tr_value *args,
                           struct tr_value *out, int *bad)
{
    struct tr_value x = as_tensor(ARG(0));
    const struct tr_value *dims = ARG(2);
    int64_t shifts[TR_MAX_DIMS];
    size_t n, ndims = dims->kind == TR_VALUE_LIST ? dims->count : 1;

    TR_FORWARD_IF_ERROR(ints_arg(NAME, bad, 1, ARG(1), TR_MAX_DIMS, "shifts", &n, shifts));
    if (n == 0)
        return fail(bad, 1, TR_ERR_INVALID, NAME, "needs at least one shift");
    if (dims->kind == TR_VALUE_NONE) {
        if (n != 1)
            return fail(bad, 1, TR_ERR_INVALID, NAME, "without dims it takes one shift (of the "
                        "flattened x), not %zu", n);
    } else {
        const struct tr_value *items = dims->kind == TR_VALUE_LIST ? dims->items : dims;
        if (ndims != n)
            return fail(bad, 2, TR_ERR_INVALID, NAME, "%zu shift%s for %zu dim%s: each dim takes "
                        "one", n, n == 1 ? "" : "s", ndims, ndims == 1 ? "" : "s");
        for (size_t i = 0; i < n; i++) {
            int d;
            TR_FORWARD_IF_ERROR(tensor_dim(NAME, bad, 2, items[i].integer, x.ndim, &d));
        }
    }
    *out = x;
    out->weak = false;
    return TR_OK;
}

static tr_status rule_repeat(const struct tr__op *op, const struct tr_value *args,
                             struct tr_value *out, int *bad)
{
    struct tr_value x = as_tensor(ARG(0));
    int64_t repeats[TR_MAX_DIMS], shape[TR_MAX_DIMS];
    size_t n;
    int lead;

    TR_FORWARD_IF_ERROR(ints_arg(NAME, bad, 1, ARG(1), TR_MAX_DIMS, "repeats", &n, repeats));
    if ((int)n < x.ndim)
        return fail(bad, 1, TR_ERR_SHAPE, NAME, "%zu repeats for a tensor of %d dimensions "
                    "(one a dimension at least)", n, x.ndim);
    lead = (int)n - x.ndim;
    for (int i = 0; i < (int)n; i++) {
        int64_t size = i < lead ? 1 : x.shape[i - lead];
        if (repeats[i] < 0)
            return fail(bad, 1, TR_ERR_SHAPE, NAME, "a repeat count cannot be negative (%lld)",
                        (long long)repeats[i]);
        if (__builtin_mul_overflow(size, repeats[i], &shape[i]))
            return fail(bad, 1, TR_ERR_SHAPE, NAME, "dimension %d would have more than %lld "
                        "elements", i, (long long)INT64_MAX);
    }
    set_tensor(out, x.dtype, (int)n, shape, x.device);
    return TR_OK;
}

static tr_status rule_repeat_interleave(const struct tr__op *op, const struct tr_value *args,
                                        struct tr_value *out, int *bad)
{
    struct tr_value x = as_tensor(ARG(0));
    int64_t r = ARG(1)->integer, len;
    int d;

    if (r < 0)
        return fail(bad, 1, TR_ERR_SHAPE, NAME, "repeats cannot be negative (%lld)", (long long)r);
    if (ARG(2)->kind == TR_VALUE_NONE) {
        int64_t all = numel(&x);
        if (all < 0 || __builtin_mul_overflow(all, r, &len))
            return fail(bad, 1, TR_ERR_SHAPE, NAME, "the result would have more than %lld "
                        "elements", (long long)INT64_MAX);
        set_tensor(out, x.dtype, 1, &len, x.device);
        return TR_OK;
    }
    TR_FORWARD_IF_ERROR(tensor_dim(NAME, bad, 2, ARG(2)->integer, x.ndim, &d));
    *out = x;
    out->weak = false;
    if (__builtin_mul_overflow(x.shape[d], r, &out->shape[d]))
        return fail(bad, 1, TR_ERR_SHAPE, NAME, "dimension %d would have more than %lld elements",
                    d, (long long)INT64_MAX);
    return TR_OK;
}

/* Whether pad's value converted to d keeps its value's range (PyTorch
 * refuses a value that overflows: -1 or 255.5 for u8, 1e6 for f16). */
static bool pad_value_fits(const struct tr_value *v, enum tr_dtype d)
{
    double f, lo, hi;

    if (v->kind == TR_VALUE_BOOL || !v->known || d == TR_DTYPE_BOOL || d == TR_DTYPE_F64)
        return true;
    if (v->kind == TR_VALUE_INT && tr_dtype_is_integer(d))
        return tr_constant_fits(v, d);
    f = tr__number(v);
    if (tr_dtype_is_float(d)) {
        hi = d == TR_DTYPE_F16 ? 65504.0 : d == TR_DTYPE_BF16 ? 0x1.fep127 : 0x1.fffffep127;
        return !isfinite(f) || fabs(f) <= hi;
    }
    /* the range as PyTorch checks it, before the value is truncated */
    hi = ldexp(1.0, 8 * (int)tr_dtype_size(d) - tr_dtype_is_signed(d));
    lo = tr_dtype_is_signed(d) ? -hi : 0.0;
    return f >= lo && (hi > 0x1p53 ? f < hi : f <= hi - 1); /* NaN and infinities fail */
}

static tr_status rule_pad(const struct tr__op *op, const struct tr_value *args,
                          struct tr_value *out, int *bad)
{
    struct tr_value x = as_tensor(ARG(0));
    const char *mode = ARG(2)->string;
    bool constant = strcmp(mode, "constant") == 0, reflect = strcmp(mode, "reflect") == 0;
    int64_t pad[2 * TR_MAX_DIMS];
    size_t n;

    TR_FORWARD_IF_ERROR(ints_arg(NAME, bad, 1, ARG(1), 2 * TR_MAX_DIMS, "pad widths", &n, pad));
    if (!constant && !reflect && strcmp(mode, "replicate") != 0)
        return fail(bad, 2, TR_ERR_INVALID, NAME, "unknown mode \"%s\" (the modes are "
                    "\"constant\", \"reflect\" and \"replicate\")", mode);
    if (n % 2)
        return fail(bad, 1, TR_ERR_SHAPE, NAME, "pad has %zu widths; it takes pairs (before, "
                    "after), from the last dimension back", n);
    if ((int)n / 2 > x.ndim)
        return fail(bad, 1, TR_ERR_SHAPE, NAME, "pad has %zu pairs for a tensor of %d "
                    "dimension%s", n / 2, x.ndim, x.ndim == 1 ? "" : "s");
    if (constant && !pad_value_fits(ARG(3), x.dtype))
        return fail(bad, 3, TR_ERR_DTYPE, NAME, "the value %g does not fit %s", tr__number(ARG(3)),
                    tr_dtype_name(x.dtype));
    if (!constant && tr__number(ARG(3)) != 0)
        return fail(bad, 3, TR_ERR_INVALID, NAME, "mode \"%s\" takes no value", mode);
    *out = x;
    out->weak = false;
    for (size_t k = 0; k < n / 2; k++) {
        int d = x.ndim - 1 - (int)k;
        int64_t size = x.shape[d], before = pad[2 * k], after = pad[2 * k + 1], len;
        if (before == INT64_MIN || after == INT64_MIN)
            return fail(bad, 1, TR_ERR_SHAPE, NAME, "a width of %lld is out of range",
                        (long long)INT64_MIN);
        if (!constant && (before < 0 || after < 0))
            return fail(bad, 1, TR_ERR_SHAPE, NAME, "mode \"%s\" takes no negative widths (%lld, "
                        "%lld for dimension %d); crop with x[...] first", mode, (long long)before,
                        (long long)after, d);
        if (reflect && (before >= size || after >= size) && (before || after))
            return fail(bad, 1, TR_ERR_SHAPE, NAME, "reflect widths must be less than the size: "
                        "(%lld, %lld) for dimension %d of size %lld", (long long)before,
                        (long long)after, d, (long long)size);
        if (!constant && !reflect && size == 0 && (before || after))
            return fail(bad, 1, TR_ERR_SHAPE, NAME, "cannot replicate the edge of dimension %d, "
                        "which is empty", d);
        if (__builtin_add_overflow(size, before, &len) || __builtin_add_overflow(len, after, &len))
            return fail(bad, 1, TR_ERR_SHAPE, NAME, "dimension %d would have more than %lld "
                        "elements", d, (long long)INT64_MAX);
        if (len < 0)
            return fail(bad, 1, TR_ERR_SHAPE, NAME, "widths (%lld, %lld) leave dimension %d of "
                        "size %lld with a negative size", (long long)before, (long long)after, d,
                        (long long)size);
        out->shape[d] = len;
    }
    return TR_OK;
}

static tr_status rule_take_along_dim(const struct tr__op *op, const struct tr_value *args,
                                     struct tr_value *out, int *bad)
{
    struct tr_value x = as_tensor(ARG(0)), index = as_tensor(ARG(1));
    int64_t shape[TR_MAX_DIMS], len;
    char s[160], t[160];
    int d;

    if (!integer_index(&index))
        return fail(bad, 1, TR_ERR_DTYPE, NAME, "the indices must be a tensor of integers, "
                    "not %s", tr_dtype_name(index.dtype));
    if (ARG(2)->kind == TR_VALUE_NONE) {
        len = numel(&index);
        set_tensor(out, x.dtype, 1, &len, x.device);
        return TR_OK;
    }
    TR_FORWARD_IF_ERROR(tensor_dim(NAME, bad, 2, ARG(2)->integer, x.ndim, &d));
    if (index.ndim != x.ndim)
        return fail(bad, 1, TR_ERR_SHAPE, NAME, "indices %s and x %s differ in rank",
                    shape_text(&index, s, sizeof s), shape_text(&x, t, sizeof t));
    for (int i = 0; i < x.ndim; i++) {
        int64_t a = x.shape[i], b = index.shape[i];
        if (i == d) {
            shape[i] = b;
            continue;
        }
        if (a != b && a != 1 && b != 1)
            return fail(bad, 1, TR_ERR_SHAPE, NAME, "indices %s and x %s cannot be broadcast "
                        "together (%lld != %lld in dimension %d)", shape_text(&index, s, sizeof s),
                        shape_text(&x, t, sizeof t), (long long)b, (long long)a, i);
        shape[i] = a == 1 ? b : a;
    }
    set_tensor(out, x.dtype, x.ndim, shape, x.device);
    return TR_OK;
}

static tr_status rule_one_hot(const struct tr__op *op, const struct tr_value *args,
                              struct tr_value *out, int *bad)
{
    struct tr_value x = as_tensor(ARG(0));
    int64_t classes = ARG(1)->integer;

    if (classes < 1)
        return fail(bad, 1, TR_ERR_INVALID, NAME, "num_classes must be a positive integer "
                    "constant, not %lld: the result's last dimension must be known before "
                    "computing", (long long)classes);
    if (x.ndim >= TR_MAX_DIMS)
        return fail(bad, 0, TR_ERR_SHAPE, NAME, "the result would have more than %d dimensions",
                    TR_MAX_DIMS);
    set_tensor(out, TR_DTYPE_I64, x.ndim, x.shape, x.device);
    out->shape[out->ndim++] = classes;
    return TR_OK;
}

/* split(x, size or sizes, dim) and chunk(x, chunks, dim), as PyTorch cuts
 * them: the pieces' count, and the first max of their starts and lengths
 * (starts and lengths may be NULL when max is 0). */
static tr_status rule_split(const struct tr__op *op, const struct tr_value *args, int64_t *starts,
                            int64_t *lengths, size_t max, size_t *count, int *bad)
{
    const struct tr_value *x = ARG(0), *sz = ARG(1);
    int d;
    int64_t size, piece, at = 0;
    size_t n = 0;

    *count = 0;
    if (x->kind != TR_VALUE_TENSOR || x->ndim == 0)
        return fail(bad, 0, TR_ERR_SHAPE, NAME, "needs a tensor with at least one dimension");
    TR_FORWARD_IF_ERROR(normalize_dim(NAME, bad, 2, ARG(2)->integer, x->ndim, &d));
    size = x->shape[d];
    if (op->info.id == TR_OP_SPLIT && sz->kind == TR_VALUE_LIST) {
        for (size_t i = 0; i < sz->count; i++) {
            int64_t len = sz->items[i].integer;
            if (!sz->items[i].known || len < 0)
                return fail(bad, 1, TR_ERR_INVALID, NAME, "sizes are integer constants, not negative");
            if (len > size - at)
                break;
            if (n < max) {
                starts[n] = at;
                lengths[n] = len;
            }
            n++;
            at += len;
        }
        if (n != sz->count || at != size)
            return fail(bad, 1, TR_ERR_SHAPE, NAME,
                        "the sizes must add up to the size of dim %d, %lld", d, (long long)size);
        *count = n;
        return TR_OK;
    }
    piece = sz->integer;
    if (!sz->known || piece < (op->info.id == TR_OP_CHUNK ? 1 : 0))
        return fail(bad, 1, TR_ERR_INVALID, NAME, "%s must be %s constant", op->info.params[1].name,
                    op->info.id == TR_OP_CHUNK ? "a positive" : "a non-negative");
    if (op->info.id == TR_OP_CHUNK) {
        if (size == 0) { /* n empty pieces, as PyTorch gives them */
            for (; (int64_t)n < piece; n++)
                if (n < max)
                    starts[n] = lengths[n] = 0;
            *count = n;
            return TR_OK;
        }
        piece = (size + piece - 1) / piece;
    }
    if (piece == 0 && size > 0)
        return fail(bad, 1, TR_ERR_INVALID, NAME,
                    "a size of 0 cuts only a dimension of size 0 (dim %d is %lld)", d,
                    (long long)size);
    do {
        int64_t len = size - at < piece ? size - at : piece;
        if (n < max) {
            starts[n] = at;
            lengths[n] = len;
        }
        n++;
        at += len;
    } while (at < size);
    *count = n;
    return TR_OK;
}

tr_status tr_op_pieces(const struct tr_op_info *info, const struct tr_value *args, int64_t *starts,
                       int64_t *lengths, size_t max, size_t *count, int *bad_arg)
{
    const struct tr__op *op = tr__op_of(info);
    int bad = -1;
    tr_status s;

    *count = 0;
    TR_RETURN_ERROR_IF(op->rule != TR__RULE_SPLIT, TR_ERR_INVALID,
                       "%s: gives a fixed number of results", info->name);
    s = check_kinds(op, args, &bad);
    if (s == TR_OK)
        s = check_dtypes(op, args, &bad);
    if (s == TR_OK)
        s = rule_split(op, args, starts, lengths, max, count, &bad);
    if (bad_arg)
        *bad_arg = bad;
    return s;
}

/* einsum: the result's letters' sizes (cpu/einsum.c reads the equation),
 * the operands' dtypes promoted together. */
static tr_status rule_einsum(const struct tr__op *op, const struct tr_value *args,
                             struct tr_value *out, int *bad)
{
    const struct tr_value *list = ARG(1);
    struct tr_value ops[TR__EINSUM_MAX_OPERANDS], acc;
    int64_t shape[TR_MAX_DIMS];
    struct tr__einsum e;
    enum tr_dtype d;

    memset(ops, 0, sizeof ops);
    if (list->count > TR__EINSUM_MAX_OPERANDS)
        return fail(bad, 1, TR_ERR_INVALID, NAME, "at most %d operands, not %zu",
                    TR__EINSUM_MAX_OPERANDS, list->count);
    for (size_t k = 0; k < list->count; k++)
        ops[k] = as_tensor(&list->items[k]);
    d = ops[0].dtype;
    for (size_t k = 1; k < list->count; k++) {
        acc = ops[0];
        acc.dtype = d;
        if (tr_promote(&acc, &ops[k], &d) != TR_OK)
            return fail(bad, 1, TR_ERR_DTYPE, NAME, "%s", tr_last_error());
    }
    if (tr__einsum_parse(NAME, ARG(0)->string, (int)list->count, ops, &e, bad) != TR_OK)
        return tr_last_status();
    for (int i = 0; i < e.nout; i++)
        shape[i] = e.size[e.out[i]];
    set_tensor(out, d, e.nout, shape, ops[0].device);
    return TR_OK;
}

static tr_status rule_cdist(const struct tr__op *op, const struct tr_value *args,
                            struct tr_value *out, int *bad)
{
    struct tr_value a = as_tensor(ARG(0)), b = as_tensor(ARG(1)), ba, bb;
    int64_t shape[TR_MAX_DIMS];
    char sa[160], sb[160];
    enum tr_dtype d;
    double p;
    int nb;

    if (a.ndim < 2 || b.ndim < 2)
        return fail(bad, a.ndim < 2 ? 0 : 1, TR_ERR_SHAPE, NAME,
                    "needs tensors of at least 2 dimensions ([..., P, M] and [..., R, M]), not "
                    "%s and %s", shape_text(&a, sa, sizeof sa), shape_text(&b, sb, sizeof sb));
    if (tr_promote(&a, &b, &d) != TR_OK)
        return fail(bad, 1, TR_ERR_DTYPE, NAME, "%s", tr_last_error());
    if (a.shape[a.ndim - 1] != b.shape[b.ndim - 1])
        return fail(bad, 1, TR_ERR_SHAPE, NAME,
                    "%s and %s have rows of different lengths (%lld != %lld)",
                    shape_text(&a, sa, sizeof sa), shape_text(&b, sb, sizeof sb),
                    (long long)a.shape[a.ndim - 1], (long long)b.shape[b.ndim - 1]);
    if (!ARG(2)->known)
        return fail(bad, 2, TR_ERR_INVALID, NAME, "p must be a constant, known before the stage runs");
    p = tr__number(ARG(2));
    if (isnan(p) || p < 0)
        return fail(bad, 2, TR_ERR_INVALID, NAME, "p must be a number >= 0 (inf included), not %g", p);
    ba = a;
    bb = b;
    ba.ndim = a.ndim - 2;
    bb.ndim = b.ndim - 2;
    TR_FORWARD_IF_ERROR(broadcast(NAME, bad, 1, &ba, &bb, &nb, shape));
    shape[nb] = a.shape[a.ndim - 2];
    shape[nb + 1] = b.shape[b.ndim - 2];
    set_tensor(out, d, nb + 2, shape, a.device);
    return TR_OK;
}

static tr_status rule_cosine(const struct tr__op *op, const struct tr_value *args,
                             struct tr_value *out, int *bad)
{
    struct tr_value a = as_tensor(ARG(0)), b = as_tensor(ARG(1));
    int64_t shape[TR_MAX_DIMS];
    enum tr_dtype dt;
    int ndim, d;

    if (tr_promote(&a, &b, &dt) != TR_OK)
        return fail(bad, 1, TR_ERR_DTYPE, NAME, "%s", tr_last_error());
    TR_FORWARD_IF_ERROR(broadcast(NAME, bad, 1, &a, &b, &ndim, shape));
    TR_FORWARD_IF_ERROR(normalize_dim(NAME, bad, 2, ARG(2)->integer, ndim, &d));
    if (ndim > 0) {
        memmove(shape + d, shape + d + 1, (size_t)(ndim - d - 1) * sizeof *shape);
        ndim--;
    }
    set_tensor(out, floating(dt), ndim, shape, a.device);
    return TR_OK;
}

static tr_status rule_cross_entropy(const struct tr__op *op, const struct tr_value *args,
                                    struct tr_value *out, int *bad)
{
    struct tr_value x = as_tensor(ARG(0)), t = as_tensor(ARG(1)), want;
    const char *how = ARG(3)->string;
    char s[160], u[160], v[160];
    int d = 0, n = 0;

    if (x.ndim == 0)
        return fail(bad, 0, TR_ERR_SHAPE, NAME, "logits must have a dimension of classes, not be a scalar");
    if (!integer_index(&t))
        return fail(bad, 1, TR_ERR_DTYPE, NAME,
                    "the target must be class indices, a tensor of integers, not %s (class "
                    "probabilities are not taken)", tr_dtype_name(t.dtype));
    /* [C] logits: the classes are their one dimension, as in PyTorch,
     * which 1 (the default) names too */
    if (x.ndim == 1 && ARG(2)->integer == 1)
        d = 0;
    else
        TR_FORWARD_IF_ERROR(normalize_dim(NAME, bad, 2, ARG(2)->integer, x.ndim, &d));
    set_tensor(&want, t.dtype, 0, NULL, x.device);
    for (int i = 0; i < x.ndim; i++)
        if (i != d)
            want.shape[n++] = x.shape[i];
    want.ndim = n;
    if (t.ndim != n || memcmp(t.shape, want.shape, (size_t)n * sizeof *t.shape) != 0)
        return fail(bad, 1, TR_ERR_SHAPE, NAME,
                    "the target must have the shape %s of logits %s without its dimension %d "
                    "of classes, not %s", shape_text(&want, s, sizeof s),
                    shape_text(&x, u, sizeof u), d, shape_text(&t, v, sizeof v));
    if (strcmp(how, "mean") != 0 && strcmp(how, "sum") != 0 && strcmp(how, "none") != 0)
        return fail(bad, 3, TR_ERR_INVALID, NAME,
                    "reduction must be \"mean\", \"sum\" or \"none\", not \"%s\"", how);
    set_tensor(out, x.dtype, strcmp(how, "none") == 0 ? n : 0, want.shape, x.device);
    return TR_OK;
}

tr_status tr_op_infer(const struct tr_op_info *info, const struct tr_value *args,
                      struct tr_value *results, int *bad_arg)
{
    size_t pieces;
    const struct tr__op *op = tr__op_of(info);
    int bad = -1;
    tr_status s;

    s = check_kinds(op, args, &bad);
    if (s == TR_OK)
        s = check_dtypes(op, args, &bad);
    if (s == TR_OK) {
        switch (op->rule) {
        case TR__RULE_CREATE:
        case TR__RULE_FULL: s = rule_create(op, args, results, &bad); break;
        case TR__RULE_ARANGE: s = rule_arange(op, args, results, &bad); break;
        case TR__RULE_LINSPACE: s = rule_linspace(op, args, results, &bad); break;
        case TR__RULE_EYE: s = rule_eye(op, args, results, &bad); break;
        case TR__RULE_RESHAPE: s = rule_reshape(op, args, results, &bad); break;
        case TR__RULE_TRANSPOSE: s = rule_transpose(op, args, results, &bad); break;
        case TR__RULE_PERMUTE: s = rule_permute(op, args, results, &bad); break;
        case TR__RULE_SQUEEZE: s = rule_squeeze(op, args, results, &bad); break;
        case TR__RULE_UNSQUEEZE: s = rule_unsqueeze(op, args, results, &bad); break;
        case TR__RULE_EXPAND: s = rule_expand(op, args, results, &bad); break;
        case TR__RULE_FLATTEN: s = rule_flatten(op, args, results, &bad); break;
        case TR__RULE_DIAGONAL: s = rule_diagonal(op, args, results, &bad); break;
        case TR__RULE_SAME:
        case TR__RULE_CAST:
        case TR__RULE_TO:
        case TR__RULE_FLOATING:
        case TR__RULE_GELU:
        case TR__RULE_SOFTPLUS:
        case TR__RULE_NAN_TO_NUM:
        case TR__RULE_PREDICATE: s = rule_elementwise(op, args, results, &bad); break;
        case TR__RULE_ARITH:
        case TR__RULE_DIVIDE:
        case TR__RULE_COMPARE:
        case TR__RULE_LOGICAL: s = rule_binary(op, args, results, &bad); break;
        case TR__RULE_WHERE:
        case TR__RULE_CLAMP: s = rule_where_clamp(op, args, results, &bad); break;
        case TR__RULE_SUM:
        case TR__RULE_MEAN:
        case TR__RULE_EXTREME:
        case TR__RULE_ARGEXTREME:
        case TR__RULE_NORM:
        case TR__RULE_TRUTH:
        case TR__RULE_COUNT: s = rule_reduce(op, args, results, &bad); break;
        case TR__RULE_CUMSUM: s = rule_cumsum(op, args, results, &bad); break;
        case TR__RULE_QUANTILE: s = rule_quantile(op, args, results, &bad); break;
        case TR__RULE_SPLIT: s = rule_split(op, args, NULL, NULL, 0, &pieces, &bad); break;
        case TR__RULE_MATMUL: s = rule_matmul(op, args, results, &bad); break;
        case TR__RULE_OUTER:
        case TR__RULE_DOT: s = rule_vectors(op, args, results, &bad); break;
        case TR__RULE_SOFTMAX:
        case TR__RULE_ARGSORT: s = rule_along_dim(op, args, results, &bad); break;
        case TR__RULE_LAYER_NORM: s = rule_layer_norm(op, args, results, &bad); break;
        case TR__RULE_TOPK:
        case TR__RULE_SORT: s = rule_topk_sort(op, args, results, &bad); break;
        case TR__RULE_GATHER:
        case TR__RULE_INDEX_SELECT: s = rule_gather(op, args, results, &bad); break;
        case TR__RULE_CONCAT:
        case TR__RULE_STACK: s = rule_join(op, args, results, &bad); break;
        case TR__RULE_QUANTIZE: s = rule_quantize(op, args, results, &bad); break;
        case TR__RULE_DEQUANTIZE: s = rule_dequantize(op, args, results, &bad); break;
        case TR__RULE_LIKE: s = rule_like(op, args, results, &bad); break;
        case TR__RULE_FLIP: s = rule_flip(op, args, results, &bad); break;
        case TR__RULE_NARROW: s = rule_narrow(op, args, results, &bad); break;
        case TR__RULE_UNFLATTEN: s = rule_unflatten(op, args, results, &bad); break;
        case TR__RULE_MOVEDIM: s = rule_movedim(op, args, results, &bad); break;
        case TR__RULE_TRIANGLE: s = rule_triangle(op, args, results, &bad); break;
        case TR__RULE_ROLL: s = rule_roll(op, args, results, &bad); break;
        case TR__RULE_REPEAT: s = rule_repeat(op, args, results, &bad); break;
        case TR__RULE_REPEAT_INTERLEAVE: s = rule_repeat_interleave(op, args, results, &bad); break;
        case TR__RULE_PAD: s = rule_pad(op, args, results, &bad); break;
        case TR__RULE_TAKE_ALONG_DIM: s = rule_take_along_dim(op, args, results, &bad); break;
        case TR__RULE_ONE_HOT: s = rule_one_hot(op, args, results, &bad); break;
        case TR__RULE_EINSUM: s = rule_einsum(op, args, results, &bad); break;
        case TR__RULE_CDIST: s = rule_cdist(op, args, results, &bad); break;
        case TR__RULE_COSINE: s = rule_cosine(op, args, results, &bad); break;
        case TR__RULE_CROSS_ENTROPY: s = rule_cross_entropy(op, args, results, &bad); break;
        }
    }
    /* a result no tensor could have (a broadcast past int64 bytes) is an
     * error here, not when something sizes it */
    for (int i = 0; s == TR_OK && i < info->nresults; i++) {
        int64_t numel;
        if (results[i].kind == TR_VALUE_TENSOR)
            s = tr__check_shape(info->name, results[i].ndim, results[i].shape, results[i].dtype,
                                &numel);
    }
    if (bad_arg)
        *bad_arg = bad;
    return s;
}

/* ---------------------------------------------------------- view syntax */

tr_status tr_infer_transpose_all(const struct tr_value *x, bool last_two, struct tr_value *out)
{
    struct tr_value t = as_tensor(x);

    *out = t;
    out->weak = false;
    if (last_two) {
        if (t.ndim < 2)
            return tr_set_error(TR_ERR_SHAPE, ".mT needs at least 2 dimensions, not %d", t.ndim);
        out->shape[t.ndim - 2] = t.shape[t.ndim - 1];
        out->shape[t.ndim - 1] = t.shape[t.ndim - 2];
        return TR_OK;
    }
    for (int i = 0; i < t.ndim; i++)
        out->shape[i] = t.shape[t.ndim - 1 - i];
    return TR_OK;
}

/* Python's slice.indices: the length of start:stop:step over len. */
static int64_t slice_length(int64_t len, const struct tr_value *parts)
{
    int64_t step = parts[2].kind == TR_VALUE_INT ? parts[2].integer : 1;
    int64_t lower = step > 0 ? 0 : -1, upper = step > 0 ? len : len - 1, ends[2];

    for (int k = 0; k < 2; k++) {
        int64_t v;
        if (parts[k].kind != TR_VALUE_INT) {
            ends[k] = (k == 0) == (step > 0) ? lower : upper;
            continue;
        }
        v = parts[k].integer;
        if (v < 0)
            v = v < -len ? lower : v + len;
        ends[k] = v < lower ? lower : v > upper ? upper : v;
    }
    if (step > 0)
        return ends[1] > ends[0] ? (ends[1] - ends[0] - 1) / step + 1 : 0;
    /* -step in uint64: a step of INT64_MIN has no int64 negation */
    return ends[0] > ends[1] ? (int64_t)((uint64_t)(ends[0] - ends[1] - 1) / -(uint64_t)step) + 1
                             : 0;
}

tr_status tr_infer_index(const struct tr_value *x, const struct tr_value *subs, size_t n,
                         struct tr_value *out, int *bad)
{
    struct tr_value t = as_tensor(x);
    int64_t shape[TR_MAX_DIMS];
    int consumed = 0, ellipses = 0, ndim = 0, d = 0, ints = 0, nones = 0, last_none = 0;

    *bad = -1;
    for (size_t i = 0; i < n; i++) {
        if (subs[i].kind == TR_VALUE_STRING)
            ellipses++;
        else if (subs[i].kind != TR_VALUE_NONE)
            consumed++;
        if (subs[i].kind == TR_VALUE_NONE) {
            nones++;
            last_none = (int)i;
        }
        ints += subs[i].kind == TR_VALUE_INT;
    }
    if (ellipses > 1) {
        *bad = 0;
        return tr_set_error(TR_ERR_INDEX, "an index can have only one '...'");
    }
    if (consumed > t.ndim) {
        *bad = (int)n - 1;
        return tr_set_error(TR_ERR_INDEX, "too many indices (%d) for a tensor of %d dimension%s",
                            consumed, t.ndim, t.ndim == 1 ? "" : "s");
    }
    /* the dimensions after the last None count too: x[None] of 8 is 9 */
    if (t.ndim - ints + nones > TR_MAX_DIMS) {
        *bad = last_none;
        return tr_set_error(TR_ERR_SHAPE, "a tensor has at most %d dimensions", TR_MAX_DIMS);
    }
    for (size_t i = 0; i < n; i++) {
        const struct tr_value *s = &subs[i];
        if (s->kind == TR_VALUE_STRING) {
            for (int k = 0; k < t.ndim - consumed; k++)
                shape[ndim++] = t.shape[d++];
        } else if (s->kind == TR_VALUE_NONE) {
            if (ndim >= TR_MAX_DIMS) {
                *bad = (int)i;
                return tr_set_error(TR_ERR_SHAPE, "a tensor has at most %d dimensions", TR_MAX_DIMS);
            }
            shape[ndim++] = 1;
        } else if (s->kind == TR_VALUE_INT) {
            int64_t size = t.shape[d];
            if (s->known && (s->integer < -size || s->integer >= size)) {
                *bad = (int)i;
                return tr_set_error(TR_ERR_INDEX,
                                    "index %lld is out of range for dimension %d of size %lld",
                                    (long long)s->integer, d, (long long)size);
            }
            d++;
        } else if (s->kind == TR_VALUE_LIST && s->count == 3) {
            if (s->items[2].kind == TR_VALUE_INT && s->items[2].integer == 0) {
                *bad = (int)i;
                return tr_set_error(TR_ERR_INDEX, "a slice step cannot be zero");
            }
            for (int k = 0; k < 3; k++)
                if (s->items[k].kind == TR_VALUE_INT && !s->items[k].known) {
                    *bad = (int)i;
                    return tr_set_error(TR_ERR_INDEX, "slice bounds must be constants");
                }
            shape[ndim++] = slice_length(t.shape[d++], s->items);
        } else {
            *bad = (int)i;
            return tr_set_error(TR_ERR_INDEX, "an index must be an integer constant, a slice, "
                                              "'...' or None");
        }
    }
    while (d < t.ndim)
        shape[ndim++] = t.shape[d++];
    set_tensor(out, t.dtype, ndim, shape, t.device);
    return TR_OK;
}
