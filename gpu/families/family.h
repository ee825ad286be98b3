/* What the family files of gpu/families share: the registry row and the builder's helpers.
 * A family is one file: its config.json keys, its tensor names, its own knobs and weights (the
 * `own` parts of gpu/model/model.h's structs) and its forward pass as the graph's ops
 * (gpu/graph.h); one line of registry.h lists it. */
#ifndef RECLASS_GPU_FAMILIES_FAMILY_H
#define RECLASS_GPU_FAMILIES_FAMILY_H

#include <string.h>

#include "gpu/graph.h"
#include "gpu/model/fp8.h"
#include "gpu/model/model.h"
#include "gpu/model/model_int.h"

/* A graph under construction. */
typedef struct {
    gpu_graph_t *g;
    const gpu_model_weights_t *w;  /* NULL: a graph that only plans (tensors without data) */
    gpu_precision_t prec, storage; /* as gpu_graph_build's */
    /* Past the reserved capacity (a builder bug): what ran over, for gpu_graph_build's error,
     * and the op slot that absorbs the extra ops' writes until the builder returns. */
    char overflow[64];
    gpu_op_t spill;
} gpu_gb_t;

/* A family: what the loader asks of it (gpu/model/model_int.h) and its graph builder, which
 * appends its tensors and ops to b->g (b->g->cfg is the config). Each family file defines
 * its row (const gpu_family_t gpu_family_<name>); families.c lists them. */
typedef struct {
    gpu_model_family_rules_t rules;
    void (*build)(gpu_gb_t *b);
} gpu_family_t;

/* A family's own knobs: its struct T in the config's own bytes (gpu/model/model.h), which
 * only its file reads. Defines, in the family's file, T own(const gpu_model_config_t *) and
 * void set_own(gpu_model_config_t *, const T *) (through memcpy: the bytes have no type). */
#define GPU_FAMILY_OWN_CONFIG(T)                                                                   \
    _Static_assert(sizeof(T) <= GPU_MODEL_OWN_CONFIG, #T " fits the config's own bytes");          \
    static inline T own(const gpu_model_config_t *c) {                                             \
        T o;                                                                                       \
        memcpy(&o, c->own, sizeof o);                                                              \
        return o;                                                                                  \
    }                                                                                              \
    static inline void set_own(gpu_model_config_t *c, const T *o) {                                \
        memcpy(c->own, o, sizeof *o);                                                              \
    }

/* A family's own weights: n slices of the model (after the head's) and n_layer of each layer,
 * in the own slices of gpu_model_weights_t / gpu_layer_weights_t (an enum of its file names
 * them). */
#define GPU_FAMILY_OWN_WEIGHTS(n, n_layer)                                                         \
    _Static_assert((n) <= GPU_MODEL_OWN_WEIGHTS && (n_layer) <= GPU_MODEL_OWN_LAYER_WEIGHTS,       \
                   "the family's weights fit the blob's own slices")

/* The registry row of f, or NULL. */
const gpu_family_t *gpu_family_find(gpu_model_family_t f);

/* An empty graph of cfg with room for capacity tensors, ops and prelude ops; NULL out of
 * memory. gpu_graph_build starts from one; so does a test that builds a graph by hand. */
gpu_graph_t *gpu_graph_new(const gpu_model_config_t *cfg, gpu_precision_t prec, int capacity);

/* ---- helpers (families.c); capacity is reserved from the layer count, so they cannot fail:
 * running past it is a builder bug, noted in b->overflow (later tensors are index 0, later
 * ops b->spill) and gpu_graph_build's error ---- */

/* A weight tensor (rows, cols) on data (NULL when b->w is). */
int gpu_gb_weight(gpu_gb_t *b, const char *name, const float *data, int rows, int cols, int fp32);
/* A const tensor (rows, cols) written by the prelude. */
int gpu_gb_const(gpu_gb_t *b, const char *name, int rows, int cols);
/* An activation tensor (rows by kind, cols). */
int gpu_gb_act(gpu_gb_t *b, const char *name, gpu_rows_kind_t kind, int cols);
/* The logits (seqs, num_labels) fp32. */
int gpu_gb_logits(gpu_gb_t *b);

/* A new op appended to the batch ops (prelude 0) or the prelude (1), every tensor id -1. */
gpu_op_t *gpu_gb_op(gpu_gb_t *b, int prelude, gpu_op_kind_t kind, const char *name, int layer);

/* The precision of a non-projection op, and of projection p of layer l (-1: not a layer's,
 * e.g. ELECTRA's embedding projection). */
gpu_precision_t gpu_gb_prec(const gpu_gb_t *b);
gpu_precision_t gpu_gb_proj_prec(const gpu_gb_t *b, int layer, gpu_fp8_point_t p);

/* out = epi(src W^T + bias) with W (n, k). */
gpu_op_t *gpu_gb_linear(gpu_gb_t *b, const char *name, int layer, gpu_precision_t prec,
                        gpu_view_t out, gpu_view_t src, int w, int bias, int n, int k,
                        gpu_epi_t epi, gpu_act_t act);
/* out = LayerNorm(src) over n columns (g < 0: a copy). */
gpu_op_t *gpu_gb_norm(gpu_gb_t *b, const char *name, int layer, gpu_view_t out, gpu_view_t src,
                      int g, int beta, int n);
gpu_view_t gpu_gb_view(int t, int col);

/* ---- blocks several families share (embed.c, blocks.c) ---- */

/* The embedding op into a new (tokens, E) tensor ("x" when E == H), which it returns. */
int gpu_gb_embed(gpu_gb_t *b, int with_pos, int with_type);

/* Disentangled attention in BERT's layers (DeBERTa): per layer the c2p / p2c const tensors
 * (k / q NULL: that term is off), and the attention op's score scale and relative rows
 * (gpu_op_t's scale_factor, rel_span, rel_buckets, rel_max_pos). */
typedef struct {
    const int *k, *q;
    int scale_factor, span, buckets, max_pos;
} gpu_gb_rel_t;

/* BERT's post-norm layers on x (tokens, H), the last layer on first tokens only. Returns the tensor
 * of the first tokens' final rows (seqs, H). rel: NULL, or the relative attention of every
 * layer. */
int gpu_gb_postnorm_layers(gpu_gb_t *b, int x, const gpu_gb_rel_t *rel);
/* logits = cls(act(pool_dense(rows))) (then head LayerNorm between, when hg >= 0). */
void gpu_gb_head(gpu_gb_t *b, int rows, int hg, int hb, gpu_act_t act);

#endif
