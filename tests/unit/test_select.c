/*
 * test_select.c - through tr_op_run: the view ops (sharing their input's
 * storage, with the right values), the copy ops, topk/sort/argsort
 * (stability, NaN placement, every path), gather and index_select (with
 * out-of-range indices), concat and stack (with dtype promotion),
 * quantize/dequantize (round trip, per slice, scale 0), and pad, roll,
 * repeat, repeat_interleave, take_along_dim and one_hot against naive
 * loops.
 */
#include <math.h>
#include <string.h>

#include "tensorrun_ops.h"
#include "op_test.h"
#include "tap.h"

/* 0, 1, 2, ... as f32 in shape. */
static struct tr_tensor *iota(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    float *v;
    struct tr_tensor *t;

    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)i;
    t = tr_from_data(v, TR_DTYPE_F32, ndim, shape, TR_CPU);
    free(v);
    return t;
}

/* ---------------------------------------------------------------- views */

static void test_views(void)
{
    struct tr_tensor *x = iota(3, (int64_t[]){2, 3, 4}), *v, *t;
    struct tr_arg dims[3] = {int_arg(6), int_arg(-1), int_arg(0)};

    v = run("reshape", (struct tr_arg[]){tensor_arg(x), list_arg(dims, 2)}, 2);
    ok(is(v, TR_DTYPE_F32, 2, (int64_t[]){6, 4}) && tr_tensor_shares_storage(v, x) &&
           flat(v, 13) == 13,
       "reshape [2,3,4] to [6,-1]: a view");
    tr_release(v);
    t = tr_transpose(x, 0, 2); /* [4,3,2] */
    v = run("reshape", (struct tr_arg[]){tensor_arg(t), list_arg(dims + 1, 1)}, 2);
    ok(is(v, TR_DTYPE_F32, 1, (int64_t[]){24}) && !tr_tensor_shares_storage(v, x) &&
           flat(v, 1) == 12 && flat(v, 2) == 4 && flat(v, 23) == 23,
       "reshape of a transposed view to [-1]: a copy, in the view's order");
    tr_release(v);
    v = run("flatten", (struct tr_arg[]){tensor_arg(t)}, 1);
    ok(is(v, TR_DTYPE_F32, 1, (int64_t[]){24}) && flat(v, 1) == 12, "flatten of it likewise");
    tr_release(v);
    v = run("flatten", (struct tr_arg[]){tensor_arg(x), int_arg(1)}, 2);
    ok(is(v, TR_DTYPE_F32, 2, (int64_t[]){2, 12}) && tr_tensor_shares_storage(v, x) &&
           flat(v, 15) == 15,
       "flatten(x, 1): a view");
    tr_release(v);
    v = run("transpose", (struct tr_arg[]){tensor_arg(x), int_arg(0), int_arg(-1)}, 3);
    ok(is(v, TR_DTYPE_F32, 3, (int64_t[]){4, 3, 2}) && tr_tensor_shares_storage(v, x) &&
           flat(v, 1) == 12 && flat(v, 2) == 4,
       "transpose(x, 0, -1)");
    tr_release(v);
    {
        struct tr_arg order[3] = {int_arg(1), int_arg(2), int_arg(0)};
        v = run("permute", (struct tr_arg[]){tensor_arg(x), list_arg(order, 3)}, 2);
        ok(is(v, TR_DTYPE_F32, 3, (int64_t[]){3, 4, 2}) && tr_tensor_shares_storage(v, x) &&
               flat(v, 1) == 12 && flat(v, 2) == 1,
           "permute(x, [1,2,0])");
        tr_release(v);
    }
    tr_release(t);
    {
        struct tr_tensor *y = iota(4, (int64_t[]){1, 3, 1, 2});
        struct tr_arg two[2] = {int_arg(0), int_arg(-2)};
        v = run("squeeze", (struct tr_arg[]){tensor_arg(y)}, 1);
        ok(is(v, TR_DTYPE_F32, 2, (int64_t[]){3, 2}) && tr_tensor_shares_storage(v, y) &&
               flat(v, 5) == 5,
           "squeeze: every size-1 dimension");
        tr_release(v);
        v = run("squeeze", (struct tr_arg[]){tensor_arg(y), int_arg(2)}, 2);
        ok(is(v, TR_DTYPE_F32, 3, (int64_t[]){1, 3, 2}), "squeeze(x, 2)");
        tr_release(v);
        v = run("squeeze", (struct tr_arg[]){tensor_arg(y), int_arg(1)}, 2);
        ok(is(v, TR_DTYPE_F32, 4, (int64_t[]){1, 3, 1, 2}), "squeeze of a size-3 dim: no change");
        tr_release(v);
        v = run("squeeze", (struct tr_arg[]){tensor_arg(y), list_arg(two, 2)}, 2);
        ok(is(v, TR_DTYPE_F32, 2, (int64_t[]){3, 2}) && tr_tensor_shares_storage(v, y),
           "squeeze(x, [0, -2])");
        tr_release(v);
        tr_release(y);
    }
    v = run("unsqueeze", (struct tr_arg[]){tensor_arg(x), int_arg(1)}, 2);
    ok(is(v, TR_DTYPE_F32, 4, (int64_t[]){2, 1, 3, 4}) && tr_tensor_shares_storage(v, x) &&
           tr_tensor_is_contiguous(v) && flat(v, 17) == 17,
       "unsqueeze(x, 1)");
    tr_release(v);
    v = run("unsqueeze", (struct tr_arg[]){tensor_arg(x), int_arg(-1)}, 2);
    ok(is(v, TR_DTYPE_F32, 4, (int64_t[]){2, 3, 4, 1}) && flat(v, 7) == 7, "unsqueeze(x, -1)");
    tr_release(v);
    {
        struct tr_tensor *col = iota(2, (int64_t[]){3, 1});
        struct tr_arg to[3] = {int_arg(2), int_arg(-1), int_arg(4)};
        v = run("expand", (struct tr_arg[]){tensor_arg(col), list_arg(to, 3)}, 2);
        ok(is(v, TR_DTYPE_F32, 3, (int64_t[]){2, 3, 4}) && tr_tensor_shares_storage(v, col) &&
               flat(v, 5) == 1 && flat(v, 23) == 2 && tr_tensor_strides(v)[2] == 0,
           "expand([3,1] to [2,-1,4]): stride 0");
        tr_release(v);
        to[1] = int_arg(3);
        v = run("broadcast_to", (struct tr_arg[]){tensor_arg(col), list_arg(to, 3)}, 2);
        ok(is(v, TR_DTYPE_F32, 3, (int64_t[]){2, 3, 4}) && tr_tensor_shares_storage(v, col),
           "broadcast_to");
        tr_release(v);
        to[1] = int_arg(5);
        v = run("expand", (struct tr_arg[]){tensor_arg(col), list_arg(to, 3)}, 2);
        ok(!v && tr_last_status() == TR_ERR_SHAPE && strncmp(tr_last_error(), "expand:", 7) == 0,
           "expand of a size-3 dimension to 5: %s", tr_last_error());
        tr_release(col);
    }
    {
        struct tr_tensor *m = iota(2, (int64_t[]){3, 4});
        v = run("diagonal", (struct tr_arg[]){tensor_arg(m)}, 1);
        ok(is(v, TR_DTYPE_F32, 1, (int64_t[]){3}) && tr_tensor_shares_storage(v, m) &&
               values(v, (double[]){0, 5, 10}, 3),
           "diagonal of [3,4]");
        tr_release(v);
        v = run("diagonal", (struct tr_arg[]){tensor_arg(m), int_arg(1)}, 2);
        ok(values(v, (double[]){1, 6, 11}, 3), "diagonal offset 1");
        tr_release(v);
        v = run("diagonal", (struct tr_arg[]){tensor_arg(m), int_arg(-1)}, 2);
        ok(values(v, (double[]){4, 9}, 2), "diagonal offset -1");
        tr_release(v);
        v = run("diagonal", (struct tr_arg[]){tensor_arg(m), int_arg(7)}, 2);
        ok(is(v, TR_DTYPE_F32, 1, (int64_t[]){0}), "diagonal beyond the matrix is empty");
        tr_release(v);
        tr_release(m);
        v = run("diagonal", (struct tr_arg[]){tensor_arg(x), int_arg(0), int_arg(1), int_arg(2)}, 4);
        ok(is(v, TR_DTYPE_F32, 2, (int64_t[]){2, 3}) && tr_tensor_shares_storage(v, x) &&
               values(v, (double[]){0, 5, 10, 12, 17, 22}, 6),
           "diagonal of dims 1 and 2 of [2,3,4]: [2,3]");
        tr_release(v);
    }
    tr_release(x);
}

static void test_copies(void)
{
    struct tr_tensor *x = iota(2, (int64_t[]){2, 3}), *t = tr_transpose(x, 0, 1), *v;

    v = run("contiguous", (struct tr_arg[]){tensor_arg(x)}, 1);
    ok(v && tr_tensor_shares_storage(v, x), "contiguous of a compact tensor is itself");
    tr_release(v);
    v = run("contiguous", (struct tr_arg[]){tensor_arg(t)}, 1);
    ok(is(v, TR_DTYPE_F32, 2, (int64_t[]){3, 2}) && !tr_tensor_shares_storage(v, x) &&
           tr_tensor_is_contiguous(v) && values(v, (double[]){0, 3, 1, 4, 2, 5}, 6),
       "contiguous of a transposed view: a compact copy");
    tr_release(v);
    v = run("clone", (struct tr_arg[]){tensor_arg(x)}, 1);
    ok(v && !tr_tensor_shares_storage(v, x) && values(v, (double[]){0, 1, 2, 3, 4, 5}, 6),
       "clone always copies");
    tr_release(v);
    {
        float f[3] = {-2.7f, 2.7f, NAN};
        struct tr_tensor *ft = tr_from_data(f, TR_DTYPE_F32, 1, (int64_t[]){3}, TR_CPU);
        v = run("cast", (struct tr_arg[]){tensor_arg(ft), dtype_arg(TR_DTYPE_I32)}, 2);
        ok(is(v, TR_DTYPE_I32, 1, (int64_t[]){3}) && values(v, (double[]){-2, 2, 0}, 3),
           "cast to i32 truncates, NaN gives 0");
        tr_release(v);
        v = run("cast", (struct tr_arg[]){tensor_arg(ft), dtype_arg(TR_DTYPE_F32)}, 2);
        ok(v && tr_tensor_shares_storage(v, ft), "cast to its own dtype: itself");
        tr_release(v);
        tr_release(ft);
    }
    v = run("cast", (struct tr_arg[]){tensor_arg(t), dtype_arg(TR_DTYPE_F16)}, 2);
    ok(is(v, TR_DTYPE_F16, 2, (int64_t[]){3, 2}) && values(v, (double[]){0, 3, 1, 4, 2, 5}, 6),
       "cast of a transposed view to f16");
    tr_release(v);
    v = run("to", (struct tr_arg[]){tensor_arg(t), string_arg("cpu")}, 2);
    ok(v && tr_tensor_shares_storage(v, x) && tr_tensor_device(v).kind == TR_DEV_CPU,
       "to(x, \"cpu\") on the CPU: the same tensor");
    tr_release(v);
    tr_release(t);
    tr_release(x);
}

/* ----------------------------------------------------------------- sort */

static void test_sort(void)
{
    double nan = NAN;
    float x[8] = {3, NAN, 1, 3, -0.0f, 0.0f, 1, -5};
    struct tr_tensor *t = tr_from_data(x, TR_DTYPE_F32, 1, (int64_t[]){8}, TR_CPU);
    struct tr_tensor *r[2] = {NULL, NULL};

    run2("sort", (struct tr_arg[]){tensor_arg(t)}, 1, r);
    ok(is(r[0], TR_DTYPE_F32, 1, (int64_t[]){8}) && is(r[1], TR_DTYPE_I64, 1, (int64_t[]){8}) &&
           values(r[0], (double[]){-5, -0.0, 0, 1, 1, 3, 3, nan}, 8) &&
           values(r[1], (double[]){7, 4, 5, 2, 6, 0, 3, 1}, 8) && signbit(flat(r[0], 1)),
       "sort ascending: stable (-0 and 0 equal, in index order), NaN last");
    tr_release(r[0]);
    tr_release(r[1]);
    run2("sort", (struct tr_arg[]){tensor_arg(t), int_arg(0), bool_arg(true)}, 3, r);
    ok(values(r[0], (double[]){nan, 3, 3, 1, 1, -0.0, 0, -5}, 8) &&
           values(r[1], (double[]){1, 0, 3, 2, 6, 4, 5, 7}, 8),
       "sort descending: stable, NaN first");
    tr_release(r[0]);
    tr_release(r[1]);
    r[0] = run("argsort", (struct tr_arg[]){tensor_arg(t), int_arg(-1), bool_arg(true)}, 3);
    ok(is(r[0], TR_DTYPE_I64, 1, (int64_t[]){8}) &&
           values(r[0], (double[]){1, 0, 3, 2, 6, 4, 5, 7}, 8),
       "argsort descending");
    tr_release(r[0]);
    run2("topk", (struct tr_arg[]){tensor_arg(t), int_arg(3)}, 2, r);
    ok(is(r[0], TR_DTYPE_F32, 1, (int64_t[]){3}) && values(r[0], (double[]){nan, 3, 3}, 3) &&
           values(r[1], (double[]){1, 0, 3}, 3),
       "topk 3 largest: NaN first, then the equal 3s in index order");
    tr_release(r[0]);
    tr_release(r[1]);
    run2("topk", (struct tr_arg[]){tensor_arg(t), int_arg(4), int_arg(0), bool_arg(false)}, 4, r);
    ok(values(r[0], (double[]){-5, -0.0, 0, 1}, 4) && values(r[1], (double[]){7, 4, 5, 2}, 4),
       "topk 4 smallest");
    tr_release(r[0]);
    tr_release(r[1]);
    run2("topk", (struct tr_arg[]){tensor_arg(t), int_arg(8), int_arg(0), bool_arg(false)}, 4, r);
    ok(values(r[1], (double[]){7, 4, 5, 2, 6, 0, 3, 1}, 8), "topk of all, smallest: NaN last");
    tr_release(r[0]);
    tr_release(r[1]);
    run2("topk", (struct tr_arg[]){tensor_arg(t), int_arg(0)}, 2, r);
    ok(is(r[0], TR_DTYPE_F32, 1, (int64_t[]){0}) && is(r[1], TR_DTYPE_I64, 1, (int64_t[]){0}),
       "topk 0: empty");
    tr_release(r[0]);
    tr_release(r[1]);
    r[0] = run("topk", (struct tr_arg[]){tensor_arg(t), int_arg(9)}, 2);
    ok(!r[0] && tr_last_status() == TR_ERR_INDEX && strncmp(tr_last_error(), "topk:", 5) == 0,
       "topk 9 of 8: %s", tr_last_error());
    tr_release(t);
}

static void test_sort_2d(void)
{
    int32_t m[12] = {5, -1, 5, 2, 7, 7, -1, 0, 2, 2, 9, -3};
    uint8_t u[5] = {200, 3, 200, 0, 255};
    struct tr_tensor *t = tr_from_data(m, TR_DTYPE_I32, 2, (int64_t[]){3, 4}, TR_CPU);
    struct tr_tensor *tt = tr_transpose(t, 0, 1); /* [4,3], strided */
    struct tr_tensor *tu = tr_from_data(u, TR_DTYPE_U8, 1, (int64_t[]){5}, TR_CPU);
    struct tr_tensor *r[2] = {NULL, NULL};

    run2("sort", (struct tr_arg[]){tensor_arg(t), int_arg(0)}, 2, r);
    ok(is(r[0], TR_DTYPE_I32, 2, (int64_t[]){3, 4}) &&
           values(r[0], (double[]){2, -1, -1, -3, 5, 2, 5, 0, 7, 7, 9, 2}, 12) &&
           values(r[1], (double[]){2, 0, 1, 2, 0, 2, 0, 1, 1, 1, 2, 0}, 12),
       "sort i32 along dim 0, column by column");
    tr_release(r[0]);
    tr_release(r[1]);
    run2("topk", (struct tr_arg[]){tensor_arg(tt), int_arg(2), int_arg(0)}, 3, r);
    ok(is(r[0], TR_DTYPE_I32, 2, (int64_t[]){2, 3}) &&
           values(r[0], (double[]){5, 7, 9, 5, 7, 2}, 6) &&
           values(r[1], (double[]){0, 0, 2, 2, 1, 0}, 6),
       "topk 2 along dim 0 of a transposed view");
    tr_release(r[0]);
    tr_release(r[1]);
    run2("sort", (struct tr_arg[]){tensor_arg(tu), int_arg(0), bool_arg(true)}, 3, r);
    ok(is(r[0], TR_DTYPE_U8, 1, (int64_t[]){5}) &&
           values(r[0], (double[]){255, 200, 200, 3, 0}, 5) &&
           values(r[1], (double[]){4, 0, 2, 1, 3}, 5),
       "sort u8 descending");
    tr_release(r[0]);
    tr_release(r[1]);
    tr_release(tu);
    tr_release(tt);
    tr_release(t);
}

/* topk's two ways (a kept best-k array for small k, a whole sort for
 * large k) agree with sort on data full of ties. */
static void test_topk_paths(void)
{
    const int64_t rows = 3, n = 5000;
    uint16_t *h = malloc((size_t)(rows * n) * sizeof *h);
    struct tr_tensor *t, *s[2] = {NULL, NULL}, *a[2] = {NULL, NULL}, *b[2] = {NULL, NULL};
    uint64_t seed = 12345;
    bool same;

    for (int64_t i = 0; i < rows * n; i++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        /* 97 distinct values (many ties), and a NaN now and then */
        h[i] = seed >> 60 == 0 ? 0x7e00 : tr_f32_to_f16((float)((seed >> 33) % 97) - 48);
    }
    t = tr_from_data(h, TR_DTYPE_F16, 2, (int64_t[]){rows, n}, TR_CPU);
    free(h);
    for (int largest = 0; largest < 2; largest++) {
        run2("sort", (struct tr_arg[]){tensor_arg(t), int_arg(-1), bool_arg(largest)}, 3, s);
        run2("topk", (struct tr_arg[]){tensor_arg(t), int_arg(7), int_arg(1), bool_arg(largest)}, 4,
             a);
        run2("topk", (struct tr_arg[]){tensor_arg(t), int_arg(1500), int_arg(1), bool_arg(largest)},
             4, b);
        same = s[1] && a[1] && b[1];
        for (int64_t r = 0; same && r < rows; r++) {
            for (int64_t j = 0; same && j < 1500; j++) {
                double si = flat(s[1], r * n + j), sv = flat(s[0], r * n + j);
                same = flat(b[1], r * 1500 + j) == si &&
                       (flat(b[0], r * 1500 + j) == sv || isnan(sv));
                if (j < 7)
                    same = same && flat(a[1], r * 7 + j) == si;
            }
        }
        ok(same, "topk 7 and topk 1500 (%s) agree with a stable sort on ties and NaN",
           largest ? "largest" : "smallest");
        /* along dim 0 of the transpose, the same lines go by row */
        {
            struct tr_tensor *tt = tr_transpose(t, 0, 1), *c[2] = {NULL, NULL};
            run2("topk", (struct tr_arg[]){tensor_arg(tt), int_arg(7), int_arg(0),
                                           bool_arg(largest)},
                 4, c);
            same = c[1] && is(c[1], TR_DTYPE_I64, 2, (int64_t[]){7, rows});
            for (int64_t r = 0; same && r < rows; r++) {
                for (int64_t j = 0; same && j < 7; j++) {
                    double av = flat(a[0], r * 7 + j), cv = flat(c[0], j * rows + r);
                    same = flat(c[1], j * rows + r) == flat(a[1], r * 7 + j) &&
                           (cv == av || (isnan(cv) && isnan(av)));
                }
            }
            ok(same, "topk 7 (%s) along dim 0 of the transpose, row by row, picks the same",
               largest ? "largest" : "smallest");
            tr_release(c[0]);
            tr_release(c[1]);
            tr_release(tt);
        }
        for (int i = 0; i < 2; i++) {
            tr_release(s[i]);
            tr_release(a[i]);
            tr_release(b[i]);
        }
    }
    tr_release(t);
}

/* ---------------------------------------------------------------- index */

static void test_gather(void)
{
    int64_t idx[4] = {2, 0, 1, 2};
    int32_t small[2] = {1, 0};
    struct tr_tensor *x = iota(2, (int64_t[]){3, 4});
    struct tr_tensor *i22 = tr_from_data(idx, TR_DTYPE_I64, 2, (int64_t[]){2, 2}, TR_CPU);
    struct tr_tensor *i1 = tr_from_data(idx, TR_DTYPE_I64, 1, (int64_t[]){4}, TR_CPU);
    struct tr_tensor *i32 = tr_from_data(small, TR_DTYPE_I32, 2, (int64_t[]){1, 2}, TR_CPU);
    struct tr_tensor *v;

    v = run("gather", (struct tr_arg[]){tensor_arg(x), int_arg(0), tensor_arg(i22)}, 3);
    ok(is(v, TR_DTYPE_F32, 2, (int64_t[]){2, 2}) && values(v, (double[]){8, 1, 4, 9}, 4),
       "gather along dim 0: x[index[i][j]][j]");
    tr_release(v);
    v = run("gather", (struct tr_arg[]){tensor_arg(x), int_arg(1), tensor_arg(i22)}, 3);
    ok(values(v, (double[]){2, 0, 5, 6}, 4), "gather along dim 1: x[i][index[i][j]]");
    tr_release(v);
    {
        struct tr_tensor *xt = tr_transpose(x, 0, 1); /* [4,3] */
        v = run("gather", (struct tr_arg[]){tensor_arg(xt), int_arg(1), tensor_arg(i32)}, 3);
        ok(is(v, TR_DTYPE_F32, 2, (int64_t[]){1, 2}) && values(v, (double[]){4, 0}, 2),
           "gather from a transposed view with an i32 index");
        tr_release(v);
        tr_release(xt);
    }
    v = run("gather", (struct tr_arg[]){tensor_arg(x), int_arg(1), tensor_arg(i1)}, 3);
    ok(!v && tr_last_status() == TR_ERR_SHAPE, "gather wants an index of x's rank");
    {
        int64_t bad[2] = {1, 3};
        struct tr_tensor *ib = tr_from_data(bad, TR_DTYPE_I64, 2, (int64_t[]){2, 1}, TR_CPU);
        v = run("gather", (struct tr_arg[]){tensor_arg(x), int_arg(0), tensor_arg(ib)}, 3);
        ok(!v && tr_last_status() == TR_ERR_INDEX &&
               strcmp(tr_last_error(),
                      "gather: index 3 is out of range for dimension 0 of size 3") == 0,
           "an index out of range: %s", tr_last_error());
        tr_release(ib);
        bad[1] = -1;
        ib = tr_from_data(bad, TR_DTYPE_I64, 2, (int64_t[]){2, 1}, TR_CPU);
        v = run("gather", (struct tr_arg[]){tensor_arg(x), int_arg(0), tensor_arg(ib)}, 3);
        ok(!v && tr_last_status() == TR_ERR_INDEX && strstr(tr_last_error(), "index -1"),
           "a negative index: %s", tr_last_error());
        tr_release(ib);
    }

    v = run("index_select", (struct tr_arg[]){tensor_arg(x), int_arg(0), tensor_arg(i1)}, 3);
    ok(is(v, TR_DTYPE_F32, 2, (int64_t[]){4, 4}) &&
           values(v, (double[]){8, 9, 10, 11, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 16),
       "index_select rows 2, 0, 1, 2");
    tr_release(v);
    v = run("index_select", (struct tr_arg[]){tensor_arg(x), int_arg(-1), tensor_arg(i1)}, 3);
    ok(is(v, TR_DTYPE_F32, 2, (int64_t[]){3, 4}) &&
           values(v, (double[]){2, 0, 1, 2, 6, 4, 5, 6, 10, 8, 9, 10}, 12),
       "index_select columns");
    tr_release(v);
    {
        int8_t bad[2] = {0, 5};
        struct tr_tensor *ib = tr_from_data(bad, TR_DTYPE_I8, 1, (int64_t[]){2}, TR_CPU);
        v = run("index_select", (struct tr_arg[]){tensor_arg(x), int_arg(0), tensor_arg(ib)}, 3);
        ok(!v && tr_last_status() == TR_ERR_INDEX && strstr(tr_last_error(), "index_select:") &&
               strstr(tr_last_error(), "index 5") && strstr(tr_last_error(), "size 3"),
           "index_select out of range: %s", tr_last_error());
        tr_release(ib);
    }
    {
        /* a negative index counts from the end, as NumPy's take and x[idx] */
        int8_t from_end[2] = {-1, 0}, past[1] = {-4};
        struct tr_tensor *ie = tr_from_data(from_end, TR_DTYPE_I8, 1, (int64_t[]){2}, TR_CPU);
        struct tr_tensor *ip = tr_from_data(past, TR_DTYPE_I8, 1, (int64_t[]){1}, TR_CPU);
        v = run("index_select", (struct tr_arg[]){tensor_arg(x), int_arg(0), tensor_arg(ie)}, 3);
        ok(is(v, TR_DTYPE_F32, 2, (int64_t[]){2, 4}) &&
               values(v, (double[]){8, 9, 10, 11, 0, 1, 2, 3}, 8),
           "index_select rows -1, 0");
        tr_release(v);
        v = run("index_select", (struct tr_arg[]){tensor_arg(x), int_arg(0), tensor_arg(ip)}, 3);
        ok(!v && tr_last_status() == TR_ERR_INDEX && strstr(tr_last_error(), "index -4"),
           "index_select -4 of 3 is out of range: %s", tr_last_error());
        tr_release(ie);
        tr_release(ip);
    }
    {
        /* many rows: spread over the threads */
        struct tr_tensor *big = iota(2, (int64_t[]){20000, 3}), *rev;
        int64_t *r = malloc(20000 * sizeof *r);
        for (int64_t i = 0; i < 20000; i++)
            r[i] = 19999 - i;
        rev = tr_from_data(r, TR_DTYPE_I64, 1, (int64_t[]){20000}, TR_CPU);
        free(r);
        v = run("index_select", (struct tr_arg[]){tensor_arg(big), int_arg(0), tensor_arg(rev)},
                3);
        ok(v && flat(v, 0) == 59997 && flat(v, 3 * 19999 + 2) == 2 && flat(v, 3 * 777 + 1) == 3 * 19222 + 1,
           "index_select of 20000 rows, reversed");
        tr_release(v);
        tr_release(rev);
        tr_release(big);
    }
    tr_release(i32);
    tr_release(i1);
    tr_release(i22);
    tr_release(x);
}

static void test_join(void)
{
    float a[4] = {1, 2, 3, 4};
    int32_t b[2] = {5, 6};
    int8_t c[2] = {-1, -2};
    int16_t d[2] = {300, 400};
    struct tr_tensor *ta = tr_from_data(a, TR_DTYPE_F32, 2, (int64_t[]){2, 2}, TR_CPU);
    struct tr_tensor *tb = tr_from_data(b, TR_DTYPE_I32, 2, (int64_t[]){2, 1}, TR_CPU);
    struct tr_tensor *tc = tr_from_data(c, TR_DTYPE_I8, 1, (int64_t[]){2}, TR_CPU);
    struct tr_tensor *td = tr_from_data(d, TR_DTYPE_I16, 1, (int64_t[]){2}, TR_CPU);
    struct tr_tensor *v;

    {
        struct tr_arg items[2] = {tensor_arg(ta), tensor_arg(tb)};
        v = run("concat", (struct tr_arg[]){list_arg(items, 2), int_arg(1)}, 2);
        ok(is(v, TR_DTYPE_F32, 2, (int64_t[]){2, 3}) && values(v, (double[]){1, 2, 5, 3, 4, 6}, 6),
           "concat f32 [2,2] and i32 [2,1] along dim 1: f32 [2,3]");
        tr_release(v);
        v = run("concat", (struct tr_arg[]){list_arg(items, 2), int_arg(0)}, 2);
        ok(!v && tr_last_status() == TR_ERR_SHAPE && strncmp(tr_last_error(), "concat:", 7) == 0,
           "concat along dim 0 of [2,2] and [2,1]: %s", tr_last_error());
    }
    {
        struct tr_tensor *at = tr_transpose(ta, 0, 1);
        struct tr_arg items[3] = {tensor_arg(ta), tensor_arg(at), tensor_arg(ta)};
        v = run("concat", (struct tr_arg[]){list_arg(items, 3)}, 1);
        ok(is(v, TR_DTYPE_F32, 2, (int64_t[]){6, 2}) &&
               values(v, (double[]){1, 2, 3, 4, 1, 3, 2, 4, 1, 2, 3, 4}, 12),
           "concat of three, one a transposed view");
        tr_release(v);
        tr_release(at);
    }
    {
        struct tr_arg items[3] = {tensor_arg(tc), tensor_arg(td), int_arg(7)};
        v = run("stack", (struct tr_arg[]){list_arg(items, 2)}, 1);
        ok(is(v, TR_DTYPE_I16, 2, (int64_t[]){2, 2}) && values(v, (double[]){-1, -2, 300, 400}, 4),
           "stack i8 and i16: i16 [2,2]");
        tr_release(v);
        v = run("stack", (struct tr_arg[]){list_arg(items, 2), int_arg(-1)}, 2);
        ok(is(v, TR_DTYPE_I16, 2, (int64_t[]){2, 2}) && values(v, (double[]){-1, 300, -2, 400}, 4),
           "stack along the last dimension");
        tr_release(v);
        items[0] = float_arg(2.5);
        items[1] = int_arg(7);
        v = run("stack", (struct tr_arg[]){list_arg(items, 2)}, 1);
        ok(is(v, TR_DTYPE_F64, 1, (int64_t[]){2}) && values(v, (double[]){2.5, 7}, 2),
           "stack of two numbers: f64 [2]");
        tr_release(v);
    }
    tr_release(td);
    tr_release(tc);
    tr_release(tb);
    tr_release(ta);
}

/* ------------------------------------------------------------- quantize */

static void test_quantize(void)
{
    float known[6] = {1, -2, 0.5f, 1.5f, 2.5f, 127};
    struct tr_tensor *t = tr_from_data(known, TR_DTYPE_F32, 1, (int64_t[]){6}, TR_CPU);
    struct tr_tensor *r[2] = {NULL, NULL}, *back;

    run2("quantize", (struct tr_arg[]){tensor_arg(t)}, 1, r);
    ok(is(r[0], TR_DTYPE_I8, 1, (int64_t[]){6}) && is(r[1], TR_DTYPE_F32, 0, NULL) &&
           flat(r[1], 0) == 1 && values(r[0], (double[]){1, -2, 0, 2, 2, 127}, 6),
       "quantize: scale max|x|/127 = 1, halves to even");
    back = r[0] ? run("dequantize", (struct tr_arg[]){tensor_arg(r[0]), tensor_arg(r[1])}, 2)
                : NULL;
    ok(is(back, TR_DTYPE_F32, 1, (int64_t[]){6}) && values(back, (double[]){1, -2, 0, 2, 2, 127}, 6),
       "dequantize: q * scale as f32");
    tr_release(back);
    tr_release(r[0]);
    tr_release(r[1]);
    tr_release(t);
    {
        struct tr_tensor *z = tr_zeros(TR_DTYPE_F16, 2, (int64_t[]){2, 3}, TR_CPU);
        run2("quantize", (struct tr_arg[]){tensor_arg(z)}, 1, r);
        ok(r[0] && flat(r[1], 0) == 0 && values(r[0], (double[]){0, 0, 0, 0, 0, 0}, 6),
           "all zeros: scale 0 and q 0");
        back = r[0] ? run("dequantize", (struct tr_arg[]){tensor_arg(r[0]), tensor_arg(r[1])}, 2)
                    : NULL;
        ok(back && values(back, (double[]){0, 0, 0, 0, 0, 0}, 6), "and back to zeros");
        tr_release(back);
        tr_release(r[0]);
        tr_release(r[1]);
        tr_release(z);
    }
    {
        struct tr_tensor *e = tr_zeros(TR_DTYPE_F32, 2, (int64_t[]){3, 0}, TR_CPU);
        run2("quantize", (struct tr_arg[]){tensor_arg(e), dtype_arg(TR_DTYPE_I8), int_arg(0)}, 3,
             r);
        ok(is(r[0], TR_DTYPE_I8, 2, (int64_t[]){3, 0}) && is(r[1], TR_DTYPE_F32, 1, (int64_t[]){3}) &&
               values(r[1], (double[]){0, 0, 0}, 3),
           "an empty tensor per row: three scales of 0");
        back = r[0] ? run("dequantize", (struct tr_arg[]){tensor_arg(r[0]), tensor_arg(r[1]),
                                                          none_arg(), int_arg(0)},
                          4)
                    : NULL;
        ok(is(back, TR_DTYPE_F32, 2, (int64_t[]){3, 0}), "and back: empty");
        tr_release(back);
        tr_release(r[0]);
        tr_release(r[1]);
        tr_release(e);
    }
    {
        int32_t iv[4] = {-254, 127, 3, 0};
        double dv[3] = {1e-300, -3e-300, 0};
        struct tr_tensor *ti = tr_from_data(iv, TR_DTYPE_I32, 1, (int64_t[]){4}, TR_CPU);
        struct tr_tensor *td = tr_from_data(dv, TR_DTYPE_F64, 1, (int64_t[]){3}, TR_CPU);
        run2("quantize", (struct tr_arg[]){tensor_arg(ti)}, 1, r);
        ok(r[0] && flat(r[1], 0) == 2 && values(r[0], (double[]){-127, 64, 2, 0}, 4),
           "quantize of i32: scale 2, 127 / 2 rounds to even 64, 3 / 2 to 2");
        tr_release(r[0]);
        tr_release(r[1]);
        run2("quantize", (struct tr_arg[]){tensor_arg(td)}, 1, r);
        ok(r[0] && flat(r[1], 0) == 0 && values(r[0], (double[]){0, 0, 0}, 3),
           "quantize of f64 below f32's range: scale 0 (as f32), q 0");
        tr_release(r[0]);
        tr_release(r[1]);
        tr_release(td);
        tr_release(ti);
    }
    {
        /* scale 2.4563782 / 127 = 0.01934156 (f32); -1.4989709 / scale is
         * -77.5 in f32 (so -78, to even) but -77.4999979 in f64 (-77) */
        float half[2] = {-1.4989709f, 2.4563782f};
        struct tr_tensor *th = tr_from_data(half, TR_DTYPE_F32, 1, (int64_t[]){2}, TR_CPU);
        run2("quantize", (struct tr_arg[]){tensor_arg(th)}, 1, r);
        ok(r[0] && flat(r[1], 0) == (double)0.01934156f && values(r[0], (double[]){-78, 127}, 2),
           "quantize divides in f32: a quotient that rounds to k + 0.5 goes to even");
        tr_release(r[0]);
        tr_release(r[1]);
        tr_release(th);
    }
}

/* The round trip of random values (a zero row among them), whole and per
 * slice along each dim: every element within half a scale step. */
static void test_quantize_round_trip(void)
{
    const int64_t rows = 40, cols = 3000;
    float *v = malloc((size_t)(rows * cols) * sizeof *v);
    uint64_t seed = 99;
    struct tr_tensor *x;

    for (int64_t i = 0; i < rows * cols; i++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        /* rows of very different ranges; row 5 all zero */
        v[i] = i / cols == 5 ? 0
                             : (float)(((double)(seed >> 40) / (1 << 24) - 0.5) * pow(10, (double)(i / cols % 7) - 3));
    }
    x = tr_from_data(v, TR_DTYPE_F32, 2, (int64_t[]){rows, cols}, TR_CPU);
    free(v);
    for (int mode = 0; mode < 3; mode++) {
        struct tr_arg dim = mode == 0 ? none_arg() : int_arg(mode - 1);
        struct tr_tensor *r[2] = {NULL, NULL}, *back = NULL;
        bool good;
        int64_t slices = mode == 0 ? 1 : mode == 1 ? rows : cols;

        run2("quantize", (struct tr_arg[]){tensor_arg(x), dtype_arg(TR_DTYPE_I8), dim}, 3, r);
        if (r[0])
            back = run("dequantize",
                       (struct tr_arg[]){tensor_arg(r[0]), tensor_arg(r[1]), none_arg(), dim}, 4);
        good = back && tr_tensor_numel(r[1]) == slices;
        for (int64_t s = 0; good && s < slices; s++) {
            /* the scale is max|x| / 127 of the slice */
            double m = 0;
            for (int64_t k = 0; k < (mode == 0 ? rows * cols : mode == 1 ? cols : rows); k++) {
                int64_t i = mode == 0 ? k : mode == 1 ? s * cols + k : k * cols + s;
                m = fabs(flat(x, i)) > m ? fabs(flat(x, i)) : m;
            }
            good = flat(r[1], s) == (double)(float)(m / 127);
        }
        for (int64_t i = 0; good && i < rows * cols; i++) {
            int64_t s = mode == 0 ? 0 : mode == 1 ? i / cols : i % cols;
            double scale = flat(r[1], s), err = fabs(flat(back, i) - flat(x, i));
            good = fabs(flat(r[0], i)) <= 127 && err <= scale * 0.50001;
        }
        ok(good, "quantize/dequantize %s: scales right, |x - back| <= scale / 2",
           mode == 0 ? "whole" : mode == 1 ? "per row (dim 0)" : "per column (dim 1)");
        if (mode == 1)
            ok(r[1] && flat(r[1], 5) == 0 && flat(back, 5 * cols + 17) == 0,
               "the zero row has scale 0 and comes back as zeros");
        tr_release(back);
        tr_release(r[0]);
        tr_release(r[1]);
    }
    {
        struct tr_tensor *bad = tr_zeros(TR_DTYPE_F32, 1, (int64_t[]){3}, TR_CPU);
        struct tr_tensor *q = tr_zeros(TR_DTYPE_I8, 2, (int64_t[]){2, 4}, TR_CPU), *back;
        back = run("dequantize",
                   (struct tr_arg[]){tensor_arg(q), tensor_arg(bad), none_arg(), int_arg(1)}, 4);
        ok(!back && tr_last_status() == TR_ERR_SHAPE &&
               strncmp(tr_last_error(), "dequantize:", 11) == 0,
           "dequantize with a scale of the wrong length: %s", tr_last_error());
        tr_release(q);
        tr_release(bad);
    }
    tr_release(x);
}

/* --------------------------------------------------- rearranging copies */

/* reflect and replicate of one index into [0, n): the naive definitions. */
static int64_t mirrored(int64_t i, int64_t n, bool reflect)
{
    if (reflect)
        return i < 0 ? -i : i >= n ? 2 * (n - 1) - i : i;
    return i < 0 ? 0 : i >= n ? n - 1 : i;
}

/* pad of a 3-d x in every dimension, both modes, against the index
 * definitions: the corners are where one dimension's slab is read from
 * another's; with 1 and 2 threads, bitwise the same. */
static void test_pad_corners(void)
{
    int64_t shape[3] = {5, 40, 700}, w[6] = {3, 1, 2, 7, 4, 0}; /* pairs from the last dim */
    struct tr_tensor *x = iota(3, shape);
    struct tr_arg widths[6];

    for (int i = 0; i < 6; i++)
        widths[i] = int_arg(w[i]);
    for (int mode = 0; mode < 2; mode++) {
        bool reflect = mode == 0, good = true, same = true;
        struct tr_tensor *r[2];
        for (int threads = 1; threads <= 2; threads++) {
            tr_set_num_threads(threads);
            r[threads - 1] = run("pad", (struct tr_arg[]){tensor_arg(x), list_arg(widths, 6),
                                                          string_arg(reflect ? "reflect" : "replicate")},
                                 3);
        }
        ok(is(r[0], TR_DTYPE_F32, 3, (int64_t[]){5 + 4, 40 + 2 + 7, 700 + 3 + 1}),
           "pad %s of [5,40,700] by (3,1),(2,7),(4,0): shape", reflect ? "reflect" : "replicate");
        for (int64_t a = 0; r[0] && a < 9; a++)
            for (int64_t b = 0; b < 49; b++)
                for (int64_t c = 0; c < 704; c++) {
                    int64_t i = (a * 49 + b) * 704 + c;
                    double want = (double)((mirrored(a - 4, 5, reflect) * 40 +
                                            mirrored(b - 2, 40, reflect)) * 700 +
                                           mirrored(c - 3, 700, reflect));
                    good = good && flat(r[0], i) == want;
                    same = same && flat(r[1], i) == flat(r[0], i);
                }
        ok(r[0] && good, "  every element, corners included, is x at the mirrored index");
        ok(r[1] && same, "  with 2 threads, the same");
        tr_release(r[0]);
        tr_release(r[1]);
    }
    tr_set_num_threads(0);
    tr_release(x);
}

/* roll with repeated dims and shifts past the size; repeat_interleave by
 * both of its loops; repeat's doubling; against naive loops. */
static void test_roll_repeat(void)
{
    struct tr_tensor *x = iota(2, (int64_t[]){3, 4}), *t = tr_transpose(x, 0, 1), *r;
    struct tr_arg shifts[3] = {int_arg(-9), int_arg(2), int_arg(5)};
    struct tr_arg dims[3] = {int_arg(1), int_arg(0), int_arg(-1)};
    struct tr_arg reps[3] = {int_arg(3), int_arg(1), int_arg(5)};
    bool good = true;

    /* along dim 1 (size 4): -9 + 5 = -4, no shift; along dim 0 (size 3): 2 */
    r = run("roll", (struct tr_arg[]){tensor_arg(x), list_arg(shifts, 3), list_arg(dims, 3)}, 3);
    for (int64_t i = 0; r && i < 12; i++)
        good = good && flat(r, i) == (double)(((i / 4 + 1) % 3) * 4 + i % 4);
    ok(r && good, "roll by -9, 2, 5 along 1, 0, -1 of [3,4]: 2 rows down, columns in place");
    tr_release(r);
    r = run("roll", (struct tr_arg[]){tensor_arg(t), int_arg(-13)}, 2);
    good = r != NULL;
    for (int64_t i = 0; r && i < 12; i++) /* x.T flattened is 0 4 8 1 5 9 ...; rolled by -1 */
        good = good && flat(r, i) == (double)(((i + 1) % 12) % 3 * 4 + ((i + 1) % 12) / 3);
    ok(good, "roll of x.T by -13 without dims: its flattened order, rolled by -1");
    tr_release(r);
    for (int64_t k = 2; k <= 5; k += 3) { /* r <= size (slices j::r), r > size (broadcasts) */
        r = run("repeat_interleave", (struct tr_arg[]){tensor_arg(t), int_arg(k), int_arg(0)}, 3);
        good = is(r, TR_DTYPE_F32, 2, (int64_t[]){4 * k, 3});
        for (int64_t i = 0; good && i < 12 * k; i++)
            good = flat(r, i) == (double)((i % 3) * 4 + i / 3 / k);
        ok(good, "repeat_interleave of x.T [4,3] by %lld along 0", (long long)k);
        tr_release(r);
    }
    r = run("repeat", (struct tr_arg[]){tensor_arg(t), list_arg(reps, 3)}, 2);
    good = is(r, TR_DTYPE_F32, 3, (int64_t[]){3, 4, 15});
    for (int64_t i = 0; good && i < 180; i++)
        good = flat(r, i) == (double)((i % 15 % 3) * 4 + i / 15 % 4);
    ok(good, "repeat of x.T [4,3] by [3,1,5]: tiles, a leading dimension added");
    tr_release(r);
    tr_release(t);
    tr_release(x);
}

/* take_along_dim and one_hot refuse indices out of range, negative ones
 * too, with TR_ERR_INDEX, leaving nothing behind. */
static void test_take_one_hot(void)
{
    struct tr_tensor *x = iota(2, (int64_t[]){3, 4});
    int64_t bad[2] = {1, -1}, big[2] = {0, 4};
    struct tr_tensor *neg = tr_from_data(bad, TR_DTYPE_I64, 2, (int64_t[]){1, 2}, TR_CPU);
    struct tr_tensor *over = tr_from_data(big, TR_DTYPE_I64, 1, (int64_t[]){2}, TR_CPU);
    struct tr_memory_stats before, after;
    struct tr_tensor *r;
    tr_status s;

    tr_memory_stats(TR_CPU, &before);
    r = run("take_along_dim", (struct tr_arg[]){tensor_arg(x), tensor_arg(neg), int_arg(1)}, 3);
    s = tr_last_status();
    ok(!r && s == TR_ERR_INDEX && strstr(tr_last_error(), "index -1 is out of range"),
       "take_along_dim with index -1: %s", tr_last_error());
    r = run("one_hot", (struct tr_arg[]){tensor_arg(over), int_arg(4)}, 2);
    s = tr_last_status();
    ok(!r && s == TR_ERR_INDEX && strstr(tr_last_error(), "value 4"),
       "one_hot of 4 with 4 classes: %s", tr_last_error());
    r = run("one_hot", (struct tr_arg[]){tensor_arg(neg), int_arg(4)}, 2);
    ok(!r && tr_last_status() == TR_ERR_INDEX, "one_hot of -1: %s", tr_last_error());
    tr_memory_stats(TR_CPU, &after);
    is_int((int64_t)after.active_bytes, (int64_t)before.active_bytes, "  nothing left in the pool");
    r = run("one_hot", (struct tr_arg[]){tensor_arg(over), int_arg(5)}, 2);
    ok(is(r, TR_DTYPE_I64, 2, (int64_t[]){2, 5}) &&
           values(r, (double[]){1, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 10),
       "one_hot([0, 4], 5)");
    tr_release(r);
    tr_release(over);
    tr_release(neg);
    tr_release(x);
}

int main(void)
{
    test_views();
    test_copies();
    test_sort();
    test_sort_2d();
    test_topk_paths();
    test_gather();
    test_join();
    test_quantize();
    test_quantize_round_trip();
    test_pad_corners();
    test_roll_repeat();
    test_take_one_hot();
    return done_testing();
}
