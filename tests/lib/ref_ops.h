/* fp32 building blocks of the BERT encoder, run on the CPU, for tests: the CPU backend's
 * fused kernels must agree with them, and the CUDA backend's tests compare each kernel
 * against them. All matrices are row-major; a batch is packed,
 * padding-free, with prefix offsets cu_seqlens (n_seqs + 1) as in gpu/backend.h. */
#ifndef RECLASS_TESTS_LIB_REF_OPS_H
#define RECLASS_TESTS_LIB_REF_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/graph.h"
#include "gpu/model/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out (n_tokens, E) = LayerNorm(word[ids] + pos[0..len-1 per sequence] + type[0]) (E the
 * model's emb_size; gpu_ref_forward projects to H where E != H). */
void gpu_ref_embed_ln(const gpu_model_t *m, const int32_t *ids, const int32_t *cu_seqlens,
                      int n_seqs, float *out);

/* y (n, out) = x (n, in) W^T + b, W (out, in) as nn.Linear; b may be NULL. OpenBLAS sgemm. */
void gpu_ref_linear(const float *x, const float *w, const float *b, int n, int in, int out,
                    float *y);

/* Exact (erf) GELU in place, as HF's "gelu". */
void gpu_ref_gelu(float *x, size_t n);

/* act in place: HF's gelu, gelu_new (tanh form), relu, or tanh. */
void gpu_ref_act(float *x, size_t n, gpu_act_t act);

/* x (n, H) = LayerNorm(x + res) with gamma g, beta b (H). */
void gpu_ref_add_ln(float *x, const float *res, const float *g, const float *b, int n, int H,
                    float eps);

/* out (n_tokens, heads*head_dim) = softmax(Q K^T / sqrt(head_dim)) V within each sequence.
 * q, k, v are (n_tokens, ld) row-major with head h at columns h*head_dim.. (so a fused
 * (n_tokens, 3H) QKV buffer is passed as q = qkv, k = qkv + H, v = qkv + 2H, ld = 3H). */
void gpu_ref_attention(const float *q, const float *k, const float *v, int ld,
                       const int32_t *cu_seqlens, int n_seqs, int heads, int head_dim, float *out);

/* The graph's attention op (ref_attention.c) for one sequence: q rows nq (len, or 1: the
 * first token), k, v rows len; RoPE when rope_theta > 0, keys |i - j| <= window when window
 * > 0, DeBERTa's c2p (pk) / p2c (pq) at gpu_op_rel_row(rel, i - j) when given, scores /
 * sqrt(head_dim * scale_factor). out (nq, heads * head_dim) rows ldo apart. */
typedef struct {
    int heads, head_dim, window, scale_factor;
    float rope_theta;
    const float *pk, *pq; /* (2 span, H) or NULL */
    const gpu_op_t *rel;  /* the op whose relative rows they are, with pk / pq */
} gpu_ref_attn_t;
void gpu_ref_attention_op(const gpu_ref_attn_t *a, const float *q, int ldq, int nq, const float *k,
                          const float *v, int ldkv, int len, float *out, int ldo);

/* logits (n_seqs, L) = cls(head_act(pool(hidden[first token of each sequence]))). */
void gpu_ref_pool_classify(const gpu_model_t *m, const float *hidden, const int32_t *cu_seqlens,
                           int n_seqs, float *logits);

/* The whole classifier, composed of the ops above (the slow, obvious reference the fast
 * backends are tested against). logits (n_seqs, L). Returns 0, or -1 when out of memory or
 * for ModernBERT and DeBERTa, whose layers it does not compose. */
int gpu_ref_forward(const gpu_model_t *m, const int32_t *ids, const int32_t *cu_seqlens, int n_seqs,
                    float *logits);

/* x rounded to the nearest fp16 (ties to even); |x| stays far below fp16's 65504. */
float gpu_ref_fp16_round(float x);

/* y (rows, cols): the operands x of a linear op at prec as it multiplies them, rows rounded to
 * fp16 / bf16 / E4M3; FP8 quantizes the rows as the backend stores them (storage fp16 rounds
 * them first). */
void gpu_ref_round_rows(gpu_precision_t prec, gpu_precision_t storage, const float *x, int rows,
                        int cols, float *y);

#ifdef __cplusplus
}
#endif
#endif
