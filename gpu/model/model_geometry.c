/* Named geometries with seeded random weights: the models `reclass bench --geometry` and
 * `reclass plan-memory` run without a checkpoint. Each family's geometries are its registry
 * row's (gpu/families/<family>.c); this file reads them all, in registry order. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/model/model.h"
#include "gpu/model/model_int.h"

/* Registry rows are static: the list is written once, the first time it is asked for. */
static char geometry_list[1024];
static pthread_once_t geometry_once = PTHREAD_ONCE_INIT;

static void geometry_fill(void) {
    size_t n = 0;
    for (int f = 0; f < GPU_FAMILY_COUNT; f++) {
        const gpu_model_family_rules_t *r = gpu_model_family_of((gpu_model_family_t)f);
        const gpu_model_geometry_t *g = r->geometries;
        const int ng = r->n_geometries;
        for (int i = 0; i < ng && n < sizeof geometry_list; i++)
            n += (size_t)snprintf(geometry_list + n, sizeof geometry_list - n, "%s%s",
                                  n ? ", " : "", g[i].name);
    }
}

const char *gpu_model_geometries(void) {
    pthread_once(&geometry_once, geometry_fill);
    return geometry_list;
}

/* cfg from geometry g of family f, then the family's defaults and its geometries' own. */
static void geometry_config(gpu_model_family_t f, const gpu_model_geometry_t *g, int num_labels,
                            gpu_model_config_t *cfg) {
    const gpu_model_family_rules_t *r = gpu_model_family_of(f);
    memset(cfg, 0, sizeof *cfg);
    cfg->family = f;
    cfg->act = GPU_ACT_GELU;
    cfg->head_act = r->head_act;
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
    if (r->defaults) r->defaults(cfg);
    if (r->geometry) r->geometry(cfg);
}

int gpu_model_geometry(const char *name, int num_labels, gpu_model_config_t *cfg) {
    if (!name || num_labels <= 0) return -1;
    for (int f = 0; f < GPU_FAMILY_COUNT; f++) {
        const gpu_model_family_rules_t *r = gpu_model_family_of((gpu_model_family_t)f);
        const gpu_model_geometry_t *g = r->geometries;
        const int ng = r->n_geometries;
        for (int i = 0; i < ng; i++)
            if (strcmp(name, g[i].name) == 0) {
                geometry_config((gpu_model_family_t)f, &g[i], num_labels, cfg);
                return 0;
            }
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

common_status_t gpu_model_init_random(const char *geometry, int num_labels, uint64_t seed,
                                      gpu_model_t **out, common_err_t *err) {
    *out = NULL;
    gpu_model_t *m = calloc(1, sizeof *m);
    if (!m) {
        return common_err_set(err, COMMON_FATAL, "out of memory");
    }
    if (gpu_model_geometry(geometry, num_labels, &m->cfg) != 0) {
        common_err_set(err, COMMON_USAGE, "unknown model geometry '%s' (%s) or num_labels %d < 1",
                       geometry ? geometry : "(null)", gpu_model_geometries(), num_labels);
        free(m);
        return COMMON_USAGE;
    }
    if (!(m->name = strdup(geometry)) ||
        !(m->cfg.id2label = gpu_model_labels_default(num_labels)) ||
        gpu_model_alloc_weights(m) != 0) {
        common_err_set(err, COMMON_FATAL, "out of memory allocating a random %s model", geometry);
        gpu_model_free(m);
        return COMMON_FATAL;
    }
    /* Everything N(0, 0.02) first, then biases 0 and LayerNorms (1, 0), as HF initialises. */
    const gpu_model_config_t *c = &m->cfg;
    size_t H = (size_t)c->hidden, E = (size_t)c->emb_size;
    uint64_t s = seed;
    fill_normal(m->blob, m->blob_floats, 0.02f, &s);
    gpu_model_weights_t *w = &m->w;
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
    const gpu_model_family_rules_t *r = gpu_model_family_of(c->family);
    if (r->init_random) r->init_random(m);
    *out = m;
    return COMMON_OK;
}
