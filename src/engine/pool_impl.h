/*
 * pool_impl.h - the caching allocator shared by every device, over a small
 * per-device backend that takes segments from the OS or driver.
 */
#ifndef TR_POOL_IMPL_H
#define TR_POOL_IMPL_H

#include "engine_impl.h"

#define TR__POOL_SMALL_MAX (UINT64_C(1) << 20)     /* requests up to here are small */
#define TR__POOL_SMALL_ROUND UINT64_C(512)         /* small block granularity */
#define TR__POOL_LARGE_ROUND (UINT64_C(2) << 20)   /* large block granularity */
#define TR__POOL_SMALL_SEGMENT (UINT64_C(2) << 20) /* small blocks are packed in these */

/* How a pool gets and returns whole segments.  raw_alloc returns memory
 * aligned to at least 256 bytes (blocks start at multiples of 512 bytes
 * into a segment, so every block is at least 64-byte aligned), or NULL
 * when the system refuses.
 *
 * A device whose work runs after the host issues it (a stream) also says
 * where its stream is: stream_mark, a number for the work issued so far;
 * stream_done, whether the work up to a mark is done (a query: it waits
 * for nothing); stream_wait, a wait for it.  A block freed on such a
 * device may still be read or written by work issued before its free, so
 * it is reused, merged or given back only once its mark is done (a
 * deferred free).  NULL for the CPU, whose frees take effect at once. */
struct tr__pool_backend {
    void *(*raw_alloc)(void *ctx, uint64_t bytes);
    void (*raw_free)(void *ctx, void *ptr, uint64_t bytes);
    void *ctx;
    uint64_t (*stream_mark)(void *ctx);
    bool (*stream_done)(void *ctx, uint64_t mark);
    void (*stream_wait)(void *ctx, uint64_t mark);
};

struct tr__pool;
struct tr__block;

/* NULL when out of memory for the bookkeeping itself. */
struct tr__pool *tr__pool_create(struct tr_device device,
                                 const struct tr__pool_backend *backend);
/* Gives every segment back; blocks still in use become invalid. */
void tr__pool_destroy(struct tr__pool *pool);

/* The block size a request of bytes (> 0) is rounded to. */
uint64_t tr__pool_round(uint64_t bytes);
/* A block of at least bytes (> 0), its address in *ptr; NULL with TR_ERR_OOM
 * (and a message naming the request and the pool's state) when its block
 * would take the active bytes past the limit, or when neither the cache nor
 * the backend can provide it. */
struct tr__block *tr__pool_alloc(struct tr__pool *pool, uint64_t bytes, void **ptr);
/* Returns a block to the cache, merged with free neighbours; NULL is a
 * no-op.  On a device with a stream whose work up to now is not done, the
 * block is deferred instead: no longer active, counted as cached and
 * pending, and free once that work is done and the pool next looks (an
 * allocation, a release, the wait of an allocation that does not fit). */
void tr__pool_free(struct tr__pool *pool, struct tr__block *block);
uint64_t tr__pool_block_size(const struct tr__block *block);

/* The public tr_release_cached, tr_memory_stats, tr_memory_set_limit and
 * tr_memory_reset_peak, for one pool.  A release first frees the deferred
 * blocks whose work is done, and waits for none. */
uint64_t tr__pool_release_cached(struct tr__pool *pool);
void tr__pool_stats(struct tr__pool *pool, struct tr_memory_stats *out);
void tr__pool_set_limit(struct tr__pool *pool, uint64_t bytes);
void tr__pool_reset_peak(struct tr__pool *pool);

/* The CPU backend: anonymous mappings, 2 MiB aligned. */
extern const struct tr__pool_backend tr__cpu_pool_backend;

/* The pool of a device, created on first use; NULL with TR_ERR_DEVICE (a
 * message beginning with fn) when the device is not available. */
struct tr__pool *tr__pool_for(struct tr_device device, const char *fn);

#endif /* TR_POOL_IMPL_H */
