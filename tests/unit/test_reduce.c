/*
 * test_reduce.c - the reductions, cumsum and the neural ops through
 * tr_op_run: known values, dims lists, keepdim, negative dims, None,
 * strided and broadcast inputs, f16 and integer inputs, NaN, ties, empty
 * tensors, accuracy against long double, and bitwise equality of results
 * computed with 1 and with 4 threads.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/reduce_impl.h"
#include "tensorrun_ops.h"
#include "op_test.h"
#include "tap.h"

/* ------------------------------------------------------------ arguments */

/* A list of dims; items is storage for n values that outlives the call. */
static struct tr_arg DIMS(struct tr_value *items, const int64_t *dims, size_t n)
{
    struct tr_arg a;

    memset(&a, 0, sizeof a);
    a.value.kind = TR_VALUE_LIST;
    a.value.count = n;
    a.value.items = items;
    for (size_t i = 0; i < n; i++) {
        memset(&items[i], 0, sizeof items[i]);
        items[i].kind = TR_VALUE_INT;
        items[i].integer = dims[i];
        items[i].known = true;
    }
    return a;
}

#define RUN(name, ...)                                                       \
    run(name, (struct tr_arg[]){__VA_ARGS__},                                \
        (int)(sizeof((struct tr_arg[]){__VA_ARGS__}) / sizeof(struct tr_arg)))

/* -------------------------------------------------------------- values */

static struct tr_tensor *f32(const float *v, int ndim, const int64_t *shape)
{
    return tr_from_data(v, TR_DTYPE_F32, ndim, shape, TR_CPU);
}

static struct tr_tensor *vec(const float *v, int64_t n)
{
    return f32(v, 1, &n);
}

/* Element i of t (row-major), as a double; NaN when t is NULL. */
static double el(const struct tr_tensor *t, int64_t i)
{
    int64_t idx[TR_MAX_DIMS];
    int nd;
    double v = NAN;

    if (!t)
        return NAN;
    nd = tr_tensor_ndim(t);
    for (int d = nd - 1; d >= 0; d--) {
        idx[d] = i % tr_tensor_shape(t)[d];
        i /= tr_tensor_shape(t)[d];
    }
    tr_tensor_item(t, idx, &v);
    return v;
}

static bool near(double got, double want, double tol)
{
    if (isnan(want))
        return isnan(got);
    if (isinf(want))
        return got == want;
    return fabs(got - want) <= tol * (1 + fabs(want));
}

static bool has_shape(const struct tr_tensor *t, int ndim, const int64_t *shape)
{
    if (!t || tr_tensor_ndim(t) != ndim)
        return false;
    for (int d = 0; d < ndim; d++)
        if (tr_tensor_shape(t)[d] != shape[d])
            return false;
    return true;
}

/* Values in [-1, 1) from a fixed seed. */
static uint64_t rng_state = 88172645463325252ull;

static double uniform(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) * 0x1p-52 - 1.0;
}

static bool same_bits(const struct tr_tensor *a, const struct tr_tensor *b)
{
    uint64_t n;
    char *pa, *pb;
    bool same;

    if (!a || !b || tr_tensor_nbytes(a) != tr_tensor_nbytes(b))
        return false;
    n = tr_tensor_nbytes(a);
    pa = malloc(n ? n : 1);
    pb = malloc(n ? n : 1);
    same = pa && pb && tr_copy_to_host(a, pa, n) == TR_OK && tr_copy_to_host(b, pb, n) == TR_OK &&
           memcmp(pa, pb, n) == 0;
    free(pa);
    free(pb);
    return same;
}

/* ---------------------------------------------------------------- tests */

static const float m23[6] = {1, 2, 3, 4, 5, 6};
static const int64_t s23[2] = {2, 3};

static void test_sum_mean_prod(void)
{
    struct tr_tensor *x = f32(m23, 2, s23), *r;
    struct tr_value items[2];

    r = RUN("sum", tensor_arg(x));
    ok(r && tr_tensor_ndim(r) == 0 && tr_tensor_dtype(r) == TR_DTYPE_F32 && el(r, 0) == 21,
       "sum of everything is a 0-d f32: 21");
    tr_release(r);
    r = RUN("sum", tensor_arg(x), int_arg(0));
    ok(has_shape(r, 1, (int64_t[]){3}) && el(r, 0) == 5 && el(r, 1) == 7 && el(r, 2) == 9,
       "sum over dim 0: [5, 7, 9]");
    tr_release(r);
    r = RUN("sum", tensor_arg(x), int_arg(-1));
    ok(has_shape(r, 1, (int64_t[]){2}) && el(r, 0) == 6 && el(r, 1) == 15,
       "sum over dim -1: [6, 15]");
    tr_release(r);
    r = RUN("sum", tensor_arg(x), int_arg(1), bool_arg(true));
    ok(has_shape(r, 2, (int64_t[]){2, 1}) && el(r, 1) == 15, "keepdim keeps [2, 1]");
    tr_release(r);
    r = RUN("sum", tensor_arg(x), DIMS(items, (int64_t[]){-1, 0}, 2));
    ok(r && tr_tensor_ndim(r) == 0 && el(r, 0) == 21, "sum over the dims list [-1, 0]");
    tr_release(r);
    r = RUN("sum", tensor_arg(x), none_arg(), bool_arg(true));
    ok(has_shape(r, 2, (int64_t[]){1, 1}) && el(r, 0) == 21, "None with keepdim gives [1, 1]");
    tr_release(r);
    r = RUN("sum", tensor_arg(x), DIMS(items, NULL, 0));
    ok(has_shape(r, 2, s23) && el(r, 4) == 5, "an empty dims list reduces nothing");
    tr_release(r);

    r = RUN("mean", tensor_arg(x));
    ok(r && el(r, 0) == 3.5, "mean: 3.5");
    tr_release(r);
    r = RUN("mean", tensor_arg(x), int_arg(0));
    ok(r && el(r, 0) == 2.5 && el(r, 2) == 4.5, "mean over dim 0: [2.5, 3.5, 4.5]");
    tr_release(r);
    r = RUN("prod", tensor_arg(x));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_F32 && el(r, 0) == 720, "prod: 720");
    tr_release(r);
    r = RUN("prod", tensor_arg(x), int_arg(1), bool_arg(true));
    ok(has_shape(r, 2, (int64_t[]){2, 1}) && el(r, 0) == 6 && el(r, 1) == 120,
       "prod over dim 1 with keepdim: [[6], [120]]");
    tr_release(r);
    r = RUN("sum", int_arg(3));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_I64 && el(r, 0) == 3, "sum of the number 3 is i64 3");
    tr_release(r);
    r = RUN("sum", tensor_arg(x), int_arg(2));
    ok(!r && tr_last_status() == TR_ERR_INDEX && strncmp(tr_last_error(), "sum:", 4) == 0,
       "dim 2 of a 2-d tensor fails: %s", tr_last_error());
    tr_release(x);
}

static void test_integers(void)
{
    int8_t i8[3] = {100, 100, 100};
    uint8_t u8[3] = {200, 200, 200};
    uint8_t b[4] = {1, 0, 1, 1};
    int32_t i32[4] = {1, 2, 3, 4};
    int16_t i16[3] = {-5, 7, 2};
    int64_t s3 = 3, s4 = 4;
    struct tr_tensor *t8 = tr_from_data(i8, TR_DTYPE_I8, 1, &s3, TR_CPU);
    struct tr_tensor *tu = tr_from_data(u8, TR_DTYPE_U8, 1, &s3, TR_CPU);
    struct tr_tensor *tb = tr_from_data(b, TR_DTYPE_BOOL, 1, &s4, TR_CPU);
    struct tr_tensor *t32 = tr_from_data(i32, TR_DTYPE_I32, 1, &s4, TR_CPU);
    struct tr_tensor *t16 = tr_from_data(i16, TR_DTYPE_I16, 1, &s3, TR_CPU), *r;

    r = RUN("sum", tensor_arg(t8));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_I64 && el(r, 0) == 300, "sum of i8 is i64 300");
    tr_release(r);
    r = RUN("sum", tensor_arg(tu));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_U64 && el(r, 0) == 600, "sum of u8 is u64 600");
    tr_release(r);
    r = RUN("sum", tensor_arg(tb));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_I64 && el(r, 0) == 3, "sum of bool counts: i64 3");
    tr_release(r);
    r = RUN("mean", tensor_arg(t32));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_F32 && el(r, 0) == 2.5, "mean of i32 is f32 2.5");
    tr_release(r);
    r = RUN("prod", tensor_arg(t32));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_I64 && el(r, 0) == 24, "prod of i32 is i64 24");
    tr_release(r);
    r = RUN("max", tensor_arg(t16));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_I16 && el(r, 0) == 7, "max of i16 stays i16: 7");
    tr_release(r);
    r = RUN("min", tensor_arg(tu));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_U8 && el(r, 0) == 200, "min of u8 stays u8");
    tr_release(r);
    r = RUN("argmin", tensor_arg(t16));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_I64 && el(r, 0) == 0, "argmin of i16");
    tr_release(r);
    r = RUN("var", tensor_arg(t32));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_F32 && near(el(r, 0), 5.0 / 3, 1e-6),
       "var of i32 is f32 5/3");
    tr_release(r);
    r = RUN("norm", tensor_arg(t32));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_F32 && near(el(r, 0), sqrt(30), 1e-6),
       "norm of i32 is f32 sqrt(30)");
    tr_release(r);
    r = RUN("logsumexp", tensor_arg(t32));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_F32 &&
           near(el(r, 0), log(exp(1) + exp(2) + exp(3) + exp(4)), 1e-6),
       "logsumexp of i32 is f32");
    tr_release(r);
    r = RUN("max", tensor_arg(tb));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_BOOL && el(r, 0) == 1, "max of bool is bool");
    tr_release(r);
    r = RUN("cumsum", tensor_arg(t8), int_arg(0));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_I64 && el(r, 2) == 300, "cumsum of i8 is i64");
    tr_release(r);
    r = RUN("cumsum", tensor_arg(tb), int_arg(0));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_I64 && el(r, 1) == 1 && el(r, 3) == 3,
       "cumsum of bool counts");
    tr_release(r);
    r = RUN("softmax", tensor_arg(t32));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_F32 &&
           near(el(r, 3), exp(4) / (exp(1) + exp(2) + exp(3) + exp(4)), 1e-6),
       "softmax of i32 is f32");
    tr_release(r);
    tr_release(t8);
    tr_release(tu);
    tr_release(tb);
    tr_release(t32);
    tr_release(t16);
}

static void test_max_min_nan(void)
{
    float v[6] = {1, NAN, 3, 4, 5, 6};
    struct tr_tensor *x = f32(v, 2, s23), *r;

    r = RUN("max", tensor_arg(x));
    ok(r && isnan(el(r, 0)), "max propagates NaN");
    tr_release(r);
    r = RUN("min", tensor_arg(x));
    ok(r && isnan(el(r, 0)), "min propagates NaN");
    tr_release(r);
    r = RUN("max", tensor_arg(x), int_arg(1));
    ok(r && isnan(el(r, 0)) && el(r, 1) == 6, "max over dim 1: [NaN, 6]");
    tr_release(r);
    r = RUN("min", tensor_arg(x), int_arg(0));
    ok(r && el(r, 0) == 1 && isnan(el(r, 1)) && el(r, 2) == 3, "min over dim 0: [1, NaN, 3]");
    tr_release(r);
    r = RUN("sum", tensor_arg(x), int_arg(1));
    ok(r && isnan(el(r, 0)) && el(r, 1) == 15, "sum with NaN is NaN");
    tr_release(r);
    tr_release(x);

    x = f32(m23, 2, s23);
    r = RUN("max", tensor_arg(x), int_arg(0), bool_arg(true));
    ok(has_shape(r, 2, (int64_t[]){1, 3}) && el(r, 0) == 4 && el(r, 2) == 6,
       "max over dim 0 with keepdim");
    tr_release(r);
    r = RUN("min", tensor_arg(x));
    ok(r && el(r, 0) == 1, "min: 1");
    tr_release(r);
    tr_release(x);

    x = tr_zeros(TR_DTYPE_F32, 1, (int64_t[]){0}, TR_CPU);
    r = RUN("max", tensor_arg(x));
    ok(!r && strncmp(tr_last_error(), "max:", 4) == 0, "max of nothing fails: %s",
       tr_last_error());
    tr_release(x);
}

static void test_argmax(void)
{
    float ties[5] = {3, 1, 3, 0, 0};
    float nans[4] = {1, NAN, 5, NAN};
    float m[4] = {1, 9, 9, 0};
    struct tr_tensor *t = vec(ties, 5), *n = vec(nans, 4), *x = f32(m, 2, (int64_t[]){2, 2}), *r;

    r = RUN("argmax", tensor_arg(t));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_I64 && tr_tensor_ndim(r) == 0 && el(r, 0) == 0,
       "argmax of [3, 1, 3, 0, 0]: the first 3, index 0");
    tr_release(r);
    r = RUN("argmin", tensor_arg(t));
    ok(r && el(r, 0) == 3, "argmin: the first 0, index 3");
    tr_release(r);
    r = RUN("argmax", tensor_arg(n));
    ok(r && el(r, 0) == 1, "argmax: the first NaN wins");
    tr_release(r);
    r = RUN("argmin", tensor_arg(n));
    ok(r && el(r, 0) == 1, "argmin: the first NaN wins");
    tr_release(r);
    r = RUN("argmax", tensor_arg(x));
    ok(r && tr_tensor_ndim(r) == 0 && el(r, 0) == 1,
       "argmax over the flattened [[1, 9], [9, 0]]: 1");
    tr_release(r);
    r = RUN("argmax", tensor_arg(x), int_arg(0));
    ok(has_shape(r, 1, (int64_t[]){2}) && el(r, 0) == 1 && el(r, 1) == 0,
       "argmax over dim 0: [1, 0]");
    tr_release(r);
    r = RUN("argmin", tensor_arg(x), int_arg(-1), bool_arg(true));
    ok(has_shape(r, 2, (int64_t[]){2, 1}) && el(r, 0) == 0 && el(r, 1) == 1,
       "argmin over dim -1 with keepdim: [[0], [1]]");
    tr_release(r);
    r = RUN("argmax", tensor_arg(x), none_arg(), bool_arg(true));
    ok(has_shape(r, 2, (int64_t[]){1, 1}) && el(r, 0) == 1, "argmax, None, keepdim: [[1]]");
    tr_release(r);
    tr_release(t);
    tr_release(n);
    tr_release(x);

    /* the first of ties across blocks, and a NaN in a later block */
    {
        int64_t len = 10000;
        float *big = malloc((size_t)len * sizeof *big);
        for (int64_t i = 0; i < len; i++)
            big[i] = (float)(i % 100);
        t = vec(big, len);
        r = RUN("argmax", tensor_arg(t));
        ok(r && el(r, 0) == 99, "argmax of 10000 values: the first 99");
        tr_release(r);
        r = RUN("argmin", tensor_arg(t));
        ok(r && el(r, 0) == 0, "argmin of 10000 values: the first 0");
        tr_release(r);
        tr_release(t);
        big[9000] = NAN;
        big[9500] = NAN;
        t = vec(big, len);
        r = RUN("argmax", tensor_arg(t));
        ok(r && el(r, 0) == 9000, "argmax: the first NaN, in a later block");
        tr_release(r);
        tr_release(t);
        free(big);
    }

    x = tr_zeros(TR_DTYPE_F32, 2, (int64_t[]){0, 3}, TR_CPU);
    r = RUN("argmax", tensor_arg(x));
    ok(!r && strncmp(tr_last_error(), "argmax:", 7) == 0, "argmax of nothing fails: %s",
       tr_last_error());
    tr_release(x);
}

static void test_var_std(void)
{
    float v[4] = {1, 2, 3, 4}, one[1] = {7}, two[2] = {1, 3};
    struct tr_tensor *x = vec(v, 4), *x1 = vec(one, 1), *x2 = vec(two, 2), *r;

    r = RUN("var", tensor_arg(x));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_F32 && near(el(r, 0), 5.0 / 3, 1e-7),
       "var of [1, 2, 3, 4]: 5/3");
    tr_release(r);
    r = RUN("var", tensor_arg(x), none_arg(), int_arg(0));
    ok(r && el(r, 0) == 1.25, "var with correction 0: 1.25");
    tr_release(r);
    r = RUN("std", tensor_arg(x), none_arg(), int_arg(0));
    ok(r && near(el(r, 0), sqrt(1.25), 1e-7), "std with correction 0: sqrt(1.25)");
    tr_release(r);
    r = RUN("std", tensor_arg(x));
    ok(r && near(el(r, 0), sqrt(5.0 / 3), 1e-7), "std: sqrt(5/3)");
    tr_release(r);
    r = RUN("var", tensor_arg(x1));
    ok(r && isnan(el(r, 0)), "var of one value: NaN (0 / 0)");
    tr_release(r);
    r = RUN("var", tensor_arg(x2), none_arg(), int_arg(2));
    ok(r && isinf(el(r, 0)) && el(r, 0) > 0, "var with N - correction = 0: inf");
    tr_release(r);
    r = RUN("var", tensor_arg(x2), none_arg(), int_arg(3));
    ok(r && isinf(el(r, 0)), "var with N - correction < 0: inf");
    tr_release(r);
    r = RUN("var", tensor_arg(x2), none_arg(), int_arg(-1));
    ok(r && near(el(r, 0), 2.0 / 3, 1e-7), "var with correction -1 divides by N + 1");
    tr_release(r);
    tr_release(x);
    tr_release(x1);
    tr_release(x2);

    x = f32(m23, 2, s23);
    r = RUN("var", tensor_arg(x), int_arg(1), int_arg(1), bool_arg(true));
    ok(has_shape(r, 2, (int64_t[]){2, 1}) && el(r, 0) == 1 && el(r, 1) == 1,
       "var over dim 1 with keepdim: [[1], [1]]");
    tr_release(r);
    r = RUN("std", tensor_arg(x), int_arg(0));
    ok(has_shape(r, 1, (int64_t[]){3}) && near(el(r, 0), sqrt(4.5), 1e-7),
       "std over dim 0: sqrt(4.5)");
    tr_release(r);
    tr_release(x);

    /* a large offset: the two-pass variance is not fooled */
    {
        float big[4] = {1e6f + 1, 1e6f + 2, 1e6f + 3, 1e6f + 4};
        x = vec(big, 4);
        r = RUN("var", tensor_arg(x));
        ok(r && near(el(r, 0), 5.0 / 3, 1e-6), "var of 1e6 + [1, 2, 3, 4]: 5/3");
        tr_release(r);
        tr_release(x);
    }
}

static void test_norm(void)
{
    float v[2] = {3, -4}, huge[2] = {1e20f, 1e20f};
    float m[4] = {1, -2, 2, 4};
    struct tr_value items[2];
    struct tr_tensor *x = vec(v, 2), *h = vec(huge, 2), *x2 = f32(m, 2, (int64_t[]){2, 2}), *r;

    r = RUN("norm", tensor_arg(x));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_F32 && el(r, 0) == 5, "norm of [3, -4]: 5");
    tr_release(r);
    r = RUN("norm", tensor_arg(x), int_arg(1));
    ok(r && el(r, 0) == 7, "norm ord 1: 7");
    tr_release(r);
    r = RUN("norm", tensor_arg(x), float_arg(INFINITY));
    ok(r && el(r, 0) == 4, "norm ord inf: 4");
    tr_release(r);
    r = RUN("norm", tensor_arg(x), int_arg(3));
    ok(r && near(el(r, 0), cbrt(91), 1e-6), "norm ord 3: cbrt(91)");
    tr_release(r);
    r = RUN("norm", tensor_arg(x), float_arg(0.5));
    ok(r && near(el(r, 0), pow(sqrt(3) + 2, 2), 1e-6), "norm ord 0.5");
    tr_release(r);
    r = RUN("norm", tensor_arg(x), int_arg(0));
    ok(!r && strncmp(tr_last_error(), "norm:", 5) == 0, "ord 0 is refused: %s", tr_last_error());
    r = RUN("norm", tensor_arg(h));
    ok(r && near(el(r, 0), 1e20 * sqrt(2), 1e-6), "norm of [1e20, 1e20] does not overflow");
    tr_release(r);
    r = RUN("norm", tensor_arg(x2), int_arg(2), DIMS(items, (int64_t[]){0, 1}, 2));
    ok(r && el(r, 0) == 5, "norm over dims [0, 1]: 5");
    tr_release(r);
    r = RUN("norm", tensor_arg(x2), int_arg(2), int_arg(-1), bool_arg(true));
    ok(has_shape(r, 2, (int64_t[]){2, 1}) && near(el(r, 0), sqrt(5), 1e-7) &&
           near(el(r, 1), sqrt(20), 1e-7),
       "norm over dim -1 with keepdim");
    tr_release(r);
    r = RUN("norm", tensor_arg(x2), float_arg(INFINITY), int_arg(0));
    ok(r && el(r, 0) == 2 && el(r, 1) == 4, "norm ord inf over dim 0: [2, 4]");
    tr_release(r);
    tr_release(x);
    tr_release(h);
    tr_release(x2);
}

static void test_all_any(void)
{
    float v[3] = {1, 0, 0.5f}, n[2] = {NAN, 1};
    struct tr_tensor *x = vec(v, 3), *xn = vec(n, 2);
    struct tr_tensor *e = tr_zeros(TR_DTYPE_F32, 1, (int64_t[]){0}, TR_CPU);
    struct tr_tensor *x2 = f32((float[]){1, 0, 1, 1}, 2, (int64_t[]){2, 2}), *r;

    r = RUN("all", tensor_arg(x));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_BOOL && el(r, 0) == 0, "all of [1, 0, 0.5]: false");
    tr_release(r);
    r = RUN("any", tensor_arg(x));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_BOOL && el(r, 0) == 1, "any of [1, 0, 0.5]: true");
    tr_release(r);
    r = RUN("all", tensor_arg(xn));
    ok(r && el(r, 0) == 1, "NaN is true");
    tr_release(r);
    r = RUN("all", tensor_arg(e));
    ok(r && el(r, 0) == 1, "all of nothing: true");
    tr_release(r);
    r = RUN("any", tensor_arg(e));
    ok(r && el(r, 0) == 0, "any of nothing: false");
    tr_release(r);
    r = RUN("all", tensor_arg(x2), int_arg(1));
    ok(r && el(r, 0) == 0 && el(r, 1) == 1, "all over dim 1: [false, true]");
    tr_release(r);
    r = RUN("any", tensor_arg(x2), int_arg(0), bool_arg(true));
    ok(has_shape(r, 2, (int64_t[]){1, 2}) && el(r, 0) == 1 && el(r, 1) == 1,
       "any over dim 0 with keepdim");
    tr_release(r);
    tr_release(x);
    tr_release(xn);
    tr_release(e);
    tr_release(x2);
}

static void test_logsumexp(void)
{
    float v[3] = {1, 2, 3}, big[2] = {1000, 1000}, ninf[2] = {-INFINITY, -INFINITY},
          pinf[2] = {INFINITY, 1};
    struct tr_tensor *x = vec(v, 3), *xb = vec(big, 2), *xn = vec(ninf, 2), *xp = vec(pinf, 2),
                     *r;

    r = RUN("logsumexp", tensor_arg(x));
    ok(r && near(el(r, 0), log(exp(1) + exp(2) + exp(3)), 1e-6), "logsumexp of [1, 2, 3]");
    tr_release(r);
    r = RUN("logsumexp", tensor_arg(xb));
    ok(r && near(el(r, 0), 1000 + log(2), 1e-7), "logsumexp of [1000, 1000]: 1000 + log 2");
    tr_release(r);
    r = RUN("logsumexp", tensor_arg(xn));
    ok(r && isinf(el(r, 0)) && el(r, 0) < 0, "logsumexp of [-inf, -inf]: -inf");
    tr_release(r);
    r = RUN("logsumexp", tensor_arg(xp));
    ok(r && isinf(el(r, 0)) && el(r, 0) > 0, "logsumexp of [inf, 1]: inf");
    tr_release(r);
    tr_release(x);
    tr_release(xb);
    tr_release(xn);
    tr_release(xp);

    x = f32(m23, 2, s23);
    r = RUN("logsumexp", tensor_arg(x), int_arg(1), bool_arg(true));
    ok(has_shape(r, 2, (int64_t[]){2, 1}) &&
           near(el(r, 1), log(exp(4) + exp(5) + exp(6)), 1e-6),
       "logsumexp over dim 1 with keepdim");
    tr_release(r);
    tr_release(x);
    x = tr_zeros(TR_DTYPE_F32, 1, (int64_t[]){0}, TR_CPU);
    r = RUN("logsumexp", tensor_arg(x));
    ok(r && isinf(el(r, 0)) && el(r, 0) < 0, "logsumexp of nothing: -inf");
    tr_release(r);
    r = RUN("sum", tensor_arg(x));
    ok(r && el(r, 0) == 0, "sum of nothing: 0");
    tr_release(r);
    r = RUN("prod", tensor_arg(x));
    ok(r && el(r, 0) == 1, "prod of nothing: 1");
    tr_release(r);
    r = RUN("mean", tensor_arg(x));
    ok(r && isnan(el(r, 0)), "mean of nothing: NaN");
    tr_release(r);
    r = RUN("norm", tensor_arg(x));
    ok(r && el(r, 0) == 0, "norm of nothing: 0");
    tr_release(r);
    tr_release(x);
}

static void test_cumsum(void)
{
    struct tr_tensor *x = f32(m23, 2, s23), *t, *r;
    uint16_t h[4];

    r = RUN("cumsum", tensor_arg(x), int_arg(1));
    ok(has_shape(r, 2, s23) && el(r, 2) == 6 && el(r, 5) == 15 && el(r, 4) == 9,
       "cumsum over dim 1: [[1, 3, 6], [4, 9, 15]]");
    tr_release(r);
    r = RUN("cumsum", tensor_arg(x), int_arg(0));
    ok(r && el(r, 0) == 1 && el(r, 3) == 5 && el(r, 5) == 9, "cumsum over dim 0");
    tr_release(r);
    r = RUN("cumsum", tensor_arg(x), int_arg(-2));
    ok(r && el(r, 4) == 7, "cumsum over dim -2");
    tr_release(r);
    t = tr_transpose(x, 0, 1);
    r = RUN("cumsum", tensor_arg(t), int_arg(1));
    ok(has_shape(r, 2, (int64_t[]){3, 2}) && el(r, 1) == 5 && el(r, 5) == 9,
       "cumsum of a transposed view");
    tr_release(r);
    tr_release(t);
    for (int i = 0; i < 4; i++)
        h[i] = tr_f32_to_f16(0.5f + (float)i);
    t = tr_from_data(h, TR_DTYPE_F16, 1, (int64_t[]){4}, TR_CPU);
    r = RUN("cumsum", tensor_arg(t), int_arg(0));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_F16 && el(r, 3) == 8, "cumsum of f16 stays f16");
    tr_release(r);
    tr_release(t);
    {
        int64_t len = 10000;
        float *ones = malloc((size_t)len * sizeof *ones);
        for (int64_t i = 0; i < len; i++)
            ones[i] = 1;
        t = vec(ones, len);
        r = RUN("cumsum", tensor_arg(t), int_arg(0));
        ok(r && el(r, 4095) == 4096 && el(r, 4096) == 4097 && el(r, 9999) == 10000,
           "cumsum carries across blocks");
        tr_release(r);
        tr_release(t);
        free(ones);
    }
    tr_release(x);
}

static void test_strided(void)
{
    float v[12];
    struct tr_tensor *x, *t, *a, *b, *e, *s;

    for (int i = 0; i < 12; i++)
        v[i] = (float)(i * i) - 3;
    x = f32(v, 2, (int64_t[]){3, 4});
    t = tr_transpose(x, 0, 1);
    a = RUN("sum", tensor_arg(t), int_arg(0));
    b = RUN("sum", tensor_arg(x), int_arg(1));
    ok(same_bits(a, b), "sum over dim 0 of x.T is sum over dim 1 of x");
    tr_release(a);
    tr_release(b);
    a = RUN("argmax", tensor_arg(t), int_arg(1));
    ok(a && el(a, 0) == 2 && el(a, 3) == 2, "argmax of a transposed view");
    tr_release(a);
    a = RUN("var", tensor_arg(t), int_arg(0));
    b = RUN("var", tensor_arg(x), int_arg(1));
    ok(same_bits(a, b), "var of a transposed view");
    tr_release(a);
    tr_release(b);
    /* a broadcast input: stride 0 */
    a = RUN("sum", tensor_arg(x), int_arg(0), bool_arg(true));
    e = tr_expand(a, (int64_t[]){5, 4}, 2);
    tr_release(a);
    a = RUN("sum", tensor_arg(e), int_arg(0));
    ok(a && el(a, 0) == 5 * (-3 + 13 + 61) && el(a, 3) == 5 * (6 + 46 + 118),
       "sum of a broadcast (stride 0) view");
    tr_release(a);
    a = RUN("softmax", tensor_arg(e), int_arg(0));
    ok(a && near(el(a, 7), 0.2, 1e-7), "softmax along a broadcast dimension: 1/5 each");
    tr_release(a);
    tr_release(e);
    /* a reversed slice */
    s = tr_slice(x, 1, TR_SLICE_NONE, TR_SLICE_NONE, -1);
    a = RUN("cumsum", tensor_arg(s), int_arg(1));
    ok(a && el(a, 0) == v[3] && el(a, 3) == v[0] + v[1] + v[2] + v[3],
       "cumsum of a reversed slice");
    tr_release(a);
    a = RUN("argmin", tensor_arg(s), int_arg(1));
    ok(a && el(a, 0) == 3 && el(a, 2) == 3, "argmin of a reversed slice, in the view's order");
    tr_release(a);
    tr_release(s);
    /* every other column of a 3-d tensor, reduced over two dims */
    {
        float w[2 * 3 * 4];
        struct tr_value items[2];
        struct tr_tensor *x3, *c;
        for (int i = 0; i < 24; i++)
            w[i] = (float)i;
        x3 = f32(w, 3, (int64_t[]){2, 3, 4});
        c = tr_slice(x3, 2, 0, TR_SLICE_NONE, 2);
        a = RUN("sum", tensor_arg(c), DIMS(items, (int64_t[]){0, 2}, 2));
        /* row r: columns 0 and 2 of batches 0 and 1 */
        ok(has_shape(a, 1, (int64_t[]){3}) && el(a, 0) == 0 + 2 + 12 + 14 &&
               el(a, 2) == 8 + 10 + 20 + 22,
           "sum over dims [0, 2] of a strided 3-d view");
        tr_release(a);
        a = RUN("mean", tensor_arg(c), DIMS(items, (int64_t[]){0, 2}, 2), bool_arg(true));
        ok(has_shape(a, 3, (int64_t[]){1, 3, 1}) && el(a, 1) == (4 + 6 + 16 + 18) / 4.0,
           "mean over dims [0, 2] with keepdim");
        tr_release(a);
        tr_release(c);
        tr_release(x3);
    }
    tr_release(t);
    tr_release(x);
}

static void test_half(void)
{
    uint16_t h[6];
    struct tr_tensor *x, *t, *r;

    for (int i = 0; i < 6; i++)
        h[i] = tr_f32_to_f16(m23[i] + 0.5f);
    x = tr_from_data(h, TR_DTYPE_F16, 2, s23, TR_CPU);
    r = RUN("sum", tensor_arg(x));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_F16 && el(r, 0) == 24, "sum of f16 is f16: 24");
    tr_release(r);
    r = RUN("mean", tensor_arg(x), int_arg(1));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_F16 && el(r, 0) == 2.5 && el(r, 1) == 5.5,
       "mean of f16 over dim 1");
    tr_release(r);
    t = tr_transpose(x, 0, 1);
    r = RUN("max", tensor_arg(t), int_arg(1));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_F16 && el(r, 0) == 4.5 && el(r, 2) == 6.5,
       "max of transposed f16");
    tr_release(r);
    r = RUN("softmax", tensor_arg(t), int_arg(0));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_F16 &&
           near(el(r, 0) + el(r, 2) + el(r, 4), 1, 2e-3),
       "softmax of f16 is f16, summing to 1");
    tr_release(r);
    r = RUN("norm", tensor_arg(x));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_F16 &&
           near(el(r, 0), sqrt(2.25 + 6.25 + 12.25 + 20.25 + 30.25 + 42.25), 1e-3),
       "norm of f16 is f16");
    tr_release(r);
    r = RUN("layer_norm", tensor_arg(x));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_F16 && near(el(r, 2), sqrt(1.5), 2e-3),
       "layer_norm of f16 is f16");
    tr_release(r);
    tr_release(t);
    tr_release(x);
    /* f16's largest sum: 60000 + 60000 overflows f16 but not the f32 accumulator */
    h[0] = tr_f32_to_f16(60000);
    h[1] = tr_f32_to_f16(60000);
    h[2] = tr_f32_to_f16(-60000);
    x = tr_from_data(h, TR_DTYPE_F16, 1, (int64_t[]){3}, TR_CPU);
    r = RUN("mean", tensor_arg(x));
    ok(r && near(el(r, 0), 20000, 1e-3), "the mean of f16 accumulates in f32");
    tr_release(r);
    tr_release(x);
}

static void test_softmax(void)
{
    float v[3] = {1, 2, 3}, big[3] = {1000, 1000, 1000}, far[2] = {1000, 0};
    double z = exp(1) + exp(2) + exp(3);
    struct tr_tensor *x = vec(v, 3), *xb = vec(big, 3), *xf = vec(far, 2), *r;
    struct tr_tensor *m = f32(m23, 2, s23);

    r = RUN("softmax", tensor_arg(x));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_F32 && near(el(r, 0), exp(1) / z, 1e-6) &&
           near(el(r, 2), exp(3) / z, 1e-6),
       "softmax of [1, 2, 3]");
    ok(r && near(el(r, 0) + el(r, 1) + el(r, 2), 1, 1e-6), "sums to 1");
    tr_release(r);
    r = RUN("softmax", tensor_arg(xb));
    ok(r && near(el(r, 0), 1.0 / 3, 1e-7) && near(el(r, 2), 1.0 / 3, 1e-7),
       "softmax of [1000, 1000, 1000]: 1/3 each, no overflow");
    tr_release(r);
    r = RUN("softmax", tensor_arg(xf));
    ok(r && el(r, 0) == 1 && el(r, 1) == 0, "softmax of [1000, 0]: [1, 0]");
    tr_release(r);
    r = RUN("log_softmax", tensor_arg(xb));
    ok(r && near(el(r, 1), -log(3), 1e-6), "log_softmax of [1000, 1000, 1000]: -log 3");
    tr_release(r);
    r = RUN("log_softmax", tensor_arg(xf));
    ok(r && el(r, 0) == 0 && near(el(r, 1), -1000, 1e-7), "log_softmax of [1000, 0]: [0, -1000]");
    tr_release(r);
    r = RUN("log_softmax", tensor_arg(x));
    ok(r && near(el(r, 1), 2 - log(z), 1e-6), "log_softmax of [1, 2, 3]");
    tr_release(r);
    r = RUN("softmax", tensor_arg(m), int_arg(0));
    ok(has_shape(r, 2, s23) && near(el(r, 0), 1 / (1 + exp(3)), 1e-6) &&
           near(el(r, 0) + el(r, 3), 1, 1e-6) && near(el(r, 2) + el(r, 5), 1, 1e-6),
       "softmax over dim 0: columns sum to 1");
    tr_release(r);
    r = RUN("softmax", tensor_arg(m), int_arg(-1));
    ok(r && near(el(r, 3) + el(r, 4) + el(r, 5), 1, 1e-6) && near(el(r, 5), exp(3) / z, 1e-6),
       "softmax over dim -1");
    tr_release(r);
    r = RUN("softmax", tensor_arg(m), int_arg(2));
    ok(!r && strncmp(tr_last_error(), "softmax:", 8) == 0, "dim 2 fails: %s", tr_last_error());
    tr_release(x);
    tr_release(xb);
    tr_release(xf);
    tr_release(m);

    /* rows longer than a block, and longer than a thread's line buffer */
    {
        const int64_t lens[2] = {10000, 70000};
        for (int k = 0; k < 2; k++) {
            int64_t len = lens[k];
            float *row = malloc((size_t)len * sizeof *row);
            long double total = 0;
            double worst = 0;
            for (int64_t i = 0; i < len; i++)
                row[i] = (float)(uniform() * 50);
            x = vec(row, len);
            r = RUN("softmax", tensor_arg(x));
            for (int64_t i = 0; r && i < len; i++)
                total += el(r, i);
            ok(r && fabsl(total - 1) < 1e-5, "a softmax row of %lld sums to 1 (%.9Lg)",
               (long long)len, total);
            tr_release(r);
            r = RUN("log_softmax", tensor_arg(x));
            for (int64_t i = 0; r && i < 100; i++)
                worst = fmax(worst, fabs(el(r, i) - el(r, 0) - (row[i] - row[0])));
            ok(r && worst < 1e-4, "log_softmax of %lld: differences kept", (long long)len);
            tr_release(r);
            tr_release(x);
            free(row);
        }
    }
}

static void test_norms(void)
{
    float v[4] = {1, 2, 3, 4}, w[4] = {1, 2, 1, 2}, b[4] = {0, 0, 1, 1};
    struct tr_tensor *x = vec(v, 4), *tw = vec(w, 4), *tb = vec(b, 4), *r;
    double rstd = 1 / sqrt(1.25 + 1e-5), rms = 1 / sqrt(7.5 + 1e-6);

    r = RUN("layer_norm", tensor_arg(x));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_F32 && near(el(r, 0), -1.5 * rstd, 1e-6) &&
           near(el(r, 3), 1.5 * rstd, 1e-6),
       "layer_norm of [1, 2, 3, 4]");
    tr_release(r);
    r = RUN("layer_norm", tensor_arg(x), tensor_arg(tw), tensor_arg(tb));
    ok(r && near(el(r, 1), -0.5 * rstd * 2, 1e-6) && near(el(r, 2), 0.5 * rstd + 1, 1e-6) &&
           near(el(r, 3), 1.5 * rstd * 2 + 1, 1e-6),
       "layer_norm with weight and bias");
    tr_release(r);
    r = RUN("layer_norm", tensor_arg(x), none_arg(), none_arg(), float_arg(1));
    ok(r && near(el(r, 0), -1.5 / sqrt(2.25), 1e-6), "layer_norm with eps 1");
    tr_release(r);
    r = RUN("rms_norm", tensor_arg(x));
    ok(r && near(el(r, 0), rms, 1e-6) && near(el(r, 3), 4 * rms, 1e-6), "rms_norm of [1, 2, 3, 4]");
    tr_release(r);
    r = RUN("rms_norm", tensor_arg(x), tensor_arg(tw));
    ok(r && near(el(r, 1), 2 * rms * 2, 1e-6) && near(el(r, 2), 3 * rms, 1e-6),
       "rms_norm with weight");
    tr_release(r);
    r = RUN("layer_norm", tensor_arg(x), tensor_arg(tb), none_arg(), float_arg(1e-5));
    ok(r && el(r, 0) == 0 && near(el(r, 3), 1.5 * rstd, 1e-6), "a weight of zeros zeroes");
    tr_release(r);
    {
        /* rows of a [2, 3] matrix, and of its transpose (strided rows) */
        struct tr_tensor *m = f32(m23, 2, s23), *t = tr_transpose(m, 0, 1);
        r = RUN("layer_norm", tensor_arg(m));
        ok(has_shape(r, 2, s23) && near(el(r, 3), -sqrt(1.5) * (1 / sqrt(1 + 1.5e-5)), 1e-5) &&
               near(el(r, 5), sqrt(1.5) / sqrt(1 + 1.5e-5), 1e-5),
           "layer_norm of each row");
        tr_release(r);
        r = RUN("rms_norm", tensor_arg(t));
        ok(has_shape(r, 2, (int64_t[]){3, 2}) && near(el(r, 0), 1 / sqrt(8.5 + 1e-6), 1e-6) &&
               near(el(r, 5), 6 / sqrt(22.5 + 1e-6), 1e-6),
           "rms_norm of a transposed view's rows");
        tr_release(r);
        tr_release(t);
        tr_release(m);
    }
    {
        struct tr_tensor *short_bias = vec(v, 3);
        r = RUN("layer_norm", tensor_arg(x), tensor_arg(tb), tensor_arg(short_bias));
        ok(!r && strncmp(tr_last_error(), "layer_norm:", 11) == 0,
           "a bias of the wrong size fails: %s", tr_last_error());
        tr_release(short_bias);
    }
    tr_release(x);
    tr_release(tw);
    tr_release(tb);

    /* l2_normalize */
    {
        float p[2] = {3, 4}, zero[3] = {0, 0, 0};
        struct tr_tensor *xp = vec(p, 2), *xz = vec(zero, 3), *m = f32(m23, 2, s23);
        r = RUN("l2_normalize", tensor_arg(xp));
        ok(r && near(el(r, 0), 0.6, 1e-7) && near(el(r, 1), 0.8, 1e-7), "l2_normalize of [3, 4]");
        tr_release(r);
        r = RUN("l2_normalize", tensor_arg(xz));
        ok(r && el(r, 0) == 0 && el(r, 2) == 0, "l2_normalize of zeros: zeros (eps)");
        tr_release(r);
        r = RUN("l2_normalize", tensor_arg(m), int_arg(0));
        ok(r && near(el(r, 0), 1 / sqrt(17), 1e-6) && near(el(r, 5), 6 / sqrt(45), 1e-6),
           "l2_normalize over dim 0");
        tr_release(r);
        r = RUN("l2_normalize", tensor_arg(xp), int_arg(-1), float_arg(10));
        ok(r && near(el(r, 0), 0.3, 1e-7), "l2_normalize with eps 10 divides by 10");
        tr_release(r);
        tr_release(xp);
        tr_release(xz);
        tr_release(m);
    }
}

/* l2_normalize is x / max(norm(x), eps) to the bit, and layer_norm's mean
 * is mean(x, -1): the same summation tree. */
static void test_same_tree(void)
{
    int64_t shape[2] = {7, 9000}, n = shape[0] * shape[1];
    float *v = malloc((size_t)n * sizeof *v);
    struct tr_tensor *x, *nrm, *den, *q, *ref;

    for (int64_t i = 0; i < n; i++)
        v[i] = (float)uniform();
    x = f32(v, 2, shape);
    nrm = RUN("norm", tensor_arg(x), int_arg(2), int_arg(-1), bool_arg(true));
    den = RUN("maximum", tensor_arg(nrm), float_arg(1e-12));
    ref = RUN("div", tensor_arg(x), tensor_arg(den));
    q = RUN("l2_normalize", tensor_arg(x));
    ok(same_bits(q, ref),
       "l2_normalize(x) is x / maximum(norm(x, 2, -1, keepdim), 1e-12), bit for bit");
    tr_release(q);
    tr_release(ref);
    tr_release(den);
    tr_release(nrm);
    {
        /* rows of 5000 (two blocks): layer_norm against its definition */
        static float c[3 * 5000];
        struct tr_tensor *xc, *ln;
        double worst = 0;
        for (int i = 0; i < 3 * 5000; i++)
            c[i] = (float)(i % 5000) * 0.001f + (float)(i / 5000);
        xc = f32(c, 2, (int64_t[]){3, 5000});
        ln = RUN("layer_norm", tensor_arg(xc));
        for (int row = 0; ln && row < 3; row++) {
            long double mu = 0, var = 0;
            for (int k = 0; k < 5000; k++)
                mu += c[row * 5000 + k];
            mu /= 5000;
            for (int k = 0; k < 5000; k++)
                var += (c[row * 5000 + k] - mu) * (c[row * 5000 + k] - mu);
            var /= 5000;
            for (int k = 0; k < 5000; k += 7)
                worst = fmax(worst, fabs(el(ln, row * 5000 + k) -
                                         (double)((c[row * 5000 + k] - mu) / sqrtl(var + 1e-5L))));
        }
        ok(ln && worst < 1e-5, "layer_norm of rows of 5000 against long double (worst %.3g)",
           worst);
        tr_release(ln);
        tr_release(xc);
    }
    tr_release(x);
    free(v);
}

/* The documented tree, written plainly: the reference for the sum's bits
 * (the kernel's own loops are vectorised and interleave runs). */
static float tree_sum(const float *a, int64_t n)
{
    float r[8], s;
    int64_t i, h;

    if (n < 8) {
        s = 0;
        for (i = 0; i < n; i++)
            s = i == 0 ? a[0] : s + a[i];
        return s;
    }
    if (n <= 128) {
        for (int k = 0; k < 8; k++)
            r[k] = a[k];
        for (i = 8; i + 8 <= n; i += 8)
            for (int k = 0; k < 8; k++)
                r[k] += a[i + k];
        s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++)
            s += a[i];
        return s;
    }
    h = n / 2;
    h -= h % 8;
    return tree_sum(a, h) + tree_sum(a + h, n - h);
}

/* sum over blocks of TR__REDUCE_BLOCK, then over the blocks' sums */
static float blocked_tree_sum(const float *a, int64_t n)
{
    int64_t nb = (n + TR__REDUCE_BLOCK - 1) / TR__REDUCE_BLOCK;
    float *parts = malloc((size_t)nb * sizeof *parts), s;

    for (int64_t b = 0; b < nb; b++) {
        int64_t first = b * TR__REDUCE_BLOCK;
        parts[b] = tree_sum(a + first, n - first < TR__REDUCE_BLOCK ? n - first : TR__REDUCE_BLOCK);
    }
    s = tree_sum(parts, nb);
    free(parts);
    return s;
}

/* sum's f32 bits are those of the tree, for lengths whose halving reaches
 * runs of 512 (whole blocks) and lengths whose does not, on values of
 * every magnitude (so that any other order of additions shows), alone and
 * fused after a step */
static void test_tree_bits(void)
{
    static const int64_t lengths[] = {512, 4096, 4096 * 5, 4096 * 3 + 700, 1000, 129, 4096 * 64 + 8};
    int64_t most = 4096 * 64 + 8;
    float *v = malloc((size_t)most * sizeof *v), *w = malloc((size_t)most * sizeof *w);

    for (int64_t i = 0; i < most; i++) {
        v[i] = (float)(uniform() * pow(2.0, (double)(i % 37) - 18));
        w[i] = v[i] * 3.0f;
    }
    for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
        int64_t n = lengths[l];
        float want = blocked_tree_sum(v, n), want3 = blocked_tree_sum(w, n), got, got3;
        struct tr_tensor *x = vec(v, n), *s, *x3, *s3;
        s = RUN("sum", tensor_arg(x));
        x3 = RUN("mul", tensor_arg(x), float_arg(3.0));
        s3 = RUN("sum", tensor_arg(x3));
        got = s ? (float)el(s, 0) : NAN;
        got3 = s3 ? (float)el(s3, 0) : NAN;
        ok(memcmp(&got, &want, sizeof got) == 0 && memcmp(&got3, &want3, sizeof got) == 0,
           "sum of %lld f32 values has the bits of the pairwise tree (%.9g, %.9g; %.9g, %.9g)",
           (long long)n, got, want, got3, want3);
        tr_release(s3);
        tr_release(x3);
        tr_release(s);
        tr_release(x);
    }
    free(w);
    free(v);
}

/* Sums against long double, and the same bits with 1 and 4 threads. */
static void test_accuracy_and_threads(void)
{
    int64_t n = 3000000, shape2[2] = {1000, 3000};
    float *v = malloc((size_t)n * sizeof *v);
    long double exact = 0, absum = 0;
    struct tr_tensor *x, *x2, *xt, *r1, *r4;
    double err, bound;

    if (!v) {
        ok(0, "memory for the test");
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        v[i] = (float)(uniform() * 100 + 1);
        exact += v[i];
        absum += fabsf(v[i]);
    }
    x = vec(v, n);
    x2 = f32(v, 2, shape2);

    tr_set_num_threads(1);
    r1 = RUN("sum", tensor_arg(x));
    tr_set_num_threads(4);
    r4 = RUN("sum", tensor_arg(x));
    ok(same_bits(r1, r4), "sum of 3e6 f32: the same bits with 1 and 4 threads");
    {
        /* and with 2 and 16, more threads than this machine may have */
        struct tr_tensor *r2, *r16;
        tr_set_num_threads(2);
        r2 = RUN("sum", tensor_arg(x));
        tr_set_num_threads(16);
        r16 = RUN("sum", tensor_arg(x));
        ok(same_bits(r1, r2) && same_bits(r1, r16), "... and with 2 and 16 threads");
        tr_release(r2);
        tr_release(r16);
    }
    err = fabs(el(r1, 0) - (double)exact);
    bound = log2((double)n) * 0x1p-24 * (double)absum;
    ok(err <= bound, "pairwise: error %.3g within log2(n) eps sum|x| = %.3g", err, bound);
    /* float's own rounding of the exact sum is the floor of what can be had */
    ok(err <= 64 * fabs((double)exact) * 0x1p-24,
       "and within 64 ulp of the long double sum (%.9g vs %.9Lg)", el(r1, 0), exact);
    diag("error of the sum of 3e6: %.3g eps sum|x|", err / ((double)absum * 0x1p-24));
    tr_release(r1);
    tr_release(r4);

    tr_set_num_threads(1);
    r1 = RUN("mean", tensor_arg(x));
    tr_set_num_threads(4);
    r4 = RUN("mean", tensor_arg(x));
    ok(same_bits(r1, r4), "mean of 3e6 f32: the same bits with 1 and 4 threads");
    ok(r1 && near(el(r1, 0), (double)(exact / n), 1e-6), "mean against long double");
    tr_release(r1);
    tr_release(r4);

    for (int dim = 0; dim < 2; dim++) {
        tr_set_num_threads(1);
        r1 = RUN("sum", tensor_arg(x2), int_arg(dim));
        tr_set_num_threads(4);
        r4 = RUN("sum", tensor_arg(x2), int_arg(dim));
        ok(same_bits(r1, r4), "sum of [1000, 3000] over dim %d: the same bits with 1 and 4 threads",
           dim);
        if (dim == 1) {
            /* the error of each row's sum, in units of eps * sum|x|: pairwise
             * summation promises about log2(3000) < 12 of them */
            double worst = 0;
            for (int64_t row = 0; r1 && row < 1000; row++) {
                long double s = 0, a = 0;
                for (int64_t k = 0; k < 3000; k++) {
                    s += v[row * 3000 + k];
                    a += fabsf(v[row * 3000 + k]);
                }
                worst = fmax(worst, fabs(el(r1, row) - (double)s) / ((double)a * 0x1p-24));
            }
            ok(r1 && worst < 12, "each row's sum against long double: worst %.3g eps sum|x|",
               worst);
        }
        tr_release(r1);
        tr_release(r4);
    }

    /* several blocks per output: the transpose of a [375000, 8] tensor
     * reduced over dim 1 (strided values, read a block at a time) against
     * a compact copy of it (read in place), with 1 and 4 threads */
    {
        struct tr_tensor *w = f32(v, 2, (int64_t[]){375000, 8}), *wt = tr_transpose(w, 0, 1);
        struct tr_tensor *wc = tr_contiguous(wt);
        const char *ops[6] = {"sum", "mean", "var", "logsumexp", "argmax", "prod"};
        for (int k = 0; k < 6; k++) {
            struct tr_tensor *a, *b, *c;
            tr_set_num_threads(1);
            a = RUN(ops[k], tensor_arg(wt), int_arg(1));
            tr_set_num_threads(4);
            b = RUN(ops[k], tensor_arg(wt), int_arg(1));
            c = RUN(ops[k], tensor_arg(wc), int_arg(1));
            ok(a && same_bits(a, b) && same_bits(a, c),
               "%s of a strided [8, 375000] over dim 1: 1 thread, 4 threads and a compact copy "
               "agree", ops[k]);
            tr_release(a);
            tr_release(b);
            tr_release(c);
        }
        tr_release(wc);
        tr_release(wt);
        tr_release(w);
    }

    xt = tr_transpose(x2, 0, 1);
    /* lines along an outer dimension (read TILE lines at a time) against
     * the same lines made compact: softmax(x, 0) is softmax(x.T, 1).T */
    {
        const char *ops[3] = {"softmax", "log_softmax", "l2_normalize"};
        struct tr_tensor *c = tr_contiguous(xt), *w, *b, *a, *d, *dt;
        float *wv = malloc(1000 * sizeof *wv);
        for (int k = 0; k < 3; k++) {
            tr_set_num_threads(1);
            a = RUN(ops[k], tensor_arg(x2), int_arg(0));
            tr_set_num_threads(4);
            r4 = RUN(ops[k], tensor_arg(x2), int_arg(0));
            d = RUN(ops[k], tensor_arg(c), int_arg(1));
            dt = d ? tr_transpose(d, 0, 1) : NULL;
            ok(a && same_bits(a, r4) && same_bits(a, dt),
               "%s of [1000, 3000] over dim 0: 1 thread, 4 threads and the compact transpose agree",
               ops[k]);
            tr_release(a);
            tr_release(r4);
            tr_release(d);
            tr_release(dt);
        }
        for (int i = 0; wv && i < 1000; i++)
            wv[i] = (float)uniform();
        w = vec(wv, 1000);
        b = RUN("mul", tensor_arg(w), float_arg(0.5));
        a = RUN("layer_norm", tensor_arg(xt), tensor_arg(w), tensor_arg(b));
        d = RUN("layer_norm", tensor_arg(c), tensor_arg(w), tensor_arg(b));
        ok(a && same_bits(a, d),
           "layer_norm of strided rows (a tile at a time) and of compact rows agree");
        tr_release(a);
        tr_release(d);
        a = RUN("rms_norm", tensor_arg(xt), tensor_arg(w));
        d = RUN("rms_norm", tensor_arg(c), tensor_arg(w));
        ok(a && same_bits(a, d), "rms_norm of strided rows and of compact rows agree");
        tr_release(a);
        tr_release(d);
        tr_release(w);
        tr_release(b);
        tr_release(c);
        free(wv);
    }
    tr_set_num_threads(1);
    r1 = RUN("softmax", tensor_arg(xt), int_arg(0));
    tr_set_num_threads(4);
    r4 = RUN("softmax", tensor_arg(xt), int_arg(0));
    ok(same_bits(r1, r4), "softmax of a strided [3000, 1000] over dim 0: the same bits");
    tr_release(r1);
    tr_release(r4);
    tr_set_num_threads(1);
    r1 = RUN("norm", tensor_arg(xt), int_arg(3), int_arg(1));
    tr_set_num_threads(4);
    r4 = RUN("norm", tensor_arg(xt), int_arg(3), int_arg(1));
    ok(same_bits(r1, r4), "norm ord 3 of a strided [3000, 1000] over dim 1: the same bits");
    tr_release(r1);
    tr_release(r4);
    tr_set_num_threads(1);
    r1 = RUN("cumsum", tensor_arg(x2), int_arg(0));
    tr_set_num_threads(4);
    r4 = RUN("cumsum", tensor_arg(x2), int_arg(0));
    ok(same_bits(r1, r4), "cumsum of [1000, 3000] over dim 0: the same bits");
    tr_release(r1);
    tr_release(r4);
    tr_release(xt);
    tr_set_num_threads(0);

    tr_release(x2);
    tr_release(x);
    free(v);

    /* 0.1 a million times: a running f32 sum is off by about 1% */
    {
        int64_t m = 1000000;
        float *t = malloc((size_t)m * sizeof *t);
        for (int64_t i = 0; i < m; i++)
            t[i] = 0.1f;
        x = vec(t, m);
        r1 = RUN("sum", tensor_arg(x));
        ok(r1 && fabs(el(r1, 0) - 100000.0) < 0.5, "0.1f summed 1e6 times: %.9g", el(r1, 0));
        tr_release(r1);
        tr_release(x);
        free(t);
    }
}

/* The exponential of softmax and logsumexp: within 2 ulp of e^x, and the
 * row form (SSE2 or AVX2) the same bits as the scalar form. */
static void test_expf(void)
{
    enum { N = 1 << 16 };
    static float x[N], y[N];
    double worst = 0;
    float worst_x = 0;
    int64_t differ = 0, n = 0;

    for (float v = -104.5f; v < 89.0f && n < N;) {
        x[n++] = v;
        v += fabsf(v) > 1 ? 0.00025f * fabsf(v) : 0.0001f;
    }
    tr__expf_sub_row(y, x, n, 0);
    for (int64_t i = 0; i < n; i++) {
        double ref = exp((double)x[i]);
        double ulp = ref < 0x1p-126 ? 0x1p-149 : ldexp(1.0, ilogb(ref) - 23);
        float s = tr__expf(x[i]);
        differ += memcmp(&s, &y[i], sizeof s) != 0;
        if (ref > 0x1.fffffep127)
            continue;
        if (fabs(y[i] - ref) / ulp > worst) {
            worst = fabs(y[i] - ref) / ulp;
            worst_x = x[i];
        }
    }
    ok(worst <= 2, "exp within 2 ulp from -104.5 to 89 (%lld values; worst %.3f ulp at %a)",
       (long long)n, worst, worst_x);
    ok(differ == 0, "the row form gives the scalar form's bits (%lld differ)", (long long)differ);
    {
        float sp[9] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 88.8f, -104.0f, -87.5f, 1.0f};
        float out[9];
        tr__expf_sub_row(out, sp, 9, 0);
        ok(isnan(out[0]) && isinf(out[1]) && out[2] == 0 && out[3] == 1 && out[4] == 1 &&
               isinf(out[5]) && out[6] == 0 && out[7] > 0 && out[7] < 0x1p-126 &&
               out[8] == expf(1.0f),
           "exp of NaN, inf, -inf, 0, -0, overflow, underflow, a subnormal result, 1");
        tr__expf_sub_row(out, sp + 8, 1, 1.0f);
        ok(out[0] == 1, "exp of 1 - 1 is 1");
    }
}

static void test_f64(void)
{
    int64_t n = 100000;
    double *v = malloc((size_t)n * sizeof *v);
    long double exact = 0;
    struct tr_tensor *x, *r;

    for (int64_t i = 0; i < n; i++) {
        v[i] = uniform();
        exact += v[i];
    }
    x = tr_from_data(v, TR_DTYPE_F64, 1, &n, TR_CPU);
    r = RUN("sum", tensor_arg(x));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_F64 && fabs(el(r, 0) - (double)exact) < 1e-11,
       "sum of 1e5 f64 against long double");
    tr_release(r);
    r = RUN("softmax", tensor_arg(x));
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_F64, "softmax of f64 is f64");
    tr_release(r);
    tr_release(x);
    free(v);
}

int main(void)
{
    test_sum_mean_prod();
    test_integers();
    test_max_min_nan();
    test_argmax();
    test_var_std();
    test_norm();
    test_all_any();
    test_logsumexp();
    test_cumsum();
    test_strided();
    test_half();
    test_softmax();
    test_norms();
    test_same_tree();
    test_tree_bits();
    test_accuracy_and_threads();
    test_expf();
    test_f64();
    return done_testing();
}
