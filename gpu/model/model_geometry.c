/* Named geometries of every family with seeded random weights: the models `reclass bench
 * --geometry` and `reclass plan-memory` run without a checkpoint. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/model/model.h"
#include "gpu/model/model_int.h"

typedef struct {
    const char *name;
    gpu_model_family_t family;
    int layers, hidden, heads, intermediate;
    int vocab, emb;           /* emb 0: == hidden */
    int pos_rows, pos_offset; /* max_position_embeddings, pad_token_id + 1 or 0 */
    int type_vocab;           /* DistilBERT: the one zero row */
    float eps;
} geometry_t;

#define BERT(n, l, h, a, i)                                                                        \
    { n, GPU_FAMILY_BERT, l, h, a, i, 30522, 0, 512, 0, 2, 1e-12f }
static const geometry_t geometries[] = {
    BERT("bert-tiny", 2, 128, 2, 512),
    BERT("bert-mini", 4, 256, 4, 1024),
    BERT("bert-small", 4, 512, 8, 2048),
    BERT("bert-medium", 8, 512, 8, 2048),
    BERT("bert-base", 12, 768, 12, 3072),
    BERT("bert-large", 24, 1024, 16, 4096),
    {"distilbert-base", GPU_FAMILY_DISTILBERT, 6, 768, 12, 3072, 30522, 0, 512, 0, 1, 1e-12f},
    {"roberta-base", GPU_FAMILY_ROBERTA, 12, 768, 12, 3072, 50265, 0, 514, 2, 1, 1e-5f},
    {"xlmr-base", GPU_FAMILY_XLM_ROBERTA, 12, 768, 12, 3072, 250002, 0, 514, 2, 1, 1e-5f},
    {"electra-small", GPU_FAMILY_ELECTRA, 12, 256, 4, 1024, 30522, 128, 512, 0, 2, 1e-12f},
    {"electra-base", GPU_FAMILY_ELECTRA, 12, 768, 12, 3072, 30522, 0, 512, 0, 2, 1e-12f},
    /* answerdotai/ModernBERT-base: 8,192 RoPE positions (no table), GeGLU to 2 x 1152; and
     * microsoft/deberta-v3-base: 512 positions, 256 buckets, no table, no types. */
    {"modernbert-base", GPU_FAMILY_MODERNBERT, 22, 768, 12, 1152, 50368, 0, 8192, 0, 0, 1e-5f},
    {"deberta-v3-base", GPU_FAMILY_DEBERTA_V2, 12, 768, 12, 3072, 128100, 0, 512, 0, 0, 1e-7f},
};
#undef BERT

const char *gpu_model_geometries(void) {
    return "bert-tiny, bert-mini, bert-small, bert-medium, bert-base, bert-large, "
           "distilbert-base, roberta-base, xlmr-base, electra-small, electra-base, "
           "modernbert-base, deberta-v3-base";
}

int gpu_model_geometry(const char *name, int num_labels, gpu_model_config_t *cfg) {
    if (!name || num_labels <= 0) return -1;
    for (size_t i = 0; i < sizeof geometries / sizeof geometries[0]; i++) {
        const geometry_t *g = &geometries[i];
        if (strcmp(name, g->name) != 0) continue;
        memset(cfg, 0, sizeof *cfg);
        cfg->family = g->family;
        cfg->act = GPU_ACT_GELU;
        cfg->head_act = gpu_model_family_head_act(g->family);
        cfg->vocab_size = g->vocab;
        cfg->hidden = g->hidden;
        cfg->emb_size = g->emb ? g->emb : g->hidden;
        cfg->layers = g->layers;
        cfg->heads = g->heads;
        cfg->intermediate = g->intermediate;
        cfg->pos_rows = g->pos_rows;
        cfg->pos_offset = g->pos_offset;
        cfg->max_pos = g->pos_rows - g->pos_offset;
        cfg->type_vocab = g->type_vocab;
        cfg->num_labels = num_labels;
        cfg->ln_eps = g->eps;
        cfg->id2label = NULL; /* gpu_model_init_random names the labels */
        const gpu_model_family_rules_t *r = gpu_model_family_of(g->family);
        if (r && r->defaults) r->defaults(cfg);
        if (g->family == GPU_FAMILY_MODERNBERT) {
            cfg->max_pos = g->pos_rows;
            cfg->mean_pool = 1; /* the published config's classifier_pooling */
        }
        if (g->family == GPU_FAMILY_DEBERTA_V2) cfg->pos_rows = 0; /* position_biased_input false */
        return 0;
    }
    return -1;
}

/* splitmix64: tiny, seedable, and the same sequence on every platform. */
static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Box-Muller in float on 24-bit uniforms: bert-large's 335M weights in a few seconds. */
static void fill_normal(float *x, size_t n, float stddev, uint64_t *s) {
    for (size_t i = 0; i < n; i += 2) {
        uint64_t z = rng_next(s);
        float u1 = ((float)(z >> 40) + 1.0f) * (1.0f / 16777216.0f);     /* (0, 1] */
        float u2 = (float)((z >> 16) & 0xffffff) * (1.0f / 16777216.0f); /* [0, 1) */
        float r = sqrtf(-2.0f * logf(u1)) * stddev, sn, cs;
        sincosf(6.28318530717958648f * u2, &sn, &cs);
        x[i] = r * cs;
        if (i + 1 < n) x[i + 1] = r * sn;
    }
}

static void fill_const(float *x, size_t n, float v) {
    for (size_t i = 0; i < n; i++)
        x[i] = v;
}

int gpu_model_init_random(const char *geometry, int num_labels, uint64_t seed, gpu_model_t **out,
                          char *err, size_t errlen) {
    *out = NULL;
    gpu_model_t *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (gpu_model_geometry(geometry, num_labels, &m->cfg) != 0) {
        snprintf(err, errlen, "unknown model geometry '%s' (%s) or num_labels %d < 1",
                 geometry ? geometry : "(null)", gpu_model_geometries(), num_labels);
        free(m);
        return -1;
    }
    if (!(m->name = strdup(geometry)) ||
        !(m->cfg.id2label = gpu_model_labels_default(num_labels)) ||
        gpu_model_alloc_weights(m) != 0) {
        snprintf(err, errlen, "out of memory allocating a random %s model", geometry);
        gpu_model_free(m);
        return -1;
    }
    /* Everything N(0, 0.02) first, then biases 0 and LayerNorms (1, 0), as HF initialises. */
    const gpu_model_config_t *c = &m->cfg;
    size_t H = (size_t)c->hidden, E = (size_t)c->emb_size;
    uint64_t s = seed;
    fill_normal(m->blob, m->blob_floats, 0.02f, &s);
    gpu_model_weights_t *w = &m->w;
    if (c->family == GPU_FAMILY_DISTILBERT) fill_const(w->type_emb, E, 0.0f); /* no types */
    fill_const(w->emb_ln_g, E, 1.0f);
    fill_const(w->emb_ln_b, E, 0.0f);
    if (w->emb_proj_b) fill_const(w->emb_proj_b, H, 0.0f);
    for (int l = 0; l < c->layers; l++) {
        gpu_layer_weights_t *y = &w->layer[l];
        fill_const(y->q_b, 3 * H, 0.0f);
        fill_const(y->ao_b, H, 0.0f);
        fill_const(y->ff1_b, (size_t)gpu_model_ff1_rows(c), 0.0f);
        fill_const(y->ff2_b, H, 0.0f);
        fill_const(y->ln1_g, H, 1.0f);
        fill_const(y->ln1_b, H, 0.0f);
        fill_const(y->ln2_g, H, 1.0f);
        fill_const(y->ln2_b, H, 0.0f);
    }
    fill_const(w->pool_b, H, 0.0f);
    fill_const(w->cls_b, (size_t)c->num_labels, 0.0f);
    float *ones[] = {w->final_ln_g, w->head_ln_g, w->rel_ln_g},
          *zeros[] = {w->final_ln_b, w->head_ln_b, w->rel_ln_b};
    for (int i = 0; i < 3; i++) {
        if (ones[i]) fill_const(ones[i], H, 1.0f);
        if (zeros[i]) fill_const(zeros[i], H, 0.0f);
    }
    *out = m;
    return 0;
}
