/*
 * random.cu - the module's rand and randn: each thread stores elements with
 * tr__random_store of philox_math.h, the function the CPU's kernel calls,
 * so that a seed gives the same bits on either (compiled, as the whole
 * module, with --fmad=false).
 */
#include <cuda_runtime.h>

#include "../philox_math.h"
#include "module_impl.h"

namespace {

__global__ void random_kernel(char *dst, int dtype, bool normal, uint64_t seed, uint64_t n,
                              int64_t item)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        tr__random_store(dst + i * item, (enum tr_dtype)dtype, normal, seed, i);
}

} /* namespace */

cudaError_t tr__cuda_launch_random(void *dst, int dtype, bool normal, uint64_t seed, uint64_t n,
                                   cudaStream_t stream)
{
    if (n == 0)
        return cudaSuccess;
    cudaGetLastError(); /* so that what follows the launch is its own error */
    random_kernel<<<tr__cuda_grid((int64_t)n, 256), 256, 0, stream>>>(
        (char *)dst, dtype, normal, seed, n, tr__item_size(dtype));
    return cudaGetLastError();
}
