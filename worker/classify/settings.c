#include "worker/classify/settings.h"

#include <stdio.h>
#include <string.h>

#include "common/err.h"

/* The automatic values by backend (see settings.h for why these). */
typedef struct {
    const char *backend;
    int token_budget, max_pending;
} cls_auto_t;

static const cls_auto_t cls_autos[] = {
    {"cpu", CLS_AUTO_TOKEN_BUDGET_CPU, CLS_AUTO_MAX_PENDING_CPU},
    {"cuda", CLS_AUTO_TOKEN_BUDGET_CUDA, CLS_AUTO_MAX_PENDING_CUDA},
};

static const cls_auto_t *auto_of(const char *backend) {
    for (size_t i = 0; i < sizeof(cls_autos) / sizeof(cls_autos[0]); i++)
        if (strcmp(cls_autos[i].backend, backend) == 0) return &cls_autos[i];
    return &cls_autos[0]; /* a new backend starts from the CPU's values */
}

common_status_t cls_settings_resolve(cls_settings_t *s, const gpu_backend_ops_t *ops,
                                     const gpu_model_config_t *cfg, common_err_t *err) {
    const cls_auto_t *a = auto_of(ops->name);
    s->backend = ops->name;
    const char *prec = gpu_backend_precision(ops, s->precision);
    if (!prec) {
        char list[128] = "";
        size_t at = 0;
        for (const char *const *p = ops->precisions; *p && at < sizeof(list); p++)
            at += (size_t)snprintf(list + at, sizeof(list) - at, "%s%s", at ? " or " : "", *p);
        return common_err_set(err, COMMON_USAGE,
                              "--precision %s: the %s backend runs %s; give one of them or "
                              "leave --precision out",
                              s->precision, ops->name, list);
    }
    s->precision = prec;
    if (s->max_len <= 0 || s->max_len > cfg->max_pos) s->max_len = cfg->max_pos;
    if (s->max_len < 2)
        return common_err_set(err, COMMON_USAGE,
                              "--max-len %d: must be at least 2 ([CLS] and [SEP])", s->max_len);
    /* automatic: never below the longest sequence (ModernBERT's 8,192 positions), or the
     * default would refuse the model's own inputs */
    if (s->token_budget <= 0)
        s->token_budget = a->token_budget < s->max_len ? s->max_len : a->token_budget;
    if (s->token_budget < s->max_len)
        return common_err_set(err, COMMON_USAGE,
                              "--token-budget %d is below the longest sequence (%d tokens): raise "
                              "it to at least %d or lower --max-len",
                              s->token_budget, s->max_len, s->max_len);
    if (s->max_pending <= 0) s->max_pending = a->max_pending;
    if (s->max_pending_tokens <= 0)
        s->max_pending_tokens = (long)CLS_AUTO_PENDING_BUDGETS * s->token_budget;
    return COMMON_OK;
}

gpu_backend_opts_t cls_settings_backend_opts(const cls_settings_t *s) {
    return (gpu_backend_opts_t){.token_budget = s->token_budget,
                                .max_len = s->max_len,
                                .max_seqs = 0, /* gpu_backend_max_seqs decides */
                                .threads = s->threads,
                                .precision = s->precision,
                                .device = s->device};
}
