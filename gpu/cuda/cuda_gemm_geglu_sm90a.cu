// ModernBERT's Wi projection with GeGLU in the epilogue, on Hopper's warpgroup MMA (wgmma,
// sm_90a only: CMakeLists.txt builds this file for compute_90a alone; the graph calls it only
// where cuda_attention_has_wgmma). Z = X W^T (+ bias) never reaches memory: each block's tile
// holds 64 gate columns j0.. and the 64 up columns I + j0.. that pair with them, so every
// thread has both halves of its outputs in registers and writes act(gate) * up into the
// first I columns of Y (rows ldy apart, 2I in the graph: Wo reads them as cuda_geglu left
// them). This saves the GeGLU pass's read and write of the (tokens, 2I) product.
//
// Block: 2 warpgroups, 128 rows x (64 + 64) columns, K in steps of 64 (one 128-byte row of
// 16-bit values: the 128-byte swizzle) through a 3-stage cp.async ring; both operands are
// read by the tensor cores from shared memory, one m64n128k16 wgmma per warpgroup and 16 of
// K. 96 KB of stages: two blocks share an SM, so one's epilogue overlaps the other's loop.
#include <stdint.h>

#include <type_traits>

#include "gpu/cuda/cuda_common.cuh"

#define GG_BM      128 /* rows per block (64 per warpgroup) */
#define GG_BN      64  /* gate columns per block (as many up) */
#define GG_BK      64  /* K per stage: 128 bytes a row */
#define GG_STAGES  3
#define GG_A_BYTES (GG_BM * GG_BK * 2)     /* X tile (128, 64): 16 KB */
#define GG_B_BYTES (2 * GG_BN * GG_BK * 2) /* W tile (gate 64 + up 64, 64): 16 KB */
#define GG_STAGE   (GG_A_BYTES + GG_B_BYTES)
#define GG_SMEM    (GG_STAGES * GG_STAGE + 1024) /* + slack to align the ring to 1024 */
#define GG_OLD     (GG_BN + 8) /* output staging row (elements): no bank conflicts */
#define GG_THREADS 256

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define GG_HAVE 1
#endif

namespace {

// cp.async of 16 bytes, zero-filled where src_bytes is 0 (rows past M).
__device__ __forceinline__ void gg_cp16(uint32_t smem, const void *gmem, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(gmem),
                 "r"(src_bytes));
}

// One stage: X rows m0.. (128) and W rows j0.. (gate) then I + j0.. (up), K columns k0..k0+63,
// each 128-byte row r with its 16-byte chunk c at chunk c ^ (r % 8) (SWIZZLE_128B).
template <typename T>
__device__ __forceinline__ void gg_load(uint32_t sa, uint32_t sb, const T *x, int ldx, const T *w,
                                        int K, int m0, int M, int j0, int I, int k0, int tid) {
#pragma unroll
    for (int i = 0; i < GG_BM * 8 / GG_THREADS; i++) {
        const int idx = tid + i * GG_THREADS, r = idx >> 3, c = idx & 7;
        const uint32_t off = (uint32_t)(r * 128 + ((c ^ (r & 7)) << 4));
        const int ok = m0 + r < M;
        gg_cp16(sa + off, x + (size_t)(ok ? m0 + r : 0) * ldx + k0 + c * 8, ok ? 16 : 0);
    }
#pragma unroll
    for (int i = 0; i < 2 * GG_BN * 8 / GG_THREADS; i++) {
        const int idx = tid + i * GG_THREADS, r = idx >> 3, c = idx & 7;
        const uint32_t off = (uint32_t)(r * 128 + ((c ^ (r & 7)) << 4));
        const int wr = r < GG_BN ? j0 + r : I + j0 + r - GG_BN;
        gg_cp16(sb + off, w + (size_t)wr * K + k0 + c * 8, 16);
    }
}

__device__ __forceinline__ uint64_t gg_desc(uint32_t addr, uint64_t hi) {
    return (uint64_t)((addr & 0x3FFFF) >> 4) | hi;
}

#define GG_ACC64                                                                                   \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "  \
    "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "   \
    "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "   \
    "%56, %57, %58, %59, %60, %61, %62, %63}"
#define GG_ACC8(d, i)                                                                              \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]),    \
        "+f"(d[i + 6]), "+f"(d[i + 7])
#define GG_ACC_OUT(d)                                                                              \
    GG_ACC8(d, 0), GG_ACC8(d, 8), GG_ACC8(d, 16), GG_ACC8(d, 24), GG_ACC8(d, 32), GG_ACC8(d, 40),  \
        GG_ACC8(d, 48), GG_ACC8(d, 56)

// d (64 x 128 per warpgroup, fp32) += A (64 x 16) B (16 x 128), both K-major in shared memory.
// d[4 j + e]: n8 block j (0-7 gate, 8-15 up), row g (e < 2) or g + 8 of this warp's 16,
// column 8 j + 2 c + (e & 1).
template <typename T>
__device__ __forceinline__ void gg_mma(float (&d)[64], uint64_t da, uint64_t db) {
#ifdef GG_HAVE
    if constexpr (std::is_same<T, __half>::value)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " GG_ACC64
                     ", %64, %65, p, 1, 1, 0, 0;\n}\n"
                     : GG_ACC_OUT(d)
                     : "l"(da), "l"(db), "r"(1));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " GG_ACC64
                     ", %64, %65, p, 1, 1, 0, 0;\n}\n"
                     : GG_ACC_OUT(d)
                     : "l"(da), "l"(db), "r"(1));
#endif
}

template <typename T, int A>
__global__ void __launch_bounds__(GG_THREADS, 2)
    gemm_geglu_kernel(const T *__restrict__ x, int ldx, const T *__restrict__ w,
                      const T *__restrict__ bias, T *__restrict__ y, int ldy, int M, int I, int K,
                      uint64_t dhi) {
#ifdef GG_HAVE
    extern __shared__ uint8_t gg_smem[];
    const uint32_t raw = (uint32_t)__cvta_generic_to_shared(gg_smem);
    const uint32_t base = (raw + 1023u) & ~1023u; // swizzled tiles start on 1024 bytes
    const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
    const int g = lane >> 2, c = lane & 3;
    const int j0 = blockIdx.x * GG_BN, m0 = blockIdx.y * GG_BM, nk = K / GG_BK;
    auto sa = [&](int s) { return base + (uint32_t)(s * GG_STAGE); };
    auto sb = [&](int s) { return base + (uint32_t)(s * GG_STAGE + GG_A_BYTES); };

#pragma unroll
    for (int s = 0; s < GG_STAGES - 1; s++) { // one commit group per stage, empty past K
        if (s < nk) gg_load<T>(sa(s), sb(s), x, ldx, w, K, m0, M, j0, I, s * GG_BK, tid);
        asm volatile("cp.async.commit_group;\n" ::);
    }
    float d[64];
#pragma unroll
    for (int i = 0; i < 64; i++)
        d[i] = 0.f;
    for (int kt = 0; kt < nk; kt++) {
        const int cur = kt % GG_STAGES; // this step's stage
        // stage kt landed (at most STAGES - 2 later groups pending); past the proxy fence and
        // the barrier every thread's copies are visible to the tensor cores, and both
        // warpgroups have finished reading the stage the load below overwrites (kt - 1's)
        asm volatile("cp.async.wait_group %0;\n" ::"n"(GG_STAGES - 2));
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads();
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int kk = 0; kk < GG_BK / 16; kk++) // 16 of K = 32 bytes along each swizzled row
            gg_mma<T>(d, gg_desc(sa(cur) + (uint32_t)(wg * 64 * 128 + kk * 32), dhi),
                      gg_desc(sb(cur) + (uint32_t)(kk * 32), dhi));
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        const int kn = kt + GG_STAGES - 1; // its copies issued while the tensor cores run
        if (kn < nk) {
            const int sn = kn % GG_STAGES;
            gg_load<T>(sa(sn), sb(sn), x, ldx, w, K, m0, M, j0, I, kn * GG_BK, tid);
        }
        asm volatile("cp.async.commit_group;\n" ::);
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
        for (int i = 0; i < 64; i++)
            asm volatile("" : "+f"(d[i])::"memory");
    }
    asm volatile("cp.async.wait_group 0;\n" ::);
    __syncthreads(); // the ring is free: it stages the output tile (128, GG_OLD)

    T *ot = reinterpret_cast<T *>(gg_smem + (base - raw));
    const int rl = wg * 64 + warp * 16 + g;
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const int col = j * 8 + 2 * c;
        float bg0 = 0.f, bg1 = 0.f, bu0 = 0.f, bu1 = 0.f;
        if (bias) {
            bg0 = st<T>::to_f(bias[j0 + col]), bg1 = st<T>::to_f(bias[j0 + col + 1]);
            bu0 = st<T>::to_f(bias[I + j0 + col]), bu1 = st<T>::to_f(bias[I + j0 + col + 1]);
        }
        const float *gt = d + 4 * j, *up = d + 4 * (j + 8);
        *reinterpret_cast<uint32_t *>(ot + rl * GG_OLD + col) = st<T>::pack(
            act_f<A>(gt[0] + bg0) * (up[0] + bu0), act_f<A>(gt[1] + bg1) * (up[1] + bu1));
        *reinterpret_cast<uint32_t *>(ot + (rl + 8) * GG_OLD + col) = st<T>::pack(
            act_f<A>(gt[2] + bg0) * (up[2] + bu0), act_f<A>(gt[3] + bg1) * (up[3] + bu1));
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < GG_BM * (GG_BN / 8) / GG_THREADS; i++) { // 16-byte rows out
        const int idx = tid + i * GG_THREADS, r = idx >> 3, ch = idx & 7;
        if (m0 + r < M)
            *reinterpret_cast<uint4 *>(y + (size_t)(m0 + r) * ldy + j0 + ch * 8) =
                *reinterpret_cast<const uint4 *>(ot + r * GG_OLD + ch * 8);
    }
#endif
}

template <typename T, int A>
cudaError_t gg_launch(const T *x, int ldx, const T *w, const T *bias, T *y, int ldy, int m, int I,
                      int k, cudaStream_t s) {
    // 128-byte swizzle (mode 1, bits 62-63); stride byte offset (bits 32-45): 8-row groups
    // 1024 bytes apart; leading byte offset (bits 16-29) unused for K-major operands, 1.
    constexpr uint64_t dhi =
        ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);
    cudaError_t e = cudaFuncSetAttribute(gemm_geglu_kernel<T, A>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, GG_SMEM);
    if (e != cudaSuccess) return e;
    dim3 grid((unsigned)(I / GG_BN), (unsigned)((m + GG_BM - 1) / GG_BM));
    gemm_geglu_kernel<T, A>
        <<<grid, GG_THREADS, GG_SMEM, s>>>(x, ldx, w, bias, y, ldy, m, I, k, dhi);
    return cudaGetLastError();
}

} // namespace

int cuda_gemm_geglu_fits(const void *x, int ldx, const void *w, const void *y, int ldy, int I,
                         int k, int act) {
    return I > 0 && k > 0 && I % GG_BN == 0 && k % GG_BK == 0 && ldx % 8 == 0 && ldy % 8 == 0 &&
           ldx >= k && ldy >= I && ((uintptr_t)x | (uintptr_t)w | (uintptr_t)y) % 16 == 0 &&
           (act == GPU_ACT_GELU || act == GPU_ACT_GELU_TANH);
}

template <typename T>
cudaError_t cuda_gemm_geglu_wgmma(const T *x, int ldx, const T *w, const T *bias, T *y, int ldy,
                                  int m, int I, int k, int act, cudaStream_t s) {
    if (m <= 0) return cudaSuccess;
    if (!cuda_gemm_geglu_fits(x, ldx, w, y, ldy, I, k, act)) return cudaErrorInvalidValue;
    if (act == GPU_ACT_GELU) return gg_launch<T, GPU_ACT_GELU>(x, ldx, w, bias, y, ldy, m, I, k, s);
    return gg_launch<T, GPU_ACT_GELU_TANH>(x, ldx, w, bias, y, ldy, m, I, k, s);
}

template cudaError_t cuda_gemm_geglu_wgmma<__half>(const __half *, int, const __half *,
                                                   const __half *, __half *, int, int, int, int,
                                                   int, cudaStream_t);
template cudaError_t cuda_gemm_geglu_wgmma<__nv_bfloat16>(const __nv_bfloat16 *, int,
                                                          const __nv_bfloat16 *,
                                                          const __nv_bfloat16 *, __nv_bfloat16 *,
                                                          int, int, int, int, int, cudaStream_t);
