// Shared device helpers of the CUDA backend: storage types (fp16 / bf16) behind one
// template parameter, 16-byte vector loads, warp reductions, and the launchers that
// cuda_backend.cu and cuda_test_api.cu call. Included by .cu files only.
#ifndef RECLASS_GPU_CUDA_COMMON_CUH
#define RECLASS_GPU_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "gpu/model/model.h"

// Conversions between a storage type and fp32; pair packing for 32-bit moves.
template <typename T> struct st;
template <> struct st<__half> {
    static __host__ __device__ __forceinline__ float to_f(__half x) {
        return __half2float(x);
    }
    static __host__ __device__ __forceinline__ __half from_f(float f) {
        return __float2half_rn(f);
    }
    static __device__ __forceinline__ float2 to_f2(uint32_t u) {
        __half2 h = *reinterpret_cast<__half2 *>(&u);
        return __half22float2(h);
    }
    static __device__ __forceinline__ uint32_t pack(float a, float b) {
        __half2 h = __floats2half2_rn(a, b);
        return *reinterpret_cast<uint32_t *>(&h);
    }
};
template <> struct st<__nv_bfloat16> {
    static __host__ __device__ __forceinline__ float to_f(__nv_bfloat16 x) {
        return __bfloat162float(x);
    }
    static __host__ __device__ __forceinline__ __nv_bfloat16 from_f(float f) {
        return __float2bfloat16_rn(f);
    }
    static __device__ __forceinline__ float2 to_f2(uint32_t u) {
        __nv_bfloat162 h = *reinterpret_cast<__nv_bfloat162 *>(&u);
        return __bfloat1622float2(h);
    }
    static __device__ __forceinline__ uint32_t pack(float a, float b) {
        __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
        return *reinterpret_cast<uint32_t *>(&h);
    }
};

// 8 storage elements (16 bytes) <-> 8 floats.
template <typename T> __device__ __forceinline__ void load8(const T *p, float *f) {
    uint4 u = *reinterpret_cast<const uint4 *>(p);
    float2 a = st<T>::to_f2(u.x), b = st<T>::to_f2(u.y), c = st<T>::to_f2(u.z),
           d = st<T>::to_f2(u.w);
    f[0] = a.x, f[1] = a.y, f[2] = b.x, f[3] = b.y, f[4] = c.x, f[5] = c.y, f[6] = d.x, f[7] = d.y;
}
template <typename T> __device__ __forceinline__ void store8(T *p, const float *f) {
    uint4 u;
    u.x = st<T>::pack(f[0], f[1]), u.y = st<T>::pack(f[2], f[3]);
    u.z = st<T>::pack(f[4], f[5]), u.w = st<T>::pack(f[6], f[7]);
    *reinterpret_cast<uint4 *>(p) = u;
}

// fp32 rows (the bf16 path's residual stream, the head): the same 8-element moves.
__device__ __forceinline__ void load8(const float *p, float *f) {
    *reinterpret_cast<float4 *>(f) = *reinterpret_cast<const float4 *>(p);
    *reinterpret_cast<float4 *>(f + 4) = *reinterpret_cast<const float4 *>(p + 4);
}
__device__ __forceinline__ void store8(float *p, const float *f) {
    *reinterpret_cast<float4 *>(p) = *reinterpret_cast<const float4 *>(f);
    *reinterpret_cast<float4 *>(p + 4) = *reinterpret_cast<const float4 *>(f + 4);
}

// RoPE's turn of the pair (x, y) = (h[j], h[j + d/2]) by cs = (cos, sin): (x cos - y sin,
// y cos + x sin) in fp32 with every rounding spelled out, since the in-place pass
// (cuda_rope.cu) and the attention kernels that turn their queries as they load them
// (rope_q_frag) must give the same bits, and x * c - y * s would leave the FMA contraction to
// the compiler, kernel by kernel.
__device__ __forceinline__ float2 rope_turn(float x, float y, float2 cs) {
    return make_float2(__fmaf_rn(x, cs.x, -__fmul_rn(y, cs.y)),
                       __fmaf_rn(y, cs.x, __fmul_rn(x, cs.y)));
}

// RoPE on a warp's 16 query rows of head_dim 64 held as mma.sync m16n8k16 A fragments, the
// layout both attention kernels load (qa[kk][e]: dims kk * 16 + 2c + (e & 2 ? 8 : 0) and the
// next, of row g (e even) or g + 8 (e odd)): dims j < 32 sit in k-steps 0 and 1, their
// partners j + 32 in the same slots of k-steps 2 and 3, so every pair is in one thread. cs0,
// cs1: the table rows (cuda_rope_table's layout, 32 (cos, sin) a row) of the two rows'
// positions. Each value is rounded to T as cuda_rope stores it.
template <typename T>
__device__ __forceinline__ void rope_q_frag(uint32_t (&qa)[4][4], const float2 *cs0,
                                            const float2 *cs1, int c) {
#pragma unroll
    for (int kk = 0; kk < 2; kk++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int j = kk * 16 + 2 * c + (e & 2 ? 8 : 0);
            const float4 t = *reinterpret_cast<const float4 *>((e & 1 ? cs1 : cs0) + j);
            const float2 x = st<T>::to_f2(qa[kk][e]), y = st<T>::to_f2(qa[kk + 2][e]);
            const float2 a = rope_turn(x.x, y.x, make_float2(t.x, t.y));
            const float2 b = rope_turn(x.y, y.y, make_float2(t.z, t.w));
            qa[kk][e] = st<T>::pack(a.x, b.x);
            qa[kk + 2][e] = st<T>::pack(a.y, b.y);
        }
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// The activations of gpu_act_t (gpu/model/model.h), as HF computes them (in fp32). tanhf and
// erff, not the fast-math intrinsics: --use_fast_math leaves both at full precision.
template <int A> __device__ __forceinline__ float act_f(float z) {
    if (A == GPU_ACT_GELU) return 0.5f * z * (1.f + erff(z * 0.70710678118654752f));
    if (A == GPU_ACT_GELU_TANH)
        return 0.5f * z * (1.f + tanhf(0.79788456080286536f * (z + 0.044715f * z * z * z)));
    if (A == GPU_ACT_RELU) return z > 0.f ? z : 0.f;
    return tanhf(z);
}

// Launchers (cuda_kernels.cu, cuda_attention.cu). All take the stream they run on and
// return cudaGetLastError() of the launch. T is the storage type; R the residual stream's
// type: T itself (fp16 path), or float (bf16 path, whose residual stays fp32).
//
// LayerNorm(word[ids] + pos[pos] + type0) into out_r (R, may be NULL) and out_t (T).
template <typename T, typename R>
cudaError_t cuda_embed_ln(const int32_t *ids, const int32_t *pos, int n_tokens, const T *word,
                          const T *posemb, const T *type0, const float *gamma, const float *beta,
                          int H, float eps, R *out_r, T *out_t, cudaStream_t st);
// LayerNorm(a + res) (res may be NULL) into out_r (R, may be NULL; may alias res) and
// out_t (T, may be NULL; may alias a). Rows of H. sms: the device's SM count (the grid is
// capped at 3 blocks of 8 warps per SM, each warp walking several rows).
template <typename T, typename R>
cudaError_t cuda_add_ln(const T *a, const R *res, const float *gamma, const float *beta, int n,
                        int H, float eps, R *out_r, T *out_t, int sms, cudaStream_t st);
// x (n, cols) = act(x + bias) in place, act a gpu_act_t: the erf GELU of "gelu" (no cuBLASLt
// epilogue computes it), or the tanh GELU / ReLU where cuBLASLt refused their epilogue.
// bias may be NULL (a bias epilogue already added it); n * cols a multiple of 8.
template <typename T>
cudaError_t cuda_bias_act(T *x, const T *bias, int n, int cols, int act, cudaStream_t st);
// dst (n_seqs, H) = src rows cu[s] (the [CLS] token of each sequence).
template <typename E>
cudaError_t cuda_gather_rows(const E *src, const int32_t *cu, int n_seqs, int H, E *dst,
                             cudaStream_t st);
// x = act(x), n fp32 elements in place, act a gpu_act_t (the head's activation).
cudaError_t cuda_act_f32(float *x, size_t n, int act, cudaStream_t st);
// The attention kernels' softmax scale for head_dim 64, in base 2 (they use exp2):
// 1/sqrt(64) * log2(e).
#define CUDA_ATT_SCALE_LOG2 (0.125f * 1.4426950408889634f)
// out (tokens, heads*64): per-sequence softmax(q k^T / 8) v, q/k/v rows of stride ld.
// q_tiles_max: ceil(max_len / 64) normally, 1 when only each sequence's first rows matter.
// wgmma: the Hopper kernel (only where cuda_attention_has_wgmma), else mma.sync.
template <typename T>
cudaError_t cuda_attention(const T *q, const T *k, const T *v, int ld, const int32_t *cu,
                           int n_seqs, int heads, int q_tiles_max, T *out, int out_ld, int wgmma,
                           cudaStream_t st);
// What an attention layer adds to softmax(q k^T * scale) v (cuda_attention_opts): window >= 0
// keeps only keys with |i - j| <= window (ModernBERT's local layers); c2p, p2c and rrow, all
// set, add DeBERTa's c2p[i, r] + p2c[j, r] to q . k, r = rrow[i - j + rrow_mid], c2p and p2c
// rows (tokens, heads, R). scale multiplies the whole score (1/sqrt(head_dim * factor)).
// ldq > 0: the queries' row stride when it is not ld (queries in a buffer of their own).
// wgmma: the device runs the wgmma kernel (cuda_attention_has_wgmma), which then takes the
// layers with BERT's scale (1/8), ldq = ld and no c2p / p2c.
// rope, set: the kernel turns each query by RoPE as it loads it (rope_q_frag), token t at
// position pos[t], from the table rope (cuda_rope_table's layout for head_dim rope_dim, which
// must be 64), bit for bit as cuda_rope would have turned it in place; keys come turned
// (cuda_rope with q NULL). Not with c2p / p2c, which read the queries themselves.
template <typename T> struct cuda_att_opts_t {
    float scale;
    int window;
    const T *c2p, *p2c;
    const int32_t *rrow;
    int rrow_mid, R, heads;
    int ldq;
    int wgmma;
    const float *rope;
    const int32_t *pos;
    int rope_dim;
};
// The mma.sync kernel (every device; a window on wgmma where o says) with the options above;
// head_dim 64.
template <typename T>
cudaError_t cuda_attention_opts(const T *q, const T *k, const T *v, int ld, const int32_t *cu,
                                int n_seqs, int heads, int q_tiles_max, T *out, int out_ld,
                                const cuda_att_opts_t<T> *o, cudaStream_t st);
// RoPE in place on the heads of the query rows q (n, ldq; NULL: keys only) and key rows k
// (n, ldk), heads of head_dim (a multiple of 16), token t at position pos[t]: x'[j] = x[j] cos
// - x[j + d/2] sin, x'[j + d/2] = x[j + d/2] cos + x[j] sin (HF's ModernBertRotaryEmbedding;
// cuda_rope.cu), cos and sin from table (device, cuda_rope_table's layout, rows > every pos).
template <typename T>
cudaError_t cuda_rope(T *q, int ldq, T *k, int ldk, const int32_t *pos, int n, int heads,
                      int head_dim, const float *table, cudaStream_t st);
// The host table of cuda_rope for one theta: out (rows, head_dim / 2) pairs (cos, sin) of
// angle p inv_j, inv_j = 1 / theta^(2j / d) (fp32, as HF), the angle in fp32, its cosine and
// sine in double rounded to fp32.
extern "C" void cuda_rope_table(float theta, int head_dim, int rows, float *out);
// dst rows cu[s] (row stride ld) = src rows s (n_seqs, H): a sequence's first-token row put
// back among its tokens (cuda_pool.cu).
template <typename T>
cudaError_t cuda_scatter_rows(const T *src, const int32_t *cu, int n_seqs, int H, T *dst, int ld,
                              cudaStream_t st);
// GeGLU in place on rows (n, 2I): x[:, :I] = act(x[:, :I]) * x[:, I:], act a gpu_act_t; the
// next GEMM reads the first I columns with leading dimension 2I (cuda_geglu.cu). I % 8 == 0.
template <typename T> cudaError_t cuda_geglu(T *x, int n, int I, int act, cudaStream_t st);
// out (n_seqs, H) fp32 = mean over each sequence's rows of x (tokens, H; rows ld apart)
// (cuda_pool.cu).
template <typename E>
cudaError_t cuda_mean_pool(const E *x, int ld, const int32_t *cu, int n_seqs, int H, float *out,
                           cudaStream_t st);
// dst (n_seqs, n) = the first n columns of src rows cu[s] (rows lds apart): each sequence's
// first token (cuda_pool.cu).
template <typename E>
cudaError_t cuda_first_rows(const E *src, int lds, const int32_t *cu, int n_seqs, int n, E *dst,
                            cudaStream_t st);
// DeBERTa's c2p / p2c products of one layer: out (n, heads, R) = x_h (n, d) . rel_h (R, d)
// for every head h, x rows of stride ldx (Q or K of the QKV rows), rel (R, heads * d) the
// layer's projected relative keys or queries; one batched cuBLASLt matmul (cuda_rel.cu).
struct cuda_rel_gemm; // cuda_gemm.cuh
template <typename T>
int cuda_rel_scores(struct cuda_rel_gemm *r, const T *x, int ldx, int n, const T *rel, int R,
                    int heads, int head_dim, T *out, cudaStream_t st);
// 1 when device runs the wgmma kernel (compute capability 9.0 exactly: sm_90a code), else 0.
int cuda_attention_has_wgmma(int device);
// The same on Hopper's wgmma (cuda_attention_sm90a.cu, compute capability 9.0 only): one
// warpgroup of 64 queries per block.
// window >= 0: only keys |i - j| <= window (the local layers), else every key. rope, pos
// (NULL: none): the queries turned as they load, as cuda_att_opts_t's.
template <typename T>
cudaError_t cuda_attention_wgmma(const T *q, const T *k, const T *v, int ld, const int32_t *cu,
                                 int n_seqs, int heads, int q_tiles_max, T *out, int out_ld,
                                 int window, const float *rope, const int32_t *pos,
                                 cudaStream_t st);
// out (n_seqs, ldo): attention of each sequence's first query only (q (n_seqs, ldq), one row
// per sequence, e.g. the gathered [CLS] rows) against all its keys and values (rows of
// stride ld at cu[s]); out may be q (cuda_attention_first.cu).
template <typename T>
cudaError_t cuda_attention_first(const T *q, int ldq, const T *k, const T *v, int ld,
                                 const int32_t *cu, int n_seqs, int heads, T *out, int ldo,
                                 cudaStream_t st);
// y (n) += a (n), fp32 += storage type (cuda_kernels.cu).
template <typename T> cudaError_t cuda_add_f32(const T *a, float *y, size_t n, cudaStream_t st);
// dst = (T) src, n elements, on the device.
template <typename T> cudaError_t cuda_convert(const float *src, size_t n, T *dst, cudaStream_t st);
template <typename T>
cudaError_t cuda_to_float(const T *src, size_t n, float *dst, cudaStream_t st);

#endif
