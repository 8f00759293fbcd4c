/*
 * test_view.c - views: tr_slice, tr_select, tr_transpose, tr_permute,
 * tr_flip, tr_reshape_view and tr_expand give the elements NumPy/PyTorch give, never
 * copy (every view shares its base's storage and points into its buffer),
 * and fail cleanly with a status, a message and no handle left behind.
 *
 * The values are checked against models written here, independently of
 * view.c: Python's slice.indices and range, and for random chains of views
 * an explicit list of the base's flat indices, one per element of the view,
 * that every op rearranges the way its definition says.
 *
 * TR_VALGRIND=1 scales the random part down.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tensorrun.h"
#include "tap.h"

#define NONE TR_SLICE_NONE
#define MAX_NUMEL 4096 /* cap on the random views' element counts */

/* The scope the current test function runs in; failing calls must leave
 * its size alone. */
static struct tr_scope *scope;

/* The buffers of the bases the current test function made: values_are
 * will not read a view that reaches outside all of them (a wrong view
 * would read wild memory and crash the test instead of failing it). */
static struct {
    const char *lo, *hi;
} bases[16];
static int nbases;

static void add_base(const struct tr_tensor *t)
{
    if (t && tr_tensor_numel(t) > 0 && nbases < 16) {
        bases[nbases].lo = tr_tensor_data(t);
        bases[nbases].hi = bases[nbases].lo + tr_tensor_nbytes(t);
        nbases++;
    }
}

/* Opens the scope a test function runs in and forgets the last one's
 * bases. */
static void begin(void)
{
    scope = tr_scope_begin();
    nbases = 0;
}

/* Whether every element of t lies inside one of the bases. */
static bool in_bases(const struct tr_tensor *t)
{
    int64_t lo = 0, hi = 0, item = (int64_t)tr_dtype_size(tr_tensor_dtype(t));
    const char *p = tr_tensor_data(t);

    if (tr_tensor_numel(t) == 0)
        return true;
    for (int i = 0; i < tr_tensor_ndim(t); i++) {
        int64_t reach = (tr_tensor_shape(t)[i] - 1) * tr_tensor_strides(t)[i];
        if (reach < 0)
            lo += reach;
        else
            hi += reach;
    }
    for (int b = 0; b < nbases; b++)
        if (p + lo * item >= bases[b].lo && p + (hi + 1) * item <= bases[b].hi)
            return true;
    return false;
}

/* ------------------------------------------------------------- helpers */

static int64_t numel_of(int ndim, const int64_t *shape)
{
    int64_t n = 1;

    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    return n;
}

/* Row-major multi-index of flat position k. */
static void unravel(int64_t k, int ndim, const int64_t *shape, int64_t *index)
{
    for (int i = ndim - 1; i >= 0; i--) {
        index[i] = shape[i] ? k % shape[i] : 0;
        k = shape[i] ? k / shape[i] : 0;
    }
}

static int64_t ravel(int ndim, const int64_t *shape, const int64_t *index)
{
    int64_t k = 0;

    for (int i = 0; i < ndim; i++)
        k = k * shape[i] + index[i];
    return k;
}

static char *format_shape(int ndim, const int64_t *shape, char *buf, size_t size)
{
    size_t len = 0;

    len += (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%" PRId64, i ? "," : "", shape[i]);
    if (len < size)
        snprintf(buf + len, size - len, "]");
    return buf;
}

/* An f64 tensor of shape whose element k (row-major) holds k. */
static struct tr_tensor *arange(int ndim, const int64_t *shape)
{
    int64_t n = numel_of(ndim, shape);
    double *values = malloc((size_t)(n ? n : 1) * sizeof *values);
    struct tr_tensor *t;

    for (int64_t k = 0; k < n; k++)
        values[k] = (double)k;
    t = tr_from_data(values, TR_DTYPE_F64, ndim, shape, TR_CPU);
    free(values);
    add_base(t);
    return t;
}

static bool same_shape(const struct tr_tensor *t, int ndim, const int64_t *shape)
{
    if (tr_tensor_ndim(t) != ndim)
        return false;
    for (int i = 0; i < ndim; i++)
        if (tr_tensor_shape(t)[i] != shape[i])
            return false;
    return true;
}

static bool same_strides(const struct tr_tensor *t, int ndim, const int64_t *strides)
{
    if (tr_tensor_ndim(t) != ndim)
        return false;
    for (int i = 0; i < ndim; i++)
        if (tr_tensor_strides(t)[i] != strides[i])
            return false;
    return true;
}

/*
 * Checks t's values against want[0..n) (row-major) through both read
 * paths: tr_copy_to_host and tr_tensor_item.  On a mismatch writes why.
 */
static bool values_are(const struct tr_tensor *t, const int64_t *want, int64_t n, char *why,
                       size_t size)
{
    int ndim = tr_tensor_ndim(t);
    int64_t index[TR_MAX_DIMS] = {0};
    double *host, got;
    bool good = true;

    if (tr_tensor_numel(t) != n) {
        snprintf(why, size, "%" PRId64 " elements, want %" PRId64, tr_tensor_numel(t), n);
        return false;
    }
    if (!in_bases(t)) {
        snprintf(why, size, "the view reaches outside its base's buffer");
        return false;
    }
    host = malloc((size_t)(n ? n : 1) * sizeof *host);
    if (tr_copy_to_host(t, host, (size_t)n * sizeof *host) != TR_OK) {
        snprintf(why, size, "copy_to_host failed: %s", tr_last_error());
        free(host);
        return false;
    }
    for (int64_t k = 0; k < n && good; k++) {
        if (host[k] != (double)want[k]) {
            snprintf(why, size, "copy_to_host element %" PRId64 " is %g, want %" PRId64, k,
                     host[k], want[k]);
            good = false;
        }
    }
    for (int64_t k = 0; k < n && good; k++) {
        unravel(k, ndim, tr_tensor_shape(t), index);
        if (tr_tensor_item(t, index, &got) != TR_OK || got != (double)want[k]) {
            snprintf(why, size, "item of element %" PRId64 " is %g, want %" PRId64, k, got,
                     want[k]);
            good = false;
        }
    }
    free(host);
    return good;
}

/* ok() that t holds want, with the reason on failure. */
static void is_values(const struct tr_tensor *t, const int64_t *want, int64_t n,
                      const char *what)
{
    char why[256] = "";

    if (!t) {
        ok(false, "%s: values (no tensor: %s)", what, tr_last_error());
        return;
    }
    if (!ok(values_are(t, want, n, why, sizeof why), "%s: values", what))
        diag("%s", why);
}

/* ok() that v is a view of base: same storage, element [0, ...] at base
 * element first (no element: a NULL data pointer). */
static void is_view_of(const struct tr_tensor *v, const struct tr_tensor *base, int64_t first,
                       const char *what)
{
    const double *b;
    const void *want;

    if (!v) {
        ok(false, "%s: a view (no tensor: %s)", what, tr_last_error());
        return;
    }
    b = tr_tensor_data(base);
    want = tr_tensor_numel(v) > 0 ? (const void *)(b + first) : NULL;
    if (!ok(tr_tensor_shares_storage(v, base) && tr_tensor_data(v) == want,
            "%s: shares the base's storage, element 0 at base element %" PRId64, what, first))
        diag("shares %d, data %p, want %p", tr_tensor_shares_storage(v, base),
             tr_tensor_data(v), want);
}

/* A view call that must fail: NULL, status, a message naming the function,
 * and no new handle in the scope. */
#define EXPECT_FAIL(call, status, fn, ...)                                   \
    do {                                                                     \
        size_t before_ = tr_scope_size(scope);                               \
        struct tr_tensor *got_;                                              \
        tr_clear_error();                                                    \
        got_ = (call);                                                       \
        if (!ok(!got_ && tr_last_status() == (status) &&                     \
                    strstr(tr_last_error(), (fn)) != NULL &&                 \
                    tr_scope_size(scope) == before_,                         \
                __VA_ARGS__))                                                \
            diag("got %p, %s: \"%s\", scope %zu -> %zu", (void *)got_,       \
                 tr_status_name(tr_last_status()), tr_last_error(), before_, \
                 tr_scope_size(scope));                                      \
        else                                                                 \
            diag("%s", tr_last_error());                                     \
        tr_release(got_);                                                    \
    } while (0)

/* ------------------------------------------------- Python's slicing */

/*
 * len(range(*slice(start, stop, step).indices(len))) and the range's first
 * element, following CPython's PySlice_GetIndicesEx and counting the range
 * by walking it (in 128 bits, so that huge bounds and steps cannot
 * overflow).
 */
static int64_t py_slice(int64_t len, int64_t start, int64_t stop, int64_t step,
                        int64_t *first)
{
    __int128 lower = step < 0 ? -1 : 0, upper = step < 0 ? len - 1 : len;
    __int128 b, e, i;
    int64_t count = 0;

    if (start == NONE) {
        b = step < 0 ? upper : lower;
    } else {
        b = start;
        if (b < 0) {
            b += len;
            if (b < 0)
                b = lower;
        } else if (b > upper) {
            b = upper;
        }
    }
    if (stop == NONE) {
        e = step < 0 ? lower : upper;
    } else {
        e = stop;
        if (e < 0) {
            e += len;
            if (e < 0)
                e = lower;
        } else if (e > upper) {
            e = upper;
        }
    }
    *first = (int64_t)b;
    for (i = b; step > 0 ? i < e : i > e; i += step)
        count++;
    return count;
}

static char *format_bound(int64_t v, char *buf, size_t size)
{
    if (v == NONE)
        snprintf(buf, size, "None");
    else
        snprintf(buf, size, "%" PRId64, v);
    return buf;
}

/* ----------------------------------------------------- named slices */

static void slice_case(const struct tr_tensor *x, int64_t start, int64_t stop, int64_t step,
                       int64_t n, const int64_t *want, const char *what)
{
    struct tr_tensor *v = tr_slice(x, 0, start, stop, step);

    if (!ok(v != NULL, "%s: succeeds", what)) {
        diag("%s", tr_last_error());
        return;
    }
    is_int(tr_tensor_shape(v)[0], n, "%s: length", what);
    if (n > 1)
        is_int(tr_tensor_strides(v)[0], step, "%s: stride is the step", what);
    is_values(v, want, n, what);
    is_view_of(v, x, n ? want[0] : 0, what);
    tr_release(v);
}

static void test_slice_named(void)
{
    static const int64_t rev[] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0};
    static const int64_t all[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    static const int64_t mid[] = {2, 3, 4}, evens[] = {0, 2, 4, 6, 8}, down2[] = {5, 3};
    static const int64_t down3[] = {9, 6, 3}, head[] = {3, 2, 1, 0}, last2[] = {8, 9};
    int64_t ten = 10, shape2[2] = {4, 6};
    struct tr_tensor *x, *m, *v;

    begin();
    x = arange(1, &ten);
    m = arange(2, shape2);

    slice_case(x, NONE, NONE, -1, 10, rev, "x[::-1]");
    slice_case(x, 5, 1, -2, 2, down2, "x[5:1:-2]");
    slice_case(x, -1, -10, -3, 3, down3, "x[-1:-10:-3]");
    slice_case(x, 2, 5, 1, 3, mid, "x[2:5]");
    slice_case(x, -8, -5, 1, 3, mid, "x[-8:-5]");
    slice_case(x, NONE, NONE, 2, 5, evens, "x[::2]");
    slice_case(x, -2, NONE, 1, 2, last2, "x[-2:]");
    slice_case(x, -100, 100, 1, 10, all, "x[-100:100] clamps both bounds");
    slice_case(x, 3, -100, -1, 4, head, "x[3:-100:-1] clamps the stop");
    slice_case(x, INT64_MIN + 1, INT64_MAX, 1, 10, all, "x[-2**63+1:2**63-1]");
    slice_case(x, 100, NONE, 1, 0, NULL, "x[100:] is empty");
    slice_case(x, NONE, -100, 1, 0, NULL, "x[:-100] is empty");
    slice_case(x, 5, 5, 1, 0, NULL, "x[5:5] is empty");
    slice_case(x, 2, 7, -1, 0, NULL, "x[2:7:-1] is empty");
    slice_case(x, 0, 10, INT64_MAX, 1, all, "x[0:10:2**63-1] has one element");
    slice_case(x, NONE, NONE, INT64_MIN, 1, rev, "x[::-2**63] has one element");

    /* along another dimension: the stride is the dimension's times step */
    v = tr_slice(m, 1, 5, 0, -2);
    if (ok(v != NULL, "m[:, 5:0:-2] of a 4x6 matrix succeeds")) {
        static const int64_t want[] = {5, 3, 1, 11, 9, 7, 17, 15, 13, 23, 21, 19};
        ok(same_shape(v, 2, (int64_t[]){4, 3}) && same_strides(v, 2, (int64_t[]){6, -2}),
           "m[:, 5:0:-2]: shape [4,3], strides [6,-2]");
        is_values(v, want, 12, "m[:, 5:0:-2]");
        is_view_of(v, m, 5, "m[:, 5:0:-2]");
        ok(!tr_tensor_is_contiguous(v), "m[:, 5:0:-2] is not contiguous");
        tr_release(v);
    }
    v = tr_slice(m, -2, 1, 3, 1);
    if (ok(v != NULL, "m[1:3] (dim -2) succeeds")) {
        static const int64_t want[] = {6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17};
        ok(same_shape(v, 2, (int64_t[]){2, 6}) && tr_tensor_is_contiguous(v),
           "m[1:3] is [2,6] and contiguous");
        is_values(v, want, 12, "m[1:3]");
        is_view_of(v, m, 6, "m[1:3]");
        tr_release(v);
    }
    v = tr_slice(m, 0, 7, NONE, 1);
    if (ok(v != NULL, "m[7:] succeeds")) {
        ok(same_shape(v, 2, (int64_t[]){0, 6}) && tr_tensor_numel(v) == 0 &&
               tr_tensor_data(v) == NULL && tr_tensor_shares_storage(v, m),
           "m[7:] is an empty [0,6] view of m");
        tr_release(v);
    }

    EXPECT_FAIL(tr_slice(x, 0, 0, 5, 0), TR_ERR_INVALID, "slice", "a step of 0 fails");
    EXPECT_FAIL(tr_slice(m, 2, 0, 1, 1), TR_ERR_INDEX, "slice", "dim 2 of a matrix fails");
    EXPECT_FAIL(tr_slice(m, -3, 0, 1, 1), TR_ERR_INDEX, "slice", "dim -3 of a matrix fails");
    v = tr_select(x, 0, 0);
    EXPECT_FAIL(tr_slice(v, 0, 0, 1, 1), TR_ERR_INDEX, "slice", "slicing a scalar fails");
    tr_release(v);
    EXPECT_FAIL(tr_slice(NULL, 0, 0, 1, 1), TR_ERR_HANDLE, "slice",
                "slicing a NULL handle fails");
    tr_scope_end(scope, NULL, 0);
}

/* ----------------------------------------- every slice of short rows */

/*
 * For lengths 0..6, slices x[:, start:stop:step, :] of an arange of shape
 * [2, len, 2] with every start and stop in [-8, 8], None and a few huge
 * ones, and steps of both signs: shape, stride, data pointer and every
 * element against the Python model.
 */
static void test_slice_exhaustive(void)
{
    static const int64_t steps[] = {-3, -2, -1, 1, 2, 3, 7, -7, INT64_MAX, INT64_MIN};
    int64_t bounds[17 + 5], want[2 * 16 * 2];
    int nbounds = 0;

    for (int64_t b = -8; b <= 8; b++)
        bounds[nbounds++] = b;
    bounds[nbounds++] = NONE;
    bounds[nbounds++] = INT64_MIN + 1;
    bounds[nbounds++] = INT64_MAX;
    bounds[nbounds++] = -100;
    bounds[nbounds++] = 100;

    for (int64_t len = 0; len <= 6; len++) {
        int64_t shape[3] = {2, len, 2};
        const int64_t *base_strides;
        struct tr_tensor *x;
        const double *data;
        int failures = 0, checked = 0;

        begin();
        x = arange(3, shape);
        base_strides = tr_tensor_strides(x);
        data = tr_tensor_data(x);
        for (size_t s = 0; s < sizeof steps / sizeof *steps; s++) {
            for (int i = 0; i < nbounds; i++) {
                for (int j = 0; j < nbounds; j++) {
                    int64_t start = bounds[i], stop = bounds[j], step = steps[s], first;
                    int64_t count = py_slice(len, start, stop, step, &first);
                    int dim = (i + j) % 2 ? 1 : -2;
                    struct tr_tensor *v = tr_slice(x, dim, start, stop, step);
                    const void *want_data = count ? (const void *)(data + first * 2) : NULL;
                    char why[256] = "", a[24], b[24];
                    bool good;

                    for (int64_t r = 0; r < 2; r++)
                        for (int64_t k = 0; k < count; k++)
                            for (int64_t c = 0; c < 2; c++)
                                want[(r * count + k) * 2 + c] =
                                    (r * len + first + k * step) * 2 + c;
                    good = v && same_shape(v, 3, (int64_t[]){2, count, 2});
                    if (v && !good)
                        format_shape(3, tr_tensor_shape(v), why, sizeof why);
                    if (good && count > 1 &&
                        tr_tensor_strides(v)[1] != base_strides[1] * step) {
                        snprintf(why, sizeof why, "stride %" PRId64, tr_tensor_strides(v)[1]);
                        good = false;
                    }
                    if (good && (!tr_tensor_shares_storage(v, x) ||
                                 tr_tensor_data(v) != want_data)) {
                        snprintf(why, sizeof why, "not a view at element %" PRId64, first * 2);
                        good = false;
                    }
                    if (good)
                        good = values_are(v, want, 4 * count, why, sizeof why);
                    if (!v)
                        snprintf(why, sizeof why, "failed: %s", tr_last_error());
                    if (!good && ++failures <= 5)
                        diag("len %" PRId64 ", x[:, %s:%s:%" PRId64 "] (dim %d): %s", len,
                             format_bound(start, a, sizeof a), format_bound(stop, b, sizeof b),
                             step, dim, why);
                    checked++;
                    tr_release(v);
                }
            }
        }
        ok(failures == 0, "length %" PRId64 ": %d slices match Python's (%d differ)", len,
           checked, failures);
        is_int(tr_scope_size(scope), 1, "length %" PRId64 ": only the base is left", len);
        tr_scope_end(scope, NULL, 0);
    }
}

/* ---------------------------------------------------------------- select */

static void test_select(void)
{
    int64_t shape[3] = {2, 3, 4}, want[12];
    struct tr_tensor *x, *v, *w, *s;
    double value;
    int64_t none[1] = {0};

    begin();
    x = arange(3, shape);

    v = tr_select(x, 1, 2); /* x[:, 2, :] */
    if (ok(v != NULL, "x[:, 2] succeeds")) {
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 4; k++)
                want[i * 4 + k] = i * 12 + 2 * 4 + k;
        ok(same_shape(v, 2, (int64_t[]){2, 4}) && same_strides(v, 2, (int64_t[]){12, 1}),
           "x[:, 2] has shape [2,4] and strides [12,1]: rank drops by one");
        is_values(v, want, 8, "x[:, 2]");
        is_view_of(v, x, 8, "x[:, 2]");
    }
    w = tr_select(x, -1, -3); /* x[..., -3] */
    if (ok(w != NULL, "x[..., -3] (negative dim and index) succeeds")) {
        for (int k = 0; k < 6; k++)
            want[k] = k * 4 + 1;
        ok(same_shape(w, 2, (int64_t[]){2, 3}) && same_strides(w, 2, (int64_t[]){12, 4}),
           "x[..., -3] has shape [2,3] and strides [12,4]");
        is_values(w, want, 6, "x[..., -3]");
        is_view_of(w, x, 1, "x[..., -3]");
        tr_release(w);
    }
    w = tr_select(x, 0, -2);
    if (ok(w != NULL, "x[-2] succeeds")) {
        for (int k = 0; k < 12; k++)
            want[k] = k;
        is_values(w, want, 12, "x[-2] is x[0]");
        ok(tr_tensor_is_contiguous(w), "x[-2] is contiguous");
        tr_release(w);
    }

    /* down to a scalar: x[1, 2, 3] = 23 */
    if (v) {
        struct tr_tensor *row = tr_select(x, 0, 1);
        struct tr_tensor *col = row ? tr_select(row, 0, 2) : NULL;

        s = col ? tr_select(col, 0, -1) : NULL;
        if (ok(s != NULL && tr_tensor_ndim(s) == 0 && tr_tensor_numel(s) == 1,
               "x[1][2][-1] is a scalar of rank 0")) {
            is_int(tr_tensor_item(s, none, &value), TR_OK, "item of the scalar");
            is_double(value, 23.0, "x[1][2][-1] is 23");
            is_view_of(s, x, 23, "x[1][2][-1]");
            ok(tr_tensor_is_contiguous(s), "a scalar is contiguous");
            EXPECT_FAIL(tr_select(s, 0, 0), TR_ERR_INDEX, "select",
                        "selecting from a scalar fails");
        }
        tr_release(s);
        tr_release(col);
        tr_release(row);
    }

    EXPECT_FAIL(tr_select(x, 1, 3), TR_ERR_INDEX, "select", "index 3 of a dim of 3 fails");
    EXPECT_FAIL(tr_select(x, 1, -4), TR_ERR_INDEX, "select", "index -4 of a dim of 3 fails");
    ok(strstr(tr_last_error(), "-4") != NULL, "the message names the index");
    EXPECT_FAIL(tr_select(x, 3, 0), TR_ERR_INDEX, "select", "dim 3 of a 3-d tensor fails");
    EXPECT_FAIL(tr_select(x, -4, 0), TR_ERR_INDEX, "select", "dim -4 of a 3-d tensor fails");
    {
        struct tr_tensor *empty = tr_slice(x, 0, 0, 0, 1);
        EXPECT_FAIL(tr_select(empty, 0, 0), TR_ERR_INDEX, "select",
                    "index 0 of an empty dim fails");
        tr_release(empty);
    }
    tr_release(v);
    tr_scope_end(scope, NULL, 0);
}

/* ------------------------------------------------- transpose, permute */

static void test_transpose_permute(void)
{
    int64_t mshape[2] = {2, 3}, shape[3] = {2, 3, 4}, want[24];
    struct tr_tensor *m, *x, *v;

    begin();
    m = arange(2, mshape);
    x = arange(3, shape);

    v = tr_transpose(m, 0, 1);
    if (ok(v != NULL, "m.T succeeds")) {
        static const int64_t t[] = {0, 3, 1, 4, 2, 5};
        ok(same_shape(v, 2, (int64_t[]){3, 2}) && same_strides(v, 2, (int64_t[]){1, 3}),
           "m.T of a 2x3 matrix: shape [3,2], strides [1,3]");
        is_values(v, t, 6, "m.T");
        is_view_of(v, m, 0, "m.T");
        ok(!tr_tensor_is_contiguous(v), "m.T is not contiguous");
        tr_release(v);
    }
    v = tr_transpose(m, -1, -2);
    if (ok(v != NULL, "transpose(m, -1, -2) succeeds")) {
        ok(same_strides(v, 2, (int64_t[]){1, 3}), "negative dims swap the same pair");
        tr_release(v);
    }
    v = tr_transpose(x, 1, 1);
    if (ok(v != NULL, "transpose(x, 1, 1) succeeds")) {
        for (int k = 0; k < 24; k++)
            want[k] = k;
        ok(same_shape(v, 3, shape) && tr_tensor_is_contiguous(v), "and changes nothing");
        is_values(v, want, 24, "transpose(x, 1, 1)");
        tr_release(v);
    }
    v = tr_transpose(x, 0, -1); /* [4,3,2], strides [1,4,12] */
    if (ok(v != NULL, "transpose(x, 0, -1) succeeds")) {
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 3; b++)
                for (int c = 0; c < 2; c++)
                    want[(a * 3 + b) * 2 + c] = c * 12 + b * 4 + a;
        ok(same_shape(v, 3, (int64_t[]){4, 3, 2}) &&
               same_strides(v, 3, (int64_t[]){1, 4, 12}),
           "transpose(x, 0, -1): shape [4,3,2], strides [1,4,12]");
        is_values(v, want, 24, "transpose(x, 0, -1)");
        is_view_of(v, x, 0, "transpose(x, 0, -1)");
        tr_release(v);
    }
    EXPECT_FAIL(tr_transpose(m, 0, 2), TR_ERR_INDEX, "transpose",
                "transpose with dim 2 of a matrix fails");
    EXPECT_FAIL(tr_transpose(m, -3, 0), TR_ERR_INDEX, "transpose",
                "transpose with dim -3 of a matrix fails");

    v = tr_permute(x, (const int[]){2, 0, 1}, 3); /* [4,2,3] */
    if (ok(v != NULL, "permute(x, [2,0,1]) succeeds")) {
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 2; b++)
                for (int c = 0; c < 3; c++)
                    want[(a * 2 + b) * 3 + c] = b * 12 + c * 4 + a;
        ok(same_shape(v, 3, (int64_t[]){4, 2, 3}) &&
               same_strides(v, 3, (int64_t[]){1, 12, 4}),
           "permute(x, [2,0,1]): shape [4,2,3], strides [1,12,4]");
        is_values(v, want, 24, "permute(x, [2,0,1])");
        is_view_of(v, x, 0, "permute(x, [2,0,1])");
        tr_release(v);
    }
    v = tr_permute(x, (const int[]){-1, 0, -2}, 3); /* [2,0,1] again */
    if (ok(v != NULL, "permute(x, [-1,0,-2]) succeeds")) {
        ok(same_shape(v, 3, (int64_t[]){4, 2, 3}) &&
               same_strides(v, 3, (int64_t[]){1, 12, 4}),
           "negative dims count from the end");
        is_values(v, want, 24, "permute(x, [-1,0,-2])");
        tr_release(v);
    }
    v = tr_permute(x, (const int[]){0, 1, 2}, 3);
    if (ok(v != NULL, "the identity permutation succeeds")) {
        ok(tr_tensor_is_contiguous(v) && tr_tensor_data(v) == tr_tensor_data(x),
           "and gives a contiguous view of x");
        tr_release(v);
    }
    {
        struct tr_tensor *s = tr_select(m, 0, 0);
        struct tr_tensor *scalar = s ? tr_select(s, 0, 1) : NULL;
        v = scalar ? tr_permute(scalar, NULL, 0) : NULL;
        ok(v != NULL && tr_tensor_ndim(v) == 0 && tr_tensor_shares_storage(v, m),
           "permuting a scalar with no dims succeeds");
        tr_release(v);
        tr_release(scalar);
        tr_release(s);
    }
    EXPECT_FAIL(tr_permute(x, (const int[]){0, 0, 1}, 3), TR_ERR_INVALID, "permute",
                "a repeated dim fails");
    EXPECT_FAIL(tr_permute(x, (const int[]){0, 2, -1}, 3), TR_ERR_INVALID, "permute",
                "a repeated dim given once negative fails");
    EXPECT_FAIL(tr_permute(x, (const int[]){1, 0}, 2), TR_ERR_INVALID, "permute",
                "two dims for a 3-d tensor fail");
    EXPECT_FAIL(tr_permute(x, (const int[]){0, 1, 2, 3}, 4), TR_ERR_INVALID, "permute",
                "four dims for a 3-d tensor fail");
    EXPECT_FAIL(tr_permute(x, (const int[]){0, 1, 3}, 3), TR_ERR_INDEX, "permute",
                "dim 3 of a 3-d tensor fails");
    EXPECT_FAIL(tr_permute(x, (const int[]){0, 1, -4}, 3), TR_ERR_INDEX, "permute",
                "dim -4 of a 3-d tensor fails");
    EXPECT_FAIL(tr_permute(x, NULL, 3), TR_ERR_INVALID, "permute", "NULL dims fail");
    ok(strstr(tr_last_error(), "3 dimensions given") == NULL,
       "the message does not blame the count, which is right");
    tr_scope_end(scope, NULL, 0);
}

/* ----------------------------------------------------------------- flip */

static void test_flip(void)
{
    int64_t shape[3] = {2, 3, 4}, want[24];
    struct tr_tensor *x, *v, *w, *t;

    begin();
    x = arange(3, shape);
    add_base(x);

    v = tr_flip(x, (const int[]){1}, 1);
    if (ok(v != NULL, "flip(x, [1]) succeeds")) {
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 3; b++)
                for (int c = 0; c < 4; c++)
                    want[(a * 3 + b) * 4 + c] = a * 12 + (2 - b) * 4 + c;
        ok(same_shape(v, 3, shape) && same_strides(v, 3, (int64_t[]){12, -4, 1}),
           "flip(x, [1]) of [2,3,4]: strides [12,-4,1]");
        is_values(v, want, 24, "flip(x, [1])");
        is_view_of(v, x, 8, "flip(x, [1])");
        w = tr_flip(v, (const int[]){-2}, 1);
        ok(w && same_strides(w, 3, (int64_t[]){12, 4, 1}) &&
               tr_tensor_data(w) == tr_tensor_data(x),
           "flip of flip gives x's strides and element 0 back");
        tr_release(w);
        tr_release(v);
    }
    v = tr_flip(x, (const int[]){0, 2, 1}, 3);
    if (ok(v != NULL, "flip(x, [0,2,1]) succeeds")) {
        for (int k = 0; k < 24; k++)
            want[k] = 23 - k;
        ok(same_strides(v, 3, (int64_t[]){-12, -4, -1}), "every stride negated");
        is_values(v, want, 24, "flip of every dimension");
        is_view_of(v, x, 23, "flip of every dimension");
        tr_release(v);
    }
    t = tr_transpose(x, 0, 2); /* [4,3,2], strides [1,4,12] */
    v = t ? tr_flip(t, (const int[]){0, 2}, 2) : NULL;
    if (ok(v != NULL, "flip of a transposed view succeeds")) {
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 3; b++)
                for (int c = 0; c < 2; c++)
                    want[(a * 3 + b) * 2 + c] = (1 - c) * 12 + b * 4 + (3 - a);
        ok(same_strides(v, 3, (int64_t[]){-1, 4, -12}), "its strides: [-1,4,-12]");
        is_values(v, want, 24, "flip(x.T-ish, [0,2])");
        is_view_of(v, x, 15, "flip(x.T-ish, [0,2])");
        tr_release(v);
    }
    tr_release(t);
    v = tr_flip(x, NULL, 0);
    ok(v && same_strides(v, 3, (int64_t[]){12, 4, 1}) && tr_tensor_data(v) == tr_tensor_data(x),
       "flip of no dimension is x's layout");
    tr_release(v);
    t = tr_slice(x, 1, 1, 2, 1); /* [2,1,4]: the size-1 dimension is left alone */
    v = t ? tr_flip(t, (const int[]){1, 0}, 2) : NULL;
    ok(v && same_strides(v, 3, (int64_t[]){-12, 4, 1}), "a dimension of one element keeps its stride");
    tr_release(v);
    tr_release(t);
    t = tr_slice(x, 1, 3, 3, 1); /* empty */
    v = t ? tr_flip(t, (const int[]){0, 1}, 2) : NULL;
    ok(v && tr_tensor_numel(v) == 0 && same_shape(v, 3, (int64_t[]){2, 0, 4}),
       "flip of an empty view is empty");
    tr_release(v);
    tr_release(t);
    EXPECT_FAIL(tr_flip(x, (const int[]){1, -2}, 2), TR_ERR_INVALID, "flip",
                "a dim listed twice fails");
    EXPECT_FAIL(tr_flip(x, (const int[]){3}, 1), TR_ERR_INDEX, "flip", "dim 3 of a 3-d tensor fails");
    EXPECT_FAIL(tr_flip(x, (const int[]){0, 1, 2, 0}, 4), TR_ERR_INVALID, "flip",
                "four dims for a 3-d tensor fail");
    tr_scope_end(scope, NULL, 0);
}

/* --------------------------------------------------------- reshape_view */

/* reshape_view(t, shape) must succeed as a view of base at first, with
 * want_shape, and read back in t's row-major order. */
static void reshape_ok(const struct tr_tensor *t, const struct tr_tensor *base, int ndim,
                       const int64_t *shape, int want_ndim, const int64_t *want_shape,
                       int64_t first, const char *what)
{
    int64_t n, *want;
    double *host;
    struct tr_tensor *v;
    char buf[64];

    if (!t) {
        ok(false, "%s: no tensor to reshape (%s)", what, tr_last_error());
        return;
    }
    n = tr_tensor_numel(t);
    want = malloc((size_t)(n ? n : 1) * sizeof *want);
    host = malloc((size_t)(n ? n : 1) * sizeof *host);
    v = tr_reshape_view(t, shape, ndim);
    tr_copy_to_host(t, host, (size_t)n * sizeof *host);
    for (int64_t k = 0; k < n; k++)
        want[k] = (int64_t)host[k];
    if (ok(v != NULL, "%s succeeds", what)) {
        if (!ok(same_shape(v, want_ndim, want_shape), "%s has shape %s", what,
                format_shape(want_ndim, want_shape, buf, sizeof buf)))
            diag("got %s",
                 format_shape(tr_tensor_ndim(v), tr_tensor_shape(v), buf, sizeof buf));
        is_values(v, want, n, what);
        is_view_of(v, base, first, what);
    } else {
        diag("%s", tr_last_error());
    }
    tr_release(v);
    free(host);
    free(want);
}

static void test_reshape(void)
{
    int64_t shape[3] = {2, 3, 4}, mshape[2] = {6, 4}, one = 1, zero_shape[2] = {0, 3};
    struct tr_tensor *x, *m, *v, *t, *s, *e;

    begin();
    x = arange(3, shape);
    m = arange(2, mshape);

    reshape_ok(x, x, 2, (int64_t[]){6, 4}, 2, (int64_t[]){6, 4}, 0, "[2,3,4] -> [6,4]");
    reshape_ok(x, x, 1, (int64_t[]){24}, 1, (int64_t[]){24}, 0, "[2,3,4] -> [24]");
    reshape_ok(x, x, 2, (int64_t[]){-1, 4}, 2, (int64_t[]){6, 4}, 0, "[2,3,4] -> [-1,4]");
    reshape_ok(x, x, 3, (int64_t[]){4, -1, 3}, 3, (int64_t[]){4, 2, 3}, 0,
               "[2,3,4] -> [4,-1,3]");
    reshape_ok(x, x, 1, (int64_t[]){-1}, 1, (int64_t[]){24}, 0, "[2,3,4] -> [-1]");
    reshape_ok(x, x, 6, (int64_t[]){1, 2, 1, 12, 1, 1}, 6, (int64_t[]){1, 2, 1, 12, 1, 1}, 0,
               "[2,3,4] -> [1,2,1,12,1,1]");
    EXPECT_FAIL(tr_reshape_view(x, (int64_t[]){5, 5}, 2), TR_ERR_SHAPE, "reshape",
                "24 elements as [5,5] fail");
    EXPECT_FAIL(tr_reshape_view(x, (int64_t[]){5, -1}, 2), TR_ERR_SHAPE, "reshape",
                "24 elements as [5,-1] fail");
    EXPECT_FAIL(tr_reshape_view(x, (int64_t[]){-1, -1}, 2), TR_ERR_SHAPE, "reshape",
                "two -1 sizes fail");
    EXPECT_FAIL(tr_reshape_view(x, (int64_t[]){-2, -12}, 2), TR_ERR_SHAPE, "reshape",
                "negative sizes other than -1 fail");
    EXPECT_FAIL(tr_reshape_view(x, (int64_t[]){0, -1}, 2), TR_ERR_SHAPE, "reshape",
                "[0,-1] of 24 elements fails");

    /* a slice along dim 0 of a contiguous matrix is contiguous */
    v = tr_slice(m, 0, 1, 5, 1); /* rows 1..4: [4,4] */
    reshape_ok(v, m, 1, (int64_t[]){16}, 1, (int64_t[]){16}, 4, "m[1:5] -> [16]");
    reshape_ok(v, m, 3, (int64_t[]){2, 2, 4}, 3, (int64_t[]){2, 2, 4}, 4,
               "m[1:5] -> [2,2,4]");
    tr_release(v);
    /* every other row: rows keep stride 8, but each row still splits */
    v = tr_slice(m, 0, 0, NONE, 2); /* [3,4], strides [8,1] */
    EXPECT_FAIL(tr_reshape_view(v, (int64_t[]){12}, 1), TR_ERR_SHAPE, "reshape",
                "m[::2] -> [12] fails (rows are not adjacent)");
    reshape_ok(v, m, 3, (int64_t[]){3, 2, 2}, 3, (int64_t[]){3, 2, 2}, 0, "m[::2] -> [3,2,2]");
    reshape_ok(v, m, 4, (int64_t[]){3, 1, 4, 1}, 4, (int64_t[]){3, 1, 4, 1}, 0,
               "m[::2] -> [3,1,4,1]");
    tr_release(v);
    /* columns 1..2: rows of 2 with stride 4 */
    v = tr_slice(m, 1, 1, 3, 1); /* [6,2], strides [4,1] */
    EXPECT_FAIL(tr_reshape_view(v, (int64_t[]){12}, 1), TR_ERR_SHAPE, "reshape",
                "m[:, 1:3] -> [12] fails");
    reshape_ok(v, m, 3, (int64_t[]){3, 2, 2}, 3, (int64_t[]){3, 2, 2}, 1,
               "m[:, 1:3] -> [3,2,2] (splits the rows)");
    EXPECT_FAIL(tr_reshape_view(v, (int64_t[]){4, 3}, 2), TR_ERR_SHAPE, "reshape",
                "m[:, 1:3] -> [4,3] fails");
    tr_release(v);

    /* a transposed matrix */
    t = tr_transpose(m, 0, 1); /* [4,6], strides [1,4] */
    EXPECT_FAIL(tr_reshape_view(t, (int64_t[]){24}, 1), TR_ERR_SHAPE, "reshape",
                "m.T -> [24] fails");
    EXPECT_FAIL(tr_reshape_view(t, (int64_t[]){-1}, 1), TR_ERR_SHAPE, "reshape",
                "m.T -> [-1] fails");
    EXPECT_FAIL(tr_reshape_view(t, (int64_t[]){6, 4}, 2), TR_ERR_SHAPE, "reshape",
                "m.T -> [6,4] fails");
    reshape_ok(t, m, 3, (int64_t[]){4, 1, 6}, 3, (int64_t[]){4, 1, 6}, 0,
               "m.T -> [4,1,6]");
    reshape_ok(t, m, 3, (int64_t[]){4, 2, 3}, 3, (int64_t[]){4, 2, 3}, 0,
               "m.T -> [4,2,3] (splits the strided dim)");
    reshape_ok(t, m, 2, (int64_t[]){4, 6}, 2, (int64_t[]){4, 6}, 0, "m.T -> its own shape");

    /* rank 0 <-> [1] <-> [1,1] */
    s = tr_from_data(&(double){7.5}, TR_DTYPE_F64, 0, NULL, TR_CPU);
    add_base(s);
    v = tr_reshape_view(s, &one, 1);
    ok(v && same_shape(v, 1, &one) && tr_tensor_shares_storage(v, s) &&
           tr_tensor_data(v) == tr_tensor_data(s),
       "a scalar -> [1]");
    e = v ? tr_reshape_view(v, (int64_t[]){1, 1}, 2) : NULL;
    ok(e && same_shape(e, 2, (int64_t[]){1, 1}) && tr_tensor_data(e) == tr_tensor_data(s),
       "[1] -> [1,1]");
    tr_release(v);
    v = e ? tr_reshape_view(e, NULL, 0) : NULL;
    if (ok(v && tr_tensor_ndim(v) == 0 && tr_tensor_data(v) == tr_tensor_data(s),
           "[1,1] -> a scalar")) {
        double value = 0;
        tr_tensor_item(v, NULL, &value);
        is_double(value, 7.5, "the scalar reads back");
    }
    tr_release(v);
    v = e ? tr_reshape_view(e, (int64_t[]){-1}, 1) : NULL;
    ok(v && same_shape(v, 1, &one), "[1,1] -> [-1] gives [1]");
    tr_release(v);
    v = tr_reshape_view(s, (int64_t[]){1, -1, 1}, 3);
    ok(v && same_shape(v, 3, (int64_t[]){1, 1, 1}), "a scalar -> [1,-1,1] gives [1,1,1]");
    tr_release(v);
    EXPECT_FAIL(tr_reshape_view(s, (int64_t[]){2}, 1), TR_ERR_SHAPE, "reshape",
                "a scalar -> [2] fails");
    tr_release(e);
    tr_release(s);

    /* size-1 dims whatever their strides do not break a contiguous run */
    e = tr_reshape_view(m, (int64_t[]){6, 4, 1}, 3);
    v = e ? tr_permute(e, (const int[]){0, 2, 1}, 3) : NULL; /* [6,1,4], strides [4,1,1] */
    reshape_ok(v, m, 1, (int64_t[]){24}, 1, (int64_t[]){24}, 0,
               "[6,1,4] with strides [4,1,1] -> [24]");
    tr_release(v);
    tr_release(e);
    {
        static double buffer[6] = {0, 1, 2, 3, 4, 5};
        struct tr_blob blob = {.data = buffer, .nbytes = sizeof buffer};

        e = tr_from_blob(&blob, TR_DTYPE_F64, 3, (int64_t[]){2, 1, 3}, (int64_t[]){3, 1000, 1},
                         TR_CPU);
        add_base(e);
        reshape_ok(e, e, 2, (int64_t[]){3, 2}, 2, (int64_t[]){3, 2}, 0,
                   "a blob [2,1,3] with strides [3,1000,1] -> [3,2]");
        tr_release(e);
    }

    /* a select of size-1 and strided dims: x[:, 1:2] is [2,1,4] */
    v = tr_slice(x, 1, 1, 2, 1);
    reshape_ok(v, x, 2, (int64_t[]){2, 4}, 2, (int64_t[]){2, 4}, 4, "x[:, 1:2] -> [2,4]");
    EXPECT_FAIL(tr_reshape_view(v, (int64_t[]){8}, 1), TR_ERR_SHAPE, "reshape",
                "x[:, 1:2] -> [8] fails");
    tr_release(v);

    /* empty tensors reshape to any shape of 0 elements */
    e = tr_zeros(TR_DTYPE_F64, 2, zero_shape, TR_CPU);
    v = tr_reshape_view(e, (int64_t[]){3, 0, 5}, 3);
    ok(v && same_shape(v, 3, (int64_t[]){3, 0, 5}) && tr_tensor_shares_storage(v, e),
       "[0,3] -> [3,0,5]");
    tr_release(v);
    v = tr_reshape_view(e, (int64_t[]){-1}, 1);
    ok(v && same_shape(v, 1, (int64_t[]){0}), "[0,3] -> [-1] gives [0]");
    tr_release(v);
    EXPECT_FAIL(tr_reshape_view(e, (int64_t[]){1}, 1), TR_ERR_SHAPE, "reshape",
                "[0,3] -> [1] fails");
    tr_release(e);

    tr_release(t);
    tr_scope_end(scope, NULL, 0);
}

/* ---------------------------------------------------------------- expand */

static void test_expand(void)
{
    int64_t cshape[2] = {3, 1}, rshape = 3, want[24];
    struct tr_tensor *c, *r, *v, *s, *k;

    begin();
    c = arange(2, cshape); /* a column [[0],[1],[2]] */
    r = arange(1, &rshape); /* [0,1,2] */

    v = tr_expand(c, (int64_t[]){3, 4}, 2);
    if (ok(v != NULL, "[3,1] -> [3,4] succeeds")) {
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++)
                want[i * 4 + j] = i;
        ok(same_shape(v, 2, (int64_t[]){3, 4}) && same_strides(v, 2, (int64_t[]){1, 0}),
           "[3,1] -> [3,4]: strides [1,0]");
        is_values(v, want, 12, "[3,1] -> [3,4]");
        is_view_of(v, c, 0, "[3,1] -> [3,4]");
        ok(!tr_tensor_is_contiguous(v), "an expanded view is not contiguous");
        k = tr_contiguous(v);
        add_base(k);
        ok(k && tr_tensor_is_contiguous(k) && !tr_tensor_shares_storage(k, c),
           "contiguous() of it is a compact copy");
        is_values(k, want, 12, "contiguous([3,1] -> [3,4])");
        tr_release(k);
        tr_release(v);
    }
    v = tr_expand(c, (int64_t[]){-1, 2}, 2);
    ok(v && same_shape(v, 2, (int64_t[]){3, 2}) && same_strides(v, 2, (int64_t[]){1, 0}),
       "[3,1] -> [-1,2] keeps the 3");
    tr_release(v);
    v = tr_expand(c, (int64_t[]){2, -1, -1}, 3);
    if (ok(v && same_shape(v, 3, (int64_t[]){2, 3, 1}) &&
               same_strides(v, 3, (int64_t[]){0, 1, 1}),
           "[3,1] -> [2,-1,-1]: a new leading dim of stride 0")) {
        static const int64_t w[] = {0, 1, 2, 0, 1, 2};
        is_values(v, w, 6, "[3,1] -> [2,-1,-1]");
    }
    tr_release(v);
    v = tr_expand(r, (int64_t[]){2, 2, 3}, 3);
    if (ok(v && same_shape(v, 3, (int64_t[]){2, 2, 3}) &&
               same_strides(v, 3, (int64_t[]){0, 0, 1}),
           "[3] -> [2,2,3]: strides [0,0,1]")) {
        for (int k2 = 0; k2 < 12; k2++)
            want[k2] = k2 % 3;
        is_values(v, want, 12, "[3] -> [2,2,3]");
        is_view_of(v, r, 0, "[3] -> [2,2,3]");
    }
    tr_release(v);
    v = tr_expand(c, (int64_t[]){3, 1}, 2);
    ok(v && tr_tensor_is_contiguous(v) && tr_tensor_data(v) == tr_tensor_data(c),
       "expanding to the same shape changes nothing");
    tr_release(v);
    v = tr_expand(c, (int64_t[]){3, 0}, 2);
    ok(v && same_shape(v, 2, (int64_t[]){3, 0}) && tr_tensor_numel(v) == 0,
       "[3,1] -> [3,0] is empty");
    tr_release(v);

    s = tr_select(r, 0, 2); /* the scalar 2 */
    v = s ? tr_expand(s, (int64_t[]){2, 3}, 2) : NULL;
    if (ok(v && same_shape(v, 2, (int64_t[]){2, 3}) && same_strides(v, 2, (int64_t[]){0, 0}),
           "a scalar -> [2,3]: strides [0,0]")) {
        static const int64_t w[] = {2, 2, 2, 2, 2, 2};
        is_values(v, w, 6, "a scalar -> [2,3]");
        is_view_of(v, r, 2, "a scalar -> [2,3]");
    }
    tr_release(v);
    tr_release(s);

    /* writes through the base show in the expanded view: no copy */
    v = tr_expand(c, (int64_t[]){3, 4}, 2);
    if (v) {
        double *p = tr_tensor_data_mut(c), got = 0;
        p[1] = 42.0;
        tr_tensor_item(v, (int64_t[]){1, 3}, &got);
        is_double(got, 42.0, "a write to the base shows in the expanded view");
        p[1] = 1.0;
    }
    tr_release(v);

    EXPECT_FAIL(tr_expand(c, (int64_t[]){4, 4}, 2), TR_ERR_SHAPE, "expand",
                "expanding a dim of 3 to 4 fails");
    EXPECT_FAIL(tr_expand(r, (int64_t[]){3, 1}, 2), TR_ERR_SHAPE, "expand",
                "expanding a dim of 3 to 1 fails");
    EXPECT_FAIL(tr_expand(c, (int64_t[]){4}, 1), TR_ERR_SHAPE, "expand",
                "expanding to fewer dims fails");
    EXPECT_FAIL(tr_expand(r, (int64_t[]){-1, 3}, 2), TR_ERR_SHAPE, "expand",
                "-1 for a new leading dim fails");
    EXPECT_FAIL(tr_expand(c, (int64_t[]){3, -2}, 2), TR_ERR_SHAPE, "expand",
                "a size of -2 fails");
    ok(strstr(tr_last_error(), "-2") != NULL && strstr(tr_last_error(), "not 1") == NULL,
       "the message names the bad size, not the dimension's");
    EXPECT_FAIL(tr_expand(r, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 3}, 9), TR_ERR_SHAPE,
                "expand", "more than TR_MAX_DIMS dims fail");
    tr_scope_end(scope, NULL, 0);
}

/* ------------------------------------------------- storage and flags */

static void test_storage(void)
{
    static double buffer[12];
    int64_t shape[2] = {3, 4};
    struct tr_blob blob = {.data = buffer, .nbytes = sizeof buffer,
                           .flags = TR_FLAG_READONLY};
    struct tr_tensor *ro, *views[7], *copy, *base, *v;
    const char *names[7] = {"slice", "select", "transpose", "permute", "reshape_view",
                            "expand", "a chain"};
    const void *want_data[7];
    bool all_ro = true, all_point = true;

    begin();
    for (int k = 0; k < 12; k++)
        buffer[k] = k;
    ro = tr_from_blob(&blob, TR_DTYPE_F64, 2, shape, NULL, TR_CPU);
    ok(ro != NULL, "a read-only blob wraps");
    add_base(ro);
    tr_clear_error();
    ok(tr_tensor_data_mut(ro) == NULL && tr_last_status() == TR_ERR_READONLY,
       "its data_mut is NULL with TR_ERR_READONLY");

    views[0] = tr_slice(ro, 0, 1, NONE, 1);
    want_data[0] = &buffer[4];
    views[1] = tr_select(ro, 1, -1);
    want_data[1] = &buffer[3];
    views[2] = tr_transpose(ro, 0, 1);
    want_data[2] = &buffer[0];
    views[3] = tr_permute(ro, (const int[]){1, 0}, 2);
    want_data[3] = &buffer[0];
    views[4] = tr_reshape_view(ro, (int64_t[]){2, 6}, 2);
    want_data[4] = &buffer[0];
    views[5] = tr_expand(views[1], (int64_t[]){2, 3}, 2);
    want_data[5] = &buffer[3];
    views[6] = views[2] ? tr_slice(views[2], 1, NONE, NONE, -1) : NULL;
    want_data[6] = &buffer[8];
    for (int i = 0; i < 7; i++) {
        bool is_ro;
        if (!views[i]) {
            all_ro = all_point = false;
            diag("%s of a read-only blob failed: %s", names[i], tr_last_error());
            continue;
        }
        tr_clear_error();
        is_ro = (tr_tensor_flags(views[i]) & TR_FLAG_READONLY) &&
                tr_tensor_storage_kind(views[i]) == TR_STORAGE_BORROWED &&
                tr_tensor_data_mut(views[i]) == NULL &&
                tr_last_status() == TR_ERR_READONLY;
        if (!is_ro) {
            all_ro = false;
            diag("%s of a read-only blob is writable", names[i]);
        }
        if (tr_tensor_data(views[i]) != want_data[i] ||
            !tr_tensor_shares_storage(views[i], ro)) {
            all_point = false;
            diag("%s of a read-only blob points at %p, want %p", names[i],
                 tr_tensor_data(views[i]), want_data[i]);
        }
    }
    ok(all_ro, "views of a read-only blob are read-only (data_mut NULL, TR_ERR_READONLY)");
    ok(all_point, "views of a blob point into the caller's buffer");
    if (views[6]) {
        static const int64_t w[] = {8, 4, 0, 9, 5, 1, 10, 6, 2, 11, 7, 3};
        is_values(views[6], w, 12, "m.T[:, ::-1] of a blob");
        copy = tr_contiguous(views[6]);
        add_base(copy);
        ok(copy && !tr_tensor_shares_storage(copy, ro) &&
               tr_tensor_storage_kind(copy) == TR_STORAGE_POOL &&
               tr_tensor_data_mut(copy) != NULL,
           "contiguous() of a strided read-only view is a writable pool copy");
        is_values(copy, w, 12, "that copy");
        tr_release(copy);
    }
    if (views[4]) {
        copy = tr_contiguous(views[4]);
        ok(copy && tr_tensor_shares_storage(copy, ro) &&
               tr_tensor_data(copy) == (const void *)buffer,
           "contiguous() of a contiguous read-only view is the same storage");
        tr_clear_error();
        ok(copy && tr_tensor_data_mut(copy) == NULL && tr_last_status() == TR_ERR_READONLY,
           "and stays read-only");
        tr_release(copy);
    }
    for (int i = 0; i < 7; i++)
        tr_release(views[i]);
    tr_release(ro);

    /* writable storage: writes through a view land in the base, and a view
     * keeps the storage alive after its base is released */
    base = arange(2, shape);
    v = tr_select(tr_transpose(base, 0, 1), 0, 2); /* column 2: base[:, 2] */
    if (ok(v && tr_tensor_data_mut(v) != NULL, "a view of a pool tensor is writable")) {
        double *p = tr_tensor_data_mut(v), got = 0;
        p[tr_tensor_strides(v)[0]] = -1.0; /* v[1] is base[1, 2] */
        tr_tensor_item(base, (int64_t[]){1, 2}, &got);
        is_double(got, -1.0, "a write through a view lands in the base");
        tr_release(base);
        is_values(v, (const int64_t[]){2, -1, 10}, 3, "the view outlives its released base");
    }
    tr_scope_end(scope, NULL, 0);
}

/* ------------------------------------------------- random view chains */

/* The reference for a view: its shape and, per element in row-major
 * order, the flat index of the base element it shows. */
struct model {
    int ndim;
    int64_t shape[TR_MAX_DIMS];
    int64_t n;
    int64_t *idx;
};

/* How a new view's index maps to the old one's: new dim d walks old dim
 * src[d] (or none, -1) as old = start[d] + step[d] * new; old dims no new
 * dim walks sit at fixed[]. */
struct remap {
    int ndim;
    int64_t shape[TR_MAX_DIMS];
    int src[TR_MAX_DIMS];
    int64_t start[TR_MAX_DIMS], step[TR_MAX_DIMS];
    int64_t fixed[TR_MAX_DIMS];
};

static void model_base(struct model *m, int ndim, const int64_t *shape)
{
    m->ndim = ndim;
    memcpy(m->shape, shape, (size_t)ndim * sizeof *shape);
    m->n = numel_of(ndim, shape);
    m->idx = malloc((size_t)(m->n ? m->n : 1) * sizeof *m->idx);
    for (int64_t k = 0; k < m->n; k++)
        m->idx[k] = k;
}

static void model_apply(struct model *m, const struct remap *r)
{
    int64_t n = numel_of(r->ndim, r->shape), ni[TR_MAX_DIMS], oi[TR_MAX_DIMS];
    int64_t *idx = malloc((size_t)(n ? n : 1) * sizeof *idx);

    for (int64_t k = 0; k < n; k++) {
        unravel(k, r->ndim, r->shape, ni);
        memcpy(oi, r->fixed, sizeof oi);
        for (int d = 0; d < r->ndim; d++)
            if (r->src[d] >= 0)
                oi[r->src[d]] = r->start[d] + r->step[d] * ni[d];
        idx[k] = m->idx[ravel(m->ndim, m->shape, oi)];
    }
    free(m->idx);
    m->idx = idx;
    m->n = n;
    m->ndim = r->ndim;
    memcpy(m->shape, r->shape, sizeof m->shape);
}

/* The identity remap of m, for the ops to edit. */
static void remap_identity(const struct model *m, struct remap *r)
{
    memset(r, 0, sizeof *r);
    r->ndim = m->ndim;
    memcpy(r->shape, m->shape, sizeof r->shape);
    for (int d = 0; d < m->ndim; d++) {
        r->src[d] = d;
        r->step[d] = 1;
    }
}

/* Whether some strides show m's elements as shape: the element at new
 * index i must be at idx[0] + sum(i[d] * stride[d]) for every i. */
static bool model_affine(const struct model *m, int ndim, const int64_t *shape)
{
    int64_t strides[TR_MAX_DIMS], index[TR_MAX_DIMS], unit = 1;

    if (m->n == 0)
        return true;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = shape[d] > 1 ? m->idx[unit] - m->idx[0] : 0;
        unit *= shape[d];
    }
    for (int64_t k = 0; k < m->n; k++) {
        int64_t at = m->idx[0];
        unravel(k, ndim, shape, index);
        for (int d = 0; d < ndim; d++)
            at += index[d] * strides[d];
        if (at != m->idx[k])
            return false;
    }
    return true;
}

/* C-contiguous: element k is base element idx[0] + k. */
static bool model_contiguous(const struct model *m)
{
    for (int64_t k = 0; k < m->n; k++)
        if (m->idx[k] != m->idx[0] + k)
            return false;
    return true;
}

static uint64_t rng_state = 0x7e57f1e3c0ffee01u;
static int strided_reshapes; /* reshape views made of non-contiguous views */

/* splitmix64 */
static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
static int64_t rnd(int64_t lo, int64_t hi)
{
    return lo + (int64_t)(rng_next() % (uint64_t)(hi - lo + 1));
}

/* A random shape of n elements (n > 0), up to 5 dims, with a -1 at times. */
static int random_shape(int64_t n, int64_t *shape, int64_t *resolved)
{
    int ndim = (int)rnd(n == 1 ? 0 : 1, 4), ones = (int)rnd(0, 1);
    int64_t rest = n;

    if (n == 0) {
        ndim = (int)rnd(1, 3);
        for (int d = 0; d < ndim; d++)
            shape[d] = rnd(1, 3);
        shape[rnd(0, ndim - 1)] = 0;
        memcpy(resolved, shape, (size_t)ndim * sizeof *shape);
        return ndim;
    }
    for (int d = 0; d + 1 < ndim; d++) {
        int64_t divisors[64];
        int count = 0;
        for (int64_t q = 1; q <= rest && count < 64; q++)
            if (rest % q == 0)
                divisors[count++] = q;
        shape[d] = divisors[rnd(0, count - 1)];
        rest /= shape[d];
    }
    if (ndim > 0)
        shape[ndim - 1] = rest;
    for (int k = 0; k < ones && ndim < 5; k++) { /* a size-1 dim somewhere */
        int at = (int)rnd(0, ndim);
        memmove(shape + at + 1, shape + at, (size_t)(ndim - at) * sizeof *shape);
        shape[at] = 1;
        ndim++;
    }
    memcpy(resolved, shape, (size_t)ndim * sizeof *shape);
    if (ndim > 0 && rnd(0, 2) == 0)
        shape[rnd(0, ndim - 1)] = -1;
    return ndim;
}

enum op { OP_SLICE, OP_SELECT, OP_TRANSPOSE, OP_PERMUTE, OP_RESHAPE, OP_EXPAND, OP_COUNT };

/*
 * Applies one random op to cur, updating the model and appending to desc.
 * Returns the new view, cur itself when the op rightly refused (a reshape
 * the strides cannot express), or NULL with *bad set when the engine and
 * the model disagree.
 */
static struct tr_tensor *random_op(struct tr_tensor *cur, struct model *m, char *desc,
                                   size_t size, bool *bad)
{
    size_t len = strlen(desc);
    int ndim = m->ndim, op;
    struct tr_tensor *v = NULL;
    struct remap r;
    char a[24], b[24], s1[64], s2[64];

    remap_identity(m, &r);
    do {
        op = (int)rnd(0, OP_COUNT - 1);
    } while (ndim == 0 && (op == OP_SLICE || op == OP_SELECT || op == OP_TRANSPOSE));
    if (op == OP_SELECT && numel_of(ndim, m->shape) == 0)
        op = OP_SLICE;

    switch (op) {
    case OP_SLICE: {
        int dim = (int)rnd(-ndim, ndim - 1), d = dim < 0 ? dim + ndim : dim;
        int64_t n = m->shape[d], first, start, stop, step;

        for (int tries = 0; tries < 3; tries++) { /* empty slices, but not too many */
            start = rnd(0, 3) == 0 ? NONE : rnd(-n - 3, n + 3);
            stop = rnd(0, 3) == 0 ? NONE : rnd(-n - 3, n + 3);
            step = rnd(1, 3) * (rnd(0, 1) ? 1 : -1);
            if (py_slice(n, start, stop, step, &first) > 0)
                break;
        }

        snprintf(desc + len, size - len, " slice(%d, %s:%s:%" PRId64 ")", dim,
                 format_bound(start, a, sizeof a), format_bound(stop, b, sizeof b), step);
        r.shape[d] = py_slice(n, start, stop, step, &first);
        r.start[d] = first;
        r.step[d] = step;
        v = tr_slice(cur, dim, start, stop, step);
        break;
    }
    case OP_SELECT: {
        int dim = (int)rnd(-ndim, ndim - 1), d = dim < 0 ? dim + ndim : dim;
        int64_t index = rnd(-m->shape[d], m->shape[d] - 1);

        snprintf(desc + len, size - len, " select(%d, %" PRId64 ")", dim, index);
        r.ndim = ndim - 1;
        for (int i = 0, j = 0; i < ndim; i++) {
            if (i == d)
                continue;
            r.shape[j] = m->shape[i];
            r.src[j] = i;
            r.start[j] = 0;
            r.step[j] = 1;
            j++;
        }
        r.fixed[d] = index < 0 ? index + m->shape[d] : index;
        v = tr_select(cur, dim, index);
        break;
    }
    case OP_TRANSPOSE: {
        int d0 = (int)rnd(-ndim, ndim - 1), d1 = (int)rnd(-ndim, ndim - 1);
        int a0 = d0 < 0 ? d0 + ndim : d0, a1 = d1 < 0 ? d1 + ndim : d1;

        snprintf(desc + len, size - len, " transpose(%d, %d)", d0, d1);
        r.src[a0] = a1;
        r.src[a1] = a0;
        r.shape[a0] = m->shape[a1];
        r.shape[a1] = m->shape[a0];
        v = tr_transpose(cur, d0, d1);
        break;
    }
    case OP_PERMUTE: {
        int dims[TR_MAX_DIMS], perm[TR_MAX_DIMS];
        size_t at;

        for (int i = 0; i < ndim; i++)
            perm[i] = i;
        for (int i = ndim - 1; i > 0; i--) {
            int j = (int)rnd(0, i), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        at = len + (size_t)snprintf(desc + len, size - len, " permute(");
        for (int i = 0; i < ndim; i++) {
            dims[i] = rnd(0, 1) ? perm[i] : perm[i] - ndim;
            r.src[i] = perm[i];
            r.shape[i] = m->shape[perm[i]];
            if (at < size)
                at += (size_t)snprintf(desc + at, size - at, "%s%d", i ? "," : "", dims[i]);
        }
        if (at < size)
            snprintf(desc + at, size - at, ")");
        v = tr_permute(cur, dims, ndim);
        break;
    }
    case OP_RESHAPE: {
        int64_t shape[TR_MAX_DIMS], resolved[TR_MAX_DIMS];
        int new_ndim = random_shape(m->n, shape, resolved);
        bool viewable = model_affine(m, new_ndim, resolved);

        snprintf(desc + len, size - len, " reshape(%s)",
                 format_shape(new_ndim, shape, s1, sizeof s1));
        tr_clear_error();
        v = tr_reshape_view(cur, shape, new_ndim);
        if (!viewable && !v && tr_last_status() == TR_ERR_SHAPE)
            return cur; /* rightly refused: the chain goes on from cur */
        if (viewable != (v != NULL) || !v) {
            char s3[64];
            diag("reshape_view of %s with strides %s to %s: %s, want %s (%s)",
                 format_shape(ndim, tr_tensor_shape(cur), s1, sizeof s1),
                 format_shape(ndim, tr_tensor_strides(cur), s2, sizeof s2),
                 format_shape(new_ndim, shape, s3, sizeof s3), v ? "a view" : "failed",
                 viewable ? "a view" : "TR_ERR_SHAPE", v ? "" : tr_last_error());
            tr_release(v);
            *bad = true;
            return NULL;
        }
        strided_reshapes += !model_contiguous(m);
        m->ndim = new_ndim;
        memcpy(m->shape, resolved, (size_t)new_ndim * sizeof *resolved);
        return v;
    }
    case OP_EXPAND: {
        int lead = (int)rnd(0, 2), new_ndim;
        int64_t shape[TR_MAX_DIMS], n;

        if (ndim + lead > 6)
            lead = 0;
        new_ndim = ndim + lead;
        r.ndim = new_ndim;
        for (int i = 0; i < new_ndim; i++) {
            int j = i - lead;
            if (j < 0) {
                shape[i] = rnd(1, 3);
                r.src[i] = -1;
                r.shape[i] = shape[i];
                continue;
            }
            r.src[i] = j;
            r.start[i] = 0;
            r.step[i] = m->shape[j] == 1 ? 0 : 1;
            if (m->shape[j] == 1)
                shape[i] = rnd(0, 5) == 0 ? -1 : rnd(0, 6) == 0 ? 0 : rnd(1, 4);
            else
                shape[i] = rnd(0, 1) ? -1 : m->shape[j];
            r.shape[i] = shape[i] == -1 ? m->shape[j] : shape[i];
        }
        n = numel_of(new_ndim, r.shape);
        if (n > MAX_NUMEL) { /* too big to check quickly: keep the sizes */
            for (int i = 0; i < new_ndim; i++) {
                int j = i - lead;
                shape[i] = j < 0 ? 1 : -1;
                r.shape[i] = j < 0 ? 1 : m->shape[j];
            }
        }
        snprintf(desc + len, size - len, " expand(%s)",
                 format_shape(new_ndim, shape, s1, sizeof s1));
        v = tr_expand(cur, shape, new_ndim);
        break;
    }
    }
    if (!v) {
        diag("failed: %s", tr_last_error());
        *bad = true;
        return NULL;
    }
    model_apply(m, &r);
    return v;
}

/* Checks view v of base against the model, and its contiguous() and
 * clone(); writes the first problem to why. */
static bool check_model(const struct tr_tensor *v, const struct tr_tensor *base,
                        const struct model *m, char *why, size_t size)
{
    const double *data = tr_tensor_data(base);
    bool contiguous = model_contiguous(m);
    int saved = nbases; /* the copies' buffers count as bases while checked */
    struct tr_tensor *c, *k;
    char s1[64], s2[64];
    bool good;

    if (!same_shape(v, m->ndim, m->shape)) {
        snprintf(why, size, "shape %s, want %s",
                 format_shape(tr_tensor_ndim(v), tr_tensor_shape(v), s1, sizeof s1),
                 format_shape(m->ndim, m->shape, s2, sizeof s2));
        return false;
    }
    if (!tr_tensor_shares_storage(v, base) ||
        tr_tensor_data(v) != (m->n ? (const void *)(data + m->idx[0]) : NULL)) {
        snprintf(why, size, "not a view of the base at element %" PRId64,
                 m->n ? m->idx[0] : -1);
        return false;
    }
    if (!values_are(v, m->idx, m->n, why, size))
        return false;
    if (tr_tensor_is_contiguous(v) != contiguous) {
        snprintf(why, size, "is_contiguous says %d, want %d", tr_tensor_is_contiguous(v),
                 contiguous);
        return false;
    }
    c = tr_contiguous(v);
    add_base(c);
    good = c && tr_tensor_is_contiguous(c) && same_shape(c, m->ndim, m->shape) &&
           tr_tensor_shares_storage(c, base) == contiguous &&
           (!contiguous || tr_tensor_data(c) == tr_tensor_data(v));
    if (!good)
        snprintf(why, size, "contiguous(): %s",
                 !c ? tr_last_error() : "wrong layout, or copies iff it should not");
    if (good && !values_are(c, m->idx, m->n, why, size))
        good = false;
    if (good && m->n > 0) {
        const double *p = tr_tensor_data(c);
        for (int64_t i = 0; i < m->n && good; i++)
            good = p[i] == (double)m->idx[i];
        if (!good)
            snprintf(why, size, "contiguous()'s buffer is not in row-major order");
    }
    tr_release(c);
    k = good ? tr_clone(v) : NULL;
    add_base(k);
    if (good && (!k || tr_tensor_shares_storage(k, base) || !tr_tensor_is_contiguous(k) ||
                 !values_are(k, m->idx, m->n, why, size))) {
        if (!k || tr_tensor_shares_storage(k, base) || !tr_tensor_is_contiguous(k))
            snprintf(why, size, "clone() is not a compact copy");
        good = false;
    }
    tr_release(k);
    nbases = saved;
    return good;
}

static void test_random_chains(void)
{
    const char *valgrind = getenv("TR_VALGRIND");
    int chains = valgrind && strcmp(valgrind, "1") == 0 ? 1000 : 10000;
    int failures = 0, ops = 0, refused = 0, contiguous = 0, empty = 0, max_ndim = 0;
    int64_t shape[4];
    char desc[1024], why[256];

    for (int c = 0; c < chains; c++) {
        int ndim = (int)rnd(0, 4), length = (int)rnd(1, 5);
        struct tr_tensor *base, *cur;
        struct model m;
        bool bad = false;

        begin();
        for (int d = 0; d < ndim; d++)
            shape[d] = rnd(0, 24) == 0 ? 0 : rnd(1, 5);
        base = arange(ndim, shape);
        model_base(&m, ndim, shape);
        snprintf(desc, sizeof desc, "%s:", format_shape(ndim, shape, why, sizeof why));
        cur = base;
        for (int i = 0; i < length && !bad; i++) {
            struct tr_tensor *next = random_op(cur, &m, desc, sizeof desc, &bad);
            ops++;
            if (bad)
                break;
            if (next == cur) {
                refused++;
                continue;
            }
            cur = next;
            if (!check_model(cur, base, &m, why, sizeof why)) {
                diag("%s", why);
                bad = true;
            }
            contiguous += model_contiguous(&m);
            empty += m.n == 0;
            max_ndim = m.ndim > max_ndim ? m.ndim : max_ndim;
        }
        if (bad && ++failures <= 10)
            diag("chain %d went wrong: %s", c, desc);
        free(m.idx);
        tr_scope_end(scope, NULL, 0);
    }
    ok(failures == 0, "%d random view chains (%d ops) match the index model (%d differ)",
       chains, ops, failures);
    diag("%d reshapes rightly refused, %d made of strided views; %d contiguous and %d empty "
         "views, up to %d dims",
         refused, strided_reshapes, contiguous, empty, max_ndim);
    ok(refused > 0 && strided_reshapes > 0 && contiguous > 0 && empty > 0 &&
           contiguous < ops - refused,
       "the chains cover refused reshapes, contiguous, strided and empty views");
}

int main(void)
{
    test_slice_named();
    test_slice_exhaustive();
    test_select();
    test_transpose_permute();
    test_flip();
    test_reshape();
    test_expand();
    test_storage();
    test_random_chains();
    is_int(tr_scope_depth(), 0, "every scope is closed");
    tr_release_cached(TR_CPU);
    return done_testing();
}
