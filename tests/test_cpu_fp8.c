/* The FP8 reference (`--precision fp8` on the CPU backend, gpu/model/fp8.h): the E4M3
 * conversion against an independent nearest-value search and, where the CUDA headers are
 * there, bit for bit against CUDA's own __nv_cvt_float_to_fp8 (host emulation of the
 * cvt.rn.satfinite instruction); the per-token row quantization; the LayerNorm sequence the CUDA
 * kernel before an FP8 linear follows (gpu_fp8_norm_row); and the agreement gates on
 * the demo checkpoint against Hugging Face fp32: top-1 >= 99.5% on CLINC150 test and >= 99.0%
 * on the long CFPB complaint narratives (tests/fixtures/golden_cfpb_long.jsonl). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/backend.h"
#include "gpu/model/fp8.h"
#include "gpu/model/model.h"
#include "tests/lib/family_golden.h"

#ifdef RECLASS_HAVE_CUDA
#include <cuda_fp8.h>
#endif

static float bits_float(uint32_t b) {
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* The E4M3 code nearest to x by search over the 127 non-negative finite codes, ties to the
 * even code; beyond 448 + 16 saturated; NaN 0x7F. */
static uint8_t e4m3_by_search(float x) {
    if (isnan(x)) return 0x7F;
    const uint8_t sign = signbit(x) ? 0x80 : 0;
    const double a = fabs((double)x);
    if (a > 464.0) return sign | 0x7E;
    int best = 0;
    double bd = INFINITY;
    for (int c = 0; c <= 0x7E; c++) {
        double d = fabs((double)gpu_fp8_e4m3_float((uint8_t)c) - a);
        if (d < bd || (d == bd && (c & 1) == 0)) {
            bd = d;
            best = c;
        }
    }
    return (uint8_t)(sign | best);
}

static void test_e4m3_values(void **state) {
    (void)state;
    assert_int_equal(gpu_fp8_e4m3(448.0f), 0x7E);
    assert_int_equal(gpu_fp8_e4m3(464.0f), 0x7E); /* the tie goes to the even 448 */
    assert_int_equal(gpu_fp8_e4m3(1e30f), 0x7E);
    assert_int_equal(gpu_fp8_e4m3(-INFINITY), 0xFE);
    assert_int_equal(gpu_fp8_e4m3(NAN), 0x7F);
    assert_int_equal(gpu_fp8_e4m3(1.0f), 0x38);
    assert_int_equal(gpu_fp8_e4m3(0x1p-9f), 0x01);  /* smallest subnormal */
    assert_int_equal(gpu_fp8_e4m3(0x1p-10f), 0x00); /* its half: tie to even 0 */
    assert_int_equal(gpu_fp8_e4m3(0x1.8p-9f), 0x02);
    assert_int_equal(gpu_fp8_e4m3(-0.0f), 0x80);
    for (int c = 0; c < 256; c++) { /* every finite code decodes and encodes back */
        if ((c & 0x7F) == 0x7F) continue;
        assert_int_equal(gpu_fp8_e4m3(gpu_fp8_e4m3_float((uint8_t)c)), c);
    }
    /* Floats spread over every exponent, and each midpoint between codes +- 1 ulp. */
    for (uint64_t b = 0; b < (1ull << 32); b += 40961) {
        float x = bits_float((uint32_t)b);
        if (fabsf(x) > 1e4f && !isinf(x)) continue; /* the search saturates these alike */
        assert_int_equal(gpu_fp8_e4m3(x), e4m3_by_search(x));
    }
    for (int c = 0; c < 0x7E; c++) {
        float mid = (gpu_fp8_e4m3_float((uint8_t)c) + gpu_fp8_e4m3_float((uint8_t)(c + 1))) / 2;
        for (int s = -1; s <= 1; s++) {
            float x = s ? nextafterf(mid, s * INFINITY) : mid;
            assert_int_equal(gpu_fp8_e4m3(x), e4m3_by_search(x));
            assert_int_equal(gpu_fp8_e4m3(-x), e4m3_by_search(-x));
        }
    }
}

/* CUDA's conversion, over a stride of all 2^32 floats and every midpoint neighbourhood. */
static void test_e4m3_matches_cuda(void **state) {
    (void)state;
#ifdef RECLASS_HAVE_CUDA
    long n = 0;
    for (uint64_t b = 0; b < (1ull << 32); b += 257) {
        float x = bits_float((uint32_t)b);
        uint8_t want = (uint8_t)__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
        if (gpu_fp8_e4m3(x) != want)
            fail_msg("%a (0x%08x): %02x, CUDA %02x", (double)x, (unsigned)b, gpu_fp8_e4m3(x), want);
        n++;
    }
    for (int c = 0; c < 0x7E; c++) {
        float mid = (gpu_fp8_e4m3_float((uint8_t)c) + gpu_fp8_e4m3_float((uint8_t)(c + 1))) / 2;
        for (int s = -4; s <= 4; s++) {
            float x = mid;
            for (int k = 0; k < abs(s); k++)
                x = nextafterf(x, s * INFINITY);
            assert_int_equal(gpu_fp8_e4m3(x),
                             (uint8_t)__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
            n++;
        }
    }
    printf("e4m3: %ld floats as CUDA converts them\n", n);
#else
    skip();
#endif
}

/* A row's codes are under its own amax: the largest lands on 448, the scale undoes it. */
static void test_quantize_row(void **state) {
    (void)state;
    float x[64], y[64];
    uint8_t q[64];
    for (int i = 0; i < 64; i++)
        x[i] = sinf((float)i * 0.7f) * (i == 5 ? 9.0f : 1.0f);
    float s = gpu_fp8_quantize_row(x, 64, q);
    assert_true(fabsf(s - 9.0f * fabsf(sinf(3.5f)) / 448.0f) < 1e-6f);
    assert_int_equal(q[5] & 0x7F, 0x7E);
    gpu_fp8_fake_row(x, 64, y);
    for (int i = 0; i < 64; i++) {
        assert_true(y[i] == gpu_fp8_e4m3_float(q[i]) * s);
        assert_true(fabsf(y[i] - x[i]) <= fabsf(x[i]) / 16 + 0x1p-9f * s);
    }
    float z[8] = {0}, zf[8];
    gpu_fp8_fake_row(z, 8, zf);
    for (int i = 0; i < 8; i++)
        assert_true(zf[i] == 0.0f);
}

/* gpu_fp8_norm_row (the sequence the CUDA LayerNorm before an FP8 linear follows bit for bit,
 * test_gpu_fp8): a LayerNorm, within a few fp32 ulps of one computed in double, with and without
 * the residual, for rows whose lanes hold one to four chunks and rows where some lanes hold
 * none; in place too. */
static void test_norm_row(void **state) {
    (void)state;
    static const int Hs[] = {64, 264, 768, 1024};
    float x[1024], r[1024], g[1024], b[1024], y[1024], z[1024];
    for (size_t t = 0; t < sizeof Hs / sizeof Hs[0]; t++) {
        const int H = Hs[t];
        for (int i = 0; i < H; i++) {
            x[i] = sinf(0.37f * (float)i) * (i % 31 == 7 ? 12.0f : 1.5f) + 0.25f;
            r[i] = cosf(0.11f * (float)i);
            g[i] = 0.8f + 0.01f * (float)(i % 40);
            b[i] = 0.05f * (float)((i % 9) - 4);
        }
        for (int with_res = 0; with_res < 2; with_res++) {
            gpu_fp8_norm_row(x, with_res ? r : NULL, g, b, H, 1e-12f, y);
            double mean = 0, var = 0;
            for (int i = 0; i < H; i++)
                mean += (double)x[i] + (with_res ? (double)r[i] : 0);
            mean /= H;
            for (int i = 0; i < H; i++) {
                const double d = (double)x[i] + (with_res ? (double)r[i] : 0) - mean;
                var += d * d;
            }
            const double rstd = 1.0 / sqrt(var / H + 1e-12);
            for (int i = 0; i < H; i++) {
                const double v = (double)x[i] + (with_res ? (double)r[i] : 0);
                const double want = (v - mean) * rstd * g[i] + b[i];
                if (fabs(y[i] - want) > 4e-6 * (fabs(want) + 1.0))
                    fail_msg("H %d res %d [%d]: %.9g, double %.9g", H, with_res, i, (double)y[i],
                             want);
            }
            if (with_res) continue;
            memcpy(z, x, sizeof(float) * (size_t)H); /* in place: the same bits */
            gpu_fp8_norm_row(z, NULL, g, b, H, 1e-12f, z);
            assert_memory_equal(z, y, sizeof(float) * (size_t)H);
        }
    }
}

/* The static scale of an FFN-out input (gpu_fp8_act_bound_scale): a power of two whose 448 bounds
 * GELU(LN(x) W^T + b) for any row x, here for rows made to hit the bound's worst cases (a row
 * along a weight row, a row with one huge element), and the values under it are
 * e4m3(v / s) * s with v / s exact. */
static void test_static_scale(void **state) {
    (void)state;
    enum { H = 64, N = 48 };
    float g[H], b[H], w[N * H], bias[N], x[H], y[H], z[N], f[N];
    for (int i = 0; i < H; i++)
        g[i] = 0.5f + 0.03f * (float)(i % 17), b[i] = 0.1f * sinf((float)i);
    for (int i = 0; i < N * H; i++)
        w[i] = 0.2f * cosf(0.37f * (float)i);
    for (int n = 0; n < N; n++)
        bias[n] = 0.05f * (float)(n % 5);
    const float s = gpu_fp8_act_bound_scale(g, b, H, w, bias, N);
    int e;
    assert_true(frexpf(s, &e) == 0.5f);
    assert_true(gpu_fp8_pow2_inv(s) * s == 1.0f);
    float worst = 0;
    for (int t = 0; t < N + 1; t++) {
        for (int i = 0; i < H; i++) /* row t along weight row t; the last one spiked */
            x[i] = t < N ? w[t * H + i] : (i == 3 ? 100.0f : 0.01f * (float)i);
        gpu_fp8_norm_row(x, NULL, g, b, H, 1e-12f, y);
        for (int n = 0; n < N; n++) {
            double acc = bias[n];
            for (int i = 0; i < H; i++)
                acc += (double)y[i] * w[n * H + i];
            z[n] = (float)(0.5 * acc * (1.0 + erf(acc / sqrt(2.0))));
            worst = fmaxf(worst, fabsf(z[n]));
        }
        gpu_fp8_fake_row_static(z, N, s, f);
        for (int n = 0; n < N; n++) {
            assert_true(f[n] == gpu_fp8_e4m3_float(gpu_fp8_e4m3(z[n] / s)) * s);
            assert_true(fabsf(f[n] - z[n]) <= fabsf(z[n]) / 16 + 0x1p-10f * s);
        }
    }
    assert_true(worst <= 448.0f * s);
    printf("static scale %g: bound 448 s = %g, largest |GELU| of the rows %g\n", (double)s,
           448.0 * s, (double)worst);
}

/* Agreement with HF fp32 of the demo model at fp8 on one golden set. */
static void gate(const char *set, double min_agree) {
    common_err_t err;
    gpu_model_t *m = NULL;
    if (gpu_model_load(RECLASS_DEMO_MODEL, &m, &err) != 0) fail_msg("load: %s", err.message);
    fg_set_t s;
    if (fg_load(RECLASS_FIXTURES, set, &s, &err) != 0) fail_msg("%s", err.message);
    const gpu_backend_ops_t *ops = gpu_backend_find("cpu", &err);
    assert_non_null(ops);
    gpu_backend_opts_t o = {.token_budget = 8192, .precision = "fp8"};
    float *lg = malloc(sizeof(float) * (size_t)s.n * (size_t)m->cfg.num_labels);
    assert_non_null(lg);
    if (fg_run(ops, m, &o, &s, lg, &err) != 0) fail_msg("%s", err.message);
    fg_score_t sc = fg_compare(m, &s, lg);
    double agree = 100.0 * sc.agree / sc.rows;
    printf("fp8 %s: top-1 agreement with HF fp32 %d/%d = %.2f%% (gate %.1f%%), max |delta "
           "logit| %.3f over %d rows\n",
           set, sc.agree, sc.rows, agree, min_agree, sc.max_delta, sc.logit_rows);
    assert_true(agree >= min_agree);
    free(lg);
    fg_free(&s);
    gpu_model_free(m);
}

static void test_gate_clinc150(void **state) {
    (void)state;
    gate("clinc150_test", 99.5);
}

static void test_gate_cfpb_long(void **state) {
    (void)state;
    gate("cfpb_long", 99.0);
}

static void test_plan_text(void **state) {
    (void)state;
    char buf[1024];
    common_err_t err;
    gpu_model_t *m = NULL;
    if (gpu_model_load(RECLASS_DEMO_MODEL, &m, &err) != 0) fail_msg("load: %s", err.message);
    printf("%s\n", gpu_fp8_plan_text(&m->cfg, buf, sizeof buf));
    assert_non_null(strstr(buf, "per-token"));
    double share;
    int n = gpu_fp8_count(&m->cfg, &share);
    assert_true(n >= 0 && n <= m->cfg.layers * GPU_FP8_POINTS && share >= 0 && share <= 1);
    gpu_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_e4m3_values),    cmocka_unit_test(test_e4m3_matches_cuda),
        cmocka_unit_test(test_quantize_row),   cmocka_unit_test(test_plan_text),
        cmocka_unit_test(test_norm_row),       cmocka_unit_test(test_gate_clinc150),
        cmocka_unit_test(test_gate_cfpb_long), cmocka_unit_test(test_static_scale),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
