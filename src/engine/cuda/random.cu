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
    int threads = 256;
    uint64_t blocks = (n + threads - 1) / threads;
    int64_t item = dtype == TR_DTYPE_F64 ? 8 : dtype == TR_DTYPE_F32 ? 4 : 2;

    if (n == 0)
        return cudaSuccess;
    if (blocks > 65535 * 16)
        blocks = 65535 * 16;
    cudaGetLastError(); /* so that what follows the launch is its own error */
    random_kernel<<<(unsigned)blocks, threads, 0, stream>>>((char *)dst, dtype, normal, seed, n,
                                                            item);
    return cudaGetLastError();
}
