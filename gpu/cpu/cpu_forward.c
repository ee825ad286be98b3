/* The CPU backend's forward pass over one chunk of whole sequences, stage by stage:
 * embeddings (ELECTRA's projection), the layers, the last layer on first tokens only, the
 * head. Every family runs the same stages; the model's config picks the activations. */
#include <cblas.h>
#include <string.h>

#include "gpu/cpu/cpu_backend_int.h"
#include "gpu/cpu/cpu_gemm.h"
#include "gpu/cpu/cpu_gemm_bf16.h"
#include "gpu/cpu/cpu_kernels.h"

/* y (n, N), rows ldy apart, = epilogue(x (n, K) W^T + b). With OpenBLAS the epilogue is
 * a pass of its own: the residual add rides on beta 1, the bias starts in C. */
void gpu_cpu_project(const cpu_proj_t *p, const float *x, int ldx, int n, gpu_cpu_epi_t epi,
                     float *y, int ldy) {
    if (p->packed16) {
        gpu_cpu_gemm_bf16(x, ldx, n, p->packed16, p->N, p->K, p->b, epi, y, ldy);
        return;
    }
    if (p->packed) {
        gpu_cpu_gemm(x, ldx, n, p->packed, p->N, p->K, p->b, epi, y, ldy);
        return;
    }
    const int act = epi == GPU_CPU_EPI_GELU || epi == GPU_CPU_EPI_RELU;
    if (epi == GPU_CPU_EPI_STORE) gpu_cpu_fill_rows(y, ldy, p->b, n, p->N);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, p->N, p->K, 1.0f, x, ldx, p->w, p->K,
                act ? 0.0f : 1.0f, y, ldy);
    if (epi == GPU_CPU_EPI_ACCUM) gpu_cpu_bias(y, ldy, p->b, n, p->N);
    if (epi == GPU_CPU_EPI_GELU) gpu_cpu_bias_gelu(y, p->b, n, p->N); /* ldy == N here */
    if (epi == GPU_CPU_EPI_RELU) {
        gpu_cpu_bias(y, ldy, p->b, n, p->N);
        gpu_cpu_act(y, ldy, n, p->N, GPU_ACT_RELU);
    }
}

/* y = act(x W^T + b): erf GELU and ReLU ride in the GEMM's epilogue, the others take a pass. */
void gpu_cpu_project_act(const cpu_proj_t *p, const float *x, int ldx, int n, gpu_act_t act,
                         float *y, int ldy) {
    if (act == GPU_ACT_GELU || act == GPU_ACT_RELU) {
        gpu_cpu_project(p, x, ldx, n, act == GPU_ACT_GELU ? GPU_CPU_EPI_GELU : GPU_CPU_EPI_RELU, y,
                        ldy);
        return;
    }
    gpu_cpu_project(p, x, ldx, n, GPU_CPU_EPI_STORE, y, ldy);
    gpu_cpu_act(y, ldy, n, p->N, act);
}

/* x (n, H) of sequences [s0, s1) = their embeddings; E < H (ELECTRA) embeds into spare
 * (n, E) rows and projects them to H. */
static void embed(gpu_backend_t *be, const gpu_batch_t *bt, int s0, int s1, float *x,
                  float *spare) {
    const gpu_model_t *m = be->m;
    const int H = m->cfg.hidden, E = m->cfg.emb_size, *cu = bt->cu_seqlens;
    const int t0 = cu[s0], n = cu[s1] - t0;
    float *e = E == H ? x : spare; /* (n, E) */
    for (int s = s0; s < s1; s++)
        gpu_cpu_embed_ln(m, bt->ids + cu[s], cu[s + 1] - cu[s], e + (size_t)(cu[s] - t0) * E);
    if (E != H) gpu_cpu_project(&be->emb_proj, e, E, n, GPU_CPU_EPI_STORE, x, H);
}

/* What projection P of layer l reads: X itself, or with precision fp8 its rows rounded
 * into the free rows Y. */
#define FP8_IN(P, X, LDX, N, K, Y, LDY) gpu_cpu_fp8_input(be, l, P, X, LDX, N, K, Y, LDY)

void gpu_cpu_encode_range(gpu_backend_t *be, const gpu_batch_t *bt, int s0, int s1, float *logits,
                          float *scratch) {
    const gpu_model_t *m = be->m;
    const gpu_model_config_t *c = &m->cfg;
    const int H = c->hidden, In = c->intermediate, L = c->num_labels, hd = H / c->heads;
    const int *cu = bt->cu_seqlens;
    const int t0 = cu[s0], n = cu[s1] - t0, ns = s1 - s0;
    if (ns <= 0) return;
    if (c->family == GPU_FAMILY_MODERNBERT) {
        gpu_cpu_modernbert_range(be, bt, s0, s1, logits, scratch);
        return;
    }
    if (c->family == GPU_FAMILY_DEBERTA_V2) {
        gpu_cpu_deberta_range(be, bt, s0, s1, logits, scratch);
        return;
    }
    float *x = be->x + (size_t)t0 * H;         /* (n, H) */
    float *qkv = be->qkv + (size_t)t0 * 3 * H; /* (n, 3H) */
    float *ctx = be->ctx + (size_t)t0 * H;     /* (n, H) */
    float *tmp = be->tmp + (size_t)t0 * H;     /* (n, H) */
    float *ff = be->ff + (size_t)t0 * In;      /* (n, I) */
    embed(be, bt, s0, s1, x, ctx);
    for (int l = 0; l < c->layers; l++) {
        const gpu_layer_weights_t *y = &m->w.layer[l];
        const cpu_layer_proj_t *p = &be->proj[l];
        if (l + 1 < c->layers) {
            /* fp8: each projection's input rounded where it is free (ctx before attention
             * writes it, qkv once attention has read it; ctx and ff in place). */
            gpu_cpu_project(&p->qkv, FP8_IN(GPU_FP8_QKV, x, H, n, H, ctx, H), H, n,
                            GPU_CPU_EPI_STORE, qkv, 3 * H);
            for (int s = s0; s < s1; s++) {
                const float *sq = be->qkv + (size_t)cu[s] * 3 * H;
                int len = cu[s + 1] - cu[s];
                gpu_cpu_attention_seq(sq, 3 * H, len, sq + H, sq + 2 * H, 3 * H, len, c->heads, hd,
                                      be->ctx + (size_t)cu[s] * H, H, scratch);
            }
            gpu_cpu_project(&p->ao, FP8_IN(GPU_FP8_AO, ctx, H, n, H, ctx, H), H, n,
                            GPU_CPU_EPI_ACCUM, x, H);
            gpu_cpu_ln(x, y->ln1_g, y->ln1_b, n, H, c->ln_eps);
            gpu_cpu_project_act(&p->ff1, FP8_IN(GPU_FP8_FF1, x, H, n, H, qkv, H), H, n, c->act, ff,
                                In);
            gpu_cpu_project(&p->ff2, FP8_IN(GPU_FP8_FF2, ff, In, n, In, ff, In), In, n,
                            GPU_CPU_EPI_ACCUM, x, H);
            gpu_cpu_ln(x, y->ln2_g, y->ln2_b, n, H, c->ln_eps);
            continue;
        }
        /* Last layer: the classifier reads only each sequence's first token, so K and V
         * are needed for every token but everything after attention for one row per
         * sequence. Compact rows (ns <= n) reuse the chunk's own rows of dead buffers. */
        gpu_cpu_project(&p->kv, FP8_IN(GPU_FP8_QKV, x, H, n, H, tmp, H), H, n, GPU_CPU_EPI_STORE,
                        qkv + H, 3 * H);
        float *xc = ctx; /* (ns, H) first-token hidden states */
        float *qc = tmp; /* (ns, H) their queries, later the head's dense output */
        float *cc = x;   /* (ns, H) their attention outputs (x is dead past the KV gemm) */
        for (int s = s0; s < s1; s++)
            memcpy(xc + (size_t)(s - s0) * H, be->x + (size_t)cu[s] * H, sizeof(float) * H);
        gpu_cpu_project(&p->q, FP8_IN(GPU_FP8_QKV, xc, H, ns, H, cc, H), H, ns, GPU_CPU_EPI_STORE,
                        qc, H);
        for (int s = s0; s < s1; s++) {
            const float *sq = be->qkv + (size_t)cu[s] * 3 * H;
            gpu_cpu_attention_seq(qc + (size_t)(s - s0) * H, H, 1, sq + H, sq + 2 * H, 3 * H,
                                  cu[s + 1] - cu[s], c->heads, hd, cc + (size_t)(s - s0) * H, H,
                                  scratch);
        }
        gpu_cpu_project(&p->ao, FP8_IN(GPU_FP8_AO, cc, H, ns, H, cc, H), H, ns, GPU_CPU_EPI_ACCUM,
                        xc, H);
        gpu_cpu_ln(xc, y->ln1_g, y->ln1_b, ns, H, c->ln_eps);
        gpu_cpu_project_act(&p->ff1, FP8_IN(GPU_FP8_FF1, xc, H, ns, H, cc, H), H, ns, c->act, ff,
                            In);
        gpu_cpu_project(&p->ff2, FP8_IN(GPU_FP8_FF2, ff, In, ns, In, ff, In), In, ns,
                        GPU_CPU_EPI_ACCUM, xc, H);
        gpu_cpu_ln(xc, y->ln2_g, y->ln2_b, ns, H, c->ln_eps);
        /* The head on the compact rows: dense + the family's activation, then the output. */
        gpu_cpu_project_act(&be->pool, xc, H, ns, c->head_act, qc, H);
        gpu_cpu_project(&be->cls, qc, H, ns, GPU_CPU_EPI_STORE, logits + (size_t)s0 * L, L);
    }
}
