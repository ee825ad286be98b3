/* ModernBERT: embeddings without positions, pre-norm layers (layer 0 without its attention
 * norm) with RoPE on Q and K (the global or the local theta), global attention every
 * global_every layers and a sliding window of |i - j| <= local_window elsewhere, GeGLU, the
 * final norm, then the head on the first token or the tokens' mean: dense, act, norm, out.
 * Every token runs every layer (mean pooling reads them all). */
#include <stdio.h>

#include "gpu/families/family.h"

#define V(t, c) gpu_gb_view(t, c)

void gpu_family_modernbert_build(gpu_gb_t *b) {
    const gpu_model_config_t *c = &b->g->cfg;
    const gpu_model_weights_t *w = b->w;
    const int H = c->hidden, I = c->intermediate, F = 2 * I;
    const int x = gpu_gb_embed(b, 0, 0);                          /* (tokens, H) residual */
    const int h = gpu_gb_act(b, "h", GPU_ROWS_TOKENS, H);         /* (tokens, H) normed input */
    const int qkv = gpu_gb_act(b, "qkv", GPU_ROWS_TOKENS, 3 * H); /* (tokens, 3H) */
    const int ctx = gpu_gb_act(b, "ctx", GPU_ROWS_TOKENS, H);     /* (tokens, H) attention out */
    const int ff = gpu_gb_act(b, "ff", GPU_ROWS_TOKENS, F);       /* (tokens, 2I) Wi, GeGLU */
    char n[GPU_GRAPH_NAME];
    for (int l = 0; l < c->layers; l++) {
        const gpu_layer_weights_t *y = w ? &w->layer[l] : NULL;
        const int local = l % c->global_every != 0;
#define W(field, name, rows, cols, fp32)                                                           \
    (snprintf(n, sizeof n, "l%d.%s", l, name),                                                     \
     gpu_gb_weight(b, n, y ? y->field : NULL, rows, cols, fp32))
        int in = x; /* layer 0's attention norm is the identity */
        if (l > 0) {
            gpu_gb_norm(b, "attn_norm", l, V(h, 0), V(x, 0), W(ln1_g, "ln1.g", 1, H, 1),
                        W(ln1_b, "ln1.b", 1, H, 1), H);
            in = h;
        }
        gpu_gb_linear(b, "qkv", l, gpu_gb_proj_prec(b, l, GPU_FP8_QKV), V(qkv, 0), V(in, 0),
                      W(q_w, "qkv.w", 3 * H, H, 0), W(q_b, "qkv.b", 1, 3 * H, 0), 3 * H, H,
                      GPU_EPI_BIAS, c->act);
        gpu_op_t *a = gpu_gb_op(b, 0, GPU_OP_ATTENTION, "attn", l);
        a->out = V(ctx, 0), a->src[0] = V(qkv, 0), a->src[1] = V(qkv, H), a->src[2] = V(qkv, 2 * H);
        a->heads = c->heads, a->head_dim = H / c->heads;
        a->rope_theta = local ? c->rope_theta_local : c->rope_theta_global;
        a->window = local ? c->local_window : 0;
        gpu_gb_linear(b, "ao", l, gpu_gb_proj_prec(b, l, GPU_FP8_AO), V(x, 0), V(ctx, 0),
                      W(ao_w, "ao.w", H, H, 0), W(ao_b, "ao.b", 1, H, 0), H, H, GPU_EPI_RESIDUAL,
                      c->act);
        gpu_gb_norm(b, "mlp_norm", l, V(h, 0), V(x, 0), W(ln2_g, "ln2.g", 1, H, 1),
                    W(ln2_b, "ln2.b", 1, H, 1), H);
        gpu_gb_linear(b, "ff1", l, gpu_gb_proj_prec(b, l, GPU_FP8_FF1), V(ff, 0), V(h, 0),
                      W(ff1_w, "ff1.w", F, H, 0), W(ff1_b, "ff1.b", 1, F, 0), F, H, GPU_EPI_GLU,
                      c->act);
        gpu_gb_linear(b, "ff2", l, gpu_gb_proj_prec(b, l, GPU_FP8_FF2), V(x, 0), V(ff, 0),
                      W(ff2_w, "ff2.w", H, I, 0), W(ff2_b, "ff2.b", 1, H, 0), H, I,
                      GPU_EPI_RESIDUAL, c->act);
#undef W
    }
    gpu_gb_norm(b, "final_norm", -1, V(x, 0), V(x, 0),
                gpu_gb_weight(b, "final_norm.g", w ? w->final_ln_g : NULL, 1, H, 1),
                gpu_gb_weight(b, "final_norm.b", w ? w->final_ln_b : NULL, 1, H, 1), H);
    const int pooled = gpu_gb_act(b, "pooled", GPU_ROWS_SEQS, H); /* (seqs, H) */
    gpu_op_t *p = gpu_gb_op(b, 0, GPU_OP_POOL, "pool", -1);
    p->out = V(pooled, 0), p->src[0] = V(x, 0), p->n = H;
    p->pool = c->mean_pool ? GPU_POOL_MEAN : GPU_POOL_CLS;
    gpu_gb_head(b, pooled, gpu_gb_weight(b, "head.norm.g", w ? w->head_ln_g : NULL, 1, H, 1),
                gpu_gb_weight(b, "head.norm.b", w ? w->head_ln_b : NULL, 1, H, 1), c->head_act);
}
