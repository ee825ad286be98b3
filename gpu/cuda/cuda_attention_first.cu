// Attention for one query per sequence, its first token ([CLS]): all the last encoder layer
// needs, since only [CLS] rows reach the pooler (the CPU backend does the same). One warp per
// (sequence, head): in each chunk of 32 keys lane l scores key j0 + l against the query (held
// in shared memory, pre-scaled into base 2), the chunk's softmax folds into a running max and
// sum, and lane l accumulates output dims 2l, 2l + 1 over the chunk's values (a value row is
// one coalesced 128-byte read). Memory-bound: every key and value row is read once.
#include "gpu/cuda/cuda_common.cuh"

#define AF_WARPS 4 /* heads per block */
#define AF_D     64

template <typename T>
__global__ void __launch_bounds__(AF_WARPS * 32)
    attention_first_kernel(const T *q, int ldq, const T *__restrict__ k, const T *__restrict__ v,
                           int ld, const int32_t *__restrict__ cu, int heads, T *out, int ldo,
                           float scale_log2) {
    __shared__ float qs[AF_WARPS][AF_D]; // this warp's query, times scale * log2(e)
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int s = blockIdx.x, h = blockIdx.y * AF_WARPS + warp;
    if (h >= heads) return;
    const int start = cu[s], len = cu[s + 1] - start;
    // out may be q itself: the query is read whole before anything is written.
    float2 qv = st<T>::to_f2(
        *reinterpret_cast<const uint32_t *>(q + (size_t)s * ldq + h * AF_D + 2 * lane));
    qs[warp][2 * lane] = qv.x * scale_log2;
    qs[warp][2 * lane + 1] = qv.y * scale_log2;
    __syncwarp();
    const T *kh = k + (size_t)start * ld + h * AF_D, *vh = v + (size_t)start * ld + h * AF_D;
    float m = -INFINITY, l = 0.f, o0 = 0.f, o1 = 0.f;
    for (int j0 = 0; j0 < len; j0 += 32) {
        const int j = j0 + lane, n = len - j0 < 32 ? len - j0 : 32;
        float sc = -INFINITY;
        if (j < len) {
            const T *kr = kh + (size_t)j * ld;
            float acc = 0.f;
#pragma unroll
            for (int c = 0; c < AF_D / 8; c++) {
                float f[8];
                load8(kr + 8 * c, f);
#pragma unroll
                for (int e = 0; e < 8; e++)
                    acc = fmaf(qs[warp][8 * c + e], f[e], acc);
            }
            sc = acc;
        }
        float cm = sc;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            cm = fmaxf(cm, __shfl_xor_sync(0xffffffffu, cm, o));
        const float mn = fmaxf(m, cm); // finite: every chunk holds at least one key
        const float al = exp2f(m - mn);
        const float p = j < len ? exp2f(sc - mn) : 0.f;
        l = l * al + warp_sum(p);
        o0 *= al, o1 *= al;
        m = mn;
        const T *vr = vh + (size_t)j0 * ld + 2 * lane;
#pragma unroll 8
        for (int jj = 0; jj < n; jj++) {
            const float pj = __shfl_sync(0xffffffffu, p, jj);
            const float2 vv =
                st<T>::to_f2(*reinterpret_cast<const uint32_t *>(vr + (size_t)jj * ld));
            o0 = fmaf(pj, vv.x, o0);
            o1 = fmaf(pj, vv.y, o1);
        }
    }
    *reinterpret_cast<uint32_t *>(out + (size_t)s * ldo + h * AF_D + 2 * lane) =
        st<T>::pack(o0 / l, o1 / l);
}

template <typename T>
cudaError_t cuda_attention_first(const T *q, int ldq, const T *k, const T *v, int ld,
                                 const int32_t *cu, int n_seqs, int heads, T *out, int ldo,
                                 cudaStream_t st) {
    if (n_seqs <= 0) return cudaSuccess;
    if (ld % 8 != 0 || ldq % 2 != 0 || ldo % 2 != 0) return cudaErrorInvalidValue;
    dim3 grid((unsigned)n_seqs, (unsigned)((heads + AF_WARPS - 1) / AF_WARPS));
    const float scale_log2 = CUDA_ATT_SCALE_LOG2;
    attention_first_kernel<T>
        <<<grid, AF_WARPS * 32, 0, st>>>(q, ldq, k, v, ld, cu, heads, out, ldo, scale_log2);
    return cudaGetLastError();
}

template cudaError_t cuda_attention_first<__half>(const __half *, int, const __half *,
                                                  const __half *, int, const int32_t *, int, int,
                                                  __half *, int, cudaStream_t);
template cudaError_t cuda_attention_first<__nv_bfloat16>(const __nv_bfloat16 *, int,
                                                         const __nv_bfloat16 *,
                                                         const __nv_bfloat16 *, int,
                                                         const int32_t *, int, int, __nv_bfloat16 *,
                                                         int, cudaStream_t);
