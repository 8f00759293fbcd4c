/*
 * map.cu - the module's elementwise kernel (struct tr_cuda_map): one kernel
 * per entry of ew_ops.def, each thread computing elements with
 * tr__cuda_map_one (map_body.h), the code a constant of the kernel so that
 * the entry's function is inlined.  Results whose operands are all compact
 * in the result's order (or broadcast values) take the path without the
 * per-dimension offset arithmetic.  gather and index_select are a map of
 * their own: an element each, tr__cuda_gather_one.
 */
#include <cuda_runtime.h>

#include "map_body.h"
#include "module_impl.h"

namespace {

/* Whether byte strides lay shape out compactly, in row-major order. */
bool compact(const int64_t *strides, int ndim, const int64_t *shape, int64_t item)
{
    int64_t expect = item;

    for (int d = ndim - 1; d >= 0; d--) {
        if (shape[d] != 1 && strides[d] != expect)
            return false;
        expect *= shape[d];
    }
    return true;
}

/* m with every layout made one dimension of n compact elements. */
tr_cuda_map flattened(const tr_cuda_map &m, int64_t n)
{
    tr_cuda_map f = m;
    int64_t out_item = tr__item_size(m.out_dtype);

    f.ndim = 1;
    f.shape[0] = n;
    f.out_strides[0] = out_item;
    for (int k = 0; k < m.nin; k++)
        f.in[k].strides[0] = m.in[k].data ? tr__item_size(m.in[k].dtype) : 0;
    return f;
}

template <int CODE>
__global__ void map_kernel(tr_cuda_map m, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        tr__cuda_map_one(&m, CODE, i);
}

template <int CODE>
void launch(const tr_cuda_map &m, int64_t n, cudaStream_t stream)
{
    map_kernel<CODE><<<tr__cuda_grid(n, 256), 256, 0, stream>>>(m, n);
}

__global__ void gather_kernel(tr_cuda_gather g, int64_t n)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x)
        if (!tr__cuda_gather_one(&g, e))
            atomicMin((unsigned long long *)g.first_bad, (unsigned long long)e);
}

} /* namespace */

cudaError_t tr__cuda_launch_gather(const tr_cuda_gather *g, cudaStream_t stream)
{
    int64_t n = 1;

    for (int d = 0; d < g->ndim; d++)
        n *= g->shape[d];
    if (n == 0)
        return cudaSuccess;
    cudaGetLastError(); /* so that what follows the launch is its own error */
    gather_kernel<<<tr__cuda_grid(n, 256), 256, 0, stream>>>(*g, n);
    return cudaGetLastError();
}

cudaError_t tr__cuda_launch_map(const tr_cuda_map *m, cudaStream_t stream)
{
    int64_t n = 1;
    bool flat;

    for (int d = 0; d < m->ndim; d++)
        n *= m->shape[d];
    if (n == 0)
        return cudaSuccess;
    flat = compact(m->out_strides, m->ndim, m->shape, tr__item_size(m->out_dtype));
    for (int k = 0; flat && k < m->nin; k++)
        flat = !m->in[k].data ||
               compact(m->in[k].strides, m->ndim, m->shape, tr__item_size(m->in[k].dtype));
    const tr_cuda_map run = flat ? flattened(*m, n) : *m;

    cudaGetLastError(); /* so that what follows the launch is its own error */
    switch (m->code) {
#define TR__LAUNCH(name) case TR__EW_##name: launch<TR__EW_##name>(run, n, stream); break;
#define UNARY(name, T, expr) TR__LAUNCH(name)
#define PREDICATE(name, T, expr) TR__LAUNCH(name)
#define BINARY(name, T, U, expr) TR__LAUNCH(name)
#define WHERE(name, T) TR__LAUNCH(name)
#define CLAMP(name, T) TR__LAUNCH(name)
#include "../ew_ops.def"
#undef UNARY
#undef PREDICATE
#undef BINARY
#undef WHERE
#undef CLAMP
#undef TR__LAUNCH
    default: launch<TR__EW_NONE>(run, n, stream); break;
    }
    return cudaGetLastError();
}
