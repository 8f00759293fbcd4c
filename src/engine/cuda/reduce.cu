/*
 * reduce.cu - the module's reductions (struct tr_cuda_reduce): a block of
 * TR__CUDA_REDUCE_THREADS threads per group of an output, each thread
 * reducing its share of the values, the block's tree in shared memory;
 * with more than one group per output, a second kernel merges each
 * output's groups in their tree.  The order is reduce_body.h's.
 */
#include <cuda_runtime.h>

#include "module_impl.h"
#include "reduce_body.h"

namespace {

constexpr int THREADS = TR__CUDA_REDUCE_THREADS;

__global__ void reduce_groups(tr_cuda_reduce r, int64_t groups)
{
    __shared__ tr__cuda_acc p[THREADS];
    int t = threadIdx.x;

    for (int64_t q = blockIdx.x; q < r.nout * groups; q += gridDim.x) {
        int64_t o = q / groups, g = q % groups;

        tr__cuda_reduce_thread(&r, o, g * THREADS + t, groups * THREADS, &p[t]);
        __syncthreads();
        for (int s = THREADS / 2; s > 0; s >>= 1) {
            tr__cuda_reduce_step(&r, p, s, t);
            __syncthreads();
        }
        if (t == 0) {
            if (groups == 1)
                tr__cuda_reduce_finish(&r, &p[0], o);
            else
                ((tr__cuda_acc *)r.partials)[q] = p[0];
        }
        __syncthreads();
    }
}

__global__ void reduce_outputs(tr_cuda_reduce r, int64_t groups)
{
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < r.nout;
         o += (int64_t)gridDim.x * blockDim.x) {
        tr__cuda_acc *p = (tr__cuda_acc *)r.partials + o * groups;

        tr__cuda_reduce_group_tree(&r, p, groups);
        tr__cuda_reduce_finish(&r, &p[0], o);
    }
}

} /* namespace */

cudaError_t tr__cuda_launch_reduce(const tr_cuda_reduce *r, cudaStream_t stream)
{
    int64_t groups = tr__cuda_reduce_groups(r->n);

    if (r->nout == 0)
        return cudaSuccess;
    if (groups > 1 && !r->partials)
        return cudaErrorInvalidValue;
    cudaGetLastError(); /* so that what follows the launch is its own error */
    reduce_groups<<<tr__cuda_grid(r->nout * groups, 1), THREADS, 0, stream>>>(*r, groups);
    if (groups > 1)
        reduce_outputs<<<tr__cuda_grid(r->nout, 256), 256, 0, stream>>>(*r, groups);
    return cudaGetLastError();
}
