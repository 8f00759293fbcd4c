/*
 * test_device.c - device names, CUDA detection, and transfers.  Without a
 * GPU the CUDA half checks that every CUDA request fails cleanly and says
 * why, and that the built module at least loads; with one, it moves data
 * to the device and back.
 */
#include "config.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_module.h"
#include "tensorrun.h"
#include "tap.h"

static void test_names(void)
{
    static const char *const bad[] = {"gpu", "cuda:", "cuda:x", "cuda:-1", "cuda:1x",
                                      "cuda:99999", "CPU", "", NULL};
    struct tr_device d;
    char buf[TR_DEVICE_NAME_MAX];

    ok(tr_device_parse("cpu", &d) == TR_OK && d.kind == TR_DEV_CPU, "parse: cpu");
    ok(tr_device_parse("cuda", &d) == TR_OK && d.kind == TR_DEV_CUDA && d.index == 0,
       "parse: cuda is cuda:0");
    ok(tr_device_parse("cuda:3", &d) == TR_OK && d.kind == TR_DEV_CUDA && d.index == 3,
       "parse: cuda:3");
    for (int i = 0; bad[i]; i++)
        ok(tr_device_parse(bad[i], &d) == TR_ERR_INVALID, "parse: '%s' is refused: %s", bad[i],
           tr_last_error());
    ok(strcmp(tr_device_format(TR_CUDA(2), buf, sizeof buf), "cuda:2") == 0 &&
           strcmp(tr_device_format(TR_CPU, buf, sizeof buf), "cpu") == 0,
       "format: cpu and cuda:N");
    ok(tr_device_equal(TR_CPU, TR_CPU) && !tr_device_equal(TR_CPU, TR_CUDA(0)) &&
           !tr_device_equal(TR_CUDA(0), TR_CUDA(1)),
       "equal: by kind and index");
    ok(tr_device_available(TR_CPU), "the CPU is always available");
}

/* The module built beside the program must load and answer, GPU or not. */
static void test_module_loads(void)
{
#ifdef TR_HAVE_CUDA
    const char *path = getenv("TENSORRUN_CUDA_MODULE");
    void *h;
    tr_cuda_module_get_fn get;
    const struct tr_cuda_module *m;
    char err[256] = "";
    int n;

    if (!path) {
        skip("TENSORRUN_CUDA_MODULE is not set");
        return;
    }
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ok(h != NULL, "module: %s loads (%s)", path, h ? "ok" : dlerror());
    if (!h)
        return;
    get = (tr_cuda_module_get_fn)(uintptr_t)dlsym(h, TR_CUDA_MODULE_SYMBOL);
    ok(get != NULL, "module: exports %s", TR_CUDA_MODULE_SYMBOL);
    m = get ? get(TR_CUDA_MODULE_ABI) : NULL;
    ok(m && m->abi == TR_CUDA_MODULE_ABI && m->malloc && m->host_alloc && m->copy_strided &&
           m->mark && m->mark_done && m->mark_wait && m->synchronize,
       "module: gives its table for this ABI");
    ok(get && get(TR_CUDA_MODULE_ABI + 1) == NULL, "module: refuses another ABI");
    n = m ? m->device_count(err, sizeof err) : -2;
    ok(n >= 0 || err[0] != '\0', "module: counts devices (%d) or says why not (%s)", n, err);
    /* the CUDA runtime keeps threads and state: leave it loaded */
#else
    skip("built without CUDA");
#endif
}

static void test_without_gpu(void)
{
    int64_t shape[1] = {4};
    struct tr_tensor *t = tr_zeros(TR_DTYPE_F32, 1, shape, TR_CPU);
    struct tr_memory_stats s;
    const char *reason = tr_cuda_unavailable_reason();

    ok(reason[0] != '\0', "no GPU: the reason is given: %s", reason);
    ok(!tr_device_available(TR_CUDA(0)), "no GPU: cuda:0 is not available");
    ok(tr_to(t, TR_CUDA(0)) == NULL && tr_last_status() == TR_ERR_DEVICE,
       "no GPU: tr_to cuda:0 fails: %s", tr_last_error());
    ok(strstr(tr_last_error(), reason) != NULL, "no GPU: the error says why");
    ok(tr_zeros(TR_DTYPE_F32, 1, shape, TR_CUDA(0)) == NULL && tr_last_status() == TR_ERR_DEVICE,
       "no GPU: no CUDA tensors");
    is_int(tr_memory_stats(TR_CUDA(0), &s), TR_ERR_DEVICE, "no GPU: no CUDA pool");
    is_int(tr_release_cached(TR_CUDA(0)), 0, "no GPU: nothing to release");
    tr_release(t);
}

static void test_with_gpu(int count)
{
    float host[4 * 6], back[4 * 6], want[3 * 4];
    int64_t shape[2] = {4, 6}, col_shape[2];
    struct tr_tensor *t, *dev, *rows, *view, *compact, *home, *zeros;
    struct tr_memory_stats s;
    double v;

    diag("%d CUDA device%s", count, count == 1 ? "" : "s");
    for (int i = 0; i < 24; i++)
        host[i] = (float)i * 0.5f;
    t = tr_from_data(host, TR_DTYPE_F32, 2, shape, TR_CPU);
    dev = tr_to(t, TR_CUDA(0));
    ok(dev && tr_tensor_device(dev).kind == TR_DEV_CUDA, "gpu: a tensor moved to cuda:0");
    ok(tr_memory_stats(TR_CUDA(0), &s) == TR_OK && s.active_bytes == 512,
       "gpu: the CUDA pool accounts its 96 bytes as one 512-byte block");
    home = tr_to(dev, TR_CPU);
    ok(home && tr_copy_to_host(home, back, sizeof back) == TR_OK &&
           memcmp(back, host, sizeof host) == 0,
       "gpu: and back, bit for bit");
    tr_release(home);

    /* a strided view on the device: rows 1..3, every other column, reversed */
    rows = tr_slice(dev, 0, 1, 4, 1);
    view = tr_slice(rows, 1, TR_SLICE_NONE, TR_SLICE_NONE, -2);
    col_shape[0] = 3;
    col_shape[1] = 3;
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++)
            want[r * 3 + c] = host[(r + 1) * 6 + (5 - 2 * c)];
    ok(view && tr_copy_to_host(view, back, sizeof back) == TR_OK &&
           memcmp(back, want, 9 * sizeof(float)) == 0,
       "gpu: a strided device view comes back gathered");
    compact = tr_contiguous(view);
    ok(compact && tr_tensor_device(compact).kind == TR_DEV_CUDA &&
           tr_copy_to_host(compact, back, sizeof back) == TR_OK &&
           memcmp(back, want, 9 * sizeof(float)) == 0,
       "gpu: tr_contiguous gathers on the device");
    ok(tr_tensor_item(view, (int64_t[]){2, 0}, &v) == TR_OK && v == host[3 * 6 + 5],
       "gpu: one element read from the device");
    zeros = tr_zeros(TR_DTYPE_F64, 2, col_shape, TR_CUDA(0));
    ok(zeros && tr_tensor_item(zeros, (int64_t[]){2, 2}, &v) == TR_OK && v == 0,
       "gpu: zeros on the device");
    tr_release(zeros);
    tr_release(compact);
    tr_release(view);
    tr_release(rows);
    tr_release(dev);
    ok(tr_to(t, TR_CUDA(count)) == NULL && tr_last_status() == TR_ERR_DEVICE,
       "gpu: a device index past the last is refused: %s", tr_last_error());
    tr_release(t);
    ok(tr_memory_stats(TR_CUDA(0), &s) == TR_OK && s.active_bytes == 0 &&
           tr_release_cached(TR_CUDA(0)) == s.cached_bytes,
       "gpu: every block returned, and the cache released");
}

/* The stream: staged uploads through pinned buffers, deferred frees, and
 * the copies' order, on a real device. */
static void test_gpu_stream(void)
{
    int64_t n = (21 << 20) / 4 + 3, wide[2] = {4096, 1024};
    float *v = malloc((size_t)n * sizeof *v), *back = malloc((size_t)n * sizeof *back);
    struct tr_blob blob = {.data = v, .nbytes = (uint64_t)n * sizeof *v};
    struct tr_tensor *t, *d, *x, *xt, *want;
    struct tr_memory_stats c0, s;

    if (!v || !back) {
        ok(false, "gpu: memory for the stream tests");
        free(v);
        free(back);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)i;
    t = tr_from_blob(&blob, TR_DTYPE_F32, 1, &n, NULL, TR_CPU);
    tr_memory_stats(TR_CPU, &c0);
    d = tr_to(t, TR_CUDA(0));
    tr_memory_stats(TR_CPU, &s);
    ok(d && s.alloc_count == c0.alloc_count,
       "gpu: 21 MiB of borrowed memory goes up through the pinned ring, nothing of the CPU "
       "pool");
    ok(d && tr_copy_to_host(d, back, (size_t)n * sizeof *back) == TR_OK &&
           memcmp(back, v, (size_t)n * sizeof *v) == 0,
       "gpu: every chunk's bits, though two buffers took turns");
    tr_release(d);
    x = tr_from_blob(&blob, TR_DTYPE_F32, 2, wide, NULL, TR_CPU);
    xt = x ? tr_transpose(x, 0, 1) : NULL;
    want = xt ? tr_contiguous(xt) : NULL;
    d = xt ? tr_to(xt, TR_CUDA(0)) : NULL;
    ok(d && tr_copy_to_host(d, back, 16 << 20) == TR_OK &&
           memcmp(back, tr_tensor_data(want), 16 << 20) == 0,
       "gpu: a transposed view goes up gathered, in order");
    tr_release(d);
    tr_release(want);
    tr_release(xt);
    tr_release(x);
    /* many uploads and frees in a row: each block reused only once the
     * copy into it is done, so every one comes back as it went */
    bool same = true;
    for (int round = 0; round < 40 && same; round++) {
        for (int64_t i = 0; i < 1024; i++)
            v[i] = (float)(round * 1024 + i);
        int64_t k = 1024;
        struct tr_tensor *small = tr_from_data(v, TR_DTYPE_F32, 1, &k, TR_CPU);
        struct tr_tensor *up = small ? tr_to(small, TR_CUDA(0)) : NULL;
        same = up && tr_copy_to_host(up, back, 4096) == TR_OK && memcmp(back, v, 4096) == 0;
        tr_release(up);
        tr_release(small);
    }
    ok(same, "gpu: forty uploads into reused blocks, each one's bits");
    tr_release(t);
    ok(tr_memory_stats(TR_CUDA(0), &s) == TR_OK && s.active_bytes == 0 &&
           tr_release_cached(TR_CUDA(0)) == s.cached_bytes &&
           tr_memory_stats(TR_CUDA(0), &s) == TR_OK && s.pending_bytes == 0,
       "gpu: nothing pending once the work is done, the cache released");
    free(v);
    free(back);
}

int main(void)
{
    int count;

    test_names();
    test_module_loads();
    count = tr_cuda_device_count();
    ok(count >= 0, "tr_cuda_device_count answers (%d)", count);
    if (count == 0) {
        test_without_gpu();
        skip("GPU transfers: no CUDA device (%s)", tr_cuda_unavailable_reason());
    } else {
        test_with_gpu(count);
        test_gpu_stream();
    }
    return done_testing();
}
