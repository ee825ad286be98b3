// RoPE (ModernBERT) in place on the Q and K heads right after the QKV GEMM, so the attention
// kernels see rotated rows and need no variant of their own. One block per token; a thread
// per (head of Q or K, pair j): both elements of the pair are read before either is written.
// The frequencies and angles follow the CPU reference (gpu/cpu/cpu_modernbert.c): the angle
// pos * inv_j is formed in fp32 as HF forms it, then its sine and cosine are taken in double,
// since --use_fast_math would turn sincosf into __sincosf, whose error grows with the angle
// (positions reach 8,192).
#include "gpu/cuda/cuda_common.cuh"

template <typename T>
__global__ void rope_kernel(T *q, int ldq, T *k, int ldk, const int32_t *__restrict__ pos,
                            int heads, int head_dim, float theta) {
    const int t = blockIdx.x, half = head_dim / 2, q_pairs = q ? heads * half : 0;
    const int pairs = q_pairs + heads * half;
    const float p = (float)pos[t];
    for (int i = threadIdx.x; i < pairs; i += blockDim.x) {
        const int qk = i >= q_pairs, r = qk ? i - q_pairs : i, hh = r / half, j = r % half;
        const float e = (float)(2 * j) / (float)head_dim;
        const float inv = (float)(1.0 / pow((double)theta, (double)e));
        double sn, cs;
        sincos((double)(p * inv), &sn, &cs);
        T *h = qk ? k + (size_t)t * ldk + hh * head_dim : q + (size_t)t * ldq + hh * head_dim;
        const float a = st<T>::to_f(h[j]), b = st<T>::to_f(h[j + half]);
        h[j] = st<T>::from_f(a * (float)cs - b * (float)sn);
        h[j + half] = st<T>::from_f(b * (float)cs + a * (float)sn);
    }
}

template <typename T>
cudaError_t cuda_rope(T *q, int ldq, T *k, int ldk, const int32_t *pos, int n, int heads,
                      int head_dim, float theta, cudaStream_t st) {
    if (n <= 0) return cudaSuccess;
    if (head_dim % 2 != 0) return cudaErrorInvalidValue;
    rope_kernel<T><<<n, 256, 0, st>>>(q, ldq, k, ldk, pos, heads, head_dim, theta);
    return cudaGetLastError();
}

template cudaError_t cuda_rope<__half>(__half *, int, __half *, int, const int32_t *, int, int, int,
                                       float, cudaStream_t);
template cudaError_t cuda_rope<__nv_bfloat16>(__nv_bfloat16 *, int, __nv_bfloat16 *, int,
                                              const int32_t *, int, int, int, float, cudaStream_t);
