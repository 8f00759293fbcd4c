/*
 * cuda_module.h - the table of functions through which the engine uses the
 * CUDA module (tensorrun-cuda.so).  Plain C, no CUDA header: the engine
 * includes it, and the module (src/engine/cuda/) fills it in.
 *
 * Every function that can fail returns 0 on success, or -1 after writing a
 * sentence into err (errsize bytes).
 */
#ifndef TR_CUDA_MODULE_H
#define TR_CUDA_MODULE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TR_CUDA_MODULE_ABI 2
#define TR_CUDA_MODULE_SYMBOL "tr_cuda_module_get"
#define TR_CUDA_MAX_NDIM 8

enum tr_cuda_copy_kind {
    TR_CUDA_HOST_TO_DEVICE,
    TR_CUDA_DEVICE_TO_HOST,
    TR_CUDA_DEVICE_TO_DEVICE
};

struct tr_cuda_module {
    int abi; /* TR_CUDA_MODULE_ABI */
    /* Devices the runtime sees (0 or more), or -1 when it cannot start. */
    int (*device_count)(char *err, size_t errsize);
    /* Device memory, or NULL when the device has none left. */
    void *(*malloc)(int device, uint64_t bytes);
    void (*free)(int device, void *ptr);
    int (*memcpy)(int device, void *dst, const void *src, uint64_t bytes,
                  enum tr_cuda_copy_kind kind, char *err, size_t errsize);
    int (*memset)(int device, void *dst, int value, uint64_t bytes, char *err,
                  size_t errsize);
    /* Gathers a strided view on the device into a compact buffer on the same
     * device.  strides are in bytes and may be 0 or negative; src points at
     * element 0. */
    int (*copy_strided)(int device, void *dst, const void *src, uint64_t itemsize,
                        int ndim, const int64_t *shape, const int64_t *strides,
                        char *err, size_t errsize);
    /* Waits until all work issued on the device is done. */
    int (*synchronize)(int device, char *err, size_t errsize);
};

typedef const struct tr_cuda_module *(*tr_cuda_module_get_fn)(int abi);

#ifdef __cplusplus
}
#endif

#endif /* TR_CUDA_MODULE_H */
