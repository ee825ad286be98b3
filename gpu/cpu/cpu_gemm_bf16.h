/* bf16 GEMM for the CPU backend's `--precision bf16`: y = x W^T + b with W rounded to bf16
 * once at load and x rounded to bf16 as it enters each product, fp32 accumulation, the same
 * fp32 epilogues as gpu_cpu_gemm (bias, residual add, GELU, ReLU). Weights are packed in
 * panels of 32 output features with k in pairs (the layout vdpbf16ps and AMX tiles read), K
 * padded to a multiple of 32. Three kernels over the one layout, chosen at run time from the
 * CPU: AMX-BF16 tiles, AVX512-BF16 (vdpbf16ps), or AVX2 + FMA computing the same bf16-rounded
 * products in fp32. Each output is the same chain over k wherever its row sits, so a
 * sequence's result does not depend on the batch around it (per kernel; the kernels round
 * their pair sums differently and agree only to fp32 accumulation error). */
#ifndef RECLASS_GPU_CPU_GEMM_BF16_H
#define RECLASS_GPU_CPU_GEMM_BF16_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/cpu/cpu_gemm.h"

typedef enum {
    GPU_CPU_BF16_NONE,   /* no kernel: the CPU lacks AVX2 + FMA */
    GPU_CPU_BF16_AVX2,   /* AVX2 + FMA: bf16 products emulated in fp32 */
    GPU_CPU_BF16_AVX512, /* AVX512-BF16 vdpbf16ps */
    GPU_CPU_BF16_AMX,    /* AMX-BF16 tiles */
} gpu_cpu_bf16_isa_t;

#define GPU_CPU_BF16_MAX_K 4096 /* longest reduction a kernel takes (BERT-large's FFN) */

/* The fastest kernel this CPU and kernel allow (asks Linux for AMX tile state the first time;
 * detected once per process). */
gpu_cpu_bf16_isa_t gpu_cpu_bf16_best(void);

/* 1 when this CPU runs isa's kernel. */
int gpu_cpu_bf16_isa_available(gpu_cpu_bf16_isa_t isa);

/* "amx-bf16", "avx512-bf16", "avx2-fma (bf16 emulated in fp32)" or "none". */
const char *gpu_cpu_bf16_isa_name(gpu_cpu_bf16_isa_t isa);

/* Why gpu_cpu_bf16_best is not AMX where it is not: "" when it is, else a sentence (e.g. no
 * AMX-BF16 on this CPU; Linux refused the tile data permission). */
const char *gpu_cpu_bf16_why_not_amx(void);

/* bf16 elements a packed (N, K) weight takes. */
size_t gpu_cpu_bf16_packed_elems(int N, int K);

/* Packs w (N, K), rows ldw floats apart, rounded to nearest even bf16, into bp
 * (gpu_cpu_bf16_packed_elems, 64-byte aligned); padding is 0. */
void gpu_cpu_bf16_pack(const float *w, int ldw, int N, int K, uint16_t *bp);

/* y (m, N), rows ldy apart, from x (m, K <= GPU_CPU_BF16_MAX_K), rows ldx apart, on the
 * best kernel. */
void gpu_cpu_gemm_bf16(const float *x, int ldx, int m, const uint16_t *bp, int N, int K,
                       const float *bias, gpu_cpu_epi_t epi, float *y, int ldy);

/* The same on kernel isa (gpu_cpu_bf16_isa_available). */
void gpu_cpu_gemm_bf16_isa(gpu_cpu_bf16_isa_t isa, const float *x, int ldx, int m,
                           const uint16_t *bp, int N, int K, const float *bias, gpu_cpu_epi_t epi,
                           float *y, int ldy);

/* x rounded to nearest even bf16 (what the kernels multiply), as a float. */
float gpu_cpu_bf16_round(float x);

#endif
