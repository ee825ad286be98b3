/* The CUDA FP8 kernels against the CPU FP8 reference (gpu/model/fp8.h): the weights' E4M3 codes
 * and scales bit for bit; the LayerNorm's 16-bit rows, codes and per-token scales (codes may
 * differ where the fp32 LayerNorm value itself differs in its last bits: at most one code step,
 * in few elements); the cuBLASLt FP8 GEMM with its bias / GELU / ReLU / residual epilogues
 * against the fp32 product of the same E4M3 values. Without a GPU (or CUDA) SKIPPED (77). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/ref_ops.h"
#include "gpu/model/fp8.h"
#include "gpu/model/model.h"

#ifndef RECLASS_HAVE_CUDA
int main(void) {
    printf("SKIP: built without CUDA\n");
    return 77;
}
#else
#include "gpu/cuda/cuda_backend.h"
#include "tests/lib/cuda_test_api.h"
#include "tests/lib/cuda_test_fp8.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float rnd_normal(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    float u = ((float)((rng >> 16) & 0xFFFFFF) + 0.5f) / 16777216.0f;
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    float v = ((float)((rng >> 16) & 0xFFFFFF) + 0.5f) / 16777216.0f;
    return sqrtf(-2.f * logf(u)) * cosf(6.2831853f * v);
}
static float *rnd(size_t n, float scale) {
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        x[i] = rnd_normal() * scale * (i % 97 == 3 ? 20.f : 1.f); /* some outliers */
    return x;
}

static int failures = 0;
static void verdict(int ok, const char *what, double got, double bound) {
    printf("%-4s %-44s %.3e (bound %.1e)\n", ok ? "ok" : "FAIL", what, got, bound);
    if (!ok) failures++;
}

static void test_quantize(int n, int k) {
    float *w = rnd((size_t)n * k, 0.05f), *s = malloc((size_t)n * 4);
    uint8_t *q = malloc((size_t)n * k), *want = malloc((size_t)k);
    long diff = 0;
    if (gpu_cuda_test_fp8_quantize(w, n, k, q, s) != 0) {
        verdict(0, "weight quantize: CUDA error", 0, 0);
    } else {
        for (int r = 0; r < n; r++) {
            float ws = gpu_fp8_quantize_row(w + (size_t)r * k, k, want);
            diff += ws != s[r];
            for (int i = 0; i < k; i++)
                diff += want[i] != q[(size_t)r * k + i];
        }
        char what[80];
        snprintf(what, sizeof what, "weight codes+scales %dx%d, mismatches", n, k);
        verdict(diff == 0, what, (double)diff, 0);
    }
    free(w), free(s), free(q), free(want);
}

static void test_ln(const char *prec, int n, int H) {
    float *x = rnd((size_t)n * H, 1.f), *r = rnd((size_t)n * H, 1.f), *g = rnd(H, 1.f),
          *b = rnd(H, 0.2f), *out = malloc((size_t)n * H * 4), *s = malloc((size_t)n * 4);
    uint8_t *q = malloc((size_t)n * H);
    gpu_cuda_test_round(prec, x, (size_t)n * H);
    gpu_cuda_test_round(prec, r, (size_t)n * H);
    if (gpu_cuda_test_fp8_add_ln(prec, x, r, g, b, n, H, 1e-12f, out, q, s) != 0) {
        verdict(0, "fp8 LayerNorm: CUDA error", 0, 0);
        goto done;
    }
    gpu_ref_add_ln(x, r, g, b, n, H, 1e-12f); /* x = the fp32 LayerNorm */
    long off = 0, far = 0;
    double maxrel = 0;
    for (int row = 0; row < n; row++) {
        const float *ref = x + (size_t)row * H;
        float y[4096];
        gpu_fp8_fake_row(ref, H, y);
        for (int i = 0; i < H; i++) {
            float got = gpu_fp8_e4m3_float(q[(size_t)row * H + i]) * s[row];
            if (got != y[i]) off++;
            if (fabsf(got - y[i]) > fabsf(y[i]) / 8 + 1e-3f * s[row]) far++;
            double d = fabs(out[(size_t)row * H + i] - ref[i]) / (fabs(ref[i]) + 1e-2);
            if (d > maxrel) maxrel = d;
        }
    }
    char what[96];
    snprintf(what, sizeof what, "%s fp8 LN %dx%d: 16-bit rows max rel", prec, n, H);
    verdict(maxrel < (strcmp(prec, "bf16") == 0 ? 1.6e-2 : 2e-3), what, maxrel,
            strcmp(prec, "bf16") == 0 ? 1.6e-2 : 2e-3);
    snprintf(what, sizeof what, "%s fp8 LN %dx%d: codes off by a step", prec, n, H);
    verdict(off <= (long)n * H / 100 && far == 0, what, (double)off / ((double)n * H), 1e-2);
done:
    free(x), free(r), free(g), free(b), free(out), free(s), free(q);
}

static void test_linear(const char *prec, int n, int in, int out, int epi, int with_res) {
    float *x = rnd((size_t)n * in, 1.f), *w = rnd((size_t)out * in, 0.05f), *b = rnd(out, 0.5f);
    float *res = with_res ? rnd((size_t)n * out, 1.f) : NULL;
    float *ref = malloc((size_t)n * out * 4), *got = malloc((size_t)n * out * 4);
    gpu_cuda_test_round(prec, b, (size_t)out);
    if (res) gpu_cuda_test_round(prec, res, (size_t)n * out);
    int rc = gpu_cuda_test_fp8_linear(prec, x, w, b, res, n, in, out, epi, got);
    for (int r = 0; r < n; r++)
        gpu_fp8_fake_row(x + (size_t)r * in, in, x + (size_t)r * in);
    for (int r = 0; r < out; r++)
        gpu_fp8_fake_row(w + (size_t)r * in, in, w + (size_t)r * in);
    gpu_ref_linear(x, w, b, n, in, out, ref);
    if (epi == 2) gpu_ref_act(ref, (size_t)n * out, GPU_ACT_GELU_TANH);
    if (epi == 3) gpu_ref_act(ref, (size_t)n * out, GPU_ACT_RELU);
    if (res)
        for (size_t i = 0; i < (size_t)n * out; i++)
            ref[i] += res[i];
    double num = 0, den = 0;
    int bad = rc != 0;
    for (size_t i = 0; !bad && i < (size_t)n * out; i++) {
        if (!isfinite(got[i])) bad = 1;
        num += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
        den += (double)ref[i] * ref[i];
    }
    double rel = bad ? INFINITY : sqrt(num / (den > 0 ? den : 1));
    const double bound = strcmp(prec, "bf16") == 0 ? 1e-2 : 2e-3; /* the 16-bit output */
    char what[96];
    snprintf(what, sizeof what, "%s fp8 linear epi %d%s %dx%dx%d rel", prec, epi, res ? "+res" : "",
             n, out, in);
    verdict(rel <= bound, what, rel, bound);
    free(x), free(w), free(b), free(res), free(ref), free(got);
}

/* bench: the FP8 GEMM against cuBLASLt fp16 (tuned, X cold) at bert-base's projections. */
static int bench(int m) {
    static const struct {
        const char *name;
        int n, k, epi8, epi16;
    } shapes[] = {{"qkv", 2304, 768, 1, 0},
                  {"attn-out + res", 768, 768, 3, 2},
                  {"ff1 + gelu", 3072, 768, 2, 1},
                  {"ff2 + res", 768, 3072, 3, 2}};
    for (int i = 0; i < 4; i++) {
        double f8 = gpu_cuda_test_fp8_gemm_bench(m, shapes[i].n, shapes[i].k, shapes[i].epi8);
        double f16 = gpu_cuda_test_gemm_bench("fp16", m, shapes[i].n, shapes[i].k, shapes[i].epi16);
        printf("gemm %-15s M %d N %d K %d: fp8 %.0f TFLOP/s, fp16 %.0f TFLOP/s (x%.2f)\n",
               shapes[i].name, m, shapes[i].n, shapes[i].k, f8, f16, f16 > 0 ? f8 / f16 : 0);
        if (f8 <= 0) failures++;
    }
    return failures ? 1 : 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (gpu_cuda_device_count() == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    if (argc > 1 && strcmp(argv[1], "bench") == 0) return bench(16384) | bench(65536);
    test_quantize(2304, 768);
    test_quantize(151, 256);
    const char *precs[] = {"fp16", "bf16"};
    for (int p = 0; p < 2; p++) {
        test_ln(precs[p], 517, 768);
        test_ln(precs[p], 33, 256);
        test_linear(precs[p], 700, 768, 2304, 1, 0);
        test_linear(precs[p], 700, 768, 3072, 2, 0);
        test_linear(precs[p], 129, 3072, 768, 1, 1);
        test_linear(precs[p], 37, 256, 1024, 3, 0);
    }
    printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
    return failures ? 1 : 0;
}
#endif
