/* The obvious fp32 encoder: one op at a time, no fusion, loops written for clarity. The
 * fast backends' tests compare them against it; the product does not link it. */
#include "tests/lib/ref_ops.h"

#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cpu/cpu_backend.h" /* gpu_cpu_blas_init */
#include "gpu/cpu/cpu_gemm_bf16.h"
#include "gpu/model/fp8.h"

/* LayerNorm of one row in place; mean and variance in double so the reference is not the
 * one that rounds. */
static void ln_row(float *x, const float *g, const float *b, int H, float eps) {
    double mean = 0, var = 0;
    for (int i = 0; i < H; i++)
        mean += x[i];
    mean /= H;
    for (int i = 0; i < H; i++)
        var += (x[i] - mean) * (x[i] - mean);
    var /= H;
    double rstd = 1.0 / sqrt(var + eps);
    for (int i = 0; i < H; i++)
        x[i] = (float)((x[i] - mean) * rstd) * g[i] + b[i];
}

void gpu_ref_embed_ln(const gpu_model_t *m, const int32_t *ids, const int32_t *cu_seqlens,
                      int n_seqs, float *out) {
    int H = m->cfg.emb_size;
    const gpu_model_weights_t *w = &m->w;
    for (int s = 0; s < n_seqs; s++) {
        for (int t = cu_seqlens[s]; t < cu_seqlens[s + 1]; t++) {
            int pos = t - cu_seqlens[s];
            float *o = out + (size_t)t * H;
            const float *we = w->word_emb + (size_t)ids[t] * H;
            const float *pe = w->pos_emb + (size_t)pos * H;
            for (int i = 0; i < H; i++)
                o[i] = we[i] + pe[i] + w->type_emb[i];
            ln_row(o, w->emb_ln_g, w->emb_ln_b, H, m->cfg.ln_eps);
        }
    }
}

void gpu_ref_linear(const float *x, const float *w, const float *b, int n, int in, int out,
                    float *y) {
    gpu_cpu_blas_init();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f, x, in, w, in, 0.0f, y,
                out);
    if (!b) return;
    for (int r = 0; r < n; r++)
        for (int c = 0; c < out; c++)
            y[(size_t)r * out + c] += b[c];
}

void gpu_ref_gelu(float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * (float)M_SQRT1_2));
}

void gpu_ref_act(float *x, size_t n, gpu_act_t act) {
    switch (act) {
    case GPU_ACT_GELU:
        gpu_ref_gelu(x, n);
        return;
    case GPU_ACT_GELU_TANH:
        for (size_t i = 0; i < n; i++) {
            double v = x[i];
            x[i] =
                (float)(0.5 * v * (1.0 + tanh(0.79788456080286536 * (v + 0.044715 * v * v * v))));
        }
        return;
    case GPU_ACT_RELU:
        for (size_t i = 0; i < n; i++)
            x[i] = x[i] > 0.0f ? x[i] : 0.0f;
        return;
    case GPU_ACT_TANH:
        for (size_t i = 0; i < n; i++)
            x[i] = tanhf(x[i]);
        return;
    }
}

void gpu_ref_add_ln(float *x, const float *res, const float *g, const float *b, int n, int H,
                    float eps) {
    for (int r = 0; r < n; r++) {
        float *row = x + (size_t)r * H;
        const float *rr = res + (size_t)r * H;
        for (int i = 0; i < H; i++)
            row[i] += rr[i];
        ln_row(row, g, b, H, eps);
    }
}

void gpu_ref_attention(const float *q, const float *k, const float *v, int ld,
                       const int32_t *cu_seqlens, int n_seqs, int heads, int head_dim, float *out) {
    int longest = 0;
    for (int s = 0; s < n_seqs; s++)
        if (cu_seqlens[s + 1] - cu_seqlens[s] > longest)
            longest = cu_seqlens[s + 1] - cu_seqlens[s];
    float *p = malloc(sizeof(float) * (size_t)(longest > 0 ? longest : 1)); /* (len) one row */
    if (!p) abort();
    float scale = 1.0f / sqrtf((float)head_dim);
    int HD = heads * head_dim;
    for (int s = 0; s < n_seqs; s++) {
        int t0 = cu_seqlens[s], len = cu_seqlens[s + 1] - t0;
        for (int h = 0; h < heads; h++) {
            int c0 = h * head_dim;
            for (int i = 0; i < len; i++) {
                const float *qi = q + (size_t)(t0 + i) * ld + c0;
                float mx = -INFINITY;
                for (int j = 0; j < len; j++) {
                    const float *kj = k + (size_t)(t0 + j) * ld + c0;
                    float d = 0;
                    for (int e = 0; e < head_dim; e++)
                        d += qi[e] * kj[e];
                    p[j] = d * scale;
                    if (p[j] > mx) mx = p[j];
                }
                double sum = 0;
                for (int j = 0; j < len; j++) {
                    p[j] = expf(p[j] - mx);
                    sum += p[j];
                }
                float *o = out + (size_t)(t0 + i) * HD + c0;
                for (int e = 0; e < head_dim; e++)
                    o[e] = 0;
                for (int j = 0; j < len; j++) {
                    const float *vj = v + (size_t)(t0 + j) * ld + c0;
                    float pj = (float)(p[j] / sum);
                    for (int e = 0; e < head_dim; e++)
                        o[e] += pj * vj[e];
                }
            }
        }
    }
    free(p);
}

void gpu_ref_pool_classify(const gpu_model_t *m, const float *hidden, const int32_t *cu_seqlens,
                           int n_seqs, float *logits) {
    int H = m->cfg.hidden, L = m->cfg.num_labels;
    const gpu_model_weights_t *w = &m->w;
    float *pooled = malloc(sizeof(float) * (size_t)H); /* (H) */
    if (!pooled) abort();
    for (int s = 0; s < n_seqs; s++) {
        const float *cls = hidden + (size_t)cu_seqlens[s] * H;
        for (int o = 0; o < H; o++) {
            double d = w->pool_b[o];
            for (int i = 0; i < H; i++)
                d += (double)w->pool_w[(size_t)o * H + i] * cls[i];
            pooled[o] = (float)d;
        }
        gpu_ref_act(pooled, (size_t)H, m->cfg.head_act);
        for (int o = 0; o < L; o++) {
            double d = w->cls_b[o];
            for (int i = 0; i < H; i++)
                d += (double)w->cls_w[(size_t)o * H + i] * pooled[i];
            logits[(size_t)s * L + o] = (float)d;
        }
    }
    free(pooled);
}

int gpu_ref_forward(const gpu_model_t *m, const int32_t *ids, const int32_t *cu_seqlens, int n_seqs,
                    float *logits) {
    const gpu_model_config_t *c = &m->cfg;
    /* BERT's layers only: ModernBERT's and DeBERTa's references are Hugging Face's goldens */
    if (c->family == GPU_FAMILY_MODERNBERT || c->family == GPU_FAMILY_DEBERTA_V2) return -1;
    size_t n = (size_t)cu_seqlens[n_seqs], H = (size_t)c->hidden, In = (size_t)c->intermediate;
    float *x = malloc(sizeof(float) * n * H);   /* (n, H) hidden states */
    float *q = malloc(sizeof(float) * n * H);   /* (n, H) */
    float *k = malloc(sizeof(float) * n * H);   /* (n, H) */
    float *v = malloc(sizeof(float) * n * H);   /* (n, H) */
    float *ctx = malloc(sizeof(float) * n * H); /* (n, H) attention output */
    float *tmp = malloc(sizeof(float) * n * H); /* (n, H) projection output */
    float *ff = malloc(sizeof(float) * n * In); /* (n, I) */
    int rc = -1;
    if (!x || !q || !k || !v || !ctx || !tmp || !ff) goto out;
    if (c->emb_size == c->hidden) {
        gpu_ref_embed_ln(m, ids, cu_seqlens, n_seqs, x);
    } else { /* ELECTRA: (n, E) embeddings in ctx, projected to H */
        gpu_ref_embed_ln(m, ids, cu_seqlens, n_seqs, ctx);
        gpu_ref_linear(ctx, m->w.emb_proj_w, m->w.emb_proj_b, (int)n, c->emb_size, (int)H, x);
    }
    for (int l = 0; l < c->layers; l++) {
        const gpu_layer_weights_t *y = &m->w.layer[l];
        gpu_ref_linear(x, y->q_w, y->q_b, (int)n, (int)H, (int)H, q);
        gpu_ref_linear(x, y->k_w, y->k_b, (int)n, (int)H, (int)H, k);
        gpu_ref_linear(x, y->v_w, y->v_b, (int)n, (int)H, (int)H, v);
        gpu_ref_attention(q, k, v, (int)H, cu_seqlens, n_seqs, c->heads, (int)H / c->heads, ctx);
        gpu_ref_linear(ctx, y->ao_w, y->ao_b, (int)n, (int)H, (int)H, tmp);
        gpu_ref_add_ln(x, tmp, y->ln1_g, y->ln1_b, (int)n, (int)H, c->ln_eps);
        gpu_ref_linear(x, y->ff1_w, y->ff1_b, (int)n, (int)H, (int)In, ff);
        gpu_ref_act(ff, n * In, c->act);
        gpu_ref_linear(ff, y->ff2_w, y->ff2_b, (int)n, (int)In, (int)H, tmp);
        gpu_ref_add_ln(x, tmp, y->ln2_g, y->ln2_b, (int)n, (int)H, c->ln_eps);
    }
    gpu_ref_pool_classify(m, x, cu_seqlens, n_seqs, logits);
    rc = 0;
out:
    free(x);
    free(q);
    free(k);
    free(v);
    free(ctx);
    free(tmp);
    free(ff);
    return rc;
}

/* x rounded to the nearest fp16 (ties to even); |x| stays far below fp16's 65504 here. */
float gpu_ref_fp16_round(float x) {
    if (fabsf(x) < 0x1p-14f) return nearbyintf(x * 0x1p24f) * 0x1p-24f; /* subnormal steps */
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    b = (b + 0xFFFu + ((b >> 13) & 1u)) & ~0x1FFFu; /* keep 10 of 23 mantissa bits */
    memcpy(&x, &b, sizeof b);
    return x;
}

/* The operands of a linear op at prec as it multiplies them: rows rounded to fp16 / bf16 / E4M3.
 * FP8 quantizes the rows as the backend stores them: storage fp16 rounds them first. */
void gpu_ref_round_rows(gpu_precision_t prec, gpu_precision_t storage, const float *x, int rows,
                        int cols, float *y) {
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * cols;
        float *yr = y + (size_t)r * cols;
        if (prec == GPU_PREC_FP8 && storage == GPU_PREC_FP16) {
            for (int c = 0; c < cols; c++)
                yr[c] = gpu_ref_fp16_round(xr[c]);
            gpu_fp8_fake_row(yr, cols, yr);
        } else if (prec == GPU_PREC_FP8)
            gpu_fp8_fake_row(xr, cols, yr);
        else
            for (int c = 0; c < cols; c++)
                yr[c] = prec == GPU_PREC_BF16   ? gpu_cpu_bf16_round(xr[c])
                        : prec == GPU_PREC_FP16 ? gpu_ref_fp16_round(xr[c])
                                                : xr[c];
    }
}
