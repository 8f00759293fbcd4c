/*
 * map_body.h - one element of the CUDA module's map (struct tr_cuda_map):
 * what each GPU thread computes, written once for the GPU kernel
 * (cuda/map.cu) and for the host, where the unit tests run it against the
 * CPU's kernels (tests/unit/test_cuda_bodies.c).  Plain C that nvcc also
 * compiles as device code.
 */
#ifndef TR_CUDA_MAP_BODY_H
#define TR_CUDA_MAP_BODY_H

#include "../convert_scalar.h"
#include "../ew_scalar.h"
#include "cuda_module.h"

/* A value of any compute dtype (f32, f64, i64, u64, or bool as u8). */
union tr__cuda_value {
    float f32;
    double f64;
    int64_t i64;
    uint64_t u64;
    uint8_t b;
    unsigned char bytes[8];
};

/* r = the function of code over v[0..nin), by the entries of ew_ops.def;
 * TR__EW_NONE (or a code outside them) gives v[0]. */
TR_HD static inline void tr__cuda_apply(int code, union tr__cuda_value *r,
                                        const union tr__cuda_value *v,
                                        const struct tr__ew_params *P)
{
#define TR__MEMBER_float f32
#define TR__MEMBER_double f64
#define TR__MEMBER_int64_t i64
#define TR__MEMBER_uint64_t u64
#define TR__MEMBER_uint8_t b
#define TR__M(T) TR__MEMBER_##T
#define UNARY(name, T, expr)                                                 \
    case TR__EW_##name: r->TR__M(T) = tr__ew_##name(v[0].TR__M(T), P); break;
#define PREDICATE(name, T, expr)                                             \
    case TR__EW_##name: r->b = tr__ew_##name(v[0].TR__M(T), P); break;
#define BINARY(name, T, U, expr)                                             \
    case TR__EW_##name: r->TR__M(U) = tr__ew_##name(v[0].TR__M(T), v[1].TR__M(T), P); break;
#define WHERE(name, T)                                                       \
    case TR__EW_##name:                                                      \
        r->TR__M(T) = tr__ew_##name(v[0].TR__M(T), v[1].TR__M(T), v[2].TR__M(T), P); \
        break;
/* clamp's operands are x and the bounds present: v[1] is the min when
 * there is one, else the max */
#define CLAMP(name, T)                                                       \
    case TR__EW_##name:                                                      \
        r->TR__M(T) = tr__ew_##name(v[0].TR__M(T), v[1].TR__M(T),           \
                                    v[P->which == 3 ? 2 : 1].TR__M(T), P);   \
        break;
    switch (code) {
#include "../ew_ops.def"
    default: *r = v[0]; break;
    }
#undef UNARY
#undef PREDICATE
#undef BINARY
#undef WHERE
#undef CLAMP
#undef TR__M
#undef TR__MEMBER_float
#undef TR__MEMBER_double
#undef TR__MEMBER_int64_t
#undef TR__MEMBER_uint64_t
#undef TR__MEMBER_uint8_t
}

/* The byte offset of element index (in row-major order of shape) along
 * strides. */
TR_HD static inline int64_t tr__cuda_offset(int ndim, const int64_t *shape,
                                            const int64_t *strides, int64_t index)
{
    int64_t offset = 0;

    for (int d = ndim - 1; d >= 0; d--) {
        offset += index % shape[d] * strides[d];
        index /= shape[d];
    }
    return offset;
}

/* Element index of m: read, computed and stored.  code is m->code, given
 * apart so that a kernel made for one code has it as a constant. */
TR_HD static inline void tr__cuda_map_one(const struct tr_cuda_map *m, int code, int64_t index)
{
    union tr__cuda_value v[TR_CUDA_MAX_OPERANDS], r;
    enum tr_dtype in = (enum tr_dtype)m->in_compute;

    for (int k = 0; k < m->nin; k++) {
        const struct tr_cuda_operand *o = &m->in[k];
        const void *src = o->data ? (const void *)((const char *)o->data +
                                                   tr__cuda_offset(m->ndim, m->shape,
                                                                   o->strides, index))
                                  : (const void *)o->value;
        if (o->dtype == (int)in)
            memcpy(&v[k], src, (size_t)tr__item_size(in));
        else
            tr__convert_value(&v[k], in, src, (enum tr_dtype)o->dtype);
    }
    tr__cuda_apply(code, &r, v, &m->params);
    tr__convert_value((char *)m->out + tr__cuda_offset(m->ndim, m->shape, m->out_strides, index),
                      (enum tr_dtype)m->out_dtype, &r, (enum tr_dtype)m->out_compute);
}

/* Element e of gather g: copied, or false when its index is out of range
 * (nothing stored). */
TR_HD static inline bool tr__cuda_gather_one(const struct tr_cuda_gather *g, int64_t e)
{
    int64_t rest = e, xo = 0, io = 0, iv = 0, coord[TR_CUDA_MAX_NDIM];
    const void *src;

    for (int d = g->ndim - 1; d >= 0; d--) {
        coord[d] = rest % g->shape[d];
        rest /= g->shape[d];
        io += coord[d] * g->index.strides[d];
    }
    src = g->index.data ? (const void *)((const char *)g->index.data + io)
                        : (const void *)g->index.value;
    tr__convert_value(&iv, TR_DTYPE_I64, src, (enum tr_dtype)g->index.dtype);
    if (iv < (g->from_end ? -g->size : 0) || iv >= g->size)
        return false;
    if (iv < 0)
        iv += g->size;
    for (int d = 0; d < g->ndim; d++)
        xo += (d == g->dim ? iv : coord[d]) * g->x_strides[d];
    memcpy((char *)g->out + e * g->item, (const char *)g->x + xo, (size_t)g->item);
    return true;
}

#endif /* TR_CUDA_MAP_BODY_H */
