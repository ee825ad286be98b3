/* Where the CUDA backend's graph tensors live on the device, and what they are stored as
 * (plain C: `reclass plan-memory` prints it in every build, without a device). Decided once
 * from the op list: a weight takes the type of the ops that read it, an activation that of
 * the op that writes it; then weights, consts, logits, the activations (sharing bytes by
 * their live ranges, gpu_graph_place) and the scratch the ops need, in the backend's one
 * allocation. The executor (gpu/cuda/cuda_graph.cuh) runs on this layout. */
#ifndef RECLASS_GPU_CUDA_LAYOUT_H
#define RECLASS_GPU_CUDA_LAYOUT_H

#include <stddef.h>

#include "gpu/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Storage types of the graph's tensors on the device. */
enum { CG_F32, CG_F16, CG_BF16, CG_E4M3 };

#define CG_ALIGN       256
#define CG_WS_BYTES    (32u << 20) /* cuBLASLt workspace, shared by every GEMM: one stream */
#define CG_ROPE_THETAS 4           /* distinct RoPE thetas of one graph (ModernBERT: 2) */

typedef struct {
    int dt;          /* CG_*: weights read by an FP8 linear are CG_E4M3 codes */
    size_t off;      /* bytes from the allocation's start */
    size_t bytes;    /* 0 for a tensor no op touches */
    size_t scale_at; /* CG_E4M3: offset of its per-row scales (rows floats) */
} cg_tensor_t;

typedef struct cg_layout {
    const gpu_graph_t *g; /* borrowed */
    cg_tensor_t *t;       /* (g->n_tensors) */
    int t16;              /* CG_F16 or CG_BF16: the 16-bit storage of this instance */
    int token_budget, max_seqs, max_len;
    /* The allocation: weights, consts and logits, activations, then scratch. */
    size_t weights_bytes, total_bytes;
    size_t o_act, act_bytes; /* the activations' region (gpu_graph_place) */
    size_t o_in;             /* int32 inputs: ids (ta), positions (ta), cu_seqlens (max_seqs + 1) */
    size_t in_bytes;         /* of o_in; ta = token_budget rounded up to 4 */
    size_t o_rrow; /* int32 (2 max_len - 1): DeBERTa's relative row of i - j, at i - j + mid */
    size_t o_zero; /* zero fp32/16-bit row (zero_bytes): absent biases and norm betas */
    size_t zero_bytes;
    size_t o_f32; /* fp32 (f32_floats): an fp32 op's 16-bit input, converted; mean rows */
    size_t f32_floats;
    size_t o_f32o; /* fp32 (f32o_floats): fp32 results bound for a 16-bit tensor */
    size_t f32o_floats;
    size_t o_x16;     /* 16-bit (x16_elems) + (y16_elems): a 16-bit linear's fp32 input rounded, */
    size_t x16_elems; /* and its output bound for fp32 rows (bf16's residual stream) */
    size_t y16_elems;
    size_t o_att; /* 16-bit (tokens, att_cols): first-token attention's full-kernel rows */
    size_t att_cols;
    size_t o_rel;      /* 16-bit 2 x (tokens, heads, R): c2p and p2c products of one layer */
    size_t rel_elems;  /* of each */
    size_t o_xq, o_xs; /* FP8 activations: E4M3 (tokens, xq_cols), per-row scales (tokens) */
    size_t xq_cols;
    /* FP8 linears whose input has a static scale (gpu_graph_fp8_static_scale; BERT's FFN-out):
     * fp8_static (n_ops, host) that scale of each batch op, 0 for a per-token input; o_ones fp32
     * (tokens) ones, their per-token scales (the static one is folded into their weights'
     * scales, exactly: a power of two); o_sinv fp32 (n_ops) 1 / fp8_static, the D scale of the
     * producer's GEMM when it writes the codes itself */
    float *fp8_static;
    size_t o_ones, o_sinv;
    size_t o_ws, ws_bytes; /* cuBLASLt workspace */
    int rrow_mid;
    const gpu_op_t *rel_op; /* an attention op with relative rows (the rule of o_rrow), or NULL */
    /* fp32 (n_rope, max_len, rope_dim / 2, 2): RoPE's cos and sin of every position and
     * frequency, one table per theta (rope_theta[i]), made once at setup */
    size_t o_rope;
    int n_rope, rope_dim;
    float rope_theta[CG_ROPE_THETAS];
} cg_layout_t;

/* Storage types and offsets of every tensor and scratch slice of g for a batch capacity.
 * t16: CG_F16 or CG_BF16. COMMON_OK, or err's code (out of host memory, RoPE tables).
 * cg_layout_free releases cg->t. */
common_status_t cuda_graph_layout(cg_layout_t *cg, const gpu_graph_t *g, int t16, int token_budget,
                                  int max_seqs, int max_len, common_err_t *err);
void cg_layout_free(cg_layout_t *cg);
/* The RoPE table (o_rope) of theta: its index, -1 none. */
int cg_rope_slot(const cg_layout_t *cg, float theta);

/* 1 when the CUDA launchers (gpu/cuda/cuda_graph_ops.cu) take op of g: the backend table's
 * supports_op. */
int cuda_graph_supports_op(const gpu_graph_t *g, const gpu_op_t *op);

/* The cuda backend's graph of cfg at prec (no weights) into *g, checked against its
 * launchers (err names the first op they lack), and its layout into *cg for that capacity
 * (max_seqs and max_len as gpu_backend_settle makes them). COMMON_OK, or err's code; on success the
 * caller frees both (cg_layout_free, gpu_graph_free). */
common_status_t cuda_graph_plan(const gpu_model_config_t *cfg, gpu_precision_t prec,
                                int token_budget, int max_seqs, int max_len, gpu_graph_t **g,
                                cg_layout_t *cg, common_err_t *err);

static inline size_t cg_dt_bytes(int dt) {
    return dt == CG_F32 ? 4 : dt == CG_E4M3 ? 1 : 2;
}

#ifdef __cplusplus
}
#endif
#endif
