/* fp32 GEMM for the CPU backend's projections, y = x W^T + b with W in nn.Linear layout,
 * on weights packed once at init: panels of 32 output features, k-major, so the kernel
 * streams them straight from cache (no per-call packing as a BLAS must do) and reads the
 * activations in place. A 12x32 AVX-512 register block runs at ~95% of the FMA peak on
 * the shapes of BERT (a 6x16 AVX2 + FMA block where the CPU has no AVX-512); the bias, a
 * residual add, GELU or ReLU is applied while the block is still in registers. Each output
 * is the same chain of fused multiply-adds over k wherever its row sits, so a sequence's
 * result does not depend on the batch around it. Only where the CPU has AVX-512 or AVX2 +
 * FMA (gpu_cpu_gemm_available); the backend falls back to OpenBLAS elsewhere. */
#ifndef RECLASS_GPU_CPU_GEMM_H
#define RECLASS_GPU_CPU_GEMM_H

#include <stddef.h>

typedef enum {
    GPU_CPU_EPI_STORE, /* y = x W^T + b */
    GPU_CPU_EPI_ACCUM, /* y += x W^T + b (residual) */
    GPU_CPU_EPI_GELU,  /* y = gelu(x W^T + b), the erf form */
    GPU_CPU_EPI_RELU,  /* y = max(x W^T + b, 0) */
} gpu_cpu_epi_t;

#define GPU_CPU_GEMM_NR 32 /* output features per packed panel */

/* 1 when this CPU runs a kernel (AVX-512F, or AVX2 and FMA). */
int gpu_cpu_gemm_available(void);

/* The kernel gpu_cpu_gemm runs here: "avx512f", "avx2-fma" or "none". */
const char *gpu_cpu_gemm_kernel_name(void);

/* Floats a packed (N, K) weight takes: N rounded up to a panel, times K. */
size_t gpu_cpu_gemm_packed_floats(int N, int K);

/* Packs w (N, K) into bp (gpu_cpu_gemm_packed_floats floats, 64-byte aligned); padding
 * columns are 0. */
void gpu_cpu_gemm_pack(const float *w, int N, int K, float *bp);

/* The same from a W whose rows are ldw floats apart (a head's slice of a wider matrix). */
void gpu_cpu_gemm_pack_strided(const float *w, int ldw, int N, int K, float *bp);

/* Packs B = W^T given as b (K, N), rows ldb apart: for products x B such as P V. */
void gpu_cpu_gemm_pack_kn(const float *b, int ldb, int K, int N, float *bp);

/* y (m, N), rows ldy apart, from x (m, K), rows ldx apart, the packed weight bp and bias
 * (N) or NULL. N may be any size (the last panel is stored through a mask). */
void gpu_cpu_gemm(const float *x, int ldx, int m, const float *bp, int N, int K, const float *bias,
                  gpu_cpu_epi_t epi, float *y, int ldy);

#endif
