/*
 * threads.c - the engine's thread count: one setting that every CPU
 * kernel's parallel region reads (num_threads(tr_num_threads())), so that
 * the count is the engine's and not whatever OpenMP state the calling
 * thread happens to have; and the other setting kernels read, whether
 * products may use TF32.
 */
#include "engine_impl.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#endif

/* Threads no setting may ask for (tensorrun(1) --threads goes to 4096). */
#define MAX_THREADS 65536

static atomic_int wanted; /* 0: the default */
static atomic_int fallback; /* the default once worked out, or 0 */

tr_status tr_set_num_threads(int n)
{
    TR_RETURN_ERROR_IF(n < 0 || n > MAX_THREADS, TR_ERR_INVALID,
                       "threads: %d is not a number of threads (0 to %d)", n, MAX_THREADS);
    atomic_store(&wanted, n);
    return TR_OK;
}

/* OMP_NUM_THREADS's first count, as OpenMP reads it ("8" or "8,2"), else
 * the processors this process may run on.  Worked out once: glibc reads
 * a file for the processors, too slow for every parallel loop. */
static int default_threads(void)
{
    const char *env = getenv("OMP_NUM_THREADS");
    char *end;
    long n = env ? strtol(env, &end, 10) : 0;

    if (env && end != env && (*end == '\0' || *end == ',') && n > 0 && n <= MAX_THREADS)
        return (int)n;
#ifdef _OPENMP
    n = omp_get_num_procs();
#else
    n = sysconf(_SC_NPROCESSORS_ONLN);
#endif
    return n > 0 && n <= MAX_THREADS ? (int)n : 1;
}

int tr_num_threads(void)
{
    int n = atomic_load(&wanted);

    if (n > 0)
        return n;
    n = atomic_load(&fallback);
    if (n == 0) {
        n = default_threads();
        atomic_store(&fallback, n);
    }
    return n;
}

static atomic_bool tf32;

void tr_set_matmul_tf32(bool allowed)
{
    atomic_store(&tf32, allowed);
}

bool tr_matmul_tf32(void)
{
    return atomic_load(&tf32);
}
