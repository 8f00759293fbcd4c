/*
 * bench_sum.h - the read-and-sum loop that mapped_sum (over a mapped file)
 * and stream (over anonymous memory) share, so that the two differ only in
 * where the bytes come from.
 */
#ifndef BENCH_SUM_H
#define BENCH_SUM_H

#include <stddef.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* The threads an OpenMP loop here runs on (1 in a build without OpenMP). */
static inline int bench_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* Four floats, loaded from any float address (the data of a .npy is only
 * as aligned as its header length makes it). */
typedef float bench_v4 __attribute__((vector_size(16), aligned(4), may_alias));

/* The sum of x[0..n), in any order: per OpenMP thread, eight 4-lane float
 * accumulators, so that eight additions are in flight at a time. */
static inline double bench_sum_f32(const float *x, size_t n)
{
    size_t blocks = n / 32;
    double total = 0;

#pragma omp parallel reduction(+ : total)
    {
        bench_v4 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0}, a5 = {0}, a6 = {0}, a7 = {0};
        bench_v4 s;

#pragma omp for schedule(static)
        for (size_t b = 0; b < blocks; b++) {
            const bench_v4 *p = (const bench_v4 *)(x + b * 32);
            a0 += p[0];
            a1 += p[1];
            a2 += p[2];
            a3 += p[3];
            a4 += p[4];
            a5 += p[5];
            a6 += p[6];
            a7 += p[7];
        }
        s = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));
        total += (double)s[0] + (double)s[1] + (double)s[2] + (double)s[3];
    }
    for (size_t i = blocks * 32; i < n; i++)
        total += x[i];
    return total;
}

#endif
