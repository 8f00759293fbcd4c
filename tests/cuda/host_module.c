/*
 * host_module.c - a stand-in for tensorrun-cuda.so that runs on the host,
 * for the tests of machines without a GPU: "device" memory is the host's,
 * every copy and kernel is done when it returns, and the kernels are the
 * module's own element bodies (src/engine/cuda/map_body.h) in a loop.  With
 * fake_driver.c as libcuda.so.1, the whole CUDA backend of the engine runs
 * against it: placement, transfers, the device pool, and each kernel's
 * planning, operands and results (tests/cli/cuda_host.bats).
 *
 * Device memory is a memfd mapped twice: the engine is handed an address
 * that the process cannot touch (PROT_NONE), and the stand-in's copies and
 * kernels work through the other, readable mapping.  So a host read or
 * write of device memory, which on a GPU would read garbage or crash,
 * crashes here too.
 *
 * TR_HOST_CUDA_FAIL_MALLOC=N makes every allocation after the first N fail,
 * as a full device would.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cuda/cuda_module.h"
#include "cuda/map_body.h"
#include "cuda/reduce_body.h"
#include "cuda/rowwise_body.h"
#include "cuda/topk_body.h"
#include "philox_math.h"

static uint64_t marks;
static long mallocs;

/* Each allocation: the address the engine has, and the one that works. */
struct region {
    char *device, *host;
    uint64_t bytes;
};

#define MAX_REGIONS 4096
static struct region regions[MAX_REGIONS];
static int nregions;
static pthread_mutex_t regions_lock = PTHREAD_MUTEX_INITIALIZER;

/* The readable address of device address p (p itself when it is the
 * host's). */
static void *H(const void *p)
{
    const char *c = p;
    void *out = (void *)(uintptr_t)p;

    pthread_mutex_lock(&regions_lock);
    for (int i = 0; c && i < nregions; i++)
        if (c >= regions[i].device && c < regions[i].device + regions[i].bytes) {
            out = regions[i].host + (c - regions[i].device);
            break;
        }
    pthread_mutex_unlock(&regions_lock);
    return out;
}

static int device_count(char *err, size_t errsize)
{
    (void)err;
    (void)errsize;
    return 1;
}

static void *device_malloc(int device, uint64_t bytes)
{
    const char *limit = getenv("TR_HOST_CUDA_FAIL_MALLOC");
    size_t size = bytes ? bytes : 1;
    void *host = MAP_FAILED, *dev = MAP_FAILED;
    int fd;

    (void)device;
    if (limit && *limit && mallocs >= atol(limit))
        return NULL;
    fd = memfd_create("tensorrun-host-cuda", 0);
    if (fd < 0)
        return NULL;
    if (ftruncate(fd, (off_t)size) == 0) {
        host = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        dev = mmap(NULL, size, PROT_NONE, MAP_SHARED, fd, 0);
    }
    close(fd);
    pthread_mutex_lock(&regions_lock);
    if (host == MAP_FAILED || dev == MAP_FAILED || nregions == MAX_REGIONS) {
        pthread_mutex_unlock(&regions_lock);
        if (host != MAP_FAILED)
            munmap(host, size);
        if (dev != MAP_FAILED)
            munmap(dev, size);
        return NULL;
    }
    regions[nregions++] = (struct region){dev, host, size};
    mallocs++;
    pthread_mutex_unlock(&regions_lock);
    return dev;
}

static void device_free(int device, void *ptr)
{
    (void)device;
    pthread_mutex_lock(&regions_lock);
    for (int i = 0; i < nregions; i++)
        if (regions[i].device == ptr) {
            munmap(regions[i].host, regions[i].bytes);
            munmap(regions[i].device, regions[i].bytes);
            regions[i] = regions[--nregions];
            break;
        }
    pthread_mutex_unlock(&regions_lock);
}

static void *host_alloc(uint64_t bytes)
{
    return malloc(bytes ? bytes : 1);
}

static int copy(int device, void *dst, const void *src, uint64_t bytes,
                enum tr_cuda_copy_kind kind, char *err, size_t errsize)
{
    (void)device;
    (void)kind;
    (void)err;
    (void)errsize;
    memmove(H(dst), H(src), bytes);
    return 0;
}

static int fill(int device, void *dst, int value, uint64_t bytes, char *err, size_t errsize)
{
    (void)device;
    (void)err;
    (void)errsize;
    memset(H(dst), value, bytes);
    return 0;
}

static int copy_strided(int device, void *dst, const void *src, uint64_t itemsize, int ndim,
                        const int64_t *shape, const int64_t *strides, char *err, size_t errsize)
{
    int64_t n = 1;

    (void)device;
    if (ndim < 0 || ndim > TR_CUDA_MAX_NDIM) {
        snprintf(err, errsize, "copy_strided: %d dimensions", ndim);
        return -1;
    }
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    dst = H(dst);
    src = H(src);
    for (int64_t i = 0; i < n; i++)
        memcpy((char *)dst + i * (int64_t)itemsize,
               (const char *)src + tr__cuda_offset(ndim, shape, strides, i), itemsize);
    return 0;
}

static int map(int device, const struct tr_cuda_map *given, char *err, size_t errsize)
{
    struct tr_cuda_map mm = *given, *m = &mm;
    int64_t n = 1;

    (void)device;
    mm.out = H(mm.out);
    for (int k = 0; k < TR_CUDA_MAX_OPERANDS; k++)
        mm.in[k].data = H(mm.in[k].data);
    if (m->ndim < 0 || m->ndim > TR_CUDA_MAX_NDIM || m->nin < 1 || m->nin > TR_CUDA_MAX_OPERANDS) {
        snprintf(err, errsize, "map: %d dimensions, %d operands", m->ndim, m->nin);
        return -1;
    }
    for (int d = 0; d < m->ndim; d++)
        n *= m->shape[d];
    for (int64_t i = 0; i < n; i++)
        tr__cuda_map_one(m, m->code, i);
    return 0;
}

/* Row-major a (m x k) times b (k x n), as cuBLAS would take them, each
 * sum in f64 and rounded once: a reference, not cuBLAS's bits. */
static double element(int dtype, const void *base, int64_t at)
{
    double v = 0;

    tr__convert_value(&v, TR_DTYPE_F64, (const char *)base + at * tr__item_size(dtype),
                      (enum tr_dtype)dtype);
    return v;
}

static int matmul(int device, const struct tr_cuda_matmul *given, char *err, size_t errsize)
{
    struct tr_cuda_matmul pp = *given, *p = &pp;

    (void)device;
    pp.a = H(pp.a);
    pp.b = H(pp.b);
    pp.c = H(pp.c);
    (void)err;
    (void)errsize;
    for (int64_t q = 0; q < p->batch; q++)
        for (int64_t i = 0; i < p->m; i++)
            for (int64_t j = 0; j < p->n; j++) {
                double s = 0;
                for (int64_t l = 0; l < p->k; l++) {
                    int64_t ai = q * p->stride_a + (p->trans_a ? i + l * p->lda : i * p->lda + l);
                    int64_t bi = q * p->stride_b + (p->trans_b ? l + j * p->ldb : l * p->ldb + j);
                    s += element(p->dtype, p->a, ai) * element(p->dtype, p->b, bi);
                }
                tr__convert_value((char *)p->c + ((q * p->m + i) * p->n + j) *
                                                     tr__item_size(p->dtype),
                                  (enum tr_dtype)p->dtype, &s, TR_DTYPE_F64);
            }
    return 0;
}

static int topk(int device, const struct tr_cuda_topk *given, char *err, size_t errsize)
{
    struct tr_cuda_topk tt = *given, *t = &tt;

    (void)device;
    (void)err;
    (void)errsize;
    tt.x = H(tt.x);
    tt.values = H(tt.values);
    tt.indices = H(tt.indices);
    /* the GPU's steps, one thread after the other */
    for (int64_t l = 0; t->k > 0 && t->len > 0 && l < t->nlines; l++) {
        int64_t xo, oo, need = t->k, ties = 0;
        uint64_t prefix = 0;
        const char *base;
        tr__cuda_topk_offsets(t, l, &xo, &oo);
        base = (const char *)t->x + xo;
        for (int shift = 56; shift >= 0; shift -= 8) {
            uint32_t hist[256] = {0};
            for (int64_t i = 0; i < t->len; i++) {
                uint64_t key = tr__cuda_topk_key(t, base, i);
                if (tr__cuda_topk_matches(key, prefix, shift))
                    hist[(key >> shift) & 255]++;
            }
            tr__cuda_topk_pick(hist, shift, &prefix, &need);
        }
        for (int64_t i = 0; i < t->len; i++) {
            uint64_t key = tr__cuda_topk_key(t, base, i);
            if (key < prefix)
                tr__cuda_topk_store(t, base, oo, tr__cuda_topk_place(t, base, i, key), i);
        }
        for (int64_t i = 0; i < t->len && ties < need; i++)
            if (tr__cuda_topk_key(t, base, i) == prefix)
                tr__cuda_topk_store(t, base, oo, t->k - need + ties++, i);
    }
    return 0;
}

static int gather(int device, const struct tr_cuda_gather *given, char *err, size_t errsize)
{
    struct tr_cuda_gather gg = *given, *g = &gg;
    int64_t n = 1;

    (void)device;
    gg.x = H(gg.x);
    gg.out = H(gg.out);
    gg.index.data = H(gg.index.data);
    gg.first_bad = H(gg.first_bad);
    (void)err;
    (void)errsize;
    for (int d = 0; d < g->ndim; d++)
        n *= g->shape[d];
    for (int64_t e = 0; e < n; e++)
        if (!tr__cuda_gather_one(g, e) && (uint64_t)e < *g->first_bad)
            *g->first_bad = (uint64_t)e;
    return 0;
}

static int rowwise(int device, const struct tr_cuda_rowwise *given, char *err, size_t errsize)
{
    struct tr_cuda_rowwise ww = *given, *w = &ww;
    struct tr__cuda_row_acc p[TR__CUDA_ROW_THREADS];

    (void)device;
    ww.x = H(ww.x);
    ww.y = H(ww.y);
    ww.weight.data = H(ww.weight.data);
    ww.bias.data = H(ww.bias.data);
    (void)err;
    (void)errsize;
    for (int64_t l = 0; w->len > 0 && l < w->nlines; l++) {
        int64_t xo, yo;
        double totals[2] = {0, 0}, k[2] = {0, 0};
        tr__cuda_row_offsets(w, l, &xo, &yo);
        for (int pass = 0; pass < tr__cuda_row_passes(w); pass++) {
            double given = pass == 1 ? tr__cuda_row_between(w, totals) : 0;
            for (int t = 0; t < TR__CUDA_ROW_THREADS; t++)
                tr__cuda_row_partial(w, (const char *)w->x + xo, pass, given, t, &p[t]);
            for (int s = TR__CUDA_ROW_THREADS / 2; s > 0; s >>= 1)
                for (int t = 0; t < s; t++)
                    tr__cuda_row_merge(w, pass, &p[t], &p[t + s]);
            totals[pass] = tr__cuda_row_total(w, pass, &p[0]);
        }
        tr__cuda_row_finish(w, totals, k);
        for (int64_t i = 0; i < w->len; i++)
            tr__cuda_row_result(w, (const char *)w->x + xo, (char *)w->y + yo, i, k);
    }
    return 0;
}

static int reduce(int device, const struct tr_cuda_reduce *given, char *err, size_t errsize)
{
    struct tr_cuda_reduce rr = *given, *r = &rr;
    int64_t groups = tr__cuda_reduce_groups(r->n);
    struct tr__cuda_acc p[TR__CUDA_REDUCE_THREADS];

    (void)device;
    rr.x = H(rr.x);
    rr.out = H(rr.out);
    rr.partials = H(rr.partials);
    if (groups > 1 && !r->partials) {
        snprintf(err, errsize, "reduce: no room for the partials");
        return -1;
    }
    /* the GPU's blocks and trees, one after the other */
    for (int64_t q = 0; q < r->nout * groups; q++) {
        int64_t o = q / groups, g = q % groups;
        for (int t = 0; t < TR__CUDA_REDUCE_THREADS; t++)
            tr__cuda_reduce_thread(r, o, g * TR__CUDA_REDUCE_THREADS + t,
                                   groups * TR__CUDA_REDUCE_THREADS, &p[t]);
        for (int s = TR__CUDA_REDUCE_THREADS / 2; s > 0; s >>= 1)
            for (int t = 0; t < s; t++)
                tr__cuda_reduce_step(r, p, s, t);
        if (groups == 1)
            tr__cuda_reduce_finish(r, &p[0], o);
        else
            ((struct tr__cuda_acc *)r->partials)[q] = p[0];
    }
    for (int64_t o = 0; groups > 1 && o < r->nout; o++) {
        struct tr__cuda_acc *part = (struct tr__cuda_acc *)r->partials + o * groups;
        tr__cuda_reduce_group_tree(r, part, groups);
        tr__cuda_reduce_finish(r, &part[0], o);
    }
    return 0;
}

static int random_values(int device, void *dst, int dtype, int normal, uint64_t seed,
                         uint64_t n, char *err, size_t errsize)
{
    int64_t item = tr__item_size(dtype);

    (void)device;
    if (dtype != TR_DTYPE_F32 && dtype != TR_DTYPE_F64 && dtype != TR_DTYPE_F16 &&
        dtype != TR_DTYPE_BF16) {
        snprintf(err, errsize, "random: dtype %d is not a float dtype", dtype);
        return -1;
    }
    dst = H(dst);
    for (uint64_t i = 0; i < n; i++)
        tr__random_store((char *)dst + i * item, (enum tr_dtype)dtype, normal != 0, seed, i);
    return 0;
}

static uint64_t mark(int device)
{
    (void)device;
    return ++marks;
}

static int mark_done(int device, uint64_t m, char *err, size_t errsize)
{
    (void)device;
    (void)m;
    (void)err;
    (void)errsize;
    return 1;
}

static int mark_wait(int device, uint64_t m, char *err, size_t errsize)
{
    (void)device;
    (void)m;
    (void)err;
    (void)errsize;
    return 0;
}

static int synchronize(int device, char *err, size_t errsize)
{
    (void)device;
    (void)err;
    (void)errsize;
    return 0;
}

static const struct tr_cuda_module table = {
    TR_CUDA_MODULE_ABI, device_count, device_malloc, device_free, host_alloc, free,
    copy,          fill,   copy_strided, map,           matmul, topk,      gather,
    rowwise,       reduce, random_values, mark,         mark_done, mark_wait, synchronize,
};

const struct tr_cuda_module *tr_cuda_module_get(int abi);
const struct tr_cuda_module *tr_cuda_module_get(int abi)
{
    return abi == TR_CUDA_MODULE_ABI ? &table : NULL;
}
