/* Parity of each CUDA kernel against the fp32 CPU reference ops (tests/lib/ref_ops.h), fp16 and
 * bf16, on random inputs and random packed lengths. Outputs are NaN-poisoned before each
 * kernel run (tests/lib/cuda_test_api.h), so an element the kernel forgets fails the check.
 * Without a GPU (or without CUDA in the build) the test reports SKIPPED (exit 77). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/model/model.h"
#include "gpu/cpu/cpu_backend.h"
#include "tests/lib/ref_ops.h"

#ifndef RECLASS_HAVE_CUDA
int main(void) {
    printf("SKIP: built without CUDA\n");
    return 77;
}
#else
#include "gpu/cuda/cuda_backend.h"
#include "tests/lib/cuda_test_api.h"
#include "tests/lib/cuda_test_modern.h"
#include "tests/lib/ref_modern.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd_u32(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static float rnd_uniform(void) {
    return ((float)(rnd_u32() & 0xFFFFFF) + 0.5f) / 16777216.0f;
}
static float rnd_normal(void) {
    return sqrtf(-2.f * logf(rnd_uniform())) * cosf(6.2831853f * rnd_uniform());
}
static float *rnd_array(size_t n, float scale) {
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        x[i] = rnd_normal() * scale;
    return x;
}

static int failures = 0;

/* ||out - ref|| / ||ref||; any NaN or Inf fails. */
static void check(const char *what, const char *prec, const float *out, const float *ref, size_t n,
                  double bound) {
    double num = 0, den = 0, maxd = 0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(out[i])) {
            bad++;
            continue;
        }
        double d = (double)out[i] - ref[i];
        num += d * d, den += (double)ref[i] * ref[i];
        if (fabs(d) > maxd) maxd = fabs(d);
    }
    double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    int ok = bad == 0 && rel <= bound;
    printf("%-4s %-5s %-34s n=%-9zu rel=%.2e max|d|=%.2e nonfinite=%zu bound=%.1e %s\n",
           ok ? "ok" : "FAIL", prec, what, n, rel, maxd, bad, bound, ok ? "" : "<--");
    if (!ok) failures++;
}

/* n_seqs random lengths in 1..maxlen with the edges (1, 63, 64, 65, 128, maxlen) mixed in. */
static int32_t *rnd_cu(int n_seqs, int maxlen, int *n_tokens) {
    int32_t *cu = malloc((size_t)(n_seqs + 1) * sizeof(int32_t));
    static const int edges[] = {1, 63, 64, 65, 128, 129};
    cu[0] = 0;
    for (int s = 0; s < n_seqs; s++) {
        int len = s < 6 ? edges[s] : 1 + (int)(rnd_u32() % (uint32_t)maxlen);
        if (s == 6) len = maxlen;
        if (len > maxlen) len = maxlen;
        cu[s + 1] = cu[s] + len;
    }
    *n_tokens = cu[n_seqs];
    return cu;
}

static double bound_for(const char *prec, double fp16, double bf16) {
    return strcmp(prec, "bf16") == 0 ? bf16 : fp16;
}

static int test_linear(const char *prec, int n, int in, int out, int gelu, int with_res) {
    float *x = rnd_array((size_t)n * in, 1.f), *w = rnd_array((size_t)out * in, 0.05f);
    float *b = rnd_array((size_t)out, 0.5f);
    float *r = with_res ? rnd_array((size_t)n * out, 1.f) : NULL;
    if (r) gpu_cuda_test_round(prec, r, (size_t)n * out);
    gpu_cuda_test_round(prec, x, (size_t)n * in);
    gpu_cuda_test_round(prec, w, (size_t)out * in);
    gpu_cuda_test_round(prec, b, (size_t)out);
    float *ref = malloc((size_t)n * out * sizeof(float)), *got = malloc((size_t)n * out * 4);
    gpu_ref_linear(x, w, b, n, in, out, ref);
    if (gelu) gpu_ref_gelu(ref, (size_t)n * out);
    if (r)
        for (size_t i = 0; i < (size_t)n * out; i++)
            ref[i] += r[i];
    int rc = gpu_cuda_test_linear(prec, x, w, b, r, n, in, out, gelu, got);
    char what[96];
    snprintf(what, sizeof(what), "linear%s%s %dx%dx%d", gelu ? "+gelu" : "", r ? "+residual" : "",
             n, out, in);
    if (rc != 0) {
        printf("FAIL %s %s: CUDA error\n", prec, what);
        failures++;
    } else {
        check(what, prec, got, ref, (size_t)n * out, bound_for(prec, 4e-3, 2e-2));
    }
    free(x), free(w), free(b), free(r), free(ref), free(got);
    return 0;
}

static void test_add_ln(const char *prec, int n, int H) {
    float *x = rnd_array((size_t)n * H, 1.f), *r = rnd_array((size_t)n * H, 2.f);
    float *g = rnd_array(H, 0.2f), *b = rnd_array(H, 0.2f);
    for (int i = 0; i < H; i++)
        g[i] += 1.f;
    gpu_cuda_test_round(prec, x, (size_t)n * H);
    gpu_cuda_test_round(prec, r, (size_t)n * H);
    float *got = malloc((size_t)n * H * 4);
    int rc = gpu_cuda_test_add_ln(prec, x, r, g, b, n, H, 1e-12f, got);
    gpu_ref_add_ln(x, r, g, b, n, H, 1e-12f); /* x becomes the reference */
    char what[96];
    snprintf(what, sizeof(what), "add+layernorm %dx%d", n, H);
    if (rc != 0) {
        printf("FAIL %s %s: CUDA error\n", prec, what);
        failures++;
    } else {
        check(what, prec, got, x, (size_t)n * H, bound_for(prec, 3e-3, 1.5e-2));
    }
    free(x), free(r), free(g), free(b), free(got);
}

/* Random packed sequences, their q | k | v rows (n, 3H) rounded to the storage type, and the
 * reference attention output (n, H). */
typedef struct {
    int32_t *cu;
    int n, H, ld;
    float *qkv, *ref;
} att_case_t;

static void att_case_init(att_case_t *c, const char *prec, int heads, int n_seqs, int maxlen,
                          float scale) {
    c->H = heads * 64, c->ld = 3 * c->H;
    c->cu = rnd_cu(n_seqs, maxlen, &c->n);
    c->qkv = rnd_array((size_t)c->n * c->ld, scale);
    gpu_cuda_test_round(prec, c->qkv, (size_t)c->n * c->ld);
    c->ref = malloc((size_t)c->n * c->H * 4);
    gpu_ref_attention(c->qkv, c->qkv + c->H, c->qkv + 2 * c->H, c->ld, c->cu, n_seqs, heads, 64,
                      c->ref);
}
static void att_case_free(att_case_t *c) {
    free(c->cu), free(c->qkv), free(c->ref);
}

/* kernel: GPU_CUDA_TEST_ATT_* (the automatic choice, mma.sync or wgmma). */
static void test_attention(const char *prec, int kernel, int heads, int n_seqs, int maxlen,
                           float scale) {
    static const char *const kname[] = {"auto", "mma", "wgmma"};
    att_case_t c;
    att_case_init(&c, prec, heads, n_seqs, maxlen, scale);
    float *got = malloc((size_t)c.n * c.H * 4);
    int rc = gpu_cuda_test_attention(prec, kernel, c.qkv, c.qkv + c.H, c.qkv + 2 * c.H, c.ld, c.cu,
                                     n_seqs, heads, 64, got);
    char what[96];
    snprintf(what, sizeof(what), "attention %s h%d seqs%d tok%d x%.1f", kname[kernel], heads,
             n_seqs, c.n, scale);
    printf("..   %-5s %s\n", prec, what);
    if (rc != 0) {
        printf("FAIL %s %s: CUDA error\n", prec, what);
        failures++;
    } else {
        check(what, prec, got, c.ref, (size_t)c.n * c.H, bound_for(prec, 5e-3, 2.5e-2));
    }
    free(got);
    att_case_free(&c);
}

/* The last layer's first-query attention against the [CLS] rows of the full reference. */
static void test_attention_first(const char *prec, int heads, int n_seqs, int maxlen, float scale) {
    att_case_t c;
    att_case_init(&c, prec, heads, n_seqs, maxlen, scale);
    float *refc = malloc((size_t)n_seqs * c.H * 4), *got = malloc((size_t)n_seqs * c.H * 4);
    for (int s = 0; s < n_seqs; s++)
        memcpy(refc + (size_t)s * c.H, c.ref + (size_t)c.cu[s] * c.H, (size_t)c.H * 4);
    int rc = gpu_cuda_test_attention_first(prec, c.qkv, c.qkv + c.H, c.qkv + 2 * c.H, c.ld, c.cu,
                                           n_seqs, heads, got);
    char what[96];
    snprintf(what, sizeof(what), "attention first query h%d seqs%d tok%d x%.1f", heads, n_seqs, c.n,
             scale);
    if (rc != 0) {
        printf("FAIL %s %s: CUDA error\n", prec, what);
        failures++;
    } else {
        check(what, prec, got, refc, (size_t)n_seqs * c.H, bound_for(prec, 5e-3, 2.5e-2));
    }
    free(refc), free(got);
    att_case_free(&c);
}

static void test_model_ops(const char *prec, const char *geometry, int labels) {
    gpu_model_t *m = NULL;
    common_err_t err;
    if (gpu_model_init_random(geometry, labels, 7, &m, &err) != 0) {
        printf("FAIL random model: %s\n", err.message);
        failures++;
        return;
    }
    /* The kernels run on storage-type weights: give the reference the same ones. */
    gpu_cuda_test_round(prec, m->blob, m->blob_floats);
    int H = m->cfg.hidden, L = m->cfg.num_labels, n, n_seqs = 37;
    int32_t *cu = rnd_cu(n_seqs, 300, &n);
    int32_t *ids = malloc((size_t)n * 4);
    for (int i = 0; i < n; i++)
        ids[i] = (int32_t)(rnd_u32() % (uint32_t)m->cfg.vocab_size);
    float *ref = malloc((size_t)n * H * 4), *got = malloc((size_t)n * H * 4);
    gpu_ref_embed_ln(m, ids, cu, n_seqs, ref);
    char what[96];
    snprintf(what, sizeof(what), "embed+layernorm %s tok%d", geometry, n);
    if (gpu_cuda_test_embed_ln(m, prec, ids, cu, n_seqs, got) != 0) {
        printf("FAIL %s %s: CUDA error\n", prec, what);
        failures++;
    } else {
        check(what, prec, got, ref, (size_t)n * H, bound_for(prec, 3e-3, 1.5e-2));
    }
    float *hidden = rnd_array((size_t)n * H, 1.f);
    gpu_cuda_test_round(prec, hidden, (size_t)n * H);
    float *lref = malloc((size_t)n_seqs * L * 4), *lgot = malloc((size_t)n_seqs * L * 4);
    gpu_ref_pool_classify(m, hidden, cu, n_seqs, lref);
    snprintf(what, sizeof(what), "pooler+classifier %s seqs%d", geometry, n_seqs);
    if (gpu_cuda_test_pool_classify(m, prec, hidden, cu, n_seqs, lgot) != 0) {
        printf("FAIL %s %s: CUDA error\n", prec, what);
        failures++;
    } else {
        check(what, prec, lgot, lref, (size_t)n_seqs * L, bound_for(prec, 3e-3, 1.5e-2));
    }
    free(cu), free(ids), free(ref), free(got), free(hidden), free(lref), free(lgot);
    gpu_model_free(m);
}

static void report(const char *prec, const char *what, int rc, const float *got, const float *ref,
                   size_t n, double bound) {
    if (rc != 0) {
        printf("FAIL %s %s: CUDA error\n", prec, what);
        failures++;
    } else {
        check(what, prec, got, ref, n, bound);
    }
}

/* (n) token positions for RoPE: 0..7 first, then any up to 8,191 (the kernels index them by
 * token, so they need not rise). */
static int32_t *rnd_positions(int n) {
    int32_t *pos = malloc((size_t)n * 4);
    for (int t = 0; t < n; t++)
        pos[t] = t < 8 ? t : (int)(rnd_u32() % 8192u);
    return pos;
}

/* RoPE on Q and K of (n, 3H) rows at positions up to 8,191, the global and the local theta;
 * V's columns must come back untouched. */
static void test_rope(const char *prec, float theta) {
    const int heads = 12, hd = 64, H = heads * hd, ld = 3 * H, n = 1 + (int)(rnd_u32() % 400);
    float *x = rnd_array((size_t)n * ld, 1.f), *ref = malloc((size_t)n * ld * 4);
    int32_t *pos = rnd_positions(n);
    gpu_cuda_test_round(prec, x, (size_t)n * ld);
    memcpy(ref, x, (size_t)n * ld * 4);
    gpu_ref_rope(ref, ld, H, pos, n, heads, hd, theta);
    char what[96];
    snprintf(what, sizeof(what), "rope theta %.0f tok%d", theta, n);
    report(prec, what, gpu_cuda_test_rope(prec, x, ld, H, pos, n, heads, hd, theta), x, ref,
           (size_t)n * ld, bound_for(prec, 2e-3, 1e-2));
    free(x), free(ref), free(pos);
}

/* Sliding-window attention (ModernBERT's local layers: |i - j| <= 64) on packed sequences
 * whose lengths straddle the tile and window edges. */
static void test_attention_window(const char *prec, int heads, int n_seqs, int maxlen, int window,
                                  float scale) {
    const int H = heads * 64, ld = 3 * H;
    int n;
    int32_t *cu = rnd_cu(n_seqs, maxlen, &n);
    float *qkv = rnd_array((size_t)n * ld, scale), *ref = malloc((size_t)n * H * 4);
    float *got = malloc((size_t)n * H * 4);
    gpu_cuda_test_round(prec, qkv, (size_t)n * ld);
    gpu_ref_attention_opts(qkv, qkv + H, qkv + 2 * H, ld, cu, n_seqs, heads, 64, 0.125f, window,
                           NULL, NULL, NULL, 0, 0, ref);
    for (int kernel = GPU_CUDA_TEST_ATT_MMA; kernel <= GPU_CUDA_TEST_ATT_WGMMA; kernel++) {
        if (kernel == GPU_CUDA_TEST_ATT_WGMMA && !gpu_cuda_test_has_wgmma()) continue;
        char what[96];
        snprintf(what, sizeof(what), "attention window %d h%d seqs%d tok%d %s", window, heads,
                 n_seqs, n, kernel == GPU_CUDA_TEST_ATT_WGMMA ? "wgmma" : "mma.sync");
        int rc =
            gpu_cuda_test_attention_opts(prec, kernel, qkv, qkv + H, qkv + 2 * H, ld, cu, n_seqs,
                                         heads, 0.125f, window, NULL, NULL, NULL, 0, 0, got);
        report(prec, what, rc, got, ref, (size_t)n * H, bound_for(prec, 5e-3, 2.5e-2));
    }
    free(cu), free(qkv), free(ref), free(got);
}

/* RoPE attention as the graph runs it: the kernels get Q unturned and K turned in place, and
 * turn each query as they load it; against the reference on turned copies (rounded to the
 * storage type, as the pass stores them), and bit for bit against the same kernel on Q turned
 * in place. Positions up to 8,191, one per token at random (the kernels index them by token). */
static void test_attention_rope(const char *prec, float theta, int window, int heads, int n_seqs,
                                int maxlen, float scale) {
    const int hd = 64, H = heads * hd, ld = 3 * H;
    int n;
    int32_t *cu = rnd_cu(n_seqs, maxlen, &n);
    float *qkv = rnd_array((size_t)n * ld, scale), *turned = malloc((size_t)n * ld * 4);
    float *ref = malloc((size_t)n * H * 4), *got = malloc((size_t)n * H * 4);
    float *inplace = malloc((size_t)n * H * 4);
    int32_t *pos = rnd_positions(n);
    gpu_cuda_test_round(prec, qkv, (size_t)n * ld);
    memcpy(turned, qkv, (size_t)n * ld * 4);
    gpu_ref_rope(turned, ld, H, pos, n, heads, hd, theta);
    gpu_cuda_test_round(prec, turned, (size_t)n * ld);
    gpu_ref_attention_opts(turned, turned + H, turned + 2 * H, ld, cu, n_seqs, heads, hd, 0.125f,
                           window, NULL, NULL, NULL, 0, 0, ref);
    for (int kernel = GPU_CUDA_TEST_ATT_MMA; kernel <= GPU_CUDA_TEST_ATT_WGMMA; kernel++) {
        if (kernel == GPU_CUDA_TEST_ATT_WGMMA && !gpu_cuda_test_has_wgmma()) continue;
        char what[96];
        snprintf(what, sizeof(what), "attention rope %.0f window %d h%d seqs%d tok%d %s", theta,
                 window, heads, n_seqs, n,
                 kernel == GPU_CUDA_TEST_ATT_WGMMA ? "wgmma" : "mma.sync");
        int rc = gpu_cuda_test_attention_rope(prec, kernel, qkv, qkv + H, qkv + 2 * H, ld, cu,
                                              n_seqs, heads, window, pos, theta, got, inplace);
        report(prec, what, rc, got, ref, (size_t)n * H, bound_for(prec, 5e-3, 2.5e-2));
        if (rc != 0) continue;
        size_t diff = 0;
        for (size_t i = 0; i < (size_t)n * H; i++)
            diff += memcmp(&got[i], &inplace[i], sizeof(float)) != 0;
        printf("%-4s %-5s %-34s differ=%zu of %zu %s\n", diff ? "FAIL" : "ok", prec,
               "  query turned in the kernel = in place", diff, (size_t)n * H, diff ? "<--" : "");
        if (diff) failures++;
    }
    free(cu), free(qkv), free(turned), free(ref), free(got), free(inplace), free(pos);
}

/* DeBERTa-v3's disentangled attention: c2p and p2c from the relative-scores GEMM (itself
 * checked first), log buckets of deberta-v3-base (256 buckets, 512 positions, span 256). */
static void test_attention_disentangled(const char *prec, int heads, int n_seqs, int maxlen) {
    const int hd = 64, H = heads * hd, ld = 3 * H, R = 512;
    gpu_op_t a = {.rel_span = 256, .rel_buckets = 256, .rel_max_pos = 512};
    int n;
    int32_t *cu = rnd_cu(n_seqs, maxlen, &n);
    float *qkv = rnd_array((size_t)n * ld, 1.f), *pk = rnd_array((size_t)R * H, 1.f);
    float *pq = rnd_array((size_t)R * H, 1.f);
    size_t nb = (size_t)n * heads * R;
    float *c2p = malloc(nb * 4), *p2c = malloc(nb * 4), *got = malloc(nb * 4);
    gpu_cuda_test_round(prec, qkv, (size_t)n * ld);
    gpu_cuda_test_round(prec, pk, (size_t)R * H);
    gpu_cuda_test_round(prec, pq, (size_t)R * H);
    gpu_ref_rel_scores(qkv, ld, n, pk, R, heads, hd, c2p);
    gpu_ref_rel_scores(qkv + H, ld, n, pq, R, heads, hd, p2c);
    char what[96];
    snprintf(what, sizeof(what), "rel scores (c2p) h%d tok%d R%d", heads, n, R);
    report(prec, what, gpu_cuda_test_rel_scores(prec, qkv, ld, n, pk, R, heads, hd, got), got, c2p,
           nb, bound_for(prec, 4e-3, 2e-2));
    gpu_cuda_test_round(prec, c2p, nb); /* the kernel reads them in the storage type */
    gpu_cuda_test_round(prec, p2c, nb);
    const int mid = maxlen - 1;
    int32_t *rrow = malloc(sizeof(int32_t) * (size_t)(2 * mid + 1));
    for (int d = -mid; d <= mid; d++)
        rrow[d + mid] = gpu_op_rel_row(&a, d);
    const float scale = 1.0f / sqrtf((float)hd * 3.0f);
    float *ref = malloc((size_t)n * H * 4), *out = malloc((size_t)n * H * 4);
    gpu_ref_attention_opts(qkv, qkv + H, qkv + 2 * H, ld, cu, n_seqs, heads, hd, scale, -1, c2p,
                           p2c, rrow, mid, R, ref);
    snprintf(what, sizeof(what), "attention c2p+p2c h%d seqs%d tok%d", heads, n_seqs, n);
    int rc =
        gpu_cuda_test_attention_opts(prec, GPU_CUDA_TEST_ATT_AUTO, qkv, qkv + H, qkv + 2 * H, ld,
                                     cu, n_seqs, heads, scale, -1, c2p, p2c, rrow, mid, R, out);
    report(prec, what, rc, out, ref, (size_t)n * H, bound_for(prec, 5e-3, 2.5e-2));
    free(cu), free(qkv), free(pk), free(pq), free(c2p), free(p2c), free(got), free(rrow);
    free(ref), free(out);
}

/* GeGLU over (n, 2I) rows: act(input) * gate in the first I columns. */
static void test_geglu(const char *prec, int n, int I, gpu_act_t act) {
    float *x = rnd_array((size_t)n * 2 * I, 1.5f), *ref = malloc((size_t)n * I * 4);
    float *got = malloc((size_t)n * I * 4);
    gpu_cuda_test_round(prec, x, (size_t)n * 2 * I);
    for (int t = 0; t < n; t++)
        memcpy(ref + (size_t)t * I, x + (size_t)t * 2 * I, (size_t)I * 4);
    gpu_ref_act(ref, (size_t)n * I, act);
    for (int t = 0; t < n; t++)
        for (int i = 0; i < I; i++)
            ref[(size_t)t * I + i] *= x[(size_t)t * 2 * I + I + i];
    int rc = gpu_cuda_test_geglu(prec, x, n, I, act);
    for (int t = 0; t < n; t++)
        memcpy(got + (size_t)t * I, x + (size_t)t * 2 * I, (size_t)I * 4);
    char what[96];
    snprintf(what, sizeof(what), "geglu %s %dx%d", gpu_model_act_name(act), n, I);
    report(prec, what, rc, got, ref, (size_t)n * I, bound_for(prec, 3e-3, 1.5e-2));
    free(x), free(ref), free(got);
}

/* Mean pooling of packed sequences (one of a single token among them). */
static void test_mean_pool(const char *prec, int n_seqs, int H) {
    int n;
    int32_t *cu = rnd_cu(n_seqs, 300, &n);
    float *x = rnd_array((size_t)n * H, 1.f), *ref = calloc((size_t)n_seqs * H, 4);
    float *got = malloc((size_t)n_seqs * H * 4);
    gpu_cuda_test_round(prec, x, (size_t)n * H);
    for (int s = 0; s < n_seqs; s++) {
        for (int t = cu[s]; t < cu[s + 1]; t++)
            for (int i = 0; i < H; i++)
                ref[(size_t)s * H + i] += x[(size_t)t * H + i];
        for (int i = 0; i < H; i++)
            ref[(size_t)s * H + i] /= (float)(cu[s + 1] - cu[s]);
    }
    char what[96];
    snprintf(what, sizeof(what), "mean pool seqs%d tok%d", n_seqs, n);
    report(prec, what, gpu_cuda_test_mean_pool(prec, x, cu, n_seqs, H, got), got, ref,
           (size_t)n_seqs * H, 1e-5);
    free(cu), free(x), free(ref), free(got);
}

/* Every op ModernBERT and DeBERTa-v3 add, at one precision. */
static void test_modern_ops(const char *prec, int quick) {
    test_rope(prec, 160000.f);
    test_rope(prec, 10000.f);
    /* ModernBERT's global (every key) and local (window 64) layers */
    test_attention_rope(prec, 160000.f, -1, quick ? 2 : 12, 3 + (int)(rnd_u32() % 20),
                        quick ? 300 : 700, 1.f);
    test_attention_rope(prec, 10000.f, 64, quick ? 2 : 12, 3 + (int)(rnd_u32() % 20),
                        quick ? 300 : 700, 1.f);
    test_attention_rope(prec, 160000.f, -1, 4, 8, 520, 3.f); /* peaked */
    test_attention_window(prec, quick ? 2 : 12, 3 + (int)(rnd_u32() % 20), quick ? 300 : 700, 64,
                          1.f);
    test_attention_window(prec, 4, 8, 520, 64, 3.f); /* peaked: rows whose window skips a tile */
    test_attention_window(prec, 3, 12, 100, 5, 2.f); /* a narrow window inside one key tile */
    test_attention_disentangled(prec, quick ? 2 : 12, 3 + (int)(rnd_u32() % 10), quick ? 200 : 520);
    test_geglu(prec, 1 + (int)(rnd_u32() % 300), 1152, GPU_ACT_GELU);
    test_geglu(prec, 17, 64, GPU_ACT_GELU_TANH);
    test_mean_pool(prec, 3 + (int)(rnd_u32() % 40), 768);
}

int main(int argc, char **argv) {
    /* "quick": small shapes only (for compute-sanitizer, which is slow) */
    int quick = argc > 1 && strcmp(argv[1], "quick") == 0;
    /* "wgmma": the Hopper attention kernels alone (descriptor debugging on the device) */
    int wg_only = argc > 1 && strcmp(argv[1], "wgmma") == 0;
    setvbuf(stdout, NULL, _IONBF, 0); /* every line out before a crash, if one comes */
    gpu_cpu_blas_init();              /* OpenBLAS's core choice fixed up, as the CPU backend does */
    printf("OpenBLAS core: %s\n", gpu_cpu_blas_core());
    if (gpu_cuda_device_count() == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    const char *precs[] = {"fp16", "bf16"};
    for (int p = 0; p < 2; p++) {
        const char *prec = precs[p];
        for (int rep = 0; rep < (wg_only ? 0 : quick ? 1 : 2); rep++) { /* fresh inputs each */
            int n = 1 + (int)(rnd_u32() % (quick ? 100 : 700));
            test_linear(prec, n, 768, 2304, 0, 0);
            test_linear(prec, n, 768, 3072, 1, 0);
            test_linear(prec, n, 3072, 768, 0, 1);
            test_linear(prec, n, 768, 768, 0, 1);
            test_linear(prec, 1 + (int)(rnd_u32() % 64), 256, 1024, 1, 0);
            test_add_ln(prec, 1 + (int)(rnd_u32() % 500), 768);
            test_add_ln(prec, 1 + (int)(rnd_u32() % 500), 256);
            test_attention(prec, GPU_CUDA_TEST_ATT_AUTO, quick ? 2 : 12,
                           3 + (int)(rnd_u32() % (quick ? 6 : 30)), quick ? 200 : 512, 1.f);
            test_attention(prec, GPU_CUDA_TEST_ATT_AUTO, 4, 3 + (int)(rnd_u32() % 30), 200, 2.f);
            test_attention_first(prec, 12, 3 + (int)(rnd_u32() % 40), 512, 1.f);
            test_attention_first(prec, 4, 50, 33, 3.f); /* peaked, many short, one of 1 token */
        }
        /* both kernels: mma.sync (the sm_80 path), then wgmma (compute capability 9.0 only) */
        for (int k = wg_only ? GPU_CUDA_TEST_ATT_WGMMA : GPU_CUDA_TEST_ATT_MMA;
             k <= GPU_CUDA_TEST_ATT_WGMMA; k++) {
            if (k == GPU_CUDA_TEST_ATT_WGMMA && !gpu_cuda_test_has_wgmma()) {
                printf("..   %-5s attention wgmma: not compute capability 9.0, skipped\n", prec);
                continue;
            }
            test_attention(prec, k, quick ? 2 : 12, 3 + (int)(rnd_u32() % 20), quick ? 300 : 512,
                           1.f);
            test_attention(prec, k, 4, 3 + (int)(rnd_u32() % 30), 200, 2.f);
            test_attention(prec, k, 4, 8, 512, 3.f); /* peaked softmax: online max */
            test_attention(prec, k, 3, 5 + (int)(rnd_u32() % 30), 40, 2.f);
        }
        if (wg_only) continue;
        test_modern_ops(prec, quick);
        test_model_ops(prec, "bert-mini", 151);
        if (!quick) test_model_ops(prec, "bert-base", 140);
    }
    printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
    return failures ? 1 : 0;
}
#endif
