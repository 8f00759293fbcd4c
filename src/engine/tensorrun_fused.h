/*
 * tensorrun_fused.h - fused chains: a few elementwise ops, and optionally a
 * reduction or a row-wise op after them, run as one blocked pass over
 * memory.  `y = x * 2.0 + 1.0; s = sum(y)` reads x once and makes s alone:
 * no tensor of x's size is ever allocated.
 *
 * A chain is plain data that the caller builds and owns (an instruction
 * of a program, say): inputs by number, steps that each name an op by id
 * and its arguments (chain inputs, constants, earlier steps), and a tail.
 * tr_fused_check types it as tr_op_infer types each op; tr_fused_run runs
 * it.  Nothing here takes over or releases the caller's tensors.
 *
 * The promise: the result has exactly the bits of the unfused evaluation,
 * each op run alone by tr_op_run on the results of the ones before, for
 * any thread count.  Each step's values are rounded to that step's dtype
 * (f16 and bf16 round trips included) and computed by the op's own loop
 * (cpu/elementwise.c); a reduction's or row-wise op's values are grouped
 * into the blocks, and summed by the tree, that the op uses on a tensor
 * (cpu/reduce_impl.h).  See doc/design.md, "Fused chains".
 */
#ifndef TENSORRUN_FUSED_H
#define TENSORRUN_FUSED_H

#include "tensorrun_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TR_FUSED_MAX_STEPS 16
#define TR_FUSED_MAX_INPUTS 8

/* What a step's argument is. */
enum tr_fused_ref {
    TR_FUSED_CONST, /* value: a number, bool, string, dtype, None or list */
    TR_FUSED_INPUT, /* index: chain input number index */
    TR_FUSED_STEP   /* index: the result of an earlier step */
};

struct tr_fused_arg {
    enum tr_fused_ref ref;
    int index;
    struct tr_value value; /* TR_FUSED_CONST only; lists are the caller's */
};

/* One op: args[i] for the op's params[i], defaults filled in, as
 * tr_op_run takes them.  result is filled by tr_fused_check. */
struct tr_fused_op {
    enum tr_op_id op;
    struct tr_fused_arg args[TR_OP_MAX_PARAMS];
    struct tr_value result;
};

/*
 * The chain: steps[0..nsteps) in order, then, when has_tail, the tail op,
 * whose x (args[0]) is the last step's result (args[0] is not read; its
 * other arguments are constants or, for layer_norm's weight and bias,
 * chain inputs).  Without a tail the last step's result is the chain's.
 * Every step but the last is an argument of a later step.
 */
struct tr_fused {
    int ninputs;
    int nsteps;
    struct tr_fused_op steps[TR_FUSED_MAX_STEPS];
    bool has_tail;
    struct tr_fused_op tail;
};

/*
 * Whether op may be a step of a chain, called on args (its arguments'
 * descriptions, as tr_op_infer takes them) with result (what tr_op_infer
 * gave).  Steps are the elementwise ops: the unary and binary ops
 * (comparisons and logic included), where, clamp and cast, on CPU tensors,
 * with at least one tensor argument.  Not pow of integers unless its
 * exponent is a known constant of at least 0 (the op checks a tensor
 * exponent for negative values before it computes).
 */
bool tr_fused_can_step(enum tr_op_id op, const struct tr_value *args,
                       const struct tr_value *result);

/*
 * Whether op may be a chain's tail: a reduction of the reduce group that
 * reads its input a block at a time (sum, mean, prod, max, min, argmax,
 * argmin, var, std, norm, all, any, logsumexp; not cumsum), or a row-wise
 * op of the neural group (softmax, log_softmax, l2_normalize, layer_norm,
 * rms_norm), on a CPU tensor.
 */
bool tr_fused_can_tail(enum tr_op_id op, const struct tr_value *args,
                       const struct tr_value *result);

/*
 * Types chain on inputs[0..ninputs) (tensor descriptions): tr_op_infer on
 * every step and on the tail, in order, filling each one's result; and
 * checks that each is allowed (tr_fused_can_step, tr_fused_can_tail), that
 * every reference is in range and earlier, and that every step but the
 * last is used.  *result (when not NULL) gets the chain's result.  On
 * failure returns the status of tr_op_infer or TR_ERR_INVALID, with a
 * message naming the step, and sets *bad_step (when not NULL) to the step
 * at fault (nsteps for the tail; -1 when none is).
 */
tr_status tr_fused_check(struct tr_fused *chain, const struct tr_value *inputs,
                         struct tr_value *result, int *bad_step);

/*
 * The scratch memory a run of chain (checked) takes on each thread that
 * computes it, in bytes: the blocks of the steps' values.  It is allocated
 * with malloc, outside the pool, for the length of the run.  The pool
 * holds what tr_fused_memory declares.
 */
size_t tr_fused_scratch_bytes(const struct tr_fused *chain);

/*
 * What a run of chain (checked) takes from the pool, as tr_op_scratch
 * declares an op's (struct tr_op_memory, block bytes): results[0] is the
 * result's block (0 when given: the run writes into a destination); a
 * tail's own buffers, which its kernel takes from the pool as it does
 * unfused, are scratch: a reduction's partial results, a row-wise op's
 * weight and bias in its compute dtype and every thread's line buffers
 * (one block each, taken after the result, given back before the run
 * returns); peak is their sum.  A chain without a tail has no scratch.
 * threads is the run's tr_num_threads().  The figure is exact:
 * tr_fused_run raises peak_active_bytes by out->peak over the bytes live
 * before it and leaves out->results[0] active.  TR_ERR_INVALID for
 * threads < 1 or a chain without steps.
 */
tr_status tr_fused_memory(const struct tr_fused *chain, bool given, int threads,
                          struct tr_op_memory *out);

/*
 * Runs chain on inputs[0..chain->ninputs) (CPU tensors of any strides,
 * broadcast as the ops broadcast them); checks it first as tr_fused_check
 * does (chain itself is not changed).  *result is a new tensor in the
 * calling thread's innermost scope: a new handle of dest when dest is not
 * NULL (caller memory of the result's dtype and shape, compact, writable,
 * on the CPU: TR_ERR_INVALID otherwise), else a new pool tensor.  The
 * pool allocates nothing else but a tail's buffers (tr_fused_memory).
 * TR_ERR_DEVICE for a tensor not on the CPU.
 */
tr_status tr_fused_run(const struct tr_fused *chain, struct tr_tensor *const *inputs,
                       struct tr_tensor *dest, struct tr_tensor **result);

/*
 * Runs chain (no tail) on inputs as tr_fused_run does, handing every byte
 * of the result to sink->store (struct tr_sink, tensorrun_ops.h: n bytes
 * of the result in C order at byte offset, from any thread, in runs of at
 * most a thread's stage; 0 or an errno, after which that thread stores
 * nothing more; sink->reserve is not called): nothing of the result's
 * size exists anywhere, and the pool allocates nothing.  TR_ERR_INVALID for a chain with a
 * tail; TR_ERR_IO (with the errno's text) when a store fails.
 */
tr_status tr_fused_run_sink(const struct tr_fused *chain, struct tr_tensor *const *inputs,
                            const struct tr_sink *sink);

#ifdef __cplusplus
}
#endif

#endif /* TENSORRUN_FUSED_H */
