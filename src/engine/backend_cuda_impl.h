/*
 * backend_cuda_impl.h - what the CUDA backend's files share: the module's
 * kernels as the engine calls them, and the table of CUDA kernels that
 * backend_cuda_kernels.c fills in.
 */
#ifndef TR_BACKEND_CUDA_IMPL_H
#define TR_BACKEND_CUDA_IMPL_H

#include "backend_impl.h"
#include "cuda/cuda_module.h"

/* Queues m on device index's stream; errors begin with fn. */
tr_status tr__cuda_map(int index, const struct tr_cuda_map *m, const char *fn);

/* Queues topk t on device index; errors begin with fn. */
tr_status tr__cuda_topk(int index, const struct tr_cuda_topk *t, const char *fn);

/* Queues gather g on device index; errors begin with fn. */
tr_status tr__cuda_gather(int index, const struct tr_cuda_gather *g, const char *fn);

/* Queues row-wise op w on device index; errors begin with fn. */
tr_status tr__cuda_rowwise(int index, const struct tr_cuda_rowwise *w, const char *fn);

/* Queues reduction r on device index; errors begin with fn. */
tr_status tr__cuda_reduce(int index, const struct tr_cuda_reduce *r, const char *fn);

/* The device pool bytes a reduction of n values into nout outputs takes
 * besides its result on CUDA: the groups' partials, or 0. */
uint64_t tr__cuda_reduce_scratch(int64_t nout, int64_t n);

/* Queues product p on device index; errors begin with fn. */
tr_status tr__cuda_matmul(int index, const struct tr_cuda_matmul *p, const char *fn);

/* How matmul of a and b into c runs on CUDA: the flattened product, and
 * for each operand whether it is first copied (to c's dtype, compact, its
 * batch dimensions expanded to c's when it has any) and that copy's
 * bytes.  false when cuBLAS cannot take the product (a dimension past its
 * int). */
struct tr__cuda_mm {
    struct tr_cuda_matmul p;       /* but the pointers */
    bool copy[2];
    uint64_t copy_bytes[2];
    int64_t copy_shape[2][TR_MAX_DIMS];
    int copy_ndim[2];
};
bool tr__cuda_mm_plan(const struct tr_value *a, const struct tr_value *b,
                      const struct tr_value *c, struct tr__cuda_mm *mm);

/* Fills n compact values of float dtype at dst on device index with rand
 * (normal false) or randn of seed; errors begin with fn. */
tr_status tr__cuda_random(int index, void *dst, enum tr_dtype dtype, bool normal, uint64_t seed,
                          uint64_t n, const char *fn);

/* Fills in b->kernels: an op has a CUDA kernel exactly when the cuda
 * column of ops.def names dtypes for it. */
void tr__cuda_kernels_init(struct tr__backend *b);

#endif /* TR_BACKEND_CUDA_IMPL_H */
