/*
 * test_kernels.c - running ops through tr_op_run: elementwise kernels with
 * broadcasting, weak scalars, strided operands, f16 computed in f32, NaN
 * rules, truth values of floats, integers promoted to f16, results made
 * in their destination's memory or streamed to its sink, and every op of
 * the table with a kernel.
 */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include <omp.h>

#include "tensorrun_ops.h"
#include "op_test.h"
#include "tap.h"

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
    r = run("mul", (struct tr_arg[]){tensor_arg(ta), float_arg(2.5)}, 2);
    ok(r && at(r, 1, 1) == 12.5, "a weak scalar multiplies");
    tr_release(r);
    r = run("lt", (struct tr_arg[]){tensor_arg(ta), int_arg(3)}, 2);
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_BOOL && at(r, 0, 1) == 1 && at(r, 0, 2) == 0,
       "comparison gives bool");
    tr_release(r);
    r = run("div", (struct tr_arg[]){int_arg(7), tensor_arg(tb)}, 2);
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
    r = run("div", (struct tr_arg[]){tensor_arg(t), int_arg(2)}, 2);
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_F32 && at(r, 0, 2) == 3.5, "i8 / 2 is f32");
    tr_release(r);
    r = run("pow", (struct tr_arg[]){tensor_arg(t), int_arg(2)}, 2);
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
    r = run("mul", (struct tr_arg[]){tensor_arg(tt), int_arg(2)}, 2);
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
    r = run("maximum", (struct tr_arg[]){tensor_arg(t), int_arg(0)}, 2);
    ok(r && isnan(at(r, 0, 0)) && at(r, 0, 1) == 5 && at(r, 0, 2) == 0, "maximum: NaN wins");
    tr_release(r);
    r = run("clamp", (struct tr_arg[]){tensor_arg(t), int_arg(-1), int_arg(1)},
            3);
    ok(r && isnan(at(r, 0, 0)) && at(r, 0, 1) == 1 && at(r, 0, 2) == -1,
       "clamp to [-1, 1]; NaN stays NaN");
    tr_release(r);
    r = run("clamp", (struct tr_arg[]){tensor_arg(t), none, int_arg(0)}, 3);
    ok(r && at(r, 0, 1) == 0 && at(r, 0, 2) == -5, "clamp with only a max");
    tr_release(r);
    r = run("isnan", (struct tr_arg[]){tensor_arg(t)}, 1);
    ok(r && at(r, 0, 0) == 1 && at(r, 0, 1) == 0, "isnan");
    tr_release(r);
    r = run("where", (struct tr_arg[]){float_arg(0.5), tensor_arg(t), int_arg(9)},
            3);
    ok(r && at(r, 0, 1) == 5, "where: 0.5 is a true condition");
    tr_release(r);
    tr_release(t);
}

/* Truth values of floats are not integers: 0.5 and NaN are true. */
static void test_logical_floats(void)
{
    float a[4] = {0.5f, NAN, 0, -0.0f}, b[4] = {-INFINITY, 0.25f, 1, 2};
    int64_t s[1] = {4};
    struct tr_tensor *ta = tr_from_data(a, TR_DTYPE_F32, 1, s, TR_CPU);
    struct tr_tensor *tb = tr_from_data(b, TR_DTYPE_F32, 1, s, TR_CPU), *r;

    r = run("logical_and", (struct tr_arg[]){tensor_arg(ta), tensor_arg(tb)}, 2);
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_BOOL && at(r, 0, 0) == 1 && at(r, 0, 1) == 1 &&
           at(r, 0, 2) == 0 && at(r, 0, 3) == 0,
       "logical_and of floats: 0.5 and NaN are true, -0.0 false");
    tr_release(r);
    r = run("logical_or", (struct tr_arg[]){tensor_arg(ta), int_arg(0)}, 2);
    ok(r && at(r, 0, 0) == 1 && at(r, 0, 1) == 1 && at(r, 0, 2) == 0,
       "logical_or with a number");
    tr_release(r);
    tr_release(tb);
    tr_release(ta);
}

/* An integer tensor promoted to f16 is rounded to f16 first: 70000 is
 * inf, and inf * 0 NaN, though 70000 * 0 in f32 is 0. */
static void test_integer_to_half(void)
{
    int32_t a[2] = {70000, 3};
    uint16_t zero_one[2] = {0x0000, 0x3c00}; /* f16 0 and 1 */
    int64_t s[1] = {2};
    struct tr_tensor *ta = tr_from_data(a, TR_DTYPE_I32, 1, s, TR_CPU);
    struct tr_tensor *th = tr_from_data(zero_one, TR_DTYPE_F16, 1, s, TR_CPU), *r;

    r = run("mul", (struct tr_arg[]){tensor_arg(ta), tensor_arg(th)}, 2);
    ok(r && tr_tensor_dtype(r) == TR_DTYPE_F16 && isnan(at(r, 0, 0)) && at(r, 0, 1) == 3,
       "i32 * f16: 70000 becomes inf as f16 first");
    tr_release(r);
    tr_release(th);
    tr_release(ta);
}

/* softmax over dim 0 of i8 [16, 5]: lines across rows, computed in tiles,
 * where each f32 result is four times as wide as its i8 input. */
static void test_softmax_narrow_tiled(void)
{
    int8_t v[80];
    int64_t s[2] = {16, 5};
    struct tr_tensor *t, *r;
    bool good = true;

    for (int i = 0; i < 80; i++)
        v[i] = (int8_t)(i % 7 - 3);
    t = tr_from_data(v, TR_DTYPE_I8, 2, s, TR_CPU);
    r = run("softmax", (struct tr_arg[]){tensor_arg(t), int_arg(0)}, 2);
    for (int j = 0; r && j < 5; j++) {
        double sum = 0, want;
        for (int i = 0; i < 16; i++)
            sum += exp(v[i * 5 + j]);
        for (int i = 0; i < 16; i++) {
            want = exp(v[i * 5 + j]) / sum;
            good = good && fabs(at(r, i, j) - want) <= 1e-6 * want;
        }
    }
    ok(r && good, "softmax(i8, dim=0) agrees with exp / sum in every column");
    tr_release(r);
    tr_release(t);
}

/* A result given a destination is made there, and only when dtype and
 * shape match. */
static void test_result_into(void)
{
    float a[4] = {1, 2, 3, 4}, dest[4] = {0}, small[2] = {0};
    int64_t s[1] = {4}, two[1] = {2};
    struct tr_blob blob = {.data = dest, .nbytes = sizeof dest};
    struct tr_blob blob2 = {.data = small, .nbytes = sizeof small};
    struct tr_tensor *t = tr_from_data(a, TR_DTYPE_F32, 1, s, TR_CPU);
    struct tr_tensor *d = tr_from_blob(&blob, TR_DTYPE_F32, 1, s, NULL, TR_CPU);
    struct tr_tensor *d2 = tr_from_blob(&blob2, TR_DTYPE_F32, 1, two, NULL, TR_CPU);
    struct tr_tensor *r, *r2;
    struct tr_dest into = {.tensor = d}, into2 = {.tensor = d2};

    r = run_into("mul", (struct tr_arg[]){tensor_arg(t), int_arg(3)}, 2, &into);
    r2 = run("add", (struct tr_arg[]){tensor_arg(t), int_arg(1)}, 2);
    ok(r && tr_tensor_shares_storage(r, d) && dest[3] == 12, "the result is made in the destination");
    ok(r2 && !tr_tensor_shares_storage(r2, d) && dest[3] == 12 && at(r2, 0, 3) == 5,
       "and a run without one leaves it alone");
    tr_release(r);
    tr_release(r2);
    r = run_into("exp", (struct tr_arg[]){tensor_arg(t)}, 1, &into2);
    ok(r && !tr_tensor_shares_storage(r, d2) && small[0] == 0, "not by a result of another shape");
    tr_release(r);
    r = run_into("softmax", (struct tr_arg[]){tensor_arg(t)}, 1, &into);
    r2 = run("matmul", (struct tr_arg[]){tensor_arg(t), tensor_arg(t)}, 2);
    ok(r && tr_tensor_shares_storage(r, d) && fabs(dest[0] + dest[1] + dest[2] + dest[3] - 1) < 1e-6,
       "softmax computes into it too");
    tr_release(r2);
    tr_release(r);
    tr_release(d2);
    tr_release(d);
    tr_release(t);
}

/* A destination filled by calls, into got: what the calls
 * stored, how many there were, and how often memory was reserved. */
struct fake_file {
    char *got;
    size_t size;
    atomic_int stores, reserves;
    int fail; /* an errno every call returns, or 0 */
};

static int fake_reserve(void *ctx)
{
    struct fake_file *f = ctx;

    atomic_fetch_add(&f->reserves, 1);
    return f->fail;
}

static int fake_store(void *ctx, uint64_t offset, const void *src, size_t n)
{
    struct fake_file *f = ctx;

    atomic_fetch_add(&f->stores, 1);
    if (f->fail)
        return f->fail;
    if (offset > f->size || n > f->size - offset)
        return EINVAL;
    memcpy(f->got + offset, src, n);
    return 0;
}

/* Op name on args given a destination filled by calls: true when the
 * result is the destination's, every byte came by calls (equal to the
 * result made without one), none went into its memory, and memory was
 * never reserved. */
static bool streams(const char *name, const struct tr_arg *args, int nargs, int *stores)
{
    struct tr_tensor *plain = run(name, args, nargs), *r, *d;
    size_t size = plain ? (size_t)tr_tensor_nbytes(plain) : 1;
    char *memory = malloc(size), *got = calloc(1, size);
    struct tr_blob blob = {.data = memory, .nbytes = size};
    struct fake_file f = {.got = got, .size = size};
    struct tr_sink sink = {.reserve = fake_reserve, .store = fake_store, .ctx = &f};
    struct tr_dest into = {.sink = &sink};
    bool good;

    memset(memory, 0x5a, size);
    d = plain ? tr_from_blob(&blob, tr_tensor_dtype(plain), tr_tensor_ndim(plain),
                             tr_tensor_shape(plain), NULL, TR_CPU)
              : NULL;
    into.tensor = d;
    r = d ? run_into(name, args, nargs, &into) : NULL;
    good = plain && r && tr_tensor_shares_storage(r, d) && f.reserves == 0 &&
           memcmp(got, tr_tensor_data(plain), size) == 0;
    for (size_t i = 0; good && i < size; i++)
        good = memory[i] == 0x5a;
    *stores = f.stores;
    tr_release(r);
    tr_release(plain);
    tr_release(d);
    free(got);
    free(memory);
    return good;
}

/* streams() for softmax of x as dtype along dim. */
static bool streams_softmax(const struct tr_tensor *x, int dim, enum tr_dtype dtype,
                            int *stores)
{
    struct tr_tensor *xs = tr_cast(x, dtype);
    bool good = streams("softmax", (struct tr_arg[]){tensor_arg(xs), int_arg(dim)}, 2,
                        stores);

    tr_release(xs);
    return good;
}

/* A softmax along rows given a file filled by calls streams its rows
 * there, a stage of lines per call, in f32 and f16 and from a transposed
 * view, and so do the elementwise ops; softmax along columns reserves
 * memory instead; a file that cannot reserve gets nothing, and one whose
 * store fails fails the op. */
static void test_result_streamed(void)
{
    int64_t shape[2] = {40, 3000}, tshape[2] = {3000, 40};
    float *v = malloc(40 * 3000 * sizeof *v);
    struct tr_tensor *x, *xt_base, *xt, *r, *d;
    int stores = 0, threads = tr_num_threads();

    /* two threads: each hands its half over in one or two stages */
    tr_set_num_threads(2);

    for (int i = 0; i < 40 * 3000; i++)
        v[i] = (float)((i * 7919) % 1000) / 100.0f - 5.0f;
    x = tr_from_data(v, TR_DTYPE_F32, 2, shape, TR_CPU);
    xt_base = tr_from_data(v, TR_DTYPE_F32, 2, tshape, TR_CPU);
    xt = tr_transpose(xt_base, 0, 1);
    bool streamed = streams_softmax(x, -1, TR_DTYPE_F32, &stores);
    ok(streamed && stores > 1 && stores < 40,
       "f32 rows are streamed, several lines a call (%d calls)", stores);
    ok(streams_softmax(x, 1, TR_DTYPE_F16, &stores) && stores > 1,
       "f16 rows are streamed as f16");
    ok(streams_softmax(xt, -1, TR_DTYPE_F32, &stores) && stores > 1,
       "the rows of a transposed view too (read a tile at a time)");
    ok(streams_softmax(x, -1, TR_DTYPE_F64, &stores) && stores > 1, "f64 rows too");

    /* elementwise: blocks gathered a stage at a time, in every form */
    struct tr_tensor *h = tr_cast(x, TR_DTYPE_F16), *row = tr_select(x, 0, 3);
    streamed = streams("mul", (struct tr_arg[]){tensor_arg(x), float_arg(2)}, 2, &stores);
    ok(streamed && stores > 1 && stores < 40, "mul streams (%d calls)", stores);
    ok(streams("add", (struct tr_arg[]){tensor_arg(h), tensor_arg(row)}, 2, &stores),
       "add of f16 and a broadcast f32 row streams");
    ok(streams("mul", (struct tr_arg[]){tensor_arg(h), float_arg(3)}, 2, &stores),
       "an f16 result streams as f16");
    ok(streams("gt", (struct tr_arg[]){tensor_arg(xt), float_arg(0)}, 2, &stores),
       "a comparison of a transposed view streams bools");
    ok(streams("exp", (struct tr_arg[]){tensor_arg(xt)}, 1, &stores), "a unary op streams");
    ok(streams("where", (struct tr_arg[]){tensor_arg(x), tensor_arg(row), float_arg(0)},
               3, &stores),
       "where streams");
    ok(streams("clamp", (struct tr_arg[]){tensor_arg(x), float_arg(-1),
                                          float_arg(1)},
               3, &stores),
       "clamp streams");
    tr_release(row);
    tr_release(h);

    float *memory = calloc(40 * 3000, sizeof *memory);
    struct tr_blob blob = {.data = memory, .nbytes = 40 * 3000 * sizeof *memory};
    struct fake_file f = {0};
    struct tr_sink sink = {.reserve = fake_reserve, .store = fake_store, .ctx = &f};
    struct tr_dest into = {.sink = &sink};
    struct tr_arg args[2] = {tensor_arg(x), int_arg(0)};

    d = tr_from_blob(&blob, TR_DTYPE_F32, 2, shape, NULL, TR_CPU);
    into.tensor = d;
    r = run_into("softmax", args, 2, &into);
    double column = 0;
    for (int i = 0; r && i < 40; i++)
        column += memory[i * 3000 + 5];
    ok(r && tr_tensor_shares_storage(r, d) && f.reserves == 1 && f.stores == 0 &&
           fabs(column - 1) < 1e-5,
       "along columns: memory reserved once and computed into");
    tr_release(r);

    f.fail = ENOSPC;
    f.reserves = 0;
    memset(memory, 0, 40 * 3000 * sizeof *memory);
    r = run_into("softmax", args, 2, &into);
    column = 0;
    for (int i = 0; r && i < 40; i++)
        column += at(r, i, 5);
    ok(r && !tr_tensor_shares_storage(r, d) && f.reserves == 1 && memory[5] == 0 &&
           fabs(column - 1) < 1e-5,
       "a file that cannot reserve: the result is made in the pool");
    tr_release(r);

    args[1] = int_arg(-1);
    f.stores = 0;
    r = run_into("softmax", args, 2, &into);
    ok(!r && tr_last_status() == TR_ERR_IO && strstr(tr_last_error(), "No space left") &&
           f.stores >= 1,
       "a failed store fails the op: %s", tr_last_error());
    f.stores = 0;
    r = run_into("add", (struct tr_arg[]){tensor_arg(x), float_arg(1)}, 2, &into);
    ok(!r && tr_last_status() == TR_ERR_IO && strstr(tr_last_error(), "add: cannot write") &&
           f.stores >= 1,
       "and so does an elementwise op's: %s", tr_last_error());
    tr_release(d);
    free(memory);
    tr_release(xt);
    tr_release(xt_base);
    tr_release(x);
    free(v);
    tr_set_num_threads(threads);
}

/* Every op of the table has its CPU kernel: `tensorrun ops` lists nothing
 * that cannot run (an op without one fails by name, "cannot run yet"). */
static void test_every_op_has_a_kernel(void)
{
    const char *missing = NULL;
    size_t n = 0;

    for (size_t i = 0; i < tr_op_count(); i++) {
        const struct tr_op_info *o = tr_op_at(i);
        /* split and chunk run as narrow views, one for each piece */
        if (!o->has_kernel && o->nresults != 0) {
            missing = missing ? missing : o->name;
            n++;
        }
    }
    ok(n == 0, "every one of the %zu ops has a kernel%s%s", tr_op_count(),
       missing ? "; missing: " : "", missing ? missing : "");
    {
        struct tr_tensor *x = tr_zeros(TR_DTYPE_F32, 1, (int64_t[]){4}, TR_CPU), *r[3] = {NULL};
        struct tr_arg args[3] = {
            {.value = tr_value_of(x), .tensor = x},
            {.value = {.kind = TR_VALUE_INT, .known = true, .integer = 2}},
            {.value = {.kind = TR_VALUE_INT, .known = true, .integer = 0}},
        };
        ok(tr_op_run(tr_op_find("split"), args, NULL, r) == TR_ERR_INVALID &&
               strstr(tr_last_error(), "tr_op_pieces"),
           "split is not run as one op: %s", tr_last_error());
        tr_release(x);
    }
}

int main(void)
{
    test_binary();
    test_integers();
    test_strided_and_half();
    test_nan_rules();
    test_every_op_has_a_kernel();
    test_logical_floats();
    test_integer_to_half();
    test_softmax_narrow_tiled();
    test_result_into();
    test_result_streamed();
    return done_testing();
}
