/* The bf16 GEMM kernels, each one this CPU has (AVX2 + FMA emulation everywhere CI runs;
 * AVX512-BF16 and AMX where present, named in the output either way), against references:
 * the emulation bit for bit against the scalar chain it promises (bf16-rounded products
 * added k after k in fp32, as AMX's TDPBF16PS is specified); every kernel within fp32
 * accumulation error of the exact sum over the same bf16 operands and within bf16 rounding of
 * the fp32 product; every epilogue; tails of rows, columns and K; nothing past N written;
 * a row's result bit-identical whatever rows share its call; and the backend at bf16 giving
 * the demo model's tickets the same logits whatever their batches and threads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "gpu/backend.h"
#include "gpu/cpu/cpu_gemm_bf16.h"
#include "tests/lib/ref_ops.h"
#include "gpu/model/model.h"

static const gpu_cpu_bf16_isa_t isas[] = {GPU_CPU_BF16_AVX2, GPU_CPU_BF16_AVX512, GPU_CPU_BF16_AMX};

static uint64_t rng = 777;
static float frand(float scale) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return scale * ((float)(rng >> 40) / (float)(1 << 24) * 2.0f - 1.0f);
}

static uint16_t *pack(const float *w, int N, int K) {
    size_t bytes = (gpu_cpu_bf16_packed_elems(N, K) * sizeof(uint16_t) + 63) / 64 * 64;
    uint16_t *bp = aligned_alloc(64, bytes);
    assert_non_null(bp);
    gpu_cpu_bf16_pack(w, K, N, K, bp);
    return bp;
}

static void test_round(void **state) {
    (void)state;
    assert_true(gpu_cpu_bf16_round(1.0f) == 1.0f);
    assert_true(gpu_cpu_bf16_round(1.0f + 0x1p-8f) == 1.0f);               /* tie: to even */
    assert_true(gpu_cpu_bf16_round(1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f); /* tie: to even */
    assert_true(gpu_cpu_bf16_round(1.0f + 0x1p-8f + 0x1p-12f) == 1.0f + 0x1p-7f);
    assert_true(gpu_cpu_bf16_round(-3.0f) == -3.0f);
    printf("cpu bf16 kernel here: %s%s%s\n", gpu_cpu_bf16_isa_name(gpu_cpu_bf16_best()),
           *gpu_cpu_bf16_why_not_amx() ? "; not AMX: " : "", gpu_cpu_bf16_why_not_amx());
}

/* Every kernel here, every epilogue, on (m, N, K) against two references. */
static void check_gemm(int m, int N, int K) {
    const int ld = N + 3; /* y rows wider than N: nothing past N may be written */
    float *x = malloc(sizeof(float) * m * K), *w = malloc(sizeof(float) * N * K);
    float *xr = malloc(sizeof(float) * m * K), *wr = malloc(sizeof(float) * N * K);
    float *bias = malloc(sizeof(float) * N), *res = malloc(sizeof(float) * m * ld);
    float *y = malloc(sizeof(float) * m * ld);
    double *exact = malloc(sizeof(double) * m * N), *mag = malloc(sizeof(double) * m * N);
    float *chain = malloc(sizeof(float) * m * N), *f32 = malloc(sizeof(float) * m * N);
    for (int i = 0; i < m * K; i++)
        xr[i] = gpu_cpu_bf16_round(x[i] = frand(1.0f));
    for (int i = 0; i < N * K; i++)
        wr[i] = gpu_cpu_bf16_round(w[i] = frand(0.1f));
    for (int i = 0; i < N; i++)
        bias[i] = frand(0.5f);
    for (int i = 0; i < m * ld; i++)
        res[i] = frand(1.0f);
    /* exact: the sum over the bf16 operands in double; chain: the emulation's promise */
    for (int r = 0; r < m; r++)
        for (int c = 0; c < N; c++) {
            double s = 0, a = 0;
            float acc = 0.0f;
            for (int k = 0; k < K; k++) {
                s += (double)xr[r * K + k] * wr[c * K + k];
                a += fabs((double)xr[r * K + k] * wr[c * K + k]);
                acc = fmaf(xr[r * K + k], wr[c * K + k], acc);
            }
            exact[r * N + c] = s;
            mag[r * N + c] = a;
            chain[r * N + c] = acc + bias[c];
        }
    gpu_ref_linear(x, w, bias, m, K, N, f32);
    uint16_t *bp = pack(w, N, K);
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
        if (!gpu_cpu_bf16_isa_available(isas[i])) continue;
        double worst = 0, d32 = 0; /* error / its bound; |delta| against fp32 */
        int exact_chain = 1;
        for (int epi = 0; epi <= GPU_CPU_EPI_RELU; epi++) {
            memcpy(y, res, sizeof(float) * m * ld);
            gpu_cpu_gemm_bf16_isa(isas[i], x, K, m, bp, N, K, bias, (gpu_cpu_epi_t)epi, y, ld);
            for (int r = 0; r < m; r++) {
                for (int c = 0; c < N; c++) {
                    double want = exact[r * N + c] + bias[c], v = y[r * ld + c];
                    double bound = 2e-6 * (mag[r * N + c] + fabs(bias[c])) + 1e-7;
                    double ref32 = f32[r * N + c];
                    if (epi == GPU_CPU_EPI_ACCUM) {
                        want += res[r * ld + c];
                        ref32 += res[r * ld + c];
                        bound += 1e-7 * fabs(res[r * ld + c]);
                    } else if (epi == GPU_CPU_EPI_GELU) {
                        want = 0.5 * want * (1.0 + erf(want / sqrt(2.0)));
                        ref32 = 0.5 * ref32 * (1.0 + erf(ref32 / sqrt(2.0)));
                        bound += 2e-7 * (1.0 + fabs(want));
                    } else if (epi == GPU_CPU_EPI_RELU) {
                        want = want > 0 ? want : 0;
                        ref32 = ref32 > 0 ? ref32 : 0;
                    }
                    worst = fmax(worst, fabs(v - want) / bound);
                    d32 = fmax(d32, fabs(v - ref32) / (mag[r * N + c] + 1e-3));
                    if (epi == GPU_CPU_EPI_STORE && y[r * ld + c] != chain[r * N + c])
                        exact_chain = 0;
                }
                for (int c = N; c < ld; c++)
                    assert_true(y[r * ld + c] == res[r * ld + c]);
            }
        }
        printf("bf16 %s %dx%dx%d, 4 epilogues: error <= %.3g of its bound; |delta| vs fp32 "
               "<= %.3g of sum |x w|; %s\n",
               gpu_cpu_bf16_isa_name(isas[i]), m, N, K, worst, d32,
               exact_chain ? "= the fp32 chain bit for bit" : "not the fp32 chain bit for bit");
        assert_true(worst <= 1.0);
        assert_true(d32 <= 0x1p-7); /* both operands rounded to 8 bits: <= ~2^-8 */
        if (isas[i] == GPU_CPU_BF16_AVX2) assert_true(exact_chain);
    }
    free(x);
    free(w);
    free(xr);
    free(wr);
    free(bias);
    free(res);
    free(y);
    free(exact);
    free(mag);
    free(chain);
    free(f32);
    free(bp);
}

static void test_gemm(void **state) {
    (void)state;
    assert_int_not_equal(gpu_cpu_bf16_best(), GPU_CPU_BF16_NONE); /* CI's CPUs have AVX2 */
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++)
        printf("bf16 kernel %s: %s\n", gpu_cpu_bf16_isa_name(isas[i]),
               gpu_cpu_bf16_isa_available(isas[i]) ? "tested" : "not on this CPU");
    check_gemm(13, 151, 256); /* row tail, column tail 23 */
    check_gemm(24, 64, 40);   /* K not a multiple of 32 */
    check_gemm(33, 96, 768);  /* one row past two AMX A tiles */
    check_gemm(5, 1024, 256);
    check_gemm(40, 256, 1024);
    check_gemm(1, 32, 3072);
}

/* A row's output is bit for bit the same whatever rows share its call, on every kernel. */
static void test_batch_invariant(void **state) {
    (void)state;
    const int M = 70, N = 200, K = 264;
    float *x = malloc(sizeof(float) * M * K), *w = malloc(sizeof(float) * N * K);
    float *bias = malloc(sizeof(float) * N);
    float *all = malloc(sizeof(float) * M * N), *part = malloc(sizeof(float) * M * N);
    assert_non_null(x && w && bias && all && part);
    for (int i = 0; i < M * K; i++)
        x[i] = frand(1.0f);
    for (int i = 0; i < N * K; i++)
        w[i] = frand(0.1f);
    for (int i = 0; i < N; i++)
        bias[i] = frand(0.5f);
    uint16_t *bp = pack(w, N, K);
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
        gpu_cpu_bf16_isa_t isa = isas[i];
        if (!gpu_cpu_bf16_isa_available(isa)) continue;
        gpu_cpu_gemm_bf16_isa(isa, x, K, M, bp, N, K, bias, GPU_CPU_EPI_GELU, all, N);
        long rows = 0;
        for (int s = 0; s < 20; s++)
            for (int m = 1; s + m <= M; m += 5) {
                gpu_cpu_gemm_bf16_isa(isa, x + (size_t)s * K, K, m, bp, N, K, bias,
                                      GPU_CPU_EPI_GELU, part, N);
                for (int r = 0; r < m; r++, rows++)
                    assert_memory_equal(part + (size_t)r * N, all + (size_t)(s + r) * N,
                                        sizeof(float) * N);
            }
        printf("bf16 %s batch invariance: %ld rows in other batches, all bit-identical\n",
               gpu_cpu_bf16_isa_name(isa), rows);
    }
    free(x);
    free(w);
    free(bias);
    free(all);
    free(part);
    free(bp);
}

/* Logits (n, L) of the first n golden queries through the cpu backend at bf16, in batches of
 * at most budget tokens (file order, mixed lengths) on threads threads. */
static void classify_bf16(const gpu_model_t *m, int32_t **ids, const int *lens, int n, int budget,
                          int threads, float *logits) {
    common_err_t err;
    gpu_backend_opts_t o = {.token_budget = budget, .threads = threads, .precision = "bf16"};
    const gpu_backend_ops_t *ops = gpu_backend_find("cpu", &err);
    gpu_backend_t *be;
    assert_int_equal(ops->init(m, &o, &be, &err), 0);
    int32_t *flat = malloc(sizeof(int32_t) * (size_t)budget),
            *cu = malloc(sizeof(int32_t) * (size_t)(budget + 1));
    for (int i = 0; i < n;) {
        int s = 0, t = 0, mx = 0, first = i;
        cu[0] = 0;
        while (i < n && t + lens[i] <= budget) {
            memcpy(flat + t, ids[i], sizeof(int32_t) * (size_t)lens[i]);
            t += lens[i];
            mx = lens[i] > mx ? lens[i] : mx;
            cu[++s] = t;
            i++;
        }
        gpu_batch_t b = {.ids = flat, .cu_seqlens = cu, .n_seqs = s, .n_tokens = t, .max_len = mx};
        assert_int_equal(ops->forward(be, &b, logits + (size_t)first * m->cfg.num_labels, &err), 0);
    }
    free(flat);
    free(cu);
    ops->free(be);
}

static void test_backend_batch_invariant(void **state) {
    (void)state;
    common_err_t err;
    gpu_model_t *m;
    assert_int_equal(gpu_model_load(RECLASS_DEMO_MODEL, &m, &err), 0);
    FILE *f = fopen(RECLASS_FIXTURES "/golden_clinc150_test.jsonl", "r");
    assert_non_null(f);
    enum { N = 900 };
    int32_t *ids[N];
    int lens[N], n = 0;
    char *line = NULL;
    size_t cap = 0;
    while (n < N && getline(&line, &cap, f) > 0) {
        json_t *o = json_loads(line, 0, NULL), *a = json_object_get(o, "ids");
        lens[n] = (int)json_array_size(a);
        ids[n] = malloc(sizeof(int32_t) * (size_t)lens[n]);
        for (int i = 0; i < lens[n]; i++)
            ids[n][i] = (int32_t)json_integer_value(json_array_get(a, (size_t)i));
        json_decref(o);
        n++;
    }
    free(line);
    fclose(f);
    size_t L = (size_t)m->cfg.num_labels;
    float *a = malloc(sizeof(float) * n * L), *b = malloc(sizeof(float) * n * L);
    classify_bf16(m, ids, lens, n, 4096, 1, a);
    classify_bf16(m, ids, lens, n, 100, 3, b);
    assert_memory_equal(a, b, sizeof(float) * n * L);
    printf("bf16 backend (%s): %d tickets, budget 4096 / 1 thread and 100 / 3 threads: "
           "logits bit-identical\n",
           gpu_cpu_bf16_isa_name(gpu_cpu_bf16_best()), n);
    for (int i = 0; i < n; i++)
        free(ids[i]);
    free(a);
    free(b);
    gpu_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round),
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_batch_invariant),
        cmocka_unit_test(test_backend_batch_invariant),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
