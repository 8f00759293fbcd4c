/*
 * test_dest.c - results' destinations (struct tr_dest in tensorrun_ops.h):
 * caller memory, a sink that receives every byte once, kernels that cannot
 * use the destination and say so by making the result in the pool, a
 * temporary of the result's shape that stays out of it, results computed
 * in place over an operand (and refused where that would be wrong), and
 * the engine's thread count.
 */
#include "config.h" /* _GNU_SOURCE: setenv */

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "op_test.h"
#include "tap.h"

static uint64_t allocs(void)
{
    struct tr_memory_stats st;

    tr_memory_stats(TR_CPU, &st);
    return st.alloc_count;
}

/* n f32 values made from i, spread over [-4, 4). */
static float *values_f32(int64_t n)
{
    float *v = malloc((size_t)n * sizeof *v);

    for (int64_t i = 0; v && i < n; i++)
        v[i] = (float)((i * 7919) % 8000) / 1000.0f - 4.0f;
    return v;
}

/* A tensor over caller memory (nothing of the pool). */
static struct tr_tensor *over(void *memory, size_t nbytes, enum tr_dtype dtype, int ndim,
                              const int64_t *shape, unsigned flags)
{
    struct tr_blob blob = {.data = memory, .nbytes = nbytes, .flags = flags};

    return tr_from_blob(&blob, dtype, ndim, shape, NULL, TR_CPU);
}

static bool same_bytes(const struct tr_tensor *a, const struct tr_tensor *b)
{
    return a && b && tr_tensor_nbytes(a) == tr_tensor_nbytes(b) &&
           memcmp(tr_tensor_data(a), tr_tensor_data(b), (size_t)tr_tensor_nbytes(a)) == 0;
}

/* ------------------------------------------------------------ memory */

/* Ops of several kinds compute straight into caller memory: elementwise,
 * create, reduce, matmul and row-wise ones. */
static void test_into_memory(void)
{
    int64_t shape[2] = {3, 5}, rows[1] = {3}, square[2] = {5, 5};
    float *v = values_f32(15), memory[25];
    struct tr_tensor *x = tr_from_data(v, TR_DTYPE_F32, 2, shape, TR_CPU), *d, *r, *plain;
    struct tr_dest dest;
    uint64_t before;

    d = over(memory, sizeof memory, TR_DTYPE_F32, 2, shape, 0);
    dest = (struct tr_dest){.tensor = d};
    plain = run("mul", (struct tr_arg[]){tensor_arg(x), tensor_arg(x)}, 2);
    before = allocs();
    r = run_into("mul", (struct tr_arg[]){tensor_arg(x), tensor_arg(x)}, 2, &dest);
    ok(r && tr_tensor_shares_storage(r, d) && allocs() == before && same_bytes(r, plain),
       "mul is computed into caller memory, allocating nothing, with the pool's bits");
    tr_release(r);
    tr_release(plain);
    plain = run("softmax", (struct tr_arg[]){tensor_arg(x)}, 1);
    r = run_into("softmax", (struct tr_arg[]){tensor_arg(x)}, 1, &dest);
    ok(r && tr_tensor_shares_storage(r, d) && same_bytes(r, plain), "so is softmax");
    tr_release(r);
    tr_release(plain);
    tr_release(d);

    d = over(memory, 3 * sizeof *memory, TR_DTYPE_F32, 1, rows, 0);
    dest = (struct tr_dest){.tensor = d};
    plain = run("sum", (struct tr_arg[]){tensor_arg(x), int_arg(1)}, 2);
    r = run_into("sum", (struct tr_arg[]){tensor_arg(x), int_arg(1)}, 2, &dest);
    ok(r && tr_tensor_shares_storage(r, d) && same_bytes(r, plain), "a reduction along rows");
    tr_release(r);
    tr_release(plain);
    tr_release(d);

    d = over(memory, sizeof memory, TR_DTYPE_F32, 2, square, 0);
    dest = (struct tr_dest){.tensor = d};
    struct tr_tensor *xt = tr_transpose(x, 0, 1);
    plain = run("matmul", (struct tr_arg[]){tensor_arg(xt), tensor_arg(x)}, 2);
    r = run_into("matmul", (struct tr_arg[]){tensor_arg(xt), tensor_arg(x)}, 2, &dest);
    ok(r && tr_tensor_shares_storage(r, d) && same_bytes(r, plain), "matmul");
    tr_release(r);
    tr_release(plain);
    r = run_into("eye", (struct tr_arg[]){int_arg(5)}, 1, &dest);
    ok(r && tr_tensor_shares_storage(r, d) && memory[0] == 1 && memory[1] == 0 &&
           memory[24] == 1,
       "and an op that makes a tensor (eye)");
    tr_release(r);
    tr_release(xt);
    tr_release(d);
    tr_release(x);
    free(v);
}

/* -------------------------------------------------------------- sinks */

/* A sink that counts how often each byte of the result arrives. */
struct counting_sink {
    size_t size;
    unsigned char *got;      /* the bytes stored */
    atomic_uchar *times;     /* how often each byte was stored */
    atomic_int stores, reserves, outside;
};

static int counting_store(void *ctx, uint64_t offset, const void *src, size_t n)
{
    struct counting_sink *c = ctx;

    atomic_fetch_add(&c->stores, 1);
    if (offset > c->size || n > c->size - offset) {
        atomic_fetch_add(&c->outside, 1);
        return EINVAL;
    }
    memcpy(c->got + offset, src, n);
    for (size_t i = 0; i < n; i++)
        atomic_fetch_add(&c->times[offset + i], 1);
    return 0;
}

static int counting_reserve(void *ctx)
{
    struct counting_sink *c = ctx;

    atomic_fetch_add(&c->reserves, 1);
    return 0;
}

/* Runs op name on args into a counting sink over poisoned memory, and
 * whether it went as asked, its bytes equal to the pool's result: when
 * streamed, every byte arrived exactly once, by calls, and nothing went
 * through memory or was reserved; else the sink was reserved once and
 * the result computed into its memory, with no call. */
static bool into_sink(const char *name, const struct tr_arg *args, int nargs, bool streamed)
{
    struct tr_tensor *plain = run(name, args, nargs), *d = NULL, *r = NULL;
    size_t size = plain ? (size_t)tr_tensor_nbytes(plain) : 0;
    unsigned char *memory = malloc(size + 1);
    struct counting_sink c = {.size = size};
    struct tr_sink sink = {.store = counting_store, .reserve = counting_reserve, .ctx = &c};
    bool good = plain && memory;

    c.got = calloc(size + 1, 1);
    c.times = calloc(size + 1, sizeof *c.times);
    good = good && c.got && c.times;
    if (good) {
        memset(memory, 0xa5, size);
        d = over(memory, size, tr_tensor_dtype(plain), tr_tensor_ndim(plain),
                 tr_tensor_shape(plain), 0);
        struct tr_dest dest = {.tensor = d, .sink = &sink};
        r = run_into(name, args, nargs, &dest);
        good = r && tr_tensor_shares_storage(r, d) && c.outside == 0;
    }
    if (good && !streamed)
        good = c.reserves == 1 && c.stores == 0 &&
               memcmp(memory, tr_tensor_data(plain), size) == 0;
    if (good && streamed)
        good = c.reserves == 0 && c.stores > 1 && memcmp(c.got, tr_tensor_data(plain), size) == 0;
    for (size_t i = 0; good && streamed && i < size; i++)
        good = atomic_load(&c.times[i]) == 1 && memory[i] == 0xa5;
    tr_release(r);
    tr_release(d);
    tr_release(plain);
    free(c.got);
    free((void *)c.times);
    free(memory);
    return good;
}

/* matmul and cdist hand a result over a band of 256 rows at a time when
 * a band fits a thread's 1 MiB and there are bands for both threads;
 * otherwise they compute into the reserved destination. */
static void test_products_into_sink(void)
{
    int64_t sa[2] = {1000, 96}, sb[2] = {96, 300}, sp[2] = {700, 32}, sq[2] = {300, 32};
    int64_t sw[2] = {96, 1100}, ba[3] = {3, 300, 40}, bb[3] = {3, 40, 50};
    int64_t sz[2] = {600, 0}, sz2[2] = {0, 40}, sb2[2] = {96, 600};
    float *v = values_f32(1000 * 1100);
    struct tr_tensor *a = tr_from_data(v, TR_DTYPE_F32, 2, sa, TR_CPU);
    struct tr_tensor *b = tr_from_data(v, TR_DTYPE_F32, 2, sb, TR_CPU);
    struct tr_tensor *p = tr_from_data(v, TR_DTYPE_F32, 2, sp, TR_CPU);
    struct tr_tensor *q = tr_from_data(v + 5, TR_DTYPE_F32, 2, sq, TR_CPU);
    struct tr_tensor *w = tr_from_data(v, TR_DTYPE_F32, 2, sw, TR_CPU);
    struct tr_tensor *x = tr_from_data(v, TR_DTYPE_F32, 3, ba, TR_CPU);
    struct tr_tensor *y = tr_from_data(v + 3, TR_DTYPE_F32, 3, bb, TR_CPU);
    struct tr_tensor *z = tr_from_data(v, TR_DTYPE_F32, 2, sz, TR_CPU);
    struct tr_tensor *z2 = tr_from_data(v, TR_DTYPE_F32, 2, sz2, TR_CPU);
    struct tr_tensor *b2 = tr_from_data(v + 1, TR_DTYPE_F32, 2, sb2, TR_CPU);
    struct tr_tensor *ah = tr_cast(a, TR_DTYPE_F16);
    struct tr_tensor *small = tr_slice(a, 0, 0, 256, 1);

    tr_set_num_threads(2);
    ok(into_sink("matmul", (struct tr_arg[]){tensor_arg(a), tensor_arg(b)}, 2, true),
       "matmul: every byte reaches the sink once, a band a call, none through memory");
    ok(into_sink("matmul", (struct tr_arg[]){tensor_arg(ah), tensor_arg(b)}, 2, true),
       "an f16 product too, rounded from the tile buffers into the bands");
    ok(into_sink("matmul", (struct tr_arg[]){tensor_arg(x), tensor_arg(y)}, 2, true),
       "a batched product, bands of each batch");
    ok(into_sink("cdist", (struct tr_arg[]){tensor_arg(p), tensor_arg(q), float_arg(2)}, 3,
                 true),
       "cdist through the product, the distances in the bands");
    ok(into_sink("matmul", (struct tr_arg[]){tensor_arg(z), tensor_arg(z2)}, 2, true),
       "an empty inner dimension: bands of zeros");
    ok(into_sink("matmul", (struct tr_arg[]){tensor_arg(a), tensor_arg(w)}, 2, false),
       "rows of 1100 f32 (a band over 1 MiB): reserved, computed into the memory");
    ok(into_sink("matmul", (struct tr_arg[]){tensor_arg(small), tensor_arg(b2)}, 2, false),
       "one band (of two tiles) for two threads: the same");
    ok(into_sink("matmul", (struct tr_arg[]){tensor_arg(a), tensor_arg(b)}, 2, false) == false,
       "(and the check tells a streamed result from a computed one)");
    tr_set_num_threads(0);
    tr_release(small);
    tr_release(ah);
    tr_release(b2);
    tr_release(z2);
    tr_release(z);
    tr_release(y);
    tr_release(x);
    tr_release(w);
    tr_release(q);
    tr_release(p);
    tr_release(b);
    tr_release(a);
    free(v);
}

static void test_into_sink(void)
{
    int64_t shape[2] = {64, 4099}, n = 64 * 4099;
    float *v = values_f32(n);
    struct tr_tensor *x = tr_from_data(v, TR_DTYPE_F32, 2, shape, TR_CPU);
    struct tr_tensor *h = tr_cast(x, TR_DTYPE_F16), *xt = tr_transpose(x, 0, 1);

    tr_set_num_threads(2); /* two threads' stages, each handed over by calls */
    ok(into_sink("exp", (struct tr_arg[]){tensor_arg(x)}, 1, true),
       "exp: every byte reaches the sink once, none goes through memory");
    ok(into_sink("add", (struct tr_arg[]){tensor_arg(h), float_arg(1)}, 2, true),
       "an f16 sum too");
    ok(into_sink("mul", (struct tr_arg[]){tensor_arg(xt), tensor_arg(xt)}, 2, true),
       "a product of transposed views too");
    ok(into_sink("softmax", (struct tr_arg[]){tensor_arg(x), int_arg(-1)}, 2, true),
       "softmax along rows, a stage of rows a call");
    tr_set_num_threads(0);
    tr_release(xt);
    tr_release(h);
    tr_release(x);
    free(v);
}

/* --------------------------------------------------- not taken, or not all */

/* A kernel that makes its result itself (sort, concat), or a destination
 * that does not fit: the result is made in the pool, the destination is
 * untouched, and tr_tensor_shares_storage tells the caller. */
static void test_not_taken(void)
{
    float v[6] = {3, 1, 2, 6, 5, 4}, memory[6] = {9, 9, 9, 9, 9, 9};
    int64_t shape[1] = {6}, two[2] = {2, 3};
    struct tr_tensor *x = tr_from_data(v, TR_DTYPE_F32, 1, shape, TR_CPU);
    struct tr_tensor *d = over(memory, sizeof memory, TR_DTYPE_F32, 1, shape, 0), *r, *r2[2];
    struct tr_dest dest = {.tensor = d};
    bool untouched = true;

    r = run_dest("sort", (struct tr_arg[]){tensor_arg(x)}, 1, &dest, r2);
    for (int i = 0; i < 6; i++)
        untouched = untouched && memory[i] == 9;
    ok(r && !tr_tensor_shares_storage(r, d) && untouched && flat(r, 0) == 1 && flat(r, 5) == 6,
       "sort makes its values in the pool and leaves the destination alone");
    if (r) {
        tr_release(r2[0]);
        tr_release(r2[1]);
    }
    struct tr_tensor *half = tr_slice(x, 0, 0, 3, 1);
    r = run_into("concat", (struct tr_arg[]){
                               {.value = {.kind = TR_VALUE_LIST, .count = 2},
                                .items = (struct tr_arg[]){tensor_arg(half), tensor_arg(half)}}},
                 1, &dest);
    ok(r && !tr_tensor_shares_storage(r, d) && memory[0] == 9 && flat(r, 3) == 3,
       "so does concat");
    tr_release(r);
    tr_release(half);
    struct tr_tensor *d2 = tr_reshape_view(d, two, 2);
    r = run_into("add", (struct tr_arg[]){tensor_arg(x), tensor_arg(x)}, 2,
                 &(struct tr_dest){.tensor = d2});
    ok(r && !tr_tensor_shares_storage(r, d) && memory[0] == 9 && flat(r, 0) == 6,
       "a destination of another shape is not taken");
    tr_release(r);
    tr_release(d2);
    r = run_into("lt", (struct tr_arg[]){tensor_arg(x), int_arg(3)}, 2, &dest);
    ok(r && !tr_tensor_shares_storage(r, d) && memory[0] == 9 &&
           tr_tensor_dtype(r) == TR_DTYPE_BOOL,
       "nor one of another dtype");
    tr_release(r);
    struct tr_tensor *ro = over(memory, sizeof memory, TR_DTYPE_F32, 1, shape, TR_FLAG_READONLY);
    r = run_into("exp", (struct tr_arg[]){tensor_arg(x)}, 1, &(struct tr_dest){.tensor = ro});
    ok(r && !tr_tensor_shares_storage(r, ro) && memory[0] == 9, "nor read-only memory");
    tr_release(r);
    tr_release(ro);
    tr_release(d);
    tr_release(x);
}

/* add(i32, f16) rounds its i32 operand to an f16 temporary of the
 * result's dtype and shape first: that temporary comes from the pool, and
 * only the final sum goes to the destination. */
static void test_temporary_stays_out(void)
{
    int32_t iv[5] = {1, 2, 3, 70000, -5};
    uint16_t memory[5] = {0};
    int64_t shape[1] = {5};
    struct tr_tensor *i = tr_from_data(iv, TR_DTYPE_I32, 1, shape, TR_CPU);
    struct tr_tensor *h = tr_zeros(TR_DTYPE_F16, 1, shape, TR_CPU);
    struct tr_tensor *d = over(memory, sizeof memory, TR_DTYPE_F16, 1, shape, 0), *r, *plain;
    struct tr_dest dest = {.tensor = d};
    uint64_t before;

    plain = run("add", (struct tr_arg[]){tensor_arg(i), tensor_arg(h)}, 2);
    before = allocs();
    r = run_into("add", (struct tr_arg[]){tensor_arg(i), tensor_arg(h)}, 2, &dest);
    ok(r && tr_tensor_shares_storage(r, d) && same_bytes(r, plain) && allocs() == before + 1,
       "the f16 copy of the i32 operand is a pool temporary, the sum is the destination's");
    ok(r && flat(r, 2) == 3 && flat(r, 3) == INFINITY, "with the promoted values (70000 is inf)");
    tr_release(r);
    tr_release(plain);
    tr_release(d);
    tr_release(h);
    tr_release(i);
}

/* ------------------------------------------------------------ in place */

static void test_in_place(void)
{
    int64_t shape[1] = {8}, col[2] = {8, 1};
    float *v = values_f32(8);
    struct tr_tensor *t = tr_from_data(v, TR_DTYPE_F32, 1, shape, TR_CPU), *r, *plain;
    struct tr_dest self = {.tensor = t};
    uint64_t before;

    plain = run("mul", (struct tr_arg[]){tensor_arg(t), float_arg(2)}, 2);
    before = allocs();
    r = run_into("mul", (struct tr_arg[]){tensor_arg(t), float_arg(2)}, 2, &self);
    ok(r && tr_tensor_shares_storage(r, t) && allocs() == before && same_bytes(r, plain),
       "x * 2 into x itself: in place, nothing allocated");
    tr_release(r);
    tr_release(plain);
    plain = run("add", (struct tr_arg[]){tensor_arg(t), tensor_arg(t)}, 2);
    r = run_into("add", (struct tr_arg[]){tensor_arg(t), tensor_arg(t)}, 2, &self);
    ok(r && tr_tensor_shares_storage(r, t) && same_bytes(r, plain), "x + x into x");
    tr_release(r);
    tr_release(plain);
    struct tr_tensor *h = tr_cast(t, TR_DTYPE_F16);
    plain = run("exp", (struct tr_arg[]){tensor_arg(h)}, 1);
    r = run_into("exp", (struct tr_arg[]){tensor_arg(h)}, 1, &(struct tr_dest){.tensor = h});
    ok(r && tr_tensor_shares_storage(r, h) && same_bytes(r, plain),
       "exp of f16 into itself (computed in f32 a block at a time)");
    tr_release(r);
    tr_release(plain);
    tr_release(h);

    /* overlapping, but not the same elements: each output element would
     * read an input another one has overwritten */
    struct tr_tensor *lo = tr_slice(t, 0, 0, 4, 1), *hi = tr_slice(t, 0, 1, 5, 1);
    plain = run("add", (struct tr_arg[]){tensor_arg(lo), float_arg(1)}, 2);
    r = run_into("add", (struct tr_arg[]){tensor_arg(lo), float_arg(1)}, 2,
                 &(struct tr_dest){.tensor = hi});
    ok(r && !tr_tensor_shares_storage(r, t) && same_bytes(r, plain),
       "an operand that overlaps the destination shifted: computed in the pool");
    tr_release(r);
    tr_release(plain);
    struct tr_tensor *beside = tr_slice(t, 0, 4, 8, 1);
    r = run_into("add", (struct tr_arg[]){tensor_arg(lo), float_arg(1)}, 2,
                 &(struct tr_dest){.tensor = beside});
    ok(r && tr_tensor_shares_storage(r, t) && flat(r, 0) == flat(lo, 0) + 1,
       "one beside it, sharing no byte, is written");
    tr_release(r);
    tr_release(beside);
    tr_release(hi);
    tr_release(lo);

    /* not elementwise: a row-wise op reads a line again after writing it */
    plain = run("cumsum", (struct tr_arg[]){tensor_arg(t), int_arg(0)}, 2);
    r = run_into("cumsum", (struct tr_arg[]){tensor_arg(t), int_arg(0)}, 2, &self);
    ok(r && !tr_tensor_shares_storage(r, t) && same_bytes(r, plain),
       "cumsum over its own operand: computed in the pool");
    tr_release(r);
    tr_release(plain);
    struct tr_tensor *m = tr_reshape_view(t, col, 2);
    plain = run("softmax", (struct tr_arg[]){tensor_arg(m), int_arg(0)}, 2);
    r = run_into("softmax", (struct tr_arg[]){tensor_arg(m), int_arg(0)}, 2,
                 &(struct tr_dest){.tensor = m});
    ok(r && !tr_tensor_shares_storage(r, t) && same_bytes(r, plain), "softmax too");
    tr_release(r);
    tr_release(plain);
    tr_release(m);
    tr_release(t);
    free(v);
}

/* ------------------------------------------------------------- threads */

static void test_threads(void)
{
    int64_t shape[2] = {512, 2048};
    float *v = values_f32(512 * 2048);
    struct tr_tensor *x = tr_from_data(v, TR_DTYPE_F32, 2, shape, TR_CPU), *one, *two;

    ok(tr_set_num_threads(2) == TR_OK && tr_num_threads() == 2, "the thread count reads back");
    ok(tr_set_num_threads(-1) == TR_ERR_INVALID && tr_num_threads() == 2,
       "a negative count is refused and changes nothing");
    ok(tr_set_num_threads(0) == TR_OK && tr_num_threads() == 3,
       "0 is the default, OMP_NUM_THREADS (set to 3 before the first use)");
    tr_set_num_threads(1);
    one = run("sum", (struct tr_arg[]){tensor_arg(x)}, 1);
    tr_set_num_threads(2);
    two = run("sum", (struct tr_arg[]){tensor_arg(x)}, 1);
    ok(same_bytes(one, two), "sum: the same bits on 1 and 2 threads");
    tr_release(one);
    tr_release(two);
    tr_set_num_threads(1);
    one = run("softmax", (struct tr_arg[]){tensor_arg(x), int_arg(0)}, 2);
    tr_set_num_threads(2);
    two = run("softmax", (struct tr_arg[]){tensor_arg(x), int_arg(0)}, 2);
    ok(same_bytes(one, two), "softmax along columns: the same bits on 1 and 2 threads");
    tr_release(one);
    tr_release(two);
    tr_set_num_threads(0);
    tr_release(x);
    free(v);
}

int main(void)
{
    /* read by the engine when it first needs its default thread count
     * (test_threads); OpenMP itself read it before main */
    setenv("OMP_NUM_THREADS", "3,1", 1);
    test_into_memory();
    test_into_sink();
    test_products_into_sink();
    test_not_taken();
    test_temporary_stays_out();
    test_in_place();
    test_threads();
    return done_testing();
}
