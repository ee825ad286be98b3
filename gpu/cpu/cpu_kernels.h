/* The fused fp32 kernels of the CPU backend: each does in one pass over a row what the
 * reference ops (tests/lib/ref_ops.h) do in several, and must agree with them to float rounding.
 * Loops are shaped so the compiler vectorises them without -ffast-math (reductions go
 * through explicit lane arrays). Single-threaded: the backend splits work by rows. */
#ifndef RECLASS_GPU_CPU_KERNELS_H
#define RECLASS_GPU_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/model/model.h"

/* out (len, E) = LayerNorm(word[ids] + pos[0..] + type[0]) for one sequence's tokens (E the
 * model's emb_size: H but for ELECTRA, whose projection to H the caller runs). */
void gpu_cpu_embed_ln(const gpu_model_t *m, const int32_t *ids, int len, float *out);

/* out (len, E), rows ldo apart, = LayerNorm(word[ids] + pos[0..] + type) * g + b for one
 * sequence's tokens; pos and type may be NULL (no position table, no token types). */
void gpu_cpu_embed_rows(const float *word, const float *pos, const float *type, const float *g,
                        const float *b, int E, float eps, const int32_t *ids, int len, float *out,
                        int ldo);

/* x (n, H) = LayerNorm(x) in place: the projection before it already added its bias and the
 * residual in its epilogue (gpu_cpu_gemm, GPU_CPU_EPI_ACCUM). */
void gpu_cpu_ln(float *x, const float *g, const float *b, int n, int H, float eps);

/* y (n, cols) += bias (cols), rows ld apart. */
void gpu_cpu_bias(float *y, int ld, const float *bias, int n, int cols);

/* Every row of y (n, cols), rows ld apart, = bias: C of an sgemm with beta 1, so the bias
 * costs no pass of its own. */
void gpu_cpu_fill_rows(float *y, int ld, const float *bias, int n, int cols);

/* y (n, cols) = gelu(y + bias), erf GELU through a rational erf within 1e-7 of erff
 * (AVX-512 / AVX2 / scalar by the CPU). */
void gpu_cpu_bias_gelu(float *y, const float *bias, int n, int cols);

/* tanh in place (pooler). */
void gpu_cpu_tanh(float *x, size_t n);

/* y (n, cols), rows ld apart, = act(y) in place: the activations no GEMM epilogue applies
 * (the tanh GELU of "gelu_new", the heads' tanh / ReLU / GELU). Scalar: they run on
 * (sequences, H) head rows, or on FFN rows only for gelu_new models. */
void gpu_cpu_act(float *y, int ld, int n, int cols, gpu_act_t act);

/* Attention of one sequence, all heads. q rows (nq, ldq) query the keys/values of the whole
 * sequence: k, v (len, ldkv). nq is len, or 1 when only the first token's output is needed.
 * out (nq, heads*head_dim) rows ldo apart. scratch holds
 * gpu_cpu_attention_scratch_floats(len, head_dim) floats, 64-byte aligned. */
void gpu_cpu_attention_seq(const float *q, int ldq, int nq, const float *k, const float *v,
                           int ldkv, int len, int heads, int head_dim, float *out, int ldo,
                           float *scratch);

/* Floats of attention scratch for sequences up to max_len. */
size_t gpu_cpu_attention_scratch_floats(int max_len, int head_dim);

#endif
