/* ModernBertForSequenceClassification, the whole family. Its config.json in both of its
 * shapes (as the published checkpoints carry it: global_rope_theta, local_rope_theta,
 * global_attn_every_n_layers; as transformers 5 writes it: layer_types, rope_parameters) and
 * its tensors; biases are read where the checkpoint has them (attention_bias, mlp_bias,
 * norm_bias, classifier_bias) and are zeros where it has none, so the ops run one formula.
 * Its forward pass: embeddings without positions, pre-norm layers (layer 0 without its
 * attention norm) with RoPE on Q and K (the global or the local theta), global attention every
 * global_every layers and a sliding window of |i - j| <= local_window elsewhere, GeGLU, the
 * final norm, then the head on the first token or the tokens' mean: dense, act, norm, out.
 * Every token runs every layer (mean pooling reads them all). */
#include <float.h>
#include <stdio.h>
#include <string.h>

#include "gpu/families/family.h"

/* HF's defaults for keys a config may leave out (ModernBertConfig). */
#define MB_LOCAL_ATTENTION 128
#define MB_GLOBAL_EVERY    3
#define MB_THETA_GLOBAL    160000.0
#define MB_THETA_LOCAL     10000.0

/* Its own knobs, the config's own bytes (model.h). */
typedef struct {
    int mean_pool; /* classifier_pooling "mean": the head reads the tokens' mean, not the first */
    int global_every; /* layer l attends globally when l % global_every == 0, else locally */
    int local_window; /* local_attention / 2: a local layer's token i sees |i - j| <= this */
    float theta_global, theta_local; /* RoPE's */
} mb_t;
GPU_FAMILY_OWN_CONFIG(mb_t)

/* Its own weights, the blob's own slices after the head's (model.h): final_norm, head.norm. */
enum { FINAL_G, FINAL_B, HEAD_G, HEAD_B, OWN_WEIGHTS };
GPU_FAMILY_OWN_WEIGHTS(OWN_WEIGHTS, 0);

static void defaults(gpu_model_config_t *c) {
    c->pos_rows = 0;
    c->pos_offset = 0;
    c->type_vocab = 0;
    c->emb_size = c->hidden;
    const mb_t m = {.global_every = MB_GLOBAL_EVERY,
                    .local_window = MB_LOCAL_ATTENTION / 2,
                    .theta_global = (float)MB_THETA_GLOBAL,
                    .theta_local = (float)MB_THETA_LOCAL};
    set_own(c, &m);
}

/* A theta: a positive number, dflt when the key is missing or null; name is the key as the
 * message shows it. The backends raise it to a power in fp32: it must be a normal float there
 * (a value that rounds to 0 would make every frequency infinite). */
static common_status_t cfg_theta(json_t *obj, const char *path, const char *key, const char *name,
                                 double dflt, float *out, common_err_t *err) {
    json_t *v = obj ? json_object_get(obj, key) : NULL;
    double t = v && !json_is_null(v) ? json_number_value(v) : dflt;
    if ((v && !json_is_null(v) && !json_is_number(v)) || !(t >= FLT_MIN && t < 1e30)) {
        return common_err_set(err, COMMON_USAGE,
                              "%s: '%s' is not a positive number in fp32 range (below 1e30)", path,
                              name);
    }
    *out = (float)t;
    return COMMON_OK;
}

/* rope_parameters[kind] (transformers 5): default RoPE only, with its theta. */
static common_status_t rope_kind(json_t *rp, const char *path, const char *kind, double dflt,
                                 float *out, common_err_t *err) {
    json_t *k = json_object_get(rp, kind);
    if (k && !json_is_object(k)) {
        return common_err_set(err, COMMON_USAGE, "%s: rope_parameters.%s is not an object", path,
                              kind);
    }
    json_t *ty = k ? json_object_get(k, "rope_type") : NULL;
    if (ty && !(json_is_string(ty) && strcmp(json_string_value(ty), "default") == 0)) {
        return common_err_set(
            err, COMMON_USAGE,
            "%s: rope_parameters.%s.rope_type '%s' is not supported (default only)", path, kind,
            json_is_string(ty) ? json_string_value(ty) : "?");
    }
    char name[64];
    snprintf(name, sizeof name, "rope_parameters.%s.rope_theta", kind);
    return cfg_theta(k, path, "rope_theta", name, dflt, out, err);
}

/* The global/local pattern: layer_types must be "global every n" (what HF derives from
 * global_attn_every_n_layers, and what every published checkpoint has). */
static common_status_t layer_pattern(json_t *root, const char *path, const gpu_model_config_t *c,
                                     mb_t *m, common_err_t *err) {
    json_t *lt = json_object_get(root, "layer_types");
    if (!lt || json_is_null(lt)) {
        if (!json_object_get(root, "global_attn_every_n_layers")) return COMMON_OK;
        return gpu_model_cfg_int_min(root, path, "global_attn_every_n_layers", 1, &m->global_every,
                                     err);
    }
    if (!json_is_array(lt) || (int)json_array_size(lt) != c->layers) {
        return common_err_set(err, COMMON_USAGE,
                              "%s: 'layer_types' is not a list of %d layer types", path, c->layers);
    }
    int every = 0;
    for (int l = 0; l < c->layers; l++) {
        const char *t = json_string_value(json_array_get(lt, (size_t)l));
        int global = t && strcmp(t, "full_attention") == 0;
        if (!t || (!global && strcmp(t, "sliding_attention") != 0)) {
            return common_err_set(err, COMMON_USAGE,
                                  "%s: layer_types[%d] is not full_attention or sliding_attention",
                                  path, l);
        }
        if (l > 0 && global && every == 0) every = l;
    }
    if (every == 0) every = c->layers; /* only layer 0 global (or one layer) */
    for (int l = 0; l < c->layers; l++) {
        const char *t = json_string_value(json_array_get(lt, (size_t)l));
        if ((strcmp(t, "full_attention") == 0) != (l % every == 0)) {
            return common_err_set(
                err, COMMON_USAGE,
                "%s: layer_types is not one global layer every n from layer 0 (the only "
                "pattern supported)",
                path);
        }
    }
    m->global_every = every;
    return COMMON_OK;
}

static common_status_t config(json_t *root, const char *path, gpu_model_config_t *c,
                              common_err_t *err) {
    if (gpu_model_cfg_int_min(root, path, "vocab_size", 1, &c->vocab_size, err) ||
        gpu_model_cfg_int_min(root, path, "hidden_size", 1, &c->hidden, err) ||
        gpu_model_cfg_int_min(root, path, "num_hidden_layers", 1, &c->layers, err) ||
        gpu_model_cfg_int_min(root, path, "num_attention_heads", 1, &c->heads, err) ||
        gpu_model_cfg_int_min(root, path, "intermediate_size", 1, &c->intermediate, err) ||
        gpu_model_cfg_int_min(root, path, "max_position_embeddings", 1, &c->max_pos, err))
        return err->code;
    defaults(c);
    mb_t m = own(c);
    if (gpu_model_cfg_act(root, path, "hidden_activation", "gelu", &c->act, err) ||
        gpu_model_cfg_act(root, path, "classifier_activation", "gelu", &c->head_act, err) ||
        gpu_model_cfg_eps(root, path, "norm_eps", 1e-5, &c->ln_eps, err) ||
        layer_pattern(root, path, c, &m, err))
        return err->code;
    if (c->hidden % c->heads == 0 &&
        ((c->hidden / c->heads) % 2 != 0 || c->hidden / c->heads > 1024)) {
        return common_err_set(err, COMMON_USAGE,
                              "%s: head size %d is odd or above 1024 (RoPE needs pairs)", path,
                              c->hidden / c->heads);
    }
    int local = MB_LOCAL_ATTENTION;
    if (json_object_get(root, "local_attention") &&
        gpu_model_cfg_int_min(root, path, "local_attention", 0, &local, err))
        return err->code;
    m.local_window = local / 2;
    json_t *pool = json_object_get(root, "classifier_pooling");
    const char *pv = pool ? json_string_value(pool) : "cls";
    if (!pv || (strcmp(pv, "cls") != 0 && strcmp(pv, "mean") != 0)) {
        return common_err_set(err, COMMON_USAGE,
                              "%s: classifier_pooling is not \"cls\" or \"mean\"", path);
    }
    m.mean_pool = strcmp(pv, "mean") == 0;
    json_t *scaling = json_object_get(root, "rope_scaling");
    if (scaling && !json_is_null(scaling)) {
        return common_err_set(err, COMMON_USAGE,
                              "%s: rope_scaling is not supported (default RoPE only)", path);
    }
    json_t *rp = json_object_get(root, "rope_parameters");
    if (rp && !json_is_null(rp)) {
        if (!json_is_object(rp)) {
            return common_err_set(err, COMMON_USAGE, "%s: rope_parameters is not an object", path);
        }
        if (rope_kind(rp, path, "full_attention", MB_THETA_GLOBAL, &m.theta_global, err) ||
            rope_kind(rp, path, "sliding_attention", MB_THETA_LOCAL, &m.theta_local, err))
            return err->code;
    } else if (cfg_theta(root, path, "global_rope_theta", "global_rope_theta", MB_THETA_GLOBAL,
                         &m.theta_global, err) ||
               cfg_theta(root, path, "local_rope_theta", "local_rope_theta", MB_THETA_LOCAL,
                         &m.theta_local, err)) {
        return err->code;
    }
    set_own(c, &m);
    return COMMON_OK;
}

/* An nn.Linear whose bias the config may have turned off. */
static common_status_t linear(const gpu_st_file_t *f, const char *prefix, float *w, float *b,
                              int out, int in, common_err_t *err) {
    char q[256];
    snprintf(q, sizeof q, "%s.weight", prefix);
    if (gpu_model_load_tensor(f, q, NULL, w, out, in, err)) return err->code;
    snprintf(q, sizeof q, "%s.bias", prefix);
    return gpu_model_load_optional(f, q, b, out, 0, 0.0f, err);
}

/* A LayerNorm whose bias norm_bias may have turned off. */
static common_status_t norm(const gpu_st_file_t *f, const char *prefix, float *g, float *b, int n,
                            common_err_t *err) {
    return linear(f, prefix, g, b, n, 0, err);
}

static common_status_t bind(gpu_model_t *m, const gpu_st_file_t *f, common_err_t *err) {
    const gpu_model_config_t *c = &m->cfg;
    gpu_model_weights_t *w = &m->w;
    const int H = c->hidden, I = c->intermediate;
    if (gpu_model_load_tensor(f, "model.embeddings.tok_embeddings.weight", NULL, w->word_emb,
                              c->vocab_size, H, err) ||
        norm(f, "model.embeddings.norm", w->emb_ln_g, w->emb_ln_b, H, err))
        return err->code;
    for (int l = 0; l < c->layers; l++) {
        gpu_layer_weights_t *y = &w->layer[l];
        char p[192];
#define AT(sub) (snprintf(p, sizeof p, "model.layers.%d.%s", l, sub), p)
        /* Wqkv's rows are q, k, v: the blob's fused (3H, H) block. Layer 0 has no attn_norm. */
        if (linear(f, AT("attn.Wqkv"), y->q_w, y->q_b, 3 * H, H, err) ||
            linear(f, AT("attn.Wo"), y->ao_w, y->ao_b, H, H, err) ||
            (l > 0 && norm(f, AT("attn_norm"), y->ln1_g, y->ln1_b, H, err)) ||
            norm(f, AT("mlp_norm"), y->ln2_g, y->ln2_b, H, err) ||
            linear(f, AT("mlp.Wi"), y->ff1_w, y->ff1_b, 2 * I, H, err) ||
            linear(f, AT("mlp.Wo"), y->ff2_w, y->ff2_b, H, I, err))
            return err->code;
#undef AT
        if (l == 0)
            for (int i = 0; i < H; i++)
                y->ln1_g[i] = 1.0f, y->ln1_b[i] = 0.0f; /* unused: the backends skip it */
    }
    return norm(f, "model.final_norm", w->own[FINAL_G], w->own[FINAL_B], H, err) ||
                   linear(f, "head.dense", w->pool_w, w->pool_b, H, H, err) ||
                   norm(f, "head.norm", w->own[HEAD_G], w->own[HEAD_B], H, err) ||
                   gpu_model_load_linear(f, "classifier", w->cls_w, w->cls_b, c->num_labels, H, err)
               ? err->code
               : COMMON_OK;
}

/* ---- the forward pass ---- */

#define V(t, c) gpu_gb_view(t, c)

static void build(gpu_gb_t *b) {
    const gpu_model_config_t *c = &b->g->cfg;
    const gpu_model_weights_t *w = b->w;
    const mb_t m = own(c);
    const int H = c->hidden, I = c->intermediate, F = 2 * I;
    const int x = gpu_gb_embed(b, 0, 0);                          /* (tokens, H) residual */
    const int h = gpu_gb_act(b, "h", GPU_ROWS_TOKENS, H);         /* (tokens, H) normed input */
    const int qkv = gpu_gb_act(b, "qkv", GPU_ROWS_TOKENS, 3 * H); /* (tokens, 3H) */
    const int ctx = gpu_gb_act(b, "ctx", GPU_ROWS_TOKENS, H);     /* (tokens, H) attention out */
    const int ff = gpu_gb_act(b, "ff", GPU_ROWS_TOKENS, F);       /* (tokens, 2I) Wi, GeGLU */
    char n[GPU_GRAPH_NAME];
    for (int l = 0; l < c->layers; l++) {
        const gpu_layer_weights_t *y = w ? &w->layer[l] : NULL;
        const int local = l % m.global_every != 0;
#define W(field, name, rows, cols, fp32)                                                           \
    (snprintf(n, sizeof n, "l%d.%s", l, name),                                                     \
     gpu_gb_weight(b, n, y ? y->field : NULL, rows, cols, fp32))
        int in = x; /* layer 0's attention norm is the identity */
        if (l > 0) {
            gpu_gb_norm(b, "attn_norm", l, V(h, 0), V(x, 0), W(ln1_g, "ln1.g", 1, H, 1),
                        W(ln1_b, "ln1.b", 1, H, 1), H);
            in = h;
        }
        gpu_gb_linear(b, "qkv", l, gpu_gb_proj_prec(b, l, GPU_FP8_QKV), V(qkv, 0), V(in, 0),
                      W(q_w, "qkv.w", 3 * H, H, 0), W(q_b, "qkv.b", 1, 3 * H, 0), 3 * H, H,
                      GPU_EPI_BIAS, c->act);
        gpu_op_t *a = gpu_gb_op(b, 0, GPU_OP_ATTENTION, "attn", l);
        a->out = V(ctx, 0), a->src[0] = V(qkv, 0), a->src[1] = V(qkv, H), a->src[2] = V(qkv, 2 * H);
        a->heads = c->heads, a->head_dim = H / c->heads;
        a->rope_theta = local ? m.theta_local : m.theta_global;
        a->window = local ? m.local_window : 0;
        gpu_gb_linear(b, "ao", l, gpu_gb_proj_prec(b, l, GPU_FP8_AO), V(x, 0), V(ctx, 0),
                      W(ao_w, "ao.w", H, H, 0), W(ao_b, "ao.b", 1, H, 0), H, H, GPU_EPI_RESIDUAL,
                      c->act);
        gpu_gb_norm(b, "mlp_norm", l, V(h, 0), V(x, 0), W(ln2_g, "ln2.g", 1, H, 1),
                    W(ln2_b, "ln2.b", 1, H, 1), H);
        gpu_gb_linear(b, "ff1", l, gpu_gb_proj_prec(b, l, GPU_FP8_FF1), V(ff, 0), V(h, 0),
                      W(ff1_w, "ff1.w", F, H, 0), W(ff1_b, "ff1.b", 1, F, 0), F, H, GPU_EPI_GLU,
                      c->act);
        gpu_gb_linear(b, "ff2", l, gpu_gb_proj_prec(b, l, GPU_FP8_FF2), V(x, 0), V(ff, 0),
                      W(ff2_w, "ff2.w", H, I, 0), W(ff2_b, "ff2.b", 1, H, 0), H, I,
                      GPU_EPI_RESIDUAL, c->act);
#undef W
    }
    gpu_gb_norm(b, "final_norm", -1, V(x, 0), V(x, 0),
                gpu_gb_weight(b, "final_norm.g", w ? w->own[FINAL_G] : NULL, 1, H, 1),
                gpu_gb_weight(b, "final_norm.b", w ? w->own[FINAL_B] : NULL, 1, H, 1), H);
    const int pooled = gpu_gb_act(b, "pooled", GPU_ROWS_SEQS, H); /* (seqs, H) */
    gpu_op_t *p = gpu_gb_op(b, 0, GPU_OP_POOL, "pool", -1);
    p->out = V(pooled, 0), p->src[0] = V(x, 0), p->n = H;
    p->pool = m.mean_pool ? GPU_POOL_MEAN : GPU_POOL_CLS;
    gpu_gb_head(b, pooled, gpu_gb_weight(b, "head.norm.g", w ? w->own[HEAD_G] : NULL, 1, H, 1),
                gpu_gb_weight(b, "head.norm.b", w ? w->own[HEAD_B] : NULL, 1, H, 1), c->head_act);
}

/* ---- the rest of its row ---- */

/* What the shared checks cannot know: the global/local pattern, usable thetas. */
static const char *validate(const gpu_model_config_t *c) {
    const mb_t m = own(c);
    if (m.global_every < 1) return "global_attn_every_n_layers";
    if (m.local_window < 0) return "local_attention";
    if (!(m.theta_global >= FLT_MIN && m.theta_global <= FLT_MAX)) return "global_rope_theta";
    if (!(m.theta_local >= FLT_MIN && m.theta_local <= FLT_MAX)) return "local_rope_theta";
    return NULL;
}

/* Its weights beyond the shared ones: final_norm and head.norm, after the head's. */
static void layout(gpu_model_blob_t *b, gpu_layer_weights_t *y) {
    if (y) return;
    for (int i = 0; i < OWN_WEIGHTS; i++)
        gpu_model_slice(b, &b->w->own[i], (size_t)b->cfg->hidden);
}

/* answerdotai/ModernBERT-base: 8,192 RoPE positions (no table), GeGLU to 2 x 1152. */
static const gpu_model_geometry_t geometries[] = {
    {"modernbert-base", 22, 768, 12, 1152, 50368, 0, 8192, 0, 0, 1e-5f},
};

static void geometry(gpu_model_config_t *c) {
    mb_t m = own(c);
    m.mean_pool = 1; /* the published config's classifier_pooling */
    set_own(c, &m);
}

/* Its norms as HF initialises them: (1, 0). */
static void init_random(gpu_model_t *m) {
    gpu_model_weights_t *w = &m->w;
    for (int i = 0; i < m->cfg.hidden; i++) {
        w->own[FINAL_G][i] = w->own[HEAD_G][i] = 1.0f;
        w->own[FINAL_B][i] = w->own[HEAD_B][i] = 0.0f;
    }
}

const gpu_family_t gpu_family_modernbert = {
    .rules = {.arch = "ModernBertForSequenceClassification",
              .name = "modernbert",
              .head_act = GPU_ACT_GELU,
              .no_tables = 1,
              .glu = 1,
              .defaults = defaults,
              .config = config,
              .validate = validate,
              .bind = bind,
              .layout = layout,
              .geometries = geometries,
              .n_geometries = 1,
              .geometry = geometry,
              .init_random = init_random},
    .build = build,
};
