/*
 * closeness.h - whether two runs of elements are close, NumPy's isclose
 * rule in f64: |a - b| <= atol + rtol * |b|, an infinity close only to
 * the same infinity, NaN close to NaN when equal_nan.  Or, exact, the
 * same bits.  What `tensorrun compare` counts and reports for a tensor:
 * the elements that differ, the largest absolute and relative
 * differences and where they are, and the first differing elements in
 * row-major order.
 */
#ifndef TR_CLI_CLOSENESS_H
#define TR_CLI_CLOSENESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensorrun.h"

struct tolerance {
    double rtol, atol;
    bool exact;                  /* the same bits (then rtol and atol are unused) */
    bool equal_nan;
};

/* One differing element: its row-major index in the tensor, both values
 * as f64 and both items' bytes as they lie (at most 8: integers past
 * 2^53 and NaN payloads are shown from them). */
struct difference {
    int64_t at;
    double a, b;
    uint64_t bits_a, bits_b;
};

struct closeness {
    int64_t differ;              /* elements that are not close */
    double max_abs, max_rel;     /* over every pair without a NaN; 0 when none */
    int64_t max_abs_at, max_rel_at; /* their first places, -1 when none */
    struct difference *first;    /* the first differing elements, in order */
    size_t nfirst, cap;          /* held, and room for (the report's N) */
};

/* The tolerance compare uses for dtype by default, as PyTorch's
 * testing.assert_close chooses: f16 1e-3/1e-5, bf16 1.6e-2/1e-5, f32
 * 1.3e-6/1e-5, f64 1e-7/1e-7, and 0/0 (exact values) for integers and
 * bool. */
void closeness_default(enum tr_dtype dtype, double *rtol, double *atol);

/* Whether dtype can be compared as it lies by closeness_add (f32, f64,
 * integers, bool; f16 and bf16 are widened first, and under exact
 * tolerance every dtype is). */
bool closeness_native(enum tr_dtype dtype, const struct tolerance *tol);

/* An empty result with room for cap differences (cap 0: none kept);
 * false when out of memory. */
bool closeness_init(struct closeness *c, size_t cap);
void closeness_free(struct closeness *c);

/*
 * Compares n elements of dtype at a and b (compact, host memory) whose
 * first one is element base of the tensor, into c, on up to threads
 * threads; the result is the same for any thread count.  Elements must
 * come in row-major order across calls.  false when out of memory.
 */
bool closeness_add(struct closeness *c, enum tr_dtype dtype, const void *a, const void *b,
                   int64_t n, int64_t base, const struct tolerance *tol, int threads);

#endif /* TR_CLI_CLOSENESS_H */
