/* Hugging Face BertForSequenceClassification checkpoints -> gpu_model_t (fp32, one blob). */
#include "gpu/model/model.h"

#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu/model/safetensors.h"

#define BLOB_ALIGN 16 /* floats: every slice starts on a 64-byte line */

/* Assigns every weight pointer of m as a slice of base (when base is non-NULL) and returns
 * the floats the blob needs. Q, K and V of a layer are laid out back to back, weights and
 * biases alike, so a backend can run them as one fused (3H, H) projection. */
static size_t blob_layout(gpu_model_t *m, float *base) {
    const gpu_model_config_t *c = &m->cfg;
    size_t H = (size_t)c->hidden, I = (size_t)c->intermediate, L = (size_t)c->num_labels;
    size_t at = 0;
#define SLICE(ptr, n)                                                                              \
    do {                                                                                           \
        if (base) (ptr) = base + at;                                                               \
        at += ((size_t)(n) + BLOB_ALIGN - 1) / BLOB_ALIGN * BLOB_ALIGN;                            \
    } while (0)
    gpu_model_weights_t *w = &m->w;
    SLICE(w->word_emb, (size_t)c->vocab_size * H);
    SLICE(w->pos_emb, (size_t)c->max_pos * H);
    SLICE(w->type_emb, (size_t)c->type_vocab * H);
    SLICE(w->emb_ln_g, H);
    SLICE(w->emb_ln_b, H);
    for (int l = 0; l < c->layers; l++) {
        gpu_layer_weights_t scratch, *y = base ? &w->layer[l] : &scratch;
        float *qkv_w = NULL, *qkv_b = NULL;
        SLICE(qkv_w, 3 * H * H);
        SLICE(qkv_b, 3 * H);
        if (base) {
            y->q_w = qkv_w;
            y->k_w = qkv_w + H * H;
            y->v_w = qkv_w + 2 * H * H;
            y->q_b = qkv_b;
            y->k_b = qkv_b + H;
            y->v_b = qkv_b + 2 * H;
        }
        SLICE(y->ao_w, H * H);
        SLICE(y->ao_b, H);
        SLICE(y->ln1_g, H);
        SLICE(y->ln1_b, H);
        SLICE(y->ff1_w, I * H);
        SLICE(y->ff1_b, I);
        SLICE(y->ff2_w, H * I);
        SLICE(y->ff2_b, H);
        SLICE(y->ln2_g, H);
        SLICE(y->ln2_b, H);
    }
    SLICE(w->pool_w, H * H);
    SLICE(w->pool_b, H);
    SLICE(w->cls_w, L * H);
    SLICE(w->cls_b, L);
#undef SLICE
    return at;
}

/* Allocates the layer table and the blob for m->cfg and slices it. 0 or -1 (out of memory). */
static int model_alloc_weights(gpu_model_t *m) {
    m->w.layer = calloc((size_t)m->cfg.layers, sizeof *m->w.layer);
    if (!m->w.layer) return -1;
    m->blob_floats = blob_layout(m, NULL);
    m->blob = aligned_alloc(64, m->blob_floats * sizeof(float));
    if (!m->blob) return -1;
    blob_layout(m, m->blob);
    return 0;
}

void gpu_model_free(gpu_model_t *m) {
    if (!m) return;
    if (m->cfg.id2label) {
        for (int i = 0; i < m->cfg.num_labels; i++)
            free(m->cfg.id2label[i]);
        free(m->cfg.id2label);
    }
    free(m->w.layer);
    free(m->blob);
    free(m->dir);
    free(m->vocab_path);
    free(m->name);
    free(m);
}

size_t gpu_model_param_count(const gpu_model_config_t *c) {
    size_t H = (size_t)c->hidden, I = (size_t)c->intermediate, L = (size_t)c->num_labels;
    size_t emb = ((size_t)c->vocab_size + (size_t)c->max_pos + (size_t)c->type_vocab) * H + 2 * H;
    size_t layer = 4 * H * H + 4 * H + 2 * H * I + I + H + 4 * H;
    return emb + (size_t)c->layers * layer + H * H + H + L * H + L;
}

static const struct {
    const char *name;
    int layers, hidden, heads, intermediate;
} geometries[] = {
    {"bert-tiny", 2, 128, 2, 512},    {"bert-mini", 4, 256, 4, 1024},
    {"bert-small", 4, 512, 8, 2048},  {"bert-medium", 8, 512, 8, 2048},
    {"bert-base", 12, 768, 12, 3072}, {"bert-large", 24, 1024, 16, 4096},
};

int gpu_model_geometry(const char *name, int num_labels, gpu_model_config_t *cfg) {
    if (!name || num_labels <= 0) return -1;
    for (size_t i = 0; i < sizeof geometries / sizeof geometries[0]; i++) {
        if (strcmp(name, geometries[i].name) != 0) continue;
        memset(cfg, 0, sizeof *cfg);
        cfg->vocab_size = 30522;
        cfg->hidden = geometries[i].hidden;
        cfg->layers = geometries[i].layers;
        cfg->heads = geometries[i].heads;
        cfg->intermediate = geometries[i].intermediate;
        cfg->max_pos = 512;
        cfg->type_vocab = 2;
        cfg->num_labels = num_labels;
        cfg->ln_eps = 1e-12f;
        cfg->id2label = NULL; /* gpu_model_init_random names the labels */
        return 0;
    }
    return -1;
}

static char **labels_default(int n) {
    char **lab = calloc((size_t)n, sizeof *lab);
    if (!lab) return NULL;
    for (int i = 0; i < n; i++) {
        char buf[32];
        snprintf(buf, sizeof buf, "LABEL_%d", i);
        if (!(lab[i] = strdup(buf))) {
            for (int j = 0; j < i; j++)
                free(lab[j]);
            free(lab);
            return NULL;
        }
    }
    return lab;
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
        snprintf(err, errlen,
                 "unknown model geometry '%s' (bert-tiny, bert-mini, bert-small, bert-medium, "
                 "bert-base, bert-large) or num_labels %d < 1",
                 geometry ? geometry : "(null)", num_labels);
        free(m);
        return -1;
    }
    if (!(m->name = strdup(geometry)) || !(m->cfg.id2label = labels_default(num_labels)) ||
        model_alloc_weights(m) != 0) {
        snprintf(err, errlen, "out of memory allocating a random %s model", geometry);
        gpu_model_free(m);
        return -1;
    }
    /* Everything N(0, 0.02) first, then biases 0 and LayerNorms (1, 0), as HF initialises. */
    const gpu_model_config_t *c = &m->cfg;
    size_t H = (size_t)c->hidden, I = (size_t)c->intermediate;
    uint64_t s = seed;
    fill_normal(m->blob, m->blob_floats, 0.02f, &s);
    gpu_model_weights_t *w = &m->w;
    fill_const(w->emb_ln_g, H, 1.0f);
    fill_const(w->emb_ln_b, H, 0.0f);
    for (int l = 0; l < c->layers; l++) {
        gpu_layer_weights_t *y = &w->layer[l];
        fill_const(y->q_b, 3 * H, 0.0f);
        fill_const(y->ao_b, H, 0.0f);
        fill_const(y->ff1_b, I, 0.0f);
        fill_const(y->ff2_b, H, 0.0f);
        fill_const(y->ln1_g, H, 1.0f);
        fill_const(y->ln1_b, H, 0.0f);
        fill_const(y->ln2_g, H, 1.0f);
        fill_const(y->ln2_b, H, 0.0f);
    }
    fill_const(w->pool_b, H, 0.0f);
    fill_const(w->cls_b, (size_t)c->num_labels, 0.0f);
    *out = m;
    return 0;
}

/* ---- checkpoint loading ---- */

static int cfg_int(json_t *root, const char *path, const char *key, int *out, char *err,
                   size_t errlen) {
    json_t *v = json_object_get(root, key);
    if (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > 1 << 30) {
        snprintf(err, errlen, "%s: '%s' is %s (need a positive integer)", path, key,
                 v ? "not a positive integer" : "missing");
        return -1;
    }
    *out = (int)json_integer_value(v);
    return 0;
}

/* Each dimension may be up to 2^30, so a config can describe a model whose weight count
 * wraps size_t, or one whose label names alone (a string per label) exhaust memory. Refused
 * before anything is allocated; counted in double, which cannot wrap. */
#define MODEL_MAX_PARAMS 8589934592.0 /* 2^33: 32 GiB of fp32 weights, 25x bert-large */
#define MODEL_MAX_LABELS (1 << 24)

static int config_check_size(const gpu_model_config_t *c, const char *path, char *err,
                             size_t errlen) {
    if (c->num_labels > MODEL_MAX_LABELS) {
        snprintf(err, errlen, "%s: %d labels (at most %d)", path, c->num_labels, MODEL_MAX_LABELS);
        return -1;
    }
    double H = c->hidden, I = c->intermediate, L = c->num_labels;
    double layer = 4 * H * H + 4 * H + 2 * H * I + I + H + 4 * H;
    double n = ((double)c->vocab_size + c->max_pos + c->type_vocab) * H + 2 * H +
               c->layers * layer + H * H + H + L * H + L;
    if (n > MODEL_MAX_PARAMS) {
        snprintf(err, errlen, "%s: the geometry has %.3g parameters (at most %.3g)", path, n,
                 MODEL_MAX_PARAMS);
        return -1;
    }
    return 0;
}

/* config.json's object -> c; path names the file in messages. On failure c->id2label may
 * hold some labels (c->num_labels slots), which the caller frees. */
static int config_from_json(json_t *root, const char *path, gpu_model_config_t *c, char *err,
                            size_t errlen) {
    int rc = -1;
    json_t *arch = json_object_get(root, "architectures");
    int found = 0;
    if (json_is_array(arch)) {
        size_t i;
        json_t *a;
        json_array_foreach(arch, i, a) {
            if (json_is_string(a) &&
                strcmp(json_string_value(a), "BertForSequenceClassification") == 0)
                found = 1;
        }
    }
    if (!found) {
        const char *first = json_is_array(arch) && json_is_string(json_array_get(arch, 0))
                                ? json_string_value(json_array_get(arch, 0))
                                : "(none)";
        snprintf(err, errlen,
                 "%s: unsupported architecture '%s' (only BertForSequenceClassification)", path,
                 first);
        goto out;
    }
    json_t *act = json_object_get(root, "hidden_act");
    if (!json_is_string(act) || strcmp(json_string_value(act), "gelu") != 0) {
        snprintf(err, errlen, "%s: unsupported hidden_act '%s' (only \"gelu\", the erf form)", path,
                 json_is_string(act) ? json_string_value(act) : "(missing)");
        goto out;
    }
    json_t *pet = json_object_get(root, "position_embedding_type");
    if (pet && !(json_is_string(pet) && strcmp(json_string_value(pet), "absolute") == 0)) {
        snprintf(err, errlen, "%s: unsupported position_embedding_type '%s' (only \"absolute\")",
                 path, json_is_string(pet) ? json_string_value(pet) : "(not a string)");
        goto out;
    }
    if (cfg_int(root, path, "vocab_size", &c->vocab_size, err, errlen) ||
        cfg_int(root, path, "hidden_size", &c->hidden, err, errlen) ||
        cfg_int(root, path, "num_hidden_layers", &c->layers, err, errlen) ||
        cfg_int(root, path, "num_attention_heads", &c->heads, err, errlen) ||
        cfg_int(root, path, "intermediate_size", &c->intermediate, err, errlen) ||
        cfg_int(root, path, "max_position_embeddings", &c->max_pos, err, errlen) ||
        cfg_int(root, path, "type_vocab_size", &c->type_vocab, err, errlen))
        goto out;
    if (c->hidden % c->heads != 0) {
        snprintf(err, errlen, "%s: hidden_size %d is not a multiple of num_attention_heads %d",
                 path, c->hidden, c->heads);
        goto out;
    }
    json_t *eps = json_object_get(root, "layer_norm_eps");
    /* The backends add it in fp32: a value that rounds to 0 (or overflows) there would divide
     * by zero on a constant row, so it must be a normal float. */
    double e = json_number_value(eps);
    if (!json_is_number(eps) || !(e >= FLT_MIN && e <= FLT_MAX)) {
        snprintf(err, errlen, "%s: 'layer_norm_eps' is %s (need a positive number in fp32 range)",
                 path, eps ? "out of range" : "missing");
        goto out;
    }
    c->ln_eps = (float)json_number_value(eps);
    json_t *id2 = json_object_get(root, "id2label");
    int named = json_is_object(id2) && json_object_size(id2) > 0;
    if (named) {
        c->num_labels = (int)json_object_size(id2);
    } else if (cfg_int(root, path, "num_labels", &c->num_labels, err, errlen)) {
        snprintf(err, errlen, "%s: neither 'id2label' nor 'num_labels' says the labels", path);
        goto out;
    }
    if (config_check_size(c, path, err, errlen)) goto out;
    if (named) {
        int n = c->num_labels;
        c->id2label = calloc((size_t)n, sizeof *c->id2label);
        if (!c->id2label) {
            snprintf(err, errlen, "%s: out of memory", path);
            goto out;
        }
        const char *k;
        json_t *v;
        json_object_foreach(id2, k, v) {
            char *end;
            long id = strtol(k, &end, 10);
            if (*k == '\0' || *end != '\0' || id < 0 || id >= n || !json_is_string(v) ||
                c->id2label[id]) {
                snprintf(err, errlen,
                         "%s: id2label key '%s' is not one of 0..%d with a string label", path, k,
                         n - 1);
                goto out;
            }
            if (!(c->id2label[id] = strdup(json_string_value(v)))) {
                snprintf(err, errlen, "%s: out of memory", path);
                goto out;
            }
        }
    } else if (!(c->id2label = labels_default(c->num_labels))) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto out;
    }
    rc = 0;
out:
    return rc;
}

static void config_free_labels(gpu_model_config_t *c) {
    if (!c->id2label) return;
    for (int i = 0; i < c->num_labels; i++)
        free(c->id2label[i]);
    free(c->id2label);
    c->id2label = NULL;
}

static int load_config(gpu_model_t *m, const char *path, char *err, size_t errlen) {
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) {
        if (access(path, F_OK) != 0)
            snprintf(err, errlen, "%s: missing (not a Hugging Face checkpoint directory?)", path);
        else
            snprintf(err, errlen, "%s: invalid JSON (%s, line %d)", path, jerr.text, jerr.line);
        return -1;
    }
    int rc = config_from_json(root, path, &m->cfg, err, errlen);
    json_decref(root);
    return rc;
}

int gpu_model_parse_config(const char *json, size_t len, const char *name, gpu_model_config_t *cfg,
                           char *err, size_t errlen) {
    memset(cfg, 0, sizeof *cfg);
    json_error_t jerr;
    json_t *root = json_loadb(json, len, 0, &jerr);
    if (!root) {
        snprintf(err, errlen, "%s: invalid JSON (%s, line %d)", name, jerr.text, jerr.line);
        return -1;
    }
    int rc = config_from_json(root, name, cfg, err, errlen);
    json_decref(root);
    if (rc != 0) config_free_labels(cfg);
    return rc;
}

static char *path_join(const char *dir, const char *file) {
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, file);
    return p;
}

/* Copies tensor name (or its legacy alias, for LayerNorm gamma/beta) of the expected shape
 * (d0) or (d0, d1) into dst. */
static int load_tensor(const gpu_st_file_t *f, const char *name, const char *alias, float *dst,
                       int64_t d0, int64_t d1, char *err, size_t errlen) {
    const gpu_st_tensor_t *t = gpu_st_find(f, name);
    if (!t && alias) t = gpu_st_find(f, alias);
    if (!t) {
        snprintf(err, errlen, "%s: missing tensor '%s'", gpu_st_path(f), name);
        return -1;
    }
    if (!gpu_st_is_float(t)) {
        snprintf(err, errlen, "%s: tensor '%s' has unsupported dtype '%s' (F32, F16, BF16 only)",
                 gpu_st_path(f), t->name, t->dtype_name);
        return -1;
    }
    int nd = d1 > 0 ? 2 : 1;
    if (t->ndim != nd || t->shape[0] != d0 || (nd == 2 && t->shape[1] != d1)) {
        char got[96] = "[", *p = got + 1;
        for (int i = 0; i < t->ndim && p < got + sizeof got - 24; i++)
            p += sprintf(p, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        strcpy(p, "]");
        if (nd == 2)
            snprintf(err, errlen, "%s: tensor '%s' has shape %s, expected [%lld, %lld]",
                     gpu_st_path(f), t->name, got, (long long)d0, (long long)d1);
        else
            snprintf(err, errlen, "%s: tensor '%s' has shape %s, expected [%lld]", gpu_st_path(f),
                     t->name, got, (long long)d0);
        return -1;
    }
    gpu_st_read_f32(f, t, dst);
    return 0;
}

/* LayerNorm prefix.{weight,bias}, or the TF-era prefix.{gamma,beta}. */
static int load_ln(const gpu_st_file_t *f, const char *prefix, float *g, float *b, int H, char *err,
                   size_t errlen) {
    char n1[256], a1[256], n2[256], a2[256];
    snprintf(n1, sizeof n1, "%s.weight", prefix);
    snprintf(a1, sizeof a1, "%s.gamma", prefix);
    snprintf(n2, sizeof n2, "%s.bias", prefix);
    snprintf(a2, sizeof a2, "%s.beta", prefix);
    if (load_tensor(f, n1, a1, g, H, 0, err, errlen)) return -1;
    return load_tensor(f, n2, a2, b, H, 0, err, errlen);
}

static int load_linear(const gpu_st_file_t *f, const char *prefix, float *w, float *b, int out,
                       int in, char *err, size_t errlen) {
    char nw[256], nb[256];
    snprintf(nw, sizeof nw, "%s.weight", prefix);
    snprintf(nb, sizeof nb, "%s.bias", prefix);
    if (load_tensor(f, nw, NULL, w, out, in, err, errlen)) return -1;
    return load_tensor(f, nb, NULL, b, out, 0, err, errlen);
}

static int load_weights(gpu_model_t *m, const gpu_st_file_t *f, char *err, size_t errlen) {
    const gpu_model_config_t *c = &m->cfg;
    gpu_model_weights_t *w = &m->w;
    int H = c->hidden, I = c->intermediate;
    if (load_tensor(f, "bert.embeddings.word_embeddings.weight", NULL, w->word_emb, c->vocab_size,
                    H, err, errlen) ||
        load_tensor(f, "bert.embeddings.position_embeddings.weight", NULL, w->pos_emb, c->max_pos,
                    H, err, errlen) ||
        load_tensor(f, "bert.embeddings.token_type_embeddings.weight", NULL, w->type_emb,
                    c->type_vocab, H, err, errlen) ||
        load_ln(f, "bert.embeddings.LayerNorm", w->emb_ln_g, w->emb_ln_b, H, err, errlen))
        return -1;
    for (int l = 0; l < c->layers; l++) {
        gpu_layer_weights_t *y = &w->layer[l];
        char p[128], q[160];
        snprintf(p, sizeof p, "bert.encoder.layer.%d", l);
#define LIN(sub, W, B, O, IN)                                                                      \
    (snprintf(q, sizeof q, "%s.%s", p, sub), load_linear(f, q, W, B, O, IN, err, errlen))
#define LN(sub, G, B) (snprintf(q, sizeof q, "%s.%s", p, sub), load_ln(f, q, G, B, H, err, errlen))
        if (LIN("attention.self.query", y->q_w, y->q_b, H, H) ||
            LIN("attention.self.key", y->k_w, y->k_b, H, H) ||
            LIN("attention.self.value", y->v_w, y->v_b, H, H) ||
            LIN("attention.output.dense", y->ao_w, y->ao_b, H, H) ||
            LN("attention.output.LayerNorm", y->ln1_g, y->ln1_b) ||
            LIN("intermediate.dense", y->ff1_w, y->ff1_b, I, H) ||
            LIN("output.dense", y->ff2_w, y->ff2_b, H, I) ||
            LN("output.LayerNorm", y->ln2_g, y->ln2_b))
            return -1;
#undef LIN
#undef LN
    }
    if (load_linear(f, "bert.pooler.dense", w->pool_w, w->pool_b, H, H, err, errlen) ||
        load_linear(f, "classifier", w->cls_w, w->cls_b, c->num_labels, H, err, errlen))
        return -1;
    return 0;
}

int gpu_model_load(const char *dir, gpu_model_t **out, char *err, size_t errlen) {
    *out = NULL;
    gpu_model_t *m = calloc(1, sizeof *m);
    char *cfg_path = NULL, *st_path = NULL;
    gpu_st_file_t *st = NULL;
    int rc = -1;
    if (!m || !(m->dir = strdup(dir)) || !(cfg_path = path_join(dir, "config.json")) ||
        !(st_path = path_join(dir, "model.safetensors")) ||
        !(m->vocab_path = path_join(dir, "vocab.txt"))) {
        snprintf(err, errlen, "%s: out of memory", dir);
        goto out;
    }
    /* The name is the directory's last component ("a/b/" names b). */
    if (!(m->name = strdup(dir))) {
        snprintf(err, errlen, "%s: out of memory", dir);
        goto out;
    }
    size_t nl = strlen(m->name);
    while (nl > 1 && m->name[nl - 1] == '/')
        m->name[--nl] = '\0';
    char *slash = strrchr(m->name, '/');
    if (slash && slash[1]) memmove(m->name, slash + 1, strlen(slash + 1) + 1);
    if (load_config(m, cfg_path, err, errlen) != 0) goto out;
    if (access(m->vocab_path, R_OK) != 0) {
        snprintf(err, errlen, "%s: missing (the WordPiece vocabulary the tokenizer needs)",
                 m->vocab_path);
        goto out;
    }
    if (access(st_path, F_OK) != 0) {
        char *bin = path_join(dir, "pytorch_model.bin");
        int has_bin = bin && access(bin, F_OK) == 0;
        free(bin);
        snprintf(err, errlen, "%s: missing%s", st_path,
                 has_bin ? " (only pytorch_model.bin is there: save the model with "
                           "safe_serialization=True)"
                         : "");
        goto out;
    }
    if (gpu_st_open(st_path, &st, err, errlen) != 0) goto out;
    if (model_alloc_weights(m) != 0) {
        snprintf(err, errlen, "%s: out of memory for %zu parameters", st_path,
                 gpu_model_param_count(&m->cfg));
        goto out;
    }
    if (load_weights(m, st, err, errlen) != 0) goto out;
    rc = 0;
out:
    gpu_st_close(st);
    free(cfg_path);
    free(st_path);
    if (rc == 0)
        *out = m;
    else
        gpu_model_free(m);
    return rc;
}
