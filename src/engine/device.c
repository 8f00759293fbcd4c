/*
 * device.c - devices, their pools, and the CUDA module loaded on demand.
 *
 * The program never links the CUDA runtime: the first question about CUDA
 * asks the driver (libcuda.so.1, opened with dlopen) whether a device
 * exists, and only then loads tensorrun-cuda.so, from $TENSORRUN_CUDA_MODULE,
 * else beside the executable, else from the installed package directory.
 */
#include "device_impl.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool_impl.h"

#ifndef TR_PKGLIBDIR
#error "TR_PKGLIBDIR (where the CUDA module is installed) must be defined; the Makefile does"
#endif

#define MAX_CUDA_DEVICES 64
#define MODULE_NAME "tensorrun-cuda.so"

/* ------------------------------------------------------------ names */

tr_status tr_device_parse(const char *text, struct tr_device *out)
{
    const char *digits;
    char *end;
    long index;

    if (text && strcmp(text, "cpu") == 0) {
        *out = TR_CPU;
        return TR_OK;
    }
    if (text && strcmp(text, "cuda") == 0) {
        *out = TR_CUDA(0);
        return TR_OK;
    }
    TR_RETURN_ERROR_IF(!text || strncmp(text, "cuda:", 5) != 0, TR_ERR_INVALID,
                       "unknown device '%s' (expected cpu, cuda or cuda:N)",
                       text ? text : "(null)");
    digits = text + 5;
    errno = 0;
    index = strtol(digits, &end, 10);
    TR_RETURN_ERROR_IF(*digits < '0' || *digits > '9' || *end != '\0' || errno ||
                           index >= MAX_CUDA_DEVICES,
                       TR_ERR_INVALID, "unknown device '%s' (expected cuda:N, N from 0 to %d)",
                       text, MAX_CUDA_DEVICES - 1);
    *out = TR_CUDA((int)index);
    return TR_OK;
}

char *tr_device_format(struct tr_device device, char *buf, size_t size)
{
    if (device.kind == TR_DEV_CPU)
        snprintf(buf, size, "cpu");
    else
        snprintf(buf, size, "cuda:%d", device.index);
    return buf;
}

bool tr_device_equal(struct tr_device a, struct tr_device b)
{
    return a.kind == b.kind && (a.kind == TR_DEV_CPU || a.index == b.index);
}

/* ------------------------------------------------------------ CUDA */

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
    cuda_count = n > MAX_CUDA_DEVICES ? MAX_CUDA_DEVICES : n;
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

const struct tr_cuda_module *tr__cuda(void)
{
    pthread_once(&cuda_once, detect_cuda);
    return cuda_module;
}

bool tr_device_available(struct tr_device device)
{
    if (device.kind == TR_DEV_CPU)
        return true;
    return device.kind == TR_DEV_CUDA && device.index >= 0 &&
           device.index < tr_cuda_device_count();
}

tr_status tr__device_check(struct tr_device device, const char *fn)
{
    char name[TR_DEVICE_NAME_MAX];

    if (tr_device_available(device))
        return TR_OK;
    tr_device_format(device, name, sizeof name);
    if (device.kind != TR_DEV_CUDA || device.index < 0)
        return tr__set_error(TR_ERR_DEVICE, "%s: unknown device", fn);
    if (cuda_count == 0)
        return tr__set_error(TR_ERR_DEVICE, "%s: %s is not available: %s", fn, name,
                             cuda_reason);
    return tr__set_error(TR_ERR_DEVICE, "%s: %s is not available: there %s only %d CUDA device%s",
                         fn, name, cuda_count == 1 ? "is" : "are", cuda_count,
                         cuda_count == 1 ? "" : "s");
}

/* ------------------------------------------------------------ pools */

static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tr__pool *cpu_pool;
static struct tr__pool *cuda_pools[MAX_CUDA_DEVICES];

/* The CUDA backends' ctx is the device index itself. */
static void *cuda_raw_alloc(void *ctx, uint64_t bytes)
{
    return cuda_module->malloc((int)(intptr_t)ctx, bytes);
}

static void cuda_raw_free(void *ctx, void *ptr, uint64_t bytes)
{
    (void)bytes;
    cuda_module->free((int)(intptr_t)ctx, ptr);
}

struct tr__pool *tr__pool_for(struct tr_device device, const char *fn)
{
    struct tr__pool **slot, *pool;
    struct tr__pool_backend backend;

    if (tr__device_check(device, fn) != TR_OK)
        return NULL;
    if (device.kind == TR_DEV_CPU) {
        slot = &cpu_pool;
        backend = tr__cpu_pool_backend;
    } else {
        slot = &cuda_pools[device.index];
        backend = (struct tr__pool_backend){cuda_raw_alloc, cuda_raw_free,
                                            (void *)(intptr_t)device.index};
    }
    pthread_mutex_lock(&pools_lock);
    if (!*slot)
        *slot = tr__pool_create(device, &backend);
    pool = *slot;
    pthread_mutex_unlock(&pools_lock);
    TR_RETURN_NULL_IF(!pool, TR_ERR_OOM, "out of memory creating a device pool");
    return pool;
}

tr_status tr_memory_stats(struct tr_device device, struct tr_memory_stats *out)
{
    struct tr__pool *pool = tr__pool_for(device, "memory_stats");

    if (!pool)
        return tr_last_status();
    tr__pool_stats(pool, out);
    return TR_OK;
}

uint64_t tr_release_cached(struct tr_device device)
{
    struct tr__pool *pool = tr__pool_for(device, "release_cached");

    return pool ? tr__pool_release_cached(pool) : 0;
}

tr_status tr_memory_set_limit(struct tr_device device, uint64_t bytes)
{
    struct tr__pool *pool = tr__pool_for(device, "memory_set_limit");

    if (!pool)
        return tr_last_status();
    tr__pool_set_limit(pool, bytes);
    return TR_OK;
}

uint64_t tr_memory_block_size(uint64_t bytes)
{
    return bytes ? tr__pool_round(bytes) : 0;
}

tr_status tr_memory_reset_peak(struct tr_device device)
{
    struct tr__pool *pool = tr__pool_for(device, "memory_reset_peak");

    if (!pool)
        return tr_last_status();
    tr__pool_reset_peak(pool);
    return TR_OK;
}
