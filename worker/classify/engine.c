#include "worker/classify/engine.h"

#include "gpu/model/fp8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"

#include "common/clock.h"

/* Buffers for what the backend holds (e->props); COMMON_OK, or COMMON_FATAL with err set. */
static common_status_t engine_alloc(cls_engine_t *e, common_err_t *err) {
    e->num_labels = e->model->cfg.num_labels;
    e->ids = malloc((size_t)e->props.token_budget * sizeof(int32_t));
    e->cu = malloc((size_t)(e->max_seqs + 1) * sizeof(int32_t));
    int ok = e->ids && e->cu;
    for (int i = 0; i < 2; i++) {
        e->slot[i].logits = malloc((size_t)e->max_seqs * (size_t)e->num_labels * sizeof(float));
        ok = ok && e->slot[i].logits;
    }
    if (!ok) {
        return common_err_set(err, COMMON_FATAL,
                              "out of memory for batch buffers (token budget %d)",
                              e->props.token_budget);
    }
    return 0;
}

static void engine_free_buffers(cls_engine_t *e) {
    free(e->ids);
    free(e->cu);
    for (int i = 0; i < 2; i++)
        free(e->slot[i].logits);
}

common_status_t cls_engine_attach(cls_engine_t *e, const gpu_model_t *model,
                                  const gpu_backend_ops_t *ops, gpu_backend_t *be,
                                  common_err_t *err) {
    memset(e, 0, sizeof(*e));
    e->model = model, e->ops = ops, e->be = be;
    if (!ops->submit || !ops->collect || !ops->get_props)
        return common_err_set(err, COMMON_BUG, "backend %s has no submit/collect/get_props",
                              ops->name);
    ops->get_props(be, &e->props);
    e->max_seqs = e->props.max_seqs;
    e->packed = -1;
    if (engine_alloc(e, err)) {
        engine_free_buffers(e);
        memset(e, 0, sizeof(*e));
        return COMMON_FATAL;
    }
    return COMMON_OK;
}

common_status_t cls_engine_open(cls_engine_t *e, const gpu_model_t *model, const char *backend,
                                const gpu_backend_opts_t *opts, common_err_t *err) {
    memset(e, 0, sizeof(*e));
    const gpu_backend_ops_t *ops = gpu_backend_find(backend, err);
    if (!ops) return COMMON_USAGE;
    if (!gpu_backend_precision(ops, opts->precision))
        return common_err_set(err, COMMON_USAGE, "the %s backend does not run %s", ops->name,
                              opts->precision);
    gpu_backend_t *be = NULL;
    common_status_t st = ops->init(model, opts, &be, err);
    if (st != COMMON_OK) return st;
    if (opts->precision && strcmp(opts->precision, "fp8") == 0) {
        char plan[1024];
        fprintf(stderr, "reclass: %s\n", gpu_fp8_plan_text(&model->cfg, plan, sizeof plan));
    }
    if ((st = cls_engine_attach(e, model, ops, be, err)) != COMMON_OK) {
        ops->free(be);
        return st;
    }
    e->own_be = 1;
    return COMMON_OK;
}

void cls_engine_drain(cls_engine_t *e) {
    common_err_t err;
    while (e->be && e->in_flight > 0) {
        const cls_batch_t *b;
        if (cls_engine_collect(e, &b, &err) != 0) break;
    }
}

void cls_engine_close(cls_engine_t *e) {
    cls_engine_drain(e); /* leave the backend idle */
    if (e->own_be && e->be) e->ops->free(e->be);
    engine_free_buffers(e);
    memset(e, 0, sizeof(*e));
}

common_status_t cls_engine_pack(cls_engine_t *e, const int32_t *const *seq, const int *lens, int n,
                                common_err_t *err) {
    e->packed = -1;
    if (n > e->max_seqs) {
        return common_err_set(err, COMMON_USAGE, "batch of %d sequences exceeds capacity %d", n,
                              e->max_seqs);
    }
    int t = 0, longest = 0;
    e->cu[0] = 0;
    for (int i = 0; i < n; i++) {
        if (t + lens[i] > e->props.token_budget) {
            return common_err_set(err, COMMON_USAGE, "batch exceeds the token budget %d",
                                  e->props.token_budget);
        }
        memcpy(e->ids + t, seq[i], (size_t)lens[i] * sizeof(int32_t));
        t += lens[i];
        e->cu[i + 1] = t;
        if (lens[i] > longest) longest = lens[i];
    }
    e->packed = n, e->packed_tokens = t, e->packed_longest = longest;
    return COMMON_OK;
}

common_status_t cls_engine_submit_packed(cls_engine_t *e, common_err_t *err) {
    if (e->in_flight >= 2) return common_err_set(err, COMMON_BUG, "two batches in flight already");
    if (e->packed < 0) return common_err_set(err, COMMON_BUG, "no batch packed");
    cls_batch_t *b = &e->slot[(e->head + e->in_flight) % 2];
    b->n = e->packed, b->n_tokens = e->packed_tokens, b->longest = e->packed_longest;
    b->t_submit = common_now_s();
    gpu_batch_t gb = {e->ids, e->cu, b->n, b->n_tokens, b->longest};
    e->packed = -1;
    common_status_t rc = e->ops->submit(e->be, &gb, err); /* copies the inputs */
    if (rc == 0) e->in_flight++;
    return rc;
}

common_status_t cls_engine_submit(cls_engine_t *e, const int32_t *const *seq, const int *lens,
                                  int n, common_err_t *err) {
    if (e->in_flight >= 2) return common_err_set(err, COMMON_BUG, "two batches in flight already");
    common_status_t rc = cls_engine_pack(e, seq, lens, n, err);
    return rc ? rc : cls_engine_submit_packed(e, err);
}

common_status_t cls_engine_collect(cls_engine_t *e, const cls_batch_t **out, common_err_t *err) {
    if (e->in_flight == 0) {
        return common_err_set(err, COMMON_BUG, "no batch in flight");
    }
    cls_batch_t *b = &e->slot[e->head];
    common_status_t rc = e->ops->collect(e->be, b->logits, err);
    e->head ^= 1;
    e->in_flight--;
    b->t_ready = common_now_s();
    double start = b->t_submit > e->last_ready ? b->t_submit : e->last_ready;
    b->compute_s = b->t_ready - start;
    e->last_ready = b->t_ready;
    *out = b;
    return rc;
}

common_status_t cls_engine_forward(cls_engine_t *e, const int32_t *const *seq, const int *lens,
                                   int n, const cls_batch_t **out, common_err_t *err) {
    if (e->in_flight) {
        return common_err_set(err, COMMON_BUG, "forward with batches in flight");
    }
    common_status_t rc = cls_engine_submit(e, seq, lens, n, err);
    return rc ? rc : cls_engine_collect(e, out, err);
}

void cls_engine_score(const cls_engine_t *e, const cls_batch_t *b, int i, int top_k,
                      cls_result_t *r) {
    cls_score(b->logits + (size_t)i * (size_t)e->num_labels, e->num_labels, top_k, r);
}

const char *const *cls_engine_labels(const cls_engine_t *e) {
    return (const char *const *)e->model->cfg.id2label;
}
