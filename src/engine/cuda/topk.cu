/*
 * topk.cu - the module's topk (struct tr_cuda_topk): a block per line, the
 * radix passes' histograms in shared memory, the ties placed by a running
 * count in position order (a block-wide prefix sum per chunk of the line).
 * The steps are topk_body.h's.
 */
#include <cuda_runtime.h>

#include "module_impl.h"
#include "topk_body.h"

namespace {

constexpr int THREADS = TR__CUDA_TOPK_THREADS;

__global__ void topk_kernel(tr_cuda_topk t)
{
    __shared__ uint32_t hist[256];
    __shared__ int64_t scan[THREADS];
    __shared__ uint64_t prefix;
    __shared__ int64_t need, ties_before;
    int tid = threadIdx.x;

    for (int64_t l = blockIdx.x; l < t.nlines; l += gridDim.x) {
        int64_t xo, oo;
        const char *base;

        tr__cuda_topk_offsets(&t, l, &xo, &oo);
        base = (const char *)t.x + xo;
        if (tid == 0) {
            prefix = 0;
            need = t.k;
            ties_before = 0;
        }
        __syncthreads();
        /* 1. the k-th key */
        for (int shift = 56; shift >= 0; shift -= 8) {
            hist[tid] = 0; /* THREADS is 256: one bin each */
            __syncthreads();
            for (int64_t i = tid; i < t.len; i += THREADS) {
                uint64_t key = tr__cuda_topk_key(&t, base, i);
                if (tr__cuda_topk_matches(key, prefix, shift))
                    atomicAdd(&hist[(key >> shift) & 255], 1u);
            }
            __syncthreads();
            if (tid == 0)
                tr__cuda_topk_pick(hist, shift, (uint64_t *)&prefix, (int64_t *)&need);
            __syncthreads();
        }
        /* 2. the keys below it */
        for (int64_t i = tid; i < t.len; i += THREADS) {
            uint64_t key = tr__cuda_topk_key(&t, base, i);
            if (key < prefix)
                tr__cuda_topk_store(&t, base, oo, tr__cuda_topk_place(&t, base, i, key), i);
        }
        /* 3. the keys equal to it, the first need of them */
        for (int64_t c = 0; c < t.len; c += THREADS) {
            int64_t i = c + tid;
            int64_t flag = i < t.len && tr__cuda_topk_key(&t, base, i) == prefix;
            int64_t rank;

            scan[tid] = flag;
            __syncthreads();
            for (int off = 1; off < THREADS; off <<= 1) {
                int64_t v = tid >= off ? scan[tid - off] : 0;
                __syncthreads();
                scan[tid] += v;
                __syncthreads();
            }
            rank = ties_before + scan[tid] - flag;
            if (flag && rank < need)
                tr__cuda_topk_store(&t, base, oo, t.k - need + rank, i);
            __syncthreads();
            if (tid == THREADS - 1)
                ties_before += scan[tid];
            __syncthreads();
            if (ties_before >= need)
                break; /* the same for every thread: shared */
        }
        __syncthreads();
    }
}

} /* namespace */

cudaError_t tr__cuda_launch_topk(const tr_cuda_topk *t, cudaStream_t stream)
{
    if (t->nlines == 0 || t->k == 0 || t->len == 0)
        return cudaSuccess;
    cudaGetLastError(); /* so that what follows the launch is its own error */
    topk_kernel<<<tr__cuda_grid(t->nlines, 1), THREADS, 0, stream>>>(*t);
    return cudaGetLastError();
}
