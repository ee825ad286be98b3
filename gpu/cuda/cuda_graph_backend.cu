// The CUDA backend on the encoder graph: init builds the model's graph (gpu/graph.h, by its
// family's builder), refuses it when an op has no launcher here (naming the op), lays it out
// (one allocation: weights, consts, activations, scratch) and runs its prelude; a batch
// packs its inputs (ids, positions, cu_seqlens) for one copy and runs the op list. Every
// family and precision runs here.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cuda/cuda_backend_int.cuh"
#include "gpu/cuda/cuda_graph.cuh"

// The graph, its layout and the one allocation; the handles on its workspace; the prelude.
common_status_t cuda_be_graph_init(struct gpu_backend *be, common_err_t *err) {
    const gpu_model_t *m = be->model;
    const int fp8 = strcmp(be->prec, "fp8") == 0;
    gpu_precision_t prec = fp8 ? GPU_PREC_FP8 : be->bf16 ? GPU_PREC_BF16 : GPU_PREC_FP16;
    if (!be->gg && gpu_graph_build(&m->cfg, &m->w, prec, GPU_PREC_FP16, &be->gg, err) != 0)
        return err->code; // (a graph given to init_graph is run as it is)
    if (gpu_graph_check(be->gg, "cuda", cuda_graph_supports_op, err) != 0) return err->code;
    be->graph = (cuda_graph_t *)calloc(1, sizeof(cuda_graph_t));
    if (!be->graph) {
        return common_err_set(err, COMMON_FATAL, "out of host memory");
    }
    cuda_graph_t *cg = be->graph;
    if (cuda_graph_layout(cg, be->gg, be->bf16 ? CG_BF16 : CG_F16, be->token_budget, be->max_seqs,
                          be->max_len, err) != 0)
        return err->code;
    cudaError_t e = be_device_alloc(be, (void **)&be->dev, cg->total_bytes);
    if (e != cudaSuccess) {
        common_err_set(err, COMMON_FATAL, "CUDA arena allocation of %zu bytes failed: %s",
                       cg->total_bytes, cudaGetErrorString(e));
        common_err_hint(err, "lower --token-budget or --max-len (reclass plan-memory shows what "
                             "each needs)");
        return COMMON_FATAL;
    }
    be->init_done = 1;
    for (int i = 0; i < 2; i++)
        if (cudaMallocHost((void **)&be->h_inputs[i], cg->in_bytes) != cudaSuccess ||
            cudaMallocHost((void **)&be->h_logits[i], (size_t)cg->max_seqs * m->cfg.num_labels *
                                                          sizeof(float)) != cudaSuccess) {
            return common_err_set(err, COMMON_FATAL, "CUDA pinned staging allocation failed");
        }
    cg->att_wgmma = be->att_wgmma;
    return cuda_graph_setup(cg, be->dev, be->stream, be->sms, err);
}

// One batch through the op list: inputs packed for one copy (ids, positions, cu_seqlens), the
// ops, the logits copied to the slot's staging.
common_status_t cuda_be_graph_submit(struct gpu_backend *be, const gpu_batch_t *b, int slot,
                                     common_err_t *err) {
    cuda_graph_t *cg = be->graph;
    const int Tn = b->n_tokens, S = b->n_seqs, ta = (cg->token_budget + 3) & ~3;
    const int L = be->model->cfg.num_labels;
    int32_t *hi = be->h_inputs[slot];
    memcpy(hi, b->ids, (size_t)Tn * 4);
    for (int q = 0; q < S; q++)
        for (int t = b->cu_seqlens[q]; t < b->cu_seqlens[q + 1]; t++)
            hi[ta + t] = t - b->cu_seqlens[q];
    memcpy(hi + 2 * ta, b->cu_seqlens, (size_t)(S + 1) * 4);
    cudaStream_t s = be->stream;
    cudaError_t e = cudaEventRecord(be->t_first[slot], s);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(be->dev + cg->o_in, hi, cg->in_bytes, cudaMemcpyHostToDevice, s);
    if (e != cudaSuccess) {
        return common_err_set(err, COMMON_FATAL, "CUDA input copy failed: %s",
                              cudaGetErrorString(e));
    }
    // The ops, an event after each step where profiling (profile_ops).
    const int n_ops = cg->g->n_ops;
    cudaEvent_t *ev = be->prof ? be->ev + (size_t)slot * (n_ops + 1) : NULL;
    int *ev_op = be->prof ? be->ev_op + (size_t)slot * (n_ops + 1) : NULL;
    be->n_ev[slot] = 0;
    if (ev) cudaEventRecord(ev[be->n_ev[slot]++], s);
    cg->x16_of = -1; // the 16-bit copy of the last batch's rows is stale
    for (int i = 0; i < n_ops;) {
        const int first = i;
        if ((i = cuda_graph_step(cg, i, Tn, S, b->max_len, err)) < 0) return err->code;
        if (ev) {
            ev_op[be->n_ev[slot]] = first;
            cudaEventRecord(ev[be->n_ev[slot]++], s);
            for (int j = first + 1; j < i; j++) // fused into the step's first op: no time
                be->op_runs[j]++;
        }
    }
    if (cg->g->logits >= 0) // (a one-op graph of the parity test has none)
        e = cudaMemcpyAsync(be->h_logits[slot], cg_ptr(cg, cg->g->logits), (size_t)S * L * 4,
                            cudaMemcpyDeviceToHost, s);
    if (e == cudaSuccess) e = cudaEventRecord(be->t_last[slot], s);
    if (e != cudaSuccess) {
        return common_err_set(err, COMMON_FATAL, "CUDA error after the graph: %s",
                              cudaGetErrorString(e));
    }
    return COMMON_OK;
}

extern "C" common_status_t cuda_be_read_tensor(gpu_backend_t *be, int t, size_t rows, float *out,
                                               common_err_t *err) {
    const cuda_graph_t *cg = be->graph;
    if (!cg || t < 0 || t >= cg->g->n_tensors || cg->t[t].dt == CG_E4M3) {
        return common_err_set(err, COMMON_BUG, "no tensor %d to read on this instance", t);
    }
    const int dt = cg->t[t].dt;
    const size_t n = rows * (size_t)cg->g->tensor[t].cols, bytes = n * cg_dt_bytes(dt);
    if (bytes > cg->t[t].bytes) {
        return common_err_set(err, COMMON_BUG, "tensor %s has fewer than %zu rows",
                              cg->g->tensor[t].name, rows);
    }
    void *h = dt == CG_F32 ? (void *)out : malloc(bytes); // host memory: tests only
    cudaError_t e = h ? cudaStreamSynchronize(be->stream) : cudaErrorMemoryAllocation;
    if (e == cudaSuccess) e = cudaMemcpy(h, cg_ptr(cg, t), bytes, cudaMemcpyDeviceToHost);
    for (size_t i = 0; e == cudaSuccess && dt != CG_F32 && i < n; i++)
        out[i] = dt == CG_F16 ? __half2float(((const __half *)h)[i])
                              : __bfloat162float(((const __nv_bfloat16 *)h)[i]);
    if (h != (void *)out) free(h);
    if (e != cudaSuccess) {
        return common_err_set(err, COMMON_FATAL, "CUDA read of tensor %d failed: %s", t,
                              cudaGetErrorString(e));
    }
    return COMMON_OK;
}

void cuda_be_profile_collect(struct gpu_backend *be, int slot) {
    const int n_ops = be->graph->g->n_ops;
    const cudaEvent_t *ev = be->ev + (size_t)slot * (n_ops + 1);
    const int *ev_op = be->ev_op + (size_t)slot * (n_ops + 1);
    for (int i = 1; i < be->n_ev[slot]; i++) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, ev[i - 1], ev[i]) == cudaSuccess)
            be->op_ms[ev_op[i]] += ms, be->op_runs[ev_op[i]]++;
    }
    be->n_ev[slot] = 0;
}

common_status_t cuda_be_profile_ops(gpu_backend_t *be, int on, gpu_op_times_t *out,
                                    common_err_t *err) {
    if (be->flight.n > 0) {
        return common_err_set(err, COMMON_BUG, "profile_ops: collect the batches in flight first");
    }
    const int n_ops = be->graph->g->n_ops;
    if (on && !be->ev) { // the events and totals, once
        const size_t n_ev = 2 * (size_t)(n_ops + 1);
        be->ev = (cudaEvent_t *)calloc(n_ev, sizeof(cudaEvent_t));
        be->ev_op = (int *)calloc(n_ev, sizeof(int));
        be->op_ms = (double *)calloc((size_t)n_ops, sizeof(double));
        be->op_runs = (long *)calloc((size_t)n_ops, sizeof(long));
        for (size_t i = 0; be->ev && i < n_ev; i++)
            if (cudaEventCreate(&be->ev[i]) != cudaSuccess) {
                cuda_be_profile_free(be);
                break;
            }
        if (!be->ev || !be->ev_op || !be->op_ms || !be->op_runs) {
            cuda_be_profile_free(be);
            return common_err_set(err, COMMON_FATAL,
                                  "profile_ops: out of host memory or CUDA events");
        }
    }
    be->prof = on && be->ev;
    if (on) {
        memset(be->op_ms, 0, sizeof(double) * (size_t)n_ops);
        memset(be->op_runs, 0, sizeof(long) * (size_t)n_ops);
    } else if (out && be->ev) {
        gpu_op_times_group(be->graph->g, be->op_ms, be->op_runs,
                           "device milliseconds (CUDA events between ops on the stream)", out);
    } else if (out) {
        memset(out, 0, sizeof *out);
    }
    return COMMON_OK;
}

void cuda_be_profile_free(struct gpu_backend *be) {
    const size_t n_ev = be->graph ? 2 * (size_t)(be->graph->g->n_ops + 1) : 0;
    for (size_t i = 0; be->ev && i < n_ev; i++)
        if (be->ev[i]) cudaEventDestroy(be->ev[i]);
    free(be->ev), free(be->ev_op), free(be->op_ms), free(be->op_runs);
    be->ev = NULL, be->ev_op = NULL, be->op_ms = NULL, be->op_runs = NULL;
    be->prof = 0;
}

void cuda_be_graph_tune(struct gpu_backend *be, int candidates) {
    be->graph->gemm.tune = candidates;
    be->graph->gemm8.tune = candidates;
}

void cuda_be_graph_free(struct gpu_backend *be) {
    cuda_graph_free(be->graph);
    be->graph = NULL;
    gpu_graph_free(be->gg);
    be->gg = NULL;
}

size_t cuda_be_graph_weights_bytes(const struct gpu_backend *be) {
    return be->graph ? be->graph->weights_bytes : 0;
}
size_t cuda_be_graph_arena_bytes(const struct gpu_backend *be) {
    return be->graph ? be->graph->total_bytes - be->graph->weights_bytes : 0;
}
