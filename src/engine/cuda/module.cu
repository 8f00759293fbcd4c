/*
 * module.cu - tensorrun-cuda.so: the CUDA side of the engine, loaded with
 * dlopen only when a stage may run on a GPU.  It fills in the function table
 * of cuda_module.h; nothing else of it is visible to the engine.
 *
 * Each device has one stream, made at its first use, that every copy, fill
 * and kernel of the module goes on (the kernels are in files of their own,
 * module_impl.h), and a ring of events for its marks:
 * mark n is the n-th event recorded on the stream.  Events complete in
 * the stream's order, so the marks done so far are a prefix: `completed`
 * is the last of them, and the ring holds the ones after it.
 */
#include <cuda_runtime.h>

#include <pthread.h>
#include <stdio.h>

#include "../tensorrun.h" /* enum tr_dtype */
#include "module_impl.h"

namespace {

int fail(cudaError_t rc, const char *what, char *err, size_t errsize)
{
    snprintf(err, errsize, "%s failed: %s", what, cudaGetErrorString(rc));
    cudaGetLastError(); /* clear the sticky-free error state */
    return -1;
}

int device_count(char *err, size_t errsize)
{
    int n = 0;
    cudaError_t rc = cudaGetDeviceCount(&n);

    if (rc == cudaErrorNoDevice)
        return 0;
    if (rc != cudaSuccess)
        return fail(rc, "cudaGetDeviceCount", err, errsize);
    return n;
}

constexpr int MAX_DEVICES = 64; /* the engine's TR__MAX_DEVICE_INDEX */
constexpr int RING = 256;       /* marks not known done, at most */

struct device_state {
    pthread_mutex_t lock;
    cudaStream_t stream;
    bool ready;
    cudaEvent_t events[RING];    /* events[(first + i) % RING]: mark completed + 1 + i */
    int first, count, made;      /* made: events created so far */
    uint64_t completed;          /* the last mark known done */
};

device_state devices[MAX_DEVICES] = {};
pthread_once_t devices_once = PTHREAD_ONCE_INIT;

void init_devices()
{
    for (auto &d : devices)
        pthread_mutex_init(&d.lock, nullptr);
}

/* Device's state with its stream made and current (d locked by the
 * caller), or nullptr. */
device_state *ready(int device, cudaError_t *rc)
{
    device_state *d;

    *rc = cudaErrorInvalidDevice;
    if (device < 0 || device >= MAX_DEVICES)
        return nullptr;
    d = &devices[device];
    *rc = cudaSetDevice(device);
    if (*rc == cudaSuccess && !d->ready) {
        *rc = cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking);
        d->ready = *rc == cudaSuccess;
    }
    return *rc == cudaSuccess ? d : nullptr;
}

/* Locks device's state and makes it ready; nullptr (unlocked) on an
 * error, written into err. */
device_state *take(int device, const char *what, char *err, size_t errsize)
{
    cudaError_t rc;
    device_state *d;

    pthread_once(&devices_once, init_devices);
    if (device < 0 || device >= MAX_DEVICES) {
        snprintf(err, errsize, "%s: no device %d", what, device);
        return nullptr;
    }
    pthread_mutex_lock(&devices[device].lock);
    d = ready(device, &rc);
    if (!d) {
        pthread_mutex_unlock(&devices[device].lock);
        fail(rc, what, err, errsize);
    }
    return d;
}

void give(device_state *d)
{
    pthread_mutex_unlock(&d->lock);
}

void *device_malloc(int device, uint64_t bytes)
{
    void *p = nullptr;

    if (cudaSetDevice(device) != cudaSuccess || cudaMalloc(&p, bytes) != cudaSuccess) {
        cudaGetLastError();
        return nullptr;
    }
    return p;
}

/* cudaFree waits for the device first: the pool frees a segment only once
 * the work on its blocks is done anyway. */
void device_free(int device, void *ptr)
{
    if (cudaSetDevice(device) == cudaSuccess)
        cudaFree(ptr);
}

void *host_alloc(uint64_t bytes)
{
    void *p = nullptr;

    if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) != cudaSuccess) {
        cudaGetLastError();
        return nullptr;
    }
    return p;
}

void host_free(void *ptr)
{
    cudaFreeHost(ptr);
}

int device_memcpy(int device, void *dst, const void *src, uint64_t bytes,
                  enum tr_cuda_copy_kind kind, char *err, size_t errsize)
{
    static const cudaMemcpyKind kinds[] = {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                                           cudaMemcpyDeviceToDevice};
    device_state *d = take(device, "cudaMemcpyAsync", err, errsize);
    cudaError_t rc;

    if (!d)
        return -1;
    rc = cudaMemcpyAsync(dst, src, bytes, kinds[kind], d->stream);
    give(d);
    return rc == cudaSuccess ? 0 : fail(rc, "cudaMemcpyAsync", err, errsize);
}

int device_memset(int device, void *dst, int value, uint64_t bytes, char *err, size_t errsize)
{
    device_state *d = take(device, "cudaMemsetAsync", err, errsize);
    cudaError_t rc;

    if (!d)
        return -1;
    rc = cudaMemsetAsync(dst, value, bytes, d->stream);
    give(d);
    return rc == cudaSuccess ? 0 : fail(rc, "cudaMemsetAsync", err, errsize);
}

/* The oldest mark of the ring is done: dropped from it (d locked). */
void pop_done(device_state *d)
{
    d->first = (d->first + 1) % RING;
    d->count--;
    d->completed++;
}

/* Waits for the oldest mark of the ring (d locked). */
cudaError_t wait_oldest(device_state *d)
{
    cudaError_t rc = cudaEventSynchronize(d->events[d->first]);

    if (rc == cudaSuccess)
        pop_done(d);
    return rc;
}

uint64_t device_mark(int device)
{
    char err[256];
    device_state *d = take(device, "cudaEventRecord", err, sizeof err);
    cudaError_t rc = cudaSuccess;
    uint64_t mark = 0;
    int slot;

    if (!d) {
        /* the device cannot be reached: wait for all of it, as promised */
        if (cudaSetDevice(device) == cudaSuccess)
            cudaDeviceSynchronize();
        cudaGetLastError();
        return 0;
    }
    if (d->count == 0 && cudaStreamQuery(d->stream) == cudaSuccess) {
        /* an idle stream: what was issued is done already */
        mark = d->completed;
        give(d);
        return mark;
    }
    cudaGetLastError(); /* cudaErrorNotReady */
    if (d->count == RING)
        rc = wait_oldest(d);
    slot = (d->first + d->count) % RING;
    if (rc == cudaSuccess && slot >= d->made) {
        rc = cudaEventCreateWithFlags(&d->events[slot], cudaEventDisableTiming);
        d->made += rc == cudaSuccess;
    }
    if (rc == cudaSuccess)
        rc = cudaEventRecord(d->events[slot], d->stream);
    if (rc == cudaSuccess) {
        d->count++;
        mark = d->completed + (uint64_t)d->count;
    } else {
        /* no event: everything issued is waited for, and the marks so far
         * are done with it */
        cudaGetLastError();
        if (cudaStreamSynchronize(d->stream) != cudaSuccess)
            cudaDeviceSynchronize();
        cudaGetLastError();
        d->completed += (uint64_t)d->count;
        d->first = (d->first + d->count) % RING;
        d->count = 0;
    }
    give(d);
    return mark;
}

int device_mark_done(int device, uint64_t mark, char *err, size_t errsize)
{
    device_state *d = take(device, "cudaEventQuery", err, errsize);
    cudaError_t rc = cudaSuccess;
    int done;

    if (!d)
        return -1;
    while (d->completed < mark && d->count > 0 &&
           (rc = cudaEventQuery(d->events[d->first])) == cudaSuccess)
        pop_done(d);
    done = d->completed >= mark || d->count == 0;
    give(d);
    if (rc != cudaSuccess && rc != cudaErrorNotReady)
        return fail(rc, "cudaEventQuery", err, errsize);
    if (rc == cudaErrorNotReady)
        cudaGetLastError();
    return done ? 1 : 0;
}

/* Mark m's event (d locked, m not done): the ring's slot for it. */
cudaEvent_t event_of(const device_state *d, uint64_t m)
{
    return d->events[(d->first + (int)(m - d->completed - 1)) % RING];
}

/* Marks up to m are done: dropped from the ring (d locked). */
void done_up_to(device_state *d, uint64_t m)
{
    while (d->completed < m && d->count > 0)
        pop_done(d);
}

/* The wait itself holds no lock, so that other threads go on queueing
 * work and querying marks meanwhile; should the slot be recorded again
 * by then, the wait is for later work, which is done after m's. */
int device_mark_wait(int device, uint64_t mark, char *err, size_t errsize)
{
    device_state *d = take(device, "cudaEventSynchronize", err, errsize);
    cudaError_t rc;
    cudaEvent_t ev;

    if (!d)
        return -1;
    if (d->completed >= mark || mark > d->completed + (uint64_t)d->count) {
        give(d);
        return 0;
    }
    ev = event_of(d, mark);
    give(d);
    rc = cudaEventSynchronize(ev);
    if (rc != cudaSuccess)
        return fail(rc, "cudaEventSynchronize", err, errsize);
    d = take(device, "cudaEventSynchronize", err, errsize);
    if (!d)
        return -1;
    done_up_to(d, mark);
    give(d);
    return 0;
}

struct strided_layout {
    int ndim;
    int64_t shape[TR_CUDA_MAX_NDIM];
    int64_t strides[TR_CUDA_MAX_NDIM]; /* bytes */
};

/* One thread per output element: dst is compact, src is read through the
 * layout's byte strides. */
template <typename T>
__global__ void gather_kernel(T *dst, const char *src, int64_t n, strided_layout layout)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t rest = i, offset = 0;
        for (int d = layout.ndim - 1; d >= 0; d--) {
            offset += rest % layout.shape[d] * layout.strides[d];
            rest /= layout.shape[d];
        }
        dst[i] = *(const T *)(src + offset);
    }
}

template <typename T>
void launch_gather(void *dst, const void *src, int64_t n, const strided_layout &layout,
                   cudaStream_t stream)
{
    gather_kernel<T><<<tr__cuda_grid(n, 256), 256, 0, stream>>>((T *)dst, (const char *)src, n,
                                                                layout);
}

int copy_strided(int device, void *dst, const void *src, uint64_t itemsize, int ndim,
                 const int64_t *shape, const int64_t *strides, char *err, size_t errsize)
{
    strided_layout layout = {};
    int64_t n = 1;
    device_state *d;
    cudaError_t rc;

    if (ndim < 0 || ndim > TR_CUDA_MAX_NDIM) {
        snprintf(err, errsize, "copy_strided: %d dimensions", ndim);
        return -1;
    }
    layout.ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        layout.shape[d] = shape[d];
        layout.strides[d] = strides[d];
        n *= shape[d];
    }
    if (n == 0)
        return 0;
    d = take(device, "the strided copy kernel", err, errsize);
    if (!d)
        return -1;
    cudaGetLastError(); /* so that what follows the launch is its own error */
    switch (itemsize) {
    case 1: launch_gather<uint8_t>(dst, src, n, layout, d->stream); break;
    case 2: launch_gather<uint16_t>(dst, src, n, layout, d->stream); break;
    case 4: launch_gather<uint32_t>(dst, src, n, layout, d->stream); break;
    case 8: launch_gather<uint64_t>(dst, src, n, layout, d->stream); break;
    default:
        give(d);
        snprintf(err, errsize, "copy_strided: item size %llu", (unsigned long long)itemsize);
        return -1;
    }
    rc = cudaGetLastError();
    give(d);
    return rc == cudaSuccess ? 0 : fail(rc, "the strided copy kernel", err, errsize);
}

int map(int device, const tr_cuda_map *m, char *err, size_t errsize)
{
    device_state *d;
    cudaError_t rc;

    if (m->ndim < 0 || m->ndim > TR_CUDA_MAX_NDIM || m->nin < 1 || m->nin > TR_CUDA_MAX_OPERANDS) {
        snprintf(err, errsize, "map: %d dimensions, %d operands", m->ndim, m->nin);
        return -1;
    }
    d = take(device, "the elementwise kernel", err, errsize);
    if (!d)
        return -1;
    rc = tr__cuda_launch_map(m, d->stream);
    give(d);
    return rc == cudaSuccess ? 0 : fail(rc, "the elementwise kernel", err, errsize);
}

int matmul(int device, const tr_cuda_matmul *p, char *err, size_t errsize)
{
    device_state *d = take(device, "the product", err, errsize);
    int rc;

    if (!d)
        return -1;
    rc = tr__cuda_launch_matmul(device, p, d->stream, err, errsize);
    give(d);
    return rc;
}

int topk(int device, const tr_cuda_topk *t, char *err, size_t errsize)
{
    device_state *d;
    cudaError_t rc;

    if (t->nother < 0 || t->nother > TR_CUDA_MAX_NDIM || t->k < 0 || t->k > t->len) {
        snprintf(err, errsize, "topk: %d dimensions, k %lld of %lld", t->nother,
                 (long long)t->k, (long long)t->len);
        return -1;
    }
    d = take(device, "the topk kernel", err, errsize);
    if (!d)
        return -1;
    rc = tr__cuda_launch_topk(t, d->stream);
    give(d);
    return rc == cudaSuccess ? 0 : fail(rc, "the topk kernel", err, errsize);
}

int gather(int device, const tr_cuda_gather *g, char *err, size_t errsize)
{
    device_state *d;
    cudaError_t rc;

    if (g->ndim < 0 || g->ndim > TR_CUDA_MAX_NDIM) {
        snprintf(err, errsize, "gather: %d dimensions", g->ndim);
        return -1;
    }
    d = take(device, "the gather kernel", err, errsize);
    if (!d)
        return -1;
    rc = tr__cuda_launch_gather(g, d->stream);
    give(d);
    return rc == cudaSuccess ? 0 : fail(rc, "the gather kernel", err, errsize);
}

int rowwise(int device, const tr_cuda_rowwise *w, char *err, size_t errsize)
{
    device_state *d;
    cudaError_t rc;

    if (w->nother < 0 || w->nother > TR_CUDA_MAX_NDIM) {
        snprintf(err, errsize, "rowwise: %d dimensions", w->nother);
        return -1;
    }
    d = take(device, "the row-wise kernel", err, errsize);
    if (!d)
        return -1;
    rc = tr__cuda_launch_rowwise(w, d->stream);
    give(d);
    return rc == cudaSuccess ? 0 : fail(rc, "the row-wise kernel", err, errsize);
}

int reduce(int device, const tr_cuda_reduce *r, char *err, size_t errsize)
{
    device_state *d;
    cudaError_t rc;

    if (r->nkept < 0 || r->nkept > TR_CUDA_MAX_NDIM || r->nreduced < 0 ||
        r->nreduced > TR_CUDA_MAX_NDIM) {
        snprintf(err, errsize, "reduce: %d and %d dimensions", r->nkept, r->nreduced);
        return -1;
    }
    d = take(device, "the reduction kernel", err, errsize);
    if (!d)
        return -1;
    rc = tr__cuda_launch_reduce(r, d->stream);
    give(d);
    return rc == cudaSuccess ? 0 : fail(rc, "the reduction kernel", err, errsize);
}

int random(int device, void *dst, int dtype, int normal, uint64_t seed, uint64_t n, char *err,
           size_t errsize)
{
    device_state *d;
    cudaError_t rc;

    if (dtype != TR_DTYPE_F32 && dtype != TR_DTYPE_F64 && dtype != TR_DTYPE_F16 &&
        dtype != TR_DTYPE_BF16) {
        snprintf(err, errsize, "random: dtype %d is not a float dtype", dtype);
        return -1;
    }
    d = take(device, "the random number kernel", err, errsize);
    if (!d)
        return -1;
    rc = tr__cuda_launch_random(dst, dtype, normal != 0, seed, n, d->stream);
    give(d);
    return rc == cudaSuccess ? 0 : fail(rc, "the random number kernel", err, errsize);
}

int device_synchronize(int device, char *err, size_t errsize)
{
    device_state *d = take(device, "cudaStreamSynchronize", err, errsize);
    cudaStream_t stream;
    uint64_t last;
    cudaError_t rc;

    if (!d)
        return -1;
    stream = d->stream;
    last = d->completed + (uint64_t)d->count; /* the marks made before the wait */
    give(d);
    rc = cudaStreamSynchronize(stream);
    if (rc != cudaSuccess)
        return fail(rc, "cudaStreamSynchronize", err, errsize);
    d = take(device, "cudaStreamSynchronize", err, errsize);
    if (!d)
        return -1;
    done_up_to(d, last);
    give(d);
    return 0;
}

const tr_cuda_module module_table = {
    TR_CUDA_MODULE_ABI, device_count,     device_malloc,    device_free,
    host_alloc,         host_free,        device_memcpy,    device_memset,
    copy_strided,       map,              matmul,           topk,
    gather,             rowwise,          reduce,           random,
    device_mark,        device_mark_done, device_mark_wait, device_synchronize,
};

} /* namespace */

extern "C" __attribute__((visibility("default"))) const struct tr_cuda_module *
tr_cuda_module_get(int abi)
{
    return abi == TR_CUDA_MODULE_ABI ? &module_table : nullptr;
}
