/* A BERT-family sequence classifier as read from a Hugging Face checkpoint directory
 * (config.json, model.safetensors, vocab.txt; tokenizer_config.json is the tokenizer's:
 * worker/text/tok_config.h), or made up with random weights in a named geometry for
 * benchmarks. Shared by every backend: the loader
 * converts F32/F16/BF16 tensors to fp32 once; each backend then converts to what it runs. */
#ifndef RECLASS_GPU_MODEL_H
#define RECLASS_GPU_MODEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int vocab_size;
    int hidden; /* H */
    int layers;
    int heads;        /* H % heads == 0 */
    int intermediate; /* I */
    int max_pos;      /* longest sequence the position table covers */
    int type_vocab;
    int num_labels; /* L */
    float ln_eps;
    char **id2label; /* (num_labels) owned; "LABEL_i" when config has none */
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
} gpu_layer_weights_t;

typedef struct {
    float *word_emb;            /* (vocab_size, H) */
    float *pos_emb;             /* (max_pos, H) */
    float *type_emb;            /* (type_vocab, H); type id is always 0 */
    float *emb_ln_g, *emb_ln_b; /* (H) */
    gpu_layer_weights_t *layer; /* (layers) */
    float *pool_w;              /* (H, H) */
    float *pool_b;              /* (H) */
    float *cls_w;               /* (L, H) */
    float *cls_b;               /* (L) */
} gpu_model_weights_t;

typedef struct {
    gpu_model_config_t cfg;
    gpu_model_weights_t w; /* every pointer is a slice of blob */
    float *blob;           /* the one allocation holding all weights, fp32 */
    size_t blob_floats;
    char *dir;        /* checkpoint directory, NULL for a random model */
    char *vocab_path; /* dir/vocab.txt, NULL for a random model */
    char *name;       /* "clinc150-bert-mini", or the geometry name */
} gpu_model_t;

/* Loads a BertForSequenceClassification checkpoint. On failure returns non-zero, *out is
 * NULL, and err holds one line naming the file and what is wrong (CLI exits 2). */
int gpu_model_load(const char *dir, gpu_model_t **out, char *err, size_t errlen);

/* config.json's parser, on its text (len bytes; name stands for the file in err), with the
 * checks gpu_model_load makes. On success cfg->id2label belongs to the caller (it is what
 * gpu_model_free frees); on failure nothing is left allocated. */
int gpu_model_parse_config(const char *json, size_t len, const char *name, gpu_model_config_t *cfg,
                           char *err, size_t errlen);

/* Geometry by name: "bert-base" (12x768, 12 heads, 3072), "bert-mini" (4x256, 4, 1024),
 * "bert-large" (24x1024, 16, 4096); vocab 30522, 512 positions, 2 types. Returns 0 or -1. */
int gpu_model_geometry(const char *name, int num_labels, gpu_model_config_t *cfg);

/* A model of that geometry with seeded random weights (N(0, 0.02), LN gamma ~1). */
int gpu_model_init_random(const char *geometry, int num_labels, uint64_t seed, gpu_model_t **out,
                          char *err, size_t errlen);

/* Total parameter count of a geometry (for FLOP accounting). */
size_t gpu_model_param_count(const gpu_model_config_t *cfg);

void gpu_model_free(gpu_model_t *model);

#ifdef __cplusplus
}
#endif
#endif
