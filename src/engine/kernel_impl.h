/*
 * kernel_impl.h - what the CPU kernels share: the kernel signature, the
 * table that finds an op's kernel, and the blocked elementwise loop most of
 * them are built on.
 */
#ifndef TR_KERNEL_IMPL_H
#define TR_KERNEL_IMPL_H

#include "iter_impl.h"
#include "ops_impl.h"

/* The loops whose every element is one IEEE operation (or one call), with
 * no order between elements but the one their code spells out: built once
 * more for AVX2 and for AVX-512, the one the CPU has picked when the
 * program loads.  Wider vectors do the same operations on the same values
 * in the same order, so the bits do not change (no FMA: -ffp-contract=off),
 * only how many values one instruction takes.  GCC only: clang 14 gives a
 * static function's clones a global resolver, so that two files with a
 * loop of one name (reduce.c's and nn.c's sum_f32) would not link. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__ELF__)
#define TR__VECTOR_CLONES __attribute__((target_clones("default", "avx2", "avx512f")))
#else
#define TR__VECTOR_CLONES
#endif

/* Computes op's results into results[0..nresults): called by tr_op_run
 * once tr_op_infer has checked args and given the results' dtypes and
 * shapes in out[].  dest is results[0]'s destination, already checked by
 * tr_op_run: NULL, or memory that fits out[0] and that the kernel may
 * write while it reads its operands (it overlaps none, or, for the
 * elementwise kernels, only operands that are exactly it).  A kernel
 * makes its final result with tr__new_result or tr__stream_result, which
 * take dest; its temporaries never do.  New tensors join the current
 * scope. */
typedef tr_status (*tr__kernel_fn)(const struct tr__op *op, const struct tr_arg *args,
                                   const struct tr_value *out, const struct tr_dest *dest,
                                   struct tr_tensor **results);

/* The CPU kernel of op id (kernels.def), or NULL. */
tr__kernel_fn tr__kernel_for(enum tr_op_id id);

/* The compact final result of an op as out describes it, on device: a new
 * handle of dest->tensor when dest is not NULL and its sink (if any) can
 * reserve it, else a new tensor of the pool (errors naming name). */
struct tr_tensor *tr__new_result(const char *name, const struct tr_value *out,
                                 struct tr_device device, const struct tr_dest *dest);

/* How a streamed result's bytes are written (tr_sink.store), and the
 * op's name for the error of a failed call. */
struct tr__store {
    int (*fn)(void *ctx, uint64_t offset, const void *src, size_t n);
    void *ctx;
    const char *name;
};

/* tr__new_result for a kernel that can hand its result over a run at a
 * time, in order: when dest has a sink that stores, dest's handle, with
 * *store set, and the kernel writes every byte through store->fn rather
 * than into the tensor's memory; otherwise tr__new_result's tensor, with
 * store->fn NULL. */
struct tr_tensor *tr__stream_result(const char *name, const struct tr_value *out,
                                    struct tr_device device, const struct tr_dest *dest,
                                    struct tr__store *store);
/* The error of a store that failed with errno err. */
tr_status tr__store_failed(const struct tr__store *store, int err);

/* The bytes of a thread's stage: runs of about this much go in one store,
 * and it stays in the core's cache while it fills. */
#define TR__STAGE_BYTES (256 * 1024)

/* A thread's results of a streamed kernel gathered before one store: up
 * to cap bytes, from byte `first` of the result on; err is the errno of
 * its failed store (no more is stored after one), or 0. */
struct tr__stage {
    const struct tr__store *store;
    char *buf;
    uint64_t cap, first, used;
    int err;
};

/* A stage of cap bytes for store (buf NULL when out of memory). */
void tr__stage_init(struct tr__stage *st, const struct tr__store *store, uint64_t cap);
/* Where the n bytes at byte offset `at` of the result go: in the stage,
 * which first hands over what it holds unless they follow it and fit
 * (n <= cap). */
char *tr__stage_place(struct tr__stage *st, uint64_t at, uint64_t n);
/* Hands over what the stage holds and frees it (NULL buf: nothing to
 * do); its errno, if any, goes into *first_error unless an errno of
 * another thread's stage is there already. */
void tr__stage_finish(struct tr__stage *st, atomic_int *first_error);

/* The argument for op's parameter called name, or NULL. */
static inline const struct tr_arg *tr__arg_named(const struct tr__op *op,
                                                 const struct tr_arg *args, const char *name)
{
    int i = tr__param_index(op, name);

    return i < 0 ? NULL : &args[i];
}

/* The tensor an argument stands for: its handle (a new handle of it), or a
 * 0-d tensor holding the constant as dtype.  In the current scope. */
struct tr_tensor *tr__arg_tensor(const struct tr_arg *arg, enum tr_dtype dtype);

/* An operand of an op whose result has dtype result, to be computed in
 * compute: tr__arg_tensor(arg, compute), except that an integer tensor
 * wider than a byte promoted to an f16 or bf16 result is first rounded to
 * that dtype (a copy), as promotion says: 70000 is inf as f16. */
struct tr_tensor *tr__operand(const struct tr_arg *arg, enum tr_dtype result,
                              enum tr_dtype compute);
/* Whether tr__operand rounds a tensor of dtype t to result first. */
bool tr__operand_rounds(enum tr_dtype t, enum tr_dtype result);

/* The dtype a kernel computes values of dtype d in: f32 for the floats up
 * to f32 (f16 and bf16 are storage types), f64, i64 for signed integers
 * and bool, u64 for unsigned ones. */
enum tr_dtype tr__compute_dtype(enum tr_dtype d);

/* A function over n values: in[k] holds n values of the input compute
 * dtype for each input, out receives n values of the output compute
 * dtype; ctx is the caller's. */
typedef void (*tr__block_fn)(char *out, const char *const *in, int64_t n, const void *ctx);

/*
 * out = fn(in[0], ..., in[nin-1]) elementwise.  The inputs (at most 3) are
 * broadcast to out's shape; they are read block by block, converted to
 * in_compute, handed to fn, whose out_compute values are converted to
 * out's dtype and stored.  Blocks are spread over the threads; every
 * element is computed the same way whatever the thread count.  out may
 * be exactly one of the inputs (the same bytes, dtype, shape and strides:
 * in place), as each block is read before its results are stored over it;
 * any other overlap of out and an input is the caller's to refuse.  CPU
 * only.
 */
tr_status tr__map(struct tr_tensor *out, enum tr_dtype out_compute,
                  const struct tr_tensor *const *in, int nin, enum tr_dtype in_compute,
                  tr__block_fn fn, const void *ctx);
/* tr__map for a result that is streamed (store->fn not NULL; out is then
 * never written through memory) or not (store NULL or its fn NULL). */
tr_status tr__map_stream(struct tr_tensor *out, const struct tr__store *store,
                         enum tr_dtype out_compute, const struct tr_tensor *const *in, int nin,
                         enum tr_dtype in_compute, tr__block_fn fn, const void *ctx);

/* Converts n values at src (stepping ss bytes) of dtype from into dst
 * (stepping ds bytes) of dtype to, by tr_copy_into's rules. */
void tr__cpu_cast_row(char *dst, int64_t ds, enum tr_dtype to, const char *src, int64_t ss,
                      enum tr_dtype from, int64_t n);

/* A dim that tr_op_infer has checked, made non-negative (a scalar takes 0
 * and -1). */
static inline int tr__checked_dim(int64_t dim, int ndim)
{
    int n = ndim > 0 ? ndim : 1;

    return (int)(dim < 0 ? dim + n : dim);
}

/* Hands a kernel's n results over when s is TR_OK, else releases them;
 * returns s. */
static inline tr_status tr__give_results(struct tr_tensor **made, int n, tr_status s,
                                         struct tr_tensor **results)
{
    for (int i = 0; i < n; i++) {
        if (s != TR_OK)
            tr_release(made[i]);
        else
            results[i] = made[i];
    }
    return s;
}

#endif /* TR_KERNEL_IMPL_H */
