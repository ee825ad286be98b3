// Padding-free fused attention (flash style) for head_dim 64 on tensor cores
// (mma.sync m16n8k16, fp32 accumulate; sm_80 and later). One block = 64 queries of one
// head of one sequence, 4 warps of 16 query rows; keys and values stream through shared
// memory in tiles of 64 (cp.async, double buffered), the softmax runs online in registers,
// so no (len x len) score tensor ever reaches device memory and no padding is computed
// beyond the last 64-row tile of each sequence. Two variants by template (MODE): a sliding
// window (ModernBERT's local layers: a query tile reads only the <= 3 key tiles its window
// touches, |i - j| > w masked), and DeBERTa's disentangled scores (c2p + p2c gathered at
// each pair's relative row and added to q . k before the softmax). With RoPE (opt.rope) the
// queries are turned as they load (rope_q_frag); the keys come turned.
#include <math.h>
#include <stdlib.h>

#include "gpu/cuda/cuda_common.cuh"

#define ATT_D     64
#define ATT_WARPS 4
#define ATT_BN    64
#define ATT_LDS   (ATT_D + 8) /* padded row (144 B): ldmatrix rows land in distinct banks */

template <typename T>
__device__ __forceinline__ void mma16816(float *c, const uint32_t *a, uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void mma16816<__half>(float *c, const uint32_t *a, uint32_t b0,
                                                 uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float *c, const uint32_t *a, uint32_t b0,
                                                        uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void ldsm_x4(uint32_t *r, const void *p) {
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t *r, const void *p) {
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem) {
    unsigned a = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(a), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::);
}
template <int N> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Stages keys/values [k0, k0 + 64) of this head; rows past the sequence are zeroed so that
// masked (zero) probabilities never meet garbage (0 * NaN) in P V.
template <typename T, int NT>
__device__ __forceinline__ void att_load_tile(T (*ks)[ATT_LDS], T (*vs)[ATT_LDS], const T *k,
                                              const T *v, int ld, int k0, int len, int tid) {
#pragma unroll
    for (int i = 0; i < ATT_BN * 8 / NT; i++) {
        int idx = tid + i * NT, row = idx >> 3, c8 = (idx & 7) * 8;
        if (k0 + row < len) {
            cp_async16(&ks[row][c8], k + (size_t)(k0 + row) * ld + c8);
            cp_async16(&vs[row][c8], v + (size_t)(k0 + row) * ld + c8);
        } else {
            *reinterpret_cast<uint4 *>(&ks[row][c8]) = make_uint4(0, 0, 0, 0);
            *reinterpret_cast<uint4 *>(&vs[row][c8]) = make_uint4(0, 0, 0, 0);
        }
    }
}

// Four warps of 16 query rows each share every key/value tile; 128 registers, so four
// blocks (16 warps) fit an SM.
enum { ATT_PLAIN, ATT_WINDOW, ATT_DISENT };

// The score of query row ri (< len) and key kj (< len) of head h, DeBERTa: raw q . k plus
// c2p[ri, r] + p2c[kj, r], r = rrow[ri - kj + rrow_mid], rows of c2p/p2c (tokens, heads, R).
template <typename T>
__device__ __forceinline__ float att_disent(const cuda_att_opts_t<T> &o, int start, int h, int ri,
                                            int kj) {
    const int r = o.rrow[ri - kj + o.rrow_mid];
    const size_t ldb = (size_t)o.heads * o.R, hr = (size_t)h * o.R + r;
    return st<T>::to_f(o.c2p[(size_t)(start + ri) * ldb + hr]) +
           st<T>::to_f(o.p2c[(size_t)(start + kj) * ldb + hr]);
}

template <typename T, int MODE>
__global__ void __launch_bounds__(ATT_WARPS * 32, 4)
    attention_kernel(const T *__restrict__ q, const T *__restrict__ k, const T *__restrict__ v,
                     int ld, const int32_t *__restrict__ cu, T *__restrict__ out, int out_ld,
                     float scale_log2, cuda_att_opts_t<T> opt) {
    constexpr int NT = ATT_WARPS * 32;
    int h = blockIdx.y, s = blockIdx.z;
    int start = cu[s], len = cu[s + 1] - start;
    int q0 = blockIdx.x * (ATT_WARPS * 16);
    if (q0 >= len) return;
    __shared__ __align__(16) T ks[2][ATT_BN][ATT_LDS];
    __shared__ __align__(16) T vs[2][ATT_BN][ATT_LDS];
    int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, c = lane & 3;
    size_t head = (size_t)start * ld + h * ATT_D;
    const int ldq = MODE != ATT_PLAIN && opt.ldq > 0 ? opt.ldq : ld; // queries' own row stride
    const T *qh = q + (size_t)start * ldq + h * ATT_D, *kh = k + head, *vh = v + head;

    int n_tiles = (len + ATT_BN - 1) / ATT_BN, j_lo = 0;
    if (MODE == ATT_WINDOW) { // key tiles [j_lo, n_tiles) hold this query tile's windows
        const int w = opt.window, hi = (q0 + ATT_WARPS * 16 - 1 + w) / ATT_BN + 1;
        j_lo = (q0 - w > 0 ? q0 - w : 0) / ATT_BN;
        n_tiles = hi < n_tiles ? hi : n_tiles;
    }
    att_load_tile<T, NT>(ks[0], vs[0], kh, vh, ld, j_lo * ATT_BN, len, tid);
    cp_async_commit();

    // This warp's 16 query rows as A fragments (4 k-steps of 16 dims); rows past the
    // sequence read as zero and are never stored.
    uint32_t qa[4][4];
    int r0 = q0 + warp * 16 + g, r1 = r0 + 8;
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        int d = kk * 16 + 2 * c;
        qa[kk][0] = r0 < len ? *reinterpret_cast<const uint32_t *>(qh + (size_t)r0 * ldq + d) : 0u;
        qa[kk][1] = r1 < len ? *reinterpret_cast<const uint32_t *>(qh + (size_t)r1 * ldq + d) : 0u;
        qa[kk][2] =
            r0 < len ? *reinterpret_cast<const uint32_t *>(qh + (size_t)r0 * ldq + d + 8) : 0u;
        qa[kk][3] =
            r1 < len ? *reinterpret_cast<const uint32_t *>(qh + (size_t)r1 * ldq + d + 8) : 0u;
    }
    if (MODE != ATT_DISENT && opt.rope) { // rows past the sequence (zeros) take position 0's
        const float2 *cs = reinterpret_cast<const float2 *>(opt.rope);
        rope_q_frag<T>(qa, cs + (size_t)(r0 < len ? opt.pos[start + r0] : 0) * (ATT_D / 2),
                       cs + (size_t)(r1 < len ? opt.pos[start + r1] : 0) * (ATT_D / 2), c);
    }

    float o[8][4];
#pragma unroll
    for (int i = 0; i < 8; i++)
        o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;
    int lr = lane & 7, li = lane >> 3; // ldmatrix: this lane's row within its 8x8 matrix li

    for (int j = j_lo; j < n_tiles; j++) {
        if (j + 1 < n_tiles) {
            att_load_tile<T, NT>(ks[(j + 1 - j_lo) & 1], vs[(j + 1 - j_lo) & 1], kh, vh, ld,
                                 (j + 1) * ATT_BN, len, tid);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        T(*kt)[ATT_LDS] = ks[(j - j_lo) & 1];
        T(*vt)[ATT_LDS] = vs[(j - j_lo) & 1];

        float sc[8][4];
#pragma unroll
        for (int i = 0; i < 8; i++)
            sc[i][0] = sc[i][1] = sc[i][2] = sc[i][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
#pragma unroll
            for (int np = 0; np < 4; np++) {
                uint32_t b[4];
                ldsm_x4(b, &kt[np * 16 + lr + ((li & 2) ? 8 : 0)][kk * 16 + ((li & 1) ? 8 : 0)]);
                mma16816<T>(sc[2 * np], qa[kk], b[0], b[1]);
                mma16816<T>(sc[2 * np + 1], qa[kk], b[2], b[3]);
            }
        }

        // Online softmax in base 2 on raw scores (the scale is folded into one FFMA per
        // element); a thread holds rows g (e = 0, 1) and g + 8 (e = 2, 3). Only a sequence's
        // last tile has keys to mask.
        if (MODE != ATT_PLAIN || (j + 1) * ATT_BN > len) {
            int kbase = j * ATT_BN + 2 * c;
#pragma unroll
            for (int nt = 0; nt < 8; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int kj = kbase + nt * 8 + (e & 1), ri = e < 2 ? r0 : r1;
                    if (kj >= len)
                        sc[nt][e] = -INFINITY;
                    else if (MODE == ATT_WINDOW && (ri - kj > opt.window || kj - ri > opt.window))
                        sc[nt][e] = -INFINITY;
                    else if (MODE == ATT_DISENT && ri < len)
                        sc[nt][e] += att_disent<T>(opt, start, h, ri, kj);
                }
        }
        float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < 8; nt++) {
            mx0 = fmaxf(mx0, fmaxf(sc[nt][0], sc[nt][1]));
            mx1 = fmaxf(mx1, fmaxf(sc[nt][2], sc[nt][3]));
        }
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        // Key j*64 < len, so without a window every row has a finite maximum from the first
        // tile on; a window may mask a row's whole tile: a -inf maximum then counts as 0, so
        // that no -inf - -inf makes a NaN (the row's sums stay 0 until its keys come).
        float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
        if (MODE == ATT_WINDOW) {
            mn0 = mn0 == -INFINITY ? 0.f : mn0;
            mn1 = mn1 == -INFINITY ? 0.f : mn1;
        }
        float al0 = exp2f((m0 - mn0) * scale_log2), al1 = exp2f((m1 - mn1) * scale_log2);
        m0 = mn0, m1 = mn1;
        float ms0 = -mn0 * scale_log2, ms1 = -mn1 * scale_log2;
        float rs0 = 0.f, rs1 = 0.f;
#pragma unroll
        for (int nt = 0; nt < 8; nt++) {
            sc[nt][0] = exp2f(fmaf(sc[nt][0], scale_log2, ms0));
            sc[nt][1] = exp2f(fmaf(sc[nt][1], scale_log2, ms0));
            sc[nt][2] = exp2f(fmaf(sc[nt][2], scale_log2, ms1));
            sc[nt][3] = exp2f(fmaf(sc[nt][3], scale_log2, ms1));
            rs0 += sc[nt][0] + sc[nt][1];
            rs1 += sc[nt][2] + sc[nt][3];
        }
        l0 = l0 * al0 + rs0; // per-thread partial sums; the quad is summed once at the end
        l1 = l1 * al1 + rs1;
#pragma unroll
        for (int nt = 0; nt < 8; nt++) {
            o[nt][0] *= al0, o[nt][1] *= al0, o[nt][2] *= al1, o[nt][3] *= al1;
        }

        // O += P V: the score C fragments of key tiles (2kk, 2kk+1) are the A fragment of
        // key step kk; V is read transposed by ldmatrix.trans.
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            uint32_t pa[4];
            pa[0] = st<T>::pack(sc[2 * kk][0], sc[2 * kk][1]);
            pa[1] = st<T>::pack(sc[2 * kk][2], sc[2 * kk][3]);
            pa[2] = st<T>::pack(sc[2 * kk + 1][0], sc[2 * kk + 1][1]);
            pa[3] = st<T>::pack(sc[2 * kk + 1][2], sc[2 * kk + 1][3]);
#pragma unroll
            for (int dp = 0; dp < 4; dp++) {
                uint32_t b[4];
                ldsm_x4_t(b, &vt[kk * 16 + lr + ((li & 1) ? 8 : 0)][dp * 16 + ((li & 2) ? 8 : 0)]);
                mma16816<T>(o[2 * dp], pa, b[0], b[1]);
                mma16816<T>(o[2 * dp + 1], pa, b[2], b[3]);
            }
        }
        __syncthreads(); // the next iteration's loads overwrite the buffer just read
    }

    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    float i0 = 1.f / l0, i1 = 1.f / l1;
    T *oh = out + (size_t)start * out_ld + h * ATT_D + 2 * c;
#pragma unroll
    for (int nt = 0; nt < 8; nt++) {
        if (r0 < len)
            *reinterpret_cast<uint32_t *>(oh + (size_t)r0 * out_ld + nt * 8) =
                st<T>::pack(o[nt][0] * i0, o[nt][1] * i0);
        if (r1 < len)
            *reinterpret_cast<uint32_t *>(oh + (size_t)r1 * out_ld + nt * 8) =
                st<T>::pack(o[nt][2] * i1, o[nt][3] * i1);
    }
}

// wgmma needs compute capability 9.0 exactly (sm_90a code).
int cuda_attention_has_wgmma(int device) {
    int major = 0, minor = 0;
    return cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) ==
               cudaSuccess &&
           cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) ==
               cudaSuccess &&
           major == 9 && minor == 0;
}

template <typename T>
cudaError_t cuda_attention(const T *q, const T *k, const T *v, int ld, const int32_t *cu,
                           int n_seqs, int heads, int q_tiles_max, T *out, int out_ld, int wgmma,
                           cudaStream_t s) {
    if (n_seqs <= 0) return cudaSuccess;
    const float scale_log2 = CUDA_ATT_SCALE_LOG2;
    if (wgmma)
        return cuda_attention_wgmma<T>(q, k, v, ld, cu, n_seqs, heads, q_tiles_max, out, out_ld, -1,
                                       (const float *)NULL, (const int32_t *)NULL, s);
    dim3 grid((unsigned)q_tiles_max, (unsigned)heads, (unsigned)n_seqs);
    cuda_att_opts_t<T> none = {};
    attention_kernel<T, ATT_PLAIN>
        <<<grid, ATT_WARPS * 32, 0, s>>>(q, k, v, ld, cu, out, out_ld, scale_log2, none);
    return cudaGetLastError();
}

template <typename T>
cudaError_t cuda_attention_opts(const T *q, const T *k, const T *v, int ld, const int32_t *cu,
                                int n_seqs, int heads, int q_tiles_max, T *out, int out_ld,
                                const cuda_att_opts_t<T> *o, cudaStream_t s) {
    if (n_seqs <= 0) return cudaSuccess;
    const int disent = o->c2p && o->p2c && o->rrow;
    if (o->rope && (disent || !o->pos || o->rope_dim != ATT_D)) return cudaErrorInvalidValue;
    dim3 grid((unsigned)q_tiles_max, (unsigned)heads, (unsigned)n_seqs);
    const float scale_log2 = o->scale * 1.4426950408889634f;
    if (disent)
        attention_kernel<T, ATT_DISENT>
            <<<grid, ATT_WARPS * 32, 0, s>>>(q, k, v, ld, cu, out, out_ld, scale_log2, *o);
    else if (o->wgmma && (o->ldq <= 0 || o->ldq == ld) &&
             fabsf(o->scale - 0.125f) < 1e-7f) // the wgmma kernel has BERT's scale built in
        return cuda_attention_wgmma<T>(q, k, v, ld, cu, n_seqs, heads, q_tiles_max, out, out_ld,
                                       o->window >= 0 ? o->window : -1, o->rope, o->pos, s);
    else if (o->window >= 0)
        attention_kernel<T, ATT_WINDOW>
            <<<grid, ATT_WARPS * 32, 0, s>>>(q, k, v, ld, cu, out, out_ld, scale_log2, *o);
    else
        attention_kernel<T, ATT_PLAIN>
            <<<grid, ATT_WARPS * 32, 0, s>>>(q, k, v, ld, cu, out, out_ld, scale_log2, *o);
    return cudaGetLastError();
}

template cudaError_t cuda_attention_opts<__half>(const __half *, const __half *, const __half *,
                                                 int, const int32_t *, int, int, int, __half *, int,
                                                 const cuda_att_opts_t<__half> *, cudaStream_t);
template cudaError_t cuda_attention_opts<__nv_bfloat16>(
    const __nv_bfloat16 *, const __nv_bfloat16 *, const __nv_bfloat16 *, int, const int32_t *, int,
    int, int, __nv_bfloat16 *, int, const cuda_att_opts_t<__nv_bfloat16> *, cudaStream_t);
template cudaError_t cuda_attention<__half>(const __half *, const __half *, const __half *, int,
                                            const int32_t *, int, int, int, __half *, int, int,
                                            cudaStream_t);
template cudaError_t cuda_attention<__nv_bfloat16>(const __nv_bfloat16 *, const __nv_bfloat16 *,
                                                   const __nv_bfloat16 *, int, const int32_t *, int,
                                                   int, int, __nv_bfloat16 *, int, int,
                                                   cudaStream_t);
