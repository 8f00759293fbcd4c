/*
 * test_tensor.c - borrowing, adopting and strided wrapping of caller
 * memory; copies into the pool; read-only and pinned storage; handle checks.
 */
#include "config.h"

#include <string.h>

#include "iter_impl.h"
#include "tensorrun.h"
#include "tap.h"

/* Sum of every element, read one by one through the view. */
static double sum_all(const struct tr_tensor *t)
{
    int ndim = tr_tensor_ndim(t);
    const int64_t *shape = tr_tensor_shape(t);
    int64_t index[TR_MAX_DIMS] = {0}, n = tr_tensor_numel(t);
    double total = 0, v;

    for (int64_t k = 0; k < n; k++) {
        if (tr_tensor_item(t, index, &v) != TR_OK)
            return -1e300;
        total += v;
        for (int d = ndim - 1; d >= 0; d--) {
            if (++index[d] < shape[d])
                break;
            index[d] = 0;
        }
    }
    return total;
}

static void test_borrow(void)
{
    float buf[8];
    int64_t shape[1] = {8};
    struct tr_blob blob = {.data = buf, .nbytes = sizeof buf};
    struct tr_tensor *t;

    for (int i = 0; i < 8; i++)
        buf[i] = 1.0f;
    t = tr_from_blob(&blob, TR_DTYPE_F32, 1, shape, NULL, TR_CPU);
    ok(t != NULL, "borrow: 8 floats wrapped");
    ok(tr_tensor_data(t) == (const void *)buf, "borrow: the tensor's data is the buffer");
    is_int(tr_tensor_storage_kind(t), TR_STORAGE_BORROWED, "borrow: storage kind BORROWED");
    is_double(sum_all(t), 8.0, "borrow: sum is 8");
    buf[0] = 100.0f;
    is_double(sum_all(t), 107.0, "borrow: after buf[0] = 100 the sum is 107 (no copy)");
    tr_release(t);
    ok(buf[0] == 100.0f && buf[7] == 1.0f, "borrow: releasing leaves the buffer alone");
}

struct deleter_log {
    int calls;
    void *data;
};

static void count_deleter(void *data, void *ctx)
{
    struct deleter_log *log = ctx;

    log->calls++;
    log->data = data;
    free(data);
}

static void test_adopt(void)
{
    struct deleter_log log = {0, NULL};
    double *mem = malloc(12 * sizeof *mem);
    int64_t shape[2] = {3, 4};
    struct tr_blob blob = {.data = mem, .nbytes = 12 * sizeof *mem,
                           .deleter = count_deleter, .deleter_ctx = &log};
    struct tr_tensor *t, *view, *view_of_view;

    for (int i = 0; i < 12; i++)
        mem[i] = i;
    t = tr_from_blob(&blob, TR_DTYPE_F64, 2, shape, NULL, TR_CPU);
    is_int(tr_tensor_storage_kind(t), TR_STORAGE_ADOPTED, "adopt: storage kind ADOPTED");
    view = tr_transpose(t, 0, 1);
    view_of_view = tr_select(view, 0, 2);
    ok(view && view_of_view && tr_tensor_shares_storage(t, view_of_view),
       "adopt: a view of a view shares the storage");
    tr_release(t);
    is_int(log.calls, 0, "adopt: no delete while views remain");
    tr_release(view);
    is_int(log.calls, 0, "adopt: no delete while a view of a view remains");
    is_double(sum_all(view_of_view), 2 + 6 + 10, "adopt: the last view still reads the data");
    tr_release(view_of_view);
    is_int(log.calls, 1, "adopt: deleted once, after the last view");
    ok(log.data == (void *)mem, "adopt: the deleter gets the data pointer");

    /* a failed adoption leaves the memory with the caller */
    log.calls = 0;
    mem = malloc(4 * sizeof *mem);
    blob = (struct tr_blob){.data = mem, .nbytes = 4 * sizeof *mem,
                            .deleter = count_deleter, .deleter_ctx = &log};
    ok(tr_from_blob(&blob, TR_DTYPE_F64, 2, shape, NULL, TR_CPU) == NULL,
       "adopt: a view past the buffer's end is refused");
    is_int(log.calls, 0, "adopt: a refused adoption never calls the deleter");
    free(mem);
}

static void test_strided_region(void)
{
    float buf[4 * 6];
    int64_t shape[2] = {2, 3}, strides[2] = {6, 1};
    struct tr_blob blob = {.data = buf, .nbytes = sizeof buf, .offset = (1 * 6 + 2) * 4};
    struct tr_tensor *region, *compact;
    const float want[6] = {12, 13, 14, 22, 23, 24};
    float got[6];

    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 6; c++)
            buf[r * 6 + c] = (float)(r * 10 + c);
    region = tr_from_blob(&blob, TR_DTYPE_F32, 2, shape, strides, TR_CPU);
    ok(region && tr_tensor_data(region) == (const void *)&buf[8],
       "region: element [0,0] is buf[8], no copy");
    ok(!tr_tensor_is_contiguous(region), "region: a pitched view is not contiguous");
    ok(tr_copy_to_host(region, got, sizeof got) == TR_OK && memcmp(got, want, sizeof want) == 0,
       "region: reads 12 13 14 22 23 24");
    is_double(sum_all(region), 108, "region: sums to 108");

    compact = tr_contiguous(region);
    ok(compact && tr_tensor_is_contiguous(compact), "region: tr_contiguous is contiguous");
    ok(!tr_tensor_shares_storage(compact, region) &&
           tr_tensor_storage_kind(compact) == TR_STORAGE_POOL,
       "region: tr_contiguous of it is an owned copy in the pool");
    ok(memcmp(tr_tensor_data(compact), want, sizeof want) == 0, "region: the copy is compact");
    buf[8] = -1;
    is_double(sum_all(compact), 108, "region: the copy does not follow the buffer");
    tr_release(compact);

    /* the same region one row lower reaches past the buffer */
    blob.offset = (3 * 6 + 2) * 4;
    ok(tr_from_blob(&blob, TR_DTYPE_F32, 2, shape, strides, TR_CPU) == NULL &&
           tr_last_status() == TR_ERR_INVALID,
       "region: a region past the end is refused: %s", tr_last_error());
    blob.nbytes = 0; /* unknown length: not checked */
    compact = tr_from_blob(&blob, TR_DTYPE_F32, 1, shape, NULL, TR_CPU);
    ok(compact != NULL, "region: without a byte length the extent is not checked");
    tr_release(compact);
    tr_release(region);
}

static void test_blob_checks(void)
{
    float buf[16] = {0};
    int64_t shape[2] = {4, 4}, bad_shape[2] = {4, -1}, strides[2] = {4, 1};
    int64_t neg[1] = {-1}, len[1] = {16}, big[2] = {INT64_MAX / 2, 4};
    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    struct tr_blob blob = {.data = buf, .nbytes = sizeof buf};
    struct tr_tensor *t;

    ok(!tr_from_blob(&blob, TR_DTYPE_F32, 2, bad_shape, NULL, TR_CPU) &&
           tr_last_status() == TR_ERR_SHAPE,
       "blob: a negative size is refused: %s", tr_last_error());
    ok(!tr_from_blob(&blob, TR_DTYPE_F32, 9, nine, NULL, TR_CPU) &&
           tr_last_status() == TR_ERR_SHAPE,
       "blob: more than 8 dimensions are refused");
    ok(!tr_from_blob(&blob, TR_DTYPE_F32, 2, big, NULL, TR_CPU) &&
           tr_last_status() == TR_ERR_SHAPE,
       "blob: an overflowing element count is refused: %s", tr_last_error());
    ok(!tr_from_blob(&blob, (enum tr_dtype)99, 2, shape, NULL, TR_CPU) &&
           tr_last_status() == TR_ERR_DTYPE,
       "blob: an invalid dtype is refused");
    ok(!tr_from_blob(&blob, TR_DTYPE_F32, 1, neg, neg, TR_CPU), "blob: negative shapes fail");

    /* negative strides: the rows reversed, element 0 at the last row */
    blob.offset = 12 * 4;
    strides[0] = -4;
    t = tr_from_blob(&blob, TR_DTYPE_F32, 2, shape, strides, TR_CPU);
    ok(t && tr_tensor_data(t) == (const void *)&buf[12], "blob: a reversed view of rows");
    tr_release(t);
    blob.offset = 8 * 4;
    ok(!tr_from_blob(&blob, TR_DTYPE_F32, 2, shape, strides, TR_CPU) &&
           strstr(tr_last_error(), "before the buffer's start"),
       "blob: a negative stride reaching before the start is refused: %s", tr_last_error());

    /* stride 0: one row seen four times */
    strides[0] = 0;
    blob.offset = 0;
    t = tr_from_blob(&blob, TR_DTYPE_F32, 2, shape, strides, TR_CPU);
    ok(t != NULL, "blob: zero strides are allowed");
    tr_release(t);

    blob.offset = 2; /* f32 data must sit on 4-byte boundaries */
    ok(!tr_from_blob(&blob, TR_DTYPE_F32, 1, len, NULL, TR_CPU) &&
           tr_last_status() == TR_ERR_INVALID,
       "blob: misaligned data is refused: %s", tr_last_error());
    blob.offset = 0;
    blob.data = NULL;
    ok(!tr_from_blob(&blob, TR_DTYPE_F32, 1, len, NULL, TR_CPU) &&
           tr_last_status() == TR_ERR_INVALID,
       "blob: a NULL data pointer is refused");
    len[0] = 0;
    t = tr_from_blob(&blob, TR_DTYPE_F32, 1, len, NULL, TR_CPU);
    ok(t && tr_tensor_numel(t) == 0 && tr_tensor_data(t) == NULL,
       "blob: an empty tensor needs no data");
    tr_release(t);
    ok(!tr_from_blob(NULL, TR_DTYPE_F32, 1, len, NULL, TR_CPU), "blob: a NULL blob is refused");
}

static void test_flags(void)
{
    float buf[6] = {1, 2, 3, 4, 5, 6};
    int64_t shape[2] = {2, 3};
    struct tr_blob blob = {.data = buf, .nbytes = sizeof buf,
                           .flags = TR_FLAG_READONLY | TR_FLAG_PINNED};
    struct tr_tensor *t = tr_from_blob(&blob, TR_DTYPE_F32, 2, shape, NULL, TR_CPU);
    struct tr_tensor *view = tr_transpose(t, 0, 1), *copy;

    is_int(tr_tensor_flags(t), TR_FLAG_READONLY | TR_FLAG_PINNED, "flags: recorded");
    ok(tr_tensor_data_mut(t) == NULL && tr_last_status() == TR_ERR_READONLY,
       "flags: no write access to read-only memory: %s", tr_last_error());
    ok(tr_tensor_data_mut(view) == NULL && tr_last_status() == TR_ERR_READONLY,
       "flags: views of read-only memory are read-only");
    copy = tr_contiguous(view);
    ok(copy && tr_tensor_data_mut(copy) != NULL && tr_tensor_flags(copy) == 0,
       "flags: a copy in the pool is writable and not pinned");
    ok(tr_tensor_data(t) == (const void *)buf, "flags: the read-only data is still readable");
    tr_release(copy);
    tr_release(view);
    tr_release(t);
}

static void test_copies(void)
{
    int32_t src[6] = {1, 2, 3, 4, 5, 6}, got[6];
    int64_t shape[2] = {2, 3}, scalar_shape[1] = {0};
    struct tr_tensor *t = tr_from_data(src, TR_DTYPE_I32, 2, shape, TR_CPU);
    struct tr_tensor *alias, *alias2, *clone, *zeros, *scalar;
    double v;

    ok(t && tr_tensor_storage_kind(t) == TR_STORAGE_POOL && tr_tensor_data(t) != (void *)src,
       "from_data: a copy in the pool");
    src[0] = 99;
    ok(tr_tensor_item(t, (int64_t[]){0, 0}, &v) == TR_OK && v == 1,
       "from_data: later changes to the source do not show");
    alias = tr_contiguous(t);
    ok(alias && alias != t && tr_tensor_shares_storage(alias, t),
       "contiguous: a compact tensor gives a new handle of the same storage");
    clone = tr_clone(t);
    ok(clone && !tr_tensor_shares_storage(clone, t), "clone: always a new storage");
    ok(tr_copy_to_host(clone, got, sizeof got) == TR_OK && got[0] == 1 && got[5] == 6,
       "clone: same values");
    ok(tr_copy_to_host(clone, got, 4) == TR_ERR_INVALID, "copy_to_host: too small a buffer");
    zeros = tr_zeros(TR_DTYPE_I32, 2, shape, TR_CPU);
    ok(zeros && tr_copy_to_host(zeros, got, sizeof got) == TR_OK && got[0] == 0 && got[5] == 0,
       "zeros: all zero");
    ok(tr_tensor_item(t, (int64_t[]){2, 0}, &v) == TR_ERR_INDEX,
       "item: an index past the end is refused: %s", tr_last_error());

    scalar = tr_from_data(&(double){2.5}, TR_DTYPE_F64, 0, NULL, TR_CPU);
    ok(scalar && tr_tensor_ndim(scalar) == 0 && tr_tensor_numel(scalar) == 1 &&
           tr_tensor_item(scalar, NULL, &v) == TR_OK && v == 2.5,
       "rank 0: one element, no shape");
    tr_release(scalar);
    scalar = tr_empty(TR_DTYPE_F32, 1, scalar_shape, TR_CPU);
    ok(scalar && tr_tensor_numel(scalar) == 0 && tr_tensor_nbytes(scalar) == 0,
       "empty: zero elements take no memory");
    tr_release(scalar);
    alias2 = tr_to(t, TR_CPU);
    ok(alias2 && tr_tensor_shares_storage(alias2, t), "to: the same device gives a new handle");
    tr_release(alias2);
    tr_release(zeros);
    tr_release(clone);
    tr_release(alias);
    tr_release(t);
}

static void test_released_handles(void)
{
    int64_t shape[1] = {4};
    bool was = tr_debug_handles(true);
    struct tr_tensor *t = tr_zeros(TR_DTYPE_F32, 1, shape, TR_CPU);

#ifdef TR_DEBUG
    ok(was, "handles: checks are on by default in a debug build");
#else
    ok(!was, "handles: checks are off by default in a release build");
#endif

    tr_release(t);
    ok(tr_tensor_ndim(t) == -1 && tr_last_status() == TR_ERR_HANDLE,
       "handles: a query on a released handle is caught: %s", tr_last_error());
    ok(tr_slice(t, 0, 0, 2, 1) == NULL && tr_last_status() == TR_ERR_HANDLE,
       "handles: a view of a released handle is caught");
    is_int(tr_release(t), TR_ERR_HANDLE, "handles: a second release is caught");
    ok(tr_clone(NULL) == NULL && tr_last_status() == TR_ERR_HANDLE, "handles: NULL is caught");
    is_int(tr_release(NULL), TR_OK, "handles: releasing NULL is a no-op");
    tr_debug_handles(was);
}

/* A dimension of size 1 may carry any stride: nothing may overflow on it. */
static void test_huge_strides(void)
{
    float buf[3] = {1, 2, 3}, got[3];
    uint8_t bytes[2] = {7, 9};
    int64_t shape[2] = {1, 3}, strides[2] = {INT64_MAX, 1};
    int64_t wide[1] = {2}, wide_stride[1] = {INT64_C(1) << 62}, three[3] = {1, 2, 1};
    struct tr_blob blob = {.data = buf, .nbytes = sizeof buf};
    struct tr_blob blob8 = {.data = bytes};
    struct tr_tensor *t = tr_from_blob(&blob, TR_DTYPE_F32, 2, shape, strides, TR_CPU);
    struct tr_tensor *clone = tr_clone(t), *flat = tr_reshape_view(t, &shape[1], 1);
    struct tr_tensor *u, *r;

    ok(t && tr_tensor_is_contiguous(t), "huge stride on a size-1 dimension: accepted");
    ok(clone && tr_copy_to_host(clone, got, sizeof got) == TR_OK && got[2] == 3,
       "huge stride on a size-1 dimension: copied");
    ok(flat && tr_tensor_strides(flat)[0] == 1, "huge stride on a size-1 dimension: reshaped");
    /* stride 2^62 on a 2-element u8 view is within int64; a reshape that adds
     * size-1 dimensions around it must not overflow their strides */
    u = tr_from_blob(&blob8, TR_DTYPE_U8, 1, wide, wide_stride, TR_CPU);
    r = tr_reshape_view(u, three, 3);
    ok(u && r && tr_tensor_shape(r)[1] == 2 && tr_tensor_strides(r)[1] == wide_stride[0],
       "huge stride: reshape to [1,2,1] keeps the stepped stride");
    tr_release(r);
    tr_release(u);
    tr_release(flat);
    tr_release(clone);
    tr_release(t);
}

/* Extreme but legal sizes, strides and offsets must fail cleanly or work,
 * never overflow (the sanitizer build turns any overflow into a failure). */
static void test_no_overflow(void)
{
    uint8_t bytes[8] = {0};
    float src[12], dst[13];
    int64_t empty_huge[3] = {0, INT64_MAX, 4}, empty[2] = {3, 0};
    int64_t huge_strides[2] = {INT64_MAX, 1}, six[1] = {6};
    int64_t shape23[2] = {2, 3}, wild[2] = {1, INT64_C(3100000000000000000)};
    int64_t m[2] = {3, 4};
    struct tr_blob blob = {.data = bytes, .offset = INT64_MAX};
    struct tr_tensor *t, *v, *w;
    struct tr__iter it;
    const int64_t *iter_strides[1] = {wild};

    ok(!tr_empty(TR_DTYPE_U8, 3, empty_huge, TR_CPU) && tr_last_status() == TR_ERR_SHAPE,
       "overflow: an empty shape whose other sizes overflow is refused: %s", tr_last_error());
    t = tr_from_blob(&blob, TR_DTYPE_U8, 2, empty, huge_strides, TR_CPU);
    ok(t && tr_tensor_offset(t) == 0 && tr_tensor_strides(t)[0] == 1,
       "overflow: an empty blob view gets harmless strides and offset");
    v = tr_select(t, 0, 2);
    w = tr_slice(t, 0, 1, 2, 1);
    ok(v && w && tr_tensor_numel(v) == 0 && tr_tensor_numel(w) == 0,
       "overflow: views of it stay empty");
    tr_release(w);
    tr_release(v);
    v = tr_reshape_view(t, empty_huge, 3);
    ok(!v && tr_last_status() == TR_ERR_SHAPE, "overflow: reshaping it to an overflowing shape fails");
    tr_release(t);

    /* a u8 view whose inner stride times its size overflows int64 */
    blob = (struct tr_blob){.data = bytes};
    t = tr_from_blob(&blob, TR_DTYPE_U8, 2, shape23, wild, TR_CPU);
    ok(t != NULL, "overflow: a view reaching 6.2e18 bytes of an unchecked blob");
    ok(!tr_reshape_view(t, six, 1) && tr_last_status() == TR_ERR_SHAPE,
       "overflow: reshaping it fails cleanly: %s", tr_last_error());
    tr_release(t);
    tr__iter_init(&it, 2, shape23, 1, iter_strides);
    is_int(it.ndim, 2, "overflow: the kernels' iterator does not merge such dimensions");

    /* a caller's buffer of any alignment */
    for (int i = 0; i < 12; i++)
        src[i] = (float)i;
    t = tr_from_data(src, TR_DTYPE_F32, 2, m, TR_CPU);
    v = tr_transpose(t, 0, 1);
    ok(tr_copy_to_host(v, (char *)dst + 1, sizeof dst - 1) == TR_OK,
       "copy_to_host: a misaligned destination works");
    memmove(dst, (char *)dst + 1, 12 * sizeof(float));
    ok(dst[1] == 4 && dst[11] == 11, "copy_to_host: and holds the transposed values");
    tr_release(v);
    tr_release(t);
}

int main(void)
{
    test_borrow();
    test_adopt();
    test_strided_region();
    test_blob_checks();
    test_flags();
    test_copies();
    test_released_handles();
    test_huge_strides();
    test_no_overflow();
    return done_testing();
}
