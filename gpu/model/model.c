/* Hugging Face sequence-classification checkpoints -> gpu_model_t (fp32, one blob): the blob's
 * layout and the loader. config.json's parser is model_config.c, the per-family tensor names
 * model_weights.c, the named geometries with random weights model_geometry.c. */
#include "gpu/model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu/model/model_int.h"
#include "gpu/model/safetensors.h"

#define BLOB_ALIGN 16 /* floats: every slice starts on a 64-byte line */

/* Assigns every weight pointer of m as a slice of base (when base is non-NULL) and returns
 * the floats the blob needs. Q, K and V of a layer are laid out back to back, weights and
 * biases alike, so a backend can run them as one fused (3H, H) projection. */
static size_t blob_layout(gpu_model_t *m, float *base) {
    const gpu_model_config_t *c = &m->cfg;
    size_t H = (size_t)c->hidden, I = (size_t)c->intermediate, L = (size_t)c->num_labels;
    size_t E = (size_t)c->emb_size, F = (size_t)gpu_model_ff1_rows(c);
    size_t at = 0;
#define SLICE(ptr, n)                                                                              \
    do {                                                                                           \
        if (base) (ptr) = base + at;                                                               \
        at += ((size_t)(n) + BLOB_ALIGN - 1) / BLOB_ALIGN * BLOB_ALIGN;                            \
    } while (0)
    gpu_model_weights_t *w = &m->w;
    SLICE(w->word_emb, (size_t)c->vocab_size * E);
    /* The whole checkpoint table; the model's positions start pos_offset rows in. */
    SLICE(w->pos_emb, (size_t)c->pos_rows * E);
    if (base) w->pos_emb = c->pos_rows ? w->pos_emb + (size_t)c->pos_offset * E : NULL;
    SLICE(w->type_emb, (size_t)c->type_vocab * E);
    SLICE(w->emb_ln_g, E);
    SLICE(w->emb_ln_b, E);
    if (E != H) {
        SLICE(w->emb_proj_w, H * E);
        SLICE(w->emb_proj_b, H);
    }
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
        SLICE(y->ff1_w, F * H);
        SLICE(y->ff1_b, F);
        SLICE(y->ff2_w, H * I);
        SLICE(y->ff2_b, H);
        SLICE(y->ln2_g, H);
        SLICE(y->ln2_b, H);
        if (c->rel_span > 0 && !c->share_att_key) {
            SLICE(y->pos_k_w, H * H);
            SLICE(y->pos_k_b, H);
            SLICE(y->pos_q_w, H * H);
            SLICE(y->pos_q_b, H);
        } else if (c->rel_span > 0 && base) {
            y->pos_k_w = y->k_w, y->pos_k_b = y->k_b;
            y->pos_q_w = y->q_w, y->pos_q_b = y->q_b;
        }
    }
    SLICE(w->pool_w, H * H);
    SLICE(w->pool_b, H);
    SLICE(w->cls_w, L * H);
    SLICE(w->cls_b, L);
    if (c->family == GPU_FAMILY_MODERNBERT) {
        SLICE(w->final_ln_g, H);
        SLICE(w->final_ln_b, H);
        SLICE(w->head_ln_g, H);
        SLICE(w->head_ln_b, H);
    }
    if (c->rel_span > 0) SLICE(w->rel_emb, 2 * (size_t)c->rel_span * H);
    if (c->rel_span > 0 && c->rel_ln) {
        SLICE(w->rel_ln_g, H);
        SLICE(w->rel_ln_b, H);
    }
#undef SLICE
    return at;
}

/* Allocates the layer table and the blob for m->cfg and slices it. 0 or -1 (out of memory). */
int gpu_model_alloc_weights(gpu_model_t *m) {
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

int gpu_model_ff1_rows(const gpu_model_config_t *c) {
    return c->glu ? 2 * c->intermediate : c->intermediate;
}

size_t gpu_model_param_count(const gpu_model_config_t *c) {
    size_t H = (size_t)c->hidden, I = (size_t)c->intermediate, L = (size_t)c->num_labels;
    size_t E = (size_t)c->emb_size, F = (size_t)gpu_model_ff1_rows(c);
    size_t emb = ((size_t)c->vocab_size + (size_t)c->pos_rows + (size_t)c->type_vocab) * E + 2 * E;
    if (E != H) emb += H * E + H;
    size_t layer = 4 * H * H + 4 * H + F * H + F + H * I + H + 4 * H;
    if (c->rel_span > 0 && !c->share_att_key) layer += 2 * H * H + 2 * H;
    size_t extra = c->family == GPU_FAMILY_MODERNBERT ? 4 * H : 0;
    if (c->rel_span > 0) extra += 2 * (size_t)c->rel_span * H + (c->rel_ln ? 2 * H : 0);
    return emb + (size_t)c->layers * layer + H * H + H + L * H + L + extra;
}

/* ---- checkpoint loading ---- */

static char *path_join(const char *dir, const char *file) {
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, file);
    return p;
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
    if (gpu_model_read_config(cfg_path, &m->cfg, err, errlen) != 0) goto out;
    if (access(m->vocab_path, R_OK) != 0) {
        /* Byte-level BPE and Unigram checkpoints carry their vocabulary in tokenizer.json. */
        char *tj = path_join(dir, "tokenizer.json");
        int has_tj = tj && access(tj, R_OK) == 0;
        free(tj);
        if (!has_tj) {
            snprintf(err, errlen,
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
        snprintf(err, errlen, "%s: missing%s", st_path,
                 has_bin ? " (only pytorch_model.bin is there: save the model with "
                           "safe_serialization=True)"
                         : "");
        goto out;
    }
    if (gpu_st_open(st_path, &st, err, errlen) != 0) goto out;
    if (gpu_model_alloc_weights(m) != 0) {
        snprintf(err, errlen, "%s: out of memory for %zu parameters", st_path,
                 gpu_model_param_count(&m->cfg));
        goto out;
    }
    if (gpu_model_bind_weights(m, st, err, errlen) != 0) goto out;
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
