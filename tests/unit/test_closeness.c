/*
 * test_closeness.c - the comparison loop of `compare`: the isclose rule at
 * its edges, integers exactly (past f64's 2^53), bits under exact, and
 * results that do not depend on the thread count or on how a tensor is
 * cut into runs.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "closeness.h"
#include "tap.h"

static const struct tolerance f32_default = {1.3e-6, 1e-5, false, true};

static struct closeness run(enum tr_dtype dtype, const void *a, const void *b, int64_t n,
                            const struct tolerance *tol, size_t cap, int threads)
{
    struct closeness c;

    closeness_init(&c, cap);
    closeness_add(&c, dtype, a, b, n, 0, tol, threads);
    return c;
}

static void test_rule(void)
{
    double b[] = {1.0, 1.0, 0.0, INFINITY, INFINITY, NAN, NAN, 1.0, -0.0};
    double a[9];
    struct tolerance tol = {1e-3, 1e-6, false, true};
    struct closeness c;
    double edge = 1e-6 + 1e-3 * 1.0;

    /* the last double on the edge (close: <=), and the one after it */
    a[0] = 1.0 + edge;
    while (fabs(a[0] - 1.0) > edge)
        a[0] = nextafter(a[0], 0.0);
    while (fabs(nextafter(a[0], 2.0) - 1.0) <= edge)
        a[0] = nextafter(a[0], 2.0);
    a[1] = nextafter(a[0], 2.0);
    a[2] = 1e-6;                           /* atol alone */
    a[3] = INFINITY;                       /* the same infinity */
    a[4] = -INFINITY;
    a[5] = NAN;
    a[6] = 1.0;
    a[7] = NAN;
    a[8] = 0.0;
    c = run(TR_DTYPE_F64, a, b, 9, &tol, 16, 1);
    ok(c.differ == 4 && c.nfirst == 4 && c.first[0].at == 1 && c.first[1].at == 4 &&
           c.first[2].at == 6 && c.first[3].at == 7,
       "the edge is close, one ulp past it is not; -inf against inf and a NaN against a "
       "number differ; NaN against NaN and -0 against 0 do not (%lld differ)",
       (long long)c.differ);
    ok(isinf(c.max_abs) && c.max_abs_at == 4, "the largest absolute difference is the infinite one");
    closeness_free(&c);
    tol.equal_nan = false;
    c = run(TR_DTYPE_F64, a, b, 9, &tol, 16, 1);
    ok(c.differ == 5 && c.first[2].at == 5, "without equal_nan, NaN against NaN differs too");
    closeness_free(&c);
}

static void test_integers(void)
{
    int64_t a[] = {INT64_C(9007199254740993), 5, -3};
    int64_t b[] = {INT64_C(9007199254740992), 5, -3};
    struct tolerance tol = {0, 0, false, true};
    struct closeness c = run(TR_DTYPE_I64, a, b, 3, &tol, 4, 1);

    ok(c.differ == 1 && c.first[0].at == 0,
       "integers compare exactly: 2^53 + 1 differs from 2^53, which are one f64");
    closeness_free(&c);
    tol.atol = 1;
    c = run(TR_DTYPE_I64, a, b, 3, &tol, 4, 1);
    ok(c.differ == 0, "with a tolerance, integers are compared by the rule");
    closeness_free(&c);
}

static void test_exact(void)
{
    float a[] = {0.0f, 1.0f, NAN};
    float b[] = {-0.0f, 1.0f, NAN};
    uint32_t payload = 0x7fc00001;
    struct tolerance tol = {0, 0, true, true};
    struct closeness c;

    memcpy(&b[2], &payload, sizeof payload);
    c = run(TR_DTYPE_F32, a, b, 3, &tol, 4, 1);
    ok(c.differ == 2 && c.first[0].at == 0 && c.first[1].at == 2 && c.max_abs_at < 0,
       "exact: -0 and a NaN of another payload differ, with no difference in value");
    closeness_free(&c);
    c = run(TR_DTYPE_F32, a, b, 3, &f32_default, 4, 1);
    ok(c.differ == 0, "by the rule they are close");
    closeness_free(&c);
}

/* Many differences, ties for the maxima: the same answer on 1, 2 and 7
 * threads, and run by run. */
static void test_threads(void)
{
    enum { N = 1 << 20 };
    static float a[N], b[N];
    struct closeness one, many, runs;
    bool same = true;

    for (int i = 0; i < N; i++) {
        a[i] = (float)(i % 1000);
        b[i] = a[i] + (((int64_t)i * 7919) % 13 == 0 ? 0.5f : 0.0f);
    }
    b[N / 3] = a[N / 3] + 2.0f; /* the largest difference, twice */
    b[2 * N / 3] = a[2 * N / 3] + 2.0f;
    one = run(TR_DTYPE_F32, a, b, N, &f32_default, 100, 1);
    for (int threads = 2; threads <= 7; threads += 5) {
        many = run(TR_DTYPE_F32, a, b, N, &f32_default, 100, threads);
        same &= many.differ == one.differ && many.nfirst == one.nfirst &&
                memcmp(many.first, one.first, one.nfirst * sizeof *one.first) == 0 &&
                many.max_abs_at == one.max_abs_at && many.max_rel_at == one.max_rel_at;
        closeness_free(&many);
    }
    closeness_init(&runs, 100);
    for (int64_t from = 0; from < N; from += 100003)
        closeness_add(&runs, TR_DTYPE_F32, a + from, b + from, N - from < 100003 ? N - from : 100003,
                      from, &f32_default, 2);
    same &= runs.differ == one.differ && runs.max_abs_at == one.max_abs_at &&
            memcmp(runs.first, one.first, one.nfirst * sizeof *one.first) == 0;
    ok(same && one.max_abs_at == N / 3 && one.nfirst == 100 && one.first[0].at == 0,
       "the first 100 differences and the first places of the maxima do not depend on the "
       "threads or the runs (%lld differ, max abs at %lld)",
       (long long)one.differ, (long long)one.max_abs_at);
    closeness_free(&one);
    closeness_free(&runs);
}

static void test_defaults(void)
{
    double r, a;

    closeness_default(TR_DTYPE_BF16, &r, &a);
    ok(r == 1.6e-2 && a == 1e-5, "bf16: rtol 1.6e-2, atol 1e-5");
    closeness_default(TR_DTYPE_I32, &r, &a);
    ok(r == 0 && a == 0, "integers: exact");
}

int main(void)
{
    test_rule();
    test_integers();
    test_exact();
    test_threads();
    test_defaults();
    return done_testing();
}
