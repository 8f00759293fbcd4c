/*
 * iter.c - folding the dimensions of strided operands for the kernels.
 */
#include "iter_impl.h"

void tr__iter_init(struct tr__iter *it, int ndim, const int64_t *shape, int nops,
                   const int64_t *const *strides)
{
    int n = 0;

    it->nops = nops;
    for (int d = 0; d < ndim; d++) {
        bool merge = n > 0;
        if (shape[d] == 1)
            continue;
        /* the previous kept dimension folds into this one when, in every
         * operand, stepping it equals stepping this one shape[d] times */
        for (int k = 0; k < nops && merge; k++) {
            int64_t step;
            merge = !__builtin_mul_overflow(strides[k][d], shape[d], &step) &&
                    it->strides[k][n - 1] == step;
        }
        if (merge) {
            it->shape[n - 1] *= shape[d];
            for (int k = 0; k < nops; k++)
                it->strides[k][n - 1] = strides[k][d];
            continue;
        }
        it->shape[n] = shape[d];
        for (int k = 0; k < nops; k++)
            it->strides[k][n] = strides[k][d];
        n++;
    }
    if (n == 0) {
        it->shape[0] = 1;
        for (int k = 0; k < nops; k++)
            it->strides[k][0] = 0;
        n = 1;
    }
    it->ndim = n;
}

int64_t tr__iter_rows(const struct tr__iter *it)
{
    int64_t rows = 1;

    for (int d = 0; d + 1 < it->ndim; d++)
        rows *= it->shape[d];
    return rows;
}

void tr__iter_row_offsets(const struct tr__iter *it, int64_t row, int64_t *offsets)
{
    for (int k = 0; k < it->nops; k++)
        offsets[k] = 0;
    for (int d = it->ndim - 2; d >= 0 && row > 0; d--) {
        int64_t i = row % it->shape[d];
        row /= it->shape[d];
        for (int k = 0; k < it->nops; k++)
            offsets[k] += i * it->strides[k][d];
    }
}
