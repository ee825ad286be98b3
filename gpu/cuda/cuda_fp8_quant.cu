// The FP8 activations and weights' codes (gpu/model/fp8.h, bit for bit; cuda_fp8.cuh): the
// per-row quantizers, the LayerNorm that writes an FP8 linear's input codes beside its row, and
// the static-scale quantizer (gpu_graph_fp8_static_scale's inputs, where cuBLASLt could not write
// them itself).
#include <cuda_fp8.h>

#include "gpu/cuda/cuda_common.cuh"
#include "gpu/cuda/cuda_fp8.cuh"
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

// Eight E4M3 codes of f (already scaled), packed for one 8-byte store.
__device__ __forceinline__ uint2 codes8(const float *f, float inv) {
    uint32_t lo = 0, hi = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        lo |= (uint32_t)fp8_code(__fmul_rn(f[i], inv)) << (8 * i);
        hi |= (uint32_t)fp8_code(__fmul_rn(f[i + 4], inv)) << (8 * i);
    }
    return make_uint2(lo, hi);
}

// 16-bit activation rows (k % 8 == 0, k <= 256 CH): one warp per row, each lane holding its CH
// 16-byte chunks in registers, so the row is read once (amax, then codes from the registers)
// with 16-byte loads and written with 8-byte stores. The codes and scales are the block
// kernel's (the same fp32 products, the same rounding).
template <typename T, int CH>
__global__ void __launch_bounds__(256)
    fp8_quantize_act_kernel(const T *__restrict__ x, int n, int k, uint8_t *__restrict__ q,
                            float *__restrict__ scale) {
    const int row = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5);
    const int lane = threadIdx.x & 31, nch = k >> 3;
    if (row >= n) return;
    const size_t off = (size_t)row * k;
    uint4 raw[CH];
    float amax = 0.f;
#pragma unroll
    for (int c = 0; c < CH; c++) {
        const int ch = lane + 32 * c;
        raw[c] = make_uint4(0, 0, 0, 0);
        if (ch < nch) raw[c] = *reinterpret_cast<const uint4 *>(x + off + ch * 8);
        const uint32_t w[4] = {raw[c].x, raw[c].y, raw[c].z, raw[c].w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const float2 f = st<T>::to_f2(w[i]);
            amax = fmaxf(amax, fmaxf(fabsf(f.x), fabsf(f.y)));
        }
    }
    amax = warp_max(amax);
    const float inv = fp8_inv(amax);
#pragma unroll
    for (int c = 0; c < CH; c++) {
        const int ch = lane + 32 * c;
        if (ch >= nch) continue;
        const uint32_t w[4] = {raw[c].x, raw[c].y, raw[c].z, raw[c].w};
        float f[8];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const float2 v = st<T>::to_f2(w[i]);
            f[2 * i] = v.x, f[2 * i + 1] = v.y;
        }
        *reinterpret_cast<uint2 *>(q + off + ch * 8) = codes8(f, inv);
    }
    if (lane == 0) scale[row] = fp8_scale(amax);
}

template <typename T>
static cudaError_t quantize_act(const T *x, int n, int k, uint8_t *q, float *scale,
                                cudaStream_t s) {
    const int blocks = (n + 7) / 8, ch = (k / 8 + 31) / 32;
#define QA(C) fp8_quantize_act_kernel<T, C><<<blocks, 256, 0, s>>>(x, n, k, q, scale)
    if (ch <= 1)
        QA(1);
    else if (ch <= 2)
        QA(2);
    else if (ch <= 3)
        QA(3);
    else if (ch <= 4)
        QA(4);
    else if (ch <= 6)
        QA(6);
    else if (ch <= 8)
        QA(8);
    else if (ch <= 12)
        QA(12);
    else
        QA(16);
#undef QA
    return cudaGetLastError();
}

cudaError_t cuda_fp8_quantize_rows(const void *w, int type, int n, int k, uint8_t *q, float *scale,
                                   cudaStream_t s) {
    if (n <= 0) return cudaSuccess;
    if (type != CUDA_GEMM_FP32 && k % 8 == 0 && k <= CUDA_FP8_ACT_MAX_K &&
        ((uintptr_t)w & 15) == 0 && ((uintptr_t)q & 7) == 0)
        return type == CUDA_GEMM_BF16 ? quantize_act((const __nv_bfloat16 *)w, n, k, q, scale, s)
                                      : quantize_act((const __half *)w, n, k, q, scale, s);
    if (type == CUDA_GEMM_FP32)
        quantize_rows_kernel<float><<<n, 256, 0, s>>>((const float *)w, k, q, scale);
    else if (type == CUDA_GEMM_BF16)
        quantize_rows_kernel<__nv_bfloat16>
            <<<n, 256, 0, s>>>((const __nv_bfloat16 *)w, k, q, scale);
    else
        quantize_rows_kernel<__half><<<n, 256, 0, s>>>((const __half *)w, k, q, scale);
    return cudaGetLastError();
}

// warp_sum spelled out in IEEE additions: lane l adds lane l ^ o's value, o = 16, 8, ..., 1.
__device__ __forceinline__ float warp_sum_rn(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// The LayerNorm that feeds an FP8 linear, one warp per row, CH 8-element chunks per lane
// (H <= 256 CH): exactly the sequence of gpu_fp8_norm_row (gpu/model/fp8.h), every step an
// explicit IEEE operation (this file is built with --use_fast_math: '/' and sqrt would be
// approximate, and a * b + c contracted where the compiler likes), then the row stored in T
// and the codes of the stored values (gpu_fp8_quantize_row's).
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
                    v[c][i] = __fadd_rn(v[c][i], r[i]);
            }
#pragma unroll
            for (int i = 0; i < 8; i++)
                sum = __fadd_rn(sum, v[c][i]);
        }
    }
    const float mean = __fdiv_rn(warp_sum_rn(sum), (float)H);
    float sq = 0.f;
#pragma unroll
    for (int c = 0; c < CH; c++)
        if (lane + 32 * c < nch)
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const float d = __fsub_rn(v[c][i], mean);
                sq = __fmaf_rn(d, d, sq);
            }
    const float var = __fdiv_rn(warp_sum_rn(sq), (float)H);
    const float rstd = __fdiv_rn(1.f, __fsqrt_rn(__fadd_rn(var, eps)));
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
                const float y = __fmaf_rn(__fmul_rn(__fsub_rn(v[c][i], mean), rstd), g[i], b[i]);
                v[c][i] = st<T>::to_f(st<T>::from_f(y)); // the value the row stores
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
        if (ch < nch) *reinterpret_cast<uint2 *>(q + off + ch * 8) = codes8(v[c], inv);
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

// q (n, k) = e4m3(x * inv) of 16-bit rows under one power-of-two inv (exact): eight elements a
// thread, 16-byte loads, 8-byte stores.
template <typename T>
__global__ void fp8_quantize_static_kernel(const T *__restrict__ x, size_t n8, float inv,
                                           uint8_t *__restrict__ q) {
    const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n8) return;
    float f[8];
    load8(x + i * 8, f);
    *reinterpret_cast<uint2 *>(q + i * 8) = codes8(f, inv);
}

cudaError_t cuda_fp8_quantize_static(const void *x, int type, size_t elems, float inv, uint8_t *q,
                                     cudaStream_t s) {
    const size_t n8 = elems / 8;
    if (n8 == 0) return cudaSuccess;
    const unsigned blocks = (unsigned)((n8 + 255) / 256);
    if (type == CUDA_GEMM_BF16)
        fp8_quantize_static_kernel<<<blocks, 256, 0, s>>>((const __nv_bfloat16 *)x, n8, inv, q);
    else
        fp8_quantize_static_kernel<<<blocks, 256, 0, s>>>((const __half *)x, n8, inv, q);
    return cudaGetLastError();
}
