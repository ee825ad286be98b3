// Where the graph's tensors live on the device, and what they are stored as: decided once
// from the op list (a weight takes the type of the ops that read it, an activation that of
// the op that writes it), then every tensor and the scratch the ops need laid out in the
// backend's one allocation: weights, consts, activations, logits, scratch. setup uploads the
// weights (16-bit, fp32 or E4M3 with per-row scales quantized by gpu/model/fp8.h, bit for bit
// what the CPU reference runs), prepares the GEMM handles and runs the prelude.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cuda/cuda_graph.cuh"
#include "gpu/model/fp8.h"

#define CG_ALIGN    256
#define CG_WS_BYTES (32u << 20) /* cuBLASLt / cuBLAS workspace, shared: one stream */

static size_t up(size_t n) {
    return (n + CG_ALIGN - 1) / CG_ALIGN * CG_ALIGN;
}

static void set_dt(cuda_graph_t *cg, int t, int dt) {
    if (t >= 0) cg->t[t].dt = dt;
}

// The storage type of every tensor (see the file comment): fp32 where the graph says so, the
// logits, and what an fp32 linear (the head) writes; the rest 16-bit.
static void decide_types(cuda_graph_t *cg, const gpu_graph_t *g, int t16) {
    for (int i = 0; i < g->n_tensors; i++)
        cg->t[i].dt = g->tensor[i].fp32 || g->tensor[i].cls == GPU_TENSOR_LOGITS ? CG_F32 : t16;
    for (int pass = 0; pass < 2; pass++) {
        const gpu_op_t *ops = pass ? g->op : g->prelude;
        const int n = pass ? g->n_ops : g->n_prelude;
        for (int i = 0; i < n; i++) {
            const gpu_op_t *o = &ops[i];
            if (o->kind == GPU_OP_LINEAR && o->prec == GPU_PREC_FP32) set_dt(cg, o->out.t, CG_F32);
            // bf16 keeps the residual stream in fp32 (bf16's 8-bit mantissa would round the
            // residual sum every layer), as the hand-written path does
            if (o->kind == GPU_OP_LINEAR && o->epi == GPU_EPI_RESIDUAL && t16 == CG_BF16)
                set_dt(cg, o->out.t, CG_F32);
            if (o->prec == GPU_PREC_FP32 && o->src[0].t >= 0 &&
                g->tensor[o->src[0].t].cls == GPU_TENSOR_WEIGHT)
                set_dt(cg, o->src[0].t, CG_F32); // DeBERTa's relative embeddings
            switch (o->kind) {
            case GPU_OP_EMBED:
                set_dt(cg, o->w[0], t16), set_dt(cg, o->w[1], t16), set_dt(cg, o->w[2], t16);
                set_dt(cg, o->w[3], CG_F32), set_dt(cg, o->w[4], CG_F32);
                break;
            case GPU_OP_NORM:
                set_dt(cg, o->w[0], CG_F32), set_dt(cg, o->w[1], CG_F32);
                break;
            case GPU_OP_LINEAR:
                set_dt(cg, o->w[0],
                       o->prec == GPU_PREC_FP32  ? CG_F32
                       : o->prec == GPU_PREC_FP8 ? CG_E4M3
                                                 : t16);
                set_dt(cg, o->w[1], o->prec == GPU_PREC_FP32 ? CG_F32 : t16);
                break;
            case GPU_OP_ATTENTION: // the prelude's fp32 linears convert into these
                set_dt(cg, o->w[0], t16), set_dt(cg, o->w[1], t16);
                break;
            default:
                break;
            }
        }
    }
}

int cuda_graph_layout(cuda_graph_t *cg, const gpu_graph_t *g, int t16, int token_budget,
                      int max_seqs, int max_len, char *err, size_t errlen) {
    cg->g = g, cg->t16 = t16;
    cg->token_budget = token_budget, cg->max_seqs = max_seqs, cg->max_len = max_len;
    cg->t = (cg_tensor_t *)calloc((size_t)g->n_tensors, sizeof(cg_tensor_t));
    if (!cg->t) {
        snprintf(err, errlen, "out of host memory for the graph's layout");
        return -1;
    }
    decide_types(cg, g, t16);
    size_t at = 0, max_cols = 8;
    for (int pass = 0; pass < 2; pass++) // weights first, then consts, activations, logits
        for (int i = 0; i < g->n_tensors; i++) {
            const gpu_tensor_t *x = &g->tensor[i];
            if ((x->cls == GPU_TENSOR_WEIGHT) != (pass == 0)) continue;
            cg_tensor_t *t = &cg->t[i];
            const size_t rows = gpu_graph_rows(g, i, token_budget, max_seqs);
            if ((size_t)x->cols > max_cols) max_cols = (size_t)x->cols;
            t->off = at;
            t->bytes = rows * (size_t)x->cols * cg_dt_bytes(t->dt);
            at += up(t->bytes);
            if (t->dt == CG_E4M3) {
                t->scale_at = at;
                at += up(rows * sizeof(float));
            }
            if (pass == 0) cg->weights_bytes = at;
        }
    // Scratch, sized by the ops that need it.
    const size_t T = (size_t)token_budget, ta = (T + 3) & ~(size_t)3;
    size_t f32 = 0, f32o = 0, x16 = 0, y16 = 0, att = 0, rel = 0, xq = 0, R = 0;
    int need_rrow = 0;
    for (int pass = 0; pass < 2; pass++) {
        const gpu_op_t *ops = pass ? g->op : g->prelude;
        const int n = pass ? g->n_ops : g->n_prelude;
        for (int i = 0; i < n; i++) {
            const gpu_op_t *o = &ops[i];
            const size_t rows =
                o->out.t >= 0 ? gpu_graph_rows(g, o->out.t, token_budget, max_seqs) : 0;
            if (o->kind == GPU_OP_LINEAR && o->prec == GPU_PREC_FP32 &&
                cg->t[o->src[0].t].dt != CG_F32 && rows * o->k > f32)
                f32 = rows * o->k;
            if (o->kind == GPU_OP_LINEAR && o->prec == GPU_PREC_FP32 &&
                cg->t[o->out.t].dt != CG_F32 && rows * o->n > f32o)
                f32o = rows * o->n;
            if (o->kind == GPU_OP_NORM && cg->t[o->src[0].t].dt == CG_F32 &&
                cg->t[o->out.t].dt != CG_F32 && rows * o->n > f32o)
                f32o = rows * o->n;
            if (o->kind == GPU_OP_POOL && rows * o->n > f32) // means, first rows converted
                f32 = rows * o->n;
            if (o->kind == GPU_OP_LINEAR && o->prec == GPU_PREC_FP8 && (size_t)o->k > xq)
                xq = (size_t)o->k;
            if (o->kind == GPU_OP_LINEAR && o->prec != GPU_PREC_FP32) {
                if (cg->t[o->src[0].t].dt == CG_F32 && rows * o->k > x16) x16 = rows * o->k;
                if (cg->t[o->out.t].dt == CG_F32 && rows * o->n > y16) y16 = rows * o->n;
            }
            if (o->kind != GPU_OP_ATTENTION) continue;
            const size_t cols = (size_t)o->heads * o->head_dim;
            if (g->tensor[o->out.t].rows_kind == GPU_ROWS_SEQS && cols > att) att = cols;
            if (o->w[0] >= 0 || o->w[1] >= 0) {
                const int rt = o->w[0] >= 0 ? o->w[0] : o->w[1];
                need_rrow = 1;
                if ((size_t)g->tensor[rt].rows > R) R = (size_t)g->tensor[rt].rows;
                if (T * o->heads * R > rel) rel = T * o->heads * R;
            }
        }
    }
    cg->o_in = at, cg->in_bytes = (2 * ta + (size_t)max_seqs + 1) * 4, at += up(cg->in_bytes);
    cg->rrow_mid = max_len - 1;
    cg->o_rrow = at, at += need_rrow ? up((size_t)(2 * max_len - 1) * 4) : 0;
    cg->o_zero = at, cg->zero_bytes = max_cols * 4, at += up(cg->zero_bytes);
    cg->o_f32 = at, cg->f32_floats = f32, at += up(f32 * 4);
    cg->o_f32o = at, cg->f32o_floats = f32o, at += up(f32o * 4);
    cg->o_x16 = at, cg->x16_elems = up(x16), cg->y16_elems = y16, at += up(up(x16) * 2 + y16 * 2);
    cg->o_att = at, cg->att_cols = att, at += 2 * up(T * att * 2); // queries, outputs
    cg->o_rel = at, cg->rel_elems = rel, at += 2 * up(rel * 2);    // c2p, p2c
    cg->o_xq = at, cg->xq_cols = xq, at += up(T * xq);
    cg->o_xs = at, at += xq ? up(T * 4) : 0;
    cg->o_ws = at, cg->ws_bytes = CG_WS_BYTES, at += CG_WS_BYTES;
    cg->total_bytes = at;
    return 0;
}

// The host image of the weight region: every weight an op reads, in its storage type.
static void weights_image(const cuda_graph_t *cg, char *img) {
    const gpu_graph_t *g = cg->g;
    for (int i = 0; i < g->n_tensors; i++) {
        const gpu_tensor_t *x = &g->tensor[i];
        const cg_tensor_t *t = &cg->t[i];
        if (x->cls != GPU_TENSOR_WEIGHT || !x->data || t->bytes == 0) continue;
        const size_t n = (size_t)x->rows * x->cols;
        char *o = img + t->off;
        if (t->dt == CG_F32) {
            memcpy(o, x->data, n * 4);
        } else if (t->dt == CG_F16) {
            for (size_t j = 0; j < n; j++)
                ((__half *)o)[j] = __float2half_rn(x->data[j]);
        } else if (t->dt == CG_BF16) {
            for (size_t j = 0; j < n; j++)
                ((__nv_bfloat16 *)o)[j] = __float2bfloat16_rn(x->data[j]);
        } else { // E4M3 per output channel, as the CPU reference quantizes them
            float *sc = (float *)(img + t->scale_at);
            for (int r = 0; r < x->rows; r++)
                sc[r] = gpu_fp8_quantize_row(x->data + (size_t)r * x->cols, x->cols,
                                             (uint8_t *)o + (size_t)r * x->cols);
        }
    }
}

int cuda_graph_setup(cuda_graph_t *cg, char *dev, cudaStream_t st, int sms, char *err,
                     size_t errlen) {
    cg->dev = dev, cg->st = st, cg->sms = sms;
    char *img = (char *)calloc(1, cg->weights_bytes ? cg->weights_bytes : 1);
    int32_t *rrow = NULL;
    if (!img) {
        snprintf(err, errlen, "out of host memory for the weight image");
        return -1;
    }
    weights_image(cg, img);
    cudaError_t e = cudaMemcpy(dev, img, cg->weights_bytes, cudaMemcpyHostToDevice);
    free(img);
    if (e == cudaSuccess) e = cudaMemset(dev + cg->o_zero, 0, cg->zero_bytes);
    if (e == cudaSuccess && cg->o_rrow != cg->o_zero) {
        const int mid = cg->rrow_mid;
        rrow = (int32_t *)malloc(sizeof(int32_t) * (size_t)(2 * mid + 1));
        if (!rrow) {
            snprintf(err, errlen, "out of host memory");
            return -1;
        }
        for (int d = -mid; d <= mid; d++)
            rrow[d + mid] = gpu_model_rel_row(&cg->g->cfg, d);
        e = cudaMemcpy(dev + cg->o_rrow, rrow, sizeof(int32_t) * (size_t)(2 * mid + 1),
                       cudaMemcpyHostToDevice);
        free(rrow);
    }
    if (e != cudaSuccess) {
        snprintf(err, errlen, "CUDA weight upload failed: %s", cudaGetErrorString(e));
        return -1;
    }
    void *ws = dev + cg->o_ws;
    const int type = cg->t16 == CG_BF16 ? CUDA_GEMM_BF16 : CUDA_GEMM_FP16;
    if (cuda_gemm_init(&cg->gemm, type, ws, cg->ws_bytes, err, errlen) != 0 ||
        cuda_gemm_init(&cg->gemm32, CUDA_GEMM_FP32, ws, cg->ws_bytes, err, errlen) != 0)
        return -1;
    if (cg->xq_cols) {
        if (cuda_fp8_gemm_init(&cg->gemm8, type, ws, cg->ws_bytes, err, errlen) != 0) return -1;
        cg->has_fp8 = 1;
    }
    if (cg->rel_elems) {
        cublasHandle_t h = NULL;
        // the stream first: cublasSetStream drops a workspace set before it (cuda_rel.cu)
        if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS ||
            cublasSetStream(h, st) != CUBLAS_STATUS_SUCCESS ||
            cublasSetWorkspace(h, ws, cg->ws_bytes) != CUBLAS_STATUS_SUCCESS) {
            if (h) cublasDestroy(h);
            snprintf(err, errlen, "cuBLAS handle for the relative scores failed");
            return -1;
        }
        cg->blas = h;
    }
    for (int i = 0; i < cg->g->n_prelude; i++)
        if (cuda_graph_op(cg, &cg->g->prelude[i], 0, 0, 0, err, errlen) != 0) return -1;
    e = cudaStreamSynchronize(st);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "CUDA error in the graph's prelude: %s", cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

void cuda_graph_free(cuda_graph_t *cg) {
    if (!cg) return;
    if (cg->dev) { // handles exist only once setup ran
        cuda_gemm_free(&cg->gemm);
        cuda_gemm_free(&cg->gemm32);
        if (cg->has_fp8) cuda_fp8_gemm_free(&cg->gemm8);
        if (cg->blas) cublasDestroy((cublasHandle_t)cg->blas);
    }
    free(cg->t);
    free(cg);
}

int cuda_graph_run(cuda_graph_t *cg, int n_tokens, int n_seqs, int max_len, char *err,
                   size_t errlen) {
    for (int i = 0; i < cg->g->n_ops; i++)
        if (cuda_graph_op(cg, &cg->g->op[i], n_tokens, n_seqs, max_len, err, errlen) != 0)
            return -1;
    return 0;
}
