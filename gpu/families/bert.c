/* BERT and the four families that share its layers: DistilBERT, RoBERTa, XLM-RoBERTa and
 * ELECTRA. They differ only in their config.json keys (DistilBERT's own names, RoBERTa's
 * position offset, ELECTRA's embedding size), their tensor names (a row of names each, read
 * by one binder: DistilBERT's missing token types are one zero row) and their head's
 * activation. The forward pass: embeddings (ELECTRA: projected from E to H), post-norm
 * layers, the head on the first token. */
#include <stdio.h>
#include <string.h>

#include "gpu/families/family.h"

/* ---- config.json ---- */

static common_status_t cfg_int(json_t *root, const char *path, const char *key, int *out,
                               common_err_t *err) {
    return gpu_model_cfg_int_min(root, path, key, 1, out, err);
}

/* The FFN activation under key ("hidden_act", DistilBERT's "activation"). */
static common_status_t cfg_act(json_t *root, const char *path, const char *key, gpu_act_t *out,
                               common_err_t *err) {
    return gpu_model_cfg_act(root, path, key, NULL, out, err);
}

/* The config.json keys of the dimensions every family here has: BertConfig's names (RoBERTa's,
 * XLM-R's and ELECTRA's too) or DistilBertConfig's. */
typedef struct {
    const char *vocab, *hidden, *layers, *heads, *intermediate, *positions, *act;
} dim_keys_t;

static const dim_keys_t bert_keys = {"vocab_size",        "hidden_size",
                                     "num_hidden_layers", "num_attention_heads",
                                     "intermediate_size", "max_position_embeddings",
                                     "hidden_act"};
static const dim_keys_t distilbert_keys = {"vocab_size", "dim",        "n_layers",
                                           "n_heads",    "hidden_dim", "max_position_embeddings",
                                           "activation"};

static common_status_t read_dims(json_t *root, const char *path, const dim_keys_t *k,
                                 gpu_model_config_t *c, common_err_t *err) {
    if (cfg_int(root, path, k->vocab, &c->vocab_size, err) ||
        cfg_int(root, path, k->hidden, &c->hidden, err) ||
        cfg_int(root, path, k->layers, &c->layers, err) ||
        cfg_int(root, path, k->heads, &c->heads, err) ||
        cfg_int(root, path, k->intermediate, &c->intermediate, err) ||
        cfg_int(root, path, k->positions, &c->pos_rows, err) ||
        cfg_act(root, path, k->act, &c->act, err))
        return err->code;
    c->emb_size = c->hidden;
    return COMMON_OK;
}

/* BertConfig's dimensions, token types included. */
static common_status_t bert_dims(json_t *root, const char *path, gpu_model_config_t *c,
                                 common_err_t *err) {
    return read_dims(root, path, &bert_keys, c, err) ||
                   cfg_int(root, path, "type_vocab_size", &c->type_vocab, err)
               ? err->code
               : COMMON_OK;
}

/* BertConfig's knobs after the dimensions (and a family's own keys). */
static common_status_t bert_rest(json_t *root, const char *path, gpu_model_config_t *c,
                                 common_err_t *err) {
    if (c->emb_size > c->hidden) {
        return common_err_set(err, COMMON_USAGE,
                              "%s: embedding_size %d above hidden_size %d is not supported", path,
                              c->emb_size, c->hidden);
    }
    json_t *pet = json_object_get(root, "position_embedding_type");
    if (pet && !(json_is_string(pet) && strcmp(json_string_value(pet), "absolute") == 0)) {
        return common_err_set(
            err, COMMON_USAGE, "%s: unsupported position_embedding_type '%s' (only \"absolute\")",
            path, json_is_string(pet) ? json_string_value(pet) : "(not a string)");
    }
    return gpu_model_cfg_eps(root, path, "layer_norm_eps", 0, &c->ln_eps, err);
}

static common_status_t config_bert(json_t *root, const char *path, gpu_model_config_t *c,
                                   common_err_t *err) {
    return bert_dims(root, path, c, err) || bert_rest(root, path, c, err) ? err->code : COMMON_OK;
}

/* HF numbers non-pad tokens from padding_idx + 1; batches here hold no padding. */
static common_status_t config_roberta(json_t *root, const char *path, gpu_model_config_t *c,
                                      common_err_t *err) {
    int pad;
    if (bert_dims(root, path, c, err) ||
        gpu_model_cfg_int_min(root, path, "pad_token_id", 0, &pad, err))
        return err->code;
    c->pos_offset = pad + 1;
    return bert_rest(root, path, c, err);
}

static common_status_t config_electra(json_t *root, const char *path, gpu_model_config_t *c,
                                      common_err_t *err) {
    return bert_dims(root, path, c, err) ||
                   cfg_int(root, path, "embedding_size", &c->emb_size, err) ||
                   bert_rest(root, path, c, err)
               ? err->code
               : COMMON_OK;
}

/* DistilBertConfig: no token types, no position offset, LayerNorm eps fixed. */
static common_status_t config_distilbert(json_t *root, const char *path, gpu_model_config_t *c,
                                         common_err_t *err) {
    if (read_dims(root, path, &distilbert_keys, c, err)) return err->code;
    c->type_vocab = 1; /* one zero row, so every backend adds "type 0" alike */
    c->ln_eps = 1e-12f;
    return COMMON_OK;
}

/* ---- the tensors: the layout is shared, only the names differ ---- */

typedef struct {
    const char *emb;   /* embeddings module: word_embeddings, position_embeddings, LayerNorm */
    const char *type;  /* its token-type table, NULL where the family has none */
    const char *proj;  /* the E -> H projection, NULL where E == H */
    const char *layer; /* printf pattern of layer l's prefix */
    const char *q, *k, *v, *ao, *ln1, *ff1, *ff2, *ln2;
    const char *pool, *cls; /* the head's dense and output projections */
} names_t;

/* BERT's layer names, shared by RoBERTa, XLM-R and ELECTRA. */
#define BERT_LAYER                                                                                 \
    .q = "attention.self.query", .k = "attention.self.key", .v = "attention.self.value",           \
    .ao = "attention.output.dense", .ln1 = "attention.output.LayerNorm",                           \
    .ff1 = "intermediate.dense", .ff2 = "output.dense", .ln2 = "output.LayerNorm"

static const names_t names_bert = {.emb = "bert.embeddings",
                                   .type = "bert.embeddings.token_type_embeddings",
                                   .layer = "bert.encoder.layer.%d",
                                   BERT_LAYER,
                                   .pool = "bert.pooler.dense",
                                   .cls = "classifier"};
static const names_t names_distilbert = {.emb = "distilbert.embeddings",
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
                                         .cls = "classifier"};
/* XLMRobertaModel keeps RoBERTa's base_model_prefix: one row of names for both. */
static const names_t names_roberta = {.emb = "roberta.embeddings",
                                      .type = "roberta.embeddings.token_type_embeddings",
                                      .layer = "roberta.encoder.layer.%d",
                                      BERT_LAYER,
                                      .pool = "classifier.dense",
                                      .cls = "classifier.out_proj"};
static const names_t names_electra = {.emb = "electra.embeddings",
                                      .type = "electra.embeddings.token_type_embeddings",
                                      .proj = "electra.embeddings_project",
                                      .layer = "electra.encoder.layer.%d",
                                      BERT_LAYER,
                                      .pool = "classifier.dense",
                                      .cls = "classifier.out_proj"};

/* Word, position (all pos_rows rows: the blob's table starts pos_offset rows before
 * w->pos_emb), type (or the zero row), LayerNorm and ELECTRA's projection. */
static common_status_t bind_embeddings(gpu_model_t *m, const names_t *nm, const gpu_st_file_t *f,
                                       common_err_t *err) {
    const gpu_model_config_t *c = &m->cfg;
    gpu_model_weights_t *w = &m->w;
    const int E = c->emb_size;
    char q[256];
    snprintf(q, sizeof q, "%s.word_embeddings.weight", nm->emb);
    if (gpu_model_load_tensor(f, q, NULL, w->word_emb, c->vocab_size, E, err)) return err->code;
    snprintf(q, sizeof q, "%s.position_embeddings.weight", nm->emb);
    float *pos_table = w->pos_emb - (size_t)c->pos_offset * E;
    if (gpu_model_load_tensor(f, q, NULL, pos_table, c->pos_rows, E, err)) return err->code;
    if (nm->type) {
        snprintf(q, sizeof q, "%s.weight", nm->type);
        if (gpu_model_load_tensor(f, q, NULL, w->type_emb, c->type_vocab, E, err)) return err->code;
    } else {
        memset(w->type_emb, 0, sizeof(float) * (size_t)c->type_vocab * E);
    }
    snprintf(q, sizeof q, "%s.LayerNorm", nm->emb);
    if (gpu_model_load_ln(f, q, w->emb_ln_g, w->emb_ln_b, E, err)) return err->code;
    if (c->emb_size == c->hidden) return COMMON_OK;
    if (!nm->proj) {
        return common_err_set(err, COMMON_USAGE,
                              "%s: embedding size %d != hidden %d without a projection",
                              gpu_st_path(f), c->emb_size, c->hidden);
    }
    return gpu_model_load_linear(f, nm->proj, w->emb_proj_w, w->emb_proj_b, c->hidden, E, err);
}

static common_status_t bind_names(gpu_model_t *m, const names_t *nm, const gpu_st_file_t *f,
                                  common_err_t *err) {
    const gpu_model_config_t *c = &m->cfg;
    gpu_model_weights_t *w = &m->w;
    const int H = c->hidden, I = c->intermediate;
    if (bind_embeddings(m, nm, f, err)) return err->code;
    for (int l = 0; l < c->layers; l++) {
        gpu_layer_weights_t *y = &w->layer[l];
        char p[128], q[192];
        snprintf(p, sizeof p, nm->layer, l);
#define LIN(sub, W, B, O, IN)                                                                      \
    (snprintf(q, sizeof q, "%s.%s", p, sub), gpu_model_load_linear(f, q, W, B, O, IN, err))
#define LN(sub, G, B)                                                                              \
    (snprintf(q, sizeof q, "%s.%s", p, sub), gpu_model_load_ln(f, q, G, B, H, err))
        if (LIN(nm->q, y->q_w, y->q_b, H, H) || LIN(nm->k, y->k_w, y->k_b, H, H) ||
            LIN(nm->v, y->v_w, y->v_b, H, H) || LIN(nm->ao, y->ao_w, y->ao_b, H, H) ||
            LN(nm->ln1, y->ln1_g, y->ln1_b) || LIN(nm->ff1, y->ff1_w, y->ff1_b, I, H) ||
            LIN(nm->ff2, y->ff2_w, y->ff2_b, H, I) || LN(nm->ln2, y->ln2_g, y->ln2_b))
            return err->code;
#undef LIN
#undef LN
    }
    if (gpu_model_load_linear(f, nm->pool, w->pool_w, w->pool_b, H, H, err) ||
        gpu_model_load_linear(f, nm->cls, w->cls_w, w->cls_b, c->num_labels, H, err))
        return err->code;
    return COMMON_OK;
}

#define BINDER(fam)                                                                                \
    static common_status_t bind_##fam(gpu_model_t *m, const gpu_st_file_t *f, common_err_t *err) { \
        return bind_names(m, &names_##fam, f, err);                                                \
    }
BINDER(bert)
BINDER(distilbert)
BINDER(roberta)
BINDER(electra)

/* ---- named geometries ---- */

#define BERT_GEOMETRY(n, l, h, a, i)                                                               \
    { n, l, h, a, i, 30522, 0, 512, 0, 2, 1e-12f }
static const gpu_model_geometry_t geometries_bert[] = {
    BERT_GEOMETRY("bert-tiny", 2, 128, 2, 512),    BERT_GEOMETRY("bert-mini", 4, 256, 4, 1024),
    BERT_GEOMETRY("bert-small", 4, 512, 8, 2048),  BERT_GEOMETRY("bert-medium", 8, 512, 8, 2048),
    BERT_GEOMETRY("bert-base", 12, 768, 12, 3072), BERT_GEOMETRY("bert-large", 24, 1024, 16, 4096),
};
static const gpu_model_geometry_t geometries_distilbert[] = {
    {"distilbert-base", 6, 768, 12, 3072, 30522, 0, 512, 0, 1, 1e-12f},
};
static const gpu_model_geometry_t geometries_roberta[] = {
    {"roberta-base", 12, 768, 12, 3072, 50265, 0, 514, 2, 1, 1e-5f},
};
static const gpu_model_geometry_t geometries_xlm_roberta[] = {
    {"xlmr-base", 12, 768, 12, 3072, 250002, 0, 514, 2, 1, 1e-5f},
};
static const gpu_model_geometry_t geometries_electra[] = {
    {"electra-small", 12, 256, 4, 1024, 30522, 128, 512, 0, 2, 1e-12f},
    {"electra-base", 12, 768, 12, 3072, 30522, 0, 512, 0, 2, 1e-12f},
};

/* DistilBERT's checkpoint has no token types: its one type row is zeros. */
static void init_random_distilbert(gpu_model_t *m) {
    memset(m->w.type_emb, 0, sizeof(float) * (size_t)m->cfg.type_vocab * (size_t)m->cfg.emb_size);
}

/* ---- the forward pass ---- */

static void build(gpu_gb_t *b) {
    const gpu_model_config_t *c = &b->g->cfg;
    const gpu_model_weights_t *w = b->w;
    const int H = c->hidden, E = c->emb_size;
    int x = gpu_gb_embed(b, 1, 1);
    if (E != H) {
        const int pw = gpu_gb_weight(b, "emb.proj.w", w ? w->emb_proj_w : NULL, H, E, 0);
        const int pb = gpu_gb_weight(b, "emb.proj.b", w ? w->emb_proj_b : NULL, 1, H, 0);
        const int e = x;
        x = gpu_gb_act(b, "x", GPU_ROWS_TOKENS, H);
        gpu_gb_linear(b, "emb.proj", -1, gpu_gb_prec(b), gpu_gb_view(x, 0), gpu_gb_view(e, 0), pw,
                      pb, H, E, GPU_EPI_BIAS, c->act);
    }
    const int first = gpu_gb_postnorm_layers(b, x, NULL);
    gpu_gb_head(b, first, -1, -1, c->head_act);
}

/* The head's activation is the family's: ElectraClassificationHead applies
 * get_activation("gelu") whatever hidden_act says. */
#define BERT_ROW(sym, arch_, name_, act, cfg, names, geoms, random)                                \
    const gpu_family_t gpu_family_##sym = {                                                        \
        .rules = {.arch = arch_,                                                                   \
                  .name = name_,                                                                   \
                  .head_act = act,                                                                 \
                  .config = cfg,                                                                   \
                  .bind = bind_##names,                                                            \
                  .geometries = geoms,                                                             \
                  .n_geometries = (int)(sizeof geoms / sizeof geoms[0]),                           \
                  .init_random = random},                                                          \
        .build = build,                                                                            \
    }
BERT_ROW(bert, "BertForSequenceClassification", "bert", GPU_ACT_TANH, config_bert, bert,
         geometries_bert, NULL);
BERT_ROW(distilbert, "DistilBertForSequenceClassification", "distilbert", GPU_ACT_RELU,
         config_distilbert, distilbert, geometries_distilbert, init_random_distilbert);
BERT_ROW(roberta, "RobertaForSequenceClassification", "roberta", GPU_ACT_TANH, config_roberta,
         roberta, geometries_roberta, NULL);
BERT_ROW(xlm_roberta, "XLMRobertaForSequenceClassification", "xlm-roberta", GPU_ACT_TANH,
         config_roberta, roberta, geometries_xlm_roberta, NULL);
BERT_ROW(electra, "ElectraForSequenceClassification", "electra", GPU_ACT_GELU, config_electra,
         electra, geometries_electra, NULL);
