/*
 * device_impl.h - device checks and the CUDA module, for the engine's files.
 */
#ifndef TR_DEVICE_IMPL_H
#define TR_DEVICE_IMPL_H

#include "engine_impl.h"

#include "cuda/cuda_module.h"

/* TR_OK when device exists; otherwise TR_ERR_DEVICE with a message that
 * begins with fn and says why (no driver, no module, no such index). */
tr_status tr__device_check(struct tr_device device, const char *fn);
/* The loaded CUDA module, or NULL when there is no usable CUDA device. */
const struct tr_cuda_module *tr__cuda(void);

/* Raw memory of a device, each failing with a message that begins with fn:
 * zero bytes at dst; copy host memory in (upload) or out (download). */
tr_status tr__device_fill_zero(struct tr_device device, void *dst, uint64_t bytes,
                               const char *fn);
tr_status tr__device_upload(struct tr_device device, void *dst, const void *src,
                            uint64_t bytes, const char *fn);
tr_status tr__device_download(struct tr_device device, void *dst, const void *src,
                              uint64_t bytes, const char *fn);

#endif /* TR_DEVICE_IMPL_H */
