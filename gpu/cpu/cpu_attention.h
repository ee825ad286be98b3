/* The CPU backend's attention op (cpu_attention.c). */
#ifndef RECLASS_GPU_CPU_ATTENTION_H
#define RECLASS_GPU_CPU_ATTENTION_H

#include <stddef.h>

#include "gpu/graph.h"

/* Floats of per-thread scratch the attention op needs for sequences up to max_len. */
size_t gpu_cpu_attn_scratch_floats(const gpu_op_t *op, int max_len);

/* Attention op of one sequence: q rows (nq: len, or 1 for the first token only), k, v rows
 * (len), rows ldq / ldkv apart; RoPE (rope_theta > 0) rotates q and k in place first; pk /
 * pq: DeBERTa's relative keys / queries (2 span, H) or NULL. out (nq, heads * head_dim). */
void gpu_cpu_attn_seq(const gpu_op_t *op, float *q, int ldq, int nq, float *k, const float *v,
                      int ldkv, int len, const float *pk, const float *pq, float *out, int ldo,
                      float *scratch);

#endif
