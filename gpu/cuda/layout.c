/* The CUDA graph's device layout and the ops its launchers take (gpu/cuda/layout.h): plain
 * C, in every build. */
#include "gpu/cuda/layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/backend.h"
#include "gpu/cuda/cuda_backend.h"

static int cols_of(const gpu_graph_t *g, gpu_view_t v) {
    return g->tensor[v.t].cols;
}
static int contiguous(const gpu_graph_t *g, gpu_view_t v, int n) { /* the whole rows of n */
    return v.t >= 0 && v.col == 0 && g->tensor[v.t].cols == n;
}

int cuda_graph_supports_op(const gpu_graph_t *g, const gpu_op_t *op) {
    if (op->prec == GPU_PREC_FP8 && op->kind != GPU_OP_LINEAR) return 0;
    switch (op->kind) {
    case GPU_OP_EMBED:
        return op->n % 8 == 0 && op->n <= 1024 && op->w[3] >= 0 && contiguous(g, op->out, op->n);
    case GPU_OP_NORM:
        return op->n % 8 == 0 && op->n <= 1024 && contiguous(g, op->out, op->n) &&
               contiguous(g, op->src[0], op->n);
    case GPU_OP_LINEAR:
        if (op->k % (op->prec == GPU_PREC_FP8 ? 16 : 8) != 0) return 0;
        if (op->prec != GPU_PREC_FP32 && op->n % 8 != 0) return 0;
        if ((op->prec == GPU_PREC_FP32 || op->prec == GPU_PREC_FP8) &&
            !contiguous(g, op->src[0], op->k))
            return 0; /* converted or quantized as whole rows */
        if (op->epi == GPU_EPI_GLU) return contiguous(g, op->out, op->n) && op->n % 16 == 0;
        if (op->epi == GPU_EPI_ACT && (op->prec == GPU_PREC_FP32 || op->act == GPU_ACT_TANH))
            return contiguous(g, op->out, op->n); /* a pass of its own over the rows */
        return 1;
    case GPU_OP_ATTENTION:
        if (op->head_dim != 64 || (op->w[0] >= 0) != (op->w[1] >= 0)) return 0;
        if (cols_of(g, op->src[1]) != cols_of(g, op->src[2]) || cols_of(g, op->src[1]) % 8)
            return 0;
        if (g->tensor[op->out.t].rows_kind == GPU_ROWS_SEQS) /* whole rows, scattered, gathered */
            return contiguous(g, op->src[0], op->heads * 64) &&
                   contiguous(g, op->out, op->heads * 64);
        return cols_of(g, op->src[0]) % 8 == 0;
    case GPU_OP_POOL:
        return contiguous(g, op->out, op->n);
    default:
        return 0;
    }
}

static size_t up(size_t n) {
    return (n + CG_ALIGN - 1) / CG_ALIGN * CG_ALIGN;
}

static void set_dt(cg_layout_t *cg, int t, int dt) {
    if (t >= 0) cg->t[t].dt = dt;
}

/* The storage type of every tensor (see the file comment): fp32 where the graph says so, the
 * logits, and what an fp32 linear (the head) writes; the rest 16-bit. */
static void decide_types(cg_layout_t *cg, const gpu_graph_t *g, int t16) {
    for (int i = 0; i < g->n_tensors; i++)
        cg->t[i].dt = g->tensor[i].fp32 || g->tensor[i].cls == GPU_TENSOR_LOGITS ? CG_F32 : t16;
    for (int pass = 0; pass < 2; pass++) {
        const gpu_op_t *ops = pass ? g->op : g->prelude;
        const int n = pass ? g->n_ops : g->n_prelude;
        for (int i = 0; i < n; i++) {
            const gpu_op_t *o = &ops[i];
            if (o->kind == GPU_OP_LINEAR && o->prec == GPU_PREC_FP32) set_dt(cg, o->out.t, CG_F32);
            /* bf16 keeps the residual stream in fp32 (bf16's 8-bit mantissa would round the
             * residual sum every layer) */
            if (o->kind == GPU_OP_LINEAR && o->epi == GPU_EPI_RESIDUAL && t16 == CG_BF16)
                set_dt(cg, o->out.t, CG_F32);
            if (o->prec == GPU_PREC_FP32 && o->src[0].t >= 0 &&
                g->tensor[o->src[0].t].cls == GPU_TENSOR_WEIGHT)
                set_dt(cg, o->src[0].t, CG_F32); /* DeBERTa's relative embeddings */
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
            case GPU_OP_ATTENTION: /* the prelude's fp32 linears convert into these */
                set_dt(cg, o->w[0], t16), set_dt(cg, o->w[1], t16);
                break;
            default:
                break;
            }
        }
    }
}

/* The RoPE table of op's theta (added at its first op); -1 with err past CG_ROPE_THETAS
 * thetas or for a head size unlike the others'. */
int cg_rope_slot(const cg_layout_t *cg, float theta) {
    for (int i = 0; i < cg->n_rope; i++)
        if (cg->rope_theta[i] == theta) return i;
    return -1;
}
static int rope_slot(cg_layout_t *cg, const gpu_op_t *o, common_err_t *err) {
    int i = cg_rope_slot(cg, o->rope_theta);
    if (i >= 0 && cg->rope_dim == o->head_dim) return i;
    if (i < 0 && cg->n_rope < CG_ROPE_THETAS && (cg->n_rope == 0 || cg->rope_dim == o->head_dim)) {
        cg->rope_dim = o->head_dim;
        cg->rope_theta[cg->n_rope] = o->rope_theta;
        return cg->n_rope++;
    }
    common_err_set(err, COMMON_USAGE, "%s: more than %d RoPE thetas or head sizes that differ",
                   o->name, CG_ROPE_THETAS);
    return -1;
}

common_status_t cuda_graph_layout(cg_layout_t *cg, const gpu_graph_t *g, int t16, int token_budget,
                                  int max_seqs, int max_len, common_err_t *err) {
    cg->g = g, cg->t16 = t16;
    cg->token_budget = token_budget, cg->max_seqs = max_seqs, cg->max_len = max_len;
    cg->t = calloc((size_t)g->n_tensors, sizeof(cg_tensor_t));
    if (!cg->t) {
        return common_err_set(err, COMMON_FATAL, "out of host memory for the graph's layout");
    }
    decide_types(cg, g, t16);
    size_t at = 0;
    size_t *bytes = calloc((size_t)g->n_tensors + 1, sizeof(size_t));
    size_t *off = calloc((size_t)g->n_tensors + 1, sizeof(size_t));
    for (int pass = 0; bytes && off && pass < 2; pass++) /* weights, then consts and logits */
        for (int i = 0; i < g->n_tensors; i++) {
            const gpu_tensor_t *x = &g->tensor[i];
            if ((x->cls == GPU_TENSOR_WEIGHT) != (pass == 0)) continue;
            cg_tensor_t *t = &cg->t[i];
            const size_t rows = gpu_graph_rows(g, i, token_budget, max_seqs);
            t->bytes = rows * (size_t)x->cols * cg_dt_bytes(t->dt);
            if (x->cls == GPU_TENSOR_ACT) { /* placed below, by their live ranges */
                bytes[i] = t->bytes, off[i] = (size_t)-1;
                continue;
            }
            t->off = at;
            at += up(t->bytes);
            if (t->dt == CG_E4M3) {
                t->scale_at = at;
                at += up(rows * sizeof(float));
            }
            if (pass == 0) cg->weights_bytes = at;
        }
    /* The activations: one region, a buffer reused once its last reader ran (gpu/graph.h). */
    size_t acts = 0;
    if (!bytes || !off || gpu_graph_place(g, bytes, off, &acts) != 0) {
        free(bytes), free(off);
        return common_err_set(err, COMMON_FATAL, "out of host memory for the graph's layout");
    }
    for (int i = 0; i < g->n_tensors; i++)
        if (g->tensor[i].cls == GPU_TENSOR_ACT) cg->t[i].off = at + (bytes[i] ? off[i] : 0);
    cg->o_act = at, cg->act_bytes = acts;
    at += up(acts);
    free(bytes), free(off);
    /* Scratch, sized by the ops that need it. */
    const size_t T = (size_t)token_budget, ta = (T + 3) & ~(size_t)3;
    size_t f32 = 0, f32o = 0, x16 = 0, y16 = 0, att = 0, rel = 0, xq = 0, R = 0, zero = 0;
    int need_rrow = 0;
    for (int pass = 0; pass < 2; pass++) {
        const gpu_op_t *ops = pass ? g->op : g->prelude;
        const int n = pass ? g->n_ops : g->n_prelude;
        for (int i = 0; i < n; i++) {
            const gpu_op_t *o = &ops[i];
            const size_t rows =
                o->out.t >= 0 ? gpu_graph_rows(g, o->out.t, token_budget, max_seqs) : 0;
            /* the zero row stands in for an absent bias, norm gain or beta (fp32 widest) */
            const int absent = (o->kind == GPU_OP_LINEAR && o->w[1] < 0) ||
                               (o->kind == GPU_OP_NORM && o->w[0] >= 0 && o->w[1] < 0) ||
                               (o->kind == GPU_OP_EMBED && (o->w[3] < 0 || o->w[4] < 0));
            if (absent && (size_t)o->n > zero) zero = (size_t)o->n;
            if (o->kind == GPU_OP_LINEAR && o->prec == GPU_PREC_FP32 &&
                cg->t[o->src[0].t].dt != CG_F32 && rows * o->k > f32)
                f32 = rows * o->k;
            if (o->kind == GPU_OP_LINEAR && o->prec == GPU_PREC_FP32 &&
                cg->t[o->out.t].dt != CG_F32 && rows * o->n > f32o)
                f32o = rows * o->n;
            if (o->kind == GPU_OP_NORM && cg->t[o->src[0].t].dt == CG_F32 &&
                cg->t[o->out.t].dt != CG_F32 && rows * o->n > f32o)
                f32o = rows * o->n;
            const int pool_conv =
                o->kind == GPU_OP_POOL &&
                (o->pool == GPU_POOL_MEAN ? cg->t[o->out.t].dt != CG_F32
                                          : cg->t[o->src[0].t].dt != cg->t[o->out.t].dt);
            if (pool_conv && rows * o->n > f32) /* means, first rows converted */
                f32 = rows * o->n;
            if (o->kind == GPU_OP_LINEAR && o->prec == GPU_PREC_FP8 && (size_t)o->k > xq)
                xq = (size_t)o->k;
            if (o->kind == GPU_OP_LINEAR && o->prec != GPU_PREC_FP32) {
                if (cg->t[o->src[0].t].dt == CG_F32 && rows * o->k > x16) x16 = rows * o->k;
                if (cg->t[o->out.t].dt == CG_F32 && rows * o->n > y16) y16 = rows * o->n;
            }
            if (o->kind != GPU_OP_ATTENTION) continue;
            if (o->rope_theta > 0.f && rope_slot(cg, o, err) < 0) return err->code;
            const size_t cols = (size_t)o->heads * o->head_dim;
            const int extras = o->w[0] >= 0 || o->window > 0 || o->rope_theta > 0.f;
            /* first-token queries with extras run the full kernel on the token rows */
            if (g->tensor[o->out.t].rows_kind == GPU_ROWS_SEQS && extras && cols > att) att = cols;
            if (o->w[0] >= 0 || o->w[1] >= 0) {
                const int rt = o->w[0] >= 0 ? o->w[0] : o->w[1];
                need_rrow = 1;
                cg->rel_op = o; /* every layer's op has the model's one rule */
                if ((size_t)g->tensor[rt].rows > R) R = (size_t)g->tensor[rt].rows;
                if (T * o->heads * R > rel) rel = T * o->heads * R;
            }
        }
    }
    cg->o_in = at, cg->in_bytes = (2 * ta + (size_t)max_seqs + 1) * 4, at += up(cg->in_bytes);
    cg->rrow_mid = max_len - 1;
    cg->o_rrow = at, at += need_rrow ? up((size_t)(2 * max_len - 1) * 4) : 0;
    cg->o_zero = at, cg->zero_bytes = zero * 4, at += up(cg->zero_bytes);
    cg->o_f32 = at, cg->f32_floats = f32, at += up(f32 * 4);
    cg->o_f32o = at, cg->f32o_floats = f32o, at += up(f32o * 4);
    cg->o_x16 = at, cg->x16_elems = up(x16), cg->y16_elems = y16, at += up(up(x16) * 2 + y16 * 2);
    cg->o_att = at, cg->att_cols = att, at += 2 * up(T * att * 2); /* queries, outputs */
    cg->o_rel = at, cg->rel_elems = rel, at += 2 * up(rel * 2);    /* c2p, p2c */
    cg->o_xq = at, cg->xq_cols = xq, at += up(T * xq);
    cg->o_xs = at, at += xq ? up(T * 4) : 0;
    int n_static = 0;
    cg->fp8_static = calloc((size_t)g->n_ops + 1, sizeof(float));
    if (!cg->fp8_static) {
        return common_err_set(err, COMMON_FATAL, "out of host memory for the graph's layout");
    }
    for (int i = 0; i < g->n_ops; i++)
        n_static += (cg->fp8_static[i] = gpu_graph_fp8_static_scale(g, i)) > 0.0f;
    cg->o_ones = at, at += n_static ? up(T * 4) : 0;
    cg->o_sinv = at, at += n_static ? up((size_t)g->n_ops * 4) : 0;
    cg->o_rope = at, at += up((size_t)cg->n_rope * max_len * cg->rope_dim * 4);
    cg->o_ws = at, cg->ws_bytes = CG_WS_BYTES, at += CG_WS_BYTES;
    cg->total_bytes = at;
    return COMMON_OK;
}

void cg_layout_free(cg_layout_t *cg) {
    free(cg->t);
    free(cg->fp8_static);
    cg->t = NULL;
    cg->fp8_static = NULL;
}

common_status_t cuda_graph_plan(const gpu_model_config_t *cfg, gpu_precision_t prec,
                                int token_budget, int max_seqs, int max_len, gpu_graph_t **g,
                                cg_layout_t *cg, common_err_t *err) {
    memset(cg, 0, sizeof *cg);
    *g = NULL;
    if (prec == GPU_PREC_FP32) {
        return common_err_set(err, COMMON_FATAL, "precision fp32 is not one of the cuda backend's");
    }
    if (gpu_graph_build(cfg, NULL, prec, GPU_PREC_FP16, g, err) != 0) return err->code;
    if (gpu_graph_check(*g, "cuda", cuda_graph_supports_op, err) != 0 ||
        cuda_graph_layout(cg, *g, prec == GPU_PREC_BF16 ? CG_BF16 : CG_F16, token_budget, max_seqs,
                          max_len, err) != 0) {
        cg_layout_free(cg);
        gpu_graph_free(*g);
        *g = NULL;
        return err->code;
    }
    return COMMON_OK;
}

common_status_t gpu_cuda_graph_plan(const gpu_model_config_t *cfg, const char *precision,
                                    int token_budget, int max_seqs, int max_len,
                                    size_t *weights_bytes, size_t *total_bytes, common_err_t *err) {
    gpu_precision_t p;
    if (gpu_precision_parse(precision, &p) != 0) {
        return common_err_set(err, COMMON_FATAL, "precision '%s' is not one of the cuda backend's",
                              precision);
    }
    if (max_len <= 0 || max_len > cfg->max_pos) max_len = cfg->max_pos; /* as settle does */
    gpu_graph_t *g = NULL;
    cg_layout_t cg;
    if (cuda_graph_plan(cfg, p, token_budget, gpu_backend_max_seqs(token_budget, max_seqs), max_len,
                        &g, &cg, err) != 0)
        return err->code;
    *weights_bytes = cg.weights_bytes, *total_bytes = cg.total_bytes;
    cg_layout_free(&cg);
    gpu_graph_free(g);
    return COMMON_OK;
}
