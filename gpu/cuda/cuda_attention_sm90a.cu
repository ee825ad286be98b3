// Padding-free fused attention for head_dim 64 on Hopper's warpgroup MMA (wgmma, sm_90a
// only: CMakeLists.txt builds this file for compute_90a alone, and cuda_attention.cu calls it
// only on a compute capability 9.0 device). Same contract and online softmax as the mma.sync
// kernel in cuda_attention.cu; what changes is the matrix unit: a warpgroup (4 warps) owns 64
// query rows, S = Q K^T and O += P V are m64n64k16 wgmma's with Q and P as register
// fragments and K, V read by the tensor cores from shared memory (128-byte swizzle), so no
// ldmatrix traffic and twice the mma.sync rate. (Measured slower and removed: two warpgroups
// sharing each key/value tile, and FlashAttention-3's intra-warpgroup overlap; NOTES-cuda.md.)
#include <stdlib.h>

#include <type_traits>

#include "gpu/cuda/cuda_common.cuh"

#define WG_D    64
#define WG_BN   64                 /* keys per tile */
#define WG_TILE (WG_BN * WG_D * 2) /* bytes of one K or V tile: 8 KB, 1024-aligned */

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define WG_HAVE 1
#endif

namespace {

__device__ __forceinline__ void cp_async16(uint32_t smem, const void *gmem) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem), "l"(gmem));
}

// Stages keys/values [k0, k0 + 64) into 128-byte-swizzled tiles: row r (one key, 64 dims =
// 128 bytes) keeps its 16-byte chunk c at chunk c ^ (r % 8), the layout wgmma's SWIZZLE_128B
// descriptors read. Rows past the sequence are zeroed (masked probabilities meet zeros).
template <typename T, int NT>
__device__ __forceinline__ void wg_load_tile(uint32_t ks, uint32_t vs, const T *k, const T *v,
                                             int ld, int k0, int len, int tid) {
#pragma unroll
    for (int i = 0; i < WG_BN * 8 / NT; i++) {
        int idx = tid + i * NT, row = idx >> 3, c = idx & 7;
        uint32_t off = (uint32_t)(row * 128 + ((c ^ (row & 7)) << 4));
        if (k0 + row < len) {
            cp_async16(ks + off, k + (size_t)(k0 + row) * ld + c * 8);
            cp_async16(vs + off, v + (size_t)(k0 + row) * ld + c * 8);
        } else {
            asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(ks + off), "r"(0));
            asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(vs + off), "r"(0));
        }
    }
}

// Starts loading the next tile (when there is one) into its stage, then waits until every
// earlier tile has landed and, past the fence and the barrier, is visible to the tensor
// cores (the copies write through the generic proxy, wgmma reads through the async proxy).
template <typename T, int NT>
__device__ __forceinline__ void wg_prefetch_wait(bool has_next, uint32_t ks, uint32_t vs,
                                                 const T *k, const T *v, int ld, int k0, int len,
                                                 int tid) {
    if (has_next) {
        wg_load_tile<T, NT>(ks, vs, k, v, ld, k0, len, tid);
        asm volatile("cp.async.commit_group;\n" ::);
        asm volatile("cp.async.wait_group 1;\n" ::);
    } else {
        asm volatile("cp.async.wait_group 0;\n" ::);
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
}

// Shared-memory matrix descriptor: the start address in bits 0-13 (16-byte units), the
// rest (leading and stride byte offsets, swizzle mode) fixed per operand (wg_desc_hi).
__device__ __forceinline__ uint64_t wg_desc(uint32_t addr, uint64_t hi) {
    return (uint64_t)((addr & 0x3FFFF) >> 4) | hi;
}

#define WG_ACC32                                                                                   \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "  \
    "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define WG_ACC_OUT(d)                                                                              \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),            \
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),    \
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), \
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), \
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])

// d (64 x 64 per warpgroup, fp32) (+)= a (64 x 16, registers) * B (16 x 64, descriptor).
// d[4 j + e]: n8 block j, rows g / g + 8 of this warp's 16, columns 2c, 2c + 1 (the mma.sync
// C layout); a: the mma.sync m16k16 A fragment of this warp's 16 rows.
template <typename T, int TRANS_B>
__device__ __forceinline__ void wg_mma(float (&d)[32], const uint32_t (&a)[4], uint64_t desc,
                                       int accumulate) {
#ifdef WG_HAVE
    if constexpr (std::is_same<T, __half>::value)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " WG_ACC32
                     ", {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
                     : WG_ACC_OUT(d)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate),
                       "n"(TRANS_B));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WG_ACC32
                     ", {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
                     : WG_ACC_OUT(d)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate),
                       "n"(TRANS_B));
#endif
}

__device__ __forceinline__ void wg_fence() {
#ifdef WG_HAVE
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wg_commit_wait() {
#ifdef WG_HAVE
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#endif
}
// Keeps the compiler from touching accumulators across the asynchronous MMA's issue and wait.
__device__ __forceinline__ void wg_fence_regs(float (&d)[32]) {
#pragma unroll
    for (int i = 0; i < 32; i++)
        asm volatile("" : "+f"(d[i])::"memory");
}

// One key tile's online-softmax step (in base 2, as cuda_attention.cu) on the scores sc of
// this thread's rows g (e = 0, 1) and g + 8 (e = 2, 3): masks keys >= kv (only the last tile
// has any), updates the running max m and partial sums l, leaves the exponentials in sc and
// returns in al0 / al1 the factors the caller rescales O by.
// WIN: a sliding window may mask a row's whole tile, so a -inf maximum counts as 0 (no
// -inf - -inf NaN; the row's sums stay 0 until its keys come), as in cuda_attention.cu.
template <bool WIN>
__device__ __forceinline__ void wg_softmax(float (&sc)[32], float &m0, float &m1, float &l0,
                                           float &l1, int kv, int c, float scale_log2, float &al0,
                                           float &al1) {
    if (!WIN && kv < WG_BN) {
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                if (2 * c + nt * 8 + (e & 1) >= kv) sc[nt * 4 + e] = -INFINITY;
    }
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < 8; nt++) {
        mx0 = fmaxf(mx0, fmaxf(sc[nt * 4], sc[nt * 4 + 1]));
        mx1 = fmaxf(mx1, fmaxf(sc[nt * 4 + 2], sc[nt * 4 + 3]));
    }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    // Without a window key 0 of the first tile exists: every row has a finite maximum.
    float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
    if (WIN) {
        mn0 = mn0 == -INFINITY ? 0.f : mn0;
        mn1 = mn1 == -INFINITY ? 0.f : mn1;
    }
    al0 = exp2f((m0 - mn0) * scale_log2), al1 = exp2f((m1 - mn1) * scale_log2);
    m0 = mn0, m1 = mn1;
    float ms0 = -mn0 * scale_log2, ms1 = -mn1 * scale_log2, rs0 = 0.f, rs1 = 0.f;
#pragma unroll
    for (int nt = 0; nt < 8; nt++) {
        sc[nt * 4 + 0] = exp2f(fmaf(sc[nt * 4 + 0], scale_log2, ms0));
        sc[nt * 4 + 1] = exp2f(fmaf(sc[nt * 4 + 1], scale_log2, ms0));
        sc[nt * 4 + 2] = exp2f(fmaf(sc[nt * 4 + 2], scale_log2, ms1));
        sc[nt * 4 + 3] = exp2f(fmaf(sc[nt * 4 + 3], scale_log2, ms1));
        rs0 += sc[nt * 4 + 0] + sc[nt * 4 + 1];
        rs1 += sc[nt * 4 + 2] + sc[nt * 4 + 3];
    }
    l0 = l0 * al0 + rs0; // per-thread partial sums; the quad is summed once at the end
    l1 = l1 * al1 + rs1;
}

// P (the exponentials in sc) as the A fragments of the 4 key steps of P V: key step kk is
// n8 blocks 2kk and 2kk + 1.
template <typename T>
__device__ __forceinline__ void wg_pack_p(const float (&sc)[32], uint32_t (&pa)[4][4]) {
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        pa[kk][0] = st<T>::pack(sc[8 * kk + 0], sc[8 * kk + 1]);
        pa[kk][1] = st<T>::pack(sc[8 * kk + 2], sc[8 * kk + 3]);
        pa[kk][2] = st<T>::pack(sc[8 * kk + 4], sc[8 * kk + 5]);
        pa[kk][3] = st<T>::pack(sc[8 * kk + 6], sc[8 * kk + 7]);
    }
}
// This warp's 16 query rows r0 (and r0 + 8) as A fragments, 4 k-steps of 16 dims; rows past
// the sequence read as zero (and are never stored).
template <typename T>
__device__ __forceinline__ void wg_load_q(uint32_t (&qa)[4][4], const T *qh, int ld, int r0,
                                          int len, int c) {
    int r1 = r0 + 8;
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        int d = kk * 16 + 2 * c;
        const T *p0 = qh + (size_t)r0 * ld + d, *p1 = qh + (size_t)r1 * ld + d;
        qa[kk][0] = r0 < len ? *reinterpret_cast<const uint32_t *>(p0) : 0u;
        qa[kk][1] = r1 < len ? *reinterpret_cast<const uint32_t *>(p1) : 0u;
        qa[kk][2] = r0 < len ? *reinterpret_cast<const uint32_t *>(p0 + 8) : 0u;
        qa[kk][3] = r1 < len ? *reinterpret_cast<const uint32_t *>(p1 + 8) : 0u;
    }
}

// O / l for rows r0, r0 + 8 into out (rows of out_ld; this head's 64 columns at oh).
template <typename T>
__device__ __forceinline__ void wg_store(const float (&o)[32], float l0, float l1, T *oh,
                                         int out_ld, int r0, int len) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    float i0 = 1.f / l0, i1 = 1.f / l1;
    int r1 = r0 + 8;
#pragma unroll
    for (int nt = 0; nt < 8; nt++) {
        if (r0 < len)
            *reinterpret_cast<uint32_t *>(oh + (size_t)r0 * out_ld + nt * 8) =
                st<T>::pack(o[nt * 4 + 0] * i0, o[nt * 4 + 1] * i0);
        if (r1 < len)
            *reinterpret_cast<uint32_t *>(oh + (size_t)r1 * out_ld + nt * 8) =
                st<T>::pack(o[nt * 4 + 2] * i1, o[nt * 4 + 3] * i1);
    }
}

// The sliding window's mask on one key tile k0..k0 + 63: keys past the sequence (len) or
// farther than w from the row (r0: rows e = 0, 1; r0 + 8: e = 2, 3) score -inf.
__device__ __forceinline__ void wg_window_mask(float (&sc)[32], int k0, int len, int r0, int w,
                                               int c) {
#pragma unroll
    for (int nt = 0; nt < 8; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int kj = k0 + 2 * c + nt * 8 + (e & 1), ri = e < 2 ? r0 : r0 + 8;
            if (kj >= len || ri - kj > w || kj - ri > w) sc[nt * 4 + e] = -INFINITY;
        }
}

__device__ __forceinline__ void wg_rescale(float (&o)[32], float al0, float al1) {
#pragma unroll
    for (int nt = 0; nt < 8; nt++) {
        o[nt * 4 + 0] *= al0, o[nt * 4 + 1] *= al0;
        o[nt * 4 + 2] *= al1, o[nt * 4 + 3] *= al1;
    }
}

#define WG_ARGS                                                                                    \
    const T *__restrict__ q, const T *__restrict__ k, const T *__restrict__ v, int ld,             \
        const int32_t *__restrict__ cu, T *__restrict__ out, int out_ld, float scale_log2,         \
        uint64_t khi, uint64_t vhi, int window, const float2 *__restrict__ rope,                   \
        const int32_t *__restrict__ pos

// One block: one warpgroup x 64 queries of one head of one sequence; per key tile, S = Q K^T,
// softmax, O += P V one after the other (blocks on the same SM overlap each other's phases).
// WIN: ModernBERT's local layers, keys |i - j| <= window: a query tile reads only the key
// tiles its window touches (at most 3 for a window of 64). rope (NULL: none): the queries
// turned by RoPE as they load (rope_q_frag), the keys come turned.
template <typename T, bool WIN>
__global__ void __launch_bounds__(128) attention_wg_kernel(WG_ARGS) {
#ifdef WG_HAVE
    constexpr int NT = 128;
    int h = blockIdx.y, s = blockIdx.z;
    int start = cu[s], len = cu[s + 1] - start;
    int q0 = blockIdx.x * 64;
    if (q0 >= len) return;
    __shared__ __align__(1024) uint8_t tiles[2][2][WG_TILE]; // [stage][K | V] swizzled (64, 64)
    int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, c = lane & 3;
    size_t head = (size_t)start * ld + h * WG_D;
    const T *qh = q + head, *kh = k + head, *vh = v + head;
    uint32_t t0 = (uint32_t)__cvta_generic_to_shared(&tiles[0][0][0]);
    auto kt = [&](int st) { return t0 + (uint32_t)(st * 2 * WG_TILE); };
    auto vt = [&](int st) { return t0 + (uint32_t)(st * 2 * WG_TILE + WG_TILE); };

    int n_tiles = (len + WG_BN - 1) / WG_BN, j_lo = 0;
    if (WIN) { // key tiles [j_lo, n_tiles) hold this query tile's windows
        const int hi = (q0 + 63 + window) / WG_BN + 1;
        j_lo = (q0 - window > 0 ? q0 - window : 0) / WG_BN;
        n_tiles = hi < n_tiles ? hi : n_tiles;
    }
    wg_load_tile<T, NT>(kt(0), vt(0), kh, vh, ld, j_lo * WG_BN, len, tid);
    asm volatile("cp.async.commit_group;\n" ::);
    uint32_t qa[4][4]; // this warp's 16 query rows (of its warpgroup's 64)
    int r0 = q0 + warp * 16 + g;
    wg_load_q<T>(qa, qh, ld, r0, len, c);
    if (rope) // rows past the sequence (zeros) take position 0's row
        rope_q_frag<T>(qa, rope + (size_t)(r0 < len ? pos[start + r0] : 0) * (WG_D / 2),
                       rope + (size_t)(r0 + 8 < len ? pos[start + r0 + 8] : 0) * (WG_D / 2), c);

    float o[32];
#pragma unroll
    for (int i = 0; i < 32; i++)
        o[i] = 0.f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;
    for (int j = j_lo; j < n_tiles; j++) {
        const int sj = (j - j_lo) & 1; // this tile's stage
        wg_prefetch_wait<T, NT>(j + 1 < n_tiles, kt(sj ^ 1), vt(sj ^ 1), kh, vh, ld,
                                (j + 1) * WG_BN, len, tid);

        float sc[32], al0, al1;
        uint32_t pa[4][4];
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < 4; kk++) // 16 dims = 32 bytes along each swizzled 128-byte row
            wg_mma<T, 0>(sc, qa[kk], wg_desc(kt(sj) + kk * 32, khi), kk);
        wg_commit_wait();
        wg_fence_regs(sc);
        if (WIN) wg_window_mask(sc, j * WG_BN, len, r0, window, c);
        wg_softmax<WIN>(sc, m0, m1, l0, l1, len - j * WG_BN, c, scale_log2, al0, al1);
        wg_pack_p<T>(sc, pa);
        wg_rescale(o, al0, al1);
        wg_fence_regs(o);
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < 4; kk++) // 16 keys = 2 swizzle rows of 8 keys: 2048 bytes
            wg_mma<T, 1>(o, pa[kk], wg_desc(vt(sj) + kk * 2048, vhi), 1);
        wg_commit_wait();
        wg_fence_regs(o);
        __syncthreads(); // the next iteration's loads overwrite the stage just read
    }
    wg_store<T>(o, l0, l1, out + (size_t)start * out_ld + h * WG_D + 2 * c, out_ld, r0, len);
#endif
}

} // namespace

template <typename T>
cudaError_t cuda_attention_wgmma(const T *q, const T *k, const T *v, int ld, const int32_t *cu,
                                 int n_seqs, int heads, int q_tiles_max, T *out, int out_ld,
                                 int window, const float *rope, const int32_t *pos,
                                 cudaStream_t s) {
    if (n_seqs <= 0) return cudaSuccess;
    const float2 *cs = reinterpret_cast<const float2 *>(rope);
    const float scale_log2 = CUDA_ATT_SCALE_LOG2;
    // 128-byte swizzle (mode 1, bits 62-63); stride byte offset (bits 32-45): 8-row groups
    // 1024 bytes apart. Leading byte offset (bits 16-29): K-major (K): unused, 1; MN-major
    // (V): 8-key groups, 1024 bytes. Offsets are encoded in 16-byte units.
    constexpr uint64_t kl = 16, ks = 1024, vl = 1024, vs = 1024;
    constexpr uint64_t khi = ((kl >> 4) << 16) | ((ks >> 4) << 32) | ((uint64_t)1 << 62);
    constexpr uint64_t vhi = ((vl >> 4) << 16) | ((vs >> 4) << 32) | ((uint64_t)1 << 62);
    dim3 grid((unsigned)q_tiles_max, (unsigned)heads, (unsigned)n_seqs);
    if (window >= 0)
        attention_wg_kernel<T, true><<<grid, 128, 0, s>>>(q, k, v, ld, cu, out, out_ld, scale_log2,
                                                          khi, vhi, window, cs, pos);
    else
        attention_wg_kernel<T, false>
            <<<grid, 128, 0, s>>>(q, k, v, ld, cu, out, out_ld, scale_log2, khi, vhi, -1, cs, pos);
    return cudaGetLastError();
}

template cudaError_t cuda_attention_wgmma<__half>(const __half *, const __half *, const __half *,
                                                  int, const int32_t *, int, int, int, __half *,
                                                  int, int, const float *, const int32_t *,
                                                  cudaStream_t);
template cudaError_t cuda_attention_wgmma<__nv_bfloat16>(
    const __nv_bfloat16 *, const __nv_bfloat16 *, const __nv_bfloat16 *, int, const int32_t *, int,
    int, int, __nv_bfloat16 *, int, int, const float *, const int32_t *, cudaStream_t);
