// Mean pooling (ModernBERT's classifier_pooling = "mean"): the fp32 mean of each sequence's
// rows, the input of the fp32 head. One block per sequence; thread c sums column c (and
// c + 256, ...) down the rows, so each row is read coalesced. And the first-token rows put
// back among the tokens (the last layer's queries of a first-token attention).
#include "gpu/cuda/cuda_common.cuh"

template <typename E> __device__ __forceinline__ float pool_f(E x) {
    return st<E>::to_f(x);
}
template <> __device__ __forceinline__ float pool_f<float>(float x) {
    return x;
}

template <typename E>
__global__ void mean_pool_kernel(const E *__restrict__ x, int ld, const int32_t *__restrict__ cu,
                                 int H, float *__restrict__ out) {
    const int s = blockIdx.x, t0 = cu[s], len = cu[s + 1] - t0;
    for (int c = threadIdx.x; c < H; c += blockDim.x) {
        float sum = 0.f;
        for (int t = 0; t < len; t++)
            sum += pool_f<E>(x[(size_t)(t0 + t) * ld + c]);
        out[(size_t)s * H + c] = sum / (float)len;
    }
}

template <typename E>
cudaError_t cuda_mean_pool(const E *x, int ld, const int32_t *cu, int n_seqs, int H, float *out,
                           cudaStream_t st) {
    if (n_seqs <= 0) return cudaSuccess;
    mean_pool_kernel<E><<<n_seqs, 256, 0, st>>>(x, ld, cu, H, out);
    return cudaGetLastError();
}

template cudaError_t cuda_mean_pool<__half>(const __half *, int, const int32_t *, int, int, float *,
                                            cudaStream_t);
template cudaError_t cuda_mean_pool<__nv_bfloat16>(const __nv_bfloat16 *, int, const int32_t *, int,
                                                   int, float *, cudaStream_t);
template cudaError_t cuda_mean_pool<float>(const float *, int, const int32_t *, int, int, float *,
                                           cudaStream_t);

template <typename T>
__global__ void scatter_rows_kernel(const T *__restrict__ src, const int32_t *__restrict__ cu,
                                    int H, T *__restrict__ dst, int ld) {
    const int s = blockIdx.x;
    for (int c = threadIdx.x; c < H; c += blockDim.x)
        dst[(size_t)cu[s] * ld + c] = src[(size_t)s * H + c];
}

template <typename T>
cudaError_t cuda_scatter_rows(const T *src, const int32_t *cu, int n_seqs, int H, T *dst, int ld,
                              cudaStream_t st) {
    if (n_seqs <= 0) return cudaSuccess;
    scatter_rows_kernel<T><<<n_seqs, 256, 0, st>>>(src, cu, H, dst, ld);
    return cudaGetLastError();
}

template cudaError_t cuda_scatter_rows<__half>(const __half *, const int32_t *, int, int, __half *,
                                               int, cudaStream_t);
template cudaError_t cuda_scatter_rows<__nv_bfloat16>(const __nv_bfloat16 *, const int32_t *, int,
                                                      int, __nv_bfloat16 *, int, cudaStream_t);

template <typename E>
__global__ void first_rows_kernel(const E *__restrict__ src, int lds,
                                  const int32_t *__restrict__ cu, int n, E *__restrict__ dst) {
    const int s = blockIdx.x;
    for (int c = threadIdx.x; c < n; c += blockDim.x)
        dst[(size_t)s * n + c] = src[(size_t)cu[s] * lds + c];
}

template <typename E>
cudaError_t cuda_first_rows(const E *src, int lds, const int32_t *cu, int n_seqs, int n, E *dst,
                            cudaStream_t st) {
    if (n_seqs <= 0) return cudaSuccess;
    first_rows_kernel<E><<<n_seqs, 256, 0, st>>>(src, lds, cu, n, dst);
    return cudaGetLastError();
}

template cudaError_t cuda_first_rows<__half>(const __half *, int, const int32_t *, int, int,
                                             __half *, cudaStream_t);
template cudaError_t cuda_first_rows<__nv_bfloat16>(const __nv_bfloat16 *, int, const int32_t *,
                                                    int, int, __nv_bfloat16 *, cudaStream_t);
template cudaError_t cuda_first_rows<float>(const float *, int, const int32_t *, int, int, float *,
                                            cudaStream_t);
