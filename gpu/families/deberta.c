/* DebertaV2ForSequenceClassification (DeBERTa-v2 and -v3), the whole family: config.json,
 * the tensors and the forward pass:
 * embeddings (a position table only where the checkpoint has one), BERT's post-norm layers
 * with disentangled attention (scores q.k plus c2p, the query against the keys of the
 * relative embeddings, and p2c, the key against their queries, read at the bucketed
 * distance), the pooler on the first token. The relative embeddings (after their LayerNorm)
 * go through each layer's position K and Q projections once, in the graph's prelude. */
#include <stdio.h>
#include <string.h>

#include "gpu/families/family.h"

/* Its own knobs, the config's own bytes (model.h). */
typedef struct {
    int span;     /* relative embedding rows / 2 (position_buckets, else max_relative_positions);
                   * 0: no relative attention */
    int buckets;  /* position_buckets, 0 for plain clamped distances */
    int max_pos;  /* max_relative_positions */
    int c2p, p2c; /* pos_att_type has "c2p" / "p2c" */
    int scale_factor;  /* 1 + c2p + p2c: scores are divided by sqrt(head_dim * this) */
    int share_att_key; /* the relative embeddings go through the layer's own K and Q */
    int rel_ln;        /* norm_rel_ebd has "layer_norm" */
} deb_t;
GPU_FAMILY_OWN_CONFIG(deb_t)

/* Its own weights, the blob's own slices (model.h): after the head's, the relative embeddings
 * (2 span, H) and their LayerNorm (H); in each layer, the projections of the relative
 * embeddings, c2p's keys and p2c's queries, (H, H) and (H): the layer's K and Q themselves
 * under share_att_key. */
enum { REL_EMB, REL_LN_G, REL_LN_B, OWN_WEIGHTS };
enum { POS_K_W, POS_K_B, POS_Q_W, POS_Q_B, OWN_LAYER_WEIGHTS };
GPU_FAMILY_OWN_WEIGHTS(OWN_WEIGHTS, OWN_LAYER_WEIGHTS);

static void defaults(gpu_model_config_t *c) {
    c->emb_size = c->hidden;
    const deb_t d = {.buckets = 256,
                     .max_pos = 512,
                     .span = 256,
                     .c2p = 1,
                     .p2c = 1,
                     .scale_factor = 3,
                     .share_att_key = 1,
                     .rel_ln = 1};
    set_own(c, &d);
}

/* pos_att_type: a list ["p2c", "c2p"] or the older "p2c|c2p" string. */
static common_status_t att_types(json_t *root, const char *path, deb_t *d, common_err_t *err) {
    json_t *v = json_object_get(root, "pos_att_type");
    d->c2p = d->p2c = 0;
    if (!v || json_is_null(v)) return COMMON_OK;
    char buf[128] = "";
    if (json_is_string(v)) {
        snprintf(buf, sizeof buf, "%s", json_string_value(v));
    } else if (json_is_array(v)) {
        size_t i;
        json_t *t;
        json_array_foreach(v, i, t) {
            if (!json_is_string(t)) break;
            size_t n = strlen(buf);
            snprintf(buf + n, sizeof buf - n, "%s%s", n ? "|" : "", json_string_value(t));
        }
    }
    for (char *save = NULL, *t = strtok_r(buf, "|", &save); t; t = strtok_r(NULL, "|", &save)) {
        while (*t == ' ')
            t++;
        if (strncmp(t, "c2p", 3) == 0)
            d->c2p = 1;
        else if (strncmp(t, "p2c", 3) == 0)
            d->p2c = 1;
        else {
            return common_err_set(err, COMMON_USAGE,
                                  "%s: pos_att_type '%s' is not supported (c2p, p2c)", path, t);
        }
    }
    return COMMON_OK;
}

static common_status_t config(json_t *root, const char *path, gpu_model_config_t *c,
                              common_err_t *err) {
    int pos_rows = 0;
    if (gpu_model_cfg_int_min(root, path, "vocab_size", 1, &c->vocab_size, err) ||
        gpu_model_cfg_int_min(root, path, "hidden_size", 1, &c->hidden, err) ||
        gpu_model_cfg_int_min(root, path, "num_hidden_layers", 1, &c->layers, err) ||
        gpu_model_cfg_int_min(root, path, "num_attention_heads", 1, &c->heads, err) ||
        gpu_model_cfg_int_min(root, path, "intermediate_size", 1, &c->intermediate, err) ||
        gpu_model_cfg_int_min(root, path, "max_position_embeddings", 1, &pos_rows, err) ||
        gpu_model_cfg_int_min(root, path, "type_vocab_size", 0, &c->type_vocab, err) ||
        gpu_model_cfg_act(root, path, "hidden_act", "gelu", &c->act, err) ||
        gpu_model_cfg_act(root, path, "pooler_hidden_act", "gelu", &c->head_act, err) ||
        gpu_model_cfg_eps(root, path, "layer_norm_eps", 1e-7, &c->ln_eps, err))
        return err->code;
    c->emb_size = c->hidden;
    int e = c->hidden, pooler = c->hidden, conv = 0, head = 0, biased = 1, rel = 0, share = 0;
    deb_t d = {0};
    if ((json_object_get(root, "embedding_size") &&
         gpu_model_cfg_int_min(root, path, "embedding_size", 1, &e, err)) ||
        (json_object_get(root, "pooler_hidden_size") &&
         gpu_model_cfg_int_min(root, path, "pooler_hidden_size", 1, &pooler, err)) ||
        (json_object_get(root, "conv_kernel_size") &&
         gpu_model_cfg_int_min(root, path, "conv_kernel_size", 0, &conv, err)) ||
        (json_object_get(root, "attention_head_size") &&
         gpu_model_cfg_int_min(root, path, "attention_head_size", 1, &head, err)) ||
        gpu_model_cfg_bool(root, path, "position_biased_input", 1, &biased, err) ||
        gpu_model_cfg_bool(root, path, "relative_attention", 0, &rel, err) ||
        gpu_model_cfg_bool(root, path, "share_att_key", 0, &share, err) ||
        att_types(root, path, &d, err))
        return err->code;
    if (e != c->hidden || pooler != c->hidden || conv > 0 ||
        (head && c->hidden != head * c->heads)) {
        return common_err_set(
            err, COMMON_USAGE,
            "%s: embedding_size, pooler_hidden_size and attention_head_size x heads must "
            "equal hidden_size, and conv_kernel_size 0 (DeBERTa-v2 xlarge's conv layer is not "
            "supported)",
            path);
    }
    /* HF numbers positions from 0 and, without position_biased_input, has no table. */
    c->pos_rows = biased ? pos_rows : 0;
    c->max_pos = pos_rows;
    d.share_att_key = share;
    /* HF divides by sqrt(head_dim * (1 + terms)) whether or not relative attention is on. */
    d.scale_factor = 1 + d.c2p + d.p2c;
    if (!rel) {
        d.c2p = d.p2c = 0;
        set_own(c, &d);
        return COMMON_OK;
    }
    int buckets = -1, max_rel = -1;
    json_t *b = json_object_get(root, "position_buckets");
    json_t *mr = json_object_get(root, "max_relative_positions");
    if (json_is_integer(b)) buckets = (int)json_integer_value(b);
    if (json_is_integer(mr)) max_rel = (int)json_integer_value(mr);
    if ((b && !json_is_integer(b)) || (mr && !json_is_integer(mr)) || buckets > 1 << 20 ||
        max_rel > 1 << 20) {
        return common_err_set(err, COMMON_USAGE,
                              "%s: position_buckets / max_relative_positions are not integers "
                              "up to 2^20",
                              path);
    }
    if (max_rel < 1) max_rel = pos_rows;
    d.max_pos = max_rel;
    d.buckets = buckets > 0 ? buckets : 0;
    d.span = buckets > 0 ? buckets : max_rel;
    if (d.buckets == 1 || (d.buckets > 0 && max_rel <= d.buckets / 2 + 1)) {
        return common_err_set(err, COMMON_USAGE,
                              "%s: position_buckets %d needs max_relative_positions above %d", path,
                              d.buckets, d.buckets / 2 + 1);
    }
    json_t *n = json_object_get(root, "norm_rel_ebd");
    d.rel_ln = json_is_string(n) && strstr(json_string_value(n), "layer_norm") != NULL;
    set_own(c, &d);
    return COMMON_OK;
}

static common_status_t bind(gpu_model_t *m, const gpu_st_file_t *f, common_err_t *err) {
    const gpu_model_config_t *c = &m->cfg;
    const deb_t d = own(c);
    gpu_model_weights_t *w = &m->w;
    const int H = c->hidden, I = c->intermediate;
    if (gpu_model_load_tensor(f, "deberta.embeddings.word_embeddings.weight", NULL, w->word_emb,
                              c->vocab_size, H, err) ||
        (c->pos_rows && gpu_model_load_tensor(f, "deberta.embeddings.position_embeddings.weight",
                                              NULL, w->pos_emb, c->pos_rows, H, err)) ||
        (c->type_vocab &&
         gpu_model_load_tensor(f, "deberta.embeddings.token_type_embeddings.weight", NULL,
                               w->type_emb, c->type_vocab, H, err)) ||
        gpu_model_load_ln(f, "deberta.embeddings.LayerNorm", w->emb_ln_g, w->emb_ln_b, H, err))
        return err->code;
    for (int l = 0; l < c->layers; l++) {
        gpu_layer_weights_t *y = &w->layer[l];
        char p[192];
#define LIN(sub, W, B, O, IN)                                                                      \
    (snprintf(p, sizeof p, "deberta.encoder.layer.%d.%s", l, sub),                                 \
     gpu_model_load_linear(f, p, W, B, O, IN, err))
#define LN(sub, G, B)                                                                              \
    (snprintf(p, sizeof p, "deberta.encoder.layer.%d.%s", l, sub),                                 \
     gpu_model_load_ln(f, p, G, B, H, err))
        if (LIN("attention.self.query_proj", y->q_w, y->q_b, H, H) ||
            LIN("attention.self.key_proj", y->k_w, y->k_b, H, H) ||
            LIN("attention.self.value_proj", y->v_w, y->v_b, H, H) ||
            LIN("attention.output.dense", y->ao_w, y->ao_b, H, H) ||
            LN("attention.output.LayerNorm", y->ln1_g, y->ln1_b) ||
            LIN("intermediate.dense", y->ff1_w, y->ff1_b, I, H) ||
            LIN("output.dense", y->ff2_w, y->ff2_b, H, I) ||
            LN("output.LayerNorm", y->ln2_g, y->ln2_b))
            return err->code;
        if (d.span > 0 && !d.share_att_key &&
            ((d.c2p &&
              LIN("attention.self.pos_key_proj", y->own[POS_K_W], y->own[POS_K_B], H, H)) ||
             (d.p2c &&
              LIN("attention.self.pos_query_proj", y->own[POS_Q_W], y->own[POS_Q_B], H, H))))
            return err->code;
#undef LIN
#undef LN
    }
    if (d.span > 0 && (gpu_model_load_tensor(f, "deberta.encoder.rel_embeddings.weight", NULL,
                                             w->own[REL_EMB], 2 * (int64_t)d.span, H, err) ||
                       (d.rel_ln && gpu_model_load_ln(f, "deberta.encoder.LayerNorm",
                                                      w->own[REL_LN_G], w->own[REL_LN_B], H, err))))
        return err->code;
    return gpu_model_load_linear(f, "pooler.dense", w->pool_w, w->pool_b, H, H, err) ||
                   gpu_model_load_linear(f, "classifier", w->cls_w, w->cls_b, c->num_labels, H, err)
               ? err->code
               : COMMON_OK;
}

/* ---- the forward pass ---- */

#define V(t, c) gpu_gb_view(t, c)

static void build(gpu_gb_t *b) {
    const gpu_model_config_t *c = &b->g->cfg;
    const gpu_model_weights_t *w = b->w;
    const deb_t d = own(c);
    const int H = c->hidden, R = 2 * d.span;
    const int x = gpu_gb_embed(b, c->pos_rows > 0, c->type_vocab > 0);
    int rk[c->layers > 0 ? c->layers : 1], rq[c->layers > 0 ? c->layers : 1];
    if (d.span > 0) {
        const int emb = gpu_gb_weight(b, "rel_emb", w ? w->own[REL_EMB] : NULL, R, H, 0);
        const int rel = gpu_gb_const(b, "rel", R, H); /* (2 span, H) after the norm */
        gpu_op_t *n = gpu_gb_op(b, 1, GPU_OP_NORM, "rel.norm", -1);
        n->prec = GPU_PREC_FP32;
        n->out = V(rel, 0), n->src[0] = V(emb, 0), n->n = H;
        if (d.rel_ln) {
            n->w[0] = gpu_gb_weight(b, "rel.ln.g", w ? w->own[REL_LN_G] : NULL, 1, H, 1);
            n->w[1] = gpu_gb_weight(b, "rel.ln.b", w ? w->own[REL_LN_B] : NULL, 1, H, 1);
        }
        char nm[GPU_GRAPH_NAME];
        for (int l = 0; l < c->layers; l++) {
            const gpu_layer_weights_t *y = w ? &w->layer[l] : NULL;
            const int want[2] = {d.c2p, d.p2c};
            int *out[2] = {rk, rq};
            const char *what[2] = {"pos_k", "pos_q"};
            for (int k = 0; k < 2; k++) {
                out[k][l] = -1;
                if (!want[k]) continue;
                const float *pw = y ? y->own[k ? POS_Q_W : POS_K_W] : NULL;
                const float *pb = y ? y->own[k ? POS_Q_B : POS_K_B] : NULL;
                snprintf(nm, sizeof nm, "l%d.%s", l, what[k]);
                out[k][l] = gpu_gb_const(b, nm, R, H); /* (2 span, H) */
                gpu_op_t *p = gpu_gb_op(b, 1, GPU_OP_LINEAR, what[k], l);
                p->prec = GPU_PREC_FP32;
                p->out = V(out[k][l], 0), p->src[0] = V(rel, 0);
                snprintf(nm, sizeof nm, "l%d.%s.w", l, what[k]);
                p->w[0] = gpu_gb_weight(b, nm, pw, H, H, 1);
                snprintf(nm, sizeof nm, "l%d.%s.b", l, what[k]);
                p->w[1] = gpu_gb_weight(b, nm, pb, 1, H, 1);
                p->n = H, p->k = H, p->epi = GPU_EPI_BIAS;
            }
        }
    }
    const gpu_gb_rel_t rel = {.k = d.span > 0 && d.c2p ? rk : NULL,
                              .q = d.span > 0 && d.p2c ? rq : NULL,
                              .scale_factor = d.scale_factor,
                              .span = d.span,
                              .buckets = d.buckets,
                              .max_pos = d.max_pos};
    const int first = gpu_gb_postnorm_layers(b, x, &rel);
    gpu_gb_head(b, first, -1, -1, c->head_act);
}

/* ---- the rest of its row ---- */

/* A bucketed table needs room for the buckets' log part (gpu_op_rel_row). */
static const char *validate(const gpu_model_config_t *c) {
    const deb_t d = own(c);
    if (d.span < 0 || (d.span > 0 && d.buckets == 1))
        return "position_buckets / max_relative_positions";
    return NULL;
}

/* Its weights beyond the shared ones: each layer's projections of the relative embeddings
 * (the layer's own K and Q under share_att_key), after the layer's; the relative embeddings
 * and their LayerNorm after the head's. */
static void layout(gpu_model_blob_t *b, gpu_layer_weights_t *y) {
    const deb_t d = own(b->cfg);
    const size_t H = (size_t)b->cfg->hidden;
    if (d.span <= 0) return;
    if (!y) {
        gpu_model_slice(b, &b->w->own[REL_EMB], 2 * (size_t)d.span * H);
        if (d.rel_ln) {
            gpu_model_slice(b, &b->w->own[REL_LN_G], H);
            gpu_model_slice(b, &b->w->own[REL_LN_B], H);
        }
    } else if (!d.share_att_key) {
        gpu_model_slice(b, &y->own[POS_K_W], H * H);
        gpu_model_slice(b, &y->own[POS_K_B], H);
        gpu_model_slice(b, &y->own[POS_Q_W], H * H);
        gpu_model_slice(b, &y->own[POS_Q_B], H);
    } else if (b->base) {
        y->own[POS_K_W] = y->k_w, y->own[POS_K_B] = y->k_b;
        y->own[POS_Q_W] = y->q_w, y->own[POS_Q_B] = y->q_b;
    }
}

/* microsoft/deberta-v3-base: 512 positions, 256 buckets, no table, no types. */
static const gpu_model_geometry_t geometries[] = {
    {"deberta-v3-base", 12, 768, 12, 3072, 128100, 0, 512, 0, 0, 1e-7f},
};

static void geometry(gpu_model_config_t *c) {
    c->pos_rows = 0; /* position_biased_input false */
}

/* The relative embeddings' norm as HF initialises it: (1, 0). */
static void init_random(gpu_model_t *m) {
    gpu_model_weights_t *w = &m->w;
    for (int i = 0; w->own[REL_LN_G] && i < m->cfg.hidden; i++)
        w->own[REL_LN_G][i] = 1.0f, w->own[REL_LN_B][i] = 0.0f;
}

const gpu_family_t gpu_family_deberta = {
    .rules = {.arch = "DebertaV2ForSequenceClassification",
              .name = "deberta-v2",
              .head_act = GPU_ACT_GELU,
              .no_tables = 1,
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
