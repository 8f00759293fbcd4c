/*
 * engine_impl.h - what the engine's files share and nothing outside the
 * engine may use: the error macros and the layout of tensors and storages.
 */
#ifndef TR_ENGINE_IMPL_H
#define TR_ENGINE_IMPL_H

#include "config.h"

#include <stdatomic.h>

#include "tensorrun.h"

/* ---------------------------------------------------------------- errors */

/* The engine's own name for tr_set_error. */
#define tr__set_error tr_set_error

/* The engine's own name for tr_format_shape. */
#define tr__format_shape tr_format_shape

/* --------------------------------------------------------------- storage */

struct tr__block;
struct tr__pool;

struct tr_storage {
    atomic_long refs;           /* handles of this storage */
    enum tr_storage_kind kind;
    unsigned flags;             /* enum tr_flags */
    struct tr_device device;
    char *data;                 /* start of the bytes (device address on CUDA) */
    uint64_t nbytes;            /* 0 when unknown (an unchecked blob) */
    struct tr__pool *pool;      /* POOL: the pool and block to give back */
    struct tr__block *block;
    tr_deleter deleter;         /* ADOPTED */
    void *deleter_ctx;
};

/* A storage holding a new block of the device pool (no block for 0 bytes);
 * its reference count starts at 0.  Errors begin with fn. */
struct tr_storage *tr__storage_alloc(const char *fn, struct tr_device device,
                                     uint64_t nbytes);
/* Frees a storage whose count never left 0 (a failed construction). */
void tr__storage_discard(struct tr_storage *storage);

/* ---------------------------------------------------------------- tensors */

struct tr__scope_link {
    struct tr_scope *scope; /* NULL: free-standing */
    size_t index;           /* position in scope's handle array */
};

struct tr_tensor {
    uint32_t magic;              /* TR__TENSOR_MAGIC while the handle lives */
    struct tr_storage *storage;
    int64_t offset;              /* bytes from storage->data to element 0 */
    enum tr_dtype dtype;
    int ndim;
    int64_t shape[TR_MAX_DIMS];
    int64_t strides[TR_MAX_DIMS]; /* in elements, may be 0 or negative */
    struct tr__scope_link link;
};

#define TR__TENSOR_MAGIC 0x74656e73u /* "tens" */
#define TR__DEAD_MAGIC 0xdeadbeefu

/* TR_OK for a live handle; TR_ERR_HANDLE (with a message naming fn) for
 * NULL or a released one. */
tr_status tr__check(const struct tr_tensor *t, const char *fn);

#define TR_CHECK_HANDLE_OR_NULL(t, fn)                                       \
    do {                                                                     \
        if (tr__check((t), (fn)) != TR_OK)                                   \
            return NULL;                                                     \
    } while (0)

/* A new handle viewing storage, registered in the innermost scope.  shape
 * and strides are copied; strides NULL means C order.  The caller has
 * checked the view against the storage. */
struct tr_tensor *tr__tensor_new(struct tr_storage *storage, enum tr_dtype dtype,
                                 int ndim, const int64_t *shape,
                                 const int64_t *strides, int64_t offset);
/* A new compact pool tensor, contents undefined; errors begin with fn. */
struct tr_tensor *tr__empty(const char *fn, enum tr_dtype dtype, int ndim,
                            const int64_t *shape, struct tr_device device);
/* A new handle of t's storage with t's layout, for view constructors to
 * adjust. */
struct tr_tensor *tr__tensor_alias(const struct tr_tensor *t);
/* Drops a handle that is already out of every scope. */
void tr__tensor_destroy(struct tr_tensor *t);

/* Checks ndim and shape (no negative sizes; the sizes other than 0 times
 * the item size fit in int64, so that contiguous strides and byte counts
 * never overflow) and stores the element count in *numel. */
tr_status tr__check_shape(const char *fn, int ndim, const int64_t *shape,
                          enum tr_dtype dtype, int64_t *numel);
/* Lowest and highest element offsets (in elements) a strided view reaches;
 * TR_ERR_INVALID when they overflow.  Both are 0 for an empty view. */
tr_status tr__extent(const char *fn, int ndim, const int64_t *shape,
                     const int64_t *strides, int64_t *lo, int64_t *hi);
void tr__contiguous_strides(int ndim, const int64_t *shape, int64_t *strides);
/* t's strides in bytes.  A dimension of size 1 is never stepped and may
 * carry any stride, even one whose byte count would overflow: it gets 0. */
void tr__byte_strides(const struct tr_tensor *t, int64_t *out);
/* Whether a view of shape and strides (in elements) can be seen as
 * new_shape without a copy, and with which strides (tr_reshape_view). */
bool tr__view_strides(int ndim, const int64_t *shape, const int64_t *strides, int new_ndim,
                      const int64_t *new_shape, int64_t *new_strides);
/* C order, ignoring the strides of size-1 dimensions; true when empty. */
bool tr__is_contiguous(int ndim, const int64_t *shape, const int64_t *strides);
/* movedim's order: result dimension i is dimension order[i] of a tensor of
 * ndim dimensions once dimensions src[k] (non-negative, distinct) move to
 * places dst[k] (likewise), k < n, and the others keep their order in the
 * places left. */
void tr__movedim_order(int ndim, const int *src, const int *dst, int n, int *order);
/* Normalises a possibly negative dim into [0, ndim); TR_ERR_INDEX if out of
 * range. */
tr_status tr__normalize_dim(const char *fn, int dim, int ndim, int *out);

/* ---------------------------------------------------------------- scopes */

/* Puts a new handle into the innermost scope (free-standing when none). */
tr_status tr__scope_add(struct tr_tensor *t);
/* TR_ERR_STATE (a message beginning with fn) when t is held by a scope of
 * another thread, which alone may take it out. */
tr_status tr__scope_check_owner(const struct tr_tensor *t, const char *fn);
/* Takes a handle out of whatever scope holds it. */
void tr__scope_remove(struct tr_tensor *t);

#endif /* TR_ENGINE_IMPL_H */
