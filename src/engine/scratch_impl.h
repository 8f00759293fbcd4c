/*
 * scratch_impl.h - the pool scratch of the kernels.  Each kernel whose
 * scratch is more than a copy of an operand sizes it with one function of
 * the arguments' descriptions (struct tr_value) and the thread count; the
 * kernel allocates what that function says, and tr_op_scratch (scratch.c)
 * declares what it says, so that the declaration is the allocation.
 *
 * Every such buffer is one pool block, taken on the calling thread before
 * any parallel region (a thread's part is found by its number in the
 * team), so that the pool's peak never depends on how threads interleave.
 */
#ifndef TR_SCRATCH_IMPL_H
#define TR_SCRATCH_IMPL_H

#include "ops_impl.h"

/* The threads of a kernel's parallel region: tr_num_threads() when
 * parallel, else 1 (always 1 in a build without OpenMP). */
int tr__team_size(bool parallel);
/* The calling thread's number in its team (0 outside a parallel region). */
int tr__team_index(void);

/* Places a piece of bytes at the next 64-byte boundary of a buffer whose
 * length so far is *total; returns the piece's offset. */
static inline uint64_t tr__carve(uint64_t *total, uint64_t bytes)
{
    uint64_t at = (*total + 63) / 64 * 64;

    *total = at + bytes;
    return at;
}

/* A value's strides in elements: its own when strided, else C order's;
 * and in bytes, 0 for a dimension of size 1 (as tr__byte_strides). */
void tr__value_strides(const struct tr_value *v, int64_t *out);
void tr__value_byte_strides(const struct tr_value *v, int64_t *out);

/* A pool block of bytes (0: none, *t NULL) as a u8 tensor of the current
 * scope, in the pool of device (the result's: a kernel run on a device
 * whose memory the CPU reads, the fake device, charges it there); errors
 * name fn. */
tr_status tr__scratch_block(const char *fn, uint64_t bytes, struct tr_device device,
                            struct tr_tensor **t);

/* reduce.c: the scratch of a reduction of x over dims (its argument, as
 * tr_op_infer takes it) into a result of dtype y: one block for the
 * partial results, and one for every thread's tile buffer when it reads
 * TILE outputs at a time; bytes before rounding, 0 for none.  source: x
 * describes a fused chain's values (cpu/fused_impl.h, struct tr__source),
 * which are fetched, never read in tiles: its strides are not read. */
tr_status tr__reduce_scratch(const struct tr__op *op, const struct tr_value *x, bool source,
                             const struct tr_value *dims, enum tr_dtype y, int threads,
                             uint64_t *partials, uint64_t *tiles);

/* nn.c: the scratch of softmax, log_softmax, l2_normalize, layer_norm and
 * rms_norm of x (along dim; -1 for the last) into a result of dtype y, with
 * a weight and a bias when present: one block for the weight and bias in
 * the compute dtype and every thread's line buffers.  source: x describes
 * a fused chain's values, as for tr__reduce_scratch. */
uint64_t tr__nn_scratch(const struct tr__op *op, const struct tr_value *x, bool source,
                        int64_t dim, enum tr_dtype y, bool weight, bool bias, int threads);

/* select.c: sort, argsort and topk's room for one line a thread, for k of
 * n values along dim of x. */
uint64_t tr__sort_scratch(const struct tr_value *x, int64_t dim, int64_t k, int threads);
/* The room of median and quantile: each thread's copy of the values it
 * selects from (dim: an int, or None for all). */
uint64_t tr__quantile_scratch(const struct tr_value *x, const struct tr_value *dim, int threads);

/* distance.c: whether cdist of a and b with this p goes through the
 * product (matmul's operands, tiles and tile buffers), and the bytes of
 * the squared norms it then takes (0 for an empty result). */
bool tr__cdist_product(const struct tr_value *a, const struct tr_value *b, double p);
uint64_t tr__cdist_norms_bytes(const struct tr_value *a, const struct tr_value *b,
                               const struct tr_value *c, double p);

/* nn.c: the scratch of cross_entropy of logits x along dim with this
 * reduction into a result of dtype y: the losses of the lines (0 when they
 * go into the result), then the line buffers of log_softmax's passes
 * (tr__nn_scratch); bytes before rounding. */
tr_status tr__cross_entropy_scratch(const struct tr__op *op, const struct tr_value *x,
                                    int64_t dim, const char *reduction, enum tr_dtype y,
                                    int threads, uint64_t *losses, uint64_t *lines);

#endif /* TR_SCRATCH_IMPL_H */
