/*
 * ops_impl.h - the op table's rows as the engine sees them: the public
 * description plus the rule that infers results and the dtypes taken.
 */
#ifndef TR_OPS_IMPL_H
#define TR_OPS_IMPL_H

#include "engine_impl.h"
#include "tensorrun_ops.h"

enum tr__rule {
    TR__RULE_CREATE, TR__RULE_FULL, TR__RULE_ARANGE, TR__RULE_LINSPACE, TR__RULE_EYE,
    TR__RULE_RESHAPE, TR__RULE_TRANSPOSE, TR__RULE_PERMUTE, TR__RULE_SQUEEZE,
    TR__RULE_UNSQUEEZE, TR__RULE_EXPAND, TR__RULE_FLATTEN, TR__RULE_DIAGONAL,
    TR__RULE_SAME, TR__RULE_CAST, TR__RULE_TO, TR__RULE_FLOATING, TR__RULE_GELU, TR__RULE_SOFTPLUS, TR__RULE_NAN_TO_NUM,
    TR__RULE_PREDICATE, TR__RULE_ARITH, TR__RULE_DIVIDE, TR__RULE_COMPARE,
    TR__RULE_LOGICAL, TR__RULE_WHERE, TR__RULE_CLAMP, TR__RULE_SUM, TR__RULE_MEAN,
    TR__RULE_EXTREME, TR__RULE_ARGEXTREME, TR__RULE_NORM, TR__RULE_TRUTH, TR__RULE_COUNT,
    TR__RULE_CUMSUM, TR__RULE_QUANTILE, TR__RULE_MATMUL, TR__RULE_OUTER, TR__RULE_DOT, TR__RULE_SOFTMAX,
    TR__RULE_LAYER_NORM, TR__RULE_TOPK, TR__RULE_SORT, TR__RULE_ARGSORT,
    TR__RULE_GATHER, TR__RULE_INDEX_SELECT, TR__RULE_CONCAT, TR__RULE_STACK,
    TR__RULE_QUANTIZE, TR__RULE_DEQUANTIZE,
    TR__RULE_LIKE, TR__RULE_FLIP, TR__RULE_NARROW, TR__RULE_UNFLATTEN, TR__RULE_MOVEDIM,
    TR__RULE_TRIANGLE, TR__RULE_ROLL, TR__RULE_REPEAT, TR__RULE_REPEAT_INTERLEAVE, TR__RULE_PAD,
    TR__RULE_TAKE_ALONG_DIM, TR__RULE_ONE_HOT, TR__RULE_SPLIT, TR__RULE_EINSUM,
    TR__RULE_CDIST, TR__RULE_COSINE, TR__RULE_CROSS_ENTROPY
};

enum tr__takes {
    TR__TAKES_ANY, TR__TAKES_NUMERIC, TR__TAKES_INTEGRAL, TR__TAKES_FLOAT, TR__TAKES_SIGNED,
    TR__TAKES_INTEGER, /* the integers, not bool */
    TR__TAKES_NONE     /* none (the cuda column of ops.def: no CUDA kernel) */
};

/* Whether dtype is among those of class t. */
bool tr__takes(enum tr__takes t, enum tr_dtype dtype);

struct tr_arg;

struct tr__op {
    struct tr_op_info info; /* first: a tr_op_info pointer is a tr__op pointer */
    enum tr__rule rule;
    enum tr__takes takes;
    enum tr__takes cuda; /* the dtypes the CUDA module has kernels for */
    /* the CPU kernel (kernel_impl.h's tr__kernel_fn), NULL until written */
    tr_status (*kernel)(const struct tr__op *op, const struct tr_arg *args,
                        const struct tr_value *out, const struct tr_dest *dest,
                        struct tr_tensor **results);
};

const struct tr__op *tr__op_of(const struct tr_op_info *info);
/* The index of op's parameter called name, or -1. */
int tr__param_index(const struct tr__op *op, const char *name);
/* A tensor of x's description over a buffer that is never read nor
 * checked, for view code that only computes strides (tr_op_layout,
 * tr_index_layout): element 0 lies as far into it as x's negative strides
 * reach before it, so that x[::-1] stands in as it is.  In the current
 * scope; errors begin with fn. */
struct tr_tensor *tr__stand_in(const char *fn, const struct tr_value *x);
/* A number argument's value as a double (an integer, a bool or a float). */
double tr__number(const struct tr_value *v);

#endif /* TR_OPS_IMPL_H */
