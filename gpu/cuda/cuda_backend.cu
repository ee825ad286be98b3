// The CUDA backend (gpu/backend.h table "cuda"): every family and precision runs through the
// encoder graph (gpu/graph.h) on the executor of cuda_graph_*.cu; this file is the table's
// glue: init (device, stream, the graph's one allocation, the warm-up sweep), the two-slot
// submit / collect pipeline, memory statistics and the instance's properties.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/backend.h"
#include "gpu/cuda/cuda_backend.h"
#include "gpu/cuda/cuda_backend_int.cuh"
#include "gpu/cuda/cuda_common.cuh"
#include "gpu/cuda/layout.h"

extern "C" const gpu_backend_ops_t gpu_cuda_backend_ops; // the table, at the end of this file

static void cuda_be_free(gpu_backend_t *be) {
    if (!be) return;
    if (be->win) {
        double s;
        int mhz;
        cuda_be_energy_stop(be, &s, &mhz); // its sampler thread reads nv
    }
    gpu_nvml_free(be->nv);
    if (be->device >= 0) cudaSetDevice(be->device);
    if (be->stream) cudaStreamSynchronize(be->stream); // a batch may still be in flight
    cuda_be_profile_free(be);
    cuda_be_graph_free(be);
    if (be->dev) cudaFree(be->dev);
    for (int i = 0; i < 2; i++) {
        if (be->h_inputs[i]) cudaFreeHost(be->h_inputs[i]);
        if (be->h_logits[i]) cudaFreeHost(be->h_logits[i]);
        if (be->t_first[i]) cudaEventDestroy(be->t_first[i]);
        if (be->t_last[i]) cudaEventDestroy(be->t_last[i]);
    }
    if (be->stream) cudaStreamDestroy(be->stream);
    free(be);
}

#define BE_CUDA(call, what)                                                                        \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            common_err_set(err, COMMON_FATAL, "CUDA %s failed: %s", what, cudaGetErrorString(e_)); \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

static common_status_t cuda_be_forward(gpu_backend_t *be, const gpu_batch_t *batch, float *logits,
                                       common_err_t *err);

// given: a graph to run instead of the family's (init_given), owned from the call on.
static common_status_t cuda_be_init_path(const gpu_model_t *model, const gpu_backend_opts_t *opts,
                                         gpu_graph_t *given, gpu_backend_t **out,
                                         common_err_t *err) {
    *out = NULL;
    const gpu_model_config_t *c = &model->cfg;
    const char *prec = gpu_backend_precision(&gpu_cuda_backend_ops, opts->precision);
    if (!prec) {
        common_err_set(err, COMMON_USAGE,
                       "precision '%s' is not supported by the cuda backend: use fp16, "
                       "bf16 or fp8",
                       opts->precision);
        gpu_graph_free(given);
        return COMMON_USAGE;
    }
    struct gpu_backend *be = (struct gpu_backend *)calloc(1, sizeof(*be));
    if (!be) {
        common_err_set(err, COMMON_FATAL, "out of host memory");
        gpu_graph_free(given);
        return COMMON_FATAL;
    }
    be->gg = given; // freed with the instance
    be->device = -1;
    be->model = model;
    be->opts = *opts;
    snprintf(be->prec, sizeof(be->prec), "%s", prec);
    be->opts.precision = be->prec;
    be->bf16 = strcmp(prec, "bf16") == 0;
    if (gpu_backend_settle(c, opts, &be->token_budget, &be->max_len, &be->max_seqs, err) != 0)
        goto fail_quiet;
    be->opts.token_budget = be->token_budget;
    be->opts.max_len = be->max_len;
    be->opts.max_seqs = be->max_seqs;
    if (gpu_cuda_device_count() <= opts->device) {
        common_err_set(err, COMMON_FATAL, "no CUDA device %d (found %d)", opts->device,
                       gpu_cuda_device_count());
        goto fail_quiet;
    }
    be->device = opts->device;
    BE_CUDA(cudaSetDevice(be->device), "set device");
    BE_CUDA(cudaStreamCreateWithFlags(&be->stream, cudaStreamNonBlocking), "stream create");
    for (int i = 0; i < 2; i++) {
        BE_CUDA(cudaEventCreate(&be->t_first[i]), "event create");
        BE_CUDA(cudaEventCreate(&be->t_last[i]), "event create");
    }
    be->att_wgmma = cuda_attention_has_wgmma(be->device);
    BE_CUDA(cudaDeviceGetAttribute(&be->sms, cudaDevAttrMultiProcessorCount, be->device),
            "device attribute");
    // The op list: its layout, one allocation, its prelude, then the warm-up sweep (which
    // also chooses every GEMM algorithm, timed among the top candidates).
    if (cuda_be_graph_init(be, err) != 0) goto fail_quiet;
    cuda_be_graph_tune(be, BE_TUNE_CANDIDATES);
    if (cuda_be_warmup(be, err) != 0) goto fail_quiet;
    cuda_be_graph_tune(be, 0);
    *out = be;
    return COMMON_OK;
fail:
fail_quiet:
    cuda_be_free(be);
    return err->code;
}

// Queues a batch in the next free slot; the device works on it while the host goes on.
static common_status_t cuda_be_submit(gpu_backend_t *be, const gpu_batch_t *batch,
                                      common_err_t *err) {
    const int slot = gpu_flight_slot(&be->flight, err);
    if (slot < 0) return err->code;
    if (gpu_batch_check(batch, &be->model->cfg, &be->opts, err) != 0) return err->code;
    if (cudaSetDevice(be->device) != cudaSuccess) {
        return common_err_set(err, COMMON_FATAL, "CUDA device %d is gone", be->device);
    }
    if (cuda_be_graph_submit(be, batch, slot, err) != 0) return err->code;
    gpu_flight_push(&be->flight, slot, batch->n_seqs);
    return COMMON_OK;
}

// Waits for the oldest batch in flight and copies its logits (n_seqs, L) out.
static common_status_t cuda_be_collect(gpu_backend_t *be, float *logits, common_err_t *err) {
    int n_seqs;
    const int slot = gpu_flight_pop(&be->flight, &n_seqs, err);
    if (slot < 0) return err->code;
    cudaSetDevice(be->device);
    cudaError_t e = cudaEventSynchronize(be->t_last[slot]);
    if (e != cudaSuccess) {
        return common_err_set(err, COMMON_FATAL, "CUDA error in the batch's work: %s",
                              cudaGetErrorString(e));
    }
    memcpy(logits, be->h_logits[slot], (size_t)n_seqs * be->model->cfg.num_labels * sizeof(float));
    float fw_ms = 0;
    if (cudaEventElapsedTime(&fw_ms, be->t_first[slot], be->t_last[slot]) == cudaSuccess)
        be->device_s += fw_ms * 1e-3;
    if (be->prof) cuda_be_profile_collect(be, slot);
    return COMMON_OK;
}

static common_status_t cuda_be_forward(gpu_backend_t *be, const gpu_batch_t *batch, float *logits,
                                       common_err_t *err) {
    if (gpu_flight_idle(&be->flight, err) != 0) return err->code;
    common_status_t rc = cuda_be_submit(be, batch, err);
    return rc ? rc : cuda_be_collect(be, logits, err);
}

static int cuda_be_mem_stats(gpu_backend_t *be, gpu_mem_stats_t *st) {
    memset(st, 0, sizeof(*st));
    st->weights_bytes = cuda_be_graph_weights_bytes(be);
    st->arena_bytes = cuda_be_graph_arena_bytes(be);
    st->allocations_after_init = be->allocs_after_init;
    size_t fr = 0, tot = 0;
    cudaSetDevice(be->device);
    if (cudaMemGetInfo(&fr, &tot) == cudaSuccess) {
        st->device_used = tot - fr;
        st->device_total = tot;
    }
    return 0;
}

static double cuda_be_device_seconds(gpu_backend_t *be) {
    return be->device_s;
}

static void cuda_be_get_props(const gpu_backend_t *be, gpu_backend_props_t *p) {
    p->precision = be->prec;
    p->token_budget = be->token_budget;
    p->max_seqs = be->max_seqs;
    p->max_len = be->max_len;
    p->padded = 0;      // packed tokens (cu_seqlens)
    p->synchronous = 0; // submit queues the batch on the stream
}

static common_status_t cuda_be_init(const gpu_model_t *model, const gpu_backend_opts_t *opts,
                                    gpu_backend_t **out, common_err_t *err) {
    return cuda_be_init_path(model, opts, NULL, out, err);
}
static common_status_t cuda_be_init_given(const gpu_model_t *model, gpu_graph_t *g,
                                          const gpu_backend_opts_t *opts, gpu_backend_t **out,
                                          common_err_t *err) {
    return cuda_be_init_path(model, opts, g, out, err);
}

static const char *const cuda_precisions[] = {"fp16", "bf16", "fp8", NULL};

extern "C" const gpu_backend_ops_t gpu_cuda_backend_ops = {
    "cuda",
    cuda_be_init,
    cuda_be_forward,
    cuda_be_mem_stats,
    cuda_be_free,
    cuda_be_device_seconds,
    cuda_be_submit,
    cuda_be_collect,
    cuda_be_get_props,
    cuda_precisions,
    cuda_be_energy_start,
    cuda_be_energy_stop,
    cuda_be_gemm_ceiling,
    NULL, // kernels: cuBLASLt's choice, nothing to add at start-up
    cuda_graph_supports_op,
    cuda_be_init_given,
    cuda_be_read_tensor,
    cuda_be_profile_ops,
    gpu_cuda_device_count,
};
