/* DeBERTa-v2/v3 on the CPU backend, over one chunk of whole sequences: embeddings, then
 * BERT's post-norm layers with disentangled attention, then the pooler on the first token.
 * Per sequence and head, c2p and p2c are two products against the relative embeddings'
 * keys / queries (precomputed per layer at init: they depend on the weights alone), Q
 * pk^T (len, 2 span) and K pq^T (len, 2 span); a score row then gathers them at each
 * pair's relative row (gpu_model_rel_row). No (len, len) matrix is ever stored. */
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cpu/cpu_backend_int.h"
#include "gpu/cpu/cpu_kernels.h"

static size_t up16(size_t n) {
    return (n + 15) / 16 * 16;
}

size_t gpu_cpu_deberta_scratch_floats(const gpu_model_config_t *c, int max_len) {
    const size_t R = 2 * (size_t)c->rel_span, T = (size_t)max_len;
    return 2 * up16(T * R) + up16(T) + up16(2 * T); /* QPk, KPq, a score row, the rel rows */
}

int gpu_cpu_deberta_prepare(gpu_backend_t *be) {
    const gpu_model_config_t *c = &be->m->cfg;
    const gpu_model_weights_t *w = &be->m->w;
    const int H = c->hidden, R = 2 * c->rel_span;
    be->rel_kq = malloc(sizeof(float) * (size_t)c->layers * 2 * R * H);
    float *rel = malloc(sizeof(float) * (size_t)R * H); /* (2 span, H) */
    if (!be->rel_kq || !rel) {
        free(rel);
        return -1;
    }
    memcpy(rel, w->rel_emb, sizeof(float) * (size_t)R * H);
    if (c->rel_ln) gpu_cpu_ln(rel, w->rel_ln_g, w->rel_ln_b, R, H, c->ln_eps);
    for (int l = 0; l < c->layers; l++) {
        const gpu_layer_weights_t *y = &w->layer[l];
        float *pk = be->rel_kq + (size_t)l * 2 * R * H, *pq = pk + (size_t)R * H;
        const float *ws[2] = {y->pos_k_w, y->pos_q_w}, *bs[2] = {y->pos_k_b, y->pos_q_b};
        float *out[2] = {pk, pq};
        const int want[2] = {c->c2p, c->p2c};
        for (int k = 0; k < 2; k++) {
            if (!want[k]) continue;
            gpu_cpu_fill_rows(out[k], H, bs[k], R, H);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, H, H, 1.0f, rel, H, ws[k], H,
                        1.0f, out[k], H);
        }
    }
    free(rel);
    return 0;
}

/* ctx (len, H) of one sequence from its qkv rows (len, 3H), layer l's relative K and Q. */
static void attend(const gpu_model_config_t *c, const float *qkv, int len, const float *pk,
                   const float *pq, float *ctx, float *scratch) {
    const int H = c->hidden, hd = H / c->heads, ld = 3 * H, R = 2 * c->rel_span;
    float *qpk = scratch;                               /* (len, R) */
    float *kpq = qpk + up16((size_t)len * R);           /* (len, R) */
    float *p = kpq + up16((size_t)len * R);             /* (len) one score row */
    int32_t *rrow = (int32_t *)(p + up16((size_t)len)); /* (2 len - 1) row of i - j */
    for (int d = -(len - 1); d <= len - 1; d++)
        rrow[d + len - 1] = gpu_model_rel_row(c, d);
    /* HF: sqrt(head_dim * factor) in fp32; q . (k / scale), c2p / scale, p2c / scale. */
    const float scale = sqrtf((float)hd * (float)c->att_scale_factor), inv = 1.0f / scale;
    for (int h = 0; h < c->heads; h++) {
        const int c0 = h * hd;
        const float *q = qkv + c0, *k = qkv + H + c0, *v = qkv + 2 * H + c0;
        if (c->c2p)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, len, R, hd, 1.0f, q, ld, pk + c0,
                        H, 0.0f, qpk, R);
        if (c->p2c)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, len, R, hd, 1.0f, k, ld, pq + c0,
                        H, 0.0f, kpq, R);
        for (int i = 0; i < len; i++) {
            cblas_sgemv(CblasRowMajor, CblasNoTrans, len, hd, inv, k, ld, q + (size_t)i * ld, 1,
                        0.0f, p, 1);
            const int32_t *ri = rrow + i + len - 1; /* ri[-j] is the row of i - j */
            float mx = -INFINITY;
            for (int j = 0; j < len; j++) {
                const int r = ri[-j];
                float s = p[j];
                if (c->c2p) s += qpk[(size_t)i * R + r] * inv;
                if (c->p2c) s += kpq[(size_t)j * R + r] * inv;
                p[j] = s;
                mx = s > mx ? s : mx;
            }
            float sum = 0.0f;
            for (int j = 0; j < len; j++) {
                p[j] = expf(p[j] - mx);
                sum += p[j];
            }
            cblas_sgemv(CblasRowMajor, CblasTrans, len, hd, 1.0f / sum, v, ld, p, 1, 0.0f,
                        ctx + (size_t)i * H + c0, 1);
        }
    }
}

void gpu_cpu_deberta_range(gpu_backend_t *be, const gpu_batch_t *bt, int s0, int s1, float *logits,
                           float *scratch) {
    const gpu_model_t *m = be->m;
    const gpu_model_config_t *c = &m->cfg;
    const int H = c->hidden, In = c->intermediate, L = c->num_labels, R = 2 * c->rel_span;
    const int *cu = bt->cu_seqlens;
    const int t0 = cu[s0], n = cu[s1] - t0, ns = s1 - s0;
    float *x = be->x + (size_t)t0 * H;         /* (n, H) */
    float *qkv = be->qkv + (size_t)t0 * 3 * H; /* (n, 3H) */
    float *ctx = be->ctx + (size_t)t0 * H;     /* (n, H), later the first tokens' rows */
    float *tmp = be->tmp + (size_t)t0 * H;     /* (ns, H) pooler output */
    float *ff = be->ff + (size_t)t0 * In;      /* (n, I) */
    for (int s = s0; s < s1; s++)
        for (int t = 0; t < cu[s + 1] - cu[s]; t++) {
            float *o = be->x + (size_t)(cu[s] + t) * H;
            const float *we = m->w.word_emb + (size_t)bt->ids[cu[s] + t] * H;
            const float *pe = m->w.pos_emb ? m->w.pos_emb + (size_t)t * H : NULL;
            const float *te = c->type_vocab ? m->w.type_emb : NULL;
            for (int i = 0; i < H; i++)
                o[i] = we[i] + (pe ? pe[i] : 0.0f) + (te ? te[i] : 0.0f);
        }
    gpu_cpu_ln(x, m->w.emb_ln_g, m->w.emb_ln_b, n, H, c->ln_eps);
    for (int l = 0; l < c->layers; l++) {
        const gpu_layer_weights_t *y = &m->w.layer[l];
        const cpu_layer_proj_t *p = &be->proj[l];
        const float *pk = be->rel_kq ? be->rel_kq + (size_t)l * 2 * R * H : NULL;
        const float *pq = pk ? pk + (size_t)R * H : NULL;
        gpu_cpu_project(&p->qkv, x, H, n, GPU_CPU_EPI_STORE, qkv, 3 * H);
        for (int s = s0; s < s1; s++)
            attend(c, be->qkv + (size_t)cu[s] * 3 * H, cu[s + 1] - cu[s], pk, pq,
                   be->ctx + (size_t)cu[s] * H, scratch);
        gpu_cpu_project(&p->ao, ctx, H, n, GPU_CPU_EPI_ACCUM, x, H);
        gpu_cpu_ln(x, y->ln1_g, y->ln1_b, n, H, c->ln_eps);
        gpu_cpu_project_act(&p->ff1, x, H, n, c->act, ff, In);
        gpu_cpu_project(&p->ff2, ff, In, n, GPU_CPU_EPI_ACCUM, x, H);
        gpu_cpu_ln(x, y->ln2_g, y->ln2_b, n, H, c->ln_eps);
    }
    for (int s = s0; s < s1; s++)
        memcpy(ctx + (size_t)(s - s0) * H, be->x + (size_t)cu[s] * H, sizeof(float) * H);
    gpu_cpu_project_act(&be->pool, ctx, H, ns, c->head_act, tmp, H);
    gpu_cpu_project(&be->cls, tmp, H, ns, GPU_CPU_EPI_STORE, logits + (size_t)s0 * L, L);
}
