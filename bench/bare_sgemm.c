/*
 * bare_sgemm.c - what the BLAS alone takes for C = A B with f32 N x N
 * matrices, in this process, on THREADS OpenBLAS threads: the floor for a
 * matmul stage.  Linked with the same BLAS_CFLAGS / BLAS_LIBS as
 * libtensorrun.  A, B and C are allocated and written first, and a small
 * product runs before the timed one (OpenBLAS allocates its buffers and
 * wakes its threads on the first call), so only the product is timed: no
 * page faults, no file.
 *
 * With M K N instead of N: C = A B^T for A of M x K and B of N x K, both
 * row-major (the product of the rows of two matrices, as cdist and a
 * search compute it).
 *
 * Prints "SECONDS GFLOPS THREADS CORE", CORE being the kernel family
 * OpenBLAS chose for this CPU (OPENBLAS_CORETYPE overrides it), or "-".
 * Usage: bare_sgemm N THREADS, or bare_sgemm M K N THREADS
 */
#include "config.h"

#include <cblas.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Values in [-1, 1) from a fixed linear congruential sequence. */
static void fill(float *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (float)(seed >> 8) / 8388608.0f - 1.0f;
    }
}

static long arg(const char *s, long max)
{
    char *end;
    long v = strtol(s, &end, 10);

    return *s && !*end && v > 0 && v <= max ? v : -1;
}

int main(int argc, char **argv)
{
    bool rect = argc == 5;
    long m = argc == 3 || rect ? arg(argv[1], 1L << 20) : -1;
    long k = rect ? arg(argv[2], 1L << 20) : m, n = rect ? arg(argv[3], 1L << 20) : m;
    long threads = argc == 3 || rect ? arg(argv[argc - 1], 4096) : -1;
    size_t na, nb, nc, warm = 256;
    float *a, *b, *c;
    const char *core = "-";
    double t0, t;

    if (m < 1 || k < 1 || n < 1 || threads < 1) {
        fprintf(stderr, "usage: bare_sgemm N THREADS, or bare_sgemm M K N THREADS\n");
        return 2;
    }
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
    openblas_set_num_threads((int)threads);
    core = openblas_get_corename();
#else
    if (threads != 1)
        fprintf(stderr, "bare_sgemm: this BLAS cannot be told its threads; it uses its own\n");
#endif
    na = (size_t)m * (size_t)k;
    nb = (size_t)k * (size_t)n;
    nc = (size_t)m * (size_t)n;
    a = malloc(na * sizeof *a);
    b = malloc(nb * sizeof *b);
    c = calloc(nc, sizeof *c);
    if (!a || !b || !c) {
        fprintf(stderr, "bare_sgemm: cannot allocate %ld x %ld, %ld x %ld and %ld x %ld f32\n", m,
                k, k, n, m, n);
        return 1;
    }
    fill(a, na, 1);
    fill(b, nb, 2);
    if (warm > (size_t)m)
        warm = (size_t)m;
    if (warm > (size_t)n)
        warm = (size_t)n;
    if (warm > (size_t)k)
        warm = (size_t)k;
    if (rect) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)warm, (int)warm, (int)warm,
                    1.0f, a, (int)k, b, (int)k, 0.0f, c, (int)n);
        t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)k, 1.0f, a,
                    (int)k, b, (int)k, 0.0f, c, (int)n);
    } else {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)warm, (int)warm, (int)warm,
                    1.0f, a, (int)n, b, (int)n, 0.0f, c, (int)n);
        t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, a,
                    (int)n, b, (int)n, 0.0f, c, (int)n);
    }
    t = now() - t0;
    printf("%.6f %.2f %ld %s\n", t, 2.0 * (double)m * (double)n * (double)k / t / 1e9, threads,
           core);
    free(a);
    free(b);
    free(c);
    return 0;
}
