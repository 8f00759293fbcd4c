/*
 * kernels.h - every CPU kernel, declared once from kernels.def (a kernel
 * that serves several ops is declared once per row; C allows the repeats).
 */
#ifndef TR_KERNELS_H
#define TR_KERNELS_H

#include "kernel_impl.h"

#define KERNEL(id, fn)                                                       \
    tr_status fn(const struct tr__op *op, const struct tr_arg *args, const struct tr_value *out, \
                 const struct tr_dest *dest, struct tr_tensor **results);
#include "kernels.def"
#undef KERNEL

#endif /* TR_KERNELS_H */
