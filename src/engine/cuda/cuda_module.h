/*
 * cuda_module.h - the table of functions through which the engine uses the
 * CUDA module (tensorrun-cuda.so).  Plain C, no CUDA header: the engine
 * includes it, and the module (src/engine/cuda/) fills it in.
 *
 * Every function that can fail returns 0 on success, or -1 after writing a
 * sentence into err (errsize bytes).
 */
#ifndef TR_CUDA_MODULE_H
#define TR_CUDA_MODULE_H

#include <stddef.h>
#include <stdint.h>

#include "../ew_scalar.h" /* struct tr__ew_params, enum tr__ew_code */

#ifdef __cplusplus
extern "C" {
#endif

#define TR_CUDA_MODULE_ABI 4
#define TR_CUDA_MODULE_SYMBOL "tr_cuda_module_get"
#define TR_CUDA_MAX_NDIM 8

#define TR_CUDA_MAX_OPERANDS 3

/* An operand of map: device memory, or one value that every element reads. */
struct tr_cuda_operand {
    const void *data;        /* element 0 on the device; NULL: value */
    int dtype;               /* enum tr_dtype */
    /* byte strides in the result's shape: 0 along a broadcast dimension */
    int64_t strides[TR_CUDA_MAX_NDIM];
    unsigned char value[8];  /* of dtype, when data is NULL */
};

/*
 * One elementwise op over a result of shape shape: each operand's element
 * converted to in_compute (by tr_copy_into's rules), the function of
 * ew_scalar.h of code applied (TR__EW_NONE: the first operand as it is),
 * its out_compute value converted to out_dtype and stored.  out's strides
 * are in bytes and never make two elements one.
 */
struct tr_cuda_map {
    int code;                /* enum tr__ew_code */
    int nin;                 /* 1 .. TR_CUDA_MAX_OPERANDS */
    int ndim;
    int64_t shape[TR_CUDA_MAX_NDIM];
    void *out;
    int out_dtype, in_compute, out_compute;
    int64_t out_strides[TR_CUDA_MAX_NDIM];
    struct tr_cuda_operand in[TR_CUDA_MAX_OPERANDS];
    struct tr__ew_params params;
};

/* The reductions of reduce. */
enum tr_cuda_reduce_kind {
    TR_CUDA_SUM,
    TR_CUDA_MEAN,
    TR_CUDA_MAX,
    TR_CUDA_MIN,
    TR_CUDA_ARGMAX,
    TR_CUDA_ARGMIN,
    TR_CUDA_NORM
};

/*
 * A reduction: output o (of nout, row-major over the kept dimensions)
 * reduces the n values at x + its kept offset + each reduced offset (byte
 * strides), read as in_compute by tr_copy_into's rules.  The order is
 * fixed by n alone (cuda/reduce_body.h), so the bits are the same every
 * run.  partials holds nout * tr__cuda_reduce_groups(n) accumulators
 * (struct tr__cuda_acc) when that is more than one per output, else may
 * be NULL.
 */
struct tr_cuda_reduce {
    int kind;                /* enum tr_cuda_reduce_kind */
    const void *x;
    int x_dtype, in_compute;
    int nkept, nreduced;
    int64_t kept_shape[TR_CUDA_MAX_NDIM], kept_strides[TR_CUDA_MAX_NDIM];
    int64_t reduced_shape[TR_CUDA_MAX_NDIM], reduced_strides[TR_CUDA_MAX_NDIM];
    int64_t nout, n;
    double ord;              /* norm's */
    void *out;               /* nout compact values of out_dtype */
    int out_dtype;
    void *partials;
};

/*
 * batch row-major products c = a b through cuBLAS: a is m x k, b k x n, c
 * m x n compact (ldc n, batch stride m * n), all of dtype (f32, f64, f16
 * or bf16; f16 and bf16 computed in f32).  An operand is row-major
 * (element (i, j) at i * ld + j) or, trans set, stored transposed (at i +
 * j * ld); batch strides are in elements, 0 to broadcast.  f32 products
 * use TF32 only with tf32 set.
 */
struct tr_cuda_matmul {
    int dtype, tf32;
    int64_t m, n, k, batch;
    const void *a, *b;
    int64_t lda, ldb, stride_a, stride_b;
    int trans_a, trans_b;
    void *c;
};

/* The ops of rowwise. */
enum tr_cuda_rowwise_kind {
    TR_CUDA_SOFTMAX,
    TR_CUDA_LOG_SOFTMAX,
    TR_CUDA_L2_NORMALIZE,
    TR_CUDA_LAYER_NORM,
    TR_CUDA_RMS_NORM
};

/*
 * A row-wise op along one dimension: line l (of nlines, row-major over the
 * other dimensions) is len values at x + its offset, x_step bytes apart,
 * read as compute (f32 or f64); its results go to y + its offset, y_step
 * apart, as y_dtype.  weight and bias (data NULL and dtype -1: none) are
 * len values, their strides[0] apart.  The sums are in f64, in an order
 * fixed by len alone (cuda/rowwise_body.h).
 */
struct tr_cuda_rowwise {
    int kind;                /* enum tr_cuda_rowwise_kind */
    const void *x;
    void *y;
    int x_dtype, y_dtype, compute;
    int nother;
    int64_t other_shape[TR_CUDA_MAX_NDIM];
    int64_t x_strides[TR_CUDA_MAX_NDIM], y_strides[TR_CUDA_MAX_NDIM];
    int64_t nlines, len, x_step, y_step;
    struct tr_cuda_operand weight, bias;
    double eps;
};

/*
 * gather and index_select: element e of the compact result (shape, row-
 * major) is x's element at its coordinates, but along dim the index's
 * value there (index: strides in the result's shape; any integer dtype).
 * An index outside [0, size) (from_end: [-size, size), a negative one
 * counting from the end) stores nothing and lowers *first_bad (device
 * memory, UINT64_MAX before) to e, so that the caller can name the first.
 */
struct tr_cuda_gather {
    int ndim, dim, from_end;
    int64_t shape[TR_CUDA_MAX_NDIM];
    const void *x;
    int64_t x_strides[TR_CUDA_MAX_NDIM]; /* bytes */
    int64_t item, size;
    void *out;
    struct tr_cuda_operand index;
    uint64_t *first_bad;
};

/*
 * topk: for each line (of nlines, row-major over the other dimensions) of
 * len values at x + its offset, x_step bytes apart, the k values first in
 * the order of topk_body.h (largest first, or smallest with largest 0;
 * NaN first, as the largest; ties by position) and their positions:
 * values (of x's dtype, item bytes) and indices (i64) compact in the
 * result's shape, out_step elements apart along dim.
 */
struct tr_cuda_topk {
    const void *x;
    void *values;
    int64_t *indices;
    int x_dtype, largest, nother;
    int64_t other_shape[TR_CUDA_MAX_NDIM];
    int64_t x_strides[TR_CUDA_MAX_NDIM];   /* bytes */
    int64_t out_strides[TR_CUDA_MAX_NDIM]; /* elements */
    int64_t nlines, len, k, item, x_step, out_step;
};

enum tr_cuda_copy_kind {
    TR_CUDA_HOST_TO_DEVICE,
    TR_CUDA_DEVICE_TO_HOST,
    TR_CUDA_DEVICE_TO_DEVICE
};

/*
 * Work on a device is one stream, done in the order it was issued: the
 * copies, fills and gathers below return once enqueued.  A mark is a point
 * in that stream, numbered from 1 in the order marks are made: it is done
 * once all work issued before it is.  Memory a queued copy reads or
 * writes must stay valid until a mark made after it is done.
 */
struct tr_cuda_module {
    int abi; /* TR_CUDA_MODULE_ABI */
    /* Devices the runtime sees (0 or more), or -1 when it cannot start. */
    int (*device_count)(char *err, size_t errsize);
    /* Device memory, or NULL when the device has none left. */
    void *(*malloc)(int device, uint64_t bytes);
    void (*free)(int device, void *ptr);
    /* Page-locked host memory (what copies read at full speed), or NULL. */
    void *(*host_alloc)(uint64_t bytes);
    void (*host_free)(void *ptr);
    int (*memcpy)(int device, void *dst, const void *src, uint64_t bytes,
                  enum tr_cuda_copy_kind kind, char *err, size_t errsize);
    int (*memset)(int device, void *dst, int value, uint64_t bytes, char *err,
                  size_t errsize);
    /* Gathers a strided view on the device into a compact buffer on the same
     * device.  strides are in bytes and may be 0 or negative; src points at
     * element 0. */
    int (*copy_strided)(int device, void *dst, const void *src, uint64_t itemsize,
                        int ndim, const int64_t *shape, const int64_t *strides,
                        char *err, size_t errsize);
    /* Queues map m (m itself may go once this returns). */
    int (*map)(int device, const struct tr_cuda_map *m, char *err, size_t errsize);
    /* Queues product p. */
    int (*matmul)(int device, const struct tr_cuda_matmul *p, char *err, size_t errsize);
    /* Queues topk t. */
    int (*topk)(int device, const struct tr_cuda_topk *t, char *err, size_t errsize);
    /* Queues gather g. */
    int (*gather)(int device, const struct tr_cuda_gather *g, char *err, size_t errsize);
    /* Queues row-wise op w. */
    int (*rowwise)(int device, const struct tr_cuda_rowwise *w, char *err, size_t errsize);
    /* Queues reduction r. */
    int (*reduce)(int device, const struct tr_cuda_reduce *r, char *err, size_t errsize);
    /* Fills n compact values of float dtype at dst with rand (normal 0)
     * or randn of seed, element i as philox_math.h defines it. */
    int (*random)(int device, void *dst, int dtype, int normal, uint64_t seed, uint64_t n,
                  char *err, size_t errsize);
    /* A mark after the work issued so far; 0 when none could be made (the
     * stream was waited for instead: everything is done). */
    uint64_t (*mark)(int device);
    /* 1 when mark is done, 0 when not yet, -1 on an error. */
    int (*mark_done)(int device, uint64_t mark, char *err, size_t errsize);
    /* Waits until mark is done. */
    int (*mark_wait)(int device, uint64_t mark, char *err, size_t errsize);
    /* Waits until all work issued on the device is done. */
    int (*synchronize)(int device, char *err, size_t errsize);
};

typedef const struct tr_cuda_module *(*tr_cuda_module_get_fn)(int abi);

#ifdef __cplusplus
}
#endif

#endif /* TR_CUDA_MODULE_H */
