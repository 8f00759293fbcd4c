/*
 * test_kernels.c - running ops through tr_op_run: elementwise kernels with
 * broadcasting, weak scalars, strided operands, f16 computed in f32, NaN
 * rules, and ops without kernels failing by name.
 */
#include <math.h>
#include <string.h>

#include "tensorrun_ops.h"
#include "tap.h"

static struct tr_arg tensor_arg(struct tr_tensor *t)
{
    struct tr_arg a;

    memset(&a, 0, sizeof a);
    a.tensor = t;
    a.value = tr_value_of(t);
    return a;
}

static struct tr_arg number_arg(double x, bool integer)
{
    struct tr_arg a;

    memset(&a, 0, sizeof a);
    a.value.kind = integer ? TR_VALUE_INT : TR_VALUE_FLOAT;
    a.value.integer = (int64_t)x;
    a.value.number = x;
    a.value.known = a.value.weak = true;
    return a;
}

/* Runs op on the given leading arguments (defaults for the rest). */
static struct tr_tensor *run(const char *name, const struct tr_arg *given, int n)
{
    const struct tr_op_info *op = tr_op_find(name);
    struct tr_arg args[TR_OP_MAX_PARAMS];
    struct tr_tensor *results[TR_OP_MAX_RESULTS] = {NULL};

    for (int i = 0; i < op->nparams; i++) {
        if (i < n) {
            args[i] = given[i];
        } else {
            memset(&args[i], 0, sizeof args[i]);
            args[i].value = op->params[i].default_value;
        }
    }
    return tr_op_run(op, args, results) == TR_OK ? results[0] : NULL;
}

static double at(const struct tr_tensor *t, int64_t i, int64_t j)
{
    int64_t index[2] = {i, j};
    double v = NAN;

    tr_tensor_item(t, tr_tensor_ndim(t) == 1 ? &index[1] : index, &v);
    return v;
}

static void test_binary(void)
{
    float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 20, 30};
    int64_t sa[2] = {2, 3}, sb[1] = {3};
    struct tr_tensor *ta = tr_from_data(a, TR_DTYPE_F32, 2, sa, TR_CPU);
    struct tr_tensor *tb = tr_from_data(b, TR_DTYPE_F32, 1, sb, TR_CPU);
    struct tr_tensor *r;

    r = run("add", (struct tr_arg[]){tensor_arg(ta), tensor_arg(tb)}, 2);
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_F32 && at(r, 1, 2) == 36 && at(r, 0, 0) == 11,
       "add broadcasts [2,3] + [3]");
    tr_release(r);
    r = run("mul", (struct tr_arg[]){tensor_arg(ta), number_arg(2.5, false)}, 2);
    ok(r && at(r, 1, 1) == 12.5, "a weak scalar multiplies");
    tr_release(r);
    r = run("lt", (struct tr_arg[]){tensor_arg(ta), number_arg(3, true)}, 2);
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_BOOL && at(r, 0, 1) == 1 && at(r, 0, 2) == 0,
       "comparison gives bool");
    tr_release(r);
    r = run("div", (struct tr_arg[]){number_arg(7, true), tensor_arg(tb)}, 2);
    ok(r && fabs(at(r, 0, 0) - 0.7) < 1e-6, "a number divided by a tensor");
    tr_release(r);
    tr_release(tb);
    tr_release(ta);
}

static void test_integers(void)
{
    int8_t a[4] = {100, -100, 7, -7};
    int64_t s[1] = {4};
    struct tr_tensor *t = tr_from_data(a, TR_DTYPE_I8, 1, s, TR_CPU), *r;

    r = run("add", (struct tr_arg[]){tensor_arg(t), tensor_arg(t)}, 2);
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_I8 && at(r, 0, 0) == -56 && at(r, 0, 1) == 56,
       "i8 + i8 wraps as two's complement");
    tr_release(r);
    r = run("div", (struct tr_arg[]){tensor_arg(t), number_arg(2, true)}, 2);
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_F32 && at(r, 0, 2) == 3.5, "i8 / 2 is f32");
    tr_release(r);
    r = run("pow", (struct tr_arg[]){tensor_arg(t), number_arg(2, true)}, 2);
    ok(r && at(r, 0, 3) == 49, "integer power");
    tr_release(r);
    r = run("exp", (struct tr_arg[]){tensor_arg(t)}, 1);
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_F32, "exp of integers is f32");
    tr_release(r);
    r = run("abs", (struct tr_arg[]){tensor_arg(t)}, 1);
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_I8 && at(r, 0, 1) == 100, "abs keeps the dtype");
    tr_release(r);
    tr_release(t);
}

static void test_strided_and_half(void)
{
    uint16_t h[6];
    int64_t s[2] = {2, 3};
    struct tr_tensor *t, *tt, *r;

    for (int i = 0; i < 6; i++)
        h[i] = tr_f32_to_f16((float)i + 0.5f);
    t = tr_from_data(h, TR_DTYPE_F16, 2, s, TR_CPU);
    tt = tr_transpose(t, 0, 1);
    r = run("mul", (struct tr_arg[]){tensor_arg(tt), number_arg(2, true)}, 2);
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_F16 && tr_tensor_shape(r)[0] == 3 &&
           at(r, 2, 1) == 11 && at(r, 0, 1) == 7,
       "f16 transposed times 2: computed in f32, stored as f16, in the view's order");
    tr_release(r);
    r = run("sqrt", (struct tr_arg[]){tensor_arg(tt)}, 1);
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_F16 && fabs(at(r, 1, 0) - sqrt(1.5)) < 1e-3,
       "sqrt of f16 stays f16");
    tr_release(r);
    tr_release(tt);
    tr_release(t);
}

static void test_nan_rules(void)
{
    float x[3] = {NAN, 5, -5};
    int64_t s[1] = {3};
    struct tr_tensor *t = tr_from_data(x, TR_DTYPE_F32, 1, s, TR_CPU), *r;
    struct tr_arg none;

    memset(&none, 0, sizeof none);
    r = run("maximum", (struct tr_arg[]){tensor_arg(t), number_arg(0, true)}, 2);
    ok(r && isnan(at(r, 0, 0)) && at(r, 0, 1) == 5 && at(r, 0, 2) == 0, "maximum: NaN wins");
    tr_release(r);
    r = run("clamp", (struct tr_arg[]){tensor_arg(t), number_arg(-1, true), number_arg(1, true)},
            3);
    ok(r && isnan(at(r, 0, 0)) && at(r, 0, 1) == 1 && at(r, 0, 2) == -1,
       "clamp to [-1, 1]; NaN stays NaN");
    tr_release(r);
    r = run("clamp", (struct tr_arg[]){tensor_arg(t), none, number_arg(0, true)}, 3);
    ok(r && at(r, 0, 1) == 0 && at(r, 0, 2) == -5, "clamp with only a max");
    tr_release(r);
    r = run("isnan", (struct tr_arg[]){tensor_arg(t)}, 1);
    ok(r && at(r, 0, 0) == 1 && at(r, 0, 1) == 0, "isnan");
    tr_release(r);
    r = run("where", (struct tr_arg[]){number_arg(0.5, false), tensor_arg(t), number_arg(9, true)},
            3);
    ok(r && at(r, 0, 1) == 5, "where: 0.5 is a true condition");
    tr_release(r);
    tr_release(t);
}

/* Ops whose kernels are not written yet fail by name; once every op of
 * the table has its kernel there is nothing left to check. */
static void test_missing_kernel(void)
{
    const struct tr_op_info *op = NULL;
    int64_t s[1] = {3};
    struct tr_tensor *t;

    /* one that runs on a single tensor, its other arguments defaulted */
    for (size_t i = 0; i < tr_op_count() && !op; i++) {
        const struct tr_op_info *o = tr_op_at(i);
        bool single = !o->has_kernel && o->nparams > 0 && o->params[0].kind == TR_PARAM_TENSOR;
        for (int k = 1; single && k < o->nparams; k++)
            single = !o->params[k].required;
        if (single)
            op = o;
    }
    if (!op) {
        skip("every op taking one tensor has a kernel");
        return;
    }
    t = tr_zeros(TR_DTYPE_F32, 1, s, TR_CPU);
    ok(!run(op->name, (struct tr_arg[]){tensor_arg(t)}, 1) && strstr(tr_last_error(), op->name),
       "%s has no kernel yet; running it fails by name: %s", op->name, tr_last_error());
    tr_release(t);
}

int main(void)
{
    test_binary();
    test_integers();
    test_strided_and_half();
    test_nan_rules();
    test_missing_kernel();
    return done_testing();
}
