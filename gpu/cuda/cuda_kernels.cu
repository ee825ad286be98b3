// Memory-bound kernels of the CUDA encoder: embedding gather + LayerNorm, (residual +)
// LayerNorm, the [CLS] gather, tanh, conversions. A warp per row (the LayerNorm walks several
// rows per warp), 16-byte loads, fp32 statistics; a row of H <= 1024 lives in registers (up to
// 4 chunks of 8 per lane).
#include <stdlib.h>

#include "gpu/cuda/cuda_common.cuh"
#include "gpu/model/model.h"

#define LN_CHUNKS 4 /* 8-element chunks per lane: H <= 32 * 8 * 4 = 1024 */

// Normalises v (this lane's CH chunks of one row; sum: their partial sum) into out_r / out_t
// (either may be NULL). gamma / beta may be global or shared memory.
template <typename T, typename R, int CH>
__device__ __forceinline__ void ln_finish(float (&v)[CH][8], float sum, int H, const float *gamma,
                                          const float *beta, float eps, R *out_r, T *out_t,
                                          int lane) {
    int nch = H >> 3;
    float mean = warp_sum(sum) / (float)H;
    float sq = 0.f;
#pragma unroll
    for (int c = 0; c < CH; c++) {
        if (lane + 32 * c < nch) {
#pragma unroll
            for (int i = 0; i < 8; i++) {
                float d = v[c][i] - mean;
                sq += d * d;
            }
        }
    }
    float rstd = rsqrtf(warp_sum(sq) / (float)H + eps);
#pragma unroll
    for (int c = 0; c < CH; c++) {
        int ch = lane + 32 * c;
        if (ch < nch) {
            float g[8], b[8], o[8];
            load8(gamma + ch * 8, g);
            load8(beta + ch * 8, b);
#pragma unroll
            for (int i = 0; i < 8; i++)
                o[i] = (v[c][i] - mean) * rstd * g[i] + b[i];
            if (out_r) store8(out_r + ch * 8, o);
            if (out_t) store8(out_t + ch * 8, o);
        }
    }
}

template <typename T, typename R>
__global__ void embed_ln_kernel(const int32_t *__restrict__ ids, const int32_t *__restrict__ pos,
                                int n_tokens, const T *__restrict__ word,
                                const T *__restrict__ posemb, const T *__restrict__ type0,
                                const float *__restrict__ gamma, const float *__restrict__ beta,
                                int H, float eps, R *out_r, T *out_t) {
    int row = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;
    if (row >= n_tokens) return;
    // posemb and type0 may be NULL (ModernBERT has neither table, DistilBERT no types).
    const T *w = word + (size_t)ids[row] * H, *p = posemb ? posemb + (size_t)pos[row] * H : NULL;
    int nch = H >> 3;
    float v[LN_CHUNKS][8], sum = 0.f;
#pragma unroll
    for (int c = 0; c < LN_CHUNKS; c++) {
        int ch = lane + 32 * c;
        if (ch < nch) {
            float a[8], b[8] = {0, 0, 0, 0, 0, 0, 0, 0}, t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            load8(w + ch * 8, a);
            if (p) load8(p + ch * 8, b);
            if (type0) load8(type0 + ch * 8, t);
#pragma unroll
            for (int i = 0; i < 8; i++) {
                v[c][i] = a[i] + b[i] + t[i];
                sum += v[c][i];
            }
        }
    }
    size_t off = (size_t)row * H;
    ln_finish<T, R, LN_CHUNKS>(v, sum, H, gamma, beta, eps, out_r ? out_r + off : NULL,
                               out_t ? out_t + off : NULL, lane);
}

// 8 elements of a row as loaded (16 bytes of fp16/bf16, 32 of fp32), converted later so a
// prefetched row costs 4 (8) registers per chunk, not 8 floats.
template <typename E> struct raw8 {
    uint4 u;
    __device__ __forceinline__ void load(const E *p) {
        u = *reinterpret_cast<const uint4 *>(p);
    }
    __device__ __forceinline__ void add_to(float *f) const {
        float2 a = st<E>::to_f2(u.x), b = st<E>::to_f2(u.y), c = st<E>::to_f2(u.z),
               d = st<E>::to_f2(u.w);
        f[0] += a.x, f[1] += a.y, f[2] += b.x, f[3] += b.y;
        f[4] += c.x, f[5] += c.y, f[6] += d.x, f[7] += d.y;
    }
};
template <> struct raw8<float> {
    float4 a, b;
    __device__ __forceinline__ void load(const float *p) {
        a = *reinterpret_cast<const float4 *>(p), b = *reinterpret_cast<const float4 *>(p + 4);
    }
    __device__ __forceinline__ void add_to(float *f) const {
        f[0] += a.x, f[1] += a.y, f[2] += a.z, f[3] += a.w;
        f[4] += b.x, f[5] += b.y, f[6] += b.z, f[7] += b.w;
    }
};

// CH: 8-element chunks per lane (H <= 256 * CH). One warp walks rows warp, warp + n_warps, ...:
// gamma and beta are staged once per block in shared memory, and the next row's loads are in flight
// while this row is reduced and written.
template <typename T, typename R, int CH>
__global__ void __launch_bounds__(256, sizeof(R) == 4 ? 2 : 3)
    add_ln_kernel(const T *a, const R *res, const float *__restrict__ gamma,
                  const float *__restrict__ beta, int n, int H, float eps, R *out_r, T *out_t) {
    __shared__ __align__(16) float sg[CH * 256], sb[CH * 256]; // (H) gamma, beta
    for (int i = threadIdx.x; i < H; i += blockDim.x)
        sg[i] = gamma[i], sb[i] = beta[i];
    __syncthreads();
    int warp = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;
    int n_warps = (int)((gridDim.x * (size_t)blockDim.x) >> 5);
    if (warp >= n) return;
    int nch = H >> 3;
    raw8<T> xa[CH];
    raw8<R> ra[CH];
    auto fetch = [&](int row) {
        size_t off = (size_t)row * H;
#pragma unroll
        for (int c = 0; c < CH; c++) {
            int ch = lane + 32 * c;
            if (ch < nch) {
                xa[c].load(a + off + ch * 8);
                if (res) ra[c].load(res + off + ch * 8);
            }
        }
    };
    fetch(warp);
    for (int row = warp; row < n; row += n_warps) {
        float v[CH][8], sum = 0.f;
#pragma unroll
        for (int c = 0; c < CH; c++) {
#pragma unroll
            for (int i = 0; i < 8; i++)
                v[c][i] = 0.f;
            if (lane + 32 * c < nch) {
                xa[c].add_to(v[c]);
                if (res) ra[c].add_to(v[c]);
#pragma unroll
                for (int i = 0; i < 8; i++)
                    sum += v[c][i];
            }
        }
        // Every lane has read its whole part of this row before any lane writes it (the
        // shuffles in ln_finish order them), so the outputs may alias the inputs; the prefetched
        // row is another row.
        if (row + n_warps < n) fetch(row + n_warps);
        size_t off = (size_t)row * H;
        ln_finish<T, R, CH>(v, sum, H, sg, sb, eps, out_r ? out_r + off : NULL,
                            out_t ? out_t + off : NULL, lane);
    }
}

template <typename T, int A>
__global__ void bias_act_kernel(T *x, const T *__restrict__ bias, size_t n8, int cols) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n8) return;
    size_t e = i * 8;
    int col = (int)(e % (size_t)cols);
    float v[8], b[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    load8(x + e, v);
    if (bias) load8(bias + col, b); // NULL when a bias epilogue already added it
#pragma unroll
    for (int k = 0; k < 8; k++)
        v[k] = act_f<A>(v[k] + b[k]);
    store8(x + e, v);
}

template <typename E>
__global__ void gather_rows_kernel(const E *__restrict__ src, const int32_t *__restrict__ cu,
                                   int n_seqs, int H, E *__restrict__ dst) {
    int s = blockIdx.x;
    const uint4 *r = reinterpret_cast<const uint4 *>(src + (size_t)cu[s] * H);
    uint4 *d = reinterpret_cast<uint4 *>(dst + (size_t)s * H);
    for (int c = threadIdx.x; c < (int)(H * sizeof(E) / 16); c += blockDim.x)
        d[c] = r[c];
}

template <int A> __global__ void act_f32_kernel(float *x, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) x[i] = act_f<A>(x[i]);
}

template <typename T> __global__ void convert_kernel(const float *src, size_t n, T *dst) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) dst[i] = st<T>::from_f(src[i]);
}
template <typename T> __global__ void to_float_kernel(const T *src, size_t n, float *dst) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) dst[i] = st<T>::to_f(src[i]);
}

// Blocks of 8 warps per SM for the row-walking LayerNorm (2 and 6 measured no different).
#define LN_BLOCKS_PER_SM 3

static unsigned rows_grid(int rows) {
    return (unsigned)((rows + 7) / 8); // 8 warps (256 threads) per block, a warp per row
}

template <typename T, typename R>
cudaError_t cuda_embed_ln(const int32_t *ids, const int32_t *pos, int n_tokens, const T *word,
                          const T *posemb, const T *type0, const float *gamma, const float *beta,
                          int H, float eps, R *out_r, T *out_t, cudaStream_t s) {
    embed_ln_kernel<T, R><<<rows_grid(n_tokens), 256, 0, s>>>(
        ids, pos, n_tokens, word, posemb, type0, gamma, beta, H, eps, out_r, out_t);
    return cudaGetLastError();
}
template <typename T, typename R>
cudaError_t cuda_add_ln(const T *a, const R *res, const float *gamma, const float *beta, int n,
                        int H, float eps, R *out_r, T *out_t, int sms, cudaStream_t s) {
    // A few rows per warp: enough warps to keep every SM's loads in flight, few enough that
    // gamma and beta are fetched once per several rows.
    if (sms < 1) sms = 1;
    unsigned blocks = rows_grid(n), cap = (unsigned)sms * LN_BLOCKS_PER_SM;
    if (blocks > cap) blocks = cap;
    int ch = (H / 8 + 31) / 32;
    if (ch <= 1)
        add_ln_kernel<T, R, 1><<<blocks, 256, 0, s>>>(a, res, gamma, beta, n, H, eps, out_r, out_t);
    else if (ch == 2)
        add_ln_kernel<T, R, 2><<<blocks, 256, 0, s>>>(a, res, gamma, beta, n, H, eps, out_r, out_t);
    else if (ch == 3)
        add_ln_kernel<T, R, 3><<<blocks, 256, 0, s>>>(a, res, gamma, beta, n, H, eps, out_r, out_t);
    else
        add_ln_kernel<T, R, 4><<<blocks, 256, 0, s>>>(a, res, gamma, beta, n, H, eps, out_r, out_t);
    return cudaGetLastError();
}
template <typename T>
cudaError_t cuda_bias_act(T *x, const T *bias, int n, int cols, int act, cudaStream_t s) {
    size_t n8 = (size_t)n * cols / 8;
    unsigned grid = (unsigned)((n8 + 255) / 256);
    if (n8 == 0) return cudaSuccess;
    switch (act) {
    case GPU_ACT_GELU:
        bias_act_kernel<T, GPU_ACT_GELU><<<grid, 256, 0, s>>>(x, bias, n8, cols);
        break;
    case GPU_ACT_GELU_TANH:
        bias_act_kernel<T, GPU_ACT_GELU_TANH><<<grid, 256, 0, s>>>(x, bias, n8, cols);
        break;
    case GPU_ACT_RELU:
        bias_act_kernel<T, GPU_ACT_RELU><<<grid, 256, 0, s>>>(x, bias, n8, cols);
        break;
    default:
        bias_act_kernel<T, GPU_ACT_TANH><<<grid, 256, 0, s>>>(x, bias, n8, cols);
        break;
    }
    return cudaGetLastError();
}
template <typename E>
cudaError_t cuda_gather_rows(const E *src, const int32_t *cu, int n_seqs, int H, E *dst,
                             cudaStream_t s) {
    if (n_seqs <= 0) return cudaSuccess;
    gather_rows_kernel<E><<<n_seqs, 128, 0, s>>>(src, cu, n_seqs, H, dst);
    return cudaGetLastError();
}
cudaError_t cuda_act_f32(float *x, size_t n, int act, cudaStream_t s) {
    unsigned grid = (unsigned)((n + 255) / 256);
    if (n == 0) return cudaSuccess;
    switch (act) {
    case GPU_ACT_GELU:
        act_f32_kernel<GPU_ACT_GELU><<<grid, 256, 0, s>>>(x, n);
        break;
    case GPU_ACT_GELU_TANH:
        act_f32_kernel<GPU_ACT_GELU_TANH><<<grid, 256, 0, s>>>(x, n);
        break;
    case GPU_ACT_RELU:
        act_f32_kernel<GPU_ACT_RELU><<<grid, 256, 0, s>>>(x, n);
        break;
    default:
        act_f32_kernel<GPU_ACT_TANH><<<grid, 256, 0, s>>>(x, n);
        break;
    }
    return cudaGetLastError();
}
template <typename T> cudaError_t cuda_convert(const float *src, size_t n, T *dst, cudaStream_t s) {
    convert_kernel<T><<<(unsigned)((n + 255) / 256), 256, 0, s>>>(src, n, dst);
    return cudaGetLastError();
}
template <typename T>
cudaError_t cuda_to_float(const T *src, size_t n, float *dst, cudaStream_t s) {
    to_float_kernel<T><<<(unsigned)((n + 255) / 256), 256, 0, s>>>(src, n, dst);
    return cudaGetLastError();
}

#define INSTANTIATE_TR(T, R)                                                                       \
    template cudaError_t cuda_embed_ln<T, R>(const int32_t *, const int32_t *, int, const T *,     \
                                             const T *, const T *, const float *, const float *,   \
                                             int, float, R *, T *, cudaStream_t);                  \
    template cudaError_t cuda_add_ln<T, R>(const T *, const R *, const float *, const float *,     \
                                           int, int, float, R *, T *, int, cudaStream_t);
#define INSTANTIATE(T)                                                                             \
    INSTANTIATE_TR(T, T)                                                                           \
    INSTANTIATE_TR(T, float)                                                                       \
    template cudaError_t cuda_bias_act<T>(T *, const T *, int, int, int, cudaStream_t);            \
    template cudaError_t cuda_gather_rows<T>(const T *, const int32_t *, int, int, T *,            \
                                             cudaStream_t);                                        \
    template cudaError_t cuda_convert<T>(const float *, size_t, T *, cudaStream_t);                \
    template cudaError_t cuda_to_float<T>(const T *, size_t, float *, cudaStream_t);
INSTANTIATE(__half)
INSTANTIATE(__nv_bfloat16)
template cudaError_t cuda_gather_rows<float>(const float *, const int32_t *, int, int, float *,
                                             cudaStream_t);
// An fp32 LayerNorm (the graph's fp32 norms: ModernBERT's head norm).
template cudaError_t cuda_add_ln<float, float>(const float *, const float *, const float *,
                                               const float *, int, int, float, float *, float *,
                                               int, cudaStream_t);

// y += a, fp32 rows plus 16-bit ones (the graph's bf16 residual stream, kept in fp32).
template <typename T> __global__ void add_f32_kernel(const T *a, float *y, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] += st<T>::to_f(a[i]);
}
template <typename T> cudaError_t cuda_add_f32(const T *a, float *y, size_t n, cudaStream_t s) {
    if (n == 0) return cudaSuccess;
    add_f32_kernel<T><<<(unsigned)((n + 255) / 256), 256, 0, s>>>(a, y, n);
    return cudaGetLastError();
}
template cudaError_t cuda_add_f32<__half>(const __half *, float *, size_t, cudaStream_t);
template cudaError_t cuda_add_f32<__nv_bfloat16>(const __nv_bfloat16 *, float *, size_t,
                                                 cudaStream_t);
