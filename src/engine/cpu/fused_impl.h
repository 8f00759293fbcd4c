/*
 * cpu/fused_impl.h - what a fused chain (cpu/fused.c) needs from the
 * kernels it stands in for, so that it computes with their code and their
 * bits rather than with a copy of them:
 *
 * - elementwise.c describes how it runs one elementwise op (its loop, the
 *   compute dtypes, how each operand is prepared: tr__ew_describe);
 * - reduce.c and nn.c read their input from a `struct tr__source` instead
 *   of a tensor: the chain computes each block of values as the reduction
 *   or the row-wise op asks for it, so that no full-size input exists.
 */
#ifndef TR_CPU_FUSED_IMPL_H
#define TR_CPU_FUSED_IMPL_H

#include "../kernel_impl.h"
#include "../ew_scalar.h"
#include "../tensorrun_fused.h"

/* --------------------------------------------------- elementwise ops */

/* How an operand of an elementwise kernel reaches its compute dtype. */
enum tr__ew_prep {
    TR__EW_PLAIN,   /* converted: a unary op's x, cast's x */
    TR__EW_OPERAND, /* as tr__operand prepares it (rounded first to an f16
                       or bf16 result: tr__operand_rounds) */
    TR__EW_TRUTH    /* converted to bool first: where's condition */
};

struct tr__ew_desc {
    tr__block_fn fn;           /* NULL: the result is the operand itself */
    enum tr__ew_code code;     /* fn's entry of ew_ops.def (TR__EW_NONE: NULL) */
    struct tr__ew_params params; /* fn's ctx */
    enum tr_dtype in_compute;  /* every operand's */
    enum tr_dtype out_compute; /* fn's output, converted to the result's dtype */
    int nin;
    int param[3];              /* the argument of each operand */
    enum tr__ew_prep prep[3];
};

/*
 * How the kernel of op (a unary or binary op, where, clamp or cast) runs
 * on arguments args (as tr_op_run's: a tensor argument may have only its
 * value, tensor NULL) giving out.  False when it is not such an op or has
 * no loop for these dtypes.  elementwise.c keeps it beside the kernels, on
 * their own tables and rules.
 */
bool tr__ew_describe(const struct tr__op *op, const struct tr_arg *args,
                     const struct tr_value *out, struct tr__ew_desc *d);

/* ------------------------------------------------------------ sources */

/*
 * Values that stand for a tensor x of dtype `dtype` and shape `shape`
 * which is never made.  A reduction over the flagged dimensions, or a
 * row-wise op along its one flagged dimension, first calls bind with the
 * flags; then fetch(src, scratch, o, first, n, dst, to) from any thread:
 * the values [first, first + n) of the row-major walk over the flagged
 * dimensions, at index o of the row-major walk over the others, as n
 * compact values of dtype `to` at dst.  scratch is the calling thread's:
 * `scratch` bytes, set up once by init.
 */
struct tr__source {
    enum tr_dtype dtype;
    int ndim;
    int64_t shape[TR_MAX_DIMS];
    size_t scratch;
    tr_status (*bind)(const struct tr__source *src, const bool *flags);
    void (*init)(const struct tr__source *src, void *scratch);
    void (*fetch)(const struct tr__source *src, void *scratch, int64_t o, int64_t first,
                  int64_t n, char *dst, enum tr_dtype to);
    /* set by bind when neighbouring outputs lie closer in memory than
     * neighbouring values of one output (a reduction over an outer
     * dimension): then fetch_tile gives the values of nt <= TR__SOURCE_TILE
     * outputs o.. at once, reading the inputs row by row, output q's at dst
     * + q * pitch values; each output's values are fetch's */
    bool tiles;
    void (*fetch_tile)(const struct tr__source *src, void *scratch, int64_t o, int nt,
                       int64_t first, int64_t n, char *dst, int64_t pitch, enum tr_dtype to);
};

#define TR__SOURCE_TILE 64

/* A thread's scratch for src (malloc, outside the pool), set up; NULL when
 * out of memory. */
void *tr__source_scratch(const struct tr__source *src);

/*
 * The reduction op (a kernel of reduce.c, not cumsum) of src's values with
 * the other arguments args[1..] into y, which has out's dtype and shape
 * and is compact; args[0] is not read.  TR_OK or the kernel's errors.
 */
tr_status tr__reduce_source(const struct tr__op *op, const struct tr_arg *args,
                            const struct tr_value *out, const struct tr__source *src,
                            struct tr_tensor *y);

/* The same for a row-wise op of nn.c (softmax, log_softmax, l2_normalize,
 * layer_norm, rms_norm). */
tr_status tr__nn_source(const struct tr__op *op, const struct tr_arg *args,
                        const struct tr_value *out, const struct tr__source *src,
                        struct tr_tensor *y);

/* ------------------------------------------------------------ chains */

/* tr_fused_scratch_bytes of a checked chain. */
size_t tr__fused_scratch(const struct tr_fused *chain);

/* Runs chain (checked: every result filled) on inputs into y, the
 * result's memory (compact, of the result's dtype and shape). */
tr_status tr__fused_cpu_run(const struct tr_fused *chain, struct tr_tensor *const *inputs,
                            struct tr_tensor *y);
/* Runs chain (checked, no tail) on inputs into store. */
tr_status tr__fused_cpu_stream(const struct tr_fused *chain, struct tr_tensor *const *inputs,
                               const struct tr__store *store);

#endif /* TR_CPU_FUSED_IMPL_H */
