/*
 * test_pool.c - the caching CPU pool: exact statistics, size classes,
 * best-fit reuse, splitting and merging, giving memory back to the OS, the
 * memory limit, out-of-memory, and many threads at once.
 */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "tensorrun.h"
#include "tap.h"

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)

static struct tr_memory_stats stats(void)
{
    struct tr_memory_stats s;

    tr_memory_stats(TR_CPU, &s);
    return s;
}

static struct tr_tensor *bytes(uint64_t n)
{
    return tr_empty(TR_DTYPE_U8, 1, (int64_t[]){(int64_t)n}, TR_CPU);
}

static char *data(struct tr_tensor *t)
{
    return tr_tensor_data_mut(t);
}

static uint64_t resident_bytes(void)
{
    unsigned long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");

    if (f) {
        if (fscanf(f, "%lu %lu", &size, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

static void test_release_gives_memory_back(void)
{
    int64_t shape[1] = {64 * 1024 * 1024}; /* 256 MiB of f32 */
    struct tr_tensor *t = tr_zeros(TR_DTYPE_F32, 1, shape, TR_CPU);
    struct tr_memory_stats s = stats();
    uint64_t rss_full, rss_released, released;

    ok(t != NULL, "256 MiB of f32 zeros");
    is_int(s.active_bytes, 256 * MiB, "active 256 MiB");
    is_int(s.cached_bytes, 0, "cached 0");
    rss_full = resident_bytes();
    tr_release(t);
    s = stats();
    is_int(s.active_bytes, 0, "after release: active 0");
    is_int(s.cached_bytes, 256 * MiB, "after release: cached 256 MiB");
    released = tr_release_cached(TR_CPU);
    s = stats();
    is_int(released, 256 * MiB, "tr_release_cached returns the 256 MiB it gave back");
    is_int(s.active_bytes, 0, "after tr_release_cached: active 0");
    is_int(s.cached_bytes, 0, "after tr_release_cached: cached 0");
    is_int(s.reserved_bytes, 0, "after tr_release_cached: reserved 0");
    rss_released = resident_bytes();
    ok(rss_full > rss_released && rss_full - rss_released >= 200 * MiB,
       "resident memory really drops (%llu MiB -> %llu MiB)",
       (unsigned long long)(rss_full / MiB), (unsigned long long)(rss_released / MiB));
}

static void test_size_classes(void)
{
    static const struct {
        uint64_t request, block;
    } cases[] = {
        {1, 512}, {100, 512}, {512, 512}, {513, 1024},
        {1 * MiB, 1 * MiB}, {1 * MiB + 1, 2 * MiB}, {3 * MiB, 4 * MiB}, {4 * MiB, 4 * MiB},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t before = stats().active_bytes;
        struct tr_tensor *t = bytes(cases[i].request);
        is_int(stats().active_bytes - before, cases[i].block,
               "a request of %llu bytes takes a block of %llu",
               (unsigned long long)cases[i].request, (unsigned long long)cases[i].block);
        ok(((uintptr_t)tr_tensor_data(t) & 63) == 0, "  and is 64-byte aligned");
        tr_release(t);
    }
    uint64_t allocs = stats().alloc_count;
    struct tr_tensor *empty = bytes(0);
    ok(empty && stats().alloc_count == allocs, "an empty tensor takes no block");
    tr_release(empty);
    tr_release_cached(TR_CPU);
}

static void test_reuse_split_merge(void)
{
    struct tr_memory_stats s0 = stats(), s;
    struct tr_tensor *a = bytes(8 * MiB), *b = bytes(4 * MiB), *c, *d;
    char *pa = data(a), *pb = data(b);

    s = stats();
    is_int(s.reserved_bytes - s0.reserved_bytes, 12 * MiB, "two segments: 8 + 4 MiB");
    is_int(s.cache_hit_count - s0.cache_hit_count, 0, "no cache hits yet");
    tr_release(a);
    tr_release(b);
    c = bytes(4 * MiB);
    ok(data(c) == pb, "best fit: 4 MiB reuses the 4 MiB block, not the 8 MiB one");
    d = bytes(4 * MiB);
    ok(data(d) == pa, "split: the next 4 MiB comes from the front of the 8 MiB block");
    s = stats();
    is_int(s.reserved_bytes - s0.reserved_bytes, 12 * MiB, "no new segment for cache hits");
    is_int(s.cache_hit_count - s0.cache_hit_count, 2, "two cache hits");
    is_int(s.alloc_count - s0.alloc_count, 4, "four allocations");
    is_int(s.active_bytes - s0.active_bytes, 8 * MiB, "8 MiB active");
    tr_release(d);
    tr_release(c);
    s = stats();
    is_int(s.cached_bytes - s0.cached_bytes, 12 * MiB, "all 12 MiB cached");
    is_int(tr_release_cached(TR_CPU), 12 * MiB,
           "merge: the split block merged back, so both segments are released whole");

    /* small requests share 2 MiB segments */
    s0 = stats();
    struct tr_tensor *x1 = bytes(100), *x2 = bytes(100), *x3 = bytes(100), *x4;
    ok(data(x2) == data(x1) + 512 && data(x3) == data(x2) + 512,
       "small blocks are packed 512 bytes apart in one segment");
    s = stats();
    is_int(s.reserved_bytes - s0.reserved_bytes, 2 * MiB, "one 2 MiB small segment");
    is_int(s.active_bytes - s0.active_bytes, 1536, "three 512-byte blocks active");
    tr_release(x2);
    x4 = bytes(512);
    ok(data(x4) == data(x1) + 512, "the freed middle block is the best fit for 512 bytes");
    tr_release(x1);
    tr_release(x3);
    is_int(tr_release_cached(TR_CPU), 0, "a segment with a live block is not released");
    tr_release(x4);
    is_int(tr_release_cached(TR_CPU), 2 * MiB, "merged whole again, it is released");
    is_int(stats().segment_count, 0, "no segments left");
}

static void test_peak(void)
{
    struct tr_tensor *a, *b;
    uint64_t base = stats().active_bytes;

    tr_memory_reset_peak(TR_CPU);
    is_int(stats().peak_active_bytes, base, "reset: the peak is the current active");
    a = bytes(8 * MiB);
    tr_release(a);
    b = bytes(2 * MiB);
    is_int(stats().peak_active_bytes - base, 8 * MiB, "the peak remembers 8 MiB");
    tr_memory_reset_peak(TR_CPU);
    is_int(stats().peak_active_bytes - base, 2 * MiB, "a new peak starts at 2 MiB");
    tr_release(b);
    tr_release_cached(TR_CPU);
}

/* The limit caps active bytes, after rounding; reserved bytes past it
 * only release the cache. */
static void test_limit(void)
{
    struct tr_tensor *held, *cache, *t, *small;
    struct tr_memory_stats s0, s;

    tr_release_cached(TR_CPU);
    ok(tr_memory_set_limit(TR_CPU, 64 * MiB) == TR_OK, "limit set to 64 MiB");
    held = bytes(32 * MiB);
    cache = bytes(16 * MiB);
    tr_release(cache); /* 16 MiB cached in a segment of its own */
    s0 = stats();
    is_int(s0.reserved_bytes, 48 * MiB, "32 MiB active + 16 MiB cached");

    t = bytes(24 * MiB); /* active 32 + 24 fits; reserved 48 + 24 would not */
    s = stats();
    ok(t != NULL, "a request within the limit in active bytes succeeds");
    is_int(s.retry_count - s0.retry_count, 1, "reserved past the limit: one cache release");
    is_int(s.reserved_bytes, 56 * MiB, "reserved 32 + 24 MiB");
    tr_release(t); /* cached again: 24 MiB */

    s0 = stats();
    t = bytes(40 * MiB); /* active 32 + 40 > 64 */
    s = stats();
    ok(t == NULL && tr_last_status() == TR_ERR_OOM, "a request past the limit fails: %s",
       tr_last_error());
    ok(strstr(tr_last_error(), "40.0 MiB") && strstr(tr_last_error(), "memory limit of 64.0 MiB") &&
           strstr(tr_last_error(), "32.0 MiB active"),
       "the message names the request, the limit and the pool's state");
    is_int(s.retry_count - s0.retry_count, 0, "no cache release: it could not help");
    is_int(s.oom_count - s0.oom_count, 1, "counted as one out-of-memory");
    is_int(s.cached_bytes, 24 * MiB, "the cache is left as it was");
    is_int(s.active_bytes, 32 * MiB, "nothing leaked: active is the held 32 MiB");

    t = bytes(32 * MiB); /* active exactly 64 MiB: at the limit, not past it */
    ok(t != NULL, "a request that brings active exactly to the limit succeeds");
    is_int(stats().active_bytes, 64 * MiB, "64 MiB active");
    small = bytes(1);
    ok(small == NULL && tr_last_status() == TR_ERR_OOM,
       "then even one byte (a 512-byte block) is past it: %s", tr_last_error());
    ok(strstr(tr_last_error(), "a block of 512 B") != NULL, "the message names the block");
    tr_release(t);

    /* a cache hit counts too: the limit is on what is active, not on what
     * is taken from the system */
    tr_memory_set_limit(TR_CPU, 40 * MiB);
    s0 = stats();
    is_int(s0.cached_bytes, 32 * MiB, "32 MiB cached");
    t = bytes(10 * MiB);
    ok(t == NULL, "a request the cache could serve is still refused past the limit");
    is_int(stats().cache_hit_count, s0.cache_hit_count, "no cache hit was counted");
    t = bytes(8 * MiB);
    ok(t != NULL, "8 MiB beside the held 32 MiB fits the 40 MiB limit");
    is_int(stats().cache_hit_count - s0.cache_hit_count, 1, "served from the cache");
    is_int(stats().reserved_bytes, 64 * MiB, "reserved stays past the limit: nothing needed more");
    tr_release(t);
    tr_release(held);
    tr_release_cached(TR_CPU);

    /* a small block's segment takes reserved past the limit: allowed */
    tr_memory_set_limit(TR_CPU, 5 * MiB);
    s0 = stats();
    small = bytes(100); /* 512 B active, a 2 MiB segment reserved */
    t = bytes(3 * MiB + 512 * KiB); /* a 4 MiB block: 4 MiB + 512 B active */
    s = stats();
    ok(small && t, "a 4 MiB block beside a 512-byte one fits a 5 MiB limit");
    is_int(s.active_bytes, 4 * MiB + 512, "4 MiB + 512 B active");
    is_int(s.reserved_bytes, 6 * MiB, "6 MiB reserved: past the limit, which only caps active");
    is_int(s.retry_count - s0.retry_count, 1, "the segment past the limit released the cache first");
    tr_release(t);
    tr_release(small);
    tr_memory_set_limit(TR_CPU, 0);
    tr_release_cached(TR_CPU);
    is_int(stats().reserved_bytes, 0, "all memory given back");
}

/* One sequence with every figure worked out by hand from the rounding
 * rules (512 B up to 1 MiB, 2 MiB above), reuse, splitting and merging:
 * active and peak must be exactly these at every step, and
 * tr_memory_block_size must give the same blocks. */
static void test_hand_computed(void)
{
    static const struct {
        uint64_t request, block;
    } sizes[] = {
        {0, 0}, {1, 512}, {511, 512}, {512, 512}, {513, 1024}, {1000, 1024},
        {1 * MiB - 1, 1 * MiB}, {1 * MiB, 1 * MiB}, {1 * MiB + 1, 2 * MiB},
        {2 * MiB, 2 * MiB}, {2 * MiB + 1, 4 * MiB}, {5 * MiB, 6 * MiB},
    };
    struct tr_tensor *a, *b, *c, *d, *e;
    uint64_t base, hits;

    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        is_int(tr_memory_block_size(sizes[i].request), sizes[i].block,
               "tr_memory_block_size(%llu) is %llu", (unsigned long long)sizes[i].request,
               (unsigned long long)sizes[i].block);
    tr_release_cached(TR_CPU);
    base = stats().active_bytes;
    tr_memory_reset_peak(TR_CPU);
    a = bytes(1000);        /* 1 KiB */
    b = bytes(5 * MiB);     /* 6 MiB */
    c = bytes(700 * KiB);   /* 700 KiB, beside a in the small segment */
    is_int(stats().active_bytes - base, 1 * KiB + 6 * MiB + 700 * KiB, "a + b + c active");
    tr_release(b);
    is_int(stats().active_bytes - base, 701 * KiB, "b gone: 701 KiB");
    hits = stats().cache_hit_count;
    d = bytes(3 * MiB);     /* 4 MiB, split from b's 6 MiB block */
    e = bytes(2 * MiB);     /* 2 MiB, the rest of it */
    is_int(stats().cache_hit_count - hits, 2, "d and e reuse b's block");
    is_int(stats().active_bytes - base, 701 * KiB + 6 * MiB, "c, a, d, e: 6 MiB + 701 KiB");
    is_int(stats().peak_active_bytes - base, 6 * MiB + 701 * KiB, "the peak is the same figure");
    tr_release(d);
    tr_release(e);          /* merged back into one 6 MiB block */
    hits = stats().cache_hit_count;
    b = bytes(6 * MiB);
    is_int(stats().cache_hit_count - hits, 1, "the merged 6 MiB block serves 6 MiB");
    is_int(stats().active_bytes - base, 701 * KiB + 6 * MiB, "6 MiB + 701 KiB active");
    tr_release(a);
    a = bytes(300 * KiB);   /* the freed 1 KiB is too small: from the segment's tail */
    is_int(stats().active_bytes - base, 1000 * KiB + 6 * MiB, "a's 1 KiB gone, 300 KiB more");
    is_int(stats().peak_active_bytes - base, 6 * MiB + 1000 * KiB, "peak 6 MiB + 1000 KiB");
    tr_release(a);
    tr_release(b);
    tr_release(c);
    is_int(stats().active_bytes, base, "everything returned");
    is_int(stats().peak_active_bytes - base, 6 * MiB + 1000 * KiB, "the peak stays");
    tr_release_cached(TR_CPU);
}

static void test_system_oom(void)
{
    struct tr_memory_stats s0 = stats(), s;
    struct tr_tensor *t = bytes(UINT64_C(1) << 60);

    s = stats();
    ok(t == NULL && tr_last_status() == TR_ERR_OOM,
       "1 EiB is refused by the system: %s", tr_last_error());
    ok(strstr(tr_last_error(), "the system refused") != NULL, "and the message says so");
    is_int(s.oom_count - s0.oom_count, 1, "counted as one out-of-memory");
    is_int(s.active_bytes, s0.active_bytes, "nothing leaked");
}

#define THREADS 4

static int stress_rounds(void)
{
    const char *v = getenv("TR_VALGRIND");
    return v && strcmp(v, "1") == 0 ? 500 : 20000;
}

static void *stress(void *arg)
{
    uint64_t state = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15u + 1;
    struct tr_tensor *live[8] = {NULL};
    int rounds = stress_rounds();
    int bad = 0;

    for (int i = 0; i < rounds; i++) {
        int slot;
        uint64_t n;
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        slot = (int)(state % 8);
        n = (state >> 8) % 4 == 0 ? (state >> 16) % (3 * MiB) + 1 : (state >> 16) % (64 * KiB) + 1;
        tr_release(live[slot]);
        live[slot] = bytes(n);
        if (!live[slot])
            bad++;
        else
            data(live[slot])[n - 1] = (char)i; /* the block really is that long */
    }
    for (int s = 0; s < 8; s++)
        tr_release(live[s]);
    return (void *)(intptr_t)bad;
}

static void test_threads(void)
{
    pthread_t th[THREADS];
    struct tr_memory_stats s0 = stats(), s;
    intptr_t failures = 0;

    for (intptr_t i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, stress, (void *)i);
    for (int i = 0; i < THREADS; i++) {
        void *r;
        pthread_join(th[i], &r);
        failures += (intptr_t)r;
    }
    s = stats();
    is_int(failures, 0, "threads: every allocation succeeded");
    is_int(s.alloc_count - s0.alloc_count, (uint64_t)THREADS * (uint64_t)stress_rounds(),
           "threads: every allocation was counted");
    is_int(s.active_bytes, s0.active_bytes, "threads: active is back where it was");
    is_int(tr_release_cached(TR_CPU), s.cached_bytes,
           "threads: every cached byte merged back into whole segments");
    is_int(stats().reserved_bytes, s0.active_bytes, "threads: nothing reserved is left idle");
}

int main(void)
{
    test_release_gives_memory_back();
    test_size_classes();
    test_reuse_split_merge();
    test_peak();
    test_limit();
    test_hand_computed();
    test_system_oom();
    test_threads();
    return done_testing();
}
