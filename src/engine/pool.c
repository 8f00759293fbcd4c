/*
 * pool.c - the caching allocator: size classes, best-fit reuse, splitting
 * and merging, exact statistics, a memory limit.
 *
 * Requests up to 1 MiB are rounded up to 512 bytes and carved out of 2 MiB
 * segments; larger ones are rounded up to 2 MiB and get a segment of their
 * own size when the cache has no fit.  Free blocks of each class sit in one
 * list ordered by (size, address), so the first that fits is the best fit,
 * and the lowest-addressed among equals.  A freed block merges with free
 * neighbours of its segment; a segment that is one free block again is idle
 * and goes back to the backend on tr__pool_release_cached.
 *
 * On a device with a stream, a block freed while work issued before its
 * free may not be done is deferred: it stays out of the free lists (and
 * unmerged) on a queue in the order of the frees, until the stream passes
 * its mark.  Its bytes leave active_bytes at the free, so that the peak is
 * what a plan predicts whatever the device's timing; they are cached and
 * pending until then.
 */
#include "pool_impl.h"

#include <pthread.h>
#include <stdlib.h>

struct tr__segment {
    char *base;
    uint64_t size;
    bool small;
    struct tr__block *first;
    struct tr__segment *prev, *next; /* the pool's segments */
};

struct tr__block {
    char *ptr;
    uint64_t size;
    bool allocated;                /* in use, or deferred: not free yet */
    bool deferred;                 /* freed, its stream's mark not done yet */
    uint64_t mark;                 /* deferred: the stream's mark at its free */
    struct tr__block *deferred_next; /* the pool's deferred blocks, oldest first */
    struct tr__segment *segment;
    struct tr__block *prev, *next;           /* address neighbours in the segment */
    struct tr__block *free_prev, *free_next; /* the class's free list, when free */
};

struct tr__pool {
    pthread_mutex_t lock;
    struct tr_device device;
    struct tr__pool_backend backend;
    struct tr__block *free_small; /* ordered by (size, address) */
    struct tr__block *free_large;
    struct tr__segment *segments;
    struct tr__block *deferred, *deferred_last; /* in the order freed */
    struct tr_memory_stats stats; /* cached_bytes is derived on read */
};

struct tr__pool *tr__pool_create(struct tr_device device,
                                 const struct tr__pool_backend *backend)
{
    struct tr__pool *pool = calloc(1, sizeof *pool);

    if (!pool)
        return NULL;
    pthread_mutex_init(&pool->lock, NULL);
    pool->device = device;
    pool->backend = *backend;
    return pool;
}

static void free_segment(struct tr__pool *pool, struct tr__segment *seg)
{
    struct tr__block *b = seg->first;

    while (b) {
        struct tr__block *next = b->next;
        free(b);
        b = next;
    }
    if (seg->prev)
        seg->prev->next = seg->next;
    else
        pool->segments = seg->next;
    if (seg->next)
        seg->next->prev = seg->prev;
    pool->backend.raw_free(pool->backend.ctx, seg->base, seg->size);
    pool->stats.reserved_bytes -= seg->size;
    pool->stats.segment_count--;
    free(seg);
}

void tr__pool_destroy(struct tr__pool *pool)
{
    if (!pool)
        return;
    if (pool->deferred_last && pool->backend.stream_wait)
        pool->backend.stream_wait(pool->backend.ctx, pool->deferred_last->mark);
    while (pool->segments)
        free_segment(pool, pool->segments);
    pthread_mutex_destroy(&pool->lock);
    free(pool);
}

static bool is_small(uint64_t bytes)
{
    return bytes <= TR__POOL_SMALL_MAX;
}

static uint64_t round_up(uint64_t n, uint64_t unit)
{
    return (n + unit - 1) / unit * unit;
}

uint64_t tr__pool_round(uint64_t bytes)
{
    return round_up(bytes, is_small(bytes) ? TR__POOL_SMALL_ROUND : TR__POOL_LARGE_ROUND);
}

uint64_t tr__pool_block_size(const struct tr__block *block)
{
    return block->size;
}

/* ------------------------------------------------------------ free lists */

static struct tr__block **free_list(struct tr__pool *pool, bool small)
{
    return small ? &pool->free_small : &pool->free_large;
}

static bool block_before(const struct tr__block *a, const struct tr__block *b)
{
    return a->size < b->size || (a->size == b->size && a->ptr < b->ptr);
}

static void free_list_insert(struct tr__pool *pool, struct tr__block *b)
{
    struct tr__block **head = free_list(pool, b->segment->small);
    struct tr__block *prev = NULL, *cur = *head;

    while (cur && block_before(cur, b)) {
        prev = cur;
        cur = cur->free_next;
    }
    b->free_prev = prev;
    b->free_next = cur;
    if (prev)
        prev->free_next = b;
    else
        *head = b;
    if (cur)
        cur->free_prev = b;
}

static void free_list_remove(struct tr__pool *pool, struct tr__block *b)
{
    struct tr__block **head = free_list(pool, b->segment->small);

    if (b->free_prev)
        b->free_prev->free_next = b->free_next;
    else
        *head = b->free_next;
    if (b->free_next)
        b->free_next->free_prev = b->free_prev;
    b->free_prev = b->free_next = NULL;
}

static struct tr__block *best_fit(struct tr__pool *pool, bool small, uint64_t size)
{
    struct tr__block *b = *free_list(pool, small);

    while (b && b->size < size)
        b = b->free_next;
    return b;
}

/* -------------------------------------------------------------- segments */

static struct tr__block *new_segment(struct tr__pool *pool, bool small, uint64_t size)
{
    struct tr__segment *seg = calloc(1, sizeof *seg);
    struct tr__block *b = calloc(1, sizeof *b);
    void *base = NULL;

    if (seg && b)
        base = pool->backend.raw_alloc(pool->backend.ctx, size);
    if (!base) {
        free(seg);
        free(b);
        return NULL;
    }
    seg->base = base;
    seg->size = size;
    seg->small = small;
    seg->first = b;
    seg->next = pool->segments;
    if (pool->segments)
        pool->segments->prev = seg;
    pool->segments = seg;
    b->ptr = base;
    b->size = size;
    b->segment = seg;
    pool->stats.reserved_bytes += size;
    pool->stats.segment_count++;
    return b;
}

/* Splits the tail past size off b into a new free block.  Returns false
 * (and leaves b whole) when the bookkeeping cannot be allocated. */
static bool split(struct tr__pool *pool, struct tr__block *b, uint64_t size)
{
    struct tr__block *rest;

    if (b->size == size)
        return true;
    rest = calloc(1, sizeof *rest);
    if (!rest)
        return false;
    rest->ptr = b->ptr + size;
    rest->size = b->size - size;
    rest->segment = b->segment;
    rest->prev = b;
    rest->next = b->next;
    if (b->next)
        b->next->prev = rest;
    b->next = rest;
    b->size = size;
    free_list_insert(pool, rest);
    return true;
}

/* ------------------------------------------------------- freeing blocks */

/* Folds b->next, which is free and out of the free list, into b. */
static void absorb_next(struct tr__block *b)
{
    struct tr__block *n = b->next;

    b->size += n->size;
    b->next = n->next;
    if (n->next)
        n->next->prev = b;
    free(n);
}

/* Makes b, which nothing uses any more, a free block of the cache. */
static void make_free(struct tr__pool *pool, struct tr__block *b)
{
    b->allocated = false;
    if (b->next && !b->next->allocated) {
        free_list_remove(pool, b->next);
        absorb_next(b);
    }
    if (b->prev && !b->prev->allocated) {
        b = b->prev;
        free_list_remove(pool, b);
        absorb_next(b);
    }
    free_list_insert(pool, b);
}

/* Frees the deferred blocks whose marks are done, oldest first: a mark
 * later than one not done is not done either. */
static void drain_deferred(struct tr__pool *pool)
{
    struct tr__block *b;

    while ((b = pool->deferred) && pool->backend.stream_done(pool->backend.ctx, b->mark)) {
        pool->deferred = b->deferred_next;
        if (!pool->deferred)
            pool->deferred_last = NULL;
        b->deferred = false;
        b->deferred_next = NULL;
        pool->stats.pending_bytes -= b->size;
        make_free(pool, b);
    }
}

/* Waits until the work of every deferred block is done, and frees them. */
static void wait_deferred(struct tr__pool *pool)
{
    if (pool->deferred_last)
        pool->backend.stream_wait(pool->backend.ctx, pool->deferred_last->mark);
    drain_deferred(pool);
}

/* -------------------------------------------------------------- release */

static uint64_t release_cached_locked(struct tr__pool *pool)
{
    uint64_t released = 0;
    struct tr__segment *seg;

    drain_deferred(pool);
    seg = pool->segments;
    while (seg) {
        struct tr__segment *next = seg->next;
        struct tr__block *b = seg->first;

        if (!b->allocated && b->size == seg->size) {
            free_list_remove(pool, b);
            released += seg->size;
            free_segment(pool, seg);
        }
        seg = next;
    }
    pool->stats.released_bytes += released;
    return released;
}

/* -------------------------------------------------------------- alloc/free */

/* The limit is on active bytes, after rounding: what a plan can predict
 * from its values' block sizes.  Reserved bytes past it (idle segments,
 * the tail of a small segment) only make the pool give its cache back. */
static bool active_within_limit(const struct tr__pool *pool, uint64_t size)
{
    uint64_t limit = pool->stats.limit_bytes;

    return limit == 0 ||
           (pool->stats.active_bytes <= limit && size <= limit - pool->stats.active_bytes);
}

static bool reserved_within_limit(const struct tr__pool *pool, uint64_t more)
{
    uint64_t limit = pool->stats.limit_bytes;

    return limit == 0 || (pool->stats.reserved_bytes <= limit &&
                          more <= limit - pool->stats.reserved_bytes);
}

static void set_limit_error(struct tr__pool *pool, uint64_t bytes, uint64_t size)
{
    char dev[TR_DEVICE_NAME_MAX], req[16], blk[16], lim[16], act[16], res[16], cac[16];
    const struct tr_memory_stats *s = &pool->stats;

    tr_device_format(pool->device, dev, sizeof dev);
    tr_format_bytes(bytes, req, sizeof req);
    tr_format_bytes(size, blk, sizeof blk);
    tr_format_bytes(s->limit_bytes, lim, sizeof lim);
    tr_format_bytes(s->active_bytes, act, sizeof act);
    tr_format_bytes(s->reserved_bytes, res, sizeof res);
    tr_format_bytes(s->reserved_bytes - s->active_bytes, cac, sizeof cac);
    tr__set_error(TR_ERR_OOM,
                  "out of memory on %s: a request for %s (a block of %s) does not fit beside "
                  "the %s active, within the memory limit of %s (pool: %s reserved, %s "
                  "cached)",
                  dev, req, blk, act, lim, res, cac);
}

static void set_system_error(struct tr__pool *pool, uint64_t bytes, uint64_t segment,
                             uint64_t released)
{
    char dev[TR_DEVICE_NAME_MAX], req[16], seg[16], res[16], act[16], cac[16], rel[16];
    const struct tr_memory_stats *s = &pool->stats;

    tr_device_format(pool->device, dev, sizeof dev);
    tr_format_bytes(bytes, req, sizeof req);
    tr_format_bytes(segment, seg, sizeof seg);
    tr_format_bytes(s->reserved_bytes, res, sizeof res);
    tr_format_bytes(s->active_bytes, act, sizeof act);
    tr_format_bytes(s->reserved_bytes - s->active_bytes, cac, sizeof cac);
    tr_format_bytes(released, rel, sizeof rel);
    tr__set_error(TR_ERR_OOM,
                  "out of memory on %s: the system refused %s for a request for %s "
                  "(pool: %s reserved, %s active, %s cached, after releasing %s "
                  "of cache)",
                  dev, seg, req, res, act, cac, rel);
}

/* A segment for a request that the cache cannot serve, from the backend.
 * A segment that would take the reserved bytes past the limit, or that
 * the system refuses, first has the cache released; the system is asked
 * at most twice. */
static struct tr__block *grow(struct tr__pool *pool, bool small, uint64_t bytes,
                              uint64_t size)
{
    uint64_t seg_size = small ? TR__POOL_SMALL_SEGMENT : size;
    uint64_t released = 0;
    bool retried = false;
    struct tr__block *b;

    if (!reserved_within_limit(pool, seg_size)) {
        pool->stats.retry_count++;
        released = release_cached_locked(pool);
        retried = true;
    }
    b = new_segment(pool, small, seg_size);
    if (!b && !retried) {
        /* what waits for the device's work may be what fits: wait for it */
        pool->stats.retry_count++;
        wait_deferred(pool);
        b = best_fit(pool, small, size);
        if (b) {
            free_list_remove(pool, b);
            return b;
        }
        released = release_cached_locked(pool);
        b = new_segment(pool, small, seg_size);
    }
    if (!b) {
        pool->stats.oom_count++;
        set_system_error(pool, bytes, seg_size, released);
    }
    return b;
}

struct tr__block *tr__pool_alloc(struct tr__pool *pool, uint64_t bytes, void **ptr)
{
    bool small = is_small(bytes);
    uint64_t size;
    struct tr__block *b;
    bool hit;

    if (bytes == 0 || bytes > UINT64_MAX / 2) {
        tr__set_error(TR_ERR_OOM, "out of memory: cannot allocate %llu bytes",
                      (unsigned long long)bytes);
        return NULL;
    }
    size = tr__pool_round(bytes);
    pthread_mutex_lock(&pool->lock);
    drain_deferred(pool);
    if (!active_within_limit(pool, size)) {
        pool->stats.oom_count++;
        set_limit_error(pool, bytes, size);
        pthread_mutex_unlock(&pool->lock);
        return NULL;
    }
    b = best_fit(pool, small, size);
    hit = b != NULL;
    if (b)
        free_list_remove(pool, b);
    else
        b = grow(pool, small, bytes, size);
    if (b && !split(pool, b, size)) {
        char dev[TR_DEVICE_NAME_MAX];
        free_list_insert(pool, b);
        pool->stats.oom_count++;
        tr__set_error(TR_ERR_OOM,
                      "out of memory on %s: no memory left for the pool's bookkeeping of a "
                      "request for %llu bytes",
                      tr_device_format(pool->device, dev, sizeof dev),
                      (unsigned long long)bytes);
        b = NULL;
    }
    if (b) {
        b->allocated = true;
        pool->stats.active_bytes += b->size;
        if (pool->stats.active_bytes > pool->stats.peak_active_bytes)
            pool->stats.peak_active_bytes = pool->stats.active_bytes;
        pool->stats.alloc_count++;
        pool->stats.cache_hit_count += hit;
        *ptr = b->ptr;
    }
    pthread_mutex_unlock(&pool->lock);
    return b;
}

void tr__pool_free(struct tr__pool *pool, struct tr__block *b)
{
    const struct tr__pool_backend *be = &pool->backend;

    if (!b)
        return;
    pthread_mutex_lock(&pool->lock);
    pool->stats.active_bytes -= b->size;
    if (be->stream_mark) {
        b->mark = be->stream_mark(be->ctx);
        b->deferred = !be->stream_done(be->ctx, b->mark);
    }
    if (b->deferred) {
        pool->stats.pending_bytes += b->size;
        if (pool->deferred_last)
            pool->deferred_last->deferred_next = b;
        else
            pool->deferred = b;
        pool->deferred_last = b;
    } else {
        make_free(pool, b);
    }
    pthread_mutex_unlock(&pool->lock);
}

uint64_t tr__pool_release_cached(struct tr__pool *pool)
{
    uint64_t released;

    pthread_mutex_lock(&pool->lock);
    released = release_cached_locked(pool);
    pthread_mutex_unlock(&pool->lock);
    return released;
}

void tr__pool_stats(struct tr__pool *pool, struct tr_memory_stats *out)
{
    pthread_mutex_lock(&pool->lock);
    *out = pool->stats;
    out->cached_bytes = pool->stats.reserved_bytes - pool->stats.active_bytes;
    pthread_mutex_unlock(&pool->lock);
}

void tr__pool_set_limit(struct tr__pool *pool, uint64_t bytes)
{
    pthread_mutex_lock(&pool->lock);
    pool->stats.limit_bytes = bytes;
    pthread_mutex_unlock(&pool->lock);
}

void tr__pool_reset_peak(struct tr__pool *pool)
{
    pthread_mutex_lock(&pool->lock);
    pool->stats.peak_active_bytes = pool->stats.active_bytes;
    pthread_mutex_unlock(&pool->lock);
}
