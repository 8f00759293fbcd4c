/*
 * backend_cuda.c - CUDA devices as a backend, through the CUDA module
 * (tensorrun-cuda.so, cuda/cuda_module.h) loaded on demand.
 *
 * The program never links the CUDA runtime: the first question about CUDA
 * asks the driver (libcuda.so.1, opened with dlopen) whether a device
 * exists, and only then loads tensorrun-cuda.so, from $TENSORRUN_CUDA_MODULE,
 * else beside the executable, else from the installed package directory.
 *
 * The pool's segments come from the module's malloc; copies are the
 * module's, queued on the device's stream, and an event is one of the
 * module's marks (cuda_module.h), so the pool defers a free until the work
 * before it is done.  Uploads from pageable memory go through pinned
 * staging buffers (staging.c), kept for the rest of the run once made:
 * cudaHostAlloc is slow.  The kernels are backend_cuda_kernels.c's, on the
 * module's map; supports() says what the cuda column of ops.def says,
 * whether a device is present or not.
 */
#include "backend_cuda_impl.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


#ifndef TR_PKGLIBDIR
#error "TR_PKGLIBDIR (where the CUDA module is installed) must be defined; the Makefile does"
#endif

#define MODULE_NAME "tensorrun-cuda.so"

_Static_assert(TR_CUDA_MAX_NDIM == TR_MAX_DIMS, "the CUDA module takes every tensor rank");

static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static const struct tr_cuda_module *cuda_module;
static int cuda_count;
static char cuda_reason[512];

#ifdef TR_HAVE_CUDA
/* Whether the driver sees a device, asked without any CUDA library linked. */
static bool driver_has_device(void)
{
    typedef int (*cu_init_fn)(unsigned);
    typedef int (*cu_count_fn)(int *);
    void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    cu_init_fn cu_init;
    cu_count_fn cu_count;
    int rc, n = 0;

    if (!driver) {
        snprintf(cuda_reason, sizeof cuda_reason,
                 "no NVIDIA driver is installed (libcuda.so.1 not found)");
        return false;
    }
    cu_init = (cu_init_fn)(uintptr_t)dlsym(driver, "cuInit");
    cu_count = (cu_count_fn)(uintptr_t)dlsym(driver, "cuDeviceGetCount");
    if (!cu_init || !cu_count) {
        snprintf(cuda_reason, sizeof cuda_reason, "libcuda.so.1 lacks cuInit");
        dlclose(driver);
        return false;
    }
    rc = cu_init(0);
    if (rc == 0)
        rc = cu_count(&n);
    if (rc != 0)
        snprintf(cuda_reason, sizeof cuda_reason,
                 "the NVIDIA driver found no usable device (CUDA driver error %d)", rc);
    else if (n == 0)
        snprintf(cuda_reason, sizeof cuda_reason, "the NVIDIA driver found no device");
    /* the driver stays loaded: the runtime in the module opens it again */
    return rc == 0 && n > 0;
}

static void *open_module_at(const char *path, char *errors, size_t size)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    size_t used = strlen(errors);

    if (!h && used < size)
        snprintf(errors + used, size - used, "%s%s", used ? "; " : "", dlerror());
    return h;
}

static void *open_module(void)
{
    char errors[sizeof cuda_reason / 2] = "";
    const char *env = getenv("TENSORRUN_CUDA_MODULE");
    char exe[PATH_MAX], path[PATH_MAX + sizeof MODULE_NAME];
    ssize_t n;
    void *h = NULL;

    if (env && *env) {
        h = open_module_at(env, errors, sizeof errors);
    } else {
        n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n > 0) {
            exe[n] = '\0';
            char *slash = strrchr(exe, '/');
            if (slash) {
                *slash = '\0';
                snprintf(path, sizeof path, "%s/%s", exe, MODULE_NAME);
                h = open_module_at(path, errors, sizeof errors);
            }
        }
        if (!h)
            h = open_module_at(TR_PKGLIBDIR "/" MODULE_NAME, errors, sizeof errors);
    }
    if (!h)
        snprintf(cuda_reason, sizeof cuda_reason, "the CUDA module could not be loaded: %s",
                 errors);
    return h;
}

static void detect_cuda(void)
{
    tr_cuda_module_get_fn get;
    const struct tr_cuda_module *m;
    void *h;
    int n;

    if (!driver_has_device())
        return;
    h = open_module();
    if (!h)
        return;
    get = (tr_cuda_module_get_fn)(uintptr_t)dlsym(h, TR_CUDA_MODULE_SYMBOL);
    m = get ? get(TR_CUDA_MODULE_ABI) : NULL;
    if (!m) {
        snprintf(cuda_reason, sizeof cuda_reason,
                 "the CUDA module is from another version of tensorrun");
        dlclose(h);
        return;
    }
    /* from here on the module stays loaded whatever happens: the CUDA
     * runtime inside it may have started threads and exit handlers */
    n = m->device_count(cuda_reason, sizeof cuda_reason);
    if (n <= 0) {
        if (n == 0)
            snprintf(cuda_reason, sizeof cuda_reason, "the CUDA runtime found no device");
        return;
    }
    cuda_module = m;
    cuda_count = n > TR__MAX_DEVICE_INDEX ? TR__MAX_DEVICE_INDEX : n;
}
#else
static void detect_cuda(void)
{
    snprintf(cuda_reason, sizeof cuda_reason,
             "this tensorrun was built without CUDA support");
}
#endif

int tr_cuda_device_count(void)
{
    pthread_once(&cuda_once, detect_cuda);
    return cuda_count;
}

const char *tr_cuda_unavailable_reason(void)
{
    pthread_once(&cuda_once, detect_cuda);
    return cuda_count > 0 ? "" : cuda_reason;
}

static int cuda_backend_count(void)
{
    return tr_cuda_device_count();
}

/* ------------------------------------------------------------ the backend */

/* The pool backend's ctx is the device index itself. */
static void *cuda_raw_alloc(void *ctx, uint64_t bytes)
{
    return cuda_module->malloc((int)(intptr_t)ctx, bytes);
}

static void cuda_raw_free(void *ctx, void *ptr, uint64_t bytes)
{
    (void)bytes;
    cuda_module->free((int)(intptr_t)ctx, ptr);
}

static uint64_t cuda_stream_mark(void *ctx)
{
    return cuda_module->mark((int)(intptr_t)ctx);
}

/* A device that cannot answer has failed: what it would still read is
 * lost with it, so its blocks are taken as free. */
static bool cuda_stream_done(void *ctx, uint64_t mark)
{
    char err[256];

    return cuda_module->mark_done((int)(intptr_t)ctx, mark, err, sizeof err) != 0;
}

static void cuda_stream_wait(void *ctx, uint64_t mark)
{
    char err[256];

    cuda_module->mark_wait((int)(intptr_t)ctx, mark, err, sizeof err);
}

static void cuda_pool_backend(int index, struct tr__pool_backend *out)
{
    *out = (struct tr__pool_backend){.raw_alloc = cuda_raw_alloc,
                                     .raw_free = cuda_raw_free,
                                     .ctx = (void *)(intptr_t)index,
                                     .stream_mark = cuda_stream_mark,
                                     .stream_done = cuda_stream_done,
                                     .stream_wait = cuda_stream_wait};
}

/* ----------------------------------------------------- staging buffers */

/* Pinned buffers of TR__STAGING_BYTES given back, kept for the next
 * upload: enough for two rings at once. */
#define KEPT_STAGING (2 * TR__STAGING_SLOTS)

static pthread_mutex_t staging_lock = PTHREAD_MUTEX_INITIALIZER;
static void *kept_staging[KEPT_STAGING];
static int nkept_staging;

static void *cuda_staging_alloc(int index, uint64_t bytes)
{
    void *p = NULL;

    (void)index; /* pinned memory is the host's, for every device */
    pthread_mutex_lock(&staging_lock);
    if (bytes == TR__STAGING_BYTES && nkept_staging > 0)
        p = kept_staging[--nkept_staging];
    pthread_mutex_unlock(&staging_lock);
    return p ? p : cuda_module->host_alloc(bytes);
}

static void cuda_staging_free(int index, void *ptr, uint64_t bytes)
{
    bool kept = false;

    (void)index;
    pthread_mutex_lock(&staging_lock);
    if (bytes == TR__STAGING_BYTES && nkept_staging < KEPT_STAGING) {
        kept_staging[nkept_staging++] = ptr;
        kept = true;
    }
    pthread_mutex_unlock(&staging_lock);
    if (!kept)
        cuda_module->host_free(ptr);
}

static tr_status cuda_failed(const char *fn, int index, const char *why)
{
    return tr__set_error(TR_ERR_DEVICE, "%s: cuda:%d: %s", fn, index, why);
}

static tr_status cuda_copy(int index, void *dst, const void *src, uint64_t bytes,
                           enum tr_cuda_copy_kind kind, const char *fn)
{
    char err[256];

    if (cuda_module->memcpy(index, dst, src, bytes, kind, err, sizeof err) != 0)
        return cuda_failed(fn, index, err);
    return TR_OK;
}

static tr_status cuda_upload(int index, void *dst, const void *src, uint64_t bytes,
                             const char *fn)
{
    return cuda_copy(index, dst, src, bytes, TR_CUDA_HOST_TO_DEVICE, fn);
}

static tr_status cuda_download(int index, void *dst, const void *src, uint64_t bytes,
                               const char *fn)
{
    return cuda_copy(index, dst, src, bytes, TR_CUDA_DEVICE_TO_HOST, fn);
}

static tr_status cuda_fill_zero(int index, void *dst, uint64_t bytes, const char *fn)
{
    char err[256];

    if (cuda_module->memset(index, dst, 0, bytes, err, sizeof err) != 0)
        return cuda_failed(fn, index, err);
    return TR_OK;
}

static tr_status cuda_gather(int index, void *dst, const void *src, size_t item, int ndim,
                             const int64_t *shape, const int64_t *strides, const char *fn)
{
    char err[256];

    if (cuda_module->copy_strided(index, dst, src, item, ndim, shape, strides, err,
                                  sizeof err) != 0)
        return cuda_failed(fn, index, err);
    return TR_OK;
}

tr_status tr__cuda_map(int index, const struct tr_cuda_map *m, const char *fn)
{
    char err[256];

    if (cuda_module->map(index, m, err, sizeof err) != 0)
        return cuda_failed(fn, index, err);
    return TR_OK;
}

tr_status tr__cuda_matmul(int index, const struct tr_cuda_matmul *p, const char *fn)
{
    char err[256];

    if (cuda_module->matmul(index, p, err, sizeof err) != 0)
        return cuda_failed(fn, index, err);
    return TR_OK;
}

tr_status tr__cuda_topk(int index, const struct tr_cuda_topk *t, const char *fn)
{
    char err[256];

    if (cuda_module->topk(index, t, err, sizeof err) != 0)
        return cuda_failed(fn, index, err);
    return TR_OK;
}

tr_status tr__cuda_gather(int index, const struct tr_cuda_gather *g, const char *fn)
{
    char err[256];

    if (cuda_module->gather(index, g, err, sizeof err) != 0)
        return cuda_failed(fn, index, err);
    return TR_OK;
}

tr_status tr__cuda_rowwise(int index, const struct tr_cuda_rowwise *w, const char *fn)
{
    char err[256];

    if (cuda_module->rowwise(index, w, err, sizeof err) != 0)
        return cuda_failed(fn, index, err);
    return TR_OK;
}

tr_status tr__cuda_reduce(int index, const struct tr_cuda_reduce *r, const char *fn)
{
    char err[256];

    if (cuda_module->reduce(index, r, err, sizeof err) != 0)
        return cuda_failed(fn, index, err);
    return TR_OK;
}

tr_status tr__cuda_random(int index, void *dst, enum tr_dtype dtype, bool normal, uint64_t seed,
                          uint64_t n, const char *fn)
{
    char err[256];

    if (cuda_module->random(index, dst, dtype, normal, seed, n, err, sizeof err) != 0)
        return cuda_failed(fn, index, err);
    return TR_OK;
}

/* tr_copy_into on the device: the module's map of no function. */
static tr_status cuda_convert(int index, void *dst, const int64_t *dst_strides, enum tr_dtype to,
                              const void *src, const int64_t *src_strides, enum tr_dtype from,
                              int ndim, const int64_t *shape, const char *fn)
{
    struct tr_cuda_map m = {.code = TR__EW_NONE, .nin = 1, .ndim = ndim, .out = dst,
                            .out_dtype = to, .in_compute = to, .out_compute = to};

    m.in[0].data = src;
    m.in[0].dtype = from;
    for (int d = 0; d < ndim; d++) {
        m.shape[d] = shape[d];
        m.out_strides[d] = dst_strides[d];
        m.in[0].strides[d] = src_strides[d];
    }
    return tr__cuda_map(index, &m, fn);
}

/* What the cuda column of ops.def says, known in every build: the module
 * is checked against it on a GPU (tests/cuda). */
static bool cuda_supports(const struct tr__backend *self, enum tr_op_id id,
                          const enum tr_dtype *dtypes, int n)
{
    const struct tr__op *op = tr__op_of(tr_op_get(id));

    (void)self;
    if (op->cuda == TR__TAKES_NONE)
        return false;
    for (int i = 0; i < n; i++)
        if (!tr__takes(op->cuda, dtypes[i]))
            return false;
    return true;
}

static tr_status cuda_synchronize(int index, const char *fn)
{
    char err[256];

    if (cuda_module->synchronize(index, err, sizeof err) != 0)
        return cuda_failed(fn, index, err);
    return TR_OK;
}

/* An event is a mark of the module's (0: none could be made, and the
 * stream was waited for instead). */
static void cuda_event_record(int index, struct tr__event *event)
{
    *event = (struct tr__event){.device = TR_CUDA(index), .seq = cuda_module->mark(index)};
}

static tr_status cuda_event_query(struct tr__event *event, bool *done, const char *fn)
{
    char err[256];
    int rc = cuda_module->mark_done(event->device.index, event->seq, err, sizeof err);

    if (rc < 0)
        return cuda_failed(fn, event->device.index, err);
    *done = rc == 1;
    return TR_OK;
}

static tr_status cuda_event_wait(struct tr__event *event, const char *fn)
{
    char err[256];

    if (cuda_module->mark_wait(event->device.index, event->seq, err, sizeof err) != 0)
        return cuda_failed(fn, event->device.index, err);
    return TR_OK;
}

void tr__backend_cuda_init(struct tr__backend *b)
{
    *b = (struct tr__backend){
        .name = "cuda",
        .host_memory = false,
        .device_count = cuda_backend_count,
        .unavailable_reason = tr_cuda_unavailable_reason,
        .pool_backend = cuda_pool_backend,
        .upload = cuda_upload,
        .download = cuda_download,
        .fill_zero = cuda_fill_zero,
        .gather = cuda_gather,
        .convert = cuda_convert,
        .staging_alloc = cuda_staging_alloc,
        .staging_free = cuda_staging_free,
        .supports = cuda_supports,
        .synchronize = cuda_synchronize,
        .event_record = cuda_event_record,
        .event_query = cuda_event_query,
        .event_wait = cuda_event_wait,
    };
    tr__cuda_kernels_init(b);
}
