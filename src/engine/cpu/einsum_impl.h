/*
 * cpu/einsum_impl.h - einsum's equation, read once for its rule
 * (infer.c), its kernel and its memory declaration (scratch.c).
 */
#ifndef TR_EINSUM_IMPL_H
#define TR_EINSUM_IMPL_H

#include "../ops_impl.h"

/* The most operands an equation may name. */
#define TR__EINSUM_MAX_OPERANDS 32
/* Labels: the letters A..Z as 0..25 and a..z as 26..51 (ASCII order, as
 * the implicit output sorts them), then the dimensions an ellipsis
 * stands for, right-aligned, 52 for the leftmost of the widest. */
#define TR__EINSUM_ELLIPSIS 52
#define TR__EINSUM_LABELS (TR__EINSUM_ELLIPSIS + TR_MAX_DIMS)

struct tr__einsum {
    int nops;
    int ndim[TR__EINSUM_MAX_OPERANDS];                /* of each operand */
    int8_t label[TR__EINSUM_MAX_OPERANDS][TR_MAX_DIMS]; /* of each dimension; may repeat */
    int nout;
    int8_t out[TR_MAX_DIMS];                          /* the result's, distinct */
    int64_t size[TR__EINSUM_LABELS];                  /* each label's, broadcast */
};

/*
 * Reads equation for nops operands described by ops (tensors; numbers as
 * rank 0 are the caller's to give) into *e: implicit output (no "->": the
 * ellipsis dimensions, then the letters written once, sorted), ellipses
 * broadcast, a size-1 dimension broadcast against its letter's size.
 * Checks that the result and every intermediate of the left-to-right
 * contraction fit TR_MAX_DIMS.  Errors begin with name (TR_ERR_INVALID
 * for the equation, TR_ERR_SHAPE for sizes); *bad is the argument they
 * concern: 0 the equation, 1 the operands.
 */
tr_status tr__einsum_parse(const char *name, const char *equation, int nops,
                           const struct tr_value *ops, struct tr__einsum *e, int *bad);

/*
 * What the kernel takes from the pool, replayed without computing (the
 * kernel runs the same steps): for args as its arguments are described
 * and the result out (given: it has a destination), with threads
 * threads, the peak of the blocks it holds at once, the result's
 * included, and the result's block.
 */
tr_status tr__einsum_memory(const struct tr__op *op, const struct tr_value *args,
                            const struct tr_value *out, bool given, int threads,
                            uint64_t *peak, uint64_t *result_block);

#endif /* TR_EINSUM_IMPL_H */
