/* The tensors of each family's checkpoint -> the slices of gpu_model_t's blob. The families
 * share one layout (gpu/model/model.h); only the names differ, so each has a row of names
 * and one binder reads them all. */
#include <stdio.h>
#include <string.h>

#include "gpu/model/model_int.h"

typedef struct {
    const char *emb;   /* embeddings module: word_embeddings, position_embeddings, LayerNorm */
    const char *type;  /* its token-type table, NULL where the family has none */
    const char *proj;  /* the E -> H projection, NULL where E == H */
    const char *layer; /* printf pattern of layer l's prefix */
    const char *q, *k, *v, *ao, *ln1, *ff1, *ff2, *ln2;
    const char *pool, *cls; /* the head's dense and output projections */
} family_names_t;

/* BERT's layer names, shared by RoBERTa, XLM-R and ELECTRA. */
#define BERT_LAYER                                                                                 \
    .q = "attention.self.query", .k = "attention.self.key", .v = "attention.self.value",           \
    .ao = "attention.output.dense", .ln1 = "attention.output.LayerNorm",                           \
    .ff1 = "intermediate.dense", .ff2 = "output.dense", .ln2 = "output.LayerNorm"

static const family_names_t names[GPU_FAMILY_COUNT] = {
    [GPU_FAMILY_BERT] = {.emb = "bert.embeddings",
                         .type = "bert.embeddings.token_type_embeddings",
                         .layer = "bert.encoder.layer.%d",
                         BERT_LAYER,
                         .pool = "bert.pooler.dense",
                         .cls = "classifier"},
    [GPU_FAMILY_DISTILBERT] = {.emb = "distilbert.embeddings",
                               .layer = "distilbert.transformer.layer.%d",
                               .q = "attention.q_lin",
                               .k = "attention.k_lin",
                               .v = "attention.v_lin",
                               .ao = "attention.out_lin",
                               .ln1 = "sa_layer_norm",
                               .ff1 = "ffn.lin1",
                               .ff2 = "ffn.lin2",
                               .ln2 = "output_layer_norm",
                               .pool = "pre_classifier",
                               .cls = "classifier"},
    [GPU_FAMILY_ROBERTA] = {.emb = "roberta.embeddings",
                            .type = "roberta.embeddings.token_type_embeddings",
                            .layer = "roberta.encoder.layer.%d",
                            BERT_LAYER,
                            .pool = "classifier.dense",
                            .cls = "classifier.out_proj"},
    /* XLMRobertaModel keeps RoBERTa's base_model_prefix. */
    [GPU_FAMILY_XLM_ROBERTA] = {.emb = "roberta.embeddings",
                                .type = "roberta.embeddings.token_type_embeddings",
                                .layer = "roberta.encoder.layer.%d",
                                BERT_LAYER,
                                .pool = "classifier.dense",
                                .cls = "classifier.out_proj"},
    [GPU_FAMILY_ELECTRA] = {.emb = "electra.embeddings",
                            .type = "electra.embeddings.token_type_embeddings",
                            .proj = "electra.embeddings_project",
                            .layer = "electra.encoder.layer.%d",
                            BERT_LAYER,
                            .pool = "classifier.dense",
                            .cls = "classifier.out_proj"},
};

static int bind_embeddings(gpu_model_t *m, const family_names_t *nm, const gpu_st_file_t *f,
                           char *err, size_t errlen) {
    const gpu_model_config_t *c = &m->cfg;
    gpu_model_weights_t *w = &m->w;
    const int E = c->emb_size;
    char q[256];
    snprintf(q, sizeof q, "%s.word_embeddings.weight", nm->emb);
    if (gpu_model_load_tensor(f, q, NULL, w->word_emb, c->vocab_size, E, err, errlen)) return -1;
    snprintf(q, sizeof q, "%s.position_embeddings.weight", nm->emb);
    float *pos_table = w->pos_emb - (size_t)c->pos_offset * E;
    if (gpu_model_load_tensor(f, q, NULL, pos_table, c->pos_rows, E, err, errlen)) return -1;
    if (nm->type) {
        snprintf(q, sizeof q, "%s.weight", nm->type);
        if (gpu_model_load_tensor(f, q, NULL, w->type_emb, c->type_vocab, E, err, errlen))
            return -1;
    } else {
        memset(w->type_emb, 0, sizeof(float) * (size_t)c->type_vocab * E);
    }
    snprintf(q, sizeof q, "%s.LayerNorm", nm->emb);
    if (gpu_model_load_ln(f, q, w->emb_ln_g, w->emb_ln_b, E, err, errlen)) return -1;
    if (c->emb_size == c->hidden) return 0;
    if (!nm->proj) {
        snprintf(err, errlen, "%s: embedding size %d != hidden %d without a projection",
                 gpu_st_path(f), c->emb_size, c->hidden);
        return -1;
    }
    return gpu_model_load_linear(f, nm->proj, w->emb_proj_w, w->emb_proj_b, c->hidden, E, err,
                                 errlen);
}

int gpu_model_bind_weights(gpu_model_t *m, const gpu_st_file_t *f, char *err, size_t errlen) {
    const gpu_model_config_t *c = &m->cfg;
    const family_names_t *nm = &names[c->family];
    gpu_model_weights_t *w = &m->w;
    const int H = c->hidden, I = c->intermediate;
    const gpu_model_family_rules_t *r = gpu_model_family_of(c->family);
    if (r && r->bind) return r->bind(m, f, err, errlen);
    if (bind_embeddings(m, nm, f, err, errlen)) return -1;
    for (int l = 0; l < c->layers; l++) {
        gpu_layer_weights_t *y = &w->layer[l];
        char p[128], q[192];
        snprintf(p, sizeof p, nm->layer, l);
#define LIN(sub, W, B, O, IN)                                                                      \
    (snprintf(q, sizeof q, "%s.%s", p, sub), gpu_model_load_linear(f, q, W, B, O, IN, err, errlen))
#define LN(sub, G, B)                                                                              \
    (snprintf(q, sizeof q, "%s.%s", p, sub), gpu_model_load_ln(f, q, G, B, H, err, errlen))
        if (LIN(nm->q, y->q_w, y->q_b, H, H) || LIN(nm->k, y->k_w, y->k_b, H, H) ||
            LIN(nm->v, y->v_w, y->v_b, H, H) || LIN(nm->ao, y->ao_w, y->ao_b, H, H) ||
            LN(nm->ln1, y->ln1_g, y->ln1_b) || LIN(nm->ff1, y->ff1_w, y->ff1_b, I, H) ||
            LIN(nm->ff2, y->ff2_w, y->ff2_b, H, I) || LN(nm->ln2, y->ln2_g, y->ln2_b))
            return -1;
#undef LIN
#undef LN
    }
    if (gpu_model_load_linear(f, nm->pool, w->pool_w, w->pool_b, H, H, err, errlen) ||
        gpu_model_load_linear(f, nm->cls, w->cls_w, w->cls_b, c->num_labels, H, err, errlen))
        return -1;
    return 0;
}
