/* The CPU backend runs the graph (gpu/graph.h) over one chunk of whole sequences: op after
 * op, each on the chunk's own rows of its tensors (token rows [t0, t0 + n), sequence rows
 * [s0, s1)), so threads running other chunks never touch them. The CPU is the reference of
 * every op: activations stay fp32 whatever the precision; a linear op at bf16 multiplies
 * bf16-rounded operands (gpu_cpu_gemm_bf16), at fp8 E4M3-rounded ones (cpu_fp8.c). */
#include <cblas.h>
#include <string.h>

#include "common/clock.h"

#include "gpu/cpu/cpu_attention.h"
#include "gpu/cpu/cpu_backend_int.h"
#include "gpu/cpu/cpu_gemm.h"
#include "gpu/cpu/cpu_gemm_bf16.h"
#include "gpu/cpu/cpu_kernels.h"
#include "gpu/model/fp8.h"

/* y (n, N), rows ldy apart, = epilogue(x (n, K) W^T + b). With OpenBLAS the epilogue is
 * a pass of its own: the residual add rides on beta 1, the bias starts in C. */
void gpu_cpu_project(const cpu_proj_t *p, const float *x, int ldx, int n, gpu_cpu_epi_t epi,
                     float *y, int ldy) {
    if (p->packed16) {
        gpu_cpu_gemm_bf16(x, ldx, n, p->packed16, p->N, p->K, p->b, epi, y, ldy);
        return;
    }
    if (p->packed) {
        gpu_cpu_gemm(x, ldx, n, p->packed, p->N, p->K, p->b, epi, y, ldy);
        return;
    }
    const int act = epi == GPU_CPU_EPI_GELU || epi == GPU_CPU_EPI_RELU;
    if (epi == GPU_CPU_EPI_STORE) gpu_cpu_fill_rows(y, ldy, p->b, n, p->N);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, p->N, p->K, 1.0f, x, ldx, p->w, p->K,
                act ? 0.0f : 1.0f, y, ldy);
    if (epi == GPU_CPU_EPI_ACCUM) gpu_cpu_bias(y, ldy, p->b, n, p->N);
    if (epi == GPU_CPU_EPI_GELU) {
        if (ldy == p->N)
            gpu_cpu_bias_gelu(y, p->b, n, p->N);
        else {
            gpu_cpu_bias(y, ldy, p->b, n, p->N);
            gpu_cpu_act(y, ldy, n, p->N, GPU_ACT_GELU);
        }
    }
    if (epi == GPU_CPU_EPI_RELU) {
        gpu_cpu_bias(y, ldy, p->b, n, p->N);
        gpu_cpu_act(y, ldy, n, p->N, GPU_ACT_RELU);
    }
}

/* The linear op: erf GELU and ReLU ride in the GEMM's epilogue, the others take a pass. */
static void linear(const gpu_backend_t *be, int i, const gpu_op_t *op, const float *x, int ldx,
                   int n, float *y, int ldy, float *xq) {
    const cpu_proj_t *p = &be->proj[i];
    if (op->prec == GPU_PREC_FP8) x = gpu_cpu_fp8_input(p, x, ldx, n, xq), ldx = op->k;
    gpu_act_t act = op->act;
    switch (op->epi) {
    case GPU_EPI_BIAS:
        gpu_cpu_project(p, x, ldx, n, GPU_CPU_EPI_STORE, y, ldy);
        return;
    case GPU_EPI_RESIDUAL:
        gpu_cpu_project(p, x, ldx, n, GPU_CPU_EPI_ACCUM, y, ldy);
        return;
    case GPU_EPI_ACT:
        if (act == GPU_ACT_GELU || act == GPU_ACT_RELU) {
            gpu_cpu_project(p, x, ldx, n, act == GPU_ACT_GELU ? GPU_CPU_EPI_GELU : GPU_CPU_EPI_RELU,
                            y, ldy);
            return;
        }
        gpu_cpu_project(p, x, ldx, n, GPU_CPU_EPI_STORE, y, ldy);
        gpu_cpu_act(y, ldy, n, p->N, act);
        return;
    case GPU_EPI_GLU: {
        const int m = p->N / 2;
        gpu_cpu_project(p, x, ldx, n, GPU_CPU_EPI_STORE, y, ldy);
        gpu_cpu_act(y, ldy, n, m, act);
        for (int t = 0; t < n; t++) {
            float *r = y + (size_t)t * ldy;
            for (int j = 0; j < m; j++)
                r[j] *= r[m + j];
        }
        return;
    }
    }
}

/* Rows [t0, ...) or [s0, ...) of view v, whichever its tensor has. */
static float *at(const gpu_backend_t *be, gpu_view_t v, int t0, int s0) {
    const gpu_tensor_t *t = &be->g->tensor[v.t];
    const size_t row = t->rows_kind == GPU_ROWS_TOKENS ? (size_t)t0
                       : t->rows_kind == GPU_ROWS_SEQS ? (size_t)s0
                                                       : 0;
    return be->tp[v.t] + row * (size_t)t->cols + (size_t)v.col;
}

static int ld(const gpu_backend_t *be, gpu_view_t v) {
    return be->g->tensor[v.t].cols;
}

static const float *wt(const gpu_backend_t *be, int t) {
    return t >= 0 ? be->tp[t] : NULL;
}

/* The rows of view v an op runs on: the chunk's tokens or its sequences. */
static int rows(const gpu_backend_t *be, gpu_view_t v, int n, int ns) {
    return be->g->tensor[v.t].rows_kind == GPU_ROWS_SEQS ? ns : n;
}

void gpu_cpu_run_op(const gpu_backend_t *be, int i, const gpu_op_t *op, const gpu_batch_t *bt,
                    int s0, int s1, cpu_worker_t *wk) {
    const int *cu = bt ? bt->cu_seqlens : NULL;
    const int t0 = bt ? cu[s0] : 0, ns = s1 - s0;
    const int n = bt ? cu[s1] - t0 : be->g->tensor[op->out.t].rows;
    float *y = at(be, op->out, t0, s0);
    const int ldy = ld(be, op->out);
    switch (op->kind) {
    case GPU_OP_EMBED:
        for (int s = s0; s < s1; s++)
            gpu_cpu_embed_rows(wt(be, op->w[0]), wt(be, op->w[1]), wt(be, op->w[2]),
                               wt(be, op->w[3]), wt(be, op->w[4]), op->n, op->eps, bt->ids + cu[s],
                               cu[s + 1] - cu[s], y + (size_t)(cu[s] - t0) * ldy, ldy);
        return;
    case GPU_OP_NORM: {
        const float *x = at(be, op->src[0], t0, s0);
        const int r = rows(be, op->out, n, ns), ldx = ld(be, op->src[0]);
        for (int k = 0; x != y && k < r; k++)
            memcpy(y + (size_t)k * ldy, x + (size_t)k * ldx, sizeof(float) * (size_t)op->n);
        if (op->w[0] < 0) return;
        if (op >= be->g->op && gpu_graph_norm_feeds_fp8(be->g, (int)(op - be->g->op))) {
            for (int k = 0; k < r; k++) /* CUDA's sequence, bit for bit (gpu/model/fp8.h) */
                gpu_fp8_norm_row(y + (size_t)k * ldy, NULL, wt(be, op->w[0]), wt(be, op->w[1]),
                                 op->n, op->eps, y + (size_t)k * ldy);
            return;
        }
        for (int k = 0; k < r; k++)
            gpu_cpu_ln(y + (size_t)k * ldy, wt(be, op->w[0]), wt(be, op->w[1]), 1, op->n, op->eps);
        return;
    }
    case GPU_OP_LINEAR:
        linear(be, i, op, at(be, op->src[0], t0, s0), ld(be, op->src[0]), rows(be, op->out, n, ns),
               y, ldy, wk ? wk->xq : NULL);
        return;
    case GPU_OP_POOL:
        for (int s = s0; s < s1; s++) {
            const float *sx =
                be->tp[op->src[0].t] + (size_t)cu[s] * ld(be, op->src[0]) + op->src[0].col;
            const int lx = ld(be, op->src[0]), len = cu[s + 1] - cu[s];
            float *o = y + (size_t)(s - s0) * ldy;
            if (op->pool == GPU_POOL_CLS) {
                memcpy(o, sx, sizeof(float) * (size_t)op->n);
                continue;
            }
            for (int c = 0; c < op->n; c++) {
                float sum = 0.0f;
                for (int t = 0; t < len; t++)
                    sum += sx[(size_t)t * lx + c];
                o[c] = sum / (float)len;
            }
        }
        return;
    case GPU_OP_ATTENTION: {
        const int q_seqs = be->g->tensor[op->src[0].t].rows_kind == GPU_ROWS_SEQS;
        const int ldq = ld(be, op->src[0]), ldkv = ld(be, op->src[1]);
        for (int s = s0; s < s1; s++) {
            const int len = cu[s + 1] - cu[s];
            float *q = at(be, op->src[0], cu[s], s);
            float *k = at(be, op->src[1], cu[s], s);
            const float *v = at(be, op->src[2], cu[s], s);
            float *o = q_seqs ? y + (size_t)(s - s0) * ldy : y + (size_t)(cu[s] - t0) * ldy;
            gpu_cpu_attn_seq(op, q, ldq, q_seqs ? 1 : len, k, v, ldkv, len, wt(be, op->w[0]),
                             wt(be, op->w[1]), o, ldy, wk->scratch);
        }
        return;
    }
    default:
        return;
    }
}

void gpu_cpu_encode_range(gpu_backend_t *be, const gpu_batch_t *bt, int s0, int s1,
                          cpu_worker_t *wk) {
    if (s1 <= s0) return;
    for (int i = 0; i < be->g->n_ops; i++) {
        const double t0 = be->prof ? common_now_s() : 0;
        gpu_cpu_run_op(be, be->g->n_prelude + i, &be->g->op[i], bt, s0, s1, wk);
        if (be->prof) wk->op_s[i] += common_now_s() - t0, wk->op_runs[i]++;
    }
}
