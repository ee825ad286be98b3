// GeGLU (ModernBERT's MLP) in place over the Wi GEMM's (n, 2I) output: the first I columns
// become act(input) * gate, and Wo reads them with leading dimension 2I, so the gated
// activations need no buffer of their own. 8 elements a thread, fp32 arithmetic.
#include "gpu/cuda/cuda_common.cuh"

template <typename T, int A> __global__ void geglu_kernel(T *x, int n, int I) {
    const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x, per = (size_t)I / 8;
    if (i >= (size_t)n * per) return;
    const size_t row = i / per, col = (i % per) * 8;
    T *a = x + row * 2 * (size_t)I + col;
    float u[8], g[8];
    load8(a, u);
    load8(a + I, g);
#pragma unroll
    for (int k = 0; k < 8; k++)
        u[k] = act_f<A>(u[k]) * g[k];
    store8(a, u);
}

template <typename T> cudaError_t cuda_geglu(T *x, int n, int I, int act, cudaStream_t st) {
    if (n <= 0) return cudaSuccess;
    if (I % 8 != 0) return cudaErrorInvalidValue;
    const size_t threads = (size_t)n * (I / 8);
    const unsigned grid = (unsigned)((threads + 255) / 256);
    switch (act) {
    case GPU_ACT_GELU:
        geglu_kernel<T, GPU_ACT_GELU><<<grid, 256, 0, st>>>(x, n, I);
        break;
    case GPU_ACT_GELU_TANH:
        geglu_kernel<T, GPU_ACT_GELU_TANH><<<grid, 256, 0, st>>>(x, n, I);
        break;
    case GPU_ACT_RELU:
        geglu_kernel<T, GPU_ACT_RELU><<<grid, 256, 0, st>>>(x, n, I);
        break;
    default:
        geglu_kernel<T, GPU_ACT_TANH><<<grid, 256, 0, st>>>(x, n, I);
    }
    return cudaGetLastError();
}

template cudaError_t cuda_geglu<__half>(__half *, int, int, int, cudaStream_t);
template cudaError_t cuda_geglu<__nv_bfloat16>(__nv_bfloat16 *, int, int, int, cudaStream_t);
