// RoPE (ModernBERT) in place on the K heads right after the QKV GEMM (and on Q where no
// attention kernel turns it as it loads it: cuda_att_opts_t.rope). Keys are turned here,
// once: every query tile of a sequence reads each of its key tiles, and turning them in each
// costs more than this pass (NOTES-cuda.md). The cosines and sines come from
// a table made once at init (cuda_rope_table, on the host, in double as HF's fp32 angles
// need: positions reach 8,192, where sincosf's error grows with the angle), so the pass is
// memory-bound: a double pow and sincos per element and layer would cost more than the QKV
// GEMM before it (H100: 64 FP64 lanes per SM against 1,024 fp16 tensor FLOPs per clock). A
// thread turns 8 pairs (j, j + d/2)
// of one head of one token: two 16-byte loads, two 16-byte stores, its 8 (cos, sin) from the
// table (L2-resident: max_len x d/2 float2 per theta).
#include <math.h>

#include "gpu/cuda/cuda_common.cuh"

extern "C" void cuda_rope_table(float theta, int head_dim, int rows, float *out) {
    const int half = head_dim / 2;
    for (int j = 0; j < half; j++) {
        // inv_j as HF forms it (fp32 exponent, the power in double, rounded to fp32)
        const float e = (float)(2 * j) / (float)head_dim;
        const float inv = (float)(1.0 / pow((double)theta, (double)e));
        for (int p = 0; p < rows; p++) {
            const double a = (double)((float)p * inv); // the angle in fp32, as HF's
            out[2 * ((size_t)p * half + j)] = (float)cos(a);
            out[2 * ((size_t)p * half + j) + 1] = (float)sin(a);
        }
    }
}

template <typename T>
__global__ void rope_kernel(T *q, int ldq, T *k, int ldk, const int32_t *__restrict__ pos, int n,
                            int heads, int head_dim, const float2 *__restrict__ cs) {
    const int half = head_dim / 2, chunks = half / 8, q_heads = q ? heads : 0;
    const int per_tok = (q_heads + heads) * chunks;
    const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= (size_t)n * per_tok) return;
    const int t = (int)(i / per_tok), r = (int)(i % per_tok), hh = r / chunks;
    const int j0 = (r % chunks) * 8;
    T *h = hh < q_heads ? q + (size_t)t * ldq + (size_t)hh * head_dim
                        : k + (size_t)t * ldk + (size_t)(hh - q_heads) * head_dim;
    const float4 *c4 = reinterpret_cast<const float4 *>(cs + (size_t)pos[t] * half + j0);
    float a[8], b[8], c[16];
#pragma unroll
    for (int u = 0; u < 4; u++)
        *reinterpret_cast<float4 *>(c + 4 * u) = c4[u];
    load8(h + j0, a);
    load8(h + j0 + half, b);
#pragma unroll
    for (int u = 0; u < 8; u++) {
        const float2 r = rope_turn(a[u], b[u], make_float2(c[2 * u], c[2 * u + 1]));
        a[u] = r.x, b[u] = r.y;
    }
    store8(h + j0, a);
    store8(h + j0 + half, b);
}

template <typename T>
cudaError_t cuda_rope(T *q, int ldq, T *k, int ldk, const int32_t *pos, int n, int heads,
                      int head_dim, const float *table, cudaStream_t st) {
    if (n <= 0) return cudaSuccess;
    // 16-byte moves: 8-element pair chunks, rows and heads on 8-element boundaries
    if (head_dim % 16 != 0 || ldk % 8 != 0 || (q && ldq % 8 != 0) ||
        ((uintptr_t)q | (uintptr_t)k) % 16 != 0)
        return cudaErrorInvalidValue;
    const size_t items = (size_t)n * (q ? 2 : 1) * heads * (head_dim / 16);
    rope_kernel<T><<<(unsigned)((items + 255) / 256), 256, 0, st>>>(
        q, ldq, k, ldk, pos, n, heads, head_dim, reinterpret_cast<const float2 *>(table));
    return cudaGetLastError();
}

template cudaError_t cuda_rope<__half>(__half *, int, __half *, int, const int32_t *, int, int, int,
                                       const float *, cudaStream_t);
template cudaError_t cuda_rope<__nv_bfloat16>(__nv_bfloat16 *, int, __nv_bfloat16 *, int,
                                              const int32_t *, int, int, int, const float *,
                                              cudaStream_t);
