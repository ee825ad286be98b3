/* The family registry (one row a family) and the builder's helpers: gpu_graph_build finds the
 * model's row and lets its builder append tensors and ops. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/families/family.h"

/* The registry: its rows in gpu/families/registry.h's order, which numbers
 * gpu_model_family_t, each row defined by its family's file. */
#define DECLARE(sym, NAME) extern const gpu_family_t gpu_family_##sym;
#define ROW(sym, NAME)     [GPU_FAMILY_##NAME] = &gpu_family_##sym,
GPU_FAMILIES(DECLARE)
static const gpu_family_t *const registry[GPU_FAMILY_COUNT] = {GPU_FAMILIES(ROW)};

const gpu_family_t *gpu_family_find(gpu_model_family_t f) {
    return (unsigned)f < GPU_FAMILY_COUNT ? registry[f] : NULL;
}

const gpu_model_family_rules_t *gpu_model_family_rules(int f) {
    return f >= 0 && f < GPU_FAMILY_COUNT ? &registry[f]->rules : NULL;
}

/* Room enough for any builder: a layer has fewer than 32 tensors and 32 ops (DeBERTa: 22
 * tensors). */
#define PER_LAYER 32
#define FIXED     32

gpu_graph_t *gpu_graph_new(const gpu_model_config_t *cfg, gpu_precision_t prec, int capacity) {
    gpu_graph_t *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->cfg = *cfg;
    g->cfg.id2label = NULL;
    g->prec = prec;
    g->cap_tensors = g->cap_ops = g->cap_prelude = capacity;
    g->tensor = calloc((size_t)capacity, sizeof *g->tensor);
    g->op = calloc((size_t)capacity, sizeof *g->op);
    g->prelude = calloc((size_t)capacity, sizeof *g->prelude);
    g->logits = -1;
    if (!g->tensor || !g->op || !g->prelude) {
        gpu_graph_free(g);
        return NULL;
    }
    return g;
}

common_status_t gpu_graph_build(const gpu_model_config_t *cfg, const gpu_model_weights_t *w,
                                gpu_precision_t prec, gpu_precision_t storage, gpu_graph_t **out,
                                common_err_t *err) {
    *out = NULL;
    const gpu_family_t *fam = gpu_family_find(cfg->family);
    if (!fam) {
        return common_err_set(err, COMMON_BUG, "no graph builder for family %s",
                              gpu_model_family_name(cfg->family));
    }
    gpu_graph_t *g = gpu_graph_new(cfg, prec, FIXED + PER_LAYER * cfg->layers);
    if (!g) {
        return common_err_set(err, COMMON_FATAL, "out of memory for the graph of a %d-layer model",
                              cfg->layers);
    }
    gpu_gb_t b = {.g = g, .w = w, .prec = prec, .storage = storage};
    fam->build(&b);
    if (b.overflow[0]) {
        common_err_set(err, COMMON_BUG, "the %s graph builder ran past its room: %s",
                       gpu_model_family_name(cfg->family), b.overflow);
        gpu_graph_free(g);
        return COMMON_BUG;
    }
    *out = g;
    return COMMON_OK;
}

static int add_tensor(gpu_gb_t *b, const char *name, gpu_tensor_class_t cls, gpu_rows_kind_t kind,
                      int rows, int cols, const float *data, int fp32) {
    gpu_graph_t *g = b->g;
    if (g->n_tensors >= g->cap_tensors) {
        if (!b->overflow[0])
            snprintf(b->overflow, sizeof b->overflow, "more than %d tensors", g->cap_tensors);
        return 0;
    }
    gpu_tensor_t *t = &g->tensor[g->n_tensors];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->cls = cls, t->rows_kind = kind, t->rows = rows, t->cols = cols;
    t->data = b->w ? data : NULL;
    t->fp32 = fp32;
    return g->n_tensors++;
}

int gpu_gb_weight(gpu_gb_t *b, const char *name, const float *data, int rows, int cols, int fp32) {
    return add_tensor(b, name, GPU_TENSOR_WEIGHT, GPU_ROWS_FIXED, rows, cols, data, fp32);
}

int gpu_gb_const(gpu_gb_t *b, const char *name, int rows, int cols) {
    return add_tensor(b, name, GPU_TENSOR_CONST, GPU_ROWS_FIXED, rows, cols, NULL, 0);
}

int gpu_gb_act(gpu_gb_t *b, const char *name, gpu_rows_kind_t kind, int cols) {
    return add_tensor(b, name, GPU_TENSOR_ACT, kind, 0, cols, NULL, 0);
}

int gpu_gb_logits(gpu_gb_t *b) {
    b->g->logits =
        add_tensor(b, "logits", GPU_TENSOR_LOGITS, GPU_ROWS_SEQS, 0, b->g->cfg.num_labels, NULL, 1);
    return b->g->logits;
}

gpu_op_t *gpu_gb_op(gpu_gb_t *b, int prelude, gpu_op_kind_t kind, const char *name, int layer) {
    gpu_graph_t *g = b->g;
    int *n = prelude ? &g->n_prelude : &g->n_ops;
    const int cap = prelude ? g->cap_prelude : g->cap_ops;
    gpu_op_t *op;
    if (*n >= cap) {
        if (!b->overflow[0])
            snprintf(b->overflow, sizeof b->overflow, "more than %d %sops", cap,
                     prelude ? "prelude " : "");
        op = &b->spill;
    } else {
        op = prelude ? &g->prelude[(*n)++] : &g->op[(*n)++];
    }
    memset(op, 0, sizeof *op);
    op->kind = kind;
    op->prec = gpu_gb_prec(b);
    op->layer = layer;
    if (layer >= 0)
        snprintf(op->name, sizeof op->name, "l%d.%s", layer, name);
    else
        snprintf(op->name, sizeof op->name, "%s", name);
    op->out = op->src[0] = op->src[1] = op->src[2] = gpu_gb_view(-1, 0);
    for (int i = 0; i < GPU_OP_W; i++)
        op->w[i] = -1;
    op->eps = g->cfg.ln_eps;
    op->scale_factor = 1;
    return op;
}

gpu_precision_t gpu_gb_prec(const gpu_gb_t *b) {
    return b->prec == GPU_PREC_FP8 ? b->storage : b->prec;
}

gpu_precision_t gpu_gb_proj_prec(const gpu_gb_t *b, int layer, gpu_fp8_point_t p) {
    if (b->prec != GPU_PREC_FP8) return b->prec;
    return layer >= 0 && gpu_fp8_runs(&b->g->cfg, layer, p) ? GPU_PREC_FP8 : b->storage;
}

gpu_view_t gpu_gb_view(int t, int col) {
    gpu_view_t v = {t, col};
    return v;
}

gpu_op_t *gpu_gb_linear(gpu_gb_t *b, const char *name, int layer, gpu_precision_t prec,
                        gpu_view_t out, gpu_view_t src, int w, int bias, int n, int k,
                        gpu_epi_t epi, gpu_act_t act) {
    gpu_op_t *op = gpu_gb_op(b, 0, GPU_OP_LINEAR, name, layer);
    op->prec = prec;
    op->out = out, op->src[0] = src;
    op->w[0] = w, op->w[1] = bias;
    op->n = n, op->k = k;
    op->epi = epi, op->act = act;
    return op;
}

gpu_op_t *gpu_gb_norm(gpu_gb_t *b, const char *name, int layer, gpu_view_t out, gpu_view_t src,
                      int g, int beta, int n) {
    gpu_op_t *op = gpu_gb_op(b, 0, GPU_OP_NORM, name, layer);
    op->out = out, op->src[0] = src;
    op->w[0] = g, op->w[1] = beta;
    op->n = n;
    return op;
}
