/*
 * cpu/reduce_impl.h - what the reductions (reduce.c) and the neural ops
 * (nn.c) share: the fixed summation tree whose bits do not depend on the
 * thread count, and strided walks that read values a block at a time.
 *
 * The tree, once for both files.  A sum over n values is cut into blocks
 * of TR__REDUCE_BLOCK values from the first one; each block is summed by
 * TR__PAIRWISE, and the blocks' sums are summed by TR__PAIRWISE again, in
 * block order.  Which thread computes which block never changes a bit,
 * and a sum that nn.c computes along a line is the same tree, and so the
 * same bits, as the reduction op over that one dimension (layer_norm's
 * mean is mean(x, -1), l2_normalize's norm is norm(x, dim)).
 */
#ifndef TR_CPU_REDUCE_IMPL_H
#define TR_CPU_REDUCE_IMPL_H

#include <string.h>

#include "../kernel_impl.h"

/* Values per block of a reduction: a block of f64 values (32 KiB) stays in
 * the L1/L2 cache while it is summed. */
#define TR__REDUCE_BLOCK 4096

/*
 * static ACC name(const IN *a, int64_t n, ACC p): the sum of F(a[i], p)
 * for i < n, pairwise, as NumPy sums: fewer than 8 terms are added in
 * order (0 for none); up to 128 go into eight interleaved partial sums
 * (the compiler vectorises that loop) combined as ((0+1)+(2+3))+((4+5)+(6+7))
 * with the remainder added in order; longer runs are halved, the first half
 * a multiple of 8, and the halves' sums added.  The error is O(log n)
 * roundings, not the O(n) of a running sum.  F is a macro of the value and
 * the parameter p (a mean to subtract, a maximum, an exponent).
 *
 * Eight partial sums are one chain of vector additions, and wait on its
 * latency; a run of 512, which the halving of a block of 4096 reaches, is
 * four runs of 128 whose four chains interleave, combined as the halving
 * would combine them, so the bits are the same.
 */
#define TR__PW_COMBINE(r)                                                    \
    ((((r)[0] + (r)[1]) + ((r)[2] + (r)[3])) + (((r)[4] + (r)[5]) + ((r)[6] + (r)[7])))

#define TR__PAIRWISE(name, IN, ACC, F)                                       \
    TR__VECTOR_CLONES static ACC name(const IN *a, int64_t n, ACC p)                           \
    {                                                                        \
        ACC s, r[8];                                                         \
        int64_t i, h;                                                        \
        (void)p;                                                             \
        if (n < 8) {                                                         \
            if (n <= 0)                                                      \
                return 0;                                                    \
            s = F(a[0], p);                                                  \
            for (i = 1; i < n; i++)                                          \
                s += F(a[i], p);                                             \
            return s;                                                        \
        }                                                                    \
        if (n <= 128) {                                                      \
            for (int k = 0; k < 8; k++)                                      \
                r[k] = F(a[k], p);                                           \
            for (i = 8; i + 8 <= n; i += 8)                                  \
                for (int k = 0; k < 8; k++)                                  \
                    r[k] += F(a[i + k], p);                                  \
            s = TR__PW_COMBINE(r);                                           \
            for (; i < n; i++)                                               \
                s += F(a[i], p);                                             \
            return s;                                                        \
        }                                                                    \
        if (n == 4 * 128) {                                                  \
            ACC q0[8], q1[8], q2[8], q3[8];                                  \
            for (int k = 0; k < 8; k++) {                                    \
                q0[k] = F(a[k], p);                                          \
                q1[k] = F(a[128 + k], p);                                    \
                q2[k] = F(a[256 + k], p);                                    \
                q3[k] = F(a[384 + k], p);                                    \
            }                                                                \
            for (i = 8; i < 128; i += 8)                                     \
                for (int k = 0; k < 8; k++) {                                \
                    q0[k] += F(a[i + k], p);                                 \
                    q1[k] += F(a[128 + i + k], p);                           \
                    q2[k] += F(a[256 + i + k], p);                           \
                    q3[k] += F(a[384 + i + k], p);                           \
                }                                                            \
            return (TR__PW_COMBINE(q0) + TR__PW_COMBINE(q1)) +               \
                   (TR__PW_COMBINE(q2) + TR__PW_COMBINE(q3));                \
        }                                                                    \
        h = n / 2;                                                           \
        h -= h % 8;                                                          \
        return name(a, h, p) + name(a + h, n - h, p);                        \
    }

/* The usual transforms for TR__PAIRWISE. */
#define TR__PW_SAME(x, p) (x)
#define TR__PW_SQUARE(x, p) ((x) * (x))
#define TR__PW_SQDEV(x, p) (((x) - (p)) * ((x) - (p)))

/*
 * e^x in f32 by Cephes' polynomial, a row at a time: libm's expf is a call
 * per value, and softmax spends most of its time there.  x = k ln2 + r
 * with |r| <= ln2/2 (ln2 in two parts, so k ln2 is exact), e^r by a
 * degree-6 polynomial, 2^k built in the exponent bits in two factors so
 * that results down to the smallest subnormal round once.  Within 2 ulp
 * of e^x (tested); 0 below -104, inf above 88.73, NaN kept.
 *
 * tr__expf is the scalar form; tr__expf_sub_row runs four values at a time
 * with SSE2 (the x86-64 baseline), or eight with AVX2 where the CPU has it,
 * doing the very same IEEE operations in the same order, max and min
 * included, so every value has the same bits whichever form computes it,
 * on any machine (-ffp-contract=off keeps the compiler from fusing any of
 * them, and no FMA instruction is used).
 */
#define TR__EXP_LO -104.0f
#define TR__EXP_HI 88.73f
#define TR__EXP_LOG2E 1.44269504088896341f
#define TR__EXP_ROUND 12582912.0f /* 1.5 * 2^23: adding and subtracting it rounds */
#define TR__EXP_C1 0.693359375f
#define TR__EXP_C2 -2.12194440e-4f
#define TR__EXP_P0 1.9875691500e-4f
#define TR__EXP_P1 1.3981999507e-3f
#define TR__EXP_P2 8.3334519073e-3f
#define TR__EXP_P3 4.1665795894e-2f
#define TR__EXP_P4 1.6666665459e-1f
#define TR__EXP_P5 5.0000001201e-1f

static inline float tr__expf(float x)
{
    /* clamped as SSE's maxps and minps do: a NaN becomes TR__EXP_LO here,
     * and the result is x itself at the end */
    float c = x > TR__EXP_LO ? x : TR__EXP_LO;
    float kf, r, p, s1, s2;
    int32_t k, k1, k2;
    uint32_t b1, b2;

    c = c < TR__EXP_HI ? c : TR__EXP_HI;
    kf = (c * TR__EXP_LOG2E + TR__EXP_ROUND) - TR__EXP_ROUND;
    r = (c - kf * TR__EXP_C1) - kf * TR__EXP_C2;
    k = (int32_t)kf;
    k1 = k / 2;
    k2 = k - k1;
    b1 = (uint32_t)(k1 + 127) << 23;
    b2 = (uint32_t)(k2 + 127) << 23;
    memcpy(&s1, &b1, sizeof s1);
    memcpy(&s2, &b2, sizeof s2);
    p = TR__EXP_P0;
    p = p * r + TR__EXP_P1;
    p = p * r + TR__EXP_P2;
    p = p * r + TR__EXP_P3;
    p = p * r + TR__EXP_P4;
    p = p * r + TR__EXP_P5;
    p = (p * r * r + r) + 1.0f;
    return x != x ? x : p * s1 * s2;
}

/* y[i] = e^(x[i] - sub) for i < n, each value's bits those of tr__expf
 * (reduce.c: four or eight at a time, by what the CPU has); y may be x. */
void tr__expf_sub_row(float *y, const float *x, int64_t n, float sub);

/* The byte offset of every operand of it at element `index` of its whole
 * index space (row-major over all its folded dimensions). */
static inline void tr__iter_offsets(const struct tr__iter *it, int64_t index, int64_t *offsets)
{
    for (int k = 0; k < it->nops; k++)
        offsets[k] = 0;
    for (int d = it->ndim - 1; d >= 0 && index > 0; d--) {
        int64_t i = index % it->shape[d];
        index /= it->shape[d];
        for (int k = 0; k < it->nops; k++)
            offsets[k] += i * it->strides[k][d];
    }
}

static inline int64_t tr__iter_count(const struct tr__iter *it)
{
    return tr__iter_rows(it) * it->shape[it->ndim - 1];
}

/*
 * Elements [first, first + n) of the walk it (one operand: a strided view
 * folded by tr__iter_init, elements in row-major order) from base, as n
 * compact values of dtype `to`: a pointer into the source itself when it
 * already is such a run, else the values converted into buf.
 */
static inline const void *tr__walk_block(const struct tr__iter *it, const char *base,
                                         enum tr_dtype from, int64_t first, int64_t n,
                                         char *buf, enum tr_dtype to)
{
    int last = it->ndim - 1;
    int64_t len = it->shape[last], step = it->strides[0][last];
    /* no division for the first block, the only one of most reductions */
    int64_t row = first && len ? first / len : 0, col = first && len ? first % len : 0;
    int64_t off[TR__ITER_MAX_OPS];
    size_t size = tr_dtype_size(to);
    char *dst = buf;

    if (n <= 0)
        return buf;
    if (from == to && step == (int64_t)size && col + n <= len) {
        tr__iter_row_offsets(it, row, off);
        return base + off[0] + col * step;
    }
    while (n > 0) {
        int64_t run = len - col < n ? len - col : n;
        tr__iter_row_offsets(it, row, off);
        tr__cpu_cast_row(dst, (int64_t)size, to, base + off[0] + col * step, step, from, run);
        dst += run * (int64_t)size;
        n -= run;
        row++;
        col = 0;
    }
    return buf;
}

/* Values [first, first + n) of the walk it of nt outputs (at byte offsets
 * offs from base), as raw items: output q's at raw + q * pitch items.  Each
 * reduced position is read for all nt outputs before the next. */
#define GATHER_TILE(T)                                                       \
    for (int64_t r = 0; r < run; r++)                                        \
        for (int q = 0; q < nt; q++)                                         \
            memcpy(raw + ((int64_t)q * pitch + done + r) * (int64_t)sizeof(T),     \
                   src + offs[q] + r * step, sizeof(T))

static inline void tr__gather_tile(const struct tr__iter *it, const char *base,
                                   const int64_t *offs, int nt, int64_t first, int64_t n,
                                   size_t size, int64_t pitch, char *raw)
{
    int last = it->ndim - 1;
    int64_t len = it->shape[last], step = it->strides[0][last];
    int64_t row = first / len, col = first % len, done = 0, off[TR__ITER_MAX_OPS];

    while (done < n) {
        int64_t run = len - col < n - done ? len - col : n - done;
        const char *src;
        tr__iter_row_offsets(it, row, off);
        src = base + off[0] + col * step;
        switch (size) {
        case 1: GATHER_TILE(uint8_t); break;
        case 2: GATHER_TILE(uint16_t); break;
        case 4: GATHER_TILE(uint32_t); break;
        default: GATHER_TILE(uint64_t); break;
        }
        done += run;
        row++;
        col = 0;
    }
}

/* For the reductions of other backends, by this file's rules: which of
 * x's ndim dimensions dims (the op's "dim" argument's value, NULL when it
 * has none) reduces, and the dtype the values are read in for a result of
 * dtype y. */
tr_status tr__reduce_flags(const struct tr__op *op, const struct tr_value *dims, int ndim,
                           bool *flags);
enum tr_dtype tr__reduce_compute(const struct tr__op *op, enum tr_dtype x, enum tr_dtype y);

#endif /* TR_CPU_REDUCE_IMPL_H */
