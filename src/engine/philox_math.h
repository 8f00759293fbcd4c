/*
 * philox_math.h - the random numbers of rand and randn, bit for bit as
 * tensorrun-pipeline(5), RANDOM NUMBERS defines them, in one header that the host (cpu/create.c) and
 * the CUDA kernels both include, so that a seed gives the same bits on
 * either.
 *
 * Element i (the row-major index in the output) of a tensor drawn with
 * seed s is made from one Philox-4x32-10 block (Random123's philox4x32,
 * 10 rounds) with key (lo32(s), hi32(s)) and counter (lo32(i), hi32(i),
 * 0, 0), giving words w0 w1 w2 w3:
 *
 *   rand f32   (w0 >> 8) * 2^-24                 in [0, 1), 24 bits
 *   rand f64   (((w0 << 32) | w1) >> 11) * 2^-53 in [0, 1), 53 bits
 *   rand f16   (w0 >> 21) * 2^-11                in [0, 1), 11 bits
 *   rand bf16  (w0 >> 24) * 2^-8                 in [0, 1), 8 bits
 *   randn      u1 = ((w0 >> 8) + 1) * 2^-24, u2 = (w1 >> 8) * 2^-24,
 *              z = sqrt(-2 ln u1) * cos(2 pi u2) in f64, then rounded once
 *              (to nearest even) to the output dtype
 *
 * (f16 and bf16 take as many of w0's top
 * bits as their significands hold, so that every value is exact, evenly
 * spaced, and none rounds up to 1.)
 *
 * ln and cos are our own, not the platform's libm, whose last bits differ
 * between glibc and CUDA: tr__pm_log and tr__pm_cos_2pi below, written
 * with nothing but IEEE double additions, multiplications, one division
 * and sqrt, each correctly rounded on both sides.  Code that includes this
 * header must be compiled without contraction into fused multiply-adds
 * (-ffp-contract=off on the host, --fmad=false under nvcc), or the two
 * sides would round differently.
 *
 * Accuracy, measured against long double references (glibc's logl,
 * cosl and sinl): tr__pm_log is within 0.83 ulp over all 2^24 values of
 * u1 and 10^7 random positive doubles (fdlibm's method and coefficients,
 * documented below 1 ulp); tr__pm_cos_2pi(u) is within 0.78 ulp of
 * cos(2 pi u) over all 2^24 values of u2, and within 1.5 ulp for any u.
 * For a multiple of 2^-25 (every u2 randn uses) the reduction to
 * [-pi/4, pi/4] is exact in u: 4u splits into an integer and a remainder
 * exactly, and 2 pi is applied in two parts, the first product exact;
 * other u add one rounding of the reduced argument.  Exact zeros, signs
 * and ones where cos(2 pi u) has them: cos_2pi(1/4) is -0, not 6e-17.
 * tests/unit/test_create.c checks these bounds on samples.
 *
 * The polynomial coefficients and the shape of the evaluation come from
 * fdlibm (e_log.c, k_sin.c, k_cos.c):
 *   Copyright (C) 1993 by Sun Microsystems, Inc. All rights reserved.
 *   Developed at SunSoft, a Sun Microsystems, Inc. business.
 *   Permission to use, copy, modify, and distribute this
 *   software is freely granted, provided that this notice
 *   is preserved.
 */
#ifndef TR_PHILOX_MATH_H
#define TR_PHILOX_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <Random123/philox.h>

#include "convert_scalar.h" /* the 16-bit floats */

#if defined(__CUDACC__)
#define TR__PM_FN static inline __host__ __device__
#else
#define TR__PM_FN static inline
#endif

/* The four words of element i's Philox-4x32-10 block for seed. */
TR__PM_FN void tr__philox_words(uint64_t seed, uint64_t i, uint32_t w[4])
{
    philox4x32_ctr_t ctr = {{(uint32_t)i, (uint32_t)(i >> 32), 0, 0}};
    philox4x32_key_t key = {{(uint32_t)seed, (uint32_t)(seed >> 32)}};
    philox4x32_ctr_t r = philox4x32_R(10, ctr, key);

    w[0] = r.v[0];
    w[1] = r.v[1];
    w[2] = r.v[2];
    w[3] = r.v[3];
}

TR__PM_FN uint64_t tr__pm_bits(double x)
{
    uint64_t b;

    memcpy(&b, &x, sizeof b);
    return b;
}

TR__PM_FN double tr__pm_double(uint64_t b)
{
    double x;

    memcpy(&x, &b, sizeof x);
    return x;
}

/*
 * The natural logarithm (fdlibm's __ieee754_log): x = 2^k (1 + f) with
 * 1 + f in [sqrt(2)/2, sqrt(2)); log(1 + f) = f - f^2/2 + s (f^2/2 + R)
 * with s = f / (2 + f) and R a degree-14 polynomial in s; ln 2 in two
 * parts, the first of 32 bits so that k ln2_hi is exact.  Within 1 ulp.
 * log(0) = -inf, log(negative) = NaN, log(inf) = inf, log(NaN) = NaN.
 */
TR__PM_FN double tr__pm_log(double x)
{
    const double ln2_hi = 6.93147180369123816490e-01; /* 3fe62e42 fee00000 */
    const double ln2_lo = 1.90821492927058770002e-10; /* 3dea39ef 35793c76 */
    const double two54 = 1.80143985094819840000e+16;  /* 43500000 00000000 */
    const double lg1 = 6.666666666666735130e-01;      /* 3FE55555 55555593 */
    const double lg2 = 3.999999999940941908e-01;      /* 3FD99999 9997FA04 */
    const double lg3 = 2.857142874366239149e-01;      /* 3FD24924 94229359 */
    const double lg4 = 2.222219843214978396e-01;      /* 3FCC71C5 1D8E78AF */
    const double lg5 = 1.818357216161805012e-01;      /* 3FC74664 96CB03DE */
    const double lg6 = 1.531383769920937332e-01;      /* 3FC39A09 D078C69F */
    const double lg7 = 1.479819860511658591e-01;      /* 3FC2F112 DF3E5244 */
    uint64_t bits = tr__pm_bits(x);
    int32_t hx = (int32_t)(bits >> 32), i, j;
    int k = 0;
    double f, s, z, w, r, t1, t2, hfsq, dk;

    if (hx < 0x00100000) { /* x < 2^-1022: zero, negative or subnormal */
        if ((bits & UINT64_C(0x7fffffffffffffff)) == 0)
            return -INFINITY;
        if (hx < 0)
            return NAN;
        k -= 54; /* subnormal: scale into the normal range */
        x *= two54;
        bits = tr__pm_bits(x);
        hx = (int32_t)(bits >> 32);
    }
    if (hx >= 0x7ff00000)
        return x + x; /* inf or NaN */
    k += (hx >> 20) - 1023;
    hx &= 0x000fffff;
    /* the mantissa in [1, 2) moves to [sqrt(2)/2, sqrt(2)) */
    i = (hx + 0x95f64) & 0x100000;
    bits = ((uint64_t)(uint32_t)(hx | (i ^ 0x3ff00000)) << 32) | (bits & 0xffffffffu);
    x = tr__pm_double(bits);
    k += i >> 20;
    f = x - 1.0;
    dk = (double)k;
    if ((0x000fffff & (2 + hx)) < 3) { /* |f| < 2^-20 */
        if (f == 0.0)
            return k == 0 ? 0.0 : dk * ln2_hi + dk * ln2_lo;
        r = f * f * (0.5 - 0.33333333333333333 * f);
        return k == 0 ? f - r : dk * ln2_hi - ((r - dk * ln2_lo) - f);
    }
    s = f / (2.0 + f);
    z = s * s;
    i = hx - 0x6147a;
    w = z * z;
    j = 0x6b851 - hx;
    t1 = w * (lg2 + w * (lg4 + w * lg6));
    t2 = z * (lg1 + w * (lg3 + w * (lg5 + w * lg7)));
    i |= j;
    r = t2 + t1;
    if (i > 0) { /* f beyond about 0.15 either side: the longer form */
        hfsq = 0.5 * f * f;
        return k == 0 ? f - (hfsq - s * (hfsq + r))
                      : dk * ln2_hi - ((hfsq - (s * (hfsq + r) + dk * ln2_lo)) - f);
    }
    return k == 0 ? f - s * (f - r) : dk * ln2_hi - ((s * (f - r) - dk * ln2_lo) - f);
}

/* sin(x + y) for |x + y| <= pi/4, y the tail of x (fdlibm's __kernel_sin). */
TR__PM_FN double tr__pm_kernel_sin(double x, double y)
{
    const double s1 = -1.66666666666666324348e-01; /* BFC55555 55555549 */
    const double s2 = 8.33333333332248946124e-03;  /* 3F811111 1110F8A6 */
    const double s3 = -1.98412698298579493134e-04; /* BF2A01A0 19C161D5 */
    const double s4 = 2.75573137070700676789e-06;  /* 3EC71DE3 57B1FE7D */
    const double s5 = -2.50507602534068634195e-08; /* BE5AE5E6 8A2B9CEB */
    const double s6 = 1.58969099521155010221e-10;  /* 3DE5D93A 5ACFD57C */
    double z = x * x, v = z * x, r = s2 + z * (s3 + z * (s4 + z * (s5 + z * s6)));

    return x - ((z * (0.5 * y - v * r) - y) - v * s1);
}

/* cos(x + y) for |x + y| <= pi/4, y the tail of x (fdlibm's __kernel_cos,
 * in its later form, without a branch on |x|). */
TR__PM_FN double tr__pm_kernel_cos(double x, double y)
{
    const double c1 = 4.16666666666666019037e-02;  /* 3FA55555 5555554C */
    const double c2 = -1.38888888888741095749e-03; /* BF56C16C 16C15177 */
    const double c3 = 2.48015872894767294178e-05;  /* 3EFA01A0 19CB1590 */
    const double c4 = -2.75573143513906633035e-07; /* BE927E4F 809C52AD */
    const double c5 = 2.08757232129817482790e-09;  /* 3E21EE9E BDB4B1C4 */
    const double c6 = -1.13596475577881948265e-11; /* BDA8FAE9 BE8838D4 */
    double z = x * x, w = z * z;
    double r = z * (c1 + z * (c2 + z * c3)) + w * w * (c4 + z * (c5 + z * c6));
    double hz = 0.5 * z;

    w = 1.0 - hz;
    return w + (((1.0 - w) - hz) + (z * r - x * y));
}

/*
 * cos(2 pi u).  The reduction happens in u, where it is exact: q, the
 * nearest integer to 4u, picks the quadrant and t = u - q/4 in [-1/8, 1/8]
 * is exact; then r = 2 pi t with 2 pi in two parts, the first of 31
 * significant bits so that its product with a t of at most 22 bits (any
 * multiple of 2^-25, since |t| <= 1/8) is exact too, and cos(2 pi u) is
 * +-cos(r) or +-sin(r).  NaN for u infinite or NaN.
 */
TR__PM_FN double tr__pm_cos_2pi(double u)
{
    /* 4 times fdlibm's pio2_1 (the first 33 bits of pi/2) and pio2_1t */
    const double two_pi_1 = 6.28318530693650245667e+00;  /* 401921FB 54400000 */
    const double two_pi_1t = 2.43084020260247689973e-10; /* 3DF0B461 1A626331 */
    double v, q, t, hi, lo, r, y;

    if (u - u != 0.0)
        return NAN; /* inf or NaN */
    v = 4.0 * u; /* exact, as is every step up to r's two parts */
    if (v >= 0x1p52 || v <= -0x1p52) {
        q = v; /* an integer already */
    } else {
        /* the nearest integer (halves up), without libm's floor */
        double h = v + 0.5, tq = (double)(int64_t)h;
        q = tq > h ? tq - 1.0 : tq;
    }
    if (q >= 0x1p62 || q <= -0x1p62)
        return 1.0; /* u is a multiple of 2^60: cos(2 pi n) = 1 */
    t = u - q * 0.25;
    hi = t * two_pi_1;
    lo = t * two_pi_1t;
    r = hi + lo;
    y = (hi - r) + lo;
    switch ((int64_t)q & 3) { /* two's complement: -1 & 3 = 3, the right quadrant */
    case 0: return tr__pm_kernel_cos(r, y);
    case 1: return -tr__pm_kernel_sin(r, y);
    case 2: return -tr__pm_kernel_cos(r, y);
    default: return tr__pm_kernel_sin(r, y);
    }
}

/* ---------------------------------------------------------- the numbers */

TR__PM_FN float tr__rand_f32(uint64_t seed, uint64_t i)
{
    uint32_t w[4];

    tr__philox_words(seed, i, w);
    return (float)(w[0] >> 8) * 0x1p-24f;
}

TR__PM_FN double tr__rand_f64(uint64_t seed, uint64_t i)
{
    uint32_t w[4];

    tr__philox_words(seed, i, w);
    return (double)((((uint64_t)w[0] << 32) | w[1]) >> 11) * 0x1p-53;
}

/* rand for the 16-bit floats, as an f32 holding a value the format
 * represents exactly: bits = 11 for f16, 8 for bf16. */
TR__PM_FN float tr__rand_short(uint64_t seed, uint64_t i, int bits)
{
    uint32_t w[4];

    tr__philox_words(seed, i, w);
    return (float)(w[0] >> (32 - bits)) * (1.0f / (float)(1u << bits));
}

TR__PM_FN double tr__randn_f64(uint64_t seed, uint64_t i)
{
    uint32_t w[4];
    double u1, u2;

    tr__philox_words(seed, i, w);
    u1 = (double)((w[0] >> 8) + 1) * 0x1p-24; /* in (0, 1]: ln u1 is finite */
    u2 = (double)(w[1] >> 8) * 0x1p-24;
    return sqrt(-2.0 * tr__pm_log(u1)) * tr__pm_cos_2pi(u2);
}

/* Element i of rand (normal false) or randn of seed, stored at dst as
 * dtype (a float dtype). */
TR__PM_FN void tr__random_store(void *dst, enum tr_dtype dtype, bool normal, uint64_t seed,
                                uint64_t i)
{
    float f;
    double d;
    uint16_t h;

    switch (dtype) {
    case TR_DTYPE_F32:
        f = normal ? (float)tr__randn_f64(seed, i) : tr__rand_f32(seed, i);
        memcpy(dst, &f, sizeof f);
        break;
    case TR_DTYPE_F64:
        d = normal ? tr__randn_f64(seed, i) : tr__rand_f64(seed, i);
        memcpy(dst, &d, sizeof d);
        break;
    case TR_DTYPE_F16:
        h = normal ? tr__f64_to_f16(tr__randn_f64(seed, i))
                   : tr__f32_to_f16(tr__rand_short(seed, i, 11));
        memcpy(dst, &h, sizeof h);
        break;
    default: /* bf16 */
        h = normal ? tr__f64_to_bf16(tr__randn_f64(seed, i))
                   : tr__f32_to_bf16(tr__rand_short(seed, i, 8));
        memcpy(dst, &h, sizeof h);
        break;
    }
}

#endif /* TR_PHILOX_MATH_H */
