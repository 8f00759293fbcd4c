/*
 * fold.h - arithmetic on constants, done before anything runs: integers
 * exactly in 64 bits, floats in double precision.  A constant only takes a
 * tensor's dtype where it meets a tensor (the op table's rules do that), so
 * `2 ** 25` stays the integer 33554432 and `1 / 3` the double nearest 1/3.
 */
#ifndef TR_CLI_FOLD_H
#define TR_CLI_FOLD_H

#include "tensorrun_ops.h"

enum fold_result {
    FOLD_NO,     /* not arithmetic on known numbers: the op runs */
    FOLD_OK,     /* *out is the constant result */
    FOLD_ERROR   /* the arithmetic has no result (an integer overflow, an
                    integer to a negative power): tr_last_error() says why,
                    TR_ERR_INVALID */
};

/*
 * Folds op applied to args (args[i] for the op's params[i], defaults
 * filled in) when every argument is a known number: neg, add, sub, mul,
 * div, floor_divide, remainder (Python's: the divisor's sign), pow,
 * maximum, minimum, and on integers bitwise_not, bitwise_and, bitwise_or
 * and bitwise_xor.  Integers with integers give integers (div gives a
 * float, as true division does; an integer division by zero is an error);
 * any float makes it a float (bitwise ops of floats are left to the op,
 * which refuses them).
 * The result is known and weak, as a number written in the pipeline is.
 */
enum fold_result fold_constants(const char *op, const struct tr_value *args, int nargs,
                                struct tr_value *out);

/*
 * What is known of a tensor before anything is computed, as constants:
 * attr "shape" (a list of integers, written to items, which has room for
 * TR_MAX_DIMS), "ndim", "dtype", and "numel" (numel(x)).  tensor is a
 * TR_VALUE_TENSOR; false when attr is none of these, or (TR_ERR_SHAPE)
 * when numel passes int64.
 */
bool fold_attribute(const char *attr, const struct tr_value *tensor, struct tr_value *out,
                    struct tr_value *items);

/* Item i of a list of n (negative i counts from the end): *at is its
 * place.  FOLD_ERROR (TR_ERR_INDEX) when there is no such item. */
enum fold_result fold_list_index(int64_t n, int64_t i, int64_t *at);

/* A slice start:stop:step of a list of n, with Python's rules (any of
 * them TR_SLICE_NONE when left out): the first item, the step between
 * items and how many.  FOLD_ERROR (TR_ERR_INDEX) for a step of 0. */
enum fold_result fold_list_slice(int64_t n, int64_t start, int64_t stop, int64_t step,
                                 int64_t *first, int64_t *by, int64_t *count);

/*
 * The dtype a constant is stored as when it is written out, meeting no
 * tensor: i64, f64 or bool for a number; for a list of numbers (x.shape),
 * the widest of its items' (items: its count items).  TR_DTYPE_COUNT for
 * anything else (strings, None, nested lists).
 */
enum tr_dtype fold_stored_dtype(const struct tr_value *v, const struct tr_value *items);

#endif /* TR_CLI_FOLD_H */
