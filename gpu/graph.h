/* The encoder as data: a family builds its forward pass as a short list of ops over a table of
 * tensors, and a backend runs ops, not models (ggml's design, as llama.cpp's graph builders).
 *
 * - A family (gpu/families/<name>.c, one row of the registry in gpu/families/families.c)
 *   turns a model's config and weights into a gpu_graph_t: embed, norm, linear (epilogue:
 *   bias, activation, GeGLU, residual), attention {full, sliding window, RoPE, disentangled
 *   c2p / p2c}, pool {cls, mean}. The head is linear ops on pooled rows.
 * - Precision is an enum on each op (fp32, fp16, bf16, fp8): the builder sets it per op (the
 *   head stays fp32; fp8 per projection as gpu_fp8_runs says). A backend answers
 *   supports_op for each op and init refuses a graph with one it lacks, naming it.
 * - Tensors are named, 2-D, row-major: weights (the model's fp32 values, a backend converts
 *   them to what it runs), consts (computed once at init by the graph's prelude ops from the
 *   weights: DeBERTa's relative embeddings through each layer's K and Q), activations
 *   (rows = the batch's tokens or its sequences) and the logits. Activation tensors are
 *   reused across layers (one "x", one "qkv"...): the memory plan, sized by the token budget,
 *   is computed from this table (gpu_graph_plan), once, at start-up; a backend that runs each
 *   op over the whole batch lets them share bytes where their live ranges do not meet
 *   (gpu_graph_place).
 * - An op reads and writes views: a tensor and a first column (so Q, K and V are column
 *   ranges of one fused qkv tensor). Rows: an op over token rows runs on the batch's tokens
 *   (packed, cu_seqlens as gpu/backend.h); one whose output has sequence rows makes one row
 *   per sequence (pool; attention whose queries are sequence rows attends from each
 *   sequence's first token only, which is how the last layer of a cls-pooled model skips
 *   every other row).
 * The CPU backend (gpu/cpu) is the reference of every op. */
#ifndef RECLASS_GPU_GRAPH_H
#define RECLASS_GPU_GRAPH_H

#include <stddef.h>

#include "gpu/model/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- precisions: the one list ---- */
typedef enum {
    GPU_PREC_FP32, /* fp32 storage and math (the CPU reference) */
    GPU_PREC_FP16, /* fp16 storage, fp32 accumulation */
    GPU_PREC_BF16, /* bf16 storage / operands, fp32 accumulation */
    GPU_PREC_FP8,  /* linear only: E4M3 operands, per-token x per-channel scales (fp8.h) */
    GPU_PREC_COUNT
} gpu_precision_t;

/* "fp32", "fp16", "bf16", "fp8". */
const char *gpu_precision_name(gpu_precision_t p);
/* name -> *out; 0, or -1 for a name not in the list. */
int gpu_precision_parse(const char *name, gpu_precision_t *out);

/* ---- tensors ---- */
typedef enum {
    GPU_TENSOR_WEIGHT, /* the model's values (data), fixed rows */
    GPU_TENSOR_CONST,  /* fixed rows, written once at init by the prelude ops */
    GPU_TENSOR_ACT,    /* activations, rows by the batch (rows_kind) */
    GPU_TENSOR_LOGITS, /* (seqs, num_labels) fp32: the graph's output */
} gpu_tensor_class_t;

typedef enum {
    GPU_ROWS_FIXED,  /* rows as given (weights, consts) */
    GPU_ROWS_TOKENS, /* one row per token of the batch: token_budget rows at most */
    GPU_ROWS_SEQS,   /* one row per sequence: max_seqs rows at most */
} gpu_rows_kind_t;

#define GPU_GRAPH_NAME 32

typedef struct {
    char name[GPU_GRAPH_NAME]; /* "x", "qkv", "l3.ff1.w", "rel_k.l3" */
    gpu_tensor_class_t cls;
    gpu_rows_kind_t rows_kind;
    int rows;          /* GPU_ROWS_FIXED: the rows; else 0 */
    int cols;          /* row length in elements (the ld of every view of it) */
    const float *data; /* GPU_TENSOR_WEIGHT: (rows, cols) fp32, the model's; NULL in a graph
                        * built from a config alone (plan-memory) */
    int fp32;          /* 1: kept in fp32 whatever the precision (norm params, biases of the
                        * head, the logits); a backend may keep more in fp32 */
} gpu_tensor_t;

/* A tensor's columns from col on; t < 0: no operand. */
typedef struct {
    int t;
    int col;
} gpu_view_t;

/* ---- ops ---- */
typedef enum {
    GPU_OP_EMBED,     /* out (tokens, E) = LN(word[ids] + pos[t] + type[0]); pos, type optional
                       * (w[2], w[3] < 0), t the token's position in its sequence */
    GPU_OP_NORM,      /* out = LayerNorm(src[0]) * g + b over n columns; out may be src[0] */
    GPU_OP_LINEAR,    /* out = epilogue(src[0] (rows, k) W^T + b), W (n, k) nn.Linear */
    GPU_OP_ATTENTION, /* out (q rows, heads * head_dim) = softmax(scores) V per sequence */
    GPU_OP_POOL,      /* out (seqs, n) = each sequence's first token row (cls) or mean row */
    GPU_OP_COUNT
} gpu_op_kind_t;

typedef enum {
    GPU_EPI_BIAS,     /* y = x W^T + b */
    GPU_EPI_ACT,      /* y = act(x W^T + b) */
    GPU_EPI_GLU,      /* z = x W^T + b (n = 2m); y (first m cols) = act(z[:m]) * z[m:]; the
                       * out view must have n columns: its last m are scratch */
    GPU_EPI_RESIDUAL, /* y += x W^T + b */
} gpu_epi_t;

typedef enum {
    GPU_POOL_CLS,  /* the first token */
    GPU_POOL_MEAN, /* the mean of the sequence's tokens */
} gpu_pool_t;

#define GPU_OP_SRC 3
#define GPU_OP_W   5

typedef struct {
    gpu_op_kind_t kind;
    gpu_precision_t prec;      /* what the op runs in; norms, attention and pool of a 16-bit graph
                                * run on 16-bit storage with fp32 math */
    char name[GPU_GRAPH_NAME]; /* "l3.qkv", "emb", "head.dense": for messages and plans */
    int layer;                 /* encoder layer, -1 outside the layers */
    gpu_view_t out;
    gpu_view_t src[GPU_OP_SRC]; /* LINEAR, NORM, POOL: src[0]; ATTENTION: q, k, v */
    int w[GPU_OP_W];            /* weight / const tensor ids, -1 none:
                                 * EMBED: word, pos, type, g, b
                                 * NORM: g, b (both < 0: plain copy, ModernBERT's layer 0)
                                 * LINEAR: weight (n, k), bias (n) or -1
                                 * ATTENTION: c2p keys (2 span, H), p2c queries (2 span, H) */
    int n, k;                   /* LINEAR: out features, in features; NORM, POOL: columns;
                                 * EMBED: E */
    float eps;                  /* EMBED, NORM */
    gpu_epi_t epi;              /* LINEAR */
    gpu_act_t act;              /* LINEAR with GPU_EPI_ACT / GPU_EPI_GLU */
    gpu_pool_t pool;            /* POOL */
    /* ATTENTION: scores = q k^T / scale (+ c2p + p2c, each / scale), scale = sqrt(head_dim *
     * scale_factor); keys |i - j| <= window only when window > 0; RoPE on q and k (positions
     * from 0 in each sequence) when rope_theta > 0. Disentangled (w[0] / w[1] set): with
     * r = gpu_op_rel_row(op, i - j) (by rel_span, rel_buckets, rel_max_pos below), c2p adds
     * q_i . pk[r] / scale and p2c adds k_j . pq[r] / scale
     * (HF's two gathers come to this; RoPE and window are 0 then). The reference:
     * gpu/cpu/cpu_attention.c, tests/lib/ref_attention.c. */
    int heads, head_dim;
    int window;
    float rope_theta;
    int scale_factor; /* 1, or 1 + c2p + p2c */
    int rel_span, rel_buckets, rel_max_pos;
} gpu_op_t;

/* The row of the relative embeddings that an ATTENTION op reads for query i and key j
 * (rel = i - j), DeBERTa's rule: Hugging Face's make_log_bucket_position in fp32 (the distance
 * itself when rel_buckets is 0), clamped to the op's rows: clamp(bucket + rel_span, 0,
 * 2 rel_span - 1). Every backend and reference reads the rule from here. */
int gpu_op_rel_row(const gpu_op_t *op, int rel);

/* An op in words for messages: "l3.attn: attention (window 64, rope) fp16". Returns buf. */
const char *gpu_op_describe(const gpu_op_t *op, char *buf, size_t len);
/* "embed", "norm", "linear", "attention", "pool". */
const char *gpu_op_kind_name(gpu_op_kind_t k);

/* ---- the graph ---- */
typedef struct {
    gpu_model_config_t cfg; /* a copy (id2label not owned: NULL) */
    gpu_precision_t prec;   /* the precision asked for; ops carry their own */
    int n_tensors;
    gpu_tensor_t *tensor; /* (n_tensors) */
    int n_prelude;        /* ops run once at init, writing the const tensors */
    gpu_op_t *prelude;    /* (n_prelude) */
    int n_ops;            /* ops run on every batch, in order */
    gpu_op_t *op;         /* (n_ops) */
    int logits;           /* tensor id of the logits */
    int cap_tensors, cap_ops, cap_prelude;
} gpu_graph_t;

/* The forward pass of model (cfg, weights; w may be NULL for a graph that only plans) at
 * precision prec, by its family's builder (gpu/families). Every op runs prec, but the head's
 * linears (fp32: tiny, and they decide the argmax) and, for prec fp8, every op that is not a
 * projection gpu_fp8_runs names: those run `storage` (fp32 on the CPU reference, fp16 on
 * CUDA; ignored unless prec is fp8). COMMON_OK, or err's code (COMMON_FATAL out of memory,
 * COMMON_BUG a builder past its room). */
common_status_t gpu_graph_build(const gpu_model_config_t *cfg, const gpu_model_weights_t *w,
                                gpu_precision_t prec, gpu_precision_t storage, gpu_graph_t **out,
                                common_err_t *err);
void gpu_graph_free(gpu_graph_t *g);

/* Rows of tensor t for a batch capacity (token_budget tokens, max_seqs sequences). */
size_t gpu_graph_rows(const gpu_graph_t *g, int t, int token_budget, int max_seqs);

/* 1 when op i of the batch ops is a LayerNorm whose whole rows the next op, a linear at fp8,
 * reads as its input: that norm follows gpu_fp8_norm_row's exact sequence on every backend (the
 * CPU reference and CUDA's cuda_fp8_add_ln, which writes the linear's E4M3 input too). */
int gpu_graph_norm_feeds_fp8(const gpu_graph_t *g, int i);

/* The static input scale of op i of the batch ops, a linear at fp8 whose whole input rows op
 * i - 1 writes as act(op i - 2's LayerNorm rows W^T + b) (BERT's FFN-out): gpu_fp8_act_bound_scale
 * of those weights, or 1 in a graph without weight data (plan-memory). 0 for any other op: its
 * input is quantized per token (fp8.h). Every backend quantizes such an input with this scale,
 * so the producer may write the E4M3 codes itself (CUDA's FFN-in GEMM). */
float gpu_graph_fp8_static_scale(const gpu_graph_t *g, int i);

/* Whether a backend runs an op: its supports_op (gpu_backend_ops_t). The first op (prelude
 * included) it lacks, named in err: "the cuda backend lacks l0.attn: attention
 * (disentangled c2p p2c) bf16" (COMMON_USAGE: another precision or backend may run it);
 * COMMON_OK when it runs them all. */
common_status_t gpu_graph_check(const gpu_graph_t *g, const char *backend,
                                int (*supports_op)(const gpu_graph_t *g, const gpu_op_t *op),
                                common_err_t *err);

/* ---- the memory plan, from the tensor table ---- */
#define GPU_GRAPH_ALIGN 256 /* every slice starts on this boundary */

typedef struct {
    size_t act_bytes; /* bytes of an activation element (4 fp32, 2 for 16-bit storage) */
    int token_budget; /* tokens per batch */
    int max_seqs;     /* sequences per batch (gpu_backend_max_seqs) */
} gpu_graph_plan_opts_t;

typedef struct {
    size_t *offset;       /* (n_tensors) bytes from the arena's start; weights: 0 */
    size_t *bytes;        /* (n_tensors) consts, activations, logits; weights: 0 */
    size_t *op_bytes;     /* (n_ops) bytes of the tensors an op writes first (its share) */
    size_t arena_bytes;   /* consts + activations + logits, each aligned */
    size_t weights_bytes; /* the weights at the precision of the ops that read them */
} gpu_graph_plan_t;

/* Lays every non-weight tensor out once (in table order, GPU_GRAPH_ALIGN apart, none sharing
 * bytes: the CPU backend runs chunks of sequences on threads, each chunk through the whole
 * op list on its own rows): the arena a backend allocates at init. 0, or -1 out of memory.
 * gpu_graph_plan_free releases it. */
int gpu_graph_plan(const gpu_graph_t *g, const gpu_graph_plan_opts_t *o, gpu_graph_plan_t *plan);
void gpu_graph_plan_free(gpu_graph_plan_t *plan);

/* For a backend that runs each op over the whole batch, one op after another (CUDA: one
 * stream): offsets for the activation tensors (class GPU_TENSOR_ACT, bytes[t] > 0, offset[t]
 * set to (size_t)-1 on entry) in one region of *total bytes, from 0, GPU_GRAPH_ALIGN apart,
 * two sharing bytes only when no op of the batch list runs while both are live. A tensor is
 * live from an op that writes it leaving no older value to read (the whole of what is read
 * later) to the last op that touches it before such a write: a buffer is reused once its last
 * reader ran; an activation a prelude op touches keeps bytes of its own. Other offsets are
 * left as they are. 0, or -1 out of memory. */
int gpu_graph_place(const gpu_graph_t *g, const size_t *bytes, size_t *offset, size_t *total);

#ifdef __cplusplus
}
#endif
#endif
