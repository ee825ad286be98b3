// DeBERTa's c2p and p2c products of one layer, for every head at once: out (n, heads, R) =
// x_h (n, d) . rel_h (R, d)^T, x rows of Q (c2p, against the relative keys) or K (p2c,
// against the relative queries). The attention kernel gathers one element of each at every
// pair's relative row, so the products are computed once per token and relative row, on the
// tensor cores, instead of once per pair. One strided-batched GEMM over the heads, fp32
// accumulation; the handle's workspace is the caller's (set at init: no allocation here).
#include <cublas_v2.h>

#include "gpu/cuda/cuda_common.cuh"

template <typename T> static cudaDataType_t rel_type();
template <> cudaDataType_t rel_type<__half>() {
    return CUDA_R_16F;
}
template <> cudaDataType_t rel_type<__nv_bfloat16>() {
    return CUDA_R_16BF;
}

template <typename T>
int cuda_rel_scores(void *cublas, const T *x, int ldx, int n, const T *rel, int R, int heads,
                    int head_dim, T *out, cudaStream_t st) {
    if (n <= 0) return 0;
    cublasHandle_t h = (cublasHandle_t)cublas;
    const float one = 1.f, zero = 0.f;
    const cudaDataType_t ty = rel_type<T>();
    // Column-major: out^T (R, n) with ld heads * R = rel_h (R x d, row stride heads * d)
    // times x_h^T (d x n, row stride ldx); head h at offsets h * d (inputs), h * R (output).
    // cublasSetStream resets the handle to cuBLAS's own workspace pool, allocated lazily on
    // the next call: the owner binds the stream before its workspace at init, so only a
    // handle on another stream is moved here.
    cudaStream_t cur = NULL;
    if (cublasGetStream(h, &cur) != CUBLAS_STATUS_SUCCESS) return -1;
    if (cur != st && cublasSetStream(h, st) != CUBLAS_STATUS_SUCCESS) return -1;
    cublasStatus_t s = cublasGemmStridedBatchedEx(
        h, CUBLAS_OP_T, CUBLAS_OP_N, R, n, head_dim, &one, rel, ty, heads * head_dim,
        (long long)head_dim, x, ty, ldx, (long long)head_dim, &zero, out, ty, heads * R,
        (long long)R, heads, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return s == CUBLAS_STATUS_SUCCESS ? 0 : -1;
}

template int cuda_rel_scores<__half>(void *, const __half *, int, int, const __half *, int, int,
                                     int, __half *, cudaStream_t);
template int cuda_rel_scores<__nv_bfloat16>(void *, const __nv_bfloat16 *, int, int,
                                            const __nv_bfloat16 *, int, int, int, __nv_bfloat16 *,
                                            cudaStream_t);
