/* The AVX512-BF16 kernel of gpu_cpu_gemm_bf16: 12 rows x 32 columns in 24 zmm accumulators,
 * one vdpbf16ps per 16 columns and k pair (Intel specifies the pair's odd product added
 * first, each add rounded to fp32). Compiled for AVX512-BF16 by target attributes alone;
 * only called where the CPU has it. */
#include <stdint.h>
#include <string.h>

#include "gpu/cpu/cpu_bf16_int.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include "gpu/cpu/cpu_simd.h"

#define NR GPU_CPU_GEMM_NR
#define MR 12

#define BF16_TARGET __attribute__((target("avx512f,avx512bf16")))

GEMM_NO_SANITIZE BF16_TARGET __attribute__((always_inline)) static inline void
block(const uint16_t *xa, int lda, int Kp, const uint16_t *b, const float *bias, gpu_cpu_epi_t epi,
      float *y, int ldy, int rows, __mmask16 m0, __mmask16 m1) {
    __m512 acc[MR][2];
#pragma GCC unroll 12
    for (int r = 0; r < rows; r++) {
        acc[r][0] = _mm512_setzero_ps();
        acc[r][1] = _mm512_setzero_ps();
    }
    for (int kp = 0; kp < Kp / 2; kp++) {
        __m512bh b0 = (__m512bh)_mm512_load_si512(b + (size_t)kp * 2 * NR);
        __m512bh b1 = (__m512bh)_mm512_load_si512(b + (size_t)kp * 2 * NR + NR);
#pragma GCC unroll 12
        for (int r = 0; r < rows; r++) {
            int32_t pair;
            memcpy(&pair, xa + (size_t)r * lda + 2 * kp, sizeof pair);
            __m512bh a = (__m512bh)_mm512_set1_epi32(pair);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], a, b0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], a, b1);
        }
    }
    __m512 bias0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
    __m512 bias1 = bias ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
#pragma GCC unroll 12
    for (int r = 0; r < rows; r++) {
        float *yr = y + (size_t)r * ldy;
        epi512_store(acc[r][0], bias0, epi, yr, m0);
        epi512_store(acc[r][1], bias1, epi, yr + 16, m1);
    }
}

#define BLOCK_CASE(R)                                                                              \
    case R:                                                                                        \
        block(xa, lda, Kp, b, bias, epi, y, ldy, R, m0, m1);                                       \
        break;

GEMM_NO_SANITIZE BF16_TARGET static void block_rows(const uint16_t *xa, int lda, int Kp,
                                                    const uint16_t *b, const float *bias,
                                                    gpu_cpu_epi_t epi, float *y, int ldy, int rows,
                                                    int cols) {
    __mmask16 m0 = lanes512(cols), m1 = lanes512(cols - 16);
    switch (rows) {
        BLOCK_CASE(12)
        BLOCK_CASE(11)
        BLOCK_CASE(10)
        BLOCK_CASE(9)
        BLOCK_CASE(8)
        BLOCK_CASE(7)
        BLOCK_CASE(6)
        BLOCK_CASE(5)
        BLOCK_CASE(4)
        BLOCK_CASE(3)
        BLOCK_CASE(2)
        BLOCK_CASE(1)
    }
}

void gpu_cpu_bf16_avx512_rows(const uint16_t *xa, int lda, int Kp, int rows, const uint16_t *bp,
                              int panels, int N, const float *bias, gpu_cpu_epi_t epi, float *y,
                              int ldy) {
    for (int j = 0; j < panels; j++) {
        int cols = N - j * NR < NR ? N - j * NR : NR;
        for (int r = 0; r < rows; r += MR)
            block_rows(xa + (size_t)r * lda, lda, Kp, bp + (size_t)j * Kp * NR,
                       bias ? bias + j * NR : NULL, epi, y + (size_t)r * ldy + j * NR, ldy,
                       rows - r < MR ? rows - r : MR, cols);
    }
}
#endif
