#include "gpu/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "gpu/cuda/layout.h" /* plain C: the layout exists in every build */

extern const gpu_backend_ops_t gpu_cpu_backend_ops;
#ifdef RECLASS_HAVE_CUDA
extern const gpu_backend_ops_t gpu_cuda_backend_ops;
#endif

const gpu_backend_ops_t *gpu_backend_find(const char *name, common_err_t *err) {
    if (!name || strcmp(name, "cpu") == 0) return &gpu_cpu_backend_ops;
    if (strcmp(name, "cuda") == 0) {
#ifdef RECLASS_HAVE_CUDA
        return &gpu_cuda_backend_ops;
#else
        common_err_set(err, COMMON_USAGE,
                       "backend 'cuda' is not built into this binary (nvcc was not found "
                       "at build time): use --backend cpu");
        return NULL;
#endif
    }
    common_err_set(err, COMMON_USAGE, "unknown backend '%s': use cpu or cuda", name);
    return NULL;
}

int gpu_backend_max_seqs(int token_budget, int max_seqs) {
    if (max_seqs > 0) return max_seqs;
    return token_budget / 2 > 0 ? token_budget / 2 : 1;
}

common_status_t gpu_backend_settle(const gpu_model_config_t *cfg, const gpu_backend_opts_t *opts,
                                   int *token_budget, int *max_len, int *max_seqs,
                                   common_err_t *err) {
    if (opts->token_budget <= 0)
        return common_err_set(err, COMMON_USAGE, "token budget must be positive (got %d)",
                              opts->token_budget);
    if (opts->max_len < 0 || opts->max_len > cfg->max_pos)
        return common_err_set(err, COMMON_USAGE,
                              "max length %d is outside 1..%d (the model's positions)",
                              opts->max_len, cfg->max_pos);
    if (opts->max_seqs < 0)
        return common_err_set(err, COMMON_USAGE, "max sequences must not be negative (got %d)",
                              opts->max_seqs);
    if (cfg->hidden <= 0 || cfg->heads <= 0 || cfg->hidden % cfg->heads != 0 || cfg->layers <= 0 ||
        cfg->intermediate <= 0 || cfg->num_labels <= 0 || cfg->vocab_size <= 0 ||
        cfg->emb_size <= 0 || cfg->emb_size > cfg->hidden)
        return common_err_set(err, COMMON_USAGE,
                              "model geometry is inconsistent (hidden %d, heads %d, layers %d, "
                              "embedding %d)",
                              cfg->hidden, cfg->heads, cfg->layers, cfg->emb_size);
    *token_budget = opts->token_budget;
    *max_len = opts->max_len > 0 ? opts->max_len : cfg->max_pos;
    *max_seqs = gpu_backend_max_seqs(opts->token_budget, opts->max_seqs);
    return COMMON_OK;
}

const char *gpu_backend_precision(const gpu_backend_ops_t *ops, const char *precision) {
    if (!precision) return ops->precisions[0];
    for (const char *const *p = ops->precisions; *p; p++)
        if (strcmp(*p, precision) == 0) return *p;
    return NULL;
}

/* The weight group of tensor name: the layers' ("l3.qkv.w"), the head's or the embeddings'. */
static int weight_group(const char *name) {
    if (name[0] == 'l' && name[1] >= '0' && name[1] <= '9') return 1;
    return strncmp(name, "head.", 5) == 0 ? 2 : 0;
}

common_status_t gpu_backend_plan_memory(const char *name, const gpu_model_config_t *cfg,
                                        const gpu_backend_opts_t *opts, gpu_mem_plan_t *plan,
                                        common_err_t *err) {
    memset(plan, 0, sizeof(*plan));
    if (!name || strcmp(name, "cuda") != 0)
        return common_err_set(err, COMMON_USAGE,
                              "backend '%s' plans no device memory: plan-memory is for cuda",
                              name ? name : "cpu");
    const char *precision = opts->precision ? opts->precision : "fp16"; /* cuda's default */
    gpu_precision_t prec;
    if (gpu_precision_parse(precision, &prec) != 0 || prec == GPU_PREC_FP32)
        return common_err_set(err, COMMON_USAGE,
                              "precision '%s' is not supported by the cuda backend: use fp16, bf16 "
                              "or fp8",
                              precision);
    int budget, max_len, max_seqs;
    common_status_t st = gpu_backend_settle(cfg, opts, &budget, &max_len, &max_seqs, err);
    if (st != COMMON_OK) return st;
    gpu_graph_t *g;
    cg_layout_t L;
    st = cuda_graph_plan(cfg, prec, budget, max_seqs, max_len, &g, &L, err);
    if (st != COMMON_OK) return st;
    /* The one allocation as the backend lays it out (gpu/cuda/layout.h), in parts. */
    size_t wb[3] = {0}, consts = 0, logits = 0;
    for (int t = 0; t < g->n_tensors; t++) {
        const gpu_tensor_t *x = &g->tensor[t];
        const size_t b = (L.t[t].bytes + CG_ALIGN - 1) / CG_ALIGN * CG_ALIGN;
        if (x->cls == GPU_TENSOR_WEIGHT)
            wb[weight_group(x->name)] += b;
        else if (x->cls == GPU_TENSOR_CONST)
            consts += b;
        else if (x->cls == GPU_TENSOR_LOGITS)
            logits += b;
    }
    /* E4M3 weights carry their per-row scales after their codes: the weight region's rest */
    const size_t scales = L.weights_bytes - wb[0] - wb[1] - wb[2];
    const gpu_mem_slice_t parts[] = {
        {"embeddings", "token, position, type tables, norm (projection)", wb[0], 1},
        {"layers", "every layer's projections and norms", wb[1], 1},
        {"fp8 scales", "per output channel of the E4M3 weights", scales, 1},
        {"head", "dense and classifier, fp32", wb[2], 1},
        {"consts", "computed at init (relative embeddings)", consts, 0},
        {"logits", "(seqs, labels) fp32", logits, 0},
        {"activations", "the graph's tensors, reused by live range", L.o_in - L.o_act, 0},
        {"inputs", "ids, positions, cu_seqlens int32", L.o_rrow - L.o_in, 0},
        {"scratch", "conversions, relative scores, fp8 inputs", L.o_ws - L.o_rrow, 0},
        {"workspace", "cuBLASLt", L.ws_bytes, 0}};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (parts[i].bytes) plan->slice[plan->n++] = parts[i];
    plan->precision = gpu_precision_name(prec);
    plan->token_budget = budget, plan->max_len = max_len, plan->max_seqs = max_seqs;
    plan->weights_bytes = L.weights_bytes;
    plan->arena_bytes = L.total_bytes - L.weights_bytes;
    plan->total_bytes = L.total_bytes;
    cg_layout_free(&L);
    gpu_graph_free(g);
    return COMMON_OK;
}

#ifndef RECLASS_HAVE_CUDA
const char *gpu_backend_cuda_versions(void) {
    return "none"; /* the CUDA build defines it in cuda_backend.cu */
}
#endif

common_status_t gpu_batch_check(const gpu_batch_t *batch, const gpu_model_config_t *cfg,
                                const gpu_backend_opts_t *opts, common_err_t *err) {
    int max_len = opts->max_len > 0 ? opts->max_len : cfg->max_pos;
    if (batch->n_seqs <= 0 || batch->n_tokens <= 0) {
        return common_err_set(err, COMMON_USAGE, "empty batch");
    }
    if (batch->n_tokens > opts->token_budget) {
        return common_err_set(err, COMMON_USAGE, "batch of %d tokens exceeds the token budget %d",
                              batch->n_tokens, opts->token_budget);
    }
    int max_seqs = gpu_backend_max_seqs(opts->token_budget, opts->max_seqs);
    if (batch->n_seqs > max_seqs) {
        return common_err_set(err, COMMON_USAGE, "batch of %d sequences exceeds capacity %d",
                              batch->n_seqs, max_seqs);
    }
    if (batch->cu_seqlens[0] != 0 || batch->cu_seqlens[batch->n_seqs] != batch->n_tokens) {
        return common_err_set(err, COMMON_USAGE, "cu_seqlens do not span the batch's %d tokens",
                              batch->n_tokens);
    }
    int longest = 0;
    for (int s = 0; s < batch->n_seqs; s++) {
        int len = batch->cu_seqlens[s + 1] - batch->cu_seqlens[s];
        if (len <= 0 || len > max_len) {
            return common_err_set(err, COMMON_USAGE, "sequence %d has length %d (allowed 1..%d)", s,
                                  len, max_len);
        }
        if (len > longest) longest = len;
    }
    if (longest != batch->max_len) {
        return common_err_set(err, COMMON_USAGE, "batch max_len %d but longest sequence is %d",
                              batch->max_len, longest);
    }
    for (int t = 0; t < batch->n_tokens; t++) {
        if (batch->ids[t] < 0 || batch->ids[t] >= cfg->vocab_size) {
            return common_err_set(err, COMMON_USAGE,
                                  "token %d has id %d outside the vocabulary (0..%d)", t,
                                  batch->ids[t], cfg->vocab_size - 1);
        }
    }
    return COMMON_OK;
}

int gpu_flight_slot(const gpu_flight_t *f, common_err_t *err) {
    if (f->n == 2) {
        common_err_set(err, COMMON_BUG, "a second batch is in flight: collect it first");
        return -1;
    }
    return (f->head + f->n) % 2;
}

void gpu_flight_push(gpu_flight_t *f, int slot, int n_seqs) {
    f->seqs[slot] = n_seqs;
    f->n++;
}

int gpu_flight_pop(gpu_flight_t *f, int *n_seqs, common_err_t *err) {
    if (f->n == 0) {
        common_err_set(err, COMMON_BUG, "no batch in flight to collect");
        return -1;
    }
    int slot = f->head;
    f->head = (slot + 1) % 2;
    f->n--;
    *n_seqs = f->seqs[slot];
    return slot;
}

common_status_t gpu_flight_idle(const gpu_flight_t *f, common_err_t *err) {
    if (f->n == 0) return COMMON_OK;
    return common_err_set(err, COMMON_BUG, "forward with a batch in flight: collect it first");
}

static int op_time_cmp(const void *a, const void *b) {
    const double x = ((const gpu_op_time_t *)a)->ms, y = ((const gpu_op_time_t *)b)->ms;
    return x < y ? 1 : x > y ? -1 : 0;
}

void gpu_op_times_group(const gpu_graph_t *g, const double *ms, const long *runs, const char *clock,
                        gpu_op_times_t *out) {
    memset(out, 0, sizeof *out);
    out->clock = clock;
    for (int i = 0; i < g->n_ops; i++) {
        if (runs[i] <= 0) continue;
        char d[160];
        const char *what = gpu_op_describe(&g->op[i], d, sizeof d);
        const char *dot = g->op[i].layer >= 0 ? strchr(what, '.') : NULL;
        if (dot) what = dot + 1; /* "l3.qkv: ..." -> "qkv: ..." */
        int r = 0;
        while (r < out->n && strncmp(out->row[r].what, what, sizeof out->row[r].what - 1) != 0)
            r++;
        if (r == out->n) {
            if (out->n == GPU_OP_TIMES_ROWS) /* the last row takes the rest */
                what = "(other ops)", r = out->n - 1;
            else
                out->n++;
            snprintf(out->row[r].what, sizeof out->row[0].what, "%s", what);
        }
        out->row[r].runs += runs[i];
        out->row[r].ms += ms[i];
        out->total_ms += ms[i];
    }
    qsort(out->row, (size_t)out->n, sizeof out->row[0], op_time_cmp);
}
