/* A sequence classifier of one of the registry's families (gpu/families/registry.h: BERT and
 * its relatives, ModernBERT, DeBERTa-v2/v3, ...) as read from a Hugging Face checkpoint directory
 * (config.json, model.safetensors, vocab.txt or tokenizer.json; tokenizer_config.json is the
 * tokenizer's: worker/text/tok_config.h), or made up with random weights in a named geometry for
 * benchmarks. Shared by every backend: the loader converts F32/F16/BF16 tensors to fp32 once;
 * what runs on them is the family's graph (gpu/graph.h, built by gpu/families/<family>.c,
 * which also holds the family's config keys and tensor names where BERT's generic ones do not
 * serve). The families share one layout; what a family adds is its own part of it (`own`),
 * which only its file reads. */
#ifndef RECLASS_GPU_MODEL_H
#define RECLASS_GPU_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#include "gpu/families/registry.h"

#ifdef __cplusplus
extern "C" {
#endif

/* GPU_FAMILY_BERT, ..., GPU_FAMILY_DEBERTA_V2: one value a registry row, in its order
 * (gpu/families/registry.h); what a family is and does is its row's, never a switch on this. */
#define GPU_FAMILY_VALUE(sym, NAME) GPU_FAMILY_##NAME,
typedef enum { GPU_FAMILIES(GPU_FAMILY_VALUE) GPU_FAMILY_COUNT } gpu_model_family_t;
#undef GPU_FAMILY_VALUE

/* Room for a family's own part of the shared structs (gpu/families/<family>.c asserts its
 * part fits): bytes of the config, slices of the blob per model and per layer. */
#define GPU_MODEL_OWN_CONFIG        64
#define GPU_MODEL_OWN_WEIGHTS       8
#define GPU_MODEL_OWN_LAYER_WEIGHTS 8

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
    /* The family's own knobs (ModernBERT's RoPE thetas and window, DeBERTa's relative
     * positions): bytes only its file reads and writes (gpu/families/<family>.c, through
     * memcpy into its own struct), 0 elsewhere, so a copy of the config copies them. */
    unsigned char own[GPU_MODEL_OWN_CONFIG];
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
     * the FFN), ff1 (2I, H) with ff1_b (2I) (gpu_model_ff1_rows). */
    float *own[GPU_MODEL_OWN_LAYER_WEIGHTS]; /* the family's own slices of the layer (its file
                                              * names them, e.g. DeBERTa's relative K and Q
                                              * projections), NULL elsewhere */
} gpu_layer_weights_t;

/* Every backend embeds token t of a sequence as LN(word[id] + pos_emb[t] + type_emb[0]),
 * then (E != H) x = emb_proj(that): pos_emb already starts at the family's position offset,
 * so the backends know nothing of it. The head is act(pool(x[first token])) -> cls for all
 * families: BERT's pooler + tanh, DistilBERT's pre_classifier + ReLU, RoBERTa's and
 * ELECTRA's classifier.dense + tanh / GELU, then classifier (.out_proj). */
typedef struct {
    float *word_emb;            /* (vocab_size, E) */
    float *pos_emb;             /* (max_pos, E): rows pos_offset.. of the checkpoint's table */
    float *type_emb;            /* (type_vocab, E); type id is always 0 */
    float *emb_ln_g, *emb_ln_b; /* (E) */
    float *emb_proj_w;          /* (H, E) ELECTRA's embeddings_project, NULL when E == H */
    float *emb_proj_b;          /* (H) or NULL */
    gpu_layer_weights_t *layer; /* (layers) */
    float *pool_w;              /* (H, H) pooler / pre_classifier / classifier.dense */
    float *pool_b;              /* (H) */
    float *cls_w;               /* (L, H) classifier / classifier.out_proj */
    float *cls_b;               /* (L) */
    float *own[GPU_MODEL_OWN_WEIGHTS]; /* the family's own slices after the head's (its file
                                        * names them, e.g. ModernBERT's final norm, DeBERTa's
                                        * relative embeddings), NULL elsewhere */
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
 * *out is NULL and err holds one line naming the file and what is wrong: COMMON_USAGE (the CLI
 * exits 2), or COMMON_FATAL out of memory. */
common_status_t gpu_model_load(const char *dir, gpu_model_t **out, common_err_t *err);

/* config.json's parser, on its text (len bytes; name stands for the file in err), with the
 * checks gpu_model_load makes. On success cfg->id2label belongs to the caller (it is what
 * gpu_model_free frees); on failure nothing is left allocated. */
common_status_t gpu_model_parse_config(const char *json, size_t len, const char *name,
                                       gpu_model_config_t *cfg, common_err_t *err);

/* "BertForSequenceClassification, DistilBertForSequenceClassification, ...": every
 * architecture gpu_model_load takes, for messages. */
const char *gpu_model_architectures(void);
/* "bert, distilbert, ...": every family's name (gpu_model_family_name), in registry order. */
const char *gpu_model_families(void);

/* The family's name as its registry row gives it ("bert", ..., "modernbert", "deberta-v2") and an
 * activation's ("gelu", "gelu_new", "relu", "tanh"). */
const char *gpu_model_family_name(gpu_model_family_t f);
const char *gpu_model_act_name(gpu_act_t a);

/* Geometry by name ("bert-base", "modernbert-base", ...: each family's rows, in its file):
 * cfg with num_labels labels. The list: gpu_model_geometries. Returns 0 or -1. */
int gpu_model_geometry(const char *name, int num_labels, gpu_model_config_t *cfg);

/* The most labels a model may have (config.json's, a --geometry's): label names alone (a
 * string per label) past this would exhaust memory before any check of the weights. */
#define GPU_MODEL_MAX_LABELS (1 << 24)

/* "bert-tiny, bert-mini, ...": the names gpu_model_geometry knows, for messages. */
const char *gpu_model_geometries(void);

/* A model of that geometry with seeded random weights (N(0, 0.02), LN gamma ~1). */
common_status_t gpu_model_init_random(const char *geometry, int num_labels, uint64_t seed,
                                      gpu_model_t **out, common_err_t *err);

/* Rows of ff1 (intermediate.dense / ModernBERT's Wi): 2I when the family's FFN is gated
 * (gpu_model_glu: GeGLU), else I. */
int gpu_model_ff1_rows(const gpu_model_config_t *cfg);
int gpu_model_glu(const gpu_model_config_t *cfg);

/* Total parameter count of a geometry (for FLOP accounting). */
size_t gpu_model_param_count(const gpu_model_config_t *cfg);

void gpu_model_free(gpu_model_t *model);

#ifdef __cplusplus
}
#endif
#endif
