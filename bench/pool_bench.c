/*
 * pool_bench.c - what the caching pool saves: 200 rounds of allocating a
 * 64 MiB buffer, touching every page of it and freeing it, through the
 * tensorrun CPU pool and through malloc/free.  glibc serves blocks this
 * large with mmap and unmaps them on free, so every malloc round faults all
 * its pages in again; the pool keeps the block and its pages.
 *
 * Runs the two in alternation, several trials each, and reports medians and
 * their ratio.  Usage: pool_bench [ROUNDS [MIB [TRIALS]]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "tensorrun.h"

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void touch(char *p, size_t n, size_t page)
{
    volatile char *v = p;

    for (size_t i = 0; i < n; i += page)
        v[i] = (char)i;
}

static double run_malloc(int rounds, size_t n, size_t page)
{
    double t0 = now();

    for (int r = 0; r < rounds; r++) {
        char *p = malloc(n);
        if (!p) {
            fprintf(stderr, "pool_bench: malloc failed\n");
            exit(1);
        }
        touch(p, n, page);
        free(p);
    }
    return now() - t0;
}

static double run_pool(int rounds, size_t n, size_t page)
{
    int64_t shape[1] = {(int64_t)n};
    double t0 = now();

    for (int r = 0; r < rounds; r++) {
        struct tr_tensor *t = tr_empty(TR_DTYPE_U8, 1, shape, TR_CPU);
        if (!t) {
            fprintf(stderr, "pool_bench: %s\n", tr_last_error());
            exit(1);
        }
        touch(tr_tensor_data_mut(t), n, page);
        tr_release(t);
    }
    return now() - t0;
}

/* A positive integer argument, or def when absent; -1 when malformed. */
static long arg_or(int argc, char **argv, int i, long def)
{
    char *end;
    long v;

    if (argc <= i)
        return def;
    v = strtol(argv[i], &end, 10);
    return *argv[i] && !*end && v > 0 && v < 1000000 ? v : -1;
}

static int compare(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, compare);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    long rounds = arg_or(argc, argv, 1, 200), mib = arg_or(argc, argv, 2, 64);
    long trials = arg_or(argc, argv, 3, 3);
    size_t n = (size_t)mib << 20, page = (size_t)sysconf(_SC_PAGESIZE);
    double tm[64], tp[64], m, p;
    struct tr_memory_stats s;

    if (rounds < 1 || mib < 1 || trials < 1 || trials > 64) {
        fprintf(stderr, "usage: pool_bench [ROUNDS [MIB [TRIALS]]] (TRIALS at most 64)\n");
        return 2;
    }
    for (int t = 0; t < (int)trials; t++) {
        tm[t] = run_malloc((int)rounds, n, page);
        tp[t] = run_pool((int)rounds, n, page);
        tr_release_cached(TR_CPU); /* every pool trial starts cold, as malloc does */
    }
    m = median(tm, (int)trials);
    p = median(tp, (int)trials);
    tr_memory_stats(TR_CPU, &s);
    printf("pool_bench: %ld rounds of allocate / touch every page / free of %ld MiB, "
           "median of %ld alternating trials\n", rounds, mib, trials);
    printf("  malloc/free       %8.3f s  %8.3f ms/round\n", m, m * 1e3 / rounds);
    printf("  tensorrun pool    %8.3f s  %8.3f ms/round  (%llu cache hits of %llu)\n", p,
           p * 1e3 / rounds, (unsigned long long)s.cache_hit_count,
           (unsigned long long)s.alloc_count);
    printf("  speed-up: the pool is %.1fx faster than malloc/free (target: at least 10x)\n",
           m / p);
    return 0;
}
