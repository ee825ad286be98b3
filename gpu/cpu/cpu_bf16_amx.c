/* The AMX-BF16 kernel of gpu_cpu_gemm_bf16: a 32 x 32 output block in four 16 x 16 fp32
 * tiles, A tiles from the converted activations (16 rows x 32 k), B tiles straight from the
 * packed panels (16 k pairs x 16 columns, 128 bytes apart), then the fp32 epilogue on AVX-512
 * from the stored tiles. Compiled for AMX by target attributes alone; only called where
 * gpu_cpu_bf16_isa_available(GPU_CPU_BF16_AMX) (Linux granted the tile data state). */
#include <stdint.h>

#include "gpu/cpu/cpu_bf16_int.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include "gpu/cpu/cpu_simd.h"

#define NR GPU_CPU_GEMM_NR

#define AMX_TARGET __attribute__((target("amx-tile,amx-bf16,avx512f")))

/* LDTILECFG's 64-byte operand (palette 1). */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg_t;

/* tmm0..3: C (rows 0-15 | 16-31) x (cols 0-15 | 16-31); tmm4, 5: A; tmm6, 7: B, all 16 rows
 * of 64 bytes. */
AMX_TARGET void gpu_cpu_bf16_amx_begin(void) {
    _Alignas(64) tilecfg_t cfg = {.palette = 1};
    for (int t = 0; t < 8; t++) {
        cfg.rows[t] = 16;
        cfg.colsb[t] = 64;
    }
    /* Not _tile_loadconfig: GCC 12's declares only the operand's first 8 bytes as read, so
     * the stores of rows and colsb above were dropped as dead and LDTILECFG loaded a palette
     * with every tile unconfigured; the first tile instruction then raised #UD (SIGILL). */
    __asm__ volatile("ldtilecfg %0" ::"m"(cfg));
}

AMX_TARGET void gpu_cpu_bf16_amx_end(void) {
    _tile_release();
}

AMX_TARGET void gpu_cpu_bf16_amx_probe(void) {
    gpu_cpu_bf16_amx_begin();
    _tile_zero(0);
    gpu_cpu_bf16_amx_end();
}

GEMM_NO_SANITIZE AMX_TARGET void gpu_cpu_bf16_amx_rows(const uint16_t *xa, int lda, int Kp,
                                                       int rows, const uint16_t *bp, int panels,
                                                       int N, const float *bias, gpu_cpu_epi_t epi,
                                                       float *y, int ldy) {
    _Alignas(64) float cb[32 * NR];                     /* (32, NR) the block's accumulators */
    const long lda_b = (long)lda * 2, ldb = NR * 2 * 2; /* bytes */
    const int two = rows > 16; /* the second A tile holds only zero rows otherwise */
    for (int j = 0; j < panels; j++) {
        const uint16_t *b = bp + (size_t)j * Kp * NR;
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (int k = 0; k < Kp; k += 32) {
            const uint16_t *bk = b + (size_t)(k / 2) * NR * 2;
            _tile_loadd(4, xa + k, lda_b);
            _tile_loadd(6, bk, ldb);
            _tile_loadd(7, bk + 32, ldb);
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            if (two) {
                _tile_loadd(5, xa + (size_t)16 * lda + k, lda_b);
                _tile_dpbf16ps(2, 5, 6);
                _tile_dpbf16ps(3, 5, 7);
            }
        }
        _tile_stored(0, cb, NR * 4);
        _tile_stored(1, cb + 16, NR * 4);
        if (two) {
            _tile_stored(2, cb + 16 * NR, NR * 4);
            _tile_stored(3, cb + 16 * NR + 16, NR * 4);
        }
        __asm__ volatile("" ::: "memory"); /* the tile stores wrote cb behind the compiler */
        int cols = N - j * NR < NR ? N - j * NR : NR;
        __mmask16 m0 = lanes512(cols), m1 = lanes512(cols - 16);
        const float *bj = bias ? bias + j * NR : NULL;
        __m512 bias0 = bj ? _mm512_maskz_loadu_ps(m0, bj) : _mm512_setzero_ps();
        __m512 bias1 = bj ? _mm512_maskz_loadu_ps(m1, bj + 16) : _mm512_setzero_ps();
        for (int r = 0; r < rows; r++) {
            float *yr = y + (size_t)r * ldy + j * NR;
            epi512_store(_mm512_load_ps(cb + r * NR), bias0, epi, yr, m0);
            epi512_store(_mm512_load_ps(cb + r * NR + 16), bias1, epi, yr + 16, m1);
        }
    }
}
#endif
