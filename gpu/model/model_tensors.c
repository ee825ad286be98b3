/* A checkpoint's tensors into the model's blob, checked for their shapes: what every family's
 * binding reads its weights with. */
#include <stdio.h>
#include <string.h>

#include "gpu/model/model_int.h"

/* The tensor name (or its legacy alias, for LayerNorm gamma/beta), checked for the expected
 * shape (d0) or (d0, d1), or NULL with err set. */
static const gpu_st_tensor_t *find_tensor(const gpu_st_file_t *f, const char *name,
                                          const char *alias, int64_t d0, int64_t d1,
                                          common_err_t *err) {
    const gpu_st_tensor_t *t = gpu_st_find(f, name);
    if (!t && alias) t = gpu_st_find(f, alias);
    if (!t) {
        common_err_set(err, COMMON_USAGE, "%s: missing tensor '%s'", gpu_st_path(f), name);
        return NULL;
    }
    if (!gpu_st_is_float(t)) {
        common_err_set(err, COMMON_USAGE,
                       "%s: tensor '%s' has unsupported dtype '%s' (F32, F16, BF16 only)",
                       gpu_st_path(f), t->name, t->dtype_name);
        return NULL;
    }
    int nd = d1 > 0 ? 2 : 1;
    if (t->ndim != nd || t->shape[0] != d0 || (nd == 2 && t->shape[1] != d1)) {
        char got[96] = "[", *p = got + 1;
        for (int i = 0; i < t->ndim && p < got + sizeof got - 24; i++)
            p += sprintf(p, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        strcpy(p, "]");
        if (nd == 2)
            common_err_set(err, COMMON_USAGE, "%s: tensor '%s' has shape %s, expected [%lld, %lld]",
                           gpu_st_path(f), t->name, got, (long long)d0, (long long)d1);
        else
            common_err_set(err, COMMON_USAGE, "%s: tensor '%s' has shape %s, expected [%lld]",
                           gpu_st_path(f), t->name, got, (long long)d0);
        return NULL;
    }
    return t;
}

common_status_t gpu_model_load_tensor(const gpu_st_file_t *f, const char *name, const char *alias,
                                      float *dst, int64_t d0, int64_t d1, common_err_t *err) {
    const gpu_st_tensor_t *t = find_tensor(f, name, alias, d0, d1, err);
    if (!t) return err->code;
    gpu_st_read_f32(f, t, dst);
    return COMMON_OK;
}

common_status_t gpu_model_load_optional(const gpu_st_file_t *f, const char *name, float *dst,
                                        int64_t d0, int64_t d1, float fill, common_err_t *err) {
    if (gpu_st_find(f, name)) return gpu_model_load_tensor(f, name, NULL, dst, d0, d1, err);
    for (int64_t i = 0; i < d0 * (d1 > 0 ? d1 : 1); i++)
        dst[i] = fill;
    return COMMON_OK;
}

/* LayerNorm prefix.{weight,bias}, or the TF-era prefix.{gamma,beta}. */
common_status_t gpu_model_load_ln(const gpu_st_file_t *f, const char *prefix, float *g, float *b,
                                  int n, common_err_t *err) {
    char n1[256], a1[256], n2[256], a2[256];
    snprintf(n1, sizeof n1, "%s.weight", prefix);
    snprintf(a1, sizeof a1, "%s.gamma", prefix);
    snprintf(n2, sizeof n2, "%s.bias", prefix);
    snprintf(a2, sizeof a2, "%s.beta", prefix);
    if (gpu_model_load_tensor(f, n1, a1, g, n, 0, err)) return err->code;
    return gpu_model_load_tensor(f, n2, a2, b, n, 0, err);
}

common_status_t gpu_model_load_linear(const gpu_st_file_t *f, const char *prefix, float *w,
                                      float *b, int out, int in, common_err_t *err) {
    char nw[256], nb[256];
    snprintf(nw, sizeof nw, "%s.weight", prefix);
    snprintf(nb, sizeof nb, "%s.bias", prefix);
    if (gpu_model_load_tensor(f, nw, NULL, w, out, in, err)) return err->code;
    return gpu_model_load_tensor(f, nb, NULL, b, out, 0, err);
}

/* Word, position (all pos_rows rows: the blob's table starts pos_offset rows before
 * w->pos_emb), type (or the zero row), LayerNorm and ELECTRA's projection. */
