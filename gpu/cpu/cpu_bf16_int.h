/* The bf16 kernels behind gpu_cpu_gemm_bf16 (cpu_gemm_bf16.c drives them). Each runs rows
 * (<= its row block) rows of converted activations over `panels` packed panels. */
#ifndef RECLASS_GPU_CPU_BF16_INT_H
#define RECLASS_GPU_CPU_BF16_INT_H

#include <stdint.h>

#include "gpu/cpu/cpu_gemm.h"

#define BF16_KPAD      32 /* K is padded to this (an AMX tile's depth) */
#define BF16_RB_AMX    32 /* rows per block: two 16-row A tiles */
#define BF16_RB_AVX512 24 /* two 12-row register blocks */

/* Activation rows are this many elements longer than Kp, so that rows a power of two apart
 * do not map to the same L1 sets. */
#define BF16_ROW_PAD 32

/* xa (BF16_RB_*, Kp) bf16 rows lda apart, zero past K and past rows (AMX loads whole tiles);
 * bp the block's first panel; N the columns left from it; bias from its first column or NULL;
 * y its first output. */
void gpu_cpu_bf16_avx512_rows(const uint16_t *xa, int lda, int Kp, int rows, const uint16_t *bp,
                              int panels, int N, const float *bias, gpu_cpu_epi_t epi, float *y,
                              int ldy);
/* AMX: the tile configuration gpu_cpu_bf16_amx_rows runs under, loaded by begin on the calling
 * thread and released by end (once per GEMM call, not per block). */
void gpu_cpu_bf16_amx_begin(void);
void gpu_cpu_bf16_amx_end(void);
/* begin, one tile zeroed, end: what the detection's child process runs */
void gpu_cpu_bf16_amx_probe(void);
void gpu_cpu_bf16_amx_rows(const uint16_t *xa, int lda, int Kp, int rows, const uint16_t *bp,
                           int panels, int N, const float *bias, gpu_cpu_epi_t epi, float *y,
                           int ldy);

#endif
