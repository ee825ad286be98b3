/* The CUDA backend's device memory plan, in plain C (no CUDA): from the model geometry, the
 * token budget, the longest sequence and the most sequences a batch may hold, the exact
 * bytes of every device buffer. The backend allocates the total once and carves these
 * slices out of it; `reclass plan-memory` prints the same numbers without a GPU. */
#ifndef RECLASS_GPU_PLAN_H
#define RECLASS_GPU_PLAN_H

#include <stddef.h>

#include "gpu/model/model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GPU_PLAN_ALIGN           256 /* every slice starts on this boundary (cuBLASLt likes 256) */
#define GPU_PLAN_WORKSPACE_BYTES (32u << 20) /* cuBLASLt workspace, as NVIDIA advises on Hopper */

/* Slices in arena order: weights first, then activations. */
typedef enum {
    GPU_PLAN_WORD_EMB,   /* (vocab, E) storage type; E = emb_size (H but for ELECTRA) */
    GPU_PLAN_POS_EMB,    /* (max_pos, E) storage type, from the family's position offset */
    GPU_PLAN_TYPE_EMB,   /* (E) storage type: token type 0 only (zeros for DistilBERT) */
    GPU_PLAN_EMB_LN,     /* (2, E) fp32 gamma, beta */
    GPU_PLAN_EMB_PROJ_W, /* (H, E) storage type: ELECTRA's projection; 0 bytes when E == H */
    GPU_PLAN_EMB_PROJ_B, /* (H) storage type; 0 bytes when E == H */
    GPU_PLAN_LAYERS,     /* (layers) x layer_bytes, see gpu_plan_layer_t */
    GPU_PLAN_POOL_W,     /* (H, H) fp32: the head's dense (pooler, pre_classifier, classifier.dense)
                          * runs in fp32 (tiny, and it decides argmax) */
    GPU_PLAN_POOL_B,     /* (H) fp32 */
    GPU_PLAN_CLS_W,      /* (L, H) fp32 */
    GPU_PLAN_CLS_B,      /* (L) fp32 */
    GPU_PLAN_FAMILY_W,   /* ModernBERT: final and head norms (4, H) fp32; DeBERTa: the relative
                          * embeddings through each layer's K and Q, (layers, 2, 2 span, H)
                          * storage type; 0 bytes for the BERT families */
    GPU_PLAN_X,          /* (token_budget, H) hidden state, updated in place by each layer */
    GPU_PLAN_XR,         /* (token_budget, H) fp32 residual stream: bf16 only (0 bytes in fp16) */
    GPU_PLAN_CTX,        /* (token_budget, H) attention context, then the FFN output */
    GPU_PLAN_BIG,        /* QKV / attn-out / FFN inner; the last layer: gpu_plan_last_layer;
                          * before layer 0, ELECTRA's (tokens, E) embeddings (E <= H) */
    GPU_PLAN_REL,        /* DeBERTa: c2p and p2c products, (tokens, 2, heads, 2 span) storage
                          * type, gathered by the attention kernel; 0 bytes elsewhere */
    GPU_PLAN_INPUTS,     /* int32: ids (budget), positions (budget), cu_seqlens (max_seqs + 1) */
    GPU_PLAN_LOGITS,     /* (max_seqs, L) fp32 */
    GPU_PLAN_WORKSPACE,  /* cuBLASLt workspace */
    GPU_PLAN_XQ,         /* (token_budget, max(H, I)) E4M3: an FP8 projection's input, written by
                          * the kernel before it (LayerNorm, GELU epilogue); fp8 only */
    GPU_PLAN_XS,         /* (token_budget) fp32 per-token scales of XQ; fp8 only */
    GPU_PLAN_N
} gpu_plan_slice_id_t;

/* Offsets inside one layer's block (bytes from the layer's start). */
typedef enum {
    GPU_PLAN_L_QKV_W, /* (3H, H) rows q then k then v, storage type */
    GPU_PLAN_L_QKV_B, /* (3H) storage type */
    GPU_PLAN_L_AO_W,  /* (H, H) */
    GPU_PLAN_L_AO_B,  /* (H) */
    GPU_PLAN_L_LN1,   /* (2, H) fp32 */
    GPU_PLAN_L_FF1_W, /* (F, H), F = gpu_model_ff1_rows (2I for ModernBERT's GeGLU) */
    GPU_PLAN_L_FF1_B, /* (F) */
    GPU_PLAN_L_FF2_W, /* (H, I) */
    GPU_PLAN_L_FF2_B, /* (H) */
    GPU_PLAN_L_LN2,   /* (2, H) fp32 */
    /* fp8 (gpu/model/fp8.h): the per-output-channel fp32 scales of each projection that runs in
     * FP8 in some layer, 0 bytes otherwise. Its weight slot above then holds E4M3 codes: 1 byte
     * an element where every layer runs it in FP8, else the 16-bit size (a layer's codes fit). */
    GPU_PLAN_L_QKV_S, /* (3H) */
    GPU_PLAN_L_AO_S,  /* (H) */
    GPU_PLAN_L_FF1_S, /* (I) */
    GPU_PLAN_L_FF2_S, /* (H) */
    GPU_PLAN_L_N
} gpu_plan_layer_id_t;

typedef struct {
    const char *name;  /* short component name, as printed */
    const char *shape; /* human shape, as printed */
    size_t offset;     /* bytes from the arena's start */
    size_t bytes;      /* bytes used (the next slice starts at the aligned end) */
} gpu_plan_slice_t;

typedef struct {
    int token_budget, max_len, max_seqs;
    int elem_bytes; /* 2 for fp16 and bf16 */
    int big_ld;     /* elements between rows of GPU_PLAN_BIG: max(3H, F) */
    int bf16;       /* 1: bf16 storage, whose residual stream is kept in fp32 */
    int fp8;        /* 1: fp16 storage with the projections of gpu_fp8_runs in E4M3 */
    gpu_plan_slice_t slice[GPU_PLAN_N];
    size_t layer_off[GPU_PLAN_L_N];
    size_t layer_bytes;   /* stride between layers inside GPU_PLAN_LAYERS */
    size_t weights_bytes; /* slices WORD_EMB..FAMILY_W, aligned */
    size_t arena_bytes;   /* slices X..WORKSPACE, aligned */
    size_t total_bytes;   /* the one device allocation */
    size_t inputs_ids_off, inputs_pos_off, inputs_cu_off; /* inside GPU_PLAN_INPUTS */
} gpu_plan_t;

/* Fills *plan. max_len 0 = cfg->max_pos; max_seqs 0 = gpu_backend_max_seqs's rule.
 * precision: "fp16", "bf16", "fp8" or NULL (fp16). Returns 0, or -1 with a one-line err. */
int gpu_plan_compute(const gpu_model_config_t *cfg, int token_budget, int max_len, int max_seqs,
                     const char *precision, gpu_plan_t *plan, char *err, size_t errlen);

/* Byte offsets inside GPU_PLAN_BIG for the last layer's tail on the S [CLS] rows, once its
 * K/V in BIG are consumed (the rows themselves, their queries and attention outputs live in
 * CTX and X): bf16 only, the projection outputs (S, H) and fp32 residual rows (S, H); the FFN
 * inner (S, I); after it the head's fp32 input rows and pooled rows (S, H) reuse the FFN
 * region. Every part 256-byte aligned (cuBLASLt's algorithms assume it). */
typedef struct {
    size_t ctx, xr, ff, head_x, head_pooled, end;
} gpu_plan_last_t;
void gpu_plan_last_layer(int bf16, size_t seqs, size_t H, size_t I, gpu_plan_last_t *out);

/* "1.23 GiB", "456.0 MiB", "12.0 KiB", "17 B" into buf. */
const char *gpu_plan_human(size_t bytes, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
