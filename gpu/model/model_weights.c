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

/* The tensor name (or its legacy alias, for LayerNorm gamma/beta), checked for the expected
 * shape (d0) or (d0, d1), or NULL with err set. */
static const gpu_st_tensor_t *find_tensor(const gpu_st_file_t *f, const char *name,
                                          const char *alias, int64_t d0, int64_t d1, char *err,
                                          size_t errlen) {
    const gpu_st_tensor_t *t = gpu_st_find(f, name);
    if (!t && alias) t = gpu_st_find(f, alias);
    if (!t) {
        snprintf(err, errlen, "%s: missing tensor '%s'", gpu_st_path(f), name);
        return NULL;
    }
    if (!gpu_st_is_float(t)) {
        snprintf(err, errlen, "%s: tensor '%s' has unsupported dtype '%s' (F32, F16, BF16 only)",
                 gpu_st_path(f), t->name, t->dtype_name);
        return NULL;
    }
    int nd = d1 > 0 ? 2 : 1;
    if (t->ndim != nd || t->shape[0] != d0 || (nd == 2 && t->shape[1] != d1)) {
        char got[96] = "[", *p = got + 1;
        for (int i = 0; i < t->ndim && p < got + sizeof got - 24; i++)
            p += sprintf(p, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        strcpy(p, "]");
        if (nd == 2)
            snprintf(err, errlen, "%s: tensor '%s' has shape %s, expected [%lld, %lld]",
                     gpu_st_path(f), t->name, got, (long long)d0, (long long)d1);
        else
            snprintf(err, errlen, "%s: tensor '%s' has shape %s, expected [%lld]", gpu_st_path(f),
                     t->name, got, (long long)d0);
        return NULL;
    }
    return t;
}

int gpu_model_load_tensor(const gpu_st_file_t *f, const char *name, const char *alias, float *dst,
                          int64_t d0, int64_t d1, char *err, size_t errlen) {
    const gpu_st_tensor_t *t = find_tensor(f, name, alias, d0, d1, err, errlen);
    if (!t) return -1;
    gpu_st_read_f32(f, t, dst);
    return 0;
}

int gpu_model_load_optional(const gpu_st_file_t *f, const char *name, float *dst, int64_t d0,
                            int64_t d1, float fill, char *err, size_t errlen) {
    if (gpu_st_find(f, name)) return gpu_model_load_tensor(f, name, NULL, dst, d0, d1, err, errlen);
    for (int64_t i = 0; i < d0 * (d1 > 0 ? d1 : 1); i++)
        dst[i] = fill;
    return 0;
}

/* LayerNorm prefix.{weight,bias}, or the TF-era prefix.{gamma,beta}. */
int gpu_model_load_ln(const gpu_st_file_t *f, const char *prefix, float *g, float *b, int n,
                      char *err, size_t errlen) {
    char n1[256], a1[256], n2[256], a2[256];
    snprintf(n1, sizeof n1, "%s.weight", prefix);
    snprintf(a1, sizeof a1, "%s.gamma", prefix);
    snprintf(n2, sizeof n2, "%s.bias", prefix);
    snprintf(a2, sizeof a2, "%s.beta", prefix);
    if (gpu_model_load_tensor(f, n1, a1, g, n, 0, err, errlen)) return -1;
    return gpu_model_load_tensor(f, n2, a2, b, n, 0, err, errlen);
}

int gpu_model_load_linear(const gpu_st_file_t *f, const char *prefix, float *w, float *b, int out,
                          int in, char *err, size_t errlen) {
    char nw[256], nb[256];
    snprintf(nw, sizeof nw, "%s.weight", prefix);
    snprintf(nb, sizeof nb, "%s.bias", prefix);
    if (gpu_model_load_tensor(f, nw, NULL, w, out, in, err, errlen)) return -1;
    return gpu_model_load_tensor(f, nb, NULL, b, out, 0, err, errlen);
}

/* Word, position (all pos_rows rows: the blob's table starts pos_offset rows before
 * w->pos_emb), type (or the zero row), LayerNorm and ELECTRA's projection. */
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
    if (c->family == GPU_FAMILY_MODERNBERT) return gpu_model_modernbert_bind(m, f, err, errlen);
    if (c->family == GPU_FAMILY_DEBERTA_V2) return gpu_model_deberta_bind(m, f, err, errlen);
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
