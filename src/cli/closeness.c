/*
 * closeness.c - the comparison loop of `tensorrun compare`, one function
 * per dtype (and one per width for exact bits), run over pieces of a run
 * on several threads, each piece into a result of its own, merged in
 * order so that the first differences and the first places of the
 * maxima do not depend on the thread count.
 */
#include "config.h"

#include "closeness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Pieces smaller than this are not worth a thread. */
#define PIECE_MIN 65536

void closeness_default(enum tr_dtype dtype, double *rtol, double *atol)
{
    switch (dtype) {
    case TR_DTYPE_F16:
        *rtol = 1e-3, *atol = 1e-5;
        break;
    case TR_DTYPE_BF16:
        *rtol = 1.6e-2, *atol = 1e-5;
        break;
    case TR_DTYPE_F32:
        *rtol = 1.3e-6, *atol = 1e-5;
        break;
    case TR_DTYPE_F64:
        *rtol = 1e-7, *atol = 1e-7;
        break;
    default:
        *rtol = 0, *atol = 0;
        break;
    }
}

bool closeness_native(enum tr_dtype dtype, const struct tolerance *tol)
{
    return tol->exact || (dtype != TR_DTYPE_F16 && dtype != TR_DTYPE_BF16);
}

bool closeness_init(struct closeness *c, size_t cap)
{
    memset(c, 0, sizeof *c);
    c->max_abs_at = c->max_rel_at = -1;
    c->cap = cap;
    if (cap > 0)
        c->first = malloc(cap * sizeof *c->first);
    return cap == 0 || c->first;
}

void closeness_free(struct closeness *c)
{
    free(c->first);
    c->first = NULL;
    c->nfirst = c->cap = 0;
}

/* Takes a differing pair into c: its values, and its items of size
 * bytes at pa and pb. */
static inline void note(struct closeness *c, int64_t at, double a, double b, const void *pa,
                        const void *pb, size_t size)
{
    c->differ++;
    if (c->nfirst < c->cap) {
        struct difference *d = &c->first[c->nfirst++];
        *d = (struct difference){at, a, b, 0, 0};
        memcpy(&d->bits_a, pa, size);
        memcpy(&d->bits_b, pb, size);
    }
}

/* The maxima over a pair that differs, has no NaN, and whose absolute
 * difference is d (0 for integers f64 cannot tell apart). */
static inline void track(struct closeness *c, int64_t at, double d, double b)
{
    double mb = fabs(b);

    if (d > c->max_abs || c->max_abs_at < 0) {
        c->max_abs = d;
        c->max_abs_at = at;
    }
    /* d / |b| > max_rel without the division; |b| 0 makes it infinite */
    if (d > c->max_rel * mb || c->max_rel_at < 0) {
        double r = d / mb;
        if (!isnan(r) && (r > c->max_rel || c->max_rel_at < 0)) {
            c->max_rel = r;
            c->max_rel_at = at;
        }
    }
}

/* NumPy's isclose for one pair, with the maxima. */
static inline void pair(struct closeness *c, int64_t at, double a, double b, const void *pa,
                        const void *pb, size_t size, const struct tolerance *tol)
{
    if (a == b)
        return;
    if (isnan(a) || isnan(b)) {
        if (!(tol->equal_nan && isnan(a) && isnan(b)))
            note(c, at, a, b, pa, pb, size);
        return;
    }
    track(c, at, fabs(a - b), b);
    if (isinf(a) || isinf(b) || !(fabs(a - b) <= tol->atol + tol->rtol * fabs(b)))
        note(c, at, a, b, pa, pb, size);
}

#define FLOAT_LOOP(name, T)                                                                    \
    static void name(struct closeness *c, const void *pa, const void *pb, int64_t n,         \
                     int64_t base, const struct tolerance *tol)                             \
    {                                                                                         \
        const T *a = pa, *b = pb;                                                             \
        for (int64_t i = 0; i < n; i++)                                                       \
            pair(c, base + i, (double)a[i], (double)b[i], &a[i], &b[i], sizeof(T), tol);      \
    }

FLOAT_LOOP(close_f32, float)
FLOAT_LOOP(close_f64, double)

/* Integers: exactly, unless a tolerance is given (then in f64).  The
 * absolute difference of two differing integers is taken exactly (in
 * long double, whose 64-bit mantissa holds any difference of 64-bit
 * integers) before it is rounded to f64. */
#define INT_LOOP(name, T)                                                                      \
    static void name(struct closeness *c, const void *pa, const void *pb, int64_t n,         \
                     int64_t base, const struct tolerance *tol)                             \
    {                                                                                         \
        const T *a = pa, *b = pb;                                                             \
        bool exact = tol->rtol == 0 && tol->atol == 0;                                        \
        for (int64_t i = 0; i < n; i++) {                                                     \
            if (a[i] == b[i])                                                                 \
                continue;                                                                     \
            if (exact) {                                                                      \
                track(c, base + i, (double)fabsl((long double)a[i] - (long double)b[i]),      \
                      (double)b[i]);                                                          \
                note(c, base + i, (double)a[i], (double)b[i], &a[i], &b[i], sizeof(T));       \
            } else {                                                                          \
                pair(c, base + i, (double)a[i], (double)b[i], &a[i], &b[i], sizeof(T), tol);  \
            }                                                                                 \
        }                                                                                     \
    }

INT_LOOP(close_i8, int8_t)
INT_LOOP(close_u8, uint8_t)
INT_LOOP(close_i16, int16_t)
INT_LOOP(close_u16, uint16_t)
INT_LOOP(close_i32, int32_t)
INT_LOOP(close_u32, uint32_t)
INT_LOOP(close_i64, int64_t)
INT_LOOP(close_u64, uint64_t)

/* One element of dtype as f64, for a report. */
static double value_at(enum tr_dtype dtype, const void *p, int64_t i)
{
    switch (dtype) {
    case TR_DTYPE_BOOL:
    case TR_DTYPE_U8: return ((const uint8_t *)p)[i];
    case TR_DTYPE_I8: return ((const int8_t *)p)[i];
    case TR_DTYPE_I16: return ((const int16_t *)p)[i];
    case TR_DTYPE_U16: return ((const uint16_t *)p)[i];
    case TR_DTYPE_I32: return ((const int32_t *)p)[i];
    case TR_DTYPE_U32: return ((const uint32_t *)p)[i];
    case TR_DTYPE_I64: return (double)((const int64_t *)p)[i];
    case TR_DTYPE_U64: return (double)((const uint64_t *)p)[i];
    case TR_DTYPE_F16: return tr_f16_to_f32(((const uint16_t *)p)[i]);
    case TR_DTYPE_BF16: return tr_bf16_to_f32(((const uint16_t *)p)[i]);
    case TR_DTYPE_F32: return ((const float *)p)[i];
    case TR_DTYPE_F64: return ((const double *)p)[i];
    default: return NAN;
    }
}

/* Exact: the same bits, compared a word of the item's width at a time. */
static void close_bits(struct closeness *c, enum tr_dtype dtype, const void *pa, const void *pb,
                       int64_t n, int64_t base)
{
    size_t size = tr_dtype_size(dtype);

    for (int64_t i = 0; i < n; i++) {
        const char *x = (const char *)pa + (size_t)i * size, *y = (const char *)pb + (size_t)i * size;
        double a, b;
        if (memcmp(x, y, size) == 0)
            continue;
        a = value_at(dtype, pa, i);
        b = value_at(dtype, pb, i);
        if (!isnan(a) && !isnan(b) && a != b)
            track(c, base + i, fabs(a - b), b);
        note(c, base + i, a, b, x, y, size);
    }
}

typedef void (*loop_fn)(struct closeness *, const void *, const void *, int64_t, int64_t,
                        const struct tolerance *);

static loop_fn loop_for(enum tr_dtype dtype)
{
    switch (dtype) {
    case TR_DTYPE_BOOL:
    case TR_DTYPE_U8: return close_u8;
    case TR_DTYPE_I8: return close_i8;
    case TR_DTYPE_I16: return close_i16;
    case TR_DTYPE_U16: return close_u16;
    case TR_DTYPE_I32: return close_i32;
    case TR_DTYPE_U32: return close_u32;
    case TR_DTYPE_I64: return close_i64;
    case TR_DTYPE_U64: return close_u64;
    case TR_DTYPE_F32: return close_f32;
    case TR_DTYPE_F64: return close_f64;
    default: return NULL;
    }
}

/* Adds what piece (the elements after c's) found to c. */
static void merge(struct closeness *c, const struct closeness *piece)
{
    size_t take = piece->nfirst < c->cap - c->nfirst ? piece->nfirst : c->cap - c->nfirst;

    memcpy(c->first + c->nfirst, piece->first, take * sizeof *c->first);
    c->nfirst += take;
    c->differ += piece->differ;
    if (piece->max_abs_at >= 0 && (c->max_abs_at < 0 || piece->max_abs > c->max_abs)) {
        c->max_abs = piece->max_abs;
        c->max_abs_at = piece->max_abs_at;
    }
    if (piece->max_rel_at >= 0 && (c->max_rel_at < 0 || piece->max_rel > c->max_rel)) {
        c->max_rel = piece->max_rel;
        c->max_rel_at = piece->max_rel_at;
    }
}

static void run_piece(struct closeness *c, enum tr_dtype dtype, const void *a, const void *b,
                      int64_t n, int64_t base, const struct tolerance *tol)
{
    loop_fn loop = loop_for(dtype);

    if (tol->exact || !loop)
        close_bits(c, dtype, a, b, n, base);
    else
        loop(c, a, b, n, base, tol);
}

bool closeness_add(struct closeness *c, enum tr_dtype dtype, const void *a, const void *b,
                   int64_t n, int64_t base, const struct tolerance *tol, int threads)
{
    size_t size = tr_dtype_size(dtype), room = c->cap - c->nfirst;
    int64_t npieces = n / PIECE_MIN, each;
    struct closeness *pieces;
    bool ok = true;

    if (npieces > threads)
        npieces = threads;
    if (npieces <= 1) {
        run_piece(c, dtype, a, b, n, base, tol);
        return true;
    }
    pieces = calloc((size_t)npieces, sizeof *pieces);
    if (!pieces)
        return false;
    for (int64_t p = 0; p < npieces; p++)
        ok &= closeness_init(&pieces[p], room);
    each = (n + npieces - 1) / npieces;
    if (ok) {
#pragma omp parallel for num_threads((int)npieces) schedule(static, 1)
        for (int64_t p = 0; p < npieces; p++) {
            int64_t from = p * each, len = n - from < each ? n - from : each;
            if (len > 0)
                run_piece(&pieces[p], dtype, (const char *)a + (size_t)from * size,
                          (const char *)b + (size_t)from * size, len, base + from, tol);
        }
        for (int64_t p = 0; p < npieces; p++)
            merge(c, &pieces[p]);
    }
    for (int64_t p = 0; p < npieces; p++)
        closeness_free(&pieces[p]);
    free(pieces);
    return ok;
}
