/* `--precision fp8` on the CPU backend: the reference of the FP8 path (gpu/model/fp8.h).
 * The linear ops at fp8 (the projections gpu_fp8_runs names) read E4M3 values: their weights are
 * rounded once at init (per output channel) and their inputs row by row (per token, or under the
 * static scale of gpu_graph_fp8_static_scale) just before the GEMM, each stored back as the fp32
 * value it represents, so the fp32 GEMM computes sum(q_x q_w) s_x s_w exactly as the CUDA path's
 * FP8 GEMM does up to fp32 summation order. Everything else stays fp32. Not faster than fp32: its
 * use is to measure a checkpoint's FP8 agreement where no GPU is, and to check the CUDA path
 * against. */
#include <stdlib.h>

#include "gpu/cpu/cpu_backend_int.h"
#include "gpu/model/fp8.h"

/* Replaces p's weight by a rounded copy at *at (N * K floats). */
static void round_weight(cpu_proj_t *p, float **at) {
    for (int r = 0; r < p->N; r++)
        gpu_fp8_fake_row(p->w + (size_t)r * p->K, p->K, *at + (size_t)r * p->K);
    p->w = *at;
    *at += (size_t)p->N * p->K;
}

int gpu_cpu_fp8_weights(gpu_backend_t *be) {
    const gpu_graph_t *g = be->g;
    size_t n = 0;
    for (int i = 0; i < g->n_ops; i++)
        if (g->op[i].kind == GPU_OP_LINEAR && g->op[i].prec == GPU_PREC_FP8)
            n += (size_t)g->op[i].n * (size_t)g->op[i].k;
    be->fp8_w = malloc(sizeof(float) * (n ? n : 1));
    if (!be->fp8_w) return -1;
    be->fp8_w_floats = n;
    float *at = be->fp8_w;
    for (int i = 0; i < g->n_ops; i++)
        if (g->op[i].kind == GPU_OP_LINEAR && g->op[i].prec == GPU_PREC_FP8) {
            round_weight(&be->proj[g->n_prelude + i], &at);
            be->proj[g->n_prelude + i].x_scale = gpu_graph_fp8_static_scale(g, i);
        }
    return 0;
}

const float *gpu_cpu_fp8_input(const cpu_proj_t *p, const float *x, int ldx, int n, float *y) {
    const int K = p->K;
    for (int r = 0; r < n; r++)
        if (p->x_scale > 0.0f)
            gpu_fp8_fake_row_static(x + (size_t)r * ldx, K, p->x_scale, y + (size_t)r * K);
        else
            gpu_fp8_fake_row(x + (size_t)r * ldx, K, y + (size_t)r * K);
    return y;
}
