#include "gpu/cuda/plan.h"

#include "gpu/backend.h" /* gpu_backend_max_seqs */
#include "gpu/model/fp8.h"

#include <stdio.h>
#include <string.h>

static size_t plan_align(size_t n) {
    return (n + GPU_PLAN_ALIGN - 1) / GPU_PLAN_ALIGN * GPU_PLAN_ALIGN;
}

/* Lays slice after slice; *cursor is the running aligned size. */
static void plan_put(gpu_plan_t *p, int id, const char *name, const char *shape, size_t bytes,
                     size_t *cursor) {
    p->slice[id].name = name;
    p->slice[id].shape = shape;
    p->slice[id].offset = *cursor;
    p->slice[id].bytes = bytes;
    *cursor += plan_align(bytes);
}

void gpu_plan_last_layer(int bf16, size_t S, size_t H, size_t I, gpu_plan_last_t *o) {
    size_t cur = 0;
    o->ctx = cur, cur += bf16 ? plan_align(S * H * 2) : 0;
    o->xr = cur, cur += bf16 ? plan_align(S * H * 4) : 0;
    o->ff = o->head_x = cur;
    o->head_pooled = cur + plan_align(S * H * 4);
    size_t ff = plan_align(S * I * 2), head = 2 * plan_align(S * H * 4);
    o->end = cur + (ff > head ? ff : head);
}

int gpu_plan_compute(const gpu_model_config_t *cfg, int token_budget, int max_len, int max_seqs,
                     const char *precision, gpu_plan_t *p, char *err, size_t errlen) {
    memset(p, 0, sizeof(*p));
    if (precision && strcmp(precision, "fp16") != 0 && strcmp(precision, "bf16") != 0 &&
        strcmp(precision, "fp8") != 0) {
        snprintf(err, errlen,
                 "precision '%s' is not supported by the cuda backend: use fp16, bf16 or fp8",
                 precision);
        return -1;
    }
    if (token_budget <= 0) {
        snprintf(err, errlen, "token budget must be positive (got %d)", token_budget);
        return -1;
    }
    if (max_len < 0 || max_len > cfg->max_pos) {
        snprintf(err, errlen, "max length %d is outside 1..%d (the model's positions)", max_len,
                 cfg->max_pos);
        return -1;
    }
    if (max_seqs < 0) {
        snprintf(err, errlen, "max sequences must not be negative (got %d)", max_seqs);
        return -1;
    }
    if (cfg->hidden <= 0 || cfg->heads <= 0 || cfg->hidden % cfg->heads != 0 || cfg->layers <= 0 ||
        cfg->intermediate <= 0 || cfg->num_labels <= 0 || cfg->vocab_size <= 0) {
        snprintf(err, errlen, "model geometry is inconsistent (hidden %d, heads %d, layers %d)",
                 cfg->hidden, cfg->heads, cfg->layers);
        return -1;
    }
    p->token_budget = token_budget;
    p->max_len = max_len > 0 ? max_len : cfg->max_pos;
    p->max_seqs = gpu_backend_max_seqs(token_budget, max_seqs);
    p->elem_bytes = 2;
    p->bf16 = precision && strcmp(precision, "bf16") == 0;
    p->fp8 = precision && strcmp(precision, "fp8") == 0;

    if (cfg->emb_size <= 0 || cfg->emb_size > cfg->hidden) {
        snprintf(err, errlen, "embedding size %d is outside 1..hidden %d", cfg->emb_size,
                 cfg->hidden);
        return -1;
    }
    size_t e = (size_t)p->elem_bytes, H = (size_t)cfg->hidden, I = (size_t)cfg->intermediate;
    size_t E = (size_t)cfg->emb_size, proj = E != H; /* ELECTRA's projection */
    size_t F = (size_t)gpu_model_ff1_rows(cfg), P = cfg->pos_rows ? (size_t)cfg->max_pos : 0;
    size_t R = 2 * (size_t)cfg->rel_span, NL = (size_t)cfg->layers;
    size_t L = (size_t)cfg->num_labels, T = (size_t)token_budget, S = (size_t)p->max_seqs;
    size_t f4 = sizeof(float);

    /* One layer's block, each piece aligned so every pointer suits vector loads. */
    size_t lb = 0;
    /* fp8: a point's weight in 1-byte codes where every layer runs it in FP8, its scales
     * wherever one does. */
    int any[GPU_FP8_POINTS] = {0}, all[GPU_FP8_POINTS] = {0};
    for (int q = 0; p->fp8 && q < GPU_FP8_POINTS; q++) {
        all[q] = 1;
        for (int l = 0; l < cfg->layers; l++) {
            int on = gpu_fp8_runs(cfg, l, (gpu_fp8_point_t)q);
            any[q] |= on;
            all[q] &= on;
        }
    }
#define WB(q)    (all[q] ? 1 : e)
#define SB(q, n) (any[q] ? (n)*f4 : 0)
    size_t lsz[GPU_PLAN_L_N] = {3 * H * H * WB(GPU_FP8_QKV),
                                3 * H * e,
                                H * H * WB(GPU_FP8_AO),
                                H * e,
                                2 * H * f4,
                                F * H * WB(GPU_FP8_FF1),
                                F * e,
                                H * I * WB(GPU_FP8_FF2),
                                H * e,
                                2 * H * f4,
                                SB(GPU_FP8_QKV, 3 * H),
                                SB(GPU_FP8_AO, H),
                                SB(GPU_FP8_FF1, F),
                                SB(GPU_FP8_FF2, H)};
#undef WB
#undef SB
    for (int i = 0; i < GPU_PLAN_L_N; i++) {
        p->layer_off[i] = lb;
        lb += plan_align(lsz[i]);
    }
    p->layer_bytes = lb;

    size_t cur = 0;
    plan_put(p, GPU_PLAN_WORD_EMB, "word embeddings", "(vocab, E)", (size_t)cfg->vocab_size * E * e,
             &cur);
    plan_put(p, GPU_PLAN_POS_EMB, "position embeddings", "(max_pos, E), 0 rows for RoPE / relative",
             P * E * e, &cur);
    plan_put(p, GPU_PLAN_TYPE_EMB, "token type 0 embedding", "(E)", E * e, &cur);
    plan_put(p, GPU_PLAN_EMB_LN, "embedding LayerNorm", "(2, E) fp32", 2 * E * f4, &cur);
    plan_put(p, GPU_PLAN_EMB_PROJ_W, "embedding projection", "(H, E), ELECTRA only",
             proj * H * E * e, &cur);
    plan_put(p, GPU_PLAN_EMB_PROJ_B, "embedding projection bias", "(H), ELECTRA only", proj * H * e,
             &cur);
    plan_put(p, GPU_PLAN_LAYERS, "encoder layers", "(layers) x [qkv, out, ln1, ff1, ff2, ln2]",
             (size_t)cfg->layers * lb, &cur);
    plan_put(p, GPU_PLAN_POOL_W, "pooler weight", "(H, H) fp32", H * H * f4, &cur);
    plan_put(p, GPU_PLAN_POOL_B, "pooler bias", "(H) fp32", H * f4, &cur);
    plan_put(p, GPU_PLAN_CLS_W, "classifier weight", "(L, H) fp32", L * H * f4, &cur);
    plan_put(p, GPU_PLAN_CLS_B, "classifier bias", "(L) fp32", L * f4, &cur);
    size_t fam = cfg->family == GPU_FAMILY_MODERNBERT ? 4 * H * f4 : NL * 2 * R * H * e;
    plan_put(p, GPU_PLAN_FAMILY_W, "family weights",
             "ModernBERT (4, H) fp32 norms; DeBERTa (layers, 2, 2 span, H)", fam, &cur);
    p->weights_bytes = cur;

    /* BIG holds, in turn, the fused QKV (T, 3H), the attention output (T, H) and the FFN
     * inner activations (T, I); in the last layer, which runs on the [CLS] rows only, the
     * parts gpu_plan_last_layer lays out for S = max_seqs. */
    p->big_ld = (int)(3 * H > F ? 3 * H : F);
    size_t big = T * (size_t)p->big_ld * e;
    gpu_plan_last_t last;
    gpu_plan_last_layer(p->bf16, S, H, F, &last);
    if (last.end > big) big = last.end;
    size_t ctx = (T > S ? T : S) * H;
    plan_put(p, GPU_PLAN_X, "hidden state", "(tokens, H)", T * H * e, &cur);
    plan_put(p, GPU_PLAN_XR, "fp32 residual (bf16 only)", "(tokens, H) fp32",
             p->bf16 ? T * H * f4 : 0, &cur);
    plan_put(p, GPU_PLAN_CTX, "attention context / FFN out", "(tokens, H)", ctx * e, &cur);
    plan_put(p, GPU_PLAN_BIG, "QKV / attn-out / FFN inner",
             "max((tokens, max(3H, I)), last layer's (seqs, ...))", big, &cur);
    plan_put(p, GPU_PLAN_REL, "DeBERTa c2p / p2c products", "(tokens, 2, heads, 2 span)",
             T * 2 * (size_t)cfg->heads * R * e, &cur);
    p->inputs_ids_off = 0;
    p->inputs_pos_off = plan_align(T * 4);
    p->inputs_cu_off = 2 * plan_align(T * 4);
    plan_put(p, GPU_PLAN_INPUTS, "batch inputs", "ids (tokens), pos (tokens), cu (seqs + 1) int32",
             p->inputs_cu_off + (S + 1) * 4, &cur);
    plan_put(p, GPU_PLAN_LOGITS, "logits", "(seqs, L) fp32", S * L * f4, &cur);
    plan_put(p, GPU_PLAN_WORKSPACE, "cuBLASLt workspace", "bytes", GPU_PLAN_WORKSPACE_BYTES, &cur);
    int any_fp8 = any[0] | any[1] | any[2] | any[3];
    plan_put(p, GPU_PLAN_XQ, "fp8 projection input", "(tokens, max(H, I)) E4M3, fp8 only",
             any_fp8 ? T * (H > I ? H : I) : 0, &cur);
    plan_put(p, GPU_PLAN_XS, "fp8 per-token scales", "(tokens) fp32, fp8 only",
             any_fp8 ? T * f4 : 0, &cur);
    p->total_bytes = cur;
    p->arena_bytes = cur - p->weights_bytes;
    return 0;
}

const char *gpu_plan_human(size_t bytes, char *buf, size_t len) {
    if (bytes >= (1ull << 30))
        snprintf(buf, len, "%.2f GiB", (double)bytes / (double)(1ull << 30));
    else if (bytes >= (1ull << 20))
        snprintf(buf, len, "%.1f MiB", (double)bytes / (double)(1ull << 20));
    else if (bytes >= 1024)
        snprintf(buf, len, "%.1f KiB", (double)bytes / 1024.0);
    else
        snprintf(buf, len, "%zu B", bytes);
    return buf;
}
