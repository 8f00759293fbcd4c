/*
 * module_impl.h - what the files of the CUDA module share: the launchers
 * that module.cu calls, with the device's stream, once it holds the device.
 */
#ifndef TR_CUDA_MODULE_IMPL_H
#define TR_CUDA_MODULE_IMPL_H

#include <cuda_runtime.h>

#include "cuda_module.h"

/* A grid for n units of work: one block per unit (per threads items when
 * threads > 1), at most 65535 * 16 blocks; every kernel loops over the
 * units past its grid. */
static inline unsigned tr__cuda_grid(int64_t n, int threads)
{
    int64_t blocks = (n + threads - 1) / threads;

    return (unsigned)(blocks > 65535 * 16 ? 65535 * 16 : blocks);
}

/* Queues m on stream; the launch's error, if any. */
cudaError_t tr__cuda_launch_map(const struct tr_cuda_map *m, cudaStream_t stream);

/* Queues product p on stream; 0, or -1 with a sentence in err. */
int tr__cuda_launch_matmul(int device, const struct tr_cuda_matmul *p, cudaStream_t stream,
                           char *err, size_t errsize);

/* Queues topk t on stream. */
cudaError_t tr__cuda_launch_topk(const struct tr_cuda_topk *t, cudaStream_t stream);

/* Queues gather g on stream. */
cudaError_t tr__cuda_launch_gather(const struct tr_cuda_gather *g, cudaStream_t stream);

/* Queues row-wise op w on stream. */
cudaError_t tr__cuda_launch_rowwise(const struct tr_cuda_rowwise *w, cudaStream_t stream);

/* Queues reduction r on stream. */
cudaError_t tr__cuda_launch_reduce(const struct tr_cuda_reduce *r, cudaStream_t stream);

/* Queues n values of rand (normal false) or randn of seed at dst. */
cudaError_t tr__cuda_launch_random(void *dst, int dtype, bool normal, uint64_t seed, uint64_t n,
                                   cudaStream_t stream);

#endif /* TR_CUDA_MODULE_IMPL_H */
