/* Blocks several families share: BERT's post-norm layers (BERT, DistilBERT, RoBERTa, XLM-R,
 * ELECTRA, DeBERTa) and the classification head. */
#include <stdio.h>

#include "gpu/families/family.h"

#define V(t, c) gpu_gb_view(t, c)

/* The weights of layer l as tensors: fields of the model's layer, NULL without weights. */
typedef struct {
    int qkv_w, qkv_b, q_w, q_b, kv_w, kv_b, ao_w, ao_b, ln1_g, ln1_b, ff1_w, ff1_b, ff2_w, ff2_b,
        ln2_g, ln2_b;
} layer_t;

static layer_t layer_tensors(gpu_gb_t *b, int l, int last) {
    const gpu_model_config_t *c = &b->g->cfg;
    const gpu_layer_weights_t *y = b->w ? &b->w->layer[l] : NULL;
    const int H = c->hidden, I = c->intermediate, F = gpu_model_ff1_rows(c);
    layer_t t;
    char n[GPU_GRAPH_NAME];
#define W(field, name, rows, cols, fp32)                                                           \
    (snprintf(n, sizeof n, "l%d.%s", l, name),                                                     \
     gpu_gb_weight(b, n, y ? y->field : NULL, rows, cols, fp32))
    /* Q, K and V are back to back in the model's blob (gpu_model_alloc_weights), so the fused
     * projection and the last layer's q / kv are its rows. */
    t.qkv_w = t.qkv_b = t.q_w = t.q_b = t.kv_w = t.kv_b = -1;
    if (!last) {
        t.qkv_w = W(q_w, "qkv.w", 3 * H, H, 0);
        t.qkv_b = W(q_b, "qkv.b", 1, 3 * H, 0);
    } else {
        t.q_w = W(q_w, "q.w", H, H, 0);
        t.q_b = W(q_b, "q.b", 1, H, 0);
        t.kv_w = W(k_w, "kv.w", 2 * H, H, 0);
        t.kv_b = W(k_b, "kv.b", 1, 2 * H, 0);
    }
    t.ao_w = W(ao_w, "ao.w", H, H, 0);
    t.ao_b = W(ao_b, "ao.b", 1, H, 0);
    t.ln1_g = W(ln1_g, "ln1.g", 1, H, 1);
    t.ln1_b = W(ln1_b, "ln1.b", 1, H, 1);
    t.ff1_w = W(ff1_w, "ff1.w", F, H, 0);
    t.ff1_b = W(ff1_b, "ff1.b", 1, F, 0);
    t.ff2_w = W(ff2_w, "ff2.w", H, I, 0);
    t.ff2_b = W(ff2_b, "ff2.b", 1, H, 0);
    t.ln2_g = W(ln2_g, "ln2.g", 1, H, 1);
    t.ln2_b = W(ln2_b, "ln2.b", 1, H, 1);
#undef W
    return t;
}

static gpu_op_t *attention(gpu_gb_t *b, int l, gpu_view_t out, gpu_view_t q, gpu_view_t k,
                           gpu_view_t v, const gpu_gb_rel_t *rel) {
    const gpu_model_config_t *c = &b->g->cfg;
    gpu_op_t *op = gpu_gb_op(b, 0, GPU_OP_ATTENTION, "attn", l);
    op->out = out, op->src[0] = q, op->src[1] = k, op->src[2] = v;
    op->heads = c->heads, op->head_dim = c->hidden / c->heads;
    if (rel && (rel->k || rel->q)) {
        op->w[0] = rel->k ? rel->k[l] : -1;
        op->w[1] = rel->q ? rel->q[l] : -1;
        op->scale_factor = rel->scale_factor;
        op->rel_span = rel->span, op->rel_buckets = rel->buckets, op->rel_max_pos = rel->max_pos;
    }
    return op;
}

/* The FFN and both norms of a post-norm layer on rows x (kind), with inner rows ff. */
static void post_ffn(gpu_gb_t *b, int l, const layer_t *t, int x, int ff) {
    const gpu_model_config_t *c = &b->g->cfg;
    const int H = c->hidden, I = c->intermediate;
    gpu_gb_norm(b, "ln1", l, V(x, 0), V(x, 0), t->ln1_g, t->ln1_b, H);
    gpu_gb_linear(b, "ff1", l, gpu_gb_proj_prec(b, l, GPU_FP8_FF1), V(ff, 0), V(x, 0), t->ff1_w,
                  t->ff1_b, I, H, GPU_EPI_ACT, c->act);
    gpu_gb_linear(b, "ff2", l, gpu_gb_proj_prec(b, l, GPU_FP8_FF2), V(x, 0), V(ff, 0), t->ff2_w,
                  t->ff2_b, H, I, GPU_EPI_RESIDUAL, c->act);
    gpu_gb_norm(b, "ln2", l, V(x, 0), V(x, 0), t->ln2_g, t->ln2_b, H);
}

int gpu_gb_postnorm_layers(gpu_gb_t *b, int x, const gpu_gb_rel_t *rel) {
    const gpu_model_config_t *c = &b->g->cfg;
    const int H = c->hidden, I = c->intermediate;
    const int qkv = gpu_gb_act(b, "qkv", GPU_ROWS_TOKENS, 3 * H); /* (tokens, 3H) Q|K|V */
    const int ctx = gpu_gb_act(b, "ctx", GPU_ROWS_TOKENS, H);     /* (tokens, H) attention out */
    const int ff = gpu_gb_act(b, "ff", GPU_ROWS_TOKENS, I);       /* (tokens, I) FFN inner */
    for (int l = 0; l + 1 < c->layers; l++) {
        layer_t t = layer_tensors(b, l, 0);
        gpu_gb_linear(b, "qkv", l, gpu_gb_proj_prec(b, l, GPU_FP8_QKV), V(qkv, 0), V(x, 0), t.qkv_w,
                      t.qkv_b, 3 * H, H, GPU_EPI_BIAS, c->act);
        attention(b, l, V(ctx, 0), V(qkv, 0), V(qkv, H), V(qkv, 2 * H), rel);
        gpu_gb_linear(b, "ao", l, gpu_gb_proj_prec(b, l, GPU_FP8_AO), V(x, 0), V(ctx, 0), t.ao_w,
                      t.ao_b, H, H, GPU_EPI_RESIDUAL, c->act);
        post_ffn(b, l, &t, x, ff);
    }
    /* The last layer: the head reads only each sequence's first token, so K and V are needed
     * for every token but everything after attention for one row per sequence. */
    const int l = c->layers - 1;
    layer_t t = layer_tensors(b, l, 1);
    const int xc = gpu_gb_act(b, "x.first", GPU_ROWS_SEQS, H);   /* (seqs, H) first tokens */
    const int qc = gpu_gb_act(b, "q.first", GPU_ROWS_SEQS, H);   /* (seqs, H) their queries */
    const int cc = gpu_gb_act(b, "ctx.first", GPU_ROWS_SEQS, H); /* (seqs, H) their attention */
    const int fc = gpu_gb_act(b, "ff.first", GPU_ROWS_SEQS, I);  /* (seqs, I) their FFN inner */
    gpu_gb_linear(b, "kv", l, gpu_gb_proj_prec(b, l, GPU_FP8_QKV), V(qkv, H), V(x, 0), t.kv_w,
                  t.kv_b, 2 * H, H, GPU_EPI_BIAS, c->act);
    gpu_op_t *p = gpu_gb_op(b, 0, GPU_OP_POOL, "first", l);
    p->out = V(xc, 0), p->src[0] = V(x, 0), p->n = H, p->pool = GPU_POOL_CLS;
    gpu_gb_linear(b, "q", l, gpu_gb_proj_prec(b, l, GPU_FP8_QKV), V(qc, 0), V(xc, 0), t.q_w, t.q_b,
                  H, H, GPU_EPI_BIAS, c->act);
    attention(b, l, V(cc, 0), V(qc, 0), V(qkv, H), V(qkv, 2 * H), rel);
    gpu_gb_linear(b, "ao", l, gpu_gb_proj_prec(b, l, GPU_FP8_AO), V(xc, 0), V(cc, 0), t.ao_w,
                  t.ao_b, H, H, GPU_EPI_RESIDUAL, c->act);
    post_ffn(b, l, &t, xc, fc);
    return xc;
}

void gpu_gb_head(gpu_gb_t *b, int rows, int hg, int hb, gpu_act_t act) {
    const gpu_model_config_t *c = &b->g->cfg;
    const gpu_model_weights_t *w = b->w;
    const int H = c->hidden, L = c->num_labels;
    const int pw = gpu_gb_weight(b, "head.dense.w", w ? w->pool_w : NULL, H, H, 1);
    const int pb = gpu_gb_weight(b, "head.dense.b", w ? w->pool_b : NULL, 1, H, 1);
    const int cw = gpu_gb_weight(b, "head.out.w", w ? w->cls_w : NULL, L, H, 1);
    const int cb = gpu_gb_weight(b, "head.out.b", w ? w->cls_b : NULL, 1, L, 1);
    const int h = gpu_gb_act(b, "head", GPU_ROWS_SEQS, H); /* (seqs, H) dense + act */
    const int logits = gpu_gb_logits(b);
    gpu_gb_linear(b, "head.dense", -1, GPU_PREC_FP32, V(h, 0), V(rows, 0), pw, pb, H, H,
                  GPU_EPI_ACT, act);
    if (hg >= 0) gpu_gb_norm(b, "head.norm", -1, V(h, 0), V(h, 0), hg, hb, H)->prec = GPU_PREC_FP32;
    gpu_gb_linear(b, "head.out", -1, GPU_PREC_FP32, V(logits, 0), V(h, 0), cw, cb, L, H,
                  GPU_EPI_BIAS, act);
}
