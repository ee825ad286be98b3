/* A BERT-family sequence classifier (BERT, DistilBERT, RoBERTa, XLM-RoBERTa, ELECTRA,
 * ModernBERT, DeBERTa-v2/v3) as read from a Hugging Face checkpoint directory (config.json,
 * model.safetensors, vocab.txt or tokenizer.json; tokenizer_config.json is the tokenizer's:
 * worker/text/tok_config.h), or made up with random weights in a named geometry for
 * benchmarks. Shared by every backend: the loader converts F32/F16/BF16 tensors to fp32 once;
 * what runs on them is the family's graph (gpu/graph.h, built by gpu/families/<family>.c,
 * which also holds the family's config keys and tensor names where BERT's generic ones do not
 * serve). The families share one layout: the fields marked ModernBERT and DeBERTa are 0 / NULL
 * elsewhere. */
#ifndef RECLASS_GPU_MODEL_H
#define RECLASS_GPU_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/families/registry.h"

#ifdef __cplusplus
extern "C" {
#endif

/* GPU_FAMILY_BERT, ..., GPU_FAMILY_DEBERTA_V2: one value a registry row, in its order
 * (gpu/families/registry.h); what a family is and does is its row's, never a switch on this. */
#define GPU_FAMILY_VALUE(sym, NAME) GPU_FAMILY_##NAME,
typedef enum { GPU_FAMILIES(GPU_FAMILY_VALUE) GPU_FAMILY_COUNT } gpu_model_family_t;
#undef GPU_FAMILY_VALUE

/* Activations: the FFN's (config's hidden_act) and the head's (fixed by the family). */
typedef enum {
    GPU_ACT_GELU,      /* "gelu": exact, 0.5 x (1 + erf(x / sqrt 2)) */
    GPU_ACT_GELU_TANH, /* "gelu_new" / "gelu_pytorch_tanh": the tanh approximation */
    GPU_ACT_RELU,      /* "relu" */
    GPU_ACT_TANH,      /* BERT's pooler, RoBERTa's classifier.dense */
} gpu_act_t;

typedef struct {
    gpu_model_family_t family;
    gpu_act_t act;      /* FFN activation */
    gpu_act_t head_act; /* between the head's dense (pool_w) and its output (cls_w) */
    int vocab_size;
    int emb_size; /* E: width of the embedding tables; == H except for ELECTRA (E <= H) */
    int hidden;   /* H */
    int layers;
    int heads;        /* H % heads == 0 */
    int intermediate; /* I */
    int max_pos;      /* longest sequence the position table covers (positions usable) */
    int pos_rows;     /* max_position_embeddings: rows of the checkpoint's table */
    int pos_offset;   /* position of a sequence's first token: 0, or pad_token_id + 1
                       * (RoBERTa, XLM-R); max_pos = pos_rows - pos_offset */
    int type_vocab;   /* rows of type_emb; DistilBERT has none and gets one zero row */
    int num_labels;   /* L: 1 .. GPU_MODEL_MAX_LABELS */
    float ln_eps;
    char **id2label; /* (num_labels) owned; "LABEL_i" when config has none */
    /* ModernBERT (0 elsewhere). Its positions are RoPE only: pos_rows 0, max_pos is
     * max_position_embeddings. */
    int glu;       /* 1: ff1 is (2I, H); the FFN is W2 (act(first I) * last I) (GeGLU) */
    int mean_pool; /* classifier_pooling "mean": the head reads the tokens' mean, not the first */
    int global_every; /* layer l attends globally when l % global_every == 0, else locally */
    int local_window; /* local_attention / 2: a local layer's token i sees |i - j| <= this */
    float rope_theta_global, rope_theta_local;
    /* DeBERTa (0 elsewhere). */
    int rel_span;    /* relative embedding rows / 2 (position_buckets, else max_relative_positions);
                      * 0: no relative attention */
    int rel_buckets; /* position_buckets, 0 for plain clamped distances */
    int rel_max_pos; /* max_relative_positions */
    int c2p, p2c;    /* pos_att_type has "c2p" / "p2c" */
    int att_scale_factor; /* 1 + c2p + p2c: scores are divided by sqrt(head_dim * this) */
    int share_att_key;    /* the relative embeddings go through the layer's own K and Q */
    int rel_ln;           /* norm_rel_ebd has "layer_norm" */
} gpu_model_config_t;

/* HF nn.Linear layout everywhere: weight (out, in) row-major, y = x W^T + b. */
typedef struct {
    float *q_w, *k_w, *v_w; /* (H, H) each */
    float *q_b, *k_b, *v_b; /* (H) each */
    float *ao_w;            /* (H, H) attention output projection */
    float *ao_b;            /* (H) */
    float *ln1_g, *ln1_b;   /* (H) LayerNorm after attention + residual */
    float *ff1_w;           /* (I, H) intermediate.dense */
    float *ff1_b;           /* (I) */
    float *ff2_w;           /* (H, I) output.dense */
    float *ff2_b;           /* (H) */
    float *ln2_g, *ln2_b;   /* (H) LayerNorm after FFN + residual */
    /* ModernBERT: ln1 is attn_norm (before attention; layer 0 has none), ln2 mlp_norm (before
     * the FFN), ff1 (2I, H) with ff1_b (2I). DeBERTa: the projections of the relative
     * embeddings, c2p's keys and p2c's queries: k_* / q_* themselves under share_att_key. */
    float *pos_k_w, *pos_k_b, *pos_q_w, *pos_q_b; /* (H, H), (H) */
} gpu_layer_weights_t;

/* Every backend embeds token t of a sequence as LN(word[id] + pos_emb[t] + type_emb[0]),
 * then (E != H) x = emb_proj(that): pos_emb already starts at the family's position offset,
 * so the backends know nothing of it. The head is act(pool(x[first token])) -> cls for all
 * families: BERT's pooler + tanh, DistilBERT's pre_classifier + ReLU, RoBERTa's and
 * ELECTRA's classifier.dense + tanh / GELU, then classifier (.out_proj). */
typedef struct {
    float *word_emb;                /* (vocab_size, E) */
    float *pos_emb;                 /* (max_pos, E): rows pos_offset.. of the checkpoint's table */
    float *type_emb;                /* (type_vocab, E); type id is always 0 */
    float *emb_ln_g, *emb_ln_b;     /* (E) */
    float *emb_proj_w;              /* (H, E) ELECTRA's embeddings_project, NULL when E == H */
    float *emb_proj_b;              /* (H) or NULL */
    gpu_layer_weights_t *layer;     /* (layers) */
    float *pool_w;                  /* (H, H) pooler / pre_classifier / classifier.dense */
    float *pool_b;                  /* (H) */
    float *cls_w;                   /* (L, H) classifier / classifier.out_proj */
    float *cls_b;                   /* (L) */
    float *final_ln_g, *final_ln_b; /* (H) ModernBERT's final_norm, NULL elsewhere */
    float *head_ln_g, *head_ln_b;   /* (H) ModernBERT's head.norm (after dense + act) */
    float *rel_emb;                 /* (2 rel_span, H) DeBERTa's rel_embeddings, NULL elsewhere */
    float *rel_ln_g, *rel_ln_b;     /* (H) its LayerNorm (norm_rel_ebd), NULL without one */
} gpu_model_weights_t;

typedef struct {
    gpu_model_config_t cfg;
    gpu_model_weights_t w; /* every pointer is a slice of blob */
    float *blob;           /* the one allocation holding all weights, fp32 */
    size_t blob_floats;
    char *dir;        /* checkpoint directory, NULL for a random model */
    char *vocab_path; /* dir/vocab.txt, NULL for a random model or one with tokenizer.json only */
    char *name;       /* "clinc150-bert-mini", or the geometry name */
} gpu_model_t;

/* Loads a checkpoint of one of the supported architectures (gpu_model_architectures). On failure
 * returns non-zero, *out is NULL, and err holds one line naming the file and what is wrong (CLI
 * exits 2). */
int gpu_model_load(const char *dir, gpu_model_t **out, char *err, size_t errlen);

/* config.json's parser, on its text (len bytes; name stands for the file in err), with the
 * checks gpu_model_load makes. On success cfg->id2label belongs to the caller (it is what
 * gpu_model_free frees); on failure nothing is left allocated. */
int gpu_model_parse_config(const char *json, size_t len, const char *name, gpu_model_config_t *cfg,
                           char *err, size_t errlen);

/* "BertForSequenceClassification, DistilBertForSequenceClassification, ...": every
 * architecture gpu_model_load takes, for messages. */
const char *gpu_model_architectures(void);

/* The family's name as its registry row gives it ("bert", ..., "modernbert", "deberta-v2") and an
 * activation's ("gelu", "gelu_new", "relu", "tanh"). */
const char *gpu_model_family_name(gpu_model_family_t f);
const char *gpu_model_act_name(gpu_act_t a);

/* Geometry by name: "bert-base" (12x768, 12 heads, 3072), "bert-mini" (4x256, 4, 1024),
 * "bert-large" (24x1024, 16, 4096), ...: vocab 30522, 512 positions, 2 types; "roberta-base"
 * and "xlmr-base" (bert-base's layers, vocab 50265 / 250002, 514 positions from offset 2, 1
 * type, gelu, LN eps 1e-5), "distilbert-base" (6x768, 12, 3072, no types), "electra-small"
 * (12x256, 4, 1024, E 128) and "electra-base" (bert-base's). The list: gpu_model_geometries.
 * Returns 0 or -1. */
int gpu_model_geometry(const char *name, int num_labels, gpu_model_config_t *cfg);

/* The most labels a model may have (config.json's, a --geometry's): label names alone (a
 * string per label) past this would exhaust memory before any check of the weights. */
#define GPU_MODEL_MAX_LABELS (1 << 24)

/* "bert-tiny, bert-mini, ...": the names gpu_model_geometry knows, for messages. */
const char *gpu_model_geometries(void);

/* A model of that geometry with seeded random weights (N(0, 0.02), LN gamma ~1). */
int gpu_model_init_random(const char *geometry, int num_labels, uint64_t seed, gpu_model_t **out,
                          char *err, size_t errlen);

/* Rows of ff1 (intermediate.dense / ModernBERT's Wi): 2I for a GLU FFN, else I. */
int gpu_model_ff1_rows(const gpu_model_config_t *cfg);

/* DeBERTa's relative position of query i to key j (rel = i - j) as Hugging Face's
 * make_log_bucket_position computes it in fp32 (the distance itself when there are no
 * buckets), then the row of the relative embeddings it reads: clamp(bucket + span, 0,
 * 2 span - 1). The disentangled attention op's rule, which every backend reads (model.c),
 * so no backend depends on a family's file. */
int gpu_model_rel_row(const gpu_model_config_t *cfg, int rel);

/* Total parameter count of a geometry (for FLOP accounting). */
size_t gpu_model_param_count(const gpu_model_config_t *cfg);

void gpu_model_free(gpu_model_t *model);

#ifdef __cplusplus
}
#endif
#endif
