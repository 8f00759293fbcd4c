/*
 * test_create.c - the creation ops through tr_op_run: zeros, ones, full,
 * arange, linspace and eye (shapes, dtypes, values); rand and randn
 * exactly as tensorrun-pipeline(5), RANDOM NUMBERS defines them (Philox-4x32-10 against
 * Random123's known answers, the first elements for seeds 0 and 42 from
 * Random123 by hand, pinned bits of randn, statistics, thread counts);
 * and the accuracy of philox_math.h's own log and cos.
 */
#include <math.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <Random123/philox.h>

#include "philox_math.h"
#include "tensorrun_ops.h"
#include "op_test.h"
#include "tap.h"

/* A shape argument: a list of n integers (items the caller keeps). */
static struct tr_arg shape_arg(struct tr_arg *items, const int64_t *dims, int n)
{
    for (int i = 0; i < n; i++)
        items[i] = int_arg(dims[i]);
    return list_arg(items, (size_t)n);
}

/* rand or randn of shape [n] with seed and dtype. */
static struct tr_tensor *draw(const char *op, int64_t n, int64_t seed, enum tr_dtype dtype)
{
    struct tr_arg items[1];

    return run(op, (struct tr_arg[]){shape_arg(items, &n, 1), int_arg(seed), dtype_arg(dtype)},
               3);
}

/* ------------------------------------------------------------- filling */

static void test_fill(void)
{
    struct tr_arg items[3];
    int64_t s23[2] = {2, 3};
    struct tr_tensor *t;

    t = run("zeros", (struct tr_arg[]){shape_arg(items, s23, 2)}, 1);
    ok(is(t, TR_DTYPE_F32, 2, s23) && flat(t, 0) == 0 && flat(t, 5) == 0,
       "zeros([2,3]) is f32 zeros");
    tr_release(t);
    t = run("ones", (struct tr_arg[]){shape_arg(items, s23, 2), dtype_arg(TR_DTYPE_F16)}, 2);
    ok(is(t, TR_DTYPE_F16, 2, s23) && flat(t, 0) == 1 && flat(t, 5) == 1, "ones(f16)");
    tr_release(t);
    t = run("ones", (struct tr_arg[]){int_arg(4), dtype_arg(TR_DTYPE_BOOL)}, 2);
    ok(is(t, TR_DTYPE_BOOL, 1, (int64_t[]){4}) && flat(t, 3) == 1, "ones(4, bool)");
    tr_release(t);
    t = run("zeros", (struct tr_arg[]){shape_arg(items, NULL, 0)}, 1);
    ok(is(t, TR_DTYPE_F32, 0, NULL) && flat(t, 0) == 0, "zeros([]) is a scalar");
    tr_release(t);
    t = run("full", (struct tr_arg[]){shape_arg(items, s23, 2), int_arg(7)}, 2);
    ok(is(t, TR_DTYPE_I64, 2, s23) && flat(t, 4) == 7, "full with an integer is i64");
    tr_release(t);
    t = run("full", (struct tr_arg[]){shape_arg(items, s23, 2), float_arg(2.5)}, 2);
    ok(is(t, TR_DTYPE_F32, 2, s23) && flat(t, 1) == 2.5, "full with a number is f32");
    tr_release(t);
    t = run("full", (struct tr_arg[]){int_arg(2), bool_arg(true)}, 2);
    ok(is(t, TR_DTYPE_BOOL, 1, (int64_t[]){2}) && flat(t, 1) == 1, "full with true is bool");
    tr_release(t);
    t = run("full", (struct tr_arg[]){int_arg(3), float_arg(-2.7), dtype_arg(TR_DTYPE_I32)}, 3);
    ok(is(t, TR_DTYPE_I32, 1, (int64_t[]){3}) && flat(t, 2) == -2,
       "full(-2.7, dtype=i32) truncates to -2");
    tr_release(t);
    t = run("full", (struct tr_arg[]){int_arg(3), float_arg(0.1), dtype_arg(TR_DTYPE_F64)}, 3);
    ok(is(t, TR_DTYPE_F64, 1, (int64_t[]){3}) && flat(t, 0) == 0.1, "full(0.1, f64) is 0.1");
    tr_release(t);
    {
        int64_t big = 100000;
        t = run("full", (struct tr_arg[]){shape_arg(items, &big, 1), float_arg(3),
                                          dtype_arg(TR_DTYPE_BF16)},
                3);
        ok(is(t, TR_DTYPE_BF16, 1, &big) && flat(t, 0) == 3 && flat(t, big - 1) == 3,
           "full of 100000 bf16 (filled by all threads)");
        tr_release(t);
    }
    {
        int64_t bad = -1;
        t = run("zeros", (struct tr_arg[]){shape_arg(items, &bad, 1)}, 1);
        ok(!t && strncmp(tr_last_error(), "zeros:", 6) == 0, "a negative size: %s",
           tr_last_error());
    }
}

static void test_ranges(void)
{
    struct tr_tensor *t;

    t = run("arange", (struct tr_arg[]){int_arg(5)}, 1);
    ok(is(t, TR_DTYPE_I64, 1, (int64_t[]){5}) && values(t, (double[]){0, 1, 2, 3, 4}, 5),
       "arange(5) is i64 0..4");
    tr_release(t);
    t = run("arange", (struct tr_arg[]){int_arg(10), int_arg(0), int_arg(-3)}, 3);
    ok(is(t, TR_DTYPE_I64, 1, (int64_t[]){4}) && values(t, (double[]){10, 7, 4, 1}, 4),
       "arange(10, 0, -3)");
    tr_release(t);
    t = run("arange", (struct tr_arg[]){int_arg(1), int_arg(2), float_arg(0.25)}, 3);
    ok(is(t, TR_DTYPE_F32, 1, (int64_t[]){4}) && values(t, (double[]){1, 1.25, 1.5, 1.75}, 4),
       "arange(1, 2, 0.25) is f32");
    tr_release(t);
    t = run("arange", (struct tr_arg[]){float_arg(0), float_arg(1), float_arg(0.1),
                                        dtype_arg(TR_DTYPE_F64)},
            4);
    ok(is(t, TR_DTYPE_F64, 1, (int64_t[]){10}) && flat(t, 3) == 3 * 0.1 && flat(t, 9) == 9 * 0.1,
       "arange(0, 1, 0.1, f64): start + i * step");
    tr_release(t);
    t = run("arange", (struct tr_arg[]){int_arg(3), int_arg(3)}, 2);
    ok(is(t, TR_DTYPE_I64, 1, (int64_t[]){0}), "arange(3, 3) is empty");
    tr_release(t);
    {
        int64_t n = 70000;
        t = run("arange", (struct tr_arg[]){int_arg(n), none_arg(), int_arg(1),
                                            dtype_arg(TR_DTYPE_I32)},
                4);
        ok(is(t, TR_DTYPE_I32, 1, &n) && flat(t, 65537) == 65537 && flat(t, n - 1) == n - 1,
           "arange(70000, dtype=i32) (in blocks over the threads)");
        tr_release(t);
    }
    t = run("linspace", (struct tr_arg[]){int_arg(0), int_arg(1), int_arg(5)}, 3);
    ok(is(t, TR_DTYPE_F32, 1, (int64_t[]){5}) &&
           values(t, (double[]){0, 0.25, 0.5, 0.75, 1}, 5),
       "linspace(0, 1, 5)");
    tr_release(t);
    t = run("linspace", (struct tr_arg[]){float_arg(0), float_arg(0.3), int_arg(7),
                                          dtype_arg(TR_DTYPE_F64)},
            4);
    ok(is(t, TR_DTYPE_F64, 1, (int64_t[]){7}) && flat(t, 0) == 0 && flat(t, 6) == 0.3 &&
           fabs(flat(t, 3) - 0.15) < 1e-16,
       "linspace ends exactly at stop");
    tr_release(t);
    t = run("linspace", (struct tr_arg[]){int_arg(2), int_arg(9), int_arg(1)}, 3);
    ok(is(t, TR_DTYPE_F32, 1, (int64_t[]){1}) && flat(t, 0) == 2, "linspace with one step");
    tr_release(t);
    t = run("linspace", (struct tr_arg[]){int_arg(2), int_arg(9), int_arg(0)}, 3);
    ok(is(t, TR_DTYPE_F32, 1, (int64_t[]){0}), "linspace with no steps");
    tr_release(t);
    t = run("eye", (struct tr_arg[]){int_arg(3)}, 1);
    ok(is(t, TR_DTYPE_F32, 2, (int64_t[]){3, 3}) &&
           values(t, (double[]){1, 0, 0, 0, 1, 0, 0, 0, 1}, 9),
       "eye(3)");
    tr_release(t);
    t = run("eye", (struct tr_arg[]){int_arg(2), int_arg(4), dtype_arg(TR_DTYPE_I32)}, 3);
    ok(is(t, TR_DTYPE_I32, 2, (int64_t[]){2, 4}) &&
           values(t, (double[]){1, 0, 0, 0, 0, 1, 0, 0}, 8),
       "eye(2, 4, i32)");
    tr_release(t);
    t = run("eye", (struct tr_arg[]){int_arg(0)}, 1);
    ok(is(t, TR_DTYPE_F32, 2, (int64_t[]){0, 0}), "eye(0) is empty");
    tr_release(t);
}

/* -------------------------------------------------------------- random */

static void test_philox(void)
{
    static const uint32_t kat[3][10] = {
        /* Random123's kat_vectors: counter[4] key[2] -> output[4] */
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
         0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
         0x94fdcceb, 0x5001e420, 0x24126ea1},
    };

    for (int v = 0; v < 3; v++) {
        philox4x32_ctr_t ctr = {{kat[v][0], kat[v][1], kat[v][2], kat[v][3]}};
        philox4x32_key_t key = {{kat[v][4], kat[v][5]}};
        philox4x32_ctr_t r = philox4x32_R(10, ctr, key);
        ok(memcmp(r.v, &kat[v][6], sizeof r.v) == 0,
           "Philox-4x32-10 known answer %d: %08x %08x %08x %08x", v, r.v[0], r.v[1], r.v[2],
           r.v[3]);
    }
    {
        /* through our wrapper: counter (lo32(i), hi32(i), 0, 0), key (lo32(s), hi32(s)) */
        uint32_t w[4];
        tr__philox_words(0, 0, w);
        ok(memcmp(w, &kat[0][6], sizeof w) == 0, "tr__philox_words(seed 0, element 0)");
        tr__philox_words(UINT64_C(0x299f31d0a4093822), UINT64_C(0x85a308d3243f6a88), w);
        {
            philox4x32_ctr_t ctr = {{0x243f6a88, 0x85a308d3, 0, 0}};
            philox4x32_key_t key = {{0xa4093822, 0x299f31d0}};
            philox4x32_ctr_t r = philox4x32_R(10, ctr, key);
            ok(memcmp(w, r.v, sizeof w) == 0,
               "64-bit seeds and indices split into low and high words");
        }
    }
}

/* rand's element i for seed, from Random123 itself. */
static uint32_t word(uint64_t seed, uint64_t i, int k)
{
    philox4x32_ctr_t ctr = {{(uint32_t)i, (uint32_t)(i >> 32), 0, 0}};
    philox4x32_key_t key = {{(uint32_t)seed, (uint32_t)(seed >> 32)}};

    return philox4x32_R(10, ctr, key).v[k];
}

static void test_rand_values(void)
{
    const int64_t seeds[3] = {0, 42, INT64_C(0x100000005)};
    struct tr_tensor *t;

    for (int s = 0; s < 3; s++) {
        bool good;
        t = draw("rand", 6, seeds[s], TR_DTYPE_F32);
        good = is(t, TR_DTYPE_F32, 1, (int64_t[]){6});
        for (int64_t i = 0; good && i < 6; i++)
            good = flat(t, i) == (double)(word((uint64_t)seeds[s], (uint64_t)i, 0) >> 8) / 16777216.0;
        ok(good, "rand f32, seed %lld: (w0 >> 8) * 2^-24, element by element",
           (long long)seeds[s]);
        tr_release(t);
        t = draw("rand", 6, seeds[s], TR_DTYPE_F64);
        good = is(t, TR_DTYPE_F64, 1, (int64_t[]){6});
        for (int64_t i = 0; good && i < 6; i++) {
            uint64_t hi = word((uint64_t)seeds[s], (uint64_t)i, 0);
            uint64_t lo = word((uint64_t)seeds[s], (uint64_t)i, 1);
            good = flat(t, i) == ldexp((double)(((hi << 32) | lo) >> 11), -53);
        }
        ok(good, "rand f64, seed %lld: (((w0 << 32) | w1) >> 11) * 2^-53", (long long)seeds[s]);
        tr_release(t);
    }
    /* by hand from the known answer: w0 = 0x6627e8d5 */
    t = draw("rand", 1, 0, TR_DTYPE_F32);
    is_double(t ? flat(t, 0) : -1, 0x6627e8 / 16777216.0, "rand(seed 0)[0] is 0x6627e8 / 2^24");
    tr_release(t);
    t = draw("rand", 3, -1, TR_DTYPE_F32);
    ok(t && flat(t, 2) == (double)(word(UINT64_MAX, 2, 0) >> 8) / 16777216.0,
       "a negative seed is its two's complement bits");
    tr_release(t);
    t = draw("rand", 4, 42, TR_DTYPE_F16);
    ok(is(t, TR_DTYPE_F16, 1, (int64_t[]){4}) &&
           flat(t, 3) == (double)(word(42, 3, 0) >> 21) / 2048.0,
       "rand f16: (w0 >> 21) * 2^-11");
    tr_release(t);
    t = draw("rand", 4, 42, TR_DTYPE_BF16);
    ok(is(t, TR_DTYPE_BF16, 1, (int64_t[]){4}) && flat(t, 1) == (double)(word(42, 1, 0) >> 24) / 256.0,
       "rand bf16: (w0 >> 24) * 2^-8");
    tr_release(t);
}

static void test_randn_values(void)
{
    /* the bits this implementation gives, pinned so that the CUDA side
     * (and any later change) must match them */
    static const uint64_t pinned[2][4] = {
        {0x3fefb765f032eebcu, 0xbfc3aa69e62c0877u, 0xbff2fb51439875a4u, 0xbfe30d92a20b3179u},
        {0xbfef0bcb49733446u, 0xbfb2bc0292cac9b5u, 0xbfd590c8dfc0b7f1u, 0xbfd84d9e1a4dc23du},
    };
    const int64_t seeds[2] = {0, 42};

    for (int s = 0; s < 2; s++) {
        struct tr_tensor *d = draw("randn", 4, seeds[s], TR_DTYPE_F64);
        struct tr_tensor *f = draw("randn", 4, seeds[s], TR_DTYPE_F32);
        struct tr_tensor *h = draw("randn", 4, seeds[s], TR_DTYPE_F16);
        bool exact = d && f && h, close = exact, rounded = exact;
        for (int64_t i = 0; exact && i < 4; i++) {
            double z = flat(d, i), u1, u2, libm;
            uint64_t bits;
            memcpy(&bits, &z, sizeof bits);
            exact = bits == pinned[s][i];
            /* the definition, by hand from Random123's words, with libm */
            u1 = (double)((word((uint64_t)seeds[s], (uint64_t)i, 0) >> 8) + 1) / 16777216.0;
            u2 = (double)(word((uint64_t)seeds[s], (uint64_t)i, 1) >> 8) / 16777216.0;
            libm = sqrt(-2 * log(u1)) * cos(2 * 3.14159265358979323846 * u2);
            /* libm's cos(fl(2 pi u2)) carries the rounding of its
             * argument: up to 7e-16 absolutely */
            close = close && fabs(z - libm) <= 2e-15 * sqrt(-2 * log(u1));
            rounded = rounded && flat(f, i) == (double)(float)z &&
                      flat(h, i) == (double)tr_f16_to_f32(tr_f64_to_f16(z));
        }
        ok(exact, "randn f64, seed %lld: the pinned bits", (long long)seeds[s]);
        ok(close, "randn, seed %lld: sqrt(-2 ln u1) cos(2 pi u2) from Random123's words",
           (long long)seeds[s]);
        ok(rounded, "randn f32 and f16, seed %lld: the f64 value rounded once",
           (long long)seeds[s]);
        tr_release(h);
        tr_release(f);
        tr_release(d);
    }
}

static void test_statistics(void)
{
    const int64_t n = 1000000;
    struct tr_tensor *u = draw("rand", n, 7, TR_DTYPE_F32), *z = draw("randn", n, 7, TR_DTYPE_F32);
    struct tr_tensor *h = draw("rand", 100000, 3, TR_DTYPE_F16);
    double mean = 0, var = 0, lo = 1, hi = 0, zmean = 0, zvar = 0, zmax = 0, hmax = 0;
    const float *uv = u ? tr_tensor_data(u) : NULL, *zv = z ? tr_tensor_data(z) : NULL;

    for (int64_t i = 0; uv && zv && i < n; i++) {
        mean += uv[i];
        lo = uv[i] < lo ? uv[i] : lo;
        hi = uv[i] > hi ? uv[i] : hi;
        zmean += zv[i];
        zmax = fabs(zv[i]) > zmax ? fabs(zv[i]) : zmax;
    }
    mean /= (double)n;
    zmean /= (double)n;
    for (int64_t i = 0; uv && zv && i < n; i++) {
        var += (uv[i] - mean) * (uv[i] - mean);
        zvar += (zv[i] - zmean) * (zv[i] - zmean);
    }
    var /= (double)(n - 1);
    zvar /= (double)(n - 1);
    for (int64_t i = 0; h && i < 100000; i += 1)
        hmax = flat(h, i) > hmax ? flat(h, i) : hmax;
    ok(fabs(mean - 0.5) < 0.002 && fabs(var - 1.0 / 12) < 0.001 && lo >= 0 && hi < 1,
       "rand: mean %.4f, variance %.5f, within [0, 1)", mean, var);
    ok(fabs(zmean) < 0.005 && fabs(zvar - 1) < 0.01 && zmax < 6,
       "randn: mean %.4f, variance %.4f, |z| at most %.2f", zmean, zvar, zmax);
    ok(h && hmax < 1 && hmax >= 0.999, "rand f16 stays below 1 (largest %.5f)", hmax);
    tr_release(h);
    tr_release(z);
    tr_release(u);
}

static void test_random_threads(void)
{
#ifdef _OPENMP
    int saved = tr_num_threads();
    struct tr_tensor *a, *b;
    const int64_t n = 300001;

    tr_set_num_threads(1);
    a = draw("randn", n, 5, TR_DTYPE_F64);
    tr_set_num_threads(4);
    b = draw("randn", n, 5, TR_DTYPE_F64);
    tr_set_num_threads(saved);
    ok(a && b && memcmp(tr_tensor_data(a), tr_tensor_data(b), (size_t)n * 8) == 0,
       "randn: the same bits with 1 and 4 threads");
    tr_release(b);
    tr_release(a);
#else
    skip("no OpenMP");
#endif
    {
        struct tr_arg items[2];
        int64_t s[2] = {3, 5};
        struct tr_tensor *m = run("rand", (struct tr_arg[]){shape_arg(items, s, 2), int_arg(9)}, 2);
        struct tr_tensor *v = draw("rand", 15, 9, TR_DTYPE_F32);
        ok(is(m, TR_DTYPE_F32, 2, s) && flat(m, 7) == flat(v, 7) && flat(m, 14) == flat(v, 14),
           "the counter is the row-major index, whatever the shape");
        tr_release(v);
        tr_release(m);
    }
    {
        struct tr_arg items[1];
        int64_t s = 4;
        struct tr_tensor *t =
            run("rand", (struct tr_arg[]){shape_arg(items, &s, 1), int_arg(0), dtype_arg(TR_DTYPE_I32)},
                3);
        ok(!t && tr_last_status() == TR_ERR_DTYPE && strncmp(tr_last_error(), "rand:", 5) == 0,
           "rand of integers is refused: %s", tr_last_error());
    }
}

/* |a - b| in units of b's last place. */
static double ulps(double a, double b)
{
    double ulp = nextafter(fabs(b), INFINITY) - fabs(b);

    return a == b ? 0 : fabs(a - b) / ulp;
}

/* Our log and cos against glibc's: within 1 ulp of each other on samples
 * of randn's arguments (both within about half an ulp of the truth; the
 * long double measurement of philox_math.h's comment is not repeated
 * here, since valgrind computes long double in double).  The cosine's
 * reference reduces exactly in u and carries 2 pi t as a head and a tail
 * (fma), so that the rounding of its argument does not count. */
static void test_math(void)
{
    const double two_pi_hi = 6.28318530717958623200e+00, two_pi_lo = 2.44929359829470635445e-16;
    double worst_log = 0, worst_cos = 0;

    for (uint32_t j = 0; j < (1u << 24); j += 61) {
        double u1 = (double)(j + 1) / 16777216.0, u2 = (double)j / 16777216.0;
        double e = ulps(tr__pm_log(u1), log(u1)), q, t, hi, lo, ref;
        worst_log = e > worst_log ? e : worst_log;
        q = floor(4 * u2 + 0.5);
        t = u2 - q / 4;
        hi = t * two_pi_hi;
        lo = fma(t, two_pi_hi, -hi) + t * two_pi_lo;
        switch ((int)q & 3) {
        case 0: ref = cos(hi) - sin(hi) * lo; break;
        case 1: ref = -(sin(hi) + cos(hi) * lo); break;
        case 2: ref = -(cos(hi) - sin(hi) * lo); break;
        default: ref = sin(hi) + cos(hi) * lo; break;
        }
        if (ref != 0) {
            e = ulps(tr__pm_cos_2pi(u2), ref);
            worst_cos = e > worst_cos ? e : worst_cos;
        }
    }
    ok(worst_log <= 1, "tr__pm_log within 1 ulp of glibc's log (worst %.2f)", worst_log);
    ok(worst_cos <= 1, "tr__pm_cos_2pi within 1 ulp of glibc's cos (worst %.2f)", worst_cos);
    ok(tr__pm_log(1) == 0 && tr__pm_log(0) == -INFINITY && isnan(tr__pm_log(-1)) &&
           tr__pm_log(INFINITY) == INFINITY && ulps(tr__pm_log(5e-320), log(5e-320)) <= 1 &&
           ulps(tr__pm_log(1e300), log(1e300)) <= 1,
       "log's special cases: 1, 0, negative, inf, subnormal, large");
    ok(tr__pm_cos_2pi(0) == 1 && tr__pm_cos_2pi(0.5) == -1 && tr__pm_cos_2pi(0.25) == 0 &&
           tr__pm_cos_2pi(-0.75) == 0 && tr__pm_cos_2pi(3) == 1 && isnan(tr__pm_cos_2pi(NAN)) &&
           fabs(tr__pm_cos_2pi(1.0 / 6) - 0.5) < 2e-16,
       "cos_2pi's exact points");
}

int main(void)
{
    test_fill();
    test_ranges();
    test_philox();
    test_rand_values();
    test_randn_values();
    test_statistics();
    test_random_threads();
    test_math();
    return done_testing();
}
