/* What the files of gpu/model share and nobody else needs. */
#ifndef RECLASS_GPU_MODEL_INT_H
#define RECLASS_GPU_MODEL_INT_H

#include <jansson.h>
#include <stddef.h>

#include "gpu/model/model.h"
#include "gpu/model/safetensors.h"

/* Allocates the layer table and the one weight blob for m->cfg and slices it (model.c).
 * 0 or -1 (out of memory). */
int gpu_model_alloc_weights(gpu_model_t *m);

/* n labels "LABEL_0".. (model_json.c), or NULL when out of memory. */
char **gpu_model_labels_default(int n);

/* config.json at path -> cfg (model_config.c); on failure nothing is left allocated. */
common_status_t gpu_model_read_config(const char *path, gpu_model_config_t *cfg, common_err_t *err);

/* The activation of family f's head (tanh, ReLU or GELU). */
gpu_act_t gpu_model_family_head_act(gpu_model_family_t f);

/* ---- config.json helpers (model_json.c) ---- */

/* root[key], an integer in [lo, 2^30]. */
common_status_t gpu_model_cfg_int_min(json_t *root, const char *path, const char *key, int lo,
                                      int *out, common_err_t *err);
/* root[key] as an activation name ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu"); a
 * missing key is dflt when dflt is non-NULL. */
common_status_t gpu_model_cfg_act(json_t *root, const char *path, const char *key, const char *dflt,
                                  gpu_act_t *out, common_err_t *err);
/* root[key], a normal fp32 number (an LN epsilon), or dflt when missing and dflt > 0. */
common_status_t gpu_model_cfg_eps(json_t *root, const char *path, const char *key, double dflt,
                                  float *out, common_err_t *err);
/* root[key] as a boolean (true/false), dflt when missing. */
common_status_t gpu_model_cfg_bool(json_t *root, const char *path, const char *key, int dflt,
                                   int *out, common_err_t *err);

/* ---- checkpoint tensors (model_tensors.c) ---- */

/* name (or alias) of shape (d0) or (d0, d1) into dst; COMMON_OK, or COMMON_USAGE with err. */
common_status_t gpu_model_load_tensor(const gpu_st_file_t *f, const char *name, const char *alias,
                                      float *dst, int64_t d0, int64_t d1, common_err_t *err);
/* name into dst as above when the tensor is there, else dst (d0 x max(d1, 1)) = fill. */
common_status_t gpu_model_load_optional(const gpu_st_file_t *f, const char *name, float *dst,
                                        int64_t d0, int64_t d1, float fill, common_err_t *err);
/* prefix.{weight,bias} (or .gamma/.beta) of a LayerNorm of n. */
common_status_t gpu_model_load_ln(const gpu_st_file_t *f, const char *prefix, float *g, float *b,
                                  int n, common_err_t *err);
/* prefix.{weight,bias} of an nn.Linear (out, in). */
common_status_t gpu_model_load_linear(const gpu_st_file_t *f, const char *prefix, float *w,
                                      float *b, int out, int in, common_err_t *err);

/* ---- the weight blob's layout (model.c) ---- */

/* The blob being laid out: a family's layout hook takes its own slices through
 * gpu_model_slice, in the order it calls it. */
typedef struct {
    const gpu_model_config_t *cfg;
    gpu_model_weights_t *w; /* the pointers being assigned (a scratch copy when only counting) */
    float *base;            /* the blob, NULL while sizing or counting */
    size_t at;              /* floats laid out so far */
    double total;           /* parameters laid out so far, in double: it cannot wrap */
    int exact;              /* 1: count parameters (no alignment), 0: floats of the blob */
} gpu_model_blob_t;

/* *ptr = the next n floats of the blob (when b->base is set). */
void gpu_model_slice(gpu_model_blob_t *b, float **ptr, size_t n);

/* The parameter count of cfg (every shared slice and the family's own, through its row's
 * layout) in double, for a config not yet checked: dimensions up to 2^30 make a count that
 * wraps size_t, which this cannot (config_check_size bounds it before anything is
 * allocated). */
double gpu_model_param_total(const gpu_model_config_t *c);

/* ---- the families (the registry: gpu/families/registry.h, families.c) ---- */

/* A named geometry of a family, for `--geometry` (model_geometry.c fills the config from it,
 * then runs the family's defaults and geometry hooks). */
typedef struct {
    const char *name;
    int layers, hidden, heads, intermediate;
    int vocab, emb;           /* emb 0: == hidden */
    int pos_rows, pos_offset; /* max_position_embeddings, pad_token_id + 1 or 0 */
    int type_vocab;           /* DistilBERT: the one zero row */
    float eps;
} gpu_model_geometry_t;

/* What the loader asks of a family: its architecture name in config.json, its name, the
 * activation of its head, and every rule of its own (the generic code never asks which
 * family a model is). */
typedef struct {
    const char *arch;   /* "BertForSequenceClassification" */
    const char *name;   /* "bert" */
    gpu_act_t head_act; /* its default; a family's config may override it */
    int no_tables;      /* 1: it may have no position table and no token types (RoPE,
                         * relative positions) */
    int glu;            /* 1: its FFN is gated (GeGLU): ff1 has 2I rows (gpu_model_glu) */
    /* The family's published defaults before its config.json is read (and for its named
     * geometries); NULL: none. */
    void (*defaults)(gpu_model_config_t *c);
    /* Its dimensions and knobs from config.json. */
    common_status_t (*config)(json_t *root, const char *path, gpu_model_config_t *c,
                              common_err_t *err);
    /* The key of the first of its own rules c breaks, NULL when c keeps them all (checked after
     * the shared ones, before the labels); NULL: no rules of its own. */
    const char *(*validate)(const gpu_model_config_t *c);
    /* Every weight of its checkpoint into m's blob. */
    common_status_t (*bind)(gpu_model_t *m, const gpu_st_file_t *f, common_err_t *err);
    /* Its own weight slices beyond the shared ones: called after each layer's shared slices
     * with that layer's weights (y), then once with y NULL after the head's; NULL: none. Every
     * layer takes the same slices. */
    void (*layout)(gpu_model_blob_t *b, gpu_layer_weights_t *y);
    /* Its named geometries (n_geometries rows) and what a geometry sets after the defaults
     * (NULL: nothing). */
    const gpu_model_geometry_t *geometries;
    int n_geometries;
    void (*geometry)(gpu_model_config_t *c);
    /* A model of a named geometry: its own weights' values after every weight is N(0, 0.02),
     * biases 0 and the shared LayerNorms (1, 0) (as HF initialises); NULL: nothing. */
    void (*init_random)(gpu_model_t *m);
} gpu_model_family_rules_t;

/* The row of family f (its place in the registry), NULL past its end (defined by
 * gpu/families/families.c: the loader finds the families the way gpu/backend.c finds the
 * backends, by a symbol, not a header). */
const gpu_model_family_rules_t *gpu_model_family_rules(int f);
/* The row of family f, or NULL (model_config.c). */
const gpu_model_family_rules_t *gpu_model_family_of(gpu_model_family_t f);

#endif
