/*
 * tensorrun_ops.h - the op table: every op of the expression language (the OPS
 * section of tensorrun-pipeline(5) is made from it) with its
 * parameters, results, the dtypes it takes, one line of documentation, and
 * the rule that gives its results' dtypes and shapes from its arguments
 * before anything is computed.  The expression language, `tensorrun ops`,
 * the validator and the executor all read this one table (ops.def).
 */
#ifndef TENSORRUN_OPS_H
#define TENSORRUN_OPS_H

#include "tensorrun.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What is known of a value before anything is computed: a tensor's dtype,
 * shape and device, or a constant's value. */
enum tr_value_kind {
    TR_VALUE_NONE,    /* None, or an argument left out */
    TR_VALUE_TENSOR,
    TR_VALUE_INT,     /* known when `known`; e.g. a param, a literal */
    TR_VALUE_FLOAT,
    TR_VALUE_BOOL,
    TR_VALUE_STRING,
    TR_VALUE_DTYPE,
    TR_VALUE_LIST
};

struct tr_value {
    enum tr_value_kind kind;
    /* TR_VALUE_TENSOR */
    enum tr_dtype dtype;
    int ndim;
    int64_t shape[TR_MAX_DIMS];
    struct tr_device device;
    /* numbers: known values are constants of the pipeline (literals,
     * params); an unknown one (chunk_start) is only its kind */
    bool known;
    bool weak;        /* a number written in the pipeline: PyTorch's weak
                         scalar, which does not widen a tensor's dtype */
    int64_t integer;
    double number;
    bool boolean;
    const char *string;
    /* TR_VALUE_LIST: items owned by whoever made the list */
    size_t count;
    const struct tr_value *items;
    /* TR_VALUE_TENSOR: how its elements lie in memory, which only
     * tr_op_scratch reads (a kernel copies an operand it cannot read where
     * it is; a reduction over an outer dimension reads in tiles).  false:
     * compact, in C order; true: strides gives them, in elements, as
     * tr_tensor_strides does.  tr_value_of fills both. */
    bool strided;
    int64_t strides[TR_MAX_DIMS];
};

/* How a parameter takes its argument. */
#define TR_PARAM_KIND_MAP(X)                                                 \
    X(TENSOR, "tensor", "a tensor or a number")                              \
    X(TENSOR_OR_NONE, "tensor?", "a tensor, a number or None")               \
    X(TENSORS, "tensors", "a list of tensors")                               \
    X(INT, "int", "an integer")                                              \
    X(INT_OR_NONE, "int?", "an integer or None")                             \
    X(DIMS, "dims", "a dimension, a list of dimensions, or None")            \
    X(SHAPE, "shape", "a shape: an integer or a list of integers")           \
    X(NUMBER, "number", "a number")                                          \
    X(NUMBER_OR_NONE, "number?", "a number or None")                         \
    X(NUMBERS, "numbers", "a number or a list of numbers")                   \
    X(BOOL, "bool", "true or false")                                         \
    X(DTYPE, "dtype", "a dtype")                                             \
    X(DTYPE_OR_NONE, "dtype?", "a dtype or None")                            \
    X(QDTYPE, "qdtype", "a dtype, i4 or u4")                                 \
    X(QDTYPE_OR_NONE, "qdtype?", "a dtype, i4, u4 or None")                  \
    X(STRING, "string", "a string")                                          \
    X(DEVICE, "device", "a device: \"cpu\", \"cuda\" or \"cuda:N\"")

enum tr_param_kind {
#define TR__PARAM_ENUM(e, word, what) TR_PARAM_##e,
    TR_PARAM_KIND_MAP(TR__PARAM_ENUM)
#undef TR__PARAM_ENUM
    TR_PARAM_KIND_COUNT
};

/* "int?" and "an integer or None" for TR_PARAM_INT_OR_NONE. */
const char *tr_param_kind_word(enum tr_param_kind kind);
const char *tr_param_kind_what(enum tr_param_kind kind);

/*
 * The packed 4-bit dtype words of the quantise ops: "i4" (two's
 * complement nibbles) and "u4" (unsigned), two values a byte in a u8
 * tensor, element 2k in the low nibble and 2k+1 in the high one.  They are
 * not tensor dtypes (tr_dtype_parse refuses them; no tensor has them): a
 * qdtype parameter (TR_PARAM_QDTYPE, the quantise ops' dtype) takes them
 * as the strings "i4" and "u4", which the expression language spells as
 * the reserved words i4 and u4.  Whether word is one of the two.
 */
bool tr_packed_dtype_word(const char *word);

struct tr_param {
    const char *name;
    enum tr_param_kind kind;
    bool required;
    bool any_dtype;            /* the op's dtypes (tr_op_info.dtypes) do not
                                  apply: an index, a condition, a weight, a
                                  bound ("/any" in ops.def) */
    const char *default_text;  /* as `tensorrun ops` prints it; NULL if required */
    struct tr_value default_value;
};

/* Every op, by the enum constant its row of ops.def names: past the
 * expression parser, ops are known by id, never by name. */
enum tr_op_id {
#define OP(id, name, group, rule, results, takes, cuda, params, doc) TR_OP_##id,
#include "ops.def"
#undef OP
    TR_OP_COUNT
};

/* The groups of ops, as `tensorrun ops` lists them: enum constant and name. */
#define TR_OP_GROUP_MAP(X)                                                   \
    X(CREATE, "create")                                                      \
    X(VIEWS, "views")                                                        \
    X(COPY, "copy")                                                          \
    X(UNARY, "unary")                                                        \
    X(BINARY, "binary")                                                      \
    X(REDUCE, "reduce")                                                      \
    X(LINALG, "linalg")                                                      \
    X(NEURAL, "neural")                                                      \
    X(SELECT, "select")                                                      \
    X(QUANTIZE, "quantize")

enum tr_op_group {
#define TR__GROUP_ENUM(e, name) TR_GROUP_##e,
    TR_OP_GROUP_MAP(TR__GROUP_ENUM)
#undef TR__GROUP_ENUM
    TR_GROUP_COUNT
};

#define TR_OP_MAX_PARAMS 6
#define TR_OP_MAX_RESULTS 3

struct tr_op_info {
    enum tr_op_id id;
    const char *name;
    enum tr_op_group group_id;  /* what callers test: TR_GROUP_VIEWS, ... */
    const char *group;          /* its name, for printing: "views", ... */
    const char *signature;      /* "topk(x, k, dim=-1, largest=true, sorted=true)" */
    const char *dtypes;         /* the dtypes it takes, in words */
    const char *cuda_dtypes;    /* those the CUDA module has kernels for, or "none" */
    const char *doc;            /* one line */
    int nresults;
    int nparams;
    struct tr_param params[TR_OP_MAX_PARAMS];
    bool has_kernel;            /* false until its kernels exist: running it fails */
};

/* The table, in the order `tensorrun ops` lists it (index i is the op
 * whose id is i). */
size_t tr_op_count(void);
const struct tr_op_info *tr_op_at(size_t index);
/* The op of id; NULL for an id out of range. */
const struct tr_op_info *tr_op_get(enum tr_op_id id);
/* The op called name, or by one of its aliases (the NumPy spellings clip,
 * cat, concatenate, absolute, amax, amin), or NULL. */
const struct tr_op_info *tr_op_find(const char *name);
/* Alias number index and (in *op, when not NULL) the op it names; NULL
 * past the last. */
const char *tr_op_alias_at(size_t index, const char **op);

/*
 * The results of op applied to args: args[i] is the argument for
 * params[i], in parameter order, defaults already filled in (so nparams
 * values).  Checks the kinds of the arguments, the dtypes the op takes,
 * the shapes (broadcasting, matmul, concat, reductions' dims, indices,
 * ...) and the constants' ranges; fills results[0..nresults) (lists in
 * results point into args or static storage, never to anything to free).
 * On failure returns TR_ERR_SHAPE, TR_ERR_DTYPE, TR_ERR_INDEX or
 * TR_ERR_INVALID with a message that begins with the op's name, and sets
 * *bad_arg to the index of the argument at fault (-1 when none is).
 */
tr_status tr_op_infer(const struct tr_op_info *op, const struct tr_value *args,
                      struct tr_value *results, int *bad_arg);

/*
 * The pieces split and chunk (the ops with no fixed number of results,
 * nresults 0) cut x into, along dim: piece i is narrow(x, dim, starts[i],
 * lengths[i]).  args as tr_op_infer takes them (which checks them the
 * same way and gives no results); *count is how many pieces there are,
 * and the first max of them are written.  Errors as tr_op_infer's.
 */
tr_status tr_op_pieces(const struct tr_op_info *op, const struct tr_value *args, int64_t *starts,
                       int64_t *lengths, size_t max, size_t *count, int *bad_arg);

/* An argument when an op runs: a constant (value), None, a tensor (value
 * describes it, tensor is the handle; value.weak marks a tensor computed
 * from numbers alone, exp(1.0), which promotes as a number does), or a
 * list of such arguments (items; value.count of them). */
struct tr_arg {
    struct tr_value value;
    struct tr_tensor *tensor;
    const struct tr_arg *items;
};

/* The description of a tensor, as tr_op_infer takes it. */
struct tr_value tr_value_of(const struct tr_tensor *t);

/*
 * A sink: bytes handed over by calls rather than written through memory
 * (io's output files implement it with pwrite).  store(ctx, offset, src, n)
 * writes the n bytes at src at byte offset from the result's element 0;
 * it is called from any thread, each byte of the result exactly once, and
 * returns 0 or an errno (the op then fails with TR_ERR_IO).  reserve(ctx)
 * readies the destination's memory before the first write through it (a
 * file's blocks allocated, so that a full disk is an error and not a
 * SIGBUS); 0, or an errno: the result is then made in the pool.  Either
 * may be NULL: no store means every kernel writes through memory, no
 * reserve that the memory is ready.
 */
struct tr_sink {
    int (*store)(void *ctx, uint64_t offset, const void *src, size_t n);
    int (*reserve)(void *ctx);
    void *ctx;
};

/*
 * Whether a device of device's kind has a kernel for op id with tensor
 * operands of these n dtypes, known whether the device is present or not:
 * for CUDA, the cuda column of ops.def (no kernels yet); on the fake
 * device, every op the CPU has but cumsum (left out on purpose).
 * tr_op_run runs an op on its operands' device, and fails with
 * TR_ERR_DEVICE, naming the device, where this is false but the CPU has
 * the kernel, or where its tensor operands are on different devices.
 */
bool tr_device_supports(struct tr_device device, enum tr_op_id id, const enum tr_dtype *dtypes,
                        int n);

/*
 * Where an op's final result, results[0], goes (never a temporary of the
 * op, nor results[1]).  tensor is the memory: compact, writable, on the
 * CPU, of exactly the result's dtype and shape (NULL: no destination).
 * sink, when not NULL, says how that memory is filled (a shared mapping
 * of a file whose blocks are not reserved yet): the kernels that finish
 * their result in runs, in order (the elementwise ops, and the row-wise
 * ones along the last dimension) hand every byte to sink->store and never
 * write tensor's memory; the others call sink->reserve first.
 *
 * The destination may be an operand's memory (in place): the elementwise
 * ops (groups unary and binary) compute into it when every operand that
 * overlaps it is exactly it (the same bytes, dtype, shape and strides), as
 * in x = x * 2 + 1 over a temporary nothing else reads.  Any other overlap
 * of the destination and an operand, and every other op, leave it alone.
 *
 * A kernel that cannot use the destination (it does not fit, it overlaps
 * an operand, the file cannot be reserved, or the op makes its result
 * otherwise: views, sort, gather, concat, ...) makes the result in the pool
 * as without one; the caller tells which by
 * tr_tensor_shares_storage(results[0], dest->tensor) and writes the result
 * itself when it is not there.  The destination is only borrowed: results[0]
 * is a new handle of dest->tensor when it took it.
 */
struct tr_dest {
    struct tr_tensor *tensor;
    const struct tr_sink *sink;
};

/*
 * Runs op: args[i] for params[i], defaults filled in.  The arguments are
 * checked as tr_op_infer checks them; the results are new tensors in the
 * calling thread's innermost scope, on the device of the tensor arguments
 * (the CPU for ops that make tensors); results[0] is made in dest when it
 * can be (dest NULL: in the pool; see struct tr_dest).  Kernels split
 * their work over tr_num_threads() threads.  TR_ERR_STATE, naming the op,
 * when its kernel is not written yet.
 */
tr_status tr_op_run(const struct tr_op_info *op, const struct tr_arg *args,
                    const struct tr_dest *dest, struct tr_tensor **results);
/* tr_op_run, where an op without tensor arguments (zeros, rand, a
 * function of numbers alone) makes its results on device instead of the
 * CPU; an op with any runs where they are. */
tr_status tr_op_run_on(const struct tr_op_info *op, const struct tr_arg *args,
                       struct tr_device device, const struct tr_dest *dest,
                       struct tr_tensor **results);

/*
 * The pool memory an op takes when it runs, as a function of what is known
 * before it runs (tr_op_scratch), in block bytes (tr_memory_block_size):
 *
 *   results[i]  the block of result i when the kernel makes it in the pool;
 *               0 when the result is a view of an argument, a constant, or
 *               made in memory that is already live (given[i]);
 *   scratch     what the kernel holds besides its results at its peak:
 *               copies of operands it cannot read where they are (casts to
 *               a compute dtype, compact copies for BLAS, an index as i64),
 *               partial results, per-thread buffers;
 *   peak        results + scratch at that moment: the most the op adds to
 *               the bytes live before it.
 *
 * When the op returns, only its results stay: all scratch is given back.
 * Outside the promise: OpenBLAS's own buffers, a streamed result's
 * per-thread stage (TR__STAGE_BYTES, a fixed size) and constants, which are
 * not pool memory.
 */
struct tr_op_memory {
    uint64_t results[TR_OP_MAX_RESULTS];
    uint64_t scratch;
    uint64_t peak;
};

/*
 * What op takes from the pool of its device when it runs on args (as
 * tr_op_infer takes them, with their strided and strides filled in for
 * tensors, as tr_value_of gives them) with results (tr_op_infer's) and
 * threads threads (tr_num_threads() when it runs: the run's --threads).
 * given (NULL: none) says, for each result, that the kernel makes it in
 * memory the caller provides (a destination it can write, struct
 * tr_dest): the op makes no block for it; a result the kernel cannot make
 * there is made in the pool, and is not given.  For to, results[0] is a
 * block of the device it goes to.  The figure is exact: tr_op_run on
 * tensors with these descriptions raises peak_active_bytes by out->peak
 * over the bytes live before it, and leaves out->results active.  A fused
 * chain's figure is tr_fused_memory's (tensorrun_fused.h).  TR_ERR_STATE
 * for an op without a kernel; TR_ERR_INVALID for threads < 1.
 *
 * For tests, TENSORRUN_TEST_MISDECLARE_SCRATCH=<op name> (read once) makes
 * the declaration of that op's scratch 512 bytes too high, so that a check
 * of the declarations against a run can be seen to fail.
 */
tr_status tr_op_scratch(const struct tr_op_info *op, const struct tr_value *args,
                        const struct tr_value *results, const bool *given, int threads,
                        struct tr_op_memory *out);

/* Whether op's kernel makes its first result in a destination it is given
 * (struct tr_dest) when the destination fits: the elementwise, reducing,
 * row-wise, creating, copying (contiguous, clone) and matmul kernels do;
 * views, casts, transfers, sorts, gathers, joins and quantisation make
 * their own, and a caller copies them where they go.  tr_op_scratch counts a given result
 * of an op that does not as made in the pool. */
bool tr_op_takes_dest(const struct tr_op_info *op);

/* Fills results[i].strided and .strides (results as tr_op_infer gave
 * them, args as tr_op_scratch takes them): how the results of op will lie
 * in memory, so that a plan can describe the arguments of the ops that
 * read them.  The view ops give the strides of their views (reshape and
 * flatten a compact copy when no strides can express the new shape); to
 * on the argument's own device gives the argument's; every other result
 * is compact. */
tr_status tr_op_layout(const struct tr_op_info *op, const struct tr_value *args,
                       struct tr_value *results);

/* The dtype PyTorch gives a binary op of a and b (tensors or numbers):
 * a weak number, or a rank-0 tensor, does not widen a tensor with
 * dimensions of the same category (f32[5] + f64[] is f32, i32[5] + 2 is
 * i32), and widens it to the default dtype of a higher category (i32[5] +
 * 2.5 is f32) or, a rank-0 tensor, to its own (i32[5] + f64[] is f64).  TR_ERR_DTYPE for u64 with
 * a signed type, which needs an explicit cast. */
tr_status tr_promote(const struct tr_value *a, const struct tr_value *b, enum tr_dtype *out);
/* The dtype a value has, a number's on its own: i64, f64 or bool (a
 * constant that meets no tensor keeps its exact value). */
enum tr_dtype tr_value_dtype(const struct tr_value *v);
/* Whether v, when it is a known integer, is in the range of the integer
 * dtype; true for everything else. */
bool tr_constant_fits(const struct tr_value *v, enum tr_dtype dtype);

/* Results of the view syntax: x.T (all dimensions reversed), x.mT (the
 * last two swapped), and x[...] (NumPy basic indexing: integers, slices,
 * ..., None).  For indexing, each subscript is a TR_VALUE_INT (an index),
 * TR_VALUE_NONE (a new axis), a TR_VALUE_LIST of three values (a slice:
 * start, stop, step, each an int or TR_VALUE_NONE), or a TR_VALUE_STRING
 * "..." (the ellipsis). */
tr_status tr_infer_transpose_all(const struct tr_value *x, bool last_two, struct tr_value *out);
tr_status tr_infer_index(const struct tr_value *x, const struct tr_value *subscripts, size_t n,
                         struct tr_value *out, int *bad_subscript);
/* x[subscripts] as a view of x (subscripts as tr_infer_index takes them,
 * checked by it): a new handle in the current scope, or NULL with the
 * error.  tr_index_layout fills out->strided and out->strides (out as
 * tr_infer_index gave it, x with its strides) with how that view lies in
 * memory; an unknown integer (chunk_start) counts as 0, which changes no
 * stride. */
struct tr_tensor *tr_index_view(const struct tr_tensor *x, const struct tr_value *subscripts,
                                size_t n);
tr_status tr_index_layout(const struct tr_value *x, const struct tr_value *subscripts, size_t n,
                          struct tr_value *out);

#ifdef __cplusplus
}
#endif

#endif /* TENSORRUN_OPS_H */
