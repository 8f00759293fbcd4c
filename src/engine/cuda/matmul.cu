/*
 * matmul.cu - the module's products (struct tr_cuda_matmul): one
 * cublasGemmStridedBatchedEx per product, on the device's stream, with a
 * cuBLAS handle per device made at its first product.  cuBLAS is
 * column-major: the row-major c = a b is the column-major c^T = b^T a^T,
 * so b goes first and a row-major operand is a column-major one's
 * transpose.
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <limits.h>
#include <stdio.h>

#include "../tensorrun.h"
#include "module_impl.h"

namespace {

constexpr int MAX_DEVICES = 64;
cublasHandle_t handles[MAX_DEVICES]; /* each made under its device's lock */

bool fits(int64_t v)
{
    return v >= 0 && v <= INT_MAX;
}

} /* namespace */

int tr__cuda_launch_matmul(int device, const tr_cuda_matmul *p, cudaStream_t stream, char *err,
                           size_t errsize)
{
    cudaDataType_t type;
    cublasComputeType_t compute;
    float one32 = 1, zero32 = 0;
    double one64 = 1, zero64 = 0;
    const void *alpha = &one32, *beta = &zero32;
    cublasStatus_t rc;

    if (device < 0 || device >= MAX_DEVICES) {
        snprintf(err, errsize, "matmul: no device %d", device);
        return -1;
    }
    if (p->m == 0 || p->n == 0 || p->batch == 0)
        return 0;
    if (!fits(p->m) || !fits(p->n) || !fits(p->k) || !fits(p->batch) || !fits(p->lda) ||
        !fits(p->ldb)) {
        snprintf(err, errsize, "matmul: a dimension past cuBLAS's int");
        return -1;
    }
    switch (p->dtype) {
    case TR_DTYPE_F64:
        type = CUDA_R_64F;
        compute = CUBLAS_COMPUTE_64F;
        alpha = &one64;
        beta = &zero64;
        break;
    case TR_DTYPE_F16:
        type = CUDA_R_16F;
        compute = CUBLAS_COMPUTE_32F;
        break;
    case TR_DTYPE_BF16:
        type = CUDA_R_16BF;
        compute = CUBLAS_COMPUTE_32F;
        break;
    default:
        type = CUDA_R_32F;
        compute = p->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
        break;
    }
    if (!handles[device] && cublasCreate(&handles[device]) != CUBLAS_STATUS_SUCCESS) {
        handles[device] = nullptr;
        snprintf(err, errsize, "cublasCreate failed");
        return -1;
    }
    if (cublasSetStream(handles[device], stream) != CUBLAS_STATUS_SUCCESS) {
        snprintf(err, errsize, "cublasSetStream failed");
        return -1;
    }
    /* c^T (n x m, ld n) = op(b^T) (n x k) op(a^T) (k x m) */
    rc = cublasGemmStridedBatchedEx(
        handles[device], p->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
        p->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, (int)p->n, (int)p->m, (int)p->k, alpha, p->b,
        type, (int)p->ldb, p->stride_b, p->a, type, (int)p->lda, p->stride_a, beta, p->c, type,
        (int)p->n, p->m * p->n, (int)p->batch, compute, CUBLAS_GEMM_DEFAULT);
    if (rc != CUBLAS_STATUS_SUCCESS) {
        snprintf(err, errsize, "cublasGemmStridedBatchedEx failed: %s", cublasGetStatusString(rc));
        return -1;
    }
    return 0;
}
