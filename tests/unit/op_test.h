/*
 * op_test.h - what the unit tests of ops share: arguments for tr_op_run,
 * running an op with its defaults, and reading results back.  Static
 * inline, so a test that uses some of it pays nothing for the rest.
 */
#ifndef TR_OP_TEST_H
#define TR_OP_TEST_H

#include <math.h>
#include <string.h>

#include "tensorrun_ops.h"

static inline struct tr_arg tensor_arg(struct tr_tensor *t)
{
    struct tr_arg a;

    memset(&a, 0, sizeof a);
    a.tensor = t;
    a.value = tr_value_of(t);
    return a;
}

/* A number written in the pipeline: weak, and known. */
static inline struct tr_arg int_arg(int64_t v)
{
    struct tr_arg a;

    memset(&a, 0, sizeof a);
    a.value.kind = TR_VALUE_INT;
    a.value.integer = v;
    a.value.number = (double)v;
    a.value.known = a.value.weak = true;
    return a;
}

static inline struct tr_arg float_arg(double v)
{
    struct tr_arg a;

    memset(&a, 0, sizeof a);
    a.value.kind = TR_VALUE_FLOAT;
    a.value.number = v;
    a.value.known = a.value.weak = true;
    return a;
}

static inline struct tr_arg bool_arg(bool v)
{
    struct tr_arg a;

    memset(&a, 0, sizeof a);
    a.value.kind = TR_VALUE_BOOL;
    a.value.boolean = v;
    a.value.known = true;
    return a;
}

static inline struct tr_arg dtype_arg(enum tr_dtype d)
{
    struct tr_arg a;

    memset(&a, 0, sizeof a);
    a.value.kind = TR_VALUE_DTYPE;
    a.value.dtype = d;
    a.value.known = true;
    return a;
}

static inline struct tr_arg string_arg(const char *s)
{
    struct tr_arg a;

    memset(&a, 0, sizeof a);
    a.value.kind = TR_VALUE_STRING;
    a.value.string = s;
    a.value.known = true;
    return a;
}

static inline struct tr_arg none_arg(void)
{
    struct tr_arg a;

    memset(&a, 0, sizeof a);
    a.value.kind = TR_VALUE_NONE;
    return a;
}

/* A list argument of n items (which the caller keeps). */
static inline struct tr_arg list_arg(const struct tr_arg *items, size_t n)
{
    struct tr_arg a;

    memset(&a, 0, sizeof a);
    a.value.kind = TR_VALUE_LIST;
    a.value.count = n;
    a.value.known = true;
    a.items = items;
    return a;
}

/* Runs op on the given leading arguments (defaults for the rest), its
 * result's destination dest (NULL: the pool); fills results (when not
 * NULL) and returns the first, or NULL. */
static inline struct tr_tensor *run_dest(const char *name, const struct tr_arg *given, int n,
                                         const struct tr_dest *dest, struct tr_tensor **results)
{
    const struct tr_op_info *op = tr_op_find(name);
    struct tr_arg args[TR_OP_MAX_PARAMS];
    struct tr_tensor *r[TR_OP_MAX_RESULTS] = {NULL};

    if (!op)
        return NULL;
    for (int i = 0; i < op->nparams; i++) {
        if (i < n) {
            args[i] = given[i];
        } else {
            memset(&args[i], 0, sizeof args[i]);
            args[i].value = op->params[i].default_value;
        }
    }
    if (tr_op_run(op, args, dest, r) != TR_OK)
        return NULL;
    if (results)
        memcpy(results, r, (size_t)op->nresults * sizeof *r);
    return r[0];
}

static inline struct tr_tensor *run2(const char *name, const struct tr_arg *given, int n,
                                     struct tr_tensor **results)
{
    return run_dest(name, given, n, NULL, results);
}

/* run() into dest. */
static inline struct tr_tensor *run_into(const char *name, const struct tr_arg *given, int n,
                                         const struct tr_dest *dest)
{
    return run_dest(name, given, n, dest, NULL);
}

static inline struct tr_tensor *run(const char *name, const struct tr_arg *given, int n)
{
    return run2(name, given, n, NULL);
}

/* Element i of t in row-major order, as a double. */
static inline double flat(const struct tr_tensor *t, int64_t i)
{
    int64_t index[TR_MAX_DIMS];
    int n = tr_tensor_ndim(t);
    const int64_t *shape = tr_tensor_shape(t);
    double v = NAN;

    for (int d = n - 1; d >= 0; d--) {
        index[d] = i % shape[d];
        i /= shape[d];
    }
    tr_tensor_item(t, index, &v);
    return v;
}

static inline bool is(const struct tr_tensor *t, enum tr_dtype dtype, int ndim,
                      const int64_t *shape)
{
    return t && tr_tensor_dtype(t) == dtype && tr_tensor_ndim(t) == ndim &&
           (ndim == 0 || memcmp(tr_tensor_shape(t), shape, (size_t)ndim * sizeof *shape) == 0);
}

/* Values in row-major order against a list (NaN matches NaN). */
static inline bool values(const struct tr_tensor *t, const double *want, int64_t n)
{
    if (!t || tr_tensor_numel(t) != n)
        return false;
    for (int64_t i = 0; i < n; i++) {
        double v = flat(t, i);
        if (!(v == want[i] || (isnan(v) && isnan(want[i]))))
            return false;
    }
    return true;
}

#endif
