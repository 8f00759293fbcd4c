/*
 * rowwise.cu - the module's row-wise ops (struct tr_cuda_rowwise): a block
 * of TR__CUDA_ROW_THREADS threads per line, each pass's partials merged in
 * shared memory in reduce_body.h's tree, then every thread writing its
 * share of the results.  The order is rowwise_body.h's.
 */
#include <cuda_runtime.h>

#include "module_impl.h"
#include "rowwise_body.h"

namespace {

constexpr int THREADS = TR__CUDA_ROW_THREADS;

__global__ void rowwise_kernel(tr_cuda_rowwise w)
{
    __shared__ tr__cuda_row_acc p[THREADS];
    __shared__ double totals[2];
    int t = threadIdx.x;

    for (int64_t l = blockIdx.x; l < w.nlines; l += gridDim.x) {
        int64_t xo, yo;
        double k[2] = {0, 0};

        tr__cuda_row_offsets(&w, l, &xo, &yo);
        for (int pass = 0; pass < tr__cuda_row_passes(&w); pass++) {
            double given = pass == 1 ? tr__cuda_row_between(&w, totals) : 0;
            tr__cuda_row_partial(&w, (const char *)w.x + xo, pass, given, t, &p[t]);
            __syncthreads();
            for (int s = THREADS / 2; s > 0; s >>= 1) {
                if (t < s)
                    tr__cuda_row_merge(&w, pass, &p[t], &p[t + s]);
                __syncthreads();
            }
            if (t == 0)
                totals[pass] = tr__cuda_row_total(&w, pass, &p[0]);
            __syncthreads();
        }
        tr__cuda_row_finish(&w, totals, k);
        for (int64_t i = t; i < w.len; i += THREADS)
            tr__cuda_row_result(&w, (const char *)w.x + xo, (char *)w.y + yo, i, k);
        __syncthreads();
    }
}

} /* namespace */

cudaError_t tr__cuda_launch_rowwise(const tr_cuda_rowwise *w, cudaStream_t stream)
{
    if (w->nlines == 0 || w->len == 0)
        return cudaSuccess;
    cudaGetLastError(); /* so that what follows the launch is its own error */
    rowwise_kernel<<<tr__cuda_grid(w->nlines, 1), THREADS, 0, stream>>>(*w);
    return cudaGetLastError();
}
