/*
 * test_matmul.c - matmul, dot and outer through tr_op_run: known values,
 * transposed and strided operands, 1-d operands, batches with broadcast
 * dimensions, f16/bf16 computed in f32, mixed dtypes, empty inner
 * dimensions, errors, and bitwise identical results for any thread count.
 */
#include <dirent.h>
#include <math.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "tensorrun_ops.h"
#include "op_test.h"
#include "tap.h"

static struct tr_tensor *matmul(struct tr_tensor *a, struct tr_tensor *b)
{
    return run("matmul", (struct tr_arg[]){tensor_arg(a), tensor_arg(b)}, 2);
}

static bool same_shape(const struct tr_tensor *t, int ndim, const int64_t *shape)
{
    return t && tr_tensor_ndim(t) == ndim &&
           (ndim == 0 || memcmp(tr_tensor_shape(t), shape, (size_t)ndim * sizeof *shape) == 0);
}

/* A deterministic pseudo-random f32 tensor in [-1, 1). */
static struct tr_tensor *noise(int ndim, const int64_t *shape, uint64_t seed)
{
    int64_t n = 1;
    float *v;
    struct tr_tensor *t;

    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        v[i] = (float)((double)(seed >> 40) / (double)(1u << 24) * 2 - 1);
    }
    t = tr_from_data(v, TR_DTYPE_F32, ndim, shape, TR_CPU);
    free(v);
    return t;
}

/*
 * The largest difference between c and the product of a and b computed in
 * double from their values, relative to the sum of |products| of each
 * element (the scale of a dot product's rounding error).  a and b are 2-d
 * (any strides), c their [m, n] product.
 */
static double worst_error(const struct tr_tensor *a, const struct tr_tensor *b,
                          const struct tr_tensor *c)
{
    int64_t m = tr_tensor_shape(a)[0], k = tr_tensor_shape(a)[1], n = tr_tensor_shape(b)[1];
    /* compact f64 copies, read directly: tr_tensor_item per element is
     * slow under valgrind */
    struct tr_tensor *ad = tr_cast(a, TR_DTYPE_F64), *bd = tr_cast(b, TR_DTYPE_F64);
    struct tr_tensor *cd = tr_cast(c, TR_DTYPE_F64);
    const double *av = tr_tensor_data(ad), *bv = tr_tensor_data(bd), *cv = tr_tensor_data(cd);
    double worst = 0;

    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) {
            double sum = 0, mag = 0;
            for (int64_t p = 0; p < k; p++) {
                sum += av[i * k + p] * bv[p * n + j];
                mag += fabs(av[i * k + p] * bv[p * n + j]);
            }
            if (fabs(cv[i * n + j] - sum) / (mag > 0 ? mag : 1) > worst)
                worst = fabs(cv[i * n + j] - sum) / (mag > 0 ? mag : 1);
        }
    }
    tr_release(cd);
    tr_release(bd);
    tr_release(ad);
    return worst;
}

static void test_known(void)
{
    float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {7, 8, 9, 10, 11, 12};
    double ad[4] = {1.5, -2, 0.25, 4}, bd[4] = {2, 1, -1, 0.5};
    struct tr_tensor *ta = tr_from_data(a, TR_DTYPE_F32, 2, (int64_t[]){2, 3}, TR_CPU);
    struct tr_tensor *tb = tr_from_data(b, TR_DTYPE_F32, 2, (int64_t[]){3, 2}, TR_CPU);
    struct tr_tensor *td = tr_from_data(ad, TR_DTYPE_F64, 2, (int64_t[]){2, 2}, TR_CPU);
    struct tr_tensor *te = tr_from_data(bd, TR_DTYPE_F64, 2, (int64_t[]){2, 2}, TR_CPU);
    struct tr_tensor *c;

    c = matmul(ta, tb);
    ok(same_shape(c, 2, (int64_t[]){2, 2}) && tr_tensor_dtype(c) == TR_DTYPE_F32 &&
           flat(c, 0) == 58 && flat(c, 1) == 64 && flat(c, 2) == 139 && flat(c, 3) == 154,
       "[2,3] @ [3,2] f32: [[58, 64], [139, 154]]");
    tr_release(c);
    c = matmul(td, te);
    ok(c && tr_tensor_dtype(c) == TR_DTYPE_F64 && flat(c, 0) == 5 && flat(c, 1) == 0.5 &&
           flat(c, 2) == -3.5 && flat(c, 3) == 2.25,
       "[2,2] @ [2,2] f64");
    tr_release(c);
    c = matmul(ta, te);
    ok(!c && tr_last_status() == TR_ERR_SHAPE && strncmp(tr_last_error(), "matmul:", 7) == 0 &&
           strstr(tr_last_error(), "3 != 2"),
       "shapes that do not line up: %s", tr_last_error());
    tr_release(te);
    tr_release(td);
    tr_release(tb);
    tr_release(ta);
}

static void test_vectors(void)
{
    float m[6] = {1, 2, 3, 4, 5, 6}, v2[2] = {1, -1}, v3[3] = {1, 0, 2};
    struct tr_tensor *tm = tr_from_data(m, TR_DTYPE_F32, 2, (int64_t[]){2, 3}, TR_CPU);
    struct tr_tensor *t2 = tr_from_data(v2, TR_DTYPE_F32, 1, (int64_t[]){2}, TR_CPU);
    struct tr_tensor *t3 = tr_from_data(v3, TR_DTYPE_F32, 1, (int64_t[]){3}, TR_CPU);
    struct tr_tensor *c;

    c = matmul(t2, tm);
    ok(same_shape(c, 1, (int64_t[]){3}) && flat(c, 0) == -3 && flat(c, 1) == -3 &&
           flat(c, 2) == -3,
       "[2] @ [2,3] is [3]");
    tr_release(c);
    c = matmul(tm, t3);
    ok(same_shape(c, 1, (int64_t[]){2}) && flat(c, 0) == 7 && flat(c, 1) == 16,
       "[2,3] @ [3] is [2]");
    tr_release(c);
    c = matmul(t3, t3);
    ok(same_shape(c, 0, NULL) && flat(c, 0) == 5, "[3] @ [3] is a scalar");
    tr_release(c);
    c = run("dot", (struct tr_arg[]){tensor_arg(t3), tensor_arg(t3)}, 2);
    ok(same_shape(c, 0, NULL) && tr_tensor_dtype(c) == TR_DTYPE_F32 && flat(c, 0) == 5,
       "dot of two vectors");
    tr_release(c);
    c = run("dot", (struct tr_arg[]){tensor_arg(t2), tensor_arg(t3)}, 2);
    ok(!c && tr_last_status() == TR_ERR_SHAPE && strncmp(tr_last_error(), "dot:", 4) == 0,
       "dot of unequal lengths: %s", tr_last_error());
    c = run("outer", (struct tr_arg[]){tensor_arg(t2), tensor_arg(t3)}, 2);
    ok(same_shape(c, 2, (int64_t[]){2, 3}) && flat(c, 0) == 1 && flat(c, 2) == 2 &&
           flat(c, 3) == -1 && flat(c, 5) == -2,
       "outer [2] x [3] is [2,3]");
    tr_release(c);
    {
        /* a strided vector (every other element of m's first row) */
        struct tr_tensor *row = tr_select(tm, 0, 1), *every = tr_slice(row, 0, 0, 3, 2);
        c = run("outer", (struct tr_arg[]){tensor_arg(every), tensor_arg(t2)}, 2);
        ok(same_shape(c, 2, (int64_t[]){2, 2}) && flat(c, 0) == 4 && flat(c, 1) == -4 &&
               flat(c, 2) == 6 && flat(c, 3) == -6,
           "outer of a strided vector");
        tr_release(c);
        c = matmul(every, t2);
        ok(c && flat(c, 0) == -2, "a strided vector @ a vector");
        tr_release(c);
        tr_release(every);
        tr_release(row);
    }
    tr_release(t3);
    tr_release(t2);
    tr_release(tm);
}

static void test_strided(void)
{
    struct tr_tensor *a = noise(2, (int64_t[]){37, 29}, 1), *b = noise(2, (int64_t[]){41, 37}, 2);
    struct tr_tensor *at = tr_transpose(a, 0, 1);  /* [29,37], unit row stride */
    struct tr_tensor *bt = tr_transpose(b, 0, 1);  /* [37,41] */
    struct tr_tensor *c, *part, *skip, *neg;

    c = matmul(at, bt);
    ok(same_shape(c, 2, (int64_t[]){29, 41}) && worst_error(at, bt, c) < 1e-6,
       "both operands transposed views");
    tr_release(c);
    /* a leading dimension longer than the row: columns 3..20 of a */
    part = tr_slice(a, 1, 3, 20, 1);
    {
        struct tr_tensor *bp = tr_slice(bt, 0, 0, 17, 1);
        c = matmul(part, bp);
        ok(same_shape(c, 2, (int64_t[]){37, 41}) && worst_error(part, bp, c) < 1e-6,
           "a column slice (leading dimension 29 for rows of 17)");
        tr_release(c);
        tr_release(bp);
    }
    /* strides BLAS cannot take: every other column, reversed rows */
    skip = tr_slice(a, 1, 0, 29, 2);
    neg = tr_slice(bt, 0, TR_SLICE_NONE, TR_SLICE_NONE, -1);
    {
        struct tr_tensor *bs = tr_slice(neg, 0, 0, 15, 1);
        c = matmul(skip, bs);
        ok(same_shape(c, 2, (int64_t[]){37, 41}) && worst_error(skip, bs, c) < 1e-6,
           "every other column times reversed rows (copied first)");
        tr_release(c);
        tr_release(bs);
    }
    /* a broadcast operand: stride 0 inside the matrix */
    {
        struct tr_tensor *row = tr_slice(a, 0, 0, 1, 1);
        struct tr_tensor *wide = tr_expand(row, (int64_t[]){5, 29}, 2);
        c = matmul(wide, at);
        ok(same_shape(c, 2, (int64_t[]){5, 37}) && worst_error(wide, at, c) < 1e-6 &&
               flat(c, 3) == flat(c, 37 + 3),
           "an expanded operand (stride 0 rows)");
        tr_release(c);
        tr_release(wide);
        tr_release(row);
    }
    tr_release(neg);
    tr_release(skip);
    tr_release(part);
    tr_release(bt);
    tr_release(at);
    tr_release(b);
    tr_release(a);
}

static void test_batched(void)
{
    struct tr_tensor *a = noise(4, (int64_t[]){2, 1, 3, 4}, 3);
    struct tr_tensor *b = noise(3, (int64_t[]){5, 4, 2}, 4);
    struct tr_tensor *c = matmul(a, b), *v;
    bool good = same_shape(c, 4, (int64_t[]){2, 5, 3, 2});

    for (int64_t i = 0; good && i < 2; i++) {
        for (int64_t j = 0; good && j < 5; j++) {
            struct tr_tensor *ai = tr_select(a, 0, i), *ai0 = tr_select(ai, 0, 0);
            struct tr_tensor *bj = tr_select(b, 0, j), *ci = tr_select(c, 0, i);
            struct tr_tensor *cij = tr_select(ci, 0, j);
            good = worst_error(ai0, bj, cij) < 1e-6;
            tr_release(cij);
            tr_release(ci);
            tr_release(bj);
            tr_release(ai0);
            tr_release(ai);
        }
    }
    ok(good, "[2,1,3,4] @ [5,4,2] is [2,5,3,2], batch dimensions broadcast");
    tr_release(c);
    /* a vector against a batch, and a batch of permuted matrices */
    v = noise(1, (int64_t[]){4}, 5);
    c = matmul(v, b);
    ok(same_shape(c, 2, (int64_t[]){5, 2}) &&
           fabs(flat(c, 3) - (flat(v, 0) * flat(b, 8 + 1) + flat(v, 1) * flat(b, 8 + 3) +
                              flat(v, 2) * flat(b, 8 + 5) + flat(v, 3) * flat(b, 8 + 7))) < 1e-6,
       "[4] @ [5,4,2] is [5,2]");
    tr_release(c);
    {
        struct tr_tensor *p = tr_permute(b, (int[]){1, 0, 2}, 3); /* [4,5,2], batch stride 2 */
        struct tr_tensor *q = tr_permute(p, (int[]){1, 0, 2}, 3); /* back: [5,4,2] strided */
        struct tr_tensor *d = matmul(a, q), *e = matmul(a, b);
        bool same = d && e;
        for (int64_t i = 0; same && i < tr_tensor_numel(e); i++)
            same = flat(d, i) == flat(e, i);
        ok(same, "a batch given through permuted views gives the same bits");
        tr_release(e);
        tr_release(d);
        tr_release(q);
        tr_release(p);
    }
    tr_release(v);
    tr_release(b);
    tr_release(a);
}

static void test_dtypes(void)
{
    struct tr_tensor *a = noise(2, (int64_t[]){300, 70}, 6), *b = noise(2, (int64_t[]){70, 260}, 7);
    struct tr_tensor *ah = tr_cast(a, TR_DTYPE_F16), *bh = tr_cast(b, TR_DTYPE_F16);
    struct tr_tensor *bb = tr_cast(b, TR_DTYPE_BF16), *bd = tr_cast(b, TR_DTYPE_F64);
    struct tr_tensor *af = tr_cast(ah, TR_DTYPE_F32), *bf = tr_cast(bh, TR_DTYPE_F32);
    struct tr_tensor *c, *ref;
    bool good;

    /* f16 x f16: the f32 product of the same values, rounded once to f16
     * (crossing tile boundaries in both directions) */
    c = matmul(ah, bh);
    ref = matmul(af, bf);
    good = c && ref && tr_tensor_dtype(c) == TR_DTYPE_F16;
    for (int64_t i = 0; good && i < tr_tensor_numel(c); i++)
        good = ((const uint16_t *)tr_tensor_data(c))[i] ==
               tr_f32_to_f16(((const float *)tr_tensor_data(ref))[i]);
    ok(good, "f16 @ f16 is f16: the f32 product rounded once");
    tr_release(ref);
    tr_release(c);
    c = matmul(ah, bb);
    ok(c && tr_tensor_dtype(c) == TR_DTYPE_F32 && worst_error(ah, bb, c) < 1e-6,
       "f16 @ bf16 is f32");
    tr_release(c);
    c = matmul(a, bd);
    ok(c && tr_tensor_dtype(c) == TR_DTYPE_F64 && worst_error(a, bd, c) < 1e-14,
       "f32 @ f64 is f64, computed in f64");
    tr_release(c);
    {
        struct tr_tensor *h = tr_transpose(bh, 0, 1);
        struct tr_tensor *hf = tr_cast(h, TR_DTYPE_F32), *ref2;
        c = matmul(h, bh);
        ref2 = matmul(hf, bf);
        good = c && ref2 && tr_tensor_dtype(c) == TR_DTYPE_F16 &&
               same_shape(c, 2, (int64_t[]){260, 260});
        for (int64_t i = 0; good && i < tr_tensor_numel(c); i += 7)
            good = flat(c, i) == (double)tr_f16_to_f32(tr_f32_to_f16((float)flat(ref2, i)));
        ok(good, "f16 transposed @ f16 (converted through the view)");
        tr_release(ref2);
        tr_release(hf);
        tr_release(c);
        tr_release(h);
    }
    {
        /* PyTorch refuses a bool product (NumPy's would be or-of-ands) */
        uint8_t i[4] = {1, 0, 1, 1};
        struct tr_tensor *ti = tr_from_data(i, TR_DTYPE_BOOL, 2, (int64_t[]){2, 2}, TR_CPU);
        c = matmul(ti, ti);
        ok(!c && tr_last_status() == TR_ERR_DTYPE && strncmp(tr_last_error(), "matmul:", 7) == 0,
           "bool is refused: %s", tr_last_error());
        tr_release(ti);
    }
    tr_release(bf);
    tr_release(af);
    tr_release(bd);
    tr_release(bb);
    tr_release(bh);
    tr_release(ah);
    tr_release(b);
    tr_release(a);
}

static void test_empty(void)
{
    struct tr_tensor *a = tr_zeros(TR_DTYPE_F32, 2, (int64_t[]){3, 0}, TR_CPU);
    struct tr_tensor *b = tr_zeros(TR_DTYPE_F32, 2, (int64_t[]){0, 2}, TR_CPU);
    struct tr_tensor *e = tr_zeros(TR_DTYPE_F32, 2, (int64_t[]){0, 3}, TR_CPU);
    struct tr_tensor *c;

    c = matmul(a, b);
    ok(same_shape(c, 2, (int64_t[]){3, 2}) && flat(c, 0) == 0 && flat(c, 5) == 0,
       "an empty inner dimension gives zeros");
    tr_release(c);
    c = matmul(e, a);
    ok(same_shape(c, 2, (int64_t[]){0, 0}), "no rows: an empty result");
    tr_release(c);
    tr_release(e);
    tr_release(b);
    tr_release(a);
}

/* The bits of c computed with 1 and with 4 threads. */
static bool same_bits_for_threads(struct tr_tensor *a, struct tr_tensor *b)
{
#ifdef _OPENMP
    struct tr_tensor *c1, *c4;
    bool same;
    int saved = tr_num_threads();

    tr_set_num_threads(1);
    c1 = matmul(a, b);
    tr_set_num_threads(4);
    c4 = matmul(a, b);
    tr_set_num_threads(saved);
    same = c1 && c4 && tr_tensor_nbytes(c1) == tr_tensor_nbytes(c4) &&
           memcmp(tr_tensor_data(c1), tr_tensor_data(c4), tr_tensor_nbytes(c1)) == 0;
    tr_release(c4);
    tr_release(c1);
    return same;
#else
    (void)a;
    (void)b;
    return true;
#endif
}

static void test_threads(void)
{
    struct tr_tensor *a = noise(2, (int64_t[]){700, 500}, 8), *b = noise(2, (int64_t[]){500, 300}, 9);
    /* smaller, but still several tiles each way (valgrind runs these) */
    struct tr_tensor *s = noise(2, (int64_t[]){270, 300}, 11);
    struct tr_tensor *bt = noise(2, (int64_t[]){600, 300}, 10), *btt = tr_transpose(bt, 0, 1);
    struct tr_tensor *ah = tr_cast(s, TR_DTYPE_F16), *bh = tr_cast(btt, TR_DTYPE_F16);
    struct tr_tensor *c;

    ok(same_bits_for_threads(a, b), "700x500 @ 500x300 f32: the same bits with 1 and 4 threads");
    ok(same_bits_for_threads(s, btt), "270x300 @ (600x300)^T, a transposed view (2x2 tiles): the same bits");
    ok(same_bits_for_threads(ah, bh), "... in f16");
    c = matmul(a, b);
    {
        /* a sample of the elements against a double product */
        double worst = 0;
        for (int64_t i = 0; i < 700; i += 97) {
            for (int64_t j = 0; j < 300; j += 41) {
                double sum = 0, mag = 0, x, y, got;
                for (int64_t p = 0; p < 500; p++) {
                    tr_tensor_item(a, (int64_t[]){i, p}, &x);
                    tr_tensor_item(b, (int64_t[]){p, j}, &y);
                    sum += x * y;
                    mag += fabs(x * y);
                }
                tr_tensor_item(c, (int64_t[]){i, j}, &got);
                if (fabs(got - sum) / mag > worst)
                    worst = fabs(got - sum) / mag;
            }
        }
        ok(worst < 1e-5, "and the values are right (relative error %.2g)", worst);
    }
    tr_release(c);
    tr_release(bh);
    tr_release(ah);
    tr_release(btt);
    tr_release(bt);
    tr_release(s);
    tr_release(b);
    tr_release(a);
}

/* Threads of this process, from /proc (-1 where there is none). */
static int task_count(void)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;

    if (!d)
        return -1;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* BLAS runs single-threaded, so OpenBLAS's own worker threads, which spin
 * on sched_yield for a tenth of a second when started, must not come back
 * at the first product (openblas_set_num_threads restarts them when it
 * finds them shut down).  Run first, on one thread, before OpenMP has a
 * team to count. */
static void test_no_blas_threads(void)
{
    struct tr_tensor *a, *b, *c;
    int before;

    tr_set_num_threads(1);
    before = task_count();
    a = noise(2, (int64_t[]){64, 64}, 1);
    b = noise(2, (int64_t[]){64, 64}, 2);
    c = matmul(a, b);
    ok(c && task_count() == before, "a product starts no thread: %d before, %d after", before,
       task_count());
    tr_release(a);
    tr_release(b);
    tr_release(c);
    tr_set_num_threads(0);
}

int main(void)
{
    test_no_blas_threads();
    test_known();
    test_vectors();
    test_strided();
    test_batched();
    test_dtypes();
    test_empty();
    test_threads();
    return done_testing();
}
