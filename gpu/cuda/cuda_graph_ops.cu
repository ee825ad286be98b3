// One launcher per op kind of the encoder graph (gpu/graph.h) on the CUDA backend's kernels:
// embed (+ LayerNorm), norm, linear (cuBLASLt 16-bit or fp32, or FP8 with per-token scales;
// epilogues bias, activation, GeGLU, residual), attention (full, sliding window, RoPE,
// disentangled c2p + p2c; first-token queries), pool (first token, mean). Which shapes they
// take (supports_op) and the storage types are the layout's (gpu/cuda/layout.c).
#include <math.h>
#include <stdio.h>

#include "gpu/cuda/cuda_common.cuh"
#include "gpu/cuda/cuda_graph.cuh"
#include "gpu/model/fp8.h"

#define OP_CUDA(call)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            return common_err_set(err, COMMON_FATAL, "CUDA error in %s (%s): %s", op->name, #call, \
                                  cudaGetErrorString(e_));                                         \
        }                                                                                          \
    } while (0)

static int cols_of(const gpu_graph_t *g, gpu_view_t v) {
    return g->tensor[v.t].cols;
}
static int contiguous(const gpu_graph_t *g, gpu_view_t v, int n) { // the whole rows of n
    return v.t >= 0 && v.col == 0 && g->tensor[v.t].cols == n;
}

// The device view of v: its tensor's place plus col elements.
static char *vptr(const cuda_graph_t *cg, gpu_view_t v) {
    return cg_ptr(cg, v.t) + (size_t)v.col * cg_dt_bytes(cg->t[v.t].dt);
}
static int rows_of(const cuda_graph_t *cg, int t, int nt, int ns) {
    const gpu_tensor_t *x = &cg->g->tensor[t];
    return x->rows_kind == GPU_ROWS_TOKENS ? nt : x->rows_kind == GPU_ROWS_SEQS ? ns : x->rows;
}
static const void *wptr(const cuda_graph_t *cg, int t) { // a weight, or the zero row
    return t >= 0 ? (const void *)cg_ptr(cg, t) : (const void *)(cg->dev + cg->o_zero);
}
static const int32_t *in_ids(const cuda_graph_t *cg) {
    return (const int32_t *)(cg->dev + cg->o_in);
}
static const int32_t *in_pos(const cuda_graph_t *cg) {
    return in_ids(cg) + ((cg->token_budget + 3) & ~3);
}
static const int32_t *in_cu(const cuda_graph_t *cg) {
    return in_ids(cg) + 2 * ((cg->token_budget + 3) & ~3);
}

template <typename T>
static common_status_t op_embed(cuda_graph_t *cg, const gpu_op_t *op, int nt, common_err_t *err) {
    const T *word = (const T *)cg_ptr(cg, op->w[0]);
    const T *pos = op->w[1] >= 0 ? (const T *)cg_ptr(cg, op->w[1]) : NULL;
    const T *type = op->w[2] >= 0 ? (const T *)cg_ptr(cg, op->w[2]) : NULL;
    const float *ga = (const float *)wptr(cg, op->w[3]), *be = (const float *)wptr(cg, op->w[4]);
    if (cg->t[op->out.t].dt == CG_F32) { // bf16's residual stream, and its rounding for x16
        T *x16 = (size_t)nt * op->n <= cg->x16_elems ? (T *)(cg->dev + cg->o_x16) : (T *)NULL;
        OP_CUDA((cuda_embed_ln<T, float>(in_ids(cg), in_pos(cg), nt, word, pos, type, ga, be, op->n,
                                         op->eps, (float *)vptr(cg, op->out), x16, cg->st)));
        if (x16) cg->x16_of = op->out.t;
    } else
        OP_CUDA((cuda_embed_ln<T, T>(in_ids(cg), in_pos(cg), nt, word, pos, type, ga, be, op->n,
                                     op->eps, (T *)NULL, (T *)vptr(cg, op->out), cg->st)));
    return COMMON_OK;
}

// 1 when the LayerNorm op writes the E4M3 input of the FP8 linear after it as well
// (cuda_fp8_add_ln: gpu_graph_norm_feeds_fp8, rows up to one warp's 1024 elements).
static int fp8_reader(const cuda_graph_t *cg, const gpu_op_t *op) {
    const gpu_graph_t *g = cg->g;
    return op >= g->op && gpu_graph_norm_feeds_fp8(g, (int)(op - g->op)) && op->n <= 1024;
}

template <typename T>
static common_status_t op_norm(cuda_graph_t *cg, const gpu_op_t *op, int m, common_err_t *err) {
    const int sdt = cg->t[op->src[0].t].dt, odt = cg->t[op->out.t].dt;
    char *src = vptr(cg, op->src[0]), *out = vptr(cg, op->out);
    const size_t e = (size_t)m * op->n;
    if (op->w[0] < 0) { // a copy (ModernBERT's layer 0 attn_norm is the identity), converted
        if (sdt == odt && src != out)
            OP_CUDA(
                cudaMemcpyAsync(out, src, e * cg_dt_bytes(sdt), cudaMemcpyDeviceToDevice, cg->st));
        else if (sdt == CG_F32 && odt != CG_F32)
            OP_CUDA(cuda_convert<T>((const float *)src, e, (T *)out, cg->st));
        else if (sdt != CG_F32 && odt == CG_F32)
            OP_CUDA(cuda_to_float<T>((const T *)src, e, (float *)out, cg->st));
        return COMMON_OK;
    }
    const float *ga = (const float *)wptr(cg, op->w[0]), *be = (const float *)wptr(cg, op->w[1]);
    if (sdt != CG_F32 && odt != CG_F32 && fp8_reader(cg, op)) { // codes for the next linear too
        OP_CUDA(cuda_fp8_add_ln<T>((const T *)src, (const T *)NULL, ga, be, m, op->n, op->eps,
                                   (T *)out, (uint8_t *)(cg->dev + cg->o_xq),
                                   (float *)(cg->dev + cg->o_xs), cg->st));
        cg->xq_for = op + 1, cg->xq_at = (uint8_t *)(cg->dev + cg->o_xq);
    } else if (sdt == CG_F32 && odt == CG_F32)
        OP_CUDA(
            (cuda_add_ln<float, float>((const float *)src, (const float *)NULL, ga, be, m, op->n,
                                       op->eps, (float *)NULL, (float *)out, cg->sms, cg->st)));
    else if (sdt != CG_F32 && odt == CG_F32)
        OP_CUDA((cuda_add_ln<T, float>((const T *)src, (const float *)NULL, ga, be, m, op->n,
                                       op->eps, (float *)out, (T *)NULL, cg->sms, cg->st)));
    else if (sdt != CG_F32)
        OP_CUDA((cuda_add_ln<T, T>((const T *)src, (const T *)NULL, ga, be, m, op->n, op->eps,
                                   (T *)NULL, (T *)out, cg->sms, cg->st)));
    else { // fp32 rows normalised into 16-bit ones (DeBERTa's relative embeddings)
        float *f = (float *)(cg->dev + cg->o_f32o);
        OP_CUDA((cuda_add_ln<float, float>((const float *)src, (const float *)NULL, ga, be, m,
                                           op->n, op->eps, (float *)NULL, f, cg->sms, cg->st)));
        OP_CUDA(cuda_convert<T>(f, e, (T *)out, cg->st));
    }
    return COMMON_OK;
}

// The cuBLASLt epilogue of op, and the activation left for a pass of its own (-1 none).
static int lin_epi(const gpu_op_t *op, int fp32, int *post_act) {
    *post_act = -1;
    if (op->epi != GPU_EPI_ACT) return CUDA_GEMM_BIAS;
    if (fp32 || op->act == GPU_ACT_TANH) {
        *post_act = op->act;
        return CUDA_GEMM_BIAS;
    }
    return cuda_gemm_act_epi(op->act);
}

// ln: the LayerNorm that follows a residual projection into fp32 rows, run fused with its
// sum (fused_norm), or NULL.
template <typename T>
static common_status_t op_linear(cuda_graph_t *cg, const gpu_op_t *op, const gpu_op_t *ln, int m,
                                 common_err_t *err) {
    const gpu_graph_t *g = cg->g;
    const int n = op->n, k = op->k, ldy = cols_of(g, op->out), fp32 = op->prec == GPU_PREC_FP32;
    void *y = vptr(cg, op->out);
    const void *x = vptr(cg, op->src[0]), *bias = wptr(cg, op->w[1]);
    const void *res = op->epi == GPU_EPI_RESIDUAL ? y : NULL;
    int post_act, epi = lin_epi(op, fp32, &post_act);
    if (m <= 0) return COMMON_OK;
    const int in16 = cg->t[op->src[0].t].dt != CG_F32, out16 = cg->t[op->out.t].dt != CG_F32;

    if (fp32) { // 16-bit rows in or out go through the fp32 scratch
        float *f = (float *)(cg->dev + cg->o_f32), *fo = (float *)(cg->dev + cg->o_f32o);
        if (out16 && res) {
            return common_err_set(err, COMMON_BUG, "%s: fp32 residual into 16-bit rows", op->name);
        }
        if (in16) {
            OP_CUDA(cuda_to_float<T>((const T *)x, (size_t)m * k, f, cg->st));
            x = f;
        }
        void *yf = out16 ? (void *)fo : y;
        if (cuda_gemm_run_ldx(&cg->gemm32, cg_ptr(cg, op->w[0]), x, cols_of(g, op->src[0]), yf,
                              out16 ? n : ldy, bias, res, m, n, k, epi, cg->st, err) != 0)
            return err->code;
        if (post_act >= 0) OP_CUDA(cuda_act_f32((float *)yf, (size_t)m * n, post_act, cg->st));
        if (out16) { // the prelude's relative keys / queries, read by 16-bit attention
            if (ldy != n) {
                return common_err_set(err, COMMON_BUG, "%s: 16-bit output of an fp32 projection",
                                      op->name);
            }
            OP_CUDA(cuda_convert<T>(fo, (size_t)m * n, (T *)y, cg->st));
        }
        return COMMON_OK;
    }
    // bf16's fp32 residual stream (gpu/cuda/layout.c): a 16-bit linear reads it rounded to
    // bf16 (FP8 quantizes the fp32 rows themselves) and adds into it from a 16-bit result.
    int ldx = cols_of(g, op->src[0]), type = cg->t16 == CG_BF16 ? CUDA_GEMM_BF16 : CUDA_GEMM_FP16;
    T *x16 = (T *)(cg->dev + cg->o_x16), *y16 = x16 + cg->x16_elems;
    void *yg = y;
    int ldyg = ldy;
    // fp32 input is converted / quantized as one block; fp32 output is written from one block:
    // only that side must be whole rows (the last layer's kv writes 16-bit columns of qkv).
    if ((!in16 && ldx != k) || (!out16 && ldy != n)) {
        return common_err_set(err, COMMON_BUG, "%s: fp32 rows of a 16-bit linear must be whole",
                              op->name);
    }
    if (!in16 && op->prec == GPU_PREC_FP8) {
        type = CUDA_GEMM_FP32;
    } else if (!in16) { // rounded once per writer of the rows (x16_of)
        if (cg->x16_of != op->src[0].t)
            OP_CUDA(cuda_convert<T>((const float *)x, (size_t)m * k, x16, cg->st));
        cg->x16_of = op->src[0].t;
        x = x16;
    }
    if (!out16) // the product into 16-bit scratch, then into the fp32 rows
        yg = y16, ldyg = n, res = NULL;
    if (op->prec == GPU_PREC_FP8) {
        const int i = op >= g->op && op < g->op + g->n_ops ? (int)(op - g->op) : -1;
        // a static input scale (layout.h: fp8_static) is in the weights' scales: ones per token
        const float s_in = i >= 0 ? cg->fp8_static[i] : 0.f;
        const float s_out = i >= 0 && i + 1 < g->n_ops ? cg->fp8_static[i + 1] : 0.f;
        uint8_t *xq = cg->xq_for == op ? cg->xq_at : (uint8_t *)(cg->dev + cg->o_xq);
        float *xs = (float *)(cg->dev + (s_in > 0.f ? cg->o_ones : cg->o_xs));
        const uint8_t *wq = (const uint8_t *)cg_ptr(cg, op->w[0]);
        const float *wsc = (const float *)(cg->dev + cg->t[op->w[0]].scale_at);
        if (cg->xq_for != op && s_in > 0.f) { // unless the op before wrote them
            if (!in16 || ldx != k) {
                return common_err_set(err, COMMON_BUG,
                                      "%s: a static FP8 input must be whole 16-bit rows", op->name);
            }
            OP_CUDA(cuda_fp8_quantize_static(x, type, (size_t)m * k, gpu_fp8_pow2_inv(s_in), xq,
                                             cg->st));
        } else if (cg->xq_for != op) {
            OP_CUDA(cuda_fp8_quantize_rows(x, type, m, k, xq, xs, cg->st));
        }
        cg->xq_for = NULL;
        // The next op's static input: this GEMM writes its codes (e4m3(v / s)) into the first
        // m n bytes of its own 16-bit output rows, which only that op reads; C's layout points
        // past them (beta 0: never read). Where cuBLASLt refuses, 16-bit rows as below.
        if (s_out > 0.f && out16 && ldyg == n && !res && post_act < 0 &&
            cuda_fp8_gemm_run_q(
                &cg->gemm8, wq, wsc, xq, xs, (uint8_t *)y, (const char *)y + (size_t)m * n,
                (const float *)(cg->dev + cg->o_sinv) + i + 1, bias, m, n, k, epi, cg->st) == 0) {
            cg->xq_for = op + 1, cg->xq_at = (uint8_t *)y;
            return COMMON_OK;
        }
        if (cuda_fp8_gemm_run(&cg->gemm8, wq, wsc, xq, xs, yg, ldyg, bias, res, m, n, k, epi,
                              cg->st, err) != 0)
            return err->code;
    } else if (cuda_gemm_run_ldx(&cg->gemm, cg_ptr(cg, op->w[0]), x, in16 ? ldx : k, yg, ldyg, bias,
                                 res, m, n, k, epi, cg->st, err) != 0) {
        return err->code;
    }
    if (!out16) {
        if (post_act >= 0 || op->epi == GPU_EPI_GLU) {
            return common_err_set(err, COMMON_BUG, "%s: an activation into fp32 rows", op->name);
        }
        if (ln) { // the sum's LayerNorm into the fp32 rows and their rounding into x16
            T *xo = (size_t)m * n <= cg->x16_elems ? x16 : (T *)NULL;
            OP_CUDA((cuda_add_ln<T, float>(y16, (const float *)y, (const float *)wptr(cg, ln->w[0]),
                                           (const float *)wptr(cg, ln->w[1]), m, n, ln->eps,
                                           (float *)y, xo, cg->sms, cg->st)));
            cg->x16_of = xo ? op->out.t : -1;
        } else if (op->epi == GPU_EPI_RESIDUAL)
            OP_CUDA(cuda_add_f32<T>(y16, (float *)y, (size_t)m * n, cg->st));
        else
            OP_CUDA(cuda_to_float<T>(y16, (size_t)m * n, (float *)y, cg->st));
        return COMMON_OK;
    }
    if (post_act >= 0) OP_CUDA(cuda_bias_act<T>((T *)y, (const T *)NULL, m, n, post_act, cg->st));
    if (op->epi == GPU_EPI_GLU) OP_CUDA(cuda_geglu<T>((T *)y, m, n / 2, op->act, cg->st));
    return COMMON_OK;
}

template <typename T>
static common_status_t op_attention(cuda_graph_t *cg, const gpu_op_t *op, int nt, int ns,
                                    int max_len, common_err_t *err) {
    const gpu_graph_t *g = cg->g;
    const int heads = op->heads, hd = op->head_dim, C = heads * hd, ld = cols_of(g, op->src[1]);
    const int first = g->tensor[op->out.t].rows_kind == GPU_ROWS_SEQS;
    const int rel = op->w[0] >= 0, q_tiles = first ? 1 : (max_len + 63) / 64;
    // RoPE: keys turn in place before the kernel runs, queries in the kernel as it loads them
    // (one read and write of Q fewer); global RoPE layers take BERT's kernels with that turn
    const int extras = rel || op->window > 0;
    T *q = (T *)vptr(cg, op->src[0]), *k = (T *)vptr(cg, op->src[1]);
    const T *v = (const T *)vptr(cg, op->src[2]);
    T *out = (T *)vptr(cg, op->out);
    int ldq = cols_of(g, op->src[0]), ldo = cols_of(g, op->out);
    const float scale =
        1.f / sqrtf((float)hd * (float)(op->scale_factor > 1 ? op->scale_factor : 1));
    if (ns <= 0) return COMMON_OK;
    const int plain_scale = fabsf(scale - 0.125f) < 1e-7f; // what BERT's kernels have built in
    const float *rope = NULL; // the table the kernel turns the queries by, NULL: none
    if (op->rope_theta > 0.f) {
        const int r = cg_rope_slot(cg, op->rope_theta);
        if (r < 0) {
            return common_err_set(err, COMMON_BUG, "%s: no RoPE table for theta %g", op->name,
                                  op->rope_theta);
        }
        const float *tab =
            (const float *)(cg->dev + cg->o_rope) + (size_t)r * cg->max_len * cg->rope_dim;
        // first-token queries sit at position 0: no turn; c2p reads the queries themselves
        OP_CUDA(cuda_rope<T>(rel && !first ? q : (T *)NULL, ldq, k, ld, in_pos(cg), nt, heads, hd,
                             tab, cg->st));
        rope = first || rel ? NULL : tab;
    }
    if (first && !extras && plain_scale) { // the one-query kernel: each sequence's first token
        OP_CUDA(cuda_attention_first<T>(q, ldq, k, v, ld, in_cu(cg), ns, heads, out, ldo, cg->st));
        return COMMON_OK;
    }
    T *qa = (T *)(cg->dev + cg->o_att), *oa = qa + (size_t)cg->token_budget * cg->att_cols;
    if (first) { // queries back among the tokens, the full kernel on each first tile
        OP_CUDA(cuda_scatter_rows<T>(q, in_cu(cg), ns, C, qa, C, cg->st));
        q = qa, ldq = C;
    }
    cuda_att_opts_t<T> o = {};
    o.scale = scale, o.window = op->window > 0 ? op->window : -1, o.heads = heads, o.ldq = ldq;
    o.wgmma = cg->att_wgmma, o.rope = rope, o.pos = in_pos(cg), o.rope_dim = cg->rope_dim;
    if (rel) {
        T *c2p = (T *)(cg->dev + cg->o_rel), *p2c = c2p + cg->rel_elems;
        const int R = g->tensor[op->w[0]].rows;
        if (cuda_rel_scores<T>(&cg->rel, q, ldq, nt, (const T *)cg_ptr(cg, op->w[0]), R, heads, hd,
                               c2p, cg->st) != 0 ||
            cuda_rel_scores<T>(&cg->rel, k, ld, nt, (const T *)cg_ptr(cg, op->w[1]), R, heads, hd,
                               p2c, cg->st) != 0) {
            return common_err_set(err, COMMON_FATAL, "%s: cuBLASLt relative scores failed",
                                  op->name);
        }
        o.c2p = c2p, o.p2c = p2c, o.rrow = (const int32_t *)(cg->dev + cg->o_rrow);
        o.rrow_mid = cg->rrow_mid, o.R = R;
    }
    if (!extras && !rope && ldq == ld && plain_scale) // BERT's: wgmma where it runs
        OP_CUDA(cuda_attention<T>(q, k, v, ld, in_cu(cg), ns, heads, q_tiles, first ? oa : out,
                                  first ? C : ldo, cg->att_wgmma, cg->st));
    else
        OP_CUDA(cuda_attention_opts<T>(q, k, v, ld, in_cu(cg), ns, heads, q_tiles, first ? oa : out,
                                       first ? C : ldo, &o, cg->st));
    if (first) {
        if (ldo != C) {
            return common_err_set(err, COMMON_BUG, "%s: first-token output must be whole rows",
                                  op->name);
        }
        OP_CUDA(cuda_gather_rows<T>(oa, in_cu(cg), ns, C, out, cg->st));
    }
    return COMMON_OK;
}

template <typename T>
static common_status_t op_pool(cuda_graph_t *cg, const gpu_op_t *op, int ns, common_err_t *err) {
    const int sdt = cg->t[op->src[0].t].dt, odt = cg->t[op->out.t].dt;
    const int lds = cols_of(cg->g, op->src[0]), n = op->n;
    const char *src = vptr(cg, op->src[0]);
    char *out = vptr(cg, op->out);
    float *f = (float *)(cg->dev + cg->o_f32);
    if (op->pool == GPU_POOL_CLS) { // first rows, converted where the storage types differ
        if (sdt == odt && sdt == CG_F32)
            OP_CUDA(cuda_first_rows<float>((const float *)src, lds, in_cu(cg), ns, n, (float *)out,
                                           cg->st));
        else if (sdt == odt)
            OP_CUDA(cuda_first_rows<T>((const T *)src, lds, in_cu(cg), ns, n, (T *)out, cg->st));
        else if (sdt == CG_F32) {
            OP_CUDA(cuda_first_rows<float>((const float *)src, lds, in_cu(cg), ns, n, f, cg->st));
            OP_CUDA(cuda_convert<T>(f, (size_t)ns * n, (T *)out, cg->st));
        } else {
            T *o16 = (T *)(cg->dev + cg->o_f32); // (seqs, n) 16-bit fits the fp32 scratch
            OP_CUDA(cuda_first_rows<T>((const T *)src, lds, in_cu(cg), ns, n, o16, cg->st));
            OP_CUDA(cuda_to_float<T>(o16, (size_t)ns * n, (float *)out, cg->st));
        }
        return COMMON_OK;
    }
    float *mean = odt == CG_F32 ? (float *)out : f;
    if (sdt == CG_F32)
        OP_CUDA(cuda_mean_pool<float>((const float *)src, lds, in_cu(cg), ns, n, mean, cg->st));
    else
        OP_CUDA(cuda_mean_pool<T>((const T *)src, lds, in_cu(cg), ns, n, mean, cg->st));
    if (odt != CG_F32) OP_CUDA(cuda_convert<T>(mean, (size_t)ns * n, (T *)out, cg->st));
    return COMMON_OK;
}

template <typename T>
static common_status_t op_run(cuda_graph_t *cg, const gpu_op_t *op, const gpu_op_t *ln, int nt,
                              int ns, int max_len, common_err_t *err) {
    const int m = rows_of(cg, op->out.t, nt, ns);
    switch (op->kind) {
    case GPU_OP_EMBED:
        return op_embed<T>(cg, op, nt, err);
    case GPU_OP_NORM:
        return op_norm<T>(cg, op, m, err);
    case GPU_OP_LINEAR:
        return op_linear<T>(cg, op, ln, m, err);
    case GPU_OP_ATTENTION:
        return op_attention<T>(cg, op, nt, ns, max_len, err);
    case GPU_OP_POOL:
        return op_pool<T>(cg, op, ns, err);
    default:
        return common_err_set(err, COMMON_BUG, "%s: unknown op kind %d", op->name, (int)op->kind);
    }
}

// ln when it runs fused into op: a LayerNorm in place on the whole fp32 rows that op, a
// 16-bit residual projection, has just added its product into (bf16's residual stream: the
// hand-written path's one pass for the sum, its norm and its bf16 rounding). NULL otherwise.
static const gpu_op_t *fused_norm(const cuda_graph_t *cg, const gpu_op_t *op, const gpu_op_t *ln) {
    const gpu_graph_t *g = cg->g;
    if (op->kind != GPU_OP_LINEAR || op->epi != GPU_EPI_RESIDUAL || op->prec == GPU_PREC_FP32 ||
        cg->t[op->out.t].dt != CG_F32 || !contiguous(g, op->out, op->n))
        return NULL;
    if (ln->kind != GPU_OP_NORM || ln->w[0] < 0 || ln->n != op->n || ln->src[0].t != op->out.t ||
        ln->out.t != op->out.t || ln->src[0].col != 0 || ln->out.col != 0)
        return NULL;
    return cg->t16 == CG_BF16 || cg->t16 == CG_F16 ? ln : NULL;
}

static common_status_t op_dispatch(cuda_graph_t *cg, const gpu_op_t *op, const gpu_op_t *ln, int nt,
                                   int ns, int max_len, common_err_t *err) {
    // an op that writes the rows x16 holds leaves their rounding stale
    if (op->out.t >= 0 && op->out.t == cg->x16_of) cg->x16_of = -1;
    return cg->t16 == CG_BF16 ? op_run<__nv_bfloat16>(cg, op, ln, nt, ns, max_len, err)
                              : op_run<__half>(cg, op, ln, nt, ns, max_len, err);
}

common_status_t cuda_graph_op(cuda_graph_t *cg, const gpu_op_t *op, int nt, int ns, int max_len,
                              common_err_t *err) {
    return op_dispatch(cg, op, NULL, nt, ns, max_len, err);
}

int cuda_graph_step(cuda_graph_t *cg, int i, int nt, int ns, int max_len, common_err_t *err) {
    const gpu_op_t *op = &cg->g->op[i];
    const gpu_op_t *ln = i + 1 < cg->g->n_ops ? fused_norm(cg, op, &cg->g->op[i + 1]) : NULL;
    if (op_dispatch(cg, op, ln, nt, ns, max_len, err) != 0) return -1;
    return i + (ln ? 2 : 1);
}
