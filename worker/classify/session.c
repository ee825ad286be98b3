#include "worker/classify/session.h"

#include <string.h>

#include "common/err.h"

common_status_t cls_session_load_tokenizer(cls_session_t *s, common_err_t *err) {
    if (s->tok) return COMMON_OK;
    if (!s->model->dir)
        return common_err_set(err, COMMON_USAGE,
                              "texts need a --model DIR with a tokenizer; a --geometry model has "
                              "none (give token ids instead)");
    return worker_tok_load_dir(s->model->dir, s->model->cfg.vocab_size, &s->tok, err);
}

static common_status_t session_open(cls_session_t *s, int tokenizer, common_err_t *err) {
    cls_settings_t *set = &s->set;
    const gpu_backend_ops_t *ops = gpu_backend_find(set->backend, err);
    if (!ops) return err->code;
    common_status_t st = set->model_dir ? gpu_model_load(set->model_dir, &s->model, err)
                                        : gpu_model_init_random(set->geometry, set->labels,
                                                                set->seed, &s->model, err);
    if (st) return st;
    if (tokenizer && (st = cls_session_load_tokenizer(s, err))) return st;
    if ((st = cls_settings_resolve(set, ops, &s->model->cfg, err))) return st;
    gpu_backend_opts_t bo = cls_settings_backend_opts(set);
    if ((st = cls_engine_open(&s->eng, s->model, ops->name, &bo, err))) return st;
    s->props = s->eng.props;
    s->acc = (worker_accum_cfg_t){.token_budget = s->props.token_budget,
                                  .padded = s->props.padded,
                                  .max_wait_ms = set->max_wait_ms,
                                  .max_pending_items = set->max_pending,
                                  .max_pending_tokens = set->max_pending_tokens,
                                  .max_len = s->props.max_len};
    return COMMON_OK;
}

common_status_t cls_session_open(cls_session_t *s, const cls_settings_t *set, int tokenizer,
                                 common_err_t *err) {
    memset(s, 0, sizeof(*s));
    s->set = *set;
    common_status_t st = session_open(s, tokenizer, err);
    if (st) cls_session_close(s);
    return st;
}

common_status_t cls_session_engine_open(const cls_session_t *s, int device, cls_engine_t *eng,
                                        common_err_t *err) {
    memset(eng, 0, sizeof(*eng));
    gpu_backend_opts_t bo = cls_settings_backend_opts(&s->set);
    bo.device = device;
    common_status_t st = cls_engine_open(eng, s->model, s->eng.ops->name, &bo, err);
    if (st) return st;
    const gpu_backend_props_t *a = &eng->props, *b = &s->props;
    if (a->token_budget != b->token_budget || a->max_seqs != b->max_seqs ||
        a->max_len != b->max_len || strcmp(a->precision, b->precision)) {
        common_err_set(err, COMMON_FATAL,
                       "device %d settled %d tokens, %d sequences, length %d, %s; device %d "
                       "%d, %d, %d, %s",
                       device, a->token_budget, a->max_seqs, a->max_len, a->precision,
                       s->set.device, b->token_budget, b->max_seqs, b->max_len, b->precision);
        common_err_hint(err, "give --token-budget, --max-len and --precision explicitly, or "
                             "name devices of one kind in --devices");
        cls_engine_close(eng);
        return COMMON_FATAL;
    }
    return COMMON_OK;
}

void cls_session_close(cls_session_t *s) {
    cls_engine_close(&s->eng);
    worker_tok_free(s->tok);
    gpu_model_free(s->model);
    memset(s, 0, sizeof(*s));
}

const char *cls_session_kernels(const cls_session_t *s, char *buf, size_t n) {
    if (n) buf[0] = '\0';
    if (s->eng.ops && s->eng.ops->kernels) s->eng.ops->kernels(s->props.precision, buf, n);
    return buf;
}
