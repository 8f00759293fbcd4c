/*
 * test_integer_ops.c - integer and bool operands of the ops that used to
 * take floats or numbers only: matmul, dot and outer of integers (exact,
 * wrapping around modulo 2^bits of the result's dtype; strided,
 * transposed, batched and broadcast operands; mixed dtypes; any thread
 * count), sort, argsort and topk of bool, and an integer raised to a
 * negative integer tensor power (refused before anything is written).
 */
#include <stdatomic.h>
#include <stdlib.h>
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

/* A [rows, cols] tensor of dtype holding values. */
static struct tr_tensor *ints(enum tr_dtype dtype, int64_t rows, int64_t cols,
                              const int64_t *values)
{
    struct tr_tensor *wide = tr_from_data(values, TR_DTYPE_I64, 2, (int64_t[]){rows, cols},
                                          TR_CPU);
    struct tr_tensor *t = tr_cast(wide, dtype); /* narrowing wraps: the low bits */

    tr_release(wide);
    return t;
}

/* A pseudo-random tensor of dtype over the whole range of its values. */
static struct tr_tensor *noise(enum tr_dtype dtype, int ndim, const int64_t *shape, uint64_t seed)
{
    int64_t n = 1;
    int64_t *v;
    struct tr_tensor *wide, *t;

    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        v[i] = (int64_t)(seed ^ (seed >> 29));
    }
    wide = tr_from_data(v, TR_DTYPE_I64, ndim, shape, TR_CPU);
    t = tr_cast(wide, dtype);
    tr_release(wide);
    free(v);
    return t;
}

/* The bits a value of dtype d holds for the integer w taken modulo
 * 2^bits, as i64 reads them (sign-extended for a signed d). */
static uint64_t wrapped(uint64_t w, enum tr_dtype d)
{
    int bits = (int)tr_dtype_size(d) * 8;
    uint64_t mask = bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;

    w &= mask;
    if (tr_dtype_is_signed(d) && bits < 64 && (w >> (bits - 1)))
        w |= ~mask;
    return w;
}

/* Whether c (2-d [m, n]) is the exact product of a ([m, k]) and b ([k, n])
 * modulo 2^bits of c's dtype, computed here element by element. */
static bool exact_product(const struct tr_tensor *a, const struct tr_tensor *b,
                          const struct tr_tensor *c)
{
    int64_t m = tr_tensor_shape(a)[0], k = tr_tensor_shape(a)[1], n = tr_tensor_shape(b)[1];
    struct tr_tensor *a64 = tr_cast(a, TR_DTYPE_I64), *b64 = tr_cast(b, TR_DTYPE_I64);
    struct tr_tensor *c64 = tr_cast(c, TR_DTYPE_I64);
    const int64_t *av = tr_tensor_data(a64), *bv = tr_tensor_data(b64), *cv = tr_tensor_data(c64);
    bool good = tr_tensor_ndim(c) == 2 && tr_tensor_shape(c)[0] == m &&
                tr_tensor_shape(c)[1] == n && tr_tensor_shape(b)[0] == k;

    for (int64_t i = 0; good && i < m; i++) {
        for (int64_t j = 0; good && j < n; j++) {
            uint64_t sum = 0;
            for (int64_t p = 0; p < k; p++)
                sum += (uint64_t)av[i * k + p] * (uint64_t)bv[p * n + j];
            good = (uint64_t)cv[i * n + j] == wrapped(sum, tr_tensor_dtype(c));
        }
    }
    tr_release(c64);
    tr_release(b64);
    tr_release(a64);
    return good;
}

static void test_known_wraps(void)
{
    static const struct {
        enum tr_dtype da, db, want;
        int64_t a[2], b[2], product;
        const char *what;
    } cases[] = {
        {TR_DTYPE_I8, TR_DTYPE_I8, TR_DTYPE_I8, {100, 100}, {2, 1}, 44, "i8: 300 wraps to 44"},
        {TR_DTYPE_I8, TR_DTYPE_I8, TR_DTYPE_I8, {-128, 1}, {-1, 0}, -128, "i8: -128 * -1 is -128"},
        {TR_DTYPE_U8, TR_DTYPE_U8, TR_DTYPE_U8, {200, 100}, {2, 1}, 244, "u8: 500 wraps to 244"},
        {TR_DTYPE_I16, TR_DTYPE_I16, TR_DTYPE_I16, {300, 300}, {300, -1}, 89700 - 65536,
         "i16: 89700 wraps to 24164"},
        {TR_DTYPE_I16, TR_DTYPE_I16, TR_DTYPE_I16, {300, 7}, {150, 0}, 45000 - 65536,
         "i16: 45000 wraps to -20536"},
        {TR_DTYPE_U16, TR_DTYPE_U16, TR_DTYPE_U16, {65535, 2}, {65535, 1}, 3,
         "u16: 2^32 - 2^17 + 3 wraps to 3"},
        {TR_DTYPE_I32, TR_DTYPE_I32, TR_DTYPE_I32, {INT32_MAX, INT32_MAX}, {2, 2}, -4,
         "i32: 4 * (2^31 - 1) wraps to -4"},
        {TR_DTYPE_U32, TR_DTYPE_U32, TR_DTYPE_U32, {4000000000, 1}, {2, 5}, 3705032709,
         "u32: 8000000005 wraps to 3705032709"},
        {TR_DTYPE_I64, TR_DTYPE_I64, TR_DTYPE_I64, {INT64_MAX, 1}, {2, 3}, 1,
         "i64: 2 * (2^63 - 1) + 3 wraps to 1"},
        {TR_DTYPE_U64, TR_DTYPE_U64, TR_DTYPE_U64, {-1, 5}, {2, 1}, 3,
         "u64: 2 * (2^64 - 1) + 5 wraps to 3"},
        {TR_DTYPE_U8, TR_DTYPE_I8, TR_DTYPE_I16, {255, 255}, {127, 127}, 64770 - 65536,
         "u8 @ i8 is i16: 64770 wraps to -766"},
        {TR_DTYPE_U8, TR_DTYPE_I8, TR_DTYPE_I16, {200, 0}, {-100, 7}, -20000,
         "u8 @ i8 is i16: 200 * -100 exactly"},
        {TR_DTYPE_I32, TR_DTYPE_I64, TR_DTYPE_I64, {INT32_MAX, INT32_MIN}, {INT32_MAX, INT32_MIN},
         (int64_t)INT32_MAX * INT32_MAX + (int64_t)INT32_MIN * INT32_MIN,
         "i32 @ i64 is i64: no 32-bit wrap"},
        {TR_DTYPE_U32, TR_DTYPE_I8, TR_DTYPE_I64, {4000000000, 4000000000}, {-1, 2}, 4000000000,
         "u32 @ i8 is i64"},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct tr_tensor *a = ints(cases[i].da, 1, 2, cases[i].a);
        struct tr_tensor *b = ints(cases[i].db, 2, 1, cases[i].b);
        struct tr_tensor *c = matmul(a, b);
        int64_t got = 0;
        struct tr_tensor *c64 = c ? tr_cast(c, TR_DTYPE_I64) : NULL;

        if (c64)
            got = *(const int64_t *)tr_tensor_data(c64);
        ok(is(c, cases[i].want, 2, (int64_t[]){1, 1}) && got == cases[i].product, "%s (got %lld)",
           cases[i].what, (long long)got);
        tr_release(c64);
        tr_release(c);
        tr_release(b);
        tr_release(a);
    }
}

static void test_vectors(void)
{
    int64_t m[6] = {100, 2, 3, 4, 5, 6}, v2[2] = {3, -1}, v3[3] = {1, 0, 2};
    struct tr_tensor *tm = ints(TR_DTYPE_I8, 2, 3, m);
    struct tr_tensor *t2 = ints(TR_DTYPE_I8, 1, 2, v2), *t3 = ints(TR_DTYPE_I8, 1, 3, v3);
    struct tr_tensor *r2 = tr_select(t2, 0, 0), *r3 = tr_select(t3, 0, 0), *c;

    c = matmul(r2, tm); /* [3*100 - 4, 3*2 - 5, 3*3 - 6] = [296, 1, 3] */
    ok(is(c, TR_DTYPE_I8, 1, (int64_t[]){3}) && values(c, (double[]){40, 1, 3}, 3),
       "i8 vector @ matrix is a vector, wrapping (296 is 40)");
    tr_release(c);
    c = matmul(tm, r3); /* [100 + 6, 4 + 12] */
    ok(is(c, TR_DTYPE_I8, 1, (int64_t[]){2}) && values(c, (double[]){106, 16}, 2),
       "i8 matrix @ vector");
    tr_release(c);
    c = run("dot", (struct tr_arg[]){tensor_arg(r3), tensor_arg(r3)}, 2);
    ok(is(c, TR_DTYPE_I8, 0, NULL) && values(c, (double[]){5}, 1), "dot of i8 vectors");
    tr_release(c);
    {
        struct tr_tensor *row = tr_select(tm, 0, 0), *big = tr_slice(row, 0, 0, 3, 2);
        c = run("dot", (struct tr_arg[]){tensor_arg(big), tensor_arg(big)}, 2);
        /* 100^2 + 3^2 = 10009 = 39 * 256 + 25 */
        ok(is(c, TR_DTYPE_I8, 0, NULL) && values(c, (double[]){25}, 1),
           "dot of a strided i8 vector with itself wraps (10009 is 25)");
        tr_release(c);
        c = run("outer", (struct tr_arg[]){tensor_arg(big), tensor_arg(r2)}, 2);
        ok(is(c, TR_DTYPE_I8, 2, (int64_t[]){2, 2}) &&
               values(c, (double[]){300 - 256, -100, 9, -3}, 4),
           "outer of i8 vectors wraps (300 is 44)");
        tr_release(c);
        tr_release(big);
        tr_release(row);
    }
    {
        uint8_t bv[3] = {1, 0, 1}, cv[2] = {1, 1};
        struct tr_tensor *b3 = tr_from_data(bv, TR_DTYPE_BOOL, 1, (int64_t[]){3}, TR_CPU);
        struct tr_tensor *b2 = tr_from_data(cv, TR_DTYPE_BOOL, 1, (int64_t[]){2}, TR_CPU);
        c = run("outer", (struct tr_arg[]){tensor_arg(b3), tensor_arg(b2)}, 2);
        ok(is(c, TR_DTYPE_BOOL, 2, (int64_t[]){3, 2}) &&
               values(c, (double[]){1, 1, 0, 0, 1, 1}, 6),
           "outer of bool vectors is bool, logical and (PyTorch)");
        tr_release(c);
        c = run("outer", (struct tr_arg[]){tensor_arg(b3), tensor_arg(r2)}, 2);
        ok(is(c, TR_DTYPE_I8, 2, (int64_t[]){3, 2}) &&
               values(c, (double[]){3, -1, 0, 0, 3, -1}, 6),
           "outer of bool and i8 is i8");
        tr_release(c);
        c = run("dot", (struct tr_arg[]){tensor_arg(b3), tensor_arg(b3)}, 2);
        ok(!c && tr_last_status() == TR_ERR_DTYPE && strstr(tr_last_error(), "bool"),
           "dot of bool is refused, as PyTorch does: %s", tr_last_error());
        tr_release(b2);
        tr_release(b3);
    }
    tr_release(r3);
    tr_release(r2);
    tr_release(t3);
    tr_release(t2);
    tr_release(tm);
}

static void test_strided(void)
{
    static const enum tr_dtype dtypes[] = {TR_DTYPE_I8,  TR_DTYPE_U8,  TR_DTYPE_I16, TR_DTYPE_U16,
                                           TR_DTYPE_I32, TR_DTYPE_U32, TR_DTYPE_I64, TR_DTYPE_U64};

    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
        enum tr_dtype d = dtypes[i];
        const char *name = tr_dtype_name(d);
        struct tr_tensor *a = noise(d, 2, (int64_t[]){70, 37}, 1 + i);
        struct tr_tensor *b = noise(d, 2, (int64_t[]){300, 70}, 100 + i);
        struct tr_tensor *at = tr_transpose(a, 0, 1);        /* [37, 70], unit row stride */
        struct tr_tensor *bt = tr_transpose(b, 0, 1);        /* [70, 300] */
        struct tr_tensor *skip = tr_slice(bt, 1, 1, 300, 2); /* every other column */
        struct tr_tensor *neg = tr_slice(at, 0, TR_SLICE_NONE, TR_SLICE_NONE, -1);
        struct tr_tensor *c;

        c = matmul(at, bt);
        ok(c && tr_tensor_dtype(c) == d && exact_product(at, bt, c),
           "%s: transposed @ transposed (several tiles), exact", name);
        tr_release(c);
        c = matmul(neg, skip);
        ok(c && exact_product(neg, skip, c), "%s: reversed rows @ every other column", name);
        tr_release(c);
        tr_release(neg);
        tr_release(skip);
        tr_release(bt);
        tr_release(at);
        tr_release(b);
        tr_release(a);
    }
    {
        /* a broadcast operand: a row repeated (stride 0) */
        struct tr_tensor *a = noise(TR_DTYPE_I32, 2, (int64_t[]){1, 40}, 7);
        struct tr_tensor *wide = tr_expand(a, (int64_t[]){5, 40}, 2);
        struct tr_tensor *b = noise(TR_DTYPE_I32, 2, (int64_t[]){40, 9}, 8);
        struct tr_tensor *c = matmul(wide, b);
        ok(c && exact_product(wide, b, c) && flat(c, 2) == flat(c, 9 + 2),
           "i32: an expanded operand (stride 0 rows)");
        tr_release(c);
        tr_release(b);
        tr_release(wide);
        tr_release(a);
    }
}

static void test_batched(void)
{
    struct tr_tensor *a = noise(TR_DTYPE_I16, 4, (int64_t[]){2, 1, 3, 4}, 3);
    struct tr_tensor *b = noise(TR_DTYPE_U8, 3, (int64_t[]){5, 4, 2}, 4);
    struct tr_tensor *c = matmul(a, b), *v, *q, *p;
    bool good = is(c, TR_DTYPE_I16, 4, (int64_t[]){2, 5, 3, 2});

    for (int64_t i = 0; good && i < 2; i++) {
        for (int64_t j = 0; good && j < 5; j++) {
            struct tr_tensor *ai = tr_select(a, 0, i), *ai0 = tr_select(ai, 0, 0);
            struct tr_tensor *bj = tr_select(b, 0, j), *ci = tr_select(c, 0, i);
            struct tr_tensor *cij = tr_select(ci, 0, j);
            good = exact_product(ai0, bj, cij);
            tr_release(cij);
            tr_release(ci);
            tr_release(bj);
            tr_release(ai0);
            tr_release(ai);
        }
    }
    ok(good, "i16 [2,1,3,4] @ u8 [5,4,2] is i16 [2,5,3,2], the batch broadcast, exact");
    tr_release(c);
    /* a vector against a batch given through permuted views (batch stride 2) */
    v = noise(TR_DTYPE_I64, 1, (int64_t[]){4}, 5);
    p = tr_permute(b, (int[]){1, 0, 2}, 3);
    q = tr_permute(p, (int[]){1, 0, 2}, 3);
    c = run("matmul", (struct tr_arg[]){tensor_arg(v), tensor_arg(q)}, 2);
    good = is(c, TR_DTYPE_I64, 2, (int64_t[]){5, 2});
    for (int64_t j = 0; good && j < 5; j++) {
        struct tr_tensor *vm = tr_reshape_view(v, (int64_t[]){1, 4}, 2), *bj = tr_select(q, 0, j);
        struct tr_tensor *cj = tr_select(c, 0, j), *cm = tr_reshape_view(cj, (int64_t[]){1, 2}, 2);
        good = exact_product(vm, bj, cm);
        tr_release(cm);
        tr_release(cj);
        tr_release(bj);
        tr_release(vm);
    }
    ok(good, "i64 [4] @ u8 [5,4,2] (permuted views) is i64 [5,2]");
    tr_release(c);
    tr_release(q);
    tr_release(p);
    tr_release(v);
    tr_release(b);
    tr_release(a);
}

static void test_empty(void)
{
    struct tr_tensor *a = tr_zeros(TR_DTYPE_I32, 2, (int64_t[]){3, 0}, TR_CPU);
    struct tr_tensor *b = tr_zeros(TR_DTYPE_I32, 2, (int64_t[]){0, 2}, TR_CPU);
    struct tr_tensor *e = tr_zeros(TR_DTYPE_I32, 2, (int64_t[]){0, 3}, TR_CPU);
    struct tr_tensor *c;

    c = matmul(a, b);
    ok(is(c, TR_DTYPE_I32, 2, (int64_t[]){3, 2}) && values(c, (double[]){0, 0, 0, 0, 0, 0}, 6),
       "i32: an empty inner dimension gives zeros");
    tr_release(c);
    c = matmul(e, a);
    ok(is(c, TR_DTYPE_I32, 2, (int64_t[]){0, 0}), "i32: no rows, an empty result");
    tr_release(c);
    tr_release(e);
    tr_release(b);
    tr_release(a);
}

static void test_threads(void)
{
#ifdef _OPENMP
    struct tr_tensor *a = noise(TR_DTYPE_I32, 2, (int64_t[]){150, 300}, 9);
    struct tr_tensor *b = noise(TR_DTYPE_I32, 2, (int64_t[]){300, 600}, 10);
    struct tr_tensor *c1, *c4;
    int saved = tr_num_threads();

    tr_set_num_threads(1);
    c1 = matmul(a, b);
    tr_set_num_threads(4);
    c4 = matmul(a, b);
    tr_set_num_threads(saved);
    ok(c1 && c4 && memcmp(tr_tensor_data(c1), tr_tensor_data(c4), tr_tensor_nbytes(c1)) == 0 &&
           exact_product(a, b, c4),
       "i32 150x300 @ 300x600 (3x3 tiles): the same, exact result with 1 and 4 threads");
    tr_release(c4);
    tr_release(c1);
    tr_release(b);
    tr_release(a);
#else
    ok(true, "no OpenMP: one thread");
#endif
}

static void test_bool_sort(void)
{
    uint8_t v[6] = {1, 0, 1, 0, 0, 1};
    struct tr_tensor *x = tr_from_data(v, TR_DTYPE_BOOL, 1, (int64_t[]){6}, TR_CPU);
    struct tr_tensor *r[TR_OP_MAX_RESULTS] = {NULL};

    run2("sort", (struct tr_arg[]){tensor_arg(x)}, 1, r);
    ok(is(r[0], TR_DTYPE_BOOL, 1, (int64_t[]){6}) &&
           values(r[0], (double[]){0, 0, 0, 1, 1, 1}, 6) &&
           values(r[1], (double[]){1, 3, 4, 0, 2, 5}, 6),
       "sort of bool: false before true, stable");
    tr_release(r[1]);
    tr_release(r[0]);
    memset(r, 0, sizeof r);
    run2("sort", (struct tr_arg[]){tensor_arg(x), int_arg(-1), bool_arg(true)}, 3, r);
    ok(r[0] && values(r[0], (double[]){1, 1, 1, 0, 0, 0}, 6) &&
           values(r[1], (double[]){0, 2, 5, 1, 3, 4}, 6),
       "descending: true first, still stable");
    tr_release(r[1]);
    tr_release(r[0]);
    memset(r, 0, sizeof r);
    run2("topk", (struct tr_arg[]){tensor_arg(x), int_arg(2)}, 2, r);
    ok(is(r[0], TR_DTYPE_BOOL, 1, (int64_t[]){2}) && values(r[0], (double[]){1, 1}, 2) &&
           values(r[1], (double[]){0, 2}, 2),
       "topk of bool: the first trues");
    tr_release(r[1]);
    tr_release(r[0]);
    memset(r, 0, sizeof r);
    run2("topk", (struct tr_arg[]){tensor_arg(x), int_arg(4), int_arg(0), bool_arg(false)}, 4, r);
    ok(r[0] && values(r[0], (double[]){0, 0, 0, 1}, 4) && values(r[1], (double[]){1, 3, 4, 0}, 4),
       "topk smallest of bool: the falses, then the first true");
    tr_release(r[1]);
    tr_release(r[0]);
    {
        /* argsort along dim 0 of a transposed view */
        uint8_t m[6] = {1, 0, 0, 1, 1, 0}; /* [2,3]; its transpose [3,2] */
        struct tr_tensor *t = tr_from_data(m, TR_DTYPE_BOOL, 2, (int64_t[]){2, 3}, TR_CPU);
        struct tr_tensor *tt = tr_transpose(t, 0, 1); /* [[1,1],[0,1],[0,0]] */
        struct tr_tensor *ix = run("argsort", (struct tr_arg[]){tensor_arg(tt), int_arg(0)}, 2);
        ok(is(ix, TR_DTYPE_I64, 2, (int64_t[]){3, 2}) &&
               values(ix, (double[]){1, 2, 2, 0, 0, 1}, 6),
           "argsort of a transposed bool view along dim 0");
        tr_release(ix);
        tr_release(tt);
        tr_release(t);
    }
    tr_release(x);
}

struct counting_file {
    int stores;
};

static int count_reserve(void *ctx)
{
    (void)ctx;
    return 0;
}

static int count_store(void *ctx, uint64_t offset, const void *src, size_t n)
{
    (void)offset;
    (void)src;
    (void)n;
    ((struct counting_file *)ctx)->stores++;
    return 0;
}

static void test_negative_power(void)
{
    int64_t base[3] = {2, 3, 4}, negative[3] = {1, -1, 2}, positive[3] = {1, 0, 2};
    struct tr_tensor *x = tr_from_data(base, TR_DTYPE_I64, 1, (int64_t[]){3}, TR_CPU);
    struct tr_tensor *wide = tr_from_data(negative, TR_DTYPE_I64, 1, (int64_t[]){3}, TR_CPU);
    struct tr_tensor *e = tr_cast(wide, TR_DTYPE_I32), *p, *f, *r;
    struct tr_tensor *pw = tr_from_data(positive, TR_DTYPE_I64, 1, (int64_t[]){3}, TR_CPU);

    p = tr_cast(pw, TR_DTYPE_I8);
    r = run("pow", (struct tr_arg[]){tensor_arg(x), tensor_arg(e)}, 2);
    ok(!r && tr_last_status() == TR_ERR_INVALID && strncmp(tr_last_error(), "pow:", 4) == 0 &&
           strstr(tr_last_error(), "negative integer powers are not allowed"),
       "i64 ** an i32 tensor holding -1 is refused: %s", tr_last_error());
    r = run("pow", (struct tr_arg[]){tensor_arg(x), int_arg(-2)}, 2);
    ok(!r && tr_last_status() == TR_ERR_DTYPE && strstr(tr_last_error(), "negative"),
       "... and to the constant -2, refused by the op's rule before it runs");
    {
        /* refused before anything is written to the offered file */
        int64_t memory[3] = {7, 7, 7};
        struct tr_blob blob = {.data = memory, .nbytes = sizeof memory};
        struct tr_tensor *d = tr_from_blob(&blob, TR_DTYPE_I64, 1, (int64_t[]){3}, NULL, TR_CPU);
        struct counting_file cf = {0};
        struct tr_sink sink = {.reserve = count_reserve, .store = count_store, .ctx = &cf};
        struct tr_dest into = {.tensor = d, .sink = &sink};
        r = run_into("pow", (struct tr_arg[]){tensor_arg(x), tensor_arg(e)}, 2, &into);
        ok(!r && cf.stores == 0 && memory[0] == 7 && memory[1] == 7 && memory[2] == 7,
           "nothing is stored into a destination first");
        tr_release(d);
    }
    r = run("pow", (struct tr_arg[]){tensor_arg(x), tensor_arg(p)}, 2);
    ok(is(r, TR_DTYPE_I64, 1, (int64_t[]){3}) && values(r, (double[]){2, 1, 16}, 3),
       "a non-negative i8 exponent is computed");
    tr_release(r);
    f = tr_cast(x, TR_DTYPE_F32);
    r = run("pow", (struct tr_arg[]){tensor_arg(f), tensor_arg(e)}, 2);
    ok(is(r, TR_DTYPE_F32, 1, (int64_t[]){3}) &&
           values(r, (double[]){2, (double)powf(3, -1), 16}, 3),
       "a float base takes a negative integer exponent");
    tr_release(r);
    {
        /* a transposed exponent whose only negative value comes last */
        int64_t ev[8] = {0, 1, 2, 3, 1, 1, 1, -1}, bv[4] = {2, 3, 4, 5};
        struct tr_tensor *ew = tr_from_data(ev, TR_DTYPE_I64, 2, (int64_t[]){4, 2}, TR_CPU);
        struct tr_tensor *et = tr_transpose(ew, 0, 1); /* [2,4]; -1 at [1,3] */
        struct tr_tensor *x4 = tr_from_data(bv, TR_DTYPE_I64, 1, (int64_t[]){4}, TR_CPU);
        r = run("pow", (struct tr_arg[]){tensor_arg(x4), tensor_arg(et)}, 2);
        ok(!r && tr_last_status() == TR_ERR_INVALID,
           "found in a transposed exponent, the base broadcast against it: %s", tr_last_error());
        tr_release(x4);
        tr_release(et);
        tr_release(ew);
    }
    tr_release(f);
    tr_release(p);
    tr_release(pw);
    tr_release(e);
    tr_release(wide);
    tr_release(x);
}

int main(void)
{
    test_known_wraps();
    test_vectors();
    test_strided();
    test_batched();
    test_empty();
    test_threads();
    test_bool_sort();
    test_negative_power();
    return done_testing();
}
