/* `--precision fp8` on the CPU backend: the reference of the FP8 path (gpu/model/fp8.h).
 * The projections gpu_fp8_runs names read E4M3 values: their weights are rounded once at init
 * (per output channel) and their inputs row by row (per token) just before the GEMM, each
 * stored back as the fp32 value it represents, so the fp32 GEMM computes
 * sum(q_x q_w) s_x s_w exactly as the CUDA path's FP8 GEMM does up to fp32 summation order.
 * Everything else stays fp32. Not faster than fp32: its use is to measure a checkpoint's
 * FP8 agreement where no GPU is, and to check the CUDA path against. */
#include <stdlib.h>
#include <string.h>

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
    const gpu_model_config_t *c = &be->m->cfg;
    size_t n = 0;
    for (int l = 0; l < c->layers; l++) {
        const cpu_layer_proj_t *p = &be->proj[l];
        const cpu_proj_t *pts[GPU_FP8_POINTS] = {&p->qkv, &p->ao, &p->ff1, &p->ff2};
        for (int i = 0; i < GPU_FP8_POINTS; i++)
            if (gpu_fp8_runs(c, l, (gpu_fp8_point_t)i)) n += (size_t)pts[i]->N * pts[i]->K;
    }
    be->fp8_w = malloc(sizeof(float) * (n ? n : 1));
    be->fp8_on = calloc((size_t)c->layers, sizeof *be->fp8_on);
    if (!be->fp8_w || !be->fp8_on) return -1;
    be->fp8_w_floats = n;
    float *at = be->fp8_w;
    for (int l = 0; l < c->layers; l++) {
        cpu_layer_proj_t *p = &be->proj[l];
        if (gpu_fp8_runs(c, l, GPU_FP8_QKV)) {
            round_weight(&p->qkv, &at);
            p->q.w = p->qkv.w;
            p->kv.w = p->qkv.w + (size_t)c->hidden * c->hidden;
        }
        if (gpu_fp8_runs(c, l, GPU_FP8_AO)) round_weight(&p->ao, &at);
        if (gpu_fp8_runs(c, l, GPU_FP8_FF1)) round_weight(&p->ff1, &at);
        if (gpu_fp8_runs(c, l, GPU_FP8_FF2)) round_weight(&p->ff2, &at);
        for (int i = 0; i < GPU_FP8_POINTS; i++)
            if (gpu_fp8_runs(c, l, (gpu_fp8_point_t)i)) be->fp8_on[l] |= 1u << i;
    }
    return 0;
}

const float *gpu_cpu_fp8_input(const gpu_backend_t *be, int layer, gpu_fp8_point_t p,
                               const float *x, int ldx, int n, int K, float *y, int ldy) {
    if (!be->fp8 || !(be->fp8_on[layer] & (1u << p))) return x;
    for (int r = 0; r < n; r++)
        gpu_fp8_fake_row(x + (size_t)r * ldx, K, y + (size_t)r * ldy);
    return y;
}
