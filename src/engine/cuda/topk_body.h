/*
 * topk_body.h - the module's topk (struct tr_cuda_topk), written once for
 * the GPU kernel (cuda/topk.cu) and the host stand-in of the tests.  Plain
 * C that nvcc also compiles as device code.
 *
 * Each value becomes a 64-bit key whose unsigned order is the wanted
 * order, as the CPU's sort makes them (sort_key.h): NaN above +inf, -0
 * equal to +0, every bit inverted for the largest first.  The k first of
 * the pairs (key, position) are then found without sorting the line:
 *   1. the k-th key T, by radix selection: eight passes of 8 bits, from
 *      the top, each counting the candidates' next byte (a histogram: the
 *      counts do not depend on the order they are made in);
 *   2. a value whose key is below T goes to the place the number of keys
 *      below its own, and of equal keys before it, gives it (at most k - 1
 *      of them, each counting over the line);
 *   3. the values whose key is T go, in position order, to the places left:
 *      their rank among them is a running count in position order.
 * The result is the CPU's: the same pairs in the same order.
 */
#ifndef TR_CUDA_TOPK_BODY_H
#define TR_CUDA_TOPK_BODY_H

#include "../sort_key.h"
#include "map_body.h"

#define TR__CUDA_TOPK_THREADS 256

/* Value i of the line at base as its key. */
TR_HD static inline uint64_t tr__cuda_topk_key(const struct tr_cuda_topk *t, const char *base,
                                               int64_t i)
{
    const void *src = base + i * t->x_step;
    uint64_t k;

    if (t->x_dtype == TR_DTYPE_F16 || t->x_dtype == TR_DTYPE_BF16 ||
        t->x_dtype == TR_DTYPE_F32 || t->x_dtype == TR_DTYPE_F64) {
        double v;
        tr__convert_value(&v, TR_DTYPE_F64, src, (enum tr_dtype)t->x_dtype);
        k = tr__sort_key_f64(v);
    } else if (t->x_dtype == TR_DTYPE_U64 || t->x_dtype == TR_DTYPE_U32 ||
               t->x_dtype == TR_DTYPE_U16 || t->x_dtype == TR_DTYPE_U8) {
        tr__convert_value(&k, TR_DTYPE_U64, src, (enum tr_dtype)t->x_dtype);
    } else { /* signed integers and bool */
        int64_t v;
        tr__convert_value(&v, TR_DTYPE_I64, src, (enum tr_dtype)t->x_dtype);
        k = tr__sort_key_i64(v);
    }
    return t->largest ? ~k : k;
}

/* Whether key belongs to the candidates of a radix pass: its bits above
 * shift + 8 are prefix's. */
TR_HD static inline bool tr__cuda_topk_matches(uint64_t key, uint64_t prefix, int shift)
{
    return shift >= 56 || (key >> (shift + 8)) == (prefix >> (shift + 8));
}

/* After a pass's histogram (hist[256] of the candidates' byte at shift):
 * the byte of the need-th smallest candidate, into *prefix, and need less
 * the candidates below it. */
TR_HD static inline void tr__cuda_topk_pick(const uint32_t *hist, int shift, uint64_t *prefix,
                                            int64_t *need)
{
    int64_t below = 0;
    int b = 0;

    while (b < 255 && below + (int64_t)hist[b] < *need)
        below += hist[b++];
    *prefix |= (uint64_t)b << shift;
    *need -= below;
}

/* Where value i (key) of a line goes when its key is below T: the keys
 * below it, and the equal ones before it, in the whole line. */
TR_HD static inline int64_t tr__cuda_topk_place(const struct tr_cuda_topk *t, const char *base,
                                                int64_t i, uint64_t key)
{
    int64_t place = 0;

    for (int64_t j = 0; j < t->len; j++) {
        uint64_t kj = tr__cuda_topk_key(t, base, j);
        place += kj < key || (kj == key && j < i);
    }
    return place;
}

/* Stores value i of the line at base, and its position, in result place
 * (of the line whose result offset, in elements, is oo). */
TR_HD static inline void tr__cuda_topk_store(const struct tr_cuda_topk *t, const char *base,
                                             int64_t oo, int64_t place, int64_t i)
{
    int64_t at = oo + place * t->out_step;

    t->indices[at] = i;
    if (t->values)
        memcpy((char *)t->values + at * t->item, base + i * t->x_step, (size_t)t->item);
}

/* The byte offset of line l in x, and its offset in the results. */
TR_HD static inline void tr__cuda_topk_offsets(const struct tr_cuda_topk *t, int64_t l,
                                               int64_t *xo, int64_t *oo)
{
    *xo = tr__cuda_offset(t->nother, t->other_shape, t->x_strides, l);
    *oo = tr__cuda_offset(t->nother, t->other_shape, t->out_strides, l);
}

#endif /* TR_CUDA_TOPK_BODY_H */
