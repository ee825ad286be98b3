// The CUDA graph's set-up on the device, once its layout is made (gpu/cuda/layout.c): setup
// uploads the weights (16-bit, fp32 or E4M3 with per-row scales quantized by
// gpu/model/fp8.h, bit for bit what the CPU reference runs), prepares the GEMM handles on
// the workspace slice and runs the prelude.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cuda/cuda_common.cuh"
#include "gpu/cuda/cuda_graph.cuh"
#include "gpu/model/fp8.h"

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

// The static input scale of an FP8 linear (layout.h: fp8_static) into its weights' per-channel
// scales in the host image (a power of two: exact); its per-token scales are then ones.
static void fold_static(const cuda_graph_t *cg, char *img) {
    const gpu_graph_t *g = cg->g;
    for (int i = 0; i < g->n_ops; i++) {
        const float s = cg->fp8_static[i];
        if (s <= 0.0f) continue;
        float *sc = (float *)(img + cg->t[g->op[i].w[0]].scale_at);
        for (int r = 0; r < g->tensor[g->op[i].w[0]].rows; r++)
            sc[r] *= s;
    }
}

// The ones (o_ones) and the 1 / scale of each static input (o_sinv) on the device.
static cudaError_t upload_static(const cuda_graph_t *cg) {
    if (cg->o_sinv == cg->o_ones) return cudaSuccess; // no static input
    const size_t T = (size_t)cg->token_budget, n = (size_t)cg->g->n_ops;
    float *h = (float *)malloc(sizeof(float) * (T > n ? T : n));
    if (!h) return cudaErrorMemoryAllocation;
    for (size_t i = 0; i < n; i++)
        h[i] = cg->fp8_static[i] > 0.0f ? gpu_fp8_pow2_inv(cg->fp8_static[i]) : 1.0f;
    cudaError_t e = cudaMemcpy(cg->dev + cg->o_sinv, h, n * 4, cudaMemcpyHostToDevice);
    for (size_t i = 0; i < T; i++)
        h[i] = 1.0f;
    if (e == cudaSuccess) e = cudaMemcpy(cg->dev + cg->o_ones, h, T * 4, cudaMemcpyHostToDevice);
    free(h);
    return e;
}

common_status_t cuda_graph_setup(cuda_graph_t *cg, char *dev, cudaStream_t st, int sms,
                                 common_err_t *err) {
    cg->dev = dev, cg->st = st, cg->sms = sms;
    char *img = (char *)calloc(1, cg->weights_bytes ? cg->weights_bytes : 1);
    int32_t *rrow = NULL;
    if (!img) {
        return common_err_set(err, COMMON_FATAL, "out of host memory for the weight image");
    }
    weights_image(cg, img);
    fold_static(cg, img);
    cudaError_t e = cudaMemcpy(dev, img, cg->weights_bytes, cudaMemcpyHostToDevice);
    free(img);
    if (e == cudaSuccess) e = upload_static(cg);
    if (e == cudaSuccess) e = cudaMemset(dev + cg->o_zero, 0, cg->zero_bytes);
    if (e == cudaSuccess && cg->o_rrow != cg->o_zero) {
        const int mid = cg->rrow_mid;
        rrow = (int32_t *)malloc(sizeof(int32_t) * (size_t)(2 * mid + 1));
        if (!rrow) {
            return common_err_set(err, COMMON_FATAL, "out of host memory");
        }
        for (int d = -mid; d <= mid; d++)
            rrow[d + mid] = gpu_op_rel_row(cg->rel_op, d);
        e = cudaMemcpy(dev + cg->o_rrow, rrow, sizeof(int32_t) * (size_t)(2 * mid + 1),
                       cudaMemcpyHostToDevice);
        free(rrow);
    }
    if (e == cudaSuccess && cg->n_rope > 0) { // RoPE's cos / sin, one table per theta
        const size_t per = (size_t)cg->max_len * cg->rope_dim; // floats of one table
        float *tab = (float *)malloc(per * sizeof(float) * (size_t)cg->n_rope);
        if (!tab) {
            return common_err_set(err, COMMON_FATAL, "out of host memory");
        }
        for (int i = 0; i < cg->n_rope; i++)
            cuda_rope_table(cg->rope_theta[i], cg->rope_dim, cg->max_len, tab + i * per);
        e = cudaMemcpy(dev + cg->o_rope, tab, per * sizeof(float) * (size_t)cg->n_rope,
                       cudaMemcpyHostToDevice);
        free(tab);
    }
    if (e != cudaSuccess) {
        return common_err_set(err, COMMON_FATAL, "CUDA weight upload failed: %s",
                              cudaGetErrorString(e));
    }
    void *ws = dev + cg->o_ws;
    const int type = cg->t16 == CG_BF16 ? CUDA_GEMM_BF16 : CUDA_GEMM_FP16;
    if (cuda_gemm_init(&cg->gemm, type, ws, cg->ws_bytes, err) != 0 ||
        cuda_gemm_init(&cg->gemm32, CUDA_GEMM_FP32, ws, cg->ws_bytes, err) != 0)
        return err->code;
    if (cg->xq_cols) {
        if (cuda_fp8_gemm_init(&cg->gemm8, type, ws, cg->ws_bytes, err) != 0) return err->code;
        cg->has_fp8 = 1;
    }
    if (cg->rel_elems) {
        if (cuda_rel_init(&cg->rel, cg->t16 == CG_BF16, ws, cg->ws_bytes) != 0) {
            return common_err_set(err, COMMON_FATAL,
                                  "cuBLASLt handle for the relative scores failed");
        }
        cg->has_rel = 1;
    }
    cg->x16_of = -1;
    for (int i = 0; i < cg->g->n_prelude; i++)
        if (cuda_graph_op(cg, &cg->g->prelude[i], 0, 0, 0, err) != 0) return err->code;
    e = cudaStreamSynchronize(st);
    if (e != cudaSuccess) {
        return common_err_set(err, COMMON_FATAL, "CUDA error in the graph's prelude: %s",
                              cudaGetErrorString(e));
    }
    return COMMON_OK;
}

void cuda_graph_free(cuda_graph_t *cg) {
    if (!cg) return;
    if (cg->dev) { // handles exist only once setup ran
        cuda_gemm_free(&cg->gemm);
        cuda_gemm_free(&cg->gemm32);
        if (cg->has_fp8) cuda_fp8_gemm_free(&cg->gemm8);
        if (cg->has_rel) cuda_rel_free(&cg->rel);
    }
    free(cg->t);
    free(cg->fp8_static);
    free(cg);
}
