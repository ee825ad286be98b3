/* The CPU backend's fused kernels against the reference ops they replace, on random data
 * and odd sizes (vector tails, head_dim not a multiple of 16). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cpu/cpu_gemm.h"
#include "gpu/cpu/cpu_kernels.h"
#include "tests/lib/ref_ops.h"

static uint64_t rng = 12345;
static float frand(float scale) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return scale * ((float)(rng >> 40) / (float)(1 << 24) * 2.0f - 1.0f);
}

static double max_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

static void test_gelu(void **state) {
    int rows = 3, cols = 1000 + 7; /* tails past the 16- and 8-wide loops */
    size_t n = (size_t)rows * cols;
    float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n);
    float *bias = malloc(sizeof(float) * cols);
    for (int i = 0; i < cols; i++)
        bias[i] = frand(0.5f);
    for (size_t i = 0; i < n; i++) {
        a[i] = (float)((double)i / n * 20.0 - 10.0); /* -10 .. 10 covers both tails */
        b[i] = a[i] + bias[i % cols];
    }
    gpu_cpu_bias_gelu(a, bias, rows, cols);
    gpu_ref_gelu(b, n);
    double d = max_diff(a, b, n);
    printf("gelu vs erff: max |delta| %.3g\n", d);
    assert_true(d < 2e-6);
    free(a);
    free(b);
    free(bias);
}

static void test_ln(void **state) {
    int n = 5, H = 264; /* not a multiple of 16 */
    float *x = malloc(sizeof(float) * n * H), *x2 = malloc(sizeof(float) * n * H);
    float *zero = calloc((size_t)n * H, sizeof(float));
    float *g = malloc(sizeof(float) * H), *b = malloc(sizeof(float) * H);
    for (int i = 0; i < H; i++) {
        g[i] = 1.0f + frand(0.2f);
        b[i] = frand(0.1f);
    }
    for (int i = 0; i < n * H; i++)
        x[i] = x2[i] = frand(2.0f) + 3.0f; /* an offset mean tests the centring */
    gpu_cpu_ln(x, g, b, n, H, 1e-12f);
    gpu_ref_add_ln(x2, zero, g, b, n, H, 1e-12f);
    double d = max_diff(x, x2, (size_t)n * H);
    printf("LayerNorm: max |delta| %.3g\n", d);
    assert_true(d < 1e-5);
    free(x);
    free(x2);
    free(zero);
    free(g);
    free(b);
}

static void check_attention(int heads, int hd) {
    int32_t cu[] = {0, 1, 9, 30, 33, 50, 90, 190};
    int n_seqs = 7, n = 190, HD = heads * hd, ld = 3 * HD;
    float *qkv = malloc(sizeof(float) * n * ld);
    float *a = malloc(sizeof(float) * n * HD), *b = malloc(sizeof(float) * n * HD);
    float *scratch = aligned_alloc(
        64, (sizeof(float) * gpu_cpu_attention_scratch_floats(100, hd) + 63) / 64 * 64);
    for (int i = 0; i < n * ld; i++)
        qkv[i] = frand(1.5f);
    for (int s = 0; s < n_seqs; s++) {
        const float *sq = qkv + (size_t)cu[s] * ld;
        int len = cu[s + 1] - cu[s];
        gpu_cpu_attention_seq(sq, ld, len, sq + HD, sq + 2 * HD, ld, len, heads, hd,
                              a + (size_t)cu[s] * HD, HD, scratch);
    }
    gpu_ref_attention(qkv, qkv + HD, qkv + 2 * HD, ld, cu, n_seqs, heads, hd, b);
    double d = max_diff(a, b, (size_t)n * HD);
    printf("attention heads %d x %d: max |delta| %.3g\n", heads, hd, d);
    assert_true(d < 1e-5);
    /* First-token-only queries (the last layer) give the first rows. */
    for (int s = 0; s < n_seqs; s++) {
        const float *sq = qkv + (size_t)cu[s] * ld;
        gpu_cpu_attention_seq(sq, ld, 1, sq + HD, sq + 2 * HD, ld, cu[s + 1] - cu[s], heads, hd,
                              a + (size_t)s * HD, HD, scratch);
        assert_true(max_diff(a + (size_t)s * HD, b + (size_t)cu[s] * HD, HD) < 1e-5);
    }
    free(qkv);
    free(a);
    free(b);
    free(scratch);
}

/* Sequences of 40 and 100 tokens take the GEMM path (ATT_GEMM_MIN_LEN 32) where the CPU
 * has AVX-512; the shorter ones the dot-product path. */
static void test_attention(void **state) {
    check_attention(4, 64); /* the AVX-512 path where the CPU has it */
    check_attention(3, 20); /* the portable path */
}

/* The packed GEMM, every epilogue, against gpu_ref_linear (+ residual / GELU), on shapes
 * with row and column tails. */
static void check_gemm(int m, int N, int K) {
    float *x = malloc(sizeof(float) * m * K), *w = malloc(sizeof(float) * N * K);
    float *bias = malloc(sizeof(float) * N), *ref = malloc(sizeof(float) * m * (N + 3));
    float *y = malloc(sizeof(float) * m * (N + 3)), *res = malloc(sizeof(float) * m * (N + 3));
    float *bp =
        aligned_alloc(64, (gpu_cpu_gemm_packed_floats(N, K) * sizeof(float) + 63) / 64 * 64);
    for (int i = 0; i < m * K; i++)
        x[i] = frand(1.0f);
    for (int i = 0; i < N * K; i++)
        w[i] = frand(0.1f);
    for (int i = 0; i < N; i++)
        bias[i] = frand(0.5f);
    for (int i = 0; i < m * (N + 3); i++)
        res[i] = frand(1.0f);
    gpu_cpu_gemm_pack(w, N, K, bp);
    int ld = N + 3; /* y rows wider than N: nothing past N may be written */
    for (int epi = 0; epi <= GPU_CPU_EPI_RELU; epi++) {
        memcpy(y, res, sizeof(float) * m * ld);
        gpu_cpu_gemm(x, K, m, bp, N, K, bias, (gpu_cpu_epi_t)epi, y, ld);
        gpu_ref_linear(x, w, bias, m, K, N, ref);
        double d = 0;
        for (int r = 0; r < m; r++) {
            if (epi == GPU_CPU_EPI_ACCUM)
                for (int c = 0; c < N; c++)
                    ref[r * N + c] += res[r * ld + c];
            if (epi == GPU_CPU_EPI_GELU) gpu_ref_gelu(ref + r * N, (size_t)N);
            if (epi == GPU_CPU_EPI_RELU)
                for (int c = 0; c < N; c++)
                    ref[r * N + c] = ref[r * N + c] > 0 ? ref[r * N + c] : 0;
            d = fmax(d, max_diff(y + r * ld, ref + r * N, (size_t)N));
            for (int c = N; c < ld; c++)
                assert_true(y[r * ld + c] == res[r * ld + c]);
        }
        printf("gemm %dx%dx%d epilogue %d: max |delta| %.3g\n", m, N, K, epi, d);
        assert_true(d < 1e-4);
    }
    free(x);
    free(w);
    free(bias);
    free(ref);
    free(y);
    free(res);
    free(bp);
}

/* A row's output is bit for bit the same whatever rows share its call: `reclass run` and
 * `reclass classify` batch the same ticket differently and must agree exactly. */
static void test_gemm_batch_invariant(void **state) {
    (void)state;
    if (!gpu_cpu_gemm_available()) {
        skip();
        return;
    }
    const int M = 64, N = 200, K = 256;
    float *x = malloc(sizeof(float) * M * K), *w = malloc(sizeof(float) * N * K);
    float *bias = malloc(sizeof(float) * N);
    float *all = malloc(sizeof(float) * M * N), *part = malloc(sizeof(float) * M * N);
    float *bp =
        aligned_alloc(64, (gpu_cpu_gemm_packed_floats(N, K) * sizeof(float) + 63) / 64 * 64);
    assert_non_null(x && w && bias && all && part && bp);
    for (int i = 0; i < M * K; i++)
        x[i] = frand(1.0f);
    for (int i = 0; i < N * K; i++)
        w[i] = frand(0.1f);
    for (int i = 0; i < N; i++)
        bias[i] = frand(0.5f);
    gpu_cpu_gemm_pack(w, N, K, bp);
    gpu_cpu_gemm(x, K, M, bp, N, K, bias, GPU_CPU_EPI_GELU, all, N);
    long rows = 0;
    for (int s = 0; s < 20; s++)
        for (int m = 1; s + m <= M; m += 5) {
            gpu_cpu_gemm(x + (size_t)s * K, K, m, bp, N, K, bias, GPU_CPU_EPI_GELU, part, N);
            for (int r = 0; r < m; r++, rows++)
                assert_memory_equal(part + (size_t)r * N, all + (size_t)(s + r) * N,
                                    sizeof(float) * N);
        }
    printf("gemm batch invariance: %ld rows in other batches, all bit-identical\n", rows);
    free(x);
    free(w);
    free(bias);
    free(all);
    free(part);
    free(bp);
}

static void test_gemm(void **state) {
    if (!gpu_cpu_gemm_available()) {
        printf("no AVX-512: the backend uses OpenBLAS (covered by test_cpu_golden)\n");
        return;
    }
    check_gemm(13, 151, 256); /* row tail 1, column tail 23 */
    check_gemm(24, 64, 40);
    check_gemm(5, 1024, 256);
    check_gemm(30, 256, 1024);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_ln),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_gemm_batch_invariant),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
