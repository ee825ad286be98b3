// Own Hopper GEMM for the layer projections (sm_90a only, like cuda_attention_sm90a.cu):
// Y (M, N) = X (M, K) W (N, K)^T + bias [then GELU] [+ R], fp16/bf16 in and out, fp32
// accumulation: the contract of cuda_gemm_run_ld with a bias. Why: cuBLASLt's GELU epilogue
// makes FF1 ~15% slower than the plain GEMM (555 vs 668 TFLOP/s at 16k tokens on the H200),
// and FF1 is a third of the encoder's FLOPs. cuda_gemm.cu times this kernel beside cuBLASLt's
// candidates at init and keeps whichever is faster per shape bucket.
//
// Shape of the kernel: persistent (one block per SM walks 128 x 256 output tiles in M-major
// order, so the ~11 M-blocks in flight share their X rows and all of W in L2), warp-
// specialised: one producer warp streams 64-deep K slices of X and W into a 4-stage ring of
// 128-byte-swizzled shared-memory tiles with the tensor memory accelerator (TMA), signalling
// mbarriers; two consumer warpgroups (64 rows each) run m64n256k16 wgmma on them with fp32
// accumulators (128 registers a thread) and apply the epilogue straight from registers.
// While the consumers run an epilogue, the producer already fills the ring for the next tile.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>

#include <type_traits>

#include "gpu/cuda_common.cuh"
#include "gpu/cuda_gemm.cuh"

#define GM_BM        128 /* rows of X per tile (two warpgroups x 64) */
#define GM_BN        256 /* rows of W (output columns) per tile */
#define GM_BK        64  /* K per stage: one 128-byte swizzle row */
#define GM_STAGES    4
#define GM_CONSUMERS 256 /* two warpgroups */
#define GM_THREADS   (GM_CONSUMERS + 32)
#define GM_A_BYTES   (GM_BM * GM_BK * 2) /* 16 KB */
#define GM_B_BYTES   (GM_BN * GM_BK * 2) /* 32 KB */
#define GM_SMEM      (GM_STAGES * (GM_A_BYTES + GM_B_BYTES) + 1024 + 2 * GM_STAGES * 8)

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define GM_HAVE 1
#endif

namespace {

enum { GM_EPI_BIAS = 0, GM_EPI_GELU = 1, GM_EPI_GELU_TANH = 2, GM_EPI_RES = 3 };

__device__ __forceinline__ void gm_bar_init(uint32_t bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void gm_bar_wait(uint32_t bar, int parity) {
    asm volatile("{\n.reg .pred p;\nGM_WAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra GM_WAIT;\n}\n" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}
__device__ __forceinline__ void gm_bar_expect(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void gm_bar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Box (x = K offset, y = row) of the 2-D tensor map into shared memory at dst; completes
// its bytes on the mbarrier. Rows past the tensor's end arrive as zeros (and still count).
__device__ __forceinline__ void gm_tma_load(uint32_t dst, const CUtensorMap *map, uint32_t bar,
                                            int x, int y) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
                 "l"((uint64_t)map), "r"(x), "r"(y), "r"(bar)
                 : "memory");
}

// K-major operand in 128-byte-swizzled rows: 8-row groups 1024 bytes apart (stride byte
// offset 64 x 16), leading byte offset unused (1), swizzle mode 1 (bits 62-63).
__device__ __forceinline__ uint64_t gm_desc(uint32_t addr) {
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)64 << 32) |
           ((uint64_t)1 << 62);
}

#define GM_ACC128                                                                                  \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, "            \
    "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, "             \
    "%34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, "             \
    "%50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, "             \
    "%66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, "             \
    "%82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, "             \
    "%98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "           \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, "         \
    "%126, %127}"
#define GM_R8(i)                                                                                   \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]),    \
        "+f"(d[i + 6]), "+f"(d[i + 7])
#define GM_R32(i) GM_R8(i), GM_R8(i + 8), GM_R8(i + 16), GM_R8(i + 24)

// d (64 x 256 per warpgroup, fp32) (+)= A (64 x 16) B (16 x 256), both K-major in shared
// memory. d[4 j + e]: n8 block j, rows g / g + 8 of the warp's 16, columns 2c, 2c + 1.
template <typename T>
__device__ __forceinline__ void gm_mma(float (&d)[128], uint64_t da, uint64_t db, int accumulate) {
#ifdef GM_HAVE
    if constexpr (std::is_same<T, __half>::value)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " GM_ACC128
                     ", %128, %129, p, 1, 1, 0, 0;\n}\n"
                     : GM_R32(0), GM_R32(32), GM_R32(64), GM_R32(96)
                     : "l"(da), "l"(db), "r"(accumulate));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " GM_ACC128
                     ", %128, %129, p, 1, 1, 0, 0;\n}\n"
                     : GM_R32(0), GM_R32(32), GM_R32(64), GM_R32(96)
                     : "l"(da), "l"(db), "r"(accumulate));
#endif
}

__device__ __forceinline__ float gm_gelu(float x) {
    return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
}
// tanh form with the hardware tanh (one MUFU op): cheaper, within ~1e-3 of the exact GELU.
__device__ __forceinline__ float gm_gelu_tanh(float x) {
    float u = 0.7978845608f * fmaf(0.044715f * x, x * x, x), t;
    asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(u));
    return 0.5f * x * (1.f + t);
}

template <typename T, int EPI>
__global__ void __launch_bounds__(GM_THREADS, 1)
    gemm_kernel(const __grid_constant__ CUtensorMap map_x,
                const __grid_constant__ CUtensorMap map_w, T *__restrict__ y, int ldy,
                const T *__restrict__ bias, const T *res, int m, int n, int k) {
#ifdef GM_HAVE
    extern __shared__ uint8_t gm_smem[];
    uint32_t base = ((uint32_t)__cvta_generic_to_shared(gm_smem) + 1023u) & ~1023u;
    const uint32_t sa = base;                          // [stage] (128, 64) swizzled X slice
    const uint32_t sb = sa + GM_STAGES * GM_A_BYTES;   // [stage] (256, 64) swizzled W slice
    const uint32_t full = sb + GM_STAGES * GM_B_BYTES; // [stage] mbarrier: slice landed
    const uint32_t empty = full + GM_STAGES * 8;       // [stage] mbarrier: slice consumed
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int tiles_n = n / GM_BN, tiles = (m + GM_BM - 1) / GM_BM * tiles_n, kbs = k / GM_BK;
    if (tid == 0) {
        for (int s = 0; s < GM_STAGES; s++) {
            gm_bar_init(full + 8 * s, 1);
            gm_bar_init(empty + 8 * s, GM_CONSUMERS / 32); // one arrival per consumer warp
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (warp == GM_CONSUMERS / 32) { // the producer warp: one lane issues every copy
        if (lane == 0) {
            int stage = 0, phase = 0;
            for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
                int m0 = t / tiles_n * GM_BM, n0 = t % tiles_n * GM_BN;
                for (int kb = 0; kb < kbs; kb++) {
                    gm_bar_wait(empty + 8 * stage, phase ^ 1); // the first lap passes at once
                    gm_bar_expect(full + 8 * stage, GM_A_BYTES + GM_B_BYTES);
                    gm_tma_load(sa + stage * GM_A_BYTES, &map_x, full + 8 * stage, kb * GM_BK, m0);
                    gm_tma_load(sb + stage * GM_B_BYTES, &map_w, full + 8 * stage, kb * GM_BK, n0);
                    if (++stage == GM_STAGES) stage = 0, phase ^= 1;
                }
            }
        }
        return;
    }

    const int wg = warp >> 2, g = lane >> 2, c = lane & 3;
    int stage = 0, phase = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        const int m0 = t / tiles_n * GM_BM, n0 = t % tiles_n * GM_BN;
        float d[128];
        int prev = 0;
        for (int kb = 0; kb < kbs; kb++) {
            gm_bar_wait(full + 8 * stage, phase);
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
            for (int kk = 0; kk < GM_BK / 16; kk++) // 16 K = 32 bytes along the swizzled rows
                gm_mma<T>(d, gm_desc(sa + stage * GM_A_BYTES + wg * (GM_A_BYTES / 2) + kk * 32),
                          gm_desc(sb + stage * GM_B_BYTES + kk * 32), kb | kk);
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            if (kb > 0) { // the previous slice's MMAs are done: its stage may be refilled
                asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
                if (lane == 0) gm_bar_arrive(empty + 8 * prev);
            }
            prev = stage;
            if (++stage == GM_STAGES) stage = 0, phase ^= 1;
        }
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
        for (int i = 0; i < 128; i++)
            asm volatile("" : "+f"(d[i])::"memory");
        if (lane == 0) gm_bar_arrive(empty + 8 * prev);

        // Epilogue from registers: rows r0 and r0 + 8, columns n0 + 8 j + 2c (+1).
        const int r0 = m0 + wg * 64 + (warp & 3) * 16 + g;
        T *y0 = y + (size_t)r0 * ldy + n0 + 2 * c, *y1 = y0 + (size_t)8 * ldy;
        const T *rs0 = res + (size_t)r0 * ldy + n0 + 2 * c, *rs1 = rs0 + (size_t)8 * ldy;
        const T *bp = bias + n0 + 2 * c;
#pragma unroll
        for (int j = 0; j < GM_BN / 8; j++) {
            float2 b = st<T>::to_f2(*reinterpret_cast<const uint32_t *>(bp + 8 * j));
            float v0 = d[4 * j] + b.x, v1 = d[4 * j + 1] + b.y;
            float v2 = d[4 * j + 2] + b.x, v3 = d[4 * j + 3] + b.y;
            if constexpr (EPI == GM_EPI_GELU)
                v0 = gm_gelu(v0), v1 = gm_gelu(v1), v2 = gm_gelu(v2), v3 = gm_gelu(v3);
            if constexpr (EPI == GM_EPI_GELU_TANH)
                v0 = gm_gelu_tanh(v0), v1 = gm_gelu_tanh(v1), v2 = gm_gelu_tanh(v2),
                v3 = gm_gelu_tanh(v3);
            if (r0 < m) {
                if constexpr (EPI == GM_EPI_RES) {
                    float2 r = st<T>::to_f2(*reinterpret_cast<const uint32_t *>(rs0 + 8 * j));
                    v0 += r.x, v1 += r.y;
                }
                *reinterpret_cast<uint32_t *>(y0 + 8 * j) = st<T>::pack(v0, v1);
            }
            if (r0 + 8 < m) {
                if constexpr (EPI == GM_EPI_RES) {
                    float2 r = st<T>::to_f2(*reinterpret_cast<const uint32_t *>(rs1 + 8 * j));
                    v2 += r.x, v3 += r.y;
                }
                *reinterpret_cast<uint32_t *>(y1 + 8 * j) = st<T>::pack(v2, v3);
            }
        }
    }
#endif
}

PFN_cuTensorMapEncodeTiled_v12000 gm_encode = NULL;
int gm_sms = 0;

// 2-D tensor map of a row-major (rows, k) matrix with rows ld elements apart, read in
// (box_rows, 64) boxes with the 128-byte swizzle wgmma's descriptors expect.
int gm_map(CUtensorMap *map, int bf16, const void *p, int rows, int k, int ld, int box_rows) {
    cuuint64_t dims[2] = {(cuuint64_t)k, (cuuint64_t)rows};
    cuuint64_t strides[1] = {(cuuint64_t)ld * 2};
    cuuint32_t box[2] = {GM_BK, (cuuint32_t)box_rows}, estr[2] = {1, 1};
    return gm_encode(map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                     2, const_cast<void *>(p), dims, strides, box, estr,
                     CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                     CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS
               ? 0
               : -1;
}

template <typename T, int EPI>
cudaError_t gm_launch(const CUtensorMap &mx, const CUtensorMap &mw, void *y, int ldy,
                      const void *bias, const void *res, int m, int n, int k, cudaStream_t st) {
    static bool attr = false; // the 193 KB of dynamic shared memory need an opt-in, once
    if (!attr) {
        cudaError_t e = cudaFuncSetAttribute(gemm_kernel<T, EPI>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, GM_SMEM);
        if (e != cudaSuccess) return e;
        attr = true;
    }
    int tiles = (m + GM_BM - 1) / GM_BM * (n / GM_BN);
    int grid = tiles < gm_sms ? tiles : gm_sms;
    gemm_kernel<T, EPI><<<grid, GM_THREADS, GM_SMEM, st>>>(mx, mw, (T *)y, ldy, (const T *)bias,
                                                           (const T *)res, m, n, k);
    return cudaGetLastError();
}

} // namespace

int cuda_gemm_own_ok(int m, int n, int k, int ldy, const void *w, const void *x, const void *y,
                     const void *bias, const void *res) {
    if (gm_sms < 0) return 0;
    if (gm_sms == 0) { // first call: the device, and the driver's tensor-map encoder
        int dev = 0, major = 0, minor = 0, sms = 0;
        cudaDriverEntryPointQueryResult q;
        void *fn = NULL;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
            major != 9 || minor != 0 ||
            cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                             cudaEnableDefault, &q) != cudaSuccess ||
            q != cudaDriverEntryPointSuccess || !fn) {
            cudaGetLastError();
            gm_sms = -1;
            return 0;
        }
        gm_encode = (PFN_cuTensorMapEncodeTiled_v12000)fn;
        gm_sms = sms;
    }
    auto al16 = [](const void *p) { return ((uintptr_t)p & 15) == 0; };
    return m > 0 && n % GM_BN == 0 && k % GM_BK == 0 && ldy % 8 == 0 && ldy >= n && bias &&
           al16(w) && al16(x) && al16(y) && al16(bias) && (!res || al16(res));
}

cudaError_t cuda_gemm_own_run(int bf16, const void *w, const void *x, void *y, int ldy,
                              const void *bias, const void *res, int m, int n, int k, int gelu,
                              cudaStream_t st) {
    if (!cuda_gemm_own_ok(m, n, k, ldy, w, x, y, bias, res) || (gelu && res))
        return cudaErrorNotSupported;
    CUtensorMap mx, mw;
    if (gm_map(&mx, bf16, x, m, k, k, GM_BM) != 0 || gm_map(&mw, bf16, w, n, k, k, GM_BN) != 0)
        return cudaErrorInvalidValue;
    const int epi = res ? GM_EPI_RES : gelu == 2 ? GM_EPI_GELU_TANH : gelu ? GM_EPI_GELU : 0;
#define GM_GO(T)                                                                                   \
    (epi == GM_EPI_RES    ? gm_launch<T, GM_EPI_RES>(mx, mw, y, ldy, bias, res, m, n, k, st)       \
     : epi == GM_EPI_GELU ? gm_launch<T, GM_EPI_GELU>(mx, mw, y, ldy, bias, res, m, n, k, st)      \
     : epi == GM_EPI_GELU_TANH                                                                     \
         ? gm_launch<T, GM_EPI_GELU_TANH>(mx, mw, y, ldy, bias, res, m, n, k, st)                  \
         : gm_launch<T, GM_EPI_BIAS>(mx, mw, y, ldy, bias, res, m, n, k, st))
    return bf16 ? GM_GO(__nv_bfloat16) : GM_GO(__half);
#undef GM_GO
}
