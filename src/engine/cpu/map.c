/*
 * cpu/map.c - the blocked elementwise loop: broadcast operands read a
 * block at a time into compute-typed buffers (or used in place when they
 * already are such a block), a function applied, the block stored: into
 * the result's memory, or, for a streamed result, into the thread's stage
 * (each thread's blocks follow one another in the result, so a stage
 * fills with one run and is handed over in one call).
 */
#include <stdlib.h>
#include <string.h>

#include "../kernel_impl.h"

/* Values per block: small enough for every operand's block to stay in the
 * cache, large enough for the function's loop to be worth starting. */
#define MAP_BLOCK 2048
#define MAP_OPERANDS (1 + 3)
#define PARALLEL_ELEMENTS 32768

tr_status tr__map(struct tr_tensor *out, enum tr_dtype out_compute,
                  const struct tr_tensor *const *in, int nin, enum tr_dtype in_compute,
                  tr__block_fn fn, const void *ctx)
{
    return tr__map_stream(out, NULL, out_compute, in, nin, in_compute, fn, ctx);
}

tr_status tr__map_stream(struct tr_tensor *out, const struct tr__store *store,
                         enum tr_dtype out_compute, const struct tr_tensor *const *in, int nin,
                         enum tr_dtype in_compute, tr__block_fn fn, const void *ctx)
{
    struct tr_tensor *views[MAP_OPERANDS - 1] = {NULL};
    int64_t strides[MAP_OPERANDS][TR_MAX_DIMS];
    const int64_t *stride_ptrs[MAP_OPERANDS];
    const char *bases[MAP_OPERANDS];
    enum tr_dtype dtypes[MAP_OPERANDS];
    struct tr__iter it;
    int64_t rows, len, chunks, blocks, inner[MAP_OPERANDS];
    size_t in_size = tr_dtype_size(in_compute), out_size = tr_dtype_size(out_compute);
    int64_t item = (int64_t)tr_dtype_size(out->dtype);
    bool streamed = store && store->fn, failed = false;
    atomic_int store_error = 0;
    char *out_base;
    tr_status s = TR_OK;

    TR_RETURN_ERROR_IF(nin < 1 || nin > MAP_OPERANDS - 1, TR_ERR_INVALID,
                       "map: %d inputs (1 to %d)", nin, MAP_OPERANDS - 1);
    out_base = tr_tensor_data_mut(out);
    if (tr_tensor_numel(out) == 0)
        return TR_OK;
    tr__byte_strides(out, strides[0]);
    dtypes[0] = out->dtype;
    for (int k = 0; k < nin && s == TR_OK; k++) {
        views[k] = tr_expand(in[k], out->shape, out->ndim);
        if (!views[k]) {
            s = tr_last_status();
            break;
        }
        tr__byte_strides(views[k], strides[k + 1]);
        bases[k + 1] = (const char *)tr_tensor_data(views[k]);
        dtypes[k + 1] = views[k]->dtype;
    }
    if (s != TR_OK)
        goto done;
    for (int k = 0; k <= nin; k++)
        stride_ptrs[k] = strides[k];
    tr__iter_init(&it, out->ndim, out->shape, nin + 1, stride_ptrs);
    rows = tr__iter_rows(&it);
    len = it.shape[it.ndim - 1];
    for (int k = 0; k <= nin; k++)
        inner[k] = it.strides[k][it.ndim - 1];
    chunks = (len + MAP_BLOCK - 1) / MAP_BLOCK;
    blocks = rows * chunks;

#pragma omp parallel num_threads(tr_num_threads()) if (rows * len > PARALLEL_ELEMENTS)
    {
        _Alignas(64) char buffers[MAP_OPERANDS][MAP_BLOCK * 8];
        /* a value broadcast along the row is converted once per thread,
         * not once per block */
        const char *filled[MAP_OPERANDS] = {NULL};
        int64_t filled_n[MAP_OPERANDS] = {0};
        struct tr__stage stage = {0};

        if (streamed) {
            tr__stage_init(&stage, store, TR__STAGE_BYTES);
            if (!stage.buf) {
#pragma omp atomic write
                failed = true;
            }
        }
#pragma omp for schedule(static)
        for (int64_t b = 0; b < blocks; b++) {
            int64_t row = b / chunks, start = b % chunks * MAP_BLOCK;
            int64_t n = len - start < MAP_BLOCK ? len - start : MAP_BLOCK;
            int64_t off[MAP_OPERANDS], step = inner[0];
            const char *args[MAP_OPERANDS - 1];
            char *dst;

            if (streamed && (!stage.buf || stage.err))
                continue;
            tr__iter_row_offsets(&it, row, off);
            for (int k = 1; k <= nin; k++) {
                const char *src = bases[k] + off[k] + start * inner[k];
                if (dtypes[k] == in_compute && inner[k] == (int64_t)in_size) {
                    args[k - 1] = src; /* already a compact block of the right type */
                } else if (inner[k] == 0 && filled[k] == src && filled_n[k] >= n) {
                    args[k - 1] = buffers[k];
                } else {
                    if (inner[k] == 0) {
                        filled[k] = src;
                        filled_n[k] = n;
                    }
                    tr__cpu_cast_row(buffers[k], (int64_t)in_size, in_compute, src, inner[k],
                                     dtypes[k], n);
                    args[k - 1] = buffers[k];
                }
            }
            if (streamed) {
                /* out is compact: a row's values follow one another */
                step = item;
                dst = tr__stage_place(&stage, (uint64_t)(off[0] + start * item),
                                      (uint64_t)(n * item));
            } else {
                dst = out_base + off[0] + start * inner[0];
            }
            if (dtypes[0] == out_compute && step == (int64_t)out_size) {
                fn(dst, args, n, ctx);
            } else {
                fn(buffers[0], args, n, ctx);
                tr__cpu_cast_row(dst, step, dtypes[0], buffers[0], (int64_t)out_size,
                                 out_compute, n);
            }
        }
        tr__stage_finish(&stage, &store_error);
    }
    if (failed)
        s = tr__set_error(TR_ERR_OOM, "%s: out of memory for a thread's stage", store->name);
    else if (atomic_load(&store_error))
        s = tr__store_failed(store, atomic_load(&store_error));
done:
    for (int k = 0; k < nin; k++)
        tr_release(views[k]);
    return s;
}
