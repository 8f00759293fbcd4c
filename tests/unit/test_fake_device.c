/*
 * test_fake_device.c - the fake device (host memory behind the backend
 * interface): names, availability only under TENSORRUN_FAKE_DEVICES, a pool
 * per device with its own statistics, limit and release, transfers that
 * land only once waited for, and ops that give the CPU's bits while
 * charging the fake pool.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend_impl.h"
#include "op_test.h"
#include "tap.h"

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)

static struct tr_memory_stats stats_of(struct tr_device d)
{
    struct tr_memory_stats s;

    memset(&s, 0xff, sizeof s);
    tr_memory_stats(d, &s);
    return s;
}

static struct tr_tensor *f32_on(struct tr_device d, int64_t n, float first)
{
    float *host = malloc((size_t)n * sizeof *host);
    struct tr_tensor *t;

    for (int64_t i = 0; i < n; i++)
        host[i] = first + (float)i * 0.25f;
    t = tr_from_data(host, TR_DTYPE_F32, 1, &n, d);
    free(host);
    return t;
}

/* ------------------------------------------------- without the variable */

/* The variable is read once per process: the check runs in a child that
 * never had it, and reports its findings through a pipe. */
static void test_unavailable_without_variable(void)
{
    int fds[2];
    char msg[512] = "";
    pid_t pid;
    int status = -1;
    ssize_t n;

    if (pipe(fds) != 0) {
        ok(0, "without the variable: pipe");
        return;
    }
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        struct tr_memory_stats s;
        int64_t shape[1] = {4};
        bool good;
        close(fds[0]);
        unsetenv("TENSORRUN_FAKE_DEVICES");
        good = !tr_device_available(TR_FAKE(0)) &&
               tr_zeros(TR_DTYPE_F32, 1, shape, TR_FAKE(0)) == NULL &&
               tr_last_status() == TR_ERR_DEVICE;
        if (write(fds[1], tr_last_error(), strlen(tr_last_error())) < 0)
            _exit(3);
        good = good && strstr(tr_device_unavailable_reason(TR_FAKE(0)), "for tests") &&
               tr_memory_stats(TR_FAKE(0), &s) == TR_ERR_DEVICE &&
               tr_device_supports(TR_FAKE(0), TR_OP_ADD, NULL, 0); /* known all the same */
        _exit(good ? 0 : 1);
    }
    close(fds[1]);
    n = read(fds[0], msg, sizeof msg - 1);
    msg[n > 0 ? n : 0] = '\0';
    close(fds[0]);
    waitpid(pid, &status, 0);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
       "without TENSORRUN_FAKE_DEVICES: fake:0 is unavailable, makes no tensor, has no pool, "
       "and what its kind runs is known");
    ok(strstr(msg, "zeros: fake:0 is not available") && strstr(msg, "for tests") &&
           strstr(msg, "TENSORRUN_FAKE_DEVICES=N"),
       "and the error says why and how: %s", msg);
}

/* ------------------------------------------------------------------ names */

static void test_names(void)
{
    static const char *const bad[] = {"fake:", "fake:x", "fake:-1", "fake:64", "fakes",
                                      "fake0", "FAKE", NULL};
    struct tr_device d;
    char buf[TR_DEVICE_NAME_MAX];

    ok(tr_device_parse("fake", &d) == TR_OK && d.kind == TR_DEV_FAKE && d.index == 0,
       "parse: fake is fake:0");
    ok(tr_device_parse("fake:1", &d) == TR_OK && tr_device_equal(d, TR_FAKE(1)),
       "parse: fake:1");
    for (int i = 0; bad[i]; i++)
        ok(tr_device_parse(bad[i], &d) == TR_ERR_INVALID, "parse: '%s' is refused: %s", bad[i],
           tr_last_error());
    ok(strcmp(tr_device_format(TR_FAKE(1), buf, sizeof buf), "fake:1") == 0, "format: fake:1");
    ok(!tr_device_equal(TR_FAKE(0), TR_FAKE(1)) && !tr_device_equal(TR_FAKE(0), TR_CUDA(0)) &&
           !tr_device_equal(TR_FAKE(0), TR_CPU),
       "equal: by kind and index");
    ok(tr_device_available(TR_FAKE(0)) && tr_device_available(TR_FAKE(1)),
       "TENSORRUN_FAKE_DEVICES=2: fake:0 and fake:1 are available");
    ok(!tr_device_available(TR_FAKE(2)) &&
           tr_zeros(TR_DTYPE_F32, 0, NULL, TR_FAKE(2)) == NULL &&
           strstr(tr_last_error(), "there are only 2 fake devices"),
       "fake:2 is not: %s", tr_last_error());
    ok(strcmp(tr_device_unavailable_reason(TR_FAKE(2)), "there are only 2 fake devices") == 0 &&
           strcmp(tr_device_unavailable_reason(TR_FAKE(1)), "") == 0 &&
           strcmp(tr_device_unavailable_reason(TR_CPU), "") == 0,
       "tr_device_unavailable_reason: why fake:2 is not, nothing for fake:1 and the CPU");
}

/* ----------------------------------------------------- pools per device */

static void test_stats_per_device(void)
{
    struct tr_memory_stats cpu0 = stats_of(TR_CPU), cpu1, f0, f1;
    struct tr_tensor *small = f32_on(TR_FAKE(0), 250, 0); /* 1000 B: one 1 KiB block */
    struct tr_tensor *large = f32_on(TR_FAKE(1), 768 * 1024, 0); /* 3 MiB: a 4 MiB block */

    f0 = stats_of(TR_FAKE(0));
    f1 = stats_of(TR_FAKE(1));
    cpu1 = stats_of(TR_CPU);
    ok(small && large, "a small tensor on fake:0, a large one on fake:1");
    is_int(f0.active_bytes, 1 * KiB, "fake:0: active is the 1 KiB block");
    is_int(f0.reserved_bytes, 2 * MiB, "fake:0: reserved is one 2 MiB small segment");
    is_int(f0.cached_bytes, 2 * MiB - 1 * KiB, "fake:0: the rest of it is cached");
    is_int(f0.alloc_count, 1, "fake:0: one allocation");
    is_int(f0.segment_count, 1, "fake:0: one segment");
    is_int(f1.active_bytes, 4 * MiB, "fake:1: active is the 4 MiB block");
    is_int(f1.reserved_bytes, 4 * MiB, "fake:1: a segment of its own size");
    is_int(f1.alloc_count, 1, "fake:1: one allocation");
    is_int(cpu1.active_bytes, cpu0.active_bytes, "cpu: active unchanged");
    is_int(cpu1.alloc_count, cpu0.alloc_count, "cpu: no allocation (the copies went straight)");
    is_int(cpu1.reserved_bytes, cpu0.reserved_bytes, "cpu: reserved unchanged");

    tr_release(small);
    tr_release(large);
    f0 = stats_of(TR_FAKE(0));
    is_int(f0.active_bytes, 0, "fake:0: freed, active 0");
    is_int(f0.cached_bytes, 2 * MiB, "fake:0: the segment stays cached");
    ok(tr_memory_reset_peak(TR_FAKE(0)) == TR_OK && stats_of(TR_FAKE(0)).peak_active_bytes == 0 &&
           stats_of(TR_FAKE(1)).peak_active_bytes == 4 * MiB,
       "reset_peak: fake:0's peak starts again, fake:1's stays");
}

static void test_limit_per_device(void)
{
    struct tr_memory_stats cpu0 = stats_of(TR_CPU), f0;
    int64_t big = 3 * 1024 * 1024;
    struct tr_tensor *t, *c;

    ok(tr_memory_set_limit(TR_FAKE(0), 2 * MiB) == TR_OK, "limit fake:0 to 2 MiB");
    t = tr_empty(TR_DTYPE_U8, 1, &big, TR_FAKE(0));
    ok(t == NULL && tr_last_status() == TR_ERR_OOM && strstr(tr_last_error(), "on fake:0") &&
           strstr(tr_last_error(), "memory limit of 2.0 MiB"),
       "fake:0: 3 MiB is past its limit: %s", tr_last_error());
    f0 = stats_of(TR_FAKE(0));
    is_int(f0.oom_count, 1, "fake:0: one out-of-memory");
    /* the limit caps active bytes: a block past it is refused at once,
     * without releasing the cache (tr_memory_set_limit) */
    is_int(f0.retry_count, 0, "fake:0: refused at once, no retry");
    is_int(f0.reserved_bytes, 2 * MiB, "fake:0: its idle segment stays cached");
    c = tr_empty(TR_DTYPE_U8, 1, &big, TR_CPU);
    ok(c != NULL, "cpu: the same 3 MiB is fine, the limit is fake:0's");
    is_int(stats_of(TR_CPU).oom_count, cpu0.oom_count, "cpu: no out-of-memory counted");
    is_int(stats_of(TR_CPU).limit_bytes, cpu0.limit_bytes, "cpu: its limit unchanged");
    t = tr_empty(TR_DTYPE_U8, 1, &big, TR_FAKE(1));
    ok(t != NULL, "fake:1: the same 3 MiB is fine too");
    tr_release(t);
    tr_release(c);
    tr_memory_set_limit(TR_FAKE(0), 0);
}

static void test_release_per_device(void)
{
    struct tr_tensor *a = f32_on(TR_FAKE(0), 1024, 0), *b = f32_on(TR_FAKE(1), 1024, 0);
    struct tr_tensor *c = f32_on(TR_CPU, 1024, 0);
    uint64_t cpu_reserved, f1_reserved;

    tr_release(a);
    tr_release(b);
    tr_release(c);
    cpu_reserved = stats_of(TR_CPU).reserved_bytes;
    f1_reserved = stats_of(TR_FAKE(1)).reserved_bytes;
    ok(f1_reserved >= 2 * MiB, "fake:1 holds idle segments (%llu bytes)",
       (unsigned long long)f1_reserved);
    is_int(tr_release_cached(TR_FAKE(0)), 2 * MiB, "release fake:0: its one idle segment");
    is_int(stats_of(TR_FAKE(0)).reserved_bytes, 0, "fake:0: nothing reserved");
    is_int(stats_of(TR_FAKE(1)).reserved_bytes, f1_reserved, "fake:1: untouched");
    is_int(stats_of(TR_CPU).reserved_bytes, cpu_reserved, "cpu: untouched");
    is_int(tr_release_cached(TR_FAKE(1)), f1_reserved, "release fake:1: all of its cache");
    is_int(stats_of(TR_FAKE(0)).released_bytes, 2 * MiB,
           "fake:0: released_bytes counts its own releases only (this one)");
}

static void test_devices_touched(void)
{
    struct tr_device d[8];
    size_t n = tr_memory_devices(d, 8);

    ok(n == 3 && tr_device_equal(d[0], TR_CPU) && tr_device_equal(d[1], TR_FAKE(0)) &&
           tr_device_equal(d[2], TR_FAKE(1)),
       "tr_memory_devices: cpu, fake:0, fake:1 (%zu)", n);
    ok(tr_memory_devices(d, 1) == 3 && tr_device_equal(d[0], TR_CPU),
       "tr_memory_devices: the count past cap");
}

/* ------------------------------------------------------------- transfers */

static void test_round_trip_bits(void)
{
    uint32_t bits[6] = {0x7fc00001u, 0xff800000u, 0x80000000u, 0x00000001u, 0x3f800000u,
                        0x7f7fffffu}; /* NaN payload, -inf, -0, subnormal, 1, max */
    uint16_t half[4] = {0x7e01u, 0x8001u, 0x3c00u, 0xfc00u}, half_back[4];
    uint32_t back[6];
    int64_t n6 = 6, n4 = 4;
    struct tr_tensor *h = tr_from_data(bits, TR_DTYPE_F32, 1, &n6, TR_CPU);
    struct tr_tensor *f = tr_to(h, TR_FAKE(0)), *g = f ? tr_to(f, TR_FAKE(1)) : NULL;
    struct tr_tensor *home = g ? tr_to(g, TR_CPU) : NULL, *hf, *ff;

    ok(f && tr_device_equal(tr_tensor_device(f), TR_FAKE(0)) &&
           tr_tensor_storage_kind(f) == TR_STORAGE_POOL,
       "tr_to fake:0: a pool tensor on fake:0");
    ok(g && tr_device_equal(tr_tensor_device(g), TR_FAKE(1)), "tr_to fake:1, through the host");
    ok(home && tr_device_equal(tr_tensor_device(home), TR_CPU) &&
           memcmp(tr_tensor_data(home), bits, sizeof bits) == 0,
       "cpu -> fake:0 -> fake:1 -> cpu: bit for bit (NaN payload, -0, subnormal)");
    ok(g && tr_copy_to_host(g, back, sizeof back) == TR_OK && memcmp(back, bits, sizeof bits) == 0,
       "tr_copy_to_host from fake:1: bit for bit");
    hf = tr_from_data(half, TR_DTYPE_F16, 1, &n4, TR_FAKE(0));
    ff = hf ? tr_to(hf, TR_CPU) : NULL;
    ok(ff && tr_copy_to_host(hf, half_back, sizeof half_back) == TR_OK &&
           memcmp(half_back, half, sizeof half) == 0 &&
           memcmp(tr_tensor_data(ff), half, sizeof half) == 0,
       "f16 from_data on fake:0 and back: bit for bit");
    tr_release(ff);
    tr_release(hf);
    tr_release(home);
    tr_release(g);
    tr_release(f);
    tr_release(h);
}

static void test_strided_views(void)
{
    float host[4 * 6], back[4 * 6], want[3 * 3];
    int64_t shape[2] = {4, 6};
    struct tr_tensor *t, *rows, *view, *dev, *dev_rows, *dev_view, *compact, *home;
    double v;

    for (int i = 0; i < 24; i++)
        host[i] = (float)i * 0.5f - 3.0f;
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++)
            want[r * 3 + c] = host[(r + 1) * 6 + (5 - 2 * c)];
    t = tr_from_data(host, TR_DTYPE_F32, 2, shape, TR_CPU);
    /* rows 1..3, every other column, reversed: negative strides */
    rows = tr_slice(t, 0, 1, 4, 1);
    view = tr_slice(rows, 1, TR_SLICE_NONE, TR_SLICE_NONE, -2);
    dev = tr_to(view, TR_FAKE(0));
    ok(dev && tr_tensor_is_contiguous(dev) && tr_copy_to_host(dev, back, sizeof back) == TR_OK &&
           memcmp(back, want, sizeof want) == 0,
       "a strided CPU view moved to fake:0 arrives compact and in order");
    tr_release(dev);

    dev = tr_to(t, TR_FAKE(0));
    dev_rows = tr_slice(dev, 0, 1, 4, 1);
    dev_view = tr_slice(dev_rows, 1, TR_SLICE_NONE, TR_SLICE_NONE, -2);
    ok(dev_view && tr_copy_to_host(dev_view, back, sizeof back) == TR_OK &&
           memcmp(back, want, sizeof want) == 0,
       "a strided fake:0 view copied to the host: gathered");
    compact = tr_contiguous(dev_view);
    ok(compact && tr_device_equal(tr_tensor_device(compact), TR_FAKE(0)) &&
           !tr_tensor_shares_storage(compact, dev) &&
           tr_copy_to_host(compact, back, sizeof back) == TR_OK &&
           memcmp(back, want, sizeof want) == 0,
       "tr_contiguous of a fake:0 view gathers on fake:0");
    home = tr_to(dev_view, TR_CPU);
    ok(home && tr_device_equal(tr_tensor_device(home), TR_CPU) &&
           memcmp(tr_tensor_data(home), want, sizeof want) == 0,
       "tr_to cpu of a strided fake:0 view");
    ok(tr_tensor_item(dev_view, (int64_t[]){2, 0}, &v) == TR_OK && v == host[3 * 6 + 5],
       "one element read from a fake:0 view");
    tr_release(home);
    tr_release(compact);
    tr_release(dev_view);
    tr_release(dev_rows);
    tr_release(dev);
    tr_release(view);
    tr_release(rows);
    tr_release(t);
}

/* ---------------------------------------------------------------- events */

static void test_events(void)
{
    const struct tr__backend *b = tr__backend_of(TR_DEV_FAKE);
    float src[256], dst[256];
    struct tr_tensor *t = tr_zeros(TR_DTYPE_F32, 1, (int64_t[]){256}, TR_FAKE(0));
    float *mem = t ? tr_tensor_data_mut(t) : NULL;
    struct tr__event e;
    bool done = true;
    float zero[256] = {0};

    for (int i = 0; i < 256; i++)
        src[i] = (float)i + 1;
    ok(mem && memcmp(mem, zero, sizeof zero) == 0, "a zeroed fake:0 tensor");
    if (!mem)
        return;

    ok(b->upload(0, mem, src, sizeof src, "test") == TR_OK, "upload: enqueued");
    ok(memcmp(mem, zero, sizeof zero) == 0, "upload not waited for: it has not landed");
    ok(tr__event_record(TR_FAKE(0), &e, "test") == TR_OK, "an event after it");
    ok(tr__event_query(&e, &done, "test") == TR_OK && !done &&
           memcmp(mem, zero, sizeof zero) == 0,
       "first query: not yet, and still not landed");
    ok(tr__event_query(&e, &done, "test") == TR_OK && done &&
           memcmp(mem, src, sizeof src) == 0,
       "second query: complete, and landed");

    memset(dst, 0, sizeof dst);
    for (int i = 0; i < 256; i++)
        src[i] = -src[i];
    ok(b->download(0, dst, mem, sizeof dst, "test") == TR_OK &&
           tr__event_record(TR_FAKE(0), &e, "test") == TR_OK,
       "download: enqueued, and an event after it");
    ok(memcmp(dst, zero, sizeof zero) == 0,
       "download not waited for: the host buffer is as it was");
    ok(tr__event_wait(&e, "test") == TR_OK && memcmp(dst, mem, sizeof dst) == 0,
       "waited for: landed");

    ok(b->upload(0, mem, src, sizeof src, "test") == TR_OK &&
           memcmp(mem, src, sizeof src) != 0 && tr_device_synchronize(TR_FAKE(0)) == TR_OK &&
           memcmp(mem, src, sizeof src) == 0,
       "synchronize lands what was issued");

    /* a kernel is work on the same stream: what was issued before lands first */
    for (int i = 0; i < 256; i++)
        src[i] = (float)(i % 7);
    ok(b->upload(0, mem, src, sizeof src, "test") == TR_OK, "upload, then a kernel at once");
    {
        struct tr_arg a[1] = {tensor_arg(t)};
        struct tr_tensor *y = run("neg", a, 1);
        bool same = y != NULL;
        for (int i = 0; same && i < 256; i++)
            same = flat(y, i) == -(double)(i % 7);
        ok(same, "neg on fake:0 reads the uploaded values");
        tr_release(y);
    }

    ok(tr__event_record(TR_FAKE(0), &e, "test") == TR_OK && e.seq > 0 &&
           tr__event_query(&e, &done, "test") == TR_OK && done,
       "an event with nothing pending is complete at once");
    ok(tr__event_record(TR_CPU, &e, "test") == TR_OK &&
           tr__event_query(&e, &done, "test") == TR_OK && done,
       "the CPU's events are complete when recorded");
    tr_release(t);

}

/* -------------------------------------------------------- deferred frees */

/* A block freed while a copy into it is queued is deferred: out of the
 * active bytes at once (so the peak does not depend on the device's
 * timing), pending in the cache, reused and given back only once the copy
 * has landed; a release never waits for it. */
static void test_deferred_frees(void)
{
    const struct tr__backend *b = tr__backend_of(TR_DEV_FAKE);
    int64_t n = 1 << 20; /* 4 MiB of f32: a segment of its own */
    float *from = calloc((size_t)n, sizeof *from);
    struct tr_tensor *big, *next;
    struct tr_memory_stats before, s;
    void *old;
    float *mem;
    struct tr__event e;
    bool done = false, kept;

    tr_release_cached(TR_FAKE(1));
    before = stats_of(TR_FAKE(1));
    big = tr_empty(TR_DTYPE_F32, 1, &n, TR_FAKE(1));
    old = big ? tr_tensor_data_mut(big) : NULL;

    for (int64_t i = 0; from && i < n; i++)
        from[i] = 7;
    ok(old && from && b->upload(1, old, from, (uint64_t)n * 4, "test") == TR_OK &&
           tr__event_record(TR_FAKE(1), &e, "test") == TR_OK,
       "a copy queued into a 4 MiB fake:1 block");
    if (!old || !from)
        return;
    tr_release(big);
    s = stats_of(TR_FAKE(1));
    ok(s.active_bytes == before.active_bytes && s.pending_bytes == 4 * MiB &&
           s.cached_bytes >= 4 * MiB,
       "freed with the copy queued: not active, pending (%llu bytes) in the cache",
       (unsigned long long)s.pending_bytes);
    ok(tr_release_cached(TR_FAKE(1)) == 0 && stats_of(TR_FAKE(1)).pending_bytes == 4 * MiB &&
           tr__event_query(&e, &done, "test") == TR_OK && !done,
       "release_cached gives nothing back and waits for nothing");

    next = tr_empty(TR_DTYPE_F32, 1, &n, TR_FAKE(1));
    mem = next ? tr_tensor_data_mut(next) : NULL;
    ok(mem && (void *)mem != old && stats_of(TR_FAKE(1)).reserved_bytes == s.reserved_bytes + 4 * MiB,
       "a block of the same size is not the pending one: a new segment");
    if (mem) {
        memset(mem, 0, (size_t)n * sizeof *mem);
        tr_device_synchronize(TR_FAKE(1));
        kept = true;
        for (int64_t i = 0; i < n && kept; i += 4096)
            kept = mem[i] == 0;
        ok(kept, "so the copy, landing, writes into the old block, not the new one");
    }
    s = stats_of(TR_FAKE(1));
    ok(s.pending_bytes == 4 * MiB, "landed, the block stays pending until the pool looks");
    ok(tr_release_cached(TR_FAKE(1)) == 4 * MiB && stats_of(TR_FAKE(1)).pending_bytes == 0,
       "then release_cached frees it and gives its segment back");
    tr_release(next);
    ok(tr_release_cached(TR_FAKE(1)) == 4 * MiB, "and the other one once it is released");

    /* with nothing queued, a free takes effect at once */
    big = tr_empty(TR_DTYPE_F32, 1, &n, TR_FAKE(1));
    tr_release(big);
    s = stats_of(TR_FAKE(1));
    ok(big && s.pending_bytes == 0 && s.cached_bytes == 4 * MiB,
       "a free with nothing queued is not deferred");
    next = tr_empty(TR_DTYPE_F32, 1, &n, TR_FAKE(1));
    ok(next && stats_of(TR_FAKE(1)).cache_hit_count == s.cache_hit_count + 1,
       "and its block is reused");
    tr_release(next);
    tr_release_cached(TR_FAKE(1));

    /* a device that has no room for a new segment: the allocation waits
     * for the pending frees and takes one of them */
    setenv("TENSORRUN_FAKE_MEMORY", "6291456", 1); /* 6 MiB */
    big = tr_empty(TR_DTYPE_F32, 1, &n, TR_FAKE(1));
    old = big ? tr_tensor_data_mut(big) : NULL;
    ok(old && b->upload(1, old, from, (uint64_t)n * 4, "test") == TR_OK,
       "a 6 MiB fake:1, another copy queued into a 4 MiB block");
    tr_release(big);
    s = stats_of(TR_FAKE(1));
    next = tr_empty(TR_DTYPE_F32, 1, &n, TR_FAKE(1));
    mem = next ? tr_tensor_data_mut(next) : NULL;
    ok(s.pending_bytes == 4 * MiB && mem == old && stats_of(TR_FAKE(1)).pending_bytes == 0 &&
           stats_of(TR_FAKE(1)).retry_count == s.retry_count + 1,
       "the next 4 MiB does not fit beside it: the pool waits, and reuses the block (a retry)");
    ok(mem && mem[0] == 7 && mem[n - 1] == 7, "after the copy into it has landed");
    tr_release(next);
    next = tr_empty(TR_DTYPE_F32, 1, (int64_t[]){2 * n}, TR_FAKE(1));
    ok(!next && tr_last_status() == TR_ERR_OOM, "8 MiB does not fit in 6: out of memory");
    unsetenv("TENSORRUN_FAKE_MEMORY");
    tr_release_cached(TR_FAKE(1));
    free(from);
}

/* ---------------------------------------------------------------- staging */

/* The work items fake:0 has been given so far (an event's seq). */
static uint64_t issued(void)
{
    struct tr__event e;

    tr__event_record(TR_FAKE(0), &e, "test");
    return e.seq;
}

/* Host memory that is not the pool's (a mapping, a borrowed buffer) goes
 * up through two staging buffers of 4 MiB, chunk after chunk, each refilled
 * only once its last copy has landed: no host copy in the pool, the same
 * bits. */
static void test_staged_uploads(void)
{
    int64_t n = (21 << 20) / 4 + 3, wide[2] = {4096, 1024}, tall[2] = {1100000, 2};
    float *v = malloc((size_t)n * sizeof *v), *back = malloc((size_t)n * sizeof *back);
    struct tr_blob blob = {.data = v, .nbytes = (uint64_t)n * sizeof *v};
    struct tr_tensor *t, *d, *x, *xt, *want;
    struct tr_memory_stats c0;
    uint64_t i0;

    if (!v || !back) {
        ok(false, "memory for the staging tests");
        return;
    }
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)i;
    t = tr_from_blob(&blob, TR_DTYPE_F32, 1, &n, NULL, TR_CPU);
    c0 = stats_of(TR_CPU);
    i0 = issued();
    d = tr_to(t, TR_FAKE(0));
    ok(d && stats_of(TR_CPU).alloc_count == c0.alloc_count && issued() == i0 + 6,
       "21 MiB of borrowed memory to fake:0: six chunks, nothing of the CPU pool");
    ok(d && tr_copy_to_host(d, back, (size_t)n * sizeof *back) == TR_OK &&
           memcmp(back, v, (size_t)n * sizeof *v) == 0,
       "every chunk's bits, though two buffers took turns");
    tr_release(d);

    x = tr_from_blob(&blob, TR_DTYPE_F32, 2, wide, NULL, TR_CPU);
    xt = x ? tr_transpose(x, 0, 1) : NULL; /* [1024, 4096], rows of 16 KiB */
    want = xt ? tr_contiguous(xt) : NULL;
    c0 = stats_of(TR_CPU);
    i0 = issued();
    d = xt ? tr_to(xt, TR_FAKE(0)) : NULL;
    ok(d && stats_of(TR_CPU).alloc_count == c0.alloc_count && issued() == i0 + 4,
       "a transposed 16 MiB view: 256 of its rows a chunk, gathered, no compact host copy");
    ok(d && tr_copy_to_host(d, back, 16 << 20) == TR_OK &&
           memcmp(back, tr_tensor_data(want), 16 << 20) == 0,
       "with the view's values in order");
    tr_release(d);
    tr_release(want);
    tr_release(xt);
    tr_release(x);

    x = tr_from_blob(&blob, TR_DTYPE_F32, 2, tall, NULL, TR_CPU);
    xt = x ? tr_transpose(x, 0, 1) : NULL; /* [2, 1100000]: a row is 4.2 MiB */
    c0 = stats_of(TR_CPU);
    d = xt ? tr_to(xt, TR_FAKE(0)) : NULL;
    ok(d && stats_of(TR_CPU).alloc_count == c0.alloc_count + 1,
       "a view whose one row passes a buffer is made compact on the host first");
    tr_release(d);
    tr_release(xt);
    tr_release(x);
    tr_release(t);

    blob.flags = TR_FLAG_PINNED;
    t = tr_from_blob(&blob, TR_DTYPE_F32, 1, &n, NULL, TR_CPU);
    i0 = issued();
    d = t ? tr_to(t, TR_FAKE(0)) : NULL;
    ok(d && issued() == i0 + 1 && tr_copy_to_host(d, back, (size_t)n * sizeof *back) == TR_OK &&
           memcmp(back, v, (size_t)n * sizeof *v) == 0,
       "memory tagged PINNED goes up in one copy, as it lies");
    tr_release(d);
    tr_release(t);
    free(back);
    free(v);
}

/* --------------------------------------------------------------------- ops */

static bool same_bits(struct tr_tensor *a, struct tr_tensor *b)
{
    uint64_t n = a ? tr_tensor_nbytes(a) : 0;
    char *x, *y;
    bool same;

    if (!a || !b || n != tr_tensor_nbytes(b) || tr_tensor_dtype(a) != tr_tensor_dtype(b) ||
        tr_tensor_ndim(a) != tr_tensor_ndim(b))
        return false;
    x = malloc(n ? n : 1);
    y = malloc(n ? n : 1);
    same = tr_copy_to_host(a, x, n) == TR_OK && tr_copy_to_host(b, y, n) == TR_OK &&
           memcmp(x, y, n) == 0;
    free(x);
    free(y);
    return same;
}

struct op_case {
    const char *op;
    int nargs;
    int ntensors; /* the first ntensors arguments are tensors: x, then w */
    struct tr_arg extra[3];
};

/* op on CPU tensors and on their fake:0 copies: the same bits; every
 * result on fake:0; the CPU pool untouched while the op runs on fake:0. */
static void check_op(const struct op_case *c, struct tr_tensor *x, struct tr_tensor *w)
{
    struct tr_tensor *fx = tr_to(x, TR_FAKE(0)), *fw = tr_to(w, TR_FAKE(0));
    struct tr_tensor *cpu_r[TR_OP_MAX_RESULTS] = {NULL}, *fake_r[TR_OP_MAX_RESULTS] = {NULL};
    struct tr_arg args[4], fargs[4];
    struct tr_memory_stats cpu0, cpu1, f0, f1;
    bool same = true, on_fake = true;
    int nres = tr_op_find(c->op)->nresults;

    for (int i = 0; i < c->nargs; i++) {
        args[i] = i < c->ntensors ? tensor_arg(i == 0 ? x : w) : c->extra[i - c->ntensors];
        fargs[i] = i < c->ntensors ? tensor_arg(i == 0 ? fx : fw) : c->extra[i - c->ntensors];
    }
    run2(c->op, args, c->nargs, cpu_r);
    cpu0 = stats_of(TR_CPU);
    f0 = stats_of(TR_FAKE(0));
    run2(c->op, fargs, c->nargs, fake_r);
    cpu1 = stats_of(TR_CPU);
    f1 = stats_of(TR_FAKE(0));
    for (int i = 0; i < nres; i++) {
        same = same && same_bits(cpu_r[i], fake_r[i]);
        on_fake = on_fake && fake_r[i] &&
                  tr_device_equal(tr_tensor_device(fake_r[i]), TR_FAKE(0));
    }
    ok(cpu_r[0] && same, "%s on fake:0: the CPU's bits", c->op);
    ok(on_fake, "%s on fake:0: its results are on fake:0", c->op);
    ok(cpu1.alloc_count == cpu0.alloc_count && f1.alloc_count > f0.alloc_count &&
           f1.active_bytes > f0.active_bytes,
       "%s on fake:0: charged to the fake pool (%llu allocations, %llu bytes), none on the CPU "
       "(%llu)",
       c->op, (unsigned long long)(f1.alloc_count - f0.alloc_count),
       (unsigned long long)(f1.active_bytes - f0.active_bytes),
       (unsigned long long)(cpu1.alloc_count - cpu0.alloc_count));
    for (int i = 0; i < nres; i++) {
        tr_release(cpu_r[i]);
        tr_release(fake_r[i]);
    }
    tr_release(fx);
    tr_release(fw);
}

static void test_ops(void)
{
    int64_t shape[2] = {37, 129}, wshape[2] = {129, 33}, ishape[2] = {37, 129};
    struct tr_tensor *x = tr_empty(TR_DTYPE_F32, 2, shape, TR_CPU);
    struct tr_tensor *w = tr_empty(TR_DTYPE_F32, 2, wshape, TR_CPU);
    struct tr_tensor *xi = tr_empty(TR_DTYPE_I32, 2, ishape, TR_CPU);
    struct tr_tensor *x16;
    float *px = tr_tensor_data_mut(x), *pw = tr_tensor_data_mut(w);
    int32_t *pi = tr_tensor_data_mut(xi);
    const struct op_case cases[] = {
        {.op = "exp", .nargs = 1, .ntensors = 1},
        {.op = "add", .nargs = 2, .ntensors = 2},
        {.op = "mul", .nargs = 2, .ntensors = 1, .extra = {float_arg(0.5)}},
        {.op = "sum", .nargs = 1, .ntensors = 1},
        {.op = "mean", .nargs = 2, .ntensors = 1, .extra = {int_arg(1)}},
        {.op = "softmax", .nargs = 1, .ntensors = 1},
        {.op = "layer_norm", .nargs = 1, .ntensors = 1},
        {.op = "sort", .nargs = 1, .ntensors = 1},
        {.op = "topk", .nargs = 2, .ntensors = 1, .extra = {int_arg(5)}},
        {.op = "cast", .nargs = 2, .ntensors = 1, .extra = {dtype_arg(TR_DTYPE_BF16)}},
        {.op = "clone", .nargs = 1, .ntensors = 1},
        {.op = "quantize", .nargs = 1, .ntensors = 1},
    };
    const struct op_case mm = {.op = "matmul", .nargs = 2, .ntensors = 2};
    const struct op_case imul = {.op = "mul", .nargs = 2, .ntensors = 1,
                                 .extra = {float_arg(0.5)}};
    const struct op_case f16add = {.op = "add", .nargs = 2, .ntensors = 2};

    for (int i = 0; i < 37 * 129; i++) {
        px[i] = sinf((float)i * 0.37f) * 3.0f;
        pi[i] = (int32_t)(i * 2654435761u % 100003u) - 50000;
    }
    for (int i = 0; i < 129 * 33; i++)
        pw[i] = cosf((float)i * 0.11f);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        check_op(&cases[i], x, x);
    check_op(&mm, x, w);
    check_op(&imul, xi, xi); /* an int32 tensor times 0.5: an f32 result */
    x16 = tr_cast(xi, TR_DTYPE_F16);
    check_op(&f16add, x16, xi); /* f16 + i32: the integer is rounded to f16 first */
    tr_release(x16);
    tr_release(xi);
    tr_release(w);
    tr_release(x);
}

/* Views made on the fake device itself (every other row, reversed
 * columns, a transpose, a broadcast row) reach the kernels strided, as
 * views of CPU tensors do. */
static void test_strided_operands(void)
{
    int64_t shape[2] = {64, 48};
    struct tr_tensor *x = f32_on(TR_CPU, 64 * 48, -7), *m = tr_reshape_view(x, shape, 2);
    struct tr_tensor *row = f32_on(TR_CPU, 24, 0.5f);
    struct tr_tensor *fm = tr_to(m, TR_FAKE(0)), *frow = tr_to(row, TR_FAKE(0));
    struct tr_tensor *v[2], *t[2], *sum[2], *e[2], *back[2];
    struct tr_tensor *src[2] = {m, fm}, *rows[2] = {row, frow};

    for (int d = 0; d < 2; d++) {
        struct tr_tensor *every_other = tr_slice(src[d], 0, TR_SLICE_NONE, TR_SLICE_NONE, 2);
        v[d] = tr_slice(every_other, 1, TR_SLICE_NONE, TR_SLICE_NONE, -2); /* [32, 24] */
        t[d] = tr_transpose(v[d], 0, 1);                                     /* [24, 32] */
        sum[d] = run("add", (struct tr_arg[]){tensor_arg(v[d]), tensor_arg(rows[d])}, 2);
        e[d] = run("exp", (struct tr_arg[]){tensor_arg(t[d])}, 1);
        back[d] = run("sum", (struct tr_arg[]){tensor_arg(t[d]), int_arg(1)}, 2);
        tr_release(every_other);
    }
    ok(!tr_tensor_is_contiguous(v[1]) && tr_device_equal(tr_tensor_device(t[1]), TR_FAKE(0)),
       "strided views of a fake:0 tensor stay on fake:0");
    ok(same_bits(sum[0], sum[1]) && tr_device_equal(tr_tensor_device(sum[1]), TR_FAKE(0)),
       "a strided view plus a broadcast row on fake:0: the CPU's bits");
    ok(same_bits(e[0], e[1]), "exp of a transposed strided view on fake:0: the CPU's bits");
    ok(same_bits(back[0], back[1]), "sum along a strided dimension on fake:0: the CPU's bits");
    for (int d = 0; d < 2; d++) {
        tr_release(back[d]);
        tr_release(e[d]);
        tr_release(sum[d]);
        tr_release(t[d]);
        tr_release(v[d]);
    }
    tr_release(frow);
    tr_release(fm);
    tr_release(row);
    tr_release(m);
    tr_release(x);
}

static void test_unsupported_and_mixed(void)
{
    struct tr_tensor *c = f32_on(TR_CPU, 8, 1), *f = f32_on(TR_FAKE(0), 8, 1);
    struct tr_arg one[2] = {tensor_arg(f), int_arg(0)}, two[2] = {tensor_arg(c), tensor_arg(f)};
    struct tr_tensor *r;
    enum tr_dtype f32 = TR_DTYPE_F32;

    ok(!tr_device_supports(TR_FAKE(0), TR_OP_CUMSUM, &f32, 1),
       "supports: fake:0 has no cumsum (left out on purpose)");
    ok(tr_device_supports(TR_FAKE(0), TR_OP_SUM, &f32, 1) &&
           tr_device_supports(TR_CPU, TR_OP_CUMSUM, &f32, 1),
       "supports: fake:0 has sum, the CPU has cumsum");
    ok(tr_device_supports(TR_FAKE(5), TR_OP_SUM, &f32, 1) &&
           !tr_device_supports(TR_FAKE(5), TR_OP_CUMSUM, &f32, 1),
       "supports: known of a device that is not present, from its kind");
    r = run("cumsum", one, 2);
    ok(r == NULL && tr_last_status() == TR_ERR_DEVICE && strstr(tr_last_error(), "cumsum") &&
           strstr(tr_last_error(), "fake:0 has no kernel for this op"),
       "cumsum on fake:0: a clear TR_ERR_DEVICE: %s", tr_last_error());
    r = run("add", two, 2);
    ok(r == NULL && tr_last_status() == TR_ERR_DEVICE &&
           strstr(tr_last_error(), "different devices (cpu and fake:0)"),
       "cpu + fake:0: TR_ERR_DEVICE: %s", tr_last_error());
    r = run("to", (struct tr_arg[]){tensor_arg(f), string_arg("cpu")}, 2);
    ok(r && tr_device_equal(tr_tensor_device(r), TR_CPU) && flat(r, 7) == 1 + 7 * 0.25,
       "the to op moves a fake:0 tensor to the CPU");
    tr_release(r);
    ok(tr_copy_into(c, f) == TR_ERR_DEVICE, "copy_into between cpu and fake:0 is refused");
    tr_release(f);
    tr_release(c);
}

int main(void)
{
    test_unavailable_without_variable();
    setenv("TENSORRUN_FAKE_DEVICES", "2", 1);
    test_names();
    test_stats_per_device();
    test_limit_per_device();
    test_release_per_device();
    test_round_trip_bits();
    test_strided_views();
    test_events();
    test_deferred_frees();
    test_staged_uploads();
    test_ops();
    test_strided_operands();
    test_unsupported_and_mixed();
    test_devices_touched();
    return done_testing();
}
