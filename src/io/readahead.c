/*
 * readahead.c - page-cache hints for a mapped input read once, in order,
 * block by block (tensorrun_io.h, tio_readahead_*).
 *
 * The kernel's own read-ahead of a MADV_SEQUENTIAL mapping follows the
 * page faults; asking for the next block while this one computes has its
 * pages read before the first fault.  One MADV_WILLNEED reads no more than
 * the device's read-ahead window (read_ahead_kb: 128 KiB by default, 8 MiB
 * on some virtual disks) and ignores the rest of its range, so a block is
 * asked for in pieces of HINT_MAX, each read on its own in the background.  Dropping what was read is two calls:
 * MADV_DONTNEED unmaps the pages from this process, and only then can
 * POSIX_FADV_DONTNEED evict them from the page cache (it skips pages that
 * any process still maps).  The page cache keeps a file in folios of up
 * to 2 MiB, and fadvise evicts only those wholly inside its range, so its
 * ranges end on 2 MiB boundaries in the file (the last one at the end).
 */
#include "io_impl.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct tio_readahead {
    const char *base;  /* the tensor's first byte, in the mapping */
    uint64_t bytes;    /* its bytes */
    uint64_t offset;   /* the file offset of base */
    int fd;            /* the file, for posix_fadvise; -1 when not dropping */
    bool drop;
    uintptr_t dropped; /* every whole page below this address is dropped */
    uint64_t evicted;  /* the file offset up to which fadvise was asked */
    uintptr_t page;
};

#define FOLIO_MAX (UINT64_C(2) << 20)
#define HINT_MAX ((uintptr_t)128 << 10) /* the smallest read-ahead window in use */

uint64_t tio_readahead_default_threshold(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);

    return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size / 4 : UINT64_MAX;
}

struct tio_readahead *tio_readahead_open(const struct tr_tensor *t, const char *path,
                                         uint64_t offset, uint64_t drop_above)
{
    struct tio_readahead *ra;

    if (!t || !(tr_tensor_flags(t) & TR_FLAG_MAPPED) || tr_tensor_device(t).kind != TR_DEV_CPU ||
        !tr_tensor_is_contiguous(t) || tr_tensor_nbytes(t) == 0)
        return NULL;
    ra = calloc(1, sizeof *ra);
    if (!ra)
        return NULL;
    ra->base = tr_tensor_data(t);
    ra->bytes = tr_tensor_nbytes(t);
    ra->offset = offset;
    ra->page = (uintptr_t)sysconf(_SC_PAGESIZE);
    ra->fd = -1;
    ra->drop = ra->bytes > drop_above;
    /* the first whole page of the tensor: a page it shares with the
     * header is dropped once the header is no longer read either */
    ra->dropped = ((uintptr_t)ra->base + ra->page - 1) & ~(ra->page - 1);
    ra->evicted = offset;
    if (ra->drop && path)
        ra->fd = strcmp(path, "-") == 0 ? fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3)
                                        : open(path, O_RDONLY | O_CLOEXEC);
    return ra;
}

bool tio_readahead_drops(const struct tio_readahead *ra)
{
    return ra && ra->drop;
}

/* [p, p + len) clipped to the tensor, and its pages: *start and *end,
 * aligned outward; false when nothing of it is left. */
static bool pages_of(const struct tio_readahead *ra, const void *p, uint64_t len,
                     uintptr_t *start, uintptr_t *end)
{
    uintptr_t lo = (uintptr_t)p, hi, base = (uintptr_t)ra->base, top = base + ra->bytes;

    if (lo < base)
        lo = base;
    hi = len > top - lo ? top : lo + len;
    if (lo >= top || hi <= lo)
        return false;
    *start = lo & ~(ra->page - 1);
    *end = (hi + ra->page - 1) & ~(ra->page - 1);
    return true;
}

void tio_readahead_next(struct tio_readahead *ra, const void *p, uint64_t len)
{
    uintptr_t start, end;

    if (!ra || !pages_of(ra, p, len, &start, &end))
        return;
    for (uintptr_t at = start; at < end; at += HINT_MAX)
        madvise((void *)at, end - at < HINT_MAX ? end - at : HINT_MAX, MADV_WILLNEED);
}

void tio_readahead_done(struct tio_readahead *ra, const void *p, uint64_t len)
{
    uintptr_t start, end, upto;
    uint64_t evict;
    bool last;

    if (!ra || !ra->drop || !pages_of(ra, p, len, &start, &end))
        return;
    /* only whole pages before the end of what was read: the page it ends
     * in may hold the next block's first rows */
    last = (uintptr_t)p + len >= (uintptr_t)ra->base + ra->bytes;
    upto = last ? end : ((uintptr_t)p + len) & ~(ra->page - 1);
    if (upto > ra->dropped) {
        madvise((void *)ra->dropped, upto - ra->dropped, MADV_DONTNEED);
        ra->dropped = upto;
    }
    evict = ra->offset + (upto - (uintptr_t)ra->base);
    if (!last)
        evict &= ~(FOLIO_MAX - 1);
    if (ra->fd >= 0 && evict > ra->evicted) {
        posix_fadvise(ra->fd, (off_t)ra->evicted, (off_t)(evict - ra->evicted),
                      POSIX_FADV_DONTNEED);
        ra->evicted = evict;
    }
}

void tio_readahead_close(struct tio_readahead *ra)
{
    if (!ra)
        return;
    if (ra->fd >= 0)
        close(ra->fd);
    free(ra);
}
