/*
 * tensorrun.h - the engine's public API: dtypes, devices, tensors, views,
 * scopes, memory pools and errors.
 *
 * Ownership, once for the whole header:
 *
 *   Every function that returns a `struct tr_tensor *` returns a new handle.
 *   A handle joins the calling thread's innermost open scope and is released
 *   when that scope ends, unless it is kept (tr_scope_end) or moved up
 *   (tr_retain) first; with no scope open it is free-standing and belongs to
 *   the caller, who ends it with tr_release.  Functions never consume the
 *   handles they are given.
 *
 *   A handle is a view (dtype, shape, strides, byte offset) of a storage.
 *   Views made from a handle share its storage; the storage lives while any
 *   handle of it lives.  Storage comes from a device pool (POOL), is
 *   borrowed from the caller and never freed (BORROWED), or is adopted with
 *   a deleter that runs exactly once, when its last handle is released
 *   (ADOPTED).
 *
 * Errors: functions that make tensors return NULL on failure; the others
 * return a tr_status (TR_OK is 0).  Either way the calling thread's
 * tr_last_status() and tr_last_error() then say what went wrong in a full
 * sentence.  The engine never prints, exits or aborts on bad input.
 */
#ifndef TENSORRUN_H
#define TENSORRUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TR_MAX_DIMS 8

/* ---------------------------------------------------------------- status */

/* X(name, sentence): one table for the enum, tr_status_name and
 * tr_status_string. */
#define TR_STATUS_MAP(X)                                                     \
    X(OK, "success")                                                         \
    X(ERR_INVALID, "invalid argument")                                       \
    X(ERR_SHAPE, "shape mismatch")                                           \
    X(ERR_DTYPE, "unsupported dtype")                                        \
    X(ERR_INDEX, "index out of range")                                       \
    X(ERR_READONLY, "tensor is read-only")                                   \
    X(ERR_OOM, "out of memory")                                              \
    X(ERR_DEVICE, "device unavailable")                                      \
    X(ERR_STATE, "operation not allowed in this state")                      \
    X(ERR_HANDLE, "released or invalid tensor handle")                       \
    X(ERR_IO, "input/output error")                                          \
    X(ERR_FORMAT, "malformed data")                                          \
    X(ERR_SYSTEM, "system error")

typedef enum tr_status {
#define TR__STATUS_ENUM(name, text) TR_##name,
    TR_STATUS_MAP(TR__STATUS_ENUM)
#undef TR__STATUS_ENUM
    TR_STATUS_COUNT
} tr_status;

/* The status of the calling thread's last failure (TR_OK if none since the
 * last tr_clear_error). */
tr_status tr_last_status(void);
/* The full sentence describing it; never NULL ("" when there is none).  The
 * string stays valid until the thread's next failing call. */
const char *tr_last_error(void);
/* Forgets the calling thread's last error: TR_OK and "". */
void tr_clear_error(void);
/* Records status and a printf-formatted sentence as the calling thread's
 * last error, for the layers built on the engine; returns status. */
tr_status tr_set_error(tr_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* "TR_ERR_OOM" and "out of memory" for TR_ERR_OOM; "?" for unknown codes. */
const char *tr_status_name(tr_status status);
const char *tr_status_string(tr_status status);

/* Error propagation in one line, for the engine and the layers on it:
 * return (or return NULL) with a recorded error when cond holds; return
 * the status of expr when it is not TR_OK. */
#define TR_RETURN_ERROR_IF(cond, status, ...)                                \
    do {                                                                     \
        if (cond)                                                            \
            return tr_set_error((status), __VA_ARGS__);                      \
    } while (0)

#define TR_RETURN_NULL_IF(cond, status, ...)                                 \
    do {                                                                     \
        if (cond) {                                                          \
            tr_set_error((status), __VA_ARGS__);                             \
            return NULL;                                                     \
        }                                                                    \
    } while (0)

#define TR_FORWARD_IF_ERROR(expr)                                            \
    do {                                                                     \
        tr_status tr__forward = (expr);                                      \
        if (tr__forward != TR_OK)                                            \
            return tr__forward;                                              \
    } while (0)

/* ---------------------------------------------------------------- dtypes */

/* X(ENUM, name, size in bytes, kind, long name): kind is 'b' bool,
 * 'u' unsigned, 'i' signed integer, 'f' floating point; the long name is
 * the NumPy / PyTorch spelling, accepted by tr_dtype_parse too. */
#define TR_DTYPE_MAP(X)                                                      \
    X(BOOL, bool, 1, 'b', "bool")                                            \
    X(U8, u8, 1, 'u', "uint8")                                               \
    X(U16, u16, 2, 'u', "uint16")                                            \
    X(U32, u32, 4, 'u', "uint32")                                            \
    X(U64, u64, 8, 'u', "uint64")                                            \
    X(I8, i8, 1, 'i', "int8")                                                \
    X(I16, i16, 2, 'i', "int16")                                             \
    X(I32, i32, 4, 'i', "int32")                                             \
    X(I64, i64, 8, 'i', "int64")                                             \
    X(F16, f16, 2, 'f', "float16")                                           \
    X(BF16, bf16, 2, 'f', "bfloat16")                                        \
    X(F32, f32, 4, 'f', "float32")                                           \
    X(F64, f64, 8, 'f', "float64")

enum tr_dtype {
#define TR__DTYPE_ENUM(e, name, size, kind, long_name) TR_DTYPE_##e,
    TR_DTYPE_MAP(TR__DTYPE_ENUM)
#undef TR__DTYPE_ENUM
    TR_DTYPE_COUNT
};

/* Item size in bytes; 0 for a value outside the enum. */
size_t tr_dtype_size(enum tr_dtype dtype);
/* Canonical short name ("f32"); "?" for a value outside the enum. */
const char *tr_dtype_name(enum tr_dtype dtype);
/* Accepts the short and the long names of the table.  Returns TR_ERR_DTYPE
 * for anything else. */
tr_status tr_dtype_parse(const char *name, enum tr_dtype *out);
/* Classification; all false for a value outside the enum. */
bool tr_dtype_is_float(enum tr_dtype dtype);
bool tr_dtype_is_integer(enum tr_dtype dtype); /* signed or unsigned, not bool */
bool tr_dtype_is_signed(enum tr_dtype dtype);  /* signed integers and floats */

/* Exact conversions between the 16-bit float formats and f32.  Narrowing
 * rounds to nearest, ties to even; overflow gives infinity; subnormals are
 * produced and read exactly; NaN stays NaN (quiet, sign and the payload's
 * top bits kept). */
float tr_f16_to_f32(uint16_t bits);
uint16_t tr_f32_to_f16(float value);
float tr_bf16_to_f32(uint16_t bits);
uint16_t tr_f32_to_bf16(float value);
/* The same from f64, rounded once (not through f32, which could round
 * twice). */
uint16_t tr_f64_to_f16(double value);
uint16_t tr_f64_to_bf16(double value);

/* --------------------------------------------------------------- devices */

/* TR_DEV_FAKE is host memory posing as a device, for tests only: it
 * exists when the environment variable TENSORRUN_FAKE_DEVICES=N (1 to 8)
 * is set, as fake:0 .. fake:N-1, with a pool of its own, copies that land
 * only once waited for, and the CPU's kernels except cumsum's. */
enum tr_device_kind { TR_DEV_CPU, TR_DEV_CUDA, TR_DEV_FAKE };

struct tr_device {
    enum tr_device_kind kind;
    int index; /* 0 for the CPU */
};

#define TR_CPU ((struct tr_device){TR_DEV_CPU, 0})
#define TR_CUDA(n) ((struct tr_device){TR_DEV_CUDA, (n)})
#define TR_FAKE(n) ((struct tr_device){TR_DEV_FAKE, (n)})

/* "cpu", "cuda" (device 0), "cuda:N" with N from 0 to 63, "fake" or
 * "fake:N" likewise.  Whether the device exists is tr_device_available's
 * question. */
tr_status tr_device_parse(const char *text, struct tr_device *out);
/* Room for any device's name. */
#define TR_DEVICE_NAME_MAX 24
/* Writes "cpu", "cuda:N" or "fake:N" into buf (TR_DEVICE_NAME_MAX bytes suffice) and
 * returns buf. */
char *tr_device_format(struct tr_device device, char *buf, size_t size);
/* Same kind and, but for the CPU, same index. */
bool tr_device_equal(struct tr_device a, struct tr_device b);
/* Number of usable CUDA devices: 0 when the build has no CUDA backend, or
 * the driver, a device or the module is missing.  The first call asks the
 * driver and may load the CUDA module; later calls are free. */
int tr_cuda_device_count(void);
/* Why tr_cuda_device_count() is 0, as a sentence; "" when it is not. */
const char *tr_cuda_unavailable_reason(void);
/* True for the CPU, and for a CUDA or fake device that exists.  The
 * error of a call that names a device that is not available says why. */
bool tr_device_available(struct tr_device device);
/* Why device is not available, as a clause ("the NVIDIA driver found no
 * device", "there are only 2 fake devices"); "" when it is.  Valid until
 * the calling thread's next call. */
const char *tr_device_unavailable_reason(struct tr_device device);
/* Waits until all work issued on the device is done (copies of the fake
 * device land).  TR_ERR_DEVICE for a device that is not available. */
tr_status tr_device_synchronize(struct tr_device device);

/* ---------------------------------------------------------------- memory */

/* A pool's accounting, in its block bytes (sizes after rounding: requests up
 * to 1 MiB are rounded up to 512 bytes, larger ones to 2 MiB). */
struct tr_memory_stats {
    uint64_t active_bytes;      /* held by live tensors */
    uint64_t cached_bytes;      /* reserved but idle, kept for reuse */
    uint64_t reserved_bytes;    /* taken from the OS or driver: active + cached */
    uint64_t peak_active_bytes; /* highest active_bytes since the last reset */
    uint64_t limit_bytes;       /* cap on active_bytes; 0 means none */
    uint64_t alloc_count;       /* successful allocations */
    uint64_t cache_hit_count;   /* allocations served from the cache */
    uint64_t retry_count;       /* times the cache was released to retry */
    uint64_t oom_count;         /* allocations that failed for lack of memory */
    uint64_t released_bytes;    /* given back by all releases so far */
    uint64_t segment_count;     /* blocks currently taken from the OS/driver */
    uint64_t pending_bytes;     /* of cached_bytes: freed, but the device's work
                                   issued before the free is not done yet, so
                                   not reusable (deferred frees; always 0 on
                                   the CPU) */
};

/* Fills *out with the device pool's statistics (all zero for a pool that
 * was never used).  TR_ERR_DEVICE for a device that is not available. */
tr_status tr_memory_stats(struct tr_device device, struct tr_memory_stats *out);
/* Gives every idle segment of the device's pool back to the OS or driver and
 * returns the bytes released: first the deferred frees whose device work is
 * done join the cache, then idle blocks merge, then whole empty segments go
 * back.  Never touches memory in use, nor memory whose last use on the
 * device is not done (it waits for nothing).  0, with
 * TR_ERR_DEVICE as the last error, for a device that is not available. */
uint64_t tr_release_cached(struct tr_device device);
/* Caps the pool's active bytes, after rounding (0 removes the cap): an
 * allocation whose block would take active_bytes past it fails at once
 * with TR_ERR_OOM, so that what fits is known from the block sizes alone.
 * A new segment that would take the reserved bytes past it first releases
 * the cache (a retry), and is then taken anyway. */
tr_status tr_memory_set_limit(struct tr_device device, uint64_t bytes);
/* The block bytes a pool gives a request of bytes: what the statistics
 * count for it (0 for 0). */
uint64_t tr_memory_block_size(uint64_t bytes);
/* Starts a new peak: peak_active_bytes becomes the current active_bytes. */
tr_status tr_memory_reset_peak(struct tr_device device);
/* The devices whose pools have been allocated from (or refused an
 * allocation) so far, the CPU first, then by kind and index: the first cap
 * of them into out.  Returns how many there are, which may be more than
 * cap.  What a run reports and releases at its end. */
size_t tr_memory_devices(struct tr_device *out, size_t cap);

/* Writes a shape as messages print it, "[2,3]" ("[]" for a scalar), into
 * buf and returns buf; cut short to fit size. */
char *tr_format_shape(const int64_t *shape, int ndim, char *buf, size_t size);
/* Writes a byte count the way the reports print it ("512 B", "1.5 KiB",
 * "256.0 MiB") into buf (at least 16 bytes) and returns buf. */
char *tr_format_bytes(uint64_t bytes, char *buf, size_t size);

/* --------------------------------------------------------------- tensors */

struct tr_tensor;

enum tr_storage_kind {
    TR_STORAGE_POOL,     /* a block of a device pool */
    TR_STORAGE_BORROWED, /* the caller's memory; never freed by the engine */
    TR_STORAGE_ADOPTED   /* the caller's memory, freed by its deleter */
};

enum tr_flags {
    TR_FLAG_READONLY = 1u << 0, /* no engine function writes through it */
    TR_FLAG_PINNED = 1u << 1,   /* the caller page-locked it; only a record */
    TR_FLAG_MAPPED = 1u << 2    /* a shared mapping of a file: its pages may be
                                   dropped and are read back from the file; only
                                   a record */
};

/* Called once, with the blob's data pointer and ctx, when the last handle of
 * an adopted storage is released. */
typedef void (*tr_deleter)(void *data, void *ctx);

/* Memory handed to tr_from_blob. */
struct tr_blob {
    void *data;          /* start of the buffer */
    size_t nbytes;       /* its length in bytes; 0: unknown, not checked */
    int64_t offset;      /* bytes from data to element [0, ..., 0] */
    tr_deleter deleter;  /* NULL borrows; otherwise the storage adopts data */
    void *deleter_ctx;
    unsigned flags;      /* enum tr_flags */
};

/*
 * Wraps memory without copying it: borrowed when blob->deleter is NULL,
 * adopted otherwise.  strides are in elements (NULL: C order) and may be
 * zero or negative.  When blob->nbytes is not 0, every element the view
 * reaches must lie inside [data, data + nbytes).  Element [0, ..., 0] must
 * be aligned to the dtype's size.  On failure nothing is adopted: the
 * deleter is not called and the memory stays the caller's.
 */
struct tr_tensor *tr_from_blob(const struct tr_blob *blob, enum tr_dtype dtype,
                               int ndim, const int64_t *shape,
                               const int64_t *strides, struct tr_device device);
/* A new compact tensor in the device's pool holding a copy of the ndim-d,
 * C-ordered host array at src. */
struct tr_tensor *tr_from_data(const void *src, enum tr_dtype dtype, int ndim,
                               const int64_t *shape, struct tr_device device);
/* A new compact tensor in the device's pool; tr_empty leaves its contents
 * undefined, tr_zeros sets every byte to 0. */
struct tr_tensor *tr_empty(enum tr_dtype dtype, int ndim, const int64_t *shape,
                           struct tr_device device);
struct tr_tensor *tr_zeros(enum tr_dtype dtype, int ndim, const int64_t *shape,
                           struct tr_device device);

/* A C-contiguous tensor with t's values: a new handle of t's own storage
 * when t is already C-contiguous, otherwise a compact copy in the pool. */
struct tr_tensor *tr_contiguous(const struct tr_tensor *t);
/* Always a compact copy in the pool of t's device. */
struct tr_tensor *tr_clone(const struct tr_tensor *t);
/* A compact copy on another device (a new handle of t when the device is
 * t's own), complete when it returns.  TR_ERR_DEVICE when the device is not
 * available (a build without CUDA, no such device, no fake devices). */
struct tr_tensor *tr_to(const struct tr_tensor *t, struct tr_device device);

/*
 * Writes src's values into dst, element by element, converting the dtype:
 * both on the CPU (or both on one fake device, whose memory is the
 * host's), of one shape; dst writable and not overlapping src.
 * Conversions: floats to integers truncate toward zero and saturate at the
 * integer's limits (NaN gives 0); integers to narrower integers wrap (two's
 * complement); anything to bool is "not zero" (NaN is true); to floats
 * rounds to nearest even, once.
 */
tr_status tr_copy_into(struct tr_tensor *dst, const struct tr_tensor *src);
/* A compact copy of t converted to dtype (a new handle of t itself when t
 * is compact and already of dtype), on t's device: the CPU or a fake one. */
struct tr_tensor *tr_cast(const struct tr_tensor *t, enum tr_dtype dtype);

/* Copies t's values into the C-ordered host buffer dst of tr_nbytes(t). */
tr_status tr_copy_to_host(const struct tr_tensor *t, void *dst, size_t size);

/* ----------------------------------------------------------------- views */

/* Omitted start or stop of a slice, as in Python's x[:5] or x[2:] (so
 * INT64_MIN itself cannot be given as a bound; any value below -size
 * clamps the same way). */
#define TR_SLICE_NONE INT64_MIN

/* x[start:stop:step] along dim, with Python's rules (negative start and stop
 * count from the end, out-of-range bounds are clamped, step may be negative
 * but not 0). */
struct tr_tensor *tr_slice(const struct tr_tensor *t, int dim, int64_t start,
                           int64_t stop, int64_t step);
/* x[..., index, ...] along dim: the dimension goes away.  A negative index
 * counts from the end; out of range is TR_ERR_INDEX. */
struct tr_tensor *tr_select(const struct tr_tensor *t, int dim, int64_t index);
/* Swaps two dimensions (negative dims count from the end). */
struct tr_tensor *tr_transpose(const struct tr_tensor *t, int dim0, int dim1);
/* Reorders all dimensions: result dimension i is t's dimension dims[i]. */
struct tr_tensor *tr_permute(const struct tr_tensor *t, const int *dims,
                             int ndim);
/* Reverses the order of the n dimensions listed (negative dims count from
 * the end; none twice, TR_ERR_INVALID otherwise) without copying: their
 * strides are negated and element 0 becomes their last one, as NumPy's
 * flip.  A dimension of at most one element is left as it is, so flipping
 * twice gives back t's strides and offset. */
struct tr_tensor *tr_flip(const struct tr_tensor *t, const int *dims, int n);
/* The same elements under another shape, without copying; one entry may be
 * -1 (inferred).  TR_ERR_SHAPE when the element counts differ or when t's
 * strides cannot express the new shape (then only a copy can). */
struct tr_tensor *tr_reshape_view(const struct tr_tensor *t,
                                  const int64_t *shape, int ndim);
/* Any view of base's storage: dtype, shape and strides (in elements) of
 * one's choosing, element 0 at offset bytes from base's element 0.  The
 * view must lie inside the storage (when its length is known) and element
 * 0 be aligned to the dtype's size; TR_ERR_INVALID otherwise.  This is how
 * one mapping of a file becomes the views of all its tensors. */
struct tr_tensor *tr_as_strided(const struct tr_tensor *base, enum tr_dtype dtype, int ndim,
                                const int64_t *shape, const int64_t *strides,
                                int64_t offset);
/* Broadcasts size-1 dimensions (and new leading ones) to shape with stride
 * 0; -1 keeps a dimension's size. */
struct tr_tensor *tr_expand(const struct tr_tensor *t, const int64_t *shape,
                            int ndim);

/* --------------------------------------------------------------- queries */

/* Each query of a released or NULL handle records TR_ERR_HANDLE and returns
 * a value no live tensor has where there is one (-1 for ndim, numel and
 * offset; NULL for shape, strides and data; TR_DTYPE_COUNT for the dtype),
 * else 0, false, the CPU or TR_STORAGE_BORROWED. */

enum tr_dtype tr_tensor_dtype(const struct tr_tensor *t);
int tr_tensor_ndim(const struct tr_tensor *t);
const int64_t *tr_tensor_shape(const struct tr_tensor *t);
const int64_t *tr_tensor_strides(const struct tr_tensor *t); /* in elements */
int64_t tr_tensor_numel(const struct tr_tensor *t);
/* numel * item size: the bytes a compact copy needs. */
uint64_t tr_tensor_nbytes(const struct tr_tensor *t);
/* Bytes from the storage's start to element [0, ..., 0]. */
int64_t tr_tensor_offset(const struct tr_tensor *t);
struct tr_device tr_tensor_device(const struct tr_tensor *t);
enum tr_storage_kind tr_tensor_storage_kind(const struct tr_tensor *t);
unsigned tr_tensor_flags(const struct tr_tensor *t);
/* C order, ignoring the strides of dimensions of size 1. */
bool tr_tensor_is_contiguous(const struct tr_tensor *t);
/* The same test for a shape and strides in elements (a file's header). */
bool tr_strides_are_contiguous(int ndim, const int64_t *shape, const int64_t *strides);
/* True when a and b are views of the same storage. */
bool tr_tensor_shares_storage(const struct tr_tensor *a,
                              const struct tr_tensor *b);
/* Whether t is the only handle of its storage: no other handle reads or
 * writes its memory (what a caller checks before it passes a temporary it
 * is about to release as the destination of an op over it). */
bool tr_tensor_is_sole_handle(const struct tr_tensor *t);
/* Address of element [0, ..., 0] (a device address for CUDA tensors); NULL
 * for a tensor of no elements. */
const void *tr_tensor_data(const struct tr_tensor *t);
/* The same, for writing; NULL with TR_ERR_READONLY for read-only storage. */
void *tr_tensor_data_mut(struct tr_tensor *t);
/* Reads one element (index has one entry per dimension) as a double; a
 * CUDA tensor's element is copied from the device. */
tr_status tr_tensor_item(const struct tr_tensor *t, const int64_t *index,
                         double *out);

/* --------------------------------------------------------------- threads */

/* The number of threads every CPU kernel splits its work over from now on,
 * for every thread that runs ops: n, or, for 0 (the start), the default:
 * OMP_NUM_THREADS when it is set (tensorrun(1), ENVIRONMENT), else every
 * processor the process may run on.  The bits of every result are the
 * same for any count (blocks are fixed-size; tensorrun-pipeline(5)).
 * TR_ERR_INVALID for a negative n or one above 65536. */
tr_status tr_set_num_threads(int n);
/* The threads a kernel uses: the count set, or the default (at least 1;
 * worked out at its first use). */
int tr_num_threads(void);

/* Whether float products may use TF32 on a GPU from now on (a stage's
 * matmul_precision: high); false at the start.  The CPU never does. */
void tr_set_matmul_tf32(bool allowed);
bool tr_matmul_tf32(void);

/* ---------------------------------------------------------------- scopes */

struct tr_scope;

/* Opens a scope on the calling thread's stack.  NULL only when out of
 * memory. */
struct tr_scope *tr_scope_begin(void);
/*
 * Closes scope, which must be the thread's innermost: every handle in it is
 * released except the n handles in keep, which move to the parent scope (or
 * become free-standing when scope is at the bottom of the stack).  A keep
 * entry that belongs to an outer scope, or is NULL, is left alone.  Fails,
 * leaving the scope open and untouched, when scope is not the innermost or
 * a keep entry is a released handle.
 */
tr_status tr_scope_end(struct tr_scope *scope, struct tr_tensor *const *keep,
                       size_t n);
/* Moves t to its scope's parent now (free-standing from the bottom scope;
 * nothing for a free-standing handle). */
tr_status tr_retain(struct tr_tensor *t);
/* Releases t at once, whatever scope holds it.  NULL is a no-op.  A handle
 * held by a scope can be released (or retained) only by the thread that
 * opened the scope: TR_ERR_STATE from any other. */
tr_status tr_release(struct tr_tensor *t);
/* Takes t out of whatever scope holds it: it becomes free-standing and
 * lives until tr_release.  For handles that an object keeps for itself. */
tr_status tr_detach(struct tr_tensor *t);
/* Opens a long-lived bottom scope for interactive use; the stack must be
 * empty. */
tr_status tr_session_begin(void);
/* Ends every scope still open above the session, then the session itself,
 * releasing all their handles. */
tr_status tr_session_end(void);
/* Open scopes on the calling thread, and handles held by the innermost. */
size_t tr_scope_depth(void);
size_t tr_scope_size(const struct tr_scope *scope);

/* Use-after-release detection: when on, released handles are poisoned and
 * held back from reuse for a while, so that a later use of one fails with
 * TR_ERR_HANDLE instead of reading freed memory.  On by default in builds
 * configured with --enable-debug.  Returns the previous setting. */
bool tr_debug_handles(bool on);

#ifdef __cplusplus
}
#endif

#endif /* TENSORRUN_H */
