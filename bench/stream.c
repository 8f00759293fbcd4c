/*
 * stream.c - the memory bandwidth this machine gives a simple loop, STREAM
 * style, on every OpenMP thread (OMP_NUM_THREADS):
 *   read-sum  the sum of READ_MIB MiB of f32 in anonymous memory, with the loop
 *             mapped_sum runs over a mapped file (bench_sum.h): the bytes
 *             a pass over a tensor can hope to read per second
 *   triad     a[i] = b[i] + 3 * c[i] over three f64 arrays of TRIAD_MIB each,
 *             counted as STREAM counts it: 24 bytes per element, the write
 *             allocate's extra read left out
 * Every array is written before it is timed, so no page faults are timed.
 * Each kernel runs ITERS times; the best is reported (STREAM's rule: the
 * best run is the one the rest of the machine disturbed least).
 *
 * Prints "READ_SUM_GBPS TRIAD_GBPS THREADS" (GB: 1e9 bytes).
 * Usage: stream [READ_MIB [TRIAD_MIB [ITERS]]]   (defaults 1024, 512, 10)
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_sum.h"

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void triad(double *restrict a, const double *restrict b, const double *restrict c,
                  size_t n)
{
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++)
        a[i] = b[i] + 3.0 * c[i];
}

static long arg_or(int argc, char **argv, int i, long def)
{
    char *end;
    long v;

    if (argc <= i)
        return def;
    v = strtol(argv[i], &end, 10);
    return *argv[i] && !*end && v > 0 && v <= 65536 ? v : -1;
}

int main(int argc, char **argv)
{
    long read_mib = arg_or(argc, argv, 1, 1024), triad_mib = arg_or(argc, argv, 2, 512);
    long iters = arg_or(argc, argv, 3, 10);
    size_t read_bytes, triad_bytes, nf, nd;
    double best_sum = 1e30, best_triad = 1e30, check = 0;
    float *x;
    double *a, *b, *c;

    if (read_mib < 1 || triad_mib < 1 || iters < 1) {
        fprintf(stderr, "usage: stream [READ_MIB [TRIAD_MIB [ITERS]]] (MiB at most 65536)\n");
        return 2;
    }
    read_bytes = (size_t)read_mib << 20;
    triad_bytes = (size_t)triad_mib << 20;
    nf = read_bytes / sizeof(float);
    nd = triad_bytes / sizeof(double);
    x = malloc(read_bytes);
    a = malloc(triad_bytes);
    b = malloc(triad_bytes);
    c = malloc(triad_bytes);
    if (!x || !a || !b || !c) {
        fprintf(stderr, "stream: cannot allocate %ld + 3 x %ld MiB\n", read_mib, triad_mib);
        return 1;
    }
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < nf; i++)
        x[i] = 1.0f;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < nd; i++) {
        a[i] = 0.0;
        b[i] = 1.0;
        c[i] = 2.0;
    }
    for (long it = 0; it < iters; it++) {
        double t0 = now(), t;

        check += bench_sum_f32(x, nf);
        t = now() - t0;
        best_sum = t < best_sum ? t : best_sum;
        t0 = now();
        triad(a, b, c, nd);
        t = now() - t0;
        best_triad = t < best_triad ? t : best_triad;
    }
    /* The sums and a[] are used, so that no loop is optimised away (the
     * float lanes of a very large sum round: hence the tolerance). */
    if (check < 0.999 * (double)nf * (double)iters || a[nd / 2] != 7.0) {
        fprintf(stderr, "stream: wrong results (%g, %g)\n", check, a[nd / 2]);
        return 1;
    }
    printf("%.3f %.3f %d\n", (double)read_bytes / best_sum / 1e9,
           3.0 * (double)triad_bytes / best_triad / 1e9,
           bench_threads());
    free(x);
    free(a);
    free(b);
    free(c);
    return 0;
}
