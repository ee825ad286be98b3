/* Hugging Face sequence-classification checkpoints -> gpu_model_t (fp32, one blob): the blob's
 * layout and the loader. config.json's parser is model_config.c, the named geometries with
 * random weights model_geometry.c; each family's keys, tensor names, own weights and
 * geometries are its row's (gpu/families/<family>.c). */
#include "gpu/model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu/model/model_int.h"
#include "gpu/model/safetensors.h"

#define BLOB_ALIGN 16 /* floats: every slice starts on a 64-byte line */

void gpu_model_slice(gpu_model_blob_t *b, float **ptr, size_t n) {
    if (b->base) *ptr = b->base + b->at;
    b->at += b->exact ? n : (n + BLOB_ALIGN - 1) / BLOB_ALIGN * BLOB_ALIGN;
    b->total += (double)n;
}

/* Assigns every weight pointer of b->w as a slice of b->base (when it is set) and adds up the
 * floats: the shared slices, and the family's own through its row's layout hook. Q, K and V
 * of a layer are laid out back to back, weights and biases alike, so a backend can run them
 * as one fused (3H, H) projection. Counting (b->exact) lays out one layer for all: every
 * layer takes the same slices. */
static void blob_layout(gpu_model_blob_t *b) {
    const gpu_model_config_t *c = b->cfg;
    const gpu_model_family_rules_t *r = gpu_model_family_of(c->family);
    void (*own)(gpu_model_blob_t *, gpu_layer_weights_t *) = r ? r->layout : NULL;
    size_t H = (size_t)c->hidden, I = (size_t)c->intermediate, L = (size_t)c->num_labels;
    size_t E = (size_t)c->emb_size, F = (size_t)gpu_model_ff1_rows(c);
#define SLICE(ptr, n) gpu_model_slice(b, &(ptr), (size_t)(n))
    gpu_model_weights_t *w = b->w;
    SLICE(w->word_emb, (size_t)c->vocab_size * E);
    /* The whole checkpoint table; the model's positions start pos_offset rows in. */
    SLICE(w->pos_emb, (size_t)c->pos_rows * E);
    if (b->base) w->pos_emb = c->pos_rows ? w->pos_emb + (size_t)c->pos_offset * E : NULL;
    SLICE(w->type_emb, (size_t)c->type_vocab * E);
    SLICE(w->emb_ln_g, E);
    SLICE(w->emb_ln_b, E);
    if (E != H) {
        SLICE(w->emb_proj_w, H * E);
        SLICE(w->emb_proj_b, H);
    }
    const size_t before = b->at;
    const double total_before = b->total;
    for (int l = 0; l < (b->exact ? 1 : c->layers); l++) {
        gpu_layer_weights_t scratch, *y = b->base ? &w->layer[l] : &scratch;
        float *qkv_w = NULL, *qkv_b = NULL;
        SLICE(qkv_w, 3 * H * H);
        SLICE(qkv_b, 3 * H);
        if (b->base) {
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
        SLICE(y->ff1_w, F * H);
        SLICE(y->ff1_b, F);
        SLICE(y->ff2_w, H * I);
        SLICE(y->ff2_b, H);
        SLICE(y->ln2_g, H);
        SLICE(y->ln2_b, H);
        if (own) own(b, y);
    }
    if (b->exact) {
        b->at = before + (b->at - before) * (size_t)c->layers;
        b->total = total_before + (b->total - total_before) * c->layers;
    }
    SLICE(w->pool_w, H * H);
    SLICE(w->pool_b, H);
    SLICE(w->cls_w, L * H);
    SLICE(w->cls_b, L);
    if (own) own(b, NULL);
#undef SLICE
}

/* Allocates the layer table and the blob for m->cfg and slices it. 0 or -1 (out of memory). */
int gpu_model_alloc_weights(gpu_model_t *m) {
    m->w.layer = calloc((size_t)m->cfg.layers, sizeof *m->w.layer);
    if (!m->w.layer) return -1;
    gpu_model_blob_t b = {.cfg = &m->cfg, .w = &m->w};
    blob_layout(&b);
    m->blob_floats = b.at;
    m->blob = aligned_alloc(64, m->blob_floats * sizeof(float));
    if (!m->blob) return -1;
    b.at = 0, b.base = m->blob;
    blob_layout(&b);
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

int gpu_model_glu(const gpu_model_config_t *c) {
    const gpu_model_family_rules_t *r = gpu_model_family_of(c->family);
    return r && r->glu;
}

int gpu_model_ff1_rows(const gpu_model_config_t *c) {
    return gpu_model_glu(c) ? 2 * c->intermediate : c->intermediate;
}

size_t gpu_model_param_count(const gpu_model_config_t *c) {
    gpu_model_weights_t scratch = {0};
    gpu_model_blob_t b = {.cfg = c, .w = &scratch, .exact = 1};
    blob_layout(&b);
    return b.at;
}

double gpu_model_param_total(const gpu_model_config_t *c) {
    gpu_model_weights_t scratch = {0};
    gpu_model_blob_t b = {.cfg = c, .w = &scratch, .exact = 1};
    blob_layout(&b);
    return b.total;
}

/* ---- checkpoint loading ---- */

static char *path_join(const char *dir, const char *file) {
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, file);
    return p;
}

common_status_t gpu_model_load(const char *dir, gpu_model_t **out, common_err_t *err) {
    *out = NULL;
    gpu_model_t *m = calloc(1, sizeof *m);
    char *cfg_path = NULL, *st_path = NULL;
    gpu_st_file_t *st = NULL;
    common_status_t rc = COMMON_FATAL;
    if (!m || !(m->dir = strdup(dir)) || !(cfg_path = path_join(dir, "config.json")) ||
        !(st_path = path_join(dir, "model.safetensors")) ||
        !(m->vocab_path = path_join(dir, "vocab.txt"))) {
        rc = common_err_set(err, COMMON_FATAL, "%s: out of memory", dir);
        goto out;
    }
    /* The name is the directory's last component ("a/b/" names b). */
    if (!(m->name = strdup(dir))) {
        rc = common_err_set(err, COMMON_FATAL, "%s: out of memory", dir);
        goto out;
    }
    size_t nl = strlen(m->name);
    while (nl > 1 && m->name[nl - 1] == '/')
        m->name[--nl] = '\0';
    char *slash = strrchr(m->name, '/');
    if (slash && slash[1]) memmove(m->name, slash + 1, strlen(slash + 1) + 1);
    if ((rc = gpu_model_read_config(cfg_path, &m->cfg, err)) != COMMON_OK) goto out;
    if (access(m->vocab_path, R_OK) != 0) {
        /* Byte-level BPE and Unigram checkpoints carry their vocabulary in tokenizer.json. */
        char *tj = path_join(dir, "tokenizer.json");
        int has_tj = tj && access(tj, R_OK) == 0;
        free(tj);
        if (!has_tj) {
            rc = common_err_set(
                err, COMMON_USAGE,
                "%s: missing, and no tokenizer.json either (the vocabulary the tokenizer "
                "needs)",
                m->vocab_path);
            goto out;
        }
        free(m->vocab_path);
        m->vocab_path = NULL;
    }
    if (access(st_path, F_OK) != 0) {
        char *bin = path_join(dir, "pytorch_model.bin");
        int has_bin = bin && access(bin, F_OK) == 0;
        free(bin);
        rc = common_err_set(err, COMMON_USAGE, "%s: missing", st_path);
        if (has_bin) {
            common_err_detail(err, "only pytorch_model.bin is there");
            common_err_hint(err, "save the model with safe_serialization=True");
        }
        goto out;
    }
    if ((rc = gpu_st_open(st_path, &st, err)) != COMMON_OK) goto out;
    if (gpu_model_alloc_weights(m) != 0) {
        rc = common_err_set(err, COMMON_FATAL, "%s: out of memory for %zu parameters", st_path,
                            gpu_model_param_count(&m->cfg));
        goto out;
    }
    rc = gpu_model_family_of(m->cfg.family)->bind(m, st, err);
out:
    gpu_st_close(st);
    free(cfg_path);
    free(st_path);
    if (rc == COMMON_OK)
        *out = m;
    else
        gpu_model_free(m);
    return rc;
}
