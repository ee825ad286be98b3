/* config.json's values as the loader reads them (every family file uses these): integers in
 * range, booleans, LayerNorm epsilons, activation names, default label names. */
#include <float.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/model/model_int.h"

static const struct {
    const char *name;
    gpu_act_t act;
} acts[] = {
    {"gelu", GPU_ACT_GELU},
    {"gelu_new", GPU_ACT_GELU_TANH},
    {"gelu_pytorch_tanh", GPU_ACT_GELU_TANH},
    {"relu", GPU_ACT_RELU},
};

const char *gpu_model_act_name(gpu_act_t a) {
    switch (a) {
    case GPU_ACT_GELU:
        return "gelu";
    case GPU_ACT_GELU_TANH:
        return "gelu_new";
    case GPU_ACT_RELU:
        return "relu";
    case GPU_ACT_TANH:
        return "tanh";
    }
    return "?";
}

char **gpu_model_labels_default(int n) {
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

common_status_t gpu_model_cfg_int_min(json_t *root, const char *path, const char *key, int lo,
                                      int *out, common_err_t *err) {
    json_t *v = json_object_get(root, key);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > 1 << 30) {
        return common_err_set(err, COMMON_USAGE, "%s: '%s' is %s (need %s integer)", path, key,
                              v ? "out of range" : "missing",
                              lo > 0 ? "a positive" : "a non-negative");
    }
    *out = (int)json_integer_value(v);
    return COMMON_OK;
}

common_status_t gpu_model_cfg_bool(json_t *root, const char *path, const char *key, int dflt,
                                   int *out, common_err_t *err) {
    json_t *v = json_object_get(root, key);
    if (!v) {
        *out = dflt;
        return COMMON_OK;
    }
    if (!json_is_boolean(v)) {
        return common_err_set(err, COMMON_USAGE, "%s: '%s' is not true or false", path, key);
    }
    *out = json_is_true(v);
    return COMMON_OK;
}

common_status_t gpu_model_cfg_eps(json_t *root, const char *path, const char *key, double dflt,
                                  float *out, common_err_t *err) {
    json_t *eps = json_object_get(root, key);
    /* The backends add it in fp32: a value that rounds to 0 (or overflows) there would divide
     * by zero on a constant row, so it must be a normal float. */
    double e = eps ? json_number_value(eps) : dflt;
    if ((eps && !json_is_number(eps)) || !(e >= FLT_MIN && e <= FLT_MAX)) {
        return common_err_set(err, COMMON_USAGE,
                              "%s: '%s' is %s (need a positive number in fp32 range)", path, key,
                              eps || dflt > 0 ? "out of range" : "missing");
    }
    *out = (float)e;
    return COMMON_OK;
}

common_status_t gpu_model_cfg_act(json_t *root, const char *path, const char *key, const char *dflt,
                                  gpu_act_t *out, common_err_t *err) {
    json_t *act = json_object_get(root, key), *dj = NULL;
    if (!act && dflt) act = dj = json_string(dflt);
    for (size_t i = 0; json_is_string(act) && i < sizeof acts / sizeof acts[0]; i++)
        if (strcmp(json_string_value(act), acts[i].name) == 0) {
            *out = acts[i].act;
            json_decref(dj);
            return COMMON_OK;
        }
    common_err_set(
        err, COMMON_USAGE,
        "%s: unsupported %s '%s' (gelu (erf), gelu_new / gelu_pytorch_tanh (tanh), relu)", path,
        key, json_is_string(act) ? json_string_value(act) : "(missing)");
    json_decref(dj);
    return COMMON_USAGE;
}
