/* SIMD pieces the CPU GEMM kernels share (cpu_gemm.c fp32, cpu_bf16_*.c bf16): the erf GELU
 * on 16 and 8 lanes and the epilogue of one vector of outputs. Each function carries its own
 * target attribute, so including this header adds no ISA to a translation unit. */
#ifndef RECLASS_GPU_CPU_SIMD_H
#define RECLASS_GPU_CPU_SIMD_H

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "gpu/cpu/cpu_gemm.h"

/* The register blocks are left out of sanitized builds' instrumentation: checked, they made
 * about half the time of the sanitized test suite's CPU encoder (where OpenBLAS, never
 * instrumented, used to run). The packing and the callers' buffers stay checked, and
 * test_cpu_kernels checks the kernels' bounds (columns past N are never written). */
#define GEMM_NO_SANITIZE __attribute__((no_sanitize("address", "undefined")))

/* The same rational erf GELU as gpu/cpu/cpu_kernels.c (max error 7e-8 against erff). */
GEMM_NO_SANITIZE __attribute__((target("avx512f"))) static inline __m512 gelu512(__m512 v) {
    __m512 x = _mm512_mul_ps(v, _mm512_set1_ps(0.70710678118654752f));
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-4.0f)), _mm512_set1_ps(4.0f));
    __m512 x2 = _mm512_mul_ps(x, x);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(-2.72614225801306e-10f), x2,
                               _mm512_set1_ps(2.77068142495902e-08f));
    p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(-2.10102402082508e-06f));
    p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(-5.69250639462346e-05f));
    p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(-7.34990630326855e-04f));
    p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(-2.95459980854025e-03f));
    p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(-1.60960333262415e-02f));
    __m512 q = _mm512_fmadd_ps(_mm512_set1_ps(-1.45660718464996e-05f), x2,
                               _mm512_set1_ps(-2.13374055278905e-04f));
    q = _mm512_fmadd_ps(q, x2, _mm512_set1_ps(-1.68282697438203e-03f));
    q = _mm512_fmadd_ps(q, x2, _mm512_set1_ps(-7.37332916720468e-03f));
    q = _mm512_fmadd_ps(q, x2, _mm512_set1_ps(-1.42647390514189e-02f));
    __m512 r = _mm512_rcp14_ps(q);
    r = _mm512_mul_ps(r, _mm512_fnmadd_ps(q, r, _mm512_set1_ps(2.0f)));
    __m512 e = _mm512_mul_ps(_mm512_mul_ps(x, p), r);
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), v),
                         _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

/* gelu512's rational erf on 8 lanes (one Newton step on the 12-bit reciprocal). */
GEMM_NO_SANITIZE __attribute__((target("avx2,fma"))) static inline __m256 gelu256(__m256 v) {
    __m256 x = _mm256_mul_ps(v, _mm256_set1_ps(0.70710678118654752f));
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-4.0f)), _mm256_set1_ps(4.0f));
    __m256 x2 = _mm256_mul_ps(x, x);
    __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(-2.72614225801306e-10f), x2,
                               _mm256_set1_ps(2.77068142495902e-08f));
    p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(-2.10102402082508e-06f));
    p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(-5.69250639462346e-05f));
    p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(-7.34990630326855e-04f));
    p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(-2.95459980854025e-03f));
    p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(-1.60960333262415e-02f));
    __m256 q = _mm256_fmadd_ps(_mm256_set1_ps(-1.45660718464996e-05f), x2,
                               _mm256_set1_ps(-2.13374055278905e-04f));
    q = _mm256_fmadd_ps(q, x2, _mm256_set1_ps(-1.68282697438203e-03f));
    q = _mm256_fmadd_ps(q, x2, _mm256_set1_ps(-7.37332916720468e-03f));
    q = _mm256_fmadd_ps(q, x2, _mm256_set1_ps(-1.42647390514189e-02f));
    __m256 r = _mm256_rcp_ps(q);
    r = _mm256_mul_ps(r, _mm256_fnmadd_ps(q, r, _mm256_set1_ps(2.0f)));
    __m256 e = _mm256_mul_ps(_mm256_mul_ps(x, p), r);
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), v),
                         _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

/* Stores epi(acc + bias) to the lanes m of yr (16 outputs of one row), as the fp32 kernel's
 * epilogue does: bias, then the residual add or the activation. */
GEMM_NO_SANITIZE __attribute__((target("avx512f"), always_inline)) static inline void
epi512_store(__m512 acc, __m512 bias, gpu_cpu_epi_t epi, float *yr, __mmask16 m) {
    __m512 v = _mm512_add_ps(acc, bias);
    if (epi == GPU_CPU_EPI_ACCUM)
        v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, yr));
    else if (epi == GPU_CPU_EPI_GELU)
        v = gelu512(v);
    else if (epi == GPU_CPU_EPI_RELU)
        v = _mm512_max_ps(v, _mm512_setzero_ps());
    _mm512_mask_storeu_ps(yr, m, v);
}

/* The same on 8 lanes, yr's first 8 outputs; masked moves (lanes c) only where !full: they
 * are slow on some CPUs (AMD Zen microcodes a masked store), and full is a constant at each
 * call site. */
GEMM_NO_SANITIZE __attribute__((target("avx2,fma"), always_inline)) static inline void
epi256_store(__m256 acc, __m256 bias, gpu_cpu_epi_t epi, float *yr, int full, __m256i c) {
    __m256 v = _mm256_add_ps(acc, bias);
    if (epi == GPU_CPU_EPI_ACCUM)
        v = _mm256_add_ps(v, full ? _mm256_loadu_ps(yr) : _mm256_maskload_ps(yr, c));
    else if (epi == GPU_CPU_EPI_GELU)
        v = gelu256(v);
    else if (epi == GPU_CPU_EPI_RELU)
        v = _mm256_max_ps(v, _mm256_setzero_ps());
    if (full)
        _mm256_storeu_ps(yr, v);
    else
        _mm256_maskstore_ps(yr, c, v);
}

/* Lane mask of the first n (0..8) lanes, for maskload/maskstore. */
GEMM_NO_SANITIZE __attribute__((target("avx2,fma"))) static inline __m256i lanes256(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Mask of the first n (0..16) of 16 lanes. */
static inline __mmask16 lanes512(int n) {
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

#endif
#endif
