/*
 * cpu/copy.c - the strided copy kernel behind contiguous, clone and
 * device transfers.
 */
#include <string.h>

#include "../iter_impl.h"

/* Elements per unit of parallel work: big enough to amortise the loop
 * set-up, small enough to spread a single long row over the threads. */
#define BLOCK_ELEMENTS 16384
#define PARALLEL_BYTES (UINT64_C(1) << 20)

/* One element at a time, through memcpy of a constant size (a single move
 * once compiled), since dst may be a caller's buffer of any alignment. */
#define COPY_ROW(type)                                                       \
    do {                                                                     \
        for (int64_t i = 0; i < n; i++)                                      \
            memcpy(dst + i * dst_stride, src + i * src_stride, sizeof(type)); \
    } while (0)

static void copy_row(char *dst, int64_t dst_stride, const char *src, int64_t src_stride,
                     int64_t n, size_t itemsize)
{
    if (dst_stride == (int64_t)itemsize && src_stride == (int64_t)itemsize) {
        memcpy(dst, src, (size_t)n * itemsize);
        return;
    }
    switch (itemsize) {
    case 1: COPY_ROW(uint8_t); break;
    case 2: COPY_ROW(uint16_t); break;
    case 4: COPY_ROW(uint32_t); break;
    case 8: COPY_ROW(uint64_t); break;
    default:
        for (int64_t i = 0; i < n; i++)
            memcpy(dst + i * dst_stride, src + i * src_stride, itemsize);
    }
}

void tr__cpu_copy(char *dst, const int64_t *dst_strides, const char *src,
                  const int64_t *src_strides, int ndim, const int64_t *shape,
                  size_t itemsize)
{
    const int64_t *strides[2] = {dst_strides, src_strides};
    struct tr__iter it;
    int64_t rows, len, blocks_per_row, blocks;

    tr__iter_init(&it, ndim, shape, 2, strides);
    rows = tr__iter_rows(&it);
    len = it.shape[it.ndim - 1];
    blocks_per_row = (len + BLOCK_ELEMENTS - 1) / BLOCK_ELEMENTS;
    blocks = rows * blocks_per_row;
    if (blocks == 0)
        return;

#pragma omp parallel for num_threads(tr_num_threads()) schedule(static) \
    if ((uint64_t)(rows * len) * itemsize > PARALLEL_BYTES)
    for (int64_t b = 0; b < blocks; b++) {
        int64_t row = b / blocks_per_row, first = b % blocks_per_row * BLOCK_ELEMENTS;
        int64_t n = len - first < BLOCK_ELEMENTS ? len - first : BLOCK_ELEMENTS;
        int64_t off[2];

        tr__iter_row_offsets(&it, row, off);
        copy_row(dst + off[0] + first * it.strides[0][it.ndim - 1], it.strides[0][it.ndim - 1],
                 src + off[1] + first * it.strides[1][it.ndim - 1], it.strides[1][it.ndim - 1],
                 n, itemsize);
    }
}

void tr__cpu_fill_zero(char *dst, uint64_t bytes)
{
    int64_t chunk = BLOCK_ELEMENTS * 64, blocks = (int64_t)((bytes + (uint64_t)chunk - 1) / (uint64_t)chunk);

#pragma omp parallel for num_threads(tr_num_threads()) schedule(static) if (bytes > PARALLEL_BYTES)
    for (int64_t b = 0; b < blocks; b++) {
        uint64_t first = (uint64_t)b * (uint64_t)chunk;
        memset(dst + first, 0, bytes - first < (uint64_t)chunk ? bytes - first : (uint64_t)chunk);
    }
}
