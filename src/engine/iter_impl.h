/*
 * iter_impl.h - iteration over strided operands of one shape.  The kernels
 * run a plain inner loop over the last dimension and step through the
 * others with these offsets, after dimensions that are contiguous in every
 * operand have been folded into one.
 */
#ifndef TR_ITER_IMPL_H
#define TR_ITER_IMPL_H

#include "engine_impl.h"

#define TR__ITER_MAX_OPS 4

struct tr__iter {
    int ndim; /* at least 1 after tr__iter_init */
    int nops;
    int64_t shape[TR_MAX_DIMS];
    int64_t strides[TR__ITER_MAX_OPS][TR_MAX_DIMS]; /* in bytes */
};

/* Sets up iteration over shape for nops operands (at most TR__ITER_MAX_OPS)
 * whose byte strides are strides[k][0..ndim).  Dimensions of size 1 are
 * dropped and neighbours that are contiguous in every operand are merged;
 * a scalar becomes one dimension of size 1. */
void tr__iter_init(struct tr__iter *it, int ndim, const int64_t *shape, int nops,
                   const int64_t *const *strides);
/* The number of inner rows: the product of all but the last dimension. */
int64_t tr__iter_rows(const struct tr__iter *it);
/* The byte offset of every operand at the start of row `row`. */
void tr__iter_row_offsets(const struct tr__iter *it, int64_t row, int64_t *offsets);

/* Copies the strided view at src (byte strides) into dst with byte strides
 * dst_strides, element by element, using all threads for large copies. */
void tr__cpu_copy(char *dst, const int64_t *dst_strides, const char *src,
                  const int64_t *src_strides, int ndim, const int64_t *shape,
                  size_t itemsize);

/* Like tr__cpu_copy, converting each element from dtype `from` to `to`
 * with the rules of tr_copy_into. */
void tr__cpu_cast(char *dst, const int64_t *dst_strides, enum tr_dtype to, const char *src,
                  const int64_t *src_strides, enum tr_dtype from, int ndim,
                  const int64_t *shape);

/* Sets bytes bytes at dst to zero, using all threads for large spans. */
void tr__cpu_fill_zero(char *dst, uint64_t bytes);

#endif /* TR_ITER_IMPL_H */
