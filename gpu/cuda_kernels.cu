// Memory-bound kernels of the CUDA encoder: embedding gather + LayerNorm, residual +
// LayerNorm, the [CLS] gather and the pooler + classifier head. One warp per row, 16-byte
// loads, fp32 statistics; a row of H <= 1024 lives in registers (4 chunks of 8 per lane).
#include "gpu/cuda_common.cuh"

#define LN_CHUNKS 4 /* 8-element chunks per lane: H <= 32 * 8 * 4 = 1024 */

// Normalises v (this lane's chunks of one row) and writes it to out_row.
template <typename T>
__device__ __forceinline__ void ln_finish(float (&v)[LN_CHUNKS][8], float sum, int H,
                                          const float *gamma, const float *beta, float eps,
                                          T *out_row, int lane) {
    int nch = H >> 3;
    float mean = warp_sum(sum) / (float)H;
    float sq = 0.f;
#pragma unroll
    for (int c = 0; c < LN_CHUNKS; c++) {
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
    for (int c = 0; c < LN_CHUNKS; c++) {
        int ch = lane + 32 * c;
        if (ch < nch) {
            float g[8], b[8], o[8];
            *reinterpret_cast<float4 *>(g) = *reinterpret_cast<const float4 *>(gamma + ch * 8);
            *reinterpret_cast<float4 *>(g + 4) =
                *reinterpret_cast<const float4 *>(gamma + ch * 8 + 4);
            *reinterpret_cast<float4 *>(b) = *reinterpret_cast<const float4 *>(beta + ch * 8);
            *reinterpret_cast<float4 *>(b + 4) =
                *reinterpret_cast<const float4 *>(beta + ch * 8 + 4);
#pragma unroll
            for (int i = 0; i < 8; i++)
                o[i] = (v[c][i] - mean) * rstd * g[i] + b[i];
            store8(out_row + ch * 8, o);
        }
    }
}

template <typename T>
__global__ void embed_ln_kernel(const int32_t *__restrict__ ids, const int32_t *__restrict__ pos,
                                int n_tokens, const T *__restrict__ word,
                                const T *__restrict__ posemb, const T *__restrict__ type0,
                                const float *__restrict__ gamma, const float *__restrict__ beta,
                                int H, float eps, T *__restrict__ out) {
    int row = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;
    if (row >= n_tokens) return;
    const T *w = word + (size_t)ids[row] * H, *p = posemb + (size_t)pos[row] * H;
    int nch = H >> 3;
    float v[LN_CHUNKS][8], sum = 0.f;
#pragma unroll
    for (int c = 0; c < LN_CHUNKS; c++) {
        int ch = lane + 32 * c;
        if (ch < nch) {
            float a[8], b[8], t[8];
            load8(w + ch * 8, a);
            load8(p + ch * 8, b);
            load8(type0 + ch * 8, t);
#pragma unroll
            for (int i = 0; i < 8; i++) {
                v[c][i] = a[i] + b[i] + t[i];
                sum += v[c][i];
            }
        }
    }
    ln_finish(v, sum, H, gamma, beta, eps, out + (size_t)row * H, lane);
}

template <typename T>
__global__ void add_ln_kernel(const T *a, const T *res, const float *__restrict__ gamma,
                              const float *__restrict__ beta, int n, int H, float eps, T *out) {
    int row = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;
    if (row >= n) return;
    const T *ar = a + (size_t)row * H, *rr = res + (size_t)row * H;
    int nch = H >> 3;
    float v[LN_CHUNKS][8], sum = 0.f;
#pragma unroll
    for (int c = 0; c < LN_CHUNKS; c++) {
        int ch = lane + 32 * c;
        if (ch < nch) {
            float x[8], r[8];
            load8(ar + ch * 8, x);
            load8(rr + ch * 8, r);
#pragma unroll
            for (int i = 0; i < 8; i++) {
                v[c][i] = x[i] + r[i];
                sum += v[c][i];
            }
        }
    }
    // Every lane has read its whole part of the row before any lane writes: out may alias res.
    __syncwarp();
    ln_finish(v, sum, H, gamma, beta, eps, out + (size_t)row * H, lane);
}

template <typename T>
__global__ void bias_gelu_kernel(T *x, const T *__restrict__ bias, size_t n8, int cols) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n8) return;
    size_t e = i * 8;
    int col = (int)(e % (size_t)cols);
    float v[8], b[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    load8(x + e, v);
    if (bias) load8(bias + col, b); // NULL when a bias epilogue already added it
#pragma unroll
    for (int k = 0; k < 8; k++) {
        float z = v[k] + b[k];
        v[k] = 0.5f * z * (1.f + erff(z * 0.70710678118654752f));
    }
    store8(x + e, v);
}

template <typename T>
__global__ void gather_rows_kernel(const T *__restrict__ src, const int32_t *__restrict__ cu,
                                   int n_seqs, int H, T *__restrict__ dst) {
    int s = blockIdx.x;
    const T *r = src + (size_t)cu[s] * H;
    for (int c = threadIdx.x; c < (H >> 3); c += blockDim.x)
        *reinterpret_cast<uint4 *>(dst + (size_t)s * H + c * 8) =
            *reinterpret_cast<const uint4 *>(r + c * 8);
}

#define POOL_SEQS 4 /* sequences per block: each weight row read once serves 4 */

// Computes y[s][j] = act(sum_k w[j][k] x[s][k] + b[j]) for this block's sequences; one
// warp per output j, lanes stride k by pairs (32-bit weight loads, coalesced per row).
template <typename T, bool TANH>
__device__ __forceinline__ void pool_matvec(const float *x, int H, const T *__restrict__ w,
                                            const float *__restrict__ b, int out_n, float *y,
                                            int y_ld, int warp, int nwarps, int lane) {
    for (int j = warp; j < out_n; j += nwarps) {
        float acc[POOL_SEQS] = {0.f, 0.f, 0.f, 0.f};
        const uint32_t *wr = reinterpret_cast<const uint32_t *>(w + (size_t)j * H);
        for (int k2 = lane; k2 < (H >> 1); k2 += 32) {
            float2 wf = st<T>::to_f2(wr[k2]);
#pragma unroll
            for (int s = 0; s < POOL_SEQS; s++)
                acc[s] += wf.x * x[s * H + 2 * k2] + wf.y * x[s * H + 2 * k2 + 1];
        }
#pragma unroll
        for (int s = 0; s < POOL_SEQS; s++) {
            float r = warp_sum(acc[s]) + b[j];
            if (lane == 0) y[s * y_ld + j] = TANH ? tanhf(r) : r;
        }
    }
}

template <typename T>
__global__ void pool_classify_kernel(const T *__restrict__ x, int n_seqs, const T *pool_w,
                                     const float *pool_b, const T *cls_w, const float *cls_b, int H,
                                     int L, float *__restrict__ logits) {
    // (POOL_SEQS, max(H, L)) the [CLS] rows, later the logits; then (POOL_SEQS, H) pooled.
    extern __shared__ float pool_smem[];
    float *xs = pool_smem, *ps = pool_smem + POOL_SEQS * (H > L ? H : L);
    int s0 = blockIdx.x * POOL_SEQS, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int nwarps = blockDim.x >> 5;
    for (int i = threadIdx.x; i < POOL_SEQS * H; i += blockDim.x) {
        int s = i / H;
        xs[i] = s0 + s < n_seqs ? st<T>::to_f(x[(size_t)(s0 + s) * H + i % H]) : 0.f;
    }
    __syncthreads();
    pool_matvec<T, true>(xs, H, pool_w, pool_b, H, ps, H, warp, nwarps, lane);
    __syncthreads();
    // The classifier writes into xs (the [CLS] rows are no longer needed), then out.
    pool_matvec<T, false>(ps, H, cls_w, cls_b, L, xs, L, warp, nwarps, lane);
    __syncthreads();
    for (int i = threadIdx.x; i < POOL_SEQS * L; i += blockDim.x) {
        int s = i / L;
        if (s0 + s < n_seqs) logits[(size_t)(s0 + s) * L + i % L] = xs[i];
    }
}

template <typename T> __global__ void convert_kernel(const float *src, size_t n, T *dst) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) dst[i] = st<T>::from_f(src[i]);
}
template <typename T> __global__ void to_float_kernel(const T *src, size_t n, float *dst) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) dst[i] = st<T>::to_f(src[i]);
}

static unsigned rows_grid(int rows) {
    return (unsigned)((rows + 7) / 8); // 8 warps (256 threads) per block, a warp per row
}

template <typename T>
cudaError_t cuda_embed_ln(const int32_t *ids, const int32_t *pos, int n_tokens, const T *word,
                          const T *posemb, const T *type0, const float *gamma, const float *beta,
                          int H, float eps, T *out, cudaStream_t s) {
    embed_ln_kernel<T><<<rows_grid(n_tokens), 256, 0, s>>>(ids, pos, n_tokens, word, posemb, type0,
                                                           gamma, beta, H, eps, out);
    return cudaGetLastError();
}
template <typename T>
cudaError_t cuda_add_ln(const T *a, const T *res, const float *gamma, const float *beta, int n,
                        int H, float eps, T *out, cudaStream_t s) {
    add_ln_kernel<T><<<rows_grid(n), 256, 0, s>>>(a, res, gamma, beta, n, H, eps, out);
    return cudaGetLastError();
}
template <typename T>
cudaError_t cuda_bias_gelu(T *x, const T *bias, int n, int cols, cudaStream_t s) {
    size_t n8 = (size_t)n * cols / 8;
    bias_gelu_kernel<T><<<(unsigned)((n8 + 255) / 256), 256, 0, s>>>(x, bias, n8, cols);
    return cudaGetLastError();
}
template <typename T>
cudaError_t cuda_gather_rows(const T *src, const int32_t *cu, int n_seqs, int H, T *dst,
                             cudaStream_t s) {
    gather_rows_kernel<T><<<n_seqs, 128, 0, s>>>(src, cu, n_seqs, H, dst);
    return cudaGetLastError();
}
template <typename T>
cudaError_t cuda_pool_classify(const T *x, int n_seqs, const T *pool_w, const float *pool_b,
                               const T *cls_w, const float *cls_b, int H, int L, float *logits,
                               cudaStream_t s) {
    size_t smem = POOL_SEQS * (size_t)(H + (H > L ? H : L)) * sizeof(float);
    if (smem > 48 * 1024) return cudaErrorInvalidValue; // H + L <= 3072 covers every BERT
    unsigned grid = (unsigned)((n_seqs + POOL_SEQS - 1) / POOL_SEQS);
    pool_classify_kernel<T>
        <<<grid, 256, smem, s>>>(x, n_seqs, pool_w, pool_b, cls_w, cls_b, H, L, logits);
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

#define INSTANTIATE(T)                                                                             \
    template cudaError_t cuda_embed_ln<T>(const int32_t *, const int32_t *, int, const T *,        \
                                          const T *, const T *, const float *, const float *, int, \
                                          float, T *, cudaStream_t);                               \
    template cudaError_t cuda_add_ln<T>(const T *, const T *, const float *, const float *, int,   \
                                        int, float, T *, cudaStream_t);                            \
    template cudaError_t cuda_bias_gelu<T>(T *, const T *, int, int, cudaStream_t);                \
    template cudaError_t cuda_gather_rows<T>(const T *, const int32_t *, int, int, T *,            \
                                             cudaStream_t);                                        \
    template cudaError_t cuda_pool_classify<T>(const T *, int, const T *, const float *,           \
                                               const T *, const float *, int, int, float *,        \
                                               cudaStream_t);                                      \
    template cudaError_t cuda_convert<T>(const float *, size_t, T *, cudaStream_t);                \
    template cudaError_t cuda_to_float<T>(const T *, size_t, float *, cudaStream_t);
INSTANTIATE(__half)
INSTANTIATE(__nv_bfloat16)
