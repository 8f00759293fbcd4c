/*
 * threads.c - the engine's thread count: one setting that every CPU
 * kernel's parallel region reads (num_threads(tr_num_threads())), so that
 * the count is the engine's and not whatever OpenMP state the calling
 * thread happens to have.
 */
#include "engine_impl.h"

#include <stdatomic.h>
#include <unistd.h>

static atomic_int wanted; /* 0: every online core */
static atomic_int online;  /* the online cores, once asked (glibc reads a
                              file for them: not once per parallel loop) */

tr_status tr_set_num_threads(int n)
{
    TR_RETURN_ERROR_IF(n < 0, TR_ERR_INVALID, "threads: %d is not a number of threads", n);
    atomic_store(&wanted, n);
    return TR_OK;
}

int tr_num_threads(void)
{
    int n = atomic_load(&wanted);
    long cores;

    if (n > 0)
        return n;
    n = atomic_load(&online);
    if (n > 0)
        return n;
    cores = sysconf(_SC_NPROCESSORS_ONLN);
    n = cores > 0 && cores < 1 << 20 ? (int)cores : 1;
    atomic_store(&online, n);
    return n;
}
