/*
 * module.cu - tensorrun-cuda.so: the CUDA side of the engine, loaded with
 * dlopen only when a stage may run on a GPU.  It fills in the function table
 * of cuda_module.h; nothing else of it is visible to the engine.
 */
#include <cuda_runtime.h>

#include <stdio.h>

#include "cuda_module.h"

namespace {

int fail(cudaError_t rc, const char *what, char *err, size_t errsize)
{
    snprintf(err, errsize, "%s failed: %s", what, cudaGetErrorString(rc));
    cudaGetLastError(); /* clear the sticky-free error state */
    return -1;
}

int device_count(char *err, size_t errsize)
{
    int n = 0;
    cudaError_t rc = cudaGetDeviceCount(&n);

    if (rc == cudaErrorNoDevice)
        return 0;
    if (rc != cudaSuccess)
        return fail(rc, "cudaGetDeviceCount", err, errsize);
    return n;
}

void *device_malloc(int device, uint64_t bytes)
{
    void *p = nullptr;

    if (cudaSetDevice(device) != cudaSuccess || cudaMalloc(&p, bytes) != cudaSuccess) {
        cudaGetLastError();
        return nullptr;
    }
    return p;
}

void device_free(int device, void *ptr)
{
    if (cudaSetDevice(device) == cudaSuccess)
        cudaFree(ptr);
}

int device_memcpy(int device, void *dst, const void *src, uint64_t bytes,
                  enum tr_cuda_copy_kind kind, char *err, size_t errsize)
{
    static const cudaMemcpyKind kinds[] = {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                                           cudaMemcpyDeviceToDevice};
    cudaError_t rc = cudaSetDevice(device);

    if (rc == cudaSuccess)
        rc = cudaMemcpy(dst, src, bytes, kinds[kind]);
    return rc == cudaSuccess ? 0 : fail(rc, "cudaMemcpy", err, errsize);
}

int device_memset(int device, void *dst, int value, uint64_t bytes, char *err, size_t errsize)
{
    cudaError_t rc = cudaSetDevice(device);

    if (rc == cudaSuccess)
        rc = cudaMemset(dst, value, bytes);
    if (rc == cudaSuccess)
        rc = cudaDeviceSynchronize();
    return rc == cudaSuccess ? 0 : fail(rc, "cudaMemset", err, errsize);
}

struct strided_layout {
    int ndim;
    int64_t shape[TR_CUDA_MAX_NDIM];
    int64_t strides[TR_CUDA_MAX_NDIM]; /* bytes */
};

/* One thread per output element: dst is compact, src is read through the
 * layout's byte strides. */
template <typename T>
__global__ void gather_kernel(T *dst, const char *src, int64_t n, strided_layout layout)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t rest = i, offset = 0;
        for (int d = layout.ndim - 1; d >= 0; d--) {
            offset += rest % layout.shape[d] * layout.strides[d];
            rest /= layout.shape[d];
        }
        dst[i] = *(const T *)(src + offset);
    }
}

template <typename T>
void launch_gather(void *dst, const void *src, int64_t n, const strided_layout &layout)
{
    int threads = 256;
    int64_t blocks = (n + threads - 1) / threads;

    if (blocks > 65535 * 16)
        blocks = 65535 * 16;
    gather_kernel<T><<<(unsigned)blocks, threads>>>((T *)dst, (const char *)src, n, layout);
}

int copy_strided(int device, void *dst, const void *src, uint64_t itemsize, int ndim,
                 const int64_t *shape, const int64_t *strides, char *err, size_t errsize)
{
    strided_layout layout = {};
    int64_t n = 1;
    cudaError_t rc;

    if (ndim < 0 || ndim > TR_CUDA_MAX_NDIM) {
        snprintf(err, errsize, "copy_strided: %d dimensions", ndim);
        return -1;
    }
    layout.ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        layout.shape[d] = shape[d];
        layout.strides[d] = strides[d];
        n *= shape[d];
    }
    if (n == 0)
        return 0;
    rc = cudaSetDevice(device);
    if (rc != cudaSuccess)
        return fail(rc, "cudaSetDevice", err, errsize);
    switch (itemsize) {
    case 1: launch_gather<uint8_t>(dst, src, n, layout); break;
    case 2: launch_gather<uint16_t>(dst, src, n, layout); break;
    case 4: launch_gather<uint32_t>(dst, src, n, layout); break;
    case 8: launch_gather<uint64_t>(dst, src, n, layout); break;
    default:
        snprintf(err, errsize, "copy_strided: item size %llu", (unsigned long long)itemsize);
        return -1;
    }
    rc = cudaGetLastError();
    if (rc == cudaSuccess)
        rc = cudaDeviceSynchronize();
    return rc == cudaSuccess ? 0 : fail(rc, "the strided copy kernel", err, errsize);
}

int device_synchronize(int device, char *err, size_t errsize)
{
    cudaError_t rc = cudaSetDevice(device);

    if (rc == cudaSuccess)
        rc = cudaDeviceSynchronize();
    return rc == cudaSuccess ? 0 : fail(rc, "cudaDeviceSynchronize", err, errsize);
}

const tr_cuda_module module_table = {
    TR_CUDA_MODULE_ABI, device_count,  device_malloc, device_free,
    device_memcpy,      device_memset, copy_strided,  device_synchronize,
};

} /* namespace */

extern "C" __attribute__((visibility("default"))) const struct tr_cuda_module *
tr_cuda_module_get(int abi)
{
    return abi == TR_CUDA_MODULE_ABI ? &module_table : nullptr;
}
