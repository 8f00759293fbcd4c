/*
 * tensor.c - storages and tensor handles: making them from pool memory or
 * the caller's, releasing them, and asking them about themselves.
 */
#include "engine_impl.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend_impl.h"
#include "pool_impl.h"

/* -------------------------------------------------------------- storage */

struct tr_storage *tr__storage_alloc(const char *fn, struct tr_device device,
                                     uint64_t nbytes)
{
    struct tr__pool *pool = tr__pool_for(device, fn);
    struct tr_storage *s;
    void *ptr = NULL;

    if (!pool)
        return NULL;
    s = calloc(1, sizeof *s);
    TR_RETURN_NULL_IF(!s, TR_ERR_OOM, "out of memory for a tensor's bookkeeping");
    if (nbytes) {
        s->block = tr__pool_alloc(pool, nbytes, &ptr);
        if (!s->block) {
            free(s);
            return NULL;
        }
    }
    atomic_init(&s->refs, 0);
    s->kind = TR_STORAGE_POOL;
    s->device = device;
    s->data = ptr;
    s->nbytes = nbytes;
    s->pool = pool;
    return s;
}

void tr__storage_discard(struct tr_storage *s)
{
    if (s->kind == TR_STORAGE_POOL)
        tr__pool_free(s->pool, s->block);
    free(s);
}

static void storage_unref(struct tr_storage *s)
{
    if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (s->kind == TR_STORAGE_ADOPTED)
        s->deleter(s->data, s->deleter_ctx);
    tr__storage_discard(s);
}

/* ---------------------------------------------------- handle checking */

#ifdef TR_DEBUG
#define DEBUG_HANDLES_DEFAULT true
#else
#define DEBUG_HANDLES_DEFAULT false
#endif

/* Released handles held back from free() while debugging, oldest first out. */
#define QUARANTINE_SIZE 4096

static atomic_bool debug_handles = DEBUG_HANDLES_DEFAULT;
static pthread_mutex_t quarantine_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tr_tensor *quarantine[QUARANTINE_SIZE];
static size_t quarantine_next;

static void quarantine_flush(void)
{
    pthread_mutex_lock(&quarantine_lock);
    for (size_t i = 0; i < QUARANTINE_SIZE; i++) {
        free(quarantine[i]);
        quarantine[i] = NULL;
    }
    pthread_mutex_unlock(&quarantine_lock);
}

bool tr_debug_handles(bool on)
{
    bool was = atomic_exchange(&debug_handles, on);

    if (was && !on)
        quarantine_flush();
    return was;
}

tr_status tr__check(const struct tr_tensor *t, const char *fn)
{
    TR_RETURN_ERROR_IF(!t, TR_ERR_HANDLE, "%s: the tensor handle is NULL", fn);
    TR_RETURN_ERROR_IF(t->magic != TR__TENSOR_MAGIC, TR_ERR_HANDLE,
                       "%s: use of a released tensor handle", fn);
    return TR_OK;
}

/* --------------------------------------------------------------- handles */

struct tr_tensor *tr__tensor_new(struct tr_storage *storage, enum tr_dtype dtype,
                                 int ndim, const int64_t *shape,
                                 const int64_t *strides, int64_t offset)
{
    struct tr_tensor *t = calloc(1, sizeof *t);

    TR_RETURN_NULL_IF(!t, TR_ERR_OOM, "out of memory for a tensor handle");
    t->magic = TR__TENSOR_MAGIC;
    t->storage = storage;
    t->offset = offset;
    t->dtype = dtype;
    t->ndim = ndim;
    if (ndim > 0) {
        memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
        if (strides)
            memcpy(t->strides, strides, (size_t)ndim * sizeof *strides);
        else
            tr__contiguous_strides(ndim, shape, t->strides);
    }
    if (tr__scope_add(t) != TR_OK) {
        free(t);
        return NULL;
    }
    atomic_fetch_add_explicit(&storage->refs, 1, memory_order_relaxed);
    return t;
}

struct tr_tensor *tr__tensor_alias(const struct tr_tensor *t)
{
    return tr__tensor_new(t->storage, t->dtype, t->ndim, t->shape, t->strides, t->offset);
}

void tr__tensor_destroy(struct tr_tensor *t)
{
    struct tr_tensor *evicted = NULL;

    storage_unref(t->storage);
    t->magic = TR__DEAD_MAGIC;
    t->storage = NULL;
    if (!atomic_load_explicit(&debug_handles, memory_order_relaxed)) {
        free(t);
        return;
    }
    pthread_mutex_lock(&quarantine_lock);
    evicted = quarantine[quarantine_next];
    quarantine[quarantine_next] = t;
    quarantine_next = (quarantine_next + 1) % QUARANTINE_SIZE;
    pthread_mutex_unlock(&quarantine_lock);
    free(evicted);
}

tr_status tr_release(struct tr_tensor *t)
{
    if (!t)
        return TR_OK;
    TR_FORWARD_IF_ERROR(tr__check(t, "release"));
    TR_FORWARD_IF_ERROR(tr__scope_check_owner(t, "release"));
    tr__scope_remove(t);
    tr__tensor_destroy(t);
    return TR_OK;
}

/* ---------------------------------------------------------- constructors */

struct tr_tensor *tr_from_blob(const struct tr_blob *blob, enum tr_dtype dtype,
                               int ndim, const int64_t *shape,
                               const int64_t *strides, struct tr_device device)
{
    int64_t numel, lo, hi, contiguous[TR_MAX_DIMS];
    int64_t item = (int64_t)tr_dtype_size(dtype), first, last;
    struct tr_storage *s;
    struct tr_tensor *t;

    TR_RETURN_NULL_IF(!blob, TR_ERR_INVALID, "from_blob: no blob given");
    if (tr__check_shape("from_blob", ndim, shape, dtype, &numel) != TR_OK ||
        tr__device_check(device, "from_blob") != TR_OK)
        return NULL;
    /* an empty view reaches no memory: its strides and offset are never
     * used, so they are made harmless rather than checked */
    if (!strides || numel == 0) {
        tr__contiguous_strides(ndim, shape, contiguous);
        strides = contiguous;
    }
    if (tr__extent("from_blob", ndim, shape, strides, &lo, &hi) != TR_OK)
        return NULL;
    if (numel > 0) {
        TR_RETURN_NULL_IF(!blob->data, TR_ERR_INVALID, "from_blob: the data pointer is NULL");
        TR_RETURN_NULL_IF(__builtin_mul_overflow(lo, item, &first) ||
                              __builtin_add_overflow(first, blob->offset, &first) ||
                              __builtin_add_overflow(hi, 1, &last) ||
                              __builtin_mul_overflow(last, item, &last) ||
                              __builtin_add_overflow(last, blob->offset, &last),
                          TR_ERR_INVALID, "from_blob: the view's extent overflows");
        TR_RETURN_NULL_IF(first < 0, TR_ERR_INVALID,
                          "from_blob: the view reaches %lld bytes before the buffer's start",
                          (long long)-first);
        TR_RETURN_NULL_IF(blob->nbytes && (uint64_t)last > blob->nbytes, TR_ERR_INVALID,
                          "from_blob: the view reaches byte %lld of a %llu-byte buffer",
                          (long long)last, (unsigned long long)blob->nbytes);
        TR_RETURN_NULL_IF(((uintptr_t)blob->data + (uintptr_t)blob->offset) % (uintptr_t)item,
                          TR_ERR_INVALID,
                          "from_blob: the data is not aligned to the %lld-byte size of %s",
                          (long long)item, tr_dtype_name(dtype));
    }
    s = calloc(1, sizeof *s);
    TR_RETURN_NULL_IF(!s, TR_ERR_OOM, "out of memory for a tensor's bookkeeping");
    atomic_init(&s->refs, 0);
    s->kind = blob->deleter ? TR_STORAGE_ADOPTED : TR_STORAGE_BORROWED;
    s->flags = blob->flags & (TR_FLAG_READONLY | TR_FLAG_PINNED | TR_FLAG_MAPPED);
    s->device = device;
    s->data = blob->data;
    s->nbytes = blob->nbytes;
    s->deleter = blob->deleter;
    s->deleter_ctx = blob->deleter_ctx;
    t = tr__tensor_new(s, dtype, ndim, shape, strides, numel ? blob->offset : 0);
    if (!t)
        free(s);
    return t;
}

struct tr_tensor *tr__empty(const char *fn, enum tr_dtype dtype, int ndim,
                                     const int64_t *shape, struct tr_device device)
{
    int64_t numel;
    struct tr_storage *s;
    struct tr_tensor *t;

    if (tr__check_shape(fn, ndim, shape, dtype, &numel) != TR_OK)
        return NULL;
    s = tr__storage_alloc(fn, device, (uint64_t)numel * tr_dtype_size(dtype));
    if (!s)
        return NULL;
    t = tr__tensor_new(s, dtype, ndim, shape, NULL, 0);
    if (!t)
        tr__storage_discard(s);
    return t;
}

struct tr_tensor *tr_empty(enum tr_dtype dtype, int ndim, const int64_t *shape,
                           struct tr_device device)
{
    return tr__empty("empty", dtype, ndim, shape, device);
}

struct tr_tensor *tr_zeros(enum tr_dtype dtype, int ndim, const int64_t *shape,
                           struct tr_device device)
{
    struct tr_tensor *t = tr__empty("zeros", dtype, ndim, shape, device);
    uint64_t bytes = t ? t->storage->nbytes : 0;

    if (!t || bytes == 0)
        return t;
    if (tr__device_fill_zero(device, t->storage->data, bytes, "zeros") != TR_OK) {
        tr_release(t);
        return NULL;
    }
    return t;
}

struct tr_tensor *tr_from_data(const void *src, enum tr_dtype dtype, int ndim,
                               const int64_t *shape, struct tr_device device)
{
    struct tr_tensor *t = tr__empty("from_data", dtype, ndim, shape, device);
    uint64_t bytes = t ? t->storage->nbytes : 0;

    if (!t || bytes == 0)
        return t;
    if (!src) {
        tr_release(t);
        tr__set_error(TR_ERR_INVALID, "from_data: the source pointer is NULL");
        return NULL;
    }
    if (tr__device_upload(device, t->storage->data, src, bytes, "from_data") != TR_OK) {
        tr_release(t);
        return NULL;
    }
    return t;
}

/* --------------------------------------------------------------- queries */

#define QUERY(t, fail)                                                       \
    do {                                                                     \
        if (tr__check((t), __func__) != TR_OK)                               \
            return fail;                                                     \
    } while (0)

enum tr_dtype tr_tensor_dtype(const struct tr_tensor *t)
{
    QUERY(t, TR_DTYPE_COUNT);
    return t->dtype;
}

int tr_tensor_ndim(const struct tr_tensor *t)
{
    QUERY(t, -1);
    return t->ndim;
}

const int64_t *tr_tensor_shape(const struct tr_tensor *t)
{
    QUERY(t, NULL);
    return t->shape;
}

const int64_t *tr_tensor_strides(const struct tr_tensor *t)
{
    QUERY(t, NULL);
    return t->strides;
}

int64_t tr_tensor_numel(const struct tr_tensor *t)
{
    int64_t n = 1;

    QUERY(t, -1);
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

uint64_t tr_tensor_nbytes(const struct tr_tensor *t)
{
    QUERY(t, 0);
    return (uint64_t)tr_tensor_numel(t) * tr_dtype_size(t->dtype);
}

int64_t tr_tensor_offset(const struct tr_tensor *t)
{
    QUERY(t, -1);
    return t->offset;
}

struct tr_device tr_tensor_device(const struct tr_tensor *t)
{
    QUERY(t, TR_CPU);
    return t->storage->device;
}

enum tr_storage_kind tr_tensor_storage_kind(const struct tr_tensor *t)
{
    QUERY(t, TR_STORAGE_BORROWED);
    return t->storage->kind;
}

unsigned tr_tensor_flags(const struct tr_tensor *t)
{
    QUERY(t, 0);
    return t->storage->flags;
}

bool tr_tensor_is_contiguous(const struct tr_tensor *t)
{
    QUERY(t, false);
    return tr__is_contiguous(t->ndim, t->shape, t->strides);
}

bool tr_tensor_shares_storage(const struct tr_tensor *a, const struct tr_tensor *b)
{
    QUERY(a, false);
    QUERY(b, false);
    return a->storage == b->storage;
}

bool tr_tensor_is_sole_handle(const struct tr_tensor *t)
{
    QUERY(t, false);
    return atomic_load(&t->storage->refs) == 1;
}

const void *tr_tensor_data(const struct tr_tensor *t)
{
    QUERY(t, NULL);
    if (tr_tensor_numel(t) == 0)
        return NULL;
    return t->storage->data + t->offset;
}

void *tr_tensor_data_mut(struct tr_tensor *t)
{
    QUERY(t, NULL);
    TR_RETURN_NULL_IF(t->storage->flags & TR_FLAG_READONLY, TR_ERR_READONLY,
                      "the tensor is read-only (it views memory such as a mapped file "
                      "that must not be written)");
    if (tr_tensor_numel(t) == 0)
        return NULL;
    return t->storage->data + t->offset;
}
