/* The CPU backend's setup from the graph: the graph of the model at the instance's precision,
 * the check that every op runs here, the arena the memory plan lays out (fp32 activations),
 * each linear op's weights as it runs them (E4M3-rounded at fp8, then packed once into
 * gpu_cpu_gemm panels, or bf16 panels at bf16; OpenBLAS reads them as they are where the CPU
 * has neither kernel), and the prelude, run once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cpu/cpu_attention.h"
#include "gpu/cpu/cpu_backend_int.h"
#include "gpu/cpu/cpu_gemm.h"
#include "gpu/cpu/cpu_gemm_bf16.h"

int gpu_cpu_supports_op(const gpu_graph_t *g, const gpu_op_t *op) {
    (void)g;
    if (op->prec == GPU_PREC_BF16) return gpu_cpu_gemm_available(); /* the packed kernels */
    if (op->prec == GPU_PREC_FP32) return 1;
    return op->prec == GPU_PREC_FP8 && op->kind == GPU_OP_LINEAR;
}

/* Where a batch op's weight goes: 2 bf16 panels, 1 fp32 panels, 0 as it is (OpenBLAS). */
static int packing(const gpu_backend_t *be, const gpu_op_t *op) {
    if (op->kind != GPU_OP_LINEAR || be->blas_only || !gpu_cpu_gemm_available()) return 0;
    /* the sizes the packed kernels were measured and tested on */
    if (be->m->cfg.hidden % GPU_CPU_GEMM_NR != 0) return 0;
    return op->prec == GPU_PREC_BF16 ? 2 : 1;
}

static int pack_weights(gpu_backend_t *be) {
    const gpu_graph_t *g = be->g;
    for (int i = 0; i < g->n_ops; i++) {
        const int how = packing(be, &g->op[i]);
        if (how == 1) be->packed_floats += gpu_cpu_gemm_packed_floats(g->op[i].n, g->op[i].k);
        if (how == 2) be->packed16_elems += gpu_cpu_bf16_packed_elems(g->op[i].n, g->op[i].k);
    }
    if (be->packed_floats &&
        !(be->packed = aligned_alloc(64, (be->packed_floats * sizeof(float) + 63) / 64 * 64)))
        return -1;
    if (be->packed16_elems &&
        !(be->packed16 = aligned_alloc(64, (be->packed16_elems * sizeof(uint16_t) + 63) / 64 * 64)))
        return -1;
    float *at = be->packed;
    uint16_t *at16 = be->packed16;
    for (int i = 0; i < g->n_ops; i++) {
        cpu_proj_t *p = &be->proj[g->n_prelude + i];
        const int how = packing(be, &g->op[i]);
        if (how == 1) {
            gpu_cpu_gemm_pack(p->w, p->N, p->K, at);
            p->packed = at;
            at += gpu_cpu_gemm_packed_floats(p->N, p->K);
        } else if (how == 2) {
            gpu_cpu_bf16_pack(p->w, p->K, p->N, p->K, at16);
            p->packed16 = at16;
            at16 += gpu_cpu_bf16_packed_elems(p->N, p->K);
        }
    }
    return 0;
}

/* Per-thread scratch: the widest attention op's, and at fp8 the rounded input of the widest
 * FP8 projection over the most rows a chunk may hold. */
static void scratch_sizes(gpu_backend_t *be) {
    const gpu_graph_t *g = be->g;
    int k8 = 0;
    for (int i = 0; i < g->n_ops; i++) {
        const gpu_op_t *op = &g->op[i];
        if (op->kind == GPU_OP_ATTENTION) {
            size_t f = gpu_cpu_attn_scratch_floats(op, be->max_len);
            if (f > be->scratch_floats) be->scratch_floats = f;
        }
        if (op->kind == GPU_OP_LINEAR && op->prec == GPU_PREC_FP8 && op->k > k8) k8 = op->k;
    }
    const int rows = be->chunk > be->max_len ? be->chunk : be->max_len;
    be->xq_floats = k8 ? (size_t)rows * (size_t)k8 : 0;
}

common_status_t gpu_cpu_graph_setup(gpu_backend_t *be, common_err_t *err) {
    const gpu_model_t *m = be->m;
    if (!be->g && gpu_graph_build(&m->cfg, &m->w, be->prec, GPU_PREC_FP32, &be->g, err) != 0)
        return err->code;
    gpu_graph_t *g = be->g;
    if (gpu_graph_check(g, "cpu", gpu_cpu_supports_op, err) != 0) return err->code;
    gpu_graph_plan_t plan;
    gpu_graph_plan_opts_t po = {.act_bytes = sizeof(float),
                                .token_budget = be->opts.token_budget,
                                .max_seqs = be->max_seqs};
    if (gpu_graph_plan(g, &po, &plan) != 0) goto oom;
    be->arena_bytes = plan.arena_bytes;
    be->arena =
        aligned_alloc(GPU_GRAPH_ALIGN, plan.arena_bytes ? plan.arena_bytes : GPU_GRAPH_ALIGN);
    be->tp = calloc((size_t)g->n_tensors, sizeof *be->tp);
    be->proj = calloc((size_t)(g->n_prelude + g->n_ops), sizeof *be->proj);
    if (!be->arena || !be->tp || !be->proj) {
        gpu_graph_plan_free(&plan);
        goto oom;
    }
    for (int t = 0; t < g->n_tensors; t++)
        be->tp[t] = g->tensor[t].cls == GPU_TENSOR_WEIGHT
                        ? (float *)g->tensor[t].data
                        : (float *)((char *)be->arena + plan.offset[t]);
    gpu_graph_plan_free(&plan);
    for (int i = 0; i < g->n_prelude + g->n_ops; i++) {
        const gpu_op_t *op = i < g->n_prelude ? &g->prelude[i] : &g->op[i - g->n_prelude];
        if (op->kind != GPU_OP_LINEAR) continue;
        be->proj[i] = (cpu_proj_t){.w = be->tp[op->w[0]],
                                   .b = op->w[1] >= 0 ? be->tp[op->w[1]] : NULL,
                                   .N = op->n,
                                   .K = op->k};
    }
    if (be->prec == GPU_PREC_FP8 && gpu_cpu_fp8_weights(be) != 0) goto oom;
    if (pack_weights(be) != 0) goto oom;
    for (int i = 0; i < g->n_prelude; i++)
        gpu_cpu_run_op(be, i, &g->prelude[i], NULL, 0, 0, NULL);
    scratch_sizes(be);
    return COMMON_OK;
oom:
    return common_err_set(err, COMMON_FATAL,
                          "out of memory for the graph's weights and a %d-token arena",
                          be->opts.token_budget);
}

void gpu_cpu_graph_free(gpu_backend_t *be) {
    gpu_graph_free(be->g);
    free(be->tp);
    free(be->proj);
    free(be->arena);
    free(be->fp8_w);
    free(be->packed);
    free(be->packed16);
}
