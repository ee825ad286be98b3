/* config.json -> gpu_model_config_t: which family (from "architectures"), its dimensions
 * under each family's key names, and the knobs the backends honour (activations, position
 * offset, embedding size). */
#include <float.h>
#include <limits.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu/model/model.h"
#include "gpu/model/model_int.h"

/* Registry rows are static: the lists are written once, the first time they are asked for. */
static char arch_list[1024], family_list[512];
static pthread_once_t list_once = PTHREAD_ONCE_INIT;

static void lists_fill(void) {
    size_t n = 0, m = 0;
    for (int i = 0; gpu_model_family_rules(i); i++) {
        const gpu_model_family_rules_t *r = gpu_model_family_rules(i);
        if (n < sizeof arch_list)
            n += (size_t)snprintf(arch_list + n, sizeof arch_list - n, "%s%s", i ? ", " : "",
                                  r->arch);
        if (m < sizeof family_list)
            m += (size_t)snprintf(family_list + m, sizeof family_list - m, "%s%s", i ? ", " : "",
                                  r->name);
    }
}

const char *gpu_model_architectures(void) {
    pthread_once(&list_once, lists_fill);
    return arch_list;
}

const char *gpu_model_families(void) {
    pthread_once(&list_once, lists_fill);
    return family_list;
}

const gpu_model_family_rules_t *gpu_model_family_of(gpu_model_family_t f) {
    return gpu_model_family_rules((int)f);
}

const char *gpu_model_family_name(gpu_model_family_t f) {
    const gpu_model_family_rules_t *r = gpu_model_family_of(f);
    return r ? r->name : "?";
}

gpu_act_t gpu_model_family_head_act(gpu_model_family_t f) {
    const gpu_model_family_rules_t *r = gpu_model_family_of(f);
    return r ? r->head_act : GPU_ACT_TANH;
}

static common_status_t cfg_int(json_t *root, const char *path, const char *key, int *out,
                               common_err_t *err) {
    return gpu_model_cfg_int_min(root, path, key, 1, out, err);
}

/* Each dimension may be up to 2^30, so a config can describe a model whose weight count
 * wraps size_t, or one whose label names alone (a string per label) exhaust memory. Refused
 * before anything is allocated; counted in double, which cannot wrap. */
#define MODEL_MAX_PARAMS 8589934592.0 /* 2^33: 32 GiB of fp32 weights, 25x bert-large */

static common_status_t config_check_size(const gpu_model_config_t *c, const char *path,
                                         common_err_t *err) {
    if (c->num_labels > GPU_MODEL_MAX_LABELS) {
        return common_err_set(err, COMMON_USAGE, "%s: %d labels (at most %d)", path, c->num_labels,
                              GPU_MODEL_MAX_LABELS);
    }
    /* a gated FFN's in-projection has twice the rows (gpu_model_ff1_rows), which must fit an
     * int like every other dimension */
    if (gpu_model_glu(c) && c->intermediate > INT_MAX / 2) {
        return common_err_set(err, COMMON_USAGE,
                              "%s: intermediate_size %d (at most %d for a gated FFN)", path,
                              c->intermediate, INT_MAX / 2);
    }
    const double n = gpu_model_param_total(c); /* the family's own weights by its row */
    if (n > MODEL_MAX_PARAMS) {
        return common_err_set(err, COMMON_USAGE,
                              "%s: the geometry has %.3g parameters (at most %.3g)", path, n,
                              MODEL_MAX_PARAMS);
    }
    return COMMON_OK;
}

/* Every rule a later stage takes for granted (the backends' layout and arithmetic, the
 * position and relative-position rows, the label names, RoPE), checked once on the parsed
 * config: a config.json that breaks one is refused naming the field, never run with nonsense
 * values (tests/fuzz/fuzz_model_config.c states the same rules as its oracle). */
static common_status_t config_validate(const gpu_model_config_t *c, const char *path,
                                       common_err_t *err) {
    /* a family may say it has no position table (RoPE, relative positions) and no token
     * types */
    const gpu_model_family_rules_t *rules = gpu_model_family_of(c->family);
    const int own = rules && rules->no_tables;
    const char *bad = NULL;
    if (!rules)
        bad = "architectures";
    else if (c->vocab_size <= 0)
        bad = "vocab_size";
    else if (c->hidden <= 0 || c->heads <= 0 || c->hidden % c->heads != 0)
        bad = "hidden_size / num_attention_heads";
    else if (c->layers <= 0)
        bad = "num_hidden_layers";
    else if (c->intermediate <= 0)
        bad = "intermediate_size";
    else if (c->max_pos <= 0 || c->pos_offset < 0 ||
             (c->max_pos != c->pos_rows - c->pos_offset && !(own && c->pos_rows == 0)))
        bad = "max_position_embeddings";
    else if (c->type_vocab < (own ? 0 : 1))
        bad = "type_vocab_size";
    else if (c->emb_size <= 0 || c->emb_size > c->hidden)
        bad = "embedding_size";
    else if (!(c->ln_eps >= FLT_MIN && c->ln_eps <= FLT_MAX))
        bad = "layer_norm_eps";
    if (!bad && rules->validate) bad = rules->validate(c); /* the family's own rules */
    if (!bad && (c->num_labels <= 0 || !c->id2label)) bad = "id2label / num_labels";
    for (int i = 0; !bad && i < c->num_labels; i++)
        if (!c->id2label[i]) bad = "id2label";
    if (!bad) return COMMON_OK;
    return common_err_set(err, COMMON_USAGE,
                          "%s: '%s' describes a model the loader cannot run (out of range)", path,
                          bad);
}

/* The family named first in "architectures" that is supported, or -1 (err says why). */
static int config_family(json_t *root, const char *path, common_err_t *err) {
    json_t *arch = json_object_get(root, "architectures");
    if (json_is_array(arch)) {
        size_t i;
        json_t *a;
        json_array_foreach(arch, i, a) {
            for (int i = 0; gpu_model_family_rules(i) && json_is_string(a); i++)
                if (strcmp(json_string_value(a), gpu_model_family_rules(i)->arch) == 0) return i;
        }
    }
    const char *first = json_is_array(arch) && json_is_string(json_array_get(arch, 0))
                            ? json_string_value(json_array_get(arch, 0))
                            : "(none)";
    common_err_set(err, COMMON_USAGE, "%s: unsupported architecture '%s'", path, first);
    common_err_detail(err, "supported: %s", gpu_model_architectures()); /* longer than a line */
    return -1;
}

/* The dimensions of one family under its own key names: its row's. */
static common_status_t config_dims(json_t *root, const char *path, gpu_model_config_t *c,
                                   common_err_t *err) {
    return gpu_model_family_of(c->family)->config(root, path, c, err);
}

/* id2label (or num_labels) -> c->num_labels, c->id2label. On failure c->id2label may hold
 * some labels (c->num_labels slots), which the caller frees. */
static common_status_t config_labels(json_t *root, const char *path, gpu_model_config_t *c,
                                     common_err_t *err) {
    json_t *id2 = json_object_get(root, "id2label");
    int named = json_is_object(id2) && json_object_size(id2) > 0;
    if (named) {
        c->num_labels = (int)json_object_size(id2);
    } else if (cfg_int(root, path, "num_labels", &c->num_labels, err)) {
        return common_err_set(err, COMMON_USAGE,
                              "%s: neither 'id2label' nor 'num_labels' says the labels", path);
    }
    if (config_check_size(c, path, err)) return err->code;
    if (!named) {
        if ((c->id2label = gpu_model_labels_default(c->num_labels))) return COMMON_OK;
        return common_err_set(err, COMMON_FATAL, "%s: out of memory", path);
    }
    int n = c->num_labels;
    if (!(c->id2label = calloc((size_t)n, sizeof *c->id2label))) {
        return common_err_set(err, COMMON_FATAL, "%s: out of memory", path);
    }
    const char *k;
    json_t *v;
    json_object_foreach(id2, k, v) {
        char *end;
        long id = strtol(k, &end, 10);
        if (*k == '\0' || *end != '\0' || id < 0 || id >= n || !json_is_string(v) ||
            c->id2label[id]) {
            return common_err_set(err, COMMON_USAGE,
                                  "%s: id2label key '%s' is not one of 0..%d with a string label",
                                  path, k, n - 1);
        }
        if (!(c->id2label[id] = strdup(json_string_value(v)))) {
            return common_err_set(err, COMMON_FATAL, "%s: out of memory", path);
        }
    }
    return COMMON_OK;
}

static common_status_t config_from_json(json_t *root, const char *path, gpu_model_config_t *c,
                                        common_err_t *err) {
    int f = config_family(root, path, err);
    if (f < 0) return err->code;
    c->family = (gpu_model_family_t)f;
    c->head_act = gpu_model_family_head_act(c->family);
    if (config_dims(root, path, c, err)) return err->code;
    if (c->hidden % c->heads != 0) {
        return common_err_set(err, COMMON_USAGE,
                              "%s: hidden_size %d is not a multiple of num_attention_heads %d",
                              path, c->hidden, c->heads);
    }
    if (c->pos_rows == 0 && c->max_pos > 0) {
        /* no position table (RoPE, relative positions): max_pos is the config's own */
    } else if (c->pos_rows <= c->pos_offset) {
        return common_err_set(err, COMMON_USAGE,
                              "%s: max_position_embeddings %d leaves no position after offset %d",
                              path, c->pos_rows, c->pos_offset);
    } else {
        c->max_pos = c->pos_rows - c->pos_offset;
    }
    if (config_labels(root, path, c, err)) return err->code;
    return config_validate(c, path, err);
}

static void config_free_labels(gpu_model_config_t *c) {
    if (!c->id2label) return;
    for (int i = 0; i < c->num_labels; i++)
        free(c->id2label[i]);
    free(c->id2label);
    c->id2label = NULL;
}

common_status_t gpu_model_parse_config(const char *json, size_t len, const char *name,
                                       gpu_model_config_t *cfg, common_err_t *err) {
    memset(cfg, 0, sizeof *cfg);
    json_error_t jerr;
    json_t *root = json_loadb(json, len, 0, &jerr);
    if (!root) {
        return common_err_set(err, COMMON_USAGE, "%s: invalid JSON (%s, line %d)", name, jerr.text,
                              jerr.line);
    }
    common_status_t rc = config_from_json(root, name, cfg, err);
    json_decref(root);
    if (rc != 0) config_free_labels(cfg);
    return rc;
}

common_status_t gpu_model_read_config(const char *path, gpu_model_config_t *cfg,
                                      common_err_t *err) {
    memset(cfg, 0, sizeof *cfg);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) {
        if (access(path, F_OK) != 0)
            return common_err_set(err, COMMON_USAGE,
                                  "%s: missing (not a Hugging Face checkpoint directory?)", path);
        return common_err_set(err, COMMON_USAGE, "%s: invalid JSON (%s, line %d)", path, jerr.text,
                              jerr.line);
    }
    common_status_t rc = config_from_json(root, path, cfg, err);
    json_decref(root);
    if (rc != 0) config_free_labels(cfg);
    return rc;
}
