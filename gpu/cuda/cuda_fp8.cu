#include "gpu/cuda/cuda_fp8.cuh"

#include <cuda_fp8.h>
#include <stdio.h>
#include <string.h>

#include "gpu/cuda/cuda_common.cuh"
#include "gpu/cuda/cuda_gemm.cuh"
#include "gpu/model/fp8.h"

// gpu_fp8_inv_scale / gpu_fp8_scale with IEEE division (fast math would approximate '/').
__device__ __forceinline__ float fp8_inv(float amax) {
    return amax > 0.f ? __fdiv_rn(GPU_FP8_E4M3_MAX, amax) : 1.f;
}
__device__ __forceinline__ float fp8_scale(float amax) {
    return amax > 0.f ? __fdiv_rn(amax, GPU_FP8_E4M3_MAX) : 1.f;
}
__device__ __forceinline__ uint8_t fp8_code(float v) {
    return (uint8_t)__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

template <typename E> __device__ __forceinline__ float elem_f(const E *p, size_t i) {
    return st<E>::to_f(p[i]);
}
template <> __device__ __forceinline__ float elem_f<float>(const float *p, size_t i) {
    return p[i];
}

// One block of 256 threads per row: its amax, then its codes.
template <typename E>
__global__ void quantize_rows_kernel(const E *__restrict__ w, int k, uint8_t *__restrict__ q,
                                     float *__restrict__ scale) {
    __shared__ float part[8];
    const size_t off = (size_t)blockIdx.x * k;
    float a = 0.f;
    for (int i = threadIdx.x; i < k; i += blockDim.x)
        a = fmaxf(a, fabsf(elem_f(w, off + i)));
    a = warp_max(a);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = a;
    __syncthreads();
    a = part[0];
    for (int i = 1; i < 8; i++)
        a = fmaxf(a, part[i]);
    const float inv = fp8_inv(a);
    for (int i = threadIdx.x; i < k; i += blockDim.x)
        q[off + i] = fp8_code(elem_f(w, off + i) * inv);
    if (threadIdx.x == 0) scale[blockIdx.x] = fp8_scale(a);
}

cudaError_t cuda_fp8_quantize_rows(const void *w, int type, int n, int k, uint8_t *q, float *scale,
                                   cudaStream_t s) {
    if (type == CUDA_GEMM_FP32)
        quantize_rows_kernel<float><<<n, 256, 0, s>>>((const float *)w, k, q, scale);
    else if (type == CUDA_GEMM_BF16)
        quantize_rows_kernel<__nv_bfloat16>
            <<<n, 256, 0, s>>>((const __nv_bfloat16 *)w, k, q, scale);
    else
        quantize_rows_kernel<__half><<<n, 256, 0, s>>>((const __half *)w, k, q, scale);
    return cudaGetLastError();
}

// One warp per row, CH 8-element chunks per lane (H <= 256 CH): LayerNorm as add_ln_kernel
// computes it, then the row's amax of the fp32 outputs and their codes.
template <typename T, int CH>
__global__ void __launch_bounds__(256)
    fp8_add_ln_kernel(const T *a, const T *res, const float *__restrict__ gamma,
                      const float *__restrict__ beta, int n, int H, float eps, T *out_t,
                      uint8_t *__restrict__ q, float *__restrict__ scale) {
    const int row = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5);
    const int lane = threadIdx.x & 31, nch = H >> 3;
    if (row >= n) return;
    const size_t off = (size_t)row * H;
    float v[CH][8], sum = 0.f;
#pragma unroll
    for (int c = 0; c < CH; c++) {
        const int ch = lane + 32 * c;
#pragma unroll
        for (int i = 0; i < 8; i++)
            v[c][i] = 0.f;
        if (ch < nch) {
            load8(a + off + ch * 8, v[c]);
            if (res) {
                float r[8];
                load8(res + off + ch * 8, r);
#pragma unroll
                for (int i = 0; i < 8; i++)
                    v[c][i] += r[i];
            }
#pragma unroll
            for (int i = 0; i < 8; i++)
                sum += v[c][i];
        }
    }
    const float mean = warp_sum(sum) / (float)H;
    float sq = 0.f;
#pragma unroll
    for (int c = 0; c < CH; c++)
        if (lane + 32 * c < nch)
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const float d = v[c][i] - mean;
                sq += d * d;
            }
    const float rstd = rsqrtf(warp_sum(sq) / (float)H + eps);
    float amax = 0.f;
#pragma unroll
    for (int c = 0; c < CH; c++) {
        const int ch = lane + 32 * c;
        if (ch < nch) {
            float g[8], b[8];
            load8(gamma + ch * 8, g);
            load8(beta + ch * 8, b);
#pragma unroll
            for (int i = 0; i < 8; i++) {
                v[c][i] = (v[c][i] - mean) * rstd * g[i] + b[i];
                amax = fmaxf(amax, fabsf(v[c][i]));
            }
            store8(out_t + off + ch * 8, v[c]); // every lane has read its part: may alias a
        }
    }
    amax = warp_max(amax);
    const float inv = fp8_inv(amax);
#pragma unroll
    for (int c = 0; c < CH; c++) {
        const int ch = lane + 32 * c;
        if (ch < nch) {
            uint32_t lo = 0, hi = 0;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                lo |= (uint32_t)fp8_code(v[c][i] * inv) << (8 * i);
                hi |= (uint32_t)fp8_code(v[c][i + 4] * inv) << (8 * i);
            }
            *reinterpret_cast<uint2 *>(q + off + ch * 8) = make_uint2(lo, hi);
        }
    }
    if (lane == 0) scale[row] = fp8_scale(amax);
}

template <typename T>
cudaError_t cuda_fp8_add_ln(const T *a, const T *res, const float *gamma, const float *beta, int n,
                            int H, float eps, T *out_t, uint8_t *q, float *scale, cudaStream_t s) {
    const int blocks = (n + 7) / 8;
    if (H <= 256)
        fp8_add_ln_kernel<T, 1>
            <<<blocks, 256, 0, s>>>(a, res, gamma, beta, n, H, eps, out_t, q, scale);
    else if (H <= 512)
        fp8_add_ln_kernel<T, 2>
            <<<blocks, 256, 0, s>>>(a, res, gamma, beta, n, H, eps, out_t, q, scale);
    else if (H <= 768)
        fp8_add_ln_kernel<T, 3>
            <<<blocks, 256, 0, s>>>(a, res, gamma, beta, n, H, eps, out_t, q, scale);
    else if (H <= 1024)
        fp8_add_ln_kernel<T, 4>
            <<<blocks, 256, 0, s>>>(a, res, gamma, beta, n, H, eps, out_t, q, scale);
    else
        return cudaErrorInvalidValue;
    return cudaGetLastError();
}

template cudaError_t cuda_fp8_add_ln<__half>(const __half *, const __half *, const float *,
                                             const float *, int, int, float, __half *, uint8_t *,
                                             float *, cudaStream_t);
template cudaError_t cuda_fp8_add_ln<__nv_bfloat16>(const __nv_bfloat16 *, const __nv_bfloat16 *,
                                                    const float *, const float *, int, int, float,
                                                    __nv_bfloat16 *, uint8_t *, float *,
                                                    cudaStream_t);

int cuda_fp8_gemm_init(cuda_fp8_gemm_t *g, int type, void *workspace, size_t workspace_bytes,
                       char *err, size_t errlen) {
    memset(g, 0, sizeof(*g));
    g->dt = type == CUDA_GEMM_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    g->workspace = workspace;
    g->workspace_bytes = workspace_bytes;
    if (cublasLtCreate(&g->lt) != CUBLAS_STATUS_SUCCESS) {
        snprintf(err, errlen, "cuBLASLt could not be initialised for FP8");
        return -1;
    }
    return 0;
}

void cuda_fp8_gemm_free(cuda_fp8_gemm_t *g) {
    if (g->lt) cublasLtDestroy(g->lt);
    memset(g, 0, sizeof(*g));
}

static const cublasLtEpilogue_t fp8_epi[CUDA_GEMM_EPIS] = {
    CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_GELU_BIAS,
    CUBLASLT_EPILOGUE_RELU_BIAS};

#define LT_OK(call) ((call) == CUBLAS_STATUS_SUCCESS)
// The call, with what names it should it fail.
#define STEP(w, call) (what = (w), LT_OK(call))

// The column-major view of cuda_gemm.cu: D (n, m) = op(A) (n, k) x B (k, m), A = Wq stored
// (k, n) and transposed (FP8 on Hopper takes only this "TN" form), B = Xq (k, m).
int cuda_fp8_gemm_run(cuda_fp8_gemm_t *g, const uint8_t *wq, const float *w_scale,
                      const uint8_t *xq, const float *x_scale, void *y, int ldy, const void *bias,
                      const void *res, int m, int n, int k, int epi, cudaStream_t st, char *err,
                      size_t errlen) {
    cublasLtMatmulDesc_t desc = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t h;
    int found = 0, rc = -1;
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    const cublasLtMatmulMatrixScale_t vec = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    const float one = 1.f, zero = 0.f;
    const char *what = "descriptor";
    if (LT_OK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F)) &&
        LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta)) &&
        LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb)) &&
        LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &fp8_epi[epi],
                                             sizeof fp8_epi[epi])) &&
        (epi == CUDA_GEMM_PLAIN ||
         LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                              sizeof bias))) &&
        LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &g->dt,
                                             sizeof g->dt)) &&
        LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &vec,
                                             sizeof vec)) &&
        LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &vec,
                                             sizeof vec)) &&
        LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale,
                                             sizeof w_scale)) &&
        LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scale,
                                             sizeof x_scale)) &&
        STEP("layouts", cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, k, n, k)) &&
        LT_OK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, k, m, k)) &&
        LT_OK(cublasLtMatrixLayoutCreate(&lc, g->dt, n, m, ldy)) &&
        STEP("preference", cublasLtMatmulPreferenceCreate(&pref)) &&
        LT_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                   &g->workspace_bytes,
                                                   sizeof g->workspace_bytes)) &&
        STEP("heuristic (no FP8 algorithm with outer-vector scales for this shape)",
             cublasLtMatmulAlgoGetHeuristic(g->lt, desc, la, lb, lc, lc, pref, 1, &h, &found)) &&
        found > 0 &&
        STEP("matmul",
             cublasLtMatmul(g->lt, desc, &one, wq, la, xq, lb, res ? &one : &zero, res ? res : y,
                            lc, y, lc, &h.algo, g->workspace, g->workspace_bytes, st)))
        rc = 0;
    if (rc) snprintf(err, errlen, "cuBLASLt FP8 GEMM (%d x %d x %d): %s failed", m, n, k, what);
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (desc) cublasLtMatmulDescDestroy(desc);
    return rc;
}
