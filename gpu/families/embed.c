/* The embedding block every family starts with: word (+ position) (+ token type 0), then
 * LayerNorm, into a new (tokens, E) tensor. */
#include "gpu/families/family.h"

int gpu_gb_embed(gpu_gb_t *b, int with_pos, int with_type) {
    const gpu_model_config_t *c = &b->g->cfg;
    const gpu_model_weights_t *w = b->w;
    const int E = c->emb_size;
    gpu_op_t *op = gpu_gb_op(b, 0, GPU_OP_EMBED, "emb", -1);
    op->w[0] = gpu_gb_weight(b, "emb.word", w ? w->word_emb : NULL, c->vocab_size, E, 0);
    if (with_pos) op->w[1] = gpu_gb_weight(b, "emb.pos", w ? w->pos_emb : NULL, c->max_pos, E, 0);
    if (with_type) op->w[2] = gpu_gb_weight(b, "emb.type", w ? w->type_emb : NULL, 1, E, 0);
    op->w[3] = gpu_gb_weight(b, "emb.ln.g", w ? w->emb_ln_g : NULL, 1, E, 1);
    op->w[4] = gpu_gb_weight(b, "emb.ln.b", w ? w->emb_ln_b : NULL, 1, E, 1);
    op->n = E;
    op->out = gpu_gb_view(gpu_gb_act(b, E == c->hidden ? "x" : "emb", GPU_ROWS_TOKENS, E), 0);
    return op->out.t;
}
