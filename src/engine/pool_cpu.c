/*
 * pool_cpu.c - the CPU pool's backend: segments are anonymous mappings
 * aligned to 2 MiB, so that the kernel can back them with huge pages, and
 * unmapping one really gives its pages back.
 */
#include "pool_impl.h"

#include <stdint.h>
#include <sys/mman.h>

#define HUGE_PAGE (UINT64_C(2) << 20)

static void *cpu_raw_alloc(void *ctx, uint64_t bytes)
{
    uint64_t span = bytes + HUGE_PAGE;
    char *raw, *aligned;
    uintptr_t head, tail;

    (void)ctx;
    if (bytes > SIZE_MAX - HUGE_PAGE)
        return NULL;
    raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    aligned = (char *)(((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    head = (uintptr_t)(aligned - raw);
    tail = span - head - bytes;
    if (head)
        munmap(raw, head);
    if (tail)
        munmap(aligned + bytes, tail);
#ifdef MADV_HUGEPAGE
    madvise(aligned, bytes, MADV_HUGEPAGE);
#endif
    return aligned;
}

static void cpu_raw_free(void *ctx, void *ptr, uint64_t bytes)
{
    (void)ctx;
    munmap(ptr, bytes);
}

const struct tr__pool_backend tr__cpu_pool_backend = {
    .raw_alloc = cpu_raw_alloc,
    .raw_free = cpu_raw_free,
    .ctx = NULL,
};
