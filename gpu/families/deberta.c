/* DeBERTa-v2/v3: embeddings (a position table only where the checkpoint has one), BERT's
 * post-norm layers with disentangled attention, the pooler on the first token. The relative
 * embeddings (after their LayerNorm) go through each layer's position K and Q projections
 * once, in the prelude: c2p reads the keys, p2c the queries, at each pair's relative row
 * (gpu_model_rel_row). */
#include <stdio.h>

#include "gpu/families/family.h"

#define V(t, c) gpu_gb_view(t, c)

void gpu_family_deberta_build(gpu_gb_t *b) {
    const gpu_model_config_t *c = &b->g->cfg;
    const gpu_model_weights_t *w = b->w;
    const int H = c->hidden, R = 2 * c->rel_span;
    const int x = gpu_gb_embed(b, c->pos_rows > 0, c->type_vocab > 0);
    int rk[c->layers > 0 ? c->layers : 1], rq[c->layers > 0 ? c->layers : 1];
    if (c->rel_span > 0) {
        const int emb = gpu_gb_weight(b, "rel_emb", w ? w->rel_emb : NULL, R, H, 0);
        const int rel = gpu_gb_const(b, "rel", R, H); /* (2 span, H) after the norm */
        gpu_op_t *n = gpu_gb_op(b, 1, GPU_OP_NORM, "rel.norm", -1);
        n->prec = GPU_PREC_FP32;
        n->out = V(rel, 0), n->src[0] = V(emb, 0), n->n = H;
        if (c->rel_ln) {
            n->w[0] = gpu_gb_weight(b, "rel.ln.g", w ? w->rel_ln_g : NULL, 1, H, 1);
            n->w[1] = gpu_gb_weight(b, "rel.ln.b", w ? w->rel_ln_b : NULL, 1, H, 1);
        }
        char nm[GPU_GRAPH_NAME];
        for (int l = 0; l < c->layers; l++) {
            const gpu_layer_weights_t *y = w ? &w->layer[l] : NULL;
            const int want[2] = {c->c2p, c->p2c};
            int *out[2] = {rk, rq};
            const char *what[2] = {"pos_k", "pos_q"};
            for (int k = 0; k < 2; k++) {
                out[k][l] = -1;
                if (!want[k]) continue;
                const float *pw = y ? (k ? y->pos_q_w : y->pos_k_w) : NULL;
                const float *pb = y ? (k ? y->pos_q_b : y->pos_k_b) : NULL;
                snprintf(nm, sizeof nm, "l%d.%s", l, what[k]);
                out[k][l] = gpu_gb_const(b, nm, R, H); /* (2 span, H) */
                gpu_op_t *p = gpu_gb_op(b, 1, GPU_OP_LINEAR, what[k], l);
                p->prec = GPU_PREC_FP32;
                p->out = V(out[k][l], 0), p->src[0] = V(rel, 0);
                snprintf(nm, sizeof nm, "l%d.%s.w", l, what[k]);
                p->w[0] = gpu_gb_weight(b, nm, pw, H, H, 1);
                snprintf(nm, sizeof nm, "l%d.%s.b", l, what[k]);
                p->w[1] = gpu_gb_weight(b, nm, pb, 1, H, 1);
                p->n = H, p->k = H, p->epi = GPU_EPI_BIAS;
            }
        }
    }
    const int first = gpu_gb_postnorm_layers(b, x, c->rel_span > 0 && c->c2p ? rk : NULL,
                                             c->rel_span > 0 && c->p2c ? rq : NULL);
    gpu_gb_head(b, first, -1, -1, c->head_act);
}
