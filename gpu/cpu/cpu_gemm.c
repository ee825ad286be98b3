#include "gpu/cpu/cpu_gemm.h"

#include <string.h>

#define NR GPU_CPU_GEMM_NR
#define MR 12 /* rows per register block: 24 accumulators of the 32 zmm registers */
/* Packed weight bytes a block of panels may take, so it stays in L2 while every row block
 * of x passes over it. */
#define PANEL_BLOCK_BYTES (1u << 20)

size_t gpu_cpu_gemm_packed_floats(int N, int K) {
    return (size_t)((N + NR - 1) / NR) * NR * (size_t)K;
}

void gpu_cpu_gemm_pack_strided(const float *w, int ldw, int N, int K, float *bp) {
    int panels = (N + NR - 1) / NR;
    for (int j = 0; j < panels; j++)
        for (int k = 0; k < K; k++) {
            float *dst = bp + ((size_t)j * K + k) * NR;
            for (int c = 0; c < NR; c++) {
                int n = j * NR + c;
                dst[c] = n < N ? w[(size_t)n * ldw + k] : 0.0f;
            }
        }
}

void gpu_cpu_gemm_pack(const float *w, int N, int K, float *bp) {
    gpu_cpu_gemm_pack_strided(w, K, N, K, bp);
}

void gpu_cpu_gemm_pack_kn(const float *b, int ldb, int K, int N, float *bp) {
    int panels = (N + NR - 1) / NR;
    for (int j = 0; j < panels; j++) {
        int cols = N - j * NR < NR ? N - j * NR : NR;
        for (int k = 0; k < K; k++) {
            float *dst = bp + ((size_t)j * K + k) * NR;
            memcpy(dst, b + (size_t)k * ldb + j * NR, sizeof(float) * (size_t)cols);
            for (int c = cols; c < NR; c++)
                dst[c] = 0.0f;
        }
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "gpu/cpu/cpu_simd.h"

/* Which kernel this CPU runs: the AVX-512 one, else the AVX2 one. Both give each output the
 * same sequence of fused multiply-adds over k whatever the rows around it, so a ticket's
 * logits do not depend on the batch it came in (OpenBLAS's micro-kernels round differently
 * at tile edges: `reclass run` and `reclass classify` would disagree in the last digits). */
static int gemm_has_avx512(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
}

int gpu_cpu_gemm_available(void) {
    __builtin_cpu_init();
    return gemm_has_avx512() || (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
}

const char *gpu_cpu_gemm_kernel_name(void) {
    return gemm_has_avx512() ? "avx512f" : gpu_cpu_gemm_available() ? "avx2-fma" : "none";
}

/* One rows x 32 block over the whole K: rows is a compile-time constant at each call
 * site (always_inline), so acc stays in registers. m0/m1 mask the columns past N. */
GEMM_NO_SANITIZE __attribute__((target("avx512f"), always_inline)) static inline void
block(const float *x, int ldx, const float *b, int K, const float *bias, gpu_cpu_epi_t epi,
      float *y, int ldy, int rows, __mmask16 m0, __mmask16 m1) {
    __m512 acc[MR][2];
#pragma GCC unroll 12
    for (int r = 0; r < rows; r++) {
        acc[r][0] = _mm512_setzero_ps();
        acc[r][1] = _mm512_setzero_ps();
    }
    for (int k = 0; k < K; k++) {
        __m512 b0 = _mm512_load_ps(b + (size_t)k * NR),
               b1 = _mm512_load_ps(b + (size_t)k * NR + 16);
#pragma GCC unroll 12
        for (int r = 0; r < rows; r++) {
            __m512 a = _mm512_set1_ps(x[(size_t)r * ldx + k]);
            acc[r][0] = _mm512_fmadd_ps(a, b0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(a, b1, acc[r][1]);
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
        block(x, ldx, b, K, bias, epi, y, ldy, R, m0, m1);                                         \
        break;

GEMM_NO_SANITIZE __attribute__((target("avx512f"))) static void
block_rows(const float *x, int ldx, const float *b, int K, const float *bias, gpu_cpu_epi_t epi,
           float *y, int ldy, int rows, int cols) {
    __mmask16 m0 = cols >= 16 ? 0xffff : (__mmask16)((1u << cols) - 1);
    __mmask16 m1 = cols >= 32 ? 0xffff : cols <= 16 ? 0 : (__mmask16)((1u << (cols - 16)) - 1);
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

static void gemm_avx2(const float *x, int ldx, int m, const float *bp, int N, int K,
                      const float *bias, gpu_cpu_epi_t epi, float *y, int ldy);

void gpu_cpu_gemm(const float *x, int ldx, int m, const float *bp, int N, int K, const float *bias,
                  gpu_cpu_epi_t epi, float *y, int ldy) {
    if (!gemm_has_avx512()) {
        gemm_avx2(x, ldx, m, bp, N, K, bias, epi, y, ldy);
        return;
    }
    int panels = (N + NR - 1) / NR;
    int per_block = (int)(PANEL_BLOCK_BYTES / ((size_t)K * NR * sizeof(float)));
    if (per_block < 1) per_block = 1;
    for (int j0 = 0; j0 < panels; j0 += per_block) {
        int j1 = j0 + per_block < panels ? j0 + per_block : panels;
        for (int i = 0; i < m; i += MR) {
            int rows = m - i < MR ? m - i : MR;
            for (int j = j0; j < j1; j++) {
                int cols = N - j * NR < NR ? N - j * NR : NR;
                block_rows(x + (size_t)i * ldx, ldx, bp + (size_t)j * K * NR, K,
                           bias ? bias + j * NR : NULL, epi, y + (size_t)i * ldy + j * NR, ldy,
                           rows, cols);
            }
        }
    }
}

/* ---- AVX2 + FMA: 6 rows x 16 columns (half a panel) in 12 ymm accumulators ---- */

#define MR2 6

/* rows x 16 over the whole K from the half panel at b (rows of NR floats); c0/c1 mask the
 * columns past N. rows is a compile-time constant at each call site. */
GEMM_NO_SANITIZE __attribute__((target("avx2,fma"), always_inline)) static inline void
block2(const float *x, int ldx, const float *b, int K, const float *bias, gpu_cpu_epi_t epi,
       float *y, int ldy, int rows, int full, __m256i c0, __m256i c1) {
    __m256 acc[MR2][2];
#pragma GCC unroll 6
    for (int r = 0; r < rows; r++) {
        acc[r][0] = _mm256_setzero_ps();
        acc[r][1] = _mm256_setzero_ps();
    }
    for (int k = 0; k < K; k++) {
        __m256 b0 = _mm256_load_ps(b + (size_t)k * NR), b1 = _mm256_load_ps(b + (size_t)k * NR + 8);
#pragma GCC unroll 6
        for (int r = 0; r < rows; r++) {
            __m256 a = _mm256_broadcast_ss(x + (size_t)r * ldx + k);
            acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
        }
    }
    __m256 bias0 = !bias  ? _mm256_setzero_ps()
                   : full ? _mm256_loadu_ps(bias)
                          : _mm256_maskload_ps(bias, c0);
    __m256 bias1 = !bias  ? _mm256_setzero_ps()
                   : full ? _mm256_loadu_ps(bias + 8)
                          : _mm256_maskload_ps(bias + 8, c1);
#pragma GCC unroll 6
    for (int r = 0; r < rows; r++) {
        float *yr = y + (size_t)r * ldy;
        epi256_store(acc[r][0], bias0, epi, yr, full, c0);
        epi256_store(acc[r][1], bias1, epi, yr + 8, full, c1);
    }
}

#define BLOCK2_CASE(R)                                                                             \
    case R:                                                                                        \
        if (cols == 16)                                                                            \
            block2(x, ldx, b, K, bias, epi, y, ldy, R, 1, c0, c1);                                 \
        else                                                                                       \
            block2(x, ldx, b, K, bias, epi, y, ldy, R, 0, c0, c1);                                 \
        break;

GEMM_NO_SANITIZE __attribute__((target("avx2,fma"))) static void
block2_rows(const float *x, int ldx, const float *b, int K, const float *bias, gpu_cpu_epi_t epi,
            float *y, int ldy, int rows, int cols) {
    __m256i c0 = lanes256(cols < 8 ? cols : 8), c1 = lanes256(cols < 8 ? 0 : cols - 8);
    switch (rows) {
        BLOCK2_CASE(6)
        BLOCK2_CASE(5)
        BLOCK2_CASE(4)
        BLOCK2_CASE(3)
        BLOCK2_CASE(2)
        BLOCK2_CASE(1)
    }
}

/* Panels per block so that a block stays in a 512 KiB L2 (AVX2 server cores have 512 KiB to
 * 1 MiB) while every row block passes over it. */
#define PANEL_BLOCK2_BYTES (256u << 10)

static void gemm_avx2(const float *x, int ldx, int m, const float *bp, int N, int K,
                      const float *bias, gpu_cpu_epi_t epi, float *y, int ldy) {
    int panels = (N + NR - 1) / NR;
    int per_block = (int)(PANEL_BLOCK2_BYTES / ((size_t)K * NR * sizeof(float)));
    if (per_block < 1) per_block = 1;
    for (int j0 = 0; j0 < panels; j0 += per_block) {
        int j1 = j0 + per_block < panels ? j0 + per_block : panels;
        for (int i = 0; i < m; i += MR2) {
            int rows = m - i < MR2 ? m - i : MR2;
            for (int j = j0; j < j1; j++)
                for (int h = 0; h < NR; h += 16) { /* the panel's two halves */
                    int cols = N - j * NR - h;
                    if (cols <= 0) break;
                    if (cols > 16) cols = 16;
                    block2_rows(x + (size_t)i * ldx, ldx, bp + (size_t)j * K * NR + h, K,
                                bias ? bias + j * NR + h : NULL, epi,
                                y + (size_t)i * ldy + j * NR + h, ldy, rows, cols);
                }
        }
    }
}

#else
int gpu_cpu_gemm_available(void) {
    return 0;
}

const char *gpu_cpu_gemm_kernel_name(void) {
    return "none";
}

void gpu_cpu_gemm(const float *x, int ldx, int m, const float *bp, int N, int K, const float *bias,
                  gpu_cpu_epi_t epi, float *y, int ldy) {
    (void)x, (void)ldx, (void)m, (void)bp, (void)N, (void)K, (void)bias, (void)epi, (void)y,
        (void)ldy;
}
#endif
