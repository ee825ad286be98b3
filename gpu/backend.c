#include "gpu/backend.h"

#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "gpu/cuda/plan.h" /* plain C: the plan exists in every build */

extern const gpu_backend_ops_t gpu_cpu_backend_ops;
#ifdef RECLASS_HAVE_CUDA
extern const gpu_backend_ops_t gpu_cuda_backend_ops;
#endif

const gpu_backend_ops_t *gpu_backend_find(const char *name, char *err, size_t errlen) {
    if (!name || strcmp(name, "cpu") == 0) return &gpu_cpu_backend_ops;
    if (strcmp(name, "cuda") == 0) {
#ifdef RECLASS_HAVE_CUDA
        return &gpu_cuda_backend_ops;
#else
        snprintf(err, errlen,
                 "backend 'cuda' is not built into this binary (nvcc was not found "
                 "at build time): use --backend cpu");
        return NULL;
#endif
    }
    snprintf(err, errlen, "unknown backend '%s': use cpu or cuda", name);
    return NULL;
}

int gpu_backend_max_seqs(int token_budget, int max_seqs) {
    if (max_seqs > 0) return max_seqs;
    return token_budget / 2 > 0 ? token_budget / 2 : 1;
}

const char *gpu_backend_precision(const gpu_backend_ops_t *ops, const char *precision) {
    if (!precision) return ops->precisions[0];
    for (const char *const *p = ops->precisions; *p; p++)
        if (strcmp(*p, precision) == 0) return *p;
    return NULL;
}

int gpu_backend_plan_memory(const char *name, const gpu_model_config_t *cfg,
                            const gpu_backend_opts_t *opts, gpu_mem_plan_t *plan, char *err,
                            size_t errlen) {
    memset(plan, 0, sizeof(*plan));
    if (!name || strcmp(name, "cuda") != 0)
        return common_errf(-1, err, errlen,
                           "backend '%s' plans no device memory: plan-memory is for cuda",
                           name ? name : "cpu");
    gpu_plan_t p; /* plan.c checks the precision (NULL: the cuda backend's default) */
    if (gpu_plan_compute(cfg, opts->token_budget, opts->max_len, opts->max_seqs, opts->precision,
                         &p, err, errlen) != 0)
        return -1;
    _Static_assert(GPU_PLAN_N <= GPU_MEM_PLAN_SLICES, "GPU_MEM_PLAN_SLICES");
    plan->precision = p.fp8 ? "fp8" : p.bf16 ? "bf16" : "fp16";
    plan->token_budget = p.token_budget, plan->max_len = p.max_len, plan->max_seqs = p.max_seqs;
    plan->n = GPU_PLAN_N;
    for (int i = 0; i < GPU_PLAN_N; i++)
        plan->slice[i] = (gpu_mem_slice_t){.name = p.slice[i].name,
                                           .shape = p.slice[i].shape,
                                           .bytes = p.slice[i].bytes,
                                           .weights = i < GPU_PLAN_X};
    plan->weights_bytes = p.weights_bytes;
    plan->arena_bytes = p.arena_bytes;
    plan->total_bytes = p.total_bytes;
    return 0;
}

#ifndef RECLASS_HAVE_CUDA
const char *gpu_backend_cuda_versions(void) {
    return "none"; /* the CUDA build defines it in cuda_backend.cu */
}
#endif

int gpu_batch_check(const gpu_batch_t *batch, const gpu_model_config_t *cfg,
                    const gpu_backend_opts_t *opts, char *err, size_t errlen) {
    int max_len = opts->max_len > 0 ? opts->max_len : cfg->max_pos;
    if (batch->n_seqs <= 0 || batch->n_tokens <= 0) {
        return common_errf(-1, err, errlen, "empty batch");
    }
    if (batch->n_tokens > opts->token_budget) {
        return common_errf(-1, err, errlen, "batch of %d tokens exceeds the token budget %d",
                           batch->n_tokens, opts->token_budget);
    }
    int max_seqs = gpu_backend_max_seqs(opts->token_budget, opts->max_seqs);
    if (batch->n_seqs > max_seqs) {
        return common_errf(-1, err, errlen, "batch of %d sequences exceeds capacity %d",
                           batch->n_seqs, max_seqs);
    }
    if (batch->cu_seqlens[0] != 0 || batch->cu_seqlens[batch->n_seqs] != batch->n_tokens) {
        return common_errf(-1, err, errlen, "cu_seqlens do not span the batch's %d tokens",
                           batch->n_tokens);
    }
    int longest = 0;
    for (int s = 0; s < batch->n_seqs; s++) {
        int len = batch->cu_seqlens[s + 1] - batch->cu_seqlens[s];
        if (len <= 0 || len > max_len) {
            return common_errf(-1, err, errlen, "sequence %d has length %d (allowed 1..%d)", s, len,
                               max_len);
        }
        if (len > longest) longest = len;
    }
    if (longest != batch->max_len) {
        return common_errf(-1, err, errlen, "batch max_len %d but longest sequence is %d",
                           batch->max_len, longest);
    }
    for (int t = 0; t < batch->n_tokens; t++) {
        if (batch->ids[t] < 0 || batch->ids[t] >= cfg->vocab_size) {
            return common_errf(-1, err, errlen, "token %d has id %d outside the vocabulary (0..%d)",
                               t, batch->ids[t], cfg->vocab_size - 1);
        }
    }
    return 0;
}

int gpu_flight_slot(const gpu_flight_t *f, char *err, size_t errlen) {
    if (f->n == 2) {
        return common_errf(-1, err, errlen, "a second batch is in flight: collect it first");
    }
    return (f->head + f->n) % 2;
}

void gpu_flight_push(gpu_flight_t *f, int slot, int n_seqs) {
    f->seqs[slot] = n_seqs;
    f->n++;
}

int gpu_flight_pop(gpu_flight_t *f, int *n_seqs, char *err, size_t errlen) {
    if (f->n == 0) {
        return common_errf(-1, err, errlen, "no batch in flight to collect");
    }
    int slot = f->head;
    f->head = (slot + 1) % 2;
    f->n--;
    *n_seqs = f->seqs[slot];
    return slot;
}

int gpu_flight_idle(const gpu_flight_t *f, char *err, size_t errlen) {
    if (f->n == 0) return 0;
    return common_errf(-1, err, errlen, "forward with a batch in flight: collect it first");
}
